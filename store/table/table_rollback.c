/*
 * table_rollback.c — rollback in place (store/target.h: pin, rollback,
 * reset).
 *
 * Rollback in place (store/target.h: pin, rollback; the design is
 * below).  snapshot() also keeps the staged version's metadata in memory
 * (file names, levels, manifest fields, vector index; the last VKEEP);
 * pin() makes one the rollback point, and until the next pin the files
 * it names are parked instead of unlinked when they leave the live set.
 * rollback() commits, per table, one snapshot whose live set is the
 * pinned one, behind an intent file (<store>/ROLLBACK) that the next open
 * finishes, then publishes once: no data file is read or copied.
 *
 * A kept version is the metadata of one published version: per table its
 * live files as their manifest entries need them, in creation order (level
 * 0's age), and its vector index; and the applied seq.  Taken at staging
 * (sfs__tbl_snapshot, under each table's lock, so it is exactly what the stage
 * holds) or at pin(0) (the version at open); O(files) bytes, no I/O.
 *
 * What protects a kept version's files: every name it holds is in w->held,
 * and defer_unlink parks a held file in w->hold instead of unlinking it
 * after the grace period.  Merges, rounds and vector-index rewrites are
 * the only ways a file leaves a live set while the writer lives, and all
 * go through defer_unlink.  The orphan gc runs at open only (no version is
 * kept then), snapshot expiry removes metadata only (manifest.h), and a
 * rollback reads nothing but the kept version: so an expired snapshot
 * loses nothing a rollback needs.
 *
 * Rollback: an intent (<store>/ROLLBACK, TABLES' format: the pinned
 * version) is written first; then each table commits one COMPACT snapshot
 * whose live set is the pinned one (table_switch: a delta deleting the
 * current files the pinned version does not keep and adding its others,
 * the pinned seq as watermark), and its session is rebuilt from the kept
 * version in memory (table_take); then the intent goes and the version is
 * published once.  A kill before the intent is in place leaves the
 * version before; after it, the next open finishes the switch
 * (rollforward_table) before its gc: never a mix.  Cost per table: one
 * manifest commit (a manifest, lists, a snapshot file; the usual rebase
 * and expiry), a footer read per pinned file the current version no
 * longer has, the pinned vector index read; per rollback one intent write
 * (two fsyncs); no data file is read or copied.  Measured (the test
 * a_rollback_costs_*): 16 tables x 200 live files, 100 pinned each,
 * ~120 ms on a busy 2-core machine; 4 x 40: ~8 ms.
 *
 * Off a key's path: a switch commits through table_session.c and
 * publishes through table_publish.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/log.h"
#include "shm/qsbr.h"
#include "store/table/layout/dvec.h"
#include "store/table/layout/manifest.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"

static int version_capture(struct sfs_target_writer *w, uint64_t id, struct version **out);
static int held_add(struct sfs_target_writer *w, const struct vtable *vt);
static int vfile_set(struct vfile *vf, const struct tfile *f, uint32_t level);
static int order_cmp(const void *x, const void *y);
static void vtable_free(struct vtable *vt);
static const struct vtable *version_table(const struct version *v, uint32_t sid);
static int intent_write(const char *path, const struct version *v);
static int table_switch(struct sfs_target_writer *w, struct table *t, const struct vtable *vt,
			uint64_t seq);
static int vtable_names(const struct vtable *vt, const char *name);
static void ventry_of(const struct vfile *f, int op, struct sfs_mf_entry *e);
static int table_take(struct table *t, const struct vtable *vt, const long *match);
static void rollback_unhold(struct sfs_target_writer *w, const struct vtable *vt);

/*
 * The target op: pin version @id (see store/target.h).  O(files of the
 * kept versions) in memory: no I/O.  A failed pin leaves nothing pinned.
 */
