/*
 * fs.c — the file helpers (fs.h): mkdir -p, write all, commit by rename,
 * copy and link-or-copy with an explicit policy for an existing target,
 * rm -rf.  Depends on err.c and crc32c.c only (the fuzz builds link it
 * alone).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/fs.h"

#define FS_IO_BUF (1u << 20)

ssize_t (*sfs__fs_write)(int fd, const void *p, size_t n);
int (*sfs__fs_link)(const char *from, const char *to);

int sfs_name_is_plain(const char *name, size_t n)
{
	if (!name || n == 0 || n > 255 || (name[0] == '.' && (n == 1 || (n == 2 && name[1] == '.'))))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x20 || c == 0x7f || c == '/')
			return 0;
	}
	return 1;
}

const char *sfs_name_show(const char *name, size_t n, char *buf, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; name && i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		int esc = c < 0x20 || c >= 0x7f;

		if (o + (esc ? 4 : 1) >= cap)
			break;   /* cut whole: never half an escape */
		if (esc)
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	if (cap)
		buf[o < cap ? o : cap - 1] = 0;
	return buf;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT)
		return sfs__err(sfs__errno(), "remove %s: %s", path, strerror(errno));
	return 0;
}

int sfs_rmtree(const char *path)
{
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc == -1 && errno == ENOENT)
		return 0;
	if (rc == -1)
		return sfs__err(sfs__errno(), "remove %s: %s", path, strerror(errno));
	return rc;
}

/* After mkdir(2) said EEXIST: 0 if @p is a directory (or a link to one). */
static int is_dir(const char *p)
{
	struct stat st;

	if (stat(p, &st))
		return sfs__err(sfs__errno(), "directory %s: stat: %s", p, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return sfs__err(-ENOTDIR, "directory %s: exists and is not a directory", p);
	return 0;
}

int sfs_mkdirs(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(p))
		return sfs__err(SFS_EUSAGE, "directory '%s': empty or too long", path);
	/* The common case first: the parent exists, one syscall. */
	if (!mkdir(path, mode))
		return 0;
	if (errno == EEXIST)
		return is_dir(path);
	if (errno != ENOENT)
		return sfs__err(sfs__errno(), "directory %s: mkdir: %s", path, strerror(errno));
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		char c;

		if (*s != '/' && *s != '\0')
			continue;
		c = *s;
		*s = '\0';
		/* A file in the way of a middle component fails the next mkdir
		 * with ENOTDIR, naming it; the last is checked by is_dir. */
		if (mkdir(p, mode) && errno != EEXIST)
			return sfs__err(sfs__errno(), "directory %s: mkdir: %s", p, strerror(errno));
		*s = c;
		if (c == '\0' || s[1] == '\0')
			return is_dir(path);
	}
}

static int sfs_mkdir_parent_durable(const char *path, mode_t mode);

