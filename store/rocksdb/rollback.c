/*
 * rollback.c — rollback in place: the versions snapshot.c stages, kept
 * for a pin; the swap back; the readers follow by a reopen (read.c).
 *
 * Rollback in place (store/target.h: pin, rollback).  Each version staged
 * for a checkpoint is also kept as a flat RocksDB checkpoint of hard links
 * under <path>.pin until the next pin; a rollback swaps a link copy of
 * the pinned one with the instance directory in one renameat2 and opens
 * it; readers reopen on rp_incarnation.  Design, costs and the measured
 * times: "Rollback" below.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "common/log.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb_int.h"

/*
 * Rollback.  The way back to a checkpoint's version without copying the
 * instance: every version staged for a checkpoint is kept, until the next
 * pin releases it, as a flat RocksDB checkpoint of its own under
 * <path>.pin (hard links of its SSTs, MANIFEST, CURRENT and OPTIONS:
 * links, no byte copied), so the files it needs outlive the primary's
 * compactions and deletion windows; a rollback closes the primary, makes
 * a link copy of the pinned checkpoint (r<n>: the pin itself stays, a
 * second rollback needs it) and swaps it with the instance directory in
 * one renameat2(RENAME_EXCHANGE), then opens it again; the old instance,
 * now in the copy's place, is removed by a thread.  A kill -9 before
 * the swap leaves the old instance at <path> (closed, intact: WAL off,
 * the memtables held nothing durable), after it the pinned one; the next
 * open removes <path>.pin either way.  Never a mix: one rename decides.
 *
 * Why not a RocksDB snapshot held at the pinned version, undone by writing
 * back each key written since: that needs the keys written since (the
 * sealed buffers are freed after their flush), it is O(keys changed) and
 * not O(1), and the TTL compaction filter drops versions a snapshot's
 * reader would need (a filter ignores snapshots).
 *
 * Cost (ext4, bench: tests/test_target_rocksdb.c, rollback_bench):
 *  - per checkpoint, in snapshot(), on the compactor's thread: one mkdir,
 *    one link per live SST + 3 (MANIFEST, CURRENT, OPTIONS), one fsync of
 *    the directory; at pin, the previous pin's links unlinked (as many)
 *    and its directory removed.  No file is created and no byte copied;
 *    the disk held is the SSTs the pinned version has and the live one no
 *    longer has: one interval's compaction churn.
 *  - per rollback: the primary closed (a running compaction is aborted),
 *    one mkdir + the same links for the copy, one rename, two directory
 *    fsyncs, and a DB open, which with max_open_files = -1 opens every
 *    table file (their index and filter blocks: metadata, not data; the
 *    open writes a new MANIFEST, CURRENT, OPTIONS, IDENTITY, LOG: about 5
 *    creates).  Then the old instance's files are unlinked by a thread
 *    (trash): off the recovery's path, it grows with what was written
 *    since the pin.  Measured on this machine, loaded: 17-77 ms at 0.1 GB,
 *    57-104 ms at 1 GB, 43-139 ms at 3 GB (22-40 SSTs), most of it the
 *    open (bench/RESULTS.md, issue 23).
 *
 * Readers (other processes, secondaries): rp_incarnation is made odd
 * before the primary closes and even again after the open; a file number
 * of the rolled-back instance may name another file of the old one, so a
 * secondary must never follow the swap by a catch-up.  r_refresh reopens
 * when rp_incarnation differs from the one its secondary was opened under,
 * and checks it again after each open or catch-up: odd or moved, the
 * result is thrown away (seqlock).  Data already read is from files the
 * secondary holds open: stale, never mixed.
 *
 * State TTL: the filters' clocks at staging are kept with each staged
 * version and put back by a rollback (a filter's clock otherwise only
 * moves forward), so no compaction after it drops what the replayed
 * buffers will still read as live.
 *
 * Fenced: a commit under way (its staged records, a memtable being
 * flushed, an SST in <path>.ingest) is dropped with the primary; RocksDB's
 * background flush and compactions end with the close; this target stages
 * synchronously (snapshot, no snapshot_begin), so no background snapshot
 * exists to stop.
 */

