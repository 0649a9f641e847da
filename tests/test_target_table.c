/*
 * test_target_table.c — the `table` flush target (store/table/table.c,
 * store/table/table_read.c): sfs's own LSM tables under <data>/w<N>/s<sid>/.
 *
 * Every state kind through the compactor's flush loop (and the real
 * compactor binary) into the tables and back through a reader in another
 * process; counters folded across flushes, a redone flush and a writer
 * restart counting once (also with the round in the background only, so
 * readers fold level-0 deltas); the map diff's row counts pinned (a
 * changed entry of a 3-entry map writes 1 row, a reverted change none, a
 * clear tombstones only what it removes), and the whole-map ablation's;
 * a flusher killed at every injected crash point (barrier data file, data
 * commit, round file, round commit, shaping-merge file and commit, and
 * the compactor's flush cycle: before an apply, before the commit, before
 * the publication), then a healthy one: nothing lost, nothing doubled, no orphan file left; a
 * randomized model of value, counter and map operations checked after
 * every flush, with each design point switched off in turn; the writer's
 * background thread publishing beside the barrier commits (a counter
 * never reads a barrier twice, a reader never fails); corrupt data and
 * snapshot files refused by name; a snapshot restored into the store
 * of a new segment reads the same and keeps counting; and state TTL:
 * expired rows physically leave the files in the round and the shaping
 * merge (also with rounds in the background), an expired put shadows an
 * older version below it as a tombstone would, and a state without a TTL
 * loses no row however its values look; and rollback in place (pin,
 * rollback): the randomized model rolled back to a pinned barrier through
 * merges that took pinned files out of the live set (which must survive),
 * read by a reader that had seen newer versions and by a new one, going on
 * from there, and leaving no orphan once the next pin releases what only
 * the old pin needed; the contract's edges (-ENOENT, pin(0), watermarks,
 * an abandoned flush, a table first written after the pin); and a
 * compactor killed at each step of a rollback opening on the pinned
 * version.
 *
 * Forked children report through their exit code only, are waited for
 * with a timeout and reaped (helpers.h).  Knobs (SFS_TABLE_*) are read
 * when a writer opens, so each test sets them first (a test is its own
 * process); a flusher child arms its crash point (common/fault.h).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "common/fault.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "shm/atomic.h"
#include "store/table/layout/datafile.h"
#include "store/table/table.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"
#include "tests/helpers.h"
#include "tests/state_helpers.h"
#include "tests/target_keys.h"
#include "worker/state.h"

#define SEG_MB 64

static const struct sfs_target_ops *const T = &sfs_target_table;

static struct sfs_seg seg;
static char dir[128];
static char job2[64];          /* a second segment (the restore), "" none */

static void setup(void)
{
	th_job(job, sizeof(job), "tblt");
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
	snprintf(dir, sizeof(dir), "/tmp/sfs-tblt-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	/* What the supervisor does for --backend table, before any child. */
	snprintf(seg.hdr->sh_backend, sizeof(seg.hdr->sh_backend), "table");
	snprintf(seg.hdr->sh_data_dir, sizeof(seg.hdr->sh_data_dir), "%s/store", dir);
	job2[0] = '\0';
}

/*
 * What a test leaves running when an assertion ends it early: the
 * in-process flusher and a writer opened through the ops, each with its
 * background thread.  Stopped by the teardown before the segment goes.
 */
static struct inproc live_flusher;
static int live_flusher_on;
static struct sfs_target_writer *live_writer;
static pid_t live_child;        /* a flusher child not reaped yet, 0 none */

static void flusher_start(void)
{
	inproc_start(&live_flusher);
	live_flusher_on = 1;
}

static void flusher_stop(void)
{
	if (live_flusher_on) {
		live_flusher_on = 0;
		inproc_stop(&live_flusher);
	}
}

static int writer_open(struct sfs_seg *s, const struct sfs_proc_slot *slot,
		       struct sfs_target_writer **w)
{
	struct sfs_target_cfg cfg = { 0 };
	int rc = T->open(s, 0, slot, &cfg, w);

	if (!rc)
		live_writer = *w;
	return rc;
}

static void writer_close(struct sfs_target_writer *w)
{
	if (w == live_writer)
		live_writer = NULL;
	T->close(w);
}

static void teardown(void)
{
	char cmd[sizeof(dir) + 16];

	if (live_child) {
		kill(live_child, SIGKILL);
		waitpid(live_child, NULL, 0);
	}
	if (live_writer)
		writer_close(live_writer);
	flusher_stop();
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	if (job2[0])
		sfs_seg_destroy(job2, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

TestSuite(tblt, .init = setup, .fini = teardown, .timeout = 60);

/* ---- keys as the worker builds them, reads through the target's reader ---------- */

/* "ukey=val;" per entry (or "val;" per list element), in the reader's order:
 * the table's key order. */
struct cat {
	char s[2048];
	size_t n;
};

static int cat_fn(void *arg, const void *uk, uint32_t ul, const void *v, uint32_t vl)
{
	struct cat *c = arg;

	if (c->n < sizeof(c->s))
		c->n += (size_t)snprintf(c->s + c->n, sizeof(c->s) - c->n, "%.*s=%.*s;", (int)ul,
					 (const char *)uk, (int)vl, (const char *)v);
	return 0;
}

static int cat_vals(void *arg, const void *uk, uint32_t ul, const void *v, uint32_t vl)
{
	struct cat *c = arg;

	(void)uk;
	(void)ul;
	if (c->n < sizeof(c->s))
		c->n += (size_t)snprintf(c->s + c->n, sizeof(c->s) - c->n, "%.*s;", (int)vl,
					 (const char *)v);
	return 0;
}

/* 1 if value key @k of @sid in @ns reads @want (NULL: absent). */
static int probe_str(struct sfs_target_reader *r, uint32_t sid, uint64_t ns, const char *k,
		     const char *want)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = ns, .key = kb, .klen = vkey(kb, sid, k) };
	struct sfs_probe_result res;

	if (T->rd.probe(r, &p, 1, &res))
		return 0;
	if (!want)
		return !res.found;
	return res.found && res.len == strlen(want) && memcmp(res.value, want, res.len) == 0;
}

/* The counter @k of @sid in @ns: 1 and *@out, 0 absent, < 0 an error. */
static int probe_i64(struct sfs_target_reader *r, uint32_t sid, uint64_t ns, const char *k,
		     int64_t *out, uint64_t *tag)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = ns, .key = kb, .klen = vkey(kb, sid, k) };
	struct sfs_probe_result res;
	int rc = T->rd.probe(r, &p, 1, &res);

	if (rc)
		return rc;
	if (tag)
		*tag = res.tag;
	if (!res.found)
		return 0;
	if (res.len != 8)
		return -EINVAL;
	memcpy(out, res.value, 8);
	return 1;
}

static int map_is(struct sfs_target_reader *r, uint32_t sid, uint64_t ns, const char *k,
		  const char *want, int list)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = ns, .key = kb, .klen = pkey(kb, sid, k) };
	struct cat c = { .n = 0 };

	c.s[0] = '\0';
	if (T->rd.map_iter(r, &p, list ? cat_vals : cat_fn, &c))
		return 0;
	return strcmp(c.s, want) == 0;
}

static struct sfs_table_pub *pub_of(struct sfs_seg *s, uint32_t w)
{
	char name[32];
	uint64_t off, size;

	snprintf(name, sizeof(name), "table.%u", w);
	cr_assert_eq(sfs_seg_region_find(s, name, &off, &size), 0, "region %s", name);
	return sfs_seg_ptr(s, off);
}

static uint64_t relaxed(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* The files the compactor published for table @sid: a consistent copy
 * under the seqlock (the background thread may publish meanwhile). */
#define PUB_MAX 256
struct pubset {
	uint32_t n;
	char name[PUB_MAX][SFS_TABLE_NAME];
	uint32_t level[PUB_MAX];
	char dvi[SFS_TABLE_NAME];
};

static int pub_table(const struct sfs_table_pub *p, uint32_t sid, struct pubset *out)
{
	for (int tries = 0; tries < 1000000; tries++) {
		uint64_t s0 = __atomic_load_n(&p->tp_seq, __ATOMIC_ACQUIRE);
		uint32_t nt = p->tp_ntables;

		if (s0 & 1) {
			/* a publisher mid-copy, maybe descheduled on a loaded machine */
			if (tries % 64 == 63)
				sched_yield();
			continue;
		}
		out->n = 0;
		out->dvi[0] = '\0';
		for (uint32_t i = 0; i < nt && i < SFS_MAX_STATES; i++) {
			const struct sfs_table_pub_table *pt = &p->tp_tables[i];

			if (pt->pt_sid != sid)
				continue;
			memcpy(out->dvi, pt->pt_dvi, SFS_TABLE_NAME);
			out->dvi[SFS_TABLE_NAME - 1] = '\0';
			for (uint32_t k = 0; k < pt->pt_nfiles && out->n < PUB_MAX; k++) {
				const struct sfs_table_pub_file *pf =
					&p->tp_files[(pt->pt_first + k) % SFS_TABLE_PUB_FILES];

				memcpy(out->name[out->n], pf->pf_name, SFS_TABLE_NAME);
				out->name[out->n][SFS_TABLE_NAME - 1] = '\0';
				out->level[out->n++] = pf->pf_level;
			}
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&p->tp_seq, __ATOMIC_ACQUIRE) == s0)
			return 0;
	}
	return -1;
}

/* Level-0 files published for @sid: with the round at the barrier, a
 * committed barrier leaves none. */
static uint32_t published_level0(const struct sfs_table_pub *p, uint32_t sid)
{
	static struct pubset ps;
	uint32_t n = 0;

	cr_assert_eq(pub_table(p, sid, &ps), 0);
	for (uint32_t i = 0; i < ps.n; i++)
		n += ps.level[i] == 0;
	return n;
}

/* 1 if table @sid has a published file at level @level. */
static int published_at_level(const struct sfs_table_pub *p, uint32_t sid, uint32_t level)
{
	static struct pubset ps;

	cr_assert_eq(pub_table(p, sid, &ps), 0);
	for (uint32_t i = 0; i < ps.n; i++)
		if (ps.level[i] == level)
			return 1;
	return 0;
}

static void table_dir(char *out, size_t n, const char *store, uint32_t sid)
{
	snprintf(out, n, "%s/w0/s%u", store, sid);
}

/*
 * 1 when the table directory of @sid holds exactly the published data
 * files and vector index: no orphan left by a dead flusher, none missing.
 * Files that left the live set are unlinked after a grace period, so
 * callers poll.  *@why says what differs.
 */
static int dir_matches_pub(const struct sfs_table_pub *p, uint32_t sid, char *why, size_t wn)
{
	static struct pubset ps;
	char path[512];
	struct dirent *e;
	uint32_t seen = 0;
	DIR *d;

	why[0] = '\0';
	if (pub_table(p, sid, &ps))
		return snprintf(why, wn, "no stable copy"), 0;
	table_dir(path, sizeof(path), seg.hdr->sh_data_dir, sid);
	if (!(d = opendir(path)))
		return snprintf(why, wn, "%.300s: %s", path, strerror(errno)), 0;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		int known = 0;

		if (e->d_name[0] != 't' || l < 4 ||
		    (strcmp(e->d_name + l - 4, ".sst") && strcmp(e->d_name + l - 4, ".dvi")))
			continue;
		for (uint32_t i = 0; i < ps.n && !known; i++)
			known = strcmp(ps.name[i], e->d_name) == 0;
		if (!known && strcmp(ps.dvi, e->d_name) == 0)
			known = 1;
		if (!known) {
			snprintf(why, wn, "%.300s/%.60s is not published (an orphan)", path,
				 e->d_name);
			closedir(d);
			return 0;
		}
		seen++;
	}
	closedir(d);
	if (seen != ps.n + (ps.dvi[0] != '\0'))
		return snprintf(why, wn, "%.300s: %u files, %u published", path, seen,
				ps.n + (ps.dvi[0] != '\0')), 0;
	return 1;
}

/* Poll (quiescent, so grace periods pass) until @sid's directory matches
 * what is published. */
static void expect_no_orphans(sfs_ctx_t *c, uint32_t sid)
{
	char why[512];
	int ok = 0;

	for (int i = 0; i < 3000 && !ok; i++) {
		sfs_ctx_quiescent(c);
		ok = dir_matches_pub(pub_of(&seg, 0), sid, why, sizeof(why));
		if (!ok)
			usleep(1000);
	}
	cr_assert(ok, "table %u: %s", sid, why);
}

/* ---- 1. every kind round-trips ---------------------------------------------------- */

static uint32_t s_v, s_c, s_mx, s_mn, s_m, s_l;

/* In another process: a reader of worker 0's store sees it all. */
static int reader_checks(void *arg)
{
	struct sfs_target_reader *r;
	struct sfs_probe_result res;
	struct sfs_seg s;
	unsigned char kb[64];
	struct sfs_probe p;
	int64_t n;
	uint64_t tag = 0;

	(void)arg;
	if (sfs_seg_attach(job, 0, &s) || T->rd.reader_open(&s, 0, &r))
		return 10;
	if (T->rd.catch_up(r))
		return 11;
	if (!probe_str(r, s_v, 0, "a", "A0") || !probe_str(r, s_v, 7, "a", "A7"))
		return 12;
	if (!probe_str(r, s_v, 0, "b", NULL) || !probe_str(r, s_v, 1, "a", NULL))
		return 13;
	if (probe_i64(r, s_c, 0, "x", &n, &tag) != 1 || n != 13 || tag != 3)
		return 14;
	if (probe_i64(r, s_mx, 0, "y", &n, NULL) != 1 || n != 10)
		return 15;
	if (probe_i64(r, s_mn, 0, "z", &n, NULL) != 1 || n != 4)
		return 16;
	if (probe_i64(r, s_c, 3, "x", &n, NULL) != 1 || n != -2)
		return 17;
	if (probe_i64(r, s_c, 0, "nope", &n, NULL) != 0)
		return 18;
	if (!map_is(r, s_m, 0, "k", "c=3;", 0) || !map_is(r, s_m, 5, "k", "a=51;", 0))
		return 19;
	if (!map_is(r, s_m, 0, "other", "q=9;", 0) || !map_is(r, s_m, 1, "k", "", 0))
		return 20;
	if (!map_is(r, s_l, 0, "k", "x;y;z;", 1) || !map_is(r, s_l, 0, "k2", "q;", 1))
		return 21;
	p = (struct sfs_probe){ .ns = 5, .key = kb, .klen = pkey(kb, s_m, "k") };
	if (T->rd.map_get(r, &p, "a", 1, &res) != 1 || res.len != 2 || memcmp(res.value, "51", 2) != 0)
		return 22;
	if (T->rd.map_get(r, &p, "b", 1, &res) != 0)
		return 23;
	T->rd.reader_close(r);
	sfs_seg_detach(&s);
	return 0;
}

static void put(sfs_ctx_t *c, uint32_t st, uint64_t ns, const char *k, const char *v)
{
	cr_assert_eq(sfs_value_put(c, st, ns, k, strlen(k), v, strlen(v)), 0, "%s",
		     sfs_last_error());
}

static void mput(sfs_ctx_t *c, uint32_t st, uint64_t ns, const char *k, const char *uk,
		 const char *v)
{
	cr_assert_eq(sfs_map_put(c, st, ns, k, strlen(k), uk, strlen(uk), v, strlen(v)), 0, "%s",
		     sfs_last_error());
}

static void add(sfs_ctx_t *c, uint32_t st, uint64_t ns, const char *k, int64_t d)
{
	cr_assert_eq(sfs_counter_add(c, st, ns, k, strlen(k), d), 0, "%s", sfs_last_error());
}

static void lappend(sfs_ctx_t *c, const char *k, const char *v)
{
	cr_assert_eq(sfs_list_append(c, s_l, 0, k, strlen(k), v, strlen(v)), 0, "%s",
		     sfs_last_error());
}

/* The same, through this worker's context (buffers empty: the store). */
static void check_worker(sfs_ctx_t *c)
{
	struct sfs_view v;
	struct cat m = { .n = 0 };
	int64_t n;

	cr_assert_eq(sfs_value_get(c, s_v, 0, "a", 1, &v), 1);
	cr_assert(v.len == 2 && memcmp(v.data, "A0", 2) == 0);
	cr_assert_eq(sfs_value_get(c, s_v, 7, "a", 1, &v), 1);
	cr_assert(v.len == 2 && memcmp(v.data, "A7", 2) == 0);
	cr_assert_eq(sfs_value_get(c, s_v, 0, "b", 1, &v), 0);
	cr_assert_eq(sfs_counter_get(c, s_c, 0, "x", 1, &n), 1);
	cr_assert_eq(n, 13);
	cr_assert_eq(sfs_counter_get(c, s_mx, 0, "y", 1, &n), 1);
	cr_assert_eq(n, 10);
	cr_assert_eq(sfs_counter_get(c, s_mn, 0, "z", 1, &n), 1);
	cr_assert_eq(n, 4);
	m.s[0] = '\0';
	cr_assert_eq(sfs_map_iter(c, s_m, 0, "k", 1, cat_fn, &m), 0);
	cr_assert_str_eq(m.s, "c=3;");
	m.n = 0;
	m.s[0] = '\0';
	cr_assert_eq(sfs_map_iter(c, s_m, 5, "k", 1, cat_fn, &m), 0);
	cr_assert_str_eq(m.s, "a=51;");
	m.n = 0;
	m.s[0] = '\0';
	cr_assert_eq(sfs_list_get(c, s_l, 0, "k", 1, cat_vals, &m), 0);
	cr_assert_str_eq(m.s, "x;y;z;");
}

static void register_all(sfs_ctx_t *c)
{
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &s_v), 0);
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &s_c), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MAX, &s_mx), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mn", SFS_MERGE_MIN, &s_mn), 0);
	cr_assert_eq(sfs_state_register(c, "m", SFS_STATE_MAP, &s_m), 0);
	cr_assert_eq(sfs_state_register(c, "l", SFS_STATE_LIST, &s_l), 0);
}

