/*
 * file.c — whole-file reads and atomic whole-file writes for the table
 * store's metadata (rules in file.h).  Every system call of the writer
 * passes a fault point first (layout.file.*, common/fault.h), so tests can
 * fail each one in turn.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "store/table/layout/file.h"
#include "store/table/layout/sync.h"

static int layout_sync = 1;	/* sync.h */

void sfs_layout_set_sync(int on)
{
	__atomic_store_n(&layout_sync, !!on, __ATOMIC_RELAXED);
}

int sfs_layout_sync(void)
{
	return __atomic_load_n(&layout_sync, __ATOMIC_RELAXED);
}

/* Fault point @point: non-zero with errno set when a failure is injected,
 * as the system call it stands before would. */
static int fault(const char *point)
{
	int e = sfs_fault(point);

	if (e)
		errno = -e;
	return e;
}

int sfs__layout_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n <= SFS_LAYOUT_NAME_MAX && sfs_name_is_plain(name, n);
}

static void dir_of(const char *path, char *out, size_t cap)
{
	const char *s = strrchr(path, '/');

	snprintf(out, cap, "%.*s", s ? (s == path ? 1 : (int)(s - path)) : 1, s ? path : ".");
}

/* The fault point, then the one write loop (common/fs.c), which also
 * refuses a write(2) that returns 0.  The caller names the file. */
static int write_all(int fd, const void *p, size_t n)
{
	return fault("layout.file.write") ? sfs__errno() : sfs_write_all(fd, p, n, NULL);
}

int sfs__layout_sync_dir(const char *dir)
{
	int dfd, rc = 0;

	if (!sfs_layout_sync())
		return 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sfs__err(sfs__errno(), "%s: open directory: %s", dir, strerror(errno));
	if (fsync(dfd))
		rc = sfs__err(sfs__errno(), "%s: fsync directory: %s", dir, strerror(errno));
	close(dfd);
	return rc;
}

int sfs__layout_write(const char *path, const void *buf, size_t len, int excl)
{
	static unsigned seq;   /* threads of one process writing one name (LATEST) */
	char tmp[PATH_MAX], dir[PATH_MAX];
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
		     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp))
		return sfs__err(SFS_EUSAGE, "%s: path too long", path);
	dir_of(path, dir, sizeof(dir));
	for (int tries = 0;; tries++) {
		fd = fault("layout.file.open") ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != ENOENT || tries)
			return sfs__err(sfs__errno(), "%s: create: %s", tmp, strerror(errno));
		if ((rc = sfs_mkdirs(dir, 0700)))   /* the first miss only; data: private */
			return rc;
	}
	if ((rc = write_all(fd, buf, len))) {
		rc = sfs__err(rc, "%s: write: %s", tmp, strerror(-rc));
	} else if (sfs_layout_sync() && (fault("layout.file.fsync") || fsync(fd))) {
		rc = sfs__err(sfs__errno(), "%s: fsync: %s", tmp, strerror(errno));
	} else if (excl) {
		/* link(2) fails if @path exists: the atomic create-if-absent that
		 * rename(2), which replaces, cannot give. */
		if (fault("layout.file.link") || link(tmp, path))
			rc = errno == EEXIST ? -EEXIST
					     : sfs__err(sfs__errno(), "link %s -> %s: %s", tmp, path, strerror(errno));
	} else if (fault("layout.file.rename") || rename(tmp, path)) {
		rc = sfs__err(sfs__errno(), "rename %s -> %s: %s", tmp, path, strerror(errno));
	}
	close(fd);
	if (rc || excl)
		unlink(tmp);
	if (rc)
		return rc == -EEXIST ? sfs__err(-EEXIST, "%s: exists (another committer won)", path) : rc;
	/* The name is durable only with its directory. */
	return sfs__layout_sync_dir(dir);
}

int sfs__layout_read(const char *path, uint8_t **buf, size_t *len)
{
	struct stat st;
	uint8_t *p;
	size_t got = 0;
	/* O_NOFOLLOW: every file read here is named by another file of the
	 * table's directory; a link there could lead out of it. */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return sfs__err(sfs__errno(), "%s: open: %s%s", path, strerror(errno),
				errno == ELOOP ? " (a symbolic link: never followed)" : "");
	if (fstat(fd, &st)) {
		close(fd);
		return sfs__err(sfs__errno(), "%s: stat: %s", path, strerror(errno));
	}
	if (!(p = malloc(st.st_size ? (size_t)st.st_size : 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, p + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = sfs__err(sfs__errno(), "%s: read at offset %zu: %s", path, got, strerror(errno));

			close(fd);
			free(p);
			return rc;
		}
		if (!r)
			break;
		got += (size_t)r;
	}
	close(fd);
	*buf = p;
	*len = got;   /* shorter if it shrank meanwhile: the parser says truncated */
	return 0;
}