static int pin_open_version(struct sfs_target_writer *w);
static void pin_release(struct sfs_target_writer *w);
static void abandon(struct sfs_target_writer *w);
static void trash(struct sfs_target_writer *w, const char *path);
static void *trash_main(void *arg);
static void cand_drop(struct sfs_target_writer *w, unsigned i);
static void cand_dir(const struct sfs_target_writer *w, uint64_t id, char *buf, size_t n);
static int link_copy(const char *from, const char *dir);
static int link_flat(const char *from, const char *to, int depth);
static void fsync_dir(const char *path);

/*
 * The stage @stage just made (snapshot) kept as c<id> for a later pin.
 * The id is the stage directory's, SFS_CKPT_STAGE_FMT's ".../b<id>": the
 * synchronous snapshot op is not given it.  Best effort: without it a pin
 * of that id returns -ENOENT and the group restarts from files, which is
 * said once here.
 */
void sfs__rdbt_cand_add(struct sfs_target_writer *w, const char *stage)
{
	char d[PATH_MAX];
	uint64_t id;
	unsigned i;

	if (!sfs_target_stage_id(stage, &id))
		return;
	for (i = 0; i < w->ncand; i++)
		if (w->cand[i].id == id)
			break;
	if (i < w->ncand)
		cand_drop(w, i);	/* staged again (a retried snapshot) */
	if (w->ncand == CAND_MAX) {
		unsigned old = 0;

		for (i = 1; i < w->ncand; i++)
			if (w->cand[i].id < w->cand[old].id)
				old = i;
		cand_drop(w, old);
	}
	cand_dir(w, id, d, sizeof(d));
	if (link_copy(stage, d)) {
		sfs_log("rocksdb target %s: checkpoint %llu will not be pinned (a rollback to it "
			"falls back to a restore): %s", w->path, (unsigned long long)id, sfs_last_error());
		sfs__rdbt_rm_tree(d);
		return;
	}
	w->cand[w->ncand].id = id;
	w->cand[w->ncand].seq = sfs_load_relaxed(&w->pub->rp_applied);
	for (i = 0; i < SFS_MAX_STATES; i++)
		w->cand[w->ncand].ttl[i] = __atomic_load_n(&w->ttl[i].now, __ATOMIC_RELAXED);
	w->ncand++;
}

/*
 * pin (store/target.h): checkpoint @id is complete; the version this
 * writer staged for it (c<id>) becomes the rollback point, the previous
 * pin and every older staged version are removed.  O(1) when kept: the
 * links were made at staging; the release unlinks the old pin's links.
 */
int sfs__rdbt_pin(struct sfs_target_writer *w, uint64_t id)
{
	unsigned i, at = CAND_MAX;

	if (id == 0) {
		pin_release(w);
		return pin_open_version(w);
	}
	if (w->pinned && w->pin_id == id)
		return 0;	/* pinned already (a retried call) */
	for (i = 0; i < w->ncand; i++)
		if (w->cand[i].id == id)
			at = i;
	pin_release(w);
	if (at == CAND_MAX) {
		for (i = w->ncand; i-- > 0;)
			if (w->cand[i].id < id)
				cand_drop(w, i);
		return -ENOENT;
	}
	w->pinned = 1;
	w->pin_id = id;
	w->pin_seq = w->cand[at].seq;
	memcpy(w->pin_ttl, w->cand[at].ttl, sizeof(w->pin_ttl));
	w->cand[at] = w->cand[--w->ncand];
	for (i = w->ncand; i-- > 0;)
		if (w->cand[i].id < id)
			cand_drop(w, i);
	return 0;
}

/* pin(0): the version at open, checkpointed flat as c0 (RocksDB's
 * checkpoint: a link per SST, the MANIFEST copied; the memtables are
 * empty, nothing was applied). */
static int pin_open_version(struct sfs_target_writer *w)
{
	rocksdb_checkpoint_t *cp;
	char d[PATH_MAX], *err = NULL;
	int rc;

	if (w->applied_any)
		return sfs__err(SFS_EUSAGE, "rocksdb target %s: pin 0 after a buffer was applied "
				"(it pins the version at open)", w->path);
	if (!w->db)
		return sfs__err(-EIO, "rocksdb target %s: no open instance to pin", w->path);
	cand_dir(w, 0, d, sizeof(d));
	sfs__rdbt_rm_tree(d);
	cp = rocksdb_checkpoint_object_create(w->db, &err);
	if ((rc = sfs__rdbt_err(w->path, &err, "checkpoint object")))
		return rc;
	rocksdb_checkpoint_create(cp, d, 0, &err);
	rocksdb_checkpoint_object_destroy(cp);
	if ((rc = sfs__rdbt_err(d, &err, "checkpoint")))
		return rc;
	if (chmod(d, 0700))
		return sfs__err(sfs__errno(), "rocksdb target %s: chmod: %s", d, strerror(errno));
	w->pinned = 1;
	w->pin_id = 0;
	w->pin_seq = sfs_load_relaxed(&w->pub->rp_applied);
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->pin_ttl[i] = __atomic_load_n(&w->ttl[i].now, __ATOMIC_RELAXED);
	return 0;
}

