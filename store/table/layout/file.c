/*
 * file.c — whole-file reads and atomic whole-file writes for the table
 * store's metadata (rules in file.h).  Every system call of the writer
 * passes a fault point first (layout.file.*, common/fault.h), so tests can
 * fail each one in turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
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

/*
 * Spare inodes (file.h, sfs__layout_remove).  A pool per directory, process
 * local, under spare_mu (the compactor's threads commit to different
 * tables, and one table's commits are serialized by its lock): spares are
 * "<dir>/spare.tmp.<pid>.<n>", oldest first.  A spare is handed out only
 * SPARE_AGE_NS after its file was removed, so a reader that opened the old
 * name just before (by name, under no lock of ours: another process's
 * `sfs` tool) has long finished its one read() before the inode is
 * overwritten; within the compactor every read and remove of a
 * table's chain holds the table's lock anyway.  A directory that leaves
 * the pool (more than SPARE_DIRS in use: the least recently used) has its
 * spares unlinked.  After a kill, spares are temp files that nothing names:
 * sfs_mf_gc removes them at the next open.
 */
static void dir_of(const char *path, char *out, size_t cap);

#define SPARE_DIRS   32u
#define SPARE_MAX    64u               /* per directory: ~1 s of a busy table's removals */
#define SPARE_AGE_NS 1000000000ull

struct spare_dir {
	char dir[PATH_MAX];         /* "" unused */
	uint64_t used;              /* last use (LRU) */
	unsigned head, n;
	struct {
		uint32_t id;
		uint64_t at;        /* when its file was removed */
	} s[SPARE_MAX];
};

static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spare_dir *spares;    /* SPARE_DIRS of them, at first use */
static uint32_t spare_seq;
static int spares_on = 1;

void sfs_layout_set_spares(int on)
{
	__atomic_store_n(&spares_on, !!on, __ATOMIC_RELAXED);
}

static void spare_path(char *out, size_t cap, const char *dir, uint32_t id)
{
	snprintf(out, cap, "%s/spare.tmp.%d.%u", dir, (int)getpid(), id);
}

/* @dir's pool (spare_mu held), made when @make (evicting the least
 * recently used, whose spares are unlinked); NULL if none. */
static struct spare_dir *spare_pool(const char *dir, int make, uint64_t now)
{
	struct spare_dir *lru = NULL;
	char path[PATH_MAX + 64];

	if (!spares && (!make || !(spares = calloc(SPARE_DIRS, sizeof(*spares)))))
		return NULL;
	for (unsigned i = 0; i < SPARE_DIRS; i++) {
		struct spare_dir *d = &spares[i];

		if (d->dir[0] && !strcmp(d->dir, dir)) {
			d->used = now;
			return d;
		}
		if (!lru || !d->dir[0] || (lru->dir[0] && d->used < lru->used))
			lru = d;
	}
	if (!make || strlen(dir) >= sizeof(lru->dir))
		return NULL;
	for (; lru->n; lru->n--, lru->head = (lru->head + 1) % SPARE_MAX) {
		spare_path(path, sizeof(path), lru->dir, lru->s[lru->head].id);
		(void)unlink(path);
	}
	snprintf(lru->dir, sizeof(lru->dir), "%s", dir);
	lru->head = 0;
	lru->used = now;
	return lru;
}

/* Rename an aged spare of @dir to @tmp: 1 done (an inode with old
 * content, overwritten in place and cut to its new length), 0 none. */
static int spare_take(const char *dir, const char *tmp)
{
	uint64_t now = sfs_now_ns();
	char path[PATH_MAX + 64];
	struct spare_dir *d;
	int got = 0;

	if (!__atomic_load_n(&spares_on, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&spare_mu);
	d = spare_pool(dir, 0, now);
	while (d && d->n && !got && now - d->s[d->head].at >= SPARE_AGE_NS) {
		spare_path(path, sizeof(path), dir, d->s[d->head].id);
		d->head = (d->head + 1) % SPARE_MAX;
		d->n--;
		got = rename(path, tmp) == 0;	/* ENOENT: removed by hand; the next */
	}
	pthread_mutex_unlock(&spare_mu);
	return got;
}

int sfs__layout_remove(const char *path)
{
	char dir[PATH_MAX], sp[PATH_MAX + 64];
	uint64_t now = sfs_now_ns();
	struct spare_dir *d;
	struct stat st;
	int kept = 0;

	dir_of(path, dir, sizeof(dir));
	/* only an inode this name alone holds: another name (a checkpoint's
	 * link) would see it rewritten */
	if (__atomic_load_n(&spares_on, __ATOMIC_RELAXED) && !lstat(path, &st) &&
	    S_ISREG(st.st_mode) && st.st_nlink == 1) {
		pthread_mutex_lock(&spare_mu);
		if ((d = spare_pool(dir, 1, now)) && d->n < SPARE_MAX) {
			uint32_t id = ++spare_seq;

			spare_path(sp, sizeof(sp), dir, id);
			if (!rename(path, sp)) {
				unsigned at = (d->head + d->n++) % SPARE_MAX;

				d->s[at].id = id;
				d->s[at].at = now;
				kept = 1;
			}
		}
		pthread_mutex_unlock(&spare_mu);
		if (kept)
			return 1;
	}
	if (!unlink(path))
		return 1;
	return errno == ENOENT ? 0 : sfs__err(sfs__errno(), "%s: unlink: %s", path, strerror(errno));
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
	int fd, rc = 0, spare;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
		     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp))
		return sfs__err(SFS_EUSAGE, "%s: path too long", path);
	dir_of(path, dir, sizeof(dir));
	/* A spare inode first: a rename, where a create allocates one.  Not
	 * O_TRUNC: ext4 flushes a file truncated to 0 at its close
	 * (auto_da_alloc); overwritten from offset 0 and cut after, it
	 * reuses its cached pages and starts no write-back of its own. */
	fd = -1;
	spare = spare_take(dir, tmp);
	if (spare && (fd = fault("layout.file.open") ? -1 : open(tmp, O_WRONLY | O_CLOEXEC)) < 0) {
		rc = sfs__err(sfs__errno(), "%s: open (a spare inode): %s", tmp, strerror(errno));
		(void)unlink(tmp);
		return rc;
	}
	for (int tries = 0; fd < 0; tries++) {
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
	} else if (spare && ftruncate(fd, (off_t)len)) {
		rc = sfs__err(sfs__errno(), "%s: truncate to %zu: %s", tmp, len, strerror(errno));
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
