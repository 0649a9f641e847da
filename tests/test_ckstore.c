/*
 * test_ckstore.c — checkpoint storage (checkpointer/ckstore.c; _metadata:
 * metadata.c): crc32c; the _metadata round trip; incremental link volume
 * under growing state (counted by the stats, by st_nlink and by shared/'s entries); randomized
 * retention where every retained checkpoint restores byte-identical
 * files; refusals of corrupt, truncated, unknown-version, foreign,
 * path-escaping, missing-file and size-mismatch checkpoints; latest's
 * fallback; crashes at each named commit point (forked children killed
 * with SIGKILL, reporting through their exit status only); savepoints
 * surviving the original's deletion; and the `sfs checkpoints` /
 * `sfs savepoint` commands.
 *
 * Staged file contents are a pure function of their name (and a salt), so
 * any restored file can be checked without keeping copies.
 */
#include <cpuid.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "checkpointer/ckstore.h"
#include "common/fault.h"
#include "common/hash.h"
#include "sfs.h"
#include "tests/helpers.h"

static char dir[64], root[128], job[64];
static uint64_t salt;	/* changes the content a name stands for */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-ck-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(root, sizeof(root), "%s/checkpoints", dir);
	th_job(job, sizeof(job), "ck");
	salt = 0;
}

static void teardown(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(ckstore, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t name_seed(const char *name)
{
	return sfs_hash_bytes(salt, name, strlen(name));
}

/* The bytes a file called @name holds: size and content from its name. */
static size_t gen(const char *name, uint8_t *buf, size_t cap)
{
	uint64_t s = name_seed(name);
	size_t n = (size_t)(th_rand(&s) % 3000);

	cr_assert_leq(n, cap);
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)th_rand(&s);
	return n;
}

static void write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, p, n), (ssize_t)n);
	close(fd);
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	n = read(fd, buf, cap);
	close(fd);
	cr_assert_geq(n, 0);
	return (size_t)n;
}

/* Staged as RocksDB's are (common/rdb.h: sfs_rdb_checkpoint): its SSTs,
 * immutable, in the stage's shared/ (store/target.h, "Staging"). */
static void stage_path(char *out, size_t cap, uint32_t w, const char *name)
{
	size_t n = name ? strlen(name) : 0;
	int sst = n > 4 && !strcmp(name + n - 4, ".sst");

	snprintf(out, cap, "%s/stage/w%u%s%s%s", dir, w, name ? "/" : "", sst ? "shared/" : "",
		 name ? name : "");
}

static void stage_dir(uint32_t w)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/stage", dir);
	mkdir(p, 0755);
	stage_path(p, sizeof(p), w, NULL);
	mkdir(p, 0755);
	strcat(p, "/shared");
	mkdir(p, 0755);
}

/* Stage @name for worker @w with its generated content. */
static void put(uint32_t w, const char *name)
{
	char p[256];
	uint8_t buf[4096];

	stage_dir(w);
	stage_path(p, sizeof(p), w, name);
	write_file(p, buf, gen(name, buf, sizeof(buf)));
}

static void unstage(uint32_t w, const char *name)
{
	char p[256];

	stage_path(p, sizeof(p), w, name);
	cr_assert_eq(unlink(p), 0, "%s", p);
}

static void put_sst(uint32_t w, unsigned n)
{
	char name[32];

	snprintf(name, sizeof(name), "%06u.sst", n);
	put(w, name);
}

/* Entries of @path other than "." and "..", -1 if it cannot be read. */
static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* Checkpoint @id of the staged directories of workers 0..@workers-1. */
static int commit(struct ck_store *s, uint64_t id, uint32_t workers, struct ck_txn_stats *st)
{
	/* worker 0 keeps text, worker 1 binary bytes (a NUL, 0xff), others none */
	uint8_t b0[16], b1[3] = { 0, 0xff, (uint8_t)id };
	struct ck_source sources[4] = { { 0, 0, b0 }, { 1, sizeof(b1), b1 } };
	struct ck_table tables[4];
	struct ck_meta m;
	struct ck_txn *t;
	char p[256];
	int rc;

	memset(&m, 0, sizeof(m));
	snprintf(m.config, sizeof(m.config), "query=q4 backend=rocksdb workers=%u", workers);
	m.workers = workers;
	m.sink_epoch = id;
	sources[0].len = (uint32_t)snprintf((char *)b0, sizeof(b0), "0:%llu", (unsigned long long)id * 10);
	for (uint32_t w = 2; w < workers; w++)
		sources[w] = (struct ck_source){ w, 0, NULL };
	m.nsources = workers < 4 ? workers : 4;
	m.sources = sources;
	m.ntables = workers;
	m.tables = tables;
	for (uint32_t w = 0; w < workers; w++)
		tables[w] = (struct ck_table){ w, id * 100 + w };
	if ((rc = sfs__ck_txn_begin(s, id, &t)))
		return rc;
	for (uint32_t w = 0; w < workers; w++) {
		stage_path(p, sizeof(p), w, NULL);
		if ((rc = sfs__ck_txn_add_dir(t, w, p))) {
			sfs__ck_txn_abort(t);
			return rc;
		}
	}
	return sfs__ck_txn_commit(t, &m, st);
}

static void chk_path(char *out, size_t cap, const char *r, uint64_t id)
{
	cr_assert_lt(snprintf(out, cap, "%s/chk-%llu", r, (unsigned long long)id), (int)cap);
}

/* Restore every worker of checkpoint @id and compare each file with its
 * generated content; the private MANIFEST holds "manifest <id>". */
