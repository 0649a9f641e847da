/*
 * test_fs.c — the file helpers (common/fs.h): mkdir -p gives each
 * directory it creates the caller's mode, accepts what exists and names a
 * file in the way; link-or-copy and copy follow the caller's policy for an
 * existing target, on one file system and across two (/dev/shm is tmpfs,
 * /tmp is not; a link hook makes EXDEV where they are one); write-all
 * retries short writes and EINTR and fails on a 0 return instead of
 * looping.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfs.h"
#include "common/crc32c.h"
#include "common/fs.h"

static char dir[64];	/* under /tmp */
static char shm[64];	/* under /dev/shm: another file system, mostly */

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-test-fs-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(shm, sizeof(shm), "/dev/shm/sfs-test-fs-XXXXXX");
	cr_assert_not_null(mkdtemp(shm));
	umask(022);
	sfs__fs_write = NULL;
	sfs__fs_link = NULL;
}

static void teardown(void)
{
	sfs__fs_write = NULL;
	sfs__fs_link = NULL;
	sfs_rmtree(dir);
	sfs_rmtree(shm);
}

TestSuite(fs, .init = setup, .fini = teardown, .timeout = 30);

static unsigned mode_of(const char *p)
{
	struct stat st;

	cr_assert_eq(stat(p, &st), 0, "%s: %s", p, strerror(errno));
	return st.st_mode & 07777;
}

static ino_t ino_of(const char *p)
{
	struct stat st;

	cr_assert_eq(stat(p, &st), 0, "%s: %s", p, strerror(errno));
	return st.st_ino;
}

static void put(const char *p, const char *text)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void expect_text(const char *p, const char *text)
{
	char buf[256] = { 0 };
	int fd = open(p, O_RDONLY);

	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(read(fd, buf, sizeof(buf) - 1), (ssize_t)strlen(text));
	close(fd);
	cr_assert_str_eq(buf, text);
}

/* Files in @d whose name holds ".tmp." (a copy's or replace's leftovers). */
static int tmp_files(const char *d)
{
	char cmd[PATH_MAX + 64];
	FILE *f;
	int n = 0, c;

	snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c '\\.tmp\\.'", d);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%d", &n), 1);
	while ((c = fgetc(f)) != EOF)
		;
	pclose(f);
	return n;
}

/* ---- mkdir -p ------------------------------------------------------------------------- */

Test(fs, mkdirs_gives_each_created_directory_the_mode)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];

	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/a/b", dir);
	snprintf(c, sizeof(c), "%s/a/b/c", dir);
	cr_assert_eq(sfs_mkdirs(c, 0700), 0, "%s", sfs_last_error());
	cr_assert_eq(mode_of(a), 0700, "%o", mode_of(a));
	cr_assert_eq(mode_of(b), 0700, "%o", mode_of(b));
	cr_assert_eq(mode_of(c), 0700, "%o", mode_of(c));
	snprintf(c, sizeof(c), "%s/x/y/", dir);	/* a trailing slash */
	cr_assert_eq(sfs_mkdirs(c, 0750), 0, "%s", sfs_last_error());
	cr_assert_eq(mode_of(c), 0750, "%o", mode_of(c));
	snprintf(c, sizeof(c), "%s/x", dir);
	cr_assert_eq(mode_of(c), 0750, "%o", mode_of(c));
}

Test(fs, mkdirs_accepts_existing_directories_and_leaves_their_mode)
{
	char a[PATH_MAX];

	snprintf(a, sizeof(a), "%s/a/b", dir);
	cr_assert_eq(sfs_mkdirs(a, 0755), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mkdirs(a, 0700), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_mkdirs(dir, 0700), 0, "%s", sfs_last_error());
	cr_assert_eq(mode_of(a), 0755, "%o", mode_of(a));
}

/* What it makes durable is tests/e2e_powerloss.sh's to check; here: the
 * same directories, modes and refusals as sfs_mkdirs. */
