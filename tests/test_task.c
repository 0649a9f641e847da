/*
 * test_task.c — the checkpoint lifecycle of include/sfs.h (the task API)
 * over the protocol region of shm/ckpt.h, driven by hand in place of the
 * checkpointer: what a worker learns at open, requests and completions
 * seen without a syscall, the blocking wait woken from another process,
 * and every out-of-order call refused with nothing published — with a
 * worker's keyed state too: barriers and seals of ids the protocol cannot
 * complete, and opens of another shape than the group's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "common/clock.h"
#include "helpers.h"
#include "shm/ckpt.h"
#include "shm/futex.h"
#include "shm/segment.h"
#include "sfs.h"
#include "sfs_keygroup.h"

struct fx {
	char job[64];
	struct sfs_seg seg;
	struct sfs_ckpt *ck;
	sfs_handle_t *h;
};

/* A segment with the region as the supervisor leaves it before any child
 * starts: @workers workers, checkpoints every 100 ms, ids above 7. */
static void setup(struct fx *f, uint32_t workers)
{
	th_job(f->job, sizeof(f->job), "task");
	cr_assert_eq(sfs_seg_create(f->job, 0, 16u << 20, 1, &f->seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_ckpt_create(&f->seg, workers, &f->ck), 0, "%s", sfs_last_error());
	f->ck->ck_interval_ms = 100;
	f->ck->ck_max_parallelism = 128;
	f->ck->ck_first_barrier = 7;
	f->ck->ck_barrier_req = 7;
	snprintf(f->ck->ck_data_dir, sizeof(f->ck->ck_data_dir), "/data/x");
	cr_assert_eq(sfs_attach(f->job, 0, 0, &f->h), 0, "%s", sfs_last_error());
}

static void teardown(struct fx *f)
{
	sfs_detach(f->h);
	sfs_seg_detach(&f->seg);
	sfs_seg_destroy(f->job, 0);
}

Test(task, open_info_and_the_phases_the_checkpointer_reads)
{
	struct sfs_task_info in;
	struct sfs_view v;
	sfs_task_t *t;
	char dir[128];
	struct fx f;

	setup(&f, 3);
	cr_assert_eq(f.ck->ck_w[2].cw_phase, SFS_CKW_STARTING);
	cr_assert_eq(sfs_task_open(f.h, 3, &t), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "3 workers"));
	cr_assert_eq(sfs_task_open(f.h, 2, &t), 0, "%s", sfs_last_error());
	cr_assert_eq(f.ck->ck_w[2].cw_phase, SFS_CKW_RUNNING);
	sfs_task_info(t, &in);
	cr_assert_eq(in.start, SFS_START_FRESH);
	cr_assert_eq(in.worker, 2);
	cr_assert_eq(in.workers, 3);
	cr_assert_eq(in.max_parallelism, 128);
	cr_assert_eq(in.base_id, 7);
	cr_assert_eq(in.checkpoint, 0);
	cr_assert_eq(in.interval_ms, 100);
	cr_assert_eq(sfs_task_restored(t, 0, &v), -ENOENT);
	cr_assert_eq(sfs_task_stage_dir(t, 9, dir, sizeof(dir)), 0);
	cr_assert_str_eq(dir, "/data/x/stage/w2/b9");
	cr_assert_eq(sfs_task_stage_dir(t, 9, dir, 8), -ENAMETOOLONG);
	/* an end with nothing in a checkpoint: ENDED (checkpoints stop) */
	cr_assert_eq(sfs_task_finish(t), 0);
	cr_assert_eq(f.ck->ck_w[2].cw_phase, SFS_CKW_ENDED);
	/* an end whose last seal completed: FINISHED (carried) */
	f.ck->ck_barrier_req = 8;
	cr_assert_eq(sfs_task_sealed(t, 8, "p", 1), 0);
	cr_assert_eq(sfs_task_finish(t), 0);
	cr_assert_eq(f.ck->ck_w[2].cw_phase, SFS_CKW_ENDED, "8 is not complete yet");
	sfs_ckpt_publish_done(f.ck, 8);
	cr_assert_eq(sfs_task_finish(t), 0);
	cr_assert_eq(f.ck->ck_w[2].cw_phase, SFS_CKW_FINISHED);
	sfs_task_close(t);
	teardown(&f);
}

