/*
 * test_backend.c — runtime/backend.h's backends through the ops table, each
 * test run against both `memory` (sfs, with an in-process compactor the test
 * steps) and `rocksdb-direct`: a randomized model test against a plain
 * reference (value, counters with add / max / min, map, list, over keys
 * that are prefixes of one another and several namespaces, with barriers
 * and quiescent points at random), and the edges: registration and kind
 * errors, oversized keys and values, map and list prefix isolation, views
 * that stay valid until the quiescent point, multiget with a refused key,
 * callbacks that stop an iteration; then what only rocksdb-direct has (its
 * directory, fresh at open and refused while in use; calls from inside a
 * callback).
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

#include "common/err.h"
#include "runtime/backend.h"
#include "runtime/util.h"
#include "sfs.h"
#include "common/keygroup.h"

#include "tests/backend_fixture.h"

static void setup(void)
{
	fx_setup("backend");
}

TestSuite(backend, .init = setup, .fini = fx_teardown, .timeout = 60);

/* Each test body runs once per backend. */
#define BOTH(fn)                                                                    \
	Test(backend, fn##_memory) { fn("memory"); }                                \
	Test(backend, fn##_rocksdb) { fn("rocksdb-direct"); }

/* ---- fixture ------------------------------------------------------------------ */

static int fx_open_worker(struct fx *f, const char *name, uint32_t worker, uint32_t workers)
{
	return fx_open_backend(f, name, worker, workers);
}

static void fx_open(struct fx *f, const char *name)
{
	cr_assert_eq(fx_open_backend(f, name, 0, 1), 0, "%s: %s", name, rt_last_error());
}

static void fx_barrier(struct fx *f)
{
	fx_barrier_only(f);
}

static void fx_close(struct fx *f)
{
	fx_close_backend(f);
}

static uint32_t fx_reg(struct fx *f, const char *name, int kind, unsigned merge)
{
	uint32_t id;

	cr_assert_eq(f->ops->reg(f->b, name, kind, merge, &id), 0, "reg %s: %s", name,
		     rt_last_error());
	return id;
}

#define S(str) (str), strlen(str)

/* Collects an iteration: ukey=value pairs (printable test data), sorted. */
struct dump {
	char items[32][80];
	int n, calls, stop_at;
	uint32_t ulen_seen;
};

static int add_item(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct dump *d = arg;

	d->calls++;
	d->ulen_seen = ulen;
	if (d->stop_at && d->calls == d->stop_at)
		return 7;
	if (d->n < 32)
		snprintf(d->items[d->n++], 80, "%.*s=%.*s", (int)ulen, (const char *)ukey,
			 (int)vlen, (const char *)val);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void expect_map(struct fx *f, uint32_t st, uint64_t ns, const void *key, size_t klen,
		       const char *want)
{
	struct dump d = { .n = 0 };
	char got[1024] = "";

	cr_assert_eq(f->ops->map_iter(f->b, st, ns, key, klen, add_item, &d), 0, "%s",
		     rt_last_error());
	qsort(d.items, (size_t)d.n, sizeof(d.items[0]), cmp_str);
	for (int i = 0; i < d.n; i++) {
		strcat(got, d.items[i]);
		strcat(got, ";");
	}
	cr_assert_str_eq(got, want, "map %.*s ns %#llx", (int)klen, (const char *)key,
			 (unsigned long long)ns);
}

static int add_el(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	char *s = arg;

	cr_assert_eq(ulen, 8);
	strncat(s, val, vlen);
	strcat(s, ",");
	return 0;
}

static void expect_list(struct fx *f, uint32_t st, uint64_t ns, const char *key, const char *want)
{
	char got[512] = "";

	cr_assert_eq(f->ops->list_get(f->b, st, ns, S(key), add_el, got), 0, "%s",
		     rt_last_error());
	cr_assert_str_eq(got, want, "list %s ns %llu", key, (unsigned long long)ns);
}

/* ---- the randomized model test --------------------------------------------------- */

#define NK 20           /* keys "k0".."k19": "k1" is a prefix of "k10".."k19" */
#define NNS 3
#define NU 6            /* user keys of a map */
#define NL 24           /* list elements the model keeps (then it clears) */
#define VMAX 40
#define HELD_MAX 512
#define MODEL_OPS (40000 * th_soak())

static const uint64_t model_ns[NNS] = { 0, 1, UINT64_MAX };

struct bytes {
	uint32_t len;
	unsigned char b[VMAX];
};

/* Binary user keys: one a prefix of another, 0x00 and 0xff bytes. */
static const struct bytes ukeys[NU] = {
	{ 1, "a" }, { 2, "ab" }, { 1, "b" }, { 2, "\xff\xff" }, { 1, "" }, { 3, "u\0" "5" },
};

struct model {
	int vp[NNS][NK];
	struct bytes v[NNS][NK];
	int cp[NNS][NK];
	int64_t cadd[NNS][NK], cmax[NNS][NK], cmin[NNS][NK];
	int mp[NNS][NK][NU];
	struct bytes m[NNS][NK][NU];
	int ln[NNS][NK];
	struct bytes l[NNS][NK][NL];
};

/* Views handed out since the last quiescent point, and what they showed. */
struct held {
	const void *data;
	uint32_t len;
	struct bytes want;
};

struct run {
	struct fx f;
	struct model m;
	uint32_t sv, sadd, smax, smin, smap, slist;
	struct held held[HELD_MAX];
	int nheld, op;
	uint64_t rnd;
	char keys[NK][16];
};

static int bytes_eq(const struct bytes *b, const void *p, uint32_t len)
{
	return b->len == len && (len == 0 || memcmp(b->b, p, len) == 0);
}

static void rand_bytes(struct run *r, struct bytes *b)
{
	b->len = (uint32_t)(th_rand(&r->rnd) % VMAX);
	for (uint32_t i = 0; i < b->len; i++)
		b->b[i] = (unsigned char)th_rand(&r->rnd);
}

static void hold(struct run *r, const void *data, uint32_t len, const struct bytes *want)
{
	if (r->nheld == HELD_MAX)
		return;
	r->held[r->nheld].data = data;
	r->held[r->nheld].len = len;
	r->held[r->nheld].want = *want;
	r->nheld++;
}

/* Every view handed out since the last quiescent point still shows what it
 * showed; then they are released. */
static void release_views(struct run *r)
{
	for (int i = 0; i < r->nheld; i++)
		cr_assert(bytes_eq(&r->held[i].want, r->held[i].data, r->held[i].len),
			  "op %d: view %d changed before the quiescent point", r->op, i);
	r->nheld = 0;
}

static void check_value(struct run *r, int ns, int k)
{
	struct sfs_view v;
	int rc = r->f.ops->value_get(r->f.b, r->sv, model_ns[ns], S(r->keys[k]), &v);

	cr_assert_eq(rc, r->m.vp[ns][k], "op %d: get %s ns %d: %d (%s)", r->op, r->keys[k], ns, rc,
		     rt_last_error());
	if (rc == 1) {
		cr_assert_not_null(v.data);
		cr_assert(bytes_eq(&r->m.v[ns][k], v.data, v.len), "op %d: get %s ns %d", r->op,
			  r->keys[k], ns);
		hold(r, v.data, v.len, &r->m.v[ns][k]);
	} else {
		cr_assert_null(v.data);
	}
}

static void check_counters(struct run *r, int ns, int k)
{
	const struct model *m = &r->m;
	uint32_t st[3] = { r->sadd, r->smax, r->smin };
	int64_t want[3] = { m->cadd[ns][k], m->cmax[ns][k], m->cmin[ns][k] };

	for (int i = 0; i < 3; i++) {
		int64_t x = -1;
		int rc = r->f.ops->counter_get(r->f.b, st[i], model_ns[ns], S(r->keys[k]), &x);

		cr_assert_eq(rc, m->cp[ns][k], "op %d: counter %d of %s ns %d: %d (%s)", r->op, i,
			     r->keys[k], ns, rc, rt_last_error());
		cr_assert_eq(x, m->cp[ns][k] ? want[i] : 0, "op %d: counter %d of %s: %lld != %lld",
			     r->op, i, r->keys[k], (long long)x, (long long)want[i]);
	}
}

static void check_map_get(struct run *r, int ns, int k, int u)
{
	struct sfs_view v;
	int rc = r->f.ops->map_get(r->f.b, r->smap, model_ns[ns], S(r->keys[k]), ukeys[u].b,
				   ukeys[u].len, &v);

	cr_assert_eq(rc, r->m.mp[ns][k][u], "op %d: map get %s/%d ns %d: %d (%s)", r->op,
		     r->keys[k], u, ns, rc, rt_last_error());
	if (rc == 1) {
		cr_assert(bytes_eq(&r->m.m[ns][k][u], v.data, v.len), "op %d: map get %s/%d", r->op,
			  r->keys[k], u);
		hold(r, v.data, v.len, &r->m.m[ns][k][u]);
	}
}

struct walk {
	struct run *r;
	int ns, k, n;
	int seen[NU];
	unsigned char last[8];
};

static int map_entry(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct walk *w = arg;
	struct run *r = w->r;
	int u;

	for (u = 0; u < NU && !bytes_eq(&ukeys[u], ukey, ulen); u++)
		;
	cr_assert_lt(u, NU, "op %d: map %s: a user key of %u bytes no write made", r->op,
		     r->keys[w->k], ulen);
	cr_assert(!w->seen[u], "op %d: map %s: user key %d twice", r->op, r->keys[w->k], u);
	cr_assert(r->m.mp[w->ns][w->k][u], "op %d: map %s ns %d: user key %d is not live", r->op,
		  r->keys[w->k], w->ns, u);
	cr_assert(bytes_eq(&r->m.m[w->ns][w->k][u], val, vlen), "op %d: map %s/%d value", r->op,
		  r->keys[w->k], u);
	hold(r, val, vlen, &r->m.m[w->ns][w->k][u]);
	hold(r, ukey, ulen, &ukeys[u]);
	w->seen[u] = 1;
	w->n++;
	return 0;
}

static void check_map_iter(struct run *r, int ns, int k)
{
	struct walk w = { .r = r, .ns = ns, .k = k };
	int live = 0;

	cr_assert_eq(r->f.ops->map_iter(r->f.b, r->smap, model_ns[ns], S(r->keys[k]), map_entry,
					&w),
		     0, "op %d: %s", r->op, rt_last_error());
	for (int u = 0; u < NU; u++)
		live += r->m.mp[ns][k][u];
	cr_assert_eq(w.n, live, "op %d: map %s ns %d: %d entries, %d live", r->op, r->keys[k], ns,
		     w.n, live);
}

static int list_entry(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct walk *w = arg;
	struct run *r = w->r;

	cr_assert_eq(ulen, 8, "op %d: list position of %u bytes", r->op, ulen);
	cr_assert(w->n == 0 || memcmp(w->last, ukey, 8) < 0,
		  "op %d: list %s: positions not increasing", r->op, r->keys[w->k]);
	memcpy(w->last, ukey, 8);
	cr_assert_lt(w->n, r->m.ln[w->ns][w->k], "op %d: list %s ns %d: more than %d elements",
		     r->op, r->keys[w->k], w->ns, r->m.ln[w->ns][w->k]);
	cr_assert(bytes_eq(&r->m.l[w->ns][w->k][w->n], val, vlen), "op %d: list %s element %d",
		  r->op, r->keys[w->k], w->n);
	hold(r, val, vlen, &r->m.l[w->ns][w->k][w->n]);
	w->n++;
	return 0;
}

static void check_list(struct run *r, int ns, int k)
{
	struct walk w = { .r = r, .ns = ns, .k = k };

	cr_assert_eq(r->f.ops->list_get(r->f.b, r->slist, model_ns[ns], S(r->keys[k]), list_entry,
					&w),
		     0, "op %d: %s", r->op, rt_last_error());
	cr_assert_eq(w.n, r->m.ln[ns][k], "op %d: list %s ns %d: %d elements, want %d", r->op,
		     r->keys[k], ns, w.n, r->m.ln[ns][k]);
}

static void check_multiget(struct run *r)
{
	struct sfs_key ks[16];
	struct sfs_view vs[16];
	int rs[16], kk[16], nn[16];
	unsigned n = 1 + (unsigned)(th_rand(&r->rnd) % 16);

	for (unsigned i = 0; i < n; i++) {
		kk[i] = (int)(th_rand(&r->rnd) % NK);
		nn[i] = (int)(th_rand(&r->rnd) % NNS);
		ks[i] = (struct sfs_key){ .ns = model_ns[nn[i]], .key = r->keys[kk[i]],
					  .klen = (uint32_t)strlen(r->keys[kk[i]]) };
	}
	cr_assert_eq(r->f.ops->multiget(r->f.b, r->sv, ks, n, vs, rs), 0, "op %d: %s", r->op,
		     rt_last_error());
	for (unsigned i = 0; i < n; i++) {
		const struct bytes *want = &r->m.v[nn[i]][kk[i]];

		cr_assert_eq(rs[i], r->m.vp[nn[i]][kk[i]], "op %d: multiget %s", r->op,
			     r->keys[kk[i]]);
		if (rs[i] == 1) {
			cr_assert(bytes_eq(want, vs[i].data, vs[i].len), "op %d: multiget %s", r->op,
				  r->keys[kk[i]]);
			hold(r, vs[i].data, vs[i].len, want);
		}
	}
}

static void check_all(struct run *r)
{
	for (int ns = 0; ns < NNS; ns++)
		for (int k = 0; k < NK; k++) {
			check_value(r, ns, k);
			check_counters(r, ns, k);
			check_map_iter(r, ns, k);
			for (int u = 0; u < NU; u++)
				check_map_get(r, ns, k, u);
			check_list(r, ns, k);
			if (r->nheld > HELD_MAX - 64) {
				release_views(r);
				r->f.ops->quiescent(r->f.b);
			}
		}
}

#define OK(expr) cr_assert_eq((expr), 0, "op %d: %s", r->op, rt_last_error())

static void model_step(struct run *r)
{
	struct model *m = &r->m;
	int k = (int)(th_rand(&r->rnd) % NK), ns = (int)(th_rand(&r->rnd) % NNS);
	int u = (int)(th_rand(&r->rnd) % NU), op = (int)(th_rand(&r->rnd) % 100);
	const struct rt_backend_ops *o = r->f.ops;
	struct rt_backend *b = r->f.b;
	uint64_t nsv;
	const char *key = r->keys[k];

	nsv = model_ns[ns];
	if (op < 10) {
		rand_bytes(r, &m->v[ns][k]);
		m->vp[ns][k] = 1;
		OK(o->value_put(b, r->sv, nsv, S(key), m->v[ns][k].b, m->v[ns][k].len));
	} else if (op < 14) {
		m->vp[ns][k] = 0;
		OK(o->value_delete(b, r->sv, nsv, S(key)));
	} else if (op < 24) {
		check_value(r, ns, k);
	} else if (op < 28) {
		check_multiget(r);
	} else if (op < 38) {
		int64_t d = (int64_t)(th_rand(&r->rnd) % 2001) - 1000;

		m->cmax[ns][k] = m->cp[ns][k] && m->cmax[ns][k] > d ? m->cmax[ns][k] : d;
		m->cmin[ns][k] = m->cp[ns][k] && m->cmin[ns][k] < d ? m->cmin[ns][k] : d;
		m->cadd[ns][k] = m->cp[ns][k] ? m->cadd[ns][k] + d : d;
		m->cp[ns][k] = 1;
		OK(o->counter_add(b, r->sadd, nsv, S(key), d));
		OK(o->counter_add(b, r->smax, nsv, S(key), d));
		OK(o->counter_add(b, r->smin, nsv, S(key), d));
	} else if (op < 45) {
		check_counters(r, ns, k);
	} else if (op < 55) {
		rand_bytes(r, &m->m[ns][k][u]);
		m->mp[ns][k][u] = 1;
		OK(o->map_put(b, r->smap, nsv, S(key), ukeys[u].b, ukeys[u].len, m->m[ns][k][u].b,
			      m->m[ns][k][u].len));
	} else if (op < 59) {
		m->mp[ns][k][u] = 0;
		OK(o->map_remove(b, r->smap, nsv, S(key), ukeys[u].b, ukeys[u].len));
	} else if (op < 66) {
		check_map_get(r, ns, k, u);
	} else if (op < 72) {
		check_map_iter(r, ns, k);
	} else if (op < 74) {
		memset(m->mp[ns][k], 0, sizeof(m->mp[ns][k]));
		OK(o->map_clear(b, r->smap, nsv, S(key)));
	} else if (op < 83) {
		if (m->ln[ns][k] == NL) {
			m->ln[ns][k] = 0;
			OK(o->list_clear(b, r->slist, nsv, S(key)));
		}
		rand_bytes(r, &m->l[ns][k][m->ln[ns][k]]);
		OK(o->list_append(b, r->slist, nsv, S(key), m->l[ns][k][m->ln[ns][k]].b,
				  m->l[ns][k][m->ln[ns][k]].len));
		m->ln[ns][k]++;
	} else if (op < 89) {
		check_list(r, ns, k);
	} else if (op < 91) {
		m->ln[ns][k] = 0;
		OK(o->list_clear(b, r->slist, nsv, S(key)));
	} else if (op < 98) {
		/* Between input batches; the memory backend's compactor moves on
		 * by a random amount (a grace period may now pass). */
		release_views(r);
		if (th_rand(&r->rnd) % 4 == 0) {
			o->idle(b, 1);	/* an idle sleep releases views too */
			o->idle(b, 0);
		} else {
			o->quiescent(b);
		}
		if (r->f.mem)
			for (int s = (int)(th_rand(&r->rnd) % 3); s >= 0; s--) {
				int pending;

				cr_assert_geq(sfs_flusher_step(&r->f.p.f,
							       1 + (unsigned)(th_rand(&r->rnd) % 300),
							       &pending),
					      0, "%s", rt_last_error());
			}
	} else {
		/* A barrier is a quiescent point too (sfs.h). */
		release_views(r);
		fx_barrier(&r->f);
	}
	if (r->nheld > HELD_MAX - 64) {
		release_views(r);
		o->quiescent(b);
	}
}

static void model_run(const char *name, int ops)
{
	static struct run r;
	const char *env = getenv("SFS_TEST_SEED");	/* to replay a failure */
	uint64_t pid = (uint64_t)getpid() << 20 ^ (uint64_t)sfs_now_ns();
	/* Hashed: splitmix's state advances by a constant, so seeds spaced
	 * by that constant would replay one sequence shifted. */
	uint64_t seed = env && *env ? strtoull(env, NULL, 0) : th_rand(&pid);

	memset(&r, 0, sizeof(r));
	r.rnd = seed;
	for (int k = 0; k < NK; k++)
		snprintf(r.keys[k], sizeof(r.keys[k]), "k%d", k);
	cr_log_info("%s: SFS_TEST_SEED=%llu", name, (unsigned long long)seed);
	fx_open(&r.f, name);
	r.sv = fx_reg(&r.f, "v", SFS_STATE_VALUE, 0);
	r.sadd = fx_reg(&r.f, "cadd", SFS_STATE_COUNTER, SFS_MERGE_ADD);
	r.smax = fx_reg(&r.f, "cmax", SFS_STATE_COUNTER, SFS_MERGE_MAX);
	r.smin = fx_reg(&r.f, "cmin", SFS_STATE_COUNTER, SFS_MERGE_MIN);
	r.smap = fx_reg(&r.f, "m", SFS_STATE_MAP, 0);
	r.slist = fx_reg(&r.f, "l", SFS_STATE_LIST, 0);
	for (r.op = 0; r.op < ops; r.op++)
		model_step(&r);
	check_all(&r);
	/* Memory: everything into the flushed store, then read it there. */
	release_views(&r);
	fx_barrier(&r.f);
	fx_drain(&r.f);
	check_all(&r);
	release_views(&r);
	cr_assert_eq(r.f.ops->stall_ns(r.f.b) == 0 || r.f.mem, 1);
	fx_close(&r.f);
}

static void randomized_against_a_reference(const char *name)
{
	model_run(name, MODEL_OPS);
}
BOTH(randomized_against_a_reference)

static int count_files(const char *path, const char *suffix, const char *needle)
{
	char cmd[PATH_MAX + 256], line[256];
	int n = 0;
	FILE *p;

	/* Files named *@suffix under @path (holding @needle, if given). */
	snprintf(cmd, sizeof(cmd), needle ? "grep -l '%3$s' %1$s/*%2$s 2>/dev/null"
					  : "ls %1$s/*%2$s 2>/dev/null",
		 path, suffix, needle ? needle : "");
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		n++;
	pclose(p);
	return n;
}

/* The same with a 64 KiB memtable: state moves to SST files while the test
 * runs, so reads fold memtable merge operands over SST bases, compactions
 * run the merge operators, and blocks are Snappy-compressed. */
Test(backend, randomized_against_a_reference_rocksdb_on_disk)
{
	char path[PATH_MAX + 32];

	setenv("SFS_ROCKSDB_WRITE_BUFFER_KB", "64", 1);
	model_run("rocksdb-direct", 4 * MODEL_OPS);	/* enough for L0 compactions */
	snprintf(path, sizeof(path), "%s/rocksdb-direct/w0", dir);
	cr_assert_gt(count_files(path, ".sst", NULL), 0, "no SST file under %s", path);
	cr_assert_gt(count_files(path, "", "compression=kSnappyCompression"), 0,
		     "Snappy in %s/OPTIONS-*", path);
}

/* ---- registration, kinds and limits ------------------------------------------------ */

static void bad_input_is_an_error(const char *name)
{
	static char big[SFS_KEY_MAX + 1];
	struct fx f;
	struct sfs_view v;
	uint32_t sv, sc, x;
	int64_t n;
	char *bigval = calloc(1, SFS_VALUE_MAX + 1);

	cr_assert_not_null(bigval);
	fx_open(&f, name);
	sv = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	sc = fx_reg(&f, "c", SFS_STATE_COUNTER, SFS_MERGE_MAX);
	uint32_t sm = fx_reg(&f, "m", SFS_STATE_MAP, 0), sl = fx_reg(&f, "l", SFS_STATE_LIST, 0);

	/* Registration: the same name finds the same state; another kind or
	 * operator is refused. */
	cr_assert_eq(fx_reg(&f, "v", SFS_STATE_VALUE, 0), sv);
	cr_assert_eq(fx_reg(&f, "c", SFS_STATE_COUNTER, SFS_MERGE_MAX), sc);
	cr_assert_eq(f.ops->reg(f.b, "v", SFS_STATE_COUNTER, 0, &x), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "registered as kind"), "%s", rt_last_error());
	cr_assert_eq(f.ops->reg(f.b, "v", SFS_STATE_MAP, 0, &x), SFS_EUSAGE);
	cr_assert_eq(f.ops->reg(f.b, "c", SFS_STATE_COUNTER, SFS_MERGE_MIN, &x), SFS_EUSAGE);
	cr_assert_eq(f.ops->reg(f.b, "z", SFS_STATE_COUNTER, 9, &x), SFS_EUSAGE);
	cr_assert_eq(f.ops->reg(f.b, "", SFS_STATE_VALUE, 0, &x), SFS_EUSAGE);
	cr_assert_eq(f.ops->reg(f.b, "k", 9, 0, &x), SFS_EUSAGE);
	/* "default" is an ordinary state name (RocksDB's default CF is not it). */
	x = fx_reg(&f, "default", SFS_STATE_VALUE, 0);
	cr_assert_eq(f.ops->value_put(f.b, x, 0, S("a"), S("d")), 0, "%s", rt_last_error());

	/* Kinds are enforced per call. */
	cr_assert_eq(f.ops->counter_add(f.b, sv, 0, S("a"), 1), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "of another kind"), "%s", rt_last_error());
	cr_assert_eq(f.ops->counter_get(f.b, sv, 0, S("a"), &n), SFS_EUSAGE);
	cr_assert_eq(f.ops->value_put(f.b, sc, 0, S("a"), S("x")), SFS_EUSAGE);
	cr_assert_eq(f.ops->value_get(f.b, sm, 0, S("a"), &v), SFS_EUSAGE);
	cr_assert_eq(f.ops->map_put(f.b, sv, 0, S("a"), S("u"), S("x")), SFS_EUSAGE);
	cr_assert_eq(f.ops->map_put(f.b, sl, 0, S("a"), S("u"), S("x")), SFS_EUSAGE);
	cr_assert_eq(f.ops->list_append(f.b, sm, 0, S("a"), S("x")), SFS_EUSAGE);
	cr_assert_eq(f.ops->value_get(f.b, 200, 0, S("a"), &v), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "not registered"), "%s", rt_last_error());

	/* Keys: SFS_KEY_MAX bytes fit, one more is refused, never truncated. */
	memset(big, 'k', sizeof(big));
	cr_assert_eq(f.ops->value_put(f.b, sv, 0, big, sizeof(big), S("x")), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "key of"), "%s", rt_last_error());
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, big, sizeof(big), &v), SFS_EUSAGE);
	cr_assert_eq(f.ops->counter_add(f.b, sc, 0, big, sizeof(big), 1), SFS_EUSAGE);
	cr_assert_eq(f.ops->value_put(f.b, sv, 0, big, SFS_KEY_MAX, S("max")), 0, "%s",
		     rt_last_error());
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, big, SFS_KEY_MAX - 1, &v), 0, "no truncation");
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, big, SFS_KEY_MAX, &v), 1);
	cr_assert(v.len == 3 && memcmp(v.data, "max", 3) == 0);
	/* A map's user key counts with its key (and 2 bytes of length). */
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, big, SFS_KEY_MAX - 10, big, 8, S("x")), 0, "%s",
		     rt_last_error());
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, big, SFS_KEY_MAX - 10, big, 9, S("x")), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "key of"), "%s", rt_last_error());
	cr_assert_eq(f.ops->map_get(f.b, sm, 0, big, SFS_KEY_MAX - 10, big, 9, &v), SFS_EUSAGE);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, big, SFS_KEY_MAX, S("x")), SFS_EUSAGE);

	/* Values: SFS_VALUE_MAX + 1 bytes are refused. */
	cr_assert_eq(f.ops->value_put(f.b, sv, 0, S("a"), bigval, SFS_VALUE_MAX + 1), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "value of"), "%s", rt_last_error());
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("a"), S("u"), bigval, SFS_VALUE_MAX + 1),
		     SFS_EUSAGE);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("a"), bigval, SFS_VALUE_MAX + 1), SFS_EUSAGE);
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, S("a"), &v), 0, "nothing was written");
	expect_map(&f, sm, 0, S("a"), "");
	expect_list(&f, sl, 0, "a", "");

	/* Barrier ids increase. */
	fx_barrier(&f);
	cr_assert_eq(f.ops->barrier(f.b, f.barrier), SFS_EUSAGE);
	fx_close(&f);
	free(bigval);
}
BOTH(bad_input_is_an_error)

