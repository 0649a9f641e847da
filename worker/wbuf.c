/*
 * wbuf.c — the slow paths of the write buffer (contracts and the format in
 * wbuf.h): geometry, init and attach checks, seal and reset, the walks the
 * compactor uses (iterate, sorted offsets), verification, and the messages
 * of refused writes.  The hot paths (hash, probe, put, delete, merge_add,
 * get) are static inline in wbuf.h.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fingerprint.h"
#include "common/keycmp.h"
#include "worker/wbuf.h"

#define WB_MIN_BITS 3u
#define WB_MAX_BITS 35u      /* 3/4 * 2^35 >= SFS_WBUF_ENTRIES_MAX */
#define WB_MIN_ARENA 64u

_Static_assert(SFS_WBUF_GEN_BITS + SFS_WBUF_TAG_BITS + SFS_WBUF_OFF_BITS == 64,
	       "slot word is 64 bits");
_Static_assert(offsetof(struct sfs_wbuf, wb_magic) == 0, "magic first");
_Static_assert(SFS_WBUF_KEY_MAX < (1u << 24), "key length fits 24 bits of we_kf");
_Static_assert(SFS_WBUF_ENTRY_HDR % 8 == 0, "entries stay 8-byte aligned");

/* ---- layout fingerprint ------------------------------------------------ */


uint64_t sfs_wbuf_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	h = sfs_fp(h, sizeof(struct sfs_wbuf));
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_magic);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_version);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_bits);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_layout);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_size);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_arena_off);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_max_entries);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_gen);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_sealed);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_owner);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_top);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_live);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_appends);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_dead);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_barrier);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_resets);
	SFS_FP_FIELD(h, struct sfs_wbuf, wb_refused);
	h = sfs_fp(h, sizeof(struct sfs_wbuf_entry));
	SFS_FP_FIELD(h, struct sfs_wbuf_entry, we_hash);
	SFS_FP_FIELD(h, struct sfs_wbuf_entry, we_ns);
	SFS_FP_FIELD(h, struct sfs_wbuf_entry, we_kf);
	SFS_FP_FIELD(h, struct sfs_wbuf_entry, we_vlen);
	h = sfs_fp(h, SFS_WBUF_INDEX_OFF);
	h = sfs_fp(h, (uint64_t)SFS_WBUF_GEN_BITS << 16 | SFS_WBUF_TAG_BITS << 8 | SFS_WBUF_OFF_BITS);
	h = sfs_fp(h, SFS_WBUF_KEY_MAX);
	h = sfs_fp(h, SFS_WBUF_VALUE_MAX);
	h = sfs_fp(h, SFS_WBUF_CELL << 8 | SFS_WBUF_KIND_MASK);
	/* The version stands for the hash too: the memory store in the same
	 * segment is placed by it, so a segment of a build that hashed
	 * differently is refused at attach, not misread. */
	h = sfs_fp(h, SFS_WBUF_VERSION);
	return h;
}

/* ---- geometry ------------------------------------------------------------ */

/* Keys an index of 2^@bits slots accepts: 3/4 of its slots. */
static uint64_t wb_cap(unsigned bits)
{
	return (uint64_t)3 << (bits - 2);
}

static unsigned wb_bits_for(uint64_t max_entries)
{
	unsigned k = WB_MIN_BITS;

	while (wb_cap(k) < max_entries)
		k++;
	return k;
}

static uint64_t wb_index_bytes(unsigned bits)
{
	return (uint64_t)8 << bits;
}

size_t sfs_wbuf_size(uint64_t max_entries, uint64_t arena_bytes)
{
	uint64_t total;

	if (max_entries == 0 || max_entries > SFS_WBUF_ENTRIES_MAX || arena_bytes == 0 ||
	    arena_bytes > SFS_WBUF_SIZE_MAX)
		return 0;
	arena_bytes = (arena_bytes + 7) & ~(uint64_t)7;
	if (arena_bytes < WB_MIN_ARENA)
		arena_bytes = WB_MIN_ARENA;
	total = SFS_WBUF_INDEX_OFF + wb_index_bytes(wb_bits_for(max_entries)) + arena_bytes;
	return total > SFS_WBUF_SIZE_MAX ? 0 : (size_t)total;
}

/* ---- init / attach ------------------------------------------------------- */

