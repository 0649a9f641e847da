/*
 * flush.c — the compactor's flush cycle and its maintenance threads (see
 * flush.h: which thread owns which worker, and what they share).
 */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/keygroup.h"
#include "common/fault.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/merge.h"
#include "compactor/flush.h"
#include "shm/ckpt.h"
#include "shm/child.h"
#include "shm/futex.h"
#include "shm/qsbr.h"
#include "worker/wbuf_ttl.h"

#define SCAN_PERIOD_NS (50 * 1000000ull)

#define APPLY_BATCH 64
#define POLL_NS 1000000ull               /* a thread's poll of a pending grace period */
#define MAIN_WAIT_NS (100 * 1000000ull)  /* the main step re-checks sfs_child_stop */

/* One maintenance thread (process-local).  t_* under the pool's p_mu,
 * except t_lane and t_th (the thread's own). */
struct sfs_flush_thread {
	struct sfs_flush_pool *t_pool;
	pthread_t t_th;
	struct sfs_flush_lane t_lane;
	uint64_t t_done_kick;  /* the kick its last finished round began after */
	uint64_t t_life;       /* sfs_child_progress calls inside a long step */
	uint64_t t_life_seen;  /* t_life at the main step's kick (main thread) */
	uint64_t t_work;       /* work of its rounds since the last main step */
	int t_pending;         /* its last round left something to poll */
	int t_rc;              /* < 0: it stopped on this error */
};

struct sfs_flush_pool {
	struct sfs_flusher *p_f;
	pthread_mutex_t p_mu;
	pthread_cond_t p_kick_cv;  /* main -> threads: a kick, or stop */
	pthread_cond_t p_done_cv;  /* threads -> main: a round done, life, an error */
	uint64_t p_kick;           /* under p_mu: bumped by each main step */
	unsigned p_budget;         /* under p_mu: the budget of the last kick */
	int p_stop;                /* under p_mu */
	uint64_t p_nap_ns;         /* an idle thread's longest wait (read-only) */
	unsigned p_n;
	struct sfs_flush_thread p_t[];
};

int sfs_flusher_init(struct sfs_flusher *f, struct sfs_seg *seg,
		     const struct sfs_proc_slot *self, uint64_t store_bytes)
{
	memset(f, 0, sizeof(*f));
	f->seg = seg;
	f->self = self;
	f->lane.stride = 1;
	f->cfg.store_bytes = store_bytes;
	f->ops = sfs_target_of(seg);
	if (!f->ops)
		return sfs__err(SFS_EUSAGE, "segment %s: unknown flush target '%.16s'", seg->path,
				seg->hdr->sh_backend);
	/* A group with checkpoints: the compactor snapshots its workers'
	 * state at each barrier (the supervisor made the region before any
	 * child started; single-node groups: it is in this segment). */
	{
		int rc = sfs_ckpt_find(seg, &f->ck);

		if (rc && rc != -ENOENT)
			return rc;
	}
	return 0;
}

/* This process's slot, whose I/O-trouble word (shm/proc.h, sfs_proc_io)
 * the flush reports a disk's failures in: the compactor owns it (the
 * flusher keeps it const for everything else). */
static inline struct sfs_proc_slot *me(const struct sfs_flusher *f)
{
	return (struct sfs_proc_slot *)(uintptr_t)f->self;
}

/*
 * Worker @fw's flush of buffer @seq failed with @rc at @step: said once per
 * episode — a disk's trouble once for the whole process, until a buffer
 * goes through again (sfs_proc_io: the apply of the next batch may well
 * succeed in memory and the commit fail again), any other failure once
 * while it repeats — and retried by the caller.
 */
static void flush_failed(struct sfs_flusher *f, struct sfs_flush_worker *fw, int rc,
			 const char *step, uint64_t seq)
{
	int io = sfs_io_trouble_errno(rc);

	if (io ? sfs_proc_io(me(f), rc) : !fw->failing)
		sfs_log("worker %u: %s of buffer seq %llu failed, will retry%s: %s", fw->worker, step,
			(unsigned long long)seq, io ? " until the disk has room" : "",
			sfs_last_error());
	fw->failing = 1;
}

/*
 * Buffer @seq was sealed by barrier @id and is committed: the target now
 * holds exactly the worker's state as of @id (buffers flush in seq order,
 * and nothing newer is applied before this returns).  Stage its files for
 * the checkpointer and publish cw_snap_barrier (shm/ckpt.h).  An error is retried with
 * the commit (both idempotent).
 */
static int snapshot_barrier(struct sfs_flusher *f, struct sfs_flush_worker *fw, uint64_t id,
			    uint64_t seq)
{
	struct sfs_ckpt *ck = f->ck;
	char dir[SFS_CKPT_PATH_MAX + 64];
	int rc;

	if (!ck || fw->worker >= ck->ck_workers)
		return 0;
	if (f->ops->snapshot_begin) {
		/* The version is captured now, its files follow while newer
		 * buffers flush; publish_snapshots() reports it when complete. */
		rc = sfs_ckpt_stage_dir(ck, fw->worker, id, dir, sizeof(dir));
		if (!rc)
			rc = f->ops->snapshot_begin(fw->tw, dir, id);
		/* a full store is fatal, and main.c says so once */
		if (rc && rc != SFS_ERUNNING && rc != SFS_EFULL)
			flush_failed(f, fw, rc, "snapshot", seq);
		else if (rc == SFS_EFULL)
			fw->failing = 1;
		return rc;
	}
	if (!f->ops->snapshot) {
		if (!uatomic_xchg(&f->no_snapshot_said, 1))
			sfs_log("the %s target cannot snapshot: checkpoints will not complete",
				f->ops->name);
		return 0;
	}
	rc = sfs_ckpt_stage_dir(ck, fw->worker, id, dir, sizeof(dir));
	if (!rc)
		rc = f->ops->snapshot(fw->tw, dir);
	if (rc) {
		if (rc != SFS_EFULL)
			flush_failed(f, fw, rc, "snapshot", seq);
		fw->failing = 1;
		return rc;
	}
	sfs_store_relaxed(&ck->ck_w[fw->worker].cw_snap_version, seq);
	sfs_store_release(&ck->ck_w[fw->worker].cw_snap_barrier, id);
	return 0;
}

