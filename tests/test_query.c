/*
 * test_query.c — queryable state (worker/query.c, include/sfs.h): a
 * writer process (two workers of one job, in one forked child) writes
 * value, counter and map state, seals a phase at every barrier and goes
 * on writing the next phase into its active buffers, while the real
 * compactor flushes and this process reads through sfs_query_* and checks
 * every answer against a model: the answer must be exactly the state as
 * of the seal the query says it read (sfs_query_seq), values must carry
 * their own checksum (never torn), and nothing of an unsealed phase may
 * show.  Once the writer is done and everything is flushed, every key is
 * checked from the store alone.  On the memory, table and rocksdb
 * targets.  Also: an online reader holds off the reuse of a buffer it
 * reads, and the refusals (unknown state, observer handle, offline,
 * wrong kind).
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

#define SEG_MB 160

/* state_helpers.h's helpers this file does not call. */
static void *const unused_helpers[] __attribute__((unused)) = { (void *)wait_flushed };

static struct sfs_seg seg;
static char dir[128];

static void setup_backend(const char *backend)
{
	th_job(job, sizeof(job), "query");
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
	dir[0] = '\0';
	if (backend) {
		/* What the supervisor does for --backend, before any child. */
		snprintf(dir, sizeof(dir), "/tmp/sfs-query-XXXXXX");
		cr_assert_not_null(mkdtemp(dir));
		snprintf(seg.hdr->sh_backend, sizeof(seg.hdr->sh_backend), "%s", backend);
		snprintf(seg.hdr->sh_data_dir, sizeof(seg.hdr->sh_data_dir), "%s/store", dir);
	}
}

static void setup(void)
{
	setup_backend(NULL);
}

static void teardown(void)
{
	char cmd[sizeof(dir) + 16];

	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
	}
}

TestSuite(query, .init = setup, .fini = teardown, .timeout = 240);

/* ---- the model: every phase's writes are a function of (seed, phase, key) -------- */

#define PAR 2
#define NV 400          /* value keys */
#define NC 200          /* counter keys */
#define NM 48           /* map keys */
#define NU 12           /* user keys per map */
#define VMAGIC 0x51564c31u

static uint64_t seed_of(void)
{
	const char *s = getenv("SFS_TEST_SEED");

	return s && *s ? strtoull(s, NULL, 0) : 0x5eed2024ull;
}

static uint64_t mix(uint64_t seed, uint64_t p, uint64_t d, uint64_t salt)
{
	uint64_t s = seed ^ (p * 0x9e3779b97f4a7c15ull) ^ (d * 0xc2b2ae3d27d4eb4full) ^ (salt << 56);

	return th_rand(&s);
}

/* Value key d at phase p: 0 untouched, 1 put, 2 delete. */
static int v_op(uint64_t seed, unsigned p, unsigned d)
{
	uint64_t r = mix(seed, p, d, 1) % 100;

	return r < 25 ? 1 : r < 30 ? 2 : 0;
}

static int c_touch(uint64_t seed, unsigned p, unsigned d)
{
	return mix(seed, p, d, 2) % 100 < 30;
}

static int64_t c_delta(uint64_t seed, unsigned p, unsigned d)
{
	return (int64_t)(mix(seed, p, d, 3) % 2001) - 1000;
}

static int m_clear(uint64_t seed, unsigned p, unsigned d)
{
	return mix(seed, p, d, 4) % 100 < 4;
}

/* Map d's user key u at phase p: 0 untouched, 1 put, 2 remove. */
static int m_op(uint64_t seed, unsigned p, unsigned d, unsigned u)
{
	uint64_t r = mix(seed, p, d * NU + u, 5) % 100;

	return r < 15 ? 1 : r < 20 ? 2 : 0;
}

