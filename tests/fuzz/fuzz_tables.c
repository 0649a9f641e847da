/*
 * fuzz_tables.c — libFuzzer target for TABLES, the table target's
 * checkpoint image (store/table/table_snap.c: sfs_tsnap_parse, the parser
 * of sfs_tsnap_read).  The input, less its first byte, is the file's text;
 * the first byte picks the mode: odd = reseal first (the last "end "
 * line's crc32c is recomputed over the bytes before it), so mutations
 * reach the structure checks behind the checksum; even = the raw bytes.
 * A crash, leak or sanitizer report is a bug, and so is a success whose
 * values break the format's rules (abort()): a name that is not a plain
 * file name, more files than the bytes can hold, a sid or a name twice.
 * An error return is the expected answer to a bad file.
 *
 *   make fuzz-tables     (make fuzz: every target)
 *
 * Seeds: tests/fuzz/seed_tables.c writes TABLES files with sfs_tsnap_write.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/save.h"
#include "common/crc32c.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"

/* table_snap.c's rebuild rewrites map files with the table engine's key
 * prefix; the parser never does, and table.c would bring the whole engine
 * into this link. */
uint32_t sfs__table_map_prefix(const void *key, size_t klen)
{
	(void)key;
	return (uint32_t)klen;
}

static void name_check(const char *s)
{
	size_t n = strnlen(s, 256);

	if (n == 0 || n == 256 || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_tsnap s;
	uint64_t files = 0;
	char *buf;
	size_t n;

	if (!size)
		return 0;
	n = size - 1;
	if (!(buf = malloc(n ? n : 1)))
		return 0;
	memcpy(buf, data + 1, n);
	if (data[0] & 1) {
		/* the last line that starts "end " and is 12 bytes + '\n' */
		for (size_t at = n; at-- > 0;) {
			if ((at == 0 || buf[at - 1] == '\n') && n - at >= 13 && !memcmp(buf + at, "end ", 4)) {
				char hex[9];

				snprintf(hex, sizeof(hex), "%08x", sfs_crc32c(0, buf, at));
				memcpy(buf + at + 4, hex, 8);
				break;
			}
		}
	}
	fuzz_save(buf, n);
	if (sfs_tsnap_parse("TABLES", buf, n, &s) == 0) {
		for (uint32_t t = 0; t < s.ntables; t++) {
			const struct sfs_tsnap_table *tb = &s.tables[t];

			if (tb->nfiles && !tb->files)
				abort();
			if (tb->dvi[0])
				name_check(tb->dvi);
			for (uint32_t f = 0; f < tb->nfiles; f++)
				name_check(tb->files[f].name);
			for (uint32_t u = 0; u < t; u++)
				if (s.tables[u].sid == tb->sid)
					abort();
			files += 1 + tb->nfiles;
		}
		if (files * 11 > n)   /* every line is at least 11 bytes */
			abort();
		sfs_tsnap_free(&s);
	}
	free(buf);
	return 0;
}
