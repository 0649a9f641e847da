/*
 * worker/main.c — sfs-worker: one process of the supervised group.
 *
 * When the group runs a query (`sfs run --query`), the segment holds the
 * job's description and the worker runs one subtask of every operator over
 * its key-group range (runtime/engine.h).  Otherwise it does what every
 * child does (shm/child.c): attach, register, heartbeat, report
 * quiescent states, stop on SIGTERM.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "runtime/engine.h"
#include "shm/child.h"

int main(int argc, char **argv)
{
	struct sfs_child c;
	int rc;

	sfs_child_args(&c, SFS_ROLE_WORKER, argc, argv);
	if (sfs_child_start(&c))
		return 1;
	sfs_log("attached to job %s (segment %s), slot %ld",
		c.job, c.seg.path, (long)(c.slot - c.seg.hdr->sh_procs));
	rc = rt_engine_run(&c);
	if (rc == -ENOENT)
		rc = sfs_child_loop(&c, NULL);
	sfs_child_finish(&c);
	sfs_log("stopped");
	return rc ? 1 : 0;
}
