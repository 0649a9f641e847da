/*
 * rocksdb_direct.c — `rocksdb-direct`: the baseline Flink users run today.
 * Every state access is one RocksDB call in the worker process, configured
 * as Flink 2.3's RocksDB state backend configures it for one slot with
 * managed memory (EmbeddedRocksDBStateBackend, RocksDBResourceContainer,
 * RocksDBMemoryControllerUtils, RocksDBConfigurableOptions' defaults):
 *
 *   - memory: the slot's managed memory (`sfs run --rocksdb-memory-mb`,
 *     default RT_RDB_MEMORY_DEFAULT, rocksdb_direct.h) is one shared LRU
 *     block cache of (3 - 0.5) / 3 of it with a 0.1 high-priority pool, and
 *     one WriteBufferManager of 2 * 0.5 / 3 of it charged to that cache
 *     (baseline/rdb_mem.cc: the C API builds neither); index and filter
 *     blocks live in the cache with high priority, top-level index pinned;
 *   - options: leveled compaction (64 MiB target files, 256 MiB level
 *     base, no dynamic level sizes), Snappy on every level (LZ4 if this
 *     librocksdb lacks Snappy), 4 KiB blocks, no bloom filter, 64 MiB write
 *     buffers, two of them at most, 2 background jobs, max_open_files -1, no
 *     fsync, no stats dump; WAL off (Flink disables it: checkpoints give
 *     durability); the info log at header level (Flink 2.3 logs at info
 *     level: log volume only);
 *     SFS_ROCKSDB_WRITE_BUFFER_KB overrides the write buffer (tests);
 *   - instances: one per worker at <data_dir>/rocksdb-direct/w<worker>,
 *     destroyed at open (a fresh run: no restore), one column family per
 *     registered state ("s:" + state name, so no state can collide with
 *     RocksDB's "default").  Flink opens one instance per keyed operator of
 *     the slot; our worker runs every operator of the query chained in one
 *     thread, and its states share one instance.  The memory bound is the
 *     same (Flink's instances of a slot share the cache and the write
 *     buffer manager); what differs is that Flink would run 2 background
 *     jobs and a checkpoint flush per operator where this runs one of each.
 *   - checkpoints: Flink's incremental strategy (RocksIncrementalSnapshot-
 *     Strategy).  Synchronous phase, on the task thread (here the worker,
 *     rdb_snapshot): RocksDB's native checkpoint — flush the memtables,
 *     hard-link the live files into a local directory.  Asynchronous phase
 *     (Flink's upload of the files the last confirmed checkpoint lacks, by
 *     its async snapshot threads): the checkpointer process links the staged
 *     files into the checkpoint, new ones only, and references the rest
 *     (checkpointer/ckstore.c) — off the worker, as Flink's upload is off
 *     the task thread.
 *
 * Back-pressure: RocksDB bounds its memory by making writes wait (a write
 * delay, or a write stop while memtables wait for a flush or L0 waits for
 * compaction).  The worker's thread is then inside RocksDB and cannot beat;
 * a watcher thread (rdb_watch) sees the worker inside a write while RocksDB
 * reports a stop or a delay and says so through cfg->held, so `sfs run`'s
 * hang detector spares the worker and names the wait.
 *
 * Key layout (Flink's: key group, key, namespace, user key; Flink adds the
 * length of a variable-length key after it, here it leads the key):
 *
 *     kg (u16 BE) | klen (u16 BE) | key | ns (u64 BE) [| user key]
 *
 * The length makes P = kg|klen|key|ns a prefix of exactly one map's
 * entries: key "a" can never scan into key "ab"'s entries, whatever the
 * namespaces.  The key group leads, as in Flink, so a key-group range is a
 * key range.
 *
 * State kinds:
 *   value    put / get (pinned, then copied) / delete of key P.
 *   counter  RocksDB merge of an int64 (host order) with the state's
 *            operator (add, max, min): counter_add never reads.  One merge
 *            operator per column family; absent key = no value.
 *   map      one RocksDB entry per user key, P|ukey.  Iteration is a prefix
 *            scan bounded by iterate_upper_bound; a clear iterates and
 *            deletes in one write batch (Flink's RocksDBMapState.clear).
 *   list     one value per key, appended with a merge operator that
 *            concatenates elements (Flink's ListState: merge with a
 *            string-append operator).  Elements are framed u32 BE length |
 *            bytes, so binary elements need no delimiter.  An append is one
 *            blind merge, a get is one read, a clear is one delete.  The
 *            8-byte user key handed to the callback is the element's
 *            position (BE), which is its append order.
 *
 * Views: a read copies its value into a per-backend scratch arena (chunks
 * that are never moved or reallocated) and returns a view into it; the
 * arena is reset at quiescent() and idle(1).  Map iteration copies each entry there as
 * well, so callbacks get views valid until the next quiescent point, as
 * sfs.h promises (Flink copies too: it deserializes into objects).
 *
 * Errors: RocksDB's errptr is translated in one place, rdb_err().  The C
 * API of RocksDB 7.8 never clears errptr, so it is reset before every call.
 * Limits, kinds and key-group ownership are checked as sfs checks them,
 * with the same codes, so both backends refuse the same calls.
 *
 * Single-threaded like every backend instance (the watcher thread only
 * reads RocksDB's properties and the worker's write counter, and resumes
 * the fault point's pause); calls made from inside a map_iter / list_get
 * callback are safe (each scan owns its read options and upper bound).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <rocksdb/c.h>

#include "sfs.h"
#include "sfs_keygroup.h"
#include "baseline/rdb_mem.h"
#include "baseline/rocksdb_direct.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/rdb.h"
#include "runtime/backend.h"
#include "runtime/util.h"

#define RDB_WRITE_BUFFER (64ull << 20)	/* Flink's default write_buffer_size */
#define RDB_BACKGROUND_JOBS 2		/* state.backend.rocksdb.thread.num */
#define RDB_BLOCK_SIZE 4096		/* state.backend.rocksdb.block.blocksize */
#define RDB_WATCH_NS (100ull * 1000000)	/* the watcher's period: a heartbeat */
#define RDB_INFO_LOG_HEADER 5		/* rocksdb::InfoLogLevel::HEADER_LEVEL */
#define RDB_KEY_HEAD 4u			/* kg + klen */
#define RDB_NS_LEN 8u
#define RDB_KEY_BUF (SFS_KEY_MAX + RDB_KEY_HEAD + RDB_NS_LEN + 16)
#define RDB_CF_PREFIX "s:"

#define ARENA_CHUNK (256u << 10)	/* bytes per arena chunk */
#define ARENA_KEEP (4u << 20)		/* chunk bytes kept across quiescent points */

/* ---- the view arena ------------------------------------------------------------ */

struct rdb_chunk {
	struct rdb_chunk *next;
	size_t size, used;
	unsigned char data[] __attribute__((aligned(16)));
};

/* Bump allocation in chunks; a chunk is never moved, so a view into it
 * stays valid until rdb_arena_reset().  Allocation O(1), reset O(chunks). */
struct rdb_arena {
	struct rdb_chunk *head, *cur;
};

static void *rdb_arena_alloc(struct rdb_arena *a, size_t n)
{
	struct rdb_chunk *c = a->cur, *fresh;
	size_t size;

	n = n ? (n + 15) & ~(size_t)15 : 16;
	if (c && c->size - c->used >= n)
		goto take;
	/* After a reset the chunks after cur are empty: reuse the next one. */
	if (c && c->next && c->next->size >= n) {
		c = a->cur = c->next;
		goto take;
	}
	size = n > ARENA_CHUNK ? n : ARENA_CHUNK;
	fresh = malloc(sizeof(*fresh) + size);
	if (!fresh)
		return NULL;
	fresh->size = size;
	fresh->used = 0;
	if (c) {
		fresh->next = c->next;
		c->next = fresh;
	} else {
		fresh->next = a->head;
		a->head = fresh;
	}
	c = a->cur = fresh;
take:
	c->used += n;
	return c->data + c->used - n;
}

/* Every view handed out is released: empty the chunks, keeping up to
 * ARENA_KEEP bytes of standard-size chunks for the next batch. */
