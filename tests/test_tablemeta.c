/*
 * test_tablemeta.c — the table store's metadata formats: deletion-vector
 * index files (store/table/layout/dvec.c) and snapshots / manifest lists / manifests
 * (store/table/layout/manifest.c).  Random round trips against a reference (both
 * vector encodings, boundary row counts); the live file set over 50
 * random commits equals a reference, and folding only deltas from any
 * snapshot k reaches the same set; two forked committers of one snapshot
 * id: exactly one wins, the other gets -EEXIST and commits id+1; every
 * flipped byte and every truncation of each file kind refused with the
 * file named, never a crash; the LATEST hint lagging or broken.  The
 * watermark round trip; rebased and plain chains against one reference;
 * expire and gc checked by listing the directory against the names the
 * snapshots give, refusing on unreadable metadata, and crashes inside
 * expire (simulated by removing its files by hand) left for gc.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "common/crc32c.h"
#include "common/fault.h"
#include "store/table/layout/dvec.h"
#include "store/table/layout/manifest.h"
#include "store/table/layout/sync.h"
#include "sfs.h"
#include "tests/helpers.h"

static char dir[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-tm-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	sfs_fault_reset();
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(tablemeta, .init = setup, .fini = teardown, .timeout = 240);

/* ---- file helpers ---------------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len)
{
	uint8_t *b;

	cr_assert_eq(sfs__layout_read(path, &b, len), 0, "%s", sfs_last_error());
	return b;
}

static void spit(const char *path, const void *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, b, len), (ssize_t)len);
	close(fd);
}

/* A refusal of a bad file: a format code and the file named. */
static void assert_refused(int rc, const char *path, const char *how, size_t at)
{
	cr_assert(rc == SFS_ECORRUPT || rc == SFS_EMAGIC || rc == SFS_EVERSION,
		  "%s at %zu of %s: rc %d (%s)", how, at, path, rc, sfs_last_error());
	cr_assert(strstr(sfs_last_error(), path), "%s at %zu: message does not name %s: %s", how, at, path,
		  sfs_last_error());
}

/* Flip every byte, then truncate at every offset; @open_fn must refuse each. */
static void corrupt_all(const char *path, int (*open_fn)(const char *path))
{
	size_t len;
	uint8_t *orig = slurp(path, &len), *b = malloc(len);

	cr_assert_eq(open_fn(path), 0, "pristine %s: %s", path, sfs_last_error());
	for (size_t i = 0; i < len; i++) {
		memcpy(b, orig, len);
		b[i] ^= (uint8_t)(1u << (i % 8));
		spit(path, b, len);
		assert_refused(open_fn(path), path, "flip", i);
	}
	for (size_t t = 0; t < len; t++) {
		spit(path, orig, t);
		assert_refused(open_fn(path), path, "truncate", t);
	}
	spit(path, orig, len);
	cr_assert_eq(open_fn(path), 0, "restored %s: %s", path, sfs_last_error());
	free(orig);
	free(b);
}

/* ---- deletion vectors ------------------------------------------------------------------ */

struct vec {
	char name[32];
	uint64_t rows;
	uint64_t *bits;
};

/* Vector @i of a random set: boundary row counts and every density. */
static void make_vec(struct vec *v, int i, uint64_t *s)
{
	static const uint64_t edge[] = { 0, 1, 63, 64, 65, 127, 128, 1000 };
	int style = (int)(th_rand(s) % 4);

	snprintf(v->name, sizeof(v->name), "data-%05d-%llx.sst", i, (unsigned long long)(th_rand(s) % 1000));
	v->rows = i < 8 ? edge[i] : 1 + th_rand(s) % 20000;
	v->bits = calloc(sfs_dv_words(v->rows) + 1, 8);
	for (uint64_t p = 0; p < v->rows; p++) {
		int set = style == 0 ? th_rand(s) % 100 == 0      /* sparse: runs */
			: style == 1 ? th_rand(s) % 2 == 0         /* dense noise: bitmap */
			: style == 2 ? (p / 50) % 3 == 0           /* long runs */
				     : 0;                              /* empty */
		if (set)
			v->bits[p / 64] |= 1ull << (p % 64);
	}
}

static int vec_cmp(const void *a, const void *b)
{
	return strcmp(((const struct vec *)a)->name, ((const struct vec *)b)->name);
}

Test(tablemeta, dv_roundtrip)
{
	for (int round = 0; round < 5 * th_soak(); round++) {
		uint64_t s = 0x5eed + (uint64_t)round;
		int n = 8 + (int)(th_rand(&s) % 60), seen[3] = { 0 };
		struct vec *v = calloc((size_t)n, sizeof(*v));
		sfs_dv_builder_t *b;
		sfs_dv_index_t *x;
		char path[128];

		snprintf(path, sizeof(path), "%s/sub/dv-%d.index", dir, round);   /* parent made on demand */
		cr_assert_eq(sfs_dv_builder_new(&b), 0);
		for (int i = 0; i < n; i++) {
			make_vec(&v[i], i, &s);
			cr_assert_eq(sfs_dv_builder_add(b, v[i].name, v[i].rows, v[i].bits,
							sfs_dv_words(v[i].rows)), 0, "%s", sfs_last_error());
		}
		cr_assert_eq(sfs_dv_builder_write(b, path), 0, "%s", sfs_last_error());
		sfs_dv_builder_free(b);
		cr_assert_eq(sfs_dv_open(path, &x), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_dv_count(x), (size_t)n);
		qsort(v, (size_t)n, sizeof(*v), vec_cmp);
		for (int i = 0; i < n; i++) {
			struct sfs_dv_info in;
			uint64_t *got, card = 0, buf[400];
			size_t w = sfs_dv_words(v[i].rows);

			sfs_dv_info(x, (size_t)i, &in);   /* iteration is in name order */
			cr_assert_str_eq(in.file, v[i].name);
			cr_assert_eq(in.rows, v[i].rows);
			for (size_t k = 0; k < w; k++)
				card += (uint64_t)__builtin_popcountll(v[i].bits[k]);
			cr_assert_eq(in.deleted, card);
			/* the smaller encoding, ties to the bitmap */
			cr_assert(in.bytes <= w * 8 && (in.enc == SFS_DV_BITMAP) == (in.bytes == w * 8));
			seen[in.enc]++;
			cr_assert_eq(sfs_dv_find(x, v[i].name), i);
			cr_assert_eq(sfs_dv_lookup(x, v[i].name, &got, &w), 0);
			cr_assert_eq(w, sfs_dv_words(v[i].rows));
			cr_assert(!memcmp(got, v[i].bits, w * 8), "vector of %s differs", v[i].name);
			free(got);
			if (w <= 400) {
				memset(buf, 0xa5, sizeof(buf));   /* decode clears what it writes */
				cr_assert_eq(sfs_dv_decode(x, (size_t)i, buf, 400), 0);
				cr_assert(!memcmp(buf, v[i].bits, w * 8));
			}
			if (w)
				cr_assert_eq(sfs_dv_decode(x, (size_t)i, buf, w - 1), SFS_EUSAGE);
			free(v[i].bits);
		}
		cr_assert(seen[SFS_DV_BITMAP] && seen[SFS_DV_RUNS], "both encodings exercised");
		cr_assert_eq(sfs_dv_find(x, "nope"), -ENOENT);
		sfs_dv_close(x);
		free(v);
	}
}

