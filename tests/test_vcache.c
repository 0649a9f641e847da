/*
 * test_vcache.c — worker/vcache: the value cache.  get/put/replace/
 * invalidate, negative entries, tags, keys told apart by state and
 * namespace; the byte bound under random sizes; the entry bound; CLOCK
 * keeping a working set against a cold stream; oversized values refused
 * without leaving a stale entry; a randomized model test against a
 * reference map; clear; geometry (size/init/attach and bad headers); and
 * the block seen through two mappings (memfd mapped twice) and from a
 * forked child at another address.
 *
 * Multi-process rules (tests/helpers.h): a forked child reports only
 * through its exit code, never cr_assert, and is reaped with a timeout.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "common/err.h"
#include "worker/vcache.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* ---- helpers (vt_: vcache test) ------------------------------------------ */

static struct sfs_vcache *vt_cache(size_t len, uint64_t max_entries)
{
	struct sfs_vcache *c;

	cr_assert_eq(sfs_vcache_init(th_map(len), len, max_entries, &c), 0, "%s",
		     sfs_last_error());
	return c;
}

static void vt_verify(const struct sfs_vcache *c)
{
	int rc = sfs_vcache_verify(c);

	cr_assert_eq(rc, 0, "verify: %s", sfs_last_error());
}

static struct sfs_vcache_stats vt_stats(const struct sfs_vcache *c)
{
	struct sfs_vcache_stats st;

	sfs_vcache_stats(c, &st);
	return st;
}

/* Key bytes of key number @k: variable length (6..37 bytes). */
static size_t vt_key(char *buf, uint64_t k)
{
	return (size_t)sprintf(buf, "key-%llu-%.*s", (unsigned long long)k, (int)(k % 24),
			       "abcdefghijklmnopqrstuvwxyz");
}

/* Pattern byte i of a value with seed @seed. */
static inline uint8_t vt_byte(uint64_t seed, size_t i)
{
	return (uint8_t)((seed * 0x9e3779b1u) >> 24 ^ (i * 131u) ^ (i >> 8));
}

static void vt_fill(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = vt_byte(seed, i);
}

static int vt_put_str(struct sfs_vcache *c, uint32_t state, uint64_t ns, const char *key,
		      const char *val, uint64_t tag)
{
	return sfs_vcache_put(c, state, ns, key, strlen(key), val, strlen(val), tag);
}

/* Assert that (state, ns, key) holds exactly @val (a string) and @tag. */
static void vt_expect(struct sfs_vcache *c, uint32_t state, uint64_t ns, const char *key,
		      const char *val, uint64_t tag)
{
	struct sfs_vcache_view v;
	int rc = sfs_vcache_get(c, state, ns, key, strlen(key), &v);

	cr_assert_eq(rc, 0, "get %u/%lu/%s: %d", state, (unsigned long)ns, key, rc);
	cr_assert_eq(v.absent, 0, "%s: negative entry", key);
	cr_assert_eq(v.len, strlen(val), "%s: length %u, expected %zu", key, v.len, strlen(val));
	cr_assert_eq(memcmp(v.value, val, v.len), 0, "%s: value differs", key);
	cr_assert_eq(v.tag, tag, "%s: tag %lu, expected %lu", key, (unsigned long)v.tag,
		     (unsigned long)tag);
}

static void vt_expect_miss(struct sfs_vcache *c, uint32_t state, uint64_t ns, const char *key)
{
	struct sfs_vcache_view v;

	cr_assert_eq(sfs_vcache_get(c, state, ns, key, strlen(key), &v), -ENOENT,
		     "%s should be a miss", key);
}

/* ---- basics ------------------------------------------------------------------ */

