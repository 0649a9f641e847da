/*
 * table_session.c — one table in the compactor's memory, and its commits.
 *
 * Maintenance session: a table's live file set, its vectors and its
 * watermark are loaded once (the full manifest chain, at open) and then
 * kept current from this writer's own commits — each commit folds just its
 * delta into the set (SFS_TABLE_SESSION=0: the ablation re-walks the whole
 * chain before every commit).  Every 32 commits the base manifest list is
 * rebased on the live set, and snapshots older than the previous one are
 * expired.
 * A commit is one snapshot of the manifest chain (layout/manifest.h):
 * a level-0 file's data commit (table_write.c), or the change of the file
 * set a round or a merge makes (set_commit), each with a new deletion-vector
 * index when bits changed.  Dropping a table's files (a reload, a
 * rollback's take-over) drops its key index too (table_kindex.c), which
 * names files by the fid each tfile gets when its reader opens.  Also
 * here: the file names, the readers and vectors of a table's files, and
 * the views the batch probes read.
 *
 * Next on a key's path: table_publish.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "shm/atomic.h"
#include "store/table/layout/dvec.h"
#include "store/table/layout/manifest.h"
#include "store/table/table_int.h"

#define REBASE_EVERY 32u      /* commits between base-list rebases */

static int load_entry(const struct sfs_mf_entry *e, void *arg);
static int keep_live(const char *name, void *arg);
static int dv_write(struct table *t, char *name);
static uint64_t rand64(void);
static int lvl_cmp(const void *x, const void *y);

struct table *sfs__tbl_table_get(struct sfs_target_writer *w, uint32_t sid)
{
	struct table *t = w->t[sid];

	if (t)
		return t;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	t->sid = sid;
	t->kind = (int)w->seg->hdr->sh_states[sid].sd_kind;
	t->merge = t->kind == SFS_STATE_COUNTER ? (int)w->seg->hdr->sh_states[sid].sd_merge : -1;
	snprintf(t->dir, sizeof(t->dir), "%.490s/s%u", w->base, sid);
	pthread_mutex_init(&t->mu, NULL);
	t->loaded = 1;	/* a new table: empty, nothing on disk to load */
	t->kix.valid = 1;	/* ... and its key index empty */
	__atomic_store_n(&w->t[sid], t, __ATOMIC_RELEASE);	/* the background thread looks */
	return t;
}

struct load_ctx {
	struct table *t;
	int rc;
};

/*
 * (Re)load the table from its latest snapshot: the live set, the readers,
 * the vectors, the watermark.  With @gc, orphans are collected (open only:
 * nothing else writes the directory then).
 */
int sfs__tbl_table_load(struct table *t, int gc)
{
	struct load_ctx c = { t, 0 };
	struct sfs_mf_snapshot s;
	uint64_t id = 0;
	int rc;

	sfs__tbl_table_drop_files(t);
	t->loads++;
	t->snap = 0;
	t->watermark = 0;
	t->order = 0;
	if ((rc = sfs_mf_latest(t->dir, &id)))
		return rc;
	if (id) {
		if ((rc = sfs_mf_snapshot_read(t->dir, id, &s)) ||
		    (rc = sfs_mf_for_all(t->dir, &s, load_entry, &c)))
			goto fail;
		t->snap = id;
		t->watermark = s.watermark;
		if ((rc = sfs__tbl_name_set(t->dvi, s.dv_index, t->dir)))
			goto fail;
	}
	for (size_t i = 0; i < t->nf; i++)
		if ((rc = sfs__tbl_file_open(t, &t->f[i])))
			goto fail;
	if ((rc = sfs__tbl_dv_load(t)))
		goto fail;
	if (gc && (rc = sfs_mf_gc(t->dir, keep_live, t)) < 0)
		goto fail;
	t->loaded = 1;
	return 0;
fail:
	sfs__tbl_table_drop_files(t);
	t->loaded = 0;
	return rc;
}

