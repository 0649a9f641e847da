/*
 * alloc.c — the bump arena and the size-class heap of an owned region
 * (contracts in alloc.h).
 *
 * Size classes.  16, 32, 48, 64, then four classes per power of two
 * (80, 96, 112, 128, 160, 192, 224, 256, 320, ... 12288, 14336, 16384):
 * 36 classes up to 16 KiB.  Powers of two alone would waste up to 50% of an
 * object (25% on average) and state values are the bulk of a worker's
 * memory; four steps per doubling bound the rounding waste at 20% (about
 * 10% on average) for a class table that still fits a header and is
 * indexed with one clz, no table lookup.  Every class is a multiple of 16,
 * so every object is 16-byte aligned.  A region keeps only the classes
 * whose slab is at most a quarter of its data pages, so a small region has
 * a smaller largest class (sa_small_max) and serves bigger objects as large.
 *
 * Slabs.  A class carves objects from slabs: a run of whole pages whose
 * first 64 bytes are a slab header (class, counts, an intra-slab free list
 * and a 256-bit live bitmap).  A slab holds at least 8 objects; among the
 * slab lengths from that minimum to 1.5x it, the one that wastes the least
 * tail is taken: header + tail cost 2.6% of a slab on average over the
 * classes, 7.7% at worst (4096 B, where the header costs an object).  An
 * out-of-line header would save that for the power-of-two classes at the
 * price of a second memory area to keep in step.  Objects carry
 * no header of their own: the page map finds a page's slab and the slab's
 * class.  The live bitmap makes the double-free and interior-pointer checks
 * exact at the price of one bit per object.  Fresh slabs hand out objects
 * with a bump index, so a new slab costs O(1) and touches only its header.
 * A free object's first 4 bytes link the slab's free list (index + 1).
 * Each class keeps a list of its slabs that have a free object ("partial",
 * LIFO); a slab that empties goes back to the page heap unless it is the
 * class's only partial slab (kept against thrash at a slab boundary;
 * sfs_salloc_trim returns it).
 *
 * Large objects.  Above the largest small class an object is a run of
 * whole pages, page aligned, with no header: its usable size is its page
 * count (waste < 4 KiB, i.e. < 20% at 16 KiB and falling).  They are served
 * until the region is full, never rejected for their size.
 *
 * Page heap.  One page map entry (16 bytes) per page: kind, and run length
 * or slab head.  Free runs carry boundary tags (first and last page), so a
 * freed run coalesces with both neighbours in O(1), and sit in 124 bins by
 * length (exact up to 7 pages, then four per doubling) with a bitmap of
 * non-empty bins: a take looks at the first non-empty bin whose every run
 * fits (O(1), "good fit" as in TLSF), and only if none exists scans the bin
 * of the request's own size.  Runs are split from their low end.
 *
 * Overhead.  Header 1.5 KiB + page map 16 B per 4 KiB page (0.4%), + per
 * slab 64 B and its tail (above) + class rounding (< 20%, ~10% average, for
 * objects over 64 B) + one kept empty slab per class at most.
 *
 * Stale tags.  Allocation rewrites the tag of every page it takes; freeing
 * rewrites only the boundary tags.  A page inside a free run may therefore
 * keep an old tag; the free/usable checks never trust one alone (a slab tag
 * must name a live slab head whose objects cover the offset), and
 * coalescing reads only boundary pages, which are always current.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/fingerprint.h"
#include "common/err.h"
#include "shm/alloc.h"

/* ---- private shared structs ------------------------------------------ */

enum {
	SFS__PG_NONE = 0,  /* never tagged (inside the initial free run) */
	SFS__PG_META,      /* header or page map */
	SFS__PG_FREE,      /* first or last page of a free run: pg_run = length */
	SFS__PG_SLAB,      /* any page of a slab: pg_run = the slab's first page */
	SFS__PG_LARGE,     /* first page of a large object: pg_run = length */
	SFS__PG_LBODY,     /* other pages of a large object: pg_run = first page */
};

/* Page map entry; all fields owner-written, plain stores. */
struct sfs__page {
	uint32_t pg_kind;
	uint32_t pg_run;
	uint32_t pg_next;  /* FREE first page: next run in the bin, 0 none */
	uint32_t pg_prev;  /* FREE first page: previous run in the bin, 0 none */
};

#define SFS__SLAB_MAGIC 0x42414c53u  /* "SLAB" */
#define SFS__SLAB_HDR   64u
#define SFS__SLAB_MAXOBJ 256u
#define SFS__SLAB_MINOBJ 8u

/* Slab header, first 64 bytes of the slab's first page; owner-written,
 * plain stores, never read by other processes. */
struct sfs__slab {
	uint32_t sl_magic;   /* SFS__SLAB_MAGIC while the slab lives, 0 after */
	uint16_t sl_class;
	uint16_t sl_nobj;    /* capacity */
	uint16_t sl_used;    /* live objects */
	uint16_t sl_bump;    /* objects ever handed out: [0, bump) were carved */
	uint32_t sl_free;    /* free list: object index + 1, 0 empty */
	uint32_t sl_next;    /* partial list of the class: first page, 0 none */
	uint32_t sl_prev;
	uint32_t sl_pad[2];
	uint64_t sl_live[SFS__SLAB_MAXOBJ / 64];  /* bit i: object i is live */
};

_Static_assert(sizeof(struct sfs__slab) == SFS__SLAB_HDR, "slab header is 64 bytes");
_Static_assert(sizeof(struct sfs__page) == 16, "page map entry is 16 bytes");
_Static_assert(sizeof(struct sfs_region_hdr) == 32, "region header prefix is 32 bytes");
_Static_assert(offsetof(struct sfs_region_hdr, rg_magic) == 0, "magic first");
_Static_assert(offsetof(struct sfs_arena, ar_rg) == 0, "region header first");
_Static_assert(offsetof(struct sfs_salloc, sa_rg) == 0, "region header first");
_Static_assert(sizeof(struct sfs_salloc) < SFS_SALLOC_PAGE, "salloc header fits a page");

/* ---- layout fingerprint ---------------------------------------------- */


