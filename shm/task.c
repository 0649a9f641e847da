/*
 * task.c — a worker's side of the checkpoint protocol: the public task API
 * (include/sfs.h, "The checkpoint lifecycle") over the region of ckpt.h.
 * Every call but the wait is loads and stores in shared memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "shm/ckpt.h"
#include "shm/proc.h"
#include "shm/futex.h"
#include "shm/handle.h"
#include "shm/segment.h"

struct sfs_task {
	struct sfs_ckpt *ck;
	struct sfs_ckpt_worker *me;
	uint32_t worker;
	struct sfs_proc_slot *slot;   /* the process's, for sfs_task_io (NULL: none) */
	uint64_t rb_done;             /* the last rollback this process started over from */
};

_Static_assert(SFS_TASK_BYTES_MAX == SFS_CKPT_BYTES_MAX, "the public limit is the region's");

int sfs__task_open_seg(const struct sfs_seg *seg, uint32_t worker, struct sfs_proc_slot *slot,
		       struct sfs_task **out)
{
	struct sfs_ckpt *ck;
	struct sfs_task *t;
	int rc;

	if ((rc = sfs_ckpt_find(seg, &ck)) == -ENOENT)
		return sfs__err(-ENOENT, "worker %u: the group takes no checkpoints (started with "
				"--checkpoint-interval 0): there is no task to join", worker);
	if (rc)
		return rc;
	if (worker >= ck->ck_workers)
		return sfs__err(SFS_EUSAGE, "worker %u: the job has %u workers", worker,
				ck->ck_workers);
	if (!(t = calloc(1, sizeof(*t))))
		return sfs__err(-ENOMEM, "worker %u: no memory for a task", worker);
	t->ck = ck;
	t->worker = worker;
	t->me = &ck->ck_w[worker];
	t->slot = slot;
	/* A worker started after rollback R starts from it: R is handled.
	 * Whether it rolls back in place is this process's to say. */
	t->rb_done = sfs_load_acquire(&ck->ck_rb_halt);
	sfs_store_relaxed(&t->me->cw_rb_inproc, 0);
	/* A restarted worker re-joins: its seal and bytes of an earlier
	 * incarnation stay (a restart restores the whole group anyway). */
	sfs_store_release(&t->me->cw_phase, SFS_CKW_RUNNING);
	*out = t;
	return 0;
}

int sfs_task_open(sfs_handle_t *h, uint32_t worker, sfs_task_t **out)
{
	sfs__err_clear();
	if (!h || !out)
		return sfs__err(SFS_EUSAGE, "sfs_task_open: NULL argument");
	return sfs__task_open_seg(&h->seg, worker, h->slot, out);
}

int sfs_task_io(sfs_task_t *t, int err)
{
	sfs__err_clear();
	if (err && !sfs_io_trouble_errno(err))
		return sfs__err(SFS_EUSAGE, "worker %u: sfs_task_io(%s): no retry cures it", t->worker,
				sfs_strerror(err < 0 ? err : -err));
	return sfs_proc_io(t->slot, err < 0 ? err : -err);
}

int sfs_task_close(sfs_task_t *t)
{
	sfs__err_clear();
	free(t);
	return 0;
}

void sfs_task_info(const sfs_task_t *t, struct sfs_task_info *out)
{
	const struct sfs_ckpt *ck = t->ck;

	memset(out, 0, sizeof(*out));
	out->start = (int)ck->ck_start;
	out->worker = t->worker;
	out->workers = ck->ck_workers;
	out->max_parallelism = ck->ck_max_parallelism;
	out->prev_workers = ck->ck_prev_workers;
	out->checkpoint = ck->ck_restored_id;
	out->base_id = ck->ck_first_barrier;
	out->interval_ms = ck->ck_interval_ms == SFS_CKPT_ENGINE ? 0 : ck->ck_interval_ms;
}

int sfs_task_restored(const sfs_task_t *t, uint32_t prev_worker, struct sfs_view *out)
{
	const struct sfs_ckpt *ck = t->ck;

	sfs__err_clear();
	if (ck->ck_start == SFS_START_FRESH)
		return sfs__err(-ENOENT, "worker %u: a fresh start restored no bytes", t->worker);
	if (prev_worker >= ck->ck_prev_workers || prev_worker >= SFS_CKPT_MAX_WORKERS)
		return sfs__err(SFS_EUSAGE, "old worker %u: the checkpoint had %u", prev_worker,
				ck->ck_prev_workers);
	out->data = ck->ck_prev[prev_worker].cp_bytes;
	out->len = ck->ck_prev[prev_worker].cp_len;
	return 0;
}

uint64_t sfs_task_requested(const sfs_task_t *t)
{
	return sfs_load_relaxed(&t->ck->ck_barrier_req);
}

uint64_t sfs_task_completed(const sfs_task_t *t)
{
	return sfs_load_acquire(&t->ck->ck_done);
}

int sfs_task_wait_completed(const sfs_task_t *t, uint64_t id, uint64_t timeout_ns)
{
	struct sfs_ckpt *ck = t->ck;
	uint64_t deadline = timeout_ns ? sfs_now_ns() + timeout_ns : 0;
	int rc = 0;

	sfs__err_clear();
	uatomic_inc(&ck->ck_done_waiters);
	for (;;) {
		int32_t seq = sfs_load_acquire(&ck->ck_done_seq);
		uint64_t now;

		/* full fence: our waiter count against the publisher's check */
		cmm_smp_mb();
		if (sfs_load_acquire(&ck->ck_done) >= id)
			break;
		now = sfs_now_ns();
		if (deadline && now >= deadline) {
			rc = sfs__err(SFS_ETIMEDOUT, "checkpoint %llu not complete after %.3f s",
				      (unsigned long long)id, timeout_ns / 1e9);
			break;
		}
		/* woken by each completion; a timeout re-checks the deadline */
		sfs_futex_wait(&ck->ck_done_seq, seq, deadline ? deadline - now : 0);
	}
	uatomic_dec(&ck->ck_done_waiters);
	return rc;
}

