/*
 * open.c — the public opens that need a segment's flush target:
 * sfs_worker_open and sfs_query_open (include/sfs.h).  The worker layer
 * does the work (worker/open.h) but cannot name the targets, which live
 * above it; these two hand it the registry's lookup (store/registry.c),
 * so every call runs down the layers.  The cost: one indirect call per
 * open.
 */
#include "sfs.h"
#include "store/target.h"
#include "worker/open.h"

int sfs_worker_open(const char *job, int node, uint32_t worker, const struct sfs_worker_opts *opts,
		    sfs_ctx_t **out)
{
	return sfs__worker_open(job, node, worker, opts, sfs_target_read_of, out);
}

int sfs_query_open(sfs_handle_t *h, const char *state, sfs_query_t **out)
{
	return sfs__query_open(h, state, sfs_target_read_of, out);
}
