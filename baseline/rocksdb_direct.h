/*
 * rocksdb_direct.h — `rocksdb-direct`, the A/B baseline of `sfs run
 * --backend rocksdb-direct`: Flink's RocksDB state backend configured as
 * Flink configures it for one slot, behind the runtime's backend contract
 * (runtime/backend.h).  Every state access is one RocksDB call in the
 * worker; none of sfs's buffers or caches (baseline/rocksdb_direct.c says
 * where each setting comes from).
 *
 * A layer of its own above runtime/ (scripts/check-layers.sh): the runtime
 * never names it.  A binary that offers the backend registers it by its
 * ops table before it looks a backend up by name — bin/sfs-worker
 * (worker/main.c) and bin/sfs (supervisor/main.c), with
 * rt_backend_register(&rt_backend_rocksdb_direct); every process of a
 * group must register the same backends.
 */
#ifndef SFS_BASELINE_ROCKSDB_DIRECT_H
#define SFS_BASELINE_ROCKSDB_DIRECT_H

#include <stdint.h>

#include "runtime/backend.h"

extern const struct rt_backend_ops rt_backend_rocksdb_direct;

/*
 * Flink's managed memory for RocksDB, one slot (RocksDBMemoryControllerUtils
 * and RocksDBOptions of Flink 2.3): of @managed bytes, a shared LRU block
 * cache of (3 - r) / 3 and a WriteBufferManager of 2 r / 3 charged to it,
 * r = state.backend.rocksdb.memory.write-buffer-ratio (0.5); the cache's
 * high-priority pool (index and filter blocks) is
 * state.backend.rocksdb.memory.high-prio-pool-ratio (0.1) of it.
 */
struct rt_rdb_memory {
	uint64_t managed;         /* the slot's managed memory */
	uint64_t cache;           /* the block cache's capacity */
	uint64_t write_buffers;   /* the write buffer manager's */
	uint64_t write_buffer;    /* one memtable (64 MiB; SFS_ROCKSDB_WRITE_BUFFER_KB) */
	double write_buffer_ratio, high_prio_ratio;
};

/* The default: the published Nexmark runs' slot, a TaskManager of 8 GiB
 * with one slot, as Flink divides it: 8192 MiB less JVM overhead (10 %,
 * 819 MiB) and metaspace (256 MiB) = 7117 MiB of Flink memory, 0.4 of it
 * managed = 2847 MiB (FLINK.md: "about 2.8 GB per slot"). */
#define RT_RDB_MEMORY_DEFAULT (2847ull << 20)
#define RT_RDB_WRITE_BUFFER_RATIO 0.5
#define RT_RDB_HIGH_PRIO_RATIO 0.1

/* @m for @managed bytes (0: the default).  No allocation. */
void rt_rocksdb_direct_memory(uint64_t managed, struct rt_rdb_memory *m);

/*
 * Rescale at restore: build the instance at @dest from the restored
 * instances @src[0..n) holding key groups [@kg_lo, @kg_hi] only — each
 * source read once, its entries in that range written (Flink clips its
 * instances the same way, once, at recovery).  The supervisor's restore
 * calls it (supervisor/backends.c: the files half of the baseline).  An
 * error's message is the runtime's (rt_last_error).
 */
int rt_rocksdb_direct_rebuild(const char *const *src, unsigned n, const char *dest,
			      uint32_t kg_lo, uint32_t kg_hi);

#endif
