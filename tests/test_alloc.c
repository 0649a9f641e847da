/*
 * test_alloc.c — shm/alloc: the bump arena (alignment, full, reset, attach)
 * and the size-class heap (class table, per-class reuse, large objects and
 * coalescing, refused frees, exhaustion, a randomized model test against a
 * reference, bad headers), and both seen through two mappings at different
 * addresses: in one process (memfd mapped twice) and in a forked child;
 * and common/hugemem's zeroed blocks for the compactor's big tables.
 *
 * Multi-process rules (tests/helpers.h): a forked child reports only
 * through its exit code, never cr_assert, and is reaped with a timeout.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "common/err.h"
#include "common/hugemem.h"
#include "shm/alloc.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* ---- helpers (at_: alloc test) --------------------------------------- */

static struct sfs_salloc *at_heap(size_t len)
{
	struct sfs_salloc *h;

	cr_assert_eq(sfs_salloc_init(th_map(len), len, &h), 0, "%s", sfs_last_error());
	return h;
}

static void at_verify(const struct sfs_salloc *h)
{
	int rc = sfs_salloc_verify(h);

	cr_assert_eq(rc, 0, "verify: %s", sfs_last_error());
}

/* Pattern byte i of an object tagged @tag: cheap and position dependent. */
static inline uint8_t at_byte(uint64_t tag, size_t i)
{
	return (uint8_t)((tag * 0x9e3779b1u) >> 24 ^ (i * 131u) ^ (i >> 8));
}

static void at_fill(void *p, size_t n, uint64_t tag)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = at_byte(tag, i);
}

/* Index of the first wrong byte, or -1. */
static long at_check(const void *p, size_t n, uint64_t tag)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != at_byte(tag, i))
			return (long)i;
	return -1;
}

/* ---- arena ------------------------------------------------------------- */

Test(arena, init_args)
{
	char *mem = th_map(64 * KiB);
	struct sfs_arena *a;

	cr_assert_eq(sfs_arena_init(mem + 64, 4096, &a), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "aligned"), "%s", sfs_last_error());
	cr_assert_eq(sfs_arena_init(mem, 32, &a), SFS_EUSAGE);
	cr_assert_eq(sfs_arena_init(NULL, 4096, &a), SFS_EUSAGE);
	cr_assert_eq(sfs_arena_init(mem, SFS_ARENA_DATA, &a), 0);
	cr_assert_eq(sfs_arena_alloc(a, 1, 1), 0, "an arena with no data space is full");
}

Test(arena, alloc_align)
{
	const size_t len = 1 * MiB;
	char *mem = th_map(len);
	struct sfs_arena *a;
	uint64_t prev_end = SFS_ARENA_DATA, seed = 7;
	uint64_t offs[512], sizes[512];

	cr_assert_eq(sfs_arena_init(mem, len, &a), 0, "%s", sfs_last_error());
	cr_assert_eq((void *)a, (void *)mem);
	cr_assert_eq(sfs_arena_used(a), 0);
	cr_assert_eq(sfs_arena_free(a), len - SFS_ARENA_DATA);
	for (int i = 0; i < 512; i++) {
		size_t align = (size_t)1 << (th_rand(&seed) % 13);  /* 1 .. 4096 */
		size_t size = th_rand(&seed) % 300;
		uint64_t off = sfs_arena_alloc(a, size, align);

		cr_assert_neq(off, 0, "alloc %d: %s", i, sfs_last_error());
		cr_assert_eq(off % align, 0, "offset %lu not aligned to %zu", off, align);
		cr_assert_eq((uintptr_t)sfs_arena_ptr(a, off) % align, 0);
		cr_assert_geq(off, prev_end, "objects overlap");
		prev_end = off + (size ? size : 1);
		cr_assert_eq(sfs_arena_used(a), prev_end - SFS_ARENA_DATA);
		cr_assert_eq(sfs_arena_free(a), len - prev_end);
		at_fill(sfs_arena_ptr(a, off), size, (uint64_t)i);
		offs[i] = off;
		sizes[i] = size;
	}
	for (int i = 0; i < 512; i++)
		cr_assert_eq(at_check(sfs_arena_ptr(a, offs[i]), sizes[i], (uint64_t)i), -1,
			     "object %d corrupted", i);

	struct sfs_arena_stats st;

	sfs_arena_stats(a, &st);
	cr_assert_eq(st.nalloc, 512);
	cr_assert_eq(st.used, prev_end - SFS_ARENA_DATA);
	cr_assert_eq(st.size, len);
	cr_assert_eq(st.used + st.free + SFS_ARENA_DATA, len);
}

Test(arena, bad_align)
{
	char *mem = th_map(16 * KiB);
	struct sfs_arena *a;

	cr_assert_eq(sfs_arena_init(mem, 16 * KiB, &a), 0);
	cr_assert_neq(sfs_arena_alloc(a, 10, 8), 0);
	uint64_t used = sfs_arena_used(a);

	cr_assert_eq(sfs_arena_alloc(a, 10, 3), 0);
	cr_assert(strstr(sfs_last_error(), "power of two"), "%s", sfs_last_error());
	cr_assert_eq(sfs_arena_alloc(a, 10, 0), 0);
	cr_assert_eq(sfs_arena_alloc(a, 10, 8192), 0);
	cr_assert_eq(sfs_arena_used(a), used, "a refused alloc consumes nothing");
}

