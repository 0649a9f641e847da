/*
 * shim.c — the power-loss test's model of durability (SQLite's crash test:
 * what was not made durable by fsync is gone).  Built as
 * build/tests/libsfs_powerloss.so and given to every process of a group by
 * LD_PRELOAD; tests/powerloss/restore.c rebuilds a tree from what it
 * recorded, after the fault facility's `powerloss` action killed the group
 * (common/fault.h).
 *
 * The model, for everything under $SFS_POWERLOSS_DIR (the "disk"; its own
 * directory is the mount point and always exists):
 *  - fsync(2) or fdatasync(2) of a regular file makes its content at that
 *    moment durable;
 *  - fsync(2) or fdatasync(2) of a directory makes its entries at that
 *    moment durable: name -> object, for files and directories;
 *  - syncfs(2) and sync(2) make the whole tree durable;
 *  - nothing else is durable: after the power loss a directory holds its
 *    entries as of its last sync (none if it was never synced), a file its
 *    content as of its last sync (empty if it was never synced), whatever
 *    was written, created, renamed, linked or unlinked after.
 *
 * Design: the snapshot at each sync.  The brief suggested wrapping every
 * call that changes the tree (open, write, rename, link, unlink, ...) to
 * track what is durable; that is not needed: the real file system holds
 * the current state, so what a sync makes durable is exactly what the file
 * system shows at the sync — a copy of the file's bytes, a listing of the
 * directory.  Wrapping only the sync calls means no write path to miss
 * (pwritev2, copy_file_range, fallocate, a write RocksDB does through a
 * call not wrapped) and nothing to get wrong about rename semantics.
 *
 * Objects are keyed by inode number and birth time (statx btime, ns): an
 * inode number freed and reused by a new file is a different object, so a
 * directory's durable entry never shows the new file's bytes as the old
 * one's.  Hard links (the checkpointer links the table store's files)
 * share one key, as they share one inode.
 *
 * The records, under $SFS_POWERLOSS_DIR/.durable/ (outside the model):
 *    f/<key>   the file's content at its last sync
 *    d/<key>   the directory's entries at its last sync: "<d|f> <key> <name>\n"
 *    lock      flock(2) around each record (processes sync concurrently)
 * A record is written to a temporary name and renamed: a process killed
 * while recording leaves the previous record (its sync never returned).
 * Once $SFS_POWERLOSS_DIR/.powerloss exists (the fault action writes it
 * before it kills the group) nothing more is recorded.
 *
 * Limits (what it does not model):
 *  - writes made durable without a sync call: O_SYNC/O_DSYNC opens, msync
 *    of a shared mapping, O_DIRECT (sfs and RocksDB, as configured by sfs,
 *    use none: `strace -f` of a run shows fsync and fdatasync only);
 *  - sync_file_range(2) is not durable (it writes back no metadata): not
 *    wrapped, as if it did nothing;
 *  - torn or reordered writes within a file, unsynced data that happens to
 *    survive, a file whose entry is durable but whose size grew unsynced
 *    showing zeros: the model is "unsynced is gone", the harshest
 *    of the clean ones;
 *  - symlinks, fifos and other special files are not recorded (none under
 *    an sfs data directory);
 *  - calls made by a statically linked libc or by raw syscall(2) are not
 *    seen (the sfs binaries link libc dynamically).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/powerloss/powerloss.h"

static char root[PATH_MAX];	/* realpath of $SFS_POWERLOSS_DIR; "" when unset */
static size_t rootlen;

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_syncfs)(int);
static void (*real_sync)(void);

__attribute__((constructor)) static void pl_init(void)
{
	const char *d = getenv("SFS_POWERLOSS_DIR");

	real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	real_syncfs = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
	real_sync = (void (*)(void))dlsym(RTLD_NEXT, "sync");
	if (d && *d && realpath(d, root))
		rootlen = strlen(root);
	else
		root[0] = 0;
}

static void die(const char *what, const char *path)
{
	/* A record lost would make the test pass or fail for nothing. */
	fprintf(stderr, "powerloss shim[%d]: %s %s: %s\n", (int)getpid(), what, path, strerror(errno));
	abort();
}

/* The path of @fd under the root, or NULL (not ours, or a record). */
static const char *fd_path(int fd, char *buf, size_t cap)
{
	char link[64];
	ssize_t n;

	if (!rootlen)
		return NULL;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, buf, cap - 1)) < 0)
		return NULL;
	buf[n] = 0;
	if (strncmp(buf, root, rootlen) || (buf[rootlen] && buf[rootlen] != '/'))
		return NULL;
	if (!strncmp(buf + rootlen, "/" PL_SHADOW, strlen("/" PL_SHADOW)) ||
	    !strncmp(buf + rootlen, "/" PL_MARKER, strlen("/" PL_MARKER)))
		return NULL;
	return buf;
}

static int copy_fd(int in, int out)
{
	char b[1 << 16];

	for (;;) {
		ssize_t r = read(in, b, sizeof(b));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return (int)r;
		for (ssize_t o = 0; o < r;) {
			ssize_t w = write(out, b + o, (size_t)(r - o));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return -1;
			o += w;
		}
	}
}

