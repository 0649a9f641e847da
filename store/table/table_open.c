/*
 * table_open.c — a writer's life (store/target.h: open, close, busy): the
 * store found ours (IDENTITY names this segment), adopted from a restore
 * (TABLES and its files put flat at <store>/ by table_admin.c: linked into
 * fresh table directories, one COMPACT snapshot per table) or wiped; each
 * table loaded (table_session.c), a rollback killed midway finished
 * (table_rollback.c), level-0 files left by a kill up-levelled
 * (table_round.c), the version published and the background thread
 * started (table_merge.c).
 *
 * Next on a key's path: table_write.c (apply, commit).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "shm/atomic.h"
#include "store/table/layout/manifest.h"
#include "store/table/layout/sync.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"

static int store_prepare(struct sfs_target_writer *w);
static int adopt(struct sfs_target_writer *w, const char *tables, const char *ident);
static int drop_tables(struct sfs_target_writer *w);
static int write_text(const char *path, const char *text);

int sfs__tbl_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		  const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	struct sfs_tsnap rb = { 0 };
	char intent[1024];
	struct stat ist;
	struct dirent *e;
	int have_rb = 0;
	DIR *d;
	int rc;

	(void)cfg;
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->pub_mu, NULL);
	pthread_mutex_init(&w->commit_mu, NULL);
	pthread_mutex_init(&w->del_mu, NULL);
	w->gt = calloc(SFS_MAX_STATES, sizeof(*w->gt));
	w->gf = calloc(SFS_TABLE_PUB_FILES, sizeof(*w->gf));
	if (!w->gt || !w->gf) {
		rc = -ENOMEM;
		goto fail;
	}
	w->seg = s;
	w->worker = worker;
	w->self = self;
	w->knobs = sfs_table_knobs();
	w->kix_check = getenv("SFS_TABLE_KEY_INDEX_CHECK") &&
		       strcmp(getenv("SFS_TABLE_KEY_INDEX_CHECK"), "1") == 0;
	/* The working tables need no fsync of their own: the checkpointer
	 * fsyncs each file it links, a restore rebuilds them from a
	 * checkpoint and a new group starts them empty (store/table/layout/sync.h).
	 * This process writes no other layout files. */
	sfs_layout_set_sync(!(w->knobs & SFS_TABLE_K_CKPT_SYNC));
	/* removed metadata files' inodes reused (layout/file.h); =0: unlinked */
	sfs_layout_set_spares(!getenv("SFS_TABLE_SPARES") || strcmp(getenv("SFS_TABLE_SPARES"), "0"));
	if ((rc = sfs__table_store_dir(s, worker, w->base, sizeof(w->base))) ||
	    (rc = sfs__table_pub_find(s, worker, 1, &w->pub)) || (rc = store_prepare(w)))
		goto fail;
	sfs_store_relaxed(&w->pub->tp_knobs, w->knobs);
	w->merge_budget = sfs_table_merge_budget();
	w->zstd_from = sfs_table_zstd_from();
	w->kf_min_keys = sfs_table_kfilter_min_keys();
	w->kf_after = sfs_table_kfilter_after();
	w->kf_rebuild_delay_ms = getenv("SFS_TABLE_KFILTER_REBUILD_DELAY_MS")
					 ? (uint32_t)atoi(getenv("SFS_TABLE_KFILTER_REBUILD_DELAY_MS"))
					 : 0;
	w->merge_base = sfs_load_relaxed(&w->pub->tp_bytes_written);
	sfs_store_relaxed(&w->pub->tp_merge_budget, w->merge_budget);
	w->applied = sfs_load_acquire(&w->pub->tp_applied);
	snprintf(intent, sizeof(intent), "%s/ROLLBACK", w->base);
	if (stat(intent, &ist) == 0) {
		/* a rollback killed after its intent: finished below, before the gc */
		if ((rc = sfs_tsnap_read(intent, &rb)))
			goto fail;
		have_rb = 1;
	}
	if (!(d = opendir(w->base))) {
		rc = sfs__err(sfs__errno(), "%s: %s", w->base, strerror(errno));
		goto fail;
	}
	while (!rc && (e = readdir(d))) {
		unsigned sid;
		char c;
		struct table *t;

		if (sscanf(e->d_name, "s%u%c", &sid, &c) != 1 || sid >= SFS_MAX_STATES)
			continue;
		if (!(t = sfs__tbl_table_get(w, sid))) {
			rc = -ENOMEM;
			break;
		}
		if (have_rb && ((rc = sfs__tbl_table_load(t, 0)) || (rc = sfs__tbl_rollforward_table(w, t, &rb))))
			break;
		if ((rc = sfs__tbl_table_load(t, 1)))
			break;
		if (w->knobs & SFS_TABLE_K_ROUND)
			rc = sfs__tbl_catch_up_rounds(w, t, &w->main_sc);
	}
	closedir(d);
	if (!rc && have_rb) {
		if (unlink(intent) && errno != ENOENT)
			rc = sfs__err(sfs__errno(), "%s: %s", intent, strerror(errno));
		else
			w->applied = rb.watermark;
		sfs_log("table store %s: finished a rollback to seq %llu", w->base,
			(unsigned long long)rb.watermark);
	}
	/* the images after the tables: one at or below the applied seq was
	 * converted before a kill (table_l0.c) */
	if (rc || (rc = sfs__tbl_l0_load(w)) || (rc = sfs__tbl_publish(w)))
		goto fail;
	if (self) {
		if ((rc = -pthread_create(&w->bg, NULL, sfs__tbl_bg_main, w))) {
			sfs__err(rc, "worker %u: cannot start the table maintenance thread", worker);
			goto fail;
		}
		w->bg_on = 1;
	}
	sfs_tsnap_free(&rb);
	*out = w;
	return 0;
