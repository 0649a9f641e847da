/*
 * memdump.h — the memory target's checkpoint: a full dump of a worker's
 * store, and its load at a restore.
 *
 * The `memory` backend is the heap-backend baseline, so its checkpoint
 * serializes the whole state (Flink's heap backend does the same): every
 * live value and map entry as a (kind, namespace, key, value) record.  Map
 * heads are not written (a load recreates them) and hashes are recomputed
 * at load, so a dump does not depend on the store's layout or hash.
 *
 * File: "SFSMDMP1" u32 worker u32 0, then records { u8 kind ('V' value or
 * counter, 'E' map entry), u8 pad[3], u32 klen, u32 vlen, u32 pad, u64 ns,
 * key, value }, then "SFSMEND1" u64 records u64 hash (chained over the
 * records).  A file that is truncated or whose hash differs is refused by
 * name.
 *
 * A checkpoint's dump runs beside the flush (sfs_mdump_start): the main
 * thread freezes the version of the barrier's commit (sfs_mstore_freeze:
 * a list of its records, pinned in shared memory) and a dump thread of the
 * compactor writes that list to the file while the main thread flushes
 * newer buffers.  Who owns what:
 *  - the frozen list, the records it names and ms_dump_*: the main thread
 *    writes them before the pin's release store and after the thaw; the
 *    dump thread only reads them, between its start and its done flag;
 *  - the dump file (<path>.tmp, renamed to <path> after fsync): the dump
 *    thread alone;
 *  - struct sfs_mdump_job: the main thread, except dj_rc, dj_records and
 *    dj_err, which the thread writes before its release store of dj_done
 *    (the main thread reads them after an acquire load of it, then joins).
 * The snapshot is reported complete (sfs_mdump_poll: id and seq, which the
 * flusher publishes as rw_snap_barrier) only after the thaw, which follows
 * the rename.  A compactor killed mid-dump leaves the pin: its successor's
 * poll restarts the thread on the same list (the file is written again
 * from scratch); killed after the thaw, its successor reports the last
 * durable dump once more (publishing is idempotent).  The thread never
 * beats (child.h): a main thread that waits for it (a semispace copy into
 * the pinned half, sfs_mdump_wait) beats while it waits.
 */
#ifndef SFS_STORE_MEMDUMP_H
#define SFS_STORE_MEMDUMP_H

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>

#include "store/memory/memory.h"

/* Write @ms (worker @worker) to @path (tmp, fsync, rename). */
int sfs_mdump_write(const struct sfs_mstore *ms, uint32_t worker, const char *path,
		    uint64_t *records);

/* One dump thread of a writer (process-local; zeroed at open). */
struct sfs_mdump_job {
	pthread_t dj_thread;
	int dj_running;          /* main: a thread was started and not joined */
	int dj_stop;             /* main, relaxed: ask the thread to give up (close) */
	int dj_done;             /* thread, release: dj_rc and the rest are set */
	int dj_rc;               /* thread: 0 or the error */
	uint64_t dj_records;     /* thread: records written */
	char dj_err[512];        /* thread: sfs_last_error() of a failure */
	uint64_t dj_retry_ns;    /* main: when a failed dump is tried again */
	uint64_t dj_reported;    /* main: the last ms_dump_done poll returned */
	uint64_t dj_started_ns;  /* main: start of the running attempt */
	uint64_t dj_last_ns;     /* main: length of the last dump that completed */
	const struct sfs_mstore *dj_ms;
};

/*
 * sfs_mdump_start - freeze the version of the last commit as dump @id and
 * start writing it to @path (its directory exists) in a thread.  0 when
 * the version is pinned (the file follows: sfs_mdump_poll says when);
 * SFS_ERUNNING while an older dump is still in flight (call again);
 * SFS_EFULL (the frozen list does not fit the store), or another error.
 */
int sfs_mdump_start(struct sfs_mstore_writer *w, struct sfs_mdump_job *j, uint64_t id,
		    const char *path);

/*
 * sfs_mdump_poll - the main thread's look at the dump (each flush step):
 * joins a finished thread and thaws its pin, restarts a failed one after a
 * second, starts one for a pin a killed predecessor left.  1 with *@id and
 * *@seq once per dump made durable (and once more after a restart for the
 * last one), 0 otherwise, < 0 when an attempt failed (it will be retried).
 */
int sfs_mdump_poll(struct sfs_mstore_writer *w, struct sfs_mdump_job *j, uint64_t *id,
		   uint64_t *seq);

/* True while a dump is pinned or a completed one is unreported. */
int sfs_mdump_busy(const struct sfs_mstore_writer *w, const struct sfs_mdump_job *j);

/* Wait (beating) until the pinned dump is durable and thawed: the writer's
 * pin_wait.  Failed attempts are retried.  0 or the error of a stop. */
int sfs_mdump_wait(struct sfs_mstore_writer *w, struct sfs_mdump_job *j);

/* Stop and join the thread (close): a pin it leaves is redone by the next
 * writer. */
void sfs_mdump_stop(struct sfs_mstore_writer *w, struct sfs_mdump_job *j);

/*
 * Load the records of @path whose key group is in [@kg_lo, @kg_hi] into
 * the store as buffer 0 (tag 0: below every buffer of the new run).
 * Idempotent (the store's tags skip what a previous attempt loaded), so a
 * load cut short by a kill is simply done again.
 */
int sfs_mdump_load(struct sfs_mstore_writer *w, const char *path, uint32_t kg_lo,
		   uint32_t kg_hi, uint64_t *records);

/* One record of a dump, valid during the callback. */
struct sfs_mdump_rec {
	int kind;                /* 'V' value or counter, 'E' map or list entry */
	uint64_t ns;
	const unsigned char *key;  /* kg | state | rest */
	uint32_t klen;
	uint32_t plen;           /* 'E': the length of its parent key */
	const void *val;
	uint32_t vlen;
};

/*
 * Read @path record by record, checked as it goes (header, every record's
 * shape, the trailer's count and hash): @fn per record (a non-zero return
 * stops the read and is passed on).  A checksum error comes after the
 * records were handed out: a caller that must not act on a bad file
 * buffers them (`sfs export` only prints, then exits 1 naming the file).
 * *@records (NULL: not wanted): records read.  sfs_mdump_load's reader,
 * and the memory target's scan.
 */
int sfs_mdump_read(const char *path, int (*fn)(void *arg, const struct sfs_mdump_rec *r),
		   void *arg, uint64_t *records);

/* sfs_mdump_read of an open stream @f (named @path in messages), from its
 * current position; @f stays open.  A dump in memory is read with
 * fmemopen (tests/fuzz/fuzz_memdump.c). */
int sfs_mdump_read_stream(FILE *f, const char *path,
			  int (*fn)(void *arg, const struct sfs_mdump_rec *r), void *arg,
			  uint64_t *records);

#endif
