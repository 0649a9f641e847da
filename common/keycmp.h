/*
 * keycmp.h — the bytewise order of two byte strings (memcmp's, the shorter
 * first when one is a prefix of the other), inline: eight bytes at a time
 * as big-endian words, the tail a byte at a time.
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

#endif
