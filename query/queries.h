/*
 * queries.h — the queries compiled into sfs (query/qN.c), by name: the
 * table lives with the queries, so the runtime names none of them (its
 * engine is handed rt_query_find by the worker's main, runtime/engine.h).
 */
#ifndef SFS_QUERY_QUERIES_H
#define SFS_QUERY_QUERIES_H

#include "runtime/query.h"

/* Every query compiled in, NULL-terminated; and one by name (NULL if
 * none). */
extern const struct rt_query *const rt_queries[];
const struct rt_query *rt_query_find(const char *name);

#endif
