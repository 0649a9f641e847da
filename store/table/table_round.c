/*
 * table_round.c — the minimal round: a level-0 file up-levelled (step 3 of
 * a commit, table_write.c; at open and in the background for level-0
 * files left behind).
 *
 * The level-0 file of a data commit is up-levelled at once: its
 * keys are looked up in the table's level >= 1 files (the map diff's
 * lookups when it made them; for a value or counter table, its key index
 * (table_kindex.c): one file asked per key it holds, none for a new key;
 * else one batch probe per file, positions
 * only — values only for counters, whose deltas are folded over the
 * base here: the aggregation merge), every
 * superseded row gets a bit in its file's deletion vector, tombstones
 * vanish, and the rows become a level-1 file — the same file relabelled
 * when it holds puts only (no rewrite), else a rewrite of the delta.  One
 * snapshot (kind COMPACT) commits the relabel or rewrite and the new
 * deletion-vector index.  Cost: O(delta x log), never O(table) — except
 * the vector index, rewritten whole per round (vectors are small: runs
 * or bitmaps of superseded rows; a per-file index would make it
 * O(files touched)).  A level >= 1 file whose rows are all masked
 * leaves the table in the same commit.
 * The key index follows the commit: each key's entry moves to its row
 * in the new level-1 file, or leaves with a delete or an expired put.
 * After the round every file of the table is standalone-correct with its
 * vector applied: a read is a raw probe, no merge reader.  With the round
 * switched off (SFS_TABLE_ROUND=0: the "background only" ablation) step 3
 * runs on the background thread instead and readers merge level 0.
 *
 * Next on a key's path: table_session.c (the round's commit), then
 * table_publish.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fault.h"
#include "common/merge.h"
#include "shm/atomic.h"
#include "store/table/table_int.h"

#define ROUND_CHUNK 4096u     /* rows per batch probe of a round */

static int l0_has_expired(const struct table *t, sfs_df_reader_t *rd, const struct srow *pre,
			  size_t npre, uint64_t now);
static int known(const struct srow *r, size_t n, size_t left);
static int round_commit(struct sfs_target_writer *w, struct table *t, size_t i, int rewrite,
			const char *oname, uint64_t masked);

/* A round's use of the key index (table_kindex.c): per chunk, the keys'
 * hashes, the index's answers, and the updates the commit applies. */
struct kround {
	int on;                     /* the table keeps an index (valid or rebuilding) */
	uint64_t *h;                /* ROUND_CHUNK: the chunk's key hashes */
	struct sfs_df_key *pk;      /* ROUND_CHUNK: the keys the index names a file for */
	uint64_t *adm;              /* ... that file, as a view bit */
	uint32_t *back;             /* ... their places in the chunk */
	struct tv_res *pr, *res;    /* ROUND_CHUNK: the probe's answers; the chunk's */
	uint32_t *vfid;             /* per view file: its fid */
	struct kix_upd *u;
	size_t nu, ucap;
};

#define KIX_NEW UINT32_MAX          /* kix_upd.nfid: the round's new level-1 file */

static int kround_init(struct sfs_target_writer *w, struct table *t, struct kround *k,
		       const struct tv_file *vf, const size_t *map, int nv);
static void kround_free(struct kround *k);
static int kround_ask(struct sfs_target_writer *w, struct table *t, struct kround *k,
		      struct scratch *sc, const struct tv_file *vf, const size_t *map, int nv,
		      size_t n);
static int kround_note(struct kround *k, const struct table *t, const struct tv_res *r,
		       uint64_t h, int kept);
static void kround_compare(struct sfs_target_writer *w, const struct table *t,
			   const struct tv_res *ix, const struct tv_res *pr, size_t n);

/* Level-0 files left behind (a kill between data commit and round, a
 * failed round): up-level them, oldest first.  t->mu held. */