int sfs__tbl_pin(struct sfs_target_writer *w, uint64_t id)
{
	struct version *v = NULL;
	unsigned k = 0;
	int rc;

	if (id == 0) {
		if (w->gen)
			rc = sfs__err(-ENOENT, "worker %u: pin of the version at open after "
				      "applies", w->worker);
		else
			rc = version_capture(w, 0, &v);
	} else {
		rc = sfs__err(-ENOENT, "worker %u: checkpoint %llu was not staged by this "
			      "writer", w->worker, (unsigned long long)id);
		for (unsigned i = 0; i < w->nstaged; i++)
			if (w->staged[i]->id == id) {
				v = w->staged[i];
				w->staged[i] = NULL;
				rc = 0;
			}
	}
	sfs__tbl_version_free(w->pinned);
	w->pinned = v;
	/* the versions staged up to it will never be pinned */
	for (unsigned i = 0; i < w->nstaged; i++) {
		if (w->staged[i] && (!v || w->staged[i]->id > id))
			w->staged[k++] = w->staged[i];
		else
			sfs__tbl_version_free(w->staged[i]);
	}
	w->nstaged = k;
	if (sfs__tbl_held_rebuild(w) && !rc)
		rc = -ENOMEM;
	return rc;
}

/* The current version of every table as version @id (main thread: no
 * commit runs; merges may, each table is read whole under its lock). */
