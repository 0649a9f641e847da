/*
 * layout.c — the layout fingerprint of every struct that lives in shared
 * memory, as LMDB fingerprints its lock file: a hash over sizeof and offsetof
 * of each field.  A segment created by a build with another layout is
 * refused at attach ("layout fingerprint differs") instead of misread.
 * Add every new shared struct and field here (or fold in its module's own
 * fingerprint, as ring and alloc do); the _Static_asserts pin the
 * properties the code relies on (one cache line per slot, etc.).
 */
#include <stddef.h>
#include <stdint.h>

#include "shm/alloc.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "target/memory.h"
#include "worker/wbuf.h"
#include "worker/wctl.h"

_Static_assert(sizeof(struct sfs_proc_slot) == SFS_CACHE_LINE, "a process slot is one cache line");
_Static_assert(sizeof(struct sfs_child_desc) == SFS_CACHE_LINE, "a child entry is one cache line");
_Static_assert(sizeof(struct sfs_region_desc) == SFS_CACHE_LINE, "a region entry is one cache line");
_Static_assert(offsetof(struct sfs_seg_hdr, sh_magic) == 0, "magic first");
_Static_assert(offsetof(struct sfs_seg_hdr, sh_qsbr_token) % SFS_CACHE_LINE == 0,
	       "QSBR token on its own line");

static uint64_t fnv(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= 0x100000001b3ull;
	}
	return h;
}

#define F(h, type, field) \
	h = fnv(fnv(h, offsetof(type, field)), sizeof(((type *)0)->field))
#define S(h, type) h = fnv(h, sizeof(type))

uint64_t sfs_layout_fingerprint(void)
{
	uint64_t h = 0xcbf29ce484222325ull;

	S(h, struct sfs_seg_hdr);
	F(h, struct sfs_seg_hdr, sh_magic);
	F(h, struct sfs_seg_hdr, sh_version);
	F(h, struct sfs_seg_hdr, sh_flags);
	F(h, struct sfs_seg_hdr, sh_fingerprint);
	F(h, struct sfs_seg_hdr, sh_size);
	F(h, struct sfs_seg_hdr, sh_page_size);
	F(h, struct sfs_seg_hdr, sh_generation);
	F(h, struct sfs_seg_hdr, sh_owner_pid);
	F(h, struct sfs_seg_hdr, sh_node);
	F(h, struct sfs_seg_hdr, sh_owner_start);
	F(h, struct sfs_seg_hdr, sh_created_ns);
	F(h, struct sfs_seg_hdr, sh_job);
	F(h, struct sfs_seg_hdr, sh_backend);
	F(h, struct sfs_seg_hdr, sh_shutdown);
	F(h, struct sfs_seg_hdr, sh_nchildren);
	F(h, struct sfs_seg_hdr, sh_bump);
	F(h, struct sfs_seg_hdr, sh_data_off);
	F(h, struct sfs_seg_hdr, sh_qsbr_token);
	F(h, struct sfs_seg_hdr, sh_bell);
	F(h, struct sfs_seg_hdr, sh_bell_sleeping);
	F(h, struct sfs_seg_hdr, sh_states);
	F(h, struct sfs_seg_hdr, sh_children);
	F(h, struct sfs_seg_hdr, sh_regions);
	F(h, struct sfs_seg_hdr, sh_procs);

	S(h, struct sfs_proc_slot);
	F(h, struct sfs_proc_slot, ps_claim);
	F(h, struct sfs_proc_slot, ps_pid);
	F(h, struct sfs_proc_slot, ps_role);
	F(h, struct sfs_proc_slot, ps_start);
	F(h, struct sfs_proc_slot, ps_index);
	F(h, struct sfs_proc_slot, ps_node);
	F(h, struct sfs_proc_slot, ps_heartbeat);
	F(h, struct sfs_proc_slot, ps_qsbr);
	F(h, struct sfs_proc_slot, ps_attached_ns);

	S(h, struct sfs_child_desc);
	F(h, struct sfs_child_desc, cd_state);
	F(h, struct sfs_child_desc, cd_role);
	F(h, struct sfs_child_desc, cd_index);
	F(h, struct sfs_child_desc, cd_pid);
	F(h, struct sfs_child_desc, cd_restarts);
	F(h, struct sfs_child_desc, cd_hang_kills);
	F(h, struct sfs_child_desc, cd_cpu);
	F(h, struct sfs_child_desc, cd_last_status);
	F(h, struct sfs_child_desc, cd_started_ns);

	S(h, struct sfs_state_desc);
	F(h, struct sfs_state_desc, sd_state);
	F(h, struct sfs_state_desc, sd_kind);
	F(h, struct sfs_state_desc, sd_merge);
	F(h, struct sfs_state_desc, sd_name);

	S(h, struct sfs_region_desc);
	F(h, struct sfs_region_desc, rd_state);
	F(h, struct sfs_region_desc, rd_owner_role);
	F(h, struct sfs_region_desc, rd_off);
	F(h, struct sfs_region_desc, rd_size);
	F(h, struct sfs_region_desc, rd_name);

	/* Structs placed inside regions keep their own fingerprints (checked
	 * when a region or ring is attached); a segment of a build where they
	 * differ is refused up front too. */
	h = fnv(h, sfs_alloc_layout());
	h = fnv(h, sfs_ring_layout());
	h = fnv(h, sfs_wbuf_layout());
	h = fnv(h, sfs_wctl_layout());
	h = fnv(h, sfs_mstore_layout());
	return h;
}
