/*
 * worker/main.c — sfs-worker: one process of the supervised group.
 *
 * It does what every child does (shm/child.c): attach, register, heartbeat,
 * report quiescent states, stop on SIGTERM.  When the group runs a query
 * (`sfs run --query`), the segment holds the job's description and the
 * worker runs one subtask of every operator over its key-group range
 * (runtime/engine.h), on the public API only: this skeleton hands it the
 * job's name, its index and two callbacks of its own (the heartbeat of its
 * slot, the stop flag).  It also registers the state backends that live
 * above the runtime (the rocksdb-direct baseline, baseline/), so the
 * runtime finds them by name without naming them.
 */
#include <errno.h>
#include <stdlib.h>

#include "baseline/rocksdb_direct.h"
#include "common/log.h"
#include "query/queries.h"
#include "runtime/engine.h"
#include "shm/child.h"
#include "shm/qsbr.h"

static void beat(void *arg)
{
	struct sfs_child *c = arg;

	sfs_proc_heartbeat(c->slot);
}

int main(int argc, char **argv)
{
	struct sfs_child c;
	struct rt_engine_env env;
	int rc;

	sfs_child_args(&c, SFS_ROLE_WORKER, argc, argv);
	if (sfs_child_start(&c))
		return 1;
	sfs_log("attached to job %s (segment %s), slot %ld",
		c.job, c.seg.path, (long)(c.slot - c.seg.hdr->sh_procs));
	env = (struct rt_engine_env){ .job = c.job, .node = c.node, .index = c.index,
				      .heartbeat_ns = c.heartbeat_ns, .beat = beat,
				      .beat_arg = &c, .stop = &sfs_child_stop,
				      .query_find = rt_query_find };
	/* Every state read of the engine goes through its backend's own
	 * registration (the sfs context's slot); this slot only beats.  Left
	 * online it would hold the compactor's grace periods while a barrier
	 * waits for the compactor: a deadlock. */
	sfs_qsbr_offline(c.slot);
	/* The backends above the runtime, which it finds by name only
	 * (runtime/backend.h); bin/sfs registers the same ones. */
	rc = rt_backend_register(&rt_backend_rocksdb_direct);
	if (rc == 0)
		rc = rt_engine_run(&env);
	if (rc == -ENOENT) {
		sfs_qsbr_online(c.seg.hdr, c.slot);
		rc = sfs_child_loop(&c, NULL);
	}
	sfs_child_finish(&c);
	sfs_log("stopped");
	return rc ? 1 : 0;
}
