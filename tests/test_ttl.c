/*
 * test_ttl.c — state TTL (common/ttl.h, include/sfs.h) against a model
 * with a fake clock.  One worker writes value, counter, map and list state
 * with a TTL on the event clock (sfs_ctx_set_time: the test's clock, moved
 * on by a few ms per operation, so entries expire all the time), plus a
 * value state refreshed on read and a state without a TTL; every read is
 * checked against a model that knows each entry's expiry: an expired
 * entry is never returned, a live one never lost.  Across barriers,
 * flushes (which drop what has expired by the seal's clock), the target's
 * own merges, and a restore: the target's staged checkpoint is restored
 * into a new segment through the contract (restore), the registry through
 * the checkpoint's states= record, and the model goes on.  On each target:
 * memory, table, rocksdb.  Finally the drops are counted: maintenance did
 * drop expired entries (wc_ttl_dropped), or the test proves nothing.  The
 * table runs again at merge budgets 0 and 100000 (SFS_TABLE_MERGE_BUDGET),
 * checked every ~8 operations, and must have dropped files whole.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpointer/coord.h"
#include "common/err.h"
#include "common/fs.h"
#include "sfs.h"
#include "shm/segment.h"
#include "store/table/table.h"
#include "store/target.h"
#include "tests/helpers.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "tests/state_helpers.h"
#pragma GCC diagnostic pop

#define SEG_MB 96
#define NK 48          /* keys */
#define NU 4           /* map user keys */
#define NL 24          /* list elements per key, at most */
#define TTL 40         /* ms of the fake clock */
#define OPS (6000 * th_soak())

static struct sfs_seg seg;
static char dir[128];

static void teardown(void)
{
	if (!dir[0])
		return;
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	sfs_rmtree(dir);
	dir[0] = '\0';
}

TestSuite(ttl, .fini = teardown, .timeout = 240);

static uint64_t rnd_state;

static uint32_t rnd(uint32_t n)
{
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rnd_state >> 33) % n;
}

/* The model: each entry with its expiry (0: absent). */
struct ent {
	char val[16];
	uint64_t exp;
};

static struct model {
	struct ent v[NK], vr[NK], plain[NK];
	int64_t c[NK];
	uint64_t c_exp[NK];
	struct ent m[NK][NU];
	struct ent l[NK][NL];
	unsigned nl[NK];
} md;

static uint64_t now;
static struct inproc *flusher;   /* the test's compactor, for back-pressure */

/* A write that met back-pressure (the worker's stall timeout: the test
 * steps the compactor itself) did not happen: drain, then redo it. */
/* A barrier seals even then (sfs.h): it is not redone. */
#define B(c, id)                                                                    \
	do {                                                                        \
		int _rc = sfs_barrier((c), (id));                                   \
		if (_rc == SFS_ETIMEDOUT)                                           \
			inproc_drain(flusher, (c));                                 \
		else                                                                \
			cr_assert_eq(_rc, 0, "%s", sfs_last_error());               \
	} while (0)
#define W(c, expr)                                                                  \
	do {                                                                        \
		int _rc = (expr);                                                   \
		if (_rc == SFS_ETIMEDOUT) {                                         \
			inproc_drain(flusher, (c));                                 \
			_rc = (expr);                                               \
		}                                                                   \
		cr_assert_eq(_rc, 0, "%s", sfs_last_error());                       \
	} while (0)
static uint32_t s_v, s_vr, s_c, s_m, s_l, s_plain;

static int live(uint64_t exp)
{
	return exp > now;
}

