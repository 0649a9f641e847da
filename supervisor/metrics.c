/*
 * metrics.c — what a running group's shared memory says about it, as one
 * snapshot (sup_snap_take) and as the Prometheus text exposition format
 * 0.0.4 (sup_metrics_write): the one builder of `sfs stat --prometheus`
 * and of `sfs run --metrics-addr`'s /metrics, and the source of `sfs top`.
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
 * Not here, because no other process can read them: a worker's state
 * operations by kind (the state API counts none; records are counted per
 * worker only, rw_records), the flush targets' own work (table files per
 * level, merge bytes, RocksDB's commits: each target keeps them in the
 * compactor's memory and prints them through its stat hook as text), and
 * checkpoint sizes (on disk, in each checkpoint's _metadata: `sfs
 * checkpoints`; `sfs top` reads the newest).
 *
 * Counters reset when the group recovers (its segments are made anew) or a
 * worker restarts (its value cache is re-initialised): Prometheus treats a
 * decrease of a counter as a reset, which is what these are.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "runtime/job.h"
#include "shm/ckpt.h"
#include "shm/proc.h"
#include "supervisor/metrics.h"
#include "supervisor/nodes.h"
#include "supervisor/sup.h"
#include "worker/state.h"
#include "worker/vcache.h"
#include "worker/wctl.h"

typedef unsigned long long ull;

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

/* ---- the exposition ------------------------------------------------------ */

/* One family's header: HELP (its text escapes nothing: ours have no
 * backslash or newline) and TYPE. */
