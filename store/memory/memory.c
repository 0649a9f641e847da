/*
 * memory.c — the memory flush target: see memory.h for the design.
 * Hand-written because no library offers a multi-process, RCU-published,
 * offset-based hash table (with per-map linked entries) that survives its
 * writer's kill -9.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/fingerprint.h"
#include "common/keycmp.h"
#include "common/keygroup.h"
#include "common/merge.h"
#include "shm/child.h"
#include "store/memory/memory.h"

#define SLOT_EMPTY 0ull
#define SLOT_DELETED 1ull
#define SLOT_OFF_MASK ((1ull << 48) - 1)
#define INDEX_MIN_SLOTS 1024u
#define GRACE_WAIT_NS (10ull * 1000000000ull)
#define KLEN_MASK 0xffffffu
#define LINK_BYTES ((uint32_t)sizeof(struct sfs_mstore_link))

/* Intents (ms_intent): the operation whose steps a restart finishes. */
enum {
	I_LINK = 1,	/* ms_intent_rec: a new map entry whose links are set */
	I_UNLINK = 2,	/* ms_intent_rec: a map entry to take out */
	I_CLEAR = 3,	/* ms_intent_rec: a head whose map is dropped */
};


uint64_t sfs_mstore_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	h = sfs_fp(h, sizeof(struct sfs_mstore));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_index));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_active));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_top));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_applied));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_copies));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_intent));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_intent_rec));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_redone));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_ttl_dropped));
	h = sfs_fp(h, sizeof(struct sfs_mstore_index));
	h = sfs_fp(h, sizeof(struct sfs_mstore_entry));
	h = sfs_fp(h, offsetof(struct sfs_mstore_entry, me_vlen));
	h = sfs_fp(h, sizeof(struct sfs_mstore_link));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_dump_list));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_dump_half));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_dump_done));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_dump_path));
	h = sfs_fp(h, SFS_MSTORE_DUMP_PATH);
	h = sfs_fp(h, sizeof(struct sfs_mstore_frozen));
	h = sfs_fp(h, SFS_MSTORE_K_ENTRY);
	h = sfs_fp(h, SLOT_OFF_MASK);
	return h;
}

void sfs_mstore_name(uint32_t w, char *buf, size_t n)
{
	snprintf(buf, n, "mstore.%u", w);
}

static inline char *base(const struct sfs_mstore *ms)
{
	return (char *)(uintptr_t)ms;
}

static inline uint64_t slot_word(uint64_t h, uint64_t off)
{
	return (h & ~SLOT_OFF_MASK) | off;
}

static inline uint64_t entry_size(uint32_t klen, uint32_t vlen)
{
	return (sizeof(struct sfs_mstore_entry) + ((klen + 7u) & ~7u) + vlen + 7u) & ~7ull;
}

static inline uint32_t entry_klen(const struct sfs_mstore_entry *e)
{
	return e->me_kf & KLEN_MASK;
}

static inline uint32_t entry_kind(const struct sfs_mstore_entry *e)
{
	return e->me_kf >> 24;
}

static inline const void *entry_value(const struct sfs_mstore_entry *e)
{
	return (const char *)(e + 1) + ((entry_klen(e) + 7u) & ~7u);
}

static inline struct sfs_mstore_entry *rec(const struct sfs_mstore *ms, uint64_t off)
{
	return (struct sfs_mstore_entry *)(base(ms) + off);
}

/* The link block of a map record (head or entry). */
static inline struct sfs_mstore_link *link_of(const struct sfs_mstore_entry *e)
{
	return (struct sfs_mstore_link *)(uintptr_t)entry_value(e);
}

static int check(const struct sfs_mstore *ms, uint64_t size, const char *what)
{
	if (sfs_load_acquire(&ms->ms_magic) != SFS_MSTORE_MAGIC)
		return sfs__err(SFS_EMAGIC, "memory store %s: bad magic", what);
	if (ms->ms_version != SFS_MSTORE_VERSION)
		return sfs__err(SFS_EVERSION, "memory store %s: version %u, this build reads %u",
				what, ms->ms_version, SFS_MSTORE_VERSION);
	if (ms->ms_layout != sfs_mstore_layout())
		return sfs__err(SFS_ELAYOUT, "memory store %s: layout fingerprint differs", what);
	if (ms->ms_size != size || ms->ms_half_off[1] + ms->ms_half > size ||
	    ms->ms_top[0] > ms->ms_half || ms->ms_top[1] > ms->ms_half || ms->ms_active > 1)
		return sfs__err(SFS_ECORRUPT, "memory store %s: geometry does not fit %llu bytes",
				what, (unsigned long long)size);
	return 0;
}

int sfs_mstore_attach(struct sfs_seg *s, uint32_t w, struct sfs_mstore **out)
{
	uint64_t never = UINT64_MAX;

	return sfs_mstore_attach_after(s, w, &never, out);
}

