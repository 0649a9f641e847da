/*
 * ckpt.h — the checkpoint protocol's shared words: region "ckpt" of node 0's
 * segment, the one place where workers, the compactor, the checkpointer and
 * the supervisor meet about checkpoints.  Whatever program the workers run
 * (our Nexmark runtime or a user's, include/sfs.h's sfs_task_*), this is
 * the whole protocol; nothing here knows a query, a source or a sink.
 *
 * One checkpoint in flight at a time (Flink's default):
 *   1. the checkpointer requests barrier N: ck_barrier_req = N (release);
 *   2. each worker seals its state for N (sfs_barrier) and publishes its
 *      seal with the opaque bytes it wants back at a restore (its source
 *      positions): cw_bytes, cw_bytes_len, then cw_sealed = N (release);
 *   3. the snapshotter of worker w's state (the compactor once the buffer
 *      sealed for N is flushed, or the worker itself when its state lives
 *      outside sfs) stages the files in <data>/stage/w<w>/b<N> and
 *      publishes cw_snap_version, then cw_snap_barrier = N (release);
 *   4. when every worker has done 2 and 3, the checkpointer writes the
 *      checkpoint durably and publishes ck_done = N (release) and bumps
 *      ck_done_seq (release) and wakes its futex waiters; workers with
 *      two-phase sinks commit what they staged up to N when they see it.
 * Barrier N+1 is requested only after N completed, so a worker's cw_bytes
 * of N stay put until the checkpointer has read them.  A worker that has
 * finished its input seals no more barriers.  If its last seal is in a
 * completed checkpoint (cw_phase FINISHED), later checkpoints carry its
 * state and bytes from the newest completed one, unchanged, and go on
 * while any worker runs (Flink's checkpoints after tasks finish, FLIP-147);
 * if not (ENDED), the checkpoint in flight is aborted and none is
 * requested again: the group's end takes over.
 *
 * Ownership (who writes which bytes, and how it is published):
 *  - configuration (ck_workers ... ck_recoveries): the supervisor, before any
 *    child starts; read-only for the life of the segment, but for the
 *    start words a rollback in place rewrites (below) while no worker
 *    exists (workers are started after, fork being the barrier).  Readers
 *    find the region by name (the directory entry is published with a
 *    release store), so no further ordering is needed.
 *  - ck_prev[] (the restored checkpoint's bytes per old worker): the
 *    supervisor, before any worker starts; read-only while workers run.
 *  - ck_barrier_req: the checkpointer, release; sources read it relaxed
 *    (a late barrier is just a later one).
 *  - ck_done, ck_done_seq and the counters below them: the checkpointer;
 *    ck_done and ck_done_seq with release stores after the checkpoint's
 *    _metadata is durable; the counters relaxed (reports).
 *    ck_us[i % SFS_CKPT_DURATIONS] is written before ck_count counts it.
 *  - ck_w[w]: worker w writes cw_phase (release), cw_bytes/cw_bytes_len
 *    (plain, then cw_sealed release); the snapshotter of w's state writes
 *    cw_snap_version (relaxed) then cw_snap_barrier (release).
 *  - cw_keyed, cw_barrier: worker w's keyed-state context (worker/state.c),
 *    release: cw_keyed = 1 once a context of w opened in this group, and
 *    cw_barrier the last barrier it sealed (sfs_barrier).  sfs_task_sealed
 *    reads them (acquire) to refuse a seal of N whose keyed state was not
 *    sealed for N: the compactor stages only the barriers the state sealed
 *    (step 3), so such a checkpoint would wait forever, or (state sealed
 *    for a later id) find no stage directory.  Two words instead of a look
 *    at the worker's region: the task may be opened on another mapping of
 *    the segment than the context (a separate sfs_attach), and shm/ knows
 *    no worker region.
 *
 * Rollback in place (supervisor/run.c, issue 23).  When a worker dies the
 * other workers are halted or killed: a worker whose program rolls back in
 * its own process (cw_rb_inproc = 1, sfs_task_rollback_enable) is asked to
 * halt (ck_rb_halt = R, release; R counts the group's rollbacks from 1): it
 * drops what it wrote since its last barrier (its active buffer, its cache,
 * its operators' memory), stops writing anything shared (buffers,
 * channels, sink files, its checkpoint words), goes offline and acks
 * (cw_rb_halted = R, release); every other worker is SIGKILLed and reaped.
 * A halted worker that dies, or does not ack within the bound, is treated
 * as dead.  With every worker halted or reaped, the supervisor sets each
 * cw_phase back to STARTING and asks for rollback R (ck_rb_req = R,
 * release).  Then, each side once per R:
 *   a. the checkpointer abandons the checkpoint in flight (its stage
 *      directories removed; a completion already under way finishes
 *      first: the checkpointer is one thread), writes ck_rb_to = the
 *      newest completed checkpoint (ck_done, else ck_restored_id: this
 *      group's starting point), and acks: ck_rb_ack = R (release).  It
 *      requests no barrier until every worker runs again.
 *   b. seeing ck_rb_ack = R (acquire), the compactor that owns worker w
 *      returns w's target to the version it pinned for ck_rb_to
 *      (store/target.h, pin and rollback), drops every SEALED buffer of w
 *      (all belong to barriers after ck_rb_to: a checkpoint completes only
 *      once the buffers of its barrier are flushed), sets wc_flushed_seq
 *      to the pinned version's seq, and acks: cw_rb_rc (0, or the error
 *      that makes the supervisor fall back to a restore from files), then
 *      cw_rb_ack = R (release).
 *   c. the supervisor, with every ack in, rewrites the start words a
 *      starting worker reads (ck_start, ck_restored_id, ck_prev_workers,
 *      ck_prev[], ck_first_barrier, ck_barrier_req: every worker is halted
 *      or gone and no request exists meanwhile), rolls the sinks back to
 *      ck_rb_to, empties the exchange channels, publishes ck_rb_go = R
 *      (release, futex wake) and starts the dead workers again.  A halted
 *      worker seeing ck_rb_go = R (acquire) starts over in its process as
 *      restored from ck_rb_to: it reads the start words like a new worker,
 *      sets cw_phase RUNNING, and its reader catches up with the
 *      rolled-back store.  When the rollback falls back to a restart, no
 *      ck_rb_go comes: the group is stopped, the halted workers with it.
 * ck_rb_halt, ck_rb_req and ck_rb_go: the supervisor; cw_rb_inproc and
 * cw_rb_halted: worker w; ck_rb_to then ck_rb_ack: the checkpointer;
 * cw_rb_rc then cw_rb_ack: the compactor owning w (the supervisor, for a
 * worker that died before it laid out its region: no compactor knows it,
 * and the next incarnation's sealed buffers must not be taken for the
 * dead one's).  A process restarted meanwhile finds R unanswered by
 * comparing the words and answers it; a worker started after R
 * (sfs_task_open) takes R as handled.
 */
