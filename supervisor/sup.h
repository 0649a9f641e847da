/*
 * sup.h — the sfs command: subcommands share this header.
 */
#ifndef SFS_SUPERVISOR_SUP_H
#define SFS_SUPERVISOR_SUP_H

#include <stdint.h>

#include "shm/segment.h"

int sfs_cmd_run(int argc, char **argv);
int sfs_cmd_stat(int argc, char **argv);
int sfs_cmd_top(int argc, char **argv);
int sfs_cmd_get(int argc, char **argv);
int sfs_cmd_clean(int argc, char **argv);
int sfs_cmd_gen(int argc, char **argv);
int sfs_cmd_checkpoints(int argc, char **argv);
int sfs_cmd_savepoint(int argc, char **argv);
int sfs_cmd_inspect(int argc, char **argv);
int sfs_cmd_export(int argc, char **argv);
int sfs_cmd_version(int argc, char **argv);

/* `sfs run --query`: the query job's arguments (supervisor/job.c). */
struct sup_query {
	const char *query;       /* NULL: a plain group, or an --exec job */
	char **exec;             /* --exec: the workers' program and its arguments */
	int host;                /* --host: the workers are an engine's threads (exec "host") */
	const char *backend;
	const char *data_dir;
	const char *output;      /* NULL: results are discarded (a blackhole sink) */
	uint64_t events;
	double rate;
	double max_rate;         /* wall-clock throttle of the sources, events/s (0: none) */
	uint32_t block_events;
	uint64_t checkpoint_ns;  /* 0: no barriers */
	uint64_t store_bytes;    /* memory target store per worker */
	uint64_t cache_bytes;    /* value cache per worker (0: the default, 8 MiB) */
	uint64_t buffer_bytes;   /* each write buffer of a worker (0: the default, 16 MiB) */
	uint64_t state_ttl_ms;   /* --state-ttl: the queries' state TTL (0: none) */
	uint64_t rdb_memory_bytes; /* --rocksdb-memory-mb: rocksdb-direct's managed memory
				    * per worker (0: RT_RDB_MEMORY_DEFAULT) */
	int json;
	const char *restore;     /* --restore latest|DIR (NULL: a fresh start) */
	uint64_t recover_id;     /* a recovery: this run's last checkpoint (0: none) */
	uint32_t retain;         /* checkpoints kept (0: the default) */
	unsigned recoveries;     /* job restarts so far (for the summary) */
};

/* The backends of --backend (supervisor/backends.c).  Who owns backend
 * @name's files on disk (store/target.h: instance root, restore, rebuild,
 * forget), or NULL for an unknown name; the flush target its compactor
 * runs, or NULL when it has none (rocksdb-direct: its workers write
 * RocksDB themselves); every name, for messages ("memory, rocksdb, ..."). */
struct sfs_target_ops;
const struct sfs_target_ops *sup_backend_files(const char *name);
const struct sfs_target_ops *sup_backend_target(const char *name);
const char *sup_backend_names(void);

int sup_query_check(struct sup_query *q, unsigned workers);
uint64_t sup_query_chan_bytes(unsigned workers);
uint64_t sup_query_segment_bytes(const struct sup_query *q, unsigned workers);
int sup_query_setup(struct sup_query *q, struct sfs_seg *seg, unsigned workers);
/* The last checkpoint this run completed, else the one it restored from
 * (0: none): where a recovery starts. */
uint64_t sup_query_last_checkpoint(void);
/* 0 running, 1 every worker done, -1 a worker failed. */
int sup_query_tick(struct sup_query *q, uint64_t now);
/* What the group's children used, summed per role over every child the
 * supervisor reaped in this run (restarted children and earlier
 * incarnations of a recovered job included), from wait4()'s rusage, which
 * covers every thread of the child: run.c fills it at each reap. */
struct sup_role_usage {
	uint64_t cpu_ns;         /* user + system */
	uint64_t write_bytes;    /* ru_oublock x 512: the kernel's write_bytes (/proc/PID/io) */
	uint64_t max_rss_kb;     /* the largest ru_maxrss of one child of the role */
	unsigned processes;      /* children reaped */
};