static void rdb_arena_reset(struct rdb_arena *a)
{
	struct rdb_chunk **pp = &a->head;
	size_t kept = 0;

	while (*pp) {
		struct rdb_chunk *c = *pp;

		if (c->size > ARENA_CHUNK || kept + c->size > ARENA_KEEP) {
			*pp = c->next;
			free(c);
			continue;
		}
		c->used = 0;
		kept += c->size;
		pp = &c->next;
	}
	a->cur = a->head;
}

static void rdb_arena_free(struct rdb_arena *a)
{
	while (a->head) {
		struct rdb_chunk *c = a->head;

		a->head = c->next;
		free(c);
	}
	a->cur = NULL;
}

/* ---- merge operators ----------------------------------------------------------- */

/* Counters fold with sfs_rdb_i64_merge() (common/rdb.h), as sfs's own
 * rocksdb target folds them.  */

/* List append: the value is the concatenation of framed elements, so
 * appending is concatenating (existing first, operands in order). */
static char *rdb_list_full(void *st, const char *key, size_t klen, const char *existing,
			   size_t elen, const char *const *ops, const size_t *oplen, int nops,
			   unsigned char *success, size_t *newlen)
{
	size_t total = existing ? elen : 0, at = 0;
	char *out;

	for (int i = 0; i < nops; i++)
		total += oplen[i];
	*success = 0;
	*newlen = 0;
	out = malloc(total ? total : 1);
	if (!out)
		return NULL;
	if (existing && elen) {
		memcpy(out, existing, elen);
		at = elen;
	}
	for (int i = 0; i < nops; i++) {
		memcpy(out + at, ops[i], oplen[i]);
		at += oplen[i];
	}
	*newlen = total;
	*success = 1;
	return out;
}

static char *rdb_list_partial(void *st, const char *key, size_t klen, const char *const *ops,
			      const size_t *oplen, int nops, unsigned char *success,
			      size_t *newlen)
{
	return rdb_list_full(st, key, klen, NULL, 0, ops, oplen, nops, success, newlen);
}

static void rdb_merge_free(void *st, const char *value, size_t len)
{
	free((void *)value);
}

static void rdb_mop_destroy(void *st)
{
}

static const char *rdb_list_name(void *st)
{
	return "sfs.list.append";
}

/* ---- the backend --------------------------------------------------------------- */

struct rdb_state {
	char rs_name[SFS_STATE_NAME_MAX];
	int rs_kind;                          /* SFS_STATE_* */
	unsigned rs_merge;                    /* counters: SFS_MERGE_*; else ADD */
	rocksdb_column_family_handle_t *rs_cf;
};

struct rdb_backend {
	struct rt_backend rb_base;            /* first: the table pointer */
	rocksdb_t *rb_db;
	rocksdb_options_t *rb_opts;           /* DB options, and the base of every CF's */
	rocksdb_cache_t *rb_cache;            /* the slot's block cache (managed memory) */
	rocksdb_block_based_table_options_t *rb_bbto;
	/* Writes into RocksDB: bumped before and after each write call by the
	 * worker's thread (relaxed stores: odd while inside one); read by the
	 * watcher. */
	uint64_t rb_calls;
	/* The watcher (rdb_watch): started at open when cfg->held is set;
	 * rb_stop under rb_mu ends it. */
	void (*rb_held)(void *arg, unsigned why);
	void *rb_held_arg;
	pthread_t rb_watch;
	pthread_mutex_t rb_mu;
	pthread_cond_t rb_cv;
	int rb_watching, rb_stop;
	uint64_t rb_pause_until;              /* fault point: background paused until (ns) */
	rocksdb_writeoptions_t *rb_wo;        /* WAL off */
	rocksdb_readoptions_t *rb_ro;         /* point reads */
	rocksdb_writebatch_t *rb_wb;          /* map clear */
	int rb_compression;                   /* rocksdb_*_compression in use */
	uint32_t rb_worker, rb_maxp, rb_kg_start, rb_kg_end;
	uint64_t rb_barrier;                  /* last barrier id */
	int rb_stage_ready;                   /* the snapshot staging parent exists */
	uint32_t rb_nstates;
	struct rdb_state rb_st[SFS_MAX_STATES];
	unsigned char *rb_kbuf;               /* one composed key (RDB_KEY_BUF) */
	unsigned char *rb_vbuf;               /* a framed list element */
	size_t rb_vcap;
	/* multiget scratch, grown to the largest batch seen */
	unsigned char *rb_mkeys;
	size_t rb_mkcap;
	const char **rb_mkp;
	size_t *rb_mkl;
	unsigned *rb_midx;
	rocksdb_pinnableslice_t **rb_mvals;
	char **rb_merrs;
	size_t rb_mcap;
	struct rdb_arena rb_arena;            /* views, until quiescent() */
	char rb_path[PATH_MAX];
};

static inline struct rdb_backend *R(struct rt_backend *b)
{
	return (struct rdb_backend *)b;
}

/* Around every call that may wait in RocksDB's back-pressure (writes, and
 * the checkpoint's flush): two relaxed stores, no syscall. */
static inline void rdb_enter(struct rdb_backend *r)
{
	rt_store_relaxed(&r->rb_calls, r->rb_calls + 1);
}

static inline void rdb_leave(struct rdb_backend *r)
{
	rt_store_relaxed(&r->rb_calls, r->rb_calls + 1);
}

/* RocksDB's errptr, through sfs's one adapter (common/rdb.h); its message
 * becomes the runtime's. */
static int rdb_err(const char *path, char **err, const char *op)
{
	return rt_sfs(sfs_rdb_err("rocksdb", path, err, op));
}

static inline void be16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static inline void be64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (56 - 8 * i));
}

/* kg | klen | key | ns | ukey into @out; returns the length. */
static size_t rdb_encode(unsigned char *out, uint32_t kg, const void *key, size_t klen, uint64_t ns,
			 const void *ukey, size_t ulen)
{
	be16(out, kg);
	be16(out + 2, (uint32_t)klen);
	if (klen)
		memcpy(out + RDB_KEY_HEAD, key, klen);
	be64(out + RDB_KEY_HEAD + klen, ns);
	if (ulen)
		memcpy(out + RDB_KEY_HEAD + klen + RDB_NS_LEN, ukey, ulen);
	return RDB_KEY_HEAD + klen + RDB_NS_LEN + ulen;
}

/* Is @st a state of @kind registered here?  Same checks and messages as
 * sfs's own. */
static int rdb_state_check(const struct rdb_backend *r, uint32_t st, int kind, const char *op)
{
	if (st >= r->rb_nstates)
		return rt_err(SFS_EUSAGE, "%s: state id %u is not registered by this worker", op,
			      st);
	if (r->rb_st[st].rs_kind != kind)
		return rt_err(SFS_EUSAGE, "%s: state '%s' is of another kind", op,
			      r->rb_st[st].rs_name);
	return 0;
}

/* Does the key fit (@extra: bytes sfs adds to it for this kind) and does
 * this worker own its key group?  Returns the key group or an error. */
static int rdb_key_check(const struct rdb_backend *r, const void *key, size_t klen, size_t extra,
			 const char *op)
{
	uint32_t kg;

	if (klen + extra > SFS_KEY_MAX)
		return rt_err(SFS_EUSAGE, "%s: key of %zu bytes, at most %u", op, klen + extra,
			      SFS_KEY_MAX);
	if (!key && klen)
		return rt_err(SFS_EUSAGE, "%s: NULL key of %zu bytes", op, klen);
	kg = sfs_key_group(key, klen, r->rb_maxp);
	if (kg < r->rb_kg_start || kg > r->rb_kg_end)
		return rt_err(SFS_EUSAGE, "%s: key group %u is not worker %u's (%u..%u)", op, kg,
			      r->rb_worker, r->rb_kg_start, r->rb_kg_end);
	return (int)kg;
}

/*
 * Check a call and build its RocksDB key in rb_kbuf: @st registered with
 * @kind, the key within limits (@extra as sfs counts it: a map's user key
 * and its 2-byte length), the key group owned.  Returns the key's length
 * or a negative code.
 */
