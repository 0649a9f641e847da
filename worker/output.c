/*
 * output.c — epoch-committed output (include/sfs_output.h): a two-phase
 * file sink over the task API alone, the recipe examples/clicks used to
 * carry by hand.
 *
 * Everything it knows of the group comes from include/sfs.h: the seal id
 * the program stages under, sfs_task_completed() for the commit, and
 * sfs_task_info() for where this start is from (checkpoint M, base id B,
 * the job's workers).  Its decisions are the file names alone: an epoch is
 * pending or committed by its name, so an open after any crash reads the
 * directory and knows what to do, with no state of its own to recover.
 *
 * The one subtle point is who may rename what.  A commit renames only the
 * ids this process staged (a list in memory), never by a directory scan:
 * a file of an earlier run with an id above this run's checkpoint must
 * never be committed, and a scan could not tell it from this run's.  The
 * earlier runs' files are settled by scans at open (and after a rollback
 * in place), each worker its own index's and worker 0 the indexes the job
 * no longer has, before that worker stages anything; so every file of an
 * earlier run is settled before a checkpoint of this run can complete,
 * and the id collisions of a restore from files (its ids restart above
 * the newest stored checkpoint, where the crashed run may have staged)
 * are removed before they can be written again.
 *
 * Fault points (common/fault.h): output.staged, output.commit,
 * output.committed, output.settle.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fault.h"
#include "sfs.h"
#include "sfs_output.h"

#define OUT_BUF (64u * 1024)
#define OUT_PATH 4096
/* A directory name leaves room for the longest file name in OUT_PATH. */
#define OUT_DIR (OUT_PATH - 2 * SFS_OUTPUT_NAME_MAX - 64)

struct sfs_output {
	sfs_task_t *task;
	char dir[OUT_DIR];
	char prefix[SFS_OUTPUT_NAME_MAX + 1], suffix[SFS_OUTPUT_NAME_MAX + 1];
	uint32_t worker;
	uint64_t base;            /* sfs_task_info().base_id when last settled */
	uint64_t last_staged;     /* ids go up */
	uint64_t committed;       /* newest epoch this output committed */
	uint64_t *staged;         /* staged, not yet committed, ascending */
	size_t nstaged, capstaged;
	int fd;                   /* the open epoch's file, or -1 */
	uint64_t open_bytes;      /* written to it this epoch */
	char *buf;                /* bytes not yet written to it */
	size_t len;
};

