/*
 * backends.c — what the supervisor knows of each keyed-state backend of
 * `sfs run --backend NAME`: who owns its files on disk (restore, rescale,
 * a fresh start: store/target.h, "The instance on disk") and which flush
 * target its compactor runs.  The workers' side of the same names is the
 * runtime's (runtime/backend.c: rt_backend_find, the state calls).
 *
 * `memory`, `rocksdb` and `table` are sfs over that flush target (the
 * workers run one adapter, runtime/backend_memory.c; what differs is the
 * target the segment is created for).  `rocksdb-direct` is the baseline
 * (baseline/): its workers write RocksDB themselves, so it has no flush
 * target, only the files half of the contract, here (its rescale is the
 * baseline's rt_rocksdb_direct_rebuild, which knows its key layout).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "baseline/rocksdb_direct.h"
#include "common/err.h"
#include "common/fs.h"
#include "runtime/backend.h"
#include "runtime/util.h"
#include "store/memory/memory.h"
#include "store/rocksdb/rocksdb.h"
#include "store/table/table.h"
#include "store/target.h"
#include "supervisor/sup.h"

/* ---- rocksdb-direct: the files half of the contract (store/target.h) ---- */

static int direct_root(const char *data_dir, int node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/rocksdb-direct", data_dir);

	(void)node;	/* one instance per worker, whatever its node */
	return n < 0 || (size_t)n >= len ? sfs__err(SFS_EUSAGE, "%s: path too long", data_dir) : 0;
}

/* The checkpoint's files are the instance: the worker opens it as it is. */
static int direct_restore(const struct sfs_target_env *e, uint32_t worker,
			  int (*put)(void *arg, const char *dir), void *arg)
{
	char dir[PATH_MAX];

	return sfs_target_instance_put(e, worker, put, arg, dir, sizeof(dir));
}

static int direct_rebuild(const struct sfs_target_env *e, uint32_t worker,
			  const char *const *src, unsigned n, uint32_t kg_lo, uint32_t kg_hi)
{
	char dir[PATH_MAX];
	int rc;

	if ((rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir))) ||
	    (rc = sfs_rmtree(dir)))
		return rc;
	rc = rt_rocksdb_direct_rebuild(src, n, dir, kg_lo, kg_hi);
	/* the runtime's message becomes the supervisor's */
	return rc ? sfs__err(rc, "%s", rt_last_error()) : 0;
}

static const struct sfs_target_ops direct_files = {
	.name = "rocksdb-direct",
	.instance_root = direct_root,
	.restore = direct_restore,
	.rebuild = direct_rebuild,
};

/* By name.  The supervisor asks this table, never a backend's name. */
static const struct {
	const char *name;
	const struct sfs_target_ops *files;
} sup_backends[] = {
	{ "memory", &sfs_target_memory },
	{ "rocksdb", &sfs_target_rocksdb },
	{ "table", &sfs_target_table },
	{ "rocksdb-direct", &direct_files },
};

const struct sfs_target_ops *sup_backend_files(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(sup_backends) / sizeof(sup_backends[0]); i++)
		if (strcmp(sup_backends[i].name, name) == 0)
			return sup_backends[i].files;
	return NULL;
}

const struct sfs_target_ops *sup_backend_target(const char *name)
{
	const struct sfs_target_ops *f = sup_backend_files(name);

	/* a flush target's entries are the whole contract; the baseline's only
	 * the files half (no writer: the compactor has nothing to flush) */
	return f && f->open ? f : NULL;
}

const char *sup_backend_names(void)
{
	static char buf[128];

	if (!buf[0])
		for (size_t i = 0; i < sizeof(sup_backends) / sizeof(sup_backends[0]); i++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? ", " : "",
				 sup_backends[i].name);
	return buf;
}