static int rdb_key(struct rdb_backend *r, uint32_t st, int kind, uint64_t ns, const void *key,
		   size_t klen, const void *ukey, size_t ulen, size_t extra, const char *op)
{
	int kg = rdb_state_check(r, st, kind, op);

	if (kg == 0)
		kg = rdb_key_check(r, key, klen, extra, op);
	if (kg < 0)
		return kg;
	if (!ukey && ulen)
		return rt_err(SFS_EUSAGE, "%s: NULL user key of %zu bytes", op, ulen);
	return (int)rdb_encode(r->rb_kbuf, (uint32_t)kg, key, klen, ns, ukey, ulen);
}

static int rdb_value_check(size_t vlen, const void *val, const char *op)
{
	if (vlen > SFS_VALUE_MAX)
		return rt_err(SFS_EUSAGE, "%s: value of %zu bytes, at most %u", op, vlen,
			      SFS_VALUE_MAX);
	if (!val && vlen)
		return rt_err(SFS_EUSAGE, "%s: NULL value of %zu bytes", op, vlen);
	return 0;
}

/* Copy @len bytes into the arena: the view lives until quiescent(). */
static int rdb_view_copy(struct rdb_backend *r, const char *v, size_t len, struct sfs_view *out)
{
	void *p = rdb_arena_alloc(&r->rb_arena, len);

	if (!p)
		return rt_err(-ENOMEM, "rocksdb %s: no memory for a %zu-byte view", r->rb_path,
			      len);
	memcpy(p, v, len);
	out->data = p;
	out->len = (uint32_t)len;
	return 0;
}

/* One pinned point read of the key in rb_kbuf[0..@n), copied to a view:
 * 1 found, 0 absent, < 0 error. */
static int rdb_get_view(struct rdb_backend *r, uint32_t st, size_t n, struct sfs_view *out,
			const char *op)
{
	rocksdb_pinnableslice_t *s;
	const char *v;
	char *err = NULL;
	size_t len;
	int rc;

	out->data = NULL;
	out->len = 0;
	s = rocksdb_get_pinned_cf(r->rb_db, r->rb_ro, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
				  n, &err);
	if (err)
		return rdb_err(r->rb_path, &err, op);
	if (!s)
		return 0;
	v = rocksdb_pinnableslice_value(s, &len);
	rc = rdb_view_copy(r, v, len, out);
	rocksdb_pinnableslice_destroy(s);
	return rc ? rc : 1;
}

/* Flink's 64 MiB, unless SFS_ROCKSDB_WRITE_BUFFER_KB asks for a smaller
 * memtable (tests and benchmarks that must reach SST files: flushes,
 * compaction merges, compression, the block cache). */
static uint64_t rdb_write_buffer(void)
{
	const char *e = getenv("SFS_ROCKSDB_WRITE_BUFFER_KB");
	unsigned long long kb = e && *e ? strtoull(e, NULL, 10) : 0;

	return kb && kb < (1ull << 30) ? (uint64_t)kb << 10 : RDB_WRITE_BUFFER;
}

/* ---- back-pressure: the watcher ------------------------------------------------- */

void rt_rocksdb_direct_memory(uint64_t managed, struct rt_rdb_memory *m)
{
	m->managed = managed ? managed : RT_RDB_MEMORY_DEFAULT;
	m->write_buffer_ratio = RT_RDB_WRITE_BUFFER_RATIO;
	m->high_prio_ratio = RT_RDB_HIGH_PRIO_RATIO;
	/* RocksDBMemoryControllerUtils: the write buffer manager may overshoot
	 * its capacity by half before it flushes, so capacity * 1.5 = ratio *
	 * managed, and the cache holds the rest plus the capacity it is
	 * charged. */
	m->cache = (uint64_t)((3 - m->write_buffer_ratio) * (double)m->managed / 3);
	m->write_buffers = (uint64_t)(2 * (double)m->managed * m->write_buffer_ratio / 3);
	m->write_buffer = rdb_write_buffer();
}

static uint64_t rdb_prop(struct rdb_backend *r, const char *name)
{
	uint64_t v = 0;

	return rocksdb_property_int(r->rb_db, name, &v) == 0 ? v : 0;
}

/*
 * Every RDB_WATCH_NS: is the worker held by RocksDB's back-pressure?  It is
 * when it is writing (inside a write call now, or it made one since the
 * last look) while RocksDB stops or delays writes.  A worker that is not in
 * RocksDB, or a RocksDB that imposes no wait, is not held — so a worker
 * hung anywhere else is still a hang.  Reports every period while held, and
 * once when it is over.  Also ends the fault point's pause.  Cost: two property reads (a mutex of RocksDB's
 * each) per period, only while the worker writes.
 */
static void *rdb_watch(void *arg)
{
	struct rdb_backend *r = arg;
	uint64_t last = rt_load_relaxed(&r->rb_calls);
	unsigned said = RT_HELD_NONE;

	pthread_mutex_lock(&r->rb_mu);
	while (!r->rb_stop) {
		struct timespec ts;
		uint64_t calls, now;
		unsigned why = RT_HELD_NONE;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += RDB_WATCH_NS;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&r->rb_cv, &r->rb_mu, &ts);
		if (r->rb_stop)
			break;
		now = sfs_now_ns();
		if (r->rb_pause_until && now >= r->rb_pause_until) {
			r->rb_pause_until = 0;
			rt_rdb_pause_background(r->rb_db, 0);
			sfs_log("rocksdb %s: fault point: background work continues", r->rb_path);
		}
		calls = rt_load_relaxed(&r->rb_calls);
		if ((calls & 1) || calls != last) {
			if (rdb_prop(r, "rocksdb.is-write-stopped"))
				why = RT_HELD_RDB_STOP;
			else if (rdb_prop(r, "rocksdb.actual-delayed-write-rate"))
				why = RT_HELD_RDB_DELAY;
		}
		last = calls;
		/* Every period while held: the report carries its time, and one
		 * that stops coming (this process stopped or hung whole) is stale
		 * to the hang detector (RT_HELD_FRESH_MS). */
		if ((why != said || why != RT_HELD_NONE) && r->rb_held) {
			r->rb_held(r->rb_held_arg, why);
			said = why;
		}
	}
	pthread_mutex_unlock(&r->rb_mu);
	if (said != RT_HELD_NONE && r->rb_held)
		r->rb_held(r->rb_held_arg, RT_HELD_NONE);
	return NULL;
}

static void rdb_watch_stop(struct rdb_backend *r)
{
	if (!r->rb_watching)
		return;
	pthread_mutex_lock(&r->rb_mu);
	r->rb_stop = 1;
	pthread_cond_signal(&r->rb_cv);
	pthread_mutex_unlock(&r->rb_mu);
	pthread_join(r->rb_watch, NULL);
	pthread_cond_destroy(&r->rb_cv);
	pthread_mutex_destroy(&r->rb_mu);
	r->rb_watching = 0;
}

/* Start the watcher (when someone listens, or the fault point needs its
 * end); SFS_ROCKSDB_PAUSE_MS=N, a fault point for tests, pauses RocksDB's
 * background work for N ms from here: writes meet a real write stop once
 * the memtables are full. */
static int rdb_watch_start(struct rdb_backend *r)
{
	const char *e = getenv("SFS_ROCKSDB_PAUSE_MS");
	unsigned long long pause = e && *e ? strtoull(e, NULL, 10) : 0;
	int rc;

	if (pause) {
		if (rt_rdb_pause_background(r->rb_db, 1))
			return rt_err(-EIO, "rocksdb %s: fault point: cannot pause background work",
				      r->rb_path);
		r->rb_pause_until = sfs_now_ns() + pause * 1000000ull;
		sfs_log("rocksdb %s: fault point: background work paused for %llu ms", r->rb_path,
		       pause);
	}
	if (!r->rb_held && !pause)
		return 0;
	pthread_mutex_init(&r->rb_mu, NULL);
	pthread_cond_init(&r->rb_cv, NULL);
	if ((rc = pthread_create(&r->rb_watch, NULL, rdb_watch, r))) {
		pthread_cond_destroy(&r->rb_cv);
		pthread_mutex_destroy(&r->rb_mu);
		return rt_err(-rc, "rocksdb %s: watcher thread: %s", r->rb_path, strerror(rc));
	}
	r->rb_watching = 1;
	return 0;
}

