/*
 * flush.h — the compactor's flush cycle over the workers of its node.
 *
 * For each worker found in the segment (region "worker.<w>"), in bounded
 * steps and round-robin so one worker's big buffer never holds up another's:
 *   1. take its SEALED buffer with the lowest seq (the flush-request ring is
 *      drained as a doorbell; buffer states are the truth, so a request lost
 *      with a crashed compactor is found again by the scan);
 *   2. sort the buffer's entries (key-group-leading key order) and apply
 *      them to the flush target, at most `budget` entries per step;
 *   3. commit the target's version, mark the buffer RETIRING (release) and
 *      start a grace period;
 *   4. once the grace period has passed, mark it FREE and wake the worker
 *      if it is back-pressured.
 * A flush that fails (target full, write error) is reported loudly and
 * retried; the buffer stays SEALED and the worker back-pressures.  A flush
 * redone after a crash is idempotent (the target's tags).
 *
 * Maintenance threads (`sfs run --maintenance-threads N`, SFS_MAINT_THREADS
 * in the compactor's environment).  One compactor serves every worker of
 * its node, so on a node of 16-64 cores one thread would be what every
 * barrier waits for.  With N = 1 no thread is started: the main thread
 * runs every worker's step, exactly as before.  With N > 1,
 * sfs_flusher_threads() starts N threads and worker w is owned by thread
 * w mod N for the compactor's life (struct sfs_flush_lane: first = t,
 * stride = N).  Who owns what:
 *  - the owning thread alone, no lock: everything in w[w] (open, the
 *    target writer tw and all the target keeps behind it, cur, offs,
 *    views, retire tokens, failing), what the compactor writes in the
 *    worker's wctl (its buffers' cb_state and cb_flushed_ns,
 *    wc_flushed_seq, the flush counters, wc_freed and the wake), its
 *    rj_ws[w] snapshot fields, and opening it (a thread's scan opens only
 *    its own workers).  So each worker's buffers flush, commit, snapshot,
 *    publish and retire in seq order exactly as with one thread, and every
 *    target writer keeps its contract of one writing thread (target.h).
 *  - each thread's lane (its scan clock, the highest index it opened):
 *    that thread's.
 *  - shared:
 *    QSBR — the compactor's grace periods all skip its own slot (it is
 *      an updater for what it frees, shm/qsbr.h; no other process runs a
 *      grace period), sfs_qsbr_start is one atomic RMW and sfs_qsbr_check
 *      only loads, so threads start and poll grace periods concurrently.
 *      The slot's online/quiescent/offline reports stay with the main
 *      thread's loop; nothing waits on them.
 *    the doorbell, the idle sleep and the heartbeat — the main thread's
 *      (shm/child.c's loop).  Its step (sfs_flusher_step) kicks the
 *      pool (p_kick, under p_mu, broadcast) and waits until every thread
 *      has finished a round that started after the kick, or shown life
 *      inside one long step (sfs_child_progress on a pool thread: a
 *      memory dump), then returns their summed work.  So a beat still
 *      proves every thread moves: one stuck thread stops the main
 *      thread's steps and its beats, and the hang timeout restarts the
 *      compactor as before; and the loop's re-check after it announces
 *      sleep (sh_bell_sleeping) really re-checks every worker.  A thread
 *      with work loops without waiting for kicks; one that found none
 *      waits for the next kick, or 1 ms while it has a grace period or a
 *      failed flush pending (it polls those itself).  Pool threads block
 *      every signal: SIGTERM reaches the main thread's futex wait.
 *    fatal errors — a thread stores its rc in its t_rc and stops stepping;
 *      the main step returns it and the compactor stops (threads joined
 *      by sfs_flusher_fini).
 *    logging (one write(2) per line), errors (sfs_last_error is per
 *      thread), no_snapshot_said (an atomic exchange).
 *  Process-global state of the targets, checked for this: the table
 *  target's qsort context (sort_t) is per thread; the data files' decoded
 *  page budget is atomic (store/table/layout/datafile_read.c); layout's temporary names
 *  take an atomic sequence; RocksDB instances share only RocksDB's default
 *  Env (thread-safe; its background pools were shared across instances
 *  before), each has its own block cache, rate limiter and LOG; the
 *  memory target's stores are per worker; the fault points
 *  (common/fault.h) read SFS_FAULT once under a lock and count hits
 *  atomically.
 * Rollback in place (shm/ckpt.h, step b; store/target.h, pin and
 * rollback): the thread owning worker w pins w's version of each
 * completed checkpoint (ck_done) as it sees it, and answers a rollback
 * the checkpointer has acked by returning w's target to the pinned
 * version and dropping w's SEALED buffers — no buffer of w is in flight
 * then (the worker is dead; the flush under way is abandoned).
 * Only the main thread waits for the slowest thread's round (a long
 * commit): the other threads keep flushing their workers meanwhile.
 * Cost: one mutex and condition-variable round trip per main step, i.e.
 * per round of every thread (a round applies up to `budget` entries of
 * each of its workers: milliseconds of work when busy).
 */
