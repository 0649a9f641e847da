/*
 * table_snap.c — the `table` target's checkpoint image (TABLES, format and
 * rules in table_snap.h) and its rescale at restore (sfs_tsnap_rebuild).
 *
 * TABLES is small metadata, read and written whole.  Its I/O is done here
 * with common/fs.h's sfs_file_commit (tmp + fsync + rename) plus a
 * directory fsync rather than layout/'s internal helpers, so this module
 * depends only on the public halves of store/table/layout/datafile.h and store/table/layout/dvec.h.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/fs.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/dvec.h"
#include "store/table/table.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"

typedef unsigned long long ull;

#define MAGIC "sfs-tables "
#define MAGIC_LEN (sizeof(MAGIC) - 1)
#define NAME_MAX_ 255u
#define READ_MAX (256u << 20)     /* a TABLES of millions of files is a bug, not a snapshot */
#define FILE_LINE_MIN 11u         /* "file a 0 0\n": bounds a declared file count */

/* A plain name of the flat directory that also survives space splitting. */
static int name_ok(const char *s, size_t n)
{
	return n <= NAME_MAX_ && sfs_name_is_plain(s, n) && !memchr(s, ' ', n);
}

static int join(char *out, size_t cap, const char *dir, const char *name)
{
	if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap)
		return sfs__err(SFS_EUSAGE, "%s/%s: path too long", dir, name);
	return 0;
}

static void dir_of(const char *path, char *out, size_t cap)
{
	const char *s = strrchr(path, '/');

	snprintf(out, cap, "%.*s", s ? (s == path ? 1 : (int)(s - path)) : 1, s ? path : ".");
}

/* A new name or link in @dir is durable only once @dir is. */
static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return sfs__err(sfs__errno(), "%s: open directory: %s", dir, strerror(errno));
	if (fsync(fd))
		rc = sfs__err(sfs__errno(), "%s: fsync directory: %s", dir, strerror(errno));
	close(fd);
	return rc;
}

/* ---- validation shared by write and read ------------------------------------------------ */

struct nref {
	const char *name;
	unsigned line;          /* TABLES line that names it */
	uint32_t sid;
};

