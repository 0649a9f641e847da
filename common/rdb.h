/*
 * rdb.h — what every RocksDB user in sfs shares: the one adapter of the C
 * API's error strings into sfs errors, the int64 merge operators of counter
 * state, and `mkdir -p` for instance directories.  Used by the rocksdb flush
 * target (target/rocksdb.c) and the rocksdb-direct baseline
 * (runtime/backend_rocksdb.c), so both refuse and fold alike.
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

/* A merge operator folding 8-byte int64 cells with SFS_MERGE_* @op (add,
 * max, min; associative, so partial merges fold operands alone).  A cell
 * that is not 8 bytes fails the merge (RocksDB reports Corruption).  The
 * caller hands it to a column family's options, which own it. */
rocksdb_mergeoperator_t *sfs_rdb_i64_merge(unsigned op);

/* mkdir -p @path (mode 0700); an error names the directory. */
int sfs_rdb_mkdirs(const char *path);

#endif
