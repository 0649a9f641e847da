/*
 * target.c — the helpers of the flush-target contract (store/target.h)
 * that every target's engine calls: its instance directory under a root,
 * the checkpoint id of a stage directory, and a restore's first steps.
 * They sit with the contract, below the engines (store/memory,
 * store/rocksdb, store/table), so no engine calls up into the registry
 * above it (store/registry.c) for them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fs.h"
#include "store/target.h"

int sfs_target_stage_id(const char *dir, uint64_t *id)
{
	const char *b = strrchr(dir, '/');
	char *end;

	b = b ? b + 1 : dir;
	if (b[0] != 'b' || b[1] < '0' || b[1] > '9')
		return 0;
	errno = 0;
	*id = strtoull(b + 1, &end, 10);
	return !*end && !errno && *id;
}

int sfs_target_instance_dir(const char *root, uint32_t worker, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/w%u", root, worker);

	if (n < 0 || (size_t)n >= len)
		return sfs__err(SFS_EUSAGE, "instance directory %s/w%u: path too long", root, worker);
	return 0;
}

int sfs_target_instance_reset(const char *dir)
{
	int rc = sfs_rmtree(dir);

	return rc ? rc : sfs_mkdirs(dir, 0700);	/* a data directory: private */
}

int sfs_target_instance_put(const struct sfs_target_env *e, uint32_t worker,
			    int (*put)(void *arg, const char *dir), void *arg, char *dir,
			    size_t len)
{
	int rc;

	if ((rc = sfs_target_instance_dir(e->root, worker, dir, len)) ||
	    (rc = sfs_target_instance_reset(dir)))
		return rc;
	return put(arg, dir);
}
