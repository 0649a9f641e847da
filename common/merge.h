/*
 * merge.h — the merge operators of counter/aggregate state, by index.
 *
 * A state registers its operator's index at start-up (sd_merge in the
 * segment's registry); every process — worker, compactor, readers — maps
 * the index to the same code compiled into libsfs, so no function pointer
 * ever reaches shared memory.  Each operator is associative and
 * commutative on int64 (deltas can be folded in any grouping: inside a
 * buffer's cell, across buffers, over the store's base).
 */
#ifndef SFS_COMMON_MERGE_H
#define SFS_COMMON_MERGE_H

#include <stdint.h>

#include "sfs.h"

static inline int64_t sfs_merge_i64(unsigned op, int64_t a, int64_t b)
{
	switch (op) {
	case SFS_MERGE_MAX: return a > b ? a : b;
	case SFS_MERGE_MIN: return a < b ? a : b;
	default: return (int64_t)((uint64_t)a + (uint64_t)b);	/* add wraps */
	}
}

#endif
