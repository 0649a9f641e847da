/*
 * backend.h — the keyed-state calls an operator makes, behind one table of
 * functions, so the same query code runs on every backend of `sfs run`:
 *
 *   memory          sfs: write buffers in shared memory, value cache, the
 *                   compactor flushing to the shared-memory store (sfs.h)
 *   rocksdb-direct  the baseline Flink users run today: every access is one
 *                   RocksDB call in the worker, configured as Flink's RocksDB
 *                   state backend configures it for one slot (managed
 *                   memory: a shared block cache and a write buffer manager
 *                   charged to it; Flink's default options), no sfs buffers
 *                   or caches.  It lives above the runtime (baseline/) and
 *                   joins by rt_backend_register: the runtime never names it
 *
 * Semantics are those of include/sfs.h (kinds, namespaces, merges, views
 * valid until the next quiescent point, error codes).  A backend instance is
 * process-local and single-threaded: one per worker.  The indirect call
 * costs a few ns per access; it buys A/B runs of identical operator code.
 */
#ifndef SFS_RUNTIME_BACKEND_H
#define SFS_RUNTIME_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "sfs.h"

struct rt_backend_cfg {
	const char *job;
	int node;
	uint32_t worker;          /* this worker's index */
	uint32_t workers;         /* parallelism */
	uint32_t max_parallelism; /* key groups (0: 128) */
	const char *data_dir;     /* where a disk backend keeps its files */
	int restored;             /* adopt the files a restore put in place */
	uint64_t cache_bytes;     /* sfs: the value cache per worker (0: its default) */
	uint64_t buffer_bytes;    /* sfs: each write buffer (0: its default) */
	uint64_t state_ttl_ms;    /* sfs: every state but RT_STATE_NO_TTL ones expires this
				   * long after its last write, processing time (0: never) */
	uint64_t rdb_memory_bytes; /* rocksdb-direct: the slot's managed memory (0: its
				    * default, baseline/rocksdb_direct.h) */
	/* rocksdb-direct: where the backend says it is held by RocksDB's own
	 * back-pressure (a write stall or stop), from a thread of its own while
	 * the worker's thread waits inside RocksDB: @held(arg, why) while it
	 * is, @held(arg, RT_HELD_NONE) when it is over.  NULL: nobody listens
	 * (tests). */
	void (*held)(void *arg, unsigned why);   /* RT_HELD_*, RT_HELD_NONE when over */
	void *held_arg;
};

/* A flag of reg()'s @kind: the runtime's own state (timers), which a
 * --state-ttl never expires (Flink's TTL is the user state's only). */
#define RT_STATE_NO_TTL 0x100

struct rt_backend;

/* A flag of rt_backend_ops.flags: the backend is a baseline that takes
 * one state access per record, none of sfs's batching (the join queries'
 * batches are off on it: query/batch.c). */
#define RT_BACKEND_UNBATCHED 0x1

struct rt_backend_ops {
	const char *name;
	unsigned flags;           /* RT_BACKEND_* */
	int (*open)(const struct rt_backend_cfg *cfg, struct rt_backend **out);
	void (*close)(struct rt_backend *b);
	/* @kind: SFS_STATE_*; @merge: SFS_MERGE_* for counters (else ignored). */
	int (*reg)(struct rt_backend *b, const char *name, int kind, unsigned merge,
		   uint32_t *id);