Test(task, no_region_or_no_interval_is_enoent)
{
	sfs_task_t *t;
	struct fx f;

	setup(&f, 1);
	f.ck->ck_interval_ms = 0;
	cr_assert_eq(sfs_task_open(f.h, 0, &t), -ENOENT);
	/* a reason, not an empty sfs_last_error() (issue 33) */
	cr_assert_not_null(strstr(sfs_last_error(), "takes no checkpoints"), "%s", sfs_last_error());
	f.ck->ck_interval_ms = 100;
	f.ck->ck_version = 99;
	cr_assert_eq(sfs_task_open(f.h, 0, &t), SFS_EVERSION);
	cr_assert_not_null(strstr(sfs_last_error(), "checkpoint protocol"));
	teardown(&f);
}

Test(task, seal_publishes_bytes_and_refuses_out_of_order_calls)
{
	uint8_t big[SFS_TASK_BYTES_MAX + 1];
	struct sfs_ckpt_worker *w;
	sfs_task_t *t;
	struct fx f;

	setup(&f, 2);
	w = &f.ck->ck_w[1];
	cr_assert_eq(sfs_task_open(f.h, 1, &t), 0);
	cr_assert_eq(sfs_task_requested(t), 7);
	/* not requested yet */
	cr_assert_eq(sfs_task_sealed(t, 8, "a", 1), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "only 7 requested"));
	cr_assert_eq(w->cw_sealed, 0);
	f.ck->ck_barrier_req = 8;	/* the checkpointer asks for 8 */
	cr_assert_eq(sfs_task_requested(t), 8);
	memset(big, 'x', sizeof(big));
	cr_assert_eq(sfs_task_sealed(t, 8, big, sizeof(big)), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "at most 4096"));
	cr_assert_eq(w->cw_sealed, 0);
	cr_assert_eq(sfs_task_sealed(t, 8, big, SFS_TASK_BYTES_MAX), 0, "%s", sfs_last_error());
	cr_assert_eq(w->cw_sealed, 8);
	cr_assert_eq(w->cw_bytes_len, SFS_TASK_BYTES_MAX);
	/* backwards, or the same again */
	cr_assert_eq(sfs_task_sealed(t, 8, "b", 1), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "ids go up"));
	cr_assert_eq(sfs_task_sealed(t, 5, "b", 1), SFS_EUSAGE);
	cr_assert_eq(w->cw_sealed, 8);
	cr_assert_eq(w->cw_bytes[0], 'x');
	/* an empty seal is fine */
	f.ck->ck_barrier_req = 9;
	cr_assert_eq(sfs_task_sealed(t, 9, NULL, 0), 0);
	cr_assert_eq(w->cw_bytes_len, 0);
	/* staging by the worker itself: ids go up too */
	cr_assert_eq(sfs_task_staged(t, 9, 42), 0);
	cr_assert_eq(w->cw_snap_barrier, 9);
	cr_assert_eq(w->cw_snap_version, 42);
	cr_assert_eq(sfs_task_staged(t, 9, 43), SFS_EUSAGE);
	cr_assert_eq(w->cw_snap_version, 42);
	sfs_task_close(t);
	teardown(&f);
}

