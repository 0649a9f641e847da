/*
 * cases.c — the case table of `bench_state` (bs.h) and the phases that
 * set up what its rows run on.  Phases, each with its own segment, so the
 * big ones never coexist (the rows of each, in the table below):
 *   value (N keys, value size V)
 *     A: insert N keys into the active buffer (timed once, each structure
 *        loaded the same way), then get and multiget of 64 (all hits in the
 *        active buffer, N live keys everywhere), then put (overwrite random
 *        keys: RocksDB's memtable keeps the old versions from here on).  The worker has
 *        its default options, value cache included: a put pays the cache
 *        invalidation it always pays.
 *     B: insert N keys, barrier, drain the flusher (untimed): every key is
 *        only in the memory store; then get and multiget through the empty
 *        active buffer to the store.  The value cache is disabled here when
 *        the build has one (SFS_WORKER_NO_CACHE), so the store path is what
 *        is timed.  The baselines run their plain gets again.
 *   map (N entries = N/8 map keys x 8 user keys, the middle value size):
 *        load, iterate one key's 8 entries, put (overwrite), iterate again
 *        (each map's buffer chain now holds every write; rocksdb's memtable
 *        every version).  rocksdb: rows key|user key, iterator seek + prefix.
 *   counter (N keys): blind int64 adds (raw: in place; rocksdb: Merge with
 *        counter state's add operator, the design's counter flush).
 *   seal (10K and the largest N): N counter entries in the active buffer,
 *        sfs_barrier() timed, then the flusher drains (untimed) and the
 *        buffer is refilled: median / p99 over the samples.  sfs only: not
 *        a row of the table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/state/bs.h"
#include "common/clock.h"
#include "common/err.h"
#include "store/memory/memory.h"
#include "common/keygroup.h"
#include "worker/state.h"
#include "worker/wbuf.h"

/* The report's rows, in its order.  Seeds keep each row's key sequence
 * apart from the others'. */
const struct bs_case bs_cases[] = {
	{ S_VALUE_LOAD, "value insert", 0, OP_LOAD, 0, N_OPS, NULL, NULL },
	{ S_VALUE_ACTIVE, "value get (active buffer)", C_GET, OP_GET, 37, N_OPS, NULL, NULL },
	{ S_VALUE_ACTIVE, "multiget 64 (active buffer)", C_MGET, OP_MGET, 41, N_OPS,
	  "ops = keys; rocksdb: batched MultiGet", NULL },
	{ S_VALUE_ACTIVE, "value put", C_PUT, OP_PUT, 31, N_OPS, "overwrites of live keys", NULL },
	{ S_VALUE_STORE, "value get (flushed store)", C_STORE, OP_GET, 43, N_OPS,
	  "sfs: key only in the memory store; baselines: plain get after the puts", NULL },
	{ S_VALUE_STORE, "multiget 64 (flushed store)", C_STORE, OP_MGET, 47, N_OPS, "ops = keys",
	  NULL },
	{ S_MAP_LOAD, "map insert", 0, OP_MLOAD, 0, N_OPS, NULL, NULL },
	{ S_MAP, "map iterate (8 entries)", 0, OP_MITER, 59, N_MAP_ITERS,
	  "ops = iterations of one map key's 8 entries", "map iterate" },
	{ S_MAP, "map put", 0, OP_MPUT, 61, N_OPS, "overwrites of live entries (8-byte user keys)",
	  NULL },
	/* Every write so far is in each map's buffer chain. */
	{ S_MAP, "map iterate (after puts)", 0, OP_MITER, 67, N_MAP_ITERS_CHAINED,
	  "each map's buffer chain: %.0f writes on average",
	  "map iterate after the puts (chains of %.0f)" },
	{ S_COUNTER_LOAD, "counter add (first)", 0, OP_ADD, 0, N_OPS, NULL, NULL },
	{ S_COUNTER, "counter add", C_COUNTER, OP_ADD, 53, N_OPS,
	  "blind adds; rocksdb: Merge (uint64 add)", NULL },
};
const unsigned bs_ncases = sizeof(bs_cases) / sizeof(bs_cases[0]);


static unsigned reps_for(const struct bs_cfg *cfg, uint64_t n)
{
	if (cfg->reps)
		return cfg->reps;
	return cfg->quick || n >= 5000000 ? 3 : 5;
}

