/*
 * vcache.c — the value cache's slow paths: geometry, init/attach, put and
 * the hand (CLOCK over the log), invalidate, clear, stats and verify
 * (design, costs and contracts in vcache.h).
 *
 * Order of a put, and why:
 *   1. find the key; if the new record is no bigger than the old one (and
 *      not 1/4 smaller), rewrite it in place: done;
 *   2. otherwise mark the old record dead first: whatever happens next —
 *      a refusal included — the old value is gone;
 *   3. step the hand until the record fits the log and the index;
 *   4. append (after a pad record if it would straddle the ring's end),
 *      then publish its slot.
 *
 * Log positions are offsets in [0, D) plus vc_log_used, the bytes from head
 * to tail: head == tail means empty or full, and used says which.  When the
 * log empties, both go back to 0 so that any record up to obj_max fits
 * without a pad.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/fingerprint.h"
#include "common/err.h"
#include "worker/vcache.h"

/* ---- layout fingerprint ---------------------------------------------- */


uint64_t sfs_vcache_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_vcache);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_magic);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_version);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_owner);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_layout);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_size);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_bits);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_max_entries);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_log_off);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_log_size);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_obj_max);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_head);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_tail);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_log_used);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_live);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_bytes_used);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_puts);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_replaces);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_evictions);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_moves);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_hits);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_neg_hits);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_misses);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_invalidations);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_refused);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_clears);
	SFS_FP_FIELD(h, struct sfs_vcache, vc_moved_bytes);
	SFS_FP_SIZE(h, struct sfs_vcache_rec);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_size);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_kf);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_hash);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_vlen);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_tag);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_ns);
	SFS_FP_FIELD(h, struct sfs_vcache_rec, vr_state);
	h = sfs_fp(h, SFS_VCACHE_INDEX_OFF);
	h = sfs_fp(h, SFS_VCACHE_KEY_MAX);
	h = sfs_fp(h, SFS__VC_LIVE | SFS__VC_REF << 8 | SFS__VC_ABSENT << 16 | SFS__VC_PAD << 24);
	return h;
}

#undef F
#undef S

/* ---- geometry ---------------------------------------------------------- */

struct vc_geom {
	uint32_t bits;         /* index 2^bits slots */
	uint64_t max_entries;  /* <= 3/4 of the slots */
	uint64_t log_off;
	uint64_t log_size;     /* a multiple of 64 */
	uint64_t obj_max;      /* log / 8, at most a whole key + value */
};

/* The geometry of a @size-byte block with @max_entries (0: auto).  0 or
 * SFS_EUSAGE; @quiet: no message (sfs_vcache_size probes with it). */
static int vc_geom(const void *mem, size_t size, uint64_t max_entries, bool quiet,
		   struct vc_geom *g)
{
	uint32_t bits = 3;

	if (max_entries > SFS_VCACHE_ENTRIES_MAX)
		return quiet ? SFS_EUSAGE :
		       sfs__err(SFS_EUSAGE, "vcache at %p: %" PRIu64 " entries, at most %u",
				mem, max_entries, SFS_VCACHE_ENTRIES_MAX);
	if (max_entries) {
		while (((uint64_t)3 << bits) / 4 < max_entries)  /* load <= 3/4 */
			bits++;
		g->max_entries = max_entries;
	} else {
		/* The largest index that is at most 1/8 of the block. */
		while (bits < 31 && ((uint64_t)8 << (bits + 1)) <= size / 8)
			bits++;
		g->max_entries = ((uint64_t)3 << bits) / 4;
	}
	g->bits = bits;
	g->log_off = SFS_VCACHE_INDEX_OFF + ((uint64_t)8 << bits);
	g->log_size = size > g->log_off ? (size - g->log_off) & ~(uint64_t)63 : 0;
	if (g->log_size < SFS_VCACHE_LOG_MIN)
		return quiet ? SFS_EUSAGE :
		       sfs__err(SFS_EUSAGE, "vcache at %p: %zu bytes with a %" PRIu64 "-slot index "
				"leave a %" PRIu64 "-byte log, at least %u needed", mem, size,
				(uint64_t)1 << bits, g->log_size, SFS_VCACHE_LOG_MIN);
	if (g->log_size > SFS_VCACHE_LOG_MAX)
		return quiet ? SFS_EUSAGE :
		       sfs__err(SFS_EUSAGE, "vcache at %p: a %" PRIu64 "-byte log, at most %" PRIu64,
				mem, g->log_size, SFS_VCACHE_LOG_MAX);
	g->obj_max = g->log_size / 8;
	if (g->obj_max > SFS_VCACHE_REC_HDR + SFS_VCACHE_KEY_MAX + SFS_VCACHE_VALUE_MAX)
		g->obj_max = SFS_VCACHE_REC_HDR + SFS_VCACHE_KEY_MAX + SFS_VCACHE_VALUE_MAX;
	return 0;
}

