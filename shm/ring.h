/*
 * ring.h — lock-free rings of fixed-size records in shared memory.
 *
 * The control traffic between sfs processes (flush requests, barrier acks,
 * records exchanged between workers) goes through these rings.  A ring lives
 * in a block of memory every process maps, possibly at different addresses,
 * so it holds indexes only: no pointer, no function pointer.  The layout is
 * one header of four cache-line groups followed by the records and, for
 * MPSC, one sequence word per slot:
 *
 *   constants | producer line | consumer line | wait line | records | seqs
 *
 * Two flavours, chosen once at sfs_ring_init():
 *  - SFS_RING_SPSC: one producer process, one consumer process.  The
 *    producer copies records, then publishes rg_prod_head with a release
 *    store; the consumer loads it with acquire, copies, then publishes
 *    rg_cons_tail with a release store.  Each side keeps a cached copy of
 *    the other's index on its own line and reads the other's line only when
 *    the cache says "not enough" (DPDK / MCRingBuffer), so a busy pair
 *    moves one line per burst each way, not one per record.
 *  - SFS_RING_MPSC: several producers, one consumer.  A producer reserves a
 *    run of positions with a compare-and-swap on rg_prod_head, copies its
 *    records, then publishes each slot by writing its sequence word
 *    (position + 1) after a write fence.  The consumer takes the run of
 *    published slots at its tail.  Producers never wait for each other.
 *
 * Indexes are free-running 32-bit positions (slot = position & mask); all
 * comparisons are differences, so wrap-around is harmless as long as
 * count <= 2^30.
 *
 * Idle sides sleep on a futex (sfs_ring_dequeue_wait, sfs_ring_enqueue_wait)
 * and are woken by the other side only when they announced it: a busy pair
 * issues no syscall at all.  The price on the fast path is one full fence
 * (cmm_smp_mb) and one load of a line nobody writes per burst.
 *
 * Rules:
 *  - sfs_ring_init() once, by the creator, before any other process uses the
 *    block; others sfs_ring_attach() (or sfs_ring_check()) first.
 *  - Enqueue is for producers and dequeue for the consumer; in an SPSC ring
 *    exactly one process (thread) at a time may be each side.  Observers may
 *    call sfs_ring_count()/sfs_ring_free() and sfs_ring_stats() at any time.
 *  - Functions below never allocate, never lock, and never make a syscall,
 *    except that the *_wait functions yield and sleep once the ring stayed
 *    empty (full) for a few microseconds, and a burst wakes a peer that
 *    announced it sleeps.
 *
 * Caveats (a process may die at any instruction):
 *  - Producer dies mid-enqueue, SPSC: nothing it had not published is
 *    visible; a restarted producer continues from rg_prod_head.
 *  - Producer dies mid-enqueue, MPSC: the positions it reserved stay
 *    unpublished for ever.  The consumer stops at the first of them
 *    (head-of-line: records published after it wait too), and once the
 *    ring fills every producer's enqueue returns 0.  Nothing spins: the
 *    *_wait calls return at their timeout.  sfs_ring_stalled_ns() tells the
 *    consumer how long it has been blocked on an unpublished slot, and once
 *    the supervisor has confirmed a producer died, sfs_ring_skip_stalled()
 *    drops the dead slot (see its precondition: skipping a live producer's
 *    slot corrupts the ring).
 *  - Consumer dies mid-dequeue: the tail was not advanced, so a restarted
 *    consumer receives those records again (at-least-once); deduplicate by
 *    a sequence number in the record where that matters.
 *  - A sleeper that dies leaves its "sleeping" flag set: the peer pays one
 *    useless wake syscall, then the flag is clear.
 */
#ifndef SFS_SHM_RING_H
#define SFS_SHM_RING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sfs.h"
#include "shm/atomic.h"

#define SFS_RING_SPSC 0x1u /* one producer, one consumer */
#define SFS_RING_MPSC 0x2u /* several producers, one consumer */

#define SFS_RING_MAGIC 0x73667372696e6721ull /* "sfsring!" */
#define SFS_RING_VERSION 1u
#define SFS_RING_COUNT_MAX (1u << 30)  /* int32 differences stay exact */
#define SFS_RING_ESIZE_MAX (1u << 20)
#define SFS_RING_WAIT_FOREVER UINT64_MAX