/* A self-describing value: magic, key, phase, length, pattern, checksum. */
static uint32_t vsum(const unsigned char *b, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static size_t make_value(unsigned char *out, uint64_t seed, unsigned p, unsigned d, unsigned u)
{
	uint64_t r = mix(seed, p, d * 64 + u, 6);
	size_t len = 24 + r % 200;
	uint32_t hdr[4] = { VMAGIC, d << 8 | u, p, (uint32_t)len }, sum;

	memcpy(out, hdr, sizeof(hdr));
	for (size_t i = 16; i < len - 4; i++)
		out[i] = (unsigned char)(r >> (i % 56) ^ i * 31);
	sum = vsum(out, len - 4);
	memcpy(out + len - 4, &sum, 4);
	return len;
}

static int value_whole(const void *v, uint32_t len)
{
	uint32_t hdr[4], sum;

	if (len < 24)
		return 0;
	memcpy(hdr, v, sizeof(hdr));
	memcpy(&sum, (const char *)v + len - 4, 4);
	return hdr[0] == VMAGIC && hdr[3] == len && sum == vsum(v, len - 4);
}

static size_t vkey(char *k, unsigned d)
{
	return (size_t)sprintf(k, "v%u", d);
}

static size_t ckey(char *k, unsigned d)
{
	return (size_t)sprintf(k, "c%u", d);
}

static size_t mkey(char *k, unsigned d)
{
	return (size_t)sprintf(k, "m%u", d);
}

static size_t ukey(char *k, unsigned u)
{
	return (size_t)sprintf(k, "u%u", u);
}

static unsigned owner(const void *k, size_t n)
{
	return sfs_kg_owner(sfs_key_group(k, n, SFS_MAX_PARALLELISM_DEFAULT), PAR,
			    SFS_MAX_PARALLELISM_DEFAULT);
}

/* ---- the writer (a forked child: reports through its exit code) ------------------- */

struct shared {
	volatile uint64_t sealed[PAR];  /* phases sealed by each worker (after its barrier) */
	volatile int stop;
};

struct wargs {
	unsigned phases;
	uint64_t seed;
	struct shared *sh;
};

static int writer(void *arg)
{
	struct wargs *a = arg;
	struct sfs_worker_opts o = { .parallelism = PAR, .buffers = 4, .buffer_bytes = 2u << 20,
				     .buffer_keys = 8192, .cache_bytes = 1u << 20 };
	sfs_ctx_t *c[PAR];
	uint32_t sv, sc, sm;
	unsigned char val[256];
	char k[32], u[32];

	for (unsigned w = 0; w < PAR; w++) {
		if (sfs_worker_open(job, 0, w, &o, &c[w]))
			return 10;
		if (sfs_state_register(c[w], "qv", SFS_STATE_VALUE, &sv) ||
		    sfs_state_register(c[w], "qc", SFS_STATE_COUNTER, &sc) ||
		    sfs_state_register(c[w], "qm", SFS_STATE_MAP, &sm))
			return 11;
	}
	for (unsigned p = 1; p <= a->phases; p++) {
		for (unsigned d = 0; d < NV; d++) {
			size_t n = vkey(k, d);
			int op = v_op(a->seed, p, d), rc = 0;
			sfs_ctx_t *cw = c[owner(k, n)];

			if (op == 1)
				rc = sfs_value_put(cw, sv, 0, k, n, val,
						   make_value(val, a->seed, p, d, 0));
			else if (op == 2)
				rc = sfs_value_delete(cw, sv, 0, k, n);
			if (rc)
				return 12;
			if (d == NV / 2) {
				/* Half a phase in the active buffers only, for a while. */
				for (unsigned w = 0; w < PAR; w++)
					sfs_ctx_quiescent(c[w]);
				usleep(1000);
			}
		}
		for (unsigned d = 0; d < NC; d++) {
			size_t n = ckey(k, d);

			if (c_touch(a->seed, p, d) &&
			    sfs_counter_add(c[owner(k, n)], sc, 0, k, n, c_delta(a->seed, p, d)))
				return 13;
		}
		for (unsigned d = 0; d < NM; d++) {
			size_t n = mkey(k, d);
			sfs_ctx_t *cw = c[owner(k, n)];

			if (m_clear(a->seed, p, d) && sfs_map_clear(cw, sm, 0, k, n))
				return 14;
			for (unsigned x = 0; x < NU; x++) {
				size_t ul = ukey(u, x);
				int op = m_op(a->seed, p, d, x), rc = 0;

				if (op == 1)
					rc = sfs_map_put(cw, sm, 0, k, n, u, ul, val,
							 make_value(val, a->seed, p, d, x + 1));
				else if (op == 2)
					rc = sfs_map_remove(cw, sm, 0, k, n, u, ul);
				if (rc)
					return 15;
			}
		}
		/* Two workers in one process: the one not sealing goes offline,
		 * or a seal waiting for a free buffer would wait for a grace
		 * period that waits for the other one. */
		for (unsigned w = 0; w < PAR; w++)
			sfs_ctx_offline(c[w]);
		for (unsigned w = 0; w < PAR; w++) {
			sfs_ctx_online(c[w]);
			if (sfs_barrier(c[w], p))
				return 16;
			sfs_ctx_offline(c[w]);
			__atomic_store_n(&a->sh->sealed[w], p, __ATOMIC_RELEASE);
		}
		for (unsigned w = 0; w < PAR; w++)
			sfs_ctx_online(c[w]);
	}
	for (unsigned w = 0; w < PAR; w++) {
		struct sfs_worker_stats st;

		sfs_worker_stats(c[w], &st);
		if (st.spills)
			return 17;	/* the model needs seq == phase */
	}
	for (unsigned w = 0; w < PAR; w++)
		sfs_worker_close(c[w]);
	return 0;
}

/* ---- the checks (this process) -------------------------------------------------- */

struct checker {
	uint64_t seed;
	sfs_query_t *qv, *qc, *qm;
	uint64_t reads, from_sealed;
};

static int check_value(struct checker *ck, unsigned d, char *why, size_t wn)
{
	char k[32];
	size_t n = vkey(k, d);
	struct sfs_view v;
	unsigned char want[256];
	size_t wl = 0;
	int rc = sfs_query_value(ck->qv, 0, k, n, &v), present = 0;
	uint64_t s = sfs_query_seq(ck->qv);

	if (rc < 0) {
		snprintf(why, wn, "value %s: %s", k, sfs_last_error());
		return 0;
	}
	for (unsigned p = (unsigned)s; p >= 1; p--) {
		int op = v_op(ck->seed, p, d);

		if (op == 1) {
			wl = make_value(want, ck->seed, p, d, 0);
			present = 1;
			break;
		}
		if (op == 2)
			break;
	}
	if (rc == 1 && !value_whole(v.data, v.len)) {
		snprintf(why, wn, "value %s: torn (%u bytes)", k, v.len);
		return 0;
	}
	if (rc != present || (present && (v.len != wl || memcmp(v.data, want, wl) != 0))) {
		uint32_t hdr[4] = { 0 };

		if (rc == 1)
			memcpy(hdr, v.data, sizeof(hdr));
		snprintf(why, wn, "value %s as of seal %llu: got %s (phase %u), want %s", k,
			 (unsigned long long)s, rc ? "a value" : "absent", hdr[2],
			 present ? "a value" : "absent");
		return 0;
	}
	return 1;
}

static int check_counter(struct checker *ck, unsigned d, char *why, size_t wn)
{
	char k[32];
	size_t n = ckey(k, d);
	int64_t got, want = 0;
	int rc = sfs_query_counter(ck->qc, 0, k, n, &got), present = 0;
	uint64_t s = sfs_query_seq(ck->qc);

	if (rc < 0) {
		snprintf(why, wn, "counter %s: %s", k, sfs_last_error());
		return 0;
	}
	for (unsigned p = 1; p <= s; p++)
		if (c_touch(ck->seed, p, d)) {
			want += c_delta(ck->seed, p, d);
			present = 1;
		}
	if (rc != present || got != want) {
		snprintf(why, wn, "counter %s as of seal %llu: got %d/%lld, want %d/%lld", k,
			 (unsigned long long)s, rc, (long long)got, present, (long long)want);
		return 0;
	}
	return 1;
}

/* The model's map d as of seal s: the phase of each user key's live value. */
static void map_model(const struct checker *ck, unsigned d, uint64_t s, unsigned *ph)
{
	memset(ph, 0, NU * sizeof(*ph));
	for (unsigned p = 1; p <= s; p++) {
		if (m_clear(ck->seed, p, d))
			memset(ph, 0, NU * sizeof(*ph));
		for (unsigned x = 0; x < NU; x++) {
			int op = m_op(ck->seed, p, d, x);

			if (op)
				ph[x] = op == 1 ? p : 0;
		}
	}
}

struct seen_map {
	const struct checker *ck;
	unsigned d, n, bad;
	unsigned got[NU];
	char why[160];
};

static int map_entry(void *arg, const void *uk, uint32_t ul, const void *val, uint32_t vl)
{
	struct seen_map *m = arg;
	uint32_t hdr[4];
	unsigned x;
	char s[16];

	snprintf(s, sizeof(s), "%.*s", (int)(ul < 15 ? ul : 15), (const char *)uk);
	if (sscanf(s, "u%u", &x) != 1 || x >= NU || m->got[x] || !value_whole(val, vl)) {
		snprintf(m->why, sizeof(m->why), "map m%u: entry '%s' unknown, twice or torn",
			 m->d, s);
		m->bad = 1;
		return 0;
	}
	memcpy(hdr, val, sizeof(hdr));
	m->got[x] = hdr[2] ? hdr[2] : UINT_MAX;
	m->n++;
	return 0;
}

static int check_map(struct checker *ck, unsigned d, char *why, size_t wn)
{
	char k[32], u[32];
	size_t n = mkey(k, d);
	struct seen_map m = { .ck = ck, .d = d };
	unsigned want[NU];
	int rc = sfs_query_map_iter(ck->qm, 0, k, n, map_entry, &m);
	uint64_t s = sfs_query_seq(ck->qm);
	unsigned x = (unsigned)(mix(ck->seed, s, d, 7) % NU), ph = UINT_MAX;
	struct sfs_view v;

	if (rc < 0) {
		snprintf(why, wn, "map %s: %s", k, sfs_last_error());
		return 0;
	}
	if (m.bad) {
		snprintf(why, wn, "%s", m.why);
		return 0;
	}
	map_model(ck, d, s, want);
	for (unsigned i = 0; i < NU; i++)
		if (m.got[i] != want[i]) {
			snprintf(why, wn, "map %s as of seal %llu: user key u%u from phase %u, want %u",
				 k, (unsigned long long)s, i, m.got[i], want[i]);
			return 0;
		}
	/* One user key alone. */
	rc = sfs_query_map_get(ck->qm, 0, k, n, u, ukey(u, x), &v);
	s = sfs_query_seq(ck->qm);
	map_model(ck, d, s, want);
	if (rc == 1 && value_whole(v.data, v.len))
		memcpy(&ph, (const char *)v.data + 8, 4);
	if (rc < 0 || rc != (want[x] != 0) || (rc == 1 && ph != want[x])) {
		snprintf(why, wn, "map get %s/u%u as of seal %llu: %d, want phase %u", k, x,
			 (unsigned long long)s, rc, want[x]);
		return 0;
	}
	return 1;
}

static sfs_query_t *open_when_registered(sfs_handle_t *h, const char *name)
{
	sfs_query_t *q = NULL;

	for (int i = 0; i < 5000 && sfs_query_open(h, name, &q) != 0; i++)
		usleep(1000);
	return q;
}

/* Wait until worker @w has flushed seq @seq. */
static int flushed_to(unsigned w, uint64_t seq, int ms)
{
	struct sfs_wctl *ctl;
	struct sfs_ring *ring;
	struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];

	if (sfs_wctl_attach(&seg, w, &ctl, &ring, bufs))
		return 0;
	for (int i = 0; i < ms; i++) {
		if (sfs_load_acquire(&ctl->wc_flushed_seq) >= seq)
			return 1;
		usleep(1000);
	}
	return 0;
}

