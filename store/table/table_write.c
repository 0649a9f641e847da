/*
 * table_write.c — the writer's flush (store/target.h: apply, commit):
 * barrier deltas into the tables.
 *
 * One table per registered state per worker, in <store>/s<sid>/.  The
 * compactor's main thread stages a sealed buffer's entries per table
 * (apply), then commits them one touched table per commit(seq) call
 * (-EAGAIN until the last, which publishes), under the table's lock:
 *
 *  1. Map diff (map and list state).  The staged entries are compared with
 *     the image the table holds (one batch probe): an entry equal to its
 *     stored value is dropped, a removal of an absent entry too; a clear
 *     becomes a tombstone for each stored entry of the map that the buffer
 *     does not write again (one prefix scan).  So a changed row of a 3-row
 *     map writes 1 row and a reverted change writes none.
 *  2. Data commit.  The delta is written as one small level-0 data file
 *     (LZ4) and committed as a snapshot (kind DATA, watermark = seq): from
 *     here the buffer is durable.
 *  3. The minimal round (table_round.c).
 *
 * The table's lock is the flush's only wait for maintenance: a merge holds
 * it to pick its inputs and to commit (table_merge.c); when the flush finds
 * it held, the wait is timed (tp_flush_wait_ns: one trylock per table
 * commit otherwise).
 *
 * Next on a key's path: layout/datafile_write.c (the level-0 file), then
 * table_round.c (its round).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/keycmp.h"
#include "common/keygroup.h"
#include "common/log.h"
#include "shm/atomic.h"
#include "store/table/layout/manifest.h"
#include "store/table/table_int.h"
#include "worker/wbuf.h"

static void save_point(struct sfs_target_writer *w, struct table *t);
static int stage_map(struct table *t, const struct sfs_wbuf_view *v, unsigned n);
static int stage_clear_prefix(void *arg, const struct sfs_wbuf_view *h, uint32_t plen);
static int stage_entry(void *arg, const struct sfs_wbuf_view *e, uint32_t plen,
		       const struct sfs_wbuf_view *head, const void *val, uint32_t len);
static int stage_row(struct table *t, struct srow **arr, size_t *cnt, size_t *cap, int map,
		     uint32_t plen, uint64_t ns, const void *key, uint32_t klen, int kind,
		     const void *val, uint32_t vlen);
static int stage_raw(struct table *t, struct srow **arr, size_t *cnt, size_t *cap,
		     const void *enc, uint32_t el, int kind, const void *val, uint32_t vlen);
static int sb_put(struct table *t, const void *p, size_t n, uint64_t *off);
static int commit_table(struct sfs_target_writer *w, struct table *t, uint64_t seq);
static int map_diff(struct sfs_target_writer *w, struct table *t);
static int probe_keys_of_known_maps(struct sfs_target_writer *w, struct table *t,
				    const struct tv_file *vf, unsigned nf, size_t base, size_t *np);
enum { MAP_ALL, MAP_L0, MAP_ANY };
static int map_admitted(const struct tv_file *vf, unsigned nf, uint64_t ph, int which,
			uint64_t *admit);
static int cleared(const struct table *t, const unsigned char *pfx, uint32_t plen);
static int staged(struct table *t, const void *k, uint32_t klen, size_t nrows);
static void sort_rows(struct table *t);
static int srow_cmp(const void *x, const void *y);

int sfs__tbl_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		   uint64_t seq)
{
	int rc = 0;

	(void)seq;
	/* images are older than any buffer applied the old way (table_l0.c) */
	if (w->nl0 && w->l0_conv == 0 && (rc = sfs__tbl_l0_drain(w)))
		return rc;
	w->gen++;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		uint32_t sid;
		struct table *t;
		int64_t d;

		if (v[i].klen < SFS_KEY_PREFIX ||
		    (sid = sfs_key_prefix_state(v[i].key)) >= SFS_MAX_STATES) {
			rc = sfs__err(SFS_ECORRUPT, "table target: a buffered key of %u bytes",
				      v[i].klen);
			break;
		}
		if (!(t = sfs__tbl_table_get(w, sid))) {
			rc = -ENOMEM;
			break;
		}
		save_point(w, t);
		if (sfs__tbl_is_map_kind(t->kind)) {
			rc = stage_map(t, &v[i], n - i);
			if (rc > 0) {
				i += (unsigned)rc - 1;
				rc = 0;
			}
			continue;
		}
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 0, 0, v[i].ns, v[i].key,
				       v[i].klen, SFS_DF_PUT, v[i].value, v[i].len);
			break;
		case SFS_WBUF_DELETE:
			rc = stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 0, 0, v[i].ns, v[i].key,
				       v[i].klen, SFS_DF_DELETE, NULL, 0);
			break;
		case SFS_WBUF_MERGE:
			d = sfs_wbuf_view_i64(&v[i]);
			rc = stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 0, 0, v[i].ns, v[i].key,
				       v[i].klen, SFS_DF_MERGE, &d, 8);
			break;
		default:
			rc = sfs__err(SFS_ECORRUPT, "table target: entry of unknown kind %u",
				      v[i].kind);
		}
	}
	if (rc) {
		/* back to this call's save points: the retry stages them again */
		for (uint32_t sid = 0; sid < SFS_MAX_STATES; sid++) {
			struct table *t = w->t[sid];

			if (t && t->save_gen == w->gen) {
				t->nrows = t->save_rows;
				t->sb_len = t->save_sb;
				t->nclr = t->save_clr;
			}
		}
	}
	return rc;
}

