/*
 * table.h — the `table` flush target (store/table/table.c): sfs's own
 * Paimon-style LSM tables (store/table/layout/datafile.h, store/table/layout/manifest.h,
 * store/table/layout/dvec.h), one table per registered state per worker bucket.
 *
 * Files: <sh_data_dir>/w<N>/ is worker N's store; s<sid>/ is the table of
 * state <sid>: data files t<sid>-<16 hex>.sst, deletion-vector indexes
 * t<sid>-<16 hex>.dvi, and the metadata chain (snapshot-<id>, manifest
 * lists, manifests, LATEST).  IDENTITY names the segment the store belongs
 * to (a store of an earlier group is wiped unless a restore put TABLES
 * beside it: store/table/table_snap.h, adopted at open).
 *
 * Row key of a buffered entry (kg | state | rest, common/keygroup.h) in
 * namespace ns, so that bytewise order is the table's primary key order
 * (key group, key, namespace, user key):
 *   value, counter:  kg | state | key | ns (8 B, big-endian)
 *   map, list entry: kg | state | klen | key | ns | user key
 * A map's entries in one namespace are the contiguous range with prefix
 * parent | ns: a clear or an iteration is one prefix scan.
 *
 * Shared memory: region "table.<w>" holds what the compactor publishes to
 * the readers of worker w's store (struct sfs_table_pub): the live files of
 * every table at the published version, under a seqlock.
 */
#ifndef SFS_STORE_TABLE_H
#define SFS_STORE_TABLE_H

#include <stdint.h>

#include "shm/segment.h"
#include "store/target.h"

#define SFS_TABLE_MAGIC 0x314c424154534653ull /* "SFSTABL1" */
#define SFS_TABLE_VERSION 1u
#define SFS_TABLE_NAME 32u          /* "t65535-0123456789abcdef.sst" + NUL */
#define SFS_TABLE_PUB_FILES 4096u   /* live files per worker store */
#define SFS_TABLE_PUB_L0    16u     /* buffer images per worker store (table_l0.c) */
/* Page size of the table's data files, and decompressed pages a reader
 * may keep per file: a point read decompresses one key page and one value
 * page per hit, so pages are small — 4 KiB pages ran q4 1.4-1.9x faster
 * than 16 KiB (bench/RESULTS.md, issue 7).  Per file the cache may hold
 * 1024 pages; what bounds it is the process's decoded-page budget
 * (store/table/layout/datafile.h, 32 MiB): q5's window reads, scattered over ZSTD
 * pages, ran 1.8x faster than with 32 pages per file. */
#define SFS_TABLE_PAGE_BYTES 4096u
#define SFS_TABLE_CACHE_PAGES 1024u
/* ZSTD level of the files below level 1 (shaping merges run beside the
 * workers on the same cores): 1, not the library's default 3; the faster
 * negative levels measured no different on q4 (bench/RESULTS.md). */
#define SFS_TABLE_ZSTD_LEVEL 1
/* The first level whose merges write ZSTD; above it LZ4.  Every row passes
 * through each level's merge once, so the codec of a shallow level is paid
 * by all the state: ZSTD-1 compresses 4 KiB pages of bids at ~210 MB/s,
 * LZ4 at ~860 MB/s (zstd -b1 -B4096, lz4 -b1 -B4096 on bid.csv), for 1.3x
 * the bytes.  With ZSTD from level 2 the merges were q20's largest cost at
 * 20M events (libzstd 25 % of the compactor's samples) and fell behind
 * (63-75 files per table); from level 3, 0.94x the group's CPU per event
 * and 27-65 files (bench/RESULTS.md, issue 18). */
#define SFS_TABLE_ZSTD_FROM 3u
/* Key pages stored raw: probes read keys in place and decompress only the
 * value pages of their hits (measured: bench/RESULTS.md, issue 7). */
#define SFS_TABLE_KEYS_RAW (!getenv("SFS_TABLE_KEYS_RAW") || atoi(getenv("SFS_TABLE_KEYS_RAW")))

/* Design points the ablation benchmark switches off one at a time
 * (SFS_TABLE_<X>=0 in the environment of the compactor and the workers). */
#define SFS_TABLE_K_ROUND     0x01u /* minimal up-levelling round at the barrier
				     * (else: background only, L0 read merged) */
#define SFS_TABLE_K_SHAPING   0x02u /* background shaping merges */
#define SFS_TABLE_K_MAP_DIFF  0x04u /* map state written per changed entry (else:
				     * every touched map rewritten whole) */
#define SFS_TABLE_K_HASH_IN   0x08u /* batch probes by one hash-set pass (else
				     * one comparison per literal) */
#define SFS_TABLE_K_SESSION   0x10u /* maintenance session folds delta manifests
				     * (else: full manifest walk per commit) */
#define SFS_TABLE_K_CKPT_SYNC 0x20u /* files made durable by the checkpoints that
				     * link them, not at each commit (else: every
				     * file and directory fsynced as it is
				     * committed: store/table/layout/sync.h) */
