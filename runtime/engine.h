/*
 * engine.h — the operator runtime inside one sfs-worker process.
 *
 * One loop, one thread: drain the input channels of every stage (last stage
 * first, so work leaves the worker before more enters), then generate a
 * bounded batch of the source split, publish what was sent, and sleep on
 * the worker's doorbell only when there is nothing to do.  A busy worker
 * makes no syscall.
 *
 * Source split: the stream's events are cut into blocks of rj_block_events
 * dealt round-robin (block b to worker b mod W), so every worker's source
 * advances through event time at the same pace; an offset is a block index,
 * and a restarted source regenerates any block exactly (nx_event is a pure
 * function of the event number).
 *
 * Barriers (exactly-once alignment): a source injects barrier k+1 into all
 * its stage-0 channels at a block boundary once the requested checkpoint (sfs_task_requested) > k, so
 * every source injects the same ids in the same order.  A stage stops
 * reading a channel that delivered barrier b until every channel of the
 * stage has (an ended channel counts as aligned); then the operator's
 * flush() runs, the barrier goes on to the next stage's channels, and the
 * stage stays held.  When the last stage has aligned, every stage of this
 * worker has seen exactly its pre-barrier input: the state is sealed
 * (backend barrier: sfs_barrier's O(1) seal), and all stages resume.
 * End of input travels the same way as RT_REC_END.
 *
 * Watermarks (event time): at every block boundary, before any barrier, a
 * source sends RT_REC_WATERMARK (int64 ms) into all its stage-0 channels
 * when it advanced: the greatest event time it has generated (every kind
 * counts) minus 4 s, Flink's `WATERMARK FOR dateTime AS dateTime -
 * INTERVAL '4' SECOND`.  Sources differ (each sees only its blocks); a
 * stage's watermark is the minimum of its inputs' last ones, an ended input
 * counting as +infinity.  When it advances, the query's watermark() runs
 * (timers fire, output is sent) and then the watermark goes on to the next
 * stage's channels, behind that output.  When every input has ended,
 * watermark(INT64_MAX) runs before flush().  Watermark records take no part
 * in alignment: a blocked channel is not read, so its watermarks (which
 * follow the barrier) wait with it.
 */
#ifndef SFS_RUNTIME_ENGINE_H
#define SFS_RUNTIME_ENGINE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/job.h"

struct rt_query;

/*
 * What the process running the engine hands it: where it is in the group,
 * and the two things only the process's own skeleton does (worker/main.c:
 * the process-table slot the supervisor watches, and the stop signal).
 * The engine attaches to the job itself with the public API (sfs_attach,
 * an observer: it takes no slot), finds its regions by name, and opens its
 * state through its backend (sfs_worker_open) and its checkpoints through
 * sfs_task_open.
 */
struct rt_engine_env {
	const char *job;
	int node;                    /* the segment holding the "job" region */
	uint32_t index;              /* this worker */
	uint64_t heartbeat_ns;       /* how often @beat must be called at least */
	void (*beat)(void *arg);     /* a sign of life (a store: no syscall) */
	void *beat_arg;
	volatile sig_atomic_t *stop; /* set when the process must stop */
	/* The query of a name, NULL if none: query/queries.h's rt_query_find
	 * (the queries are a layer of their own, which the engine runs
	 * without naming). */
	const struct rt_query *(*query_find)(const char *name);
};

/* Run the job described in the segment's "job" region as worker
 * env->index until *env->stop.  0 on a clean stop, -ENOENT when the group
 * runs no query (no "job" region: the caller idles as a plain worker), an
 * error code when it failed (the worker's status line says why). */
int rt_engine_run(const struct rt_engine_env *env);

/* The bytes a worker keeps with a checkpoint: its splits' offsets as text,
 * "SPLIT:OFFSET" separated by spaces (a restore with any number of
 * workers finds each split's in some old worker's).  Length, or -E2BIG. */
int rt_source_bytes(char *buf, size_t len, const uint32_t *split, const uint64_t *off, uint32_t n);

#endif