Test(arena, full_and_reset)
{
	const size_t len = 8 * KiB;
	char *mem = th_map(len);
	struct sfs_arena *a;
	uint64_t first, off, n = 0, used;
	struct sfs_arena_stats st;

	cr_assert_eq(sfs_arena_init(mem, len, &a), 0);
	first = sfs_arena_alloc(a, 100, 16);
	cr_assert_eq(first, SFS_ARENA_DATA);
	at_fill(sfs_arena_ptr(a, first), 100, 0);
	while ((off = sfs_arena_alloc(a, 100, 16)) != 0) {
		cr_assert_leq(off + 100, len);
		at_fill(sfs_arena_ptr(a, off), 100, off);
		n++;
	}
	cr_assert(strstr(sfs_last_error(), "do not fit"), "%s", sfs_last_error());
	cr_assert_eq(n, (len - SFS_ARENA_DATA) / 112 - 1 + ((len - SFS_ARENA_DATA) % 112 >= 100));
	used = sfs_arena_used(a);
	/* A failed alloc changes nothing; a smaller one that fits still works. */
	cr_assert_eq(sfs_arena_alloc(a, 100, 16), 0);
	cr_assert_eq(sfs_arena_used(a), used);
	cr_assert_eq(sfs_arena_alloc(a, SIZE_MAX, 1), 0, "no overflow on a huge size");
	cr_assert_eq(sfs_arena_used(a), used);
	if (sfs_arena_free(a) > 0)
		cr_assert_neq(sfs_arena_alloc(a, sfs_arena_free(a), 1), 0, "exact fit");
	cr_assert_eq(sfs_arena_free(a), 0);
	cr_assert_eq(at_check(sfs_arena_ptr(a, first), 100, 0), -1);

	sfs_arena_reset(a);
	cr_assert_eq(sfs_arena_used(a), 0);
	cr_assert_eq(sfs_arena_free(a), len - SFS_ARENA_DATA);
	sfs_arena_stats(a, &st);
	cr_assert_eq(st.resets, 1);
	cr_assert_eq(st.nalloc, 0);
	cr_assert_eq(st.peak, len - SFS_ARENA_DATA);
	cr_assert_eq(sfs_arena_alloc(a, 100, 16), first, "reset starts over");
}

Test(arena, attach_and_bad_header)
{
	const size_t len = 64 * KiB;
	char *mem = th_map(len);
	struct sfs_arena *a, *b;
	struct sfs_salloc *h;

	cr_assert_eq(sfs_arena_init(mem, len, &a), 0);
	cr_assert_neq(sfs_arena_alloc(a, 1000, 8), 0);
	cr_assert_eq(sfs_arena_attach(mem, len, &b), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_arena_used(b), 1000);
	cr_assert_eq(b->ar_rg.rg_owner, getpid());

	cr_assert_eq(sfs_arena_attach(mem, len / 2, &b), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "header says"), "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_attach(mem, len, &h), SFS_EMAGIC, "an arena is not a heap");

	a->ar_rg.rg_version++;
	cr_assert_eq(sfs_arena_attach(mem, len, &b), SFS_EVERSION);
	a->ar_rg.rg_version--;
	a->ar_rg.rg_layout ^= 1;
	cr_assert_eq(sfs_arena_attach(mem, len, &b), SFS_ELAYOUT);
	a->ar_rg.rg_layout ^= 1;
	a->ar_top = len + 1;
	cr_assert_eq(sfs_arena_attach(mem, len, &b), SFS_ECORRUPT);
	a->ar_top = SFS_ARENA_DATA;
	a->ar_rg.rg_magic ^= 0xff00;
	cr_assert_eq(sfs_arena_attach(mem, len, &b), SFS_EMAGIC);
	cr_assert(strstr(sfs_last_error(), "magic"), "%s", sfs_last_error());
	memset(mem, 0, 64);
	cr_assert_eq(sfs_arena_attach(mem, len, &b), SFS_EMAGIC);
}

/* ---- size classes ------------------------------------------------------ */

Test(salloc, class_table)
{
	uint32_t prev = 0;

	for (int c = 0; c < SFS_SALLOC_NCLASS_MAX; c++) {
		uint32_t s = sfs_salloc_class_size(c);

		cr_assert_gt(s, prev, "classes grow");
		cr_assert_eq(s % SFS_SALLOC_ALIGN, 0, "class %u B keeps 16-byte alignment", s);
		prev = s;
	}
	cr_assert_eq(prev, SFS_SALLOC_SMALL_MAX);
	cr_assert_eq(sfs_salloc_class_of(0), 0);
	cr_assert_eq(sfs_salloc_class_of(SFS_SALLOC_SMALL_MAX + 1), -1);
	for (size_t s = 1; s <= SFS_SALLOC_SMALL_MAX; s++) {
		int c = sfs_salloc_class_of(s);
		uint32_t cs = sfs_salloc_class_size(c);

		cr_assert(c >= 0 && c < SFS_SALLOC_NCLASS_MAX, "size %zu -> class %d", s, c);
		cr_assert_geq(cs, s, "size %zu fits its class", s);
		cr_assert(c == 0 || sfs_salloc_class_size(c - 1) < s,
			  "size %zu -> class %u B is the smallest that fits", s, cs);
		if (s > 64)
			cr_assert_lt((cs - s) * 5, cs, "rounding waste under 20%% (%zu -> %u)", s, cs);
	}
}

