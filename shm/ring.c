/*
 * ring.c — the slow paths of shm/ring.h: layout, validation, waking and
 * sleeping, and MPSC stall handling.  The per-record fast paths are static
 * inline in ring.h.
 *
 * No lost wake-up (consumer side; the producer side is the mirror image,
 * with rg_prod_sleeping and rg_cons_tail):
 *
 *   consumer (sleeper)                 producer (waker)
 *   S1 xchg(cons_sleeping, 1)          P1 publish (head / seq words)
 *   S2 full fence                      P2 full fence (cmm_smp_mb)
 *   S3 re-check: anything ready?       P3 load cons_sleeping
 *   S4 futex_wait(cons_sleeping, 1)    P4 if 1: cmpxchg 1 -> 0, FUTEX_WAKE
 *
 * S1/S3 against P1/P3 is the store-buffering (Dekker) pattern with a full
 * fence on each side, so S3 and P3 cannot both miss the other's store:
 * either the consumer sees the records at S3 and does not sleep, or the
 * producer sees the flag at P3.  In that case it changes the futex word
 * before FUTEX_WAKE; the kernel compares the word with 1 atomically with
 * queueing the sleeper at S4, so a wake that comes before the consumer is
 * queued makes S4 return at once (EAGAIN) instead of being lost.  A
 * spurious or stale wake (a producer that read the flag of an earlier
 * round) only costs a loop around S1..S3.
 *
 * Why the producer side never clears rg_prod_sleeping itself: in MPSC
 * several producers may sleep on the same word, and a producer clearing it
 * on its way out could erase another sleeper's announcement.  The cost is
 * at most one useless FUTEX_WAKE by the consumer after a producer gave up.
 */
#include <limits.h>
#include <sched.h>

#include "common/clock.h"
#include "common/err.h"
#include "shm/futex.h"
#include "shm/ring.h"

/*
 * Before a futex sleep a waiter spins for RING_SPIN_NS (a few times what a
 * busy peer on another core needs to fill or drain a burst, below the cost
 * of a sleep/wake round trip), then yields the CPU RING_YIELDS times: when
 * the peer shares this core (oversubscribed machine, tests), spinning only
 * delays it, and a yield lets it run without the futex round trip.
 */
#define RING_SPIN_NS 4000
#define RING_YIELDS 2

static int is_pow2(uint32_t x) { return x && !(x & (x - 1)); }

static uint64_t roundup_line(uint64_t x)
{
	return (x + SFS_CACHE_LINE - 1) & ~(uint64_t)(SFS_CACHE_LINE - 1);
}

/* The layout fingerprint: sizes and offsets that two builds must agree on
 * to share a ring (FNV-1a over them). */
uint32_t sfs_ring_layout(void)
{
	static const uint32_t f[] = {
		sizeof(struct sfs_ring),
		offsetof(struct sfs_ring, rg_flags),
		offsetof(struct sfs_ring, rg_seq_off),
		offsetof(struct sfs_ring, rg_prod_head),
		offsetof(struct sfs_ring, rg_prod_tail_cache),
		offsetof(struct sfs_ring, rg_cons_tail),
		offsetof(struct sfs_ring, rg_cons_head_cache),
		offsetof(struct sfs_ring, rg_cons_stall_since_ns),
		offsetof(struct sfs_ring, rg_cons_sleeping),
		offsetof(struct sfs_ring, rg_prod_sleeping),
		offsetof(struct sfs_ring, rg_prod_wakes),
		sizeof(uint32_t), /* seq word */
	};
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		h ^= f[i];
		h *= 16777619u;
	}
	return h;
}

static uint64_t seq_offset(uint32_t count, uint32_t esize)
{
	return roundup_line(sizeof(struct sfs_ring) + (uint64_t)count * esize);
}

size_t sfs_ring_memsize(uint32_t count, uint32_t esize)
{
	if (!is_pow2(count) || count < 2 || count > SFS_RING_COUNT_MAX)
		return 0;
	if (esize == 0 || esize % 8 || esize > SFS_RING_ESIZE_MAX)
		return 0;
	return roundup_line(seq_offset(count, esize) + (uint64_t)count * sizeof(uint32_t));
}

