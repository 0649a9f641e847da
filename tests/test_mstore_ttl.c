/*
 * test_mstore_ttl.c — state TTL in the memory target's store
 * (store/memory/memory.h, "State TTL"): a semispace copy leaves behind the
 * value, counter and map-entry records of TTL states that expired at the
 * writer's clock (a map with none left loses its head), keeps every live
 * one readable and every record of a state without a TTL untouched
 * (whatever its first bytes), and keeps the store's counters exact; the
 * clock never goes back and nothing expires before the first rules; and
 * through the target's ops, a commit copies once the clock has moved by
 * the smallest TTL while the store is big enough, and not before.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/ttl.h"
#include "shm/proc.h"
#include "store/memory/memory.h"
#include "store/target.h"
#include "tests/helpers.h"
#include "worker/wbuf.h"

static char job[64];
static struct sfs_seg seg;
static struct sfs_proc_slot *slot;

static void setup(void)
{
	th_job(job, sizeof(job), "mttl");
	cr_assert_eq(sfs_seg_create(job, 0, 32u << 20, 1, &seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0, "%s",
		     sfs_last_error());
}

static void teardown(void)
{
	sfs_proc_unregister(slot);
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

TestSuite(mttl, .init = setup, .fini = teardown, .timeout = 120);

/* States: VT a TTL value state (processing clock), VN a value state
 * without one, MT a TTL map state (event clock), MN a map state without. */
enum { VT = 1, VN = 2, MT = 3, MN = 4 };

struct key {
	unsigned char b[48];
	uint32_t plen, klen;
	uint64_t ph, h;
};

/* A value key kg | state | "k<i>". */
static void vkey(struct key *k, int state, int i)
{
	int n = snprintf((char *)k->b + 4, sizeof(k->b) - 4, "k%d", i);

	k->b[0] = 0;
	k->b[1] = 7;
	k->b[2] = 0;
	k->b[3] = (unsigned char)state;
	k->klen = k->plen = 4 + (uint32_t)n;
	k->h = k->ph = sfs_wbuf_hash(0, k->b, k->klen);
}

/* A map key kg | state | len | "m<m>", entry key | "u<u>" (u < 0: the parent). */
static void mkey(struct key *k, int state, int m, int u)
{
	int n = snprintf((char *)k->b + 6, 16, "m%d", m);

	k->b[0] = 0;
	k->b[1] = 7;
	k->b[2] = 0;
	k->b[3] = (unsigned char)state;
	k->b[4] = 0;
	k->b[5] = (unsigned char)n;
	k->plen = 6 + (uint32_t)n;
	k->klen = k->plen;
	if (u >= 0)
		k->klen += (uint32_t)snprintf((char *)k->b + k->plen, 16, "u%02d", u);
	k->ph = sfs_wbuf_hash(0, k->b, k->plen);
	k->h = sfs_wbuf_hash(0, k->b, k->klen);
}

/* [expiry][text] */
static uint32_t tval(unsigned char *buf, uint64_t expiry, const char *text)
{
	size_t n = strlen(text);

	memcpy(buf, &expiry, 8);
	memcpy(buf + 8, text, n);
	return (uint32_t)(8 + n);
}

static void rules_of(struct sfs_ttl_rule *r)
{
	memset(r, 0, SFS_MAX_STATES * sizeof(*r));
	r[VT].ttl_ms = 100;
	r[MT].ttl_ms = 100;
	r[MT].event_time = 1;
}

/* The expiry of value i of VT, entry u of map m of MT: a mix around 100. */
static uint64_t vexp(int i) { return (uint64_t)(i % 4) * 50; }		/* 0 50 100 150 */
static uint64_t mexp(int m, int u) { return m == 1 ? 20 : 60 + (uint64_t)u * 10; }

#define NV 40   /* values per value state */
#define NMAP 3  /* maps per map state */
#define NE 8    /* entries per map */