Test(salloc, init_args)
{
	char *mem = th_map(1 * MiB);
	struct sfs_salloc *h;
	struct sfs_salloc_stats st;

	cr_assert_eq(sfs_salloc_init(mem + 64, 512 * KiB, &h), SFS_EUSAGE);
	cr_assert_eq(sfs_salloc_init(mem, 16 * KiB, &h), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "at least"), "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_init(mem, SFS_SALLOC_MIN_PAGES * SFS_SALLOC_PAGE, &h), 0,
		     "%s", sfs_last_error());
	at_verify(h);
	sfs_salloc_stats(h, &st);
	cr_assert_lt(st.small_max, SFS_SALLOC_SMALL_MAX, "a tiny region has fewer classes");
	cr_assert_gt(st.nclasses, 0);
	cr_assert_neq(sfs_salloc_alloc(h, st.small_max + 1), 0, "above small_max is large");

	/* A region whose size is not whole pages ignores the tail. */
	cr_assert_eq(sfs_salloc_init(mem, 1 * MiB - 100, &h), 0, "%s", sfs_last_error());
	at_verify(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.small_max, SFS_SALLOC_SMALL_MAX, "1 MiB has every class");
	cr_assert_eq(st.pages_free, st.pages_total);
	cr_assert_eq(sfs_salloc_attach(mem, 1 * MiB - 100, &h), 0, "%s", sfs_last_error());
}

Test(salloc, per_class_reuse)
{
	struct sfs_salloc *h = at_heap(16 * MiB);
	struct sfs_salloc_stats st;

	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.nclasses, SFS_SALLOC_NCLASS_MAX);
	for (unsigned c = 0; c < st.nclasses; c++) {
		uint32_t cs = sfs_salloc_class_size((int)c);
		uint64_t o1 = sfs_salloc_alloc(h, cs), o2 = sfs_salloc_alloc(h, cs - 1);
		struct sfs_salloc_stats s2;

		cr_assert(o1 && o2, "class %u B: %s", cs, sfs_last_error());
		cr_assert_neq(o1, o2);
		cr_assert_eq(o1 % SFS_SALLOC_ALIGN, 0);
		cr_assert_eq(sfs_salloc_usable(h, o1), cs);
		cr_assert_eq(sfs_salloc_usable(h, o2), cs);
		at_fill(sfs_salloc_ptr(h, o1), cs, 1);
		at_fill(sfs_salloc_ptr(h, o2), cs, 2);
		sfs_salloc_stats(h, &s2);
		cr_assert_eq(s2.cls[c].objects, 2);
		cr_assert_eq(s2.cls[c].bytes, 2ull * cs);
		cr_assert_eq(s2.in_use, 2ull * cs);
		cr_assert_eq(s2.objects, 2);
		cr_assert_eq(at_check(sfs_salloc_ptr(h, o2), cs, 2), -1);
		cr_assert_eq(sfs_salloc_free(h, o1), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_salloc_alloc(h, cs), o1, "class %u B: a freed object is reused", cs);
		cr_assert_eq(at_check(sfs_salloc_ptr(h, o2), cs, 2), -1, "neighbour intact");
		cr_assert_eq(sfs_salloc_free(h, o1), 0);
		cr_assert_eq(sfs_salloc_free(h, o2), 0);
		at_verify(h);
	}
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.in_use, 0);
	cr_assert_eq(st.objects, 0);
	sfs_salloc_trim(h);
	at_verify(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.pages_free, st.pages_total, "every slab went back");
	cr_assert_eq(sfs_salloc_usable(h, sfs_salloc_alloc(h, 0)), 16, "size 0 is 16 bytes");
}

/* Many slabs of one class, freed in random order: slabs come and go. */
Test(salloc, slabs_come_and_go)
{
	struct sfs_salloc *h = at_heap(4 * MiB);
	struct sfs_salloc_stats st;
	enum { N = 3000 };
	static uint64_t off[N];
	uint64_t seed = 11;

	for (int i = 0; i < N; i++) {
		off[i] = sfs_salloc_alloc(h, 200);
		cr_assert_neq(off[i], 0, "%s", sfs_last_error());
		at_fill(sfs_salloc_ptr(h, off[i]), 200, (uint64_t)i);
	}
	sfs_salloc_stats(h, &st);
	cr_assert_gt(st.cls[sfs_salloc_class_of(200)].slabs, 10);
	at_verify(h);
	for (int i = N - 1; i > 0; i--) {  /* shuffle */
		int j = (int)(th_rand(&seed) % (uint64_t)(i + 1));
		uint64_t t = off[i];

		off[i] = off[j];
		off[j] = t;
	}
	for (int i = 0; i < N; i++) {
		cr_assert_eq(sfs_salloc_free(h, off[i]), 0, "%s", sfs_last_error());
		if (i % 500 == 0)
			at_verify(h);
	}
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.in_use, 0);
	cr_assert_leq(st.cls[sfs_salloc_class_of(200)].slabs, 1, "one empty slab kept at most");
	sfs_salloc_trim(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.pages_free, st.pages_total);
	at_verify(h);
}

/* ---- large objects ----------------------------------------------------- */

