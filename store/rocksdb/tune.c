/*
 * tune.c — how a state's column family is tuned, wherever it is opened
 * (the compactor's primary: open.c; the SSTs it writes: write.c; the
 * readers' secondaries: read.c; the rescale: admin.c; the offline scan:
 * scan.c): the knobs, the family's options and compaction shape, and the
 * same choices in one line for `sfs stat`.  The instance-wide options
 * (background jobs, rate limit) are open.c's, from the knobs read here.
 *
 * Tuning per column family (sfs__rdbt_cf_options; sfs_rdbt_tuning says the same in
 * one line for `sfs stat`, the LOG's OPTIONS dump has it all): LZ4 on
 * L0/L1, ZSTD below and as the explicit bottommost compression, a full
 * bloom filter (10 bits/key, whole keys), partitioned filters with a
 * two-level index for value and counter state (random point reads), a
 * merge operator for counters, WAL off; for map and list state a skiplist
 * memtable and a prefix bloom over kg|state|ns|klen + 8 key bytes
 * (MAP_PREFIX_LEN), used by a scan only when its prefix is at least that
 * long (adaptive: shorter scans seek in total order); for value and
 * counter state in the primary a hash-linklist memtable over a capped
 * 20-byte prefix (kg|state|ns + 8 key bytes), which makes the instance run
 * with concurrent memtable writes off (one writing thread: no cost).
 * Compaction is universal (SFS_RDBT_UNIVERSAL, cf_shape: every ingested
 * SST overlaps every file, and leveled compaction rewrote all of L1 at
 * each L0 compaction) and paced (SFS_RDBT_PACING): one flush and two
 * compaction jobs (one long merge of a big state no longer holds up every
 * other family's L0), no subcompactions and a rate limiter on compaction
 * and flush writes (SST ingest is not limited), so compaction takes at
 * most two cores at a moment, under one on average at 20M q4 events, and a
 * bounded share of the disk; not a lower CPU priority, which starved
 * compaction (sfs__rdbt_open).  Not done: per-state prefix lengths from
 * observed key lengths.
 *
 * Knobs (environment, read at each open by the compactor and by readers;
 * for A/B runs, bench/rocksdb_ablation.sh): SFS_RDBT_INGEST_MIN=N (entries
 * of a state per buffer from which it goes as an SST; 0 never), and =0
 * switches off SFS_RDBT_HASH_MEMTABLE, SFS_RDBT_PARTITIONED_FILTERS,
 * SFS_RDBT_ADAPTIVE_PREFIX (no prefix bloom at all), SFS_RDBT_LZ4 (ZSTD on
 * every level), SFS_RDBT_MERGE (counters read, folded and put at each
 * flush: a read per counter), SFS_RDBT_PACING (4 background jobs, no
 * rate limit, normal priority) and SFS_RDBT_UNIVERSAL (leveled compaction
 * with RocksDB's defaults; an instance opens under either shape whatever
 * shape wrote it: tests/test_target_rocksdb.c switches both ways).  The
 * compactor publishes its knobs in its region (rp_knobs, rp_ingest_min)
 * for `sfs stat`; its closing log line counts the commits that waited for
 * an L0 backlog and for how long, and the LOG has RocksDB's compaction
 * stats every 30 s.
 */
#include <stdlib.h>
#include <string.h>

#include "common/merge.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb_int.h"

/* Hash-linklist memtable of value and counter state: prefix kg|state|ns
 * and up to 8 key bytes (capped_transform), buckets per memtable.  A
 * memtable holds at most one buffer's small states (bigger ones are
 * ingested), so a few thousand keys. */
#define PFX_LEN (SFS_KEY_PREFIX + NS_LEN + 8)
#define PFX_STR "20"
#define HASH_BUCKETS 16384u

/* A state's entries in one buffer from which they go as an SST: below it
 * a WriteBatch + memtable flush is as fast (bench/RESULTS.md, issue 5:
 * ingest/batch 1.0 at 250 entries, 1.07-1.68 at 1K, 2.5 at 10K) and one
 * flush covers every small state of the buffer at once, where each SST is
 * its own file and MANIFEST edit. */
