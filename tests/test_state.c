/*
 * test_state.c — keyed state end to end: the worker's write and read paths,
 * barriers, the compactor's flush cycle to the memory target, counters
 * across sealed buffers and the flushed base, back-pressure, spills, bad
 * input, crashes of the compactor (real binary, kill -9) and of the worker,
 * and a randomized model test against a plain reference map.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <signal.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "tests/helpers.h"
#include "tests/state_helpers.h"
#include "worker/state.h"

#define SEG_MB 96

static struct sfs_seg seg;


static void setup(void)
{
	th_job(job, sizeof(job), "state");
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
}

static void teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

TestSuite(state, .init = setup, .fini = teardown, .timeout = 120);

static int get_str(sfs_ctx_t *c, uint32_t st, uint64_t ns, const char *k, char *out, size_t n)
{
	struct sfs_view v;
	int rc = sfs_value_get(c, st, ns, k, strlen(k), &v);

	if (rc == 1) {
		snprintf(out, n, "%.*s", (int)v.len, (const char *)v.data);
	} else {
		out[0] = '\0';
	}
	return rc;
}

static void put_str(sfs_ctx_t *c, uint32_t st, uint64_t ns, const char *k, const char *v)
{
	cr_assert_eq(sfs_value_put(c, st, ns, k, strlen(k), v, strlen(v)), 0, "%s",
		     sfs_last_error());
}

Test(state, value_semantics_through_every_layer)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st;
	char buf[64];

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	inproc_start(&p);

	put_str(c, st, 0, "a", "a0");
	put_str(c, st, 7, "a", "a7");     /* namespaces are separate keys */
	put_str(c, st, 0, "b", "b0");
	cr_assert_eq(get_str(c, st, 0, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a0");
	cr_assert_eq(get_str(c, st, 7, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a7");
	cr_assert_eq(get_str(c, st, 1, "a", buf, sizeof(buf)), 0);

	/* Sealed: still readable before any flush. */
	cr_assert_eq(sfs_barrier(c, 1), 0);
	cr_assert_eq(get_str(c, st, 0, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a0");
	/* Active shadows sealed: overwrite and delete. */
	put_str(c, st, 0, "a", "a0-new");
	cr_assert_eq(sfs_value_delete(c, st, 0, "b", 1), 0);
	cr_assert_eq(get_str(c, st, 0, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a0-new");
	cr_assert_eq(get_str(c, st, 0, "b", buf, sizeof(buf)), 0, "tombstone shadows");

	/* Flushed: the store answers; the tombstone is flushed as a delete. */
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(&p, c);
	struct sfs_worker_stats ws;
	sfs_worker_stats(c, &ws);
	cr_assert_eq(ws.flushed_seq, 2);
	cr_assert_eq(ws.buffers_sealed, 0);
	cr_assert_eq(get_str(c, st, 0, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a0-new");
	cr_assert_eq(get_str(c, st, 7, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a7");
	cr_assert_eq(get_str(c, st, 0, "b", buf, sizeof(buf)), 0);

	/* A new write over the flushed base shadows it. */
	put_str(c, st, 7, "a", "a7-2");
	cr_assert_eq(get_str(c, st, 7, "a", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "a7-2");
	cr_assert_eq(sfs_value_delete(c, st, 7, "a", 1), 0);
	cr_assert_eq(get_str(c, st, 7, "a", buf, sizeof(buf)), 0);
	cr_assert_eq(sfs_barrier(c, 3), 0);
	inproc_drain(&p, c);
	cr_assert_eq(get_str(c, st, 7, "a", buf, sizeof(buf)), 0, "deleted in the store too");

	inproc_stop(&p);
	sfs_worker_close(c);
}

Test(state, counters_across_sealed_buffers_and_the_flushed_base)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st;
	int64_t v;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	inproc_start(&p);
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 0);
	cr_assert_eq(v, 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, 10), 0);
	cr_assert_eq(sfs_barrier(c, 1), 0);              /* 50 sealed */
	cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, 7), 0);
	cr_assert_eq(sfs_barrier(c, 2), 0);              /* 7 sealed */
	cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, -2), 0); /* active */
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
	cr_assert_eq(v, 55);
	/* Flush one buffer at a time, reading between every step: a flushed
	 * buffer that is still SEALED must not count twice. */
	for (int i = 0; i < 200; i++) {
		int pending;

		sfs_ctx_quiescent(c);
		sfs_flusher_step(&p.f, 1, &pending);
		cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
		cr_assert_eq(v, 55, "step %d: %lld", i, (long long)v);
	}
	inproc_drain(&p, c);
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
	cr_assert_eq(v, 55);
	cr_assert_eq(sfs_barrier(c, 3), 0);
	inproc_drain(&p, c);
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
	cr_assert_eq(v, 55, "all in the store now");
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* Key groups without a context (include/sfs_keygroup.h) are the ones a
 * context computes and enforces: a key routed to sfs_kg_owner's worker is
 * accepted there, and refused by every other worker. */
Test(state, public_key_groups_match_the_context)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t v;

	o.parallelism = 3;
	o.max_parallelism = 100;
	cr_assert_eq(sfs_worker_open(job, 0, 1, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &v), 0);
	for (int k = 0; k < 400; k++) {
		char key[16];
		size_t n = (size_t)snprintf(key, sizeof(key), "key-%d", k * 7919);
		uint32_t kg = sfs_key_group(key, n, 100), w = sfs_kg_owner(kg, 3, 100);

		cr_assert_eq(kg, sfs_key_group_of(c, key, n));
		cr_assert_eq(w == 1, kg >= sfs_kg_range_start(1, 3, 100) &&
				     kg <= sfs_kg_range_end(1, 3, 100));
		cr_assert_eq(sfs_value_put(c, v, 0, key, n, "x", 1) == 0, w == 1, "%s: kg %u, worker %u",
			     key, kg, w);
	}
	cr_assert_eq(sfs_worker_close(c), 0);
}

/* The ranges include/sfs_keygroup.h documents are the ones its functions
 * compute, for every worker count 1..128 of the default 128 key groups:
 * start(i) = ceil(i * maxP / p), end(i) = ceil((i + 1) * maxP / p) - 1,
 * tiling 0..maxP-1, each key group owned (sfs_kg_owner) by the worker
 * whose range holds it.  (The header once said (i + 1) * maxP / p - 1,
 * one short when p does not divide maxP: 41 for worker 0 of 3, not 42.) */
static uint32_t ceil_div(uint32_t a, uint32_t b)
{
	return a / b + (a % b != 0);
}

Test(state, the_documented_key_group_ranges_are_the_computed_ones)
{
	const uint32_t maxp = SFS_MAX_PARALLELISM_DEFAULT;

	for (uint32_t p = 1; p <= maxp; p++) {
		for (uint32_t i = 0; i < p; i++) {
			uint32_t start = sfs_kg_range_start(i, p, maxp);
			uint32_t end = sfs_kg_range_end(i, p, maxp);

			cr_assert_eq(start, ceil_div(i * maxp, p), "start(%u) of %u", i, p);
			cr_assert_eq(end, ceil_div((i + 1) * maxp, p) - 1, "end(%u) of %u: %u", i, p,
				     end);
			cr_assert_eq(start, i ? sfs_kg_range_end(i - 1, p, maxp) + 1 : 0);
			for (uint32_t kg = start; kg <= end; kg++)
				cr_assert_eq(sfs_kg_owner(kg, p, maxp), i, "kg %u of %u workers", kg, p);
		}
		cr_assert_eq(sfs_kg_range_end(p - 1, p, maxp), maxp - 1);
	}
}

Test(state, bad_input_is_an_error_never_a_crash)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t v, cnt, other;
	static char big[SFS_KEY_MAX + 1];
	int64_t x;

	o.parallelism = 2;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &v), 0);
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &cnt), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_COUNTER, &other), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "registered as kind"), "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &other), 0);
	cr_assert_eq(other, v, "registration finds the existing state");
	cr_assert_eq(sfs_state_register(c, "", SFS_STATE_VALUE, &other), SFS_EUSAGE);
	/* a name every checkpoint could not carry is refused at once, by name */
	cr_assert_eq(sfs_state_register(c, "a b", SFS_STATE_VALUE, &other), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "'a b'"), "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "../x", SFS_STATE_VALUE, &other), SFS_EUSAGE);
	cr_assert_eq(sfs_state_register(c, "a\rb", SFS_STATE_VALUE, &other), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "'a\\x0db'"), "%s", sfs_last_error());

	/* A key this worker owns (key group in 0..63 of 128 for worker 0 of 2). */
	char key[16];
	int k = 0;
	do
		snprintf(key, sizeof(key), "k%d", k++);
	while (sfs_key_group_of(c, key, strlen(key)) >= 64);
	cr_assert_eq(sfs_value_put(c, v, 0, key, strlen(key), "x", 1), 0, "%s", sfs_last_error());
	do
		snprintf(key, sizeof(key), "k%d", k++);
	while (sfs_key_group_of(c, key, strlen(key)) < 64);
	cr_assert_eq(sfs_value_put(c, v, 0, key, strlen(key), "x", 1), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "not worker 0's"), "%s", sfs_last_error());

	/* multiget: each key answers for itself, whatever its neighbours are:
	 * an owned key, a foreign one, one too long for the batch's key
	 * scratch (in the buffer: found by the split probe), one over
	 * SFS_KEY_MAX, and a long one no buffer holds (looked up alone). */
	{
		static char lng[20000], lng2[20000];
		char own[16];
		struct sfs_key ks[5];
		struct sfs_view vs[5];
		int rs[5], j = 0;

		snprintf(own, sizeof(own), "%s", key);	/* the foreign one, for now */
		do
			snprintf(own, sizeof(own), "o%d", j++);
		while (sfs_key_group_of(c, own, strlen(own)) >= 64);
		cr_assert_eq(sfs_value_put(c, v, 0, own, strlen(own), "ov", 2), 0);
		j = 0;
		do {
			memset(lng, 'a' + j % 26, sizeof(lng));
			lng[0] = (char)j++;
		} while (sfs_key_group_of(c, lng, sizeof(lng)) >= 64);
		cr_assert_eq(sfs_value_put(c, v, 0, lng, sizeof(lng), "lv", 2), 0, "%s",
			     sfs_last_error());
		memset(big, 'k', sizeof(big));
		ks[0] = (struct sfs_key){ .ns = 0, .key = own, .klen = strlen(own) };
		ks[1] = (struct sfs_key){ .ns = 0, .key = key, .klen = strlen(key) };
		ks[2] = (struct sfs_key){ .ns = 0, .key = lng, .klen = sizeof(lng) };
		ks[3] = (struct sfs_key){ .ns = 0, .key = big, .klen = sizeof(big) };
		j = 0;
		do {
			memset(lng2, 'A' + j % 26, sizeof(lng2));
			lng2[0] = (char)j++;
		} while (sfs_key_group_of(c, lng2, sizeof(lng2)) >= 64);
		ks[4] = (struct sfs_key){ .ns = 0, .key = lng2, .klen = sizeof(lng2) };
		cr_assert_eq(sfs_multiget(c, v, ks, 5, vs, rs), SFS_EUSAGE);
		cr_assert_eq(rs[0], 1);
		cr_assert(vs[0].len == 2 && memcmp(vs[0].data, "ov", 2) == 0);
		cr_assert_eq(rs[1], SFS_EUSAGE);
		cr_assert_eq(rs[2], 1);
		cr_assert(vs[2].len == 2 && memcmp(vs[2].data, "lv", 2) == 0);
		cr_assert_eq(rs[3], SFS_EUSAGE);
		cr_assert_eq(rs[4], 0, "a long key no layer holds: %d", rs[4]);
		cr_assert(vs[4].data == NULL && vs[4].len == 0);
	}

	memset(big, 'k', sizeof(big));
	cr_assert_eq(sfs_value_put(c, v, 0, big, sizeof(big), "x", 1), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "key of"), "%s", sfs_last_error());
	cr_assert_eq(sfs_value_put(c, 99, 0, "a", 1, "x", 1), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "not registered"), "%s", sfs_last_error());
	cr_assert_eq(sfs_counter_add(c, v, 0, "a", 1, 1), SFS_EUSAGE, "kind mismatch");
	cr_assert_eq(sfs_counter_get(c, v, 0, "a", 1, &x), SFS_EUSAGE);
	cr_assert_eq(sfs_barrier(c, 5), 0);
	cr_assert_eq(sfs_barrier(c, 5), SFS_EUSAGE, "barrier ids increase");

	sfs_ctx_t *c2;
	cr_assert_eq(sfs_worker_open(job, 0, 2, &o, &c2), SFS_EUSAGE, "worker index >= parallelism");
	o.buffers = 1;
	cr_assert_eq(sfs_worker_open(job, 0, 1, &o, &c2), SFS_EUSAGE, "one buffer cannot swap");
	cr_assert_eq(sfs_worker_open("no-such-job-x", 0, 0, NULL, &c2), -ENOENT);
	sfs_worker_close(c);
}

