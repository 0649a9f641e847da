/*
 * mstore_write.c — the compactor's writes into the memory store (memory.h):
 * a record appended to the active half and published into the index, a
 * value's put, delete or counter merge, and a map's put, remove and clear
 * as intents (each step idempotent, redone by open after a kill).  Room
 * for a write is made by mstore_compact.c.
 *
 * Next: mstore_compact.c.
 */

#include <string.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/merge.h"
#include "store/memory/mstore_int.h"

/* Intents (ms_intent): the operation whose steps a restart finishes. */
enum {
	I_LINK = 1,	/* ms_intent_rec: a new map entry whose links are set */
	I_UNLINK = 2,	/* ms_intent_rec: a map entry to take out */
	I_CLEAR = 3,	/* ms_intent_rec: a head whose map is dropped */
};

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
struct sfs__mstore_hint {
	uint64_t ix, slot, old;
};

/* Make record @off the published version of its key (replacing any other;
 * nothing when it already is).  Room for a slot was made.  Returns its slot. */
static uint64_t publish(struct sfs_mstore *ms, uint64_t off, const struct sfs__mstore_hint *hn)
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
static void redo_link(struct sfs_mstore *ms, uint64_t off, const struct sfs__mstore_hint *hn)
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
void sfs__mstore_redo(struct sfs_mstore *ms, const struct sfs__mstore_hint *hn)
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
static void intent(struct sfs_mstore *ms, uint32_t op, uint64_t off,
		   const struct sfs__mstore_hint *hn)
{
	ms->ms_intent_rec = off;
	cmm_barrier();
	ms->ms_intent = op;
	cmm_barrier();
	sfs_fault("memory.intent");
	sfs__mstore_redo(ms, hn);
	cmm_barrier();
	ms->ms_intent = 0;
	cmm_barrier();
	sfs_fault("memory.done");
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
	rc = sfs__mstore_make_room(w, entry_size(klen, vlen), 1);
	if (rc)
		return sfs__mstore_full(w, rc);
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
	struct sfs__mstore_hint hn;
	uint64_t hoff, off, ioff = ms->ms_index;
	int rc;

	x = find(ms, h, ns, key, klen, &hn.slot);
	if (x && x->me_tag >= tag) {
		sfs_store_relaxed(&ms->ms_skipped, ms->ms_skipped + 1);
		return 0;
	}
	rc = sfs__mstore_make_room(w, entry_size(klen, LINK_BYTES + vlen) + entry_size(plen, LINK_BYTES),
				   2);
	if (rc)
		return sfs__mstore_full(w, rc);
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