Test(tablemeta, dv_refuses_bad_input)
{
	sfs_dv_builder_t *b;
	uint64_t w[2] = { 0, 0 };
	char path[128];

	cr_assert_eq(sfs_dv_builder_new(&b), 0);
	cr_assert_eq(sfs_dv_builder_add(b, "..", 10, w, 1), SFS_EUSAGE);
	cr_assert_eq(sfs_dv_builder_add(b, "a/b", 10, w, 1), SFS_EUSAGE);
	cr_assert_eq(sfs_dv_builder_add(b, "", 10, w, 1), SFS_EUSAGE);
	cr_assert_eq(sfs_dv_builder_add(b, "f", 100, w, 1), SFS_EUSAGE);   /* too few words */
	w[0] = 1ull << 10;
	cr_assert_eq(sfs_dv_builder_add(b, "f", 10, w, 1), SFS_EUSAGE);    /* position >= rows */
	w[0] = 0;
	w[1] = 1;
	cr_assert_eq(sfs_dv_builder_add(b, "f", 64, w, 2), SFS_EUSAGE);    /* stray word */
	w[1] = 0;
	cr_assert_eq(sfs_dv_builder_add(b, "f", 64, w, 2), 0);
	cr_assert_eq(sfs_dv_builder_add(b, "f", 3, w, 1), 0);
	snprintf(path, sizeof(path), "%s/dup.index", dir);
	cr_assert_eq(sfs_dv_builder_write(b, path), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "two vectors"));
	sfs_dv_builder_free(b);
}

static int dv_open_close(const char *path)
{
	sfs_dv_index_t *x;
	int rc = sfs_dv_open(path, &x);

	if (!rc)
		sfs_dv_close(x);
	return rc;
}

Test(tablemeta, dv_corruption_refused)
{
	sfs_dv_builder_t *b;
	uint64_t a[2] = { 0x00ff00000000f00full, 0x3 }, d[1] = { 0x5555555555555555ull };
	char path[128];
	size_t len;
	uint8_t *img;

	snprintf(path, sizeof(path), "%s/dv.index", dir);
	cr_assert_eq(sfs_dv_builder_new(&b), 0);
	cr_assert_eq(sfs_dv_builder_add(b, "runs.sst", 70, a, 2), 0);
	cr_assert_eq(sfs_dv_builder_add(b, "bitmap.sst", 64, d, 1), 0);
	cr_assert_eq(sfs_dv_builder_add(b, "empty.sst", 0, NULL, 0), 0);
	cr_assert_eq(sfs_dv_builder_write(b, path), 0, "%s", sfs_last_error());
	sfs_dv_builder_free(b);
	corrupt_all(path, dv_open_close);
	img = slurp(path, &len);   /* an unknown version says so */
	img[4] = 2;
	spit(path, img, len);
	cr_assert_eq(dv_open_close(path), SFS_EVERSION);
	free(img);
}

/* ---- manifests: a reference of the live set --------------------------------------------- */

#define MAXF 4096

struct live {
	uint8_t on[MAXF];
	uint64_t rows[MAXF];
	int err;
};

static int fname_id(const char *f)
{
	int id;

	return sscanf(f, "f%d.sst", &id) == 1 && id >= 0 && id < MAXF ? id : -1;
}

static int fold(const struct sfs_mf_entry *e, void *arg)
{
	struct live *l = arg;
	int id = fname_id(e->file);

	if (id < 0 || (e->op == SFS_MF_ADD) == l->on[id])   /* add of live / delete of dead */
		return l->err = 1, 0;
	l->on[id] = e->op == SFS_MF_ADD;
	l->rows[id] = e->rows;
	/* the entry's statistics are derived from its id: check they survived */
	if (e->level != (uint32_t)id % 7 || e->size != (uint64_t)id * 1000 + 1 || e->kg_lo > e->kg_hi ||
	    e->min_klen != 2 + id % 5 || e->max_klen != 3 + id % 5 ||
	    memcmp(e->min_key, "\x00\x01\x02\x03\x04\x05\x06", e->min_klen) ||
	    memcmp(e->max_key, "\x00\x01\x02\x03\x04\x05\x06\x07", e->max_klen - 1) ||
	    ((const uint8_t *)e->max_key)[e->max_klen - 1] != 0xff)
		l->err = 2;
	return 0;
}

static char names[MAXF][16];
static const uint8_t keybytes[] = "\x00\x01\x02\x03\x04\x05\x06\x07\xff";

static struct sfs_mf_entry mk(int op, int id)
{
	static uint8_t maxk[MAXF][16];
	struct sfs_mf_entry e = { .op = op, .file = names[id], .level = (uint32_t)id % 7,
				  .rows = (uint64_t)id * 3 + 1, .size = (uint64_t)id * 1000 + 1 };

	snprintf(names[id], sizeof(names[id]), "f%d.sst", id);
	e.min_key = keybytes;
	e.min_klen = (uint16_t)(2 + id % 5);
	memcpy(maxk[id], keybytes, 8);
	maxk[id][2 + id % 5] = 0xff;
	e.max_key = maxk[id];
	e.max_klen = (uint16_t)(3 + id % 5);
	e.kg_lo = (uint16_t)(id % 100);
	e.kg_hi = (uint16_t)(id % 100 + id % 3);
	return e;
}

/* A random commit on top of live set @l (updated): deletes of some live
 * files (each with chance 1/@del_odds), then 0..@max_adds adds of new
 * files (*@next on).  Returns the entries written to @es (at most @cap). */
static size_t random_delta(struct live *l, uint64_t *s, int del_odds, int max_adds, int *next,
			   struct sfs_mf_entry *es, size_t cap)
{
	size_t n = 0;

	for (int i = 0; i < MAXF && n < cap; i++)
		if (l->on[i] && th_rand(s) % (uint64_t)del_odds == 0) {
			es[n++] = mk(SFS_MF_DELETE, i);
			l->on[i] = 0;
		}
	for (int a = (int)(th_rand(s) % (uint64_t)(max_adds + 1)); a > 0 && n < cap; a--) {
		es[n++] = mk(SFS_MF_ADD, *next);
		l->on[(*next)++] = 1;
	}
	return n;
}

Test(tablemeta, live_set_over_50_snapshots)
{
	enum { SNAPS = 50 };
	static struct live ref[SNAPS + 1];
	int next = 0;
	uint64_t s = 0xfeed, latest;

	for (int k = 1; k <= SNAPS; k++) {
		struct sfs_mf_entry es[64];
		size_t n;
		struct sfs_mf_commit c = { .kind = k % 4 ? SFS_MF_DATA : SFS_MF_COMPACT, .schema_id = 7 };
		char dv[32];

		ref[k] = ref[k - 1];
		n = random_delta(&ref[k], &s, 4, 5, &next, es, 64);
		snprintf(dv, sizeof(dv), "dv-%d.index", k);
		c.dv_index = k % 3 ? dv : NULL;
		c.entries = es;
		c.n = n;
		cr_assert_eq(sfs_mf_commit(dir, (uint64_t)k, &c), 0, "snapshot %d: %s", k, sfs_last_error());
	}
	cr_assert_eq(sfs_mf_latest(dir, &latest), 0);
	cr_assert_eq(latest, SNAPS);
	for (int k = 1; k <= SNAPS; k++) {
		struct sfs_mf_snapshot sn;
		struct live got = { 0 };

		cr_assert_eq(sfs_mf_snapshot_read(dir, (uint64_t)k, &sn), 0, "%s", sfs_last_error());
		cr_assert(sn.id == (uint64_t)k && sn.prev_id == (uint64_t)k - 1 && sn.schema_id == 7);
		cr_assert_eq(sn.kind, k % 4 ? SFS_MF_DATA : SFS_MF_COMPACT);
		cr_assert_eq(!!sn.dv_index[0], !!(k % 3));
		cr_assert_eq(sfs_mf_for_all(dir, &sn, fold, &got), 0, "%s", sfs_last_error());
		cr_assert_eq(got.err, 0, "snapshot %d: entry out of order or damaged", k);
		cr_assert(!memcmp(got.on, ref[k].on, sizeof(got.on)), "live set of snapshot %d", k);
		/* the maintenance session: snapshot k whole, then only deltas */
		for (int j = k + 1; j <= SNAPS; j++) {
			cr_assert_eq(sfs_mf_snapshot_read(dir, (uint64_t)j, &sn), 0);
			cr_assert_eq(sfs_mf_for_delta(dir, &sn, fold, &got), 0, "%s", sfs_last_error());
		}
		cr_assert_eq(got.err, 0);
		cr_assert(!memcmp(got.on, ref[SNAPS].on, sizeof(got.on)), "deltas from %d", k);
	}
}

