/*
 * coord.h — the checkpointer's coordination of a group's checkpoints over
 * the protocol region (shm/ckpt.h, which spells out the protocol; the
 * workers' side is include/sfs.h's task API).  This side:
 *   1. every interval, once every worker runs, request barrier N
 *      (ck_barrier_req = N);
 *   2. wait until every worker has sealed N (cw_sealed) and its state is
 *      staged (cw_snap_barrier) in <data>/stage/w<w>/b<N>;
 *   3. the synchronous phase: the checkpoint storage (ckstore.h) links
 *      only the new files, writes _metadata (config, the workers' bytes,
 *      versions, files) durably, and ck_done = N is published;
 *   4. then the staged directories are removed.  Workers that staged
 *      output (two-phase sinks) commit it when they see ck_done.
 * Barrier N+1 is requested only after N completed (or, once a worker has
 * finished its input, never again: a finished worker seals no barrier, so
 * the job's end commits the rest).  A restarted checkpointer picks up the
 * barrier in flight from ck_barrier_req and completes it.
 */
#ifndef SFS_CHECKPOINTER_COORD_H
#define SFS_CHECKPOINTER_COORD_H

#include <stdint.h>

#include "shm/ckpt.h"
#include "shm/segment.h"

struct ck_store;

struct ck_coord {
	struct sfs_ckpt *ck;
	const struct sfs_seg *seg;
	const char *name;          /* job name */
	struct ck_store *store;
	char root[SFS_CKPT_PATH_MAX + 32];
	uint64_t interval_ns;
	uint64_t next_ns;          /* when to request the next barrier */
	uint64_t inflight;         /* barrier id in flight, 0: none */
	uint64_t t_begin;
	uint64_t next_wait_log;
	int finishing;             /* a worker finished: no new checkpoints */
	/* A disk that cannot take the checkpoint (ENOSPC, EDQUOT, EIO, ...):
	 * its commit is retried every CK_IO_RETRY_NS (the checkpoint stays in
	 * flight, the last completed one stays valid); said once per episode
	 * through the slot (shm/proc.h, sfs_proc_io), counted in io_retries. */
	struct sfs_proc_slot *self;    /* set by the caller (NULL: no report) */
	uint64_t io_retry_at;
	uint64_t io_retries;
};

/* -ENOENT: no checkpoints in this segment (nothing to do). */
int sfs__ck_coord_open(struct ck_coord *c, struct sfs_seg *seg, const char *job);
void sfs__ck_coord_close(struct ck_coord *c);

/* One round; > 0 if it did work, 0 if idle, < 0 on an error that stops
 * the checkpointer (the supervisor restarts it).  *@poll_ns: how soon to
 * come back. */
int sfs__ck_coord_step(struct ck_coord *c, uint64_t now, uint64_t *poll_ns);

/*
 * The segment's state registry as one config value, "states=<id>.<kind>.
 * <merge>[:<operator name>][@<ttl ms>[e][r]].<name>/..." (e: the TTL is on
 * event time, r: refreshed on read; common/ttl.h): buffered and flushed keys carry the state id, and
 * ids follow the order in which workers happened to register, so a restore
 * re-creates the registry with the same ids (sup's restore) before any
 * worker starts.  -E2BIG if it does not fit in @len; SFS_EUSAGE for a
 * name with a space or '/'.
 */
int sfs__ck_coord_states(const struct sfs_seg *seg, char *buf, unsigned len);

/* Parse @val (the states= value) into @st (SFS_MAX_STATES entries, by id:
 * sd_state SFS_SDESC_READY where one is registered; the others untouched).
 * SFS_ECORRUPT naming the bad entry.  The one reader of the format
 * (restore, `sfs export`). */
int sfs__ck_coord_states_parse(const char *val, struct sfs_state_desc *st);

/* Parse @val into @seg's registry: entries written in their id slots, each
 * counter's operator checked against this process's.  Only before any
 * child starts. */
int sfs__ck_coord_states_restore(struct sfs_seg *seg, const char *val);

#endif
