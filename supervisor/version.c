/*
 * version.c — `sfs version`: the versions of sfs and of its allocator, and
 * the segment layout fingerprint of this build.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "sfs.h"
#include "shm/segment.h"
#include "supervisor/sup.h"

/* jemalloc is linked as every sfs process's malloc; prove it by asking it.
 * The layout fingerprint is the one this build writes into and demands of
 * a segment (tests/test_segment.c compares it with a test binary's). */
int sfs_cmd_version(int argc, char **argv)
{
	int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
		(int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT,
									       "mallctl");
	const char *jv = NULL;
	size_t len = sizeof(jv);

	printf("sfs %d.%d\n", SFS_VERSION_MAJOR, SFS_VERSION_MINOR);
	printf("layout fingerprint %#018llx\n", (unsigned long long)sfs_layout_fingerprint());
	if (mallctl && mallctl("version", &jv, &len, NULL, 0) == 0)
		printf("allocator jemalloc %s\n", jv);
	else
		printf("allocator libc\n");
	return 0;
}
