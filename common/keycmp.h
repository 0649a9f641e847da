/*
 * keycmp.h — the bytewise order of two byte strings (memcmp's, the shorter
 * first when one is a prefix of the other), inline: eight bytes at a time
 * as big-endian words, the tail a byte at a time; and their equality, for
 * the hash probes (write buffer, value cache, join batches, memory store,
 * a data file's page walk).
 *
 * Why not memcmp: the table's keys are 12–40 bytes (key group, state,
 * key, namespace, user key), compared in binary searches over key pages,
 * in sorts of a delta's rows and in the buffer sort's ties; a memcmp call
 * per compare (call, size dispatch, vector setup for a few words) was ~6 %
 * of q4's sampled CPU on the table target (perf, bench/RESULTS.md, issue 7).
 */
#ifndef SFS_COMMON_KEYCMP_H
#define SFS_COMMON_KEYCMP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline int sfs_keycmp(const void *a, size_t alen, const void *b, size_t blen)
{
	const uint8_t *x = a, *y = b;
	size_t n = alen < blen ? alen : blen, i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t u, v;

		memcpy(&u, x + i, 8);
		memcpy(&v, y + i, 8);
		if (u != v) {
			u = __builtin_bswap64(u);
			v = __builtin_bswap64(v);
			return u < v ? -1 : 1;
		}
	}
	for (; i < n; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return (alen > blen) - (alen < blen);
}

/*
 * Are the @n bytes at @a and @b equal?  Keys of 4..32 bytes (every key of
 * the hot paths) are compared inline with overlapping word loads that never
 * read outside either range, instead of a call to memcmp (~18 instructions
 * of call and dispatch for a 20-byte key); longer ones call memcmp.
 */
static inline __attribute__((always_inline)) int sfs_keyeq(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;
	uint64_t u[4], v[4];
	uint32_t s[2], t[2];

	if (n >= 8 && n <= 16) {
		memcpy(&u[0], x, 8);
		memcpy(&v[0], y, 8);
		memcpy(&u[1], x + n - 8, 8);
		memcpy(&v[1], y + n - 8, 8);
		return ((u[0] ^ v[0]) | (u[1] ^ v[1])) == 0;
	}
	if (n > 16 && n <= 32) {
		memcpy(&u[0], x, 8);
		memcpy(&v[0], y, 8);
		memcpy(&u[1], x + 8, 8);
		memcpy(&v[1], y + 8, 8);
		memcpy(&u[2], x + n - 16, 8);
		memcpy(&v[2], y + n - 16, 8);
		memcpy(&u[3], x + n - 8, 8);
		memcpy(&v[3], y + n - 8, 8);
		return ((u[0] ^ v[0]) | (u[1] ^ v[1]) | (u[2] ^ v[2]) | (u[3] ^ v[3])) == 0;
	}
	if (n >= 4 && n < 8) {
		memcpy(&s[0], x, 4);
		memcpy(&t[0], y, 4);
		memcpy(&s[1], x + n - 4, 4);
		memcpy(&t[1], y + n - 4, 4);
		return ((s[0] ^ t[0]) | (s[1] ^ t[1])) == 0;
	}
	return memcmp(a, b, n) == 0;
}

#endif