Test(task, restored_bytes_of_every_old_worker)
{
	struct sfs_task_info in;
	struct sfs_view v;
	sfs_task_t *t;
	struct fx f;

	setup(&f, 3);
	f.ck->ck_start = SFS_START_RESCALED;
	f.ck->ck_restored_id = 6;
	f.ck->ck_prev_workers = 2;
	memcpy(f.ck->ck_prev[0].cp_bytes, "kafka:0=17", 10);
	f.ck->ck_prev[0].cp_len = 10;
	memcpy(f.ck->ck_prev[1].cp_bytes, "kafka:1=9", 9);
	f.ck->ck_prev[1].cp_len = 9;
	cr_assert_eq(sfs_task_open(f.h, 2, &t), 0);
	sfs_task_info(t, &in);
	cr_assert_eq(in.start, SFS_START_RESCALED);
	cr_assert_eq(in.checkpoint, 6);
	cr_assert_eq(in.prev_workers, 2);
	cr_assert_eq(sfs_task_restored(t, 1, &v), 0);
	cr_assert_eq(v.len, 9);
	cr_assert_eq(memcmp(v.data, "kafka:1=9", 9), 0);
	cr_assert_eq(sfs_task_restored(t, 0, &v), 0);
	cr_assert_eq(v.len, 10);
	cr_assert_eq(sfs_task_restored(t, 2, &v), SFS_EUSAGE);
	sfs_task_close(t);
	teardown(&f);
}

/* A forked child's own mapping of the fixture's segment and region. */
static int child_attach(const struct fx *f, struct sfs_seg *seg, struct sfs_ckpt **ck)
{
	return sfs_seg_attach(f->job, 0, seg) || sfs_ckpt_find(seg, ck);
}

/* The child: a "checkpointer" that completes checkpoint 8 after a nap. */
static int complete_later(void *arg)
{
	struct sfs_seg seg;
	struct sfs_ckpt *ck;

	if (child_attach(arg, &seg, &ck))
		return 10;
	usleep(150 * 1000);
	sfs_ckpt_publish_done(ck, 8);
	sfs_seg_detach(&seg);
	return 0;
}

Test(task, completion_seen_by_load_and_by_a_wait_woken_across_processes, .timeout = 30)
{
	sfs_task_t *t;
	uint64_t t0;
	struct fx f;
	pid_t pid;

	setup(&f, 1);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_task_completed(t), 0);
	/* nothing completes: the bounded wait says so */
	t0 = sfs_now_ns();
	cr_assert_eq(sfs_task_wait_completed(t, 8, 30 * 1000000ull), SFS_ETIMEDOUT);
	cr_assert_geq(sfs_now_ns() - t0, 30 * 1000000ull);
	cr_assert_eq(f.ck->ck_done_waiters, 0);
	/* another process completes it while we sleep: woken well before the
	 * 10 s bound */
	pid = th_fork(complete_later, &f);
	t0 = sfs_now_ns();
	cr_assert_eq(sfs_task_wait_completed(t, 8, 10000 * 1000000ull), 0, "%s",
		     sfs_last_error());
	cr_assert_lt(sfs_now_ns() - t0, 5000 * 1000000ull);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
	cr_assert_eq(sfs_task_completed(t), 8);
	cr_assert_eq(f.ck->ck_done_waiters, 0);
	/* already complete: returns at once */
	cr_assert_eq(sfs_task_wait_completed(t, 7, 1), 0);
	sfs_task_close(t);
	teardown(&f);
}

/* The child: a "supervisor" that, once worker 0 has halted for rollback
 * 1, rewrites the start words as of checkpoint 5 and says go. */
static int go_later(void *arg)
{
	struct sfs_seg seg;
	struct sfs_ckpt *ck;

	if (child_attach(arg, &seg, &ck))
		return 10;
	for (int i = 0; sfs_load_acquire(&ck->ck_w[0].cw_rb_halted) < 1; i++) {
		if (i > 5000)
			return 11;
		usleep(1000);
	}
	usleep(50 * 1000);
	ck->ck_start = SFS_START_RESTORED;
	ck->ck_restored_id = 5;
	ck->ck_prev_workers = 1;
	ck->ck_first_barrier = 12;
	sfs_store_release(&ck->ck_barrier_req, 12);
	sfs_store_release(&ck->ck_rb_go, 1);
	sfs_futex_wake(&ck->ck_rb_go, INT_MAX);
	sfs_seg_detach(&seg);
	return 0;
}

/*
 * Rollback in place, the task's words: a task open says nothing of
 * rollbacks (cw_rb_inproc 0) and takes the rollbacks before it as
 * handled; enable says it rolls back in its process; a halt request is a
 * plain load; the wait acks the halt, times out while no go comes, and is
 * woken from another process by go, after which the task describes the
 * start from the checkpoint the group rolled back to and runs again.
 */