/*
 * The shared header.  Every field says who writes it and how it is
 * published.  Lines written by one side are 128-byte aligned (two cache
 * lines) so the adjacent-line prefetcher does not drag the other side's
 * line along (DPDK's cache guard).  The record area starts at
 * sizeof(struct sfs_ring) from the header; the MPSC sequence words at
 * rg_seq_off.
 */
struct sfs_ring {
	/* Constants: written by sfs_ring_init() before rg_magic, which is stored
	 * last with release order; read-only afterwards, so this line stays
	 * shared in every cache. */
	uint64_t rg_magic;
	uint32_t rg_version;
	uint32_t rg_layout;    /* fingerprint of this struct's layout */
	uint32_t rg_flags;     /* SFS_RING_SPSC or SFS_RING_MPSC */
	uint32_t rg_count;     /* slots, a power of two */
	uint32_t rg_mask;      /* rg_count - 1 */
	uint32_t rg_esize;     /* record bytes, a multiple of 8 */
	uint64_t rg_seq_off;   /* offset of the uint32 seq[rg_count] (MPSC) */
	uint64_t rg_memsize;   /* bytes the ring spans from its header */

	/* Producer line. */
	/* Next position to fill.  SPSC: the producer's plain store with release
	 * order after the records are copied (the publication).  MPSC: a
	 * reservation counter advanced by producers with cmpxchg; publication is
	 * the per-slot seq word instead. */
	uint32_t rg_prod_head __attribute__((aligned(2 * SFS_CACHE_LINE)));
	/* Producers' cached copy of rg_cons_tail (a lower bound of it): relaxed
	 * stores by producers, read only by producers.  In MPSC several
	 * producers may store it racily; any value ever read from the tail is a
	 * safe lower bound, so the race only costs a refresh. */
	uint32_t rg_prod_tail_cache;

	/* Consumer line. */
	/* Next position to take: the consumer's plain store with release order
	 * after the records are copied out (frees the slots). */
	uint32_t rg_cons_tail __attribute__((aligned(2 * SFS_CACHE_LINE)));
	/* Consumer's cached copy of rg_prod_head (SPSC): consumer only. */
	uint32_t rg_cons_head_cache;
	/* MPSC stall tracking, consumer only (plain stores; observers may read
	 * them relaxed): the position the consumer found unpublished while the
	 * ring held reservations, and since when (0: not stalled). */
	uint32_t rg_cons_stall_pos;
	uint64_t rg_cons_stall_since_ns;

	/* Wait line: written only by a side going to sleep or waking a sleeper,
	 * so while both sides are busy it is read-only and costs nothing. */
	/* Futex word, 1 while the consumer announces it (may) sleep: set by the
	 * consumer with xchg (full barrier), cleared by the consumer on return or
	 * by a producer's cmpxchg 1 -> 0 just before its FUTEX_WAKE. */
	int32_t rg_cons_sleeping __attribute__((aligned(2 * SFS_CACHE_LINE)));
	/* Futex word, 1 while some producer announces it sleeps for space: set
	 * by producers with xchg; cleared only by the consumer's cmpxchg 1 -> 0
	 * before FUTEX_WAKE of all (a producer must not clear it: another one
	 * may still be asleep on it). */
	int32_t rg_prod_sleeping;
	/* Statistics, slow paths only (uatomic_inc): futex sleeps and wakes. */
	uint64_t rg_cons_sleeps;
	uint64_t rg_prod_sleeps;
	uint64_t rg_cons_wakes;   /* wakes issued to the consumer */
	uint64_t rg_prod_wakes;   /* wakes issued to producers */
};

_Static_assert(offsetof(struct sfs_ring, rg_prod_head) % SFS_CACHE_LINE == 0, "prod line");
_Static_assert(offsetof(struct sfs_ring, rg_cons_tail) - offsetof(struct sfs_ring, rg_prod_head) >=
		       2 * SFS_CACHE_LINE, "prod/cons lines apart");
_Static_assert(offsetof(struct sfs_ring, rg_cons_sleeping) -
			       offsetof(struct sfs_ring, rg_cons_tail) >= 2 * SFS_CACHE_LINE,
	       "cons/wait lines apart");
_Static_assert(sizeof(struct sfs_ring) % SFS_CACHE_LINE == 0, "records start on a line");