static int version_capture(struct sfs_target_writer *w, uint64_t id, struct version **out)
{
	struct version *v = calloc(1, sizeof(*v));
	int rc = 0;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	v->id = id;
	v->seq = w->applied;
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = sfs__tbl_table_at(w, sid);

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		if (!t->loaded)
			rc = sfs__err(-EAGAIN, "table %s is not loaded (a failed reload)", t->dir);
		else if (t->nf || t->dvi[0])
			rc = sfs__tbl_vtable_capture(w, t, &v->t[v->nt++]);
		pthread_mutex_unlock(&t->mu);
	}
	if (rc) {
		sfs__tbl_version_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

/* Keep @v as the version staged for checkpoint v->id (a retried staging
 * replaces its earlier capture; beyond VKEEP the oldest goes). */
int sfs__tbl_version_keep(struct sfs_target_writer *w, struct version *v)
{
	for (unsigned i = 0; i < w->nstaged; i++)
		if (w->staged[i]->id == v->id) {
			sfs__tbl_version_free(w->staged[i]);
			memmove(&w->staged[i], &w->staged[i + 1],
				(w->nstaged - i - 1) * sizeof(w->staged[0]));
			w->nstaged--;
			break;
		}
	if (w->nstaged == VKEEP) {
		sfs__tbl_version_free(w->staged[0]);
		memmove(&w->staged[0], &w->staged[1], (VKEEP - 1) * sizeof(w->staged[0]));
		w->nstaged--;
	}
	w->staged[w->nstaged++] = v;
	return sfs__tbl_held_rebuild(w);
}

/* @t's live set into @vt, its names held at once (t->mu held; an empty
 * table leaves @vt empty). */
int sfs__tbl_vtable_capture(struct sfs_target_writer *w, struct table *t, struct vtable *vt)
{
	struct tfile **fs;
	int rc = 0;

	memset(vt, 0, sizeof(*vt));
	vt->sid = t->sid;
	memcpy(vt->dvi, t->dvi, sizeof(vt->dvi));
	if (!t->nf)
		return 0;
	if (!(fs = malloc(t->nf * sizeof(*fs))) || !(vt->f = calloc(t->nf, sizeof(*vt->f)))) {
		free(fs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nf; i++)
		fs[i] = &t->f[i];
	qsort(fs, t->nf, sizeof(*fs), order_cmp);
	for (size_t i = 0; i < t->nf && !rc; i++, vt->nf++)
		rc = vfile_set(&vt->f[i], fs[i], fs[i]->level);
	free(fs);
	return rc ? rc : held_add(w, vt);
}

/* Add @vt's names to w->held at once, under the table's lock its capture
 * held (t->mu, then del_mu: sfs__tbl_set_commit's order): a merge committing right
 * after the capture parks them instead of unlinking.  O(held log held). */
static int held_add(struct sfs_target_writer *w, const struct vtable *vt)
{
	size_t add = vt->nf + (vt->dvi[0] != '\0'), n;
	char (*held)[SFS_TABLE_NAME];
	int rc = 0;

	if (!add)
		return 0;
	pthread_mutex_lock(&w->del_mu);
	n = w->nheld;
	if (!(held = realloc(w->held, (n + add) * sizeof(*held)))) {
		rc = -ENOMEM;
	} else {
		for (size_t f = 0; f < vt->nf; f++)
			memcpy(held[n++], vt->f[f].name, SFS_TABLE_NAME);
		if (vt->dvi[0])
			memcpy(held[n++], vt->dvi, SFS_TABLE_NAME);
		qsort(held, n, sizeof(*held), sfs__tbl_held_cmp);
		w->held = held;
		w->nheld = n;
	}
	pthread_mutex_unlock(&w->del_mu);
	return rc;
}

static int vfile_set(struct vfile *vf, const struct tfile *f, uint32_t level)
{
	memcpy(vf->name, f->name, sizeof(vf->name));
	vf->level = level;
	vf->rows = f->rows;
	vf->size = f->size;
	vf->min_klen = f->min_klen;
	vf->max_klen = f->max_klen;
	vf->kg_lo = f->kg_lo;
	vf->kg_hi = f->kg_hi;
	vf->min_key = malloc(f->min_klen ? f->min_klen : 1);
	vf->max_key = malloc(f->max_klen ? f->max_klen : 1);
	if (!vf->min_key || !vf->max_key)
		return -ENOMEM;
	memcpy(vf->min_key, f->min_key, f->min_klen);
	memcpy(vf->max_key, f->max_key, f->max_klen);
	return 0;
}

static int order_cmp(const void *x, const void *y)
{
	const struct tfile *a = *(const struct tfile *const *)x, *b = *(const struct tfile *const *)y;

	return a->order > b->order ? 1 : a->order < b->order ? -1 : 0;
}

/* Rebuild w->held from the kept versions, and hand the parked files no
 * kept version names any more to the deferred unlinks.  Main thread. */
int sfs__tbl_held_rebuild(struct sfs_target_writer *w)
{
	struct version *vs[VKEEP + 1];
	char (*held)[SFS_TABLE_NAME];
	size_t n = 0, cap = 0, k = 0;
	unsigned nv = 0;

	for (unsigned i = 0; i < w->nstaged; i++)
		vs[nv++] = w->staged[i];
	if (w->pinned)
		vs[nv++] = w->pinned;
	for (unsigned i = 0; i < nv; i++)
		for (uint32_t j = 0; j < vs[i]->nt; j++)
			cap += vs[i]->t[j].nf + 1;
	if (!(held = malloc((cap ? cap : 1) * sizeof(*held))))
		return -ENOMEM;
	for (unsigned i = 0; i < nv; i++)
		for (uint32_t j = 0; j < vs[i]->nt; j++) {
			const struct vtable *vt = &vs[i]->t[j];

			for (size_t f = 0; f < vt->nf; f++)
				memcpy(held[n++], vt->f[f].name, SFS_TABLE_NAME);
			if (vt->dvi[0])
				memcpy(held[n++], vt->dvi, SFS_TABLE_NAME);
		}
	if (n > 1)
		qsort(held, n, sizeof(*held), sfs__tbl_held_cmp);
	pthread_mutex_lock(&w->del_mu);
	free(w->held);
	w->held = held;
	w->nheld = n;
	for (size_t i = 0; i < w->nhold; i++) {
		struct pend *h = &w->hold[i];

		if (sfs__tbl_is_held(w, h->path)) {
			w->hold[k++] = *h;
		} else if (sfs__tbl_pend_push(&w->del, &w->ndel, &w->delcap, h->path, h->seq) == 0 &&
			   h->published) {
			/* gone from the published set already: its grace starts now */
			w->del[w->ndel - 1].token = sfs_qsbr_start(w->seg->hdr);
			w->del[w->ndel - 1].published = 1;
		}
	}
	w->nhold = k;
	pthread_mutex_unlock(&w->del_mu);
	return 0;
}

void sfs__tbl_version_free(struct version *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < v->nt; i++)
		vtable_free(&v->t[i]);
	free(v);
}

static void vtable_free(struct vtable *vt)
{
	for (size_t i = 0; i < vt->nf; i++) {
		free(vt->f[i].min_key);
		free(vt->f[i].max_key);
	}
	free(vt->f);
	memset(vt, 0, sizeof(*vt));
}

/*
 * The target op: back to the pinned version as a new publication (see
 * store/target.h and above).  The flush under way is abandoned (every
 * table's staged rows dropped, commit_mu released after the publication);
 * commit_mu is held throughout, so the background thread publishes
 * nothing meanwhile and readers see the version before or the pinned one.
 * The versions staged after the pin are dropped; the pin stays.
 */
int sfs__tbl_rollback(struct sfs_target_writer *w, uint64_t *seq)
{
	const struct version *v = w->pinned;
	char path[1024];
	int rc = 0;

	if (!v)
		return sfs__err(-ENOENT, "worker %u: no version is pinned", w->worker);
	/* every image is newer than any staged version (snapshot drains them) */
	if (w->nl0 && (rc = sfs__tbl_l0_drop(w)))
		return rc;
	if (!w->in_commit) {
		pthread_mutex_lock(&w->commit_mu);
		w->in_commit = 1;
	}
	snprintf(path, sizeof(path), "%s/ROLLBACK", w->base);
	if ((rc = intent_write(path, v)))
		goto out;
	sfs_fault("table.rollback.intent");
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		const struct vtable *vt = version_table(v, sid);
		struct table *t = sfs__tbl_table_at(w, sid);

		if (!t && vt && !(t = sfs__tbl_table_get(w, sid))) {
			rc = -ENOMEM;
			break;
		}
		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		sfs__tbl_stage_clear(t);	/* the abandoned flush's rows */
		if (!t->loaded)
			rc = sfs__tbl_table_load(t, 0);
		if (!rc && (vt || t->snap))
			rc = table_switch(w, t, vt, v->seq);
		if (!rc && vt)
			rollback_unhold(w, vt);
		pthread_mutex_unlock(&t->mu);
		if (!rc)
			sfs_fault("table.rollback.table");
	}
	if (rc) {
		w->rb_failed = 1;	/* some tables switched: never publish a mix */
		goto out;
	}
	sfs_fault("table.rollback.done");
	for (unsigned i = 0; i < w->nstaged; i++)
		sfs__tbl_version_free(w->staged[i]);
	w->nstaged = 0;
	(void)sfs__tbl_held_rebuild(w);	/* out of memory: their files stay parked a while longer */
	if (unlink(path) && errno != ENOENT) {
		rc = sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
		goto out;
	}
	w->applied = v->seq;
	w->commit_seq = 0;
	w->more = 0;
	w->failing = 0;
	w->rb_failed = 0;	/* every table is the pinned version again */
	rc = sfs__tbl_publish(w);
	if (!rc)
		*seq = v->seq;
out:
	w->in_commit = 0;
	pthread_mutex_unlock(&w->commit_mu);
	if (rc)
		sfs_log("worker %u: rollback to checkpoint %llu failed: %s", w->worker,
			(unsigned long long)v->id, sfs_last_error());
	return rc;
}

