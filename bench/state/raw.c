/*
 * raw.c — the raw baseline of `bench_state` (bs.h): an in-process
 * open-addressing hash table, linear probing over 8-byte slots (tag | entry
 * number), keys and values copied into one flat arena, values overwritten
 * in place; map state as one block per map key.  The limit sfs is held
 * to: no shared memory, no layers, no key groups.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/state/bs.h"
#include "common/err.h"
#include "common/hash.h"

#define RAW_TAG 0xffff000000000000ull

static inline uint64_t raw_hash(const unsigned char *k)
{
	uint64_t a, b;

	memcpy(&a, k, 8);
	memcpy(&b, k + 8, 8);
	return sfs_hash_mum(a ^ SFS_HASH_P0, b ^ SFS_HASH_P1);
}

static inline int key_eq(const unsigned char *x, const unsigned char *y)
{
	uint64_t a0, a1, b0, b1;

	memcpy(&a0, x, 8);
	memcpy(&a1, x + 8, 8);
	memcpy(&b0, y, 8);
	memcpy(&b1, y + 8, 8);
	return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

static inline unsigned char *raw_find(const struct raw *t, const unsigned char *k, uint64_t h,
				      uint64_t *pos)
{
	uint64_t i = h & t->mask;

	for (;; i = (i + 1) & t->mask) {
		uint64_t w = t->slot[i];

		if (!w) {
			*pos = i;
			return NULL;
		}
		if ((w & RAW_TAG) == (h & RAW_TAG)) {
			unsigned char *e = t->arena + ((w & ~RAW_TAG) - 1) * t->esz;

			if (key_eq(e, k))
				return e;
		}
	}
}

int bs_raw_open(struct raw *t, uint64_t n, uint32_t vs)
{
	uint64_t slots = pow2_slots(n);

	memset(t, 0, sizeof(*t));
	t->esz = KLEN + pad8(vs);
	t->vs = vs;
	t->mask = slots - 1;
	t->cap = n;
	t->slot = calloc(slots, 8);
	t->arena = malloc(n * t->esz);
	t->val = calloc(1, vs);
	if (!t->slot || !t->arena || !t->val)
		return -ENOMEM;
	/* Resident before timing, as sfs's buffer is.  Not memset: gcc turns
	 * malloc + memset(0) into calloc, whose fresh pages stay untouched. */
	bs_prefault(t->slot, slots * 8);
	bs_prefault(t->arena, n * t->esz);
	return 0;
}

void bs_raw_close(struct raw *t)
{
	free(t->slot);
	free(t->arena);
	free(t->val);
	memset(t, 0, sizeof(*t));
}

static inline int raw_put1(struct raw *t, const unsigned char *k, const void *v)
{
	uint64_t h = raw_hash(k), pos;
	unsigned char *e = raw_find(t, k, h, &pos);

	if (!e) {
		if (t->n == t->cap)
			return SFS_EFULL;
		e = t->arena + t->n * t->esz;
		memcpy(e, k, KLEN);
		t->slot[pos] = (h & RAW_TAG) | ++t->n;
	}
	memcpy(e + KLEN, v, t->vs);
	return 0;
}

static int raw_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;

	for (uint64_t i = 0; i < n; i++) {
		memcpy(t->val, &i, 8);
		if (raw_put1(t, keys + i * KLEN, t->val))
			return sfs__err(SFS_EFULL, "raw table full");
	}
	return 0;
}

static int raw_put(void *arg, const unsigned char *keys, uint64_t n)
{
	return raw_load(arg, keys, n);
}

static int raw_get(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;
	uint64_t acc = 0, pos;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		const unsigned char *e = raw_find(t, k, raw_hash(k), &pos);

		if (!e)
			return sfs__err(SFS_ECORRUPT, "raw get: key %llu missing",
					(unsigned long long)i);
		acc += e[KLEN];
	}
	bs_sink += acc;
	return 0;
}

/* A batch: hash and prefetch every home slot first, then probe. */
static int raw_mget(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;
	uint64_t acc = 0, pos, h[BATCH];

	for (uint64_t b = 0; b < n; b += BATCH) {
		const unsigned char *kb = keys + b * KLEN;

		for (unsigned i = 0; i < BATCH; i++) {
			h[i] = raw_hash(kb + i * KLEN);
			__builtin_prefetch(&t->slot[h[i] & t->mask]);
		}
		for (unsigned i = 0; i < BATCH; i++) {
			const unsigned char *e = raw_find(t, kb + i * KLEN, h[i], &pos);

			if (!e)
				return sfs__err(SFS_ECORRUPT, "raw multiget: key missing");
			acc += e[KLEN];
		}
	}
	bs_sink += acc;
	return 0;
}

