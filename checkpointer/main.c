/*
 * checkpointer/main.c — sfs-checkpointer: one process of the supervised group.
 *
 * For a query job with --checkpoint-interval it drives the barriers and
 * completes checkpoints (coord.c over the storage of ckstore.c); otherwise
 * it does only what every child does (shm/child.c): attach, register,
 * heartbeat, report quiescent states, stop on SIGTERM.  Killed, it is
 * restarted by the supervisor and completes the checkpoint in flight.
 */
#include <errno.h>
#include <stdlib.h>

#include "checkpointer/coord.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "shm/child.h"

static struct ck_coord coord;
static int coord_on;

static int step(struct sfs_child *c, unsigned budget)
{
	uint64_t poll = 0;
	int rc;

	(void)budget;
	if (!coord_on)
		return 0;
	rc = sfs__ck_coord_step(&coord, sfs_now_ns(), &poll);
	if (rc < 0) {
		sfs_log("checkpoint coordination failed: %s", sfs_last_error());
		return rc;
	}
	c->idle_ns = poll && poll < c->heartbeat_ns ? poll : 0;
	return rc;
}

int main(int argc, char **argv)
{
	struct sfs_child c;
	int rc;

	sfs_child_args(&c, SFS_ROLE_CHECKPOINTER, argc, argv);
	if (sfs_child_start(&c))
		return 1;
	rc = sfs__ck_coord_open(&coord, &c.seg, c.job);
	if (rc == 0) {
		coord_on = 1;
		coord.self = c.slot;
	}
	else if (rc != -ENOENT) {
		sfs_log("%s", sfs_last_error());
		sfs_child_finish(&c);
		return 1;
	}
	sfs_log("attached to job %s (segment %s), slot %ld%s", c.job, c.seg.path,
		(long)(c.slot - c.seg.hdr->sh_procs),
		coord_on ? ", driving checkpoints" : "");
	rc = sfs_child_loop(&c, step);
	sfs__ck_coord_close(&coord);
	sfs_child_finish(&c);
	sfs_log("stopped");
	return rc ? 1 : 0;
}
