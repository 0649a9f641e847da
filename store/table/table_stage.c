/*
 * table_stage.c — the writer's version staged for a checkpoint
 * (store/target.h: snapshot, files).
 *
 * Checkpoints: snapshot() links each table's live files and vector index
 * into the stage, flat, and writes TABLES (store/table/table_snap.h); a
 * restore puts them back at <store>/ and open() adopts them (links into
 * the table directories, one COMPACT snapshot per table).
 * A stage also keeps its version's metadata for a pin (table_rollback.c).
 *
 * Off a key's path: it reads what table_session.c committed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fs.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"

/*
 * Stage the store's current version in @dir: every table's live data files
 * linked into @dir/shared (immutable; names are unique per table:
 * t<sid>-...), its vector index linked beside TABLES (table_snap.h), which
 * describes them: a checkpoint copies those two.  Each table is read under its
 * lock, so a shaping merge committing meanwhile is seen whole or not at
 * all; merges change no row, so tables need not be read at one instant.
 */
int sfs__tbl_snapshot(struct sfs_target_writer *w, const char *dir)
{
	struct sfs_tsnap s = { .watermark = w->applied };
	struct sfs_tsnap_table tabs[SFS_MAX_STATES];
	char from[1024], to[1024];
	struct version *v = NULL;
	uint64_t id;
	int rc = 0;

	/* images first: a staged version holds none yet (table_l0.c) */
	if (w->nl0 && (rc = sfs__tbl_l0_drain(w)))
		return rc;
	s.watermark = w->applied;
	/* a checkpoint's stage: its version kept for a pin (sfs__tbl_pin) */
	if (sfs_target_stage_id(dir, &id) && !(v = calloc(1, sizeof(*v))))
		return -ENOMEM;
	if (v) {
		v->id = id;
		v->seq = w->applied;
	}
	memset(tabs, 0, sizeof(tabs));
	s.tables = tabs;
	snprintf(to, sizeof(to), "%s/" SFS_STAGE_SHARED, dir);
	if ((rc = sfs_mkdirs(to, 0700)))	/* one mkdir(2) once the parents exist */
		return rc;
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = sfs__tbl_table_at(w, sid);
		struct sfs_tsnap_table *st;

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		if (!t->loaded) {
			rc = sfs__err(-EAGAIN, "table %s is not loaded (a failed reload)", t->dir);
		} else if (t->nf) {
			if (v)
				rc = sfs__tbl_vtable_capture(w, t, &v->t[v->nt++]);
			st = &tabs[s.ntables++];
			st->sid = sid;
			snprintf(st->dvi, sizeof(st->dvi), "%s", t->dvi);
			if (!(st->files = calloc(t->nf, sizeof(*st->files))))
				rc = -ENOMEM;
			for (size_t i = 0; i < t->nf && !rc; i++) {
				snprintf(st->files[i].name, sizeof(st->files[i].name), "%s", t->f[i].name);
				st->files[i].level = t->f[i].level;
				st->files[i].rows = t->f[i].rows;
				st->nfiles++;
				snprintf(from, sizeof(from), "%s/%s", t->dir, t->f[i].name);
				snprintf(to, sizeof(to), "%s/" SFS_STAGE_SHARED "/%s", dir,
					 t->f[i].name);
				/* already staged (a retried snapshot): fine if the same */
				rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
			}
			if (!rc && t->dvi[0]) {
				snprintf(from, sizeof(from), "%s/%s", t->dir, t->dvi);
				snprintf(to, sizeof(to), "%s/%s", dir, t->dvi);
				rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
			}
		}
		pthread_mutex_unlock(&t->mu);
	}
	if (!rc) {
		snprintf(to, sizeof(to), "%s/TABLES", dir);
		rc = sfs_tsnap_write(to, &s);
	}
	for (uint32_t i = 0; i < s.ntables; i++)
		free(tabs[i].files);
	if (!rc && v)
		return sfs__tbl_version_keep(w, v);
	if (v) {
		sfs__tbl_version_free(v);
		(void)sfs__tbl_held_rebuild(w);	/* what its capture held */
	}
	return rc;
}

int sfs__tbl_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg)
{
	char path[1024];
	int rc = 0;

	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = sfs__tbl_table_at(w, sid);

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		for (size_t i = 0; i < t->nf && !rc; i++) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->f[i].name);
			rc = fn(arg, path);
		}
		if (!rc && t->dvi[0]) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->dvi);
			rc = fn(arg, path);
		}
		pthread_mutex_unlock(&t->mu);
	}
	return rc;
}
