/*
 * rocksdb.c — the `rocksdb` flush target (layout and files: rocksdb.h).
 *
 * Writing (the compactor, the only writer of each instance).  apply()
 * stages a sealed buffer's entries per state, process-locally (several
 * calls per buffer; a failed call is rolled back to its save point, so the
 * flush loop's retry from the same position never stages twice).
 * commit(seq) then writes each state one of two ways, in bounded steps
 * (-EAGAIN: call again):
 *  - a state with at least ingest_min entries in the buffer (default
 *    INGEST_MIN_DEFAULT, measured: bench/RESULTS.md, issue 5): one SST
 *    (SstFileWriter, the entries in key order, its "applied" marker = seq
 *    as the last key), ingested into its column family (a link and one
 *    MANIFEST edit, no memtable, no flush);
 *  - the other states: one WriteBatch of their entries and markers, WAL
 *    off, then their memtables flushed (atomic_flush: one MANIFEST edit).
 * So:
 *  - durable at commit: the compactor frees the buffer after a grace
 *    period, and a kill -9 after commit loses nothing (the data is in SST
 *    files and the MANIFEST; a memtable was the only volatile copy);
 *  - exactly once, per state: a state's entries and its marker reach the
 *    files together (one ingested file, or one batch and its flush), or
 *    not at all.  A redone flush (compactor restarted, a commit retried
 *    after an error, apply called again for a seq already committed) skips
 *    every entry of a state whose marker is >= seq, so a counter merge is
 *    never applied twice, also when a kill fell between two states'
 *    ingests;
 *  - visible to secondaries: with the WAL off a secondary sees only SST
 *    files, so the ingest or flush is also what publishes the version;
 *    rp_published is bumped after the whole buffer is in.
 * Counters are RocksDB merges (the state's sd_merge on int64: a built-in or
 * a user operator, "sfs.user.<name>" in the OPTIONS), so a flush never
 * reads.  A map clear (mh_clear_pos in the buffer's head) is a DeleteRange
 * over the map's range in that namespace: in a batch
 * written before the buffer's surviving entries of that map; in an SST a
 * range tombstone with the file's one sequence number, which covers only
 * older entries, so those same entries survive it.
 *
 * Failures (disk full, EFBIG, an I/O error): the commit fails loudly (the
 * instance, the file and RocksDB's status in the compactor's log, when it
 * starts, every 10 s while it lasts, and when it ends; rp_errors counts
 * attempts), the buffer stays sealed (its worker back-pressures) and the
 * commit is retried from the staged copy with a back-off (10 ms doubling
 * to 1 s).  A failed write, flush or ingest may leave RocksDB stopped on a
 * background error, with writes in its memtables that never became
 * durable: the instance is closed and opened again before the retry, and
 * the markers on disk say which states still need writing.  Nothing
 * committed is touched.  An L0 backlog (compaction behind) makes commit
 * wait (-EAGAIN) instead of stalling inside RocksDB.
 *
 * Cost of durability: per committed buffer, one SST per large state and
 * one memtable flush for the rest, each fsync'ed.  Buffers are large
 * (16 MiB by default) and committed once per barrier or spill, so this is
 * a few files per second per worker.
 *
 * Reading (workers; any process).  Each reader opens the instance as a
 * secondary.  catch_up() (quiescent points) calls TryCatchUpWithPrimary
 * when rp_published moved since the last one, and resets the scratch arena
 * every returned value lives in (values are copied out of RocksDB: valid
 * until the caller's next quiescent point).  probe / map_get / map_iter
 * also catch up when rp_published moved, without resetting the arena: the
 * worker's read path stops at a RETIRING buffer (state.c: "flushed in seq
 * order") as soon as commit returned, possibly before the worker's next
 * quiescent point, so a read must see every published version.  The check
 * is one acquire load; the catch-up happens at most once per version.
 * A new column family needs a new handle: when rp_cf_gen moved, the
 * secondary is reopened instead.
 *
 * Tags: a probe result's tag is the applied marker of the key's state at
 * the version read (read once per catch-up).  Every buffer with seq <= the
 * marker that touched the state is in the store, every newer one is not,
 * so the worker folds exactly the deltas of buffers newer than the tag.
 *
 * File deletion vs secondaries.  A secondary opens every table file of a
 * version when it installs it (max_open_files = -1), so an unlinked file it
 * uses stays readable; the danger is a file deleted between the primary's
 * MANIFEST edit and a secondary's catch-up over that edit.  The compactor
 * keeps file deletions disabled; after a commit it starts a grace period
 * over the process table (QSBR: every live online worker passes a
 * quiescent point, where it catches up) and only then opens a deletion
 * window (EnableFileDeletions purges what is obsolete, DisableFileDeletions
 * closes it again).  A secondary that still replays edits naming files
 * deleted since skips those intermediate versions (RocksDB's manifest
 * tailer installs only versions whose files exist).  A compactor restart
 * opens the primary, which purges obsolete files at open: the same rule
 * does not cover that moment (documented gap, as is a worker that stays
 * offline for longer than a window).
 *
 * Tuning per column family (cf_options; sfs_rdbt_tuning says the same in
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
 * compaction (rdbt_open).  Not done: per-state prefix lengths from
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
 *
 * State TTL (common/ttl.h).  Entries of a TTL state are stored as the
 * flush hands them over ([expiry][user bytes]); expired ones go in
 * RocksDB's own compactions: each TTL state's family gets a compaction
 * filter (ttl_filter; attached when the family is created and when the
 * instance is opened, also after a restore) that removes a Put whose
 * expiry is <= the state's clock as of the compactor's newest buffer
 * (ttl(), published to RocksDB's threads with atomics; 0 until the first:
 * nothing expires).  RocksDB writes a deletion for a removed Put wherever
 * an older version may lie below, so none resurfaces.  Families of
 * states without a TTL get no filter: no cost.  Drops are counted
 * (rp_ttl_dropped: `sfs stat`, the --json summary, the closing log line).
 *
 * Rollback in place (store/target.h: pin, rollback).  Each version staged
 * for a checkpoint is also kept as a flat RocksDB checkpoint of hard links
 * under <path>.pin until the next pin; a rollback swaps a link copy of
 * the pinned one with the instance directory in one renameat2 and opens
 * it; readers reopen on rp_incarnation.  Design, costs and the measured
 * times: "Rollback" below.
 *
 * Fault injection (tests): kill points rocksdb.* (common/fault.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "common/bump.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "common/fingerprint.h"
#include "common/log.h"
#include "common/merge.h"
#include "shm/qsbr.h"
#include "shm/segment.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb.h"
#include "common/keygroup.h"
#include "worker/wbuf.h"

#define CF_PREFIX "st:"
#define NS_LEN 8u
#define KBUF (SFS_KEY_MAX + SFS_KEY_PREFIX + NS_LEN + 32)
#define MARKER_KEY "\xff\xff" "sfs.applied"
#define MARKER_LEN (sizeof(MARKER_KEY) - 1)
#define IDENT_KEY "sfs.identity"
#define RESTORED_MARK "SFS-RESTORED"   /* rocksdb.h: a restore's files, to adopt */
#define BLOCK_CACHE_BYTES (32ull << 20)
#define MG_MAX 256u
/* Prefix bloom of map and list state: kg|state|ns|klen and 8 key bytes, a
 * map of an int64 key (every map of the Nexmark queries).  A scan whose
 * prefix is shorter seeks in total order (no prefix filter): a filter over
 * a longer prefix than the probe's would skip files holding its entries. */
#define MAP_PREFIX_LEN (SFS_KEY_PREFIX + NS_LEN + 2 + 8)
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
/* Records written to an SST per commit step (~10 ms). */
#define SST_STEP 32768u
/* L0 files of a family at which commit waits for compaction: below
 * RocksDB's level0_slowdown_writes_trigger (20 leveled; L0_BACKLOG_U + 4
 * universal, cf_shape), where a write would stall and a memtable flush
 * request (FlushOptions.allow_write_stall is false, and the C API cannot
 * set it) blocks the caller until compaction catches up — seconds with
 * paced compaction, long enough for the supervisor to take a compactor
 * blocked there for hung. */
#define L0_BACKLOG 16u
/* Universal: sorted runs in L0 at which a compaction starts (RocksDB's
 * default 4), and the backlog.  8, measured: a byte is merged about
 * log_8 instead of log_2 times (q20 at 20M events: 5.7-6.1 instead of 8.5
 * GB compacted, 59-75 instead of 104 CPU s); the cost is up to 8 more
 * runs a probe may look at, each behind its bloom filter. */
#define UNIV_TRIGGER 8
#define L0_BACKLOG_U 24u
/* Compaction pacing (SFS_RDBT_PACING) and the unpaced setting. */
#define PACE_JOBS 3	/* RocksDB: max(1, 3/4) = 1 flush, 2 compactions */
#define PACE_RATE_MB 128
#define UNPACED_JOBS 4
#define LOG_EVERY_NS (10ull * 1000000000ull)
/* Staged versions kept for a pin at once: checkpoints complete in order,
 * a few at most are staged and not yet complete. */
#define CAND_MAX 4u

/* ---- shared helpers --------------------------------------------------------- */

/* RocksDB's errptr, through the one adapter (common/rdb.h). */
static int rdbt_err(const char *path, char **err, const char *op)
{
	return sfs_rdb_err("rocksdb target", path, err, op);
}

static void rm_tree(const char *path)
{
	(void)sfs_rmtree(path);	/* best effort: a reader's LOG files */
}

static int inst_path(const struct sfs_seg *s, uint32_t worker, char *buf, size_t n)
{
	const char *dir = s->hdr->sh_data_dir;

	if (!dir[0])
		return sfs__err(SFS_EUSAGE,
				"segment %s: the rocksdb target needs a data directory (sh_data_dir "
				"is empty)",
				s->path);
	if ((size_t)snprintf(buf, n, "%.*s/w%u", SFS_SEG_DATA_DIR_MAX, dir, worker) >= n)
		return sfs__err(SFS_EUSAGE, "rocksdb target: data directory %s: path too long", dir);
	return 0;
}

static void region_name(uint32_t w, char *buf, size_t n)
{
	snprintf(buf, n, "rdbt.%u", w);
}

/* State id of column family @name in @s's registry, or -1. */
static int cf_state(const struct sfs_seg *s, const char *name)
{
	if (strncmp(name, CF_PREFIX, sizeof(CF_PREFIX) - 1) != 0)
		return -1;
	name += sizeof(CF_PREFIX) - 1;
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *d = &s->hdr->sh_states[i];

		if (sfs_load_acquire(&d->sd_state) == SFS_SDESC_READY && strcmp(d->sd_name, name) == 0)
			return (int)i;
	}
	return -1;
}

/*
 * Fault injection (tests): kill points (common/fault.h) rocksdb.apply (a
 * piece staged), rocksdb.write (the batch is in the memtables, not yet
 * flushed), rocksdb.flush (the batch durable, the buffer not yet
 * published), rocksdb.sst (a state's SST written, not yet ingested),
 * rocksdb.ingest (a state's SST ingested, the buffer's other states not
 * yet), rocksdb.rollback.copy (the pin's link copy made, not swapped in)
 * and rocksdb.rollback.swap (swapped in, the old instance not removed).
 * The facility is thread-safe; with the reader counter below the
 * only process-wide mutable state this file touches, so writers are safe
 * on the compactor's flush threads (each writer used by one thread at a
 * time).
 */

/* ---- tuning ----------------------------------------------------------------- */

/*
 * The knobs (environment, read at each open; every process of a job gets
 * the supervisor's environment, so the compactor and the readers agree).
 * Each SFS_RDBT_<X>=0 switches one tuning off, for the ablation benchmark
 * (bench/rocksdb_ablation.sh); anything else, or unset, leaves it on.
 */
static struct sfs_rdbt_knobs knobs_get(void)
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
	struct sfs_rdbt_knobs dk = knobs_get();
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
 * families with the same shape (cf_options is shared).
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

/* Options of a state's column family (@d NULL: an unknown family, plain
 * options).  @primary: the compactor's (the memtable rep matters only
 * where memtables are written).  Every choice here is printed in the
 * instance's LOG (its OPTIONS dump at open and at each family's creation). */
static rocksdb_options_t *cf_options(const struct sfs_state_desc *d, rocksdb_cache_t *cache,
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
		 * memtable writes off (rdbt_open): the compactor is the one
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

static const struct sfs_state_desc *desc_of(const struct sfs_seg *s, int sid)
{
	return sid >= 0 ? &s->hdr->sh_states[sid] : NULL;
}

/* RocksDB key of (@ns, @key): kg|state|ns(BE)|rest, into @out; its length. */
static uint32_t enc_key(unsigned char *out, uint64_t ns, const void *key, uint32_t klen)
{
	memcpy(out, key, SFS_KEY_PREFIX);
	for (unsigned i = 0; i < NS_LEN; i++)
		out[SFS_KEY_PREFIX + i] = (unsigned char)(ns >> (56 - 8 * i));
	memcpy(out + SFS_KEY_PREFIX + NS_LEN, (const char *)key + SFS_KEY_PREFIX,
	       klen - SFS_KEY_PREFIX);
	return klen + NS_LEN;
}

/* The first key after every key that starts with @p[0, @n): @p + 1. */
static void prefix_end(unsigned char *p, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;)
		if (++p[i] != 0)
			return;
}

/* ---- writer ------------------------------------------------------------------- */

struct wcf {
	rocksdb_column_family_handle_t *h;
	rocksdb_options_t *o;
	rocksdb_compactionfilter_t *f; /* a TTL state's (ttl_filter): the options hold a
					* raw pointer, so it outlives the instance */
	rocksdb_options_t *so;  /* its SstFileWriter's (sst_options), made at the first ingest */
	uint64_t applied;       /* its marker, as on disk */
};

/*
 * A state's share of the buffer being flushed, staged process-locally by
 * apply() and written by commit(): records (op, key and value lengths, the
 * RocksDB key, the value) in apply order, which a WriteBatch replays as
 * they came (a DeleteRange before the entries that follow it), and the
 * offsets of its point records, which an SST writes in key order.  The
 * staged copy outlives a failed commit, so a retry rebuilds the batch or
 * the SST from it after the buffer's own memory is long unread.
 */
enum { SOP_PUT = 1, SOP_DEL, SOP_MERGE, SOP_RANGE /* value: the range's end key */ };
#define SREC_HDR 9u     /* op(1) | klen(4) | vlen(4) */

struct wstage {
	unsigned char *buf;     /* records, in apply order */
	size_t len, cap;
	uint64_t *idx;          /* offsets of the point records */
	size_t n, ncap;
	size_t nrange;          /* DeleteRange records */
	int unsorted;           /* a point key not after the one before it */
	int dup;                /* two records of one key: batch only (an SST needs order) */
	int touched;            /* has records of this buffer */
	int done;               /* its records and marker are durable (an SST ingested) */
	int inbatch;            /* in the WriteBatch being written and flushed */
	rocksdb_sstfilewriter_t *sw; /* the SST being written */
	size_t sst_pos;         /* next idx[] the SST gets */
	uint64_t sst_t0;
	/* apply's save point: what to roll back to when a call fails */
	uint32_t mgen;
	size_t m_len, m_n, m_nrange;
	int m_unsorted, m_dup, m_touched;
};

