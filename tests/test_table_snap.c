/*
 * test_table_snap.c — the table target's checkpoint image (store/table/
 * table_snap.c): TABLES round trips; every refusal of the writer and the
 * reader named (version, magic, truncation at every byte, checksum,
 * names, duplicates, malformed fields); and the rescale rebuild against an
 * in-memory reference — old workers' flat directories built with the
 * data-file writer (several files per table at levels 0..3, narrow and
 * wide key-group spans, rows masked by deletion vectors, one file wholly
 * masked), rebuilt for 2 -> 1, 1 -> 2 and 2 -> 3 workers of maxP 128; the
 * visible rows of each rebuilt directory (TABLES + DV + data-file
 * iterators) must equal the reference exactly, contained files must be
 * hard links (same inode), rewritten ones new files of the level's codec,
 * level-0 order per source kept, and nothing else left in the directory.
 * Also: the copy fallback across file systems (/dev/shm -> /tmp), and the
 * rebuild's refusals and clean-up.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "common/crc32c.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/dvec.h"
#include "sfs.h"
#include "store/table/table_snap.h"
#include "tests/helpers.h"
#include "common/keygroup.h"

#define MAXP 128u

static char dir[64], shm[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-tsnap-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	shm[0] = '\0';
}

static void teardown(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	if (shm[0])
		nftw(shm, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(table_snap, .init = setup, .fini = teardown, .timeout = 60);

/* A path into a PATH_MAX buffer; too long is a test bug. */
static void pathf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pathf(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	cr_assert_lt(n, PATH_MAX);
}

static void pjoin(char *out, const char *a, const char *b)
{
	pathf(out, "%s/%s", a, b);
}

/* ---- TABLES: round trip and refusals ------------------------------------------------------ */

Test(table_snap, round_trip)
{
	struct sfs_tsnap_file f1[3] = { { "t1-00000000000000aa.sst", 0, 10 },
					{ "t1-00000000000000bb.sst", 1, 1 },
					{ "t1-00000000000000cc.sst", 4000000000u, UINT64_MAX } };
	struct sfs_tsnap_file f7[2] = { { "x", 2, 0 }, { "weird~name#!", 3, 12345678901234ull } };
	struct sfs_tsnap_table t[3] = {
		{ .sid = 1, .dvi = "t1-0123456789abcdef.dvi", .nfiles = 3, .files = f1 },
		{ .sid = 7, .dvi = "", .nfiles = 2, .files = f7 },
		{ .sid = UINT32_MAX, .dvi = "", .nfiles = 0, .files = NULL },
	};
	struct sfs_tsnap s = { .watermark = UINT64_MAX, .ntables = 3, .tables = t }, r;
	char path[PATH_MAX], head[64] = { 0 };
	struct dirent *e;
	FILE *f;
	DIR *d;
	int n = 0;

	pjoin(path, dir, "TABLES");
	cr_assert_eq(sfs_tsnap_write(path, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_tsnap_read(path, &r), 0, "%s", sfs_last_error());
	cr_assert_eq(r.watermark, UINT64_MAX);
	cr_assert_eq(r.ntables, 3);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(r.tables[i].sid, t[i].sid);
		cr_assert_str_eq(r.tables[i].dvi, t[i].dvi);
		cr_assert_eq(r.tables[i].nfiles, t[i].nfiles);
		for (uint32_t j = 0; j < t[i].nfiles; j++) {
			cr_assert_str_eq(r.tables[i].files[j].name, t[i].files[j].name);
			cr_assert_eq(r.tables[i].files[j].level, t[i].files[j].level);
			cr_assert_eq(r.tables[i].files[j].rows, t[i].files[j].rows);
		}
	}
	sfs_tsnap_free(&r);
	cr_assert_eq(r.ntables, 0);
	cr_assert_null(r.tables);
	sfs_tsnap_free(NULL);

	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(head, sizeof(head), f));
	fclose(f);
	cr_assert_str_eq(head, "sfs-tables 1\n");

	/* The temp file was renamed, not left behind; a rewrite replaces. */
	s.watermark = 3;
	cr_assert_eq(sfs_tsnap_write(path, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_tsnap_read(path, &r), 0);
	cr_assert_eq(r.watermark, 3);
	sfs_tsnap_free(&r);
	d = opendir(dir);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	cr_assert_eq(n, 1);

	/* No tables at all is a valid (empty) worker. */
	s.ntables = 0;
	cr_assert_eq(sfs_tsnap_write(path, &s), 0);
	cr_assert_eq(sfs_tsnap_read(path, &r), 0);
	cr_assert_eq(r.ntables, 0);
	sfs_tsnap_free(&r);
}

