/*
 * rdb.h — the rocksdb-direct baseline's RocksDB glue (runtime/
 * backend_rocksdb.c), on RocksDB's C API and sfs's public one only: the one
 * adapter of the C API's error strings into sfs's codes (the runtime's
 * message, runtime/util.h), the int64 merge operators of counter state
 * (folded with sfs_merge_fold, so the baseline folds as sfs does), the
 * key-group copy of a rescale, and the snapshot into a stage directory.
 * sfs's own rocksdb flush target has the same glue inside sfs
 * (common/rdb.h): the messages and codes match.
 */
#ifndef SFS_RUNTIME_RDB_H
#define SFS_RUNTIME_RDB_H

#include <rocksdb/c.h>

/*
 * 0 if *@err is NULL; else a code for its status string, with a message
 * "@who @path: @op: <status>" (rt_last_error), *@err freed and reset.
 * Corruption (a failed merge too) -> SFS_ECORRUPT, Invalid argument ->
 * SFS_EUSAGE, timed out -> SFS_ETIMEDOUT, a LOCK held by a live instance ->
 * SFS_ERUNNING, no space -> -ENOSPC, anything else -> -EIO.  RocksDB 7.8's
 * C API never clears errptr: callers reset it before every call.
 */
int rt_rdb_err(const char *who, const char *path, char **err, const char *op);

/* A merge operator folding 8-byte int64 cells with SFS_MERGE_* @op (a
 * built-in only: the baseline takes no user operator; associative, so
 * partial merges fold operands alone), named "sfs.i64.<op>".  A cell that
 * is not 8 bytes fails the merge (RocksDB reports Corruption).  NULL for
 * another @op or on ENOMEM: callers check the state's operator first.
 * The caller hands it to a column family's options, which own it. */
rocksdb_mergeoperator_t *rt_rdb_i64_merge(unsigned op);

/*
 * Copy the rows of key groups [@kg_lo, @kg_hi] (keys lead with the key
 * group, big-endian u16) from column family @hin of @in to @hout of @out,
 * in write batches of ~4 MiB with @wo (a rescale at restore: both RocksDB
 * backends).  Read in total order (a prefix extractor must not turn the
 * seek into a prefix seek); merges are read folded and written as values.
 * Errors name @who and @path.  Not flushed: the caller flushes.
 */
int rt_rdb_copy_kg_range(rocksdb_t *in, rocksdb_column_family_handle_t *hin, rocksdb_t *out,
			 rocksdb_column_family_handle_t *hout, const rocksdb_writeoptions_t *wo,
			 uint32_t kg_lo, uint32_t kg_hi, const char *who, const char *path);

/*
 * A checkpoint of @db (the instance at @path) in @dir, which must not
 * exist (RocksDB creates it), memtables flushed first, staged for the
 * checkpointer: the SST files — immutable once written, their names
 * unique within the instance — renamed into @dir/@shared (same directory
 * tree: no byte moves), MANIFEST, CURRENT and OPTIONS left at the top
 * (store/target.h, "Staging").  Errors name @who and the path.  Cost: the
 * flush, a link per live SST (RocksDB's), a rename per SST.
 */
int rt_rdb_checkpoint(rocksdb_t *db, const char *dir, const char *shared, const char *who,
		      const char *path);

/*
 * Flink's managed memory (runtime/rdb_mem.cc: RocksDB 7.8's C API builds
 * neither piece).  rt_rdb_lru_cache: an LRU cache of @capacity bytes,
 * automatic shard bits, no strict limit, @high_pri_ratio of it for index
 * and filter blocks — Flink's `new LRUCache(capacity, -1, false, ratio)`;
 * NULL on ENOMEM; rocksdb_cache_destroy() releases the caller's reference.
 * rt_rdb_set_write_buffer_manager: @o's memtables, over every column family
 * and instance opened with (a copy of) @o, bounded by one WriteBufferManager
 * of @capacity bytes whose memory is charged to @cache (dummy entries), as
 * Flink's `new WriteBufferManager(capacity, cache)`; 0, or -1 on ENOMEM.
 */
rocksdb_cache_t *rt_rdb_lru_cache(size_t capacity, double high_pri_ratio);
int rt_rdb_set_write_buffer_manager(rocksdb_options_t *o, size_t capacity, rocksdb_cache_t *cache);

/* A fault point (tests): pause (@pause 1) or continue (0) @db's background
 * flushes and compactions, so writes meet RocksDB's own write stop once
 * its memtables are full.  0, or -1 when RocksDB refused. */
int rt_rdb_pause_background(rocksdb_t *db, int pause);

#endif
