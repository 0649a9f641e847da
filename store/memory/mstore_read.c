/*
 * mstore_read.c — reading the memory store (memory.h): a point get (one
 * probe of the published index), the prefetches a batch starts first, a
 * map's walk along its list, and the whole-store walks (foreach, and
 * verify, the tests' check of every list against the index).  Any process
 * attached to the segment, without locks: acquire loads of what the writer
 * (mstore_write.c) publishes with release stores.
 *
 * Next: mstore_write.c.
 */

#include <string.h>

#include "common/err.h"
#include "store/memory/mstore_int.h"

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