static int load_entry(const struct sfs_mf_entry *e, void *arg)
{
	struct load_ctx *c = arg;
	struct table *t = c->t;

	if (e->op == SFS_MF_ADD) {
		struct tfile *f = sfs__tbl_file_add(t);

		if (!f)
			return -ENOMEM;
		if (sfs__tbl_name_set(f->name, e->file, t->dir)) {
			t->nf--;
			return SFS_ECORRUPT;
		}
		f->level = e->level;
		f->order = ++t->order;
		return 0;
	}
	for (size_t i = t->nf; i-- > 0;)
		if (strcmp(t->f[i].name, e->file) == 0) {
			sfs__tbl_file_remove(t, i);
			return 0;
		}
	return sfs__err(SFS_ECORRUPT, "%s: the manifest deletes %s, which is not live", t->dir,
			e->file);
}

static int keep_live(const char *name, void *arg)
{
	struct table *t = arg;

	if (strcmp(name, t->dvi) == 0)
		return 1;
	for (size_t i = 0; i < t->nf; i++)
		if (strcmp(t->f[i].name, name) == 0)
			return 1;
	return 0;
}

/* The vectors of @t's files (none set yet) from its index t->dvi. */
int sfs__tbl_dv_load(struct table *t)
{
	sfs_dv_index_t *ix = NULL;
	char path[1024];
	int rc = 0;

	if (!t->dvi[0])
		return 0;
	snprintf(path, sizeof(path), "%s/%s", t->dir, t->dvi);
	if ((rc = sfs_dv_open(path, &ix)))
		return rc;
	for (size_t i = 0; i < t->nf && !rc; i++) {
		struct tfile *f = &t->f[i];
		int k = sfs_dv_find(ix, f->name);
		struct sfs_dv_info info;

		if (k < 0)
			continue;
		sfs_dv_info(ix, (size_t)k, &info);
		if (info.rows != f->rows) {
			rc = sfs__err(SFS_ECORRUPT, "%s: vector of %s covers %llu rows, the file "
				      "has %llu", path, f->name, (unsigned long long)info.rows,
				      (unsigned long long)f->rows);
			break;
		}
		f->dv_words = sfs_dv_words(f->rows);
		if (!(f->dv = calloc(f->dv_words ? f->dv_words : 1, 8)))
			rc = -ENOMEM;
		else if (!(rc = sfs_dv_decode(ix, (size_t)k, f->dv, f->dv_words)))
			f->dv_set = info.deleted;
	}
	sfs_dv_close(ix);
	return rc;
}

/* Open the file's reader and take its key range from the footer. */
int sfs__tbl_file_open(struct table *t, struct tfile *f)
{
	char path[1024];
	struct sfs_df_meta m;
	int rc;

	struct sfs_df_read_opts ropts = { .cache_pages = SFS_TABLE_CACHE_PAGES };

	f->fid = ++t->fids;
	snprintf(path, sizeof(path), "%s/%s", t->dir, f->name);
	if ((rc = sfs_df_reader_open(path, &ropts, &f->rd)))
		return rc;
	sfs_df_reader_meta(f->rd, &m);
	f->rows = m.rows;
	f->size = m.file_size;
	f->kg_lo = m.kg_lo;
	f->kg_hi = m.kg_hi;
	f->min_klen = (uint16_t)m.min_klen;
	f->max_klen = (uint16_t)m.max_klen;
	f->min_key = malloc(m.min_klen);
	f->max_key = malloc(m.max_klen);
	if (!f->min_key || !f->max_key)
		return -ENOMEM;
	memcpy(f->min_key, m.min_key, m.min_klen);
	memcpy(f->max_key, m.max_key, m.max_klen);
	return 0;
}

struct tfile *sfs__tbl_file_add(struct table *t)
{
	if (t->nf == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 8;
		struct tfile *nf = realloc(t->f, cap * sizeof(*nf));

		if (!nf)
			return NULL;
		t->f = nf;
		t->cap = cap;
	}
	memset(&t->f[t->nf], 0, sizeof(t->f[0]));
	return &t->f[t->nf++];
}