uint64_t sfs_alloc_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_region_hdr);
	SFS_FP_FIELD(h, struct sfs_region_hdr, rg_magic);
	SFS_FP_FIELD(h, struct sfs_region_hdr, rg_version);
	SFS_FP_FIELD(h, struct sfs_region_hdr, rg_owner);
	SFS_FP_FIELD(h, struct sfs_region_hdr, rg_layout);
	SFS_FP_FIELD(h, struct sfs_region_hdr, rg_size);
	SFS_FP_SIZE(h, struct sfs_arena);
	SFS_FP_FIELD(h, struct sfs_arena, ar_top);
	SFS_FP_FIELD(h, struct sfs_arena, ar_nalloc);
	SFS_FP_FIELD(h, struct sfs_arena, ar_resets);
	SFS_FP_FIELD(h, struct sfs_arena, ar_peak);
	SFS_FP_SIZE(h, struct sfs__sclass);
	SFS_FP_FIELD(h, struct sfs__sclass, sc_size);
	SFS_FP_FIELD(h, struct sfs__sclass, sc_pages);
	SFS_FP_FIELD(h, struct sfs__sclass, sc_nobj);
	SFS_FP_FIELD(h, struct sfs__sclass, sc_partial);
	SFS_FP_FIELD(h, struct sfs__sclass, sc_slabs);
	SFS_FP_FIELD(h, struct sfs__sclass, sc_objects);
	SFS_FP_SIZE(h, struct sfs_salloc);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_npages);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_first);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_nclasses);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_small_max);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_map);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_in_use);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_objects);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_large_objects);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_large_pages);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_free_pages);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_binmask);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_bin);
	SFS_FP_FIELD(h, struct sfs_salloc, sa_class);
	SFS_FP_SIZE(h, struct sfs__page);
	SFS_FP_FIELD(h, struct sfs__page, pg_kind);
	SFS_FP_FIELD(h, struct sfs__page, pg_run);
	SFS_FP_FIELD(h, struct sfs__page, pg_next);
	SFS_FP_FIELD(h, struct sfs__page, pg_prev);
	SFS_FP_SIZE(h, struct sfs__slab);
	SFS_FP_FIELD(h, struct sfs__slab, sl_magic);
	SFS_FP_FIELD(h, struct sfs__slab, sl_class);
	SFS_FP_FIELD(h, struct sfs__slab, sl_nobj);
	SFS_FP_FIELD(h, struct sfs__slab, sl_used);
	SFS_FP_FIELD(h, struct sfs__slab, sl_bump);
	SFS_FP_FIELD(h, struct sfs__slab, sl_free);
	SFS_FP_FIELD(h, struct sfs__slab, sl_next);
	SFS_FP_FIELD(h, struct sfs__slab, sl_prev);
	SFS_FP_FIELD(h, struct sfs__slab, sl_live);
	h = sfs_fp(h, SFS_SALLOC_PAGE);
	h = sfs_fp(h, SFS_SALLOC_NCLASS_MAX);
	h = sfs_fp(h, SFS_SALLOC_NBINS);
	h = sfs_fp(h, SFS_SALLOC_SMALL_MAX);
	h = sfs_fp(h, SFS__SLAB_MINOBJ);
	return h;
}

#undef F
#undef S

/* ---- region header ----------------------------------------------------- */

static int region_check_mem(const void *mem, size_t size, size_t min, const char *what)
{
	if (mem == NULL || (uintptr_t)mem % SFS_REGION_ALIGN)
		return sfs__err(SFS_EUSAGE, "%s region at %p: base not aligned to %u bytes",
				what, mem, SFS_REGION_ALIGN);
	if (size < min)
		return sfs__err(SFS_EUSAGE, "%s region at %p: %zu bytes, at least %zu needed",
				what, mem, size, min);
	return 0;
}

/* Fill the common prefix; the magic goes last, with release order. */
static void region_publish(struct sfs_region_hdr *rg, uint64_t magic, size_t size)
{
	rg->rg_version = SFS_ALLOC_VERSION;
	rg->rg_owner = (int32_t)getpid();
	rg->rg_layout = sfs_alloc_layout();
	rg->rg_size = size;
	sfs_store_release(&rg->rg_magic, magic);
}

static int region_check(const struct sfs_region_hdr *rg, size_t size, uint64_t magic,
			const char *what)
{
	uint64_t m = sfs_load_acquire(&rg->rg_magic);

	if (m != magic)
		return sfs__err(SFS_EMAGIC, "%s region at %p: magic %#" PRIx64 ", expected %#" PRIx64,
				what, (const void *)rg, m, magic);
	if (rg->rg_version != SFS_ALLOC_VERSION)
		return sfs__err(SFS_EVERSION, "%s region at %p: format version %u, expected %u",
				what, (const void *)rg, rg->rg_version, SFS_ALLOC_VERSION);
	if (rg->rg_layout != sfs_alloc_layout())
		return sfs__err(SFS_ELAYOUT,
				"%s region at %p: layout fingerprint %#" PRIx64 ", this build has %#" PRIx64,
				what, (const void *)rg, rg->rg_layout, sfs_alloc_layout());
	if (rg->rg_size != size)
		return sfs__err(SFS_ECORRUPT, "%s region at %p: header says %" PRIu64
				" bytes, mapped %zu", what, (const void *)rg, rg->rg_size, size);
	return 0;
}

/* ---- arena ------------------------------------------------------------- */

int sfs_arena_init(void *mem, size_t size, struct sfs_arena **out)
{
	struct sfs_arena *a = mem;
	int rc = region_check_mem(mem, size, SFS_ARENA_DATA, "arena");

	if (rc)
		return rc;
	/* Unpublish first: a stale attacher must not see the old magic over
	 * new fields while we rewrite them. */
	sfs_store_release(&a->ar_rg.rg_magic, 0);
	a->ar_top = SFS_ARENA_DATA;
	a->ar_nalloc = 0;
	a->ar_resets = 0;
	a->ar_peak = 0;
	region_publish(&a->ar_rg, SFS_ARENA_MAGIC, size);
	*out = a;
	return 0;
}