static void pin_release(struct sfs_target_writer *w)
{
	char d[PATH_MAX];

	if (!w->pinned)
		return;
	cand_dir(w, w->pin_id, d, sizeof(d));
	sfs__rdbt_rm_tree(d);
	w->pinned = 0;
}

/*
 * rollback (store/target.h; the design, its cost and the readers' side:
 * "Rollback" above).  On an error the instance at <path> is whole (the old
 * one before the swap, the pinned one after it) and w->db may be NULL: the
 * next commit opens it again, and the caller falls back to a restore.
 */
int sfs__rdbt_rollback(struct sfs_target_writer *w, uint64_t *seq)
{
	char pin[PATH_MAX], next[PATH_MAX], parent[PATH_MAX];
	uint64_t t0 = sfs_now_ns(), t_close, t_copy, t_swap, t_rm;
	int rc;

	if (!w->pinned)
		return -ENOENT;
	cand_dir(w, w->pin_id, pin, sizeof(pin));
	/* unique per rollback: the one before may still be being removed */
	snprintf(next, sizeof(next), "%.*s/r%llu", PATH_MAX - 32, w->ppath,
		 (unsigned long long)++w->rollbacks);
	snprintf(parent, sizeof(parent), "%s", w->path);
	if (strrchr(parent, '/'))
		*strrchr(parent, '/') = '\0';
	abandon(w);
	/* Readers hold off from here (odd) until the open below. */
	sfs_store_release(&w->pub->rp_incarnation, (w->pub->rp_incarnation | 1));
	sfs__rdbt_close_db(w);
	while (w->ncand)	/* staged after the pin: dropped */
		cand_drop(w, 0);
	/* The TTL filters' clocks go back with the version (no filter runs
	 * now: the instance is closed): the replay from the checkpoint reads
	 * entries by its own, older clocks, and a filter still at the newer
	 * one would drop entries those reads must find. */
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		__atomic_store_n(&w->ttl[i].now, w->pin_ttl[i], __ATOMIC_RELAXED);
	t_close = sfs_now_ns();
	if ((rc = link_copy(pin, next)))
		goto out;
	t_copy = sfs_now_ns();
	sfs_fault("rocksdb.rollback.copy");
	if (renameat2(AT_FDCWD, next, AT_FDCWD, w->path, RENAME_EXCHANGE)) {
		rc = sfs__err(sfs__errno(), "rocksdb target %s: swap with %s: %s", w->path, next,
			      strerror(errno));
		goto out;
	}
	fsync_dir(parent);
	fsync_dir(w->ppath);
	sfs_fault("rocksdb.rollback.swap");
	t_swap = sfs_now_ns();
	trash(w, next);	/* the old instance */
	t_rm = sfs_now_ns();
	if ((rc = sfs__rdbt_start(w))) {
		sfs__rdbt_close_db(w);
		goto out;
	}
	sfs_store_release(&w->pub->rp_applied, w->pin_seq);
	sfs_store_relaxed(&w->pub->rp_rollbacks, w->pub->rp_rollbacks + 1);
	sfs_store_release(&w->pub->rp_published, w->pub->rp_published + 1);
	*seq = w->pin_seq;
	sfs_log("rocksdb target %s: rolled back to checkpoint %llu (seq %llu) in %.1f ms: close "
		"%.1f, link copy %.1f, swap %.1f, old instance handed to a thread %.1f, open %.1f", w->path,
		(unsigned long long)w->pin_id, (unsigned long long)w->pin_seq,
		(sfs_now_ns() - t0) / 1e6, (t_close - t0) / 1e6, (t_copy - t_close) / 1e6,
		(t_swap - t_copy) / 1e6, (t_rm - t_swap) / 1e6, (sfs_now_ns() - t_rm) / 1e6);
out:
	sfs_store_release(&w->pub->rp_incarnation, w->pub->rp_incarnation + 1);	/* even */
	return rc;
}

