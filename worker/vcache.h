/*
 * vcache.h — a worker's value cache (OmniStateStore's semantic state
 * cache): values read from the flushed store, and "absent" answers, kept in
 * shared memory, bounded in bytes, with O(1) get / put / evict (CLOCK).
 *
 * Place in the read path (DESIGN.md section 3): active buffer -> sealed
 * buffers -> value cache -> flushed store.  The state layer fills the cache
 * with what the flushed store answered (a value, or "no such key": a
 * negative entry, which is what makes miss-heavy dedup workloads cheap) and
 * tags every entry with the barrier id up to which the value includes
 * writes; the cache stores the tag and hands it back, nothing more.
 *
 * THE INVARIANT (the state layer keeps it; the cache cannot): every write
 * to a key — put, delete, merge — is followed, before the write's buffer
 * can be released, by sfs_vcache_put (update-on-write: the new value, or
 * put_absent for a delete) or sfs_vcache_invalidate of that key.  A cached
 * entry is then never older than the newest buffer that shadows it, so a
 * stale value cannot resurface once that buffer is flushed and released.
 * The cache does its part: a put that is not cached (value too big) still
 * drops the key's old entry before returning its error, so after any put
 * the old value is gone.
 *
 * Layout of the caller-given block (64-byte aligned, e.g. a segment
 * region; other processes may map it elsewhere: offsets only, no pointer):
 *
 *   [struct sfs_vcache, 192 B]  identity line, owner's state, counters
 *   [index: 2^k x 8 B slots]    open addressing, linear probing
 *   [log: D bytes]              a ring of records, 8-byte aligned
 *
 * A record is a 40-byte header {size, key length | flags, hash, value
 * length, tag, namespace, state}, the key padded to 8, the value padded to
 * 8 (so a value is 8-byte aligned: an int64 can be read in place).
 *
 * Storage: a log, not a size-class heap.  New records are appended at the
 * log's tail; space is reclaimed at its head.  A record never straddles
 * the ring's end (a pad record fills the tail of the ring instead).  The
 * alternative, shm/alloc.h's sfs_salloc, was built first and measured: a
 * cache evicts by age, not by size class, so freed bytes rarely free a
 * slot of the class the next value needs, and with >= 8 objects per slab
 * per class the slabs of a few large classes fill a small cache — a 1 MiB
 * cache fed values of 0..8 KiB made every eviction a fragmentation
 * eviction and held 147 entries.  A log cannot fragment: the bytes one
 * record frees at the head are the bytes the next one needs at the tail.
 *
 * CLOCK as FIFO-with-reinsertion (the same policy, walked by a different
 * hand): the head is the hand.  To make room, the record at the head is
 *   - dead (invalidated, replaced) or a pad: skipped, its bytes reclaimed;
 *   - live with its reference bit clear: evicted;
 *   - live with the bit set: the bit is cleared and the record moves to the
 *     tail (second chance) — a memmove into the free gap just before it,
 *     which needs no free space beyond what the record already holds, and
 *     one index slot rewritten in place.
 * get sets the bit (one store to the record header it just read, only if
 * clear); a new record starts with it clear at the tail, the longest time
 * before the hand reaches it, so a one-time scan of cold keys cannot push
 * out a working set that is being read; a replace sets it.
 * Cost: a put advances the head until the record fits: amortized O(1)
 * (every record skipped was appended once, every move consumed a bit a
 * get set), worst case one lap of the log.  The price of a log is that a
 * record surviving a lap is copied once per lap (slabs would only clear a
 * bit): bytes copied per byte inserted ~ hot bytes / cold bytes.
 *
 * Index.  A slot is (hash >> 32) << 32 | (record offset / 8 + 1), 0 when
 * empty; the home slot is taken from the same 32 hash bits, so a slot says
 * where its key belongs: deletion is a backward shift (no tombstones), and
 * the tag rejects nearly every foreign key without touching its record.
 * Entries <= max_entries <= 3/4 of the slots: expected probes 2.5 slots on
 * a hit, 8.5 on a miss (8 slots per cache line).  When max_entries is
 * reached, a put evicts by the same hand as for bytes.
 *
 * Overhead per entry: the 40 B record header; key and value padding to 8
 * (0..7 B each); the index slot, 8 B at >= 10.7 B per entry at full load
 * (the index is sized at init: by default the largest power of two that
 * is at most 1/8 of the block, so about 1 entry per 85..170 B of block);
 * and, transiently, dead records (replaced or invalidated: freed when the
 * head passes them) and pad records (< obj_max per lap of the log).
 * E.g. 16 B key + 16 B value: 72 B + 10.7 B; a negative entry for a 16 B
 * key: 56 B + 10.7 B.  bytes_used counts the live records' bytes.
 *
 * Limits: keys <= SFS_VCACHE_KEY_MAX (64 KiB, as the write buffer's);
 * values <= SFS_VCACHE_VALUE_MAX (16 MiB); a record <= obj_max = an eighth
 * of the log, so no single value can flush most of the cache.  Larger
 * values are simply not cached: put returns SFS_EFULL after dropping the
 * key's old entry.  The log is at most 32 GiB (offset / 8 in 32 bits).
 *
 * Rules:
 *  - One writer: the owning worker calls everything but stats.  get is
 *    owner-only too: it sets a reference bit and counts, and a concurrent
 *    put may move or overwrite the record it reads (there is no seqlock:
 *    the hot path has no atomic and no retry).  Other processes may attach
 *    and read sfs_vcache_stats (relaxed loads of single-writer counters:
 *    each exact, not a snapshot together).
 *  - A view returned by get stays valid until the owner's next put,
 *    invalidate or clear (a put may move or evict any record; invalidate
 *    only marks a record dead, but the contract stays simple).
 *  - Hot path (get, put, invalidate): no syscall, no lock, no atomic RMW,
 *    no allocation outside the block.  A refused put formats a message.
 *  - The hash (sfs_vcache_hash) places keys; the _h forms take it
 *    precomputed (hash a batch, prefetch, then probe).  One cache must be
 *    used with one hash function throughout.
 *
 * Caveats: the cache is derived data.  An owner that dies mid-put leaves
 * the block in an unknown state; a restarted worker re-inits its cache
 * (sfs_vcache_init, or clear): it restores from a checkpoint anyway, and a
 * cache that missed an invalidation would be unsafe to trust.  attach is
 * for stats readers and tests; sfs_vcache_verify checks a block fully.
 */
