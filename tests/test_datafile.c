/*
 * test_datafile.c — the table store's data file (store/table/layout/datafile_{write,read}.c):
 * randomized round trips against a reference (every codec, varied key and
 * value sizes including empty and larger-than-a-page values, every row
 * kind) through batch probes with and without deletion vectors, key-group
 * range scans and prefix scans; the writer's refusals, its missing-parent
 * retry and its clean-up on injected faults; every corruption refused
 * with the file and the byte offset named (a flipped byte in every page,
 * the filter and the footer; truncation at every page boundary and at
 * random offsets; wrong magic; unknown versions); the prefix filter (no
 * present prefix ever excluded, absent ones pruned, its corruption named,
 * version 1 files read as before); and the batch probe's work counted:
 * one hash lookup per row of a candidate page, not one comparison per
 * (row, literal).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "common/fault.h"
#include "store/table/layout/datafile.h"
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
	snprintf(dir, sizeof(dir), "/tmp/sfs-df-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	sfs_fault_reset();
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(datafile, .init = setup, .fini = teardown, .timeout = 240);

/* ---- the reference ------------------------------------------------------------------ */

struct row {
	uint8_t *key, *val;
	size_t klen, vlen;
	int kind;
};

struct ref {
	struct row *rows;
	size_t n;
};

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	size_t m = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, m);

	return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static int kcmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

/* @n random rows, sorted, unique: keys are a key group (a few of 0..300,
 * so groups hold many rows) and 0..40 more bytes (some 200), values of
 * 0..100 bytes, some empty, some @big (larger than a page). */
static struct ref make_ref(uint64_t seed, size_t n, size_t big)
{
	struct ref r = { calloc(n, sizeof(struct row)), 0 };
	uint64_t s = seed;

	for (size_t i = 0; i < n; i++) {
		struct row *w = &r.rows[i];
		uint64_t x = th_rand(&s);
		uint32_t kg = (uint32_t)(th_rand(&s) % 300) * 7;
		size_t extra = x % 17 == 0 ? 200 : th_rand(&s) % 41;

		w->klen = 2 + extra;
		w->key = malloc(w->klen);
		w->key[0] = (uint8_t)(kg >> 8);
		w->key[1] = (uint8_t)kg;
		for (size_t j = 2; j < w->klen; j++)
			w->key[j] = (uint8_t)(th_rand(&s) % 5 == 0 ? 0xff : th_rand(&s) % 4);
		w->kind = (int)(th_rand(&s) % 10 < 6 ? SFS_DF_PUT : th_rand(&s) % 2 ? SFS_DF_DELETE : SFS_DF_MERGE);
		if (w->kind == SFS_DF_PUT) {
			uint64_t c = th_rand(&s) % 100;

			w->vlen = c < 10 ? 0 : c < 12 && big ? big + th_rand(&s) % big : th_rand(&s) % 101;
		} else {
			w->vlen = w->kind == SFS_DF_MERGE ? 8 : 0;
		}
		w->val = malloc(w->vlen ? w->vlen : 1);
		for (size_t j = 0; j < w->vlen; j++)
			w->val[j] = (uint8_t)(th_rand(&s) % 3 ? j : th_rand(&s));
	}
	qsort(r.rows, n, sizeof(struct row), row_cmp);
	for (size_t i = 0; i < n; i++) {
		if (r.n && !row_cmp(&r.rows[r.n - 1], &r.rows[i])) {
			free(r.rows[i].key);
			free(r.rows[i].val);
			continue;
		}
		r.rows[r.n++] = r.rows[i];
	}
	return r;
}

static void free_ref(struct ref *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->rows[i].key);
		free(r->rows[i].val);
	}
	free(r->rows);
}

static void write_ref(const char *path, const struct ref *r, const struct sfs_df_write_opts *o)
{
	sfs_df_writer_t *w;
	uint64_t rows;

	cr_assert_eq(sfs_df_writer_open(path, o, &w), 0, "%s", sfs_last_error());
	for (size_t i = 0; i < r->n; i++) {
		const struct row *x = &r->rows[i];

		cr_assert_eq(sfs_df_writer_add(w, x->key, x->klen, x->kind, x->val, x->vlen), 0, "%s",
			     sfs_last_error());
	}
	cr_assert_eq(sfs_df_writer_finish(w, &rows), 0, "%s", sfs_last_error());
	cr_assert_eq(rows, r->n);
}

/* Index of the reference row with @key, or -1. */
static long ref_find(const struct ref *r, const void *key, size_t klen)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = kcmp(r->rows[mid].key, r->rows[mid].klen, key, klen);

		if (!c)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int masked(const uint64_t *dv, size_t words, size_t pos)
{
	return dv && pos / 64 < words && (dv[pos / 64] >> (pos % 64) & 1);
}

/* Scan [lo, hi) (by the iterator @it) against the reference rows whose
 * index satisfies @in. */
static void check_scan(sfs_df_iter_t *it, const struct ref *r, const uint64_t *dv, size_t dvw,
		       int (*in)(const struct row *, const void *), const void *arg)
{
	struct sfs_df_row row;
	size_t i = 0;
	int rc;

	for (;;) {
		while (i < r->n && (!in(&r->rows[i], arg) || masked(dv, dvw, i)))
			i++;
		rc = sfs_df_iter_next(it, &row);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (!rc)
			break;
		cr_assert_lt(i, r->n, "scan returned a row past the reference");
		const struct row *x = &r->rows[i];

		cr_assert_eq(row.pos, i);
		cr_assert_eq(row.kind, x->kind);
		cr_assert_eq(kcmp(row.key, row.klen, x->key, x->klen), 0, "row %zu key", i);
		if (x->kind == SFS_DF_DELETE) {
			cr_assert_null(row.val);
		} else {
			cr_assert_eq(row.vlen, x->vlen, "row %zu", i);
			cr_assert_eq(memcmp(row.val, x->val, x->vlen), 0, "row %zu value", i);
		}
		i++;
	}
	while (i < r->n && (!in(&r->rows[i], arg) || masked(dv, dvw, i)))
		i++;
	cr_assert_eq(i, r->n, "scan ended early at reference row %zu", i);
}

struct kgr {
	uint32_t lo, hi;
};

static int in_kg(const struct row *x, const void *arg)
{
	const struct kgr *k = arg;
	uint32_t kg = (uint32_t)x->key[0] << 8 | x->key[1];

	return kg >= k->lo && kg <= k->hi;
}

struct pfx {
	const uint8_t *p;
	size_t len;
};

static int in_prefix(const struct row *x, const void *arg)
{
	const struct pfx *p = arg;

	return x->klen >= p->len && !memcmp(x->key, p->p, p->len);
}

static int in_all(const struct row *x, const void *arg)
{
	return 1;
}

/* A batch of @n probe keys: present ones, absent ones (a present key with
 * a byte changed or appended, random keys), and duplicates. */
static struct sfs_df_key *make_batch(const struct ref *r, size_t n, uint64_t *s, uint8_t *store, size_t cap)
{
	struct sfs_df_key *k = calloc(n, sizeof(*k));
	size_t used = 0;

	for (size_t i = 0; i < n; i++) {
		const struct row *x = &r->rows[th_rand(s) % r->n];
		uint64_t c = th_rand(s) % 10;

		if (c < 5 || used + x->klen + 1 > cap) {
			k[i].p = x->key;
			k[i].len = x->klen;
		} else if (c < 7 && i) {
			k[i] = k[th_rand(s) % i];
		} else {
			uint8_t *p = store + used;

			memcpy(p, x->key, x->klen);
			k[i].len = x->klen;
			if (c < 8)
				p[th_rand(s) % x->klen] ^= (uint8_t)(1 + th_rand(s) % 255);
			else if (c < 9)
				p[k[i].len++] = (uint8_t)th_rand(s);
			else
				k[i].len = 1 + th_rand(s) % x->klen;   /* a proper prefix, maybe 1 byte */
			k[i].p = p;
			used += k[i].len;
		}
	}
	return k;
}