/* What was under way is dropped: the staged buffer, a flush or an SST
 * being written, a failing commit's back-off. */
static void abandon(struct sfs_target_writer *w)
{
	sfs__rdbt_stages_reset(w);
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->st[i].inbatch = 0;
	w->reopen = 0;
	w->fails = 0;
	w->wait_t0 = 0;
	w->purge_token = 0;
	sfs__rdbt_rm_tree(w->ipath);
	(void)sfs_mkdirs(w->ipath, 0700);
}

/* The old instance a rollback swapped out, removed off the compactor's
 * thread: unlinking files written moments ago waits for their writeback
 * (measured: 4.1 s for the 3 GB a busy instance had written since its
 * pin), which would make the rollback's time grow with that churn.  A
 * kill leaves it in <ppath>, which the next open empties. */
struct trash {
	struct sfs_target_writer *w;
	char path[PATH_MAX];
};

static void trash(struct sfs_target_writer *w, const char *path)
{
	struct trash *t = malloc(sizeof(*t));
	pthread_attr_t a;
	pthread_t th;

	if (t) {
		t->w = w;
		snprintf(t->path, sizeof(t->path), "%s", path);
		__atomic_fetch_add(&w->trashing, 1, __ATOMIC_RELAXED);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &a, trash_main, t) == 0) {
			pthread_attr_destroy(&a);
			return;
		}
		pthread_attr_destroy(&a);
		__atomic_fetch_sub(&w->trashing, 1, __ATOMIC_RELAXED);
		free(t);
	}
	sfs__rdbt_rm_tree(path);	/* no thread: here, then */
}

static void *trash_main(void *arg)
{
	struct trash *t = arg;
	struct sfs_target_writer *w = t->w;

	sfs__rdbt_rm_tree(t->path);
	free(t);
	__atomic_fetch_sub(&w->trashing, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void cand_drop(struct sfs_target_writer *w, unsigned i)
{
	char d[PATH_MAX];

	cand_dir(w, w->cand[i].id, d, sizeof(d));
	sfs__rdbt_rm_tree(d);
	w->cand[i] = w->cand[--w->ncand];
}

static void cand_dir(const struct sfs_target_writer *w, uint64_t id, char *buf, size_t n)
{
	snprintf(buf, n, "%.*s/c%llu", PATH_MAX - 32, w->ppath, (unsigned long long)id);
}

/* Make @dir (gone first) a link copy of @from, durable. */
static int link_copy(const char *from, const char *dir)
{
	int rc;

	sfs__rdbt_rm_tree(dir);
	if (mkdir(dir, 0700))
		return sfs__err(sfs__errno(), "rocksdb target %s: mkdir: %s", dir, strerror(errno));
	if ((rc = link_flat(from, dir, 0)))
		return rc;
	fsync_dir(dir);
	return 0;
}

/* Hard-link every file of @from, and of its SFS_STAGE_SHARED subdirectory
 * (a stage's SSTs), flat into @to (exists).  One link per file. */
static int link_flat(const char *from, const char *to, int depth)
{
	char a[PATH_MAX + 256], b[PATH_MAX + 256];
	struct dirent *e;
	struct stat sb;
	DIR *d = opendir(from);
	int rc = 0;

	if (!d)
		return sfs__err(sfs__errno(), "rocksdb target %s: %s", from, strerror(errno));
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		if (lstat(a, &sb)) {
			rc = sfs__err(sfs__errno(), "rocksdb target %s: %s", a, strerror(errno));
		} else if (S_ISDIR(sb.st_mode)) {
			if (depth == 0 && !strcmp(e->d_name, SFS_STAGE_SHARED))
				rc = link_flat(a, to, 1);
		} else if (S_ISREG(sb.st_mode) && strcmp(e->d_name, "LOCK") &&
			   strncmp(e->d_name, "LOG", 3)) {
			snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
			if (link(a, b))
				rc = sfs__err(sfs__errno(), "rocksdb target: link %s to %s: %s", a, b,
					      strerror(errno));
		}
	}
	closedir(d);
	return rc;
}

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	if (fd >= 0) {
		(void)fsync(fd);	/* kill -9 safety needs none; a power loss ordering */
		close(fd);
	}
}