static uint64_t ops_for(const struct bs_cfg *cfg, uint64_t n)
{
	uint64_t ops = cfg->ops ? cfg->ops : cfg->quick ? 100000 : n <= 100000 ? 500000 : 1000000;

	return (ops + BATCH - 1) / BATCH * BATCH;
}

/* sfs write-buffer entry bytes for a 16-byte user key (+4 prefix). */
static uint64_t sfs_esize(uint32_t vs)
{
	return sfs_wbuf_entry_size(KLEN + 4, vs);
}

/* The memory store of @n keys of @vs bytes, @rewrites extra versions of
 * each: one half holds them with its index growth, the region two halves. */
static uint64_t store_bytes_for(uint64_t n, uint32_t vs, unsigned versions)
{
	uint64_t slots = 1024, half;

	while (slots < 2 * (n + 1))
		slots *= 2;
	half = n * (56 + pad8(vs)) * versions + 3 * 8 * slots + 16 * MIB;
	return 2 * half + 4096 + MIB;
}

static uint64_t rdb_bytes_for(uint64_t entries, uint32_t vs)
{
	/* key + value + ~8 B sequence/type + varint lengths + skiplist node */
	return entries * (KLEN + vs + 48) * 3 / 2 + 64 * MIB;
}

static uint64_t worker_seg_bytes(const struct sfs_worker_opts *o, uint64_t store)
{
	return 2 * sfs_wbuf_size(o->buffer_keys, o->buffer_bytes) + store + 64 * MIB;
}

int bs_phase_value(const struct bs_cfg *cfg, uint64_t n, uint32_t vs)
{
	unsigned reps = reps_for(cfg, n);
	uint64_t ops = ops_for(cfg, n), es = sfs_esize(vs);
	uint64_t arena_a = (n + reps * ops) * es + MIB, arena_b = n * es + MIB;
	uint64_t store = store_bytes_for(n, vs, 1);
	uint64_t rdb_mem = rdb_bytes_for(n + reps * ops, vs);
	uint64_t raw_mem = pow2_slots(n) * 8 + n * (KLEN + pad8(vs));
	uint64_t idx = pow2_slots(n) * 8;
	uint64_t a_mem = 2 * idx + arena_a + 16 * MIB;
	uint64_t b_mem = 2 * idx + arena_b + store / 2 + n * 24;
	uint64_t need = raw_mem + (cfg->no_rocksdb ? 0 : rdb_mem) + (a_mem > b_mem ? a_mem : b_mem) +
			n * KLEN + ops * KLEN;
	struct raw raw;
	struct rdb rdb;
	struct sfsb sa, sb;
	struct bs_run x;
	struct sfs_worker_opts o;
	struct sfs_worker_stats ws;
	double bpe_total, bpe_arena, rdb_bpe = 0;
	char nb[24];
	uint64_t t0;
	int rc;

	memset(&raw, 0, sizeof(raw));
	memset(&rdb, 0, sizeof(rdb));
	memset(&sa, 0, sizeof(sa));
	memset(&sb, 0, sizeof(sb));
	if (bs_check_memory(need, n, vs, "value "))
		return 0;
	fprintf(stderr, "[value state: %s keys, %u-byte values, %u reps x %llu ops]\n",
		bs_size_name(n, nb, sizeof(nb)), vs, reps, (unsigned long long)ops);
	rc = bs_keys_make(n);
	if (rc)
		goto out;
	rc = bs_raw_open(&raw, n, vs);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb && (rc = bs_rdb_open(&rdb, rdb_mem, 0, vs)))
		goto out;

	/* A: everything in the active buffer. */
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = n, .buffer_bytes = arena_a };
	rc = bs_sfsb_open(&sa, "a", worker_seg_bytes(&o, 0), &o, SFS_STATE_VALUE, vs, 0);
	if (rc)
		goto out;
	bs_sfsb_prefault(&sa, arena_a);
	x = (struct bs_run){ .cfg = cfg, .n = n, .keys = n, .vs = vs, .salt = vs, .reps = reps,
			     .count = { [N_OPS] = ops },
			     .impl = { &bs_sfs_impl, &bs_raw_impl, cfg->no_rocksdb ? NULL : &bs_rdb_impl },
			     .arg = { &sa, &raw, &rdb } };
	bs_progress("loading %s keys into each structure", nb);
	rc = bs_run_step(&x, S_VALUE_LOAD);
	if (rc)
		goto out;
	bs_sfsb_bytes_per_entry(&sa, &bpe_total, &bpe_arena);
	if (!cfg->no_rocksdb)
		rdb_bpe = (double)bs_rdb_prop(&rdb, "rocksdb.cur-size-all-mem-tables") / (double)n;
	bs_bpe_add("value", vs, n, bpe_total, bpe_arena, 0,
		(double)(pow2_slots(n) * 8 + n * (KLEN + pad8(vs))) / (double)n, rdb_bpe);

	rc = bs_run_step(&x, S_VALUE_ACTIVE);
	if (rc)
		goto out;
	bs_sfsb_close(&sa);
	if (!(cfg->cases & C_STORE))
		goto out;

	/* B: every key only in the flushed memory store. */
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = n, .buffer_bytes = arena_b,
#ifdef SFS_WORKER_NO_CACHE
				      .flags = SFS_WORKER_NO_CACHE,
