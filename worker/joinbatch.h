/*
 * joinbatch.h — a join batch: OmniStateStore's two-stream join cache as a
 * state facility.  The records of ONE join input are buffered in shared
 * memory, grouped by join key; a flush (on a size threshold, a barrier or
 * end of input) hands the operator each distinct join key once, with all its
 * buffered records, so the operator reads the other side's map state once
 * per key per batch instead of once per record (and updates its own side
 * once per key).
 *
 * One writer: the owning worker.  Other processes (`sfs stat`, a test, a
 * restarted owner) may attach the same memory at another address and read
 * it, so the block holds offsets from its own start, never a pointer, never
 * a function pointer.  The handle is the struct at the block's start in
 * every process: there is no process-local state.
 *
 * Layout of the caller-given block (64-byte aligned; e.g. a segment region):
 *
 *   [struct sfs_jb, 192 B]     line 0 identity + config (init only),
 *                              line 1 what every add writes, line 2 totals
 *   [index: 2^k slots x 8 B]   slot word = gen:16 | tag:16 | (offset/8):32
 *   [arena]                    key nodes and record nodes, appended, 8-aligned
 *
 * Key node (first record of a new key: one bump for node + record):
 *   {hash 8, klen 4, nrec 4, head 4, tail 4, next key 4, pad 4} = 32 B,
 *   then the key bytes padded to 8.
 * Record node: {next record 4, len 4, seq 8} = 16 B, then the record bytes
 *   padded to 8 (so a record is 8-byte aligned: a caller's struct can be read
 *   in place).
 * Links are 32-bit offsets in units of 8 bytes (0 = none: offset 0 is the
 * header), which halves the link cost per record against 64-bit offsets and
 * caps a block at 32 GiB — join batches are megabytes.
 *
 * Order.  Each key node keeps head and tail of its record chain, so a record
 * is appended at the tail in O(1) and the flush reads a key's records in
 * arrival order with no reversal.  Key nodes form a second chain in
 * first-arrival order of keys (jb_first .. jb_last), which is the flush
 * order: deterministic, independent of the hash, and the walk touches only
 * the keys present (O(keys + records)), never the empty slots of the index.
 *
 * Reset in O(1): the generation trick (as worker/wbuf.h).  Every slot word
 * carries the 16-bit generation of the batch life that wrote it; a slot is
 * occupied only if its generation is the header's current one.  Reset bumps
 * the generation — every slot is empty at once, the index is not touched —
 * and rewinds the arena.  When the generation would wrap (every 65535
 * resets) the index is cleared with one memset (O(index)), so a stale slot
 * can never carry the current generation: amortized 8 B x 2^k / 65535 per
 * reset.  The alternative, clearing only the touched slots (a list of them,
 * or the key chain, which names every key), costs O(distinct keys) per reset
 * — the same order as the flush walk that precedes it, so it would be
 * affordable, but it writes one index cache line per key a second time at
 * every reset; the generation costs nothing per key and makes reset O(1)
 * even when a batch is dropped unread (a worker rolling back).
 *
 * Probing: linear from hash & mask; the 16-bit tag (hash bits 48..63) skips
 * nearly every foreign key without touching its node.  Keys are never
 * removed within a batch life, so there are no deleted-slot markers.  The
 * index accepts at most max_keys distinct keys (<= 3/4 of the slots).
 *
 * The public half is include/sfs_join.h (the opaque handle, the
 * configuration, the flush walk's cursor and callback, every call as an
 * exported function); the layout and the inline fast paths below are
 * sfs's own: sfs__jb_add, sfs__jb_next_key, ... are what the exported
 * sfs_jb_add, sfs_jb_next_key, ... run.
 *
 * Hot path (sfs__jb_add, inline): no syscall, no lock, no atomic RMW, no
 * allocation outside the block.  A hash, a probe, one copy of the record
 * into the arena (plus one copy of the key the first time the key is seen
 * in this batch), and a release store linking it.
 *
 * Overhead per record: 16 B node + padding of the record to 8 (0..7 B).
 * Per distinct key per batch: 32 B node + key padded to 8 + one 8 B slot at
 * load <= 3/4 (>= 10.7 B per key at the limit).  E.g. Nexmark q20 (bids by
 * auction id, ~100 B bids, 8 B keys): 16-23 B per bid, ~51 B per auction.
 *
 * Limits: key <= SFS_JB_KEY_MAX (64 KiB), record <= SFS_JB_REC_MAX (16 MiB)
 * and node + key + record no bigger than the arena (otherwise even an empty
 * batch could not hold it): refused with SFS_EUSAGE and a message, never
 * truncated.  SFS_EFULL therefore always means "flush, reset, retry": the
 * retry into an empty batch succeeds.  A block is at most SFS_JB_SIZE_MAX.
 *
 * Rules:
 *  - Writer: only the owner calls add, reset, flush (no lock: a second
 *    writer corrupts the batch).
 *  - Readers (any process, after sfs_jb_attach) may iterate and read stats.
 *    Records and keys are linked with release stores after they are written
 *    whole, so a reader that walks while the owner adds sees a consistent
 *    prefix of every chain (a key's nrec may run ahead of what it walked;
 *    the walk ends at the end of the chain, not at nrec).  Views point into
 *    the block and stay valid until the owner's next reset: the owner resets
 *    only after a grace period (shm/qsbr.h) if other processes may read.
 *    Iterators bounds-check every offset, so a batch reset under a reader
 *    (or left by a crashed owner) gives SFS_ECORRUPT or an early end, never
 *    a wild access.
 *  - Flushing is the operator's: drain at a threshold (sfs_jb_should_flush),
 *    at every barrier (a checkpoint must not contain buffered, unprocessed
 *    input: DESIGN.md 5.1) and at end of input.
 *
 * Caveats: the hash (sfs_jb_hash) is part of the format: changing it changes
 * SFS_JB_VERSION.  An owner that dies inside an add leaves at most an
 * unlinked node and counters off by one; a restarted worker replays its
 * input from the last checkpoint, so it re-inits (or resets) the batch.
 */
