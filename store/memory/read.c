/*
 * read.c — the memory target's worker side (store/target.h, rd): the
 * store is read in place, without locks, once the compactor created it;
 * probes batch their misses, map reads probe P|U or walk the map's list
 * (mstore_read.c).
 *
 * Next: snapshot.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/memory/memory_int.h"
#include "worker/wbuf.h"

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	struct sfs_mstore *ms;   /* NULL until the compactor created it */
	uint64_t absent_at;      /* sfs_mstore_attach_after's: regions ready at the
				  * last search that found no store */
};

int sfs__mem_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	struct sfs_target_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	r->absent_at = UINT64_MAX;	/* no search yet */
	*out = r;
	return 0;
}

/* The store is read in place: catching up only finds it once it exists. */
int sfs__mem_catch_up(struct sfs_target_reader *r)
{
	if (!r->ms)
		return sfs_mstore_attach_after(r->seg, r->worker, &r->absent_at, &r->ms);
	return 0;
}

int sfs__mem_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		   struct sfs_probe_result *res)
{
	const struct sfs_mstore *ms = r->ms;

	if (__builtin_expect(!ms, 0)) {
		sfs__mem_catch_up(r);
		if (!(ms = r->ms)) {
			memset(res, 0, n * sizeof(*res));	/* no store yet: nothing flushed */
			return 0;
		}
	}
	if (n > 1) {
		/* Overlap the misses: every key's home slot, then the record
		 * each slot names (its line came in while the others were
		 * asked for). */
		for (unsigned i = 0; i < n; i++)
			sfs_mstore_prefetch(ms, keys[i].hash);
		for (unsigned i = 0; i < n; i++)
			sfs_mstore_prefetch_rec(ms, keys[i].hash);
	}
	for (unsigned i = 0; i < n; i++) {
		struct sfs_mstore_view v;

		if (sfs_mstore_get(ms, keys[i].hash, keys[i].ns, keys[i].key, keys[i].klen, &v))
			res[i] = (struct sfs_probe_result){ 1, v.value, v.len, v.tag };
		else
			res[i] = (struct sfs_probe_result){ 0, NULL, 0, 0 };
	}
	return 0;
}

/* A point lookup of the entry's own key P|U. */
int sfs__mem_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		     const void *ukey, uint32_t ulen, struct sfs_probe_result *res)
{
	const char *pk = parent->key;
	unsigned char local[512], *k = local;
	uint32_t klen = parent->klen + ulen;
	struct sfs_mstore_view v;

	res->found = 0;
	res->value = NULL;
	res->len = 0;
	res->tag = 0;
	if (!r->ms)
		sfs__mem_catch_up(r);
	if (!r->ms)
		return 0;
	if ((const char *)ukey == pk + parent->klen) {
		k = (unsigned char *)(uintptr_t)pk;	/* P|U contiguous already (the worker's) */
	} else {
		if (klen > sizeof(local) && !(k = malloc(klen)))
			return -ENOMEM;
		memcpy(k, pk, parent->klen);
		memcpy(k + parent->klen, ukey, ulen);
	}
	res->found = sfs_mstore_get(r->ms, sfs_wbuf_hash(parent->ns, k, klen), parent->ns, k, klen,
				    &v);
	if (k != local && k != (const unsigned char *)pk)
		free(k);
	res->value = res->found ? v.value : NULL;
	res->len = res->found ? v.len : 0;
	res->tag = res->found ? v.tag : 0;
	return res->found;
}

int sfs__mem_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
		      int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				uint32_t vlen),
		      void *arg)
{
	if (!r->ms)
		sfs__mem_catch_up(r);
	if (!r->ms)
		return 0;
	return sfs_mstore_map_iter(r->ms, parent->hash, parent->ns, parent->key, parent->klen, fn,
				   arg);
}

void sfs__mem_reader_close(struct sfs_target_reader *r)
{
	free(r);
}