Test(state, back_pressure_instead_of_overflow)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st;
	struct sfs_worker_stats ws;
	int64_t v;

	o.buffers = 2;
	o.stall_timeout_ns = 50 * 1000000ull;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, 1), 0);
	cr_assert_eq(sfs_barrier(c, 1), 0);
	cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, 1), 0);
	/* Both buffers are taken (one sealed, one active being sealed) and no
	 * compactor runs: the barrier waits, then reports the stall. */
	cr_assert_eq(sfs_barrier(c, 2), SFS_ETIMEDOUT);
	cr_assert(strstr(sfs_last_error(), "no free write buffer"), "%s", sfs_last_error());
	sfs_worker_stats(c, &ws);
	cr_assert_eq(ws.stalls, 1);
	cr_assert_geq(ws.stall_ns, 40 * 1000000ull);
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
	cr_assert_eq(v, 2, "nothing lost while stalled");
	/* The compactor catches up: a buffer is freed, writes continue. */
	inproc_start(&p);
	inproc_drain(&p, c);
	cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, 1), 0);
	cr_assert_eq(sfs_barrier(c, 3), 0);
	inproc_drain(&p, c);
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
	cr_assert_eq(v, 3);
	inproc_stop(&p);
	sfs_worker_close(c);
}

Test(state, a_full_buffer_spills_between_barriers)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st;
	struct sfs_worker_stats ws;
	char key[32], val[64];

	o.buffer_bytes = 64 << 10;
	o.buffer_keys = 256;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	inproc_start(&p);
	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		snprintf(val, sizeof(val), "value-%d", i);
		cr_assert_eq(sfs_value_put(c, st, 0, key, strlen(key), val, strlen(val)), 0, "%d: %s",
			     i, sfs_last_error());
		if (i % 100 == 0)
			inproc_drain(&p, c);	/* the compactor keeps up */
	}
	sfs_worker_stats(c, &ws);
	cr_assert_gt(ws.spills, 5, "spilled %llu times", (unsigned long long)ws.spills);
	for (int i = 0; i < 3000; i++) {
		char got[64];

		snprintf(key, sizeof(key), "key-%d", i);
		snprintf(val, sizeof(val), "value-%d", i);
		cr_assert_eq(get_str(c, st, 0, key, got, sizeof(got)), 1, "%s", key);
		cr_assert_str_eq(got, val);
	}
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* ---- randomized model test ------------------------------------------------ */

