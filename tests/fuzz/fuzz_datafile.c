/*
 * fuzz_datafile.c — libFuzzer target for the data-file reader
 * (store/table/layout/datafile_read.c): the input, less its first byte, is written to a
 * temp file that is then opened, probed and scanned every way the engine
 * reads it.  The first byte picks the mode: odd = reseal every checksum
 * first (sfs__df_reseal), so mutations get past the crc32c checks to the
 * footer, page-structure and decompression code behind them; even = the
 * raw bytes (the checks themselves).  Any crash, leak or sanitizer report
 * is a bug; an error return is the expected answer to a bad file.
 *
 *   make fuzz                 (clang -fsanitize=fuzzer,address; FUZZ_TIME s)
 *
 * Seeds: tests/fuzz/seed_datafile.c writes small valid files of every codec.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/table/layout/datafile.h"

static char path[64];

static void drain(sfs_df_iter_t *it)
{
	struct sfs_df_row row;

	if (!it)
		return;
	while (sfs_df_iter_next(it, &row) == 1)
		if (row.val && row.vlen)
			(void)((volatile const uint8_t *)row.val)[row.vlen - 1];
	sfs_df_iter_close(it);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sfs_df_reader_t *r;
	sfs_df_iter_t *it;
	struct sfs_df_meta m;
	struct sfs_df_key keys[8];
	struct sfs_df_hit out[8];
	uint64_t dv[2] = { 0x5555555555555555ull, 0xf0f0f0f0f0f0f0f0ull };
	uint8_t *img;
	FILE *f;

	if (!size)
		return 0;
	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/sfs-fuzz-df-%d", (int)getpid());
	if (!(img = malloc(size)))
		return 0;
	memcpy(img, data + 1, size - 1);
	if (data[0] & 1)
		sfs__df_reseal(img, size - 1);
	if (!(f = fopen(path, "wb"))) {
		free(img);
		return 0;
	}
	fwrite(img, 1, size - 1, f);
	fclose(f);
	free(img);

	if (sfs_df_reader_open(path, &(struct sfs_df_read_opts){ .cache_pages = 2 }, &r) == 0) {
		sfs_df_reader_meta(r, &m);
		/* probe the file's own bounds, keys cut from the input, a duplicate */
		keys[0] = (struct sfs_df_key){ .p = m.min_key, .len = m.min_klen };
		keys[1] = (struct sfs_df_key){ .p = m.max_key, .len = m.max_klen };
		keys[2] = keys[0];
		for (int i = 3; i < 8; i++) {
			size_t off = (size_t)i * 7 % size, len = (size_t)(data[off] % 24);

			keys[i] = (struct sfs_df_key){ .p = data + off, .len = off + len <= size ? len : size - off };
		}
		sfs_df_probe(r, keys, 8, NULL, 0, 0, out);
		sfs_df_probe(r, keys, 8, dv, 2, SFS_DF_PROBE_PER_LITERAL, out);
		sfs_df_probe(r, keys, 8, dv, 2, SFS_DF_PROBE_SEEK_SPARSE, out);
		for (int i = 0; i < 8; i++)
			if (out[i].found && out[i].val && out[i].vlen)
				(void)((volatile const uint8_t *)out[i].val)[out[i].vlen - 1];
		it = NULL;
		sfs_df_iter_range(r, NULL, 0, NULL, 0, dv, 2, &it);
		drain(it);
		it = NULL;
		sfs_df_iter_kg(r, m.kg_lo, m.kg_lo + (data[0] >> 4), NULL, 0, &it);
		drain(it);
		it = NULL;
		sfs_df_iter_prefix(r, m.max_key, m.max_klen > 3 ? 3 : m.max_klen, NULL, 0, &it);
		drain(it);
		sfs_df_prefix_maybe(r, m.prefix_rule, m.min_key, m.min_klen > 2 ? 2 : m.min_klen);
		sfs_df_prefix_maybe(r, m.prefix_rule, keys[3].p, keys[3].len);
		sfs_df_reader_close(r);
	}
	unlink(path);
	return 0;
}
