/*
 * backend_memory.c — the `memory` backend: runtime/backend.h's table over
 * the sfs state API (include/sfs.h).  Every function is one call: the
 * semantics, limits and error messages are sfs's own, so an A/B run against
 * rocksdb-direct differs only in what sits below the call.
 *
 * Errors: a failed call's message is adopted as the runtime's (rt_sfs,
 * runtime/util.h): a compare on the result, a copy only on failure.
 *
 * The worker's write buffers and value cache take sfs's defaults (4 x 16 MiB
 * buffers, 8 MiB cache): the job's segment must have room for them, and a
 * compactor must run on the node or barriers back-pressure.
 */
#include <stdlib.h>

#include "runtime/backend.h"
#include "runtime/util.h"

struct mem_backend {
	struct rt_backend mb_base;	/* first: the table pointer */
	sfs_ctx_t *mb_ctx;
	uint64_t mb_ttl_ms;             /* --state-ttl (0: none) */
};

static inline sfs_ctx_t *ctx(const struct rt_backend *b)
{
	return ((const struct mem_backend *)b)->mb_ctx;
}

static int mem_open(const struct rt_backend_cfg *cfg, struct rt_backend **out)
{
	struct sfs_worker_opts o = { .parallelism = cfg->workers,
				     .max_parallelism = cfg->max_parallelism,
				     .cache_bytes = cfg->cache_bytes,
				     .buffer_bytes = cfg->buffer_bytes };
	struct mem_backend *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return rt_err(-ENOMEM, "memory backend of worker %u: no memory", cfg->worker);
	m->mb_ttl_ms = cfg->state_ttl_ms;
	m->mb_base.ops = &rt_backend_memory;
	rc = rt_sfs(sfs_worker_open(cfg->job, cfg->node, cfg->worker, &o, &m->mb_ctx));
	if (rc) {
		free(m);
		return rc;
	}
	*out = &m->mb_base;
	return 0;
}

static void mem_close(struct rt_backend *b)
{
	if (!b)
		return;
	sfs_worker_close(ctx(b));
	free(b);
}

/* A counter registers with its merge operator; other kinds have none.
 * With --state-ttl every state but the runtime's own (RT_STATE_NO_TTL)
 * gets it, on processing time. */
static int mem_reg(struct rt_backend *b, const char *name, int kind, unsigned merge, uint32_t *id)
{
	const struct mem_backend *m = (const struct mem_backend *)b;

	if (m->mb_ttl_ms && !(kind & RT_STATE_NO_TTL)) {
		struct sfs_ttl t = { .ttl_ms = m->mb_ttl_ms,
				     .merge = kind == SFS_STATE_COUNTER ? merge : 0 };

		return rt_sfs(sfs_state_register_ttl(ctx(b), name, kind, &t, id));
	}
	kind &= ~RT_STATE_NO_TTL;
	if (kind == SFS_STATE_COUNTER)
		return rt_sfs(sfs_state_register_merge(ctx(b), name, merge, id));
	return rt_sfs(sfs_state_register(ctx(b), name, kind, id));
}

static int mem_value_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen, struct sfs_view *out)
{
	return rt_sfs(sfs_value_get(ctx(b), st, ns, key, klen, out));
}

static int mem_value_put(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen, const void *val, size_t vlen)
{
	return rt_sfs(sfs_value_put(ctx(b), st, ns, key, klen, val, vlen));
}

static int mem_value_delete(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			    size_t klen)
{
	return rt_sfs(sfs_value_delete(ctx(b), st, ns, key, klen));
}

static int mem_multiget(struct rt_backend *b, uint32_t st, const struct sfs_key *keys, unsigned n,
			struct sfs_view *views, int *results)
{
	return rt_sfs(sfs_multiget(ctx(b), st, keys, n, views, results));
}

static int mem_counter_add(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, int64_t delta)
{
	return rt_sfs(sfs_counter_add(ctx(b), st, ns, key, klen, delta));
}

static int mem_counter_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, int64_t *out)
{
	return rt_sfs(sfs_counter_get(ctx(b), st, ns, key, klen, out));
}

