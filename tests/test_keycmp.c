/*
 * test_keycmp.c — sfs_keycmp (common/keycmp.h) against memcmp's order with
 * the shorter string first on a tie, over random strings of a small
 * alphabet (long shared prefixes, every length 0..40 around the 8-byte
 * words).
 */
#include <criterion/criterion.h>

#include "common/keycmp.h"
#include "tests/helpers.h"

static int ref_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c)
		return c < 0 ? -1 : 1;
	return (al > bl) - (al < bl);
}

Test(keycmp, matches_memcmp_order)
{
	uint64_t seed = 42;
	uint8_t a[48], b[48];

	for (int it = 0; it < 200000; it++) {
		size_t al = th_rand(&seed) % 41, bl = th_rand(&seed) % 41;
		int got, want;

		for (size_t i = 0; i < sizeof(a); i++) {
			a[i] = (uint8_t)(th_rand(&seed) % 3 ? 0x61 : 0x80 + th_rand(&seed) % 2);
			b[i] = i < al && th_rand(&seed) % 8 ? a[i] : (uint8_t)(0x61 + th_rand(&seed) % 2);
		}
		got = sfs_keycmp(a, al, b, bl);
		want = ref_cmp(a, al, b, bl);
		cr_assert_eq(got, want, "lengths %zu %zu: %d, want %d", al, bl, got, want);
		cr_assert_eq(sfs_keycmp(b, bl, a, al), -want);
		cr_assert_eq(sfs_keycmp(a, al, a, al), 0);
	}
}
