/*
 * open.h — the worker layer's opens of the public API's sfs_worker_open and
 * sfs_query_open, given how to find a segment's flush target.  The targets
 * live above this layer (store/), so the worker cannot name them: the
 * public functions (store/open.c, at the registry's layer) pass
 * store/registry.c's sfs_target_read_of down, and the worker calls it once
 * its segment is attached.  Everything else is as include/sfs.h says of
 * the public functions.
 */
#ifndef SFS_WORKER_OPEN_H
#define SFS_WORKER_OPEN_H

#include <stdint.h>

#include "sfs.h"
#include "worker/target_read.h"

/* sfs_worker_open (worker/state.c); @read_of: the segment's target. */
int sfs__worker_open(const char *job, int node, uint32_t worker,
		     const struct sfs_worker_opts *opts, sfs_target_read_of_fn *read_of,
		     sfs_ctx_t **out);

/* sfs_query_open (worker/query.c); @read_of: the segment's target. */
int sfs__query_open(sfs_handle_t *h, const char *state, sfs_target_read_of_fn *read_of,
		    sfs_query_t **out);

#endif
