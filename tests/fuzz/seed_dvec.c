/*
 * seed_dvec.c — writes fuzz_dvec's seed corpus into DIR: small valid
 * deletion-vector indexes (empty; one vector of each encoding; boundary
 * row counts 0, 1, 63, 64, 65; a long run; many vectors), each prefixed
 * with the target's mode byte (once raw, once "reseal").
 *
 *   seed_dvec DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/table/layout/dvec.h"
#include "sfs.h"

/* Index @n of vectors @first..@first+@count of the generator below. */
static int seed(const char *dir, int n, int first, int count)
{
	static const uint64_t rows[] = { 0, 1, 63, 64, 65, 130, 1000, 5000 };
	char path[512], out[600], name[32];
	sfs_dv_builder_t *b;
	uint8_t *buf, *img;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "%s/.seed.dv", dir);
	if (sfs_dv_builder_new(&b))
		return -1;
	for (int v = first; v < first + count; v++) {
		uint64_t r = rows[v % 8], bits[80] = { 0 };

		for (uint64_t p = 0; p < r; p++)   /* sparse, dense, a long run, empty */
			if (v % 4 == 0 ? p % 37 == 1 : v % 4 == 1 ? (p * 7 + (uint64_t)v) % 3 != 0 :
			    v % 4 == 2 ? p >= r / 4 && p < r - r / 4 : 0)
				bits[p / 64] |= 1ull << (p % 64);
		snprintf(name, sizeof(name), "data-%03d.sst", v);
		if (sfs_dv_builder_add(b, name, r, bits, 80)) {
			sfs_dv_builder_free(b);
			return -1;
		}
	}
	rc = sfs_dv_builder_write(b, path);
	sfs_dv_builder_free(b);
	if (rc || sfs__layout_read(path, &buf, &len) || !(img = malloc(len + 1)))
		return -1;
	unlink(path);
	memcpy(img + 1, buf, len);
	free(buf);
	for (int mode = 0; mode < 2 && !rc; mode++) {
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
	static const int sets[][2] = { { 0, 0 }, { 0, 1 }, { 1, 1 }, { 2, 1 }, { 4, 1 }, { 6, 1 },
				       { 5, 3 }, { 0, 8 }, { 8, 24 } };

	if (argc != 2) {
		fprintf(stderr, "usage: seed_dvec DIR\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++)
		if (seed(argv[1], (int)i, sets[i][0], sets[i][1])) {
			fprintf(stderr, "seed_dvec: %s\n", sfs_last_error());
			return 1;
		}
	return 0;
}
