/*
 * mstore_compact.c — room in the memory store (memory.h): the index grown
 * in place, the semispace copy of every live record into the other half
 * (compact), state TTL (the records a copy leaves behind, and the copy a
 * commit runs when enough has expired), and the one error a store that
 * outgrows its region stops with.
 *
 * Next: mstore_freeze.c.
 */

#include <string.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/keygroup.h"
#include "shm/child.h"
#include "store/memory/mstore_int.h"

#define GRACE_WAIT_NS (10ull * 1000000000ull)

/* A new empty index of @slots in half @h, not yet published. */
uint64_t sfs__mstore_index_new(struct sfs_mstore *ms, unsigned h, uint64_t slots)
{
	uint64_t off = bump(ms, h, sizeof(struct sfs_mstore_index) + slots * 8);
	struct sfs_mstore_index *ix;

	if (!off)
		return 0;
	ix = index_at(ms, off);
	memset(ix->mi_slot, 0, slots * 8);
	ix->mi_slots = slots;
	ix->mi_used = 0;
	return off;
}

static uint64_t slots_for(uint64_t live)
{
	uint64_t slots = INDEX_MIN_SLOTS;

	while (slots < 2 * (live + 1))
		slots *= 2;
	return slots;
}

/* Insert a (live, unique) slot word into an unpublished index. */
static void index_put(struct sfs_mstore_index *ix, uint64_t h, uint64_t sw)
{
	uint64_t j;

	for (j = h & (ix->mi_slots - 1); ix->mi_slot[j]; j = (j + 1) & (ix->mi_slots - 1))
		;
	ix->mi_slot[j] = sw;
	ix->mi_used++;
}

/* Grow the index within the active half (records stay where they are). */
static int index_grow(struct sfs_mstore_writer *w)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_index *old = index_at(ms, ms->ms_index), *nx;
	uint64_t noff = sfs__mstore_index_new(ms, ms->ms_active, slots_for(ms->ms_live));

	if (!noff)
		return SFS_EFULL;
	nx = index_at(ms, noff);
	for (uint64_t i = 0; i < old->mi_slots; i++) {
		uint64_t sw = old->mi_slot[i];

		if (sw != SLOT_EMPTY && sw != SLOT_DELETED)
			index_put(nx, rec(ms, sw & SLOT_OFF_MASK)->me_hash, sw);
	}
	sfs_store_relaxed(&ms->ms_garbage, ms->ms_garbage + sizeof(*old) + old->mi_slots * 8);
	sfs_store_release(&ms->ms_index, noff);
	return 0;
}

/* Copy record @e into half @to and enter it in @nx: its new offset, 0 when
 * the half is full. */
static uint64_t copy_rec(struct sfs_mstore *ms, unsigned to, struct sfs_mstore_index *nx,
			 const struct sfs_mstore_entry *e)
{
	uint64_t n = entry_size(entry_klen(e), e->me_vlen), off = bump(ms, to, n);

	if (!off)
		return 0;
	memcpy(base(ms) + off, e, n);
	index_put(nx, e->me_hash, slot_word(e->me_hash, off));
	return off;
}

/* ---- state TTL (see memory.h) ----------------------------------------------- */

void sfs_mstore_ttl(struct sfs_mstore_writer *w, const struct sfs_ttl_rule *rules,
		    const struct sfs_ttl_clock *now)
{
	w->ttl_any = 0;
	w->ttl_min[0] = w->ttl_min[1] = 0;
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		uint64_t t = rules[i].ttl_ms;
		unsigned c = rules[i].event_time != 0;

		w->ttl_rule[i] = rules[i];
		if (!t)
			continue;
		w->ttl_any = 1;
		if (!w->ttl_min[c] || t < w->ttl_min[c])
			w->ttl_min[c] = t;
	}
	if (now->proc_ms > w->ttl_now.proc_ms)
		w->ttl_now.proc_ms = now->proc_ms;
	if (now->event_ms > w->ttl_now.event_ms)
		w->ttl_now.event_ms = now->event_ms;
	if (!w->ttl_on)
		w->ttl_mark = w->ttl_now;	/* the trigger counts from the first call */
	w->ttl_on = 1;
}