/* What a TTL state's compaction filter reads (ttl_filter), on RocksDB's
 * background threads: the clock its rule names as of the newest ttl()
 * (ms; 0 before the first: nothing expires), stored by the compactor's
 * thread, loaded by the filter — atomics, the only data they share. */
struct wttl {
	struct sfs_target_writer *w;
	uint64_t now;
};

struct sfs_target_writer {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	uint32_t worker;
	struct sfs_rdbt_pub *pub;
	struct sfs_rdbt_knobs k;
	char path[PATH_MAX];
	char ipath[PATH_MAX];   /* <path>.ingest: SSTs being written */
	char ident[SFS_JOB_NAME_MAX + 64];
	int stage_ready;        /* the checkpoint stage's parent exists */
	rocksdb_options_t *dbo;
	rocksdb_cache_t *cache;
	rocksdb_ratelimiter_t *limiter;
	rocksdb_t *db;          /* NULL after a failed reopen: commit opens it again */
	rocksdb_writeoptions_t *wo;
	rocksdb_flushoptions_t *fo;
	rocksdb_readoptions_t *ro;
	rocksdb_envoptions_t *eo;
	rocksdb_ingestexternalfileoptions_t *io;
	rocksdb_column_family_handle_t *def;	/* only to destroy: the default family
						 * is used through the non-_cf calls */
	rocksdb_options_t *defo;
	struct wcf cf[SFS_MAX_STATES];
	struct wstage st[SFS_MAX_STATES];
	rocksdb_writebatch_t *wb;
	uint64_t seq;           /* the buffer staged, 0 none */
	uint32_t gen;           /* apply calls (save points) */
	int staged;             /* apply staged records of @seq: a commit is due */
	int batched;            /* the WriteBatch is built from the stages */
	int batch_any;          /* ... and holds something */
	int written;            /* the batch is in the memtables, a flush is due */
	int flushing;           /* its flush is scheduled, not yet installed */
	int reopen;             /* a RocksDB call failed: reopen before the next try */
	uint64_t flush_t0;      /* when it was scheduled */
	uint64_t purge_token;   /* grace period before the next deletion window */
	uint64_t wait_t0;       /* a commit waits for an L0 backlog since, 0 not */
	uint64_t wait_ns;       /* ... time waited so far (backlog_wait) */
	/* a failing commit: retried with a back-off, logged when it starts,
	 * every LOG_EVERY_NS while it lasts, and when it ends */
	unsigned fails;
	int last_rc;
	uint64_t retry_ns, logged_ns;
	unsigned char kbuf[KBUF];
	unsigned char kend[KBUF];
	struct wttl ttl[SFS_MAX_STATES];  /* per state, kept across reopens */
	uint64_t ttl_dropped;   /* entries ttl_filter removed (atomic, relaxed) */
	/* Rollback in place ("Rollback" below): process-local, like a pin */
	char ppath[PATH_MAX];   /* <path>.pin */
	struct {
		uint64_t id, seq;
		uint64_t ttl[SFS_MAX_STATES];   /* the TTL filters' clocks at staging */
	} cand[CAND_MAX];       /* staged, not pinned: c<id> */
	unsigned ncand;
	int pinned;             /* <ppath>/c<pin_id> is the version a rollback returns to */
	uint64_t pin_ttl[SFS_MAX_STATES]; /* its filters' clocks, put back by a rollback */
	int applied_any;        /* apply was called since open: pin(0) is refused */
	uint64_t rollbacks;     /* this writer's: names <ppath>/r<n>, the swapped-out one */
	unsigned trashing;      /* old instances being removed by a thread (atomic) */
	uint64_t pin_id, pin_seq;
};

static void stage_reset(struct wstage *s)
{
	if (s->sw)
		rocksdb_sstfilewriter_destroy(s->sw);
	s->sw = NULL;
	s->len = s->n = s->nrange = s->sst_pos = 0;
	s->unsorted = s->dup = s->touched = s->done = s->inbatch = 0;
}

static void stages_reset(struct sfs_target_writer *w)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->st[i].touched || w->st[i].sw)
			stage_reset(&w->st[i]);
	rocksdb_writebatch_clear(w->wb);
	w->seq = 0;
	w->staged = w->batched = w->batch_any = w->written = w->flushing = 0;
}

/* Bytewise order of RocksDB's default comparator. */
static int key_cmp(const unsigned char *a, uint32_t al, const unsigned char *b, uint32_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

static void srec_at(const struct wstage *s, uint64_t off, unsigned *op, const unsigned char **k,
		    uint32_t *kl, const unsigned char **v, uint32_t *vl)
{
	const unsigned char *p = s->buf + off;

	*op = p[0];
	memcpy(kl, p + 1, 4);
	memcpy(vl, p + 5, 4);
	*k = p + SREC_HDR;
	*v = p + SREC_HDR + *kl;
}

/* Append a record; O(1) amortized (one key compare for the order check). */
static int stage_add(struct wstage *s, unsigned op, const void *k, uint32_t kl, const void *v,
		     uint32_t vl, uint32_t gen)
{
	size_t need = SREC_HDR + (size_t)kl + vl;

	if (s->mgen != gen) {
		s->mgen = gen;
		s->m_len = s->len;
		s->m_n = s->n;
		s->m_nrange = s->nrange;
		s->m_unsorted = s->unsorted;
		s->m_dup = s->dup;
		s->m_touched = s->touched;
	}
	if (s->len + need > s->cap) {
		size_t cap = s->cap ? s->cap : 64u << 10;
		unsigned char *nb;

		while (cap < s->len + need)
			cap *= 2;
		if (!(nb = realloc(s->buf, cap)))
			return -ENOMEM;
		s->buf = nb;
		s->cap = cap;
	}
	if (op != SOP_RANGE && s->n == s->ncap) {
		size_t cap = s->ncap ? s->ncap * 2 : 4096;
		uint64_t *ni = realloc(s->idx, cap * sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		s->idx = ni;
		s->ncap = cap;
	}
	if (op != SOP_RANGE && s->n) {
		unsigned pop;
		const unsigned char *pk, *pv;
		uint32_t pkl, pvl;
		int c;

		srec_at(s, s->idx[s->n - 1], &pop, &pk, &pkl, &pv, &pvl);
		c = key_cmp(pk, pkl, k, kl);
		if (c >= 0)
			s->unsorted = 1;
		if (c == 0)
			s->dup = 1;
	}
	s->buf[s->len] = (unsigned char)op;
	memcpy(s->buf + s->len + 1, &kl, 4);
	memcpy(s->buf + s->len + 5, &vl, 4);
	memcpy(s->buf + s->len + SREC_HDR, k, kl);
	if (vl)
		memcpy(s->buf + s->len + SREC_HDR + kl, v, vl);
	if (op == SOP_RANGE)
		s->nrange++;
	else
		s->idx[s->n++] = s->len;
	s->len += need;
	s->touched = 1;
	return 0;
}

/* Undo what the failed apply call @gen staged. */
static void stages_rollback(struct sfs_target_writer *w, uint32_t gen)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		struct wstage *s = &w->st[i];

		if (s->mgen != gen)
			continue;
		s->len = s->m_len;
		s->n = s->m_n;
		s->nrange = s->m_nrange;
		s->unsorted = s->m_unsorted;
		s->dup = s->m_dup;
		s->touched = s->m_touched;
	}
}

static int idx_cmp(const void *a, const void *b, void *arg)
{
	const struct wstage *s = arg;
	unsigned op;
	const unsigned char *ka, *kb, *v;
	uint32_t la, lb, vl;

	srec_at(s, *(const uint64_t *)a, &op, &ka, &la, &v, &vl);
	srec_at(s, *(const uint64_t *)b, &op, &kb, &lb, &v, &vl);
	return key_cmp(ka, la, kb, lb);
}

/* Sort the point records into key order (only when apply saw them out of
 * order: several namespaces of one key).  O(n log n) compares of keys in
 * the stage; the usual buffer (one namespace) skips it. */
static void stage_sort(struct wstage *s)
{
	if (!s->unsorted)
		return;
	qsort_r(s->idx, s->n, sizeof(*s->idx), idx_cmp, s);
	s->unsorted = 0;
	for (size_t i = 1; i < s->n && !s->dup; i++)
		s->dup = idx_cmp(&s->idx[i - 1], &s->idx[i], s) == 0;
}

static void w_close_db(struct sfs_target_writer *w)
{
	rocksdb_compactionfilter_t *f[SFS_MAX_STATES];

	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (w->cf[i].h)
			rocksdb_column_family_handle_destroy(w->cf[i].h);
		if (w->cf[i].o)
			rocksdb_options_destroy(w->cf[i].o);
		if (w->cf[i].so)
			rocksdb_options_destroy(w->cf[i].so);
		f[i] = w->cf[i].f;
		w->cf[i] = (struct wcf){ 0 };
	}
	if (w->def)
		rocksdb_column_family_handle_destroy(w->def);
	w->def = NULL;
	if (w->db)
		rocksdb_close(w->db);	/* waits for its compactions: no filter runs after */
	w->db = NULL;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (f[i])
			rocksdb_compactionfilter_destroy(f[i]);
}

/*
 * State TTL (common/ttl.h): the compaction filter of a TTL state's family.
 * Called by RocksDB for the newest version of each key a compaction
 * reads, when it is a Put (older versions under it go without asking;
 * merge operands never come: the C API's filter is Filter(), and
 * CompactionFilter's default keeps operands — a TTL state has none
 * anyway, its counters are puts; tests/test_target_rocksdb.c shows a
 * counter's merges, folded in a compaction, are not filtered either).
 * Removes an entry whose expiry is <= the state's clock of the newest
 * ttl(); RocksDB then writes a deletion in its place unless the output
 * is the bottommost level with nothing older below (tests: an older
 * version below never resurfaces).  The applied marker is the family's
 * own bookkeeping, not an entry: never dropped (its 8 bytes would read
 * as an expiry = its seq, long past).  So the count is of keys dropped,
 * not versions; a compaction that fails and is redone counts again.
 * Cost: two loads and a compare per key compacted, in TTL families only.
 */
static unsigned char ttl_filter(void *st, int level, const char *key, size_t klen,
				const char *val, size_t vlen, char **nval, size_t *nvlen,
				unsigned char *changed)
{
	struct wttl *t = st;
	uint64_t now = __atomic_load_n(&t->now, __ATOMIC_RELAXED);

	(void)level;
	(void)nval;
	(void)nvlen;
	*changed = 0;
	if (!now || (klen == MARKER_LEN && memcmp(key, MARKER_KEY, MARKER_LEN) == 0) ||
	    !sfs_ttl_expired(val, vlen > UINT32_MAX ? UINT32_MAX : (uint32_t)vlen, now))
		return 0;
	__atomic_fetch_add(&t->w->ttl_dropped, 1, __ATOMIC_RELAXED);
	return 1;
}

static const char *ttl_filter_name(void *st)
{
	(void)st;
	return "sfs.ttl";
}

static void ttl_filter_destroy(void *st)
{
	(void)st;	/* the writer's: freed with it */
}

/* The filter for family options @o of state @sid, if the registry gives
 * it a TTL (NULL: none; a state without one gets nothing, so no cost).
 * The registry's sd_ttl_ms is set before READY and never turns off
 * (include/sfs.h), so the family's open or creation is when to decide. */
static rocksdb_compactionfilter_t *ttl_attach(struct sfs_target_writer *w, int sid,
					      rocksdb_options_t *o)
{
	rocksdb_compactionfilter_t *f;

	if (sid < 0 || !sfs_load_relaxed(&w->seg->hdr->sh_states[sid].sd_ttl_ms))
		return NULL;
	f = rocksdb_compactionfilter_create(&w->ttl[sid], ttl_filter_destroy, ttl_filter,
					    ttl_filter_name);
	rocksdb_options_set_compaction_filter(o, f);
	return f;
}

static uint64_t read_marker(rocksdb_t *db, const rocksdb_readoptions_t *ro,
			    rocksdb_column_family_handle_t *h)
{
	char *err = NULL, *v;
	size_t len = 0;
	uint64_t seq = 0;

	v = rocksdb_get_cf(db, ro, h, MARKER_KEY, MARKER_LEN, &len, &err);
	if (err)
		rocksdb_free(err);
	else if (v && len == 8)
		memcpy(&seq, v, 8);
	if (v)
		rocksdb_free(v);
	return seq;
}

/* Open the primary with every column family it has; 1 if it belongs to
 * this segment (identity key matches @ident), 0 if not, < 0 error. */
static int w_open_db(struct sfs_target_writer *w, const char *ident)
{
	char *err = NULL, **names = NULL;
	size_t ncf = 0;
	int rc = 0, mine = 0;

	names = rocksdb_list_column_families(w->dbo, w->path, &ncf, &err);
	if (err) {	/* no instance yet (the C API returns an empty list anyway) */
		rocksdb_free(err);
		err = NULL;
		if (names)
			rocksdb_list_column_families_destroy(names, 0);
		names = NULL;
		ncf = 0;
	}
	if (ncf == 0) {
		w->db = rocksdb_open(w->dbo, w->path, &err);
		if (err || !w->db)
			return (rc = rdbt_err(w->path, &err, "open")) ? rc : -EIO;
	} else {
		const char **cn = calloc(ncf, sizeof(*cn));
		const rocksdb_options_t **co = calloc(ncf, sizeof(*co));
		rocksdb_column_family_handle_t **ch = calloc(ncf, sizeof(*ch));
		rocksdb_options_t **own = calloc(ncf, sizeof(*own));
		rocksdb_compactionfilter_t **fl = calloc(ncf, sizeof(*fl));

		if (!cn || !co || !ch || !own || !fl) {
			rc = -ENOMEM;
			goto out_lists;
		}
		for (size_t i = 0; i < ncf; i++) {
			int sid = strcmp(names[i], "default") ? cf_state(w->seg, names[i]) : -1;

			cn[i] = names[i];
			own[i] = strcmp(names[i], "default") ? cf_options(desc_of(w->seg, sid), w->cache, &w->k, 1)
							      : NULL;
			/* a restored instance's families too: the registry is
			 * the checkpoint's before the compactor opens */
			fl[i] = own[i] ? ttl_attach(w, sid, own[i]) : NULL;
			co[i] = own[i] ? own[i] : w->defo;
		}
		w->db = rocksdb_open_column_families(w->dbo, w->path, (int)ncf, cn, co, ch, &err);
		if (err || !w->db) {
			rc = rdbt_err(w->path, &err, "open");
			rc = rc ? rc : -EIO;
			for (size_t i = 0; i < ncf; i++) {
				if (own[i])
					rocksdb_options_destroy(own[i]);
				if (fl[i])
					rocksdb_compactionfilter_destroy(fl[i]);
			}
			goto out_lists;
		}
		for (size_t i = 0; i < ncf; i++) {
			int sid = own[i] ? cf_state(w->seg, names[i]) : -1;

			if (!own[i]) {
				w->def = ch[i];
			} else if (sid >= 0 && !w->cf[sid].h) {
				w->cf[sid].h = ch[i];
				w->cf[sid].o = own[i];
				w->cf[sid].f = fl[i];
			} else {	/* of another job's registry: never read */
				rocksdb_column_family_handle_destroy(ch[i]);
				rocksdb_options_destroy(own[i]);	/* sid < 0: no filter */
			}
		}
out_lists:
		free(cn);
		free(co);
		free(ch);
		free(own);
		free(fl);
		if (rc)
			goto out;
	}
	{
		size_t len = 0;
		char *v = rocksdb_get(w->db, w->ro, IDENT_KEY, sizeof(IDENT_KEY) - 1, &len, &err);

		if (err) {
			rc = rdbt_err(w->path, &err, "read identity");
			goto out;
		}
		mine = v && len == strlen(ident) && memcmp(v, ident, len) == 0;
		if (v)
			rocksdb_free(v);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->cf[i].h)
			w->cf[i].applied = read_marker(w->db, w->ro, w->cf[i].h);
	rc = mine;
out:
	if (names)
		rocksdb_list_column_families_destroy(names, ncf);
	return rc;
}

