/*
 * bench_ring.c — records per second from one process to another through an
 * sfs ring (shm/ring.h, SPSC) against pipe(2) carrying the same records, in
 * the same command, so the ratio survives a noisy machine.
 *
 *   make build/bench/bench_ring && ./build/bench/bench_ring [ms_per_run]
 *
 * For each record size (16, 64 bytes) and batch size (1, 32, 256 records per
 * call) it runs ring and pipe alternately REPS times, each run a forked
 * producer and a forked consumer for a fixed wall time (default 200 ms).
 * Both transports hold the same 64 KiB (the default pipe buffer; the ring
 * gets 65536 / esize slots), both sides do the same work per record (the
 * producer writes every word, the consumer checks the sequence), and a run
 * ends with a sentinel record so the consumer's clock stops at the last
 * record, not at a timeout.  Printed: median records/s of each, the median
 * of the per-repetition ratios ring/pipe, and the ring's median futex wakes
 * per run (0 means the pair never slept: no syscall at all).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "shm/futex.h"
#include "shm/ring.h"

#define REPS 5
#define MAX_BATCH 256
#define MAX_ESIZE 64
#define SENTINEL UINT64_MAX
#define PIPE_BYTES 65536u

enum { RING, PIPE };

/* Shared between the parent and its two children for one run. */
struct ctl {
	int32_t ready;       /* children that are set up (uatomic_inc) */
	int32_t go;          /* parent: 0 -> 1, futex-woken */
	int32_t stop;        /* parent: 0 -> 1, polled by the producer */
	int32_t errors;      /* consumer: records out of order */
	uint64_t t_end;      /* consumer: when the sentinel arrived */
	uint64_t count;      /* consumer: records received */
};

struct run {
	int kind;
	unsigned esize, batch;
	struct ctl *ctl;
	struct sfs_ring *ring;
	int fd[2];
};

static void wait_go(struct ctl *c)
{
	uatomic_inc(&c->ready);
	while (!sfs_load_acquire(&c->go))
		sfs_futex_wait(&c->go, 0, 100 * 1000000ull);
}

static void fill(uint64_t *rec, unsigned words, uint64_t seq)
{
	for (unsigned w = 0; w < words; w++)
		rec[w] = seq;
}

static int producer(struct run *x)
{
	uint64_t buf[MAX_BATCH * MAX_ESIZE / 8], seq = 0;
	unsigned words = x->esize / 8, i;

	if (x->kind == PIPE)
		close(x->fd[0]);
	wait_go(x->ctl);
	while (!sfs_load_relaxed(&x->ctl->stop)) {
		for (i = 0; i < x->batch; i++)
			fill(buf + i * words, words, seq + i);
		if (x->kind == RING) {
			if (sfs_ring_enqueue_wait(x->ring, buf, x->batch, 5000000000ull) !=
			    (int)x->batch)
				return 3;
		} else if (sfs_write_all(x->fd[1], buf, (size_t)x->batch * x->esize, "pipe")) {
			return 3;
		}
		seq += x->batch;
	}
	fill(buf, words, SENTINEL);
	if (x->kind == RING)
		return sfs_ring_enqueue_wait(x->ring, buf, 1, 5000000000ull) == 1 ? 0 : 3;
	if (sfs_write_all(x->fd[1], buf, x->esize, "pipe"))
		return 3;
	close(x->fd[1]);
	return 0;
}

/* Check one batch of whole records; 1 when the sentinel was among them. */
static int take(struct ctl *c, const uint64_t *recs, unsigned n, unsigned words,
		uint64_t *next)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t seq = recs[(size_t)i * words];

		if (seq == SENTINEL)
			return 1;
		if (seq != *next)
			c->errors++;
		*next = seq + 1;
		c->count++;
	}
	return 0;
}

static int consumer(struct run *x)
{
	uint64_t buf[MAX_BATCH * MAX_ESIZE / 8], next = 0;
	unsigned words = x->esize / 8;
	size_t cap = (size_t)x->batch * x->esize, have = 0;
	struct ctl *c = x->ctl;
	int done = 0;

	if (x->kind == PIPE)
		close(x->fd[1]);
	wait_go(c);
	while (!done) {
		if (x->kind == RING) {
			int k = sfs_ring_dequeue_wait(x->ring, buf, x->batch, 5000000000ull);

			if (k <= 0)
				return 4;
			done = take(c, buf, (unsigned)k, words, &next);
		} else {
			ssize_t r = read(x->fd[0], (char *)buf + have, cap - have);
			size_t whole;

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return 4;
			have += (size_t)r;
			whole = have / x->esize;
			done = take(c, buf, (unsigned)whole, words, &next);
			have -= whole * x->esize;
			memmove(buf, (char *)buf + whole * x->esize, have);
		}
	}
	c->t_end = sfs_now_ns();
	return 0;
}

