/*
 * sfs_join.h — join batches: OmniStateStore's two-stream join cache as a
 * facility of sfs, for a program's join operators.
 *
 * A join operator buffers the records of one input (the larger side) in a
 * batch, grouped by join key, and applies them per key at a size threshold,
 * at a checkpoint barrier and at end of input: it then reads the other
 * side's state once per key per batch instead of once per record.  The
 * flush hands each distinct key once, in first-arrival order of keys, with
 * its records in arrival order, so results do not depend on the hash.
 *
 * Rules (those of include/sfs.h, stated again for this header):
 *  - The handle is opaque: a batch lives in a block of memory the caller
 *    gives (64-byte aligned: SFS_JB_ALIGN), holds offsets only (another
 *    process may map it elsewhere) and keeps no process-local state; the
 *    handle is the block's first byte.
 *  - Every call returns int (0 or a negative code: SFS_E*, -errno), with
 *    sfs_last_error() naming what was wrong, except the pure queries.
 *  - One writer: the owner (the worker that made it) adds, flushes and
 *    resets, without a lock.  A batch is not thread-safe.
 *  - Flushing is the operator's: drain when sfs_jb_should_flush() says, at
 *    every barrier (a checkpoint must not contain buffered, unprocessed
 *    input) and at end of input.
 *  - Views (keys, records) point into the block and stay valid until the
 *    owner's next reset (sfs_jb_flush resets when it completes).
 *
 * Costs: an add is a hash of the key, a probe (linear probing at load <=
 * 3/4), one copy of the record (and of the key the first time the key is
 * seen in the batch) and a release store: no syscall, lock, atomic RMW or
 * allocation; a function call into the library.  A reset is O(1).  A flush
 * is O(keys + records) plus the callback.  Overhead per record: 16 B plus
 * the record padded to 8; per distinct key per batch: 32 B plus the key
 * padded to 8 and an 8 B index slot.
 */
#ifndef SFS_JOIN_H
#define SFS_JOIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfs_jb sfs_jb_t;

#define SFS_JB_KEY_MAX (64u * 1024)         /* join key bytes, inclusive */
#define SFS_JB_REC_MAX (16u * 1024 * 1024)  /* record bytes, inclusive */

/* Block alignment sfs_jb_init requires (the batch header's cache lines). */
#define SFS_JB_ALIGN 64u

/* Configuration of a new batch. */
struct sfs_jb_config {
	uint64_t max_keys;     /* distinct join keys per batch (sizes the index) */
	uint64_t flush_recs;   /* should_flush at this many records; 0: no record limit */
	uint64_t flush_bytes;  /* should_flush at this many arena bytes used; 0: no byte limit */
};

/* Cursor of a flush walk, the caller's (its fields are the library's).
 * Start from SFS_JB_ITER_INIT (all zero). */
struct sfs_jb_iter {
	uint32_t it_key;      /* current key node (offset/8), 0 before the first */
	uint32_t it_rec;      /* next record node of the current key, 0 none */
	uint32_t it_started;  /* 1 once next_key has been called */
	uint32_t it_pad;
};
#define SFS_JB_ITER_INIT ((struct sfs_jb_iter){ 0, 0, 0, 0 })

/*
 * sfs_jb_size - bytes of a batch accepting @max_keys distinct keys with
 * @arena_bytes of arena (nodes + keys + records; see the overhead above):
 * 192 + 8 * 2^k + arena (k the smallest with 3/4 * 2^k >= @max_keys, at
 * least 3; arena rounded up to 8, at least 64).  0 if a figure is 0 or the
 * total is above 32 GiB or @max_keys above 2^30.  Pure.
 */
size_t sfs_jb_size(uint64_t max_keys, uint64_t arena_bytes);

/*
 * sfs_jb_init - make the @size bytes at @mem an empty batch configured by
 * @cfg; the arena is what the index leaves of @size (truncated to a multiple
 * of 8).  Handle (== @mem) in *@out.  The caller becomes the owner.
 * Errors: SFS_EUSAGE (alignment, @cfg NULL, max_keys 0 or too big, @size
 * below header + index + 64 B of arena, or above 32 GiB), with a message.
 * Cost: O(index) once, to clear the slots.
 */
