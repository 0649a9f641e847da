/*
 * backend.c — the table of keyed-state backends `sfs run --backend NAME`
 * chooses from (runtime/backend.h).
 */
#include <stdio.h>
#include <string.h>

#include "runtime/backend.h"
#include "store/memory/memory.h"
#include "store/rocksdb/rocksdb.h"
#include "store/table/table.h"
#include "store/target.h"

/*
 * By name.  `rocksdb` is sfs over the `rocksdb` flush target: the same
 * adapter as `memory` (runtime/backend_memory.c: the sfs state API over the
 * segment's target — buffers, value cache, compactor); what differs is the
 * target the segment was created for (sh_backend = "rocksdb" or "table", set by the
 * supervisor), not the code a worker runs.
 */
/*
 * @files: who owns the backend's files on disk (restore, rescale, a fresh
 * start: store/target.h, "The instance on disk") — the flush target of
 * that name for sfs, the baseline's own entries for rocksdb-direct.  The
 * supervisor asks this table, never a backend's name.
 */
static const struct {
	const char *name;
	const struct rt_backend_ops *ops;
	const struct sfs_target_ops *files;
} rt_backends[] = {
	{ "memory", &rt_backend_memory, &sfs_target_memory },
	{ "rocksdb", &rt_backend_memory, &sfs_target_rocksdb },
	{ "table", &rt_backend_memory, &sfs_target_table },
	{ "rocksdb-direct", &rt_backend_rocksdb_direct, &rt_rocksdb_direct_files },
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

const struct sfs_target_ops *rt_backend_files(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(rt_backends) / sizeof(rt_backends[0]); i++)
		if (strcmp(rt_backends[i].name, name) == 0)
			return rt_backends[i].files;
	return NULL;
}

const struct sfs_target_ops *rt_backend_target(const char *name)
{
	const struct sfs_target_ops *f = rt_backend_files(name);

	/* a flush target's entries are the whole contract; the baseline's only
	 * the files half (no writer: the compactor has nothing to flush) */
	return f && f->open ? f : NULL;
}

const char *rt_backend_names(void)
{
	static char buf[128];

	if (!buf[0])
		for (size_t i = 0; i < sizeof(rt_backends) / sizeof(rt_backends[0]); i++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? ", " : "",
				 rt_backends[i].name);
	return buf;
}
