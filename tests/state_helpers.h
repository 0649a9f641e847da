/*
 * state_helpers.h — what the keyed-state tests share: an in-process
 * compactor the test steps by hand, the real compactor binary as a child,
 * and small worker options.  Needs the test file's `job`.
 */
#ifndef SFS_TESTS_STATE_HELPERS_H
#define SFS_TESTS_STATE_HELPERS_H

#include <limits.h>

#include "compactor/flush.h"
#include "tests/helpers.h"
#include "worker/state.h"

static char job[64];

static const char *bin_dir(void)
{
	const char *b = getenv("SFS_BIN");

	return b && *b ? b : "bin";
}

static struct sfs_worker_opts small_opts(void)
{
	return (struct sfs_worker_opts){ .buffers = 4, .buffer_bytes = 1 << 20,
					 .buffer_keys = 8192 };
}

/* An in-process compactor: its own slot, stepped by the test. */
struct inproc {
	struct sfs_seg seg;
	struct sfs_proc_slot *slot;
	struct sfs_flusher f;
};

static void inproc_start(struct inproc *p)
{
	cr_assert_eq(sfs_seg_attach(job, 0, &p->seg), 0);
	cr_assert_eq(sfs_proc_register(&p->seg, SFS_ROLE_COMPACTOR, 0, &p->slot), 0);
	cr_assert_eq(sfs_flusher_init(&p->f, &p->seg, p->slot, 16u << 20), 0);
}

/* Step until idle (every sealed buffer flushed and freed).  The worker in
 * this process must be quiescent, which the caller arranges. */
static void inproc_drain(struct inproc *p, sfs_ctx_t *c)
{
	/* Bounded by time: a dead reader's slot is skipped only once its
	 * heartbeat is stale (shm/qsbr.c), a fraction of a second. */
	uint64_t deadline = sfs_now_ns() + 10000000000ull;

	while (sfs_now_ns() < deadline) {
		int pending = 0, rc;

		sfs_ctx_quiescent(c);
		rc = sfs_flusher_step(&p->f, 1000, &pending);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (rc == 0 && !pending)
			return;
		if (rc == 0)
			usleep(200);
	}
	cr_assert_fail("flusher never went idle");
}

static void inproc_stop(struct inproc *p)
{
	sfs_flusher_fini(&p->f);
	sfs_proc_unregister(p->slot);
	sfs_seg_detach(&p->seg);
}

/* The real compactor binary as a child; @lib: its --merge-lib (NULL: none). */
static pid_t start_compactor_lib(const char *lib)
{
	char path[PATH_MAX];
	pid_t parent = getpid(), pid;

	snprintf(path, sizeof(path), "%s/sfs-compactor", bin_dir());
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		setenv("SFS_STORE_MB", "16", 1);
		execl(path, path, "--job", job, "--heartbeat-ms", "20", lib ? "--merge-lib" : NULL,
		      lib, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static pid_t start_compactor(void)
{
	return start_compactor_lib(NULL);
}

/* Wait (quiescent, as a worker between batches is) until every sealed
 * buffer up to @seq is flushed. */
static int wait_flushed(sfs_ctx_t *c, uint64_t seq, int ms)
{
	struct sfs_worker_stats ws;

	for (int i = 0; i < ms; i++) {
		sfs_ctx_quiescent(c);
		sfs_worker_stats(c, &ws);
		if (ws.flushed_seq >= seq)
			return 1;
		usleep(1000);
	}
	return 0;
}

#endif