struct sup_usage {
	struct sup_role_usage role[SFS_ROLE_MAX];   /* by enum sfs_role */
	uint64_t shm_bytes;      /* the segments' allocated bytes at the end (st_blocks:
				  * pages ever touched, as no page is given back) */
	uint64_t shm_reserved;   /* the segments' used bytes (regions carved) */
	/* What the hang detector saw over the run (run.c, tend()): workers
	 * killed as hung, and episodes of a worker held by its state backend's
	 * own back-pressure longer than the hang timeout (spared), their total
	 * time and the last one's reason (runtime/backend.h, rt_held_name). */
	unsigned hang_kills;
	unsigned held_episodes;
	uint64_t held_ns;
	const char *held_why;
};

/* Worker @w of the query job: is it held by its state backend's own
 * back-pressure (enum rt_held, RT_HELD_NONE if not)?  rocksdb-direct says
 * so in its status (rw_held, renewed by its watcher thread: a report older
 * than RT_HELD_FRESH_MS is stale, its process stopped or hung whole);
 * sfs's buffers in the worker's control (wc_waiting: no free write buffer,
 * waiting for the compactor).  O(1). */
unsigned sup_query_held(uint32_t w);
/* 1 (and @why) if worker @w wrote state but never called sfs_task_finish
 * (its phase neither FINISHED nor ENDED): what it wrote since its last
 * sealed checkpoint is in no checkpoint.  For an --exec worker's exit 0. */
int sup_query_worker_unfinished(uint32_t w, char *why, size_t n);

/* Fold this incarnation's counters that live in its segments (the bytes of
 * the workers' buffers flushed, over every node's segment, the checkpoint
 * durations) into the run's totals: before a recovery destroys the
 * segments, and once before sup_query_finish. */
void sup_query_carry(struct sfs_seg *segs, int nsegs);
/* A recovery begins (a restart: after sup_query_carry of the old
 * incarnation): the CLOCK_MONOTONIC ns the supervisor saw the worker's
 * death and the old group (or its workers, in place) was stopped; its kind
 * ("restart" or "in-place").  The summary's recovery_* lists
 * take its restore's end from the next sup_query_setup and its first record
 * from the next incarnation's workers (rw_first_record_ns). */
void sup_query_recovery(uint64_t detect_ns, uint64_t stopped_ns, const char *kind);
/*
 * Rollback in place, the protocol's supervisor side (shm/ckpt.h, steps a-c;
 * run.c halts or kills the workers before, wakes the compactors and the
 * checkpointer and bounds the wait, and starts the dead workers after):
 *  - inproc: worker w said it rolls back in its process (it is halted,
 *    not killed);
 *  - halt: ask those workers to halt for rollback R (their bells rung);
 *    halted: worker w acked it;
 *  - ask: every worker's phase back to STARTING, rollback R requested;
 *  - poll: 1 once the checkpointer and the compactor of every worker with
 *    state answered R, 0 while not, -1 when one could not (@why says who
 *    and why: the caller falls back to a restart from files);
 *  - finish: the start words of checkpoint ck_rb_to (its workers' bytes
 *    from its _metadata), the sinks rolled back to it, the exchange
 *    channels emptied, the workers' status reset; 0, or -1 (@why).
 *  - go: R is done, the halted workers start over from ck_rb_to.
 * The workers are halted or gone from ask to go: these words have no
 * other writer.
 */
int sup_query_rollback_inproc(uint32_t w);
void sup_query_rollback_halt(void);
int sup_query_rollback_halted(uint32_t w);
void sup_query_rollback_go(void);
void sup_query_rollback_ask(void);
int sup_query_rollback_poll(char *why, size_t n);
int sup_query_rollback_finish(struct sup_query *q, char *why, size_t n);
/* The checkpoint the last rollback returns to (ck_rb_to), or UINT64_MAX
 * while the checkpointer has not answered it. */
uint64_t sup_query_rollback_to(void);
/* The open recovery's end, read from the workers' status before a
 * rollback resets it (a restart's: sup_query_carry). */
void sup_query_recovery_close(void);
/* The rollback's end (its restore, in the summary's terms): now. */
void sup_query_recovery_restored(void);
/* Merge the result and print the summary (@u: the children's resources);
 * the exit code. */
int sup_query_finish(struct sup_query *q, int ok, const struct sup_usage *u);

#endif
