/*
 * mapstate.c — map and list state on top of the write buffers.
 *
 * In a buffer, a map key (parent P = kg|state|klen|key) has a head entry
 * {chain start, clear position} and every write of one of its user keys
 * appends an entry (key P|ukey) whose value starts with a link header
 * {prev, flags}.  The chain links, newest first, the first entry each user
 * key got in this buffer since the map's last clear in it: one node per
 * user key the buffer touched, however often it was overwritten.  So a
 * buffer lists a map's entries in O(its user keys), without a scan: a node
 * that is still its key's current entry is read in place, and one that was
 * superseded (flag MAP_SUPERSEDED) names its key's current entry in the
 * rest of its flags word, so the walk follows one offset instead of
 * hashing the key and probing the index (two misses in turn).  An entry
 * that overwrites another of this chain is no chain node
 * (MAP_REPLACEMENT): its link names its user key's chain node, whose flags
 * the next overwrite rewrites.  Point reads use the buffer's hash index on
 * P|ukey directly.  A clear resets the chain and records the arena
 * position of the clear: entries of that buffer below it are shadowed, and
 * so is every older layer.
 *
 * Two words are written in place, by the owner, in its active buffer only:
 * the head's chain start (a new user key links in without appending a new
 * head) and the flags of a superseded chain node.  Both are aligned 8-byte
 * stores, so a reader in another process sees a whole word; and none of
 * them is what anyone but this file reads (the flush reads the head's clear
 * position and the current entries' REMOVED bit, of sealed buffers, which
 * never change).  Everything else keeps the write buffer's rule: appended,
 * published, then immutable.
 *
 * A map write is then one entry append (+ the head's first append per
 * buffer), one probe of the head and one of the entry; room for both
 * appends is checked first, so a full buffer is spilled before, never
 * between them.  Lists are maps whose user keys are a per-worker sequence
 * number (8 bytes, big-endian: append order is key order).
 *
 * Costs: put/remove O(1) (two probes, one append); get O(buffers) (two
 * probes each); iterate O(user keys of the map per buffer + the store's
 * live entries) with a process-local set of seen user keys when more than
 * one layer contributes.  Order: unspecified (sfs.h); today buffers newest
 * first, each newest first, then the store's list order.
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "worker/state.h"

struct sfs_seen {
	size_t cap, n;
	struct seen_ent {
		uint64_t h;
		const void *k;
		uint32_t len;
	} *e;
};

/* Build P in c->kbuf (and P|ukey after it); returns P's length. */
static int parent_key(sfs_ctx_t *c, uint32_t state, uint32_t kind, const void *key, size_t klen,
		      const void *ukey, size_t ulen, const char *op)
{
	int kg = sfs__state_check(c, state, kind, key, klen, ulen + SFS_MAP_PREFIX - SFS_KEY_PREFIX,
				  op);

	if (kg < 0)
		return kg;
	sfs_key_prefix(c->kbuf, (uint32_t)kg, state);
	c->kbuf[4] = (unsigned char)(klen >> 8);
	c->kbuf[5] = (unsigned char)klen;
	memcpy(c->kbuf + SFS_MAP_PREFIX, key, klen);
	if (ulen)
		memcpy(c->kbuf + SFS_MAP_PREFIX + klen, ukey, ulen);
	return (int)(SFS_MAP_PREFIX + klen);
}

static struct sfs_wbuf *active(sfs_ctx_t *c)
{
	return c->buf[c->ctl->wc_active];
}

/* The expiry a write of @state stamps (0: the state has no TTL). */
static uint64_t ttl_stamp(const sfs_ctx_t *c, uint32_t state)
{
	return c->ttl_ms[state] ? sfs__ttl_expiry(c, state) : 0;
}

/* Private flags of a map entry's link header.  MAP_SUPERSEDED: a chain
 * node whose user key has a newer entry in this buffer, whose offset / 8
 * is the flags word's bits MAP_CUR_SHIFT.. (the owner rewrites the whole
 * word, one aligned store, at each overwrite).  MAP_REPLACEMENT: an entry
 * that is no chain node; its me_prev is its user key's chain node. */
