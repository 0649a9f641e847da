/*
 * seed_datafile.c — writes the fuzz target's seed corpus into DIR: small
 * valid data files (every codec, tiny and default pages, every row kind,
 * an empty and a large value, with and without a prefix filter), each prefixed with the target's mode byte
 * (once raw, once "reseal").
 *
 *   seed_datafile DIR
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/table/layout/datafile.h"
#include "sfs.h"

/* The seeds' prefix rule: the key group (every key has one). */
static uint32_t kg_prefix(const void *key, size_t klen)
{
	(void)key;
	return klen >= 2 ? 2 : 0;
}

static int seed(const char *dir, int n, int codec, uint32_t page_bytes, int rows, int pfx)
{
	char path[512], out[600];
	struct sfs_df_write_opts o = { .codec = codec, .page_bytes = page_bytes,
				       .prefix_of = pfx ? kg_prefix : NULL, .prefix_rule = pfx ? 1 : 0 };
	sfs_df_writer_t *w;
	struct stat sb;
	uint8_t *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/.seed.df", dir);
	if (sfs_df_writer_open(path, &o, &w))
		return -1;
	for (int i = 0; i < rows; i++) {
		uint8_t k[8] = { 0, (uint8_t)(i / 16), 's', (uint8_t)(i >> 8), (uint8_t)i, 'k', 'e', 'y' };
		char v[2048];
		int64_t d = i;
		int kind = i % 5 == 3 ? SFS_DF_DELETE : i % 5 == 4 ? SFS_DF_MERGE : SFS_DF_PUT;
		size_t vl = i % 7 == 0 ? 0 : i == 5 ? sizeof(v) : (size_t)(i % 40);

		memset(v, 'a' + i % 26, sizeof(v));
		if (sfs_df_writer_add(w, k, 2 + (size_t)(i % 7), kind, kind == SFS_DF_MERGE ? (void *)&d : v,
				      kind == SFS_DF_PUT ? vl : kind == SFS_DF_MERGE ? 8 : 0)) {
			/* 2..8-byte prefixes of these keys collide at times: skip */
			continue;
		}
	}
	if (sfs_df_writer_finish(w, NULL) || stat(path, &sb))
		return -1;
	buf = malloc((size_t)sb.st_size + 1);
	fd = open(path, O_RDONLY);
	if (!buf || fd < 0 || read(fd, buf + 1, (size_t)sb.st_size) != sb.st_size)
		return -1;
	close(fd);
	unlink(path);
	for (int mode = 0; mode < 2; mode++) {
		buf[0] = (uint8_t)mode;
		snprintf(out, sizeof(out), "%s/seed-%d-%d", dir, n, mode);
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, (size_t)sb.st_size + 1) != sb.st_size + 1)
			return -1;
		close(fd);
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: seed_datafile DIR\n");
		return 2;
	}
	for (int codec = 0; codec < 3; codec++)
		if (seed(argv[1], n++, codec, 64, 40, 0) || seed(argv[1], n++, codec, 0, 300, 0) ||
		    seed(argv[1], n++, codec, 1, 3, 0) || seed(argv[1], n++, codec, 64, 40, 1)) {
			fprintf(stderr, "seed_datafile: %s\n", sfs_last_error());
			return 1;
		}
	return 0;
}
