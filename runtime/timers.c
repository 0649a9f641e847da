/*
 * timers.c — an operator's timers in sfs state (timers.h): per-key-group
 * anchors and per-(timestamp, group) bucket keys, the timer and index maps,
 * and the process-local heap, set and registration filter derived from
 * them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfs_keygroup.h"
#include "runtime/timers.h"
#include "runtime/util.h"

#define ANCHOR_LEN 4u
#define ANCHOR_TRIES (1u << 26)  /* far beyond any maxp's coupon collector */
#define BUCKET_LEN 12u           /* ts (8, big-endian) | suffix (4, big-endian) */
#define SUFFIX_TRIES (1u << 24)  /* P(no hit) = (1 - 1/maxp)^tries: never */
#define FILTER_SLOTS 4096u       /* power of two */
#define FILTER_KEY 23u
#define QUIESCE_EVERY 256u
#define NAME_MAX_LEN 40u

/* A pending (timestamp, key group) and its bucket's suffix: heap entry and
 * set slot (kg == NO_KG: an empty slot). */
struct tm_pend {
	int64_t ts;
	uint32_t kg;
	uint32_t sfx;
};

#define NO_KG UINT32_MAX

/* A recent registration still pending (valid while ts > tm_fired). */
struct tm_filt {
	int64_t ts;
	uint8_t klen;
	unsigned char key[FILTER_KEY];
};

enum { F_PENDING, F_FIRED, F_CANCELLED };

/* One key of the timestamp being fired (bytes in tm_kb at off). */
struct tm_fire {
	size_t off;
	uint32_t len;
	uint32_t state;
};

struct rt_timers {
	struct rt_op *tm_op;
	uint32_t tm_timers, tm_index;           /* state ids */
	uint32_t tm_maxp, tm_kg_start, tm_ngroups;
	unsigned char (*tm_anchor)[ANCHOR_LEN]; /* [kg - tm_kg_start] */
	struct tm_pend *tm_heap;                /* min-heap by (ts, kg) */
	size_t tm_nheap, tm_heapcap;
	struct tm_pend *tm_set;                 /* the same pairs, for membership */
	size_t tm_setcap, tm_setused;
	struct tm_filt *tm_filt;
	int64_t tm_fired;                       /* every timer <= this has fired */
	int tm_advancing;
	int tm_inbatch;                         /* callbacks of tm_bts running */
	int64_t tm_bts;
	unsigned char *tm_kb;                   /* the batch's key bytes */
	size_t tm_kblen, tm_kbcap;
	struct tm_fire *tm_batch;
	size_t tm_nbatch, tm_batchcap;
};

static const char empty[1];

/* A timestamp as 8 key bytes: big-endian with the sign bit flipped, so
 * bytewise order is time order (a store's scan sees buckets in order). */
static inline void ts_key(unsigned char *k, int64_t ts)
{
	uint64_t u = (uint64_t)ts ^ (1ull << 63);

	for (int i = 7; i >= 0; i--, u >>= 8)
		k[i] = (unsigned char)u;
}

static inline int64_t ts_of_key(const unsigned char *k)
{
	uint64_t u = 0;

	for (int i = 0; i < 8; i++)
		u = u << 8 | k[i];
	return (int64_t)(u ^ (1ull << 63));
}

/* The key group of @key if this worker owns it, else an error. */
static int owned_group(const struct rt_timers *t, const void *key, size_t klen, const char *op)
{
	uint32_t kg = sfs_key_group(key, klen, t->tm_maxp);

	if (kg < t->tm_kg_start || kg - t->tm_kg_start >= t->tm_ngroups)
		return rt_err(SFS_EUSAGE, "timer %s: key group %u is not worker %u's", op, kg,
			      t->tm_op->worker);
	return (int)kg;
}

static inline const unsigned char *anchor(const struct rt_timers *t, uint32_t kg)
{
	return t->tm_anchor[kg - t->tm_kg_start];
}

/* Bucket (ts, kg)'s key: ts | sfx, sfx the smallest suffix that puts it in
 * group kg.  The timers of one (ts, group) are one map under it. */
