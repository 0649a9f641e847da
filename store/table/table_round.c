/*
 * table_round.c — the minimal round: a level-0 file up-levelled (step 3 of
 * a commit, table_write.c; at open and in the background for level-0
 * files left behind).
 *
 * The level-0 file of a data commit is up-levelled at once: its
 * keys are looked up in the table's level >= 1 files (the map diff's
 * lookups when it made them, else one batch probe per file, positions
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
	int rewrite, rc, nv;
	sfs_df_writer_t *out = NULL;
	sfs_df_iter_t *it = NULL;
	struct sfs_df_write_opts wo = { .codec = SFS_DF_LZ4, .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	struct tv_file *vf = malloc((t->nf + 1) * sizeof(*vf));
	size_t *map = malloc((t->nf + 1) * sizeof(*map));
	char oname[SFS_TABLE_NAME], path[1024];
	unsigned char *kb = NULL, *vb = NULL;
	struct { uint32_t koff, klen, voff, vlen; int kind; } *ch = NULL;
	uint64_t orows = 0, added = 0, g = 0, expired = 0, now = 0;
	int done = 0, from_pre, ttl = sfs__tbl_ttl_now(w, t, &now);

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
	if (!ch || (rc = sfs__tbl_scratch_grow(sc, ROUND_CHUNK)))
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
		if (from_pre) {
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
		for (size_t j = 0; j < n && !from_pre; j++)
			if (sc->pr[j].file >= 0)
				sc->pr[j].file = (int32_t)map[sc->pr[j].file];	/* view -> t->f */
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
	sfs_fault("table.round");
	uatomic_add(&w->pub->tp_rounds, 1);
	uatomic_add(&w->pub->tp_rows_masked, masked);
	if (expired)
		uatomic_add(&w->pub->tp_ttl_dropped, expired);
	uatomic_add(&w->pub->tp_round_ns, (sfs_now_ns() - t0));
	free(vf);
	free(map);
	free(ch);
	free(kb);
	free(vb);
	return 0;
fail_nomem:
	rc = -ENOMEM;
fail:
	sfs_df_iter_close(it);
	sfs_df_writer_abort(out);
	free(vf);
	free(map);
	free(ch);
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
