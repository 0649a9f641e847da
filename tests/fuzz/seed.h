/*
 * seed.h — what the seed writers of the harnesses with a mode byte share
 * (seed_memdump.c, seed_sinklog.c, seed_tables.c): a file the real writer
 * made becomes two corpus entries, one per mode of the harness's first
 * byte (0: the bytes as they are; 1: resealed after each mutation — see
 * the harness).
 */
#ifndef SFS_TESTS_FUZZ_SEED_H
#define SFS_TESTS_FUZZ_SEED_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* @f: @path opened for reading.  Closes it, removes @path and writes
 * @dir/seed-@n-0 and @dir/seed-@n-1.  0, or -1. */
static int seed_write_moded(FILE *f, const char *path, const char *dir, int n)
{
	char out[600];
	char *buf;
	long sz;
	int rc = 0;

	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	if (sz < 0 || !(buf = malloc((size_t)sz + 1)) ||
	    fread(buf + 1, 1, (size_t)sz, f) != (size_t)sz) {
		fclose(f);
		free(sz < 0 ? NULL : buf);
		return -1;
	}
	fclose(f);
	unlink(path);
	for (int mode = 0; mode < 2 && !rc; mode++) {
		buf[0] = (char)mode;
		snprintf(out, sizeof(out), "%s/seed-%d-%d", dir, n, mode);
		rc = !(f = fopen(out, "wb")) || fwrite(buf, 1, (size_t)sz + 1, f) != (size_t)sz + 1 ||
		     fclose(f) ? -1 : 0;
	}
	free(buf);
	return rc;
}

#endif