static void reg(sfs_ctx_t *c)
{
	struct sfs_ttl t = { .ttl_ms = TTL, .flags = SFS_TTL_EVENT_TIME };
	struct sfs_ttl tr = { .ttl_ms = TTL, .flags = SFS_TTL_EVENT_TIME | SFS_TTL_REFRESH_ON_READ };
	struct sfs_ttl proc = { .ttl_ms = TTL };
	uint32_t x;

	cr_assert_eq(sfs_state_register_ttl(c, "v", SFS_STATE_VALUE, &t, &s_v), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "vr", SFS_STATE_VALUE, &tr, &s_vr), 0);
	cr_assert_eq(sfs_state_register_ttl(c, "c", SFS_STATE_COUNTER, &t, &s_c), 0);
	cr_assert_eq(sfs_state_register_ttl(c, "m", SFS_STATE_MAP, &t, &s_m), 0);
	cr_assert_eq(sfs_state_register_ttl(c, "l", SFS_STATE_LIST, &t, &s_l), 0);
	cr_assert_eq(sfs_state_register(c, "plain", SFS_STATE_VALUE, &s_plain), 0);
	/* what the format forbids: a TTL turned on or off, or its clock changed */
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &x), SFS_EUSAGE);
	cr_assert_eq(sfs_state_register_ttl(c, "plain", SFS_STATE_VALUE, &t, &x), SFS_EUSAGE);
	cr_assert_eq(sfs_state_register_ttl(c, "v", SFS_STATE_VALUE, &proc, &x), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "event"), "%s", sfs_last_error());
}

/* Buffers absorbed as images (SFS_TABLE_L0_IMAGE=1): reads meet them
 * mapped, below the worker's buffers, until their conversion. */
static int images;

static void check_value(sfs_ctx_t *c, uint32_t st, struct ent *e, const char *key, int op,
			int refresh)
{
	struct sfs_view v;
	int rc;

	rc = sfs_value_get(c, st, 0, key, strlen(key), &v);

	cr_assert_eq(rc, live(e->exp), "op %d state %u key %s: got %d, expiry %llu, now %llu", op,
		     st, key, rc, (unsigned long long)e->exp, (unsigned long long)now);
	if (rc == 1) {
		cr_assert(v.len == strlen(e->val) && !memcmp(v.data, e->val, v.len),
			  "op %d key %s: '%.*s' != '%s'", op, key, (int)v.len, (const char *)v.data,
			  e->val);
		if (refresh)
			e->exp = now + TTL;
	}
}

struct seen {
	int n;
	char got[NL][16];
};

static int map_entry(void *arg, const void *uk, uint32_t ul, const void *val, uint32_t vl)
{
	struct seen *s = arg;
	int u = ((const char *)uk)[1] - '0';

	cr_assert(ul == 2 && u >= 0 && u < NU);
	snprintf(s->got[u], sizeof(s->got[u]), "%.*s", (int)vl, (const char *)val);
	s->n++;
	return 0;
}

static int list_el(void *arg, const void *uk, uint32_t ul, const void *val, uint32_t vl)
{
	struct seen *s = arg;

	cr_assert(s->n < NL);
	snprintf(s->got[s->n++], sizeof(s->got[0]), "%.*s", (int)vl, (const char *)val);
	return 0;
}

/* Every key of every state against the model. */
static void check_all(sfs_ctx_t *c, int op)
{
	for (int k = 0; k < NK; k++) {
		char key[8];
		int64_t x;
		struct seen s = { 0 };
		int rc, want = 0, i = 0;

		snprintf(key, sizeof(key), "k%d", k);
		check_value(c, s_v, &md.v[k], key, op, 0);
		check_value(c, s_vr, &md.vr[k], key, op, 1);
		check_value(c, s_plain, &md.plain[k], key, op, 0);
		rc = sfs_counter_get(c, s_c, 0, key, strlen(key), &x);
		cr_assert_eq(rc, live(md.c_exp[k]), "op %d counter %s", op, key);
		cr_assert_eq(x, rc ? md.c[k] : 0, "op %d counter %s", op, key);
		cr_assert_eq(sfs_map_iter(c, s_m, 0, key, strlen(key), map_entry, &s), 0);
		for (int u = 0; u < NU; u++) {
			want += live(md.m[k][u].exp);
			if (live(md.m[k][u].exp))
				cr_assert_str_eq(s.got[u], md.m[k][u].val, "op %d map %s u%d", op, key,
						 u);
		}
		cr_assert_eq(s.n, want, "op %d map %s: %d entries, %d live", op, key, s.n, want);
		memset(&s, 0, sizeof(s));
		cr_assert_eq(sfs_list_get(c, s_l, 0, key, strlen(key), list_el, &s), 0);
		for (unsigned j = 0; j < md.nl[k]; j++)
			if (live(md.l[k][j].exp)) {
				cr_assert(i < s.n, "op %d list %s: element %u missing", op, key, j);
				cr_assert_str_eq(s.got[i], md.l[k][j].val, "op %d list %s", op, key);
				i++;
			}
		cr_assert_eq(s.n, i, "op %d list %s: %d elements, %d live", op, key, s.n, i);
	}
}

