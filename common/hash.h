/*
 * hash.h — the one byte-string hash of sfs: wyhash's structure (128-bit
 * multiply-fold over 16-byte strides, overlapping reads for the tail),
 * with a seed each user derives from what it keys on (namespace, state,
 * length).  Fixed constants, so every process computes the same hash; the
 * write buffer, the value cache, the join batches and the key groups all
 * use it.  It decides key groups, which persisted keys carry: changing it
 * is a format change.  Cost: ~2 multiplies per 16 key bytes.
 *
 * Keys with a 4-byte prefix (every buffered key) are hashed in two steps,
 * body then prefix (sfs_hash_prefixed), so that the hash of the body --
 * the key-group hash -- is computed once per operation and reused.
 */
#ifndef SFS_COMMON_HASH_H
#define SFS_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "sfs_hash_bytes reads 8..16-byte keys as two little-endian words");

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
		if (klen >= 8) {
			/* The 4..16 rule below in two loads of the first and
			 * the last 8 bytes, v0 and v1 (the common key lengths;
			 * little-endian: a 32-bit half is a shift or a cast). */
			uint64_t v0 = sfs__hash_r64(p), v1 = sfs__hash_r64(p + klen - 8);

			if (klen < 16) {	/* m = 4 */
				a = v0 << 32 | v0 >> 32;
				b = v1;
			} else {		/* m = 8 */
				a = v0 << 32 | (uint32_t)v1;
				b = (v1 & 0xffffffff00000000ull) | v0 >> 32;
			}
		} else if (klen >= 4) {
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

/*
 * sfs_hash_body - the hash of a byte string under a seed of its length
 * alone.  It is the key-group hash of a user key (common/keygroup.h), so it
 * is part of the persisted format, and it is the "body hash" below.
 */
static inline uint64_t sfs_hash_body(const void *body, size_t len)
{
	return sfs_hash_bytes(sfs_hash_mum(SFS_HASH_P0, (uint64_t)len ^ SFS_HASH_P2), body, len);
}

/*
 * sfs_hash_prefixed - the hash of a key made of a 4-byte prefix @pfx (its
 * bytes as a native u32) and a body, @klen bytes in all, under @seed, from
 * the body's own hash @bh (sfs_hash_body): one multiply-fold of @bh (and
 * the seed) by a multiplier made of the prefix and the length.  Every
 * buffered key is such a key (key group | state | user key:
 * common/keygroup.h), and the state layer has already hashed the user key
 * to find its key group, so the hash of the whole key costs one multiply
 * instead of a second pass over its bytes: the one-hash-per-key rule of
 * the hot path.  The multiplier is never 0: its low half is P2's low half
 * ^ a length below 2^24, whose top byte stays 0x9c; its high half is P2's
 * ^ the prefix (a buffered key's prefix, state id < 256, never cancels it).
 */
static inline uint64_t sfs_hash_prefixed(uint64_t seed, uint32_t pfx, uint64_t klen, uint64_t bh)
{
	return sfs_hash_mum(bh ^ seed ^ SFS_HASH_P0,
			    ((uint64_t)pfx << 32 | (klen & 0xffffffu)) ^ SFS_HASH_P2);
}

/*
 * sfs_hash_key4 - sfs_hash_prefixed of a whole key of @klen >= 4 bytes
 * (prefix, then body): what a caller without the body hash computes.
 */
static inline uint64_t sfs_hash_key4(uint64_t seed, const void *key, size_t klen)
{
	const uint8_t *p = key;

	return sfs_hash_prefixed(seed, (uint32_t)sfs__hash_r32(p), klen, sfs_hash_body(p + 4, klen - 4));
}

/*
 * sfs_hash_key - the hash of a whole key under @seed: prefix + body
 * (sfs_hash_key4) from 4 bytes on, sfs_hash_bytes seeded by (@seed,
 * length) below.  The write buffer (seed: the namespace) and the value
 * cache (seed: namespace and state) place keys with it, so for the same
 * seed both find a buffered key by the one hash the state layer computes.
 */
static inline uint64_t sfs_hash_key(uint64_t seed, const void *key, size_t klen)
{
	if (klen >= 4)
		return sfs_hash_key4(seed, key, klen);
	return sfs_hash_bytes(sfs_hash_mum(seed ^ SFS_HASH_P0, (uint64_t)klen ^ SFS_HASH_P2), key, klen);
}

#endif
