/*
 * test_target_rocksdb.c — the `rocksdb` flush target (store/rocksdb/):
 * every state kind through the compactor's flush into RocksDB and back
 * through a secondary in another process; counters merged across flushes;
 * a redone flush of one seq (also after a writer restart) changes nothing;
 * a flusher killed with kill -9 mid-flush, restarted, loses and doubles
 * nothing; all of it on both write paths (a WriteBatch + memtable flush,
 * and an SST per state ingested with its marker: SFS_RDBT_INGEST_MIN=1);
 * a write error (a file-size limit: EFBIG, as a full disk fails a write)
 * fails the flush loudly, keeps the buffer sealed and retries it until the
 * limit is lifted, and then everything arrives exactly once.  State TTL:
 * RocksDB's compactions drop expired entries of TTL states through the
 * target's compaction filter (read raw, through test-only handles), a
 * dropped put leaves a deletion over an older version below it, and
 * states without a TTL get no filter.  Forked children report through
 * their exit code only.
 */
#include <criterion/criterion.h>
#include <rocksdb/c.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "common/rdb.h"
#include "common/fault.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "store/rocksdb/rocksdb.h"
#include "tests/helpers.h"
#include "tests/state_helpers.h"
#include "tests/target_keys.h"
#include "worker/state.h"

#define SEG_MB 96

static struct sfs_seg seg;
static char dir[128];

static void setup(void)
{
	th_job(job, sizeof(job), "rdbt");
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
	snprintf(dir, sizeof(dir), "/tmp/sfs-rdbt-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	/* What the supervisor does for --backend rocksdb, before any child. */
	snprintf(seg.hdr->sh_backend, sizeof(seg.hdr->sh_backend), "rocksdb");
	snprintf(seg.hdr->sh_data_dir, sizeof(seg.hdr->sh_data_dir), "%s/store", dir);
}

static void teardown(void)
{
	char cmd[sizeof(dir) + 16];

	if (!dir[0])
		return;	/* done already (a skipped test tears down first) */
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	dir[0] = '\0';
}

TestSuite(rdbt, .init = setup, .fini = teardown, .timeout = 180);

/* ---- keys as the worker builds them: tests/target_keys.h ------------------------ */

/* Concatenate "ukey=val;" of every entry (map_iter and sfs_map_iter). */
struct cat {
	char s[512];
	size_t n;
};

static int cat_fn(void *arg, const void *uk, uint32_t ul, const void *v, uint32_t vl)
{
	struct cat *c = arg;

	c->n += (size_t)snprintf(c->s + c->n, sizeof(c->s) - c->n, "%.*s=%.*s;", (int)ul,
				 (const char *)uk, (int)vl, (const char *)v);
	return 0;
}

/* List elements only, in order. */
static int cat_vals(void *arg, const void *uk, uint32_t ul, const void *v, uint32_t vl)
{
	struct cat *c = arg;

	(void)uk;
	(void)ul;
	c->n += (size_t)snprintf(c->s + c->n, sizeof(c->s) - c->n, "%.*s;", (int)vl,
				 (const char *)v);
	return 0;
}

/* ---- every kind round-trips ---------------------------------------------------- */

static uint32_t s_v, s_c, s_mx, s_m, s_l;

static int probe_str(struct sfs_target_reader *r, uint32_t sid, uint64_t ns, const char *k,
		     const char *want)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = ns, .key = kb, .klen = vkey(kb, sid, k) };
	struct sfs_probe_result res;

	if (sfs_target_rocksdb.rd.probe(r, &p, 1, &res))
		return 0;
	if (!want)
		return !res.found;
	return res.found && res.len == strlen(want) && memcmp(res.value, want, res.len) == 0;
}

static int probe_i64(struct sfs_target_reader *r, uint32_t sid, const char *k, int64_t want)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = 0, .key = kb, .klen = vkey(kb, sid, k) };
	struct sfs_probe_result res;
	int64_t v;

	if (sfs_target_rocksdb.rd.probe(r, &p, 1, &res) || !res.found || res.len != 8)
		return 0;
	memcpy(&v, res.value, 8);
	return v == want;
}

static int map_is(struct sfs_target_reader *r, uint32_t sid, uint64_t ns, const char *k,
		  const char *want, int list)
{
	unsigned char kb[64];
	struct sfs_probe p = { .ns = ns, .key = kb, .klen = pkey(kb, sid, k) };
	struct cat c = { .n = 0 };

	c.s[0] = '\0';
	if (sfs_target_rocksdb.rd.map_iter(r, &p, list ? cat_vals : cat_fn, &c))
		return 0;
	return strcmp(c.s, want) == 0;
}

/* In another process: a secondary of worker 0's instance sees it all. */
static int reader_checks(void *arg)
{
	struct sfs_target_reader *r;
	struct sfs_probe_result res;
	struct sfs_seg s;
	unsigned char kb[64];
	struct sfs_probe p;

	(void)arg;
	if (sfs_seg_attach(job, 0, &s) || sfs_target_rocksdb.rd.reader_open(&s, 0, &r))
		return 10;
	if (sfs_target_rocksdb.rd.catch_up(r))
		return 11;
	if (!probe_str(r, s_v, 0, "a", "A0") || !probe_str(r, s_v, 7, "a", "A7"))
		return 12;
	if (!probe_str(r, s_v, 0, "b", NULL) || !probe_str(r, s_v, 1, "a", NULL))
		return 13;
	if (!probe_i64(r, s_c, "x", 13) || !probe_i64(r, s_mx, "y", 10))
		return 14;
	if (!map_is(r, s_m, 0, "k", "c=3;", 0) || !map_is(r, s_m, 5, "k", "a=51;", 0))
		return 15;
	if (!map_is(r, s_m, 0, "other", "q=9;", 0))
		return 16;
	if (!map_is(r, s_l, 0, "k", "x;y;z;", 1))
		return 17;
	p = (struct sfs_probe){ .ns = 5, .key = kb, .klen = pkey(kb, s_m, "k") };
	if (sfs_target_rocksdb.rd.map_get(r, &p, "a", 1, &res) != 1 || res.len != 2 ||
	    memcmp(res.value, "51", 2) != 0)
		return 18;
	if (sfs_target_rocksdb.rd.map_get(r, &p, "b", 1, &res) != 0)
		return 19;
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_seg_detach(&s);
	return 0;
}

static void put(sfs_ctx_t *c, uint32_t st, uint64_t ns, const char *k, const char *v)
{
	cr_assert_eq(sfs_value_put(c, st, ns, k, strlen(k), v, strlen(v)), 0, "%s",
		     sfs_last_error());
}

static void mput(sfs_ctx_t *c, uint64_t ns, const char *k, const char *uk, const char *v)
{
	cr_assert_eq(sfs_map_put(c, s_m, ns, k, strlen(k), uk, strlen(uk), v, strlen(v)), 0, "%s",
		     sfs_last_error());
}

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

/* The write path of the writers opened from now on in this process (and
 * in children forked later): every state as an SST (1) or as a batch (0). */
static void use_ingest(int on)
{
	setenv("SFS_RDBT_INGEST_MIN", on ? "1" : "0", 1);
}

static struct sfs_rdbt_pub *pub_of(uint32_t w)
{
	char name[32];
	uint64_t off, size;

	snprintf(name, sizeof(name), "rdbt.%u", w);
	cr_assert_eq(sfs_seg_region_find(&seg, name, &off, &size), 0);
	return sfs_seg_ptr(&seg, off);
}

static void round_trip(int ingest)
{
	struct sfs_worker_opts o = small_opts();
	int rc;
	struct inproc p;
	sfs_ctx_t *c;
	pid_t pid;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &s_v), 0);
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &s_c), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MAX, &s_mx), 0);
	cr_assert_eq(sfs_state_register(c, "m", SFS_STATE_MAP, &s_m), 0);
	cr_assert_eq(sfs_state_register(c, "l", SFS_STATE_LIST, &s_l), 0);
	inproc_start(&p);
	cr_assert_str_eq(p.f.ops->name, "rocksdb");

	/* 1: first values of everything */
	put(c, s_v, 0, "a", "A0");
	put(c, s_v, 7, "a", "A7");
	put(c, s_v, 0, "b", "B0");
	cr_assert_eq(sfs_counter_add(c, s_c, 0, "x", 1, 5), 0);
	cr_assert_eq(sfs_counter_add(c, s_mx, 0, "y", 1, 3), 0);
	mput(c, 0, "k", "a", "1");
	mput(c, 0, "k", "b", "2");
	mput(c, 0, "k", "d", "4");
	mput(c, 5, "k", "a", "51");
	mput(c, 0, "other", "q", "9");
	cr_assert_eq(sfs_list_append(c, s_l, 0, "k", 1, "x", 1), 0);
	cr_assert_eq(sfs_list_append(c, s_l, 0, "k", 1, "y", 1), 0);
	cr_assert_eq(sfs_barrier(c, 1), 0);
	inproc_drain(&p, c);

	/* 2: updates over the flushed base */
	cr_assert_eq(sfs_counter_add(c, s_c, 0, "x", 1, 7), 0);
	cr_assert_eq(sfs_counter_add(c, s_mx, 0, "y", 1, 10), 0);
	cr_assert_eq(sfs_counter_add(c, s_mx, 0, "y", 1, 2), 0);
	cr_assert_eq(sfs_value_delete(c, s_v, 0, "b", 1), 0);
	cr_assert_eq(sfs_map_remove(c, s_m, 0, "k", 1, "d", 1), 0);
	mput(c, 0, "k", "e", "5");
	cr_assert_eq(sfs_list_append(c, s_l, 0, "k", 1, "z", 1), 0);
	cr_assert_eq(sfs_barrier(c, 2), 0);
	inproc_drain(&p, c);

	/* 3: a clear in namespace 0 only, with an entry written before it
	 * in the same buffer (gone) and one after (kept) */
	mput(c, 0, "k", "f", "6");
	cr_assert_eq(sfs_map_clear(c, s_m, 0, "k", 1), 0);
	mput(c, 0, "k", "c", "3");
	cr_assert_eq(sfs_counter_add(c, s_c, 0, "x", 1, 1), 0);
	cr_assert_eq(sfs_barrier(c, 3), 0);
	inproc_drain(&p, c);

	check_worker(c);	/* through this worker's own secondary */
	pid = th_fork(reader_checks, NULL);
	rc = th_exit_code(th_wait(pid, 60000));
	cr_assert_eq(rc, 0, "reader in another process: exit %d", rc);
	if (ingest)
		cr_assert_geq(pub_of(0)->rp_ingests, 10, "every state of every buffer ingested: %llu",
			      (unsigned long long)pub_of(0)->rp_ingests);
	else
		cr_assert_eq(pub_of(0)->rp_ingests, 0);
	inproc_stop(&p);
	sfs_worker_close(c);
}

Test(rdbt, every_kind_round_trips_through_a_secondary_in_another_process)
{
	use_ingest(0);
	round_trip(0);
}

Test(rdbt, every_kind_round_trips_as_ingested_ssts)
{
	use_ingest(1);
	round_trip(1);
}

/* ---- counters, redone flushes, writer restarts --------------------------------- */

/* commit is non-blocking: -EAGAIN until the flush is installed */
static void commit(struct sfs_target_writer *w, uint64_t seq)
{
	int rc;

	for (int i = 0; i < 20000 && (rc = sfs_target_rocksdb.commit(w, seq)) == -EAGAIN; i++)
		usleep(500);
	cr_assert_eq(rc, 0, "%s", sfs_last_error());
}

