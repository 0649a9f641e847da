/*
 * metadata.c — a checkpoint's `_metadata`, the format (metadata.h): its
 * writer (the text of a struct ck_meta, checksum line last) and its strict
 * parser (every line exactly as the writer puts it, formats 1 and 2), with
 * the rule a name in it obeys and the crc32c that seals it.  No file is
 * opened here: ckstore.c writes the text durably (sfs__ck_txn_commit) and reads
 * it back with the checks that need the directory (sfs__ck_read); the parser
 * alone is fuzzed (tests/fuzz/fuzz_metadata.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpointer/metadata.h"
#include "common/crc32c.h"
#include "common/err.h"
#include "common/fs.h"

typedef unsigned long long ull;

/* The cursor of the strict parser: one line at a time, split at single
 * spaces; anything not exactly as sfs__ck_meta_format writes it is refused. */
struct mp {
	const char *p, *end;
	const char *file;
	unsigned line;
	int ntok;
	const char *tok[8];
	size_t tl[8];
};

static int meta_parse_head(struct mp *c, struct ck_meta *m);
static int meta_parse_rest(struct mp *c, struct ck_meta *m);
static int parse_sources(struct mp *c, struct ck_meta *m);
static int hexval(char ch);
static int parse_splits(struct mp *c, struct ck_meta *m);
static int parse_file_line(struct mp *c, const struct ck_meta *m, struct ck_file *f);
static int mp_next(struct mp *c, int max, int rest);
static int mp_kv(struct mp *c, const char *key, uint64_t max, uint64_t *v);
static int mp_count(struct mp *c, const char *key, uint32_t *n);
static int tok_eq(const struct mp *c, int i, const char *s);
static int tok_u64(const struct mp *c, int i, uint64_t max, uint64_t *v);
static int hex32(const char *t, size_t n, uint32_t *v);
static int mp_bad(const struct mp *c, const char *what);
static int mp_bad_name(const struct mp *c, const char *what, const char *name, size_t n);

/* The text of @m (files and sizes as given) with its checksum line. */
int sfs__ck_meta_format(const struct ck_meta *m, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);
	uint32_t crc;

	if (!f)
		return sfs__err(-ENOMEM, "_metadata: no memory");
	fprintf(f, "sfs-checkpoint %u\nid %llu\ntime_ms %llu\njob %s\nworkers %u\nconfig %s\n"
		   "sink_epoch %llu\nsources %u\n", CK_FORMAT_VERSION, (ull)m->id, (ull)m->time_ms,
		m->job, m->workers, m->config, (ull)m->sink_epoch, m->nsources);
	for (uint32_t i = 0; i < m->nsources; i++) {
		fprintf(f, "source %u %u ", m->sources[i].worker, m->sources[i].len);
		for (uint32_t k = 0; k < m->sources[i].len; k++)
			fprintf(f, "%02x", m->sources[i].bytes[k]);
		fputs(m->sources[i].len ? "\n" : "-\n", f);
	}
	fprintf(f, "tables %u\n", m->ntables);
	for (uint32_t i = 0; i < m->ntables; i++)
		fprintf(f, "table %u %llu\n", m->tables[i].worker, (ull)m->tables[i].version);
	fprintf(f, "files %u\n", m->nfiles);
	for (uint32_t i = 0; i < m->nfiles; i++) {
		const struct ck_file *x = &m->files[i];

		fprintf(f, "file %c %s %u %s %llu 0x%08x\n", x->shared ? 's' : 'p', x->path,
			x->worker, x->local, (ull)x->size, x->crc);
	}
	fprintf(f, "total_bytes %llu\nnew_bytes %llu\n", (ull)m->total_bytes, (ull)m->new_bytes);
	if (fflush(f)) {	/* fflush publishes *buf and *len so far */
		fclose(f);
		free(*buf);
		return sfs__err(-ENOMEM, "_metadata: no memory");
	}
	crc = sfs__ck_crc32c(0, *buf, *len);
	fprintf(f, "crc32c 0x%08x\n", crc);
	if (fclose(f)) {
		free(*buf);
		return sfs__err(-ENOMEM, "_metadata: no memory");
	}
	return 0;
}