Test(salloc, large_and_coalescing)
{
	struct sfs_salloc *h = at_heap(8 * MiB);
	struct sfs_salloc_stats st;
	uint64_t seed = 5, off, n = 0;
	static uint64_t offs[4096];
	static size_t sizes[4096];

	sfs_salloc_stats(h, &st);
	off = sfs_salloc_alloc(h, st.small_max + 1);
	cr_assert_neq(off, 0);
	cr_assert_eq(off % SFS_SALLOC_PAGE, 0, "large objects are page aligned");
	cr_assert_eq(sfs_salloc_usable(h, off), 5 * SFS_SALLOC_PAGE);
	cr_assert_eq(sfs_salloc_free(h, off), 0);
	cr_assert_eq(sfs_salloc_alloc(h, 5 * SFS_SALLOC_PAGE), off, "the run is reused");
	cr_assert_eq(sfs_salloc_free(h, off), 0);

	/* Fill the region with large objects of random length, then free
	 * them in random order: every run must coalesce back into one. */
	while (n < 4096) {
		size_t size = st.small_max + 1 + th_rand(&seed) % (200 * KiB);

		off = sfs_salloc_alloc(h, size);
		if (!off)
			break;
		cr_assert_eq(off % SFS_SALLOC_PAGE, 0);
		at_fill(sfs_salloc_ptr(h, off), size, off);
		offs[n] = off;
		sizes[n++] = size;
	}
	cr_assert(strstr(sfs_last_error(), "no room"), "%s", sfs_last_error());
	cr_assert_gt(n, 20);
	at_verify(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.large_objects, n);
	cr_assert_eq(st.in_use, st.large_bytes);
	cr_assert_lt(st.pages_free, 200 * KiB / SFS_SALLOC_PAGE + 1);
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = th_rand(&seed) % (i + 1), t = offs[i];
		size_t ts = sizes[i];

		offs[i] = offs[j];
		offs[j] = t;
		sizes[i] = sizes[j];
		sizes[j] = ts;
	}
	for (uint64_t i = 0; i < n; i++) {
		cr_assert_eq(at_check(sfs_salloc_ptr(h, offs[i]), sizes[i], offs[i]), -1,
			     "large object at %lu corrupted", offs[i]);
		cr_assert_eq(sfs_salloc_free(h, offs[i]), 0, "%s", sfs_last_error());
		if (i % 16 == 0)
			at_verify(h);
	}
	at_verify(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.in_use, 0);
	cr_assert_eq(st.pages_free, st.pages_total);
	off = sfs_salloc_alloc(h, st.pages_total * SFS_SALLOC_PAGE);
	cr_assert_neq(off, 0, "all data pages in one run after coalescing: %s", sfs_last_error());
	cr_assert_eq(sfs_salloc_alloc(h, 1), 0);
	cr_assert_eq(sfs_salloc_alloc(h, st.pages_total * SFS_SALLOC_PAGE + 1), 0);
	cr_assert_eq(sfs_salloc_alloc(h, SIZE_MAX), 0, "no overflow on a huge size");
	cr_assert_eq(sfs_salloc_free(h, off), 0);
	at_verify(h);
}

/* ---- refused frees ----------------------------------------------------- */