static void flush_seq(struct sfs_target_writer *w, struct sfs_wbuf_view *v, unsigned n,
		      uint64_t seq)
{
	/* in two pieces, as the flush loop may call it */
	cr_assert_eq(sfs_target_rocksdb.apply(w, v, n / 2, seq), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.apply(w, v + n / 2, n - n / 2, seq), 0, "%s",
		     sfs_last_error());
	commit(w, seq);
}

static void expect(struct sfs_target_reader *r, uint32_t sid, const char *k, int64_t want,
		   uint64_t tag)
{
	unsigned char kb[32];
	struct sfs_probe p = { .ns = 0, .key = kb, .klen = vkey(kb, sid, k) };
	struct sfs_probe_result res;
	int64_t v;

	cr_assert_eq(sfs_target_rocksdb.rd.catch_up(r), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rd.probe(r, &p, 1, &res), 0, "%s", sfs_last_error());
	cr_assert(res.found && res.len == 8, "%s found", k);
	memcpy(&v, res.value, 8);
	cr_assert_eq(v, want, "%s = %lld, expected %lld", k, (long long)v, (long long)want);
	cr_assert_eq(res.tag, tag, "%s: tag %llu, expected %llu", k, (unsigned long long)res.tag,
		     (unsigned long long)tag);
}

static void counters_once(void)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[4];
	struct mview m[4];
	uint32_t sc, smx;
	sfs_ctx_t *c;
	uint64_t off, size;
	struct sfs_rdbt_pub *pub;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MAX, &smx), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &r), 0);

	/* sorted as the flush gives them: state c, then mx */
	merge_view(&v[0], &m[0], sc, "x", 5);
	merge_view(&v[1], &m[1], sc, "y", 1);
	merge_view(&v[2], &m[2], smx, "z", 3);
	flush_seq(w, v, 3, 1);
	expect(r, sc, "x", 5, 1);
	expect(r, smx, "z", 3, 1);

	merge_view(&v[0], &m[0], sc, "x", 7);
	merge_view(&v[1], &m[1], smx, "z", 10);
	flush_seq(w, v, 2, 2);
	expect(r, sc, "x", 12, 2);
	expect(r, sc, "y", 1, 2);
	expect(r, smx, "z", 10, 2);

	/* the same seq again (a redone flush), and an older one: no-ops */
	flush_seq(w, v, 2, 2);
	flush_seq(w, v, 2, 1);
	expect(r, sc, "x", 12, 2);
	expect(r, smx, "z", 10, 2);
	cr_assert_eq(sfs_seg_region_find(&seg, "rdbt.0", &off, &size), 0);
	pub = sfs_seg_ptr(&seg, off);
	cr_assert_geq(pub->rp_skipped, 4, "skipped %llu", (unsigned long long)pub->rp_skipped);

	/* a writer restarted: the markers on disk still make it a no-op */
	sfs_target_rocksdb.close(w);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	flush_seq(w, v, 2, 2);
	expect(r, sc, "x", 12, 2);

	merge_view(&v[0], &m[0], sc, "x", 1);
	merge_view(&v[1], &m[1], smx, "z", 2);
	flush_seq(w, v, 2, 3);
	expect(r, sc, "x", 13, 3);
	expect(r, smx, "z", 10, 3);

	/* a flush of only another state leaves c's tag where it was */
	merge_view(&v[0], &m[0], smx, "z", 11);
	flush_seq(w, v, 1, 4);
	expect(r, sc, "x", 13, 3);
	expect(r, smx, "z", 11, 4);

	sfs_target_rocksdb.rd.reader_close(r);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

Test(rdbt, counters_merge_across_flushes_and_a_redone_flush_counts_once)
{
	use_ingest(0);
	counters_once();
}

Test(rdbt, ingested_counters_merge_across_flushes_and_a_redone_ingest_counts_once)
{
	use_ingest(1);
	counters_once();
	cr_assert_geq(pub_of(0)->rp_ingests, 5);
}

/* Without the merge operator (the ablation's SFS_RDBT_MERGE=0) counters are
 * read, folded and put: the same results. */
Test(rdbt, counters_without_the_merge_operator_fold_the_same)
{
	use_ingest(0);
	setenv("SFS_RDBT_MERGE", "0", 1);
	counters_once();
	unsetenv("SFS_RDBT_MERGE");
}

/* ---- compaction shape ------------------------------------------------------------ */

/* Option @opt of column family @cf in the instance's newest OPTIONS file
 * (RocksDB rewrites it at each family's creation), or "".  The file
 * escapes a ':' in a name as "\\:". */
static void cf_option(const char *cf, const char *opt, char *out, size_t n)
{
	char path[200], best[512] = "", line[512], sect[128], key[128];
	unsigned long num, top = 0;
	struct dirent *e;
	DIR *d;
	FILE *f;
	int in = 0;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/store/w0", dir);
	cr_assert_not_null(d = opendir(path));
	while ((e = readdir(d)))
		if (sscanf(e->d_name, "OPTIONS-%lu", &num) == 1 && num >= top) {
			top = num;
			snprintf(best, sizeof(best), "%s/%s", path, e->d_name);
		}
	closedir(d);
	cr_assert(best[0], "no OPTIONS file in %s", path);
	cr_assert_not_null(f = fopen(best, "r"));
	snprintf(sect, sizeof(sect), "[CFOptions \"%s\"]", cf);
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '[')
			in = strncmp(line, sect, strlen(sect)) == 0;
		else if (in && sscanf(line, " %127[^=]=%63s", key, out) == 2 && !strcmp(key, opt))
			break;
		else
			out[0] = '\0';
	}
	fclose(f);
	(void)n;
}

/* Ingested SSTs of one state, every one overlapping the others (the same
 * keys each time, the marker at the end), pile up and are compacted: the
 * family is universal by default (leveled with SFS_RDBT_UNIVERSAL=0), the
 * counters stay exact across the merges of their operands, and across a
 * reopen under the other shape. */
static void shape(int universal)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[2];
	struct mview m[2];
	char style[64], log[256], cmd[320];
	uint32_t sc;
	sfs_ctx_t *c;

	use_ingest(1);
	if (!universal)
		setenv("SFS_RDBT_UNIVERSAL", "0", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &r), 0);
	for (uint64_t seq = 1; seq <= 12; seq++) {
		merge_view(&v[0], &m[0], sc, "a", 1);
		merge_view(&v[1], &m[1], sc, "z", 2);
		flush_seq(w, v, 2, seq);
	}
	cr_assert_geq(pub_of(0)->rp_ingests, 12);
	/* 12 overlapping files in L0: both shapes compact them (from 8 runs
	 * universal, 4 files leveled);
	 * wait for one to finish, then read through it */
	snprintf(log, sizeof(log), "%s/store/w0/LOG", dir);
	snprintf(cmd, sizeof(cmd), "grep -q compaction_finished '%s'", log);
	for (int i = 0; i < 200 && system(cmd) != 0; i++)
		usleep(50000);
	cr_assert_eq(system(cmd), 0, "no compaction in %s", log);
	expect(r, sc, "a", 12, 12);
	expect(r, sc, "z", 24, 12);
	cf_option("st\\:c", "compaction_style", style, sizeof(style));
	cr_assert_str_eq(style, universal ? "kCompactionStyleUniversal" : "kCompactionStyleLevel");
	/* the knob switched: the writer reopens the instance under the other
	 * shape, and what the first one wrote stays readable and mergeable */
	sfs_target_rocksdb.close(w);
	setenv("SFS_RDBT_UNIVERSAL", universal ? "0" : "1", 1);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	for (uint64_t seq = 13; seq <= 18; seq++) {
		merge_view(&v[0], &m[0], sc, "a", 1);
		merge_view(&v[1], &m[1], sc, "z", 2);
		flush_seq(w, v, 2, seq);
	}
	expect(r, sc, "a", 18, 18);
	expect(r, sc, "z", 36, 18);
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	unsetenv("SFS_RDBT_UNIVERSAL");
}

Test(rdbt, overlapping_ingests_compact_universally_and_counters_stay_exact)
{
	shape(1);
}

Test(rdbt, the_leveled_shape_still_compacts_them_with_the_same_counters)
{
	shape(0);
}

/* ---- kill -9 of the flusher ------------------------------------------------------ */

/* A flusher in a forked child: steps until killed. */
static int flusher_child(void *arg)
{
	struct inproc p;

	(void)arg;
	if (sfs_seg_attach(job, 0, &p.seg) ||
	    sfs_proc_register(&p.seg, SFS_ROLE_COMPACTOR, 0, &p.slot) ||
	    sfs_flusher_init(&p.f, &p.seg, p.slot, 16u << 20))
		return 20;
	for (;;) {
		int pending = 0, rc = sfs_flusher_step(&p.f, 1000, &pending);

		if (rc < 0)
			return 21;
		sfs_proc_heartbeat(p.slot);
		if (rc == 0)
			usleep(200);
	}
}

/*
 * Flusher children are forked by a spawner forked before this process
 * touches RocksDB: a process forked after RocksDB started its background
 * threads inherits a thread pool whose threads do not exist in it, and its
 * flushes would wait forever.  (The real compactor is exec'ed.)
 */
static int spawn_req[2], spawn_resp[2];

struct spawn {
	char crash[32];         /* a fault rule (sfs_fault_arm), "" none */
	char ingest;            /* SFS_RDBT_INGEST_MIN=1 (else 0: batches) */
	int fsize_kb;           /* > 0: RLIMIT_FSIZE (soft) until SIGUSR1 lifts it */
	char log[192];          /* "" or where the child's stderr goes */
};

static void lift_fsize(int sig)
{
	struct rlimit rl;

	(void)sig;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_FSIZE, &rl);
	}
}

static int spawner(void *arg)
{
	struct spawn q;

	(void)arg;
	signal(SIGCHLD, SIG_IGN);	/* children reaped by the kernel */
	while (read(spawn_req[0], &q, sizeof(q)) == (ssize_t)sizeof(q)) {
		pid_t pid = fork();

		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			sfs_fault_reset();
			if (q.crash[0] && sfs_fault_arm(q.crash))
				_exit(33);
			setenv("SFS_RDBT_INGEST_MIN", q.ingest ? "1" : "0", 1);
			if (q.log[0] && !freopen(q.log, "a", stderr))
				_exit(30);
			if (q.fsize_kb > 0) {
				/* A write past the limit fails with EFBIG, as a
				 * full disk fails one with ENOSPC. */
				struct rlimit rl;

				signal(SIGXFSZ, SIG_IGN);
				signal(SIGUSR1, lift_fsize);
				if (getrlimit(RLIMIT_FSIZE, &rl))
					_exit(31);
				rl.rlim_cur = (rlim_t)q.fsize_kb << 10;
				if (setrlimit(RLIMIT_FSIZE, &rl))
					_exit(32);
			}
			_exit(flusher_child(NULL));
		}
		if (write(spawn_resp[1], &pid, sizeof(pid)) != sizeof(pid))
			return 1;
	}
	return 0;
}

static void spawner_start(void)
{
	cr_assert_eq(pipe(spawn_req), 0);
	cr_assert_eq(pipe(spawn_resp), 0);
}

static pid_t spawn_req_send(const struct spawn *q)
{
	pid_t pid = -1;

	cr_assert_eq(write(spawn_req[1], q, sizeof(*q)), (ssize_t)sizeof(*q));
	cr_assert_eq(read(spawn_resp[0], &pid, sizeof(pid)), (ssize_t)sizeof(pid));
	cr_assert_gt(pid, 0);
	return pid;
}