/* ---- open / close / register ---------------------------------------------------- */

static void rdb_watch_stop(struct rdb_backend *r);

static void rdb_close_parts(struct rdb_backend *r)
{
	rdb_watch_stop(r);
	for (uint32_t i = 0; i < r->rb_nstates; i++)
		rocksdb_column_family_handle_destroy(r->rb_st[i].rs_cf);
	if (r->rb_db)
		rocksdb_close(r->rb_db);
	if (r->rb_wb)
		rocksdb_writebatch_destroy(r->rb_wb);
	if (r->rb_ro)
		rocksdb_readoptions_destroy(r->rb_ro);
	if (r->rb_wo)
		rocksdb_writeoptions_destroy(r->rb_wo);
	if (r->rb_opts)
		rocksdb_options_destroy(r->rb_opts);
	if (r->rb_bbto)
		rocksdb_block_based_options_destroy(r->rb_bbto);
	if (r->rb_cache)
		rocksdb_cache_destroy(r->rb_cache);
	rdb_arena_free(&r->rb_arena);
	free(r->rb_kbuf);
	free(r->rb_vbuf);
	free(r->rb_mkeys);
	free(r->rb_mkp);
	free(r->rb_mkl);
	free(r->rb_midx);
	free(r->rb_mvals);
	free(r->rb_merrs);
}

static void rdb_close(struct rt_backend *b)
{
	struct rdb_backend *r = R(b);

	if (!r)
		return;
	rdb_close_parts(r);
	free(r);
}

/* A state's column family options: the base plus its merge operator (the
 * CF takes a copy of the options and a reference to the operator, which
 * the options own from here on).  A state's CF is named
 * RDB_CF_PREFIX <kind><merge>:<name>, so a restored instance can be opened
 * with every family's operator before any state registers. */
static rocksdb_options_t *rdb_cf_options(struct rdb_backend *r, int kind, unsigned merge)
{
	rocksdb_options_t *o = rocksdb_options_create_copy(r->rb_opts);

	if (kind == SFS_STATE_COUNTER)
		rocksdb_options_set_merge_operator(o, sfs_rdb_i64_merge(merge));
	else if (kind == SFS_STATE_LIST)
		rocksdb_options_set_merge_operator(
			o, rocksdb_mergeoperator_create(NULL, rdb_mop_destroy, rdb_list_full,
							rdb_list_partial, rdb_merge_free,
							rdb_list_name));
	return o;
}

/* Open the instance a restore put at rb_path (checkpoint files), with
 * every column family it has; its states are registered already. */
static int rdb_open_restored(struct rdb_backend *r, int compression)
{
	rocksdb_options_t *opts[SFS_MAX_STATES + 1];
	rocksdb_column_family_handle_t *h[SFS_MAX_STATES + 1];
	char **names;
	size_t ncf = 0;
	char *err = NULL;
	int rc = 0;

	rocksdb_options_set_compression(r->rb_opts, compression);
	names = rocksdb_list_column_families(r->rb_opts, r->rb_path, &ncf, &err);
	if ((rc = rdb_err(r->rb_path, &err, "list column families of the restored instance")))
		return rc;
	if (ncf > SFS_MAX_STATES + 1) {
		rocksdb_list_column_families_destroy(names, ncf);
		return rt_err(SFS_ECORRUPT, "rocksdb %s: %zu column families", r->rb_path, ncf);
	}
	for (size_t i = 0; i < ncf; i++) {
		int kind = 0;
		unsigned merge = 0;
		char *colon;

		if (strncmp(names[i], RDB_CF_PREFIX, strlen(RDB_CF_PREFIX)) != 0) {
			opts[i] = rocksdb_options_create_copy(r->rb_opts);	/* default */
			continue;
		}
		colon = strchr(names[i] + strlen(RDB_CF_PREFIX), ':');
		if (!colon || sscanf(names[i] + strlen(RDB_CF_PREFIX), "%1d%1u", &kind, &merge) != 2 ||
		    kind < SFS_STATE_VALUE || kind > SFS_STATE_LIST || merge >= SFS_MERGE_NOPS) {
			for (size_t j = 0; j < i; j++)
				rocksdb_options_destroy(opts[j]);
			rc = rt_err(SFS_ECORRUPT, "rocksdb %s: column family '%s' is not a state",
				    r->rb_path, names[i]);
			rocksdb_list_column_families_destroy(names, ncf);
			return rc;
		}
		opts[i] = rdb_cf_options(r, kind, merge);
	}
	r->rb_db = rocksdb_open_column_families(r->rb_opts, r->rb_path, (int)ncf,
						 (const char *const *)names,
						 (const rocksdb_options_t *const *)opts, h, &err);
	rc = rdb_err(r->rb_path, &err, "open the restored instance");
	for (size_t i = 0; i < ncf; i++) {
		rocksdb_options_destroy(opts[i]);
		if (rc || !r->rb_db)
			continue;
		if (strncmp(names[i], RDB_CF_PREFIX, strlen(RDB_CF_PREFIX)) != 0) {
			rocksdb_column_family_handle_destroy(h[i]);	/* the DB keeps it */
			continue;
		}
		{
			struct rdb_state *st = &r->rb_st[r->rb_nstates++];

			sscanf(names[i] + strlen(RDB_CF_PREFIX), "%1d%1u", &st->rs_kind, &st->rs_merge);
			snprintf(st->rs_name, sizeof(st->rs_name), "%s",
				 strchr(names[i] + strlen(RDB_CF_PREFIX), ':') + 1);
			st->rs_cf = h[i];
		}
	}
	rocksdb_list_column_families_destroy(names, ncf);
	if (!rc && !r->rb_db)
		rc = rt_err(-EIO, "rocksdb %s: open: no handle", r->rb_path);
	if (!rc)
		r->rb_compression = compression;
	return rc;
}

/* Destroy what a previous run left at rb_path and open a fresh database
 * compressed with @compression. */
static int rdb_open_fresh(struct rdb_backend *r, int compression)
{
	char *err = NULL;
	int rc;

	rocksdb_options_set_compression(r->rb_opts, compression);
	/* DestroyDB takes the directory's LOCK first: it refuses (and we
	 * return SFS_ERUNNING) while a live instance still uses it. */
	rocksdb_destroy_db(r->rb_opts, r->rb_path, &err);
	rc = rdb_err(r->rb_path, &err, "destroy previous run");
	if (rc)
		return rc;
	err = NULL;
	r->rb_db = rocksdb_open(r->rb_opts, r->rb_path, &err);
	if (err || !r->rb_db) {
		rc = rdb_err(r->rb_path, &err, "open");
		return rc ? rc : rt_err(-EIO, "rocksdb %s: open: no handle", r->rb_path);
	}
	r->rb_compression = compression;
	return 0;
}

