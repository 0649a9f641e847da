/*
 * mapblob.c — building map blobs (see mapblob.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "target/mapblob.h"

int sfs_blob_merge(const void *old, uint32_t oldlen, const struct sfs_blob_ent *chg, unsigned n,
		   void **out, uint32_t *outlen)
{
	uint32_t on = old ? sfs_blob_count(old, oldlen) : 0, i = 0, j = 0, cnt = 0;
	uint64_t bytes = 0;
	struct sfs_blob_ent *all;
	unsigned char *b;
	uint32_t off;

	all = malloc(sizeof(*all) * ((size_t)on + n + 1));
	if (!all)
		return -ENOMEM;
	/* Linear merge: a change replaces (or removes) an old entry. */
	while (i < on || j < n) {
		struct sfs_blob_ent o;
		int c;

		if (i < on && !sfs_blob_at(old, oldlen, i, &o)) {
			i++;	/* damaged entry: dropped */
			continue;
		}
		c = i >= on ? 1 : j >= n ? -1 : sfs_ukey_cmp(o.ukey, o.ulen, chg[j].ukey, chg[j].ulen);
		if (c < 0) {
			all[cnt++] = o;
			i++;
			continue;
		}
		if (c == 0)
			i++;
		if (chg[j].val)
			all[cnt++] = chg[j];
		j++;
	}
	if (!cnt) {
		free(all);
		*out = NULL;
		*outlen = 0;
		return 0;
	}
	bytes = 8 + 4ull * cnt;
	for (uint32_t k = 0; k < cnt; k++)
		bytes += 8ull + all[k].ulen + all[k].vlen;
	if (bytes > UINT32_MAX) {
		free(all);
		return -E2BIG;
	}
	b = malloc(bytes);
	if (!b) {
		free(all);
		return -ENOMEM;
	}
	memcpy(b, &cnt, 4);
	memset(b + 4, 0, 4);
	off = 8 + 4 * cnt;
	for (uint32_t k = 0; k < cnt; k++) {
		memcpy(b + 8 + 4 * k, &off, 4);
		memcpy(b + off, &all[k].ulen, 4);
		memcpy(b + off + 4, &all[k].vlen, 4);
		memcpy(b + off + 8, all[k].ukey, all[k].ulen);
		memcpy(b + off + 8 + all[k].ulen, all[k].val, all[k].vlen);
		off += 8 + all[k].ulen + all[k].vlen;
	}
	free(all);
	*out = b;
	*outlen = (uint32_t)bytes;
	return 0;
}