static int mem_counter_multiget(struct rt_backend *b, uint32_t st, const struct sfs_key *keys,
				unsigned n, int64_t *vals, int *results)
{
	int rc = sfs_counter_multiget(ctx(b), st, keys, n, vals, results);

	/* SFS_EUSAGE says only that some key failed: the first one's code */
	for (unsigned i = 0; rc && i < n; i++)
		if (results[i] < 0)
			return rt_sfs(results[i]);
	return rt_sfs(rc);
}

static int mem_map_put(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key, size_t klen,
		       const void *ukey, size_t ulen, const void *val, size_t vlen)
{
	return rt_sfs(sfs_map_put(ctx(b), st, ns, key, klen, ukey, ulen, val, vlen));
}

static int mem_map_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key, size_t klen,
		       const void *ukey, size_t ulen, struct sfs_view *out)
{
	return rt_sfs(sfs_map_get(ctx(b), st, ns, key, klen, ukey, ulen, out));
}

static int mem_map_remove(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			  size_t klen, const void *ukey, size_t ulen)
{
	return rt_sfs(sfs_map_remove(ctx(b), st, ns, key, klen, ukey, ulen));
}

static int mem_map_clear(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen)
{
	return rt_sfs(sfs_map_clear(ctx(b), st, ns, key, klen));
}

static int mem_map_iter(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			size_t klen, sfs_entry_fn fn, void *arg)
{
	uint32_t seq0 = rt__err_seq;

	return rt_sfs_cb(sfs_map_iter(ctx(b), st, ns, key, klen, fn, arg), seq0);
}

static int mem_list_append(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, const void *val, size_t vlen)
{
	return rt_sfs(sfs_list_append(ctx(b), st, ns, key, klen, val, vlen));
}

static int mem_list_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			size_t klen, sfs_entry_fn fn, void *arg)
{
	uint32_t seq0 = rt__err_seq;

	return rt_sfs_cb(sfs_list_get(ctx(b), st, ns, key, klen, fn, arg), seq0);
}

static int mem_list_clear(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			  size_t klen)
{
	return rt_sfs(sfs_list_clear(ctx(b), st, ns, key, klen));
}

static int mem_barrier(struct rt_backend *b, uint64_t id)
{
	return rt_sfs(sfs_barrier(ctx(b), id));
}

static void mem_quiescent(struct rt_backend *b)
{
	sfs_ctx_quiescent(ctx(b));
}

/* Offline while the worker sleeps: a grace period of the compactor must
 * not wait for a sleeper, or a barrier of another worker waits forever. */
static void mem_idle(struct rt_backend *b, int idle)
{
	if (idle)
		sfs_ctx_offline(ctx(b));
	else
		sfs_ctx_online(ctx(b));
}

static uint64_t mem_stall_ns(const struct rt_backend *b)
{
	struct sfs_worker_stats st;

	sfs_worker_stats(ctx(b), &st);
	return st.stall_ns;
}

static int mem_rollback(struct rt_backend *b, sfs_task_t *t, uint64_t timeout_ns)
{
	return rt_sfs(sfs_worker_rollback(ctx(b), t, timeout_ns));
}

const struct rt_backend_ops rt_backend_memory = {
	.name = "memory",
	.open = mem_open,
	.close = mem_close,
	.reg = mem_reg,
	.value_get = mem_value_get,
	.value_put = mem_value_put,
	.value_delete = mem_value_delete,
	.multiget = mem_multiget,
	.counter_add = mem_counter_add,
	.counter_get = mem_counter_get,
	.counter_multiget = mem_counter_multiget,
	.map_put = mem_map_put,
	.map_get = mem_map_get,
	.map_remove = mem_map_remove,
	.map_clear = mem_map_clear,
	.map_iter = mem_map_iter,
	.list_append = mem_list_append,
	.list_get = mem_list_get,
	.list_clear = mem_list_clear,
	.barrier = mem_barrier,
	.quiescent = mem_quiescent,
	.idle = mem_idle,
	.stall_ns = mem_stall_ns,
	.rollback = mem_rollback,
};