/* Parse @len bytes of @file: header and version first (an unknown version
 * may have another layout), then the checksum of everything before the
 * last line, then every line in order. */
int sfs__ck_meta_parse(const char *file, const char *buf, size_t len, struct ck_meta *m)
{
	static const char magic[] = "sfs-checkpoint ";
	struct mp c = { .p = buf, .end = buf + len, .file = file };
	const char *last;
	uint32_t stored, crc;
	uint64_t v;
	int rc;

	memset(m, 0, sizeof(*m));
	if (len == 0)
		return sfs__err(SFS_ECORRUPT, "%s: empty (truncated)", file);
	if (len < sizeof(magic) - 1 || memcmp(buf, magic, sizeof(magic) - 1))
		return sfs__err(SFS_EMAGIC, "%s: not checkpoint metadata (no 'sfs-checkpoint' header)", file);
	if ((rc = mp_next(&c, 2, 0)))
		return rc;
	if (c.ntok != 2 || tok_u64(&c, 1, UINT32_MAX, &v))
		return mp_bad(&c, "expected 'sfs-checkpoint VERSION'");
	if (v < 1 || v > CK_FORMAT_VERSION)
		return sfs__err(SFS_EVERSION, "%s: format version %llu, this build reads versions 1 to %u",
				file, (ull)v, CK_FORMAT_VERSION);
	m->version = (uint32_t)v;
	if (buf[len - 1] != '\n')
		return sfs__err(SFS_ECORRUPT, "%s: truncated (no final newline)", file);
	for (last = buf + len - 1; last > buf && last[-1] != '\n'; last--)
		;
	if (last < c.p || buf + len - last != 18 || memcmp(last, "crc32c ", 7) ||
	    hex32(last + 7, 10, &stored))
		return sfs__err(SFS_ECORRUPT, "%s: truncated (no checksum line at the end)", file);
	crc = sfs__ck_crc32c(0, buf, (size_t)(last - buf));
	if (crc != stored)
		return sfs__err(SFS_ECORRUPT, "%s: checksum mismatch (stored 0x%08x, computed 0x%08x)",
				file, stored, crc);
	c.end = last;
	rc = meta_parse_head(&c, m);
	if (!rc)
		rc = meta_parse_rest(&c, m);
	if (rc)
		sfs__ck_meta_free(m);
	return rc;
}

static int meta_parse_head(struct mp *c, struct ck_meta *m)
{
	uint64_t v;
	int rc;

	if ((rc = mp_kv(c, "id", UINT64_MAX, &m->id)) || (rc = mp_kv(c, "time_ms", UINT64_MAX, &m->time_ms)))
		return rc;
	if (!m->id)
		return mp_bad(c, "id 0 is not a checkpoint");
	if ((rc = mp_next(c, 2, 0)))
		return rc;
	if (c->ntok != 2 || !tok_eq(c, 0, "job") || c->tl[1] >= CK_JOB_MAX || !sfs__ck_name_ok(c->tok[1], c->tl[1]))
		return mp_bad(c, "expected 'job NAME'");
	memcpy(m->job, c->tok[1], c->tl[1]);
	if ((rc = mp_kv(c, "workers", 1u << 16, &v)))
		return rc;
	if (!(m->workers = (uint32_t)v))
		return mp_bad(c, "workers must be >= 1");
	if ((rc = mp_next(c, 2, 1)))
		return rc;
	if (c->ntok != 2 || !tok_eq(c, 0, "config") || c->tl[1] >= CK_CONFIG_MAX)
		return mp_bad(c, "expected 'config KEY=VALUE ...'");
	memcpy(m->config, c->tok[1], c->tl[1]);
	if ((rc = mp_kv(c, "sink_epoch", UINT64_MAX, &m->sink_epoch)))
		return rc;
	if (m->version == 1)
		return parse_splits(c, m);
	return parse_sources(c, m);
}

