/*
 * bench_alloc.c — shm/alloc against the process's malloc (jemalloc in sfs
 * builds), run in the same process so the ratio survives a noisy machine.
 *
 *   churn   a working set of W live objects of state-like sizes (70% 1..256 B,
 *           28% up to 16 KiB, 2% up to 64 KiB); each op frees a random one
 *           and allocates a new one in its place.  salloc vs malloc/free.
 *   arena   bump allocations of 8..256 B, 8-aligned, reset when full; vs
 *           malloc of the same sizes freed in batches of the same count.
 *
 * Each object's first byte is written, so both sides pay for touching
 * memory.  Regions are pre-faulted (the segment is, in sfs).  Prints ns/op
 * and the ratio salloc/malloc (< 1: sfs is faster).
 * Usage: bench_alloc [ops (default 5,000,000)]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/err.h"
#include "shm/alloc.h"

#define W 20000

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t state_size(uint64_t *s)
{
	uint64_t r = rnd(s) % 100;

	if (r < 70)
		return 1 + rnd(s) % 256;
	if (r < 98)
		return 257 + rnd(s) % (16384 - 256);
	return 16385 + rnd(s) % (48 * 1024);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 0, len);  /* pre-fault */
	return p;
}

int main(int argc, char **argv)
{
	long ops = argc > 1 ? atol(argv[1]) : 5000000;
	const size_t len = 256ull << 20;
	static uint32_t sizes[1 << 20], slot[1 << 20];
	static uint64_t live_off[W];
	static void *live_ptr[W];
	struct sfs_salloc *h;
	struct sfs_arena *a;
	uint64_t s = 42, t0, t_sa, t_ma, t_ar, t_mb;
	char *base = map(len);
	int rc;

	for (size_t i = 0; i < (1 << 20); i++) {
		sizes[i] = (uint32_t)state_size(&s);
		slot[i] = (uint32_t)(rnd(&s) % W);
	}
	if ((rc = sfs_salloc_init(base, len, &h))) {
		fprintf(stderr, "bench_alloc: %s\n", sfs_last_error());
		return 1;
	}

	/* churn: salloc */
	for (int i = 0; i < W; i++) {
		live_off[i] = sfs_salloc_alloc(h, sizes[i]);
		*(char *)sfs_salloc_ptr(h, live_off[i]) = 1;
	}
	t0 = sfs_now_ns();
	for (long i = 0; i < ops; i++) {
		uint32_t k = slot[i & ((1 << 20) - 1)];

		sfs_salloc_free(h, live_off[k]);
		live_off[k] = sfs_salloc_alloc(h, sizes[(i + W) & ((1 << 20) - 1)]);
		*(char *)sfs_salloc_ptr(h, live_off[k]) = 1;
	}
	t_sa = sfs_now_ns() - t0;
	if (sfs_salloc_verify(h)) {
		fprintf(stderr, "bench_alloc: %s\n", sfs_last_error());
		return 1;
	}

	/* churn: malloc */
	for (int i = 0; i < W; i++) {
		live_ptr[i] = malloc(sizes[i]);
		*(char *)live_ptr[i] = 1;
	}
	t0 = sfs_now_ns();
	for (long i = 0; i < ops; i++) {
		uint32_t k = slot[i & ((1 << 20) - 1)];

		free(live_ptr[k]);
		live_ptr[k] = malloc(sizes[(i + W) & ((1 << 20) - 1)]);
		*(char *)live_ptr[k] = 1;
	}
	t_ma = sfs_now_ns() - t0;
	for (int i = 0; i < W; i++)
		free(live_ptr[i]);

	/* arena: bump + reset, 64 MiB arena */
	const size_t alen = 64ull << 20;
	long batch = 0, nbatch = 0;

	if (sfs_arena_init(base, alen, &a))
		return 1;
	t0 = sfs_now_ns();
	for (long i = 0; i < ops; i++) {
		size_t n = 8 + (sizes[i & ((1 << 20) - 1)] & 0xf8);
		uint64_t off = sfs_arena_alloc(a, n, 8);

		if (!off) {
			sfs_arena_reset(a);
			nbatch++;
			off = sfs_arena_alloc(a, n, 8);
		}
		*(char *)sfs_arena_ptr(a, off) = 1;
	}
	t_ar = sfs_now_ns() - t0;
	batch = nbatch ? ops / (nbatch + 1) : ops;
	if (batch > 500000)
		batch = 500000;

	/* arena baseline: malloc, freed in batches of the same count */
	static void *bp[500000];
	long nb = 0;

	t0 = sfs_now_ns();
	for (long i = 0; i < ops; i++) {
		size_t n = 8 + (sizes[i & ((1 << 20) - 1)] & 0xf8);

		if (nb == batch) {
			while (nb > 0)
				free(bp[--nb]);
		}
		bp[nb] = malloc(n);
		*(char *)bp[nb++] = 1;
	}
	while (nb > 0)
		free(bp[--nb]);
	t_mb = sfs_now_ns() - t0;

	printf("churn  salloc %6.1f ns/op  malloc %6.1f ns/op  ratio %.2f  (W=%d, %ld ops)\n",
	       (double)t_sa / (double)ops, (double)t_ma / (double)ops,
	       (double)t_sa / (double)t_ma, W, ops);
	printf("arena  bump   %6.1f ns/op  malloc %6.1f ns/op  ratio %.2f  (%ld resets)\n",
	       (double)t_ar / (double)ops, (double)t_mb / (double)ops,
	       (double)t_ar / (double)t_mb, nbatch);
	munmap(base, len);
	return 0;
}