size_t sfs_vcache_size(uint64_t capacity, uint64_t max_entries)
{
	uint64_t size;
	struct vc_geom g;

	if (capacity == 0 || capacity > SFS_VCACHE_LOG_MAX || max_entries > SFS_VCACHE_ENTRIES_MAX)
		return 0;
	if (capacity < SFS_VCACHE_LOG_MIN)
		capacity = SFS_VCACHE_LOG_MIN;
	capacity = (capacity + 63) & ~(uint64_t)63;
	/* The log is what the header and index leave, and the default index
	 * grows with the block (1/8 of it): grow the block by the log's
	 * shortfall until none is left.  One step with @max_entries; a few
	 * without, one more at each doubling of the index. */
	size = SFS_VCACHE_INDEX_OFF + capacity;
	for (int i = 0; i < 64; i++) {
		int rc = vc_geom(NULL, size, max_entries, true, &g);

		if (rc == 0 && g.log_size >= capacity)
			return (size_t)size;
		if (g.log_size > SFS_VCACHE_LOG_MAX)
			return 0;
		size = g.log_off + capacity > size + 64 ? g.log_off + capacity : size + 64;
	}
	return 0;
}

static int vc_check_mem(const void *mem, size_t size)
{
	if (mem == NULL || (uintptr_t)mem % SFS_VCACHE_ALIGN)
		return sfs__err(SFS_EUSAGE, "vcache at %p: base not aligned to %u bytes", mem,
				SFS_VCACHE_ALIGN);
	if (size < SFS_VCACHE_INDEX_OFF)
		return sfs__err(SFS_EUSAGE, "vcache at %p: %zu bytes, smaller than its header",
				mem, size);
	return 0;
}

/* ---- init / attach / clear ---------------------------------------------- */

/* Empty the owner's state and the index; identity and counters untouched.
 * The log is not cleared: nothing is read outside [head, tail). */
static void vc_reset(struct sfs_vcache *c)
{
	memset(sfs__vc_slots(c), 0, (size_t)8 << c->vc_bits);
	sfs_store_relaxed(&c->vc_head, 0);
	sfs_store_relaxed(&c->vc_tail, 0);
	sfs_store_relaxed(&c->vc_log_used, 0);
	sfs_store_relaxed(&c->vc_live, 0);
	sfs_store_relaxed(&c->vc_bytes_used, 0);
}

int sfs_vcache_init(void *mem, size_t size, uint64_t max_entries, struct sfs_vcache **out)
{
	struct sfs_vcache *c = mem;
	struct vc_geom g;
	int rc = vc_check_mem(mem, size);

	if (rc)
		return rc;
	rc = vc_geom(mem, size, max_entries, false, &g);
	if (rc)
		return rc;
	/* Unpublish first: a stale attacher must not see the old magic over
	 * new fields while we rewrite them. */
	sfs_store_release(&c->vc_magic, 0);
	memset((char *)c + sizeof(c->vc_magic), 0, sizeof(*c) - sizeof(c->vc_magic));
	c->vc_version = SFS_VCACHE_VERSION;
	c->vc_owner = (int32_t)getpid();
	c->vc_layout = sfs_vcache_layout();
	c->vc_size = size;
	c->vc_bits = g.bits;
	c->vc_max_entries = (uint32_t)g.max_entries;
	c->vc_log_off = g.log_off;
	c->vc_log_size = g.log_size;
	c->vc_obj_max = (uint32_t)g.obj_max;
	vc_reset(c);
	sfs_store_release(&c->vc_magic, SFS_VCACHE_MAGIC);
	*out = c;
	return 0;
}