Test(vcache, get_put_replace_invalidate)
{
	struct sfs_vcache *c = vt_cache(256 * KiB, 0);
	struct sfs_vcache_stats st;
	char big[600];

	vt_expect_miss(c, 1, 0, "alpha");
	cr_assert_eq(vt_put_str(c, 1, 0, "alpha", "one", 10), 0, "%s", sfs_last_error());
	cr_assert_eq(vt_put_str(c, 1, 0, "beta", "two", 11), 0);
	cr_assert_eq(vt_put_str(c, 1, 0, "", "empty key", 12), 0);
	cr_assert_eq(vt_put_str(c, 1, 0, "empty value", "", 13), 0);
	vt_expect(c, 1, 0, "alpha", "one", 10);
	vt_expect(c, 1, 0, "beta", "two", 11);
	vt_expect(c, 1, 0, "", "empty key", 12);
	vt_expect(c, 1, 0, "empty value", "", 13);

	/* Replace: same footprint (in place), then larger, then smaller. */
	cr_assert_eq(vt_put_str(c, 1, 0, "alpha", "uno", 20), 0);
	vt_expect(c, 1, 0, "alpha", "uno", 20);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	cr_assert_eq(vt_put_str(c, 1, 0, "alpha", big, 21), 0);
	vt_expect(c, 1, 0, "alpha", big, 21);
	cr_assert_eq(vt_put_str(c, 1, 0, "alpha", "1", 22), 0);
	vt_expect(c, 1, 0, "alpha", "1", 22);
	st = vt_stats(c);
	cr_assert_eq(st.entries, 4);
	cr_assert_eq(st.replaces, 3);
	vt_verify(c);

	/* Invalidate. */
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 0, "alpha", 5), 0);
	vt_expect_miss(c, 1, 0, "alpha");
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 0, "alpha", 5), -ENOENT);
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 0, "never", 5), -ENOENT);
	vt_expect(c, 1, 0, "beta", "two", 11);

	st = vt_stats(c);
	cr_assert_eq(st.entries, 3);
	cr_assert_eq(st.invalidations, 1);
	cr_assert_eq(st.misses, 2);
	cr_assert_eq(st.hits, 8);
	cr_assert_eq(st.neg_hits, 0);
	cr_assert_eq(st.evictions, 0);
	cr_assert_gt(st.bytes_used, 0);
	vt_verify(c);

	/* Invalidate everything: no live bytes are left. */
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 0, "beta", 4), 0);
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 0, "", 0), 0);
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 0, "empty value", 11), 0);
	st = vt_stats(c);
	cr_assert_eq(st.entries, 0);
	cr_assert_eq(st.bytes_used, 0);
	vt_verify(c);
}

Test(vcache, state_and_namespace_are_part_of_the_key)
{
	struct sfs_vcache *c = vt_cache(256 * KiB, 0);

	cr_assert_eq(vt_put_str(c, 1, 0, "k", "s1n0", 1), 0);
	cr_assert_eq(vt_put_str(c, 2, 0, "k", "s2n0", 2), 0);
	cr_assert_eq(vt_put_str(c, 1, 7, "k", "s1n7", 3), 0);
	cr_assert_eq(sfs_vcache_put_absent(c, 2, 7, "k", 1, 4), 0);
	vt_expect(c, 1, 0, "k", "s1n0", 1);
	vt_expect(c, 2, 0, "k", "s2n0", 2);
	vt_expect(c, 1, 7, "k", "s1n7", 3);
	vt_expect_miss(c, 3, 0, "k");
	vt_expect_miss(c, 1, 8, "k");
	cr_assert_eq(sfs_vcache_invalidate(c, 1, 7, "k", 1), 0);
	vt_expect(c, 1, 0, "k", "s1n0", 1);
	vt_expect_miss(c, 1, 7, "k");
	/* A key that is a prefix of another is another key. */
	cr_assert_eq(vt_put_str(c, 1, 0, "kk", "longer", 5), 0);
	vt_expect(c, 1, 0, "k", "s1n0", 1);
	vt_expect(c, 1, 0, "kk", "longer", 5);
	vt_verify(c);
}

Test(vcache, negative_entries)
{
	struct sfs_vcache *c = vt_cache(256 * KiB, 0);
	struct sfs_vcache_view v;
	struct sfs_vcache_stats st;

	cr_assert_eq(sfs_vcache_put_absent(c, 1, 0, "gone", 4, 77), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_vcache_get(c, 1, 0, "gone", 4, &v), 0);
	cr_assert_eq(v.absent, 1);
	cr_assert_null(v.value);
	cr_assert_eq(v.len, 0);
	cr_assert_eq(v.tag, 77);

	/* A value over the negative entry, then a negative entry over it. */
	cr_assert_eq(vt_put_str(c, 1, 0, "gone", "back", 78), 0);
	vt_expect(c, 1, 0, "gone", "back", 78);
	cr_assert_eq(sfs_vcache_put_absent(c, 1, 0, "gone", 4, 79), 0);
	cr_assert_eq(sfs_vcache_get(c, 1, 0, "gone", 4, &v), 0);
	cr_assert_eq(v.absent, 1);
	cr_assert_eq(v.tag, 79);

	/* Many negative entries: a dedup workload. */
	for (int i = 0; i < 1000; i++) {
		char k[64];
		size_t n = vt_key(k, (uint64_t)i);

		cr_assert_eq(sfs_vcache_put_absent(c, 9, 0, k, n, (uint64_t)i), 0);
	}
	for (int i = 0; i < 1000; i++) {
		char k[64];
		size_t n = vt_key(k, (uint64_t)i);

		cr_assert_eq(sfs_vcache_get(c, 9, 0, k, n, &v), 0, "key %d", i);
		cr_assert_eq(v.absent, 1);
		cr_assert_eq(v.tag, (uint64_t)i);
	}
	st = vt_stats(c);
	cr_assert_eq(st.neg_hits, 1002);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.entries, 1001);
	cr_assert_eq(st.evictions, 0);
	vt_verify(c);
}