/* fsync the directory that holds @path ("/" and "." for none). */
static int sync_parent(const char *path)
{
	char p[PATH_MAX];
	const char *s = strrchr(path, '/');
	int fd, rc = 0;

	if (!s)
		snprintf(p, sizeof(p), ".");
	else if (s == path)
		snprintf(p, sizeof(p), "/");
	else
		snprintf(p, sizeof(p), "%.*s", (int)(s - path), path);
	if ((fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sfs__err(sfs__errno(), "directory %s: open: %s", p, strerror(errno));
	if (fsync(fd))
		rc = sfs__err(sfs__errno(), "directory %s: fsync: %s", p, strerror(errno));
	close(fd);
	return rc;
}

int sfs_mkdirs_durable(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	size_t n = strlen(path);
	int rc;

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof(p))
		return sfs__err(SFS_EUSAGE, "directory '%s': empty or too long", path);
	memcpy(p, path, n);
	p[n] = '\0';
	if (mkdir(p, mode) == 0 || errno == EEXIST)
		return (rc = is_dir(p)) ? rc : sync_parent(p);
	if (errno != ENOENT)
		return sfs__err(sfs__errno(), "directory %s: mkdir: %s", p, strerror(errno));
	/* the parent first (durable), then this one */
	if ((rc = sfs_mkdir_parent_durable(p, mode)))
		return rc;
	if (mkdir(p, mode) && errno != EEXIST)
		return sfs__err(sfs__errno(), "directory %s: mkdir: %s", p, strerror(errno));
	return (rc = is_dir(p)) ? rc : sync_parent(p);
}

int sfs_mkdir_parent(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	const char *s = strrchr(path, '/');

	if (!s || s == path)
		return 0;	/* "." or "/": there */
	if ((size_t)(s - path) >= sizeof(p))
		return sfs__err(SFS_EUSAGE, "%s: path too long", path);
	memcpy(p, path, (size_t)(s - path));
	p[s - path] = '\0';
	return sfs_mkdirs(p, mode);
}

/* @name, or "fd N" formatted into @buf: on the error path only, so the
 * loop costs nothing more than write(2). */
static const char *fd_name(char *buf, size_t cap, int fd, const char *name)
{
	if (name)
		return name;
	snprintf(buf, cap, "fd %d", fd);
	return buf;
}

int sfs_write_all(int fd, const void *p, size_t n, const char *name)
{
	size_t want = n;
	char fdn[24];
	int e;

	for (const char *b = p; n;) {
		ssize_t w = sfs__fs_write ? sfs__fs_write(fd, b, n) : write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			e = errno;
			return sfs__err(e ? -e : -EIO, "%s: write: %s", fd_name(fdn, sizeof(fdn), fd, name),
					strerror(e));
		}
		/* write(2) of n > 0 bytes returning 0 makes no progress: an
		 * error, not a reason to call it again for ever. */
		if (w == 0)
			return sfs__err(-EIO, "%s: write: returned 0 after %zu of %zu bytes",
					fd_name(fdn, sizeof(fdn), fd, name), want - n, want);
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int sfs_file_commit(FILE *f, const char *tmp, const char *path, int rc)
{
	/* ferror: a buffered write that failed earlier (a full disk) drops its
	 * chunk, and a later fflush of the rest may succeed: without it, a
	 * committed file with a hole (the runtime's sink had this hole, found by
	 * tests/e2e_diskfull.sh) */
	errno = 0;
	if (!rc && (fflush(f) || ferror(f) || fsync(fileno(f))))
		rc = sfs__err(sfs__errno(), "%s: write: %s", tmp, strerror(errno ? errno : EIO));
	if (fclose(f) && !rc)
		rc = sfs__err(sfs__errno(), "%s: close: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = sfs__err(sfs__errno(), "rename %s: %s", tmp, strerror(errno));
	if (rc)
		unlink(tmp);
	return rc;
}

/* 1 if @a and @b hold the same bytes (the same inode, or equal size and
 * contents), 0 if not, < 0 on an error.  O(size) unless one inode. */
static int same_bytes(const char *a, const char *b)
{
	struct stat sa, sb;
	int fa = -1, fb = -1, rc = 0;
	char *ba = NULL, *bb;

	if (stat(a, &sa))
		return sfs__err(sfs__errno(), "%s: stat: %s", a, strerror(errno));
	if (stat(b, &sb))
		return sfs__err(sfs__errno(), "%s: stat: %s", b, strerror(errno));
	if (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino)
		return 1;
	if (!S_ISREG(sb.st_mode) || sa.st_size != sb.st_size)
		return 0;
	if (!(ba = malloc(2 * (size_t)FS_IO_BUF)))
		return sfs__err(-ENOMEM, "%s: no memory to compare", b);
	bb = ba + FS_IO_BUF;
	if ((fa = open(a, O_RDONLY | O_CLOEXEC)) < 0 || (fb = open(b, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = sfs__err(sfs__errno(), "%s: open: %s", fa < 0 ? a : b, strerror(errno));
		goto out;
	}
	for (rc = 1; rc == 1;) {
		ssize_t ra = read(fa, ba, FS_IO_BUF), rb = ra > 0 ? read(fb, bb, (size_t)ra) : 0;

		if (ra < 0 || rb < 0)
			rc = sfs__err(sfs__errno(), "%s: read: %s", ra < 0 ? a : b, strerror(errno));
		else if (ra == 0)
			break;
		else if (rb != ra || memcmp(ba, bb, (size_t)ra))
			rc = 0;	/* a short read of a regular file at the same size: changed */
	}
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	free(ba);
	return rc;
}

/* @to exists: what @ex says that means. */
static int on_exists(const char *from, const char *to, enum sfs_exist ex)
{
	int same;

	if (ex != SFS_EXIST_SAME)
		return sfs__err(-EEXIST, "%s: exists (placing %s)", to, from);
	if ((same = same_bytes(from, to)) < 0)
		return same;
	return same ? 0 : sfs__err(-EEXIST, "%s: exists and differs from %s", to, from);
}

/* A name beside @to for a file that a rename then makes @to. */
static int tmp_name(char *out, size_t cap, const char *to)
{
	static unsigned seq;	/* threads of one process placing one name */

	if (snprintf(out, cap, "%s.tmp.%d.%u", to, (int)getpid(),
		     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= (int)cap)
		return sfs__err(SFS_EUSAGE, "%s: path too long", to);
	return 0;
}

/* Create @path for writing, never over an existing file; a missing parent
 * made once with @dmode when it is not 0.  A file descriptor, or -EEXIST
 * without a message, or an error. */
static int create_new(const char *path, mode_t dmode)
{
	for (int tries = 0;; tries++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), rc;

		if (fd >= 0)
			return fd;
		if (errno == EEXIST)
			return -EEXIST;
		if (errno != ENOENT || !dmode || tries)
			return sfs__err(sfs__errno(), "%s: create: %s", path, strerror(errno));
		if ((rc = sfs_mkdir_parent(path, dmode)))
			return rc;
	}
}

/* Copy the bytes of @in (named @from) to @out (named @to), fsynced. */
static int copy_fd(int in, const char *from, int out, const char *to, struct sfs_copy_info *info)
{
	char *buf = malloc(FS_IO_BUF);
	int rc = 0;

	if (!buf)
		return sfs__err(-ENOMEM, "copy %s: no memory", from);
	for (;;) {
		ssize_t r = read(in, buf, FS_IO_BUF);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sfs__err(sfs__errno(), "%s: read: %s", from, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		info->crc = sfs_crc32c(info->crc, buf, (size_t)r);
		info->size += (uint64_t)r;
		if (info->progress)
			info->progress();
		if ((rc = sfs_write_all(out, buf, (size_t)r, to)))
			break;
	}
	if (!rc && fsync(out))
		rc = sfs__err(sfs__errno(), "%s: fsync: %s", to, strerror(errno));
	free(buf);
	return rc;
}

int sfs_copy_file(const char *from, const char *to, enum sfs_exist ex, mode_t dmode,
		  struct sfs_copy_info *info)
{
	struct sfs_copy_info none = { 0 };
	char tmp[PATH_MAX];
	const char *dst = to;
	int in, out, rc;

	if (!info)
		info = &none;
	info->copied = 0;
	info->crc = 0;
	info->size = 0;
	/* Replacing goes through a new name and rename(2): @to is never seen
	 * half written.  Otherwise @to is created exclusively. */
	if (ex == SFS_EXIST_REPLACE && (rc = tmp_name(tmp, sizeof(tmp), to)))
		return rc;
	if (ex == SFS_EXIST_REPLACE)
		dst = tmp;
	/* O_NOFOLLOW: every source is a file of sfs's own state, named by a
	 * checkpoint or a table; a link in its place is refused, not copied. */
	if ((in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return sfs__err(sfs__errno(), "%s: open: %s%s", from, strerror(errno),
				errno == ELOOP ? " (a symbolic link: never followed)" : "");
	if ((out = create_new(dst, dmode)) < 0) {
		close(in);
		return out == -EEXIST ? on_exists(from, to, ex) : out;
	}
	info->copied = 1;
	rc = copy_fd(in, from, out, dst, info);
	close(in);
	if (close(out) && !rc)
		rc = sfs__err(sfs__errno(), "%s: close: %s", dst, strerror(errno));
	if (!rc && dst == tmp && rename(tmp, to))
		rc = sfs__err(sfs__errno(), "rename %s -> %s: %s", tmp, to, strerror(errno));
	if (rc)
		unlink(dst);
	return rc;
}

static int do_link(const char *from, const char *to)
{
	return sfs__fs_link ? sfs__fs_link(from, to) : link(from, to);
}

int sfs_link_or_copy(const char *from, const char *to, enum sfs_exist ex, mode_t dmode,
		     struct sfs_copy_info *info)
{
	char tmp[PATH_MAX];
	const char *dst = to;
	int rc;

	if (info)
		info->copied = 0;
	/* Replacing: link to a new name, then rename(2) over @to. */
	if (ex == SFS_EXIST_REPLACE && (rc = tmp_name(tmp, sizeof(tmp), to)))
		return rc;
	if (ex == SFS_EXIST_REPLACE)
		dst = tmp;
	for (int tries = 0;; tries++) {
		if (!do_link(from, dst))
			break;
		switch (errno) {
		case EEXIST:
			return on_exists(from, to, ex);
		case EXDEV:
		case EPERM:      /* no hard links on this file system, or protected_hardlinks */
		case EMLINK:
		case EOPNOTSUPP:
			return sfs_copy_file(from, to, ex, dmode, info);
		case ENOENT:	/* the parent of @to, made once; or @from is missing */
			if (dmode && !tries && !access(from, F_OK)) {
				if ((rc = sfs_mkdir_parent(dst, dmode)))
					return rc;
				continue;
			}
			/* fall through */
		default:
			return sfs__err(sfs__errno(), "link %s -> %s: %s", from, dst, strerror(errno));
		}
	}
	if (dst == tmp) {
		/* rename(2) between two links of one inode does nothing: unlink
		 * the new name in any case. */
		rc = rename(tmp, to) ? sfs__err(sfs__errno(), "rename %s -> %s: %s", tmp, to, strerror(errno))
				     : 0;
		unlink(tmp);
		return rc;
	}
	return 0;
}

/* sfs_mkdirs_durable of @path's parent ("/" and "." exist). */
static int sfs_mkdir_parent_durable(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	const char *s = strrchr(path, '/');

	if (!s || s == path)
		return 0;
	snprintf(p, sizeof(p), "%.*s", (int)(s - path), path);
	return sfs_mkdirs_durable(p, mode);
}