static int nref_cmp(const void *a, const void *b)
{
	const struct nref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int sid_cmp(const void *a, const void *b)
{
	const struct nref *x = a, *y = b;

	return x->sid != y->sid ? (x->sid > y->sid) - (x->sid < y->sid)
				: (x->line > y->line) - (x->line < y->line);
}

/*
 * Duplicate sids and names, by sorting (O(files log files)).  Line numbers
 * follow from the structure (table t's line is 3 + the lines before it), so
 * the reader reports lines and the writer the table's sid, from one check.
 */
static int check_dups(const char *path, const struct sfs_tsnap *s, int code, int by_line)
{
	size_t nn = 0, cap = 0;
	struct nref *v, *sids;
	unsigned line = 3;
	int rc = 0;

	for (uint32_t t = 0; t < s->ntables; t++)
		cap += 1 + s->tables[t].nfiles;
	if (!(v = malloc((cap ? cap : 1) * sizeof(*v))))
		return -ENOMEM;
	if (!(sids = malloc((s->ntables ? s->ntables : 1) * sizeof(*sids)))) {
		free(v);
		return -ENOMEM;
	}
	for (uint32_t t = 0; t < s->ntables; t++) {
		const struct sfs_tsnap_table *tb = &s->tables[t];

		sids[t] = (struct nref){ NULL, line, tb->sid };
		if (tb->dvi[0])
			v[nn++] = (struct nref){ tb->dvi, line, tb->sid };
		for (uint32_t f = 0; f < tb->nfiles; f++)
			v[nn++] = (struct nref){ tb->files[f].name, line + 1 + f, tb->sid };
		line += 1 + tb->nfiles;
	}
	qsort(sids, s->ntables, sizeof(*sids), sid_cmp);
	for (uint32_t i = 1; i < s->ntables && !rc; i++)
		if (sids[i].sid == sids[i - 1].sid)
			rc = by_line ? sfs__err(code, "%s: line %u: duplicate table sid %u (first on line %u)",
						path, sids[i].line, sids[i].sid, sids[i - 1].line)
				     : sfs__err(code, "%s: duplicate table sid %u", path, sids[i].sid);
	qsort(v, nn, sizeof(*v), nref_cmp);
	for (size_t i = 1; i < nn && !rc; i++)
		if (!strcmp(v[i].name, v[i - 1].name))
			rc = by_line ? sfs__err(code, "%s: line %u: duplicate file name '%s' (first on line %u)",
						path, v[i].line, v[i].name, v[i - 1].line)
				     : sfs__err(code, "%s: table sid %u: duplicate file name '%s' (also in sid %u)",
						path, v[i].sid, v[i].name, v[i - 1].sid);
	free(sids);
	free(v);
	return rc;
}

/* ---- write -------------------------------------------------------------------------------- */

int sfs_tsnap_write(const char *path, const struct sfs_tsnap *s)
{
	static unsigned seq;   /* two threads of one process writing one path */
	char tmp[PATH_MAX], dir[PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	FILE *m, *f;
	int rc;

	if (!path || !s || (s->ntables && !s->tables))
		return sfs__err(SFS_EUSAGE, "%s: no snapshot to write", path ? path : "TABLES");
	for (uint32_t t = 0; t < s->ntables; t++) {
		const struct sfs_tsnap_table *tb = &s->tables[t];

		if (tb->nfiles && !tb->files)
			return sfs__err(SFS_EUSAGE, "%s: table sid %u: %u files, no array", path, tb->sid,
					tb->nfiles);
		/* strnlen: an unterminated array is refused (its length 256 fails
		 * name_ok), never read past */
		if (tb->dvi[0] && (!name_ok(tb->dvi, strnlen(tb->dvi, sizeof(tb->dvi))) ||
				   !strcmp(tb->dvi, "-")))
			return sfs__err(SFS_EUSAGE, "%s: table sid %u: dvi '%.255s' is not a plain file name",
					path, tb->sid, tb->dvi);
		for (uint32_t i = 0; i < tb->nfiles; i++) {
			const char *nm = tb->files[i].name;

			if (!name_ok(nm, strnlen(nm, sizeof(tb->files[i].name))))
				return sfs__err(SFS_EUSAGE, "%s: table sid %u: file '%.255s' is not a plain file name",
						path, tb->sid, nm);
		}
	}
	if ((rc = check_dups(path, s, SFS_EUSAGE, 0)))
		return rc;

	/* Format in memory first: the crc covers everything, and one write
	 * leaves no half-formatted temp behind on ENOMEM. */
	if (!(m = open_memstream(&buf, &len)))
		return -ENOMEM;
	fprintf(m, MAGIC "%u\nwatermark %llu\n", SFS_TSNAP_VERSION, (ull)s->watermark);
	for (uint32_t t = 0; t < s->ntables; t++) {
		const struct sfs_tsnap_table *tb = &s->tables[t];

		fprintf(m, "table %u %u %s\n", tb->sid, tb->nfiles, tb->dvi[0] ? tb->dvi : "-");
		for (uint32_t i = 0; i < tb->nfiles; i++)
			fprintf(m, "file %s %u %llu\n", tb->files[i].name, tb->files[i].level,
				(ull)tb->files[i].rows);
	}
	if (fflush(m) || ferror(m)) {
		fclose(m);
		free(buf);
		return -ENOMEM;
	}
	fprintf(m, "end %08x\n", sfs_crc32c(0, buf, len));
	if (fclose(m)) {
		free(buf);
		return -ENOMEM;
	}

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
		     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp)) {
		free(buf);
		return sfs__err(SFS_EUSAGE, "%s: path too long", path);
	}
	if (!(f = fopen(tmp, "we"))) {
		rc = sfs__err(sfs__errno(), "%s: create: %s", tmp, strerror(errno));
		free(buf);
		return rc;
	}
	rc = fwrite(buf, 1, len, f) == len ? 0 : sfs__err(sfs__errno(), "%s: write: %s", tmp, strerror(errno));
	free(buf);
	if ((rc = sfs_file_commit(f, tmp, path, rc)))
		return rc;
	dir_of(path, dir, sizeof(dir));
	return fsync_dir(dir);
}