/* One random operation at the model's clock. */
static void step(sfs_ctx_t *c, int op)
{
	int k = (int)rnd(NK), u = (int)rnd(NU);
	char key[8], uk[8], val[16];
	struct sfs_view v;
	int rc;

	snprintf(key, sizeof(key), "k%d", k);
	snprintf(uk, sizeof(uk), "u%d", u);
	snprintf(val, sizeof(val), "x%d", op);
	switch (rnd(16)) {
	case 0:
	case 1:
		W(c, sfs_value_put(c, s_v, 0, key, strlen(key), val, strlen(val)));
		snprintf(md.v[k].val, sizeof(md.v[k].val), "%s", val);
		md.v[k].exp = now + TTL;
		break;
	case 2:
		W(c, sfs_value_delete(c, s_v, 0, key, strlen(key)));
		md.v[k].exp = 0;
		break;
	case 3:
		W(c, sfs_value_put(c, s_vr, 0, key, strlen(key), val, strlen(val)));
		snprintf(md.vr[k].val, sizeof(md.vr[k].val), "%s", val);
		md.vr[k].exp = now + TTL;
		break;
	case 4:
		check_value(c, s_vr, &md.vr[k], key, op, 1);
		break;
	case 5:
		W(c, sfs_value_put(c, s_plain, 0, key, strlen(key), val, strlen(val)));
		snprintf(md.plain[k].val, sizeof(md.plain[k].val), "%s", val);
		md.plain[k].exp = UINT64_MAX;
		break;
	case 6:
	case 7: {
		int64_t d = (int64_t)rnd(9) - 4;

		W(c, sfs_counter_add(c, s_c, 0, key, strlen(key), d));
		md.c[k] = live(md.c_exp[k]) ? md.c[k] + d : d;
		md.c_exp[k] = now + TTL;
		break;
	}
	case 8:
	case 9:
		W(c, sfs_map_put(c, s_m, 0, key, strlen(key), uk, 2, val, strlen(val)));
		snprintf(md.m[k][u].val, sizeof(md.m[k][u].val), "%s", val);
		md.m[k][u].exp = now + TTL;
		break;
	case 10:
		W(c, sfs_map_remove(c, s_m, 0, key, strlen(key), uk, 2));
		md.m[k][u].exp = 0;
		break;
	case 11:
		rc = sfs_map_get(c, s_m, 0, key, strlen(key), uk, 2, &v);
		cr_assert_eq(rc, live(md.m[k][u].exp), "op %d map get %s %s", op, key, uk);
		if (rc == 1)
			cr_assert(v.len == strlen(md.m[k][u].val) &&
				  !memcmp(v.data, md.m[k][u].val, v.len));
		break;
	case 12:
		if (rnd(4) == 0) {
			W(c, sfs_map_clear(c, s_m, 0, key, strlen(key)));
			for (int j = 0; j < NU; j++)
				md.m[k][j].exp = 0;
		}
		break;
	case 13:
		if (md.nl[k] < NL) {
			W(c, sfs_list_append(c, s_l, 0, key, strlen(key), val, strlen(val)));
			snprintf(md.l[k][md.nl[k]].val, sizeof(md.l[k][0].val), "%s", val);
			md.l[k][md.nl[k]++].exp = now + TTL;
		} else {
			W(c, sfs_list_clear(c, s_l, 0, key, strlen(key)));
			md.nl[k] = 0;
		}
		break;
	default:
		check_value(c, s_v, &md.v[k], key, op, 0);
		break;
	}
}