Test(tblt, every_kind_round_trips_to_a_reader_in_another_process)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc *p = &live_flusher;
	sfs_ctx_t *c;
	int rc;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	register_all(c);
	flusher_start();
	cr_assert_str_eq(p->f.ops->name, "table");

	/* 1: first values of everything */
	put(c, s_v, 0, "a", "A0");
	put(c, s_v, 7, "a", "A7");
	put(c, s_v, 0, "b", "B0");
	add(c, s_c, 0, "x", 5);
	add(c, s_c, 3, "x", -2);
	add(c, s_mx, 0, "y", 3);
	add(c, s_mn, 0, "z", 9);
	mput(c, s_m, 0, "k", "a", "1");
	mput(c, s_m, 0, "k", "b", "2");
	mput(c, s_m, 0, "k", "d", "4");
	mput(c, s_m, 5, "k", "a", "51");
	mput(c, s_m, 1, "k", "a", "gone");
	mput(c, s_m, 0, "other", "q", "9");
	lappend(c, "k", "x");
	lappend(c, "k", "y");
	lappend(c, "k2", "p");
	cr_assert_eq(sfs_barrier(c, 1), 0);
	inproc_drain(p, c);

	/* 2: updates over the flushed base */
	add(c, s_c, 0, "x", 7);
	add(c, s_mx, 0, "y", 10);
	add(c, s_mx, 0, "y", 2);
	add(c, s_mn, 0, "z", 4);
	add(c, s_mn, 0, "z", 6);
	cr_assert_eq(sfs_value_delete(c, s_v, 0, "b", 1), 0);
	cr_assert_eq(sfs_map_remove(c, s_m, 0, "k", 1, "d", 1), 0);
	cr_assert_eq(sfs_map_remove(c, s_m, 1, "k", 1, "a", 1), 0);
	mput(c, s_m, 0, "k", "e", "5");
	lappend(c, "k", "z");
	cr_assert_eq(sfs_list_clear(c, s_l, 0, "k2", 2), 0);
	lappend(c, "k2", "q");
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(p, c);

	/* 3: a clear in namespace 0 only, with an entry written before it in
	 * the same buffer (gone) and one after (kept) */
	mput(c, s_m, 0, "k", "f", "6");
	cr_assert_eq(sfs_map_clear(c, s_m, 0, "k", 1), 0);
	mput(c, s_m, 0, "k", "c", "3");
	add(c, s_c, 0, "x", 1);
	add(c, s_mn, 0, "z", 5);
	cr_assert_eq(sfs_barrier(c, 3), 0);
	inproc_drain(p, c);

	/* the round ran at every barrier: no level-0 file is left published */
	cr_assert_eq(published_level0(pub_of(&seg, 0), s_c), 0);
	cr_assert_eq(published_level0(pub_of(&seg, 0), s_m), 0);
	check_worker(c);
	/* the writer stops first: what it published stays readable */
	flusher_stop();
	rc = th_exit_code(th_wait(th_fork(reader_checks, NULL), 30000));
	cr_assert_eq(rc, 0, "reader in another process: exit %d", rc);
	sfs_worker_close(c);
}

/* The real compactor binary picks the target from the segment. */
Test(tblt, the_compactor_binary_flushes_into_tables)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_table_pub *pub;
	struct sfs_view v;
	uint32_t st, sv;
	sfs_ctx_t *c;
	pid_t comp;
	int64_t n;
	int status;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	comp = live_child = start_compactor();
	for (uint64_t b = 1; b <= 5; b++) {
		add(c, st, 0, "k", (int64_t)b);
		cr_assert_eq(sfs_value_put(c, sv, 0, "v", 1, &b, 8), 0);
		cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
	}
	cr_assert(wait_flushed(c, 5, 20000), "the compactor flushed 5 barriers");
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &n), 1);
	cr_assert_eq(n, 15);
	cr_assert_eq(sfs_value_get(c, sv, 0, "v", 1, &v), 1);
	cr_assert(v.len == 8 && memcmp(v.data, &(uint64_t){ 5 }, 8) == 0);
	pub = pub_of(&seg, 0);
	cr_assert_eq(sfs_load_acquire(&pub->tp_applied), 5);
	cr_assert_geq(relaxed(&pub->tp_data_commits), 10, "two tables x five barriers");
	kill(comp, SIGTERM);
	status = th_wait(comp, 10000);
	live_child = 0;
	cr_assert_neq(status, -1, "compactor stops on SIGTERM");
	sfs_worker_close(c);
}

/* ---- 2. counters, redone flushes, writer restarts --------------------------------- */

static void commit(struct sfs_target_writer *w, uint64_t seq)
{
	int rc;

	for (int i = 0; i < 20000 && (rc = T->commit(w, seq)) == -EAGAIN; i++)
		usleep(500);
	cr_assert_eq(rc, 0, "commit %llu: %s", (unsigned long long)seq, sfs_last_error());
}

static void flush_seq(struct sfs_target_writer *w, struct sfs_wbuf_view *v, unsigned n,
		      uint64_t seq)
{
	/* in two pieces, as the flush loop may call it */
	cr_assert_eq(T->apply(w, v, n / 2, seq), 0, "%s", sfs_last_error());
	cr_assert_eq(T->apply(w, v + n / 2, n - n / 2, seq), 0, "%s", sfs_last_error());
	commit(w, seq);
}

static void expect(struct sfs_target_reader *r, uint32_t sid, const char *k, int64_t want,
		   uint64_t tag)
{
	int64_t v = 0;
	uint64_t got_tag = 0;
	int rc;

	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	rc = probe_i64(r, sid, 0, k, &v, &got_tag);
	cr_assert_eq(rc, 1, "%s: probe %d (%s)", k, rc, rc < 0 ? sfs_last_error() : "absent");
	cr_assert_eq(v, want, "%s = %lld, expected %lld", k, (long long)v, (long long)want);
	cr_assert_eq(got_tag, tag, "%s: tag %llu, expected %llu", k, (unsigned long long)got_tag,
		     (unsigned long long)tag);
}

/* Counters of every operator through the writer ops with hand-made views:
 * folded across flushes, a redone seq and a restarted writer change
 * nothing. */
static void counters_once(void)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[4];
	struct mview m[4];
	uint32_t sc, smx, smn;
	sfs_ctx_t *c;
	uint64_t commits;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MAX, &smx), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mn", SFS_MERGE_MIN, &smn), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);

	/* sorted as the flush gives them: state c, then mx, then mn */
	merge_view(&v[0], &m[0], sc, "x", 5);
	merge_view(&v[1], &m[1], sc, "y", 1);
	merge_view(&v[2], &m[2], smx, "z", 3);
	merge_view(&v[3], &m[3], smn, "w", 8);
	flush_seq(w, v, 4, 1);
	expect(r, sc, "x", 5, 1);
	expect(r, smx, "z", 3, 1);
	expect(r, smn, "w", 8, 1);

	merge_view(&v[0], &m[0], sc, "x", 7);
	merge_view(&v[1], &m[1], smx, "z", 10);
	merge_view(&v[2], &m[2], smn, "w", 2);
	flush_seq(w, v, 3, 2);
	expect(r, sc, "x", 12, 2);
	expect(r, sc, "y", 1, 2);
	expect(r, smx, "z", 10, 2);
	expect(r, smn, "w", 2, 2);

	/* the same seq again (a redone flush): skipped by every table */
	commits = relaxed(&pub_of(&seg, 0)->tp_data_commits);
	flush_seq(w, v, 3, 2);
	expect(r, sc, "x", 12, 2);
	expect(r, smx, "z", 10, 2);
	expect(r, smn, "w", 2, 2);
	cr_assert_eq(relaxed(&pub_of(&seg, 0)->tp_data_commits), commits,
		     "a redone seq writes no data file");

	/* a writer restarted: the tables' watermarks still make it a no-op */
	writer_close(w);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	flush_seq(w, v, 3, 2);
	expect(r, sc, "x", 12, 2);
	expect(r, smn, "w", 2, 2);

	merge_view(&v[0], &m[0], sc, "x", 1);
	merge_view(&v[1], &m[1], smx, "z", 2);
	merge_view(&v[2], &m[2], smn, "w", 3);
	flush_seq(w, v, 3, 3);
	expect(r, sc, "x", 13, 3);
	expect(r, smx, "z", 10, 3);
	expect(r, smn, "w", 2, 3);

	/* several more flushes of one key: each folds once */
	for (uint64_t s = 4; s < 12; s++) {
		merge_view(&v[0], &m[0], sc, "x", (int64_t)s);
		flush_seq(w, v, 1, s);
		flush_seq(w, v, 1, s);	/* and redone at once */
	}
	expect(r, sc, "x", 13 + (4 + 11) * 8 / 2, 11);
	expect(r, sc, "y", 1, 11);

	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

Test(tblt, counters_merge_across_flushes_and_a_redone_flush_counts_once)
{
	counters_once();
}

/* Rounds only in the background: readers fold level-0 deltas over the
 * level-1 base while the background thread up-levels them. */
Test(tblt, counters_count_once_with_rounds_in_the_background_only)
{
	setenv("SFS_TABLE_ROUND", "0", 1);
	counters_once();
}

/*
 * A redo of an OLDER seq (the rocksdb target's test does it too) must not
 * move the published applied seq (every result's tag) backwards: a worker
 * folds the deltas of its buffers newer than the tag, so a tag that went
 * back would count a still-buffered newer delta twice.
 */
Test(tblt, a_redone_older_seq_does_not_move_the_tag_back)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[1];
	struct mview m[1];
	uint64_t tag = 0, applied;
	int64_t x = 0;
	uint32_t sc;
	sfs_ctx_t *c;
	int got;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	merge_view(&v[0], &m[0], sc, "x", 5);
	flush_seq(w, v, 1, 1);
	merge_view(&v[0], &m[0], sc, "x", 7);
	flush_seq(w, v, 1, 2);
	expect(r, sc, "x", 12, 2);
	merge_view(&v[0], &m[0], sc, "x", 5);
	flush_seq(w, v, 1, 1);
	cr_assert_eq(T->rd.catch_up(r), 0);
	got = probe_i64(r, sc, 0, "x", &x, &tag);
	applied = sfs_load_acquire(&pub_of(&seg, 0)->tp_applied);
	/* closed before the verdict: a failed assert must not leave the
	 * writer's thread running into the fixture's teardown */
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	cr_assert(got == 1 && x == 12, "x = %lld after a redo of seq 1", (long long)x);
	cr_assert_eq(applied, 2, "published applied seq after a redo of seq 1: %llu",
		     (unsigned long long)applied);
	cr_assert_eq(tag, 2, "tag after a redo of seq 1: %llu", (unsigned long long)tag);
}

/* A reader that found the compactor's region before the compactor stored its
 * knobs (table_open makes the region findable first) probes with the knobs
 * of the version it reads, not the zeroes it saw: a point read of one key
 * in a page of hundreds is a binary search, no walk of the page's rows
 * (the per-literal ablation's walk, which such a reader used to keep). */
Test(tblt, a_reader_that_found_the_region_before_the_knobs_probes_with_them)
{
	enum { N = 3000 };
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	static struct sfs_wbuf_view v[N];
	static unsigned char kb[N][32];
	static char name[N][16];
	struct sfs_df_counters wk;
	struct sfs_table_pub *p;
	uint32_t sv, knobs;
	sfs_ctx_t *c;
	int got;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &sv), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	p = pub_of(&seg, 0);
	knobs = __atomic_load_n(&p->tp_knobs, __ATOMIC_RELAXED);
	cr_assert(knobs & SFS_TABLE_K_HASH_IN);
	/* the window between the region's creation and the knobs' store */
	__atomic_store_n(&p->tp_knobs, 0, __ATOMIC_RELAXED);
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	__atomic_store_n(&p->tp_knobs, knobs, __ATOMIC_RELAXED);
	for (int i = 0; i < N; i++) {
		snprintf(name[i], sizeof(name[i]), "k%05d", i);
		v[i] = (struct sfs_wbuf_view){ .value = name[i], .key = kb[i], .len = 6,
					       .klen = vkey(kb[i], sv, name[i]), .kind = SFS_WBUF_PUT };
	}
	flush_seq(w, v, N, 1);
	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	got = probe_str(r, sv, 0, "k01234", "k01234");
	sfs__table_reader_work(r, &wk);
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	cr_assert(got, "k01234 should read back");
	cr_assert(wk.page_reads >= 1, "the probe read no page");
	cr_assert_eq(wk.rows_walked, 0, "%llu rows walked for one key: the reader kept the knobs "
		     "it saw before the compactor stored them", (unsigned long long)wk.rows_walked);
}

/* ---- 3. the map diff's rows ------------------------------------------------------- */

struct step_rows {
	uint64_t rows, unchanged, commits, pruned;
};

static struct step_rows counts(void)
{
	struct sfs_table_pub *p;
	uint64_t off, size;

	/* the flusher opens the writer (and its region) at its first step */
	if (sfs_seg_region_find(&seg, "table.0", &off, &size))
		return (struct step_rows){ 0, 0, 0, 0 };
	p = sfs_seg_ptr(&seg, off);
	return (struct step_rows){ relaxed(&p->tp_rows_written), relaxed(&p->tp_map_unchanged),
				   relaxed(&p->tp_data_commits), relaxed(&p->tp_map_pruned) };
}

/* Barrier @b, flush it; what its data commit wrote. */
static struct step_rows flush_step(sfs_ctx_t *c, struct inproc *p, uint64_t b)
{
	struct step_rows before = counts(), after;

	cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
	inproc_drain(p, c);
	after = counts();
	return (struct step_rows){ after.rows - before.rows, after.unchanged - before.unchanged,
				   after.commits - before.commits, after.pruned - before.pruned };
}

static void expect_map(uint32_t sid, const char *want)
{
	struct sfs_target_reader *r;

	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	cr_assert(map_is(r, sid, 0, "k", want, 0), "map k should read %s", want);
	T->rd.reader_close(r);
}

#define EXPECT_STEP(s, r_, u_, what)                                                          \
	cr_assert((s).rows == (uint64_t)(r_) && (s).unchanged == (uint64_t)(u_),             \
		  "%s: %llu rows written, %llu entries unchanged; expected %d and %d", what, \
		  (unsigned long long)(s).rows, (unsigned long long)(s).unchanged, (r_), (u_))

/* Rows the map diff did not probe: their map is in no file, or the table's
 * key filter rejects their key (diff on only). */
#define EXPECT_PRUNED(s, diff, p_, what)                                                     \
	cr_assert((s).pruned == ((diff) ? (uint64_t)(p_) : 0), "%s: %llu rows not probed, "     \
		  "expected %d", what, (unsigned long long)(s).pruned, (diff) ? (p_) : 0)

/*
 * The issue's pins: one changed row of a 3-row map writes 1 row, a reverted
 * change none; a removal of an absent entry none; a clear writes a
 * tombstone per stored entry it removes, and a re-put equal to the stored
 * value is not written again.  @diff 0: the ablation (SFS_TABLE_MAP_DIFF=0)
 * rewrites every touched map whole, and the clear still removes exactly
 * what it should.
 */
static void map_diff_rows(int diff)
{
	struct sfs_worker_opts o = small_opts();
	struct step_rows s;
	struct inproc *p = &live_flusher;
	uint32_t sm;
	sfs_ctx_t *c;

	if (!diff)
		setenv("SFS_TABLE_MAP_DIFF", "0", 1);
	setenv("SFS_TABLE_KFILTER_AFTER", "0", 1);	/* the key filter from the start */
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "m", SFS_STATE_MAP, &sm), 0);
	flusher_start();

	mput(c, sm, 0, "k", "a", "1");
	mput(c, sm, 0, "k", "b", "2");
	mput(c, sm, 0, "k", "c", "3");
	s = flush_step(c, p, 1);
	expect_map(sm, "a=1;b=2;c=3;");
	EXPECT_STEP(s, 3, 0, "a new 3-entry map");
	EXPECT_PRUNED(s, diff, 3, "a new 3-entry map");

	mput(c, sm, 0, "k", "b", "20");
	s = flush_step(c, p, 2);
	expect_map(sm, "a=1;b=20;c=3;");
	EXPECT_STEP(s, diff ? 1 : 3, 0, "one entry changed");
	EXPECT_PRUNED(s, diff, 0, "one entry changed");

	/* changed and changed back within one buffer: equal to the image */
	mput(c, sm, 0, "k", "b", "99");
	mput(c, sm, 0, "k", "b", "20");
	s = flush_step(c, p, 3);
	expect_map(sm, "a=1;b=20;c=3;");
	EXPECT_STEP(s, diff ? 0 : 3, diff ? 1 : 0, "a reverted change");
	if (diff)
		cr_assert_eq(s.commits, 0, "nothing to write: no data file");

	cr_assert_eq(sfs_map_remove(c, sm, 0, "k", 1, "zz", 2), 0);
	s = flush_step(c, p, 4);
	expect_map(sm, "a=1;b=20;c=3;");
	EXPECT_STEP(s, diff ? 0 : 4, diff ? 1 : 0, "a removal of an absent entry");
	/* k is in a file, but the table's key filter knows zz never was */
	EXPECT_PRUNED(s, diff, 1, "a removal of an absent entry");

	/* a map no file holds, beside k: its rows are known new without a
	 * probe — the put is written, the removal dropped; k's row is probed */
	mput(c, sm, 0, "n", "x", "5");
	cr_assert_eq(sfs_map_remove(c, sm, 0, "q", 1, "y", 1), 0);
	mput(c, sm, 0, "k", "b", "20");
	s = flush_step(c, p, 5);
	expect_map(sm, "a=1;b=20;c=3;");
	EXPECT_STEP(s, diff ? 1 : 5, diff ? 2 : 0, "a new map, a removal from another, k unchanged");
	EXPECT_PRUNED(s, diff, 2, "a new map, a removal from another, k unchanged");

	/* clear, then 1 of the 3 entries again with its stored value: b and c
	 * get a tombstone each, a is unchanged */
	cr_assert_eq(sfs_map_clear(c, sm, 0, "k", 1), 0);
	mput(c, sm, 0, "k", "a", "1");
	s = flush_step(c, p, 6);
	expect_map(sm, "a=1;");
	EXPECT_STEP(s, diff ? 2 : 3, diff ? 1 : 0, "a clear and one entry put again");

	/* clear, then a new entry: a tombstone for a, the new c */
	cr_assert_eq(sfs_map_clear(c, sm, 0, "k", 1), 0);
	mput(c, sm, 0, "k", "c", "7");
	s = flush_step(c, p, 7);
	expect_map(sm, "c=7;");
	EXPECT_STEP(s, 2, 0, "a clear and a new entry");

	cr_assert_eq(__atomic_load_n(&pub_of(&seg, 0)->tp_knobs, __ATOMIC_RELAXED) & SFS_TABLE_K_MAP_DIFF,
		     diff ? SFS_TABLE_K_MAP_DIFF : 0u);
	flusher_stop();
	sfs_worker_close(c);
}

Test(tblt, a_changed_map_entry_writes_one_row_and_a_reverted_change_none)
{
	map_diff_rows(1);
}

Test(tblt, without_the_map_diff_a_touched_map_is_rewritten_whole_and_a_clear_still_clears)
{
	map_diff_rows(0);
}

/*
 * The key filter is built for a map table whose diff asks the files for
 * many keys per row, not for one whose maps are new (their prefix filters
 * prune): no shaping merges (every barrier adds a file), each barrier
 * putting 4 new entries into each of 8 maps — maps every file holds
 * (@old), or maps never seen before (!@old).  Every entry reads back; with
 * @old the filter was built and rejected new entries without a file
 * asked, without it there is none.
 */