/* A fresh instance for this segment: whatever a previous job left at the
 * path is destroyed, the identity written and flushed. */
static int w_fresh(struct sfs_target_writer *w, const char *ident)
{
	char *err = NULL, cur[PATH_MAX + 16];
	int rc, dfd;

	w_close_db(w);
	/* CURRENT first: DestroyDB unlinks the MANIFEST before CURRENT, and a
	 * kill -9 between the two left a CURRENT naming a missing MANIFEST,
	 * which no later open could get past.  Without CURRENT the directory
	 * holds no instance, and the next open creates one. */
	snprintf(cur, sizeof(cur), "%s/CURRENT", w->path);
	if (unlink(cur) && errno != ENOENT)
		return sfs__err(sfs__errno(), "%s: %s", cur, strerror(errno));
	if ((dfd = open(w->path, O_RDONLY | O_DIRECTORY)) >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	rocksdb_destroy_db(w->dbo, w->path, &err);
	if ((rc = rdbt_err(w->path, &err, "destroy a previous job's instance")))
		return rc;
	/* DestroyDB removed the directory, and RocksDB's create_if_missing
	 * would make it 0755: made here again, 0700 (data: private). */
	if ((rc = sfs_mkdirs(w->path, 0700)))
		return rc;
	w->db = rocksdb_open(w->dbo, w->path, &err);
	if (err || !w->db)
		return (rc = rdbt_err(w->path, &err, "open")) ? rc : -EIO;
	rocksdb_put(w->db, w->wo, IDENT_KEY, sizeof(IDENT_KEY) - 1, ident, strlen(ident), &err);
	if ((rc = rdbt_err(w->path, &err, "write identity")))
		return rc;
	{
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(w->db, fo, &err);
		rocksdb_flushoptions_destroy(fo);
	}
	return rdbt_err(w->path, &err, "flush identity");
}

static void rdbt_close(struct sfs_target_writer *w)
{
	char *err = NULL;

	if (!w)
		return;
	if (w->db) {
		/* Leave the deletion count as RocksDB starts it: the next
		 * open disables again. */
		rocksdb_enable_file_deletions(w->db, 1, &err);
		if (err)
			rocksdb_free(err);
	}
	w_close_db(w);	/* its compactions done: the filter's count is final */
	if (w->pub) {
		sfs_store_relaxed(&w->pub->rp_ttl_dropped,
				  __atomic_load_n(&w->ttl_dropped, __ATOMIC_RELAXED));
		sfs_log("rocksdb target %s: %llu commits, %llu entries (%llu skipped), write %.1f ms, "
			"flush %.1f ms, %llu SSTs ingested (%llu entries, %.1f ms), %llu waits for "
			"an L0 backlog (%.1f ms), %llu failed commit attempts, %llu reopens, %llu "
			"deletion windows, %llu expired entries dropped by compactions",
			w->path, (unsigned long long)w->pub->rp_commits,
			(unsigned long long)w->pub->rp_entries,
			(unsigned long long)w->pub->rp_skipped, w->pub->rp_write_ns / 1e6,
			w->pub->rp_flush_ns / 1e6, (unsigned long long)w->pub->rp_ingests,
			(unsigned long long)w->pub->rp_ingest_entries, w->pub->rp_ingest_ns / 1e6,
			(unsigned long long)w->pub->rp_stalls, w->wait_ns / 1e6,
			(unsigned long long)w->pub->rp_errors,
			(unsigned long long)w->pub->rp_reopens, (unsigned long long)w->pub->rp_purges,
			(unsigned long long)w->pub->rp_ttl_dropped);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		stage_reset(&w->st[i]);
		free(w->st[i].buf);
		free(w->st[i].idx);
	}
	if (w->ipath[0])
		rm_tree(w->ipath);
	while (__atomic_load_n(&w->trashing, __ATOMIC_ACQUIRE))
		usleep(1000);	/* a rollback's old instance still being removed */
	if (w->ppath[0])
		rm_tree(w->ppath);
	if (w->wb)
		rocksdb_writebatch_destroy(w->wb);
	if (w->wo)
		rocksdb_writeoptions_destroy(w->wo);
	if (w->fo)
		rocksdb_flushoptions_destroy(w->fo);
	if (w->ro)
		rocksdb_readoptions_destroy(w->ro);
	if (w->eo)
		rocksdb_envoptions_destroy(w->eo);
	if (w->io)
		rocksdb_ingestexternalfileoptions_destroy(w->io);
	if (w->defo)
		rocksdb_options_destroy(w->defo);
	if (w->dbo)
		rocksdb_options_destroy(w->dbo);
	if (w->limiter)
		rocksdb_ratelimiter_destroy(w->limiter);
	if (w->cache)
		rocksdb_cache_destroy(w->cache);
	free(w);
}

static int pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_rdbt_pub **out)
{
	char name[SFS_REGION_NAME_MAX];
	uint64_t off, size;
	struct sfs_rdbt_pub *p;
	int rc;

	*out = NULL;
	region_name(worker, name, sizeof(name));
	if (sfs_seg_region_find(s, name, &off, &size)) {
		if (!create)
			return 0;
		rc = sfs_seg_region_create(s, name, 4096, SFS_ROLE_COMPACTOR, &off);
		if (rc)
			return rc;
		if ((rc = sfs_seg_region_find(s, name, &off, &size)))
			return rc;
	}
	p = sfs_seg_ptr(s, off);
	if (sfs_load_acquire(&p->rp_magic) == SFS_RDBT_MAGIC) {
		if (p->rp_version != SFS_RDBT_VERSION || p->rp_layout != sfs_rdbt_layout())
			return sfs__err(SFS_ELAYOUT, "rocksdb target region %s: version %u or layout "
					"differs from this build's", name, p->rp_version);
		*out = p;
		return 0;
	}
	if (!create)
		return 0;	/* being created: no version published yet */
	memset(p, 0, sizeof(*p));
	p->rp_version = SFS_RDBT_VERSION;
	p->rp_worker = worker;
	p->rp_layout = sfs_rdbt_layout();
	*out = p;
	return 0;
}

/* Open the instance (again): the primary, its markers, file deletions off. */
/*
 * A restore put a checkpoint's files at the path and RESTORED_MARK beside
 * them (the supervisor, before any child started, with the state registry
 * of the checkpoint: column families map to the same states).  Adopt the
 * instance: this segment's identity, every applied marker reset (the new
 * run's buffers count from seq 1; everything restored is older than all of
 * them), flushed, then the mark removed.  Redone whole if killed midway.
 */
static int w_adopt(struct sfs_target_writer *w, const char *mark)
{
	char *err = NULL;
	int rc;

	rocksdb_writebatch_clear(w->wb);
	rocksdb_writebatch_put(w->wb, IDENT_KEY, sizeof(IDENT_KEY) - 1, w->ident, strlen(w->ident));
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->cf[i].h) {
			rocksdb_writebatch_delete_cf(w->wb, w->cf[i].h, MARKER_KEY, MARKER_LEN);
			w->cf[i].applied = 0;
		}
	rocksdb_write(w->db, w->wo, w->wb, &err);
	rocksdb_writebatch_clear(w->wb);
	if ((rc = rdbt_err(w->path, &err, "adopt a restored instance")))
		return rc;
	{
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(w->db, fo, &err);
		rocksdb_flushoptions_destroy(fo);
	}
	if ((rc = rdbt_err(w->path, &err, "flush the adopted instance")))
		return rc;
	unlink(mark);
	sfs_log("rocksdb target %s: adopted the restored instance", w->path);
	return 0;
}

static int w_start(struct sfs_target_writer *w)
{
	char *err = NULL, mark[PATH_MAX + 32];
	int rc = w_open_db(w, w->ident);

	snprintf(mark, sizeof(mark), "%.*s/" RESTORED_MARK, PATH_MAX, w->path);
	if (rc >= 0 && access(mark, F_OK) == 0)
		rc = w_adopt(w, mark);
	else if (rc == 0)
		rc = w_fresh(w, w->ident);
	else if (rc == 1)
		rc = 0;
	if (rc)
		return rc;
	rocksdb_disable_file_deletions(w->db, &err);
	if ((rc = rdbt_err(w->path, &err, "disable file deletions")))
		return rc;
	/* A reader may still replay edits of the previous primary. */
	w->purge_token = sfs_qsbr_start(w->seg->hdr);
	sfs_store_release(&w->pub->rp_cf_gen, w->pub->rp_cf_gen + 1);
	return 0;
}

/*
 * After a failed write, flush or ingest: RocksDB may have stopped on a
 * background error (its memtables then hold writes that never became
 * durable), so the instance is closed and opened again.  The markers on
 * disk then say which states of the staged buffer still need writing.
 * The same gap as a compactor restart: the open purges obsolete files
 * without a grace period (rocksdb.h).
 */
static int w_reopen(struct sfs_target_writer *w)
{
	int rc;

	w_close_db(w);
	rocksdb_writebatch_clear(w->wb);
	w->batched = w->batch_any = w->written = w->flushing = 0;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->st[i].inbatch = 0;
	sfs_store_relaxed(&w->pub->rp_reopens, w->pub->rp_reopens + 1);
	if ((rc = w_start(w))) {
		w_close_db(w);	/* tried again at the next commit */
		return rc;
	}
	w->reopen = 0;
	return 0;
}

static int rdbt_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		     const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	char pacing[200];
	int rc;

	(void)cfg;
	if (!w)
		return -ENOMEM;
	w->seg = s;
	w->self = self;
	w->worker = worker;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->ttl[i].w = w;
	w->k = knobs_get();
	if ((rc = inst_path(s, worker, w->path, sizeof(w->path))) || (rc = sfs_mkdirs(w->path, 0700)))
		goto fail;
	/* SSTs are written beside the instance (its directory is RocksDB's),
	 * on the same file system (ingest moves them by a link); what a
	 * killed compactor left there goes now. */
	if ((size_t)snprintf(w->ipath, sizeof(w->ipath), "%.*s.ingest", PATH_MAX - 16, w->path) >=
	    sizeof(w->ipath)) {
		rc = sfs__err(SFS_EUSAGE, "rocksdb target %s: path too long", w->path);
		goto fail;
	}
	rm_tree(w->ipath);
	if ((rc = sfs_mkdirs(w->ipath, 0700)))
		goto fail;
	/* Pins die with their compactor (store/target.h): what a previous
	 * one kept goes, with the old instance a rollback killed after its
	 * swap left in r<n> (the swap itself is one atomic rename). */
	snprintf(w->ppath, sizeof(w->ppath), "%.*s.pin", PATH_MAX - 16, w->path);
	rm_tree(w->ppath);
	if ((rc = sfs_mkdirs(w->ppath, 0700)))
		goto fail;
	if ((rc = pub_find(s, worker, 1, &w->pub)))
		goto fail;
	/* A rollback killed between its two bumps: readers held off are
	 * released (w_start's rp_cf_gen bump makes them reopen). */
	if (sfs_load_acquire(&w->pub->rp_incarnation) & 1)
		sfs_store_release(&w->pub->rp_incarnation, w->pub->rp_incarnation + 1);
	sfs_store_relaxed(&w->pub->rp_knobs, w->k.on);
	sfs_store_relaxed(&w->pub->rp_ingest_min, w->k.ingest_min);
	w->ttl_dropped = w->pub->rp_ttl_dropped;	/* counted on across compactor runs */
	snprintf(w->ident, sizeof(w->ident), "%s/%llu/%llu", s->hdr->sh_job,
		 (unsigned long long)s->hdr->sh_created_ns,
		 (unsigned long long)s->hdr->sh_generation);
	w->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
	w->dbo = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(w->dbo, 1);
	rocksdb_options_set_create_missing_column_families(w->dbo, 1);
	rocksdb_options_set_atomic_flush(w->dbo, 1);
	rocksdb_options_set_max_open_files(w->dbo, -1);
	rocksdb_options_set_keep_log_file_num(w->dbo, 4);
	/* Compaction stats (per level, stall counters, AddFile bytes) in the
	 * LOG every 30 s instead of RocksDB's 600: what a run at scale is
	 * diagnosed from, for a few KB of LOG per dump. */
	rocksdb_options_set_stats_dump_period_sec(w->dbo, 30);
	/* The hash-linklist memtable cannot take concurrent inserts; the
	 * compactor is one thread, so this costs nothing (its WriteBatch is
	 * inserted by that thread either way). */
	rocksdb_options_set_allow_concurrent_memtable_write(
		w->dbo, !(w->k.on & SFS_RDBT_K_HASH_MEMTABLE));
	if (w->k.on & SFS_RDBT_K_PACING) {
		/* Flushes and compactions run in RocksDB's threads of this
		 * process, beside the flush loop and, on a small machine, the
		 * workers: one flush and two compactions at a time and their
		 * writes rate-limited, so compaction takes at most two cores
		 * and a bounded share of the disk.  Two, not one: with one, a
		 * long merge of q4's bids held up every other family, L0
		 * filled and commits waited 6.8 s of a 37 s run; with two, 0 s
		 * and no more CPU (bench/RESULTS.md, issue 18).  Not lower: compaction
		 * threads at low CPU priority (tried: nice 19) starve behind a
		 * busy worker, L0 fills and commits wait for it — measured, the
		 * flush loop's buffers took up to 6 s instead of 0.25 s
		 * (bench/RESULTS.md, issue 5).  An L0 backlog is handled by
		 * commit (it waits, the worker back-pressures). */
		rocksdb_options_set_max_background_jobs(w->dbo, PACE_JOBS);
		rocksdb_options_set_max_subcompactions(w->dbo, 1);
		w->limiter = rocksdb_ratelimiter_create((int64_t)PACE_RATE_MB << 20, 100000, 10);
		rocksdb_options_set_ratelimiter(w->dbo, w->limiter);
	} else {
		rocksdb_options_set_max_background_jobs(w->dbo, UNPACED_JOBS);
	}
	w->defo = rocksdb_options_create();
	w->wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(w->wo, 1);
	/* A write RocksDB would stall (too many L0 files) fails instead and
	 * the commit is retried: the flush loop never blocks in RocksDB. */
	rocksdb_writeoptions_set_no_slowdown(w->wo, 1);
	w->fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(w->fo, 0);
	w->ro = rocksdb_readoptions_create();
	w->eo = rocksdb_envoptions_create();
	w->io = rocksdb_ingestexternalfileoptions_create();
	rocksdb_ingestexternalfileoptions_set_move_files(w->io, 1);
	rocksdb_ingestexternalfileoptions_set_allow_global_seqno(w->io, 1);
	/* Memtables are empty between commits (each commit flushes them):
	 * a blocking flush before an ingest never happens in practice. */
	rocksdb_ingestexternalfileoptions_set_allow_blocking_flush(w->io, 1);
	w->wb = rocksdb_writebatch_create();
	if ((rc = w_start(w)))
		goto fail;
	if (sfs_load_acquire(&w->pub->rp_magic) != SFS_RDBT_MAGIC)
		sfs_store_release(&w->pub->rp_magic, SFS_RDBT_MAGIC);
	sfs_rdbt_pacing(&w->k, pacing, sizeof(pacing));
	sfs_log("rocksdb target %s: %s; a state's entries of a buffer go as an SST from %llu "
		"(0: never); tunings on: 0x%x of 0x%x (hash memtable, partitioned filters, prefix, "
		"LZ4, merge, pacing, universal)", w->path, pacing, (unsigned long long)w->k.ingest_min, w->k.on,
		SFS_RDBT_K_ALL);
	*out = w;
	return 0;