int sfs_wbuf_init(void *mem, size_t size, uint64_t max_entries, struct sfs_wbuf **out)
{
	struct sfs_wbuf *b = mem;
	unsigned bits;
	uint64_t arena_off, usable = (uint64_t)size & ~(uint64_t)7;

	if (!mem || ((uintptr_t)mem & (SFS_WBUF_ALIGN - 1)))
		return sfs__err(SFS_EUSAGE, "write buffer init: block %p is not %u-byte aligned",
				mem, SFS_WBUF_ALIGN);
	if (max_entries == 0 || max_entries > SFS_WBUF_ENTRIES_MAX)
		return sfs__err(SFS_EUSAGE,
				"write buffer init: max_entries %" PRIu64 " not in 1..%" PRIu64,
				max_entries, SFS_WBUF_ENTRIES_MAX);
	bits = wb_bits_for(max_entries);
	arena_off = SFS_WBUF_INDEX_OFF + wb_index_bytes(bits);
	if (usable < arena_off + WB_MIN_ARENA)
		return sfs__err(SFS_EUSAGE,
				"write buffer init: %zu bytes is too small for %" PRIu64
				" keys (header + index %" PRIu64 " bytes + an arena of at least %u)",
				size, max_entries, arena_off, WB_MIN_ARENA);
	if (usable > SFS_WBUF_SIZE_MAX)
		return sfs__err(SFS_EUSAGE,
				"write buffer init: %zu bytes is over the limit of %" PRIu64
				" (36-bit slot offsets)", size, SFS_WBUF_SIZE_MAX);

	/* No reader may attach a half-built buffer: magic goes first to 0
	 * (a re-init) and comes back last, with release order. */
	sfs_store_release(&b->wb_magic, 0);
	memset((char *)b + sizeof(b->wb_magic), 0, sizeof(*b) - sizeof(b->wb_magic));
	b->wb_version = SFS_WBUF_VERSION;
	b->wb_bits = bits;
	b->wb_layout = sfs_wbuf_layout();
	b->wb_size = usable;
	b->wb_arena_off = arena_off;
	b->wb_max_entries = max_entries;
	b->wb_gen = 1;
	b->wb_owner = (int32_t)getpid();
	b->wb_top = arena_off;
	memset(sfs__wbuf_slots(b), 0, wb_index_bytes(bits));
	sfs_store_release(&b->wb_magic, SFS_WBUF_MAGIC);
	*out = b;
	return 0;
}

int sfs_wbuf_attach(void *mem, size_t size, struct sfs_wbuf **out)
{
	struct sfs_wbuf *b = mem;
	uint64_t magic, gen, top;

	if (!mem || ((uintptr_t)mem & (SFS_WBUF_ALIGN - 1)))
		return sfs__err(SFS_EUSAGE, "write buffer attach: block %p is not %u-byte aligned",
				mem, SFS_WBUF_ALIGN);
	if (size < SFS_WBUF_INDEX_OFF)
		return sfs__err(SFS_EUSAGE, "write buffer attach: %zu bytes is smaller than the header",
				size);
	magic = sfs_load_acquire(&b->wb_magic);
	if (magic != SFS_WBUF_MAGIC)
		return sfs__err(SFS_EMAGIC,
				"write buffer attach: magic %#" PRIx64 ", expected %#llx (not a write buffer)",
				magic, SFS_WBUF_MAGIC);
	if (b->wb_version != SFS_WBUF_VERSION)
		return sfs__err(SFS_EVERSION, "write buffer attach: format version %u, expected %u",
				b->wb_version, SFS_WBUF_VERSION);
	if (b->wb_layout != sfs_wbuf_layout())
		return sfs__err(SFS_ELAYOUT,
				"write buffer attach: layout fingerprint %#" PRIx64 ", this build has %#" PRIx64,
				b->wb_layout, sfs_wbuf_layout());
	if (b->wb_bits < WB_MIN_BITS || b->wb_bits > WB_MAX_BITS ||
	    b->wb_arena_off != SFS_WBUF_INDEX_OFF + wb_index_bytes(b->wb_bits))
		return sfs__err(SFS_ECORRUPT,
				"write buffer attach: index of 2^%u slots with the arena at %" PRIu64
				" is not a valid geometry", b->wb_bits, b->wb_arena_off);
	if (b->wb_size > size || b->wb_size % 8 || b->wb_size < b->wb_arena_off + WB_MIN_ARENA ||
	    b->wb_size > SFS_WBUF_SIZE_MAX)
		return sfs__err(b->wb_size > size ? SFS_EUSAGE : SFS_ECORRUPT,
				"write buffer attach: buffer of %" PRIu64 " bytes, %zu mapped",
				b->wb_size, size);
	if (b->wb_max_entries == 0 || b->wb_max_entries > wb_cap(b->wb_bits))
		return sfs__err(SFS_ECORRUPT,
				"write buffer attach: max_entries %" PRIu64 " for 2^%u slots (at most %" PRIu64 ")",
				b->wb_max_entries, b->wb_bits, wb_cap(b->wb_bits));
	gen = sfs_load_acquire(&b->wb_gen);
	top = sfs_load_relaxed(&b->wb_top);
	if (gen == 0 || gen > SFS_WBUF_GEN_MAX || top < b->wb_arena_off || top > b->wb_size)
		return sfs__err(SFS_ECORRUPT,
				"write buffer attach: generation %" PRIu64 " or arena top %" PRIu64
				" out of range", gen, top);
	*out = b;
	return 0;
}

/* ---- seal / reset / stats ---------------------------------------------- */

int sfs_wbuf_seal(struct sfs_wbuf *b, uint64_t barrier)
{
	if (b->wb_sealed)
		return sfs__err(SFS_EUSAGE,
				"write buffer seal at barrier %" PRIu64 ": already sealed at barrier %" PRIu64,
				barrier, b->wb_barrier);
	sfs_store_relaxed(&b->wb_barrier, barrier);
	sfs_store_release(&b->wb_sealed, 1);
	return 0;
}

int sfs_wbuf_sealed(const struct sfs_wbuf *b, uint64_t *barrier)
{
	if (!sfs_load_acquire(&((struct sfs_wbuf *)b)->wb_sealed))
		return 0;
	if (barrier)
		*barrier = sfs_load_relaxed(&b->wb_barrier);
	return 1;
}

