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
 */
#ifndef SFS_COMPACTOR_FLUSH_H
#define SFS_COMPACTOR_FLUSH_H

#include <stdint.h>

#include "shm/proc.h"
#include "target/target.h"
#include "worker/state.h"

#define SFS_FLUSH_MAX_WORKERS 256

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
};

struct rt_job;

struct sfs_flusher {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	const struct sfs_target_ops *ops;
	struct sfs_target_cfg cfg;
	uint64_t next_scan_ns;
	uint32_t nworkers;             /* highest open index + 1 */
	struct rt_job *job;            /* a query job with checkpoints, else NULL */
	int no_snapshot_said;
	struct sfs_flush_worker w[SFS_FLUSH_MAX_WORKERS];
};

/* SFS_EUSAGE if the segment names an unknown flush target. */
int sfs_flusher_init(struct sfs_flusher *f, struct sfs_seg *seg,
		     const struct sfs_proc_slot *self, uint64_t store_bytes);
void sfs_flusher_fini(struct sfs_flusher *f);

/*
 * sfs_flusher_step - one bounded round over every worker: at most @budget
 * entries applied per worker.  Returns > 0 if it did work, 0 if idle, 1 as
 * well while grace periods are pending (*@pending set, so the caller polls
 * instead of sleeping long), < 0 on an error that stops the compactor.
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