int sfs_vcache_attach(void *mem, size_t size, struct sfs_vcache **out)
{
	struct sfs_vcache *c = mem;
	struct vc_geom g;
	uint64_t m;
	int rc = vc_check_mem(mem, size);

	if (rc)
		return rc;
	m = sfs_load_acquire(&c->vc_magic);
	if (m != SFS_VCACHE_MAGIC)
		return sfs__err(SFS_EMAGIC, "vcache at %p: magic %#" PRIx64 ", expected %#" PRIx64,
				mem, m, (uint64_t)SFS_VCACHE_MAGIC);
	if (c->vc_version != SFS_VCACHE_VERSION)
		return sfs__err(SFS_EVERSION, "vcache at %p: format version %u, expected %u", mem,
				c->vc_version, SFS_VCACHE_VERSION);
	if (c->vc_layout != sfs_vcache_layout())
		return sfs__err(SFS_ELAYOUT, "vcache at %p: layout fingerprint %#" PRIx64
				", this build has %#" PRIx64, mem, c->vc_layout, sfs_vcache_layout());
	if (c->vc_size != size)
		return sfs__err(SFS_ECORRUPT, "vcache at %p: header says %" PRIu64 " bytes, "
				"mapped %zu", mem, c->vc_size, size);
	rc = vc_geom(mem, size, c->vc_max_entries ? c->vc_max_entries : 1, false, &g);
	if (rc)
		return rc;
	if (g.bits != c->vc_bits || g.log_off != c->vc_log_off || g.log_size != c->vc_log_size ||
	    g.obj_max != c->vc_obj_max)
		return sfs__err(SFS_ECORRUPT, "vcache at %p: geometry (bits %u, log %" PRIu64 "+%"
				PRIu64 ", obj_max %u) differs from what %zu bytes and %u entries "
				"give (%u, %" PRIu64 "+%" PRIu64 ", %" PRIu64 ")", mem, c->vc_bits,
				c->vc_log_off, c->vc_log_size, c->vc_obj_max, size,
				c->vc_max_entries, g.bits, g.log_off, g.log_size, g.obj_max);
	*out = c;
	return 0;
}

void sfs_vcache_clear(struct sfs_vcache *c)
{
	vc_reset(c);
	sfs_store_relaxed(&c->vc_clears, c->vc_clears + 1);
}

/* ---- index ----------------------------------------------------------------- */

/* The slot naming the record at log offset @off with hash tag @h32, or -1:
 * a probe from home. */
static int64_t vc_slot_of(const struct sfs_vcache *c, uint32_t h32, uint64_t off)
{
	const uint64_t *s = sfs__vc_slots(c);
	uint64_t mask = ((uint64_t)1 << c->vc_bits) - 1, want = sfs__vc_slot(h32, off);
	uint64_t i = h32 & mask;

	for (uint64_t n = 0; n <= mask && s[i]; n++, i = (i + 1) & mask)
		if (s[i] == want)
			return (int64_t)i;
	return -1;
}

/*
 * Empty slot @i by backward shift: each later slot of the run whose home
 * is not in (hole, itself] moves into the hole, and the hole moves on.
 * Linear probing stays tombstone-free.  Cost: the rest of the run.
 */
static void vc_unslot(struct sfs_vcache *c, uint64_t i)
{
	uint64_t *s = sfs__vc_slots(c);
	uint64_t mask = ((uint64_t)1 << c->vc_bits) - 1, j = i;

	for (;;) {
		uint64_t w, home;

		j = (j + 1) & mask;
		w = s[j];
		if (w == 0)
			break;
		home = (w >> 32) & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			s[i] = w;
			i = j;
		}
	}
	s[i] = 0;
}