#define SFS_TABLE_K_BG_IDLE   0x40u /* shaping merges on idle CPU time unless a
				     * level is in debt (else: always at the
				     * compactor's own priority) */
#define SFS_TABLE_K_KEY_INDEX 0x80u /* value and counter rounds ask an in-memory
				     * key index once per key (else: a batch
				     * probe of every level >= 1 file) */
#define SFS_TABLE_K_KEY_FILTER 0x200u /* the map diff tests a map table's key filter
				     * before its files' filters (else: every
				     * file that admits the map) */
#define SFS_TABLE_K_ALL       (0xffu | SFS_TABLE_K_KEY_FILTER)
/* Off unless SFS_TABLE_L0_IMAGE=1, so not in K_ALL: a sealed buffer saved as
 * an image at the barrier, converted later (table_l0.c: what is not done). */
#define SFS_TABLE_K_L0_IMAGE  0x100u

struct sfs_table_pub_table {
	uint32_t pt_sid;
	uint32_t pt_first;          /* index of its first file in tp_files */
	uint32_t pt_nfiles;         /* level-0 files first, newest first */
	uint32_t pt_pad;
	char pt_dvi[SFS_TABLE_NAME];  /* deletion-vector index, "" none */
};

struct sfs_table_pub_file {
	char pf_name[SFS_TABLE_NAME];
	uint32_t pf_level;
	uint32_t pf_pad;
	uint64_t pf_rows;
};

/*
 * Written by the compactor only (the writer's publish lock serializes its
 * two threads); read by any process.  tp_seq is a seqlock over tp_applied,
 * tp_ntables, tp_nfiles, tp_tables and tp_files: odd while they change
 * (release stores around the rewrite); a reader copies them and retries if
 * tp_seq moved.  Counters are relaxed statistics.
 */
struct sfs_table_pub {
	uint64_t tp_magic;          /* compactor (creator), release, last */
	uint32_t tp_version;        /* creator */
	uint32_t tp_worker;         /* creator */
	uint64_t tp_layout;         /* creator: sfs_table_layout() */
	uint64_t tp_seq;            /* seqlock */
	uint64_t tp_published;      /* release: versions published (readers poll it) */
	uint64_t tp_applied;        /* seqlock: seq of the last committed buffer (the tag) */
	uint32_t tp_knobs;          /* compactor, at open: SFS_TABLE_K_* on */
	uint32_t tp_ntables;        /* seqlock */
	uint32_t tp_nfiles;         /* seqlock */
	uint32_t tp_pad;
	/* statistics: atomic adds by the compactor's two threads, read relaxed */
	uint64_t tp_data_commits;   /* L0 delta files committed */
	uint64_t tp_rounds;         /* up-levelling rounds (barrier or background) */
	uint64_t tp_round_ns;       /* time in rounds */
	uint64_t tp_upgrades;       /* rounds that relabelled L0 as L1 without a rewrite */
	uint64_t tp_rows_written;   /* rows of L0 delta files */
	uint64_t tp_rows_masked;    /* rows superseded by deletion-vector bits */
	uint64_t tp_map_unchanged;  /* map entries not written: equal to the image */
	uint64_t tp_merges;         /* shaping merges committed */
	uint64_t tp_merge_rows;     /* rows they rewrote */
	uint64_t tp_merge_ns;       /* time in shaping merges */
	uint64_t tp_commits;        /* commit() calls that returned 0 (buffers committed) */
	uint64_t tp_commit_ns;      /* time in them (data commits + barrier rounds) */
	uint64_t tp_commit_max_ns;  /* the longest */
	uint64_t tp_table_max_ns;   /* the longest commit of one table (data commit +
				     * round): the barrier's synchronous work per operator */
	uint64_t tp_errors;         /* failed commits (retried) */
	uint64_t tp_merges_idle;    /* shaping merges that ran under SCHED_IDLE */
	uint64_t tp_map_pruned;     /* map rows the map diff did not probe: no file's
				     * prefix filter admits their map */
	/* The compactor's counted work (issue 18: cost per event, not only
	 * time): keys asked of a file by its probes (summed over files: a key
	 * asked of 5 files counts 5) and the key pages they walked; bytes of
	 * the data files it wrote at barriers (level-0 deltas, round
	 * rewrites) and in shaping merges. */
	uint64_t tp_probe_keys;
	uint64_t tp_probe_pages;
	uint64_t tp_bytes_written;
	uint64_t tp_merge_bytes;
	uint64_t tp_ttl_dropped;    /* rows of TTL states dropped as expired (rounds, merges) */
	/* Paced maintenance (table_merge.c): the budget (merge input bytes per
	 * byte flushed; compactor, at open), the merge input it earned but
	 * could not spend yet while merges were due (bytes, a gauge, and its
	 * peak), merge
	 * time at the compactor's priority and under SCHED_IDLE, the time the
	 * flush waited for a merge's hold of a table's lock, and the files
	 * dropped whole as expired (no read, no rewrite) or rewritten alone
	 * for their expired share.  The budget is stored once at open, the
	 * flush wait by the main thread, the rest by the background thread
	 * (relaxed stores and adds, like the counters above). */
	uint64_t tp_merge_budget;
	uint64_t tp_merge_owed;
	uint64_t tp_merge_owed_max; /* ... and its peak */
	uint64_t tp_merge_ns_normal;
	uint64_t tp_merge_ns_idle;
	uint64_t tp_flush_wait_ns;
	uint64_t tp_ttl_files_dropped;
	uint64_t tp_ttl_rewrites;
	/* The key index of value and counter tables (table_kindex.c): its
	 * keys and bytes now (gauges, summed over tables), keys it answered,
	 * and of those the ones it found a live row for, the rebuilds and
	 * the keys and time they took, the time spent keeping it under the
	 * table lock (round updates, merge remaps), the times it was found
	 * wrong and dropped (0 unless a bug), and the rounds' answers that
	 * differed from a full probe (SFS_TABLE_KEY_INDEX_CHECK=1 only). */
	uint64_t tp_index_keys;
	uint64_t tp_index_bytes;
	uint64_t tp_index_asked;
	uint64_t tp_index_hits;
	uint64_t tp_index_rebuilds;
	uint64_t tp_index_rebuild_keys;
	uint64_t tp_index_rebuild_ns;
	uint64_t tp_index_ns;
	uint64_t tp_index_broken;
	uint64_t tp_index_mismatch;
	uint64_t tp_l0_absorbed;    /* buffers saved as images (table_l0.c) */
	uint64_t tp_l0_converted;   /* images turned into level-0 data commits */
	uint64_t tp_l0_ttl_dropped; /* their entries dropped as expired at conversion (what
				     * the compactor counts in wc_ttl_dropped at a flush) */
	/* The key filter of map and list tables (table_kfilter.c): its bytes
	 * now (a gauge, summed over tables, a rebuild's filter included), the
	 * map diff's entries it found new to the table (no file asked), its
	 * rebuilds and their time, and what the check found. */
	uint64_t tp_kfilter_bytes;
	uint64_t tp_kfilter_rejects;
	uint64_t tp_kfilter_rebuilds;
	uint64_t tp_kfilter_rebuild_ns;
	uint64_t tp_kfilter_wrong;  /* keys it rejected that a level >= 1 file held: 0
				     * unless a bug (SFS_TABLE_KEY_INDEX_CHECK=1 only) */
	struct sfs_table_pub_table tp_tables[SFS_MAX_STATES];
	struct sfs_table_pub_file tp_files[SFS_TABLE_PUB_FILES];
	/* Seqlock: the buffer images not converted yet (table_l0.c), oldest
	 * first, in <store>/l0/; every seq above tp_applied once the list and
	 * the applied seq of one publication are read together. */
	uint32_t tp_nl0;
	uint32_t tp_pad1;
	struct sfs_table_pub_l0 {
		uint64_t pl_seq;
		char pl_name[SFS_TABLE_NAME];
	} tp_l0[SFS_TABLE_PUB_L0];
};