/* ---- isolation ------------------------------------------------------------------- */

/* Key "p" in namespace 'b'<<56 and key "pb" in namespace 0 are the same
 * bytes in a layout key | ns with no length: "p" 62 00.. vs "p" "b" 00..
 * Find such a pair in one key group, where it would collide. */
static void same_group_pair(char p[16], char pb[16])
{
	for (int i = 0;; i++) {
		snprintf(p, 16, "p%d", i);
		snprintf(pb, 16, "p%db", i);
		if (sfs_key_group(p, strlen(p), SFS_MAX_PARALLELISM_DEFAULT) ==
		    sfs_key_group(pb, strlen(pb), SFS_MAX_PARALLELISM_DEFAULT))
			return;
	}
}

static void map_and_list_keys_are_isolated(const char *name)
{
	const uint64_t nsb = (uint64_t)'b' << 56;
	struct fx f;
	struct sfs_view v;
	uint32_t sm, sl;
	char p[16], pb[16];

	fx_open(&f, name);
	sm = fx_reg(&f, "m", SFS_STATE_MAP, 0);
	sl = fx_reg(&f, "l", SFS_STATE_LIST, 0);

	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("a"), S("b"), S("1")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("ab"), S("c"), S("2")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("ab"), S("d"), S("e")), 0);
	expect_map(&f, sm, 0, S("a"), "b=1;");
	expect_map(&f, sm, 0, S("ab"), "c=2;d=e;");
	expect_map(&f, sm, 1, S("a"), "");
	expect_map(&f, sm, 0, S(""), "");
	cr_assert_eq(f.ops->map_get(f.b, sm, 0, S("a"), S("bc"), &v), 0);
	cr_assert_eq(f.ops->map_get(f.b, sm, 0, S("ab"), S("d"), &v), 1);
	cr_assert(v.len == 1 && memcmp(v.data, "e", 1) == 0);

	same_group_pair(p, pb);
	cr_assert_eq(f.ops->map_put(f.b, sm, nsb, S(p), S("u"), S("1")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S(pb), S("v"), S("2")), 0);
	expect_map(&f, sm, nsb, S(p), "u=1;");
	expect_map(&f, sm, 0, S(pb), "v=2;");
	cr_assert_eq(f.ops->map_clear(f.b, sm, nsb, S(p)), 0);
	expect_map(&f, sm, nsb, S(p), "");
	expect_map(&f, sm, 0, S(pb), "v=2;");
	cr_assert_eq(f.ops->map_clear(f.b, sm, 0, S("a")), 0);
	expect_map(&f, sm, 0, S("ab"), "c=2;d=e;");

	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("a"), S("1")), 0);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("ab"), S("2")), 0);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("a"), S("3")), 0);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("a"), S("")), 0);	/* empty element */
	cr_assert_eq(f.ops->list_append(f.b, sl, nsb, S(p), S("4")), 0);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S(pb), S("5")), 0);
	expect_list(&f, sl, 0, "a", "1,3,,");
	expect_list(&f, sl, 0, "ab", "2,");
	expect_list(&f, sl, nsb, p, "4,");
	expect_list(&f, sl, 0, pb, "5,");
	cr_assert_eq(f.ops->list_clear(f.b, sl, 0, S("a")), 0);
	expect_list(&f, sl, 0, "a", "");
	expect_list(&f, sl, 0, "ab", "2,");

	/* The same through the memory backend's flushed store. */
	fx_barrier(&f);
	fx_drain(&f);
	expect_map(&f, sm, 0, S("a"), "");
	expect_map(&f, sm, 0, S("ab"), "c=2;d=e;");
	expect_map(&f, sm, 0, S(pb), "v=2;");
	expect_list(&f, sl, 0, "ab", "2,");
	expect_list(&f, sl, nsb, p, "4,");
	fx_close(&f);
}
BOTH(map_and_list_keys_are_isolated)

