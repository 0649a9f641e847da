/*
 * metrics.c — a running group's snapshot (supervisor/snapshot.c, where
 * each number comes from) as the Prometheus text exposition format 0.0.4
 * (sup_metrics_write): the one builder of `sfs stat --prometheus` and of
 * `sfs run --metrics-addr`'s /metrics.
 *
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

#include "shm/proc.h"
#include "supervisor/metrics.h"

typedef unsigned long long ull;

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