/* The writer refuses what the reader would: SFS_EUSAGE, nothing written. */
Test(table_snap, write_refusals)
{
	static const char *bad[] = { "a/b", ".", "..", "has space", "tab\there", "", "nl\n" };
	struct sfs_tsnap_file f[2] = { { "a", 0, 1 }, { "b", 1, 2 } };
	struct sfs_tsnap_table t[2] = { { .sid = 1, .nfiles = 2, .files = f }, { .sid = 2 } };
	struct sfs_tsnap s = { .ntables = 2, .tables = t };
	char path[PATH_MAX];
	struct stat st;

	pjoin(path, dir, "TABLES");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(f[1].name, sizeof(f[1].name), "%s", bad[i]);
		cr_assert_eq(sfs_tsnap_write(path, &s), SFS_EUSAGE, "name '%s'", bad[i]);
		cr_assert_not_null(strstr(sfs_last_error(), "not a plain file name"), "%s", sfs_last_error());
		cr_assert_not_null(strstr(sfs_last_error(), path), "%s", sfs_last_error());
	}
	snprintf(f[1].name, sizeof(f[1].name), "a");
	cr_assert_eq(sfs_tsnap_write(path, &s), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "duplicate file name 'a'"), "%s", sfs_last_error());
	snprintf(f[1].name, sizeof(f[1].name), "b");
	snprintf(t[1].dvi, sizeof(t[1].dvi), "b");
	cr_assert_eq(sfs_tsnap_write(path, &s), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "duplicate file name 'b'"), "%s", sfs_last_error());
	snprintf(t[1].dvi, sizeof(t[1].dvi), "-");
	cr_assert_eq(sfs_tsnap_write(path, &s), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "dvi '-'"), "%s", sfs_last_error());
	t[1].dvi[0] = '\0';
	t[1].sid = 1;
	cr_assert_eq(sfs_tsnap_write(path, &s), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "duplicate table sid 1"), "%s", sfs_last_error());
	cr_assert_eq(stat(path, &st), -1);
	t[1].sid = 2;
	cr_assert_eq(sfs_tsnap_write(path, &s), 0, "%s", sfs_last_error());
}

/* @body with its end line appended (a valid crc unless @crc_delta). */
static void put_text(const char *path, const char *body, uint32_t crc_delta)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(body, f);
	fprintf(f, "end %08x\n", sfs_crc32c(0, body, strlen(body)) + crc_delta);
	fclose(f);
}

