/*
 * alloc.h — allocation inside an owned region of shared memory.
 *
 * A region is a contiguous, page-aligned block of a segment (carved by
 * sfs_seg_region_create) that exactly one process writes: its owner, e.g.
 * one worker.  Other processes map the same segment at other addresses and
 * may read objects in the region, so nothing stored in it is a pointer:
 * every object is named by a uint64_t offset from the region's start.  The
 * region's header lives at offset 0, so no object ever has offset 0 and 0
 * means "none" (sfs_off2ptr maps it to NULL).
 *
 * Two allocators, each a region kind with its own magic:
 *
 *  - sfs_arena: a bump arena that is reset wholesale.  Write buffers are
 *    append arenas reset after their flush.  alloc is a few instructions
 *    inline, reset is O(1) (no memory is touched).
 *
 *  - sfs_salloc: size classes for variable objects (values, map entries,
 *    join batches).  Small objects (16 B up to a largest class of at most
 *    16 KiB, fewer for small regions) come from slabs with O(1) alloc and
 *    free; larger ones are page-granular runs of a binned page heap (see
 *    alloc.c for the classes, the overhead and the reasons).
 *
 * Rules (for both):
 *  - One writer.  Only the owner calls alloc/free/reset; there is no lock
 *    and no atomic RMW.  The owner writes allocator metadata with plain
 *    stores (counters with relaxed stores so `sfs stat` can read them
 *    untorn: each counter is exact, a set of them is not a snapshot).
 *  - Publication is the caller's business: the owner writes an object, then
 *    publishes its offset somewhere else with release order
 *    (sfs_store_release); a reader loads the offset with acquire order and
 *    only then dereferences it.  Readers never walk allocator metadata.
 *  - Reclamation is the caller's business too: an object (or an arena) that
 *    other processes may be reading is freed (reset) only after a QSBR grace
 *    period (shm/qsbr.h) has passed since it was unpublished.  The allocator
 *    reuses freed memory at once.
 *  - Regions do no NUMA placement of their own: the segment they live in
 *    was bound to its node when it was created.
 *  - Alignment: the region's base must be page aligned (4096), as segment
 *    regions are, so an offset aligned to N <= 4096 is an address aligned to
 *    N in every process that maps the segment.
 *
 * Caveats:
 *  - A region's owner that dies inside an alloc or free leaves the metadata
 *    in an unknown state.  A restarted owner that adopts the region must
 *    either re-initialise it (a worker's buffers are dropped on a crash
 *    anyway) or run sfs_salloc_verify() first and re-initialise on error.
 *  - Attach checks magic, version, layout fingerprint and size: a region of
 *    another build or kind is refused, naming what differs.
 */
#ifndef SFS_SHM_ALLOC_H
#define SFS_SHM_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "sfs.h"
#include "shm/atomic.h"

/* Region base alignment required by every init/attach. */
#define SFS_REGION_ALIGN 4096u

/* ---- offsets ----------------------------------------------------------- */

/* Offset @off of the region (or segment) mapped at @base as an address in
 * this process; 0 -> NULL.  No bounds check: for offsets the caller trusts
 * (its own, or published by the owner). */
static inline void *sfs_off2ptr(void *base, uint64_t off)
{
	return off ? (char *)base + off : NULL;
}

/* Address @p inside the mapping at @base as an offset; NULL -> 0. */
static inline uint64_t sfs_ptr2off(const void *base, const void *p)
{
	return p ? (uint64_t)((const char *)p - (const char *)base) : 0;
}

/* As sfs_off2ptr, but NULL unless [@off, @off + @len) lies inside a region
 * of @size bytes and past its header byte 0.  For readers that do not trust
 * the writer (a crashed owner, `sfs stat` on a stale segment).  O(1). */
static inline void *sfs_off2ptr_checked(void *base, uint64_t size, uint64_t off, uint64_t len)
{
	if (off == 0 || off > size || len > size - off)
		return NULL;
	return (char *)base + off;
}

/* ---- region header (common prefix of every region kind) ---------------- */

/*
 * Written once by init, every field before rg_magic, and rg_magic last with
 * release order: an attacher that loads the magic with acquire order sees a
 * complete header.  Never written again (re-init rewrites it the same way).
 */