/* Everything of the four states, in one buffer (tag 1).  Returns records. */
static uint64_t fill(struct sfs_mstore_writer *w)
{
	unsigned char v[64];
	char text[32];
	struct key k;
	uint64_t recs = 0;

	for (int i = 0; i < NV; i++) {
		snprintf(text, sizeof(text), "v%d", i);
		vkey(&k, VT, i);
		cr_assert_eq(sfs_mstore_apply(w, SFS_MSTORE_PUT, 0, k.h, 0, k.b, k.klen, v,
					      tval(v, vexp(i), text), 1), 0);
		/* no TTL, but first bytes that would read as long expired */
		vkey(&k, VN, i);
		cr_assert_eq(sfs_mstore_apply(w, SFS_MSTORE_PUT, 0, k.h, 0, k.b, k.klen, v,
					      tval(v, 0, text), 1), 0);
		recs += 2;
	}
	/* a TTL counter: [expiry][int64], expired */
	{
		int64_t c = 42;

		vkey(&k, VT, 1000);
		memcpy(v + 8, &c, 8);
		cr_assert_eq(sfs_mstore_apply(w, SFS_MSTORE_PUT, 0, k.h, 0, k.b, k.klen, v,
					      tval(v, 99, "") + 8, 1), 0);
		vkey(&k, VT, 1001);
		cr_assert_eq(sfs_mstore_apply(w, SFS_MSTORE_PUT, 0, k.h, 0, k.b, k.klen, v,
					      tval(v, 101, "") + 8, 1), 0);
		recs += 2;
	}
	for (int m = 0; m < NMAP; m++) {
		for (int u = 0; u < NE; u++) {
			snprintf(text, sizeof(text), "e%d.%d", m, u);
			mkey(&k, MT, m, u);
			cr_assert_eq(sfs_mstore_map_put(w, k.h, k.ph, 0, k.b, k.klen, k.plen, v,
							tval(v, mexp(m, u), text), 1), 0);
			mkey(&k, MN, m, u);
			cr_assert_eq(sfs_mstore_map_put(w, k.h, k.ph, 0, k.b, k.klen, k.plen, v,
							tval(v, 0, text), 1), 0);
			recs += 2;
		}
		recs += 2;	/* the heads */
	}
	sfs_mstore_commit(w, 1);
	return recs;
}

/* Does the store hold what it should at @now (0: everything)? */
struct iter {
	int n, seen[NE];
	uint64_t now;
	int m;
};

static int iter_one(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct iter *it = arg;
	char exp[32];
	int u;

	cr_assert_eq(ulen, 3);
	u = (((const char *)ukey)[1] - '0') * 10 + ((const char *)ukey)[2] - '0';
	cr_assert(u >= 0 && u < NE && !it->seen[u]);
	it->seen[u] = 1;
	it->n++;
	snprintf(exp, sizeof(exp), "e%d.%d", it->m, u);
	cr_assert_eq(vlen, 8 + strlen(exp));
	cr_assert_eq(memcmp((const char *)val + 8, exp, strlen(exp)), 0);
	return 0;
}

static int live_at(uint64_t expiry, uint64_t now, int ttl)
{
	return !ttl || !now || expiry > now;
}

static void check_store(const struct sfs_mstore *ms, uint64_t now)
{
	struct sfs_mstore_view mv;
	char text[32];
	struct key k;

	for (int i = 0; i < NV; i++) {
		int live = live_at(vexp(i), now, 1);

		snprintf(text, sizeof(text), "v%d", i);
		vkey(&k, VT, i);
		cr_assert_eq(sfs_mstore_get(ms, k.h, 0, k.b, k.klen, &mv), live,
			     "TTL value %d (expiry %llu) at %llu", i,
			     (unsigned long long)vexp(i), (unsigned long long)now);
		if (live) {
			cr_assert_eq(mv.len, 8 + strlen(text));
			cr_assert_eq(sfs_ttl_expiry_of(mv.value), vexp(i));
			cr_assert_eq(memcmp((const char *)mv.value + 8, text, strlen(text)), 0);
		}
		vkey(&k, VN, i);
		cr_assert_eq(sfs_mstore_get(ms, k.h, 0, k.b, k.klen, &mv), 1,
			     "value %d of a state without TTL is gone", i);
		cr_assert_eq(memcmp((const char *)mv.value + 8, text, strlen(text)), 0);
	}
	vkey(&k, VT, 1000);
	cr_assert_eq(sfs_mstore_get(ms, k.h, 0, k.b, k.klen, &mv), live_at(99, now, 1),
		     "expired TTL counter");
	vkey(&k, VT, 1001);
	cr_assert_eq(sfs_mstore_get(ms, k.h, 0, k.b, k.klen, &mv), 1, "live TTL counter");
	cr_assert_eq(mv.len, 16);
	for (int m = 0; m < NMAP; m++) {
		for (int st = MT; st <= MN; st++) {
			struct iter it = { .m = m };
			int want = 0;

			mkey(&k, st, m, -1);
			cr_assert_eq(sfs_mstore_map_iter(ms, k.ph, 0, k.b, k.plen, iter_one, &it), 0);
			for (int u = 0; u < NE; u++) {
				int live = live_at(mexp(m, u), now, st == MT);
				struct key ek;

				want += live;
				cr_assert_eq(it.seen[u], live, "map %d state %d entry %d listed: %d", m,
					     st, u, it.seen[u]);
				mkey(&ek, st, m, u);
				cr_assert_eq(sfs_mstore_get(ms, ek.h, 0, ek.b, ek.klen, &mv), live,
					     "map %d state %d entry %d", m, st, u);
			}
			cr_assert_eq(it.n, want);
		}
	}
	cr_assert_eq(sfs_mstore_verify(ms), 0, "%s", sfs_last_error());
}

