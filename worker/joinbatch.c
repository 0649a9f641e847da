/*
 * joinbatch.c — the slow paths of the join batch (contracts and the format
 * in joinbatch.h): geometry, init and attach checks, reset, the callback
 * flush, stats, verification, and the messages of refused adds.  The hot
 * path (hash, probe, add) and the flush walk (next_key, next_rec) are
 * static inline in joinbatch.h.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/fingerprint.h"
#include "common/err.h"
#include "worker/joinbatch.h"

#define JB_MIN_BITS 3u
#define JB_MAX_BITS 31u      /* 3/4 * 2^31 >= SFS_JB_KEYS_MAX */
#define JB_MIN_ARENA 64u

_Static_assert(SFS_JB_GEN_BITS + SFS_JB_TAG_BITS + SFS_JB_OFF_BITS == 64, "slot word is 64 bits");
_Static_assert(offsetof(struct sfs_jb, jb_magic) == 0, "magic first");
_Static_assert(SFS_JB_KNODE % 8 == 0 && SFS_JB_RNODE % 8 == 0, "nodes stay 8-byte aligned");
_Static_assert(SFS_JB_REC_MAX <= UINT32_MAX && SFS_JB_KEY_MAX <= UINT32_MAX, "lengths fit u32");
_Static_assert(SFS_JB_ALIGN % 8 == 0, "block alignment keeps offsets/8 exact");

/* ---- layout fingerprint ------------------------------------------------ */


uint64_t sfs_jb_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	h = sfs_fp(h, sizeof(struct sfs_jb));
	SFS_FP_FIELD(h, struct sfs_jb, jb_magic);
	SFS_FP_FIELD(h, struct sfs_jb, jb_version);
	SFS_FP_FIELD(h, struct sfs_jb, jb_bits);
	SFS_FP_FIELD(h, struct sfs_jb, jb_layout);
	SFS_FP_FIELD(h, struct sfs_jb, jb_size);
	SFS_FP_FIELD(h, struct sfs_jb, jb_arena_off);
	SFS_FP_FIELD(h, struct sfs_jb, jb_max_keys);
	SFS_FP_FIELD(h, struct sfs_jb, jb_flush_recs);
	SFS_FP_FIELD(h, struct sfs_jb, jb_flush_bytes);
	SFS_FP_FIELD(h, struct sfs_jb, jb_top);
	SFS_FP_FIELD(h, struct sfs_jb, jb_nrec);
	SFS_FP_FIELD(h, struct sfs_jb, jb_nkeys);
	SFS_FP_FIELD(h, struct sfs_jb, jb_payload);
	SFS_FP_FIELD(h, struct sfs_jb, jb_gen);
	SFS_FP_FIELD(h, struct sfs_jb, jb_first);
	SFS_FP_FIELD(h, struct sfs_jb, jb_last);
	SFS_FP_FIELD(h, struct sfs_jb, jb_owner);
	SFS_FP_FIELD(h, struct sfs_jb, jb_full);
	SFS_FP_FIELD(h, struct sfs_jb, jb_resets);
	SFS_FP_FIELD(h, struct sfs_jb, jb_flushes);
	SFS_FP_FIELD(h, struct sfs_jb, jb_done_recs);
	SFS_FP_FIELD(h, struct sfs_jb, jb_done_keys);
	SFS_FP_FIELD(h, struct sfs_jb, jb_done_bytes);
	SFS_FP_FIELD(h, struct sfs_jb, jb_refused);
	h = sfs_fp(h, sizeof(struct sfs_jb_knode));
	SFS_FP_FIELD(h, struct sfs_jb_knode, jk_hash);
	SFS_FP_FIELD(h, struct sfs_jb_knode, jk_klen);
	SFS_FP_FIELD(h, struct sfs_jb_knode, jk_nrec);
	SFS_FP_FIELD(h, struct sfs_jb_knode, jk_head);
	SFS_FP_FIELD(h, struct sfs_jb_knode, jk_tail);
	SFS_FP_FIELD(h, struct sfs_jb_knode, jk_next);
	h = sfs_fp(h, sizeof(struct sfs_jb_rnode));
	SFS_FP_FIELD(h, struct sfs_jb_rnode, jr_next);
	SFS_FP_FIELD(h, struct sfs_jb_rnode, jr_len);
	SFS_FP_FIELD(h, struct sfs_jb_rnode, jr_seq);
	h = sfs_fp(h, SFS_JB_INDEX_OFF);
	h = sfs_fp(h, (uint64_t)SFS_JB_GEN_BITS << 16 | SFS_JB_TAG_BITS << 8 | SFS_JB_OFF_BITS);
	h = sfs_fp(h, SFS_JB_KEY_MAX);
	h = sfs_fp(h, SFS_JB_REC_MAX);
	return h;
}