static inline void bucket_key(unsigned char *k, int64_t ts, uint32_t sfx)
{
	ts_key(k, ts);
	k[8] = (unsigned char)(sfx >> 24);
	k[9] = (unsigned char)(sfx >> 16);
	k[10] = (unsigned char)(sfx >> 8);
	k[11] = (unsigned char)sfx;
}

/* Search the suffix: ~maxp hashes of 12 bytes (~0.3 us for 128 groups),
 * once per new (ts, kg); the set and the index keep it.  A power-of-two
 * maxp (the default, 128) reduces by a mask instead of a division. */
static int bucket_suffix(const struct rt_timers *t, int64_t ts, uint32_t kg, uint32_t *sfx)
{
	unsigned char k[BUCKET_LEN];
	uint64_t m = t->tm_maxp;

	bucket_key(k, ts, 0);
	for (uint32_t i = 0; i < SUFFIX_TRIES; i++) {
		uint64_t h;

		k[8] = (unsigned char)(i >> 24);
		k[9] = (unsigned char)(i >> 16);
		k[10] = (unsigned char)(i >> 8);
		k[11] = (unsigned char)i;
		h = sfs_key_hash(k, BUCKET_LEN);
		if ((m & (m - 1) ? h % m : h & (m - 1)) == kg) {
			*sfx = i;
			return 0;
		}
	}
	return rt_err(SFS_ECORRUPT, "timers: no bucket key for time %lld in key group %u",
		      (long long)ts, kg);
}

/* ---- pending (ts, kg): heap and set --------------------------------------------- */

static inline int pend_less(const struct tm_pend *a, const struct tm_pend *b)
{
	return a->ts < b->ts || (a->ts == b->ts && a->kg < b->kg);
}

static inline size_t set_slot(const struct rt_timers *t, int64_t ts, uint32_t kg)
{
	return sfs_hash_mum((uint64_t)ts ^ SFS_HASH_P0, kg ^ SFS_HASH_P1) & (t->tm_setcap - 1);
}

/* The pending entry of (ts, kg), or NULL. */
static const struct tm_pend *set_find(const struct rt_timers *t, int64_t ts, uint32_t kg)
{
	for (size_t i = set_slot(t, ts, kg);; i = (i + 1) & (t->tm_setcap - 1)) {
		if (t->tm_set[i].kg == NO_KG)
			return NULL;
		if (t->tm_set[i].ts == ts && t->tm_set[i].kg == kg)
			return &t->tm_set[i];
	}
}

static void set_put(struct rt_timers *t, struct tm_pend p)
{
	size_t i = set_slot(t, p.ts, p.kg);

	while (t->tm_set[i].kg != NO_KG)
		i = (i + 1) & (t->tm_setcap - 1);
	t->tm_set[i] = p;
	t->tm_setused++;
}

static int set_grow(struct rt_timers *t)
{
	struct tm_pend *old = t->tm_set;
	size_t ocap = t->tm_setcap, cap = ocap ? ocap * 2 : 1024;

	if (!(t->tm_set = malloc(cap * sizeof(*t->tm_set)))) {
		t->tm_set = old;
		return rt_err(-ENOMEM, "timers: no memory for %zu pending timestamps", cap);
	}
	t->tm_setcap = cap;
	for (size_t i = 0; i < cap; i++)
		t->tm_set[i].kg = NO_KG;
	t->tm_setused = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].kg != NO_KG)
			set_put(t, old[i]);
	free(old);
	return 0;
}

