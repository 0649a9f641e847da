/*
 * table_scan.c — the `table` target's offline scan (store/target.h, scan):
 * every live entry of one worker's checkpoint image (TABLES and its files,
 * flat in one directory: table_snap.h), for `sfs export`.
 *
 * Per table, every file is read with its deletion vector applied
 * (sfs_df_iter_kg over all key groups, the rescale rebuild's walk) and its
 * rows gathered; rows are sorted by key, then by age, and each key's rows
 * folded oldest first as the engine's reads fold them (table_view.c): a
 * PUT replaces, a DELETE drops, a MERGE (level 0 only) folds its delta
 * with the state's operator over what is below.  Level >= 1 files hold at
 * most one live row per key (masked), so they are the oldest layer; level-0
 * files are aged by their place in TABLES, first listed oldest: the order
 * an adoption gives them (table_open.c, adopt: each file's order is its place
 * in the list) and the writer's array order the stager copies.  Then the row key goes back to
 * the buffered key (table.h: the namespace sits after the key of a value
 * or counter, after the parent of a map or list entry).
 *
 * Cost: O(rows log rows) time and every row in memory at once per table —
 * an offline tool's price, not a reader's.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "common/merge.h"
#include "shm/segment.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/dvec.h"
#include "store/table/table.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"

struct scan_row {
	unsigned char *key, *val;
	uint32_t klen, vlen;
	uint32_t age;            /* 0: level >= 1; level 0: larger is newer */
	int kind;
};

struct srows {
	struct scan_row *r;
	size_t n, cap;
};

static int srows_add(struct srows *s, const struct sfs_df_row *row, uint32_t age)
{
	struct scan_row *x;

	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 1024;
		struct scan_row *p = realloc(s->r, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->r = p;
		s->cap = nc;
	}
	x = &s->r[s->n];
	if (!(x->key = malloc(row->klen + row->vlen + 1)))
		return -ENOMEM;
	memcpy(x->key, row->key, row->klen);
	x->val = x->key + row->klen;
	if (row->vlen)
		memcpy(x->val, row->val, row->vlen);
	x->klen = (uint32_t)row->klen;
	x->vlen = (uint32_t)row->vlen;
	x->age = age;
	x->kind = row->kind;
	s->n++;
	return 0;
}

static void srows_clear(struct srows *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->r[i].key);
	s->n = 0;
}

static int srow_cmp(const void *a, const void *b)
{
	const struct scan_row *x = a, *y = b;
	uint32_t m = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, m);

	if (c)
		return c;
	if (x->klen != y->klen)
		return x->klen < y->klen ? -1 : 1;
	return x->age < y->age ? -1 : x->age > y->age;
}

/* Row key -> buffered key and namespace (table.h), then @fn. */
static int emit(const char *path, int kind, const struct scan_row *r, const void *val, uint32_t vlen,
		int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg)
{
	unsigned char buf[SFS_DF_KEY_MAX];
	struct sfs_scan_entry e = { .key = buf, .val = val, .vlen = vlen };
	uint32_t at;

	if (kind == SFS_STATE_MAP || kind == SFS_STATE_LIST) {
		at = sfs_map_parent_len(r->key, r->klen);
		if (!at || r->klen < at + 8)
			goto bad;
	} else {
		if (r->klen < SFS_KEY_PREFIX + 8)
			goto bad;
		at = r->klen - 8;
	}
	for (unsigned i = 0; i < 8; i++)
		e.ns = e.ns << 8 | r->key[at + i];
	memcpy(buf, r->key, at);
	memcpy(buf + at, r->key + at + 8, r->klen - at - 8);
	e.klen = r->klen - 8;
	return fn(arg, &e);
bad:
	return sfs__err(SFS_ECORRUPT, "%s: a row key of %u bytes is malformed for its state", path,
			r->klen);
}

