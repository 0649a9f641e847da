/*
 * worker/main.c — sfs-worker: one process of the supervised group.
 *
 * Its job: one subtask of every operator over its key-group range: write buffers, value cache, join batches (the state and runtime issues).
 * Until that lands it does only what every child does (common/child.c):
 * attach, register, heartbeat, report quiescent states, stop on SIGTERM.
 * It does no pretend work.
 */
#include <stdlib.h>

#include "common/child.h"
#include "common/log.h"

int main(int argc, char **argv)
{
	struct sfs_child c;
	int rc;

	sfs_child_args(&c, SFS_ROLE_WORKER, argc, argv);
	if (sfs_child_start(&c))
		return 1;
	sfs_log("attached to job %s (segment %s), slot %ld",
		c.job, c.seg.path, (long)(c.slot - c.seg.hdr->sh_procs));
	rc = sfs_child_loop(&c, NULL);
	sfs_child_finish(&c);
	sfs_log("stopped");
	return rc ? 1 : 0;
}