#define MAP_SUPERSEDED 2u
#define MAP_REPLACEMENT 4u
#define MAP_CUR_SHIFT 8

/* The head of map @p (length @n, hash @h) in buffer @b: 1 found, 0 not. */
int sfs__map_head_of(const struct sfs_wbuf *b, uint64_t h, uint64_t ns, const unsigned char *p,
		     size_t n, struct sfs_map_head *hd)
{
	struct sfs_wbuf_view v;

	if (sfs_wbuf_get_h(b, h, ns, p, n, &v) != 0 || v.kind != SFS_WBUF_PUT ||
	    v.len != sizeof(*hd)) {
		memset(hd, 0, sizeof(*hd));
		return 0;
	}
	memcpy(hd, v.value, sizeof(*hd));
	return 1;
}

/* Make sure the active buffer can take the entry and a head whole. */
static int room_for(sfs_ctx_t *c, size_t mlen, size_t vlen, size_t plen)
{
	uint64_t need = sfs_wbuf_entry_size((uint32_t)mlen, (uint32_t)vlen) +
			sfs_wbuf_entry_size((uint32_t)plen, sizeof(struct sfs_map_head));
	struct sfs_wbuf *b;
	int rc = sfs__state_ready(c);

	if (rc)
		return rc;
	b = active(c);
	if (b->wb_size - b->wb_top >= need && b->wb_live + 2 <= b->wb_max_entries)
		return 0;
	rc = sfs__state_spill(c);
	if (rc)
		return rc;
	b = active(c);
	if (b->wb_size - b->wb_top < need)
		return sfs__err(SFS_EUSAGE, "map entry of %zu bytes never fits a %llu-byte buffer",
				mlen + vlen, (unsigned long long)b->wb_size);
	return 0;
}

/* The active buffer's head of map P (c->kbuf, @plen): its mutable value
 * (NULL when the buffer has none yet). */
static struct sfs_map_head *head_in_place(struct sfs_wbuf *b, uint64_t hp, uint64_t ns,
					  const unsigned char *p, size_t plen)
{
	const struct sfs_wbuf_entry *e = NULL;
	uint64_t slot = 0;

	if (sfs__wbuf_find(b, hp, ns, p, (uint32_t)plen, &e, &slot) != 0 ||
	    (sfs__wbuf_kindb(e) & SFS_WBUF_KIND_MASK) != SFS_WBUF_PUT ||
	    e->we_vlen != sizeof(struct sfs_map_head))
		return NULL;
	return (struct sfs_map_head *)(void *)sfs__wbuf_value(e);
}

/*
 * Append entry P|ukey (flags, value).  A user key new to the buffer (or
 * new since the map's clear in it) links in at the chain start; an
 * overwrite leaves the chain alone and flags the entry it supersedes.
 */