#define MODEL_KEYS 400
#define MODEL_OPS (60000 * th_soak())

struct model {
	int present[2][MODEL_KEYS];
	char val[2][MODEL_KEYS][24];
	int64_t cnt[MODEL_KEYS];
	int cnt_present[MODEL_KEYS];
	int64_t max[MODEL_KEYS], min[MODEL_KEYS];   /* same presence as cnt */
};

Test(state, randomized_against_a_reference_map)
{
	static struct model m;
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t sv, sc, smax, smin, x0;
	uint64_t barrier = 0;
	unsigned seed = (unsigned)getpid();
	char key[16];
	int stalls = 0;

/* A write that met back-pressure did not happen: drain, then redo it. */
#define RETRY(expr)                                                                 \
	do {                                                                        \
		int _rc = (expr);                                                   \
		if (_rc == SFS_ETIMEDOUT) {                                         \
			stalls++;                                                   \
			inproc_drain(&p, c);                                        \
			_rc = (expr);                                               \
		}                                                                   \
		cr_assert_eq(_rc, 0, "op %d: %s", i, sfs_last_error());             \
	} while (0)

	o.buffer_bytes = 128 << 10;
	o.buffer_keys = 1024;
	o.stall_timeout_ns = 1000000;	/* back-pressure returns: the test drains */
	memset(&m, 0, sizeof(m));
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &sv), 0);
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MAX, &smax), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mn", SFS_MERGE_MIN, &smin), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MIN, &x0), SFS_EUSAGE);
	cr_assert_eq(sfs_state_register_merge(c, "bad", 9, &x0), SFS_EUSAGE);
	inproc_start(&p);
	for (int i = 0; i < MODEL_OPS; i++) {
		int k = rand_r(&seed) % MODEL_KEYS, ns = rand_r(&seed) % 2, op = rand_r(&seed) % 100;
		struct sfs_view v;
		int64_t x;
		int rc;

		snprintf(key, sizeof(key), "k%d", k);
		if (op < 25) {
			snprintf(m.val[ns][k], sizeof(m.val[ns][k]), "v%d-%d", k, i);
			m.present[ns][k] = 1;
			RETRY(sfs_value_put(c, sv, (uint64_t)ns, key, strlen(key), m.val[ns][k],
					    strlen(m.val[ns][k])));
		} else if (op < 32) {
			m.present[ns][k] = 0;
			RETRY(sfs_value_delete(c, sv, (uint64_t)ns, key, strlen(key)));
		} else if (op < 50) {
			int64_t d = rand_r(&seed) % 21 - 10;

			m.max[k] = m.cnt_present[k] && m.max[k] > d ? m.max[k] : d;
			m.min[k] = m.cnt_present[k] && m.min[k] < d ? m.min[k] : d;
			m.cnt[k] += d;
			m.cnt_present[k] = 1;
			RETRY(sfs_counter_add(c, sc, 0, key, strlen(key), d));
			RETRY(sfs_counter_add(c, smax, 0, key, strlen(key), d));
			RETRY(sfs_counter_add(c, smin, 0, key, strlen(key), d));
		} else if (op < 75) {
			rc = sfs_value_get(c, sv, (uint64_t)ns, key, strlen(key), &v);
			cr_assert_eq(rc, m.present[ns][k], "op %d key %s ns %d", i, key, ns);
			if (rc == 1) {
				cr_assert_eq(v.len, strlen(m.val[ns][k]));
				cr_assert(memcmp(v.data, m.val[ns][k], v.len) == 0, "op %d key %s", i,
					  key);
			}
		} else if (op < 80) {
			/* A batch read: buffers, cache and one store probe. */
			struct sfs_key ks[100];
			struct sfs_view vs[100];
			int rs[100], kk[100], nsx[100];
			static char kbufs[100][16];
			unsigned nb = 1 + (unsigned)(rand_r(&seed) % 100);

			for (unsigned b = 0; b < nb; b++) {
				kk[b] = rand_r(&seed) % MODEL_KEYS;
				nsx[b] = rand_r(&seed) % 2;
				snprintf(kbufs[b], sizeof(kbufs[b]), "k%d", kk[b]);
				ks[b] = (struct sfs_key){ .ns = (uint64_t)nsx[b], .key = kbufs[b],
							  .klen = (uint32_t)strlen(kbufs[b]) };
			}
			cr_assert_eq(sfs_multiget(c, sv, ks, nb, vs, rs), 0);
			for (unsigned b = 0; b < nb; b++) {
				const char *want = m.val[nsx[b]][kk[b]];

				cr_assert_eq(rs[b], m.present[nsx[b]][kk[b]], "op %d multiget %s", i,
					     kbufs[b]);
				if (rs[b] == 1)
					cr_assert(vs[b].len == strlen(want) &&
						  memcmp(vs[b].data, want, vs[b].len) == 0,
						  "op %d multiget %s", i, kbufs[b]);
			}
			/* and the same keys of the three counters (namespace 0) */
			for (unsigned b = 0; b < nb; b++)
				ks[b].ns = 0;
			for (int w = 0; w < 3; w++) {
				uint32_t st = w == 0 ? sc : w == 1 ? smax : smin;
				int64_t xs[100];

				cr_assert_eq(sfs_counter_multiget(c, st, ks, nb, xs, rs), 0);
				for (unsigned b = 0; b < nb; b++) {
					int k2 = kk[b], has = m.cnt_present[k2];
					int64_t want = !has ? 0 : w == 0 ? m.cnt[k2] : w == 1 ? m.max[k2]
											: m.min[k2];

					cr_assert(rs[b] == has && xs[b] == want,
						  "op %d counter multiget %d of %s: %d %lld, expected %d "
						  "%lld", i, w, kbufs[b], rs[b], (long long)xs[b], has,
						  (long long)want);
				}
			}
		} else if (op < 95) {
			rc = sfs_counter_get(c, sc, 0, key, strlen(key), &x);
			cr_assert_eq(rc, m.cnt_present[k], "op %d counter %s", i, key);
			cr_assert_eq(x, m.cnt[k], "op %d counter %s: %lld != %lld", i, key,
				     (long long)x, (long long)m.cnt[k]);
			rc = sfs_counter_get(c, smax, 0, key, strlen(key), &x);
			cr_assert_eq(rc, m.cnt_present[k]);
			cr_assert_eq(x, m.cnt_present[k] ? m.max[k] : 0, "op %d max %s: %lld != %lld", i,
				     key, (long long)x, (long long)m.max[k]);
			rc = sfs_counter_get(c, smin, 0, key, strlen(key), &x);
			cr_assert_eq(x, m.cnt_present[k] ? m.min[k] : 0, "op %d min %s: %lld != %lld", i,
				     key, (long long)x, (long long)m.min[k]);
		} else if (op < 97) {
			rc = sfs_barrier(c, ++barrier);
			if (rc == SFS_ETIMEDOUT) {
				stalls++;
				inproc_drain(&p, c);
			} else {
				cr_assert_eq(rc, 0, "%s", sfs_last_error());
			}
		} else {
			/* The compactor advances by a random amount. */
			int pending;

			sfs_ctx_quiescent(c);
			for (int s = rand_r(&seed) % 4; s >= 0; s--)
				sfs_flusher_step(&p.f, 1 + (unsigned)(rand_r(&seed) % 200), &pending);
		}
	}
	cr_log_info("seed %u: %d stalls", (unsigned)getpid(), stalls);
	inproc_drain(&p, c);
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* ---- crashes, with the real compactor binary ---------------------------------- */