int sfs_mstore_attach_after(struct sfs_seg *s, uint32_t w, uint64_t *absent_at,
			    struct sfs_mstore **out)
{
	uint64_t ready = sfs_seg_regions_ready(s), off, size;	/* before the search */
	char name[SFS_REGION_NAME_MAX];
	int rc;

	*out = NULL;
	if (ready == *absent_at)
		return 0;	/* no region turned ready since the last search */
	sfs_mstore_name(w, name, sizeof(name));
	if (sfs_seg_region_find(s, name, &off, &size)) {
		*absent_at = ready;
		return 0;	/* nothing flushed yet: an empty store */
	}
	rc = check(sfs_seg_ptr(s, off), size, name);
	if (rc == SFS_EMAGIC)
		return 0;	/* being created right now: still empty */
	if (rc == 0)
		*out = sfs_seg_ptr(s, off);
	return rc;
}

/* The record slot word @sw names, if it is (ns, key)'s: its tag first (no
 * record is read for another tag, nor for an empty or deleted slot), then
 * hash, namespace, length and bytes (inline: sfs_keyeq).  NULL otherwise. */
static inline __attribute__((always_inline)) const struct sfs_mstore_entry *
slot_rec(const struct sfs_mstore *ms, uint64_t sw, uint64_t h, uint64_t ns, const void *key,
	 uint32_t klen)
{
	const struct sfs_mstore_entry *e;

	if (((sw ^ h) & ~SLOT_OFF_MASK) || sw <= SLOT_DELETED)
		return NULL;
	e = (const struct sfs_mstore_entry *)(base(ms) + (sw & SLOT_OFF_MASK));
	if (e->me_hash == h && e->me_ns == ns && entry_klen(e) == klen &&
	    sfs_keyeq(e + 1, key, klen))
		return e;
	return NULL;
}

/* Probe @ix for (ns, key): the slot index, *found if it holds the key, and
 * then *word the slot word it matched (read once: a concurrent writer may
 * change the slot after).  The compactor's: a miss returns the first
 * deleted slot of the run, for reuse. */
static uint64_t probe(const struct sfs_mstore *ms, const struct sfs_mstore_index *ix, uint64_t h,
		      uint64_t ns, const void *key, uint32_t klen, int *found, uint64_t *word)
{
	uint64_t mask = ix->mi_slots - 1, i, first_free = UINT64_MAX;

	*found = 0;
	for (i = h & mask;; i = (i + 1) & mask) {
		uint64_t sw = sfs_load_acquire(&ix->mi_slot[i]);

		if (sw == SLOT_EMPTY)
			return first_free != UINT64_MAX ? first_free : i;
		if (sw == SLOT_DELETED && first_free == UINT64_MAX)
			first_free = i;
		if (slot_rec(ms, sw, h, ns, key, klen)) {
			*found = 1;
			*word = sw;
			return i;
		}
	}
}

/* A reader's probe: the record of (ns, key) in @ix, or NULL.  probe()
 * without what only the compactor needs (the first deleted slot, for
 * reuse): the flushed-store get is one call of this. */
static inline __attribute__((always_inline)) const struct sfs_mstore_entry *
lookup(const struct sfs_mstore *ms, const struct sfs_mstore_index *ix, uint64_t h, uint64_t ns,
       const void *key, uint32_t klen)
{
	uint64_t mask = ix->mi_slots - 1;

	for (uint64_t i = h & mask;; i = (i + 1) & mask) {
		uint64_t sw = sfs_load_acquire(&ix->mi_slot[i]);
		const struct sfs_mstore_entry *e;

		if (sw == SLOT_EMPTY)
			return NULL;
		if ((e = slot_rec(ms, sw, h, ns, key, klen)))
			return e;
	}
}

void sfs_mstore_prefetch(const struct sfs_mstore *ms, uint64_t h)
{
	uint64_t ioff = sfs_load_acquire(&ms->ms_index);
	const struct sfs_mstore_index *ix;

	if (!ioff)
		return;
	ix = (const struct sfs_mstore_index *)(base(ms) + ioff);
	__builtin_prefetch(&ix->mi_slot[h & (ix->mi_slots - 1)]);
}

void sfs_mstore_prefetch_rec(const struct sfs_mstore *ms, uint64_t h)
{
	uint64_t ioff = sfs_load_acquire(&ms->ms_index), sw;
	const struct sfs_mstore_index *ix;

	if (!ioff)
		return;
	ix = (const struct sfs_mstore_index *)(base(ms) + ioff);
	sw = sfs_load_relaxed(&ix->mi_slot[h & (ix->mi_slots - 1)]);
	if (sw > SLOT_DELETED && (sw & ~SLOT_OFF_MASK) == (h & ~SLOT_OFF_MASK))
		__builtin_prefetch(base(ms) + (sw & SLOT_OFF_MASK));
}

