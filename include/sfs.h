/*
 * sfs.h — the public API of sfs, a multi-process shared-memory keyed-state
 * store for stream processors.
 *
 * Rules of the whole API (stated once, as RocksDB's c.h and LMDB do):
 *  - Handles are opaque; every object has a create/destroy (or attach/detach)
 *    pair.  Nothing here exposes a struct layout.
 *  - Every call returns int: 0 on success or a negative code: -errno for
 *    system errors, or one of the SFS_E* library codes below (a reserved
 *    range far from errno).  sfs_strerror() names a code; sfs_last_error()
 *    returns this thread's human message for the last failure, naming the
 *    file or object and what was expected.
 *  - Every placing call takes a NUMA node; SFS_NODE_ANY lets sfs choose.
 *
 * Caveats (as LMDB's header opens with):
 *  - A process may die at any instruction.  Its slot in the process table is
 *    found dead by pid + start time (immune to pid reuse) and never blocks
 *    a grace period; it is reclaimed by the next attach that needs a slot.
 *  - Do not fork() while attached and use the handle in the child: the child
 *    is another process and must sfs_attach() itself.
 *  - A handle is not thread-safe: use one per thread that reads state.
 */
#ifndef SFS_H
#define SFS_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SFS_VERSION_MAJOR 0
#define SFS_VERSION_MINOR 1

#define SFS_NODE_ANY (-1)

/* Library error codes: a reserved negative range (LMDB-style). */
enum {
	SFS_E_BASE = -30800,
	SFS_EMAGIC = SFS_E_BASE,   /* not an sfs segment / file */
	SFS_EVERSION,              /* format version differs */
	SFS_ELAYOUT,               /* layout fingerprint differs */
	SFS_EFOREIGN,              /* belongs to another job or uid */
	SFS_EFULL,                 /* table, region or arena full */
	SFS_ESTALE,                /* owner is dead: stale object */
	SFS_ERUNNING,              /* already running (live owner) */
	SFS_EUSAGE,                /* bad argument */
	SFS_ECORRUPT,              /* checksum or structure wrong */
	SFS_ETIMEDOUT,             /* bounded wait ran out */
	SFS_E_LAST
};

/* Maximum length of a job name (without the terminating NUL). */
#define SFS_JOB_NAME_MAX 47

typedef struct sfs_handle sfs_handle_t;

/* Attach flags. */
#define SFS_ATTACH_OBSERVER 0x1u  /* take no process-table slot (sfs stat) */

/*
 * sfs_attach - map the segment of job @job on NUMA node @node and register
 * this process in its process table as an external reader (role "client").
 * @node: the segment's node (SFS_NODE_ANY: node 0's segment).
 * Refuses a segment of another uid, another magic, format version or layout
 * fingerprint, naming the field that differs.  Cost: open + mmap, once.
 */
int sfs_attach(const char *job, int node, unsigned flags, sfs_handle_t **out);

/* sfs_detach - leave the process table (slot freed) and unmap. */
int sfs_detach(sfs_handle_t *h);

/*
 * Quiescent-state reporting for an attached reader (cross-process QSBR).
 * A view of shared state obtained while online stays valid until the next
 * sfs_quiescent() or sfs_offline().  All three are plain stores in shared
 * memory: no syscall.
 */
void sfs_online(sfs_handle_t *h);
void sfs_quiescent(sfs_handle_t *h);
void sfs_offline(sfs_handle_t *h);

/* A NUL-terminated name for @err (a negative code). */
const char *sfs_strerror(int err);

/* This thread's message for the last failed call ("" if none). */
const char *sfs_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* SFS_H */
