/*
 * test_flush_rollback.c — the compactor's side of a rollback in place
 * (shm/ckpt.h, step b; compactor/flush.h): an in-process flusher over a
 * recording target (the memory target with pin and rollback that record
 * their calls), the checkpointer's words set by hand.  The version at open
 * is pinned (pin 0); each completed checkpoint is pinned once; a rollback
 * the checkpointer has answered returns the target to the pinned version,
 * drops every SEALED buffer before anything of it is applied, moves the
 * flushed seq past the dropped seals, and answers with 0; a checkpoint
 * that is not the pinned one, or a target's failed rollback, is answered
 * with the error (the supervisor then restarts the group) and the target
 * is left alone.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "common/err.h"
#include "common/fs.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "shm/ckpt.h"
#include "store/memory/memory.h"
#include "store/target.h"
#include "tests/helpers.h"
#include "tests/state_helpers.h"
#include "worker/state.h"
#include "worker/wctl.h"

/* state_helpers.h's helpers this file does not call */
static void *const unused_helpers[] __attribute__((unused)) = {
	(void *)start_compactor, (void *)wait_flushed, (void *)inproc_drain
};

static struct sfs_seg seg;
static struct sfs_ckpt *ck;
static char data[PATH_MAX];

/* The recording target: the memory target's writer behind a record. */
struct rec {
	struct sfs_target_writer *inner;
	uint64_t pins[16];
	unsigned npins;
	unsigned rollbacks;
	uint64_t applied_max;   /* highest seq ever applied */
	uint64_t committed;     /* last seq committed */
	uint64_t pinned_seq;    /* committed at the last pin */
	int rollback_rc;        /* what rollback returns */
};

static struct rec rec;

static int r_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		  const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	int rc = sfs_target_memory.open(s, worker, self, cfg, &rec.inner);

	*out = (struct sfs_target_writer *)(void *)&rec;
	return rc;
}

static int r_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		   uint64_t seq)
{
	if (seq > rec.applied_max)
		rec.applied_max = seq;
	return sfs_target_memory.apply(rec.inner, v, n, seq);
}

static int r_commit(struct sfs_target_writer *w, uint64_t seq)
{
	int rc = sfs_target_memory.commit(rec.inner, seq);

	if (rc == 0)
		rec.committed = seq;
	return rc;
}

static int r_busy(struct sfs_target_writer *w)
{
	return sfs_target_memory.busy(rec.inner);
}

static void r_close(struct sfs_target_writer *w)
{
	sfs_target_memory.close(rec.inner);
}

static int r_pin(struct sfs_target_writer *w, uint64_t id)
{
	if (rec.npins < 16)
		rec.pins[rec.npins++] = id;
	rec.pinned_seq = rec.committed;
	return 0;
}

static int r_rollback(struct sfs_target_writer *w, uint64_t *seq)
{
	rec.rollbacks++;
	if (rec.rollback_rc)
		return sfs__err(rec.rollback_rc, "recording target: rollback refused");
	*seq = rec.pinned_seq;
	return 0;
}

static struct sfs_target_ops recording;

static void setup(void)
{
	th_job(job, sizeof(job), "frollback");
	snprintf(data, sizeof(data), "/tmp/sfs-%s", job);
	cr_assert_eq(sfs_seg_create(job, 0, 64u << 20, 1, &seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_ckpt_create(&seg, 1, &ck), 0);
	ck->ck_interval_ms = 1000;
	ck->ck_max_parallelism = 128;
	snprintf(ck->ck_data_dir, sizeof(ck->ck_data_dir), "%.200s", data);
	memset(&rec, 0, sizeof(rec));
	recording = sfs_target_memory;
	recording.name = "memory (recording)";
	recording.open = r_open;
	recording.apply = r_apply;
	recording.commit = r_commit;
	recording.busy = r_busy;
	recording.close = r_close;
	recording.snapshot = NULL;	/* no staging: the test completes checkpoints by hand */
	recording.snapshot_begin = NULL;
	recording.snapshot_poll = NULL;
	recording.pin = r_pin;
	recording.rollback = r_rollback;
}

static void teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	sfs_rmtree(data);
}