#ifndef SFS_WORKER_JOINBATCH_H
#define SFS_WORKER_JOINBATCH_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sfs.h"
#include "sfs_join.h"
#include "common/hash.h"
#include "common/keycmp.h"
#include "shm/atomic.h"

#define SFS_JB_MAGIC   0x3148424a53465304ull /* "\4SFSJBH1" little-endian */
#define SFS_JB_VERSION 1u

/* The index starts right after the 192-byte header. */
#define SFS_JB_INDEX_OFF 192u

/* Slot word geometry. */
#define SFS_JB_GEN_BITS 16
#define SFS_JB_TAG_BITS 16
#define SFS_JB_OFF_BITS 32
#define SFS_JB_GEN_MAX  ((1u << SFS_JB_GEN_BITS) - 1)
#define SFS_JB_SIZE_MAX ((uint64_t)1 << (SFS_JB_OFF_BITS + 3))  /* 32 GiB */
#define SFS_JB_KEYS_MAX ((uint64_t)1 << 30)

/*
 * The shared header.  Field owners: "init" fields are written once by init
 * (jb_magic last, release) and never again; "owner" fields are written by
 * the owning worker with relaxed stores (plain on x86) unless marked
 * release; readers load them relaxed (counters: each exact, not a snapshot
 * together) or acquire where marked.
 */
struct sfs_jb {
	/* Line 0: identity and configuration, read by every add, never written after init. */
	uint64_t jb_magic;        /* init, release, last */
	uint32_t jb_version;      /* init: SFS_JB_VERSION */
	uint32_t jb_bits;         /* init: k, the index has 2^k slots */
	uint64_t jb_layout;       /* init: sfs_jb_layout() of the initialising build */
	uint64_t jb_size;         /* init: bytes of the batch (end of the arena) */
	uint64_t jb_arena_off;    /* init: first arena byte (192 + 8 * 2^k) */
	uint64_t jb_max_keys;     /* init: distinct keys the index accepts (<= 3/4 of 2^k) */
	uint64_t jb_flush_recs;   /* init: should_flush at this many records (0: no limit) */
	uint64_t jb_flush_bytes;  /* init: should_flush at this many arena bytes (0: no limit) */

	/* Line 1: written by every add. */
	uint64_t jb_top __sfs_cache_aligned; /* owner: next free arena offset */
	uint64_t jb_nrec;         /* owner: records since reset */
	uint64_t jb_nkeys;        /* owner: distinct keys since reset */
	uint64_t jb_payload;      /* owner: record bytes (without nodes or padding) since reset */
	uint32_t jb_gen;          /* owner: generation of occupied slots, 1..SFS_JB_GEN_MAX */
	uint32_t jb_first;        /* owner, release: first key node (offset/8), 0 none */
	uint32_t jb_last;         /* owner: last key node (offset/8), 0 none */
	int32_t  jb_owner;        /* init: pid of the initialising owner (for humans) */
	uint64_t jb_full;         /* owner: adds refused with SFS_EFULL since init */
	uint64_t jb_pad1;

