/*
 * test_joinbatch.c — worker/joinbatch: grouping by join key (each key once,
 * in first-arrival order, its records in arrival order), flush thresholds,
 * full batches (SFS_EFULL leaves the batch intact; flush, reset, retry),
 * oversized input refused with a message, reset reuse over many cycles and
 * through generation wraps (real and forced), the callback flush, stats, a
 * randomized model test against a reference grouping, and the batch read
 * through a second mapping at another address: in one process, and in a
 * forked reader that walks while the owner adds.
 *
 * Multi-process rules (tests/helpers.h): a forked child reports only
 * through its exit code, never cr_assert, and is reaped with a timeout.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "common/err.h"
#include "worker/joinbatch.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* ---- helpers (jt_: join batch test) -------------------------------------- */

static struct sfs_jb *jt_new(uint64_t max_keys, uint64_t arena, uint64_t flush_recs,
			     uint64_t flush_bytes)
{
	struct sfs_jb_config cfg = { max_keys, flush_recs, flush_bytes };
	size_t len = sfs_jb_size(max_keys, arena);
	struct sfs_jb *jb;

	cr_assert_gt(len, 0);
	cr_assert_eq(sfs_jb_init(th_map(len), len, &cfg, &jb), 0, "%s", sfs_last_error());
	return jb;
}

static void jt_verify(const struct sfs_jb *jb)
{
	int rc = sfs_jb_verify(jb);

	cr_assert_eq(rc, 0, "verify: %s", sfs_last_error());
}

/* Record bytes of record @id: position dependent, so a record that was cut,
 * shifted or mixed with another shows. */
static void jt_fill(uint8_t *b, size_t n, uint64_t id)
{
	uint64_t s = id * 0x2545f4914f6cdd1dull + 1;

	for (size_t i = 0; i < n; i++) {
		if ((i & 7) == 0)
			s = th_rand(&s);
		b[i] = (uint8_t)(s >> (8 * (i & 7)));
	}
}

static int jt_check(const uint8_t *b, size_t n, uint64_t id)
{
	uint8_t tmp[512];

	if (n > sizeof(tmp))
		return -1;
	jt_fill(tmp, n, id);
	return memcmp(b, tmp, n) == 0 ? 0 : -1;
}

/* Add a NUL-terminated key and record. */
static int jt_add_s(struct sfs_jb *jb, const char *key, const char *rec, uint64_t seq)
{
	return sfs_jb_add(jb, key, strlen(key), rec, strlen(rec), seq);
}

/* Expected groups written as "key:rec,rec;key:rec" (records carry no seq
 * check here).  Walks the batch and compares. */
static void jt_expect(const struct sfs_jb *jb, const char *spec)
{
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	char buf[4096], *save = NULL, *grp;
	unsigned ngrp = 0;
	const void *key;
	uint32_t klen, nrec;
	int rc;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (grp = strtok_r(buf, ";", &save); grp; grp = strtok_r(NULL, ";", &save)) {
		char *colon = strchr(grp, ':'), *r, *end;
		uint32_t n = 0;

		cr_assert(colon, "bad spec %s", spec);
		*colon = 0;
		rc = sfs_jb_next_key(jb, &it, &key, &klen, &nrec);
		cr_assert_eq(rc, 0, "group %u (%s): rc %d", ngrp, grp, rc);
		cr_assert_eq(klen, strlen(grp), "group %u key length", ngrp);
		cr_assert_eq(memcmp(key, grp, klen), 0, "group %u: key %.*s, expected %s", ngrp,
			     (int)klen, (const char *)key, grp);
		/* Records split on ',' keeping empty ones: "k:a," is a then "". */
		for (r = colon + 1; r; r = end ? end + 1 : NULL) {
			const void *rec;
			uint32_t len;

			end = strchr(r, ',');
			if (end)
				*end = 0;

			cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, NULL), 0,
				     "key %s record %u missing", grp, n);
			cr_assert_eq(len, strlen(r), "key %s record %u length", grp, n);
			cr_assert_eq(memcmp(rec, r, len), 0, "key %s record %u: %.*s, expected %s",
				     grp, n, (int)len, (const char *)rec, r);
			cr_assert_eq((uintptr_t)rec % 8, 0, "records are 8-byte aligned");
			n++;
		}
		cr_assert_eq(sfs_jb_next_rec(jb, &it, NULL, NULL, NULL), -ENOENT,
			     "key %s has more than %u records", grp, n);
		cr_assert_eq(nrec, n, "key %s: nrec %u, expected %u", grp, nrec, n);
		ngrp++;
	}
	cr_assert_eq(sfs_jb_next_key(jb, &it, NULL, NULL, NULL), -ENOENT, "more than %u keys", ngrp);
	cr_assert_eq(sfs_jb_next_key(jb, &it, NULL, NULL, NULL), -ENOENT, "the end stays the end");
	cr_assert_eq(sfs_jb_keys(jb), ngrp);
}

/* ---- geometry, init, attach ---------------------------------------------- */

Test(geometry, size_and_init_refusals)
{
	struct sfs_jb_config cfg = { 100, 0, 0 };
	struct sfs_jb *jb;
	size_t len = sfs_jb_size(100, 4 * KiB);
	char *mem;

	/* 3/4 * 2^k >= 100 -> k = 8 (192 slots); 192 + 2 KiB index + arena. */
	cr_assert_eq(len, 192 + 8 * 256 + 4 * KiB);
	cr_assert_eq(sfs_jb_size(6, 1), 192 + 8 * 8 + 64, "minimum index and arena");
	cr_assert_eq(sfs_jb_size(0, 4096), 0);
	cr_assert_eq(sfs_jb_size(10, 0), 0);
	cr_assert_eq(sfs_jb_size(10, SFS_JB_SIZE_MAX), 0, "over 32 GiB");
	cr_assert_eq(sfs_jb_size(SFS_JB_KEYS_MAX + 1, 4096), 0);

	mem = th_map(len + 64);
	cr_assert_eq(sfs_jb_init(mem + 8, len, &cfg, &jb), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "aligned"), "%s", sfs_last_error());
	cr_assert_eq(sfs_jb_init(mem, len, NULL, &jb), SFS_EUSAGE);
	cfg.max_keys = 0;
	cr_assert_eq(sfs_jb_init(mem, len, &cfg, &jb), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "max_keys"), "%s", sfs_last_error());
	cfg.max_keys = 100;
	cr_assert_eq(sfs_jb_init(mem, 192 + 8 * 256 + 32, &cfg, &jb), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "too small"), "%s", sfs_last_error());
	cr_assert_eq(sfs_jb_init(mem, len, &cfg, &jb), 0, "%s", sfs_last_error());
	cr_assert_eq((void *)jb, (void *)mem);
	jt_verify(jb);
	cr_assert_eq(sfs_jb_should_flush(jb), 0, "no thresholds: never");
}

