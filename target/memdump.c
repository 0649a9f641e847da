/*
 * memdump.c — full dumps of the memory store and their load (memdump.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/child.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/hash.h"
#include "target/memdump.h"
#include "worker/keygroup.h"
#include "worker/wbuf.h"

static const char MAGIC[8] = "SFSMDMP1", END[8] = "SFSMEND1";

struct rec_hdr {
	uint8_t kind;
	uint8_t pad[3];
	uint32_t klen, vlen, pad2;
	uint64_t ns;
};

struct dump_ctx {
	FILE *f;
	uint64_t n, h;
};

static int dump_one(void *arg, const struct sfs_mstore_entry *e, const void *key,
		    const void *value)
{
	struct dump_ctx *d = arg;
	uint32_t kind = e->me_kf >> 24;
	struct rec_hdr r;

	if (kind == SFS_MSTORE_K_HEAD)
		return 0;

	memset(&r, 0, sizeof(r));
	r.kind = kind == SFS_MSTORE_K_ENTRY ? 'E' : 'V';
	r.klen = e->me_kf & 0xffffffu;
	r.vlen = e->me_vlen;
	r.ns = e->me_ns;
	if (kind == SFS_MSTORE_K_ENTRY) {
		if (r.vlen < sizeof(struct sfs_mstore_link))
			return sfs__err(SFS_ECORRUPT, "memory store: map entry of %u bytes", r.vlen);
		value = (const char *)value + sizeof(struct sfs_mstore_link);
		r.vlen -= sizeof(struct sfs_mstore_link);
	}
	fwrite(&r, sizeof(r), 1, d->f);
	fwrite(key, 1, r.klen, d->f);
	fwrite(value, 1, r.vlen, d->f);
	d->h = sfs_hash_bytes(d->h, &r, sizeof(r));
	d->h = sfs_hash_bytes(d->h, key, r.klen);
	d->h = sfs_hash_bytes(d->h, value, r.vlen);
	if (++d->n % 4096 == 0)
		sfs_child_progress();	/* a dump grows with the state */
	return 0;
}

int sfs_mdump_write(const struct sfs_mstore *ms, uint32_t worker, const char *path,
		    uint64_t *records)
{
	char tmp[4200];
	struct dump_ctx d = { NULL, 0, SFS_HASH_P0 };
	uint32_t hw[2] = { worker, 0 };
	int rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	d.f = fopen(tmp, "w");
	if (!d.f)
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	setvbuf(d.f, NULL, _IOFBF, 1 << 20);
	fwrite(MAGIC, 1, 8, d.f);
	fwrite(hw, sizeof(hw), 1, d.f);
	rc = ms ? sfs_mstore_foreach(ms, dump_one, &d) : 0;
	fwrite(END, 1, 8, d.f);
	fwrite(&d.n, sizeof(d.n), 1, d.f);
	fwrite(&d.h, sizeof(d.h), 1, d.f);
	rc = sfs_file_commit(d.f, tmp, path, rc);
	if (!rc)
		*records = d.n;
	return rc;
}

int sfs_mdump_load(struct sfs_mstore_writer *w, const char *path, uint32_t kg_lo,
		   uint32_t kg_hi, uint64_t *records)
{
	FILE *f = fopen(path, "r");
	char magic[8];
	uint32_t hw[2];
	uint64_t n = 0, loaded = 0, h = SFS_HASH_P0, want_n, want_h;
	unsigned char *buf = NULL;
	size_t cap = 0;
	struct rec_hdr r;
	int rc = 0;

	if (!f)
		return sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MAGIC, 8) || fread(hw, sizeof(hw), 1, f) != 1) {
		fclose(f);
		return sfs__err(SFS_ECORRUPT, "%s: not a memory-store dump (bad header)", path);
	}
	for (;;) {
		size_t len;
		uint32_t kg;

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
		if (++n % 4096 == 0)
			sfs_child_progress();
		kg = sfs_key_prefix_kg(buf);
		if (kg < kg_lo || kg > kg_hi)
			continue;
		if (r.kind == 'V') {
			rc = sfs_mstore_apply(w, SFS_MSTORE_PUT, 0, sfs_wbuf_hash(r.ns, buf, r.klen),
					      r.ns, buf, r.klen, buf + r.klen, r.vlen, 0);
		} else {
			uint32_t plen = sfs_map_parent_len(buf, r.klen);

			if (!plen || plen >= r.klen) {
				rc = sfs__err(SFS_ECORRUPT, "%s: record %" PRIu64 ": a map entry key "
					      "without its parent", path, n);
				goto out;
			}
			rc = sfs_mstore_map_put(w, sfs_wbuf_hash(r.ns, buf, r.klen),
						sfs_wbuf_hash(r.ns, buf, plen), r.ns, buf, r.klen, plen,
						buf + r.klen, r.vlen, 0);
		}
		if (rc)
			goto out;
		loaded++;
	}
	if (fread(&want_n, sizeof(want_n), 1, f) != 1 || fread(&want_h, sizeof(want_h), 1, f) != 1)
		goto truncated;
	if (want_n != n || want_h != h) {
		rc = sfs__err(SFS_ECORRUPT, "%s: checksum mismatch (%" PRIu64 " records read, %"
			      PRIu64 " written)", path, n, want_n);
		goto out;
	}
	sfs_mstore_commit(w, 0);
	*records = loaded;
	goto out;
truncated:
	rc = sfs__err(SFS_ECORRUPT, "%s: truncated after %" PRIu64 " records", path, n);
out:
	free(buf);
	fclose(f);
	return rc;
}