static void check_probe(sfs_df_reader_t *rd, const struct ref *r, const struct sfs_df_key *k, size_t n,
			const uint64_t *dv, size_t dvw, unsigned flags)
{
	struct sfs_df_hit *out = calloc(n, sizeof(*out));
	int found = sfs_df_probe(rd, k, n, dv, dvw, flags, out), expect = 0;

	cr_assert_geq(found, 0, "%s", sfs_last_error());
	for (size_t i = 0; i < n; i++) {
		long at = ref_find(r, k[i].p, k[i].len);

		if (at < 0 || masked(dv, dvw, (size_t)at)) {
			cr_assert_eq(out[i].found, 0, "key %zu: found but absent or masked", i);
			continue;
		}
		const struct row *x = &r->rows[at];

		expect++;
		cr_assert_eq(out[i].found, 1, "key %zu (row %ld) not found", i, at);
		cr_assert_eq(out[i].pos, (uint64_t)at);
		cr_assert_eq(out[i].kind, x->kind);
		if (x->kind == SFS_DF_DELETE || (flags & SFS_DF_PROBE_NO_VALUES))
			continue;
		cr_assert_eq(out[i].vlen, x->vlen, "key %zu", i);
		cr_assert_eq(memcmp(out[i].val, x->val, x->vlen), 0, "key %zu value", i);
		if (x->kind == SFS_DF_MERGE) {
			int64_t d;

			memcpy(&d, x->val, 8);
			cr_assert_eq(sfs_df_merge_delta(out[i].val), d);
		}
	}
	cr_assert_eq(found, expect);
	free(out);
}

/* ---- round trips -------------------------------------------------------------------- */

static void round_trip(int codec, uint64_t seed, size_t nrows, uint32_t page_bytes, uint32_t page_rows,
		       uint32_t cache)
{
	char path[128];
	/* odd seeds store the key pages raw under a codec (the table's files):
	 * their sparse probes bisect all keys in lockstep */
	struct sfs_df_write_opts o = { .codec = codec, .page_bytes = page_bytes, .page_rows = page_rows,
				       .keys_raw = codec != SFS_DF_NONE && seed % 2 };
	struct sfs_df_read_opts ro = { .cache_pages = cache };
	struct ref r = make_ref(seed, nrows, page_bytes + 1);
	sfs_df_reader_t *rd;
	struct sfs_df_meta m;
	uint64_t s = seed ^ 0x5eed, *dv;
	size_t dvw = (r.n + 63) / 64, cap = 1 << 20;
	uint8_t *store = malloc(cap);
	sfs_df_iter_t *it;
	uint64_t puts = 0, dels = 0, merges = 0;

	snprintf(path, sizeof(path), "%s/sub/dir/t%d-%llu.df", dir, codec, (unsigned long long)seed);
	write_ref(path, &r, &o);
	cr_assert_eq(sfs_df_reader_open(path, &ro, &rd), 0, "%s", sfs_last_error());

	/* file statistics */
	sfs_df_reader_meta(rd, &m);
	for (size_t i = 0; i < r.n; i++) {
		puts += r.rows[i].kind == SFS_DF_PUT;
		dels += r.rows[i].kind == SFS_DF_DELETE;
		merges += r.rows[i].kind == SFS_DF_MERGE;
	}
	cr_assert_eq(m.rows, r.n);
	cr_assert_eq(m.puts, puts);
	cr_assert_eq(m.deletes, dels);
	cr_assert_eq(m.merges, merges);
	cr_assert_eq(m.codec, codec);
	cr_assert_eq(kcmp(m.min_key, m.min_klen, r.rows[0].key, r.rows[0].klen), 0);
	cr_assert_eq(kcmp(m.max_key, m.max_klen, r.rows[r.n - 1].key, r.rows[r.n - 1].klen), 0);
	cr_assert_eq(m.kg_lo, (uint32_t)r.rows[0].key[0] << 8 | r.rows[0].key[1]);
	cr_assert_eq(m.kg_hi, (uint32_t)r.rows[r.n - 1].key[0] << 8 | r.rows[r.n - 1].key[1]);
	cr_assert_gt(m.key_pages, 1);

	/* a random deletion vector */
	dv = calloc(dvw, 8);
	for (size_t i = 0; i < r.n; i++)
		if (th_rand(&s) % 4 == 0)
			dv[i / 64] |= 1ull << (i % 64);

	/* whole-file scans */
	cr_assert_eq(sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it), 0);
	check_scan(it, &r, NULL, 0, in_all, NULL);
	sfs_df_iter_close(it);
	cr_assert_eq(sfs_df_iter_range(rd, NULL, 0, NULL, 0, dv, dvw, &it), 0);
	check_scan(it, &r, dv, dvw, in_all, NULL);
	sfs_df_iter_close(it);

	/* batch probes, with and without the deletion vector, both IN modes */
	for (int round = 0; round < 6; round++) {
		size_t n = 1 + th_rand(&s) % 1500;
		struct sfs_df_key *k = make_batch(&r, n, &s, store, cap);

		check_probe(rd, &r, k, n, NULL, 0, 0);
		check_probe(rd, &r, k, n, dv, dvw, 0);
		check_probe(rd, &r, k, n, dv, dvw, SFS_DF_PROBE_PER_LITERAL);
		check_probe(rd, &r, k, n, NULL, 0, SFS_DF_PROBE_NO_VALUES);
		check_probe(rd, &r, k, n % 7 == 0 ? n : n / 20 + 1, dv, dvw, SFS_DF_PROBE_SEEK_SPARSE);
		free(k);
	}

	/* key-group range scans */
	for (int round = 0; round < 30; round++) {
		struct kgr g;

		g.lo = (uint32_t)(th_rand(&s) % 2200);
		g.hi = g.lo + (uint32_t)(th_rand(&s) % (round % 3 ? 40 : 600));
		if (round == 0)
			g.lo = 0, g.hi = 0xffff;
		cr_assert_eq(sfs_df_iter_kg(rd, g.lo, g.hi, round % 2 ? dv : NULL, dvw, &it), 0);
		check_scan(it, &r, round % 2 ? dv : NULL, dvw, in_kg, &g);
		sfs_df_iter_close(it);
	}
	/* prefix scans: prefixes of present keys (a key group, a parent key),
	 * with 0xff tails (the successor carries), and absent ones */
	for (int round = 0; round < 40; round++) {
		const struct row *x = &r.rows[th_rand(&s) % r.n];
		uint8_t p[300];
		struct pfx f = { p, 1 + th_rand(&s) % x->klen };

		memcpy(p, x->key, f.len);
		if (round % 5 == 4)
			p[f.len - 1] ^= 0x40;
		cr_assert_eq(sfs_df_iter_prefix(rd, p, f.len, round % 2 ? dv : NULL, dvw, &it), 0);
		check_scan(it, &r, round % 2 ? dv : NULL, dvw, in_prefix, &f);
		sfs_df_iter_close(it);
	}
	sfs_df_reader_close(rd);
	free(dv);
	free(store);
	free_ref(&r);
}

Test(datafile, round_trip_none)
{
	for (int i = 0; i < 2 * th_soak(); i++)
		round_trip(SFS_DF_NONE, 100 + (uint64_t)i, 3000 + (size_t)i * 2000, i % 2 ? 1024 : 4096, 0, 0);
}

