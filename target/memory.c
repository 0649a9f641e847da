/*
 * memory.c — the memory flush target: see memory.h for the design.
 * Hand-written because no library offers a multi-process, RCU-published,
 * offset-based hash table that survives its writer's kill -9.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fingerprint.h"
#include "common/merge.h"
#include "target/memory.h"

#define SLOT_EMPTY 0ull
#define SLOT_DELETED 1ull
#define SLOT_OFF_MASK ((1ull << 48) - 1)
#define INDEX_MIN_SLOTS 1024u
#define GRACE_WAIT_NS (10ull * 1000000000ull)

uint64_t sfs_mstore_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	h = sfs_fp(h, sizeof(struct sfs_mstore));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_index));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_active));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_top));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_applied));
	h = sfs_fp(h, offsetof(struct sfs_mstore, ms_copies));
	h = sfs_fp(h, sizeof(struct sfs_mstore_index));
	h = sfs_fp(h, sizeof(struct sfs_mstore_entry));
	h = sfs_fp(h, offsetof(struct sfs_mstore_entry, me_vlen));
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

static inline const void *entry_value(const struct sfs_mstore_entry *e)
{
	return (const char *)(e + 1) + ((e->me_klen + 7u) & ~7u);
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
	char name[SFS_REGION_NAME_MAX];
	uint64_t off, size;
	int rc;

	sfs_mstore_name(w, name, sizeof(name));
	*out = NULL;
	if (sfs_seg_region_find(s, name, &off, &size))
		return 0;	/* nothing flushed yet: an empty store */
	rc = check(sfs_seg_ptr(s, off), size, name);
	if (rc == SFS_EMAGIC)
		return 0;	/* being created right now: still empty */
	if (rc == 0)
		*out = sfs_seg_ptr(s, off);
	return rc;
}

/* Probe @ix for (ns, key): the slot index, *found if it holds the key. */
static uint64_t probe(const struct sfs_mstore *ms, const struct sfs_mstore_index *ix, uint64_t h,
		      uint64_t ns, const void *key, uint32_t klen, int *found)
{
	uint64_t mask = ix->mi_slots - 1, i, first_free = UINT64_MAX;

	*found = 0;
	for (i = h & mask;; i = (i + 1) & mask) {
		uint64_t sw = sfs_load_acquire(&ix->mi_slot[i]);
		const struct sfs_mstore_entry *e;

		if (sw == SLOT_EMPTY)
			return first_free != UINT64_MAX ? first_free : i;
		if (sw == SLOT_DELETED) {
			if (first_free == UINT64_MAX)
				first_free = i;
			continue;
		}
		if ((sw & ~SLOT_OFF_MASK) != (h & ~SLOT_OFF_MASK))
			continue;
		e = (const struct sfs_mstore_entry *)(base(ms) + (sw & SLOT_OFF_MASK));
		if (e->me_hash == h && e->me_ns == ns && e->me_klen == klen &&
		    memcmp(e + 1, key, klen) == 0) {
			*found = 1;
			return i;
		}
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

int sfs_mstore_get(const struct sfs_mstore *ms, uint64_t h, uint64_t ns, const void *key,
		   uint32_t klen, struct sfs_mstore_view *v)
{
	uint64_t ioff = sfs_load_acquire(&ms->ms_index), i;
	const struct sfs_mstore_index *ix;
	const struct sfs_mstore_entry *e;
	int found;

	if (!ioff)
		return 0;
	ix = (const struct sfs_mstore_index *)(base(ms) + ioff);
	i = probe(ms, ix, h, ns, key, klen, &found);
	if (!found)
		return 0;
	e = (const struct sfs_mstore_entry *)(base(ms) + (sfs_load_acquire(&ix->mi_slot[i]) &
							  SLOT_OFF_MASK));
	v->value = entry_value(e);
	v->len = e->me_vlen;
	v->tag = e->me_tag;
	return 1;
}

/* ---- writer ---------------------------------------------------------------- */

/* Reserve @n bytes at the top of half @h: the top moves before anything is
 * written, so a crash leaves unreachable bytes, never a published entry that
 * a later append overwrites.  Returns the region offset or 0 when full. */
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

/* Grow the index within the active half (entries stay where they are). */
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
			index_put(nx, ((const struct sfs_mstore_entry *)(base(ms) +
									 (sw & SLOT_OFF_MASK)))->me_hash,
				  sw);
	}
	sfs_store_relaxed(&ms->ms_garbage, ms->ms_garbage + sizeof(*old) + old->mi_slots * 8);
	sfs_store_release(&ms->ms_index, noff);
	return 0;
}

/*
 * Copy every live entry into the other half with a fresh index and publish
 * it.  Waits (bounded) for the grace period that frees the other half.
 * O(live bytes).  SFS_EFULL when the live data does not fit half the region.
 */
static int compact(struct sfs_mstore_writer *w)
{
	struct sfs_mstore *ms = w->ms;
	unsigned from = ms->ms_active, to = !from;
	struct sfs_mstore_index *old = index_at(ms, ms->ms_index), *nx;
	uint64_t noff;

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
		uint64_t sw = old->mi_slot[i], off;
		const struct sfs_mstore_entry *e;
		uint64_t n;

		if (sw == SLOT_EMPTY || sw == SLOT_DELETED)
			continue;
		e = (const struct sfs_mstore_entry *)(base(ms) + (sw & SLOT_OFF_MASK));
		n = entry_size(e->me_klen, e->me_vlen);
		off = bump(ms, to, n);
		if (!off)
			return SFS_EFULL;	/* unpublished: the old half stays in use */
		memcpy(base(ms) + off, e, n);
		index_put(nx, e->me_hash, slot_word(e->me_hash, off));
	}
	sfs_store_relaxed(&ms->ms_garbage, 0);
	sfs_store_release(&ms->ms_index, noff);
	sfs_store_release(&ms->ms_active, to);
	sfs_store_relaxed(&ms->ms_copies, ms->ms_copies + 1);
	w->idle_token = sfs_qsbr_start(w->seg->hdr);
	return 0;
}

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