int sfs__tbl_catch_up_rounds(struct sfs_target_writer *w, struct table *t, struct scratch *sc)
{
	for (;;) {
		size_t oldest = SIZE_MAX;
		int rc;

		for (size_t i = 0; i < t->nf; i++)
			if (t->f[i].level == 0 && (oldest == SIZE_MAX ||
						   t->f[i].order < t->f[oldest].order))
				oldest = i;
		if (oldest == SIZE_MAX)
			return 0;
		if ((rc = sfs__tbl_uplevel(w, t, oldest, sc, NULL, 0))) {
			sfs__tbl_table_recover(w, t, "up-levelling round");
			return rc;
		}
	}
}

/*
 * Up-level level-0 file @t->f[@i] (t->mu held): mask the rows it supersedes
 * in the level >= 1 files, fold its counter deltas, drop its tombstones
 * and its expired puts (state TTL: a tombstone too), and commit it as
 * level 1 (relabelled, or rewritten when it holds more than live puts).  Older level-0 files must have been up-levelled first.
 * @pre (NULL: none): the staged rows the file was written from, in its
 * row order, with the map diff's lookups (struct srow's old_file).
 */
int sfs__tbl_uplevel(struct sfs_target_writer *w, struct table *t, size_t i, struct scratch *sc,
		     const struct srow *pre, size_t npre)
{
	struct tfile *f0 = &t->f[i];
	struct sfs_df_meta m;
	uint64_t t0 = sfs_now_ns(), masked = 0;
	int rewrite, rc, nv, ix;
	sfs_df_writer_t *out = NULL;
	sfs_df_iter_t *it = NULL;
	struct sfs_df_write_opts wo = { .codec = SFS_DF_LZ4, .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	struct tv_file *vf = malloc((t->nf + 1) * sizeof(*vf));
	size_t *map = malloc((t->nf + 1) * sizeof(*map));
	char oname[SFS_TABLE_NAME], path[1024];
	unsigned char *kb = NULL, *vb = NULL;
	struct { uint32_t koff, klen, voff, vlen; int kind; uint64_t pos; } *ch = NULL;
	uint64_t orows = 0, added = 0, g = 0, expired = 0, now = 0;
	int done = 0, from_pre, ttl = sfs__tbl_ttl_now(w, t, &now);
	struct kround kr = { 0 };
	uint32_t f0fid = f0->fid;
	uint64_t *kh = NULL;        /* a chunk's key hashes for the key filter (map tables) */

	if (!vf || !map) {
		free(vf);
		free(map);
		return -ENOMEM;
	}
	sfs_df_reader_meta(f0->rd, &m);
	rewrite = m.puts != m.rows;
	if (!rewrite && ttl && (rewrite = l0_has_expired(t, f0->rd, pre, npre, now)) < 0) {
		rc = rewrite;
		goto fail;
	}
	nv = sfs__tbl_lookup_view(t, f0, vf, map, 1);
	ch = malloc(ROUND_CHUNK * sizeof(*ch));
	if (sfs__tbl_kf_on(w, t) && (t->kf.valid || t->kf.building) &&
	    !(kh = malloc(ROUND_CHUNK * sizeof(*kh))))
		goto fail_nomem;
	if (!ch || (rc = sfs__tbl_scratch_grow(sc, ROUND_CHUNK)) ||
	    kround_init(w, t, &kr, vf, map, nv))
		goto fail_nomem;
	if ((rc = sfs_df_iter_range(f0->rd, NULL, 0, NULL, 0, NULL, 0, &it)))
		goto fail;
	if (rewrite) {
		sfs__tbl_new_name(oname, t->sid, "sst");
		snprintf(path, sizeof(path), "%s/%s", t->dir, oname);
		sfs__tbl_prefix_opts(t, &wo);
		if ((rc = sfs_df_writer_open(path, &wo, &out)))
			goto fail;
	}
	while (!done) {
		size_t n = 0, kl = 0, vl = 0, kcap = 0, vcap = 0;
		struct sfs_df_row row;

		/* a chunk of rows, copied (the iterator's pointers move) */
		while (n < ROUND_CHUNK && (rc = sfs_df_iter_next(it, &row)) == 1) {
			if (kl + row.klen > kcap) {
				unsigned char *nk = realloc(kb, kcap = (kl + row.klen) * 2 + 4096);

				if (!nk)
					goto fail_nomem;
				kb = nk;
			}
			if (vl + row.vlen > vcap) {
				unsigned char *nvb = realloc(vb, vcap = (vl + row.vlen) * 2 + 4096);

				if (!nvb)
					goto fail_nomem;
				vb = nvb;
			}
			memcpy(kb + kl, row.key, row.klen);
			if (row.vlen)
				memcpy(vb + vl, row.val, row.vlen);
			ch[n].koff = (uint32_t)kl;
			ch[n].klen = (uint32_t)row.klen;
			ch[n].voff = (uint32_t)vl;
			ch[n].vlen = (uint32_t)row.vlen;
			ch[n].kind = row.kind;
			ch[n].pos = row.pos;
			kl += row.klen;
			vl += row.vlen;
			n++;
		}
		if (rc < 0)
			goto fail;
		done = rc == 0;
		if (!n)
			break;
		for (size_t j = 0; j < n; j++) {
			sc->pk[j].p = kb + ch[j].koff;
			sc->pk[j].len = ch[j].klen;
		}
		sfs_bump_reset(&sc->arena);
		from_pre = pre && known(pre + g, n, npre - g);
		if (kh) {
			/* a map table's filter learns the keys reaching level 1
			 * before the commit (a failed round leaves extras) */
			size_t nh = 0;

			for (size_t j = 0; j < n; j++)
				if (ch[j].kind != SFS_DF_DELETE)
					kh[nh++] = sfs_df_filter_hash(sc->pk[j].p, sc->pk[j].len);
			sfs__tbl_kf_add(t, kh, nh);
		}
		for (size_t j = 0; kr.on && j < n; j++)
			kr.h[j] = sfs_df_filter_hash(sc->pk[j].p, sc->pk[j].len);
		ix = 0;
		if (!from_pre && kr.on && t->kix.valid) {
			uint64_t k0, p0;

			sfs__tbl_view_work(vf, nv, &k0, &p0);
			if ((rc = kround_ask(w, t, &kr, sc, vf, map, nv, n)) < 0)
				goto fail;
			sfs__tbl_count_probe_work(w, vf, nv, k0, p0);
			ix = rc == 0;	/* 1: the index was wrong (dropped): probe */
		}
		if (ix && !w->kix_check) {
			memcpy(sc->pr, kr.res, n * sizeof(*sc->pr));
			rc = 0;
		} else if (from_pre) {
			/* the map diff looked these keys up a moment ago (same files,
			 * same lock): no second probe */
			for (size_t j = 0; j < n; j++) {
				sc->pr[j].state = pre[g + j].old_file >= 0;
				sc->pr[j].file = pre[g + j].old_file;
				sc->pr[j].pos = pre[g + j].old_pos;
			}
			rc = 0;
		} else {
			uint64_t k0, p0;

			sfs__tbl_view_work(vf, nv, &k0, &p0);
			rc = sfs__tv_probe(vf, (unsigned)nv, sc->pk, n, NULL, t->merge,
			      (t->merge >= 0 ? 0 : SFS_DF_PROBE_NO_VALUES) |
				      SFS_DF_PROBE_SEEK_SPARSE |
				      ((w->knobs & SFS_TABLE_K_HASH_IN) ? 0 : SFS_DF_PROBE_PER_LITERAL),
			      &sc->arena, sc->pr, sc->sk, sc->pi, sc->ph);
			sfs__tbl_count_probe_work(w, vf, nv, k0, p0);
		}
		if (rc)
			goto fail;
		for (size_t j = 0; j < n && !from_pre && !(ix && !w->kix_check); j++)
			if (sc->pr[j].file >= 0)
				sc->pr[j].file = (int32_t)map[sc->pr[j].file];	/* view -> t->f */
		if (ix && w->kix_check)
			kround_compare(w, t, kr.res, sc->pr, n);
		g += n;
		for (size_t j = 0; j < n; j++) {
			struct tv_res *r = &sc->pr[j];
			const unsigned char *v = vb + ch[j].voff;
			uint32_t vlen = ch[j].vlen;
			int64_t folded;

			if (r->file >= 0) {
				if ((rc = sfs__tbl_dv_set_bit(&t->f[r->file], r->pos)))
					goto fail;
				masked++;
			}
			/* the key's entry: to the round's new file, or gone */
			if (kr.on && (rc = kround_note(&kr, t, r, kr.h[j],
						      ch[j].kind != SFS_DF_DELETE &&
						      (!out || !ttl ||
						       !sfs__tbl_ttl_drops(ch[j].kind, v, vlen, now)))))
				goto fail;
			if (ch[j].kind == SFS_DF_DELETE || !out)
				continue;
			if (ttl && sfs__tbl_ttl_drops(ch[j].kind, v, vlen, now)) {
				expired++;	/* a delete: masked what it supersedes, not kept */
				continue;
			}
			if (ch[j].kind == SFS_DF_MERGE) {
				folded = sfs_df_merge_delta(v);
				if (r->state == 1 && r->vlen == 8 && t->merge >= 0) {
					int64_t base;

					memcpy(&base, r->val, 8);
					folded = sfs_merge_i64((unsigned)t->merge, base, folded);
				}
				v = (const unsigned char *)&folded;
				vlen = 8;
			}
			if ((rc = sfs_df_writer_add(out, kb + ch[j].koff, ch[j].klen, SFS_DF_PUT, v,
						    vlen)))
				goto fail;
			added++;
		}
	}
	sfs_df_iter_close(it);
	it = NULL;
	if (out && added == 0) {
		sfs_df_writer_abort(out);	/* only tombstones: nothing to keep */
		out = NULL;
	} else if (out) {
		rc = sfs_df_writer_finish(out, &orows);
		out = NULL;
		if (rc)
			goto fail;
		uatomic_add(&w->pub->tp_bytes_written, sfs__tbl_file_bytes(path));
		sfs_fault("table.roundfile");
	}
	rc = round_commit(w, t, i, rewrite, orows ? oname : NULL, masked);
	if (rc)
		goto fail;
	if (kr.on) {
		/* the index follows the commit: the relabelled file keeps its
		 * fid, a rewrite is found by name */
		uint32_t nfid = rewrite ? 0 : f0fid;

		for (size_t k = 0; rewrite && orows && k < t->nf; k++)
			if (strcmp(t->f[k].name, oname) == 0)
				nfid = t->f[k].fid;
		for (size_t k = 0; k < kr.nu; k++)
			if (kr.u[k].nfid == KIX_NEW)
				kr.u[k].nfid = nfid;
		sfs__tbl_kix_commit(w, t, kr.u, kr.nu);
	}
	sfs_fault("table.round");
	uatomic_add(&w->pub->tp_rounds, 1);
	uatomic_add(&w->pub->tp_rows_masked, masked);
	if (expired)
		uatomic_add(&w->pub->tp_ttl_dropped, expired);
	uatomic_add(&w->pub->tp_round_ns, (sfs_now_ns() - t0));
	kround_free(&kr);
	free(vf);
	free(map);
	free(ch);
	free(kh);
	free(kb);
	free(vb);
	return 0;
fail_nomem:
	rc = -ENOMEM;
fail:
	if (kr.on)
		sfs__tbl_kix_invalidate(t);	/* the vectors may be ahead: the caller reloads */
	kround_free(&kr);
	sfs_df_iter_close(it);
	sfs_df_writer_abort(out);
	free(vf);
	free(map);
	free(ch);
	free(kh);
	free(kb);
	free(vb);
	return rc;
}

/* Whether level-0 file @f0 of @t holds a put expired at @now: 1, 0, or < 0
 * (a read error).  From the staged rows @pre (its rows, in memory) when
 * given, else one pass over the file (a round after a restart or in the
 * background: rare, and the file is one buffer's delta). */
static int l0_has_expired(const struct table *t, sfs_df_reader_t *rd, const struct srow *pre,
			  size_t npre, uint64_t now)
{
	sfs_df_iter_t *it = NULL;
	struct sfs_df_row row;
	int rc;

	if (pre) {
		for (size_t j = 0; j < npre; j++)
			if (sfs__tbl_ttl_drops(pre[j].kind, pre[j].vlen ? sfs__tbl_sb_at(t, pre[j].voff) : NULL,
				      pre[j].vlen, now))
				return 1;
		return 0;
	}
	if ((rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it)))
		return rc;
	while ((rc = sfs_df_iter_next(it, &row)) == 1 && !sfs__tbl_ttl_drops(row.kind, row.val, row.vlen, now))
		;
	sfs_df_iter_close(it);
	return rc;
}