/* ---- geometry ------------------------------------------------------------ */

/* Keys an index of 2^@bits slots accepts: 3/4 of its slots. */
static uint64_t jb_cap(unsigned bits)
{
	return (uint64_t)3 << (bits - 2);
}

static unsigned jb_bits_for(uint64_t max_keys)
{
	unsigned k = JB_MIN_BITS;

	while (jb_cap(k) < max_keys)
		k++;
	return k;
}

static uint64_t jb_index_bytes(unsigned bits)
{
	return (uint64_t)8 << bits;
}

size_t sfs_jb_size(uint64_t max_keys, uint64_t arena_bytes)
{
	uint64_t total;

	if (max_keys == 0 || max_keys > SFS_JB_KEYS_MAX || arena_bytes == 0 ||
	    arena_bytes > SFS_JB_SIZE_MAX)
		return 0;
	arena_bytes = sfs__jb_pad8(arena_bytes);
	if (arena_bytes < JB_MIN_ARENA)
		arena_bytes = JB_MIN_ARENA;
	total = SFS_JB_INDEX_OFF + jb_index_bytes(jb_bits_for(max_keys)) + arena_bytes;
	return total > SFS_JB_SIZE_MAX ? 0 : (size_t)total;
}

/* ---- init / attach ------------------------------------------------------- */

int sfs_jb_init(void *mem, size_t size, const struct sfs_jb_config *cfg, struct sfs_jb **out)
{
	struct sfs_jb *jb = mem;
	uint64_t arena_off, usable = (uint64_t)size & ~(uint64_t)7;
	unsigned bits;

	if (!mem || ((uintptr_t)mem & (SFS_JB_ALIGN - 1)))
		return sfs__err(SFS_EUSAGE, "join batch init: block %p is not %u-byte aligned",
				mem, SFS_JB_ALIGN);
	if (!cfg || !out)
		return sfs__err(SFS_EUSAGE, "join batch init: no configuration or no out handle");
	if (cfg->max_keys == 0 || cfg->max_keys > SFS_JB_KEYS_MAX)
		return sfs__err(SFS_EUSAGE, "join batch init: max_keys %" PRIu64 " not in 1..%" PRIu64,
				cfg->max_keys, SFS_JB_KEYS_MAX);
	bits = jb_bits_for(cfg->max_keys);
	arena_off = SFS_JB_INDEX_OFF + jb_index_bytes(bits);
	if (usable < arena_off + JB_MIN_ARENA)
		return sfs__err(SFS_EUSAGE,
				"join batch init: %zu bytes is too small for %" PRIu64
				" keys (header + index %" PRIu64 " bytes + an arena of at least %u)",
				size, cfg->max_keys, arena_off, JB_MIN_ARENA);
	if (usable > SFS_JB_SIZE_MAX)
		return sfs__err(SFS_EUSAGE,
				"join batch init: %zu bytes is over the limit of %" PRIu64
				" (32-bit offsets in units of 8 bytes)", size, SFS_JB_SIZE_MAX);

	/* No reader may attach a half-built batch: the magic goes to 0 first
	 * (a re-init) and comes back last, with release order. */
	sfs_store_release(&jb->jb_magic, 0);
	memset((char *)jb + sizeof(jb->jb_magic), 0, sizeof(*jb) - sizeof(jb->jb_magic));
	jb->jb_version = SFS_JB_VERSION;
	jb->jb_bits = bits;
	jb->jb_layout = sfs_jb_layout();
	jb->jb_size = usable;
	jb->jb_arena_off = arena_off;
	jb->jb_max_keys = cfg->max_keys;
	jb->jb_flush_recs = cfg->flush_recs;
	jb->jb_flush_bytes = cfg->flush_bytes;
	jb->jb_top = arena_off;
	jb->jb_gen = 1;
	jb->jb_owner = (int32_t)getpid();
	memset(sfs__jb_slots(jb), 0, jb_index_bytes(bits));
	sfs_store_release(&jb->jb_magic, SFS_JB_MAGIC);
	*out = jb;
	return 0;
}

