/*
 * memdump_read.c — the reader of the memory store's dumps (memdump.h),
 * apart from the writer and the loader: it needs no store, so a harness
 * links it alone (tests/fuzz/fuzz_memdump.c).  The format's constants are
 * the writer's (memdump_fmt.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/keygroup.h"
#include "store/memory/memdump.h"
#include "store/memory/memdump_fmt.h"
#include "worker/wbuf.h"

int sfs_mdump_read_stream(FILE *f, const char *path,
			  int (*fn)(void *arg, const struct sfs_mdump_rec *r), void *arg,
			  uint64_t *records)
{
	char magic[8];
	uint32_t hw[2];
	uint64_t n = 0, h = SFS_HASH_P0, want_n, want_h;
	unsigned char *buf = NULL;
	size_t cap = 0;
	struct rec_hdr r;
	int rc = 0;

	if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MAGIC, 8) || fread(hw, sizeof(hw), 1, f) != 1)
		return sfs__err(SFS_ECORRUPT, "%s: not a memory-store dump (bad header)", path);
	for (;;) {
		size_t len;
		struct sfs_mdump_rec rec;

		if (fread(&r, 1, 8, f) != 8)
			goto truncated;
		if (memcmp(&r, END, 8) == 0)
			break;
		if (fread((char *)&r + 8, sizeof(r) - 8, 1, f) != 1)
			goto truncated;
		len = (size_t)r.klen + r.vlen;
		if ((r.kind != 'V' && r.kind != 'E') || r.klen < SFS_KEY_PREFIX ||
		    r.klen > SFS_WBUF_KEY_MAX || len > (64u << 20)) {
			rc = sfs__err(SFS_ECORRUPT, "%s: record %" PRIu64 " is malformed", path, n);
			goto out;
		}
		if (len > cap) {
			unsigned char *nb = realloc(buf, len);

			if (!nb) {
				rc = sfs__err(-ENOMEM, "%s: out of memory", path);
				goto out;
			}
			buf = nb;
			cap = len;
		}
		if (fread(buf, 1, len, f) != len)
			goto truncated;
		h = sfs_hash_bytes(h, &r, sizeof(r));
		h = sfs_hash_bytes(h, buf, r.klen);
		h = sfs_hash_bytes(h, buf + r.klen, r.vlen);
		n++;
		rec = (struct sfs_mdump_rec){ .kind = r.kind, .ns = r.ns, .key = buf, .klen = r.klen,
					      .val = buf + r.klen, .vlen = r.vlen };
		if (r.kind == 'E') {
			uint32_t plen = sfs_map_parent_len(buf, r.klen);

			if (!plen || plen >= r.klen) {
				rc = sfs__err(SFS_ECORRUPT, "%s: record %" PRIu64 ": a map entry key "
					      "without its parent", path, n - 1);
				goto out;
			}
			rec.plen = plen;
		}
		if ((rc = fn(arg, &rec)))
			goto out;
	}
	if (fread(&want_n, sizeof(want_n), 1, f) != 1 || fread(&want_h, sizeof(want_h), 1, f) != 1)
		goto truncated;
	if (want_n != n || want_h != h) {
		rc = sfs__err(SFS_ECORRUPT, "%s: checksum mismatch (%" PRIu64 " records read, %"
			      PRIu64 " written)", path, n, want_n);
		goto out;
	}
	if (records)
		*records = n;
	goto out;
truncated:
	rc = sfs__err(SFS_ECORRUPT, "%s: truncated after %" PRIu64 " records", path, n);
out:
	free(buf);
	return rc;
}

int sfs_mdump_read(const char *path, int (*fn)(void *arg, const struct sfs_mdump_rec *r),
		   void *arg, uint64_t *records)
{
	FILE *f = fopen(path, "r");
	int rc;

	if (!f)
		return sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	rc = sfs_mdump_read_stream(f, path, fn, arg, records);
	fclose(f);
	return rc;
}