void sfs__tbl_file_remove(struct table *t, size_t i)
{
	sfs__tbl_file_free(&t->f[i]);
	memmove(&t->f[i], &t->f[i + 1], (t->nf - i - 1) * sizeof(t->f[0]));
	t->nf--;
}

void sfs__tbl_file_free(struct tfile *f)
{
	sfs_df_reader_close(f->rd);
	free(f->dv);
	free(f->min_key);
	free(f->max_key);
	memset(f, 0, sizeof(*f));
}

void sfs__tbl_table_drop_files(struct table *t)
{
	for (size_t i = 0; i < t->nf; i++)
		sfs__tbl_file_free(&t->f[i]);
	t->nf = 0;
	t->dvi[0] = '\0';
	sfs__tbl_kix_invalidate(t);	/* rebuilt from the files that come (table_kindex.c) */
	sfs__tbl_kf_invalidate(t);	/* ... and so is the key filter (table_kfilter.c) */
}

/*
 * Commit snapshot snap+1 of @t from @e[0..n) and the current vector index;
 * then expire what the previous snapshot alone named.
 */
int sfs__tbl_table_commit(struct sfs_target_writer *w, struct table *t, int kind,
			  const struct sfs_mf_entry *e, size_t n)
{
	struct sfs_mf_commit c = { .kind = kind, .schema_id = t->sid,
				   .dv_index = t->dvi[0] ? t->dvi : NULL, .entries = e, .n = n,
				   .watermark = t->watermark };
	struct sfs_mf_entry *live = NULL;
	int rc;

	if (++t->commits >= REBASE_EVERY) {
		/* The live set of snapshot snap, as the session holds it, minus
		 * nothing: this commit's delta comes after it. */
		size_t k = 0;

		if (!(live = malloc((t->nf ? t->nf : 1) * sizeof(*live))))
			return -ENOMEM;
		for (size_t i = 0; i < t->nf; i++) {
			int in_delta = 0;

			for (size_t j = 0; j < n && !in_delta; j++)
				in_delta = e[j].op == SFS_MF_ADD && strcmp(e[j].file, t->f[i].name) == 0 &&
					   e[j].level == t->f[i].level;
			if (!in_delta)
				sfs__tbl_entry_of(&t->f[i], SFS_MF_ADD, t->f[i].level, &live[k++]);
		}
		c.rebase = 1;
		c.rebase_entries = live;
		c.rebase_n = k;
	}
	rc = sfs_mf_commit(t->dir, t->snap + 1, &c);
	free(live);
	if (rc)
		return rc;
	if (c.rebase)
		t->commits = 0;
	t->snap++;
	if (t->snap > 2 && (rc = sfs_mf_expire(t->dir, t->snap - 1)) < 0)
		sfs_log("table %s: expiring snapshots: %s", t->dir, sfs_last_error());
	(void)w;
	return 0;
}

/*
 * The commit of a round or a merge (t->mu held): @t->f[@gone[0..ngone)]
 * leave the live set, @add (a file of @t->dir, NULL: none) joins it at
 * @level, @relabel (index or -1) moves from level 0 to 1 without a
 * rewrite, and every level >= 1 file whose rows are now all masked leaves
 * too.  A new vector index is written when bits changed (@masked) or a
 * file with a vector leaves.  @add_dv (@add_dv_set bits; owned by this
 * call) is the added file's vector.  On success the set in memory is the
 * snapshot's and the files that left are queued for unlinking; on failure
 * the set is unchanged but the vectors may be ahead (the caller reloads).
 */
