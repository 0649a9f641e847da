/*
 * test_flush_threads.c — the compactor's maintenance threads
 * (compactor/flush.h): with N threads each worker's store is written by
 * one thread only, thread w mod N, in seq order, and the state flushed is
 * the one thread would flush; the main thread's step returns only once
 * every thread has moved (a stuck thread stops it, so it stops the beat),
 * and a long step's sfs_child_progress() counts as moving; bad counts are
 * refused.  The memory target runs behind a wrapper that records, per
 * writer, the thread and the seqs of its calls.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "shm/child.h"
#include "tests/helpers.h"
#include "store/memory/memory.h"
#include "store/target.h"
#include "tests/state_helpers.h"
#include "worker/state.h"

#define SEG_MB 256
#define NW 6        /* workers */
#define NT 4        /* threads: 0 and 1 own two workers each, 2 and 3 one */
#define KEYS 64

static struct sfs_seg seg;
/* state_helpers.h's helpers this file does not call */
static void *const unused_helpers[] __attribute__((unused)) = {
	(void *)inproc_drain, (void *)start_compactor, (void *)wait_flushed
};

static void setup(void)
{
	th_job(job, sizeof(job), "fthreads");
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
}

static void teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

TestSuite(flush_threads, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the recording wrapper ------------------------------------------------------------ */

struct rec {
	struct sfs_target_writer *inner;
	uint32_t worker;
	pthread_t owner;        /* the thread of its first call */
	int calls, foreign;     /* calls; of them, from another thread */
	uint64_t last_apply, last_commit;
	int out_of_order;       /* an apply older than the last commit, a commit not newer */
	int commits;
};

static struct rec recs[NW];
static pthread_mutex_t recs_mu = PTHREAD_MUTEX_INITIALIZER;
/* The stuck-thread test: worker HOLD_W's apply waits while hold is set,
 * calling sfs_child_progress() once each time life is bumped. */
#define HOLD_W 1
static volatile int hold, life, in_hold;

static struct rec *rec_of(struct sfs_target_writer *w)
{
	return (struct rec *)(void *)w;
}

static void seen(struct rec *r)
{
	pthread_mutex_lock(&recs_mu);
	if (r->calls++ == 0)
		r->owner = pthread_self();
	else if (!pthread_equal(r->owner, pthread_self()))
		r->foreign++;
	pthread_mutex_unlock(&recs_mu);
}

static int w_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		  const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct rec *r = &recs[worker];
	int rc = sfs_target_memory.open(s, worker, self, cfg, &r->inner);

	if (rc)
		return rc;
	r->worker = worker;
	seen(r);
	*out = (struct sfs_target_writer *)(void *)r;
	return 0;
}

static int w_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		   uint64_t seq)
{
	struct rec *r = rec_of(w);

	seen(r);
	if (seq <= r->last_commit || seq < r->last_apply)
		r->out_of_order++;
	r->last_apply = seq;
	if (r->worker == HOLD_W && hold) {
		int seen_life = 0;

		in_hold = 1;
		while (hold) {
			if (life != seen_life) {
				seen_life = life;
				sfs_child_progress();
			}
			usleep(1000);
		}
		in_hold = 0;
	}
	return sfs_target_memory.apply(r->inner, v, n, seq);
}

static int w_commit(struct sfs_target_writer *w, uint64_t seq)
{
	struct rec *r = rec_of(w);
	int rc;

	seen(r);
	if (seq <= r->last_commit || seq != r->last_apply)
		r->out_of_order++;
	rc = sfs_target_memory.commit(r->inner, seq);
	if (rc == 0) {
		r->last_commit = seq;
		r->commits++;
	}
	return rc;
}

static int w_busy(struct sfs_target_writer *w)
{
	seen(rec_of(w));
	return sfs_target_memory.busy(rec_of(w)->inner);
}

static void w_close(struct sfs_target_writer *w)
{
	sfs_target_memory.close(rec_of(w)->inner);
}

static struct sfs_target_ops wrapped;

static void flusher_start(struct inproc *p, unsigned threads)
{
	wrapped = sfs_target_memory;
	wrapped.name = "memory (recorded)";
	wrapped.open = w_open;
	wrapped.apply = w_apply;
	wrapped.commit = w_commit;
	wrapped.busy = w_busy;
	wrapped.close = w_close;
	wrapped.snapshot = NULL;
	memset(recs, 0, sizeof(recs));
	inproc_start(p);
	p->f.ops = &wrapped;
	cr_assert_eq(sfs_flusher_threads(&p->f, threads, 20 * 1000000ull), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_flusher_nthreads(&p->f), threads > 1 ? threads : 0);
}