fail:
	sfs_tsnap_free(&rb);
	sfs__tbl_close(w);
	return rc;
}

/* Ours (IDENTITY names this segment), adopted (TABLES), or wiped. */
static int store_prepare(struct sfs_target_writer *w)
{
	char path[1024], ident[SFS_JOB_NAME_MAX + 64], cur[SFS_JOB_NAME_MAX + 64] = "";
	struct stat st;
	FILE *f;
	int rc;

	snprintf(ident, sizeof(ident), "%s/%llu/%llu\n", w->seg->hdr->sh_job,
		 (unsigned long long)w->seg->hdr->sh_created_ns,
		 (unsigned long long)w->seg->hdr->sh_generation);
	if ((rc = sfs_mkdirs(w->base, 0700)))
		return rc;
	snprintf(path, sizeof(path), "%s/TABLES", w->base);
	if (stat(path, &st) == 0) {
		rc = adopt(w, path, ident);
		goto not_ours;
	}
	snprintf(path, sizeof(path), "%s/IDENTITY", w->base);
	if ((f = fopen(path, "r"))) {
		if (!fgets(cur, sizeof(cur), f))
			cur[0] = '\0';
		fclose(f);
	}
	if (strcmp(cur, ident) == 0)
		return 0;
	if (cur[0])
		sfs_log("table store %s: state of another group (%.*s): starting empty", w->base,
			(int)strcspn(cur, "\n"), cur);
	if (!(rc = drop_tables(w)))
		rc = write_text(path, ident);
not_ours:
	/* a rollback intent of the state just replaced is not this one's, nor
	 * are its buffer images (table_l0.c) */
	snprintf(path, sizeof(path), "%s/ROLLBACK", w->base);
	if (!rc && unlink(path) && errno != ENOENT)
		rc = sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	if (!rc)
		rc = sfs__tbl_l0_wipe(w->base);
	return rc;
}

/*
 * A restore put a checkpoint's files and TABLES at the store's top level
 * (the supervisor, before any child started, with the checkpoint's state
 * registry): link them into fresh table directories, commit one snapshot
 * per table, then drop TABLES and the flat names.  A kill midway leaves
 * TABLES: the next open starts over.
 */