/* ---- concurrent committers --------------------------------------------------------------- */

struct race {
	volatile int ready, go;
	int tag;
};

static int committer(void *arg)
{
	struct race *r = arg;
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 100 + r->tag);
	struct sfs_mf_commit c = { .kind = r->tag ? SFS_MF_COMPACT : SFS_MF_DATA, .entries = &e, .n = 1 };
	uint64_t id;
	int rc;

	__atomic_add_fetch(&r->ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
		;
	if (sfs_mf_latest(dir, &id))
		return 1;
	rc = sfs_mf_commit(dir, id + 1, &c);
	if (!rc)
		return 10;
	if (rc != -EEXIST)
		return 2;
	/* the loser re-reads and retries */
	if (sfs_mf_latest(dir, &id) || sfs_mf_commit(dir, id + 1, &c))
		return 3;
	return 20;
}

Test(tablemeta, concurrent_commit_one_wins)
{
	int raced = 0;

	for (int round = 0; round < 10 * th_soak(); round++) {
		struct race *r[2];
		pid_t pid[2];
		int codes[2], wins = 0, retries = 0;
		uint64_t before, after;
		struct sfs_mf_snapshot sn;
		struct live got = { 0 };

		cr_assert_eq(sfs_mf_latest(dir, &before), 0);
		for (int i = 0; i < 2; i++) {
			r[i] = th_map(4096);
			r[i]->tag = i;
		}
		for (int i = 0; i < 2; i++)
			pid[i] = th_fork(committer, r[i]);
		while (r[0]->ready + r[1]->ready < 2)
			usleep(100);
		__atomic_store_n(&r[0]->go, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&r[1]->go, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < 2; i++) {
			codes[i] = th_exit_code(th_wait(pid[i], 30000));
			wins += codes[i] == 10;
			retries += codes[i] == 20;
			munmap(r[i], 4096);
		}
		/* Usually a real race; if one child finished before the other read
		 * LATEST both win at consecutive ids, which is also correct. */
		cr_assert(wins + retries == 2 && wins >= 1, "round %d: exit codes %d %d", round, codes[0],
			  codes[1]);
		raced += retries;
		cr_assert_eq(sfs_mf_latest(dir, &after), 0);
		cr_assert_eq(after, before + 2);
		/* both commits are in the chain, each once; the loser left no orphans */
		cr_assert_eq(sfs_mf_snapshot_read(dir, after, &sn), 0);
		cr_assert_eq(sfs_mf_for_all(dir, &sn, fold, &got), 0, "%s", sfs_last_error());
		cr_assert(!got.err && got.on[100] && got.on[101]);
		/* reset for the next round: drop both files again */
		{
			struct sfs_mf_entry d[2] = { mk(SFS_MF_DELETE, 100), mk(SFS_MF_DELETE, 101) };
			struct sfs_mf_commit c = { .kind = SFS_MF_COMPACT, .entries = d, .n = 2 };

			cr_assert_eq(sfs_mf_commit(dir, after + 1, &c), 0, "%s", sfs_last_error());
		}
	}
	{
		int manifests = 0;
		char cmd[160];
		FILE *p;

		/* 3 commits per round, one manifest each: no loser's manifest is left */
		snprintf(cmd, sizeof(cmd), "ls %s | grep -c '^manifest-[0-9a-f]*$'", dir);
		cr_assert_not_null(p = popen(cmd, "r"));
		cr_assert_eq(fscanf(p, "%d", &manifests), 1);
		pclose(p);
		cr_assert_eq(manifests, 3 * 10 * th_soak());
	}
	cr_log_info("%d of %d rounds had a real conflict", raced, 10 * th_soak());
}

/* ---- corruption of the chain ---------------------------------------------------------------- */

static uint64_t cur_id;

static int count_entry(const struct sfs_mf_entry *e, void *arg)
{
	++*(int *)arg;
	return 0;
}

/* Reading the whole snapshot: any of its files may be the broken one. */
static int read_chain(const char *path)
{
	struct sfs_mf_snapshot sn;
	int n = 0, rc = sfs_mf_snapshot_read(dir, cur_id, &sn);

	return rc ? rc : sfs_mf_for_all(dir, &sn, count_entry, &n);
}

Test(tablemeta, chain_corruption_refused)
{
	struct sfs_mf_entry e[2] = { mk(SFS_MF_ADD, 1), mk(SFS_MF_ADD, 2) }, d = mk(SFS_MF_DELETE, 1);
	struct sfs_mf_commit c1 = { .kind = SFS_MF_DATA, .entries = e, .n = 2 };
	struct sfs_mf_commit c2 = { .kind = SFS_MF_COMPACT, .entries = &d, .n = 1, .dv_index = "dv-1" };
	struct sfs_mf_snapshot sn;
	struct sfs_mf_list_item *it;
	size_t n;
	char path[384];

	cr_assert_eq(sfs_mf_commit(dir, 1, &c1), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mf_commit(dir, 2, &c2), 0, "%s", sfs_last_error());
	cur_id = 2;
	cr_assert_eq(sfs_mf_snapshot_read(dir, 2, &sn), 0);
	snprintf(path, sizeof(path), "%s/snapshot-2", dir);
	corrupt_all(path, read_chain);
	snprintf(path, sizeof(path), "%s/%s", dir, sn.delta_list);
	corrupt_all(path, read_chain);
	snprintf(path, sizeof(path), "%s/%s", dir, sn.base_list);
	corrupt_all(path, read_chain);
	cr_assert_eq(sfs_mf_list_read(dir, sn.base_list, &it, &n), 0);
	cr_assert_eq(n, 1);
	snprintf(path, sizeof(path), "%s/%s", dir, it[0].name);   /* snapshot 1's manifest */
	free(it);
	corrupt_all(path, read_chain);
	{
		/* pinned codes: an unknown version and a foreign file say so */
		size_t len;
		uint8_t *img;

		snprintf(path, sizeof(path), "%s/snapshot-2", dir);
		img = slurp(path, &len);
		img[4] = SFS_MF_VERSION + 1;
		spit(path, img, len);
		cr_assert_eq(read_chain(path), SFS_EVERSION);
		img[4] = 1;   /* version 1 (no watermark) is not read either */
		spit(path, img, len);
		cr_assert_eq(read_chain(path), SFS_EVERSION);
		cr_assert(strstr(sfs_last_error(), "version 1"), "%s", sfs_last_error());
		img[4] = SFS_MF_VERSION;
		img[0] ^= 0xff;
		spit(path, img, len);
		cr_assert_eq(read_chain(path), SFS_EMAGIC);
		cr_assert(strstr(sfs_last_error(), "snapshot-2"));
		free(img);
	}
}