int sfs_mstore_get(const struct sfs_mstore *ms, uint64_t h, uint64_t ns, const void *key,
		   uint32_t klen, struct sfs_mstore_view *v)
{
	uint64_t ioff = sfs_load_acquire(&ms->ms_index);
	const struct sfs_mstore_entry *e;

	if (!ioff)
		return 0;
	e = lookup(ms, (const struct sfs_mstore_index *)(base(ms) + ioff), h, ns, key, klen);
	if (!e)
		return 0;
	switch (entry_kind(e)) {
	case SFS_MSTORE_K_HEAD:
		return 0;
	case SFS_MSTORE_K_ENTRY:
		v->value = (const char *)entry_value(e) + LINK_BYTES;
		v->len = e->me_vlen - LINK_BYTES;
		break;
	default:
		v->value = entry_value(e);
		v->len = e->me_vlen;
	}
	v->tag = e->me_tag;
	return 1;
}

/* A record a reader follows a link to: inside the halves, whole. */
static const struct sfs_mstore_entry *follow(const struct sfs_mstore *ms, uint64_t off)
{
	const struct sfs_mstore_entry *e;

	if (off < ms->ms_half_off[0] || (off & 7) || off > ms->ms_size - sizeof(*e))
		return NULL;
	e = rec(ms, off);
	if (entry_size(entry_klen(e), e->me_vlen) > ms->ms_size - off)
		return NULL;
	return e;
}