#ifndef SFS_WORKER_VCACHE_H
#define SFS_WORKER_VCACHE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sfs.h"
#include "common/hash.h"
#include "common/keycmp.h"
#include "shm/atomic.h"

#define SFS_VCACHE_MAGIC   0x3143435653465304ull /* "\4SFSVCC1" little-endian */
#define SFS_VCACHE_VERSION 2u  /* 2: sfs_hash_key */

#define SFS_VCACHE_KEY_MAX   (64u * 1024)          /* bytes, inclusive */
#define SFS_VCACHE_VALUE_MAX (16u * 1024 * 1024)   /* bytes, inclusive (obj_max may be less) */
#define SFS_VCACHE_LOG_MAX   ((uint64_t)1 << 35)   /* record offset / 8 in 32 bits */
#define SFS_VCACHE_LOG_MIN   4096u                 /* smallest log */
#define SFS_VCACHE_ALIGN     64u                   /* block base */
#define SFS_VCACHE_INDEX_OFF 192u
#define SFS_VCACHE_ENTRIES_MAX (3u << 29)          /* 3/4 of 2^31 slots */

/* Record flags (the top byte of vr_kf). */
#define SFS__VC_LIVE   0x01u  /* indexed; clear: dead (replaced or invalidated) */
#define SFS__VC_REF    0x02u  /* CLOCK reference bit: set by get, cleared by the hand */
#define SFS__VC_ABSENT 0x04u  /* negative entry: the key is not in the store */
#define SFS__VC_PAD    0x08u  /* filler up to the ring's end */
#define SFS__VC_KLEN_MASK 0xffffffu

/*
 * The shared header; the handle of a cache is this struct at the block's
 * start, in every process (no process-local state).
 *
 * Line 0: identity and geometry, written by init (vc_magic last, release)
 * and never again.  Lines 1-2: the owner's state and counters, every field
 * written only by the owner: plain loads by the owner, relaxed stores so a
 * stats reader in another process reads each one untorn.
 */