#ifndef SFS_SHM_CKPT_H
#define SFS_SHM_CKPT_H

#include <stdint.h>

#include "sfs.h"
#include "shm/atomic.h"

struct sfs_seg;
struct sfs_task;

#define SFS_CKPT_REGION      "ckpt"
#define SFS_CKPT_MAGIC       0x74706b6320736673ull /* "sfs ckpt" */
#define SFS_CKPT_VERSION     5u  /* 2: ck_recoveries; 3: rollback in place; 4: workers
                                    that roll back in their processes; 5: a worker's
                                    keyed-state barrier (cw_keyed, cw_barrier) */
#define SFS_CKPT_MAX_WORKERS 48u
/* ck_interval_ms of a host group (sfs run --host): its engine seals its own
 * barriers and keeps its own checkpoints from the staged files; the
 * checkpointer requests none. */
#define SFS_CKPT_ENGINE UINT64_MAX
#define SFS_CKPT_PATH_MAX    256u
#define SFS_CKPT_CONFIG_MAX  256u
/* Opaque bytes a worker keeps with each checkpoint (include/sfs.h says
 * SFS_TASK_BYTES_MAX, the same number). */
#define SFS_CKPT_BYTES_MAX   4096u
/* Checkpoint durations kept for the summary's median: the last 4096
 * (16 KiB; more than an hour of checkpoints at the default 1 s interval). */