int sfs_mstore_map_iter(const struct sfs_mstore *ms, uint64_t ph, uint64_t ns, const void *pk,
			uint32_t plen,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg)
{
	uint64_t ioff = sfs_load_acquire(&ms->ms_index), sw = 0, off, steps = 0;
	const struct sfs_mstore_index *ix;
	const struct sfs_mstore_entry *e;
	int found;

	if (!ioff)
		return 0;
	ix = (const struct sfs_mstore_index *)(base(ms) + ioff);
	probe(ms, ix, ph, ns, pk, plen, &found, &sw);
	if (!found)
		return 0;
	e = rec(ms, sw & SLOT_OFF_MASK);
	if (entry_kind(e) != SFS_MSTORE_K_HEAD)
		return 0;
	for (off = sfs_load_acquire(&link_of(e)->ml_next); off;
	     off = sfs_load_acquire(&link_of(e)->ml_next)) {
		int rc;

		/* A bound on the walk too: a cycle (a bug) ends, it does not spin. */
		e = follow(ms, off);
		if (!e || entry_klen(e) < plen || e->me_vlen < LINK_BYTES ||
		    ++steps > ms->ms_size / sizeof(*e))
			return sfs__err(SFS_ECORRUPT, "memory store %u: map link to offset %llu "
					"is not an entry", ms->ms_worker, (unsigned long long)off);
		rc = fn(arg, (const char *)(e + 1) + plen, entry_klen(e) - plen,
			(const char *)entry_value(e) + LINK_BYTES, e->me_vlen - LINK_BYTES);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- writer ---------------------------------------------------------------- */

/* Reserve @n bytes at the top of half @h: the top moves before anything is
 * written, so a crash leaves unreachable bytes, never a published record
 * that a later append overwrites.  Returns the region offset or 0 when full. */
static uint64_t bump(struct sfs_mstore *ms, unsigned h, uint64_t n)
{
	uint64_t top = ms->ms_top[h];

	if (n > ms->ms_half - top)
		return 0;
	sfs_store_relaxed(&ms->ms_top[h], top + n);
	cmm_barrier();
	return ms->ms_half_off[h] + top;
}

static struct sfs_mstore_index *index_at(struct sfs_mstore *ms, uint64_t off)
{
	return (struct sfs_mstore_index *)(base(ms) + off);
}

/* A new empty index of @slots in half @h, not yet published. */
static uint64_t index_new(struct sfs_mstore *ms, unsigned h, uint64_t slots)
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
	uint64_t noff = index_new(ms, ms->ms_active, slots_for(ms->ms_live));

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
	noff = index_new(ms, to, slots_for(ms->ms_live));
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

/* ---- records in the index ------------------------------------------------ */

/* The published record of (@h, @ns, @key), or NULL; *@slot its slot, or
 * where it would go. */
static struct sfs_mstore_entry *find(struct sfs_mstore *ms, uint64_t h, uint64_t ns,
				     const void *key, uint32_t klen, uint64_t *slot)
{
	struct sfs_mstore_index *ix = index_at(ms, ms->ms_index);
	uint64_t sw = 0;
	int found;

	*slot = probe(ms, ix, h, ns, key, klen, &found, &sw);
	return found ? rec(ms, sw & SLOT_OFF_MASK) : NULL;
}

/* Append a record (the caller made room): header, key, then @link (when
 * not NULL: a map record) and @value.  Not yet reachable. */
static uint64_t append(struct sfs_mstore *ms, uint64_t h, uint64_t tag, uint64_t ns,
		       uint32_t kind, const void *key, uint32_t klen,
		       const struct sfs_mstore_link *link, const void *value, uint32_t vlen)
{
	uint32_t lb = link ? LINK_BYTES : 0;
	uint64_t n = entry_size(klen, lb + vlen), off = bump(ms, ms->ms_active, n);
	struct sfs_mstore_entry *e = rec(ms, off);
	char *v;

	e->me_hash = h;
	e->me_tag = tag;
	e->me_ns = ns;
	e->me_kf = klen | kind << 24;
	e->me_vlen = lb + vlen;
	memcpy(e + 1, key, klen);
	v = (char *)(uintptr_t)entry_value(e);
	if (link)
		memcpy(v, link, LINK_BYTES);
	if (vlen)
		memcpy(v + lb, value, vlen);
	sfs_store_relaxed(&ms->ms_written, ms->ms_written + n);
	return off;
}

/* Where a probe left a key (process-local): its slot in the current index
 * and the record found there (0: the slot was free).  Saves a probe when
 * nothing moved since; checked before use. */
struct hint {
	uint64_t ix, slot, old;
};

/* Make record @off the published version of its key (replacing any other;
 * nothing when it already is).  Room for a slot was made.  Returns its slot. */
static uint64_t publish(struct sfs_mstore *ms, uint64_t off, const struct hint *hn)
{
	const struct sfs_mstore_entry *e = rec(ms, off), *old = NULL;
	struct sfs_mstore_index *ix = index_at(ms, ms->ms_index);
	uint32_t klen = entry_klen(e);
	uint64_t slot, sw;

	if (hn && hn->ix == ms->ms_index &&
	    ((sw = ix->mi_slot[hn->slot]) == SLOT_EMPTY || sw == SLOT_DELETED
		     ? !hn->old
		     : (sw & SLOT_OFF_MASK) == hn->old)) {
		slot = hn->slot;
		old = hn->old ? rec(ms, hn->old) : NULL;
	} else {
		old = find(ms, e->me_hash, e->me_ns, e + 1, klen, &slot);
	}
	if (old == e)
		return slot;
	if (!old && ix->mi_slot[slot] == SLOT_EMPTY)
		ix->mi_used++;
	sfs_store_release(&ix->mi_slot[slot], slot_word(e->me_hash, off));
	if (old) {
		sfs_store_relaxed(&ms->ms_bytes, ms->ms_bytes - entry_klen(old) - old->me_vlen);
		sfs_store_relaxed(&ms->ms_garbage,
				  ms->ms_garbage + entry_size(entry_klen(old), old->me_vlen));
	} else {
		sfs_store_relaxed(&ms->ms_live, ms->ms_live + 1);
	}
	sfs_store_relaxed(&ms->ms_bytes, ms->ms_bytes + klen + e->me_vlen);
	return slot;
}

/* Take record @off out of the index if it is its key's published version:
 * 1 if it was, 0 if not (already out, or replaced). */
static int unpublish(struct sfs_mstore *ms, uint64_t off)
{
	const struct sfs_mstore_entry *e = rec(ms, off);
	struct sfs_mstore_index *ix = index_at(ms, ms->ms_index);
	uint64_t slot;

	if (find(ms, e->me_hash, e->me_ns, e + 1, entry_klen(e), &slot) != e)
		return 0;
	/* A deleted marker, not EMPTY: later keys of the probe run stay
	 * reachable.  Readers see the key gone. */
	sfs_store_release(&ix->mi_slot[slot], SLOT_DELETED);
	sfs_store_relaxed(&ms->ms_live, ms->ms_live - 1);
	sfs_store_relaxed(&ms->ms_bytes, ms->ms_bytes - entry_klen(e) - e->me_vlen);
	sfs_store_relaxed(&ms->ms_garbage, ms->ms_garbage + entry_size(entry_klen(e), e->me_vlen));
	return 1;
}

/* ---- intents: the steps of a map write, each idempotent ----------------- */

/* New entry @off takes its place: its prev's next and its next's prev
 * point to it, and it becomes its key's published version (an older
 * version, in the same place of the list, turns garbage). */
static void redo_link(struct sfs_mstore *ms, uint64_t off, const struct hint *hn)
{
	const struct sfs_mstore_link *l = link_of(rec(ms, off));

	sfs_store_release(&link_of(rec(ms, l->ml_prev))->ml_next, off);
	sfs_fault("memory.link");
	if (l->ml_next)
		link_of(rec(ms, l->ml_next))->ml_prev = off;
	sfs_fault("memory.index");
	publish(ms, off, hn);
}

/* Entry @off leaves its list and the index; a head left without entries
 * leaves the index too. */
static void redo_unlink(struct sfs_mstore *ms, uint64_t off)
{
	const struct sfs_mstore_link *l = link_of(rec(ms, off));
	uint64_t prev = l->ml_prev, next = l->ml_next;

	sfs_store_release(&link_of(rec(ms, prev))->ml_next, next);
	sfs_fault("memory.unlink");
	if (next)
		link_of(rec(ms, next))->ml_prev = prev;
	sfs_fault("memory.index");
	unpublish(ms, off);
	if (entry_kind(rec(ms, prev)) == SFS_MSTORE_K_HEAD && !link_of(rec(ms, prev))->ml_next &&
	    unpublish(ms, prev))
		sfs_store_relaxed(&ms->ms_maps, ms->ms_maps - 1);
}

/* Head @off's entries leave the index, then the head.  The list itself is
 * left as it is: unreachable garbage that a reader on it can still walk. */
static void redo_clear(struct sfs_mstore *ms, uint64_t off)
{
	for (uint64_t at = link_of(rec(ms, off))->ml_next; at; at = link_of(rec(ms, at))->ml_next) {
		unpublish(ms, at);
		sfs_fault("memory.clear");
	}
	if (unpublish(ms, off))
		sfs_store_relaxed(&ms->ms_maps, ms->ms_maps - 1);
}

/* Finish the pending intent (@hn: where its key was found, or NULL). */
static void redo(struct sfs_mstore *ms, const struct hint *hn)
{
	uint64_t off = ms->ms_intent_rec;

	switch (ms->ms_intent) {
	case I_LINK: redo_link(ms, off, hn); break;
	case I_UNLINK: redo_unlink(ms, off); break;
	case I_CLEAR: redo_clear(ms, off); break;
	default: break;
	}
}

/* Run intent @op on record @off: operands first, then the intent, then its
 * steps, then clear it.  Compiler barriers suffice: a killed process loses
 * no store it executed, and only another process of this machine reads. */
static void intent(struct sfs_mstore *ms, uint32_t op, uint64_t off, const struct hint *hn)
{
	ms->ms_intent_rec = off;
	cmm_barrier();
	ms->ms_intent = op;
	cmm_barrier();
	sfs_fault("memory.intent");
	redo(ms, hn);
	cmm_barrier();
	ms->ms_intent = 0;
	cmm_barrier();
	sfs_fault("memory.done");
}

/* ---- open and close ------------------------------------------------------ */

int sfs_mstore_open(struct sfs_seg *s, uint32_t wk, uint64_t bytes,
		    const struct sfs_proc_slot *self, struct sfs_mstore_writer *out)
{
	char name[SFS_REGION_NAME_MAX];
	uint64_t off, size, page = 4096, noff;
	struct sfs_mstore *ms;
	int rc;

	memset(out, 0, sizeof(*out));
	out->seg = s;
	out->self = self;
	sfs_mstore_name(wk, name, sizeof(name));
	if (sfs_seg_region_find(s, name, &off, &size) == 0) {
		ms = sfs_seg_ptr(s, off);
		if (sfs_load_acquire(&ms->ms_magic) == SFS_MSTORE_MAGIC) {
			rc = check(ms, size, name);
			if (rc)
				return rc;
			out->ms = ms;
			if (ms->ms_intent) {
				/* A writer was killed inside a map write. */
				redo(ms, NULL);
				cmm_barrier();
				ms->ms_intent = 0;
				sfs_store_relaxed(&ms->ms_redone, ms->ms_redone + 1);
			}
			/* A reader may still look at the inactive half. */
			out->idle_token = sfs_qsbr_start(s->hdr);
			return 0;
		}
		/* Its creator died before publishing: initialise it now. */
	} else {
		rc = sfs_seg_region_create(s, name, bytes, SFS_ROLE_COMPACTOR, &off);
		if (rc)
			return rc;
		sfs_seg_region_find(s, name, &off, &size);
		ms = sfs_seg_ptr(s, off);
	}
	memset(ms, 0, sizeof(*ms));
	ms->ms_version = SFS_MSTORE_VERSION;
	ms->ms_worker = wk;
	ms->ms_layout = sfs_mstore_layout();
	ms->ms_size = size;
	ms->ms_half = ((size - page) / 2) & ~4095ull;
	ms->ms_half_off[0] = page;
	ms->ms_half_off[1] = page + ms->ms_half;
	noff = index_new(ms, 0, INDEX_MIN_SLOTS);
	if (!noff)
		return sfs__err(SFS_EFULL, "memory store %s: %llu bytes is too small", name,
				(unsigned long long)size);
	ms->ms_index = noff;
	out->ms = ms;
	sfs_store_release(&ms->ms_magic, SFS_MSTORE_MAGIC);
	return 0;
}

void sfs_mstore_close(struct sfs_mstore_writer *w)
{
	memset(w, 0, sizeof(*w));
}

int sfs_mstore_pending(struct sfs_mstore_writer *w)
{
	if (w->idle_token && sfs_qsbr_check(w->seg, w->self, w->idle_token, 0) == 1)
		w->idle_token = 0;
	return w->idle_token != 0;
}

/* Make room for @n more record bytes and @slots more index slots.  May
 * move everything (a semispace copy): the caller probes again after. */
static int make_room(struct sfs_mstore_writer *w, uint64_t n, unsigned slots)
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

static int full(struct sfs_mstore_writer *w, int rc)
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

/* ---- writes ----------------------------------------------------------------- */

int sfs_mstore_apply(struct sfs_mstore_writer *w, int op, unsigned mop, uint64_t h, uint64_t ns,
		     const void *key, uint32_t klen, const void *value, uint32_t vlen, uint64_t tag)
{
	struct sfs_mstore *ms = w->ms;
	const struct sfs_mstore_entry *old;
	uint64_t slot, sum = 0, off;
	int rc;

	old = find(ms, h, ns, key, klen, &slot);
	if (old && old->me_tag >= tag) {
		/* Already applied (a redone flush): idempotent. */
		sfs_store_relaxed(&ms->ms_skipped, ms->ms_skipped + 1);
		return 0;
	}
	if (old && entry_kind(old) != SFS_MSTORE_K_VALUE)
		return sfs__err(SFS_ECORRUPT, "memory store %u: a value write over a map record",
				ms->ms_worker);
	if (op == SFS_MSTORE_DELETE) {
		if (old)
			unpublish(ms, (uint64_t)((const char *)old - base(ms)));
		return 0;
	}
	if (op == SFS_MSTORE_MERGE) {
		int64_t d, b;

		if (vlen != 8 || (old && old->me_vlen != 8))
			return sfs__err(SFS_EUSAGE, "memory store %u: counter merge over a %u-byte value",
					ms->ms_worker, old ? old->me_vlen : vlen);
		memcpy(&d, value, 8);
		if (old) {
			memcpy(&b, entry_value(old), 8);
			d = sfs_merge_i64(mop, b, d);
		}
		sum = (uint64_t)d;
		value = &sum;
	}
	rc = make_room(w, entry_size(klen, vlen), 1);
	if (rc)
		return full(w, rc);
	off = append(ms, h, tag, ns, SFS_MSTORE_K_VALUE, key, klen, NULL, value, vlen);
	publish(ms, off, NULL);
	return 0;
}

static int not_map(const struct sfs_mstore *ms, const struct sfs_mstore_entry *e, uint32_t kind)
{
	return sfs__err(SFS_ECORRUPT, "memory store %u: a map write meets a record of kind %u, "
			"expected %u", ms->ms_worker, entry_kind(e), kind);
}

/* The head of (@ph, @ns, @pk): the writer's cached one when it is still
 * published in the same slot of the same index (consecutive entries of a
 * flush belong to the same map), else a probe.  NULL when absent. */
static struct sfs_mstore_entry *head_of(struct sfs_mstore_writer *w, uint64_t ph, uint64_t ns,
					const void *pk, uint32_t plen)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_entry *hd;
	uint64_t slot;

	if (w->hd_ix == ms->ms_index &&
	    (index_at(ms, ms->ms_index)->mi_slot[w->hd_slot] & SLOT_OFF_MASK) == w->hd_off) {
		hd = rec(ms, w->hd_off);
		if (hd->me_hash == ph && hd->me_ns == ns && entry_klen(hd) == plen &&
		    memcmp(hd + 1, pk, plen) == 0)
			return hd;
	}
	hd = find(ms, ph, ns, pk, plen, &slot);
	if (hd) {
		w->hd_ix = ms->ms_index;
		w->hd_slot = slot;
		w->hd_off = (uint64_t)((char *)hd - base(ms));
	}
	return hd;
}

int sfs_mstore_map_put(struct sfs_mstore_writer *w, uint64_t h, uint64_t ph, uint64_t ns,
		       const void *key, uint32_t klen, uint32_t plen, const void *value,
		       uint32_t vlen, uint64_t tag)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_entry *x, *hd;
	struct sfs_mstore_link l;
	struct hint hn;
	uint64_t hoff, off, ioff = ms->ms_index;
	int rc;

	x = find(ms, h, ns, key, klen, &hn.slot);
	if (x && x->me_tag >= tag) {
		sfs_store_relaxed(&ms->ms_skipped, ms->ms_skipped + 1);
		return 0;
	}
	rc = make_room(w, entry_size(klen, LINK_BYTES + vlen) + entry_size(plen, LINK_BYTES), 2);
	if (rc)
		return full(w, rc);
	if (ms->ms_index != ioff)	/* moved: a copy, or a bigger index */
		x = find(ms, h, ns, key, klen, &hn.slot);
	hd = head_of(w, ph, ns, key, plen);
	if (x && entry_kind(x) != SFS_MSTORE_K_ENTRY)
		return not_map(ms, x, SFS_MSTORE_K_ENTRY);
	if (hd && entry_kind(hd) != SFS_MSTORE_K_HEAD)
		return not_map(ms, hd, SFS_MSTORE_K_HEAD);
	if (x && !hd)
		return sfs__err(SFS_ECORRUPT, "memory store %u: a map entry without its head",
				ms->ms_worker);
	hn.ix = ms->ms_index;
	hn.old = x ? (uint64_t)((char *)x - base(ms)) : 0;
	if (!hd) {
		/* A new map.  A kill after this leaves an empty head, which
		 * the redone flush finds and links. */
		l = (struct sfs_mstore_link){ 0, 0 };
		hoff = append(ms, ph, tag, ns, SFS_MSTORE_K_HEAD, key, plen, &l, NULL, 0);
		w->hd_slot = publish(ms, hoff, NULL);
		w->hd_ix = ms->ms_index;
		w->hd_off = hoff;
		sfs_store_relaxed(&ms->ms_maps, ms->ms_maps + 1);
		hd = rec(ms, hoff);
		hn.ix = 0;	/* the head may have taken the entry's free slot */
		sfs_fault("memory.head");
	}
	hoff = (uint64_t)((char *)hd - base(ms));
	/* In the old version's place, or first. */
	l = x ? *link_of(x) : (struct sfs_mstore_link){ link_of(hd)->ml_next, hoff };
	off = append(ms, h, tag, ns, SFS_MSTORE_K_ENTRY, key, klen, &l, value, vlen);
	sfs_fault("memory.append");
	intent(ms, I_LINK, off, &hn);
	return 0;
}

