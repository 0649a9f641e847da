/*
 * bench_qsbr.c — what cross-process QSBR (shm/qsbr.h) costs a reader and an
 * updater, each against a baseline run in the same command.
 *
 *   make build/bench/bench_qsbr && ./build/bench/bench_qsbr
 *
 * (a) Reader side, ns per call, tight loops of N calls, REPS repetitions
 *     interleaved, median.  Baseline (the floor): a plain store of a loop
 *     counter to the same ps_qsbr slot — what DESIGN.md promises a quiescent
 *     point costs.  Printed beside it: sfs_qsbr_quiescent() (acquire load of
 *     the token + release store), the online+offline pair (online carries the
 *     store-load fence), the public sfs_quiescent() (adds the heartbeat: a
 *     vDSO clock read), the clock read alone, and liburcu's own QSBR
 *     urcu_qsbr_quiescent_state() called through a pointer (a reference, not
 *     a baseline: out of a dlopen'ed library it is a call plus a dynamic-TLS
 *     lookup and a compare; an application built with _LGPL_SOURCE and
 *     -lurcu-qsbr inlines it).  The ratio column is the median of the
 *     per-repetition ratios to the floor.
 *
 * (b) Grace-period latency: sfs_qsbr_synchronize() with 0, 1 and 2 reader
 *     PROCESSES (forked, each attaching the segment and calling
 *     sfs_qsbr_quiescent() in a loop), against liburcu's in-process
 *     synchronize_rcu() of the QSBR flavour with 0, 1 and 2 reader THREADS
 *     calling urcu_qsbr_quiescent_state() in a loop.  ROUNDS rounds, each a
 *     block per configuration (BLOCK_RUNS calls or BLOCK_NS, whichever comes
 *     first); printed: the median of the ROUNDS block medians (every round
 *     weighs the same, whether its block made 2000 calls or 30), p90, p99
 *     and max over every call (weighted by calls: fast blocks dominate), and
 *     sfs/urcu as the median of the per-round ratios of block medians.  Readers spin and
 *     nothing is pinned: on a 2-core machine 2 reader processes plus the
 *     updater are 3 spinners on 2 cores, so that row measures the scheduler
 *     as much as QSBR.
 *
 * liburcu-qsbr is reached with dlopen("liburcu-qsbr.so.8"): the Makefile
 * links liburcu's default flavour only, and adding -lurcu-qsbr for one
 * benchmark is not worth a rule.  Without the library the urcu rows are
 * skipped.  The segment is created under a unique job name and destroyed on
 * every exit path (and on SIGINT/SIGTERM); reader processes die with the
 * bench (PR_SET_PDEATHSIG) and are reaped with a timeout.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "shm/qsbr.h"
#include "tests/helpers.h"

#define SEG_SIZE   (1u << 20)
#define REPS       7
#define N_FAST     50000000L  /* calls per repetition for the ~1 ns loops */
#define N_MID      10000000L  /* for liburcu's call through a pointer */
#define N_SLOW     2000000L   /* for the loops that fence or read the clock */
#define ROUNDS     5
#define BLOCK_RUNS 2000
#define BLOCK_NS   (400 * 1000000ull)
#define GP_WAIT_NS (2000 * 1000000ull)  /* a grace period longer than this fails */
#define MAX_READERS 2  /* per configuration, processes or threads */

static char job[64];
static char seg_path[256];  /* for the signal handler's unlink */

/* Shared by the parent and its reader processes (anonymous shared mapping). */
struct ctl {
	int32_t ready;  /* readers online and looping (uatomic_inc) */
	int32_t stop;   /* parent: 0 -> 1, polled by readers */
};
static struct ctl *ctl;

/* ---- liburcu QSBR flavour through dlopen ---- */

struct urcu_api {
	void (*register_thread)(void);
	void (*unregister_thread)(void);
	void (*quiescent_state)(void);
	void (*synchronize_rcu)(void);
};
static struct urcu_api urcu;
static int urcu_ok;