#define SFS_CKPT_DURATIONS   4096u
/* Where worker @w's state of barrier N is staged, and where the
 * checkpoints live (checkpointer/ckstore.h), under the data directory. */
#define SFS_CKPT_STAGE_FMT   "%s/stage/w%u/b%llu"
#define SFS_CKPT_DIR_FMT     "%s/checkpoints"

/* Worker @worker's stage directory of barrier @id into @buf (@len bytes):
 * 0, or -ENAMETOOLONG with a message naming the worker when it does not fit.
 * The one place SFS_CKPT_STAGE_FMT is formatted. */
struct sfs_ckpt;
int sfs_ckpt_stage_dir(const struct sfs_ckpt *ck, uint32_t worker, uint64_t id, char *buf,
		       size_t len);

/* cw_phase: where a worker is in the job. */
enum sfs_ckpt_phase {
	SFS_CKW_STARTING = 0,  /* not attached yet: no barrier requested */
	SFS_CKW_RUNNING = 1,   /* attached: sees requests, seals barriers */
	SFS_CKW_FINISHED = 2,  /* end of input after its last seal completed: its
	                          state and bytes ride unchanged in later checkpoints */
	SFS_CKW_ENDED = 3,     /* end of input (or gave up) with its last state in no
	                          checkpoint: no checkpoint completes after it */
};


struct sfs_ckpt_worker {
	uint32_t cw_phase;          /* worker: enum sfs_ckpt_phase (release) */
	uint32_t cw_bytes_len;      /* worker: before cw_sealed */
	uint64_t cw_sealed;         /* worker (release): last barrier sealed */
	uint64_t cw_snap_barrier;   /* snapshotter (release): last barrier staged */
	uint64_t cw_snap_version;   /* snapshotter: its target version (flushed seq) */
	uint64_t cw_rb_ack;         /* compactor (release): last rollback answered */
	int32_t cw_rb_rc;           /* compactor, before cw_rb_ack: 0 or why it could not */
	uint32_t cw_rb_inproc;      /* worker: 1 = it rolls back in its process (its task
				     * open sets 0, sfs_task_rollback_enable 1) */
	uint64_t cw_rb_halted;      /* worker (release): last rollback it halted for */
	uint64_t cw_barrier;        /* worker's context (release): its last sfs_barrier id */
	uint32_t cw_keyed;          /* worker's context (release): 1 = its state is in sfs,
				     * so each seal needs its barrier (see above) */
	uint32_t cw_pad0;
	uint8_t cw_bytes[SFS_CKPT_BYTES_MAX]; /* worker: its bytes of cw_sealed */
} __sfs_cache_aligned;

/* The restored checkpoint's bytes of one old worker. */
struct sfs_ckpt_prev {
	uint32_t cp_len;
	uint8_t cp_bytes[SFS_CKPT_BYTES_MAX];
};