void sfs_wbuf_reset(struct sfs_wbuf *b)
{
	uint64_t gen = b->wb_gen;

	if (gen >= SFS_WBUF_GEN_MAX) {
		/* Generations are spent: a slot written 65535 lives ago would
		 * carry the next one.  Clear the index once (O(index)). */
		memset(sfs__wbuf_slots(b), 0, wb_index_bytes(b->wb_bits));
		gen = 0;
	}
	sfs_store_relaxed(&b->wb_top, b->wb_arena_off);
	sfs_store_relaxed(&b->wb_live, 0);
	sfs_store_relaxed(&b->wb_appends, 0);
	sfs_store_relaxed(&b->wb_dead, 0);
	sfs_store_relaxed(&b->wb_refused, 0);
	sfs_store_relaxed(&b->wb_barrier, 0);
	sfs_store_relaxed(&b->wb_resets, b->wb_resets + 1);
	sfs_store_release(&b->wb_gen, gen + 1);
	sfs_store_release(&b->wb_sealed, 0);
}

void sfs_wbuf_stats(const struct sfs_wbuf *b, struct sfs_wbuf_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->size = b->wb_size;
	st->slots = (uint64_t)1 << b->wb_bits;
	st->max_entries = b->wb_max_entries;
	st->entries = sfs_load_relaxed(&b->wb_live);
	st->appends = sfs_load_relaxed(&b->wb_appends);
	st->arena_bytes = b->wb_size - b->wb_arena_off;
	st->bytes_used = sfs_load_relaxed(&b->wb_top) - b->wb_arena_off;
	st->bytes_dead = sfs_load_relaxed(&b->wb_dead);
	st->load = (double)st->entries / (double)st->slots;
	st->gen = sfs_load_relaxed(&b->wb_gen);
	st->resets = sfs_load_relaxed(&b->wb_resets);
	st->refused = sfs_load_relaxed(&b->wb_refused);
	st->sealed = (uint32_t)sfs_wbuf_sealed(b, &st->barrier);
}

/* ---- walks --------------------------------------------------------------- */

int sfs_wbuf_next(const struct sfs_wbuf *b, struct sfs_wbuf_iter *it, struct sfs_wbuf_view *v)
{
	const uint64_t *slots = sfs__wbuf_slots(b);
	uint64_t nslots = (uint64_t)1 << b->wb_bits;
	uint64_t gen = sfs_load_acquire(&((struct sfs_wbuf *)b)->wb_gen);

	for (uint64_t i = it->pos; i < nslots; i++) {
		uint64_t w = sfs_load_acquire(&((uint64_t *)slots)[i]);
		const struct sfs_wbuf_entry *e;

		if (sfs__wbuf_slot_gen(w) != gen)
			continue;
		it->pos = i + 1;
		e = sfs__wbuf_entry(b, w);
		if (!e)
			return sfs__wbuf_corrupt(b, i, w);
		sfs__wbuf_fill(b, e, v);
		return 0;
	}
	it->pos = nslots;
	return -ENOENT;
}

int sfs_wbuf_view_at(const struct sfs_wbuf *b, uint64_t off, struct sfs_wbuf_view *v)
{
	const struct sfs_wbuf_entry *e = NULL;

	if (off % 8 == 0 && off < b->wb_size)
		e = sfs__wbuf_entry(b, sfs__wbuf_slot(0, 0, off));
	if (!e)
		return sfs__err(SFS_ECORRUPT,
				"write buffer: entry offset %" PRIu64 " is not inside the arena [%" PRIu64
				", %" PRIu64 ")", off, b->wb_arena_off, b->wb_size);
	sfs__wbuf_fill(b, e, v);
	return 0;
}

static const struct sfs_wbuf_entry *wb_at(const struct sfs_wbuf *b, uint64_t off)
{
	return (const struct sfs_wbuf_entry *)((const char *)b + off);
}

/* Order of two entries: key bytes (memcmp, shorter first on a tie), then
 * namespace. */
static int wb_cmp_entries(const struct sfs_wbuf_entry *x, const struct sfs_wbuf_entry *y)
{
	int c = sfs_keycmp(x + 1, sfs__wbuf_klen(x), y + 1, sfs__wbuf_klen(y));

	if (c)
		return c;
	return x->we_ns < y->we_ns ? -1 : x->we_ns > y->we_ns;
}

/* 24 key bytes, not 8: a buffered key starts with 4 bytes of key group and
 * state, so 8 held only 4 bytes of the user key — the high half of an
 * int64 id, equal across most keys — and a map entry's key is kg|state|
 * klen|key|user key (an int64 key and an int64 user key: 24 bytes).  With
 * 8, most compares fell through to the entries (two cache misses and a
 * memcmp call: the sort took 18 % of q4's sampled compactor and worker CPU
 * on the table target; 10 % since). */
#define WB_PREFIX_WORDS 3
struct wb_pair {
	uint64_t p[WB_PREFIX_WORDS]; /* key bytes 0..23, big-endian words, zero-padded */
	uint64_t off;
};

