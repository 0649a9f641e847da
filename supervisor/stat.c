/*
 * stat.c — `sfs stat`: attach to a running group as an observer (no slot
 * taken) and print its processes and segments, as text or one JSON object.
 * The view is a racy snapshot of fields the owners keep updating: good for
 * humans and tests, not a synchronisation point.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/procinfo.h"
#include "shm/proc.h"
#include "worker/state.h"
#include "supervisor/metrics.h"
#include "supervisor/nodes.h"
#include "supervisor/sup.h"
#include "store/target.h"

#define MAX_NODES 16

static const char *child_state_name(uint32_t st)
{
	static const char *const n[] = {
		[SFS_CHILD_UNUSED] = "unused",   [SFS_CHILD_STARTING] = "starting",
		[SFS_CHILD_RUNNING] = "running", [SFS_CHILD_BACKOFF] = "backoff",
		[SFS_CHILD_STOPPING] = "stopping", [SFS_CHILD_STOPPED] = "stopped",
		[SFS_CHILD_FAILED] = "failed",
	};
	return st <= SFS_CHILD_FAILED ? n[st] : "?";
}

struct proc_row {
	const char *role;
	uint32_t index;
	int pid;
	const char *state;
	uint32_t restarts, hang_kills;
	int cpu, node;
	int64_t heartbeat_age_ms;   /* -1: not registered */
	uint64_t qsbr;
};

/* The LIVE slot of @pid in any segment. */
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

static void fill_from_slot(struct proc_row *r, const struct sfs_proc_slot *sl, uint64_t now)
{
	uint64_t beat = sfs_load_relaxed(&sl->ps_heartbeat);

	r->heartbeat_age_ms = now > beat ? (int64_t)((now - beat) / 1000000ull) : 0;
	r->qsbr = sfs_load_relaxed(&sl->ps_qsbr);
}

/* The flush target, and what it reports of itself (its ops' stat). */
static void print_target(const struct sfs_seg *s)
{
	const struct sfs_target_ops *t = sfs_target_of(s);
	const struct sfs_seg_hdr *h = s->hdr;

	printf("\nTARGET %s%s%s\n", t ? t->name : h->sh_backend, h->sh_data_dir[0] ? " at " : "",
	       h->sh_data_dir);
	if (t && t->stat)
		t->stat(s, stdout);
}

/* Keyed state per worker region: buffers, barriers, back-pressure, flushes. */
static void print_workers(struct sfs_seg *segs, int nsegs, int json)
{
	int first = 1;

	for (int n = 0; n < nsegs; n++)
		for (uint32_t w = 0; w < SFS_MAX_PROCS; w++) {
			struct sfs_wctl *ctl;
			struct sfs_ring *ring;
			struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
			unsigned nfree = 0, nsealed = 0, nretiring = 0;

			if (sfs_wctl_attach(&segs[n], w, &ctl, &ring, bufs))
				continue;
			for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
				uint32_t st = sfs_load_acquire(&ctl->wc_buf[i].cb_state);

				nfree += st == SFS_BUF_FREE;
				nsealed += st == SFS_BUF_SEALED;
				nretiring += st == SFS_BUF_RETIRING;
			}
			if (json) {
				printf("%s{\"worker\": %u, \"node\": %d, \"key_groups\": [%u, %u], "
				       "\"buffers\": %u, \"buffers_free\": %u, \"buffers_sealed\": %u, "
				       "\"buffers_retiring\": %u, \"buffer_bytes\": %llu, "
				       "\"seq\": %llu, \"flushed_seq\": %llu, \"barrier\": %llu, "
				       "\"spills\": %llu, \"stalls\": %llu, \"stall_ms\": %llu, "
				       "\"flushes\": %llu, \"flushed_entries\": %llu, "
				       "\"ttl_dropped\": %llu, \"restarts\": %llu}",
				       first ? "" : ", ", w, n, ctl->wc_kg_start, ctl->wc_kg_end,
				       ctl->wc_nbufs, nfree, nsealed, nretiring,
				       (unsigned long long)ctl->wc_buf_bytes,
				       (unsigned long long)ctl->wc_seq,
				       (unsigned long long)ctl->wc_flushed_seq,
				       (unsigned long long)ctl->wc_barrier,
				       (unsigned long long)ctl->wc_spills,
				       (unsigned long long)ctl->wc_stalls,
				       (unsigned long long)(ctl->wc_stall_ns / 1000000),
				       (unsigned long long)ctl->wc_flushes,
				       (unsigned long long)ctl->wc_flush_entries,
				       (unsigned long long)ctl->wc_ttl_dropped,
				       (unsigned long long)ctl->wc_restarts);
			} else {
				if (first)
					printf("\n%-6s %4s %9s %7s %8s %8s %8s %6s %6s %9s\n", "WORKER",
					       "NODE", "KEYGROUPS", "BUFFERS", "SEQ", "FLUSHED",
					       "BARRIER", "SPILLS", "STALLS", "STALL_MS");
				printf("%-6u %4d %4u-%-4u %2u/%u/%u %8llu %8llu %8llu %6llu %6llu %9llu\n",
				       w, n, ctl->wc_kg_start, ctl->wc_kg_end, nfree, nsealed,
				       ctl->wc_nbufs, (unsigned long long)ctl->wc_seq,
				       (unsigned long long)ctl->wc_flushed_seq,
				       (unsigned long long)ctl->wc_barrier,
				       (unsigned long long)ctl->wc_spills,
				       (unsigned long long)ctl->wc_stalls,
				       (unsigned long long)(ctl->wc_stall_ns / 1000000));
			}
			first = 0;
		}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sfs stat --job NAME [--json | --prometheus]\n"
		   "Prints a running group's processes (role, pid, state, restarts,\n"
		   "heartbeat age) and its segments' usage.  --json: one object;\n"
		   "--prometheus: the Prometheus text format (what sfs run --metrics-addr\n"
		   "serves at /metrics).\n");
}