/* Did the map diff look up all of @n rows (@left staged rows remain)? */
static int known(const struct srow *r, size_t n, size_t left)
{
	if (n > left)
		return 0;
	for (size_t j = 0; j < n; j++)
		if (r[j].old_file == PRE_UNKNOWN)
			return 0;
	return 1;
}

/* The round's commit: level-0 file @i leaves (rewritten into @oname, or
 * relabelled when !@rewrite). */
static int round_commit(struct sfs_target_writer *w, struct table *t, size_t i, int rewrite,
			const char *oname, uint64_t masked)
{
	size_t gone = i;

	if (!rewrite)
		return sfs__tbl_set_commit(w, t, NULL, 0, NULL, 0, (long)i, masked != 0, NULL, 0);
	return sfs__tbl_set_commit(w, t, &gone, 1, oname, 1, -1, masked != 0, NULL, 0);
}

/*
 * The key index's part of a round of @t (t->mu held): a value or counter
 * table with the knob on keeps its index; an invalid one with no level >= 1
 * file is empty, valid at once; without a background thread (a writer
 * driven by hand) it is rebuilt here, at first need.
 */
static int kround_init(struct sfs_target_writer *w, struct table *t, struct kround *k,
		       const struct tv_file *vf, const size_t *map, int nv)
{
	(void)vf;
	if (!sfs__tbl_kix_on(w, t))
		return 0;
	if (!t->kix.valid && !t->kix.building) {
		sfs__tbl_kix_maybe_empty(w, t);
		if (!t->kix.valid && !w->bg_on && sfs__tbl_kix_rebuild(w, t, 1) < 0)
			sfs__tbl_kix_invalidate(t);	/* probe this time; retried next round */
	}
	k->on = t->kix.valid || t->kix.building;
	if (!k->on)
		return 0;
	k->h = malloc(ROUND_CHUNK * sizeof(*k->h));
	k->pk = malloc(ROUND_CHUNK * sizeof(*k->pk));
	k->adm = malloc(ROUND_CHUNK * sizeof(*k->adm));
	k->back = malloc(ROUND_CHUNK * sizeof(*k->back));
	k->pr = malloc(ROUND_CHUNK * sizeof(*k->pr));
	k->res = malloc(ROUND_CHUNK * sizeof(*k->res));
	k->vfid = malloc((size_t)(nv + 1) * sizeof(*k->vfid));
	if (!k->h || !k->pk || !k->adm || !k->back || !k->pr || !k->res || !k->vfid)
		return -ENOMEM;
	for (int v = 0; v < nv; v++)
		k->vfid[v] = t->f[map[v]].fid;
	return 0;
}