Test(datafile, round_trip_lz4)
{
	for (int i = 0; i < 2 * th_soak(); i++)
		round_trip(SFS_DF_LZ4, 200 + (uint64_t)i, 3000 + (size_t)i * 2000, i % 2 ? 1024 : 8192,
			   i % 2 ? 0 : 64, i % 2 ? 2 : 0);
}

Test(datafile, round_trip_zstd)
{
	for (int i = 0; i < 2 * th_soak(); i++)
		round_trip(SFS_DF_ZSTD, 300 + (uint64_t)i, 3000 + (size_t)i * 2000, i % 2 ? 2048 : 512, 0,
			   i % 2 ? 0 : 3);
}

/* One row, tiny pages: the edge of every loop. */
Test(datafile, single_row_and_one_row_pages)
{
	char path[128];
	struct ref r = make_ref(7, 200, 100);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_rows = 1, .page_bytes = 1 };
	struct ref one = { r.rows, 1 };
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_key k[3];

	snprintf(path, sizeof(path), "%s/one.df", dir);
	write_ref(path, &one, NULL);
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0, "%s", sfs_last_error());
	k[0] = (struct sfs_df_key){ .p = one.rows[0].key, .len = one.rows[0].klen };
	k[1] = (struct sfs_df_key){ .p = "zz", .len = 2 };
	k[2] = k[0];
	check_probe(rd, &one, k, 3, NULL, 0, 0);
	cr_assert_eq(sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it), 0);
	check_scan(it, &one, NULL, 0, in_all, NULL);
	sfs_df_iter_close(it);
	sfs_df_reader_close(rd);
	{
		/* a data file is never read through a symbolic link */
		char link_[160];

		snprintf(link_, sizeof(link_), "%s/link.df", dir);
		cr_assert_eq(symlink(path, link_), 0);
		cr_assert_eq(sfs_df_reader_open(link_, NULL, &rd), -ELOOP);
		cr_assert(strstr(sfs_last_error(), link_) && strstr(sfs_last_error(), "symbolic link"),
			  "%s", sfs_last_error());
		unlink(link_);
	}

	snprintf(path, sizeof(path), "%s/tiny.df", dir);
	write_ref(path, &r, &o);
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0, "%s", sfs_last_error());
	struct sfs_df_meta m;

	sfs_df_reader_meta(rd, &m);
	cr_assert_eq(m.key_pages, r.n);
	cr_assert_eq(sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it), 0);
	check_scan(it, &r, NULL, 0, in_all, NULL);
	sfs_df_iter_close(it);
	sfs_df_reader_close(rd);
	free_ref(&r);
}

/* A deletion vector masking whole pages: they are skipped unread. */
Test(datafile, masked_pages_are_not_read)
{
	char path[128];
	struct ref r = make_ref(9, 4000, 0);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 1024 };
	size_t dvw = (r.n + 63) / 64;
	uint64_t *dv = calloc(dvw, 8);
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_row row;

	snprintf(path, sizeof(path), "%s/dv.df", dir);
	write_ref(path, &r, &o);
	memset(dv, 0xff, dvw * 8);
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0);
	cr_assert_eq(sfs_df_iter_range(rd, NULL, 0, NULL, 0, dv, dvw, &it), 0);
	cr_assert_eq(sfs_df_iter_next(it, &row), 0);
	sfs_df_iter_close(it);
	cr_assert_eq(sfs_df_reader_counters(rd)->decompressions, 0);
	cr_assert_eq(sfs_df_reader_counters(rd)->masked, r.n);
	sfs_df_reader_close(rd);
	free(dv);
	free_ref(&r);
}

/* A key-group scan reads only the pages its range overlaps. */
Test(datafile, kg_scan_prunes_pages)
{
	char path[128];
	struct ref r = make_ref(11, 20000, 0);
	struct sfs_df_write_opts o = { .codec = SFS_DF_ZSTD, .page_bytes = 2048 };
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_row row;
	struct sfs_df_meta m;
	uint32_t kg = (uint32_t)r.rows[r.n / 2].key[0] << 8 | r.rows[r.n / 2].key[1];
	size_t rows = 0, ref_rows = 0, pages;

	snprintf(path, sizeof(path), "%s/kg.df", dir);
	write_ref(path, &r, &o);
	for (size_t i = 0; i < r.n; i++)
		ref_rows += ((uint32_t)r.rows[i].key[0] << 8 | r.rows[i].key[1]) == kg;
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0);
	sfs_df_reader_meta(rd, &m);
	cr_assert_eq(sfs_df_iter_kg(rd, kg, kg, NULL, 0, &it), 0);
	while (sfs_df_iter_next(it, &row) == 1)
		rows++;
	sfs_df_iter_close(it);
	cr_assert_eq(rows, ref_rows);
	/* key pages of ~2 KiB hold >= 40 of these keys; values likewise */
	pages = sfs_df_reader_counters(rd)->decompressions;
	cr_assert_leq(pages, 2 * (ref_rows / 40 + 2) + 2, "%zu pages for %zu rows of %u key pages", pages,
		      rows, m.key_pages);
	sfs_df_reader_close(rd);
	free_ref(&r);
}

/* A caller's hashes (SFS_DF_PROBE_HASHED, what a reader of many files
 * passes) give the answers of the probe's own; a wrong hash is believed
 * (the filter then drops keys), so the flag is what decides. */
Test(datafile, a_probe_with_the_callers_hashes_answers_as_without)
{
	char path[128];
	struct ref r = make_ref(17, 6000, 0);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 2048 };
	const size_t n = 400;
	uint64_t s = 5;
	uint8_t *store = malloc(1 << 20);
	struct sfs_df_key *k = make_batch(&r, n, &s, store, 1 << 20);
	struct sfs_df_hit *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
	uint8_t *va = malloc(1 << 22);
	size_t vused = 0;
	sfs_df_reader_t *rd;
	int fa, fb, fw;

	snprintf(path, sizeof(path), "%s/hashed.df", dir);
	write_ref(path, &r, &o);
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0, "%s", sfs_last_error());
	fa = sfs_df_probe(rd, k, n, NULL, 0, 0, a);
	cr_assert_geq(fa, 0, "%s", sfs_last_error());
	/* the values are valid until the next call: keep a copy */
	for (size_t i = 0; i < n; i++)
		if (a[i].found && a[i].val) {
			memcpy(va + vused, a[i].val, a[i].vlen);
			a[i].val = va + vused;
			vused += a[i].vlen;
		}
	for (size_t i = 0; i < n; i++)
		k[i].h = sfs_df_filter_hash(k[i].p, k[i].len);
	fb = sfs_df_probe(rd, k, n, NULL, 0, SFS_DF_PROBE_HASHED, b);
	cr_assert_eq(fb, fa);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(b[i].found, a[i].found, "key %zu", i);
		if (!a[i].found)
			continue;
		cr_assert(b[i].kind == a[i].kind && b[i].pos == a[i].pos && b[i].vlen == a[i].vlen &&
			  (!a[i].vlen || !memcmp(b[i].val, a[i].val, a[i].vlen)), "key %zu", i);
	}
	for (size_t i = 0; i < n; i++)
		k[i].h = ~k[i].h;
	fw = sfs_df_probe(rd, k, n, NULL, 0, SFS_DF_PROBE_HASHED, b);
	cr_assert_lt(fw, fa / 2, "wrong hashes: %d of %d found", fw, fa);
	sfs_df_reader_close(rd);
	free(va);
	free(a);
	free(b);
	free(k);
	free(store);
	free_ref(&r);
}