static int map_write(sfs_ctx_t *c, uint64_t ns, size_t plen, size_t ulen, uint64_t flags,
		     uint64_t expiry, const void *val, size_t vlen)
{
	/* The link header, then a TTL state's expiry (common/ttl.h): written
	 * together in front of the value. */
	struct {
		struct sfs_map_ent me;
		uint64_t expiry;
	} hdr = { { 0, flags }, expiry };
	size_t hlen = sizeof(hdr.me) + (expiry ? SFS_TTL_PREFIX : 0);
	size_t mlen = plen + ulen, total = hlen + vlen;
	const struct sfs_wbuf_entry *old = NULL;
	struct sfs_map_head *hd, nh = { 0, 0 };
	struct sfs_map_ent me = { 0, flags };
	uint64_t hp, he, slot = 0, at = 0, node = 0;
	struct sfs_wbuf *b;
	int rc, chained = 0;

	if (vlen > SFS_VALUE_MAX - (hlen - sizeof(hdr.me)))
		return sfs__err(SFS_EUSAGE, "map put: value of %zu bytes, at most %zu", vlen,
				SFS_VALUE_MAX - (hlen - sizeof(hdr.me)));
	rc = room_for(c, mlen, total, plen);
	if (rc)
		return rc;
	b = active(c);
	rc = sfs__wbuf_check(b, "put", mlen, total);
	if (rc)
		return rc;
	hp = sfs_wbuf_hash(ns, c->kbuf, plen);
	he = sfs_wbuf_hash(ns, c->kbuf, mlen);
	hd = head_in_place(b, hp, ns, c->kbuf, plen);
	rc = sfs__wbuf_find(b, he, ns, c->kbuf, (uint32_t)mlen, &old, &slot);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc)
		old = NULL;
	/* On the chain already: written in this buffer after its last clear.
	 * A clear records the arena top, where the next entry goes: an entry
	 * at or above it came after the clear. */
	chained = old && hd &&
		  (uint64_t)((const char *)old - (const char *)b) >= sfs_load_relaxed(&hd->mh_clear_pos);
	if (chained) {
		/* The key's chain node: the current entry itself, or the one
		 * a replacement names. */
		const struct sfs_map_ent *oe = (const void *)sfs__wbuf_value(old);

		node = (oe->me_flags & MAP_REPLACEMENT) ? oe->me_prev
							 : (uint64_t)((const char *)old - (const char *)b);
		me.me_prev = node;
		me.me_flags |= MAP_REPLACEMENT;
	} else {
		me.me_prev = hd ? sfs_load_relaxed(&hd->mh_latest) : 0;
	}
	hdr.me = me;
	rc = sfs__wbuf_append2(b, he, ns, c->kbuf, (uint32_t)mlen, &hdr, (uint32_t)hlen, val,
			       (uint32_t)vlen, SFS_WBUF_PUT, slot, old, "put", &at);
	if (rc)
		return rc;
	if (chained) {
		/* The node now names the new entry (published first, by the
		 * append's release of its slot). */
		struct sfs_map_ent *ne = (void *)sfs__wbuf_value((const void *)((char *)b + node));

		sfs_store_release(&ne->me_flags, (ne->me_flags & SFS_MAP_REMOVED) | MAP_SUPERSEDED |
							 at >> 3 << MAP_CUR_SHIFT);
		return 0;
	}
	if (hd) {
		sfs_store_release(&hd->mh_latest, at);
		return 0;
	}
	nh.mh_latest = at;
	return sfs_wbuf_put_h(b, hp, ns, c->kbuf, plen, &nh, sizeof(nh));
}

int sfs_map_put(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		const void *ukey, size_t ulen, const void *val, size_t vlen)
{
	int n = ulen ? parent_key(c, state, SFS_STATE_MAP, key, klen, ukey, ulen, "map put")
		     : sfs__err(SFS_EUSAGE, "map put: empty user key");

	return n < 0 ? n : map_write(c, ns, (size_t)n, ulen, 0, ttl_stamp(c, state), val, vlen);
}

int sfs_map_remove(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		   const void *ukey, size_t ulen)
{
	int n = ulen ? parent_key(c, state, SFS_STATE_MAP, key, klen, ukey, ulen, "map remove")
		     : sfs__err(SFS_EUSAGE, "map remove: empty user key");

	return n < 0 ? n : map_write(c, ns, (size_t)n, ulen, SFS_MAP_REMOVED, 0, NULL, 0);
}

static int clear(sfs_ctx_t *c, uint64_t ns, size_t plen)
{
	struct sfs_map_head nh, *hd;
	struct sfs_wbuf *b;
	uint64_t hp;
	int rc = room_for(c, 0, 0, plen);

	if (rc)
		return rc;
	b = active(c);
	rc = sfs__wbuf_check(b, "put", plen, sizeof(nh));
	if (rc)
		return rc;
	hp = sfs_wbuf_hash(ns, c->kbuf, plen);
	hd = head_in_place(b, hp, ns, c->kbuf, plen);
	if (hd) {
		/* every entry so far lies below */
		sfs_store_relaxed(&hd->mh_clear_pos, b->wb_top);
		sfs_store_release(&hd->mh_latest, 0);
		return 0;
	}
	nh.mh_latest = 0;
	nh.mh_clear_pos = b->wb_top;	/* every entry so far lies below */
	return sfs_wbuf_put_h(b, hp, ns, c->kbuf, plen, &nh, sizeof(nh));
}