static void kfilter_adaptive(int old)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc *p = &live_flusher;
	struct sfs_target_reader *r;
	const struct sfs_table_pub *pub;
	uint32_t sm;
	uint64_t rej0 = 0;
	char k[32], uk[32];
	sfs_ctx_t *c;

	setenv("SFS_TABLE_SHAPING", "0", 1);
	setenv("SFS_TABLE_KFILTER_MIN_KEYS", "16", 1);
	o.flags = SFS_WORKER_NO_CACHE;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "m", SFS_STATE_MAP, &sm), 0);
	flusher_start();
	for (unsigned b = 1; b <= 48; b++) {
		for (unsigned m = 0; m < 8; m++)
			for (unsigned e = 0; e < 4; e++) {
				if (old)
					snprintf(k, sizeof(k), "m%u", m);
				else
					snprintf(k, sizeof(k), "b%u.m%u", b, m);
				snprintf(uk, sizeof(uk), "b%03u.%02u", b, e);
				mput(c, sm, 0, k, uk, "v");
			}
		cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
		inproc_drain(p, c);
		pub = sfs_table_pub_of(&seg, 0);
		/* the background thread builds it once the diff wants it */
		for (int t = 0; old && b == 32 && t < 5000 && relaxed(&pub->tp_kfilter_rebuilds) == 0;
		     t++)
			usleep(1000);
		if (b == 40)
			rej0 = relaxed(&pub->tp_kfilter_rejects);
	}
	pub = sfs_table_pub_of(&seg, 0);
	if (old) {
		cr_assert_geq(relaxed(&pub->tp_kfilter_rebuilds), 1, "the filter was built");
		cr_assert_gt(relaxed(&pub->tp_kfilter_rejects), rej0, "and rejected new entries "
			     "(%llu, %llu at barrier 40)",
			     (unsigned long long)relaxed(&pub->tp_kfilter_rejects),
			     (unsigned long long)rej0);
		cr_assert_gt(relaxed(&pub->tp_kfilter_bytes), 0);
	} else {
		cr_assert_eq(relaxed(&pub->tp_kfilter_rebuilds) + relaxed(&pub->tp_kfilter_bytes) +
				     relaxed(&pub->tp_kfilter_rejects), 0,
			     "no filter for maps the prefix filters prune");
	}
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	for (unsigned m = 0; m < 8; m++) {
		char want[48 * 4 * 10 + 1] = "";	/* within struct cat's 2048 */
		unsigned n = 0;

		for (unsigned b = 1; b <= 48; b++)
			for (unsigned e = 0; e < 4 && (old || b == 48); e++)
				n += (unsigned)snprintf(want + n, sizeof(want) - n, "b%03u.%02u=v;", b, e);
		if (old)
			snprintf(k, sizeof(k), "m%u", m);
		else
			snprintf(k, sizeof(k), "b48.m%u", m);
		cr_assert(map_is(r, sm, 0, k, want, 0), "map %s reads every entry", k);
	}
	T->rd.reader_close(r);
	flusher_stop();
	sfs_worker_close(c);
}

Test(tblt, a_map_table_gets_its_key_filter_when_its_diff_asks_many_files_for_each_row)
{
	kfilter_adaptive(1);
}

Test(tblt, a_map_table_whose_maps_are_new_gets_no_key_filter)
{
	kfilter_adaptive(0);
}

/* ---- 4. kill -9 of the flusher at each crash point ---------------------------------- */

/* A flusher in a forked child: steps until killed, by the test or by its
 * fault rule @arg (sfs_fault_arm, NULL: none).  The test process never
 * opens a writer in these tests, so the child's background thread starts
 * fresh; its rules are reset (SFS_FAULT included) before they are armed. */
static int flusher_child(void *arg)
{
	static struct sfs_flusher f;
	struct sfs_proc_slot *slot;
	struct sfs_seg s;

	sfs_fault_reset();
	if (arg && sfs_fault_arm((const char *)arg))
		return 22;
	if (sfs_seg_attach(job, 0, &s) || sfs_proc_register(&s, SFS_ROLE_COMPACTOR, 0, &slot) ||
	    sfs_flusher_init(&f, &s, slot, 16u << 20))
		return 20;
	for (;;) {
		int pending = 0, rc = sfs_flusher_step(&f, 1000, &pending);

		if (rc < 0)
			return 21;
		sfs_proc_heartbeat(slot);
		if (rc == 0)
			usleep(200);
	}
}

/* Wait (quiescent, as a worker between batches is) for @pid to end: its
 * wait status, or -1 after @ms (then it is killed and reaped). */
static int wait_end(sfs_ctx_t *c, pid_t pid, int ms)
{
	int status = -1;

	for (int i = 0; i < ms; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid || r < 0)
			break;
		status = -1;
		sfs_ctx_quiescent(c);
		usleep(1000);
	}
	if (status == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (pid == live_child)
		live_child = 0;
	return status;
}

/* 1 and its status if flusher @pid has ended (then it is reaped). */
static int ended(pid_t pid, int *status)
{
	if (waitpid(pid, status, WNOHANG) != pid)
		return 0;
	if (pid == live_child)
		live_child = 0;
	return 1;
}

static pid_t spawn_flusher(const char *crash)
{
	return live_child = th_fork(flusher_child, (void *)crash);
}

static void stop_flusher(pid_t pid)
{
	kill(pid, SIGKILL);
	th_wait(pid, 5000);
	if (pid == live_child)
		live_child = 0;
}

static int killed_at_its_point(int status)
{
	return status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

/*
 * Barrier crash points: a barrier of 100 counter adds and 100 value puts,
 * a flusher armed to die at @points[i], then a healthy one.  Counters
 * exact (nothing lost, nothing folded twice), values the last barrier's,
 * no level-0 file left, no orphan file.  The counter table's level-0 file
 * holds merge rows, so its round rewrites (the roundfile point); the value
 * table's relabels.
 */
static void each_point(const char *const *points, unsigned npoints)
{
	struct sfs_worker_opts o = small_opts();
	uint64_t b = 0;
	uint32_t st, sv;
	sfs_ctx_t *c;
	int64_t ref = 0, n;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	for (unsigned i = 0; i < npoints; i++) {
		uint64_t val = b + 1;
		struct sfs_view v;
		pid_t fl;
		int status;

		for (int k = 0; k < 100; k++) {
			char key[16];

			snprintf(key, sizeof(key), "k%d", k);
			add(c, st, 0, key, k + 1);
			cr_assert_eq(sfs_value_put(c, sv, 0, key, strlen(key), &val, 8), 0);
		}
		ref += 1;	/* k0's share */
		cr_assert_eq(sfs_barrier(c, ++b), 0);
		fl = spawn_flusher(points[i]);
		status = wait_end(c, fl, 20000);
		cr_assert(killed_at_its_point(status), "flusher died at '%s' (status %d)", points[i],
			  status);
		cr_assert(!wait_flushed(c, b, 1), "the buffer of a death at '%s' stays sealed",
			  points[i]);
		fl = spawn_flusher(NULL);
		cr_assert(wait_flushed(c, b, 20000), "flushed after a death at '%s'", points[i]);
		cr_assert_eq(sfs_counter_get(c, st, 0, "k0", 2, &n), 1);
		cr_assert_eq(n, ref, "after a death at '%s': %lld, expected %lld", points[i],
			     (long long)n, (long long)ref);
		cr_assert_eq(sfs_counter_get(c, st, 0, "k99", 3, &n), 1);
		cr_assert_eq(n, 100 * ref, "k99 after '%s'", points[i]);
		cr_assert_eq(sfs_value_get(c, sv, 0, "k42", 3, &v), 1);
		cr_assert(v.len == 8 && memcmp(v.data, &b, 8) == 0, "value after '%s'", points[i]);
		cr_assert_eq(published_level0(pub_of(&seg, 0), st), 0, "after '%s'", points[i]);
		expect_no_orphans(c, st);
		expect_no_orphans(c, sv);
		stop_flusher(fl);
	}
	cr_assert_gt(relaxed(&pub_of(&seg, 0)->tp_rounds), 0);
	sfs_worker_close(c);
}

Test(tblt, a_flusher_dying_at_each_barrier_step_loses_and_doubles_nothing)
{
	static const char *const points[] = { "table.datafile:1", "table.datacommit:1",
					      "table.roundfile:1", "table.round:1" };

	each_point(points, 4);
}

/* The compactor's flush cycle (compactor/flush.c) around the same target:
 * killed before an apply, with everything applied but not committed, and
 * committed but not published. */
Test(tblt, a_compactor_dying_at_each_flush_cycle_step_loses_and_doubles_nothing)
{
	static const char *const points[] = { "flush.apply:1", "flush.commit:1",
					      "flush.publish:1" };

	each_point(points, 3);
}

/* Images still waiting for their conversion: the entries of worker 0's
 * list (store/table/table_l0.c: 16 bytes of head, 40 per image, a crc). */
static long l0_waiting(void)
{
	char path[600];
	struct stat stt;

	snprintf(path, sizeof(path), "%s/w0/L0", seg.hdr->sh_data_dir);
	return stat(path, &stt) ? 0 : ((long)stt.st_size - 20) / 40;
}

/*
 * Level 0 as buffer images (SFS_TABLE_L0_IMAGE=1): a flusher killed with an
 * image written but not listed, listed (absorbed: the buffer is retired
 * after it, or sealed still when the kill came first), and with its
 * conversion committed but the list not rewritten; then a healthy one
 * absorbs and converts what is left.  Once no image waits, counters are
 * exact (an image converted twice would fold its deltas twice), values
 * the last barrier's, no level-0 file and no orphan left; and read as
 * soon as the buffer is retired too (the worker reads unconverted images
 * in place, below its own buffers).
 */
Test(tblt, a_flusher_dying_at_each_image_step_loses_and_doubles_nothing)
{
	static const char *const points[] = { "table.l0.image:1", "table.l0.list:1",
					      "table.l0.commit:1", "flush.publish:1" };
	struct sfs_worker_opts o = small_opts();
	uint64_t b = 0;
	uint32_t st, sv;
	sfs_ctx_t *c;
	int64_t ref = 0, n;

	setenv("SFS_TABLE_L0_IMAGE", "1", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	for (unsigned i = 0; i < sizeof(points) / sizeof(*points); i++) {
		uint64_t val = b + 1;
		struct sfs_view v;
		pid_t fl;
		int status, t;

		for (int k = 0; k < 100; k++) {
			char key[16];

			snprintf(key, sizeof(key), "k%d", k);
			add(c, st, 0, key, k + 1);
			cr_assert_eq(sfs_value_put(c, sv, 0, key, strlen(key), &val, 8), 0);
		}
		ref += 1;
		cr_assert_eq(sfs_barrier(c, ++b), 0);
		fl = spawn_flusher(points[i]);
		status = wait_end(c, fl, 20000);
		cr_assert(killed_at_its_point(status), "flusher died at '%s' (status %d)", points[i],
			  status);
		fl = spawn_flusher(NULL);
		cr_assert(wait_flushed(c, b, 20000), "flushed after a death at '%s'", points[i]);
		/* read at once (images maybe not converted yet: read in place),
		 * then again once none waits */
		for (int pass = 0; pass < 2; pass++) {
			for (t = 0; pass && t < 20000 && l0_waiting() > 0; t++) {
				sfs_ctx_quiescent(c);
				usleep(1000);
			}
			cr_assert(!pass || l0_waiting() == 0, "every image converted after '%s'",
				  points[i]);
			sfs_ctx_quiescent(c);
			cr_assert_eq(sfs_counter_get(c, st, 0, "k0", 2, &n), 1);
			cr_assert_eq(n, ref, "after a death at '%s' (pass %d): %lld, expected %lld",
				     points[i], pass, (long long)n, (long long)ref);
			cr_assert_eq(sfs_counter_get(c, st, 0, "k99", 3, &n), 1);
			cr_assert_eq(n, 100 * ref, "k99 after '%s' (pass %d)", points[i], pass);
			cr_assert_eq(sfs_value_get(c, sv, 0, "k42", 3, &v), 1);
			cr_assert(v.len == 8 && memcmp(v.data, &b, 8) == 0, "value after '%s' (pass %d)",
				  points[i], pass);
		}
		expect_no_orphans(c, st);
		expect_no_orphans(c, sv);
		stop_flusher(fl);
	}
	cr_assert_gt(relaxed(&pub_of(&seg, 0)->tp_l0_converted), 0);
	{	/* and no image left behind (a kill before the list names one) */
		char l0dir[600];
		struct dirent *e;
		DIR *d;

		snprintf(l0dir, sizeof(l0dir), "%s/w0/l0", seg.hdr->sh_data_dir);
		cr_assert_not_null(d = opendir(l0dir));
		while ((e = readdir(d)))
			cr_assert(e->d_name[0] == '.', "%s/%s left behind", l0dir, e->d_name);
		closedir(d);
	}
	sfs_worker_close(c);
}

/* A sealed buffer of counter adds of @d to key "x" in states @s1 and @s2. */
static struct sfs_wbuf *adds_buffer(uint32_t s1, uint32_t s2, int64_t d, uint64_t barrier)
{
	size_t size = sfs_wbuf_size(16, 4096);
	struct sfs_wbuf *b;
	unsigned char k[32];
	uint32_t n;

	cr_assert_eq(sfs_wbuf_init(th_map(size), size, 16, &b), 0);
	n = vkey(k, s1, "x");
	cr_assert_eq(sfs_wbuf_merge_add(b, 0, k, n, d), 0);
	n = vkey(k, s2, "x");
	cr_assert_eq(sfs_wbuf_merge_add(b, 0, k, n, d), 0);
	cr_assert_eq(sfs_wbuf_seal(b, barrier), 0);
	return b;
}

/*
 * An image's conversion commits its tables one per step and publishes the
 * applied seq with the last: a buffer absorbed meanwhile must wait
 * (-EAGAIN), since its publication would show readers the first tables'
 * rows of the image beside the image itself (a counter folded twice).
 * Then, step by step, a reader's tag and images never count a delta twice:
 * the tables' value plus the deltas of the images newer than the tag is
 * the sum at every step.
 */
Test(tblt, an_image_is_not_absorbed_while_a_conversion_commits)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_ttl_clock clk = { 0, 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf *b1, *b2;
	uint32_t s1, s2;
	sfs_ctx_t *c;
	int rc, steps = 0;

	setenv("SFS_TABLE_L0_IMAGE", "1", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c1", SFS_STATE_COUNTER, &s1), 0);
	cr_assert_eq(sfs_state_register(c, "c2", SFS_STATE_COUNTER, &s2), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	b1 = adds_buffer(s1, s2, 5, 1);
	b2 = adds_buffer(s1, s2, 7, 2);
	cr_assert_eq(T->absorb(w, b1, 1, 1, &clk), 0, "%s", sfs_last_error());
	for (;;) {
		const struct sfs_wbuf *const *ib;
		const uint64_t *is;
		unsigned n;

		rc = T->l0_step(w);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (rc == 0)
			break;
		steps++;
		if (T->busy(w))	/* tables of image 1 remain */
			cr_assert_eq(T->absorb(w, b2, 2, 1, &clk), -EAGAIN,
				     "absorbed while a conversion commits (step %d)", steps);
		else if (T->absorb(w, b2, 2, 1, &clk) != 0)
			cr_assert_fail("%s", sfs_last_error());
		/* the reader's view is one publication: tag and images agree */
		cr_assert_eq(T->rd.catch_up(r), 0);
		cr_assert_eq(T->rd.images(r, &ib, &is, &n), 0);
		for (uint32_t sid = s1; sid <= s2; sid += s2 - s1) {
			int64_t v = 0, sum;
			uint64_t tag = 0;
			struct sfs_wbuf_view iv;
			unsigned char k[32];
			uint32_t kl = vkey(k, sid, "x");

			rc = probe_i64(r, sid, 0, "x", &v, &tag);
			cr_assert_geq(rc, 0);
			sum = rc == 1 ? v : 0;
			for (unsigned i = 0; i < n; i++)
				if (is[i] > tag && sfs_wbuf_get(ib[i], 0, k, kl, &iv) == 0)
					sum += sfs_wbuf_view_i64(&iv);
			cr_assert(sum == 5 || sum == 12, "state %u after step %d: %lld (tag %llu, %u "
				  "images)", sid, steps, (long long)sum, (unsigned long long)tag, n);
			if (sid == s2)
				break;
		}
	}
	cr_assert_gt(steps, 2, "one step per table and more");
	expect(r, s1, "x", 12, 2);
	expect(r, s2, "x", 12, 2);
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * Shaping-merge crash points: each barrier adds 25 new keys to the value
 * table (so its level-1 files stay live and pile up: a merge starts at 4)
 * and folds 10 counters; a flusher armed at @point runs barriers until its
 * background merge kills it, then a healthy one finishes the merge.
 */
static void merge_point(const char *point)
{
	struct sfs_worker_opts o = small_opts();
	static int64_t ref[10];
	uint64_t b = 0;
	uint32_t st, sv;
	sfs_ctx_t *c;
	pid_t fl;
	int status = -1, dead = 0;
	int64_t n;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "fresh", SFS_STATE_VALUE, &sv), 0);
	fl = spawn_flusher(point);
	while (!dead && b < 12) {
		b++;
		for (int k = 0; k < 10; k++) {
			char key[16];

			snprintf(key, sizeof(key), "c%d", k);
			add(c, st, 0, key, k + (int64_t)b);
			ref[k] += k + (int64_t)b;
		}
		for (int j = 0; j < 25; j++) {
			char key[24];

			snprintf(key, sizeof(key), "f%llu-%d", (unsigned long long)b, j);
			cr_assert_eq(sfs_value_put(c, sv, 0, key, strlen(key), &b, 8), 0);
		}
		cr_assert_eq(sfs_barrier(c, b), 0);
		for (int t = 0; t < 10000 && !dead && !wait_flushed(c, b, 1); t++)
			dead = ended(fl, &status);
		/* give the background thread a poll or two to start the merge */
		for (int t = 0; t < 60 && !dead; t++) {
			dead = ended(fl, &status);
			sfs_ctx_quiescent(c);
			usleep(1000);
		}
	}
	if (!dead)
		status = wait_end(c, fl, 5000);
	cr_assert(killed_at_its_point(status), "the flusher died at '%s' in a shaping merge "
		  "(status %d after %llu barriers)", point, status, (unsigned long long)b);
	fl = spawn_flusher(NULL);
	cr_assert(wait_flushed(c, b, 20000), "flushed after a death at '%s'", point);
	for (int k = 0; k < 10; k++) {
		char key[16];

		snprintf(key, sizeof(key), "c%d", k);
		cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &n), 1);
		cr_assert_eq(n, ref[k], "counter %s after '%s': %lld, expected %lld", key, point,
			     (long long)n, (long long)ref[k]);
	}
	for (uint64_t x = 1; x <= b; x++)
		for (int j = 0; j < 25; j++) {
			char key[24];
			struct sfs_view v;

			snprintf(key, sizeof(key), "f%llu-%d", (unsigned long long)x, j);
			cr_assert_eq(sfs_value_get(c, sv, 0, key, strlen(key), &v), 1, "%s after '%s'",
				     key, point);
			cr_assert(v.len == 8 && memcmp(v.data, &x, 8) == 0, "%s after '%s'", key, point);
		}
	/* the merge the dead flusher committed, or the one the healthy flusher
	 * redid: level 1's four files are one level-2 file */
	for (int t = 0; t < 5000 && !published_at_level(pub_of(&seg, 0), sv, 2); t++) {
		sfs_ctx_quiescent(c);
		usleep(1000);
	}
	cr_assert(published_at_level(pub_of(&seg, 0), sv, 2), "a merged level-2 file after '%s'",
		  point);
	expect_no_orphans(c, sv);
	expect_no_orphans(c, st);
	stop_flusher(fl);
	sfs_worker_close(c);
}

Test(tblt, a_flusher_dying_after_writing_a_merged_file_loses_and_doubles_nothing)
{
	merge_point("table.mergefile:1");
}

Test(tblt, a_flusher_dying_after_committing_a_merge_loses_and_doubles_nothing)
{
	merge_point("table.merge:1");
}

/*
 * The published applied seq (every result's tag) against the files
 * published with it.  A worker folds its still-sealed buffers' counter
 * deltas over the store's value when their seq is newer than the tag, so
 * a version holding seq N's files must carry tag >= N.  Each barrier here
 * touches counter table "hot" (committed first) and a large value table
 * (committed second, slowly); meanwhile the writer's background thread
 * up-levels (@knob SFS_TABLE_ROUND=0) or merges "hot" and publishes.  The
 * worker reads "hot" all the time: it must always read the number of
 * barriers written, never one more.
 */
static void tag_against_background_publication(const char *knob)
{
	enum { HOT = 3 };
	struct sfs_worker_opts o = small_opts();
	uint64_t bad = 0, reads = 0, bad_b = 0, failed = 0;
	char fail_msg[256] = "";
	int64_t bad_val = 0, n;
	uint32_t hot[HOT], bulk;
	sfs_ctx_t *c;
	pid_t fl;
	int rc;

	if (knob)
		setenv(knob, "0", 1);
	o.buffer_bytes = 4 << 20;
	o.buffer_keys = 65536;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	for (int h = 0; h < HOT; h++) {
		char name[16];

		snprintf(name, sizeof(name), "hot%d", h);
		cr_assert_eq(sfs_state_register(c, name, SFS_STATE_COUNTER, &hot[h]), 0);
	}
	cr_assert_eq(sfs_state_register(c, "bulk", SFS_STATE_VALUE, &bulk), 0);
	cr_assert_lt(hot[HOT - 1], bulk, "the counters are committed first");
	fl = spawn_flusher(NULL);
	for (uint64_t b = 1; b <= 16; b++) {
		uint64_t deadline;
		int flushed = 0;

		for (int h = 0; h < HOT; h++) {
			add(c, hot[h], 0, "h", 1);
			/* new keys: a counter table's level-1 files stay live and pile
			 * up, so it merges every 4 of its barriers; table h skips
			 * every (h + 2)th barrier, so the merges (and the background
			 * publications) of the tables fall on different barriers */
			for (int j = 0; j < 8 && b % (uint64_t)(h + 2); j++) {
				char key[24];

				snprintf(key, sizeof(key), "f%llu-%d", (unsigned long long)b, j);
				add(c, hot[h], 0, key, 1);
			}
		}
		for (int j = 0; j < 8000; j++) {
			char key[16];

			snprintf(key, sizeof(key), "b%d", j);
			cr_assert_eq(sfs_value_put(c, bulk, 0, key, strlen(key), &b, 8), 0, "%s",
				     sfs_last_error());
		}
		cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
		deadline = sfs_now_ns() + 20000000000ull;
		for (unsigned i = 0; !flushed && sfs_now_ns() < deadline; i++) {
			struct sfs_worker_stats ws;

			sfs_ctx_quiescent(c);
			rc = sfs_counter_get(c, hot[i % HOT], 0, "h", 1, &n);
			reads++;
			if (rc != 1) {
				if (!failed++)
					snprintf(fail_msg, sizeof(fail_msg), "%d after %llu barriers (%s)",
						 rc, (unsigned long long)b,
						 rc < 0 ? sfs_last_error() : "absent");
				continue;
			}
			if (n != (int64_t)b && !bad++) {
				bad_val = n;
				bad_b = b;
			}
			sfs_worker_stats(c, &ws);
			flushed = ws.flushed_seq >= b;
		}
		cr_assert(flushed, "barrier %llu flushed", (unsigned long long)b);
	}
	stop_flusher(fl);
	if (!knob)
		cr_assert_geq(relaxed(&pub_of(&seg, 0)->tp_merges), HOT * 2, "merges: %llu",
			      (unsigned long long)relaxed(&pub_of(&seg, 0)->tp_merges));
	sfs_worker_close(c);
	cr_assert(bad == 0 && failed == 0,
		  "of %llu reads of a counter after barriers of +1 each: %llu read one barrier "
		  "twice (the first %lld after %llu barriers: a version published with files of a "
		  "seq newer than its applied seq, the tag), %llu failed (the first: %s)",
		  (unsigned long long)reads, (unsigned long long)bad, (long long)bad_val,
		  (unsigned long long)bad_b, (unsigned long long)failed, fail_msg);
}

Test(tblt, a_counter_never_reads_a_barrier_twice_while_merges_publish)
{
	tag_against_background_publication(NULL);
}

Test(tblt, a_counter_never_reads_a_barrier_twice_while_background_rounds_publish)
{
	tag_against_background_publication("SFS_TABLE_ROUND");
}

/*
 * Readers are lock-free and must never fail because the writer is busy.
 * With rounds in the background (SFS_TABLE_ROUND=0), each barrier's small
 * counter table is up-levelled by the background thread while the main
 * thread commits the large value table of the same or the next barrier
 * (three barriers are queued at a time); the background thread then
 * publishes.  A reader catching up and probing the counter all the while
 * must get an answer every time (never -EAGAIN "keeps changing").
 */
Test(tblt, a_reader_never_fails_while_the_writer_commits_a_large_table)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_reader *r;
	uint64_t reads = 0, failed = 0, b = 0;
	char fail_msg[256] = "";
	uint32_t small, big;
	sfs_ctx_t *c;
	pid_t fl;

	setenv("SFS_TABLE_ROUND", "0", 1);
	o.buffers = 4;
	o.buffer_bytes = 4 << 20;
	o.buffer_keys = 65536;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "small", SFS_STATE_COUNTER, &small), 0);
	cr_assert_eq(sfs_state_register(c, "big", SFS_STATE_VALUE, &big), 0);
	cr_assert_lt(small, big, "the small table is committed first");
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	fl = spawn_flusher(NULL);
	for (int round = 0; round < 12; round++) {
		uint64_t deadline;
		int flushed = 0;

		for (int q = 0; q < 3; q++) {
			b++;
			add(c, small, 0, "s", 1);
			for (int j = 0; j < 40000; j++) {
				char key[16];

				snprintf(key, sizeof(key), "b%d", j);
				cr_assert_eq(sfs_value_put(c, big, 0, key, strlen(key), &b, 8), 0, "%s",
					     sfs_last_error());
			}
			cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
		}
		deadline = sfs_now_ns() + 20000000000ull;
		while (!flushed && sfs_now_ns() < deadline) {
			struct sfs_worker_stats ws;
			int64_t n;
			int rc;

			sfs_ctx_quiescent(c);
			rc = T->rd.catch_up(r);
			if (!rc)
				rc = probe_i64(r, small, 0, "s", &n, NULL);
			reads++;
			if (rc < 0 && !failed++)
				snprintf(fail_msg, sizeof(fail_msg), "%d after %llu barriers (%s)", rc,
					 (unsigned long long)b, sfs_last_error());
			sfs_worker_stats(c, &ws);
			flushed = ws.flushed_seq >= b;
		}
		cr_assert(flushed, "barrier %llu flushed", (unsigned long long)b);
	}
	stop_flusher(fl);
	T->rd.reader_close(r);
	sfs_worker_close(c);
	cr_assert_eq(failed, 0, "%llu of %llu reads failed, the first: %s",
		     (unsigned long long)failed, (unsigned long long)reads, fail_msg);
}