fail:
	rdbt_close(w);
	return rc;
}

static struct wcf *w_cf(struct sfs_target_writer *w, uint32_t sid)
{
	struct wcf *c = &w->cf[sid];
	char name[sizeof(CF_PREFIX) + SFS_STATE_NAME_MAX], *err = NULL;

	if (c->h)
		return c;
	snprintf(name, sizeof(name), CF_PREFIX "%s", w->seg->hdr->sh_states[sid].sd_name);
	c->o = cf_options(&w->seg->hdr->sh_states[sid], w->cache, &w->k, 1);
	c->f = ttl_attach(w, (int)sid, c->o);
	c->h = rocksdb_create_column_family(w->db, c->o, name, &err);
	if (err || !c->h) {
		int rc = rdbt_err(w->path, &err, "create column family");

		(void)rc;
		if (!err && !c->h)
			sfs__err(-EIO, "rocksdb target %s: column family %s: no handle", w->path,
				 name);
		rocksdb_options_destroy(c->o);
		if (c->f)	/* no family uses it */
			rocksdb_compactionfilter_destroy(c->f);
		c->o = NULL;
		c->f = NULL;
		c->h = NULL;
		return NULL;
	}
	c->applied = 0;
	sfs_store_release(&w->pub->rp_cf_gen, w->pub->rp_cf_gen + 1);
	return c;
}

/*
 * State TTL (store/target.h): before the first apply of each buffer, the
 * registry's rules and the buffer's clocks.  Each TTL state's filter
 * (ttl_filter) gets the clock its rule names; it only moves forward (a
 * smaller one — another clock source after a restart of this writer,
 * which starts at 0 — is ignored).  The rules are the compactor's: only
 * the clock values are kept.  Also publishes the filter's drop count
 * for `sfs stat`.  O(states) per buffer.
 */
static void rdbt_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		     const struct sfs_ttl_clock *now)
{
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		uint64_t t;

		if (!rules[i].ttl_ms)
			continue;
		t = sfs_ttl_now(&rules[i], now);
		/* this thread is the only writer: a plain compare, then a store */
		if (t > __atomic_load_n(&w->ttl[i].now, __ATOMIC_RELAXED))
			__atomic_store_n(&w->ttl[i].now, t, __ATOMIC_RELAXED);
	}
	sfs_store_relaxed(&w->pub->rp_ttl_dropped,
			  __atomic_load_n(&w->ttl_dropped, __ATOMIC_RELAXED));
}

void sfs_rdbt_test_handles(struct sfs_target_writer *w, uint32_t sid, void **db, void **cf)
{
	*db = w->db;
	*cf = sid < SFS_MAX_STATES ? w->cf[sid].h : NULL;
}

static int kind_of_state(const struct sfs_seg *s, uint32_t sid)
{
	return sid < SFS_MAX_STATES ? (int)s->hdr->sh_states[sid].sd_kind : 0;
}

/* One map (a parent's run @v[0, @n), every namespace in it): per
 * namespace, a DeleteRange when the buffer cleared it, then its entries. */
static int w_map(struct sfs_target_writer *w, struct wstage *s, const struct sfs_wbuf_view *v,
		 unsigned n, uint32_t plen)
{
	int rc = 0;

	for (unsigned i = 0; i < n && rc == 0; i++) {
		struct sfs_map_head hd = { 0, 0 };
		int seen = 0, cleared = 0;
		uint64_t ns = v[i].ns;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = v[j].ns == ns;
		if (seen)
			continue;
		for (unsigned j = i; j < n; j++)
			if (v[j].ns == ns && v[j].klen == plen && v[j].len == sizeof(hd)) {
				memcpy(&hd, v[j].value, sizeof(hd));
				cleared = hd.mh_clear_pos != 0;
			}
		if (cleared) {
			uint32_t pl = enc_key(w->kbuf, ns, v[i].key, plen);

			memcpy(w->kend, w->kbuf, pl);
			prefix_end(w->kend, pl);
			rc = stage_add(s, SOP_RANGE, w->kbuf, pl, w->kend, pl, w->gen);
		}
		for (unsigned j = i; j < n && rc == 0; j++) {
			struct sfs_map_ent me = { 0, SFS_MAP_REMOVED };
			uint32_t kl;

			if (v[j].ns != ns || v[j].klen == plen)
				continue;
			if (cleared && v[j].off < hd.mh_clear_pos)
				continue;	/* written before the clear: gone */
			if (v[j].len >= sizeof(me))
				memcpy(&me, v[j].value, sizeof(me));
			if (v[j].flags & SFS_WBUF_EXPIRED)
				me.me_flags |= SFS_MAP_REMOVED;	/* dropped at flush (common/ttl.h) */
			kl = enc_key(w->kbuf, ns, v[j].key, v[j].klen);
			if (me.me_flags & SFS_MAP_REMOVED)
				rc = stage_add(s, SOP_DEL, w->kbuf, kl, NULL, 0, w->gen);
			else
				rc = stage_add(s, SOP_PUT, w->kbuf, kl,
					       (const char *)v[j].value + sizeof(me),
					       v[j].len - (uint32_t)sizeof(me), w->gen);
		}
	}
	return rc;
}

/* A counter delta without the merge operator (the ablation's
 * SFS_RDBT_MERGE=0): read the stored value and stage the folded one.  A
 * read per counter per flush: what the merge operator saves. */
static int w_fold(struct sfs_target_writer *w, struct wcf *c, uint32_t sid, uint32_t kl,
		  int64_t d, int64_t *out)
{
	char *err = NULL, *v;
	size_t len = 0;
	int64_t cur;

	v = rocksdb_get_cf(w->db, w->ro, c->h, (const char *)w->kbuf, kl, &len, &err);
	if (err)
		return rdbt_err(w->path, &err, "read a counter (no merge operator)");
	if (v && len == 8) {
		memcpy(&cur, v, 8);
		*out = sfs_merge_i64(w->seg->hdr->sh_states[sid].sd_merge, cur, d);
	} else {
		*out = d;
	}
	if (v)
		rocksdb_free(v);
	return 0;
}

static int rdbt_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		      uint64_t seq)
{
	uint64_t skipped = 0, written = 0;
	int rc = 0;

	w->applied_any = 1;
	if (w->seq != seq) {
		/* Staged entries of another buffer that never committed:
		 * this flush starts over (the loop flushes in seq order). */
		stages_reset(w);
		w->seq = seq;
	}
	if (w->batched)
		return 0;	/* the buffer is staged whole: commit finishes it */
	if (!w->db && (rc = w_reopen(w)))
		return rc;
	w->gen++;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		uint32_t sid, kl;
		struct wcf *c;
		struct wstage *s;
		int kind;

		if (v[i].klen < SFS_KEY_PREFIX) {
			rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: key of %u bytes", w->path,
				      v[i].klen);
			break;
		}
		sid = sfs_key_prefix_state(v[i].key);
		kind = kind_of_state(w->seg, sid);
		if (sid >= SFS_MAX_STATES || !(c = w_cf(w, sid))) {
			rc = sid >= SFS_MAX_STATES
				     ? sfs__err(SFS_ECORRUPT, "rocksdb target %s: state id %u",
						w->path, sid)
				     : -EIO;
			break;
		}
		s = &w->st[sid];
		if (kind == SFS_STATE_MAP || kind == SFS_STATE_LIST) {
			uint32_t plen = sfs_map_parent_len(v[i].key, v[i].klen);
			unsigned run = 1;

			if (!plen) {
				rc = sfs__err(SFS_ECORRUPT,
					      "rocksdb target %s: malformed map key of %u bytes",
					      w->path, v[i].klen);
				break;
			}
			while (i + run < n && v[i + run].klen >= plen &&
			       memcmp(v[i + run].key, v[i].key, plen) == 0)
				run++;
			if (c->applied >= seq) {
				skipped += run;
			} else {
				rc = w_map(w, s, &v[i], run, plen);
				written += run;
			}
			i += run - 1;
			continue;
		}
		if (c->applied >= seq) {
			skipped++;
			continue;	/* a redone flush: this state holds @seq already */
		}
		written++;
		kl = enc_key(w->kbuf, v[i].ns, v[i].key, v[i].klen);
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = stage_add(s, SOP_PUT, w->kbuf, kl, v[i].value, v[i].len, w->gen);
			break;
		case SFS_WBUF_DELETE:
			rc = stage_add(s, SOP_DEL, w->kbuf, kl, NULL, 0, w->gen);
			break;
		case SFS_WBUF_MERGE: {
			int64_t d = sfs_wbuf_view_i64(&v[i]);

			if (!(w->k.on & SFS_RDBT_K_MERGE) && (rc = w_fold(w, c, sid, kl, d, &d)))
				break;
			rc = stage_add(s, (w->k.on & SFS_RDBT_K_MERGE) ? SOP_MERGE : SOP_PUT,
				       w->kbuf, kl, &d, 8, w->gen);
			break;
		}
		default:
			rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: entry of unknown kind %u",
				      w->path, v[i].kind);
		}
	}
	if (rc) {
		stages_rollback(w, w->gen);	/* the loop retries this piece */
		return rc;
	}
	w->staged = 1;
	sfs_store_relaxed(&w->pub->rp_skipped, w->pub->rp_skipped + skipped);
	sfs_store_relaxed(&w->pub->rp_entries, w->pub->rp_entries + written);
	sfs_fault("rocksdb.apply");
	return 0;
}

/* Open a file-deletion window once the grace period of the last one's
 * successor has passed: obsolete files go now. */
static int rdbt_busy(struct sfs_target_writer *w)
{
	char *err = NULL;
	int work = w->flushing || w->staged || w->fails;

	if (!w->db || !w->purge_token ||
	    sfs_qsbr_check(w->seg, w->self, w->purge_token, 0) != 1)
		return w->purge_token != 0 || work;
	rocksdb_enable_file_deletions(w->db, 0, &err);
	if (err)
		rocksdb_free(err);
	err = NULL;
	rocksdb_disable_file_deletions(w->db, &err);
	if (err)
		rocksdb_free(err);
	w->purge_token = 0;
	sfs_store_relaxed(&w->pub->rp_purges, w->pub->rp_purges + 1);
	return work;
}

/* 1 when no memtable of a batched family waits for its flush any more (the
 * flush's files are in the MANIFEST), 0 while one does, < 0 when RocksDB
 * stopped on a background error (a failed flush: disk full, I/O). */
static int flushed(struct sfs_target_writer *w)
{
	uint64_t v = 0;

	if (rocksdb_property_int(w->db, "rocksdb.background-errors", &v) == 0 && v > 0) {
		/* The C API has no call for the background error itself; a
		 * write returns it (the instance refuses writes after it). */
		char *err = NULL;

		rocksdb_put(w->db, w->wo, IDENT_KEY ".probe", sizeof(IDENT_KEY ".probe") - 1, "", 0,
			    &err);
		if (err)
			return rdbt_err(w->path, &err, "a memtable flush failed (the file is in the "
					"instance's LOG)");
		return sfs__err(-EIO, "rocksdb target %s: %llu background errors (a memtable flush "
				"failed: see %s/LOG)", w->path, (unsigned long long)v, w->path);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (!w->st[i].inbatch)
			continue;
		if (rocksdb_property_int_cf(w->db, w->cf[i].h, "rocksdb.num-immutable-mem-table",
					    &v) != 0 || v != 0)
			return 0;
		if (rocksdb_property_int_cf(w->db, w->cf[i].h, "rocksdb.mem-table-flush-pending",
					    &v) != 0 || v != 0)
			return 0;
	}
	return 1;
}

/* Too many L0 files in @sid's family: RocksDB would stall a write (and an
 * ingest would wait inside RocksDB); the commit waits for compaction
 * instead, with the buffer sealed (the worker back-pressures). */
static int l0_backlog(struct sfs_target_writer *w, uint32_t sid)
{
	/* A string property (rocksdb_property_int_cf refuses it). */
	char *p = rocksdb_property_value_cf(w->db, w->cf[sid].h, "rocksdb.num-files-at-level0");
	uint64_t n = p ? strtoull(p, NULL, 10) : 0, rate = 0;

	if (p)
		rocksdb_free(p);
	if (n >= ((w->k.on & SFS_RDBT_K_UNIVERSAL) ? L0_BACKLOG_U : L0_BACKLOG))
		return 1;
	/* Writes already delayed (another family's backlog): a flush
	 * request would wait too. */
	return rocksdb_property_int(w->db, "rocksdb.actual-delayed-write-rate", &rate) == 0 &&
	       rate > 0;
}

/* Account a commit step deferred by an L0 backlog (@waiting) or going on
 * (0): rp_stalls counts the deferrals, wait_ns their time (in the close
 * line).  Returns @waiting. */
static int backlog_wait(struct sfs_target_writer *w, int waiting)
{
	uint64_t now = sfs_now_ns();

	if (waiting && !w->wait_t0) {
		w->wait_t0 = now;
		sfs_store_relaxed(&w->pub->rp_stalls, w->pub->rp_stalls + 1);
	} else if (!waiting && w->wait_t0) {
		w->wait_ns += now - w->wait_t0;
		w->wait_t0 = 0;
	}
	return waiting;
}

/*
 * The options an SST of state @sid is written with: its family's, but one
 * compression, L0's.  SstFileWriter compresses with the last entry of
 * compression_per_level (ZSTD, meant for the bottom level), and an ingested
 * file usually lands in L0, where every reader probe decompresses it:
 * measured, ZSTD SSTs made the join and dedup queries slower than batches.
 */
static rocksdb_options_t *sst_options(struct sfs_target_writer *w, uint32_t sid)
{
	int l0 = (w->k.on & SFS_RDBT_K_LZ4) ? rocksdb_lz4_compression : rocksdb_zstd_compression;

	if (!w->cf[sid].so) {
		w->cf[sid].so = cf_options(&w->seg->hdr->sh_states[sid], NULL, &w->k, 1);
		rocksdb_options_set_compression_per_level(w->cf[sid].so, &l0, 1);
		rocksdb_options_set_compression(w->cf[sid].so, l0);
		rocksdb_options_set_bottommost_compression(w->cf[sid].so, l0);
	}
	return w->cf[sid].so;
}