int sfs_jb_attach(void *mem, size_t size, struct sfs_jb **out)
{
	struct sfs_jb *jb = mem;
	uint64_t magic, top, lim;
	uint32_t gen, first, last;

	if (!mem || ((uintptr_t)mem & (SFS_JB_ALIGN - 1)))
		return sfs__err(SFS_EUSAGE, "join batch attach: block %p is not %u-byte aligned",
				mem, SFS_JB_ALIGN);
	if (size < SFS_JB_INDEX_OFF || !out)
		return sfs__err(SFS_EUSAGE,
				"join batch attach: %zu bytes is smaller than the %u-byte header (or no out handle)",
				size, SFS_JB_INDEX_OFF);
	magic = sfs_load_acquire(&jb->jb_magic);
	if (magic != SFS_JB_MAGIC)
		return sfs__err(SFS_EMAGIC,
				"join batch attach: magic %#" PRIx64 ", expected %#llx (not a join batch)",
				magic, SFS_JB_MAGIC);
	if (jb->jb_version != SFS_JB_VERSION)
		return sfs__err(SFS_EVERSION, "join batch attach: format version %u, expected %u",
				jb->jb_version, SFS_JB_VERSION);
	if (jb->jb_layout != sfs_jb_layout())
		return sfs__err(SFS_ELAYOUT,
				"join batch attach: layout fingerprint %#" PRIx64 ", this build has %#" PRIx64,
				jb->jb_layout, sfs_jb_layout());
	if (jb->jb_bits < JB_MIN_BITS || jb->jb_bits > JB_MAX_BITS ||
	    jb->jb_arena_off != SFS_JB_INDEX_OFF + jb_index_bytes(jb->jb_bits))
		return sfs__err(SFS_ECORRUPT,
				"join batch attach: index of 2^%u slots with the arena at %" PRIu64
				" is not a valid geometry", jb->jb_bits, jb->jb_arena_off);
	if (jb->jb_size > size || jb->jb_size % 8 || jb->jb_size < jb->jb_arena_off + JB_MIN_ARENA ||
	    jb->jb_size > SFS_JB_SIZE_MAX)
		return sfs__err(jb->jb_size > size ? SFS_EUSAGE : SFS_ECORRUPT,
				"join batch attach: batch of %" PRIu64 " bytes (arena at %" PRIu64
				"), %zu mapped", jb->jb_size, jb->jb_arena_off, size);
	if (jb->jb_max_keys == 0 || jb->jb_max_keys > jb_cap(jb->jb_bits))
		return sfs__err(SFS_ECORRUPT,
				"join batch attach: max_keys %" PRIu64 " for 2^%u slots (at most %" PRIu64 ")",
				jb->jb_max_keys, jb->jb_bits, jb_cap(jb->jb_bits));
	gen = sfs_load_relaxed(&jb->jb_gen);
	top = sfs_load_relaxed(&jb->jb_top);
	first = sfs_load_relaxed(&jb->jb_first);
	last = sfs_load_relaxed(&jb->jb_last);
	lim = jb->jb_size >> 3;
	if (gen == 0 || gen > SFS_JB_GEN_MAX || top < jb->jb_arena_off || top > jb->jb_size ||
	    top % 8 || first >= lim || last >= lim)
		return sfs__err(SFS_ECORRUPT,
				"join batch attach: generation %u, arena top %" PRIu64
				" or key chain ends %u..%u (offsets/8) out of range", gen, top, first, last);
	*out = jb;
	return 0;
}

