/*
 * snapshot.c — one read of a running group's shared memory
 * (supervisor/snapshot.h): the processes, the segments, the workers'
 * buffers and value caches, the query job's and the checkpoints' reports.
 *
 * Where the numbers come from (every one written by its owner with plain
 * or relaxed stores, read here with relaxed loads, untorn):
 *  - sh_children (the supervisor): per child role, index, pid, state,
 *    restarts and hang kills; sh_procs: heartbeats and QSBR of whoever is
 *    attached;
 *  - region "worker.<w>" (worker/wctl.h): buffers by state, seals, spills,
 *    stalls, the compactor's flushes and flush time, and the worker's value
 *    cache counters (worker/vcache.h);
 *  - region "job" (runtime/job.h, query jobs only): events generated,
 *    records processed, barriers and their time, result rows, sink epochs;
 *  - region "ckpt" (shm/ckpt.h, jobs with checkpoints): completed and
 *    aborted checkpoints, durations, files linked and referenced, and the
 *    job's recoveries (the supervisor writes its count there at each
 *    incarnation).
 * What is not here, and why: metrics.c.
 */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "runtime/job.h"
#include "shm/ckpt.h"
#include "shm/proc.h"
#include "supervisor/nodes.h"
#include "supervisor/snapshot.h"
#include "worker/state.h"
#include "worker/vcache.h"
#include "worker/wctl.h"

const char *sup_child_state_name(uint32_t st)
{
	static const char *const n[] = {
		[SFS_CHILD_UNUSED] = "unused",   [SFS_CHILD_STARTING] = "starting",
		[SFS_CHILD_RUNNING] = "running", [SFS_CHILD_BACKOFF] = "backoff",
		[SFS_CHILD_STOPPING] = "stopping", [SFS_CHILD_STOPPED] = "stopped",
		[SFS_CHILD_FAILED] = "failed",
	};
	return st <= SFS_CHILD_FAILED ? n[st] : "unknown";
}

int sup_snap_attach(const char *job, struct sfs_seg *segs, int *nsegs)
{
	int want = sfs_node_count(), rc;

	*nsegs = 0;
	for (int n = 0; n < want && n < SUP_SNAP_MAX_NODES; n++) {
		if ((rc = sfs_seg_attach(job, n, &segs[n]))) {
			sup_snap_detach(segs, *nsegs);
			*nsegs = 0;
			return rc;
		}
		(*nsegs)++;
	}
	return 0;
}

void sup_snap_detach(struct sfs_seg *segs, int nsegs)
{
	for (int n = 0; n < nsegs; n++)
		sfs_seg_detach(&segs[n]);
}

/* The LIVE slot of @pid in any segment (a worker holds two: the first). */
static const struct sfs_proc_slot *slot_of(struct sfs_seg *segs, int nsegs, int pid, int *node)
{
	for (int n = 0; n < nsegs; n++)
		for (int i = 0; i < SFS_MAX_PROCS; i++) {
			const struct sfs_proc_slot *sl = &segs[n].hdr->sh_procs[i];

			if (pid > 0 && sl->ps_pid == pid &&
			    SFS_SLOT_STATE(sfs_load_acquire(&sl->ps_claim)) == SFS_SLOT_LIVE) {
				*node = n;
				return sl;
			}
		}
	return NULL;
}

static void proc_from_slot(struct sup_snap_proc *p, const struct sfs_proc_slot *sl, uint64_t now)
{
	uint64_t beat = sfs_load_relaxed(&sl->ps_heartbeat);

	p->heartbeat_age_ms = now > beat ? (int64_t)((now - beat) / 1000000ull) : 0;
	p->qsbr = sfs_load_relaxed(&sl->ps_qsbr);
}

static void take_procs(struct sfs_seg *segs, int nsegs, struct sup_snap *s)
{
	const struct sfs_seg_hdr *h0 = segs[0].hdr;
	uint32_t nch = sfs_load_relaxed(&h0->sh_nchildren);

	/* The supervisor and clients from the process table; children from
	 * the supervisor's child table (it knows restarts and backoff). */
	for (int n = 0; n < nsegs; n++)
		for (int i = 0; i < SFS_MAX_PROCS; i++) {
			const struct sfs_proc_slot *sl = &segs[n].hdr->sh_procs[i];
			struct sup_snap_proc *p;

			/* Room is kept for every child (below). */
			if (!sfs_proc_slot_alive(sl) ||
			    (sl->ps_role != SFS_ROLE_SUPERVISOR && sl->ps_role != SFS_ROLE_CLIENT) ||
			    s->nprocs == SFS_MAX_PROCS)
				continue;
			p = &s->procs[s->nprocs++];
			memset(p, 0, sizeof(*p));
			snprintf(p->role, sizeof(p->role), "%s", sfs_role_name(sl->ps_role));
			/* Clients (sfs get, programs reading state) share index
			 * 0: their pid tells them apart. */
			p->index = sl->ps_role == SFS_ROLE_CLIENT ? (uint32_t)sl->ps_pid
								  : sl->ps_index;
			p->pid = sl->ps_pid;
			p->state = SFS_CHILD_RUNNING;
			p->cpu = -1;
			p->node = n;
			proc_from_slot(p, sl, s->taken_ns);
		}
	for (uint32_t i = 0; i < nch && i < SFS_MAX_CHILDREN; i++) {
		const struct sfs_child_desc *d = &h0->sh_children[i];
		const struct sfs_proc_slot *sl;
		struct sup_snap_proc *p = &s->procs[s->nprocs++];
		int node = 0;

		memset(p, 0, sizeof(*p));
		snprintf(p->role, sizeof(p->role), "%s", sfs_role_name(d->cd_role));
		p->index = d->cd_index;
		p->pid = sfs_load_relaxed(&d->cd_pid);
		p->state = sfs_load_relaxed(&d->cd_state);
		p->child = 1;
		p->restarts = sfs_load_relaxed(&d->cd_restarts);
		p->hang_kills = sfs_load_relaxed(&d->cd_hang_kills);
		p->cpu = d->cd_cpu;
		p->heartbeat_age_ms = -1;
		sl = slot_of(segs, nsegs, p->pid, &node);
		p->node = node;
		if (sl)
			proc_from_slot(p, sl, s->taken_ns);
	}
}