Test(vcache, tag_round_trip)
{
	struct sfs_vcache *c = vt_cache(512 * KiB, 0);
	uint64_t seed = 3;

	for (uint64_t i = 0; i < 500; i++) {
		char k[64];
		uint8_t val[64];
		size_t n = vt_key(k, i);
		uint64_t tag = th_rand(&seed);

		vt_fill(val, i % 64, i);
		if (i % 3 == 0)
			cr_assert_eq(sfs_vcache_put_absent(c, 1, i, k, n, tag), 0);
		else
			cr_assert_eq(sfs_vcache_put(c, 1, i, k, n, val, i % 64, tag), 0);
	}
	seed = 3;
	for (uint64_t i = 0; i < 500; i++) {
		char k[64];
		uint8_t val[64];
		size_t n = vt_key(k, i);
		struct sfs_vcache_view v;
		uint64_t tag = th_rand(&seed);

		cr_assert_eq(sfs_vcache_get(c, 1, i, k, n, &v), 0);
		cr_assert_eq(v.tag, tag, "key %lu", (unsigned long)i);
		cr_assert_eq(v.absent, i % 3 == 0);
		if (!v.absent) {
			vt_fill(val, i % 64, i);
			cr_assert_eq(v.len, i % 64);
			cr_assert_eq(memcmp(v.value, val, v.len), 0);
			cr_assert_eq((uintptr_t)v.value % 8, 0, "values are 8-byte aligned");
		}
	}
	/* Extreme tags survive, in place and not. */
	cr_assert_eq(vt_put_str(c, 2, 0, "t", "v", UINT64_MAX), 0);
	vt_expect(c, 2, 0, "t", "v", UINT64_MAX);
	cr_assert_eq(vt_put_str(c, 2, 0, "t", "w", 0), 0);
	vt_expect(c, 2, 0, "t", "w", 0);
	vt_verify(c);
}

/* ---- bounds -------------------------------------------------------------------- */

Test(vcache, byte_bound_random_sizes, .timeout = 60)
{
	const size_t len = 1 * MiB;
	struct sfs_vcache *c = vt_cache(len, 0);
	struct sfs_vcache_stats st = vt_stats(c);
	static uint8_t val[8192];
	uint64_t seed = 11, sum_sizes = 0, max_used = 0;
	const int nput = 40000;

	cr_assert_lt(st.capacity, len);
	cr_assert_eq(st.capacity + st.overhead, len, "header + index + log is the block");
	cr_assert_leq(st.overhead, len / 8 + SFS_VCACHE_INDEX_OFF, "the default index is <= 1/8");
	for (int i = 0; i < nput; i++) {
		char k[64];
		uint64_t r = th_rand(&seed), kn = r % 20000;
		size_t n = vt_key(k, kn);
		/* Mostly small values, some large (up to 8 KiB; obj_max ~ 114 KiB). */
		size_t vlen = (r >> 20) % 16 == 0 ? (r >> 32) % sizeof(val) : (r >> 32) % 700;
		int rc;

		vt_fill(val, vlen, kn);
		rc = sfs_vcache_put(c, 1, 0, k, n, val, vlen, (uint64_t)i);
		cr_assert_eq(rc, 0, "put %d (%zu bytes): %s", i, vlen, sfs_last_error());
		sum_sizes += vlen;
		sfs_vcache_stats(c, &st);
		cr_assert_leq(st.bytes_used, st.log_bytes, "put %d", i);
		cr_assert_leq(st.log_bytes, st.capacity, "put %d: %lu log bytes of %lu", i,
			      (unsigned long)st.log_bytes, (unsigned long)st.capacity);
		if (st.bytes_used > max_used)
			max_used = st.bytes_used;
		if (i % 5000 == 4999)
			vt_verify(c);
	}
	sfs_vcache_stats(c, &st);
	cr_assert_gt(st.evictions, 0);
	cr_assert_gt(sum_sizes, 10 * st.capacity, "the stream must be much larger than the cache");
	cr_assert_geq(max_used, st.capacity * 8 / 10, "the cache fills up: max %lu of %lu, "
		      "%lu entries", (unsigned long)max_used, (unsigned long)st.capacity,
		      (unsigned long)st.entries);
	cr_assert_eq(st.puts, (uint64_t)nput);
	cr_log_info("byte bound: %lu puts, %lu evictions, %lu entries, %lu live of %lu log "
		    "bytes, capacity %lu, max live %lu", (unsigned long)st.puts,
		    (unsigned long)st.evictions, (unsigned long)st.entries,
		    (unsigned long)st.bytes_used, (unsigned long)st.log_bytes,
		    (unsigned long)st.capacity, (unsigned long)max_used);
	/* Whatever survived is intact. */
	for (uint64_t kn = 0; kn < 20000; kn++) {
		char k[64];
		size_t n = vt_key(k, kn);
		struct sfs_vcache_view v;

		if (sfs_vcache_get(c, 1, 0, k, n, &v) == 0) {
			vt_fill(val, v.len, kn);
			cr_assert_eq(memcmp(v.value, val, v.len), 0, "key %lu", (unsigned long)kn);
		}
	}
	vt_verify(c);
}