uint64_t sfs_table_layout(void);

/* Worker @worker's published region (statistics for `sfs run --json`),
 * NULL when none exists yet. */
const struct sfs_table_pub *sfs_table_pub_of(struct sfs_seg *s, uint32_t worker);

/* Knobs from this process's environment (SFS_TABLE_ROUND=0, ...). */
uint32_t sfs_table_knobs(void);
/* SFS_TABLE_ZSTD_FROM=L (1..64; default SFS_TABLE_ZSTD_FROM): the first
 * level whose merges write ZSTD; 64: LZ4 at every level (less CPU per
 * merge, more disk: bench/RESULTS.md, issue 34). */
uint32_t sfs_table_zstd_from(void);

/* SFS_TABLE_MERGE_BUDGET from this process's environment: bytes of merge
 * input earned per byte the flush writes, run at the compactor's own
 * priority (0: shaping merges on idle CPU time only, unless a level is in
 * debt).  Default SFS_TABLE_MERGE_BUDGET_DEFAULT. */
#define SFS_TABLE_MERGE_BUDGET_DEFAULT 1u
uint32_t sfs_table_merge_budget(void);

/* SFS_TABLE_KFILTER_MIN_KEYS (tests: a small filter fills and is rebuilt
 * larger): the fewest keys a map table's key filter is sized for
 * (table_kfilter.c).  Default SFS_TABLE_KFILTER_MIN_KEYS_DEFAULT. */
#define SFS_TABLE_KFILTER_MIN_KEYS_DEFAULT (1u << 20)
uint32_t sfs_table_kfilter_min_keys(void);

/* SFS_TABLE_KFILTER_AFTER=R: a map table gets its key filter once its map
 * diff has probed more than R keys in files per row written over the
 * table's life; 0: every map table from the start (tests).  Default
 * SFS_TABLE_KFILTER_AFTER_DEFAULT. */
#define SFS_TABLE_KFILTER_AFTER_DEFAULT 2u
uint32_t sfs_table_kfilter_after(void);

extern const struct sfs_target_ops sfs_target_table;

#endif
