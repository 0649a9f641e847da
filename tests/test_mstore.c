/*
 * test_mstore.c — the memory target's store (store/memory/memory.c, mstore_*.c) on its own:
 * map state per entry (a flush of one changed entry writes O(1) bytes,
 * iteration and point reads after many overwrites, removes and clears
 * across flushes and semispace copies match a reference, a redone flush
 * changes nothing), and a writer killed at every step of a map write: the
 * restart finishes or drops the step, the redone flush loses and doubles
 * nothing.  Checkpoint dumps beside the flush (store/memory/memdump.h): a dump of
 * a frozen version is byte for byte the dump of the live store at the
 * freeze, whatever is flushed after it; a copy into the pinned half waits
 * for the dump; a full store says what to do.
 */
#include <criterion/criterion.h>
#include <signal.h>

#include "common/err.h"
#include "common/fault.h"
#include "shm/proc.h"
#include "store/memory/memdump.h"
#include "store/memory/memory.h"
#include "tests/helpers.h"
#include "worker/wbuf.h"

static char job[64];
static struct sfs_seg seg;
static struct sfs_proc_slot *slot;

static void open_seg(void)
{
	cr_assert_eq(sfs_seg_create(job, 0, 32u << 20, 1, &seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0, "%s",
		     sfs_last_error());
}

static void close_seg(void)
{
	sfs_proc_unregister(slot);
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

static void setup(void)
{
	th_job(job, sizeof(job), "mst");
	open_seg();
}

TestSuite(mstore, .init = setup, .fini = close_seg, .timeout = 120);

/* ---- keys: P = kg | state | klen | "m<k>", entry key P | "u<u>" ---------- */

#define NM 4    /* maps */
#define NU 48   /* user keys per map */

struct key {
	unsigned char b[48];
	uint32_t plen, klen;
	uint64_t ph, h;
};

static void mkkey(struct key *k, int m, int u)
{
	char mk[16], uk[16];
	size_t ml, ul;

	snprintf(mk, sizeof(mk), "m%d", m);
	ml = strlen(mk);
	k->b[0] = 0;
	k->b[1] = 3;	/* key group */
	k->b[2] = 0;
	k->b[3] = 1;	/* state */
	k->b[4] = 0;
	k->b[5] = (unsigned char)ml;
	memcpy(k->b + 6, mk, ml);
	k->plen = (uint32_t)(6 + ml);
	ul = 0;
	if (u >= 0) {
		snprintf(uk, sizeof(uk), "u%02d", u);
		ul = strlen(uk);
		memcpy(k->b + k->plen, uk, ul);
	}
	k->klen = k->plen + (uint32_t)ul;
	k->ph = sfs_wbuf_hash(0, k->b, k->plen);
	k->h = sfs_wbuf_hash(0, k->b, k->klen);
}

/* ---- a reference, and the writes of one flush ------------------------------ */

struct ref {
	int present[NM][NU];
	char val[NM][NU][24];
};

enum { OP_PUT, OP_REMOVE, OP_CLEAR };

struct op {
	int kind, m, u;
	char val[24];
};

/* One buffer's writes, in flush order: clears first, then entries, each
 * user key at most once (what a sorted flush of one buffer gives). */
struct batch {
	uint64_t tag;
	int n;
	struct op op[NM * NU + NM];
};

static void ref_apply(struct ref *r, const struct batch *b)
{
	for (int i = 0; i < b->n; i++) {
		const struct op *o = &b->op[i];

		if (o->kind == OP_CLEAR) {
			memset(r->present[o->m], 0, sizeof(r->present[o->m]));
		} else if (o->kind == OP_REMOVE) {
			r->present[o->m][o->u] = 0;
		} else {
			r->present[o->m][o->u] = 1;
			snprintf(r->val[o->m][o->u], sizeof(r->val[o->m][o->u]), "%s", o->val);
		}
	}
}

static int apply(struct sfs_mstore_writer *w, const struct batch *b)
{
	for (int i = 0; i < b->n; i++) {
		const struct op *o = &b->op[i];
		struct key k;
		int rc;

		mkkey(&k, o->m, o->kind == OP_CLEAR ? -1 : o->u);
		if (o->kind == OP_CLEAR)
			rc = sfs_mstore_map_clear(w, k.ph, 0, k.b, k.plen, b->tag);
		else if (o->kind == OP_REMOVE)
			rc = sfs_mstore_map_remove(w, k.h, 0, k.b, k.klen, b->tag);
		else
			rc = sfs_mstore_map_put(w, k.h, k.ph, 0, k.b, k.klen, k.plen, o->val,
						(uint32_t)strlen(o->val), b->tag);
		if (rc)
			return rc;
	}
	sfs_mstore_commit(w, b->tag);
	return 0;
}

static void rand_batch(struct batch *b, uint64_t tag, uint64_t *seed, int size)
{
	int used[NM][NU] = { { 0 } };

	b->tag = tag;
	b->n = 0;
	for (int m = 0; m < NM; m++)
		if (th_rand(seed) % 16 == 0)
			b->op[b->n++] = (struct op){ .kind = OP_CLEAR, .m = m };
	for (int i = 0; i < size; i++) {
		int m = (int)(th_rand(seed) % NM), u = (int)(th_rand(seed) % NU);
		struct op *o = &b->op[b->n];

		if (used[m][u])
			continue;
		used[m][u] = 1;
		o->m = m;
		o->u = u;
		o->kind = th_rand(seed) % 3 == 0 ? OP_REMOVE : OP_PUT;
		snprintf(o->val, sizeof(o->val), "v%llu-%d", (unsigned long long)tag, i);
		b->n++;
	}
}

struct seen {
	int n, dup, bad;
	int got[NU];
	const struct ref *r;
	int m;
};

static int visit(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct seen *s = arg;
	int u;

	if (ulen != 3 || sscanf((const char *)ukey + 1, "%2d", &u) != 1 || u < 0 || u >= NU) {
		s->bad++;
		return 0;
	}
	if (s->got[u]++)
		s->dup++;
	if (!s->r->present[s->m][u] || strlen(s->r->val[s->m][u]) != vlen ||
	    memcmp(s->r->val[s->m][u], val, vlen) != 0)
		s->bad++;
	s->n++;
	return 0;
}

/* The store (read as a reader does) equals @r: every map's iteration and
 * every point read. */
static void check(const struct sfs_mstore *ms, const struct ref *r, const char *when)
{
	cr_assert_eq(sfs_mstore_verify(ms), 0, "%s: %s", when, sfs_last_error());
	for (int m = 0; m < NM; m++) {
		struct seen s = { .r = r, .m = m };
		struct key k;
		int want = 0;

		mkkey(&k, m, -1);
		cr_assert_eq(sfs_mstore_map_iter(ms, k.ph, 0, k.b, k.plen, visit, &s), 0);
		for (int u = 0; u < NU; u++) {
			struct sfs_mstore_view v;
			int got;

			want += r->present[m][u];
			mkkey(&k, m, u);
			got = sfs_mstore_get(ms, k.h, 0, k.b, k.klen, &v);
			cr_assert_eq(got, r->present[m][u], "%s: get m%d/u%02d", when, m, u);
			if (got)
				cr_assert(v.len == strlen(r->val[m][u]) &&
					  memcmp(v.value, r->val[m][u], v.len) == 0,
					  "%s: get m%d/u%02d", when, m, u);
		}
		cr_assert(s.dup == 0 && s.bad == 0 && s.n == want,
			  "%s: map m%d iterates %d entries (%d twice, %d wrong), want %d", when, m,
			  s.n, s.dup, s.bad, want);
	}
}

/* ---- tests ------------------------------------------------------------------- */

static int count_one(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	(void)ukey, (void)ulen, (void)val, (void)vlen;
	++*(int *)arg;
	return 0;
}

Test(mstore, one_changed_entry_of_a_large_map_writes_o1_bytes)
{
	struct sfs_mstore_writer w;
	struct sfs_mstore_view v;
	unsigned char k[64];
	uint64_t before, ph;
	const uint32_t plen = 8, n = 20000;
	int count = 0;

	cr_assert_eq(sfs_mstore_open(&seg, 0, 16u << 20, slot, &w), 0, "%s", sfs_last_error());
	memcpy(k, "\0\1\0\1\0\2mk", plen);
	ph = sfs_wbuf_hash(0, k, plen);
	for (uint32_t i = 0; i < n; i++) {
		memcpy(k + plen, &i, 4);
		cr_assert_eq(sfs_mstore_map_put(&w, sfs_wbuf_hash(0, k, plen + 4), ph, 0, k, plen + 4,
						plen, "0123456789abcdef", 16, 1), 0);
	}
	sfs_mstore_commit(&w, 1);
	before = w.ms->ms_written;
	/* One entry of the 20000 changes in the next flush. */
	memcpy(k + plen, &(uint32_t){ 777 }, 4);
	cr_assert_eq(sfs_mstore_map_put(&w, sfs_wbuf_hash(0, k, plen + 4), ph, 0, k, plen + 4, plen,
					"changed", 7, 2), 0);
	sfs_mstore_commit(&w, 2);
	cr_assert_lt(w.ms->ms_written - before, 128, "one entry of a 20000-entry map: %llu bytes",
		     (unsigned long long)(w.ms->ms_written - before));
	cr_assert_eq(sfs_mstore_get(w.ms, sfs_wbuf_hash(0, k, plen + 4), 0, k, plen + 4, &v), 1);
	cr_assert(v.len == 7 && memcmp(v.value, "changed", 7) == 0);
	/* A remove appends nothing. */
	before = w.ms->ms_written;
	cr_assert_eq(sfs_mstore_map_remove(&w, sfs_wbuf_hash(0, k, plen + 4), 0, k, plen + 4, 3), 0);
	sfs_mstore_commit(&w, 3);
	cr_assert_eq(w.ms->ms_written, before);
	cr_assert_eq(sfs_mstore_get(w.ms, sfs_wbuf_hash(0, k, plen + 4), 0, k, plen + 4, &v), 0);
	cr_assert_eq(sfs_mstore_map_iter(w.ms, ph, 0, k, plen, count_one, &count), 0);
	cr_assert_eq(count, (int)n - 1);
	cr_assert_eq(sfs_mstore_verify(w.ms), 0, "%s", sfs_last_error());
	sfs_mstore_close(&w);
}

/* A read answers for its own key only: two keys (or one key in two
 * namespaces) that share a 64-bit hash are told apart by the record's
 * namespace, length and bytes -- random keys never collide, so this is
 * the one test that reaches those compares.  Keys of 8, 20 and 40 bytes:
 * each of the inline compare's widths and the memcmp beyond. */
Test(mstore, a_read_answers_only_its_own_key_when_hashes_collide)
{
	static const uint32_t lens[] = { 8, 20, 40 };
	struct sfs_mstore_writer w;
	struct sfs_mstore_view v;
	unsigned char a[40], b[40];
	const uint64_t h = 0x1234567890abcdefull;

	cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0, "%s", sfs_last_error());
	for (unsigned i = 0; i < 3; i++) {
		uint32_t n = lens[i];
		uint64_t hi = h + i;

		memset(a, 'a' + (int)i, n);
		memcpy(b, a, n);
		b[n - 1] ^= 1;	/* differs in its last byte only */
		cr_assert_eq(sfs_mstore_apply(&w, SFS_MSTORE_PUT, 0, hi, 7, a, n, "va", 2, 1), 0,
			     "%s", sfs_last_error());
		sfs_mstore_commit(&w, 1);
		cr_assert_eq(sfs_mstore_get(w.ms, hi, 7, a, n, &v), 1, "len %u", n);
		cr_assert(v.len == 2 && memcmp(v.value, "va", 2) == 0);
		cr_assert_eq(sfs_mstore_get(w.ms, hi, 7, b, n, &v), 0, "another key, len %u", n);
		cr_assert_eq(sfs_mstore_get(w.ms, hi, 8, a, n, &v), 0, "another namespace, len %u",
			     n);
		cr_assert_eq(sfs_mstore_get(w.ms, hi, 7, a, n - 1, &v), 0, "a prefix, len %u", n);
	}
	sfs_mstore_close(&w);
}

Test(mstore, randomized_flushes_match_a_reference_and_redo_changes_nothing)
{
	static struct ref r;
	static struct batch b;
	struct sfs_mstore_writer w;
	uint64_t seed = (uint64_t)getpid(), copies;

	memset(&r, 0, sizeof(r));
	/* A small store: semispace copies happen while maps change. */
	cr_assert_eq(sfs_mstore_open(&seg, 0, 256u << 10, slot, &w), 0, "%s", sfs_last_error());
	for (uint64_t t = 1; t <= 400 * (uint64_t)th_soak(); t++) {
		char when[32];

		rand_batch(&b, t, &seed, 1 + (int)(th_rand(&seed) % 60));
		cr_assert_eq(apply(&w, &b), 0, "flush %llu: %s", (unsigned long long)t,
			     sfs_last_error());
		ref_apply(&r, &b);
		snprintf(when, sizeof(when), "flush %llu", (unsigned long long)t);
		check(w.ms, &r, when);
		if (t % 7 == 0) {
			uint64_t written = w.ms->ms_written;

			/* A redone flush (the compactor restarted): no change. */
			cr_assert_eq(apply(&w, &b), 0, "%s", sfs_last_error());
			cr_assert_eq(w.ms->ms_written, written, "a redone flush wrote bytes");
			check(w.ms, &r, when);
		}
	}
	copies = w.ms->ms_copies;
	cr_assert_gt(copies, 0, "the store never copied: the test missed the semispace copy");
	sfs_mstore_close(&w);
	/* What a restarted writer sees is the same. */
	cr_assert_eq(sfs_mstore_open(&seg, 0, 256u << 10, slot, &w), 0);
	check(w.ms, &r, "reopened");
	sfs_mstore_close(&w);
}

/* ---- kill -9 at every step ------------------------------------------------------ */

static int kill_at;

static struct batch pre[6], last;

/* The flush under test, killed at the kill_at-th step of any kind. */
static int child_flush(void *arg)
{
	struct sfs_mstore_writer w;
	char rule[32];

	(void)arg;
	if (sfs_mstore_open(&seg, 0, 4u << 20, slot, &w))
		return 2;
	snprintf(rule, sizeof(rule), "memory.*:%d", kill_at);
	if (sfs_fault_arm(rule))
		return 4;
	return apply(&w, &last) ? 3 : 0;
}

Test(mstore, writer_killed_at_every_step_loses_and_doubles_nothing, .timeout = 300)
{
	static struct ref r0, r1;
	uint64_t seed = 42;
	int finished = 0;

	/* The flush under test: puts of new and existing user keys, removes
	 * (one empties a map: its head goes too), and a clear with puts after. */
	memset(&r0, 0, sizeof(r0));
	for (int i = 0; i < 6; i++) {
		rand_batch(&pre[i], (uint64_t)i + 1, &seed, 40);
		ref_apply(&r0, &pre[i]);
	}
	last.tag = 7;
	last.n = 0;
	last.op[last.n++] = (struct op){ .kind = OP_CLEAR, .m = 1 };
	for (int u = 0; u < NU; u++)	/* map 3 ends empty */
		if (r0.present[3][u])
			last.op[last.n++] = (struct op){ .kind = OP_REMOVE, .m = 3, .u = u };
	for (int u = 0; u < 6; u++) {
		last.op[last.n] = (struct op){ .kind = OP_PUT, .m = u % 3, .u = u * 7 % NU };
		snprintf(last.op[last.n].val, sizeof(last.op[0].val), "last-%d", u);
		last.n++;
	}
	last.op[last.n++] = (struct op){ .kind = OP_REMOVE, .m = 0, .u = 5 };
	r1 = r0;
	ref_apply(&r1, &last);

	for (kill_at = 1; !finished && kill_at < 10000; kill_at++) {
		struct sfs_mstore_writer w;
		int status;
		char when[48];

		if (kill_at > 1) {
			close_seg();
			th_job(job, sizeof(job), "mst");
			open_seg();
		}
		cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0);
		for (int i = 0; i < 6; i++)
			cr_assert_eq(apply(&w, &pre[i]), 0, "%s", sfs_last_error());
		check(w.ms, &r0, "before");
		sfs_mstore_close(&w);

		status = th_wait(th_fork(child_flush, NULL), 20000);
		if (WIFEXITED(status)) {
			cr_assert_eq(th_exit_code(status), 0, "the flush failed without a kill");
			finished = 1;
		} else {
			cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
				  "step %d: status %d", kill_at, status);
		}
		/* The restarted compactor: open (finishes an intent), redo. */
		cr_assert_eq(sfs_mstore_open(&seg, 0, 4u << 20, slot, &w), 0);
		snprintf(when, sizeof(when), "killed at step %d", kill_at);
		cr_assert_eq(apply(&w, &last), 0, "%s: %s", when, sfs_last_error());
		check(w.ms, &r1, when);
		sfs_mstore_close(&w);
	}
	cr_assert(finished);
	cr_assert_gt(kill_at, 20, "only %d steps: the fault points are not reached", kill_at);
}

