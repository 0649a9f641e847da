/*
 * bench_datafile.c — the table store's data file (store/table/layout/datafile_{write,read}.c):
 * write rate, and the per-batch key probe with its IN-set evaluated by one
 * hash-set pass over each candidate page's key column against the
 * per-literal alternative (every row compared with every literal of its
 * page), in the same run, on the same files and batches — the issue's
 * "hash-set IN vs per-literal" ablation.
 *
 *   make build/bench/bench_datafile && ./build/bench/bench_datafile [rows] [dir]
 *
 * Rows are 16-byte keys (key group big-endian | 6 bytes | id big-endian,
 * even ids only) and 64-byte values; one file per codec (LZ4, ZSTD,
 * none).  Batches are 1000 keys, half hits (a random even id), half misses
 * (an odd id: inside the pages' min/max, so only the filter or the page
 * pass rejects it).  Two files are probed: the big one (1M rows: ~1
 * candidate key per page, the deep-level case) and a small L0-sized one
 * (20k rows: dozens of candidate keys per page, what the barrier's
 * up-levelling lookups see).  Modes alternate REPS times; medians printed.
 * A third mode, SFS_DF_PROBE_SEEK_SPARSE (bisection per key in pages with
 * few candidates), shows what the hash-set pass costs on the sparse case.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "store/table/layout/datafile.h"
#include "sfs.h"

#define REPS 3
#define BATCH 1000
#define KLEN 16
#define VLEN 64

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Key of id @id among @n rows: key groups rise with the id (the file's
 * order), 128 of them. */
static void make_key(uint8_t *k, uint64_t id, uint64_t n)
{
	uint32_t kg = (uint32_t)(id / 2 * 128 / n);

	k[0] = (uint8_t)(kg >> 8);
	k[1] = (uint8_t)kg;
	memset(k + 2, 0, 6);
	k[2] = 0x01;   /* a state id */
	for (int i = 0; i < 8; i++)
		k[8 + i] = (uint8_t)(id >> (56 - 8 * i));
}

static void make_val(uint8_t *v, uint64_t id)
{
	/* half structured, half noise: compresses about as state rows do */
	uint64_t s = id;

	snprintf((char *)v, VLEN, "bidder=%llu;auction=%llu;price=%llu;", (unsigned long long)(id % 9973),
		 (unsigned long long)(id % 1013), (unsigned long long)(id * 7 % 100000));
	for (int i = 32; i < VLEN; i++)
		v[i] = (uint8_t)rnd(&s);
}

