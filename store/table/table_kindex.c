/*
 * table_kindex.c — the key index of a value or counter table: an exact,
 * in-memory key -> file map of the table's live level >= 1 rows,
 * process-local to the compactor (the writer's), so a round asks one place
 * per key instead of batch-probing every level >= 1 file (table_round.c).
 *
 * Why: a round must find, for each key of its level-0 file, the one live
 * row the key supersedes (to mask it; for counters, to fold over its
 * value).  Probing every file makes keys asked per row written grow with
 * the file count (q18 7.8 -> 36.7 from 2M to 100M events).  With the index
 * a key the table never held costs one hash lookup and no file, and a key
 * it holds costs one probe of the one file the index names (its page: the
 * confirmation, and a counter's base).
 *
 * Layout: open addressing, linear probing, backward-shift deletion; a slot
 * is {64-bit key hash (sfs_df_filter_hash), stable file id (struct tfile's
 * fid, never an index into t->f, which shifts)}: 12 bytes, packed.  Load
 * factor at most 0.8, capacity a power of two: 15 to 30 bytes per key
 * (~20 on average).  No row: the round's probe of the named file finds
 * it (by the key's bytes), and a merge then moves a file's entries in
 * O(1) — a forward from each input fid to the output's (kix_fid_now)
 * instead of a rewrite of every merged row's entry, which at 100M held
 * the flush up for seconds (q18: table_flush_wait_ms 2.9 s) and cost a
 * random hash-table update per merged row.  Why the hash alone is not
 * enough: two of 27M keys share a 64-bit hash with probability ~2e-5 per
 * table, and a collision taken for a match would mask another key's row —
 * silent data loss.  So
 * the index is a multimap of hashes and every hit is confirmed by a probe
 * of the named file restricted to that key (the probe answers by the key's
 * bytes, with the vector applied): a key found in a file no candidate
 * names, or a candidate file the table no longer has, means the index is
 * wrong — it is invalidated (counted: tp_index_broken) and the round falls
 * back to probing every file.  A key whose candidates' files do not hold
 * it is a collision: absent, exact.  Two keys of one hash in one file are
 * two equal entries: a multiset, whichever of them an update takes.
 *
 * Exactness across changes of the file set: a round applies its updates
 * after its commit (moves to the new level-1 file, removals of deleted and
 * expired keys, inserts); a shaping merge's commit forwards each input's
 * fid to its output's (sfs__tbl_kix_merged: O(inputs); its expired rows'
 * entries leave), every row of an input that has an entry left being in
 * the output (a row masked before the merge read it had its entry moved
 * by the round that masked it); entries are read through the forwards
 * (kix_fid_now, which shortens the chains it walks) and rewritten to the
 * live fid when an update touches them;
 * files leaving wholly masked have no entries left; anything else — a
 * reload after a failure, a rollback or reset, the open — drops the table's
 * files (sfs__tbl_table_drop_files), which invalidates the index, and so
 * does a TTL state's whole-file drop (table_merge.c: the dropped file's
 * keys are not known without reading it).  An
 * invalid index is rebuilt by the background thread from the level >= 1
 * files' keys with their vectors applied (sfs__tbl_kix_rebuild), reading
 * without the lock while rounds journal their updates, replayed at the end
 * under the lock; without a background thread (a writer driven by hand) the
 * round rebuilds it at first need.  SFS_TABLE_KEY_INDEX=0 switches it off
 * (the ablation: every round probes every file).  SFS_TABLE_KEY_INDEX_CHECK=1
 * (tests) runs the full probe beside the index and counts every difference
 * (tp_index_mismatch), taking the probe's answer.
 *
 * Cost: 12 bytes per slot (in huge pages from 2 MiB: common/hugemem.h),
 * 4 per fid the table ever gave while the index is valid (the forwards);
 * the rebuild reads every live level >= 1 row's key once
 * (tp_index_rebuild_ns / tp_index_rebuild_keys).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hugemem.h"
#include "shm/atomic.h"
#include "store/table/table_int.h"

#define KIX_MIN_CAP 1024u
#define KIX_JOURNAL_MAX (64u << 20) /* journal entries of one rebuild before it gives up */
#define REBUILD_BATCH 64u

static void kix_publish(struct sfs_target_writer *w, struct kix *x)
{
	uint64_t keys = x->valid ? x->n : 0,
		 bytes = (x->s ? (x->mask + 1) * sizeof(*x->s) : 0) + x->nfwd * sizeof(*x->fwd);

	if (!w || !w->pub)
		return;
	uatomic_add(&w->pub->tp_index_keys, keys - x->pub_keys);
	uatomic_add(&w->pub->tp_index_bytes, bytes - x->pub_bytes);
	x->pub_keys = keys;
	x->pub_bytes = bytes;
}

