/*
 * proc.h — the process table: one cache-line slot per attached process
 * (struct sfs_proc_slot in shm/segment.h), with liveness that survives pid
 * reuse (pid + /proc start time).
 *
 * The owner of a slot writes its fields; anyone reads them.  Claiming is one
 * CAS on ps_claim (generation | state), so two processes racing for the same
 * free or dead slot cannot both win, and a slot recycled in between (ABA)
 * makes the CAS fail.
 */
#ifndef SFS_SHM_PROC_H
#define SFS_SHM_PROC_H

#include "common/clock.h"
#include "shm/segment.h"

#define SFS_SLOT_STATE(claim) ((uint32_t)((claim) & 0xff))
#define SFS_SLOT_GEN(claim) ((claim) >> 8)

/*
 * sfs_proc_register - take a free slot, or the slot of a dead process, for
 * this process as @role instance @index.  Its QSBR counter starts offline.
 * Returns SFS_EFULL when every slot belongs to a live process.
 * Cost: a scan of the table; /proc reads only for slots that look taken.
 */
int sfs_proc_register(struct sfs_seg *s, unsigned role, uint32_t index,
		      struct sfs_proc_slot **out);

/* Give the slot back (clean exit).  A killed process never calls this: its
 * slot is found dead by the next claimer or grace period. */
void sfs_proc_unregister(struct sfs_proc_slot *slot);

/* Live = claimed LIVE and its pid + start time still name a running process.
 * Slow path (reads /proc). */
int sfs_proc_slot_alive(const struct sfs_proc_slot *slot);

/* Heartbeat: one relaxed store, no syscall beyond the vDSO clock. */
static inline void sfs_proc_heartbeat(struct sfs_proc_slot *slot)
{
	sfs_store_relaxed(&slot->ps_heartbeat, sfs_now_ns());
}

/* The LIVE slot of @role/@index whose process is alive, or NULL. */
struct sfs_proc_slot *sfs_proc_find(struct sfs_seg *s, unsigned role, uint32_t index);

#endif