Test(geometry, attach_checks)
{
	size_t len = sfs_jb_size(50, 8 * KiB);
	struct sfs_jb *jb = jt_new(50, 8 * KiB, 0, 0), *r;
	char *copy = th_map(len);

	cr_assert_eq(jt_add_s(jb, "k", "v", 1), 0);
	cr_assert_eq(sfs_jb_attach(jb, len, &r), 0, "%s", sfs_last_error());
	cr_assert_eq(r, jb);

	memcpy(copy, jb, len);
	((struct sfs_jb *)copy)->jb_magic ^= 1;
	cr_assert_eq(sfs_jb_attach(copy, len, &r), SFS_EMAGIC);
	cr_assert(strstr(sfs_last_error(), "not a join batch"), "%s", sfs_last_error());

	memcpy(copy, jb, len);
	((struct sfs_jb *)copy)->jb_version = SFS_JB_VERSION + 1;
	cr_assert_eq(sfs_jb_attach(copy, len, &r), SFS_EVERSION);
	cr_assert(strstr(sfs_last_error(), "version"), "%s", sfs_last_error());

	memcpy(copy, jb, len);
	((struct sfs_jb *)copy)->jb_layout ^= 0x10;
	cr_assert_eq(sfs_jb_attach(copy, len, &r), SFS_ELAYOUT);
	cr_assert(strstr(sfs_last_error(), "fingerprint"), "%s", sfs_last_error());

	memcpy(copy, jb, len);
	cr_assert_eq(sfs_jb_attach(copy, len - 8, &r), SFS_EUSAGE, "mapped less than the batch");
	cr_assert(strstr(sfs_last_error(), "mapped"), "%s", sfs_last_error());

	memcpy(copy, jb, len);
	((struct sfs_jb *)copy)->jb_top = ((struct sfs_jb *)copy)->jb_size + 8;
	cr_assert_eq(sfs_jb_attach(copy, len, &r), SFS_ECORRUPT);

	memcpy(copy, jb, len);
	((struct sfs_jb *)copy)->jb_bits = 40;
	cr_assert_eq(sfs_jb_attach(copy, len, &r), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "geometry"), "%s", sfs_last_error());

	cr_assert_eq(sfs_jb_attach((char *)jb + 8, len, &r), SFS_EUSAGE, "misaligned");
	cr_assert_eq(sfs_jb_attach(jb, 100, &r), SFS_EUSAGE, "smaller than the header");
}

/* ---- grouping -------------------------------------------------------------- */

Test(grouping, each_key_once_records_in_arrival_order)
{
	struct sfs_jb *jb = jt_new(16, 8 * KiB, 0, 0);
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	const void *rec;
	uint32_t len;
	uint64_t seq;

	cr_assert_eq(jt_add_s(jb, "auction-7", "bid1", 101), 0);
	cr_assert_eq(jt_add_s(jb, "auction-3", "bid2", 102), 0);
	cr_assert_eq(jt_add_s(jb, "auction-7", "bid3", 103), 0);
	cr_assert_eq(jt_add_s(jb, "auction-9", "bid4", 104), 0);
	cr_assert_eq(jt_add_s(jb, "auction-3", "bid5", 105), 0);
	cr_assert_eq(jt_add_s(jb, "auction-7", "bid6", 106), 0);
	cr_assert_eq(jt_add_s(jb, "auction-7", "", 107), 0);  /* an empty record */
	cr_assert_eq(sfs_jb_records(jb), 7);
	cr_assert_eq(sfs_jb_keys(jb), 3);
	jt_verify(jb);
	jt_expect(jb, "auction-7:bid1,bid3,bid6,;auction-3:bid2,bid5;auction-9:bid4");

	/* Sequence numbers ride with their records. */
	cr_assert_eq(sfs_jb_next_key(jb, &it, NULL, NULL, NULL), 0);
	for (uint64_t want = 101; want <= 107; want += (want == 101 ? 2 : want == 103 ? 3 : 1)) {
		cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, &seq), 0);
		cr_assert_eq(seq, want);
	}
	cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, &seq), -ENOENT);
	cr_assert_null(rec);
	cr_assert_eq(len, 0);

	/* A walk does not consume: the batch is walked again the same way. */
	jt_expect(jb, "auction-7:bid1,bid3,bid6,;auction-3:bid2,bid5;auction-9:bid4");

	sfs_jb_reset(jb);
	jt_verify(jb);
	jt_expect(jb, "");
	cr_assert_eq(sfs_jb_records(jb), 0);
	/* After reset the same keys are new again, in the new arrival order. */
	cr_assert_eq(jt_add_s(jb, "auction-9", "x", 1), 0);
	cr_assert_eq(jt_add_s(jb, "auction-7", "y", 2), 0);
	cr_assert_eq(jt_add_s(jb, "auction-9", "z", 3), 0);
	jt_expect(jb, "auction-9:x,z;auction-7:y");
	jt_verify(jb);
}

