/*
 * queries.c — the queries compiled into sfs (query/qN.c), by name
 * (query/queries.h).
 */
#include <string.h>

#include "query/queries.h"

extern const struct rt_query rt_q3, rt_q4, rt_q5, rt_q7, rt_q8, rt_q9, rt_q11, rt_q12, rt_q15,
	rt_q17, rt_q18, rt_q19, rt_q20;

const struct rt_query *const rt_queries[] = {
	&rt_q3, &rt_q4, &rt_q5, &rt_q7, &rt_q8, &rt_q9, &rt_q11, &rt_q12, &rt_q15,
	&rt_q17, &rt_q18, &rt_q19, &rt_q20, NULL,
};

const struct rt_query *rt_query_find(const char *name)
{
	for (unsigned i = 0; rt_queries[i]; i++)
		if (!strcmp(rt_queries[i]->name, name))
			return rt_queries[i];
	return NULL;
}