/* Rewrite @old (as many bytes as @new) in the file at @path with @new and
 * fix the frame's checksum: only the name check can object. */
static void patch_name(const char *path, const char *old, const char *new_, size_t n)
{
	size_t len;
	uint8_t *img = slurp(path, &len), *at = NULL;
	uint32_t crc;

	for (size_t i = 0; i + n <= len && !at; i++)
		if (!memcmp(img + i, old, n))
			at = img + i;
	cr_assert_not_null(at, "'%s' not in %s", old, path);
	memcpy(at, new_, n);
	crc = sfs_crc32c(0, img, len - 8);
	memcpy(img + len - 8, &crc, 4);
	spit(path, img, len);
	free(img);
}

/* A manifest naming a file outside the table's directory ('/', an absolute
 * path) or with a control byte is refused naming the name (escaped); a
 * manifest or snapshot that is a symbolic link is refused, not followed. */
Test(tablemeta, hostile_names_and_links_refused)
{
	struct sfs_mf_entry e[2] = { mk(SFS_MF_ADD, 1), mk(SFS_MF_ADD, 2) };
	struct sfs_mf_commit c1 = { .kind = SFS_MF_DATA, .entries = e, .n = 2 };
	static const struct { const char *name, *needle; } bad[] = {
		{ "../sst", "bad name '../sst'" },
		{ "/f.sst", "bad name '/f.sst'" },
		{ "f\x1b.sst", "bad name 'f\\x1b.sst'" },
		{ "f\n.sst", "bad name 'f\\x0a.sst'" },
	};
	struct sfs_mf_snapshot sn;
	struct sfs_mf_list_item *it;
	size_t n;
	char path[384], out[384], man[384];
	const char *cur = "f1.sst";

	cr_assert_eq(sfs_mf_commit(dir, 1, &c1), 0, "%s", sfs_last_error());
	cur_id = 1;
	cr_assert_eq(read_chain(NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mf_snapshot_read(dir, 1, &sn), 0);
	cr_assert_eq(sfs_mf_list_read(dir, sn.delta_list, &it, &n), 0, "%s", sfs_last_error());
	cr_assert_eq(n, 1);
	snprintf(man, sizeof(man), "%s/%s", dir, it[0].name);
	free(it);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		patch_name(man, cur, bad[i].name, 6);
		cur = bad[i].name;
		cr_assert_eq(read_chain(NULL), SFS_ECORRUPT, "%s accepted", bad[i].needle);
		cr_assert(strstr(sfs_last_error(), man) && strstr(sfs_last_error(), bad[i].needle),
			  "%s", sfs_last_error());
	}
	patch_name(man, cur, "f1.sst", 6);
	cr_assert_eq(read_chain(NULL), 0, "%s", sfs_last_error());

	/* the manifest, then the snapshot, a link to a valid copy outside */
	snprintf(out, sizeof(out), "%s.outside", dir);
	cr_assert_eq(rename(man, out), 0);
	cr_assert_eq(symlink(out, man), 0);
	cr_assert_eq(read_chain(NULL), -ELOOP);
	cr_assert(strstr(sfs_last_error(), man) && strstr(sfs_last_error(), "symbolic link"), "%s",
		  sfs_last_error());
	cr_assert_eq(unlink(man), 0);
	cr_assert_eq(rename(out, man), 0);
	snprintf(path, sizeof(path), "%s/snapshot-1", dir);
	cr_assert_eq(rename(path, out), 0);
	cr_assert_eq(symlink(out, path), 0);
	cr_assert_eq(read_chain(NULL), -ELOOP);
	cr_assert(strstr(sfs_last_error(), "symbolic link"), "%s", sfs_last_error());
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(rename(out, path), 0);
	cr_assert_eq(read_chain(NULL), 0, "%s", sfs_last_error());
}

Test(tablemeta, commit_refuses_bad_names)
{
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 1);
	struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1 };

	e.file = "../x.sst";
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), SFS_EUSAGE);
	e.file = "..";
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), SFS_EUSAGE);
	e = mk(SFS_MF_ADD, 1);
	e.kg_lo = 5;
	e.kg_hi = 4;
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), SFS_EUSAGE);
	e = mk(SFS_MF_ADD, 1);
	c.dv_index = "a/b";
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), SFS_EUSAGE);
	c.dv_index = NULL;
	cr_assert_eq(sfs_mf_commit(dir, 2, &c), -ENOENT);   /* no snapshot 1 to build on */
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), -EEXIST);
}

Test(tablemeta, latest_hint_is_only_a_hint)
{
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 1);
	struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1 };
	char path[128], keep[128];
	uint64_t id;

	cr_assert_eq(sfs_mf_latest(dir, &id), 0);
	cr_assert_eq(id, 0);
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), 0);
	snprintf(path, sizeof(path), "%s/LATEST", dir);
	snprintf(keep, sizeof(keep), "%s/LATEST.1", dir);
	cr_assert_eq(rename(path, keep), 0);          /* a stale hint ... */
	for (int k = 2; k <= 5; k++) {
		e = mk(SFS_MF_ADD, k);
		cr_assert_eq(sfs_mf_commit(dir, (uint64_t)k, &c), 0);
	}
	cr_assert_eq(rename(keep, path), 0);
	cr_assert_eq(sfs_mf_latest(dir, &id), 0);
	cr_assert_eq(id, 5);                           /* ... is verified forward */
	spit(path, "garbage", 7);                      /* a broken one: directory scan */
	cr_assert_eq(sfs_mf_latest(dir, &id), 0);
	cr_assert_eq(id, 5);
	unlink(path);
	cr_assert_eq(sfs_mf_latest(dir, &id), 0);
	cr_assert_eq(id, 5);
}

/* ---- injected I/O faults ----------------------------------------------------------------- */

static int dir_entries(const char *tmp_only)
{
	char cmd[160];
	int n = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls %s | grep -c '%s'", dir, tmp_only ? tmp_only : ".");
	cr_assert_not_null(p = popen(cmd, "r"));
	cr_assert_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

/* Each I/O point of a commit failing in turn: the commit either fails and
 * leaves the directory as it was (no snapshot, no temp file, no orphan
 * manifest) or — only when the LATEST hint was the victim — succeeds. */
Test(tablemeta, commit_faults_leave_nothing)
{
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 1);
	struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1 };
	int done = 0, failures = 0, fail_at;

	cr_assert_eq(sfs_mf_commit(dir, 1, &c), 0);
	for (fail_at = 1; !done && fail_at < 100; fail_at++) {
		int before = dir_entries(NULL), rc;
		uint64_t id, io_calls;
		char rule[64];

		e = mk(SFS_MF_ADD, 2);
		snprintf(rule, sizeof(rule), "layout.file.*:%d:fail=EIO", fail_at);
		cr_assert_eq(sfs_fault_arm(rule), 0, "%s", sfs_last_error());
		rc = sfs_mf_commit(dir, 2, &c);
		io_calls = sfs_fault_hits("layout.file.*");
		sfs_fault_reset();
		cr_assert_eq(dir_entries("\\.tmp\\."), 0, "fault %d left a temp file", fail_at);
		cr_assert_eq(sfs_mf_latest(dir, &id), 0);
		if (rc) {
			failures++;
			cr_assert_eq(rc, -EIO, "fault %d: %d %s", fail_at, rc, sfs_last_error());
			cr_assert_eq(id, 1);
			cr_assert_eq(dir_entries(NULL), before, "fault %d left files", fail_at);
		} else {
			/* only the hint's four I/O points (the last) may fail without
			 * failing the commit: LATEST is verified by probing */
			cr_assert_eq(id, 2);
			cr_assert(fail_at > 16 || io_calls < (uint64_t)fail_at, "fault %d ignored", fail_at);
			done = 1;
		}
	}
	/* 4 files (manifest, two lists, snapshot) x 4 points (open, write, fsync,
	 * rename or link) */
	cr_assert_eq(failures, 16);
}