static int wb_cmp_pair(const void *a, const void *b, void *ctx)
{
	const struct wb_pair *x = a, *y = b;

	for (int i = 0; i < WB_PREFIX_WORDS; i++)
		if (x->p[i] != y->p[i])
			return x->p[i] < y->p[i] ? -1 : 1;
	return wb_cmp_entries(wb_at(ctx, x->off), wb_at(ctx, y->off));
}

/*
 * A typed sort of the pairs.  glibc's qsort_r is a merge sort that moves
 * 32-byte elements by a generic copy and calls the comparator through a
 * pointer: with the compares made cheap by the prefixes, those two took 9 %
 * of q4's sampled CPU against the compares' 3 %.  Quicksort, median of three,
 * insertion sort below 16, the smaller side recursed (depth O(log n)); a
 * side past its depth budget falls back to qsort_r, so no input is
 * quadratic.
 */
static inline void wb_pair_swap(struct wb_pair *a, struct wb_pair *b)
{
	struct wb_pair t = *a;

	*a = *b;
	*b = t;
}

static void wb_sort_pairs(struct wb_pair *v, size_t n, const struct sfs_wbuf *b, int depth)
{
	while (n > 16) {
		struct wb_pair *m = v + n / 2, *l = v + n - 1, pivot;
		size_t i = 0, j = n - 1;

		if (depth-- == 0) {
			qsort_r(v, n, sizeof(*v), wb_cmp_pair, (void *)b);
			return;
		}
		if (wb_cmp_pair(m, v, (void *)b) < 0)
			wb_pair_swap(m, v);
		if (wb_cmp_pair(l, m, (void *)b) < 0) {
			wb_pair_swap(l, m);
			if (wb_cmp_pair(m, v, (void *)b) < 0)
				wb_pair_swap(m, v);
		}
		pivot = *m;
		/* Hoare partition: v[0] <= pivot <= v[n-1] bound both scans. */
		for (;;) {
			while (wb_cmp_pair(&v[i], &pivot, (void *)b) < 0)
				i++;
			while (wb_cmp_pair(&pivot, &v[j], (void *)b) < 0)
				j--;
			if (i >= j)
				break;
			wb_pair_swap(&v[i++], &v[j--]);
		}
		/* [0, j] <= pivot <= [j+1, n) */
		if (j + 1 < n - (j + 1)) {
			wb_sort_pairs(v, j + 1, b, depth);
			v += j + 1;
			n -= j + 1;
		} else {
			wb_sort_pairs(v + j + 1, n - (j + 1), b, depth);
			n = j + 1;
		}
	}
	for (size_t i = 1; i < n; i++) {
		struct wb_pair t = v[i];
		size_t k = i;

		for (; k > 0 && wb_cmp_pair(&t, &v[k - 1], (void *)b) < 0; k--)
			v[k] = v[k - 1];
		v[k] = t;
	}
}

/*
 * The flush's sort is the compactor's largest cost (with q4 on the table
 * target and two workers, 40 % of its thread: ~17 compares per entry, half
 * of them mispredicted branches).  Above WB_RADIX_MIN entries it is a
 * radix sort instead.  A buffer's keys are kg | state | user key, and most
 * bits of their 24-byte prefixes are equal across the buffer (the key
 * group's high bits, the state's, a map key's length, the high bytes of
 * int64 ids): the bits that vary somewhere — the first 64 of them — make a
 * key in the prefixes' order (BMI2's pext gathers them; q4's buffers vary
 * in ~50).  LSD passes of 11 bits (stable counting sorts) order {key, pair
 * index} items; items with equal keys (equal prefixes, or prefixes that
 * differ past the 64th varying bit) are then put in the full order by
 * comparison, run by run.  Without BMI2 the key is the first 8 bytes that
 * vary, which leaves more ties (q4: ~12 vary).  Cost: 2 x 16 bytes per
 * entry besides the pairs, and a few ns per entry per pass.
 */
#define WB_RADIX_MIN 1024
#define WB_DIGIT 11
#define WB_PASSES ((64 + WB_DIGIT - 1) / WB_DIGIT)

struct wb_item {
	uint64_t k;   /* the prefix's varying bits, right-aligned */
	uint64_t i;   /* index of the pair */
};

static int sort_bytes_only;	/* sfs__wbuf_sort_bytes_only: the fallback, for tests */

void sfs__wbuf_sort_bytes_only(int on)
{
	sort_bytes_only = on;
}

static __thread const struct wb_pair *rk_pairs;	/* wb_cmp_item's pairs (qsort_r has one context) */

static int wb_cmp_item(const void *a, const void *b, void *ctx)
{
	const struct wb_item *x = a, *y = b;

	return wb_cmp_pair(&rk_pairs[x->i], &rk_pairs[y->i], ctx);
}

/* Insertion sort of @a[0..n) by the full order (a short run). */
static void wb_insert_items(struct wb_item *a, size_t n, const struct sfs_wbuf *b)
{
	for (size_t i = 1; i < n; i++) {
		struct wb_item t = a[i];
		size_t k = i;

		for (; k > 0 && wb_cmp_item(&t, &a[k - 1], (void *)b) < 0; k--)
			a[k] = a[k - 1];
		a[k] = t;
	}
}

/* Items by their k alone (ties in any order): quicksort, median of three,
 * insertion below 16, the smaller side recursed, qsort past the depth
 * budget — the shape of wb_sort_pairs, on 16-byte items and one compare. */
