/*
 * keygroup.h — key groups as Flink defines them, and the byte layout of a
 * buffered key.
 *
 * kg = hash(key) mod max_parallelism (default 128).  Worker i of p owns the
 * contiguous range Flink's KeyGroupRangeAssignment computes:
 *   start(i) = ceil(i * maxP / p),  end(i) = ceil((i + 1) * maxP / p) - 1 (incl.)
 * (end(i) = start(i + 1) - 1: the ranges tile 0..maxP-1 with no gap, also
 * when p does not divide maxP)
 * and key group kg belongs to worker kg * p / maxP.  Every persisted key
 * starts with its key group, big-endian, so a key-group range is a key
 * range: a restore with another parallelism clips files, never rehashes.
 *
 * The hash is sfs's own (the state is not shared with a JVM, so Flink's
 * murmur-of-hashCode buys nothing): common/hash.h over the key bytes; it is
 * part of the persisted format (it decides the key group).
 *
 * A key inside a write buffer is  kg (2 B, big-endian) | state id (2 B,
 * big-endian) | user key  — memcmp order is key-group major, then state,
 * then key: the compactor's sorted flush splits it per state table without
 * a second sort.
 *
 * It lives in common/ (libc only), not worker/: it is the persisted key
 * format, read and written by every layer above shm/ — the worker, each
 * store engine, the compactor, the runtime and the supervisor.
 */
#ifndef SFS_COMMON_KEYGROUP_H
#define SFS_COMMON_KEYGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/hash.h"

#define SFS_KEY_PREFIX 4u /* kg + state id */

/* The key group of a key, its owner and a worker's range are public:
 * include/sfs_keygroup.h (through common/hash.h). */

/* Write the 4-byte prefix of a buffered key. */
static inline void sfs_key_prefix(unsigned char *out, uint32_t kg, uint32_t state_id)
{
	out[0] = (unsigned char)(kg >> 8);
	out[1] = (unsigned char)kg;
	out[2] = (unsigned char)(state_id >> 8);
	out[3] = (unsigned char)state_id;
}

/* The 4 prefix bytes as one native u32 (what sfs_hash_prefixed takes, and
 * what a hot-path compare loads from a buffered key): a store of it writes
 * the bytes sfs_key_prefix writes. */
static inline uint32_t sfs_key_prefix_word(uint32_t kg, uint32_t state_id)
{
	unsigned char b[4];
	uint32_t w;

	sfs_key_prefix(b, kg, state_id);
	memcpy(&w, b, 4);
	return w;
}

static inline uint32_t sfs_key_prefix_kg(const unsigned char *k)
{
	return (uint32_t)k[0] << 8 | k[1];
}

static inline uint32_t sfs_key_prefix_state(const unsigned char *k)
{
	return (uint32_t)k[2] << 8 | k[3];
}

/*
 * Map and list state.  A map key's parent key is  kg | state | klen (2 B,
 * big-endian) | key  and each entry's key is  parent | user key.  The length
 * makes the parent a prefix of exactly its own entries, so in memcmp order
 * a parent is followed by all its entries and nothing else: the sorted
 * flush sees each map as one contiguous group.
 */
#define SFS_MAP_PREFIX 6u

/* Length of the parent part of a map entry key (0 if malformed). */
static inline uint32_t sfs_map_parent_len(const unsigned char *k, uint32_t klen)
{
	uint32_t n;

	if (klen < SFS_MAP_PREFIX)
		return 0;
	n = SFS_MAP_PREFIX + ((uint32_t)k[4] << 8 | k[5]);
	return n <= klen ? n : 0;
}

/* Buffered head of a map (value of its parent key): the newest entry of
 * this buffer's chain, and where a clear in this buffer happened (entries
 * at lower offsets are shadowed; 0: no clear). */
struct sfs_map_head {
	uint64_t mh_latest;
	uint64_t mh_clear_pos;
};

/* Buffered entry value header: the previous entry of the chain, flags. */
struct sfs_map_ent {
	uint64_t me_prev;
	uint64_t me_flags;          /* SFS_MAP_REMOVED */
};
#define SFS_MAP_REMOVED 1u

#endif
