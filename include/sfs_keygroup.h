/*
 * sfs_keygroup.h — key groups without a context: which key group a key
 * belongs to, which worker owns a key group, and the range a worker owns,
 * as every sfs process computes them.  For a program that routes records to
 * the worker owning their key before any state call (an exchange between
 * workers), or keeps state of its own per key group.
 *
 * Flink's assignment: kg = hash(key) mod max_parallelism (default 128);
 * worker i of p owns the contiguous range
 *   start(i) = ceil(i * maxP / p),  end(i) = ceil((i + 1) * maxP / p) - 1 (incl.)
 * (end(i) = start(i + 1) - 1: the ranges tile 0..maxP-1 with no gap, also
 * when p does not divide maxP)
 * and key group kg belongs to worker kg * p / maxP.  The hash is sfs's own
 * byte hash (wyhash's structure: a 128-bit multiply-fold over 16-byte
 * strides), seeded by the key's length; it decides the key group every
 * persisted key carries, so it is part of the format and never changes
 * within a format version.  A key group computed here is the one
 * sfs_key_group_of() gives and the one a worker's state calls accept.
 *
 * Rules: everything here is static inline and pure (no state, no call into
 * the library, no syscall), so it costs what it computes: ~2 multiplies per
 * 16 key bytes for the hash, a multiply and a divide for the rest.  It may
 * be used without attaching to anything.  Names with a double underscore
 * are helpers, not API.
 */
#ifndef SFS_KEYGROUP_H
#define SFS_KEYGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Key groups of a job that does not say (struct sfs_worker_opts). */
#define SFS_MAX_PARALLELISM_DEFAULT 128u

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "sfs_hash_bytes reads 8..16-byte keys as two little-endian words");

#define SFS_HASH_P0 0xa0761d6478bd642full
#define SFS_HASH_P1 0xe7037ed1a0b428dbull
#define SFS_HASH_P2 0x8ebc6af09c88c6e3ull
#define SFS_HASH_P3 0x589965cc75374cc3ull

/* The hash's multiply-fold: the 128-bit product of @a and @b, halves xored. */
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

/* sfs_hash_bytes - the 64-bit hash of @klen bytes at @key under @seed: the
 * byte hash of sfs (its tables derive seeds from what they key on).  A
 * program may use it for tables of its own.  O(klen / 16) multiplies. */
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
 * alone: the key-group hash of a user key, so part of the persisted format.
 */
static inline uint64_t sfs_hash_body(const void *body, size_t len)
{
	return sfs_hash_bytes(sfs_hash_mum(SFS_HASH_P0, (uint64_t)len ^ SFS_HASH_P2), body, len);
}

/* sfs_key_hash - the 64-bit hash of a user key that decides its key group. */
static inline uint64_t sfs_key_hash(const void *key, size_t len)
{
	return sfs_hash_body(key, len);
}

/* sfs_key_group - the key group of @key (@len bytes) among @max_par
 * (1..32768): what sfs_key_group_of() says for a context with that many. */
static inline uint32_t sfs_key_group(const void *key, size_t len, uint32_t max_par)
{
	return (uint32_t)(sfs_key_hash(key, len) % max_par);
}

/* The first and the last key group worker @index of @par owns (@par <=
 * @max_par): Flink's KeyGroupRangeAssignment. */
static inline uint32_t sfs_kg_range_start(uint32_t index, uint32_t par, uint32_t max_par)
{
	return (uint32_t)(((uint64_t)index * max_par + par - 1) / par);
}

static inline uint32_t sfs_kg_range_end(uint32_t index, uint32_t par, uint32_t max_par)
{
	return (uint32_t)(((uint64_t)(index + 1) * max_par - 1) / par);
}

/* sfs_kg_owner - the worker of @par that owns key group @kg. */
static inline uint32_t sfs_kg_owner(uint32_t kg, uint32_t par, uint32_t max_par)
{
	return (uint32_t)((uint64_t)kg * par / max_par);
}

#ifdef __cplusplus
}
#endif
#endif /* SFS_KEYGROUP_H */