/* ---- 5. a randomized model ---------------------------------------------------------- */

#define M_NS 2
#define M_NV 24         /* value keys */
#define M_NC 12         /* counter keys (add and max) */
#define M_NM 6          /* map keys */
#define M_NU 6          /* user keys per map */
#define M_VMAX 20

static const uint64_t m_ns[M_NS] = { 0, 0x0102030405ull };

struct mval {
	int has;
	uint32_t len;
	char b[M_VMAX];
};

struct model {
	struct mval v[M_NS][M_NV];
	int add_has[M_NS][M_NC], max_has[M_NS][M_NC];
	int64_t add[M_NS][M_NC], max[M_NS][M_NC];
	struct mval m[M_NS][M_NM][M_NU];
};

static uint32_t r_v, r_add, r_max, r_map;

static void rand_val(uint64_t *seed, struct mval *v)
{
	v->has = 1;
	v->len = (uint32_t)(th_rand(seed) % M_VMAX);	/* empty values too */
	for (uint32_t i = 0; i < v->len; i++)
		v->b[i] = (char)('a' + th_rand(seed) % 26);
}

/* One random operation on the worker and on the model. */
static void model_op(sfs_ctx_t *c, struct model *m, uint64_t *seed)
{
	unsigned op = (unsigned)(th_rand(seed) % 100), s = (unsigned)(th_rand(seed) % M_NS);
	char key[16], uk[8];
	uint64_t ns = m_ns[s];

	if (op < 35) {
		unsigned k = (unsigned)(th_rand(seed) % M_NV);

		snprintf(key, sizeof(key), "v%u", k);
		if (op < 25) {
			rand_val(seed, &m->v[s][k]);
			cr_assert_eq(sfs_value_put(c, r_v, ns, key, strlen(key), m->v[s][k].b,
						   m->v[s][k].len), 0, "%s", sfs_last_error());
		} else {
			m->v[s][k].has = 0;
			cr_assert_eq(sfs_value_delete(c, r_v, ns, key, strlen(key)), 0);
		}
	} else if (op < 58) {
		unsigned k = (unsigned)(th_rand(seed) % M_NC);
		int64_t d = (int64_t)(th_rand(seed) % 41) - 10;

		snprintf(key, sizeof(key), "c%u", k);
		if (op < 50) {
			m->add[s][k] += d;
			m->add_has[s][k] = 1;
			cr_assert_eq(sfs_counter_add(c, r_add, ns, key, strlen(key), d), 0);
		} else {
			m->max[s][k] = m->max_has[s][k] && m->max[s][k] > d ? m->max[s][k] : d;
			m->max_has[s][k] = 1;
			cr_assert_eq(sfs_counter_add(c, r_max, ns, key, strlen(key), d), 0);
		}
	} else {
		unsigned k = (unsigned)(th_rand(seed) % M_NM), u = (unsigned)(th_rand(seed) % M_NU);

		snprintf(key, sizeof(key), "m%u", k);
		snprintf(uk, sizeof(uk), "u%u", u);
		if (op < 85) {
			rand_val(seed, &m->m[s][k][u]);
			cr_assert_eq(sfs_map_put(c, r_map, ns, key, strlen(key), uk, strlen(uk),
						 m->m[s][k][u].b, m->m[s][k][u].len), 0, "%s",
				     sfs_last_error());
		} else if (op < 96) {
			m->m[s][k][u].has = 0;
			cr_assert_eq(sfs_map_remove(c, r_map, ns, key, strlen(key), uk, strlen(uk)), 0);
		} else {
			memset(m->m[s][k], 0, sizeof(m->m[s][k]));
			cr_assert_eq(sfs_map_clear(c, r_map, ns, key, strlen(key)), 0);
		}
	}
}

/* Every key of the model read through @r: "" if equal, else the first
 * difference in @why. */
static void model_check(struct sfs_target_reader *r, const struct model *m, char *why, size_t wn)
{
	enum { NP = M_NS * (M_NV + 2 * M_NC) };
	static unsigned char kb[NP][32];
	struct sfs_probe p[NP];
	struct sfs_probe_result res[NP];
	unsigned n = 0;
	int rc;

	why[0] = '\0';
	if ((rc = T->rd.catch_up(r))) {
		snprintf(why, wn, "catch_up %d: %s", rc, sfs_last_error());
		return;
	}
	/* one batch over three states, interleaved: the probe groups them */
	for (unsigned s = 0; s < M_NS; s++) {
		for (unsigned k = 0; k < M_NV; k++) {
			char key[16];

			snprintf(key, sizeof(key), "v%u", k);
			p[n] = (struct sfs_probe){ .ns = m_ns[s], .key = kb[n], .klen = vkey(kb[n], r_v, key) };
			n++;
			if (k < M_NC) {
				snprintf(key, sizeof(key), "c%u", k);
				p[n] = (struct sfs_probe){ .ns = m_ns[s], .key = kb[n],
							   .klen = vkey(kb[n], r_add, key) };
				n++;
				p[n] = (struct sfs_probe){ .ns = m_ns[s], .key = kb[n],
							   .klen = vkey(kb[n], r_max, key) };
				n++;
			}
		}
	}
	if ((rc = T->rd.probe(r, p, n, res))) {
		snprintf(why, wn, "probe %d: %s", rc, sfs_last_error());
		return;
	}
	n = 0;
	for (unsigned s = 0; s < M_NS; s++) {
		for (unsigned k = 0; k < M_NV; k++) {
			const struct mval *v = &m->v[s][k];

			if (res[n].found != v->has ||
			    (v->has && (res[n].len != v->len || memcmp(res[n].value, v->b, v->len)))) {
				snprintf(why, wn, "value v%u in ns %u: %s %.*s, expected %s %.*s", k, s,
					 res[n].found ? "found" : "absent", (int)res[n].len,
					 res[n].found ? (const char *)res[n].value : "",
					 v->has ? "found" : "absent", (int)v->len, v->b);
				return;
			}
			n++;
			if (k >= M_NC)
				continue;
			for (int which = 0; which < 2; which++, n++) {
				int has = which ? m->max_has[s][k] : m->add_has[s][k];
				int64_t want = which ? m->max[s][k] : m->add[s][k], got = 0;

				if (res[n].found && res[n].len == 8)
					memcpy(&got, res[n].value, 8);
				if (res[n].found != has || (has && (res[n].len != 8 || got != want))) {
					snprintf(why, wn, "%s counter c%u in ns %u: %s %lld, expected %s "
						 "%lld", which ? "max" : "add", k, s,
						 res[n].found ? "found" : "absent", (long long)got,
						 has ? "found" : "absent", (long long)want);
					return;
				}
			}
		}
	}
	for (unsigned s = 0; s < M_NS; s++)
		for (unsigned k = 0; k < M_NM; k++) {
			char key[16], want[sizeof(((struct cat *)0)->s)];
			unsigned char pk[32];
			struct sfs_probe pp;
			struct cat got = { .n = 0 };
			size_t wl = 0;

			want[0] = got.s[0] = '\0';
			/* the table's order: u0 < u1 < ... (one digit) */
			for (unsigned u = 0; u < M_NU; u++)
				if (m->m[s][k][u].has)
					wl += (size_t)snprintf(want + wl, sizeof(want) - wl, "u%u=%.*s;", u,
							       (int)m->m[s][k][u].len, m->m[s][k][u].b);
			snprintf(key, sizeof(key), "m%u", k);
			pp = (struct sfs_probe){ .ns = m_ns[s], .key = pk, .klen = pkey(pk, r_map, key) };
			if ((rc = T->rd.map_iter(r, &pp, cat_fn, &got))) {
				snprintf(why, wn, "map_iter %d: %s", rc, sfs_last_error());
				return;
			}
			if (strcmp(got.s, want)) {
				snprintf(why, wn, "map m%u in ns %u: %.400s, expected %.400s", k, s, got.s,
					 want);
				return;
			}
			for (unsigned u = 0; u < M_NU; u++) {
				const struct mval *e = &m->m[s][k][u];
				struct sfs_probe_result g;
				char uk[8];

				snprintf(uk, sizeof(uk), "u%u", u);
				rc = T->rd.map_get(r, &pp, uk, (uint32_t)strlen(uk), &g);
				if (rc < 0 || rc != e->has ||
				    (e->has && (g.len != e->len || memcmp(g.value, e->b, e->len)))) {
					snprintf(why, wn, "map_get m%u/u%u in ns %u: %d, expected %d", k,
						 u, s, rc, e->has);
					return;
				}
			}
		}
}

/*
 * Every counter of the model read through the worker (its buffers, then
 * the store): one sfs_counter_multiget per state over all keys of both
 * namespaces in a shuffled order with repeats (the batch spans chunks of
 * the call), each answer checked against the model and against
 * sfs_counter_get.  "" if equal, else the first difference in @why.
 */
static void model_check_counters(sfs_ctx_t *c, const struct model *m, uint64_t *seed, char *why,
				 size_t wn)
{
	enum { NK = 3 * M_NS * M_NC };
	static char kb[NK][8];
	struct sfs_key ks[NK];
	unsigned ki[NK], si[NK];
	int64_t vals[NK];
	int res[NK];

	why[0] = '\0';
	for (unsigned i = 0; i < NK; i++) {
		si[i] = (unsigned)(th_rand(seed) % M_NS);
		ki[i] = (unsigned)(th_rand(seed) % M_NC);
		snprintf(kb[i], sizeof(kb[i]), "c%u", ki[i]);
		ks[i] = (struct sfs_key){ .ns = m_ns[si[i]], .key = kb[i],
					  .klen = (uint32_t)strlen(kb[i]) };
	}
	for (int which = 0; which < 2; which++) {
		uint32_t st = which ? r_max : r_add;
		int rc = sfs_counter_multiget(c, st, ks, NK, vals, res);

		if (rc) {
			snprintf(why, wn, "counter multiget %d: %s", rc, sfs_last_error());
			return;
		}
		for (unsigned i = 0; i < NK; i++) {
			unsigned s = si[i], k = ki[i];
			int has = which ? m->max_has[s][k] : m->add_has[s][k];
			int64_t want = which ? m->max[s][k] : m->add[s][k], one = -1;
			int r1 = sfs_counter_get(c, st, ks[i].ns, kb[i], ks[i].klen, &one);

			if (res[i] != has || vals[i] != (has ? want : 0) || r1 != res[i] ||
			    one != vals[i]) {
				snprintf(why, wn, "%s counter c%u in ns %u through the worker: multiget "
					 "%d %lld, get %d %lld, expected %d %lld", which ? "max" : "add",
					 k, s, res[i], (long long)vals[i], r1, (long long)one, has,
					 (long long)(has ? want : 0));
				return;
			}
		}
	}
}

