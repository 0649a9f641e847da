/*
 * sfs.h — the public API of sfs, a multi-process shared-memory keyed-state
 * store for stream processors.
 *
 * Rules of the whole API (stated once, as RocksDB's c.h and LMDB do):
 *  - Handles are opaque; every object has a create/destroy (or attach/detach)
 *    pair.  Nothing here exposes a struct layout.
 *  - Every call returns int: 0 on success or a negative code: -errno for
 *    system errors, or one of the SFS_E* library codes below (a reserved
 *    range far from errno).  sfs_strerror() names a code; sfs_last_error()
 *    returns this thread's human message for the last failure, naming the
 *    file or object and what was expected.  It never names another call's
 *    failure: every call but the hot state calls below (reads, writes and
 *    iterations of keyed state and of queries, sfs_multiget,
 *    sfs_counter_multiget,
 *    sfs_ctx_key_group: a store per call would cost them) clears it when it
 *    starts and sets it when it fails; those hot calls set it on each
 *    failure they detect (a flush target's failure: the target's message).
 *    So read it right after the failed call, before the next sfs call.
 *  - Every placing call takes a NUMA node; SFS_NODE_ANY lets sfs choose.
 *
 * Caveats (as LMDB's header opens with):
 *  - A process may die at any instruction.  Its slot in the process table is
 *    found dead by pid + start time (immune to pid reuse) and never blocks
 *    a grace period; it is reclaimed by the next attach that needs a slot.
 *  - Do not fork() while attached and use the handle in the child: the child
 *    is another process and must sfs_attach() itself.
 *  - A handle is not thread-safe: use one per thread that reads state.
 *
 * Two more public headers, with the same rules: sfs_keygroup.h (key groups
 * without a context: header-only) and sfs_join.h (join batches).
 * And sfs_output.h: exactly-once output and source positions over the
 * checkpoint lifecycle below (docs/output.md).
 */
#ifndef SFS_H
#define SFS_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SFS_VERSION_MAJOR 0
#define SFS_VERSION_MINOR 1

#define SFS_NODE_ANY (-1)

/* Library error codes: a reserved negative range (LMDB-style). */
enum {
	SFS_E_BASE = -30800,
	SFS_EMAGIC = SFS_E_BASE,   /* not an sfs segment / file */
	SFS_EVERSION,              /* format version differs */
	SFS_ELAYOUT,               /* layout fingerprint differs */
	SFS_EFOREIGN,              /* belongs to another job or uid */
	SFS_EFULL,                 /* table, region or arena full */
	SFS_ESTALE,                /* owner is dead: stale object */
	SFS_ERUNNING,              /* already running (live owner) */
	SFS_EUSAGE,                /* bad argument */
	SFS_ECORRUPT,              /* checksum or structure wrong */
	SFS_ETIMEDOUT,             /* bounded wait ran out */
	SFS_E_LAST
};

/* Maximum length of a job name (without the terminating NUL). */
#define SFS_JOB_NAME_MAX 47

typedef struct sfs_handle sfs_handle_t;

/* Attach flags. */
#define SFS_ATTACH_OBSERVER 0x1u  /* take no process-table slot (sfs stat) */

/*
 * sfs_attach - map the segment of job @job on NUMA node @node and register
 * this process in its process table as an external reader (role "client").
 * @node: the segment's node (SFS_NODE_ANY: node 0's segment).
 * Refuses a segment of another uid, another magic, format version or layout
 * fingerprint, naming the field that differs.  Cost: open + mmap, once.
 */
int sfs_attach(const char *job, int node, unsigned flags, sfs_handle_t **out);

/* sfs_detach - leave the process table (slot freed) and unmap. */
int sfs_detach(sfs_handle_t *h);

/*
 * sfs_region_find - the region named @name of the segment @h is attached
 * to: *@ptr its first byte in this process's mapping (valid until
 * sfs_detach), *@size its bytes (@size may be NULL).  Regions are what a
 * group's processes share beside keyed state (a program's own structs,
 * made by the process that created the segment); a region is never moved
 * or freed while the segment lives.  -ENOENT when there is none of that
 * name, SFS_EUSAGE for a NULL argument.  Cost: a scan of the segment's
 * region directory (tens of entries): once, at start-up.  What the region
 * holds, its layout and its synchronisation are its owner's: sfs neither
 * reads nor checks it.
 */
int sfs_region_find(sfs_handle_t *h, const char *name, void **ptr, uint64_t *size);

/*
 * Quiescent-state reporting for an attached reader (cross-process QSBR).
 * A view of shared state obtained while online stays valid until the next
 * sfs_quiescent() or sfs_offline().  All three are plain stores in shared
 * memory: no syscall.
 */
void sfs_online(sfs_handle_t *h);
void sfs_quiescent(sfs_handle_t *h);
void sfs_offline(sfs_handle_t *h);

/* ------------------------------------------------------------------------
 * Keyed state (used by worker processes)
 *
 * A worker opens its context once; it owns the key-group range Flink
 * assigns to its index.  Every write goes to its active write buffer in
 * shared memory; sfs_barrier() seals it in O(1) and hands it to the node's
 * compactor.  Reads look in the active buffer, the sealed buffers newest
 * first, the value cache and the flushed store, in that order.
 *
 * Views returned by reads are zero-copy and stay valid until the caller's
 * next quiescent point: sfs_ctx_quiescent(), sfs_barrier() or a write that
 * returned SFS_EFULL-and-retried internally (any write may spill).  Copy
 * what must live longer.  A context is single-threaded.
 * ------------------------------------------------------------------------ */