/* A flusher on the batch (@ingest 0) or SST path, dying at the first time
 * it reaches @crash (NULL: never). */
static pid_t spawn_flusher_at(const char *crash, int ingest)
{
	struct spawn q = { .ingest = (char)ingest };

	if (crash)
		snprintf(q.crash, sizeof(q.crash), "rocksdb.%s:1", crash);
	return spawn_req_send(&q);
}

static void kill_flusher(pid_t pid)
{
	kill(pid, SIGKILL);
	for (int i = 0; i < 5000 && kill(pid, 0) == 0; i++)
		usleep(1000);
}

static void killed_mid_flush(int ingest)
{
	struct sfs_worker_opts o = small_opts();
	static int64_t ref[2000];
	unsigned seed = 11;
	uint32_t st, sv;
	sfs_ctx_t *c;
	char key[16];
	pid_t fl, sp;
	int kills = 0;
	const uint64_t nb = 24 * (uint64_t)th_soak();

	spawner_start();
	sp = th_fork(spawner, NULL);
	o.buffer_bytes = 1 << 20;
	o.buffer_keys = 4096;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	fl = spawn_flusher_at(NULL, ingest);
	for (uint64_t b = 1; b <= nb; b++) {
		for (int i = 0; i < 2000; i++) {
			int k = rand_r(&seed) % 2000;

			snprintf(key, sizeof(key), "c%d", k);
			ref[k] += k % 7 + 1;
			cr_assert_eq(sfs_counter_add(c, st, 0, key, strlen(key), k % 7 + 1), 0);
			cr_assert_eq(sfs_value_put(c, sv, 0, key, strlen(key), &ref[k], 8), 0);
		}
		cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
		sfs_ctx_quiescent(c);
		if (b % 3 == 0) {
			/* kill -9 somewhere inside the flush of the last buffers */
			usleep((useconds_t)(rand_r(&seed) % 20000));
			kill_flusher(fl);
			kills++;
			fl = spawn_flusher_at(NULL, ingest);
		}
	}
	cr_assert(wait_flushed(c, nb, 30000), "flusher caught up after %d kills", kills);
	for (int k = 0; k < 2000; k++) {
		struct sfs_view v;
		int64_t n;

		snprintf(key, sizeof(key), "c%d", k);
		cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &n), ref[k] ? 1 : 0);
		cr_assert_eq(n, ref[k], "counter %s: %lld, expected %lld", key, (long long)n,
			     (long long)ref[k]);
		cr_assert_eq(sfs_value_get(c, sv, 0, key, strlen(key), &v), ref[k] ? 1 : 0);
		if (ref[k])
			cr_assert(v.len == 8 && memcmp(v.data, &ref[k], 8) == 0, "value %s", key);
	}
	kill_flusher(fl);
	close(spawn_req[1]);
	th_wait(sp, 5000);
	sfs_worker_close(c);
}

Test(rdbt, flusher_killed_mid_flush_loses_and_doubles_nothing)
{
	killed_mid_flush(0);
}

Test(rdbt, flusher_killed_mid_ingest_loses_and_doubles_nothing)
{
	killed_mid_flush(1);
	cr_assert_gt(pub_of(0)->rp_ingests, 0);
}

/* The real compactor binary picks the target from the segment. */
Test(rdbt, the_compactor_binary_flushes_to_rocksdb)
{
	struct sfs_worker_opts o = small_opts();
	uint32_t st;
	sfs_ctx_t *c;
	pid_t comp;
	int64_t n;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	comp = start_compactor();
	for (uint64_t b = 1; b <= 5; b++) {
		cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, (int64_t)b), 0);
		cr_assert_eq(sfs_barrier(c, b), 0, "%s", sfs_last_error());
	}
	cr_assert(wait_flushed(c, 5, 20000));
	cr_assert(wait_flushed(c, 5, 20000));
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &n), 1);
	cr_assert_eq(n, 15);
	kill(comp, SIGTERM);
	cr_assert_neq(th_wait(comp, 10000), -1, "compactor stops on SIGTERM");
	sfs_worker_close(c);
}

/* A flusher that dies at each step of a flush (fault injection), then a
 * healthy one: nothing lost, nothing doubled, and the one that died after
 * a state's flush or ingest made it durable leaves a redo that skips it.
 * Batch path: apply, write (memtables), flush (durable, not published).
 * SST path: apply, sst (written, not ingested), ingest (the first state's
 * SST ingested, the second's not yet): two states, so a death between
 * them leaves one done and one to redo. */
static void each_step(const char *const *steps, unsigned nsteps, int ingest)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_rdbt_pub *pub = NULL;
	uint64_t b = 0;
	uint32_t st, sv;
	sfs_ctx_t *c;
	int64_t ref = 0, n;
	pid_t sp;

	spawner_start();
	sp = th_fork(spawner, NULL);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	for (unsigned i = 0; i < nsteps; i++) {
		uint64_t skipped = pub ? pub->rp_skipped : 0, val = b + 1;
		struct sfs_view v;
		pid_t fl;
		int dead = 0;

		for (int k = 0; k < 100; k++) {
			char key[16];

			snprintf(key, sizeof(key), "k%d", k);
			cr_assert_eq(sfs_counter_add(c, st, 0, key, strlen(key), k + 1), 0);
			cr_assert_eq(sfs_value_put(c, sv, 0, key, strlen(key), &val, 8), 0);
		}
		ref += 1;	/* k0's share */
		cr_assert_eq(sfs_barrier(c, ++b), 0);
		fl = spawn_flusher_at(steps[i], ingest);
		for (int t = 0; t < 20000 && !dead; t++) {
			sfs_ctx_quiescent(c);
			dead = kill(fl, 0) != 0;
			usleep(1000);
		}
		cr_assert(dead, "flusher died at step '%s'", steps[i]);
		fl = spawn_flusher_at(NULL, ingest);
		cr_assert(wait_flushed(c, b, 20000), "flushed after a death at '%s'", steps[i]);
		if (!pub)
			pub = pub_of(0);
		if (!strcmp(steps[i], "flush") || !strcmp(steps[i], "ingest"))
			cr_assert_gt(pub->rp_skipped, skipped, "the redo of a durable %s skipped",
				     steps[i]);
		cr_assert_eq(sfs_counter_get(c, st, 0, "k0", 2, &n), 1);
		cr_assert_eq(n, ref, "after a death at '%s': %lld, expected %lld", steps[i],
			     (long long)n, (long long)ref);
		cr_assert_eq(sfs_counter_get(c, st, 0, "k99", 3, &n), 1);
		cr_assert_eq(n, 100 * ref);
		cr_assert_eq(sfs_value_get(c, sv, 0, "k42", 3, &v), 1);
		cr_assert(v.len == 8 && memcmp(v.data, &b, 8) == 0, "value after '%s'", steps[i]);
		kill_flusher(fl);
	}
	if (ingest)
		cr_assert_gt(pub->rp_ingests, 0);
	close(spawn_req[1]);
	th_wait(sp, 5000);
	sfs_worker_close(c);
}

Test(rdbt, a_flusher_dying_at_each_flush_step_loses_and_doubles_nothing)
{
	static const char *const steps[] = { "apply", "write", "flush" };

	each_step(steps, 3, 0);
}

Test(rdbt, a_flusher_dying_at_each_ingest_step_loses_and_doubles_nothing)
{
	static const char *const steps[] = { "apply", "sst", "ingest" };

	each_step(steps, 3, 1);
}

/* ---- a write error: EFBIG past a file-size limit, as a full disk fails --------- */

static int file_has(const char *path, const char *what)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

/*
 * A flusher whose files may not grow past 128 KiB: a first small buffer
 * commits; a second one, whose SST (or memtable flush) needs more, fails.
 * The failure is logged with the instance and RocksDB's status, the buffer
 * stays sealed and is retried (and what was committed stays readable);
 * once the limit is lifted it commits, and every value and counter is
 * there exactly once.
 */
static void write_error(int ingest)
{
	struct sfs_worker_opts o = small_opts();
	struct spawn q = { .ingest = (char)ingest, .fsize_kb = 128 };
	struct sfs_rdbt_pub *pub;
	uint64_t seed = 5, errors;
	unsigned char val[200];
	uint32_t st, sv;
	sfs_ctx_t *c;
	char key[16];
	int64_t n;
	pid_t sp, fl;
	int i;

	snprintf(q.log, sizeof(q.log), "%s/flusher.log", dir);
	spawner_start();
	sp = th_fork(spawner, NULL);
	o.buffer_bytes = 4 << 20;
	o.buffer_keys = 16384;
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0);
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	fl = spawn_req_send(&q);

	/* 1: small, committed under the limit */
	for (i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		cr_assert_eq(sfs_counter_add(c, st, 0, key, strlen(key), 1), 0);
	}
	cr_assert_eq(sfs_barrier(c, 1), 0);
	cr_assert(wait_flushed(c, 1, 20000), "a small buffer commits under the limit");

	/* 2: ~1.2 MB of incompressible values, and the counters again */
	for (i = 0; i < 6000; i++) {
		for (size_t j = 0; j < sizeof(val); j += 8) {
			uint64_t r = th_rand(&seed);

			memcpy(val + j, &r, 8);
		}
		memcpy(val, &i, sizeof(i));
		snprintf(key, sizeof(key), "v%d", i);
		cr_assert_eq(sfs_value_put(c, sv, 0, key, strlen(key), val, sizeof(val)), 0, "%s",
			     sfs_last_error());
	}
	for (i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		cr_assert_eq(sfs_counter_add(c, st, 0, key, strlen(key), 10), 0);
	}
	cr_assert_eq(sfs_barrier(c, 2), 0);
	pub = pub_of(0);
	for (i = 0; i < 20000 && pub->rp_errors < 3; i++) {
		sfs_ctx_quiescent(c);
		usleep(1000);
	}
	errors = pub->rp_errors;
	cr_assert_geq(errors, 3, "the flush failed and was retried (%llu failed attempts)",
		      (unsigned long long)errors);
	cr_assert(!wait_flushed(c, 2, 300), "the failing buffer stays sealed");
	if (!file_has(q.log, "File too large")) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "cat %s >&2", q.log);
		if (system(cmd) != 0)
			fprintf(stderr, "no log\n");
	}
	cr_assert(file_has(q.log, "commit of buffer seq 2 failed"), "the failure is logged");
	cr_assert(file_has(q.log, "File too large"), "with RocksDB's status");
	cr_assert(file_has(q.log, "/store/w0"), "naming the instance");
	/* committed before the failure: still there */
	cr_assert_eq(sfs_counter_get(c, st, 0, "c7", 2, &n), 1);
	cr_assert(n == 1 || n == 11, "c7 = %lld", (long long)n);

	kill(fl, SIGUSR1);	/* the disk has room again */
	cr_assert(wait_flushed(c, 2, 30000), "committed once the limit is lifted");
	cr_assert(file_has(q.log, "committed after"), "the recovery is logged");
	for (i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &n), 1);
		cr_assert_eq(n, 11, "counter %s = %lld, expected 11 (exactly once)", key,
			     (long long)n);
	}
	/* read back through a fresh worker context: from RocksDB, not the
	 * buffers */
	sfs_worker_close(c);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "cnt", SFS_STATE_COUNTER, &st), 0);
	cr_assert_eq(sfs_state_register(c, "val", SFS_STATE_VALUE, &sv), 0);
	for (i = 0; i < 6000; i++) {
		struct sfs_view v;
		int got;

		snprintf(key, sizeof(key), "v%d", i);
		cr_assert_eq(sfs_value_get(c, sv, 0, key, strlen(key), &v), 1, "%s", key);
		memcpy(&got, v.data, sizeof(got));
		cr_assert(v.len == sizeof(val) && got == i, "%s", key);
	}
	for (i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &n), 1);
		cr_assert_eq(n, 11, "counter %s after a reopen", key);
	}
	if (ingest)
		cr_assert_gt(pub->rp_ingests, 0);
	else
		cr_assert_gt(pub->rp_reopens, 0, "the instance reopened after its flush failed");
	kill_flusher(fl);
	close(spawn_req[1]);
	th_wait(sp, 5000);
	sfs_worker_close(c);
}