int sfs_arena_attach(void *mem, size_t size, struct sfs_arena **out)
{
	struct sfs_arena *a = mem;
	int rc = region_check_mem(mem, size, SFS_ARENA_DATA, "arena");
	uint64_t top;

	if (rc)
		return rc;
	rc = region_check(&a->ar_rg, size, SFS_ARENA_MAGIC, "arena");
	if (rc)
		return rc;
	top = sfs_load_relaxed(&a->ar_top);
	if (top < SFS_ARENA_DATA || top > size)
		return sfs__err(SFS_ECORRUPT, "arena region at %p: top %" PRIu64
				" outside [%" PRIu64 ", %zu]", mem, top, SFS_ARENA_DATA, size);
	*out = a;
	return 0;
}

uint64_t sfs__arena_fail(struct sfs_arena *a, size_t size, size_t align)
{
	if (align == 0 || (align & (align - 1)) || align > SFS_REGION_ALIGN) {
		sfs__err(SFS_EUSAGE, "arena at %p: alignment %zu is not a power of two <= %u",
			 (void *)a, align, SFS_REGION_ALIGN);
		return 0;
	}
	sfs__err(SFS_EFULL, "arena at %p: %zu bytes aligned to %zu do not fit, %" PRIu64
		 " of %" PRIu64 " bytes free", (void *)a, size, align, sfs_arena_free(a),
		 a->ar_rg.rg_size);
	return 0;
}

void sfs_arena_reset(struct sfs_arena *a)
{
	if (a->ar_top > a->ar_peak)
		sfs_store_relaxed(&a->ar_peak, a->ar_top);
	sfs_store_relaxed(&a->ar_top, SFS_ARENA_DATA);
	sfs_store_relaxed(&a->ar_nalloc, 0);
	sfs_store_relaxed(&a->ar_resets, a->ar_resets + 1);
}

void sfs_arena_stats(const struct sfs_arena *a, struct sfs_arena_stats *st)
{
	uint64_t top = sfs_load_relaxed(&a->ar_top);
	uint64_t peak = sfs_load_relaxed(&a->ar_peak);

	st->size = a->ar_rg.rg_size;
	st->used = top - SFS_ARENA_DATA;
	st->free = st->size - top;
	st->nalloc = sfs_load_relaxed(&a->ar_nalloc);
	st->resets = sfs_load_relaxed(&a->ar_resets);
	st->peak = (peak > top ? peak : top) - SFS_ARENA_DATA;
}

/* ---- size classes ---------------------------------------------------- */

int sfs_salloc_class_of(size_t size)
{
	unsigned k;

	if (size <= 64)
		return size ? (int)((size + 15) / 16) - 1 : 0;
	if (size > SFS_SALLOC_SMALL_MAX)
		return -1;
	/* 2^k < size <= 2^(k+1), k >= 6: four steps of 2^(k-2). */
	k = 63u - (unsigned)__builtin_clzll((unsigned long long)size - 1);
	return (int)(4 + (k - 6) * 4 + ((size - 1 - ((size_t)1 << k)) >> (k - 2)));
}

uint32_t sfs_salloc_class_size(int c)
{
	unsigned k, j;

	if (c < 4)
		return 16u * (unsigned)(c + 1);
	k = 6 + (unsigned)(c - 4) / 4;
	j = (unsigned)(c - 4) % 4;
	return (1u << k) + (j + 1) * (1u << (k - 2));
}

/* Objects of @size in a slab of @pages pages. */
static uint32_t slab_nobj(uint32_t size, uint32_t pages)
{
	return (pages * SFS_SALLOC_PAGE - SFS__SLAB_HDR) / size;
}

/* Slab length for a class: at least SFS__SLAB_MINOBJ objects, at most
 * SFS__SLAB_MAXOBJ; among lengths up to 1.5x the minimum (2 pages for a
 * one-page minimum), the one with the least tail per page. */
static void class_geometry(uint32_t size, uint16_t *pages, uint16_t *nobj)
{
	uint32_t nmin = (SFS__SLAB_MINOBJ * size + SFS__SLAB_HDR + SFS_SALLOC_PAGE - 1) /
			SFS_SALLOC_PAGE;
	uint32_t best = nmin, n;
	uint64_t best_waste = UINT64_MAX;

	for (n = nmin; n <= nmin + (nmin > 1 ? nmin / 2 : 1); n++) {
		uint32_t k = slab_nobj(size, n);
		uint64_t waste;

		if (k > SFS__SLAB_MAXOBJ)
			break;
		/* Rank by waste per page (in 1/65536ths of a byte): the same
		 * order as waste over slab bytes. */
		waste = ((uint64_t)(n * SFS_SALLOC_PAGE - SFS__SLAB_HDR - k * size) << 16) / n;
		if (waste < best_waste) {
			best_waste = waste;
			best = n;
		}
	}
	*pages = (uint16_t)best;
	*nobj = (uint16_t)slab_nobj(size, best);
}

/* ---- page heap ------------------------------------------------------- */

static inline struct sfs__page *pmap(const struct sfs_salloc *h)
{
	return (struct sfs__page *)((char *)h + h->sa_map);
}

static inline struct sfs__slab *slab_at(const struct sfs_salloc *h, uint32_t page)
{
	return (struct sfs__slab *)((char *)h + ((uint64_t)page << SFS_SALLOC_PAGE_SHIFT));
}

/* Bin of a free run of @n >= 1 pages: exact below 8, then four per doubling. */
static unsigned bin_of(uint32_t n)
{
	unsigned k;

	if (n < 8)
		return n;
	k = 31u - (unsigned)__builtin_clz(n);
	return 8 + (k - 3) * 4 + ((n >> (k - 2)) & 3);
}

/* Shortest run that bin @b holds. */
static uint32_t bin_lo(unsigned b)
{
	unsigned k;

	if (b < 8)
		return b;
	k = 3 + (b - 8) / 4;
	return (4u + (b - 8) % 4) << (k - 2);
}