typedef struct sfs_ctx sfs_ctx_t;

enum sfs_state_kind {
	SFS_STATE_VALUE = 1,    /* get / put / delete */
	SFS_STATE_COUNTER = 2,  /* int64 blind merges (add, max or min), get */
	SFS_STATE_MAP = 3,      /* key -> {user key -> value}: put, get, remove, iterate, clear */
	SFS_STATE_LIST = 4,     /* append, read all (in append order), clear */
};

#define SFS_KEY_MAX   (64u * 1024 - 4)     /* user key bytes (4 go to kg + state id) */
#define SFS_VALUE_MAX (16u * 1024 * 1024)  /* value bytes */

/* A job registers at most SFS_MAX_STATES states; a state's name is 1 to
 * SFS_STATE_NAME_MAX - 1 bytes. */
#define SFS_MAX_STATES 256
#define SFS_STATE_NAME_MAX 48

#define SFS_WORKER_NO_CACHE 0x1u  /* no value cache (baselines, tests) */
/* The key-group range is kg_first..kg_last (inclusive), not worker's share
 * of parallelism: for an engine that assigns ranges itself (Flink's
 * subtasks, many operators in one group), @worker is then only the slot
 * the region is found by. */
#define SFS_WORKER_KG_RANGE 0x2u
/* Key groups are the caller's: each state call is in the key group the
 * last sfs_ctx_key_group() set (Flink's murmur of hashCode, which the key
 * bytes cannot give), not sfs's hash of the key.  Queryable state
 * (sfs_query_*) routes by sfs's hash and does not find such keys. */
#define SFS_WORKER_CALLER_KG 0x4u
/* A host group's slot (sfs run --host) opened for a new task — one that
 * restores from files or starts empty, possibly with another key-group
 * range: before sfs_worker_open returns, the slot's store is emptied in
 * place (every state's entries, the last task's buffers and cached reads,
 * its pin), waiting for the compactor at most stall_timeout_ns (0: no
 * limit).  O(the target's metadata), not O(state).  Refused outside a host
 * group; -ENOTSUP when its flush target cannot; after any other error the
 * slot's state is undefined: do not reuse it.  Barrier ids go on above the
 * slot's last (sfs_worker_last_barrier). */
#define SFS_WORKER_RESET 0x8u

struct sfs_worker_opts {
	uint32_t parallelism;      /* workers of the job (0: 1) */
	uint32_t max_parallelism;  /* key groups (0: 128) */
	uint32_t buffers;          /* write buffers, >= 2 (0: 4) */
	uint64_t buffer_bytes;     /* bytes per buffer (0: 16 MiB) */
	uint64_t buffer_keys;      /* keys per buffer (0: buffer_bytes / 64) */
	uint64_t cache_bytes;      /* value cache of value state (0: 8 MiB) */
	uint32_t flags;            /* SFS_WORKER_* */
	uint64_t stall_timeout_ns; /* back-pressure wait bound (0: forever) */
	uint32_t kg_first, kg_last; /* SFS_WORKER_KG_RANGE: the range, < max_parallelism */
};

struct sfs_view {
	const void *data;   /* NULL when absent */
	uint32_t len;
};

/*
 * sfs_worker_open - attach to @job's segment (node @node) as worker
 * @worker and find or create its region.  A region that exists belongs to a
 * previous incarnation: its active buffer is dropped (rollback to the last
 * barrier), its sealed buffers stay for the compactor.  One context holds a
 * worker's region at a time: SFS_ERUNNING (naming the process) while
 * another live context, of any process, has it open; a holder that died
 * without sfs_worker_close is taken over.
 * In a group `sfs run` started (it records its workers and key groups:
 * SFS_WORKERS, sfs_task_info) a worker opened without SFS_WORKER_KG_RANGE
 * must give that parallelism and max parallelism (0 stands for the
 * defaults, 1 and 128): SFS_EUSAGE otherwise, before anything is created,
 * so an open with the right ones still succeeds.
 */
int sfs_worker_open(const char *job, int node, uint32_t worker, const struct sfs_worker_opts *o,
		    sfs_ctx_t **out);

/* Bytes of the segment region sfs_worker_open() creates for @o (NULL: the
 * defaults) — what a process creating the segment must leave per worker;
 * 0 if @o would be refused (buffers out of range, a buffer too small). */
uint64_t sfs_worker_region_bytes(const struct sfs_worker_opts *o);
int sfs_worker_close(sfs_ctx_t *c);

/* Find or register a named state; SFS_EUSAGE if it exists with another kind. */
int sfs_state_register(sfs_ctx_t *c, const char *name, int kind, uint32_t *id);

/*
 * Merge operators of counter state, by index: never a function pointer in
 * shared memory.  Indexes below SFS_MERGE_NOPS are built in (compiled into
 * every process); SFS_MERGE_USER .. SFS_MERGE_MAX_OPS-1 are the user's,
 * defined by sfs_merge_define() in every process that folds them.
 */