/* ---- the decompressed-page cache ---------------------------------------------------- */

/* Probe the PUT rows at @at[0..n), one at a time, each found with its value. */
static void probe_rows(sfs_df_reader_t *rd, const struct ref *r, const size_t *at, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct row *w = &r->rows[at[i]];
		struct sfs_df_key k = { .p = w->key, .len = w->klen };
		struct sfs_df_hit h;

		cr_assert_eq(sfs_df_probe(rd, &k, 1, NULL, 0, 0, &h), 1, "%s", sfs_last_error());
		cr_assert(h.found && h.vlen == w->vlen && !memcmp(h.val, w->val, w->vlen),
			  "row %zu read back wrong", at[i]);
	}
}

/*
 * Re-reads of pages the cache holds decompress nothing; the cache finds a
 * page in O(1) whatever its size (64 pages here); with the process's
 * decoded-page budget at 0 a reader keeps two pages and decompresses every
 * other page again; closing a reader gives its bytes back to the budget.
 */
Test(datafile, the_page_cache_keeps_pages_within_the_process_budget)
{
	char path[128];
	struct ref r = make_ref(21, 20000, 0);
	struct sfs_df_write_opts o = { .codec = SFS_DF_ZSTD, .page_bytes = 1024 };
	struct sfs_df_read_opts ro = { .cache_pages = 64 };
	size_t at[24], n = 0, step;
	uint64_t before = sfs_df_decoded_bytes(), d1, d2, d3;
	sfs_df_reader_t *rd;

	snprintf(path, sizeof(path), "%s/cache.df", dir);
	write_ref(path, &r, &o);
	/* 24 PUT rows spread over the file: distinct key and value pages */
	step = r.n / 24;
	for (size_t i = 0; i < r.n && n < 24; i += step) {
		size_t j = i;

		while (j < r.n && r.rows[j].kind != SFS_DF_PUT)
			j++;
		if (j < r.n)
			at[n++] = j;
	}
	cr_assert_eq(n, 24);

	cr_assert_eq(sfs_df_reader_open(path, &ro, &rd), 0, "%s", sfs_last_error());
	probe_rows(rd, &r, at, n);
	d1 = sfs_df_reader_counters(rd)->decompressions;
	cr_assert_geq(d1, n, "%llu pages decompressed for %zu rows on distinct pages",
		      (unsigned long long)d1, n);
	probe_rows(rd, &r, at, n);
	probe_rows(rd, &r, at, n);
	cr_assert_eq(sfs_df_reader_counters(rd)->decompressions, d1,
		     "re-reads of %zu cached rows decompressed %llu pages", n,
		     (unsigned long long)(sfs_df_reader_counters(rd)->decompressions - d1));
	cr_assert_gt(sfs_df_decoded_bytes(), before, "the cache's pages are counted");
	sfs_df_reader_close(rd);
	cr_assert_eq(sfs_df_decoded_bytes(), before, "a closed reader's pages are given back");

	sfs_df_set_decoded_budget(0);
	cr_assert_eq(sfs_df_reader_open(path, &ro, &rd), 0, "%s", sfs_last_error());
	probe_rows(rd, &r, at, n);
	d2 = sfs_df_reader_counters(rd)->decompressions;
	probe_rows(rd, &r, at, n);
	d3 = sfs_df_reader_counters(rd)->decompressions;
	cr_assert_geq(d3 - d2, n, "over budget: two pages kept, every row decompressed again "
		      "(%llu pages for %zu rows)", (unsigned long long)(d3 - d2), n);
	cr_assert_leq(sfs_df_decoded_bytes() - before, 2 * 4096u, "two slots at most");
	sfs_df_reader_close(rd);
	sfs_df_set_decoded_budget(32ull << 20);
	free_ref(&r);
}

/*
 * A cached iterator (pages through the reader's cache, as a table's map
 * read uses it) holds its key page and value page pinned: with the budget
 * at 0 and a probe of other keys between every two rows pulling pages
 * through the same small cache, every row still reads back right.  (Before
 * pins, the CLOCK or LRU victim could be the iterator's own key page once
 * a key page spanned two value pages.)
 */
Test(datafile, a_cached_iterator_keeps_its_pages_while_probes_churn_the_cache)
{
	char path[128];
	struct ref r = make_ref(23, 8000, 300);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 1024 };
	struct sfs_df_read_opts ro = { .cache_pages = 4 };
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_row row;
	uint64_t s = 9;
	size_t i = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/pins.df", dir);
	write_ref(path, &r, &o);
	sfs_df_set_decoded_budget(0);
	cr_assert_eq(sfs_df_reader_open(path, &ro, &rd), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_df_iter_prefix_cached(rd, NULL, 0, NULL, 0, &it), 0, "%s", sfs_last_error());
	while ((rc = sfs_df_iter_next(it, &row)) == 1) {
		const struct row *w = &r.rows[i];
		const struct row *x = &r.rows[th_rand(&s) % r.n];
		struct sfs_df_key k = { .p = x->key, .len = x->klen };
		struct sfs_df_hit h;

		cr_assert(row.klen == w->klen && !memcmp(row.key, w->key, w->klen) &&
			  row.kind == w->kind, "row %zu: key or kind", i);
		cr_assert(w->kind == SFS_DF_DELETE ||
			  (row.vlen == w->vlen && !memcmp(row.val, w->val, w->vlen)), "row %zu: value", i);
		cr_assert_geq(sfs_df_probe(rd, &k, 1, NULL, 0, 0, &h), 0, "%s", sfs_last_error());
		i++;
	}
	cr_assert_eq(rc, 0, "%s", sfs_last_error());
	cr_assert_eq(i, r.n);
	cr_assert_gt(sfs_df_reader_counters(rd)->decompressions, r.n / 4, "the cache churned");
	sfs_df_iter_close(it);
	sfs_df_reader_close(rd);
	sfs_df_set_decoded_budget(32ull << 20);
	free_ref(&r);
}

/* ---- the hash-set IN pass ----------------------------------------------------------- */

Test(datafile, batch_probe_work_is_rows_plus_keys)
{
	char path[128];
	struct ref r = make_ref(13, 20000, 0);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4 };
	const size_t n = 1000;
	uint64_t s = 77;
	uint8_t *store = malloc(1 << 20);
	struct sfs_df_key *k = make_batch(&r, n, &s, store, 1 << 20);
	struct sfs_df_hit *out = calloc(n, sizeof(*out));
	struct sfs_df_counters a, b, c;
	struct sfs_df_meta m;
	sfs_df_reader_t *rd;
	uint64_t log2p = 0;

	snprintf(path, sizeof(path), "%s/in.df", dir);
	write_ref(path, &r, &o);
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0);
	sfs_df_reader_meta(rd, &m);
	while ((1u << log2p) < m.key_pages + 1)
		log2p++;

	a = *sfs_df_reader_counters(rd);
	cr_assert_geq(sfs_df_probe(rd, k, n, NULL, 0, 0, out), 0);
	b = *sfs_df_reader_counters(rd);
	cr_assert_geq(sfs_df_probe(rd, k, n, NULL, 0, SFS_DF_PROBE_PER_LITERAL, out), 0);
	c = *sfs_df_reader_counters(rd);

	uint64_t walked = b.rows_walked - a.rows_walked, lookups = b.hash_lookups - a.hash_lookups;
	uint64_t cmps = b.key_compares - a.key_compares, seeks = b.seek_compares - a.seek_compares;
	uint64_t lit_cmps = c.key_compares - b.key_compares;

	cr_log_info("hash set: %llu rows walked, %llu lookups, %llu key compares, %llu seek compares; "
		    "per literal: %llu key compares", (unsigned long long)walked, (unsigned long long)lookups,
		    (unsigned long long)cmps, (unsigned long long)seeks, (unsigned long long)lit_cmps);
	/* one lookup per row walked, never more rows than the file has */
	cr_assert_eq(lookups, walked);
	cr_assert_leq(walked, r.n);
	/* comparisons only on hash hits: about one per found key */
	cr_assert_leq(cmps, n + n / 10);
	/* page pruning: O(log pages) per key */
	cr_assert_leq(seeks, n * (3 + log2p));
	/* the whole call: proportional to rows + keys */
	cr_assert_leq(lookups + cmps + seeks, 2 * (r.n + n * (4 + log2p)));
	/* what the hash set saves: per literal is rows x literals per page */
	cr_assert_gt(lit_cmps, 10 * cmps);
	cr_assert_eq(c.rows_walked - b.rows_walked, walked);

	sfs_df_reader_close(rd);
	free(out);
	free(k);
	free(store);
	free_ref(&r);
}