static int lock_shadow(char *shadow, size_t cap)
{
	char p[PATH_MAX];
	int lfd;

	snprintf(shadow, cap, "%s/%s", root, PL_SHADOW);
	snprintf(p, sizeof(p), "%s/f", shadow);
	if (mkdir(shadow, 0700) && errno != EEXIST)
		die("mkdir", shadow);
	if (mkdir(p, 0700) && errno != EEXIST)
		die("mkdir", p);
	snprintf(p, sizeof(p), "%s/d", shadow);
	if (mkdir(p, 0700) && errno != EEXIST)
		die("mkdir", p);
	snprintf(p, sizeof(p), "%s/lock", shadow);
	if ((lfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		die("open", p);
	while (flock(lfd, LOCK_EX))
		if (errno != EINTR)
			die("flock", p);
	return lfd;
}

static int powered_off(void)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", root, PL_MARKER);
	return access(p, F_OK) == 0;
}

/* Commit @tmp as @dst (both in the shadow). */
static void commit(const char *tmp, const char *dst)
{
	if (rename(tmp, dst))
		die("rename", tmp);
}

static void record_file(int fd, const char *path, const char *key, const char *shadow)
{
	char src[64], tmp[PATH_MAX], dst[PATH_MAX];
	int in, out;

	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	snprintf(dst, sizeof(dst), "%s/f/%s", shadow, key);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", dst, (int)getpid());
	/* a fresh open description: @fd may be write-only, its offset is the caller's */
	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		die("reopen", path);
	if ((out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		die("create", tmp);
	if (copy_fd(in, out))
		die("copy", path);
	close(in);
	close(out);
	commit(tmp, dst);
}

static void record_dir(int dfd, const char *path, const char *key, const char *shadow)
{
	char tmp[PATH_MAX], dst[PATH_MAX], k[PL_KEY_MAX];
	DIR *d;
	FILE *out;
	struct dirent *e;
	int fd2;

	snprintf(dst, sizeof(dst), "%s/d/%s", shadow, key);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", dst, (int)getpid());
	if ((fd2 = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || !(d = fdopendir(fd2)))
		die("opendir", path);
	if (!(out = fopen(tmp, "we")))
		die("create", tmp);
	while ((e = readdir(d))) {
		struct statx sx;
		char type;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strchr(e->d_name, '\n'))
			continue;	/* not representable; sfs makes no such name */
		if (statx(dirfd(d), e->d_name, AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME | STATX_TYPE, &sx))
			continue;	/* gone meanwhile: not an entry at the sync */
		if (S_ISDIR(sx.stx_mode))
			type = 'd';
		else if (S_ISREG(sx.stx_mode))
			type = 'f';
		else
			continue;
		pl_key_statx(&sx, k, sizeof(k));
		if (path[rootlen] == 0 && (!strcmp(e->d_name, PL_SHADOW) || !strcmp(e->d_name, PL_MARKER)))
			continue;
		fprintf(out, "%c %s %s\n", type, k, e->d_name);
	}
	closedir(d);
	if (fflush(out) || ferror(out))
		die("write", tmp);
	fclose(out);
	commit(tmp, dst);
}

/* Record what a sync of @fd makes durable. */
static void on_sync(int fd)
{
	char pbuf[PATH_MAX], shadow[PATH_MAX], key[PL_KEY_MAX];
	const char *path = fd_path(fd, pbuf, sizeof(pbuf));
	struct statx sx;
	int lfd, saved = errno;

	if (!path)
		return;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME | STATX_TYPE, &sx))
		return;
	if (!S_ISDIR(sx.stx_mode) && !S_ISREG(sx.stx_mode))
		return;
	pl_key_statx(&sx, key, sizeof(key));
	lfd = lock_shadow(shadow, sizeof(shadow));
	if (!powered_off()) {
		if (S_ISDIR(sx.stx_mode))
			record_dir(fd, path, key, shadow);
		else
			record_file(fd, path, key, shadow);
	}
	close(lfd);	/* drops the flock */
	errno = saved;
}

/* Every directory and file under @dir (open as @dfd), recorded: syncfs/sync. */
static void record_tree(int dfd, const char *path, const char *shadow)
{
	struct statx sx;
	char key[PL_KEY_MAX], sub[PATH_MAX];
	DIR *d;
	struct dirent *e;
	int fd2;

	if (statx(dfd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME | STATX_TYPE, &sx))
		return;
	pl_key_statx(&sx, key, sizeof(key));
	record_dir(dfd, path, key, shadow);
	if ((fd2 = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || !(d = fdopendir(fd2)))
		return;
	while ((e = readdir(d))) {
		int cfd;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (path[rootlen] == 0 && (!strcmp(e->d_name, PL_SHADOW) || !strcmp(e->d_name, PL_MARKER)))
			continue;
		if ((cfd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
			continue;
		if (statx(cfd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME | STATX_TYPE, &sx) == 0) {
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			pl_key_statx(&sx, key, sizeof(key));
			if (S_ISDIR(sx.stx_mode))
				record_tree(cfd, sub, shadow);
			else if (S_ISREG(sx.stx_mode))
				record_file(cfd, sub, key, shadow);
		}
		close(cfd);
	}
	closedir(d);
}

static void on_syncall(void)
{
	char shadow[PATH_MAX];
	int lfd, rfd, saved = errno;

	if (!rootlen)
		return;
	lfd = lock_shadow(shadow, sizeof(shadow));
	if (!powered_off() && (rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		record_tree(rfd, root, shadow);
		close(rfd);
	}
	close(lfd);
	errno = saved;
}

/* The wrappers: the real call first (its errors are the caller's), then the
 * record, before the caller learns the data is durable. */
int fsync(int fd)
{
	int rc = real_fsync(fd);

	if (rc == 0)
		on_sync(fd);
	return rc;
}

int fdatasync(int fd)
{
	int rc = real_fdatasync(fd);

	if (rc == 0)
		on_sync(fd);
	return rc;
}

int syncfs(int fd)
{
	int rc = real_syncfs(fd);

	if (rc == 0)
		on_syncall();
	return rc;
}

void sync(void)
{
	real_sync();
	on_syncall();
}
