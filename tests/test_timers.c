/*
 * test_timers.c — runtime/timers.h over a real backend: `memory` (sfs, with
 * an in-process compactor the test steps, so barriers seal and flush the
 * timers into the store) and `rocksdb-direct`.  Registration is a set
 * (duplicates fire once, also after a barrier and a reopen), firing is in
 * (timestamp, key bytes) order and only up to the watermark, deletes hold,
 * a reopened service finds its pending timers in state, callbacks may
 * register and delete (Flink's semantics), keys of other workers and empty
 * keys are refused; and a randomized run against a plain model with
 * barriers and reopens at random.
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

#include "common/err.h"
#include "runtime/backend.h"
#include "runtime/timers.h"
#include "runtime/util.h"
#include "sfs.h"
#include "common/keygroup.h"

#define FX_EXTRA                                                                    \
	struct rt_op op;                                                            \
	struct rt_timers *t;
#include "tests/backend_fixture.h"

static void setup(void)
{
	fx_setup("timers");
}

TestSuite(timers, .init = setup, .fini = fx_teardown, .timeout = 60);

#define BOTH(fn)                                                                    \
	Test(timers, fn##_memory) { fn("memory"); }                                 \
	Test(timers, fn##_rocksdb) { fn("rocksdb-direct"); }

/* ---- fixture ------------------------------------------------------------------ */

static void fx_open_worker(struct fx *f, const char *name, uint32_t worker, uint32_t workers)
{
	cr_assert_eq(fx_open_backend(f, name, worker, workers), 0, "%s: %s", name,
		     rt_last_error());
	f->op = (struct rt_op){ .st = f->b, .so = f->ops, .worker = worker, .workers = workers,
				.maxp = SFS_MAX_PARALLELISM_DEFAULT };
	cr_assert_eq(rt_timers_open(&f->op, "t", &f->t), 0, "%s", rt_last_error());
}

static void fx_open(struct fx *f, const char *name)
{
	fx_open_worker(f, name, 0, 1);
}

/* A new handle on the same state: the pending timers come from the index. */
static void fx_reopen(struct fx *f)
{
	rt_timers_close(f->t);
	f->t = NULL;
	cr_assert_eq(rt_timers_open(&f->op, "t", &f->t), 0, "%s", rt_last_error());
}

/* A barrier, then everything sealed flushed: reads come from the store. */
static void fx_barrier(struct fx *f)
{
	fx_barrier_only(f);
	fx_drain(f);
}

static void fx_close(struct fx *f)
{
	rt_timers_close(f->t);
	fx_close_backend(f);
}

static void key_of(unsigned char *k, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		k[i] = (unsigned char)v;
}

static void reg(struct fx *f, uint64_t key, int64_t ts)
{
	unsigned char k[8];

	key_of(k, key);
	cr_assert_eq(rt_timer_register(f->t, k, 8, ts), 0, "register %llu@%lld: %s",
		     (unsigned long long)key, (long long)ts, rt_last_error());
}

static void del(struct fx *f, uint64_t key, int64_t ts)
{
	unsigned char k[8];

	key_of(k, key);
	cr_assert_eq(rt_timer_delete(f->t, k, 8, ts), 0, "delete %llu@%lld: %s",
		     (unsigned long long)key, (long long)ts, rt_last_error());
}

/* What fired, in order: "key@ts," each. */
struct log {
	char s[1 << 16];
	int n;
};

static int record(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct log *l = arg;
	uint64_t v = 0;
	size_t len = strlen(l->s);

	cr_assert_eq(klen, 8, "a key of %u bytes", klen);
	for (int i = 0; i < 8; i++)
		v = v << 8 | ((const unsigned char *)key)[i];
	snprintf(l->s + len, sizeof(l->s) - len, "%llu@%lld,", (unsigned long long)v,
		 (long long)ts);
	l->n++;
	return 0;
}

static void expect_fire(struct fx *f, int64_t wm, const char *want)
{
	struct log l = { .n = 0 };

	l.s[0] = 0;
	cr_assert_eq(rt_timers_advance(f->t, wm, record, &l), 0, "%s", rt_last_error());
	cr_assert_str_eq(l.s, want, "advance to %lld", (long long)wm);
	f->ops->quiescent(f->b);
}

/* ---- cases -------------------------------------------------------------------- */