/* ms_live and ms_bytes against a full walk. */
struct tally {
	uint64_t recs, bytes, heads;
};

static int tally_one(void *arg, const struct sfs_mstore_entry *e, const void *key,
		     const void *value)
{
	struct tally *t = arg;

	t->recs++;
	t->bytes += (e->me_kf & 0xffffffu) + e->me_vlen;
	t->heads += (e->me_kf >> 24) == SFS_MSTORE_K_HEAD;
	return 0;
}

static struct tally walk(const struct sfs_mstore *ms)
{
	struct tally t = { 0, 0, 0 };

	cr_assert_eq(sfs_mstore_foreach(ms, tally_one, &t), 0);
	cr_assert_eq(t.recs, ms->ms_live, "walk %llu records, ms_live %llu",
		     (unsigned long long)t.recs, (unsigned long long)ms->ms_live);
	cr_assert_eq(t.bytes, ms->ms_bytes);
	cr_assert_eq(t.heads, ms->ms_maps);
	return t;
}

Test(mttl, a_copy_drops_expired_ttl_records_only_and_keeps_counters_exact)
{
	struct sfs_ttl_rule rules[SFS_MAX_STATES];
	struct sfs_ttl_clock clk = { 100, 100 };
	struct sfs_mstore_writer w;
	uint64_t recs, copies, exp_vals = 0, exp_ents = 0;
	struct tally t;

	cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0, "%s", sfs_last_error());
	recs = fill(&w);
	cr_assert_eq(w.ms->ms_live, recs);

	/* Before the first rules nothing is expired: a copy keeps all. */
	copies = w.ms->ms_copies;
	cr_assert_eq(sfs_mstore_compact(&w), 0, "%s", sfs_last_error());
	cr_assert_eq(w.ms->ms_copies, copies + 1);
	cr_assert_eq(w.ms->ms_live, recs);
	cr_assert_eq(w.ms->ms_ttl_dropped, 0);
	check_store(w.ms, 0);

	/* Clock 100 on both: expiries <= 100 of VT and MT go. */
	rules_of(rules);
	sfs_mstore_ttl(&w, rules, &clk);
	cr_assert_eq(sfs_mstore_compact(&w), 0, "%s", sfs_last_error());
	for (int i = 0; i < NV; i++)
		exp_vals += vexp(i) <= 100;
	exp_vals += 1;	/* the counter */
	for (int m = 0; m < NMAP; m++)
		for (int u = 0; u < NE; u++)
			exp_ents += mexp(m, u) <= 100;
	cr_assert_eq(w.ms->ms_ttl_dropped, exp_vals + exp_ents, "dropped %llu, expected %llu",
		     (unsigned long long)w.ms->ms_ttl_dropped,
		     (unsigned long long)(exp_vals + exp_ents));
	/* map 1 of MT: every entry expired, its head went too */
	cr_assert_eq(w.ms->ms_live, recs - exp_vals - exp_ents - 1);
	cr_assert_eq(w.ms->ms_maps, 2 * NMAP - 1);
	t = walk(w.ms);
	cr_assert_eq(t.recs, recs - exp_vals - exp_ents - 1);
	check_store(w.ms, 100);

	/* The store goes on: a write into a thinned map and the dropped one. */
	{
		unsigned char v[32];
		struct key k;

		mkey(&k, MT, 0, 0);
		cr_assert_eq(sfs_mstore_map_put(&w, k.h, k.ph, 0, k.b, k.klen, k.plen, v,
						tval(v, 500, "e0.0"), 2), 0);
		mkey(&k, MT, 1, 3);
		cr_assert_eq(sfs_mstore_map_put(&w, k.h, k.ph, 0, k.b, k.klen, k.plen, v,
						tval(v, 500, "e1.3"), 2), 0);
		sfs_mstore_commit(&w, 2);
		cr_assert_eq(sfs_mstore_verify(w.ms), 0, "%s", sfs_last_error());
		walk(w.ms);
	}
	sfs_mstore_close(&w);
}