Test(grouping, binary_and_empty_keys_and_prefixes)
{
	struct sfs_jb *jb = jt_new(200, 64 * KiB, 0, 0);
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	uint8_t k8[8];
	const void *key;
	uint32_t klen, nrec;

	/* A key and its prefixes, keys that differ in one byte. */
	cr_assert_eq(sfs_jb_add(jb, "ab", 2, "p1", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, "abc", 3, "p2", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, "a", 1, "p3", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, "abd", 3, "p4", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, "ab", 2, "p5", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, "abc", 3, NULL, 0, 0), 0);
	jt_expect(jb, "ab:p1,p5;abc:p2,;a:p3;abd:p4");
	jt_verify(jb);
	sfs_jb_reset(jb);

	/* The empty key (NULL or not), with 8-byte binary ids around it. */
	cr_assert_eq(sfs_jb_add(jb, NULL, 0, "e1", 2, 0), 0);
	for (uint64_t id = 0; id < 150; id++) {
		memcpy(k8, &id, 8);
		cr_assert_eq(sfs_jb_add(jb, k8, 8, &id, 8, id), 0);
	}
	cr_assert_eq(sfs_jb_add(jb, "", 0, "e2", 2, 0), 0);
	for (uint64_t id = 0; id < 150; id++) {
		memcpy(k8, &id, 8);
		cr_assert_eq(sfs_jb_add(jb, k8, 8, &id, 8, id + 1000), 0);
	}
	jt_verify(jb);
	cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), 0);
	cr_assert_eq(klen, 0);
	cr_assert_eq(nrec, 2);
	for (uint64_t id = 0; id < 150; id++) {
		const void *rec;
		uint64_t seq, v;
		uint32_t len;

		cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), 0);
		cr_assert_eq(klen, 8);
		memcpy(&v, key, 8);
		cr_assert_eq(v, id);
		cr_assert_eq(nrec, 2);
		for (int j = 0; j < 2; j++) {
			cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, &seq), 0);
			cr_assert_eq(len, 8);
			cr_assert_eq(seq, id + 1000 * (uint64_t)j);
			memcpy(&v, rec, 8);
			cr_assert_eq(v, id);
		}
	}
	cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), -ENOENT);
}

/* Two keys with the same home slot and the same 16-bit tag: only the key
 * bytes tell them apart, and they must stay two groups. */
Test(grouping, keys_sharing_slot_and_tag_stay_apart)
{
	struct sfs_jb *jb = jt_new(6, 4096, 0, 0);  /* 8 slots: home = hash & 7 */
	static uint64_t first[1u << 19];            /* (tag, home) -> id + 1 */
	uint64_t a = 0, b = 0;

	for (uint64_t id = 0; id < 100000 && !b; id++) {
		uint64_t h = sfs_jb_hash(&id, 8), sig = (h >> 48) << 3 | (h & 7);

		if (first[sig])
			a = first[sig] - 1, b = id;
		else
			first[sig] = id + 1;
	}
	cr_assert_neq(b, 0, "no (tag, slot) collision among 100000 ids");
	cr_assert_eq(sfs_jb_add(jb, &a, 8, "a1", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, &b, 8, "b1", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, &b, 8, "b2", 2, 0), 0);
	cr_assert_eq(sfs_jb_add(jb, &a, 8, "a2", 2, 0), 0);
	cr_assert_eq(sfs_jb_keys(jb), 2);
	jt_verify(jb);
	{
		struct sfs_jb_iter it = SFS_JB_ITER_INIT;
		const void *key, *rec;
		uint32_t klen, nrec, len;

		cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), 0);
		cr_assert(klen == 8 && memcmp(key, &a, 8) == 0 && nrec == 2);
		cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, NULL), 0);
		cr_assert_eq(memcmp(rec, "a1", 2), 0);
		cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, NULL), 0);
		cr_assert_eq(memcmp(rec, "a2", 2), 0);
		cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), 0);
		cr_assert(klen == 8 && memcmp(key, &b, 8) == 0 && nrec == 2);
		cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, NULL), 0);
		cr_assert_eq(memcmp(rec, "b1", 2), 0);
	}
}

/* ---- callback flush and stats ----------------------------------------------- */

struct cb_log {
	char text[1024];
	int stop_at;  /* stop (return 7) at this key, -1 never */
	int calls;
};

static int cb_collect(void *arg, const struct sfs_jb *jb, struct sfs_jb_iter *it,
		      const void *key, uint32_t klen, uint32_t nrec)
{
	struct cb_log *log = arg;
	const void *rec;
	uint32_t len;
	size_t n = strlen(log->text);

	if (log->calls++ == log->stop_at)
		return 7;
	n += snprintf(log->text + n, sizeof(log->text) - n, "%.*s/%u:", (int)klen,
		      (const char *)key, nrec);
	while (sfs_jb_next_rec(jb, it, &rec, &len, NULL) == 0)
		n += snprintf(log->text + n, sizeof(log->text) - n, "%.*s,", (int)len,
			      (const char *)rec);
	snprintf(log->text + n, sizeof(log->text) - n, ";");
	return 0;
}

Test(flush, callback_flush_resets_and_a_stop_keeps_the_batch)
{
	struct sfs_jb *jb = jt_new(16, 8 * KiB, 0, 0);
	struct cb_log log = { .stop_at = 1 };
	struct sfs_jb_stats st;

	cr_assert_eq(jt_add_s(jb, "p1", "a", 1), 0);
	cr_assert_eq(jt_add_s(jb, "p2", "b", 2), 0);
	cr_assert_eq(jt_add_s(jb, "p1", "c", 3), 0);

	/* The callback stops at the second key: its code comes back and the
	 * batch is kept whole. */
	cr_assert_eq(sfs_jb_flush(jb, cb_collect, &log), 7);
	cr_assert_str_eq(log.text, "p1/2:a,c,;");
	cr_assert_eq(sfs_jb_records(jb), 3);
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.flushes, 0);

	log = (struct cb_log){ .stop_at = -1 };
	cr_assert_eq(sfs_jb_flush(jb, cb_collect, &log), 0);
	cr_assert_str_eq(log.text, "p1/2:a,c,;p2/1:b,;");
	cr_assert_eq(sfs_jb_records(jb), 0);
	cr_assert_eq(sfs_jb_keys(jb), 0);

	/* An empty flush calls nothing and is no flush in the stats. */
	log = (struct cb_log){ .stop_at = -1 };
	cr_assert_eq(sfs_jb_flush(jb, cb_collect, &log), 0);
	cr_assert_eq(log.calls, 0);
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.flushes, 1);
	cr_assert_eq(st.resets, 2);
	cr_assert_eq(sfs_jb_flush(jb, NULL, NULL), SFS_EUSAGE);
}

