/*
 * wbuf.h — a worker's write buffer: every write since the last barrier, in
 * shared memory, as an open-addressing hash index over an append arena.
 *
 * One writer (the owning worker) and any number of lock-free readers in
 * other processes (the compactor flushing a sealed buffer, `sfs_attach`
 * readers of the active one), which map the memory at other addresses: the
 * buffer holds offsets from its own header, never a pointer.
 *
 * Layout of the caller-given block (64-byte aligned; e.g. a segment region):
 *
 *   [struct sfs_wbuf, 128 B]   identity + read-mostly line, owner's counters
 *   [index: 2^k slots x 8 B]   slot word = gen:16 | tag:12 | (offset/8):36
 *   [arena]                    entries, appended, 8-byte aligned, immutable
 *
 * An entry is a 24-byte header {hash, namespace, key length | kind, value
 * length}, the key bytes padded to 8, the value bytes padded to 8 (so every
 * value is 8-byte aligned: an int64 counter can be read in place).
 *
 * Publication.  The owner writes a whole entry into fresh arena bytes, then
 * stores its offset into the key's slot with release order; a reader loads
 * the slot with acquire order and only then reads the entry, so it sees the
 * old entry or the new one, whole: no seqlock, no torn value.  Nothing of an
 * entry changes after that, with one exception (counter cells, below).
 *
 * Overwrite = append.  A put of an existing key appends a new entry and
 * swaps the slot; the old version stays in the arena (counted as dead
 * bytes) until the buffer is reset.  Cost: arena bytes grow with the number
 * of writes, not of keys — the price of never mutating a value a reader may
 * be copying.  Counters, whose update rate is the highest, avoid it:
 *
 * Counter cells (merge_add).  The first add to a key appends one entry
 * flagged SFS_WBUF_CELL whose value is one aligned int64; every later add to
 * that key folds in place with a plain load and one single-copy-atomic
 * 64-bit store by the owner (no RMW: there is one writer).  A reader can not
 * see a torn sum (an aligned 8-byte access is single-copy atomic on every
 * 64-bit target; sfs_wbuf_view_i64 does the matching atomic load), but a
 * cell's value is not frozen: two reads may return two sums, each whole.
 * So a counter costs one entry per key per buffer (24 + key + 8 bytes), not
 * one per add, and an add is a probe + load + store, no append.  A cell is
 * never folded after the buffer is sealed, so what the compactor flushes
 * is immutable.  Only the value word of a cell ever changes; its key,
 * namespace, kind and lengths never do.
 *
 * What get returns (so the caller can fold over lower layers):
 *   PUT                      the value (the layers below are shadowed)
 *   DELETE                   a tombstone (shadows the layers below)
 *   MERGE  (cell)            the sum of the deltas added since the buffer
 *                            began: fold it over the lower layers
 *   PUT v, then adds d...    PUT (cell) of v + sum(d): one int64 (v must be
 *                            8 bytes, or the add is refused with SFS_EUSAGE)
 *   DELETE, then adds d...   PUT (cell) of sum(d): the base is gone
 *   adds, then PUT / DELETE  the PUT / the tombstone (a write shadows all)
 * Adds wrap in two's complement (uint64 arithmetic, no overflow trap).
 *
 * Reset in O(1): the generation trick.  Every slot word carries the 16-bit
 * generation of the buffer life that wrote it; a slot is occupied only if
 * its generation is the header's current one.  Reset bumps the generation:
 * every slot is empty at once, without touching the index.  Only when the
 * generation would wrap (every 65535 resets) is the index cleared with one
 * memset (O(index)), so a stale slot can never carry the current
 * generation; amortized that is 8 B x 2^k / 65535 per reset.
 *
 * Probing.  Linear probing from hash & mask; the slot's 12-bit tag (hash
 * bits 52..63) skips nearly every foreign key without touching its entry:
 * one compare of a slot's top 28 bits against (current generation | tag)
 * picks the candidates, and only a mismatch looks at the generation alone
 * (a free slot ends the probe).  A candidate's offset is bounds-checked
 * before its header is read, and its lengths before its key is compared
 * (inline, no memcmp call for keys up to 32 bytes).
 * Keys are never removed from the index (a delete is a tombstone entry), so
 * there are no deleted-slot markers.  The index refuses new keys beyond
 * max_entries (at most 3/4 of the slots): expected probes at that load are
 * 2.5 for a hit and 8.5 for a miss (slots only: 8 per cache line).
 *
 * Costs (hot path: put, delete, merge_add, get): no syscall, no lock, no
 * atomic RMW, no allocation, no call (probe, append and the small copies
 * are forced inline); a put is a hash, a probe, one copy of key + value
 * into the arena, and a release store.  The hash is derived from the key
 * group's hash of the user key when the caller has it (sfs_wbuf_hash_kh).
 *
 * Overhead per entry: 24 B header + padding of key and value to 8 B
 * (0..7 each) + one 8 B slot per live key at load <= 0.75 (>= 10.7 B per
 * key at the limit, more below it).  Superseded versions stay until reset.
 * E.g. 16 B key, 16 B value: 56 B in the arena + 8..10.7 B of index.
 *
 * Limits: key <= SFS_WBUF_KEY_MAX (64 KiB), value <= SFS_WBUF_VALUE_MAX
 * (16 MiB) and no bigger than the arena; longer is refused (SFS_EUSAGE),
 * never truncated.  A buffer is at most 512 GiB (36-bit offset/8 in a slot).
 *
 * Placement: the caller's block (a region of the node's segment, already
 * bound to its NUMA node), so init takes no node of its own.
 *
 * Rules:
 *  - Writers: only the owner calls put/delete/merge_add/seal/reset (no
 *    lock: a second writer would corrupt the buffer).
 *  - Readers (any process, after sfs_wbuf_attach) call get, the iterators,
 *    stats; a view is valid until the reader's next quiescent point (QSBR,
 *    shm/qsbr.h): the owner resets a buffer only after a grace period that
 *    follows its unpublication.  Readers bounds-check every offset they
 *    follow, so a buffer reset under a misbehaving reader (or left by a
 *    crashed owner) gives SFS_ECORRUPT or a miss, never a wild access.
 *  - Iterating the active buffer sees each key's current entry at some
 *    moment; keys inserted during the walk may be missed.  Sealed buffers
 *    are immutable: what the compactor iterates is exact.
 *
 * Caveats: the hash (sfs_wbuf_hash) is part of the format: a build that
 * changes it must change SFS_WBUF_VERSION (the layout fingerprint, and so
 * the segment's, includes it: the memory store is placed by this hash).
 * An owner that dies inside a put leaves at most an unreferenced entry and
 * counters off by one; the worker drops its active buffer on a crash
 * anyway (sfs_wbuf_reset or init).
 */
