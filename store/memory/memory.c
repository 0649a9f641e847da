/*
 * memory.c — the memory store (sfs_mstore_*, store/memory/memory.h has the
 * design) as a whole: its region's layout fingerprint and name, attaching
 * a reader, and the writer's life (open, which finishes an intent a killed
 * writer left, close, the grace period it waits on).  Hand-written because
 * no library offers a multi-process, RCU-published, offset-based hash
 * table (with per-map linked entries) that survives its writer's kill -9.
 *
 * The floor plan (the per-entry inline helpers and cross-file functions:
 * mstore_int.h):
 *   layout, name, attach, open, close, pending   memory.c
 *   get, prefetch, map_iter, foreach, verify     mstore_read.c    readers, lock-free
 *   apply, map_put/remove/clear (intents, redo)  mstore_write.c   the compactor's writes
 *   compact, ttl, commit (room, index growth)    mstore_compact.c the semispace copy,
 *                                                                 TTL's copies at commit
 *   freeze, frozen, frozen_foreach, thaw         mstore_freeze.c  a checkpoint's version
 *   (the dump of a store)                        memdump.c, memdump_read.c
 * The contract's adapter over all of it: target.c.
 *
 * Next: mstore_read.c.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fingerprint.h"
#include "store/memory/mstore_int.h"

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
				sfs__mstore_redo(ms, NULL);
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
	noff = sfs__mstore_index_new(ms, 0, INDEX_MIN_SLOTS);
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