/*
 * One key's maps in several namespaces (a flush sorts by key bytes, then
 * namespace, so the heads and entries of a parent's namespaces interleave;
 * the memory target once gave every entry to the last namespace's map), and
 * an empty user key, refused by both backends (in sfs its entry key would
 * equal the map's head).
 */
static void maps_of_one_key_in_several_namespaces(const char *name)
{
	struct fx f;
	struct sfs_view v;
	uint32_t sm, sl;

	fx_open(&f, name);
	sm = fx_reg(&f, "m", SFS_STATE_MAP, 0);
	sl = fx_reg(&f, "l", SFS_STATE_LIST, 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 1, S("k"), S("x"), S("1")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("k"), S("x"), S("0")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 2, S("k"), S("y"), S("2")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 2, S("e"), S(""), S("empty")), SFS_EUSAGE);
	cr_assert_eq(f.ops->map_get(f.b, sm, 2, S("e"), S(""), &v), SFS_EUSAGE);
	cr_assert_eq(f.ops->map_remove(f.b, sm, 2, S("e"), S("")), SFS_EUSAGE);
	cr_assert_eq(f.ops->list_append(f.b, sl, 1, S("k"), S("1")), 0);
	cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("k"), S("0")), 0);
	for (int pass = 0; pass < 2; pass++) {
		expect_map(&f, sm, 0, S("k"), "x=0;");
		expect_map(&f, sm, 1, S("k"), "x=1;");
		expect_map(&f, sm, 2, S("k"), "y=2;");
		expect_map(&f, sm, 2, S("e"), "");
		expect_list(&f, sl, 0, "k", "0,");
		expect_list(&f, sl, 1, "k", "1,");
		fx_barrier(&f);	/* then again from the memory backend's store */
		fx_drain(&f);
	}
	fx_close(&f);
}