int sfs_mstore_map_remove(struct sfs_mstore_writer *w, uint64_t h, uint64_t ns, const void *key,
			  uint32_t klen, uint64_t tag)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_entry *x;
	uint64_t slot;

	x = find(ms, h, ns, key, klen, &slot);
	if (!x)
		return 0;
	if (x->me_tag >= tag) {
		sfs_store_relaxed(&ms->ms_skipped, ms->ms_skipped + 1);
		return 0;
	}
	if (entry_kind(x) != SFS_MSTORE_K_ENTRY)
		return not_map(ms, x, SFS_MSTORE_K_ENTRY);
	intent(ms, I_UNLINK, (uint64_t)((char *)x - base(ms)), NULL);
	return 0;
}

int sfs_mstore_map_clear(struct sfs_mstore_writer *w, uint64_t ph, uint64_t ns, const void *pk,
			 uint32_t plen, uint64_t tag)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_entry *hd;
	uint64_t slot;

	hd = find(ms, ph, ns, pk, plen, &slot);
	if (!hd)
		return 0;
	if (hd->me_tag >= tag) {
		/* Made by this very flush after its clear (a redone flush). */
		sfs_store_relaxed(&ms->ms_skipped, ms->ms_skipped + 1);
		return 0;
	}
	if (entry_kind(hd) != SFS_MSTORE_K_HEAD)
		return not_map(ms, hd, SFS_MSTORE_K_HEAD);
	intent(ms, I_CLEAR, (uint64_t)((char *)hd - base(ms)), NULL);
	return 0;
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