static int rdb_open(const struct rt_backend_cfg *cfg, struct rt_backend **out)
{
	uint32_t par = cfg->workers ? cfg->workers : 1;
	uint32_t maxp = cfg->max_parallelism ? cfg->max_parallelism : SFS_MAX_PARALLELISM_DEFAULT;
	struct rdb_backend *r;
	int rc;

	if (cfg->worker >= par || maxp < par || maxp > 32768)
		return rt_err(SFS_EUSAGE,
			      "worker %u of parallelism %u, max parallelism %u: out of range",
			      cfg->worker, par, maxp);
	if (!cfg->data_dir || !*cfg->data_dir)
		return rt_err(SFS_EUSAGE, "rocksdb-direct backend of worker %u: no data directory",
			      cfg->worker);
	r = calloc(1, sizeof(*r));
	if (!r)
		return rt_err(-ENOMEM, "rocksdb-direct backend of worker %u: no memory",
			      cfg->worker);
	r->rb_base.ops = &rt_backend_rocksdb_direct;
	r->rb_worker = cfg->worker;
	r->rb_maxp = maxp;
	r->rb_kg_start = sfs_kg_range_start(cfg->worker, par, maxp);
	r->rb_kg_end = sfs_kg_range_end(cfg->worker, par, maxp);
	if (snprintf(r->rb_path, sizeof(r->rb_path), "%s/rocksdb-direct/w%u", cfg->data_dir,
		     cfg->worker) >= (int)sizeof(r->rb_path)) {
		rc = rt_err(SFS_EUSAGE, "rocksdb directory under '%s': path too long",
			    cfg->data_dir);
		goto fail;
	}
	r->rb_kbuf = malloc(RDB_KEY_BUF);
	if (!r->rb_kbuf) {
		rc = rt_err(-ENOMEM, "rocksdb %s: no memory", r->rb_path);
		goto fail;
	}
	/* DestroyDB needs the directory to take its LOCK in. */
	rc = rt_sfs(sfs_mkdirs(r->rb_path, 0700));   /* data: private */
	if (rc)
		goto fail;

	r->rb_opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(r->rb_opts, 1);
	rocksdb_options_set_write_buffer_size(r->rb_opts, rdb_write_buffer());
	rocksdb_options_set_info_log_level(r->rb_opts, RDB_INFO_LOG_HEADER);
	rocksdb_options_set_stats_dump_period_sec(r->rb_opts, 0);
	/* Flink's defaults (RocksDBConfigurableOptions, RocksDBResourceContainer);
	 * leveled compaction, 64 MiB target files, 256 MiB level base and two
	 * write buffers are RocksDB's defaults too, said here to be sure. */
	rocksdb_options_set_compaction_style(r->rb_opts, rocksdb_level_compaction);
	rocksdb_options_set_level_compaction_dynamic_level_bytes(r->rb_opts, 0);
	rocksdb_options_set_target_file_size_base(r->rb_opts, 64ull << 20);
	rocksdb_options_set_max_bytes_for_level_base(r->rb_opts, 256ull << 20);
	rocksdb_options_set_max_write_buffer_number(r->rb_opts, 2);
	rocksdb_options_set_min_write_buffer_number_to_merge(r->rb_opts, 1);
	rocksdb_options_set_max_background_jobs(r->rb_opts, RDB_BACKGROUND_JOBS);
	rocksdb_options_set_max_open_files(r->rb_opts, -1);
	rocksdb_options_set_use_fsync(r->rb_opts, 0);
	/* Managed memory: one cache and one write buffer manager for the slot,
	 * every column family's table reading through the cache. */
	{
		struct rt_rdb_memory m;

		rt_rocksdb_direct_memory(cfg->rdb_memory_bytes, &m);
		r->rb_cache = rt_rdb_lru_cache(m.cache, m.high_prio_ratio);
		r->rb_bbto = rocksdb_block_based_options_create();
		if (!r->rb_cache || !r->rb_bbto ||
		    rt_rdb_set_write_buffer_manager(r->rb_opts, m.write_buffers, r->rb_cache)) {
			rc = rt_err(-ENOMEM, "rocksdb %s: no memory for the block cache", r->rb_path);
			goto fail;
		}
		rocksdb_block_based_options_set_block_cache(r->rb_bbto, r->rb_cache);
		rocksdb_block_based_options_set_block_size(r->rb_bbto, RDB_BLOCK_SIZE);
		rocksdb_block_based_options_set_cache_index_and_filter_blocks(r->rb_bbto, 1);
		rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(
			r->rb_bbto, 1);
		rocksdb_block_based_options_set_pin_top_level_index_and_filter(r->rb_bbto, 1);
		rocksdb_options_set_block_based_table_factory(r->rb_opts, r->rb_bbto);
	}
	/* Open validates every column family's compression: a librocksdb
	 * built without Snappy refuses it ("not linked with the binary"). */
	{
		int (*op)(struct rdb_backend *, int) = cfg->restored ? rdb_open_restored :
								      rdb_open_fresh;

		rc = op(r, rocksdb_snappy_compression);
		if (rc == SFS_EUSAGE && strstr(rt_last_error(), "ompression"))
			rc = op(r, rocksdb_lz4_compression);
	}
	if (rc)
		goto fail;
	r->rb_wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(r->rb_wo, 1);
	r->rb_ro = rocksdb_readoptions_create();
	r->rb_wb = rocksdb_writebatch_create();
	r->rb_held = cfg->held;
	r->rb_held_arg = cfg->held_arg;
	if ((rc = rdb_watch_start(r)))
		goto fail;
	*out = &r->rb_base;
	return 0;
fail:
	rdb_close(&r->rb_base);
	return rc;
}

/* A state is a column family; registering a name again finds it (same kind
 * and operator, or SFS_EUSAGE as sfs answers). */
static int rdb_reg(struct rt_backend *b, const char *name, int kind, unsigned merge, uint32_t *id)
{
	struct rdb_backend *r = R(b);
	char cfname[sizeof(RDB_CF_PREFIX) + 8 + SFS_STATE_NAME_MAX];
	rocksdb_options_t *o;
	struct rdb_state *s;
	char *err = NULL;
	int rc;

	kind &= ~RT_STATE_NO_TTL;	/* the baseline has no TTL (the supervisor refuses one) */
	if (!name || !*name || strlen(name) >= SFS_STATE_NAME_MAX)
		return rt_err(SFS_EUSAGE, "state name '%s': 1..%d characters", name ? name : "",
			      SFS_STATE_NAME_MAX - 1);
	if (kind < SFS_STATE_VALUE || kind > SFS_STATE_LIST)
		return rt_err(SFS_EUSAGE,
			      "state '%s': kind %d is not one of value, counter, map, list", name,
			      kind);
	if (kind != SFS_STATE_COUNTER)
		merge = SFS_MERGE_ADD;
	else if (merge >= SFS_MERGE_NOPS)
		/* A family's name carries its operator as one digit: built-ins
		 * only in this baseline (the sfs backends take user operators). */
		return rt_err(SFS_EUSAGE, "state '%s': merge operator %u: the rocksdb-direct "
			      "baseline folds only add, max, min", name, merge);
	for (uint32_t i = 0; i < r->rb_nstates; i++) {
		s = &r->rb_st[i];
		if (strcmp(s->rs_name, name) != 0)
			continue;
		if (s->rs_kind != kind || s->rs_merge != merge)
			return rt_err(SFS_EUSAGE,
				      "state '%s' is registered as kind %d merge %u, not kind %d "
				      "merge %u",
				      name, s->rs_kind, s->rs_merge, kind, merge);
		*id = i;
		return 0;
	}
	if (r->rb_nstates == SFS_MAX_STATES)
		return rt_err(SFS_EFULL, "rocksdb %s: state registry full (%d states)", r->rb_path,
			      SFS_MAX_STATES);

	o = rdb_cf_options(r, kind, merge);
	snprintf(cfname, sizeof(cfname), RDB_CF_PREFIX "%d%u:%s", kind, merge, name);
	s = &r->rb_st[r->rb_nstates];
	s->rs_cf = rocksdb_create_column_family(r->rb_db, o, cfname, &err);
	rocksdb_options_destroy(o);
	rc = rdb_err(r->rb_path, &err, "create column family");
	if (rc || !s->rs_cf)
		return rc ? rc : rt_err(-EIO, "rocksdb %s: column family %s: no handle",
					r->rb_path, cfname);
	snprintf(s->rs_name, sizeof(s->rs_name), "%s", name);
	s->rs_kind = kind;
	s->rs_merge = merge;
	*id = r->rb_nstates++;
	return 0;
}

/* ---- value and counter state -------------------------------------------------- */

static int rdb_value_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen, struct sfs_view *out)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_VALUE, ns, key, klen, NULL, 0, 0, "get");

	if (n < 0)
		return n;
	return rdb_get_view(r, st, (size_t)n, out, "get");
}

static int rdb_value_put(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen, const void *val, size_t vlen)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_VALUE, ns, key, klen, NULL, 0, 0, "put");
	int rc = n < 0 ? n : rdb_value_check(vlen, val, "put");
	char *err = NULL;

	if (rc)
		return rc;
	rdb_enter(r);
	rocksdb_put_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
		       (size_t)n, val, vlen, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "put");
}

static int rdb_value_delete(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			    size_t klen)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_VALUE, ns, key, klen, NULL, 0, 0, "delete");
	char *err = NULL;

	if (n < 0)
		return n;
	rdb_enter(r);
	rocksdb_delete_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
			  (size_t)n, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "delete");
}