Test(rdbt, a_write_error_in_an_sst_fails_loudly_is_retried_and_commits_once)
{
	write_error(1);
}

Test(rdbt, a_write_error_in_a_memtable_flush_fails_loudly_is_retried_and_commits_once)
{
	write_error(0);
}

/* ---- state TTL: RocksDB's compactions drop expired entries ---------------------- */

/* A TTL value (or TTL counter: [expiry][int64]) put of key @k in state
 * @sid, as the flush hands it over: [expiry][bytes]. */
struct tview {
	unsigned char key[48];
	unsigned char val[64];
};

static void ttl_put(struct sfs_wbuf_view *v, struct tview *t, uint32_t sid, const char *k,
		    uint64_t expiry, const void *b, uint32_t n)
{
	memcpy(t->val, &expiry, 8);
	memcpy(t->val + 8, b, n);
	*v = (struct sfs_wbuf_view){ .value = t->val, .key = t->key, .len = 8 + n,
				     .klen = vkey(t->key, sid, k), .kind = SFS_WBUF_PUT };
}

/* A map entry @uk of map @k in state @sid, as a map run carries it:
 * [sfs_map_ent][expiry][bytes]. */
static void ttl_mput(struct sfs_wbuf_view *v, struct tview *t, uint32_t sid, const char *k,
		     const char *uk, uint64_t expiry, const char *b)
{
	struct sfs_map_ent me = { 0, 0 };
	uint32_t pl = pkey(t->key, sid, k), ul = (uint32_t)strlen(uk), n = (uint32_t)strlen(b);

	memcpy(t->key + pl, uk, ul);
	memcpy(t->val, &me, sizeof(me));
	memcpy(t->val + sizeof(me), &expiry, 8);
	memcpy(t->val + sizeof(me) + 8, b, n);
	*v = (struct sfs_wbuf_view){ .value = t->val, .key = t->key,
				     .len = (uint32_t)sizeof(me) + 8 + n, .klen = pl + ul,
				     .kind = SFS_WBUF_PUT };
}

/* The RocksDB key of buffered key @k (namespace 0): kg|state|ns|rest. */
static size_t raw_key(char *out, const unsigned char *k, uint32_t kl)
{
	memcpy(out, k, SFS_KEY_PREFIX);
	memset(out + SFS_KEY_PREFIX, 0, 8);
	memcpy(out + SFS_KEY_PREFIX + 8, k + SFS_KEY_PREFIX, kl - SFS_KEY_PREFIX);
	return kl + 8;
}

/* The instance read raw (no TTL rule applies): the stored value of a
 * value key @k, or of map @k's entry @uk when @uk is set; its length,
 * -1 when RocksDB has none (dropped, or shadowed by a deletion). */
static long raw_len(struct sfs_target_writer *w, uint32_t sid, const char *k, const char *uk,
		    unsigned char *val)
{
	unsigned char kb[64];
	char rk[80], *err = NULL, *v;
	void *db, *cf;
	uint32_t kl = uk ? pkey(kb, sid, k) : vkey(kb, sid, k);
	size_t len = 0, rl;
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();

	if (uk) {
		memcpy(kb + kl, uk, strlen(uk));
		kl += (uint32_t)strlen(uk);
	}
	rl = raw_key(rk, kb, kl);
	sfs_rdbt_test_handles(w, sid, &db, &cf);
	cr_assert(db && cf, "state %u has a family", sid);
	v = rocksdb_get_cf(db, ro, cf, rk, rl, &len, &err);
	rocksdb_readoptions_destroy(ro);
	cr_assert_null(err, "%s", err);
	if (!v)
		return -1;
	if (val)
		memcpy(val, v, len < 64 ? len : 64);
	rocksdb_free(v);
	return (long)len;
}

/* The applied marker of @sid's family, raw (0: none). */
static uint64_t raw_marker(struct sfs_target_writer *w, uint32_t sid)
{
	char *err = NULL, *v;
	void *db, *cf;
	size_t len = 0;
	uint64_t seq = 0;
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();

	sfs_rdbt_test_handles(w, sid, &db, &cf);
	v = rocksdb_get_cf(db, ro, cf, "\xff\xff" "sfs.applied", 13, &len, &err);
	rocksdb_readoptions_destroy(ro);
	cr_assert_null(err, "%s", err);
	if (v && len == 8)
		memcpy(&seq, v, 8);
	if (v)
		rocksdb_free(v);
	return seq;
}

/* Keys of @sid's family RocksDB returns (the marker included). */
static unsigned raw_count(struct sfs_target_writer *w, uint32_t sid)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it;
	unsigned n = 0;
	void *db, *cf;

	sfs_rdbt_test_handles(w, sid, &db, &cf);
	rocksdb_readoptions_set_total_order_seek(ro, 1);
	it = rocksdb_create_iterator_cf(db, ro, cf);
	for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it))
		n++;
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return n;
}

/* A full manual compaction of @sid's family (every file, down to the
 * bottommost level: the filter sees every Put). */
static void compact_all(struct sfs_target_writer *w, uint32_t sid)
{
	void *db, *cf;

	sfs_rdbt_test_handles(w, sid, &db, &cf);
	rocksdb_compact_range_cf(db, cf, NULL, 0, NULL, 0);
}

/* A numeric property of @sid's family (num-files-at-level<N> has only a
 * string form). */
static uint64_t num_prop(struct sfs_target_writer *w, uint32_t sid, const char *prop)
{
	uint64_t v;
	void *db, *cf;
	char *s;

	sfs_rdbt_test_handles(w, sid, &db, &cf);
	s = rocksdb_property_value_cf(db, cf, prop);
	cr_assert_not_null(s, "%s", prop);
	v = strtoull(s, NULL, 10);
	rocksdb_free(s);
	return v;
}

static void ttl_tell(struct sfs_target_writer *w, uint64_t proc_ms, uint64_t event_ms)
{
	struct sfs_ttl_rule rules[SFS_MAX_STATES];
	struct sfs_ttl_clock clk = { .proc_ms = proc_ms, .event_ms = event_ms };

	/* as the compactor builds them (compactor/flush.c, ttl_rules) */
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *sd = &seg.hdr->sh_states[i];
		int ready = sd->sd_state == SFS_SDESC_READY;

		rules[i].ttl_ms = ready ? sd->sd_ttl_ms : 0;
		rules[i].event_time = ready && (sd->sd_ttl_flags & SFS_TTL_EVENT_TIME);
	}
	sfs_target_rocksdb.ttl(w, rules, &clk);
}

/*
 * Entries of TTL states (a value state on processing time, a counter and
 * a map on event time) written with expiries on both sides of a clock,
 * the clock told through ttl(), a full compaction: the expired entries
 * are physically gone from RocksDB, the live ones intact, the applied
 * markers (8 bytes that would read as a long-past expiry) untouched, and
 * the drops counted.  Before any ttl() the clock is 0: a compaction
 * drops nothing.
 */
Test(rdbt, a_compaction_drops_expired_entries_of_ttl_states_and_keeps_live_ones)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_ttl tv = { .ttl_ms = 1000 }, te = { .ttl_ms = 1000,
						       .flags = SFS_TTL_EVENT_TIME };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[8];
	struct tview t[8];
	unsigned char got[64];
	uint32_t sv, sc, sm;
	int64_t n1 = 41, n2 = 42;
	sfs_ctx_t *c;

	use_ingest(0);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &tv, &sv), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tc", SFS_STATE_COUNTER, &te, &sc), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tm", SFS_STATE_MAP, &te, &sm), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());

	/* value state: processing time; expiries 100, 5000 and 5001, and 0
	 * (expired at any clock but the unset one) */
	ttl_put(&v[0], &t[0], sv, "dead", 100, "D", 1);
	ttl_put(&v[1], &t[1], sv, "edge", 5000, "E", 1);
	ttl_put(&v[2], &t[2], sv, "live", 5001, "L", 1);
	ttl_put(&v[3], &t[3], sv, "zero", 0, "Z", 1);
	flush_seq(w, v, 4, 1);
	/* counter ([expiry][int64]) and map entries: event time */
	ttl_put(&v[0], &t[0], sc, "c-dead", 700, &n1, 8);
	ttl_put(&v[1], &t[1], sc, "c-live", 900, &n2, 8);
	ttl_mput(&v[2], &t[2], sm, "m", "a", 700, "A");
	ttl_mput(&v[3], &t[3], sm, "m", "b", 900, "B");
	flush_seq(w, v, 4, 2);

	/* no clock yet: a compaction keeps everything */
	compact_all(w, sv);
	compact_all(w, sc);
	compact_all(w, sm);
	cr_assert_eq(raw_len(w, sv, "dead", NULL, NULL), 9);
	cr_assert_eq(raw_len(w, sv, "zero", NULL, NULL), 9, "no clock: not even expiry 0");
	cr_assert_eq(raw_len(w, sc, "c-dead", NULL, NULL), 16);
	cr_assert_eq(raw_len(w, sm, "m", "a", NULL), 9);

	/* processing clock 5000 (what the value state uses; the event one
	 * at 800): "dead" and "edge" (expired at <= now) go, "live" stays;
	 * entries of 700 go in the event-time states, those of 900 stay */
	ttl_tell(w, 5000, 800);
	compact_all(w, sv);
	compact_all(w, sc);
	compact_all(w, sm);
	cr_assert_eq(raw_len(w, sv, "dead", NULL, NULL), -1, "expired at 100: dropped");
	cr_assert_eq(raw_len(w, sv, "edge", NULL, NULL), -1, "expiry == now: dropped");
	cr_assert_eq(raw_len(w, sv, "zero", NULL, NULL), -1);
	cr_assert_eq(raw_len(w, sv, "live", NULL, got), 9, "live: intact");
	cr_assert(sfs_ttl_expiry_of(got) == 5001 && got[8] == 'L');
	cr_assert_eq(raw_len(w, sc, "c-dead", NULL, NULL), -1);
	cr_assert_eq(raw_len(w, sc, "c-live", NULL, got), 16);
	cr_assert(sfs_ttl_expiry_of(got) == 900 && memcmp(got + 8, &n2, 8) == 0);
	cr_assert_eq(raw_len(w, sm, "m", "a", NULL), -1);
	cr_assert_eq(raw_len(w, sm, "m", "b", got), 9);
	cr_assert(sfs_ttl_expiry_of(got) == 900 && got[8] == 'B');
	/* physically: the bottommost compaction left only live keys and the
	 * marker (a deletion there is dropped too) */
	cr_assert_eq(raw_count(w, sv), 2, "live + marker");
	cr_assert_eq(num_prop(w, sv, "rocksdb.estimate-num-keys"), 2);
	cr_assert_eq(raw_marker(w, sv), 1, "the applied marker is never a TTL entry");
	cr_assert_eq(raw_marker(w, sc), 2);
	cr_assert_eq(raw_marker(w, sm), 2);

	/* the clock only moves forward: at 5001 "live" has expired, and a
	 * smaller clock told after that (a buffer sealed earlier, a restarted
	 * clock source) is ignored */
	ttl_tell(w, 5001, 800);
	ttl_tell(w, 10, 10);
	compact_all(w, sv);
	cr_assert_eq(raw_len(w, sv, "live", NULL, NULL), -1);
	cr_assert_eq(raw_marker(w, sv), 1);

	sfs_target_rocksdb.close(w);
	cr_assert_eq(pub_of(0)->rp_ttl_dropped, 6, "dropped %llu",
		     (unsigned long long)pub_of(0)->rp_ttl_dropped);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * A filter's removal below the bottommost level must leave a deletion:
 * an older version of the key, live at the clock (written with a longer
 * TTL), lies in L6 (ingested first); a newer Put of it, expired at the
 * clock, is in L0 with three more L0 files, whose count starts RocksDB's
 * own L0 -> L1 compaction (leveled shape).  That compaction does not
 * reach L6 (the file is still there), yet the key reads absent: the
 * newer Put became a deletion that shadows the older version.  Then a
 * full compaction: still absent, and the rest intact.
 */