	/* Line 2: written at reset (and by refusals). */
	uint64_t jb_resets __sfs_cache_aligned; /* owner: resets since init */
	uint64_t jb_flushes;      /* owner: resets of a non-empty batch since init */
	uint64_t jb_done_recs;    /* owner: records of those flushes */
	uint64_t jb_done_keys;    /* owner: distinct keys of those flushes (a key per flush) */
	uint64_t jb_done_bytes;   /* owner: record bytes of those flushes */
	uint64_t jb_refused;      /* owner: adds refused with SFS_EUSAGE since init */
	uint64_t jb_pad2[2];
};

_Static_assert(sizeof(struct sfs_jb) == SFS_JB_INDEX_OFF, "jb header is three lines");
_Static_assert(offsetof(struct sfs_jb, jb_top) == SFS_CACHE_LINE, "add's fields on line 1");
_Static_assert(offsetof(struct sfs_jb, jb_resets) == 2 * SFS_CACHE_LINE, "totals on line 2");

/* A key node in the arena.  Written whole by the owner before its slot and
 * its link are published; afterwards only jk_nrec, jk_tail and jk_next
 * change (owner). */
struct sfs_jb_knode {
	uint64_t jk_hash;  /* sfs_jb_hash(key) */
	uint32_t jk_klen;  /* key bytes */
	uint32_t jk_nrec;  /* owner, relaxed: records in the chain */
	uint32_t jk_head;  /* first record node (offset/8); set before publication */
	uint32_t jk_tail;  /* owner, plain: last record node (offset/8) */
	uint32_t jk_next;  /* owner, release: next key in first-arrival order, 0 end */
	uint32_t jk_pad;
	/* key bytes, padded to 8 */
};

/* A record node.  Written whole before it is linked; afterwards only
 * jr_next changes (owner, release: 0 -> the next record, once). */
struct sfs_jb_rnode {
	uint32_t jr_next;  /* next record of the same key (offset/8), 0 end */
	uint32_t jr_len;   /* record bytes */
	uint64_t jr_seq;   /* the caller's sequence number / timestamp */
	/* record bytes, padded to 8 */
};

#define SFS_JB_KNODE ((uint64_t)sizeof(struct sfs_jb_knode))
#define SFS_JB_RNODE ((uint64_t)sizeof(struct sfs_jb_rnode))
_Static_assert(sizeof(struct sfs_jb_knode) == 32, "key node is 32 bytes");
_Static_assert(sizeof(struct sfs_jb_rnode) == 16, "record node is 16 bytes");

struct sfs_jb_stats {
	uint64_t size;           /* bytes of the block, header and index included */
	uint64_t slots;          /* index slots (2^k) */
	uint64_t max_keys;       /* distinct keys accepted per batch */
	uint64_t arena_bytes;    /* arena capacity */
	uint64_t flush_recs;     /* configured thresholds (0: off) */
	uint64_t flush_bytes;
	/* the current batch */
	uint64_t records;        /* records buffered */
	uint64_t keys;           /* distinct keys buffered */
	uint64_t bytes_used;     /* arena bytes used: nodes, keys, records, padding */
	uint64_t payload;        /* record bytes alone */
	double   recs_per_key;   /* records / keys (0 if empty) */
	uint32_t gen;            /* current generation */
	/* since init */
	uint64_t resets;
	uint64_t flushes;        /* resets of a non-empty batch */
	uint64_t flushed_recs;   /* records delivered by those flushes */
	uint64_t flushed_keys;   /* keys delivered (one per key per flush) */
	uint64_t flushed_bytes;  /* record bytes of those flushes */
	double   flushed_recs_per_key; /* flushed_recs / flushed_keys: the reads saved, as a factor */
	uint64_t full;           /* SFS_EFULL refusals */
	uint64_t refused;        /* SFS_EUSAGE refusals (oversized key or record) */
};


/* ---- slow paths (joinbatch.c) ------------------------------------------- */

/* Fingerprint over sizeof/offsetof of the jb structs and the constants
 * fixing the layout.  Stored at init, checked at attach. */
uint64_t sfs_jb_layout(void);