/* Step until every worker's sealed buffers are flushed and freed. */
static void drain(struct inproc *p, sfs_ctx_t **c)
{
	uint64_t deadline = sfs_now_ns() + 20000000000ull;

	while (sfs_now_ns() < deadline) {
		int pending = 0, rc, sealed = 0;

		for (int w = 0; w < NW; w++) {
			struct sfs_worker_stats ws;

			sfs_ctx_quiescent(c[w]);
			sfs_worker_stats(c[w], &ws);
			/* not sealed, not retiring: all free but the active one */
			sealed += ws.buffers_sealed + (small_opts().buffers - 1 - ws.buffers_free);
		}
		rc = sfs_flusher_step(&p->f, 100, &pending);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (sealed == 0 && rc == 0 && !pending)
			return;
		if (rc == 0)
			usleep(200);
	}
	cr_assert_fail("flusher never went idle");
}

/* Key @k of worker @w's own key groups ("w<w>k<n>", the k-th such n). */
static void owned_key(int w, uint32_t k, char *key, size_t n)
{
	for (uint32_t i = 0, found = 0;; i++) {
		snprintf(key, n, "w%dk%u", w, i);
		if (sfs_kg_owner(sfs_key_group(key, strlen(key), 128), NW, 128) == (uint32_t)w &&
		    found++ == k)
			return;
	}
}

/* Every worker counts its own keys with its own deltas over 8 barriers,
 * two sealed at a time; returns the flushed totals, checked against the
 * model. */
static void run_counts(unsigned threads, int64_t out[NW][KEYS])
{
	struct sfs_worker_opts o = small_opts();

	o.parallelism = NW;
	sfs_ctx_t *c[NW];
	uint32_t st[NW];
	int64_t model[NW][KEYS] = { { 0 } };
	struct inproc p;
	uint64_t seed = 42;

	for (int w = 0; w < NW; w++) {
		cr_assert_eq(sfs_worker_open(job, 0, (uint32_t)w, &o, &c[w]), 0, "%s",
			     sfs_last_error());
		cr_assert_eq(sfs_state_register(c[w], "cnt", SFS_STATE_COUNTER, &st[w]), 0);
	}
	flusher_start(&p, threads);
	for (uint64_t b = 1; b <= 8; b++) {
		for (int w = 0; w < NW; w++) {
			for (int i = 0; i < 500; i++) {
				uint32_t k = (uint32_t)(th_rand(&seed) % KEYS);
				int64_t d = (int64_t)(th_rand(&seed) % 100) - 30;
				char key[16];

				owned_key(w, k, key, sizeof(key));
				cr_assert_eq(sfs_counter_add(c[w], st[w], 0, key, strlen(key), d), 0);
				model[w][k] += d;
			}
			cr_assert_eq(sfs_barrier(c[w], b), 0, "%s", sfs_last_error());
		}
		if (b % 2 == 0)
			drain(&p, c);
	}
	for (int w = 0; w < NW; w++)
		for (uint32_t k = 0; k < KEYS; k++) {
			char key[16];
			int64_t v = 0;

			owned_key(w, k, key, sizeof(key));
			sfs_counter_get(c[w], st[w], 0, key, strlen(key), &v);
			cr_assert_eq(v, model[w][k], "%u threads: worker %d key %u: %lld, want %lld",
				     threads, w, k, (long long)v, (long long)model[w][k]);
			out[w][k] = v;
		}
	for (int w = 0; w < NW; w++) {
		struct sfs_worker_stats ws;

		sfs_worker_stats(c[w], &ws);
		cr_assert_eq(ws.flushed_seq, 8, "worker %d flushed up to seq %llu", w,
			     (unsigned long long)ws.flushed_seq);
	}
	inproc_stop(&p);
	for (int w = 0; w < NW; w++)
		sfs_worker_close(c[w]);
}