Test(fs, mkdirs_durable_makes_the_chain_and_refuses_a_file_in_the_way)
{
	char a[PATH_MAX], c[PATH_MAX], f[PATH_MAX];

	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(c, sizeof(c), "%s/a/b/c/", dir);
	cr_assert_eq(sfs_mkdirs_durable(c, 0700), 0, "%s", sfs_last_error());
	cr_assert_eq(mode_of(a), 0700, "%o", mode_of(a));
	cr_assert_eq(mode_of(c), 0700, "%o", mode_of(c));
	cr_assert_eq(sfs_mkdirs_durable(c, 0750), 0, "%s", sfs_last_error());	/* there */
	cr_assert_eq(mode_of(c), 0700, "%o", mode_of(c));
	snprintf(f, sizeof(f), "%s/f", dir);
	put(f, "x");
	cr_assert_eq(sfs_mkdirs_durable(f, 0700), -ENOTDIR);
	snprintf(f, sizeof(f), "%s/f/g/h", dir);
	cr_assert_eq(sfs_mkdirs_durable(f, 0700), -ENOTDIR);
	cr_assert(strstr(sfs_last_error(), "/f"), "%s", sfs_last_error());
}

Test(fs, mkdirs_names_a_file_in_the_way)
{
	char f[PATH_MAX], below[PATH_MAX];

	snprintf(f, sizeof(f), "%s/f", dir);
	put(f, "x");
	cr_assert_eq(sfs_mkdirs(f, 0700), -ENOTDIR);
	cr_assert(strstr(sfs_last_error(), f) && strstr(sfs_last_error(), "not a directory"), "%s",
		  sfs_last_error());
	snprintf(below, sizeof(below), "%s/f/g/h", dir);	/* in the way of a middle component */
	cr_assert_eq(sfs_mkdirs(below, 0700), -ENOTDIR);
	cr_assert(strstr(sfs_last_error(), f), "%s", sfs_last_error());
}

Test(fs, mkdir_parent_makes_the_parent_only)
{
	char p[PATH_MAX], parent[PATH_MAX];

	snprintf(p, sizeof(p), "%s/p/q/file", dir);
	snprintf(parent, sizeof(parent), "%s/p/q", dir);
	cr_assert_eq(sfs_mkdir_parent(p, 0700), 0, "%s", sfs_last_error());
	cr_assert_eq(mode_of(parent), 0700);
	cr_assert_eq(access(p, F_OK), -1);
}

/* ---- link-or-copy and copy -------------------------------------------------------------- */

Test(fs, link_on_one_file_system_and_each_policy_for_an_existing_target)
{
	char from[PATH_MAX], to[PATH_MAX], other[PATH_MAX];
	struct sfs_copy_info ci = { .progress = NULL };

	snprintf(from, sizeof(from), "%s/from", dir);
	snprintf(to, sizeof(to), "%s/to", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	put(from, "immutable bytes");
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0, &ci), 0, "%s", sfs_last_error());
	cr_assert_eq(ci.copied, 0);
	cr_assert_eq(ino_of(from), ino_of(to), "a hard link");

	/* fail: -EEXIST, named */
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0, NULL), -EEXIST);
	cr_assert(strstr(sfs_last_error(), to), "%s", sfs_last_error());
	/* accept-if-same: the same inode, then equal bytes in another inode */
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(unlink(to), 0);
	put(to, "immutable bytes");
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL), 0, "%s", sfs_last_error());
	/* ... but not other bytes of the same length, nor another length */
	put(to, "immutable BYTES");
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL), -EEXIST);
	cr_assert(strstr(sfs_last_error(), "differs"), "%s", sfs_last_error());
	put(to, "short");
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL), -EEXIST);
	/* replace: the target becomes @from, nothing left beside it */
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_REPLACE, 0, NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(ino_of(from), ino_of(to));
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_REPLACE, 0, NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(tmp_files(dir), 0, "a replace left its temporary name");
	/* a missing source is an error naming it, never a parent made for nothing */
	cr_assert_lt(sfs_link_or_copy(other, to, SFS_EXIST_REPLACE, 0700, NULL), 0);
	cr_assert(strstr(sfs_last_error(), other), "%s", sfs_last_error());
}