struct sfs_region_hdr {
	uint64_t rg_magic;    /* init, release, last: SFS_ARENA_MAGIC / SFS_SALLOC_MAGIC */
	uint32_t rg_version;  /* init: SFS_ALLOC_VERSION */
	int32_t  rg_owner;    /* init: pid of the owner that initialised it (for humans) */
	uint64_t rg_layout;   /* init: sfs_alloc_layout() of the initialising build */
	uint64_t rg_size;     /* init: bytes of the region, header included */
};

#define SFS_ALLOC_VERSION 1u
#define SFS_ARENA_MAGIC  0x314e524153465301ull  /* "\1SFSARN1" little-endian */
#define SFS_SALLOC_MAGIC 0x31434c4153465302ull  /* "\2SFSALC1" little-endian */

/* Fingerprint over sizeof/offsetof of every struct in this file and
 * alloc.c's private ones, and the constants that fix the layout. */
uint64_t sfs_alloc_layout(void);

/* ---- bump arena -------------------------------------------------------- */

/*
 * The arena header is the region's first cache line.  Objects start at
 * offset sizeof(struct sfs_arena) (64).  Field owners: all owner-written,
 * relaxed stores; readers in other processes may read the counters (stats)
 * but never need them to find an object.
 */
struct sfs_arena {
	struct sfs_region_hdr ar_rg;
	uint64_t ar_top;     /* owner, relaxed: next free offset (used = top - 64) */
	uint64_t ar_nalloc;  /* owner, relaxed: allocations since the last reset */
	uint64_t ar_resets;  /* owner, relaxed: resets since init (a generation) */
	uint64_t ar_peak;    /* owner, relaxed: highest top seen at a reset */
} __sfs_cache_aligned;

_Static_assert(sizeof(struct sfs_arena) == SFS_CACHE_LINE, "arena header is one cache line");

#define SFS_ARENA_DATA ((uint64_t)sizeof(struct sfs_arena))

struct sfs_arena_stats {
	uint64_t size;    /* region bytes, header included */
	uint64_t used;    /* bytes consumed since the last reset (padding included) */
	uint64_t free;    /* bytes still available (before alignment) */
	uint64_t nalloc;  /* allocations since the last reset */
	uint64_t resets;  /* resets since init */
	uint64_t peak;    /* most bytes ever used between two resets */
};

/*
 * sfs_arena_init - make the @size bytes at @mem an empty arena owned by the
 * caller, and return its handle (== @mem) in *@out.
 * Errors: SFS_EUSAGE if @mem is not SFS_REGION_ALIGN aligned or @size is
 * smaller than the header.  Cost: O(1), touches one cache line.
 */
int sfs_arena_init(void *mem, size_t size, struct sfs_arena **out);

/*
 * sfs_arena_attach - adopt an arena initialised elsewhere (another process,
 * an earlier life of the owner) mapped at @mem, after checking magic,
 * version, layout and that the header's size is @size.
 * Errors: SFS_EMAGIC, SFS_EVERSION, SFS_ELAYOUT, SFS_ECORRUPT (size or top
 * out of range), SFS_EUSAGE (alignment).  O(1).
 */
int sfs_arena_attach(void *mem, size_t size, struct sfs_arena **out);

/* Slow path of sfs_arena_alloc: records why and returns 0. */
uint64_t sfs__arena_fail(struct sfs_arena *a, size_t size, size_t align);

/*
 * sfs_arena_alloc - @size bytes aligned to @align (a power of two, at most
 * SFS_REGION_ALIGN); returns the offset, or 0 when the arena is full
 * (SFS_EFULL: the arena is unchanged) or @align is bad (SFS_EUSAGE);
 * sfs_last_error() says which.  @size 0 is taken as 1, so every offset is
 * distinct.  Owner only.  Cost: O(1), a handful of instructions, no
 * syscall; the failure path formats a message.
 */
static inline uint64_t sfs_arena_alloc(struct sfs_arena *a, size_t size, size_t align)
{
	uint64_t top = a->ar_top;  /* owner reads its own field: plain load */
	uint64_t start = (top + align - 1) & ~((uint64_t)align - 1);
	uint64_t n = size ? size : 1;

	if (__builtin_expect(align == 0 || (align & (align - 1)) || align > SFS_REGION_ALIGN ||
			     start < top || start > a->ar_rg.rg_size ||
			     n > a->ar_rg.rg_size - start, 0))
		return sfs__arena_fail(a, size, align);
	sfs_store_relaxed(&a->ar_top, start + n);
	sfs_store_relaxed(&a->ar_nalloc, a->ar_nalloc + 1);
	return start;
}