/* A snapshot begun beside the flush that is now complete: publish it. */
static int publish_snapshots(struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	struct sfs_ckpt_worker *cw;
	uint64_t id, seq;
	int rc;

	if (!f->ops->snapshot_poll || !f->ck || fw->worker >= f->ck->ck_workers)
		return 0;
	rc = f->ops->snapshot_poll(fw->tw, &id, &seq);
	if (rc < 0) {
		/* the target tries again: said once while it keeps failing (a
		 * disk's trouble once per episode of the process) */
		if (sfs_io_trouble_errno(rc) ? sfs_proc_io(me(f), rc) : !fw->snap_failing)
			sfs_log("worker %u: %s (retried)", fw->worker, sfs_last_error());
		fw->snap_failing = 1;
		return 0;
	}
	if (rc == 1 && fw->snap_failing) {
		sfs_log("worker %u: a snapshot was staged again", fw->worker);
		fw->snap_failing = 0;
	}
	cw = &f->ck->ck_w[fw->worker];
	if (rc == 1 && id > sfs_load_relaxed(&cw->cw_snap_barrier)) {
		sfs_store_relaxed(&cw->cw_snap_version, seq);
		sfs_store_release(&cw->cw_snap_barrier, id);
	}
	return rc;
}

/* ---- rollback in place (flush.h) ------------------------------------------------------ */

static int ckpt_worker(const struct sfs_flusher *f, const struct sfs_flush_worker *fw)
{
	return f->ck && fw->worker < f->ck->ck_workers && f->ops->pin && f->ops->rollback;
}

/* Checkpoint ck_done is complete: pin w's version of it (once per id). */
static void pin_done(struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	uint64_t done = sfs_load_acquire(&f->ck->ck_done);
	uint64_t sealed = sfs_load_relaxed(&f->ck->ck_w[fw->worker].cw_sealed);
	int rc;

	if (done <= fw->pinned)
		return;
	/* Sealed nothing since its pin (it finished there): @done carries the
	 * pinned version unchanged, which stays the one to go back to (a pin
	 * of @done would find no version staged for it and release this one). */
	if (fw->pin_ok && sealed && sealed <= fw->pinned)
		return;
	rc = f->ops->pin(fw->tw, done);
	fw->pinned = done;
	fw->pin_ok = rc == 0;
	if (rc && rc != -ENOENT)
		sfs_log("worker %u: cannot pin checkpoint %llu for a rollback in place (a worker's "
			"death before the next one restarts the group): %s", fw->worker,
			(unsigned long long)done, sfs_last_error());
}

/*
 * After a rollback of @fw's store: the flush under way is abandoned and
 * every SEALED buffer dropped (each gets a grace period as a flushed one:
 * an attached reader may still look at it).  Every seal before is done
 * with (flushed or dropped): the backlog is empty, and wc_flushed_seq
 * never goes back.  Returns the buffers dropped.
 */
static unsigned drop_sealed(struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	struct sfs_wctl *ctl = fw->ctl;
	unsigned dropped = 0;

	fw->cur = -1;
	fw->failing = 0;
	for (uint32_t i = 0; i < ctl->wc_nbufs; i++)
		if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) == SFS_BUF_SEALED) {
			sfs_store_release(&ctl->wc_buf[i].cb_state, SFS_BUF_RETIRING);
			fw->retire_token[i] = sfs_qsbr_start(f->seg->hdr);
			dropped++;
		}
	if (sfs_load_relaxed(&ctl->wc_seq) > sfs_load_relaxed(&ctl->wc_flushed_seq))
		sfs_store_release(&ctl->wc_flushed_seq, sfs_load_relaxed(&ctl->wc_seq));
	return dropped;
}

/* The regular files of @src linked or copied into @dst: TABLES only
 * (@tables 1) or all but TABLES (0). */
static int place_files(const char *src, const char *dst, int tables)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(src);
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : sfs__err(sfs__errno(), "%s: %s", src, strerror(errno));
	while (!rc && (e = readdir(d))) {
		if ((e->d_type != DT_REG && e->d_type != DT_UNKNOWN) || e->d_name[0] == '.' ||
		    !strcmp(e->d_name, "TABLES") != !!tables)
			continue;
		if (snprintf(from, sizeof(from), "%s/%s", src, e->d_name) >= (int)sizeof(from) ||
		    snprintf(to, sizeof(to), "%s/%s", dst, e->d_name) >= (int)sizeof(to)) {
			rc = sfs__err(SFS_EUSAGE, "%s/%s: path too long", src, e->d_name);
			break;
		}
		rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
	}
	closedir(d);
	return rc;
}

/*
 * sfs_worker_adopt: the files of @src (a checkpoint's, as staged: flat,
 * with SFS_STAGE_SHARED's in that subdirectory) become @fw's store.  What
 * a restore of the whole group does before its children start
 * (store/target.h, "The instance on disk"), for one live worker: the
 * writer closed, the instance emptied, the files placed flat (TABLES last:
 * its presence is what an open adopts), the writer opened over them — the
 * publication of its first version is what the worker's reader catches up
 * to.  The applied seq is the publication's, so seqs never go back.  A
 * kill -9 midway leaves the request unanswered: the next compactor opens
 * this worker over TABLES (adopted) or over an instance without identity
 * (emptied), and answers it again from the start.  O(files): links.
 */