static void fam(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values: job names are [A-Za-z0-9_.-], roles and states are ours;
 * escaped anyway, as the format asks (backslash, quote, newline). */
static void lv(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

/* A per-worker family over the workers that have @has (offset of the flag
 * in struct sup_snap_worker). */
#define WFAM(f, s, flag, name, type, help, fmt, expr)                                    \
	do {                                                                              \
		int first_ = 1;                                                           \
		for (int i_ = 0; i_ < (s)->nworkers; i_++) {                              \
			const struct sup_snap_worker *w = &(s)->workers[i_];              \
			if (!w->flag)                                                     \
				continue;                                                 \
			if (first_)                                                       \
				fam(f, name, type, help);                                 \
			first_ = 0;                                                       \
			fprintf(f, "%s{job=\"", name);                                    \
			lv(f, (s)->job);                                                  \
			fprintf(f, "\",worker=\"%u\"} " fmt "\n", w->worker, expr);       \
		}                                                                         \
	} while (0)

/* A group-wide sample of one family with only the job label: a count
 * (exact) or, with @ns, nanoseconds written as seconds. */
static void one_x(FILE *f, const struct sup_snap *s, const char *name, const char *type,
		  const char *help, uint64_t v, int ns)
{
	fam(f, name, type, help);
	fprintf(f, "%s{job=\"", name);
	lv(f, s->job);
	if (ns)
		fprintf(f, "\"} %.9f\n", secs(v));
	else
		fprintf(f, "\"} %llu\n", (ull)v);
}
#define one(f, s, name, type, help, v) one_x(f, s, name, type, help, v, 0)
#define one_ns(f, s, name, type, help, v) one_x(f, s, name, type, help, v, 1)

static void write_procs(const struct sup_snap *s, FILE *f)
{
	static const char *const fams[][3] = {
		{ "sfs_process_state", "gauge",
		  "1 for the state a process of the group is in (children: the supervisor's "
		  "view; the supervisor and clients: running while attached)" },
		{ "sfs_process_pid", "gauge", "Current pid of the process (0: none)" },
		{ "sfs_process_restarts_total", "counter",
		  "Restarts of a child by the supervisor" },
		{ "sfs_process_hang_kills_total", "counter",
		  "Kills of a child whose heartbeat stopped" },
		{ "sfs_process_heartbeat_age_seconds", "gauge",
		  "Time since the process last beat (registered processes only)" },
		{ "sfs_process_cpu", "gauge", "CPU a child is pinned to (-1: none)" },
		{ "sfs_process_node", "gauge", "NUMA node of the segment the process attached" },
		{ "sfs_process_qsbr_token", "gauge",
		  "Last QSBR token the process reported (0: offline)" },
	};

	for (unsigned k = 0; k < sizeof(fams) / sizeof(fams[0]); k++) {
		fam(f, fams[k][0], fams[k][1], fams[k][2]);
		for (int i = 0; i < s->nprocs; i++) {
			const struct sup_snap_proc *p = &s->procs[i];

			if ((k == 2 || k == 3 || k == 5) && !p->child)
				continue;
			if (k == 4 && p->heartbeat_age_ms < 0)
				continue;
			for (uint32_t st = SFS_CHILD_STARTING; st <= SFS_CHILD_FAILED; st++) {
				if (k != 0 && st != SFS_CHILD_STARTING)
					break;
				fprintf(f, "%s{job=\"", fams[k][0]);
				lv(f, s->job);
				fprintf(f, "\",role=\"%s\",index=\"%u\"", p->role, p->index);
				if (k == 0)
					fprintf(f, ",state=\"%s\"} %d\n", sup_child_state_name(st),
						p->state == st);
				else if (k == 1)
					fprintf(f, "} %d\n", p->pid);
				else if (k == 2)
					fprintf(f, "} %u\n", p->restarts);
				else if (k == 3)
					fprintf(f, "} %u\n", p->hang_kills);
				else if (k == 4)
					fprintf(f, "} %.3f\n", (double)p->heartbeat_age_ms / 1e3);
				else if (k == 5)
					fprintf(f, "} %d\n", p->cpu);
				else if (k == 6)
					fprintf(f, "} %d\n", p->node);
				else
					fprintf(f, "} %llu\n", (ull)p->qsbr);
			}
		}
	}
}

static void write_segments(const struct sup_snap *s, FILE *f)
{
	static const char *const fams[][3] = {
		{ "sfs_segment_size_bytes", "gauge", "Bytes mapped of the node's segment" },
		{ "sfs_segment_used_bytes", "gauge", "Bytes of the segment carved for regions" },
		{ "sfs_segment_header_bytes", "gauge", "Bytes of the segment's header" },
		{ "sfs_segment_regions", "gauge", "Regions ready in the segment" },
		{ "sfs_segment_page_size_bytes", "gauge", "Page size backing the segment" },
		{ "sfs_segment_huge_pages", "gauge", "1 when the segment lives on hugetlbfs" },
		{ "sfs_segment_owner_pid", "gauge", "Pid of the supervisor that created it" },
	};

	fam(f, "sfs_segment_info", "gauge", "The node's segment file");
	for (int n = 0; n < s->nsegs; n++) {
		fprintf(f, "sfs_segment_info{job=\"");
		lv(f, s->job);
		fprintf(f, "\",node=\"%d\",path=\"", s->segs[n].node);
		lv(f, s->segs[n].path);
		fprintf(f, "\"} 1\n");
	}

	for (unsigned k = 0; k < sizeof(fams) / sizeof(fams[0]); k++) {
		fam(f, fams[k][0], fams[k][1], fams[k][2]);
		for (int n = 0; n < s->nsegs; n++) {
			const struct sup_snap_seg *g = &s->segs[n];
			uint64_t v = k == 0 ? g->size : k == 1 ? g->used : k == 2 ? g->header :
				     k == 3 ? g->regions : k == 4 ? g->page_size :
				     k == 5 ? (uint64_t)g->huge : (uint64_t)g->owner_pid;

			fprintf(f, "%s{job=\"", fams[k][0]);
			lv(f, s->job);
			fprintf(f, "\",node=\"%d\"} %llu\n", g->node, (ull)v);
		}
	}
}

static void write_workers(const struct sup_snap *s, FILE *f)
{
	static const char *const bstate[] = { "free", "active", "sealed", "retiring" };
	int any = 0;

	for (int i = 0; i < s->nworkers; i++)
		any |= s->workers[i].has_ctl;
	if (any) {
		fam(f, "sfs_worker_buffers", "gauge",
		    "Write buffers of a worker by state (sealed: waiting for the compactor)");
		for (int i = 0; i < s->nworkers; i++) {
			const struct sup_snap_worker *w = &s->workers[i];
			const uint32_t n[] = { w->nfree, w->nactive, w->nsealed, w->nretiring };

			if (!w->has_ctl)
				continue;
			for (int k = 0; k < 4; k++) {
				fprintf(f, "sfs_worker_buffers{job=\"");
				lv(f, s->job);
				fprintf(f, "\",worker=\"%u\",state=\"%s\"} %u\n", w->worker,
					bstate[k], n[k]);
			}
		}
	}
	WFAM(f, s, has_ctl, "sfs_worker_node", "gauge",
	     "NUMA node of the worker's region", "%d", w->node);
	WFAM(f, s, has_ctl, "sfs_worker_buffer_size_bytes", "gauge",
	     "Bytes of each write buffer of the worker", "%llu", (ull)w->buf_bytes);
	WFAM(f, s, has_ctl, "sfs_worker_key_group_first", "gauge",
	     "First key group the worker owns", "%u", w->kg_start);
	WFAM(f, s, has_ctl, "sfs_worker_key_group_last", "gauge",
	     "Last key group the worker owns (inclusive)", "%u", w->kg_end);
	WFAM(f, s, has_ctl, "sfs_worker_buffer_seals_total", "counter",
	     "Buffers the worker sealed (its seal sequence number)", "%llu", (ull)w->seq);
	WFAM(f, s, has_ctl, "sfs_worker_barrier_seals_total", "counter",
	     "Buffers sealed at a checkpoint barrier", "%llu", (ull)w->barriers);
	WFAM(f, s, has_ctl, "sfs_worker_spills_total", "counter",
	     "Buffers sealed early because they filled between barriers", "%llu",
	     (ull)w->spills);
	WFAM(f, s, has_ctl, "sfs_worker_stalls_total", "counter",
	     "Back-pressure waits for a free buffer", "%llu", (ull)w->stalls);
	WFAM(f, s, has_ctl, "sfs_worker_stall_seconds_total", "counter",
	     "Time spent in back-pressure waits", "%.9f", secs(w->stall_ns));
	WFAM(f, s, has_ctl, "sfs_worker_sealed_bytes_total", "counter",
	     "Arena bytes of every buffer the worker sealed", "%llu", (ull)w->sealed_bytes);
	WFAM(f, s, has_ctl, "sfs_worker_region_reopens_total", "counter",
	     "Opens of the worker's region that found it (worker restarts)", "%llu",
	     (ull)w->restarts);
	WFAM(f, s, has_ctl, "sfs_worker_last_barrier", "gauge",
	     "Id of the last checkpoint barrier the worker sealed", "%llu", (ull)w->barrier);
	WFAM(f, s, has_ctl, "sfs_worker_flushed_seq", "gauge",
	     "Seal sequence number the compactor flushed up to", "%llu", (ull)w->flushed_seq);
	WFAM(f, s, has_ctl, "sfs_compactor_queue_buffers", "gauge",
	     "Sealed buffers of the worker waiting for the compactor's flush", "%u",
	     w->nsealed);
	WFAM(f, s, has_ctl, "sfs_compactor_flushes_total", "counter",
	     "Buffers of the worker the compactor flushed", "%llu", (ull)w->flushes);
	WFAM(f, s, has_ctl, "sfs_compactor_flushed_entries_total", "counter",
	     "Entries of the worker's buffers the compactor flushed", "%llu",
	     (ull)w->flush_entries);
	WFAM(f, s, has_ctl, "sfs_compactor_ttl_dropped_entries_total", "counter",
	     "Entries of TTL states the compactor dropped as expired at flush", "%llu",
	     (ull)w->ttl_dropped);
	WFAM(f, s, has_ctl, "sfs_compactor_flush_seconds_total", "counter",
	     "Time the compactor spent flushing the worker's buffers", "%.9f",
	     secs(w->flush_ns));
	WFAM(f, s, has_cache, "sfs_value_cache_hits_total", "counter",
	     "Value-cache gets that found a value (reset when the worker restarts)", "%llu",
	     (ull)w->vc_hits);
	WFAM(f, s, has_cache, "sfs_value_cache_negative_hits_total", "counter",
	     "Value-cache gets that found the key known absent", "%llu", (ull)w->vc_neg_hits);
	WFAM(f, s, has_cache, "sfs_value_cache_misses_total", "counter",
	     "Value-cache gets that found nothing", "%llu", (ull)w->vc_misses);
	WFAM(f, s, has_cache, "sfs_value_cache_evictions_total", "counter",
	     "Value-cache entries evicted", "%llu", (ull)w->vc_evictions);
	WFAM(f, s, has_cache, "sfs_value_cache_entries", "gauge",
	     "Keys in the value cache (negative entries included)", "%llu",
	     (ull)w->vc_entries);
	WFAM(f, s, has_cache, "sfs_value_cache_used_bytes", "gauge",
	     "Bytes of the value cache's live records", "%llu", (ull)w->vc_bytes);
	WFAM(f, s, has_cache, "sfs_value_cache_capacity_bytes", "gauge",
	     "Bytes of the value cache's log", "%llu", (ull)w->vc_capacity);
	/* The runtime's report (query jobs). */
	WFAM(f, s, has_rt, "sfs_worker_events_total", "counter",
	     "Source events the worker generated", "%llu", (ull)w->events);
	WFAM(f, s, has_rt, "sfs_worker_records_total", "counter",
	     "Records the worker's operators processed", "%llu", (ull)w->records);
	WFAM(f, s, has_rt, "sfs_worker_barriers_total", "counter",
	     "Checkpoint barriers the worker's runtime sealed", "%llu", (ull)w->rt_barriers);
	WFAM(f, s, has_rt, "sfs_worker_barrier_seconds_total", "counter",
	     "Wall time in barriers: seal, sink epoch, snapshot", "%.9f", secs(w->seal_ns));
	WFAM(f, s, has_rt, "sfs_worker_barrier_cpu_seconds_total", "counter",
	     "The worker's CPU time in barriers", "%.9f", secs(w->seal_cpu_ns));
	WFAM(f, s, has_rt, "sfs_worker_barrier_max_seconds", "gauge",
	     "The longest barrier of the worker", "%.9f", secs(w->seal_max_ns));
	WFAM(f, s, has_rt, "sfs_worker_result_rows", "gauge",
	     "Result rows in the worker's committed part", "%llu", (ull)w->rows);
	WFAM(f, s, has_rt, "sfs_worker_sink_epoch", "gauge",
	     "Last sink epoch whose changelog the worker wrote", "%llu", (ull)w->sink_epoch);
	WFAM(f, s, has_rt, "sfs_worker_sink_committed_epoch", "gauge",
	     "Last sink epoch the worker committed", "%llu", (ull)w->sink_committed);
	any = 0;
	for (int i = 0; i < s->nworkers; i++)
		any |= s->workers[i].has_rt;
	if (any) {
		static const char *const rst[] = { "starting", "running", "done", "failed" };

		fam(f, "sfs_worker_runtime_state", "gauge",
		    "1 for the state of the worker's operator runtime");
		for (int i = 0; i < s->nworkers; i++)
			for (uint32_t k = 0; k < 4 && s->workers[i].has_rt; k++) {
				fprintf(f, "sfs_worker_runtime_state{job=\"");
				lv(f, s->job);
				fprintf(f, "\",worker=\"%u\",state=\"%s\"} %d\n",
					s->workers[i].worker, rst[k], s->workers[i].rt_state == k);
			}
	}
}

void sup_metrics_write(const struct sup_snap *s, FILE *f)
{
	fam(f, "sfs_job_info", "gauge",
	    "The group: its flush target (backend) and query (\"\" for none)");
	fprintf(f, "sfs_job_info{job=\"");
	lv(f, s->job);
	fprintf(f, "\",backend=\"");
	lv(f, s->backend[0] ? s->backend : "none");
	fprintf(f, "\",query=\"");
	lv(f, s->query);
	fprintf(f, "\"} 1\n");
	one(f, s, "sfs_job_generation", "gauge",
	    "Generation of the segments (one more at each start of the job's name)",
	    s->generation);
	if (s->has_job)
		one(f, s, "sfs_job_events", "gauge", "Events of the whole stream",
		    s->job_events);
	write_procs(s, f);
	write_segments(s, f);
	write_workers(s, f);
	if (s->has_ckpt) {
		one(f, s, "sfs_recoveries_total", "counter",
		    "Restarts of the whole job from its last checkpoint",
		    s->ck_recoveries);
		one(f, s, "sfs_checkpoints_total", "counter",
		    "Checkpoints completed by this incarnation of the group",
		    s->ck_count);
		one(f, s, "sfs_checkpoints_aborted_total", "counter", "Checkpoints aborted",
		    s->ck_aborted);
		one(f, s, "sfs_checkpoint_files_linked_total", "counter",
		    "State files linked or copied into checkpoint storage", s->ck_links);
		one(f, s, "sfs_checkpoint_files_referenced_total", "counter",
		    "State files riding in a checkpoint as references to earlier ones",
		    s->ck_refs);
		one_ns(f, s, "sfs_checkpoint_last_duration_seconds", "gauge",
		       "Duration of the last completed checkpoint (barrier to _metadata)",
		       s->ck_last_ns);
		one_ns(f, s, "sfs_checkpoint_max_duration_seconds", "gauge",
		       "The longest checkpoint of this incarnation", s->ck_max_ns);
		one(f, s, "sfs_checkpoint_last_completed_id", "gauge",
		    "Id of the last completed checkpoint (0: none)", s->ck_done);
		one(f, s, "sfs_checkpoint_requested_id", "gauge",
		    "Id of the last barrier requested", s->ck_requested);
		one(f, s, "sfs_checkpoint_restored_id", "gauge",
		    "Checkpoint this incarnation started from (0: fresh)",
		    s->ck_restored_id);
		one_ns(f, s, "sfs_checkpoint_interval_seconds", "gauge",
		       "Period of the checkpoint barriers", s->ck_interval_ms * 1000000ull);
	}
}

int sup_metrics_text(const char *job, FILE *out)
{
	struct sfs_seg segs[SUP_SNAP_MAX_NODES];
	static __thread struct sup_snap snap;	/* 50 KiB: not on a server thread's stack */
	int nsegs, rc = sup_snap_attach(job, segs, &nsegs);

	if (rc)
		return rc;
	sup_snap_take(segs, nsegs, &snap);
	sup_snap_detach(segs, nsegs);
	sup_metrics_write(&snap, out);
	return 0;
}