enum sfs_merge_op {
	SFS_MERGE_ADD = 0,      /* the default of SFS_STATE_COUNTER */
	SFS_MERGE_MAX = 1,
	SFS_MERGE_MIN = 2,
	SFS_MERGE_NOPS,         /* built-ins end here */
	SFS_MERGE_USER = 16,    /* first user index */
	SFS_MERGE_MAX_OPS = 64  /* user indexes end here */
};

/* A user operator's name: 1..SFS_MERGE_NAME_MAX-1 of [A-Za-z0-9_-]. */
#define SFS_MERGE_NAME_MAX 32

/* Folds one delta into an accumulator.  Must be associative and
 * commutative, and pure: deltas are folded in any grouping and order —
 * inside a buffer cell, across buffers, over the store's base, by the
 * compactor, by RocksDB's merges and by every reader. */
typedef int64_t (*sfs_merge_fn)(int64_t acc, int64_t delta);

/*
 * sfs_merge_define - define user operator @op as @fn, named @name, in this
 * process only.  Call it at start-up, before any sfs_worker_open() (and in
 * every process of the group: `sfs run --merge-lib PATH` loads a shared
 * object whose `int sfs_merge_init(void)` calls it in the supervisor and in
 * each child).  The segment records the operator's name with each state
 * that uses it; a process that has not defined it, or defined another name
 * at that index, is refused where it registers, flushes or restores the
 * state (SFS_EUSAGE), never folds it as something else.  Idempotent for the
 * same name and function; SFS_EUSAGE for a built-in or out-of-range index,
 * a bad name, or a second definition that differs.  Not thread-safe.
 */
int sfs_merge_define(unsigned op, const char *name, sfs_merge_fn fn);

/*
 * sfs_merge_fold - fold @delta into @acc with operator @op, as sfs folds a
 * counter's merges: for a program that folds deltas of its own (a
 * baseline's RocksDB merge operator, a reader combining two workers'
 * counts).  @op is a built-in or defined in this process; an undefined
 * one aborts the process (a fold with the wrong function would corrupt
 * state silently).  Cost: a switch for a built-in, an indirect call for a
 * user operator; no syscall.
 */
int64_t sfs_merge_fold(unsigned op, int64_t acc, int64_t delta);

/* A counter state whose merges fold with operator @op (built-in or defined). */
int sfs_state_register_merge(sfs_ctx_t *c, const char *name, unsigned op, uint32_t *id);

/*
 * State time-to-live (Flink's StateTtlConfig, where it applies).  Every
 * entry of a TTL state — a value, a counter, each map entry, each list
 * element — carries its own expiry: the time of its last write (create,
 * put, add, append; and read, with SFS_TTL_REFRESH_ON_READ) plus @ttl_ms.
 * An expired entry is never returned: reads see it as absent (a map
 * iteration and a list read skip it) from the moment the state's clock
 * reaches its expiry.  Expired entries are dropped by maintenance, never
 * by the worker: when the compactor flushes a buffer, and in the flush
 * target's own merges (the table target's merges and minimal round,
 * RocksDB's compactions through a compaction filter).
 *
 * Clocks: processing time by default (CLOCK_REALTIME in ms, read by the
 * worker at each quiescent point and barrier: no syscall, the vDSO), or
 * with SFS_TTL_EVENT_TIME the program's event time, set with
 * sfs_ctx_set_time (its watermark: deterministic, replayable).  The event
 * clock never goes back; after a restore it starts at 0, so a program must
 * set it to what it was at the checkpoint (saved in its sfs_task_sealed
 * bytes) before its first read, or reads may see entries maintenance has
 * since dropped.
 *
 * Costs: 8 bytes per entry; a compare per read; a TTL counter's add is a
 * read and a put (not a blind merge: a delta folded over a base that
 * expired in between would bring it back).  Registering an existing state
 * with another @ttl_ms changes it (as Flink allows on restore); turning a
 * TTL on or off, or changing its clock, is refused (SFS_EUSAGE): the
 * stored entries' format differs.
 */
#define SFS_TTL_REFRESH_ON_READ 0x1u  /* a read that finds an entry refreshes it
				       * (Flink's OnReadAndWrite): value, counter, map get */
#define SFS_TTL_EVENT_TIME      0x2u  /* the event clock (sfs_ctx_set_time) */

struct sfs_ttl {
	uint64_t ttl_ms;   /* > 0 */
	uint32_t flags;    /* SFS_TTL_* */
	uint32_t merge;    /* a counter's operator (enum sfs_merge_op; 0: add) */
};

/* Find or register state @name of @kind with time to live @ttl. */
int sfs_state_register_ttl(sfs_ctx_t *c, const char *name, int kind, const struct sfs_ttl *ttl,
			   uint32_t *id);

/* Move the event clock of SFS_TTL_EVENT_TIME states to @event_ms (a value
 * below the clock's is ignored: it never goes back).  A plain store. */
void sfs_ctx_set_time(sfs_ctx_t *c, uint64_t event_ms);

/* The key group of a key: sfs_key_group() of sfs_keygroup.h over this
 * context's max parallelism (sfs's hash, with SFS_WORKER_CALLER_KG too).
 * It says nothing of ownership: this worker owns the key when
 * sfs_kg_owner(kg, parallelism, max parallelism) is its index (with
 * SFS_WORKER_KG_RANGE: when kg is in kg_first..kg_last); its state calls
 * refuse any other key (SFS_EUSAGE).  Pure: a hash and a modulo. */
uint32_t sfs_key_group_of(const sfs_ctx_t *c, const void *key, size_t klen);

/* SFS_WORKER_CALLER_KG: the key group of the state calls that follow (a
 * plain store).  SFS_EUSAGE, and the key group unchanged, when this worker
 * does not own @kg or its context was opened without the flag. */
int sfs_ctx_key_group(sfs_ctx_t *c, uint32_t kg);

int sfs_value_put(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		  const void *val, size_t vlen);
int sfs_value_delete(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen);
/* 1 and a view when present, 0 when absent, or an error. */
int sfs_value_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		  struct sfs_view *out);