static int adopt_files(struct sfs_flusher *f, struct sfs_flush_worker *fw, const char *src)
{
	char dir[PATH_MAX], shared[PATH_MAX];
	int rc;

	/* a target that restores by adopting files at open and can empty a
	 * live store (reset: the same contract, store/target.h) — the table
	 * target's; any other is refused and the engine restores by writes */
	if (!f->ops->restore || !f->ops->reset)
		return sfs__err(-ENOTSUP, "worker %u: the %s target cannot adopt a checkpoint's files",
				fw->worker, f->ops->name);
	if ((rc = sfs_target_instance_dir(f->seg->hdr->sh_data_dir, fw->worker, dir, sizeof(dir))))
		return rc;
	snprintf(shared, sizeof(shared), "%s/%s", src, SFS_STAGE_SHARED);
	f->ops->close(fw->tw);
	fw->tw = NULL;
	/* every sealed buffer is the old store's; a flush under way goes with it */
	(void)drop_sealed(f, fw);
	if (!(rc = sfs_fault("flush.engine_adopt")) && !(rc = sfs_target_instance_reset(dir)) &&
	    !(rc = place_files(shared, dir, 0)) && !(rc = place_files(src, dir, 0)) &&
	    !(rc = place_files(src, dir, 1))) {
		sfs_fault("flush.engine_adopt_placed");
		rc = f->ops->open(f->seg, fw->worker, f->self, &f->cfg, &fw->tw);
	}
	if (rc) {
		/* the store is whatever failed: an empty one keeps the slot usable */
		int rc2;

		sfs_log("worker %u: cannot adopt %s (%s): its store starts empty", fw->worker, src,
			sfs_last_error());
		if (fw->tw) {
			f->ops->close(fw->tw);
			fw->tw = NULL;
		}
		if ((rc2 = sfs_target_instance_reset(dir)) ||
		    (rc2 = f->ops->open(f->seg, fw->worker, f->self, &f->cfg, &fw->tw))) {
			sfs_log("worker %u: cannot reopen its store: %s", fw->worker, sfs_last_error());
			fw->tw = NULL;
			fw->open = 0;	/* scan() opens it again */
		}
	}
	return rc;
}

/*
 * A host group's worker asks for its own pins and rollbacks (shm/ckpt.h
 * SFS_CKPT_ENGINE; worker/wctl.h): pin the version staged for the
 * checkpoint its engine completed, return the store to the pinned version
 * for a task restarted in place (Flink's local recovery), or empty it for
 * a new task in a reused slot (wc_erb_to 0: SFS_WORKER_RESET).  Run by
 * the thread that owns @fw, between its flushes.  1 if it answered one.
 */
static int engine_requests(struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	struct sfs_wctl *ctl = fw->ctl;
	uint64_t pin = sfs_load_acquire(&ctl->wc_pin_req), rb = sfs_load_acquire(&ctl->wc_erb_req);
	uint64_t to, seq = 0, t0;
	int rc, work = 0;

	if (f->ck->ck_interval_ms != SFS_CKPT_ENGINE)
		return 0;
	if (pin > sfs_load_relaxed(&ctl->wc_pin_ack)) {
		rc = f->ops->pin(fw->tw, pin);
		fw->pinned = pin;
		fw->pin_ok = rc == 0;
		if (rc)
			sfs_log("worker %u: cannot pin checkpoint %llu (a restart in place falls back to "
				"its files): %s", fw->worker, (unsigned long long)pin, sfs_last_error());
		sfs_store_relaxed(&ctl->wc_pin_rc, rc);
		sfs_store_release(&ctl->wc_pin_ack, pin);
		work = 1;
	}
	if (rb > sfs_load_relaxed(&ctl->wc_erb_ack)) {
		t0 = sfs_now_ns();
		to = sfs_load_relaxed(&ctl->wc_erb_to);
		if (to == SFS_ERB_ADOPT) {	/* sfs_worker_adopt: nothing pinned */
			char src[sizeof(ctl->wc_adopt_dir)];

			fw->pin_ok = 0;
			fw->pinned = 0;
			memcpy(src, ctl->wc_adopt_dir, sizeof(src));
			src[sizeof(src) - 1] = '\0';
			rc = adopt_files(f, fw, src);
		} else if (to == 0) {	/* SFS_WORKER_RESET: an empty store, nothing pinned */
			fw->pin_ok = 0;
			fw->pinned = 0;
			if (!f->ops->reset)
				rc = sfs__err(-ENOTSUP, "worker %u: the %s target cannot empty a "
					      "store in place", fw->worker, f->ops->name);
			else if (!(rc = sfs_fault("flush.engine_reset")))
				rc = f->ops->reset(fw->tw, &seq);
		} else if (!fw->pin_ok || fw->pinned != to) {
			rc = sfs__err(-ENOENT, "worker %u: checkpoint %llu is not pinned (%llu is)",
				      fw->worker, (unsigned long long)to,
				      (unsigned long long)(fw->pin_ok ? fw->pinned : 0));
		} else if (!(rc = sfs_fault("flush.engine_rollback"))) {
			rc = f->ops->rollback(fw->tw, &seq);
		}
		if (rc == 0 && to == SFS_ERB_ADOPT)
			sfs_log("worker %u: adopted the files of %s in %.1f ms", fw->worker,
				ctl->wc_adopt_dir, (sfs_now_ns() - t0) / 1e6);
		else if (rc == 0)
			sfs_log("worker %u: %s %llu in place (seq %llu) in %.1f ms, %u sealed buffers "
				"dropped", fw->worker, to ? "back to checkpoint" : "store emptied, barrier",
				(unsigned long long)(to ? to : sfs_load_relaxed(&ctl->wc_barrier)),
				(unsigned long long)seq, (sfs_now_ns() - t0) / 1e6, drop_sealed(f, fw));
		else
			sfs_log("worker %u: cannot %s in place: %s", fw->worker,
				to == SFS_ERB_ADOPT ? "adopt a checkpoint's files" :
				to ? "go back to its pinned checkpoint" : "empty its store",
				sfs_last_error());
		sfs_store_relaxed(&ctl->wc_erb_rc, rc);
		sfs_store_release(&ctl->wc_erb_ack, rb);
		work = 1;
	}
	return work;
}