/* ---- the writer --------------------------------------------------------------------- */

static int no_tmp(const char *path)
{
	char t[256];

	snprintf(t, sizeof(t), "%s.tmp", path);
	return access(t, F_OK) != 0;
}

Test(datafile, writer_refuses_bad_rows)
{
	char path[128];
	sfs_df_writer_t *w;
	sfs_df_reader_t *rd;
	int64_t d = -5;

	snprintf(path, sizeof(path), "%s/bad.df", dir);
	cr_assert_eq(sfs_df_writer_open(path, NULL, &w), 0);
	cr_assert_eq(sfs_df_writer_add(w, "k1", 2, SFS_DF_PUT, "v", 1), 0);
	cr_assert_eq(sfs_df_writer_add(w, "k1", 2, SFS_DF_PUT, "v", 1), SFS_EUSAGE);   /* duplicate */
	cr_assert(strstr(sfs_last_error(), "strictly increasing"), "%s", sfs_last_error());
	cr_assert_eq(sfs_df_writer_add(w, "k0", 2, SFS_DF_PUT, "v", 1), SFS_EUSAGE);   /* out of order */
	cr_assert_eq(sfs_df_writer_add(w, "k", 1, SFS_DF_PUT, "v", 1), SFS_EUSAGE);    /* no key group */
	cr_assert_eq(sfs_df_writer_add(w, "k2", 2, SFS_DF_DELETE, "v", 1), SFS_EUSAGE);
	cr_assert_eq(sfs_df_writer_add(w, "k2", 2, SFS_DF_MERGE, "v", 1), SFS_EUSAGE);
	cr_assert_eq(sfs_df_writer_add(w, "k2", 2, 9, "v", 1), SFS_EUSAGE);
	/* still usable */
	cr_assert_eq(sfs_df_writer_add(w, "k2", 2, SFS_DF_MERGE, &d, 8), 0);
	cr_assert_eq(sfs_df_writer_add(w, "k3", 2, SFS_DF_DELETE, NULL, 0), 0);
	cr_assert_eq(sfs_df_writer_finish(w, NULL), 0, "%s", sfs_last_error());
	cr_assert(no_tmp(path));
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0);
	struct sfs_df_meta m;

	sfs_df_reader_meta(rd, &m);
	cr_assert_eq(m.rows, 3);
	cr_assert_eq(m.merges, 1);
	sfs_df_reader_close(rd);

	/* no rows: refused, nothing left */
	snprintf(path, sizeof(path), "%s/empty.df", dir);
	cr_assert_eq(sfs_df_writer_open(path, NULL, &w), 0);
	cr_assert_eq(sfs_df_writer_finish(w, NULL), SFS_EUSAGE);
	cr_assert(no_tmp(path));
	cr_assert_neq(access(path, F_OK), 0);
	/* abort: nothing left */
	cr_assert_eq(sfs_df_writer_open(path, NULL, &w), 0);
	cr_assert_eq(sfs_df_writer_add(w, "k1", 2, SFS_DF_PUT, "v", 1), 0);
	sfs_df_writer_abort(w);
	cr_assert(no_tmp(path));
	cr_assert_neq(access(path, F_OK), 0);
}

/* A failing write, fsync or rename: an error naming the file, and
 * neither the temporary nor the final file left. */
Test(datafile, writer_faults_leave_nothing)
{
	static const char *points[] = { "open", "write", "write", "write", "fsync", "rename" };
	/* write #0 the header, #3 a run of pages (DF_OUT_BYTES), the last the
	 * footer (counted by a run without a fault) */
	int after[] = { 0, 0, 3, -1, 0, 0 };
	struct ref r = make_ref(17, 3000, 5000);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 1024 };
	char rule[80], pt[48];
	int writes;

	{
		char path[128];

		snprintf(path, sizeof(path), "%s/count.df", dir);
		cr_assert_eq(sfs_fault_arm("layout.df.write:0"), 0, "%s", sfs_last_error());
		write_ref(path, &r, &o);
		writes = (int)sfs_fault_hits("layout.df.write");
		sfs_fault_reset();
		cr_assert_gt(writes, 4, "%d writes", writes);
		after[3] = writes - 1;
	}

	for (size_t f = 0; f < sizeof(points) / sizeof(points[0]); f++) {
		char path[128];
		sfs_df_writer_t *w = NULL;
		int rc = 0;

		snprintf(path, sizeof(path), "%s/fault%zu.df", dir, f);
		snprintf(pt, sizeof(pt), "layout.df.%s", points[f]);
		snprintf(rule, sizeof(rule), "%s:%d:fail=EIO", pt, after[f] + 1);
		cr_assert_eq(sfs_fault_arm(rule), 0, "%s", sfs_last_error());
		rc = sfs_df_writer_open(path, &o, &w);
		for (size_t i = 0; !rc && i < r.n; i++)
			rc = sfs_df_writer_add(w, r.rows[i].key, r.rows[i].klen, r.rows[i].kind, r.rows[i].val,
					       r.rows[i].vlen);
		if (w) {
			int rc2 = sfs_df_writer_finish(w, NULL);

			rc = rc ? rc : rc2;
		}
		cr_assert_eq(sfs_fault_hits(pt), (uint64_t)after[f] + 1,
			     "%s: the point was not reached", rule);
		sfs_fault_reset();
		cr_assert_eq(rc, -EIO, "%s #%d: rc %d", points[f], after[f], rc);
		cr_assert(strstr(sfs_last_error(), path), "%s", sfs_last_error());
		cr_assert(no_tmp(path), "%s left its temp file", points[f]);
		cr_assert_neq(access(path, F_OK), 0, "%s left the file", points[f]);
	}
	free_ref(&r);
}

/* ---- corruption --------------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat sb;
	int fd = open(path, O_RDONLY);
	uint8_t *b;

	cr_assert_geq(fd, 0);
	fstat(fd, &sb);
	b = malloc((size_t)sb.st_size);
	cr_assert_eq(read(fd, b, (size_t)sb.st_size), sb.st_size);
	close(fd);
	*len = (size_t)sb.st_size;
	return b;
}

static void spill(const char *path, const uint8_t *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, b, len), (ssize_t)len);
	close(fd);
}

/* Read everything: a full scan and a probe of every key.  0 or the error. */
static int read_all(const char *path, const struct ref *r)
{
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_row row;
	struct sfs_df_key *k = calloc(r->n, sizeof(*k));
	struct sfs_df_hit *out = calloc(r->n, sizeof(*out));
	int rc;

	if ((rc = sfs_df_reader_open(path, NULL, &rd)))
		goto out;
	for (size_t i = 0; i < r->n; i++)
		k[i] = (struct sfs_df_key){ .p = r->rows[i].key, .len = r->rows[i].klen };
	rc = sfs_df_probe(rd, k, r->n, NULL, 0, 0, out);
	if (rc >= 0 && !(rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it))) {
		while ((rc = sfs_df_iter_next(it, &row)) == 1)
			;
		sfs_df_iter_close(it);
	}
	sfs_df_reader_close(rd);
