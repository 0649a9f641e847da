/*
 * backend.c — the keyed-state backends a worker runs, by the name `sfs run
 * --backend NAME` gives (runtime/backend.h).  `memory`, `rocksdb` and
 * `table` are sfs over that flush target: the same adapter
 * (runtime/backend_memory.c: the sfs state API — buffers, value cache,
 * compactor); what differs is the target the segment was created for, not
 * the code a worker runs.  What the supervisor knows of each (files on
 * disk, flush targets) is supervisor/backends.c.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/backend.h"

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

const char *rt_held_name(unsigned why)
{
	static const char *const names[RT_HELD_MAX] = {
		[RT_HELD_NONE] = "not held",
		[RT_HELD_BUFFERS] = "sfs write buffers full, waiting for the compactor",
		[RT_HELD_RDB_STOP] = "RocksDB write stop",
		[RT_HELD_RDB_DELAY] = "RocksDB write delay",
	};

	return why < RT_HELD_MAX ? names[why] : "?";
}
