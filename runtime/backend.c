/*
 * backend.c — the keyed-state backends a worker runs, by the name `sfs run
 * --backend NAME` gives (runtime/backend.h).  `memory`, `rocksdb` and
 * `table` are sfs over that flush target: the same adapter
 * (runtime/backend_memory.c: the sfs state API — buffers, value cache,
 * compactor); what differs is the target the segment was created for, not
 * the code a worker runs.  Backends that live above the runtime join at
 * run time (rt_backend_register), as flush targets join store/registry.c's
 * table: the rocksdb-direct baseline (baseline/), registered by the
 * binaries that offer it.  What the supervisor knows of each (files on
 * disk, flush targets) is supervisor/backends.c.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/util.h"

static const struct {
	const char *name;
	const struct rt_backend_ops *ops;
} rt_backends[] = {
	{ "memory", &rt_backend_memory },
	{ "rocksdb", &rt_backend_memory },
	{ "table", &rt_backend_memory },
};

/* Registered at run time: process-local, written before the lookups that
 * should see them (a binary's main, a test's setup), so no lock. */
#define EXTRA_MAX 8
static const struct rt_backend_ops *extra[EXTRA_MAX];
static unsigned nextra;

const struct rt_backend_ops *rt_backend_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(rt_backends) / sizeof(rt_backends[0]); i++)
		if (strcmp(rt_backends[i].name, name) == 0)
			return rt_backends[i].ops;
	for (unsigned i = 0; i < nextra; i++)
		if (strcmp(extra[i]->name, name) == 0)
			return extra[i];
	return NULL;
}

int rt_backend_register(const struct rt_backend_ops *ops)
{
	const struct rt_backend_ops *had;

	if (!ops || !ops->name || !ops->name[0])
		return rt_err(SFS_EUSAGE, "a backend needs a name");
	if ((had = rt_backend_find(ops->name)))
		return had == ops ? 0 :
			rt_err(SFS_EUSAGE, "backend '%s' is registered already", ops->name);
	if (nextra == EXTRA_MAX)
		return rt_err(SFS_EFULL, "backend '%s': %u registered already", ops->name,
			      EXTRA_MAX);
	extra[nextra++] = ops;
	return 0;
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