/* A timer registered many times fires once; keys of one time fire in byte
 * order, times in order; the next time is the earliest pending. */
static void registration_is_a_set(const char *name)
{
	struct fx f;

	fx_open(&f, name);
	cr_assert_eq(rt_timers_next(f.t), INT64_MAX);
	for (int i = 0; i < 3; i++) {
		reg(&f, 7, 100);
		reg(&f, 300, 100);
		reg(&f, 7, 200);
	}
	reg(&f, 5, 100);
	cr_assert_eq(rt_timers_next(f.t), 100);
	fx_barrier(&f);
	reg(&f, 7, 200);	/* pending in the flushed store */
	fx_reopen(&f);		/* a fresh filter: the state path */
	reg(&f, 7, 100);
	reg(&f, 5, 100);
	cr_assert_eq(rt_timers_next(f.t), 100);
	expect_fire(&f, 1000, "5@100,7@100,300@100,7@200,");
	expect_fire(&f, 2000, "");
	cr_assert_eq(rt_timers_next(f.t), INT64_MAX);
	fx_close(&f);
}
BOTH(registration_is_a_set)

/* Only timers at or below the watermark fire; the boundary is inclusive;
 * an advance that does not move fires nothing twice. */
static void fires_up_to_the_watermark(const char *name)
{
	struct fx f;

	fx_open(&f, name);
	reg(&f, 1, 10);
	reg(&f, 2, 20);
	reg(&f, 3, 30);
	reg(&f, 4, -5);		/* times are signed */
	expect_fire(&f, -6, "");
	expect_fire(&f, 19, "4@-5,1@10,");
	expect_fire(&f, 19, "");
	cr_assert_eq(rt_timers_next(f.t), 20);
	expect_fire(&f, 20, "2@20,");
	/* late: below what has fired already, it fires at the next advance */
	reg(&f, 5, 15);
	cr_assert_eq(rt_timers_next(f.t), 15);
	expect_fire(&f, 20, "5@15,");
	expect_fire(&f, INT64_MAX, "3@30,");
	fx_close(&f);
}
BOTH(fires_up_to_the_watermark)

/* Timers registered before a barrier (flushed to the store) and after it,
 * and deletes on both sides, survive a reopen of the service. */
static void across_barriers_and_reopen(const char *name)
{
	struct fx f;

	fx_open(&f, name);
	for (uint64_t k = 1; k <= 50; k++)
		reg(&f, k, (int64_t)(k % 5) * 1000);
	del(&f, 10, 0);
	fx_barrier(&f);
	for (uint64_t k = 51; k <= 60; k++)
		reg(&f, k, 1000);
	del(&f, 11, 1000);	/* registered before the barrier */
	del(&f, 51, 1000);	/* after it */
	del(&f, 52, 999);	/* no such timer */
	fx_barrier(&f);
	fx_reopen(&f);
	cr_assert_eq(rt_timers_next(f.t), 0);
	expect_fire(&f, 0, "5@0,15@0,20@0,25@0,30@0,35@0,40@0,45@0,50@0,");
	fx_barrier(&f);
	fx_reopen(&f);
	expect_fire(&f, 1000, "1@1000,6@1000,16@1000,21@1000,26@1000,31@1000,36@1000,41@1000,"
			      "46@1000,52@1000,53@1000,54@1000,55@1000,56@1000,57@1000,58@1000,"
			      "59@1000,60@1000,");
	fx_reopen(&f);
	cr_assert_eq(rt_timers_next(f.t), 2000);
	expect_fire(&f, 4000, "2@2000,7@2000,12@2000,17@2000,22@2000,27@2000,32@2000,37@2000,"
			      "42@2000,47@2000,3@3000,8@3000,13@3000,18@3000,23@3000,28@3000,"
			      "33@3000,38@3000,43@3000,48@3000,4@4000,9@4000,14@4000,19@4000,"
			      "24@4000,29@4000,34@4000,39@4000,44@4000,49@4000,");
	fx_barrier(&f);
	fx_reopen(&f);
	cr_assert_eq(rt_timers_next(f.t), INT64_MAX, "fired timers came back");
	expect_fire(&f, INT64_MAX, "");
	fx_close(&f);
}
BOTH(across_barriers_and_reopen)

/* Callbacks that register and delete, as Flink allows. */
struct cb {
	struct fx *f;
	struct log l;
	int first;
	int nested_rc;
};

