/*
 * fuzz_metadata.c — libFuzzer target for a checkpoint's `_metadata` reader
 * (checkpointer/metadata.c: sfs__ck_meta_parse, the strict parser of sfs__ck_read,
 * formats 1 and 2).  The input, less its first byte, is the file's text;
 * the first byte picks the mode: odd = reseal first (the last line, if it
 * is a checksum line, is replaced by the crc32c of everything before it),
 * so mutations reach the line parsers behind the checksum; even = the raw
 * bytes (the header, version and checksum checks themselves).  A crash,
 * leak or sanitizer report is a bug, and so is a success whose values
 * break the format's rules (abort()): a worker index >= workers, a source
 * longer than CK_SOURCE_MAX, a path outside the storage root, sizes that
 * do not add up.  An error return is the expected answer to a bad file.
 *
 *   make fuzz-metadata     (make fuzz: every target)
 *
 * Seeds: tests/fuzz/seed_metadata.c commits real checkpoints with ck_*.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/save.h"
#include "checkpointer/metadata.h"
#include "common/crc32c.h"

static int str_ok(const char *s, size_t cap)
{
	return memchr(s, 0, cap) != NULL;
}

/* A relative path none of whose components is empty, "." or "..": it
 * stays inside the storage root. */
static int inside(const char *p)
{
	if (p[0] == '/' || !p[0])
		return 0;
	for (const char *c = p;;) {
		size_t n = strcspn(c, "/");

		if (n == 0 || (c[0] == '.' && (n == 1 || (n == 2 && c[1] == '.'))))
			return 0;
		if (!c[n])
			return 1;
		c += n + 1;
	}
}

static void check(const struct ck_meta *m, size_t len)
{
	uint64_t sum = 0;
	char val[CK_CONFIG_MAX];

	if (m->version < 1 || m->version > CK_FORMAT_VERSION || !m->id || !m->workers ||
	    !str_ok(m->job, sizeof(m->job)) || !m->job[0] || !str_ok(m->config, sizeof(m->config)) ||
	    m->nsources > m->workers || (m->nsources && !m->sources) ||
	    (m->ntables && !m->tables) || (m->nfiles && !m->files) || (m->nsplits && !m->splits) ||
	    (uint64_t)m->nsources + m->ntables + m->nfiles + m->nsplits > len / 8)
		abort();
	for (uint32_t i = 0; i < m->nsources; i++) {
		const struct ck_source *s = &m->sources[i];
		volatile uint8_t x = 0;

		if (s->worker >= m->workers || s->len > CK_SOURCE_MAX || (s->len && !s->bytes))
			abort();
		for (uint32_t k = 0; k < s->len; k++)
			x ^= s->bytes[k];
		for (uint32_t k = 0; k < i; k++)
			if (m->sources[k].worker == s->worker)
				abort();
	}
	for (uint32_t i = 0; i < m->ntables; i++)
		if (m->tables[i].worker >= m->workers)
			abort();
	for (uint32_t i = 0; i < m->nfiles; i++) {
		const struct ck_file *f = &m->files[i];

		if (f->worker >= m->workers || !str_ok(f->path, sizeof(f->path)) ||
		    !str_ok(f->local, sizeof(f->local)) || !inside(f->path) ||
		    (f->shared ? strncmp(f->path, "shared/", 7) : strncmp(f->path, "chk-", 4)))
			abort();
		sum += f->size;
	}
	if (sum != m->total_bytes || m->new_bytes > m->total_bytes)
		abort();
	sfs__ck_meta_config(m, "query", val, sizeof(val));
	sfs__ck_meta_config(m, "states", val, sizeof(val));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ck_meta m;
	char *buf;
	size_t n;

	if (!size)
		return 0;
	n = size - 1;
	if (!(buf = malloc(n + 20)))
		return 0;
	memcpy(buf, data + 1, n);
	if (data[0] & 1) {
		size_t last = n;

		while (last > 0 && buf[last - 1] != '\n')
			last--;
		if (n - last >= 7 && !memcmp(buf + last, "crc32c ", 7))
			n = last;
		else if (last == n && n > 0) {   /* ends in '\n': the last whole line */
			size_t s = n - 1;

			while (s > 0 && buf[s - 1] != '\n')
				s--;
			if (n - s >= 7 && !memcmp(buf + s, "crc32c ", 7))
				n = s;
		}
		n += (size_t)snprintf(buf + n, 20, "crc32c 0x%08x\n", sfs_crc32c(0, buf, n));
	}
	fuzz_save(buf, n);
	if (sfs__ck_meta_parse("_metadata", buf, n, &m) == 0) {
		check(&m, n);
		sfs__ck_meta_free(&m);
	}
	free(buf);
	return 0;
}
