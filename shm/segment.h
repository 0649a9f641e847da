/*
 * segment.h — a job's shared-memory segment: one per NUMA node, named
 * <dir>/sfs.<job>.<node>, created by the supervisor, attached by every
 * process of the group and by external readers.
 *
 * Layout (offsets from the mapping's base; no pointer is ever stored):
 *
 *   [struct sfs_seg_hdr]  identity, control, QSBR token, child table,
 *                         region directory, process table
 *   [regions ...]         carved by sfs_seg_region_create(), page aligned
 *
 * Ownership and publication, field by field, are in the struct comments.
 * The creator fills the whole header, then stores sh_magic with release
 * order: an attacher that sees the magic sees a complete header.
 *
 * Huge pages: when a hugetlbfs mount has enough free pages (or SFS_HUGETLBFS
 * names a mount), the segment file lives there; otherwise in /dev/shm with
 * plain pages (shared memory ignores transparent huge pages).  The choice is
 * logged and recorded in sh_flags.  SFS_SHM_DIR overrides /dev/shm (tests).
 */
#ifndef SFS_SHM_SEGMENT_H
#define SFS_SHM_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sfs.h"
#include "shm/atomic.h"

#define SFS_SEG_MAGIC   0x314745535346534eull /* "NSFSSEG1" little-endian */
#define SFS_SEG_VERSION 3u  /* 2: sd_merge_name (user merge operators); 3: sd_ttl_* */

#define SFS_MAX_PROCS    128
#define SFS_MAX_CHILDREN 64
#define SFS_MAX_REGIONS  256
#define SFS_REGION_NAME_MAX 40
#define SFS_SEG_DATA_DIR_MAX 256

#define SFS_SEG_HUGE 0x1u /* sh_flags: backed by hugetlbfs pages */

enum sfs_role {
	SFS_ROLE_NONE = 0,
	SFS_ROLE_SUPERVISOR,
	SFS_ROLE_WORKER,
	SFS_ROLE_COMPACTOR,
	SFS_ROLE_CHECKPOINTER,
	SFS_ROLE_CLIENT,
	SFS_ROLE_MAX
};

const char *sfs_role_name(unsigned role);
int sfs_role_parse(const char *name);

/*
 * Process-table slot: one cache line per attached process.
 *
 * ps_claim packs (generation << 8 | state).  A process takes a FREE slot, or
 * a LIVE slot whose pid + start time are dead, by one CAS on the whole word:
 * the generation makes the CAS fail if someone else recycled the slot in
 * between (no ABA).  Every other field is written only by the slot's owner:
 * identity fields with plain stores before ps_claim is released to LIVE;
 * ps_heartbeat with relaxed stores; ps_qsbr with release stores (QSBR).
 */
enum { SFS_SLOT_FREE = 0, SFS_SLOT_CLAIMED = 1, SFS_SLOT_LIVE = 2 };

struct sfs_proc_slot {
	uint64_t ps_claim;     /* gen<<8|state; CAS by claimers, release by owner */
	int32_t  ps_pid;       /* owner, before LIVE */
	uint32_t ps_role;      /* owner, before LIVE: enum sfs_role */
	uint64_t ps_start;     /* owner, before LIVE: /proc start time (pid reuse) */
	uint32_t ps_index;     /* owner, before LIVE: instance of the role */
	uint32_t ps_node;      /* owner, before LIVE: NUMA node it runs on */
	uint64_t ps_heartbeat; /* owner, relaxed: sfs_now_ns() of last beat */
	uint64_t ps_qsbr;      /* owner, release: last QSBR token seen, 0 = offline */
	uint64_t ps_attached_ns; /* owner, before LIVE */
	/* owner, relaxed (any of its threads): I/O trouble — since when this
	 * process cannot write a file it must (ENOSPC, EDQUOT, EIO, ...), as
	 * CLOCK_MONOTONIC ms << 16 | errno; 0 while writing works (shm/proc.h,
	 * sfs_proc_io).  The supervisor stops the group when it lasts. */
	uint64_t ps_io;
} __sfs_cache_aligned;

/*
 * Child table: what the supervisor knows of each child it runs.  Written
 * only by the supervisor (relaxed stores: these are reports, nobody
 * synchronizes on them); read by `sfs stat` and tests.
 */
enum sfs_child_state {
	SFS_CHILD_UNUSED = 0,
	SFS_CHILD_STARTING,   /* forked, not yet registered */
	SFS_CHILD_RUNNING,
	SFS_CHILD_BACKOFF,    /* died; restart scheduled */
	SFS_CHILD_STOPPING,
	SFS_CHILD_STOPPED,
	SFS_CHILD_FAILED,     /* restart budget spent */
};

