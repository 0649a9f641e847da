/*
 * proc.c — claiming and releasing process-table slots.
 */
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/procinfo.h"
#include "shm/proc.h"

int sfs_proc_slot_alive(const struct sfs_proc_slot *slot)
{
	uint64_t claim = sfs_load_acquire(&slot->ps_claim);

	if (SFS_SLOT_STATE(claim) != SFS_SLOT_LIVE)
		return 0;
	return sfs_proc_alive(slot->ps_pid, slot->ps_start);
}

int sfs_proc_register(struct sfs_seg *s, unsigned role, uint32_t index,
		      struct sfs_proc_slot **out)
{
	pid_t pid = getpid();
	uint64_t start = sfs_proc_starttime(pid);

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < SFS_MAX_PROCS; i++) {
			struct sfs_proc_slot *sl = &s->hdr->sh_procs[i];
			uint64_t claim = sfs_load_acquire(&sl->ps_claim);
			uint32_t st = SFS_SLOT_STATE(claim);

			/* First pass takes free slots only; the second also
			 * recycles LIVE slots of dead processes (costs /proc
			 * reads).  A CLAIMED slot is never recycled: its identity
			 * fields are being rewritten and may still name the dead
			 * previous owner.  A claimer killed inside this function
			 * leaks its slot — a window of a few stores. */
			if (st == SFS_SLOT_CLAIMED)
				continue;
			if (st == SFS_SLOT_LIVE) {
				if (pass == 0 || sfs_proc_alive(sl->ps_pid, sl->ps_start))
					continue;
			}
			uint64_t mine = ((SFS_SLOT_GEN(claim) + 1) << 8) | SFS_SLOT_CLAIMED;
			if (uatomic_cmpxchg(&sl->ps_claim, claim, mine) != claim)
				continue;
			sfs_store_relaxed(&sl->ps_qsbr, 0);
			sl->ps_pid = (int32_t)pid;
			sl->ps_start = start;
			sl->ps_role = role;
			sl->ps_index = index;
			sl->ps_node = 0;
			sl->ps_attached_ns = sfs_now_ns();
			sl->ps_io = 0;
			sl->ps_heartbeat = sl->ps_attached_ns;
			sfs_store_release(&sl->ps_claim, (mine & ~0xffull) | SFS_SLOT_LIVE);
			*out = sl;
			return 0;
		}
	}
	return sfs__err(SFS_EFULL, "segment %s: process table full (%d live processes)", s->path,
			SFS_MAX_PROCS);
}

void sfs_proc_unregister(struct sfs_proc_slot *slot)
{
	uint64_t claim = sfs_load_relaxed(&slot->ps_claim);

	sfs_store_release(&slot->ps_qsbr, 0);
	slot->ps_pid = 0;
	slot->ps_start = 0;
	sfs_store_release(&slot->ps_claim, (claim & ~0xffull) | SFS_SLOT_FREE);
}

struct sfs_proc_slot *sfs_proc_find(struct sfs_seg *s, unsigned role, uint32_t index)
{
	for (unsigned i = 0; i < SFS_MAX_PROCS; i++) {
		struct sfs_proc_slot *sl = &s->hdr->sh_procs[i];

		if (SFS_SLOT_STATE(sfs_load_acquire(&sl->ps_claim)) == SFS_SLOT_LIVE &&
		    sl->ps_role == role && sl->ps_index == index && sfs_proc_slot_alive(sl))
			return sl;
	}
	return NULL;
}