/* Move @stage's shared files up beside the others (a restore's flat
 * layout), then into @to. */
static int put_stage(void *arg, const char *to)
{
	const char *stage = arg;
	char sh[PATH_MAX], a[PATH_MAX * 2], b[PATH_MAX * 2];
	struct dirent *e;
	DIR *d;

	for (int pass = 0; pass < 2; pass++) {
		snprintf(sh, sizeof(sh), pass ? "%s" : "%s/" SFS_STAGE_SHARED, stage);
		if (!(d = opendir(sh)))
			continue;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.' && strcmp(e->d_name, SFS_STAGE_SHARED)) {
				snprintf(a, sizeof(a), "%s/%s", sh, e->d_name);
				snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
				if (rename(a, b))
					return -errno;
			}
		closedir(d);
	}
	return 0;
}

static void create_seg(const char *target)
{
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
	snprintf(seg.hdr->sh_backend, sizeof(seg.hdr->sh_backend), "%s", target);
	snprintf(seg.hdr->sh_data_dir, sizeof(seg.hdr->sh_data_dir), "%s/store", dir);
}

static uint64_t dropped(sfs_ctx_t *c)
{
	return sfs_load_relaxed(&c->ctl->wc_ttl_dropped);
}

/* The table target's maintenance counters of the last model_run (table.h). */
static uint64_t tbl_files_dropped, tbl_rows_dropped, tbl_merges;
static uint32_t check_every = 500;   /* ops between full checks, on average */