#ifndef SFS_WORKER_WBUF_H
#define SFS_WORKER_WBUF_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sfs.h"
#include "common/hash.h"
#include "common/keycmp.h"
#include "common/merge.h"
#include "shm/atomic.h"

#define SFS_WBUF_MAGIC   0x3146425753465303ull /* "\3SFSWBF1" little-endian */
#define SFS_WBUF_VERSION 2u  /* 2: prefix + body hash (sfs_hash_prefixed) */

#define SFS_WBUF_KEY_MAX   (64u * 1024)         /* bytes, inclusive */
#define SFS_WBUF_VALUE_MAX (16u * 1024 * 1024)  /* bytes, inclusive */

/* Block alignment required by init and attach (the header's cache lines). */
#define SFS_WBUF_ALIGN 64u
/* The index starts right after the 128-byte header. */
#define SFS_WBUF_INDEX_OFF 128u

/* The probe, the append and the write checks are forced inline: gcc
 * otherwise keeps one out-of-line copy of each, and each call, with seven
 * or more arguments and its register saves, costs ~20-40 instructions of a
 * get or put that is ~200 in all (callgrind, bench/RESULTS.md). */
#define SFS__WBUF_HOT static inline __attribute__((always_inline))

/* Entry kinds (low nibble of the kind byte) and flags. */
enum {
	SFS_WBUF_PUT = 1,     /* a value */
	SFS_WBUF_DELETE = 2,  /* a tombstone: value length 0 */
	SFS_WBUF_MERGE = 3,   /* an int64 delta to fold over the lower layers */
};
#define SFS_WBUF_KIND_MASK 0x0fu
#define SFS_WBUF_CELL      0x10u  /* the 8-byte value is a counter cell the
				   * owner folds adds into (see above) */
#define SFS_WBUF_EXPIRED   0x20u  /* a view's flag, never stored: the flush
				   * found this map or list entry expired
				   * (common/ttl.h): apply it as removed */

/* Slot word geometry. */
#define SFS_WBUF_GEN_BITS 16
#define SFS_WBUF_TAG_BITS 12
#define SFS_WBUF_OFF_BITS 36
#define SFS_WBUF_GEN_MAX  ((1u << SFS_WBUF_GEN_BITS) - 1)
#define SFS_WBUF_SIZE_MAX ((uint64_t)1 << (SFS_WBUF_OFF_BITS + 3))
#define SFS_WBUF_ENTRIES_MAX ((uint64_t)1 << 34)

/*
 * The shared header.  The handle of a buffer is this struct at the block's
 * start, in every process (no process-local state).
 *
 * Line 0 is read by every get and written almost never (init; wb_gen at a
 * reset; wb_sealed at a seal), so readers and the writer share it clean.
 * Line 1 holds the owner's counters, written by every put.
 */
struct sfs_wbuf {
	/* Identity: init writes every field, wb_magic last with release. */
	uint64_t wb_magic;        /* init, release, last */
	uint32_t wb_version;      /* init: SFS_WBUF_VERSION */
	uint32_t wb_bits;         /* init: k, the index has 2^k slots */
	uint64_t wb_layout;       /* init: sfs_wbuf_layout() of the initialising build */
	uint64_t wb_size;         /* init: bytes of the buffer (end of the arena) */
	uint64_t wb_arena_off;    /* init: first arena byte (128 + 8 * 2^k) */
	uint64_t wb_max_entries;  /* init: live keys the index accepts (<= 3/4 of 2^k) */
	uint64_t wb_gen;          /* owner, release (reset): generation of occupied slots,
				   * 1..SFS_WBUF_GEN_MAX; readers load it with acquire */
	uint32_t wb_sealed;       /* owner, release (seal), after wb_barrier; plain 0 at reset */
	int32_t  wb_owner;        /* init: pid of the initialising owner (for humans) */

	/* Owner's counters: relaxed stores (exact each, not a snapshot together). */
	uint64_t wb_top __sfs_cache_aligned; /* owner: next free arena offset */
	uint64_t wb_live;         /* owner: keys in the index (slots occupied) */
	uint64_t wb_appends;      /* owner: entries appended since reset */
	uint64_t wb_dead;         /* owner: arena bytes of superseded entries */
	uint64_t wb_barrier;      /* owner, before wb_sealed's release: barrier id of the seal */
	uint64_t wb_resets;       /* owner: resets since init */
	uint64_t wb_refused;      /* owner: writes refused with SFS_EFULL since reset */
	uint64_t wb_pad;
};

_Static_assert(sizeof(struct sfs_wbuf) == SFS_WBUF_INDEX_OFF, "wbuf header is two lines");
_Static_assert(offsetof(struct sfs_wbuf, wb_top) == SFS_CACHE_LINE, "counters on line 1");

/* An entry in the arena.  Written once by the owner before its slot is
 * published; immutable after, except the value word of a SFS_WBUF_CELL
 * entry (owner, single-copy-atomic 64-bit stores). */
struct sfs_wbuf_entry {
	uint64_t we_hash;  /* sfs_wbuf_hash(ns, key) */
	uint64_t we_ns;    /* namespace */
	uint32_t we_kf;    /* key length (bits 0..23) | kind byte << 24 */
	uint32_t we_vlen;  /* value length */
	/* key bytes, padded to 8; value bytes, padded to 8 */
};

#define SFS_WBUF_ENTRY_HDR ((uint32_t)sizeof(struct sfs_wbuf_entry))
_Static_assert(sizeof(struct sfs_wbuf_entry) == 24, "entry header is 24 bytes");
_Static_assert(sizeof(void *) == 8, "counter cells need single-copy-atomic 64-bit accesses");