Test(state, compactor_killed_mid_flush_loses_and_doubles_nothing)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t st;
	pid_t comp;
	unsigned seed = 7;
	static int64_t ref[2000];
	char key[16];
	int kills = 0;

	o.buffer_bytes = 1 << 20;
	o.buffer_keys = 4096;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	comp = start_compactor();
	const uint64_t nb = 30 * (uint64_t)th_soak();

	for (uint64_t b = 1; b <= nb; b++) {
		for (int i = 0; i < 3000; i++) {
			int k = rand_r(&seed) % 2000;

			snprintf(key, sizeof(key), "c%d", k);
			ref[k] += k % 7 + 1;
			cr_assert_eq(sfs_counter_add(c, st, 0, key, strlen(key), k % 7 + 1), 0);
		}
		cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
		if (b % 3 == 0) {
			/* kill -9 somewhere inside the flush of the last buffers */
			usleep((useconds_t)(rand_r(&seed) % 3000));
			kill(comp, SIGKILL);
			th_wait(comp, 5000);
			kills++;
			comp = start_compactor();
		}
	}
	cr_assert(wait_flushed(c, nb, 20000), "compactor caught up after %d kills", kills);
	for (int k = 0; k < 2000; k++) {
		int64_t v;

		snprintf(key, sizeof(key), "c%d", k);
		cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &v), ref[k] ? 1 : 0);
		cr_assert_eq(v, ref[k], "counter %s: %lld, expected %lld", key, (long long)v,
			     (long long)ref[k]);
	}
	kill(comp, SIGTERM);
	cr_assert_neq(th_wait(comp, 10000), -1, "compactor stops on SIGTERM");
	sfs_worker_close(c);
}

