/*
 * rdb_mem.cc — the two pieces of Flink's RocksDB memory control that
 * RocksDB 7.8's C API cannot build (baseline/rdb_mem.h): an LRU block
 * cache with a high-priority pool, and a
 * WriteBufferManager charged to that cache.  Flink builds exactly these
 * (RocksDBMemoryControllerUtils: new LRUCache(capacity, -1, false,
 * highPriorityPoolRatio), new WriteBufferManager(capacity, cache)).
 *
 * The only C++ of sfs, and the only file that knows how the C API
 * wraps its objects: rocksdb_cache_t, rocksdb_options_t and rocksdb_t are
 * one-member structs around the C++ object in RocksDB's c.cc (`struct
 * rocksdb_cache_t { std::shared_ptr<Cache> rep; }`, `struct
 * rocksdb_options_t { Options rep; }`, `struct rocksdb_t { DB *rep; }`),
 * stable since the C API began; they are declared here as c.cc
 * declares them.  A librocksdb whose c.cc wrapped them otherwise would
 * break this file, and only this file: the build pins RocksDB 7.8 (Debian 12).
 */
#include <memory>
#include <new>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_buffer_manager.h>

struct rocksdb_cache_t {
	std::shared_ptr<rocksdb::Cache> rep;
};

struct rocksdb_options_t {
	rocksdb::Options rep;
};

struct rocksdb_t {
	rocksdb::DB *rep;
};

extern "C" {

#include "baseline/rdb_mem.h"

rocksdb_cache_t *rt_rdb_lru_cache(size_t capacity, double high_pri_ratio)
{
	rocksdb_cache_t *c = new (std::nothrow) rocksdb_cache_t;

	if (!c)
		return nullptr;
	/* Flink's: automatic shard bits, no strict limit (FLINK-15532) */
	c->rep = rocksdb::NewLRUCache(capacity, -1, false, high_pri_ratio);
	if (!c->rep) {
		delete c;
		return nullptr;
	}
	return c;
}

int rt_rdb_set_write_buffer_manager(rocksdb_options_t *o, size_t capacity, rocksdb_cache_t *cache)
{
	try {
		o->rep.write_buffer_manager =
			std::make_shared<rocksdb::WriteBufferManager>(capacity, cache->rep);
	} catch (...) {
		return -1;
	}
	return 0;
}

int rt_rdb_pause_background(rocksdb_t *db, int pause)
{
	rocksdb::Status s = pause ? db->rep->PauseBackgroundWork() : db->rep->ContinueBackgroundWork();

	return s.ok() ? 0 : -1;
}

}