TestSuite(flush_rollback, .init = setup, .fini = teardown, .timeout = 60);

/* Steps the flusher until it is idle (bounded). */
static void settle(struct inproc *p, sfs_ctx_t *c)
{
	for (int i = 0; i < 2000; i++) {
		int pending = 0, rc;

		sfs_ctx_quiescent(c);
		rc = sfs_flusher_step(&p->f, 1000, &pending);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (rc == 0 && !pending)
			return;
		usleep(200);
	}
	cr_assert_fail("the flusher never went idle");
}

static void put_and_seal(sfs_ctx_t *c, uint32_t sid, int k, uint64_t barrier)
{
	char key[16], val[16];

	snprintf(key, sizeof(key), "k%d", k);
	snprintf(val, sizeof(val), "v%d", k);
	cr_assert_eq(sfs_value_put(c, sid, 0, key, strlen(key), val, strlen(val)), 0);
	sfs_store_release(&ck->ck_barrier_req, barrier);	/* requested, as the checkpointer would */
	cr_assert_eq(sfs_barrier(c, barrier), 0, "%s", sfs_last_error());
}

static unsigned sealed_bufs(const struct sfs_wctl *ctl)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < ctl->wc_nbufs; i++)
		n += sfs_load_acquire(&ctl->wc_buf[i].cb_state) == SFS_BUF_SEALED;
	return n;
}

/* Checkpoint 1 complete and pinned, barrier 2 sealed but not flushed:
 * then the checkpointer's answer of rollback 1, naming checkpoint @to. */
static void scenario(struct inproc *p, sfs_ctx_t **c, struct sfs_wctl **ctl, uint64_t to)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_ring *ring;
	struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
	uint32_t sid;

	o.parallelism = 1;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(*c, "v", SFS_STATE_VALUE, &sid), 0);
	cr_assert_eq(sfs_wctl_attach(&seg, 0, ctl, &ring, bufs), 0);
	inproc_start(p);
	p->f.ops = &recording;
	settle(p, *c);
	cr_assert_eq(rec.npins, 1, "the version at open is pinned once");
	cr_assert_eq(rec.pins[0], 0);

	put_and_seal(*c, sid, 1, 1);
	settle(p, *c);
	cr_assert_eq(rec.committed, 1);
	sfs_store_release(&ck->ck_done, 1);
	settle(p, *c);
	cr_assert_eq(rec.npins, 2, "checkpoint 1 pinned once it completed");
	cr_assert_eq(rec.pins[1], 1);
	settle(p, *c);
	cr_assert_eq(rec.npins, 2, "and only once");

	/* barrier 2 sealed, then the worker is gone: nothing of it may land */
	put_and_seal(*c, sid, 2, 2);
	cr_assert_eq(sealed_bufs(*ctl), 1);
	sfs_store_release(&ck->ck_rb_req, 1);
	sfs_store_relaxed(&ck->ck_rb_to, to);
	sfs_store_release(&ck->ck_rb_ack, 1);
	settle(p, *c);
}

Test(flush_rollback, an_answered_rollback_returns_to_the_pin_and_drops_the_sealed_buffers)
{
	struct inproc p;
	sfs_ctx_t *c;
	struct sfs_wctl *ctl;

	scenario(&p, &c, &ctl, 1);
	cr_assert_eq(rec.rollbacks, 1);
	cr_assert_eq(ck->ck_w[0].cw_rb_ack, 1, "answered");
	cr_assert_eq(ck->ck_w[0].cw_rb_rc, 0);
	cr_assert_eq(rec.applied_max, 1, "the sealed buffer of barrier 2 was applied (seq %llu)",
		     (unsigned long long)rec.applied_max);
	cr_assert_eq(sealed_bufs(ctl), 0, "the sealed buffer is dropped");
	cr_assert_eq(ctl->wc_flushed_seq, ctl->wc_seq, "the flushed seq passes the dropped seal");
	settle(&p, c);
	cr_assert_eq(rec.rollbacks, 1, "a rollback is answered once");
	inproc_stop(&p);
	sfs_worker_close(c);
}