static int meta_parse_rest(struct mp *c, struct ck_meta *m)
{
	uint64_t v, sum = 0;
	int rc;

	if ((rc = mp_count(c, "tables", &m->ntables)))
		return rc;
	if (m->ntables && !(m->tables = calloc(m->ntables, sizeof(*m->tables))))
		return sfs__err(-ENOMEM, "%s: no memory", c->file);
	for (uint32_t i = 0; i < m->ntables; i++) {
		if ((rc = mp_next(c, 3, 0)))
			return rc;
		if (c->ntok != 3 || !tok_eq(c, 0, "table") || tok_u64(c, 1, m->workers - 1, &v) ||
		    tok_u64(c, 2, UINT64_MAX, &m->tables[i].version))
			return mp_bad(c, "expected 'table WORKER VERSION' (WORKER < workers)");
		m->tables[i].worker = (uint32_t)v;
	}
	if ((rc = mp_count(c, "files", &m->nfiles)))
		return rc;
	if (m->nfiles && !(m->files = calloc(m->nfiles, sizeof(*m->files))))
		return sfs__err(-ENOMEM, "%s: no memory", c->file);
	for (uint32_t i = 0; i < m->nfiles; i++) {
		if ((rc = parse_file_line(c, m, &m->files[i])))
			return rc;
		sum += m->files[i].size;
	}
	if ((rc = mp_kv(c, "total_bytes", UINT64_MAX, &m->total_bytes)))
		return rc;
	if (m->total_bytes != sum)
		return mp_bad(c, "total_bytes is not the sum of the file sizes");
	if ((rc = mp_kv(c, "new_bytes", m->total_bytes, &m->new_bytes)))
		return rc;
	if (c->p != c->end) {
		c->line++;
		return mp_bad(c, "unexpected line before the checksum");
	}
	return 0;
}

/* Format 2: "sources N", then N "source WORKER LEN HEX" (HEX "-" when LEN
 * is 0), each worker at most once. */
static int parse_sources(struct mp *c, struct ck_meta *m)
{
	uint64_t w, len;
	int rc;

	if ((rc = mp_count(c, "sources", &m->nsources)))
		return rc;
	if (m->nsources > m->workers)
		return mp_bad(c, "more sources than workers");
	if (m->nsources && !(m->sources = calloc(m->nsources, sizeof(*m->sources))))
		return sfs__err(-ENOMEM, "%s: no memory", c->file);
	for (uint32_t i = 0; i < m->nsources; i++) {
		struct ck_source *x = &m->sources[i];

		if ((rc = mp_next(c, 4, 0)))
			return rc;
		if (c->ntok != 4 || !tok_eq(c, 0, "source") || tok_u64(c, 1, m->workers - 1, &w) ||
		    tok_u64(c, 2, CK_SOURCE_MAX, &len) ||
		    (len ? c->tl[3] != 2 * len : !tok_eq(c, 3, "-")))
			return mp_bad(c, "expected 'source WORKER LEN HEX' (WORKER < workers, "
				      "LEN <= 4096, 2*LEN hex digits or '-')");
		for (uint32_t k = 0; k < i; k++)
			if (m->sources[k].worker == w)
				return mp_bad(c, "a worker's source twice");
		x->worker = (uint32_t)w;
		x->len = (uint32_t)len;
		if (len && !(x->bytes = malloc(len)))
			return sfs__err(-ENOMEM, "%s: no memory", c->file);
		for (uint64_t k = 0; k < len; k++) {
			int hi = hexval(c->tok[3][2 * k]), lo = hexval(c->tok[3][2 * k + 1]);

			if (hi < 0 || lo < 0)
				return mp_bad(c, "a source's bytes: lowercase hex digits");
			x->bytes[k] = (uint8_t)(hi << 4 | lo);
		}
	}
	return 0;
}

