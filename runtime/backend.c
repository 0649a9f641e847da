/*
 * backend.c — the table of keyed-state backends `sfs run --backend NAME`
 * chooses from (runtime/backend.h).
 */
#include <string.h>

#include "runtime/backend.h"

/*
 * By name.  `rocksdb` is sfs over the `rocksdb` flush target: the same
 * adapter as `memory` (runtime/backend_memory.c: the sfs state API over the
 * segment's target — buffers, value cache, compactor); what differs is the
 * target the segment was created for (sh_backend = "rocksdb" or "table", set by the
 * supervisor), not the code a worker runs.
 */
static const struct {
	const char *name;
	const struct rt_backend_ops *ops;
} rt_backends[] = {
	{ "memory", &rt_backend_memory },
	{ "rocksdb", &rt_backend_memory },
	{ "table", &rt_backend_memory },
	{ "rocksdb-direct", &rt_backend_rocksdb_direct },
};

const struct rt_backend_ops *rt_backend_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(rt_backends) / sizeof(rt_backends[0]); i++)
		if (strcmp(rt_backends[i].name, name) == 0)
			return rt_backends[i].ops;
	return NULL;
}