Test(salloc, bad_free)
{
	struct sfs_salloc *h = at_heap(2 * MiB);
	struct sfs_salloc_stats before, after;
	uint64_t s = sfs_salloc_alloc(h, 40), s2 = sfs_salloc_alloc(h, 40);
	uint64_t l = sfs_salloc_alloc(h, 64 * KiB);

	cr_assert(s && s2 && l);
	cr_assert_eq(sfs_salloc_free(h, 0), 0, "free(0) is a no-op");
	cr_assert_eq(sfs_salloc_free(h, s2), 0);
	sfs_salloc_stats(h, &before);

	cr_assert_eq(sfs_salloc_free(h, s2), SFS_EUSAGE, "double free");
	cr_assert(strstr(sfs_last_error(), "double free"), "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_free(h, s + 16), SFS_EUSAGE, "interior of a small object");
	cr_assert_eq(sfs_salloc_free(h, s + 1), SFS_EUSAGE);
	cr_assert_eq(sfs_salloc_free(h, s - 48), SFS_EUSAGE, "a slab header");
	cr_assert_eq(sfs_salloc_free(h, 64), SFS_EUSAGE, "the region header");
	cr_assert(strstr(sfs_last_error(), "outside"), "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_free(h, 2 * MiB), SFS_EUSAGE, "past the end");
	cr_assert_eq(sfs_salloc_free(h, UINT64_MAX), SFS_EUSAGE);
	cr_assert_eq(sfs_salloc_free(h, l + SFS_SALLOC_PAGE), SFS_EUSAGE, "large body");
	cr_assert_eq(sfs_salloc_free(h, l + 16), SFS_EUSAGE, "inside a large head page");
	cr_assert_eq(sfs_salloc_free(h, s + 48 * 20), SFS_EUSAGE, "never carved");
	cr_assert_eq(sfs_salloc_free(h, l + 200 * KiB), SFS_EUSAGE, "a free page");
	cr_assert_eq(sfs_salloc_usable(h, s2), 0);
	cr_assert_eq(sfs_salloc_usable(h, l + 16), 0);
	cr_assert_eq(sfs_salloc_usable(h, 0), 0);
	sfs_salloc_stats(h, &after);
	cr_assert_eq(memcmp(&before, &after, sizeof(before)), 0, "refused frees change nothing");
	at_verify(h);

	cr_assert_eq(sfs_salloc_free(h, l), 0);
	cr_assert_eq(sfs_salloc_free(h, l), SFS_EUSAGE, "large double free");
	at_verify(h);
}

/* A page that once belonged to a slab keeps its tag after the slab went
 * back; an offset there must still be refused. */
Test(salloc, stale_slab_tag)
{
	struct sfs_salloc *h = at_heap(2 * MiB);
	uint32_t cs = 3072;  /* multi-page slabs */
	int c = sfs_salloc_class_of(cs);
	uint64_t o = sfs_salloc_alloc(h, cs), far;
	struct sfs_salloc_stats st;

	cr_assert_neq(o, 0);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.cls[c].slabs, 1);
	/* An object a few pages into the slab (past the page after the head,
	 * which a later split of the free run re-tags). */
	far = o + 5 * cs;
	cr_assert_gt(far / SFS_SALLOC_PAGE, o / SFS_SALLOC_PAGE + 1);
	cr_assert_eq(sfs_salloc_free(h, o), 0);
	sfs_salloc_trim(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.cls[c].slabs, 0);
	cr_assert_eq(sfs_salloc_free(h, far), SFS_EUSAGE);
	cr_assert_eq(sfs_salloc_free(h, o), SFS_EUSAGE);
	/* A one-page slab now lives on the old head page; the stale page
	 * after it still points there and must not pass. */
	uint64_t small = sfs_salloc_alloc(h, 16);

	cr_assert_eq(small / SFS_SALLOC_PAGE, o / SFS_SALLOC_PAGE, "first fit reuses the run");
	cr_assert_eq(sfs_salloc_free(h, far), SFS_EUSAGE, "%s", sfs_last_error());
	at_verify(h);
}

/* ---- exhaustion -------------------------------------------------------- */

Test(salloc, exhaustion)
{
	const size_t len = 64 * KiB;
	struct sfs_salloc *h = at_heap(len);
	static uint64_t off[8192];
	struct sfs_salloc_stats before, after;
	uint64_t n = 0, o;

	while ((o = sfs_salloc_alloc(h, 16)) != 0) {
		cr_assert_lt(n, 8192);
		at_fill(sfs_salloc_ptr(h, o), 16, o);
		off[n++] = o;
	}
	cr_assert(strstr(sfs_last_error(), "no room"), "%s", sfs_last_error());
	cr_assert_gt(n, 1000);
	sfs_salloc_stats(h, &before);
	for (int i = 0; i < 10; i++) {
		cr_assert_eq(sfs_salloc_alloc(h, 16), 0);
		cr_assert_eq(sfs_salloc_alloc(h, 1000), 0);
		cr_assert_eq(sfs_salloc_alloc(h, 20000), 0);
	}
	sfs_salloc_stats(h, &after);
	cr_assert_eq(memcmp(&before, &after, sizeof(before)), 0, "failed allocs change nothing");
	at_verify(h);
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(at_check(sfs_salloc_ptr(h, off[i]), 16, off[i]), -1);

	cr_assert_eq(sfs_salloc_free(h, off[n / 2]), 0);
	cr_assert_eq(sfs_salloc_alloc(h, 16), off[n / 2], "room again after a free");
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(sfs_salloc_free(h, off[i]), 0, "%s", sfs_last_error());
	sfs_salloc_stats(h, &after);
	cr_assert_eq(after.in_use, 0);
	sfs_salloc_trim(h);
	sfs_salloc_stats(h, &after);
	cr_assert_eq(after.pages_free, after.pages_total);
	cr_assert_neq(sfs_salloc_alloc(h, after.pages_total * SFS_SALLOC_PAGE), 0);
	at_verify(h);
}

/* ---- randomized model test ------------------------------------------- */

struct at_obj {
	uint64_t off;
	size_t size;
	uint64_t tag;
};

static int at_cmp_off(const void *a, const void *b)
{
	const struct at_obj *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Sizes as state values come: mostly small, some medium, a few large. */
static size_t at_size(uint64_t *seed, size_t large_max)
{
	uint64_t r = th_rand(seed) % 100;

	if (r < 70)
		return 1 + th_rand(seed) % 256;
	if (r < 92)
		return 257 + th_rand(seed) % (SFS_SALLOC_SMALL_MAX - 256);
	return SFS_SALLOC_SMALL_MAX + 1 + th_rand(seed) % large_max;
}

/* Check every live object: pattern, bounds, alignment, no overlap. */
static void at_check_all(struct sfs_salloc *h, struct at_obj *live, size_t n, size_t len)
{
	static struct at_obj sorted[20000];

	memcpy(sorted, live, n * sizeof(*live));
	qsort(sorted, n, sizeof(*sorted), at_cmp_off);
	for (size_t i = 0; i < n; i++) {
		size_t u = sfs_salloc_usable(h, sorted[i].off);

		cr_assert_geq(u, sorted[i].size, "usable %zu < size %zu", u, sorted[i].size);
		cr_assert_leq(sorted[i].off + u, len);
		cr_assert_eq(sorted[i].off % SFS_SALLOC_ALIGN, 0);
		if (i + 1 < n)
			cr_assert_leq(sorted[i].off + u, sorted[i + 1].off,
				      "objects at %lu (+%zu) and %lu overlap", sorted[i].off, u,
				      sorted[i + 1].off);
		cr_assert_eq(at_check(sfs_salloc_ptr(h, sorted[i].off), sorted[i].size,
				      sorted[i].tag), -1, "object at %lu corrupted", sorted[i].off);
	}
}

static void at_model(size_t len, uint64_t seed, int ops, size_t large_max)
{
	struct sfs_salloc *h = at_heap(len);
	static struct at_obj live[20000];
	size_t n = 0, fails = 0, allocs = 0;
	uint64_t tag = 1, in_use = 0, seed0 = seed;
	struct sfs_salloc_stats st;

	for (int op = 0; op < ops; op++) {
		/* Phases: grow (70% allocs) then shrink (30%), so the heap
		 * fills, runs dry, drains and refills. */
		unsigned pct = (op / 5000) % 2 ? 30 : 70;

		if (n < 20000 && (n == 0 || th_rand(&seed) % 100 < pct)) {
			size_t size = at_size(&seed, large_max);
			uint64_t off = sfs_salloc_alloc(h, size);

			if (!off) {
				fails++;
				cr_assert(strstr(sfs_last_error(), "no room"), "%s",
					  sfs_last_error());
				continue;
			}
			allocs++;
			live[n] = (struct at_obj){ off, size, tag++ };
			at_fill(sfs_salloc_ptr(h, off), size, live[n].tag);
			in_use += sfs_salloc_usable(h, off);
			n++;
		} else {
			size_t i = th_rand(&seed) % n;

			cr_assert_eq(at_check(sfs_salloc_ptr(h, live[i].off), live[i].size,
					      live[i].tag), -1, "object at %lu corrupted before free",
				     live[i].off);
			in_use -= sfs_salloc_usable(h, live[i].off);
			cr_assert_eq(sfs_salloc_free(h, live[i].off), 0, "%s", sfs_last_error());
			live[i] = live[--n];
		}
		if (op % 2000 == 0) {
			at_verify(h);
			sfs_salloc_stats(h, &st);
			cr_assert_eq(st.objects, n);
			cr_assert_eq(st.in_use, in_use);
		}
		if (op % 10000 == 0)
			at_check_all(h, live, n, len);
	}
	at_check_all(h, live, n, len);
	at_verify(h);
	cr_assert_gt(allocs, (size_t)ops / 3);
	while (n > 0) {
		cr_assert_eq(sfs_salloc_free(h, live[n - 1].off), 0, "%s", sfs_last_error());
		n--;
	}
	at_verify(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.in_use, 0);
	cr_assert_eq(st.objects, 0);
	cr_assert_eq(st.small_bytes, 0);
	cr_assert_eq(st.large_objects, 0);
	sfs_salloc_trim(h);
	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.pages_free, st.pages_total, "every page back in one run");
	cr_assert_eq(st.pages_slab, 0);
	at_verify(h);
	cr_log_info("model %zu B seed %lu: %zu allocs, %zu full", len, seed0, allocs, fails);
}

Test(salloc, model_roomy, .timeout = 60)
{
	at_model(32 * MiB, 1, 100000, 256 * KiB);
}

/* A small region runs dry all the time: failures must not corrupt. */
Test(salloc, model_tight, .timeout = 60)
{
	at_model(1 * MiB, 2, 100000, 64 * KiB);
}

Test(salloc, model_tiny, .timeout = 60)
{
	at_model(SFS_SALLOC_MIN_PAGES * SFS_SALLOC_PAGE * 4, 3, 50000, 8 * KiB);
}

/* ---- bad headers ------------------------------------------------------- */

Test(salloc, bad_header)
{
	const size_t len = 1 * MiB;
	char *mem = th_map(len);
	struct sfs_salloc *h, *g;
	uint64_t o;

	cr_assert_eq(sfs_salloc_init(mem, len, &h), 0);
	o = sfs_salloc_alloc(h, 100);
	cr_assert_eq(sfs_salloc_attach(mem, len, &g), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_attach(mem + 4096, len - 4096, &g), SFS_EMAGIC);
	cr_assert_eq(sfs_salloc_attach(mem + 64, len, &g), SFS_EUSAGE);
	cr_assert_eq(sfs_salloc_attach(mem, len - 4096, &g), SFS_ECORRUPT);

	h->sa_npages++;
	cr_assert_eq(sfs_salloc_attach(mem, len, &g), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "geometry"), "%s", sfs_last_error());
	h->sa_npages--;
	h->sa_rg.rg_version = 99;
	cr_assert_eq(sfs_salloc_attach(mem, len, &g), SFS_EVERSION);
	cr_assert(strstr(sfs_last_error(), "version 99"), "%s", sfs_last_error());
	h->sa_rg.rg_version = SFS_ALLOC_VERSION;
	h->sa_rg.rg_layout++;
	cr_assert_eq(sfs_salloc_attach(mem, len, &g), SFS_ELAYOUT);
	h->sa_rg.rg_layout--;
	h->sa_rg.rg_magic = SFS_ARENA_MAGIC;
	cr_assert_eq(sfs_salloc_attach(mem, len, &g), SFS_EMAGIC);
	cr_assert(strstr(sfs_last_error(), "expected"), "%s", sfs_last_error());
	h->sa_rg.rg_magic = SFS_SALLOC_MAGIC;
	cr_assert_eq(sfs_salloc_attach(mem, len, &g), 0);

	/* A smashed slab header: verify and free both say corrupt. */
	uint64_t slab = o & ~(uint64_t)(SFS_SALLOC_PAGE - 1);

	*(uint32_t *)(mem + slab) ^= 1;
	cr_assert_eq(sfs_salloc_verify(h), SFS_ECORRUPT);
	cr_assert(strstr(sfs_last_error(), "slab at page"), "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_free(h, o), SFS_ECORRUPT);
	*(uint32_t *)(mem + slab) ^= 1;
	at_verify(h);
	/* A counter off by one is caught too. */
	h->sa_in_use++;
	cr_assert_eq(sfs_salloc_verify(h), SFS_ECORRUPT);
	h->sa_in_use--;
	cr_assert_eq(sfs_salloc_free(h, o), 0);
	at_verify(h);
}

/* A use-after-free write over a free list link is refused, not followed. */
Test(salloc, smashed_free_list)
{
	struct sfs_salloc *h = at_heap(1 * MiB);
	uint64_t a = sfs_salloc_alloc(h, 32), b = sfs_salloc_alloc(h, 32);

	cr_assert(a && b);
	cr_assert_eq(sfs_salloc_free(h, a), 0);
	*(uint32_t *)sfs_salloc_ptr(h, a) = 200;  /* points past the carved objects */
	cr_assert_eq(sfs_salloc_verify(h), SFS_ECORRUPT);
	cr_assert_eq(sfs_salloc_alloc(h, 32), 0);
	cr_assert(strstr(sfs_last_error(), "free list"), "%s", sfs_last_error());
}

/* ---- two mappings ------------------------------------------------------ */

/* A memfd mapped at two addresses in one process: offsets name the same
 * objects through either mapping, metadata included. */
Test(shared, two_mappings)
{
	const size_t len = 4 * MiB;
	int fd = memfd_create("sfs-test-alloc", MFD_CLOEXEC);
	char *a, *b;
	struct sfs_salloc *ha, *hb;
	struct sfs_arena *aa, *ab;
	uint64_t off[200];

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)(2 * len)), 0);
	a = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert(a != MAP_FAILED && b != MAP_FAILED && a != b);

	cr_assert_eq(sfs_salloc_init(a, len, &ha), 0);
	for (int i = 0; i < 200; i++) {
		size_t size = i % 10 == 9 ? 40000 : (size_t)(i * 37 % 3000 + 1);

		off[i] = sfs_salloc_alloc(ha, size);
		cr_assert_neq(off[i], 0);
		at_fill(sfs_off2ptr(a, off[i]), size, (uint64_t)i);
	}
	cr_assert_eq(sfs_salloc_attach(b, len, &hb), 0, "%s", sfs_last_error());
	for (int i = 0; i < 200; i++) {
		size_t size = i % 10 == 9 ? 40000 : (size_t)(i * 37 % 3000 + 1);

		cr_assert_eq(at_check(sfs_off2ptr(b, off[i]), size, (uint64_t)i), -1);
		cr_assert_eq(sfs_ptr2off(b, sfs_off2ptr(b, off[i])), off[i]);
		cr_assert_eq(sfs_salloc_usable(hb, off[i]), sfs_salloc_usable(ha, off[i]));
	}
	/* The owner can move to the other mapping (a restarted process). */
	cr_assert_eq(sfs_salloc_free(hb, off[3]), 0);
	cr_assert_eq(sfs_salloc_usable(ha, off[3]), 0);
	at_verify(ha);

	/* The arena, too. */
	cr_assert_eq(sfs_arena_init(a + len, len, &aa), 0);
	uint64_t o = sfs_arena_alloc(aa, 100, 64);

	at_fill(sfs_arena_ptr(aa, o), 100, 42);
	cr_assert_eq(sfs_arena_attach(b + len, len, &ab), 0);
	cr_assert_eq(sfs_arena_used(ab), sfs_arena_used(aa));
	cr_assert_eq(at_check(sfs_arena_ptr(ab, o), 100, 42), -1);
	cr_assert_eq(sfs_off2ptr_checked(ab, len, o, 100), sfs_arena_ptr(ab, o));
	cr_assert_null(sfs_off2ptr_checked(ab, len, len - 10, 100));
	cr_assert_null(sfs_off2ptr_checked(ab, len, 0, 1));
	cr_assert_null(sfs_off2ptr(ab, 0));
	cr_assert_eq(sfs_ptr2off(ab, NULL), 0);
	munmap(a, 2 * len);
	munmap(b, 2 * len);
}

