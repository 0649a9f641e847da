/*
 * stat.c — `sfs stat`: attach to a running group as an observer (no slot
 * taken) and print its processes and segments, as text or one JSON object.
 * Every number comes from one snapshot (supervisor/snapshot.h, the one
 * reader `sfs top` and the metrics use too): a racy read of fields the
 * owners keep updating, good for humans and tests, not a synchronisation
 * point.  Only the flush target's own lines are read from the segment
 * directly (its stat hook).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "supervisor/metrics.h"
#include "supervisor/snapshot.h"
#include "supervisor/sup.h"
#include "store/target.h"

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

/* Keyed state per worker region: buffers, barriers, back-pressure, flushes
 * (rocksdb-direct's workers have none: not listed). */
static void print_workers(const struct sup_snap *s, int json)
{
	int first = 1;

	for (int i = 0; i < s->nworkers; i++) {
		const struct sup_snap_worker *r = &s->workers[i];

		if (!r->has_ctl)
			continue;
		if (json) {
			printf("%s{\"worker\": %u, \"node\": %d, \"key_groups\": [%u, %u], "
			       "\"buffers\": %u, \"buffers_free\": %u, \"buffers_sealed\": %u, "
			       "\"buffers_retiring\": %u, \"buffer_bytes\": %llu, "
			       "\"seq\": %llu, \"flushed_seq\": %llu, \"barrier\": %llu, "
			       "\"spills\": %llu, \"stalls\": %llu, \"stall_ms\": %llu, "
			       "\"flushes\": %llu, \"flushed_entries\": %llu, "
			       "\"ttl_dropped\": %llu, \"restarts\": %llu}",
			       first ? "" : ", ", r->worker, r->node, r->kg_start, r->kg_end,
			       r->nbufs, r->nfree, r->nsealed, r->nretiring,
			       (unsigned long long)r->buf_bytes, (unsigned long long)r->seq,
			       (unsigned long long)r->flushed_seq, (unsigned long long)r->barrier,
			       (unsigned long long)r->spills, (unsigned long long)r->stalls,
			       (unsigned long long)(r->stall_ns / 1000000),
			       (unsigned long long)r->flushes, (unsigned long long)r->flush_entries,
			       (unsigned long long)r->ttl_dropped, (unsigned long long)r->restarts);
		} else {
			if (first)
				printf("\n%-6s %4s %9s %7s %8s %8s %8s %6s %6s %9s\n", "WORKER", "NODE",
				       "KEYGROUPS", "BUFFERS", "SEQ", "FLUSHED", "BARRIER", "SPILLS",
				       "STALLS", "STALL_MS");
			printf("%-6u %4d %4u-%-4u %2u/%u/%u %8llu %8llu %8llu %6llu %6llu %9llu\n",
			       r->worker, r->node, r->kg_start, r->kg_end, r->nfree, r->nsealed,
			       r->nbufs, (unsigned long long)r->seq,
			       (unsigned long long)r->flushed_seq, (unsigned long long)r->barrier,
			       (unsigned long long)r->spills, (unsigned long long)r->stalls,
			       (unsigned long long)(r->stall_ns / 1000000));
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
	struct sfs_seg segs[SUP_SNAP_MAX_NODES];
	static struct sup_snap snap;	/* 50 KiB: off the stack */
	const struct sup_snap *s = &snap;
	const char *job = NULL;
	int json = 0, prom = 0, o, nsegs = 0;

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
	if (sup_snap_attach(job, segs, &nsegs)) {
		fprintf(stderr, "sfs stat: %s\n", sfs_last_error());
		return 1;
	}
	sup_snap_take(segs, nsegs, &snap);

	if (json) {
		printf("{\"job\": \"%s\", \"generation\": %llu, \"processes\": [", job,
		       (unsigned long long)s->generation);
		for (int i = 0; i < s->nprocs; i++) {
			const struct sup_snap_proc *p = &s->procs[i];

			printf("%s{\"role\": \"%s\", \"index\": %u, \"pid\": %d, \"state\": \"%s\", "
			       "\"restarts\": %u, \"hang_kills\": %u, \"node\": %d, \"cpu\": %d, "
			       "\"heartbeat_age_ms\": %lld, \"qsbr\": %llu}",
			       i ? ", " : "", p->role, p->index, p->pid, sup_child_state_name(p->state),
			       p->restarts, p->hang_kills, p->node, p->cpu,
			       (long long)p->heartbeat_age_ms, (unsigned long long)p->qsbr);
		}
		printf("], \"segments\": [");
		for (int n = 0; n < s->nsegs; n++) {
			const struct sup_snap_seg *g = &s->segs[n];

			printf("%s{\"node\": %d, \"path\": \"%s\", \"size\": %llu, \"used\": %llu, "
			       "\"header\": %llu, \"regions\": %u, \"page_size\": %llu, "
			       "\"huge_pages\": %s, \"owner_pid\": %d}",
			       n ? ", " : "", g->node, g->path, (unsigned long long)g->size,
			       (unsigned long long)g->used, (unsigned long long)g->header, g->regions,
			       (unsigned long long)g->page_size, g->huge ? "true" : "false",
			       g->owner_pid);
		}
		printf("], \"workers\": [");
		print_workers(s, 1);
		printf("]}\n");
	} else {
		printf("job %s (generation %llu)\n", job, (unsigned long long)s->generation);
		printf("%-13s %5s %8s %-9s %8s %5s %4s %4s %13s\n", "ROLE", "INDEX", "PID", "STATE",
		       "RESTARTS", "HANGS", "NODE", "CPU", "HEARTBEAT_AGE");
		for (int i = 0; i < s->nprocs; i++) {
			const struct sup_snap_proc *p = &s->procs[i];
			char age[32];

			if (p->heartbeat_age_ms < 0)
				snprintf(age, sizeof(age), "-");
			else
				snprintf(age, sizeof(age), "%lld ms", (long long)p->heartbeat_age_ms);
			printf("%-13s %5u %8d %-9s %8u %5u %4d %4d %13s\n", p->role, p->index, p->pid,
			       sup_child_state_name(p->state), p->restarts, p->hang_kills, p->node,
			       p->cpu, age);
		}
		printf("\n%-4s %-28s %10s %10s %7s %s\n", "NODE", "SEGMENT", "SIZE", "USED",
		       "REGIONS", "PAGES");
		for (int n = 0; n < s->nsegs; n++) {
			const struct sup_snap_seg *g = &s->segs[n];

			printf("%-4d %-28s %8llu M %8llu K %7u %s\n", g->node, g->path,
			       (unsigned long long)(g->size >> 20), (unsigned long long)(g->used >> 10),
			       g->regions, g->huge ? "huge" : "4 KiB");
		}
		print_workers(s, 0);
		/* Not in the snapshot: text the target's own stat hook prints
		 * from the segment, so read while still attached. */
		print_target(&segs[0]);
	}
	sup_snap_detach(segs, nsegs);
	return 0;
}
