/*
 * fuzz_memdump.c — libFuzzer target for the memory target's checkpoint
 * dump (store/memory/memdump_read.c: sfs_mdump_read_stream, the reader of
 * sfs_mdump_read, the restore's load and `sfs export`).  The input, less
 * its first byte, is the dump, read from memory (fmemopen); every record
 * handed out is touched byte by byte.  The first byte picks the mode: odd
 * = reseal first (records walked as the writer lays them out, the
 * trailer rewritten with their count and hash), so mutations reach the
 * record checks behind the trailer; even = the raw bytes.  A crash, leak
 * or sanitizer report is a bug, and so is a record that breaks the
 * format's rules (abort()): a kind not 'V' or 'E', a key shorter than the
 * key-group + state prefix or longer than SFS_WBUF_KEY_MAX, a map entry
 * whose parent is not a proper prefix.  An error return is the expected
 * answer to a bad file.
 *
 *   make fuzz-memdump     (make fuzz: every target)
 *
 * Seeds: tests/fuzz/seed_memdump.c (the writer's empty dump and
 * hand-built ones: a non-empty dump needs a running memory store).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/save.h"
#include "common/keygroup.h"
#include "store/memory/memdump.h"
#include "worker/wbuf.h"

#define HDR 16u   /* "SFSMDMP1" u32 worker u32 0 */
#define REC 24u   /* u8 kind, 3 pad, u32 klen, u32 vlen, u32 pad, u64 ns */

static size_t walk(const uint8_t *p, size_t n, uint64_t *recs, uint64_t *h)
{
	size_t at = HDR;

	*recs = 0;
	*h = SFS_HASH_P0;
	while (at + REC <= n && memcmp(p + at, "SFSMEND1", 8)) {
		uint32_t kl, vl;

		memcpy(&kl, p + at + 4, 4);
		memcpy(&vl, p + at + 8, 4);
		if ((uint64_t)kl + vl > n - at - REC)
			return n;
		*h = sfs_hash_bytes(*h, p + at, REC);
		*h = sfs_hash_bytes(*h, p + at + REC, kl);
		*h = sfs_hash_bytes(*h, p + at + REC + kl, vl);
		++*recs;
		at += REC + kl + vl;
	}
	return at + 8 <= n ? at : n;
}

static int touch(void *arg, const struct sfs_mdump_rec *r)
{
	volatile uint8_t x = 0;

	if ((r->kind != 'V' && r->kind != 'E') || r->klen < SFS_KEY_PREFIX ||
	    r->klen > SFS_WBUF_KEY_MAX || (r->kind == 'E' && (!r->plen || r->plen >= r->klen)))
		abort();
	for (uint32_t i = 0; i < r->klen; i++)
		x ^= r->key[i];
	for (uint32_t i = 0; i < r->vlen; i++)
		x ^= ((const uint8_t *)r->val)[i];
	(void)sfs_key_prefix_kg(r->key);
	++*(uint64_t *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t seen = 0, recs = 0;
	uint8_t *img;
	size_t n;
	FILE *f;

	if (size < 2)
		return 0;
	n = size - 1;
	if (!(img = malloc(n + 24)))
		return 0;
	memcpy(img, data + 1, n);
	if ((data[0] & 1) && n >= HDR) {
		uint64_t h;
		size_t end = walk(img, n, &recs, &h);

		if (end < n) {
			memcpy(img + end, "SFSMEND1", 8);
			memcpy(img + end + 8, &recs, 8);
			memcpy(img + end + 16, &h, 8);
			n = end + 24;
		}
	}
	fuzz_save(img, n);
	if ((f = fmemopen(img, n, "r"))) {
		if (sfs_mdump_read_stream(f, "memdump", touch, &seen, &recs) == 0 &&
		    (recs != seen || seen > n / REC))
			abort();
		fclose(f);
	}
	free(img);
	return 0;
}