Test(flush, stats_count_records_keys_bytes_and_averages)
{
	struct sfs_jb *jb = jt_new(64, 64 * KiB, 0, 0);
	struct sfs_jb_stats st;
	uint8_t rec[100] = { 0 };

	/* 10 keys x 4 records of 100 B, 8-byte keys. */
	for (int r = 0; r < 4; r++)
		for (uint64_t k = 0; k < 10; k++)
			cr_assert_eq(sfs_jb_add(jb, &k, 8, rec, sizeof(rec), 0), 0);
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.records, 40);
	cr_assert_eq(st.keys, 10);
	cr_assert_eq(st.payload, 4000);
	/* Per record 16 B + 100 padded to 104; per key 32 + 8. */
	cr_assert_eq(st.bytes_used, 40 * (16 + 104) + 10 * (32 + 8));
	cr_assert_float_eq(st.recs_per_key, 4.0, 1e-9);
	cr_assert_eq(st.slots, 128);
	cr_assert_eq(st.max_keys, 64);
	cr_assert_eq(st.gen, 1);
	sfs_jb_reset(jb);

	/* Second batch: 20 keys x 1 record. */
	for (uint64_t k = 0; k < 20; k++)
		cr_assert_eq(sfs_jb_add(jb, &k, 8, rec, 10, 0), 0);
	sfs_jb_reset(jb);
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.records, 0);
	cr_assert_eq(st.bytes_used, 0);
	cr_assert_eq(st.flushes, 2);
	cr_assert_eq(st.flushed_recs, 60);
	cr_assert_eq(st.flushed_keys, 30);
	cr_assert_eq(st.flushed_bytes, 4200);
	cr_assert_float_eq(st.flushed_recs_per_key, 2.0, 1e-9);
	cr_assert_eq(st.gen, 3);
}

/* ---- thresholds -------------------------------------------------------------- */

Test(threshold, records_threshold_triggers_should_flush)
{
	struct sfs_jb *jb = jt_new(16, 64 * KiB, 10, 0);

	for (int cycle = 0; cycle < 3; cycle++) {
		for (int i = 0; i < 10; i++) {
			cr_assert_eq(sfs_jb_should_flush(jb), 0, "cycle %d after %d records", cycle, i);
			cr_assert_eq(sfs_jb_add(jb, "k", 1, &i, sizeof(i), (uint64_t)i), 0);
		}
		cr_assert_eq(sfs_jb_should_flush(jb), 1, "10 records reached");
		/* Adding past the threshold is allowed (the operator decides when). */
		cr_assert_eq(jt_add_s(jb, "other", "x", 0), 0);
		cr_assert_eq(sfs_jb_should_flush(jb), 1);
		sfs_jb_reset(jb);
	}
}

Test(threshold, bytes_threshold_triggers_should_flush)
{
	struct sfs_jb *jb = jt_new(16, 64 * KiB, 0, 1000);
	uint8_t rec[100] = { 0 };
	uint64_t used = 0;
	int n = 0;

	/* First record costs 32 + 8 (key) + 16 + 104; later ones 120. */
	while (!sfs_jb_should_flush(jb)) {
		cr_assert_eq(sfs_jb_add(jb, "key-abc", 7, rec, sizeof(rec), 0), 0);
		used += n ? 120 : 160;
		n++;
		cr_assert_eq(sfs_jb_should_flush(jb), used >= 1000, "after %d records (%" PRIu64 " B)",
			     n, used);
	}
	cr_assert_eq(n, 8, "160 + 7 x 120 = 1000");
	sfs_jb_reset(jb);
	cr_assert_eq(sfs_jb_should_flush(jb), 0);

	/* Both thresholds: whichever comes first. */
	jb = jt_new(16, 64 * KiB, 3, 100000);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(jt_add_s(jb, "k", "r", 0), 0);
	cr_assert_eq(sfs_jb_should_flush(jb), 1);
}

/* ---- full, oversized --------------------------------------------------------- */

/* Everything a walk sees, as a string (records as len:first byte). */
static void jt_snapshot(const struct sfs_jb *jb, char *out, size_t cap)
{
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	const void *key, *rec;
	uint32_t klen, nrec, len;
	uint64_t seq;
	size_t n = 0;

	out[0] = 0;
	while (sfs_jb_next_key(jb, &it, &key, &klen, &nrec) == 0) {
		n += snprintf(out + n, cap - n, "[%.*s %u]", (int)klen, key ? (const char *)key : "", nrec);
		while (sfs_jb_next_rec(jb, &it, &rec, &len, &seq) == 0)
			n += snprintf(out + n, cap - n, "%u/%" PRIu64 ",", len, seq);
		cr_assert_lt(n, cap);
	}
}

Test(full, arena_full_leaves_the_batch_intact_then_flush_and_retry)
{
	struct sfs_jb *jb = jt_new(6, 1024, 0, 0);
	struct sfs_jb_stats before = { 0 }, after;
	char snap1[8192], snap2[8192], key[24];
	uint8_t rec[64];
	int rc = 0, n = 0, cycles = 0;

	memset(rec, 0xab, sizeof(rec));
	for (int total = 0; cycles < 20; total++) {
		snprintf(key, sizeof(key), "k%d", total % 4);
		rc = sfs_jb_add(jb, key, strlen(key), rec, (size_t)(total % 60), (uint64_t)total);
		if (rc == SFS_EFULL) {
			/* Refused: nothing changed. */
			jt_verify(jb);
			sfs_jb_stats(jb, &after);
			cr_assert_eq(after.records, (uint64_t)n);
			cr_assert_eq(after.bytes_used, before.bytes_used);
			cr_assert_eq(after.keys, before.keys);
			jt_snapshot(jb, snap2, sizeof(snap2));
			cr_assert_str_eq(snap1, snap2);
			cr_assert(strstr(sfs_last_error(), "arena full"), "%s", sfs_last_error());
			/* Flush + reset, and the retry fits. */
			sfs_jb_reset(jb);
			rc = sfs_jb_add(jb, key, strlen(key), rec, (size_t)(total % 60), (uint64_t)total);
			cr_assert_eq(rc, 0, "retry after reset: %s", sfs_last_error());
			n = 0;
			cycles++;
		}
		cr_assert_eq(rc, 0, "%s", sfs_last_error());
		n++;
		jt_snapshot(jb, snap1, sizeof(snap1));
		sfs_jb_stats(jb, &before);
		cr_assert_eq(before.records, (uint64_t)n);
	}
	sfs_jb_stats(jb, &after);
	cr_assert_eq(after.full, 20);
	cr_assert_eq(after.flushes, 20);
}

