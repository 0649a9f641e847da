/*
 * sfs_output.h — exactly-once output and source positions for a program on
 * sfs's checkpoints (include/sfs.h, "The checkpoint lifecycle"): the
 * recipe every program run under `sfs run --exec` needs, once, in the
 * library — what Flink's two-phase-commit sinks and split reassignment
 * give a Flink job.  Same rules as sfs.h: opaque handles, int returns (0 or
 * a negative code), sfs_last_error() names the file.  Docs: docs/output.md.
 *
 * EPOCH-COMMITTED OUTPUT (sfs_output_*)
 *
 * The records a worker emits between its seals of checkpoints N-1 and N
 * form epoch N.  They become visible only once checkpoint N is complete —
 * the checkpoint whose state produced them — so after any recovery the
 * visible output is exactly an uninterrupted run's:
 *
 *   sfs_output_open(task, dir, "clicks", ".csv", &o);  before the first seal
 *   sfs_output_write(o, line, len);                    pending, epoch open
 *   at barrier N:  sfs_barrier(ctx, N);
 *                  sfs_output_stage(o, N);             pre-commit: durable
 *                  sfs_task_sealed(task, N, ...);      only after the stage
 *   each poll:     sfs_output_commit(o);               commit epochs <= completed
 *   after sfs_worker_rollback() returned 0:  sfs_output_rollback(o);
 *
 * Files, all in @dir (which belongs to the job: nothing else writes there):
 *   <prefix>-<N, 20 digits>-w<W><suffix>        epoch N of worker W, committed
 *   .<prefix>-<N, 20 digits>-w<W><suffix>.pending   staged, not yet committed
 *   .<prefix>-w<W><suffix>.open                  the open epoch (buffered)
 * Committed files are never changed or removed by sfs; their names sort in
 * epoch order.  A worker whose epoch emitted nothing stages no file.
 *
 * The contract, per output:
 *  - stage(N): the open epoch's bytes are written, fsynced and renamed to
 *    epoch N's pending name, and the directory fsynced, before it returns;
 *    so a checkpoint N that completes always finds every worker's epoch N
 *    on disk (call it between sfs_barrier and sfs_task_sealed, never after).
 *  - commit: every epoch this process staged with N <= sfs_task_completed()
 *    is renamed to its committed name, then the directory is fsynced.
 *  - open, and rollback (after a rollback in place), settle what an earlier
 *    incarnation left, as of the checkpoint M this start is from
 *    (sfs_task_info().checkpoint; 0 on a fresh start): pending epochs
 *    N <= M are committed (their checkpoint completed; the worker that
 *    would have committed them died first), pending epochs N > M are
 *    dropped (their records are read again from M's positions), and the
 *    open epoch is dropped.  Worker W settles the files of worker W;
 *    worker 0 also those of old workers >= the job's workers (a rescale
 *    down).  So a worker never stages over a file it has not settled.
 *
 * Crash guarantees (kill -9 at any instruction, or power loss: every step
 * that makes a file visible is fsynced first):
 *  - No loss: an epoch N <= M is on disk as pending (staged before N was
 *    sealed) or committed; the next open commits it.
 *  - No duplicate: an epoch > M is never committed — its checkpoint did
 *    not complete in the lineage restored — and its pending file is
 *    removed before the worker stages that id again.  A commit renames
 *    only what its own process staged, so a slow settle cannot be raced.
 *  - Requires: every worker opens its outputs before its first seal (the
 *    invariant above: all files of an earlier run are settled before any
 *    checkpoint of this run completes); the stage before sfs_task_sealed;
 *    sfs_output_rollback after a rollback in place (stage refuses
 *    otherwise, SFS_EUSAGE).
 *  - Not covered: a restore from a checkpoint older than the newest
 *    complete one (`--restore chk-K`) emits again the epochs after K that
 *    were already committed (as Flink does: committed output is final).
 *    A reader may see an epoch's committed file once per epoch and worker,
 *    in epoch order; it must not read pending or open files.
 *
 * Costs: write is a memcpy into a 64 KiB buffer (a write(2) per 64 KiB);
 * stage of a non-empty epoch: fsync + rename + directory fsync; commit: a
 * load of sfs_task_completed when nothing is due, else a rename per epoch
 * and one directory fsync; open and rollback: one scan of @dir.  Memory:
 * the buffer and a list of staged, uncommitted ids (one checkpoint is in
 * flight at a time: one or two).
 *
 * Threads: an output is single-threaded, like the program loop that seals
 * (its task's calls it makes are loads).
 *
 * Errors: a failed write(2), fsync or rename returns its -errno and keeps
 * what it could not write, so the call can be repeated (the program may
 * report it with sfs_task_io() and retry: back-pressure on a full disk).
 */
#ifndef SFS_OUTPUT_H
#define SFS_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "sfs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfs_output sfs_output_t;

/* The longest @prefix and @suffix (bytes, without the NUL). */
#define SFS_OUTPUT_NAME_MAX 64

/*
 * sfs_output_open - an epoch-committed output of worker @t in @dir (made if
 * missing, 0755), its files named by @prefix (1..SFS_OUTPUT_NAME_MAX bytes
 * of [A-Za-z0-9._-], not starting with '.') and @suffix (NULL or "", or up
 * to SFS_OUTPUT_NAME_MAX bytes of the same set: ".csv").  Settles what an
 * earlier incarnation left (above) before it returns.  Several outputs of
 * one worker take distinct prefixes.  SFS_EUSAGE: a bad name or argument.
 * Cost: a scan of @dir; the renames and removals settling needs, and one
 * directory fsync when there were any.
 */