static void model_run(const char *target)
{
	struct sfs_worker_opts o = small_opts();
	const struct sfs_target_ops *t;
	char stage[256], states[8192];
	struct inproc p;
	uint64_t barrier = 0, drops = 0;
	sfs_ctx_t *c;

	th_job(job, sizeof(job), "ttl");
	snprintf(dir, sizeof(dir), "/tmp/sfs-ttl-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	create_seg(target);
	memset(&md, 0, sizeof(md));
	rnd_state = (uint64_t)getpid();
	cr_log_info("seed %llu", (unsigned long long)rnd_state);
	now = 1000;

	o.buffer_bytes = 256 << 10;
	o.stall_timeout_ns = 1000000;	/* back-pressure returns: the test drains */
	flusher = &p;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	reg(c);
	inproc_start(&p);
	for (int op = 0; op < OPS; op++) {
		now += rnd(4);
		sfs_ctx_set_time(c, now);
		step(c, op);
		if (rnd(60) == 0) {
			++barrier;
			B(c, barrier);
			if (rnd(2))
				inproc_drain(&p, c);
		} else if (rnd(20) == 0) {
			int pending;

			sfs_ctx_quiescent(c);
			sfs_flusher_step(&p.f, 1 + rnd(300), &pending);
		}
		if (rnd(check_every) == 0)
			check_all(c, op);
		if (op == OPS / 2) {
			/* A restore: the target's stage of this state into a
			 * new segment, the registry from its states= record. */
			struct sfs_target_cfg cfg = { 0 };
			struct sfs_target_env env;

			++barrier;
			B(c, barrier);
			inproc_drain(&p, c);
			drops += dropped(c);
			if (images)
				drops += sfs_table_pub_of(&seg, 0)->tp_l0_ttl_dropped;
			t = p.f.ops;
			snprintf(stage, sizeof(stage), "%s/stage", dir);
			cr_assert_eq(t->snapshot(p.f.w[0].tw, stage), 0, "%s", sfs_last_error());
			cr_assert_eq(sfs__ck_coord_states(&seg, states, sizeof(states)), 0);
			cr_assert_not_null(strstr(states, "@40e."), "%s", states);
			cr_assert_not_null(strstr(states, "@40er."), "%s", states);
			inproc_stop(&p);
			sfs_worker_close(c);
			sfs_seg_detach(&seg);
			sfs_seg_destroy(job, 0);
			create_seg(target);
			cr_assert_eq(sfs__ck_coord_states_restore(&seg, states + strlen("states=")), 0,
				     "%s", sfs_last_error());
			cfg.store_bytes = 16u << 20;
			env = (struct sfs_target_env){ .seg = &seg, .root = seg.hdr->sh_data_dir,
						       .cfg = &cfg };
			if (t->restore)
				cr_assert_eq(t->restore(&env, 0, put_stage, stage), 0, "%s",
					     sfs_last_error());
			cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
			reg(c);
			/* the program's event clock is its to restore (sfs.h) */
			sfs_ctx_set_time(c, now);
			inproc_start(&p);
			check_all(c, op);
		}
	}
	check_all(c, OPS);
	++barrier;
	B(c, barrier);
	inproc_drain(&p, c);
	drops += dropped(c);
	if (images)	/* dropped at the conversion, by the target (table_l0.c) */
		drops += sfs_table_pub_of(&seg, 0)->tp_l0_ttl_dropped;
	cr_log_info("%s: %llu entries dropped as expired at flush", target,
		    (unsigned long long)drops);
	cr_assert_gt(drops, 100, "maintenance dropped expired entries (%llu)",
		     (unsigned long long)drops);
	if (strcmp(target, "table") == 0) {
		const struct sfs_table_pub *tp = sfs_table_pub_of(&seg, 0);

		cr_assert_not_null(tp);
		/* merges (and so the files whose expiries are known) may run on
		 * idle CPU time: on a busy machine let them catch up */
		for (int ms = 0; ms < 5000 && check_every < 500 &&
				(!sfs_load_relaxed(&tp->tp_merges) ||
				 !sfs_load_relaxed(&tp->tp_ttl_files_dropped)); ms++)
			usleep(1000);
		tbl_files_dropped = sfs_load_relaxed(&tp->tp_ttl_files_dropped);
		tbl_rows_dropped = sfs_load_relaxed(&tp->tp_ttl_dropped);
		tbl_merges = sfs_load_relaxed(&tp->tp_merges);
		cr_log_info("table: %llu merges, %llu rows dropped, %llu files dropped whole",
			    (unsigned long long)tbl_merges, (unsigned long long)tbl_rows_dropped,
			    (unsigned long long)tbl_files_dropped);
	}
	inproc_stop(&p);
	sfs_worker_close(c);
	teardown();
}

Test(ttl, memory_against_a_model_with_a_fake_clock)
{
	model_run("memory");
}

Test(ttl, table_against_a_model_with_a_fake_clock)
{
	model_run("table");
}

/* Paced maintenance (store/table/table_merge.c) at two merge budgets: 0
 * (merges on idle CPU time, as before the budget) and one far beyond the
 * flush (every merge at normal priority).  The model still holds at both
 * while files whose every row has expired leave the table whole, without
 * a rewrite; dropping one that still holds a live row would lose it. */
static void paced_run(const char *budget)
{
	setenv("SFS_TABLE_MERGE_BUDGET", budget, 1);
	check_every = 8;	/* a live row lost is seen before a write hides it */
	model_run("table");
	check_every = 500;
	unsetenv("SFS_TABLE_MERGE_BUDGET");
	cr_assert_gt(tbl_merges, 0, "the table merged");
	cr_assert_gt(tbl_files_dropped, 0, "files whose rows all expired were dropped whole");
}

Test(ttl, table_paced_merges_budget_0)
{
	paced_run("0");
}

Test(ttl, table_paced_merges_large_budget)
{
	paced_run("100000");
}

/* The table target with every buffer absorbed as an image and converted
 * later (store/table/table_l0.c): the conversion drops what expired by the
 * seal's clocks, as the flush does; reads at any time meet the images not
 * converted yet (the worker's walk maps them below its own buffers).  The
 * half-way restore stages a snapshot, which converts every image first. */
Test(ttl, table_with_buffer_images_against_a_model_with_a_fake_clock)
{
	setenv("SFS_TABLE_L0_IMAGE", "1", 1);
	images = 1;
	model_run("table");
}

Test(ttl, rocksdb_against_a_model_with_a_fake_clock)
{
	model_run("rocksdb");
}