struct sfs_vcache {
	uint64_t vc_magic;        /* init, release, last */
	uint32_t vc_version;      /* init: SFS_VCACHE_VERSION */
	int32_t  vc_owner;        /* init: pid of the initialising owner (for humans) */
	uint64_t vc_layout;       /* init: sfs_vcache_layout() */
	uint64_t vc_size;         /* init: bytes of the block */
	uint32_t vc_bits;         /* init: the index has 2^k slots */
	uint32_t vc_max_entries;  /* init: live keys accepted (<= 3/4 of the slots) */
	uint64_t vc_log_off;      /* init: offset of the log (after the index) */
	uint64_t vc_log_size;     /* init: D, bytes of the log (a multiple of 64) */
	uint32_t vc_obj_max;      /* init: largest record cached (D / 8) */
	uint32_t vc_pad0;

	/* Owner's state (line 1).  The log is a ring of D bytes: records fill
	 * vc_log_used bytes from the head's offset on, wrapping at D, and end
	 * at the tail's; head == tail when it is empty (then both are 0) or
	 * full. */
	uint64_t vc_head __sfs_cache_aligned; /* owner, relaxed: oldest record (the hand) */
	uint64_t vc_tail;         /* owner, relaxed: offset where the next record goes */
	uint64_t vc_log_used;     /* owner, relaxed: bytes from head to tail: live, dead and pad */
	uint64_t vc_live;         /* owner, relaxed: cached keys */
	uint64_t vc_bytes_used;   /* owner, relaxed: bytes of the live records */
	uint64_t vc_puts;         /* owner, relaxed: puts (value and absent) cached */
	uint64_t vc_replaces;     /* owner, relaxed: of which replaced a cached key */
	uint64_t vc_evictions;    /* owner, relaxed: records the hand evicted */

	/* Owner's counters (line 2). */
	uint64_t vc_hits __sfs_cache_aligned; /* owner, relaxed: gets that found a value */
	uint64_t vc_neg_hits;     /* owner, relaxed: gets that found "absent" */
	uint64_t vc_misses;       /* owner, relaxed: gets that found nothing */
	uint64_t vc_invalidations; /* owner, relaxed: entries dropped by invalidate */
	uint64_t vc_refused;      /* owner, relaxed: puts not cached */
	uint64_t vc_clears;       /* owner, relaxed: clears since init */
	uint64_t vc_moves;        /* owner, relaxed: second chances (records moved to the tail) */
	uint64_t vc_moved_bytes;  /* owner, relaxed: bytes copied by moves */
};

_Static_assert(sizeof(struct sfs_vcache) == SFS_VCACHE_INDEX_OFF, "vcache header is 3 lines");
_Static_assert(offsetof(struct sfs_vcache, vc_head) == SFS_CACHE_LINE, "state on line 1");
_Static_assert(offsetof(struct sfs_vcache, vc_hits) == 2 * SFS_CACHE_LINE, "counters on line 2");

/*
 * A record of the log.  Written whole by the owner at put; after that only
 * the flags change (get sets REF, the hand clears it, invalidate and
 * replace clear LIVE), a same-size replace rewrites tag, value length and
 * value in place, and a move copies the whole record elsewhere.  A pad
 * record has only vr_size and vr_kf.
 */
struct sfs_vcache_rec {
	uint32_t vr_size;   /* record bytes, header included, a multiple of 8 */
	uint32_t vr_kf;     /* key length (bits 0..23) | flags << 24 */
	uint32_t vr_hash;   /* hash >> 32: home slot and index tag */
	uint32_t vr_vlen;   /* value length */
	uint64_t vr_tag;    /* the caller's tag */
	uint64_t vr_ns;     /* namespace */
	uint32_t vr_state;  /* state id */
	uint32_t vr_pad;
	/* key bytes, padded to 8; value bytes, padded to 8 */
};

#define SFS_VCACHE_REC_HDR ((uint32_t)sizeof(struct sfs_vcache_rec))
_Static_assert(sizeof(struct sfs_vcache_rec) == 40, "record header is 40 bytes");

/*
 * What get found.  Zero-copy: value points into the cache and stays valid
 * until the owner's next put, invalidate or clear.
 */
struct sfs_vcache_view {
	const void *value;  /* NULL for a negative entry */
	uint32_t len;       /* value length (0 for a negative entry) */
	uint32_t absent;    /* 1: the key is known not to exist in the store */
	uint64_t tag;       /* the tag given to put */
};

