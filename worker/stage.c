/*
 * stage.c — a worker's own staged checkpoints (include/sfs.h, "A worker's
 * own checkpoints"), for an engine that coordinates checkpoints itself.
 *
 * The compactor already stages a worker's store at each barrier it seals
 * (compactor/flush.c, snapshot_barrier): into SFS_CKPT_STAGE_FMT under the
 * group's data directory, publishing cw_snap_barrier (release) once the
 * files are complete.  This file lets the worker's engine find that
 * directory and drop it (store/stage_scan.c reads it: the flush target's
 * offline scan lives above this layer), and an engine of another process
 * learn a host group's slot count (sfs_group_slots) to share the group.
 *
 * In a host group the stage directory is the engine's once found, and
 * sfs_worker_staged adds one file of its own to it, SFS_STAGE_LIST_SEQ:
 * the worker's list sequence as read then (decimal) — at least every list
 * element's sequence in the staged version, which appends raise
 * monotonically — so that a store adopted from these files in another
 * slot (sfs_worker_adopt) appends above them instead of over them.
 *
 * Threads: nothing here writes the context; the reads are of the segment
 * (mapped read/write for the life of the context, its registry entries
 * READY before use) and of the checkpoint region's words, so another
 * thread than the context's may call these while the owner writes state.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/clock.h"
#include "shm/handle.h"
#include "common/err.h"
#include "common/fs.h"
#include "shm/atomic.h"
#include "shm/ckpt.h"
#include "worker/state.h"

static int stage_region(sfs_ctx_t *c, struct sfs_ckpt **ck)
{
	int rc = sfs_ckpt_find(&c->seg, ck);

	if (rc == -ENOENT)
		return sfs__err(-ENOENT, "job %s: the group stages no checkpoints (no checkpoint "
				"region: start it with sfs run --host)", c->seg.hdr->sh_job);
	if (rc)
		return rc;
	if (c->worker >= (*ck)->ck_workers)
		return sfs__err(-ENOENT, "job %s: worker %u is beyond the %u the group stages",
				c->seg.hdr->sh_job, c->worker, (*ck)->ck_workers);
	return 0;
}

/* SFS_STAGE_LIST_SEQ in a host group's stage directory (see above). */
static int write_list_seq(sfs_ctx_t *c, const char *dir)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, SFS_STAGE_LIST_SEQ) >= sizeof(path))
		return sfs__err(SFS_EUSAGE, "%s: path too long", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	return sfs_file_commit(f, tmp, path,
			       fprintf(f, "%llu\n", (unsigned long long)sfs_load_relaxed(
							      &c->ctl->wc_list_seq)) < 0 ? -EIO : 0);
}

int sfs_worker_staged(sfs_ctx_t *c, uint64_t id, uint64_t timeout_ns, char *dir, size_t len)
{
	struct sfs_ckpt *ck;
	uint64_t deadline, staged;
	struct stat st;
	int rc;

	sfs__err_clear();
	if (!c || !dir || !len || !id)
		return sfs__err(SFS_EUSAGE, "sfs_worker_staged: NULL argument or barrier 0");
	if ((rc = stage_region(c, &ck)))
		return rc;
	deadline = timeout_ns ? sfs_now_ns() + timeout_ns : UINT64_MAX;
	while ((staged = sfs_load_acquire(&ck->ck_w[c->worker].cw_snap_barrier)) < id) {
		struct timespec ms = { 0, 1000000 };

		if (sfs_now_ns() >= deadline)
			return sfs__err(SFS_ETIMEDOUT, "worker %u: barrier %llu not staged after %llu "
					"ms (staged: %llu)", c->worker, (unsigned long long)id,
					(unsigned long long)(timeout_ns / 1000000),
					(unsigned long long)staged);
		nanosleep(&ms, NULL);
	}
	if (sfs_ckpt_stage_dir(ck, c->worker, id, dir, len))
		return sfs__err(SFS_EUSAGE, "sfs_worker_staged: %zu bytes are too few for the path",
				len);
	/* A newer barrier published past @id: its directory is complete if it
	 * exists (stages complete in barrier order), gone if @id was never
	 * sealed as a barrier. */
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return sfs__err(-ESTALE, "worker %u: barrier %llu has no stage directory %s (staged "
				"up to %llu)", c->worker, (unsigned long long)id, dir,
				(unsigned long long)staged);
	if (ck->ck_interval_ms == SFS_CKPT_ENGINE)
		return write_list_seq(c, dir);
	return 0;
}

int sfs_stage_drop(sfs_ctx_t *c, const char *dir)
{
	sfs__err_clear();
	if (!c || !dir)
		return sfs__err(SFS_EUSAGE, "sfs_stage_drop: NULL argument");
	return sfs_rmtree(dir);
}

int sfs_group_slots(const char *job, uint32_t *slots)
{
	struct sfs_ckpt *ck;
	sfs_handle_t *h;
	int rc;

	sfs__err_clear();
	if (!job || !slots)
		return sfs__err(SFS_EUSAGE, "sfs_group_slots: NULL argument");
	if ((rc = sfs_attach(job, SFS_NODE_ANY, SFS_ATTACH_OBSERVER, &h)))
		return rc;
	rc = sfs_ckpt_find(&h->seg, &ck);
	if (rc == 0 && ck->ck_interval_ms == SFS_CKPT_ENGINE)
		*slots = ck->ck_workers;
	else
		rc = sfs__err(SFS_EUSAGE, "job %s is no host group (start one with sfs run --host)",
			      job);
	if (rc) {
		/* the detach clears the thread's message: keep this one */
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", sfs_last_error());
		sfs_detach(h);
		return sfs__err(rc, "%s", msg);
	}
	sfs_detach(h);
	return 0;
}