static int wb_cmp_k(const void *x, const void *y)
{
	uint64_t a = ((const struct wb_item *)x)->k, b = ((const struct wb_item *)y)->k;

	return (a > b) - (a < b);
}

static void wb_sort_k(struct wb_item *v, size_t n, int depth)
{
	while (n > 16) {
		struct wb_item *l = v, *m = v + n / 2, *r = v + n - 1, t;
		uint64_t pivot;
		size_t i = 0, j = n - 1;

		if (depth-- == 0) {
			qsort(v, n, sizeof(*v), wb_cmp_k);
			return;
		}
		if (m->k < l->k)
			t = *m, *m = *l, *l = t;
		if (r->k < m->k) {
			t = *r, *r = *m, *m = t;
			if (m->k < l->k)
				t = *m, *m = *l, *l = t;
		}
		pivot = m->k;
		for (;;) {
			while (v[i].k < pivot)
				i++;
			while (pivot < v[j].k)
				j--;
			if (i >= j)
				break;
			t = v[i], v[i] = v[j], v[j] = t;
			i++, j--;
		}
		if (j + 1 < n - (j + 1)) {
			wb_sort_k(v, j + 1, depth);
			v += j + 1;
			n -= j + 1;
		} else {
			wb_sort_k(v + j + 1, n - (j + 1), depth);
			n = j + 1;
		}
	}
	for (size_t i = 1; i < n; i++) {
		struct wb_item t = v[i];
		size_t k = i;

		for (; k > 0 && t.k < v[k - 1].k; k--)
			v[k] = v[k - 1];
		v[k] = t;
	}
}

/* Key word @w (bytes 8w .. 8w+7) of @e, big-endian, zero past the key. */
static inline uint64_t wb_key_word(const struct sfs_wbuf_entry *e, uint32_t klen, size_t w)
{
	uint64_t x = 0;
	size_t at = 8 * w;

	if (at < klen)
		memcpy(&x, (const uint8_t *)(e + 1) + at, klen - at < 8 ? klen - at : 8);
	return __builtin_bswap64(x);
}

#define WB_TIES_AHEAD 8		/* entries whose next key word is loading */
#define WB_TIES_LEVELS 64	/* splits deep before the ties take full compares */

/*
 * The full order of @a[0..n), items whose keys agree on their first @w
 * words (zero-padded): a multikey sort.  Each item's word @w is read once
 * into k (from its pair for the first WB_PREFIX_WORDS, the radix key
 * having kept only 64 of their varying bits; from its entry after); the
 * run is sorted by k, and each run of equal k goes on at word w + 1.  A
 * word all items share costs one read per item and no sort.  Once every
 * key of the run has ended (8w >= its longest), what is left is length and
 * namespace: full compares.  Zero padding keeps the order: a key that ends
 * where another goes on with nonzero bytes is its prefix (smaller); equal
 * words go deeper.  Why not compare whole keys: Flink's map entries carry
 * a serialized row as the user key (q20: ~250 bytes) and one join key's
 * entries share their first ~40 — qsort_r's compares there (two entry
 * misses and a long common prefix each, log n times per entry) were 19 %
 * of the compactor under Flink (bench/RESULTS.md, issue 34's sixth stop).
 */
static void wb_ties_from(struct wb_item *a, size_t n, const struct wb_pair *v,
			 const struct sfs_wbuf *b, size_t w, int levels)
{
	for (;;) {
		uint64_t lo = UINT64_MAX, hi = 0;
		uint32_t longest = 0;

		if (n <= 16 || levels == 0) {
			if (n <= 16)
				wb_insert_items(a, n, b);
			else
				qsort_r(a, n, sizeof(*a), wb_cmp_item, (void *)b);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			const struct sfs_wbuf_entry *e;
			uint32_t kl;

			if (w < WB_PREFIX_WORDS) {	/* the pair has it: no entry read */
				a[i].k = v[a[i].i].p[w];
			} else {
				if (i + WB_TIES_AHEAD < n) {
					e = wb_at(b, v[a[i + WB_TIES_AHEAD].i].off);
					__builtin_prefetch((const uint8_t *)(e + 1) + 8 * w);
				}
				e = wb_at(b, v[a[i].i].off);
				kl = sfs__wbuf_klen(e);
				a[i].k = wb_key_word(e, kl, w);
				longest = kl > longest ? kl : longest;
			}
			lo = a[i].k < lo ? a[i].k : lo;
			hi = a[i].k > hi ? a[i].k : hi;
		}
		if (w >= WB_PREFIX_WORDS && 8 * w >= longest) {
			qsort_r(a, n, sizeof(*a), wb_cmp_item, (void *)b);
			return;
		}
		w++;
		if (lo == hi)
			continue;	/* every key has this word: on to the next */
		wb_sort_k(a, n, 2 * (64 - __builtin_clzll(n)));
		for (size_t s = 0, e; s < n; s = e) {
			for (e = s + 1; e < n && a[e].k == a[s].k; e++)
				;
			if (e - s > 1)
				wb_ties_from(a + s, e - s, v, b, w, levels - 1);
		}
		return;
	}
}