/* Unindex the live record in slot @slot and mark it dead; its bytes stay
 * in the log until the head passes. */
static void vc_kill(struct sfs_vcache *c, uint64_t slot)
{
	struct sfs_vcache_rec *r = sfs__vc_rec(c, sfs__vc_slot_off(sfs__vc_slots(c)[slot]));

	vc_unslot(c, slot);
	r->vr_kf &= ~((uint32_t)SFS__VC_LIVE << 24);
	sfs_store_relaxed(&c->vc_live, c->vc_live - 1);
	sfs_store_relaxed(&c->vc_bytes_used, c->vc_bytes_used - r->vr_size);
}

/* ---- the hand ------------------------------------------------------------------ */

static int vc_corrupt(const struct sfs_vcache *c, uint64_t off, const char *what)
{
	return sfs__err(SFS_ECORRUPT, "vcache at %p: log record at %" PRIu64 " (head %" PRIu64
			", tail %" PRIu64 ", %" PRIu64 " bytes used of %" PRIu64 "): %s",
			(const void *)c, off, c->vc_head, c->vc_tail, c->vc_log_used,
			c->vc_log_size, what);
}

/* Write a pad record over [@tail, D), the ring's end that the next record
 * would straddle.  Returns the pad's length (>= 8: offsets are multiples
 * of 8). */
static uint64_t vc_pad(struct sfs_vcache *c, uint64_t tail)
{
	struct sfs_vcache_rec *p = sfs__vc_rec(c, tail);
	uint64_t pad = c->vc_log_size - tail;

	p->vr_size = (uint32_t)pad;
	p->vr_kf = (uint32_t)SFS__VC_PAD << 24;
	return pad;
}

/*
 * One step of the hand: the record at the head is skipped (dead or pad),
 * evicted (live, bit clear) or moved to the tail (live, bit set: cleared).
 * A move never needs free space: the free gap [tail, head) and the record
 * itself are contiguous in the ring, so the record slides down into the
 * gap (memmove: they may overlap), after a pad if it would straddle the
 * ring's end — and a pad is only needed when the gap wraps, so it fits.
 */
static int vc_step(struct sfs_vcache *c)
{
	uint64_t d = c->vc_log_size, head = c->vc_head, tail = c->vc_tail, used = c->vc_log_used;
	struct sfs_vcache_rec *r = sfs__vc_rec(c, head);
	uint64_t s = r->vr_size;
	uint32_t f = sfs__vc_flags(r);

	if (used == 0)
		return vc_corrupt(c, head, "the hand found the log empty");
	if (s < 8 || s % 8 || s > d - head || s > used)
		return vc_corrupt(c, head, "bad record size");
	if (!(f & SFS__VC_LIVE) || (f & SFS__VC_PAD)) {
		used -= s;
	} else {
		int64_t slot = vc_slot_of(c, r->vr_hash, head);

		if (slot < 0)
			return vc_corrupt(c, head, "live record in no index slot");
		if (f & SFS__VC_REF) {
			uint32_t h32 = r->vr_hash;  /* the copy may overwrite the source */

			r->vr_kf &= ~((uint32_t)SFS__VC_REF << 24);
			if (tail + s > d) {
				used += vc_pad(c, tail);
				tail = 0;
			}
			memmove(sfs__vc_rec(c, tail), r, s);
			sfs__vc_slots(c)[slot] = sfs__vc_slot(h32, tail);
			tail += s;
			if (tail == d)
				tail = 0;
			sfs_store_relaxed(&c->vc_moves, c->vc_moves + 1);
			sfs_store_relaxed(&c->vc_moved_bytes, c->vc_moved_bytes + s);
		} else {
			vc_kill(c, (uint64_t)slot);
			used -= s;
			sfs_store_relaxed(&c->vc_evictions, c->vc_evictions + 1);
		}
	}
	head += s;
	if (head == d)
		head = 0;
	if (used == 0)  /* empty: start over at 0, where anything fits unpadded */
		head = tail = 0;
	sfs_store_relaxed(&c->vc_head, head);
	sfs_store_relaxed(&c->vc_tail, tail);
	sfs_store_relaxed(&c->vc_log_used, used);
	return 0;
}

