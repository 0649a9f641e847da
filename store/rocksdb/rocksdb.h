/*
 * rocksdb.h — the `rocksdb` flush target (store/rocksdb/; its floor plan:
 * rocksdb.c): sealed buffers flushed by the compactor into one RocksDB
 * instance per worker, read by workers through secondary instances.
 *
 * Files: <sh_data_dir>/w<N> is worker N's instance (the compactor is its
 * only writer, the primary); every reader opens it as a secondary with its
 * own directory <sh_data_dir>/w<N>.sec/<pid>.<n> (LOG files only, removed
 * at close).  One column family per registered state, "st:<state name>",
 * created lazily by the compactor at the state's first flush.
 *
 * RocksDB key of a buffered key  kg(2) | state(2) | rest  in namespace ns:
 *
 *     kg(2) | state(2) | ns (8 B, big-endian) | rest
 *
 * so a key group range stays a key range, and for a map (rest = klen16 |
 * key, entries rest | ukey) a map's entries in one namespace are the
 * contiguous, prefix-isolated range of  kg|state|ns|klen|key  (the length
 * keeps one parent from being a prefix of another): a clear is one
 * DeleteRange over it, an iteration one bounded scan.  Each column family
 * also holds, at RDBT_MARKER_KEY (0xff 0xff ...: after every data key,
 * since a key group's first byte is < 0x80), the seq of the last buffer
 * whose entries of that state it holds ("applied"), written in the same
 * WriteBatch as the data, or as the last key of the same ingested SST.
 * SSTs being written live in <sh_data_dir>/w<N>.ingest (emptied at open).
 * Versions kept for a rollback in place (store/target.h) live in
 * <sh_data_dir>/w<N>.pin (emptied at open: a pin does not outlive its
 * compactor): c<id>, a flat RocksDB checkpoint (hard links of the SSTs,
 * MANIFEST, CURRENT, OPTIONS) per staged or pinned checkpoint @id, and
 * r<n>, the pin's copy a rollback swaps in and then the old instance it
 * swapped out, being removed (rollback.c, "Rollback").
 *
 * Shared memory: region "rdbt.<w>" (one page) holds what the compactor
 * publishes to the readers of worker w's instance; see struct sfs_rdbt_pub.
 */
#ifndef SFS_STORE_ROCKSDB_H
#define SFS_STORE_ROCKSDB_H

#include <stdint.h>

#include <stddef.h>

#include "shm/segment.h"
#include "store/target.h"

#define SFS_RDBT_MAGIC 0x3154424452534653ull /* "SFSRDBT1" */
#define SFS_RDBT_VERSION 4u  /* 3: rp_ttl_dropped, 4: rp_incarnation */

/* Tunings the ablation benchmark switches off one at a time (tune.c's
 * sfs__rdbt_knobs_get: SFS_RDBT_<X>=0 in the environment). */
#define SFS_RDBT_K_HASH_MEMTABLE 0x01u /* hash-linklist memtable for point state */
#define SFS_RDBT_K_PARTITIONED   0x02u /* partitioned filters + two-level index */
#define SFS_RDBT_K_PREFIX        0x04u /* adaptive prefix bloom of map/list state */
#define SFS_RDBT_K_LZ4           0x08u /* LZ4 at L0/L1 (else ZSTD everywhere) */
#define SFS_RDBT_K_MERGE         0x10u /* counters as merges (else read-modify-write) */
#define SFS_RDBT_K_PACING        0x20u /* compaction paced */
#define SFS_RDBT_K_UNIVERSAL     0x40u /* universal compaction (else leveled) */
#define SFS_RDBT_K_ALL           0x7fu

struct sfs_rdbt_knobs {
	uint32_t on;            /* SFS_RDBT_K_* switched on */
	uint64_t ingest_min;    /* a state's entries in one buffer from which they are
				 * ingested as an SST instead of written in a batch; 0: never */
};