/* The full order within runs of items of equal keys, at @a[0..n). */
static void wb_radix_ties(struct wb_item *a, size_t n, const struct wb_pair *v,
			  const struct sfs_wbuf *b)
{
	rk_pairs = v;
	for (size_t s = 0, e; s < n; s = e) {
		for (e = s + 1; e < n && a[e].k == a[s].k; e++)
			;
		if (e - s > 1)
			wb_ties_from(a + s, e - s, v, b, 0, WB_TIES_LEVELS);
	}
}

#if defined(__x86_64__)
/* Keys of the bits @m[w] of each prefix word: word 0's highest. */
__attribute__((target("bmi2"))) static void wb_keys_bits(const struct wb_pair *v, size_t n,
							  const uint64_t *m, struct wb_item *a)
{
	unsigned c1 = (unsigned)__builtin_popcountll(m[1]);
	unsigned c2 = (unsigned)__builtin_popcountll(m[2]);

	/* (x << c) for c < 64 only: a word with no bits to give gives 0 */
	for (size_t i = 0; i < n; i++) {
		uint64_t k = m[0] ? __builtin_ia32_pext_di(v[i].p[0], m[0]) : 0;

		if (m[1])
			k = (c1 < 64 ? k << c1 : 0) | __builtin_ia32_pext_di(v[i].p[1], m[1]);
		if (m[2])
			k = (c2 < 64 ? k << c2 : 0) | __builtin_ia32_pext_di(v[i].p[2], m[2]);
		a[i].k = k;
		a[i].i = i;
	}
}
#define WB_HAVE_PEXT() __builtin_cpu_supports("bmi2")
#else
#define WB_HAVE_PEXT() 0
#define wb_keys_bits(v, n, m, a) abort()
#endif

/* Keys of the first 8 bytes that vary (@d: the varying bits); returns
 * their bit count. */
static unsigned wb_keys_bytes(const struct wb_pair *v, size_t n, const uint64_t *d,
			      struct wb_item *a)
{
	unsigned sel[8], ns = 0;

	for (unsigned j = 0; j < 8 * WB_PREFIX_WORDS && ns < 8; j++)
		if ((d[j / 8] >> (56 - 8 * (j % 8))) & 0xffu)
			sel[ns++] = j;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = 0;

		for (unsigned s = 0; s < ns; s++)
			k = k << 8 | ((v[i].p[sel[s] / 8] >> (56 - 8 * (sel[s] % 8))) & 0xffu);
		a[i].k = k;
		a[i].i = i;
	}
	return 8 * ns;
}

/* Radix sort of @v[0..n) into @offs (see above); -ENOMEM leaves @offs alone. */
static int wb_radix_pairs(const struct wb_pair *v, size_t n, const struct sfs_wbuf *b,
			  uint64_t *offs)
{
	uint64_t d[WB_PREFIX_WORDS] = { 0 }, m[WB_PREFIX_WORDS] = { 0 };
	unsigned bits = 0, left = 64;
	struct wb_item *a = malloc(2 * n * sizeof(*a)), *t;
	uint32_t (*cnt)[1u << WB_DIGIT] = calloc(WB_PASSES, sizeof(*cnt));

	if (!a || !cnt) {
		free(a);
		free(cnt);
		return -ENOMEM;
	}
	t = a + n;
	for (size_t i = 1; i < n; i++)
		for (int w = 0; w < WB_PREFIX_WORDS; w++)
			d[w] |= v[i].p[w] ^ v[0].p[w];
	if (!sort_bytes_only && WB_HAVE_PEXT()) {
		/* the first 64 varying bits, in prefix order */
		for (int w = 0; w < WB_PREFIX_WORDS; w++) {
			uint64_t x = d[w];

			while ((unsigned)__builtin_popcountll(x) > left)
				x &= x - 1;	/* drop the lowest */
			m[w] = x;
			left -= (unsigned)__builtin_popcountll(x);
		}
		bits = 64 - left;
		wb_keys_bits(v, n, m, a);
	} else {
		bits = wb_keys_bytes(v, n, d, a);
	}
	for (size_t i = 0; i < n; i++)
		for (unsigned p = 0; p * WB_DIGIT < bits; p++)
			cnt[p][(a[i].k >> (p * WB_DIGIT)) & ((1u << WB_DIGIT) - 1)]++;
	for (unsigned p = 0; p * WB_DIGIT < bits; p++) {
		uint32_t sum = 0;
		struct wb_item *x;

		for (unsigned c = 0; c < 1u << WB_DIGIT; c++) {
			uint32_t k = cnt[p][c];

			cnt[p][c] = sum;
			sum += k;
		}
		for (size_t i = 0; i < n; i++)
			t[cnt[p][(a[i].k >> (p * WB_DIGIT)) & ((1u << WB_DIGIT) - 1)]++] = a[i];
		x = a;
		a = t;
		t = x;
	}
	wb_radix_ties(a, n, v, b);
	for (size_t i = 0; i < n; i++)
		offs[i] = v[a[i].i].off;
	free(a < t ? a : t);	/* the block's start */
	free(cnt);
	return 0;
}

static int wb_cmp_off(const void *a, const void *b, void *ctx)
{
	return wb_cmp_entries(wb_at(ctx, *(const uint64_t *)a), wb_at(ctx, *(const uint64_t *)b));
}

/* Zero padding keeps prefix order consistent with the full order: a shorter
 * key that is a prefix of a longer one has a prefix <= the longer one's,
 * and equal prefixes fall back to the full compare. */