Test(vcache, entry_bound)
{
	struct sfs_vcache *c = vt_cache(256 * KiB, 100);
	struct sfs_vcache_stats st;

	for (uint64_t i = 0; i < 1000; i++) {
		char k[64];
		size_t n = vt_key(k, i);

		cr_assert_eq(sfs_vcache_put(c, 1, 0, k, n, &i, sizeof(i), i), 0);
		cr_assert_leq(vt_stats(c).entries, 100);
	}
	st = vt_stats(c);
	cr_assert_eq(st.max_entries, 100);
	cr_assert_eq(st.entries, 100);
	cr_assert_eq(st.evictions, 900);
	cr_assert_lt(st.bytes_used, st.capacity / 4, "bounded by entries, not bytes");
	/* With no get, CLOCK degenerates to FIFO: the newest 100 are cached. */
	for (uint64_t i = 900; i < 1000; i++) {
		char k[64];
		size_t n = vt_key(k, i);
		struct sfs_vcache_view v = { 0 };	/* -O1 cannot see the assert stops */

		cr_assert_eq(sfs_vcache_get(c, 1, 0, k, n, &v), 0, "key %lu", (unsigned long)i);
		cr_assert_eq(*(const uint64_t *)v.value, i);
	}
	vt_verify(c);
}

/*
 * CLOCK: a working set that keeps being read survives a cold stream
 * several times the cache's size; the same working set left unread is
 * flushed out (so it is the reference bits that kept it).
 */
static unsigned vt_clock_run(bool touch)
{
	struct sfs_vcache *c = vt_cache(512 * KiB, 0);
	struct sfs_vcache_stats st = vt_stats(c);
	uint8_t val[200];
	const uint64_t nws = st.capacity / 4 / 256;  /* ~1/4 of the budget */
	uint64_t cold_bytes = 0, cold = 1000000;
	unsigned survived = 0;

	for (uint64_t i = 0; i < nws; i++) {
		char k[64];
		size_t n = vt_key(k, i);

		vt_fill(val, sizeof(val), i);
		cr_assert_eq(sfs_vcache_put(c, 1, 0, k, n, val, sizeof(val), i), 0);
	}
	while (cold_bytes < 4 * st.capacity) {
		/* A tenth of the budget of cold keys, then the working set is read. */
		for (uint64_t b = 0; b < st.capacity / 10; b += 256, cold++, cold_bytes += 256) {
			char k[64];
			size_t n = vt_key(k, cold);

			vt_fill(val, sizeof(val), cold);
			cr_assert_eq(sfs_vcache_put(c, 1, 0, k, n, val, sizeof(val), cold), 0);
		}
		if (!touch)
			continue;
		for (uint64_t i = 0; i < nws; i++) {
			char k[64];
			size_t n = vt_key(k, i);
			struct sfs_vcache_view v;

			(void)sfs_vcache_get(c, 1, 0, k, n, &v);
		}
	}
	for (uint64_t i = 0; i < nws; i++) {
		char k[64];
		size_t n = vt_key(k, i);
		struct sfs_vcache_view v;

		if (sfs_vcache_get(c, 1, 0, k, n, &v) == 0) {
			vt_fill(val, sizeof(val), i);
			cr_assert_eq(memcmp(v.value, val, sizeof(val)), 0);
			survived++;
		}
	}
	st = vt_stats(c);
	cr_assert_gt(st.evictions, 3 * nws);
	vt_verify(c);
	cr_log_info("clock (%s): %u of %lu working-set keys survived %lu evictions",
		    touch ? "read" : "unread", survived, (unsigned long)nws,
		    (unsigned long)st.evictions);
	return survived * 100 / (unsigned)nws;
}

Test(vcache, clock_keeps_working_set)
{
	unsigned hot = vt_clock_run(true), unread = vt_clock_run(false);

	cr_assert_geq(hot, 95, "%u%% of the read working set survived", hot);
	cr_assert_leq(unread, 10, "%u%% of the unread working set survived", unread);
}