/* Address of an arena offset in this process. */
static inline void *sfs_arena_ptr(struct sfs_arena *a, uint64_t off)
{
	return sfs_off2ptr(a, off);
}

/*
 * sfs_arena_reset - forget every object: the next alloc starts at the
 * beginning again.  Owner only, and only once no other process can still
 * read an object of this arena (after a grace period).  O(1): no memory is
 * touched beyond the header.
 */
void sfs_arena_reset(struct sfs_arena *a);

/* Bytes consumed since the last reset / still free.  Any process, relaxed. */
static inline uint64_t sfs_arena_used(const struct sfs_arena *a)
{
	return sfs_load_relaxed(&a->ar_top) - SFS_ARENA_DATA;
}

static inline uint64_t sfs_arena_free(const struct sfs_arena *a)
{
	return a->ar_rg.rg_size - sfs_load_relaxed(&a->ar_top);
}

void sfs_arena_stats(const struct sfs_arena *a, struct sfs_arena_stats *st);

/* ---- size-class allocator ---------------------------------------------- */

#define SFS_SALLOC_PAGE_SHIFT 12
#define SFS_SALLOC_PAGE       (1u << SFS_SALLOC_PAGE_SHIFT)
#define SFS_SALLOC_SMALL_MAX  16384u  /* largest small class in a big region */
#define SFS_SALLOC_NCLASS_MAX 36      /* 16..64 by 16, then 4 per doubling to 16 KiB */
#define SFS_SALLOC_NBINS      128     /* free-run bins of the page heap */
#define SFS_SALLOC_MIN_PAGES  8       /* smallest region: 32 KiB */
#define SFS_SALLOC_ALIGN      16u     /* every object is at least 16-byte aligned */

/* One size class; all fields owner-written. */
struct sfs__sclass {
	uint32_t sc_size;     /* init: object bytes */
	uint16_t sc_pages;    /* init: pages per slab */
	uint16_t sc_nobj;     /* init: objects per slab */
	uint32_t sc_partial;  /* owner, plain: first page of the first slab with a free object, 0 none */
	uint32_t sc_slabs;    /* owner, relaxed: slabs held by the class */
	uint64_t sc_objects;  /* owner, relaxed: live objects of the class */
};

/*
 * The salloc header sits at offset 0, followed by the page map (one
 * struct sfs__page per page of the region), then the data pages.  Page
 * indexes are uint32_t, so a region is at most 16 TiB.  Page index 0 is a
 * header page, so 0 also means "no page" in every list.
 */
struct sfs_salloc {
	struct sfs_region_hdr sa_rg;
	/* Geometry: init, plain, never changes. */
	uint32_t sa_npages;     /* pages in the region, header pages included */
	uint32_t sa_first;      /* first data page */
	uint32_t sa_nclasses;   /* small classes in use (<= SFS_SALLOC_NCLASS_MAX) */
	uint32_t sa_small_max;  /* size of the largest small class */
	uint64_t sa_map;        /* offset of the page map */
	/* Counters: owner, relaxed stores (readable by `sfs stat`). */
	uint64_t sa_in_use;     /* usable bytes handed out, small + large */
	uint64_t sa_objects;    /* live objects, small + large */
	uint64_t sa_large_objects;
	uint64_t sa_large_pages;
	uint64_t sa_free_pages; /* pages in free runs (slab-internal space excluded) */
	/* Page heap: owner, plain. */
	uint64_t sa_binmask[SFS_SALLOC_NBINS / 64]; /* bit b: sa_bin[b] non-empty */
	uint32_t sa_bin[SFS_SALLOC_NBINS];          /* first page of a free run, 0 none */
	struct sfs__sclass sa_class[SFS_SALLOC_NCLASS_MAX];
} __sfs_cache_aligned;

struct sfs_salloc_class_stats {
	uint32_t size;     /* object bytes of the class */
	uint32_t slabs;    /* slabs held */
	uint64_t objects;  /* live objects */
	uint64_t bytes;    /* objects * size */
};

struct sfs_salloc_stats {
	uint64_t size;          /* region bytes */
	uint64_t in_use;        /* usable bytes handed out (small + large) */
	uint64_t objects;       /* live objects (small + large) */
	uint64_t small_bytes;   /* in_use of the size classes */
	uint64_t large_bytes;   /* in_use of large objects (whole pages) */
	uint64_t large_objects;
	uint64_t pages_total;   /* data pages (header and page map excluded) */
	uint64_t pages_free;    /* pages in free runs */
	uint64_t pages_slab;    /* pages held by slabs (full, partial or empty) */
	uint64_t pages_large;   /* pages held by large objects */
	uint32_t nclasses;
	uint32_t small_max;     /* largest small class; bigger objects are large */
	struct sfs_salloc_class_stats cls[SFS_SALLOC_NCLASS_MAX];
};