static void sst_path(const struct sfs_target_writer *w, uint32_t sid, uint64_t seq, char *buf,
		     size_t n)
{
	snprintf(buf, n, "%s/%llu.%u.sst", w->ipath, (unsigned long long)seq, sid);
}

static int sst_fail(struct sfs_target_writer *w, struct wstage *s, const char *file, char **err,
		    const char *op)
{
	int rc = rdbt_err(file, err, op);

	if (s->sw)
		rocksdb_sstfilewriter_destroy(s->sw);
	s->sw = NULL;
	s->sst_pos = 0;
	(void)unlink(file);
	return rc ? rc : -EIO;
}

/*
 * One bounded step of writing state @sid's staged records as one SST, its
 * marker (= @seq) as the SST's last key, and ingesting it: RocksDB adds a
 * file to the MANIFEST atomically, so the state's entries and its marker
 * become durable and visible together, or not at all (a redo skips the
 * state when its marker shows @seq).  0 when ingested, -EAGAIN when more
 * steps are due, < 0 error (the SST is dropped and rewritten next time).
 * Cost per step: at most SST_STEP records; the ingest is a link, an
 * fsync'ed MANIFEST edit and no memtable flush (the memtables are empty).
 */
static int ingest_step(struct sfs_target_writer *w, uint32_t sid, uint64_t seq)
{
	struct wstage *s = &w->st[sid];
	char file[PATH_MAX + 64], *err = NULL;
	const char *files[1] = { file };
	size_t end;

	sst_path(w, sid, seq, file, sizeof(file));
	if (!s->sw) {
		if (backlog_wait(w, l0_backlog(w, sid)))
			return -EAGAIN;
		stage_sort(s);
		if (s->dup)
			return 0;	/* two records of one key: the batch takes it */
		s->sst_t0 = sfs_now_ns();
		(void)unlink(file);
		s->sw = rocksdb_sstfilewriter_create(w->eo, sst_options(w, sid));
		rocksdb_sstfilewriter_open(s->sw, file, &err);
		if (err)
			return sst_fail(w, s, file, &err, "open an SST");
		for (size_t off = 0; off < s->len;) {
			unsigned op;
			const unsigned char *k, *v;
			uint32_t kl, vl;

			srec_at(s, off, &op, &k, &kl, &v, &vl);
			off += SREC_HDR + (size_t)kl + vl;
			if (op != SOP_RANGE)
				continue;
			/* Same global seqno as the file's entries: a range
			 * tombstone covers only older ones, so the entries
			 * written after a clear survive it. */
			rocksdb_sstfilewriter_delete_range(s->sw, (const char *)k, kl,
							   (const char *)v, vl, &err);
			if (err)
				return sst_fail(w, s, file, &err, "write a range deletion to an SST");
		}
		s->sst_pos = 0;
	}
	end = s->sst_pos + SST_STEP < s->n ? s->sst_pos + SST_STEP : s->n;
	for (; s->sst_pos < end; s->sst_pos++) {
		unsigned op;
		const unsigned char *k, *v;
		uint32_t kl, vl;

		srec_at(s, s->idx[s->sst_pos], &op, &k, &kl, &v, &vl);
		if (op == SOP_PUT)
			rocksdb_sstfilewriter_put(s->sw, (const char *)k, kl, (const char *)v, vl,
						  &err);
		else if (op == SOP_DEL)
			rocksdb_sstfilewriter_delete(s->sw, (const char *)k, kl, &err);
		else
			rocksdb_sstfilewriter_merge(s->sw, (const char *)k, kl, (const char *)v, vl,
						    &err);
		if (err)
			return sst_fail(w, s, file, &err, "write an SST");
	}
	if (s->sst_pos < s->n)
		return -EAGAIN;
	rocksdb_sstfilewriter_put(s->sw, MARKER_KEY, MARKER_LEN, (const char *)&seq, 8, &err);
	if (err)
		return sst_fail(w, s, file, &err, "write the applied marker to an SST");
	rocksdb_sstfilewriter_finish(s->sw, &err);	/* fsync'ed */
	if (err)
		return sst_fail(w, s, file, &err, "finish an SST");
	rocksdb_sstfilewriter_destroy(s->sw);
	s->sw = NULL;
	sfs_fault("rocksdb.sst");
	rocksdb_ingest_external_file_cf(w->db, w->cf[sid].h, files, 1, w->io, &err);
	if (err) {
		w->reopen = 1;
		return sst_fail(w, s, file, &err, "ingest an SST");
	}
	w->cf[sid].applied = seq;
	s->done = 1;
	sfs_store_relaxed(&w->pub->rp_ingests, w->pub->rp_ingests + 1);
	sfs_store_relaxed(&w->pub->rp_ingest_entries, w->pub->rp_ingest_entries + s->n);
	sfs_store_relaxed(&w->pub->rp_ingest_ns,
			  w->pub->rp_ingest_ns + (sfs_now_ns() - s->sst_t0));
	sfs_fault("rocksdb.ingest");
	return 0;
}

/*
 * The states not ingested: one WriteBatch of their records and markers,
 * written with the WAL off, then their memtables flushed (atomic_flush:
 * one MANIFEST edit for all).  0 when the flush is installed, -EAGAIN
 * while it runs (called again: the flush loop never blocks on it), < 0
 * error.
 */
static int batch_step(struct sfs_target_writer *w, uint64_t seq)
{
	char *err = NULL;
	int rc;
	uint64_t t0;

	if (!w->batched) {
		rocksdb_writebatch_clear(w->wb);
		w->batch_any = 0;
		for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
			struct wstage *s = &w->st[i];
			rocksdb_column_family_handle_t *h = w->cf[i].h;

			s->inbatch = 0;
			if (!s->touched || s->done || w->cf[i].applied >= seq)
				continue;
			for (size_t off = 0; off < s->len;) {
				unsigned op;
				const unsigned char *k, *v;
				uint32_t kl, vl;

				srec_at(s, off, &op, &k, &kl, &v, &vl);
				off += SREC_HDR + (size_t)kl + vl;
				if (op == SOP_PUT)
					rocksdb_writebatch_put_cf(w->wb, h, (const char *)k, kl,
								  (const char *)v, vl);
				else if (op == SOP_DEL)
					rocksdb_writebatch_delete_cf(w->wb, h, (const char *)k, kl);
				else if (op == SOP_MERGE)
					rocksdb_writebatch_merge_cf(w->wb, h, (const char *)k, kl,
								    (const char *)v, vl);
				else
					rocksdb_writebatch_delete_range_cf(w->wb, h, (const char *)k,
									   kl, (const char *)v, vl);
			}
			rocksdb_writebatch_put_cf(w->wb, h, MARKER_KEY, MARKER_LEN,
						  (const char *)&seq, 8);
			s->inbatch = 1;
			w->batch_any = 1;
		}
		w->batched = 1;
	}
	if (!w->batch_any)
		return 0;
	if (!w->written) {
		int wait = 0;

		/* Neither the write nor its flush may wait inside RocksDB:
		 * wait here, the buffer sealed. */
		for (unsigned i = 0; i < SFS_MAX_STATES && !wait; i++)
			wait = w->st[i].inbatch && l0_backlog(w, i);
		if (backlog_wait(w, wait))
			return -EAGAIN;
		t0 = sfs_now_ns();
		rocksdb_write(w->db, w->wo, w->wb, &err);
		if (err && strncmp(err, "Incomplete", 10) == 0) {
			/* A write stall (no_slowdown): try again at the next step. */
			rocksdb_free(err);
			(void)backlog_wait(w, 1);
			return -EAGAIN;
		}
		(void)backlog_wait(w, 0);
		if (err) {
			w->reopen = 1;
			return rdbt_err(w->path, &err, "write a buffer's batch");
		}
		w->written = 1;
		sfs_store_relaxed(&w->pub->rp_write_ns, w->pub->rp_write_ns + (sfs_now_ns() - t0));
		sfs_fault("rocksdb.write");
	}
	if (!w->flushing) {
		/* Switch every batched family's memtable and schedule the
		 * flush; commit is called again until it is installed, so the
		 * compactor's loop never blocks on a flush (nor misses its
		 * heartbeat). */
		for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
			if (!w->st[i].inbatch)
				continue;
			rocksdb_flush_cf(w->db, w->fo, w->cf[i].h, &err);
			if (err) {
				w->reopen = 1;
				return rdbt_err(w->path, &err, "flush (make a buffer durable)");
			}
		}
		w->flushing = 1;
		w->flush_t0 = sfs_now_ns();
	}
	rc = flushed(w);
	if (rc < 0) {
		w->reopen = 1;	/* the memtables' writes are lost with the instance */
		return rc;
	}
	if (rc == 0)
		return -EAGAIN;
	w->flushing = 0;
	sfs_fault("rocksdb.flush");
	sfs_store_relaxed(&w->pub->rp_flush_ns,
			  w->pub->rp_flush_ns + (sfs_now_ns() - w->flush_t0));
	return 0;
}

/* One bounded step of committing buffer @seq (rdbt_commit's contract). */
static int commit_step(struct sfs_target_writer *w, uint64_t seq)
{
	int rc, any = 0;

	if (w->seq == seq)
		for (unsigned i = 0; i < SFS_MAX_STATES && !any; i++)
			any = w->st[i].touched;
	if (!any) {
		/* Nothing of this buffer to write (empty, or all applied). */
		stages_reset(w);
		if (seq > w->pub->rp_applied)
			sfs_store_release(&w->pub->rp_applied, seq);
		return 0;
	}
	if ((w->reopen || !w->db) && (rc = w_reopen(w)))
		return rc;
	/* Large states: an SST each, one step at a time. */
	for (unsigned i = 0; w->k.ingest_min && i < SFS_MAX_STATES; i++) {
		struct wstage *s = &w->st[i];

		if (!s->touched || s->done || s->dup || s->n + s->nrange < w->k.ingest_min)
			continue;
		if (w->cf[i].applied >= seq) {
			s->done = 1;	/* ingested before a reopen */
			continue;
		}
		rc = ingest_step(w, i, seq);
		if (rc)
			return rc;
		return -EAGAIN;	/* bounded: the next state at the next step */
	}
	/* The others: one batch, flushed. */
	if ((rc = batch_step(w, seq)))
		return rc;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->st[i].touched)
			w->cf[i].applied = seq;
	stages_reset(w);
	sfs_store_relaxed(&w->pub->rp_commits, w->pub->rp_commits + 1);
	sfs_store_release(&w->pub->rp_applied, seq);
	sfs_store_release(&w->pub->rp_published, w->pub->rp_published + 1);
	if (!w->purge_token)
		w->purge_token = sfs_qsbr_start(w->seg->hdr);
	(void)rdbt_busy(w);
	return 0;
}

/*
 * commit: the staged buffer @seq becomes durable and published, in bounded
 * steps (-EAGAIN: call again).  A failure (disk full, a write error) is
 * logged with the instance, the file and RocksDB's status when it starts
 * and every LOG_EVERY_NS while it lasts, and retried with a back-off (10 ms
 * doubling to 1 s) from the staged copy: the buffer stays sealed meanwhile,
 * so its worker back-pressures, and nothing committed before is touched.
 */
static int rdbt_commit(struct sfs_target_writer *w, uint64_t seq)
{
	uint64_t now = sfs_now_ns();
	int rc;

	if (w->fails && now < w->retry_ns)
		return w->last_rc;
	rc = commit_step(w, seq);
	if (rc == 0 || rc == -EAGAIN) {
		if (w->fails && rc == 0)
			sfs_log("rocksdb target %s: buffer seq %llu committed after %u failed "
				"attempts", w->path, (unsigned long long)seq, w->fails);
		if (rc == 0)
			w->fails = 0;
		return rc;
	}
	w->fails++;
	w->last_rc = rc;
	w->retry_ns = now + (w->fails < 8 ? 10000000ull << (w->fails - 1) : 1000000000ull);
	sfs_store_relaxed(&w->pub->rp_errors, w->pub->rp_errors + 1);
	if (w->fails == 1 || now - w->logged_ns >= LOG_EVERY_NS) {
		sfs_log("rocksdb target %s: commit of buffer seq %llu failed (attempt %u), the "
			"buffer stays sealed and is retried: %s", w->path,
			(unsigned long long)seq, w->fails, sfs_last_error());
		w->logged_ns = now;
	}
	return rc;
}

static int rdbt_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path),
		      void *arg)
{
	const rocksdb_livefiles_t *lf;
	char p[PATH_MAX * 2];
	int rc = 0;

	if (!w->db)
		return sfs__err(-EIO, "rocksdb target %s: closed after a failed commit (reopened "
				"at the next retry)", w->path);
	lf = rocksdb_livefiles(w->db);
	if (!lf)
		return 0;
	for (int i = 0; rc == 0 && i < rocksdb_livefiles_count(lf); i++) {
		snprintf(p, sizeof(p), "%s%s", w->path, rocksdb_livefiles_name(lf, i));
		rc = fn(arg, p);
	}
	rocksdb_livefiles_destroy(lf);
	return rc;
}

/* ---- reader ------------------------------------------------------------------- */

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	struct sfs_rdbt_pub *pub;
	struct sfs_rdbt_knobs k;
	char path[PATH_MAX];
	char spath[PATH_MAX];
	rocksdb_options_t *dbo;
	rocksdb_options_t *defo;
	rocksdb_cache_t *cache;
	rocksdb_readoptions_t *ro;
	rocksdb_t *db;
	rocksdb_column_family_handle_t *def;
	rocksdb_column_family_handle_t *cf[SFS_MAX_STATES];
	rocksdb_options_t *cfo[SFS_MAX_STATES];
	uint64_t applied[SFS_MAX_STATES];
	uint64_t seen;          /* rp_published at the last catch-up */
	uint64_t cf_gen;        /* rp_cf_gen at the last (re)open */
	uint64_t inc;           /* rp_incarnation the secondary was opened under (even) */
	struct sfs_bump arena;     /* values handed out until the next catch-up */
	unsigned char kbuf[KBUF];
	unsigned char kend[KBUF];
	/* multiget scratch */
	unsigned char *mkeys;
	size_t mkcap;
	const char *mkp[MG_MAX];
	size_t mkl[MG_MAX];
	rocksdb_pinnableslice_t *mv[MG_MAX];
	char *merr[MG_MAX];
};

static void r_close_db(struct sfs_target_reader *r)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (r->cf[i])
			rocksdb_column_family_handle_destroy(r->cf[i]);
		if (r->cfo[i])
			rocksdb_options_destroy(r->cfo[i]);
		r->cf[i] = NULL;
		r->cfo[i] = NULL;
		r->applied[i] = 0;
	}
	if (r->def)
		rocksdb_column_family_handle_destroy(r->def);
	r->def = NULL;
	if (r->db)
		rocksdb_close(r->db);
	r->db = NULL;
}