/* ---- dumps beside the flush ------------------------------------------------------ */

/* Value records beside the maps: keys "m<4..7>" (parents of no map). */
static void put_values(struct sfs_mstore_writer *w, uint64_t tag, uint64_t *seed)
{
	for (int m = NM; m < 2 * NM; m++) {
		struct key k;
		char v[24];

		if (th_rand(seed) % 2)
			continue;
		mkkey(&k, m, -1);
		snprintf(v, sizeof(v), "val%llu", (unsigned long long)tag);
		cr_assert_eq(sfs_mstore_apply(w, SFS_MSTORE_PUT, 0, k.ph, 0, k.b, k.plen, v,
					      (uint32_t)strlen(v), tag), 0, "%s", sfs_last_error());
	}
}

/* Flushes @from..@to: random map writes and value puts. */
static void flush_range(struct sfs_mstore_writer *w, uint64_t from, uint64_t to, uint64_t *seed)
{
	static struct batch b;

	for (uint64_t t = from; t <= to; t++) {
		rand_batch(&b, t, seed, 1 + (int)(th_rand(seed) % 60));
		put_values(w, t, seed);
		cr_assert_eq(apply(w, &b), 0, "flush %llu: %s", (unsigned long long)t,
			     sfs_last_error());
	}
}

static void same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
	long n = 0;
	int ca, cb;

	cr_assert(fa && fb, "%s or %s missing", a, b);
	do {
		ca = fgetc(fa);
		cb = fgetc(fb);
		cr_assert_eq(ca, cb, "%s and %s differ at byte %ld", a, b, n);
		n++;
	} while (ca != EOF);
	cr_assert_gt(n, 100, "an empty dump: the test dumps nothing");
	fclose(fa);
	fclose(fb);
}

