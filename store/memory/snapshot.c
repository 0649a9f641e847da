/*
 * snapshot.c — the memory target's checkpoint (store/target.h: snapshot,
 * snapshot_begin, snapshot_poll): the whole store dumped into the stage
 * (memdump.c), synchronously or from a frozen version by a thread while
 * newer buffers flush, and the wait a semispace copy makes for that dump.
 * No pin or rollback: the store lives in memory only.
 *
 * Next: admin.c.
 */
#include <stdio.h>

#include "common/fs.h"
#include "store/memory/memory_int.h"

static int stage_dir(const char *dir, char *path, size_t n)
{
	/* the stage's parents exist after the first checkpoint: one mkdir(2) */
	int rc = sfs_mkdirs(dir, 0700);

	if (rc)
		return rc;
	snprintf(path, n, "%.580s/store.dump", dir);
	return 0;
}

/* The checkpoint of the heap baseline: the whole store, every time.  The
 * synchronous form (the flush waits); the compactor uses the next two. */
int sfs__mem_snapshot(struct sfs_target_writer *w, const char *dir)
{
	char path[600];
	uint64_t recs;
	int rc = stage_dir(dir, path, sizeof(path));

	return rc ? rc : sfs_mdump_write(w->m.ms, w->m.ms->ms_worker, path, &recs);
}

/* The same dump of a frozen version, written by a thread while newer
 * buffers flush (store/memory/memdump.h). */
int sfs__mem_snapshot_begin(struct sfs_target_writer *w, const char *dir, uint64_t id)
{
	char path[600];
	int rc;

	if (w->m.ms->ms_dump_list && w->m.ms->ms_dump_id != id)
		return SFS_ERUNNING;	/* before any mkdir: the older one finishes first */
	rc = stage_dir(dir, path, sizeof(path));
	return rc ? rc : sfs_mdump_start(&w->m, &w->dj, id, path);
}

int sfs__mem_snapshot_poll(struct sfs_target_writer *w, uint64_t *id, uint64_t *seq)
{
	return sfs_mdump_poll(&w->m, &w->dj, id, seq);
}

int sfs__mem_pin_wait(void *arg)
{
	struct sfs_target_writer *w = arg;

	return sfs_mdump_wait(&w->m, &w->dj);
}
