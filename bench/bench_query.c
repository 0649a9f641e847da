/*
 * bench_query.c — queryable state under load: lookups per second of one
 * external reader (sfs_attach + sfs_query_value) while `sfs run --query
 * q18` runs, and the job's throughput with and without that reader, in the
 * same command.
 *
 *   make build/bench/bench_query && ./build/bench/bench_query [events] [backend] [pairs] [pace]
 *
 * Defaults: 4000000 events, the memory backend, 3 pairs, pace 20000.  Two
 * series of pairs: the reader as fast as it goes, and the reader paced at
 * @pace lookups/s (it sleeps between batches of 256), which separates
 * what a reader costs the job beyond the core it takes.  Each pair is two
 * runs of `$SFS_BIN/sfs run --query q18 --workers 1 --checkpoint-interval
 * 200 --json` (bin/ when SFS_BIN is unset), one without a reader and one
 * with this process reading q18.last from the moment the state exists
 * until the run exits; the order inside a pair alternates so neither
 * always runs on a machine the other warmed.  The reader's keys are (bidder,
 * auction) pairs of bids drawn uniformly from the whole stream (the
 * Nexmark generator, as the run's sources make them), so a key is present
 * once its bid was processed and sealed, absent before: both paths, the
 * store's miss included.  It goes online once and reports a quiescent
 * state after every lookup, as the API asks.  Printed: per pair, the two
 * throughputs (the summary's events_per_sec) and their ratio, the reader's
 * lookups/s and hit ratio; then the medians.  On a 2-core machine the
 * reader competes with the worker and the compactor for CPU: the ratio
 * includes that.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sfs.h"
#include "common/clock.h"
#include "nexmark/gen.h"

#define NKEYS 65536
#define MAX_PAIRS 9

static char sfs_path[512];
static unsigned char keys[NKEYS][16];

static void be64(unsigned char *k, int64_t v)
{
	uint64_t u = (uint64_t)v;

	for (int i = 7; i >= 0; i--, u >>= 8)
		k[i] = (unsigned char)u;
}

static void make_keys(uint64_t events)
{
	struct nx_config c;
	struct nx_event e;
	uint64_t s = 0x9e3779b97f4a7c15ull;

	nx_config_default(&c);
	for (unsigned i = 0; i < NKEYS;) {
		uint64_t n;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		n = s % events;
		nx_event(&c, n, &e);
		if (e.kind != NX_BID)
			continue;
		be64(keys[i], e.bid.bidder);
		be64(keys[i] + 8, e.bid.auction);
		i++;
	}
}

/* Start the run; its --json summary goes to @json. */
static pid_t start_run(const char *job, const char *json, uint64_t events, const char *backend,
		       const char *data)
{
	char ev[32];
	pid_t pid;

	snprintf(ev, sizeof(ev), "%llu", (unsigned long long)events);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (!freopen(json, "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(127);
		execl(sfs_path, sfs_path, "run", "--job", job, "--query", "q18", "--events", ev,
		      "--workers", "1", "--backend", backend, "--checkpoint-interval", "200",
		      "--data", data, "--json", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static double events_per_sec(const char *json)
{
	char buf[4096];
	FILE *f = fopen(json, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	const char *p;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strstr(buf, "\"events_per_sec\": ");
	return p ? strtod(p + 18, NULL) : 0;
}

struct reader_stats {
	uint64_t lookups, hits;
	double secs;
};

/* Read q18.last of @job until @pid exits; @pace lookups/s at most (0: no limit). */
static int read_while(const char *job, pid_t pid, double pace, struct reader_stats *rs,
		      int *status)
{
	sfs_handle_t *h = NULL;
	sfs_query_t *q = NULL;
	uint64_t t0, s = 12345;
	struct sfs_view v;

	memset(rs, 0, sizeof(*rs));
	for (;;) {	/* the segment, then the state */
		if (waitpid(pid, status, WNOHANG) == pid)
			return -1;
		if (!h && sfs_attach(job, 0, 0, &h) != 0)
			h = NULL;
		if (h && sfs_query_open(h, "q18.last", &q) == 0)
			break;
		usleep(2000);
	}
	sfs_online(h);
	t0 = sfs_now_ns();
	for (;;) {
		for (int i = 0; i < 256; i++) {
			int rc;

			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			rc = sfs_query_value(q, 0, keys[s % NKEYS], 16, &v);
			if (rc < 0) {
				fprintf(stderr, "bench_query: %s\n", sfs_last_error());
				sfs_offline(h);
				sfs_query_close(q);
				sfs_detach(h);
				return -1;
			}
			rs->hits += rc == 1;
			rs->lookups++;
			sfs_quiescent(h);
		}
		if (waitpid(pid, status, WNOHANG) == pid)
			break;
		if (pace > 0) {
			uint64_t due = t0 + (uint64_t)((double)rs->lookups / pace * 1e9), now;

			sfs_offline(h);	/* asleep: hold nothing off */
			while ((now = sfs_now_ns()) < due)
				usleep((useconds_t)((due - now) / 1000 + 1));
			sfs_online(h);
		}
	}
	rs->secs = (double)(sfs_now_ns() - t0) / 1e9;
	sfs_offline(h);
	sfs_query_close(q);
	sfs_detach(h);
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* @pairs pairs of runs, the reader paced at @pace lookups/s (0: unpaced). */
static int series(uint64_t events, const char *backend, int pairs, double pace)
{
	double ratio[MAX_PAIRS], rate[MAX_PAIRS], base[MAX_PAIRS], with[MAX_PAIRS];
	char job[64], json[128], data[128], cmd[256];

	if (pace > 0)
		printf("reader paced at %.0f lookups/s:\n", pace);
	else
		printf("reader unpaced:\n");
	for (int p = 0; p < pairs; p++) {
		struct reader_stats rs = { 0 };

		for (int k = 0; k < 2; k++) {
			int reader = (k + p) % 2, status = 0;
			pid_t pid;

			snprintf(job, sizeof(job), "bq-%d-%d-%d", (int)getpid(), p, reader);
			snprintf(json, sizeof(json), "/tmp/%s.json", job);
			snprintf(data, sizeof(data), "/tmp/%s.data", job);
			pid = start_run(job, json, events, backend, data);
			if (reader) {
				if (read_while(job, pid, pace, &rs, &status))
					waitpid(pid, &status, 0);
			} else {
				waitpid(pid, &status, 0);
			}
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "bench_query: sfs run (%s) failed: status %d\n", job,
					status);
				return 1;
			}
			(reader ? with : base)[p] = events_per_sec(json);
			unlink(json);
			snprintf(cmd, sizeof(cmd), "rm -rf '%s'", data);
			if (system(cmd) != 0)
				fprintf(stderr, "bench_query: cannot remove %s\n", data);
		}
		rate[p] = rs.secs > 0 ? rs.lookups / rs.secs : 0;
		ratio[p] = base[p] > 0 ? with[p] / base[p] : 0;
		printf("pair %d: %.0f events/s alone, %.0f with the reader (ratio %.3f); "
		       "reader %.0f lookups/s, %.1f %% hits, %.1f s\n",
		       p, base[p], with[p], ratio[p], rate[p],
		       rs.lookups ? 100.0 * (double)rs.hits / (double)rs.lookups : 0.0, rs.secs);
	}
	qsort(ratio, (size_t)pairs, sizeof(double), cmp_d);
	qsort(rate, (size_t)pairs, sizeof(double), cmp_d);
	qsort(base, (size_t)pairs, sizeof(double), cmp_d);
	qsort(with, (size_t)pairs, sizeof(double), cmp_d);
	printf("median: %.0f lookups/s from one reader; job %.0f events/s alone, %.0f with the "
	       "reader: ratio %.3f\n", rate[pairs / 2], base[pairs / 2], with[pairs / 2],
	       ratio[pairs / 2]);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
	const char *backend = argc > 2 ? argv[2] : "memory";
	int pairs = argc > 3 ? atoi(argv[3]) : 3;
	double pace = argc > 4 ? strtod(argv[4], NULL) : 20000;
	const char *bin = getenv("SFS_BIN");

	if (pairs < 1 || pairs > MAX_PAIRS || events < 1000 || pace <= 0) {
		fprintf(stderr, "usage: bench_query [events >= 1000] [backend] [pairs 1..%d] "
			"[pace > 0]\n", MAX_PAIRS);
		return 2;
	}
	snprintf(sfs_path, sizeof(sfs_path), "%s/sfs", bin && *bin ? bin : "bin");
	make_keys(events);
	printf("bench_query: q18, %llu events, 1 worker, backend %s, checkpoints every 200 ms; "
	       "reader: sfs_query_value of q18.last, keys of bids across the stream\n",
	       (unsigned long long)events, backend);
	if (series(events, backend, pairs, 0) || series(events, backend, pairs, pace))
		return 1;
	return 0;
}
