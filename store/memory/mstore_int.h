/*
 * mstore_int.h — the memory store's private header: what the files of
 * sfs_mstore_* (memory.c, mstore_read.c, mstore_write.c, mstore_compact.c,
 * mstore_freeze.c) share, not for other modules.  The slot word and record
 * layout helpers run once per entry on every read and write path, so they
 * stay `static inline` here (each file inlines them as memory.c did); then
 * the few functions one file calls in another, by the file that has them.
 */
#ifndef SFS_STORE_MEMORY_MSTORE_INT_H
#define SFS_STORE_MEMORY_MSTORE_INT_H

#include <stdint.h>
#include <string.h>

#include "common/keycmp.h"
#include "store/memory/memory.h"


#define SLOT_EMPTY 0ull
#define SLOT_DELETED 1ull
#define SLOT_OFF_MASK ((1ull << 48) - 1)
#define INDEX_MIN_SLOTS 1024u
#define KLEN_MASK 0xffffffu
#define LINK_BYTES ((uint32_t)sizeof(struct sfs_mstore_link))

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
static inline uint64_t probe(const struct sfs_mstore *ms, const struct sfs_mstore_index *ix,
			     uint64_t h, uint64_t ns, const void *key, uint32_t klen, int *found, uint64_t *word)
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

/* Reserve @n bytes at the top of half @h: the top moves before anything is
 * written, so a crash leaves unreachable bytes, never a published record
 * that a later append overwrites.  Returns the region offset or 0 when full. */
static inline uint64_t bump(struct sfs_mstore *ms, unsigned h, uint64_t n)
{
	uint64_t top = ms->ms_top[h];

	if (n > ms->ms_half - top)
		return 0;
	sfs_store_relaxed(&ms->ms_top[h], top + n);
	cmm_barrier();
	return ms->ms_half_off[h] + top;
}

static inline struct sfs_mstore_index *index_at(struct sfs_mstore *ms, uint64_t off)
{
	return (struct sfs_mstore_index *)(base(ms) + off);
}

/* Where a probe left a key (mstore_write.c). */
struct sfs__mstore_hint;

/* memory.c's open finishes a pending intent (mstore_write.c). */
void sfs__mstore_redo(struct sfs_mstore *ms, const struct sfs__mstore_hint *hn);

/* Room and indexes (mstore_compact.c). */
uint64_t sfs__mstore_index_new(struct sfs_mstore *ms, unsigned h, uint64_t slots);
int sfs__mstore_make_room(struct sfs_mstore_writer *w, uint64_t n, unsigned slots);
int sfs__mstore_full(struct sfs_mstore_writer *w, int rc);

#endif
