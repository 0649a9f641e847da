/*
 * flush.c — the compactor's flush cycle (see flush.h).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/merge.h"
#include "compactor/flush.h"
#include "runtime/job.h"
#include "shm/futex.h"
#include "shm/qsbr.h"
#include "worker/keygroup.h"

#define SCAN_PERIOD_NS (50 * 1000000ull)

#define APPLY_BATCH 64

int sfs_flusher_init(struct sfs_flusher *f, struct sfs_seg *seg,
		     const struct sfs_proc_slot *self, uint64_t store_bytes)
{
	memset(f, 0, sizeof(*f));
	f->seg = seg;
	f->self = self;
	f->cfg.store_bytes = store_bytes;
	f->ops = sfs_target_of(seg);
	if (!f->ops)
		return sfs__err(SFS_EUSAGE, "segment %s: unknown flush target '%.16s'", seg->path,
				seg->hdr->sh_backend);
	/* A query job with checkpoints: the compactor snapshots its workers'
	 * state at each barrier (the supervisor made the region before any
	 * child started; single-node groups: it is in this segment). */
	{
		uint64_t off, size;

		if (sfs_seg_region_find(seg, RT_JOB_REGION, &off, &size) == 0 &&
		    size >= sizeof(struct rt_job)) {
			struct rt_job *job = sfs_seg_ptr(seg, off);

			if (job->rj_magic == RT_JOB_MAGIC && job->rj_version == RT_JOB_VERSION &&
			    job->rj_checkpoint_ms)
				f->job = job;
		}
	}
	return 0;
}

/*
 * Buffer @seq was sealed by barrier @id and is committed: the target now
 * holds exactly the worker's state as of @id (buffers flush in seq order,
 * and nothing newer is applied before this returns).  Stage its files for
 * the checkpointer and publish rw_snap_barrier.  An error is retried with
 * the commit (both idempotent).
 */
static int snapshot_barrier(struct sfs_flusher *f, struct sfs_flush_worker *fw, uint64_t id,
			    uint64_t seq)
{
	struct rt_job *job = f->job;
	char dir[RT_PATH_MAX + 64];
	int rc;

	if (!job || fw->worker >= job->rj_workers)
		return 0;
	if (f->ops->snapshot_begin) {
		/* The version is captured now, its files follow while newer
		 * buffers flush; publish_snapshots() reports it when complete. */
		snprintf(dir, sizeof(dir), RT_STAGE_FMT, job->rj_data_dir, fw->worker,
			 (unsigned long long)id);
		rc = f->ops->snapshot_begin(fw->tw, dir, id);
		if (rc && rc != SFS_ERUNNING && !fw->failing)
			sfs_log("worker %u: snapshot of barrier %llu failed, will retry: %s",
				fw->worker, (unsigned long long)id, sfs_last_error());
		if (rc && rc != SFS_ERUNNING)
			fw->failing = 1;
		return rc;
	}
	if (!f->ops->snapshot) {
		if (!f->no_snapshot_said)
			sfs_log("the %s target cannot snapshot: checkpoints will not complete",
				f->ops->name);
		f->no_snapshot_said = 1;
		return 0;
	}
	snprintf(dir, sizeof(dir), RT_STAGE_FMT, job->rj_data_dir, fw->worker,
		 (unsigned long long)id);
	rc = f->ops->snapshot(fw->tw, dir);
	if (rc) {
		if (!fw->failing)
			sfs_log("worker %u: snapshot of barrier %llu failed, will retry: %s",
				fw->worker, (unsigned long long)id, sfs_last_error());
		fw->failing = 1;
		return rc;
	}
	sfs_store_relaxed(&job->rj_ws[fw->worker].rw_snap_version, seq);
	sfs_store_release(&job->rj_ws[fw->worker].rw_snap_barrier, id);
	return 0;
}

/* A snapshot begun beside the flush that is now complete: publish it. */
static int publish_snapshots(struct sfs_flusher *f, struct sfs_flush_worker *fw)
{
	struct rt_worker_status *ws;
	uint64_t id, seq;
	int rc;

	if (!f->ops->snapshot_poll || !f->job || fw->worker >= f->job->rj_workers)
		return 0;
	rc = f->ops->snapshot_poll(fw->tw, &id, &seq);
	if (rc < 0) {
		sfs_log("worker %u: %s", fw->worker, sfs_last_error());
		return 0;
	}
	ws = &f->job->rj_ws[fw->worker];
	if (rc == 1 && id > sfs_load_relaxed(&ws->rw_snap_barrier)) {
		sfs_store_relaxed(&ws->rw_snap_version, seq);
		sfs_store_release(&ws->rw_snap_barrier, id);
	}
	return rc;
}

void sfs_flusher_fini(struct sfs_flusher *f)
{
	for (uint32_t i = 0; i < f->nworkers; i++) {
		if (f->w[i].open)
			f->ops->close(f->w[i].tw);
		free(f->w[i].offs);
		free(f->w[i].views);
	}
	memset(f->w, 0, sizeof(f->w));
}

/* Open worker @w's region and store; RETIRING buffers left by a previous
 * compactor get a fresh grace period. */