/* Forked child: the parent (owner) publishes a root object listing its
 * objects; the child maps the memfd afresh at another address, attaches,
 * reads every object, then takes over as owner, allocates objects of its
 * own and publishes them in the root; the parent reads and frees them. */
enum { FK_N = 300, FK_CHILD_N = 50 };

struct fk_root {
	uint64_t n;
	uint64_t off[FK_N];
	uint64_t size[FK_N];
	uint64_t child_n;               /* child: release after its objects */
	uint64_t child_off[FK_CHILD_N];
	uint64_t child_size[FK_CHILD_N];
};

struct fk_arg {
	int fd;
	size_t len;
	uint64_t *root_word;  /* in a MAP_SHARED anonymous page: root offset */
	void *parent_base;
};

static int fk_child(void *p)
{
	struct fk_arg *fa = p;
	struct sfs_salloc *h;
	struct fk_root *root;
	uint64_t root_off;
	char *base;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	base = mmap(NULL, fa->len, PROT_READ | PROT_WRITE, MAP_SHARED, fa->fd, 0);
	if (base == MAP_FAILED)
		return 10;
	if ((void *)base == fa->parent_base)
		return 11;
	if (sfs_salloc_attach(base, fa->len, &h))
		return 12;
	root_off = sfs_load_acquire(fa->root_word);
	root = sfs_off2ptr_checked(base, fa->len, root_off, sizeof(*root));
	if (!root || root->n != FK_N)
		return 13;
	for (int i = 0; i < FK_N; i++) {
		void *o = sfs_off2ptr_checked(base, fa->len, root->off[i], root->size[i]);

		if (!o || at_check(o, root->size[i], root->off[i]) != -1)
			return 14;
		if (sfs_salloc_usable(h, root->off[i]) < root->size[i])
			return 15;
	}
	/* The parent is waiting: ownership passes to us. */
	for (int i = 0; i < FK_CHILD_N; i++) {
		size_t size = 1 + (size_t)i * 611;
		uint64_t off = sfs_salloc_alloc(h, size);

		if (!off)
			return 16;
		at_fill(sfs_off2ptr(base, off), size, off);
		root->child_off[i] = off;
		root->child_size[i] = size;
	}
	if (sfs_salloc_free(h, root->off[0]))
		return 17;
	if (sfs_salloc_verify(h))
		return 18;
	sfs_store_release(&root->child_n, FK_CHILD_N);
	return 0;
}