int sfs_output_open(sfs_task_t *t, const char *dir, const char *prefix, const char *suffix,
		    sfs_output_t **out);

/* Append @len bytes to the open epoch.  A memcpy; a write(2) of the open
 * file per 64 KiB.  -errno of a failed write (nothing of @buf taken). */
int sfs_output_write(sfs_output_t *o, const void *buf, size_t len);

/*
 * sfs_output_stage - the pre-commit of epoch @id: call after sfs_barrier(ctx,
 * @id) and before sfs_task_sealed(t, @id, ...).  The open epoch's bytes
 * become epoch @id's pending file, durably (above), and a new epoch opens.
 * SFS_EUSAGE for an id not above the last one staged or not requested yet,
 * or when the group has rolled back since the output was opened or rolled
 * back (call sfs_output_rollback).  An empty epoch: no file, no syscall.
 */
int sfs_output_stage(sfs_output_t *o, uint64_t id);

/*
 * sfs_output_commit - commit every epoch staged by this output with an id
 * <= sfs_task_completed().  Call it where the program polls the checkpoint
 * words, and once more after the last checkpoint completed.  0 (also when
 * nothing was due: one load).  *@committed, if not NULL: the newest epoch
 * committed so far by this output (0: none).
 */
int sfs_output_commit(sfs_output_t *o, uint64_t *committed);

/*
 * sfs_output_rollback - the group rolled back in place
 * (sfs_worker_rollback() or sfs_task_rollback_wait() returned 0): drop the
 * open epoch and this process's staged epochs above the checkpoint rolled
 * back to, and settle @dir as sfs_output_open does.  Call before the first
 * stage after the rollback.  Cost: as sfs_output_open.
 */
int sfs_output_rollback(sfs_output_t *o);

/* Close the open file (its bytes stay uncommitted: an epoch not staged is
 * dropped by the next open) and free @o.  Commits nothing. */
int sfs_output_close(sfs_output_t *o);

/*
 * SOURCE POSITIONS (sfs_positions_*)
 *
 * A source is read as splits (a Kafka partition, a file, a key group of a
 * topic every worker filters by key: whatever the program's source
 * partitions by), each with a position (an offset: every record before it
 * is in the checkpoint's state).  A worker saves the positions of the
 * splits it reads with its seal, as ranges of splits that share a
 * position; after any restore — the same parallelism, or another one after
 * a rescale — a worker looks up, for each split it now reads, the position
 * the old worker that read it saved, whichever old worker that was.  The
 * positions are the bytes of sfs_task_sealed (a small header, the ranges,
 * then the program's own bytes: sfs_positions_bytes gives them back).
 *
 * Cost: seal is an encode (16 bytes + 24 per range) and sfs_task_sealed;
 * a lookup scans every old worker's ranges (O(old workers x ranges)):
 * look each split up once at start, not per record.
 */

struct sfs_split_range {
	uint64_t first, last;  /* splits first..last, inclusive */
	uint64_t pos;          /* where reading them resumes */
};

/* The most ranges one seal holds with no bytes of the program's own:
 * (SFS_TASK_BYTES_MAX - 16) / 24. */
#define SFS_POSITIONS_MAX 170u

/*
 * sfs_positions_seal - sfs_task_sealed(t, @id, ...) with @n ranges of
 * positions and @len bytes of the program's own (@bytes may be NULL when
 * @len is 0).  SFS_EUSAGE: ranges with first > last, or more than fit
 * (16 + 24 * n + len > SFS_TASK_BYTES_MAX); else sfs_task_sealed's answer.
 */
int sfs_positions_seal(sfs_task_t *t, uint64_t id, const struct sfs_split_range *r, unsigned n,
		       const void *bytes, size_t len);

/*
 * sfs_positions_find - the position saved for split @split by the old
 * workers of the checkpoint this start is from: 0 and *@pos; the smallest
 * if several old workers saved it.  -ENOENT on a fresh start or when no
 * old worker saved the split (it starts from its beginning: the program's
 * call); SFS_ECORRUPT for bytes not written by sfs_positions_seal.
 */
int sfs_positions_find(const sfs_task_t *t, uint64_t split, uint64_t *pos);

/*
 * sfs_positions_span - over the splits first..last that old workers saved:
 * the smallest position (*@min: where a worker reading them all starts) and
 * the largest (*@max: until it has passed it, a worker that reads its
 * splits as one stream holds state from further on than its slowest
 * position says, and must not seal).  -ENOENT when none was saved.
 */
int sfs_positions_span(const sfs_task_t *t, uint64_t first, uint64_t last, uint64_t *min,
		       uint64_t *max);

/*
 * sfs_positions_restored - old worker @prev_worker's saved ranges: up to
 * @cap into @r, *@n the number it saved (more than @cap: only @cap
 * copied), for a program that assigns splits its own way.  -ENOENT on a
 * fresh start, SFS_EUSAGE for an index >= prev_workers, SFS_ECORRUPT.
 */
int sfs_positions_restored(const sfs_task_t *t, uint32_t prev_worker, struct sfs_split_range *r,
			   unsigned cap, unsigned *n);

/* The program's own bytes old worker @prev_worker sealed with its
 * positions (a view living as long as the task). */
int sfs_positions_bytes(const sfs_task_t *t, uint32_t prev_worker, struct sfs_view *out);

#ifdef __cplusplus
}
#endif
#endif /* SFS_OUTPUT_H */