Test(vcache, oversized_values_refused)
{
	struct sfs_vcache *c = vt_cache(256 * KiB, 0);
	struct sfs_vcache_stats st = vt_stats(c);
	size_t big = st.capacity + 1;
	uint8_t *val = calloc(1, big + 64);
	uint64_t at_max = st.obj_max - SFS_VCACHE_REC_HDR - 8;  /* key "k-xxxxx" pads to 8 */
	struct sfs_vcache_view v;

	cr_assert_not_null(val);
	for (int i = 0; i < 20; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k-%05d", i);
		cr_assert_eq(vt_put_str(c, 1, 0, k, "small", (uint64_t)i), 0);
	}
	/* A value larger than the whole cache: refused, the key's old entry
	 * dropped, everything else untouched. */
	cr_assert_eq(sfs_vcache_put(c, 1, 0, "k-00003", 7, val, big, 99), SFS_EFULL);
	cr_assert(strstr(sfs_last_error(), "not cached"), "%s", sfs_last_error());
	vt_expect_miss(c, 1, 0, "k-00003");
	vt_expect(c, 1, 0, "k-00004", "small", 4);
	/* Over SFS_VCACHE_VALUE_MAX: the same. */
	cr_assert_eq(sfs_vcache_put(c, 1, 0, "k-00005", 7, val, (size_t)SFS_VCACHE_VALUE_MAX + 1, 9),
		     SFS_EFULL);
	vt_expect_miss(c, 1, 0, "k-00005");
	/* The boundary: a record of exactly obj_max is cached, one byte more is not. */
	cr_assert_eq(sfs_vcache_put(c, 1, 0, "k-00006", 7, val, at_max, 6), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_vcache_get(c, 1, 0, "k-00006", 7, &v), 0);
	cr_assert_eq(v.len, at_max);
	cr_assert_eq(sfs_vcache_put(c, 1, 0, "k-00006", 7, val, at_max + 1, 6), SFS_EFULL);
	cr_assert_eq(st.obj_max % 8, 0);
	vt_expect_miss(c, 1, 0, "k-00006");
	/* Keys over the limit; a NULL value with a length. */
	cr_assert_eq(sfs_vcache_put(c, 1, 0, val, (size_t)SFS_VCACHE_KEY_MAX + 1, "v", 1, 0),
		     SFS_EUSAGE);
	cr_assert_eq(sfs_vcache_get(c, 1, 0, val, (size_t)SFS_VCACHE_KEY_MAX + 1, &v), -ENOENT);
	cr_assert_eq(sfs_vcache_put(c, 1, 0, "k-00007", 7, NULL, 5, 0), SFS_EUSAGE);
	vt_expect(c, 1, 0, "k-00007", "small", 7);

	st = vt_stats(c);
	cr_assert_eq(st.refused, 4);
	cr_assert_eq(st.entries, 17);
	cr_assert_eq(st.evictions, 0, "a refused put evicts nothing");
	for (int i = 0; i < 20; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k-%05d", i);
		if (i != 3 && i != 5 && i != 6)
			vt_expect(c, 1, 0, k, "small", (uint64_t)i);
	}
	vt_verify(c);
	free(val);
}

Test(vcache, clear)
{
	struct sfs_vcache *c = vt_cache(256 * KiB, 0);
	struct sfs_vcache_stats st;

	for (uint64_t i = 0; i < 300; i++) {
		char k[64];
		size_t n = vt_key(k, i);

		cr_assert_eq(sfs_vcache_put(c, 1, 0, k, n, k, n, i), 0);
	}
	sfs_vcache_clear(c);
	st = vt_stats(c);
	cr_assert_eq(st.entries, 0);
	cr_assert_eq(st.bytes_used, 0);
	cr_assert_eq(st.clears, 1);
	cr_assert_eq(st.puts, 300, "counters survive a clear");
	vt_verify(c);
	for (uint64_t i = 0; i < 300; i++) {
		char k[64];
		size_t n = vt_key(k, i);
		struct sfs_vcache_view v;

		cr_assert_eq(sfs_vcache_get(c, 1, 0, k, n, &v), -ENOENT);
	}
	cr_assert_eq(vt_put_str(c, 1, 0, "after", "clear", 1), 0);
	vt_expect(c, 1, 0, "after", "clear", 1);
	vt_verify(c);
}

/* ---- model test ------------------------------------------------------------------ */

#define VT_NKEYS_MAX 3000
#define VT_VMAX  80000

struct vt_ref {
	int known;     /* the cache may hold the key (as value or absent) */
	int absent;
	uint64_t tag;
	uint32_t len;
	uint64_t seed; /* value bytes are vt_fill(len, seed) */
};

/*
 * 50k random operations against a reference map.  A hit must return the
 * reference's current value, tag and absence exactly; a miss is always
 * allowed (it is a cache), except that it must never hit a key the
 * reference says was invalidated or refused.  Keys spread over two states
 * and three namespaces; values 0..600 bytes, one in 200 up to 80 KB (some
 * over obj_max); puts, negative puts, invalidates, gets, rare clears.
 */