/*
 * A view of one entry, in this process's mapping.  Zero-copy: value and key
 * point into the buffer and stay valid until the caller's next quiescent
 * point (for the owner: until it resets the buffer).  A cell's value may
 * change (whole) while the buffer is active: read it with sfs_wbuf_view_i64.
 */
struct sfs_wbuf_view {
	const void *value;  /* NULL for a tombstone */
	const void *key;
	uint32_t len;       /* value length */
	uint32_t klen;
	uint32_t kind;      /* SFS_WBUF_PUT / DELETE / MERGE */
	uint32_t flags;     /* SFS_WBUF_CELL or 0 */
	uint64_t ns;
	uint64_t hash;
	uint64_t off;       /* the entry's offset in the buffer */
};

struct sfs_wbuf_stats {
	uint64_t size;          /* bytes of the buffer, header and index included */
	uint64_t slots;         /* index slots (2^k) */
	uint64_t max_entries;   /* live keys accepted */
	uint64_t entries;       /* live keys (each has one current entry) */
	uint64_t appends;       /* entries appended since reset, superseded included */
	uint64_t arena_bytes;   /* arena capacity */
	uint64_t bytes_used;    /* arena bytes used since reset */
	uint64_t bytes_dead;    /* of which superseded entries */
	double   load;          /* entries / slots */
	uint64_t gen;           /* current generation */
	uint64_t resets;        /* since init */
	uint64_t refused;       /* SFS_EFULL refusals since reset */
	uint32_t sealed;        /* 1 once sealed */
	uint64_t barrier;       /* barrier id of the seal (valid if sealed) */
};

/* Cursor over the current entries; set .pos = 0 to start. */
struct sfs_wbuf_iter {
	uint64_t pos;  /* next slot to look at */
};

/* ---- slow paths (wbuf.c) ---------------------------------------------- */

/* Fingerprint over sizeof/offsetof of the wbuf structs and the constants
 * fixing the layout.  Stored at init, checked at attach. */
uint64_t sfs_wbuf_layout(void);

/*
 * sfs_wbuf_size - bytes of a buffer that accepts @max_entries live keys and
 * holds @arena_bytes of entries: 128 + 8 * 2^k + arena (k the smallest with
 * 3/4 * 2^k >= @max_entries, at least 3).  0 if a figure is 0 or too big
 * (more than SFS_WBUF_ENTRIES_MAX keys, or past SFS_WBUF_SIZE_MAX).  Pure.
 */
size_t sfs_wbuf_size(uint64_t max_entries, uint64_t arena_bytes);

/*
 * sfs_wbuf_init - make the @size bytes at @mem an empty buffer accepting
 * @max_entries live keys; the arena is what the index leaves of @size
 * (truncated to a multiple of 8).  Handle (== @mem) in *@out.  The caller
 * becomes the owner.
 * Errors: SFS_EUSAGE (alignment, @max_entries 0 or too big, @size smaller
 * than header + index + 64 B of arena, or above SFS_WBUF_SIZE_MAX).
 * Cost: O(index) once, to clear the slots (8 B per slot).
 */
int sfs_wbuf_init(void *mem, size_t size, uint64_t max_entries, struct sfs_wbuf **out);

/*
 * sfs_wbuf_attach - adopt a buffer initialised elsewhere, mapped at @mem
 * with @size bytes readable (at least the buffer's own size): checks magic,
 * version, layout fingerprint and geometry, naming what differs.
 * Errors: SFS_EMAGIC, SFS_EVERSION, SFS_ELAYOUT, SFS_ECORRUPT, SFS_EUSAGE.
 * O(1).
 */
int sfs_wbuf_attach(void *mem, size_t size, struct sfs_wbuf **out);

/*
 * sfs_wbuf_seal - freeze the buffer at barrier @barrier: later writes fail
 * with SFS_EUSAGE.  The barrier id is stored first, then wb_sealed with
 * release, so a reader that sees the flag (acquire) sees the id and every
 * entry.  Owner only.  O(1): two stores.
 * Errors: SFS_EUSAGE if already sealed.
 */
int sfs_wbuf_seal(struct sfs_wbuf *b, uint64_t barrier);

/* 1 and the barrier id in *@barrier (may be NULL) if sealed, else 0.
 * Any process (acquire). */
int sfs_wbuf_sealed(const struct sfs_wbuf *b, uint64_t *barrier);

/*
 * sfs_wbuf_reset - empty the buffer for reuse (unsealed).  Owner only, and
 * only after a grace period since the last reader could have got a view.
 * O(1): bumps the generation (release) and rewinds the arena; every 65535th
 * reset clears the index instead (memset, O(index)).
 */
void sfs_wbuf_reset(struct sfs_wbuf *b);

/* Counters, any process (relaxed loads).  O(1). */
void sfs_wbuf_stats(const struct sfs_wbuf *b, struct sfs_wbuf_stats *st);

/*
 * sfs_wbuf_next - the next current entry of the buffer in index (hash)
 * order: 0 and *@v filled, or -ENOENT at the end, or SFS_ECORRUPT (a slot
 * points outside the arena; the cursor moves past it, the walk can go on).
 * Tombstones and cells included: the flush needs them.  Any process.
 * Cost: O(slots) for a whole walk, however few keys are live.
 */
int sfs_wbuf_next(const struct sfs_wbuf *b, struct sfs_wbuf_iter *it, struct sfs_wbuf_view *v);

/*
 * sfs_wbuf_view_at - decode the entry at @off (from sfs_wbuf_sorted or a
 * view) into *@v, bounds-checked.  0, or SFS_ECORRUPT.  Any process.  O(1).
 */
int sfs_wbuf_view_at(const struct sfs_wbuf *b, uint64_t off, struct sfs_wbuf_view *v);