static struct sfs_mdump_job dj;
static int waits;

static int test_pin_wait(void *arg)
{
	waits++;
	return sfs_mdump_wait(arg, &dj);
}

/* Poll until the dump thread reports dump @id. */
static void poll_until(struct sfs_mstore_writer *w, uint64_t id, uint64_t seq)
{
	uint64_t got = 0, gseq = 0;
	int rc = 0;

	for (int i = 0; i < 20000 && rc != 1; i++) {
		rc = sfs_mdump_poll(w, &dj, &got, &gseq);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (rc != 1)
			usleep(1000);
	}
	cr_assert_eq(rc, 1, "dump %llu never reported", (unsigned long long)id);
	cr_assert_eq(got, id);
	cr_assert_eq(gseq, seq, "the dump's version: seq %llu, expected %llu",
		     (unsigned long long)gseq, (unsigned long long)seq);
	cr_assert_null(sfs_mstore_frozen(w->ms), "the pin outlived its dump");
	cr_assert_eq(sfs_mdump_poll(w, &dj, &got, &gseq), 0, "reported twice");
}

Test(mstore, a_frozen_dump_is_its_freeze_whatever_flushes_after_and_a_successor_redoes_it)
{
	char dir[] = "/tmp/sfs-mdump-XXXXXX", exp[64], got[64];
	struct sfs_mstore_writer w;
	uint64_t seed = (uint64_t)getpid() * 3, copies;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(exp, sizeof(exp), "%s/exp.dump", dir);
	snprintf(got, sizeof(got), "%s/got.dump", dir);
	memset(&dj, 0, sizeof(dj));
	cr_assert_eq(sfs_mstore_open(&seg, 0, 512u << 10, slot, &w), 0, "%s", sfs_last_error());
	flush_range(&w, 1, 60, &seed);
	uint64_t recs;
	cr_assert_eq(sfs_mdump_write(w.ms, 0, exp, &recs), 0, "%s", sfs_last_error());
	/* The freeze without its thread: what a compactor killed right
	 * after it leaves. */
	cr_assert_eq(sfs_mstore_freeze(&w, 60, got), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mstore_freeze(&w, 60, got), 1, "a redone freeze pins again");
	cr_assert_eq(sfs_mstore_freeze(&w, 61, got), SFS_ERUNNING);
	copies = w.ms->ms_copies;
	/* Newer flushes, up to one semispace copy (out of the pinned half). */
	for (uint64_t t = 61; w.ms->ms_copies == copies && t < 5000; t += 10)
		flush_range(&w, t, t + 9, &seed);
	cr_assert_eq(w.ms->ms_copies, copies + 1, "no copy after the freeze: the test misses it");
	sfs_mstore_close(&w);
	/* The successor: its first poll restarts the dump from the pin. */
	cr_assert_eq(sfs_mstore_open(&seg, 0, 512u << 10, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_not_null(sfs_mstore_frozen(w.ms), "the pin did not survive its writer");
	poll_until(&w, 60, 60);
	same_file(exp, got);
	cr_assert_eq(sfs_mstore_verify(w.ms), 0, "%s", sfs_last_error());
	sfs_mstore_close(&w);
	unlink(exp);
	unlink(got);
	rmdir(dir);
}

Test(mstore, a_copy_into_the_pinned_half_waits_for_the_dump)
{
	char dir[] = "/tmp/sfs-mdump-XXXXXX", exp[64], got[64];
	struct sfs_mstore_writer w;
	uint64_t seed = (uint64_t)getpid() * 5, copies, recs, t;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(exp, sizeof(exp), "%s/exp.dump", dir);
	snprintf(got, sizeof(got), "%s/got.dump", dir);
	memset(&dj, 0, sizeof(dj));
	cr_assert_eq(sfs_mstore_open(&seg, 0, 512u << 10, slot, &w), 0, "%s", sfs_last_error());
	flush_range(&w, 1, 60, &seed);
	cr_assert_eq(sfs_mdump_write(w.ms, 0, exp, &recs), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mstore_freeze(&w, 7, got), 0, "%s", sfs_last_error());
	copies = w.ms->ms_copies;
	/* Without a pin_wait the second copy is refused, not done over the
	 * list the dump reads. */
	for (t = 61; t < 20000; t++) {
		static struct batch b;
		int rc;

		rand_batch(&b, t, &seed, 60);
		rc = apply(&w, &b);
		if (rc) {
			cr_assert_eq(rc, SFS_ETIMEDOUT, "%s", sfs_last_error());
			break;
		}
	}
	cr_assert_eq(w.ms->ms_copies, copies + 1, "refused after %llu copies",
		     (unsigned long long)(w.ms->ms_copies - copies));
	/* With one (the target's): the dump finishes, then the copy. */
	waits = 0;
	w.pin_wait = test_pin_wait;
	w.pin_arg = &w;
	flush_range(&w, t, t + 400, &seed);
	cr_assert_eq(waits, 1, "pin_wait called %d times", waits);
	cr_assert_gt(w.ms->ms_copies, copies + 1);
	poll_until(&w, 7, 60);
	same_file(exp, got);
	sfs_mstore_close(&w);
	unlink(exp);
	unlink(got);
	rmdir(dir);
}

Test(mstore, a_full_store_says_what_to_do)
{
	struct sfs_mstore_writer w;
	uint64_t seed = 9;
	int rc = 0;
	char v[200];

	memset(v, 'x', sizeof(v));
	cr_assert_eq(sfs_mstore_open(&seg, 0, 256u << 10, slot, &w), 0, "%s", sfs_last_error());
	for (int i = 0; i < 100000 && !rc; i++) {
		struct key k;
		char mk[16];

		mkkey(&k, 0, -1);
		snprintf(mk, sizeof(mk), "k%07d", i);
		memcpy(k.b + 6, mk, 8);
		k.b[5] = 8;
		k.plen = 14;
		k.ph = sfs_wbuf_hash(0, k.b, k.plen);
		rc = sfs_mstore_apply(&w, SFS_MSTORE_PUT, 0, k.ph, 0, k.b, k.plen, v, sizeof(v),
				      1 + th_rand(&seed) % 2);
	}
	cr_assert_eq(rc, SFS_EFULL, "never full: %d", rc);
	cr_assert(strstr(sfs_last_error(), "memory store 0 is full") &&
		  strstr(sfs_last_error(), "raise --store-mb or use --backend table"), "%s",
		  sfs_last_error());
	sfs_mstore_close(&w);
}
