/*
 * table_read.c — the `table` target's readers (workers; any process of
 * the node): the files the compactor published (table.h), mapped, their
 * deletion vectors decoded, read by batch probes and prefix scans
 * (table_view.h).
 *
 * Catching up: the published file set is copied under its seqlock when
 * tp_published moved (at most once per version).  Files already open stay
 * open (matched by name), new ones are mapped, vanished ones unmapped; a
 * table's vectors are decoded again only when its index name changed (a
 * new index for every change of a vector).  So a version costs O(files
 * added + vectors changed), and a probe plans nothing: the scan list per
 * table is fixed per version.  A file the compactor unlinked between the
 * copy and the open (a reader that lagged past a grace period) means a
 * newer version exists: copy again.
 *
 * Values are copied into the reader's arena (live until the next quiescent
 * point, when catch_up resets it), never left pointing into a mapping
 * that a later catch-up may unmap.  The tag of every result is the
 * published applied seq of the version read.  The probe flags (the
 * compactor's knobs) are read again with each version, never only when
 * the region was first found: that could be before the compactor stored
 * them.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "store/table/layout/bufimage.h"
#include "store/table/layout/dvec.h"
#include "shm/atomic.h"
#include "store/table/table_int.h"
#include "store/table/table_view.h"
#include "common/keygroup.h"

#define RETRIES 8

struct rtable {
	uint32_t sid;
	int kind, merge;
	char dvi[SFS_TABLE_NAME];
	struct tv_file *vf;         /* the view: level 0 newest first, then levels >= 1 */
	char (*names)[SFS_TABLE_NAME];
	uint64_t **dvs;             /* owned vectors, per file */
	uint32_t nf;
};

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	char base[512];
	struct sfs_table_pub *pub;
	uint64_t seen;              /* tp_published of the version held */
	uint64_t applied;           /* its tag */
	unsigned flags;             /* probe flags (the hash-set IN ablation) */
	int l0_on;                  /* the compactor saves buffers as images (its knob) */
	struct rtable *tab[SFS_MAX_STATES];
	struct sfs_table_pub_table *ptab;   /* copies under the seqlock */
	struct sfs_table_pub_file *pfile;
	uint32_t pfcap;
	struct sfs_bump arena;
	/* Buffer images (table_l0.c), newest first as images() hands them out;
	 * those a refresh dropped stay mapped until the next quiescent point
	 * (catch_up): the worker reads their entries in place meanwhile. */
	struct sfs_bufimg *img[SFS_TABLE_PUB_L0];
	const struct sfs_wbuf *img_b[SFS_TABLE_PUB_L0];
	uint64_t img_seq[SFS_TABLE_PUB_L0];
	unsigned nimg;
	struct sfs_bufimg **old_img;
	size_t nold, oldcap;
	struct sfs_table_pub_l0 pl0[SFS_TABLE_PUB_L0];   /* copy under the seqlock */
	uint32_t npl0;
	/* probe scratch */
	unsigned char *kbuf;
	size_t kcap;
	struct sfs_df_key *pk, *sk;
	uint32_t *pi, *idx;
	unsigned char *done;
	struct sfs_df_hit *ph;
	struct tv_res *pr;
	size_t pcap;
};

static void rtable_free(struct rtable *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->nf; i++) {
		sfs_df_reader_close(t->vf[i].rd);
		free(t->dvs[i]);
	}
	free(t->vf);
	free(t->names);
	free(t->dvs);
	free(t);
}

int sfs__table_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	struct sfs_target_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	if ((rc = sfs__table_store_dir(s, worker, r->base, sizeof(r->base)))) {
		free(r);
		return rc;
	}
	r->ptab = calloc(SFS_MAX_STATES, sizeof(*r->ptab));
	if (!r->ptab) {
		free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

void sfs__table_reader_close(struct sfs_target_reader *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++)
		rtable_free(r->tab[i]);
	for (unsigned i = 0; i < r->nimg; i++)
		sfs_bufimg_close(r->img[i]);
	for (size_t i = 0; i < r->nold; i++)
		sfs_bufimg_close(r->old_img[i]);
	free(r->old_img);
	sfs_bump_free(&r->arena);
	free(r->ptab);
	free(r->pfile);
	free(r->kbuf);
	free(r->pk);
	free(r->sk);
	free(r->pi);
	free(r->idx);
	free(r->done);
	free(r->ph);
	free(r->pr);
	free(r);
}