static void urcu_load(void)
{
	void *lib = dlopen("liburcu-qsbr.so.8", RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		fprintf(stderr, "bench_qsbr: %s: liburcu rows skipped\n", dlerror());
		return;
	}
	urcu.register_thread = (void (*)(void))dlsym(lib, "urcu_qsbr_register_thread");
	urcu.unregister_thread = (void (*)(void))dlsym(lib, "urcu_qsbr_unregister_thread");
	urcu.quiescent_state = (void (*)(void))dlsym(lib, "urcu_qsbr_quiescent_state");
	urcu.synchronize_rcu = (void (*)(void))dlsym(lib, "urcu_qsbr_synchronize_rcu");
	urcu_ok = urcu.register_thread && urcu.unregister_thread && urcu.quiescent_state &&
		  urcu.synchronize_rcu;
	if (!urcu_ok)
		fprintf(stderr, "bench_qsbr: liburcu-qsbr.so.8 lacks a urcu_qsbr_* symbol: "
			"liburcu rows skipped\n");
	/* The library stays loaded until exit: its threads' TLS lives in it. */
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The @q quantile (0..1) of @v[0..n), sorting @v. */
static double quantile(double *v, int n, double q)
{
	int i;

	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	i = (int)(q * (n - 1) + 0.5);
	return v[i];
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- cleanup ---- */

static void on_signal(int sig)
{
	unlink(seg_path);  /* async-signal-safe; readers die by PDEATHSIG */
	_exit(128 + sig);
}

static void reset_signals(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
}

/* ---- (a) reader-side cost ----
 *
 * One noinline function per loop so each is compiled as its own tight loop
 * and nothing is hoisted across kinds.  The shared accesses are volatile
 * (CMM_LOAD/STORE_SHARED), so every iteration really loads and stores.
 * Each starts on a cache line: a 1-cycle loop body that happens to straddle
 * a 64-byte boundary runs at half speed on this AMD core, which moved the
 * quiescent/floor ratio between 1.0 and 2.0 from one unrelated edit of this
 * file to the next. */
#define LOOP_FN __attribute__((noinline, aligned(64)))

static LOOP_FN void loop_floor(struct sfs_proc_slot *me, long n)
{
	for (long i = 1; i <= n; i++)
		sfs_store_relaxed(&me->ps_qsbr, (uint64_t)i);
}

static LOOP_FN void loop_quiescent(struct sfs_seg_hdr *h,
						     struct sfs_proc_slot *me, long n)
{
	for (long i = 0; i < n; i++)
		sfs_qsbr_quiescent(h, me);
}

static LOOP_FN void loop_online_offline(struct sfs_seg_hdr *h,
							  struct sfs_proc_slot *me, long n)
{
	for (long i = 0; i < n; i++) {
		sfs_qsbr_online(h, me);
		sfs_qsbr_offline(me);
	}
}

static LOOP_FN void loop_public(sfs_handle_t *hd, long n)
{
	for (long i = 0; i < n; i++)
		sfs_quiescent(hd);
}

static LOOP_FN uint64_t loop_clock(long n)
{
	uint64_t sum = 0;

	for (long i = 0; i < n; i++)
		sum += sfs_now_ns();
	return sum;
}

static LOOP_FN void loop_urcu(long n)
{
	void (*qs)(void) = urcu.quiescent_state;

	for (long i = 0; i < n; i++)
		qs();
}

enum { A_FLOOR, A_QUIESCENT, A_ONOFF, A_PUBLIC, A_CLOCK, A_URCU, A_KINDS };

static const struct {
	const char *name;
	long n;
} a_kinds[A_KINDS] = {
	[A_FLOOR] = { "plain store to ps_qsbr (floor)", N_FAST },
	[A_QUIESCENT] = { "sfs_qsbr_quiescent()", N_FAST },
	[A_ONOFF] = { "sfs_qsbr_online()+offline() pair", N_SLOW },
	[A_PUBLIC] = { "sfs_quiescent() (public: +heartbeat)", N_SLOW },
	[A_CLOCK] = { "  of which sfs_now_ns() (vDSO clock)", N_SLOW },
	[A_URCU] = { "urcu_qsbr_quiescent_state() (ref.)", N_MID },
};

static volatile uint64_t clock_sink;

static int bench_reader_cost(struct sfs_seg *seg)
{
	double ns[A_KINDS][REPS], ratio[A_KINDS][REPS];
	struct sfs_proc_slot *me;
	sfs_handle_t *hd;
	int rc;

	rc = sfs_proc_register(seg, SFS_ROLE_CLIENT, 0, &me);
	if (rc) {
		fprintf(stderr, "bench_qsbr: register: %s\n", sfs_last_error());
		return 1;
	}
	rc = sfs_attach(job, 0, 0, &hd);
	if (rc) {
		fprintf(stderr, "bench_qsbr: sfs_attach: %s\n", sfs_last_error());
		sfs_proc_unregister(me);
		return 1;
	}
	if (urcu_ok)
		urcu.register_thread();
	/* Online, as a reader is between quiescent points. */
	sfs_qsbr_online(seg->hdr, me);
	sfs_online(hd);

	for (int r = 0; r < REPS; r++) {
		for (int k = 0; k < A_KINDS; k++) {
			long n = a_kinds[k].n;
			uint64_t t0;

			if (k == A_URCU && !urcu_ok)
				continue;
			t0 = sfs_now_ns();
			switch (k) {
			case A_FLOOR:
				loop_floor(me, n);
				break;
			case A_QUIESCENT:
				loop_quiescent(seg->hdr, me, n);
				break;
			case A_ONOFF:
				loop_online_offline(seg->hdr, me, n);
				sfs_qsbr_online(seg->hdr, me);
				break;
			case A_PUBLIC:
				loop_public(hd, n);
				break;
			case A_CLOCK:
				clock_sink = loop_clock(n);
				break;
			case A_URCU:
				loop_urcu(n);
				break;
			}
			ns[k][r] = (double)(sfs_now_ns() - t0) / (double)n;
		}
		for (int k = 0; k < A_KINDS; k++)
			ratio[k][r] = ns[k][r] / ns[A_FLOOR][r];
	}

	sfs_qsbr_offline(me);
	sfs_proc_unregister(me);
	sfs_offline(hd);
	sfs_detach(hd);
	if (urcu_ok)
		urcu.unregister_thread();

	printf("(a) reader side: ns per call, median of %d repetitions (kinds interleaved)\n\n",
	       REPS);
	printf("%-40s %10s %9s %9s %9s %9s\n", "call", "calls/rep", "ns/call", "min", "max",
	       "x floor");
	printf("------------------------------------------------------------------------------"
	       "-----------\n");
	for (int k = 0; k < A_KINDS; k++) {
		double lo, hi;

		if (k == A_URCU && !urcu_ok)
			continue;
		lo = quantile(ns[k], REPS, 0);
		hi = quantile(ns[k], REPS, 1);
		printf("%-40s %10ld %9.2f %9.2f %9.2f %9.2f\n", a_kinds[k].name, a_kinds[k].n,
		       median(ns[k], REPS), lo, hi, median(ratio[k], REPS));
	}
	printf("\n");
	return 0;
}

/* ---- (b) grace-period latency ---- */

/* A reader process: its own mapping and slot, online, quiescent in a loop.
 * Reports through its exit code only. */
static int sfs_reader(void *arg)
{
	struct sfs_proc_slot *sl;
	struct sfs_seg s;

	reset_signals();
	if (sfs_seg_attach(job, 0, &s))
		return 10;
	if (sfs_proc_register(&s, SFS_ROLE_CLIENT, (uint32_t)(uintptr_t)arg, &sl)) {
		sfs_seg_detach(&s);
		return 11;
	}
	sfs_qsbr_online(s.hdr, sl);
	uatomic_inc(&ctl->ready);
	while (!sfs_load_relaxed(&ctl->stop))
		sfs_qsbr_quiescent(s.hdr, sl);
	sfs_qsbr_offline(sl);
	sfs_proc_unregister(sl);
	sfs_seg_detach(&s);
	return 0;
}

static void *urcu_reader(void *arg)
{
	urcu.register_thread();  /* registers online */
	uatomic_inc(&ctl->ready);
	while (!sfs_load_relaxed(&ctl->stop))
		urcu.quiescent_state();
	urcu.unregister_thread();
	return NULL;
}

enum { G_SFS0, G_SFS1, G_SFS2, G_URCU0, G_URCU1, G_URCU2, G_KINDS };

static const struct {
	const char *name;
	int readers;
	int urcu;
} g_kinds[G_KINDS] = {
	[G_SFS0] = { "sfs_qsbr_synchronize()", 0, 0 },
	[G_SFS1] = { "sfs_qsbr_synchronize()", 1, 0 },
	[G_SFS2] = { "sfs_qsbr_synchronize()", 2, 0 },
	[G_URCU0] = { "urcu_qsbr synchronize_rcu()", 0, 1 },
	[G_URCU1] = { "urcu_qsbr synchronize_rcu()", 1, 1 },
	[G_URCU2] = { "urcu_qsbr synchronize_rcu()", 2, 1 },
};

struct samples {
	double *us;             /* every call, µs */
	int n;
	double round_med[ROUNDS];
};

/* Wait until @want readers are looping; 0 on time, -1 after 5 s. */
static int wait_ready(int want)
{
	uint64_t end = sfs_now_ns() + 5000 * 1000000ull;

	while (sfs_load_acquire(&ctl->ready) < want) {
		if (sfs_now_ns() > end)
			return -1;
		sfs_sleep_ns(100000);
	}
	return 0;
}

/* One block of one configuration; appends to @smp.  0, or a failure code. */
static int gp_block(struct sfs_seg *seg, int kind, int round, struct samples *smp)
{
	int readers = g_kinds[kind].readers, urcu_kind = g_kinds[kind].urcu, rc = 0;
	pid_t pids[MAX_READERS];
	pthread_t tids[MAX_READERS];
	int started = 0, first = smp->n;
	uint64_t end;

	memset(ctl, 0, sizeof(*ctl));
	for (int i = 0; i < readers; i++) {
		if (urcu_kind) {
			if (pthread_create(&tids[i], NULL, urcu_reader, NULL) != 0) {
				rc = 20;
				break;
			}
		} else {
			pids[i] = th_fork(sfs_reader, (void *)(uintptr_t)i);
			if (pids[i] < 0) {
				rc = 21;
				break;
			}
		}
		started++;
	}
	if (!rc && wait_ready(readers))
		rc = 22;

	end = sfs_now_ns() + BLOCK_NS;
	for (int i = 0; !rc && i < BLOCK_RUNS && sfs_now_ns() < end; i++) {
		uint64_t t0 = sfs_now_ns();

		if (urcu_kind) {
			urcu.synchronize_rcu();
		} else if (sfs_qsbr_synchronize(seg, NULL, GP_WAIT_NS) != 0) {
			fprintf(stderr, "bench_qsbr: %s\n", sfs_last_error());
			rc = 23;
			break;
		}
		smp->us[smp->n++] = (double)(sfs_now_ns() - t0) / 1e3;
	}

	sfs_store_release(&ctl->stop, 1);
	for (int i = 0; i < started; i++) {
		if (urcu_kind) {
			pthread_join(tids[i], NULL);
		} else {
			int code = th_exit_code(th_wait(pids[i], 5000));

			if (code != 0 && !rc) {
				fprintf(stderr, "bench_qsbr: reader %d exited with %d\n", i, code);
				rc = 24;
			}
		}
	}
	if (!rc) {
		double tmp[BLOCK_RUNS];
		int n = smp->n - first;

		memcpy(tmp, smp->us + first, (size_t)n * sizeof(double));
		smp->round_med[round] = median(tmp, n);
	}
	return rc;
}

static int bench_grace_period(struct sfs_seg *seg)
{
	static struct samples smp[G_KINDS];
	double ratio[MAX_READERS + 1][ROUNDS];
	int rc = 0;

	for (int k = 0; k < G_KINDS; k++) {
		smp[k].us = calloc((size_t)ROUNDS * BLOCK_RUNS, sizeof(double));
		if (!smp[k].us) {
			perror("calloc");
			return 1;
		}
	}
	for (int r = 0; r < ROUNDS && !rc; r++)
		for (int k = 0; k < G_KINDS && !rc; k++)
			if (!g_kinds[k].urcu || urcu_ok)
				rc = gp_block(seg, k, r, &smp[k]);
	if (rc) {
		fprintf(stderr, "bench_qsbr: grace-period block failed (%d)\n", rc);
		return 1;
	}
	for (int r = 0; r < ROUNDS; r++)
		for (int n = 0; n <= MAX_READERS; n++)
			ratio[n][r] = smp[G_SFS0 + n].round_med[r] / smp[G_URCU0 + n].round_med[r];

	printf("(b) grace period: µs per call, %d rounds of up to %d calls or %llu ms per row\n\n",
	       ROUNDS, BLOCK_RUNS, (unsigned long long)(BLOCK_NS / 1000000));
	printf("%-28s %-9s %6s %9s %9s %9s %9s %9s\n", "call", "readers", "calls", "median*",
	       "p90", "p99", "max", "sfs/urcu");
	printf("------------------------------------------------------------------------------"
	       "-----------\n");
	for (int k = 0; k < G_KINDS; k++) {
		char rd[32], rat[32] = "";
		struct samples *s = &smp[k];
		double rm[ROUNDS];

		if (g_kinds[k].urcu && !urcu_ok)
			continue;
		snprintf(rd, sizeof(rd), "%d %s", g_kinds[k].readers,
			 g_kinds[k].urcu ? "thread" : "process");
		if (urcu_ok && !g_kinds[k].urcu)
			snprintf(rat, sizeof(rat), "%.2f",
				 median(ratio[g_kinds[k].readers], ROUNDS));
		memcpy(rm, s->round_med, sizeof(rm));
		printf("%-28s %-9s %6d %9.3f %9.3f %9.3f %9.1f %9s\n", g_kinds[k].name, rd, s->n,
		       median(rm, ROUNDS), quantile(s->us, s->n, 0.9),
		       quantile(s->us, s->n, 0.99), quantile(s->us, s->n, 1), rat);
	}
	printf("\nblock medians, round by round (µs): a bimodal row shows here\n");
	for (int k = 0; k < G_KINDS; k++) {
		if (g_kinds[k].urcu && !urcu_ok)
			continue;
		printf("  %-28s %d %-8s", g_kinds[k].name, g_kinds[k].readers,
		       g_kinds[k].urcu ? "thread" : "process");
		for (int r = 0; r < ROUNDS; r++)
			printf(" %10.3f", smp[k].round_med[r]);
		printf("\n");
	}
	printf("\nmedian*: median of the %d per-round block medians; p90/p99/max: over all calls.\n"
	       "sfs/urcu: median over rounds of (sfs block median / urcu block median),\n"
	       "same number of readers (processes for sfs, threads for urcu).\n", ROUNDS);
	for (int k = 0; k < G_KINDS; k++)
		free(smp[k].us);
	return 0;
}

int main(void)
{
	struct sfs_seg seg;
	int rc;

	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	urcu_load();
	th_job(job, sizeof(job), "bqsbr");
	if (sfs_seg_create(job, 0, SEG_SIZE, 1, &seg)) {
		fprintf(stderr, "bench_qsbr: %s\n", sfs_last_error());
		return 1;
	}
	snprintf(seg_path, sizeof(seg_path), "%s", seg.path);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	printf("bench_qsbr: segment %s, %ld online cpus\n\n", seg.path,
	       sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);
	rc = bench_reader_cost(&seg);
	fflush(stdout);
	if (!rc)
		rc = bench_grace_period(&seg);

	sfs_seg_detach(&seg);
	if (sfs_seg_destroy(job, 0))
		fprintf(stderr, "bench_qsbr: %s\n", sfs_last_error());
	return rc;
}