/*
 * sfs_wbuf_sorted - write the offsets of all current entries into @offs
 * (room for @cap), sorted by key bytes (memcmp; a key that is a prefix of
 * another sorts first), then namespace; *@n = how many.  Keys start with
 * their big-endian key group, so this is key-group order: what a flush
 * writes.  Meant for a sealed buffer (the compactor).
 * Errors: SFS_EUSAGE if @cap is too small (*@n = the count needed);
 * SFS_ECORRUPT for a slot outside the arena.
 * Cost: O(slots) to collect + O(n log n) to sort 16-byte (8-byte key
 * prefix, offset) pairs in a temporary malloc'd array, touching an entry's
 * full key only when prefixes tie; without memory, an in-place sort of the
 * offsets that reads entries at every compare.  Not a hot path.
 */
int sfs_wbuf_sorted(const struct sfs_wbuf *b, uint64_t *offs, size_t cap, size_t *n);

/* Test hook: sort on the first 8 varying bytes, as on a CPU without BMI2. */
void sfs__wbuf_sort_bytes_only(int on);

/*
 * sfs_wbuf_verify - check every invariant: occupied slots point to whole
 * entries inside the used arena, tags match hashes, every key is reachable
 * from its home slot, no key twice, wb_live counts the slots.  0 or
 * SFS_ECORRUPT naming the slot.  O(slots x probe): tests and adoption after
 * a crash, never the hot path.
 */
int sfs_wbuf_verify(const struct sfs_wbuf *b);

/* Slow paths of the inline writers: record why a write is refused. */
int sfs__wbuf_refuse(struct sfs_wbuf *b, const char *op, size_t klen, size_t vlen);
int sfs__wbuf_full(struct sfs_wbuf *b, const char *op, uint32_t klen, uint32_t vlen,
		   int index_full);
int sfs__wbuf_corrupt(const struct sfs_wbuf *b, uint64_t slot, uint64_t word);
int sfs__wbuf_notint(struct sfs_wbuf *b, uint32_t vlen);

/* ---- hashing ------------------------------------------------------------ */




/*
 * sfs_wbuf_hash - the 64-bit hash of (namespace, key) that places a key in
 * the index.  A key of 4 bytes or more is hashed as prefix + body
 * (common/hash.h: sfs_hash_prefixed over sfs_hash_body of the bytes after
 * the first 4, namespace as the seed): for a buffered key (kg | state |
 * user key) the body hash is the key-group hash of the user key, which the
 * state layer has already computed, so it passes that to sfs_wbuf_hash_kh
 * and hashes each key once.  Shorter keys (never the state layer's) take
 * sfs_hash_bytes with (namespace, length) as the seed.  Fixed seeds: every
 * process computes the same hash.  Part of the format.  Cost: ~2
 * multiplies per 16 key bytes + 2.
 */
static inline uint64_t sfs_wbuf_hash(uint64_t ns, const void *key, size_t klen)
{
	return sfs_hash_key(ns, key, klen);
}

/* sfs_wbuf_hash of a key of @klen >= 4 bytes whose first 4 bytes are the
 * native u32 @pfx and whose remaining bytes hash to @bh (sfs_hash_body).
 * Two multiplies. */
static inline uint64_t sfs_wbuf_hash_kh(uint64_t ns, uint32_t pfx, size_t klen, uint64_t bh)
{
	return sfs_hash_prefixed(ns, pfx, klen, bh);
}

/* The hash the non-_h wrappers use: an over-long key (refused or never
 * found by the _h function) is not read. */
static inline uint64_t sfs__wbuf_hash_ck(uint64_t ns, const void *key, size_t klen)
{
	return klen > SFS_WBUF_KEY_MAX ? 0 : sfs_wbuf_hash(ns, key, klen);
}

/* ---- slot words and entries --------------------------------------------- */

static inline uint64_t *sfs__wbuf_slots(const struct sfs_wbuf *b)
{
	return (uint64_t *)((char *)b + SFS_WBUF_INDEX_OFF);
}

static inline uint64_t sfs__wbuf_tag(uint64_t h)
{
	return h >> (64 - SFS_WBUF_TAG_BITS);
}

static inline uint64_t sfs__wbuf_slot(uint64_t gen, uint64_t h, uint64_t off)
{
	return gen << (SFS_WBUF_TAG_BITS + SFS_WBUF_OFF_BITS) |
	       sfs__wbuf_tag(h) << SFS_WBUF_OFF_BITS | off >> 3;
}

static inline uint64_t sfs__wbuf_slot_gen(uint64_t w)
{
	return w >> (SFS_WBUF_TAG_BITS + SFS_WBUF_OFF_BITS);
}

static inline uint64_t sfs__wbuf_slot_tag(uint64_t w)
{
	return (w >> SFS_WBUF_OFF_BITS) & ((1u << SFS_WBUF_TAG_BITS) - 1);
}

static inline uint64_t sfs__wbuf_slot_off(uint64_t w)
{
	return (w & (((uint64_t)1 << SFS_WBUF_OFF_BITS) - 1)) << 3;
}

static inline uint32_t sfs__wbuf_pad8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

/* Arena bytes of an entry with a @klen-byte key and a @vlen-byte value. */
static inline uint64_t sfs_wbuf_entry_size(uint32_t klen, uint32_t vlen)
{
	/* in 64 bits: a corrupt length near 2^32 must not pad to 0 and pass
	 * the bounds checks of sfs__wbuf_entry (found by fuzz_bufimg) */
	return (uint64_t)SFS_WBUF_ENTRY_HDR + (((uint64_t)klen + 7) & ~7ull) +
	       (((uint64_t)vlen + 7) & ~7ull);
}

static inline uint32_t sfs__wbuf_klen(const struct sfs_wbuf_entry *e)
{
	return e->we_kf & 0xffffffu;
}

static inline uint32_t sfs__wbuf_kindb(const struct sfs_wbuf_entry *e)
{
	return e->we_kf >> 24;
}

static inline uint8_t *sfs__wbuf_value(const struct sfs_wbuf_entry *e)
{
	return (uint8_t *)(e + 1) + sfs__wbuf_pad8(sfs__wbuf_klen(e));
}

/*
 * The entry a slot word names, bounds-checked against the buffer (a reader
 * trusts nothing it follows): NULL if the entry would leave the arena.
 * Three compares on the hot path.
 */
