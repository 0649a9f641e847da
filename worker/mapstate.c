/*
 * mapstate.c — map and list state on top of the write buffers.
 *
 * In a buffer, a map key (parent P = kg|state|klen|key) has a head entry
 * {newest entry offset, clear position} and every write of one of its user
 * keys appends an entry (key P|ukey) whose value starts with a link to the
 * previous entry of the same map in that buffer.  So a buffer can list a
 * map's entries without a scan: walk the chain from the head, newest
 * first, keeping the first version of each user key.  Point reads use the
 * buffer's hash index on P|ukey directly.  A clear writes a head with an
 * empty chain and the arena position of the clear: entries of that buffer
 * below it are shadowed, and so is every older layer.
 *
 * A map write appends two entries (the entry, its link header and value
 * copied straight into the arena, and the new head); room for both is
 * checked first, so a full buffer is spilled before, never between them.  Lists are maps whose user keys are a per-worker sequence number
 * (8 bytes, big-endian: append order is key order).
 *
 * Costs: put/remove O(1) (two appends); get O(buffers); iterate O(chain
 * length per buffer + the store's map) with a process-local set of seen
 * user keys.
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/keygroup.h"
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

/* The head of map @p (length @n) in buffer @b: 1 found, 0 not. */
static int head_of(struct sfs_wbuf *b, uint64_t ns, const unsigned char *p, size_t n,
		   struct sfs_map_head *hd)
{
	struct sfs_wbuf_view v;