static void wb_prefix(const struct sfs_wbuf_entry *e, struct wb_pair *p)
{
	uint64_t v[WB_PREFIX_WORDS] = { 0 };
	uint32_t k = sfs__wbuf_klen(e);

	memcpy(v, e + 1, k < sizeof(v) ? k : sizeof(v));
	for (int i = 0; i < WB_PREFIX_WORDS; i++)
		p->p[i] = __builtin_bswap64(v[i]);
}

#define WB_PF_SLOTS 32	/* prefetch distance of the slot scan, in slots */

int sfs_wbuf_sorted(const struct sfs_wbuf *b, uint64_t *offs, size_t cap, size_t *n)
{
	const uint64_t *slots = sfs__wbuf_slots(b);
	uint64_t nslots = (uint64_t)1 << b->wb_bits;
	uint64_t gen = sfs_load_acquire(&((struct sfs_wbuf *)b)->wb_gen);
	/* a sealed buffer's live count is exact; the pairs grow if it lies */
	size_t pcap = (size_t)sfs_load_relaxed(&b->wb_live) + 1, cnt = 0;
	struct wb_pair *pairs = malloc(pcap * sizeof(*pairs));

	/* The slots are read in order, the entries they name at random: each
	 * header read is a cache miss.  The entry of the slot WB_PF_SLOTS
	 * ahead is prefetched, so ~16 misses overlap (half the slots are live
	 * at the index's load), and an entry is read once: its header checked
	 * and its key's prefix taken in the same visit (two passes, one to
	 * check and one for the prefixes, missed twice per entry). */
	for (uint64_t i = 0; i < nslots; i++) {
		uint64_t w = sfs_load_acquire(&((uint64_t *)slots)[i]);
		const struct sfs_wbuf_entry *e;

		if (i + WB_PF_SLOTS < nslots) {
			uint64_t pw = sfs_load_relaxed(&((uint64_t *)slots)[i + WB_PF_SLOTS]);

			if (sfs__wbuf_slot_gen(pw) == gen && sfs__wbuf_slot_off(pw) < b->wb_size)
				__builtin_prefetch((const char *)b + sfs__wbuf_slot_off(pw));
		}
		if (sfs__wbuf_slot_gen(w) != gen)
			continue;
		if (!(e = sfs__wbuf_entry(b, w))) {
			free(pairs);
			*n = 0;
			return sfs__wbuf_corrupt(b, i, w);
		}
		if (cnt < cap)
			offs[cnt] = sfs__wbuf_slot_off(w);
		if (pairs && cnt == pcap) {
			struct wb_pair *np = cnt < cap ? realloc(pairs, 2 * pcap * sizeof(*pairs))
						       : NULL;

			if (!np)
				free(pairs);	/* no room to sort fast: qsort_r below */
			pairs = np;
			pcap *= 2;
		}
		if (pairs) {
			wb_prefix(e, &pairs[cnt]);
			pairs[cnt].off = sfs__wbuf_slot_off(w);
		}
		cnt++;
	}
	*n = cnt;
	if (cnt > cap) {
		free(pairs);
		return sfs__err(SFS_EUSAGE,
				"write buffer sorted: %zu current entries, room for %zu", cnt, cap);
	}
	if (cnt < 2) {
		free(pairs);
		return 0;
	}
	if (!pairs) {
		/* No memory for the fast sort: the slow one needs none. */
		qsort_r(offs, cnt, sizeof(*offs), wb_cmp_off, (void *)b);
		return 0;
	}
	if (cnt < WB_RADIX_MIN || cnt > UINT32_MAX || wb_radix_pairs(pairs, cnt, b, offs)) {
		wb_sort_pairs(pairs, cnt, b, 2 * (64 - __builtin_clzll(cnt)));
		for (size_t i = 0; i < cnt; i++)
			offs[i] = pairs[i].off;
	}
	free(pairs);
	return 0;
}