static const struct vtable *version_table(const struct version *v, uint32_t sid)
{
	for (uint32_t i = 0; v && i < v->nt; i++)
		if (v->t[i].sid == sid)
			return &v->t[i];
	return NULL;
}

/* @v as TABLES text at @path: the rollback's intent. */
static int intent_write(const char *path, const struct version *v)
{
	struct sfs_tsnap s = { .watermark = v->seq, .ntables = 0 };
	struct sfs_tsnap_table tabs[SFS_MAX_STATES];
	int rc = 0;

	memset(tabs, 0, sizeof(tabs));
	s.tables = tabs;
	for (uint32_t i = 0; i < v->nt && !rc; i++) {
		const struct vtable *vt = &v->t[i];
		struct sfs_tsnap_table *st = &tabs[s.ntables++];

		st->sid = vt->sid;
		snprintf(st->dvi, sizeof(st->dvi), "%s", vt->dvi);
		if (vt->nf && !(st->files = calloc(vt->nf, sizeof(*st->files))))
			rc = -ENOMEM;
		for (size_t f = 0; f < vt->nf && !rc; f++, st->nfiles++) {
			snprintf(st->files[f].name, sizeof(st->files[f].name), "%s", vt->f[f].name);
			st->files[f].level = vt->f[f].level;
			st->files[f].rows = vt->f[f].rows;
		}
	}
	if (!rc)
		rc = sfs_tsnap_write(path, &s);
	for (uint32_t i = 0; i < s.ntables; i++)
		free(tabs[i].files);
	return rc;
}