Test(fs, link_makes_a_missing_parent_with_the_mode_only_when_asked)
{
	char from[PATH_MAX], to[PATH_MAX], parent[PATH_MAX];

	snprintf(from, sizeof(from), "%s/from", dir);
	snprintf(parent, sizeof(parent), "%s/d/e", dir);
	snprintf(to, sizeof(to), "%s/d/e/to", dir);
	put(from, "x");
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0, NULL), -ENOENT);
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0700, NULL), 0, "%s", sfs_last_error());
	cr_assert_eq(mode_of(parent), 0700);
	cr_assert_eq(ino_of(from), ino_of(to));
}

/* Across file systems: a copy, fsynced, its crc32c and size reported, each
 * policy as with a link. */
static void cross_device(const char src_dir[64], const char dst_dir[64])
{
	static const char text[] = "bytes that must be copied";
	char from[PATH_MAX], to[PATH_MAX];
	struct sfs_copy_info ci = { .progress = NULL };

	snprintf(from, sizeof(from), "%s/from", src_dir);
	snprintf(to, sizeof(to), "%s/sub/to", dst_dir);
	put(from, text);
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0700, &ci), 0, "%s", sfs_last_error());
	cr_assert_eq(ci.copied, 1);
	cr_assert_eq(ci.size, strlen(text));
	cr_assert_eq(ci.crc, sfs_crc32c(0, text, strlen(text)));
	cr_assert_neq(ino_of(from), ino_of(to));
	cr_assert_eq(mode_of(to), 0600);
	expect_text(to, text);

	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0700, &ci), -EEXIST);
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0700, &ci), 0, "%s", sfs_last_error());
	cr_assert_eq(ci.copied, 0, "the same bytes: nothing copied");
	put(to, "stale");
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0700, &ci), -EEXIST);
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_REPLACE, 0700, &ci), 0, "%s", sfs_last_error());
	cr_assert_eq(ci.copied, 1);
	expect_text(to, text);
	snprintf(to, sizeof(to), "%s/sub", dst_dir);
	cr_assert_eq(tmp_files(to), 0, "a replace left its temporary name");
}

Test(fs, cross_device_copies_dev_shm_to_tmp)
{
	struct stat a, b;

	cr_assert_eq(stat(shm, &a), 0);
	cr_assert_eq(stat(dir, &b), 0);
	if (a.st_dev == b.st_dev)
		cr_skip_test("/dev/shm and /tmp are one file system here (the hook test covers it)");
	cross_device(shm, dir);
}

static int link_exdev(const char *from, const char *to)
{
	(void)from;
	(void)to;
	errno = EXDEV;
	return -1;
}

Test(fs, cross_device_copies_when_link_says_exdev)
{
	sfs__fs_link = link_exdev;
	cross_device(dir, dir);
}

static int link_eperm(const char *from, const char *to)
{
	(void)from;
	(void)to;
	errno = EPERM;
	return -1;
}

Test(fs, no_hard_links_on_the_file_system_copies)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct sfs_copy_info ci = { .progress = NULL };

	snprintf(from, sizeof(from), "%s/from", dir);
	snprintf(to, sizeof(to), "%s/to", dir);
	put(from, "y");
	sfs__fs_link = link_eperm;
	cr_assert_eq(sfs_link_or_copy(from, to, SFS_EXIST_FAIL, 0, &ci), 0, "%s", sfs_last_error());
	cr_assert_eq(ci.copied, 1);
	expect_text(to, "y");
}

Test(fs, copy_file_never_writes_through_an_existing_target)
{
	char from[PATH_MAX], to[PATH_MAX];

	snprintf(from, sizeof(from), "%s/from", dir);
	snprintf(to, sizeof(to), "%s/to", dir);
	put(from, "new");
	put(to, "old");
	cr_assert_eq(sfs_copy_file(from, to, SFS_EXIST_FAIL, 0, NULL), -EEXIST);
	expect_text(to, "old");
	cr_assert_eq(sfs_copy_file(from, to, SFS_EXIST_SAME, 0, NULL), -EEXIST);
	expect_text(to, "old");
	cr_assert_eq(sfs_copy_file(from, to, SFS_EXIST_REPLACE, 0, NULL), 0, "%s", sfs_last_error());
	expect_text(to, "new");
	cr_assert_eq(tmp_files(dir), 0);
}

