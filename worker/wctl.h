/*
 * wctl.h — a worker's region: its control block, its flush-request ring,
 * its write buffers and its value cache, in the segment of its NUMA node.
 *
 *   region "worker.<w>":
 *   [struct sfs_wctl, one page] [ring] [wbuf 0] ... [wbuf K-1] [value cache]
 *
 * Ownership.  The worker writes everything except the hand-off fields the
 * compactor owns (marked below).  A buffer moves through
 *
 *   FREE --worker--> ACTIVE --worker: seal--> SEALED
 *        <--compactor: grace period passed-- RETIRING <--compactor: flushed--
 *
 * and each transition is one release store by the side that owns the
 * buffer in that state; the other side loads the state with acquire.  So
 * every state word has exactly one writer at a time: the worker while FREE
 * or ACTIVE, the compactor while SEALED or RETIRING.
 *
 * Sequence numbers.  Every seal takes the next wc_seq; the compactor
 * flushes a worker's sealed buffers strictly in seq order, and the flushed
 * store tags each entry with the seq that wrote it.  A seal also records the
 * checkpoint (barrier) id; a buffer that filled up between barriers is
 * sealed early ("spilled") with the id of the barrier still to come.
 *
 * Readers (the worker itself, attached readers) look at buffers whose state
 * is ACTIVE or SEALED, newest seq first; a RETIRING buffer is fully in the
 * store and is skipped; a FREE one holds nothing.  The compactor frees a
 * RETIRING buffer only after a grace period that began after it became
 * RETIRING, so nobody still reads it when the worker resets it.
 */
#ifndef SFS_WORKER_WCTL_H
#define SFS_WORKER_WCTL_H

#include <stdint.h>

#include "common/ttl.h"
#include "shm/atomic.h"

#define SFS_WCTL_MAGIC 0x314c544357534653ull /* "SFSWCTL1" */
#define SFS_WCTL_VERSION 3u  /* 2: the engine's pin and rollback words; 3: wc_owner,
			      * wc_adopt_dir */
/* wc_erb_to asking for an adoption (sfs_worker_adopt) rather than a
 * checkpoint id to return to (0: empty the store). */
#define SFS_ERB_ADOPT UINT64_MAX
#define SFS_WCTL_MAX_BUFS 16
#define SFS_WCTL_RING_SLOTS 64
/* Worker regions a segment may hold (worker.0 .. worker.255): the
 * compactor's table of workers has as many entries. */
#define SFS_MAX_WORKER_SLOTS 256

enum sfs_buf_state {
	SFS_BUF_FREE = 0,
	SFS_BUF_ACTIVE = 1,
	SFS_BUF_SEALED = 2,
	SFS_BUF_RETIRING = 3,
};

/* One flush request, worker -> compactor (SPSC ring). */
struct sfs_flush_req {
	uint32_t fr_buf;       /* buffer index */
	uint32_t fr_worker;
	uint64_t fr_seq;       /* its seal sequence number */
	uint64_t fr_barrier;   /* checkpoint id it belongs to */
	uint64_t fr_off;       /* buffer offset in the region */
};

/* The hand-off control of buffer i (cb_: the buffer's control, apart from
 * struct sfs_wbuf's own wb_ header in the buffer itself). */
struct sfs_wctl_buf {
	uint32_t cb_state;     /* hand-off word: see above (release/acquire) */
	uint32_t cb_at_barrier; /* worker, before SEALED: 1 sealed by a barrier, 0 spilled */
	uint64_t cb_seq;       /* worker, before SEALED: seal sequence number */
	uint64_t cb_barrier;   /* worker, before SEALED: checkpoint id */
	uint64_t cb_sealed_ns; /* worker, before SEALED */
	uint64_t cb_flushed_ns;/* compactor, before RETIRING */
	/* worker, before SEALED: its TTL clocks at the seal (common/ttl.h),
	 * the only clock maintenance drops expired entries by */
	struct sfs_ttl_clock cb_ttl;
	uint64_t cb_pad2[1];
} __sfs_cache_aligned;

