/*
 * fingerprint.h — layout fingerprints, as LMDB fingerprints its lock file:
 * FNV-1a over the sizes and offsets of a shared struct's fields (and the
 * constants that fix its layout).  Every module with a struct in shared
 * memory keeps one; attach refuses a mismatch, and the segment's own
 * fingerprint (shm/layout.c) folds them all in (the parts above shm/ from
 * store/layout.c's list, shm/layout.h).
 */
#ifndef SFS_COMMON_FINGERPRINT_H
#define SFS_COMMON_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#define SFS_FP_INIT 0xcbf29ce484222325ull

/* Fold the 8 bytes of @v into @h (FNV-1a, byte by byte). */
static inline uint64_t sfs_fp(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= 0x100000001b3ull;
	}
	return h;
}

#define SFS_FP_FIELD(h, type, field) \
	h = sfs_fp(sfs_fp(h, offsetof(type, field)), sizeof(((type *)0)->field))
#define SFS_FP_SIZE(h, type) h = sfs_fp(h, sizeof(type))

#endif