int sfs__tbl_set_commit(struct sfs_target_writer *w, struct table *t, const size_t *gone,
			size_t ngone, const char *add, uint32_t level, long relabel, int masked,
			uint64_t *add_dv, uint64_t add_dv_set)
{
	size_t old_nf = t->nf, ne = 0;
	struct sfs_mf_entry *e = NULL;
	unsigned char *leave = NULL;
	uint64_t *keep = NULL;
	char old_dvi[SFS_TABLE_NAME], dvi[SFS_TABLE_NAME], path[1024];
	int rc = 0, dv_changed = masked;

	/* first the new file (sfs__tbl_file_add may move t->f: entries point into it) */
	if (add) {
		struct tfile *nf = sfs__tbl_file_add(t);

		if (!nf)
			return -ENOMEM;
		snprintf(nf->name, sizeof(nf->name), "%s", add);
		nf->level = level;
		nf->order = ++t->order;
		if ((rc = sfs__tbl_file_open(t, nf))) {
			sfs__tbl_file_remove(t, t->nf - 1);
			free(add_dv);
			return rc;
		}
		if (add_dv_set) {
			nf->dv = add_dv;
			nf->dv_words = sfs_dv_words(nf->rows);
			nf->dv_set = add_dv_set;
			add_dv = NULL;
			dv_changed = 1;
		}
	}
	free(add_dv);
	e = malloc((ngone + old_nf + 3) * sizeof(*e));
	leave = calloc(old_nf + 1, 1);
	keep = malloc((t->nf + 1) * sizeof(*keep));
	if (!e || !leave || !keep) {
		rc = -ENOMEM;
		goto undo;
	}
	for (size_t k = 0; k < ngone; k++)
		leave[gone[k]] = 1;
	for (size_t k = 0; k < old_nf; k++)
		if (t->f[k].level > 0 && t->f[k].rows && t->f[k].dv_set == t->f[k].rows &&
		    !t->f[k].merging)
			leave[k] = 1;	/* wholly superseded */
	for (size_t k = 0; k < old_nf; k++)
		if (leave[k]) {
			sfs__tbl_entry_of(&t->f[k], SFS_MF_DELETE, t->f[k].level, &e[ne++]);
			dv_changed |= t->f[k].dv_set != 0;
		}
	if (relabel >= 0) {
		sfs__tbl_entry_of(&t->f[relabel], SFS_MF_DELETE, 0, &e[ne++]);
		sfs__tbl_entry_of(&t->f[relabel], SFS_MF_ADD, 1, &e[ne++]);
	}
	if (add)
		sfs__tbl_entry_of(&t->f[old_nf], SFS_MF_ADD, level, &e[ne++]);
	memcpy(old_dvi, t->dvi, sizeof(old_dvi));
	if (dv_changed) {
		/* the index of the files that stay */
		for (size_t k = 0; k < t->nf; k++) {
			keep[k] = t->f[k].dv_set;
			if (k < old_nf && leave[k])
				t->f[k].dv_set = 0;
		}
		rc = dv_write(t, dvi);
		for (size_t k = 0; k < t->nf; k++)
			t->f[k].dv_set = keep[k];
		if (rc)
			goto undo;
		memcpy(t->dvi, dvi, sizeof(t->dvi));
	}
	if ((rc = sfs__tbl_table_commit(w, t, SFS_MF_COMPACT, e, ne))) {
		memcpy(t->dvi, old_dvi, sizeof(t->dvi));
		goto undo;
	}
	if (dv_changed && old_dvi[0]) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, old_dvi);
		sfs__tbl_defer_unlink(w, path);
	}
	if (relabel >= 0) {
		t->f[relabel].level = 1;
		uatomic_add(&w->pub->tp_upgrades, 1);
	}
	for (size_t k = old_nf; k-- > 0;)
		if (leave[k]) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->f[k].name);
			sfs__tbl_defer_unlink(w, path);
			sfs__tbl_file_remove(t, k);
		}
	goto out;
undo:
	if (add)
		sfs__tbl_file_remove(t, old_nf);
out:
	free(e);
	free(leave);
	free(keep);
	return rc;
}