struct sfs_wctl {
	/* Identity and geometry: the creating worker, once, wc_magic last. */
	uint64_t wc_magic;
	uint32_t wc_version;
	uint32_t wc_worker;
	uint64_t wc_layout;
	uint64_t wc_size;          /* region bytes */
	uint32_t wc_nbufs;
	uint32_t wc_parallelism;
	uint32_t wc_max_par;
	uint32_t wc_kg_start, wc_kg_end;   /* inclusive key-group range */
	uint32_t wc_pad0;
	uint64_t wc_buf_bytes;     /* each buffer's block */
	uint64_t wc_buf_entries;   /* keys per buffer */
	uint64_t wc_ring_off;      /* from the region start */
	uint64_t wc_bufs_off;
	uint64_t wc_cache_off;
	uint64_t wc_cache_bytes;

	/* Worker-owned progress (relaxed unless noted). */
	uint64_t wc_seq __sfs_cache_aligned;  /* last seal seq */
	uint32_t wc_active;        /* release: index of the ACTIVE buffer */
	uint32_t wc_waiting;       /* 1 while back-pressured on wc_freed (futex protocol) */
	uint64_t wc_barrier;       /* last barrier id sealed */
	uint64_t wc_barriers;      /* seals at barriers */
	uint64_t wc_spills;        /* seals because the buffer filled */
	uint64_t wc_stalls;        /* back-pressure waits */
	uint64_t wc_stall_ns;      /* time spent in them */
	uint64_t wc_restarts;      /* opens that found the region (a restart) */
	uint64_t wc_list_seq;      /* last list element sequence number */
	uint64_t wc_sealed_bytes;  /* arena bytes of every buffer sealed (entries, map and
				    * list records, superseded versions included): what the
				    * compactor is handed to flush, the denominator (less the
				    * buffers not flushed yet) of the summary's write
				    * amplification; added once per seal */

	/* The engine's own checkpoints (a host group, SFS_CKPT_ENGINE;
	 * include/sfs.h sfs_worker_pin, sfs_worker_restore_pinned), worker
	 * side: wc_pin_req (release) asks the compactor to pin the version
	 * it staged for that checkpoint; wc_erb_to, then wc_erb_req
	 * (release, a count) ask it to return the store to the pinned
	 * version.  Answered in wc_pin_ack / wc_erb_ack below. */
	uint64_t wc_pin_req __sfs_cache_aligned;
	uint64_t wc_erb_to;
	uint64_t wc_erb_req;
	/* wc_erb_to SFS_ERB_ADOPT: the directory whose files become the
	 * store (a checkpoint's, as sfs_worker_staged laid them out), written
	 * before wc_erb_req's release; NUL-terminated. */
	char wc_adopt_dir[1024];
	/* The context that has the region open: its process-table slot, as
	 * (claim generation << 16) | (index + 1); 0: none.  Claimed by CAS at
	 * sfs_worker_open over 0 or a holder no longer alive, cleared at
	 * sfs_worker_close: one writer per region, in any process. */
	uint64_t wc_owner;

	/* Compactor-owned progress. */
	int32_t  wc_freed __sfs_cache_aligned; /* futex word: bumped when a buffer is freed */
	uint32_t wc_pad1;
	uint64_t wc_flushed_seq;   /* release: last seq fully flushed */
	uint64_t wc_flushes;
	uint64_t wc_flush_entries;
	uint64_t wc_flush_ns;
	uint64_t wc_ttl_dropped;   /* entries of TTL states dropped as expired at flush */
	/* The answers to the engine's words above: the rc first, then the
	 * request answered (release). */
	int32_t  wc_pin_rc, wc_erb_rc;
	uint64_t wc_pin_ack;
	uint64_t wc_erb_ack;

	struct sfs_wctl_buf wc_buf[SFS_WCTL_MAX_BUFS];
};

uint64_t sfs_wctl_layout(void);

#endif