/* Make room for @n more entry bytes and one more slot. */
static int make_room(struct sfs_mstore_writer *w, uint64_t n)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_index *ix = index_at(ms, ms->ms_index);
	int rc;

	if (ix->mi_used + 1 > ix->mi_slots / 4 * 3) {
		/* An index of the new size, plus the entry, must fit. */
		uint64_t need = sizeof(*ix) + slots_for(ms->ms_live) * 8 + n;

		if (need > ms->ms_half - ms->ms_top[ms->ms_active]) {
			rc = compact(w);
			if (rc)
				return rc;
			ix = index_at(ms, ms->ms_index);
		}
		if (ix->mi_used + 1 > ix->mi_slots / 4 * 3) {
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

int sfs_mstore_apply(struct sfs_mstore_writer *w, int op, unsigned mop, uint64_t h, uint64_t ns,
		     const void *key, uint32_t klen, const void *value, uint32_t vlen, uint64_t tag)
{
	struct sfs_mstore *ms = w->ms;
	struct sfs_mstore_index *ix = index_at(ms, ms->ms_index);
	const struct sfs_mstore_entry *old = NULL;
	struct sfs_mstore_entry *e;
	uint64_t i, off, sum = 0, n = entry_size(klen, vlen);
	int found, rc;

	i = probe(ms, ix, h, ns, key, klen, &found);
	if (found) {
		old = (const struct sfs_mstore_entry *)(base(ms) + (ix->mi_slot[i] & SLOT_OFF_MASK));
		if (old->me_tag >= tag) {
			/* Already applied (a redone flush): idempotent. */
			sfs_store_relaxed(&ms->ms_skipped, ms->ms_skipped + 1);
			return 0;
		}
	}
	if (op == SFS_MSTORE_DELETE) {
		if (!found)
			return 0;
		/* A deleted marker, not EMPTY: later keys of the probe run
		 * must stay reachable.  Readers see the key gone. */
		sfs_store_release(&ix->mi_slot[i], SLOT_DELETED);
		sfs_store_relaxed(&ms->ms_live, ms->ms_live - 1);
		sfs_store_relaxed(&ms->ms_bytes, ms->ms_bytes - old->me_klen - old->me_vlen);
		sfs_store_relaxed(&ms->ms_garbage,
				  ms->ms_garbage + entry_size(old->me_klen, old->me_vlen));
		return 0;
	}
	if (op == SFS_MSTORE_MERGE) {
		int64_t d, base;

		if (vlen != 8 || (old && old->me_vlen != 8))
			return sfs__err(SFS_EUSAGE, "memory store %u: counter merge over a %u-byte value",
					ms->ms_worker, old ? old->me_vlen : vlen);
		memcpy(&d, value, 8);
		if (old) {
			memcpy(&base, entry_value(old), 8);
			d = sfs_merge_i64(mop, base, d);
		}
		sum = (uint64_t)d;
		value = &sum;
	}
	rc = make_room(w, n);
	if (rc)
		return rc == SFS_EFULL
			       ? sfs__err(SFS_EFULL,
					  "memory store %u: full (%llu keys, %llu bytes live, half of "
					  "%llu bytes usable)",
					  ms->ms_worker, (unsigned long long)ms->ms_live,
					  (unsigned long long)ms->ms_bytes,
					  (unsigned long long)ms->ms_size)
			       : rc;
	/* make_room may have moved everything: find the slot again. */
	ix = index_at(ms, ms->ms_index);
	i = probe(ms, ix, h, ns, key, klen, &found);
	old = found ? (const struct sfs_mstore_entry *)(base(ms) + (ix->mi_slot[i] & SLOT_OFF_MASK))
		    : NULL;
	off = bump(ms, ms->ms_active, n);
	e = (struct sfs_mstore_entry *)(base(ms) + off);
	e->me_hash = h;
	e->me_tag = tag;
	e->me_ns = ns;
	e->me_klen = klen;
	e->me_vlen = vlen;
	memcpy(e + 1, key, klen);
	memcpy((char *)entry_value(e), value, vlen);
	if (!found && ix->mi_slot[i] == SLOT_EMPTY)
		ix->mi_used++;
	sfs_store_release(&ix->mi_slot[i], slot_word(h, off));
	if (old) {
		sfs_store_relaxed(&ms->ms_bytes, ms->ms_bytes - old->me_klen - old->me_vlen);
		sfs_store_relaxed(&ms->ms_garbage,
				  ms->ms_garbage + entry_size(old->me_klen, old->me_vlen));
	} else {
		sfs_store_relaxed(&ms->ms_live, ms->ms_live + 1);
	}
	sfs_store_relaxed(&ms->ms_bytes, ms->ms_bytes + klen + vlen);
	return 0;
}

void sfs_mstore_commit(struct sfs_mstore_writer *w, uint64_t seq)
{
	sfs_store_release(&w->ms->ms_applied, seq);
	sfs_store_release(&w->ms->ms_commits, w->ms->ms_commits + 1);
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
		e = (const struct sfs_mstore_entry *)(base(ms) + (sw & SLOT_OFF_MASK));
		rc = fn(arg, e, e + 1, entry_value(e));
		if (rc)
			return rc;
	}
	return 0;
}