static void bin_insert(struct sfs_salloc *h, uint32_t p, uint32_t n)
{
	struct sfs__page *pg = pmap(h);
	unsigned b = bin_of(n);
	uint32_t head = h->sa_bin[b];

	pg[p].pg_kind = SFS__PG_FREE;
	pg[p].pg_run = n;
	pg[p].pg_next = head;
	pg[p].pg_prev = 0;
	pg[p + n - 1].pg_kind = SFS__PG_FREE;
	pg[p + n - 1].pg_run = n;
	if (head)
		pg[head].pg_prev = p;
	h->sa_bin[b] = p;
	h->sa_binmask[b / 64] |= 1ull << (b % 64);
}

static void bin_remove(struct sfs_salloc *h, uint32_t p)
{
	struct sfs__page *pg = pmap(h);
	unsigned b = bin_of(pg[p].pg_run);
	uint32_t next = pg[p].pg_next, prev = pg[p].pg_prev;

	if (prev)
		pg[prev].pg_next = next;
	else
		h->sa_bin[b] = next;
	if (next)
		pg[next].pg_prev = prev;
	if (!h->sa_bin[b])
		h->sa_binmask[b / 64] &= ~(1ull << (b % 64));
}

/* First non-empty bin >= @b, or -1. */
static int bin_find(const struct sfs_salloc *h, unsigned b)
{
	for (unsigned w = b / 64; w < SFS_SALLOC_NBINS / 64; w++) {
		uint64_t m = h->sa_binmask[w];

		if (w == b / 64)
			m &= ~0ull << (b % 64);
		if (m)
			return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
	}
	return -1;
}

/* Take a run of @n pages; its first page, or 0 when none is long enough.
 * The caller tags every page it takes. */
static uint32_t pages_take(struct sfs_salloc *h, uint32_t n)
{
	struct sfs__page *pg = pmap(h);
	unsigned b = bin_of(n);
	int fb = bin_find(h, bin_lo(b) == n ? b : b + 1);
	uint32_t p, len;

	if (fb >= 0) {
		p = h->sa_bin[fb];
	} else {
		/* Every run of bin b is at least bin_lo(b) but maybe < n. */
		for (p = h->sa_bin[b]; p && pg[p].pg_run < n; p = pg[p].pg_next)
			;
		if (!p)
			return 0;
	}
	len = pg[p].pg_run;
	bin_remove(h, p);
	if (len > n)
		bin_insert(h, p + n, len - n);
	sfs_store_relaxed(&h->sa_free_pages, h->sa_free_pages - n);
	return p;
}

/* Give back the run [p, p + n), coalescing with free neighbours. */
static void pages_give(struct sfs_salloc *h, uint32_t p, uint32_t n)
{
	struct sfs__page *pg = pmap(h);

	sfs_store_relaxed(&h->sa_free_pages, h->sa_free_pages + n);
	if (p > h->sa_first && pg[p - 1].pg_kind == SFS__PG_FREE) {
		uint32_t len = pg[p - 1].pg_run;

		bin_remove(h, p - len);
		p -= len;
		n += len;
	}
	if (p + n < h->sa_npages && pg[p + n].pg_kind == SFS__PG_FREE) {
		uint32_t len = pg[p + n].pg_run;

		bin_remove(h, p + n);
		n += len;
	}
	bin_insert(h, p, n);
}

/* ---- slabs ----------------------------------------------------------- */

static void partial_push(struct sfs_salloc *h, struct sfs__sclass *sc, uint32_t p)
{
	struct sfs__slab *sl = slab_at(h, p);

	sl->sl_next = sc->sc_partial;
	sl->sl_prev = 0;
	if (sc->sc_partial)
		slab_at(h, sc->sc_partial)->sl_prev = p;
	sc->sc_partial = p;
}

static void partial_remove(struct sfs_salloc *h, struct sfs__sclass *sc, uint32_t p)
{
	struct sfs__slab *sl = slab_at(h, p);

	if (sl->sl_prev)
		slab_at(h, sl->sl_prev)->sl_next = sl->sl_next;
	else
		sc->sc_partial = sl->sl_next;
	if (sl->sl_next)
		slab_at(h, sl->sl_next)->sl_prev = sl->sl_prev;
	sl->sl_next = sl->sl_prev = 0;
}

static uint32_t slab_new(struct sfs_salloc *h, unsigned c)
{
	struct sfs__sclass *sc = &h->sa_class[c];
	struct sfs__page *pg = pmap(h);
	struct sfs__slab *sl;
	uint32_t p = pages_take(h, sc->sc_pages);

	if (!p)
		return 0;
	for (uint32_t i = 0; i < sc->sc_pages; i++) {
		pg[p + i].pg_kind = SFS__PG_SLAB;
		pg[p + i].pg_run = p;
	}
	sl = slab_at(h, p);
	memset(sl, 0, sizeof(*sl));
	sl->sl_magic = SFS__SLAB_MAGIC;
	sl->sl_class = (uint16_t)c;
	sl->sl_nobj = sc->sc_nobj;
	partial_push(h, sc, p);
	sfs_store_relaxed(&sc->sc_slabs, sc->sc_slabs + 1);
	return p;
}

static void slab_release(struct sfs_salloc *h, struct sfs__sclass *sc, uint32_t p)
{
	partial_remove(h, sc, p);
	slab_at(h, p)->sl_magic = 0;
	sfs_store_relaxed(&sc->sc_slabs, sc->sc_slabs - 1);
	pages_give(h, p, sc->sc_pages);
}

/* ---- init / attach --------------------------------------------------- */

/* Where the page map starts and the first data page, for @npages pages. */
static void salloc_geometry(uint64_t npages, uint64_t *map, uint64_t *first)
{
	*map = (sizeof(struct sfs_salloc) + SFS_CACHE_LINE - 1) & ~(uint64_t)(SFS_CACHE_LINE - 1);
	*first = (*map + npages * sizeof(struct sfs__page) + SFS_SALLOC_PAGE - 1) >>
		 SFS_SALLOC_PAGE_SHIFT;
}