static inline const struct sfs_wbuf_entry *sfs__wbuf_entry(const struct sfs_wbuf *b, uint64_t w)
{
	uint64_t off = sfs__wbuf_slot_off(w), size = b->wb_size;
	const struct sfs_wbuf_entry *e;

	if (off < b->wb_arena_off || off > size - SFS_WBUF_ENTRY_HDR)
		return NULL;
	e = (const struct sfs_wbuf_entry *)((const char *)b + off);
	if (sfs_wbuf_entry_size(sfs__wbuf_klen(e), e->we_vlen) > size - off)
		return NULL;
	return e;
}

/* memcpy of @n bytes between ranges that do not overlap, inline for 8..32
 * bytes (overlapping word moves), a call beyond. */
SFS__WBUF_HOT void sfs__wbuf_copy(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *p = src;

	if (n >= 8 && n <= 32) {
		uint64_t w0 = sfs__hash_r64(p), w3 = sfs__hash_r64(p + n - 8);

		if (n > 16) {
			uint64_t w1 = sfs__hash_r64(p + 8), w2 = sfs__hash_r64(p + n - 16);

			memcpy(d + 8, &w1, 8);
			memcpy(d + n - 16, &w2, 8);
		}
		memcpy(d, &w0, 8);
		memcpy(d + n - 8, &w3, 8);
		return;
	}
	memcpy(dst, src, n);
}

static inline void sfs__wbuf_fill(const struct sfs_wbuf *b, const struct sfs_wbuf_entry *e,
				  struct sfs_wbuf_view *v)
{
	uint32_t kb = sfs__wbuf_kindb(e);

	v->kind = kb & SFS_WBUF_KIND_MASK;
	v->flags = kb & ~SFS_WBUF_KIND_MASK;
	v->klen = sfs__wbuf_klen(e);
	v->len = e->we_vlen;
	v->key = e + 1;
	v->value = v->kind == SFS_WBUF_DELETE ? NULL : sfs__wbuf_value(e);
	v->ns = e->we_ns;
	v->hash = e->we_hash;
	v->off = (uint64_t)((const char *)e - (const char *)b);
}

/*
 * What a probe needs of a buffer's header: its geometry (fixed at init) and
 * the generation of occupied slots.  sfs__wbuf_probe reads it from the
 * header at every call, as a reader in another process must (the owner
 * may reset the buffer between two of its probes).  The owner may keep a
 * copy (worker/state.c keeps one of its active buffer) and probe with
 * it directly: nothing in it changes until the owner itself resets the
 * buffer, so its gets load nothing of the header.  A copy taken from a
 * header that another process corrupted later is, if anything, safer: the
 * bounds below stay the ones the buffer was made with.
 */
struct sfs_wbuf_geom {
	struct sfs_wbuf *b;  /* the owner writes through it (upsert); readers only probe */
	const uint64_t *slots;
	uint64_t mask;  /* 2^k - 1 */
	uint64_t gen;   /* generation of occupied slots */
	uint64_t lo;    /* first arena byte */
	uint64_t span;  /* size - entry header - lo: the last offset a header fits at, from lo */
	uint64_t size;  /* end of the arena */
};

static inline void sfs_wbuf_geom_of(const struct sfs_wbuf *b, struct sfs_wbuf_geom *g)
{
	g->b = (struct sfs_wbuf *)(uintptr_t)b;
	g->slots = sfs__wbuf_slots(b);
	g->gen = sfs_load_acquire(&((struct sfs_wbuf *)b)->wb_gen);
	g->mask = ((uint64_t)1 << b->wb_bits) - 1;
	g->size = b->wb_size;
	g->lo = b->wb_arena_off;
	g->span = g->size - SFS_WBUF_ENTRY_HDR - g->lo;
}

/*
 * sfs__wbuf_probe_g - probe for (@h, @ns, @key) in the buffer of geometry
 * @g: 0 with the entry in *@e and its slot in *@slot;
 * -ENOENT with the first free slot in *@slot; SFS_ECORRUPT if a slot with a
 * matching tag points outside the arena, or an entry whose header matches
 * claims bytes beyond it, or no free slot ends the probe.
 * Acquire loads of the slots (plain loads on x86-64): the owner and readers
 * share this code.
 *
 * The hot loop: one compare of a slot's top 28 bits (generation | tag)
 * against the wanted pair decides "maybe this key" in one step; only a
 * mismatch looks at the generation alone (a free slot ends the probe).  A
 * candidate's offset is bounds-checked before its header is read, its
 * length before its key is read, so a stale or foreign slot is a miss or
 * SFS_ECORRUPT, never a wild read.  Key compare inline (sfs_keyeq).
 * About 25 instructions for a hit at the home slot.
 */
SFS__WBUF_HOT int sfs__wbuf_probe_g(const struct sfs_wbuf_geom *g, uint64_t h, uint64_t ns,
				    const void *key, uint32_t klen, uint32_t pfx, int split,
				    const struct sfs_wbuf_entry **e, uint64_t *slot)
{
	const uint64_t *slots = g->slots;
	uint64_t gen = g->gen, mask = g->mask, size = g->size, lo = g->lo, span = g->span;
	uint64_t want = gen << SFS_WBUF_TAG_BITS | sfs__wbuf_tag(h);
	uint32_t kl = split ? klen + 4 : klen;  /* the stored key's length */
	uint64_t kend = SFS_WBUF_ENTRY_HDR + sfs__wbuf_pad8(kl);  /* header + padded key */
	uint64_t i = h & mask, w;

	for (uint64_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		uint64_t top, off;
		const struct sfs_wbuf_entry *x;

		w = sfs_load_acquire(&((uint64_t *)slots)[i]);
		top = w >> SFS_WBUF_OFF_BITS;

		if (top != want) {
			if (top >> SFS_WBUF_TAG_BITS != gen) {
				*e = NULL;
				*slot = i;
				return -ENOENT;
			}
			continue;
		}
		off = sfs__wbuf_slot_off(w);
		x = (const struct sfs_wbuf_entry *)((const char *)g->b + off);
		if (__builtin_expect(off - lo > span, 0))	/* below the arena wraps too */
			goto corrupt;
		if (x->we_hash != h || x->we_ns != ns || sfs__wbuf_klen(x) != kl)
			continue;
		/* entry_size > size - off, in one add: size - off is a multiple
		 * of 8, so padding the value to 8 changes nothing. */
		if (__builtin_expect(kend + x->we_vlen > size - off, 0))
			goto corrupt;
		if (split ? (uint32_t)sfs__hash_r32((const uint8_t *)(x + 1)) == pfx &&
				    sfs_keyeq((const uint8_t *)(x + 1) + 4, key, klen)
			  : sfs_keyeq(x + 1, key, klen)) {
			*e = x;
			*slot = i;
			return 0;
		}
	}
	w = 0;	/* no free slot ends the probe */
corrupt:
	*e = NULL;
	*slot = i;
	return sfs__wbuf_corrupt(g->b, i, w);
}

