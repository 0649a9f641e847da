/*
 * table_view.c — reads over one table version (see table_view.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/keycmp.h"
#include "common/merge.h"
#include "store/table/table_int.h"
#include "store/table/table_view.h"

/* A batch up to this many keys prefetches every file's filter block first
 * (a window's multiget of its slices: q5 asks 5 keys at a time); a larger
 * one prefetches per file (sfs_df_probe). */
#define TV_PREFETCH_KEYS 8

static int64_t get_i64(const void *p)
{
	int64_t v;

	memcpy(&v, p, 8);
	return v;
}

int sfs__tv_probe(const struct tv_file *f, unsigned nf, const struct sfs_df_key *keys, size_t n,
	     const uint64_t *admit, int merge, unsigned flags, struct sfs_bump *a,
	     struct tv_res *out, struct sfs_df_key *sk, uint32_t *si, struct sfs_df_hit *hits)
{
	/* with @admit: the unresolved keys file k admits, and their places
	 * in sk[] (the unresolved list itself stays whole for later files) */
	struct sfs_df_key *ck = NULL;
	uint32_t *ci = NULL;
	/* counter deltas met at level 0, per key */
	unsigned char *has_acc = NULL;
	int64_t *acc = NULL;
	size_t m = n;	/* keys still unresolved: sk[0..m), their indexes si[0..m) */
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		out[i].state = 0;
		out[i].val = NULL;
		out[i].vlen = 0;
		out[i].file = -1;
		out[i].pos = 0;
	}
	if (admit && n && (!(ck = malloc(n * sizeof(*ck))) || !(ci = malloc(n * sizeof(*ci))))) {
		rc = -ENOMEM;
		goto out;
	}
	if (merge >= 0 && nf && f[0].level == 0) {
		has_acc = calloc(n, 1);
		acc = malloc(n * sizeof(*acc));
		if (!has_acc || !acc) {
			rc = -ENOMEM;
			goto out;
		}
	}
	/* Each key hashed once for every file's filter; a read of a few keys
	 * (a worker's point read) starts every file's filter block loading
	 * before it probes the first, so those misses overlap. */
	for (size_t i = 0; i < n; i++) {
		sk[i] = keys[i];
		sk[i].h = sfs_df_filter_hash(keys[i].p, keys[i].len);
		si[i] = (uint32_t)i;
	}
	for (unsigned k = 0; n <= TV_PREFETCH_KEYS && k < nf; k++)
		for (size_t i = 0; i < n; i++)
			sfs_df_prefetch_filter(f[k].rd, sk[i].h);
	for (unsigned k = 0; k < nf; k++) {
		size_t kept = 0, nc = 0;
		const struct sfs_df_key *pk = sk;
		const uint32_t *pi = si;

		/* the keys still unresolved, in order (kept <= j: in place) */
		for (size_t j = 0; j < m; j++)
			if (!out[si[j]].state) {
				sk[kept] = sk[j];
				si[kept++] = si[j];
			}
		m = kept;
		if (!m)
			break;
		nc = m;
		if (admit && k < 64) {
			nc = 0;
			for (size_t j = 0; j < m; j++)
				if (admit[si[j]] >> k & 1) {
					ck[nc] = sk[j];
					ci[nc++] = si[j];
				}
			if (!nc)
				continue;
			pk = ck;
			pi = ci;
		}
		rc = sfs_df_probe(f[k].rd, pk, nc, f[k].dv, f[k].dv_words, flags | SFS_DF_PROBE_HASHED,
				  hits);
		if (rc < 0)
			goto out;
		rc = 0;
		for (size_t j = 0; j < nc; j++) {
			struct tv_res *r = &out[pi[j]];

			if (!hits[j].found)
				continue;
			if (f[k].level == 0 && hits[j].kind == SFS_DF_MERGE) {
				int64_t d = sfs_df_merge_delta(hits[j].val);

				acc[pi[j]] = has_acc[pi[j]] ? sfs_merge_i64((unsigned)merge,
									    acc[pi[j]], d) : d;
				has_acc[pi[j]] = 1;
				continue;
			}
			if (hits[j].kind == SFS_DF_DELETE) {
				r->state = 2;
				continue;
			}
			r->state = 1;
			r->vlen = hits[j].vlen;
			if (f[k].level > 0) {
				r->file = (int32_t)k;
				r->pos = hits[j].pos;
			}
			if (!(flags & SFS_DF_PROBE_NO_VALUES) &&
			    !(r->val = sfs_bump_copy(a, hits[j].val, hits[j].vlen))) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	/* fold the level-0 deltas over the base (or alone, over nothing) */
	for (size_t i = 0; has_acc && i < n; i++) {
		int64_t v;

		if (!has_acc[i])
			continue;
		v = acc[i];
		if (out[i].state == 1 && out[i].vlen == 8 && out[i].val)
			v = sfs_merge_i64((unsigned)merge, get_i64(out[i].val), v);
		if (!(out[i].val = sfs_bump_copy(a, &v, 8))) {
			rc = -ENOMEM;
			break;
		}
		out[i].state = 1;
		out[i].vlen = 8;
	}
out:
	free(ck);
	free(ci);
	free(has_acc);
	free(acc);
	return rc;
}

static int row_cmp(const void *x, const void *y)
{
	const struct tv_row *a = x, *b = y;
	int c = sfs_keycmp(a->key, a->klen, b->key, b->klen);

	if (c)
		return c;
	/* the same key: the newer file (lower rank) first */
	return a->file < b->file ? -1 : a->file > b->file;
}

int sfs__tv_prefix(const struct tv_file *f, unsigned nf, const void *pfx, size_t plen,
	      struct sfs_bump *a, struct tv_row **rows, size_t *n)
{
	struct tv_row *r = NULL;
	size_t cnt = 0, cap = 0, w = 0;
	const void *prev = NULL;
	uint32_t prev_len = 0;
	uint64_t ph = sfs_df_filter_hash(pfx, plen);	/* once, for every file's filter */
	int rc = 0;

	*rows = NULL;
	*n = 0;
	for (unsigned k = 0; k < nf && !rc; k++) {
		sfs_df_iter_t *it;
		struct sfs_df_row row;

		if ((rc = sfs_df_prefix_maybe_h(f[k].rd, SFS_TABLE_PFX_MAP, ph)) <= 0)
			continue;	/* the file's prefix filter: no entry of this map (or an error) */
		if ((rc = sfs_df_iter_prefix_cached(f[k].rd, pfx, plen, f[k].dv, f[k].dv_words, &it)))
			break;
		while ((rc = sfs_df_iter_next(it, &row)) == 1) {
			if (cnt == cap) {
				struct tv_row *nr = realloc(r, (cap = cap ? 2 * cap : 16) * sizeof(*r));

				if (!nr) {
					rc = -ENOMEM;
					break;
				}
				r = nr;
			}
			r[cnt].klen = (uint32_t)(row.klen - plen);
			r[cnt].vlen = (uint32_t)row.vlen;
			r[cnt].key = sfs_bump_copy(a, (const char *)row.key + plen, row.klen - plen);
			r[cnt].val = row.kind == SFS_DF_DELETE ? NULL
							       : sfs_bump_copy(a, row.val, row.vlen);
			/* file: the rank (newest first) for the sort; fixed below */
			r[cnt].file = (int32_t)k;
			r[cnt].pos = row.pos;
			if (!r[cnt].key || (row.kind != SFS_DF_DELETE && !r[cnt].val)) {
				rc = -ENOMEM;
				break;
			}
			cnt++;
		}
		sfs_df_iter_close(it);
	}
	if (rc < 0) {
		free(r);
		return rc;
	}
	rc = 0;
	if (cnt > 1)
		qsort(r, cnt, sizeof(*r), row_cmp);
	for (size_t i = 0; i < cnt; i++) {
		struct tv_row cur = r[i];

		if (i && cur.klen == prev_len && memcmp(cur.key, prev, cur.klen) == 0)
			continue;	/* an older version of the key before */
		prev = cur.key;
		prev_len = cur.klen;
		if (!cur.val)
			continue;	/* a level-0 tombstone */
		r[w] = cur;
		r[w].file = f[cur.file].level > 0 ? cur.file : -1;
		w++;
	}
	*rows = r;
	*n = w;
	return 0;
}