int sfs_salloc_init(void *mem, size_t size, struct sfs_salloc **out)
{
	struct sfs_salloc *h = mem;
	uint64_t npages = size >> SFS_SALLOC_PAGE_SHIFT, map, first, data;
	int rc = region_check_mem(mem, size, (size_t)SFS_SALLOC_MIN_PAGES * SFS_SALLOC_PAGE,
				  "salloc");
	struct sfs__page *pg;
	unsigned c;

	if (rc)
		return rc;
	if (npages > UINT32_MAX)
		return sfs__err(SFS_EUSAGE, "salloc region at %p: %zu bytes, at most 2^32 pages",
				mem, size);
	salloc_geometry(npages, &map, &first);
	data = npages - first;
	if (first >= npages || data < SFS_SALLOC_MIN_PAGES / 2)
		return sfs__err(SFS_EUSAGE, "salloc region at %p: %zu bytes leave %" PRIu64
				" data pages after the page map, at least %u needed",
				mem, size, first < npages ? data : 0, SFS_SALLOC_MIN_PAGES / 2);

	sfs_store_release(&h->sa_rg.rg_magic, 0);
	memset((char *)h + sizeof(h->sa_rg), 0, sizeof(*h) - sizeof(h->sa_rg));
	h->sa_npages = (uint32_t)npages;
	h->sa_first = (uint32_t)first;
	h->sa_map = map;
	pg = pmap(h);
	memset(pg, 0, npages * sizeof(*pg));
	for (uint32_t p = 0; p < first; p++)
		pg[p].pg_kind = SFS__PG_META;

	/* Keep the classes whose slab is at most a quarter of the data. */
	for (c = 0; c < SFS_SALLOC_NCLASS_MAX; c++) {
		struct sfs__sclass *sc = &h->sa_class[c];

		sc->sc_size = sfs_salloc_class_size((int)c);
		class_geometry(sc->sc_size, &sc->sc_pages, &sc->sc_nobj);
		if ((uint64_t)sc->sc_pages * 4 > data)
			break;
		h->sa_small_max = sc->sc_size;
	}
	h->sa_nclasses = c;
	bin_insert(h, (uint32_t)first, (uint32_t)data);
	h->sa_free_pages = data;
	region_publish(&h->sa_rg, SFS_SALLOC_MAGIC, size);
	*out = h;
	return 0;
}

int sfs_salloc_attach(void *mem, size_t size, struct sfs_salloc **out)
{
	struct sfs_salloc *h = mem;
	uint64_t npages = size >> SFS_SALLOC_PAGE_SHIFT, map, first;
	int rc = region_check_mem(mem, size, (size_t)SFS_SALLOC_MIN_PAGES * SFS_SALLOC_PAGE,
				  "salloc");

	if (rc)
		return rc;
	rc = region_check(&h->sa_rg, size, SFS_SALLOC_MAGIC, "salloc");
	if (rc)
		return rc;
	salloc_geometry(npages, &map, &first);
	if (h->sa_npages != npages || h->sa_first != first || h->sa_map != map ||
	    h->sa_nclasses > SFS_SALLOC_NCLASS_MAX)
		return sfs__err(SFS_ECORRUPT, "salloc region at %p: geometry (pages %u, first %u, "
				"map %" PRIu64 ", classes %u), expected (%" PRIu64 ", %" PRIu64
				", %" PRIu64 ", <= %d)", mem, h->sa_npages, h->sa_first, h->sa_map,
				h->sa_nclasses, npages, first, map, SFS_SALLOC_NCLASS_MAX);
	*out = h;
	return 0;
}

/* ---- alloc / free ---------------------------------------------------- */

static uint64_t salloc_full(struct sfs_salloc *h, size_t size)
{
	sfs__err(SFS_EFULL, "salloc region at %p: no room for %zu bytes (%" PRIu64
		 " of %u data pages free, %" PRIu64 " bytes in use)", (void *)h, size,
		 sfs_load_relaxed(&h->sa_free_pages), h->sa_npages - h->sa_first,
		 sfs_load_relaxed(&h->sa_in_use));
	return 0;
}

static uint64_t small_alloc(struct sfs_salloc *h, unsigned c, size_t size)
{
	struct sfs__sclass *sc = &h->sa_class[c];
	uint32_t p = sc->sc_partial, idx;
	struct sfs__slab *sl;

	if (!p && !(p = slab_new(h, c)))
		return salloc_full(h, size);
	sl = slab_at(h, p);
	if (sl->sl_free) {
		uint32_t next;

		idx = sl->sl_free - 1;
		next = *(uint32_t *)((char *)sl + SFS__SLAB_HDR + (size_t)idx * sc->sc_size);
		/* A use-after-free write would show here: refuse, do not spread it. */
		if (idx >= sl->sl_bump || (sl->sl_live[idx / 64] >> (idx % 64)) & 1 ||
		    next > sl->sl_bump) {
			sfs__err(SFS_ECORRUPT, "salloc region at %p: slab at page %u (class %u B): "
				 "free list entry %u (next %u) is not a free object of %u carved",
				 (void *)h, p, sc->sc_size, idx, next, sl->sl_bump);
			return 0;
		}
		sl->sl_free = next;
	} else {
		idx = sl->sl_bump++;
	}
	sl->sl_live[idx / 64] |= 1ull << (idx % 64);
	if (++sl->sl_used == sl->sl_nobj)
		partial_remove(h, sc, p);
	sfs_store_relaxed(&sc->sc_objects, sc->sc_objects + 1);
	sfs_store_relaxed(&h->sa_objects, h->sa_objects + 1);
	sfs_store_relaxed(&h->sa_in_use, h->sa_in_use + sc->sc_size);
	return ((uint64_t)p << SFS_SALLOC_PAGE_SHIFT) + SFS__SLAB_HDR + (uint64_t)idx * sc->sc_size;
}

