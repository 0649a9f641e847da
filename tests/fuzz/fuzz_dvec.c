/*
 * fuzz_dvec.c — libFuzzer target for the deletion-vector index reader
 * (store/table/layout/dvec.c): the input, less its first byte, is written to a temp
 * file, opened, and every vector is looked up by name and decoded.  The
 * first byte picks the mode: odd = reseal every body crc and the index
 * crc first (sfs__dv_reseal), so mutations reach the index and vector
 * parsers; even = the raw bytes.  A crash, leak or sanitizer report is a
 * bug, and so is an opened index that contradicts itself (abort()): a
 * name that find() does not return, a decode that fails or whose set bits
 * differ from the stored count or from lookup().  An error return from
 * open is the expected answer to a bad file.  The file is on tmpfs
 * (/dev/shm): creating files on a disk file system costs more than the
 * parsing.
 *
 *   make fuzz     (with the data-file and manifest targets)
 *
 * Seeds: tests/fuzz/seed_dvec.c writes small valid indexes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/table/layout/dvec.h"

/* Vectors of more rows are only validated (at open), not decoded: a
 * bitmap of SFS_DV_ROWS_MAX rows is 512 MiB, over libFuzzer's limit. */
#define DECODE_ROWS_MAX (1u << 20)

static char path[64];

static void check(const sfs_dv_index_t *ix, size_t i)
{
	static uint64_t bits[DECODE_ROWS_MAX / 64];
	struct sfs_dv_info in;
	uint64_t *got, set = 0;
	size_t w, nw;

	sfs_dv_info(ix, i, &in);
	if (sfs_dv_find(ix, in.file) != (int)i)
		abort();
	if (in.rows > DECODE_ROWS_MAX)
		return;
	nw = sfs_dv_words(in.rows);
	if (sfs_dv_decode(ix, i, bits, sizeof(bits) / 8))
		abort();
	for (size_t k = 0; k < nw; k++)
		set += (uint64_t)__builtin_popcountll(bits[k]);
	if (set != in.deleted)
		abort();
	if (sfs_dv_lookup(ix, in.file, &got, &w) || w != nw || (nw && memcmp(got, bits, nw * 8)))
		abort();
	free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sfs_dv_index_t *ix;
	uint8_t *img;
	FILE *f;

	if (!size)
		return 0;
	if (!path[0])
		snprintf(path, sizeof(path), "/dev/shm/sfs-fuzz-dv-%d", (int)getpid());
	if (!(img = malloc(size)))
		return 0;
	memcpy(img, data + 1, size - 1);
	if (data[0] & 1)
		sfs__dv_reseal(img, size - 1);
	if (!(f = fopen(path, "wb"))) {
		free(img);
		return 0;
	}
	fwrite(img, 1, size - 1, f);
	fclose(f);
	free(img);

	if (sfs_dv_open(path, &ix) == 0) {
		for (size_t i = 0; i < sfs_dv_count(ix); i++)
			check(ix, i);
		if (sfs_dv_find(ix, "") != -ENOENT)   /* never a valid name */
			abort();
		sfs_dv_close(ix);
	}
	unlink(path);
	return 0;
}