void sfs__table_reader_work(const struct sfs_target_reader *r, struct sfs_df_counters *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t s = 0; s < SFS_MAX_STATES; s++)
		for (uint32_t i = 0; r->tab[s] && i < r->tab[s]->nf; i++) {
			const struct sfs_df_counters *c = sfs_df_reader_counters(r->tab[s]->vf[i].rd);
			const uint64_t *a = (const uint64_t *)c;
			uint64_t *o = (uint64_t *)out;

			/* every field a u64 counter (datafile.h) */
			for (size_t k = 0; k < sizeof(*out) / sizeof(uint64_t); k++)
				o[k] += a[k];
		}
}

/*
 * The published images (r->pl0, oldest first) mapped, newest first in
 * r->img: those already mapped are kept (by name), the others opened and
 * checked whole (bufimage.h), those no longer published moved to the
 * old list (unmapped at the next catch_up).  An image unlinked since the
 * copy was converted: its rows are in the tables, and the publication
 * after this one names it no more; it is skipped (the tables of this
 * copy may not have it yet: the next refresh, which follows a newer
 * publication, makes the set whole).
 */
_Static_assert(SFS_TABLE_PUB_L0 <= SFS_TARGET_IMAGES_MAX, "images() hands out every image");

static int refresh(struct sfs_target_reader *r);

static int images_build(struct sfs_target_reader *r)
{
	struct sfs_bufimg *keep[SFS_TABLE_PUB_L0] = { 0 };
	unsigned n = 0;
	char path[700];
	int rc = 0;

	uint64_t prev = UINT64_MAX;

	for (uint32_t k = r->npl0; k-- > 0 && !rc;) {	/* newest first */
		const struct sfs_table_pub_l0 *pl = &r->pl0[k];
		struct sfs_bufimg *im = NULL;

		if (pl->pl_seq <= r->applied || pl->pl_seq >= prev)
			continue;	/* converted (in the tables of this version); or a
					 * seq twice, which a buffer read twice would fold twice */
		prev = pl->pl_seq;
		for (unsigned i = 0; i < r->nimg && !im; i++)
			if (r->img[i] && r->img_seq[i] == pl->pl_seq) {
				im = r->img[i];
				r->img[i] = NULL;
			}
		if (!im) {
			snprintf(path, sizeof(path), "%s/l0/%.*s", r->base, (int)SFS_TABLE_NAME,
				 pl->pl_name);
			/* shallow: what a worker trusts of its sealed buffers
			 * in shared memory (bufimage.h) */
			rc = sfs_bufimg_open_ex(path, SFS_BUFIMG_SHALLOW, &im);
			if (rc == -ENOENT) {
				rc = 0;
				continue;
			}
			if (rc)
				break;
		}
		keep[n++] = im;
	}
	for (unsigned i = 0; i < r->nimg; i++) {
		if (!r->img[i])
			continue;
		if (r->nold == r->oldcap) {
			size_t cap = r->oldcap ? r->oldcap * 2 : 8;
			struct sfs_bufimg **o = realloc(r->old_img, cap * sizeof(*o));

			if (!o) {
				sfs_bufimg_close(r->img[i]);	/* nothing may read it: no memory */
				continue;
			}
			r->old_img = o;
			r->oldcap = cap;
		}
		r->old_img[r->nold++] = r->img[i];
	}
	for (unsigned i = 0; i < n; i++) {
		r->img[i] = keep[i];
		r->img_b[i] = keep[i]->b;
		r->img_seq[i] = keep[i]->meta.seq;
	}
	r->nimg = n;
	return rc;
}

