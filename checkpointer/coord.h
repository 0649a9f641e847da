/*
 * coord.h — the checkpointer's coordination of a query job's checkpoints.
 *
 * One checkpoint in flight at a time (Flink's default):
 *   1. every --checkpoint-interval the coordinator requests barrier N
 *      (rj_barrier_req = N); sources inject it at their next block boundary;
 *   2. each worker aligns it, writes its sink epoch N (pending), records its
 *      source offset, seals its state and publishes rw_last_barrier = N;
 *      the snapshotter of its state (the compactor after flushing the
 *      buffers of N, or the worker itself for rocksdb-direct) stages the
 *      state's files in <data>/stage/w<w>/b<N> and publishes rw_snap_barrier;
 *   3. when every worker has done both, the synchronous phase: the
 *      checkpoint storage (ckstore.h) links only the new files, writes
 *      _metadata (offsets, versions, files) durably, and the coordinator
 *      publishes rj_ckpt_done = N;
 *   4. then the sinks' pending changelogs of epochs <= N are committed and
 *      the staged directories removed.
 * Barrier N+1 is requested only after N completed (or, once a worker has
 * finished its input, never again: a finished worker seals no barrier, so
 * the job's end commits the rest).  A restarted checkpointer picks up the
 * barrier in flight from rj_barrier_req and completes it.
 */
#ifndef SFS_CHECKPOINTER_COORD_H
#define SFS_CHECKPOINTER_COORD_H

#include <stdint.h>

#include "runtime/job.h"
#include "shm/segment.h"

struct ck_store;

struct ck_coord {
	struct rt_job *job;
	const struct sfs_seg *seg;
	const char *name;          /* job name */
	struct ck_store *store;
	char root[RT_PATH_MAX + 32];
	uint64_t interval_ns;
	uint64_t next_ns;          /* when to request the next barrier */
	uint64_t inflight;         /* barrier id in flight, 0: none */
	uint64_t t_begin;
	uint64_t next_wait_log;
	int finishing;             /* a worker finished: no new checkpoints */
};

/* -ENOENT: no query job or no checkpoints in this segment (nothing to do). */
int ck_coord_open(struct ck_coord *c, struct sfs_seg *seg, const char *job);
void ck_coord_close(struct ck_coord *c);

/* One round; > 0 if it did work, 0 if idle, < 0 on an error that stops
 * the checkpointer (the supervisor restarts it).  *@poll_ns: how soon to
 * come back. */
int ck_coord_step(struct ck_coord *c, uint64_t now, uint64_t *poll_ns);

/* The "key=value ..." config string of a job (what a restore must match). */
void ck_coord_config(const struct rt_job *job, char *buf, unsigned len);

/*
 * The segment's state registry as one config value, "states=<id>.<kind>.
 * <merge>.<name>/...": buffered and flushed keys carry the state id, and
 * ids follow the order in which workers happened to register, so a restore
 * re-creates the registry with the same ids (sup's restore) before any
 * worker starts.  -E2BIG if it does not fit in @len; SFS_EUSAGE for a
 * name with a space or '/'.
 */
int ck_coord_states(const struct sfs_seg *seg, char *buf, unsigned len);

/* Parse @val (the states= value) into @seg's registry: entries written in
 * their id slots.  Only before any child starts. */
int ck_coord_states_restore(struct sfs_seg *seg, const char *val);

#endif