/*
 * Rollback R, acked by the checkpointer, not answered yet for @fw: return
 * its target to the version pinned for ck_rb_to, drop its SEALED buffers
 * (each gets a grace period as a flushed one: an attached reader may still
 * look at it), and answer.  1 if it answered, else 0.
 */
static int rollback_worker(struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	struct sfs_ckpt *ck = f->ck;
	struct sfs_ckpt_worker *cw = &ck->ck_w[fw->worker];
	uint64_t r = sfs_load_acquire(&ck->ck_rb_ack), to, seq = 0, t0 = sfs_now_ns();
	unsigned dropped = 0;
	int rc;

	if (r <= sfs_load_relaxed(&cw->cw_rb_ack))
		return 0;
	to = sfs_load_relaxed(&ck->ck_rb_to);
	pin_done(f, fw);	/* a checkpoint completed just before the ack */
	/* A worker that sealed nothing after its pinned checkpoint (it finished
	 * there: sfs_task_finish) is carried unchanged by every later one, so
	 * its pinned version is checkpoint @to's too. */
	if (!fw->pin_ok)
		rc = sfs__err(-ENOENT, "worker %u: no version of checkpoint %llu is pinned (the "
			      "compactor started after it was staged)", fw->worker,
			      (unsigned long long)to);
	else if (fw->pinned != to &&
		 !(fw->pinned < to && sfs_load_relaxed(&cw->cw_sealed) == fw->pinned))
		rc = sfs__err(-ENOENT, "worker %u: its pinned version is checkpoint %llu's, not "
			      "%llu's (it sealed %llu since)", fw->worker,
			      (unsigned long long)fw->pinned, (unsigned long long)to,
			      (unsigned long long)sfs_load_relaxed(&cw->cw_sealed));
	else if (!(rc = sfs_fault("flush.rollback")))
		rc = f->ops->rollback(fw->tw, &seq);
	if (rc == 0) {
		dropped = drop_sealed(f, fw);
		sfs_log("worker %u: rolled back to checkpoint %llu (its version of seq %llu) in %.1f "
			"ms, %u sealed buffers dropped", fw->worker, (unsigned long long)to,
			(unsigned long long)seq, (sfs_now_ns() - t0) / 1e6, dropped);
	} else {
		sfs_log("worker %u: cannot roll back in place: %s", fw->worker, sfs_last_error());
	}
	sfs_store_relaxed(&cw->cw_rb_rc, rc);
	sfs_store_release(&cw->cw_rb_ack, r);
	return 1;
}

struct rollback_job {
	struct sfs_flusher *f;
	struct sfs_flush_worker *fw;
	pthread_t th;
	int started;
};

static void *rollback_thread(void *arg)
{
	struct rollback_job *j = arg;

	rollback_worker(j->f, j->fw);
	return NULL;
}

/*
 * Every worker of lane @l with a rollback to answer, at once: a rollback
 * is a target's close and reopen (RocksDB: tens to hundreds of ms) or a
 * commit per table, and the group waits for the slowest worker's, so a
 * lane with several runs them on a thread each and joins them.  Each
 * writer is still used by one thread at a time (its owner waits), as the
 * contract wants.  Returns the rollbacks answered.
 */
static int rollback_lane(struct sfs_flusher *f, struct sfs_flush_lane *l)
{
	struct rollback_job jobs[SFS_FLUSH_MAX_WORKERS];
	uint64_t r;
	unsigned n = 0, done = 0;

	if (!f->ck)
		return 0;
	r = sfs_load_acquire(&f->ck->ck_rb_ack);
	for (uint32_t w = l->first; w < l->nworkers; w += l->stride) {
		struct sfs_flush_worker *fw = &f->w[w];

		if (fw->open && ckpt_worker(f, fw) &&
		    r > sfs_load_relaxed(&f->ck->ck_w[fw->worker].cw_rb_ack))
			jobs[n++] = (struct rollback_job){ .f = f, .fw = fw };
	}
	for (unsigned i = 1; i < n; i++)
		jobs[i].started = pthread_create(&jobs[i].th, NULL, rollback_thread, &jobs[i]) == 0;
	for (unsigned i = 0; i < n; i++)
		if (!jobs[i].started)
			done += rollback_worker(f, jobs[i].fw);	/* the first, or no thread */
	for (unsigned i = 1; i < n; i++)
		if (jobs[i].started) {
			pthread_join(jobs[i].th, NULL);
			done++;
		}
	return (int)done;
}

static void pool_stop(struct sfs_flusher *f);

void sfs_flusher_fini(struct sfs_flusher *f)
{
	pool_stop(f);
	for (uint32_t i = 0; i < SFS_FLUSH_MAX_WORKERS; i++) {
		if (f->w[i].open)
			f->ops->close(f->w[i].tw);
		free(f->w[i].offs);
		free(f->w[i].views);
	}
	memset(f->w, 0, sizeof(f->w));
}

/* Open worker @w's region and store; RETIRING buffers left by a previous
 * compactor get a fresh grace period.  @l: the lane that owns @w. */