static void model_run(unsigned phases)
{
	struct shared *sh = th_map(sizeof(*sh));
	struct wargs a = { .phases = phases, .seed = seed_of(), .sh = sh };
	struct checker ck = { .seed = a.seed };
	pid_t comp = start_compactor(), wr;
	sfs_handle_t *h;
	char why[256] = "";
	uint64_t rs = a.seed ^ 0xabcdefull, reads = 0, live = 0;
	int status = -1, ok = 1, done = 0;

	wr = th_fork(writer, &a);
	/* The writer creates the regions and states. */
	for (int i = 0; i < 5000 && !__atomic_load_n(&sh->sealed[0], __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	cr_assert_eq(sfs_attach(job, 0, 0, &h), 0, "%s", sfs_last_error());
	ck.qv = open_when_registered(h, "qv");
	ck.qc = open_when_registered(h, "qc");
	ck.qm = open_when_registered(h, "qm");
	cr_assert(ck.qv && ck.qc && ck.qm, "states registered");
	while (ok && !done) {
		unsigned kind = (unsigned)(th_rand(&rs) % 3);
		uint64_t before[PAR], after[PAR];
		unsigned d = 0, w;
		uint64_t s;
		char k[32];
		size_t n;

		for (unsigned i = 0; i < PAR; i++)
			before[i] = __atomic_load_n(&sh->sealed[i], __ATOMIC_ACQUIRE);
		sfs_online(h);
		if (kind == 0) {
			d = (unsigned)(th_rand(&rs) % NV);
			ok = check_value(&ck, d, why, sizeof(why));
			n = vkey(k, d);
			s = sfs_query_seq(ck.qv);
		} else if (kind == 1) {
			d = (unsigned)(th_rand(&rs) % NC);
			ok = check_counter(&ck, d, why, sizeof(why));
			n = ckey(k, d);
			s = sfs_query_seq(ck.qc);
		} else {
			d = (unsigned)(th_rand(&rs) % NM);
			ok = check_map(&ck, d, why, sizeof(why));
			n = mkey(k, d);
			s = sfs_query_seq(ck.qm);
		}
		sfs_quiescent(h);
		for (unsigned i = 0; i < PAR; i++)
			after[i] = __atomic_load_n(&sh->sealed[i], __ATOMIC_ACQUIRE);
		w = owner(k, n);
		/* The seal read is one the writer made, and no older than
		 * the last one it had made before the read began. */
		if (ok && (s < before[w] || s > after[w] + 1)) {
			snprintf(why, sizeof(why), "%s: read as of seal %llu, the writer had sealed "
				 "%llu before and %llu after", k, (unsigned long long)s,
				 (unsigned long long)before[w], (unsigned long long)after[w]);
			ok = 0;
		}
		reads++;
		live += after[w] < phases;
		if (waitpid(wr, &status, WNOHANG) == wr)
			done = 1;
	}
	sfs_offline(h);	/* a reader that stops reading must not hold off reuse */
	if (!done)
		status = th_wait(wr, 60000);
	cr_assert(ok, "after %llu reads: %s", (unsigned long long)reads, why);
	cr_assert_eq(th_exit_code(status), 0, "writer exit %d", th_exit_code(status));
	cr_assert_gt(live, 100, "only %llu reads while the writer wrote", (unsigned long long)live);
	/* Everything flushed: every key from the store alone. */
	for (unsigned w = 0; w < PAR; w++)
		cr_assert(flushed_to(w, phases, 60000), "worker %u flushed", w);
	sfs_online(h);
	for (unsigned d = 0; ok && d < NV; d++)
		ok = check_value(&ck, d, why, sizeof(why)) && sfs_query_seq(ck.qv) == phases;
	for (unsigned d = 0; ok && d < NC; d++)
		ok = check_counter(&ck, d, why, sizeof(why)) && sfs_query_seq(ck.qc) == phases;
	for (unsigned d = 0; ok && d < NM; d++)
		ok = check_map(&ck, d, why, sizeof(why)) && sfs_query_seq(ck.qm) == phases;
	sfs_offline(h);
	cr_assert(ok, "after the flush: %s", why[0] ? why : "not as of the last seal");
	fprintf(stderr, "test_query %s: %llu reads, %llu while the writer wrote\n",
		seg.hdr->sh_backend[0] ? seg.hdr->sh_backend : "memory", (unsigned long long)reads,
		(unsigned long long)live);
	sfs_query_close(ck.qv);
	sfs_query_close(ck.qc);
	sfs_query_close(ck.qm);
	sfs_detach(h);
	kill(comp, SIGTERM);
	cr_assert_neq(th_wait(comp, 20000), -1, "compactor stops on SIGTERM");
	munmap(sh, sizeof(*sh));
}

Test(query, model_memory_target)
{
	model_run(400 * (unsigned)th_soak());
}

Test(query, model_table_target)
{
	teardown();
	setup_backend("table");
	model_run(150 * (unsigned)th_soak());
}

Test(query, model_rocksdb_target)
{
	teardown();
	setup_backend("rocksdb");
	model_run(100 * (unsigned)th_soak());
}

/* ---- reclamation: an online reader holds off the reuse of what it reads ---------- */

Test(query, an_online_reader_holds_off_buffer_reuse)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc ip;
	sfs_ctx_t *c;
	sfs_handle_t *h;
	sfs_query_t *q;
	struct sfs_view v;
	uint32_t st, b0;
	char copy[16];

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	cr_assert_eq(sfs_value_put(c, st, 0, "k", 1, "sealed-1", 8), 0);
	b0 = c->ctl->wc_active;
	cr_assert_eq(sfs_barrier(c, 1), 0);
	cr_assert_eq(sfs_value_put(c, st, 0, "k", 1, "active-2", 8), 0);

	cr_assert_eq(sfs_attach(job, 0, 0, &h), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_query_open(h, "v", &q), 0, "%s", sfs_last_error());
	sfs_online(h);
	cr_assert_eq(sfs_query_value(q, 0, "k", 1, &v), 1, "%s", sfs_last_error());
	cr_assert_eq(v.len, 8);
	cr_assert_eq(memcmp(v.data, "sealed-1", 8), 0, "the sealed value, not the active one");
	cr_assert_eq(sfs_query_seq(q), 1);
	memcpy(copy, v.data, 8);

	/* Flush buffer 1: it turns RETIRING, and stays so while we are
	 * online (the worker is quiescent at every step). */
	inproc_start(&ip);
	for (int i = 0; i < 400; i++) {
		int pending = 0;

		sfs_ctx_quiescent(c);
		cr_assert_geq(sfs_flusher_step(&ip.f, 1000, &pending), 0, "%s", sfs_last_error());
		usleep(1000);
	}
	cr_assert_eq(sfs_load_acquire(&c->ctl->wc_buf[b0].cb_state), SFS_BUF_RETIRING,
		     "a buffer an online reader may read is not freed");
	cr_assert_eq(memcmp(v.data, copy, 8), 0, "the view still holds");
	/* The store answers the same now. */
	cr_assert_eq(sfs_query_value(q, 0, "k", 1, &v), 1);
	cr_assert_eq(memcmp(v.data, "sealed-1", 8), 0);

	sfs_quiescent(h);
	sfs_offline(h);
	inproc_drain(&ip, c);
	cr_assert_eq(sfs_load_acquire(&c->ctl->wc_buf[b0].cb_state), SFS_BUF_FREE,
		     "freed once the reader is quiescent");
	sfs_query_close(q);
	sfs_detach(h);
	inproc_stop(&ip);
	sfs_worker_close(c);
}

/* ---- refusals -------------------------------------------------------------------- */

Test(query, refusals_name_what_is_wrong)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	sfs_handle_t *h, *obs;
	sfs_query_t *q;
	struct sfs_view v;
	int64_t n;
	uint32_t st, sc;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &st), 0);
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_counter_add(c, sc, 0, "x", 1, 5), 0);
	cr_assert_eq(sfs_barrier(c, 1), 0);
	cr_assert_eq(sfs_attach(job, 0, 0, &h), 0);
	cr_assert_eq(sfs_attach(job, 0, SFS_ATTACH_OBSERVER, &obs), 0);

	cr_assert_eq(sfs_query_open(h, "nope", &q), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "nope"), "%s", sfs_last_error());
	cr_assert_eq(sfs_query_open(obs, "v", &q), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "observer"), "%s", sfs_last_error());

	cr_assert_eq(sfs_query_open(h, "c", &q), 0);
	cr_assert_eq(sfs_query_kind(q), SFS_STATE_COUNTER);
	cr_assert_eq(sfs_query_counter(q, 0, "x", 1, &n), SFS_EUSAGE, "offline");
	cr_assert(strstr(sfs_last_error(), "sfs_online"), "%s", sfs_last_error());
	sfs_online(h);
	cr_assert_eq(sfs_query_value(q, 0, "x", 1, &v), SFS_EUSAGE, "wrong kind");
	cr_assert_eq(sfs_query_counter(q, 0, "x", 1, &n), 1, "%s", sfs_last_error());
	cr_assert_eq(n, 5);
	cr_assert_eq(sfs_query_counter(q, 0, "y", 1, &n), 0);
	cr_assert_eq(n, 0);
	sfs_offline(h);
	sfs_query_close(q);
	sfs_detach(obs);
	sfs_detach(h);
	sfs_worker_close(c);
}