Test(rdbt, an_expired_put_removed_above_an_older_version_never_resurrects_it)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_ttl tv = { .ttl_ms = 1000 };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[2];
	struct tview t[2];
	char log[256], cmd[320];
	uint32_t sv;
	sfs_ctx_t *c;

	setenv("SFS_RDBT_UNIVERSAL", "0", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &tv, &sv), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);

	/* 1: the old version, expiry 10000, as an SST: into the empty L6 */
	use_ingest(1);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	ttl_tell(w, 1000, 0);
	ttl_put(&v[0], &t[0], sv, "k", 10000, "old", 3);
	flush_seq(w, v, 1, 1);
	cr_assert_eq(num_prop(w, sv, "rocksdb.num-files-at-level6"), 1);
	sfs_target_rocksdb.close(w);

	/* 2..5: batches, each flushed to an L0 file: the new version of "k"
	 * (expiry 2000, live when written) and keys that stay live */
	use_ingest(0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	ttl_tell(w, 1500, 0);
	ttl_put(&v[0], &t[0], sv, "k", 2000, "new", 3);
	ttl_put(&v[1], &t[1], sv, "p2", 90000, "P", 1);
	flush_seq(w, v, 2, 2);
	cr_assert_eq(raw_len(w, sv, "k", NULL, NULL), 11, "the new version reads");
	for (uint64_t seq = 3; seq <= 5; seq++) {
		char k[8];

		snprintf(k, sizeof(k), "p%llu", (unsigned long long)seq);
		if (seq == 5)
			ttl_tell(w, 5000, 0);	/* "k" new: expired; old: not */
		ttl_put(&v[0], &t[0], sv, k, 90000, "P", 1);
		flush_seq(w, v, 1, seq);
	}
	/* the fourth L0 file starts an L0 -> L1 compaction */
	snprintf(log, sizeof(log), "%s/store/w0/LOG", dir);
	snprintf(cmd, sizeof(cmd), "grep -q compaction_finished '%s'", log);
	for (int i = 0; i < 200 && system(cmd) != 0; i++)
		usleep(50000);
	cr_assert_eq(system(cmd), 0, "no compaction in %s", log);
	cr_assert_eq(num_prop(w, sv, "rocksdb.num-files-at-level0"), 0);
	cr_assert_geq(num_prop(w, sv, "rocksdb.num-files-at-level1"), 1);
	cr_assert_eq(num_prop(w, sv, "rocksdb.num-files-at-level6"), 1,
		     "the old version's file was not in that compaction");
	{
		unsigned char got[64];
		long n = raw_len(w, sv, "k", NULL, got);

		cr_assert_eq(n, -1, "k reads: %s (expiry %llu)",
			     n >= 11 && !memcmp(got + 8, "old", 3)
				     ? "the old version resurfaced above a removed expired put"
				     : "the expired put was kept",
			     n >= 8 ? (unsigned long long)sfs_ttl_expiry_of(got) : 0ull);
	}
	{
		/* how: one deletion in the files (no test write deletes) */
		void *db, *cf;
		char *p;

		sfs_rdbt_test_handles(w, sv, &db, &cf);
		p = rocksdb_property_value_cf(db, cf, "rocksdb.aggregated-table-properties");
		cr_assert(p && strstr(p, "# deletions=1;"), "%s", p);
		rocksdb_free(p);
	}
	compact_all(w, sv);
	cr_assert_eq(raw_len(w, sv, "k", NULL, NULL), -1);
	for (unsigned i = 2; i <= 5; i++) {
		char k[8];

		snprintf(k, sizeof(k), "p%u", i);
		cr_assert_eq(raw_len(w, sv, k, NULL, NULL), 9, "%s", k);
	}
	cr_assert_eq(raw_marker(w, sv), 5);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	unsetenv("SFS_RDBT_UNIVERSAL");
}

/*
 * States without a TTL are never filtered: a plain value state whose
 * values start with 8 bytes that would read as a long-past expiry, and a
 * counter's merges (8 bytes each, a small int64), beside a TTL state
 * with a clock far ahead; full compactions (the merges folded at the
 * bottommost level) drop only the TTL state's entry, and the instance's
 * OPTIONS show a compaction filter on the TTL state's family only.
 */
Test(rdbt, states_without_a_ttl_are_never_filtered)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_ttl tv = { .ttl_ms = 1000 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[4];
	struct tview t[4];
	struct mview m[2];
	unsigned char got[64];
	uint32_t st, sp, sc;
	sfs_ctx_t *c;

	use_ingest(0);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &tv, &st), 0);
	cr_assert_eq(sfs_state_register(c, "pv", SFS_STATE_VALUE, &sp), 0);
	cr_assert_eq(sfs_state_register(c, "pc", SFS_STATE_COUNTER, &sc), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &r), 0);

	for (uint64_t seq = 1; seq <= 6; seq += 2) {
		ttl_put(&v[0], &t[0], st, "t", 100, "T", 1);	/* what the TTL state drops */
		ttl_put(&v[1], &t[1], sp, "p", 100, "P", 1);	/* "expiry" 100, not a TTL */
		ttl_put(&v[2], &t[2], sp, "q", 0, "", 0);	/* 8 zero bytes */
		flush_seq(w, v, 3, seq);
		merge_view(&v[0], &m[0], sc, "x", 5);
		merge_view(&v[1], &m[1], sc, "y", 1);
		flush_seq(w, v, 2, seq + 1);
	}
	ttl_tell(w, UINT64_MAX - 1, UINT64_MAX - 1);
	compact_all(w, st);
	compact_all(w, sp);
	compact_all(w, sc);
	cr_assert_eq(raw_len(w, st, "t", NULL, NULL), -1, "the TTL state's entry: dropped");
	cr_assert_eq(raw_len(w, sp, "p", NULL, got), 9, "a plain value: kept");
	cr_assert(sfs_ttl_expiry_of(got) == 100 && got[8] == 'P');
	cr_assert_eq(raw_len(w, sp, "q", NULL, NULL), 8);
	cr_assert_eq(raw_count(w, sp), 3, "p, q and the marker");
	cr_assert_eq(raw_len(w, sc, "x", NULL, got), 8, "merges folded, not filtered");
	cr_assert_eq(sfs_ttl_expiry_of(got), 15);	/* the int64, read as the filter would */
	expect(r, sc, "x", 15, 6);
	expect(r, sc, "y", 3, 6);
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_target_rocksdb.close(w);
	cr_assert_eq(pub_of(0)->rp_ttl_dropped, 1);
	{
		/* no filter at all where there is no TTL: no cost */
		char f[64];

		cf_option("st\\:tv", "compaction_filter", f, sizeof(f));
		cr_assert_str_eq(f, "sfs.ttl");
		cf_option("st\\:pv", "compaction_filter", f, sizeof(f));
		cr_assert_str_eq(f, "nullptr");
		cf_option("st\\:pc", "compaction_filter", f, sizeof(f));
		cr_assert_str_eq(f, "nullptr");
	}
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/* A staged checkpoint of an instance is private like the rest of the data:
 * RocksDB makes its checkpoint directory 0755, sfs_rdb_checkpoint makes
 * it 0700 (and the shared/ beneath). */
Test(rdbt, a_staged_checkpoint_directory_is_0700)
{
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	char db[256], st[256], sub[300], *err = NULL;
	struct stat sb;
	rocksdb_t *d;

	rocksdb_options_set_create_if_missing(o, 1);
	snprintf(db, sizeof(db), "%s/db", dir);
	snprintf(st, sizeof(st), "%s/stage", dir);
	d = rocksdb_open(o, db, &err);
	cr_assert_null(err, "%s", err);
	rocksdb_put(d, wo, "k", 1, "v", 1, &err);
	cr_assert_null(err, "%s", err);
	cr_assert_eq(sfs_rdb_checkpoint(d, st, SFS_STAGE_SHARED, "test", db), 0, "%s",
		     sfs_last_error());
	snprintf(sub, sizeof(sub), "%s/%s", st, SFS_STAGE_SHARED);
	cr_assert_eq(stat(st, &sb), 0);
	cr_assert_eq(sb.st_mode & 07777, 0700, "%s: mode %o", st, sb.st_mode & 07777);
	cr_assert_eq(stat(sub, &sb), 0);
	cr_assert_eq(sb.st_mode & 07777, 0700, "%s: mode %o", sub, sb.st_mode & 07777);
	rocksdb_close(d);
	rocksdb_writeoptions_destroy(wo);
	rocksdb_options_destroy(o);
}

/* ---- rollback in place: pin and rollback (store/target.h) ----------------------- */

#define RB_KEYS 48u	/* value keys v0..v47 */
#define RB_CTRS 16u	/* counters n0..n15 */
#define RB_MAPS 4u	/* maps m0..m3, entries u0..u7 each */
#define RB_UKEYS 8u
#define RB_VLEN 24u
#define RB_MAXV (RB_KEYS + RB_CTRS + RB_MAPS * RB_UKEYS)

/* What the instance must hold: the model a buffer is applied to. */
struct rb_model {
	int has[RB_KEYS];
	char val[RB_KEYS][RB_VLEN];
	int chas[RB_CTRS];
	int64_t cnt[RB_CTRS];
	int mhas[RB_MAPS][RB_UKEYS];
	char mval[RB_MAPS][RB_UKEYS][RB_VLEN];
};

/* One buffer as the flush hands it over: each key once, a map's entries
 * together. */
struct rb_buf {
	struct sfs_wbuf_view v[RB_MAXV];
	unsigned char key[RB_MAXV][48];
	unsigned char val[RB_MAXV][sizeof(struct sfs_map_ent) + RB_VLEN];
	int64_t d[RB_MAXV];
	unsigned n;
};

static uint32_t rb_v, rb_c, rb_m;

static uint64_t rb_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A random buffer @seq over @m (applied to it): puts and deletes of
 * values, counter deltas, map puts and removes. */