static int kix_grow(struct kix *x, size_t cap)
{
	struct kix_slot *s = sfs_huge_calloc(cap, sizeof(*s)), *old = x->s;
	size_t ocap = old ? x->mask + 1 : 0;

	if (!s)
		return -ENOMEM;
	x->s = s;
	x->mask = cap - 1;
	for (size_t i = 0; i < ocap; i++) {
		if (i + KIX_AHEAD < ocap && old[i + KIX_AHEAD].fid)
			sfs__kix_prefetch(x, old[i + KIX_AHEAD].h);
		if (old[i].fid) {
			size_t j = sfs__kix_home(x, old[i].h);

			while (s[j].fid)
				j = (j + 1) & x->mask;
			s[j] = old[i];
		}
	}
	free(old);
	return 0;
}

int sfs__kix_put(struct kix *x, uint64_t h, uint32_t fid)
{
	size_t j;
	int rc;

	if (!x->s || (x->n + 1) * 5 > (x->mask + 1) * 4) {
		size_t cap = x->s ? (x->mask + 1) * 2 : KIX_MIN_CAP;

		if ((rc = kix_grow(x, cap)))
			return rc;
	}
	j = sfs__kix_home(x, h);
	while (x->s[j].fid)
		j = (j + 1) & x->mask;
	x->s[j] = (struct kix_slot){ .h = h, .fid = fid };
	x->n++;
	return 0;
}

/* The live fid an entry naming @fid means: @fid, or where the merges that
 * took it forwarded it (KIX_FID_GONE: a merge wrote none of its rows;
 * nothing should name it).  Chains walked are shortened to their end, so
 * each forward is walked about once. */
static uint32_t kix_fid_now(const struct kix *x, uint32_t fid)
{
	uint32_t f = fid, end;

	if (fid >= x->nfwd || !x->fwd[fid])
		return fid;
	while (f < x->nfwd && x->fwd[f] && x->fwd[f] != KIX_FID_GONE)
		f = x->fwd[f];
	end = f < x->nfwd && x->fwd[f] == KIX_FID_GONE ? KIX_FID_GONE : f;
	for (uint32_t g = fid; g != end && g < x->nfwd && x->fwd[g] && x->fwd[g] != KIX_FID_GONE;) {
		uint32_t next = x->fwd[g];

		x->fwd[g] = end;
		g = next;
	}
	return end;
}

/* A slot for hash @h whose entry means file @fid (kix_fid_now). */
long sfs__kix_find(const struct kix *x, uint64_t h, uint32_t fid)
{
	if (!x->s)
		return -1;
	for (size_t j = sfs__kix_home(x, h); x->s[j].fid; j = (j + 1) & x->mask)
		if (x->s[j].h == h && kix_fid_now(x, x->s[j].fid) == fid)
			return (long)j;
	return -1;
}

unsigned sfs__kix_cands(const struct kix *x, uint64_t h, uint32_t *fids, unsigned max)
{
	unsigned n = 0;

	if (!x->s)
		return 0;
	for (size_t j = sfs__kix_home(x, h); x->s[j].fid; j = (j + 1) & x->mask)
		if (x->s[j].h == h) {
			uint32_t f = kix_fid_now(x, x->s[j].fid);

			if (f == KIX_FID_GONE)
				continue;
			if (n < max)
				fids[n] = f;
			n++;
		}
	return n;
}

/* Remove slot @i: backward shift (linear probing keeps no tombstones). */
static void kix_del_at(struct kix *x, size_t i)
{
	size_t j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & x->mask;
		if (!x->s[j].fid)
			break;
		k = sfs__kix_home(x, x->s[j].h);
		/* the entry at j stays if its home lies cyclically in (i, j] */
		if (((j - k) & x->mask) < ((j - i) & x->mask))
			continue;
		x->s[i] = x->s[j];
		i = j;
	}
	x->s[i].fid = 0;
	x->n--;
}

/* One update (struct kix_upd).  @strict: the old entry must be there. */
static int kix_apply1(struct kix *x, const struct kix_upd *u, int strict)
{
	if (u->ofid) {
		long i = sfs__kix_find(x, u->h, u->ofid);

		if (i < 0)
			return strict ? -1 : 0;
		if (u->nfid)
			x->s[i].fid = u->nfid;
		else
			kix_del_at(x, (size_t)i);
		return 0;
	}
	return u->nfid ? sfs__kix_put(x, u->h, u->nfid) : 0;
}

void sfs__tbl_kix_invalidate(struct table *t)
{
	struct kix *x = &t->kix;

	free(x->s);
	x->s = NULL;
	x->mask = 0;
	x->n = 0;
	x->valid = 0;
	x->building = 0;	/* a rebuild under way sees t->loads move and gives up */
	free(x->jr);
	x->jr = NULL;
	x->njr = x->jrcap = 0;
	x->jr_lost = 0;
	free(x->fwd);
	x->fwd = NULL;
	x->nfwd = 0;
}