static void vt_model(size_t len, uint64_t max_entries, unsigned nkeys, uint64_t seed, int nops,
		     int verify_every)
{
	struct sfs_vcache *c = vt_cache(len, max_entries);
	struct vt_ref *ref = calloc(VT_NKEYS_MAX, sizeof(*ref));
	static uint8_t val[VT_VMAX];
	uint64_t hits = 0, gets = 0, refused = 0;
	struct sfs_vcache_stats st;

	cr_assert_not_null(ref);
	for (int op = 0; op < nops; op++) {
		uint64_t r = th_rand(&seed), kn = r % nkeys;
		uint32_t state = 1 + (uint32_t)(kn % 2);
		uint64_t ns = kn % 3;
		unsigned what = (unsigned)((r >> 32) % 1000);
		struct vt_ref *x = &ref[kn];
		struct sfs_vcache_view v;
		char k[64];
		size_t n = vt_key(k, kn);
		int rc;

		if (what < 450) {  /* get */
			gets++;
			rc = sfs_vcache_get(c, state, ns, k, n, &v);
			if (rc == -ENOENT)
				continue;
			cr_assert_eq(rc, 0);
			cr_assert(x->known, "op %d: key %lu hit but was dropped", op,
				  (unsigned long)kn);
			cr_assert_eq(v.absent, x->absent, "op %d: key %lu absence", op,
				     (unsigned long)kn);
			cr_assert_eq(v.tag, x->tag, "op %d: key %lu tag", op, (unsigned long)kn);
			if (!x->absent) {
				cr_assert_eq(v.len, x->len, "op %d: key %lu length", op,
					     (unsigned long)kn);
				vt_fill(val, x->len, x->seed);
				cr_assert_eq(memcmp(v.value, val, v.len), 0, "op %d: key %lu bytes",
					     op, (unsigned long)kn);
			}
			hits++;
		} else if (what < 800) {  /* put a value */
			uint64_t vr = th_rand(&seed);
			uint32_t vlen = (uint32_t)(vr % 200 == 0 ? (vr >> 8) % VT_VMAX : vr % 600);

			vt_fill(val, vlen, vr);
			rc = sfs_vcache_put(c, state, ns, k, n, val, vlen, (uint64_t)op);
			if (rc == SFS_EFULL) {
				x->known = 0;
				refused++;
				cr_assert_eq(sfs_vcache_get(c, state, ns, k, n, &v), -ENOENT,
					     "op %d: a refused put leaves no old value", op);
				continue;
			}
			cr_assert_eq(rc, 0, "op %d: %s", op, sfs_last_error());
			*x = (struct vt_ref){ .known = 1, .absent = 0, .tag = (uint64_t)op,
					      .len = vlen, .seed = vr };
		} else if (what < 900) {  /* put absent */
			cr_assert_eq(sfs_vcache_put_absent(c, state, ns, k, n, (uint64_t)op), 0);
			*x = (struct vt_ref){ .known = 1, .absent = 1, .tag = (uint64_t)op };
		} else if (what < 999) {  /* invalidate (a write the cache is told about) */
			rc = sfs_vcache_invalidate(c, state, ns, k, n);
			cr_assert(rc == 0 || rc == -ENOENT);
			cr_assert(rc == -ENOENT || x->known, "op %d: invalidated an unknown key", op);
			x->known = 0;
		} else {
			sfs_vcache_clear(c);
			for (unsigned i = 0; i < nkeys; i++)
				ref[i].known = 0;
		}
		if (op % verify_every == 0) {
			vt_verify(c);
			sfs_vcache_stats(c, &st);
			cr_assert_leq(st.bytes_used, st.capacity);
		}
	}
	vt_verify(c);
	st = vt_stats(c);
	cr_assert_gt(st.evictions, 1000, "the model must run the cache full");
	cr_assert_gt(hits, gets / 10, "too few hits (%lu of %lu) to test anything",
		     (unsigned long)hits, (unsigned long)gets);
	cr_assert_gt(refused, 0, "some values must be over obj_max");
	cr_assert_eq(st.hits + st.neg_hits, hits);
	cr_log_info("model %zu B / %lu entries: %lu gets, %lu hits, %lu evictions, %lu moves, "
		    "%lu refused", len, (unsigned long)st.max_entries, (unsigned long)gets,
		    (unsigned long)hits, (unsigned long)st.evictions, (unsigned long)st.moves,
		    (unsigned long)refused);
	free(ref);
}

Test(vcache, model_bytes_bound, .timeout = 60)
{
	vt_model(256 * KiB, 0, 1500, 1, 50000, 2500);
}

Test(vcache, model_entries_bound, .timeout = 60)
{
	/* A few entries and a small index: stresses probing, backward shift and
	 * count evictions. */
	vt_model(512 * KiB, 200, 500, 2, 50000, 2500);
}

Test(vcache, model_tiny_log, .timeout = 60)
{
	/* A 24 KiB log: the ring wraps every few dozen puts (pads, moves across
	 * the end, a log that empties and restarts at 0); verified often. */
	vt_model(28 * KiB, 0, 300, 3, 50000, 50);
}

/* ---- geometry, attach, other mappings ----------------------------------------------- */