/* The prefix rule of every data file in table @sid's directory (*@n of
 * them): 1 when they all carry @rule. */
static int files_carry_rule(uint32_t sid, uint32_t rule, unsigned *n)
{
	char path[512], f[800];
	struct dirent *e;
	DIR *d;
	int ok = 1;

	*n = 0;
	table_dir(path, sizeof(path), seg.hdr->sh_data_dir, sid);
	if (!(d = opendir(path)))
		return 0;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		sfs_df_reader_t *rd;
		struct sfs_df_meta m;

		if (l < 4 || strcmp(e->d_name + l - 4, ".sst"))
			continue;
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		if (sfs_df_reader_open(f, NULL, &rd))
			continue;	/* collected meanwhile */
		sfs_df_reader_meta(rd, &m);
		ok &= m.prefix_rule == rule;
		(*n)++;
		sfs_df_reader_close(rd);
	}
	closedir(d);
	return ok;
}

static uint64_t test_seed(void)
{
	const char *s = getenv("SFS_TEST_SEED");

	if (s && *s)
		return strtoull(s, NULL, 0);
	return (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
}

/*
 * 1600 random operations (20x under SFS_SOAK, for at most 40 s) over a
 * small key space (so maps get cleared and refilled, counters folded many
 * times, files superseded), a barrier and a flush every 40, and every key
 * of the model read back through the target's reader after each flush.
 * The seed (SFS_TEST_SEED to replay) is in every failure message.
 */
static void model_run(const char *knob)
{
	struct sfs_worker_opts o = small_opts();
	static struct model m;
	struct sfs_target_reader *r;
	struct sfs_table_pub *pub;
	uint64_t seed0 = test_seed(), seed = seed0, b = 0, deadline = sfs_now_ns() + 40000000000ull;
	const unsigned ops = 1600 * (unsigned)th_soak(), every = 40;
	struct inproc *p = &live_flusher;
	sfs_ctx_t *c;
	char why[1024];

	if (knob)
		setenv(knob, "0", 1);
	memset(&m, 0, sizeof(m));
	o.flags = SFS_WORKER_NO_CACHE;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &r_v), 0);
	cr_assert_eq(sfs_state_register(c, "add", SFS_STATE_COUNTER, &r_add), 0);
	cr_assert_eq(sfs_state_register_merge(c, "max", SFS_MERGE_MAX, &r_max), 0);
	cr_assert_eq(sfs_state_register(c, "map", SFS_STATE_MAP, &r_map), 0);
	flusher_start();
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	for (unsigned i = 1; i <= ops; i++) {
		model_op(c, &m, &seed);
		if (i % (every / 2) == 0) {
			/* half way: deltas in the active buffer over the store's */
			model_check_counters(c, &m, &seed, why, sizeof(why));
			cr_assert(!why[0], "seed %llu (SFS_TEST_SEED to replay), %s off, op %u: %s",
				  (unsigned long long)seed0, knob ? knob : "nothing", i, why);
		}
		if (i % every)
			continue;
		cr_assert_eq(sfs_barrier(c, ++b), 0, "%s", sfs_last_error());
		inproc_drain(p, c);
		model_check(r, &m, why, sizeof(why));
		cr_assert(!why[0], "seed %llu (SFS_TEST_SEED to replay), %s off, after barrier %llu: %s",
			  (unsigned long long)seed0, knob ? knob : "nothing", (unsigned long long)b,
			  why);
		model_check_counters(c, &m, &seed, why, sizeof(why));
		cr_assert(!why[0], "seed %llu (SFS_TEST_SEED to replay), %s off, after barrier %llu: %s",
			  (unsigned long long)seed0, knob ? knob : "nothing", (unsigned long long)b,
			  why);
		if (sfs_now_ns() > deadline)
			break;	/* a soak stops in time for the suite's timeout */
	}
	pub = pub_of(&seg, 0);
	if (!knob || strcmp(knob, "SFS_TABLE_SHAPING")) {
		/* merges run on the writer's background thread: let it catch up */
		for (int t = 0; t < 3000 && relaxed(&pub->tp_merges) == 0; t++)
			usleep(1000);
		cr_assert_gt(relaxed(&pub->tp_merges), 0, "seed %llu: shaping merges happened",
			     (unsigned long long)seed0);
		/* none of these levels reaches the debt: with no merge budget
		 * every merge may run idle (as root, or with RLIMIT_NICE to
		 * come back), and with the knob off none does; with the
		 * default budget the flush pays for merges at normal priority */
		if (knob && strcmp(knob, "SFS_TABLE_BG_IDLE") == 0)
			cr_assert_eq(relaxed(&pub->tp_merges_idle), 0, "idle priority switched off");
		else if (geteuid() == 0 && relaxed(&pub->tp_merge_budget) == 0)
			cr_assert_gt(relaxed(&pub->tp_merges_idle), 0, "seed %llu: merges ran idle",
				     (unsigned long long)seed0);
		if (relaxed(&pub->tp_merge_budget))
			cr_assert_gt(relaxed(&pub->tp_merge_ns_normal), 0,
				     "seed %llu: the budget paid for merges at normal priority",
				     (unsigned long long)seed0);
	} else {
		cr_assert_eq(relaxed(&pub->tp_merges), 0, "shaping switched off");
	}
	/* a map's files answer for its prefixes (the data commit, the
	 * round's rewrite, the merge all write the prefix filter); a value
	 * table's have none */
	{
		unsigned nmap, nval;

		cr_assert(files_carry_rule(r_map, SFS_TABLE_PFX_MAP, &nmap),
			  "a map table file without the prefix filter");
		cr_assert(files_carry_rule(r_v, 0, &nval), "a value table file with a prefix filter");
		cr_assert(nmap > 0 && nval > 0, "files: %u map, %u value", nmap, nval);
	}
	/* and once more after the background's last word */
	model_check(r, &m, why, sizeof(why));
	cr_assert(!why[0], "seed %llu, %s off, at the end: %s", (unsigned long long)seed0,
		  knob ? knob : "nothing", why);
	cr_assert_eq(relaxed(&pub->tp_errors), 0);
	T->rd.reader_close(r);
	flusher_stop();
	sfs_worker_close(c);
}

Test(tblt, random_operations_read_back_as_the_model_with_every_design_point_on)
{
	model_run(NULL);
}

/* Level 0 as buffer images (store/table/table_l0.c): every buffer absorbed
 * whole at its barrier and converted between buffers by the flusher; the
 * model reads the same once the flusher is idle (every image converted:
 * the readers do not map images yet). */
Test(tblt, random_operations_read_back_as_the_model_with_buffers_absorbed_as_images)
{
	const struct sfs_table_pub *p;

	setenv("SFS_TABLE_L0_IMAGE", "1", 1);
	model_run(NULL);
	p = sfs_table_pub_of(&seg, 0);
	cr_assert_not_null(p);
	cr_assert_gt(p->tp_l0_absorbed, 0, "buffers were absorbed");
	cr_assert_eq(p->tp_l0_converted, p->tp_l0_absorbed, "and every one converted");
}

Test(tblt, random_operations_read_back_as_the_model_with_rounds_in_the_background_only)
{
	model_run("SFS_TABLE_ROUND");
}

Test(tblt, random_operations_read_back_as_the_model_without_the_map_diff)
{
	model_run("SFS_TABLE_MAP_DIFF");
}

Test(tblt, random_operations_read_back_as_the_model_without_shaping_merges)
{
	model_run("SFS_TABLE_SHAPING");
}

Test(tblt, random_operations_read_back_as_the_model_without_the_maintenance_session)
{
	model_run("SFS_TABLE_SESSION");
}

Test(tblt, random_operations_read_back_as_the_model_with_merges_at_normal_priority)
{
	model_run("SFS_TABLE_BG_IDLE");
}

Test(tblt, random_operations_read_back_as_the_model_with_merges_on_idle_time_only)
{
	model_run("SFS_TABLE_MERGE_BUDGET");	/* = 0 */
}

/* ---- 6. corrupt input ---------------------------------------------------------------- */

/* Two flushed barriers of 300 values; the writer closed.  The value
 * table's id in *@sid. */
static void two_flushed_barriers(uint32_t *sid)
{
	struct sfs_worker_opts o = small_opts();
	struct inproc *p = &live_flusher;
	sfs_ctx_t *c;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, sid), 0);
	flusher_start();
	for (uint64_t b = 1; b <= 2; b++) {
		for (int k = 0; k < 300; k += (int)b) {
			char key[16];

			snprintf(key, sizeof(key), "key%d", k);
			cr_assert_eq(sfs_value_put(c, *sid, 0, key, strlen(key), &b, 8), 0);
		}
		cr_assert_eq(sfs_barrier(c, b), 0);
		inproc_drain(p, c);
	}
	flusher_stop();
	sfs_worker_close(c);
}

/* The path of a published data file of @sid (the largest: the first
 * barrier's, partly masked). */
static void a_data_file(uint32_t sid, char *path, size_t n, char *name, size_t nn)
{
	static struct pubset ps;
	char tdir[512];
	off_t best = -1;

	cr_assert_eq(pub_table(pub_of(&seg, 0), sid, &ps), 0);
	cr_assert_gt(ps.n, 0);
	table_dir(tdir, sizeof(tdir), seg.hdr->sh_data_dir, sid);
	for (uint32_t i = 0; i < ps.n; i++) {
		char p[1024];
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", tdir, ps.name[i]);
		cr_assert_eq(stat(p, &st), 0, "%s", p);
		if (st.st_size > best) {
			best = st.st_size;
			snprintf(path, n, "%s", p);
			snprintf(name, nn, "%s", ps.name[i]);
		}
	}
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	unsigned char x;

	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(pread(fd, &x, 1, at), 1);
	x ^= 0x5a;
	cr_assert_eq(pwrite(fd, &x, 1, at), 1);
	close(fd);
}

static off_t size_of(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "%s", path);
	return st.st_size;
}

/* A new writer must refuse the store, naming @name. */
static void open_refused_naming(const char *name)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w = NULL;
	int rc = T->open(&seg, 0, NULL, &cfg, &w);

	cr_assert_lt(rc, 0, "a writer opened a store with a corrupt %s", name);
	cr_assert_null(w);
	cr_assert_not_null(strstr(sfs_last_error(), name), "the error names %s: %s", name,
			   sfs_last_error());
}

Test(tblt, a_truncated_data_file_fails_the_open_naming_the_file)
{
	char path[1024], name[64];
	uint32_t sid;

	two_flushed_barriers(&sid);
	a_data_file(sid, path, sizeof(path), name, sizeof(name));
	cr_assert_eq(truncate(path, size_of(path) - 7), 0);
	open_refused_naming(name);
	cr_assert_eq(truncate(path, 100), 0);
	open_refused_naming(name);
}

Test(tblt, a_flipped_footer_byte_in_a_data_file_fails_the_open_naming_the_file)
{
	char path[1024], name[64];
	uint32_t sid;

	two_flushed_barriers(&sid);
	a_data_file(sid, path, sizeof(path), name, sizeof(name));
	flip_byte(path, size_of(path) - 40);	/* the footer, before the 32-byte trailer */
	open_refused_naming(name);
}

/* A page is checked when first read, not at open: the reader fails
 * naming the file instead of answering from the bad page. */
Test(tblt, a_flipped_page_byte_in_a_data_file_fails_the_read_naming_the_file)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w = NULL;
	struct sfs_target_reader *r;
	static unsigned char kb[300][16];
	struct sfs_probe p[300];
	struct sfs_probe_result res[300];
	char path[1024], name[64];
	uint32_t sid;
	int rc;

	two_flushed_barriers(&sid);
	a_data_file(sid, path, sizeof(path), name, sizeof(name));
	flip_byte(path, 40);	/* key page 0, just past the 32-byte header */
	rc = T->open(&seg, 0, NULL, &cfg, &w);
	if (rc) {
		/* refusing at open is as good */
		cr_assert_not_null(strstr(sfs_last_error(), name), "%s", sfs_last_error());
		return;
	}
	writer_close(w);
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	for (int k = 0; k < 300; k++) {
		char key[16];

		snprintf(key, sizeof(key), "key%d", k);
		p[k] = (struct sfs_probe){ .ns = 0, .key = kb[k], .klen = vkey(kb[k], sid, key) };
	}
	rc = T->rd.probe(r, p, 300, res);
	cr_assert_lt(rc, 0, "a probe over a corrupt page answered");
	cr_assert_not_null(strstr(sfs_last_error(), name), "the error names %s: %s", name,
			   sfs_last_error());
	T->rd.reader_close(r);
}

Test(tblt, a_corrupt_snapshot_file_fails_the_open_naming_it)
{
	char tdir[512], path[1024], name[256] = "";
	unsigned long long best = 0;
	struct dirent *e;
	uint32_t sid;
	DIR *d;

	two_flushed_barriers(&sid);
	table_dir(tdir, sizeof(tdir), seg.hdr->sh_data_dir, sid);
	cr_assert_not_null(d = opendir(tdir));
	while ((e = readdir(d))) {
		unsigned long long id;
		char extra;

		if (sscanf(e->d_name, "snapshot-%llu%c", &id, &extra) == 1 && id > best) {
			best = id;
			snprintf(name, sizeof(name), "%s", e->d_name);
		}
	}
	closedir(d);
	cr_assert_gt(best, 0, "a snapshot in %s", tdir);
	snprintf(path, sizeof(path), "%s/%s", tdir, name);
	flip_byte(path, size_of(path) / 2);
	open_refused_naming(name);
}

/* ---- 7. a restore ------------------------------------------------------------------------ */

static uint32_t q_v, q_c, q_m, q_l;

static void register_restore_states(sfs_ctx_t *c)
{
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &q_v), 0);
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &q_c), 0);
	cr_assert_eq(sfs_state_register(c, "m", SFS_STATE_MAP, &q_m), 0);
	cr_assert_eq(sfs_state_register(c, "l", SFS_STATE_LIST, &q_l), 0);
}

/* Everything the restore test wrote, as one string read through a reader
 * of @s's worker 0. */
static void store_image(struct sfs_seg *s, char *out, size_t n)
{
	struct sfs_target_reader *r;
	size_t l = 0;

	cr_assert_eq(T->rd.reader_open(s, 0, &r), 0);
	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	for (int k = 0; k < 60; k++) {
		unsigned char kb[32];
		char key[16];
		struct sfs_probe p[2];
		struct sfs_probe_result res[2];

		snprintf(key, sizeof(key), "k%d", k);
		p[0] = (struct sfs_probe){ .ns = 0, .key = kb, .klen = vkey(kb, q_v, key) };
		cr_assert_eq(T->rd.probe(r, p, 1, res), 0, "%s", sfs_last_error());
		l += (size_t)snprintf(out + l, n - l, "v%s=%.*s;", key, res[0].found ? (int)res[0].len : 1,
				      res[0].found ? (const char *)res[0].value : "-");
		p[1] = (struct sfs_probe){ .ns = 0, .key = kb, .klen = vkey(kb, q_c, key) };
		cr_assert_eq(T->rd.probe(r, &p[1], 1, &res[1]), 0, "%s", sfs_last_error());
		if (res[1].found)
			l += (size_t)snprintf(out + l, n - l, "c%s=%lld;", key,
					      (long long)*(const int64_t *)res[1].value);
	}
	for (int k = 0; k < 4; k++) {
		unsigned char pk[32];
		char key[16];
		struct sfs_probe pp;
		struct cat cm = { .n = 0 }, cl = { .n = 0 };

		cm.s[0] = cl.s[0] = '\0';
		snprintf(key, sizeof(key), "m%d", k);
		pp = (struct sfs_probe){ .ns = 0, .key = pk, .klen = pkey(pk, q_m, key) };
		cr_assert_eq(T->rd.map_iter(r, &pp, cat_fn, &cm), 0);
		pp = (struct sfs_probe){ .ns = 0, .key = pk, .klen = pkey(pk, q_l, key) };
		cr_assert_eq(T->rd.map_iter(r, &pp, cat_vals, &cl), 0);
		l += (size_t)snprintf(out + l, n - l, "m%s{%s}l{%s}", key, cm.s, cl.s);
	}
	cr_assert_lt(l, n - 1, "the image fits");
	T->rd.reader_close(r);
}

static int exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/*
 * A snapshot of the live flusher's writer staged in a directory; a new
 * segment (another group: its store would be wiped) gets the staged files
 * and TABLES in <data>/w0/; its writer adopts them (a corrupt TABLES is
 * refused by name first); reads equal the original's, and the restored
 * tables take further commits (a counter keeps counting).
 */