#define INGEST_MIN_DEFAULT 1024u

static void cf_shape(rocksdb_options_t *o, const struct sfs_rdbt_knobs *k);
static char *capped_transform(void *st, const char *key, size_t len, size_t *out);
static unsigned char capped_in_domain(void *st, const char *key, size_t len);
static unsigned char capped_in_range(void *st, const char *key, size_t len);
static const char *capped_name(void *st);
static void capped_destroy(void *st);

/*
 * The knobs (environment, read at each open; every process of a job gets
 * the supervisor's environment, so the compactor and the readers agree).
 * Each SFS_RDBT_<X>=0 switches one tuning off, for the ablation benchmark
 * (bench/rocksdb_ablation.sh); anything else, or unset, leaves it on.
 */
struct sfs_rdbt_knobs sfs__rdbt_knobs_get(void)
{
	static const struct {
		const char *env;
		unsigned bit;
	} sw[] = {
		{ "SFS_RDBT_HASH_MEMTABLE", SFS_RDBT_K_HASH_MEMTABLE },
		{ "SFS_RDBT_PARTITIONED_FILTERS", SFS_RDBT_K_PARTITIONED },
		{ "SFS_RDBT_ADAPTIVE_PREFIX", SFS_RDBT_K_PREFIX },
		{ "SFS_RDBT_LZ4", SFS_RDBT_K_LZ4 },
		{ "SFS_RDBT_MERGE", SFS_RDBT_K_MERGE },
		{ "SFS_RDBT_PACING", SFS_RDBT_K_PACING },
		{ "SFS_RDBT_UNIVERSAL", SFS_RDBT_K_UNIVERSAL },
	};
	struct sfs_rdbt_knobs k = { .on = SFS_RDBT_K_ALL, .ingest_min = INGEST_MIN_DEFAULT };
	const char *e = getenv("SFS_RDBT_INGEST_MIN");

	for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++) {
		const char *v = getenv(sw[i].env);

		if (v && strcmp(v, "0") == 0)
			k.on &= ~sw[i].bit;
	}
	if (e && *e)
		k.ingest_min = strtoull(e, NULL, 10);
	return k;
}

void sfs_rdbt_tuning(const struct sfs_state_desc *d, const struct sfs_rdbt_knobs *k, char *buf,
		     size_t n)
{
	struct sfs_rdbt_knobs dk = sfs__rdbt_knobs_get();
	int point = d->sd_kind == SFS_STATE_VALUE || d->sd_kind == SFS_STATE_COUNTER;
	int prefix = d->sd_kind == SFS_STATE_MAP || d->sd_kind == SFS_STATE_LIST;
	char ing[64];

	if (!k)
		k = &dk;
	if (k->ingest_min)
		snprintf(ing, sizeof(ing), "SST ingest from %llu entries",
			 (unsigned long long)k->ingest_min);
	else
		snprintf(ing, sizeof(ing), "no SST ingest (batches only)");
	snprintf(buf, n, "%s memtable, WAL off, %s, bloom 10 bits%s%s%s%s, %s",
		 point && (k->on & SFS_RDBT_K_HASH_MEMTABLE)
			 ? "hash-linklist (capped prefix " PFX_STR ")" : "skiplist",
		 (k->on & SFS_RDBT_K_LZ4) ? "LZ4 L0-L1, ZSTD below and bottommost"
					 : "ZSTD every level",
		 point && (k->on & SFS_RDBT_K_PARTITIONED) ? ", partitioned filters + two-level index"
							   : "",
		 prefix && (k->on & SFS_RDBT_K_PREFIX)
			 ? ", prefix bloom (used only for probes at least that long)" : "",
		 d->sd_kind != SFS_STATE_COUNTER ? ""
		 : (k->on & SFS_RDBT_K_MERGE) ? ", merge operator "
					      : ", read-modify-write (no merge operator) ",
		 d->sd_kind == SFS_STATE_COUNTER ?
			 (sfs_merge_valid(d->sd_merge) ? sfs_merge_name(d->sd_merge)
						       : "undefined here") : "",
		 ing);
}