int sfs_jb_init(void *mem, size_t size, const struct sfs_jb_config *cfg, sfs_jb_t **out);

/*
 * sfs_jb_add - buffer record @rec (@len bytes, may be 0) with sequence
 * number / timestamp @seq (any value; 0 if the caller has none) under join
 * key @key (@klen bytes, may be 0).  Both are copied.
 * Returns 0; SFS_EFULL when the arena or the index is full (the batch is
 * unchanged: flush, and retry — the retry into an empty batch succeeds);
 * SFS_EUSAGE for a key or record above the limits or too big for the arena
 * even when empty (never truncated).  Owner only.  Cost: see above.
 */
int sfs_jb_add(sfs_jb_t *jb, const void *key, size_t klen, const void *rec, size_t len,
	       uint64_t seq);

/* 1 once the batch holds at least the configured number of records or
 * arena bytes, else 0.  O(1), loads only. */
int sfs_jb_should_flush(const sfs_jb_t *jb);

/* Records / distinct keys buffered now.  O(1), a load. */
uint64_t sfs_jb_records(const sfs_jb_t *jb);
uint64_t sfs_jb_keys(const sfs_jb_t *jb);

/*
 * A callback of sfs_jb_flush: one call per distinct key, in first-arrival
 * order of keys, with the key (a view into the batch) and its record count;
 * read the records with sfs_jb_next_rec(@jb, @it, ...), in arrival order
 * (reading none, or some, is allowed).  Return 0 to go on; anything else
 * stops the flush.
 */
typedef int (*sfs_jb_key_fn)(void *arg, const sfs_jb_t *jb, struct sfs_jb_iter *it,
			     const void *key, uint32_t klen, uint32_t nrec);

/*
 * sfs_jb_flush - walk every key with @fn, then sfs_jb_reset.  Returns 0, or
 * @fn's non-zero return (the walk stops there and the batch is NOT reset:
 * the keys before it were delivered; the caller decides whether to reset or
 * retry the whole batch), or SFS_ECORRUPT (batch not reset).  Owner only.
 * Cost: O(keys + records) plus @fn; reset O(1).
 */
int sfs_jb_flush(sfs_jb_t *jb, sfs_jb_key_fn fn, void *arg);

/*
 * sfs_jb_reset - empty the batch for the next one (a worker rolling back
 * drops it unread).  Owner only.  O(1), except every 65535th reset, which
 * clears the index (O(index)).
 */
void sfs_jb_reset(sfs_jb_t *jb);

/*
 * sfs_jb_next_key - the next distinct key, in first-arrival order (a walk
 * without sfs_jb_flush: nothing is reset): 0 with *@key (a view, 8-byte
 * aligned), *@klen and *@nrec filled and the cursor at its first record;
 * -ENOENT after the last key; SFS_ECORRUPT (a link outside the arena: the
 * walk ends).  Out pointers may be NULL; they are set (NULL / 0) on
 * failure too.  O(1).
 */
int sfs_jb_next_key(const sfs_jb_t *jb, struct sfs_jb_iter *it, const void **key, uint32_t *klen,
		    uint32_t *nrec);

/*
 * sfs_jb_next_rec - the next record of the current key, in arrival order:
 * 0 with *@rec (a view, 8-byte aligned), *@len and *@seq filled; -ENOENT
 * after its last record (or before the first key); SFS_ECORRUPT (a link
 * outside the arena: this key's walk ends).  Out pointers may be NULL;
 * they are set (NULL / 0) on failure too.  O(1).
 */
int sfs_jb_next_rec(const sfs_jb_t *jb, struct sfs_jb_iter *it, const void **rec, uint32_t *len,
		    uint64_t *seq);

#ifdef __cplusplus
}
#endif
#endif /* SFS_JOIN_H */