struct sfs_vcache_stats {
	uint64_t size;           /* block bytes */
	uint64_t capacity;       /* bytes of the log: the bound on bytes_used */
	uint64_t bytes_used;     /* bytes of the live records (<= log_bytes <= capacity) */
	uint64_t log_bytes;      /* bytes between head and tail: live + dead + pad */
	uint64_t entries;        /* cached keys (negative entries included) */
	uint64_t max_entries;    /* keys the index accepts */
	uint64_t obj_max;        /* largest record: 40 + pad8(key) + pad8(value) */
	uint64_t overhead;       /* bytes of header + index (+ < 64 B of unused tail) */
	uint64_t hits;           /* gets that found a value */
	uint64_t neg_hits;       /* gets that found "absent" */
	uint64_t misses;         /* gets that found nothing */
	uint64_t puts;           /* puts cached */
	uint64_t replaces;       /* of which replaced a cached key */
	uint64_t invalidations;  /* entries dropped by invalidate */
	uint64_t evictions;      /* entries evicted by the hand */
	uint64_t moves;          /* second chances given (records moved to the tail) */
	uint64_t moved_bytes;    /* bytes those moves copied */
	uint64_t refused;        /* puts not cached */
	uint64_t clears;
};

/* ---- slow paths (vcache.c) ----------------------------------------------- */

/* Fingerprint over sizeof/offsetof of the vcache structs and the constants
 * fixing the layout.  Stored at init, checked at attach. */
uint64_t sfs_vcache_layout(void);

/*
 * sfs_vcache_size - bytes of a block that sfs_vcache_init(@max_entries)
 * gives a log of at least @capacity bytes (the smallest such block, but
 * for where the default index doubles).  0 if a figure is over its limit.
 * Pure; O(1) with @max_entries, a few geometry steps without.
 */
size_t sfs_vcache_size(uint64_t capacity, uint64_t max_entries);

/*
 * sfs_vcache_init - make the @size bytes at @mem an empty cache owned by
 * the caller; handle (== @mem) in *@out.  @max_entries: keys the index
 * accepts (0: the largest index that is at most 1/8 of @size, filled to
 * 3/4); the log is what header and index leave, rounded down to 64 bytes.
 * Errors: SFS_EUSAGE (alignment; @max_entries over SFS_VCACHE_ENTRIES_MAX;
 * a block leaving less than SFS_VCACHE_LOG_MIN of log, or a log over
 * SFS_VCACHE_LOG_MAX).  Cost: O(index) once (memset of the slots).
 */
int sfs_vcache_init(void *mem, size_t size, uint64_t max_entries, struct sfs_vcache **out);

/*
 * sfs_vcache_attach - adopt a cache initialised elsewhere (another
 * process, another mapping), mapped at @mem with @size bytes: checks magic,
 * version, layout fingerprint and geometry, naming what differs.
 * Errors: SFS_EMAGIC, SFS_EVERSION, SFS_ELAYOUT, SFS_ECORRUPT, SFS_EUSAGE.
 * O(1).
 */
int sfs_vcache_attach(void *mem, size_t size, struct sfs_vcache **out);

/*
 * sfs_vcache_put_h - cache (@state, @ns, @key) -> @val (@vlen bytes) with
 * @tag, replacing any entry of the key (a value or a negative one).  The
 * hand advances until the record fits the log and the index.  Owner only;
 * invalidates every view.
 * Returns 0 when cached.  SFS_EFULL when not cached (the record is over
 * obj_max): the key's old entry is gone too and the cache consistent, so
 * the caller may ignore the error.  SFS_EUSAGE for a key over
 * SFS_VCACHE_KEY_MAX (never cached: nothing to drop) or a NULL @val with
 * a length; SFS_ECORRUPT if the log or index is found broken.
 * Cost: a probe, amortized O(1) hand steps (see above), one copy of key
 * and value; a replace of the same size (within 1/4) is done in place.
 */
int sfs_vcache_put_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
		     const void *key, size_t klen, const void *val, size_t vlen, uint64_t tag);

/* sfs_vcache_put_absent_h - cache "the store has no (@state, @ns, @key)"
 * with @tag: a negative entry.  Otherwise as put (value length 0). */