Test(vcache, init_args_and_size)
{
	char *mem = th_map(1 * MiB);
	struct sfs_vcache *c;
	struct sfs_vcache_stats st;

	cr_assert_eq(sfs_vcache_init(mem + 8, 512 * KiB, 0, &c), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "aligned"), "%s", sfs_last_error());
	cr_assert_eq(sfs_vcache_init(NULL, 512 * KiB, 0, &c), SFS_EUSAGE);
	cr_assert_eq(sfs_vcache_init(mem, 4 * KiB, 0, &c), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "log"), "%s", sfs_last_error());
	cr_assert_eq(sfs_vcache_init(mem, 1 * MiB, (uint64_t)SFS_VCACHE_ENTRIES_MAX + 1, &c),
		     SFS_EUSAGE);
	cr_assert_eq(sfs_vcache_init(mem, 1 * MiB, 100000, &c), SFS_EUSAGE,
		     "an index that leaves no log");
	cr_assert_eq(sfs_vcache_init(mem, 1 * MiB, 1, &c), 0, "one entry is a cache too");
	cr_assert_eq(vt_put_str(c, 1, 0, "a", "1", 1), 0);
	cr_assert_eq(vt_put_str(c, 1, 0, "b", "2", 2), 0);
	vt_expect_miss(c, 1, 0, "a");
	vt_expect(c, 1, 0, "b", "2", 2);
	vt_verify(c);

	for (uint64_t cap = 4 * KiB; cap <= 64 * MiB; cap *= 4) {
		for (uint64_t ents = 0; ents <= 1000; ents += 1000) {
			size_t size = sfs_vcache_size(cap, ents);
			char *m;

			cr_assert_gt(size, cap);
			cr_assert_eq(size % 64, 0);
			m = th_map(size);
			cr_assert_eq(sfs_vcache_init(m, size, ents, &c), 0, "%s", sfs_last_error());
			st = vt_stats(c);
			cr_assert_geq(st.capacity, cap, "size %zu for capacity %lu gives %lu", size,
				      (unsigned long)cap, (unsigned long)st.capacity);
			cr_assert_eq(st.size, size);
			if (ents) {
				cr_assert_eq(st.max_entries, ents);
				cr_assert_eq(st.capacity, cap, "exact with a given index");
				cr_assert_lt(vt_stats(c).capacity, cap + 64);
			} else {
				cr_assert_leq(size, cap + cap / 7 + 4096, "default index <= 1/8");
			}
			munmap(m, size);
		}
	}
	cr_assert_eq(sfs_vcache_size(0, 0), 0);
	cr_assert_eq(sfs_vcache_size(UINT64_MAX, 0), 0);
	cr_assert_eq(sfs_vcache_size(MiB, (uint64_t)SFS_VCACHE_ENTRIES_MAX + 1), 0);
}

Test(vcache, attach_and_bad_header)
{
	const size_t len = 512 * KiB;
	char *mem = th_map(len);
	struct sfs_vcache *c, *c2;

	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), SFS_EMAGIC, "a zeroed block is no cache");
	cr_assert_eq(sfs_vcache_init(mem, len, 0, &c), 0);
	cr_assert_eq(vt_put_str(c, 1, 0, "k", "v", 1), 0);
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), 0, "%s", sfs_last_error());
	cr_assert_eq(c2, c);
	cr_assert_eq(sfs_vcache_attach(mem, len - 4096, &c2), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "bytes"), "%s", sfs_last_error());

	c->vc_version++;
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), SFS_EVERSION);
	c->vc_version--;
	c->vc_layout ^= 1;
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), SFS_ELAYOUT);
	c->vc_layout ^= 1;
	c->vc_bits++;
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "geometry"), "%s", sfs_last_error());
	c->vc_bits--;
	c->vc_log_size -= 64;
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), SFS_ECORRUPT);
	c->vc_log_size += 64;
	c->vc_magic ^= 1;
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), SFS_EMAGIC);
	c->vc_magic ^= 1;
	cr_assert_eq(sfs_vcache_attach(mem, len, &c2), 0);
	vt_expect(c2, 1, 0, "k", "v", 1);

	/* verify notices broken counters, index and log. */
	vt_verify(c);
	sfs_store_relaxed(&c->vc_bytes_used, c->vc_bytes_used + 8);
	cr_assert_eq(sfs_vcache_verify(c), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "bytes"), "%s", sfs_last_error());
	sfs_store_relaxed(&c->vc_bytes_used, c->vc_bytes_used - 8);
	vt_verify(c);
	{
		uint64_t *slots = sfs__vc_slots(c), mask = ((uint64_t)1 << c->vc_bits) - 1, i = 0;

		while (!slots[i])
			i++;
		slots[(i + 1) & mask] = slots[i];  /* a duplicate slot */
		cr_assert_eq(sfs_vcache_verify(c), SFS_ECORRUPT);
		slots[(i + 1) & mask] = 0;
	}
	vt_verify(c);
	sfs__vc_rec(c, c->vc_head)->vr_size = 12;
	cr_assert_eq(sfs_vcache_verify(c), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "size"), "%s", sfs_last_error());
}

/* The same memfd mapped at two addresses: the second mapping attaches and
 * sees every entry, and writes through either are seen through the other. */