out:
	free(k);
	free(out);
	return rc < 0 ? rc : 0;
}

struct layout {
	uint64_t kp_off[1024], vp_off[1024], filter_off, footer_off;
	uint32_t nk, nv;
};

/* Page offsets from the footer (read with the format's own structs'
 * sizes: stats 96 B, key entries 56 B, value entries 40 B). */
static struct layout layout_of(const uint8_t *b, size_t len)
{
	struct layout l = { 0 };
	uint64_t fo;

	memcpy(&fo, b + len - 32, 8);
	l.footer_off = fo;
	memcpy(&l.filter_off, b + fo + 32, 8);
	memcpy(&l.nk, b + fo + 40, 4);
	memcpy(&l.nv, b + fo + 44, 4);
	cr_assert_leq(l.nk, 1024);
	cr_assert_leq(l.nv, 1024);
	for (uint32_t i = 0; i < l.nk; i++)
		memcpy(&l.kp_off[i], b + fo + 96 + 56 * i, 8);
	for (uint32_t i = 0; i < l.nv; i++)
		memcpy(&l.vp_off[i], b + fo + 96 + 56 * l.nk + 40 * i, 8);
	return l;
}

/* Where the page at @off ends: the next page of either kind, or the
 * filter (version 3 interleaves key and value pages). */
static uint64_t page_end(const struct layout *l, uint64_t off)
{
	uint64_t end = l->filter_off;

	for (uint32_t i = 0; i < l->nk; i++)
		if (l->kp_off[i] > off && l->kp_off[i] < end)
			end = l->kp_off[i];
	for (uint32_t i = 0; i < l->nv; i++)
		if (l->vp_off[i] > off && l->vp_off[i] < end)
			end = l->vp_off[i];
	return end;
}

static void expect_err(int rc, int code, const char *path, const char *what)
{
	cr_assert_eq(rc, code, "%s: rc %d (%s), expected %d; %s", what, rc, sfs_strerror(rc), code,
		     sfs_last_error());
	cr_assert(strstr(sfs_last_error(), path), "%s: message without the file: %s", what, sfs_last_error());
	cr_assert(strstr(sfs_last_error(), "offset"), "%s: message without an offset: %s", what,
		  sfs_last_error());
}

static void corruption_suite(int codec)
{
	char good[128], bad[128], want[256];
	struct ref r = make_ref(19, 1500, 3000);
	struct sfs_df_write_opts o = { .codec = codec, .page_bytes = 2048 };
	uint8_t *img, *cp;
	size_t len;
	struct layout l;
	uint64_t s = 23;

	snprintf(good, sizeof(good), "%s/good%d.df", dir, codec);
	snprintf(bad, sizeof(bad), "%s/bad%d.df", dir, codec);
	write_ref(good, &r, &o);
	img = slurp(good, &len);
	cp = malloc(len);
	l = layout_of(img, len);
	cr_assert_gt(l.nk, 2);
	cr_assert_eq(read_all(good, &r), 0, "%s", sfs_last_error());

	/* a flipped byte in every page: open succeeds, first touch refuses */
	for (uint32_t p = 0; p < l.nk + l.nv; p++) {
		int is_key = p < l.nk;
		uint64_t off = is_key ? l.kp_off[p] : l.vp_off[p - l.nk];
		uint64_t end = page_end(&l, off);
		sfs_df_reader_t *rd;

		memcpy(cp, img, len);
		cp[off + th_rand(&s) % (end - off)] ^= (uint8_t)(1 + th_rand(&s) % 255);
		spill(bad, cp, len);
		cr_assert_eq(sfs_df_reader_open(bad, NULL, &rd), 0, "%s", sfs_last_error());
		sfs_df_reader_close(rd);
		expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "flipped page byte");
		snprintf(want, sizeof(want), "%s: %s page %u at offset %llu: checksum mismatch", bad,
			 is_key ? "key" : "value", is_key ? p : p - l.nk, (unsigned long long)off);
		cr_assert(strstr(sfs_last_error(), want), "got '%s', want '%s'", sfs_last_error(), want);
	}
	/* the filter: a probe refuses */
	memcpy(cp, img, len);
	cp[l.filter_off + 3] ^= 0x10;
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "flipped filter byte");
	cr_assert(strstr(sfs_last_error(), "key filter"), "%s", sfs_last_error());

	/* every byte of the footer and trailer: refused at open */
	for (uint64_t off = l.footer_off; off < len; off++) {
		sfs_df_reader_t *rd = NULL;
		int rc;

		memcpy(cp, img, len);
		cp[off] ^= (uint8_t)(1 + th_rand(&s) % 255);
		spill(bad, cp, len);
		rc = sfs_df_reader_open(bad, NULL, &rd);
		/* the trailer's version field says "unknown version" */
		expect_err(rc, off >= len - 32 + 12 && off < len - 32 + 16 ? SFS_EVERSION : SFS_ECORRUPT, bad,
			   "flipped footer byte");
		cr_assert_null(rd);
	}
	/* truncation at every page boundary and at random offsets */
	for (uint32_t p = 0; p <= l.nk + l.nv + 1; p++) {
		uint64_t cut = p < l.nk ? l.kp_off[p] : p < l.nk + l.nv ? l.vp_off[p - l.nk]
					 : p == l.nk + l.nv ? l.filter_off : l.footer_off;

		spill(bad, img, cut);
		expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "truncated at a page boundary");
	}
	for (int i = 0; i < 40; i++) {
		spill(bad, img, th_rand(&s) % len);
		expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "truncated");
	}
	spill(bad, img, len - 1);
	expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "one byte short");

	/* wrong magic, unknown version (header and trailer) */
	memcpy(cp, img, len);
	cp[2] ^= 1;
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_EMAGIC, bad, "header magic");
	memcpy(cp, img, len);
	cp[8] = SFS_DF_VERSION + 1;
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_EVERSION, bad, "header version");
	memcpy(cp, img, len);
	cp[20] ^= 1;   /* reserved: the header checksum catches it */
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "header byte");
	memcpy(cp, img, len);
	cp[len - 1] ^= 1;
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "footer magic");
	cr_assert(strstr(sfs_last_error(), "bad magic"), "%s", sfs_last_error());
	memcpy(cp, img, len);
	cp[len - 32 + 12] = 9;
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_EVERSION, bad, "footer version");

	/* an empty file, a foreign one */
	spill(bad, img, 0);
	expect_err(read_all(bad, &r), SFS_ECORRUPT, bad, "empty");
	memset(cp, 'x', len);
	spill(bad, cp, len);
	expect_err(read_all(bad, &r), SFS_EMAGIC, bad, "foreign");

	cr_assert_eq(read_all(good, &r), 0);
	free(img);
	free(cp);
	free_ref(&r);
}

Test(datafile, corruption_refused_none)
{
	corruption_suite(SFS_DF_NONE);
}

Test(datafile, corruption_refused_lz4)
{
	corruption_suite(SFS_DF_LZ4);
}

Test(datafile, corruption_refused_zstd)
{
	corruption_suite(SFS_DF_ZSTD);
}