int sfs_mstore_foreach(const struct sfs_mstore *ms,
		       int (*fn)(void *arg, const struct sfs_mstore_entry *e, const void *key,
				 const void *value),
		       void *arg)
{
	uint64_t ioff = sfs_load_acquire(&ms->ms_index);
	const struct sfs_mstore_index *ix;

	if (!ioff)
		return 0;
	ix = (const struct sfs_mstore_index *)(base(ms) + ioff);
	for (uint64_t i = 0; i < ix->mi_slots; i++) {
		uint64_t sw = sfs_load_acquire(&ix->mi_slot[i]);
		const struct sfs_mstore_entry *e;
		int rc;

		if (sw == SLOT_EMPTY || sw == SLOT_DELETED)
			continue;
		e = rec(ms, sw & SLOT_OFF_MASK);
		rc = fn(arg, e, e + 1, entry_value(e));
		if (rc)
			return rc;
	}
	return 0;
}

int sfs_mstore_freeze(struct sfs_mstore_writer *w, uint64_t id, const char *path)
{
	struct sfs_mstore *ms = w->ms;
	const struct sfs_mstore_index *ix;
	struct sfs_mstore_frozen *fz;
	uint64_t bytes, off, k = 0;
	size_t plen = strlen(path);
	int rc;

	if (ms->ms_dump_list)
		return ms->ms_dump_id == id ? 1 : SFS_ERUNNING;
	if (plen >= SFS_MSTORE_DUMP_PATH)
		return sfs__err(SFS_EUSAGE, "memory store %u: dump path of %zu bytes is too long",
				ms->ms_worker, plen);
	/* mi_used (occupied and deleted slots, counted before a slot is
	 * stored) bounds the live words even after a kill. */
	bytes = sizeof(*fz) + index_at(ms, ms->ms_index)->mi_used * 8;
	rc = make_room(w, bytes, 0);	/* may copy: no pin yet */
	if (rc)
		return full(w, rc);
	ix = index_at(ms, ms->ms_index);
	bytes = sizeof(*fz) + ix->mi_used * 8;
	if (bytes > ms->ms_half - ms->ms_top[ms->ms_active])
		return full(w, SFS_EFULL);
	off = bump(ms, ms->ms_active, bytes);
	fz = (struct sfs_mstore_frozen *)(base(ms) + off);
	for (uint64_t i = 0; i < ix->mi_slots; i++) {
		uint64_t sw = ix->mi_slot[i];

		if (sw > SLOT_DELETED)
			fz->mf_word[k++] = sw;
	}
	fz->mf_n = k;
	ms->ms_dump_id = id;
	ms->ms_dump_seq = ms->ms_applied;
	ms->ms_dump_bytes = bytes;
	ms->ms_dump_half = ms->ms_active;
	memcpy(ms->ms_dump_path, path, plen + 1);
	sfs_store_release(&ms->ms_dump_list, off);
	return 0;
}

