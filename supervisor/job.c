/*
 * job.c — `sfs run --query`: the supervisor's side of a query job.
 *
 * Before any worker starts it checks the arguments (one-line errors, exit
 * 2, nothing created or overwritten), then writes the job description and
 * carves the exchange channels (runtime/job.h) into node 0's segment.
 * While the group runs it requests a barrier every --checkpoint-interval
 * (the checkpointer takes this over with checkpoints), shows progress on a
 * terminal, and watches the workers' status lines: all done → merge the
 * result parts into --output and print the summary; one failed → stop the
 * group and say why.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "runtime/backend.h"
#include "runtime/chan.h"
#include "runtime/job.h"
#include "runtime/query.h"
#include "runtime/sink.h"
#include "supervisor/sup.h"
#include "worker/state.h"

#define MS 1000000ull

static struct rt_job *job;
static struct sfs_seg *job_seg;
static uint64_t t_start, next_barrier, next_progress;
static int progress_tty;

static int writable_dir(const char *dir, int create)
{
	char probe[PATH_MAX];
	struct stat st;
	int fd;

	if (create && mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	if (stat(dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	snprintf(probe, sizeof(probe), "%s/.sfs-probe-%d", dir, (int)getpid());
	fd = open(probe, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	unlink(probe);
	return 0;
}

int sup_query_check(struct sup_query *q, unsigned workers)
{
	char dir[PATH_MAX];
	int rc;

	if (!rt_query_find(q->query)) {
		fprintf(stderr, "sfs run: unknown query '%s' (known:", q->query);
		for (unsigned i = 0; rt_queries[i]; i++)
			fprintf(stderr, " %s", rt_queries[i]->name);
		fprintf(stderr, ")\n");
		return 2;
	}
	if (!rt_backend_find(q->backend)) {
		fprintf(stderr, "sfs run: unknown backend '%s' (known: memory, rocksdb, rocksdb-direct)\n",
			q->backend);
		return 2;
	}
	if (workers > RT_MAX_WORKERS) {
		fprintf(stderr, "sfs run: --workers %u: a query job runs at most %u workers\n",
			workers, RT_MAX_WORKERS);
		return 2;
	}
	if (strlen(q->data_dir) >= RT_PATH_MAX - 24) {
		fprintf(stderr, "sfs run: --data %s: path too long\n", q->data_dir);
		return 2;
	}
	if ((rc = writable_dir(q->data_dir, 1))) {
		fprintf(stderr, "sfs run: --data %s: not a writable directory (%s)\n", q->data_dir,
			strerror(-rc));
		return 2;
	}
	if (q->output) {
		const char *slash = strrchr(q->output, '/');

		if (slash)
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - q->output), q->output);
		else
			snprintf(dir, sizeof(dir), ".");
		if (!dir[0])
			snprintf(dir, sizeof(dir), "/");
		if ((rc = writable_dir(dir, 0))) {
			fprintf(stderr, "sfs run: --output %s: directory %s is not writable (%s)\n",
				q->output, dir, strerror(-rc));
			return 2;
		}
	}
	return 0;
}

/* Segment bytes a query job needs beyond the group's own. */
uint64_t sup_query_segment_bytes(const struct sup_query *q, unsigned workers)
{
	uint64_t per_worker = 4 * (16ull << 20) + (8ull << 20) + (2ull << 20);
	uint64_t chans = rt_chans_bytes(workers, sup_query_chan_bytes(workers));

	return workers * per_worker + workers * q->store_bytes + chans + (64ull << 20);
}

uint64_t sup_query_chan_bytes(unsigned workers)
{
	/* 1 MiB per channel up to 4 workers, shrinking to keep the region
	 * near 64 MiB; never below 64 KiB (a record is at most ~1 KiB).
	 * SFS_CHAN_KB (rounded up to a power of two, at least 8) overrides. */
	const char *env = getenv("SFS_CHAN_KB");	/* tests: tiny channels force spills */
	uint64_t b = 1ull << 20;

	if (env) {
		unsigned long kb = strtoul(env, NULL, 10);

		for (b = 8ull << 10; b < (uint64_t)kb << 10 && b < (1ull << 30); b <<= 1)
			;
		return b;
	}
	while (b > (64ull << 10) && (uint64_t)RT_MAX_STAGES * workers * workers * b > (64ull << 20))
		b >>= 1;
	return b;
}