/* A source that is a symbolic link is refused, not copied: a checkpoint's
 * or a table's file is never read through a link. */
Test(fs, copy_file_never_reads_through_a_link)
{
	char from[PATH_MAX], to[PATH_MAX], target[PATH_MAX];

	snprintf(target, sizeof(target), "%s/secret", dir);
	snprintf(from, sizeof(from), "%s/from", dir);
	snprintf(to, sizeof(to), "%s/to", dir);
	put(target, "secret");
	cr_assert_eq(symlink(target, from), 0);
	cr_assert_eq(sfs_copy_file(from, to, SFS_EXIST_FAIL, 0, NULL), -ELOOP);
	cr_assert(strstr(sfs_last_error(), from) && strstr(sfs_last_error(), "symbolic link"), "%s",
		  sfs_last_error());
	cr_assert_neq(access(to, F_OK), 0, "copied through the link");
}

/* The one name check of every on-disk format, and how a name is shown. */
Test(fs, name_is_plain_and_shown_escaped)
{
	static const char *const good[] = { "a", "f1.sst", "a b", "..a", "a..", "-x", "\xc3\xa9" };
	static const char *const bad[] = { "", ".", "..", "/", "a/b", "/etc", "../x", "a\n", "\x1b[2J",
					   "a\x7f" };
	char big[300], show[64];

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		cr_assert(sfs_name_is_plain(good[i], strlen(good[i])), "'%s' refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		cr_assert(!sfs_name_is_plain(bad[i], strlen(bad[i])), "'%s' accepted", bad[i]);
	memset(big, 'a', sizeof(big));
	cr_assert(sfs_name_is_plain(big, 255));
	cr_assert(!sfs_name_is_plain(big, 256));
	cr_assert_str_eq(sfs_name_show("a\x1b[2J\n", 6, show, sizeof(show)), "a\\x1b[2J\\x0a");
	cr_assert_str_eq(sfs_name_show(big, 300, show, 8), "aaaaaaa");
}

/* ---- write all -------------------------------------------------------------------------- */

static int calls;

static ssize_t write_zero(int fd, const void *p, size_t n)
{
	(void)fd;
	(void)p;
	(void)n;
	calls++;
	return 0;
}

Test(fs, write_all_fails_on_a_zero_return_instead_of_looping)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/w", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	cr_assert_geq(fd, 0);
	calls = 0;
	sfs__fs_write = write_zero;
	cr_assert_eq(sfs_write_all(fd, "abc", 3, p), -EIO);
	cr_assert_eq(calls, 1, "called write %d times", calls);
	cr_assert(strstr(sfs_last_error(), p) && strstr(sfs_last_error(), "returned 0"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_write_all(fd, "abc", 3, NULL), -EIO);
	cr_assert(strstr(sfs_last_error(), "fd "), "unnamed: the fd named instead: %s", sfs_last_error());
	cr_assert_eq(sfs_write_all(fd, "", 0, p), 0, "nothing to write is not an error");
	close(fd);
}

/* One byte per call, an EINTR first: short writes and interrupts retried. */
static ssize_t write_dribble(int fd, const void *p, size_t n)
{
	if (calls++ == 0) {
		errno = EINTR;
		return -1;
	}
	return write(fd, p, n ? 1 : 0);
}

Test(fs, write_all_retries_short_writes_and_eintr)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/w", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	calls = 0;
	sfs__fs_write = write_dribble;
	cr_assert_eq(sfs_write_all(fd, "hello", 5, p), 0, "%s", sfs_last_error());
	cr_assert_eq(calls, 6);
	close(fd);
	sfs__fs_write = NULL;
	expect_text(p, "hello");
}

Test(fs, write_all_reports_a_real_error_by_name)
{
	int fd = open("/dev/full", O_WRONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(sfs_write_all(fd, "abc", 3, "/dev/full"), -ENOSPC);
	cr_assert(strstr(sfs_last_error(), "/dev/full"), "%s", sfs_last_error());
	close(fd);
}