/* sfs__wbuf_probe_g with the geometry read from @b's header now. */
SFS__WBUF_HOT int sfs__wbuf_probe(const struct sfs_wbuf *b, uint64_t h, uint64_t ns,
				  const void *key, uint32_t klen, uint32_t pfx, int split,
				  const struct sfs_wbuf_entry **e, uint64_t *slot)
{
	struct sfs_wbuf_geom g;

	sfs_wbuf_geom_of(b, &g);
	return sfs__wbuf_probe_g(&g, h, ns, key, klen, pfx, split, e, slot);
}

SFS__WBUF_HOT int sfs__wbuf_find(const struct sfs_wbuf *b, uint64_t h, uint64_t ns,
				 const void *key, uint32_t klen, const struct sfs_wbuf_entry **e,
				 uint64_t *slot)
{
	return sfs__wbuf_probe(b, h, ns, key, klen, 0, 0, e, slot);
}

/*
 * sfs__wbuf_find_pk - sfs__wbuf_find of the key @pfx | @ukey (@ulen + 4
 * bytes), given in two parts: the 4-byte prefix as a native u32 and the
 * rest where the caller has it.  The state layer's keys are kg | state |
 * user key; this spares it assembling them in a scratch buffer before a
 * probe that usually answers from the buffer.
 */
SFS__WBUF_HOT int sfs__wbuf_find_pk(const struct sfs_wbuf *b, uint64_t h, uint64_t ns,
				    uint32_t pfx, const void *ukey, uint32_t ulen,
				    const struct sfs_wbuf_entry **e, uint64_t *slot)
{
	return sfs__wbuf_probe(b, h, ns, ukey, ulen, pfx, 1, e, slot);
}

/* ---- reads (any process) ------------------------------------------------ */

/* Prefetch the home slot of hash @h in the buffer of geometry @g
 * (batched lookups: hash all, prefetch all, then probe). */
static inline void sfs_wbuf_prefetch_g(const struct sfs_wbuf_geom *g, uint64_t h)
{
	__builtin_prefetch(g->slots + (h & g->mask));
}

/* Second stage of a batched lookup: once the home slot is in cache (after
 * sfs_wbuf_prefetch_g), prefetch the entry it points to if its tag matches,
 * so the compare of the get that follows does not wait for memory: its
 * header and the @klen key bytes after it, which cross into a second
 * cache line whenever the entry starts past byte 64 - 24 - @klen of one
 * (entries are 8-aligned; with 64-byte values about half of them). */
static inline void sfs_wbuf_prefetch_entry_g(const struct sfs_wbuf_geom *g, uint64_t h, size_t klen)
{
	uint64_t w = sfs_load_relaxed(&g->slots[h & g->mask]);

	if (sfs__wbuf_slot_gen(w) == g->gen && sfs__wbuf_slot_tag(w) == sfs__wbuf_tag(h)) {
		const char *e = (const char *)g->b + sfs__wbuf_slot_off(w);

		__builtin_prefetch(e);
		__builtin_prefetch(e + SFS_WBUF_ENTRY_HDR + klen - 1);
	}
}

/*
 * sfs_wbuf_get_h - the current entry of (@ns, @key) whose hash is @h
 * (sfs_wbuf_hash): 0 and *@v filled (kind PUT, DELETE or MERGE: see the
 * table at the top), -ENOENT if the buffer has no entry for the key (look
 * in the next layer; no message is recorded), SFS_ECORRUPT if a slot points
 * outside the arena.  Any process; zero-copy.  Cost: a probe (2.5 slots
 * expected on a hit, 8.5 on a miss at full load), one key compare.
 */
static inline int sfs_wbuf_get_h(const struct sfs_wbuf *b, uint64_t h, uint64_t ns,
				 const void *key, size_t klen, struct sfs_wbuf_view *v)
{
	const struct sfs_wbuf_entry *e;
	uint64_t slot;
	int rc;

	if (klen > SFS_WBUF_KEY_MAX)  /* never stored */
		return -ENOENT;
	rc = sfs__wbuf_find(b, h, ns, key, (uint32_t)klen, &e, &slot);
	if (rc == 0)
		sfs__wbuf_fill(b, e, v);
	return rc;
}

static inline int sfs_wbuf_get(const struct sfs_wbuf *b, uint64_t ns, const void *key,
			       size_t klen, struct sfs_wbuf_view *v)
{
	return sfs_wbuf_get_h(b, sfs__wbuf_hash_ck(ns, key, klen), ns, key, klen, v);
}

/* The int64 of an 8-byte value (a counter cell or a PUT of an int64): one
 * single-copy-atomic load, so a cell being folded is read whole. */
static inline int64_t sfs_wbuf_view_i64(const struct sfs_wbuf_view *v)
{
	return (int64_t)sfs_load_relaxed((const uint64_t *)v->value);
}

/* ---- writes (owner only) ------------------------------------------------ */

/* A key in two parts (sfs_wbuf_upsert_pk): append's @key points to this
 * when its kind byte carries SFS__WBUF_SPLIT, a flag of the call only
 * (never stored: SFS_WBUF_CELL and the kind leave it free). */
struct sfs__wbuf_pk {
	uint32_t pfx;
	const void *ukey;
};
#define SFS__WBUF_SPLIT 0x80u

/*
 * Append an entry and publish it in @slot (the key's slot if @old, else the
 * free slot the probe ended at).  Checks capacity first: a refused write
 * changes nothing.  Owner only.
 */