static uint64_t large_alloc(struct sfs_salloc *h, size_t size)
{
	struct sfs__page *pg = pmap(h);
	uint64_t n64;
	uint32_t n, p;

	if (size > ((uint64_t)(h->sa_npages - h->sa_first) << SFS_SALLOC_PAGE_SHIFT))
		return salloc_full(h, size);
	n64 = ((uint64_t)size + SFS_SALLOC_PAGE - 1) >> SFS_SALLOC_PAGE_SHIFT;
	n = (uint32_t)n64;
	if (!(p = pages_take(h, n)))
		return salloc_full(h, size);
	pg[p].pg_kind = SFS__PG_LARGE;
	pg[p].pg_run = n;
	for (uint32_t i = 1; i < n; i++) {
		pg[p + i].pg_kind = SFS__PG_LBODY;
		pg[p + i].pg_run = p;
	}
	sfs_store_relaxed(&h->sa_large_objects, h->sa_large_objects + 1);
	sfs_store_relaxed(&h->sa_large_pages, h->sa_large_pages + n);
	sfs_store_relaxed(&h->sa_objects, h->sa_objects + 1);
	sfs_store_relaxed(&h->sa_in_use, h->sa_in_use + ((uint64_t)n << SFS_SALLOC_PAGE_SHIFT));
	return (uint64_t)p << SFS_SALLOC_PAGE_SHIFT;
}

uint64_t sfs_salloc_alloc(struct sfs_salloc *h, size_t size)
{
	if (size == 0)
		size = 1;
	if (size <= h->sa_small_max)
		return small_alloc(h, (unsigned)sfs_salloc_class_of(size), size);
	return large_alloc(h, size);
}

/* What a live object's offset resolves to. */
struct obj_loc {
	uint32_t page;   /* slab's or large object's first page */
	uint32_t idx;    /* small: object index in the slab */
	int cls;         /* small: class; -1 for a large object */
	uint32_t npages; /* large: pages */
};

/* Resolve @off to a live object or say (sfs__err) why it is not one. */
static int obj_find(const struct sfs_salloc *h, uint64_t off, struct obj_loc *o)
{
	const struct sfs__page *pg = pmap(h);
	uint64_t p64 = off >> SFS_SALLOC_PAGE_SHIFT;
	const struct sfs__slab *sl;
	uint32_t p, head, size;
	uint64_t rel;

	if (p64 < h->sa_first || p64 >= h->sa_npages)
		return sfs__err(SFS_EUSAGE, "salloc region at %p: offset %" PRIu64
				" is outside its data pages [%u, %u)", (const void *)h, off,
				h->sa_first, h->sa_npages);
	p = (uint32_t)p64;
	switch (pg[p].pg_kind) {
	case SFS__PG_LARGE:
		if (off & (SFS_SALLOC_PAGE - 1))
			return sfs__err(SFS_EUSAGE, "salloc region at %p: offset %" PRIu64
					" is inside a large object, not its start",
					(const void *)h, off);
		o->page = p;
		o->cls = -1;
		o->npages = pg[p].pg_run;
		o->idx = 0;
		return 0;
	case SFS__PG_LBODY:
		return sfs__err(SFS_EUSAGE, "salloc region at %p: offset %" PRIu64
				" is inside a large object, not its start", (const void *)h, off);
	case SFS__PG_SLAB:
		head = pg[p].pg_run;
		if (head < h->sa_first || head > p || pg[head].pg_kind != SFS__PG_SLAB ||
		    pg[head].pg_run != head)
			break;  /* a stale tag inside a free run */
		sl = slab_at(h, head);
		if (sl->sl_magic != SFS__SLAB_MAGIC || sl->sl_class >= h->sa_nclasses)
			return sfs__err(SFS_ECORRUPT, "salloc region at %p: slab at page %u: "
					"magic %#x class %u, expected %#x and a class < %u",
					(const void *)h, head, sl->sl_magic, sl->sl_class,
					SFS__SLAB_MAGIC, h->sa_nclasses);
		size = h->sa_class[sl->sl_class].sc_size;
		rel = off - ((uint64_t)head << SFS_SALLOC_PAGE_SHIFT);
		if (rel < SFS__SLAB_HDR || (rel - SFS__SLAB_HDR) % size)
			return sfs__err(SFS_EUSAGE, "salloc region at %p: offset %" PRIu64
					" is not the start of an object (slab at page %u, class %u B)",
					(const void *)h, off, head, size);
		o->idx = (uint32_t)((rel - SFS__SLAB_HDR) / size);
		if (o->idx >= sl->sl_bump)
			break;
		if (!((sl->sl_live[o->idx / 64] >> (o->idx % 64)) & 1))
			return sfs__err(SFS_EUSAGE, "salloc region at %p: offset %" PRIu64
					" is free (double free?)", (const void *)h, off);
		o->page = head;
		o->cls = sl->sl_class;
		o->npages = 0;
		return 0;
	default:
		break;
	}
	return sfs__err(SFS_EUSAGE, "salloc region at %p: offset %" PRIu64
			" is not a live object (free page or never allocated: double free?)",
			(const void *)h, off);
}

int sfs_salloc_free(struct sfs_salloc *h, uint64_t off)
{
	struct obj_loc o;
	struct sfs__sclass *sc;
	struct sfs__slab *sl;
	int rc;

	if (off == 0)
		return 0;
	rc = obj_find(h, off, &o);
	if (rc)
		return rc;
	if (o.cls < 0) {
		pages_give(h, o.page, o.npages);
		sfs_store_relaxed(&h->sa_large_objects, h->sa_large_objects - 1);
		sfs_store_relaxed(&h->sa_large_pages, h->sa_large_pages - o.npages);
		sfs_store_relaxed(&h->sa_objects, h->sa_objects - 1);
		sfs_store_relaxed(&h->sa_in_use,
				  h->sa_in_use - ((uint64_t)o.npages << SFS_SALLOC_PAGE_SHIFT));
		return 0;
	}
	sc = &h->sa_class[o.cls];
	sl = slab_at(h, o.page);
	sl->sl_live[o.idx / 64] &= ~(1ull << (o.idx % 64));
	*(uint32_t *)((char *)h + off) = sl->sl_free;
	sl->sl_free = o.idx + 1;
	if (sl->sl_used-- == sl->sl_nobj)
		partial_push(h, sc, o.page);
	sfs_store_relaxed(&sc->sc_objects, sc->sc_objects - 1);
	sfs_store_relaxed(&h->sa_objects, h->sa_objects - 1);
	sfs_store_relaxed(&h->sa_in_use, h->sa_in_use - sc->sc_size);
	/* An empty slab goes back unless it is the class's only partial one. */
	if (sl->sl_used == 0 && !(sc->sc_partial == o.page && sl->sl_next == 0))
		slab_release(h, sc, o.page);
	return 0;
}

