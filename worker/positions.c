/*
 * positions.c — source positions across restores and rescales
 * (include/sfs_output.h, "Source positions"): an encoding of split ranges
 * in the bytes of sfs_task_sealed, and lookups over every old worker's
 * after a restore.  The task API already keeps each worker's bytes with a
 * checkpoint and hands every old worker's back after a rescale
 * (sfs_task_restored); what a program had to write by hand is the format
 * and the rule "a split resumes where the old worker that read it was",
 * whichever new worker reads it now.
 *
 * The bytes, little-endian as the host writes them (a checkpoint is read
 * back on the host that wrote it, as the group's state is):
 *   u32 magic "SFSP", u16 version 1, u16 ranges n, u32 own bytes len,
 *   u32 0, then n x {u64 first, u64 last, u64 pos}, then len bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/err.h"
#include "sfs.h"
#include "sfs_output.h"

#define POS_MAGIC 0x50534653u  /* "SFSP" */
#define POS_VERSION 1u
#define POS_HDR 16u
#define POS_RANGE 24u

_Static_assert(SFS_POSITIONS_MAX == (SFS_TASK_BYTES_MAX - POS_HDR) / POS_RANGE,
	       "the public limit is what fits the sealed bytes");

struct pos_hdr {
	uint32_t magic;
	uint16_t version, n;
	uint32_t len, zero;
};
_Static_assert(sizeof(struct pos_hdr) == POS_HDR, "header layout");
_Static_assert(sizeof(struct sfs_split_range) == POS_RANGE, "a range is three u64");

int sfs_positions_seal(sfs_task_t *t, uint64_t id, const struct sfs_split_range *r, unsigned n,
		       const void *bytes, size_t len)
{
	unsigned char buf[SFS_TASK_BYTES_MAX];
	struct pos_hdr h = { POS_MAGIC, POS_VERSION, (uint16_t)n, (uint32_t)len, 0 };
	size_t total = POS_HDR + (size_t)n * POS_RANGE + len;

	if (!t || (n && !r) || (len && !bytes))
		return sfs__err(SFS_EUSAGE, "sfs_positions_seal: NULL argument");
	if (n > SFS_POSITIONS_MAX || total > SFS_TASK_BYTES_MAX)
		return sfs__err(SFS_EUSAGE, "checkpoint %llu: %u position ranges and %zu bytes of "
				"the program's are %zu bytes, over SFS_TASK_BYTES_MAX (%u)",
				(unsigned long long)id, n, len, total, SFS_TASK_BYTES_MAX);
	for (unsigned i = 0; i < n; i++)
		if (r[i].first > r[i].last)
			return sfs__err(SFS_EUSAGE, "checkpoint %llu: position range %u has first "
					"split %llu > last %llu", (unsigned long long)id, i,
					(unsigned long long)r[i].first,
					(unsigned long long)r[i].last);
	memcpy(buf, &h, POS_HDR);
	for (unsigned i = 0; i < n; i++)
		memcpy(buf + POS_HDR + (size_t)i * POS_RANGE, &r[i], POS_RANGE);
	if (len)
		memcpy(buf + POS_HDR + (size_t)n * POS_RANGE, bytes, len);
	return sfs_task_sealed(t, id, buf, total);
}

/* Old worker @w's bytes, checked: its header (aligned copy) and ranges. */
static int load(const sfs_task_t *t, uint32_t w, struct pos_hdr *h, const unsigned char **ranges)
{
	struct sfs_view v;
	int rc;

	if ((rc = sfs_task_restored(t, w, &v)))
		return rc;
	if (v.len < POS_HDR)
		goto bad;
	memcpy(h, v.data, POS_HDR);
	if (h->magic != POS_MAGIC || h->version != POS_VERSION ||
	    (uint64_t)POS_HDR + (uint64_t)h->n * POS_RANGE + h->len != v.len)
		goto bad;
	*ranges = (const unsigned char *)v.data + POS_HDR;
	return 0;
bad:
	return sfs__err(SFS_ECORRUPT, "old worker %u: its %u sealed bytes are not positions "
			"(sealed without sfs_positions_seal?)", w, v.len);
}

static int prev_workers(const sfs_task_t *t, uint32_t *n)
{
	struct sfs_task_info in;

	sfs_task_info(t, &in);
	*n = in.prev_workers;
	if (in.start == SFS_START_FRESH)
		return sfs__err(-ENOENT, "a fresh start: no positions were saved");
	return 0;
}

int sfs_positions_span(const sfs_task_t *t, uint64_t first, uint64_t last, uint64_t *min,
		       uint64_t *max)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	uint32_t pw;
	int rc, found = 0;

	if (!t || first > last)
		return sfs__err(SFS_EUSAGE, "sfs_positions_span: NULL task or first > last");
	if ((rc = prev_workers(t, &pw)))
		return rc;
	for (uint32_t w = 0; w < pw; w++) {
		const unsigned char *p;
		struct pos_hdr h;

		if ((rc = load(t, w, &h, &p)))
			return rc;
		for (unsigned i = 0; i < h.n; i++) {
			struct sfs_split_range r;

			memcpy(&r, p + (size_t)i * POS_RANGE, POS_RANGE);
			if (r.last < first || r.first > last)
				continue;
			found = 1;
			if (r.pos < lo)
				lo = r.pos;
			if (r.pos > hi)
				hi = r.pos;
		}
	}
	if (!found)
		return sfs__err(-ENOENT, "splits %llu..%llu: no old worker saved a position",
				(unsigned long long)first, (unsigned long long)last);
	if (min)
		*min = lo;
	if (max)
		*max = hi;
	return 0;
}

int sfs_positions_find(const sfs_task_t *t, uint64_t split, uint64_t *pos)
{
	if (!pos)
		return sfs__err(SFS_EUSAGE, "sfs_positions_find: NULL argument");
	return sfs_positions_span(t, split, split, pos, NULL);
}

int sfs_positions_restored(const sfs_task_t *t, uint32_t prev_worker, struct sfs_split_range *r,
			   unsigned cap, unsigned *n)
{
	const unsigned char *p;
	struct pos_hdr h;
	int rc;

	if (!t || !n || (cap && !r))
		return sfs__err(SFS_EUSAGE, "sfs_positions_restored: NULL argument");
	if ((rc = load(t, prev_worker, &h, &p)))
		return rc;
	for (unsigned i = 0; i < h.n && i < cap; i++)
		memcpy(&r[i], p + (size_t)i * POS_RANGE, POS_RANGE);
	*n = h.n;
	return 0;
}

int sfs_positions_bytes(const sfs_task_t *t, uint32_t prev_worker, struct sfs_view *out)
{
	const unsigned char *p;
	struct pos_hdr h;
	int rc;

	if (!t || !out)
		return sfs__err(SFS_EUSAGE, "sfs_positions_bytes: NULL argument");
	if ((rc = load(t, prev_worker, &h, &p)))
		return rc;
	out->data = p + (size_t)h.n * POS_RANGE;
	out->len = h.len;
	return 0;
}