/* Append an entry whose value is @val (@vlen) followed by @val2 (@vlen2:
 * a header and a payload written without staging them together). */
SFS__WBUF_HOT int sfs__wbuf_append2(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				    uint32_t klen, const void *val, uint32_t vlen, const void *val2,
				    uint32_t vlen2, uint32_t kindb, uint64_t slot,
				    const struct sfs_wbuf_entry *old, const char *op, uint64_t *at)
{
	uint64_t top = b->wb_top, need = sfs_wbuf_entry_size(klen, vlen + vlen2);
	struct sfs_wbuf_entry *e;

	if (__builtin_expect((!old && b->wb_live >= b->wb_max_entries) ||
			     need > b->wb_size - top, 0))
		return sfs__wbuf_full(b, op, klen, vlen + vlen2,
				      !old && b->wb_live >= b->wb_max_entries);
	e = (struct sfs_wbuf_entry *)((char *)b + top);
	e->we_hash = h;
	e->we_ns = ns;
	e->we_kf = klen | (kindb & ~SFS__WBUF_SPLIT) << 24;
	e->we_vlen = vlen + vlen2;
	if (kindb & SFS__WBUF_SPLIT) {	/* @key is the prefix word, then the rest */
		const struct sfs__wbuf_pk *pk = key;

		memcpy(e + 1, &pk->pfx, 4);
		sfs__wbuf_copy((uint8_t *)(e + 1) + 4, pk->ukey, klen - 4);
	} else {
		sfs__wbuf_copy(e + 1, key, klen);
	}
	if (vlen)
		sfs__wbuf_copy((uint8_t *)(e + 1) + sfs__wbuf_pad8(klen), val, vlen);
	if (vlen2)
		memcpy((uint8_t *)(e + 1) + sfs__wbuf_pad8(klen) + vlen, val2, vlen2);
	if (at)
		*at = top;
	sfs_store_relaxed(&b->wb_top, top + need);
	sfs_store_release(&sfs__wbuf_slots(b)[slot], sfs__wbuf_slot(b->wb_gen, h, top));
	sfs_store_relaxed(&b->wb_appends, b->wb_appends + 1);
	if (old)
		sfs_store_relaxed(&b->wb_dead,
				  b->wb_dead + sfs_wbuf_entry_size(sfs__wbuf_klen(old), old->we_vlen));
	else
		sfs_store_relaxed(&b->wb_live, b->wb_live + 1);
	return 0;
}

SFS__WBUF_HOT int sfs__wbuf_append(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				   uint32_t klen, const void *val, uint32_t vlen, uint32_t kindb,
				   uint64_t slot, const struct sfs_wbuf_entry *old, const char *op)
{
	return sfs__wbuf_append2(b, h, ns, key, klen, val, vlen, NULL, 0, kindb, slot, old, op,
				 NULL);
}

SFS__WBUF_HOT int sfs__wbuf_check(struct sfs_wbuf *b, const char *op, size_t klen, size_t vlen)
{
	if (__builtin_expect(klen > SFS_WBUF_KEY_MAX || vlen > SFS_WBUF_VALUE_MAX ||
			     b->wb_sealed, 0))
		return sfs__wbuf_refuse(b, op, klen, vlen);
	return 0;
}

/*
 * sfs_wbuf_upsert_h - sfs_wbuf_put_h that says what it did: 1 when the key
 * is new to this buffer, 0 when its entry was replaced, or put's errors.
 * (The state layer drops a key from its value cache only when it is new to
 * the active buffer: a key the active buffer holds cannot be cached.)
 */
SFS__WBUF_HOT int sfs_wbuf_upsert_h(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				    size_t klen, const void *val, size_t vlen)
{
	const struct sfs_wbuf_entry *old = NULL;
	uint64_t slot;
	int rc = sfs__wbuf_check(b, "put", klen, vlen);

	if (rc)
		return rc;
	rc = sfs__wbuf_find(b, h, ns, key, (uint32_t)klen, &old, &slot);
	if (rc && rc != -ENOENT)
		return rc;
	old = rc ? NULL : old;
	rc = sfs__wbuf_append(b, h, ns, key, (uint32_t)klen, val, (uint32_t)vlen, SFS_WBUF_PUT, slot,
			      old, "put");
	return rc ? rc : !old;
}

/*
 * sfs_wbuf_upsert_pk - sfs_wbuf_upsert_h of the key @pfx | @ukey (@ulen +
 * 4 bytes; see sfs__wbuf_find_pk) into the buffer of geometry @g (the
 * owner's copy, struct sfs_wbuf_geom): the two parts are copied straight
 * into the entry.  Owner only.
 */
SFS__WBUF_HOT int sfs_wbuf_upsert_pk(const struct sfs_wbuf_geom *g, uint64_t h, uint64_t ns,
				     uint32_t pfx, const void *ukey, size_t ulen, const void *val,
				     size_t vlen)
{
	struct sfs_wbuf *b = g->b;
	const struct sfs_wbuf_entry *old = NULL;
	struct sfs__wbuf_pk pk = { pfx, ukey };
	uint64_t slot;
	int rc = sfs__wbuf_check(b, "put", ulen + 4, vlen);

	if (rc)
		return rc;
	rc = sfs__wbuf_probe_g(g, h, ns, ukey, (uint32_t)ulen, pfx, 1, &old, &slot);
	if (rc && rc != -ENOENT)
		return rc;
	old = rc ? NULL : old;
	rc = sfs__wbuf_append(b, h, ns, &pk, (uint32_t)ulen + 4, val, (uint32_t)vlen,
			      SFS_WBUF_PUT | SFS__WBUF_SPLIT, slot, old, "put");
	return rc ? rc : !old;
}

/*
 * sfs_wbuf_put_h - (@ns, @key) := @val.  Appends an entry and publishes it
 * (a reader sees the old or the new value whole).  Owner only.
 * Errors: SFS_EUSAGE (sealed; key or value over its limit, or an entry that
 * can never fit in this arena), SFS_EFULL (arena or index full: nothing is
 * changed; flush and retry in another buffer), SFS_ECORRUPT.
 * Cost: hash (the _h form takes it), probe, one copy of key + value.
 */