/* 1 and *@now, the clock record @e's state expires by, when it is a TTL
 * state's (its id in the key prefix, common/keygroup.h); else 0. */
static inline int ttl_clock_of(const struct sfs_mstore_writer *w,
			       const struct sfs_mstore_entry *e, uint64_t *now)
{
	const struct sfs_ttl_rule *r;
	uint32_t sid;

	if (entry_klen(e) < SFS_KEY_PREFIX)
		return 0;
	sid = sfs_key_prefix_state((const unsigned char *)(e + 1));
	if (sid >= SFS_MAX_STATES || !(r = &w->ttl_rule[sid])->ttl_ms)
		return 0;
	*now = sfs_ttl_now(r, &w->ttl_now);
	return 1;
}

/* 1 when value or map-entry record @e of a TTL state has expired at @now
 * (its user value: after the link block of an entry). */
static inline int rec_expired(const struct sfs_mstore_entry *e, uint64_t now)
{
	const char *v = entry_value(e);
	uint32_t len = e->me_vlen;

	if (entry_kind(e) == SFS_MSTORE_K_ENTRY) {
		v += LINK_BYTES;
		len -= LINK_BYTES;
	}
	return sfs_ttl_expired(v, len, now);
}

/*
 * Copy every live record into the other half with a fresh index and publish
 * it.  A map is copied from its head along its list (its entries are
 * skipped where the index walk meets them), relinked to the new offsets.
 * Records of a TTL state that expired at the writer's clock are left
 * behind (memory.h, "State TTL"): a value or counter is not copied, a map
 * entry is not linked into the new list, a map with no entry left loses
 * its head.  Waits (bounded) for the grace period that frees the other
 * half.  O(live bytes).  SFS_EFULL when the live data does not fit half
 * the region.  Never runs with an intent pending (called before a write's
 * first step, or at a commit).
 *
 * A kill -9 at any instruction: everything written here goes to the other
 * half, which no reader or index reaches until the release store of
 * ms_index below; until then the published half, index and lists are
 * untouched (a record left behind is simply not copied: the old half
 * still has it).  So a kill before the publication leaves the old version
 * whole, and the next copy starts over (and drops the same records).  The
 * counters (ms_live, ms_bytes, ms_maps: what the copy put in the new half;
 * ms_ttl_dropped) are stored after the publication: a kill in between
 * leaves the first three as before the copy (too high by its drops: an
 * index sizing hint, statistics) until the next copy sets them exactly,
 * and ms_ttl_dropped short of that copy's drops.  Fault points
 * memory.copy and memory.copied (tests/test_mstore_ttl.c kills there).
 */
