/*
 * snapshot.h — a running group's numbers, read from its segments: one
 * snapshot (struct sup_snap) taken by one function, which walks the
 * segments once.  `sfs stat` (text, --json and --prometheus), `sfs run
 * --metrics-addr` (metrics.c, metrics_http.c) and `sfs top` (top.c) all
 * read the group through sup_snap_take, so they agree on every number.
 *
 * A snapshot is a racy read of counters their owners keep updating with
 * relaxed stores (each one untorn, no two of them consistent with each
 * other): good for reports, never a synchronisation point.  Taking one
 * takes no lock and writes nothing in shared memory: the workers' path is
 * never slowed by a reader.
 */
#ifndef SFS_SUPERVISOR_SNAPSHOT_H
#define SFS_SUPERVISOR_SNAPSHOT_H

#include <stdint.h>

#include "shm/segment.h"

#define SUP_SNAP_MAX_NODES 16
#define SUP_SNAP_MAX_WORKERS 128

struct sup_snap_proc {
	char role[16];
	uint32_t index;
	int pid;
	uint32_t state;            /* enum sfs_child_state; RUNNING for the supervisor */
	int child;                 /* 1: from sh_children (restarts, hangs known) */
	uint32_t restarts, hang_kills;
	int cpu, node;
	int64_t heartbeat_age_ms;  /* -1: not registered */
	uint64_t qsbr;
};

struct sup_snap_seg {
	int node;
	char path[256];
	uint64_t size, used, header, page_size;
	unsigned regions;
	int huge, owner_pid;
};

struct sup_snap_worker {
	uint32_t worker;
	int node;
	int has_ctl;               /* a keyed-state region (not rocksdb-direct) */
	uint32_t kg_start, kg_end;
	uint32_t nbufs, nfree, nactive, nsealed, nretiring;
	uint64_t buf_bytes, seq, flushed_seq, barrier, barriers, spills, stalls, stall_ns;
	uint64_t sealed_bytes, restarts, flushes, flush_entries, flush_ns, ttl_dropped;
	int has_cache;             /* its value cache's counters */
	uint64_t vc_hits, vc_neg_hits, vc_misses, vc_entries, vc_bytes, vc_capacity,
		vc_evictions;
	int has_rt;                /* a query job's runtime report (runtime/job.h) */
	uint64_t events, records, rt_barriers, seal_ns, seal_max_ns, seal_cpu_ns, rows;
	uint64_t sink_epoch, sink_committed;
	uint32_t rt_state;         /* enum rt_worker_state */
};

struct sup_snap {
	char job[SFS_JOB_NAME_MAX + 1];
	char backend[32];          /* the flush target ("" none), or the job's backend */
	char query[32];            /* "" when not a query job */
	uint64_t taken_ns;         /* sfs_now_ns() of the snapshot */
	uint64_t generation;
	int nsegs;
	struct sup_snap_seg segs[SUP_SNAP_MAX_NODES];
	int nprocs;
	struct sup_snap_proc procs[SFS_MAX_CHILDREN + SFS_MAX_PROCS];
	int nworkers;
	struct sup_snap_worker workers[SUP_SNAP_MAX_WORKERS];
	int has_ckpt;              /* a job with the checkpoint region */
	uint64_t ck_count, ck_aborted, ck_last_ns, ck_max_ns, ck_links, ck_refs;
	uint64_t ck_done, ck_requested, ck_interval_ms, ck_restored_id;
	uint32_t ck_recoveries;
	uint32_t ck_recent_us[8];  /* durations of the newest completed, newest first */
	unsigned ck_nrecent;
	char data_dir[256];        /* the job's data directory ("" none) */
	int has_job;               /* a query job's region */
	uint64_t job_events;       /* events of the whole run */
};

/* Attach every node's segment of @job read-only in use (nothing is written;
 * the mapping is the caller's own, so a group that recovers, destroying its
 * segments, never pulls memory from under a reader): 0, or the attach error
 * (sfs_last_error() says which segment and why). */
int sup_snap_attach(const char *job, struct sfs_seg *segs, int *nsegs);
void sup_snap_detach(struct sfs_seg *segs, int nsegs);

/* Read everything shared memory knows of the group into @s.  O(procs +
 * workers + regions), no syscall but the clock. */
void sup_snap_take(struct sfs_seg *segs, int nsegs, struct sup_snap *s);

/* enum sfs_child_state's name. */
const char *sup_child_state_name(uint32_t st);

#endif