int sfs_wbuf_verify(const struct sfs_wbuf *b)
{
	const uint64_t *slots = sfs__wbuf_slots(b);
	uint64_t nslots = (uint64_t)1 << b->wb_bits;
	uint64_t gen = sfs_load_acquire(&((struct sfs_wbuf *)b)->wb_gen);
	uint64_t top = sfs_load_relaxed(&b->wb_top), live = 0;

	if (gen == 0 || gen > SFS_WBUF_GEN_MAX || top < b->wb_arena_off || top > b->wb_size)
		return sfs__err(SFS_ECORRUPT,
				"write buffer verify: generation %" PRIu64 " or top %" PRIu64
				" out of range", gen, top);
	for (uint64_t i = 0; i < nslots; i++) {
		uint64_t w = sfs_load_acquire(&((uint64_t *)slots)[i]), slot = UINT64_MAX;
		const struct sfs_wbuf_entry *e = NULL, *found = NULL;
		uint32_t kb, kind;
		int rc;

		if (sfs__wbuf_slot_gen(w) != gen)
			continue;
		live++;
		e = sfs__wbuf_entry(b, w);
		if (!e || (const char *)e - (const char *)b +
				  sfs_wbuf_entry_size(sfs__wbuf_klen(e), e->we_vlen) > top)
			return sfs__err(SFS_ECORRUPT,
					"write buffer verify: slot %" PRIu64 " (%#" PRIx64
					") names an entry outside the used arena [%" PRIu64 ", %" PRIu64 ")",
					i, w, b->wb_arena_off, top);
		kb = sfs__wbuf_kindb(e);
		kind = kb & SFS_WBUF_KIND_MASK;
		if (kind < SFS_WBUF_PUT || kind > SFS_WBUF_MERGE ||
		    (kb & ~(SFS_WBUF_KIND_MASK | SFS_WBUF_CELL)) ||
		    (kind == SFS_WBUF_DELETE && (e->we_vlen || (kb & SFS_WBUF_CELL))) ||
		    (kind == SFS_WBUF_MERGE && !(kb & SFS_WBUF_CELL)) ||
		    ((kb & SFS_WBUF_CELL) && e->we_vlen != 8) || sfs__wbuf_klen(e) > SFS_WBUF_KEY_MAX ||
		    e->we_vlen > SFS_WBUF_VALUE_MAX)
			return sfs__err(SFS_ECORRUPT,
					"write buffer verify: slot %" PRIu64 ": entry kind %#x, key %u bytes,"
					" value %u bytes is not a valid entry", i, kb,
					sfs__wbuf_klen(e), e->we_vlen);
		if (sfs__wbuf_slot_tag(w) != sfs__wbuf_tag(e->we_hash) ||
		    e->we_hash != sfs_wbuf_hash(e->we_ns, e + 1, sfs__wbuf_klen(e)))
			return sfs__err(SFS_ECORRUPT,
					"write buffer verify: slot %" PRIu64 ": tag or hash does not match the key",
					i);
		rc = sfs__wbuf_find(b, e->we_hash, e->we_ns, e + 1, sfs__wbuf_klen(e), &found, &slot);
		if (rc || slot != i)
			return sfs__err(SFS_ECORRUPT,
					"write buffer verify: key of slot %" PRIu64 " is found at slot %" PRIu64
					" (rc %d): unreachable or stored twice", i, slot, rc);
	}
	if (live != sfs_load_relaxed(&b->wb_live))
		return sfs__err(SFS_ECORRUPT,
				"write buffer verify: %" PRIu64 " occupied slots, the header counts %" PRIu64,
				live, b->wb_live);
	if (live > b->wb_max_entries)
		return sfs__err(SFS_ECORRUPT,
				"write buffer verify: %" PRIu64 " keys, more than max_entries %" PRIu64,
				live, b->wb_max_entries);
	return 0;
}

/* ---- messages of refused writes ------------------------------------------- */

int sfs__wbuf_refuse(struct sfs_wbuf *b, const char *op, size_t klen, size_t vlen)
{
	if (klen > SFS_WBUF_KEY_MAX)
		return sfs__err(SFS_EUSAGE,
				"write buffer %s: key of %zu bytes is over the limit of %u bytes"
				" (refused, not truncated)", op, klen, SFS_WBUF_KEY_MAX);
	if (vlen > SFS_WBUF_VALUE_MAX)
		return sfs__err(SFS_EUSAGE,
				"write buffer %s: value of %zu bytes is over the limit of %u bytes"
				" (refused, not truncated)", op, vlen, SFS_WBUF_VALUE_MAX);
	return sfs__err(SFS_EUSAGE, "write buffer %s: the buffer is sealed (barrier %" PRIu64 ")",
			op, b->wb_barrier);
}

int sfs__wbuf_full(struct sfs_wbuf *b, const char *op, uint32_t klen, uint32_t vlen, int index_full)
{
	uint64_t need = sfs_wbuf_entry_size(klen, vlen), arena = b->wb_size - b->wb_arena_off;

	if (need > arena)
		return sfs__err(SFS_EUSAGE,
				"write buffer %s: an entry of a %u-byte key and a %u-byte value needs %" PRIu64
				" bytes, more than the whole arena (%" PRIu64 "): it can never fit",
				op, klen, vlen, need, arena);
	sfs_store_relaxed(&b->wb_refused, b->wb_refused + 1);
	if (index_full)
		return sfs__err(SFS_EFULL,
				"write buffer %s: index full (%" PRIu64 " of %" PRIu64 " keys)",
				op, b->wb_live, b->wb_max_entries);
	return sfs__err(SFS_EFULL,
			"write buffer %s: arena full (%" PRIu64 " of %" PRIu64
			" bytes used, the entry needs %" PRIu64 ")",
			op, b->wb_top - b->wb_arena_off, arena, need);
}

int sfs__wbuf_corrupt(const struct sfs_wbuf *b, uint64_t slot, uint64_t word)
{
	if (!word)
		return sfs__err(SFS_ECORRUPT,
				"write buffer: the probe found no free slot in 2^%u slots (index corrupt)",
				b->wb_bits);
	return sfs__err(SFS_ECORRUPT,
			"write buffer: slot %" PRIu64 " (%#" PRIx64 ") names an entry outside the arena [%" PRIu64
			", %" PRIu64 ")", slot, word, b->wb_arena_off, b->wb_size);
}

int sfs__wbuf_notint(struct sfs_wbuf *b, uint32_t vlen)
{
	return sfs__err(SFS_EUSAGE,
			"write buffer merge: the key holds a %u-byte value, not an int64 (8 bytes)", vlen);
}