static void take_cache(struct sfs_wctl *ctl, struct sup_snap_worker *w)
{
	struct sfs_vcache *c;
	struct sfs_vcache_stats st;

	if (!ctl->wc_cache_off || !ctl->wc_cache_bytes ||
	    sfs_vcache_attach((char *)ctl + ctl->wc_cache_off, ctl->wc_cache_bytes, &c))
		return;
	sfs_vcache_stats(c, &st);
	w->has_cache = 1;
	w->vc_hits = st.hits;
	w->vc_neg_hits = st.neg_hits;
	w->vc_misses = st.misses;
	w->vc_entries = st.entries;
	w->vc_bytes = st.bytes_used;
	w->vc_capacity = st.capacity;
	w->vc_evictions = st.evictions;
}

static struct sup_snap_worker *worker_row(struct sup_snap *s, uint32_t w)
{
	for (int i = 0; i < s->nworkers; i++)
		if (s->workers[i].worker == w)
			return &s->workers[i];
	if (s->nworkers == SUP_SNAP_MAX_WORKERS)
		return NULL;
	memset(&s->workers[s->nworkers], 0, sizeof(s->workers[0]));
	s->workers[s->nworkers].worker = w;
	return &s->workers[s->nworkers++];
}

static void take_workers(struct sfs_seg *segs, int nsegs, struct sup_snap *s)
{
	for (int n = 0; n < nsegs; n++)
		for (uint32_t w = 0; w < SFS_MAX_PROCS; w++) {
			struct sfs_wctl *ctl;
			struct sfs_ring *ring;
			struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
			struct sup_snap_worker *r;

			if (sfs_wctl_attach(&segs[n], w, &ctl, &ring, bufs) || !(r = worker_row(s, w)))
				continue;
			r->node = n;
			r->has_ctl = 1;
			r->kg_start = ctl->wc_kg_start;
			r->kg_end = ctl->wc_kg_end;
			r->nbufs = ctl->wc_nbufs;
			for (uint32_t i = 0; i < ctl->wc_nbufs && i < SFS_WCTL_MAX_BUFS; i++) {
				uint32_t st = sfs_load_acquire(&ctl->wc_buf[i].cb_state);

				r->nfree += st == SFS_BUF_FREE;
				r->nactive += st == SFS_BUF_ACTIVE;
				r->nsealed += st == SFS_BUF_SEALED;
				r->nretiring += st == SFS_BUF_RETIRING;
			}
			r->buf_bytes = ctl->wc_buf_bytes;
			r->seq = sfs_load_relaxed(&ctl->wc_seq);
			r->flushed_seq = sfs_load_acquire(&ctl->wc_flushed_seq);
			r->barrier = sfs_load_relaxed(&ctl->wc_barrier);
			r->barriers = sfs_load_relaxed(&ctl->wc_barriers);
			r->spills = sfs_load_relaxed(&ctl->wc_spills);
			r->stalls = sfs_load_relaxed(&ctl->wc_stalls);
			r->stall_ns = sfs_load_relaxed(&ctl->wc_stall_ns);
			r->sealed_bytes = sfs_load_relaxed(&ctl->wc_sealed_bytes);
			r->restarts = sfs_load_relaxed(&ctl->wc_restarts);
			r->flushes = sfs_load_relaxed(&ctl->wc_flushes);
			r->flush_entries = sfs_load_relaxed(&ctl->wc_flush_entries);
			r->flush_ns = sfs_load_relaxed(&ctl->wc_flush_ns);
			r->ttl_dropped = sfs_load_relaxed(&ctl->wc_ttl_dropped);
			take_cache(ctl, r);
		}
}