struct sfs_ring_stats {
	uint32_t count, esize, flags;
	uint32_t used;             /* approximate: rg_prod_head - rg_cons_tail */
	uint64_t cons_sleeps, prod_sleeps, cons_wakes, prod_wakes;
};

/*
 * sfs_ring_memsize - bytes a ring of @count records of @esize bytes needs
 * (either flavour: the MPSC sequence words are always counted, 4 bytes a
 * slot, untouched by an SPSC ring).  0 if @count is not a power of two in
 * [2, SFS_RING_COUNT_MAX] or @esize is not a multiple of 8 in
 * [8, SFS_RING_ESIZE_MAX].
 */
size_t sfs_ring_memsize(uint32_t count, uint32_t esize);

/*
 * sfs_ring_init - lay out a ring in @mem (sfs_ring_memsize() bytes, aligned
 * to SFS_CACHE_LINE, normally zeroed).  @flags: SFS_RING_SPSC or
 * SFS_RING_MPSC.  Stores the magic last with release order, so a process
 * that sees it sees the whole header.  Precondition: nobody else uses @mem
 * yet.  Returns 0 or SFS_EUSAGE (message says which argument).
 */
int sfs_ring_init(void *mem, uint32_t count, uint32_t esize, unsigned flags);

/*
 * sfs_ring_check - is @mem an initialized ring this build can use?
 * Returns 0, SFS_EMAGIC, SFS_EVERSION, SFS_ELAYOUT or SFS_ECORRUPT (bad
 * constants), each with a message naming the field, found and expected.
 */
int sfs_ring_check(const void *mem);

/* Fingerprint of struct sfs_ring's layout; folded into the segment's. */
uint32_t sfs_ring_layout(void);

/*
 * sfs_ring_attach - sfs_ring_check() plus "the ring fits in the @len bytes
 * mapped at @mem" (SFS_ECORRUPT otherwise); sets *@out.  Any process, at
 * any address.
 */
int sfs_ring_attach(void *mem, size_t len, struct sfs_ring **out);

/* Observer snapshot (relaxed loads: counts may be momentarily stale). */
void sfs_ring_stats(const struct sfs_ring *r, struct sfs_ring_stats *st);

/* Slow paths of the inline functions below (ring.c). */
void sfs__ring_wake_cons(struct sfs_ring *r);
void sfs__ring_wake_prod(struct sfs_ring *r);

static inline char *sfs__ring_data(const struct sfs_ring *r)
{
	return (char *)(uintptr_t)(r + 1);
}

static inline uint32_t *sfs__ring_seq(const struct sfs_ring *r)
{
	return (uint32_t *)(uintptr_t)((const char *)r + r->rg_seq_off);
}

static inline unsigned sfs_ring_capacity(const struct sfs_ring *r) { return r->rg_count; }
static inline unsigned sfs_ring_esize(const struct sfs_ring *r) { return r->rg_esize; }

/*
 * sfs_ring_count - records in the ring (MPSC: reserved ones included),
 * sfs_ring_free - slots free.  Exact when called by the side that would act
 * on the answer with the other side idle; a snapshot otherwise.  Two loads
 * of other lines: not for per-record use.
 */
static inline unsigned sfs_ring_count(const struct sfs_ring *r)
{
	uint32_t tail = sfs_load_acquire(&r->rg_cons_tail);
	uint32_t head = sfs_load_acquire(&r->rg_prod_head);
	int32_t d = (int32_t)(head - tail);

	/* An observer may read the tail, sleep, then read a head far ahead. */
	if (d < 0)
		return 0;
	return (uint32_t)d > r->rg_count ? r->rg_count : (unsigned)d;
}

static inline unsigned sfs_ring_free(const struct sfs_ring *r)
{
	return r->rg_count - sfs_ring_count(r);
}

/* Copy @k records into the slots from position @pos (wraps at most once). */
static inline void sfs__ring_put(struct sfs_ring *r, uint32_t pos, const void *recs, unsigned k)
{
	size_t es = r->rg_esize;
	uint32_t idx = pos & r->rg_mask, first = r->rg_count - idx;
	char *data = sfs__ring_data(r);

	if (k <= first) {
		memcpy(data + idx * es, recs, k * es);
	} else {
		memcpy(data + idx * es, recs, first * es);
		memcpy(data, (const char *)recs + first * es, (k - first) * es);
	}
}