static inline int sfs_wbuf_put_h(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				 size_t klen, const void *val, size_t vlen)
{
	int rc = sfs_wbuf_upsert_h(b, h, ns, key, klen, val, vlen);

	return rc > 0 ? 0 : rc;
}

/*
 * sfs_wbuf_put2_h - a put whose value is @hdr (@hlen) then @val (@vlen),
 * copied straight into the arena; *@at (may be NULL) gets the entry's
 * offset (for chains of entries, worker/mapstate.c).  Owner only.
 */
static inline int sfs_wbuf_put2_h(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				  size_t klen, const void *hdr, size_t hlen, const void *val,
				  size_t vlen, uint64_t *at)
{
	const struct sfs_wbuf_entry *old = NULL;
	uint64_t slot;
	int rc = sfs__wbuf_check(b, "put", klen, hlen + vlen);

	if (rc)
		return rc;
	rc = sfs__wbuf_find(b, h, ns, key, (uint32_t)klen, &old, &slot);
	if (rc && rc != -ENOENT)
		return rc;
	return sfs__wbuf_append2(b, h, ns, key, (uint32_t)klen, hdr, (uint32_t)hlen, val,
				 (uint32_t)vlen, SFS_WBUF_PUT, slot, rc ? NULL : old, "put", at);
}

static inline int sfs_wbuf_put(struct sfs_wbuf *b, uint64_t ns, const void *key, size_t klen,
			       const void *val, size_t vlen)
{
	return sfs_wbuf_put_h(b, sfs__wbuf_hash_ck(ns, key, klen), ns, key, klen, val, vlen);
}

/*
 * sfs_wbuf_delete_h - a tombstone for (@ns, @key): shadows the key in the
 * lower layers, so it is written even if this buffer has never seen the
 * key; a key whose current entry is already a tombstone costs nothing.
 * Owner only.  Errors and cost as put (value length 0).
 */
static inline int sfs_wbuf_delete_h(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				    size_t klen)
{
	const struct sfs_wbuf_entry *old = NULL;
	uint64_t slot;
	int rc = sfs__wbuf_check(b, "delete", klen, 0);

	if (rc)
		return rc;
	rc = sfs__wbuf_find(b, h, ns, key, (uint32_t)klen, &old, &slot);
	if (rc == 0 && (sfs__wbuf_kindb(old) & SFS_WBUF_KIND_MASK) == SFS_WBUF_DELETE)
		return 0;
	if (rc && rc != -ENOENT)
		return rc;
	return sfs__wbuf_append(b, h, ns, key, (uint32_t)klen, NULL, 0, SFS_WBUF_DELETE, slot,
				rc ? NULL : old, "delete");
}

static inline int sfs_wbuf_delete(struct sfs_wbuf *b, uint64_t ns, const void *key, size_t klen)
{
	return sfs_wbuf_delete_h(b, sfs__wbuf_hash_ck(ns, key, klen), ns, key, klen);
}

/*
 * sfs_wbuf_merge_h - fold @delta into the int64 cell of (@ns, @key) with merge
 * operator @op (common/merge.h; merge_add_h: add), a
 * blind write (no read of the lower layers).  Folds into the key's cell in
 * place when it has one (one atomic 64-bit store, no append); otherwise
 * appends a cell: MERGE(delta) over nothing, PUT(v + delta) over an 8-byte
 * PUT, PUT(delta) over a tombstone.  Owner only.
 * Errors: as put, and SFS_EUSAGE if the key's current value is a PUT that
 * is not 8 bytes (not an int64; nothing is changed).
 * Cost: hash, probe, then a load + store (fold) or a 32 + klen byte append.
 */
static inline int sfs_wbuf_merge_h(struct sfs_wbuf *b, uint64_t h, uint64_t ns, const void *key,
				   size_t klen, unsigned op, int64_t delta)
{
	const struct sfs_wbuf_entry *old = NULL;
	uint64_t slot, v = (uint64_t)delta;
	uint32_t kindb = SFS_WBUF_MERGE | SFS_WBUF_CELL;
	int rc = sfs__wbuf_check(b, "merge", klen, 8);

	if (rc)
		return rc;
	rc = sfs__wbuf_find(b, h, ns, key, (uint32_t)klen, &old, &slot);
	if (rc == 0) {
		uint32_t kb = sfs__wbuf_kindb(old);
		uint64_t *cell = (uint64_t *)sfs__wbuf_value(old);

		if (kb & SFS_WBUF_CELL) {
			/* One writer: plain read of its own word, atomic store. */
			sfs_store_relaxed(cell, (uint64_t)sfs_merge_i64(op, (int64_t)*cell, delta));
			return 0;
		}
		if ((kb & SFS_WBUF_KIND_MASK) != SFS_WBUF_DELETE) {
			uint64_t base;

			if (old->we_vlen != 8)
				return sfs__wbuf_notint(b, old->we_vlen);
			memcpy(&base, cell, 8);
			v = (uint64_t)sfs_merge_i64(op, (int64_t)base, delta);
		}
		/* A PUT over a PUT (base + delta) or a tombstone (delta); a
		 * MERGE stays one (only an entry of another build lacks the
		 * cell flag). */
		kindb = ((kb & SFS_WBUF_KIND_MASK) == SFS_WBUF_MERGE ? SFS_WBUF_MERGE : SFS_WBUF_PUT) |
			SFS_WBUF_CELL;
	} else if (rc != -ENOENT) {
		return rc;
	}
	return sfs__wbuf_append(b, h, ns, key, (uint32_t)klen, &v, 8, kindb, slot, rc ? NULL : old,
				"merge");
}

static inline int sfs_wbuf_merge_add_h(struct sfs_wbuf *b, uint64_t h, uint64_t ns,
				       const void *key, size_t klen, int64_t delta)
{
	return sfs_wbuf_merge_h(b, h, ns, key, klen, SFS_MERGE_ADD, delta);
}

static inline int sfs_wbuf_merge_add(struct sfs_wbuf *b, uint64_t ns, const void *key,
				     size_t klen, int64_t delta)
{
	return sfs_wbuf_merge_add_h(b, sfs__wbuf_hash_ck(ns, key, klen), ns, key, klen, delta);
}

#endif