/* Pages with valid checksums but bad contents (what a buggy writer or a
 * forged file could hold): refused by structure, never a crash. */
Test(datafile, resealed_mutations_never_crash)
{
	char good[128], bad[128];
	struct ref r = make_ref(29, 800, 600);
	struct sfs_df_write_opts o = { .codec = SFS_DF_NONE, .page_bytes = 1024 };
	uint8_t *img, *cp;
	size_t len;
	uint64_t s = 31;
	int refused = 0;

	snprintf(good, sizeof(good), "%s/seal.df", dir);
	snprintf(bad, sizeof(bad), "%s/seal-bad.df", dir);
	write_ref(good, &r, &o);
	img = slurp(good, &len);
	cp = malloc(len);
	for (int i = 0; i < 400 * th_soak(); i++) {
		int rc;

		memcpy(cp, img, len);
		for (int j = 0; j < 1 + i % 4; j++)
			cp[th_rand(&s) % len] = (uint8_t)th_rand(&s);
		sfs__df_reseal(cp, len);
		spill(bad, cp, len);
		rc = read_all(bad, &r);
		cr_assert(rc == 0 || rc == SFS_ECORRUPT || rc == SFS_EVERSION || rc == SFS_EMAGIC,
			  "rc %d: %s", rc, sfs_last_error());
		refused += rc != 0;
	}
	cr_log_info("%d of %d resealed mutations refused", refused, 400 * th_soak());
	/* Resealed, a mutation passes every checksum: only the structural
	 * checks (offsets, counts, sizes, key order) can refuse it, and they
	 * refuse 119 of the 400 with this seed.  A reader that checked no
	 * structure would refuse none (and read garbage or crash): the floor
	 * makes this test able to fail without a crash. */
	cr_assert_geq(refused, 400 * th_soak() / 5, "%d of %d resealed mutations refused: the "
		      "structural checks refuse almost nothing", refused, 400 * th_soak());
	free(img);
	free(cp);
	free_ref(&r);
}

/* With sfs_layout_sync(0) (the table target's setting) the writer reaches
 * no fsync point, and the file reads back whole. */
Test(datafile, writer_without_sync)
{
	struct ref r = make_ref(23, 2000, 3000);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 1024 };
	char path[128];

	for (int sync = 1; sync >= 0; sync--) {
		uint64_t fsyncs;

		snprintf(path, sizeof(path), "%s/sync%d.df", dir, sync);
		sfs_layout_set_sync(sync);
		cr_assert_eq(sfs_fault_arm("layout.df.fsync:0"), 0, "%s", sfs_last_error());
		write_ref(path, &r, &o);
		fsyncs = sfs_fault_hits("layout.df.fsync");
		sfs_fault_reset();
		cr_assert_eq(fsyncs, (uint64_t)sync, "sync %d: %llu fsync points", sync,
			     (unsigned long long)fsyncs);
		cr_assert_eq(read_all(path, &r), 0, "%s", sfs_last_error());
	}
	sfs_layout_set_sync(1);
	free_ref(&r);
}

/* ---- the prefix filter ---------------------------------------------------------------- */

/* The test's prefix rule: kg (2) | n (1) | n parent bytes, then the user
 * key: every key starting with a prefix has that prefix's length. */
static uint32_t test_prefix_of(const void *key, size_t klen)
{
	const uint8_t *k = key;
	size_t p = klen >= 3 ? 3 + (size_t)k[2] : 0;

	return p && p <= klen ? (uint32_t)p : 0;
}

#define PFX_RULE 7u
#define PFX_PARENTS 2000u

/* Parent @i: kg | n | n bytes (n 1..12), in @out; its length. */
static size_t parent_key(uint8_t *out, uint32_t i)
{
	size_t n = 1 + i % 12;

	out[0] = (uint8_t)(i % 5);
	out[1] = 0;
	out[2] = (uint8_t)n;
	for (size_t j = 0; j < n; j++)
		out[3 + j] = (uint8_t)(i >> (8 * (j % 4)));
	return 3 + n;
}

/* The even parents, each with 1..4 entries (and itself as a row for every
 * 7th: a clear's tombstone is the bare prefix), written under @rule. */
static void write_parents(const char *path, const struct sfs_df_write_opts *o)
{
	struct row *rows = calloc(PFX_PARENTS * 5, sizeof(*rows));
	size_t n = 0;
	sfs_df_writer_t *w;

	for (uint32_t i = 0; i < PFX_PARENTS; i += 2) {
		uint8_t p[16];
		size_t pl = parent_key(p, i);

		for (uint32_t e = 0; e < 1 + i % 4 + (i % 7 == 0); e++) {
			struct row *r = &rows[n++];

			r->klen = pl + (e == 1 + i % 4 ? 0 : 1 + e % 3);
			r->key = malloc(r->klen);
			memcpy(r->key, p, pl);
			memset(r->key + pl, 'a' + e, r->klen - pl);
			r->kind = r->klen == pl ? SFS_DF_DELETE : SFS_DF_PUT;
		}
	}
	qsort(rows, n, sizeof(*rows), row_cmp);
	cr_assert_eq(sfs_df_writer_open(path, o, &w), 0, "%s", sfs_last_error());
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(sfs_df_writer_add(w, rows[i].key, rows[i].klen, rows[i].kind, "v",
					       rows[i].kind == SFS_DF_PUT), 0, "%s", sfs_last_error());
		free(rows[i].key);
	}
	cr_assert_eq(sfs_df_writer_finish(w, NULL), 0, "%s", sfs_last_error());
	free(rows);
}

Test(datafile, prefix_filter_never_excludes_a_present_prefix_and_prunes_absent_ones)
{
	char path[128];
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 512,
				       .prefix_of = test_prefix_of, .prefix_rule = PFX_RULE };
	sfs_df_reader_t *rd;
	struct sfs_df_meta m;
	unsigned pruned = 0;

	snprintf(path, sizeof(path), "%s/pfx.df", dir);
	write_parents(path, &o);
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0, "%s", sfs_last_error());
	sfs_df_reader_meta(rd, &m);
	cr_assert_eq(m.prefix_rule, PFX_RULE);
	for (uint32_t i = 0; i < PFX_PARENTS; i++) {
		uint8_t p[16];
		size_t pl = parent_key(p, i);
		int rc = sfs_df_prefix_maybe(rd, PFX_RULE, p, pl);

		cr_assert(rc == 0 || rc == 1, "%d: %s", rc, sfs_last_error());
		cr_assert_eq(sfs_df_prefix_maybe_h(rd, PFX_RULE, sfs_df_filter_hash(p, pl)), rc);
		if (i % 2 == 0) {
			sfs_df_iter_t *it;
			struct sfs_df_row row;

			cr_assert_eq(rc, 1, "parent %u is in the file", i);
			/* and the scan agrees */
			cr_assert_eq(sfs_df_iter_prefix(rd, p, pl, NULL, 0, &it), 0);
			cr_assert_eq(sfs_df_iter_next(it, &row), 1, "parent %u has rows", i);
			sfs_df_iter_close(it);
		} else {
			pruned += rc == 0;
		}
		/* another rule, or none: the filter does not answer */
		cr_assert_eq(sfs_df_prefix_maybe(rd, PFX_RULE + 1, p, pl), 1);
		cr_assert_eq(sfs_df_prefix_maybe(rd, 0, p, pl), 1);
	}
	/* ~10 bits per distinct prefix: about 1 % false positives */
	cr_assert_geq(pruned, PFX_PARENTS / 2 * 95 / 100, "absent prefixes pruned: %u of %u", pruned,
		      PFX_PARENTS / 2);
	cr_assert_eq(sfs_df_reader_counters(rd)->pruned_prefix, 2 * pruned);
	cr_assert_eq(sfs_df_reader_counters(rd)->prefix_asks, 2 * PFX_PARENTS);
	sfs_df_reader_close(rd);
}