/* Whether a record of @r bytes fits at the tail now (after a pad if it
 * would straddle the ring's end). */
static bool vc_fits(const struct sfs_vcache *c, uint64_t r)
{
	uint64_t d = c->vc_log_size, tail = c->vc_tail;
	uint64_t pad = tail + r > d ? d - tail : 0;

	return c->vc_log_used + pad + r <= d;
}

/* ---- put / invalidate ------------------------------------------------------ */

static int vc_refuse(struct sfs_vcache *c, int code, const char *why, size_t klen, size_t vlen)
{
	sfs_store_relaxed(&c->vc_refused, c->vc_refused + 1);
	return sfs__err(code, "vcache at %p: %zu-byte key, %zu-byte value not cached: %s",
			(void *)c, klen, vlen, why);
}

static int vc_put(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns, const void *key,
		  size_t klen, const void *val, size_t vlen, uint64_t tag, uint32_t absent)
{
	uint64_t rsz, slot, steps = 0, d = c->vc_log_size, tail;
	struct sfs_vcache_rec *r;
	uint32_t ref = 0;
	int rc;

	if (klen > SFS_VCACHE_KEY_MAX)
		return vc_refuse(c, SFS_EUSAGE, "key over SFS_VCACHE_KEY_MAX (64 KiB)", klen, vlen);
	rsz = vlen > SFS_VCACHE_VALUE_MAX ? UINT64_MAX :
	      SFS_VCACHE_REC_HDR + sfs__vc_pad8((uint32_t)klen) + sfs__vc_pad8((uint32_t)vlen);
	if (sfs__vc_find(c, h, state, ns, key, (uint32_t)klen, &slot) >= 0) {
		r = sfs__vc_rec(c, sfs__vc_slot_off(sfs__vc_slots(c)[slot]));
		if (rsz <= r->vr_size && r->vr_size - rsz <= r->vr_size / 4) {
			/* In place: same key, tag and value rewritten, record size kept
			 * (bytes_used unchanged).  Views die with the put anyway. */
			r->vr_tag = tag;
			r->vr_vlen = (uint32_t)vlen;
			if (vlen)
				memcpy(sfs__vc_value(r), val, vlen);
			r->vr_kf = (uint32_t)klen | (SFS__VC_LIVE | SFS__VC_REF | absent) << 24;
			sfs_store_relaxed(&c->vc_replaces, c->vc_replaces + 1);
			sfs_store_relaxed(&c->vc_puts, c->vc_puts + 1);
			return 0;
		}
		/* The old value goes first, whatever happens next. */
		vc_kill(c, slot);
		if (rsz <= c->vc_obj_max)
			sfs_store_relaxed(&c->vc_replaces, c->vc_replaces + 1);
		ref = SFS__VC_REF;  /* a rewritten key is a used key */
	}
	if (rsz > c->vc_obj_max)
		return vc_refuse(c, SFS_EFULL, "record over the cache's obj_max (1/8 of the log)",
				 klen, vlen);

	/* Room.  Each step frees a record or moves one whose bit it clears, so
	 * two laps of the log always suffice (bounded against a corrupt log). */
	while (c->vc_live >= c->vc_max_entries || !vc_fits(c, rsz)) {
		if (++steps > d / 4 + 2)
			return vc_corrupt(c, c->vc_head, "the hand made no room in two laps");
		if ((rc = vc_step(c)))
			return rc;
	}

	/* Append. */
	tail = c->vc_tail;
	if (tail + rsz > d) {
		sfs_store_relaxed(&c->vc_log_used, c->vc_log_used + vc_pad(c, tail));
		tail = 0;
	}
	r = sfs__vc_rec(c, tail);
	r->vr_size = (uint32_t)rsz;
	r->vr_kf = (uint32_t)klen | (SFS__VC_LIVE | ref | absent) << 24;
	r->vr_hash = (uint32_t)(h >> 32);
	r->vr_vlen = (uint32_t)vlen;
	r->vr_tag = tag;
	r->vr_ns = ns;
	r->vr_state = state;
	r->vr_pad = 0;
	memcpy(r + 1, key, klen);
	if (vlen)
		memcpy(sfs__vc_value(r), val, vlen);
	{
		uint64_t *s = sfs__vc_slots(c), mask = ((uint64_t)1 << c->vc_bits) - 1;
		uint64_t i = (h >> 32) & mask;

		while (s[i])  /* steps may have shifted the run: probe afresh */
			i = (i + 1) & mask;
		s[i] = sfs__vc_slot(r->vr_hash, tail);
	}
	tail += rsz;
	if (tail == d)
		tail = 0;
	sfs_store_relaxed(&c->vc_tail, tail);
	sfs_store_relaxed(&c->vc_log_used, c->vc_log_used + rsz);
	sfs_store_relaxed(&c->vc_live, c->vc_live + 1);
	sfs_store_relaxed(&c->vc_bytes_used, c->vc_bytes_used + rsz);
	sfs_store_relaxed(&c->vc_puts, c->vc_puts + 1);
	return 0;
}