Test(tblt, a_snapshot_restored_into_a_new_segment_reads_the_same_and_keeps_counting)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_wbuf_view v[1];
	struct mview mv[1];
	static char before[16384], after[16384];
	char stage[256], store2[256], cmd[2048], path[512];
	struct sfs_seg seg2;
	struct inproc *p = &live_flusher;
	sfs_ctx_t *c, *c2;
	int64_t n, k7;
	uint64_t tag;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	register_restore_states(c);
	flusher_start();
	for (uint64_t b = 1; b <= 6; b++) {
		for (int k = 0; k < 60; k += (int)b) {
			char key[16], val[16];

			snprintf(key, sizeof(key), "k%d", k);
			snprintf(val, sizeof(val), "b%llu", (unsigned long long)b);
			put(c, q_v, 0, key, val);
			add(c, q_c, 0, key, k + 1);
		}
		if (b == 4)
			cr_assert_eq(sfs_value_delete(c, q_v, 0, "k8", 2), 0);
		for (int k = 0; k < 4; k++) {
			char key[16], uk[16];

			snprintf(key, sizeof(key), "m%d", k);
			snprintf(uk, sizeof(uk), "u%llu", (unsigned long long)b);
			if (b == 5 && k == 1)
				cr_assert_eq(sfs_map_clear(c, q_m, 0, key, strlen(key)), 0);
			mput(c, q_m, 0, key, uk, "x");
			cr_assert_eq(sfs_list_append(c, q_l, 0, key, strlen(key), uk, strlen(uk)), 0);
		}
		cr_assert_eq(sfs_barrier(c, b), 0);
		inproc_drain(p, c);
	}
	store_image(&seg, before, sizeof(before));
	cr_assert_not_null(strstr(before, "vk8=-;"), "k8 deleted: %s", before);

	/* the checkpoint's stage: through the flusher's own writer, live */
	snprintf(stage, sizeof(stage), "%s/stage", dir);
	cr_assert_eq(p->f.ops->snapshot(p->f.w[0].tw, stage), 0, "%s", sfs_last_error());
	snprintf(path, sizeof(path), "%s/TABLES", stage);
	cr_assert(exists(path), "the stage has TABLES");
	flusher_stop();
	sfs_worker_close(c);

	/* a new group: its own segment, the same state registry */
	th_job(job2, sizeof(job2), "tblt2");
	cr_assert_eq(sfs_seg_create(job2, 0, (size_t)SEG_MB << 20, 1, &seg2), 0, "%s",
		     sfs_last_error());
	snprintf(seg2.hdr->sh_backend, sizeof(seg2.hdr->sh_backend), "table");
	snprintf(store2, sizeof(store2), "%s/store2", dir);
	snprintf(seg2.hdr->sh_data_dir, sizeof(seg2.hdr->sh_data_dir), "%s", store2);
	cr_assert_eq(sfs_worker_open(job2, 0, 0, &o, &c2), 0, "%s", sfs_last_error());
	{
		uint32_t ids[4] = { q_v, q_c, q_m, q_l };

		register_restore_states(c2);
		cr_assert(ids[0] == q_v && ids[1] == q_c && ids[2] == q_m && ids[3] == q_l,
			  "the same state ids in the new segment");
	}
	/* as a restore puts a checkpoint back: the stage's shared/ flat beside TABLES */
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s/w0' && cp -a '%s/.' '%s/w0/' && mv '%s/w0/shared/'* '%s/w0/' && "
		 "rmdir '%s/w0/shared'", store2, stage, store2, store2, store2, store2);
	cr_assert_eq(system(cmd), 0, "%s", cmd);

	/* a corrupt TABLES first: refused by name, nothing adopted */
	snprintf(path, sizeof(path), "%s/w0/TABLES", store2);
	flip_byte(path, size_of(path) - 12);
	cr_assert_lt(writer_open(&seg2, NULL, &w), 0, "a corrupt TABLES adopted");
	cr_assert_not_null(strstr(sfs_last_error(), "TABLES"), "%s", sfs_last_error());
	snprintf(cmd, sizeof(cmd), "cp '%s/TABLES' '%s/w0/TABLES'", stage, store2);
	cr_assert_eq(system(cmd), 0, "%s", cmd);

	cr_assert_eq(writer_open(&seg2, NULL, &w), 0, "adopt: %s", sfs_last_error());
	cr_assert(!exists(path), "TABLES is consumed by the adoption");
	snprintf(path, sizeof(path), "%s/w0/IDENTITY", store2);
	cr_assert(exists(path), "the adopted store is the new group's");
	store_image(&seg2, after, sizeof(after));
	cr_assert_str_eq(after, before);

	/* the restored tables take commits: a counter keeps counting */
	cr_assert_eq(T->rd.reader_open(&seg2, 0, &r), 0);
	cr_assert_eq(probe_i64(r, q_c, 0, "k7", &k7, NULL), 1);
	merge_view(&v[0], &mv[0], q_c, "k7", 1000);
	cr_assert_eq(T->apply(w, v, 1, 1), 0, "%s", sfs_last_error());
	commit(w, 1);
	cr_assert_eq(T->rd.catch_up(r), 0);
	cr_assert_eq(probe_i64(r, q_c, 0, "k7", &n, &tag), 1);
	cr_assert_eq(n, k7 + 1000, "k7 = %lld, expected %lld", (long long)n, (long long)k7 + 1000);
	T->rd.reader_close(r);
	writer_close(w);

	/* and a worker of the new group reads them too */
	sfs_ctx_quiescent(c2);
	cr_assert_eq(sfs_counter_get(c2, q_c, 0, "k7", 2, &n), 1);
	cr_assert_eq(n, k7 + 1000);
	sfs_worker_close(c2);
	sfs_seg_detach(&seg2);
}

/* ---- 9. state TTL: expired rows dropped in rounds and merges ---------------------- */

/*
 * The writer is driven through its ops, as the compactor does: ttl() with
 * the registry's rules (as compactor/flush.c ttl_rules builds them) and a
 * processing clock, then apply and commit.  Rows are counted in the
 * published files themselves, deletion vectors ignored: what is physically
 * there.  A TTL value is [expiry ms][user bytes] (common/ttl.h); the user
 * bytes start with a letter the counts look at.
 */
#define TTL_SOON 100ull             /* expiry of rows that expire (ms) */
#define TTL_NEVER 1000000000ull     /* ... of rows that stay live */
#define TTL_BEFORE 50ull            /* a clock at which nothing has expired */
#define TTL_AFTER 200ull            /* one past TTL_SOON */

static void tell_ttl(struct sfs_target_writer *w, uint64_t proc_ms)
{
	static struct sfs_ttl_rule rules[SFS_MAX_STATES];
	struct sfs_ttl_clock clk = { .proc_ms = proc_ms, .event_ms = 0 };

	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *sd = &seg.hdr->sh_states[i];
		int ready = sfs_load_acquire(&sd->sd_state) == SFS_SDESC_READY;

		rules[i].ttl_ms = ready ? sd->sd_ttl_ms : 0;
		rules[i].event_time = ready && (sd->sd_ttl_flags & SFS_TTL_EVENT_TIME);
	}
	T->ttl(w, rules, &clk);
	memset(rules, 0xa5, sizeof(rules));	/* the rules live for the call only */
}

struct tview {
	unsigned char key[32];
	unsigned char val[32];
};

/* A put of value key @k of @sid: [@expiry][@user] when @expiry, else
 * @user alone (a state without a TTL). */
static void ttl_put(struct sfs_wbuf_view *v, struct tview *tv, uint32_t sid, const char *k,
		    uint64_t expiry, const char *user)
{
	uint32_t n = 0;

	if (expiry) {
		memcpy(tv->val, &expiry, 8);
		n = 8;
	}
	memcpy(tv->val + n, user, strlen(user));
	n += (uint32_t)strlen(user);
	*v = (struct sfs_wbuf_view){ .value = tv->val, .key = tv->key, .len = n,
				     .klen = vkey(tv->key, sid, k), .kind = SFS_WBUF_PUT };
}

/* Rows physically in @sid's published files (vectors ignored): *@n in
 * all, *@first those whose user bytes (after @skip bytes) start with
 * @first_c.  0, or -1 when a file went meanwhile (call again). */
static int phys_rows(uint32_t sid, uint32_t skip, char first_c, uint64_t *n, uint64_t *first)
{
	static struct pubset ps;
	char path[512], f[800];

	*n = *first = 0;
	cr_assert_eq(pub_table(pub_of(&seg, 0), sid, &ps), 0);
	table_dir(path, sizeof(path), seg.hdr->sh_data_dir, sid);
	for (uint32_t i = 0; i < ps.n; i++) {
		sfs_df_reader_t *rd;
		sfs_df_iter_t *it;
		struct sfs_df_row row;
		int rc;

		snprintf(f, sizeof(f), "%s/%s", path, ps.name[i]);
		if (sfs_df_reader_open(f, NULL, &rd))
			return -1;	/* collected after a newer publication */
		cr_assert_eq(sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it), 0);
		while ((rc = sfs_df_iter_next(it, &row)) == 1) {
			(*n)++;
			*first += row.vlen > skip && ((const char *)row.val)[skip] == first_c;
		}
		cr_assert_eq(rc, 0, "%s", sfs_last_error());
		sfs_df_iter_close(it);
		sfs_df_reader_close(rd);
	}
	return 0;
}

static void phys_count(uint32_t sid, uint32_t skip, char first_c, uint64_t *n, uint64_t *first)
{
	int i = 0;

	while (phys_rows(sid, skip, first_c, n, first) && i++ < 1000)
		usleep(1000);
}

/* Wait until table @sid is one level-2 file (the shaping merge of its
 * four level-1 files committed and published). */
static void wait_merged(uint32_t sid)
{
	const struct sfs_table_pub *p = pub_of(&seg, 0);
	int ok = 0;

	for (int t = 0; t < 10000 && !ok; t++) {
		ok = published_at_level(p, sid, 2) && !published_at_level(p, sid, 1) &&
		     !published_level0(p, sid);
		if (!ok)
			usleep(1000);
	}
	cr_assert(ok, "table %u: its four level-1 files merged into one level-2 file", sid);
}

/* 1 when value key @k of @sid reads user bytes @user (after @skip bytes;
 * NULL: absent). */
static int reads_user(struct sfs_target_reader *r, uint32_t sid, const char *k, uint32_t skip,
		      const char *user)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = 0, .key = kb, .klen = vkey(kb, sid, k) };
	struct sfs_probe_result res;

	cr_assert_eq(T->rd.catch_up(r), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.probe(r, &p, 1, &res), 0, "%s", sfs_last_error());
	if (!user)
		return !res.found;
	return res.found && res.len == skip + strlen(user) &&
	       memcmp((const char *)res.value + skip, user, strlen(user)) == 0;
}

/*
 * Ten rows per buffer over four buffers, half of them expiring at
 * TTL_SOON; the clock passes it before the fourth.  Its round drops its
 * own expired rows (rewriting the file instead of relabelling it), and the
 * shaping merge of the four level-1 files drops the other three buffers':
 * the one level-2 file holds exactly the live rows, which still read.
 */
static void expired_rows_vanish(const char *knob)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[10];
	struct tview tv[10];
	struct sfs_ttl ttl = { .ttl_ms = 1000 };
	uint64_t n, live, dropped0;
	uint32_t sid;
	sfs_ctx_t *c;

	if (knob)
		setenv(knob, "0", 1);
	setenv("SFS_TABLE_BG_IDLE", "0", 1);	/* merges at once, even on a busy machine */
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &ttl, &sid), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(seg.hdr->sh_states[sid].sd_ttl_ms, 1000u);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	dropped0 = relaxed(&pub_of(&seg, 0)->tp_ttl_dropped);
	for (uint64_t b = 1; b <= 4; b++) {
		for (int i = 0; i < 10; i++) {
			char k[16], u[16];

			snprintf(k, sizeof(k), "k%llu-%d", (unsigned long long)b, i);
			snprintf(u, sizeof(u), "%s%llu-%d", i % 2 ? "L" : "D",
				 (unsigned long long)b, i);
			ttl_put(&v[i], &tv[i], sid, k, i % 2 ? TTL_NEVER : TTL_SOON, u);
		}
		tell_ttl(w, b < 4 ? TTL_BEFORE : TTL_AFTER);
		flush_seq(w, v, 10, b);
	}
	wait_merged(sid);
	phys_count(sid, 8, 'L', &n, &live);
	cr_assert_eq(live, 20, "the live rows stay: %llu", (unsigned long long)live);
	cr_assert_eq(n, 20, "the expired rows are gone from the files: %llu rows, %llu live",
		     (unsigned long long)n, (unsigned long long)live);
	cr_assert_eq(relaxed(&pub_of(&seg, 0)->tp_ttl_dropped) - dropped0, 20,
		     "counted as dropped: %llu",
		     (unsigned long long)(relaxed(&pub_of(&seg, 0)->tp_ttl_dropped) - dropped0));
	for (int b = 1; b <= 4; b++)
		for (int i = 0; i < 10; i++) {
			char k[32], u[32];	/* room for any int: -O1 checks it */

			snprintf(k, sizeof(k), "k%d-%d", b, i);
			snprintf(u, sizeof(u), "L%d-%d", b, i);
			cr_assert(reads_user(r, sid, k, 8, i % 2 ? u : NULL), "%s", k);
		}
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

Test(tblt, expired_ttl_rows_are_dropped_by_the_round_and_the_shaping_merge)
{
	expired_rows_vanish(NULL);
}

/* Rounds in the background: without the staged rows, the round looks for
 * expired rows in the level-0 file itself. */
Test(tblt, expired_ttl_rows_are_dropped_with_rounds_in_the_background_only)
{
	expired_rows_vanish("SFS_TABLE_ROUND");
}

/*
 * A newer put that has expired by the round, over an older version live
 * in level 1: the round drops the newer one as a tombstone — it masks the
 * older one — so a reader finds the key absent, never the older version.
 * After the shaping merge neither is in any file.
 */
Test(tblt, an_expired_put_over_an_older_version_shadows_it_then_both_go)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[2];
	struct tview tv[2];
	struct sfs_ttl ttl = { .ttl_ms = 1000 };
	uint64_t n, olds, news;
	uint32_t sid;
	sfs_ctx_t *c;

	setenv("SFS_TABLE_BG_IDLE", "0", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &ttl, &sid), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);

	tell_ttl(w, TTL_BEFORE);
	ttl_put(&v[0], &tv[0], sid, "a1", TTL_NEVER, "filler");
	ttl_put(&v[1], &tv[1], sid, "k", TTL_NEVER, "Old");
	flush_seq(w, v, 2, 1);
	cr_assert(reads_user(r, sid, "k", 8, "Old"));
	cr_assert(published_at_level(pub_of(&seg, 0), sid, 1), "the older version is in level 1");

	tell_ttl(w, TTL_AFTER);
	ttl_put(&v[0], &tv[0], sid, "a2", TTL_NEVER, "filler");
	ttl_put(&v[1], &tv[1], sid, "k", TTL_SOON, "New");	/* expired when it arrives */
	flush_seq(w, v, 2, 2);
	cr_assert(reads_user(r, sid, "k", 8, NULL), "the older version does not resurface");
	phys_count(sid, 8, 'N', &n, &news);
	cr_assert_eq(news, 0, "the expired put is not written below level 0");
	phys_count(sid, 8, 'O', &n, &olds);
	cr_assert_eq(olds, 1, "the older version is masked, not rewritten, until a merge");

	for (uint64_t b = 3; b <= 4; b++) {
		char k[8];

		snprintf(k, sizeof(k), "a%llu", (unsigned long long)b);
		ttl_put(&v[0], &tv[0], sid, k, TTL_NEVER, "filler");
		tell_ttl(w, TTL_AFTER);
		flush_seq(w, v, 1, b);
	}
	wait_merged(sid);
	cr_assert(reads_user(r, sid, "k", 8, NULL), "still absent after the merge");
	phys_count(sid, 8, 'O', &n, &olds);
	phys_count(sid, 8, 'N', &n, &news);
	cr_assert(olds == 0 && news == 0 && n == 4, "after the merge neither version is in a "
		  "file: %llu old, %llu new, %llu rows", (unsigned long long)olds,
		  (unsigned long long)news, (unsigned long long)n);
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * A state without a TTL beside a TTL state, the clock far past: its values
 * look expired to the TTL rule (an all-zero first 8 bytes, or shorter than
 * an expiry) and are still never dropped, by the round or the merge.
 */
Test(tblt, rows_of_a_state_without_a_ttl_are_never_dropped)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[6];
	struct tview tv[6];
	struct sfs_ttl ttl = { .ttl_ms = 1000 };
	uint64_t n, zero, dropped0;
	uint32_t sid, sttl;
	sfs_ctx_t *c;

	setenv("SFS_TABLE_BG_IDLE", "0", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &ttl, &sttl), 0);
	cr_assert_eq(sfs_state_register(c, "plain", SFS_STATE_VALUE, &sid), 0);
	cr_assert_eq(seg.hdr->sh_states[sid].sd_ttl_ms, 0u);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	dropped0 = relaxed(&pub_of(&seg, 0)->tp_ttl_dropped);
	for (uint64_t b = 1; b <= 4; b++) {
		for (int i = 0; i < 4; i++) {
			char k[16];
			uint64_t zero8 = 0;

			snprintf(k, sizeof(k), "p%llu-%d", (unsigned long long)b, i);
			if (i % 2) {
				ttl_put(&v[i], &tv[i], sid, k, 0, "ab");	/* short */
			} else {
				ttl_put(&v[i], &tv[i], sid, k, 0, "zzzzzzzzZ");
				memcpy(tv[i].val, &zero8, 8);	/* "expiry" 0, then 'Z' */
			}
		}
		/* and an expired row of the TTL state in the same buffers */
		ttl_put(&v[4], &tv[4], sttl, "t", TTL_SOON, "D");
		tell_ttl(w, TTL_AFTER * 1000);
		flush_seq(w, v, 5, b);
	}
	wait_merged(sid);
	phys_count(sid, 8, 'Z', &n, &zero);
	cr_assert(n == 16 && zero == 8, "every row of the state without a TTL stays: %llu rows "
		  "(%llu with a zero prefix)", (unsigned long long)n, (unsigned long long)zero);
	for (int b = 1; b <= 4; b++)
		for (int i = 0; i < 4; i++) {
			char k[32];	/* room for any int: -O1 checks it */

			snprintf(k, sizeof(k), "p%d-%d", b, i);
			cr_assert(reads_user(r, sid, k, i % 2 ? 0 : 8, i % 2 ? "ab" : "Z"), "%s", k);
		}
	cr_assert_eq(relaxed(&pub_of(&seg, 0)->tp_ttl_dropped) - dropped0, 4,
		     "only the TTL state's four expired rows are counted");
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

struct live_ents {
	unsigned n, live;
};

static int count_ents(void *arg, const void *uk, uint32_t ul, const void *v, uint32_t vl)
{
	struct live_ents *e = arg;

	(void)uk;
	(void)ul;
	e->n++;
	e->live += vl > 8 && ((const char *)v)[8] == 'L';
	return 0;
}

/*
 * A TTL map: the table holds each entry as map_run hands it over (the
 * link header stripped: [expiry][user]), and drops the expired ones as it
 * does values — the merged file holds the live entries only, and the map
 * reads them.
 */
Test(tblt, expired_entries_of_a_ttl_map_are_dropped_by_the_shaping_merge)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[8];
	unsigned char kb[8][48], vb[8][48];
	struct sfs_ttl ttl = { .ttl_ms = 1000 };
	unsigned char pk[64];
	struct sfs_probe parent;
	struct live_ents e = { 0, 0 };
	uint64_t n, live;
	uint32_t sid;
	sfs_ctx_t *c;

	setenv("SFS_TABLE_BG_IDLE", "0", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tm", SFS_STATE_MAP, &ttl, &sid), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	for (uint64_t b = 1; b <= 4; b++) {
		for (int i = 0; i < 8; i++) {
			struct sfs_map_ent me = { 0, 0 };
			uint64_t expiry = i % 2 ? TTL_NEVER : TTL_SOON;
			uint32_t kl = pkey(kb[i], sid, "m");
			int ul = snprintf((char *)kb[i] + kl, 16, "e%llu-%d", (unsigned long long)b, i);

			memcpy(vb[i], &me, sizeof(me));
			memcpy(vb[i] + sizeof(me), &expiry, 8);
			vb[i][sizeof(me) + 8] = i % 2 ? 'L' : 'D';
			v[i] = (struct sfs_wbuf_view){ .value = vb[i], .key = kb[i],
						       .len = (uint32_t)sizeof(me) + 9,
						       .klen = kl + (uint32_t)ul, .kind = SFS_WBUF_PUT,
						       .off = (uint64_t)i };
		}
		tell_ttl(w, b < 4 ? TTL_BEFORE : TTL_AFTER);
		cr_assert_eq(T->apply(w, v, 8, b), 0, "%s", sfs_last_error());
		commit(w, b);
	}
	wait_merged(sid);
	phys_count(sid, 8, 'L', &n, &live);
	cr_assert(n == 16 && live == 16, "the merged file holds the live entries only: %llu rows, "
		  "%llu live", (unsigned long long)n, (unsigned long long)live);
	parent = (struct sfs_probe){ .ns = 0, .key = pk, .klen = pkey(pk, sid, "m") };
	cr_assert_eq(T->rd.catch_up(r), 0);
	cr_assert_eq(T->rd.map_iter(r, &parent, count_ents, &e), 0, "%s", sfs_last_error());
	cr_assert(e.n == 16 && e.live == 16, "the map reads %u entries, %u live", e.n, e.live);
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/* ---- 10. rollback in place (store/target.h: pin, rollback) --------------------------- */