void sfs__tbl_entry_of(const struct tfile *f, int op, uint32_t level, struct sfs_mf_entry *e)
{
	e->op = op;
	e->file = f->name;
	e->level = level;
	e->rows = f->rows;
	e->size = f->size;
	e->min_key = f->min_key;
	e->max_key = f->max_key;
	e->min_klen = f->min_klen;
	e->max_klen = f->max_klen;
	e->kg_lo = f->kg_lo;
	e->kg_hi = f->kg_hi;
}

/* A failed step left memory ahead of the disk: back to the last snapshot. */
void sfs__tbl_table_recover(struct sfs_target_writer *w, struct table *t, const char *what)
{
	int rc;

	sfs_log("worker %u, table %s: %s failed, back to snapshot %llu: %s", w->worker, t->dir,
		what, (unsigned long long)t->snap, sfs_last_error());
	if (w->pub)
		uatomic_inc(&w->pub->tp_errors);
	if ((rc = sfs__tbl_table_load(t, 0)))
		sfs_log("worker %u, table %s: reload failed (retried with the commit): %s",
			w->worker, t->dir, sfs_last_error());
}

int sfs__tbl_dv_set_bit(struct tfile *f, uint64_t pos)
{
	if (!f->dv) {
		f->dv_words = sfs_dv_words(f->rows);
		if (!(f->dv = calloc(f->dv_words ? f->dv_words : 1, sizeof(uint64_t))))
			return -ENOMEM;
	}
	if (pos >= f->rows)
		return sfs__err(SFS_ECORRUPT, "%s: row %llu of %llu", f->name,
				(unsigned long long)pos, (unsigned long long)f->rows);
	if (!(f->dv[pos / 64] & (1ull << (pos % 64)))) {
		f->dv[pos / 64] |= 1ull << (pos % 64);
		f->dv_set++;
	}
	return 0;
}

/* Write the table's vector index (every file with a bit set) under a new
 * name into @name ("" when no file has one). */
static int dv_write(struct table *t, char *name)
{
	sfs_dv_builder_t *b;
	char path[1024];
	int rc, any = 0;

	name[0] = '\0';
	if ((rc = sfs_dv_builder_new(&b)))
		return rc;
	for (size_t i = 0; i < t->nf && !rc; i++)
		if (t->f[i].dv_set) {
			rc = sfs_dv_builder_add(b, t->f[i].name, t->f[i].rows, t->f[i].dv,
						t->f[i].dv_words);
			any = 1;
		}
	if (!rc && any) {
		sfs__tbl_new_name(name, t->sid, "dvi");
		snprintf(path, sizeof(path), "%s/%s", t->dir, name);
		rc = sfs_dv_builder_write(b, path);
		if (rc)
			name[0] = '\0';
	}
	sfs_dv_builder_free(b);
	return rc;
}

void sfs__tbl_new_name(char *buf, uint32_t sid, const char *ext)
{
	snprintf(buf, SFS_TABLE_NAME, "t%u-%016llx.%s", sid, (unsigned long long)rand64(), ext);
}

static uint64_t rand64(void)
{
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = sfs_now_ns() ^ ((uint64_t)getpid() << 32);
	return r;
}

/* A file name of this store into a name field: ours are short (sfs__tbl_new_name). */
int sfs__tbl_name_set(char *dst, const char *src, const char *where)
{
	size_t n = strlen(src);

	if (n >= SFS_TABLE_NAME)
		return sfs__err(SFS_ECORRUPT, "%s: file name %.40s... is not one of the table "
				"target's", where, src);
	memcpy(dst, src, n + 1);
	return 0;
}

int sfs__tbl_lookup_view(struct table *t, const struct tfile *skip, struct tv_file *vf,
			 size_t *map, int levels_only)
{
	struct tfile *srt[t->nf ? t->nf : 1];
	int n = 0;

	sfs__tbl_files_sorted(t, srt);
	for (size_t i = 0; i < t->nf; i++) {
		struct tfile *f = srt[i];

		if (f == skip || (levels_only && f->level == 0))
			continue;
		vf[n].rd = f->rd;
		vf[n].dv = f->dv;
		vf[n].dv_words = f->dv_words;
		vf[n].level = f->level;
		map[n++] = (size_t)(f - t->f);
	}
	return n;
}