int sfs_vcache_put_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
		     const void *key, size_t klen, const void *val, size_t vlen, uint64_t tag)
{
	if (val == NULL && vlen)
		return sfs__err(SFS_EUSAGE, "vcache at %p: put of a %zu-byte value from NULL",
				(void *)c, vlen);
	return vc_put(c, h, state, ns, key, klen, val, vlen, tag, 0);
}

int sfs_vcache_put_absent_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
			    const void *key, size_t klen, uint64_t tag)
{
	return vc_put(c, h, state, ns, key, klen, NULL, 0, tag, SFS__VC_ABSENT);
}

int sfs_vcache_invalidate_h(struct sfs_vcache *c, uint64_t h, uint32_t state, uint64_t ns,
			    const void *key, size_t klen)
{
	uint64_t slot;

	if (klen > SFS_VCACHE_KEY_MAX)  /* never cached */
		return -ENOENT;
	if (sfs__vc_find(c, h, state, ns, key, (uint32_t)klen, &slot) < 0)
		return -ENOENT;
	vc_kill(c, slot);
	sfs_store_relaxed(&c->vc_invalidations, c->vc_invalidations + 1);
	return 0;
}

/* ---- stats / verify ---------------------------------------------------------- */

void sfs_vcache_stats(const struct sfs_vcache *c, struct sfs_vcache_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->size = c->vc_size;
	st->capacity = c->vc_log_size;
	st->bytes_used = sfs_load_relaxed(&c->vc_bytes_used);
	st->log_bytes = sfs_load_relaxed(&c->vc_log_used);
	st->entries = sfs_load_relaxed(&c->vc_live);
	st->max_entries = c->vc_max_entries;
	st->obj_max = c->vc_obj_max;
	st->overhead = c->vc_size - c->vc_log_size;
	st->hits = sfs_load_relaxed(&c->vc_hits);
	st->neg_hits = sfs_load_relaxed(&c->vc_neg_hits);
	st->misses = sfs_load_relaxed(&c->vc_misses);
	st->puts = sfs_load_relaxed(&c->vc_puts);
	st->replaces = sfs_load_relaxed(&c->vc_replaces);
	st->invalidations = sfs_load_relaxed(&c->vc_invalidations);
	st->evictions = sfs_load_relaxed(&c->vc_evictions);
	st->moves = sfs_load_relaxed(&c->vc_moves);
	st->moved_bytes = sfs_load_relaxed(&c->vc_moved_bytes);
	st->refused = sfs_load_relaxed(&c->vc_refused);
	st->clears = sfs_load_relaxed(&c->vc_clears);
}