struct sfs_child_desc {
	uint32_t cd_state;      /* supervisor */
	uint32_t cd_role;       /* supervisor */
	uint32_t cd_index;      /* supervisor */
	int32_t  cd_pid;        /* supervisor: current pid, 0 when none */
	uint32_t cd_restarts;   /* supervisor: restarts so far */
	uint32_t cd_hang_kills; /* supervisor: killed for a missing heartbeat */
	int32_t  cd_cpu;        /* supervisor: pinned cpu, -1 none */
	int32_t  cd_last_status;/* supervisor: last wait status */
	uint64_t cd_started_ns; /* supervisor: when the current pid was forked */
	uint64_t cd_pad[3];
} __sfs_cache_aligned;

/*
 * Region directory entry.  A creator claims an entry by CAS of rd_state
 * FREE -> CLAIMED, takes its bytes with an atomic add on sh_bump, fills the
 * entry and releases rd_state = READY.  Readers scan READY entries with
 * acquire loads.  Regions live as long as the segment; a restarted owner
 * finds its region again by name (its buffers survive the crash).
 */
enum { SFS_REGION_FREE = 0, SFS_REGION_CLAIMED = 1, SFS_REGION_READY = 2 };

struct sfs_region_desc {
	uint32_t rd_state;   /* CAS by creator, release READY */
	uint32_t rd_owner_role; /* creator, before READY */
	uint64_t rd_off;     /* creator, before READY: from segment base */
	uint64_t rd_size;    /* creator, before READY */
	char     rd_name[SFS_REGION_NAME_MAX]; /* creator, before READY */
} __sfs_cache_aligned;

/*
 * State registry entry: a named state of the job and its kind, in the order
 * registered; the index is the state id every buffered key carries.
 * Claimed like a region entry: CAS FREE -> CLAIMED, fill, release READY.
 * Two processes registering one name at once may both claim; the one with
 * the higher index then marks its entry DUPLICATE and uses the lower.
 */
/* SFS_MAX_STATES, SFS_STATE_NAME_MAX: include/sfs.h (public limits). */
enum { SFS_SDESC_FREE = 0, SFS_SDESC_CLAIMED, SFS_SDESC_READY, SFS_SDESC_DUPLICATE };

struct sfs_state_desc {
	uint32_t sd_state;     /* CAS by registrar, release READY */
	uint32_t sd_kind;      /* registrar, before READY: enum sfs_state_kind */
	uint32_t sd_merge;     /* registrar, before READY: merge operator index */
	uint32_t sd_ttl_flags; /* registrar, before READY: SFS_TTL_* of include/sfs.h */
	char     sd_name[SFS_STATE_NAME_MAX]; /* registrar, before READY */
	/* registrar, before READY: a user operator's name ("" for a built-in),
	 * so a process that defined another function at that index is refused
	 * (common/merge.h); the index alone cannot tell. */
	char     sd_merge_name[SFS_MERGE_NAME_MAX];
	/* registrar, before READY: time to live in ms (0: none; common/ttl.h:
	 * every entry of the state then carries its expiry). */
	uint64_t sd_ttl_ms;
} __sfs_cache_aligned;

struct sfs_seg_hdr {
	/* Identity: written once by the creator, sh_magic last with release.
	 * Every field before sh_job is frozen across format versions: a newer
	 * build reads them to tell whether an old segment's owner is dead. */
	uint64_t sh_magic;
	uint32_t sh_version;
	uint32_t sh_flags;        /* SFS_SEG_HUGE */
	uint64_t sh_fingerprint;  /* sfs_layout_fingerprint() of the creator */
	uint64_t sh_size;         /* bytes mapped */
	uint64_t sh_page_size;    /* backing page size */
	uint64_t sh_generation;   /* creator: previous stale generation + 1 */
	int32_t  sh_owner_pid;    /* creator (the supervisor) */
	int32_t  sh_node;         /* NUMA node the memory is bound to */
	uint64_t sh_owner_start;  /* creator's /proc start time */
	uint64_t sh_created_ns;   /* CLOCK_REALTIME ns, for humans */
	char     sh_job[SFS_JOB_NAME_MAX + 1];

	/* The flush target's name ("" = "memory"): creator, before sh_magic. */
	char     sh_backend[16];

	/* Where a disk flush target keeps its files ("" = none; the `rocksdb`
	 * target refuses to open without one): the creator (the supervisor),
	 * before any child is started; read-only afterwards. */
	char     sh_data_dir[SFS_SEG_DATA_DIR_MAX];