/* ---- reset / flush / stats ---------------------------------------------- */

void sfs_jb_reset(struct sfs_jb *jb)
{
	uint32_t gen = jb->jb_gen;
	uint64_t nrec = jb->jb_nrec;

	/* Unpublish the chains first: a reader that still walks sees an end. */
	sfs_store_release(&jb->jb_first, 0);
	jb->jb_last = 0;
	if (nrec) {
		sfs_store_relaxed(&jb->jb_flushes, jb->jb_flushes + 1);
		sfs_store_relaxed(&jb->jb_done_recs, jb->jb_done_recs + nrec);
		sfs_store_relaxed(&jb->jb_done_keys, jb->jb_done_keys + jb->jb_nkeys);
		sfs_store_relaxed(&jb->jb_done_bytes, jb->jb_done_bytes + jb->jb_payload);
	}
	if (gen >= SFS_JB_GEN_MAX) {
		/* Generations are spent: a slot last written 65535 lives ago
		 * would carry the next one.  Clear the index once (O(index)). */
		memset(sfs__jb_slots(jb), 0, jb_index_bytes(jb->jb_bits));
		gen = 0;
	}
	sfs_store_relaxed(&jb->jb_gen, gen + 1);
	sfs_store_relaxed(&jb->jb_top, jb->jb_arena_off);
	sfs_store_relaxed(&jb->jb_nrec, 0);
	sfs_store_relaxed(&jb->jb_nkeys, 0);
	sfs_store_relaxed(&jb->jb_payload, 0);
	sfs_store_relaxed(&jb->jb_resets, jb->jb_resets + 1);
}

void sfs__jb_set_gen(struct sfs_jb *jb, uint32_t gen)
{
	if (gen >= 1 && gen <= SFS_JB_GEN_MAX)
		sfs_store_relaxed(&jb->jb_gen, gen);
}

int sfs_jb_flush(struct sfs_jb *jb, sfs_jb_key_fn fn, void *arg)
{
	struct sfs_jb_iter it = SFS_JB_ITER_INIT;
	const void *key;
	uint32_t klen, nrec;
	int rc;

	if (!fn)
		return sfs__err(SFS_EUSAGE, "join batch flush: no callback");
	while ((rc = sfs__jb_next_key(jb, &it, &key, &klen, &nrec)) == 0) {
		rc = fn(arg, jb, &it, key, klen, nrec);
		if (rc)
			return rc;
	}
	if (rc != -ENOENT)
		return rc;
	sfs_jb_reset(jb);
	return 0;
}

void sfs_jb_stats(const struct sfs_jb *jb, struct sfs_jb_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->size = jb->jb_size;
	st->slots = (uint64_t)1 << jb->jb_bits;
	st->max_keys = jb->jb_max_keys;
	st->arena_bytes = jb->jb_size - jb->jb_arena_off;
	st->flush_recs = jb->jb_flush_recs;
	st->flush_bytes = jb->jb_flush_bytes;
	st->records = sfs_load_relaxed(&jb->jb_nrec);
	st->keys = sfs_load_relaxed(&jb->jb_nkeys);
	st->bytes_used = sfs_load_relaxed(&jb->jb_top) - jb->jb_arena_off;
	st->payload = sfs_load_relaxed(&jb->jb_payload);
	st->recs_per_key = st->keys ? (double)st->records / (double)st->keys : 0.0;
	st->gen = sfs_load_relaxed(&jb->jb_gen);
	st->resets = sfs_load_relaxed(&jb->jb_resets);
	st->flushes = sfs_load_relaxed(&jb->jb_flushes);
	st->flushed_recs = sfs_load_relaxed(&jb->jb_done_recs);
	st->flushed_keys = sfs_load_relaxed(&jb->jb_done_keys);
	st->flushed_bytes = sfs_load_relaxed(&jb->jb_done_bytes);
	st->flushed_recs_per_key =
		st->flushed_keys ? (double)st->flushed_recs / (double)st->flushed_keys : 0.0;
	st->full = sfs_load_relaxed(&jb->jb_full);
	st->refused = sfs_load_relaxed(&jb->jb_refused);
}