/* Make room for @n keys of @bytes in the multiget scratch. */
static int rdb_mg_reserve(struct rdb_backend *r, size_t n, size_t bytes)
{
	if (bytes > r->rb_mkcap) {
		unsigned char *k = realloc(r->rb_mkeys, bytes);

		if (!k)
			return -ENOMEM;
		r->rb_mkeys = k;
		r->rb_mkcap = bytes;
	}
	if (n > r->rb_mcap) {
		const char **kp = realloc(r->rb_mkp, n * sizeof(*kp));
		size_t *kl = kp ? realloc(r->rb_mkl, n * sizeof(*kl)) : NULL;
		unsigned *ix = kl ? realloc(r->rb_midx, n * sizeof(*ix)) : NULL;
		rocksdb_pinnableslice_t **v = ix ? realloc(r->rb_mvals, n * sizeof(*v)) : NULL;
		char **e = v ? realloc(r->rb_merrs, n * sizeof(*e)) : NULL;

		/* Each realloc that succeeded owns the block now: keep it. */
		if (kp)
			r->rb_mkp = kp;
		if (kl)
			r->rb_mkl = kl;
		if (ix)
			r->rb_midx = ix;
		if (v)
			r->rb_mvals = v;
		if (!e)
			return -ENOMEM;
		r->rb_merrs = e;
		r->rb_mcap = n;
	}
	return 0;
}

/*
 * A batch of value reads in one RocksDB MultiGet.  results[i] as value_get;
 * a key refused (too long, not this worker's) fails alone.  Returns 0, or
 * the first error of the batch.  Cost: one batched MultiGet plus a copy
 * per value found.
 */
static int rdb_multiget(struct rt_backend *b, uint32_t st, const struct sfs_key *keys, unsigned n,
			struct sfs_view *views, int *results)
{
	struct rdb_backend *r = R(b);
	size_t bytes = 0, at = 0;
	unsigned m = 0;
	int first = 0, rc = rdb_state_check(r, st, SFS_STATE_VALUE, "multiget");

	for (unsigned i = 0; i < n; i++) {
		views[i].data = NULL;
		views[i].len = 0;
		results[i] = rc;
		bytes += RDB_KEY_HEAD + RDB_NS_LEN + keys[i].klen;
	}
	if (rc || n == 0)
		return rc;
	rc = rdb_mg_reserve(r, n, bytes);
	if (rc)
		return rt_err(rc, "rocksdb %s: multiget of %u keys: no memory", r->rb_path, n);
	for (unsigned i = 0; i < n; i++) {
		int kg = rdb_key_check(r, keys[i].key, keys[i].klen, 0, "multiget");

		if (kg < 0) {
			results[i] = kg;
			first = first ? first : kg;
			continue;
		}
		r->rb_mkp[m] = (const char *)r->rb_mkeys + at;
		r->rb_mkl[m] = rdb_encode(r->rb_mkeys + at, (uint32_t)kg, keys[i].key, keys[i].klen,
					  keys[i].ns, NULL, 0);
		at += r->rb_mkl[m];
		r->rb_midx[m++] = i;
	}
	if (m)
		rocksdb_batched_multi_get_cf(r->rb_db, r->rb_ro, r->rb_st[st].rs_cf, m, r->rb_mkp,
					     r->rb_mkl, r->rb_mvals, r->rb_merrs, 0);
	for (unsigned j = 0; j < m; j++) {
		unsigned i = r->rb_midx[j];

		if (r->rb_merrs[j]) {
			results[i] = rdb_err(r->rb_path, &r->rb_merrs[j], "multiget");
		} else if (r->rb_mvals[j]) {
			size_t len;
			const char *v = rocksdb_pinnableslice_value(r->rb_mvals[j], &len);

			results[i] = rdb_view_copy(r, v, len, &views[i]);
			results[i] = results[i] ? results[i] : 1;
			rocksdb_pinnableslice_destroy(r->rb_mvals[j]);
		} else {
			results[i] = 0;
		}
		if (results[i] < 0 && !first)
			first = results[i];
	}
	return first;
}

static int rdb_counter_add(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, int64_t delta)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_COUNTER, ns, key, klen, NULL, 0, 0, "counter add");
	char *err = NULL;
	char d[8];

	if (n < 0)
		return n;
	memcpy(d, &delta, 8);
	rdb_enter(r);
	rocksdb_merge_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
			 (size_t)n, d, 8, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "counter add");
}

/* 1 and the folded value, or 0 (and *out = 0) when absent.  Reading folds
 * the merge operands RocksDB has not compacted yet. */
static int rdb_counter_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, int64_t *out)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_COUNTER, ns, key, klen, NULL, 0, 0, "counter get");
	rocksdb_pinnableslice_t *s;
	const char *v;
	char *err = NULL;
	size_t len;

	if (n < 0)
		return n;
	*out = 0;
	s = rocksdb_get_pinned_cf(r->rb_db, r->rb_ro, r->rb_st[st].rs_cf,
				  (const char *)r->rb_kbuf, (size_t)n, &err);
	if (err)
		return rdb_err(r->rb_path, &err, "counter get");
	if (!s)
		return 0;
	v = rocksdb_pinnableslice_value(s, &len);
	if (len == 8)
		memcpy(out, v, 8);
	rocksdb_pinnableslice_destroy(s);
	if (len != 8)
		return rt_err(SFS_ECORRUPT, "rocksdb %s: counter of state '%s': %zu bytes, not 8",
			      r->rb_path, r->rb_st[st].rs_name, len);
	return 1;
}

/* ---- map state ------------------------------------------------------------------ */

static int rdb_map_put(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key, size_t klen,
		       const void *ukey, size_t ulen, const void *val, size_t vlen)
{
	struct rdb_backend *r = R(b);
	int n = ulen ? rdb_key(r, st, SFS_STATE_MAP, ns, key, klen, ukey, ulen, ulen + 2, "map put")
		     : rt_err(SFS_EUSAGE, "map put: empty user key");
	int rc = n < 0 ? n : rdb_value_check(vlen, val, "map put");
	char *err = NULL;

	if (rc)
		return rc;
	rdb_enter(r);
	rocksdb_put_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
		       (size_t)n, val, vlen, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "map put");
}

static int rdb_map_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key, size_t klen,
		       const void *ukey, size_t ulen, struct sfs_view *out)
{
	struct rdb_backend *r = R(b);
	int n = ulen ? rdb_key(r, st, SFS_STATE_MAP, ns, key, klen, ukey, ulen, ulen + 2, "map get")
		     : rt_err(SFS_EUSAGE, "map get: empty user key");

	if (n < 0)
		return n;
	return rdb_get_view(r, st, (size_t)n, out, "map get");
}

static int rdb_map_remove(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			  size_t klen, const void *ukey, size_t ulen)
{
	struct rdb_backend *r = R(b);
	int n = ulen ? rdb_key(r, st, SFS_STATE_MAP, ns, key, klen, ukey, ulen, ulen + 2, "map remove")
		     : rt_err(SFS_EUSAGE, "map remove: empty user key");
	char *err = NULL;

	if (n < 0)
		return n;
	rdb_enter(r);
	rocksdb_delete_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
			  (size_t)n, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "map remove");
}

/*
 * Call @each for every entry whose key starts with the @plen-byte prefix in
 * rb_kbuf, in key order, until it returns non-zero (which is returned).  The
 * iterator is bounded by iterate_upper_bound = the prefix's successor, so it
 * never reads past the map.  The bound and the read options belong to this
 * scan: @each may call the backend again, even scan another map.  Cost: an iterator (a seek over memtable and levels)
 * plus a step per entry.
 */