/* A blind merge of @delta with the state's operator (add by default). */
int sfs_counter_add(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    int64_t delta);
/* 1 and the value when present, 0 (and *out = 0) when absent. */
int sfs_counter_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    int64_t *out);

/*
 * Map state.  A map key's entries live under its key (and namespace); user
 * keys and values are byte strings.  Reads see every layer: buffers newest
 * first, then the flushed store; a clear shadows everything older.
 * sfs_map_iter calls @fn once per live entry (order unspecified) with views
 * valid until the next quiescent point; @fn returning non-zero stops it.
 * The user key counts against SFS_KEY_MAX together with the key, and is at
 * least one byte (an empty one is refused: SFS_EUSAGE).  An entry callback
 * may make point reads and writes, but not start another iteration.
 */
typedef int (*sfs_entry_fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
			    uint32_t vlen);

int sfs_map_put(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		const void *ukey, size_t ulen, const void *val, size_t vlen);
int sfs_map_remove(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		   const void *ukey, size_t ulen);
int sfs_map_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		const void *ukey, size_t ulen, struct sfs_view *out);
int sfs_map_clear(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen);
int sfs_map_iter(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		 sfs_entry_fn fn, void *arg);

/* List state: @fn gets the elements in append order (ukey: an 8-byte
 * big-endian sequence number). */
int sfs_list_append(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    const void *val, size_t vlen);
int sfs_list_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		 sfs_entry_fn fn, void *arg);
int sfs_list_clear(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen);

/* A batch of point reads of one state: results[i] as sfs_value_get. */
struct sfs_key {
	uint64_t ns;
	const void *key;
	uint32_t klen;
};
int sfs_multiget(sfs_ctx_t *c, uint32_t state, const struct sfs_key *keys, unsigned n,
		 struct sfs_view *views, int *results);
/* A batch of reads of one counter state: results[i] and vals[i] as
 * sfs_counter_get's return and *out.  What it saves over n calls: the
 * keys the buffers leave open are asked of the flushed store together
 * (one probe of the table target's files for the batch).  Returns 0, or
 * SFS_EUSAGE when some results[i] is an error. */
int sfs_counter_multiget(sfs_ctx_t *c, uint32_t state, const struct sfs_key *keys, unsigned n,
			 int64_t *vals, int *results);

/*
 * sfs_barrier - seal the active buffer for checkpoint @id and swap in a
 * free one: O(1), no copy, no allocation; queues a flush request to the
 * compactor.  When no buffer is free it waits (offline, on a futex) until
 * the compactor frees one, counting the stall: back-pressure, never loss.
 * Also a quiescent point and a heartbeat (sfs stat).  SFS_ETIMEDOUT if
 * stall_timeout_ns passed.
 * Ids: above the worker's last barrier (sfs_worker_last_barrier).  In a
 * group whose checkpointer requests checkpoints (`sfs run
 * --checkpoint-interval MS`, MS > 0) also at most the newest one requested
 * (sfs_task_requested): the checkpointer stages and completes only those,
 * so a seal of any other id could never be part of a checkpoint (see "The
 * checkpoint lifecycle").  Outside such a group (no checkpoints, a segment
 * of the program's own, a host group whose engine numbers its own
 * checkpoints) any increasing ids.  Refused with SFS_EUSAGE, nothing
 * sealed.
 */
int sfs_barrier(sfs_ctx_t *c, uint64_t id);

/* Report a quiescent state (between input batches): plain stores. */
void sfs_ctx_quiescent(sfs_ctx_t *c);

/* Before an idle sleep: no grace period waits on an offline worker (it
 * holds no view).  sfs_ctx_online() before the next state call.  Plain
 * stores. */
void sfs_ctx_offline(sfs_ctx_t *c);
void sfs_ctx_online(sfs_ctx_t *c);

struct sfs_worker_stats {
	uint64_t seq, barriers, spills, stalls, stall_ns;
	uint64_t flushed_seq, flushes;
	uint32_t buffers_free, buffers_sealed;
	uint64_t active_entries, active_bytes;
	uint64_t cache_hits, cache_neg_hits, cache_misses, cache_entries, cache_bytes;
};
void sfs_worker_stats(const sfs_ctx_t *c, struct sfs_worker_stats *st);