int sfs_vcache_put_absent_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
			    const void *key, size_t klen, uint64_t tag);

/*
 * sfs_vcache_invalidate_h - drop the entry of (@state, @ns, @key): 0 if
 * there was one, -ENOENT if not (no message).  Owner only.  Cost: probe +
 * a backward shift of the probe run; the record's bytes are reclaimed when
 * the head passes it.
 */
int sfs_vcache_invalidate_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
			    const void *key, size_t klen);

/*
 * sfs_vcache_clear - drop every entry (counters kept, clears counted).
 * Owner only.  Cost: O(index): one memset of the slots.
 */
void sfs_vcache_clear(struct sfs_vcache *c);

/* Counters and geometry.  Any process (relaxed loads).  O(1). */
void sfs_vcache_stats(const struct sfs_vcache *c, struct sfs_vcache_stats *st);

/*
 * sfs_vcache_verify - check every invariant: the log from head to tail is
 * a chain of whole records that never straddle the ring's end; each live
 * record's key hashes to its tag and is found by a probe at its own slot
 * (no key twice); each slot's run from home is unbroken; slots == live
 * records == vc_live; their bytes == bytes_used <= tail - head <= D.
 * 0 or SFS_ECORRUPT naming what differs.  Owner (or a reader of a dead
 * owner's block).  O(index + log records x probe): tests, never the hot
 * path.
 */
int sfs_vcache_verify(const struct sfs_vcache *c);

/* ---- hashing -------------------------------------------------------------- */




/*
 * sfs_vcache_hash - 64-bit hash of (@state, @ns, @key): common/hash.h's
 * sfs_hash_key with namespace and state folded into the seed.  For state 0
 * the seed is the namespace alone, so the hash is the write buffer's
 * (sfs_wbuf_hash): the state layer, which caches buffered keys (kg | state
 * | key) under state 0, passes the hash it already has to the _h forms.
 * Fixed seeds, so it is the same in every process.  Cost: ~2 multiplies
 * per 16 key bytes + 3.
 */
static inline uint64_t sfs_vcache_hash(uint32_t state, uint64_t ns, const void *key, size_t klen)
{
	return sfs_hash_key(ns ^ sfs_hash_mum(state, SFS_HASH_P1), key, klen);
}

/* ---- internals shared by the inline get and vcache.c ---------------------- */

static inline uint64_t *sfs__vc_slots(const struct sfs_vcache *c)
{
	return (uint64_t *)((char *)c + SFS_VCACHE_INDEX_OFF);
}

/* The record at log offset @off (0 <= @off < D, a multiple of 8). */
static inline struct sfs_vcache_rec *sfs__vc_rec(const struct sfs_vcache *c, uint64_t off)
{
	return (struct sfs_vcache_rec *)((char *)c + c->vc_log_off + off);
}

/* Log offset named by slot word @w. */
static inline uint64_t sfs__vc_slot_off(uint64_t w)
{
	return ((w & 0xffffffffu) - 1) << 3;
}

static inline uint64_t sfs__vc_slot(uint32_t h32, uint64_t off)
{
	return (uint64_t)h32 << 32 | ((off >> 3) + 1);
}

static inline uint32_t sfs__vc_pad8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

static inline uint32_t sfs__vc_klen(const struct sfs_vcache_rec *r)
{
	return r->vr_kf & SFS__VC_KLEN_MASK;
}

static inline uint32_t sfs__vc_flags(const struct sfs_vcache_rec *r)
{
	return r->vr_kf >> 24;
}

static inline uint8_t *sfs__vc_value(const struct sfs_vcache_rec *r)
{
	return (uint8_t *)(r + 1) + sfs__vc_pad8(sfs__vc_klen(r));
}

/*
 * Probe for the key: the slot holding it (>= 0), or -1 with *@slot the
 * empty slot that ends the run.  Termination: the index is never more
 * than 3/4 full, so every run ends in an empty slot.  Owner only: the
 * block is trusted (attach + verify is how a foreign one is checked).
 */