Test(task, rollback_halt_acked_and_go_woken_across_processes, .timeout = 30)
{
	struct sfs_task_info in;
	sfs_task_t *t, *late;
	uint64_t t0;
	struct fx f;
	pid_t pid;

	setup(&f, 2);
	f.ck->ck_w[0].cw_rb_inproc = 1;	/* an earlier process's word */
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(f.ck->ck_w[0].cw_rb_inproc, 0);
	cr_assert_eq(sfs_task_rollback_enable(t), 0);
	cr_assert_eq(f.ck->ck_w[0].cw_rb_inproc, 1);
	cr_assert_eq(sfs_task_rollback_requested(t), 0);
	cr_assert_eq(sfs_task_rollback_wait(t, 1000), SFS_EUSAGE);
	cr_assert_eq(f.ck->ck_w[0].cw_rb_halted, 0, "a refused wait acks nothing");

	sfs_store_release(&f.ck->ck_rb_halt, 1);
	cr_assert_eq(sfs_task_rollback_requested(t), 1);
	t0 = sfs_now_ns();
	cr_assert_eq(sfs_task_rollback_wait(t, 20 * 1000000ull), SFS_ETIMEDOUT);
	cr_assert_geq(sfs_now_ns() - t0, 20 * 1000000ull);
	cr_assert_eq(f.ck->ck_w[0].cw_rb_halted, 1, "the halt is acked");
	sfs_store_release(&f.ck->ck_w[0].cw_phase, SFS_CKW_STARTING);
	pid = th_fork(go_later, &f);
	t0 = sfs_now_ns();
	cr_assert_eq(sfs_task_rollback_wait(t, 10000 * 1000000ull), 0, "%s", sfs_last_error());
	cr_assert_lt(sfs_now_ns() - t0, 5000 * 1000000ull);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
	cr_assert_eq(sfs_task_rollback_requested(t), 0, "handled");
	cr_assert_eq(f.ck->ck_w[0].cw_phase, SFS_CKW_RUNNING, "it runs again");
	sfs_task_info(t, &in);
	cr_assert_eq(in.start, SFS_START_RESTORED);
	cr_assert_eq(in.checkpoint, 5);
	cr_assert_eq(in.base_id, 12);
	/* a worker started after rollback 1 (the dead one's new process) */
	cr_assert_eq(sfs_task_open(f.h, 1, &late), 0);
	cr_assert_eq(sfs_task_rollback_requested(late), 0, "rollback 1 is its start");
	sfs_task_close(late);
	sfs_task_close(t);
	teardown(&f);
}

/* Worker options small enough for the fixture's segment; no compactor runs, so
 * at most 3 barriers per region (and a stall is bounded, never a hang). */
static struct sfs_worker_opts tiny_opts(uint32_t parallelism)
{
	return (struct sfs_worker_opts){ .parallelism = parallelism, .buffers = 4,
					 .stall_timeout_ns = 2000000000ull,
					 .buffer_bytes = 64u << 10, .flags = SFS_WORKER_NO_CACHE };
}

/*
 * A worker with keyed state seals checkpoint N only once its state is
 * sealed for exactly N (issue 33: a seal before the barrier returned 0 and
 * the checkpoint waited forever for a stage that never came, "0 of 2
 * workers sealed"; a state sealed for a later id left the checkpointer no
 * stage directory of N).  The task is opened on the test's own mapping
 * (sfs_task_open), not the context's: the words are the group's.
 */
