/*
 * table_publish.c — what the readers see, and when a file may go.
 *
 * Publication: after a commit the live files of every table (names,
 * levels, vector index names) and the applied seq are published in the
 * worker's region under a seqlock (table.h); readers catch up from it.
 * Files that leave the live set are unlinked after a QSBR grace period
 * (a reader that has not caught up may still open them).
 * A file a kept version names (rollback in place: table_rollback.c) is
 * parked instead, until no kept version names it.
 *
 * Last on a key's path: the readers take it from here (table_read.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "shm/atomic.h"
#include "shm/qsbr.h"
#include "store/table/table_int.h"

/*
 * Publish the live set of every table and the applied seq.  Gathered first
 * (each table under its lock, which a round or merge on the other thread
 * may hold for a while), then copied into the region: readers see the
 * seqlock odd only for the copy.  pub_mu serializes the two threads'
 * publications (gather and copy), so the region never goes back to an
 * older set.  Callers hold commit_mu (the set must match the tag: no table
 * may be ahead of w->applied).
 */
int sfs__tbl_publish(struct sfs_target_writer *w)
{
	struct sfs_table_pub *p = w->pub;
	struct tfile **tmp = NULL;
	size_t tcap = 0;
	uint32_t nt = 0, nf = 0;
	uint64_t dropped;
	int rc = 0;

	if (w->rb_failed)
		return sfs__err(SFS_ECORRUPT, "worker %u: a rollback failed midway, the tables "
				"are not one version: nothing is published", w->worker);
	pthread_mutex_lock(&w->pub_mu);
	/* files deferred so far have left the sets gathered below */
	pthread_mutex_lock(&w->del_mu);
	dropped = w->del_seq;
	pthread_mutex_unlock(&w->del_mu);
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = sfs__tbl_table_at(w, sid);
		struct sfs_table_pub_table *pt;

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		if (!t->loaded) {
			pthread_mutex_unlock(&t->mu);
			continue;
		}
		if (t->nf > tcap) {
			free(tmp);
			if (!(tmp = malloc((tcap = t->nf * 2) * sizeof(*tmp)))) {
				tcap = 0;
				rc = -ENOMEM;
			}
		}
		if (!rc && nf + t->nf > SFS_TABLE_PUB_FILES)
			rc = sfs__err(SFS_EFULL, "worker %u: more than %u live table files", w->worker,
				      SFS_TABLE_PUB_FILES);
		if (!rc) {
			pt = &w->gt[nt++];
			pt->pt_sid = sid;
			pt->pt_first = nf;
			pt->pt_nfiles = (uint32_t)t->nf;
			memcpy(pt->pt_dvi, t->dvi, sizeof(pt->pt_dvi));
			sfs__tbl_files_sorted(t, tmp);
			for (size_t i = 0; i < t->nf; i++, nf++) {
				memcpy(w->gf[nf].pf_name, tmp[i]->name, SFS_TABLE_NAME);
				w->gf[nf].pf_level = tmp[i]->level;
				w->gf[nf].pf_rows = tmp[i]->rows;
			}
		}
		pthread_mutex_unlock(&t->mu);
	}
	if (!rc) {
		/* odd: changing — already odd when a compactor died in this copy
		 * (kill -9): then the torn set stays marked until this copy ends */
		uint64_t seq = p->tp_seq | 1;

		sfs_store_release(&p->tp_seq, seq);
		cmm_smp_wmb();
		memcpy(p->tp_tables, w->gt, nt * sizeof(*w->gt));
		if (nf)
			memcpy(p->tp_files, w->gf, nf * sizeof(*w->gf));
		p->tp_ntables = nt;
		p->tp_nfiles = nf;
		p->tp_applied = w->applied;
		/* the images (table_l0.c: never more than SFS_TABLE_PUB_L0) */
		p->tp_nl0 = (uint32_t)w->nl0;
		for (size_t i = 0; i < w->nl0; i++) {
			p->tp_l0[i].pl_seq = w->l0[i].seq;
			memcpy(p->tp_l0[i].pl_name, w->l0[i].name, SFS_TABLE_NAME);
		}
		cmm_smp_wmb();
		sfs_store_release(&p->tp_seq, seq + 1);
		sfs_store_release(&p->tp_published, p->tp_published + 1);
		/* their grace period starts now that no published set names them */
		pthread_mutex_lock(&w->del_mu);
		for (size_t i = 0; i < w->ndel; i++)
			if (!w->del[i].published && w->del[i].seq <= dropped) {
				w->del[i].token = sfs_qsbr_start(w->seg->hdr);
				w->del[i].published = 1;
			}
		for (size_t i = 0; i < w->nhold; i++)
			if (w->hold[i].seq <= dropped)
				w->hold[i].published = 1;	/* out of the published set */
		pthread_mutex_unlock(&w->del_mu);
	}
	pthread_mutex_unlock(&w->pub_mu);
	free(tmp);
	return rc;
}

/*
 * Unlink @path once every reader that might still open it caught up.  The
 * grace period starts at the first publication that no longer lists the
 * file (sfs__tbl_publish), not here: a reader that passes a quiescent point after
 * this call but before that publication still copies a set naming the
 * file.  (Started here, a merge's inputs vanished under readers whenever
 * the background thread ran another merge between its commit and its
 * publication — seen once merges ran at idle priority.)  A file a kept
 * version names (rollback in place) waits in w->hold instead, until no
 * kept version names it (sfs__tbl_held_rebuild) or a rollback makes it live again
 * (rollback_unhold).
 */
void sfs__tbl_defer_unlink(struct sfs_target_writer *w, const char *path)
{
	pthread_mutex_lock(&w->del_mu);
	if (!w->self)
		unlink(path);	/* the supervisor's adopt: no reader exists yet */
	else if (sfs__tbl_is_held(w, path))
		(void)sfs__tbl_pend_push(&w->hold, &w->nhold, &w->holdcap, path, ++w->del_seq);
	else
		(void)sfs__tbl_pend_push(&w->del, &w->ndel, &w->delcap, path, ++w->del_seq);
	pthread_mutex_unlock(&w->del_mu);
}

/* 1 if a kept version (staged or pinned) names the file at @path.  del_mu
 * held.  O(log held). */
int sfs__tbl_is_held(const struct sfs_target_writer *w, const char *path)
{
	const char *name = strrchr(path, '/');

	name = name ? name + 1 : path;
	return w->nheld && bsearch(name, w->held, w->nheld, sizeof(*w->held), sfs__tbl_held_cmp) != NULL;
}

int sfs__tbl_held_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Append to a pending list (del or hold); 0, or -ENOMEM (the file leaks:
 * the next open's gc collects it).  del_mu held. */
int sfs__tbl_pend_push(struct pend **arr, size_t *n, size_t *cap, const char *path, uint64_t seq)
{
	struct pend *d;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct pend *na = realloc(*arr, nc * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	d = &(*arr)[(*n)++];
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->seq = seq;
	d->token = 0;
	d->published = 0;
	return 0;
}

int sfs__tbl_reap(struct sfs_target_writer *w)
{
	size_t k = 0;

	pthread_mutex_lock(&w->del_mu);
	for (size_t i = 0; i < w->ndel; i++) {
		if (w->del[i].published && sfs_qsbr_check(w->seg, w->self, w->del[i].token, 0) == 1)
			unlink(w->del[i].path);
		else
			w->del[k++] = w->del[i];
	}
	w->ndel = k;
	pthread_mutex_unlock(&w->del_mu);
	return k > 0;
}