static void kround_free(struct kround *k)
{
	free(k->h);
	free(k->pk);
	free(k->adm);
	free(k->back);
	free(k->pr);
	free(k->res);
	free(k->vfid);
	free(k->u);
	memset(k, 0, sizeof(*k));
}

/*
 * The chunk's sc->pk[0..n) asked of the index: a key with no entry of its
 * hash is absent (no file asked); the others are probed in the files their
 * entries name only — the probe, by the key's bytes, confirms (and reads a
 * counter's base): found at an entry's row is the answer, not found is a
 * hash collision (absent).  Answers into k->res (t->f indexes).  0, 1 if
 * the index proved wrong (dropped: the caller probes every file), < 0 an
 * error.
 */
static int kround_ask(struct sfs_target_writer *w, struct table *t, struct kround *k,
		      struct scratch *sc, const struct tv_file *vf, const size_t *map, int nv,
		      size_t n)
{
	size_t m = 0;
	uint64_t hits = 0;
	int rc;

	for (size_t j = 0; j < n; j++) {
		uint32_t cs[4];
		unsigned nc;
		uint64_t adm = 0;

		if (j + KIX_AHEAD < n)
			sfs__kix_prefetch(&t->kix, k->h[j + KIX_AHEAD]);
		nc = sfs__kix_cands(&t->kix, k->h[j], cs, 4);

		k->res[j] = (struct tv_res){ .state = 0, .file = -1 };
		if (!nc)
			continue;
		if (nc > 4)
			return 1;	/* 5 keys of one 64-bit hash: not worth a case */
		for (unsigned c = 0; c < nc; c++) {
			int v = 0;

			while (v < nv && k->vfid[v] != cs[c])
				v++;
			if (v == nv)
				goto broken;	/* names a file the table has not */
			adm |= v < 64 ? 1ull << v : 0;	/* 64..: always asked */
		}
		k->pk[m] = sc->pk[j];
		k->adm[m] = adm;
		k->back[m++] = (uint32_t)j;
	}
	uatomic_add(&w->pub->tp_index_asked, n);
	if (!m)
		return 0;
	rc = sfs__tv_probe(vf, (unsigned)nv, k->pk, m, k->adm, t->merge,
			   (t->merge >= 0 ? 0 : SFS_DF_PROBE_NO_VALUES) | SFS_DF_PROBE_SEEK_SPARSE |
				   ((w->knobs & SFS_TABLE_K_HASH_IN) ? 0 : SFS_DF_PROBE_PER_LITERAL),
			   &sc->arena, k->pr, sc->sk, sc->pi, sc->ph);
	if (rc)
		return rc;
	for (size_t i = 0; i < m; i++) {
		struct tv_res *r = &k->pr[i];
		uint32_t j = k->back[i];

		if (r->state != 1)
			continue;	/* a collision: the key is in no file */
		if (sfs__kix_find(&t->kix, k->h[j], k->vfid[r->file]) < 0)
			goto broken;	/* live in a file the index does not name */
		k->res[j] = *r;
		k->res[j].file = (int32_t)map[r->file];
		hits++;
	}
	uatomic_add(&w->pub->tp_index_hits, hits);
	return 0;
broken:
	uatomic_inc(&w->pub->tp_index_broken);
	sfs__tbl_kix_invalidate(t);
	return 1;
}

