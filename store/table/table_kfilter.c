/*
 * table_kfilter.c — the key filter of a map or list table: one blocked
 * Bloom filter over the keys of every row at level >= 1, in the compactor
 * only (process-local, guarded by t->mu like the key index), so the map
 * diff learns with one test that a written entry is new to the table.
 *
 * Why: the map diff (table_write.c) must find, for each entry a barrier
 * writes, the row it supersedes, to mask it.  It asks every file whose
 * prefix filter admits the entry's map, and in each a key filter; at q9
 * 100M that was 13.5 files per row written over up to 178 files (1.39
 * billion keys probed), a cost that grows with the run while nearly every
 * entry (a bid) is new.  A key the table filter rejects is in no level >= 1
 * file: the diff skips its prefix and key tests there.  A value table has
 * the exact key index instead (table_kindex.c); a map table holds ~90M
 * entries at q9 100M, which at the index's ~20 bytes a key would be 1.8 GB,
 * against 1.25 bytes a key here.
 *
 * What it holds: a superset of the keys of the live rows at level >= 1.
 * Rows reach level >= 1 only through a round (table_round.c: the level-0
 * file's rows, relabelled or rewritten), which adds its keys before it
 * commits (a failed round leaves extra keys: harmless); merges move rows
 * between levels and drop some, adding none; a whole-file TTL drop and the
 * masking of rows only remove.  Anything that replaces the file set — a
 * reload after a failure, a rollback, the open — drops the table's files
 * (sfs__tbl_table_drop_files), which invalidates the filter; an invalid
 * filter answers "maybe" (the diff asks the files, as without it) until the
 * background thread has rebuilt it from the level >= 1 files' keys.
 *
 * Size: KF_BITS_PER_KEY bits a key (Parquet's split-block filter, 256-bit
 * blocks: ~0.5 % false positives at 10 bits), sized for twice the keys it
 * was built for (w->kf_min_keys at least: SFS_TABLE_KFILTER_MIN_KEYS).  When the keys added pass that
 * capacity the filter stays in use, its false positives rising, while the
 * background thread builds one of four times the keys: rebuilds read every
 * level >= 1 key about 1.33 times over a run that only grows.  Rounds that
 * commit during a rebuild add their keys to both filters (atomic ORs: the
 * rebuild adds without the lock).  SFS_TABLE_KEY_FILTER=0 switches it off.
 *
 * Cost: 1.25 bytes a key of compactor memory (~115 MB at q9 100M), one
 * hash and one filter test per entry in the map diff, one filter add per
 * row a round lands, and the rebuilds' reads (tp_kfilter_rebuild_ns).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/atomic.h"
#include "store/table/layout/datafile_fmt.h"
#include "store/table/table_int.h"

#define KF_BITS_PER_KEY 10u

int sfs__tbl_kf_on(const struct sfs_target_writer *w, const struct table *t)
{
	return (w->knobs & SFS_TABLE_K_KEY_FILTER) && sfs__tbl_is_map_kind(t->kind);
}

static uint32_t *kf_alloc(uint64_t keys, uint32_t *nblocks)
{
	uint64_t nb = (keys * KF_BITS_PER_KEY + 255) / 256;

	if (nb > UINT32_MAX)
		return NULL;
	*nblocks = (uint32_t)nb;
	return calloc(nb, 32);
}

static void kf_set(uint32_t *bits, uint32_t nblocks, uint64_t h, int atomic)
{
	uint32_t *b = (uint32_t *)(void *)sbbf_block((uint8_t *)bits, nblocks, h);

	for (int i = 0; i < 8; i++) {
		uint32_t m = 1u << (((uint32_t)h * sbbf_salt[i]) >> 27);

		if (atomic)
			__atomic_fetch_or(&b[i], m, __ATOMIC_RELAXED);
		else
			b[i] |= m;
	}
}

static void kf_publish(struct sfs_target_writer *w, struct table *t)
{
	uint64_t bytes = (uint64_t)t->kf.nblocks * 32 + (uint64_t)t->kf.nnblocks * 32;

	uatomic_add(&w->pub->tp_kfilter_bytes, bytes - t->kf.pub_bytes);
	t->kf.pub_bytes = bytes;
}

void sfs__tbl_kf_invalidate(struct table *t)
{
	struct kfilter *f = &t->kf;

	free(f->bits);
	f->bits = NULL;
	f->nblocks = 0;
	f->n = f->cap = 0;
	f->valid = 0;
	if (!f->building)
		free(f->nbits);
	f->nbits = NULL;	/* a rebuild under way sees it, gives up and frees its own */
	f->nnblocks = 0;
	f->nn = f->ncap = 0;
}

void sfs__tbl_kf_free(struct sfs_target_writer *w, struct table *t)
{
	sfs__tbl_kf_invalidate(t);
	kf_publish(w, t);
}

/* A table with nothing at level >= 1 has a valid empty filter (t->mu held). */
void sfs__tbl_kf_maybe_empty(struct sfs_target_writer *w, struct table *t)
{
	struct kfilter *f = &t->kf;

	if (f->valid || !sfs__tbl_kf_on(w, t))
		return;
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level > 0)
			return;
	sfs__tbl_kf_invalidate(t);
	if (!(f->bits = kf_alloc(2 * (uint64_t)w->kf_min_keys, &f->nblocks)))
		return;	/* no memory: the diff asks the files */
	f->cap = 2 * (uint64_t)w->kf_min_keys;
	f->valid = 1;
	kf_publish(w, t);
}