static int open_worker(struct sfs_flusher *f, struct sfs_flush_lane *l, uint32_t w)
{
	struct sfs_flush_worker *fw = &f->w[w];
	int rc = sfs_wctl_attach(f->seg, w, &fw->ctl, &fw->ring, fw->buf);

	if (rc)
		return rc;
	rc = f->ops->open(f->seg, w, f->self, &f->cfg, &fw->tw);
	if (rc) {
		if (sfs_flusher_fatal(rc))
			return sfs__err(rc, "worker %u: cannot open its store: %s", w, sfs_last_error());
		if (!fw->failing)
			sfs_log("worker %u: cannot open its store, will retry: %s", w, sfs_last_error());
		fw->failing = 1;
		sfs_proc_io(me(f), rc);
		return rc;
	}
	fw->failing = 0;
	fw->worker = w;
	fw->cur = -1;
	for (uint32_t i = 0; i < fw->ctl->wc_nbufs; i++)
		if (sfs_load_acquire(&fw->ctl->wc_buf[i].cb_state) == SFS_BUF_RETIRING)
			fw->retire_token[i] = sfs_qsbr_start(f->seg->hdr);
	fw->open = 1;
	if (ckpt_worker(f, fw) && sfs_load_acquire(&fw->ctl->wc_flushed_seq) == 0) {
		/* Nothing flushed since the group started: the version at open
		 * is the one it started from (fresh, or restored). */
		fw->pinned = f->ck->ck_restored_id;
		fw->pin_ok = f->ops->pin(fw->tw, 0) == 0;
	}
	if (w + 1 > l->nworkers)
		l->nworkers = w + 1;
	return 0;
}

int sfs_flusher_fatal(int rc)
{
	return rc == SFS_EFULL || rc == SFS_EUSAGE || rc == SFS_EVERSION;
}

/* New workers of lane @l: regions named worker.<w> this compactor has not
 * opened; a store that can never open (sfs_flusher_fatal) stops the scan
 * with its error. */
static int scan(struct sfs_flusher *f, struct sfs_flush_lane *l)
{
	const struct sfs_seg_hdr *h = f->seg->hdr;

	for (unsigned i = 0; i < SFS_MAX_REGIONS; i++) {
		const struct sfs_region_desc *d = &h->sh_regions[i];
		unsigned w;
		char tail;
		int rc;

		if (sfs_load_acquire(&d->rd_state) == SFS_REGION_FREE)
			break;
		if (sfs_load_acquire(&d->rd_state) != SFS_REGION_READY ||
		    sscanf(d->rd_name, "worker.%u%c", &w, &tail) != 1 || w >= SFS_FLUSH_MAX_WORKERS ||
		    w % l->stride != l->first || f->w[w].open)
			continue;
		rc = open_worker(f, l, w);
		if (rc == 0)
			sfs_log("flushing worker %u", w);
		else if (sfs_flusher_fatal(rc))
			return rc;
	}
	return 0;
}

/* The SEALED buffer with the lowest seq, or -1. */
static int next_sealed(struct sfs_flush_worker *fw)
{
	int best = -1;

	for (uint32_t i = 0; i < fw->ctl->wc_nbufs; i++)
		if (sfs_load_acquire(&fw->ctl->wc_buf[i].cb_state) == SFS_BUF_SEALED &&
		    (best < 0 || fw->ctl->wc_buf[i].cb_seq < fw->ctl->wc_buf[best].cb_seq))
			best = (int)i;
	return best;
}

static void ttl_rules(const struct sfs_flusher *f, struct sfs_flush_worker *fw);

static int begin(const struct sfs_flusher *f, struct sfs_flush_worker *fw, int b)
{
	struct sfs_wbuf_stats st;
	int rc;

	sfs_wbuf_stats(fw->buf[b], &st);
	if (st.entries > fw->cap) {
		uint64_t *n = realloc(fw->offs, st.entries * sizeof(*n));

		if (!n)
			return -ENOMEM;
		fw->offs = n;
		fw->cap = st.entries;
	}
	rc = sfs_wbuf_sorted(fw->buf[b], fw->offs, fw->cap, &fw->n);
	if (rc)
		return rc;
	fw->cur = b;
	fw->pos = 0;
	fw->t0 = sfs_now_ns();
	fw->ttl_dropped = 0;
	ttl_rules(f, fw);
	return 0;
}

/* The registry's TTLs as of this buffer (a worker may register a state,
 * or change a TTL's duration, at any time: relaxed loads), told to the
 * target with the buffer's clocks.  O(states), per buffer. */
static void ttl_rules(const struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	const struct sfs_wctl_buf *d = &fw->ctl->wc_buf[fw->cur];

	fw->ttl_any = 0;
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *sd = &f->seg->hdr->sh_states[i];
		int ready = sfs_load_acquire(&sd->sd_state) == SFS_SDESC_READY;

		fw->ttl[i].ttl_ms = ready ? sfs_load_relaxed(&sd->sd_ttl_ms) : 0;
		fw->ttl[i].event_time =
			ready && (sfs_load_relaxed(&sd->sd_ttl_flags) & SFS_TTL_EVENT_TIME);
		fw->ttl_any |= fw->ttl[i].ttl_ms != 0;
	}
	if (fw->ttl_any && f->ops->ttl)
		f->ops->ttl(fw->tw, fw->ttl, &d->cb_ttl);
}

/*
 * Drop what has expired in an apply batch (common/ttl.h): a value's or a
 * counter's expired put becomes a delete (the store may hold an older
 * version below it), a map or list entry is flagged SFS_WBUF_EXPIRED (the
 * targets' map walks apply it as removed).  By the worker's clock at the
 * seal (cb_ttl), which every later read of the worker is at or past: the
 * drop is never visible.  The views are this process's copies; the
 * buffer is never written.  Returns the entries dropped.
 */
static unsigned ttl_drop(const struct sfs_flusher *f, const struct sfs_flush_worker *fw,
			 struct sfs_wbuf_view *v, unsigned n)
{
	const struct sfs_ttl_clock *clk = &fw->ctl->wc_buf[fw->cur].cb_ttl;
	unsigned dropped = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct sfs_ttl_rule *r;
		uint32_t sid;

		if (v[i].klen < SFS_KEY_PREFIX || v[i].kind != SFS_WBUF_PUT)
			continue;
		sid = sfs_key_prefix_state(v[i].key);
		r = &fw->ttl[sid < SFS_MAX_STATES ? sid : 0];
		if (sid >= SFS_MAX_STATES || !r->ttl_ms)
			continue;
		dropped += (unsigned)sfs_wbuf_view_ttl_drop(&v[i], f->seg->hdr->sh_states[sid].sd_kind,
							    r, clk);
	}
	return dropped;
}