Test(full, index_full_refuses_new_keys_only)
{
	struct sfs_jb *jb = jt_new(6, 64 * KiB, 0, 0);
	char key[24];

	for (int i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(jt_add_s(jb, key, "r", (uint64_t)i), 0);
	}
	cr_assert_eq(jt_add_s(jb, "k6", "r", 6), SFS_EFULL);
	cr_assert(strstr(sfs_last_error(), "distinct keys"), "%s", sfs_last_error());
	cr_assert_eq(sfs_jb_keys(jb), 6);
	cr_assert_eq(sfs_jb_records(jb), 6);
	jt_verify(jb);
	/* Known keys still take records. */
	cr_assert_eq(jt_add_s(jb, "k3", "s", 7), 0);
	jt_expect(jb, "k0:r;k1:r;k2:r;k3:r,s;k4:r;k5:r");
	sfs_jb_reset(jb);
	cr_assert_eq(jt_add_s(jb, "k6", "r", 6), 0);
	jt_expect(jb, "k6:r");
	jt_verify(jb);
}

Test(oversized, refused_with_a_message_batch_unchanged)
{
	struct sfs_jb *jb = jt_new(6, 1024, 0, 0);
	struct sfs_jb_stats st;
	static uint8_t big[2 * SFS_JB_KEY_MAX];
	char snap1[1024], snap2[1024];

	cr_assert_eq(jt_add_s(jb, "k", "before", 1), 0);
	jt_snapshot(jb, snap1, sizeof(snap1));

	/* Over the format's record limit (never read: refused first). */
	cr_assert_eq(sfs_jb_add(jb, "k", 1, big, (size_t)SFS_JB_REC_MAX + 1, 0), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "record of 16777217 bytes is over the limit"), "%s",
		  sfs_last_error());
	/* Over the key limit. */
	cr_assert_eq(sfs_jb_add(jb, big, SFS_JB_KEY_MAX + 1, "r", 1, 0), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "join key of 65537 bytes"), "%s", sfs_last_error());
	/* Within the limits but bigger than this batch's arena: EUSAGE, not
	 * EFULL (a flush would never make room), for a known key too. */
	cr_assert_eq(sfs_jb_add(jb, "k", 1, big, 2000, 0), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "too big for this batch"), "%s", sfs_last_error());
	cr_assert_eq(sfs_jb_add(jb, "new", 3, big, 990, 0), SFS_EUSAGE,
		     "key 40 + record 1008 > arena 1024");
	cr_assert_eq(sfs_jb_add(jb, big, 1000, "r", 1, 0), SFS_EUSAGE, "a key too big for the arena");
	/* NULL with a length. */
	cr_assert_eq(sfs_jb_add(jb, "k", 1, NULL, 5, 0), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "NULL record"), "%s", sfs_last_error());

	jt_snapshot(jb, snap2, sizeof(snap2));
	cr_assert_str_eq(snap1, snap2);
	jt_verify(jb);
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.refused, 6);
	cr_assert_eq(st.full, 0);

	/* The biggest record that does fit an empty batch: 1024 - 40 - 16. */
	sfs_jb_reset(jb);
	cr_assert_eq(sfs_jb_add(jb, "k", 1, big, 968, 0), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_jb_add(jb, "k", 1, big, 1, 0), SFS_EFULL, "and it fills it");
	jt_verify(jb);
}

/* ---- reset reuse and generations ---------------------------------------------- */

/* Many resets on a tiny index: the generation wraps twice for real, and
 * every cycle's grouping is exact with no key of an earlier life seen. */
Test(reset, many_cycles_through_real_generation_wraps, .timeout = 30)
{
	struct sfs_jb *jb = jt_new(6, 4096, 0, 0);
	struct sfs_jb_stats st;
	uint64_t s = 7;
	const uint32_t cycles = 2 * SFS_JB_GEN_MAX + 1000;

	for (uint32_t c = 0; c < cycles; c++) {
		struct sfs_jb_iter it = SFS_JB_ITER_INIT;
		unsigned nk = 1 + (unsigned)(th_rand(&s) % 6), base = (unsigned)(th_rand(&s) % 16);
		const void *key, *rec;
		uint32_t klen, nrec, len;
		uint64_t seq;

		/* Keys base..base+nk-1, each with (k % 3) + 1 records, added
		 * round-robin: key order is base.., record order by round. */
		for (unsigned round = 0; round < 3; round++)
			for (unsigned k = 0; k < nk; k++) {
				uint32_t kv = base + k;

				if (round <= kv % 3)
					cr_assert_eq(sfs_jb_add(jb, &kv, 4, &c, 4, round), 0,
						     "cycle %u: %s", c, sfs_last_error());
			}
		if (c % 997 == 0 || c + 3 >= cycles || (c % SFS_JB_GEN_MAX) < 3)
			jt_verify(jb);
		for (unsigned k = 0; k < nk; k++) {
			uint32_t kv;

			cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), 0);
			memcpy(&kv, key, 4);
			cr_assert_eq(kv, base + k, "cycle %u key %u", c, k);
			cr_assert_eq(nrec, kv % 3 + 1, "cycle %u key %u", c, kv);
			for (uint32_t r = 0; r < nrec; r++) {
				uint32_t cv;

				cr_assert_eq(sfs_jb_next_rec(jb, &it, &rec, &len, &seq), 0);
				memcpy(&cv, rec, 4);
				cr_assert(len == 4 && seq == r && cv == c, "cycle %u", c);
			}
		}
		cr_assert_eq(sfs_jb_next_key(jb, &it, &key, &klen, &nrec), -ENOENT);
		sfs_jb_reset(jb);
		sfs_jb_stats(jb, &st);
		cr_assert_eq(st.gen, (c + 1) % SFS_JB_GEN_MAX + 1, "cycle %u", c);
	}
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.resets, cycles);
	cr_assert_eq(st.flushes, cycles);
}

/* A slot written in generation 1 and never again must not look occupied
 * when the generation comes back to 1 after a wrap. */