void sfs_rdbt_pacing(const struct sfs_rdbt_knobs *k, char *buf, size_t n)
{
	const char *style = (k->on & SFS_RDBT_K_UNIVERSAL) ? "universal" : "leveled";

	if (k->on & SFS_RDBT_K_PACING)
		snprintf(buf, n, "compaction %s, paced: %d background jobs (1 flush, 2 compactions), "
			 "no subcompactions, rate limit %d MiB/s", style, PACE_JOBS, PACE_RATE_MB);
	else
		snprintf(buf, n, "compaction %s, unpaced: %d background jobs, no rate limit", style,
			 UNPACED_JOBS);
}

/* Options of a state's column family (@d NULL: an unknown family, plain
 * options).  @primary: the compactor's (the memtable rep matters only
 * where memtables are written).  Every choice here is printed in the
 * instance's LOG (its OPTIONS dump at open and at each family's creation). */
rocksdb_options_t *sfs__rdbt_cf_options(const struct sfs_state_desc *d, rocksdb_cache_t *cache,
				     const struct sfs_rdbt_knobs *k, int primary)
{
	static const int lz4[7] = { rocksdb_lz4_compression, rocksdb_lz4_compression,
			      rocksdb_zstd_compression, rocksdb_zstd_compression,
			      rocksdb_zstd_compression, rocksdb_zstd_compression,
			      rocksdb_zstd_compression };
	static const int zstd[7] = { rocksdb_zstd_compression, rocksdb_zstd_compression,
			       rocksdb_zstd_compression, rocksdb_zstd_compression,
			       rocksdb_zstd_compression, rocksdb_zstd_compression,
			       rocksdb_zstd_compression };
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
	int point = d && (d->sd_kind == SFS_STATE_VALUE || d->sd_kind == SFS_STATE_COUNTER);

	rocksdb_options_set_num_levels(o, 7);
	rocksdb_options_set_compression_per_level(o, (k->on & SFS_RDBT_K_LZ4) ? lz4 : zstd, 7);
	rocksdb_options_set_bottommost_compression(o, rocksdb_zstd_compression);
	rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom_full(10));
	rocksdb_block_based_options_set_whole_key_filtering(t, 1);
	if (cache)
		rocksdb_block_based_options_set_block_cache(t, cache);
	if (point && (k->on & SFS_RDBT_K_PARTITIONED)) {
		/* Random point reads: partitioned filters, two-level index. */
		rocksdb_block_based_options_set_partition_filters(t, 1);
		rocksdb_block_based_options_set_index_type(
			t, rocksdb_block_based_table_index_type_two_level_index_search);
		rocksdb_block_based_options_set_cache_index_and_filter_blocks(t, 1);
		rocksdb_block_based_options_set_pin_top_level_index_and_filter(t, 1);
	}
	rocksdb_options_set_block_based_table_factory(o, t);
	rocksdb_block_based_options_destroy(t);
	cf_shape(o, k);
	if (d && (d->sd_kind == SFS_STATE_MAP || d->sd_kind == SFS_STATE_LIST) &&
	    (k->on & SFS_RDBT_K_PREFIX))
		rocksdb_options_set_prefix_extractor(
			o, rocksdb_slicetransform_create_fixed_prefix(MAP_PREFIX_LEN));
	if (point && primary && (k->on & SFS_RDBT_K_HASH_MEMTABLE)) {
		/* Point-only state: inserts hash into a bucket per key instead
		 * of a skiplist descent.  The DB then runs with concurrent
		 * memtable writes off (sfs__rdbt_open): the compactor is the one
		 * writing thread anyway. */
		rocksdb_options_set_prefix_extractor(
			o, rocksdb_slicetransform_create(NULL, capped_destroy, capped_transform,
							 capped_in_domain, capped_in_range,
							 capped_name));
		rocksdb_options_set_hash_link_list_rep(o, HASH_BUCKETS);
	}
	if (d && d->sd_kind == SFS_STATE_COUNTER && (k->on & SFS_RDBT_K_MERGE)) {
		/* NULL: an operator this process lacks.  The family opens
		 * without one; nothing here folds it (the compactor's flush
		 * and the worker's registration refuse the state first). */
		rocksdb_mergeoperator_t *m = sfs_rdb_i64_merge(d->sd_merge);

		if (m)
			rocksdb_options_set_merge_operator(o, m);
	}
	return o;
}