static int rdbt_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	static unsigned nth;	/* secondaries opened by this process, atomic */
	struct sfs_target_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	r->k = knobs_get();
	if ((rc = inst_path(s, worker, r->path, sizeof(r->path)))) {
		free(r);
		return rc;
	}
	if ((size_t)snprintf(r->spath, sizeof(r->spath), "%s.sec/%d.%u", r->path, (int)getpid(),
			     __atomic_fetch_add(&nth, 1, __ATOMIC_RELAXED)) >= sizeof(r->spath)) {
		free(r);
		return sfs__err(SFS_EUSAGE, "rocksdb target %s: secondary path too long", r->path);
	}
	r->dbo = rocksdb_options_create();
	rocksdb_options_set_max_open_files(r->dbo, -1);	/* secondaries require it */
	rocksdb_options_set_keep_log_file_num(r->dbo, 2);
	r->defo = rocksdb_options_create();
	r->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
	r->ro = rocksdb_readoptions_create();
	*out = r;
	return 0;
}

/* (Re)open the secondary with every column family the primary has now. */
static int r_open_db(struct sfs_target_reader *r)
{
	char *err = NULL, **names;
	size_t ncf = 0;
	int rc = 0;
	const char **cn;
	const rocksdb_options_t **co;
	rocksdb_column_family_handle_t **ch;

	r_close_db(r);
	if ((rc = sfs_mkdirs(r->spath, 0700)))
		return rc;
	names = rocksdb_list_column_families(r->dbo, r->path, &ncf, &err);
	if (err) {
		if (names)
			rocksdb_list_column_families_destroy(names, 0);
		return rdbt_err(r->path, &err, "list column families");
	}
	cn = calloc(ncf, sizeof(*cn));
	co = calloc(ncf, sizeof(*co));
	ch = calloc(ncf, sizeof(*ch));
	if (!cn || !co || !ch) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ncf; i++) {
		int sid = cf_state(r->seg, names[i]);

		cn[i] = names[i];
		if (sid >= 0 && !r->cfo[sid]) {
			r->cfo[sid] = cf_options(desc_of(r->seg, sid), r->cache, &r->k, 0);
			co[i] = r->cfo[sid];
		} else {
			co[i] = r->defo;
		}
	}
	r->db = rocksdb_open_as_secondary_column_families(r->dbo, r->path, r->spath, (int)ncf, cn,
							   co, ch, &err);
	if (err || !r->db) {
		rc = rdbt_err(r->path, &err, "open as secondary");
		rc = rc ? rc : -EIO;
		goto out;
	}
	for (size_t i = 0; i < ncf; i++) {
		int sid = cf_state(r->seg, names[i]);

		if (sid >= 0 && co[i] == r->cfo[sid] && !r->cf[sid])
			r->cf[sid] = ch[i];
		else if (!strcmp(names[i], "default") && !r->def)
			r->def = ch[i];
		else
			rocksdb_column_family_handle_destroy(ch[i]);
	}
out:
	free(cn);
	free(co);
	free(ch);
	rocksdb_list_column_families_destroy(names, ncf);
	return rc;
}

/* rp_incarnation once it is even (no rollback replacing the instance),
 * waiting up to ROLLBACK_WAIT_NS; odd if it stays odd that long (a
 * compactor killed mid-rollback: its successor's open makes it even). */
#define ROLLBACK_WAIT_NS (30ull * 1000000000ull)
static uint64_t r_incarnation(const struct sfs_target_reader *r)
{
	uint64_t inc = sfs_load_acquire(&r->pub->rp_incarnation), until = 0;

	while ((inc & 1) && (!until || sfs_now_ns() < until)) {
		if (!until)
			until = sfs_now_ns() + ROLLBACK_WAIT_NS;
		usleep(1000);
		inc = sfs_load_acquire(&r->pub->rp_incarnation);
	}
	return inc;
}

/*
 * Follow the primary when it published a version since the last time.  A
 * rollback (rp_incarnation moved: "Rollback" above) is followed by a
 * reopen, never a catch-up, and an open or catch-up that overlapped one
 * (odd, or moved by the end) is thrown away and redone: a secondary may
 * hold the old instance's version or the new one's, never a mix.
 */
static int r_refresh(struct sfs_target_reader *r)
{
	uint64_t v, g, inc;
	char *err = NULL;
	int rc;

	if (!r->pub) {
		if ((rc = pub_find(r->seg, r->worker, 0, &r->pub)))
			return rc;
		if (!r->pub)
			return 0;	/* nothing flushed yet: an empty store */
	}
	v = sfs_load_acquire(&r->pub->rp_published);
	g = sfs_load_acquire(&r->pub->rp_cf_gen);
	inc = sfs_load_acquire(&r->pub->rp_incarnation);
	if (r->db && v == r->seen && g == r->cf_gen && inc == r->inc)
		return 0;
	if ((inc & 1) && r->db)
		return 0;	/* the version held stays readable until the rollback ends */
	for (unsigned tries = 0;; tries++) {
		if ((inc = r_incarnation(r)) & 1) {
			r_close_db(r);
			return sfs__err(SFS_ETIMEDOUT, "rocksdb target %s: a rollback of the "
					"instance has not ended in %llu s", r->path,
					ROLLBACK_WAIT_NS / 1000000000ull);
		}
		v = sfs_load_acquire(&r->pub->rp_published);
		g = sfs_load_acquire(&r->pub->rp_cf_gen);
		rc = 0;
		if (!r->db || g != r->cf_gen || inc != r->inc) {
			if ((rc = r_open_db(r)))
				goto check;
			r->cf_gen = g;
		} else {
			rocksdb_try_catch_up_with_primary(r->db, &err);
			if (err) {
				/* Retry once from scratch: a reopen reads CURRENT anew. */
				rocksdb_free(err);
				err = NULL;
				rc = r_open_db(r);
			}
		}
check:
		/* The files read above, then the incarnation: a rollback that
		 * began meanwhile shows here. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (sfs_load_acquire(&r->pub->rp_incarnation) == inc) {
			if (rc)
				return rc;
			break;
		}
		r_close_db(r);
		if (tries >= 8)
			return sfs__err(SFS_ETIMEDOUT, "rocksdb target %s: the instance was rolled "
					"back during each of %u reopens", r->path, tries + 1);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (r->cf[i])
			r->applied[i] = read_marker(r->db, r->ro, r->cf[i]);
	r->seen = v;
	r->inc = inc;
	return 0;
}

static int rdbt_catch_up(struct sfs_target_reader *r)
{
	sfs_bump_reset(&r->arena);
	return r_refresh(r);
}

static int fill(struct sfs_target_reader *r, struct sfs_probe_result *res, const char *v,
		size_t len, uint32_t sid)
{
	res->found = 1;
	res->value = len ? sfs_bump_copy(&r->arena, v, len) : "";
	res->len = (uint32_t)len;
	res->tag = r->applied[sid];
	if (!res->value)
		return sfs__err(-ENOMEM, "rocksdb target %s: no memory for a %zu-byte value", r->path,
				len);
	return 0;
}

static int r_state(const struct sfs_probe *p)
{
	return p->klen >= SFS_KEY_PREFIX ? (int)sfs_key_prefix_state(p->key) : -1;
}

/* MultiGet of @keys[0, @n), all of state @sid, in one call. */
static int probe_run(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     uint32_t sid, struct sfs_probe_result *res)
{
	size_t need = 0, at = 0;
	int rc = 0;

	for (unsigned i = 0; i < n; i++)
		need += keys[i].klen + NS_LEN;
	if (need > r->mkcap) {
		unsigned char *nk = realloc(r->mkeys, need);

		if (!nk)
			return -ENOMEM;
		r->mkeys = nk;
		r->mkcap = need;
	}
	for (unsigned i = 0; i < n; i++) {
		r->mkp[i] = (const char *)r->mkeys + at;
		r->mkl[i] = enc_key(r->mkeys + at, keys[i].ns, keys[i].key, keys[i].klen);
		at += r->mkl[i];
		r->merr[i] = NULL;
		r->mv[i] = NULL;
	}
	rocksdb_batched_multi_get_cf(r->db, r->ro, r->cf[sid], n, r->mkp, r->mkl, r->mv, r->merr,
				     0);
	for (unsigned i = 0; i < n; i++) {
		res[i] = (struct sfs_probe_result){ 0 };
		if (r->merr[i]) {
			int e = rdbt_err(r->path, &r->merr[i], "multiget");

			rc = rc ? rc : e;
		} else if (r->mv[i]) {
			size_t len = 0;
			const char *v = rocksdb_pinnableslice_value(r->mv[i], &len);
			int e = fill(r, &res[i], v, len, sid);

			rc = rc ? rc : e;
		}
		if (r->mv[i])
			rocksdb_pinnableslice_destroy(r->mv[i]);
	}
	return rc;
}

static int rdbt_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		      struct sfs_probe_result *res)
{
	int rc = r_refresh(r);

	if (rc)
		return rc;
	for (unsigned i = 0; i < n;) {
		int sid = r_state(&keys[i]);
		unsigned run = 1;

		while (i + run < n && run < MG_MAX && r_state(&keys[i + run]) == sid)
			run++;
		if (!r->db || sid < 0 || !r->cf[sid]) {
			for (unsigned k = 0; k < run; k++)
				res[i + k] = (struct sfs_probe_result){ 0 };
		} else if ((rc = probe_run(r, &keys[i], run, (uint32_t)sid, &res[i]))) {
			return rc;
		}
		i += run;
	}
	return 0;
}

static int rdbt_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
			const void *ukey, uint32_t ulen, struct sfs_probe_result *res)
{
	int rc = r_refresh(r), sid = r_state(parent);
	rocksdb_pinnableslice_t *ps;
	char *err = NULL;
	uint32_t kl;

	*res = (struct sfs_probe_result){ 0 };
	if (rc)
		return rc;
	if (!r->db || sid < 0 || !r->cf[sid])
		return 0;
	if (parent->klen + ulen + NS_LEN > sizeof(r->kbuf))
		return sfs__err(SFS_EUSAGE, "rocksdb target: map key of %u bytes", parent->klen + ulen);
	kl = enc_key(r->kbuf, parent->ns, parent->key, parent->klen);
	memcpy(r->kbuf + kl, ukey, ulen);
	ps = rocksdb_get_pinned_cf(r->db, r->ro, r->cf[sid], (const char *)r->kbuf, kl + ulen, &err);
	if (err)
		return rdbt_err(r->path, &err, "map get");
	if (ps) {
		size_t len = 0;
		const char *v = rocksdb_pinnableslice_value(ps, &len);

		rc = fill(r, res, v, len, (uint32_t)sid);
		rocksdb_pinnableslice_destroy(ps);
		if (rc)
			return rc;
	}
	return res->found;
}

/* A bounded scan of the map's range.  Every entry is copied into the arena
 * and the iterator closed before @fn runs, so @fn may make any state call
 * (another scan, a probe that catches up or reopens the secondary). */
static int rdbt_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
			 int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				   uint32_t vlen),
			 void *arg)
{
	int rc = r_refresh(r), sid = r_state(parent);
	struct ent {
		const void *k, *v;
		uint32_t kl, vl;
	} *e = NULL;
	size_t ne = 0, cap = 0;
	unsigned char *lo, *hi;
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	uint32_t pl;
	char *err = NULL;

	if (rc)
		return rc;
	if (!r->db || sid < 0 || !r->cf[sid])
		return 0;
	lo = malloc(2 * ((size_t)parent->klen + NS_LEN));
	if (!lo)
		return -ENOMEM;
	hi = lo + parent->klen + NS_LEN;
	pl = enc_key(lo, parent->ns, parent->key, parent->klen);
	memcpy(hi, lo, pl);
	prefix_end(hi, pl);
	ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_iterate_lower_bound(ro, (const char *)lo, pl);
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)hi, pl);
	if (pl >= MAP_PREFIX_LEN && (r->k.on & SFS_RDBT_K_PREFIX))
		rocksdb_readoptions_set_prefix_same_as_start(ro, 1);	/* the prefix bloom */
	else
		rocksdb_readoptions_set_total_order_seek(ro, 1);
	it = rocksdb_create_iterator_cf(r->db, ro, r->cf[sid]);
	for (rocksdb_iter_seek(it, (const char *)lo, pl); rc == 0 && rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t kl = 0, vl = 0;
		const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);

		if (kl < pl)
			continue;
		if (ne == cap) {
			struct ent *ne2 = realloc(e, (cap = cap ? cap * 2 : 64) * sizeof(*e));

			if (!ne2) {
				rc = -ENOMEM;
				break;
			}
			e = ne2;
		}
		e[ne].k = kl > pl ? sfs_bump_copy(&r->arena, k + pl, kl - pl) : "";
		e[ne].v = vl ? sfs_bump_copy(&r->arena, v, vl) : "";
		e[ne].kl = (uint32_t)(kl - pl);
		e[ne].vl = (uint32_t)vl;
		if (!e[ne].k || !e[ne].v)
			rc = -ENOMEM;
		ne++;
	}
	if (rc == 0) {
		rocksdb_iter_get_error(it, &err);
		rc = rdbt_err(r->path, &err, "map iterate");
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	free(lo);
	for (size_t i = 0; rc == 0 && i < ne; i++)
		rc = fn(arg, e[i].k, e[i].kl, e[i].v, e[i].vl);
	free(e);
	return rc;
}

static void rdbt_reader_close(struct sfs_target_reader *r)
{
	if (!r)
		return;
	r_close_db(r);
	sfs_bump_free(&r->arena);
	free(r->mkeys);
	if (r->ro)
		rocksdb_readoptions_destroy(r->ro);
	if (r->dbo)
		rocksdb_options_destroy(r->dbo);
	if (r->defo)
		rocksdb_options_destroy(r->defo);
	if (r->cache)
		rocksdb_cache_destroy(r->cache);
	rm_tree(r->spath);
	free(r);
}

/*
 * Rescale at restore: build worker @worker's instance (this segment's,
 * fresh) from the restored instances @src[0..n) of the old workers whose
 * key-group ranges overlap [@kg_lo, @kg_hi]: every column family's rows in
 * that range (keys lead with the key group, big-endian; the applied
 * markers sort after every key group and stay behind), read with their
 * merge operators (a counter's merges read folded) and written as plain
 * values, then flushed.  Once, by the supervisor, before any child starts;
 * the state registry must already be the checkpoint's.
 */