Test(reset, forced_generation_wrap_clears_stale_slots)
{
	struct sfs_jb *jb = jt_new(48, 16 * KiB, 0, 0);
	struct sfs_jb_stats st;
	char key[24];

	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "old%d", i);
		cr_assert_eq(jt_add_s(jb, key, "gen1", 0), 0);
	}
	jt_verify(jb);
	sfs_jb_reset(jb);

	/* Pretend 65532 more lives went by without touching those slots. */
	sfs__jb_set_gen(jb, SFS_JB_GEN_MAX - 1);
	cr_assert_eq(jt_add_s(jb, "b", "x", 0), 0);
	sfs_jb_reset(jb);
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.gen, SFS_JB_GEN_MAX);
	cr_assert_eq(jt_add_s(jb, "c", "y", 0), 0);
	jt_verify(jb);
	sfs_jb_reset(jb);  /* wraps: the index is cleared */
	sfs_jb_stats(jb, &st);
	cr_assert_eq(st.gen, 1);

	/* Without the clear, old0..old39 would be found here, pointing at
	 * arena bytes of other lives, and verify would count stale slots. */
	jt_verify(jb);
	cr_assert_eq(jt_add_s(jb, "old5", "new", 0), 0);
	cr_assert_eq(jt_add_s(jb, "zz", "z", 0), 0);
	cr_assert_eq(jt_add_s(jb, "old5", "new2", 0), 0);
	jt_expect(jb, "old5:new,new2;zz:z");
	jt_verify(jb);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "old%d", i);
		cr_assert_eq(jt_add_s(jb, key, "again", 0), 0);
	}
	cr_assert_eq(sfs_jb_keys(jb), 41);
	jt_verify(jb);
}

/* ---- randomized model test ------------------------------------------------------ */

enum { MD_POOL = 3000, MD_MAXREC = 400 };

struct md_key {
	uint8_t bytes[96];
	uint32_t len;
};

struct md_rec {
	uint64_t id;   /* content seed and seq */
	uint32_t len;
	uint32_t next; /* next record of the group in the model, index + 1 */
};

struct md_group {
	uint32_t pool;        /* key in the pool */
	uint32_t nrec;
	uint32_t head, tail;  /* record indexes + 1 */
};

struct model {
	struct md_key pool[MD_POOL];
	uint32_t grp_of[MD_POOL];  /* group index + 1 in the current batch, valid if stamp matches */
	uint32_t stamp[MD_POOL];
	uint32_t batch;            /* current stamp */
	struct md_group *grp;
	uint32_t ngrp;
	struct md_rec *rec;
	uint32_t nrec;
};

static void md_add(struct model *m, uint32_t pool, uint64_t id, uint32_t len)
{
	struct md_group *g;

	if (m->stamp[pool] != m->batch) {
		m->stamp[pool] = m->batch;
		m->grp_of[pool] = ++m->ngrp;
		m->grp[m->ngrp - 1] = (struct md_group){ .pool = pool };
	}
	g = &m->grp[m->grp_of[pool] - 1];
	m->rec[m->nrec] = (struct md_rec){ .id = id, .len = len };
	if (g->tail)
		m->rec[g->tail - 1].next = m->nrec + 1;
	else
		g->head = m->nrec + 1;
	g->tail = m->nrec + 1;
	g->nrec++;
	m->nrec++;
}

/* Walk the batch (through @view, possibly another mapping) and compare it
 * with the model's current batch. */
static void md_compare(const struct model *m, const struct sfs_jb *view)
{
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	const void *key, *rec;
	uint32_t klen, nrec, len;
	uint64_t seq;

	for (uint32_t gi = 0; gi < m->ngrp; gi++) {
		const struct md_group *g = &m->grp[gi];
		const struct md_key *k = &m->pool[g->pool];
		uint32_t r = g->head;

		cr_assert_eq(sfs_jb_next_key(view, &it, &key, &klen, &nrec), 0, "group %u", gi);
		cr_assert(klen == k->len && memcmp(key, k->bytes, klen) == 0,
			  "batch %u group %u: wrong key", m->batch, gi);
		cr_assert_eq(nrec, g->nrec, "batch %u group %u", m->batch, gi);
		while (r) {
			const struct md_rec *mr = &m->rec[r - 1];

			cr_assert_eq(sfs_jb_next_rec(view, &it, &rec, &len, &seq), 0);
			cr_assert_eq(seq, mr->id, "batch %u group %u: record order", m->batch, gi);
			cr_assert_eq(len, mr->len);
			cr_assert_eq(jt_check(rec, len, mr->id), 0, "record %" PRIu64 " bytes", mr->id);
			r = mr->next;
		}
		cr_assert_eq(sfs_jb_next_rec(view, &it, &rec, &len, &seq), -ENOENT);
	}
	cr_assert_eq(sfs_jb_next_key(view, &it, &key, &klen, &nrec), -ENOENT,
		     "batch %u: more keys than %u", m->batch, m->ngrp);
}

static void md_reset(struct model *m)
{
	m->batch++;
	m->ngrp = 0;
	m->nrec = 0;
}

/* Pick a pool key: hot keys (the first 20) half of the time, else uniform:
 * the skew of Nexmark's hot auctions and sellers. */
static uint32_t md_pick(uint64_t *s)
{
	uint64_t r = th_rand(s);

	return (r & 1) ? (uint32_t)((r >> 1) % 20) : (uint32_t)((r >> 1) % MD_POOL);
}

static uint32_t md_len(uint64_t *s)
{
	uint64_t r = th_rand(s);

	switch (r % 8) {
	case 0: return 0;
	case 1: return (uint32_t)((r >> 8) % MD_MAXREC);
	default: return (uint32_t)((r >> 8) % 130);
	}
}