static void rb_gen(struct rb_buf *b, struct rb_model *m, uint64_t *rng, uint64_t seq)
{
	char k[16];

	b->n = 0;
	for (unsigned i = 0; i < RB_KEYS; i++) {
		struct sfs_wbuf_view *v = &b->v[b->n];

		if (rb_rand(rng) % 3)
			continue;
		snprintf(k, sizeof(k), "v%u", i);
		*v = (struct sfs_wbuf_view){ .key = b->key[b->n], .klen = vkey(b->key[b->n], rb_v, k) };
		if (rb_rand(rng) % 4) {
			snprintf(m->val[i], RB_VLEN, "s%llu.%u.%llu", (unsigned long long)seq, i,
				 (unsigned long long)(rb_rand(rng) % 1000));
			m->has[i] = 1;
			memcpy(b->val[b->n], m->val[i], strlen(m->val[i]));
			v->value = b->val[b->n];
			v->len = (uint32_t)strlen(m->val[i]);
			v->kind = SFS_WBUF_PUT;
		} else {
			m->has[i] = 0;
			v->kind = SFS_WBUF_DELETE;
		}
		b->n++;
	}
	for (unsigned i = 0; i < RB_CTRS; i++) {
		struct mview mv;

		if (rb_rand(rng) % 3)
			continue;
		snprintf(k, sizeof(k), "n%u", i);
		b->d[b->n] = (int64_t)(rb_rand(rng) % 100) - 20;
		merge_view(&b->v[b->n], &mv, rb_c, k, b->d[b->n]);
		memcpy(b->key[b->n], mv.key, b->v[b->n].klen);
		b->v[b->n].key = b->key[b->n];
		b->v[b->n].value = &b->d[b->n];
		m->cnt[i] += b->d[b->n];
		m->chas[i] = 1;
		b->n++;
	}
	for (unsigned j = 0; j < RB_MAPS; j++)
		for (unsigned u = 0; u < RB_UKEYS; u++) {
			struct sfs_map_ent me = { 0, 0 };
			struct sfs_wbuf_view *v = &b->v[b->n];
			uint32_t pl, len = 0;
			char uk[8];

			if (rb_rand(rng) % 4)
				continue;
			snprintf(k, sizeof(k), "m%u", j);
			snprintf(uk, sizeof(uk), "u%u", u);
			pl = pkey(b->key[b->n], rb_m, k);
			memcpy(b->key[b->n] + pl, uk, strlen(uk));
			if (rb_rand(rng) % 4) {
				snprintf(m->mval[j][u], RB_VLEN, "e%llu.%u.%u", (unsigned long long)seq, j,
					 u);
				m->mhas[j][u] = 1;
				len = (uint32_t)strlen(m->mval[j][u]);
				memcpy(b->val[b->n] + sizeof(me), m->mval[j][u], len);
			} else {
				m->mhas[j][u] = 0;
				me.me_flags = SFS_MAP_REMOVED;
			}
			memcpy(b->val[b->n], &me, sizeof(me));
			*v = (struct sfs_wbuf_view){ .key = b->key[b->n], .klen = pl + (uint32_t)strlen(uk),
						     .value = b->val[b->n],
						     .len = (uint32_t)sizeof(me) + len,
						     .kind = SFS_WBUF_PUT };
			b->n++;
		}
}

/* 0 if reader @r, caught up, holds exactly @m; else 1 + which differs
 * (in @why). */
static int rb_diff(struct sfs_target_reader *r, const struct rb_model *m, char *why, size_t wn)
{
	char k[16];
	int rc;

	if ((rc = sfs_target_rocksdb.rd.catch_up(r))) {
		snprintf(why, wn, "catch_up: %s", sfs_last_error());
		return 1;
	}
	for (unsigned i = 0; i < RB_KEYS; i++) {
		snprintf(k, sizeof(k), "v%u", i);
		if (!probe_str(r, rb_v, 0, k, m->has[i] ? m->val[i] : NULL)) {
			snprintf(why, wn, "value %s: expected %s", k, m->has[i] ? m->val[i] : "none");
			return 1;
		}
	}
	for (unsigned i = 0; i < RB_CTRS; i++) {
		unsigned char kb[32];
		struct sfs_probe p = { .ns = 0, .key = kb };
		struct sfs_probe_result res;
		int64_t v = 0;

		snprintf(k, sizeof(k), "n%u", i);
		p.klen = vkey(kb, rb_c, k);
		if (sfs_target_rocksdb.rd.probe(r, &p, 1, &res) || res.found != m->chas[i] ||
		    (res.found && (res.len != 8 || (memcpy(&v, res.value, 8), v != m->cnt[i])))) {
			snprintf(why, wn, "counter %s: %lld, expected %lld", k, (long long)v,
				 (long long)m->cnt[i]);
			return 1;
		}
	}
	for (unsigned j = 0; j < RB_MAPS; j++) {
		char want[512];
		size_t n = 0;

		want[0] = '\0';
		for (unsigned u = 0; u < RB_UKEYS; u++)
			if (m->mhas[j][u])
				n += (size_t)snprintf(want + n, sizeof(want) - n, "u%u=%s;", u,
						      m->mval[j][u]);
		snprintf(k, sizeof(k), "m%u", j);
		if (!map_is(r, rb_m, 0, k, want, 0)) {
			snprintf(why, wn, "map %s: expected '%s'", k, want);
			return 1;
		}
	}
	return 0;
}

static void rb_expect(struct sfs_target_reader *r, const struct rb_model *m, const char *who)
{
	char why[600];

	cr_assert_eq(rb_diff(r, m, why, sizeof(why)), 0, "%s: %s", who, why);
}

static void rb_flush(struct sfs_target_writer *w, struct rb_model *m, uint64_t *rng, uint64_t seq)
{
	static struct rb_buf b;

	rb_gen(&b, m, rng, seq);
	flush_seq(w, b.v, b.n, seq);
}

static void rb_stage(char *buf, size_t n, uint64_t id)
{
	snprintf(buf, n, "%s/ck/stage/w0/b%llu", dir, (unsigned long long)id);
}

/* Stage checkpoint @id of @w's current version, as the compactor does. */
static void rb_snapshot(struct sfs_target_writer *w, uint64_t id)
{
	char st[256];

	rb_stage(st, sizeof(st), id);
	cr_assert_eq(sfs_target_rocksdb.snapshot(w, st), 0, "%s", sfs_last_error());
}

/* Open a deletion window (the grace period over this process's worker
 * passed): obsolete files leave the instance for real. */
static void rb_purge(struct sfs_target_writer *w, sfs_ctx_t *c)
{
	uint64_t p0 = pub_of(0)->rp_purges;

	for (int i = 0; i < 5000 && pub_of(0)->rp_purges == p0; i++) {
		sfs_ctx_quiescent(c);
		(void)sfs_target_rocksdb.busy(w);
		usleep(1000);
	}
	cr_assert_gt(pub_of(0)->rp_purges, p0, "a deletion window opened");
}

static void rb_register(sfs_ctx_t **c)
{
	struct sfs_worker_opts o = small_opts();

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(*c, "v", SFS_STATE_VALUE, &rb_v), 0);
	cr_assert_eq(sfs_state_register(*c, "c", SFS_STATE_COUNTER, &rb_c), 0);
	cr_assert_eq(sfs_state_register(*c, "m", SFS_STATE_MAP, &rb_m), 0);
}

/* Names in directory @d (one level), and how many; 0 if it is missing. */
static unsigned rb_ls(const char *d, char *out, size_t n)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	unsigned cnt = 0;
	size_t o = 0;

	if (out)
		out[0] = '\0';
	if (!dd)
		return 0;
	while ((e = readdir(dd)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			cnt++;
			if (out && o < n)
				o += (size_t)snprintf(out + o, n - o, "%s ", e->d_name);
		}
	closedir(dd);
	return cnt;
}

/* SSTs in pin directory @pd that the live instance no longer has. */
static unsigned rb_gone_from_live(const char *pd)
{
	char live[256], f[600];
	DIR *dd = opendir(pd);
	struct dirent *e;
	unsigned n = 0;

	snprintf(live, sizeof(live), "%s/store/w0", dir);
	cr_assert_not_null(dd, "%s", pd);
	while ((e = readdir(dd))) {
		size_t l = strlen(e->d_name);

		if (l < 4 || strcmp(e->d_name + l - 4, ".sst"))
			continue;
		snprintf(f, sizeof(f), "%s/%s", live, e->d_name);
		n += access(f, F_OK) != 0;
	}
	closedir(dd);
	return n;
}

/*
 * The model test: random puts, deletes, counter merges and map entries
 * over several buffers, staged at barriers; the version of barrier 4
 * pinned when its checkpoint completes; more buffers, with compactions and
 * a deletion window that remove the pinned version's files from the live
 * instance; then a rollback.  A new reader and one that had caught up to
 * the newest version before the rollback both read exactly the model as
 * of the pin; a redo of a buffer <= the pinned seq is skipped; later
 * buffers apply on top; a second rollback returns to the same version; a
 * buffer applied but not committed at a rollback is abandoned (the
 * restarted stream reuses its seq); the next pin leaves no directory or
 * file of the old ones behind.
 * Several seeds, both write paths (SST ingest from 8 entries of a state,
 * batches below).
 */
static void rb_model_run(uint64_t seed)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *old, *fresh, *again;
	struct sfs_proc_slot *slot;
	static struct rb_model m, at[16], pinned;
	uint64_t rng = seed, seq, got = 0;
	char pd[256], names[512];
	sfs_ctx_t *c;

	setenv("SFS_RDBT_INGEST_MIN", "8", 1);
	memset(&m, 0, sizeof(m));
	rb_register(&c);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), -ENOENT, "nothing pinned yet");
	cr_assert_eq(sfs_target_rocksdb.pin(w, 0), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &old), 0);

	for (seq = 1; seq <= 6; seq++) {
		rb_flush(w, &m, &rng, seq);
		if (seq % 2 == 0) {	/* a barrier: staged as checkpoint @seq */
			rb_snapshot(w, seq);
			at[seq] = m;
		}
		if (seq == 3)
			compact_all(w, rb_v);
	}
	rb_expect(old, &m, "before the pin");
	/* checkpoint 4 completes (6 is staged, not complete) */
	cr_assert_eq(sfs_target_rocksdb.pin(w, 4), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.pin(w, 4), 0, "a retried pin keeps it");
	pinned = at[4];
	for (; seq <= 12; seq++) {
		rb_flush(w, &m, &rng, seq);
		if (seq % 3 == 0) {
			compact_all(w, rb_v);
			compact_all(w, rb_c);
			compact_all(w, rb_m);
		}
	}
	rb_purge(w, c);
	snprintf(pd, sizeof(pd), "%s/store/w0.pin/c4", dir);
	cr_assert_gt(rb_gone_from_live(pd), 0, "compactions removed files of the pinned version "
		     "from the live instance (what the pin must keep)");
	rb_expect(old, &m, "the newest version, before the rollback");

	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
	cr_assert_eq(got, 4, "the pinned version's seq: %llu", (unsigned long long)got);
	cr_assert_eq(pub_of(0)->rp_applied, 4);
	rb_expect(old, &pinned, "a reader that had caught up to a newer version");
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &fresh), 0);
	rb_expect(fresh, &pinned, "a new reader");

	/* a redo of an old buffer is skipped (its seq is <= the pin's) */
	{
		struct rb_model scratch = pinned;
		uint64_t r2 = seed ^ 0x5555;

		rb_flush(w, &scratch, &r2, 3);
		rb_expect(fresh, &pinned, "after a redo of seq 3");
	}
	/* the writer goes on: buffers 5.. again, other contents */
	m = pinned;
	for (seq = 5; seq <= 7; seq++)
		rb_flush(w, &m, &rng, seq);
	compact_all(w, rb_m);
	rb_expect(old, &m, "buffers after the rollback (old reader)");
	rb_expect(fresh, &m, "buffers after the rollback (new reader)");

	/* the pin stays: a second rollback returns to the same version */
	got = 0;
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
	cr_assert_eq(got, 4);
	rb_expect(old, &pinned, "second rollback (old reader)");
	rb_expect(fresh, &pinned, "second rollback");
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &again), 0);
	rb_expect(again, &pinned, "second rollback (a new reader)");
	/* buffer 5 under way (applied, not committed) when a rollback comes:
	 * abandoned, the restarted stream's own buffer 5 is all that lands */
	{
		static struct rb_buf jb;
		struct rb_model scratch = pinned;
		uint64_t r3 = seed ^ 0xabcdef;

		rb_gen(&jb, &scratch, &r3, 5);
		cr_assert_eq(sfs_target_rocksdb.apply(w, jb.v, jb.n, 5), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
		cr_assert_eq(got, 4);
	}
	m = pinned;
	for (seq = 5; seq <= 8; seq++)
		rb_flush(w, &m, &rng, seq);
	rb_expect(again, &m, "after the second rollback");
	rb_expect(old, &m, "after the second rollback (old reader)");

	/* no leak: the next pin leaves its own version only */
	rb_snapshot(w, 20);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 20), 0, "%s", sfs_last_error());
	snprintf(pd, sizeof(pd), "%s/store/w0.pin", dir);
	for (int i = 0; i < 5000 && rb_ls(pd, NULL, 0) != 1; i++)
		usleep(1000);	/* a rollback's old instance is removed by a thread */
	cr_assert_eq(rb_ls(pd, names, sizeof(names)), 1, "%s: %s", pd, names);
	cr_assert_str_eq(names, "c20 ");
	snprintf(pd, sizeof(pd), "%s/store", dir);
	rb_ls(pd, names, sizeof(names));
	cr_assert_eq(rb_ls(pd, NULL, 0), 4, "%s: %s", pd, names);	/* w0 .ingest .pin .sec */

	sfs_target_rocksdb.rd.reader_close(old);
	sfs_target_rocksdb.rd.reader_close(fresh);
	sfs_target_rocksdb.rd.reader_close(again);
	sfs_target_rocksdb.close(w);
	cr_assert_eq(rb_ls(pd, names, sizeof(names)), 2, "after close: %s", names);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

