/*
 * memory.h — the `memory` flush target: a worker's flushed state kept in
 * shared memory by its node's compactor, readable by the worker (and any
 * attached reader) without locks.  It is the heap-backend baseline of the
 * benchmarks and the store a worker falls back to after its buffers.
 *
 * One store per worker: region "mstore.<w>" of the worker's node segment,
 * written only by the compactor (single writer):
 *
 *   [struct sfs_mstore, one page] [half 0] [half 1]
 *
 * Log-structured semispaces, because a compactor may be killed at any
 * instruction and a free-list allocator caught mid-update cannot be trusted
 * again.  The active half is append-only: an entry {hash, tag, ns, klen,
 * vlen, key, value} is written at the half's top (the top advances first),
 * and then published by a release store of its offset into the index slot
 * (hash tag:16 | region offset:48; 0 empty, 1 deleted).  A replaced or
 * deleted entry becomes garbage in place.  The index itself is appended to
 * the half too, and a bigger one replaces it by a release store of
 * ms_index (an RCU pointer swap).  When the active half is full, the live
 * entries are copied into the other half with a fresh index, which is then
 * published (ms_index, ms_active); the old half is reused only after a
 * grace period.  A crash at any point leaves either the published state or
 * unreachable bytes above a top: restart just continues (an unfinished copy
 * is started again).  Cost: half the region holds data; a copy is
 * O(live bytes), amortized over the garbage it reclaims.
 *
 * Tags make flushes idempotent and reads exact.  Every entry records the
 * sequence number (tag) of the write buffer whose flush wrote it.  A flush
 * of buffer b skips a key whose entry already has tag >= b (a redone flush
 * after a compactor crash changes nothing; a counter is never added twice),
 * and a reader folds a buffered counter delta of buffer b over a store value
 * only when b > the entry's tag.  Buffers are flushed in sequence order.
 */
#ifndef SFS_TARGET_MEMORY_H
#define SFS_TARGET_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "shm/qsbr.h"
#include "shm/segment.h"

#define SFS_MSTORE_MAGIC 0x32524f5453534d53ull /* "SMSSTOR2" */
#define SFS_MSTORE_VERSION 2u

struct sfs_mstore {
	uint64_t ms_magic;      /* creator, release, last */
	uint32_t ms_version;    /* creator */
	uint32_t ms_worker;     /* creator */
	uint64_t ms_layout;     /* creator: sfs_mstore_layout() */
	uint64_t ms_size;       /* creator: region bytes */
	uint64_t ms_half;       /* creator: bytes per half */
	uint64_t ms_half_off[2];/* creator: region offset of each half */
	uint64_t ms_index;      /* compactor, release: region offset of the index */
	uint32_t ms_active;     /* compactor, release (with ms_index): the half in use */
	uint32_t ms_pad;
	uint64_t ms_top[2];     /* compactor: bytes used in each half (advanced before writing) */
	uint64_t ms_garbage;    /* compactor: dead bytes in the active half */
	uint64_t ms_applied;    /* compactor, release: seq of the last buffer fully flushed */
	uint64_t ms_commits;    /* compactor, release: versions published */
	uint64_t ms_live;       /* compactor, relaxed: keys */
	uint64_t ms_bytes;      /* compactor, relaxed: key + value bytes */
	uint64_t ms_skipped;    /* compactor, relaxed: writes skipped as already applied */
	uint64_t ms_copies;     /* compactor, relaxed: semispace copies done */
};

struct sfs_mstore_index {
	uint64_t mi_slots;      /* power of two */
	uint64_t mi_used;       /* occupied + deleted slots (compactor only) */
	uint64_t mi_slot[];     /* release stores by the compactor, acquire loads by readers */
};

struct sfs_mstore_entry {
	uint64_t me_hash;
	uint64_t me_tag;        /* seq of the buffer whose flush wrote it */
	uint64_t me_ns;
	uint32_t me_klen;
	uint32_t me_vlen;
	/* key, then value at me_klen rounded up to 8 */
};

struct sfs_mstore_view {
	const void *value;
	uint32_t len;
	uint64_t tag;
};

uint64_t sfs_mstore_layout(void);

/* Region name of worker @w's store. */
void sfs_mstore_name(uint32_t w, char *buf, size_t n);

/* ---- reader side (any process; lock-free, zero-copy) ----------------- */

/* The store of worker @w in @s, or NULL when it does not exist (yet): a
 * missing store reads as empty.  Checks magic, version and layout. */
int sfs_mstore_attach(struct sfs_seg *s, uint32_t w, struct sfs_mstore **out);

/*
 * sfs_mstore_get - look up (@ns, @key) with hash @h (sfs_wbuf_hash).
 * Returns 1 and fills @v (valid until the caller's next quiescent point),
 * or 0 when absent.  Cost: a probe of the published index.
 */
int sfs_mstore_get(const struct sfs_mstore *ms, uint64_t h, uint64_t ns, const void *key,
		   uint32_t klen, struct sfs_mstore_view *v);

/* Prefetch the home slot of hash @h (batched probes). */
void sfs_mstore_prefetch(const struct sfs_mstore *ms, uint64_t h);

/* ---- writer side (the compactor) -------------------------------------- */

struct sfs_mstore_writer {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	struct sfs_mstore *ms;
	uint64_t idle_token;    /* grace period that frees the inactive half, 0 = free */
};

/* Find or create the store of worker @w (@bytes for a new region); @self is
 * the compactor's process-table slot (skipped by its grace periods). */
int sfs_mstore_open(struct sfs_seg *s, uint32_t w, uint64_t bytes,
		    const struct sfs_proc_slot *self, struct sfs_mstore_writer *out);
void sfs_mstore_close(struct sfs_mstore_writer *w);

enum { SFS_MSTORE_PUT = 1, SFS_MSTORE_DELETE = 2, SFS_MSTORE_MERGE = 3 };

/*
 * sfs_mstore_apply - apply one buffered write of buffer @tag: PUT the value,
 * DELETE the key, or MERGE an int64 delta (@value points to 8 bytes) into
 * the stored value with operator @mop (common/merge.h; absent: the delta).  Skipped when the key's entry already carries a
 * tag >= @tag.  Returns 0, SFS_EFULL (store region full: nothing changed),
 * SFS_EUSAGE (ADD over a value that is not 8 bytes).
 */
int sfs_mstore_apply(struct sfs_mstore_writer *w, int op, unsigned mop, uint64_t h, uint64_t ns,
		     const void *key, uint32_t klen, const void *value, uint32_t vlen, uint64_t tag);

/* Publish: every write of buffer @seq is applied. */
void sfs_mstore_commit(struct sfs_mstore_writer *w, uint64_t seq);

/* True while the inactive half still waits for its grace period. */
int sfs_mstore_pending(struct sfs_mstore_writer *w);

/* Calls @fn for every live entry (checkpoints, tests).  Writer or a reader
 * that stays online for the walk. */
int sfs_mstore_foreach(const struct sfs_mstore *ms,
		       int (*fn)(void *arg, const struct sfs_mstore_entry *e, const void *key,
				 const void *value),
		       void *arg);

#endif