Test(backend, maps_of_one_key_in_several_namespaces_rocksdb)
{
	maps_of_one_key_in_several_namespaces("rocksdb-direct");
}

Test(backend, maps_of_one_key_in_several_namespaces_memory)
{
	maps_of_one_key_in_several_namespaces("memory");
}

/* An entry callback that returns non-zero stops the walk; its value is
 * returned. */
static void callbacks_stop_iterations(const char *name)
{
	struct fx f;
	struct dump d = { .stop_at = 2 };
	uint32_t sm, sl;

	fx_open(&f, name);
	sm = fx_reg(&f, "m", SFS_STATE_MAP, 0);
	sl = fx_reg(&f, "l", SFS_STATE_LIST, 0);
	for (int i = 0; i < 4; i++) {
		char u[16];

		snprintf(u, sizeof(u), "u%d", i);
		cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("k"), S(u), S("x")), 0);
		cr_assert_eq(f.ops->list_append(f.b, sl, 0, S("k"), S(u)), 0);
	}
	cr_assert_eq(f.ops->map_iter(f.b, sm, 0, S("k"), add_item, &d), 7);
	cr_assert_eq(d.calls, 2);
	d = (struct dump){ .stop_at = 3 };
	cr_assert_eq(f.ops->list_get(f.b, sl, 0, S("k"), add_item, &d), 7);
	cr_assert_eq(d.calls, 3);
	cr_assert_eq(d.ulen_seen, 8, "a list element's user key is its 8-byte position");
	fx_close(&f);
}
BOTH(callbacks_stop_iterations)

