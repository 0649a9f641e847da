/*
 * mapblob.h — how the memory target stores a map: one immutable blob per
 * map key (the value of its parent key), its entries sorted by user key.
 *
 *   [u32 count][u32 0][u32 off[count]]  [u32 ulen][u32 vlen][ukey][value] ...
 *
 * Reads are a binary search (get) or a walk (iterate), lock-free like every
 * store entry.  A flush rewrites the blob of each map the buffer touched:
 * O(map size) per touched map — the heap-backend baseline's copy-on-write;
 * the table target flushes maps per entry instead.
 */
#ifndef SFS_TARGET_MAPBLOB_H
#define SFS_TARGET_MAPBLOB_H

#include <stdint.h>
#include <string.h>

struct sfs_blob_ent {
	const void *ukey;
	const void *val;
	uint32_t ulen, vlen;
};

/* memcmp order, a prefix first. */
static inline int sfs_ukey_cmp(const void *a, uint32_t al, const void *b, uint32_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

static inline uint32_t sfs_blob_count(const void *blob, uint32_t len)
{
	uint32_t n;

	if (len < 8)
		return 0;
	memcpy(&n, blob, 4);
	return n;
}

/* Entry @i of a blob (no bounds trust beyond @len: returns 0 on damage). */
static inline int sfs_blob_at(const void *blob, uint32_t len, uint32_t i, struct sfs_blob_ent *e)
{
	const unsigned char *p = blob;
	uint32_t off, n = sfs_blob_count(blob, len);

	if (i >= n || 8 + 4ull * n > len)
		return 0;
	memcpy(&off, p + 8 + 4 * i, 4);
	if ((uint64_t)off + 8 > len)
		return 0;
	memcpy(&e->ulen, p + off, 4);
	memcpy(&e->vlen, p + off + 4, 4);
	if ((uint64_t)off + 8 + e->ulen + e->vlen > len)
		return 0;
	e->ukey = p + off + 8;
	e->val = p + off + 8 + e->ulen;
	return 1;
}

/* Binary search: 1 and the entry, or 0. */
static inline int sfs_blob_find(const void *blob, uint32_t len, const void *ukey, uint32_t ulen,
				struct sfs_blob_ent *e)
{
	uint32_t lo = 0, hi = sfs_blob_count(blob, len);

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c;

		if (!sfs_blob_at(blob, len, mid, e))
			return 0;
		c = sfs_ukey_cmp(e->ukey, e->ulen, ukey, ulen);
		if (c == 0)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/*
 * sfs_blob_merge - the blob of @old (NULL: empty) with @n sorted changes
 * applied (an entry with val == NULL removes its user key), into a malloc'd
 * buffer (*@out, *@outlen; *@out NULL and 0 length when the map is empty).
 * O(old + n).  -ENOMEM on allocation failure.
 */
int sfs_blob_merge(const void *old, uint32_t oldlen, const struct sfs_blob_ent *chg, unsigned n,
		   void **out, uint32_t *outlen);

#endif