Test(task, a_seal_needs_the_keyed_state_sealed_for_its_id)
{
	struct sfs_worker_opts o = tiny_opts(2);
	struct sfs_ckpt_worker *w;
	sfs_task_t *t;
	sfs_ctx_t *c;
	struct fx f;

	setup(&f, 2);
	w = &f.ck->ck_w[1];
	cr_assert_eq(sfs_task_open(f.h, 1, &t), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_open(f.job, 0, 1, &o, &c), 0, "%s", sfs_last_error());
	f.ck->ck_barrier_req = 8;
	/* no barrier yet */
	cr_assert_eq(sfs_task_sealed(t, 8, "a", 1), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "sfs_barrier(ctx, 8) first"), "%s",
			   sfs_last_error());
	cr_assert_eq(w->cw_sealed, 0, "nothing published");
	cr_assert_eq(sfs_barrier(c, 8), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_task_sealed(t, 8, "a", 1), 0, "%s", sfs_last_error());
	cr_assert_eq(w->cw_sealed, 8);
	/* the state sealed for a later id than the seal's */
	f.ck->ck_barrier_req = 10;
	cr_assert_eq(sfs_barrier(c, 10), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_task_sealed(t, 9, "b", 1), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "last barrier is 10"), "%s", sfs_last_error());
	cr_assert_eq(w->cw_sealed, 8);
	cr_assert_eq(sfs_task_sealed(t, 10, "b", 1), 0, "%s", sfs_last_error());
	/* a worker without keyed state (worker 0: no context) seals as before */
	{
		sfs_task_t *t0;

		cr_assert_eq(sfs_task_open(f.h, 0, &t0), 0);
		cr_assert_eq(sfs_task_sealed(t0, 10, NULL, 0), 0, "%s", sfs_last_error());
		sfs_task_close(t0);
	}
	sfs_task_close(t);
	cr_assert_eq(sfs_worker_close(c), 0);
	/* a reopened context (a restarted worker) keeps to its region's last
	 * barrier: 10 sealed, so 11 needs a barrier of its own */
	cr_assert_eq(sfs_worker_open(f.job, 0, 1, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_task(c, &t), 0, "%s", sfs_last_error());
	f.ck->ck_barrier_req = 11;
	cr_assert_eq(sfs_task_sealed(t, 11, "c", 1), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "its last barrier is 10"), "%s",
			   sfs_last_error());
	cr_assert_eq(sfs_barrier(c, 11), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_task_sealed(t, 11, "c", 1), 0, "%s", sfs_last_error());
	sfs_task_close(t);
	cr_assert_eq(sfs_worker_close(c), 0);
	teardown(&f);
}

/*
 * In a group whose checkpointer requests checkpoints, a barrier of an id
 * not requested is refused with nothing sealed (issue 33: barrier r+1
 * returned 0, and the seal of r after it made the checkpointer die on a
 * stage directory b<r> that never existed).  Outside such a group — no
 * checkpoints, or a host group whose engine numbers its checkpoints — any
 * increasing id is a barrier.
 */