/* A query job's runtime report (region "job" of node 0). */
static void take_job(struct sfs_seg *seg0, struct sup_snap *s)
{
	uint64_t off, size;
	const struct rt_job *j;

	if (sfs_seg_region_find(seg0, RT_JOB_REGION, &off, &size) || size < sizeof(*j))
		return;
	j = sfs_seg_ptr(seg0, off);
	if (j->rj_magic != RT_JOB_MAGIC || j->rj_version != RT_JOB_VERSION)
		return;
	s->has_job = 1;
	s->job_events = j->rj_events;
	snprintf(s->query, sizeof(s->query), "%s", j->rj_query);
	if (!s->backend[0] || strcmp(j->rj_backend, "rocksdb-direct") == 0)
		snprintf(s->backend, sizeof(s->backend), "%s", j->rj_backend);
	if (!s->data_dir[0])
		snprintf(s->data_dir, sizeof(s->data_dir), "%s", j->rj_data_dir);
	for (uint32_t w = 0; w < j->rj_workers && w < RT_MAX_WORKERS; w++) {
		const struct rt_worker_status *ws = &j->rj_ws[w];
		struct sup_snap_worker *r = worker_row(s, w);

		if (!r)
			continue;
		r->has_rt = 1;
		r->events = sfs_load_relaxed(&ws->rw_events);
		r->records = sfs_load_relaxed(&ws->rw_records);
		r->rt_barriers = sfs_load_relaxed(&ws->rw_barriers);
		r->seal_ns = sfs_load_relaxed(&ws->rw_seal_ns);
		r->seal_max_ns = sfs_load_relaxed(&ws->rw_seal_max_ns);
		r->seal_cpu_ns = sfs_load_relaxed(&ws->rw_seal_cpu_ns);
		r->rows = sfs_load_relaxed(&ws->rw_rows);
		r->sink_epoch = sfs_load_relaxed(&ws->rw_sink_epoch);
		r->sink_committed = sfs_load_relaxed(&ws->rw_sink_committed);
		r->rt_state = sfs_load_acquire(&ws->rw_state);
	}
}

static void take_ckpt(struct sfs_seg *seg0, struct sup_snap *s)
{
	struct sfs_ckpt *ck;
	uint64_t count;

	if (sfs_ckpt_find(seg0, &ck))
		return;
	s->has_ckpt = 1;
	count = sfs_load_relaxed(&ck->ck_count);
	s->ck_count = count;
	s->ck_aborted = sfs_load_relaxed(&ck->ck_aborted);
	s->ck_last_ns = sfs_load_relaxed(&ck->ck_last_ns);
	s->ck_max_ns = sfs_load_relaxed(&ck->ck_max_ns);
	s->ck_links = sfs_load_relaxed(&ck->ck_links);
	s->ck_refs = sfs_load_relaxed(&ck->ck_refs);
	s->ck_done = sfs_load_acquire(&ck->ck_done);
	s->ck_requested = sfs_load_relaxed(&ck->ck_barrier_req);
	s->ck_interval_ms = ck->ck_interval_ms == SFS_CKPT_ENGINE ? 0 : ck->ck_interval_ms;
	s->ck_restored_id = ck->ck_restored_id;
	s->ck_recoveries = ck->ck_recoveries;
	snprintf(s->data_dir, sizeof(s->data_dir), "%s", ck->ck_data_dir);
	/* ck_us[i % N] is written before ck_count counts i. */
	for (s->ck_nrecent = 0; s->ck_nrecent < 8 && s->ck_nrecent < count &&
				s->ck_nrecent < SFS_CKPT_DURATIONS; s->ck_nrecent++)
		s->ck_recent_us[s->ck_nrecent] =
			ck->ck_us[(count - 1 - s->ck_nrecent) % SFS_CKPT_DURATIONS];
}

void sup_snap_take(struct sfs_seg *segs, int nsegs, struct sup_snap *s)
{
	const struct sfs_seg_hdr *h0 = segs[0].hdr;

	memset(s, 0, sizeof(*s));
	s->taken_ns = sfs_now_ns();
	snprintf(s->job, sizeof(s->job), "%s", h0->sh_job);
	snprintf(s->backend, sizeof(s->backend), "%s", h0->sh_backend);
	s->generation = h0->sh_generation;
	s->nsegs = nsegs;
	for (int n = 0; n < nsegs; n++) {
		const struct sfs_seg_hdr *h = segs[n].hdr;
		struct sup_snap_seg *g = &s->segs[n];

		g->node = n;
		snprintf(g->path, sizeof(g->path), "%s", segs[n].path);
		g->size = h->sh_size;
		g->used = sfs_seg_used(&segs[n]);
		g->header = h->sh_data_off;
		g->page_size = h->sh_page_size;
		g->huge = !!(h->sh_flags & SFS_SEG_HUGE);
		g->owner_pid = h->sh_owner_pid;
		for (int i = 0; i < SFS_MAX_REGIONS; i++)
			g->regions += sfs_load_acquire(&h->sh_regions[i].rd_state) ==
				      SFS_REGION_READY;
	}
	take_procs(segs, nsegs, s);
	take_workers(segs, nsegs, s);
	take_ckpt(&segs[0], s);
	take_job(&segs[0], s);
}
