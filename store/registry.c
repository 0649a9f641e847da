/*
 * registry.c — the table of flush targets: the one place that names them.
 * Each target lives in a folder of its own (store/memory, store/rocksdb,
 * store/table) and exports one ops table (store/target.h); adding a target
 * is a folder and a line in `builtin` below.  Tests and plugins add theirs
 * at run time with sfs_target_register.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "store/memory/memory.h"
#ifndef SFS_NO_ROCKSDB
#include "store/rocksdb/rocksdb.h"
#endif
#include "store/table/table.h"
#include "store/target.h"

/* SFS_NO_ROCKSDB: a build that links no RocksDB (the JNI library a JVM
 * loads beside Flink's own RocksDB build, flink/jni/): the rocksdb target
 * is then unknown there, and a group on it is refused at open by name. */
static const struct sfs_target_ops *const builtin[] = { &sfs_target_memory, &sfs_target_table,
#ifndef SFS_NO_ROCKSDB
							&sfs_target_rocksdb
#endif
};

/* Registered at run time: process-local, written before the lookups that
 * should see them (a test's or a plugin's start), so no lock. */
#define EXTRA_MAX 8
static const struct sfs_target_ops *extra[EXTRA_MAX];
static unsigned nextra;

const struct sfs_target_ops *sfs_target_find(const char *name)
{
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (strcmp(builtin[i]->name, name) == 0)
			return builtin[i];
	for (unsigned i = 0; i < nextra; i++)
		if (strcmp(extra[i]->name, name) == 0)
			return extra[i];
	return NULL;
}

int sfs_target_register(const struct sfs_target_ops *ops)
{
	if (!ops || !ops->name || !ops->name[0])
		return sfs__err(SFS_EUSAGE, "a flush target needs a name");
	if (sfs_target_find(ops->name))
		return sfs__err(SFS_EUSAGE, "flush target '%s' is registered already", ops->name);
	if (nextra == EXTRA_MAX)
		return sfs__err(SFS_EFULL, "flush target '%s': %u registered already", ops->name,
				EXTRA_MAX);
	extra[nextra++] = ops;
	return 0;
}

const struct sfs_target_ops *sfs_target_of(const struct sfs_seg *s)
{
	const char *b = s->hdr->sh_backend;

	return sfs_target_find(b[0] ? b : sfs_target_memory.name);
}

const struct sfs_target_read_ops *sfs_target_read_of(const struct sfs_seg *s)
{
	const struct sfs_target_ops *t = sfs_target_of(s);

	return t ? &t->rd : NULL;
}
