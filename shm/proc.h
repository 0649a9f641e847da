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

#include <errno.h>

#include "common/clock.h"
#include "shm/atomic.h"
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

/*
 * I/O trouble (issue 22): a write this process must make failed with @err
 * (a negative errno): the first failure of an episode records since when
 * and why (later ones keep it); @err 0 ends the episode.  Only the classes
 * a retry may cure once an operator acts count (sfs_io_trouble_errno:
 * no space, quota, I/O error, file too big, read-only file system);
 * others are left to the caller.  Returns 1 when @err starts an episode
 * (the caller logs it once, naming the file), else 0.  A relaxed load and
 * store of the slot's word: callers on several threads may race, and the
 * word stays some failure's (or 0 after a success): it is a report.
 */
static inline int sfs_io_trouble_errno(int err)
{
	err = err < 0 ? -err : err;
	return err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG || err == EROFS;
}

static inline int sfs_proc_io(struct sfs_proc_slot *slot, int err)
{
	uint64_t was;

	if (!slot)
		return 0;
	was = sfs_load_relaxed(&slot->ps_io);
	if (!err) {
		if (was)
			sfs_store_relaxed(&slot->ps_io, 0);
		return 0;
	}
	if (!sfs_io_trouble_errno(err) || was)
		return 0;
	sfs_store_relaxed(&slot->ps_io, (sfs_now_ns() / 1000000) << 16 |
					(uint64_t)((err < 0 ? -err : err) & 0xffff));
	return 1;
}

/* The LIVE slot of @role/@index whose process is alive, or NULL. */
struct sfs_proc_slot *sfs_proc_find(struct sfs_seg *s, unsigned role, uint32_t index);

#endif