/* ---- verification -------------------------------------------------------- */

/* A node of @hdr + @len bytes at @off8 lies inside the used arena. */
static bool jb_used(const struct sfs_jb *jb, uint64_t off8, uint64_t hdr, uint64_t len)
{
	uint64_t off = off8 << 3, top = jb->jb_top;

	return off >= jb->jb_arena_off && off <= top && hdr + len <= top - off;
}

/* Slot where the probe for @kn's key stops: its own slot if the index is
 * sound, or -1 if the probe meets an empty slot first. */
static int64_t jb_probe(const struct sfs_jb *jb, const struct sfs_jb_knode *kn)
{
	const uint64_t *slots = sfs__jb_slots(jb);
	uint64_t mask = ((uint64_t)1 << jb->jb_bits) - 1, h = kn->jk_hash;

	for (uint64_t i = h & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
		uint64_t w = slots[i];
		const struct sfs_jb_knode *o;

		if ((w >> 48) != jb->jb_gen)
			return -1;
		if (((w >> 32) & 0xffff) != (h >> 48) || !jb_used(jb, w & 0xffffffffu, SFS_JB_KNODE, 0))
			continue;
		o = sfs__jb_at(jb, w & 0xffffffffu);
		if (o->jk_hash == h && o->jk_klen == kn->jk_klen &&
		    jb_used(jb, w & 0xffffffffu, SFS_JB_KNODE, o->jk_klen) &&
		    memcmp(o + 1, kn + 1, kn->jk_klen) == 0)
			return (int64_t)i;
	}
	return -1;
}