static int is_map_view(const struct sfs_flusher *f, const struct sfs_wbuf_view *v)
{
	uint32_t sid, kind;

	if (v->klen < SFS_KEY_PREFIX)
		return 0;
	sid = sfs_key_prefix_state(v->key);
	kind = sid < SFS_MAX_STATES ? f->seg->hdr->sh_states[sid].sd_kind : 0;
	return kind == SFS_STATE_MAP || kind == SFS_STATE_LIST;
}

/* Flush up to @budget entries of the current buffer; finish it when done. */
static int flush_some(struct sfs_flusher *f, struct sfs_flush_worker *fw, unsigned budget)
{
	struct sfs_wctl *ctl = fw->ctl;
	struct sfs_wctl_buf *d = &ctl->wc_buf[fw->cur];
	uint64_t seq = d->cb_seq;
	unsigned done = 0;
	int src;

	while (fw->pos < fw->n && done < budget) {
		unsigned k = 0, dropped;
		int rc = 0;

		/* A batch never ends inside a map's run (its parent key is a
		 * prefix of its head in every namespace and of all its
		 * entries): targets get each map whole. */
		while (fw->pos + k < fw->n && rc == 0) {
			if (k >= APPLY_BATCH || done + k >= budget) {
				const struct sfs_wbuf_view *last = &fw->views[k - 1];
				struct sfs_wbuf_view next;
				uint32_t pl;

				if (!is_map_view(f, last) ||
				    !(pl = sfs_map_parent_len(last->key, last->klen)) ||
				    sfs_wbuf_view_at(fw->buf[fw->cur], fw->offs[fw->pos + k], &next) ||
				    next.klen < pl || memcmp(next.key, last->key, pl) != 0)
					break;
			}
			if (k == fw->vcap) {
				size_t cap = fw->vcap ? fw->vcap * 2 : APPLY_BATCH;
				struct sfs_wbuf_view *nv = realloc(fw->views, cap * sizeof(*nv));

				if (!nv)
					return -ENOMEM;
				fw->views = nv;
				fw->vcap = cap;
			}
			rc = sfs_wbuf_view_at(fw->buf[fw->cur], fw->offs[fw->pos + k], &fw->views[k]);
			k++;
		}
		dropped = rc == 0 && fw->ttl_any ? ttl_drop(f, fw, fw->views, k) : 0;
		if (rc == 0 && !(rc = sfs_fault("flush.apply")))
			rc = f->ops->apply(fw->tw, fw->views, k, seq);
		if (rc == SFS_EFULL) {
			/* The store cannot hold the state (memory: --store-mb):
			 * no retry makes room, so the compactor stops (fatal;
			 * main.c logs the error). */
			return rc;
		}
		if (rc) {
			/* Retried from fw->pos later: applies are idempotent. */
			flush_failed(f, fw, rc, "flush", seq);
			return done ? (int)done : 0;
		}
		fw->failing = 0;
		fw->ttl_dropped += dropped;
		fw->pos += k;
		done += k;
	}
	if (fw->pos < fw->n)
		return (int)done;
	if ((src = sfs_fault("flush.commit")) || (src = f->ops->commit(fw->tw, seq))) {
		/* -EAGAIN: durability under way in the background, not a failure */
		if (src != -EAGAIN)
			flush_failed(f, fw, src, "commit", seq);
		return (int)done;
	}
	if (d->cb_at_barrier && (src = snapshot_barrier(f, fw, d->cb_barrier, seq)))
		return src == SFS_EFULL ? src : (int)done;	/* full: as an apply's */
	sfs_proc_io(me(f), 0);	/* the disk took a whole buffer: any trouble is over */
	fw->failing = 0;
	sfs_fault("flush.publish");
	d->cb_flushed_ns = sfs_now_ns();
	sfs_store_relaxed(&ctl->wc_flushes, ctl->wc_flushes + 1);
	sfs_store_relaxed(&ctl->wc_flush_entries, ctl->wc_flush_entries + fw->n);
	sfs_store_relaxed(&ctl->wc_flush_ns, ctl->wc_flush_ns + (d->cb_flushed_ns - fw->t0));
	sfs_store_relaxed(&ctl->wc_ttl_dropped, ctl->wc_ttl_dropped + fw->ttl_dropped);
	sfs_store_release(&ctl->wc_flushed_seq, seq);
	sfs_store_release(&d->cb_state, SFS_BUF_RETIRING);
	fw->retire_token[fw->cur] = sfs_qsbr_start(f->seg->hdr);
	fw->cur = -1;
	return (int)done + 1;
}

/*
 * Sealed buffer @b saved whole by the target (store/target.h absorb; the
 * table target's SFS_TABLE_L0_IMAGE=1): no sort, no apply, no commit.
 * What follows is a commit's end in flush_some (the snapshot of a
 * barrier, the counters, the publication of wc_flushed_seq, the retire),
 * so the worker gets its buffer back as after a flush.  Returns 1 when
 * absorbed, 0 when to be retried (failed, or -EAGAIN: the target's
 * conversions are behind: the buffer waits, which is the back-pressure),
 * -ENOTSUP when the target takes buffers the usual way, SFS_EFULL (fatal).
 */