int sfs__table_images(struct sfs_target_reader *r, const struct sfs_wbuf *const **b,
		      const uint64_t **seq, unsigned *n)
{
	int rc;

	/* A worker asks after every buffer missed: once a publication said
	 * images are off (the knobs precede the first one: table_open), no
	 * store of this compactor holds any, and nothing is refreshed here. */
	if (r->seen && !r->l0_on) {
		*b = r->img_b;
		*seq = r->img_seq;
		*n = 0;
		return 0;
	}
	rc = refresh(r);

	*b = r->img_b;
	*seq = r->img_seq;
	*n = rc ? 0 : r->nimg;
	return rc;
}

/* Copy the published set under the seqlock: 1 copied, 0 retry, < 0 error. */
static int copy_pub(struct sfs_target_reader *r, uint32_t *nt, uint32_t *nf, uint64_t *applied,
		    uint64_t *published)
{
	struct sfs_table_pub *p = r->pub;
	uint64_t s0 = sfs_load_acquire(&p->tp_seq);

	if (s0 & 1)
		return 0;
	*published = sfs_load_acquire(&p->tp_published);
	*nt = p->tp_ntables;
	*nf = p->tp_nfiles;
	*applied = p->tp_applied;
	if (*nt > SFS_MAX_STATES || *nf > SFS_TABLE_PUB_FILES)
		return 0;	/* torn: the seq check below fails */
	if (*nf > r->pfcap) {
		struct sfs_table_pub_file *n = realloc(r->pfile, *nf * sizeof(*n));

		if (!n)
			return -ENOMEM;
		r->pfile = n;
		r->pfcap = *nf;
	}
	if (*nt)
		memcpy(r->ptab, p->tp_tables, *nt * sizeof(*r->ptab));
	if (*nf)
		memcpy(r->pfile, p->tp_files, *nf * sizeof(*r->pfile));
	r->npl0 = p->tp_nl0;
	if (r->npl0 > SFS_TABLE_PUB_L0)
		return 0;	/* torn */
	memcpy(r->pl0, p->tp_l0, r->npl0 * sizeof(*r->pl0));
	cmm_smp_rmb();
	return sfs_load_acquire(&p->tp_seq) == s0;
}

