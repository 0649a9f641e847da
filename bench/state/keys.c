/*
 * keys.c — the keys of `bench_state` (bs.h): 16 bytes, a bijective mix
 * of a counter (so the same N keys in every structure), and each
 * repetition's sequence of keys drawn uniformly from them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/state/bs.h"

unsigned char *bs_keys;
uint64_t bs_nkeys;
unsigned char *bs_seq;
static uint64_t seq_cap;
volatile uint64_t bs_sink;

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Key i: two mixed words; the first is a bijection of i, so keys are unique. */
static void key_of(uint64_t i, unsigned char *k)
{
	uint64_t a = mix64(i + 0x9e3779b97f4a7c15ull), b = mix64(i ^ 0x5851f42d4c957f2dull);

	memcpy(k, &a, 8);
	memcpy(k + 8, &b, 8);
}

int bs_keys_make(uint64_t n)
{
	free(bs_keys);
	bs_keys = malloc(n * KLEN);
	if (!bs_keys)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		key_of(i, bs_keys + i * KLEN);
	bs_nkeys = n;
	return 0;
}

/* The key sequence of repetition @seed: @ops keys drawn uniformly. */
int bs_seq_make(uint64_t ops, uint64_t seed)
{
	uint64_t x = mix64(seed) | 1;

	if (ops > seq_cap) {
		free(bs_seq);
		bs_seq = malloc(ops * KLEN);
		if (!bs_seq)
			return -ENOMEM;
		seq_cap = ops;
	}
	for (uint64_t i = 0; i < ops; i++) {
		uint64_t idx;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		idx = (uint64_t)(((__uint128_t)x * bs_nkeys) >> 64);
		memcpy(bs_seq + i * KLEN, bs_keys + idx * KLEN, KLEN);
	}
	return 0;
}

void bs_keys_free(void)
{
	free(bs_keys);
	free(bs_seq);
	bs_keys = bs_seq = NULL;
	bs_nkeys = seq_cap = 0;
}