Test(flush_rollback, a_checkpoint_not_pinned_is_answered_with_enoent)
{
	struct inproc p;
	sfs_ctx_t *c;
	struct sfs_wctl *ctl;

	scenario(&p, &c, &ctl, 7);
	cr_assert_eq(rec.rollbacks, 0, "the target is not asked");
	cr_assert_eq(ck->ck_w[0].cw_rb_ack, 1);
	cr_assert_eq(ck->ck_w[0].cw_rb_rc, -ENOENT);
	inproc_stop(&p);
	sfs_worker_close(c);
}

Test(flush_rollback, a_failed_rollback_is_answered_with_its_error)
{
	struct inproc p;
	sfs_ctx_t *c;
	struct sfs_wctl *ctl;

	rec.rollback_rc = -EIO;
	scenario(&p, &c, &ctl, 1);
	cr_assert_eq(rec.rollbacks, 1);
	cr_assert_eq(ck->ck_w[0].cw_rb_ack, 1);
	cr_assert_eq(ck->ck_w[0].cw_rb_rc, -EIO);
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* The flusher stepped while the worker of this process is halted: no
 * quiescent point of its context (a halted worker has none). */
static void settle_halted(struct inproc *p)
{
	for (int i = 0; i < 2000; i++) {
		int pending = 0, rc = sfs_flusher_step(&p->f, 1000, &pending);

		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (rc == 0 && !pending)
			return;
		usleep(200);
	}
	cr_assert_fail("the flusher never went idle");
}

static int get_str(sfs_ctx_t *c, uint32_t sid, const char *key, char *out, size_t n)
{
	struct sfs_view v;
	int rc = sfs_value_get(c, sid, 0, key, strlen(key), &v);

	if (rc == 1)
		snprintf(out, n, "%.*s", (int)v.len, (const char *)v.data);
	return rc;	/* 1 present, 0 absent */
}

/*
 * The worker's side (include/sfs.h, sfs_worker_rollback): a worker that
 * survives another's death halts in its process.  Checkpoint 1 holds
 * k1 = v1; barrier 2's buffer (k2, and k1 = v2) is sealed; the active
 * buffer holds k3 and k1 = v3, which the cache has seen.  The first call
 * drops the active buffer and the cache, acks the halt, and times out
 * while the group has not rolled back; the flusher rolls back meanwhile
 * (the worker offline, not holding its grace periods); a second call
 * drops nothing twice, and once the supervisor says go the worker reads
 * checkpoint 1's state only, its phase RUNNING again.
 */
Test(flush_rollback, a_halted_worker_drops_its_writes_and_cache_and_reads_the_rolled_back_store)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_ring *ring;
	struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
	struct sfs_vcache_stats cs;
	struct sfs_wctl *ctl;
	struct inproc p;
	sfs_task_t *t;
	sfs_ctx_t *c;
	uint32_t sid;
	char v[16];

	o.parallelism = 1;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &sid), 0);
	cr_assert_eq(sfs_wctl_attach(&seg, 0, &ctl, &ring, bufs), 0);
	cr_assert_eq(sfs_worker_task(c, &t), 0, "%s", sfs_last_error());
	cr_assert_eq(ck->ck_w[0].cw_rb_inproc, 0, "a task open says nothing of rollbacks");
	cr_assert_eq(sfs_task_rollback_enable(t), 0);
	cr_assert_eq(ck->ck_w[0].cw_rb_inproc, 1);
	cr_assert_eq(sfs_task_rollback_requested(t), 0);
	cr_assert_eq(sfs_worker_rollback(c, t, 1000), SFS_EUSAGE, "none requested");
	inproc_start(&p);
	p.f.ops = &recording;
	settle(&p, c);

	cr_assert_eq(sfs_value_put(c, sid, 0, "k1", 2, "v1", 2), 0);
	sfs_store_release(&ck->ck_barrier_req, 1);
	cr_assert_eq(sfs_barrier(c, 1), 0, "%s", sfs_last_error());
	settle(&p, c);
	sfs_store_release(&ck->ck_done, 1);
	settle(&p, c);
	cr_assert_eq(rec.npins, 2);
	/* k1 and k9 (absent) read from the store: cached at the next
	 * quiescent point; k9 is not written again, so it stays cached */
	cr_assert_eq(get_str(c, sid, "k1", v, sizeof(v)), 1);
	cr_assert_eq(get_str(c, sid, "k9", v, sizeof(v)), 0);
	sfs_ctx_quiescent(c);
	sfs_vcache_stats(c->cache, &cs);
	cr_assert_geq(cs.entries, 1, "the store's read is cached");
	cr_assert_eq(sfs_value_put(c, sid, 0, "k2", 2, "v2", 2), 0);
	cr_assert_eq(sfs_value_put(c, sid, 0, "k1", 2, "v2", 2), 0);
	sfs_store_release(&ck->ck_barrier_req, 2);
	cr_assert_eq(sfs_barrier(c, 2), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_value_put(c, sid, 0, "k3", 2, "v3", 2), 0);
	cr_assert_eq(sfs_value_put(c, sid, 0, "k1", 2, "v3", 2), 0);
	sfs_ctx_quiescent(c);
	cr_assert_eq(get_str(c, sid, "k1", v, sizeof(v)), 1);
	cr_assert_str_eq(v, "v3");
	sfs_ctx_quiescent(c);
	cr_assert_eq(sealed_bufs(ctl), 1);

	/* the supervisor asks worker 0 to halt for rollback 1 */
	sfs_store_release(&ck->ck_rb_halt, 1);
	cr_assert_eq(sfs_task_rollback_requested(t), 1);
	cr_assert_eq(sfs_worker_rollback(c, t, 20 * 1000000ull), SFS_ETIMEDOUT);
	cr_assert_eq(ck->ck_w[0].cw_rb_halted, 1, "the halt is acked");
	cr_assert_eq(c->rb_dropped, 1);
	/* the rest of the rollback: the checkpointer's answer, the flusher's */
	sfs_store_release(&ck->ck_w[0].cw_phase, SFS_CKW_STARTING);
	sfs_store_release(&ck->ck_rb_req, 1);
	sfs_store_relaxed(&ck->ck_rb_to, 1);
	sfs_store_release(&ck->ck_rb_ack, 1);
	settle_halted(&p);
	cr_assert_eq(ck->ck_w[0].cw_rb_ack, 1, "the flusher answered while the worker was halted");
	cr_assert_eq(sealed_bufs(ctl), 0);
	cr_assert_eq(rec.applied_max, 1, "nothing after checkpoint 1 was applied");
	cr_assert_eq(sfs_worker_rollback(c, t, 5 * 1000000ull), SFS_ETIMEDOUT, "no go yet");
	sfs_store_release(&ck->ck_rb_go, 1);
	cr_assert_eq(sfs_worker_rollback(c, t, 1000 * 1000000ull), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_task_rollback_requested(t), 0, "handled");
	cr_assert_eq(ck->ck_w[0].cw_phase, SFS_CKW_RUNNING);
	/* what it cached may be a dropped version's (a buffer flushed after
	 * the checkpoint): nothing cached survives */
	sfs_vcache_stats(c->cache, &cs);
	cr_assert_eq(cs.entries, 0, "%llu cached entries survived the rollback",
		     (unsigned long long)cs.entries);

	cr_assert_eq(get_str(c, sid, "k1", v, sizeof(v)), 1);
	cr_assert_str_eq(v, "v1", "checkpoint 1's value, not a dropped buffer's or the cache's");
	cr_assert_eq(get_str(c, sid, "k2", v, sizeof(v)), 0, "barrier 2's buffer is gone");
	cr_assert_eq(get_str(c, sid, "k3", v, sizeof(v)), 0, "the active buffer is gone");
	sfs_ctx_quiescent(c);
	/* and the worker runs on: a write and a barrier after the rollback */
	cr_assert_eq(sfs_value_put(c, sid, 0, "k4", 2, "v4", 2), 0);
	sfs_store_release(&ck->ck_barrier_req, 3);
	cr_assert_eq(sfs_barrier(c, 3), 0, "%s", sfs_last_error());
	settle(&p, c);
	cr_assert_eq(get_str(c, sid, "k4", v, sizeof(v)), 1);
	cr_assert_str_eq(v, "v4");
	sfs_task_close(t);
	inproc_stop(&p);
	sfs_worker_close(c);
}