/* ---- views ------------------------------------------------------------------------ */

#define VIEW_KEYS 3000	/* ~600 KB of views: several arena chunks */

static void views_stay_valid_until_quiescent(const char *name)
{
	static struct sfs_view vs[VIEW_KEYS];
	struct fx f;
	struct sfs_view first, mv, again;
	uint32_t sv, sm;
	char key[32], val[200];

	fx_open(&f, name);
	sv = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	sm = fx_reg(&f, "m", SFS_STATE_MAP, 0);
	cr_assert_eq(f.ops->value_put(f.b, sv, 0, S("k"), S("first")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("k"), S("u"), S("mapped")), 0);
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, S("k"), &first), 1);
	cr_assert_eq(f.ops->map_get(f.b, sm, 0, S("k"), S("u"), &mv), 1);
	/* Overwrite, delete and write a lot more; read a lot more. */
	cr_assert_eq(f.ops->value_put(f.b, sv, 0, S("k"), S("second")), 0);
	cr_assert_eq(f.ops->map_put(f.b, sm, 0, S("k"), S("u"), S("remapped")), 0);
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, S("k"), &again), 1);
	cr_assert(again.len == 6 && memcmp(again.data, "second", 6) == 0);
	cr_assert_eq(f.ops->value_delete(f.b, sv, 0, S("k")), 0);
	cr_assert_eq(f.ops->map_clear(f.b, sm, 0, S("k")), 0);
	for (int i = 0; i < VIEW_KEYS; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		memset(val, 'a' + i % 26, sizeof(val));
		cr_assert_eq(f.ops->value_put(f.b, sv, 0, S(key), val, sizeof(val)), 0);
		cr_assert_eq(f.ops->value_get(f.b, sv, 0, S(key), &vs[i]), 1);
	}
	cr_assert(first.len == 5 && memcmp(first.data, "first", 5) == 0, "the first view");
	cr_assert(mv.len == 6 && memcmp(mv.data, "mapped", 6) == 0, "the map view");
	cr_assert(again.len == 6 && memcmp(again.data, "second", 6) == 0);
	for (int i = 0; i < VIEW_KEYS; i++) {
		memset(val, 'a' + i % 26, sizeof(val));
		cr_assert(vs[i].len == sizeof(val) && memcmp(vs[i].data, val, sizeof(val)) == 0,
			  "view %d", i);
	}
	f.ops->quiescent(f.b);
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, S("k"), &first), 0);
	cr_assert_eq(f.ops->value_get(f.b, sv, 0, S("key-7"), &first), 1);
	cr_assert(first.len == sizeof(val) && ((const char *)first.data)[0] == 'h');
	fx_close(&f);
}
BOTH(views_stay_valid_until_quiescent)