/* ------------------------------------------------------------------------
 * The checkpoint lifecycle (used by worker processes)
 *
 * A group started with checkpoints (`sfs run --checkpoint-interval MS`)
 * takes them with Flink's aligned-barrier protocol; a task is one worker's
 * membership in it.  Every --checkpoint-interval the checkpointer requests
 * checkpoint N (sfs_task_requested() turns N: source workers inject a
 * barrier into their streams at their next record boundary).  Each worker,
 * when barrier N has reached it on every input, seals its keyed state with
 * sfs_barrier(ctx, N) and then calls sfs_task_sealed(task, N, bytes, len)
 * with up to SFS_TASK_BYTES_MAX opaque bytes of its own (its source
 * positions: Kafka offsets, file positions; sfs stores them, never reads
 * them).  Once every worker has sealed N and its state is flushed and
 * staged, the checkpoint is written durably and sfs_task_completed() turns
 * N: a two-phase sink commits what it staged up to N then, and only then.
 * One checkpoint is in flight at a time; N+1 is requested after N
 * completed.  A restarted group starts from the newest complete checkpoint
 * (sfs_task_info() says how it started; sfs_task_restored() hands back the
 * bytes each old worker saved; the keyed state of the worker's key-group
 * range is in place before sfs_worker_open() returns).
 *
 * Costs: sfs_task_requested, sfs_task_completed and sfs_task_info are plain
 * loads from shared memory; sfs_task_sealed is one copy of the bytes, two
 * loads (the keyed state's barrier) and two stores; none of them makes a
 * syscall or takes a lock.
 * sfs_task_wait_completed sleeps on a futex (a syscall: when idle only).
 * ------------------------------------------------------------------------ */

typedef struct sfs_task sfs_task_t;

#define SFS_TASK_BYTES_MAX 4096u

enum sfs_start_kind {
	SFS_START_FRESH = 0,     /* no checkpoint: state starts empty */
	SFS_START_RESTORED = 1,  /* from a checkpoint of as many workers */
	SFS_START_RESCALED = 2,  /* from a checkpoint of another number of workers */
};

struct sfs_task_info {
	int start;                 /* enum sfs_start_kind */
	uint32_t worker, workers;  /* this worker's index, and the job's workers */
	uint32_t max_parallelism;  /* key groups */
	uint32_t prev_workers;     /* workers of the checkpoint started from (0: fresh) */
	uint64_t checkpoint;       /* the checkpoint started from (0: fresh) */
	uint64_t base_id;          /* this run's ids are above it: a source injects
	                              barrier N once sfs_task_requested() = N > the
	                              last it injected, starting from base_id */
	uint64_t interval_ms;      /* checkpoint interval */
};

/*
 * sfs_task_open - join the checkpoints of the group @h is attached to, as
 * worker @worker (the group is told it runs: checkpoints are requested once
 * every worker has joined).  -ENOENT when the group takes no checkpoints,
 * SFS_EUSAGE for a worker index out of range.  Cost: a region lookup, once.
 */
int sfs_task_open(sfs_handle_t *h, uint32_t worker, sfs_task_t **out);
/* The same for the worker a keyed-state context was opened as (its
 * segment, no second attach): what a worker with state uses. */
int sfs_worker_task(sfs_ctx_t *c, sfs_task_t **out);
/* Leaves the checkpoints' view of the worker as it is (sfs_task_finish
 * says it is done).  A task of sfs_worker_task lives in its context's
 * mapping: close it before sfs_worker_close. */
int sfs_task_close(sfs_task_t *t);

void sfs_task_info(const sfs_task_t *t, struct sfs_task_info *out);

/* The bytes old worker @prev_worker saved with the checkpoint this run
 * started from (after a rescale every worker reads every old worker's and
 * takes what is its own).  -ENOENT on a fresh start, SFS_EUSAGE for an
 * index >= prev_workers.  The view lives as long as the task. */
int sfs_task_restored(const sfs_task_t *t, uint32_t prev_worker, struct sfs_view *out);

/* The newest checkpoint requested (0: none yet) and the newest completed. */
uint64_t sfs_task_requested(const sfs_task_t *t);
uint64_t sfs_task_completed(const sfs_task_t *t);

/* Sleep until checkpoint @id has completed: 0, or SFS_ETIMEDOUT after
 * @timeout_ns (0: no limit). */
int sfs_task_wait_completed(const sfs_task_t *t, uint64_t id, uint64_t timeout_ns);

/*
 * sfs_task_sealed - this worker has sealed checkpoint @id (sfs_barrier()
 * on its context first): publish it with @len bytes of its own.  SFS_EUSAGE
 * (and nothing published) for an id not above the last one sealed, an id
 * not requested yet, more than SFS_TASK_BYTES_MAX bytes, or — for a worker
 * that opened keyed state in the group (sfs_worker_open, in any process of
 * its) — when its keyed state's last barrier is not @id: the compactor
 * stages the state as of the barriers it sealed, and the checkpoint waits
 * for exactly that stage.  A worker whose state lives outside sfs (no
 * context; sfs_task_staged) has no barrier to match.
 */
int sfs_task_sealed(sfs_task_t *t, uint64_t id, const void *bytes, size_t len);

/*
 * sfs_task_finish - end of input: this worker seals no more barriers.
 * Called once its last seal's checkpoint has completed (the clean end:
 * seal one more checkpoint after the last record, wait for it, commit,
 * finish), its state and bytes ride unchanged in every later checkpoint
 * while the other workers go on.  Called earlier, no checkpoint completes
 * after it (the one in flight is abandoned): the group's end is the
 * program's to handle.
 */
