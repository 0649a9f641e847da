/*
 * hash.h — the one byte-string hash of sfs: wyhash's structure (128-bit
 * multiply-fold over 16-byte strides, overlapping reads for the tail),
 * with a seed each user derives from what it keys on (namespace, state,
 * length).  Fixed constants, so every process computes the same hash; the
 * write buffer, the value cache, the join batches and the key groups all
 * use it.  It decides key groups, which persisted keys carry: changing it
 * is a format change.  Cost: ~2 multiplies per 16 key bytes.
 */
#ifndef SFS_COMMON_HASH_H
#define SFS_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SFS_HASH_P0 0xa0761d6478bd642full
#define SFS_HASH_P1 0xe7037ed1a0b428dbull
#define SFS_HASH_P2 0x8ebc6af09c88c6e3ull
#define SFS_HASH_P3 0x589965cc75374cc3ull

static inline uint64_t sfs_hash_mum(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t sfs__hash_r64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint64_t sfs__hash_r32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Hash @klen bytes at @key under @seed (see the users for their seeds). */
static inline uint64_t sfs_hash_bytes(uint64_t seed, const void *key, size_t klen)
{
	const uint8_t *p = key;
	uint64_t a, b;

	if (klen <= 16) {
		if (klen >= 4) {
			size_t m = (klen >> 3) << 2;

			a = sfs__hash_r32(p) << 32 | sfs__hash_r32(p + m);
			b = sfs__hash_r32(p + klen - 4) << 32 | sfs__hash_r32(p + klen - 4 - m);
		} else if (klen > 0) {
			a = (uint64_t)p[0] << 16 | (uint64_t)p[klen >> 1] << 8 | p[klen - 1];
			b = 0;
		} else {
			a = b = 0;
		}
	} else {
		size_t i = klen;

		while (i > 16) {
			seed = sfs_hash_mum(sfs__hash_r64(p) ^ SFS_HASH_P1, sfs__hash_r64(p + 8) ^ seed);
			p += 16;
			i -= 16;
		}
		a = sfs__hash_r64(p + i - 16);
		b = sfs__hash_r64(p + i - 8);
	}
	return sfs_hash_mum(SFS_HASH_P1 ^ klen, sfs_hash_mum(a ^ SFS_HASH_P1, b ^ seed));
}

#endif
