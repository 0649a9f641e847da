/*
 * compactor/main.c — sfs-compactor: one per NUMA node.
 *
 * Flushes the sealed write buffers of every worker on its node to the flush
 * target (today the `memory` target: compactor/flush.c, store/memory/),
 * publishes each flushed version, and hands buffers back after a grace
 * period.  It sleeps on the segment's doorbell when there is nothing to do;
 * workers ring it at their barriers.  SFS_MAINT_THREADS=N (set by `sfs run
 * --maintenance-threads`, default 1): the per-worker work runs on N
 * threads, worker w on thread w mod N (compactor/flush.h); the main thread
 * keeps the doorbell, the heartbeat and the QSBR slot.
 */
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "compactor/flush.h"
#include "shm/child.h"

#define STORE_BYTES_DEFAULT (256ull << 20)

static struct sfs_flusher flusher;

static int step(struct sfs_child *c, unsigned budget)
{
	int pending = 0;
	int rc = sfs_flusher_step(&flusher, budget * 16, &pending);

	/* While a grace period or a failed flush is pending, poll every
	 * millisecond instead of sleeping a whole beat (threads poll their
	 * own). */
	c->idle_ns = pending && !sfs_flusher_nthreads(&flusher) ? 1000000ull : 0;
	return rc;
}

int main(int argc, char **argv)
{
	struct sfs_child c;
	const char *env = getenv("SFS_STORE_MB"), *nt = getenv("SFS_MAINT_THREADS");
	uint64_t store = env ? strtoull(env, NULL, 10) << 20 : STORE_BYTES_DEFAULT;
	char *end = NULL;
	unsigned long threads = nt && *nt ? strtoul(nt, &end, 10) : 1;
	int rc;

	sfs_child_args(&c, SFS_ROLE_COMPACTOR, argc, argv);
	if (sfs_child_start(&c))
		return 1;
	c.wake_word = &c.seg.hdr->sh_bell;
	c.wake_flag = &c.seg.hdr->sh_bell_sleeping;
	if (nt && *nt && (*end || threads < 1 || threads > SFS_FLUSH_MAX_WORKERS)) {
		sfs_log("SFS_MAINT_THREADS='%s': want 1..%d", nt, SFS_FLUSH_MAX_WORKERS);
		sfs_child_finish(&c);
		return SFS_CHILD_EXIT_FATAL;
	}
	if (sfs_flusher_init(&flusher, &c.seg, c.slot, store) ||
	    sfs_flusher_threads(&flusher, (unsigned)threads, c.heartbeat_ns)) {
		sfs_log("%s", sfs_last_error());
		sfs_flusher_fini(&flusher);
		sfs_child_finish(&c);
		return 1;
	}
	sfs_log("attached to job %s (segment %s), flushing to the %s target, %lu maintenance "
		"thread(s)", c.job, c.seg.path, flusher.ops->name, threads);
	rc = sfs_child_loop(&c, step);
	if (rc)
		sfs_log("flush loop stopped: %s", sfs_last_error());
	if (rc && sfs_flusher_fatal(rc)) {
		/* No restart repairs it and the group stops: leave now, as a
		 * kill -9 would, which every target survives.  An orderly
		 * close could wait seconds for a half-written memory dump
		 * (q20 at 20M: 1.7 GB), and a compactor silent that long is
		 * killed as hung and restarted instead of failing the group.
		 * The slot stays registered until the process is gone (a
		 * dead pid frees it): released first, the seconds the kernel
		 * takes to unmap a large segment looked to the supervisor
		 * like a compactor that never registered, killed and
		 * restarted instead of reaped with this status. */
		_exit(SFS_CHILD_EXIT_FATAL);
	}
	sfs_flusher_fini(&flusher);
	sfs_child_finish(&c);
	sfs_log("stopped");
	/* A store that can never open, a merge operator this process lacks
	 * (SFS_EUSAGE from the buffer's check): no restart repairs them. */
	return !rc ? 0 : sfs_flusher_fatal(rc) ? SFS_CHILD_EXIT_FATAL : 1;
}