Test(mttl, the_clock_never_goes_back)
{
	struct sfs_ttl_rule rules[SFS_MAX_STATES];
	struct sfs_ttl_clock c100 = { 100, 100 }, c10 = { 10, 10 };
	struct sfs_mstore_writer w;

	cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0, "%s", sfs_last_error());
	fill(&w);
	rules_of(rules);
	sfs_mstore_ttl(&w, rules, &c100);
	sfs_mstore_ttl(&w, rules, &c10);	/* an older buffer's clock: ignored */
	cr_assert_eq(sfs_mstore_compact(&w), 0, "%s", sfs_last_error());
	check_store(w.ms, 100);
	walk(w.ms);
	sfs_mstore_close(&w);
}

/* ---- through the target's ops --------------------------------------------- */

static int put_views(struct sfs_target_writer *tw, int from, int n, uint64_t expiry, uint64_t seq)
{
	static unsigned char keys[4096][16], vals[4096][128];
	struct sfs_wbuf_view v[256];
	int done = 0;

	while (done < n) {
		int b = n - done < 256 ? n - done : 256, rc;

		for (int j = 0; j < b; j++) {
			struct key k;
			int i = from + done + j;

			vkey(&k, VT, i);
			memcpy(keys[j], k.b, k.klen);
			memset(vals[j], 'x', sizeof(vals[j]));
			memcpy(vals[j], &expiry, 8);
			v[j] = (struct sfs_wbuf_view){ .value = vals[j], .key = keys[j],
						       .len = sizeof(vals[j]), .klen = k.klen,
						       .kind = SFS_WBUF_PUT, .hash = k.h };
		}
		if ((rc = sfs_target_memory.apply(tw, v, (unsigned)b, seq)))
			return rc;
		done += b;
	}
	return 0;
}

static int probe_one(struct sfs_target_reader *r, int i)
{
	struct sfs_probe_result res;
	struct sfs_probe p;
	struct key k;

	vkey(&k, VT, i);
	p = (struct sfs_probe){ .hash = k.h, .ns = 0, .key = k.b, .klen = k.klen };
	cr_assert_eq(sfs_target_memory.rd.probe(r, &p, 1, &res), 0);
	return res.found;
}