/*
 * sfs_jb_attach - adopt a batch initialised elsewhere, mapped at @mem with
 * @size bytes readable (at least the batch's own size): checks magic,
 * version, layout fingerprint and geometry, naming what differs.  Writes
 * nothing (a read-only mapping is fine for a reader).
 * Errors: SFS_EMAGIC, SFS_EVERSION, SFS_ELAYOUT, SFS_ECORRUPT, SFS_EUSAGE.
 * O(1).
 */
int sfs_jb_attach(void *mem, size_t size, struct sfs_jb **out);




/* Counters and geometry, any process (relaxed loads).  O(1). */
void sfs_jb_stats(const struct sfs_jb *jb, struct sfs_jb_stats *st);

/*
 * sfs_jb_verify - check every invariant: the key chain and every record
 * chain lie inside the used arena and are well formed, nodes tile the arena
 * exactly, every key is found from its home slot and no key twice, every
 * occupied slot names a key of the chain, counts and byte totals match the
 * header.  0 or SFS_ECORRUPT naming what is wrong.  O(slots + keys +
 * records x key probe): tests and adoption after a crash, never the hot path.
 */
int sfs_jb_verify(const struct sfs_jb *jb);

/* Slow paths of the inline functions: record why and return the code. */
int sfs__jb_refuse(struct sfs_jb *jb, size_t klen, size_t len);
int sfs__jb_full(struct sfs_jb *jb, size_t klen, size_t len, int index_full);
int sfs__jb_corrupt(const struct sfs_jb *jb, const char *what, uint64_t off8);

/* Tests only: set the generation (1..SFS_JB_GEN_MAX) without touching the
 * index, to force a wrap soon.  Owner only. */
void sfs__jb_set_gen(struct sfs_jb *jb, uint32_t gen);

/* ---- hashing ------------------------------------------------------------ */




/*
 * sfs_jb_hash - the 64-bit hash of a join key that places it in the index:
 * wyhash's structure (a 128-bit multiply-fold over 16-byte strides,
 * overlapping reads for the tail), the length folded into the seed.  Fixed
 * seed: every process computes the same hash.  Part of the format.  Cost:
 * ~2 multiplies per 16 key bytes; an 8-byte id costs three multiplies.
 */
static inline uint64_t sfs_jb_hash(const void *key, size_t klen)
{
	return sfs_hash_bytes(sfs_hash_mum(SFS_HASH_P0, (uint64_t)klen ^ SFS_HASH_P2), key, klen);
}

/* ---- inline helpers ------------------------------------------------------ */

static inline uint64_t sfs__jb_pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static inline uint64_t *sfs__jb_slots(const struct sfs_jb *jb)
{
	return (uint64_t *)((char *)jb + SFS_JB_INDEX_OFF);
}

static inline void *sfs__jb_at(const struct sfs_jb *jb, uint64_t off8)
{
	return (char *)jb + (off8 << 3);
}

/* Arena bytes a record of @len costs / a new key of @klen with its first
 * record costs. */
static inline uint64_t sfs_jb_rec_cost(size_t len)
{
	return SFS_JB_RNODE + sfs__jb_pad8(len);
}

static inline uint64_t sfs_jb_key_cost(size_t klen)
{
	return SFS_JB_KNODE + sfs__jb_pad8(klen);
}

/* ---- the hot path -------------------------------------------------------- */

/*
 * sfs__jb_add - buffer record @rec (@len bytes, may be 0) with sequence
 * number / timestamp @seq (any value; 0 if the caller has none) under join
 * key @key (@klen bytes, may be 0).  Both are copied; the caller's memory is
 * not kept.
 * Returns 0; SFS_EFULL when the arena or the index is full (the batch is
 * unchanged: flush, reset, and retry — the retry succeeds); SFS_EUSAGE for a
 * key or record above the limits or too big for the arena even when empty
 * (never truncated; sfs_last_error() says which).  Owner only.
 * Cost: a hash, a probe (linear probing at the 3/4 load limit: 2.5 slots
 * expected for a known key, 8.5 for a new one; 8 slots per cache line),
 * the key compared once (the tag filters the others), one memcpy of the record (and of the key on its first
 * record), a release store; no syscall, lock, RMW or allocation.
 */