/* The new view of one table, reusing what @old has open. */
static int rtable_build(struct sfs_target_reader *r, const struct sfs_table_pub_table *pt,
			struct rtable *old, struct rtable **out)
{
	struct rtable *t = calloc(1, sizeof(*t));
	const struct sfs_state_desc *sd;
	sfs_dv_index_t *ix = NULL;
	char dir[576], path[640];
	int rc = 0, same_dvi;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	if (pt->pt_sid >= SFS_MAX_STATES || pt->pt_first + pt->pt_nfiles > SFS_TABLE_PUB_FILES) {
		free(t);
		return sfs__err(SFS_ECORRUPT, "table target region of worker %u: table %u out of "
				"range", r->worker, pt->pt_sid);
	}
	sd = &r->seg->hdr->sh_states[pt->pt_sid];
	t->sid = pt->pt_sid;
	t->kind = (int)sd->sd_kind;
	t->merge = t->kind == SFS_STATE_COUNTER ? (int)sd->sd_merge : -1;
	memcpy(t->dvi, pt->pt_dvi, sizeof(t->dvi));
	t->dvi[sizeof(t->dvi) - 1] = '\0';
	same_dvi = old && strcmp(old->dvi, t->dvi) == 0;
	snprintf(dir, sizeof(dir), "%s/s%u", r->base, t->sid);
	t->vf = calloc(pt->pt_nfiles + 1, sizeof(*t->vf));
	t->names = calloc(pt->pt_nfiles + 1, sizeof(*t->names));
	t->dvs = calloc(pt->pt_nfiles + 1, sizeof(*t->dvs));
	if (!t->vf || !t->names || !t->dvs) {
		rtable_free(t);
		return -ENOMEM;
	}
	if (t->dvi[0] && !same_dvi) {
		snprintf(path, sizeof(path), "%s/%s", dir, t->dvi);
		if ((rc = sfs_dv_open(path, &ix))) {
			rtable_free(t);
			return rc;
		}
	}
	for (uint32_t i = 0; i < pt->pt_nfiles && !rc; i++) {
		const struct sfs_table_pub_file *pf = &r->pfile[pt->pt_first + i];
		struct tv_file *v = &t->vf[t->nf];
		uint32_t k = UINT32_MAX;

		memcpy(t->names[t->nf], pf->pf_name, SFS_TABLE_NAME);
		t->names[t->nf][SFS_TABLE_NAME - 1] = '\0';
		v->level = pf->pf_level;
		for (uint32_t j = 0; old && j < old->nf && k == UINT32_MAX; j++)
			if (old->vf[j].rd && strcmp(old->names[j], t->names[t->nf]) == 0)
				k = j;
		if (k != UINT32_MAX) {
			/* taken over: the old view no longer owns it */
			v->rd = old->vf[k].rd;
			old->vf[k].rd = NULL;
			if (same_dvi) {
				t->dvs[t->nf] = old->dvs[k];
				old->dvs[k] = NULL;
			}
		} else {
			struct sfs_df_read_opts ro = { .cache_pages = SFS_TABLE_CACHE_PAGES };

			snprintf(path, sizeof(path), "%s/%s", dir, t->names[t->nf]);
			if ((rc = sfs_df_reader_open(path, &ro, &v->rd)))
				break;
		}
		t->nf++;
		if (ix) {
			size_t words;
			int x = sfs_dv_find(ix, t->names[t->nf - 1]);

			if (x >= 0 && (rc = sfs_dv_lookup(ix, t->names[t->nf - 1],
							   &t->dvs[t->nf - 1], &words)) == 0)
				v->dv_words = words;
			rc = rc == -ENOENT ? 0 : rc;
		} else if (t->dvs[t->nf - 1]) {
			v->dv_words = sfs_dv_words(pf->pf_rows);
		}
		v->dv = t->dvs[t->nf - 1];
	}
	sfs_dv_close(ix);
	if (rc) {
		rtable_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* Follow the compactor when it published a version since the last time. */
static int refresh(struct sfs_target_reader *r)
{
	struct rtable *nt[SFS_MAX_STATES];
	uint32_t ntab = 0, nfile = 0;
	uint64_t applied = 0, published = 0, v;
	int rc = 0, tries;

	if (!r->pub) {
		if ((rc = sfs__table_pub_find(r->seg, r->worker, 0, &r->pub)))
			return rc;
		if (!r->pub)
			return 0;	/* nothing published yet: an empty store */
	}
	v = sfs_load_acquire(&r->pub->tp_published);
	if (v == r->seen && v)
		return 0;
	/* The probe flags follow the compactor's knobs, read again with each
	 * new version: the compactor makes its region findable before it
	 * stores its knobs (table_open), so knobs read when the region was
	 * found could be the zeroes before them, and a reader then kept the
	 * per-literal ablation for good (q5 at 20M: a row walk of ~120 rows
	 * per page read instead of a binary search).  Every publication
	 * (release) follows the store of the knobs, and v was read acquire. */
	r->flags = (sfs_load_relaxed(&r->pub->tp_knobs) & SFS_TABLE_K_HASH_IN)
			   ? SFS_DF_PROBE_SEEK_SPARSE
			   : SFS_DF_PROBE_PER_LITERAL;
	r->l0_on = (sfs_load_relaxed(&r->pub->tp_knobs) & SFS_TABLE_K_L0_IMAGE) != 0;
	for (tries = 0; tries < RETRIES; tries++) {
		int k, spins = 0;

		/* the writer holds the seqlock odd only for a copy of the set */
		while ((k = copy_pub(r, &ntab, &nfile, &applied, &published)) == 0 && spins++ < 100000)
			if (spins % 64 == 0)
				sched_yield();
		if (k < 0)
			return k;
		if (k == 0)
			return sfs__err(-EAGAIN, "table target of worker %u: the published file "
					"set keeps changing", r->worker);
		memset(nt, 0, sizeof(nt));
		rc = 0;
		for (uint32_t i = 0; i < ntab && !rc; i++) {
			uint32_t sid = r->ptab[i].pt_sid;

			rc = rtable_build(r, &r->ptab[i], sid < SFS_MAX_STATES ? r->tab[sid] : NULL,
					  &nt[sid < SFS_MAX_STATES ? sid : 0]);
		}
		if (rc == 0)
			break;
		/* a file or index unlinked since the copy: a newer version exists */
		for (uint32_t s = 0; s < SFS_MAX_STATES; s++)
			rtable_free(nt[s]);
		if (rc != -ENOENT)
			return rc;
	}
	if (rc)
		return sfs__err(rc, "table target of worker %u: files keep vanishing while "
				"catching up", r->worker);
	for (uint32_t s = 0; s < SFS_MAX_STATES; s++) {
		rtable_free(r->tab[s]);
		r->tab[s] = nt[s];
	}
	r->applied = applied;
	r->seen = published;
	if ((rc = images_build(r)))
		r->seen = 0;	/* the next refresh tries again */
	return rc;
}

int sfs__table_catch_up(struct sfs_target_reader *r)
{
	/* a quiescent point: nothing read from a dropped image is held */
	for (size_t i = 0; i < r->nold; i++)
		sfs_bufimg_close(r->old_img[i]);
	r->nold = 0;
	sfs_bump_reset(&r->arena);
	return refresh(r);
}

static int grow(struct sfs_target_reader *r, size_t n, size_t kbytes)
{
	if (kbytes > r->kcap) {
		unsigned char *k = realloc(r->kbuf, kbytes * 2);

		if (!k)
			return -ENOMEM;
		r->kbuf = k;
		r->kcap = kbytes * 2;
	}
	if (n <= r->pcap)
		return 0;
	free(r->pk);
	free(r->sk);
	free(r->pi);
	free(r->idx);
	free(r->done);
	free(r->ph);
	free(r->pr);
	r->pk = malloc(n * sizeof(*r->pk));
	r->done = malloc(n);
	r->sk = malloc(n * sizeof(*r->sk));
	r->pi = malloc(n * sizeof(*r->pi));
	r->idx = malloc(n * sizeof(*r->idx));
	r->ph = malloc(n * sizeof(*r->ph));
	r->pr = malloc(n * sizeof(*r->pr));
	if (!r->pk || !r->sk || !r->pi || !r->idx || !r->done || !r->ph || !r->pr) {
		r->pcap = 0;
		return -ENOMEM;
	}
	r->pcap = n;
	return 0;
}

static void fill(struct sfs_target_reader *r, const struct tv_res *x, struct sfs_probe_result *res)
{
	res->found = x->state == 1;
	res->value = res->found ? (x->vlen ? x->val : "") : NULL;
	res->len = res->found ? (uint32_t)x->vlen : 0;
	res->tag = r->applied;
}

/*
 * The batch probe: keys grouped by state (a batch is mostly one state),
 * each group one sfs__tv_probe over its table's view.
 */
int sfs__table_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     struct sfs_probe_result *res)
{
	size_t kbytes = 0;
	int rc;

	if ((rc = refresh(r)))
		return rc;
	for (unsigned i = 0; i < n; i++) {
		kbytes += keys[i].klen + 8;
		res[i].found = 0;
		res[i].value = NULL;
		res[i].len = 0;
		res[i].tag = r->applied;
	}
	if ((rc = grow(r, n, kbytes)))
		return rc;
	memset(r->done, 0, n);
	for (unsigned i = 0; i < n;) {
		uint32_t sid = keys[i].klen >= SFS_KEY_PREFIX ? sfs_key_prefix_state(keys[i].key)
							       : SFS_MAX_STATES;
		struct rtable *t = sid < SFS_MAX_STATES ? r->tab[sid] : NULL;
		size_t m = 0, off = 0;
		unsigned next = n;

		/* this state's keys (from i on); others are taken in a later pass */
		for (unsigned j = i; j < n; j++) {
			uint32_t s = keys[j].klen >= SFS_KEY_PREFIX ? sfs_key_prefix_state(keys[j].key)
								    : SFS_MAX_STATES;

			if (r->done[j])
				continue;	/* taken by an earlier pass */
			if (s != sid) {
				if (next == n)
					next = j;
				continue;
			}
			r->idx[m] = j;
			r->pk[m].p = r->kbuf + off;
			r->pk[m].len = sfs__table_enc(r->kbuf + off, 0, 0, keys[j].ns, keys[j].key,
						      keys[j].klen);
			off += r->pk[m].len;
			r->done[j] = 1;
			m++;
		}
		if (t && t->nf && m) {
			rc = sfs__tv_probe(t->vf, t->nf, r->pk, m, NULL, t->merge, r->flags, &r->arena, r->pr,
				      r->sk, r->pi, r->ph);
			if (rc)
				return rc;
			for (size_t k = 0; k < m; k++)
				fill(r, &r->pr[k], &res[r->idx[k]]);
		}
		i = next;
	}
	return 0;
}

int sfs__table_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		       const void *ukey, uint32_t ulen, struct sfs_probe_result *res)
{
	uint32_t sid, el;
	struct rtable *t;
	unsigned char *k;
	struct sfs_df_key key;
	int rc;

	res->found = 0;
	res->value = NULL;
	res->len = 0;
	if ((rc = refresh(r)))
		return rc;
	res->tag = r->applied;
	sid = parent->klen >= SFS_KEY_PREFIX ? sfs_key_prefix_state(parent->key) : SFS_MAX_STATES;
	t = sid < SFS_MAX_STATES ? r->tab[sid] : NULL;
	if (!t || !t->nf)
		return 0;
	if ((rc = grow(r, 1, (size_t)parent->klen + ulen + 8)))
		return rc;
	k = r->kbuf;
	el = (uint32_t)sfs__table_enc(k, 1, parent->klen, parent->ns, parent->key, parent->klen);
	memcpy(k + el, ukey, ulen);
	key.p = k;
	key.len = el + ulen;
	if ((rc = sfs__tv_probe(t->vf, t->nf, &key, 1, NULL, -1, r->flags, &r->arena, r->pr, r->sk, r->pi,
			   r->ph)))
		return rc;
	fill(r, &r->pr[0], res);
	return res->found;
}

/* Entries are copied into the arena before @fn runs, so @fn may make any
 * state call (another scan, a probe that catches up). */
int sfs__table_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg)
{
	unsigned char local[512], *pfx = local;
	struct tv_row *rows = NULL;
	size_t nr = 0, plen = (size_t)parent->klen + 8;
	uint32_t sid;
	struct rtable *t;
	int rc;

	if ((rc = refresh(r)))
		return rc;
	sid = parent->klen >= SFS_KEY_PREFIX ? sfs_key_prefix_state(parent->key) : SFS_MAX_STATES;
	t = sid < SFS_MAX_STATES ? r->tab[sid] : NULL;
	if (!t || !t->nf)
		return 0;
	if (plen > sizeof(local) && !(pfx = malloc(plen)))
		return -ENOMEM;
	sfs__table_enc(pfx, 1, parent->klen, parent->ns, parent->key, parent->klen);
	rc = sfs__tv_prefix(t->vf, t->nf, pfx, plen, &r->arena, &rows, &nr);
	if (pfx != local)
		free(pfx);
	for (size_t i = 0; rc == 0 && i < nr; i++)
		rc = fn(arg, rows[i].key, rows[i].klen, rows[i].val, rows[i].vlen);
	free(rows);
	return rc;
}