static int rdb_scan(struct rdb_backend *r, uint32_t st, size_t plen,
		    int (*each)(struct rdb_backend *r, uint32_t st, size_t plen, const char *k,
				size_t kl, const char *v, size_t vl, void *arg),
		    void *arg, const char *op)
{
	unsigned char small[256];
	unsigned char *ub = plen <= sizeof(small) ? small : malloc(plen);
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	size_t ublen = plen;
	char *err = NULL;
	int rc = 0, e;

	if (!ub)
		return rt_err(-ENOMEM, "rocksdb %s: %s: no memory", r->rb_path, op);
	/* The smallest key greater than every key with this prefix: the
	 * prefix with its last byte below 0xff incremented.  One exists: the
	 * key group's high byte is below 0x80. */
	memcpy(ub, r->rb_kbuf, plen);
	while (ublen && ub[ublen - 1] == 0xff)
		ublen--;
	ub[ublen - 1]++;
	ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)ub, ublen);
	it = rocksdb_create_iterator_cf(r->rb_db, ro, r->rb_st[st].rs_cf);
	for (rocksdb_iter_seek(it, (const char *)r->rb_kbuf, plen); rc == 0 && rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const char *v = rocksdb_iter_value(it, &vl);

		rc = each(r, st, plen, k, kl, v, vl, arg);
	}
	rocksdb_iter_get_error(it, &err);
	e = rdb_err(r->rb_path, &err, op);
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	if (ub != small)
		free(ub);
	return e ? e : rc;
}

struct rdb_iter_arg {
	sfs_entry_fn fn;
	void *arg;
};

/* Copy the entry (user key, value) into the arena and hand it over. */
static int rdb_iter_each(struct rdb_backend *r, uint32_t st, size_t plen, const char *k, size_t kl,
			 const char *v, size_t vl, void *arg)
{
	struct rdb_iter_arg *a = arg;
	size_t ul = kl - plen;
	char *p = rdb_arena_alloc(&r->rb_arena, ul + vl);

	if (!p)
		return rt_err(-ENOMEM, "rocksdb %s: map iterate: no memory", r->rb_path);
	memcpy(p, k + plen, ul);
	memcpy(p + ul, v, vl);
	return a->fn(a->arg, p, (uint32_t)ul, p + ul, (uint32_t)vl);
}

/* @fn per entry, in user-key byte order; @fn returning non-zero stops the
 * iteration and is returned. */
static int rdb_map_iter(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			size_t klen, sfs_entry_fn fn, void *arg)
{
	struct rdb_backend *r = R(b);
	struct rdb_iter_arg a = { fn, arg };
	int n = rdb_key(r, st, SFS_STATE_MAP, ns, key, klen, NULL, 0, 2, "map iterate");

	if (n < 0)
		return n;
	return rdb_scan(r, st, (size_t)n, rdb_iter_each, &a, "map iterate");
}

static int rdb_clear_each(struct rdb_backend *r, uint32_t st, size_t plen, const char *k,
			  size_t kl, const char *v, size_t vl, void *arg)
{
	rocksdb_writebatch_delete_cf(r->rb_wb, r->rb_st[st].rs_cf, k, kl);
	return 0;
}

/* As Flink's RocksDBMapState.clear: scan the map and delete every entry in
 * one write batch.  O(entries). */
static int rdb_map_clear(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			 size_t klen)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_MAP, ns, key, klen, NULL, 0, 2, "map clear");
	char *err = NULL;
	int rc;

	if (n < 0)
		return n;
	rocksdb_writebatch_clear(r->rb_wb);
	rc = rdb_scan(r, st, (size_t)n, rdb_clear_each, NULL, "map clear");
	if (rc == 0 && rocksdb_writebatch_count(r->rb_wb)) {
		rdb_enter(r);
		rocksdb_write(r->rb_db, r->rb_wo, r->rb_wb, &err);
		rdb_leave(r);
		rc = rdb_err(r->rb_path, &err, "map clear");
	}
	rocksdb_writebatch_clear(r->rb_wb);
	return rc;
}

/* ---- list state ----------------------------------------------------------------- */

#define RDB_FRAME 4u	/* u32 BE element length */

/* One blind merge of the framed element: no read. */
static int rdb_list_append(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			   size_t klen, const void *val, size_t vlen)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_LIST, ns, key, klen, NULL, 0, 8 + 2, "list append");
	int rc = n < 0 ? n : rdb_value_check(vlen, val, "list append");
	char *err = NULL;

	if (rc)
		return rc;
	if (RDB_FRAME + vlen > r->rb_vcap) {
		size_t cap = RDB_FRAME + vlen < 4096 ? 4096 : RDB_FRAME + vlen;
		unsigned char *p = realloc(r->rb_vbuf, cap);

		if (!p)
			return rt_err(-ENOMEM, "rocksdb %s: list append of %zu bytes: no memory",
				      r->rb_path, vlen);
		r->rb_vbuf = p;
		r->rb_vcap = cap;
	}
	r->rb_vbuf[0] = (unsigned char)(vlen >> 24);
	r->rb_vbuf[1] = (unsigned char)(vlen >> 16);
	r->rb_vbuf[2] = (unsigned char)(vlen >> 8);
	r->rb_vbuf[3] = (unsigned char)vlen;
	if (vlen)
		memcpy(r->rb_vbuf + RDB_FRAME, val, vlen);
	rdb_enter(r);
	rocksdb_merge_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
			 (size_t)n, (const char *)r->rb_vbuf,
			 RDB_FRAME + vlen, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "list append");
}

static uint32_t rdb_frame_len(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One read of the list (RocksDB folds pending appends), copied to the
 * arena with an 8-byte position per element; then @fn per element in
 * append order.  @fn returning non-zero stops and is returned. */
static int rdb_list_get(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			size_t klen, sfs_entry_fn fn, void *arg)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_LIST, ns, key, klen, NULL, 0, 2, "list get");
	struct sfs_view v;
	const unsigned char *p, *end;
	unsigned char *pos;
	size_t count = 0;
	int rc;

	if (n < 0)
		return n;
	rc = rdb_get_view(r, st, (size_t)n, &v, "list get");
	if (rc <= 0)
		return rc;
	p = v.data;
	end = p + v.len;
	while (p < end) {
		if ((size_t)(end - p) < RDB_FRAME || rdb_frame_len(p) > (size_t)(end - p) - RDB_FRAME)
			return rt_err(SFS_ECORRUPT,
				      "rocksdb %s: list of state '%s': element %zu overruns the "
				      "%u-byte value",
				      r->rb_path, r->rb_st[st].rs_name, count, v.len);
		p += RDB_FRAME + rdb_frame_len(p);
		count++;
	}
	pos = rdb_arena_alloc(&r->rb_arena, count * 8);
	if (!pos)
		return rt_err(-ENOMEM, "rocksdb %s: list get: no memory", r->rb_path);
	p = v.data;
	for (size_t i = 0; i < count; i++) {
		uint32_t len = rdb_frame_len(p);

		be64(pos + 8 * i, i);
		rc = fn(arg, pos + 8 * i, 8, p + RDB_FRAME, len);
		if (rc)
			return rc;
		p += RDB_FRAME + len;
	}
	return 0;
}

/* One delete: the list is one value (Flink's ListState.clear). */
static int rdb_list_clear(struct rt_backend *b, uint32_t st, uint64_t ns, const void *key,
			  size_t klen)
{
	struct rdb_backend *r = R(b);
	int n = rdb_key(r, st, SFS_STATE_LIST, ns, key, klen, NULL, 0, 2, "list clear");
	char *err = NULL;

	if (n < 0)
		return n;
	rdb_enter(r);
	rocksdb_delete_cf(r->rb_db, r->rb_wo, r->rb_st[st].rs_cf, (const char *)r->rb_kbuf,
			  (size_t)n, &err);
	rdb_leave(r);
	return rdb_err(r->rb_path, &err, "list clear");
}

/* ---- barriers and quiescent points ---------------------------------------------- */

/* Flink's RocksDB backend does nothing synchronous at a barrier (its
 * snapshot flushes and uploads asynchronously; with the WAL off there is
 * nothing to sync): only the ids are checked, as sfs checks them. */
static int rdb_barrier(struct rt_backend *b, uint64_t id)
{
	struct rdb_backend *r = R(b);

	if (id <= r->rb_barrier)
		return rt_err(SFS_EUSAGE, "worker %u: barrier %llu after barrier %llu",
			      r->rb_worker, (unsigned long long)id,
			      (unsigned long long)r->rb_barrier);
	r->rb_barrier = id;
	return 0;
}

/* ---- rescale ---------------------------------------------------------------- */

/* Open @path read-only with every column family (their merge operators
 * set, so merged values read whole). */