static pid_t spawn(int (*fn)(struct run *), struct run *x)
{
	pid_t parent = getpid(), pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(120);
		_exit(fn(x));
	}
	return pid;
}

/* Exit code of @pid, killing it if it is not done within 10 s. */
static int reap(pid_t pid)
{
	uint64_t end = sfs_now_ns() + 10000000000ull;
	int st;

	while (waitpid(pid, &st, WNOHANG) != pid) {
		if (sfs_now_ns() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		sfs_sleep_ns(1000000);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One run: records/s, or a negative value on failure.  *wakes: futex wakes
 * the ring issued (ring runs). */
static double one_run(int kind, unsigned esize, unsigned batch, uint64_t run_ns,
		      struct ctl *c, void *ringmem, uint64_t *wakes)
{
	struct run x = { kind, esize, batch, c, ringmem, { -1, -1 } };
	struct sfs_ring_stats st;
	pid_t prod, cons;
	uint64_t t0;
	int rp, rc;

	memset(c, 0, sizeof(*c));
	if (kind == RING) {
		if (sfs_ring_init(ringmem, PIPE_BYTES / esize, esize, SFS_RING_SPSC)) {
			fprintf(stderr, "bench_ring: ring init: %s\n", sfs_last_error());
			exit(1);
		}
	} else if (pipe(x.fd)) {
		perror("pipe");
		exit(1);
	}
	cons = spawn(consumer, &x);
	prod = spawn(producer, &x);
	if (kind == PIPE) {
		close(x.fd[0]);
		close(x.fd[1]);
	}
	while (sfs_load_acquire(&c->ready) < 2)
		sfs_sleep_ns(100000);
	t0 = sfs_now_ns();
	sfs_store_release(&c->go, 1);
	sfs_futex_wake(&c->go, INT_MAX);
	sfs_sleep_ns(run_ns);
	sfs_store_release(&c->stop, 1);
	rp = reap(prod);
	rc = reap(cons);
	if (rp || rc || c->errors) {
		fprintf(stderr, "bench_ring: %s run failed: producer %d, consumer %d, %d errors\n",
			kind == RING ? "ring" : "pipe", rp, rc, c->errors);
		return -1;
	}
	if (kind == RING) {
		sfs_ring_stats(ringmem, &st);
		*wakes = st.cons_wakes + st.prod_wakes;
	}
	return (double)c->count * 1e9 / (double)(c->t_end - t0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	static const unsigned esizes[] = { 16, 64 }, batches[] = { 1, 32, 256 };
	uint64_t run_ns = (argc > 1 ? strtoull(argv[1], NULL, 10) : 200) * 1000000ull;
	size_t ringlen = sfs_ring_memsize(PIPE_BYTES / 16, 16);
	struct ctl *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	void *ringmem = mmap(NULL, ringlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			     -1, 0);
	int failed = 0;

	if (c == MAP_FAILED || ringmem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	printf("bench_ring: producer process -> consumer process, 64 KiB of buffer each,\n"
	       "%llu ms per run, median of %d runs (ring and pipe alternate)\n\n",
	       (unsigned long long)(run_ns / 1000000), REPS);
	printf("%6s %6s | %14s %14s | %15s | %11s\n", "esize", "batch", "ring Mrec/s",
	       "pipe Mrec/s", "ratio ring/pipe", "ring wakes");
	printf("-------------------------------------------------------------------------------\n");
	for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++) {
		for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
			double ring[REPS], pipe_[REPS], ratio[REPS], wk[REPS];

			for (int i = 0; i < REPS; i++) {
				uint64_t wakes = 0, unused;

				ring[i] = one_run(RING, esizes[e], batches[b], run_ns, c, ringmem,
						  &wakes);
				pipe_[i] = one_run(PIPE, esizes[e], batches[b], run_ns, c, NULL,
						   &unused);
				wk[i] = (double)wakes;
				if (ring[i] < 0 || pipe_[i] < 0) {
					failed = 1;
					continue;
				}
				ratio[i] = ring[i] / pipe_[i];
			}
			if (failed)
				break;
			printf("%6u %6u | %14.2f %14.2f | %15.1f | %11.0f\n", esizes[e], batches[b],
			       median(ring, REPS) / 1e6, median(pipe_, REPS) / 1e6,
			       median(ratio, REPS), median(wk, REPS));
			fflush(stdout);
		}
	}
	return failed;
}