static int absorb(struct sfs_flusher *f, struct sfs_flush_worker *fw, int b)
{
	struct sfs_wctl *ctl = fw->ctl;
	struct sfs_wctl_buf *d = &ctl->wc_buf[b];
	uint64_t seq = d->cb_seq, t0 = sfs_now_ns();
	struct sfs_wbuf_stats st;
	int rc;

	fw->cur = b;
	ttl_rules(f, fw);	/* the rules the conversion drops by (the clock is the seal's) */
	rc = f->ops->absorb(fw->tw, fw->buf[b], seq, (int)d->cb_at_barrier, &d->cb_ttl);
	fw->cur = -1;
	if (rc == -ENOTSUP || rc == -EAGAIN)
		return rc == -EAGAIN ? 0 : rc;
	if (rc) {
		flush_failed(f, fw, rc, "absorb", seq);
		return rc == SFS_EFULL ? rc : 0;
	}
	if (d->cb_at_barrier && (rc = snapshot_barrier(f, fw, d->cb_barrier, seq)))
		return rc == SFS_EFULL ? rc : 0;	/* retried: absorb again is a no-op */
	sfs_proc_io(me(f), 0);
	fw->failing = 0;
	sfs_fault("flush.publish");
	sfs_wbuf_stats(fw->buf[b], &st);
	d->cb_flushed_ns = sfs_now_ns();
	sfs_store_relaxed(&ctl->wc_flushes, ctl->wc_flushes + 1);
	sfs_store_relaxed(&ctl->wc_flush_entries, ctl->wc_flush_entries + st.entries);
	sfs_store_relaxed(&ctl->wc_flush_ns, ctl->wc_flush_ns + (d->cb_flushed_ns - t0));
	sfs_store_release(&ctl->wc_flushed_seq, seq);
	sfs_store_release(&d->cb_state, SFS_BUF_RETIRING);
	fw->retire_token[b] = sfs_qsbr_start(f->seg->hdr);
	return 1;
}

/* RETIRING buffers whose grace period passed become FREE. */
static int release_retired(struct sfs_flusher *f, struct sfs_flush_worker *fw, int *pending)
{
	struct sfs_wctl *ctl = fw->ctl;
	int freed = 0;

	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) != SFS_BUF_RETIRING)
			continue;
		if (sfs_qsbr_check(f->seg, f->self, fw->retire_token[i], 0) != 1) {
			*pending = 1;
			continue;
		}
		sfs_store_release(&ctl->wc_buf[i].cb_state, SFS_BUF_FREE);
		freed++;
	}
	if (freed) {
		uatomic_inc(&ctl->wc_freed);	/* full barrier before the flag */
		if (sfs_load_relaxed(&ctl->wc_waiting))
			sfs_futex_wake(&ctl->wc_freed, INT_MAX);
	}
	return freed;
}

/* One bounded round over the workers of lane @l (sfs_flusher_step's
 * contract).  Touches only those workers' state: any thread may run it for
 * the lane it owns. */
static int lane_step(struct sfs_flusher *f, struct sfs_flush_lane *l, unsigned budget,
		     int *pending)
{
	uint64_t now = sfs_now_ns();
	int work = 0;

	*pending = 0;
	if (now >= l->next_scan_ns) {
		int rc = scan(f, l);

		if (rc)
			return rc;
		l->next_scan_ns = now + SCAN_PERIOD_NS;
	}
	work += rollback_lane(f, l);
	for (uint32_t w = l->first; w < l->nworkers; w += l->stride) {
		struct sfs_flush_worker *fw = &f->w[w];
		struct sfs_flush_req req[8];

		if (!fw->open)
			continue;
		/* Requests are doorbells; the states below are the truth. */
		while (sfs_ring_dequeue_burst(fw->ring, req, 8) > 0)
			work++;
		if (ckpt_worker(f, fw)) {
			pin_done(f, fw);
			work += engine_requests(f, fw);
		}
		if (fw->cur < 0) {
			int b = next_sealed(fw);

			if (b >= 0) {
				/* Every counter's operator folds here as the
				 * segment names it, or this compactor stops: per
				 * buffer, O(states), never per entry. */
				int rc = sfs_merge_check_states(f->seg->hdr);

				/* saved whole, or else sorted and applied */
				if (rc == 0 && f->ops->absorb &&
				    (rc = absorb(f, fw, b)) != -ENOTSUP) {
					if (rc < 0)
						return rc;	/* fatal (absorb said why) */
					work += rc;
					rc = 0;
					b = -1;
				} else if (rc == 0 || rc == -ENOTSUP) {
					rc = begin(f, fw, b);
				}

				if (rc) {
					sfs_log("worker %u: cannot start a flush: %s", w,
						sfs_last_error());
					return rc;
				}
			}
		}
		if (fw->cur >= 0) {
			int n = flush_some(f, fw, budget);

			if (n < 0)
				return n;	/* fatal (flush_some said why) */
			work += n;
			if (fw->failing)
				*pending = 1;
		}
		/* an absorbed buffer's conversion, a step at a time between
		 * the buffers (the table target's level-0 images) */
		if (fw->cur < 0 && f->ops->l0_step) {
			int n = f->ops->l0_step(fw->tw);

			if (n < 0)
				flush_failed(f, fw, n, "conversion", 0);
			else
				work += n;
			if (n < 0)
				*pending = 1;
		}
		work += publish_snapshots(f, fw);
		work += release_retired(f, fw, pending);
		if (f->ops->busy(fw->tw))
			*pending = 1;
	}
	return work;
}

/* ---- maintenance threads ------------------------------------------------------------- */

static void pool_life(void *arg)
{
	struct sfs_flush_thread *t = arg;
	struct sfs_flush_pool *p = t->t_pool;

	pthread_mutex_lock(&p->p_mu);
	t->t_life++;
	pthread_cond_signal(&p->p_done_cv);
	pthread_mutex_unlock(&p->p_mu);
}

static void abs_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* A thread: rounds over its lane as long as they find work, else a wait
 * for the next kick (or a poll of what is pending). */