int sfs_ring_init(void *mem, uint32_t count, uint32_t esize, unsigned flags)
{
	struct sfs_ring *r = mem;

	if (!mem || (uintptr_t)mem % _Alignof(struct sfs_ring))
		return sfs__err(SFS_EUSAGE, "ring init: memory %p is not %zu-byte aligned", mem,
				_Alignof(struct sfs_ring));
	if (!is_pow2(count) || count < 2 || count > SFS_RING_COUNT_MAX)
		return sfs__err(SFS_EUSAGE,
				"ring init: count %u is not a power of two in [2, %u]", count,
				SFS_RING_COUNT_MAX);
	if (esize == 0 || esize % 8 || esize > SFS_RING_ESIZE_MAX)
		return sfs__err(SFS_EUSAGE,
				"ring init: record size %u is not a multiple of 8 in [8, %u]",
				esize, SFS_RING_ESIZE_MAX);
	if (flags != SFS_RING_SPSC && flags != SFS_RING_MPSC)
		return sfs__err(SFS_EUSAGE,
				"ring init: flags 0x%x: expected SFS_RING_SPSC or SFS_RING_MPSC",
				flags);

	/* The header only: the records need no initial value, and the seq words
	 * must not look published (0 never equals position + 1 on the first
	 * lap). */
	memset(r, 0, sizeof(*r));
	r->rg_version = SFS_RING_VERSION;
	r->rg_layout = sfs_ring_layout();
	r->rg_flags = flags;
	r->rg_count = count;
	r->rg_mask = count - 1;
	r->rg_esize = esize;
	r->rg_seq_off = seq_offset(count, esize);
	r->rg_memsize = sfs_ring_memsize(count, esize);
	memset((char *)r + r->rg_seq_off, 0, (size_t)count * sizeof(uint32_t));
	sfs_store_release(&r->rg_magic, SFS_RING_MAGIC);
	return 0;
}

int sfs_ring_check(const void *mem)
{
	const struct sfs_ring *r = mem;
	uint64_t magic;

	if (!mem || (uintptr_t)mem % SFS_CACHE_LINE)
		return sfs__err(SFS_EUSAGE, "ring at %p: NULL or not %d-byte aligned", mem,
				SFS_CACHE_LINE);
	magic = sfs_load_acquire(&r->rg_magic);
	if (magic != SFS_RING_MAGIC)
		return sfs__err(SFS_EMAGIC, "ring at %p: magic 0x%016llx, expected 0x%016llx", mem,
				(unsigned long long)magic, (unsigned long long)SFS_RING_MAGIC);
	if (r->rg_version != SFS_RING_VERSION)
		return sfs__err(SFS_EVERSION, "ring at %p: format version %u, this build reads %u",
				mem, r->rg_version, SFS_RING_VERSION);
	if (r->rg_layout != sfs_ring_layout())
		return sfs__err(SFS_ELAYOUT,
				"ring at %p: layout fingerprint 0x%08x, this build has 0x%08x", mem,
				r->rg_layout, sfs_ring_layout());
	if (sfs_ring_memsize(r->rg_count, r->rg_esize) == 0 || r->rg_mask != r->rg_count - 1 ||
	    (r->rg_flags != SFS_RING_SPSC && r->rg_flags != SFS_RING_MPSC) ||
	    r->rg_seq_off != seq_offset(r->rg_count, r->rg_esize) ||
	    r->rg_memsize != sfs_ring_memsize(r->rg_count, r->rg_esize))
		return sfs__err(SFS_ECORRUPT,
				"ring at %p: inconsistent constants (count %u, mask 0x%x, "
				"esize %u, flags 0x%x, seq_off %llu, memsize %llu)",
				mem, r->rg_count, r->rg_mask, r->rg_esize, r->rg_flags,
				(unsigned long long)r->rg_seq_off, (unsigned long long)r->rg_memsize);
	return 0;
}