static int acting(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct cb *c = arg;

	record(&c->l, key, klen, ts);
	if (c->first) {
		c->first = 0;
		reg(c->f, 3, 5);	/* below the watermark: fires in this advance */
		reg(c->f, 2, 10);	/* pending in this batch: no second firing */
		del(c->f, 4, 10);	/* pending in this batch: never fires */
		reg(c->f, 1, 10);	/* already fired: fires again */
		reg(c->f, 6, 11);	/* above the watermark: waits */
		c->nested_rc = rt_timers_advance(c->f->t, 100, record, &c->l);
	}
	return 0;
}

static void callbacks_register_and_delete(const char *name)
{
	struct fx f;
	struct cb c = { .f = &f, .first = 1 };

	fx_open(&f, name);
	reg(&f, 1, 10);
	reg(&f, 2, 10);
	reg(&f, 4, 10);
	reg(&f, 5, 10);
	cr_assert_eq(rt_timers_advance(f.t, 10, acting, &c), 0, "%s", rt_last_error());
	cr_assert_str_eq(c.l.s, "1@10,2@10,5@10,3@5,1@10,");
	cr_assert_eq(c.nested_rc, SFS_EUSAGE, "a nested advance: %d", c.nested_rc);
	cr_assert_eq(rt_timers_next(f.t), 11);
	expect_fire(&f, 11, "6@11,");
	fx_close(&f);
}
BOTH(callbacks_register_and_delete)

static int stop_at_two(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct log *l = arg;

	record(l, key, klen, ts);
	return l->n == 2 ? -7 : 0;
}

/* A callback's error stops the advance and comes back. */
static void callback_errors_stop(const char *name)
{
	struct fx f;
	struct log l = { .n = 0 };

	fx_open(&f, name);
	reg(&f, 1, 1);
	reg(&f, 2, 1);
	reg(&f, 3, 2);
	cr_assert_eq(rt_timers_advance(f.t, 5, stop_at_two, &l), -7);
	cr_assert_str_eq(l.s, "1@1,2@1,");
	expect_fire(&f, 5, "3@2,");
	fx_close(&f);
}
BOTH(callback_errors_stop)

static int count_any(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	(*(int *)arg)++;
	return 0;
}

/* Keys of another worker's key groups and empty keys are refused; the
 * local key is this worker's and takes timers. */
static void ownership(const char *name)
{
	struct fx f;
	unsigned char k[8];
	const void *lk;
	uint32_t lklen, kg;
	uint64_t mine = 0, theirs = 0;
	int fired = 0;

	fx_open_worker(&f, name, 1, 2);
	for (uint64_t v = 1; !mine || !theirs; v++) {
		key_of(k, v);
		kg = sfs_key_group(k, 8, SFS_MAX_PARALLELISM_DEFAULT);
		if (sfs_kg_owner(kg, 2, SFS_MAX_PARALLELISM_DEFAULT) == 1)
			mine = mine ? mine : v;
		else
			theirs = theirs ? theirs : v;
	}
	key_of(k, theirs);
	cr_assert_eq(rt_timer_register(f.t, k, 8, 1), SFS_EUSAGE);
	cr_assert_eq(rt_timer_delete(f.t, k, 8, 1), SFS_EUSAGE);
	lk = rt_timers_local_key(f.t, &lklen);
	cr_assert_not_null(lk);
	kg = sfs_key_group(lk, lklen, SFS_MAX_PARALLELISM_DEFAULT);
	cr_assert_eq(sfs_kg_owner(kg, 2, SFS_MAX_PARALLELISM_DEFAULT), 1);
	if (sfs_kg_owner(sfs_key_group("", 0, SFS_MAX_PARALLELISM_DEFAULT), 2,
			 SFS_MAX_PARALLELISM_DEFAULT) == 1)
		cr_assert_eq(rt_timer_register(f.t, "", 0, 1), SFS_EUSAGE);
	cr_assert_eq(rt_timer_register(f.t, lk, lklen, 3), 0, "%s", rt_last_error());
	reg(&f, mine, 2);
	fx_barrier(&f);
	fx_reopen(&f);
	cr_assert_eq(rt_timers_advance(f.t, 3, count_any, &fired), 0, "%s", rt_last_error());
	cr_assert_eq(fired, 2);
	fx_close(&f);
}
BOTH(ownership)

/* ---- randomized, against a model ------------------------------------------------ */