/* A row without a prefix leaves the file without a prefix filter; a
 * prefix function without a rule is refused. */
Test(datafile, prefix_filter_dropped_by_a_row_without_a_prefix)
{
	char path[128];
	struct sfs_df_write_opts o = { .prefix_of = test_prefix_of, .prefix_rule = PFX_RULE };
	sfs_df_writer_t *w;
	sfs_df_reader_t *rd;
	struct sfs_df_meta m;
	uint8_t k1[] = { 0, 1, 2, 'a', 'b', 'c' }, k2[] = { 0, 2, 9, 'x' };	/* k2: 9 > its bytes */

	snprintf(path, sizeof(path), "%s/nopfx.df", dir);
	cr_assert_eq(sfs_df_writer_open(path, &o, &w), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_df_writer_add(w, k1, sizeof(k1), SFS_DF_PUT, "v", 1), 0);
	cr_assert_eq(sfs_df_writer_add(w, k2, sizeof(k2), SFS_DF_PUT, "v", 1), 0);
	cr_assert_eq(sfs_df_writer_finish(w, NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_df_reader_open(path, NULL, &rd), 0, "%s", sfs_last_error());
	sfs_df_reader_meta(rd, &m);
	cr_assert_eq(m.prefix_rule, 0);
	cr_assert_eq(sfs_df_prefix_maybe(rd, PFX_RULE, "\0\2\5zzzzz", 8), 1);
	sfs_df_reader_close(rd);

	o.prefix_rule = 0;
	cr_assert_eq(sfs_df_writer_open(path, &o, &w), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "prefix rule 0"), "%s", sfs_last_error());
}

/* A flipped byte of the prefix filter: the open succeeds (filters are
 * checked at first use), the first prefix ask fails naming the file and
 * the filter's offset. */
Test(datafile, a_corrupt_prefix_filter_is_named_at_first_use)
{
	char good[128], bad[128], want[256];
	struct sfs_df_write_opts o = { .codec = SFS_DF_ZSTD, .page_bytes = 512,
				       .prefix_of = test_prefix_of, .prefix_rule = PFX_RULE };
	sfs_df_reader_t *rd;
	uint8_t *img, p[16];
	uint64_t fo, foff;
	uint32_t flen, blocks;
	size_t len, pl = parent_key(p, 4);

	snprintf(good, sizeof(good), "%s/pfx.df", dir);
	snprintf(bad, sizeof(bad), "%s/pfx-bad.df", dir);
	write_parents(good, &o);
	img = slurp(good, &len);
	/* the trailer's footer offset; stats: s_filter_off at 32, s_filter_len
	 * at 48, s_pfx_blocks at 76 (the format, datafile_fmt.h) */
	memcpy(&fo, img + len - 32, 8);
	memcpy(&foff, img + fo + 32, 8);
	memcpy(&flen, img + fo + 48, 4);
	memcpy(&blocks, img + fo + 76, 4);
	cr_assert_gt(blocks, 0);
	img[foff + flen + 32 * (blocks / 2) + 5] ^= 0x40;
	spill(bad, img, len);
	cr_assert_eq(sfs_df_reader_open(bad, NULL, &rd), 0, "%s", sfs_last_error());
	expect_err(sfs_df_prefix_maybe(rd, PFX_RULE, p, pl), SFS_ECORRUPT, bad, "prefix filter");
	snprintf(want, sizeof(want), "%s: prefix filter at offset %llu: checksum mismatch", bad,
		 (unsigned long long)(foff + flen));
	cr_assert(strstr(sfs_last_error(), want), "got '%s', want '%s'", sfs_last_error(), want);
	sfs_df_reader_close(rd);
	free(img);
}

/* A version 1 file (no prefix filter) reads as before; a version 1 file
 * that claims a prefix filter is refused. */
Test(datafile, version_1_files_read_and_may_not_claim_a_prefix_filter)
{
	char path[128];
	struct ref r = make_ref(41, 600, 0);
	/* one key page and one value page, both cut at finish, key first: the
	 * layout of versions 1 and 2 */
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 1u << 20 };
	uint8_t *img;
	uint32_t v1 = 1, rule = PFX_RULE;
	uint64_t fo;
	size_t len;

	snprintf(path, sizeof(path), "%s/v1.df", dir);
	write_ref(path, &r, &o);
	img = slurp(path, &len);
	memcpy(img + 8, &v1, 4);
	memcpy(img + len - 32 + 12, &v1, 4);
	sfs__df_reseal(img, len);
	spill(path, img, len);
	cr_assert_eq(read_all(path, &r), 0, "%s", sfs_last_error());
	memcpy(&fo, img + len - 32, 8);
	memcpy(img + fo + 72, &rule, 4);
	sfs__df_reseal(img, len);
	spill(path, img, len);
	expect_err(read_all(path, &r), SFS_ECORRUPT, path, "v1 with a prefix rule");
	cr_assert(strstr(sfs_last_error(), "prefix filter fields"), "%s", sfs_last_error());
	free(img);
	free_ref(&r);
}

/* Version 3 writes each page as it is cut, key and value pages
 * interleaved (no value spill): such a file reads, the same bytes
 * claiming version 2 (keys first) are refused, and a footer whose pages
 * leave a gap or overlap is refused naming the offset. */
Test(datafile, version_3_interleaves_pages_and_they_must_tile)
{
	char path[128];
	struct ref r = make_ref(43, 2000, 400);
	struct sfs_df_write_opts o = { .codec = SFS_DF_LZ4, .page_bytes = 1024 };
	uint8_t *img, *cp;
	uint32_t v2 = 2;
	uint64_t off;
	size_t len;
	struct layout l;
	int interleaved = 0;

	snprintf(path, sizeof(path), "%s/v3.df", dir);
	write_ref(path, &r, &o);
	img = slurp(path, &len);
	l = layout_of(img, len);
	for (uint32_t i = 0; i < l.nv && !interleaved; i++)
		interleaved = l.vp_off[i] < l.kp_off[l.nk - 1];
	cr_assert(interleaved, "no value page before the last key page (%u key, %u value pages)", l.nk,
		  l.nv);
	cr_assert_eq(read_all(path, &r), 0, "%s", sfs_last_error());

	cp = malloc(len);
	memcpy(cp, img, len);
	memcpy(cp + 8, &v2, 4);
	memcpy(cp + len - 32 + 12, &v2, 4);
	sfs__df_reseal(cp, len);
	spill(path, cp, len);
	expect_err(read_all(path, &r), SFS_ECORRUPT, path, "interleaved pages claiming version 2");
	cr_assert(strstr(sfs_last_error(), "no page starts at offset"), "%s", sfs_last_error());

	/* value page 1 moved one byte on: a gap after page 0, an overlap with what follows */
	memcpy(cp, img, len);
	memcpy(&off, cp + l.footer_off + 96 + 56 * l.nk + 40 * 1, 8);
	off++;
	memcpy(cp + l.footer_off + 96 + 56 * l.nk + 40 * 1, &off, 8);
	sfs__df_reseal(cp, len);
	spill(path, cp, len);
	expect_err(read_all(path, &r), SFS_ECORRUPT, path, "a page moved by a byte");
	cr_assert(strstr(sfs_last_error(), "no page starts at offset"), "%s", sfs_last_error());
	free(cp);
	free(img);
	free_ref(&r);
}