static void save_point(struct sfs_target_writer *w, struct table *t)
{
	if (t->save_gen == w->gen)
		return;
	t->save_gen = w->gen;
	t->save_rows = t->nrows;
	t->save_sb = t->sb_len;
	t->save_clr = t->nclr;
}

static int stage_map(struct table *t, const struct sfs_wbuf_view *v, unsigned n)
{
	static const struct sfs_map_run_ops ops = { stage_clear_prefix, stage_entry };

	return sfs_map_run_walk(v, n, "table target", &ops, t);
}

/* A map's run (sfs_map_run_walk): clears become staged prefixes, entries
 * rows (a removal a tombstone). */
static int stage_clear_prefix(void *arg, const struct sfs_wbuf_view *h, uint32_t plen)
{
	struct table *t = arg;

	return stage_row(t, &t->clr, &t->nclr, &t->clr_cap, 1, plen, h->ns, h->key, plen,
			 SFS_DF_DELETE, NULL, 0);
}

static int stage_entry(void *arg, const struct sfs_wbuf_view *e, uint32_t plen,
		       const struct sfs_wbuf_view *head, const void *val, uint32_t len)
{
	struct table *t = arg;

	(void)head;
	return stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 1, plen, e->ns, e->key, e->klen,
			 val ? SFS_DF_PUT : SFS_DF_DELETE, val, len);
}

static int stage_row(struct table *t, struct srow **arr, size_t *cnt, size_t *cap, int map,
		     uint32_t plen, uint64_t ns, const void *key, uint32_t klen, int kind,
		     const void *val, uint32_t vlen)
{
	unsigned char enc[SFS_DF_KEY_MAX];

	if ((size_t)klen + 8 > SFS_DF_KEY_MAX)
		return sfs__err(SFS_EUSAGE, "table %s: a key of %u bytes is too long for a data "
				"file", t->dir, klen);
	return stage_raw(t, arr, cnt, cap, enc, (uint32_t)sfs__table_enc(enc, map, plen, ns, key,
									 klen),
			 kind, val, vlen);
}