struct sfs_ckpt {
	uint64_t ck_magic;
	uint32_t ck_version;
	uint32_t ck_workers;
	uint32_t ck_max_parallelism;
	uint32_t ck_retain;         /* checkpoints kept (0: the store's default) */
	uint64_t ck_interval_ms;    /* 0: no checkpoints; SFS_CKPT_ENGINE: the engine's own */
	uint64_t ck_first_barrier;  /* this run's barrier ids start above it */
	uint32_t ck_start;          /* enum sfs_start_kind (include/sfs.h) */
	uint32_t ck_prev_workers;   /* workers of the restored checkpoint (0: fresh) */
	uint64_t ck_restored_id;    /* checkpoint restored from (0: fresh) */
	uint32_t ck_recoveries;     /* restarts of the whole job from a checkpoint before
				     * this incarnation (the supervisor's count; a report
				     * for `sfs stat` and /metrics) */
	uint32_t ck_pad0;
	char ck_data_dir[SFS_CKPT_PATH_MAX];
	/* "key=value ..." the checkpoints record and a restore must match
	 * (the runner's own: query, events, ...); the checkpointer appends
	 * the state registry */
	char ck_config[SFS_CKPT_CONFIG_MAX];

	uint64_t ck_barrier_req __sfs_cache_aligned;
	uint64_t ck_done;           /* release: last completed checkpoint */
	int32_t ck_done_seq;        /* release: bumped with ck_done (futex word) */
	int32_t ck_done_waiters;    /* > 0: someone sleeps on ck_done_seq */
	uint64_t ck_count;          /* completed in this run */
	uint64_t ck_aborted;
	uint64_t ck_last_ns;        /* duration of the last one (barrier to _metadata) */
	uint64_t ck_max_ns;         /* the longest one completed in this run */
	uint64_t ck_links;          /* files linked or copied into storage, total */
	uint64_t ck_refs;           /* files riding as references, total */
	uint32_t ck_us[SFS_CKPT_DURATIONS]; /* µs, saturated, of completed i */

	/* Rollback in place (see above). */
	uint64_t ck_rb_req __sfs_cache_aligned; /* supervisor (release) */
	uint64_t ck_rb_to;          /* checkpointer, before ck_rb_ack */
	uint64_t ck_rb_ack;         /* checkpointer (release) */
	uint64_t ck_rb_halt;        /* supervisor (release): halt for rollback R */
	int32_t ck_rb_go;           /* supervisor (release, futex word): R rolled back */
	uint32_t ck_rb_pad0;

	struct sfs_ckpt_worker ck_w[SFS_CKPT_MAX_WORKERS];
	struct sfs_ckpt_prev ck_prev[SFS_CKPT_MAX_WORKERS];
};

/*
 * Create the region in @seg (the supervisor, before any child starts),
 * zeroed but for magic, version and @workers.  The caller fills the rest
 * of the configuration.  SFS_EUSAGE for 0 or too many workers.
 */
int sfs_ckpt_create(struct sfs_seg *seg, uint32_t workers, struct sfs_ckpt **out);

/* Find the region of @seg: 0, or -ENOENT when the group takes no
 * checkpoints (no region, or an interval of 0), or SFS_EVERSION naming the
 * segment for a region of another magic, version or size. */
int sfs_ckpt_find(const struct sfs_seg *seg, struct sfs_ckpt **out);

/* The same, also for a group that takes no checkpoints (an interval of 0):
 * every group `sfs run` starts has the region, and its configuration words
 * (ck_workers, ck_max_parallelism) are the group's shape whether or not it
 * checkpoints.  -ENOENT (no message) when the segment has none. */
int sfs__ckpt_find_any(const struct sfs_seg *seg, struct sfs_ckpt **out);

/* The layout fingerprint of the region's structs (shm/layout.c). */
uint64_t sfs_ckpt_layout(uint64_t h);

/* The task API's (include/sfs.h) open over a segment already mapped (the
 * runtime's workers hold theirs through shm/child.h): @seg must outlive
 * the task. */
struct sfs_proc_slot;
int sfs__task_open_seg(const struct sfs_seg *seg, uint32_t worker, struct sfs_proc_slot *slot,
		       struct sfs_task **out);

/* Publish checkpoint @id as complete and wake sleepers (the checkpointer). */
void sfs_ckpt_publish_done(struct sfs_ckpt *ck, uint64_t id);

#endif
