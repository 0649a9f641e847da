/*
 * bench_rocksdb_flush.c — how the `rocksdb` flush target should make one
 * sealed buffer durable and visible to secondaries, by buffer size:
 *
 *   batch   one WriteBatch with the WAL off, then a memtable flush (wait):
 *           what target/rocksdb.c does (its flush is scheduled and polled,
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
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "common/clock.h"

#define KLEN 20
#define VLEN 32

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

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	static const uint64_t sizes[] = { 1000, 10000, 100000, 300000 };
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