static int raw_add(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;
	uint64_t pos;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		uint64_t h = raw_hash(k), v;
		unsigned char *e = raw_find(t, k, h, &pos);

		if (!e) {
			if (t->n == t->cap)
				return sfs__err(SFS_EFULL, "raw counter table full");
			e = t->arena + t->n * t->esz;
			memcpy(e, k, KLEN);
			memset(e + KLEN, 0, 8);
			t->slot[pos] = (h & RAW_TAG) | ++t->n;
		}
		memcpy(&v, e + KLEN, 8);
		v += i % 7 + 1;
		memcpy(e + KLEN, &v, 8);
	}
	return 0;
}

int bs_rawmap_open(struct rawmap *m, uint64_t maps, uint32_t vs)
{
	memset(m, 0, sizeof(*m));
	m->vs = vs;
	m->slot = ULEN + pad8(vs);
	m->val = calloc(1, vs);
	if (!m->val)
		return -ENOMEM;
	return bs_raw_open(&m->t, maps, 8 + MAP_FANOUT * m->slot);
}

void bs_rawmap_close(struct rawmap *m)
{
	bs_raw_close(&m->t);
	free(m->val);
	memset(m, 0, sizeof(*m));
}

static unsigned char *rawmap_block(struct rawmap *m, const unsigned char *k, int create)
{
	uint64_t h = raw_hash(k), pos;
	unsigned char *e = raw_find(&m->t, k, h, &pos);

	if (!e && create && m->t.n < m->t.cap) {
		e = m->t.arena + m->t.n * m->t.esz;
		memcpy(e, k, KLEN);
		memset(e + KLEN, 0, 8);
		m->t.slot[pos] = (h & RAW_TAG) | ++m->t.n;
	}
	return e ? e + KLEN : NULL;
}

static int rawmap_put1(struct rawmap *m, const unsigned char *k, unsigned j, const void *v)
{
	unsigned char *b = rawmap_block(m, k, 1), u[ULEN];
	uint64_t cnt, i, want, have;

	if (!b)
		return sfs__err(SFS_EFULL, "raw map table full");
	ukey_of(j, u);
	memcpy(&want, u, 8);
	memcpy(&cnt, b, 8);
	for (i = 0; i < cnt; i++) {
		memcpy(&have, b + 8 + i * m->slot, 8);
		if (have == want)
			break;
	}
	if (i == cnt) {
		if (cnt == MAP_FANOUT)
			return sfs__err(SFS_EFULL, "raw map block full");
		cnt++;
		memcpy(b, &cnt, 8);
		memcpy(b + 8 + i * m->slot, u, ULEN);
	}
	memcpy(b + 8 + i * m->slot + ULEN, v, m->vs);
	return 0;
}

static int rawmap_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rawmap *m = arg;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *k = load_map_key(i, &j);
		int rc;

		memcpy(m->val, &i, 8);
		rc = rawmap_put1(m, k, j, m->val);
		if (rc)
			return rc;
	}
	return 0;
}

static int rawmap_put(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rawmap *m = arg;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		int rc;

		memcpy(m->val, &i, 8);
		rc = rawmap_put1(m, k, ukey_pick(k), m->val);
		if (rc)
			return rc;
	}
	return 0;
}

static int rawmap_iter(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rawmap *m = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *b = rawmap_block(m, keys + i * KLEN, 0);
		uint64_t cnt;

		if (!b)
			return sfs__err(SFS_ECORRUPT, "raw map: key missing");
		memcpy(&cnt, b, 8);
		if (cnt != MAP_FANOUT)
			return sfs__err(SFS_ECORRUPT, "raw map: %llu entries", (unsigned long long)cnt);
		for (uint64_t e = 0; e < cnt; e++)
			acc += b[8 + e * m->slot + ULEN];
	}
	bs_sink += acc;
	return 0;
}

const struct bs_impl bs_raw_impl = {
	.name = "raw",
	.op = {
		[OP_LOAD] = raw_load, [OP_PUT] = raw_put, [OP_GET] = raw_get,
		[OP_MGET] = raw_mget, [OP_ADD] = raw_add, [OP_MLOAD] = rawmap_load,
		[OP_MPUT] = rawmap_put, [OP_MITER] = rawmap_iter,
	},
};