static int adopt(struct sfs_target_writer *w, const char *tables, const char *ident)
{
	struct sfs_tsnap s;
	char from[1024], to[1024];
	int rc;

	if ((rc = sfs_tsnap_read(tables, &s)))
		return rc;
	if ((rc = drop_tables(w)))
		goto out;
	for (uint32_t k = 0; k < s.ntables && !rc; k++) {
		const struct sfs_tsnap_table *st = &s.tables[k];
		struct sfs_mf_entry *e = NULL;
		struct sfs_mf_commit c = { .kind = SFS_MF_COMPACT, .schema_id = st->sid };
		struct table tt;

		if (st->sid >= SFS_MAX_STATES) {
			rc = sfs__err(SFS_ECORRUPT, "%s: state %u out of range", tables, st->sid);
			break;
		}
		memset(&tt, 0, sizeof(tt));
		snprintf(tt.dir, sizeof(tt.dir), "%.490s/s%u", w->base, st->sid);
		if ((rc = sfs_mkdirs(tt.dir, 0700)))
			break;
		if (!(e = calloc(st->nfiles + 1, sizeof(*e))) ||
		    !(tt.f = calloc(st->nfiles + 1, sizeof(*tt.f)))) {
			free(e);
			rc = -ENOMEM;
			break;
		}
		for (uint32_t i = 0; i < st->nfiles && !rc; i++) {
			struct tfile *f = &tt.f[tt.nf++];

			snprintf(from, sizeof(from), "%s/%s", w->base, st->files[i].name);
			snprintf(to, sizeof(to), "%s/%s", tt.dir, st->files[i].name);
			if (!(rc = sfs__tbl_name_set(f->name, st->files[i].name, tables)) &&
			    /* already there (a retried adoption): fine if the same */
			    !(rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL)) &&
			    !(rc = sfs__tbl_file_open(&tt, f)))
				sfs__tbl_entry_of(f, SFS_MF_ADD, st->files[i].level, &e[i]);
		}
		if (!rc && st->dvi[0]) {
			snprintf(from, sizeof(from), "%s/%s", w->base, st->dvi);
			snprintf(to, sizeof(to), "%s/%s", tt.dir, st->dvi);
			rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
			c.dv_index = st->dvi;
		}
		if (!rc) {
			c.entries = e;
			c.n = st->nfiles;
			rc = sfs_mf_commit(tt.dir, 1, &c);
		}
		for (size_t i = 0; i < tt.nf; i++)
			sfs__tbl_file_free(&tt.f[i]);
		free(tt.f);
		free(e);
	}
	if (!rc) {
		snprintf(to, sizeof(to), "%s/IDENTITY", w->base);
		rc = write_text(to, ident);
	}
	if (!rc && unlink(tables))
		rc = sfs__err(sfs__errno(), "%s: %s", tables, strerror(errno));
	for (uint32_t k = 0; k < s.ntables && !rc; k++) {
		for (uint32_t i = 0; i < s.tables[k].nfiles; i++) {
			snprintf(from, sizeof(from), "%s/%s", w->base, s.tables[k].files[i].name);
			unlink(from);
		}
		if (s.tables[k].dvi[0]) {
			snprintf(from, sizeof(from), "%s/%s", w->base, s.tables[k].dvi);
			unlink(from);
		}
	}
	if (!rc)
		sfs_log("table store %s: adopted %u tables of a restore", w->base, s.ntables);
out:
	sfs_tsnap_free(&s);
	return rc;
}

/* Remove the table directories s<sid>/ of the store. */
static int drop_tables(struct sfs_target_writer *w)
{
	char path[1024];
	struct dirent *e;
	DIR *d = opendir(w->base);
	int rc = 0;

	if (!d)
		return 0;
	while (!rc && (e = readdir(d))) {
		unsigned sid;
		char c;

		if (sscanf(e->d_name, "s%u%c", &sid, &c) != 1)
			continue;
		snprintf(path, sizeof(path), "%s/%s", w->base, e->d_name);
		rc = sfs_rmtree(path);
	}
	closedir(d);
	return rc;
}

static int write_text(const char *path, const char *text)
{
	char tmp[1024];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	return sfs_file_commit(f, tmp, path, fputs(text, f) < 0 ? -EIO : 0);
}

int sfs__tbl_busy(struct sfs_target_writer *w)
{
	/* background work has its own thread; unlinks are reaped there */
	return w->more;
}

void sfs__tbl_close(struct sfs_target_writer *w)
{
	if (!w)
		return;
	if (w->bg_on) {
		sfs_store_release(&w->stop, 1);
		pthread_join(w->bg, NULL);
	}
	for (uint32_t sid = 0; sid < SFS_MAX_STATES; sid++) {
		struct table *t = w->t[sid];

		if (!t)
			continue;
		sfs__tbl_table_drop_files(t);
		sfs__tbl_kix_free(w, t);
		sfs__tbl_kf_free(w, t);
		free(t->f);
		free(t->sb);
		free(t->rows);
		free(t->clr);
		pthread_mutex_destroy(&t->mu);
		free(t);
	}
	sfs__tbl_scratch_free(&w->main_sc);
	sfs__tbl_scratch_free(&w->bg_sc);
	sfs__tbl_l0_free(w);
	for (unsigned i = 0; i < w->nstaged; i++)
		sfs__tbl_version_free(w->staged[i]);
	sfs__tbl_version_free(w->pinned);
	free(w->held);
	free(w->hold);	/* parked files: orphans the next open collects */
	free(w->del);	/* pending unlinks: orphans the next open collects */
	free(w->gt);
	free(w->gf);
	pthread_mutex_destroy(&w->pub_mu);
	/* A commit left half-way (a stop mid-flush) holds commit_mu, locked by
	 * the maintenance thread that owned this writer and has stopped: it is
	 * neither unlocked from here (another thread's lock: undefined) nor
	 * destroyed (a held mutex: undefined); its memory goes with w. */
	if (!w->in_commit)
		pthread_mutex_destroy(&w->commit_mu);
	pthread_mutex_destroy(&w->del_mu);
	free(w);
}