static inline void sfs__ring_get(const struct sfs_ring *r, uint32_t pos, void *recs, unsigned k)
{
	size_t es = r->rg_esize;
	uint32_t idx = pos & r->rg_mask, first = r->rg_count - idx;
	const char *data = sfs__ring_data(r);

	if (k <= first) {
		memcpy(recs, data + idx * es, k * es);
	} else {
		memcpy(recs, data + idx * es, first * es);
		memcpy((char *)recs + first * es, data, (k - first) * es);
	}
}

/*
 * Dekker half of the no-lost-wake-up protocol, run after publishing: the
 * full fence orders our publication before the load of the peer's flag, and
 * the sleeper orders its flag store before its re-check the same way, so at
 * least one of the two sees the other's store (see ring.c).
 */
static inline void sfs__ring_kick_cons(struct sfs_ring *r)
{
	cmm_smp_mb();
	if (caa_unlikely(sfs_load_relaxed(&r->rg_cons_sleeping)))
		sfs__ring_wake_cons(r);
}

static inline void sfs__ring_kick_prod(struct sfs_ring *r)
{
	cmm_smp_mb();
	if (caa_unlikely(sfs_load_relaxed(&r->rg_prod_sleeping)))
		sfs__ring_wake_prod(r);
}

/* Free slots as a producer sees them from @head, refreshing the cached tail
 * when it promises fewer than @want.  May exceed rg_count if @head is stale
 * (MPSC); the cmpxchg that follows then fails. */
static inline int64_t sfs__ring_prod_room(struct sfs_ring *r, uint32_t head, unsigned want)
{
	int64_t room = (int64_t)r->rg_count -
		       (int32_t)(head - sfs_load_relaxed(&r->rg_prod_tail_cache));

	if (room < (int64_t)want) {
		/* Acquire: the consumer's reads of the freed slots happen before
		 * our writes into them. */
		uint32_t tail = sfs_load_acquire(&r->rg_cons_tail);

		sfs_store_relaxed(&r->rg_prod_tail_cache, tail);
		room = (int64_t)r->rg_count - (int32_t)(head - tail);
	}
	return room;
}

/*
 * sfs__ring_mpsc_reserve - claim up to @n positions of an MPSC ring; sets
 * *@pos to the first.  Returns how many (0: full).  Lock-free: a cmpxchg
 * fails only because another producer succeeded (ABA would need 2^32
 * reservations between one producer's load and its cmpxchg).  The caller
 * must fill and publish them (sfs__ring_mpsc_commit); exposed so tests can
 * play a producer that dies in between.
 */
static inline unsigned sfs__ring_mpsc_reserve(struct sfs_ring *r, unsigned n, uint32_t *pos)
{
	uint32_t head = sfs_load_relaxed(&r->rg_prod_head);

	for (;;) {
		int64_t room = sfs__ring_prod_room(r, head, n);
		unsigned k = room < (int64_t)n ? (room > 0 ? (unsigned)room : 0) : n;
		uint32_t old;

		if (k == 0)
			return 0;
		old = uatomic_cmpxchg(&r->rg_prod_head, head, head + k);
		if (old == head) {
			*pos = head;
			return k;
		}
		head = old;
	}
}

/* Publish @k filled positions from @pos: one write fence, then each slot's
 * sequence word (position + 1, the consumer's "ready for this lap"). */
static inline void sfs__ring_mpsc_commit(struct sfs_ring *r, uint32_t pos, unsigned k)
{
	uint32_t *seq = sfs__ring_seq(r);
	unsigned i;

	cmm_smp_wmb();
	for (i = 0; i < k; i++)
		sfs_store_relaxed(&seq[(pos + i) & r->rg_mask], pos + i + 1);
}

/*
 * sfs_ring_enqueue_burst - copy up to @n records (@n * esize bytes at @recs)
 * into the ring; returns how many went in (0..@n, 0 when full).  Producer
 * side.  Cost: O(n) copy, one release store (SPSC) or one cmpxchg plus n
 * seq stores (MPSC), one full fence; no syscall unless the consumer
 * announced it sleeps.
 */