static void *pool_main(void *arg)
{
	struct sfs_flush_thread *t = arg;
	struct sfs_flush_pool *p = t->t_pool;

	/* sfs_child_progress() inside a long step (a memory dump) tells the
	 * main thread this thread is alive; only the main thread beats. */
	sfs_child_progress_hook(pool_life, t);
	pthread_mutex_lock(&p->p_mu);
	while (!p->p_stop) {
		uint64_t kick = p->p_kick;
		unsigned budget = p->p_budget;
		int pending = 0, work;

		pthread_mutex_unlock(&p->p_mu);
		work = lane_step(p->p_f, &t->t_lane, budget, &pending);
		pthread_mutex_lock(&p->p_mu);
		t->t_done_kick = kick;
		t->t_pending = pending;
		if (work < 0) {
			t->t_rc = work;
			pthread_cond_signal(&p->p_done_cv);
			while (!p->p_stop)
				pthread_cond_wait(&p->p_kick_cv, &p->p_mu);
			break;
		}
		t->t_work += (uint64_t)work;
		pthread_cond_signal(&p->p_done_cv);
		if (work == 0 && p->p_kick == kick && !p->p_stop) {
			struct timespec ts;

			abs_after(&ts, pending ? POLL_NS : p->p_nap_ns);
			pthread_cond_timedwait(&p->p_kick_cv, &p->p_mu, &ts);
		}
	}
	pthread_mutex_unlock(&p->p_mu);
	return NULL;
}

/* The main thread's step with a pool: kick, then wait for one round of
 * every thread (or its life inside a long one). */
static int pool_step(struct sfs_flusher *f, unsigned budget, int *pending)
{
	struct sfs_flush_pool *p = f->pool;
	uint64_t kick, work = 0;
	int rc = 0, busy = 0;

	*pending = 0;
	pthread_mutex_lock(&p->p_mu);
	kick = ++p->p_kick;
	p->p_budget = budget;
	pthread_cond_broadcast(&p->p_kick_cv);
	for (unsigned i = 0; i < p->p_n; i++)
		p->p_t[i].t_life_seen = p->p_t[i].t_life;
	for (;;) {
		int all = 1;
		struct timespec ts;

		for (unsigned i = 0; i < p->p_n; i++) {
			const struct sfs_flush_thread *t = &p->p_t[i];

			if (t->t_rc && !rc)
				rc = t->t_rc;
			if (t->t_done_kick < kick && t->t_life == t->t_life_seen)
				all = 0;
		}
		if (rc || all || sfs_child_stop)
			break;
		abs_after(&ts, MAIN_WAIT_NS);
		pthread_cond_timedwait(&p->p_done_cv, &p->p_mu, &ts);
	}
	for (unsigned i = 0; i < p->p_n; i++) {
		struct sfs_flush_thread *t = &p->p_t[i];

		work += t->t_work;
		t->t_work = 0;
		if (t->t_pending)
			*pending = 1;
		if (t->t_done_kick < kick)
			busy = 1;	/* still inside a long step */
	}
	pthread_mutex_unlock(&p->p_mu);
	if (rc)
		return rc;
	work += (uint64_t)busy;
	return work > INT_MAX ? INT_MAX : (int)work;
}

int sfs_flusher_step(struct sfs_flusher *f, unsigned budget, int *pending)
{
	if (f->pool)
		return pool_step(f, budget, pending);
	return lane_step(f, &f->lane, budget, pending);
}

unsigned sfs_flusher_nthreads(const struct sfs_flusher *f)
{
	return f->pool ? f->pool->p_n : 0;
}

static void pool_stop(struct sfs_flusher *f)
{
	struct sfs_flush_pool *p = f->pool;
	unsigned started;

	if (!p)
		return;
	pthread_mutex_lock(&p->p_mu);
	p->p_stop = 1;
	pthread_cond_broadcast(&p->p_kick_cv);
	pthread_mutex_unlock(&p->p_mu);
	started = p->p_n;
	for (unsigned i = 0; i < started; i++)
		pthread_join(p->p_t[i].t_th, NULL);
	pthread_cond_destroy(&p->p_kick_cv);
	pthread_cond_destroy(&p->p_done_cv);
	pthread_mutex_destroy(&p->p_mu);
	free(p);
	f->pool = NULL;
}

int sfs_flusher_threads(struct sfs_flusher *f, unsigned n, uint64_t nap_ns)
{
	struct sfs_flush_pool *p;
	pthread_condattr_t ca;
	sigset_t all, old;
	int rc = 0;

	if (n > SFS_FLUSH_MAX_WORKERS)
		return sfs__err(SFS_EUSAGE, "compactor: %u maintenance threads, at most %d", n,
				SFS_FLUSH_MAX_WORKERS);
	if (n <= 1 || f->pool)
		return 0;
	/* Workers are taken over from the main thread's lane only before it
	 * opened any: a worker has one owner for the compactor's life. */
	if (f->lane.nworkers)
		return sfs__err(SFS_EUSAGE, "compactor: threads started after the first step");
	p = calloc(1, sizeof(*p) + n * sizeof(p->p_t[0]));
	if (!p)
		return -ENOMEM;
	p->p_f = f;
	p->p_nap_ns = nap_ns ? nap_ns : 100 * 1000000ull;
	p->p_budget = 4096;	/* the first rounds, before any kick */
	pthread_mutex_init(&p->p_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->p_kick_cv, &ca);
	pthread_cond_init(&p->p_done_cv, &ca);
	pthread_condattr_destroy(&ca);
	f->pool = p;
	/* Signals go to the main thread (its futex wait is what SIGTERM must
	 * interrupt); threads the targets start from a pool thread inherit
	 * the mask. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 0; i < n; i++) {
		struct sfs_flush_thread *t = &p->p_t[i];

		t->t_pool = p;
		t->t_lane.first = i;
		t->t_lane.stride = n;
		rc = -pthread_create(&t->t_th, NULL, pool_main, t);
		if (rc) {
			rc = sfs__err(rc, "compactor: maintenance thread %u of %u: %s", i, n,
				      strerror(-rc));
			break;
		}
		p->p_n = i + 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		pool_stop(f);
	return rc;
}