static double now_s(void)
{
	return (double)sfs_now_ns() / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static double write_file(const char *path, uint64_t n, int codec)
{
	struct sfs_df_write_opts o = { .codec = codec };
	sfs_df_writer_t *w;
	uint8_t k[KLEN], v[VLEN];
	double t0 = now_s();

	if (sfs_df_writer_open(path, &o, &w)) {
		fprintf(stderr, "bench_datafile: %s\n", sfs_last_error());
		exit(1);
	}
	for (uint64_t i = 0; i < n; i++) {
		make_key(k, 2 * i, n);
		make_val(v, i);
		if (sfs_df_writer_add(w, k, KLEN, SFS_DF_PUT, v, VLEN)) {
			fprintf(stderr, "bench_datafile: %s\n", sfs_last_error());
			exit(1);
		}
	}
	if (sfs_df_writer_finish(w, NULL)) {
		fprintf(stderr, "bench_datafile: %s\n", sfs_last_error());
		exit(1);
	}
	return (double)n / (now_s() - t0);
}

struct probe_run {
	double keys_per_s;
	double walked, lookups, compares, pages;   /* per batch */
};

/* @nb batches of BATCH keys against @path in @flags mode. */
static struct probe_run probe(const char *path, uint64_t n, int nb, unsigned flags, uint64_t seed)
{
	static uint8_t store[BATCH][KLEN];
	struct sfs_df_key keys[BATCH];
	struct sfs_df_hit out[BATCH];
	struct sfs_df_counters a, b;
	struct probe_run pr;
	sfs_df_reader_t *r;
	uint64_t s = seed, found = 0;
	double t = 0;

	if (sfs_df_reader_open(path, NULL, &r)) {
		fprintf(stderr, "bench_datafile: %s\n", sfs_last_error());
		exit(1);
	}
	a = *sfs_df_reader_counters(r);
	for (int bi = 0; bi < nb; bi++) {
		for (int i = 0; i < BATCH; i++) {
			uint64_t id = 2 * (rnd(&s) % n) + (i & 1);   /* odd: a miss */

			make_key(store[i], id, n);
			keys[i] = (struct sfs_df_key){ .p = store[i], .len = KLEN };
		}
		double t0 = now_s();
		int f = sfs_df_probe(r, keys, BATCH, NULL, 0, flags, out);

		t += now_s() - t0;
		if (f < 0) {
			fprintf(stderr, "bench_datafile: %s\n", sfs_last_error());
			exit(1);
		}
		found += (uint64_t)f;
	}
	b = *sfs_df_reader_counters(r);
	sfs_df_reader_close(r);
	if (found != (uint64_t)nb * BATCH / 2) {
		fprintf(stderr, "bench_datafile: found %llu of %d hits\n", (unsigned long long)found,
			nb * BATCH / 2);
		exit(1);
	}
	pr.keys_per_s = (double)nb * BATCH / t;
	pr.walked = (double)(b.rows_walked - a.rows_walked) / nb;
	pr.lookups = (double)(b.hash_lookups - a.hash_lookups) / nb;
	pr.compares = (double)(b.key_compares - a.key_compares) / nb;
	pr.pages = (double)(b.page_reads - a.page_reads) / nb;
	return pr;
}

static void probe_case(const char *label, const char *path, uint64_t n, int nb)
{
	double hs[REPS], pl[REPS], sk[REPS], ratio[REPS], sratio[REPS];
	struct probe_run h = { 0 }, p = { 0 }, k = { 0 };

	for (int rep = 0; rep < REPS; rep++) {
		h = probe(path, n, nb, 0, 1000 + (uint64_t)rep);
		p = probe(path, n, nb, SFS_DF_PROBE_PER_LITERAL, 1000 + (uint64_t)rep);
		k = probe(path, n, nb, SFS_DF_PROBE_SEEK_SPARSE, 1000 + (uint64_t)rep);
		hs[rep] = h.keys_per_s;
		pl[rep] = p.keys_per_s;
		sk[rep] = k.keys_per_s;
		ratio[rep] = h.keys_per_s / p.keys_per_s;
		sratio[rep] = k.keys_per_s / h.keys_per_s;
	}
	printf("%-28s hash-set %9.0f keys/s  per-literal %9.0f keys/s  hash-set/per-literal %5.2fx\n",
	       label, median(hs, REPS), median(pl, REPS), median(ratio, REPS));
	printf("%-28s seek-sparse %6.0f keys/s  seek-sparse/hash-set %5.2fx\n", "", median(sk, REPS),
	       median(sratio, REPS));
	printf("%-28s per batch: %.0f key pages, %.0f rows walked; hash-set %.0f lookups + %.0f key "
	       "compares; per-literal %.0f key compares\n", "", h.pages, h.walked, h.lookups, h.compares,
	       p.compares);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	const char *base = argc > 2 ? argv[2] : "/tmp";
	static const struct { int codec; const char *name; } codecs[] = {
		{ SFS_DF_LZ4, "lz4" }, { SFS_DF_ZSTD, "zstd" }, { SFS_DF_NONE, "none" },
	};
	char dir[256], path[3][300], small[300];
	const uint64_t n_small = 20000;

	snprintf(dir, sizeof(dir), "%s/sfs-bench-df-%d", base, (int)getpid());
	printf("data file: %llu rows of %d-byte keys and %d-byte values, batches of %d keys "
	       "(half hits), %d repetitions (medians)\n", (unsigned long long)n, KLEN, VLEN, BATCH, REPS);
	for (int c = 0; c < 3; c++) {
		double rates[REPS];
		sfs_df_reader_t *r;
		struct sfs_df_meta m;

		snprintf(path[c], sizeof(path[c]), "%s/big-%s.df", dir, codecs[c].name);
		for (int rep = 0; rep < REPS; rep++)
			rates[rep] = write_file(path[c], n, codecs[c].codec);
		sfs_df_reader_open(path[c], NULL, &r);
		sfs_df_reader_meta(r, &m);
		sfs_df_reader_close(r);
		printf("write %-5s %12.0f rows/s   %6.1f MiB (%.2f of raw), %u key pages, %u value pages\n",
		       codecs[c].name, median(rates, REPS), m.file_size / 1048576.0,
		       (double)m.file_size / ((double)n * (KLEN + VLEN)), m.key_pages, m.value_pages);
	}
	probe_case("probe 1M-row file (lz4)", path[0], n, 100);
	probe_case("probe 1M-row file (zstd)", path[1], n, 100);
	probe_case("probe 1M-row file (none)", path[2], n, 100);
	snprintf(small, sizeof(small), "%s/small-lz4.df", dir);
	write_file(small, n_small, SFS_DF_LZ4);
	probe_case("probe 20k-row L0 file (lz4)", small, n_small, 100);

	for (int c = 0; c < 3; c++)
		unlink(path[c]);
	unlink(small);
	rmdir(dir);
	return 0;
}