static int compact(struct sfs_mstore_writer *w)
{
	struct sfs_mstore *ms = w->ms;
	unsigned from = ms->ms_active, to = !from;
	struct sfs_mstore_index *old = index_at(ms, ms->ms_index), *nx;
	uint64_t noff, c_live = 0, c_bytes = 0, c_maps = 0, dropped = 0;
	int ttl = w->ttl_any;	/* no TTL state: no per-record check at all */

	if (sfs_load_relaxed(&ms->ms_dump_list) && ms->ms_dump_half == to) {
		/* A dump still reads the other half: it finishes first (the
		 * second copy within one dump; see the top). */
		int rc = w->pin_wait ? w->pin_wait(w->pin_arg) : SFS_ETIMEDOUT;

		if (rc)
			return rc;
		if (ms->ms_dump_list && ms->ms_dump_half == to)
			return sfs__err(SFS_ETIMEDOUT, "memory store %u: a dump pins the other half",
					ms->ms_worker);
	}
	if (w->idle_token) {
		int rc = sfs_qsbr_check(w->seg, w->self, w->idle_token, GRACE_WAIT_NS);

		if (rc != 1)
			return rc ? rc : SFS_ETIMEDOUT;
		w->idle_token = 0;
	}
	sfs_store_relaxed(&ms->ms_top[to], 0);
	noff = sfs__mstore_index_new(ms, to, slots_for(ms->ms_live));
	if (!noff)
		return SFS_EFULL;
	nx = index_at(ms, noff);
	for (uint64_t i = 0; i < old->mi_slots; i++) {
		uint64_t sw = old->mi_slot[i], nh, prev, at, now = 0;
		const struct sfs_mstore_entry *e;
		int exp;

		/* a copy grows with the store (q20 at 20M events: 1.7 GB, seconds):
		 * a sign of life per 64K slots, or the supervisor kills the
		 * compactor as hung and its successor copies again */
		if ((i & 0xffff) == 0)
			sfs_child_progress();
		if (sw == SLOT_EMPTY || sw == SLOT_DELETED)
			continue;
		e = rec(ms, sw & SLOT_OFF_MASK);
		if (entry_kind(e) == SFS_MSTORE_K_ENTRY)
			continue;	/* copied with its head */
		exp = ttl && ttl_clock_of(w, e, &now);
		at = entry_kind(e) == SFS_MSTORE_K_HEAD ? link_of(e)->ml_next : 0;
		if (exp) {
			/* A value left behind; a map's list from its first live entry. */
			if (entry_kind(e) != SFS_MSTORE_K_HEAD && rec_expired(e, now)) {
				dropped++;
				sfs_fault("memory.copy");
				continue;
			}
			for (; at && rec_expired(rec(ms, at), now); at = link_of(rec(ms, at))->ml_next)
				dropped++;
			if (entry_kind(e) == SFS_MSTORE_K_HEAD && !at) {
				sfs_fault("memory.copy");
				continue;	/* every entry expired: the head goes too */
			}
		}
		nh = copy_rec(ms, to, nx, e);
		if (!nh)
			return SFS_EFULL;	/* unpublished: the old half stays in use */
		c_live++;
		c_bytes += entry_klen(e) + e->me_vlen;
		if (entry_kind(e) != SFS_MSTORE_K_HEAD) {
			sfs_fault("memory.copy");
			continue;
		}
		c_maps++;
		prev = nh;
		link_of(rec(ms, nh))->ml_next = 0;
		for (; at; at = link_of(rec(ms, at))->ml_next) {
			const struct sfs_mstore_entry *x = rec(ms, at);
			uint64_t ne;

			if (exp && rec_expired(x, now)) {
				dropped++;
				continue;
			}
			if (!(ne = copy_rec(ms, to, nx, x)))
				return SFS_EFULL;
			c_live++;
			c_bytes += entry_klen(x) + x->me_vlen;
			link_of(rec(ms, ne))->ml_next = 0;
			link_of(rec(ms, ne))->ml_prev = prev;
			link_of(rec(ms, prev))->ml_next = ne;
			prev = ne;
		}
		sfs_fault("memory.copy");
	}
	sfs_store_relaxed(&ms->ms_garbage, 0);
	sfs_store_release(&ms->ms_index, noff);
	sfs_store_release(&ms->ms_active, to);
	sfs_store_relaxed(&ms->ms_copies, ms->ms_copies + 1);
	sfs_fault("memory.copied");
	/* What the new half holds, counted by the copy itself (so a count a
	 * kill left off is exact again after the next copy). */
	sfs_store_relaxed(&ms->ms_live, c_live);
	sfs_store_relaxed(&ms->ms_bytes, c_bytes);
	sfs_store_relaxed(&ms->ms_maps, c_maps);
	if (dropped)
		sfs_store_relaxed(&ms->ms_ttl_dropped, ms->ms_ttl_dropped + dropped);
	w->idle_token = sfs_qsbr_start(w->seg->hdr);
	w->ttl_mark = w->ttl_now;
	w->ttl_mark_written = ms->ms_written;
	w->ttl_mark_copied = ms->ms_top[to];
	return 0;
}

int sfs_mstore_compact(struct sfs_mstore_writer *w)
{
	return compact(w);
}

/* Make room for @n more record bytes and @slots more index slots.  May
 * move everything (a semispace copy): the caller probes again after. */
