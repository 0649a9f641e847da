/*
 * bench_rocksdb_flush.c — how the `rocksdb` flush target should make one
 * sealed buffer durable and visible to secondaries, by buffer size:
 *
 *   batch   one WriteBatch with the WAL off, then a memtable flush (wait):
 *           what store/rocksdb/write.c does (its flush is scheduled and polled,
 *           the work is the same)
 *   ingest  the buffer's sorted entries into an SST with SstFileWriter,
 *           then IngestExternalFile (move): the file is the durable copy
 *
 * Both in the same process, on the same disk, alternating, into one
 * database each that grows as buffers arrive (new keys every round, as a
 * stream's state grows), LZ4 as the target's L0.  Keys are target-shaped
 * (kg | state | ns | 8-byte id, 20 B), values 32 B.  Prints entries/s of
 * each and the ratio ingest/batch (> 1: ingest is faster).
 * Usage: bench_rocksdb_flush [dir (default /tmp)]
 *
 * The flush loop through the real target (`target DIR [BUFFERS] [ENTRIES]`):
 * the rocksdb target's writer (store/rocksdb/), driven as the compactor's
 * loop drives it (apply in pieces of 64 entries, commit polled every
 * millisecond while it says -EAGAIN), BUFFERS buffers of ENTRIES entries (half value puts of
 * 32 B, half counter merges; ids drawn from a key space that grows each
 * buffer, so RocksDB compacts as it goes) while a thread spins on the
 * other core as a worker would.  Prints one line: entries/s, the latency
 * of the loop's calls (p50/p99/max: how long the loop is away from every
 * other worker), and per buffer (seal to committed).  The knobs come from
 * the environment (store/rocksdb/tune.c: SFS_RDBT_*), one configuration per
 * process: RocksDB's thread pools are per process and keep what an
 * earlier configuration set.  bench/rocksdb_ablation.sh runs it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/keygroup.h"
#include "sfs.h"
#include "shm/proc.h"
#include "shm/segment.h"
#include "store/rocksdb/rocksdb.h"
#include "worker/state.h"

#define KLEN 20
#define VLEN 32

/* splitmix64 */
static uint64_t th_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int check(char **err, const char *what)
{
	if (!*err)
		return 0;
	fprintf(stderr, "bench_rocksdb_flush: %s: %s\n", what, *err);
	rocksdb_free(*err);
	*err = NULL;
	return 1;
}

static void key_of(unsigned char *k, uint64_t id)
{
	uint32_t kg = (uint32_t)(id % 128);

	k[0] = (unsigned char)(kg >> 8);
	k[1] = (unsigned char)kg;
	k[2] = 0;
	k[3] = 1;
	memset(k + 4, 0, 8);
	for (int i = 0; i < 8; i++)
		k[12 + i] = (unsigned char)(id >> (56 - 8 * i));
}

/* The ids of round @r, @n of them, in key order (the buffer's sort): kg
 * major, so id = kg + 128 * j for j of this round. */
static uint64_t id_at(uint64_t r, uint64_t n, uint64_t i)
{
	uint64_t per_kg = (n + 127) / 128, kg = i / per_kg, j = i % per_kg;

	return kg + 128 * (r * per_kg + j);
}

static rocksdb_t *open_db(const char *path, rocksdb_options_t *o)
{
	char *err = NULL;
	rocksdb_t *db;

	rocksdb_destroy_db(o, path, &err);
	if (check(&err, "destroy"))
		return NULL;
	db = rocksdb_open(o, path, &err);
	return check(&err, "open") ? NULL : db;
}

/* ---- the flush loop through the target -------------------------------------- */

struct tent {
	unsigned char key[SFS_KEY_PREFIX + 8];
	int64_t val[4];         /* 32 B value, or val[0] the counter delta */
	int counter;
};