int sfs_rdbt_rebuild(struct sfs_seg *s, uint32_t worker, const char *const *src, unsigned n,
		     uint32_t kg_lo, uint32_t kg_hi)
{
	struct sfs_target_cfg tc = { 0 };
	struct sfs_target_writer *w;
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	char *err = NULL;
	int rc = rdbt_open(s, worker, NULL, &tc, &w);

	rocksdb_writeoptions_disable_WAL(wo, 1);
	if (rc)
		goto out_opts;
	for (unsigned i = 0; i < n && !rc; i++) {
		rocksdb_options_t *opts[SFS_MAX_STATES + 1];
		rocksdb_column_family_handle_t *h[SFS_MAX_STATES + 1];
		int sids[SFS_MAX_STATES + 1];
		size_t ncf = 0;
		char **names = rocksdb_list_column_families(w->dbo, src[i], &ncf, &err);
		rocksdb_t *in;

		if ((rc = rdbt_err(src[i], &err, "list column families")))
			break;
		if (ncf > SFS_MAX_STATES + 1) {
			rocksdb_list_column_families_destroy(names, ncf);
			rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: %zu column families", src[i], ncf);
			break;
		}
		for (size_t c = 0; c < ncf; c++) {
			sids[c] = strcmp(names[c], "default") ? cf_state(s, names[c]) : -1;
			opts[c] = sids[c] >= 0 ? cf_options(desc_of(s, sids[c]), w->cache, &w->k, 1)
					       : rocksdb_options_create_copy(w->defo);
		}
		in = rocksdb_open_for_read_only_column_families(w->dbo, src[i], (int)ncf,
								 (const char *const *)names,
								 (const rocksdb_options_t *const *)opts, h,
								 0, &err);
		rc = rdbt_err(src[i], &err, "open read-only");
		for (size_t c = 0; c < ncf && in && !rc; c++) {
			struct wcf *dst;

			if (sids[c] < 0)
				continue;	/* default, or a state this job does not have */
			if (!(dst = w_cf(w, (uint32_t)sids[c]))) {
				rc = -EIO;
				break;
			}
			rc = sfs_rdb_copy_kg_range(in, h[c], w->db, dst->h, wo, kg_lo, kg_hi,
						   "rocksdb target", w->path);
		}
		for (size_t c = 0; c < ncf; c++) {
			if (in)
				rocksdb_column_family_handle_destroy(h[c]);
			rocksdb_options_destroy(opts[c]);
		}
		if (in)
			rocksdb_close(in);
		rocksdb_list_column_families_destroy(names, ncf);
	}
	if (!rc) {
		/* WAL off: the flush is what makes the rebuilt rows durable */
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		for (unsigned i = 0; i < SFS_MAX_STATES && !rc; i++)
			if (w->cf[i].h) {
				rocksdb_flush_cf(w->db, fo, w->cf[i].h, &err);
				rc = rdbt_err(w->path, &err, "flush");
			}
		rocksdb_flushoptions_destroy(fo);
	}
	rdbt_close(w);
out_opts:
	rocksdb_writeoptions_destroy(wo);
	return rc;
}

/* ---- rollback in place (store/target.h) ----------------------------------------- */

/*
 * Rollback.  The way back to a checkpoint's version without copying the
 * instance: every version staged for a checkpoint is kept, until the next
 * pin releases it, as a flat RocksDB checkpoint of its own under
 * <path>.pin (hard links of its SSTs, MANIFEST, CURRENT and OPTIONS:
 * links, no byte copied), so the files it needs outlive the primary's
 * compactions and deletion windows; a rollback closes the primary, makes
 * a link copy of the pinned checkpoint (r<n>: the pin itself stays, a
 * second rollback needs it) and swaps it with the instance directory in
 * one renameat2(RENAME_EXCHANGE), then opens it again; the old instance,
 * now in the copy's place, is removed by a thread.  A kill -9 before
 * the swap leaves the old instance at <path> (closed, intact: WAL off,
 * the memtables held nothing durable), after it the pinned one; the next
 * open removes <path>.pin either way.  Never a mix: one rename decides.
 *
 * Why not a RocksDB snapshot held at the pinned version, undone by writing
 * back each key written since: that needs the keys written since (the
 * sealed buffers are freed after their flush), it is O(keys changed) and
 * not O(1), and the TTL compaction filter drops versions a snapshot's
 * reader would need (a filter ignores snapshots).
 *
 * Cost (ext4, bench: tests/test_target_rocksdb.c, rollback_bench):
 *  - per checkpoint, in snapshot(), on the compactor's thread: one mkdir,
 *    one link per live SST + 3 (MANIFEST, CURRENT, OPTIONS), one fsync of
 *    the directory; at pin, the previous pin's links unlinked (as many)
 *    and its directory removed.  No file is created and no byte copied;
 *    the disk held is the SSTs the pinned version has and the live one no
 *    longer has: one interval's compaction churn.
 *  - per rollback: the primary closed (a running compaction is aborted),
 *    one mkdir + the same links for the copy, one rename, two directory
 *    fsyncs, and a DB open, which with max_open_files = -1 opens every
 *    table file (their index and filter blocks: metadata, not data; the
 *    open writes a new MANIFEST, CURRENT, OPTIONS, IDENTITY, LOG: about 5
 *    creates).  Then the old instance's files are unlinked by a thread
 *    (trash): off the recovery's path, it grows with what was written
 *    since the pin.  Measured on this machine, loaded: 17-77 ms at 0.1 GB,
 *    57-104 ms at 1 GB, 43-139 ms at 3 GB (22-40 SSTs), most of it the
 *    open (bench/RESULTS.md, issue 23).
 *
 * Readers (other processes, secondaries): rp_incarnation is made odd
 * before the primary closes and even again after the open; a file number
 * of the rolled-back instance may name another file of the old one, so a
 * secondary must never follow the swap by a catch-up.  r_refresh reopens
 * when rp_incarnation differs from the one its secondary was opened under,
 * and checks it again after each open or catch-up: odd or moved, the
 * result is thrown away (seqlock).  Data already read is from files the
 * secondary holds open: stale, never mixed.
 *
 * State TTL: the filters' clocks at staging are kept with each staged
 * version and put back by a rollback (a filter's clock otherwise only
 * moves forward), so no compaction after it drops what the replayed
 * buffers will still read as live.
 *
 * Fenced: a commit under way (its staged records, a memtable being
 * flushed, an SST in <path>.ingest) is dropped with the primary; RocksDB's
 * background flush and compactions end with the close; this target stages
 * synchronously (snapshot, no snapshot_begin), so no background snapshot
 * exists to stop.
 */

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	if (fd >= 0) {
		(void)fsync(fd);	/* kill -9 safety needs none; a power loss ordering */
		close(fd);
	}
}

/* Hard-link every file of @from, and of its SFS_STAGE_SHARED subdirectory
 * (a stage's SSTs), flat into @to (exists).  One link per file. */
static int link_flat(const char *from, const char *to, int depth)
{
	char a[PATH_MAX + 256], b[PATH_MAX + 256];
	struct dirent *e;
	struct stat sb;
	DIR *d = opendir(from);
	int rc = 0;

	if (!d)
		return sfs__err(sfs__errno(), "rocksdb target %s: %s", from, strerror(errno));
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		if (lstat(a, &sb)) {
			rc = sfs__err(sfs__errno(), "rocksdb target %s: %s", a, strerror(errno));
		} else if (S_ISDIR(sb.st_mode)) {
			if (depth == 0 && !strcmp(e->d_name, SFS_STAGE_SHARED))
				rc = link_flat(a, to, 1);
		} else if (S_ISREG(sb.st_mode) && strcmp(e->d_name, "LOCK") &&
			   strncmp(e->d_name, "LOG", 3)) {
			snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
			if (link(a, b))
				rc = sfs__err(sfs__errno(), "rocksdb target: link %s to %s: %s", a, b,
					      strerror(errno));
		}
	}
	closedir(d);
	return rc;
}

static void cand_dir(const struct sfs_target_writer *w, uint64_t id, char *buf, size_t n)
{
	snprintf(buf, n, "%.*s/c%llu", PATH_MAX - 32, w->ppath, (unsigned long long)id);
}

/* Make @dir (gone first) a link copy of @from, durable. */
static int link_copy(const char *from, const char *dir)
{
	int rc;

	rm_tree(dir);
	if (mkdir(dir, 0700))
		return sfs__err(sfs__errno(), "rocksdb target %s: mkdir: %s", dir, strerror(errno));
	if ((rc = link_flat(from, dir, 0)))
		return rc;
	fsync_dir(dir);
	return 0;
}

static void cand_drop(struct sfs_target_writer *w, unsigned i)
{
	char d[PATH_MAX];

	cand_dir(w, w->cand[i].id, d, sizeof(d));
	rm_tree(d);
	w->cand[i] = w->cand[--w->ncand];
}

/*
 * The stage @stage just made (snapshot) kept as c<id> for a later pin.
 * The id is the stage directory's, SFS_CKPT_STAGE_FMT's ".../b<id>": the
 * synchronous snapshot op is not given it.  Best effort: without it a pin
 * of that id returns -ENOENT and the group restarts from files, which is
 * said once here.
 */
static void cand_add(struct sfs_target_writer *w, const char *stage)
{
	char d[PATH_MAX];
	uint64_t id;
	unsigned i;

	if (!sfs_target_stage_id(stage, &id))
		return;
	for (i = 0; i < w->ncand; i++)
		if (w->cand[i].id == id)
			break;
	if (i < w->ncand)
		cand_drop(w, i);	/* staged again (a retried snapshot) */
	if (w->ncand == CAND_MAX) {
		unsigned old = 0;

		for (i = 1; i < w->ncand; i++)
			if (w->cand[i].id < w->cand[old].id)
				old = i;
		cand_drop(w, old);
	}
	cand_dir(w, id, d, sizeof(d));
	if (link_copy(stage, d)) {
		sfs_log("rocksdb target %s: checkpoint %llu will not be pinned (a rollback to it "
			"falls back to a restore): %s", w->path, (unsigned long long)id, sfs_last_error());
		rm_tree(d);
		return;
	}
	w->cand[w->ncand].id = id;
	w->cand[w->ncand].seq = sfs_load_relaxed(&w->pub->rp_applied);
	for (i = 0; i < SFS_MAX_STATES; i++)
		w->cand[w->ncand].ttl[i] = __atomic_load_n(&w->ttl[i].now, __ATOMIC_RELAXED);
	w->ncand++;
}

static void pin_release(struct sfs_target_writer *w)
{
	char d[PATH_MAX];

	if (!w->pinned)
		return;
	cand_dir(w, w->pin_id, d, sizeof(d));
	rm_tree(d);
	w->pinned = 0;
}

/* pin(0): the version at open, checkpointed flat as c0 (RocksDB's
 * checkpoint: a link per SST, the MANIFEST copied; the memtables are
 * empty, nothing was applied). */
static int pin_open_version(struct sfs_target_writer *w)
{
	rocksdb_checkpoint_t *cp;
	char d[PATH_MAX], *err = NULL;
	int rc;

	if (w->applied_any)
		return sfs__err(SFS_EUSAGE, "rocksdb target %s: pin 0 after a buffer was applied "
				"(it pins the version at open)", w->path);
	if (!w->db)
		return sfs__err(-EIO, "rocksdb target %s: no open instance to pin", w->path);
	cand_dir(w, 0, d, sizeof(d));
	rm_tree(d);
	cp = rocksdb_checkpoint_object_create(w->db, &err);
	if ((rc = rdbt_err(w->path, &err, "checkpoint object")))
		return rc;
	rocksdb_checkpoint_create(cp, d, 0, &err);
	rocksdb_checkpoint_object_destroy(cp);
	if ((rc = rdbt_err(d, &err, "checkpoint")))
		return rc;
	if (chmod(d, 0700))
		return sfs__err(sfs__errno(), "rocksdb target %s: chmod: %s", d, strerror(errno));
	w->pinned = 1;
	w->pin_id = 0;
	w->pin_seq = sfs_load_relaxed(&w->pub->rp_applied);
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->pin_ttl[i] = __atomic_load_n(&w->ttl[i].now, __ATOMIC_RELAXED);
	return 0;
}

/*
 * pin (store/target.h): checkpoint @id is complete; the version this
 * writer staged for it (c<id>) becomes the rollback point, the previous
 * pin and every older staged version are removed.  O(1) when kept: the
 * links were made at staging; the release unlinks the old pin's links.
 */
static int rdbt_pin(struct sfs_target_writer *w, uint64_t id)
{
	unsigned i, at = CAND_MAX;

	if (id == 0) {
		pin_release(w);
		return pin_open_version(w);
	}
	if (w->pinned && w->pin_id == id)
		return 0;	/* pinned already (a retried call) */
	for (i = 0; i < w->ncand; i++)
		if (w->cand[i].id == id)
			at = i;
	pin_release(w);
	if (at == CAND_MAX) {
		for (i = w->ncand; i-- > 0;)
			if (w->cand[i].id < id)
				cand_drop(w, i);
		return -ENOENT;
	}
	w->pinned = 1;
	w->pin_id = id;
	w->pin_seq = w->cand[at].seq;
	memcpy(w->pin_ttl, w->cand[at].ttl, sizeof(w->pin_ttl));
	w->cand[at] = w->cand[--w->ncand];
	for (i = w->ncand; i-- > 0;)
		if (w->cand[i].id < id)
			cand_drop(w, i);
	return 0;
}

/* What was under way is dropped: the staged buffer, a flush or an SST
 * being written, a failing commit's back-off. */
static void abandon(struct sfs_target_writer *w)
{
	stages_reset(w);
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->st[i].inbatch = 0;
	w->reopen = 0;
	w->fails = 0;
	w->wait_t0 = 0;
	w->purge_token = 0;
	rm_tree(w->ipath);
	(void)sfs_mkdirs(w->ipath, 0700);
}

/* The old instance a rollback swapped out, removed off the compactor's
 * thread: unlinking files written moments ago waits for their writeback
 * (measured: 4.1 s for the 3 GB a busy instance had written since its
 * pin), which would make the rollback's time grow with that churn.  A
 * kill leaves it in <ppath>, which the next open empties. */
struct trash {
	struct sfs_target_writer *w;
	char path[PATH_MAX];
};

static void *trash_main(void *arg)
{
	struct trash *t = arg;
	struct sfs_target_writer *w = t->w;

	rm_tree(t->path);
	free(t);
	__atomic_fetch_sub(&w->trashing, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void trash(struct sfs_target_writer *w, const char *path)
{
	struct trash *t = malloc(sizeof(*t));
	pthread_attr_t a;
	pthread_t th;

	if (t) {
		t->w = w;
		snprintf(t->path, sizeof(t->path), "%s", path);
		__atomic_fetch_add(&w->trashing, 1, __ATOMIC_RELAXED);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &a, trash_main, t) == 0) {
			pthread_attr_destroy(&a);
			return;
		}
		pthread_attr_destroy(&a);
		__atomic_fetch_sub(&w->trashing, 1, __ATOMIC_RELAXED);
		free(t);
	}
	rm_tree(path);	/* no thread: here, then */
}

/*
 * rollback (store/target.h; the design, its cost and the readers' side:
 * "Rollback" above).  On an error the instance at <path> is whole (the old
 * one before the swap, the pinned one after it) and w->db may be NULL: the
 * next commit opens it again, and the caller falls back to a restore.
 */