int sfs_map_clear(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen)
{
	int n = parent_key(c, state, SFS_STATE_MAP, key, klen, NULL, 0, "map clear");

	return n < 0 ? n : clear(c, ns, (size_t)n);
}

/* A walk over the layers above the store, newest first: this worker's
 * live buffers (a RETIRING buffer is in the store already, and so is
 * everything older), then the store's images of sealed buffers older than
 * the oldest SEALED one met (sfs__ctx_images). */
struct layers {
	unsigned k, j, nimg;
	int fetched, rc;
	uint64_t lo;
	const struct sfs_wbuf *const *ib;
	const uint64_t *is;
};

#define LAYERS_INIT { .lo = UINT64_MAX }

/* The next layer, or NULL past the last (L->rc < 0: the images failed). */
static const struct sfs_wbuf *live(sfs_ctx_t *c, struct layers *L)
{
	while (L->k < c->norder) {
		uint32_t i = c->order[L->k++];
		uint32_t st = sfs_load_acquire(&c->ctl->wc_buf[i].cb_state);

		if (st == SFS_BUF_RETIRING || st == SFS_BUF_FREE) {
			L->k = c->norder;
			break;
		}
		if (st != SFS_BUF_ACTIVE)
			L->lo = c->ctl->wc_buf[i].cb_seq;
		return c->buf[i];
	}
	if (!L->fetched) {
		L->fetched = 1;
		if ((L->rc = sfs__ctx_images(c, &L->ib, &L->is, &L->nimg)) < 0)
			return NULL;
	}
	while (L->j < L->nimg) {
		unsigned j = L->j++;

		if (L->is[j] < L->lo)
			return L->ib[j];
	}
	return NULL;
}

int sfs__map_get_in(const struct sfs_wbuf *b, uint64_t hp, uint64_t he, uint64_t ns,
		    const unsigned char *pk, size_t plen, size_t ulen, struct sfs_view *out)
{
	struct sfs_map_head hd;
	struct sfs_wbuf_view v;
	int cleared = sfs__map_head_of(b, hp, ns, pk, plen, &hd) && hd.mh_clear_pos;

	if (sfs_wbuf_get_h(b, he, ns, pk, plen + ulen, &v) == 0 &&
	    (!cleared || v.off >= hd.mh_clear_pos)) {
		struct sfs_map_ent me;

		if (v.len < sizeof(me))
			return sfs__err(SFS_ECORRUPT, "map entry at offset %llu: %u bytes",
					(unsigned long long)v.off, v.len);
		memcpy(&me, v.value, sizeof(me));
		if (me.me_flags & SFS_MAP_REMOVED)
			return 0;
		out->data = (const char *)v.value + sizeof(me);
		out->len = v.len - (uint32_t)sizeof(me);
		return 1;
	}
	return cleared ? 0 : -ENOENT;	/* cleared here: older layers are shadowed */
}

static int get_layers(sfs_ctx_t *c, uint64_t ns, size_t plen, size_t ulen, struct sfs_view *out)
{
	struct sfs_probe parent = { .hash = sfs_wbuf_hash(ns, c->kbuf, plen), .ns = ns,
				    .key = c->kbuf, .klen = (uint32_t)plen };
	uint64_t he = sfs_wbuf_hash(ns, c->kbuf, plen + ulen);
	struct sfs_probe_result r;
	struct layers L = LAYERS_INIT;
	const struct sfs_wbuf *b;

	out->data = NULL;
	out->len = 0;
	while ((b = live(c, &L))) {
		int res = sfs__map_get_in(b, parent.hash, he, ns, c->kbuf, plen, ulen, out);

		if (res != -ENOENT)
			return res;
	}
	if (L.rc < 0)
		return L.rc;
	if (c->tops->map_get(c->tr, &parent, c->kbuf + plen, (uint32_t)ulen, &r) < 0)
		return sfs__err(-EIO, "map get of worker %u: the flushed store's read failed",
				c->worker);
	out->data = r.found ? r.value : NULL;
	out->len = r.found ? r.len : 0;
	return r.found;
}

