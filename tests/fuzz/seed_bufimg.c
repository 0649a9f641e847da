/*
 * seed_bufimg.c — writes fuzz_bufimg's seed corpus into DIR: small valid
 * buffer images (empty; one entry; every entry kind: puts, overwrites,
 * tombstones, counter cells, a put folded into a cell; a buffer after a
 * reset, whose index holds stale slots of another generation; a full
 * index), each prefixed with the target's mode byte (raw or "reseal",
 * opened deep or shallow).
 *
 *   seed_bufimg DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/table/layout/bufimage.h"
#include "store/table/layout/file.h"
#include "sfs.h"

/* Image @n of a buffer of @keys keys, with one earlier life if @reset. */
static int seed(const char *dir, int n, unsigned keys, unsigned max_entries, int reset)
{
	size_t size = sfs_wbuf_size(max_entries, 64 * keys + 64);
	char path[512], out[600], k[24];
	struct sfs_bufimg_meta m;
	struct sfs_wbuf *b;
	uint8_t *buf, *img;
	void *mem;
	size_t len;
	int rc = 0;

	if (!(mem = aligned_alloc(64, (size + 63) / 64 * 64)) || sfs_wbuf_init(mem, size, max_entries, &b))
		return -1;
	if (reset) {
		for (unsigned i = 0; i < keys; i++)
			sfs_wbuf_put(b, 9, "stale", 5, &i, sizeof(i));
		sfs_wbuf_reset(b);
	}
	for (unsigned i = 0; i < keys && !rc; i++) {
		int64_t one = 1;

		snprintf(k, sizeof(k), "k%u", i);
		switch (i % 5) {
		case 0: rc = sfs_wbuf_put(b, i % 3, k, strlen(k), "value", 1 + i % 5); break;
		case 1: rc = sfs_wbuf_put(b, 1, k, strlen(k), "a", 1) ||
			     sfs_wbuf_put(b, 1, k, strlen(k), "bcdefghijk", 10); break;
		case 2: rc = sfs_wbuf_delete(b, 2, k, strlen(k)); break;
		case 3: rc = sfs_wbuf_merge_add(b, 3, k, strlen(k), 7) ||
			     sfs_wbuf_merge_add(b, 3, k, strlen(k), -1); break;
		case 4: rc = sfs_wbuf_put(b, 4, k, strlen(k), &one, 8) ||
			     sfs_wbuf_merge_add(b, 4, k, strlen(k), 2); break;
		}
	}
	snprintf(path, sizeof(path), "%s/.seed.img", dir);
	m = (struct sfs_bufimg_meta){ .worker = (uint32_t)n, .seq = 10 + (uint64_t)n,
				      .ttl_proc_ms = 1000 * (uint64_t)n, .flags = (uint32_t)n & 1 };
	if (rc || sfs_wbuf_seal(b, 5 + (uint64_t)n) || sfs_bufimg_write(path, b, &m) ||
	    sfs__layout_read(path, &buf, &len) || !(img = malloc(len + 1)))
		return -1;
	free(mem);
	unlink(path);
	memcpy(img + 1, buf, len);
	free(buf);
	for (int mode = 0; mode < 4 && !rc; mode++) {
		FILE *f;

		img[0] = (uint8_t)mode;
		snprintf(out, sizeof(out), "%s/seed-%d-%d", dir, n, mode);
		rc = !(f = fopen(out, "wb")) || fwrite(img, 1, len + 1, f) != len + 1 || fclose(f) ? -1 : 0;
	}
	free(img);
	return rc;
}

int main(int argc, char **argv)
{
	/* keys, max_entries, reset */
	static const unsigned sets[][3] = { { 0, 4, 0 }, { 1, 4, 0 }, { 5, 8, 0 }, { 10, 16, 1 },
					    { 6, 6, 0 }, { 40, 64, 1 } };

	if (argc != 2) {
		fprintf(stderr, "usage: seed_bufimg DIR\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++)
		if (seed(argv[1], (int)i, sets[i][0], sets[i][1], (int)sets[i][2])) {
			fprintf(stderr, "seed_bufimg: %s\n", sfs_last_error());
			return 1;
		}
	return 0;
}