int sfs__mstore_make_room(struct sfs_mstore_writer *w, uint64_t n, unsigned slots)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_index *ix = index_at(ms, ms->ms_index);
	int rc;

	if (ix->mi_used + slots > ix->mi_slots / 4 * 3) {
		/* An index of the new size, plus the records, must fit. */
		uint64_t need = sizeof(*ix) + slots_for(ms->ms_live + slots) * 8 + n;

		if (need > ms->ms_half - ms->ms_top[ms->ms_active]) {
			rc = compact(w);
			if (rc)
				return rc;
			ix = index_at(ms, ms->ms_index);
		}
		if (ix->mi_used + slots > ix->mi_slots / 4 * 3) {
			rc = index_grow(w);
			if (rc)
				return rc;
		}
	}
	if (n > ms->ms_half - ms->ms_top[ms->ms_active]) {
		rc = compact(w);
		if (rc)
			return rc;
		if (n > ms->ms_half - ms->ms_top[ms->ms_active])
			return SFS_EFULL;
	}
	return 0;
}

int sfs__mstore_full(struct sfs_mstore_writer *w, int rc)
{
	const struct sfs_mstore *ms = w->ms;

	/* The one line a run that outgrows its store stops with (the flusher
	 * makes it fatal): what happened and what to do. */
	return rc == SFS_EFULL ? sfs__err(SFS_EFULL,
					  "memory store %u is full: %llu keys, %llu bytes live "
					  "do not fit half of its %llu MiB (--store-mb); raise "
					  "--store-mb or use --backend table",
					  ms->ms_worker, (unsigned long long)ms->ms_live,
					  (unsigned long long)ms->ms_bytes,
					  (unsigned long long)(ms->ms_size >> 20))
			       : rc;
}

/*
 * The commit-time copy of a store with TTL states.  A copy otherwise runs
 * only when a half fills, so expired records would sit (and count in
 * ms_live) until then.  A copy is due at a commit when all of:
 *  - the clock of some TTL state has moved by at least the smallest TTL on
 *    that clock since the last copy (by then everything written before
 *    that copy in the shortest-lived state has expired);
 *  - the active half is at least a quarter used (a smaller store has room
 *    and is left alone);
 *  - flushes appended at least as many bytes since the last copy as it
 *    copied (the amortization bound, below);
 *  - nothing would make the commit wait: no grace period pending for the
 *    other half, no dump pinned (else it stays due for a later commit).
 * Cost: a copy is O(live bytes) (plus the new index).  Live bytes now are
 * at most what the last copy copied plus what was appended since, so the
 * third rule bounds a TTL copy by twice the bytes flushed since the last
 * copy: amortized, at most two bytes copied per byte flushed, and at most
 * one copy per smallest-TTL of clock time.  A failed copy (nothing
 * published) is not retried before the next such interval.
 */
static int ttl_due(struct sfs_mstore_writer *w)
{
	struct sfs_mstore *ms = w->ms;

	if (!(w->ttl_min[0] && w->ttl_now.proc_ms - w->ttl_mark.proc_ms >= w->ttl_min[0]) &&
	    !(w->ttl_min[1] && w->ttl_now.event_ms - w->ttl_mark.event_ms >= w->ttl_min[1]))
		return 0;
	if (ms->ms_top[ms->ms_active] < ms->ms_half / 4 ||
	    ms->ms_written - w->ttl_mark_written < w->ttl_mark_copied)
		return 0;
	return !ms->ms_dump_list && !sfs_mstore_pending(w);
}

void sfs_mstore_commit(struct sfs_mstore_writer *w, uint64_t seq)
{
	sfs_store_release(&w->ms->ms_applied, seq);
	sfs_store_release(&w->ms->ms_commits, w->ms->ms_commits + 1);
	if (w->ttl_any && ttl_due(w)) {
		int rc = compact(w);

		if (rc) {
			/* nothing published, nothing lost: the next flush that
			 * needs room says so if it cannot make it */
			sfs_log("memory store %u: TTL copy skipped (%d)", w->ms->ms_worker, rc);
			w->ttl_mark = w->ttl_now;	/* not again before the next interval */
		}
	}
}
