/*
 * mstore_freeze.c — a checkpoint's frozen version of the memory store
 * (memory.h, "Dumps of a frozen version"): the published index's live slot
 * words copied into a list in the active half and pinned, read by a dump
 * thread while newer buffers flush, and unpinned when the dump is done.
 * The dump itself: memdump.c.
 *
 * Next: memdump.c.
 */

#include <string.h>

#include "common/err.h"
#include "store/memory/mstore_int.h"

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
	rc = sfs__mstore_make_room(w, bytes, 0);	/* may copy: no pin yet */
	if (rc)
		return sfs__mstore_full(w, rc);
	ix = index_at(ms, ms->ms_index);
	bytes = sizeof(*fz) + ix->mi_used * 8;
	if (bytes > ms->ms_half - ms->ms_top[ms->ms_active])
		return sfs__mstore_full(w, SFS_EFULL);
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