int sfs_jb_verify(const struct sfs_jb *jb)
{
	const uint64_t *slots = sfs__jb_slots(jb);
	uint64_t nslots = (uint64_t)1 << jb->jb_bits, occupied = 0;
	uint64_t keys = 0, recs = 0, payload = 0, tiled = 0, prev_key = 0;
	uint32_t k = jb->jb_first, last = 0;

	if (jb->jb_top < jb->jb_arena_off || jb->jb_top > jb->jb_size || jb->jb_top % 8)
		return sfs__err(SFS_ECORRUPT, "join batch verify: arena top %" PRIu64
				" outside [%" PRIu64 ", %" PRIu64 "]",
				jb->jb_top, jb->jb_arena_off, jb->jb_size);
	if (jb->jb_gen == 0 || jb->jb_gen > SFS_JB_GEN_MAX)
		return sfs__err(SFS_ECORRUPT, "join batch verify: generation %u", jb->jb_gen);

	/* The key chain: in first-arrival order, so offsets strictly grow. */
	while (k) {
		const struct sfs_jb_knode *kn = sfs__jb_at(jb, k);
		uint64_t nr = 0, prev_rec, r;
		int64_t slot;

		if (k <= prev_key || !jb_used(jb, k, SFS_JB_KNODE, 0) ||
		    !jb_used(jb, k, SFS_JB_KNODE, kn->jk_klen))
			return sfs__err(SFS_ECORRUPT,
					"join batch verify: key node %u (offset/8) after %" PRIu64
					" is out of order or outside the used arena", k, prev_key);
		if (++keys > jb->jb_nkeys)
			return sfs__err(SFS_ECORRUPT, "join batch verify: more keys in the chain than %" PRIu64,
					jb->jb_nkeys);
		if (kn->jk_klen > SFS_JB_KEY_MAX || kn->jk_hash != sfs_jb_hash(kn + 1, kn->jk_klen))
			return sfs__err(SFS_ECORRUPT, "join batch verify: key node %u: length %u or hash wrong",
					k, kn->jk_klen);
		slot = jb_probe(jb, kn);
		if (slot < 0 || (slots[slot] & 0xffffffffu) != k)
			return sfs__err(SFS_ECORRUPT,
					"join batch verify: key node %u is not found from its home slot%s",
					k, slot < 0 ? "" : " (another node holds the same key)");
		/* The first record follows its key node in the same bump. */
		r = kn->jk_head;
		if ((uint64_t)r << 3 != ((uint64_t)k << 3) + sfs_jb_key_cost(kn->jk_klen))
			return sfs__err(SFS_ECORRUPT,
					"join batch verify: key node %u: first record at %" PRIu64
					", expected right after the key", k, r);
		tiled += sfs_jb_key_cost(kn->jk_klen);
		prev_rec = 0;
		while (r) {
			const struct sfs_jb_rnode *rn = sfs__jb_at(jb, r);

			if (r <= prev_rec || !jb_used(jb, r, SFS_JB_RNODE, 0) ||
			    !jb_used(jb, r, SFS_JB_RNODE, rn->jr_len) || rn->jr_len > SFS_JB_REC_MAX)
				return sfs__err(SFS_ECORRUPT,
						"join batch verify: key node %u: record %" PRIu64
						" out of order or outside the used arena", k, r);
			if (++nr > kn->jk_nrec)
				return sfs__err(SFS_ECORRUPT,
						"join batch verify: key node %u: chain longer than its %u records",
						k, kn->jk_nrec);
			payload += rn->jr_len;
			tiled += sfs_jb_rec_cost(rn->jr_len);
			prev_rec = r;
			r = rn->jr_next;
		}
		if (nr != kn->jk_nrec || prev_rec != kn->jk_tail)
			return sfs__err(SFS_ECORRUPT,
					"join batch verify: key node %u: %" PRIu64 " records, tail %" PRIu64
					"; node says %u, tail %u", k, nr, prev_rec, kn->jk_nrec, kn->jk_tail);
		recs += nr;
		prev_key = k;
		last = k;
		k = kn->jk_next;
	}
	if (keys != jb->jb_nkeys || recs != jb->jb_nrec || payload != jb->jb_payload ||
	    last != jb->jb_last)
		return sfs__err(SFS_ECORRUPT,
				"join batch verify: chains hold %" PRIu64 " keys, %" PRIu64 " records, %" PRIu64
				" bytes, last key %u; header says %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %u",
				keys, recs, payload, last, jb->jb_nkeys, jb->jb_nrec, jb->jb_payload,
				jb->jb_last);
	if (tiled != jb->jb_top - jb->jb_arena_off)
		return sfs__err(SFS_ECORRUPT,
				"join batch verify: nodes cover %" PRIu64 " arena bytes, top says %" PRIu64,
				tiled, jb->jb_top - jb->jb_arena_off);

	/* Every occupied slot names a key of the chain (each chain key was
	 * found at its own slot above, so equal counts make a bijection). */
	for (uint64_t i = 0; i < nslots; i++) {
		if ((slots[i] >> 48) != jb->jb_gen)
			continue;
		occupied++;
		if (!jb_used(jb, slots[i] & 0xffffffffu, SFS_JB_KNODE, 0))
			return sfs__err(SFS_ECORRUPT,
					"join batch verify: slot %" PRIu64 " (word %#" PRIx64
					") points outside the used arena", i, slots[i]);
	}
	if (occupied != keys)
		return sfs__err(SFS_ECORRUPT,
				"join batch verify: %" PRIu64 " occupied slots for %" PRIu64 " keys",
				occupied, keys);
	if (keys > jb->jb_max_keys)
		return sfs__err(SFS_ECORRUPT, "join batch verify: %" PRIu64 " keys, limit %" PRIu64,
				keys, jb->jb_max_keys);
	return 0;
}

