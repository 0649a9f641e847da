/*
 * sink.h — a worker's share of the query result, written exactly once
 * through checkpoints (two-phase commit).
 *
 * The sink stands for the external system a streaming job writes to: rows
 * keyed by the result's primary key (upsert/delete), or whole rows counted
 * as a multiset (insert/retract) where the result has no key.  It lives in
 * the worker's own memory — a sink is not operator state.
 *
 * Epochs.  The records between barrier N-1 and barrier N form epoch N.  The
 * sink consolidates an epoch's changes in a table (the last upsert or delete
 * per key, the net count per multiset row) and, at the seal of barrier N,
 * writes them as a changelog `sink/w<w>-e<N>.pending` (tmp, fsync, rename):
 * the pre-commit.  Once checkpoint N is complete the worker renames its
 * pending files of epochs <= N to `.log` (the commit, when it sees the
 * completion: include/sfs.h's sfs_task_completed); a restore from
 * checkpoint C commits pending files <= C (they belong to C) and removes
 * newer ones, whose records the sources replay.  End of input writes the
 * final epoch (RT_EPOCH_FINAL), committed when every worker is done.
 * `sfs run --output` replays every committed changelog in epoch order
 * (rt_sink_replay) and writes the result sorted.
 *
 * Open addressing (linear probing, backward-shift deletion) over
 * malloc'ed entries; O(1) per change.
 */
#ifndef SFS_RUNTIME_SINK_H
#define SFS_RUNTIME_SINK_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define RT_EPOCH_FINAL UINT64_MAX
#define RT_SINK_DIR "sink"

enum rt_sink_mode {
	RT_SINK_DISCARD = 0,    /* no --output: count changes only */
	RT_SINK_EPOCH = 1,      /* a worker: consolidate an epoch, write changelogs */
	RT_SINK_TABLE = 2,      /* the replay: the result table itself */
};

struct rt_sink_ent;

struct rt_sink {
	int mode;
	int materialize;            /* mode != RT_SINK_DISCARD */
	struct rt_sink_ent **slot;
	size_t cap, used;
	uint64_t changes;
	uint64_t anomalies;         /* replay: rows retracted more than inserted */
};

int rt_sink_init(struct rt_sink *s, int mode);
void rt_sink_free(struct rt_sink *s);

int rt_sink_put(struct rt_sink *s, const void *key, size_t klen, const char *row, size_t rlen);
int rt_sink_del(struct rt_sink *s, const void *key, size_t klen);
int rt_sink_add(struct rt_sink *s, const char *row, size_t rlen, int64_t delta);

/* Paths of worker @w's changelog of epoch @epoch in @data_dir. */
void rt_sink_path(char *buf, size_t len, const char *data_dir, uint32_t w, uint64_t epoch,
		  int committed);

/* EPOCH mode: write the epoch's changes as @w's pending changelog of
 * @epoch (durable when it returns 0), then empty the table.  *@records
 * gets the changelog's record count. */
int rt_sink_write_epoch(struct rt_sink *s, const char *data_dir, uint32_t w, uint64_t epoch,
			uint64_t *records);

/*
 * Commit (rename .pending to .log) every pending changelog in @data_dir's
 * sink directory whose epoch is <= @upto; with @drop_newer, remove pending
 * ones above it and move committed ones above it aside (an abandoned
 * branch after a restore from an older checkpoint).  Idempotent.
 */
int rt_sink_commit_upto(const char *data_dir, uint64_t upto, int drop_newer);

/* The same with @drop_newer, not made durable: a rollback in place's
 * (supervisor/job.c), on its critical path — the directory's fsync took
 * 40-90 ms there.  Nothing depends on it surviving a power loss: every
 * restore from a checkpoint redoes it, and the next durable commit of the
 * directory (a worker's, rt_sink_commit_worker) carries it. */
int rt_sink_rollback(const char *data_dir, uint64_t upto);

/* The same for worker @w's pending changelogs only (a worker's commit when
 * it sees checkpoint @upto complete). */
int rt_sink_commit_worker(const char *data_dir, uint32_t w, uint64_t upto);

/* Remove every changelog (a fresh run). */
int rt_sink_reset(const char *data_dir);

/*
 * Replay every committed changelog in @data_dir in epoch order into a
 * result table and write it to @out_path: @header, then every row in
 * bytewise order (a multiset row as often as it counts).  *@rows gets the
 * row count (without the header).
 */
int rt_sink_replay(const char *data_dir, const char *header, const char *out_path,
		   uint64_t *rows);

/*
 * One changelog of the replay: the records of @f (named @path in messages)
 * applied to the TABLE-mode @t, then its trailer checked.  *@buf (*@cap
 * bytes, grown with realloc, the caller frees) holds one record at a time.
 * SFS_ECORRUPT naming @path for a bad header, record or trailer.  Apart so
 * a changelog in memory can be read on its own (tests/fuzz/fuzz_sinklog.c).
 */
int rt_sink_read_log(struct rt_sink *t, FILE *f, const char *path, char **buf, size_t *cap);

#endif