/* get_layers, and for a TTL state the expiry checked and stripped; a live
 * entry read with SFS_TTL_REFRESH_ON_READ is written again with a new
 * expiry (the view stays on the old copy, which no write moves). */
static int get(sfs_ctx_t *c, uint32_t state, uint64_t ns, size_t plen, size_t ulen,
	       struct sfs_view *out)
{
	int rc = get_layers(c, ns, plen, ulen, out), wr;
	uint64_t e;

	if (!c->ttl_ms[state])
		return rc;
	rc = sfs__ttl_view(c, state, rc, out);
	if (rc != 1 || !(c->ttl_flags[state] & SFS_TTL_REFRESH_ON_READ) ||
	    sfs_ttl_expiry_of((const char *)out->data - SFS_TTL_PREFIX) ==
		    (e = sfs__ttl_expiry(c, state)))
		return rc;
	wr = map_write(c, ns, plen, ulen, 0, e, out->data, out->len);
	return wr ? wr : 1;
}

int sfs_map_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		const void *ukey, size_t ulen, struct sfs_view *out)
{
	int n = ulen ? parent_key(c, state, SFS_STATE_MAP, key, klen, ukey, ulen, "map get")
		     : sfs__err(SFS_EUSAGE, "map get: empty user key");

	return n < 0 ? n : get(c, state, ns, (size_t)n, ulen, out);
}

/* ---- iteration ---------------------------------------------------------- */

static uint64_t ukey_hash(const void *k, uint32_t len)
{
	return sfs_key_hash(k, len) | 1;	/* 0 marks a free slot */
}

/* Insert; 1 if it was new, 0 if already seen, < 0 on no memory. */
int sfs__seen_add(struct sfs_seen **sp, const void *k, uint32_t len)
{
	struct sfs_seen *s = *sp;
	uint64_t h = ukey_hash(k, len);
	size_t i;

	if (!s) {
		s = *sp = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
	}
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct seen_ent *e = calloc(cap, sizeof(*e));

		if (!e)
			return -ENOMEM;
		for (size_t j = 0; j < s->cap; j++)
			if (s->e[j].h) {
				for (i = s->e[j].h & (cap - 1); e[i].h; i = (i + 1) & (cap - 1))
					;
				e[i] = s->e[j];
			}
		free(s->e);
		s->e = e;
		s->cap = cap;
	}
	for (i = h & (s->cap - 1); s->e[i].h; i = (i + 1) & (s->cap - 1))
		if (s->e[i].h == h && s->e[i].len == len && memcmp(s->e[i].k, k, len) == 0)
			return 0;
	s->e[i] = (struct seen_ent){ h, k, len };
	s->n++;
	return 1;
}

void sfs__seen_reset(struct sfs_seen *s)
{
	if (s && s->n) {
		memset(s->e, 0, s->cap * sizeof(*s->e));
		s->n = 0;
	}
}

void sfs__seen_free(struct sfs_seen **s)
{
	if (*s)
		free((*s)->e);
	free(*s);
	*s = NULL;
}

void sfs__map_free(sfs_ctx_t *c)
{
	sfs__seen_free(&c->seen);
}

struct store_walk {
	sfs_ctx_t *c;
	sfs_entry_fn fn;
	void *arg;
	int err;
};

static int from_store(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct store_walk *w = arg;
	int rc = sfs__seen_add(&w->c->seen, ukey, ulen);

	if (rc < 0)
		return w->err = rc;
	return rc ? w->fn(w->arg, ukey, ulen, val, vlen) : 0;
}