/* Stage a row whose key is encoded already. */
static int stage_raw(struct table *t, struct srow **arr, size_t *cnt, size_t *cap,
		     const void *enc, uint32_t el, int kind, const void *val, uint32_t vlen)
{
	struct srow *r;
	int rc;

	if (*cnt == *cap) {
		size_t nc = *cap ? 2 * *cap : 256;
		struct srow *na = realloc(*arr, nc * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	r = &(*arr)[*cnt];
	r->klen = el;
	r->vlen = vlen;
	r->kind = kind;
	r->old_file = PRE_UNKNOWN;
	r->old_pos = 0;
	r->ord = *cnt;
	if ((rc = sb_put(t, enc, el, &r->koff)) || (rc = sb_put(t, val, vlen, &r->voff)))
		return rc;
	(*cnt)++;
	return 0;
}

static int sb_put(struct table *t, const void *p, size_t n, uint64_t *off)
{
	if (t->sb_len + n > t->sb_cap) {
		size_t cap = t->sb_cap ? t->sb_cap : 65536;
		unsigned char *nb;

		while (cap < t->sb_len + n)
			cap *= 2;
		if (!(nb = realloc(t->sb, cap)))
			return -ENOMEM;
		t->sb = nb;
		t->sb_cap = cap;
	}
	*off = t->sb_len;
	if (n)
		memcpy(t->sb + t->sb_len, p, n);
	t->sb_len += n;
	return 0;
}

/*
 * Commit buffer @seq, one table per call: -EAGAIN while tables remain
 * (busy() says so: the compactor polls again within a millisecond, after
 * the other workers' flushes had their turn), so that one worker's big
 * commit does not hold up the flushes of the others for longer than a
 * table's.  The last call publishes the version.  Calling again at once
 * instead of after the poll measured no different on q4 (RESULTS).
 */
int sfs__tbl_commit(struct sfs_target_writer *w, uint64_t seq)
{
	uint64_t t0 = sfs_now_ns();
	uint32_t sid;
	int rc = 0;

	if (w->commit_seq != seq) {
		w->commit_seq = seq;
		w->commit_ns = 0;
	}
	if (!w->in_commit) {
		pthread_mutex_lock(&w->commit_mu);
		w->in_commit = 1;
	}
	for (sid = 0; sid < SFS_MAX_STATES; sid++)
		if (w->t[sid] && (w->t[sid]->nrows || w->t[sid]->nclr))
			break;
	if (sid < SFS_MAX_STATES) {
		struct table *t = w->t[sid];

		if (pthread_mutex_trylock(&t->mu)) {
			/* held by a merge's pick or commit: the flush's only wait for it */
			uint64_t l0 = sfs_now_ns();

			pthread_mutex_lock(&t->mu);
			uatomic_add(&w->pub->tp_flush_wait_ns, sfs_now_ns() - l0);
		}
		if (!t->loaded)
			rc = sfs__tbl_table_load(t, 0);
		if (!rc && (w->knobs & SFS_TABLE_K_ROUND))
			rc = sfs__tbl_catch_up_rounds(w, t, &w->main_sc);
		if (!rc)
			rc = commit_table(w, t, seq);
		pthread_mutex_unlock(&t->mu);
		t0 = sfs_now_ns() - t0;
		w->commit_ns += t0;
		if (t0 > w->pub->tp_table_max_ns)
			sfs_store_relaxed(&w->pub->tp_table_max_ns, t0);
		t0 = sfs_now_ns();
		if (rc) {
			if (!w->failing)
				sfs_log("worker %u: commit of buffer seq %llu failed, will retry: %s",
					w->worker, (unsigned long long)seq, sfs_last_error());
			w->failing = 1;
			uatomic_inc(&w->pub->tp_errors);
			return rc;
		}
		w->more = 1;
		return -EAGAIN;
	}
	if (w->failing)
		sfs_log("worker %u: commit of buffer seq %llu succeeded again", w->worker,
			(unsigned long long)seq);
	w->failing = 0;
	w->more = 0;
	if (seq > w->applied)
		w->applied = seq;	/* a redone older buffer must not move the tag back */
	rc = sfs__tbl_publish(w);
	w->in_commit = 0;
	pthread_mutex_unlock(&w->commit_mu);
	t0 = w->commit_ns + (sfs_now_ns() - t0);
	uatomic_add(&w->pub->tp_commits, 1);
	uatomic_add(&w->pub->tp_commit_ns, t0);
	if (t0 > w->pub->tp_commit_max_ns)
		sfs_store_relaxed(&w->pub->tp_commit_max_ns, t0);
	return rc;
}

/* Data commit of @t's staged delta as a level-0 file, then (knob) the round. */
static int commit_table(struct sfs_target_writer *w, struct table *t, uint64_t seq)
{
	struct sfs_df_write_opts wo = { .codec = SFS_DF_LZ4, .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	sfs_df_writer_t *out = NULL;
	char name[SFS_TABLE_NAME], path[1024];
	struct sfs_mf_entry e;
	struct tfile *f;
	size_t written = 0;
	int rc = 0;

	if (t->watermark >= seq && t->snap) {
		sfs__tbl_stage_clear(t);	/* a redone buffer this table holds already */
		return 0;
	}
	if (!(w->knobs & SFS_TABLE_K_SESSION) && t->snap && (rc = sfs__tbl_table_load(t, 0)))
		return rc;	/* the ablation: the whole chain again, every commit */
	if (sfs__tbl_is_map_kind(t->kind))
		rc = map_diff(w, t);
	else
		sort_rows(t);
	if (rc)
		return rc;
	if (!t->nrows) {
		sfs__tbl_stage_clear(t);
		return 0;
	}
	sfs__tbl_new_name(name, t->sid, "sst");
	snprintf(path, sizeof(path), "%s/%s", t->dir, name);
	sfs__tbl_prefix_opts(t, &wo);
	if ((rc = sfs_df_writer_open(path, &wo, &out)))
		return rc;
	for (size_t i = 0; i < t->nrows && !rc; i++) {
		const struct srow *r = &t->rows[i];

		if (i && r->klen == t->rows[i - 1].klen &&
		    memcmp(sfs__tbl_sb_at(t, r->koff), sfs__tbl_sb_at(t, t->rows[i - 1].koff), r->klen) == 0)
			continue;	/* a key staged twice: the first (the buffer's) wins */
		rc = sfs_df_writer_add(out, sfs__tbl_sb_at(t, r->koff), r->klen, r->kind,
				       r->vlen ? sfs__tbl_sb_at(t, r->voff) : NULL, r->vlen);
		written++;
	}
	if (rc) {
		sfs_df_writer_abort(out);
		return rc;
	}
	if ((rc = sfs_df_writer_finish(out, NULL)))
		return rc;
	uatomic_add(&w->pub->tp_bytes_written, sfs__tbl_file_bytes(path));
	sfs_fault("table.datafile");
	if (!(f = sfs__tbl_file_add(t)))
		return -ENOMEM;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->level = 0;
	f->order = ++t->order;
	if ((rc = sfs__tbl_file_open(t, f))) {
		sfs__tbl_file_remove(t, t->nf - 1);
		return rc;
	}
	sfs__tbl_entry_of(f, SFS_MF_ADD, 0, &e);
	t->watermark = seq;
	if ((rc = sfs__tbl_table_commit(w, t, SFS_MF_DATA, &e, 1))) {
		sfs__tbl_table_recover(w, t, "data commit");
		return rc;
	}
	sfs_fault("table.datacommit");
	uatomic_add(&w->pub->tp_data_commits, 1);
	uatomic_add(&w->pub->tp_rows_written, t->nrows);
	if (w->knobs & SFS_TABLE_K_ROUND) {
		/* the data is durable: a failed round is redone at the next open or commit */
		rc = sfs__tbl_uplevel(w, t, t->nf - 1, &w->main_sc, written == t->nrows ? t->rows : NULL,
			     t->nrows);
		if (rc)
			sfs__tbl_table_recover(w, t, "up-levelling round");
	}
	sfs__tbl_stage_clear(t);
	return 0;
}

/*
 * Map and list state: the buffer's rows against the image the table
 * holds.  Clears become tombstones of the stored entries the buffer does
 * not write again; with the diff on, puts equal to the stored value and
 * removals of absent entries are dropped; with it off (the ablation) each
 * touched map is rewritten whole.
 */
static int map_diff(struct sfs_target_writer *w, struct table *t)
{
	struct tv_file *vf = malloc((t->nf + 1) * sizeof(*vf));
	size_t *map = malloc((t->nf + 1) * sizeof(*map));
	struct scratch *sc = &w->main_sc;
	size_t base = t->nrows, kept = 0;
	int nv, rc = 0, l0 = 0;

	if (!vf || !map) {
		free(vf);
		free(map);
		return -ENOMEM;
	}
	nv = sfs__tbl_lookup_view(t, NULL, vf, map, 0);
	for (int k = 0; k < nv; k++)
		l0 |= vf[k].level == 0;
	sfs_bump_reset(&sc->arena);
	sort_rows(t);
	/* prefixes to rewrite: the clears, and (diff off) every touched map */
	for (size_t c = 0; c < t->nclr + ((w->knobs & SFS_TABLE_K_MAP_DIFF) ? 0 : base) && !rc; c++) {
		unsigned char pfx[SFS_DF_KEY_MAX], key[SFS_DF_KEY_MAX];
		uint32_t plen;
		int is_clear = c < t->nclr;
		struct tv_row *rows = NULL;
		size_t nr = 0;

		/* copied: staging below may move the stage buffer */
		if (is_clear) {
			plen = t->clr[c].klen;
			memcpy(pfx, sfs__tbl_sb_at(t, t->clr[c].koff), plen);
		} else {
			const struct srow *r = &t->rows[c - t->nclr];

			plen = sfs_map_parent_len(sfs__tbl_sb_at(t, r->koff), r->klen) + 8;	/* parent | ns */
			if (plen > r->klen) {
				rc = sfs__err(SFS_ECORRUPT, "%s: a staged map key of %u bytes", t->dir,
					      r->klen);
				break;
			}
			memcpy(pfx, sfs__tbl_sb_at(t, r->koff), plen);
			if (c > t->nclr) {
				const struct srow *p = &t->rows[c - t->nclr - 1];

				if (p->klen >= plen && memcmp(sfs__tbl_sb_at(t, p->koff), pfx, plen) == 0)
					continue;	/* the same map as the row before */
			}
			if (cleared(t, pfx, plen))
				continue;	/* its clear tombstones what is not written again */
		}
		if ((rc = sfs__tv_prefix(vf, (unsigned)nv, pfx, plen, &sc->arena, &rows, &nr)))
			break;
		for (size_t k = 0; k < nr && !rc; k++) {
			if (plen + rows[k].klen > sizeof(key)) {
				rc = sfs__err(SFS_ECORRUPT, "%s: a stored key of %u bytes", t->dir,
					      plen + rows[k].klen);
				break;
			}
			memcpy(key, pfx, plen);
			memcpy(key + plen, rows[k].key, rows[k].klen);
			if (staged(t, key, plen + rows[k].klen, base))
				continue;
			/* a clear: tombstone; a whole-map rewrite: the same value again */
			rc = stage_raw(t, &t->rows, &t->nrows, &t->rows_cap, key, plen + rows[k].klen,
				       is_clear ? SFS_DF_DELETE : SFS_DF_PUT,
				       is_clear ? NULL : rows[k].val, is_clear ? 0 : rows[k].vlen);
			if (!rc) {
				t->rows[t->nrows - 1].old_file = rows[k].file >= 0 ?
					(int32_t)map[rows[k].file] : -1;
				t->rows[t->nrows - 1].old_pos = rows[k].pos;
			}
		}
		free(rows);
	}
	if (!rc && (w->knobs & SFS_TABLE_K_MAP_DIFF) && base) {
		/* one probe of the buffer's own rows: drop what would change
		 * nothing; rows of maps new to the table are not probed */
		size_t np = 0;

		uint64_t k0, p0;

		sfs__tbl_view_work(vf, nv, &k0, &p0);
		if (!(rc = sfs__tbl_scratch_grow(sc, base)))
			rc = probe_keys_of_known_maps(w, t, vf, (unsigned)nv, base, &np);
		if (!rc && np)
			rc = sfs__tv_probe(vf, (unsigned)nv, sc->pk, np, sc->pm, -1,
				      SFS_DF_PROBE_SEEK_SPARSE |
					      ((w->knobs & SFS_TABLE_K_HASH_IN) ? 0
										: SFS_DF_PROBE_PER_LITERAL),
				      &sc->arena, sc->pr, sc->sk, sc->pi, sc->ph);
		sfs__tbl_kf_note_diff(w, t, base, sfs__tbl_count_probe_work(w, vf, nv, k0, p0));
		/* spread the np results over the base rows, from the end (a
		 * probed row's result moves to an index >= its own) */
		for (size_t k = base; !rc && k-- > 0;)
			sc->pr[k] = t->rows[k].old_file == PRE_UNKNOWN ||
						    t->rows[k].old_file == PRE_KF_REJECTED
					    ? sc->pr[--np]
					    : (struct tv_res){ .state = 0, .file = -1 };
		for (size_t k = 0; !rc && k < base; k++) {
			const struct srow *r = &t->rows[k];
			const struct tv_res *p = &sc->pr[k];
			int same = r->kind == SFS_DF_DELETE ? p->state != 1
							    : p->state == 1 && p->vlen == r->vlen &&
								      memcmp(p->val, sfs__tbl_sb_at(t, r->voff),
									     r->vlen) == 0;

			if (r->old_file == PRE_KF_REJECTED && p->file >= 0 && vf[p->file].level > 0)
				uatomic_inc(&w->pub->tp_kfilter_wrong);
			if (same) {
				uatomic_add(&w->pub->tp_map_unchanged, 1);
				continue;
			}
			t->rows[kept] = *r;
			t->rows[kept].old_file = p->file >= 0 ? (int32_t)map[p->file] : -1;
			t->rows[kept++].old_pos = p->pos;
		}
		if (!rc) {
			memmove(&t->rows[kept], &t->rows[base], (t->nrows - base) * sizeof(*t->rows));
			t->nrows = kept + (t->nrows - base);
		}
	}
	free(vf);
	free(map);
	/* a level-0 hit hides whether a level >= 1 row is below it: the
	 * round must look for itself then */
	for (size_t k = 0; l0 && k < t->nrows; k++)
		t->rows[k].old_file = PRE_UNKNOWN;
	if (!rc)
		sort_rows(t);
	return rc;
}

/* The filter hash of staged row @k's key, its filter block loading. */
static uint64_t row_key_hash(const struct table *t, size_t k)
{
	uint64_t h = sfs_df_filter_hash(sfs__tbl_sb_at(t, t->rows[k].koff), t->rows[k].klen);

	sfs__tbl_kf_prefetch(t, h);
	return h;
}

/*
 * The keys of the first @base staged rows that the map diff must probe,
 * into sc->pk[0..*@np) with sc->pm[] the files that may hold them
 * (sfs__tv_probe asks only those), their rows marked old_file PRE_UNKNOWN;
 * the others are marked -1 (absent everywhere) and not probed:
 *  - a row whose key the table's key filter rejects is in no level >= 1
 *    file (table_kfilter.c): only the view's level-0 files are asked, by
 *    their prefix filters (usually there are none).  q9 and q20 write
 *    bids, nearly all new, into maps most files admit;
 *  - a row of a map (parent | namespace) that no file of the view
 *    @vf[0..nf) admits by its prefix filter: a map new to the table.  q4
 *    writes the bids of auctions born since the last barrier: nearly every
 *    row of its bids map is one.
 * First, per map, whether any file admits it (up to the first that does),
 * so a new map costs no key filter test.  Rows are sorted, so a map's rows
 * are adjacent: one hash and one prefix filter block per file per map
 * instead of per row, each mask computed at its first need.
 */
static int probe_keys_of_known_maps(struct sfs_target_writer *w, struct table *t,
				    const struct tv_file *vf, unsigned nf, size_t base, size_t *np)
{
	struct scratch *sc = &w->main_sc;
	const unsigned char *prev = NULL;
	uint32_t prev_len = 0;
	uint64_t pruned = 0, rejected = 0, admit = TV_ADMIT_ALL, admit_l0 = TV_ADMIT_ALL,
		 any = TV_ADMIT_ALL, ph = 0, kh[SFS_TBL_KF_AHEAD];
	int have = 0, have_l0 = 0, have_any = 0, kf;

	sfs__tbl_kf_maybe_empty(w, t);
	kf = t->kf.valid;
	*np = 0;
	/* each key's filter block starts loading SFS_TBL_KF_AHEAD rows ahead */
	for (size_t k = 0; kf && k < base && k < SFS_TBL_KF_AHEAD; k++)
		kh[k] = row_key_hash(t, k);
	for (size_t k = 0; k < base; k++) {
		struct srow *r = &t->rows[k];
		const unsigned char *key = sfs__tbl_sb_at(t, r->koff);
		uint32_t plen = sfs__table_map_prefix(key, r->klen);
		uint64_t m, h = 0;
		int rc, kf_rejects;

		if (kf) {
			h = kh[k % SFS_TBL_KF_AHEAD];
			if (k + SFS_TBL_KF_AHEAD < base)
				kh[k % SFS_TBL_KF_AHEAD] = row_key_hash(t, k + SFS_TBL_KF_AHEAD);
		}

		if (!plen) {
			have = have_l0 = have_any = 1;	/* no map prefix (not expected): probe it */
			admit = admit_l0 = any = TV_ADMIT_ALL;
			prev = NULL;
		} else if (!prev || plen != prev_len || memcmp(prev, key, plen)) {
			have = have_l0 = have_any = 0;	/* a new map */
			prev = key;
			prev_len = plen;
			ph = sfs_df_filter_hash(key, plen);
		}
		/* first whether any file admits the map (up to the first yes):
		 * a map new to the table costs no key filter test */
		if (!have_any && (rc = map_admitted(vf, nf, ph, MAP_ANY, &any)) < 0)
			return rc;
		have_any = 1;
		kf_rejects = any && kf && !sfs__tbl_kf_maybe(t, h);
		if (!any) {
			m = 0;
		} else if (kf_rejects && !w->kix_check) {
			if (!have_l0 && (rc = map_admitted(vf, nf, ph, MAP_L0, &admit_l0)) < 0)
				return rc;
			have_l0 = 1;
			m = admit_l0;
			rejected++;
		} else {
			if (!have && (rc = map_admitted(vf, nf, ph, MAP_ALL, &admit)) < 0)
				return rc;
			have = 1;
			m = admit;
		}
		if (!m) {
			r->old_file = -1;
			pruned++;
			continue;
		}
		/* the check (SFS_TABLE_KEY_INDEX_CHECK=1): probed as without
		 * the filter, a rejected key found at level >= 1 counted */
		r->old_file = kf_rejects ? PRE_KF_REJECTED : PRE_UNKNOWN;
		sc->pm[*np] = m;
		sc->pk[*np].p = key;
		sc->pk[(*np)++].len = r->klen;
	}
	if (pruned)
		uatomic_add(&w->pub->tp_map_pruned, pruned);
	if (rejected)
		uatomic_add(&w->pub->tp_kfilter_rejects, rejected);
	return 0;
}

/* Into *@admit, the files of @vf[0..nf) whose prefix filters admit the map
 * whose prefix hashes to @ph (hashed once per map): every file's answer (MAP_ALL; MAP_L0: of the level-0 files
 * only), the probe then asking only those files; or (MAP_ANY) up to the
 * first that admits it, nonzero if one does. */
static int map_admitted(const struct tv_file *vf, unsigned nf, uint64_t ph, int which,
			uint64_t *admit)
{
	*admit = 0;
	for (unsigned f = 0; f < nf; f++) {
		int rc;

		if (which == MAP_L0 && vf[f].level != 0)
			continue;
		if ((rc = sfs_df_prefix_maybe_h(vf[f].rd, SFS_TABLE_PFX_MAP, ph)) < 0)
			return rc;
		if (rc)
			*admit |= f < 64 ? 1ull << f : ~0ull << 63;
		if (rc && which == MAP_ANY)
			break;
	}
	return 0;
}

/* Did the buffer clear the map of prefix @pfx (parent | ns)? */
static int cleared(const struct table *t, const unsigned char *pfx, uint32_t plen)
{
	for (size_t c = 0; c < t->nclr; c++)
		if (t->clr[c].klen == plen && memcmp(sfs__tbl_sb_at(t, t->clr[c].koff), pfx, plen) == 0)
			return 1;
	return 0;
}

/* Is the encoded key @k staged?  (rows sorted) */
static int staged(struct table *t, const void *k, uint32_t klen, size_t nrows)
{
	size_t lo = 0, hi = nrows;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct srow *r = &t->rows[mid];
		int c = sfs_keycmp(sfs__tbl_sb_at(t, r->koff), r->klen, k, klen);

		if (!c)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static __thread const struct table *sort_t;	/* qsort has no context argument (per thread) */

/* Rows arrive in the buffer's order (key, then namespace), which is the
 * table's order whenever keys are not prefixes of one another and a map
 * has one namespace — nearly always: check in O(n) before sorting. */
static void sort_rows(struct table *t)
{
	size_t i;

	sort_t = t;
	for (i = 1; i < t->nrows && srow_cmp(&t->rows[i - 1], &t->rows[i]) < 0; i++)
		;
	if (i < t->nrows)
		qsort(t->rows, t->nrows, sizeof(*t->rows), srow_cmp);
}

static int srow_cmp(const void *x, const void *y)
{
	const struct srow *a = x, *b = y;
	int c = sfs_keycmp(sfs__tbl_sb_at(sort_t, a->koff), a->klen, sfs__tbl_sb_at(sort_t, b->koff), b->klen);

	if (c)
		return c;
	return a->ord < b->ord ? -1 : a->ord > b->ord;
}

void sfs__tbl_stage_clear(struct table *t)
{
	t->nrows = 0;
	t->nclr = 0;
	t->sb_len = 0;
}
