/*
 * job.h — the shared description of a running query job: region "job" of
 * node 0's segment, and the exchange channels in region "chans".
 *
 * Ownership (who writes which bytes, and how it is published):
 *  - rj_* configuration: the supervisor, before it starts any worker; then
 *    read-only for the life of the segment.  Workers find the region by name
 *    (the directory entry is published with a release store), so no further
 *    ordering is needed.
 *  - Checkpoints are not here: the protocol is the group's (shm/ckpt.h),
 *    and the workers use it through include/sfs.h's task API like any
 *    program would — the split offsets they keep with a checkpoint are
 *    their task bytes (engine.c).
 *  - rj_ws[w]: worker w only (rw_held: its backend's watcher thread),
 *    relaxed stores of counters (monotone; readers are reports), rw_state with a release store after the part file is
 *    closed, so a reader that sees RT_W_DONE sees a complete file.
 *  - rj_bell[w]: the doorbell of worker w: producers bump bl_word and wake
 *    when bl_sleeping says the worker sleeps (set/cleared by worker w around
 *    its futex wait, with a full fence before its last look at its inputs).
 *  - Channels (runtime/chan.h): one SPSC byte ring per (stage, producer,
 *    consumer); the producer worker writes the head line and the bytes, the
 *    consumer the tail line.
 */
#ifndef SFS_RUNTIME_JOB_H
#define SFS_RUNTIME_JOB_H

#include <stdint.h>

#include "runtime/util.h"

#define RT_JOB_REGION   "job"
#define RT_CHAN_REGION  "chans"
#define RT_JOB_MAGIC    0x73667320716a6f62ull /* "sfs qjob" */
#define RT_JOB_VERSION  7u  /* 7: rw_events_before, rw_held, rj_rdb_memory_bytes */
#define RT_MAX_WORKERS  48u
#define RT_MAX_STAGES   3u
#define RT_NAME_MAX     32u
#define RT_PATH_MAX     256u

/* A held report older than this is stale: the watcher that renews it is
 * stopped or hung with its process, which is then hung, not held. */
#define RT_HELD_FRESH_MS 1000u

enum rt_worker_state {
	RT_W_STARTING = 0,
	RT_W_RUNNING = 1,
	RT_W_DONE = 2,     /* end of input reached, result part committed */
	RT_W_FAILED = 3,   /* rw_error says why */
};

struct rt_worker_status {
	uint64_t rw_events;        /* source events generated */
	uint64_t rw_records;       /* records processed by operators */
	uint64_t rw_source_block;  /* next block of this worker's source split */
	uint64_t rw_barriers;      /* barriers sealed */
	uint64_t rw_last_barrier;  /* id of the last one */
	uint64_t rw_stall_ns;      /* back-pressure inside barriers */
	uint64_t rw_seal_ns;       /* time in barriers: seal, sink epoch, snapshot */
	uint64_t rw_seal_max_ns;   /* the longest one */
	uint64_t rw_seal_cpu_ns;   /* the worker's CPU time in them (wall minus this: descheduled or waiting) */
	uint64_t rw_start_ns, rw_end_ns;
	uint64_t rw_rows;          /* result rows in its committed part */
	uint32_t rw_state;         /* enum rt_worker_state (release) */
	uint32_t rw_pad;
	uint64_t rw_sink_epoch;    /* last epoch whose changelog is written (pending) */
	uint64_t rw_sink_committed; /* last epoch it committed (checkpoint complete) */
	uint64_t rw_first_record_ns; /* CLOCK_MONOTONIC when this incarnation's first record
				      * was processed (0: none yet); written once */
	uint64_t rw_events_before; /* events its splits had delivered before this
				    * incarnation (the restored offsets'); written once,
				    * before RT_W_RUNNING */
	uint64_t rw_held;          /* held by its backend's back-pressure: CLOCK_MONOTONIC
				    * ms of the report << 8 | enum rt_held, 0 when not;
				    * written by the backend's watcher thread only
				    * (rocksdb-direct), every 100 ms while held */
	char rw_error[192];
} __rt_cache_aligned;

struct rt_bell {
	int32_t bl_word;
	int32_t bl_sleeping;
} __rt_cache_aligned;

struct rt_job {
	uint64_t rj_magic;
	uint32_t rj_version;
	uint32_t rj_workers;
	uint32_t rj_max_parallelism;
	uint32_t rj_block_events;  /* source split unit: blocks dealt round-robin */
	uint64_t rj_events;        /* events of the whole run */
	uint64_t rj_first_event;
	double rj_rate;            /* event-time rate, events/s */
	double rj_max_rate;        /* wall-clock throttle of all sources, events/s (0: none) */
	int64_t rj_base_time_ms;
	uint64_t rj_chan_bytes;    /* data bytes per channel (power of two) */
	uint32_t rj_sink;          /* 1: materialize and write parts; 0: discard */
	uint32_t rj_pad;
	char rj_query[RT_NAME_MAX];
	char rj_backend[RT_NAME_MAX];
	char rj_data_dir[RT_PATH_MAX];
	uint64_t rj_cache_bytes;    /* value cache per worker (sfs backends; 0: default) */
	uint64_t rj_buffer_bytes;   /* each write buffer of a worker (sfs backends; 0: default) */
	uint64_t rj_state_ttl_ms;   /* --state-ttl: the queries' state TTL, processing time (0: none) */
	uint64_t rj_rdb_memory_bytes; /* rocksdb-direct: a worker's managed memory (0: default) */
	uint32_t rj_nsplits;        /* source splits (the first run's parallelism) */
	uint32_t rj_pad2;
	struct rt_worker_status rj_ws[RT_MAX_WORKERS];
	struct rt_bell rj_bell[RT_MAX_WORKERS];
};

/* Bytes of one channel (header line pair + data), and of the region. */
#define RT_CHAN_HDR 256u
static inline uint64_t rt_chan_stride(uint64_t data_bytes)
{
	return RT_CHAN_HDR + data_bytes;
}

static inline uint64_t rt_chans_bytes(uint32_t workers, uint64_t data_bytes)
{
	return (uint64_t)RT_MAX_STAGES * workers * workers * rt_chan_stride(data_bytes);
}

/* Index of channel (stage, from, to). */
static inline uint64_t rt_chan_index(uint32_t workers, unsigned stage, uint32_t from, uint32_t to)
{
	return ((uint64_t)stage * workers + from) * workers + to;
}

#endif