int sfs_task_sealed(sfs_task_t *t, uint64_t id, const void *bytes, size_t len)
{
	struct sfs_ckpt_worker *w = t->me;
	uint64_t last = w->cw_sealed, req = sfs_load_relaxed(&t->ck->ck_barrier_req);

	sfs__err_clear();
	if (len > SFS_CKPT_BYTES_MAX)
		return sfs__err(SFS_EUSAGE, "worker %u: %zu bytes with checkpoint %llu, at most %u",
				t->worker, len, (unsigned long long)id, SFS_CKPT_BYTES_MAX);
	if (id <= last)
		return sfs__err(SFS_EUSAGE, "worker %u: checkpoint %llu sealed after %llu (ids go "
				"up)", t->worker, (unsigned long long)id, (unsigned long long)last);
	if (id > req)
		return sfs__err(SFS_EUSAGE, "worker %u: checkpoint %llu sealed, only %llu requested",
				t->worker, (unsigned long long)id, (unsigned long long)req);
	/* A worker whose state is in sfs: the compactor stages the barriers
	 * its state sealed, no other (ckpt.h, cw_keyed).  Two loads. */
	if (sfs_load_acquire(&w->cw_keyed)) {
		uint64_t b = sfs_load_acquire(&w->cw_barrier);

		if (b < id)
			return sfs__err(SFS_EUSAGE, "worker %u: checkpoint %llu sealed before its keyed "
					"state: call sfs_barrier(ctx, %llu) first (its last barrier "
					"is %llu)", t->worker, (unsigned long long)id,
					(unsigned long long)id, (unsigned long long)b);
		if (b > id)
			return sfs__err(SFS_EUSAGE, "worker %u: checkpoint %llu sealed, but its keyed "
					"state's last barrier is %llu: seal the id its state was "
					"sealed for", t->worker, (unsigned long long)id,
					(unsigned long long)b);
	}
	if (len)
		memcpy(w->cw_bytes, bytes, len);
	w->cw_bytes_len = (uint32_t)len;
	sfs_store_release(&w->cw_sealed, id);
	return 0;
}

int sfs_task_finish(sfs_task_t *t)
{
	uint64_t sealed = t->me->cw_sealed, done = sfs_load_acquire(&t->ck->ck_done);

	sfs__err_clear();
	/* Every completed checkpoint has this worker's seal (none completes
	 * without it): sealed == done means its final state is in one. */
	sfs_store_release(&t->me->cw_phase, sealed && sealed == done ? SFS_CKW_FINISHED
								     : SFS_CKW_ENDED);
	return 0;
}

int sfs_task_stage_dir(const sfs_task_t *t, uint64_t id, char *buf, size_t len)
{
	sfs__err_clear();
	return sfs_ckpt_stage_dir(t->ck, t->worker, id, buf, len);
}

int sfs_task_staged(sfs_task_t *t, uint64_t id, uint64_t version)
{
	sfs__err_clear();
	if (id <= t->me->cw_snap_barrier)
		return sfs__err(SFS_EUSAGE, "worker %u: checkpoint %llu staged after %llu",
				t->worker, (unsigned long long)id,
				(unsigned long long)t->me->cw_snap_barrier);
	sfs_store_relaxed(&t->me->cw_snap_version, version);
	sfs_store_release(&t->me->cw_snap_barrier, id);
	return 0;
}

/* ---- rollback in place (ckpt.h) ------------------------------------------------ */

int sfs_task_rollback_enable(sfs_task_t *t)
{
	sfs__err_clear();
	if (!t)
		return sfs__err(SFS_EUSAGE, "sfs_task_rollback_enable: NULL task");
	sfs_store_release(&t->me->cw_rb_inproc, 1);
	return 0;
}

uint64_t sfs_task_rollback_requested(const sfs_task_t *t)
{
	uint64_t r = sfs_load_acquire(&t->ck->ck_rb_halt);

	return r > t->rb_done ? r : 0;
}

int sfs_task_rollback_wait(sfs_task_t *t, uint64_t timeout_ns)
{
	struct sfs_ckpt *ck = t->ck;
	uint64_t r = sfs_task_rollback_requested(t);
	uint64_t deadline = sfs_now_ns() + timeout_ns;

	sfs__err_clear();
	if (!r)
		return sfs__err(SFS_EUSAGE, "worker %u: no rollback requested", t->worker);
	/* Halted: whatever the caller held since the checkpoint is dropped. */
	if (sfs_load_relaxed(&t->me->cw_rb_halted) != r) {
		sfs_store_release(&t->me->cw_rb_halted, r);
		(void)sfs_fault("task.halted");
	}
	for (;;) {
		int32_t go = sfs_load_acquire(&ck->ck_rb_go);
		uint64_t now;

		if ((uint32_t)go >= (uint32_t)r) {
			/* The start words are C's now (ckpt.h, c.): run again. */
			t->rb_done = r;
			sfs_store_release(&t->me->cw_phase, SFS_CKW_RUNNING);
			return 0;
		}
		now = sfs_now_ns();
		if (now >= deadline)
			return sfs__err(SFS_ETIMEDOUT, "worker %u: rollback %llu not done after "
					"%.3f s", t->worker, (unsigned long long)r, timeout_ns / 1e9);
		sfs_futex_wait(&ck->ck_rb_go, go, deadline - now);
	}
}