#define RK 64		/* keys 1..RK */
#define RT 48		/* times 0..RT-1 (x 7: gaps) */
#define ROPS (3000 * th_soak())

struct rmodel {
	uint8_t pending[RK + 1][RT];
};

struct rcheck {
	struct rmodel *m;
	int64_t wm, last_ts;
	uint64_t last_key;
	int n;
};

static int check_one(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rcheck *c = arg;
	uint64_t v = 0;

	cr_assert_eq(klen, 8);
	for (int i = 0; i < 8; i++)
		v = v << 8 | ((const unsigned char *)key)[i];
	cr_assert(ts <= c->wm, "%llu@%lld fired at watermark %lld", (unsigned long long)v,
		  (long long)ts, (long long)c->wm);
	cr_assert(ts % 7 == 0 && ts / 7 < RT && v >= 1 && v <= RK, "no such timer");
	cr_assert(c->m->pending[v][ts / 7], "%llu@%lld fired but is not pending",
		  (unsigned long long)v, (long long)ts);
	cr_assert(c->n == 0 || ts > c->last_ts || (ts == c->last_ts && v > c->last_key),
		  "%llu@%lld after %llu@%lld", (unsigned long long)v, (long long)ts,
		  (unsigned long long)c->last_key, (long long)c->last_ts);
	c->m->pending[v][ts / 7] = 0;
	c->last_ts = ts;
	c->last_key = v;
	c->n++;
	return 0;
}

static void randomized_against_a_model(const char *name)
{
	static struct rmodel m;
	uint64_t seed = (uint64_t)time(NULL), rnd;
	int64_t wm = -1;
	struct fx f;

	if (getenv("SFS_TEST_SEED"))
		seed = strtoull(getenv("SFS_TEST_SEED"), NULL, 0);
	cr_log_info("%s: SFS_TEST_SEED=%llu", name, (unsigned long long)seed);
	rnd = seed;
	memset(&m, 0, sizeof(m));
	fx_open(&f, name);
	for (int op = 0; op < ROPS; op++) {
		uint64_t r = th_rand(&rnd), k = 1 + r % RK;
		int t = (int)((r >> 8) % RT), what = (int)((r >> 20) % 100);

		if (what < 60) {
			reg(&f, k, t * 7);
			m.pending[k][t] = 1;
		} else if (what < 80) {
			del(&f, k, t * 7);
			m.pending[k][t] = 0;
		} else if (what < 95) {
			struct rcheck c = { &m, wm + (int64_t)((r >> 32) % 40), 0, 0, 0 };
			int64_t next = INT64_MAX;

			wm = c.wm;
			cr_assert_eq(rt_timers_advance(f.t, wm, check_one, &c), 0, "%s",
				     rt_last_error());
			for (uint64_t kk = 1; kk <= RK; kk++)
				for (int tt = 0; tt < RT; tt++) {
					cr_assert(!(m.pending[kk][tt] && tt * 7 <= wm),
						  "op %d: %llu@%d pending below watermark %lld", op,
						  (unsigned long long)kk, tt * 7, (long long)wm);
					if (m.pending[kk][tt] && tt * 7 < next)
						next = tt * 7;
				}
			/* deleted timers may leave their time pending: never below */
			cr_assert_leq(rt_timers_next(f.t), next, "op %d", op);
			f.ops->quiescent(f.b);
		} else if (what < 98) {
			fx_barrier(&f);
		} else {
			fx_barrier(&f);
			fx_reopen(&f);
		}
		if (wm > RT * 7) {
			/* everything fired: start over below */
			struct rcheck c = { &m, INT64_MAX, 0, 0, 0 };

			cr_assert_eq(rt_timers_advance(f.t, INT64_MAX, check_one, &c), 0);
			wm = -1;
			fx_reopen(&f);	/* forgets what fired (a new watermark epoch) */
		}
	}
	{
		struct rcheck c = { &m, INT64_MAX, 0, 0, 0 };

		cr_assert_eq(rt_timers_advance(f.t, INT64_MAX, check_one, &c), 0);
		for (uint64_t kk = 1; kk <= RK; kk++)
			for (int tt = 0; tt < RT; tt++)
				cr_assert(!m.pending[kk][tt], "%llu@%d never fired",
					  (unsigned long long)kk, tt * 7);
	}
	fx_close(&f);
}
BOTH(randomized_against_a_model)