/* With sfs_layout_sync(0) (the table target's setting) a commit reaches no
 * fsync point, and what it committed reads back the same. */
Test(tablemeta, commit_without_sync)
{
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 1);
	struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1 };
	uint64_t id;

	cr_assert_eq(sfs_fault_arm("layout.file.fsync:0"), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), 0);
	/* manifest, two lists, snapshot, the LATEST hint */
	cr_assert_eq(sfs_fault_hits("layout.file.fsync"), 5);
	sfs_layout_set_sync(0);
	e = mk(SFS_MF_ADD, 2);
	cr_assert_eq(sfs_mf_commit(dir, 2, &c), 0, "%s", sfs_last_error());
	sfs_layout_set_sync(1);
	cr_assert_eq(sfs_fault_hits("layout.file.fsync"), 5, "%llu",
		     (unsigned long long)sfs_fault_hits("layout.file.fsync"));
	sfs_fault_reset();
	cr_assert_eq(sfs_mf_latest(dir, &id), 0);
	cr_assert_eq(id, 2);
	cr_assert_eq(dir_entries("\\.tmp\\."), 0);
}

/* ---- watermark and rebase ------------------------------------------------------------------ */

Test(tablemeta, watermark_roundtrip)
{
	static const uint64_t wm[] = { 0, 1, 0x0123456789abcdefull, UINT64_MAX - 1, UINT64_MAX };

	for (int k = 1; k <= 5; k++) {
		struct sfs_mf_entry e = mk(SFS_MF_ADD, k);
		struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .watermark = wm[k - 1], .entries = &e, .n = 1 };

		cr_assert_eq(sfs_mf_commit(dir, (uint64_t)k, &c), 0, "%s", sfs_last_error());
	}
	for (int k = 1; k <= 5; k++) {
		struct sfs_mf_snapshot sn;

		memset(&sn, 0xa5, sizeof(sn));
		cr_assert_eq(sfs_mf_snapshot_read(dir, (uint64_t)k, &sn), 0, "%s", sfs_last_error());
		cr_assert_eq(sn.watermark, wm[k - 1], "snapshot %d", k);
		cr_assert_eq(sn.delta_entries, 1);
	}
}

/* Live set @l as the ADD entries of a rebase; returns their number. */
static size_t live_entries(const struct live *l, struct sfs_mf_entry *out)
{
	size_t n = 0;

	for (int i = 0; i < MAXF; i++)
		if (l->on[i])
			out[n++] = mk(SFS_MF_ADD, i);
	return n;
}

static size_t list_len(const char *d, const char *list)
{
	struct sfs_mf_list_item *it;
	size_t n;

	cr_assert_eq(sfs_mf_list_read(d, list, &it, &n), 0, "%s", sfs_last_error());
	free(it);
	return n;
}

/* The same random commits into two tables, one never rebasing, one
 * rebasing at random (an empty live set included): every snapshot of
 * both has the reference's live set, and the rebased bases stay short. */
Test(tablemeta, rebase_keeps_live_set)
{
	enum { SNAPS = 60 };
	static struct live ref[SNAPS + 1];
	static struct sfs_mf_entry live[MAXF];
	char plain[96], reb[96];
	int next = 0, rebases = 0, empty_rebase = 0;
	uint64_t s = 0xba5e;
	size_t base_len = 0;

	snprintf(plain, sizeof(plain), "%s/plain", dir);
	snprintf(reb, sizeof(reb), "%s/rebase", dir);
	for (int k = 1; k <= SNAPS; k++) {
		static struct sfs_mf_entry es[512];
		struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .watermark = (uint64_t)k * 10 };
		struct sfs_mf_snapshot a, b;
		struct live got_a = { 0 }, got_b = { 0 };

		ref[k] = ref[k - 1];
		/* snapshot 30 deletes everything: 31 may rebase onto an empty set */
		c.n = random_delta(&ref[k], &s, k == 30 ? 1 : 4, k == 30 ? 0 : 5, &next, es, 512);
		c.entries = es;
		cr_assert_eq(sfs_mf_commit(plain, (uint64_t)k, &c), 0, "%s", sfs_last_error());
		c.rebase = k == 1 || k == 31 || th_rand(&s) % 5 == 0;
		c.rebase_n = live_entries(&ref[k - 1], live);
		c.rebase_entries = live;
		rebases += c.rebase;
		empty_rebase += c.rebase && k > 1 && !c.rebase_n;
		cr_assert_eq(sfs_mf_commit(reb, (uint64_t)k, &c), 0, "%s", sfs_last_error());
		/* a rebased base is one manifest (none for an empty set), then one
		 * more per commit, as the plain base grows all along */
		base_len = c.rebase ? !!c.rebase_n : base_len + 1;

		cr_assert_eq(sfs_mf_snapshot_read(plain, (uint64_t)k, &a), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_mf_snapshot_read(reb, (uint64_t)k, &b), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_mf_for_all(plain, &a, fold, &got_a), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_mf_for_all(reb, &b, fold, &got_b), 0, "%s", sfs_last_error());
		cr_assert(!got_a.err && !got_b.err, "snapshot %d: entry out of order or damaged", k);
		cr_assert(!memcmp(got_a.on, ref[k].on, sizeof(got_a.on)), "plain live set of %d", k);
		cr_assert(!memcmp(got_b.on, ref[k].on, sizeof(got_b.on)), "rebased live set of %d", k);
		for (int i = 0; i < MAXF; i++)   /* a dead file's last rows: only the plain chain has it */
			cr_assert(!ref[k].on[i] || got_a.rows[i] == got_b.rows[i], "statistics of f%d in %d", i, k);
		cr_assert_eq(b.watermark, (uint64_t)k * 10);
		cr_assert_eq(list_len(reb, b.base_list), base_len, "base of %d", k);
		cr_assert_eq(list_len(plain, a.base_list), (size_t)k - 1);
	}
	cr_assert(rebases >= 5 && empty_rebase == 1, "%d rebases, %d empty", rebases, empty_rebase);
	/* the deltas are unchanged: folding them from any snapshot still works */
	for (int k = 1; k <= SNAPS; k += 7) {
		struct sfs_mf_snapshot sn;
		struct live got = { 0 };

		cr_assert_eq(sfs_mf_snapshot_read(reb, (uint64_t)k, &sn), 0);
		cr_assert_eq(sfs_mf_for_all(reb, &sn, fold, &got), 0);
		for (int j = k + 1; j <= SNAPS; j++) {
			cr_assert_eq(sfs_mf_snapshot_read(reb, (uint64_t)j, &sn), 0);
			cr_assert_eq(sfs_mf_for_delta(reb, &sn, fold, &got), 0, "%s", sfs_last_error());
		}
		cr_assert(!got.err && !memcmp(got.on, ref[SNAPS].on, sizeof(got.on)), "deltas from %d", k);
	}
}