static void multiget_refuses_one_key_not_the_batch(const char *name)
{
	static char big[SFS_KEY_MAX + 1];
	struct fx f;
	struct sfs_key ks[4] = {
		{ 0, "k1", 2 }, { 0, "absent", 6 }, { 0, big, sizeof(big) }, { 5, "k2", 2 },
	};
	struct sfs_view vs[4];
	int rs[4];
	uint32_t sv, sm;

	fx_open(&f, name);
	sv = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	sm = fx_reg(&f, "m", SFS_STATE_MAP, 0);
	cr_assert_eq(f.ops->value_put(f.b, sv, 0, S("k1"), S("one")), 0);
	cr_assert_eq(f.ops->value_put(f.b, sv, 5, S("k2"), S("two")), 0);
	cr_assert_eq(f.ops->multiget(f.b, sv, ks, 4, vs, rs), SFS_EUSAGE);
	cr_assert_eq(rs[0], 1);
	cr_assert(vs[0].len == 3 && memcmp(vs[0].data, "one", 3) == 0);
	cr_assert_eq(rs[1], 0);
	cr_assert_null(vs[1].data);
	cr_assert_eq(rs[2], SFS_EUSAGE);
	cr_assert_eq(rs[3], 1);
	cr_assert(vs[3].len == 3 && memcmp(vs[3].data, "two", 3) == 0);
	cr_assert_eq(f.ops->multiget(f.b, sm, ks, 2, vs, rs), SFS_EUSAGE, "a map state");
	cr_assert_eq(f.ops->multiget(f.b, sv, ks, 0, vs, rs), 0, "an empty batch");
	fx_close(&f);
}
BOTH(multiget_refuses_one_key_not_the_batch)