/*
 * sfs_salloc_init - make the @size bytes at @mem an empty size-class heap
 * owned by the caller; handle (== @mem) in *@out.  A tail of @size that is
 * not a whole page is not used.
 * Errors: SFS_EUSAGE (alignment, fewer than SFS_SALLOC_MIN_PAGES pages, or
 * more than 2^32 pages).  Cost: O(pages) once, to clear the page map
 * (16 bytes per 4 KiB page); data pages are not touched.
 */
int sfs_salloc_init(void *mem, size_t size, struct sfs_salloc **out);

/*
 * sfs_salloc_attach - adopt a heap initialised elsewhere, after checking
 * magic, version, layout and geometry against @size.  O(1); does not walk
 * the heap (sfs_salloc_verify does).
 * Errors: SFS_EMAGIC, SFS_EVERSION, SFS_ELAYOUT, SFS_ECORRUPT, SFS_EUSAGE.
 */
int sfs_salloc_attach(void *mem, size_t size, struct sfs_salloc **out);

/*
 * sfs_salloc_alloc - an object of at least @size bytes (0 is taken as 1),
 * 16-byte aligned (large objects: page aligned).  Returns its offset, or 0
 * when no space is left (SFS_EFULL; the heap is unchanged) or, should a
 * slab's free list be found corrupt, SFS_ECORRUPT; sfs_last_error() says
 * which.  Owner only.
 * Cost: small classes O(1) (a new slab, when needed, is an O(1) page-heap
 * take); large objects O(1) bin lookup, a bounded first-fit scan of one bin
 * only when that fails, plus one page-map store per page of the object.
 */
uint64_t sfs_salloc_alloc(struct sfs_salloc *h, size_t size);

/*
 * sfs_salloc_free - return the object at @off; @off 0 is a no-op.
 * Checked always (it is a few loads and one bit test): an offset that is
 * not the start of a live object — foreign, interior, already free — is
 * refused with SFS_EUSAGE and the heap is left unchanged; a slab header
 * whose magic is gone gives SFS_ECORRUPT.  The choice is to return, not to
 * abort: the caller owns the policy.  Owner only, and only after a grace
 * period if other processes could still read the object.
 * Cost: small O(1) (an emptied slab goes back to the page heap, O(1) with
 * coalescing); large O(1).
 */
int sfs_salloc_free(struct sfs_salloc *h, uint64_t off);

/* Usable bytes of the live object at @off (its class size, or whole pages
 * for a large object); 0 if @off is not a live object.  O(1). */
size_t sfs_salloc_usable(const struct sfs_salloc *h, uint64_t off);

/* Address of an object in this process. */
static inline void *sfs_salloc_ptr(struct sfs_salloc *h, uint64_t off)
{
	return sfs_off2ptr(h, off);
}

/* Counters and per-class figures.  Any process (relaxed reads).  O(classes). */
void sfs_salloc_stats(const struct sfs_salloc *h, struct sfs_salloc_stats *st);

/* Give the empty slab each class keeps (against alloc/free thrash at a slab
 * boundary) back to the page heap.  Owner only.  O(classes). */
void sfs_salloc_trim(struct sfs_salloc *h);

/*
 * sfs_salloc_verify - walk the whole heap and check every invariant: page
 * map tags and boundary tags, free runs coalesced and binned, slab headers,
 * bitmaps against free lists, partial lists, counters.  Returns 0 or
 * SFS_ECORRUPT naming the page and what was expected.  Owner (or a reader
 * of a dead owner's region).  Cost: O(pages + free objects): for tests and
 * for adopting a region after a crash, never the hot path.
 */
int sfs_salloc_verify(const struct sfs_salloc *h);

/* Size class of a @size-byte object (0..SFS_SALLOC_NCLASS_MAX-1), or -1 if
 * @size is above SFS_SALLOC_SMALL_MAX.  Pure, O(1). */
int sfs_salloc_class_of(size_t size);

/* Object bytes of class @c (0 <= @c < SFS_SALLOC_NCLASS_MAX).  Pure, O(1). */
uint32_t sfs_salloc_class_size(int c);

#endif