Test(tablemeta, rebase_refuses_bad_input)
{
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 1), d = mk(SFS_MF_DELETE, 1);
	struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1, .rebase = 1,
				   .rebase_entries = &e, .rebase_n = 1 };

	cr_assert_eq(sfs_mf_commit(dir, 1, &c), SFS_EUSAGE);   /* nothing to restate at id 1 */
	c.rebase_n = 0;
	cr_assert_eq(sfs_mf_commit(dir, 1, &c), 0, "%s", sfs_last_error());
	e = mk(SFS_MF_ADD, 2);
	c.rebase_entries = &d;
	c.rebase_n = 1;
	cr_assert_eq(sfs_mf_commit(dir, 2, &c), SFS_EUSAGE);   /* a DELETE in a live set */
	cr_assert(strstr(sfs_last_error(), "not an ADD"), "%s", sfs_last_error());
	c.rebase_entries = NULL;
	cr_assert_eq(sfs_mf_commit(dir, 2, &c), SFS_EUSAGE);
	cr_assert_eq(dir_entries("manifest"), 3, "a refused commit wrote files");   /* snapshot 1's */
}

/* ---- expire and gc ------------------------------------------------------------------------- */

/* A sorted set of names (a directory listing, a snapshot's references). */
struct names {
	char **v;
	size_t n;
};

static void names_add(struct names *ns, const char *name)
{
	ns->v = realloc(ns->v, (ns->n + 1) * sizeof(*ns->v));
	cr_assert_not_null(ns->v);
	ns->v[ns->n++] = strdup(name);
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int names_has(const struct names *ns, const char *name)
{
	for (size_t i = 0; i < ns->n; i++)
		if (!strcmp(ns->v[i], name))
			return 1;
	return 0;
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	memset(ns, 0, sizeof(*ns));
}

/* Every entry of @d (files, links, directories), sorted. */
static void list_dir(const char *d, struct names *out)
{
	DIR *dd = opendir(d);
	struct dirent *de;

	cr_assert_not_null(dd);
	memset(out, 0, sizeof(*out));
	/* spares (layout/file.h) are no file of the store: inodes kept for
	 * the next writes, which expired_inodes_are_reused checks */
	while ((de = readdir(dd)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strncmp(de->d_name, "spare.tmp.", 10))
			names_add(out, de->d_name);
	closedir(dd);
	qsort(out->v, out->n, sizeof(*out->v), names_cmp);
}

/* What snapshot @id names: its lists and their manifests (into @out). */
static void refs_of(const char *d, uint64_t id, struct names *out)
{
	struct sfs_mf_snapshot sn;

	cr_assert_eq(sfs_mf_snapshot_read(d, id, &sn), 0, "%s", sfs_last_error());
	names_add(out, sn.base_list);
	names_add(out, sn.delta_list);
	for (int l = 0; l < 2; l++) {
		struct sfs_mf_list_item *it;
		size_t n;

		cr_assert_eq(sfs_mf_list_read(d, l ? sn.delta_list : sn.base_list, &it, &n), 0);
		for (size_t i = 0; i < n; i++)
			names_add(out, it[i].name);
		free(it);
	}
}

/* @before less what a clean expire of the snapshots below @keep_from of a
 * table with @latest snapshots removes: the expected listing after it. */
static void expected_after_expire(const char *d, const struct names *before, uint64_t lo, uint64_t keep_from,
				  uint64_t latest, struct names *out)
{
	struct names gone = { 0 }, kept = { 0 };

	for (uint64_t id = lo; id < keep_from; id++) {
		char name[32];

		snprintf(name, sizeof(name), "snapshot-%llu", (unsigned long long)id);
		names_add(&gone, name);
		refs_of(d, id, &gone);
	}
	for (uint64_t id = keep_from; id <= latest; id++)
		refs_of(d, id, &kept);
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < before->n; i++)
		if (!names_has(&gone, before->v[i]) || names_has(&kept, before->v[i]))
			names_add(out, before->v[i]);
	names_free(&gone);
	names_free(&kept);
}

static void assert_same(const struct names *got, const struct names *want, const char *when)
{
	for (size_t i = 0; i < want->n; i++)
		cr_assert(names_has(got, want->v[i]), "%s: %s is missing", when, want->v[i]);
	for (size_t i = 0; i < got->n; i++)
		cr_assert(names_has(want, got->v[i]), "%s: %s is left", when, got->v[i]);
}

static void touch(const char *d, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", d, name);
	spit(path, "x", 1);
}

/* Snapshots 1..@snaps of random commits in @dir (ref[k]: snapshot k's
 * live set), rebasing where bit k of @rebase_at is set; each snapshot
 * names the index "dv-<k>.index" and every data file added exists, as
 * a one-byte file, so expire and gc can be seen to leave them alone. */
static void build_table(int snaps, uint64_t rebase_at, struct live *ref)
{
	static struct sfs_mf_entry es[64], live[MAXF];
	int next = 0;
	uint64_t s = 0x7ab1e;

	for (int k = 1; k <= snaps; k++) {
		char dv[32];
		struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .dv_index = dv, .entries = es };

		ref[k] = ref[k - 1];
		c.n = random_delta(&ref[k], &s, 4, 5, &next, es, 64);
		for (size_t i = 0; i < c.n; i++)
			if (es[i].op == SFS_MF_ADD)
				touch(dir, es[i].file);
		snprintf(dv, sizeof(dv), "dv-%d.index", k);
		touch(dir, dv);
		c.rebase = (int)(rebase_at >> k & 1);
		c.rebase_n = live_entries(&ref[k - 1], live);
		c.rebase_entries = live;
		cr_assert_eq(sfs_mf_commit(dir, (uint64_t)k, &c), 0, "%s", sfs_last_error());
	}
}

static void assert_live(uint64_t id, const struct live *want)
{
	struct sfs_mf_snapshot sn;
	struct live got = { 0 };

	cr_assert_eq(sfs_mf_snapshot_read(dir, id, &sn), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mf_for_all(dir, &sn, fold, &got), 0, "snapshot %llu: %s", (unsigned long long)id,
		     sfs_last_error());
	cr_assert(!got.err && !memcmp(got.on, want->on, sizeof(got.on)), "snapshot %llu", (unsigned long long)id);
}

static int count_prefix(const struct names *ns, const char *prefix)
{
	int n = 0;

	for (size_t i = 0; i < ns->n; i++)
		n += !strncmp(ns->v[i], prefix, strlen(prefix));
	return n;
}

/* Manifests (not lists) in @ns. */
static int count_manifests(const struct names *ns)
{
	return count_prefix(ns, "manifest-") - count_prefix(ns, "manifest-list-");
}

