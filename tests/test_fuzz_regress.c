/*
 * test_fuzz_regress.c — the fuzzers' findings as regression tests: every
 * file under tests/fuzz/regress/<target>/ is the input that crashed, leaked
 * or broke a rule in a reader under `make fuzz` (the bytes the reader saw:
 * tests/fuzz/save.h), fed here to the same reader.  Each must now be
 * refused cleanly: an error code, and sfs_last_error() (rt_last_error()
 * for the runtime's sink) naming the file.  Without the fix an input
 * either crashes this test, is accepted (the test fails), or — for the
 * undefined behaviour only a sanitizer sees — fails under `make asan`.
 *
 * Run from the source tree (make test's working directory).  Cost: one
 * parse per file, milliseconds in all.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpointer/ckstore.h"
#include "checkpointer/coord.h"
#include "runtime/sink.h"
#include "runtime/util.h"
#include "store/memory/memdump.h"
#include "store/table/layout/bufimage.h"
#include "store/table/table_snap.h"
#include "sfs.h"

#define REGRESS "tests/fuzz/regress"

/* One reader: parse @n bytes at @p named @name; 0 if accepted. */
typedef int (*reader_fn)(const char *name, const char *p, size_t n);

static int rd_metadata(const char *name, const char *p, size_t n)
{
	struct ck_meta m;
	int rc = sfs__ck_meta_parse(name, p, n, &m);

	if (!rc)
		sfs__ck_meta_free(&m);
	return rc;
}

static int rd_tables(const char *name, const char *p, size_t n)
{
	struct sfs_tsnap s;
	int rc = sfs_tsnap_parse(name, p, n, &s);

	if (!rc)
		sfs_tsnap_free(&s);
	return rc;
}

static int rd_sinklog(const char *name, const char *p, size_t n)
{
	struct rt_sink t;
	char *buf = NULL;
	size_t cap = 0;
	FILE *f;
	int rc;

	cr_assert_eq(rt_sink_init(&t, RT_SINK_TABLE), 0);
	cr_assert_not_null(f = fmemopen((void *)p, n, "r"), "%s: fmemopen", name);
	rc = rt_sink_read_log(&t, f, name, &buf, &cap);
	fclose(f);
	free(buf);
	rt_sink_free(&t);
	return rc;
}

static int count_rec(void *arg, const struct sfs_mdump_rec *r)
{
	(void)r;
	++*(uint64_t *)arg;
	return 0;
}

static int rd_memdump(const char *name, const char *p, size_t n)
{
	uint64_t seen = 0;
	FILE *f;
	int rc;

	cr_assert_not_null(f = fmemopen((void *)p, n, "r"), "%s: fmemopen", name);
	rc = sfs_mdump_read_stream(f, name, count_rec, &seen, NULL);
	fclose(f);
	return rc;
}

static int rd_states(const char *name, const char *p, size_t n)
{
	static struct sfs_state_desc st[SFS_MAX_STATES];
	char *val = malloc(n + 1);
	int rc;

	(void)name;   /* the parser names the entry, not a file */
	cr_assert_not_null(val);
	memcpy(val, p, n);
	val[n] = 0;
	memset(st, 0, sizeof(st));
	rc = sfs__ck_coord_states_parse(val, st);
	free(val);
	return rc;
}

/* The image checker wants the buffer 64-byte aligned, as a mapping puts it. */
static int rd_bufimg(const char *name, const char *p, size_t n)
{
	void *a = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
	int rc;

	cr_assert_not_null(a);
	memcpy(a, p, n);
	rc = sfs_bufimg_check(name, a, n, NULL);
	free(a);
	return rc;
}

static const struct {
	const char *target;
	reader_fn fn;
	int runtime;            /* errors in rt_last_error() */
	int names_file;         /* the message names the file */
} readers[] = {
	{ "metadata", rd_metadata, 0, 1 },
	{ "tables", rd_tables, 0, 1 },
	{ "bufimg", rd_bufimg, 0, 1 },
	{ "sinklog", rd_sinklog, 1, 1 },
	{ "memdump", rd_memdump, 0, 1 },
	{ "states", rd_states, 0, 0 },
};

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	struct stat sb;
	char *p;

	cr_assert_not_null(f, "%s: cannot open", path);
	cr_assert_eq(fstat(fileno(f), &sb), 0);
	p = malloc((size_t)sb.st_size + 1);
	cr_assert_not_null(p);
	*n = fread(p, 1, (size_t)sb.st_size, f);
	fclose(f);
	return p;
}

Test(fuzz_regress, every_finding_is_refused_cleanly)
{
	unsigned total = 0;

	for (size_t r = 0; r < sizeof(readers) / sizeof(*readers); r++) {
		char dir[256];
		struct dirent *e;
		DIR *d;

		snprintf(dir, sizeof(dir), REGRESS "/%s", readers[r].target);
		if (!(d = opendir(dir)))
			continue;   /* no finding for this reader */
		while ((e = readdir(d))) {
			char path[600];
			const char *msg;
			size_t n;
			char *p;
			int rc;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			p = slurp(path, &n);
			rc = readers[r].fn(path, p, n);
			free(p);
			msg = readers[r].runtime ? rt_last_error() : sfs_last_error();
			cr_expect_lt(rc, 0, "%s: accepted (rc %d), the reader must refuse it", path, rc);
			if (rc < 0 && readers[r].names_file)
				cr_expect(strstr(msg, path) != NULL, "%s: the error does not name the file: %s",
					  path, msg);
			cr_log_info("%s: %s", path, msg);
			total++;
		}
		closedir(d);
	}
	cr_assert_gt(total, 0, "no input under " REGRESS " (run from the source tree)");
}