int sfs_task_finish(sfs_task_t *t);

/*
 * For a worker whose state lives outside sfs (a baseline, or state of its
 * own): where to put the files of checkpoint @id, and the call that says
 * they are all there.  Workers on sfs state never call these: the
 * compactor stages their state.
 */
int sfs_task_stage_dir(const sfs_task_t *t, uint64_t id, char *buf, size_t len);
/* The subdirectory of a stage directory for files that never change once
 * written (immutable, named uniquely within the worker's files: RocksDB's
 * SSTs): a checkpoint links each of them once and references it from then
 * on; every other file of the stage directory is copied into each
 * checkpoint.  A restore puts both back flat. */
#define SFS_STAGE_SHARED "shared"
/* In a host group's stage directory: the worker's list sequence when it
 * was found (sfs_worker_staged), which sfs_worker_adopt raises its own to. */
#define SFS_STAGE_LIST_SEQ "LIST_SEQ"
int sfs_task_staged(sfs_task_t *t, uint64_t id, uint64_t version);

/*
 * sfs_task_io - a file this worker must write (its sink's output, files it
 * stages) cannot be written now: @err a negative errno; 0 once it can
 * again.  A full disk, a quota, an I/O error, a file too big or a
 * read-only file system are worth retrying (the worker waits and tries
 * again: back-pressure); the supervisor stops the group, its last
 * checkpoint intact, when the trouble outlasts `sfs run
 * --io-stall-timeout-ms`.  Returns 1 when @err starts an episode (log it
 * once, naming the file), 0 while one goes on (or for @err 0), SFS_EUSAGE
 * for an error no retry cures (fail as before).  A plain store.
 */
int sfs_task_io(sfs_task_t *t, int err);

/*
 * Rollback in place.  When another worker of the group dies, the group
 * returns to its last completed checkpoint C without restarting the
 * processes that survive, if they can start over in place: a worker that
 * calls sfs_task_rollback_enable() promises to, and is then asked instead
 * of killed.  Once sfs_task_rollback_requested() returns non-zero (check
 * it where you check sfs_task_requested(): a plain load), the program
 * drops everything it holds since C — its operators' memory, pending
 * output not yet in a sink epoch it committed — and calls
 * sfs_worker_rollback() on its keyed state (or, without sfs state,
 * sfs_task_rollback_wait()), with a timeout it may repeat while it says it
 * is alive.  When that returns 0 the group has rolled back: the store
 * holds C's state, sfs_task_info() and sfs_task_restored() describe the
 * start from C (as for a restarted worker: rewind the sources to the
 * bytes, open the sinks again), and the worker runs on.  A worker that
 * never enables it is SIGKILLed and started again, as before.
 *
 * sfs_task_rollback_enable - this worker rolls back in its process (until
 * it exits; a new process of the worker calls it again).
 */
int sfs_task_rollback_enable(sfs_task_t *t);
/* Non-zero (the rollback's number) while a rollback waits for this worker
 * to halt; 0 otherwise.  A plain load. */
uint64_t sfs_task_rollback_requested(const sfs_task_t *t);
/* Say this worker has halted for the requested rollback — it writes
 * nothing shared until this returns 0 — and sleep until the group has
 * rolled back (0), @timeout_ns passes (SFS_ETIMEDOUT: call again), or no
 * rollback is requested (SFS_EUSAGE).  If the rollback cannot be done in
 * place the group is stopped instead, this process with it. */
int sfs_task_rollback_wait(sfs_task_t *t, uint64_t timeout_ns);
/* sfs_task_rollback_wait() for a worker with keyed state in @c: first drop
 * every write since its last barrier and every cached read (the buffers it
 * sealed are the compactor's to drop), and once the group has rolled back
 * read the rolled-back store.  SFS_ETIMEDOUT: call it again (nothing is
 * dropped twice). */
int sfs_worker_rollback(sfs_ctx_t *c, sfs_task_t *t, uint64_t timeout_ns);

/* ------------------------------------------------------------------------
 * A worker's own checkpoints (an engine that coordinates checkpoints itself:
 * Flink).  In a group with checkpoints (`sfs run --host`, or any group with
 * a checkpoint region) the compactor stages a worker's state at every
 * barrier it seals: once buffer @id is flushed, the worker's store as of
 * that barrier is linked into a stage directory of its own, immutable.
 * The engine then reads or copies those files off its task thread, and
 * removes the directory when done (sfs_stage_drop).
 *
 * Threads: sfs_worker_staged, sfs_stage_scan and sfs_stage_drop read no
 * state of @c that its owner thread changes (only the segment and the
 * checkpoint region's words): they may run on another thread than the
 * context's, concurrently with its state calls, until sfs_worker_close.
 * ------------------------------------------------------------------------ */

/*
 * sfs_group_slots - the worker slots of host group @job (`sfs run --host
 * --workers N`: N), so the engines of several processes (TaskManagers) can
 * share one group: each opens a free slot (sfs_worker_open refuses one
 * another context holds, SFS_ERUNNING) with SFS_WORKER_RESET.  -ENOENT (no
 * segment of that job on this host), SFS_EUSAGE (a group that is no host
 * group).  Cost: an attach as an observer and a detach.
 */
int sfs_group_slots(const char *job, uint32_t *slots);

