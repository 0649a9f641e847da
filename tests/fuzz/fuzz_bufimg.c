/*
 * fuzz_bufimg.c — libFuzzer target for the buffer image reader
 * (store/table/layout/bufimage.c): the input, less its first byte, is
 * written to a temp file and opened (mapped read-only); an accepted image
 * is then read through the write buffer's own readers, as the workers'
 * read path and the first merge will.  The first byte picks the mode: odd
 * = reseal the body and header crcs first (sfs__bufimg_reseal), so
 * mutations reach the structural checks; even = the raw bytes.  A crash,
 * leak or sanitizer report is a bug, and so is an accepted image that
 * contradicts itself (abort()): a walked entry that get does not find at
 * the same offset, a walk that does not count the header's live keys, a
 * sort that fails or returns another count.  Bit 1 of the first byte set:
 * the shallow open of the live path (SFS_BUFIMG_SHALLOW), after which only
 * memory safety is asked of the readers (the index is not verified).  An error return from open is
 * the expected answer to a bad file.  The file is on tmpfs (/dev/shm).
 * A finding's bytes (tests/fuzz/save.h) go under tests/fuzz/regress/bufimg/.
 *
 *   make fuzz-bufimg
 *
 * Seeds: tests/fuzz/seed_bufimg.c writes small valid images.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/table/layout/bufimage.h"
#include "tests/fuzz/save.h"

static char path[64];

static void check(const struct sfs_bufimg *im)
{
	struct sfs_wbuf_iter it = { 0 };
	struct sfs_wbuf_view v, g;
	uint64_t n = 0, *offs;
	size_t got;
	int rc;

	while ((rc = sfs_wbuf_next(im->b, &it, &v)) == 0) {
		n++;
		if (sfs_wbuf_get(im->b, v.ns, v.key, v.klen, &g) || g.off != v.off ||
		    sfs_wbuf_view_at(im->b, v.off, &g) || g.kind != v.kind)
			abort();
		if (v.value && v.len)   /* touch the value's last byte */
			n += ((const volatile uint8_t *)v.value)[v.len - 1] & 0;
	}
	if (rc != -ENOENT || n != im->live)
		abort();
	if (!(offs = malloc((n + 1) * 8)))
		return;
	if (sfs_wbuf_sorted(im->b, offs, n + 1, &got) || got != n)
		abort();
	free(offs);
}

/* A shallow-opened image (the live path's): the index is not verified,
 * so answers may disagree; only memory safety and bounded work are
 * asked of the readers. */
static void shallow(const struct sfs_bufimg *im)
{
	struct sfs_wbuf_iter it = { 0 };
	struct sfs_wbuf_view v, g;
	uint64_t *offs;
	size_t got, cap = 4096;
	int rc;

	while ((rc = sfs_wbuf_next(im->b, &it, &v)) != -ENOENT) {
		if (rc)
			continue;	/* a bad slot: the cursor moved past it */
		(void)sfs_wbuf_get(im->b, v.ns, v.key, v.klen, &g);
		if (v.value && v.len)
			(void)((const volatile uint8_t *)v.value)[v.len - 1];
	}
	if ((offs = malloc(cap * 8))) {
		(void)sfs_wbuf_sorted(im->b, offs, cap, &got);
		free(offs);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_bufimg *im;
	uint8_t *img;
	FILE *f;

	if (!size)
		return 0;
	if (!path[0])
		snprintf(path, sizeof(path), "/dev/shm/sfs-fuzz-bi-%d", (int)getpid());
	if (!(img = malloc(size)))
		return 0;
	memcpy(img, data + 1, size - 1);
	if (data[0] & 1)
		sfs__bufimg_reseal(img, size - 1);
	fuzz_save(img, size - 1);
	if (!(f = fopen(path, "wb"))) {
		free(img);
		return 0;
	}
	fwrite(img, 1, size - 1, f);
	fclose(f);
	free(img);

	if (!(data[0] & 2) && sfs_bufimg_open(path, &im) == 0) {
		check(im);
		sfs_bufimg_close(im);
	} else if ((data[0] & 2) && sfs_bufimg_open_ex(path, SFS_BUFIMG_SHALLOW, &im) == 0) {
		shallow(im);
		sfs_bufimg_close(im);
	}
	unlink(path);
	return 0;
}