/* Stage the flusher's writer as checkpoint @id (the compactor's stage
 * path: its last component names the checkpoint). */
static void stage_as(struct inproc *p, uint64_t id, char *out, size_t n)
{
	char buf[256];

	if (!out) {
		out = buf;
		n = sizeof(buf);
	}
	snprintf(out, n, "%s/stage/w0/b%llu", dir, (unsigned long long)id);
	cr_assert_eq(p->f.ops->snapshot(p->f.w[0].tw, out), 0, "%s", sfs_last_error());
}

/* 1 if table @sid's directory holds file @name. */
static int in_table_dir(uint32_t sid, const char *name)
{
	char path[640], d[320];

	table_dir(d, sizeof(d), seg.hdr->sh_data_dir, sid);
	snprintf(path, sizeof(path), "%s/%s", d, name);
	return exists(path);
}

/* 1 if @name is published for table @sid. */
static int is_published(uint32_t sid, const char *name)
{
	static struct pubset ps;

	cr_assert_eq(pub_table(pub_of(&seg, 0), sid, &ps), 0);
	for (uint32_t i = 0; i < ps.n; i++)
		if (strcmp(ps.name[i], name) == 0)
			return 1;
	return strcmp(ps.dvi, name) == 0;
}

/* Wait until no shaping merge has run for 300 ms (none is due any more). */
static void merges_settle(sfs_ctx_t *c)
{
	uint64_t last = relaxed(&pub_of(&seg, 0)->tp_merges);

	for (int quiet = 0, t = 0; quiet < 300 && t < 20000; t++) {
		uint64_t now = relaxed(&pub_of(&seg, 0)->tp_merges);

		quiet = now == last ? quiet + 1 : 0;
		last = now;
		sfs_ctx_quiescent(c);
		usleep(1000);
	}
}

/* 1 if every file of the version staged in TABLES @s is in its table
 * directory; *@gone_from_pub: how many of its data files are no longer
 * published (merged away, or wholly superseded). */
static int pinned_files_exist(const struct sfs_tsnap *s, unsigned *gone_from_pub)
{
	int ok = 1;

	*gone_from_pub = 0;
	for (uint32_t i = 0; i < s->ntables; i++) {
		const struct sfs_tsnap_table *st = &s->tables[i];

		for (uint32_t f = 0; f < st->nfiles; f++) {
			ok &= in_table_dir(st->sid, st->files[f].name);
			*gone_from_pub += !is_published(st->sid, st->files[f].name);
		}
		if (st->dvi[0])
			ok &= in_table_dir(st->sid, st->dvi);
	}
	return ok;
}

/*
 * The randomized model of section 5 with a checkpoint staged at every
 * barrier: one of them (random) is pinned two barriers after it (when its
 * checkpoint would complete), then barriers go on until shaping merges
 * have taken pinned files out of the live set — which must survive in the
 * table directories — then a rollback.  Every key then reads as the model
 * did at the pinned barrier, through a reader that had caught up to the
 * newer versions and through a new one; the returned seq is the pinned
 * version's; more barriers apply on top of it; and once the next pin no
 * longer needs the abandoned and parked files, they are all unlinked.
 */
Test(tblt, a_rollback_returns_every_key_to_the_pinned_barrier_and_goes_on_from_there)
{
	struct sfs_worker_opts o = small_opts();
	static struct model m, pm;
	struct sfs_target_reader *r, *r2;
	struct inproc *p = &live_flusher;
	uint64_t seed0 = test_seed(), seed = seed0, b = 0, pin_b, pin_seq = 0, seq = 0;
	uint64_t merges_at_pin = 0;
	const unsigned every = 40;
	char why[1024], stage[256], pstage[256], path[512];
	struct sfs_tsnap ts;
	unsigned gone = 0;
	sfs_ctx_t *c;

	memset(&m, 0, sizeof(m));
	o.flags = SFS_WORKER_NO_CACHE;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &r_v), 0);
	cr_assert_eq(sfs_state_register(c, "add", SFS_STATE_COUNTER, &r_add), 0);
	cr_assert_eq(sfs_state_register_merge(c, "max", SFS_MERGE_MAX, &r_max), 0);
	cr_assert_eq(sfs_state_register(c, "map", SFS_STATE_MAP, &r_map), 0);
	flusher_start();
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	pin_b = 4 + th_rand(&seed) % 8;
	/* before the pin, then until merges took pinned files (at most 60) */
	while (b < pin_b + 4 ||
	       (b < 80 && (gone == 0 || relaxed(&pub_of(&seg, 0)->tp_merges) == merges_at_pin))) {
		for (unsigned i = 0; i < every; i++)
			model_op(c, &m, &seed);
		cr_assert_eq(sfs_barrier(c, ++b), 0, "%s", sfs_last_error());
		inproc_drain(p, c);
		stage_as(p, b, stage, sizeof(stage));
		if (b == pin_b) {
			pm = m;
			pin_seq = sfs_load_acquire(&pub_of(&seg, 0)->tp_applied);
			snprintf(pstage, sizeof(pstage), "%s", stage);
		}
		if (b == pin_b + 2) {
			cr_assert_eq(T->pin(p->f.w[0].tw, pin_b), 0, "%s", sfs_last_error());
			merges_at_pin = relaxed(&pub_of(&seg, 0)->tp_merges);
			snprintf(path, sizeof(path), "%s/TABLES", pstage);
			cr_assert_eq(sfs_tsnap_read(path, &ts), 0, "%s", sfs_last_error());
		}
		model_check(r, &m, why, sizeof(why));
		cr_assert(!why[0], "seed %llu, barrier %llu: %s", (unsigned long long)seed0,
			  (unsigned long long)b, why);
		if (b > pin_b + 2) {
			/* a grace period or two: whatever is unlinked is gone now */
			for (int t = 0; t < 50; t++) {
				sfs_ctx_quiescent(c);
				usleep(1000);
			}
			cr_assert(pinned_files_exist(&ts, &gone), "seed %llu, barrier %llu: a file "
				  "of the pinned version was unlinked", (unsigned long long)seed0,
				  (unsigned long long)b);
		}
	}
	cr_assert_gt(gone, 0, "seed %llu: pinned files left the live set (%llu merges since "
		     "the pin)", (unsigned long long)seed0,
		     (unsigned long long)(relaxed(&pub_of(&seg, 0)->tp_merges) - merges_at_pin));
	cr_assert_gt(relaxed(&pub_of(&seg, 0)->tp_merges), merges_at_pin,
		     "shaping merges ran after the pin");

	/* the rollback, the reader that saw newer versions, and a new one */
	cr_assert_eq(T->rollback(p->f.w[0].tw, &seq), 0, "%s", sfs_last_error());
	cr_assert_eq(seq, pin_seq, "rollback returned seq %llu, the pinned version's is %llu",
		     (unsigned long long)seq, (unsigned long long)pin_seq);
	cr_assert_eq(sfs_load_acquire(&pub_of(&seg, 0)->tp_applied), pin_seq);
	model_check(r, &pm, why, sizeof(why));
	cr_assert(!why[0], "seed %llu, pinned barrier %llu, a reader that caught up before: %s",
		  (unsigned long long)seed0, (unsigned long long)pin_b, why);
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r2), 0);
	model_check(r2, &pm, why, sizeof(why));
	cr_assert(!why[0], "seed %llu, pinned barrier %llu, a new reader: %s",
		  (unsigned long long)seed0, (unsigned long long)pin_b, why);
	/* later buffers apply on top of the pinned version */
	m = pm;
	for (unsigned k = 0; k < 8; k++) {
		for (unsigned i = 0; i < every; i++)
			model_op(c, &m, &seed);
		cr_assert_eq(sfs_barrier(c, ++b), 0, "%s", sfs_last_error());
		inproc_drain(p, c);
		model_check(r, &m, why, sizeof(why));
		cr_assert(!why[0], "seed %llu, barrier %llu after the rollback: %s",
			  (unsigned long long)seed0, (unsigned long long)b, why);
		model_check(r2, &m, why, sizeof(why));
		cr_assert(!why[0], "seed %llu, barrier %llu after the rollback, new reader: %s",
			  (unsigned long long)seed0, (unsigned long long)b, why);
	}

	/* the next pin: nothing but the live files stays (a merge starved at
	 * idle priority may still park the files of the pinned version: the
	 * checkpoint after it releases them; and a file's grace period starts
	 * at a publication: an empty barrier's) */
	merges_settle(c);
	for (int tries = 0, ok = 0; !ok; tries++) {
		char w2[512] = "";

		cr_assert_eq(sfs_barrier(c, ++b), 0, "%s", sfs_last_error());
		inproc_drain(p, c);
		stage_as(p, b, NULL, 0);
		cr_assert_eq(T->pin(p->f.w[0].tw, b), 0, "%s", sfs_last_error());
		for (int t = 0; t < 500 && !ok; t++) {
			sfs_ctx_quiescent(c);
			ok = dir_matches_pub(pub_of(&seg, 0), r_v, w2, sizeof(w2)) &&
			     dir_matches_pub(pub_of(&seg, 0), r_add, w2, sizeof(w2)) &&
			     dir_matches_pub(pub_of(&seg, 0), r_max, w2, sizeof(w2)) &&
			     dir_matches_pub(pub_of(&seg, 0), r_map, w2, sizeof(w2));
			if (!ok)
				usleep(1000);
		}
		cr_assert(ok || tries < 20, "seed %llu: after %d pins: %s",
			  (unsigned long long)seed0, tries + 1, w2);
	}
	cr_assert_eq(relaxed(&pub_of(&seg, 0)->tp_errors), 0);
	sfs_tsnap_free(&ts);
	T->rd.reader_close(r);
	T->rd.reader_close(r2);
	flusher_stop();
	sfs_worker_close(c);
}

/*
 * The contract's edges on a writer driven by hand: -ENOENT with nothing
 * pinned, for a checkpoint this writer never staged (which also drops
 * the previous pin), and for pin(0) once something was applied; pin(0)
 * right after open returns to the version at open; the rollback's
 * watermark makes a redone seq up to it a no-op and a later seq apply
 * (even one the abandoned version had applied); a table first written
 * after the pin comes back empty; and a second rollback returns to the
 * same version.
 */
Test(tblt, pin_and_rollback_keep_the_contract_at_its_edges)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[2];
	struct mview mv[2];
	uint32_t sc, sc2;
	uint64_t seq = 99;
	sfs_ctx_t *c;
	int64_t n;
	char stage[256];

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_state_register(c, "late", SFS_STATE_COUNTER, &sc2), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);

	cr_assert_eq(T->rollback(w, &seq), -ENOENT, "rollback with nothing pinned");
	cr_assert_eq(seq, 99, "*seq untouched");
	merge_view(&v[0], &mv[0], sc, "x", 5);
	flush_seq(w, v, 1, 1);
	cr_assert_eq(T->pin(w, 0), -ENOENT, "pin(0) after an apply");
	merge_view(&v[0], &mv[0], sc, "x", 7);
	flush_seq(w, v, 1, 2);
	snprintf(stage, sizeof(stage), "%s/stage/w0/b7", dir);
	cr_assert_eq(T->snapshot(w, stage), 0, "%s", sfs_last_error());
	cr_assert_eq(T->pin(w, 8), -ENOENT, "pin of a checkpoint never staged");
	cr_assert_eq(T->rollback(w, &seq), -ENOENT, "a failed pin leaves nothing pinned");
	cr_assert_eq(T->pin(w, 7), 0, "%s", sfs_last_error());
	cr_assert_eq(T->pin(w, 7), -ENOENT, "a pinned checkpoint is no longer staged");
	cr_assert_eq(T->rollback(w, &seq), -ENOENT);
	writer_close(w);

	/* reopened: pin(0) pins the version at open (x = 12, seq 2) */
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->pin(w, 0), 0, "%s", sfs_last_error());
	merge_view(&v[0], &mv[0], sc, "x", 1);
	merge_view(&v[1], &mv[1], sc2, "y", 3);
	flush_seq(w, v, 2, 3);
	expect(r, sc, "x", 13, 3);
	expect(r, sc2, "y", 3, 3);
	/* a flush under way: applied, not committed, abandoned */
	merge_view(&v[0], &mv[0], sc, "x", 1000);
	cr_assert_eq(T->apply(w, v, 1, 4), 0);
	cr_assert_eq(T->rollback(w, &seq), 0, "%s", sfs_last_error());
	cr_assert_eq(seq, 2);
	expect(r, sc, "x", 12, 2);
	cr_assert_eq(T->rd.catch_up(r), 0);
	cr_assert_eq(probe_i64(r, sc2, 0, "y", &n, NULL), 0, "a table first written after the "
		     "pin comes back empty");
	/* seq 3 again (the abandoned version had it): applies on top */
	merge_view(&v[0], &mv[0], sc, "x", 1);
	flush_seq(w, v, 1, 3);
	expect(r, sc, "x", 13, 3);
	/* a redo of seq 2 (<= the pinned seq) is a no-op */
	merge_view(&v[0], &mv[0], sc, "x", 7);
	flush_seq(w, v, 1, 2);
	expect(r, sc, "x", 13, 3);
	/* the pin stays */
	cr_assert_eq(T->rollback(w, &seq), 0, "%s", sfs_last_error());
	cr_assert_eq(seq, 2);
	expect(r, sc, "x", 12, 2);
	/* and a reopen finds the rolled-back version */
	writer_close(w);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	expect(r, sc, "x", 12, 2);
	cr_assert_eq(T->rollback(w, &seq), -ENOENT, "no pin survives a reopen");

	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * reset (store/target.h): a store with two tables, a staged and pinned
 * checkpoint and a flush under way goes empty as one publication — for a
 * reader that had caught up and for a new one — with the last published
 * seq (seqs never go back); the pin is released; later seqs apply on an
 * empty store; every old file is unlinked; and a reopen finds it empty.
 */
Test(tblt, reset_empties_every_table_in_place_and_goes_on)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r, *r2;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[2];
	struct mview mv[2];
	uint32_t sc, sc2;
	uint64_t seq = 0;
	sfs_ctx_t *c;
	int64_t n;
	char stage[256];

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_state_register(c, "d", SFS_STATE_COUNTER, &sc2), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);

	merge_view(&v[0], &mv[0], sc, "x", 5);
	merge_view(&v[1], &mv[1], sc2, "y", 3);
	flush_seq(w, v, 2, 1);
	snprintf(stage, sizeof(stage), "%s/stage/w0/b1", dir);
	cr_assert_eq(T->snapshot(w, stage), 0, "%s", sfs_last_error());
	cr_assert_eq(T->pin(w, 1), 0, "%s", sfs_last_error());
	merge_view(&v[0], &mv[0], sc, "x", 7);
	flush_seq(w, v, 1, 2);
	expect(r, sc, "x", 12, 2);
	cr_assert_eq(probe_i64(r, sc2, 0, "y", &n, NULL), 1);
	cr_assert_eq(n, 3);
	/* a flush under way: applied, not committed, dropped */
	merge_view(&v[0], &mv[0], sc, "x", 1000);
	cr_assert_eq(T->apply(w, v, 1, 3), 0);

	cr_assert_eq(T->reset(w, &seq), 0, "%s", sfs_last_error());
	cr_assert_eq(seq, 2, "reset keeps the last published seq, got %llu",
		     (unsigned long long)seq);
	cr_assert_eq(sfs_load_acquire(&pub_of(&seg, 0)->tp_applied), 2);
	cr_assert_eq(T->rd.catch_up(r), 0);
	cr_assert_eq(probe_i64(r, sc, 0, "x", &n, NULL), 0, "x after the reset, a reader that "
		     "had caught up");
	cr_assert_eq(probe_i64(r, sc2, 0, "y", &n, NULL), 0, "y after the reset");
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r2), 0);
	cr_assert_eq(probe_i64(r2, sc, 0, "x", &n, NULL), 0, "x after the reset, a new reader");
	cr_assert_eq(T->rollback(w, &seq), -ENOENT, "the pin went with the reset");

	/* later seqs apply on the empty store */
	merge_view(&v[0], &mv[0], sc, "x", 1);
	flush_seq(w, v, 1, 3);
	expect(r, sc, "x", 1, 3);
	expect(r2, sc, "x", 1, 3);
	expect_no_orphans(c, sc);
	expect_no_orphans(c, sc2);

	/* and a reopen finds the reset store */
	writer_close(w);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	expect(r, sc, "x", 1, 3);
	cr_assert_eq(T->rd.catch_up(r), 0);
	cr_assert_eq(probe_i64(r, sc2, 0, "y", &n, NULL), 0, "y after a reopen");

	T->rd.reader_close(r);
	T->rd.reader_close(r2);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * A compactor killed in a rollback: a child builds the state (the model,
 * a checkpoint staged at each barrier, one pinned, more barriers), saves
 * the pinned and the final models, arms @point and rolls back.  Killed
 * there, the next open (this process) must find the pinned version whole
 * in every table — the intent is written before any table switches — and
 * publish it with its seq; the store then keeps no orphan.
 */
#define RB_PIN 3u
#define RB_LAST 9u

static int rollback_child(void *arg)
{
	struct sfs_worker_opts o = small_opts();
	static struct model m, pm;
	struct inproc *p = &live_flusher;
	uint64_t seed = 42, seq = 0, pin_seq = 0;
	char stage[256], path[512];
	sfs_ctx_t *c;
	FILE *f;

	sfs_fault_reset();
	o.flags = SFS_WORKER_NO_CACHE;
	if (sfs_worker_open(job, 0, 0, &o, &c) ||
	    sfs_state_register(c, "v", SFS_STATE_VALUE, &r_v) ||
	    sfs_state_register(c, "add", SFS_STATE_COUNTER, &r_add) ||
	    sfs_state_register_merge(c, "max", SFS_MERGE_MAX, &r_max) ||
	    sfs_state_register(c, "map", SFS_STATE_MAP, &r_map))
		return 20;
	inproc_start(p);
	for (uint64_t b = 1; b <= RB_LAST; b++) {
		for (unsigned i = 0; i < 60; i++)
			model_op(c, &m, &seed);
		if (sfs_barrier(c, b))
			return 21;
		inproc_drain(p, c);
		stage_as(p, b, stage, sizeof(stage));
		if (b == RB_PIN) {
			pm = m;
			pin_seq = sfs_load_acquire(&pub_of(&seg, 0)->tp_applied);
		}
		if (b == RB_PIN + 1 && T->pin(p->f.w[0].tw, RB_PIN))
			return 22;
	}
	snprintf(path, sizeof(path), "%s/models", dir);
	if (!(f = fopen(path, "w")) || fwrite(&pm, sizeof(pm), 1, f) != 1 ||
	    fwrite(&m, sizeof(m), 1, f) != 1 || fwrite(&pin_seq, 8, 1, f) != 1 || fclose(f))
		return 23;
	if (sfs_fault_arm((const char *)arg))
		return 24;
	if (T->rollback(p->f.w[0].tw, &seq))
		return 25;
	return 26;	/* not killed */
}

