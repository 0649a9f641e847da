/*
 * sup.h — the sfs command: subcommands share this header.
 */
#ifndef SFS_SUPERVISOR_SUP_H
#define SFS_SUPERVISOR_SUP_H

#include <stdint.h>

#include "shm/segment.h"

int sfs_cmd_run(int argc, char **argv);
int sfs_cmd_stat(int argc, char **argv);
int sfs_cmd_clean(int argc, char **argv);
int sfs_cmd_bench(int argc, char **argv);
int sfs_cmd_gen(int argc, char **argv);
int sfs_cmd_checkpoints(int argc, char **argv);
int sfs_cmd_savepoint(int argc, char **argv);

/* `sfs run --query`: the query job's arguments (supervisor/job.c). */
struct sup_query {
	const char *query;       /* NULL: a plain group */
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
	int json;
	const char *restore;     /* --restore latest|DIR (NULL: a fresh start) */
	uint64_t recover_id;     /* a recovery: this run's last checkpoint (0: none) */
	uint32_t retain;         /* checkpoints kept (0: the default) */
	unsigned recoveries;     /* job restarts so far (for the summary) */
};

int sup_query_check(struct sup_query *q, unsigned workers);
uint64_t sup_query_chan_bytes(unsigned workers);
uint64_t sup_query_segment_bytes(const struct sup_query *q, unsigned workers);
int sup_query_setup(struct sup_query *q, struct sfs_seg *seg, unsigned workers);
/* The last checkpoint this run completed, else the one it restored from
 * (0: none): where a recovery starts. */
uint64_t sup_query_last_checkpoint(void);
/* 0 running, 1 every worker done, -1 a worker failed. */
int sup_query_tick(struct sup_query *q, uint64_t now);
/* Merge the result and print the summary; the exit code. */
int sup_query_finish(struct sup_query *q, int ok);

/* Parse a decimal in [lo, hi] for option @opt or exit 2 with a message. */
long sfs_arg_num(const char *cmd, const char *opt, const char *v, long lo, long hi);

/* Number of NUMA nodes the group spans (1 without libnuma support). */
int sfs_node_count(void);

#endif
