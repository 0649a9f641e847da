/*
 * wbuf_ttl.h — the TTL rule of one buffered entry as maintenance applies
 * it, shared by the compactor's flush (compactor/flush.c, ttl_drop) and
 * the table target's conversion of level-0 images (store/table/table_l0.c,
 * l0_ttl_drop), so both drop exactly the same entries.
 *
 * An expired put of a value or counter becomes a delete; an expired map or
 * list entry keeps its bytes and is flagged SFS_WBUF_EXPIRED (the target
 * applies it as removed).  Heads, removals, malformed map entries and
 * everything but puts are left alone.  @kind is the state's SFS_STATE_*,
 * @r its rule (ttl_ms > 0), @clk the worker's clocks at the buffer's seal.
 */
#ifndef SFS_WORKER_WBUF_TTL_H
#define SFS_WORKER_WBUF_TTL_H

#include "common/keygroup.h"
#include "common/ttl.h"
#include "worker/wbuf.h"

/* 1 if @v expired and was turned into a drop, else 0. */
static inline int sfs_wbuf_view_ttl_drop(struct sfs_wbuf_view *v, uint32_t kind,
					 const struct sfs_ttl_rule *r,
					 const struct sfs_ttl_clock *clk)
{
	if (v->kind != SFS_WBUF_PUT)
		return 0;
	if (kind == SFS_STATE_MAP || kind == SFS_STATE_LIST) {
		struct sfs_map_ent me;
		uint32_t plen = sfs_map_parent_len(v->key, v->klen);

		if (!plen || v->klen == plen || v->len < sizeof(me))
			return 0;	/* a head, or malformed: the target says so */
		memcpy(&me, v->value, sizeof(me));
		if ((me.me_flags & SFS_MAP_REMOVED) ||
		    !sfs_ttl_expired((const char *)v->value + sizeof(me),
				     v->len - (uint32_t)sizeof(me), sfs_ttl_now(r, clk)))
			return 0;
		v->flags |= SFS_WBUF_EXPIRED;
		return 1;
	}
	if (!sfs_ttl_expired(v->value, v->len, sfs_ttl_now(r, clk)))
		return 0;
	v->kind = SFS_WBUF_DELETE;
	v->flags = 0;
	v->value = NULL;
	v->len = 0;
	return 1;
}

#endif