static inline int sfs__jb_add(struct sfs_jb *jb, const void *key, size_t klen, const void *rec,
			     size_t len, uint64_t seq)
{
	uint64_t *slots = sfs__jb_slots(jb);
	uint64_t h, mask, i, word, top, need, roff, gen;
	struct sfs_jb_knode *kn;
	struct sfs_jb_rnode *rn;
	uint32_t tag;

	if (__builtin_expect(klen > SFS_JB_KEY_MAX || len > SFS_JB_REC_MAX ||
			     (!key && klen) || (!rec && len), 0))
		return sfs__jb_refuse(jb, klen, len);
	h = sfs_jb_hash(key, klen);
	tag = (uint32_t)(h >> 48);
	gen = jb->jb_gen;
	mask = ((uint64_t)1 << jb->jb_bits) - 1;
	for (i = h & mask;; i = (i + 1) & mask) {
		word = slots[i];
		if ((word >> 48) != gen)
			break;  /* empty (this life): the key is new */
		if (((word >> 32) & 0xffff) != tag)
			continue;
		kn = sfs__jb_at(jb, word & 0xffffffffu);
		if (kn->jk_hash == h && kn->jk_klen == klen &&
		    (klen == 0 || sfs_keyeq(kn + 1, key, klen)))
			goto hit;
	}

	/* A new key: node + key + first record in one bump. */
	top = jb->jb_top;
	need = sfs_jb_key_cost(klen) + sfs_jb_rec_cost(len);
	if (__builtin_expect(jb->jb_nkeys >= jb->jb_max_keys || need > jb->jb_size - top, 0))
		return sfs__jb_full(jb, klen, len, jb->jb_nkeys >= jb->jb_max_keys);
	kn = (struct sfs_jb_knode *)((char *)jb + top);
	roff = top + sfs_jb_key_cost(klen);
	rn = (struct sfs_jb_rnode *)((char *)jb + roff);
	rn->jr_next = 0;
	rn->jr_len = (uint32_t)len;
	rn->jr_seq = seq;
	if (len)
		memcpy(rn + 1, rec, len);
	kn->jk_hash = h;
	kn->jk_klen = (uint32_t)klen;
	kn->jk_nrec = 1;
	kn->jk_head = (uint32_t)(roff >> 3);
	kn->jk_tail = (uint32_t)(roff >> 3);
	kn->jk_next = 0;
	kn->jk_pad = 0;
	if (klen)
		memcpy(kn + 1, key, klen);
	/* The index is the owner's alone (readers walk the chains), so a
	 * plain store; the chain link publishes the whole node. */
	slots[i] = gen << 48 | (uint64_t)tag << 32 | (top >> 3);
	if (jb->jb_last)
		sfs_store_release(&((struct sfs_jb_knode *)sfs__jb_at(jb, jb->jb_last))->jk_next,
				  (uint32_t)(top >> 3));
	else
		sfs_store_release(&jb->jb_first, (uint32_t)(top >> 3));
	jb->jb_last = (uint32_t)(top >> 3);
	sfs_store_relaxed(&jb->jb_top, top + need);
	sfs_store_relaxed(&jb->jb_nkeys, jb->jb_nkeys + 1);
	sfs_store_relaxed(&jb->jb_nrec, jb->jb_nrec + 1);
	sfs_store_relaxed(&jb->jb_payload, jb->jb_payload + len);
	return 0;

hit:
	/* A known key: append one record at its tail. */
	top = jb->jb_top;
	need = sfs_jb_rec_cost(len);
	if (__builtin_expect(need > jb->jb_size - top, 0))
		return sfs__jb_full(jb, klen, len, 0);
	rn = (struct sfs_jb_rnode *)((char *)jb + top);
	rn->jr_next = 0;
	rn->jr_len = (uint32_t)len;
	rn->jr_seq = seq;
	if (len)
		memcpy(rn + 1, rec, len);
	sfs_store_release(&((struct sfs_jb_rnode *)sfs__jb_at(jb, kn->jk_tail))->jr_next,
			  (uint32_t)(top >> 3));
	kn->jk_tail = (uint32_t)(top >> 3);
	sfs_store_relaxed(&kn->jk_nrec, kn->jk_nrec + 1);
	sfs_store_relaxed(&jb->jb_top, top + need);
	sfs_store_relaxed(&jb->jb_nrec, jb->jb_nrec + 1);
	sfs_store_relaxed(&jb->jb_payload, jb->jb_payload + len);
	return 0;
}

/*
 * sfs__jb_should_flush - 1 once the batch holds at least the configured
 * number of records or arena bytes (either threshold, whichever is set),
 * else 0.  Owner (any process may ask; relaxed loads).  O(1).
 */