int sfs_cmd_stat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "json", no_argument, NULL, 'J' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sfs_seg segs[MAX_NODES];
	struct proc_row rows[SFS_MAX_CHILDREN + SFS_MAX_PROCS];
	const char *job = NULL;
	int json = 0, prom = 0, o, nsegs = 0, nrows = 0, want = sfs_node_count();
	uint64_t now;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'j': job = optarg; break;
		case 'J': json = 1; break;
		case 'P': prom = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !job) {
		fprintf(stderr, "sfs stat: %s\n", job ? "unexpected argument" : "--job is required");
		usage(stderr);
		return 2;
	}
	if (sfs_job_name_check(job)) {
		fprintf(stderr, "sfs stat: %s\n", sfs_last_error());
		return 2;
	}
	if (json && prom) {
		fprintf(stderr, "sfs stat: --json and --prometheus: one or the other\n");
		return 2;
	}
	if (prom) {
		if (sup_metrics_text(job, stdout)) {
			fprintf(stderr, "sfs stat: %s\n", sfs_last_error());
			return 1;
		}
		return 0;
	}
	for (int n = 0; n < want && n < MAX_NODES; n++) {
		if (sfs_seg_attach(job, n, &segs[n])) {
			fprintf(stderr, "sfs stat: %s\n", sfs_last_error());
			for (int k = 0; k < nsegs; k++)
				sfs_seg_detach(&segs[k]);
			return 1;
		}
		nsegs++;
	}
	now = sfs_now_ns();

	/* The supervisor and clients come from the process table; children
	 * from the supervisor's child table (it knows restarts and backoff). */
	for (int n = 0; n < nsegs; n++)
		for (int i = 0; i < SFS_MAX_PROCS; i++) {
			const struct sfs_proc_slot *sl = &segs[n].hdr->sh_procs[i];
			struct proc_row *r;

			if (!sfs_proc_slot_alive(sl) ||
			    (sl->ps_role != SFS_ROLE_SUPERVISOR && sl->ps_role != SFS_ROLE_CLIENT))
				continue;
			r = &rows[nrows++];
			memset(r, 0, sizeof(*r));
			r->role = sfs_role_name(sl->ps_role);
			r->index = sl->ps_index;
			r->pid = sl->ps_pid;
			r->state = "running";
			r->cpu = -1;
			r->node = n;
			fill_from_slot(r, sl, now);
		}
	for (uint32_t i = 0; i < sfs_load_relaxed(&segs[0].hdr->sh_nchildren) && i < SFS_MAX_CHILDREN;
	     i++) {
		const struct sfs_child_desc *d = &segs[0].hdr->sh_children[i];
		const struct sfs_proc_slot *sl;
		struct proc_row *r = &rows[nrows++];
		int node = 0;

		memset(r, 0, sizeof(*r));
		r->role = sfs_role_name(d->cd_role);
		r->index = d->cd_index;
		r->pid = sfs_load_relaxed(&d->cd_pid);
		r->state = child_state_name(sfs_load_relaxed(&d->cd_state));
		r->restarts = d->cd_restarts;
		r->hang_kills = d->cd_hang_kills;
		r->cpu = d->cd_cpu;
		r->heartbeat_age_ms = -1;
		sl = slot_of(segs, nsegs, r->pid, &node);
		r->node = node;
		if (sl)
			fill_from_slot(r, sl, now);
	}

	if (json) {
		printf("{\"job\": \"%s\", \"generation\": %llu, \"processes\": [", job,
		       (unsigned long long)segs[0].hdr->sh_generation);
		for (int i = 0; i < nrows; i++)
			printf("%s{\"role\": \"%s\", \"index\": %u, \"pid\": %d, \"state\": \"%s\", "
			       "\"restarts\": %u, \"hang_kills\": %u, \"node\": %d, \"cpu\": %d, "
			       "\"heartbeat_age_ms\": %lld, \"qsbr\": %llu}",
			       i ? ", " : "", rows[i].role, rows[i].index, rows[i].pid, rows[i].state,
			       rows[i].restarts, rows[i].hang_kills, rows[i].node, rows[i].cpu,
			       (long long)rows[i].heartbeat_age_ms, (unsigned long long)rows[i].qsbr);
		printf("], \"segments\": [");
		for (int n = 0; n < nsegs; n++) {
			const struct sfs_seg_hdr *h = segs[n].hdr;
			unsigned regions = 0;

			for (int i = 0; i < SFS_MAX_REGIONS; i++)
				regions += sfs_load_acquire(&h->sh_regions[i].rd_state) ==
					   SFS_REGION_READY;
			printf("%s{\"node\": %d, \"path\": \"%s\", \"size\": %llu, \"used\": %llu, "
			       "\"header\": %llu, \"regions\": %u, \"page_size\": %llu, "
			       "\"huge_pages\": %s, \"owner_pid\": %d}",
			       n ? ", " : "", n, segs[n].path, (unsigned long long)h->sh_size,
			       (unsigned long long)sfs_seg_used(&segs[n]),
			       (unsigned long long)h->sh_data_off, regions,
			       (unsigned long long)h->sh_page_size,
			       (h->sh_flags & SFS_SEG_HUGE) ? "true" : "false", h->sh_owner_pid);
		}
		printf("], \"workers\": [");
		print_workers(segs, nsegs, 1);
		printf("]}\n");
	} else {
		printf("job %s (generation %llu)\n", job,
		       (unsigned long long)segs[0].hdr->sh_generation);
		printf("%-13s %5s %8s %-9s %8s %5s %4s %4s %13s\n", "ROLE", "INDEX", "PID", "STATE",
		       "RESTARTS", "HANGS", "NODE", "CPU", "HEARTBEAT_AGE");
		for (int i = 0; i < nrows; i++) {
			char age[32];

			if (rows[i].heartbeat_age_ms < 0)
				snprintf(age, sizeof(age), "-");
			else
				snprintf(age, sizeof(age), "%lld ms", (long long)rows[i].heartbeat_age_ms);
			printf("%-13s %5u %8d %-9s %8u %5u %4d %4d %13s\n", rows[i].role,
			       rows[i].index, rows[i].pid, rows[i].state, rows[i].restarts,
			       rows[i].hang_kills, rows[i].node, rows[i].cpu, age);
		}
		printf("\n%-4s %-28s %10s %10s %7s %s\n", "NODE", "SEGMENT", "SIZE", "USED",
		       "REGIONS", "PAGES");
		for (int n = 0; n < nsegs; n++) {
			const struct sfs_seg_hdr *h = segs[n].hdr;
			unsigned regions = 0;

			for (int i = 0; i < SFS_MAX_REGIONS; i++)
				regions += sfs_load_acquire(&h->sh_regions[i].rd_state) ==
					   SFS_REGION_READY;
			printf("%-4d %-28s %8llu M %8llu K %7u %s\n", n, segs[n].path,
			       (unsigned long long)(h->sh_size >> 20),
			       (unsigned long long)(sfs_seg_used(&segs[n]) >> 10), regions,
			       (h->sh_flags & SFS_SEG_HUGE) ? "huge" : "4 KiB");
		}
	}
	if (!json)
		print_workers(segs, nsegs, 0);
	if (!json)
		print_target(&segs[0]);
	for (int n = 0; n < nsegs; n++)
		sfs_seg_detach(&segs[n]);
	return 0;
}