Test(shared, forked_reader_and_owner, .timeout = 30)
{
	const size_t len = 8 * MiB;
	int fd = memfd_create("sfs-test-alloc-fork", 0);
	uint64_t *ctl = th_map(4096);
	struct sfs_salloc *h;
	struct fk_root *root;
	uint64_t root_off;
	char *base;
	pid_t pid;
	int status;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(base != MAP_FAILED);
	cr_assert_eq(sfs_salloc_init(base, len, &h), 0);
	root_off = sfs_salloc_alloc(h, sizeof(*root));
	cr_assert_neq(root_off, 0);
	root = sfs_off2ptr(base, root_off);
	memset(root, 0, sizeof(*root));
	for (int i = 0; i < FK_N; i++) {
		size_t size = i % 25 == 0 ? 100000 : 1 + (size_t)i * 13;

		root->off[i] = sfs_salloc_alloc(h, size);
		cr_assert_neq(root->off[i], 0);
		root->size[i] = size;
		at_fill(sfs_off2ptr(base, root->off[i]), size, root->off[i]);
	}
	root->n = FK_N;
	sfs_store_release(ctl, root_off);  /* publish */

	struct fk_arg fa = { fd, len, ctl, base };

	pid = th_fork(fk_child, &fa);
	cr_assert_gt(pid, 0);
	status = th_wait(pid, 20000);
	cr_assert_eq(th_exit_code(status), 0, "child failed: status %d", status);

	cr_assert_eq(sfs_load_acquire(&root->child_n), FK_CHILD_N);
	for (int i = 0; i < FK_CHILD_N; i++) {
		uint64_t off = root->child_off[i];

		cr_assert_eq(at_check(sfs_off2ptr(base, off), root->child_size[i], off), -1,
			     "child's object %d", i);
		cr_assert_geq(sfs_salloc_usable(h, off), root->child_size[i]);
		cr_assert_eq(sfs_salloc_free(h, off), 0, "%s", sfs_last_error());
	}
	cr_assert_eq(sfs_salloc_usable(h, root->off[0]), 0, "the child freed it");
	for (int i = 1; i < FK_N; i++)
		cr_assert_eq(sfs_salloc_free(h, root->off[i]), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_salloc_free(h, root_off), 0);
	at_verify(h);

	struct sfs_salloc_stats st;

	sfs_salloc_stats(h, &st);
	cr_assert_eq(st.in_use, 0);
	munmap(base, len);
	close(fd);
}