#ifndef SFS_COMPACTOR_FLUSH_H
#define SFS_COMPACTOR_FLUSH_H

#include <stdint.h>

#include "shm/proc.h"
#include "store/target.h"
#include "worker/state.h"

#define SFS_FLUSH_MAX_WORKERS SFS_MAX_WORKER_SLOTS

struct sfs_flush_worker {
	int open;
	uint32_t worker;
	struct sfs_wctl *ctl;
	struct sfs_ring *ring;
	struct sfs_wbuf *buf[SFS_WCTL_MAX_BUFS];
	struct sfs_target_writer *tw;  /* the flush target's writer */
	int cur;                       /* buffer being flushed, -1 none */
	uint64_t *offs;                /* its sorted entries (process-local) */
	size_t n, pos, cap;
	struct sfs_wbuf_view *views;   /* one apply batch (grows for a big map) */
	size_t vcap;
	uint64_t t0;
	uint64_t retire_token[SFS_WCTL_MAX_BUFS]; /* grace period of a RETIRING buffer */
	int failing;                   /* last apply failed: report once */
	int snap_failing;              /* a background snapshot failed: report once */
	/* The registry's TTLs (common/ttl.h) as of the buffer being flushed,
	 * read at its start: which views of it to drop as expired. */
	struct sfs_ttl_rule ttl[SFS_MAX_STATES];
	int ttl_any;
	uint64_t ttl_dropped;          /* of the current buffer */
	/* Rollback in place (shm/ckpt.h): the checkpoint whose version the
	 * target pinned (pin_ok), the last one pin() was asked for. */
	uint64_t pinned;
	int pin_ok;
};

struct sfs_ckpt;

/* The workers one thread steps: first, first + stride, ... (owner only). */
struct sfs_flush_lane {
	uint32_t first, stride;
	uint32_t nworkers;             /* highest index it opened + 1 */
	uint64_t next_scan_ns;
};

struct sfs_flush_pool;

struct sfs_flusher {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	const struct sfs_target_ops *ops;
	struct sfs_target_cfg cfg;
	struct sfs_flush_lane lane;    /* no pool: the main thread's, every worker */
	struct sfs_ckpt *ck;           /* the checkpoint protocol (shm/ckpt.h), else NULL */
	int no_snapshot_said;          /* atomic exchange (any thread) */
	struct sfs_flush_pool *pool;   /* NULL: no maintenance threads */
	struct sfs_flush_worker w[SFS_FLUSH_MAX_WORKERS];
};

/* SFS_EUSAGE if the segment names an unknown flush target. */
int sfs_flusher_init(struct sfs_flusher *f, struct sfs_seg *seg,
		     const struct sfs_proc_slot *self, uint64_t store_bytes);
/* Stops and joins the threads first, then closes every store. */
void sfs_flusher_fini(struct sfs_flusher *f);

/*
 * sfs_flusher_threads - start @n maintenance threads (1: none, the main
 * thread steps every worker).  Call after init, before the first step;
 * @nap_ns: the longest an idle thread waits for a kick (the heartbeat).
 * 0, or an error if a thread cannot start (none is left running).
 */
int sfs_flusher_threads(struct sfs_flusher *f, unsigned n, uint64_t nap_ns);

/* Threads running (0 without a pool). */
unsigned sfs_flusher_nthreads(const struct sfs_flusher *f);

/*
 * sfs_flusher_step - one bounded round over every worker: at most @budget
 * entries applied per worker.  Returns > 0 if it did work, 0 if idle, 1 as
 * well while grace periods are pending (*@pending set, so the caller polls
 * instead of sleeping long), < 0 on an error that stops the compactor.
 * With threads: kicks them and returns once each has finished a round
 * begun after the kick (or shown life inside a long step: then > 0);
 * threads poll their own pending grace periods.  Main thread only.
 */
int sfs_flusher_step(struct sfs_flusher *f, unsigned budget, int *pending);

/*
 * sfs_flusher_fatal - whether a store that failed to open with @rc never
 * will: SFS_EFULL (its region does not fit the segment), SFS_EUSAGE (a
 * configuration it refuses), SFS_EVERSION (files of another format).  The
 * step then returns @rc and the compactor exits SFS_CHILD_EXIT_FATAL; any
 * other failure (I/O, memory, a corrupt file a restart may reopen) is
 * logged once and retried.
 */
int sfs_flusher_fatal(int rc);

#endif
