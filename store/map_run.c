/*
 * map_run.c — a map's run in a sorted apply batch (store/target.h), walked
 * the same way by every target that keeps map entries one by one (the
 * memory and table targets).
 */
#include <stdint.h>
#include <string.h>

#include "common/err.h"
#include "store/target.h"
#include "common/keygroup.h"
#include "worker/wbuf.h"

int sfs_map_run_walk(const struct sfs_wbuf_view *v, unsigned n, const char *who,
		     const struct sfs_map_run_ops *ops, void *arg)
{
	uint32_t plen = sfs_map_parent_len(v[0].key, v[0].klen);
	unsigned run = 1, heads = 0;
	int rc;

	if (!plen)
		return sfs__err(SFS_ECORRUPT, "%s: malformed map key of %u bytes", who, v[0].klen);
	while (run < n && v[run].klen >= plen && memcmp(v[run].key, v[0].key, plen) == 0)
		run++;
	for (; heads < run && v[heads].klen == plen; heads++) {
		struct sfs_map_head hd = { 0, 0 };

		if (v[heads].len == sizeof(hd))
			memcpy(&hd, v[heads].value, sizeof(hd));
		if (hd.mh_clear_pos && (rc = ops->clear(arg, &v[heads], plen)))
			return rc;
	}
	for (unsigned i = heads; i < run; i++) {
		struct sfs_map_ent me = { 0, SFS_MAP_REMOVED };
		struct sfs_map_head hd = { 0, 0 };
		unsigned j;

		/* Its namespace's head: one, mostly (a linear look is cheapest). */
		for (j = 0; j < heads && v[j].ns != v[i].ns; j++)
			;
		if (j < heads && v[j].len == sizeof(hd))
			memcpy(&hd, v[j].value, sizeof(hd));
		if (hd.mh_clear_pos && v[i].off < hd.mh_clear_pos)
			continue;	/* written before the clear in this buffer: gone */
		if (v[i].len >= sizeof(me))
			memcpy(&me, v[i].value, sizeof(me));
		if (v[i].flags & SFS_WBUF_EXPIRED)
			me.me_flags |= SFS_MAP_REMOVED;	/* dropped at flush (common/ttl.h) */
		rc = ops->entry(arg, &v[i], plen, j < heads ? &v[j] : NULL,
				(me.me_flags & SFS_MAP_REMOVED) ? NULL
								: (const char *)v[i].value + sizeof(me),
				(me.me_flags & SFS_MAP_REMOVED) ? 0 : v[i].len - (uint32_t)sizeof(me));
		if (rc)
			return rc;
	}
	return (int)run;
}