/* At close: the gauges keep their last figures (a run's summary, read
 * after the compactor has closed, shows the index's final size). */
void sfs__tbl_kix_free(struct sfs_target_writer *w, struct table *t)
{
	(void)w;
	sfs__tbl_kix_invalidate(t);
}

int sfs__tbl_kix_on(const struct sfs_target_writer *w, const struct table *t)
{
	return (w->knobs & SFS_TABLE_K_KEY_INDEX) && !sfs__tbl_is_map_kind(t->kind);
}

/* A table with no level >= 1 file: its index is empty, valid at once. */
void sfs__tbl_kix_maybe_empty(struct sfs_target_writer *w, struct table *t)
{
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level > 0)
			return;
	if (t->kix.valid)
		return;
	sfs__tbl_kix_invalidate(t);
	t->kix.valid = 1;
	kix_publish(w, &t->kix);
}

/*
 * The updates of one committed round (t->mu held): applied when the index
 * is valid (strictly: an update whose old entry is missing means the index
 * was wrong: invalidated), journalled while a rebuild is under way.
 */
void sfs__tbl_kix_commit(struct sfs_target_writer *w, struct table *t, const struct kix_upd *u,
			 size_t n)
{
	struct kix *x = &t->kix;
	uint64_t t0 = sfs_now_ns();

	if (x->valid) {
		for (size_t i = 0; i < n; i++) {
			if (i + KIX_AHEAD < n)
				sfs__kix_prefetch(x, u[i + KIX_AHEAD].h);
			if (kix_apply1(x, &u[i], 1)) {
				uatomic_inc(&w->pub->tp_index_broken);
				sfs__tbl_kix_invalidate(t);
				break;
			}
		}
	} else if (x->building && !x->jr_lost) {
		if (x->njr + n > x->jrcap) {
			size_t cap = (x->njr + n) * 2;
			struct kix_upd *nj = cap <= KIX_JOURNAL_MAX ? realloc(x->jr, cap * sizeof(*nj)) : NULL;

			if (!nj) {
				x->jr_lost = 1;	/* the rebuild gives up; the next one retries */
				goto out;
			}
			x->jr = nj;
			x->jrcap = cap;
		}
		memcpy(x->jr + x->njr, u, n * sizeof(*u));
		x->njr += n;
	}
out:
	kix_publish(w, x);
	uatomic_add(&w->pub->tp_index_ns, sfs_now_ns() - t0);
}

/*
 * A shaping merge committed (t->mu held): the rows of input files
 * @ifid[0..n) that it wrote are in file @ofid (0: it wrote none); the
 * expired rows @ex[0..nex) (their hashes and input fids) leave.  Every
 * other entry naming an input is of a row the merge wrote (see the top),
 * so it now means @ofid: a forward per input, O(n + nex).
 */
void sfs__tbl_kix_merged(struct sfs_target_writer *w, struct table *t, unsigned n,
			 const uint32_t *ifid, uint32_t ofid, const struct kix_upd *ex, size_t nex)
{
	struct kix *x = &t->kix;
	uint64_t t0 = sfs_now_ns();

	if (!x->valid)
		return;
	for (size_t i = 0; i < nex; i++)
		kix_apply1(x, &ex[i], 0);
	for (unsigned k = 0; k < n; k++) {
		if (ifid[k] >= x->nfwd) {
			size_t cap = (size_t)(t->fids > ifid[k] ? t->fids : ifid[k]) + 64;
			uint32_t *nf = realloc(x->fwd, cap * sizeof(*nf));

			if (!nf) {
				sfs__tbl_kix_invalidate(t);	/* rebuilt by the background */
				return;
			}
			memset(nf + x->nfwd, 0, (cap - x->nfwd) * sizeof(*nf));
			x->fwd = nf;
			x->nfwd = (uint32_t)cap;
		}
		x->fwd[ifid[k]] = ofid ? ofid : KIX_FID_GONE;
	}
	kix_publish(w, x);
	uatomic_add(&w->pub->tp_index_ns, sfs_now_ns() - t0);
}

struct rb_file {
	char name[SFS_TABLE_NAME];
	uint32_t fid;
	uint64_t *dv;
	size_t dv_words;
};

/*
 * Rebuild @t's invalid index from its level >= 1 files' keys, vectors
 * applied: the set and the vectors copied under t->mu, the files read
 * without it (own readers), the rounds' updates meanwhile journalled and
 * replayed at the end under the lock.  Gives up (0, still invalid) when
 * the table was reloaded meanwhile or the journal overflowed.  With
 * @locked the caller holds t->mu throughout (a round's first need, no
 * background thread).  1 if rebuilt, 0 if not, < 0 error.
 */
