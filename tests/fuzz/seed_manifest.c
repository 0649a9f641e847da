/*
 * seed_manifest.c — writes fuzz_manifest's seed corpus into DIR: every
 * file of a small table (snapshots of both kinds, with and without a
 * deletion-vector index, a rebase, an empty commit; manifests with empty,
 * short and long keys; manifest lists; LATEST), each prefixed with the
 * target's mode byte (once raw, once "reseal").
 *
 *   seed_manifest DIR
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "store/table/layout/manifest.h"
#include "sfs.h"

static uint8_t key[1000];

static struct sfs_mf_entry entry(int op, const char *file, int i)
{
	return (struct sfs_mf_entry){ .op = op, .file = file, .level = (uint32_t)i % 4, .rows = 100u * (uint64_t)i,
				      .size = 4096u * (uint64_t)i, .min_key = key,
				      .min_klen = (uint16_t)(i % 3 ? i : 0), .max_key = key + 1,
				      .max_klen = (uint16_t)(i == 5 ? 999 : i + 2), .kg_lo = (uint16_t)i,
				      .kg_hi = (uint16_t)(i * 3) };
}

/* Copy @table/@name to @out/seed-<name>-<mode> for both modes. */
static int emit(const char *table, const char *name, const char *out)
{
	char path[1024];
	uint8_t *buf, *img;
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", table, name);
	if (sfs__layout_read(path, &buf, &len) || !(img = malloc(len + 1)))
		return -1;
	memcpy(img + 1, buf, len);
	free(buf);
	for (int mode = 0; mode < 2; mode++) {
		img[0] = (uint8_t)mode;
		snprintf(path, sizeof(path), "%s/seed-%s-%d", out, name, mode);
		if (!(f = fopen(path, "wb")) || fwrite(img, 1, len + 1, f) != len + 1 || fclose(f)) {
			free(img);
			return -1;
		}
	}
	free(img);
	return 0;
}

int main(int argc, char **argv)
{
	char table[512];
	struct sfs_mf_entry e[6], live[4];
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: seed_manifest DIR\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i / 7);   /* nondecreasing: key+1 >= key bytewise */
	snprintf(table, sizeof(table), "%s/.table", argv[1]);
	sfs_rmtree(table);
	e[0] = entry(SFS_MF_ADD, "a.sst", 1);
	e[1] = entry(SFS_MF_ADD, "b.sst", 2);
	e[2] = entry(SFS_MF_ADD, "c-with-a-longer-name.sst", 5);
	e[3] = entry(SFS_MF_DELETE, "a.sst", 1);
	e[4] = entry(SFS_MF_ADD, "d.sst", 4);
	live[0] = e[1];
	live[1] = e[2];
	live[2] = e[4];
	{
		struct sfs_mf_commit c[] = {
			{ .kind = SFS_MF_DATA, .watermark = 10, .entries = e, .n = 3 },
			{ .kind = SFS_MF_COMPACT, .schema_id = 3, .watermark = 11, .dv_index = "dv-2.index",
			  .entries = e + 3, .n = 2 },
			{ .kind = SFS_MF_DATA, .watermark = UINT64_MAX, .dv_index = "dv-2.index", .rebase = 1,
			  .rebase_entries = live, .rebase_n = 3 },
		};

		for (size_t i = 0; !rc && i < sizeof(c) / sizeof(*c); i++)
			rc = sfs_mf_commit(table, i + 1, &c[i]);
	}
	if (rc || !(d = opendir(table))) {
		fprintf(stderr, "seed_manifest: %s\n", sfs_last_error());
		return 1;
	}
	while (!rc && (de = readdir(d)))
		if (de->d_name[0] != '.')
			rc = emit(table, de->d_name, argv[1]);
	closedir(d);
	sfs_rmtree(table);
	if (rc) {
		fprintf(stderr, "seed_manifest: writing %s failed\n", argv[1]);
		return 1;
	}
	return 0;
}