Test(mttl, a_commit_copies_once_the_clock_passed_the_smallest_ttl)
{
	const struct sfs_target_ops *T = &sfs_target_memory;
	struct sfs_target_cfg cfg = { .store_bytes = 2u << 20 };
	struct sfs_ttl_rule rules[SFS_MAX_STATES];
	struct sfs_target_writer *tw;
	struct sfs_target_reader *r;
	struct sfs_mstore *ms;
	uint64_t copies;
	enum { N = 3000 };

	cr_assert_eq(T->open(&seg, 0, slot, &cfg, &tw), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	rules_of(rules);

	/* Buffer 1 at clock 1000: N values expiring at 1100 (> half/4). */
	T->ttl(tw, rules, &(struct sfs_ttl_clock){ 1000, 0 });
	cr_assert_eq(put_views(tw, 0, N, 1100, 1), 0, "%s", sfs_last_error());
	cr_assert_eq(T->commit(tw, 1), 0);
	cr_assert_eq(sfs_mstore_attach(&seg, 0, &ms), 0);
	cr_assert(ms);
	copies = ms->ms_copies;
	cr_assert_geq(ms->ms_top[ms->ms_active], ms->ms_half / 4, "the test needs a fuller store");

	/* Buffer 2 at 1050: less than the TTL later, no copy. */
	T->ttl(tw, rules, &(struct sfs_ttl_clock){ 1050, 0 });
	cr_assert_eq(put_views(tw, N, 1, 1150, 2), 0);
	cr_assert_eq(T->commit(tw, 2), 0);
	cr_assert_eq(ms->ms_copies, copies, "a copy before the clock moved by the TTL");
	cr_assert_eq(ms->ms_live, N + 1);

	/* Buffer 3 at 1100: the N expired; the commit copies without them. */
	T->ttl(tw, rules, &(struct sfs_ttl_clock){ 1100, 0 });
	cr_assert_eq(put_views(tw, N + 1, 1, 1200, 3), 0);
	cr_assert_eq(T->commit(tw, 3), 0);
	cr_assert_eq(ms->ms_copies, copies + 1, "no copy at the commit");
	cr_assert_eq(ms->ms_live, 2, "%llu live", (unsigned long long)ms->ms_live);
	cr_assert_eq(ms->ms_ttl_dropped, N);
	cr_assert_eq(probe_one(r, 0), 0);
	cr_assert_eq(probe_one(r, N - 1), 0);
	cr_assert_eq(probe_one(r, N), 1);
	cr_assert_eq(probe_one(r, N + 1), 1);

	/* Clock far on, but the store is small now: no copy (the bound). */
	T->ttl(tw, rules, &(struct sfs_ttl_clock){ 5000, 0 });
	cr_assert_eq(put_views(tw, N + 2, 1, 9000, 4), 0);
	cr_assert_eq(T->commit(tw, 4), 0);
	cr_assert_eq(ms->ms_copies, copies + 1, "a copy of a store with room");
	cr_assert_eq(ms->ms_live, 3);

	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		T->summary_json(&seg, 1, f);
		fclose(f);
		cr_assert_str_eq(buf, ", \"memory_ttl_dropped\": 3000");
		free(buf);
	}
	T->rd.reader_close(r);
	T->close(tw);
}

/* ---- kill -9 at every step of a copy that drops ------------------------------ */

static int kill_at;

static int child_copy(void *arg)
{
	struct sfs_ttl_rule rules[SFS_MAX_STATES];
	struct sfs_mstore_writer w;
	char rule[32];

	(void)arg;
	if (sfs_mstore_open(&seg, 0, 4u << 20, slot, &w))
		return 2;
	rules_of(rules);
	sfs_mstore_ttl(&w, rules, &(struct sfs_ttl_clock){ 100, 100 });
	snprintf(rule, sizeof(rule), "memory.cop*:%d", kill_at);
	if (sfs_fault_arm(rule))
		return 4;
	return sfs_mstore_compact(&w) ? 3 : 0;
}

Test(mttl, a_copy_killed_at_any_step_leaves_the_old_or_the_new_version, .timeout = 300)
{
	struct sfs_ttl_rule rules[SFS_MAX_STATES];
	int finished = 0, before = 0, after = 0;

	rules_of(rules);
	for (kill_at = 1; !finished && kill_at < 1000; kill_at++) {
		struct sfs_mstore_writer w;
		uint64_t recs, copies;
		int status;

		if (kill_at > 1) {
			teardown();
			setup();
		}
		cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0);
		recs = fill(&w);
		copies = w.ms->ms_copies;
		sfs_mstore_close(&w);

		status = th_wait(th_fork(child_copy, NULL), 20000);
		if (WIFEXITED(status)) {
			cr_assert_eq(th_exit_code(status), 0, "the copy failed without a kill");
			finished = 1;
		} else {
			cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
				  "step %d: status %d", kill_at, status);
		}
		/* The restarted writer finds the old version whole or the new one. */
		cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0);
		if (w.ms->ms_copies == copies) {
			before++;
			check_store(w.ms, 0);
			cr_assert_eq(w.ms->ms_live, recs);
			walk(w.ms);
		} else {
			after++;
			check_store(w.ms, 100);
		}
		/* and its next copy (rules known again) leaves the dropped state,
		 * counters exact */
		sfs_mstore_ttl(&w, rules, &(struct sfs_ttl_clock){ 100, 100 });
		cr_assert_eq(sfs_mstore_compact(&w), 0, "%s", sfs_last_error());
		check_store(w.ms, 100);
		walk(w.ms);
		sfs_mstore_close(&w);
	}
	cr_assert(finished, "never finished");
	cr_assert_gt(before, 10, "kills before the publication: %d", before);
	cr_assert_gt(after, 0, "no kill after the publication");
}