Test(task, a_barrier_of_an_id_never_requested_is_refused)
{
	struct sfs_worker_opts o = tiny_opts(1);
	sfs_ctx_t *c;
	struct fx f;

	setup(&f, 1);
	cr_assert_eq(sfs_worker_open(f.job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_barrier(c, 8), SFS_EUSAGE, "only 7 requested");
	cr_assert_not_null(strstr(sfs_last_error(), "barrier 8 was never requested"), "%s",
			   sfs_last_error());
	cr_assert_not_null(strstr(sfs_last_error(), "up to 7"), "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_last_barrier(c), 0, "nothing sealed");
	f.ck->ck_barrier_req = 8;
	cr_assert_eq(sfs_barrier(c, 9), SFS_EUSAGE);
	cr_assert_eq(sfs_barrier(c, 8), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_last_barrier(c), 8);
	cr_assert_eq(sfs_barrier(c, 9), SFS_EUSAGE, "8 was requested, 9 not yet");
	cr_assert_eq(sfs_worker_last_barrier(c), 8);
	cr_assert_eq(sfs_worker_close(c), 0);

	/* a host group: the engine's own ids, never requested */
	f.ck->ck_interval_ms = UINT64_MAX;	/* SFS_CKPT_ENGINE */
	o.flags |= SFS_WORKER_KG_RANGE;
	o.kg_first = 0;
	o.kg_last = 127;
	cr_assert_eq(sfs_worker_open(f.job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_barrier(c, 1000), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_close(c), 0);

	/* a group without checkpoints */
	f.ck->ck_interval_ms = 0;
	o.flags &= ~SFS_WORKER_KG_RANGE;
	cr_assert_eq(sfs_worker_open(f.job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_barrier(c, 2000), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_close(c), 0);
	teardown(&f);
}

/*
 * A worker that assigns its key groups by its share of the parallelism
 * opens with the group's parallelism and key groups, or is refused before
 * anything is laid out (issue 33: an open with parallelism 1 in a group of
 * 2 was accepted, owned key groups 0..127, and left a region that refused
 * the correct open after it in every recovery).  Either refusal leaves the
 * process able to open correctly; SFS_WORKER_KG_RANGE opens name their
 * range themselves.
 */
Test(task, a_worker_of_another_shape_than_the_group_is_refused_at_open)
{
	struct sfs_worker_opts o = tiny_opts(0);	/* 0: 1 worker */
	sfs_ctx_t *c;
	struct fx f;

	setup(&f, 2);
	cr_assert_eq(sfs_worker_open(f.job, 0, 0, &o, &c), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "parallelism 1"), "%s", sfs_last_error());
	cr_assert_not_null(strstr(sfs_last_error(), "has 2 workers"), "%s", sfs_last_error());
	o.parallelism = 2;
	o.max_parallelism = 256;
	cr_assert_eq(sfs_worker_open(f.job, 0, 0, &o, &c), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "128 key groups"), "%s", sfs_last_error());
	/* the right shape opens, with the range of worker 0 of 2 */
	o.max_parallelism = 0;
	cr_assert_eq(sfs_worker_open(f.job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_value_put(c, 0, 0, "x", 1, "y", 1), SFS_EUSAGE, "no state yet");
	{
		uint32_t st, n = 0;

		cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
		for (int k = 0; k < 200; k++) {
			char key[16];
			size_t len = (size_t)snprintf(key, sizeof(key), "k%d", k);
			uint32_t kg = sfs_key_group(key, len, 128);
			int rc = sfs_value_put(c, st, 0, key, len, "v", 1);

			cr_assert_eq(rc == 0, kg < 64, "%s: kg %u: %d", key, kg, rc);
			n += rc == 0;
		}
		cr_assert_gt(n, 0);
	}
	cr_assert_eq(sfs_worker_close(c), 0);
	/* an engine's own range: no parallelism to check */
	o.parallelism = 0;
	o.flags |= SFS_WORKER_KG_RANGE;
	o.kg_first = 64;
	o.kg_last = 127;
	cr_assert_eq(sfs_worker_open(f.job, 0, 1, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_close(c), 0);
	teardown(&f);
}

/*
 * sfs_last_error() names the call that failed last, never an earlier one
 * (issue 33: a failure without a message of its own left the previous
 * failure's text in place).  A failure with a message, then failures of
 * other calls that used to leave none, then a success between.
 */
Test(task, the_last_error_is_the_last_failures_own)
{
	struct sfs_view v;
	sfs_task_t *t;
	struct fx f;

	setup(&f, 1);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_task_sealed(t, 8, "a", 1), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "only 7 requested"), "%s", sfs_last_error());
	/* a fresh start: -ENOENT, said as such */
	cr_assert_eq(sfs_task_restored(t, 0, &v), -ENOENT);
	cr_assert_null(strstr(sfs_last_error(), "requested"), "stale: %s", sfs_last_error());
	cr_assert_not_null(strstr(sfs_last_error(), "fresh start"), "%s", sfs_last_error());
	cr_assert_eq(sfs_task_io(t, -EINVAL), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "sfs_task_io"), "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_close(NULL), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "sfs_worker_close"), "%s", sfs_last_error());
	cr_assert_eq(sfs_detach(NULL), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "sfs_detach"), "%s", sfs_last_error());
	cr_assert_eq(sfs_query_close(NULL), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "sfs_query_close"), "%s", sfs_last_error());
	sfs_task_close(t);
	teardown(&f);
}
