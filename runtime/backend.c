/*
 * backend.c — the table of keyed-state backends `sfs run --backend NAME`
 * chooses from (runtime/backend.h).
 */
#include <string.h>

#include "runtime/backend.h"

static const struct rt_backend_ops *const rt_backends[] = {
	&rt_backend_memory,
	&rt_backend_rocksdb_direct,
};

const struct rt_backend_ops *rt_backend_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(rt_backends) / sizeof(rt_backends[0]); i++)
		if (strcmp(rt_backends[i]->name, name) == 0)
			return rt_backends[i];
	return NULL;
}