/*
 * Switch table @t (loaded, t->mu held) to @vt (NULL: empty) with watermark
 * @seq: one COMPACT snapshot through sfs__tbl_table_commit (so its rebase and
 * expiry policy holds) whose delta deletes the current files @vt does not
 * keep and adds @vt's others, then the session taken over (table_take;
 * on failure reloaded from the disk).  The current files @vt does not
 * name are deferred (held ones stay parked; at open nothing is held, and
 * the gc that follows collects the data files before their grace ends,
 * but not the vector index the previous snapshot names).  Cost: O(current
 * x kept files) name compares, one manifest commit, a footer read per file
 * the current version does not share.
 */
static int table_switch(struct sfs_target_writer *w, struct table *t, const struct vtable *vt,
			uint64_t seq)
{
	size_t nk = vt ? vt->nf : 0, ne = 0;
	struct sfs_mf_entry *e = malloc((t->nf + nk + 1) * sizeof(*e));
	unsigned char *keep = calloc(t->nf + 1, 1);
	long *match = malloc((nk + 1) * sizeof(*match));
	char old_dvi[SFS_TABLE_NAME], path[1024];
	uint64_t old_wm = t->watermark;
	int rc = 0;

	if (!e || !keep || !match) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < nk; k++) {
		match[k] = -1;
		for (size_t i = 0; i < t->nf && match[k] < 0; i++)
			if (!keep[i] && t->f[i].level == vt->f[k].level &&
			    strcmp(t->f[i].name, vt->f[k].name) == 0) {
				keep[i] = 1;
				match[k] = (long)i;
			}
	}
	for (size_t i = 0; i < t->nf; i++)
		if (!keep[i])
			sfs__tbl_entry_of(&t->f[i], SFS_MF_DELETE, t->f[i].level, &e[ne++]);
	for (size_t k = 0; k < nk; k++)
		if (match[k] < 0)
			ventry_of(&vt->f[k], SFS_MF_ADD, &e[ne++]);
	memcpy(old_dvi, t->dvi, sizeof(old_dvi));
	memcpy(t->dvi, vt ? vt->dvi : "", vt ? sizeof(t->dvi) : 1);
	t->watermark = seq;
	if ((rc = sfs__tbl_table_commit(w, t, SFS_MF_COMPACT, e, ne))) {
		memcpy(t->dvi, old_dvi, sizeof(t->dvi));
		t->watermark = old_wm;
		goto out;
	}
	for (size_t i = 0; i < t->nf; i++)
		if (!vtable_names(vt, t->f[i].name)) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->f[i].name);
			sfs__tbl_defer_unlink(w, path);
		}
	if (old_dvi[0] && !vtable_names(vt, old_dvi)) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, old_dvi);
		sfs__tbl_defer_unlink(w, path);
	}
	if ((rc = table_take(t, vt, match)))
		rc = sfs__tbl_table_load(t, 0);	/* the disk has the switch: reread it */
	else
		t->watermark = seq;
out:
	free(e);
	free(keep);
	free(match);
	return rc;
}

/* 1 if @vt (NULL: an empty table) names @name. */
static int vtable_names(const struct vtable *vt, const char *name)
{
	if (!vt || !name[0])
		return 0;
	if (strcmp(vt->dvi, name) == 0)
		return 1;
	for (size_t i = 0; i < vt->nf; i++)
		if (strcmp(vt->f[i].name, name) == 0)
			return 1;
	return 0;
}

/* The manifest entry of kept file @f. */
static void ventry_of(const struct vfile *f, int op, struct sfs_mf_entry *e)
{
	e->op = op;
	e->file = f->name;
	e->level = f->level;
	e->rows = f->rows;
	e->size = f->size;
	e->min_key = f->min_key;
	e->max_key = f->max_key;
	e->min_klen = f->min_klen;
	e->max_klen = f->max_klen;
	e->kg_lo = f->kg_lo;
	e->kg_hi = f->kg_hi;
}

/*
 * The session of @t (t->mu held) becomes @vt, just committed: the readers
 * of the files it keeps are taken over, the others opened, the vectors
 * read from its index; t->loads moves, so a shaping merge under way drops
 * its output (its inputs and vectors were the abandoned version's).
 * @match[k]: the current file that is @vt's k-th, or -1.
 */