Test(flush_threads, each_worker_has_one_thread_w_mod_n_in_seq_order)
{
	static int64_t one[NW][KEYS], four[NW][KEYS];
	struct rec r4[NW];
	pthread_t me = pthread_self();

	run_counts(NT, four);
	memcpy(r4, recs, sizeof(r4));
	for (int w = 0; w < NW; w++) {
		cr_assert_gt(r4[w].commits, 0, "worker %d: nothing committed", w);
		cr_assert_eq(r4[w].foreign, 0, "worker %d: %d calls from a second thread", w,
			     r4[w].foreign);
		cr_assert_eq(r4[w].out_of_order, 0, "worker %d: %d calls out of seq order", w,
			     r4[w].out_of_order);
		cr_assert(!pthread_equal(r4[w].owner, me), "worker %d flushed by the main thread", w);
		for (int v = 0; v < NW; v++)
			cr_assert_eq(pthread_equal(r4[w].owner, r4[v].owner) != 0, w % NT == v % NT,
				     "workers %d and %d: %s thread", w, v,
				     w % NT == v % NT ? "want the same" : "want different");
	}

	/* One thread: none started, the main thread flushes all, same state. */
	teardown();
	setup();
	run_counts(1, one);
	for (int w = 0; w < NW; w++) {
		cr_assert(pthread_equal(recs[w].owner, me), "1 thread: worker %d not on main", w);
		cr_assert_eq(recs[w].out_of_order, 0);
	}
	cr_assert_eq(memcmp(one, four, sizeof(one)), 0);
}

struct stepper {
	struct inproc *p;
	volatile int done;
	int rc;
};

static void *step_once(void *arg)
{
	struct stepper *s = arg;
	int pending;

	s->rc = sfs_flusher_step(&s->p->f, 100, &pending);
	s->done = 1;
	return NULL;
}

static int wait_for(volatile int *flag, int ms)
{
	for (int i = 0; i < ms && !*flag; i++)
		usleep(1000);
	return *flag;
}

Test(flush_threads, a_stuck_thread_holds_the_main_step_and_progress_releases_it)
{
	struct sfs_worker_opts o = small_opts();

	o.parallelism = NW;
	sfs_ctx_t *c[NW];
	uint32_t st;
	struct inproc p;
	struct stepper s = { .p = &p };
	pthread_t th;

	for (int w = 0; w < NW; w++) {
		cr_assert_eq(sfs_worker_open(job, 0, (uint32_t)w, &o, &c[w]), 0, "%s",
			     sfs_last_error());
		cr_assert_eq(sfs_state_register(c[w], "cnt", SFS_STATE_COUNTER, &st), 0);
	}
	flusher_start(&p, NT);
	drain(&p, c);	/* every worker opened */
	hold = 1;
	{
		char key[16];

		owned_key(HOLD_W, 0, key, sizeof(key));
		cr_assert_eq(sfs_counter_add(c[HOLD_W], st, 0, key, strlen(key), 1), 0);
	}
	cr_assert_eq(sfs_barrier(c[HOLD_W], 1), 0);
	cr_assert(wait_for(&in_hold, 5000), "worker %d's thread never applied", HOLD_W);

	/* Its thread is inside one step: the main step must not return... */
	pthread_create(&th, NULL, step_once, &s);
	cr_assert(!wait_for(&s.done, 300), "the main step returned past a stuck thread");
	/* ...until that thread shows life, and then as busy (> 0). */
	life++;
	cr_assert(wait_for(&s.done, 5000), "sfs_child_progress did not release the main step");
	pthread_join(th, NULL);
	cr_assert_gt(s.rc, 0);

	hold = 0;
	cr_assert(wait_for((volatile int *)&recs[HOLD_W].commits, 5000));
	drain(&p, c);
	cr_assert_eq(recs[HOLD_W].foreign, 0);
	inproc_stop(&p);
	for (int w = 0; w < NW; w++)
		sfs_worker_close(c[w]);
}

Test(flush_threads, bad_counts_are_refused)
{
	struct inproc p;

	inproc_start(&p);
	cr_assert_eq(sfs_flusher_threads(&p.f, SFS_FLUSH_MAX_WORKERS + 1, 0), SFS_EUSAGE);
	cr_assert_eq(sfs_flusher_nthreads(&p.f), 0);
	cr_assert_eq(sfs_flusher_threads(&p.f, 1, 0), 0);
	cr_assert_eq(sfs_flusher_nthreads(&p.f), 0, "1: no thread");
	inproc_stop(&p);
}
