/*
 * fuzz_sinklog.c — libFuzzer target for the sink's per-epoch changelogs
 * (runtime/sink.c: rt_sink_read_log, the reader of `sfs run --output`'s
 * replay).  The input, less its first byte, is the changelog, read from
 * memory (fmemopen) into a result table as the replay does.  The first
 * byte picks the mode: odd = reseal first (records walked as the writer
 * lays them out, the trailer rewritten with their count and hash), so
 * mutations reach the record handling behind the trailer check; even =
 * the raw bytes.  A crash, leak or sanitizer report is a bug, and so is a
 * success that holds more rows than records were read (abort()).  An
 * error return is the expected answer to a bad file.
 *
 *   make fuzz-sinklog     (make fuzz: every target)
 *
 * Seeds: tests/fuzz/seed_sinklog.c writes changelogs with rt_sink_write_epoch.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/save.h"
#include "sfs_keygroup.h"
#include "runtime/sink.h"

#define HDR 24u   /* "SFSSINK1" u32 worker u32 0 u64 epoch */
#define REC 24u   /* u8 op, 3 pad, u32 klen, u32 rlen, u32 pad, i64 delta */

/* The records' extent, and their count and chained hash, as the writer
 * computes them: the offset of the trailer, or @n if none parses. */
static size_t walk(const uint8_t *p, size_t n, uint64_t *recs, uint64_t *h)
{
	size_t at = HDR;

	*recs = 0;
	*h = SFS_HASH_P0;
	while (at + REC <= n && memcmp(p + at, "SFSSEND1", 8)) {
		uint32_t kl, rl;

		memcpy(&kl, p + at + 4, 4);
		memcpy(&rl, p + at + 8, 4);
		if ((uint64_t)kl + rl > n - at - REC)
			return n;
		*h = sfs_hash_bytes(*h, p + at, REC);
		*h = sfs_hash_bytes(*h, p + at + REC, (size_t)kl + rl);
		++*recs;
		at += REC + kl + rl;
	}
	return at + 8 <= n ? at : n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_sink t;
	uint8_t *img;
	char *buf = NULL;
	size_t n, cap = 0;
	FILE *f;

	if (size < 2)
		return 0;
	n = size - 1;
	if (!(img = malloc(n + 24)))
		return 0;
	memcpy(img, data + 1, n);
	if ((data[0] & 1) && n >= HDR) {
		uint64_t recs, h;
		size_t end = walk(img, n, &recs, &h);

		if (end < n) {
			memcpy(img + end, "SFSSEND1", 8);
			memcpy(img + end + 8, &recs, 8);
			memcpy(img + end + 16, &h, 8);
			n = end + 24;
		}
	}
	fuzz_save(img, n);
	if (rt_sink_init(&t, RT_SINK_TABLE)) {
		free(img);
		return 0;
	}
	if ((f = fmemopen(img, n, "r"))) {
		if (rt_sink_read_log(&t, f, "w0-e1.log", &buf, &cap) == 0 &&
		    (t.used > t.changes || t.changes > n / REC))
			abort();
		fclose(f);
	}
	free(buf);
	rt_sink_free(&t);
	free(img);
	return 0;
}