size_t sfs_salloc_usable(const struct sfs_salloc *h, uint64_t off)
{
	struct obj_loc o;

	if (off == 0 || obj_find(h, off, &o))
		return 0;
	if (o.cls < 0)
		return (size_t)o.npages << SFS_SALLOC_PAGE_SHIFT;
	return h->sa_class[o.cls].sc_size;
}

void sfs_salloc_trim(struct sfs_salloc *h)
{
	for (unsigned c = 0; c < h->sa_nclasses; c++) {
		struct sfs__sclass *sc = &h->sa_class[c];
		uint32_t p = sc->sc_partial;

		while (p) {
			uint32_t next = slab_at(h, p)->sl_next;

			if (slab_at(h, p)->sl_used == 0)
				slab_release(h, sc, p);
			p = next;
		}
	}
}

void sfs_salloc_stats(const struct sfs_salloc *h, struct sfs_salloc_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->size = h->sa_rg.rg_size;
	st->in_use = sfs_load_relaxed(&h->sa_in_use);
	st->objects = sfs_load_relaxed(&h->sa_objects);
	st->large_objects = sfs_load_relaxed(&h->sa_large_objects);
	st->pages_large = sfs_load_relaxed(&h->sa_large_pages);
	st->large_bytes = st->pages_large << SFS_SALLOC_PAGE_SHIFT;
	st->pages_total = h->sa_npages - h->sa_first;
	st->pages_free = sfs_load_relaxed(&h->sa_free_pages);
	st->nclasses = h->sa_nclasses;
	st->small_max = h->sa_small_max;
	for (unsigned c = 0; c < h->sa_nclasses; c++) {
		const struct sfs__sclass *sc = &h->sa_class[c];
		struct sfs_salloc_class_stats *cs = &st->cls[c];

		cs->size = sc->sc_size;
		cs->slabs = sfs_load_relaxed(&sc->sc_slabs);
		cs->objects = sfs_load_relaxed(&sc->sc_objects);
		cs->bytes = cs->objects * cs->size;
		st->small_bytes += cs->bytes;
		st->pages_slab += (uint64_t)cs->slabs * sc->sc_pages;
	}
}

/* ---- verify ---------------------------------------------------------- */

#define CORRUPT(...) sfs__err(SFS_ECORRUPT, __VA_ARGS__)

static int verify_slab(const struct sfs_salloc *h, uint32_t p, uint64_t *objs)
{
	const struct sfs__page *pg = pmap(h);
	const struct sfs__slab *sl = slab_at(h, p);
	const struct sfs__sclass *sc;
	uint32_t live = 0, nfree = 0, i;

	if (sl->sl_magic != SFS__SLAB_MAGIC || sl->sl_class >= h->sa_nclasses)
		return CORRUPT("salloc %p: slab at page %u: magic %#x class %u", (const void *)h, p,
			       sl->sl_magic, sl->sl_class);
	sc = &h->sa_class[sl->sl_class];
	if (sl->sl_nobj != sc->sc_nobj || sl->sl_bump > sl->sl_nobj || sl->sl_used > sl->sl_bump)
		return CORRUPT("salloc %p: slab at page %u: nobj %u bump %u used %u, class nobj %u",
			       (const void *)h, p, sl->sl_nobj, sl->sl_bump, sl->sl_used,
			       sc->sc_nobj);
	if ((uint64_t)p + sc->sc_pages > h->sa_npages)
		return CORRUPT("salloc %p: slab at page %u runs past the region", (const void *)h, p);
	for (i = 0; i < sc->sc_pages; i++)
		if (pg[p + i].pg_kind != SFS__PG_SLAB || pg[p + i].pg_run != p)
			return CORRUPT("salloc %p: page %u of slab at %u tagged %u/%u",
				       (const void *)h, p + i, p, pg[p + i].pg_kind, pg[p + i].pg_run);
	for (i = 0; i < SFS__SLAB_MAXOBJ; i++) {
		bool bit = (sl->sl_live[i / 64] >> (i % 64)) & 1;

		if (bit && i >= sl->sl_bump)
			return CORRUPT("salloc %p: slab at page %u: object %u live past bump %u",
				       (const void *)h, p, i, sl->sl_bump);
		live += bit;
	}
	if (live != sl->sl_used)
		return CORRUPT("salloc %p: slab at page %u: %u live bits, used %u",
			       (const void *)h, p, live, sl->sl_used);
	for (uint32_t f = sl->sl_free; f; nfree++) {
		uint32_t idx = f - 1;

		if (idx >= sl->sl_bump || nfree >= sl->sl_bump ||
		    (sl->sl_live[idx / 64] >> (idx % 64)) & 1)
			return CORRUPT("salloc %p: slab at page %u: free list entry %u bad",
				       (const void *)h, p, idx);
		f = *(const uint32_t *)((const char *)sl + SFS__SLAB_HDR + (size_t)idx * sc->sc_size);
	}
	if (nfree + sl->sl_used != sl->sl_bump)
		return CORRUPT("salloc %p: slab at page %u: %u free + %u used != bump %u",
			       (const void *)h, p, nfree, sl->sl_used, sl->sl_bump);
	objs[sl->sl_class] += sl->sl_used;
	return 0;
}