/* In a forked child: open worker 0, put @key=@val and seal it at barrier 1.
 * Returns 0 or the child's exit code for the step that failed. */
static int child_seals_one(sfs_ctx_t **c, uint32_t *st, const char *key, const char *val)
{
	struct sfs_worker_opts o = small_opts();

	if (sfs_worker_open(job, 0, 0, &o, c) || sfs_state_register(*c, "v", SFS_STATE_VALUE, st))
		return 10;
	if (sfs_value_put(*c, *st, 0, key, strlen(key), val, strlen(val)) || sfs_barrier(*c, 1))
		return 11;
	return 0;
}

/* A worker that writes, seals, writes more and dies without a barrier. */
static int worker_dies(void *arg)
{
	sfs_ctx_t *c;
	uint32_t st;
	int rc = child_seals_one(&c, &st, "committed", "yes");

	(void)arg;
	if (rc)
		return rc;
	if (sfs_value_put(c, st, 0, "uncommitted", 11, "no", 2) ||
	    sfs_value_put(c, st, 0, "committed", 9, "overwritten", 11))
		return 12;
	raise(SIGKILL);
	return 13;
}

Test(state, worker_killed_rolls_back_to_its_last_barrier)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t st;
	pid_t w = th_fork(worker_dies, NULL), comp;
	int status = th_wait(w, 10000);
	char buf[32];

	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "worker died by SIGKILL");
	comp = start_compactor();
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert(c->restarted);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	cr_assert_eq(get_str(c, st, 0, "committed", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "yes", "the sealed write survives, the later overwrite is dropped");
	cr_assert_eq(get_str(c, st, 0, "uncommitted", buf, sizeof(buf)), 0);
	cr_assert(wait_flushed(c, 1, 10000), "the dead worker's sealed buffer is flushed");
	cr_assert_eq(get_str(c, st, 0, "committed", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "yes");
	kill(comp, SIGTERM);
	th_wait(comp, 10000);
	sfs_worker_close(c);
}

/* One context per worker region (wc_owner): a second open of a region
 * another live context holds is refused naming the holder, in this
 * process as in any; once it is closed the region opens again.  (A holder
 * that was killed is taken over: worker_killed_rolls_back_to_its_last_barrier.) */
Test(state, a_worker_region_has_one_context_at_a_time)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c, *c2;

	o.parallelism = 2;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c2), SFS_ERUNNING);
	cr_assert(strstr(sfs_last_error(), "is open in process"), "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_open(job, 0, 1, &o, &c2), 0, "another worker's region: %s",
		     sfs_last_error());
	sfs_worker_close(c2);
	sfs_worker_close(c);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	sfs_worker_close(c);
}