static int table_take(struct table *t, const struct vtable *vt, const long *match)
{
	size_t nk = vt ? vt->nf : 0;
	struct tfile *nf = calloc(nk + 1, sizeof(*nf));
	int rc = 0;

	t->loads++;
	if (!nf)
		return -ENOMEM;
	for (size_t k = 0; k < nk && !rc; k++) {
		struct tfile *f = &nf[k];

		if (match[k] >= 0) {
			*f = t->f[match[k]];
			memset(&t->f[match[k]], 0, sizeof(*f));
			free(f->dv);
			f->dv = NULL;
			f->dv_words = 0;
			f->dv_set = 0;
			f->merging = 0;
		} else {
			memcpy(f->name, vt->f[k].name, sizeof(f->name));
			rc = sfs__tbl_file_open(t, f);
		}
		f->level = vt->f[k].level;
		f->order = k + 1;
	}
	sfs__tbl_table_drop_files(t);
	free(t->f);
	t->f = nf;
	t->nf = nk;
	t->cap = nk + 1;
	t->order = nk;
	memcpy(t->dvi, vt ? vt->dvi : "", vt ? sizeof(t->dvi) : 1);
	if (!rc)
		rc = sfs__tbl_dv_load(t);
	t->loaded = rc == 0;
	return rc;
}

/* The files of @vt are live again: no longer parked.  Right after the
 * table's switch, under its lock: a merge of the switched table that
 * parks one of them again later must stay parked. */
static void rollback_unhold(struct sfs_target_writer *w, const struct vtable *vt)
{
	size_t k = 0;

	pthread_mutex_lock(&w->del_mu);
	for (size_t i = 0; i < w->nhold; i++) {
		const char *name = strrchr(w->hold[i].path, '/');

		name = name ? name + 1 : w->hold[i].path;
		if (!vtable_names(vt, name))
			w->hold[k++] = w->hold[i];
	}
	w->nhold = k;
	pthread_mutex_unlock(&w->del_mu);
}

/*
 * The target op: an empty store as a new publication (store/target.h).  A
 * rollback to a version of no table at the applied seq: the intent names
 * no file, each table commits one snapshot with an empty live set, and a
 * kill midway is finished by the next open as any rollback's.  The pin and
 * the staged versions go (their files are unlinked after their grace
 * period).  Cost: one manifest commit per table, no data file read.
 */
int sfs__tbl_reset(struct sfs_target_writer *w, uint64_t *seq)
{
	struct version *empty = calloc(1, sizeof(*empty)), *pinned = w->pinned;
	int rc;

	if (!empty)
		return -ENOMEM;
	empty->seq = w->applied;
	w->pinned = empty;
	rc = sfs__tbl_rollback(w, seq);
	w->pinned = NULL;
	sfs__tbl_version_free(empty);
	sfs__tbl_version_free(pinned);
	(void)sfs__tbl_held_rebuild(w);	/* out of memory: parked files wait for the next pin */
	return rc;
}

/*
 * At open, before the gc: a rollback killed after its intent is finished
 * from the intent (TABLES' format, so each file's entry comes from its
 * footer, as adopt's).  @t: the table of @sid, loaded without gc.
 */
int sfs__tbl_rollforward_table(struct sfs_target_writer *w, struct table *t,
			       const struct sfs_tsnap *s)
{
	const struct sfs_tsnap_table *st = NULL;
	struct vtable vt;
	int rc = 0;

	for (uint32_t i = 0; i < s->ntables; i++)
		if (s->tables[i].sid == t->sid)
			st = &s->tables[i];
	memset(&vt, 0, sizeof(vt));
	vt.sid = t->sid;
	if (st) {
		if (st->dvi[0] && (rc = sfs__tbl_name_set(vt.dvi, st->dvi, w->base)))
			return rc;
		if (!(vt.f = calloc(st->nfiles + 1, sizeof(*vt.f))))
			return -ENOMEM;
		for (uint32_t i = 0; i < st->nfiles && !rc; i++) {
			struct tfile f;

			memset(&f, 0, sizeof(f));
			if (!(rc = sfs__tbl_name_set(f.name, st->files[i].name, w->base)) &&
			    !(rc = sfs__tbl_file_open(t, &f)) && !(rc = vfile_set(&vt.f[vt.nf], &f,
									  st->files[i].level)))
				vt.nf++;
			sfs__tbl_file_free(&f);
		}
	}
	if (!rc && (st || t->snap))
		rc = table_switch(w, t, st ? &vt : NULL, s->watermark);
	vtable_free(&vt);
	return rc;
}