/* ---- read ---------------------------------------------------------------------------------- */

struct parse {
	const char *path;
	const char *buf, *p, *end;
	unsigned line;          /* of the line last returned */
	const char *ls;         /* its start */
	size_t ll;              /* its length without '\n' */
};

/* The next line into ls/ll: 1, 0 at the end of the bytes, or truncated. */
static int next_line(struct parse *ps)
{
	const char *nl;

	if (ps->p == ps->end)
		return 0;
	ps->line++;
	if (!(nl = memchr(ps->p, '\n', (size_t)(ps->end - ps->p))))
		return sfs__err(SFS_ECORRUPT, "%s: line %u: no end of line (truncated)", ps->path, ps->line);
	ps->ls = ps->p;
	ps->ll = (size_t)(nl - ps->p);
	ps->p = nl + 1;
	return 1;
}

struct tok {
	const char *s;
	size_t n;
};

/* Split the current line at single spaces into exactly @want fields;
 * empty fields (doubled, leading or trailing spaces) are refused. */
static int split(const struct parse *ps, struct tok *t, unsigned want)
{
	const char *s = ps->ls, *e = ps->ls + ps->ll;
	unsigned k = 0;

	for (;;) {
		const char *sp = memchr(s, ' ', (size_t)(e - s));
		const char *te = sp ? sp : e;

		if (te == s || k == want)
			return -1;
		t[k++] = (struct tok){ s, (size_t)(te - s) };
		if (!sp)
			break;
		s = sp + 1;
	}
	return k == want ? 0 : -1;
}

static int tok_is(const struct tok *t, const char *w)
{
	return t->n == strlen(w) && !memcmp(t->s, w, t->n);
}