/*
 * sfs_worker_staged - wait until the compactor has staged this worker's
 * state as of barrier @id (sfs_barrier(c, id) first), at most @timeout_ns
 * (0: no limit), and write the stage directory's path to @dir.  0;
 * SFS_ETIMEDOUT; -ENOENT when the group stages nothing (no checkpoint
 * region, or this worker's slot is beyond it); -ESTALE when a newer
 * barrier was staged instead (a seal of @id that never happened).  The
 * directory holds the target's files: those under SFS_STAGE_SHARED never
 * change once written (the same name in a later stage is the same file).
 * In a host group it also holds SFS_STAGE_LIST_SEQ, written by this call.
 * Sleeps in steps of 1 ms (a polling wait off the task thread).
 */
int sfs_worker_staged(sfs_ctx_t *c, uint64_t id, uint64_t timeout_ns, char *dir, size_t len);

/* One live entry of a staged state (sfs_stage_scan): @state the id
 * sfs_state_register gave, @kg its key group, @key/@klen the key and
 * @ukey/@ulen the user key of a map entry (a list element's: its 8-byte
 * sequence; NULL, 0 for a value or counter); a counter's value is its
 * folded int64 (8 bytes, native).  Views valid during the call. */
struct sfs_stage_entry {
	uint32_t state, kg;
	uint64_t ns;
	const void *key, *ukey, *val;
	uint32_t klen, ulen, vlen;
};
typedef int (*sfs_stage_fn)(void *arg, const struct sfs_stage_entry *e);

/* A state as the files of a stage name it: its id there, its kind, and
 * its TTL (0: none; its values then start with sfs's 8-byte expiry). */
struct sfs_stage_state {
	uint32_t id;
	int kind;          /* enum sfs_state_kind */
	uint64_t ttl_ms;
};

/*
 * sfs_stage_scan - call @fn once per live entry of the staged directory
 * @dir (sfs_worker_staged's, or a copy of one with the same layout: its
 * files, and SFS_STAGE_SHARED's) with its newest version: merges folded,
 * deletes and cleared maps dropped, expired TTL entries kept (the reader
 * decides), in no promised order.  @states (@n of them) names the states
 * the files hold, by the ids they were written with — the registry of the
 * group that staged them, which may be another group's; NULL: this
 * group's own registry.  Reads the files with the group's flush target,
 * offline (a temporary directory of links beside @dir, removed).  A
 * non-zero return of @fn stops it and is returned.  O(staged bytes).
 */
int sfs_stage_scan(sfs_ctx_t *c, const char *dir, const struct sfs_stage_state *states, unsigned n,
		   sfs_stage_fn fn, void *arg);

/* Remove stage directory @dir (the compactor never reuses it). */
int sfs_stage_drop(sfs_ctx_t *c, const char *dir);

/*
 * Going back in place (the engine's local recovery).  In a host group the
 * compactor keeps one pinned version per worker: nothing it needs is
 * deleted or rewritten until the next pin (the disk held is one
 * checkpoint interval's churn, never a copy).
 *
 * sfs_worker_pin - the engine completed checkpoint @id, which this worker
 * sealed and the compactor staged: ask the compactor to pin that version
 * (the previous pin is released).  A plain store and a doorbell: no wait;
 * the answer is checked by sfs_worker_restore_pinned.  Task thread.
 *
 * sfs_worker_restore_pinned - return this worker's state to checkpoint
 * @id, the one pinned, without reading or copying a file: its writes since
 * the last barrier and its cached reads are dropped, the compactor drops
 * its sealed buffers and makes the pinned version the published one
 * again.  For a worker reopened after its task failed (sfs_worker_open
 * found its region), before its first state call.  Waits for the
 * compactor (offline) at most @timeout_ns (0: no limit).  -ENOENT when
 * @id is not pinned (the compactor restarted since, or the pin failed):
 * then restore from files into a fresh worker; on any error this worker's
 * state is undefined and it is to be closed.  O(the target's metadata of
 * one version), not O(state).
 */
int sfs_worker_pin(sfs_ctx_t *c, uint64_t id);
int sfs_worker_restore_pinned(sfs_ctx_t *c, uint64_t id, uint64_t timeout_ns);

/*
 * sfs_worker_adopt - make the files of one checkpoint of this worker's
 * store its state, without reading an entry: @dir (absolute, a directory)
 * holds them as sfs_worker_staged laid them out (its files, and
 * SFS_STAGE_SHARED's), e.g. downloaded by the engine from its checkpoint
 * storage.  The compactor links or copies them into the worker's store
 * and opens it over them, as a restore of the whole group would; this
 * worker's writes since its last barrier and its cached reads are dropped
 * first.  For a restore from files of exactly the key groups and states
 * the files were staged with (same key-group range, same state ids): a
 * rescale or a renumbered state must go through sfs_stage_scan and
 * writes instead.  The worker's list sequence is raised to the
 * directory's SFS_STAGE_LIST_SEQ, so later appends land above the
 * adopted elements (a directory without one, staged by an older sfs, is
 * refused with SFS_EUSAGE: restore it by writes).  Only a host group's worker; before its first state
 * call.  Waits for the compactor at most @timeout_ns (0: no limit).
 * -ENOTSUP: the group's target cannot (only the table target can).  On
 * any other error the compactor answered, the store is empty, as after
 * SFS_WORKER_RESET (restore by writes); after SFS_ETIMEDOUT it is
 * undefined: close the worker.  O(the files' bytes when copied; their
 * count when linked).
 * @dir stays the caller's; remove it once this returns.
 */