/* Buffer @b's entries of map P (@pk, @plen, head @hd) to @fn, each user key
 * once, shadowing older layers through the seen set.  O(chain nodes). */
int sfs__map_iter_in(struct sfs_seen **seen, const struct sfs_wbuf *b,
		     const struct sfs_map_head *hd, size_t plen, sfs_entry_fn fn, void *arg)
{
	uint64_t off;
	int rc = 0;

	for (off = hd->mh_latest; off && !rc;) {
		struct sfs_wbuf_view v, cur;
		const struct sfs_wbuf_view *e = &v;
		struct sfs_map_ent me, ce;
		int fresh;

		if (sfs_wbuf_view_at(b, off, &v) || v.len < sizeof(me) || v.klen < plen)
			return sfs__err(SFS_ECORRUPT, "map chain broken at offset %llu",
					(unsigned long long)off);
		memcpy(&me, v.value, sizeof(me));
		off = me.me_prev;
		ce = me;
		if (me.me_flags & MAP_SUPERSEDED) {
			/* Overwritten in this buffer: its key's current entry,
			 * which the node names (checked to be an entry of the
			 * same key: a reader in another process trusts no
			 * offset). */
			uint64_t at = me.me_flags >> MAP_CUR_SHIFT << 3;

			if (sfs_wbuf_view_at(b, at, &cur) || cur.len < sizeof(ce) ||
			    cur.hash != v.hash || cur.ns != v.ns || cur.klen != v.klen ||
			    !sfs_keyeq(cur.key, v.key, v.klen))
				return sfs__err(SFS_ECORRUPT, "map entry at offset %llu: its current "
						"version is not at %llu", (unsigned long long)v.off,
						(unsigned long long)at);
			memcpy(&ce, cur.value, sizeof(ce));
			e = &cur;
		}
		fresh = sfs__seen_add(seen, (const char *)e->key + plen, e->klen - (uint32_t)plen);
		if (fresh < 0)
			rc = fresh;
		else if (fresh && !(ce.me_flags & SFS_MAP_REMOVED))
			rc = fn(arg, (const char *)e->key + plen, e->klen - (uint32_t)plen,
				(const char *)e->value + sizeof(ce), e->len - (uint32_t)sizeof(ce));
	}
	return rc;
}

/* A TTL state's entries on their way to the user's callback: expired ones
 * skipped (every layer has recorded them as seen already, so they still
 * shadow older versions), the expiry stripped from the rest. */
static int iter_layers(sfs_ctx_t *c, uint64_t ns, const unsigned char *pk, size_t plen,
		       sfs_entry_fn fn, void *arg);

struct ttl_walk {
	sfs_entry_fn fn;
	void *arg;
	uint64_t now;
};

static int ttl_live(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	const struct ttl_walk *t = arg;

	if (sfs_ttl_expired(val, vlen, t->now))
		return 0;
	return t->fn(t->arg, ukey, ulen, (const char *)val + SFS_TTL_PREFIX, vlen - SFS_TTL_PREFIX);
}

/* @pk: the parent key, in the caller's own copy (c->kbuf is scratch of
 * every call, and @fn may make state calls). */
static int iter(sfs_ctx_t *c, uint64_t ns, const unsigned char *pk, size_t plen, sfs_entry_fn fn,
		void *arg)
{
	uint32_t state = sfs_key_prefix_state(pk);
	struct ttl_walk tw;

	if (c->ttl_ms[state]) {
		tw = (struct ttl_walk){ fn, arg, sfs__ttl_now(c, state) };
		fn = ttl_live;
		arg = &tw;
	}
	return iter_layers(c, ns, pk, plen, fn, arg);
}