static void killed_in_a_rollback(const char *point)
{
	static struct model pm, last;
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_worker_opts o = small_opts();
	uint64_t pin_seq = 0;
	char path[512], why[1024];
	sfs_ctx_t *c;
	FILE *f;
	int status;
	pid_t pid;

	pid = live_child = th_fork(rollback_child, (void *)point);
	status = th_wait(pid, 50000);
	live_child = 0;
	cr_assert(killed_at_its_point(status), "the rollback died at '%s' (exit %d)", point,
		  th_exit_code(status));
	snprintf(path, sizeof(path), "%s/store/w0/ROLLBACK", dir);
	cr_assert(exists(path), "the intent is there after a death at '%s'", point);
	snprintf(path, sizeof(path), "%s/models", dir);
	cr_assert_not_null(f = fopen(path, "r"));
	cr_assert_eq(fread(&pm, sizeof(pm), 1, f), 1);
	cr_assert_eq(fread(&last, sizeof(last), 1, f), 1);
	cr_assert_eq(fread(&pin_seq, 8, 1, f), 1);
	fclose(f);

	/* the next compactor's open: a reader sees the pinned version */
	o.flags = SFS_WORKER_NO_CACHE;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &r_v), 0);
	cr_assert_eq(sfs_state_register(c, "add", SFS_STATE_COUNTER, &r_add), 0);
	cr_assert_eq(sfs_state_register_merge(c, "max", SFS_MERGE_MAX, &r_max), 0);
	cr_assert_eq(sfs_state_register(c, "map", SFS_STATE_MAP, &r_map), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	snprintf(path, sizeof(path), "%s/store/w0/ROLLBACK", dir);
	cr_assert(!exists(path), "the open finished the rollback");
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	model_check(r, &last, why, sizeof(why));
	cr_assert(why[0], "the pre-rollback version differs from the pinned one (a test that "
		  "can tell)");
	model_check(r, &pm, why, sizeof(why));
	cr_assert(!why[0], "after a death at '%s', the pinned version: %s", point, why);
	cr_assert_eq(sfs_load_acquire(&pub_of(&seg, 0)->tp_applied), pin_seq);
	expect_no_orphans(c, r_v);
	expect_no_orphans(c, r_add);
	expect_no_orphans(c, r_max);
	expect_no_orphans(c, r_map);
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

Test(tblt, a_compactor_killed_after_the_rollback_intent_opens_on_the_pinned_version)
{
	killed_in_a_rollback("table.rollback.intent:1");
}

Test(tblt, a_compactor_killed_with_half_the_tables_rolled_back_opens_on_the_pinned_version)
{
	killed_in_a_rollback("table.rollback.table:2");
}

Test(tblt, a_compactor_killed_before_the_rollback_intent_is_removed_opens_on_the_pinned_version)
{
	killed_in_a_rollback("table.rollback.done:1");
}

/*
 * What a rollback costs: @nt value tables of @nf level-1 files each
 * (shaping off, so files pile up), @rows rows per file; a checkpoint
 * staged and pinned halfway, then the rest, then the rollback, timed.
 * The time must follow the files (metadata), not the rows (data).
 * Printed; SFS_BENCH_ROLLBACK=<tables>x<files> for a bigger store.
 */
struct pview {
	unsigned char key[48];
	char val[16];
};

static double rollback_ms(uint32_t nt, uint32_t nf, uint32_t rows)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	static uint32_t sid[64];
	struct sfs_wbuf_view *v = calloc((size_t)nt * rows, sizeof(*v));
	struct pview *pv = calloc((size_t)nt * rows, sizeof(*pv));
	char stage[256], name[32];
	uint64_t seq = 0, t0;
	double ms;
	sfs_ctx_t *c;

	cr_assert(v && pv && nt <= 64);
	setenv("SFS_TABLE_SHAPING", "0", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	for (uint32_t t = 0; t < nt; t++) {
		snprintf(name, sizeof(name), "s%u", t);
		cr_assert_eq(sfs_state_register(c, name, SFS_STATE_VALUE, &sid[t]), 0);
	}
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	for (uint64_t s = 1; s <= nf; s++) {
		size_t n = 0;

		for (uint32_t t = 0; t < nt; t++)
			for (uint32_t i = 0; i < rows; i++, n++) {
				char k[32];

				snprintf(k, sizeof(k), "k%llu-%u", (unsigned long long)s, i);
				snprintf(pv[n].val, sizeof(pv[n].val), "v%llu", (unsigned long long)s);
				v[n] = (struct sfs_wbuf_view){ .key = pv[n].key,
							       .klen = vkey(pv[n].key, sid[t], k),
							       .value = pv[n].val,
							       .len = (uint32_t)strlen(pv[n].val),
							       .kind = SFS_WBUF_PUT };
			}
		cr_assert_eq(T->apply(w, v, (unsigned)n, s), 0, "%s", sfs_last_error());
		commit(w, s);
		if (s == nf / 2) {
			snprintf(stage, sizeof(stage), "%s/stage/w0/b1", dir);
			cr_assert_eq(T->snapshot(w, stage), 0, "%s", sfs_last_error());
			cr_assert_eq(T->pin(w, 1), 0, "%s", sfs_last_error());
		}
	}
	cr_assert_eq(relaxed(&pub_of(&seg, 0)->tp_merges), 0);
	t0 = sfs_now_ns();
	cr_assert_eq(T->rollback(w, &seq), 0, "%s", sfs_last_error());
	ms = (double)(sfs_now_ns() - t0) / 1e6;
	cr_assert_eq(seq, nf / 2);
	cr_assert_eq(pub_of(&seg, 0)->tp_nfiles, nt * (nf / 2), "files after the rollback");
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	free(v);
	free(pv);
	return ms;
}

static void rollback_bench(unsigned rows)
{
	const char *big = getenv("SFS_BENCH_ROLLBACK");
	unsigned nt = 4, nf = 40;
	double ms;

	if (big && sscanf(big, "%ux%u", &nt, &nf) != 2)
		cr_assert_fail("SFS_BENCH_ROLLBACK=<tables>x<files>");
	ms = rollback_ms(nt, nf, rows);
	fprintf(stderr, "rollback: %u tables x %u files (%u after), %u rows each: %.2f ms\n", nt,
		nf, nf / 2, rows, ms);
}

Test(tblt, a_rollback_costs_the_files_of_one_version_with_few_rows)
{
	rollback_bench(4);
}

Test(tblt, a_rollback_costs_the_files_of_one_version_not_their_rows)
{
	rollback_bench(2000);
}

/*
 * A shaping merge under way at the rollback must not commit onto the
 * rolled-back table: four level-1 files of fresh keys are pinned (a merge
 * of them is due), a barrier of deletes then masks some of their rows (no
 * new file: its tombstones vanish in the round), a merge that starts after
 * it copies those bits, and the rollback lands while it runs.  Committed
 * onto the pinned files, such a merge would drop the deleted rows the
 * pinned version still has.  The background thread merges tables in state
 * order: a bigger table of a lower state, due at the same barrier, holds
 * it until the deletes are in; the rollback starts when that merge ends.
 * (Timing-dependent: if the merge did not overlap the rollback, the test
 * passes trivially.)
 */
static void put_rows(struct sfs_wbuf_view *v, struct pview *pv, unsigned *n, uint32_t sid,
		     uint64_t f, uint32_t rows, uint32_t step, int del)
{
	for (uint32_t i = 0; i < rows; i += step, (*n)++) {
		char k[32];

		snprintf(k, sizeof(k), "k%llu-%05u", (unsigned long long)f, i);
		snprintf(pv[*n].val, sizeof(pv[*n].val), "v%llu", (unsigned long long)f);
		v[*n] = (struct sfs_wbuf_view){ .key = pv[*n].key, .klen = vkey(pv[*n].key, sid, k),
						.value = del ? NULL : pv[*n].val, .len = del ? 0 : 2,
						.kind = del ? SFS_WBUF_DELETE : SFS_WBUF_PUT };
	}
}

Test(tblt, a_merge_under_way_at_a_rollback_never_commits_onto_the_pinned_version)
{
	enum { ROWS = 20000, SLOW = 80000 };
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view *v = calloc(ROWS + SLOW, sizeof(*v));
	struct pview *pv = calloc(ROWS + SLOW, sizeof(*pv));
	char stage[256];
	uint64_t seq = 0;
	uint32_t ss, sv;
	sfs_ctx_t *c;

	cr_assert(v && pv);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "slow", SFS_STATE_VALUE, &ss), 0);
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &sv), 0);
	cr_assert_lt(ss, sv);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(writer_open(&seg, slot, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	for (uint64_t s = 1; s <= 4; s++) {
		unsigned n = 0;

		put_rows(v, pv, &n, ss, s, SLOW, 1, 0);
		put_rows(v, pv, &n, sv, s, ROWS, 1, 0);
		cr_assert_eq(T->apply(w, v, n, s), 0, "%s", sfs_last_error());
		commit(w, s);
	}
	snprintf(stage, sizeof(stage), "%s/stage/w0/b4", dir);
	cr_assert_eq(T->snapshot(w, stage), 0, "%s", sfs_last_error());
	cr_assert_eq(T->pin(w, 4), 0, "%s", sfs_last_error());
	{
		unsigned n = 0;

		for (uint64_t f = 1; f <= 4; f++)
			put_rows(v, pv, &n, sv, f, ROWS, 8, 1);
		cr_assert_eq(T->apply(w, v, n, 5), 0, "%s", sfs_last_error());
		commit(w, 5);
	}
	cr_assert(probe_str(r, sv, 0, "k1-00000", NULL), "deleted before the rollback");
	/* the slow table's merge ends: the one of v starts */
	for (int t = 0; t < 100000 && relaxed(&pub_of(&seg, 0)->tp_merges) == 0; t++)
		usleep(100);
	cr_assert_eq(T->rollback(w, &seq), 0, "%s", sfs_last_error());
	cr_assert_eq(seq, 4);
	/* the merges settle (a cancelled one redone on the pinned files) */
	for (int t = 0; t < 5000 && !published_at_level(pub_of(&seg, 0), sv, 2); t++)
		usleep(1000);
	cr_assert(published_at_level(pub_of(&seg, 0), sv, 2), "the pinned files merged");
	cr_assert_eq(T->rd.catch_up(r), 0);
	for (uint64_t f = 1; f <= 4; f++)
		for (uint32_t i = 0; i < ROWS; i += 8) {
			char k[32], want[8];

			snprintf(k, sizeof(k), "k%llu-%05u", (unsigned long long)f, i);
			snprintf(want, sizeof(want), "v%llu", (unsigned long long)f);
			cr_assert(probe_str(r, sv, 0, k, want), "%s after the rollback", k);
		}
	T->rd.reader_close(r);
	writer_close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	free(v);
	free(pv);
}

/* ---- 11. the key index of value and counter tables (table_kindex.c) ------------------ */

/* Every table of the flusher's writer reloaded from its last snapshot, as
 * after a failed step (the flusher is quiescent: the test steps it). */
static void reload_all(struct inproc *p)
{
	struct sfs_target_writer *w = p->f.w[0].tw;

	for (uint32_t sid = 0; sid < SFS_MAX_STATES; sid++) {
		struct table *t = sfs__tbl_table_at(w, sid);

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		sfs__tbl_table_recover(w, t, "a test's reload");
		pthread_mutex_unlock(&t->mu);
	}
}

static uint64_t tables_reloaded(struct inproc *p)
{
	uint64_t n = 0;

	for (uint32_t sid = 0; sid < SFS_MAX_STATES; sid++)
		n += sfs__tbl_table_at(p->f.w[0].tw, sid) != NULL;
	return n;
}

/*
 * The randomized model of section 5 (values put and deleted, add and max
 * counters, maps) over 72 barriers with shaping merges, a reload of every
 * table as after a failure (barrier 20), and a rollback to a pinned
 * barrier (at 40, to 30): every key reads as the model after every
 * barrier.  With the index on, every round's answers are also checked
 * against a probe of every file (SFS_TABLE_KEY_INDEX_CHECK=1): no
 * difference, the index never found wrong, rebuilt after the reload and
 * after the rollback, and asked again after its rebuilds; and without the
 * check (the rounds take the index's answers: the model alone judges);
 * with it off, it is never asked.  The map table's key filter
 * (table_kfilter.c), sized for 16 keys so that it fills and is rebuilt
 * larger, each rebuild waiting 20 ms before it reads so that rounds commit
 * meanwhile (their keys journalled), is checked the same way: with the
 * check, every key it rejects is probed too, and none was found in a
 * level >= 1 file.
 */
static void kindex_run(int on, int check)
{
	struct sfs_worker_opts o = small_opts();
	static struct model m, pm;
	struct sfs_target_reader *r;
	struct inproc *p = &live_flusher;
	struct sfs_table_pub *pub;
	uint64_t seed0 = test_seed(), seed = seed0, b = 0, seq = 0, reloads = 0, hits_rb = 0;
	const unsigned every = 40, pin_b = 30, rb_at = 40, reload_at = 20, last = 72;
	char why[1024];
	sfs_ctx_t *c;

	setenv("SFS_TABLE_KEY_INDEX", on ? "1" : "0", 1);
	setenv("SFS_TABLE_KEY_INDEX_CHECK", check ? "1" : "0", 1);
	setenv("SFS_TABLE_KFILTER_MIN_KEYS", "16", 1);
	setenv("SFS_TABLE_KFILTER_AFTER", "0", 1);	/* from the start */
	setenv("SFS_TABLE_KFILTER_REBUILD_DELAY_MS", "20", 1);	/* rounds during rebuilds */
	memset(&m, 0, sizeof(m));
	o.flags = SFS_WORKER_NO_CACHE;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &r_v), 0);
	cr_assert_eq(sfs_state_register(c, "add", SFS_STATE_COUNTER, &r_add), 0);
	cr_assert_eq(sfs_state_register_merge(c, "max", SFS_MERGE_MAX, &r_max), 0);
	cr_assert_eq(sfs_state_register(c, "map", SFS_STATE_MAP, &r_map), 0);
	flusher_start();
	cr_assert_eq(T->rd.reader_open(&seg, 0, &r), 0);
	while (b < last) {
		for (unsigned i = 0; i < every; i++)
			model_op(c, &m, &seed);
		cr_assert_eq(sfs_barrier(c, ++b), 0, "%s", sfs_last_error());
		inproc_drain(p, c);
		pub = pub_of(&seg, 0);
		stage_as(p, b, NULL, 0);
		if (b == pin_b)
			pm = m;
		if (b == pin_b + 2)
			cr_assert_eq(T->pin(p->f.w[0].tw, pin_b), 0, "%s", sfs_last_error());
		if (b == reload_at) {
			reload_all(p);
			reloads = tables_reloaded(p);
		}
		if (b == rb_at) {
			cr_assert_eq(T->rollback(p->f.w[0].tw, &seq), 0, "%s", sfs_last_error());
			m = pm;
			/* the background thread rebuilds the index: let it, then
			 * count what the index answers from here on */
			for (int t = 0; on && t < 5000 &&
			     relaxed(&pub->tp_index_rebuilds) < 2 * 3; t++)
				usleep(1000);
			hits_rb = relaxed(&pub->tp_index_hits);
		}
		model_check(r, &m, why, sizeof(why));
		cr_assert(!why[0], "seed %llu (SFS_TEST_SEED to replay), index %s, after barrier "
			  "%llu: %s", (unsigned long long)seed0, on ? "on" : "off",
			  (unsigned long long)b, why);
	}
	cr_assert_gt(relaxed(&pub->tp_merges), 0, "seed %llu: shaping merges happened",
		     (unsigned long long)seed0);
	cr_assert_eq(relaxed(&pub->tp_errors), reloads, "only the test's reloads failed");
	cr_assert_eq(relaxed(&pub->tp_index_mismatch), 0, "seed %llu: the index answered "
		     "%llu keys otherwise than a probe of every file", (unsigned long long)seed0,
		     (unsigned long long)relaxed(&pub->tp_index_mismatch));
	cr_assert_eq(relaxed(&pub->tp_index_broken), 0, "seed %llu: the index was found wrong",
		     (unsigned long long)seed0);
	cr_assert_eq(relaxed(&pub->tp_kfilter_wrong), 0, "seed %llu: the key filter rejected "
		     "%llu keys a level >= 1 file held", (unsigned long long)seed0,
		     (unsigned long long)relaxed(&pub->tp_kfilter_wrong));
	/* the map's filter: filled and rebuilt larger, rebuilt after the
	 * reload and the rollback, and it rejected keys (with the check
	 * they are probed anyway, so count them there: rejects come
	 * without it) */
	cr_assert_geq(relaxed(&pub->tp_kfilter_rebuilds), 3, "key filter rebuilds: %llu",
		      (unsigned long long)relaxed(&pub->tp_kfilter_rebuilds));
	cr_assert_gt(relaxed(&pub->tp_kfilter_bytes), 0);
	if (!check)
		cr_assert_gt(relaxed(&pub->tp_kfilter_rejects), 0, "the key filter rejected keys");
	if (on) {
		/* value, add and max: each rebuilt after the reload and the rollback */
		cr_assert_geq(relaxed(&pub->tp_index_rebuilds), 2 * 3, "rebuilds: %llu",
			      (unsigned long long)relaxed(&pub->tp_index_rebuilds));
		cr_assert_gt(relaxed(&pub->tp_index_hits), hits_rb, "the rebuilt index answered");
		cr_assert_gt(relaxed(&pub->tp_index_keys), 0);
		cr_assert_geq(relaxed(&pub->tp_index_bytes), 12 * relaxed(&pub->tp_index_keys));
	} else {
		cr_assert_eq(relaxed(&pub->tp_index_asked) + relaxed(&pub->tp_index_rebuilds) +
				     relaxed(&pub->tp_index_keys), 0, "the index switched off");
	}
	T->rd.reader_close(r);
	flusher_stop();
	sfs_worker_close(c);
}

Test(tblt, the_key_index_answers_as_a_probe_of_every_file_through_merges_reloads_and_a_rollback)
{
	kindex_run(1, 1);
}

Test(tblt, with_the_key_index_random_operations_read_back_as_the_model)
{
	kindex_run(1, 0);
}

Test(tblt, without_the_key_index_random_operations_read_back_as_the_model)
{
	kindex_run(0, 1);
}