/* ---- common/hugemem --------------------------------------------------- */

/* Zeroed; from 2 MiB on aligned to 2 MiB (where the huge-page advice can
 * take); an overflowing size is refused, not wrapped.  The zero check
 * guards a reused block only: here jemalloc hands big blocks back to the
 * kernel on free, so the second round's block comes zeroed anyway and
 * dropping the memset is not caught (the alignment and overflow checks
 * are: each fails when its branch is removed). */
Test(hugemem, zeroed_aligned_and_refuses_overflow)
{
	static const size_t sizes[] = { 24, 2 * MiB - 8, 2 * MiB, 3 * MiB + 12 };

	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		for (int round = 0; round < 2; round++) {
			uint8_t *p = sfs_huge_calloc(sizes[z] / 4, 4);

			cr_assert_not_null(p);
			for (size_t i = 0; i < sizes[z]; i++)
				cr_assert_eq(p[i], 0, "%zu bytes: byte %zu is %u", sizes[z], i, p[i]);
			if (sizes[z] >= 2 * MiB)
				cr_assert_eq((uintptr_t)p % (2 * MiB), 0, "%zu bytes at %p", sizes[z],
					     (void *)p);
			memset(p, 0xa5, sizes[z]);	/* dirty: the next round's block may be it */
			free(p);
		}
	}
	cr_assert_null(sfs_huge_calloc(SIZE_MAX / 8, 16));
	cr_assert_null(sfs_huge_calloc((size_t)1 << 62, 8));
}