/*
 * Compaction shape of a state's family (SFS_RDBT_K_UNIVERSAL): universal.
 * Every ingested SST spans the whole key space (keys lead with their key
 * group, a hash, and each SST's last key is the applied marker at 0xff
 * 0xff), so it overlaps every file below it: after a family's first six
 * ingests (L6 up to L1), every one lands in L0.  Leveled compaction
 * (RocksDB's defaults: L1 up to 256 MiB, an L0 compaction at 4 files)
 * then rewrites all of L1 — the whole state, until it outgrows 256 MiB —
 * at every L0 compaction: measured at 20M q4 events, 7.9 bytes compacted
 * per byte ingested, 68 CPU s of compaction, commits waiting 48 s for an
 * L0 backlog (bench/RESULTS.md, issue 18).  Universal merges sorted runs
 * of similar size instead: 2.2 bytes per byte ingested, 30 CPU s; from 8
 * sorted runs (UNIV_TRIGGER) instead of 4, fewer still.  The cost: up to
 * twice the state on disk before a size-amplification compaction
 * (max_size_amplification_percent 200), and a probe may look at a few
 * more sorted runs (each behind its bloom filter).  Leveled with dynamic
 * level bytes and a 32 MiB base was tried: 61 CPU s (the base level is
 * still rewritten whole at every L0 compaction).  Readers open their
 * families with the same shape (sfs__rdbt_cf_options is shared).
 */
static void cf_shape(rocksdb_options_t *o, const struct sfs_rdbt_knobs *k)
{
	rocksdb_universal_compaction_options_t *u;

	if (!(k->on & SFS_RDBT_K_UNIVERSAL))
		return;
	u = rocksdb_universal_compaction_options_create();
	rocksdb_options_set_compaction_style(o, rocksdb_universal_compaction);
	rocksdb_options_set_universal_compaction_options(o, u);	/* copied */
	rocksdb_universal_compaction_options_destroy(u);
	rocksdb_options_set_level0_file_num_compaction_trigger(o, UNIV_TRIGGER);
	rocksdb_options_set_level0_slowdown_writes_trigger(o, (int)L0_BACKLOG_U + 4);
	rocksdb_options_set_level0_stop_writes_trigger(o, (int)L0_BACKLOG_U + 16);
}

/* Value and counter state: a prefix of kg|state|ns and up to 8 key bytes
 * (the whole key of an int64 key), capped: a shorter key is its own
 * prefix.  A fixed-length extractor would be wrong here, not just slow:
 * RocksDB's hash-linklist memtable hashes Transform(key) without asking
 * InDomain, and a fixed transform of a shorter key reads past it. */
static char *capped_transform(void *st, const char *key, size_t len, size_t *out)
{
	(void)st;
	*out = len < PFX_LEN ? len : PFX_LEN;
	return (char *)key;
}

static unsigned char capped_in_domain(void *st, const char *key, size_t len)
{
	(void)st;
	(void)key;
	(void)len;
	return 1;
}

static unsigned char capped_in_range(void *st, const char *key, size_t len)
{
	(void)st;
	(void)key;
	return len == PFX_LEN;
}

static const char *capped_name(void *st)
{
	(void)st;
	return "sfs.CappedPrefix." PFX_STR;
}

static void capped_destroy(void *st)
{
	(void)st;
}