/* A slot reopened with another key-group range holds the old range's keys:
 * refused — and SFS_WORKER_RESET, which would empty it first, is for a
 * host group's slot only (no engine-checkpointed group answers it here). */
Test(state, a_reopen_with_another_range_is_refused_outside_a_host_group)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;

	o.flags |= SFS_WORKER_KG_RANGE;
	o.kg_first = 0;
	o.kg_last = 63;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	sfs_worker_close(c);
	o.kg_first = 64;
	o.kg_last = 127;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "owns key groups 0..63"), "%s", sfs_last_error());
	o.flags |= SFS_WORKER_RESET;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "host group"), "%s", sfs_last_error());
	/* and the refused opens changed nothing */
	o.flags &= ~SFS_WORKER_RESET;
	o.kg_first = 0;
	o.kg_last = 63;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	sfs_worker_close(c);
}

/* The value cache serves store reads, including "absent", and can never
 * resurface a value after a write shadowed it and its buffer was released. */
Test(state, value_cache_is_never_stale)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	struct sfs_worker_stats ws;
	sfs_ctx_t *c;
	uint32_t st;
	char buf[32];

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	inproc_start(&p);
	put_str(c, st, 0, "k", "v1");
	cr_assert_eq(sfs_barrier(c, 1), 0);
	inproc_drain(&p, c);

	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);	/* store; fill queued */
	cr_assert_eq(get_str(c, st, 0, "gone", buf, sizeof(buf)), 0);	/* absent; fill queued */
	sfs_ctx_quiescent(c);						/* fills applied */
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "v1");
	cr_assert_eq(get_str(c, st, 0, "gone", buf, sizeof(buf)), 0);
	sfs_worker_stats(c, &ws);
	cr_assert_eq(ws.cache_hits, 1, "hits %llu", (unsigned long long)ws.cache_hits);
	cr_assert_eq(ws.cache_neg_hits, 1);

	/* Write, then flush and release the buffer that shadowed the cache. */
	put_str(c, st, 0, "k", "v2");
	put_str(c, st, 0, "gone", "back");
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "v2");
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(&p, c);
	sfs_worker_stats(c, &ws);
	cr_assert_eq(ws.buffers_sealed, 0, "released");
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "v2", "never the cached v1");
	cr_assert_eq(get_str(c, st, 0, "gone", buf, sizeof(buf)), 1, "never the cached absent");
	cr_assert_str_eq(buf, "back");

	/* A read then a write before the quiescent point: the queued fill
	 * must not land (the key is in the active buffer now). */
	sfs_ctx_quiescent(c);
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);	/* cache or store */
	cr_assert_eq(sfs_value_delete(c, st, 0, "k", 1), 0);
	sfs_ctx_quiescent(c);
	cr_assert_eq(sfs_barrier(c, 3), 0);
	inproc_drain(&p, c);
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 0, "deleted stays deleted");
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* A put drops its key from the value cache only when the key is new to
 * the active buffer (state.c): overwrites within an epoch, after a spill
 * and across barriers must still never let a cached value resurface. */