#define VC_BAD(...) sfs__err(SFS_ECORRUPT, __VA_ARGS__)

int sfs_vcache_verify(const struct sfs_vcache *c)
{
	const uint64_t *s = sfs__vc_slots(c);
	uint64_t mask = ((uint64_t)1 << c->vc_bits) - 1, d = c->vc_log_size;
	uint64_t head = c->vc_head, tail = c->vc_tail, used = c->vc_log_used;
	uint64_t nslots = 0, live = 0, bytes = 0, p, left;

	if (head >= d || tail >= d || used > d || (head + used) % d != tail)
		return VC_BAD("vcache at %p: head %" PRIu64 ", tail %" PRIu64 ", %" PRIu64
			      " bytes used do not fit a %" PRIu64 "-byte log", (const void *)c,
			      head, tail, used, d);
	/* The log: a chain of whole records from head to tail. */
	for (p = head, left = used; left; ) {
		const struct sfs_vcache_rec *r = sfs__vc_rec(c, p);
		uint64_t sz = r->vr_size, slot;
		uint32_t f = sfs__vc_flags(r), klen = sfs__vc_klen(r);

		if (sz < 8 || sz % 8 || sz > d - p || sz > left)
			return vc_corrupt(c, p, "bad record size in the chain");
		if (f & SFS__VC_PAD) {
			if (p + sz != d)
				return vc_corrupt(c, p, "a pad record that does not end the ring");
		} else if (f & SFS__VC_LIVE) {
			if (sz < SFS_VCACHE_REC_HDR || klen > SFS_VCACHE_KEY_MAX ||
			    SFS_VCACHE_REC_HDR + (uint64_t)sfs__vc_pad8(klen) +
			    sfs__vc_pad8(r->vr_vlen) > sz)
				return vc_corrupt(c, p, "live record too small for its key and value");
			if ((f & SFS__VC_ABSENT) && r->vr_vlen)
				return vc_corrupt(c, p, "negative entry with a value");
			if ((uint32_t)(sfs_vcache_hash(r->vr_state, r->vr_ns, r + 1, klen) >> 32) !=
			    r->vr_hash)
				return vc_corrupt(c, p, "tag is not the key's hash");
			if (sfs__vc_find(c, (uint64_t)r->vr_hash << 32, r->vr_state, r->vr_ns, r + 1,
					 klen, &slot) < 0 || s[slot] != sfs__vc_slot(r->vr_hash, p))
				return vc_corrupt(c, p, "its key finds another record or none "
						  "(a duplicate or an unindexed key)");
			live++;
			bytes += sz;
		}
		left -= sz;
		p += sz;
		if (p == d)
			p = 0;
	}
	/* The index: every slot reachable from its home.  With one distinct
	 * slot found per live record above, equal counts make it a bijection. */
	for (uint64_t i = 0; i <= mask; i++) {
		uint64_t w = s[i];

		if (!w)
			continue;
		nslots++;
		if (sfs__vc_slot_off(w) >= d)
			return VC_BAD("vcache at %p: slot %" PRIu64 " = %#" PRIx64 " points past "
				      "the log", (const void *)c, i, w);
		for (uint64_t j = (w >> 32) & mask; j != i; j = (j + 1) & mask)
			if (!s[j])
				return VC_BAD("vcache at %p: slot %" PRIu64 " is cut off from its "
					      "home by empty slot %" PRIu64, (const void *)c, i, j);
	}
	if (live != c->vc_live || nslots != live || bytes != c->vc_bytes_used ||
	    live > c->vc_max_entries || nslots * 4 > (mask + 1) * 3)
		return VC_BAD("vcache at %p: %" PRIu64 " live records of %" PRIu64 " bytes, %"
			      PRIu64 " slots; header says %" PRIu64 " live, %" PRIu64 " bytes, "
			      "at most %u", (const void *)c, live, bytes, nslots, c->vc_live,
			      c->vc_bytes_used, c->vc_max_entries);
	return 0;
}
