/*
 * seed_tables.c — writes fuzz_tables' seed corpus into DIR: TABLES files
 * written by sfs_tsnap_write, the table target's writer (no tables; one
 * table without files; tables with and without a deletion-vector index,
 * several levels, large row counts), each prefixed with the target's mode
 * byte (once raw, once "reseal").
 *
 *   seed_tables DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/table/table_snap.h"
#include "sfs.h"
#include "tests/fuzz/seed.h"

static int seed(const char *dir, int n, uint32_t ntables, uint32_t nfiles)
{
	struct sfs_tsnap s = { .watermark = 1000ull * (uint64_t)n + 7, .ntables = ntables };
	char path[512];
	FILE *f;
	int rc = 0;

	if (ntables && !(s.tables = calloc(ntables, sizeof(*s.tables))))
		return -1;
	for (uint32_t t = 0; t < ntables && !rc; t++) {
		struct sfs_tsnap_table *tb = &s.tables[t];

		tb->sid = t * 3 + (uint32_t)n;
		tb->nfiles = nfiles;
		if (t & 1)
			snprintf(tb->dvi, sizeof(tb->dvi), "t%u-%016x.dvi", tb->sid, t + 1);
		if (nfiles && !(tb->files = calloc(nfiles, sizeof(*tb->files))))
			rc = -1;
		for (uint32_t i = 0; i < nfiles && !rc; i++) {
			snprintf(tb->files[i].name, sizeof(tb->files[i].name), "t%u-%016x.sst", tb->sid,
				 i + 100 * t);
			tb->files[i].level = i % 4;
			tb->files[i].rows = i == 1 ? UINT64_MAX : (uint64_t)i * 1000 + 1;
		}
	}
	snprintf(path, sizeof(path), "%s/.seed.TABLES", dir);
	if (!rc)
		rc = sfs_tsnap_write(path, &s);
	for (uint32_t t = 0; t < ntables; t++)
		free(s.tables[t].files);
	free(s.tables);
	if (rc || !(f = fopen(path, "rb")))
		return -1;
	return seed_write_moded(f, path, dir, n);
}

int main(int argc, char **argv)
{
	static const uint32_t sets[][2] = { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 2, 3 }, { 5, 8 }, { 3, 40 } };

	if (argc != 2) {
		fprintf(stderr, "usage: seed_tables DIR\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++)
		if (seed(argv[1], (int)i, sets[i][0], sets[i][1])) {
			fprintf(stderr, "seed_tables: %s\n", sfs_last_error());
			return 1;
		}
	return 0;
}