static void check_restore(const char *r, uint64_t id, uint32_t workers, int nfiles)
{
	char p[256], d[256], f[512];
	uint8_t want[4096], got[4096];
	struct ck_meta m;
	int total = 0;

	chk_path(p, sizeof(p), r, id);
	cr_assert_eq(sfs__ck_read(p, job, 1, &m), 0, "%s", sfs_last_error());
	for (uint32_t w = 0; w < workers; w++) {
		DIR *dd;
		struct dirent *e;

		snprintf(d, sizeof(d), "%s/restore-%llu-w%u", dir, (unsigned long long)id, w);
		cr_assert_eq(sfs__ck_restore_worker(&m, r, w, d), 0, "%s", sfs_last_error());
		cr_assert_not_null(dd = opendir(d));
		while ((e = readdir(dd))) {
			size_t wn, gn;

			if (e->d_name[0] == '.')
				continue;
			snprintf(f, sizeof(f), "%s/%s", d, e->d_name);
			gn = read_file(f, got, sizeof(got));
			if (!strncmp(e->d_name, "MANIFEST", 8))
				wn = (size_t)snprintf((char *)want, sizeof(want), "manifest %llu\n",
						      (unsigned long long)id);
			else
				wn = gen(e->d_name, want, sizeof(want));
			cr_assert(gn == wn && !memcmp(got, want, wn), "chk-%llu: %s differs",
				  (unsigned long long)id, f);
			total++;
		}
		closedir(dd);
		nftw(d, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	}
	if (nfiles >= 0)
		cr_assert_eq(total, nfiles, "chk-%llu restores %d files, want %d", (unsigned long long)id,
			     total, nfiles);
	sfs__ck_meta_free(&m);
}

static void put_manifest(uint32_t w, uint64_t id)
{
	char p[256], text[64];

	stage_dir(w);
	stage_path(p, sizeof(p), w, "MANIFEST");
	write_file(p, text, (size_t)snprintf(text, sizeof(text), "manifest %llu\n", (unsigned long long)id));
}

/* Every retained checkpoint is valid; shared/ holds exactly the union of
 * the shared files they reference (nothing missing, nothing leaked); no
 * _metadata.tmp is left. */
static void check_store(int want_n)
{
	uint64_t *ids;
	size_t n;
	int refs = 0;
	char p[256], q[512];

	cr_assert_eq(sfs__ck_ids(root, &ids, &n), 0);
	if (want_n >= 0)
		cr_assert_eq((int)n, want_n, "%zu checkpoints, want %d", n, want_n);
	/* Distinct shared paths over all retained checkpoints. */
	{
		char (*seen)[CK_PATH_MAX] = calloc(4096, CK_PATH_MAX);

		for (size_t i = 0; i < n; i++) {
			struct ck_meta m;

			chk_path(p, sizeof(p), root, ids[i]);
			cr_assert_eq(sfs__ck_read(p, job, 1, &m), 0, "%s", sfs_last_error());
			snprintf(q, sizeof(q), "%s/_metadata.tmp", p);
			cr_assert_neq(access(q, F_OK), 0, "%s left behind", q);
			for (uint32_t k = 0; k < m.nfiles; k++) {
				int dup = 0;

				if (!m.files[k].shared)
					continue;
				for (int j = 0; j < refs && !dup; j++)
					dup = !strcmp(seen[j], m.files[k].path);
				if (!dup) {
					cr_assert_lt(refs, 4096);
					strcpy(seen[refs++], m.files[k].path);
				}
			}
			sfs__ck_meta_free(&m);
		}
		free(seen);
	}
	snprintf(p, sizeof(p), "%s/shared", root);
	cr_assert_eq(count_dir(p), refs, "shared/ holds %d files, retained checkpoints reference %d",
		     count_dir(p), refs);
	free(ids);
}

/* ---- crc32c and the metadata round trip ------------------------------------------- */

Test(ckstore, crc32c_known_and_both_paths_agree)
{
	uint8_t buf[1024];
	uint64_t s = 7;

	cr_assert_eq(sfs__ck_crc32c(0, "123456789", 9), 0xe3069283u);
	cr_assert_eq(sfs__ck_crc32c_table(0, "123456789", 9), 0xe3069283u);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)th_rand(&s);
	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n + off <= sizeof(buf); n += 37) {
			uint32_t a = sfs__ck_crc32c(0, buf + off, n), b = sfs__ck_crc32c_table(0, buf + off, n);

			cr_assert_eq(a, b, "off %zu len %zu", off, n);
			/* Continuing a crc equals one call over the whole. */
			cr_assert_eq(sfs__ck_crc32c(sfs__ck_crc32c(0, buf + off, n / 2), buf + off + n / 2, n - n / 2), a);
		}
}

/* XINUSE (xgetbv 1) bit 2: the upper halves of ymm0-15 are in use, the
 * "dirty upper state" that makes every later legacy-SSE instruction of the
 * process wait on a merge (crc32c.c).  (Bit 7, zmm0-15's upper halves, is
 * reported set here from a process's start, and does not slow SSE.) */
static int upper_vector_state_dirty(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & 1u << 27) ||	/* OSXSAVE */
	    !__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 1u << 2))	/* XGETBV 1 */
		return -1;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	(void)hi;
	return (lo & 1u << 2) != 0;
#else
	return -1;
#endif
}

Test(ckstore, crc32c_leaves_the_upper_vector_state_clean)
{
	static uint8_t buf[64 << 10];
	int dirty;

	memset(buf, 0x5a, sizeof(buf));
	(void)sfs__ck_crc32c(0, buf, sizeof(buf));
	dirty = upper_vector_state_dirty();
	if (dirty < 0)
		cr_skip_test("this CPU cannot report its vector state in use");
	cr_assert_eq(dirty, 0, "a checksum left the upper halves of the vector registers dirty");
}