	/* Control: written by the supervisor. */
	int32_t  sh_shutdown __sfs_cache_aligned; /* 0 running, 1 stopping (release); children
	                           * sleep on it as a futex, stop on SIGTERM */
	uint32_t sh_nchildren;    /* relaxed: entries used in sh_children */

	/* Carving state: RMW by any region creator (rare, start-up). */
	uint64_t sh_bump __sfs_cache_aligned;  /* next free offset for a region */
	uint64_t sh_data_off;     /* creator: first byte after the header */
	uint64_t sh_regions_ready; /* RMW by a region creator after an entry turns
				    * READY: a reader that found no region waits
				    * for it to move before searching again */

	/* QSBR token: RMW by updaters (full barrier), acquire by readers. */
	uint64_t sh_qsbr_token __sfs_cache_aligned;

	/* The compactor's doorbell: workers bump it (RMW, at barriers only) and
	 * wake it when sh_bell_sleeping says it sleeps; the compactor sets and
	 * clears sh_bell_sleeping around its futex wait. */
	int32_t  sh_bell __sfs_cache_aligned;
	int32_t  sh_bell_sleeping;

	struct sfs_state_desc  sh_states[SFS_MAX_STATES];

	struct sfs_child_desc  sh_children[SFS_MAX_CHILDREN];
	struct sfs_region_desc sh_regions[SFS_MAX_REGIONS];
	struct sfs_proc_slot   sh_procs[SFS_MAX_PROCS];
};

/* Process-local handle on a mapped segment. */
struct sfs_seg {
	struct sfs_seg_hdr *hdr;  /* == base */
	size_t size;
	int node;
	int fd;
	char path[256];
};

/* Regions turned ready so far (see sh_regions_ready). */
static inline uint64_t sfs_seg_regions_ready(const struct sfs_seg *s)
{
	return __atomic_load_n(&s->hdr->sh_regions_ready, __ATOMIC_ACQUIRE);
}

static inline void *sfs_seg_ptr(const struct sfs_seg *s, uint64_t off)
{
	return off ? (char *)s->hdr + off : NULL;
}

static inline uint64_t sfs_seg_off(const struct sfs_seg *s, const void *p)
{
	return p ? (uint64_t)((const char *)p - (const char *)s->hdr) : 0;
}

/* Fingerprint of this build's shared layout: sizes and offsets of every
 * shared struct (shm/layout.c, with the parts above shm/ that
 * store/layout.c lists: shm/layout.h).  Two builds that disagree refuse to
 * share. */
uint64_t sfs_layout_fingerprint(void);

/* Path of the segment of @job on @node; -ENAMETOOLONG / SFS_EUSAGE on a bad
 * job name (1..SFS_JOB_NAME_MAX of [A-Za-z0-9_.-], not starting with '.' or '-'). */
int sfs_seg_path(const char *job, int node, char *buf, size_t n);
int sfs_job_name_check(const char *job);

/*
 * sfs_seg_create - create, size, bind to @node, initialise and map the
 * segment.  Fails with -EEXIST if one exists (see sfs_seg_recover_stale).
 * @generation: recorded in the header.  Cost: a few syscalls + zeroing.
 */
int sfs_seg_create(const char *job, int node, size_t size, uint64_t generation,
		   struct sfs_seg *out);

/* sfs_seg_attach - map an existing segment read-write after checking uid,
 * magic, version, fingerprint and size; the error says which differs. */
int sfs_seg_attach(const char *job, int node, struct sfs_seg *out);

/* Unmap (the segment stays). */
void sfs_seg_detach(struct sfs_seg *s);

/* Remove the segment's name; mappings stay valid until detached. */
int sfs_seg_destroy(const char *job, int node);

/*
 * sfs_seg_check_stale - look at an existing segment of @job/@node without
 * trusting it.  Returns 0 if none exists, SFS_ERUNNING if its owner is alive,
 * SFS_ESTALE if its owner is dead (then *@generation is its generation and
 * *@owner_pid the dead owner), or an attach error for a foreign segment.
 */
int sfs_seg_check_stale(const char *job, int node, uint64_t *generation, pid_t *owner_pid);

/* Regions: find (-ENOENT, no message, when absent) and create.  Offsets
 * are from the segment base. */
int sfs_seg_region_create(struct sfs_seg *s, const char *name, uint64_t size,
			  unsigned owner_role, uint64_t *off);
int sfs_seg_region_find(const struct sfs_seg *s, const char *name, uint64_t *off,
			uint64_t *size);

/* Bytes carved for regions so far, and the bytes still free. */
uint64_t sfs_seg_used(const struct sfs_seg *s);

#endif