static int rebuild_open_src(struct rdb_backend *o, const char *path, rocksdb_t **db,
			    char ***names, size_t *ncf, rocksdb_column_family_handle_t **h)
{
	rocksdb_options_t *opts[SFS_MAX_STATES + 1];
	char *err = NULL;
	int rc;

	*names = rocksdb_list_column_families(o->rb_opts, path, ncf, &err);
	if ((rc = rdb_err(path, &err, "list column families")))
		return rc;
	if (*ncf > SFS_MAX_STATES + 1)
		return rt_err(SFS_ECORRUPT, "rocksdb %s: %zu column families", path, *ncf);
	for (size_t i = 0; i < *ncf; i++) {
		int kind = SFS_STATE_VALUE;
		unsigned merge = 0;

		if (strncmp((*names)[i], RDB_CF_PREFIX, strlen(RDB_CF_PREFIX)) == 0)
			sscanf((*names)[i] + strlen(RDB_CF_PREFIX), "%1d%1u", &kind, &merge);
		if (merge >= SFS_MERGE_NOPS)
			merge = 0;
		opts[i] = rdb_cf_options(o, kind, merge);
	}
	*db = rocksdb_open_for_read_only_column_families(o->rb_opts, path, (int)*ncf,
							 (const char *const *)*names,
							 (const rocksdb_options_t *const *)opts, h, 0,
							 &err);
	for (size_t i = 0; i < *ncf; i++)
		rocksdb_options_destroy(opts[i]);
	rc = rdb_err(path, &err, "open read-only");
	return rc ? rc : *db ? 0 : rt_err(-EIO, "rocksdb %s: open: no handle", path);
}

int rt_rocksdb_direct_rebuild(const char *const *src, unsigned nsrc, const char *dest,
			      uint32_t kg_lo, uint32_t kg_hi)
{
	struct rdb_backend o;
	rocksdb_t *out = NULL;
	char *err = NULL;
	int rc;

	memset(&o, 0, sizeof(o));
	snprintf(o.rb_path, sizeof(o.rb_path), "%s", dest);
	o.rb_opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(o.rb_opts, 1);
	rocksdb_options_set_write_buffer_size(o.rb_opts, rdb_write_buffer());
	rocksdb_options_set_info_log_level(o.rb_opts, RDB_INFO_LOG_HEADER);
	o.rb_wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(o.rb_wo, 1);
	if ((rc = rt_sfs(sfs_mkdirs(dest, 0700))))
		goto out;
	rc = rdb_open_fresh(&o, rocksdb_snappy_compression);
	if (rc == SFS_EUSAGE && strstr(rt_last_error(), "ompression"))
		rc = rdb_open_fresh(&o, rocksdb_lz4_compression);
	if (rc)
		goto out;
	out = o.rb_db;
	for (unsigned i = 0; i < nsrc && !rc; i++) {
		rocksdb_column_family_handle_t *h[SFS_MAX_STATES + 1];
		char **names = NULL;
		size_t ncf = 0;
		rocksdb_t *in = NULL;

		rc = rebuild_open_src(&o, src[i], &in, &names, &ncf, h);
		for (size_t c = 0; c < ncf && !rc && in; c++) {
			rocksdb_column_family_handle_t *dst = NULL;
			uint32_t st;

			if (strncmp(names[c], RDB_CF_PREFIX, strlen(RDB_CF_PREFIX)) != 0)
				continue;
			for (st = 0; st < o.rb_nstates; st++)
				if (strcmp(o.rb_st[st].rs_name, names[c]) == 0)
					break;
			if (st == o.rb_nstates) {
				int kind = SFS_STATE_VALUE;
				unsigned merge = 0;
				rocksdb_options_t *co;

				sscanf(names[c] + strlen(RDB_CF_PREFIX), "%1d%1u", &kind, &merge);
				co = rdb_cf_options(&o, kind, merge < SFS_MERGE_NOPS ? merge : 0);
				err = NULL;
				o.rb_st[st].rs_cf = rocksdb_create_column_family(out, co, names[c], &err);
				rocksdb_options_destroy(co);
				if ((rc = rdb_err(dest, &err, "create column family")))
					break;
				snprintf(o.rb_st[st].rs_name, sizeof(o.rb_st[st].rs_name), "%s", names[c]);
				o.rb_nstates++;
			}
			dst = o.rb_st[st].rs_cf;
			rc = rt_sfs(sfs_rdb_copy_kg_range(in, h[c], out, dst, o.rb_wo, kg_lo, kg_hi,
							  "rocksdb", dest));
		}
		for (size_t c = 0; in && c < ncf; c++)
			rocksdb_column_family_handle_destroy(h[c]);
		if (in)
			rocksdb_close(in);
		if (names)
			rocksdb_list_column_families_destroy(names, ncf);
	}
	if (!rc) {
		/* WAL off: only a flush makes the rebuilt instance durable */
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
		rocksdb_flushoptions_set_wait(fo, 1);
		for (uint32_t st = 0; st < o.rb_nstates && !rc; st++) {
			err = NULL;
			rocksdb_flush_cf(out, fo, o.rb_st[st].rs_cf, &err);
			rc = rdb_err(dest, &err, "flush");
		}
		rocksdb_flushoptions_destroy(fo);
	}
out:
	rdb_close_parts(&o);
	return rc;
}

/*
 * Flink's synchronous snapshot phase (RocksDBSnapshotStrategyBase.
 * syncPrepareResources -> takeDBNativeCheckpoint), on the worker's thread
 * as on Flink's task thread: RocksDB's checkpoint into @dir — the memtables
 * flushed (always: with the WAL off nothing else makes them durable), the
 * live SST files hard-linked, MANIFEST and the rest copied.  Cost: a flush
 * of up to the write buffers' bytes, a link per live file.  What Flink does
 * next asynchronously — upload the SST files the last confirmed checkpoint
 * lacks, refer to the others, upload the private files — is the
 * checkpointer's, off this thread (sfs_task_staged hands it @dir).
 */
static int rdb_snapshot(struct rt_backend *b, uint64_t id, const char *dir)
{
	struct rdb_backend *r = R(b);
	int rc;

	(void)id;
	if (!r->rb_stage_ready) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%s", dir);
		*strrchr(parent, '/') = '\0';
		if ((rc = rt_sfs(sfs_mkdirs(parent, 0700))))
			return rc;
		r->rb_stage_ready = 1;
	}
	if ((rc = rt_sfs(sfs_rmtree(dir))))	/* a crashed attempt's leftovers */
		return rc;
	/* The flush may wait behind RocksDB's stall like a write. */
	rdb_enter(r);
	rc = rt_sfs(sfs_rdb_checkpoint(r->rb_db, dir, SFS_STAGE_SHARED, "rocksdb", r->rb_path));
	rdb_leave(r);
	return rc;
}

static void rdb_quiescent(struct rt_backend *b)
{
	rdb_arena_reset(&R(b)->rb_arena);
}

/* Going to sleep releases the views: give the arena back now. */
static void rdb_idle(struct rt_backend *b, int idle)
{
	if (idle)
		rdb_arena_reset(&R(b)->rb_arena);
}

static uint64_t rdb_stall_ns(const struct rt_backend *b)
{
	return 0;
}

const struct rt_backend_ops rt_backend_rocksdb_direct = {
	.name = "rocksdb-direct",
	.flags = RT_BACKEND_UNBATCHED,	/* Flink's: one state access per record */
	.open = rdb_open,
	.close = rdb_close,
	.reg = rdb_reg,
	.value_get = rdb_value_get,
	.value_put = rdb_value_put,
	.value_delete = rdb_value_delete,
	.multiget = rdb_multiget,
	.counter_add = rdb_counter_add,
	.counter_get = rdb_counter_get,
	.map_put = rdb_map_put,
	.map_get = rdb_map_get,
	.map_remove = rdb_map_remove,
	.map_clear = rdb_map_clear,
	.map_iter = rdb_map_iter,
	.list_append = rdb_list_append,
	.list_get = rdb_list_get,
	.list_clear = rdb_list_clear,
	.barrier = rdb_barrier,
	.quiescent = rdb_quiescent,
	.idle = rdb_idle,
	.stall_ns = rdb_stall_ns,
	.snapshot = rdb_snapshot,
};
