/*
 * layout.c — the layout fingerprint of every struct that lives in shared
 * memory, as LMDB fingerprints its lock file: a hash over sizeof and offsetof
 * of each field.  A segment created by a build with another layout is
 * refused at attach ("layout fingerprint differs") instead of misread.
 * shm/'s own structs are hashed here field by field (add new fields
 * here), shm's region structs by their module's fingerprint (ring,
 * alloc); the structs of the modules above shm/ come in as parts, from the
 * one list in store/layout.c (shm/layout.h says why a list and not
 * constructors), so shm/ includes nothing above it.  The _Static_asserts
 * pin the properties the code relies on (one cache line per slot, etc.).
 */
#include <stddef.h>
#include <stdint.h>

#include "common/fingerprint.h"
#include "shm/alloc.h"
#include "shm/ckpt.h"
#include "shm/layout.h"
#include "shm/ring.h"
#include "shm/segment.h"

_Static_assert(sizeof(struct sfs_proc_slot) == SFS_CACHE_LINE, "a process slot is one cache line");
_Static_assert(sizeof(struct sfs_child_desc) == SFS_CACHE_LINE, "a child entry is one cache line");
_Static_assert(sizeof(struct sfs_region_desc) == SFS_CACHE_LINE, "a region entry is one cache line");
_Static_assert(offsetof(struct sfs_seg_hdr, sh_magic) == 0, "magic first");
_Static_assert(offsetof(struct sfs_seg_hdr, sh_qsbr_token) % SFS_CACHE_LINE == 0,
	       "QSBR token on its own line");


uint64_t sfs_layout_fingerprint_of(const struct sfs_layout_part *parts)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_seg_hdr);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_magic);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_version);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_flags);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_fingerprint);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_size);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_page_size);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_generation);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_owner_pid);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_node);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_owner_start);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_created_ns);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_job);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_backend);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_data_dir);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_shutdown);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_nchildren);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_bump);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_data_off);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_regions_ready);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_qsbr_token);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_bell);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_bell_sleeping);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_states);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_children);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_regions);
	SFS_FP_FIELD(h, struct sfs_seg_hdr, sh_procs);

	SFS_FP_SIZE(h, struct sfs_proc_slot);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_claim);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_pid);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_role);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_start);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_index);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_node);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_heartbeat);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_qsbr);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_attached_ns);
	SFS_FP_FIELD(h, struct sfs_proc_slot, ps_io);

	SFS_FP_SIZE(h, struct sfs_child_desc);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_state);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_role);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_index);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_pid);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_restarts);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_hang_kills);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_cpu);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_last_status);
	SFS_FP_FIELD(h, struct sfs_child_desc, cd_started_ns);

	SFS_FP_SIZE(h, struct sfs_state_desc);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_state);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_kind);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_merge);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_name);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_merge_name);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_ttl_flags);
	SFS_FP_FIELD(h, struct sfs_state_desc, sd_ttl_ms);

	SFS_FP_SIZE(h, struct sfs_region_desc);
	SFS_FP_FIELD(h, struct sfs_region_desc, rd_state);
	SFS_FP_FIELD(h, struct sfs_region_desc, rd_owner_role);
	SFS_FP_FIELD(h, struct sfs_region_desc, rd_off);
	SFS_FP_FIELD(h, struct sfs_region_desc, rd_size);
	SFS_FP_FIELD(h, struct sfs_region_desc, rd_name);

	/* Structs placed inside regions keep their own fingerprints (checked
	 * when a region or ring is attached); a segment of a build where they
	 * differ is refused up front too. */
	h = sfs_fp(h, sfs_alloc_layout());
	h = sfs_fp(h, sfs_ring_layout());
	h = sfs_ckpt_layout(h);
	for (const struct sfs_layout_part *p = parts; p->fp; p++)
		h = sfs_fp(h, p->fp());
	return h;
}

uint64_t sfs_layout_fingerprint(void)
{
	return sfs_layout_fingerprint_of(sfs_layout_parts);
}