static int tent_cmp(const void *a, const void *b)
{
	return memcmp(((const struct tent *)a)->key, ((const struct tent *)b)->key,
		      sizeof(((const struct tent *)a)->key));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static volatile int spin_stop;

static void *spinner(void *arg)
{
	volatile uint64_t n = 0;

	(void)arg;
	while (!spin_stop)
		n++;
	return NULL;
}

static uint64_t pct(uint64_t *v, size_t n, double p)
{
	return n ? v[(size_t)((double)(n - 1) * p)] : 0;
}

static int target_bench(const char *dir, unsigned nbuf, unsigned n)
{
	struct sfs_worker_opts wo = { .buffers = 2, .buffer_bytes = 1 << 20, .buffer_keys = 1024,
				      .flags = SFS_WORKER_NO_CACHE };
	struct sfs_target_cfg cfg = { 0 };
	struct sfs_target_writer *w;
	struct sfs_proc_slot *slot;
	struct sfs_wbuf_view *v;
	struct tent *e;
	struct sfs_seg seg;
	sfs_ctx_t *c;
	uint32_t sv, sc;
	char job[64];
	uint64_t *lat, *blat, nlat = 0, seed = 42, t_all, entries = 0;
	size_t lcap = (size_t)nbuf * (n / 64 + 4096);
	pthread_t th;
	char cmd[600];

	snprintf(job, sizeof(job), "bench-rdbt-%d", (int)getpid());
	if (sfs_seg_create(job, 0, 64u << 20, 1, &seg)) {
		fprintf(stderr, "bench_rocksdb_flush: %s\n", sfs_last_error());
		return 1;
	}
	snprintf(seg.hdr->sh_backend, sizeof(seg.hdr->sh_backend), "rocksdb");
	snprintf(seg.hdr->sh_data_dir, sizeof(seg.hdr->sh_data_dir), "%s/bench-rdbt-target.%d", dir,
		 (int)getpid());
	if (sfs_worker_open(job, 0, 0, &wo, &c) || sfs_state_register(c, "v", SFS_STATE_VALUE, &sv) ||
	    sfs_state_register(c, "c", SFS_STATE_COUNTER, &sc) ||
	    sfs_proc_register(&seg, SFS_ROLE_COMPACTOR, 0, &slot) ||
	    sfs_target_rocksdb.open(&seg, 0, slot, &cfg, &w)) {
		fprintf(stderr, "bench_rocksdb_flush: %s\n", sfs_last_error());
		return 1;
	}
	e = calloc(n, sizeof(*e));
	v = calloc(n, sizeof(*v));
	lat = calloc(lcap, sizeof(*lat));
	blat = calloc(nbuf, sizeof(*blat));
	if (!e || !v || !lat || !blat)
		return 1;
	pthread_create(&th, NULL, spinner, NULL);
	t_all = sfs_now_ns();
	for (unsigned b = 0; b < nbuf; b++) {
		uint64_t space = (uint64_t)(b + 1) * n, t0;
		unsigned m = 0;
		int rc;

		for (unsigned i = 0; i < n; i++) {
			uint64_t id = th_next(&seed) % space;
			unsigned char k8[8];
			uint32_t sid = (i & 1) ? sc : sv;

			for (int j = 0; j < 8; j++)
				k8[j] = (unsigned char)(id >> (56 - 8 * j));
			sfs_key_prefix(e[i].key, sfs_key_group(k8, 8, SFS_MAX_PARALLELISM_DEFAULT), sid);
			memcpy(e[i].key + SFS_KEY_PREFIX, k8, 8);
			e[i].counter = sid == sc;
			e[i].val[0] = (int64_t)id;
			e[i].val[1] = (int64_t)b;
		}
		qsort(e, n, sizeof(*e), tent_cmp);	/* the buffer's sort, one entry per key */
		for (unsigned i = 0; i < n; i++) {
			if (m && memcmp(e[i].key, v[m - 1].key, sizeof(e[i].key)) == 0)
				continue;
			v[m++] = (struct sfs_wbuf_view){
				.value = e[i].val, .key = e[i].key, .len = e[i].counter ? 8 : 32,
				.klen = sizeof(e[i].key),
				.kind = e[i].counter ? SFS_WBUF_MERGE : SFS_WBUF_PUT };
		}
		entries += m;
		t0 = sfs_now_ns();
		for (unsigned i = 0; i < m; i += 64) {
			uint64_t s0 = sfs_now_ns();

			if (sfs_target_rocksdb.apply(w, v + i, m - i < 64 ? m - i : 64, b + 1)) {
				fprintf(stderr, "bench_rocksdb_flush: apply: %s\n", sfs_last_error());
				return 1;
			}
			if (nlat < lcap)
				lat[nlat++] = sfs_now_ns() - s0;
		}
		for (;;) {
			uint64_t s0 = sfs_now_ns();

			rc = sfs_target_rocksdb.commit(w, b + 1);
			if (nlat < lcap)
				lat[nlat++] = sfs_now_ns() - s0;
			if (rc != -EAGAIN)
				break;
			sfs_ctx_quiescent(c);
			(void)sfs_target_rocksdb.busy(w);
			usleep(1000);
		}
		if (rc) {
			fprintf(stderr, "bench_rocksdb_flush: commit: %s\n", sfs_last_error());
			return 1;
		}
		blat[b] = sfs_now_ns() - t0;
		sfs_ctx_quiescent(c);
		(void)sfs_target_rocksdb.busy(w);
	}
	t_all = sfs_now_ns() - t_all;
	spin_stop = 1;
	pthread_join(th, NULL);
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
	qsort(blat, nbuf, sizeof(*blat), cmp_u64);
	printf("target %u buffers x %u entries: %.0f entries/s; loop call ms p50 %.3f p99 %.3f max "
	       "%.3f; buffer ms p50 %.1f p99 %.1f max %.1f\n",
	       nbuf, n, entries / (t_all / 1e9), pct(lat, nlat, 0.5) / 1e6, pct(lat, nlat, 0.99) / 1e6,
	       lat[nlat - 1] / 1e6, pct(blat, nbuf, 0.5) / 1e6, pct(blat, nbuf, 0.99) / 1e6,
	       blat[nbuf - 1] / 1e6);
	sfs_target_rocksdb.close(w);
	sfs_proc_unregister(slot);
	sfs_worker_close(c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", seg.hdr->sh_data_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_rocksdb_flush: cannot remove %s\n", seg.hdr->sh_data_dir);
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	free(e);
	free(v);
	free(lat);
	free(blat);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";

	if (argc > 2 && strcmp(argv[1], "target") == 0)
		return target_bench(argv[2], argc > 3 ? (unsigned)atoi(argv[3]) : 40,
				    argc > 4 ? (unsigned)atoi(argv[4]) : 100000);
	static const uint64_t sizes[] = { 250, 500, 1000, 2000, 4000, 10000, 100000, 300000 };
	char pb[512], pi[512], sst[600];
	unsigned char k[KLEN], v[VLEN];
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
	rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
	char *err = NULL;

	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_compression(o, rocksdb_lz4_compression);
	rocksdb_options_set_max_background_jobs(o, 4);
	rocksdb_writeoptions_disable_WAL(wo, 1);
	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
	memset(v, 'v', sizeof(v));
	snprintf(pb, sizeof(pb), "%s/bench-rdbt-batch.%d", dir, (int)getpid());
	snprintf(pi, sizeof(pi), "%s/bench-rdbt-ingest.%d", dir, (int)getpid());
	printf("%-10s %8s %14s %14s %8s\n", "entries", "rounds", "batch e/s", "ingest e/s",
	       "ingest/batch");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t n = sizes[s], rounds = 3000000 / n > 40 ? 40 : 3000000 / n;
		uint64_t tb = 0, ti = 0;
		rocksdb_t *db = open_db(pb, o), *di = open_db(pi, o);

		if (rounds < 4)
			rounds = 4;
		if (!db || !di)
			return 1;
		for (uint64_t r = 0; r < rounds; r++) {
			rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
			rocksdb_sstfilewriter_t *sw;
			const char *files[1] = { sst };
			uint64_t t0 = sfs_now_ns();

			for (uint64_t i = 0; i < n; i++) {
				key_of(k, id_at(r, n, i));
				rocksdb_writebatch_put(wb, (const char *)k, KLEN, (const char *)v, VLEN);
			}
			rocksdb_write(db, wo, wb, &err);
			if (check(&err, "write"))
				return 1;
			rocksdb_flush(db, fo, &err);
			if (check(&err, "flush"))
				return 1;
			rocksdb_writebatch_destroy(wb);
			tb += sfs_now_ns() - t0;

			t0 = sfs_now_ns();
			snprintf(sst, sizeof(sst), "%s.%llu.sst", pi, (unsigned long long)r);
			sw = rocksdb_sstfilewriter_create(eo, o);
			rocksdb_sstfilewriter_open(sw, sst, &err);
			if (check(&err, "sst open"))
				return 1;
			for (uint64_t i = 0; i < n; i++) {
				key_of(k, id_at(r, n, i));
				rocksdb_sstfilewriter_put(sw, (const char *)k, KLEN, (const char *)v,
							  VLEN, &err);
				if (check(&err, "sst put"))
					return 1;
			}
			rocksdb_sstfilewriter_finish(sw, &err);
			if (check(&err, "sst finish"))
				return 1;
			rocksdb_sstfilewriter_destroy(sw);
			rocksdb_ingest_external_file(di, files, 1, io, &err);
			if (check(&err, "ingest"))
				return 1;
			ti += sfs_now_ns() - t0;
		}
		printf("%-10llu %8llu %14.0f %14.0f %8.2f\n", (unsigned long long)n,
		       (unsigned long long)rounds, (double)(n * rounds) / (tb / 1e9),
		       (double)(n * rounds) / (ti / 1e9), (double)tb / (double)ti);
		rocksdb_close(db);
		rocksdb_close(di);
		rocksdb_destroy_db(o, pb, &err);
		check(&err, "destroy");
		rocksdb_destroy_db(o, pi, &err);
		check(&err, "destroy");
	}
	rocksdb_ingestexternalfileoptions_destroy(io);
	rocksdb_envoptions_destroy(eo);
	rocksdb_flushoptions_destroy(fo);
	rocksdb_writeoptions_destroy(wo);
	rocksdb_options_destroy(o);
	return 0;
}
