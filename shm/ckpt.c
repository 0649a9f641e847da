/*
 * ckpt.c — the checkpoint protocol's region (ckpt.h): creation, lookup with
 * its magic, version and size checked, and the completion's publication.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fingerprint.h"
#include "shm/ckpt.h"
#include "shm/futex.h"
#include "shm/segment.h"

_Static_assert(sizeof(struct sfs_ckpt_worker) % SFS_CACHE_LINE == 0,
	       "a worker's protocol words share no line with another's");
_Static_assert(offsetof(struct sfs_ckpt, ck_barrier_req) % SFS_CACHE_LINE == 0,
	       "the checkpointer's words on their own lines");

int sfs_ckpt_create(struct sfs_seg *seg, uint32_t workers, struct sfs_ckpt **out)
{
	struct sfs_ckpt *ck;
	uint64_t off;
	int rc;

	if (!workers || workers > SFS_CKPT_MAX_WORKERS)
		return sfs__err(SFS_EUSAGE, "checkpoints of %u workers: 1..%u", workers,
				SFS_CKPT_MAX_WORKERS);
	rc = sfs_seg_region_create(seg, SFS_CKPT_REGION, sizeof(*ck), SFS_ROLE_SUPERVISOR, &off);
	if (rc)
		return rc;
	ck = sfs_seg_ptr(seg, off);
	memset(ck, 0, sizeof(*ck));
	ck->ck_magic = SFS_CKPT_MAGIC;
	ck->ck_version = SFS_CKPT_VERSION;
	ck->ck_workers = workers;
	*out = ck;
	return 0;
}

int sfs_ckpt_find(const struct sfs_seg *seg, struct sfs_ckpt **out)
{
	struct sfs_ckpt *ck;
	int rc = sfs__ckpt_find_any(seg, &ck);

	if (rc)
		return rc;
	if (!ck->ck_interval_ms)
		return -ENOENT;
	*out = ck;
	return 0;
}

int sfs__ckpt_find_any(const struct sfs_seg *seg, struct sfs_ckpt **out)
{
	struct sfs_ckpt *ck;
	uint64_t off, size;

	if (sfs_seg_region_find(seg, SFS_CKPT_REGION, &off, &size))
		return -ENOENT;
	ck = sfs_seg_ptr(seg, off);
	if (size < sizeof(*ck) || ck->ck_magic != SFS_CKPT_MAGIC ||
	    ck->ck_version != SFS_CKPT_VERSION || !ck->ck_workers ||
	    ck->ck_workers > SFS_CKPT_MAX_WORKERS)
		return sfs__err(SFS_EVERSION, "segment %s: region '%s' is not version %u of the "
				"checkpoint protocol", seg->path, SFS_CKPT_REGION,
				SFS_CKPT_VERSION);
	*out = ck;
	return 0;
}

void sfs_ckpt_publish_done(struct sfs_ckpt *ck, uint64_t id)
{
	sfs_store_release(&ck->ck_done, id);
	sfs_store_release(&ck->ck_done_seq, ck->ck_done_seq + 1);
	/* full fence: a waiter's increment of ck_done_waiters and its last
	 * look at ck_done_seq against our store above (Dekker) */
	cmm_smp_mb();
	if (uatomic_read(&ck->ck_done_waiters) > 0)
		sfs_futex_wake(&ck->ck_done_seq, INT_MAX);
}

uint64_t sfs_ckpt_layout(uint64_t h)
{
	SFS_FP_SIZE(h, struct sfs_ckpt);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_workers);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_interval_ms);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_start);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_restored_id);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_recoveries);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_data_dir);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_config);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_barrier_req);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_done);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_done_seq);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_us);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_rb_req);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_rb_to);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_rb_ack);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_rb_halt);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_rb_go);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_w);
	SFS_FP_FIELD(h, struct sfs_ckpt, ck_prev);
	SFS_FP_SIZE(h, struct sfs_ckpt_worker);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_sealed);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_snap_barrier);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_snap_version);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_rb_ack);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_rb_rc);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_rb_inproc);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_rb_halted);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_barrier);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_keyed);
	SFS_FP_FIELD(h, struct sfs_ckpt_worker, cw_bytes);
	SFS_FP_SIZE(h, struct sfs_ckpt_prev);
	return sfs_fp(h, SFS_CKPT_BYTES_MAX);
}

int sfs_ckpt_stage_dir(const struct sfs_ckpt *ck, uint32_t worker, uint64_t id, char *buf,
		       size_t len)
{
	int n = snprintf(buf, len, SFS_CKPT_STAGE_FMT, ck->ck_data_dir, worker,
			 (unsigned long long)id);

	return n < 0 || (size_t)n >= len ? sfs__err(-ENAMETOOLONG, "stage directory of worker %u, "
						    "barrier %llu: over %zu bytes", worker,
						    (unsigned long long)id, len) : 0;
}