int sfs_ring_attach(void *mem, size_t len, struct sfs_ring **out)
{
	struct sfs_ring *r = mem;
	int rc;

	if (len < sizeof(*r))
		return sfs__err(SFS_ECORRUPT, "ring at %p: %zu bytes mapped, the header needs %zu",
				mem, len, sizeof(*r));
	rc = sfs_ring_check(mem);
	if (rc)
		return rc;
	if (r->rg_memsize > len)
		return sfs__err(SFS_ECORRUPT, "ring at %p: spans %llu bytes, only %zu mapped", mem,
				(unsigned long long)r->rg_memsize, len);
	*out = r;
	return 0;
}

void sfs_ring_stats(const struct sfs_ring *r, struct sfs_ring_stats *st)
{
	st->count = r->rg_count;
	st->esize = r->rg_esize;
	st->flags = r->rg_flags;
	st->used = sfs_ring_count(r);
	st->cons_sleeps = uatomic_read(&r->rg_cons_sleeps);
	st->prod_sleeps = uatomic_read(&r->rg_prod_sleeps);
	st->cons_wakes = uatomic_read(&r->rg_cons_wakes);
	st->prod_wakes = uatomic_read(&r->rg_prod_wakes);
}

/* P4 above.  The cmpxchg both changes the futex word before the wake (so
 * a not-yet-queued sleeper cannot miss it) and makes one waker out of
 * several racing producers. */
void sfs__ring_wake_cons(struct sfs_ring *r)
{
	if (uatomic_cmpxchg(&r->rg_cons_sleeping, 1, 0) == 1) {
		uatomic_inc(&r->rg_cons_wakes);
		sfs_futex_wake(&r->rg_cons_sleeping, INT_MAX);
	}
}

void sfs__ring_wake_prod(struct sfs_ring *r)
{
	if (uatomic_cmpxchg(&r->rg_prod_sleeping, 1, 0) == 1) {
		uatomic_inc(&r->rg_prod_wakes);
		sfs_futex_wake(&r->rg_prod_sleeping, INT_MAX);
	}
}

static int cons_ready(struct sfs_ring *r)
{
	return sfs__ring_cons_ready(r, r->rg_cons_tail, 1) != 0;
}

/* Free slots for a producer, fresh from the consumer's tail (no cache). */
static int prod_ready(struct sfs_ring *r)
{
	int32_t used = (int32_t)(sfs_load_relaxed(&r->rg_prod_head) -
				 sfs_load_acquire(&r->rg_cons_tail));

	return used < (int32_t)r->rg_count;
}

/* Spin, then yield, until @ready (1) or the budget is spent (0).  A
 * process-local function pointer: nothing of it reaches shared memory. */
static int spin_then_yield(struct sfs_ring *r, int (*ready)(struct sfs_ring *))
{
	uint64_t end = 0;
	unsigned i;

	for (i = 0;; i++) {
		caa_cpu_relax();
		if (ready(r))
			return 1;
		if (i % 32 == 31) {
			uint64_t now = sfs_now_ns();

			if (!end)
				end = now + RING_SPIN_NS;
			else if (now >= end)
				break;
		}
	}
	for (i = 0; i < RING_YIELDS; i++) {
		sched_yield();
		if (ready(r))
			return 1;
	}
	return 0;
}