	int (*value_get)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen, struct sfs_view *out);
	int (*value_put)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen, const void *val, size_t vlen);
	int (*value_delete)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			    size_t klen);
	int (*multiget)(struct rt_backend *b, uint32_t st, const struct sfs_key *keys,
			unsigned n, struct sfs_view *views, int *results);

	int (*counter_add)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, int64_t delta);
	int (*counter_get)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, int64_t *out);
	/* A batch of counter reads: results[i] and vals[i] as counter_get's
	 * return and *out; returns the first error.  NULL: read key by key
	 * (rt_counter_multiget). */
	int (*counter_multiget)(struct rt_backend *b, uint32_t st, const struct sfs_key *keys,
				unsigned n, int64_t *vals, int *results);

	int (*map_put)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
		       size_t klen, const void *ukey, size_t ulen, const void *val, size_t vlen);
	int (*map_get)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
		       size_t klen, const void *ukey, size_t ulen, struct sfs_view *out);
	int (*map_remove)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			  size_t klen, const void *ukey, size_t ulen);
	int (*map_clear)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen);
	int (*map_iter)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			size_t klen, sfs_entry_fn fn, void *arg);

	int (*list_append)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, const void *val, size_t vlen);
	int (*list_get)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			size_t klen, sfs_entry_fn fn, void *arg);
	int (*list_clear)(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			  size_t klen);

	/* Checkpoint barrier @id: sfs seals its buffers; a direct backend
	 * does what Flink's does at a barrier (nothing synchronous here). */
	int (*barrier)(struct rt_backend *b, uint64_t id);
	/* Between input batches: views handed out so far may be released. */
	void (*quiescent)(struct rt_backend *b);
	/* Around an idle sleep of the worker (1 before, 0 after): views are
	 * released and no grace period may wait on a sleeper.  May be NULL. */
	void (*idle)(struct rt_backend *b, int idle);
	/* Stall time spent in barriers (back-pressure), ns. */
	uint64_t (*stall_ns)(const struct rt_backend *b);
	/* After barrier @id: stage the files of the state as of @id in @dir
	 * (which must not exist) for the checkpointer — Flink's synchronous
	 * snapshot phase.  NULL where the compactor snapshots (sfs). */
	int (*snapshot)(struct rt_backend *b, uint64_t id, const char *dir);
	/* Rollback in place of the group (include/sfs.h, sfs_worker_rollback):
	 * drop what was written since the last barrier, wait up to
	 * @timeout_ns for the group's rollback (SFS_ETIMEDOUT: call again),
	 * then read the rolled-back store.  NULL where the state cannot (a
	 * direct backend's instance is the worker's own: its worker restarts). */
	int (*rollback)(struct rt_backend *b, sfs_task_t *t, uint64_t timeout_ns);
};

/* Why a worker is held by its state backend's own back-pressure (a wait
 * the backend imposes to bound its memory, not a hang): the hang detector
 * of `sfs run` spares a worker held so and says why (supervisor/run.c). */
enum rt_held {
	RT_HELD_NONE = 0,
	RT_HELD_BUFFERS = 1,      /* sfs: no free write buffer, waiting for the compactor */
	RT_HELD_RDB_STOP = 2,     /* RocksDB: writes stopped (memtables or L0 full, or
				   * pending compaction bytes over the hard limit) */
	RT_HELD_RDB_DELAY = 3,    /* RocksDB: writes delayed (the same, over the soft limits) */
	RT_HELD_MAX
};

/* "sfs write buffers full (waiting for the compactor)", ...; "?" if unknown. */
const char *rt_held_name(unsigned why);

/* Every backend embeds this first. */
struct rt_backend {
	const struct rt_backend_ops *ops;
};

extern const struct rt_backend_ops rt_backend_memory;

/* The backend called @name, or NULL: the runtime's own (memory, rocksdb,
 * table), then those registered. */
const struct rt_backend_ops *rt_backend_find(const char *name);

/*
 * Offer the backend @ops under ops->name to rt_backend_find, for this
 * process: how a backend that lives above the runtime (the rocksdb-direct
 * baseline, baseline/) or a test's joins it without the runtime naming it.
 * The binary registers before it looks a backend up (its main), and every
 * process of a group registers the same ones.  0 (also when @ops is
 * registered already); SFS_EUSAGE for no name or a name taken by other
 * ops, SFS_EFULL past 8 registered.  Process-local, no lock: call it
 * before any thread looks up.
 */
int rt_backend_register(const struct rt_backend_ops *ops);

/* @ops->counter_multiget, or counter_get key by key where a backend has
 * none (a baseline that reads one key per access): the first error. */
static inline int rt_counter_multiget(const struct rt_backend_ops *ops, struct rt_backend *b,
				      uint32_t st, const struct sfs_key *keys, unsigned n,
				      int64_t *vals, int *results)
{
	int first = 0;

	if (ops->counter_multiget)
		return ops->counter_multiget(b, st, keys, n, vals, results);
	for (unsigned i = 0; i < n; i++) {
		results[i] = ops->counter_get(b, st, keys[i].ns, keys[i].key, keys[i].klen, &vals[i]);
		if (results[i] < 0 && !first)
			first = results[i];
	}
	return first;
}

#endif