static int rdbt_rollback(struct sfs_target_writer *w, uint64_t *seq)
{
	char pin[PATH_MAX], next[PATH_MAX], parent[PATH_MAX];
	uint64_t t0 = sfs_now_ns(), t_close, t_copy, t_swap, t_rm;
	int rc;

	if (!w->pinned)
		return -ENOENT;
	cand_dir(w, w->pin_id, pin, sizeof(pin));
	/* unique per rollback: the one before may still be being removed */
	snprintf(next, sizeof(next), "%.*s/r%llu", PATH_MAX - 32, w->ppath,
		 (unsigned long long)++w->rollbacks);
	snprintf(parent, sizeof(parent), "%s", w->path);
	if (strrchr(parent, '/'))
		*strrchr(parent, '/') = '\0';
	abandon(w);
	/* Readers hold off from here (odd) until the open below. */
	sfs_store_release(&w->pub->rp_incarnation, (w->pub->rp_incarnation | 1));
	w_close_db(w);
	while (w->ncand)	/* staged after the pin: dropped */
		cand_drop(w, 0);
	/* The TTL filters' clocks go back with the version (no filter runs
	 * now: the instance is closed): the replay from the checkpoint reads
	 * entries by its own, older clocks, and a filter still at the newer
	 * one would drop entries those reads must find. */
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		__atomic_store_n(&w->ttl[i].now, w->pin_ttl[i], __ATOMIC_RELAXED);
	t_close = sfs_now_ns();
	if ((rc = link_copy(pin, next)))
		goto out;
	t_copy = sfs_now_ns();
	sfs_fault("rocksdb.rollback.copy");
	if (renameat2(AT_FDCWD, next, AT_FDCWD, w->path, RENAME_EXCHANGE)) {
		rc = sfs__err(sfs__errno(), "rocksdb target %s: swap with %s: %s", w->path, next,
			      strerror(errno));
		goto out;
	}
	fsync_dir(parent);
	fsync_dir(w->ppath);
	sfs_fault("rocksdb.rollback.swap");
	t_swap = sfs_now_ns();
	trash(w, next);	/* the old instance */
	t_rm = sfs_now_ns();
	if ((rc = w_start(w))) {
		w_close_db(w);
		goto out;
	}
	sfs_store_release(&w->pub->rp_applied, w->pin_seq);
	sfs_store_relaxed(&w->pub->rp_rollbacks, w->pub->rp_rollbacks + 1);
	sfs_store_release(&w->pub->rp_published, w->pub->rp_published + 1);
	*seq = w->pin_seq;
	sfs_log("rocksdb target %s: rolled back to checkpoint %llu (seq %llu) in %.1f ms: close "
		"%.1f, link copy %.1f, swap %.1f, old instance handed to a thread %.1f, open %.1f", w->path,
		(unsigned long long)w->pin_id, (unsigned long long)w->pin_seq,
		(sfs_now_ns() - t0) / 1e6, (t_close - t0) / 1e6, (t_copy - t_close) / 1e6,
		(t_swap - t_copy) / 1e6, (t_rm - t_swap) / 1e6, (sfs_now_ns() - t_rm) / 1e6);
out:
	sfs_store_release(&w->pub->rp_incarnation, w->pub->rp_incarnation + 1);	/* even */
	return rc;
}

/*
 * A checkpoint's input: RocksDB's checkpoint of the instance at the last
 * commit (every buffer up to it is in SST files, the memtables are empty),
 * i.e. hard links of the live SSTs (in @dir/shared: immutable) plus copies
 * of MANIFEST, CURRENT and OPTIONS in @dir.  The checkpointer links only
 * the SSTs that are new
 * since the last checkpoint into its storage.  RocksDB's checkpoint
 * disables file deletions around itself and re-enables them only down to
 * our own disable: deletion windows are unaffected.
 */
static int rdbt_snapshot(struct sfs_target_writer *w, const char *dir)
{
	int rc;

	if (!w->db)
		return sfs__err(-EIO, "rocksdb target %s: no open instance to snapshot", w->path);
	if (!w->stage_ready) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%s", dir);
		if (strrchr(parent, '/'))
			*strrchr(parent, '/') = '\0';
		if ((rc = sfs_mkdirs(parent, 0700)))
			return rc;
		w->stage_ready = 1;
	}
	rm_tree(dir);	/* a killed compactor's attempt */
	if ((rc = sfs_rdb_checkpoint(w->db, dir, SFS_STAGE_SHARED, "rocksdb target", w->path)))
		return rc;
	cand_add(w, dir);
	return 0;
}


/* ---- the instance on disk, restore, rescale (the supervisor) ---------------- */

static int rdbt_instance_root(const char *data_dir, int node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sfs-rocksdb.%d", data_dir, node);

	return n < 0 || (size_t)n >= len ? sfs__err(SFS_EUSAGE, "%s: path too long", data_dir) : 0;
}

/* Opened once before any child starts: w_start adopts what carries the
 * mark, or keeps an instance of this segment's identity. */
static int adopt_now(const struct sfs_target_env *e, uint32_t worker)
{
	struct sfs_target_writer *w;
	int rc = rdbt_open(e->seg, worker, NULL, e->cfg, &w);

	if (!rc)
		rdbt_close(w);
	return rc;
}

/* The checkpoint's files put into the instance, marked (RESTORED_MARK: a
 * kill before the adoption completes leaves the mark, so the next open
 * adopts again), then adopted. */
/*
 * Offline scan of a checkpoint's instance restored flat in @dir
 * (store/target.h, scan): opened read-only with every state's column
 * family under its own options (a counter's merge operator folds its
 * merges as the iterator reads), each family iterated whole; the applied
 * markers (0xff 0xff ...) are skipped and each key goes back to the
 * buffered key (kg | state | rest, the namespace taken out).  A family of
 * no registered state is an error: the registry is the checkpoint's own.
 */
static int rdbt_scan(const char *dir, const struct sfs_state_desc *states,
		     int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg)
{
	struct sfs_rdbt_knobs k = knobs_get();
	rocksdb_options_t *dbo = rocksdb_options_create();
	rocksdb_options_t *opts[SFS_MAX_STATES + 1];
	rocksdb_column_family_handle_t *h[SFS_MAX_STATES + 1];
	int sids[SFS_MAX_STATES + 1];
	size_t ncf = 0;
	char *err = NULL, **names;
	rocksdb_t *db = NULL;
	int rc;

	rocksdb_options_set_max_open_files(dbo, -1);
	names = rocksdb_list_column_families(dbo, dir, &ncf, &err);
	if ((rc = rdbt_err(dir, &err, "list column families"))) {
		rocksdb_options_destroy(dbo);
		return rc;
	}
	if (ncf > SFS_MAX_STATES + 1) {
		rocksdb_list_column_families_destroy(names, ncf);
		rocksdb_options_destroy(dbo);
		return sfs__err(SFS_ECORRUPT, "rocksdb target %s: %zu column families", dir, ncf);
	}
	for (size_t c = 0; c < ncf; c++) {
		sids[c] = -1;
		if (strcmp(names[c], "default")) {
			for (uint32_t i = 0; i < SFS_MAX_STATES; i++)
				if (states[i].sd_state == SFS_SDESC_READY &&
				    !strncmp(names[c], CF_PREFIX, sizeof(CF_PREFIX) - 1) &&
				    !strcmp(names[c] + sizeof(CF_PREFIX) - 1, states[i].sd_name))
					sids[c] = (int)i;
			if (sids[c] < 0 && !rc)
				rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: column family '%s' "
					      "of no state in the checkpoint's registry", dir, names[c]);
		}
		opts[c] = sids[c] >= 0 ? cf_options(&states[sids[c]], NULL, &k, 0)
				       : rocksdb_options_create();
	}
	if (!rc) {
		db = rocksdb_open_for_read_only_column_families(dbo, dir, (int)ncf,
								 (const char *const *)names,
								 (const rocksdb_options_t *const *)opts,
								 h, 0, &err);
		rc = rdbt_err(dir, &err, "open read-only");
	}
	for (size_t c = 0; c < ncf && db && !rc; c++) {
		rocksdb_readoptions_t *ro;
		rocksdb_iterator_t *it;

		if (sids[c] < 0)
			continue;
		ro = rocksdb_readoptions_create();
		rocksdb_readoptions_set_total_order_seek(ro, 1);
		it = rocksdb_create_iterator_cf(db, ro, h[c]);
		for (rocksdb_iter_seek_to_first(it); !rc && rocksdb_iter_valid(it);
		     rocksdb_iter_next(it)) {
			size_t kl, vl;
			const unsigned char *key = (const unsigned char *)rocksdb_iter_key(it, &kl);
			const char *val = rocksdb_iter_value(it, &vl);
			unsigned char buf[KBUF];
			struct sfs_scan_entry e = { .key = buf, .val = val, .vlen = (uint32_t)vl };

			if (kl >= 2 && key[0] == 0xff && key[1] == 0xff)
				continue;	/* the applied marker */
			if (kl < SFS_KEY_PREFIX + NS_LEN || kl - NS_LEN > sizeof(buf)) {
				rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: family %s: a key of "
					      "%zu bytes", dir, names[c], kl);
				break;
			}
			memcpy(buf, key, SFS_KEY_PREFIX);
			for (unsigned i = 0; i < NS_LEN; i++)
				e.ns = e.ns << 8 | key[SFS_KEY_PREFIX + i];
			memcpy(buf + SFS_KEY_PREFIX, key + SFS_KEY_PREFIX + NS_LEN,
			       kl - SFS_KEY_PREFIX - NS_LEN);
			e.klen = (uint32_t)(kl - NS_LEN);
			rc = fn(arg, &e);
		}
		if (!rc) {
			rocksdb_iter_get_error(it, &err);
			rc = rdbt_err(dir, &err, "iterate");
		}
		rocksdb_iter_destroy(it);
		rocksdb_readoptions_destroy(ro);
	}
	for (size_t c = 0; c < ncf; c++) {
		if (db)
			rocksdb_column_family_handle_destroy(h[c]);
		rocksdb_options_destroy(opts[c]);
	}
	if (db)
		rocksdb_close(db);
	rocksdb_list_column_families_destroy(names, ncf);
	rocksdb_options_destroy(dbo);
	return rc;
}

static int rdbt_restore(const struct sfs_target_env *e, uint32_t worker,
			int (*put)(void *arg, const char *dir), void *arg)
{
	char dir[PATH_MAX], mark[PATH_MAX + 32];
	int fd, rc;

	if ((rc = sfs_target_instance_put(e, worker, put, arg, dir, sizeof(dir))))
		return rc;
	snprintf(mark, sizeof(mark), "%s/" RESTORED_MARK, dir);
	if ((fd = open(mark, O_CREAT | O_WRONLY | O_TRUNC, 0600)) < 0)
		return sfs__err(sfs__errno(), "%s: %s", mark, strerror(errno));
	close(fd);
	return adopt_now(e, worker);
}

static int rdbt_rebuild_op(const struct sfs_target_env *e, uint32_t worker,
			   const char *const *src, unsigned n, uint32_t kg_lo, uint32_t kg_hi)
{
	char dir[PATH_MAX];
	int rc;

	if ((rc = inst_path(e->seg, worker, dir, sizeof(dir))) || (rc = sfs_rmtree(dir)) ||
	    (rc = sfs_rdbt_rebuild(e->seg, worker, src, n, kg_lo, kg_hi)))
		return rc;
	return adopt_now(e, worker);
}

/* A restore's mark no group adopted: the instance is then another group's
 * (its identity differs) and the next open starts it empty. */
static int rdbt_forget(const struct sfs_target_env *e, uint32_t worker)
{
	char dir[PATH_MAX], mark[PATH_MAX + 32];
	int rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir));

	if (rc)
		return rc;
	snprintf(mark, sizeof(mark), "%s/" RESTORED_MARK, dir);
	if (unlink(mark) && errno != ENOENT)
		return sfs__err(sfs__errno(), "%s: %s", mark, strerror(errno));
	return 0;
}

/* `sfs stat`: what each instance's compactor published (its knobs, pacing
 * and write-path counters) and each state's column-family tuning under
 * those knobs. */
static void rdbt_stat(const struct sfs_seg *s, FILE *out)
{
	const struct sfs_seg_hdr *h = s->hdr;
	struct sfs_rdbt_knobs k, *kp = NULL;

	for (uint32_t w = 0; w < SFS_MAX_PROCS; w++) {
		const struct sfs_rdbt_pub *p;
		char rn[32], pacing[200];
		uint64_t off, size;

		snprintf(rn, sizeof(rn), "rdbt.%u", w);
		if (sfs_seg_region_find(s, rn, &off, &size))
			continue;
		p = sfs_seg_ptr(s, off);
		if (sfs_load_acquire(&p->rp_magic) != SFS_RDBT_MAGIC ||
		    p->rp_version != SFS_RDBT_VERSION || p->rp_layout != sfs_rdbt_layout())
			continue;
		k.on = sfs_load_relaxed(&p->rp_knobs);
		k.ingest_min = sfs_load_relaxed(&p->rp_ingest_min);
		kp = &k;
		sfs_rdbt_pacing(&k, pacing, sizeof(pacing));
		fprintf(out, "  w%-3u %s\n"
		       "       commits %llu (entries %llu, skipped as applied %llu), SSTs ingested %llu "
		       "(%llu entries, %.1f ms), batch write %.1f ms, memtable flush %.1f ms,\n"
		       "       failed commit attempts %llu, reopens %llu, L0-backlog waits %llu, "
		       "deletion windows %llu, expired entries dropped by compactions %llu, "
		       "rollbacks %llu\n",
		       w, pacing, (unsigned long long)p->rp_commits,
		       (unsigned long long)p->rp_entries, (unsigned long long)p->rp_skipped,
		       (unsigned long long)p->rp_ingests, (unsigned long long)p->rp_ingest_entries,
		       p->rp_ingest_ns / 1e6, p->rp_write_ns / 1e6, p->rp_flush_ns / 1e6,
		       (unsigned long long)p->rp_errors, (unsigned long long)p->rp_reopens,
		       (unsigned long long)p->rp_stalls, (unsigned long long)p->rp_purges,
		       (unsigned long long)sfs_load_relaxed(&p->rp_ttl_dropped),
		       (unsigned long long)sfs_load_relaxed(&p->rp_rollbacks));
	}
	for (int i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *d = &h->sh_states[i];
		char tuning[320];

		if (sfs_load_acquire(&d->sd_state) != SFS_SDESC_READY)
			continue;
		sfs_rdbt_tuning(d, kp, tuning, sizeof(tuning));
		fprintf(out, "  %-24s %s\n", d->sd_name, tuning);
	}
}

/* A run's --json summary: what the compaction filters of every worker's
 * instance dropped as expired (state TTL; as of each compactor's last
 * buffer or close). */
static void rdbt_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out)
{
	uint64_t dropped = 0;

	for (uint32_t w = 0; w < workers; w++) {
		struct sfs_rdbt_pub *p;

		if (pub_find(s, w, 0, &p) == 0 && p)
			dropped += sfs_load_relaxed(&p->rp_ttl_dropped);
	}
	fprintf(out, ", \"rocksdb_ttl_dropped\": %llu", (unsigned long long)dropped);
}

const struct sfs_target_ops sfs_target_rocksdb = {
	.name = "rocksdb",
	.open = rdbt_open,
	.apply = rdbt_apply,
	.commit = rdbt_commit,
	.busy = rdbt_busy,
	.files = rdbt_files,
	.snapshot = rdbt_snapshot,
	.close = rdbt_close,
	.instance_root = rdbt_instance_root,
	.restore = rdbt_restore,
	.rebuild = rdbt_rebuild_op,
	.forget = rdbt_forget,
	.scan = rdbt_scan,
	.ttl = rdbt_ttl,
	.pin = rdbt_pin,
	.rollback = rdbt_rollback,
	.summary_json = rdbt_summary_json,
	.stat = rdbt_stat,
	.rd.reader_open = rdbt_reader_open,
	.rd.catch_up = rdbt_catch_up,
	.rd.probe = rdbt_probe,
	.rd.map_get = rdbt_map_get,
	.rd.map_iter = rdbt_map_iter,
	.rd.reader_close = rdbt_reader_close,
};
