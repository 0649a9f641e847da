/*
 * merge_plugin.c — the `--merge-lib` shared object of test_merge: defines
 * user merge operator 17, "maxabs" (the delta of the larger magnitude; on a
 * tie the larger value, so the fold is associative and commutative).  Its
 * sfs_merge_define comes from the binary that loads it.
 */
#include "sfs.h"

static int64_t maxabs(int64_t acc, int64_t delta)
{
	uint64_t a = acc < 0 ? -(uint64_t)acc : (uint64_t)acc;
	uint64_t d = delta < 0 ? -(uint64_t)delta : (uint64_t)delta;

	if (a != d)
		return a > d ? acc : delta;
	return acc > delta ? acc : delta;
}

int sfs_merge_init(void);

int sfs_merge_init(void)
{
	return sfs_merge_define(17, "maxabs", maxabs);
}