/* A worker that sleeps (idle) holds no view: the compactor's grace period
 * passes without it, so the buffers it sealed are freed while it sleeps
 * (another worker's barrier would otherwise wait for the sleeper). */
Test(backend, memory_idle_lets_the_compactor_free_buffers)
{
	struct fx f;
	uint32_t st;
	int pending = 1;

	fx_open(&f, "memory");
	st = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	cr_assert_not_null(f.ops->idle);
	cr_assert_eq(f.ops->value_put(f.b, st, 0, S("a"), S("1")), 0);
	cr_assert_eq(f.ops->barrier(f.b, 1), 0);
	/* Online and never quiescent again: the sealed buffer is flushed
	 * but its grace period cannot pass. */
	for (int i = 0; i < 200; i++)
		cr_assert_geq(sfs_flusher_step(&f.p.f, 1000, &pending), 0);
	cr_assert(pending, "a grace period passed without the worker");
	f.ops->idle(f.b, 1);
	for (int i = 0; i < 20000 && pending; i++) {
		cr_assert_geq(sfs_flusher_step(&f.p.f, 1000, &pending), 0);
		if (pending)
			usleep(100);
	}
	cr_assert(!pending, "the grace period waited for a sleeping worker");
	f.ops->idle(f.b, 0);
	struct sfs_view v;
	cr_assert_eq(f.ops->value_get(f.b, st, 0, S("a"), &v), 1, "from the store");
	cr_assert(v.len == 1 && memcmp(v.data, "1", 1) == 0);
	fx_close(&f);
}

/* ---- the table, and what only rocksdb-direct has ----------------------------------- */

Test(backend, find_by_name)
{
	cr_assert_eq(rt_backend_find("memory"), &rt_backend_memory);
	/* sfs over the rocksdb flush target: the sfs adapter (issue 5) */
	cr_assert_eq(rt_backend_find("rocksdb"), &rt_backend_memory);
	cr_assert_null(rt_backend_find("nosuch"));
	cr_assert_null(rt_backend_find(NULL));
	/* the baseline is not the runtime's: known once a binary registers it */
	cr_assert_null(rt_backend_find("rocksdb-direct"));
	cr_assert_eq(rt_backend_register(&rt_backend_rocksdb_direct), 0);
	cr_assert_eq(rt_backend_find("rocksdb-direct"), &rt_backend_rocksdb_direct);
}