Test(shared, two_mappings)
{
	const size_t len = 1 * MiB;
	int fd = memfd_create("sfs-test-vcache", MFD_CLOEXEC);
	char *a, *b;
	struct sfs_vcache *ca, *cb;
	struct sfs_vcache_stats sa, sb;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(a != MAP_FAILED && b != MAP_FAILED && a != b);

	cr_assert_eq(sfs_vcache_init(a, len, 0, &ca), 0, "%s", sfs_last_error());
	for (uint64_t i = 0; i < 2000; i++) {
		char k[64];
		uint8_t val[300];
		size_t n = vt_key(k, i);

		vt_fill(val, i % 300, i);
		if (i % 5 == 0)
			cr_assert_eq(sfs_vcache_put_absent(ca, 1, i % 4, k, n, i), 0);
		else
			cr_assert_eq(sfs_vcache_put(ca, 1, i % 4, k, n, val, i % 300, i), 0);
	}
	cr_assert_eq(sfs_vcache_attach(b, len, &cb), 0, "%s", sfs_last_error());
	cr_assert_eq((void *)cb, (void *)b);
	vt_verify(cb);
	sfs_vcache_stats(ca, &sa);
	sfs_vcache_stats(cb, &sb);
	cr_assert_eq(memcmp(&sa, &sb, sizeof(sa)), 0, "stats are the block's, not the mapping's");
	for (uint64_t i = 0; i < 2000; i++) {
		char k[64];
		uint8_t val[300];
		size_t n = vt_key(k, i);
		struct sfs_vcache_view va, vb;
		int ra = sfs_vcache_get(ca, 1, i % 4, k, n, &va);
		int rb = sfs_vcache_get(cb, 1, i % 4, k, n, &vb);

		cr_assert_eq(ra, rb, "key %lu", (unsigned long)i);
		if (ra)
			continue;
		cr_assert_eq(va.absent, vb.absent);
		cr_assert_eq(va.tag, vb.tag);
		cr_assert_eq(va.tag, i);
		cr_assert_eq(va.len, vb.len);
		if (!vb.absent) {
			cr_assert((const char *)vb.value >= b && (const char *)vb.value < b + len,
				  "a view through b points into b");
			cr_assert_eq((const char *)vb.value - b, (const char *)va.value - a);
			vt_fill(val, vb.len, i);
			cr_assert_eq(memcmp(vb.value, val, vb.len), 0);
		}
	}
	/* A write through b is seen through a. */
	cr_assert_eq(vt_put_str(cb, 7, 0, "from-b", "hello", 5), 0);
	vt_expect(ca, 7, 0, "from-b", "hello", 5);
	cr_assert_eq(sfs_vcache_invalidate(ca, 7, 0, "from-b", 6), 0);
	vt_expect_miss(cb, 7, 0, "from-b");
	vt_verify(ca);
	munmap(a, len);
	munmap(b, len);
	close(fd);
}

/* A forked child maps the memfd afresh (another address), attaches and
 * reads the stats and the entries the parent cached. */
struct vt_child {
	int fd;
	size_t len;
	uint64_t entries;
};

static int vt_child_reader(void *arg)
{
	struct vt_child *ca = arg;
	char *m = mmap(NULL, ca->len, PROT_READ | PROT_WRITE, MAP_SHARED, ca->fd, 0);
	struct sfs_vcache *c;
	struct sfs_vcache_stats st;

	if (m == MAP_FAILED)
		return 10;
	if (sfs_vcache_attach(m, ca->len, &c))
		return 11;
	sfs_vcache_stats(c, &st);
	if (st.entries != ca->entries)
		return 12;
	if (sfs_vcache_verify(c))
		return 13;
	for (uint64_t i = 0; i < ca->entries; i++) {
		char k[64];
		size_t n = vt_key(k, i);
		struct sfs_vcache_view v;

		/* The parent is idle: a lookup from here is safe for the test. */
		if (sfs_vcache_get(c, 1, 0, k, n, &v) || v.absent || v.tag != i ||
		    v.len != sizeof(i) || memcmp(v.value, &i, sizeof(i)))
			return 14;
	}
	return 0;
}

Test(shared, forked_reader, .timeout = 30)
{
	struct vt_child ca = { .len = 512 * KiB, .entries = 500 };
	struct sfs_vcache *c;
	char *m;
	pid_t pid;

	ca.fd = memfd_create("sfs-test-vcache-fork", 0);
	cr_assert_geq(ca.fd, 0);
	cr_assert_eq(ftruncate(ca.fd, (off_t)ca.len), 0);
	m = mmap(NULL, ca.len, PROT_READ | PROT_WRITE, MAP_SHARED, ca.fd, 0);
	cr_assert(m != MAP_FAILED);
	cr_assert_eq(sfs_vcache_init(m, ca.len, 0, &c), 0);
	for (uint64_t i = 0; i < ca.entries; i++) {
		char k[64];
		size_t n = vt_key(k, i);

		cr_assert_eq(sfs_vcache_put(c, 1, 0, k, n, &i, sizeof(i), i), 0);
	}
	pid = th_fork(vt_child_reader, &ca);
	cr_assert_gt(pid, 0);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0, "child failed");
	munmap(m, ca.len);
	close(ca.fd);
}
