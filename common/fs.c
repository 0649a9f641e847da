/*
 * fs.c — directory chores (fs.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"

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

int sfs_mkdirs(const char *path)
{
	char p[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(p))
		return sfs__err(SFS_EUSAGE, "directory '%s': empty or too long", path);
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		char c;

		if (*s != '/' && *s != '\0')
			continue;
		c = *s;
		*s = '\0';
		if (mkdir(p, 0700) && errno != EEXIST)
			return sfs__err(sfs__errno(), "directory %s: mkdir: %s", p, strerror(errno));
		*s = c;
		if (c == '\0')
			return 0;
	}
}

int sfs_file_commit(FILE *f, const char *tmp, const char *path, int rc)
{
	if (!rc && (fflush(f) || fsync(fileno(f))))
		rc = sfs__err(sfs__errno(), "%s: write: %s", tmp, strerror(errno));
	if (fclose(f) && !rc)
		rc = sfs__err(sfs__errno(), "%s: close: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = sfs__err(sfs__errno(), "rename %s: %s", tmp, strerror(errno));
	if (rc)
		unlink(tmp);
	return rc;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out, rc = 0;

	if (in < 0)
		return sfs__err(sfs__errno(), "%s: open: %s", from, strerror(errno));
	if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		rc = errno == EEXIST ? -EEXIST : sfs__err(sfs__errno(), "%s: create: %s", to,
							    strerror(errno));
		close(in);
		return rc;
	}
	for (;;) {
		char buf[1 << 16];
		ssize_t r = read(in, buf, sizeof(buf)), w = 0;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sfs__err(sfs__errno(), "%s: read: %s", from, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		while (w < r) {
			ssize_t k = write(out, buf + w, (size_t)(r - w));

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				rc = sfs__err(k < 0 ? sfs__errno() : -EIO, "%s: write: %s", to,
					      strerror(k < 0 ? errno : EIO));
				break;
			}
			w += k;
		}
		if (rc)
			break;
	}
	if (!rc && fsync(out))
		rc = sfs__err(sfs__errno(), "%s: fsync: %s", to, strerror(errno));
	close(out);
	close(in);
	if (rc)
		unlink(to);
	return rc;
}

int sfs_link_or_copy(const char *from, const char *to)
{
	if (!link(from, to))
		return 0;
	switch (errno) {
	case EEXIST:
		return -EEXIST;
	case EXDEV:
	case EPERM:      /* no hard links on this file system, or protected_hardlinks */
	case EMLINK:
	case EOPNOTSUPP:
		return copy_file(from, to);
	default:
		return sfs__err(sfs__errno(), "link %s -> %s: %s", from, to, strerror(errno));
	}
}