Test(tablemeta, expire_removes_exactly_the_unreferenced)
{
	enum { SNAPS = 20 };
	static struct live ref[SNAPS + 1];
	struct names before, want, after;
	struct sfs_mf_entry e = mk(SFS_MF_ADD, 4000);
	struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1 };
	uint64_t latest;
	char path[128];
	int rc;

	build_table(SNAPS, 1u << 8 | 1u << 15, ref);
	list_dir(dir, &before);
	expected_after_expire(dir, &before, 1, 12, SNAPS, &want);
	cr_assert_eq(sfs_mf_expire(dir, 12), (int)(before.n - want.n), "%s", sfs_last_error());
	list_dir(dir, &after);
	assert_same(&after, &want, "expire 12");
	cr_assert_eq(count_prefix(&after, "snapshot-"), SNAPS - 11);
	cr_assert_eq(count_prefix(&after, "dv-"), SNAPS, "an index was touched");
	/* the rebase at 8 let the manifests of commits 1..7 go; 8's rebase
	 * manifest and the deltas of 8..11 are still named by snapshot 12 */
	cr_assert_eq(count_manifests(&before) - count_manifests(&after), 7);
	for (uint64_t k = 12; k <= SNAPS; k++)
		assert_live(k, &ref[k]);
	names_free(&before);
	names_free(&want);

	cr_assert_eq(sfs_mf_expire(dir, 12), 0);              /* nothing left to do */
	cr_assert_eq(sfs_mf_expire(dir, 1), 0);
	cr_assert_eq(sfs_mf_expire(dir, SNAPS + 1), SFS_EUSAGE);   /* the newest stays */
	cr_assert(strstr(sfs_last_error(), dir), "%s", sfs_last_error());

	/* down to the newest alone; the table goes on from there */
	expected_after_expire(dir, &after, 12, SNAPS, SNAPS, &want);
	rc = sfs_mf_expire(dir, SNAPS);
	cr_assert_eq(rc, (int)(after.n - want.n), "%s", sfs_last_error());
	names_free(&after);
	list_dir(dir, &after);
	assert_same(&after, &want, "expire 20");
	assert_live(SNAPS, &ref[SNAPS]);
	snprintf(path, sizeof(path), "%s/LATEST", dir);
	cr_assert_eq(unlink(path), 0);   /* the directory scan finds 20 alone */
	cr_assert_eq(sfs_mf_latest(dir, &latest), 0);
	cr_assert_eq(latest, SNAPS);
	cr_assert_eq(sfs_mf_commit(dir, SNAPS + 1, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mf_latest(dir, &latest), 0);
	cr_assert_eq(latest, SNAPS + 1);
	names_free(&want);
	names_free(&after);
}

static ino_t ino_of(const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_eq(stat(path, &st), 0, "%s", path);
	return st.st_ino;
}

static int count_spares(void)
{
	DIR *dd = opendir(dir);
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(dd);
	while ((de = readdir(dd)))
		n += !strncmp(de->d_name, "spare.tmp.", 10);
	closedir(dd);
	return n;
}

/*
 * Expire keeps the inodes of the metadata files it removes as spares, and
 * the next commits' writes reuse them (a rename where a create would
 * allocate an inode: layout/file.h, sfs__layout_remove) — once the spare
 * has aged a second.  Never an inode another name holds: a manifest
 * expire removes that a second link keeps (as a checkpoint's link keeps a
 * data file) stays whole through the commits that follow.  Every snapshot
 * still reads back its live set; with spares off, nothing is kept.
 */
Test(tablemeta, expired_inodes_are_reused)
{
	enum { SNAPS = 12, MORE = 4 };
	static struct live ref[SNAPS + 1];
	struct names before, want, after;
	ino_t gone_ino[256];
	size_t ngone = 0, reused = 0;
	uint8_t *held0, *held1;
	size_t hl0, hl1;
	char held[256], from[256];
	const char *victim = NULL;

	build_table(SNAPS, 1u << 8, ref);
	list_dir(dir, &before);
	expected_after_expire(dir, &before, 1, 8, SNAPS, &want);
	for (size_t i = 0; i < before.n; i++)
		if (!names_has(&want, before.v[i])) {
			if (!victim && !strncmp(before.v[i], "manifest-", 9) &&
			    !strstr(before.v[i], "list"))
				victim = before.v[i];	/* a second name keeps this one */
			else if (ngone < 256)
				gone_ino[ngone++] = ino_of(before.v[i]);
		}
	cr_assert_not_null(victim, "expire removes a manifest");
	snprintf(from, sizeof(from), "%s/%s", dir, victim);
	snprintf(held, sizeof(held), "%s/held-link", dir);
	cr_assert_eq(link(from, held), 0);
	held0 = slurp(held, &hl0);

	cr_assert_gt(sfs_mf_expire(dir, 8), 0, "%s", sfs_last_error());
	cr_assert_eq(count_spares(), (int)ngone, "each removed inode no other name holds is a spare");
	usleep(1100 * 1000);	/* the spares' age (file.c, SPARE_AGE_NS) */
	for (int k = SNAPS + 1; k <= SNAPS + MORE; k++) {
		struct sfs_mf_entry e = mk(SFS_MF_ADD, MAXF - MORE - 1 + k - SNAPS);
		struct sfs_mf_commit c = { .kind = SFS_MF_DATA, .entries = &e, .n = 1 };

		touch(dir, e.file);
		cr_assert_eq(sfs_mf_commit(dir, (uint64_t)k, &c), 0, "%s", sfs_last_error());
	}
	list_dir(dir, &after);
	for (size_t i = 0; i < after.n; i++)
		if (!names_has(&before, after.v[i])) {
			ino_t ino = ino_of(after.v[i]);

			for (size_t g = 0; g < ngone; g++)
				reused += gone_ino[g] == ino;
		}
	cr_assert_geq(reused, 4, "the commits' new files reused %zu removed inodes", reused);
	held1 = slurp(held, &hl1);
	cr_assert(hl0 == hl1 && !memcmp(held0, held1, hl0), "an inode another name holds was rewritten");
	for (uint64_t k = 8; k <= SNAPS; k++)
		assert_live(k, &ref[k]);
	free(held0);
	free(held1);
	names_free(&before);
	names_free(&want);
	names_free(&after);

	/* off: removed is unlinked */
	sfs_layout_set_spares(0);
	{
		int sp = count_spares();

		cr_assert_gt(sfs_mf_expire(dir, SNAPS + MORE), 0, "%s", sfs_last_error());
		cr_assert_leq(count_spares(), sp, "spares off: nothing kept");
	}
	sfs_layout_set_spares(1);
}

/* gc's keep(): the names in @arg (a struct names), nothing else. */
static int keep_named(const char *name, void *arg)
{
	return names_has(arg, name);
}

/* The engine's keep() of the crash tests: every data file and index. */
static int keep_engine(const char *name, void *arg)
{
	size_t n = strlen(name);

	return (n > 4 && !strcmp(name + n - 4, ".sst")) || !strncmp(name, "dv-", 3);
}

/* Orphans of every kind gc must collect, by name. */
static const char *const orphans[] = {
	"manifest-00000000deadbeef",              /* a dead committer's */
	"manifest-list-00000000deadbeef-base",
	"manifest-00000000deadbeef-rebase",
	"snapshot-7.tmp.4242.0",                  /* file.c's temp names */
	"manifest-00000000feedf00d.tmp.4242.3",
	"LATEST.tmp.4242.9",
	"f3999.sst.tmp",                          /* datafile_write.c's */
	"junk.txt",
	"snapshot-007",                           /* not a snapshot's name */
	"dv-99.index",                            /* an index no snapshot names */
};

static void touch_orphans(void)
{
	for (size_t i = 0; i < sizeof(orphans) / sizeof(*orphans); i++)
		touch(dir, orphans[i]);
}