#endif
	};
	rc = bs_sfsb_open(&sb, "b", worker_seg_bytes(&o, store), &o, SFS_STATE_VALUE, vs, store);
	if (rc)
		goto out;
	bs_sfsb_prefault(&sb, arena_b);
	bs_progress("sfs: load, barrier, flush %s keys to the memory store", nb);
	t0 = sfs_now_ns();
	rc = bs_sfs_impl.op[OP_LOAD](&sb, bs_keys, n);
	if (rc) {
		bs_fail("load for the store phase", rc);
		goto out;
	}
	rc = sfs_barrier(sb.c, ++sb.barrier);
	if (rc) {
		bs_fail("barrier", rc);
		goto out;
	}
	rc = bs_sfsb_drain(&sb);
	if (rc)
		goto out;
	sfs_worker_stats(sb.c, &ws);
	if (ws.buffers_sealed || ws.flushed_seq != 1 || ws.active_entries) {
		rc = bs_fail("after the drain a buffer is still sealed or not empty", SFS_ECORRUPT);
		goto out;
	}
	{
		struct sfs_mstore *ms = NULL;

		if (sfs_mstore_attach(&sb.c->seg, 0, &ms) == 0 && ms && ms->ms_live)
			bs_bpes[bs_nbpes - 1].store =
				(double)(ms->ms_top[ms->ms_active] - ms->ms_garbage) / (double)ms->ms_live;
	}
	bs_progress("flushed in %.1f s", (sfs_now_ns() - t0) / 1e9);
	x.arg[I_SFS] = &sb;
	rc = bs_run_step(&x, S_VALUE_STORE);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb)
		bs_rdb_check(&rdb, "value run");
out:
	bs_sfsb_close(&sb);
	bs_sfsb_close(&sa);
	if (rdb.o)
		bs_rdb_close(&rdb);
	bs_raw_close(&raw);
	return rc;
}

static uint64_t round_batch(uint64_t n)
{
	n = (n + BATCH - 1) / BATCH * BATCH;
	return n < 4 * BATCH ? 4 * BATCH : n;
}

/* Map state, all in the active buffer: load (insert), iterate, put
 * (overwrite), iterate again: the put case lengthens each map's chain in
 * the buffer (and RocksDB's memtable keeps the versions too). */
