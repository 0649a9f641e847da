/*
 * stage.c — the staged copy of a buffer (struct wstage, rocksdb_int.h):
 * per state, the records apply() appends (write.c) in apply order, with
 * a save point per apply call so a failed call is undone whole; sorted
 * into key order for an SST when apply saw them out of order; read back
 * record by record by commit() (write.c), as a WriteBatch or an SST, as
 * often as a failing commit is retried; reset when the buffer is
 * committed or abandoned (rollback.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "store/rocksdb/rocksdb_int.h"

static int key_cmp(const unsigned char *a, uint32_t al, const unsigned char *b, uint32_t bl);
static int idx_cmp(const void *a, const void *b, void *arg);

/* Append a record; O(1) amortized (one key compare for the order check). */
int sfs__rdbt_stage_add(struct wstage *s, unsigned op, const void *k, uint32_t kl, const void *v,
		     uint32_t vl, uint32_t gen)
{
	size_t need = SREC_HDR + (size_t)kl + vl;

	if (s->mgen != gen) {
		s->mgen = gen;
		s->m_len = s->len;
		s->m_n = s->n;
		s->m_nrange = s->nrange;
		s->m_unsorted = s->unsorted;
		s->m_dup = s->dup;
		s->m_touched = s->touched;
	}
	if (s->len + need > s->cap) {
		size_t cap = s->cap ? s->cap : 64u << 10;
		unsigned char *nb;

		while (cap < s->len + need)
			cap *= 2;
		if (!(nb = realloc(s->buf, cap)))
			return -ENOMEM;
		s->buf = nb;
		s->cap = cap;
	}
	if (op != SOP_RANGE && s->n == s->ncap) {
		size_t cap = s->ncap ? s->ncap * 2 : 4096;
		uint64_t *ni = realloc(s->idx, cap * sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		s->idx = ni;
		s->ncap = cap;
	}
	if (op != SOP_RANGE && s->n) {
		unsigned pop;
		const unsigned char *pk, *pv;
		uint32_t pkl, pvl;
		int c;

		sfs__rdbt_srec_at(s, s->idx[s->n - 1], &pop, &pk, &pkl, &pv, &pvl);
		c = key_cmp(pk, pkl, k, kl);
		if (c >= 0)
			s->unsorted = 1;
		if (c == 0)
			s->dup = 1;
	}
	s->buf[s->len] = (unsigned char)op;
	memcpy(s->buf + s->len + 1, &kl, 4);
	memcpy(s->buf + s->len + 5, &vl, 4);
	memcpy(s->buf + s->len + SREC_HDR, k, kl);
	if (vl)
		memcpy(s->buf + s->len + SREC_HDR + kl, v, vl);
	if (op == SOP_RANGE)
		s->nrange++;
	else
		s->idx[s->n++] = s->len;
	s->len += need;
	s->touched = 1;
	return 0;
}

/* Bytewise order of RocksDB's default comparator. */
static int key_cmp(const unsigned char *a, uint32_t al, const unsigned char *b, uint32_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

void sfs__rdbt_srec_at(const struct wstage *s, uint64_t off, unsigned *op, const unsigned char **k,
		    uint32_t *kl, const unsigned char **v, uint32_t *vl)
{
	const unsigned char *p = s->buf + off;

	*op = p[0];
	memcpy(kl, p + 1, 4);
	memcpy(vl, p + 5, 4);
	*k = p + SREC_HDR;
	*v = p + SREC_HDR + *kl;
}

/* Undo what the failed apply call @gen staged. */
void sfs__rdbt_stages_rollback(struct sfs_target_writer *w, uint32_t gen)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		struct wstage *s = &w->st[i];

		if (s->mgen != gen)
			continue;
		s->len = s->m_len;
		s->n = s->m_n;
		s->nrange = s->m_nrange;
		s->unsorted = s->m_unsorted;
		s->dup = s->m_dup;
		s->touched = s->m_touched;
	}
}

/* Sort the point records into key order (only when apply saw them out of
 * order: several namespaces of one key).  O(n log n) compares of keys in
 * the stage; the usual buffer (one namespace) skips it. */
void sfs__rdbt_stage_sort(struct wstage *s)
{
	if (!s->unsorted)
		return;
	qsort_r(s->idx, s->n, sizeof(*s->idx), idx_cmp, s);
	s->unsorted = 0;
	for (size_t i = 1; i < s->n && !s->dup; i++)
		s->dup = idx_cmp(&s->idx[i - 1], &s->idx[i], s) == 0;
}

static int idx_cmp(const void *a, const void *b, void *arg)
{
	const struct wstage *s = arg;
	unsigned op;
	const unsigned char *ka, *kb, *v;
	uint32_t la, lb, vl;

	sfs__rdbt_srec_at(s, *(const uint64_t *)a, &op, &ka, &la, &v, &vl);
	sfs__rdbt_srec_at(s, *(const uint64_t *)b, &op, &kb, &lb, &v, &vl);
	return key_cmp(ka, la, kb, lb);
}

void sfs__rdbt_stages_reset(struct sfs_target_writer *w)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->st[i].touched || w->st[i].sw)
			sfs__rdbt_stage_reset(&w->st[i]);
	rocksdb_writebatch_clear(w->wb);
	w->seq = 0;
	w->staged = w->batched = w->batch_any = w->written = w->flushing = 0;
}

void sfs__rdbt_stage_reset(struct wstage *s)
{
	if (s->sw)
		rocksdb_sstfilewriter_destroy(s->sw);
	s->sw = NULL;
	s->len = s->n = s->nrange = s->sst_pos = 0;
	s->unsorted = s->dup = s->touched = s->done = s->inbatch = 0;
}