static int open_worker(struct sfs_flusher *f, uint32_t w)
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
		return rc;
	}
	fw->failing = 0;
	fw->worker = w;
	fw->cur = -1;
	for (uint32_t i = 0; i < fw->ctl->wc_nbufs; i++)
		if (sfs_load_acquire(&fw->ctl->wc_buf[i].wb_state) == SFS_BUF_RETIRING)
			fw->retire_token[i] = sfs_qsbr_start(f->seg->hdr);
	fw->open = 1;
	if (w + 1 > f->nworkers)
		f->nworkers = w + 1;
	return 0;
}

int sfs_flusher_fatal(int rc)
{
	return rc == SFS_EFULL || rc == SFS_EUSAGE || rc == SFS_EVERSION;
}

/* New workers: regions named worker.<w> this compactor has not opened; a
 * store that can never open (sfs_flusher_fatal) stops the scan with its
 * error. */
static int scan(struct sfs_flusher *f)
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
		    f->w[w].open)
			continue;
		rc = open_worker(f, w);
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
		if (sfs_load_acquire(&fw->ctl->wc_buf[i].wb_state) == SFS_BUF_SEALED &&
		    (best < 0 || fw->ctl->wc_buf[i].wb_seq < fw->ctl->wc_buf[best].wb_seq))
			best = (int)i;
	return best;
}

static int begin(struct sfs_flush_worker *fw, int b)
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
	return 0;
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
	uint64_t seq = d->wb_seq;
	unsigned done = 0;
	int src;

	while (fw->pos < fw->n && done < budget) {
		unsigned k = 0;
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
		if (rc == 0)
			rc = f->ops->apply(fw->tw, fw->views, k, seq);
		if (rc == SFS_EFULL) {
			/* The store cannot hold the state (memory: --store-mb):
			 * no retry makes room, so the compactor stops (fatal;
			 * main.c logs the error). */
			return rc;
		}
		if (rc) {
			/* Retried from fw->pos later: applies are idempotent. */
			if (!fw->failing)
				sfs_log("worker %u: flush of buffer seq %llu failed, will retry: %s",
					fw->worker, (unsigned long long)seq, sfs_last_error());
			fw->failing = 1;
			return done ? (int)done : 0;
		}
		fw->failing = 0;
		fw->pos += k;
		done += k;
	}
	if (fw->pos < fw->n)
		return (int)done;
	if (f->ops->commit(fw->tw, seq))
		return (int)done;
	if (d->wb_at_barrier && (src = snapshot_barrier(f, fw, d->wb_barrier, seq)))
		return src == SFS_EFULL ? src : (int)done;	/* full: as an apply's */
	fw->failing = 0;
	d->wb_flushed_ns = sfs_now_ns();
	sfs_store_relaxed(&ctl->wc_flushes, ctl->wc_flushes + 1);
	sfs_store_relaxed(&ctl->wc_flush_entries, ctl->wc_flush_entries + fw->n);
	sfs_store_relaxed(&ctl->wc_flush_ns, ctl->wc_flush_ns + (d->wb_flushed_ns - fw->t0));
	sfs_store_release(&ctl->wc_flushed_seq, seq);
	sfs_store_release(&d->wb_state, SFS_BUF_RETIRING);
	fw->retire_token[fw->cur] = sfs_qsbr_start(f->seg->hdr);
	fw->cur = -1;
	return (int)done + 1;
}

/* RETIRING buffers whose grace period passed become FREE. */
static int release_retired(struct sfs_flusher *f, struct sfs_flush_worker *fw, int *pending)
{
	struct sfs_wctl *ctl = fw->ctl;
	int freed = 0;

	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		if (sfs_load_acquire(&ctl->wc_buf[i].wb_state) != SFS_BUF_RETIRING)
			continue;
		if (sfs_qsbr_check(f->seg, f->self, fw->retire_token[i], 0) != 1) {
			*pending = 1;
			continue;
		}
		sfs_store_release(&ctl->wc_buf[i].wb_state, SFS_BUF_FREE);
		freed++;
	}
	if (freed) {
		uatomic_inc(&ctl->wc_freed);	/* full barrier before the flag */
		if (sfs_load_relaxed(&ctl->wc_waiting))
			sfs_futex_wake(&ctl->wc_freed, INT_MAX);
	}
	return freed;
}

int sfs_flusher_step(struct sfs_flusher *f, unsigned budget, int *pending)
{
	uint64_t now = sfs_now_ns();
	int work = 0;

	*pending = 0;
	if (now >= f->next_scan_ns) {
		int rc = scan(f);

		if (rc)
			return rc;
		f->next_scan_ns = now + SCAN_PERIOD_NS;
	}
	for (uint32_t w = 0; w < f->nworkers; w++) {
		struct sfs_flush_worker *fw = &f->w[w];
		struct sfs_flush_req req[8];

		if (!fw->open)
			continue;
		/* Requests are doorbells; the states below are the truth. */
		while (sfs_ring_dequeue_burst(fw->ring, req, 8) > 0)
			work++;
		if (fw->cur < 0) {
			int b = next_sealed(fw);

			if (b >= 0) {
				/* Every counter's operator folds here as the
				 * segment names it, or this compactor stops: per
				 * buffer, O(states), never per entry. */
				int rc = sfs_merge_check_states(f->seg->hdr);

				if (rc == 0)
					rc = begin(fw, b);

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
		work += publish_snapshots(f, fw);
		work += release_retired(f, fw, pending);
		if (f->ops->busy(fw->tw))
			*pending = 1;
	}
	return work;
}