static inline int64_t sfs__vc_find(const struct sfs_vcache *c, uint64_t h, uint32_t state,
				   uint64_t ns, const void *key, uint32_t klen, uint64_t *slot)
{
	const uint64_t *slots = sfs__vc_slots(c);
	uint64_t mask = ((uint64_t)1 << c->vc_bits) - 1, tag = h >> 32;
	uint64_t i = tag & mask;

	for (;; i = (i + 1) & mask) {
		uint64_t w = slots[i];

		if (w == 0) {
			*slot = i;
			return -1;
		}
		if (w >> 32 == tag) {
			const struct sfs_vcache_rec *r = sfs__vc_rec(c, sfs__vc_slot_off(w));

			if (r->vr_ns == ns && r->vr_state == state && sfs__vc_klen(r) == klen &&
			    sfs_keyeq(r + 1, key, klen)) {
				*slot = i;
				return (int64_t)i;
			}
		}
	}
}

/* ---- reads (owner only) ---------------------------------------------------- */

/* Prefetch the home slot of hash @h (batched lookups: hash all, prefetch
 * all, then probe). */
static inline void sfs_vcache_prefetch(const struct sfs_vcache *c, uint64_t h)
{
	__builtin_prefetch(sfs__vc_slots(c) + ((h >> 32) & (((uint64_t)1 << c->vc_bits) - 1)));
}

/*
 * sfs_vcache_get_h - look (@state, @ns, @key) up, @h its sfs_vcache_hash:
 * 0 and *@v filled (v->absent says a negative entry), or -ENOENT if the
 * cache knows nothing of the key (ask the store; no message recorded).
 * Sets the record's reference bit.  Owner only (see Rules); zero-copy.
 * Cost: a probe (2.5 slots expected on a hit, 8.5 on a miss at full load),
 * one record header and key compare; no syscall, no atomic.
 */
static inline int sfs_vcache_get_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
				   const void *key, size_t klen, struct sfs_vcache_view *v)
{
	struct sfs_vcache_rec *r;
	uint64_t slot;

	if (klen > SFS_VCACHE_KEY_MAX ||
	    sfs__vc_find(c, h, state, ns, key, (uint32_t)klen, &slot) < 0) {
		sfs_store_relaxed(&c->vc_misses, c->vc_misses + 1);
		return -ENOENT;
	}
	r = sfs__vc_rec(c, sfs__vc_slot_off(sfs__vc_slots(c)[slot]));
	if (!(r->vr_kf & (SFS__VC_REF << 24)))  /* keep the line clean when already set */
		r->vr_kf |= SFS__VC_REF << 24;
	v->tag = r->vr_tag;
	if (r->vr_kf & (SFS__VC_ABSENT << 24)) {
		v->value = NULL;
		v->len = 0;
		v->absent = 1;
		sfs_store_relaxed(&c->vc_neg_hits, c->vc_neg_hits + 1);
	} else {
		v->value = sfs__vc_value(r);
		v->len = r->vr_vlen;
		v->absent = 0;
		sfs_store_relaxed(&c->vc_hits, c->vc_hits + 1);
	}
	return 0;
}

static inline int sfs_vcache_get(struct sfs_vcache *c, uint32_t state, uint64_t ns, const void *key,
				 size_t klen, struct sfs_vcache_view *v)
{
	return sfs_vcache_get_h(c, sfs_vcache_hash(state, ns, key, klen), state, ns, key, klen, v);
}

/* ---- writes (owner only): hashing wrappers ------------------------------------ */

static inline int sfs_vcache_put(struct sfs_vcache *c, uint32_t state, uint64_t ns, const void *key,
				 size_t klen, const void *val, size_t vlen, uint64_t tag)
{
	return sfs_vcache_put_h(c, sfs_vcache_hash(state, ns, key, klen), state, ns, key, klen, val,
				vlen, tag);
}

static inline int sfs_vcache_put_absent(struct sfs_vcache *c, uint32_t state, uint64_t ns,
					const void *key, size_t klen, uint64_t tag)
{
	return sfs_vcache_put_absent_h(c, sfs_vcache_hash(state, ns, key, klen), state, ns, key,
				       klen, tag);
}

static inline int sfs_vcache_invalidate(struct sfs_vcache *c, uint32_t state, uint64_t ns,
					const void *key, size_t klen)
{
	return sfs_vcache_invalidate_h(c, sfs_vcache_hash(state, ns, key, klen), state, ns, key,
				       klen);
}

#endif