/* Decimal, no sign, no leading zero, <= @max. */
static int tok_u64(const struct tok *t, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (t->n == 0 || t->n > 20 || (t->n > 1 && t->s[0] == '0'))
		return -1;
	for (size_t i = 0; i < t->n; i++) {
		unsigned d = (unsigned)(unsigned char)t->s[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int tok_name(const struct parse *ps, const struct tok *t, char *out, const char *what)
{
	char show[4 * 80 + 1];

	if (!name_ok(t->s, t->n))
		return sfs__err(SFS_ECORRUPT, "%s: line %u: %s name '%s' is not a plain file name "
				"(empty, '/', '.', '..', a control byte or over %u bytes)", ps->path,
				ps->line, what, sfs_name_show(t->s, t->n, show, sizeof(show)), NAME_MAX_);
	memcpy(out, t->s, t->n);
	out[t->n] = '\0';
	return 0;
}

static int bad_line(const struct parse *ps, const char *expected)
{
	return sfs__err(SFS_ECORRUPT, "%s: line %u: malformed line '%.*s' (expected '%s')", ps->path,
			ps->line, (int)(ps->ll > 80 ? 80 : ps->ll), ps->ls, expected);
}

static int parse_file(struct parse *ps, struct sfs_tsnap *out)
{
	struct tok t[4];
	uint64_t v;
	uint32_t cap = 0;
	int rc;

	/* Line 1: the magic decides "not ours" before anything can be "corrupt". */
	if (ps->p == ps->end)
		return sfs__err(SFS_ECORRUPT, "%s: empty file (truncated)", ps->path);
	if (memcmp(ps->p, MAGIC, (size_t)(ps->end - ps->p) < MAGIC_LEN ? (size_t)(ps->end - ps->p) : MAGIC_LEN))
		return sfs__err(SFS_EMAGIC, "%s: line 1: not a TABLES file (expected '" MAGIC "%u')",
				ps->path, SFS_TSNAP_VERSION);
	if ((rc = next_line(ps)) <= 0)
		return rc;
	if (split(ps, t, 2) || tok_u64(&t[1], UINT32_MAX, &v))
		return bad_line(ps, MAGIC "<version>");
	if (v != SFS_TSNAP_VERSION)
		return sfs__err(SFS_EVERSION, "%s: line 1: format version %llu, this build reads %u",
				ps->path, (ull)v, SFS_TSNAP_VERSION);

	if ((rc = next_line(ps)) < 0)
		return rc;
	if (!rc)
		return sfs__err(SFS_ECORRUPT, "%s: line 2: missing watermark line (truncated)", ps->path);
	if (split(ps, t, 2) || !tok_is(&t[0], "watermark") || tok_u64(&t[1], UINT64_MAX, &out->watermark))
		return bad_line(ps, "watermark <u64>");

	for (;;) {
		struct sfs_tsnap_table *tb;
		unsigned tline;

		if ((rc = next_line(ps)) < 0)
			return rc;
		if (!rc)
			return sfs__err(SFS_ECORRUPT, "%s: line %u: missing end line (truncated)", ps->path,
					ps->line + 1);
		if (ps->ll >= 4 && !memcmp(ps->ls, "end ", 4))
			break;
		if (split(ps, t, 4) || !tok_is(&t[0], "table"))
			return bad_line(ps, "table <sid> <nfiles> <dvi or ->' or 'end <crc32c>");
		if (out->ntables == cap) {
			uint32_t nc = cap ? cap * 2 : 8;
			void *p = realloc(out->tables, nc * sizeof(*out->tables));

			if (!p)
				return -ENOMEM;
			out->tables = p;
			cap = nc;
		}
		tb = &out->tables[out->ntables];
		memset(tb, 0, sizeof(*tb));
		if (tok_u64(&t[1], UINT32_MAX, &v))
			return bad_line(ps, "table <sid u32> <nfiles> <dvi or ->");
		tb->sid = (uint32_t)v;
		if (tok_u64(&t[2], UINT32_MAX, &v))
			return bad_line(ps, "table <sid> <nfiles u32> <dvi or ->");
		/* A count the rest of the file cannot hold is refused before it
		 * sizes an allocation. */
		if (v > (uint64_t)(ps->end - ps->p) / FILE_LINE_MIN)
			return sfs__err(SFS_ECORRUPT, "%s: line %u: %llu files declared, %zu bytes left (truncated)",
					ps->path, ps->line, (ull)v, (size_t)(ps->end - ps->p));
		if (!tok_is(&t[3], "-") && (rc = tok_name(ps, &t[3], tb->dvi, "dvi")))
			return rc;
		if (v && !(tb->files = calloc((size_t)v, sizeof(*tb->files))))
			return -ENOMEM;
		out->ntables++;   /* owns files[] from here: sfs_tsnap_free finds it */
		tline = ps->line;
		for (uint32_t i = 0; i < (uint32_t)v; i++) {
			struct sfs_tsnap_file *f = &tb->files[i];
			uint64_t lv;

			if ((rc = next_line(ps)) < 0)
				return rc;
			if (!rc)
				return sfs__err(SFS_ECORRUPT,
						"%s: line %u: missing file line (truncated: table on line %u declares %llu files)",
						ps->path, ps->line + 1, tline, (ull)v);
			if (split(ps, t, 4) || !tok_is(&t[0], "file"))
				return sfs__err(SFS_ECORRUPT,
						"%s: line %u: malformed line '%.*s' (expected 'file <name> <level> <rows>', file %u of %llu of the table on line %u)",
						ps->path, ps->line, (int)(ps->ll > 80 ? 80 : ps->ll), ps->ls, i + 1,
						(ull)v, tline);
			if ((rc = tok_name(ps, &t[1], f->name, "file")))
				return rc;
			if (tok_u64(&t[2], UINT32_MAX, &lv) || tok_u64(&t[3], UINT64_MAX, &f->rows))
				return bad_line(ps, "file <name> <level u32> <rows u64>");
			f->level = (uint32_t)lv;
			tb->nfiles++;
		}
	}

	/* The end line: its crc covers every byte before it. */
	{
		uint32_t stored = 0, crc = sfs_crc32c(0, ps->buf, (size_t)(ps->ls - ps->buf));

		if (ps->ll != 12)
			return bad_line(ps, "end <crc32c, 8 lowercase hex>");
		for (int i = 4; i < 12; i++) {
			char c = ps->ls[i];

			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				return bad_line(ps, "end <crc32c, 8 lowercase hex>");
			stored = stored << 4 | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
		}
		if (stored != crc)
			return sfs__err(SFS_ECORRUPT, "%s: line %u: checksum mismatch (stored %08x, computed %08x)",
					ps->path, ps->line, stored, crc);
		if (ps->p != ps->end)
			return sfs__err(SFS_ECORRUPT, "%s: line %u: data after the end line", ps->path,
					ps->line + 1);
	}
	return check_dups(ps->path, out, SFS_ECORRUPT, 1);
}

int sfs_tsnap_read(const char *path, struct sfs_tsnap *out)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return sfs__err(sfs__errno(), "%s: open: %s%s", path, strerror(errno),
				errno == ELOOP ? " (a symbolic link: never followed)" : "");
	if (fstat(fd, &st)) {
		rc = sfs__err(sfs__errno(), "%s: stat: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	if ((uint64_t)st.st_size > READ_MAX) {
		close(fd);
		return sfs__err(SFS_ECORRUPT, "%s: %llu bytes, more than a TABLES file can be", path,
				(ull)st.st_size);
	}
	if (!(buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sfs__err(sfs__errno(), "%s: read: %s", path, strerror(errno));
			close(fd);
			free(buf);
			return rc;
		}
		if (r == 0)
			break;   /* shrank meanwhile: the parser says truncated */
		got += (size_t)r;
	}
	close(fd);
	rc = sfs_tsnap_parse(path, buf, got, out);
	free(buf);
	return rc;
}

int sfs_tsnap_parse(const char *path, const char *buf, size_t len, struct sfs_tsnap *out)
{
	struct parse ps = { .path = path, .buf = buf, .p = buf, .end = buf + len };
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = parse_file(&ps, out)))
		sfs_tsnap_free(out);
	return rc;
}

void sfs_tsnap_free(struct sfs_tsnap *s)
{
	if (!s)
		return;
	for (uint32_t t = 0; t < s->ntables; t++)
		free(s->tables[t].files);
	free(s->tables);
	memset(s, 0, sizeof(*s));
}

/* ---- rebuild -------------------------------------------------------------------------------- */

/* A table of @dst being assembled. */
struct dtab {
	uint32_t sid;
	uint32_t nfiles, cap;
	struct sfs_tsnap_file *files;
	sfs_dv_builder_t *dv;   /* created at the first carried vector */
};

struct rebuild {
	const char *dst;
	uint32_t kg_lo, kg_hi;
	struct dtab *t;
	size_t nt, cap;
};

static struct dtab *dtab_get(struct rebuild *rb, uint32_t sid)
{
	/* Linear: a worker has one table per registered state, a handful. */
	for (size_t i = 0; i < rb->nt; i++)
		if (rb->t[i].sid == sid)
			return &rb->t[i];
	if (rb->nt == rb->cap) {
		size_t nc = rb->cap ? rb->cap * 2 : 8;
		void *p = realloc(rb->t, nc * sizeof(*rb->t));

		if (!p)
			return NULL;
		rb->t = p;
		rb->cap = nc;
	}
	memset(&rb->t[rb->nt], 0, sizeof(*rb->t));
	rb->t[rb->nt].sid = sid;
	return &rb->t[rb->nt++];
}

static int dtab_add(struct dtab *d, const char *name, uint32_t level, uint64_t rows)
{
	if (d->nfiles == d->cap) {
		uint32_t nc = d->cap ? d->cap * 2 : 16;
		void *p = realloc(d->files, nc * sizeof(*d->files));

		if (!p)
			return -ENOMEM;
		d->files = p;
		d->cap = nc;
	}
	snprintf(d->files[d->nfiles].name, sizeof(d->files[0].name), "%s", name);
	d->files[d->nfiles].level = level;
	d->files[d->nfiles].rows = rows;
	d->nfiles++;
	return 0;
}

/* "t<sid>-<16 random hex><ext>", not yet present in @dst: 64 random bits
 * make a clash with another source's names as unlikely as the stager's own
 * names clashing; the check covers what this rebuild already placed. */
static int new_name(const struct rebuild *rb, uint32_t sid, const char *ext, char *name, size_t cap,
		    char *path, size_t pcap)
{
	for (int tries = 0; tries < 8; tries++) {
		uint64_t r;
		struct stat st;
		int rc;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return sfs__err(sfs__errno(), "%s: getrandom: %s", rb->dst, strerror(errno));
		snprintf(name, cap, "t%u-%016llx%s", sid, (ull)r, ext);
		if ((rc = join(path, pcap, rb->dst, name)))
			return rc;
		if (lstat(path, &st) && errno == ENOENT)
			return 0;
	}
	return sfs__err(-EEXIST, "%s: no free random file name", rb->dst);
}

/* Rows of @r in range and not masked into a new file at @level (none if
 * nothing survives).  O(rows in range): each one decoded and re-encoded. */
static int rewrite(struct rebuild *rb, struct dtab *d, sfs_df_reader_t *r, const char *from,
		   uint32_t level, const uint64_t *dv, size_t words)
{
	struct sfs_df_write_opts wo = { .codec = level <= 1 ? SFS_DF_LZ4 : SFS_DF_ZSTD,
					 .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .zstd_level = SFS_TABLE_ZSTD_LEVEL,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	char name[NAME_MAX_ + 1], path[PATH_MAX];
	sfs_df_writer_t *w = NULL;
	sfs_df_iter_t *it = NULL;
	struct sfs_df_row row;
	uint64_t n = 0, rows = 0;
	int rc;

	struct sfs_df_meta m;

	sfs_df_reader_meta(r, &m);
	if (m.prefix_rule == SFS_TABLE_PFX_MAP) {	/* the clip keeps its source's filter */
		wo.prefix_of = sfs__table_map_prefix;
		wo.prefix_rule = SFS_TABLE_PFX_MAP;
	}
	if ((rc = sfs_df_iter_kg(r, rb->kg_lo, rb->kg_hi, dv, words, &it)))
		return rc;
	while ((rc = sfs_df_iter_next(it, &row)) == 1) {
		/* The writer is opened at the first survivor: a clipped file that
		 * keeps nothing leaves no trace. */
		if (!w && ((rc = new_name(rb, d->sid, ".sst", name, sizeof(name), path, sizeof(path))) ||
			   (rc = sfs_df_writer_open(path, &wo, &w))))
			break;
		if ((rc = sfs_df_writer_add(w, row.key, row.klen, row.kind, row.val, row.vlen))) {
			char why[512];

			snprintf(why, sizeof(why), "%s", sfs_last_error());
			rc = sfs__err(rc, "%s: row %llu refused by the writer of %s: %s", from,
				      (ull)row.pos, path, why);
			break;
		}
		n++;
	}
	sfs_df_iter_close(it);
	if (rc < 0) {
		sfs_df_writer_abort(w);
		return rc;
	}
	if (!w)
		return 0;
	if ((rc = sfs_df_writer_finish(w, &rows)))
		return rc;
	if (rows != n) {
		unlink(path);
		return sfs__err(-EIO, "%s: %llu rows written, %llu finished", path, (ull)n, (ull)rows);
	}
	if ((rc = dtab_add(d, name, level, rows)))
		unlink(path);
	return rc;
}

/* One file of a source table: link, skip or rewrite it. */
static int one_file(struct rebuild *rb, struct dtab *d, const char *srcdir,
		    const struct sfs_tsnap_file *f, sfs_dv_index_t *ix, const char *dvi_path)
{
	char from[PATH_MAX], to[PATH_MAX];
	sfs_df_reader_t *r = NULL;
	struct sfs_df_meta m;
	uint64_t *bits = NULL;
	size_t words = 0;
	int rc, i;

	if ((rc = join(from, sizeof(from), srcdir, f->name)) ||
	    (rc = sfs_df_reader_open(from, NULL, &r)))
		return rc;
	sfs_df_reader_meta(r, &m);
	if (m.rows != f->rows) {
		rc = sfs__err(SFS_ECORRUPT, "%s: %llu rows, its TABLES says %llu", from, (ull)m.rows,
			      (ull)f->rows);
		goto out;
	}
	if (m.kg_hi < rb->kg_lo || m.kg_lo > rb->kg_hi)
		goto out;   /* disjoint: another new worker's */
	if (ix && (i = sfs_dv_find(ix, f->name)) >= 0) {
		struct sfs_dv_info in;

		sfs_dv_info(ix, (size_t)i, &in);
		if (in.rows != m.rows) {
			rc = sfs__err(SFS_ECORRUPT, "%s: vector of %s has %llu rows, the file %llu", dvi_path,
				      f->name, (ull)in.rows, (ull)m.rows);
			goto out;
		}
		if ((rc = sfs_dv_lookup(ix, f->name, &bits, &words)))
			goto out;
	}
	if (m.kg_lo >= rb->kg_lo && m.kg_hi <= rb->kg_hi) {
		/* Wholly inside: the file and its vector are still right as they
		 * are, linked (O(1)) or copied.  @dst started empty, so a name
		 * already there came from another source: a corrupt checkpoint. */
		if ((rc = join(to, sizeof(to), rb->dst, f->name)))
			goto out;
		if ((rc = sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0, NULL)) == -EEXIST)
			rc = sfs__err(SFS_ECORRUPT, "%s: already placed (two sources hold this name; "
				      "from %s)", to, from);
		if (rc)
			goto out;
		if (bits && !d->dv && (rc = sfs_dv_builder_new(&d->dv)))
			goto out;
		if ((bits && (rc = sfs_dv_builder_add(d->dv, f->name, m.rows, bits, words))) ||
		    (rc = dtab_add(d, f->name, f->level, m.rows)))
			unlink(to);
		goto out;
	}
	rc = rewrite(rb, d, r, from, f->level, bits, words);
out:
	free(bits);
	sfs_df_reader_close(r);
	return rc;
}

static int one_source(struct rebuild *rb, const char *srcdir)
{
	char path[PATH_MAX], dvi[PATH_MAX];
	struct sfs_tsnap s;
	int rc;

	if ((rc = join(path, sizeof(path), srcdir, SFS_TSNAP_FILE)) || (rc = sfs_tsnap_read(path, &s)))
		return rc;
	for (uint32_t t = 0; t < s.ntables && !rc; t++) {
		const struct sfs_tsnap_table *tb = &s.tables[t];
		sfs_dv_index_t *ix = NULL;
		struct dtab *d = dtab_get(rb, tb->sid);

		if (!d) {
			rc = -ENOMEM;
			break;
		}
		if (tb->dvi[0] && ((rc = join(dvi, sizeof(dvi), srcdir, tb->dvi)) ||
				   (rc = sfs_dv_open(dvi, &ix))))
			break;
		for (uint32_t f = 0; f < tb->nfiles && !rc; f++)
			rc = one_file(rb, d, srcdir, &tb->files[f], ix, dvi);
		sfs_dv_close(ix);
	}
	sfs_tsnap_free(&s);
	return rc;
}

static int dtab_sid_cmp(const void *a, const void *b)
{
	const struct dtab *x = a, *y = b;

	return (x->sid > y->sid) - (x->sid < y->sid);
}

/* Write the new DV indexes, fsync @dst, then TABLES: the commit. */
static int finish(struct rebuild *rb)
{
	struct sfs_tsnap s = { 0 };
	char path[PATH_MAX];
	int rc = 0;

	if (!(s.tables = calloc(rb->nt ? rb->nt : 1, sizeof(*s.tables))))
		return -ENOMEM;
	if (rb->nt)
		qsort(rb->t, rb->nt, sizeof(*rb->t), dtab_sid_cmp);
	for (size_t i = 0; i < rb->nt && !rc; i++) {
		struct dtab *d = &rb->t[i];
		struct sfs_tsnap_table *tb;

		if (!d->nfiles)
			continue;
		tb = &s.tables[s.ntables++];
		tb->sid = d->sid;
		tb->nfiles = d->nfiles;
		tb->files = d->files;
		if (d->dv && !(rc = new_name(rb, d->sid, ".dvi", tb->dvi, sizeof(tb->dvi), path, sizeof(path))))
			rc = sfs_dv_builder_write(d->dv, path);
	}
	if (!rc)
		rc = fsync_dir(rb->dst);
	if (!rc && !(rc = join(path, sizeof(path), rb->dst, SFS_TSNAP_FILE)))
		rc = sfs_tsnap_write(path, &s);
	free(s.tables);   /* the files arrays stay the dtabs' */
	return rc;
}

/* After a failure: remove every entry of @dst (all are this call's: it was
 * empty), and @dst itself if this call made it.  Best effort, quietly: the
 * first error is what the caller hears about. */
static void undo(const char *dst, int created)
{
	DIR *d = opendir(dst);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	if (created)
		rmdir(dst);
}

/* @dst must be a new or empty directory: anything in it could collide with,
 * or be mistaken for, the rebuilt state. */
static int prepare(const char *dst, int *created)
{
	char parent[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d;
	int rc;

	*created = 0;
	if (stat(dst, &st)) {
		if (errno != ENOENT)
			return sfs__err(sfs__errno(), "%s: stat: %s", dst, strerror(errno));
		if ((rc = sfs_mkdirs(dst, 0700)))
			return rc;
		*created = 1;
		dir_of(dst, parent, sizeof(parent));
		return fsync_dir(parent);
	}
	if (!S_ISDIR(st.st_mode))
		return sfs__err(SFS_EUSAGE, "%s: not a directory", dst);
	if (!(d = opendir(dst)))
		return sfs__err(sfs__errno(), "%s: open directory: %s", dst, strerror(errno));
	rc = 0;
	while ((e = readdir(d)) && !rc)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = sfs__err(SFS_EUSAGE, "%s: not empty ('%s'): a rebuild needs a fresh directory",
				      dst, e->d_name);
	closedir(d);
	return rc;
}

int sfs_tsnap_rebuild(const char *const *src, unsigned n, const char *dst, uint32_t kg_lo,
		      uint32_t kg_hi)
{
	struct rebuild rb = { .dst = dst, .kg_lo = kg_lo, .kg_hi = kg_hi };
	int rc, created;

	if (!dst || (n && !src))
		return sfs__err(SFS_EUSAGE, "table rebuild: no destination or no sources");
	if (kg_lo > kg_hi || kg_hi > 0xffff)
		return sfs__err(SFS_EUSAGE, "%s: key-group range [%u, %u] (16-bit, lo <= hi)", dst, kg_lo,
				kg_hi);
	if ((rc = prepare(dst, &created)))
		return rc;
	for (unsigned i = 0; i < n && !rc; i++)
		rc = one_source(&rb, src[i]);
	if (!rc)
		rc = finish(&rb);
	for (size_t i = 0; i < rb.nt; i++) {
		free(rb.t[i].files);
		sfs_dv_builder_free(rb.t[i].dv);
	}
	free(rb.t);
	if (rc)
		undo(dst, created);
	return rc;
}