Test(backend, register_refuses_a_taken_name)
{
	struct rt_backend_ops other = rt_backend_rocksdb_direct, noname = { .name = "" };

	cr_assert_eq(rt_backend_register(&rt_backend_rocksdb_direct), 0);
	cr_assert_eq(rt_backend_register(&rt_backend_rocksdb_direct), 0, "the same ops again");
	cr_assert_eq(rt_backend_register(&other), SFS_EUSAGE);
	cr_assert(strstr(rt_last_error(), "'rocksdb-direct' is registered already"), "%s",
		  rt_last_error());
	other.name = "memory";
	cr_assert_eq(rt_backend_register(&other), SFS_EUSAGE, "a built-in's name");
	cr_assert_eq(rt_backend_register(&noname), SFS_EUSAGE);
	cr_assert_eq(rt_backend_register(NULL), SFS_EUSAGE);
	cr_assert_eq(rt_backend_find("rocksdb-direct"), &rt_backend_rocksdb_direct);
}

Test(backend, rocksdb_directory_is_fresh_at_open_and_owned_while_open)
{
	struct fx f, g;
	struct sfs_view v;
	struct stat sb;
	char path[PATH_MAX + 64];
	uint32_t st;

	cr_assert_eq(fx_open_worker(&f, "rocksdb-direct", 0, 1), 0, "%s", rt_last_error());
	snprintf(path, sizeof(path), "%s/rocksdb-direct/w0/CURRENT", dir);
	cr_assert_eq(stat(path, &sb), 0, "%s", path);
	st = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	cr_assert_eq(f.ops->value_put(f.b, st, 0, S("a"), S("1")), 0);

	/* A second instance of worker 0 must not destroy a live one. */
	cr_assert_eq(fx_open_worker(&g, "rocksdb-direct", 0, 1), SFS_ERUNNING);
	cr_assert(strstr(rt_last_error(), "rocksdb-direct/w0"), "%s", rt_last_error());
	cr_assert_eq(f.ops->value_get(f.b, st, 0, S("a"), &v), 1, "the live one is intact");
	f.ops->close(f.b);

	/* A fresh run: nothing of the previous one. */
	cr_assert_eq(fx_open_worker(&f, "rocksdb-direct", 0, 1), 0, "%s", rt_last_error());
	st = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	cr_assert_eq(f.ops->value_get(f.b, st, 0, S("a"), &v), 0);
	f.ops->close(f.b);

	/* Worker 1 of 2: its own directory, its own key groups (64..127). */
	cr_assert_eq(fx_open_worker(&f, "rocksdb-direct", 1, 2), 0, "%s", rt_last_error());
	snprintf(path, sizeof(path), "%s/rocksdb-direct/w1/CURRENT", dir);
	cr_assert_eq(stat(path, &sb), 0, "%s", path);
	st = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	for (int i = 0, mine = 0, other = 0; !mine || !other; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		if (sfs_key_group(k, strlen(k), SFS_MAX_PARALLELISM_DEFAULT) >= 64) {
			cr_assert_eq(f.ops->value_put(f.b, st, 0, S(k), S("x")), 0);
			mine = 1;
		} else {
			cr_assert_eq(f.ops->value_put(f.b, st, 0, S(k), S("x")), SFS_EUSAGE);
			cr_assert(strstr(rt_last_error(), "not worker 1's"), "%s",
				  rt_last_error());
			other = 1;
		}
	}
	f.ops->close(f.b);

	cr_assert_eq(fx_open_worker(&f, "rocksdb-direct", 2, 2), SFS_EUSAGE);
	struct rt_backend_cfg cfg = { .job = job, .worker = 0, .workers = 1 };
	cr_assert_eq(rt_backend_rocksdb_direct.open(&cfg, &f.b), SFS_EUSAGE, "no data_dir");
}

/* Operator code may call the backend from inside an iteration callback. */
struct nested {
	struct fx *f;
	uint32_t sv, sm;
	int n;
};

static int nested_entry(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct nested *x = arg;
	struct sfs_view v;
	struct dump d = { .n = 0 };

	/* A point read, a write, and a scan of another map, mid-scan. */
	cr_assert_eq(x->f->ops->value_get(x->f->b, x->sv, 0, ukey, ulen, &v), 1);
	cr_assert(v.len == vlen && memcmp(v.data, val, vlen) == 0);
	cr_assert_eq(x->f->ops->value_put(x->f->b, x->sv, 0, S("zz-written"), S("w")), 0);
	cr_assert_eq(x->f->ops->map_iter(x->f->b, x->sm, 0, S("other"), add_item, &d), 0);
	cr_assert(d.n == 1 && strcmp(d.items[0], "x=o") == 0);
	x->n++;
	return 0;
}

Test(backend, rocksdb_callbacks_may_call_the_backend)
{
	struct fx f;
	struct nested x = { .f = &f };

	fx_open(&f, "rocksdb-direct");
	x.sv = fx_reg(&f, "v", SFS_STATE_VALUE, 0);
	x.sm = fx_reg(&f, "m", SFS_STATE_MAP, 0);
	for (int i = 0; i < 50; i++) {
		char u[16];

		snprintf(u, sizeof(u), "u%02d", i);
		cr_assert_eq(f.ops->map_put(f.b, x.sm, 0, S("k"), S(u), S(u)), 0);
		cr_assert_eq(f.ops->value_put(f.b, x.sv, 0, S(u), S(u)), 0);
	}
	cr_assert_eq(f.ops->map_put(f.b, x.sm, 0, S("other"), S("x"), S("o")), 0);
	cr_assert_eq(f.ops->map_iter(f.b, x.sm, 0, S("k"), nested_entry, &x), 0, "%s",
		     rt_last_error());
	cr_assert_eq(x.n, 50);
	fx_close(&f);
}