	if (sfs_wbuf_get(b, ns, p, n, &v) != 0 || v.kind != SFS_WBUF_PUT || v.len != sizeof(*hd)) {
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

/* Append entry P|ukey (flags, value) and relink the head. */
static int map_write(sfs_ctx_t *c, uint64_t ns, size_t plen, size_t ulen, uint64_t flags,
		     const void *val, size_t vlen)
{
	size_t mlen = plen + ulen, total = sizeof(struct sfs_map_ent) + vlen;
	struct sfs_map_ent me;
	struct sfs_map_head hd;
	struct sfs_wbuf *b;
	uint64_t at = 0;
	int rc;

	if (vlen > SFS_VALUE_MAX)
		return sfs__err(SFS_EUSAGE, "map put: value of %zu bytes, at most %u", vlen,
				SFS_VALUE_MAX);
	rc = room_for(c, mlen, total, plen);
	if (rc)
		return rc;
	b = active(c);
	head_of(b, ns, c->kbuf, plen, &hd);
	me.me_prev = hd.mh_latest;
	me.me_flags = flags;
	/* The link header and the value go straight into the arena. */
	rc = sfs_wbuf_put2_h(b, sfs_wbuf_hash(ns, c->kbuf, mlen), ns, c->kbuf, mlen, &me,
			     sizeof(me), val, vlen, &at);
	if (rc)
		return rc;
	hd.mh_latest = at;
	return sfs_wbuf_put(b, ns, c->kbuf, plen, &hd, sizeof(hd));
}

int sfs_map_put(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		const void *ukey, size_t ulen, const void *val, size_t vlen)
{
	int n = ulen ? parent_key(c, state, SFS_STATE_MAP, key, klen, ukey, ulen, "map put")
		     : sfs__err(SFS_EUSAGE, "map put: empty user key");

	return n < 0 ? n : map_write(c, ns, (size_t)n, ulen, 0, val, vlen);
}

int sfs_map_remove(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		   const void *ukey, size_t ulen)
{
	int n = ulen ? parent_key(c, state, SFS_STATE_MAP, key, klen, ukey, ulen, "map remove")
		     : sfs__err(SFS_EUSAGE, "map remove: empty user key");

	return n < 0 ? n : map_write(c, ns, (size_t)n, ulen, SFS_MAP_REMOVED, NULL, 0);
}

static int clear(sfs_ctx_t *c, uint64_t ns, size_t plen)
{
	struct sfs_map_head hd;
	struct sfs_wbuf *b;
	int rc = room_for(c, 0, 0, plen);

	if (rc)
		return rc;
	b = active(c);
	hd.mh_latest = 0;
	hd.mh_clear_pos = b->wb_top;	/* every entry so far lies below */
	return sfs_wbuf_put(b, ns, c->kbuf, plen, &hd, sizeof(hd));
}

int sfs_map_clear(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen)
{
	int n = parent_key(c, state, SFS_STATE_MAP, key, klen, NULL, 0, "map clear");

	return n < 0 ? n : clear(c, ns, (size_t)n);
}

/* The @k-th live buffer, newest first, or NULL past the last: a RETIRING
 * buffer is in the store already, and so is everything older. */
static struct sfs_wbuf *live(sfs_ctx_t *c, unsigned k)
{
	uint32_t st;

	if (k >= c->norder)
		return NULL;
	st = sfs_load_acquire(&c->ctl->wc_buf[c->order[k]].wb_state);
	return st == SFS_BUF_RETIRING || st == SFS_BUF_FREE ? NULL : c->buf[c->order[k]];
}

static int get(sfs_ctx_t *c, uint64_t ns, size_t plen, size_t ulen, struct sfs_view *out)
{
	struct sfs_probe parent = { .hash = sfs_wbuf_hash(ns, c->kbuf, plen), .ns = ns,
				    .key = c->kbuf, .klen = (uint32_t)plen };
	struct sfs_probe_result r;
	int decided = 0, res = 0;
	struct sfs_wbuf *b;

	out->data = NULL;
	out->len = 0;
	for (unsigned k = 0; !decided && (b = live(c, k)); k++) {
		struct sfs_map_head hd;
		struct sfs_wbuf_view v;
		int cleared;

		cleared = head_of(b, ns, c->kbuf, plen, &hd) && hd.mh_clear_pos;
		if (sfs_wbuf_get(b, ns, c->kbuf, plen + ulen, &v) == 0 &&
		    (!cleared || v.off > hd.mh_clear_pos)) {
			struct sfs_map_ent me;

			memcpy(&me, v.value, sizeof(me));
			if (!(me.me_flags & SFS_MAP_REMOVED)) {
				out->data = (const char *)v.value + sizeof(me);
				out->len = v.len - (uint32_t)sizeof(me);
				res = 1;
			}
			decided = 1;
		} else if (cleared) {
			decided = 1;	/* cleared here: older layers are shadowed */
		}
	}
	if (decided)
		return res;
	if (c->tops->map_get(c->tr, &parent, c->kbuf + plen, (uint32_t)ulen, &r) < 0)
		return -EIO;
	out->data = r.found ? r.value : NULL;
	out->len = r.found ? r.len : 0;
	return r.found;
}

int sfs_map_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		const void *ukey, size_t ulen, struct sfs_view *out)
{
	int n = ulen ? parent_key(c, state, SFS_STATE_MAP, key, klen, ukey, ulen, "map get")
		     : sfs__err(SFS_EUSAGE, "map get: empty user key");

	return n < 0 ? n : get(c, ns, (size_t)n, ulen, out);
}

/* ---- iteration ---------------------------------------------------------- */

static uint64_t ukey_hash(const void *k, uint32_t len)
{
	return sfs_key_hash(k, len) | 1;	/* 0 marks a free slot */
}

/* Insert; 1 if it was new, 0 if already seen, < 0 on no memory. */
static int seen_add(sfs_ctx_t *c, const void *k, uint32_t len)
{
	struct sfs_seen *s = c->seen;
	uint64_t h = ukey_hash(k, len);
	size_t i;

	if (!s) {
		s = c->seen = calloc(1, sizeof(*s));
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

static void seen_reset(sfs_ctx_t *c)
{
	if (c->seen && c->seen->n) {
		memset(c->seen->e, 0, c->seen->cap * sizeof(*c->seen->e));
		c->seen->n = 0;
	}
}

void sfs__map_free(sfs_ctx_t *c)
{
	if (c->seen)
		free(c->seen->e);
	free(c->seen);
	c->seen = NULL;
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
	int rc = seen_add(w->c, ukey, ulen);

	if (rc < 0)
		return w->err = rc;
	return rc ? w->fn(w->arg, ukey, ulen, val, vlen) : 0;
}

/* @pk: the parent key, in the caller's own copy (c->kbuf is scratch of
 * every call, and @fn may make state calls). */
static int iter(sfs_ctx_t *c, uint64_t ns, const unsigned char *pk, size_t plen, sfs_entry_fn fn,
		void *arg)
{
	struct sfs_probe parent = { .hash = sfs_wbuf_hash(ns, pk, plen), .ns = ns,
				    .key = pk, .klen = (uint32_t)plen };
	struct store_walk sw = { c, fn, arg, 0 };
	int stop = 0, rc = 0;
	struct sfs_wbuf *b;

	seen_reset(c);
	for (unsigned k = 0; !stop && (b = live(c, k)); k++) {
		struct sfs_map_head hd;
		uint64_t off;

		if (!head_of(b, ns, pk, plen, &hd))
			continue;
		for (off = hd.mh_latest; off && !rc;) {
			struct sfs_wbuf_view v;
			struct sfs_map_ent me;
			int fresh;

			if (sfs_wbuf_view_at(b, off, &v) || v.len < sizeof(me) || v.klen < plen) {
				rc = sfs__err(SFS_ECORRUPT, "map chain broken at offset %llu",
					      (unsigned long long)off);
				break;
			}
			memcpy(&me, v.value, sizeof(me));
			fresh = seen_add(c, (const char *)v.key + plen, v.klen - (uint32_t)plen);
			if (fresh < 0)
				rc = fresh;
			else if (fresh && !(me.me_flags & SFS_MAP_REMOVED))
				rc = fn(arg, (const char *)v.key + plen, v.klen - (uint32_t)plen,
					(const char *)v.value + sizeof(me),
					v.len - (uint32_t)sizeof(me));
			off = me.me_prev;
		}
		if (rc || hd.mh_clear_pos)
			stop = 1;	/* a clear shadows every older layer */
	}
	if (rc || stop)
		return rc;
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
		return -ENOMEM;
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
	n = map_write(c, ns, (size_t)n, 8, 0, val, vlen);
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
		return SFS_ECORRUPT;
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