/* Fold and emit one table's gathered rows. */
static int fold(const char *path, const struct sfs_state_desc *d, struct srows *s,
		int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg)
{
	int rc = 0;

	qsort(s->r, s->n, sizeof(*s->r), srow_cmp);
	for (size_t i = 0; i < s->n && !rc;) {
		size_t j = i;
		const struct scan_row *put = NULL;
		int64_t acc = 0;
		int has = 0, merged = 0;

		for (; j < s->n && s->r[j].klen == s->r[i].klen &&
		       !memcmp(s->r[j].key, s->r[i].key, s->r[i].klen); j++) {
			const struct scan_row *r = &s->r[j];

			if (r->kind == SFS_DF_PUT) {
				put = r;
				has = 0;
				merged = 0;
				if (d->sd_kind == SFS_STATE_COUNTER && r->vlen == 8) {
					memcpy(&acc, r->val, 8);
					has = 1;
				}
			} else if (r->kind == SFS_DF_DELETE) {
				put = NULL;
				has = merged = 0;
			} else if (r->kind == SFS_DF_MERGE && r->vlen == 8) {
				int64_t delta = sfs_df_merge_delta(r->val);

				acc = has ? sfs_merge_i64(d->sd_merge, acc, delta) : delta;
				has = merged = 1;
			} else {
				return sfs__err(SFS_ECORRUPT, "%s: a row of kind %d, %u bytes", path,
						r->kind, r->vlen);
			}
		}
		if (merged)
			rc = emit(path, (int)d->sd_kind, &s->r[i], &acc, 8, fn, arg);
		else if (put)
			rc = emit(path, (int)d->sd_kind, put, put->val, put->vlen, fn, arg);
		i = j;
	}
	return rc;
}

int sfs__table_scan(const char *dir, const struct sfs_state_desc *states,
		    int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg)
{
	char path[PATH_MAX], fpath[PATH_MAX];
	struct sfs_tsnap s;
	struct srows rows = { 0 };
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, SFS_TSNAP_FILE);
	if ((rc = sfs_tsnap_read(path, &s)))
		return rc;
	for (uint32_t t = 0; t < s.ntables && !rc; t++) {
		const struct sfs_tsnap_table *tb = &s.tables[t];
		sfs_dv_index_t *ix = NULL;

		if (tb->sid >= SFS_MAX_STATES || states[tb->sid].sd_state != SFS_SDESC_READY) {
			rc = sfs__err(SFS_ECORRUPT, "%s: table of state %u, which the checkpoint's "
				      "registry does not have", path, tb->sid);
			break;
		}
		if (tb->dvi[0]) {
			snprintf(fpath, sizeof(fpath), "%s/%s", dir, tb->dvi);
			if ((rc = sfs_dv_open(fpath, &ix)))
				break;
		}
		for (uint32_t f = 0, k = 0; f < tb->nfiles && !rc; f++) {
			const struct sfs_tsnap_file *tf = &tb->files[f];
			sfs_df_reader_t *r = NULL;
			sfs_df_iter_t *it = NULL;
			struct sfs_df_row row;
			uint64_t *bits = NULL;
			size_t words = 0;
			uint32_t age = 0;

			if (tf->level == 0)
				age = ++k;	/* listed oldest first */
			snprintf(fpath, sizeof(fpath), "%s/%s", dir, tf->name);
			if ((rc = sfs_df_reader_open(fpath, NULL, &r)))
				break;
			if (ix && sfs_dv_find(ix, tf->name) >= 0 &&
			    (rc = sfs_dv_lookup(ix, tf->name, &bits, &words))) {
				sfs_df_reader_close(r);
				break;
			}
			if (!(rc = sfs_df_iter_kg(r, 0, 0xffff, bits, words, &it))) {
				while ((rc = sfs_df_iter_next(it, &row)) == 1)
					if ((rc = srows_add(&rows, &row, age)))
						break;
				sfs_df_iter_close(it);
			}
			free(bits);
			sfs_df_reader_close(r);
		}
		sfs_dv_close(ix);
		if (!rc)
			rc = fold(path, &states[tb->sid], &rows, fn, arg);
		srows_clear(&rows);
	}
	free(rows.r);
	sfs_tsnap_free(&s);
	return rc;
}