Test(rdbt, rollback_returns_every_reader_to_the_pinned_version_seed1)
{
	rb_model_run(0x9e3779b97f4a7c15ull);
}

Test(rdbt, rollback_returns_every_reader_to_the_pinned_version_seed2)
{
	rb_model_run(0x2545f4914f6cdd1dull);
}

/* -ENOENT: a rollback with nothing pinned, a pin of an id this writer
 * never staged (which also releases the previous pin: nothing is pinned
 * then), and the rollback after it. */
Test(rdbt, pin_and_rollback_say_enoent_when_nothing_is_pinned)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	static struct rb_model m;
	uint64_t rng = 7, got = 99;
	char pd[256], names[256];
	sfs_ctx_t *c;

	rb_register(&c);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), -ENOENT);
	cr_assert_eq(got, 99, "*seq untouched");
	rb_flush(w, &m, &rng, 1);
	rb_snapshot(w, 1);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 1), 0, "%s", sfs_last_error());
	rb_flush(w, &m, &rng, 2);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 2), -ENOENT, "2 was never staged");
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), -ENOENT, "the pin of 1 is released");
	snprintf(pd, sizeof(pd), "%s/store/w0.pin", dir);
	cr_assert_eq(rb_ls(pd, names, sizeof(names)), 0, "%s: %s", pd, names);
	/* staged once, pinned, then a pin of an id never staged by this writer */
	rb_snapshot(w, 3);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 3), 0);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 5), -ENOENT);
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), -ENOENT);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/* pin(0) right after open pins the version at open: a writer reopened
 * over buffers 1-3 pins it, applies 4-5, and a rollback returns to 3
 * (seq 3).  pin(0) once a buffer is applied is refused (and releases the
 * previous pin). */
Test(rdbt, pin_zero_pins_the_version_at_open)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	static struct rb_model m, at3;
	uint64_t rng = 11, got = 0;
	sfs_ctx_t *c;

	rb_register(&c);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.pin(w, 0), 0, "%s", sfs_last_error());
	rb_flush(w, &m, &rng, 1);
	rb_flush(w, &m, &rng, 2);
	cr_assert_neq(sfs_target_rocksdb.pin(w, 0), 0, "pin 0 after an apply");
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), -ENOENT, "the refused pin released it");
	rb_flush(w, &m, &rng, 3);
	at3 = m;
	sfs_target_rocksdb.close(w);	/* a compactor restart */
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_target_rocksdb.pin(w, 0), 0, "%s", sfs_last_error());
	rb_flush(w, &m, &rng, 4);
	rb_flush(w, &m, &rng, 5);
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &r), 0);
	rb_expect(r, &m, "before the rollback");
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
	cr_assert_eq(got, 3);
	rb_expect(r, &at3, "the version at open");
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/* State TTL: a rollback puts the filter's clock back to the pinned
 * version's.  An entry live at the clock of checkpoint 1 (expiry 1000,
 * clock 100), the clock then moved to 5000, a rollback to 1 and a full
 * compaction: the entry stays (the replay from 1 reads it by its own
 * clocks, <1000); a filter left at 5000 would have dropped it. */
Test(rdbt, a_rollback_puts_the_ttl_filters_clock_back)
{
	struct sfs_worker_opts o = small_opts();
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_ttl tv = { .ttl_ms = 1000 };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view v[1];
	struct tview t[1];
	uint64_t got = 0;
	uint32_t sv;
	sfs_ctx_t *c;

	use_ingest(0);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_ttl(c, "tv", SFS_STATE_VALUE, &tv, &sv), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	ttl_tell(w, 100, 100);
	ttl_put(&v[0], &t[0], sv, "a", 1000, "A", 1);
	flush_seq(w, v, 1, 1);
	rb_snapshot(w, 1);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 1), 0, "%s", sfs_last_error());
	ttl_tell(w, 5000, 5000);
	ttl_put(&v[0], &t[0], sv, "b", 9000, "B", 1);
	flush_seq(w, v, 1, 2);
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
	cr_assert_eq(got, 1);
	compact_all(w, sv);
	cr_assert_eq(raw_len(w, sv, "a", NULL, NULL), 9, "live at the pinned version's clock");
	cr_assert_eq(raw_len(w, sv, "b", NULL, NULL), -1, "written after the pin: gone");
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * Kill -9 inside a rollback: a child compactor flushes buffers 1-4,
 * stages and pins checkpoint 2, and dies at a fault point of its
 * rollback.  A new compactor's open then finds the version before the
 * call (killed before the swap) or the pinned one (after it), whole: a
 * reader reads exactly one model, and it is the one expected for that
 * point; buffers flushed after the recovery apply on top.
 */
static const char *rb_crash;

static int rb_child(void *arg)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	static struct rb_model m;
	struct sfs_seg s;
	uint64_t rng = 42, got;

	(void)arg;
	if (sfs_seg_attach(job, 0, &s) || sfs_proc_register(&s, SFS_ROLE_COMPACTOR, 0, &slot))
		return 10;
	if (sfs_target_rocksdb.open(&s, 0, slot, &cfg, &w))
		return 11;
	for (uint64_t seq = 1; seq <= 4; seq++) {
		static struct rb_buf b;
		char st[256];

		rb_gen(&b, &m, &rng, seq);
		if (sfs_target_rocksdb.apply(w, b.v, b.n, seq))
			return 12;
		for (int i = 0; i < 20000; i++) {
			int rc = sfs_target_rocksdb.commit(w, seq);

			if (rc == 0)
				break;
			if (rc != -EAGAIN)
				return 13;
			usleep(500);
		}
		if (seq == 2) {
			rb_stage(st, sizeof(st), 2);
			if (sfs_target_rocksdb.snapshot(w, st) || sfs_target_rocksdb.pin(w, 2))
				return 14;
		}
	}
	sfs_fault_reset();
	if (sfs_fault_arm(rb_crash))
		return 15;
	sfs_target_rocksdb.rollback(w, &got);
	return 16;	/* the fault point was not reached */
}

static void rb_killed_at(const char *rule, int pinned_expected)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	static struct rb_model m, at2, at4;
	uint64_t rng = 42;
	char why[600], pd[256], names[256];
	int st, in2, in4;
	sfs_ctx_t *c;
	pid_t pid;

	setenv("SFS_RDBT_INGEST_MIN", "8", 1);
	rb_register(&c);
	rb_crash = rule;
	pid = th_fork(rb_child, NULL);
	st = th_wait(pid, 120000);
	cr_assert(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		  "the child died at %s (status 0x%x, exit %d)", rule, st, th_exit_code(st));
	/* the models, as the child built them (the same seed) */
	for (uint64_t seq = 1; seq <= 4; seq++) {
		static struct rb_buf b;

		rb_gen(&b, &m, &rng, seq);
		if (seq == 2)
			at2 = m;
	}
	at4 = m;
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	snprintf(pd, sizeof(pd), "%s/store/w0.pin", dir);
	cr_assert_eq(rb_ls(pd, names, sizeof(names)), 0, "the open removed %s: %s", pd, names);
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &r), 0);
	in2 = rb_diff(r, &at2, why, sizeof(why)) == 0;
	in4 = rb_diff(r, &at4, why, sizeof(why)) == 0;
	cr_assert(in2 || in4, "killed at %s: neither version (a mix): %s", rule, why);
	cr_assert_eq(in2, pinned_expected, "killed at %s: the %s version expected", rule,
		     pinned_expected ? "pinned" : "previous");
	/* the writer goes on from the version found */
	m = pinned_expected ? at2 : at4;
	rng = 4242;
	rb_flush(w, &m, &rng, 5);
	rb_expect(r, &m, "a buffer after the recovery");
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

Test(rdbt, a_rollback_killed_before_its_swap_leaves_the_previous_version)
{
	rb_killed_at("rocksdb.rollback.copy:1", 0);
}

Test(rdbt, a_rollback_killed_after_its_swap_leaves_the_pinned_version)
{
	rb_killed_at("rocksdb.rollback.swap:1", 1);
}

/*
 * Readers racing rollbacks: a reader in another process probes every value
 * key and every counter in a loop (one batch each: one catch-up) while the
 * compactor applies buffers 3..6 over the pinned version 2 (other contents
 * each round) and rolls back, again and again.  Each batch must be one version whole, the one
 * its tag (the state's applied marker) names: a secondary that tailed
 * the new instance's MANIFEST over the old one's files fails it; and it
 * must follow (nearly) every rollback: one that kept catching up on the
 * old instance after a rollback was published reads stale versions.
 */
#define RB_ROUNDS 12
#define RB_TOP 6	/* buffers 3..RB_TOP follow the pin each round */

/* The versions of round @round: at[0] empty, 1 and 2 before the pin, 3
 * and 4 what each round applies after it (other contents each round). */
static void rb_models(struct rb_model *at, int round)
{
	uint64_t rng = 0x1234;
	struct rb_model m;

	memset(&m, 0, sizeof(m));
	memset(at, 0, sizeof(*at));
	for (uint64_t seq = 1; seq <= RB_TOP; seq++) {
		static struct rb_buf b;

		if (seq == 3)
			rng = 0x777 + (uint64_t)round;
		rb_gen(&b, &m, &rng, seq);
		at[seq] = m;
	}
}