Test(model, random_records_match_a_reference_grouping, .timeout = 60)
{
	const uint64_t max_keys = 400, arena = 96 * KiB;
	const size_t len = sfs_jb_size(max_keys, arena);
	struct sfs_jb_config cfg = { max_keys, 1500, 80 * KiB };
	int fd = memfd_create("sfs-test-jb-model", MFD_CLOEXEC);
	struct model *m = calloc(1, sizeof(*m));
	struct sfs_jb *jb, *view;
	struct sfs_jb_stats st;
	uint8_t buf[MD_MAXREC];
	uint64_t s = 0x5eed, id = 0, nfull_arena = 0, nfull_index = 0, nthresh = 0, nbarrier = 0;
	uint64_t nflush = 0, stride = 1;
	static const uint64_t strides[6] = { 1, 1, 1, 64, 700, 100000 };
	uint64_t want_recs = 0, want_keys = 0;
	const char *env = getenv("SFS_JB_SEED");
	uint64_t seed0;
	char *a, *c;

	if (env)
		s = strtoull(env, NULL, 0);
	seed0 = s;
	cr_assert(m);
	m->grp = calloc(200000, sizeof(*m->grp));
	m->rec = calloc(200000, sizeof(*m->rec));
	m->batch = 1;
	cr_assert(m->grp && m->rec);
	/* Keys start with their pool index (so all differ): mostly 8-byte
	 * ids, some longer keys up to 96 bytes, and one empty key. */
	for (uint32_t i = 0; i < MD_POOL; i++) {
		uint64_t r = th_rand(&s);

		m->pool[i].len = r % 4 == 0 ? 9 + (uint32_t)((r >> 8) % 87) : 8;
		for (uint32_t j = 0; j < m->pool[i].len; j++)
			m->pool[i].bytes[j] = (uint8_t)th_rand(&s);
		memcpy(m->pool[i].bytes, &i, 4);
	}
	m->pool[3].len = 0;  /* a hot one */

	/* The owner writes through one mapping; every flush is checked
	 * through a second mapping of the same memfd at another address. */
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	c = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert(a != MAP_FAILED && c != MAP_FAILED && a != c);
	cr_assert_eq(sfs_jb_init(a, len, &cfg, &jb), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_jb_attach(c, len, &view), 0, "%s", sfs_last_error());

	/* The operator asks should_flush every @stride records (once per
	 * input batch of its own): small strides flush at the thresholds,
	 * big ones run into a full arena or a full index. */
	for (int op = 0; op < 600000; op++) {
		uint32_t pool = md_pick(&s), rl = md_len(&s);
		int rc;

		jt_fill(buf, rl, id);
		rc = sfs_jb_add(jb, m->pool[pool].bytes, m->pool[pool].len, buf, rl, id);
		if (rc == SFS_EFULL) {
			if (strstr(sfs_last_error(), "distinct keys"))
				nfull_index++;
			else
				nfull_arena++;
			jt_verify(jb);
			md_compare(m, view);
			want_recs += m->nrec, want_keys += m->ngrp, nflush++;
			sfs_jb_reset(jb);
			md_reset(m);
			stride = strides[th_rand(&s) % 6];
			rc = sfs_jb_add(jb, m->pool[pool].bytes, m->pool[pool].len, buf, rl, id);
			cr_assert_eq(rc, 0, "retry after a flush: %s", sfs_last_error());
		}
		cr_assert_eq(rc, 0, "op %d: %s", op, sfs_last_error());
		md_add(m, pool, id, rl);
		id++;
		if ((m->nrec % stride == 0 && sfs_jb_should_flush(jb)) || th_rand(&s) % 2000 == 0) {
			/* A threshold, or now and then a barrier (a flush of
			 * whatever is there, however little). */
			if (sfs_jb_should_flush(jb))
				nthresh++;
			else
				nbarrier++;
			if (nflush % 16 == 0)
				jt_verify(jb);
			md_compare(m, view);
			want_recs += m->nrec, want_keys += m->ngrp, nflush++;
			sfs_jb_reset(jb);
			md_reset(m);
			stride = strides[th_rand(&s) % 6];
		}
	}
	md_compare(m, view);
	want_recs += m->nrec, want_keys += m->ngrp, nflush += m->nrec > 0;
	sfs_jb_reset(jb);

	sfs_jb_stats(view, &st);
	cr_log_info("model (SFS_JB_SEED=%#" PRIx64 "): %" PRIu64 " flushes: %" PRIu64
		    " arena full, %" PRIu64 " index full, %" PRIu64 " threshold, %" PRIu64
		    " barrier; %.2f records per key", seed0, nflush, nfull_arena, nfull_index, nthresh,
		    nbarrier, st.flushed_recs_per_key);
	cr_assert_eq(st.flushes, nflush);
	cr_assert_eq(st.flushed_recs, want_recs);
	cr_assert_eq(st.flushed_keys, want_keys);
	cr_assert_eq(st.full, nfull_arena + nfull_index);
	/* The run must have covered what it is meant to. */
	cr_assert_gt(nfull_arena, 5, "arena full %" PRIu64 " times", nfull_arena);
	cr_assert_gt(nfull_index, 5, "index full %" PRIu64 " times", nfull_index);
	cr_assert_gt(nthresh, 10, "%" PRIu64 " threshold flushes", nthresh);
	cr_assert_gt(nbarrier, 5, "%" PRIu64 " barrier flushes", nbarrier);
	munmap(a, len);
	munmap(c, len);
	free(m->grp);
	free(m->rec);
	free(m);
}

/* ---- another address, another process ------------------------------------------ */

Test(shared, second_mapping_reads_the_same_contents)
{
	const size_t len = sfs_jb_size(100, 64 * KiB);
	struct sfs_jb_config cfg = { 100, 0, 0 };
	int fd = memfd_create("sfs-test-jb", MFD_CLOEXEC);
	struct sfs_jb *w, *r;
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	struct sfs_jb_stats sw, sr;
	const void *key, *rec;
	uint32_t klen, nrec, rlen;
	char *a, *c, k[32], v[32];

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	c = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert(a != MAP_FAILED && c != MAP_FAILED && a != c);
	cr_assert_eq(sfs_jb_init(a, len, &cfg, &w), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(k, sizeof(k), "seller-%d", i % 50);
		snprintf(v, sizeof(v), "auction-%d", i);
		cr_assert_eq(jt_add_s(w, k, v, (uint64_t)i), 0);
	}
	cr_assert_eq(sfs_jb_attach(c, len, &r), 0, "%s", sfs_last_error());
	jt_verify(r);
	for (int kk = 0; kk < 50; kk++) {
		cr_assert_eq(sfs_jb_next_key(r, &it, &key, &klen, &nrec), 0);
		cr_assert((const char *)key > c && (const char *)key < c + len,
			  "the view points into the reader's mapping");
		snprintf(k, sizeof(k), "seller-%d", kk);
		cr_assert(klen == strlen(k) && memcmp(key, k, klen) == 0);
		cr_assert_eq(nrec, 6);
		for (int j = 0; j < 6; j++) {
			uint64_t seq;

			cr_assert_eq(sfs_jb_next_rec(r, &it, &rec, &rlen, &seq), 0);
			snprintf(v, sizeof(v), "auction-%d", kk + 50 * j);
			cr_assert(rlen == strlen(v) && memcmp(rec, v, rlen) == 0);
			cr_assert_eq(seq, (uint64_t)(kk + 50 * j));
		}
	}
	cr_assert_eq(sfs_jb_next_key(r, &it, &key, &klen, &nrec), -ENOENT);
	sfs_jb_stats(w, &sw);
	sfs_jb_stats(r, &sr);
	cr_assert_eq(memcmp(&sw, &sr, sizeof(sw)), 0, "same stats through both mappings");
	/* A reset through the owner's mapping is seen by the reader. */
	sfs_jb_reset(w);
	it = SFS_JB_ITER_INIT;
	cr_assert_eq(sfs_jb_next_key(r, &it, &key, &klen, &nrec), -ENOENT);
	munmap(a, len);
	munmap(c, len);
}