const struct sfs_mstore_frozen *sfs_mstore_frozen(const struct sfs_mstore *ms)
{
	uint64_t off = sfs_load_acquire(&ms->ms_dump_list);

	return off ? (const struct sfs_mstore_frozen *)(base(ms) + off) : NULL;
}

int sfs_mstore_frozen_foreach(const struct sfs_mstore *ms,
			      int (*fn)(void *arg, const struct sfs_mstore_entry *e,
					const void *key, const void *value),
			      void *arg)
{
	const struct sfs_mstore_frozen *fz = sfs_mstore_frozen(ms);

	if (!fz)
		return sfs__err(SFS_EUSAGE, "memory store %u: no frozen version", ms->ms_worker);
	for (uint64_t i = 0; i < fz->mf_n; i++) {
		const struct sfs_mstore_entry *e = rec(ms, fz->mf_word[i] & SLOT_OFF_MASK);
		int rc = fn(arg, e, e + 1, entry_value(e));

		if (rc)
			return rc;
	}
	return 0;
}

void sfs_mstore_thaw(struct sfs_mstore_writer *w)
{
	struct sfs_mstore *ms = w->ms;

	if (!ms->ms_dump_list)
		return;
	sfs_store_relaxed(&ms->ms_dump_done_seq, ms->ms_dump_seq);
	sfs_store_release(&ms->ms_dump_done, ms->ms_dump_id);
	if (ms->ms_dump_half == ms->ms_active)
		sfs_store_relaxed(&ms->ms_garbage, ms->ms_garbage + ms->ms_dump_bytes);
	sfs_store_release(&ms->ms_dump_list, 0);
}