Test(ckstore, metadata_round_trip)
{
	struct ck_store *s;
	struct ck_txn_stats st;
	struct ck_meta m;
	char p[512], val[32];
	uint64_t total = 0;

	for (uint32_t w = 0; w < 2; w++) {
		put_sst(w, 1);
		put_sst(w, 2);
		put_manifest(w, 5);
		put(w, "OPTIONS-000007");
	}
	cr_assert_eq(sfs__ck_store_open(root, job, 3, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_store_last(s), 0);
	cr_assert_eq(commit(s, 5, 2, &st), 0, "%s", sfs_last_error());
	cr_assert_eq(st.links, 4);
	cr_assert_eq(st.copies, 4);
	cr_assert_eq(st.referenced, 0);
	cr_assert_eq(sfs__ck_store_last(s), 5);
	sfs__ck_store_close(s);

	chk_path(p, sizeof(p), root, 5);
	cr_assert_eq(sfs__ck_read(p, job, 1, &m), 0, "%s", sfs_last_error());
	cr_assert_eq(m.version, CK_FORMAT_VERSION);
	cr_assert_eq(m.id, 5);
	cr_assert_str_eq(m.job, job);
	cr_assert_str_eq(m.config, "query=q4 backend=rocksdb workers=2");
	cr_assert_eq(sfs__ck_meta_config(&m, "backend", val, sizeof(val)), 0);
	cr_assert_str_eq(val, "rocksdb");
	cr_assert_eq(sfs__ck_meta_config(&m, "workers", val, sizeof(val)), 0);
	cr_assert_str_eq(val, "2");
	cr_assert_eq(sfs__ck_meta_config(&m, "events", val, sizeof(val)), -ENOENT);
	cr_assert_eq(m.workers, 2);
	cr_assert_eq(m.sink_epoch, 5);
	cr_assert_eq(m.nsplits, 0);
	cr_assert_eq(m.nsources, 2);
	cr_assert_eq(m.sources[0].worker, 0);
	cr_assert_eq(m.sources[0].len, 4);
	cr_assert_eq(memcmp(m.sources[0].bytes, "0:50", 4), 0);
	cr_assert_eq(m.sources[1].len, 3);
	cr_assert_eq(memcmp(m.sources[1].bytes, "\0\xff\x05", 3), 0);
	cr_assert_eq(m.ntables, 2);
	cr_assert_eq(m.tables[1].worker, 1);
	cr_assert_eq(m.tables[1].version, 501);
	cr_assert_eq(m.nfiles, 8);
	cr_assert_gt(m.time_ms, 0);
	for (uint32_t i = 0; i < m.nfiles; i++) {
		const struct ck_file *f = &m.files[i];
		uint8_t buf[4096];

		total += f->size;
		cr_assert_eq(f->shared, strstr(f->local, ".sst") != NULL, "%s", f->path);
		if (f->shared)
			cr_assert(!strncmp(f->path, "shared/w", 8) && strstr(f->path, f->local), "%s", f->path);
		else
			cr_assert(!strncmp(f->path, "chk-5/w", 7), "%s", f->path);
		snprintf(p, sizeof(p), "%s/%s", root, f->path);
		cr_assert_eq(sfs__ck_crc32c(0, buf, read_file(p, buf, sizeof(buf))), f->crc, "%s", f->path);
	}
	cr_assert_eq(m.total_bytes, total);
	cr_assert_eq(m.new_bytes, total);
	sfs__ck_meta_free(&m);
	check_restore(root, 5, 2, 8);
}

/* ---- incremental ------------------------------------------------------------------- */

Test(ckstore, growing_state_links_only_new_files)
{
	enum { BASE = 50, STEPS = 20 };
	struct ck_store *s;
	struct ck_txn_stats st;
	char p[256];
	struct stat sb;

	for (unsigned i = 0; i < BASE; i++)
		put_sst(0, i);
	cr_assert_eq(sfs__ck_store_open(root, job, 3, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	for (unsigned k = 1; k <= STEPS; k++) {
		put_sst(0, BASE + k);
		put_manifest(0, k);
		cr_assert_eq(commit(s, k, 1, &st), 0, "%s", sfs_last_error());
		cr_assert_eq(st.links, k == 1 ? BASE + 1 : 1, "checkpoint %u linked %u", k, st.links);
		cr_assert_eq(st.referenced, k == 1 ? 0 : BASE + k - 1);
		cr_assert_eq(st.copies, 1);	/* the MANIFEST */
		/* Counted on disk: shared/ gains exactly one file per checkpoint. */
		snprintf(p, sizeof(p), "%s/shared", root);
		cr_assert_eq(count_dir(p), BASE + (int)k);
	}
	/* Each staged file was linked exactly once: staged name + shared name. */
	for (unsigned i = 0; i < BASE + STEPS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%06u.sst", i + (i >= BASE));
		stage_path(p, sizeof(p), 0, name);
		cr_assert_eq(stat(p, &sb), 0, "%s", p);
		cr_assert_eq(sb.st_nlink, 2, "%s has %lu links", p, (unsigned long)sb.st_nlink);
	}
	sfs__ck_store_close(s);
	check_store(3);
	check_restore(root, STEPS, 1, BASE + STEPS + 1);

	/* A reopen rebuilds the reference set from _metadata: still incremental. */
	cr_assert_eq(sfs__ck_store_open(root, job, 3, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_store_last(s), STEPS);
	put_sst(0, 999);
	cr_assert_eq(commit(s, STEPS + 1, 1, &st), 0, "%s", sfs_last_error());
	cr_assert_eq(st.links, 1);
	cr_assert_eq(st.referenced, BASE + STEPS);
	sfs__ck_store_close(s);
	/* base 0: a fresh lineage links everything again. */
	cr_assert_eq(sfs__ck_store_open(root, job, 3, 0, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_store_last(s), 0);
	cr_assert_eq(commit(s, STEPS + 2, 1, &st), 0, "%s", sfs_last_error());
	cr_assert_eq(st.links, BASE + STEPS + 1);
	cr_assert_eq(st.referenced, 0);
	sfs__ck_store_close(s);
	check_store(3);
}

/* ---- retention --------------------------------------------------------------------- */

Test(ckstore, retention_never_deletes_a_referenced_file, .timeout = 300)
{
	enum { MAXF = 40, W = 2, R = 3 };
	unsigned live[W][MAXF], nlive[W] = { 0, 0 }, next = 0;
	int nfiles[64];	/* per checkpoint id (mod 64): files over all workers */
	uint64_t seed = 0x5eed, steps = 30 * (uint64_t)th_soak();
	struct ck_store *s;

	cr_assert_eq(sfs__ck_store_open(root, job, R, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	for (uint64_t id = 1; id <= steps; id++) {
		int n = 0;

		for (uint32_t w = 0; w < W; w++) {
			unsigned changes = (unsigned)(th_rand(&seed) % 6);

			put_manifest(w, id);
			for (unsigned c = 0; c < changes; c++) {
				if (nlive[w] && (nlive[w] == MAXF || th_rand(&seed) % 3 == 0)) {
					unsigned k = (unsigned)(th_rand(&seed) % nlive[w]);
					char name[32];

					snprintf(name, sizeof(name), "%06u.sst", live[w][k]);
					unstage(w, name);
					live[w][k] = live[w][--nlive[w]];
				} else {
					live[w][nlive[w]++] = next;
					put_sst(w, next++);
				}
			}
			n += (int)nlive[w] + 1;
		}
		nfiles[id % 64] = n;
		cr_assert_eq(commit(s, id, W, NULL), 0, "%s", sfs_last_error());
		/* Sometimes the writer restarts: the state comes back from _metadata. */
		if (th_rand(&seed) % 5 == 0) {
			sfs__ck_store_close(s);
			cr_assert_eq(sfs__ck_store_open(root, job, R, UINT64_MAX, &s), 0, "%s", sfs_last_error());
			cr_assert_eq(sfs__ck_store_last(s), id);
		}
		check_store(id < R ? (int)id : R);
		for (uint64_t k = id > R ? id - R + 1 : 1; k <= id; k++)
			check_restore(root, k, W, nfiles[k % 64]);
	}
	sfs__ck_store_close(s);
}

/* After a restore from an older checkpoint, a local name comes back with
 * other content: it must not ride as a reference to the newer lineage's
 * file, the base must survive retention at open, and ids go on above the
 * newest directory. */
Test(ckstore, restore_from_older_checkpoint)
{
	struct ck_store *s;
	struct ck_txn_stats st;

	cr_assert_eq(sfs__ck_store_open(root, job, 2, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	for (unsigned k = 1; k <= 4; k++) {
		put_sst(0, k);
		put_manifest(0, k);
		cr_assert_eq(commit(s, k, 1, NULL), 0, "%s", sfs_last_error());
	}
	sfs__ck_store_close(s);
	check_store(2);

	/* Restore chk-3: the worker's instance goes back to 000001..3, then
	 * writes a different 000004.sst. */
	unstage(0, "000004.sst");
	salt = 1;
	put_sst(0, 4);
	salt = 0;
	cr_assert_eq(sfs__ck_store_open(root, job, 2, 3, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_store_last(s), 3);
	cr_assert_eq(sfs__ck_store_max_id(s), 4);
	cr_assert_eq(sfs__ck_txn_begin(s, 4, &(struct ck_txn *){ NULL }), SFS_EUSAGE);
	put_manifest(0, 5);
	cr_assert_eq(commit(s, 5, 1, &st), 0, "%s", sfs_last_error());
	cr_assert_eq(st.links, 1);
	cr_assert_eq(st.referenced, 3);
	sfs__ck_store_close(s);
	check_store(2);
	check_restore(root, 4, 1, 5);
	/* chk-5's 000004.sst is the salted one. */
	{
		struct ck_meta m;
		char p[256], d[256];
		uint8_t a[4096], b[4096];
		size_t n;

		chk_path(p, sizeof(p), root, 5);
		cr_assert_eq(sfs__ck_read(p, job, 1, &m), 0, "%s", sfs_last_error());
		snprintf(d, sizeof(d), "%s/r5", dir);
		cr_assert_eq(sfs__ck_restore_worker(&m, root, 0, d), 0, "%s", sfs_last_error());
		sfs__ck_meta_free(&m);
		snprintf(d, sizeof(d), "%s/r5/000004.sst", dir);
		n = read_file(d, a, sizeof(a));
		salt = 1;
		cr_assert(n == gen("000004.sst", b, sizeof(b)) && !memcmp(a, b, n));
	}
}

/* ---- refusals ---------------------------------------------------------------------- */

static void make_three(void)
{
	struct ck_store *s;

	cr_assert_eq(sfs__ck_store_open(root, job, 3, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	for (unsigned k = 1; k <= 3; k++) {
		put_sst(0, k);
		put_manifest(0, k);
		cr_assert_eq(commit(s, k, 1, NULL), 0, "%s", sfs_last_error());
	}
	sfs__ck_store_close(s);
}

static char *slurp(const char *path, size_t *len)
{
	static char buf[1 << 16];

	*len = read_file(path, (uint8_t *)buf, sizeof(buf) - 1);
	buf[*len] = 0;
	return buf;
}

/* Replace the first @from with @to in chk-@id/_metadata; @fix: recompute
 * the checksum line so only the strict parser can object. */
static void edit_meta(uint64_t id, const char *from, const char *to, int fix)
{
	char p[256], out[1 << 16];
	size_t len, n;
	char *buf, *at;

	snprintf(p, sizeof(p), "%s/chk-%llu/_metadata", root, (unsigned long long)id);
	buf = slurp(p, &len);
	cr_assert_not_null(at = strstr(buf, from), "'%s' not in %s", from, p);
	n = (size_t)snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
	if (fix) {
		char *last = out + n - 1;

		while (last > out && last[-1] != '\n')
			last--;
		n = (size_t)(last - out);
		n += (size_t)sprintf(last, "crc32c 0x%08x\n", sfs__ck_crc32c(0, out, n));
	}
	write_file(p, out, n);
}

static void refused(uint64_t id, const char *rjob, int verify, int code, const char *what)
{
	char p[256];
	struct ck_meta m;
	int rc;

	chk_path(p, sizeof(p), root, id);
	rc = sfs__ck_read(p, rjob, verify, &m);
	cr_assert_eq(rc, code, "chk-%llu: %d (%s), want %d", (unsigned long long)id, rc, sfs_last_error(), code);
	if (!code) {
		sfs__ck_meta_free(&m);
		return;
	}
	cr_assert_not_null(strstr(sfs_last_error(), what), "'%s' lacks '%s'", sfs_last_error(), what);
	cr_assert_eq(m.nfiles, 0);
	cr_assert_null(m.files);
}

Test(ckstore, refuses_bad_checkpoints_naming_file_and_problem)
{
	char p[256], text[256];
	size_t len;

	make_three();
	refused(3, "another-job", 0, SFS_EFOREIGN, "another-job");
	refused(3, job, 1, 0, "");	/* control: fine */

	/* A flipped digit: checksum. */
	edit_meta(3, "sink_epoch 3", "sink_epoch 4", 0);
	refused(3, job, 0, SFS_ECORRUPT, "checksum mismatch");
	edit_meta(3, "sink_epoch 4", "sink_epoch 3", 0);
	refused(3, job, 0, 0, "");

	/* Truncated. */
	snprintf(p, sizeof(p), "%s/chk-3/_metadata", root);
	slurp(p, &len);
	cr_assert_eq(truncate(p, (off_t)len - 5), 0);
	refused(3, job, 0, SFS_ECORRUPT, "truncated");
	cr_assert_eq(truncate(p, 0), 0);
	refused(3, job, 0, SFS_ECORRUPT, "empty");

	/* Unknown version (checked before the checksum). */
	edit_meta(2, "sfs-checkpoint 2", "sfs-checkpoint 3", 0);
	refused(2, job, 0, SFS_EVERSION, "format version 3");
	edit_meta(2, "sfs-checkpoint 3", "sfs-checkpoint 2", 0);

	/* A worker's bytes: odd hex, upper case, a worker out of range. */
	edit_meta(2, "source 0 4 303a3230", "source 0 4 303a323", 1);
	refused(2, job, 0, SFS_ECORRUPT, "expected 'source WORKER LEN HEX'");
	edit_meta(2, "source 0 4 303a323", "source 0 4 303A3230", 1);
	refused(2, job, 0, SFS_ECORRUPT, "lowercase hex");
	edit_meta(2, "source 0 4 303A3230", "source 1 4 303a3230", 1);
	refused(2, job, 0, SFS_ECORRUPT, "WORKER < workers");
	edit_meta(2, "source 1 4 303a3230", "source 0 4 303a3230", 1);
	refused(2, job, 0, 0, "");

	/* Checksum fine, content not: the strict parser. */
	edit_meta(2, "\nfile s shared/", "\nfile s shared/../../etc/", 1);
	refused(2, job, 0, SFS_ECORRUPT, "shared path must be");
	edit_meta(2, "shared/../../etc/", "shared/", 1);
	edit_meta(2, "sink_epoch 2", "sink_epoch  2", 1);
	refused(2, job, 0, SFS_ECORRUPT, "double or trailing space");
	edit_meta(2, "sink_epoch  2", "sink_epoch 2", 1);
	edit_meta(2, "sink_epoch 2", "sink_epoch 02", 1);
	refused(2, job, 0, SFS_ECORRUPT, "expected 'sink_epoch N'");
	edit_meta(2, "sink_epoch 02", "sink_epoch 2", 1);
	edit_meta(2, "files 3", "files 999999", 1);
	refused(2, job, 0, SFS_ECORRUPT, "count larger");
	edit_meta(2, "files 999999", "files 3", 1);
	edit_meta(2, "new_bytes", "extra 1\nnew_bytes", 1);
	refused(2, job, 0, SFS_ECORRUPT, "expected 'new_bytes N'");
	edit_meta(2, "extra 1\nnew_bytes", "new_bytes", 1);
	edit_meta(2, "id 2", "id 7", 1);
	refused(2, job, 0, SFS_ECORRUPT, "private path must be chk-<id>/w<worker>/<local>");
	edit_meta(2, "id 7", "id 2", 1);
	chk_path(p, sizeof(p), root, 2);
	chk_path(text, sizeof(text), root, 8);
	cr_assert_eq(rename(p, text), 0);
	refused(8, job, 0, SFS_ECORRUPT, "says id 2, but its directory is chk-8");
	cr_assert_eq(rename(text, p), 0);
	refused(2, job, 1, 0, "");

	/* Files: missing, size mismatch, content (verify only). */
	snprintf(p, sizeof(p), "%s/chk-2/w0/MANIFEST", root);
	snprintf(text, sizeof(text), "%s/moved", dir);
	cr_assert_eq(rename(p, text), 0);
	refused(2, job, 0, -ENOENT, "chk-2/w0/MANIFEST is missing");
	cr_assert_eq(rename(text, p), 0);
	write_file(p, "manifest 22\n", 12);
	refused(2, job, 0, SFS_ECORRUPT, "has 12 bytes, _metadata says 11");
	write_file(p, "manifest 3\n", 11);
	refused(2, job, 0, 0, "");
	refused(2, job, 1, SFS_ECORRUPT, "chk-2/w0/MANIFEST has crc32c");
	refused(1, job, 1, 0, "");
	/* Not a checkpoint directory at all. */
	{
		struct ck_meta m;

		cr_assert_eq(sfs__ck_read(dir, NULL, 0, &m), SFS_EUSAGE);
		cr_assert_not_null(strstr(sfs_last_error(), "not a checkpoint directory"));
	}
}

/* Names in _metadata that would leave the storage root ('..', an absolute
 * path, another directory) are refused by name; a file of the root that is
 * a symbolic link, even to a file of the right bytes, is refused, never
 * followed, and so is a _metadata that is one. */
Test(ckstore, refuses_names_and_links_leaving_the_root)
{
	char p[512], out[256], meta[256], *buf;
	uint8_t bytes[64];
	size_t len, n;

	make_three();
	edit_meta(2, "\nfile s shared/", "\nfile s /shared/", 1);
	refused(2, job, 0, SFS_ECORRUPT, "shared path must be shared/<name>: '/shared/");
	edit_meta(2, "\nfile s /shared/", "\nfile s shared/../", 1);
	refused(2, job, 0, SFS_ECORRUPT, "'shared/../");
	edit_meta(2, "\nfile s shared/../", "\nfile s shared/", 1);
	edit_meta(2, " 0 MANIFEST ", " 0 .. ", 1);
	refused(2, job, 0, SFS_ECORRUPT, "bad local name: '..'");
	edit_meta(2, " 0 .. ", " 0 MANIFEST ", 1);
	edit_meta(2, "chk-2/w0/MANIFEST", "chk-1/w0/MANIFEST", 1);
	refused(2, job, 0, SFS_ECORRUPT, "'chk-1/w0/MANIFEST'");
	edit_meta(2, "chk-1/w0/MANIFEST", "chk-2/w0/MANIFEST", 1);
	refused(2, job, 1, 0, "");

	/* chk-2/w0/MANIFEST a link to a copy outside the root: same bytes */
	snprintf(p, sizeof(p), "%s/chk-2/w0/MANIFEST", root);
	snprintf(out, sizeof(out), "%s/outside", dir);
	n = read_file(p, bytes, sizeof(bytes));
	write_file(out, bytes, n);
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(symlink(out, p), 0);
	refused(2, job, 1, SFS_ECORRUPT, "chk-2/w0/MANIFEST is a symbolic link");
	refused(2, job, 0, SFS_ECORRUPT, "chk-2/w0/MANIFEST is a symbolic link");
	cr_assert_eq(unlink(p), 0);
	write_file(p, bytes, n);
	refused(2, job, 1, 0, "");

	/* a shared file likewise */
	snprintf(meta, sizeof(meta), "%s/chk-2/_metadata", root);
	buf = slurp(meta, &len);
	{
		char *at = strstr(buf, "\nfile s shared/"), name[128];

		cr_assert_not_null(at);
		cr_assert_eq(sscanf(at, "\nfile s shared/%127s", name), 1);
		snprintf(p, sizeof(p), "%s/shared/%s", root, name);
	}
	snprintf(out, sizeof(out), "%s/outside-shared", dir);
	cr_assert_eq(rename(p, out), 0);
	cr_assert_eq(symlink(out, p), 0);
	refused(2, job, 1, SFS_ECORRUPT, "is a symbolic link");
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(rename(out, p), 0);

	/* _metadata itself a link (to a valid copy) */
	snprintf(out, sizeof(out), "%s/outside-meta", dir);
	cr_assert_eq(rename(meta, out), 0);
	cr_assert_eq(symlink(out, meta), 0);
	refused(2, job, 0, -ELOOP, "symbolic link");
	cr_assert_eq(unlink(meta), 0);
	cr_assert_eq(rename(out, meta), 0);
	refused(2, job, 1, 0, "");
}

/* A format-1 checkpoint (offsets per split) still reads: its splits come
 * back for the restore's migration, its sources are none. */
Test(ckstore, reads_format_1_splits)
{
	struct ck_meta m;
	char p[256];

	make_three();
	edit_meta(2, "sfs-checkpoint 2", "sfs-checkpoint 1", 1);
	edit_meta(2, "sources 1\nsource 0 4 303a3230\n", "splits 2\nsplit 0 20\nsplit 1 21\n", 1);
	chk_path(p, sizeof(p), root, 2);
	cr_assert_eq(sfs__ck_read(p, job, 1, &m), 0, "%s", sfs_last_error());
	cr_assert_eq(m.version, 1);
	cr_assert_eq(m.nsources, 0);
	cr_assert_eq(m.nsplits, 2);
	cr_assert_eq(m.splits[1].split, 1);
	cr_assert_eq(m.splits[1].offset, 21);
	sfs__ck_meta_free(&m);
	/* and a format-2 file with split lines is refused */
	edit_meta(2, "sfs-checkpoint 1", "sfs-checkpoint 2", 1);
	refused(2, job, 0, SFS_ECORRUPT, "expected 'sources N'");
}

Test(ckstore, latest_falls_back_to_newest_valid)
{
	struct ck_meta m;
	char d[256], p[512];

	make_three();
	cr_assert_eq(sfs__ck_latest(root, job, 1, &m, d, sizeof(d)), 0, "%s", sfs_last_error());
	cr_assert_eq(m.id, 3);
	sfs__ck_meta_free(&m);
	edit_meta(3, "sink_epoch 3", "sink_epoch 9", 0);
	/* chk-2 loses a shared file only it references. */
	cr_assert_eq(sfs__ck_read((chk_path(p, sizeof(p), root, 2), p), job, 0, &m), 0);
	for (uint32_t i = 0; i < m.nfiles; i++)
		if (strstr(m.files[i].path, "000002.sst")) {
			snprintf(p, sizeof(p), "%s/%s", root, m.files[i].path);
			cr_assert_eq(unlink(p), 0);
		}
	sfs__ck_meta_free(&m);
	cr_assert_eq(sfs__ck_latest(root, job, 0, &m, d, sizeof(d)), 0, "%s", sfs_last_error());
	cr_assert_eq(m.id, 1);
	chk_path(p, sizeof(p), root, 1);
	cr_assert_str_eq(d, p);
	sfs__ck_meta_free(&m);
	/* Nothing was deleted while reading: chk-3 and chk-2 are still there. */
	snprintf(p, sizeof(p), "%s/chk-3/_metadata", root);
	cr_assert_eq(access(p, F_OK), 0);
	cr_assert_eq(sfs__ck_latest(root, "other", 0, &m, d, sizeof(d)), -ENOENT);
	cr_assert_not_null(strstr(sfs_last_error(), "no valid checkpoint of job other"));
}

/* ---- crashes ----------------------------------------------------------------------- */

Test(ckstore, tmp_metadata_is_not_a_checkpoint_and_is_collected)
{
	struct ck_store *s;
	struct ck_meta m;
	char p[256], q[256];

	make_three();
	/* What a crash between writing and renaming leaves: chk-4 with a
	 * complete _metadata.tmp, a private copy, and a linked shared file. */
	snprintf(p, sizeof(p), "%s/chk-4", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/chk-4/w0", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/chk-3/_metadata", root);
	snprintf(q, sizeof(q), "%s/chk-4/_metadata.tmp", root);
	cr_assert_eq(link(p, q), 0);
	snprintf(q, sizeof(q), "%s/chk-4/w0/MANIFEST", root);
	write_file(q, "manifest 4\n", 11);
	snprintf(q, sizeof(q), "%s/shared/w0-00000000000000ff-000009.sst", root);
	write_file(q, "x", 1);

	chk_path(p, sizeof(p), root, 4);
	cr_assert_eq(sfs__ck_read(p, job, 0, &m), -ENOENT);
	cr_assert_not_null(strstr(sfs_last_error(), "chk-4/_metadata: missing"));
	cr_assert_eq(sfs__ck_latest(root, job, 0, &m, NULL, 0), 0);
	cr_assert_eq(m.id, 3);
	sfs__ck_meta_free(&m);
	/* Readers removed nothing. */
	cr_assert_eq(access(q, F_OK), 0);

	cr_assert_eq(sfs__ck_store_open(root, job, 3, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_store_max_id(s), 3);
	sfs__ck_store_close(s);
	cr_assert_neq(access(p, F_OK), 0, "chk-4 not collected");
	cr_assert_neq(access(q, F_OK), 0, "stray shared file not collected");
	check_store(3);
}

/* A writer that dies at point @arg while committing chk-3 (retain 2). */
static int crash_child(void *arg)
{
	struct ck_store *s;
	char rule[64];

	snprintf(rule, sizeof(rule), "%s:1", (const char *)arg);
	if (sfs_fault_arm(rule))
		return 12;
	if (sfs__ck_store_open(root, job, 2, UINT64_MAX, &s))
		return 10;
	if (commit(s, 3, 1, NULL))
		return 11;
	sfs__ck_store_close(s);
	return 0;
}

static void crash_at_point(const char *point, uint64_t want_latest)
{
	struct ck_store *s;
	struct ck_meta m;
	int status;
	pid_t pid;

	cr_assert_eq(sfs__ck_store_open(root, job, 2, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	for (unsigned k = 1; k <= 2; k++) {
		put_sst(0, k);
		put_manifest(0, k);
		cr_assert_eq(commit(s, k, 1, NULL), 0, "%s", sfs_last_error());
	}
	sfs__ck_store_close(s);
	put_sst(0, 3);
	put_manifest(0, 3);
	pid = th_fork(crash_child, (void *)point);
	cr_assert_gt(pid, 0);
	status = th_wait(pid, 20000);
	cr_assert(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "%s: child status %d (exit %d)", point, status, th_exit_code(status));

	/* Readers see the newest complete checkpoint... */
	cr_assert_eq(sfs__ck_latest(root, job, 1, &m, NULL, 0), 0, "%s", sfs_last_error());
	cr_assert_eq(m.id, want_latest, "%s: latest %llu", point, (unsigned long long)m.id);
	sfs__ck_meta_free(&m);
	/* ...and the next open collects the rest. */
	cr_assert_eq(sfs__ck_store_open(root, job, 2, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_store_last(s), want_latest);
	sfs__ck_store_close(s);
	check_store(2);
	for (uint64_t k = want_latest - 1; k <= want_latest; k++)
		check_restore(root, k, 1, (int)k + 1);
	/* And the store goes on. */
	cr_assert_eq(sfs__ck_store_open(root, job, 2, UINT64_MAX, &s), 0, "%s", sfs_last_error());
	put_sst(0, 4);
	put_manifest(0, 4);
	cr_assert_eq(commit(s, 4, 1, NULL), 0, "%s", sfs_last_error());
	sfs__ck_store_close(s);
	check_store(2);
	check_restore(root, 4, 1, 5);
}

Test(ckstore, crash_after_linking)
{
	crash_at_point("ck.commit.linked", 2);
}

Test(ckstore, crash_between_metadata_write_and_rename)
{
	crash_at_point("ck.commit.meta-tmp", 2);
}

Test(ckstore, crash_after_rename_before_retention)
{
	crash_at_point("ck.commit.renamed", 3);
}

Test(ckstore, crash_during_retention)
{
	crash_at_point("ck.retention", 3);
}

/* ---- savepoints and the commands --------------------------------------------------- */

Test(ckstore, savepoint_survives_deleting_the_original)
{
	char sp[256], p[256];
	struct ck_meta m;

	make_three();
	snprintf(sp, sizeof(sp), "%s/sp", dir);
	chk_path(p, sizeof(p), root, 2);
	cr_assert_eq(sfs__ck_savepoint(root, p, sp), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_savepoint(root, "chk-3", sp), -EEXIST);
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	cr_assert_eq(sfs__ck_latest(sp, job, 1, &m, NULL, 0), 0, "%s", sfs_last_error());
	cr_assert_eq(m.id, 2);
	sfs__ck_meta_free(&m);
	check_restore(sp, 2, 1, 3);
	/* A savepoint is a storage root of its own: a store can continue from it. */
	{
		struct ck_store *s;
		struct ck_txn_stats st;

		cr_assert_eq(sfs__ck_store_open(sp, job, 3, UINT64_MAX, &s), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs__ck_store_last(s), 2);
		unstage(0, "000003.sst");
		cr_assert_eq(commit(s, 3, 1, &st), 0, "%s", sfs_last_error());
		cr_assert_eq(st.links, 0);
		cr_assert_eq(st.referenced, 2);
		sfs__ck_store_close(s);
	}
}

Test(ckstore, refuses_bad_staged_names_and_ids)
{
	struct ck_store *s;
	struct ck_txn *t;
	char p[256];

	cr_assert_eq(sfs__ck_store_open(root, "bad job", 3, 0, &s), SFS_EUSAGE);
	cr_assert_eq(sfs__ck_store_open(root, job, 0, 0, &s), SFS_EUSAGE);
	cr_assert_eq(sfs__ck_store_open(root, job, 3, 0, &s), 0);
	put(0, "a b.sst");
	cr_assert_eq(commit(s, 1, 1, NULL), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "a b.sst"));
	unstage(0, "a b.sst");
	put_sst(0, 1);
	cr_assert_eq(sfs__ck_txn_begin(s, 1, &t), 0);
	stage_path(p, sizeof(p), 0, NULL);
	cr_assert_eq(sfs__ck_txn_add_dir(t, 0, p), 0);
	cr_assert_eq(sfs__ck_txn_add_dir(t, 0, p), SFS_EUSAGE);
	sfs__ck_txn_abort(t);
	/* The abort removed its files: the retry of the same id links again. */
	snprintf(p, sizeof(p), "%s/shared", root);
	cr_assert_eq(count_dir(p), 0);
	cr_assert_eq(commit(s, 1, 1, NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_txn_begin(s, 1, &t), SFS_EUSAGE);
	sfs__ck_store_close(s);
	check_store(1);
}

/* `$SFS_BIN/sfs ARGS...` with stdout to dir/out; its exit code. */
static int run_sfs(const char *arg, ...)
{
	const char *bin = getenv("SFS_BIN");
	char exe[512], out[128];
	const char *argv[16];
	int argc = 0;
	va_list ap;
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/sfs", bin && *bin ? bin : "./bin");
	argv[argc++] = exe;
	va_start(ap, arg);
	for (const char *a = arg; a && argc < 15; a = va_arg(ap, const char *))
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	snprintf(out, sizeof(out), "%s/out", dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	return th_exit_code(th_wait(pid, 30000));
}

Test(ckstore, commands_list_and_savepoint)
{
	char sp[256], p[256];
	size_t len;
	const char *out;
	struct ck_meta m;

	make_three();
	edit_meta(3, "sink_epoch 3", "sink_epoch 9", 0);
	cr_assert_eq(run_sfs("checkpoints", "--data", dir, NULL), 0);
	snprintf(p, sizeof(p), "%s/out", dir);
	out = slurp(p, &len);
	cr_assert_not_null(strstr(out, "invalid"), "%s", out);
	cr_assert_not_null(strstr(out, job), "%s", out);
	cr_assert_eq(run_sfs("checkpoints", "--data", dir, "--json", NULL), 0);
	out = slurp(p, &len);
	cr_assert_not_null(strstr(out, "\"id\": 2"), "%s", out);
	cr_assert_not_null(strstr(out, "\"valid\": false"), "%s", out);

	snprintf(sp, sizeof(sp), "%s/sp", dir);
	cr_assert_eq(run_sfs("savepoint", "--data", dir, "--id", "latest", "--out", sp, NULL), 0);
	cr_assert_eq(sfs__ck_latest(sp, job, 1, &m, NULL, 0), 0, "%s", sfs_last_error());
	cr_assert_eq(m.id, 2);	/* chk-3 is corrupt: latest fell back */
	sfs__ck_meta_free(&m);
	cr_assert_eq(run_sfs("savepoint", "--data", dir, "--id", "3", "--out", sp, NULL), 1);
	cr_assert_eq(run_sfs("savepoint", "--data", dir, "--id", "x", "--out", sp, NULL), 2);
	cr_assert_eq(run_sfs("savepoint", "--data", dir, "--out", sp, NULL), 2);
	cr_assert_eq(run_sfs("checkpoints", NULL), 2);
	cr_assert_eq(run_sfs("checkpoints", "--data", dir, "extra", NULL), 2);
	cr_assert_eq(run_sfs("checkpoints", "--data", sp, NULL), 1);	/* no sp/checkpoints */
}