/*
 * A reader in another process, mapping the batch at its own address, walks
 * it again and again while the owner adds.  Record j of key k is
 * {k, j, pattern(k, j)}: a reader must see, for every key, a gap-free prefix
 * 0..n-1 of its records, whole, and keys in first-arrival order (key k is
 * first added before key k+1).  At the end (owner done) it must see all.
 */
enum { FR_KEYS = 200, FR_RECLEN = 40 };

struct fr_ctl {
	uint32_t ready;   /* child, release */
	uint32_t done;    /* parent, release: the batch is final */
	uint64_t walks;   /* child, relaxed */
	uint64_t total;   /* parent, before done: records added */
};

struct fr_arg {
	int fd;
	size_t len;
	void *parent_base;
	struct fr_ctl *ctl;
};

static void fr_rec(uint8_t *b, uint32_t k, uint32_t j)
{
	memcpy(b, &k, 4);
	memcpy(b + 4, &j, 4);
	jt_fill(b + 8, FR_RECLEN - 8, (uint64_t)k << 32 | j);
}

/* Exit codes: 0 ok; 10 map; 11 same address; 12 attach; 13 walk error;
 * 14 key order; 15 record gap or torn; 16 view outside the mapping;
 * 17 final count wrong; 18 parent never finished; 19 verify. */
static int fr_child(void *p)
{
	struct fr_arg *fa = p;
	struct fr_ctl *ctl = fa->ctl;
	struct sfs_jb *jb;
	uint64_t walks = 0;
	struct timespec t0, t;
	char *base;

	base = mmap(NULL, fa->len, PROT_READ, MAP_SHARED, fa->fd, 0);
	if (base == MAP_FAILED)
		return 10;
	if ((void *)base == fa->parent_base)
		return 11;
	munmap(fa->parent_base, fa->len);  /* only the new mapping is usable */
	if (sfs_jb_attach(base, fa->len, &jb))
		return 12;
	sfs_store_release(&ctl->ready, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int done = (int)sfs_load_acquire(&ctl->done);
		struct sfs_jb_iter it = SFS_JB_ITER_INIT;
		const void *key, *rec;
		uint32_t klen, nrec, len, want_k = 0;
		uint64_t seq, seen = 0;
		int rc;
		uint8_t expect[FR_RECLEN];

		while ((rc = sfs_jb_next_key(jb, &it, &key, &klen, &nrec)) == 0) {
			uint32_t k, j = 0;

			if ((const char *)key < base || (const char *)key + klen > base + fa->len)
				return 16;
			if (klen != 4)
				return 14;
			memcpy(&k, key, 4);
			if (k != want_k++)
				return 14;
			while ((rc = sfs_jb_next_rec(jb, &it, &rec, &len, &seq)) == 0) {
				if (len != FR_RECLEN || seq != ((uint64_t)k << 32 | j))
					return 15;
				fr_rec(expect, k, j);
				if (memcmp(rec, expect, FR_RECLEN))
					return 15;
				j++;
			}
			if (rc != -ENOENT)
				return 13;
			if (done && j != nrec)
				return 17;
			seen += j;
		}
		if (rc != -ENOENT)
			return 13;
		sfs_store_relaxed(&ctl->walks, ++walks);
		if (done) {
			if (seen != ctl->total || want_k != FR_KEYS)
				return 17;
			return sfs_jb_verify(jb) ? 19 : 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return 18;
	}
}

Test(shared, forked_reader_walks_while_the_owner_adds, .timeout = 30)
{
	const size_t len = sfs_jb_size(FR_KEYS, 24 * MiB);
	struct sfs_jb_config cfg = { FR_KEYS, 0, 0 };
	int fd = memfd_create("sfs-test-jb-fork", 0);
	struct fr_ctl *ctl = th_map(sizeof(struct fr_ctl));
	uint32_t nrec[FR_KEYS] = { 0 };
	struct fr_arg fa;
	struct sfs_jb *jb;
	struct timespec t0, t;
	uint8_t rec[FR_RECLEN];
	uint64_t s = 99, total = 0;
	int status, rc = 0;
	pid_t pid;
	char *base;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(base != MAP_FAILED);
	cr_assert_eq(sfs_jb_init(base, len, &cfg, &jb), 0);
	fa = (struct fr_arg){ .fd = fd, .len = len, .parent_base = base, .ctl = ctl };
	pid = th_fork(fr_child, &fa);
	cr_assert_gt(pid, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!sfs_load_acquire(&ctl->ready)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10) {
			kill(pid, SIGKILL);
			th_wait(pid, 1000);
			cr_assert_fail("reader never became ready");
		}
		usleep(100);
	}
	/* Keys arrive in order 0, 1, 2, ... the first time; then at random. */
	for (uint32_t k = 0; k < FR_KEYS; k++) {
		fr_rec(rec, k, 0);
		cr_assert_eq(sfs_jb_add(jb, &k, 4, rec, FR_RECLEN, (uint64_t)k << 32), 0);
		nrec[k] = 1;
		total++;
	}
	for (;;) {
		uint32_t k = (uint32_t)(th_rand(&s) % FR_KEYS);

		fr_rec(rec, k, nrec[k]);
		rc = sfs_jb_add(jb, &k, 4, rec, FR_RECLEN, (uint64_t)k << 32 | nrec[k]);
		if (rc)
			break;
		nrec[k]++;
		total++;
		if ((total & 1023) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((sfs_load_relaxed(&ctl->walks) > 50 && total > 100000) ||
			    t.tv_sec - t0.tv_sec > 8)
				break;
		}
	}
	cr_assert(rc == 0 || rc == SFS_EFULL, "rc %d: %s", rc, sfs_last_error());
	ctl->total = total;
	sfs_store_release(&ctl->done, 1);
	status = th_wait(pid, 20000);
	cr_log_info("forked reader: %" PRIu64 " walks over %" PRIu64 " records",
		    (uint64_t)ctl->walks, total);
	cr_assert_eq(th_exit_code(status), 0, "reader exit code %d (see fr_child)",
		     th_exit_code(status));
	cr_assert_gt(ctl->walks, 1);
	jt_verify(jb);
	munmap(base, len);
	close(fd);
}