int sfs__tbl_kix_rebuild(struct sfs_target_writer *w, struct table *t, int locked)
{
	struct kix nx = { 0 };
	struct rb_file *rf = NULL;
	size_t nrf = 0;
	uint64_t loads, t0 = sfs_now_ns(), keys = 0;
	int rc = 0;
	char path[1024];

	if (!locked)
		pthread_mutex_lock(&t->mu);
	if (t->kix.valid || t->kix.building || !t->loaded || !sfs__tbl_kix_on(w, t)) {
		if (!locked)
			pthread_mutex_unlock(&t->mu);
		return 0;
	}
	loads = t->loads;
	if (!(rf = calloc(t->nf + 1, sizeof(*rf))))
		rc = -ENOMEM;
	for (size_t i = 0; i < t->nf && !rc; i++) {
		struct tfile *f = &t->f[i];
		struct rb_file *r = &rf[nrf];

		if (f->level == 0)
			continue;
		if (f->rows > UINT32_MAX) {
			rc = -EOVERFLOW;
			break;
		}
		memcpy(r->name, f->name, sizeof(r->name));
		r->fid = f->fid;
		r->dv_words = f->dv ? f->dv_words : 0;
		if (f->dv && !(r->dv = malloc(f->dv_words * 8 + 8)))
			rc = -ENOMEM;
		else if (f->dv)
			memcpy(r->dv, f->dv, f->dv_words * 8);
		nrf++;
	}
	if (!rc) {
		t->kix.building = 1;
		t->kix.njr = 0;
		t->kix.jr_lost = 0;
	}
	if (!locked)
		pthread_mutex_unlock(&t->mu);
	for (size_t k = 0; k < nrf && !rc; k++) {
		sfs_df_reader_t *rd = NULL;
		sfs_df_iter_t *it = NULL;
		struct sfs_df_row row;

		snprintf(path, sizeof(path), "%s/%s", t->dir, rf[k].name);
		if (!(rc = sfs_df_reader_open(path, NULL, &rd)) &&
		    !(rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, rf[k].dv, rf[k].dv_words, &it)))
			sfs_df_iter_keys_only(it);
		/* the rows' hashes a batch at a time: their slots load together */
		while (!rc) {
			uint64_t bh[REBUILD_BATCH];
			unsigned nb = 0;

			while (nb < REBUILD_BATCH && (rc = sfs_df_iter_next(it, &row)) == 1) {
				bh[nb] = sfs_df_filter_hash(row.key, row.klen);
				sfs__kix_prefetch(&nx, bh[nb++]);
			}
			if (rc > 0)
				rc = 0;
			for (unsigned i = 0; i < nb && rc >= 0; i++)
				rc = sfs__kix_put(&nx, bh[i], rf[k].fid);
			keys += nb;
			if (!rc && !locked && sfs_load_relaxed(&w->stop))
				rc = -ECANCELED;
			if (nb < REBUILD_BATCH)
				break;	/* the file's end (or an error) */
		}
		sfs_df_iter_close(it);
		sfs_df_reader_close(rd);
	}
	if (!locked)
		pthread_mutex_lock(&t->mu);
	if (t->loads != loads || (!rc && (!t->kix.building || t->kix.jr_lost)))
		rc = -ECANCELED;	/* reloaded (its files may be gone), or too much
					 * happened meanwhile */
	for (size_t i = 0; !rc && i < t->kix.njr; i++)
		if (kix_apply1(&nx, &t->kix.jr[i], 1)) {
			uatomic_inc(&w->pub->tp_index_broken);
			rc = -ECANCELED;
		}
	if (!rc) {
		sfs__tbl_kix_invalidate(t);
		t->kix.s = nx.s;
		t->kix.mask = nx.mask;
		t->kix.n = nx.n;
		t->kix.valid = 1;
		nx.s = NULL;
		uatomic_inc(&w->pub->tp_index_rebuilds);
		uatomic_add(&w->pub->tp_index_rebuild_keys, keys);
		uatomic_add(&w->pub->tp_index_rebuild_ns, sfs_now_ns() - t0);
	} else if (t->loads == loads) {
		t->kix.building = 0;
		free(t->kix.jr);
		t->kix.jr = NULL;
		t->kix.njr = t->kix.jrcap = 0;
		t->kix.jr_lost = 0;
	}
	kix_publish(w, &t->kix);
	if (!locked)
		pthread_mutex_unlock(&t->mu);
	free(nx.s);
	for (size_t k = 0; k < nrf; k++)
		free(rf[k].dv);
	free(rf);
	if (rc == -ECANCELED)
		return 0;
	return rc < 0 ? rc : 1;
}