static int hexval(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Format 1: "splits N", then N "split INDEX OFFSET". */
static int parse_splits(struct mp *c, struct ck_meta *m)
{
	uint64_t v;
	int rc;

	if ((rc = mp_count(c, "splits", &m->nsplits)))
		return rc;
	if (m->nsplits && !(m->splits = calloc(m->nsplits, sizeof(*m->splits))))
		return sfs__err(-ENOMEM, "%s: no memory", c->file);
	for (uint32_t i = 0; i < m->nsplits; i++) {
		if ((rc = mp_next(c, 3, 0)))
			return rc;
		if (c->ntok != 3 || !tok_eq(c, 0, "split") || tok_u64(c, 1, UINT32_MAX, &v) ||
		    tok_u64(c, 2, UINT64_MAX, &m->splits[i].offset))
			return mp_bad(c, "expected 'split INDEX OFFSET'");
		m->splits[i].split = (uint32_t)v;
	}
	return 0;
}

static int parse_file_line(struct mp *c, const struct ck_meta *m, struct ck_file *f)
{
	char want[CK_PATH_MAX + 32];
	uint64_t w, size;
	int rc = mp_next(c, 7, 0);

	if (rc)
		return rc;
	if (c->ntok != 7 || !tok_eq(c, 0, "file") || c->tl[1] != 1 ||
	    (c->tok[1][0] != 's' && c->tok[1][0] != 'p'))
		return mp_bad(c, "expected 'file s|p PATH WORKER LOCAL SIZE CRC32C'");
	if (tok_u64(c, 3, m->workers - 1, &w) || tok_u64(c, 5, UINT64_MAX, &size) ||
	    hex32(c->tok[6], c->tl[6], &f->crc))
		return mp_bad(c, "bad worker (>= workers), size or crc32c");
	if (!sfs__ck_name_ok(c->tok[4], c->tl[4]))
		return mp_bad_name(c, "bad local name", c->tok[4], c->tl[4]);
	if (c->tl[2] >= CK_PATH_MAX)
		return mp_bad_name(c, "path too long", c->tok[2], c->tl[2]);
	f->shared = c->tok[1][0] == 's';
	f->worker = (uint32_t)w;
	f->size = size;
	memcpy(f->path, c->tok[2], c->tl[2]);
	f->path[c->tl[2]] = 0;
	memcpy(f->local, c->tok[4], c->tl[4]);
	f->local[c->tl[4]] = 0;
	/* Paths stay inside the storage root: shared/<one name> or exactly
	 * this checkpoint's chk-<id>/w<worker>/<local>. */
	if (f->shared) {
		if (strncmp(f->path, "shared/", 7) || !sfs__ck_name_ok(f->path + 7, strlen(f->path + 7)))
			return mp_bad_name(c, "shared path must be shared/<name>", f->path,
					   strlen(f->path));
		return 0;
	}
	snprintf(want, sizeof(want), "chk-%llu/w%u/%s", (ull)m->id, f->worker, f->local);
	return strcmp(want, f->path) ? mp_bad_name(c, "private path must be chk-<id>/w<worker>/<local>",
						   f->path, strlen(f->path)) : 0;
}

/* The next line as at most @max fields; @rest: the last field takes the
 * rest of the line, spaces and all (the config), and may be empty. */
static int mp_next(struct mp *c, int max, int rest)
{
	const char *s = c->p, *nl = c->p < c->end ? memchr(c->p, '\n', (size_t)(c->end - c->p)) : NULL;

	c->line++;
	if (!nl)
		return mp_bad(c, "missing (truncated)");
	for (const char *q = s; q < nl; q++)
		if ((unsigned char)*q < ' ' || (unsigned char)*q >= 0x7f)
			return mp_bad(c, "control or non-ASCII byte");
	c->p = nl + 1;
	for (c->ntok = 0;;) {
		int last = rest && c->ntok == max - 1;
		const char *sp = last ? NULL : memchr(s, ' ', (size_t)(nl - s));
		const char *e = sp ? sp : nl;

		if (c->ntok == max)
			return mp_bad(c, "too many fields");
		if (e == s && !last)
			return mp_bad(c, "empty field (a double or trailing space)");
		c->tok[c->ntok] = s;
		c->tl[c->ntok++] = (size_t)(e - s);
		if (!sp)
			return 0;
		s = sp + 1;
	}
}

/* "key N", N <= max. */
static int mp_kv(struct mp *c, const char *key, uint64_t max, uint64_t *v)
{
	char what[80];
	int rc = mp_next(c, 2, 0);

	if (rc)
		return rc;
	if (c->ntok == 2 && tok_eq(c, 0, key) && !tok_u64(c, 1, max, v))
		return 0;
	snprintf(what, sizeof(what), "expected '%s N' (N <= %llu)", key, (ull)max);
	return mp_bad(c, what);
}

/* A count of lines that follow: bounded by what the file can hold, so a
 * corrupt count cannot make us allocate gigabytes. */
static int mp_count(struct mp *c, const char *key, uint32_t *n)
{
	uint64_t v;
	int rc = mp_kv(c, key, CK_LIST_MAX, &v);

	if (!rc && v > (uint64_t)(c->end - c->p) / 8)
		rc = mp_bad(c, "count larger than the rest of the file (truncated?)");
	*n = (uint32_t)v;
	return rc;
}

static int tok_eq(const struct mp *c, int i, const char *s)
{
	return c->tl[i] == strlen(s) && !memcmp(c->tok[i], s, c->tl[i]);
}

/* Canonical decimal (no sign, no leading zero) not above @max. */
static int tok_u64(const struct mp *c, int i, uint64_t max, uint64_t *v)
{
	const char *t = c->tok[i];
	size_t n = c->tl[i];
	uint64_t x = 0;

	if (n == 0 || n > 20 || (n > 1 && t[0] == '0'))
		return -1;
	for (size_t k = 0; k < n; k++) {
		if (t[k] < '0' || t[k] > '9' || x > (UINT64_MAX - (uint64_t)(t[k] - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(t[k] - '0');
	}
	if (x > max)
		return -1;
	*v = x;
	return 0;
}

/* "0x" and exactly 8 lowercase hex digits. */
static int hex32(const char *t, size_t n, uint32_t *v)
{
	uint32_t x = 0;

	if (n != 10 || t[0] != '0' || t[1] != 'x')
		return -1;
	for (size_t k = 2; k < 10; k++) {
		int d = t[k] >= '0' && t[k] <= '9' ? t[k] - '0' : t[k] >= 'a' && t[k] <= 'f' ? t[k] - 'a' + 10 : -1;

		if (d < 0)
			return -1;
		x = x << 4 | (uint32_t)d;
	}
	*v = x;
	return 0;
}

static int mp_bad(const struct mp *c, const char *what)
{
	return sfs__err(SFS_ECORRUPT, "%s: line %u: %s", c->file, c->line, what);
}

/* A bad name or path of a line, named (escaped: it came from the file). */
static int mp_bad_name(const struct mp *c, const char *what, const char *name, size_t n)
{
	char show[4 * 64 + 1];

	return sfs__err(SFS_ECORRUPT, "%s: line %u: %s: '%s' (empty, '/', '.', '..', a space, "
			"a control byte or over %u bytes)", c->file, c->line, what,
			sfs_name_show(name, n, show, sizeof(show)), CK_LOCAL_MAX);
}

/* 1..CK_LOCAL_MAX printable bytes without space or '/', not "." or "..":
 * a name that can neither split a metadata line nor leave its directory. */
int sfs__ck_name_ok(const char *s, size_t len)
{
	if (len > CK_LOCAL_MAX || !sfs_name_is_plain(s, len))
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] == ' ' || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

int sfs__ck_meta_config(const struct ck_meta *m, const char *key, char *val, size_t len)
{
	size_t kl = strlen(key);

	for (const char *p = m->config; *p;) {
		const char *end = strchr(p, ' ');
		size_t tl = end ? (size_t)(end - p) : strlen(p);

		if (tl > kl && !strncmp(p, key, kl) && p[kl] == '=') {
			if (tl - kl - 1 >= len)
				return -ERANGE;
			memcpy(val, p + kl + 1, tl - kl - 1);
			val[tl - kl - 1] = 0;
			return 0;
		}
		p += tl + (end != NULL);
	}
	return -ENOENT;
}

void sfs__ck_meta_free(struct ck_meta *m)
{
	free(m->splits);
	for (uint32_t i = 0; m->sources && i < m->nsources; i++)
		free(m->sources[i].bytes);
	free(m->sources);
	free(m->tables);
	free(m->files);
	memset(m, 0, sizeof(*m));
}

/* The implementation is common/crc32c.c (shared with the table store's data
 * files); these keep ckstore's names. */
uint32_t sfs__ck_crc32c_table(uint32_t crc, const void *p, size_t n)
{
	return sfs__crc32c_table(crc, p, n);
}

uint32_t sfs__ck_crc32c(uint32_t crc, const void *p, size_t n)
{
	return sfs_crc32c(crc, p, n);
}
