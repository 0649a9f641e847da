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

#include "sfs_keygroup.h"	/* the byte hash and sfs_hash_body: public (key groups) */

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
