/*
 * bench_attach.c — what the public sfs_attach() + sfs_detach() pair costs an
 * external reader, against the raw system calls it cannot avoid, in the same
 * command.
 *
 *   make build/bench/bench_attach && ./build/bench/bench_attach [iterations]
 *
 * On one 64 MiB segment, ITER iterations (default 1000), each timing once:
 *   raw       open() + mmap(64 MiB, shared) + munmap() + close() of the
 *             segment file — the baseline, the floor of any attach;
 *   observer  sfs_attach(SFS_ATTACH_OBSERVER) + sfs_detach(): the mapping and
 *             the header checks (path lookup, fstat, uid/mode, pread of the
 *             header, magic/version/fingerprint/size/job), no slot;
 *   full      sfs_attach() + sfs_detach(): the above plus taking and giving
 *             back a process-table slot (a /proc read for the start time, a
 *             CAS, and the first touch of the mapping: one minor fault).
 * The order of the three rotates each iteration so none always runs on a
 * cache the previous one warmed.  Printed: median and p90 µs, and the median
 * of the per-iteration ratios to raw (pairs from one iteration share the
 * machine's mood).  For information, sfs_seg_create() of a 64 MiB segment
 * (median of CREATE_REPS creates; each is detached and destroyed untimed).
 * Every segment has a unique job name and is destroyed on every exit path.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "shm/segment.h"
#include "tests/helpers.h"

#define SEG_SIZE    (64ull << 20)
#define CREATE_REPS 50

enum { RAW, OBSERVER, FULL, KINDS };

static const char *const kind_name[KINDS] = {
	[RAW] = "open+mmap+munmap+close (raw)",
	[OBSERVER] = "sfs_attach(OBSERVER)+sfs_detach",
	[FULL] = "sfs_attach()+sfs_detach()",
};

static char job[64];
static char seg_path[256];  /* for the signal handler's unlink */

static void on_signal(int sig)
{
	unlink(seg_path);
	_exit(128 + sig);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The @q quantile (0..1) of @v[0..n), sorting @v. */
static double quantile(double *v, int n, double q)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[(int)(q * (n - 1) + 0.5)];
}

/* One timed attach/detach of @kind, in µs; negative on failure. */
static double one(int kind)
{
	sfs_handle_t *h;
	uint64_t t0 = sfs_now_ns();
	void *p;
	int fd;

	switch (kind) {
	case RAW:
		fd = open(seg_path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			perror("bench_attach: open");
			return -1;
		}
		p = mmap(NULL, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			perror("bench_attach: mmap");
			close(fd);
			return -1;
		}
		munmap(p, SEG_SIZE);
		close(fd);
		break;
	case OBSERVER:
	case FULL:
		if (sfs_attach(job, 0, kind == OBSERVER ? SFS_ATTACH_OBSERVER : 0, &h)) {
			fprintf(stderr, "bench_attach: sfs_attach: %s\n", sfs_last_error());
			return -1;
		}
		sfs_detach(h);
		break;
	}
	return (double)(sfs_now_ns() - t0) / 1e3;
}

/* sfs_seg_create of a 64 MiB segment, median µs over CREATE_REPS. */
static int bench_create(double *med, double *p90)
{
	static double us[CREATE_REPS];
	char cjob[64];

	th_job(cjob, sizeof(cjob), "bcreate");
	for (int i = 0; i < CREATE_REPS; i++) {
		struct sfs_seg s;
		uint64_t t0 = sfs_now_ns();

		if (sfs_seg_create(cjob, 0, SEG_SIZE, 1, &s)) {
			fprintf(stderr, "bench_attach: create: %s\n", sfs_last_error());
			return 1;
		}
		us[i] = (double)(sfs_now_ns() - t0) / 1e3;
		sfs_seg_detach(&s);
		if (sfs_seg_destroy(cjob, 0)) {
			fprintf(stderr, "bench_attach: destroy: %s\n", sfs_last_error());
			return 1;
		}
	}
	*med = quantile(us, CREATE_REPS, 0.5);
	*p90 = quantile(us, CREATE_REPS, 0.9);
	return 0;
}

int main(int argc, char **argv)
{
	int iter = argc > 1 ? atoi(argv[1]) : 1000;
	double *us[KINDS], *ratio[KINDS], cmed = 0, cp90 = 0;
	struct sfs_seg seg;
	int rc = 0;

	if (iter < 1)
		iter = 1000;
	for (int k = 0; k < KINDS; k++) {
		us[k] = calloc((size_t)iter, sizeof(double));
		ratio[k] = calloc((size_t)iter, sizeof(double));
		if (!us[k] || !ratio[k]) {
			perror("calloc");
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	th_job(job, sizeof(job), "battach");
	if (sfs_seg_create(job, 0, SEG_SIZE, 1, &seg)) {
		fprintf(stderr, "bench_attach: %s\n", sfs_last_error());
		return 1;
	}
	snprintf(seg_path, sizeof(seg_path), "%s", seg.path);

	for (int i = 0; i < iter && !rc; i++) {
		double t[KINDS];

		for (int j = 0; j < KINDS; j++) {
			int k = (i + j) % KINDS;

			t[k] = one(k);
			if (t[k] < 0) {
				rc = 1;
				break;
			}
		}
		for (int k = 0; k < KINDS && !rc; k++) {
			us[k][i] = t[k];
			ratio[k][i] = t[k] / t[RAW];
		}
	}

	sfs_seg_detach(&seg);
	if (sfs_seg_destroy(job, 0)) {
		fprintf(stderr, "bench_attach: %s\n", sfs_last_error());
		rc = 1;
	}
	if (!rc)
		rc = bench_create(&cmed, &cp90);
	if (rc)
		return rc;

	printf("bench_attach: 64 MiB segment in %s, %d iterations (order rotates)\n\n",
	       strncmp(seg_path, "/dev/shm/", 9) == 0 ? "/dev/shm" : "hugetlbfs", iter);
	printf("%-34s %10s %10s %10s\n", "attach + detach", "median µs", "p90 µs", "x raw");
	printf("-----------------------------------------------------------------------\n");
	for (int k = 0; k < KINDS; k++)
		printf("%-34s %10.2f %10.2f %10.2f\n", kind_name[k], quantile(us[k], iter, 0.5),
		       quantile(us[k], iter, 0.9), quantile(ratio[k], iter, 0.5));
	printf("\nfor information: sfs_seg_create(64 MiB), %d creates: median %.2f µs, "
	       "p90 %.2f µs\n", CREATE_REPS, cmed, cp90);
	for (int k = 0; k < KINDS; k++) {
		free(us[k]);
		free(ratio[k]);
	}
	return 0;
}