int sup_query_setup(struct sup_query *q, struct sfs_seg *seg, unsigned workers)
{
	uint64_t off, coff, cb = sup_query_chan_bytes(workers);
	unsigned char *chans;
	char part[RT_PATH_MAX + 32];
	int rc;

	rc = sfs_seg_region_create(seg, RT_JOB_REGION, sizeof(struct rt_job), SFS_ROLE_SUPERVISOR,
				   &off);
	if (rc)
		return rc;
	job = sfs_seg_ptr(seg, off);
	job_seg = seg;
	memset(job, 0, sizeof(*job));
	job->rj_magic = RT_JOB_MAGIC;
	job->rj_version = RT_JOB_VERSION;
	job->rj_workers = workers;
	job->rj_max_parallelism = 128;
	job->rj_block_events = q->block_events;
	job->rj_events = q->events;
	job->rj_rate = q->rate;
	job->rj_base_time_ms = 1436918400000ll;
	job->rj_chan_bytes = cb;
	job->rj_sink = q->output != NULL;
	snprintf(job->rj_query, sizeof(job->rj_query), "%s", q->query);
	snprintf(job->rj_backend, sizeof(job->rj_backend), "%s", q->backend);
	snprintf(job->rj_data_dir, sizeof(job->rj_data_dir), "%s", q->data_dir);
	for (unsigned w = 0; w < workers; w++) {
		snprintf(part, sizeof(part), RT_PART_FMT, q->data_dir, w);
		unlink(part);
	}
	rc = sfs_seg_region_create(seg, RT_CHAN_REGION, rt_chans_bytes(workers, cb),
				   SFS_ROLE_SUPERVISOR, &coff);
	if (rc)
		return rc;
	chans = sfs_seg_ptr(seg, coff);
	for (uint64_t i = 0; i < (uint64_t)RT_MAX_STAGES * workers * workers; i++)
		rt_chan_init((struct rt_chan *)(chans + i * rt_chan_stride(cb)), cb);
	t_start = sfs_now_ns();
	next_barrier = q->checkpoint_ns ? t_start + q->checkpoint_ns : UINT64_MAX;
	progress_tty = !q->json && isatty(STDERR_FILENO);
	return 0;
}

static void totals(uint64_t *events, uint64_t *barriers, uint64_t *stall_ns)
{
	*events = *barriers = *stall_ns = 0;
	for (unsigned w = 0; w < job->rj_workers; w++) {
		*events += sfs_load_relaxed(&job->rj_ws[w].rw_events);
		*stall_ns += sfs_load_relaxed(&job->rj_ws[w].rw_stall_ns);
		if (!w || sfs_load_relaxed(&job->rj_ws[w].rw_barriers) < *barriers)
			*barriers = sfs_load_relaxed(&job->rj_ws[w].rw_barriers);
	}
}

/* Sealed buffers not yet flushed, over every worker of node 0's segment
 * (the flush backlog of the progress line; 0 for a backend without them). */
static uint64_t flush_backlog(void)
{
	uint64_t n = 0;

	for (uint32_t w = 0; w < job->rj_workers; w++) {
		struct sfs_wctl *ctl;
		struct sfs_ring *ring;
		struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];

		if (sfs_wctl_attach(job_seg, w, &ctl, &ring, bufs) == 0)
			n += sfs_load_relaxed(&ctl->wc_seq) - sfs_load_relaxed(&ctl->wc_flushed_seq);
	}
	return n;
}