static int name_ok(const char *s, int first_dot_ok)
{
	size_t n = strlen(s);

	if (n > SFS_OUTPUT_NAME_MAX || (!first_dot_ok && s[0] == '.'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static void epoch_path(const sfs_output_t *o, char *p, uint64_t id, uint32_t w, int pending)
{
	snprintf(p, OUT_PATH, "%s/%s%s-%020" PRIu64 "-w%u%s%s", o->dir, pending ? "." : "",
		 o->prefix, id, w, o->suffix, pending ? ".pending" : "");
}

static void open_path(const sfs_output_t *o, char *p, uint32_t w)
{
	snprintf(p, OUT_PATH, "%s/.%s-w%u%s.open", o->dir, o->prefix, w, o->suffix);
}

/* A rename or a new name is durable once its directory is: one fsync. */
static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return sfs__err(sfs__errno(), "output %s: open the directory to fsync it: %s", dir,
				strerror(errno));
	if (fsync(fd))
		rc = sfs__err(sfs__errno(), "output %s: fsync of the directory: %s", dir,
			      strerror(errno));
	close(fd);
	return rc;
}

/*
 * Parse one name of @dir: 1 and the epoch, worker and kind (0 committed, 1
 * pending, 2 open) when it is one of this output's, 0 otherwise.  The
 * prefix and suffix are the caller's [A-Za-z0-9._-], so the fixed parts
 * ("-", 20 digits, "-w", digits) are found from the ends.
 */
static int parse(const sfs_output_t *o, const char *name, uint64_t *id, uint32_t *w, int *kind)
{
	size_t pl = strlen(o->prefix), sl = strlen(o->suffix), n = strlen(name);
	const char *s = name, *end;
	char *e;

	*kind = 0;
	if (*s == '.') {
		s++, n--;
		if (n > 8 && !strcmp(s + n - 8, ".pending"))
			*kind = 1, n -= 8;
		else if (n > 5 && !strcmp(s + n - 5, ".open"))
			*kind = 2, n -= 5;
		else
			return 0;
	}
	if (n < pl + sl + 3 || strncmp(s, o->prefix, pl) || s[pl] != '-' ||
	    strncmp(s + n - sl, o->suffix, sl))
		return 0;
	end = s + n - sl;
	s += pl + 1;
	if (*kind != 2) {
		if (end - s < 23 || s[20] != '-' || s[21] != 'w')
			return 0;
		for (int i = 0; i < 20; i++)
			if (s[i] < '0' || s[i] > '9')
				return 0;
		*id = strtoull(s, NULL, 10);
		s += 22;
	} else {
		if (end - s < 2 || s[0] != 'w')
			return 0;
		*id = 0;
		s++;
	}
	if (s >= end || *s < '0' || *s > '9')
		return 0;
	errno = 0;
	unsigned long v = strtoul(s, &e, 10);
	if (errno || e != end || v > UINT32_MAX)
		return 0;
	*w = (uint32_t)v;
	return 1;
}

/*
 * Settle what earlier incarnations left, as of checkpoint @m: pending
 * epochs <= m committed, pending > m and open files removed; of worker
 * o->worker, and with @others of every worker >= @workers too.
 */
static int settle(sfs_output_t *o, uint64_t m, uint32_t workers, int others)
{
	char from[OUT_PATH], to[OUT_PATH];
	struct dirent *d;
	int rc = 0, changed = 0;
	DIR *dp;

	if (!(dp = opendir(o->dir)))
		return sfs__err(sfs__errno(), "output %s: %s", o->dir, strerror(errno));
	while (rc == 0 && (d = readdir(dp))) {
		uint64_t id;
		uint32_t w;
		int kind;

		if (!parse(o, d->d_name, &id, &w, &kind) || kind == 0)
			continue;
		if (w != o->worker && !(others && w >= workers))
			continue;
		snprintf(from, sizeof(from), "%s/%s", o->dir, d->d_name);
		if (kind == 1 && id <= m) {
			epoch_path(o, to, id, w, 0);
			if (rename(from, to) && errno != ENOENT)
				rc = sfs__err(sfs__errno(), "output %s: commit to %s: %s", from, to,
					      strerror(errno));
		} else if (unlink(from) && errno != ENOENT) {
			rc = sfs__err(sfs__errno(), "output %s: remove: %s", from, strerror(errno));
		}
		changed = 1;
		if (rc == 0)
			rc = sfs_fault("output.settle");
	}
	closedir(dp);
	if (rc == 0 && changed)
		rc = sync_dir(o->dir);
	return rc;
}

static int settle_start(sfs_output_t *o)
{
	struct sfs_task_info in;
	int rc;

	sfs_task_info(o->task, &in);
	if ((rc = settle(o, in.checkpoint, in.workers, in.worker == 0)))
		return rc;
	o->base = in.base_id;
	o->last_staged = in.base_id;
	o->nstaged = 0;
	o->len = 0;
	o->open_bytes = 0;
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	return 0;
}

int sfs_output_open(sfs_task_t *t, const char *dir, const char *prefix, const char *suffix,
		    sfs_output_t **out)
{
	sfs_output_t *o;
	int rc;

	if (!t || !dir || !*dir || !prefix || !*prefix || !out)
		return sfs__err(SFS_EUSAGE, "sfs_output_open: NULL or empty argument");
	if (!suffix)
		suffix = "";
	if (!name_ok(prefix, 0) || !name_ok(suffix, 1))
		return sfs__err(SFS_EUSAGE, "output %s: prefix '%s' or suffix '%s' is not 1..%d "
				"(suffix 0..%d) bytes of [A-Za-z0-9._-] (a prefix not starting "
				"with '.')", dir, prefix, suffix, SFS_OUTPUT_NAME_MAX,
				SFS_OUTPUT_NAME_MAX);
	if (strlen(dir) >= OUT_DIR)
		return sfs__err(SFS_EUSAGE, "output %s: directory name too long", dir);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return sfs__err(sfs__errno(), "output %s: mkdir: %s", dir, strerror(errno));
	if (!(o = calloc(1, sizeof(*o))) || !(o->buf = malloc(OUT_BUF))) {
		free(o);
		return sfs__err(-ENOMEM, "output %s: no memory", dir);
	}
	o->task = t;
	o->fd = -1;
	snprintf(o->dir, sizeof(o->dir), "%s", dir);
	snprintf(o->prefix, sizeof(o->prefix), "%s", prefix);
	snprintf(o->suffix, sizeof(o->suffix), "%s", suffix);
	{
		struct sfs_task_info in;

		sfs_task_info(t, &in);
		o->worker = in.worker;
	}
	if ((rc = settle_start(o))) {
		sfs_output_close(o);
		return rc;
	}
	*out = o;
	return 0;
}

/* Write the buffered bytes to the open file (created, truncated, at the
 * epoch's first write).  On an error the bytes not written stay. */
static int flush(sfs_output_t *o)
{
	char path[OUT_PATH];
	size_t done = 0;
	int rc = 0;

	if (o->fd < 0 && o->len) {
		open_path(o, path, o->worker);
		o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (o->fd < 0)
			return sfs__err(sfs__errno(), "output %s: %s", path, strerror(errno));
		o->open_bytes = 0;
	}
	while (done < o->len) {
		ssize_t n = write(o->fd, o->buf + done, o->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			open_path(o, path, o->worker);
			rc = sfs__err(n < 0 ? sfs__errno() : -EIO, "output %s: write: %s", path,
				      n < 0 ? strerror(errno) : "no progress");
			break;
		}
		done += (size_t)n;
	}
	memmove(o->buf, o->buf + done, o->len - done);
	o->len -= done;
	o->open_bytes += done;
	return rc;
}

int sfs_output_write(sfs_output_t *o, const void *buf, size_t len)
{
	const char *p = buf;
	uint64_t mark;
	int rc;

	if (o->len + len <= OUT_BUF) {
		memcpy(o->buf + o->len, p, len);
		o->len += len;
		return 0;
	}
	if ((rc = flush(o)))
		return rc;	/* the bytes of earlier calls: nothing of @buf taken */
	mark = o->open_bytes;
	while (len) {
		size_t n = OUT_BUF - o->len < len ? OUT_BUF - o->len : len;

		memcpy(o->buf + o->len, p, n);
		o->len += n, p += n, len -= n;
		if (o->len == OUT_BUF && (rc = flush(o))) {
			/* Take none of @buf back out of the file, so the call can be
			 * repeated: the epoch holds whole records only. */
			if (o->fd >= 0 && (ftruncate(o->fd, (off_t)mark) ||
					   lseek(o->fd, (off_t)mark, SEEK_SET) < 0))
				return sfs__err(sfs__errno(), "output %s/%s: truncating a failed "
						"write: %s", o->dir, o->prefix, strerror(errno));
			o->open_bytes = mark;
			o->len = 0;
			return rc;
		}
	}
	return 0;
}

int sfs_output_stage(sfs_output_t *o, uint64_t id)
{
	struct sfs_task_info in;
	char from[OUT_PATH], to[OUT_PATH];
	int rc;

	sfs_task_info(o->task, &in);
	if (in.base_id != o->base)
		return sfs__err(SFS_EUSAGE, "output %s/%s: the group rolled back (its ids now start "
				"above %" PRIu64 "): call sfs_output_rollback before staging",
				o->dir, o->prefix, in.base_id);
	if (id <= o->last_staged || id > sfs_task_requested(o->task))
		return sfs__err(SFS_EUSAGE, "output %s/%s: stage of epoch %" PRIu64 ": the last "
				"staged is %" PRIu64 ", the newest requested %" PRIu64, o->dir,
				o->prefix, id, o->last_staged, sfs_task_requested(o->task));
	if (o->len && (rc = flush(o)))
		return rc;
	if (o->fd >= 0) {
		if (o->nstaged == o->capstaged) {
			size_t cap = o->capstaged ? 2 * o->capstaged : 4;
			uint64_t *v = realloc(o->staged, cap * sizeof(*v));

			if (!v)
				return sfs__err(-ENOMEM, "output %s: no memory", o->dir);
			o->staged = v, o->capstaged = cap;
		}
		open_path(o, from, o->worker);
		epoch_path(o, to, id, o->worker, 1);
		if (fsync(o->fd))
			return sfs__err(sfs__errno(), "output %s: fsync: %s", from, strerror(errno));
		if (rename(from, to))
			return sfs__err(sfs__errno(), "output %s: stage as %s: %s", from, to,
					strerror(errno));
		close(o->fd);
		o->fd = -1;
		o->open_bytes = 0;
		o->staged[o->nstaged++] = id;
	}
	/* The new name durable before the seal; on a failure a repeated call
	 * comes back here (id still above last_staged). */
	if (o->nstaged && o->staged[o->nstaged - 1] == id && (rc = sync_dir(o->dir)))
		return rc;
	o->last_staged = id;
	/* Epoch @id durable as pending: a death here, before the seal, must
	 * see it dropped (its checkpoint cannot complete). */
	return sfs_fault("output.staged");
}

int sfs_output_commit(sfs_output_t *o, uint64_t *committed)
{
	uint64_t done = sfs_task_completed(o->task);
	char from[OUT_PATH], to[OUT_PATH];
	size_t i = 0;
	int rc = 0;

	while (i < o->nstaged && o->staged[i] <= done) {
		/* Checkpoint staged[i] complete, its epoch not yet visible: a
		 * death here must see the next open commit it. */
		if ((rc = sfs_fault("output.commit")))
			break;
		epoch_path(o, from, o->staged[i], o->worker, 1);
		epoch_path(o, to, o->staged[i], o->worker, 0);
		if (rename(from, to)) {
			rc = sfs__err(sfs__errno(), "output %s: commit to %s: %s", from, to,
				      strerror(errno));
			break;
		}
		o->committed = o->staged[i++];
		if ((rc = sfs_fault("output.committed")))
			break;
	}
	if (i) {
		memmove(o->staged, o->staged + i, (o->nstaged - i) * sizeof(*o->staged));
		o->nstaged -= i;
		if (rc == 0)
			rc = sync_dir(o->dir);
	}
	if (committed)
		*committed = o->committed;
	return rc;
}

int sfs_output_rollback(sfs_output_t *o)
{
	/* The staged list goes: the scan commits what is <= the checkpoint
	 * rolled back to and removes the rest, this index's files all. */
	return settle_start(o);
}

int sfs_output_close(sfs_output_t *o)
{
	if (!o)
		return 0;
	if (o->fd >= 0)
		close(o->fd);
	free(o->staged);
	free(o->buf);
	free(o);
	return 0;
}