static uint64_t deadline_of(uint64_t timeout_ns)
{
	uint64_t now = sfs_now_ns();

	return timeout_ns >= UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

/* Sleep on @word (announced 1) until woken or @deadline; 0 if it passed. */
static int sleep_until(int32_t *word, uint64_t deadline)
{
	uint64_t now = sfs_now_ns();

	if (now >= deadline)
		return 0;
	/* 0 (woken / word changed), -EINTR, -ETIMEDOUT: the caller re-checks
	 * the ring and the clock either way. */
	(void)sfs_futex_wait(word, 1, deadline == UINT64_MAX ? 0 : deadline - now);
	return 1;
}

int sfs_ring_dequeue_wait(struct sfs_ring *r, void *recs, unsigned n, uint64_t timeout_ns)
{
	uint64_t deadline;
	unsigned got;

	got = sfs_ring_dequeue_burst(r, recs, n);
	if (got || timeout_ns == 0 || n == 0)
		return (int)got;
	if (spin_then_yield(r, cons_ready)) {
		got = sfs_ring_dequeue_burst(r, recs, n);
		if (got)
			return (int)got;
	}
	deadline = deadline_of(timeout_ns);
	for (;;) {
		(void)uatomic_xchg(&r->rg_cons_sleeping, 1);    /* S1 */
		cmm_smp_mb();                                   /* S2 (xchg is one too) */
		got = sfs_ring_dequeue_burst(r, recs, n);       /* S3 */
		if (got)
			break;
		uatomic_inc(&r->rg_cons_sleeps);
		if (!sleep_until(&r->rg_cons_sleeping, deadline)) /* S4 */
			break;
	}
	/* Single consumer: nobody else announced on this word, clearing it
	 * spares producers a useless wake. */
	sfs_store_relaxed(&r->rg_cons_sleeping, 0);
	return (int)got;
}

/* An SPSC producer is the only one on its word and may take its
 * announcement back; MPSC producers leave it (see the file comment). */
static void prod_unannounce(struct sfs_ring *r)
{
	if (r->rg_flags & SFS_RING_SPSC)
		sfs_store_relaxed(&r->rg_prod_sleeping, 0);
}

int sfs_ring_enqueue_wait(struct sfs_ring *r, const void *recs, unsigned n, uint64_t timeout_ns)
{
	const char *p = recs;
	uint64_t deadline = 0;
	unsigned done = 0;

	for (;;) {
		unsigned k = sfs_ring_enqueue_burst(r, p + (size_t)done * r->rg_esize, n - done);

		done += k;
		if (done == n || (k == 0 && timeout_ns == 0))
			return (int)done;
		if (k)
			continue;
		if (spin_then_yield(r, prod_ready))
			continue;
		if (!deadline)
			deadline = deadline_of(timeout_ns);
		(void)uatomic_xchg(&r->rg_prod_sleeping, 1);    /* S1 */
		cmm_smp_mb();                                   /* S2 */
		if (prod_ready(r)) {                            /* S3 */
			prod_unannounce(r);
			continue;
		}
		uatomic_inc(&r->rg_prod_sleeps);
		if (!sleep_until(&r->rg_prod_sleeping, deadline)) { /* S4 */
			prod_unannounce(r);
			return (int)done;
		}
	}
}

uint64_t sfs_ring_stalled_ns(struct sfs_ring *r)
{
	uint32_t tail = r->rg_cons_tail;
	uint64_t now;

	if (!(r->rg_flags & SFS_RING_MPSC))
		return 0;
	if (sfs_load_acquire(&r->rg_prod_head) == tail ||
	    sfs__ring_cons_ready(r, tail, 1)) {
		r->rg_cons_stall_since_ns = 0;
		return 0;
	}
	now = sfs_now_ns();
	if (r->rg_cons_stall_since_ns == 0 || r->rg_cons_stall_pos != tail) {
		r->rg_cons_stall_pos = tail;
		r->rg_cons_stall_since_ns = now;
		return 1;
	}
	return now - r->rg_cons_stall_since_ns + 1;
}

int sfs_ring_skip_stalled(struct sfs_ring *r)
{
	uint32_t tail = r->rg_cons_tail;

	if (!(r->rg_flags & SFS_RING_MPSC))
		return sfs__err(SFS_EUSAGE, "ring %p: skip_stalled on an SPSC ring", (void *)r);
	if (sfs_load_acquire(&r->rg_prod_head) == tail || sfs__ring_cons_ready(r, tail, 1))
		return sfs__err(SFS_EUSAGE, "ring %p: position %u is not stalled", (void *)r, tail);
	r->rg_cons_stall_since_ns = 0;
	sfs_store_release(&r->rg_cons_tail, tail + 1);
	sfs__ring_kick_prod(r);
	return 0;
}