/* Backward-shift deletion: no tombstones, probes stay short. */
static void set_del(struct rt_timers *t, int64_t ts, uint32_t kg)
{
	size_t mask = t->tm_setcap - 1, i = set_slot(t, ts, kg), j;

	while (t->tm_set[i].kg != NO_KG && !(t->tm_set[i].ts == ts && t->tm_set[i].kg == kg))
		i = (i + 1) & mask;
	if (t->tm_set[i].kg == NO_KG)
		return;
	t->tm_set[i].kg = NO_KG;
	t->tm_setused--;
	for (j = (i + 1) & mask; t->tm_set[j].kg != NO_KG; j = (j + 1) & mask) {
		size_t home = set_slot(t, t->tm_set[j].ts, t->tm_set[j].kg);

		/* move j back to i unless its home lies cyclically in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->tm_set[i] = t->tm_set[j];
			t->tm_set[j].kg = NO_KG;
			i = j;
		}
	}
}

static void heap_push(struct rt_timers *t, struct tm_pend p)
{
	size_t i = t->tm_nheap++;

	while (i) {
		size_t up = (i - 1) / 2;

		if (!pend_less(&p, &t->tm_heap[up]))
			break;
		t->tm_heap[i] = t->tm_heap[up];
		i = up;
	}
	t->tm_heap[i] = p;
}

static void heap_pop(struct rt_timers *t)
{
	struct tm_pend last = t->tm_heap[--t->tm_nheap];
	size_t i = 0, n = t->tm_nheap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && pend_less(&t->tm_heap[c + 1], &t->tm_heap[c]))
			c++;
		if (!pend_less(&t->tm_heap[c], &last))
			break;
		t->tm_heap[i] = t->tm_heap[c];
		i = c;
	}
	if (n)
		t->tm_heap[i] = last;
}

/* Remember (ts, kg) as pending: O(log n). */
static int pend_add(struct rt_timers *t, struct tm_pend p)
{
	int rc;

	if ((t->tm_setused + 1) * 2 > t->tm_setcap && (rc = set_grow(t)))
		return rc;
	if (t->tm_nheap == t->tm_heapcap) {
		size_t cap = t->tm_heapcap ? t->tm_heapcap * 2 : 1024;
		struct tm_pend *h = realloc(t->tm_heap, cap * sizeof(*h));

		if (!h)
			return rt_err(-ENOMEM, "timers: no memory for %zu pending timestamps", cap);
		t->tm_heap = h;
		t->tm_heapcap = cap;
	}
	set_put(t, p);
	heap_push(t, p);
	return 0;
}

/* ---- registration filter ---------------------------------------------------------- */

static inline struct tm_filt *filt_slot(const struct rt_timers *t, const void *key, size_t klen,
					int64_t ts)
{
	uint64_t h = sfs_hash_bytes((uint64_t)ts ^ SFS_HASH_P2, key, klen);

	return &t->tm_filt[h & (FILTER_SLOTS - 1)];
}

static inline int filt_match(const struct rt_timers *t, const struct tm_filt *f, const void *key,
			     size_t klen, int64_t ts)
{
	return f->ts == ts && ts > t->tm_fired && f->klen == klen && !memcmp(f->key, key, klen);
}

/* ---- the batch being fired -------------------------------------------------------- */

static int batch_cmp(const void *a, const void *b, void *arg)
{
	const struct tm_fire *x = a, *y = b;
	const unsigned char *kb = arg;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(kb + x->off, kb + y->off, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The batch entry of @key, or NULL (the batch is sorted). */
static struct tm_fire *batch_find(struct rt_timers *t, const void *key, size_t klen)
{
	size_t lo = 0, hi = t->tm_nbatch;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct tm_fire *f = &t->tm_batch[mid];
		uint32_t n = f->len < klen ? f->len : (uint32_t)klen;
		int c = memcmp(t->tm_kb + f->off, key, n);

		if (!c)
			c = (f->len > klen) - (f->len < klen);
		if (!c)
			return &t->tm_batch[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int batch_add(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct rt_timers *t = arg;

	if (t->tm_kblen + ulen > t->tm_kbcap) {
		size_t cap = t->tm_kbcap ? t->tm_kbcap : 4096;
		unsigned char *kb;

		while (cap < t->tm_kblen + ulen)
			cap *= 2;
		if (!(kb = realloc(t->tm_kb, cap)))
			return rt_err(-ENOMEM, "timers: no memory for %zu key bytes", cap);
		t->tm_kb = kb;
		t->tm_kbcap = cap;
	}
	if (t->tm_nbatch == t->tm_batchcap) {
		size_t cap = t->tm_batchcap ? t->tm_batchcap * 2 : 256;
		struct tm_fire *b = realloc(t->tm_batch, cap * sizeof(*b));

		if (!b)
			return rt_err(-ENOMEM, "timers: no memory for %zu timers", cap);
		t->tm_batch = b;
		t->tm_batchcap = cap;
	}
	memcpy(t->tm_kb + t->tm_kblen, ukey, ulen);
	t->tm_batch[t->tm_nbatch++] = (struct tm_fire){ t->tm_kblen, ulen, F_PENDING };
	t->tm_kblen += ulen;
	return 0;
}

/*
 * Take every pending (ts, g) of the earliest timestamp out of the heap and
 * out of state (Flink polls a timer before its callback runs), collecting
 * their keys, sorted.  O(timers + groups * log pending).
 */
static int collect(struct rt_timers *t, int64_t ts)
{
	const struct rt_backend_ops *so = t->tm_op->so;
	struct rt_backend *st = t->tm_op->st;
	unsigned char bk[BUCKET_LEN];
	int rc;

	t->tm_nbatch = 0;
	t->tm_kblen = 0;
	while (t->tm_nheap && t->tm_heap[0].ts == ts) {
		struct tm_pend p = t->tm_heap[0];
		size_t before = t->tm_nbatch;

		heap_pop(t);
		set_del(t, ts, p.kg);
		bucket_key(bk, ts, p.sfx);
		if ((rc = so->map_iter(st, t->tm_timers, 0, bk, BUCKET_LEN, batch_add, t)))
			return rc;
		/* a bucket whose timers were all deleted holds nothing to clear */
		if (t->tm_nbatch > before &&
		    (rc = so->map_clear(st, t->tm_timers, 0, bk, BUCKET_LEN)))
			return rc;
		if ((rc = so->map_remove(st, t->tm_index, 0, anchor(t, p.kg), ANCHOR_LEN, bk, 8)))
			return rc;
	}
	if (t->tm_nbatch > 1)	/* (qsort of a NULL array is undefined even for 0) */
		qsort_r(t->tm_batch, t->tm_nbatch, sizeof(*t->tm_batch), batch_cmp, t->tm_kb);
	return 0;
}

/* ---- the calls -------------------------------------------------------------------- */

int rt_timer_register(struct rt_timers *t, const void *key, size_t klen, int64_t ts)
{
	const struct rt_backend_ops *so = t->tm_op->so;
	const struct tm_pend *pend;
	struct tm_pend p;
	unsigned char bk[BUCKET_LEN];
	struct tm_filt *f = NULL;
	int kg, rc;

	if (klen <= FILTER_KEY) {
		f = filt_slot(t, key, klen, ts);
		if (filt_match(t, f, key, klen, ts))
			return 0;
	}
	if ((kg = owned_group(t, key, klen, "register")) < 0)
		return kg;
	if (!klen)	/* in a map it would be its head's key (sfs) */
		return rt_err(SFS_EUSAGE, "timer register: an empty key");
	if (t->tm_inbatch && ts == t->tm_bts) {
		struct tm_fire *b = batch_find(t, key, klen);

		if (b && b->state == F_PENDING)
			return 0;
		if (b && b->state == F_CANCELLED) {
			b->state = F_PENDING;
			return 0;
		}
	}
	if ((pend = set_find(t, ts, (uint32_t)kg))) {
		p = *pend;
	} else {
		unsigned char sfx[4];

		p = (struct tm_pend){ ts, (uint32_t)kg, 0 };
		if ((rc = bucket_suffix(t, ts, p.kg, &p.sfx)))
			return rc;
		bucket_key(bk, ts, p.sfx);
		memcpy(sfx, bk + 8, 4);
		rc = so->map_put(t->tm_op->st, t->tm_index, 0, anchor(t, p.kg), ANCHOR_LEN, bk, 8,
				 sfx, 4);
		if (rc || (rc = pend_add(t, p)))
			return rc;
	}
	bucket_key(bk, ts, p.sfx);
	if ((rc = so->map_put(t->tm_op->st, t->tm_timers, 0, bk, BUCKET_LEN, key, klen, empty, 0)))
		return rc;
	/* Only a timer that the next advances have not fired yet is cached. */
	if (f && ts > t->tm_fired) {
		f->ts = ts;
		f->klen = (uint8_t)klen;
		memcpy(f->key, key, klen);
	}
	return 0;
}

int rt_timer_delete(struct rt_timers *t, const void *key, size_t klen, int64_t ts)
{
	int kg = owned_group(t, key, klen, "delete");
	const struct tm_pend *p;
	unsigned char bk[BUCKET_LEN];

	if (kg < 0)
		return kg;
	if (klen <= FILTER_KEY) {
		struct tm_filt *f = filt_slot(t, key, klen, ts);

		if (filt_match(t, f, key, klen, ts))
			f->ts = INT64_MIN;
	}
	if (t->tm_inbatch && ts == t->tm_bts) {
		struct tm_fire *b = batch_find(t, key, klen);

		if (b && b->state != F_FIRED) {
			b->state = F_CANCELLED;
			return 0;
		}
	}
	/* Nothing pending at (ts, kg): no state write at all. */
	if (!(p = set_find(t, ts, (uint32_t)kg)) || !klen)
		return 0;
	bucket_key(bk, ts, p->sfx);
	return t->tm_op->so->map_remove(t->tm_op->st, t->tm_timers, 0, bk, BUCKET_LEN, key, klen);
}

int rt_timers_advance(struct rt_timers *t, int64_t wm, rt_timer_fn fn, void *arg)
{
	unsigned since = 0;
	int rc = 0;

	if (t->tm_advancing)
		return rt_err(SFS_EUSAGE, "timers: advance called from a timer callback");
	if (wm > t->tm_fired)
		t->tm_fired = wm;
	t->tm_advancing = 1;
	while (!rc && t->tm_nheap && t->tm_heap[0].ts <= wm) {
		int64_t ts = t->tm_heap[0].ts;

		if ((rc = collect(t, ts)))
			break;
		t->tm_inbatch = 1;
		t->tm_bts = ts;
		for (size_t i = 0; i < t->tm_nbatch && !rc; i++) {
			struct tm_fire *b = &t->tm_batch[i];

			if (b->state != F_PENDING)
				continue;
			b->state = F_FIRED;
			rc = fn(arg, t->tm_kb + b->off, b->len, ts);
			if (++since == QUIESCE_EVERY) {
				/* a watermark may fire a whole window's timers: progress,
				 * not a hang (on a disk backend it can take seconds) */
				t->tm_op->so->quiescent(t->tm_op->st);
				rt_beat(t->tm_op);
				since = 0;
			}
		}
		t->tm_inbatch = 0;
	}
	t->tm_advancing = 0;
	return rc;
}

int64_t rt_timers_next(const struct rt_timers *t)
{
	return t->tm_nheap ? t->tm_heap[0].ts : INT64_MAX;
}

const void *rt_timers_local_key(const struct rt_timers *t, uint32_t *klen)
{
	*klen = ANCHOR_LEN;
	return t->tm_ngroups ? t->tm_anchor[0] : NULL;
}

/* ---- open / close ----------------------------------------------------------------- */

struct load {
	struct rt_timers *t;
	uint32_t kg;
	int rc;
};

static int load_one(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct load *l = arg;
	const unsigned char *v = val;

	if (ulen != 8 || vlen != 4)
		return l->rc = rt_err(SFS_ECORRUPT, "timer index of key group %u: an entry of "
				      "%u + %u bytes, expected 8 + 4", l->kg, ulen, vlen);
	return l->rc = pend_add(l->t, (struct tm_pend){ ts_of_key(ukey), l->kg,
							(uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
								(uint32_t)v[2] << 8 | v[3] });
}

/* Every owned group's anchor: the smallest 4-byte integer hashing to it. */
static int find_anchors(struct rt_timers *t)
{
	uint32_t left = t->tm_ngroups;
	unsigned char *have = calloc(t->tm_ngroups ? t->tm_ngroups : 1, 1);

	if (!have)
		return rt_err(-ENOMEM, "timers: no memory for %u anchors", t->tm_ngroups);
	for (uint32_t i = 0; left && i < ANCHOR_TRIES; i++) {
		unsigned char k[ANCHOR_LEN] = { (unsigned char)(i >> 24), (unsigned char)(i >> 16),
						(unsigned char)(i >> 8), (unsigned char)i };
		uint32_t kg = sfs_key_group(k, ANCHOR_LEN, t->tm_maxp);

		if (kg < t->tm_kg_start || kg - t->tm_kg_start >= t->tm_ngroups ||
		    have[kg - t->tm_kg_start])
			continue;
		have[kg - t->tm_kg_start] = 1;
		memcpy(t->tm_anchor[kg - t->tm_kg_start], k, ANCHOR_LEN);
		left--;
	}
	free(have);
	return left ? rt_err(SFS_ECORRUPT, "timers: no anchor key for %u key groups", left) : 0;
}

int rt_timers_open(struct rt_op *op, const char *name, struct rt_timers **out)
{
	struct rt_timers *t;
	char sname[NAME_MAX_LEN + 8];
	uint32_t end;
	int rc;

	if (strlen(name) > NAME_MAX_LEN)
		return rt_err(SFS_EUSAGE, "timers '%s': name longer than %u bytes", name,
			      NAME_MAX_LEN);
	if (!(t = calloc(1, sizeof(*t))))
		return rt_err(-ENOMEM, "timers '%s': no memory", name);
	t->tm_op = op;
	t->tm_fired = INT64_MIN;
	t->tm_maxp = op->maxp ? op->maxp : SFS_MAX_PARALLELISM_DEFAULT;
	t->tm_kg_start = sfs_kg_range_start(op->worker, op->workers, t->tm_maxp);
	end = sfs_kg_range_end(op->worker, op->workers, t->tm_maxp);
	t->tm_ngroups = end >= t->tm_kg_start ? end - t->tm_kg_start + 1 : 0;
	t->tm_anchor = calloc(t->tm_ngroups ? t->tm_ngroups : 1, ANCHOR_LEN);
	t->tm_filt = calloc(FILTER_SLOTS, sizeof(*t->tm_filt));
	if (!t->tm_anchor || !t->tm_filt) {
		rc = rt_err(-ENOMEM, "timers '%s': no memory", name);
		goto fail;
	}
	for (uint32_t i = 0; i < FILTER_SLOTS; i++)
		t->tm_filt[i].ts = INT64_MIN;
	snprintf(sname, sizeof(sname), "%s.timers", name);
	if ((rc = op->so->reg(op->st, sname, SFS_STATE_MAP | RT_STATE_NO_TTL, 0, &t->tm_timers)))
		goto fail;
	snprintf(sname, sizeof(sname), "%s.index", name);
	if ((rc = op->so->reg(op->st, sname, SFS_STATE_MAP | RT_STATE_NO_TTL, 0, &t->tm_index)) ||
	    (rc = find_anchors(t)) || (rc = set_grow(t)))
		goto fail;
	for (uint32_t g = 0; g < t->tm_ngroups; g++) {
		struct load l = { t, t->tm_kg_start + g, 0 };

		rc = op->so->map_iter(op->st, t->tm_index, 0, t->tm_anchor[g], ANCHOR_LEN, load_one,
				      &l);
		if (rc || (rc = l.rc))
			goto fail;
	}
	op->so->quiescent(op->st);
	*out = t;
	return 0;
fail:
	rt_timers_close(t);
	return rc;
}

void rt_timers_close(struct rt_timers *t)
{
	if (!t)
		return;
	free(t->tm_anchor);
	free(t->tm_heap);
	free(t->tm_set);
	free(t->tm_filt);
	free(t->tm_kb);
	free(t->tm_batch);
	free(t);
}