static int iter_layers(sfs_ctx_t *c, uint64_t ns, const unsigned char *pk, size_t plen,
		       sfs_entry_fn fn, void *arg)
{
	struct sfs_probe parent = { .hash = sfs_wbuf_hash(ns, pk, plen), .ns = ns,
				    .key = pk, .klen = (uint32_t)plen };
	struct store_walk sw = { c, fn, arg, 0 };
	int rc = 0, layers = 0;
	struct layers L = LAYERS_INIT;
	const struct sfs_wbuf *b;

	sfs__seen_reset(c->seen);
	while ((b = live(c, &L))) {
		struct sfs_map_head hd;

		if (!sfs__map_head_of(b, parent.hash, ns, pk, plen, &hd))
			continue;
		layers++;
		rc = sfs__map_iter_in(&c->seen, b, &hd, plen, fn, arg);
		if (rc || hd.mh_clear_pos)
			return rc;	/* a clear shadows every older layer */
	}
	if (L.rc < 0)
		return L.rc;
	if (!layers)	/* the store alone: its entries are distinct */
		return c->tops->map_iter(c->tr, &parent, fn, arg);
	rc = c->tops->map_iter(c->tr, &parent, from_store, &sw);
	return sw.err ? sw.err : rc;
}

int sfs_map_iter(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		 sfs_entry_fn fn, void *arg)
{
	int n = parent_key(c, state, SFS_STATE_MAP, key, klen, NULL, 0, "map iterate");
	unsigned char local[256], *pk = local;
	int rc;

	if (n < 0)
		return n;
	if ((size_t)n > sizeof(local) && !(pk = malloc((size_t)n)))
		return sfs__err(-ENOMEM, "map iterate: no memory for a key of %d bytes", n);
	memcpy(pk, c->kbuf, (size_t)n);
	rc = iter(c, ns, pk, (size_t)n, fn, arg);
	if (pk != local)
		free(pk);
	return rc;
}

/* ---- lists ---------------------------------------------------------------- */

int sfs_list_append(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    const void *val, size_t vlen)
{
	unsigned char seq[8];
	uint64_t s = c->ctl->wc_list_seq + 1;
	int n;

	for (int i = 0; i < 8; i++)
		seq[i] = (unsigned char)(s >> (56 - 8 * i));
	n = parent_key(c, state, SFS_STATE_LIST, key, klen, seq, 8, "list append");
	if (n < 0)
		return n;
	n = map_write(c, ns, (size_t)n, 8, 0, ttl_stamp(c, state), val, vlen);
	if (n == 0)
		sfs_store_relaxed(&c->ctl->wc_list_seq, s);
	return n;
}

struct list_el {
	const void *val;
	uint32_t vlen;
	unsigned char seq[8];
};

struct list_collect {
	struct list_el *el;
	size_t n, cap;
};

static int collect(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct list_collect *l = arg;

	if (ulen != 8)
		return sfs__err(SFS_ECORRUPT, "list get: an element with a %u-byte sequence, not 8",
				ulen);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct list_el *e = realloc(l->el, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		l->el = e;
		l->cap = cap;
	}
	l->el[l->n].val = val;
	l->el[l->n].vlen = vlen;
	memcpy(l->el[l->n].seq, ukey, 8);
	l->n++;
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	return memcmp(((const struct list_el *)a)->seq, ((const struct list_el *)b)->seq, 8);
}

int sfs_list_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		 sfs_entry_fn fn, void *arg)
{
	struct list_collect l = { 0 };
	int n = parent_key(c, state, SFS_STATE_LIST, key, klen, NULL, 0, "list get");
	int rc;

	if (n < 0)
		return n;
	rc = iter(c, ns, c->kbuf, (size_t)n, collect, &l);
	if (rc == 0 && l.n) {
		/* Sequence numbers are big-endian: byte order is append order. */
		qsort(l.el, l.n, sizeof(*l.el), by_seq);
		for (size_t i = 0; i < l.n && rc == 0; i++)
			rc = fn(arg, l.el[i].seq, 8, l.el[i].val, l.el[i].vlen);
	}
	free(l.el);
	return rc;
}

int sfs_list_clear(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen)
{
	int n = parent_key(c, state, SFS_STATE_LIST, key, klen, NULL, 0, "list clear");

	return n < 0 ? n : clear(c, ns, (size_t)n);
}