int bs_phase_map(const struct bs_cfg *cfg, uint64_t n, uint32_t vs)
{
	uint64_t maps = n / MAP_FANOUT, entries = maps * MAP_FANOUT;
	unsigned reps = reps_for(cfg, n);
	uint64_t ops = ops_for(cfg, n), iters = round_batch(ops / MAP_FANOUT), iters2;
	double chain;
	uint64_t per_write = sfs_wbuf_entry_size(SFS_MAP_PREFIX + KLEN + ULEN,
						 (uint32_t)sizeof(struct sfs_map_ent) + vs) +
			     sfs_wbuf_entry_size(SFS_MAP_PREFIX + KLEN,
						 (uint32_t)sizeof(struct sfs_map_head));
	uint64_t arena = (entries + reps * ops) * per_write + MIB;
	uint64_t rdb_mem = rdb_bytes_for(entries + reps * ops, vs + ULEN);
	uint64_t raw_mem = pow2_slots(maps) * 8 + maps * (KLEN + 8 + MAP_FANOUT * (ULEN + pad8(vs)));
	uint64_t need = 2 * pow2_slots(entries + maps) * 8 + arena + raw_mem +
			(cfg->no_rocksdb ? 0 : rdb_mem) + maps * KLEN + ops * KLEN;
	struct rawmap raw;
	struct rdb rdb;
	struct sfsb sm;
	struct bs_run x;
	struct sfs_worker_opts o;
	struct sfs_wbuf_stats ws;
	char nb[24];
	int rc;

	memset(&raw, 0, sizeof(raw));
	memset(&rdb, 0, sizeof(rdb));
	memset(&sm, 0, sizeof(sm));
	if (maps < BATCH || bs_check_memory(need, n, vs, "map "))
		return 0;
	fprintf(stderr, "[map state: %s entries (%llu keys x %u), %u-byte values, %u reps]\n",
		bs_size_name(entries, nb, sizeof(nb)), (unsigned long long)maps, MAP_FANOUT, vs, reps);
	rc = bs_keys_make(maps);
	if (rc)
		goto out;
	rc = bs_rawmap_open(&raw, maps, vs);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb && (rc = bs_rdb_open(&rdb, rdb_mem, 0, vs)))
		goto out;
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = entries + maps + 1,
				      .buffer_bytes = arena };
	rc = bs_sfsb_open(&sm, "m", worker_seg_bytes(&o, 0), &o, SFS_STATE_MAP, vs, 0);
	if (rc)
		goto out;
	bs_sfsb_prefault(&sm, arena);
	/* Every write of the load and the puts ends in each map's buffer chain. */
	chain = (double)(entries + reps * ops) / (double)maps;
	iters2 = round_batch((uint64_t)((double)iters * MAP_FANOUT / chain));
	x = (struct bs_run){ .cfg = cfg, .n = n, .keys = entries, .vs = vs, .salt = vs,
			     .reps = reps, .chain = chain,
			     .count = { [N_OPS] = ops, [N_MAP_ITERS] = iters,
					[N_MAP_ITERS_CHAINED] = iters2 },
			     .impl = { &bs_sfs_impl, &bs_raw_impl, cfg->no_rocksdb ? NULL : &bs_rdb_impl },
			     .arg = { &sm, &raw, &rdb } };
	bs_progress("loading %s map entries into each structure", nb);
	rc = bs_run_step(&x, S_MAP_LOAD);
	if (rc)
		goto out;
	sfs_wbuf_stats(bs_sfsb_active(&sm), &ws);
	bs_bpe_add("map", vs, entries, (double)(ws.bytes_used + ws.slots * 8) / (double)entries,
		(double)ws.bytes_used / (double)entries, 0,
		(double)raw_mem / (double)entries,
		cfg->no_rocksdb ? 0
				: (double)bs_rdb_prop(&rdb, "rocksdb.cur-size-all-mem-tables") /
					  (double)entries);
	rc = bs_run_step(&x, S_MAP);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb)
		bs_rdb_check(&rdb, "map run");
out:
	bs_sfsb_close(&sm);
	if (rdb.o)
		bs_rdb_close(&rdb);
	bs_rawmap_close(&raw);
	return rc;
}