/* Sorted pointers to @t's files (lvl_cmp); @out holds t->nf. */
void sfs__tbl_files_sorted(struct table *t, struct tfile **out)
{
	for (size_t i = 0; i < t->nf; i++)
		out[i] = &t->f[i];
	if (t->nf > 1)
		qsort(out, t->nf, sizeof(*out), lvl_cmp);
}

static int lvl_cmp(const void *x, const void *y)
{
	const struct tfile *a = *(const struct tfile *const *)x, *b = *(const struct tfile *const *)y;

	/* level 0 first, newest first; then by level */
	if ((a->level == 0) != (b->level == 0))
		return a->level == 0 ? -1 : 1;
	if (a->level == 0)
		return a->order > b->order ? -1 : a->order < b->order;
	return a->level < b->level ? -1 : a->level > b->level;
}

/* Writer options for a file of @t: the prefix filter on map and list tables. */
void sfs__tbl_prefix_opts(const struct table *t, struct sfs_df_write_opts *wo)
{
	if (sfs__tbl_is_map_kind(t->kind)) {
		wo->prefix_of = sfs__table_map_prefix;
		wo->prefix_rule = SFS_TABLE_PFX_MAP;
	}
}

int sfs__tbl_scratch_grow(struct scratch *sc, size_t n)
{
	if (n <= sc->cap)
		return 0;
	free(sc->pk);
	free(sc->sk);
	free(sc->pi);
	free(sc->ph);
	free(sc->pr);
	free(sc->pm);
	sc->pk = malloc(n * sizeof(*sc->pk));
	sc->sk = malloc(n * sizeof(*sc->sk));
	sc->pi = malloc(n * sizeof(*sc->pi));
	sc->ph = malloc(n * sizeof(*sc->ph));
	sc->pr = malloc(n * sizeof(*sc->pr));
	sc->pm = malloc(n * sizeof(*sc->pm));
	if (!sc->pk || !sc->sk || !sc->pi || !sc->ph || !sc->pr || !sc->pm) {
		sc->cap = 0;
		return -ENOMEM;
	}
	sc->cap = n;
	return 0;
}

void sfs__tbl_scratch_free(struct scratch *sc)
{
	free(sc->pk);
	free(sc->sk);
	free(sc->pi);
	free(sc->ph);
	free(sc->pr);
	free(sc->pm);
	sfs_bump_free(&sc->arena);
	memset(sc, 0, sizeof(*sc));
}

/* Keys asked and key pages walked so far by the probes of the view's
 * readers (their counters never reset: callers diff two readings). */
void sfs__tbl_view_work(const struct tv_file *vf, int nv, uint64_t *keys, uint64_t *pages)
{
	*keys = *pages = 0;
	for (int k = 0; k < nv; k++) {
		const struct sfs_df_counters *c = sfs_df_reader_counters(vf[k].rd);

		*keys += c->probe_keys;
		*pages += c->page_reads;
	}
}

uint64_t sfs__tbl_count_probe_work(struct sfs_target_writer *w, const struct tv_file *vf, int nv,
				   uint64_t keys0, uint64_t pages0)
{
	uint64_t keys, pages;

	sfs__tbl_view_work(vf, nv, &keys, &pages);
	uatomic_add(&w->pub->tp_probe_keys, keys - keys0);
	uatomic_add(&w->pub->tp_probe_pages, pages - pages0);
	return keys - keys0;
}

/* Bytes of the file at @path (0 if it cannot be stat'ed): the counted
 * write volume (tp_bytes_written, tp_merge_bytes), one stat per file. */
uint64_t sfs__tbl_file_bytes(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}