int sup_query_tick(struct sup_query *q, uint64_t now)
{
	unsigned done = 0;

	for (unsigned w = 0; w < job->rj_workers; w++) {
		uint32_t st = sfs_load_acquire(&job->rj_ws[w].rw_state);

		if (st == RT_W_FAILED) {
			sfs_log("worker %u failed: %s", w, job->rj_ws[w].rw_error);
			return -1;
		}
		done += st == RT_W_DONE;
	}
	if (now >= next_barrier) {
		sfs_store_release(&job->rj_barrier_req, job->rj_barrier_req + 1);
		next_barrier = now + q->checkpoint_ns;
	}
	if (progress_tty && now >= next_progress) {
		uint64_t ev, bar, stall;
		double s = (double)(now - t_start) / 1e9;

		totals(&ev, &bar, &stall);
		fprintf(stderr, "\r%s: %llu/%llu events, %.0f events/s, %llu checkpoints, "
			"flush backlog %llu buffers  ", q->query, (unsigned long long)ev,
			(unsigned long long)q->events, s > 0 ? ev / s : 0.0, (unsigned long long)bar,
			(unsigned long long)flush_backlog());
		next_progress = now + 500 * MS;
	}
	return done == job->rj_workers ? 1 : 0;
}

int sup_query_finish(struct sup_query *q, int ok)
{
	const struct rt_query *rq = rt_query_find(q->query);
	uint64_t ev, bar, stall, rows = 0, first = UINT64_MAX, last = 0;
	double secs;
	int rc = 0;

	if (progress_tty)
		fprintf(stderr, "\n");
	if (!job)
		return 1;
	totals(&ev, &bar, &stall);
	for (unsigned w = 0; w < job->rj_workers; w++) {
		struct rt_worker_status *s = &job->rj_ws[w];

		if (s->rw_start_ns && s->rw_start_ns < first)
			first = s->rw_start_ns;
		if (s->rw_end_ns > last)
			last = s->rw_end_ns;
	}
	secs = ok && last > first ? (double)(last - first) / 1e9 : (double)(sfs_now_ns() - t_start) / 1e9;
	if (ok && q->output) {
		const char *parts[RT_MAX_WORKERS];
		static char paths[RT_MAX_WORKERS][RT_PATH_MAX + 32];

		for (unsigned w = 0; w < job->rj_workers; w++) {
			snprintf(paths[w], sizeof(paths[w]), RT_PART_FMT, q->data_dir, w);
			parts[w] = paths[w];
		}
		rc = rt_sink_merge(parts, job->rj_workers, rq->columns, q->output, &rows);
		if (rc) {
			sfs_log("writing %s: %s", q->output, sfs_last_error());
			ok = 0;
		}
	}
	if (q->json) {
		printf("{\"query\": \"%s\", \"backend\": \"%s\", \"workers\": %u, \"events\": %llu, "
		       "\"seconds\": %.3f, \"events_per_sec\": %.0f, \"events_per_sec_per_worker\": [",
		       q->query, q->backend, job->rj_workers, (unsigned long long)ev, secs,
		       secs > 0 ? ev / secs : 0.0);
		for (unsigned w = 0; w < job->rj_workers; w++) {
			struct rt_worker_status *s = &job->rj_ws[w];
			double ws = s->rw_end_ns > s->rw_start_ns ?
				(double)(s->rw_end_ns - s->rw_start_ns) / 1e9 : 0;

			printf("%s%.0f", w ? ", " : "", ws > 0 ? s->rw_events / ws : 0.0);
		}
		printf("], \"checkpoints\": %llu, \"stall_ms\": %.3f, \"result_rows\": %llu, "
		       "\"ok\": %s}\n", (unsigned long long)bar, stall / 1e6,
		       (unsigned long long)rows, ok ? "true" : "false");
	} else {
		printf("sfs: %s on %s, %u workers: %llu events in %.3f s = %.0f events/s "
		       "(%.0f per worker), %llu checkpoints, stall %.3f ms%s%s\n",
		       q->query, q->backend, job->rj_workers, (unsigned long long)ev, secs,
		       secs > 0 ? ev / secs : 0.0,
		       secs > 0 ? ev / secs / job->rj_workers : 0.0, (unsigned long long)bar,
		       stall / 1e6, q->output && ok ? ", result in " : "",
		       q->output && ok ? q->output : "");
	}
	fflush(stdout);
	return ok ? 0 : 1;
}
