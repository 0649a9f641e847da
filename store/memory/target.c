/*
 * target.c — the `memory` flush target (store/target.h) as a whole: its
 * ops table, which names the file of store/memory/ that holds each op of
 * the contract, and the writer's life (open, busy, files, close).  Thin
 * adapters from the contract to the store itself (memory.c and the files
 * it names) and its checkpoint dump (memdump.c).  The instance on disk
 * holds only what a restore puts there: the dumps to load
 * (<root>/w<N>/store.dump, or r<lo>-<hi>.<n>.dump for a rescale).
 *
 * The floor plan (the writer's handle and cross-file functions:
 * memory_int.h):
 *   open, busy, files, close     target.c     a writer's life
 *   apply, commit, ttl           write.c      a sealed buffer into the store:
 *                                             values, counters, map runs
 *   snapshot, snapshot_begin, snapshot_poll
 *                                snapshot.c   a checkpoint's dump, whole or
 *                                             of a frozen version
 *   instance_root, restore, rebuild, forget, scan, summary_json
 *                                admin.c      the supervisor's entries, the
 *                                             offline scan of a dump
 *   rd (the worker side)         read.c       probes and map reads, in place
 * The target has no pin and no rollback: its store is in memory only.
 *
 * One key's path: write.c (the store's mstore_write.c), then read.c (the
 * store's mstore_read.c).
 *
 * Next on a key's path: write.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "store/memory/memory_int.h"

static int mem_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		    const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	rc = sfs_mstore_open(s, worker, cfg->store_bytes, self, &w->m);
	if (rc) {
		free(w);
		return rc;
	}
	w->m.pin_wait = sfs__mem_pin_wait;
	w->m.pin_arg = w;
	*out = w;
	return 0;
}

static int mem_busy(struct sfs_target_writer *w)
{
	return sfs_mstore_pending(&w->m) | sfs_mdump_busy(&w->m, &w->dj);
}

static int mem_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg)
{
	(void)w;
	(void)fn;
	(void)arg;
	return 0;	/* all in memory: a checkpoint serializes the store */
}

static void mem_close(struct sfs_target_writer *w)
{
	sfs_mdump_stop(&w->m, &w->dj);
	sfs_mstore_close(&w->m);
	free(w);
}

const struct sfs_target_ops sfs_target_memory = {
	.name = "memory",
	.open = mem_open,
	.apply = sfs__mem_apply,
	.commit = sfs__mem_commit,
	.busy = mem_busy,
	.files = mem_files,
	.snapshot = sfs__mem_snapshot,
	.snapshot_begin = sfs__mem_snapshot_begin,
	.snapshot_poll = sfs__mem_snapshot_poll,
	.close = mem_close,
	.instance_root = sfs__mem_instance_root,
	.restore = sfs__mem_restore,
	.rebuild = sfs__mem_rebuild,
	.scan = sfs__mem_scan,
	.forget = sfs__mem_forget,
	.ttl = sfs__mem_ttl,
	.summary_json = sfs__mem_summary_json,
	.rd.reader_open = sfs__mem_reader_open,
	.rd.catch_up = sfs__mem_catch_up,
	.rd.probe = sfs__mem_probe,
	.rd.map_get = sfs__mem_map_get,
	.rd.map_iter = sfs__mem_map_iter,
	.rd.reader_close = sfs__mem_reader_close,
};