struct sfs_rdbt_pub {
	uint64_t rp_magic;      /* compactor (creator), release, last */
	uint32_t rp_version;    /* creator */
	uint32_t rp_worker;     /* creator */
	uint64_t rp_layout;     /* creator: sfs_rdbt_layout() */
	uint64_t rp_published;  /* compactor, release: versions published; bumped after a
				 * commit is durable (readers catch up when it moves) */
	uint64_t rp_applied;    /* compactor, release: seq of the last committed buffer */
	uint64_t rp_cf_gen;     /* compactor, release: bumped per column family created
				 * (a secondary needs a reopen to get a new one's handle) */
	uint64_t rp_commits;    /* compactor, relaxed: buffers committed with data */
	uint64_t rp_entries;    /* compactor, relaxed: entries written */
	uint64_t rp_skipped;    /* compactor, relaxed: entries skipped as already applied */
	uint64_t rp_write_ns;   /* compactor, relaxed: time in WriteBatch writes */
	uint64_t rp_flush_ns;   /* compactor, relaxed: time in memtable flushes (durability) */
	uint64_t rp_purges;     /* compactor, relaxed: file-deletion windows opened */
	uint64_t rp_ingests;    /* compactor, relaxed: column families ingested as SSTs */
	uint64_t rp_ingest_entries; /* compactor, relaxed: entries of those */
	uint64_t rp_ingest_ns;  /* compactor, relaxed: time writing and ingesting SSTs */
	uint64_t rp_errors;     /* compactor, relaxed: failed commit attempts (retried) */
	uint64_t rp_reopens;    /* compactor, relaxed: reopens after a background error */
	uint64_t rp_stalls;     /* compactor, relaxed: commits deferred by an L0 backlog */
	uint32_t rp_knobs;      /* compactor, relaxed, at each open: its sfs_rdbt_knobs.on */
	uint32_t rp_pad;
	uint64_t rp_ingest_min; /* compactor, relaxed, at each open: its knobs.ingest_min */
	uint64_t rp_ttl_dropped; /* compactor, relaxed, per buffer and at close: expired
				  * entries its compaction filter dropped (state TTL) */
	uint64_t rp_incarnation; /* compactor, release: odd while a rollback replaces the
				  * instance directory, even otherwise; a reader whose
				  * secondary was opened under another value reopens it,
				  * and one that sees it odd or moved across a catch-up
				  * discards that catch-up (rollback.c, "Rollback") */
	uint64_t rp_rollbacks;  /* compactor, relaxed: rollbacks done */
};

uint64_t sfs_rdbt_layout(void);

/* The tuning a state's column family gets (a pure function of its kind,
 * merge operator and the knobs, kept next to the code that applies it), as
 * one line for `sfs stat`; the same choices are in each instance's RocksDB
 * LOG (OPTIONS dump).  @k NULL: this process's environment. */
void sfs_rdbt_tuning(const struct sfs_state_desc *d, const struct sfs_rdbt_knobs *k, char *buf,
		     size_t n);

/* The instance-wide compaction pacing of @k, as one line. */
void sfs_rdbt_pacing(const struct sfs_rdbt_knobs *k, char *buf, size_t n);

extern const struct sfs_target_ops sfs_target_rocksdb;

/*
 * Rescale at restore (the supervisor, before any child starts, with the
 * checkpoint's state registry in @s): build worker @worker's instance from
 * the restored old instances @src[0..n), keeping key groups [@kg_lo,
 * @kg_hi] only.  store/rocksdb/admin.c has the details.
 */
int sfs_rdbt_rebuild(struct sfs_seg *s, uint32_t worker, const char *const *src, unsigned n,
		     uint32_t kg_lo, uint32_t kg_hi);

/* Tests only: writer @w's primary (a rocksdb_t *) and state @sid's column
 * family handle (NULL: none yet), to compact and read the instance raw.
 * Valid until the writer's next commit, reopen or close. */
void sfs_rdbt_test_handles(struct sfs_target_writer *w, uint32_t sid, void **db, void **cf);

#endif