int sfs_salloc_verify(const struct sfs_salloc *h)
{
	const struct sfs__page *pg = pmap(h);
	uint64_t objs[SFS_SALLOC_NCLASS_MAX] = { 0 }, slabs[SFS_SALLOC_NCLASS_MAX] = { 0 };
	uint64_t free_pages = 0, large_pages = 0, large_objs = 0, in_use = 0, nobj = 0;
	uint64_t binned = 0, partial[SFS_SALLOC_NCLASS_MAX] = { 0 };
	uint32_t p = h->sa_first, prev_kind = SFS__PG_META;
	int rc;

	for (uint32_t i = 0; i < h->sa_first; i++)
		if (pg[i].pg_kind != SFS__PG_META)
			return CORRUPT("salloc %p: header page %u tagged %u", (const void *)h, i,
				       pg[i].pg_kind);
	while (p < h->sa_npages) {
		uint32_t n;

		switch (pg[p].pg_kind) {
		case SFS__PG_FREE:
			n = pg[p].pg_run;
			if (n == 0 || (uint64_t)p + n > h->sa_npages ||
			    pg[p + n - 1].pg_kind != SFS__PG_FREE || pg[p + n - 1].pg_run != n)
				return CORRUPT("salloc %p: free run at page %u (%u pages): bad tags",
					       (const void *)h, p, n);
			if (prev_kind == SFS__PG_FREE)
				return CORRUPT("salloc %p: free run at page %u not coalesced",
					       (const void *)h, p);
			free_pages += n;
			break;
		case SFS__PG_SLAB:
			if (pg[p].pg_run != p)
				return CORRUPT("salloc %p: page %u: slab tag names %u, expected a head",
					       (const void *)h, p, pg[p].pg_run);
			rc = verify_slab(h, p, objs);
			if (rc)
				return rc;
			slabs[slab_at(h, p)->sl_class]++;
			n = h->sa_class[slab_at(h, p)->sl_class].sc_pages;
			break;
		case SFS__PG_LARGE:
			n = pg[p].pg_run;
			if (n == 0 || (uint64_t)p + n > h->sa_npages)
				return CORRUPT("salloc %p: large object at page %u: %u pages",
					       (const void *)h, p, n);
			for (uint32_t i = 1; i < n; i++)
				if (pg[p + i].pg_kind != SFS__PG_LBODY || pg[p + i].pg_run != p)
					return CORRUPT("salloc %p: page %u of large object at %u "
						       "tagged %u", (const void *)h, p + i, p,
						       pg[p + i].pg_kind);
			large_pages += n;
			large_objs++;
			break;
		default:
			return CORRUPT("salloc %p: page %u starts a run but is tagged %u",
				       (const void *)h, p, pg[p].pg_kind);
		}
		prev_kind = pg[p].pg_kind;
		p += n;
	}

	/* Bins: every run in the right bin, mask in step, all free pages binned. */
	for (unsigned b = 0; b < SFS_SALLOC_NBINS; b++) {
		bool bit = (h->sa_binmask[b / 64] >> (b % 64)) & 1;
		uint32_t prev = 0;

		if (bit != (h->sa_bin[b] != 0))
			return CORRUPT("salloc %p: bin %u mask bit %d, head %u", (const void *)h, b,
				       bit, h->sa_bin[b]);
		for (uint32_t r = h->sa_bin[b]; r; prev = r, r = pg[r].pg_next) {
			if (r < h->sa_first || r >= h->sa_npages || pg[r].pg_kind != SFS__PG_FREE ||
			    bin_of(pg[r].pg_run) != b || pg[r].pg_prev != prev)
				return CORRUPT("salloc %p: bin %u holds page %u (kind %u, %u pages)",
					       (const void *)h, b, r, pg[r].pg_kind, pg[r].pg_run);
			binned += pg[r].pg_run;
			if (binned > free_pages)
				return CORRUPT("salloc %p: bins hold more than the %" PRIu64
					       " free pages", (const void *)h, free_pages);
		}
	}
	if (binned != free_pages || free_pages != h->sa_free_pages)
		return CORRUPT("salloc %p: %" PRIu64 " free pages walked, %" PRIu64 " binned, %" PRIu64
			       " counted", (const void *)h, free_pages, binned, h->sa_free_pages);

	/* Classes: partial lists hold exactly the slabs with a free object. */
	for (unsigned c = 0; c < h->sa_nclasses; c++) {
		const struct sfs__sclass *sc = &h->sa_class[c];
		uint32_t prev = 0;

		for (uint32_t s = sc->sc_partial; s; prev = s, s = slab_at(h, s)->sl_next) {
			const struct sfs__slab *sl = slab_at(h, s);

			if (s < h->sa_first || s >= h->sa_npages || pg[s].pg_kind != SFS__PG_SLAB ||
			    pg[s].pg_run != s || sl->sl_class != c || sl->sl_used >= sl->sl_nobj ||
			    sl->sl_prev != prev || ++partial[c] > slabs[c])
				return CORRUPT("salloc %p: class %u B: partial list holds page %u",
					       (const void *)h, sc->sc_size, s);
		}
		if (sc->sc_objects != objs[c] || sc->sc_slabs != slabs[c])
			return CORRUPT("salloc %p: class %u B: %" PRIu64 " objects in %" PRIu64
				       " slabs walked, counters say %" PRIu64 " in %u",
				       (const void *)h, sc->sc_size, objs[c], slabs[c],
				       sc->sc_objects, sc->sc_slabs);
		in_use += objs[c] * sc->sc_size;
		nobj += objs[c];
	}
	/* Non-full slabs walked must all be on the partial lists. */
	for (p = h->sa_first; p < h->sa_npages;) {
		uint32_t n = pg[p].pg_kind == SFS__PG_SLAB
				     ? h->sa_class[slab_at(h, p)->sl_class].sc_pages
				     : pg[p].pg_run;

		if (pg[p].pg_kind == SFS__PG_SLAB) {
			const struct sfs__slab *sl = slab_at(h, p);

			if (sl->sl_used < sl->sl_nobj && partial[sl->sl_class]-- == 0)
				return CORRUPT("salloc %p: class %u B: slab at page %u has room but "
					       "is not on the partial list", (const void *)h,
					       h->sa_class[sl->sl_class].sc_size, p);
		}
		p += n;
	}
	in_use += large_pages << SFS_SALLOC_PAGE_SHIFT;
	nobj += large_objs;
	if (large_pages != h->sa_large_pages || large_objs != h->sa_large_objects ||
	    in_use != h->sa_in_use || nobj != h->sa_objects)
		return CORRUPT("salloc %p: counters (in use %" PRIu64 ", objects %" PRIu64
			       ", large %" PRIu64 "/%" PRIu64 " pages) differ from the walk (%" PRIu64
			       ", %" PRIu64 ", %" PRIu64 "/%" PRIu64 ")", (const void *)h,
			       h->sa_in_use, h->sa_objects, h->sa_large_objects, h->sa_large_pages,
			       in_use, nobj, large_objs, large_pages);
	return 0;
}