static inline unsigned sfs_ring_enqueue_burst(struct sfs_ring *r, const void *recs, unsigned n)
{
	uint32_t head;
	unsigned k;

	if (r->rg_flags & SFS_RING_MPSC) {
		k = sfs__ring_mpsc_reserve(r, n, &head);
		if (k == 0)
			return 0;
		sfs__ring_put(r, head, recs, k);
		sfs__ring_mpsc_commit(r, head, k);
	} else {
		int64_t room;

		head = r->rg_prod_head; /* ours: no other writer */
		room = sfs__ring_prod_room(r, head, n);
		k = room < (int64_t)n ? (unsigned)room : n;
		if (k == 0)
			return 0;
		sfs__ring_put(r, head, recs, k);
		sfs_store_release(&r->rg_prod_head, head + k);
	}
	sfs__ring_kick_cons(r);
	return k;
}

/* Records ready at the consumer's tail, at most @n (consumer side). */
static inline unsigned sfs__ring_cons_ready(struct sfs_ring *r, uint32_t tail, unsigned n)
{
	if (r->rg_flags & SFS_RING_MPSC) {
		const uint32_t *seq = sfs__ring_seq(r);
		unsigned k = 0;

		while (k < n && sfs_load_relaxed(&seq[(tail + k) & r->rg_mask]) == tail + k + 1)
			k++;
		/* Acquire for the whole run: record reads after the seq loads. */
		cmm_smp_rmb();
		return k;
	} else {
		uint32_t avail = r->rg_cons_head_cache - tail;

		if (avail < n) {
			uint32_t head = sfs_load_acquire(&r->rg_prod_head);

			r->rg_cons_head_cache = head;
			avail = head - tail;
		}
		return avail < n ? avail : n;
	}
}

/*
 * sfs_ring_dequeue_burst - copy up to @n records out of the ring into @recs;
 * returns how many (0 when empty, or in MPSC when the record at the tail is
 * still unpublished).  Consumer side.  Cost: O(n) copy, one release store,
 * one full fence; no syscall unless a producer announced it sleeps.
 */
static inline unsigned sfs_ring_dequeue_burst(struct sfs_ring *r, void *recs, unsigned n)
{
	uint32_t tail = r->rg_cons_tail; /* ours: no other writer */
	unsigned k = sfs__ring_cons_ready(r, tail, n);

	if (k == 0)
		return 0;
	sfs__ring_get(r, tail, recs, k);
	sfs_store_release(&r->rg_cons_tail, tail + k);
	sfs__ring_kick_prod(r);
	return k;
}

/*
 * sfs_ring_dequeue_wait - dequeue up to @n records, waiting for at least one
 * for at most @timeout_ns (0: don't wait; SFS_RING_WAIT_FOREVER), counted
 * from the end of the spin phase.  Spins ~4 us (caa_cpu_relax), yields
 * twice, then sleeps on the ring's futex; a producer's enqueue wakes it.
 * Returns the number dequeued, 0 on timeout (never negative).  Consumer
 * side.  No syscall when records are already there.
 */
int sfs_ring_dequeue_wait(struct sfs_ring *r, void *recs, unsigned n, uint64_t timeout_ns);

/*
 * sfs_ring_enqueue_wait - enqueue all @n records, waiting for space for at
 * most @timeout_ns in total (same spin-then-futex scheme, woken by the
 * consumer's dequeue).  Returns the number enqueued: @n, or fewer on
 * timeout.  Producer side.
 */
int sfs_ring_enqueue_wait(struct sfs_ring *r, const void *recs, unsigned n, uint64_t timeout_ns);

/*
 * sfs_ring_stalled_ns - MPSC, consumer side: 0 if the consumer is not
 * blocked, else for how long (>= 1 ns; measured from this function's first
 * call that saw the stall) the ring has held reserved positions while the
 * one at the tail stays unpublished: a producer is between reserve and
 * commit, or died there.  Call it when dequeue keeps returning 0; compare
 * against a bound far above a producer's copy time (milliseconds) before
 * asking the supervisor whether a producer died.  SPSC rings: always 0.
 */
uint64_t sfs_ring_stalled_ns(struct sfs_ring *r);

/*
 * sfs_ring_skip_stalled - MPSC, consumer side: drop the unpublished slot at
 * the tail (its record is lost) and advance.  PRECONDITION: every producer
 * that could own that slot is known dead (e.g. the supervisor reaped it):
 * a live but slow producer would later write into a slot already handed to
 * someone else.  Returns 0, or SFS_EUSAGE if the ring is SPSC or the tail
 * is not stalled.
 */
int sfs_ring_skip_stalled(struct sfs_ring *r);

#endif
