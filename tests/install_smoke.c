/*
 * install_smoke.c — a program built against an installed sfs with nothing
 * but pkg-config's flags (tests/e2e_install.sh builds it twice: against
 * libsfs.so and against libsfs.a).  It attaches nothing: it calls three
 * public functions that need no segment and prints what they return, one
 * "name: value" line each, for the test to compare.
 */
#include <inttypes.h>
#include <stdio.h>

#include <sfs.h>

/* A user merge operator: the delta of the larger magnitude (ties: the
 * larger value), associative and commutative as sfs_merge_define asks. */
static int64_t maxabs(int64_t acc, int64_t delta)
{
	uint64_t a = acc < 0 ? -(uint64_t)acc : (uint64_t)acc;
	uint64_t d = delta < 0 ? -(uint64_t)delta : (uint64_t)delta;

	if (a != d)
		return a > d ? acc : delta;
	return acc > delta ? acc : delta;
}

int main(void)
{
	int rc;

	printf("version: %d.%d\n", SFS_VERSION_MAJOR, SFS_VERSION_MINOR);
	printf("sfs_strerror(SFS_EUSAGE): %s\n", sfs_strerror(SFS_EUSAGE));
	printf("sfs_worker_region_bytes(NULL): %" PRIu64 "\n", sfs_worker_region_bytes(NULL));
	rc = sfs_merge_define(SFS_MERGE_USER, "maxabs", maxabs);
	printf("sfs_merge_define(SFS_MERGE_USER, maxabs): %d\n", rc);
	/* A built-in index is refused: the library's checks run, not a stub. */
	printf("sfs_merge_define(SFS_MERGE_ADD, maxabs): %s\n",
	       sfs_strerror(sfs_merge_define(SFS_MERGE_ADD, "maxabs", maxabs)));
	return rc == 0 ? 0 : 1;
}