int sfs_mstore_verify(const struct sfs_mstore *ms)
{
	const struct sfs_mstore_index *ix = (const struct sfs_mstore_index *)(base(ms) + ms->ms_index);
	uint64_t entries = 0, listed = 0;
	int found;

	if (ms->ms_intent)
		return sfs__err(SFS_ECORRUPT, "memory store %u: intent %u pending", ms->ms_worker,
				ms->ms_intent);
	for (uint64_t i = 0; i < ix->mi_slots; i++) {
		uint64_t sw = ix->mi_slot[i], prev, at;
		const struct sfs_mstore_entry *hd;

		if (sw == SLOT_EMPTY || sw == SLOT_DELETED)
			continue;
		hd = rec(ms, sw & SLOT_OFF_MASK);
		if (entry_kind(hd) == SFS_MSTORE_K_ENTRY)
			entries++;
		if (entry_kind(hd) != SFS_MSTORE_K_HEAD)
			continue;
		if (!link_of(hd)->ml_next)
			return sfs__err(SFS_ECORRUPT, "memory store %u: an empty head at %llu",
					ms->ms_worker, (unsigned long long)(sw & SLOT_OFF_MASK));
		prev = sw & SLOT_OFF_MASK;
		for (at = link_of(hd)->ml_next; at; prev = at, at = link_of(rec(ms, at))->ml_next) {
			const struct sfs_mstore_entry *e = follow(ms, at);
			uint32_t pl = entry_klen(hd);
			uint64_t w = 0;

			if (!e || entry_kind(e) != SFS_MSTORE_K_ENTRY || e->me_ns != hd->me_ns ||
			    entry_klen(e) <= pl || memcmp(e + 1, hd + 1, pl) != 0)
				return sfs__err(SFS_ECORRUPT, "memory store %u: list of head %llu "
						"reaches %llu, not one of its entries", ms->ms_worker,
						(unsigned long long)(sw & SLOT_OFF_MASK),
						(unsigned long long)at);
			if (link_of(e)->ml_prev != prev)
				return sfs__err(SFS_ECORRUPT, "memory store %u: entry %llu: prev %llu, "
						"expected %llu", ms->ms_worker, (unsigned long long)at,
						(unsigned long long)link_of(e)->ml_prev,
						(unsigned long long)prev);
			probe(ms, ix, e->me_hash, e->me_ns, e + 1, entry_klen(e), &found, &w);
			if (!found || (w & SLOT_OFF_MASK) != at)
				return sfs__err(SFS_ECORRUPT, "memory store %u: listed entry %llu is "
						"not its key's version", ms->ms_worker,
						(unsigned long long)at);
			if (++listed > ix->mi_slots)
				return sfs__err(SFS_ECORRUPT, "memory store %u: a cycle",
						ms->ms_worker);
		}
	}
	if (listed != entries)
		return sfs__err(SFS_ECORRUPT, "memory store %u: %llu entries indexed, %llu listed",
				ms->ms_worker, (unsigned long long)entries,
				(unsigned long long)listed);
	return 0;
}
