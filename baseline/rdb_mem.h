/*
 * rdb_mem.h — the pieces of Flink's managed memory that RocksDB 7.8's C
 * API cannot build, in C++ (baseline/rdb_mem.cc), for the rocksdb-direct
 * baseline (baseline/rocksdb_direct.c).
 *
 * rt_rdb_lru_cache: an LRU cache of @capacity bytes, automatic shard bits,
 * no strict limit, @high_pri_ratio of it for index and filter blocks —
 * Flink's `new LRUCache(capacity, -1, false, ratio)`; NULL on ENOMEM;
 * rocksdb_cache_destroy() releases the caller's reference.
 * rt_rdb_set_write_buffer_manager: @o's memtables, over every column family
 * and instance opened with (a copy of) @o, bounded by one WriteBufferManager
 * of @capacity bytes whose memory is charged to @cache (dummy entries), as
 * Flink's `new WriteBufferManager(capacity, cache)`; 0, or -1 on ENOMEM.
 */
#ifndef SFS_BASELINE_RDB_MEM_H
#define SFS_BASELINE_RDB_MEM_H

#include <stddef.h>

#include <rocksdb/c.h>

rocksdb_cache_t *rt_rdb_lru_cache(size_t capacity, double high_pri_ratio);
int rt_rdb_set_write_buffer_manager(rocksdb_options_t *o, size_t capacity, rocksdb_cache_t *cache);

/* A fault point (tests): pause (@pause 1) or continue (0) @db's background
 * flushes and compactions, so writes meet RocksDB's own write stop once
 * its memtables are full.  0, or -1 when RocksDB refused. */
int rt_rdb_pause_background(rocksdb_t *db, int pause);

#endif