Test(state, value_cache_drop_only_for_keys_new_to_the_buffer)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	struct sfs_worker_stats ws;
	struct sfs_vcache_stats cs;
	sfs_ctx_t *c;
	uint32_t st;
	char buf[32], val[16];

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	inproc_start(&p);
	put_str(c, st, 0, "k", "v1");
	put_str(c, st, 0, "j", "j1");
	cr_assert_eq(sfs_barrier(c, 1), 0);
	inproc_drain(&p, c);
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_eq(get_str(c, st, 0, "j", buf, sizeof(buf)), 1);
	sfs_ctx_quiescent(c);					/* both cached */
	sfs_worker_stats(c, &ws);
	cr_assert_eq(ws.cache_entries, 2);

	put_str(c, st, 0, "k", "v2");				/* new to the buffer: dropped */
	sfs_vcache_stats(c->cache, &cs);
	cr_assert_eq(cs.invalidations, 1);
	cr_assert_eq(cs.entries, 1);
	put_str(c, st, 0, "k", "v3");				/* replaced: no cache work */
	sfs_vcache_stats(c->cache, &cs);
	cr_assert_eq(cs.invalidations, 1);
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "v3");
	sfs_ctx_quiescent(c);
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "v3");

	/* Spill the active buffer (fill it): the next put of "j" lands in a
	 * fresh buffer, so it must drop "j" from the cache. */
	for (int i = 0; i < 100000; i++) {
		struct sfs_worker_stats w2;

		snprintf(val, sizeof(val), "f%d", i);
		cr_assert_eq(sfs_value_put(c, st, 0, val, strlen(val), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
					   32), 0, "%s", sfs_last_error());
		sfs_worker_stats(c, &w2);
		if (w2.spills)
			break;
		if (i % 64 == 63)
			sfs_ctx_quiescent(c);
	}
	sfs_worker_stats(c, &ws);
	cr_assert_geq(ws.spills, 1, "the buffer spilled");
	put_str(c, st, 0, "j", "j2");
	put_str(c, st, 0, "j", "j3");
	sfs_vcache_stats(c->cache, &cs);
	cr_assert_eq(cs.entries, 0, "j dropped after the spill");
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(&p, c);
	sfs_ctx_quiescent(c);
	cr_assert_eq(get_str(c, st, 0, "k", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "v3", "never the cached v1");
	cr_assert_eq(get_str(c, st, 0, "j", buf, sizeof(buf)), 1);
	cr_assert_str_eq(buf, "j3", "never the cached j1");
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* Ownership with a max parallelism that is not a power of two (kg =
 * hash % maxP, not a mask): exactly the keys Flink's assignment gives this
 * worker are accepted, and they read back. */
Test(state, key_groups_of_a_non_power_of_two_max_parallelism)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t st;
	unsigned owned = 0;

	o.parallelism = 3;
	o.max_parallelism = 100;
	cr_assert_eq(sfs_worker_open(job, 0, 1, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	for (int i = 0; i < 600; i++) {
		char key[16], buf[16];
		uint32_t kg;
		int rc;

		snprintf(key, sizeof(key), "key-%d", i);
		kg = sfs_key_group(key, strlen(key), 100);
		cr_assert_eq(sfs_key_group_of(c, key, strlen(key)), kg);
		rc = sfs_value_put(c, st, 0, key, strlen(key), key, strlen(key));
		if (sfs_kg_owner(kg, 3, 100) != 1) {
			cr_assert_eq(rc, SFS_EUSAGE, "key group %u", kg);
			cr_assert_eq(get_str(c, st, 0, key, buf, sizeof(buf)), SFS_EUSAGE);
			continue;
		}
		owned++;
		cr_assert_eq(rc, 0, "key group %u: %s", kg, sfs_last_error());
		cr_assert_eq(get_str(c, st, 0, key, buf, sizeof(buf)), 1);
		cr_assert_str_eq(buf, key);
	}
	cr_assert(owned > 150 && owned < 250, "%u of 600 owned", owned);
	sfs_worker_close(c);
}

/* `sfs stat` reports each worker's buffers, seal sequence and stalls. */
Test(state, stat_reports_worker_state)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st;
	char cmd[PATH_MAX + 128], out[8192];
	size_t n;
	FILE *f;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	inproc_start(&p);
	put_str(c, st, 0, "a", "1");
	cr_assert_eq(sfs_barrier(c, 1), 0);
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(&p, c);
	snprintf(cmd, sizeof(cmd), "%s/sfs stat --job %s --json", bin_dir(), job);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	cr_assert_eq(pclose(f), 0, "%s", out);
	cr_assert(strstr(out, "\"workers\": [{\"worker\": 0, \"node\": 0, \"key_groups\": [0, 127]"),
		  "%s", out);
	cr_assert(strstr(out, "\"seq\": 2, \"flushed_seq\": 2, \"barrier\": 2"), "%s", out);
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* A worker killed between sealing and taking a free buffer leaves no
 * ACTIVE buffer: the next incarnation takes one on its first write. */
static int worker_dies_after_seal(void *arg)
{
	sfs_ctx_t *c;
	uint32_t st;
	int rc = child_seals_one(&c, &st, "a", "1");

	(void)arg;
	if (rc)
		return rc;
	/* Simulate the kill point: the active buffer sealed, nothing taken. */
	c->ctl->wc_buf[c->ctl->wc_active].cb_state = SFS_BUF_SEALED;
	raise(SIGKILL);
	return 12;
}

Test(state, restart_after_a_kill_between_seal_and_swap)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st;
	char buf[8];
	pid_t w = th_fork(worker_dies_after_seal, NULL);

	th_wait(w, 10000);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	put_str(c, st, 0, "b", "2");
	cr_assert_eq(get_str(c, st, 0, "b", buf, sizeof(buf)), 1);
	cr_assert_eq(get_str(c, st, 0, "a", buf, sizeof(buf)), 1);
	inproc_start(&p);
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(&p, c);
	cr_assert_eq(get_str(c, st, 0, "a", buf, sizeof(buf)), 1);
	cr_assert_eq(get_str(c, st, 0, "b", buf, sizeof(buf)), 1);
	inproc_stop(&p);
	sfs_worker_close(c);
}

/* A store that cannot fit the segment never will: the flusher's step
 * fails with SFS_EFULL naming the worker and the region (the compactor
 * then exits SFS_CHILD_EXIT_FATAL and the supervisor fails the group)
 * instead of logging and retrying for ever while the job goes on. */
Test(state, a_store_that_cannot_fit_stops_the_flusher)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_proc_slot *slot;
	struct sfs_flusher f;
	struct sfs_seg s;
	sfs_ctx_t *c;
	int pending, rc = 0;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_attach(job, 0, &s), 0);
	cr_assert_eq(sfs_proc_register(&s, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_flusher_init(&f, &s, slot, (uint64_t)SEG_MB << 21), 0);	/* 2x the segment */
	for (int i = 0; i < 50 && rc >= 0; i++)
		rc = sfs_flusher_step(&f, 100, &pending);
	cr_assert_eq(rc, SFS_EFULL, "rc %d: %s", rc, sfs_last_error());
	cr_assert(sfs_flusher_fatal(rc));
	cr_assert(strstr(sfs_last_error(), "worker 0: cannot open its store") &&
		  strstr(sfs_last_error(), "left"), "%s", sfs_last_error());
	cr_assert(!sfs_flusher_fatal(-EIO) && !sfs_flusher_fatal(SFS_ECORRUPT));
	sfs_flusher_fini(&f);
	sfs_proc_unregister(slot);
	sfs_seg_detach(&s);
	sfs_worker_close(c);
}