Test(tablemeta, gc_collects_orphans_only)
{
	enum { SNAPS = 10 };
	static struct live ref[SNAPS + 1];
	struct names before, after, want = { 0 }, keep = { 0 }, named = { 0 };
	char path[256], target[256];

	build_table(SNAPS, 1u << 6, ref);
	touch_orphans();
	touch(dir, "keepme.txt");
	snprintf(path, sizeof(path), "%s/sub", dir);   /* directories and links stay */
	cr_assert_eq(mkdir(path, 0700), 0);
	touch(path, "manifest-00000000deadbeef");
	snprintf(path, sizeof(path), "%s/link", dir);
	snprintf(target, sizeof(target), "%s/junk.txt", dir);
	cr_assert_eq(symlink(target, path), 0);
	/* the engine keeps its live data files and what else it wants */
	names_add(&keep, "keepme.txt");
	for (int i = 0; i < MAXF; i++)
		if (ref[SNAPS].on[i])
			names_add(&keep, names[i]);
	list_dir(dir, &before);
	for (size_t i = 0; i < before.n; i++) {
		const char *f = before.v[i];
		int orphan = 0, id;

		for (size_t o = 0; o < sizeof(orphans) / sizeof(*orphans); o++)
			orphan |= !strcmp(f, orphans[o]);
		if ((id = fname_id(f)) >= 0 && !strstr(f, ".tmp"))
			orphan |= !ref[SNAPS].on[id];   /* a dead data file */
		if (!orphan)
			names_add(&want, f);
	}
	touch(dir, "spare.tmp.4242.1");	/* a spare inode of a writer gone (list_dir skips it) */
	cr_assert_eq(sfs_mf_gc(dir, keep_named, &keep), (int)(before.n - want.n) + 1, "%s",
		     sfs_last_error());
	cr_assert_eq(count_spares(), 0, "gc collects spares");
	list_dir(dir, &after);
	assert_same(&after, &want, "gc");
	for (uint64_t k = 1; k <= SNAPS; k++) {   /* every snapshot whole */
		refs_of(dir, k, &named);
		assert_live(k, &ref[k]);
	}
	for (size_t i = 0; i < named.n; i++)
		cr_assert(names_has(&after, named.v[i]), "%s removed", named.v[i]);
	snprintf(path, sizeof(path), "%s/sub/manifest-00000000deadbeef", dir);
	cr_assert_eq(access(path, F_OK), 0);
	cr_assert_eq(sfs_mf_gc(dir, keep_named, &keep), 0, "a second gc found more");
	cr_assert_eq(sfs_mf_gc(dir, NULL, NULL), SFS_EUSAGE);   /* data files need a keep() */
	snprintf(path, sizeof(path), "%s/none", dir);
	cr_assert_eq(sfs_mf_gc(path, keep_named, &keep), 0);
	names_free(&before);
	names_free(&after);
	names_free(&want);
	names_free(&keep);
	names_free(&named);
}

/* Damage @name of @dir by flipping one byte (0) or removing it (1);
 * returns the original bytes to put back with spit(). */
static uint8_t *damage(const char *name, int how, size_t *len, char *path, size_t cap)
{
	uint8_t *orig;

	snprintf(path, cap, "%s/%s", dir, name);
	orig = slurp(path, len);
	if (how) {
		cr_assert_eq(unlink(path), 0);
	} else {
		uint8_t *b = malloc(*len);

		memcpy(b, orig, *len);
		b[*len / 2] ^= 0x10;
		spit(path, b, *len);
		free(b);
	}
	return orig;
}

/* A snapshot or list that cannot be read may name files gc cannot see:
 * gc and expire then remove nothing and say which file is bad. */
Test(tablemeta, gc_and_expire_refuse_unreadable_metadata)
{
	static struct live ref[7];
	struct names before, after, keep = { 0 };
	struct sfs_mf_snapshot s2, s4;
	struct {
		const char *name;
		int how, code;
	} cases[4];
	char path[256];

	build_table(6, 0, ref);
	touch_orphans();
	cr_assert_eq(sfs_mf_snapshot_read(dir, 2, &s2), 0);
	cr_assert_eq(sfs_mf_snapshot_read(dir, 4, &s4), 0);
	cases[0].name = "snapshot-3", cases[0].how = 0, cases[0].code = SFS_ECORRUPT;
	cases[1].name = s4.base_list, cases[1].how = 0, cases[1].code = SFS_ECORRUPT;
	cases[2].name = s2.delta_list, cases[2].how = 1, cases[2].code = -ENOENT;
	cases[3].name = "snapshot-5", cases[3].how = 0, cases[3].code = SFS_ECORRUPT;
	for (int c = 0; c < 4; c++) {
		size_t len;
		uint8_t *orig = damage(cases[c].name, cases[c].how, &len, path, sizeof(path));

		list_dir(dir, &before);
		cr_assert_eq(sfs_mf_gc(dir, keep_named, &keep), cases[c].code, "gc, %s: %s", cases[c].name,
			     sfs_last_error());
		cr_assert(strstr(sfs_last_error(), cases[c].name), "%s", sfs_last_error());
		/* snapshots 2 and 3 expire, 4..6 stay: a bad file on either side */
		cr_assert_eq(sfs_mf_expire(dir, 4), cases[c].code, "expire, %s: %s", cases[c].name,
			     sfs_last_error());
		list_dir(dir, &after);
		assert_same(&after, &before, cases[c].name);
		names_free(&before);
		names_free(&after);
		spit(path, orig, len);
		free(orig);
	}
	cr_assert_eq(sfs_mf_gc(dir, keep_engine, NULL), (int)(sizeof(orphans) / sizeof(*orphans)) - 1,
		     "%s", sfs_last_error());   /* all but dv-99.index, which keep_engine keeps */
}

/* expire dies after removing some snapshots, or after removing all of
 * them and some of their manifests: what is left is whole, gc collects
 * the rest, and the final state is a clean expire's. */
Test(tablemeta, crash_inside_expire_left_for_gc)
{
	enum { SNAPS = 12 };
	static struct live ref[SNAPS + 1];
	struct names before, mid, want, now;
	char path[256];
	int half = 0;

	build_table(SNAPS, 1u << 5 | 1u << 9, ref);
	list_dir(dir, &before);
	expected_after_expire(dir, &before, 1, 5, SNAPS, &mid);    /* died in step 1, after snapshot-4 */
	expected_after_expire(dir, &before, 1, 8, SNAPS, &want);   /* expire(8) done */
	for (int k = 1; k <= 4; k++) {
		snprintf(path, sizeof(path), "%s/snapshot-%d", dir, k);
		cr_assert_eq(unlink(path), 0);
	}
	cr_assert_eq(sfs_mf_gc(dir, keep_engine, NULL), (int)(before.n - mid.n - 4), "%s", sfs_last_error());
	list_dir(dir, &now);
	assert_same(&now, &mid, "gc after a crash in step 1");
	names_free(&now);
	for (uint64_t k = 5; k <= SNAPS; k++)
		assert_live(k, &ref[k]);

	/* died in step 2: snapshots 5..7 gone, and every other manifest of theirs */
	for (int k = 5; k <= 7; k++) {
		snprintf(path, sizeof(path), "%s/snapshot-%d", dir, k);
		cr_assert_eq(unlink(path), 0);
	}
	for (size_t i = 0; i < mid.n; i++)
		if (!names_has(&want, mid.v[i]) && strncmp(mid.v[i], "snapshot-", 9) && half++ % 2) {
			snprintf(path, sizeof(path), "%s/%s", dir, mid.v[i]);
			cr_assert_eq(unlink(path), 0);
		}
	cr_assert(half >= 4, "step 2 had %d files to remove", half);
	cr_assert_eq(sfs_mf_gc(dir, keep_engine, NULL), half - half / 2, "%s", sfs_last_error());
	list_dir(dir, &now);
	assert_same(&now, &want, "gc after a crash in step 2");
	cr_assert_eq(sfs_mf_expire(dir, 8), 0, "%s", sfs_last_error());   /* nothing left below 8 */
	for (uint64_t k = 8; k <= SNAPS; k++)
		assert_live(k, &ref[k]);
	names_free(&now);
	names_free(&before);
	names_free(&mid);
	names_free(&want);
}