static unsigned seal_samples(const struct bs_cfg *cfg, uint64_t n)
{
	uint64_t s = (cfg->quick ? 3000000ull : 20000000ull) / n;
	uint64_t lo = cfg->quick ? 3 : 7;

	return (unsigned)(s < lo ? lo : s > 201 ? 201 : s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Counter adds, and (when @seal) barrier seal+swap latency with N entries in
 * the active buffer. */
int bs_phase_counter(const struct bs_cfg *cfg, uint64_t n, int seal)
{
	unsigned reps = reps_for(cfg, n), ns = seal ? seal_samples(cfg, n) : 0;
	uint64_t ops = ops_for(cfg, n), es = sfs_esize(8), arena = n * es + MIB;
	uint64_t store = seal ? store_bytes_for(n, 8, 3) : 0;
	uint64_t rdb_mem = rdb_bytes_for(n + reps * ops, 8);
	uint64_t idx = pow2_slots(n) * 8;
	uint64_t need = 2 * (idx + arena) + store + n * 24 +
			pow2_slots(n) * 8 + n * (KLEN + 8) + (cfg->no_rocksdb ? 0 : rdb_mem) +
			n * KLEN + ops * KLEN;
	uint64_t *lat = NULL;
	struct raw raw;
	struct rdb rdb;
	struct sfsb sc;
	struct bs_run x;
	struct sfs_worker_opts o;
	struct sfs_worker_stats ws;
	double bpe_total, bpe_arena;
	char nb[24];
	int rc;

	memset(&raw, 0, sizeof(raw));
	memset(&rdb, 0, sizeof(rdb));
	memset(&sc, 0, sizeof(sc));
	if (bs_check_memory(need, n, 8, "counter "))
		return 0;
	fprintf(stderr, "[counter state: %s keys, %u reps x %llu ops%s]\n",
		bs_size_name(n, nb, sizeof(nb)), reps, (unsigned long long)ops,
		seal ? ", then barrier latency" : "");
	rc = bs_keys_make(n);
	if (rc)
		goto out;
	rc = bs_raw_open(&raw, n, 8);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb && (rc = bs_rdb_open(&rdb, rdb_mem, 1, 8)))
		goto out;
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = n, .buffer_bytes = arena };
	rc = bs_sfsb_open(&sc, "c", worker_seg_bytes(&o, store), &o, SFS_STATE_COUNTER, 8, store);
	if (rc)
		goto out;
	bs_sfsb_prefault(&sc, arena);
	/* The first add of each key appends its cell: N live counters. */
	/* Seeds without the value size, as the counter rows always had. */
	x = (struct bs_run){ .cfg = cfg, .n = n, .keys = n, .vs = 8, .salt = 0, .reps = reps,
			     .count = { [N_OPS] = ops },
			     .impl = { &bs_sfs_impl, &bs_raw_impl, cfg->no_rocksdb ? NULL : &bs_rdb_impl },
			     .arg = { &sc, &raw, &rdb } };
	bs_progress("loading %s counters", nb);
	rc = bs_run_step(&x, S_COUNTER_LOAD);
	if (rc)
		goto out;
	bs_sfsb_bytes_per_entry(&sc, &bpe_total, &bpe_arena);
	bs_bpe_add("counter", 8, n, bpe_total, bpe_arena, 0,
		(double)(pow2_slots(n) * 8 + n * (KLEN + 8)) / (double)n,
		cfg->no_rocksdb ? 0
				: (double)bs_rdb_prop(&rdb, "rocksdb.cur-size-all-mem-tables") /
					  (double)n);
	rc = bs_run_step(&x, S_COUNTER);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb) {
		bs_rdb_check(&rdb, "counter run");
		bs_rdb_close(&rdb);
	}
	bs_raw_close(&raw);
	if (!seal || !(cfg->cases & C_SEAL))
		goto out;

	/* Seal + swap: N entries active, barrier timed, flusher drains. */
	lat = calloc(ns, sizeof(*lat));
	if (!lat) {
		rc = -ENOMEM;
		goto out;
	}
	bs_progress("barrier latency: %u samples at %s entries", ns, nb);
	for (unsigned s = 0; s < ns; s++) {
		uint64_t t0;

		if (s) {
			bs_sfsb_prefault(&sc, arena);
			rc = bs_sfs_impl.op[OP_ADD](&sc, bs_keys, n);
			if (rc) {
				bs_fail("refill", rc);
				goto out;
			}
		}
		sfs_worker_stats(sc.c, &ws);
		if (ws.active_entries != n) {
			rc = bs_fail("active buffer does not hold N entries", SFS_ECORRUPT);
			goto out;
		}
		t0 = sfs_now_ns();
		rc = sfs_barrier(sc.c, ++sc.barrier);
		lat[s] = sfs_now_ns() - t0;
		if (rc) {
			bs_fail("barrier", rc);
			goto out;
		}
		rc = bs_sfsb_drain(&sc);
		if (rc)
			goto out;
	}
	sfs_worker_stats(sc.c, &ws);
	qsort(lat, ns, sizeof(*lat), cmp_u64);
	if (bs_nseals < MAX_SIZES) {
		struct seal_result *sr = &bs_seals[bs_nseals++];
		unsigned p99 = (unsigned)ceil(0.99 * ns);

		sr->keys = n;
		sr->n = ns;
		sr->median = (ns % 2 ? lat[ns / 2] : (lat[ns / 2 - 1] + lat[ns / 2]) / 2) / 1e3;
		sr->p99 = lat[(p99 ? p99 : 1) - 1] / 1e3;
		sr->max = lat[ns - 1] / 1e3;
		sr->stalls = ws.stalls;
	}
out:
	free(lat);
	bs_sfsb_close(&sc);
	if (rdb.o)
		bs_rdb_close(&rdb);
	bs_raw_close(&raw);
	return rc;
}
