/*
 * rdb.h — what every RocksDB user in sfs shares: the one adapter of the C
 * API's error strings into sfs errors, the int64 merge operators of counter
 * state.  Used by the rocksdb flush
 * target (store/rocksdb/) and the rocksdb-direct baseline
 * (baseline/rocksdb_direct.c), so both refuse and fold alike.
 */
#ifndef SFS_COMMON_RDB_H
#define SFS_COMMON_RDB_H

#include <rocksdb/c.h>

/*
 * 0 if *@err is NULL; else a code for its status string, with a message
 * "@who @path: @op: <status>" (sfs_last_error), *@err freed and reset.
 * Corruption (a failed merge too) -> SFS_ECORRUPT, Invalid argument ->
 * SFS_EUSAGE, timed out -> SFS_ETIMEDOUT, a LOCK held by a live instance ->
 * SFS_ERUNNING, no space -> -ENOSPC, anything else -> -EIO.  RocksDB 7.8's
 * C API never clears errptr: callers reset it before every call.
 */
int sfs_rdb_err(const char *who, const char *path, char **err, const char *op);

/* A merge operator folding 8-byte int64 cells with SFS_MERGE_* @op (a
 * built-in or a user operator defined here; associative, so partial merges
 * fold operands alone), named "sfs.i64.<op>" or "sfs.user.<name>".  A cell
 * that is not 8 bytes fails the merge (RocksDB reports Corruption).  NULL
 * when @op is not valid here (sfs_merge_valid) or on ENOMEM: callers check
 * the state's operator first.  The caller hands it to a column family's
 * options, which own it. */
rocksdb_mergeoperator_t *sfs_rdb_i64_merge(unsigned op);

/*
 * Copy the rows of key groups [@kg_lo, @kg_hi] (keys lead with the key
 * group, big-endian u16) from column family @hin of @in to @hout of @out,
 * in write batches of ~4 MiB with @wo (a rescale at restore: both RocksDB
 * backends).  Read in total order (a prefix extractor must not turn the
 * seek into a prefix seek); merges are read folded and written as values.
 * Errors name @who and @path.  Not flushed: the caller flushes.
 */
int sfs_rdb_copy_kg_range(rocksdb_t *in, rocksdb_column_family_handle_t *hin, rocksdb_t *out,
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
int sfs_rdb_checkpoint(rocksdb_t *db, const char *dir, const char *shared, const char *who,
		       const char *path);

#endif
