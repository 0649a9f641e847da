/*
 * snapshot.c — a version staged for a checkpoint (store/target.h:
 * snapshot, files): the instance at the last commit, as RocksDB's
 * checkpoint of it in the stage directory, its SSTs linked in
 * SFS_STAGE_SHARED; the same stage then kept for a later pin
 * (rollback.c).  Synchronous: no snapshot_begin.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb_int.h"

/*
 * A checkpoint's input: RocksDB's checkpoint of the instance at the last
 * commit (every buffer up to it is in SST files, the memtables are empty),
 * i.e. hard links of the live SSTs (in @dir/shared: immutable) plus copies
 * of MANIFEST, CURRENT and OPTIONS in @dir.  The checkpointer links only
 * the SSTs that are new
 * since the last checkpoint into its storage.  RocksDB's checkpoint
 * disables file deletions around itself and re-enables them only down to
 * our own disable: deletion windows are unaffected.
 */
int sfs__rdbt_snapshot(struct sfs_target_writer *w, const char *dir)
{
	int rc;

	if (!w->db)
		return sfs__err(-EIO, "rocksdb target %s: no open instance to snapshot", w->path);
	if (!w->stage_ready) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%s", dir);
		if (strrchr(parent, '/'))
			*strrchr(parent, '/') = '\0';
		if ((rc = sfs_mkdirs(parent, 0700)))
			return rc;
		w->stage_ready = 1;
	}
	sfs__rdbt_rm_tree(dir);	/* a killed compactor's attempt */
	if ((rc = sfs_rdb_checkpoint(w->db, dir, SFS_STAGE_SHARED, "rocksdb target", w->path)))
		return rc;
	sfs__rdbt_cand_add(w, dir);
	return 0;
}

int sfs__rdbt_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path),
		      void *arg)
{
	const rocksdb_livefiles_t *lf;
	char p[PATH_MAX * 2];
	int rc = 0;

	if (!w->db)
		return sfs__err(-EIO, "rocksdb target %s: closed after a failed commit (reopened "
				"at the next retry)", w->path);
	lf = rocksdb_livefiles(w->db);
	if (!lf)
		return 0;
	for (int i = 0; rc == 0 && i < rocksdb_livefiles_count(lf); i++) {
		snprintf(p, sizeof(p), "%s%s", w->path, rocksdb_livefiles_name(lf, i));
		rc = fn(arg, p);
	}
	rocksdb_livefiles_destroy(lf);
	return rc;
}