/* ---- refusals ------------------------------------------------------------ */

int sfs__jb_refuse(struct sfs_jb *jb, size_t klen, size_t len)
{
	sfs_store_relaxed(&jb->jb_refused, jb->jb_refused + 1);
	if (klen > SFS_JB_KEY_MAX)
		return sfs__err(SFS_EUSAGE,
				"join batch add: join key of %zu bytes is over the limit of %u bytes",
				klen, SFS_JB_KEY_MAX);
	if (len > SFS_JB_REC_MAX)
		return sfs__err(SFS_EUSAGE,
				"join batch add: record of %zu bytes is over the limit of %u bytes",
				len, SFS_JB_REC_MAX);
	return sfs__err(SFS_EUSAGE, "join batch add: NULL %s with a length of %zu bytes",
			len ? "record" : "key", len ? len : klen);
}

int sfs__jb_full(struct sfs_jb *jb, size_t klen, size_t len, int index_full)
{
	uint64_t need = sfs_jb_key_cost(klen) + sfs_jb_rec_cost(len);
	uint64_t arena = jb->jb_size - jb->jb_arena_off;

	if (need > arena) {
		/* Even an empty batch could not hold it: EFULL would make the
		 * caller flush and retry for ever. */
		sfs_store_relaxed(&jb->jb_refused, jb->jb_refused + 1);
		return sfs__err(SFS_EUSAGE,
				"join batch add: key of %zu + record of %zu bytes need %" PRIu64
				" arena bytes, the batch has %" PRIu64 " (record too big for this batch)",
				klen, len, need, arena);
	}
	sfs_store_relaxed(&jb->jb_full, jb->jb_full + 1);
	if (index_full)
		return sfs__err(SFS_EFULL,
				"join batch add: %" PRIu64 " distinct keys, the limit: flush and retry",
				jb->jb_nkeys);
	return sfs__err(SFS_EFULL,
			"join batch add: arena full (%" PRIu64 " of %" PRIu64
			" bytes used, %" PRIu64 " records): flush and retry",
			jb->jb_top - jb->jb_arena_off, arena, jb->jb_nrec);
}

int sfs__jb_corrupt(const struct sfs_jb *jb, const char *what, uint64_t off8)
{
	return sfs__err(SFS_ECORRUPT,
			"join batch at %p: %s at offset %" PRIu64 " lies outside the arena [%" PRIu64
			", %" PRIu64 ")", (const void *)jb, what, off8 << 3, jb->jb_arena_off,
			jb->jb_size);
}

/* ---- the public calls (include/sfs_join.h): the inline paths, exported ---- */

int sfs_jb_add(struct sfs_jb *jb, const void *key, size_t klen, const void *rec, size_t len,
	       uint64_t seq)
{
	return sfs__jb_add(jb, key, klen, rec, len, seq);
}

int sfs_jb_should_flush(const struct sfs_jb *jb)
{
	return sfs__jb_should_flush(jb);
}

uint64_t sfs_jb_records(const struct sfs_jb *jb)
{
	return sfs__jb_records(jb);
}

uint64_t sfs_jb_keys(const struct sfs_jb *jb)
{
	return sfs__jb_keys(jb);
}

int sfs_jb_next_key(const struct sfs_jb *jb, struct sfs_jb_iter *it, const void **key,
		    uint32_t *klen, uint32_t *nrec)
{
	return sfs__jb_next_key(jb, it, key, klen, nrec);
}

int sfs_jb_next_rec(const struct sfs_jb *jb, struct sfs_jb_iter *it, const void **rec,
		    uint32_t *len, uint64_t *seq)
{
	return sfs__jb_next_rec(jb, it, rec, len, seq);
}