/* Keys @h[0..@n) are about to reach level >= 1 (t->mu held). */
void sfs__tbl_kf_add(struct table *t, const uint64_t *h, size_t n)
{
	struct kfilter *f = &t->kf;

	for (size_t i = 0; f->valid && i < n; i++)
		kf_set(f->bits, f->nblocks, h[i], 0);
	if (f->valid)
		f->n += n;
	for (size_t i = 0; f->nbits && i < n; i++)
		kf_set(f->nbits, f->nnblocks, h[i], 1);
	if (f->nbits)
		__atomic_fetch_add(&f->nn, n, __ATOMIC_RELAXED);
}

/* 0: no level >= 1 file holds the key of hash @h; 1: one may (t->mu held). */
int sfs__tbl_kf_maybe(const struct table *t, uint64_t h)
{
	const struct kfilter *f = &t->kf;
	const uint32_t *b;
	uint32_t clear = 0;

	if (!f->valid)
		return 1;
	b = (const uint32_t *)(const void *)sbbf_block((uint8_t *)f->bits, f->nblocks, h);
	for (int i = 0; i < 8; i++)
		clear |= ~b[i] & 1u << (((uint32_t)h * sbbf_salt[i]) >> 27);
	return clear == 0;
}

/*
 * The background thread's upkeep of @t's filter: (re)built from the level
 * >= 1 files' keys, vectors not applied (a masked row's key only adds a
 * false positive), when it is invalid or holds more keys than it was sized
 * for.  The file set is copied under t->mu, the files read without it,
 * rounds meanwhile add to the new filter too; a reload meanwhile (t->loads)
 * or a file gone before it was read makes it give up, to be retried.
 * 1 if rebuilt, 0 if not needed or given up, < 0 error.
 */
int sfs__tbl_kf_upkeep(struct sfs_target_writer *w, struct table *t)
{
	struct kfilter *f = &t->kf;
	char (*names)[SFS_TABLE_NAME] = NULL;
	size_t nn = 0;
	uint64_t loads, rows = 0, keys = 0, t0 = sfs_now_ns();
	uint32_t *nbits = NULL, nblocks = 0;
	char path[1024];
	int rc = 0;

	pthread_mutex_lock(&t->mu);
	sfs__tbl_kf_maybe_empty(w, t);
	if (!sfs__tbl_kf_on(w, t) || !t->loaded || f->nbits || (f->valid && f->n <= f->cap)) {
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	loads = t->loads;
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level > 0)
			rows += t->f[i].rows;
	if (f->valid && f->n > rows)
		rows = f->n;	/* updates of existing keys counted too: the larger */
	if (!(names = calloc(t->nf + 1, sizeof(*names))) ||
	    !(nbits = kf_alloc(4 * (rows > w->kf_min_keys ? rows : w->kf_min_keys), &nblocks))) {
		free(names);
		pthread_mutex_unlock(&t->mu);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level > 0)
			memcpy(names[nn++], t->f[i].name, SFS_TABLE_NAME);
	f->nbits = nbits;
	f->building = 1;
	f->nnblocks = nblocks;
	f->nn = 0;
	f->ncap = 4 * (rows > w->kf_min_keys ? rows : w->kf_min_keys);
	kf_publish(w, t);
	pthread_mutex_unlock(&t->mu);
	for (size_t k = 0; k < nn && !rc; k++) {
		sfs_df_reader_t *rd = NULL;
		sfs_df_iter_t *it = NULL;
		struct sfs_df_row row;

		snprintf(path, sizeof(path), "%s/%s", t->dir, names[k]);
		if (!(rc = sfs_df_reader_open(path, NULL, &rd)))
			rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it);
		while (!rc && (rc = sfs_df_iter_next(it, &row)) == 1) {
			kf_set(nbits, nblocks, sfs_df_filter_hash(row.key, row.klen), 1);
			keys++;
			rc = 0;
		}
		if (rc > 0)
			rc = 0;
		if (!rc && sfs_load_relaxed(&w->stop))
			rc = -ECANCELED;
		sfs_df_iter_close(it);
		sfs_df_reader_close(rd);
	}
	pthread_mutex_lock(&t->mu);
	f->building = 0;
	if (t->loads != loads || f->nbits != nbits) {
		rc = -ECANCELED;	/* reloaded: the filter was dropped with the files */
	} else if (rc) {
		f->nbits = NULL;	/* a file gone before it was read: retried */
		f->nnblocks = 0;
	} else {
		free(f->bits);
		f->bits = nbits;
		nbits = NULL;
		f->nblocks = nblocks;
		f->n = keys + f->nn;
		f->cap = f->ncap;
		f->valid = 1;
		f->nbits = NULL;
		f->nnblocks = 0;
		uatomic_inc(&w->pub->tp_kfilter_rebuilds);
		uatomic_add(&w->pub->tp_kfilter_rebuild_ns, sfs_now_ns() - t0);
	}
	kf_publish(w, t);
	pthread_mutex_unlock(&t->mu);
	free(nbits);	/* not taken */
	free(names);
	if (rc == -ECANCELED || rc == -ENOENT)
		return 0;
	return rc < 0 ? rc : 1;
}