int sfs_worker_adopt(sfs_ctx_t *c, const char *dir, uint64_t timeout_ns);


/*
 * sfs_worker_last_barrier - the last barrier id this worker slot sealed,
 * in any of its openings (0: none): a reopened slot's next barrier must be
 * above it.
 */
uint64_t sfs_worker_last_barrier(const sfs_ctx_t *c);

/* A NUL-terminated name for @err (a negative code). */
const char *sfs_strerror(int err);

/* This thread's message for the last failed call ("" if none, or if a
 * call made since has cleared it: see the rules at the top). */
const char *sfs_last_error(void);

/* ------------------------------------------------------------------------
 * Queryable state (any attached process; worker/query.c)
 *
 * An attached process (sfs_attach, not an observer) reads a running job's
 * state by state name and key, lock-free and read-only: the key's key
 * group names the worker that owns it (Flink's assignment over the
 * parallelism and max parallelism its region records), and the read goes
 * through that worker's sealed write buffers, newest first, then its
 * flushed store (the flush target's reader, opened by this process).
 *
 * Consistency: every answer is the key's state as of the owner's newest
 * sealed buffer when the call began (seal sequence number S,
 * sfs_query_seq()): exactly every write sealed up to S, nothing later.
 * The active buffer, which the owner writes with plain stores, is never
 * read, nor the value cache (owner-only, rewritten in place).  So a value
 * is never torn and never one the owner has not sealed yet; writes since
 * the owner's last barrier (or spill) are not visible.  Counters fold the
 * sealed buffers' deltas over the store's base exactly once (by the
 * store's per-key tag, as the owner's reads do).  A map iteration is the
 * map as of S.  If a newer buffer is sealed and reaches the store while a
 * call reads, the call starts over (at most 64 times: SFS_ETIMEDOUT).
 *
 * Rules: call between sfs_online() and sfs_quiescent()/sfs_offline()
 * (SFS_EUSAGE otherwise).  While online this process holds off the
 * recycling of every buffer and store version it may read (the compactor's
 * grace periods wait for its slot), so report quiescent states often:
 * between lookups, as a worker does between batches.  A view stays valid
 * until the next call on the same query or the caller's next quiescent
 * point, whichever comes first.  The owner never waits for a reader, takes
 * no lock and makes no syscall for one; only maintenance (the reuse of a
 * buffer, a half of the memory store, a table file) waits for a reader
 * that stays online.  A query is single-threaded, like its handle.  A
 * handle sees one incarnation of the job: after a recovery (the
 * supervisor recreates the segments) attach again.
 *
 * Cost: a point read routes the key (one hash), then probes each sealed
 * buffer (<= 16; 1-3 usually) and on a miss the flushed store (memory: one
 * probe in shared memory; table and rocksdb: a file or RocksDB lookup).
 * The first read routed to a worker opens that worker's store reader
 * (rocksdb: a secondary instance, milliseconds).  A map iteration is
 * O(entries of the map) and collects them before calling @fn.
 *
 * Errors: SFS_EUSAGE (unknown state, wrong kind, an observer handle, not
 * online, a bad key), -ENOENT (the state exists but the owner's worker
 * region does not, e.g. a job whose backend keeps no state in shared
 * memory: rocksdb-direct), -EXDEV (the owner lives in another NUMA node's
 * segment: attach to that node), SFS_ETIMEDOUT, or a store error.
 * ------------------------------------------------------------------------ */

typedef struct sfs_query sfs_query_t;

/* Find state @state of the attached job (SFS_EUSAGE: no such state; a
 * counter whose user merge operator this process has not defined).
 * O(states); opens no store reader yet. */
int sfs_query_open(sfs_handle_t *h, const char *state, sfs_query_t **out);

/* The state's kind (enum sfs_state_kind). */
int sfs_query_kind(const sfs_query_t *q);

/* The seal sequence number the last successful read was as of (0 when
 * none sealed yet). */
uint64_t sfs_query_seq(const sfs_query_t *q);

/* Value state: 1 and a view when present, 0 when absent, or an error. */
int sfs_query_value(sfs_query_t *q, uint64_t ns, const void *key, size_t klen,
		    struct sfs_view *out);

/* Counter state: 1 and the value when present, 0 (*out = 0) when absent. */
int sfs_query_counter(sfs_query_t *q, uint64_t ns, const void *key, size_t klen, int64_t *out);

/* Map state: one user key's value (1, or 0 when absent). */
int sfs_query_map_get(sfs_query_t *q, uint64_t ns, const void *key, size_t klen,
		      const void *ukey, size_t ulen, struct sfs_view *out);

/* Map state: @fn once per live entry of the map (order unspecified);
 * @fn returning non-zero stops the walk and is returned.  @fn must not
 * call this query. */
int sfs_query_map_iter(sfs_query_t *q, uint64_t ns, const void *key, size_t klen,
		       sfs_entry_fn fn, void *arg);

/* Close the store readers it opened and free it. */
int sfs_query_close(sfs_query_t *q);

#ifdef __cplusplus
}
#endif
#endif /* SFS_H */