static void put_raw(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

/* @path must be refused with @code and a message naming it and @needle
 * (and @line, a "line N" string, unless NULL). */
static void refused(const char *path, int code, const char *needle, const char *line)
{
	struct sfs_tsnap s;
	int rc = sfs_tsnap_read(path, &s);

	cr_assert_eq(rc, code, "rc %d, expected %d: %s", rc, code, sfs_last_error());
	cr_assert_eq(s.ntables, 0);
	cr_assert_null(s.tables);
	cr_assert_not_null(strstr(sfs_last_error(), path), "%s", sfs_last_error());
	cr_assert_not_null(strstr(sfs_last_error(), needle), "'%s' not in: %s", needle, sfs_last_error());
	if (line)
		cr_assert_not_null(strstr(sfs_last_error(), line), "'%s' not in: %s", line, sfs_last_error());
}

#define GOOD                                                                           \
	"sfs-tables 1\n"                                                               \
	"watermark 5\n"                                                                \
	"table 1 2 t1-a.dvi\n"                                                         \
	"file t1-x.sst 0 10\n"                                                         \
	"file t1-y.sst 1 20\n"                                                         \
	"table 2 0 -\n"

Test(table_snap, read_refusals)
{
	static const struct {
		const char *body, *needle, *line;
	} bad[] = {
		/* names */
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile a/b 0 1\n", "not a plain file name", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile .. 0 1\n", "not a plain file name", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile . 0 1\n", "not a plain file name", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 0 d/x\n", "dvi name 'd/x' is not a plain", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile a\x01 0 1\n", "not a plain file name", "line 4" },
		/* named in the message, escaped: it came from the file */
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile a\x1b[2J 0 1\n", "file name 'a\\x1b[2J'", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile /etc/passwd 0 1\n", "file name '/etc/passwd'", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile ../x.sst 0 1\n", "file name '../x.sst'", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 0 ..\n", "dvi name '..'", "line 3" },
		/* duplicates */
		{ GOOD "table 1 0 -\n", "duplicate table sid 1 (first on line 3)", "line 7" },
		{ GOOD "table 3 1 -\nfile t1-x.sst 2 3\n", "duplicate file name 't1-x.sst' (first on line 4)", "line 8" },
		{ GOOD "table 3 1 -\nfile t1-a.dvi 2 3\n", "duplicate file name 't1-a.dvi'", "line 8" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 2 -\nfile a 0 1\nfile a 0 1\n", "duplicate file name 'a'", "line 5" },
		/* malformed fields */
		{ "sfs-tables 1\nwatermark\n", "malformed", "line 2" },
		{ "sfs-tables 1\nwatermark 05\n", "malformed", "line 2" },
		{ "sfs-tables 1\nwatermark 18446744073709551616\n", "malformed", "line 2" },
		{ "sfs-tables 1\nwatermrk 5\n", "malformed", "line 2" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1\n", "malformed", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 4294967296 0 -\n", "malformed", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 0 - x\n", "malformed", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 0 -\n\n", "malformed", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable  1 0 -\n", "malformed", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 0 - \n", "malformed", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile a 0\n", "malformed", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile a -1 3\n", "malformed", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 1 -\nfile a 4294967296 3\n", "malformed", "line 4" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 2 -\nfile a 0 1\ntable 2 0 -\n", "file 2 of 2 of the table on line 3", "line 5" },
		{ "sfs-tables 1\nwatermark 5\nfile a 0 1\n", "malformed", "line 3" },
		{ "sfs-tables 1\nwatermark 5\ntable 1 4000000000 -\n", "4000000000 files declared", "line 3" },
		{ "sfs-tables x\n", "malformed", "line 1" },
		{ "sfs-tables 1\r\nwatermark 5\n", "malformed", "line 1" },
	};
	char path[PATH_MAX], buf[512];
	size_t n;

	pjoin(path, dir, "TABLES");
	put_text(path, GOOD, 0);
	{
		struct sfs_tsnap s;

		cr_assert_eq(sfs_tsnap_read(path, &s), 0, "%s", sfs_last_error());
		cr_assert_eq(s.ntables, 2);
		cr_assert_str_eq(s.tables[0].dvi, "t1-a.dvi");
		cr_assert_str_eq(s.tables[1].dvi, "");
		sfs_tsnap_free(&s);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put_text(path, bad[i].body, 0);
		refused(path, SFS_ECORRUPT, bad[i].needle, bad[i].line);
	}

	/* a TABLES that is a symbolic link (to a valid one outside): never followed */
	{
		char out[PATH_MAX];

		pjoin(out, dir, "outside-TABLES");
		put_text(out, GOOD, 0);
		unlink(path);
		cr_assert_eq(symlink(out, path), 0);
		refused(path, -ELOOP, "symbolic link", NULL);
		unlink(path);
	}

	/* version and magic */
	put_text(path, "sfs-tables 2\nwatermark 5\n", 0);
	refused(path, SFS_EVERSION, "format version 2, this build reads 1", "line 1");
	put_text(path, "hello world\n", 0);
	refused(path, SFS_EMAGIC, "not a TABLES file", "line 1");
	put_raw(path, "SQLite format 3", 15);
	refused(path, SFS_EMAGIC, "not a TABLES file", NULL);

	/* checksum: a changed byte that still parses, a bad crc field */
	put_text(path, GOOD, 1);
	refused(path, SFS_ECORRUPT, "checksum mismatch", "line 7");
	put_text(path, GOOD, 0);
	{
		FILE *f = fopen(path, "r+");

		fseek(f, (long)strlen("sfs-tables 1\nwatermark "), SEEK_SET);
		fputc('6', f);
		fclose(f);
	}
	refused(path, SFS_ECORRUPT, "checksum mismatch", "line 7");
	put_raw(path, GOOD "end 0000000G\n", strlen(GOOD) + 13);
	refused(path, SFS_ECORRUPT, "malformed", "line 7");
	put_raw(path, GOOD "end 0\n", strlen(GOOD) + 6);
	refused(path, SFS_ECORRUPT, "malformed", "line 7");
	snprintf(buf, sizeof(buf), GOOD "end %08X\n", sfs_crc32c(0, GOOD, strlen(GOOD)));
	put_raw(path, buf, strlen(buf));
	if (strpbrk(buf + strlen(GOOD) + 4, "ABCDEF"))
		refused(path, SFS_ECORRUPT, "malformed", "line 7");
	snprintf(buf, sizeof(buf), GOOD "end %08x\nextra\n", sfs_crc32c(0, GOOD, strlen(GOOD)));
	put_raw(path, buf, strlen(buf));
	refused(path, SFS_ECORRUPT, "data after the end line", "line 8");

	/* truncation at every byte: always refused as truncated */
	snprintf(buf, sizeof(buf), GOOD "end %08x\n", sfs_crc32c(0, GOOD, strlen(GOOD)));
	n = strlen(buf);
	for (size_t cut = 0; cut < n; cut++) {
		put_raw(path, buf, cut);
		refused(path, SFS_ECORRUPT, "truncated", NULL);
	}
	put_raw(path, buf, n);
	{
		struct sfs_tsnap s;

		cr_assert_eq(sfs_tsnap_read(path, &s), 0, "%s", sfs_last_error());
		sfs_tsnap_free(&s);
	}

	/* missing file */
	pjoin(path, dir, "nope");
	refused(path, -ENOENT, "open", NULL);
}

/* ---- rebuild: a model of old workers' snapshots ------------------------------------------ */

/* Key: kg (2 B BE) | sid (2 B BE) | id (2 B BE) | gen (1 B): gen is the
 * file's index in its table, so every row tells which old file it came
 * from (level-0 order check) — keys never repeat across files, which the
 * rebuild (file by file) does not care about. */
#define KLEN 7u

struct tup {                  /* one visible row, as compared */
	uint32_t sid, level;
	uint8_t key[KLEN];
	uint8_t kind, vlen;
	uint8_t val[16];
};

struct ofile {                /* one old data file */
	char name[64];
	unsigned worker;
	uint32_t sid, level, gen;
	uint32_t kg_lo, kg_hi;   /* of its rows */
	size_t first, n;         /* its rows in model.rows */
};

struct model {
	unsigned old_p;
	char src[4][PATH_MAX];
	struct tup *rows;        /* every row of every old file */
	uint8_t *masked;
	size_t nrows, cap;
	struct ofile files[256];
	size_t nfiles;
	uint64_t seed;
};

static const uint32_t levels[6] = { 0, 0, 1, 1, 2, 3 };

static int tup_cmp(const void *a, const void *b)
{
	const struct tup *x = a, *y = b;
	int c;

	if (x->sid != y->sid)
		return x->sid < y->sid ? -1 : 1;
	if (x->level != y->level)
		return x->level < y->level ? -1 : 1;
	if ((c = memcmp(x->key, y->key, KLEN)))
		return c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->vlen != y->vlen)
		return x->vlen < y->vlen ? -1 : 1;
	return memcmp(x->val, y->val, x->vlen);
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(((const struct tup *)a)->key, ((const struct tup *)b)->key, KLEN);
}

static uint32_t kg_of(const uint8_t *key) { return (uint32_t)key[0] << 8 | key[1]; }

static void rand_name(uint64_t *s, uint32_t sid, const char *ext, char *out, size_t cap)
{
	snprintf(out, cap, "t%u-%016llx%s", sid, (unsigned long long)th_rand(s), ext);
}

/* One old file: rows of sid @sid in key groups [lo, hi], level @level. */
static void old_file(struct model *m, const char *wdir, unsigned w, uint32_t sid, uint32_t gen,
		     uint32_t lo, uint32_t hi, struct sfs_tsnap_file *tf, sfs_dv_builder_t **dv)
{
	struct sfs_df_write_opts wo = { .codec = SFS_DF_NONE, .page_rows = 16 };
	struct ofile *f = &m->files[m->nfiles++];
	size_t want = 30 + th_rand(&m->seed) % 170, n = 0;
	uint32_t level = levels[gen];
	int mode = (int)(th_rand(&m->seed) % 3);
	char path[PATH_MAX];
	sfs_df_writer_t *wr;
	uint64_t *bits, rows;
	struct tup *r;

	if (m->nrows + want > m->cap) {
		m->cap = (m->nrows + want) * 2;
		m->rows = realloc(m->rows, m->cap * sizeof(*m->rows));
		m->masked = realloc(m->masked, m->cap);
	}
	r = &m->rows[m->nrows];
	for (size_t i = 0; i < want; i++) {
		uint32_t kg = lo + (uint32_t)(th_rand(&m->seed) % (hi - lo + 1));
		uint32_t id = (uint32_t)th_rand(&m->seed) & 0xffff;
		uint64_t x = th_rand(&m->seed) % 10;

		memset(&r[i], 0, sizeof(r[i]));
		r[i].sid = sid;
		r[i].level = level;
		r[i].key[0] = (uint8_t)(kg >> 8);
		r[i].key[1] = (uint8_t)kg;
		r[i].key[2] = (uint8_t)(sid >> 8);
		r[i].key[3] = (uint8_t)sid;
		r[i].key[4] = (uint8_t)(id >> 8);
		r[i].key[5] = (uint8_t)id;
		r[i].key[6] = (uint8_t)gen;
		/* DELETE and MERGE at level 0 only, as the engine writes them */
		r[i].kind = level > 0 || x < 6 ? SFS_DF_PUT : x < 8 ? SFS_DF_DELETE : SFS_DF_MERGE;
		r[i].vlen = r[i].kind == SFS_DF_PUT ? (uint8_t)(th_rand(&m->seed) % 17)
						    : r[i].kind == SFS_DF_MERGE ? 8 : 0;
		for (unsigned j = 0; j < r[i].vlen; j++)
			r[i].val[j] = (uint8_t)th_rand(&m->seed);
	}
	qsort(r, want, sizeof(*r), key_cmp);
	for (size_t i = 0; i < want; i++)
		if (!n || key_cmp(&r[n - 1], &r[i]))
			r[n++] = r[i];

	rand_name(&m->seed, sid, ".sst", f->name, sizeof(f->name));
	pjoin(path, wdir, f->name);
	cr_assert_eq(sfs_df_writer_open(path, &wo, &wr), 0, "%s", sfs_last_error());
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(sfs_df_writer_add(wr, r[i].key, KLEN, r[i].kind, r[i].val, r[i].vlen), 0, "%s",
			     sfs_last_error());
	cr_assert_eq(sfs_df_writer_finish(wr, &rows), 0, "%s", sfs_last_error());
	cr_assert_eq(rows, n);

	/* Its vector: none, ~25 % of rows, or (one file per old table) all. */
	bits = calloc(sfs_dv_words(n), 8);
	if (gen == 5 && sid == 2)
		mode = 3;
	for (size_t i = 0; i < n; i++) {
		uint8_t mk = mode == 3 || (mode == 1 && th_rand(&m->seed) % 4 == 0);

		m->masked[m->nrows + i] = mk;
		if (mk)
			bits[i / 64] |= 1ull << (i % 64);
	}
	if (mode == 1 || mode == 3) {
		if (!*dv)
			cr_assert_eq(sfs_dv_builder_new(dv), 0);
		cr_assert_eq(sfs_dv_builder_add(*dv, f->name, n, bits, sfs_dv_words(n)), 0, "%s",
			     sfs_last_error());
	}
	free(bits);

	f->worker = w;
	f->sid = sid;
	f->level = level;
	f->gen = gen;
	f->first = m->nrows;
	f->n = n;
	f->kg_lo = kg_of(r[0].key);
	f->kg_hi = kg_of(r[n - 1].key);
	m->nrows += n;
	snprintf(tf->name, sizeof(tf->name), "%s", f->name);
	tf->level = level;
	tf->rows = n;
}

/* Old worker @w of m->old_p: tables of sids 1 and 2 (and 9 on worker 0
 * only), six files each at levels 0,0,1,1,2,3 whose key groups span the
 * worker's whole range, a narrow slice of it or a third of it. */
static void old_worker(struct model *m, const char *base, unsigned w)
{
	uint32_t wlo = sfs_kg_range_start(w, m->old_p, MAXP), whi = sfs_kg_range_end(w, m->old_p, MAXP);
	static const uint32_t sids[3] = { 1, 2, 9 };
	struct sfs_tsnap_table tabs[3];
	struct sfs_tsnap_file tf[3][6];
	struct sfs_tsnap s = { .watermark = 1234, .tables = tabs };
	char path[PATH_MAX];

	pathf(m->src[w], "%s/old%u", base, w);
	cr_assert_eq(mkdir(m->src[w], 0700), 0);
	for (unsigned t = 0; t < (w == 0 ? 3u : 2u); t++) {
		sfs_dv_builder_t *dv = NULL;

		memset(&tabs[t], 0, sizeof(tabs[t]));
		tabs[t].sid = sids[t];
		tabs[t].files = tf[t];
		tabs[t].nfiles = 6;
		for (uint32_t g = 0; g < 6; g++) {
			uint32_t width = whi - wlo + 1, lo = wlo, hi = whi;
			uint64_t mode = th_rand(&m->seed) % 3;

			if (mode == 1)
				width = 1 + (uint32_t)(th_rand(&m->seed) % 8);
			else if (mode == 2)
				width = (whi - wlo + 1) / 3;
			if (mode) {
				lo = wlo + (uint32_t)(th_rand(&m->seed) % (whi - wlo + 2 - width));
				hi = lo + width - 1;
			}
			old_file(m, m->src[w], w, sids[t], g, lo, hi, &tf[t][g], &dv);
		}
		if (dv) {
			rand_name(&m->seed, sids[t], ".dvi", tabs[t].dvi, sizeof(tabs[t].dvi));
			pjoin(path, m->src[w], tabs[t].dvi);
			cr_assert_eq(sfs_dv_builder_write(dv, path), 0, "%s", sfs_last_error());
			sfs_dv_builder_free(dv);
		}
		s.ntables++;
	}
	pjoin(path, m->src[w], "TABLES");
	cr_assert_eq(sfs_tsnap_write(path, &s), 0, "%s", sfs_last_error());
}

static void build_model(struct model *m, const char *base, unsigned old_p, uint64_t seed)
{
	memset(m, 0, sizeof(*m));
	m->old_p = old_p;
	m->seed = seed;
	for (unsigned w = 0; w < old_p; w++)
		old_worker(m, base, w);
}

static void free_model(struct model *m)
{
	free(m->rows);
	free(m->masked);
}

struct stats {
	unsigned linked, copied, rewritten, contained;
};

/* Check the rebuilt @dst for key groups [lo, hi] against the model. */
static void verify(const struct model *m, const char *dst, uint32_t lo, uint32_t hi, int expect_link,
		   struct stats *st)
{
	struct tup *want = malloc((m->nrows + 1) * sizeof(*want)), *got = malloc((m->nrows + 1) * sizeof(*got));
	size_t nw = 0, ng = 0, nlisted = 1;   /* TABLES */
	char path[PATH_MAX];
	struct sfs_tsnap s;
	struct dirent *e;
	DIR *d;

	for (size_t i = 0; i < m->nrows; i++) {
		uint32_t kg = kg_of(m->rows[i].key);

		if (!m->masked[i] && kg >= lo && kg <= hi)
			want[nw++] = m->rows[i];
	}

	pjoin(path, dst, "TABLES");
	cr_assert_eq(sfs_tsnap_read(path, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(s.watermark, 0);
	for (uint32_t t = 0; t < s.ntables; t++) {
		const struct sfs_tsnap_table *tb = &s.tables[t];
		sfs_dv_index_t *ix = NULL;
		int last_gen[4] = { -1, -1, -1, -1 };

		cr_assert(t == 0 || s.tables[t - 1].sid < tb->sid, "tables in sid order");
		cr_assert_gt(tb->nfiles, 0, "an empty table is not listed");
		if (tb->dvi[0]) {
			pjoin(path, dst, tb->dvi);
			cr_assert_eq(sfs_dv_open(path, &ix), 0, "%s", sfs_last_error());
			nlisted++;
		}
		for (uint32_t i = 0; i < tb->nfiles; i++) {
			const struct sfs_tsnap_file *f = &tb->files[i];
			const struct ofile *of = NULL;
			struct sfs_df_meta md;
			sfs_df_reader_t *r;
			sfs_df_iter_t *it;
			struct sfs_df_row row;
			uint64_t *bits = NULL;
			size_t words = 0;
			int origin_w = -1, origin_g = -1, rc;
			struct stat a, b;

			nlisted++;
			for (size_t k = 0; k < m->nfiles && !of; k++)
				if (!strcmp(m->files[k].name, f->name))
					of = &m->files[k];
			pjoin(path, dst, f->name);
			cr_assert_eq(sfs_df_reader_open(path, NULL, &r), 0, "%s", sfs_last_error());
			sfs_df_reader_meta(r, &md);
			cr_assert_eq(md.rows, f->rows, "%s", f->name);
			if (ix && sfs_dv_find(ix, f->name) >= 0)
				cr_assert_eq(sfs_dv_lookup(ix, f->name, &bits, &words), 0);
			if (of) {
				/* kept under its name: contained, linked or copied whole */
				char sp[PATH_MAX];

				cr_assert(of->kg_lo >= lo && of->kg_hi <= hi, "%s kept but not contained", f->name);
				cr_assert_eq(f->level, of->level);
				pjoin(sp, m->src[of->worker], f->name);
				cr_assert_eq(stat(sp, &a), 0);
				cr_assert_eq(stat(path, &b), 0);
				cr_assert_eq(a.st_size, b.st_size);
				if (expect_link) {
					cr_assert_eq(a.st_ino, b.st_ino, "%s rewritten, not linked", f->name);
					cr_assert_eq(a.st_dev, b.st_dev);
					st->linked++;
				} else {
					cr_assert_neq(a.st_dev, b.st_dev);
					st->copied++;
				}
			} else {
				/* rewritten: no vector, the level's codec, a fresh name */
				cr_assert_null(bits, "%s: a rewritten file has no vector", f->name);
				cr_assert_eq(md.codec, f->level <= 1 ? SFS_DF_LZ4 : SFS_DF_ZSTD, "%s", f->name);
				cr_assert(md.kg_lo >= lo && md.kg_hi <= hi);
				st->rewritten++;
			}
			cr_assert_eq(sfs_df_iter_range(r, NULL, 0, NULL, 0, bits, words, &it), 0);
			while ((rc = sfs_df_iter_next(it, &row)) == 1) {
				struct tup *g = &got[ng++];
				uint32_t kg;
				int w;

				cr_assert_lt(ng, m->nrows + 1, "more visible rows than exist");
				cr_assert_eq(row.klen, KLEN);
				memset(g, 0, sizeof(*g));
				memcpy(g->key, row.key, KLEN);
				kg = kg_of(g->key);
				cr_assert(kg >= lo && kg <= hi, "%s: key group %u outside [%u, %u]", f->name, kg, lo, hi);
				cr_assert_eq((uint32_t)g->key[2] << 8 | g->key[3], tb->sid);
				g->sid = tb->sid;
				g->level = f->level;
				g->kind = (uint8_t)row.kind;
				g->vlen = (uint8_t)row.vlen;
				if (row.vlen)
					memcpy(g->val, row.val, row.vlen);
				/* one file, one origin */
				w = (int)sfs_kg_owner(kg, m->old_p, MAXP);
				if (origin_w < 0) {
					origin_w = w;
					origin_g = g->key[6];
				}
				cr_assert_eq(w, origin_w);
				cr_assert_eq(g->key[6], origin_g);
			}
			cr_assert_eq(rc, 0, "%s", sfs_last_error());
			sfs_df_iter_close(it);
			sfs_df_reader_close(r);
			free(bits);
			/* each source's files keep their order (level-0 age) */
			if (origin_w >= 0) {
				cr_assert_gt(origin_g, last_gen[origin_w], "sid %u: file order of worker %d lost",
					     tb->sid, origin_w);
				last_gen[origin_w] = origin_g;
			}
		}
		sfs_dv_close(ix);
	}

	/* every old file wholly inside the range is kept under its name */
	for (size_t k = 0; k < m->nfiles; k++) {
		const struct ofile *of = &m->files[k];
		int found = 0;

		if (of->kg_lo < lo || of->kg_hi > hi)
			continue;
		st->contained++;
		for (uint32_t t = 0; t < s.ntables && !found; t++)
			for (uint32_t i = 0; i < s.tables[t].nfiles && !found; i++)
				found = !strcmp(s.tables[t].files[i].name, of->name);
		cr_assert(found, "%s is inside [%u, %u] but not kept", of->name, lo, hi);
	}
	sfs_tsnap_free(&s);

	/* nothing but what TABLES lists */
	d = opendir(dst);
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			nlisted--;
	closedir(d);
	cr_assert_eq(nlisted, 0, "stray or missing files in %s", dst);

	qsort(want, nw, sizeof(*want), tup_cmp);
	qsort(got, ng, sizeof(*got), tup_cmp);
	cr_assert_eq(ng, nw, "[%u, %u]: %zu visible rows, expected %zu", lo, hi, ng, nw);
	for (size_t i = 0; i < nw; i++)
		cr_assert_eq(tup_cmp(&want[i], &got[i]), 0, "[%u, %u]: row %zu differs", lo, hi, i);
	free(want);
	free(got);
}

static void rescale(unsigned old_p, unsigned new_p, uint64_t seed, struct stats *st)
{
	struct model m;
	const char *src[4];
	char dst[PATH_MAX];

	build_model(&m, dir, old_p, seed);
	for (unsigned w = 0; w < old_p; w++)
		src[w] = m.src[w];
	for (unsigned j = 0; j < new_p; j++) {
		uint32_t lo = sfs_kg_range_start(j, new_p, MAXP), hi = sfs_kg_range_end(j, new_p, MAXP);

		pathf(dst, "%s/new/%u", dir, j);   /* parent made by the rebuild */
		cr_assert_eq(sfs_tsnap_rebuild(src, old_p, dst, lo, hi), 0, "%s", sfs_last_error());
		verify(&m, dst, lo, hi, 1, st);
	}
	free_model(&m);
}

Test(table_snap, rebuild_2_to_1)
{
	struct stats st = { 0 };

	rescale(2, 1, 11, &st);
	/* one new worker owns everything: every file linked, nothing rewritten */
	cr_assert_eq(st.rewritten, 0);
	cr_assert_eq(st.linked, 2 * 6 + 2 * 6 + 6);
	cr_assert_eq(st.contained, st.linked);
}

Test(table_snap, rebuild_1_to_2)
{
	struct stats st = { 0 };

	rescale(1, 2, 22, &st);
	cr_assert_gt(st.linked, 0);
	cr_assert_gt(st.rewritten, 0);
	cr_assert_eq(st.contained, st.linked);
}

Test(table_snap, rebuild_2_to_3)
{
	struct stats st = { 0 };

	rescale(2, 3, 33, &st);
	cr_assert_gt(st.linked, 0);
	cr_assert_gt(st.rewritten, 0);
	cr_assert_eq(st.contained, st.linked);
}

/* More seeds, smaller pieces: every split of 1..3 old into 1..4 new. */
Test(table_snap, rebuild_seeds, .timeout = 120)
{
	struct stats st = { 0 };
	char sub[PATH_MAX];
	unsigned k = 0;

	for (unsigned o = 1; o <= 3; o++)
		for (unsigned nw = 1; nw <= 4; nw++) {
			struct model m;
			const char *src[4];

			pathf(sub, "%s/s%u", dir, k++);
			cr_assert_eq(mkdir(sub, 0700), 0);
			build_model(&m, sub, o, 1000 + o * 10 + nw);
			for (unsigned w = 0; w < o; w++)
				src[w] = m.src[w];
			for (unsigned j = 0; j < nw; j++) {
				uint32_t lo = sfs_kg_range_start(j, nw, MAXP), hi = sfs_kg_range_end(j, nw, MAXP);
				char dst[PATH_MAX];

				pathf(dst, "%s/new%u", sub, j);
				cr_assert_eq(sfs_tsnap_rebuild(src, o, dst, lo, hi), 0, "%s", sfs_last_error());
				verify(&m, dst, lo, hi, 1, &st);
			}
			free_model(&m);
		}
	cr_assert_eq(st.contained, st.linked);
}

/* Across file systems link(2) fails with EXDEV: contained files are copied. */
Test(table_snap, rebuild_copies_across_file_systems)
{
	struct stats st = { 0 };
	struct model m;
	struct stat a, b;
	const char *src[1];
	char dst[PATH_MAX];

	snprintf(shm, sizeof(shm), "/dev/shm/sfs-tsnap-XXXXXX");
	if (!mkdtemp(shm)) {
		shm[0] = '\0';
		cr_skip_test("no /dev/shm");
	}
	cr_assert_eq(stat(shm, &a), 0);
	cr_assert_eq(stat(dir, &b), 0);
	if (a.st_dev == b.st_dev)
		cr_skip_test("/dev/shm and /tmp are one file system");
	build_model(&m, shm, 1, 44);
	src[0] = m.src[0];
	pathf(dst, "%s/new", dir);
	cr_assert_eq(sfs_tsnap_rebuild(src, 1, dst, 0, MAXP - 1), 0, "%s", sfs_last_error());
	verify(&m, dst, 0, MAXP - 1, 0, &st);
	cr_assert_eq(st.copied, 18);
	cr_assert_eq(st.rewritten, 0);
	free_model(&m);
}

static int count_entries(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

Test(table_snap, rebuild_refusals)
{
	struct model m;
	const char *src[2];
	char dst[PATH_MAX], path[PATH_MAX], name[256];
	struct sfs_tsnap s;
	struct stat st;
	int rc;

	build_model(&m, dir, 2, 55);
	src[0] = m.src[0];
	src[1] = m.src[1];

	/* bad arguments */
	pathf(dst, "%s/new", dir);
	cr_assert_eq(sfs_tsnap_rebuild(src, 2, dst, 5, 4), SFS_EUSAGE);
	cr_assert_eq(sfs_tsnap_rebuild(src, 2, dst, 0, 65536), SFS_EUSAGE);
	cr_assert_eq(stat(dst, &st), -1);

	/* a non-empty destination is not touched */
	cr_assert_eq(mkdir(dst, 0700), 0);
	pjoin(path, dst, "keep");
	put_raw(path, "x", 1);
	cr_assert_eq(sfs_tsnap_rebuild(src, 2, dst, 0, 127), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "not empty"), "%s", sfs_last_error());
	cr_assert_eq(count_entries(dst), 1);
	unlink(path);

	/* a file listed but missing, found after others were placed: named,
	 * and the (pre-existing, empty) destination emptied again */
	snprintf(name, sizeof(name), "%s", m.files[m.nfiles - 1].name);
	pjoin(path, m.src[1], name);
	{
		char keep[PATH_MAX];

		pjoin(keep, dir, "moved.sst");
		cr_assert_eq(rename(path, keep), 0);
		rc = sfs_tsnap_rebuild(src, 2, dst, 0, 127);
		cr_assert_eq(rc, -ENOENT, "%d: %s", rc, sfs_last_error());
		cr_assert_not_null(strstr(sfs_last_error(), name), "%s", sfs_last_error());
		cr_assert_eq(count_entries(dst), 0);
		cr_assert_eq(stat(dst, &st), 0);
		/* the same into a directory the call creates: removed again */
		rmdir(dst);
		cr_assert_eq(sfs_tsnap_rebuild(src, 2, dst, 0, 127), -ENOENT);
		cr_assert_eq(stat(dst, &st), -1);
		cr_assert_eq(rename(keep, path), 0);
	}

	/* TABLES and the data file disagree on rows */
	pjoin(path, m.src[0], "TABLES");
	cr_assert_eq(sfs_tsnap_read(path, &s), 0);
	s.tables[1].files[2].rows++;
	cr_assert_eq(sfs_tsnap_write(path, &s), 0);
	rc = sfs_tsnap_rebuild(src, 2, dst, 0, 127);
	cr_assert_eq(rc, SFS_ECORRUPT, "%d: %s", rc, sfs_last_error());
	cr_assert_not_null(strstr(sfs_last_error(), s.tables[1].files[2].name), "%s", sfs_last_error());
	cr_assert_not_null(strstr(sfs_last_error(), "rows"), "%s", sfs_last_error());
	cr_assert_eq(stat(dst, &st), -1);
	s.tables[1].files[2].rows--;
	cr_assert_eq(sfs_tsnap_write(path, &s), 0);

	/* two sources holding one name (a stager's bug): refused, not merged */
	{
		char other[PATH_MAX], p2[PATH_MAX];
		struct sfs_tsnap one = { .ntables = 1, .tables = &s.tables[0] };
		const char *two[2] = { m.src[0], other };

		pathf(other, "%s/dup", dir);
		cr_assert_eq(mkdir(other, 0700), 0);
		s.tables[0].dvi[0] = '\0';
		for (uint32_t i = 0; i < s.tables[0].nfiles; i++) {
			pjoin(path, m.src[0], s.tables[0].files[i].name);
			pjoin(p2, other, s.tables[0].files[i].name);
			cr_assert_eq(link(path, p2), 0);
		}
		pjoin(p2, other, "TABLES");
		cr_assert_eq(sfs_tsnap_write(p2, &one), 0);
		rc = sfs_tsnap_rebuild(two, 2, dst, 0, 127);
		cr_assert_eq(rc, SFS_ECORRUPT, "%d: %s", rc, sfs_last_error());
		cr_assert_not_null(strstr(sfs_last_error(), "two sources"), "%s", sfs_last_error());
		cr_assert_eq(stat(dst, &st), -1);
	}
	sfs_tsnap_free(&s);

	/* a source without TABLES */
	pjoin(path, m.src[1], "TABLES");
	unlink(path);
	rc = sfs_tsnap_rebuild(src, 2, dst, 0, 127);
	cr_assert_eq(rc, -ENOENT);
	cr_assert_not_null(strstr(sfs_last_error(), path), "%s", sfs_last_error());
	cr_assert_eq(stat(dst, &st), -1);

	/* still good after all that: no sources gives an empty worker */
	cr_assert_eq(sfs_tsnap_rebuild(NULL, 0, dst, 0, 127), 0, "%s", sfs_last_error());
	pjoin(path, dst, "TABLES");
	cr_assert_eq(sfs_tsnap_read(path, &s), 0);
	cr_assert_eq(s.ntables, 0);
	sfs_tsnap_free(&s);
	free_model(&m);
}
