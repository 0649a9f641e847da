/*
 * handle.h — the process-local side of an sfs_handle_t (include/sfs.h's
 * opaque attach handle), for the modules above shm/ that read shared state
 * through one (worker/query.c: queryable state).  Internal: never in
 * shared memory, never in the public header.
 */
#ifndef SFS_SHM_HANDLE_H
#define SFS_SHM_HANDLE_H

#include "shm/proc.h"

struct sfs_handle {
	struct sfs_seg seg;
	struct sfs_proc_slot *slot;   /* NULL for an observer (SFS_ATTACH_OBSERVER) */
	unsigned quiescents;          /* heartbeat every 64th */
};

#endif