/* Batch @res of @n results (values: part 0, counters: 1) is state @part of
 * version @tag of some round. */
static int rb_matches(struct rb_model (*at)[RB_TOP + 1], const struct sfs_probe_result *res, unsigned part,
		      uint64_t tag)
{
	for (int round = 0; round < RB_ROUNDS; round++) {
		const struct rb_model *m = &at[round][tag];
		int ok = 1;

		for (unsigned i = 0; ok && i < (part ? RB_CTRS : RB_KEYS); i++) {
			int64_t v;

			if (!part)
				ok = res[i].found == m->has[i] &&
				     (!res[i].found || (res[i].len == strlen(m->val[i]) &&
							!memcmp(res[i].value, m->val[i], res[i].len)));
			else
				ok = res[i].found == m->chas[i] &&
				     (!res[i].found || (memcpy(&v, res[i].value, 8), v == m->cnt[i]));
		}
		if (ok)
			return 1;
	}
	return 0;
}

static int rb_race_reader(void *arg)
{
	static struct rb_model at[RB_ROUNDS][RB_TOP + 1];
	struct sfs_target_reader *r;
	struct sfs_probe p[RB_KEYS + RB_CTRS];
	struct sfs_probe_result res[RB_KEYS + RB_CTRS];
	unsigned char kb[RB_KEYS + RB_CTRS][32];
	struct sfs_rdbt_pub *pub = NULL;
	unsigned loops = 0, seen_rb = 0, backs = 0;
	int done;
	uint64_t last = 0;
	struct sfs_seg s;
	char k[16];

	(void)arg;
	for (int round = 0; round < RB_ROUNDS; round++)
		rb_models(at[round], round);
	for (unsigned i = 0; i < RB_KEYS + RB_CTRS; i++) {
		if (i < RB_KEYS)
			snprintf(k, sizeof(k), "v%u", i);
		else
			snprintf(k, sizeof(k), "n%u", i - RB_KEYS);
		p[i] = (struct sfs_probe){ .key = kb[i],
					   .klen = vkey(kb[i], i < RB_KEYS ? rb_v : rb_c, k) };
	}
	if (sfs_seg_attach(job, 0, &s) || sfs_target_rocksdb.rd.reader_open(&s, 0, &r))
		return 10;
	for (;;) {
		if (!pub) {
			uint64_t off, size;

			if (sfs_seg_region_find(&s, "rdbt.0", &off, &size) == 0)
				pub = sfs_seg_ptr(&s, off);
		}
		/* the last round: one more read, after the last rollback */
		done = pub && sfs_load_acquire(&pub->rp_rollbacks) >= RB_ROUNDS;
		for (unsigned part = 0; part < 2; part++) {
			unsigned lo = part ? RB_KEYS : 0, n = part ? RB_CTRS : RB_KEYS;
			uint64_t tag = UINT64_MAX;

			if (sfs_target_rocksdb.rd.catch_up(r) ||
			    sfs_target_rocksdb.rd.probe(r, p + lo, n, res + lo))
				return 11;
			for (unsigned i = lo; i < lo + n; i++)
				if (res[i].found) {
					if (tag != UINT64_MAX && res[i].tag != tag)
						return 12;	/* two versions in one batch */
					tag = res[i].tag;
				}
			if (tag == UINT64_MAX)
				continue;	/* nothing yet */
			if (tag > RB_TOP)
				return 13;
			if (!rb_matches(at, res + lo, part, tag))
				return (part ? 30 : 20) + (int)tag;
			if (!part) {
				backs += tag < last;	/* a rollback followed */
				last = tag;
			}
		}
		loops++;
		seen_rb = pub ? (unsigned)sfs_load_relaxed(&pub->rp_rollbacks) : 0;
		if (done)
			break;
	}
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_seg_detach(&s);
	fprintf(stderr, "racing reader: %u loops, %u rollbacks followed of %u\n", loops, backs,
		seen_rb);
	return loops >= 20 && backs >= RB_ROUNDS - 3 ? 0 : 50;	/* 12 of 12 seen here */
}

Test(rdbt, readers_racing_rollbacks_read_one_whole_version_at_a_time)
{
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	static struct rb_model m, at[RB_TOP + 1];
	uint64_t rng = 0x1234, got;

	int st;
	sfs_ctx_t *c;
	pid_t pid;

	setenv("SFS_RDBT_INGEST_MIN", "8", 1);
	rb_register(&c);
	rb_models(at, 0);
	pid = th_fork(rb_race_reader, NULL);	/* before this process touches RocksDB */
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	rb_flush(w, &m, &rng, 1);
	rb_flush(w, &m, &rng, 2);
	rb_snapshot(w, 2);
	cr_assert_eq(sfs_target_rocksdb.pin(w, 2), 0, "%s", sfs_last_error());
	for (int round = 0; round < RB_ROUNDS; round++) {
		m = at[2];
		rng = 0x777 + (uint64_t)round;
		for (uint64_t seq = 3; seq <= RB_TOP; seq++)
			rb_flush(w, &m, &rng, seq);
		compact_all(w, rb_v);
		usleep(50000);	/* the reader catches up to the newest */
		cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
		cr_assert_eq(got, 2);
		usleep(50000);	/* ... and follows the rollback */
	}
	st = th_wait(pid, 120000);
	cr_assert_eq(th_exit_code(st), 0, "the racing reader: exit %d (20+v: values of version v "
		     "of no round, 30+v: counters, 12: two versions in a batch, 50: too few loops or rollbacks followed)",
		     th_exit_code(st));
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}

/*
 * Bench, skipped unless SFS_RDBT_ROLLBACK_BENCH_MB=N: an instance of about
 * N MB (1 KiB incompressible values, 16 MiB buffers, each ingested as an
 * SST), staged as checkpoint 1 and pinned; then a quarter as much again
 * overwriting the oldest keys, a full compaction (the pinned version's
 * files leave the live set), and a rollback.  Prints the files a pin
 * holds, what staging costs with the pin's links and without (RocksDB's
 * own checkpoint of the same instance), the pin, and the rollback (its
 * phases: the target's log line).  SFS_RDBT_ROLLBACK_BENCH_BUSY=1: no
 * full compaction, the rollback comes while RocksDB's own may be running.
 */
static void bench_commit(struct sfs_target_writer *w, uint64_t seq)
{
	int rc;

	for (int i = 0; i < 1200000 && (rc = sfs_target_rocksdb.commit(w, seq)) == -EAGAIN; i++)
		usleep(500);
	cr_assert_eq(rc, 0, "%s", sfs_last_error());
}

Test(rdbt, bench_rollback_time_vs_instance_size, .timeout = 7200)
{
	const char *e = getenv("SFS_RDBT_ROLLBACK_BENCH_MB");
	const unsigned per = 16384, vlen = 1024;
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_target_reader *r;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view *v;
	unsigned char (*keys)[24], *vals;
	uint64_t mb, nbuf, seq, rng = 88172645463325252ull, t0, got;
	double t_snap = 0, t_plain = 0, t_pin = 0, t_rb;
	char st[256], pd[256], plain[256];
	unsigned files, gone;
	uint32_t sid;
	sfs_ctx_t *c;
	struct sfs_worker_opts o = small_opts();

	if (!e) {
		teardown();	/* a skipped test's fini does not run: its segment would stay */
		cr_skip_test("SFS_RDBT_ROLLBACK_BENCH_MB unset");
	}
	mb = strtoull(e, NULL, 10);
	nbuf = mb / 16 ? mb / 16 : 1;
	setenv("SFS_RDBT_INGEST_MIN", "1", 1);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "v", SFS_STATE_VALUE, &sid), 0);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot), 0);
	cr_assert_eq(sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w), 0, "%s", sfs_last_error());
	v = calloc(per, sizeof(*v));
	keys = calloc(per, sizeof(*keys));
	vals = malloc((size_t)per * vlen);
	cr_assert(v && keys && vals);
	for (seq = 1; seq <= nbuf + nbuf / 4 + 1; seq++) {
		/* the last quarter overwrites the oldest keys */
		uint64_t base = seq <= nbuf ? (seq - 1) * per : (seq - nbuf - 1) * per;
		char k[24];

		for (size_t i = 0; i < (size_t)per * vlen / 8; i++)
			memcpy(vals + i * 8, (rb_rand(&rng), &rng), 8);
		for (unsigned i = 0; i < per; i++) {
			snprintf(k, sizeof(k), "k%012llu", (unsigned long long)(base + i));
			v[i] = (struct sfs_wbuf_view){ .key = keys[i], .klen = vkey(keys[i], sid, k),
						       .value = vals + (size_t)i * vlen, .len = vlen,
						       .kind = SFS_WBUF_PUT };
		}
		cr_assert_eq(sfs_target_rocksdb.apply(w, v, per, seq), 0, "%s", sfs_last_error());
		bench_commit(w, seq);
		if (seq == nbuf) {
			void *db, *cf;

			rb_stage(st, sizeof(st), 1);
			t0 = sfs_now_ns();
			cr_assert_eq(sfs_target_rocksdb.snapshot(w, st), 0, "%s", sfs_last_error());
			t_snap = (sfs_now_ns() - t0) / 1e6;
			sfs_rdbt_test_handles(w, sid, &db, &cf);
			snprintf(plain, sizeof(plain), "%s/plain", dir);
			t0 = sfs_now_ns();
			cr_assert_eq(sfs_rdb_checkpoint(db, plain, SFS_STAGE_SHARED, "bench", plain), 0);
			t_plain = (sfs_now_ns() - t0) / 1e6;
			t0 = sfs_now_ns();
			cr_assert_eq(sfs_target_rocksdb.pin(w, 1), 0, "%s", sfs_last_error());
			t_pin = (sfs_now_ns() - t0) / 1e6;
		}
	}
	if (!getenv("SFS_RDBT_ROLLBACK_BENCH_BUSY")) {
		compact_all(w, sid);
		rb_purge(w, c);
	}	/* else: RocksDB's own compactions may be running at the rollback */
	snprintf(pd, sizeof(pd), "%s/store/w0.pin/c1", dir);
	files = rb_ls(pd, NULL, 0);
	gone = rb_gone_from_live(pd);
	t0 = sfs_now_ns();
	cr_assert_eq(sfs_target_rocksdb.rollback(w, &got), 0, "%s", sfs_last_error());
	t_rb = (sfs_now_ns() - t0) / 1e6;
	cr_assert_eq(got, nbuf);
	cr_assert_eq(sfs_target_rocksdb.rd.reader_open(&seg, 0, &r), 0);
	cr_assert_eq(sfs_target_rocksdb.rd.catch_up(r), 0, "%s", sfs_last_error());
	{
		char k[24];

		/* the first key of the last buffer before the pin, as it was */
		snprintf(k, sizeof(k), "k%012llu", (unsigned long long)((nbuf - 1) * per));
		cr_assert(!probe_str(r, sid, 0, k, NULL), "present after the rollback");
	}
	fprintf(stderr, "bench: %llu MB pinned (%llu buffers), %u files in the pin (%u SSTs, %u "
		"of them gone from the live set after compaction); staging %.1f ms (RocksDB's "
		"checkpoint alone %.1f ms), pin %.1f ms, rollback %.1f ms\n",
		(unsigned long long)(nbuf * 16), (unsigned long long)nbuf, files, files - 3,
		gone, t_snap, t_plain, t_pin, t_rb);
	sfs_target_rocksdb.rd.reader_close(r);
	sfs_target_rocksdb.close(w);
	free(v);
	free(keys);
	free(vals);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
}