static inline int sfs__jb_should_flush(const struct sfs_jb *jb)
{
	uint64_t nr = jb->jb_flush_recs, nb = jb->jb_flush_bytes;

	return (nr && sfs_load_relaxed(&jb->jb_nrec) >= nr) ||
	       (nb && sfs_load_relaxed(&jb->jb_top) - jb->jb_arena_off >= nb);
}

/* Records / distinct keys buffered now.  Any process (relaxed). */
static inline uint64_t sfs__jb_records(const struct sfs_jb *jb)
{
	return sfs_load_relaxed(&jb->jb_nrec);
}

static inline uint64_t sfs__jb_keys(const struct sfs_jb *jb)
{
	return sfs_load_relaxed(&jb->jb_nkeys);
}

/* ---- the flush walk ------------------------------------------------------ */

/* A node of @hdr + @len bytes at @off8 lies inside the arena. */
static inline int sfs__jb_in(const struct sfs_jb *jb, uint64_t off8, uint64_t hdr, uint64_t len)
{
	uint64_t off = off8 << 3;

	return off >= jb->jb_arena_off && off <= jb->jb_size && hdr + len <= jb->jb_size - off;
}

/*
 * sfs__jb_next_key - the next distinct key of the batch, in first-arrival
 * order: 0 with *@key (a view into the batch, 8-byte aligned), *@klen and
 * *@nrec (its record count) filled and the cursor at its first record; or
 * -ENOENT after the last key; or SFS_ECORRUPT (a link outside the arena:
 * the walk ends).  Any of the out pointers may be NULL; they are set
 * (NULL / 0) on failure too.  Any process.  O(1).
 */
static inline int sfs__jb_next_key(const struct sfs_jb *jb, struct sfs_jb_iter *it,
				  const void **key, uint32_t *klen, uint32_t *nrec)
{
	const struct sfs_jb_knode *kn;
	uint32_t next;

	/* Outs are set on every path, so a caller's loop never reads an
	 * unset variable (and the compiler can see it). */
	if (key)
		*key = NULL;
	if (klen)
		*klen = 0;
	if (nrec)
		*nrec = 0;
	if (!it->it_started) {
		next = sfs_load_acquire(&jb->jb_first);
		it->it_started = 1;
	} else if (it->it_key) {
		kn = sfs__jb_at(jb, it->it_key);
		next = sfs_load_acquire(&kn->jk_next);
	} else {
		return -ENOENT;
	}
	it->it_key = next;
	it->it_rec = 0;
	if (!next)
		return -ENOENT;
	kn = sfs__jb_at(jb, next);
	if (__builtin_expect(!sfs__jb_in(jb, next, SFS_JB_KNODE, 0) ||
			     !sfs__jb_in(jb, next, SFS_JB_KNODE, kn->jk_klen), 0)) {
		it->it_key = 0;
		return sfs__jb_corrupt(jb, "key node", next);
	}
	it->it_rec = kn->jk_head;
	if (key)
		*key = kn + 1;
	if (klen)
		*klen = kn->jk_klen;
	if (nrec)
		*nrec = sfs_load_relaxed(&kn->jk_nrec);
	return 0;
}

/*
 * sfs__jb_next_rec - the next record of the current key, in arrival order:
 * 0 with *@rec (a view into the batch, 8-byte aligned), *@len and *@seq
 * filled; -ENOENT after its last record (or before the first next_key); or
 * SFS_ECORRUPT (a link outside the arena: this key's walk ends).  Out
 * pointers may be NULL; they are set (NULL / 0) on failure too.  Any
 * process.  O(1).
 */
static inline int sfs__jb_next_rec(const struct sfs_jb *jb, struct sfs_jb_iter *it,
				  const void **rec, uint32_t *len, uint64_t *seq)
{
	const struct sfs_jb_rnode *rn;
	uint32_t cur = it->it_rec;

	if (rec)
		*rec = NULL;
	if (len)
		*len = 0;
	if (seq)
		*seq = 0;
	if (!cur)
		return -ENOENT;
	rn = sfs__jb_at(jb, cur);
	if (__builtin_expect(!sfs__jb_in(jb, cur, SFS_JB_RNODE, 0) ||
			     !sfs__jb_in(jb, cur, SFS_JB_RNODE, rn->jr_len), 0)) {
		it->it_rec = 0;
		return sfs__jb_corrupt(jb, "record node", cur);
	}
	it->it_rec = sfs_load_acquire(&rn->jr_next);
	if (rec)
		*rec = rn + 1;
	if (len)
		*len = rn->jr_len;
	if (seq)
		*seq = rn->jr_seq;
	return 0;
}

#endif