/* The key's index change: from the file of its superseded row @r (t->f
 * index) to the round's new file when @kept (else the key leaves). */
static int kround_note(struct kround *k, const struct table *t, const struct tv_res *r,
		       uint64_t h, int kept)
{
	struct kix_upd u = { .h = h };

	if (r->file >= 0)
		u.ofid = t->f[r->file].fid;
	if (kept)
		u.nfid = KIX_NEW;
	if (!u.ofid && !u.nfid)
		return 0;
	if (k->nu == k->ucap) {
		size_t cap = k->ucap ? 2 * k->ucap : 1024;
		struct kix_upd *nu = realloc(k->u, cap * sizeof(*nu));

		if (!nu)
			return -ENOMEM;
		k->u = nu;
		k->ucap = cap;
	}
	k->u[k->nu++] = u;
	return 0;
}

/* SFS_TABLE_KEY_INDEX_CHECK=1: the index's answers @ix against the full
 * probe's @pr (both t->f indexes), every difference counted. */
static void kround_compare(struct sfs_target_writer *w, const struct table *t,
			   const struct tv_res *ix, const struct tv_res *pr, size_t n)
{
	uint64_t bad = 0;

	for (size_t j = 0; j < n; j++) {
		int a = ix[j].state == 1, b = pr[j].state == 1;

		if (a != b || (a && (ix[j].file != pr[j].file || ix[j].pos != pr[j].pos)) ||
		    (a && t->merge >= 0 && (ix[j].vlen != pr[j].vlen ||
					   (ix[j].vlen && memcmp(ix[j].val, pr[j].val, ix[j].vlen)))))
			bad++;
	}
	if (bad)
		uatomic_add(&w->pub->tp_index_mismatch, bad);
}
