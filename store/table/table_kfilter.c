/*
 * table_kfilter.c — the key filter of a map or list table: one blocked
 * Bloom filter over the keys of every row at level >= 1, in the compactor
 * only (process-local, guarded by t->mu like the key index), so the map
 * diff learns with one test that a written entry is new to the table.
 *
 * Which tables: those whose map diff asks the files for more than
 * SFS_TABLE_KFILTER_AFTER (2) keys per row written (sfs__tbl_kf_note_diff);
 * a table whose maps are new to it (q4's bids of new auctions) is pruned
 * by its files' prefix filters already and would pay the filter's upkeep
 * for nothing.
 *
 * Why: the map diff (table_write.c) must find, for each entry a barrier
 * writes, the row it supersedes, to mask it.  It asks every file whose
 * prefix filter admits the entry's map, and in each a key filter; at q9
 * 100M that was 13.5 to 44 keys probed per row written (1.4 to 4.5 billion
 * keys, as merges happened to keep up), a cost that grows with the run
 * while nearly every entry (a bid) is new.  A key the table filter rejects is in no level >= 1
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
 * Size: KF_BITS_PER_KEY bits a key of its capacity (Parquet's split-block
 * filter, 256-bit blocks: about 1 % false positives when full), a new
 * table's sized for 2 * w->kf_min_keys (SFS_TABLE_KFILTER_MIN_KEYS, 1M).
 * When the keys added pass its capacity the filter stays in use, its
 * false positives rising, while the background thread builds one for four
 * times the keys it reads: rebuilds read every level >= 1 key about 1.33
 * times over a run that only grows, from the key pages alone.  Rounds that
 * commit during a rebuild journal their keys, which the rebuild adds under
 * the lock before it swaps its filter in (so the bits it sets without the
 * lock are its own).  SFS_TABLE_KEY_FILTER=0 switches it off; for tests,
 * SFS_TABLE_KFILTER_MIN_KEYS sizes it small (it fills) and
 * SFS_TABLE_KFILTER_REBUILD_DELAY_MS holds a rebuild before its reads (rounds
 * journal meanwhile); SFS_TABLE_KEY_INDEX_CHECK=1 probes every key it
 * rejects and counts those a level >= 1 file holds (tp_kfilter_wrong).
 *
 * Cost: 1.25 to 5 bytes a key of compactor memory (tp_kfilter_bytes), one
 * hash and one filter test per entry in the map diff, one filter add per
 * row a round lands, and the rebuilds' reads on the background thread
 * (tp_kfilter_rebuild_ns), which merges wait for.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/hugemem.h"
#include "shm/atomic.h"
#include "store/table/layout/datafile_fmt.h"
#include "store/table/table_int.h"

#define KF_BITS_PER_KEY 10u
#define KF_MIN_ROWS 65536u
#define KF_MIN_DIFFS 16u

int sfs__tbl_kf_on(const struct sfs_target_writer *w, const struct table *t)
{
	return (w->knobs & SFS_TABLE_K_KEY_FILTER) && sfs__tbl_is_map_kind(t->kind);
}

static int kf_wanted(const struct sfs_target_writer *w, const struct table *t)
{
	return sfs__tbl_kf_on(w, t) && (t->kf.wanted || w->kf_after == 0);
}

/* The map diff wrote @rows rows and probed @probed keys in files (t->mu
 * held): once the table's diffs have probed more than w->kf_after keys per
 * row over their whole life (counted from KF_MIN_ROWS rows or
 * KF_MIN_DIFFS diffs on), the table wants its filter, built by the
 * background thread and kept from then on.  The whole life, not a window:
 * q4 probes 0.9 keys a row over a 100M run (its maps are new: their prefix
 * filters prune) but more than 2 in some stretches, when merges lag, and a
 * filter built then, late and large, cost it a 9.6 s rebuild and 401 MiB
 * for little (an always-on filter cost it 7-12 % of its events/s); q9
 * passes 2 at ~30M events and probes 40 a row at 100M. */
void sfs__tbl_kf_note_diff(struct sfs_target_writer *w, struct table *t, uint64_t rows,
			   uint64_t probed)
{
	struct kfilter *f = &t->kf;

	if (f->wanted || !sfs__tbl_kf_on(w, t))
		return;
	f->diff_rows += rows;
	f->diff_probed += probed;
	f->diffs++;
	if (f->diff_rows < KF_MIN_ROWS && f->diffs < KF_MIN_DIFFS)
		return;
	if (f->diff_probed > (uint64_t)w->kf_after * f->diff_rows)
		f->wanted = 1;
}

/* A filter of 2 MiB or more sits in transparent huge pages where the
 * kernel grants them (common/hugemem.h): its keys land on random blocks, and
 * with 4 KiB pages nearly every test or add of a 100-400 MB filter also
 * walks the page table.  A loop of 20M adds into 256 MB, with the
 * prefetching below, took 22 ns a key in huge pages against 34-53 ns. */
static uint32_t *kf_alloc(uint64_t keys, uint32_t *nblocks)
{
	uint64_t nb = (keys * KF_BITS_PER_KEY + 255) / 256;

	if (nb > UINT32_MAX)
		return NULL;
	*nblocks = (uint32_t)nb;
	return sfs_huge_calloc(nb, 32);
}

/* The 8-word block of hash @h in a filter of @nblocks blocks. */
static inline uint32_t *kf_block(const uint32_t *bits, uint32_t nblocks, uint64_t h)
{
	return (uint32_t *)(void *)sbbf_block((uint8_t *)(uintptr_t)bits, nblocks, h);
}

static void kf_set(uint32_t *bits, uint32_t nblocks, uint64_t h)
{
	uint32_t *b = kf_block(bits, nblocks, h);

	for (int i = 0; i < 8; i++)
		b[i] |= sbbf_bit(h, i);
}

static void kf_publish(struct sfs_target_writer *w, struct table *t)
{
	uint64_t bytes = (uint64_t)t->kf.nblocks * 32 + t->kf.building_bytes;

	uatomic_add(&w->pub->tp_kfilter_bytes, bytes - t->kf.pub_bytes);
	t->kf.pub_bytes = bytes;
}

static void kf_journal_drop(struct kfilter *f)
{
	free(f->jr);
	f->jr = NULL;
	f->njr = f->jrcap = 0;
	f->jr_lost = 0;
}

void sfs__tbl_kf_invalidate(struct table *t)
{
	struct kfilter *f = &t->kf;

	free(f->bits);
	f->bits = NULL;
	f->nblocks = 0;
	f->n = f->cap = 0;
	f->valid = 0;
	f->building = 0;	/* a rebuild under way sees t->loads move and gives up */
	f->building_bytes = 0;
	kf_journal_drop(f);
}

/* At close: the gauge keeps its last figure (a run's summary, read after
 * the compactor has closed, shows the filter's final size). */
void sfs__tbl_kf_free(struct sfs_target_writer *w, struct table *t)
{
	(void)w;
	sfs__tbl_kf_invalidate(t);
}

/* A table with nothing at level >= 1 has a valid empty filter (t->mu held). */
void sfs__tbl_kf_maybe_empty(struct sfs_target_writer *w, struct table *t)
{
	struct kfilter *f = &t->kf;

	if (f->valid || f->building || !kf_wanted(w, t))
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

	if (f->valid) {
		for (size_t i = 0; i < n; i++) {
			if (i + SFS_TBL_KF_AHEAD < n)
				__builtin_prefetch(kf_block(f->bits, f->nblocks,
							    h[i + SFS_TBL_KF_AHEAD]), 1);
			kf_set(f->bits, f->nblocks, h[i]);
		}
		f->n += n;
	}
	if (f->building && !f->jr_lost) {
		if (f->njr + n > f->jrcap) {
			size_t cap = (f->njr + n) * 2 + 1024;
			uint64_t *nj = realloc(f->jr, cap * sizeof(*nj));

			if (!nj) {
				f->jr_lost = 1;
				return;
			}
			f->jr = nj;
			f->jrcap = cap;
		}
		memcpy(f->jr + f->njr, h, n * sizeof(*h));
		f->njr += n;
	}
}

/* 0: no level >= 1 file holds the key of hash @h; 1: one may (t->mu held). */
int sfs__tbl_kf_maybe(const struct table *t, uint64_t h)
{
	const struct kfilter *f = &t->kf;
	const uint32_t *b;
	uint32_t clear = 0;

	if (!f->valid)
		return 1;
	b = kf_block(f->bits, f->nblocks, h);
	for (int i = 0; i < 8; i++)
		clear |= ~b[i] & sbbf_bit(h, i);
	return clear == 0;
}

/* Start loading the block of hash @h (t->mu held), SFS_TBL_KF_AHEAD keys
 * before sfs__tbl_kf_maybe asks it. */
void sfs__tbl_kf_prefetch(const struct table *t, uint64_t h)
{
	if (t->kf.valid)
		__builtin_prefetch(kf_block(t->kf.bits, t->kf.nblocks, h));
}

/*
 * The background thread's upkeep of @t's filter: (re)built from the level
 * >= 1 files' keys (vectors not applied: a masked row's key only adds a
 * false positive) when it is invalid or holds more keys than it was sized
 * for.  The file set is copied under t->mu, the files read without it into
 * a filter of this thread's own, while rounds journal the keys they add;
 * the journal is applied and the filter swapped in under the lock.  A
 * reload meanwhile (t->loads), a lost journal entry or a file gone before
 * it was read makes it give up, to be retried.  1 if rebuilt, 0 if not
 * needed or given up, < 0 error.
 */
int sfs__tbl_kf_upkeep(struct sfs_target_writer *w, struct table *t)
{
	struct kfilter *f = &t->kf;
	char (*names)[SFS_TABLE_NAME] = NULL;
	size_t nn = 0;
	uint64_t loads, rows = 0, keys = 0, cap, t0 = sfs_now_ns();
	uint32_t *nbits = NULL, nblocks = 0;
	char path[1024];
	int rc = 0;

	pthread_mutex_lock(&t->mu);
	sfs__tbl_kf_maybe_empty(w, t);
	if (!kf_wanted(w, t) || !t->loaded || f->building || (f->valid && f->n <= f->cap)) {
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	loads = t->loads;
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level > 0)
			rows += t->f[i].rows;
	if (f->valid && f->n > rows)
		rows = f->n;	/* updates of existing keys counted too: the larger */
	cap = 4 * (rows > w->kf_min_keys ? rows : w->kf_min_keys);
	if (!(names = calloc(t->nf + 1, sizeof(*names))) || !(nbits = kf_alloc(cap, &nblocks))) {
		free(names);
		pthread_mutex_unlock(&t->mu);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level > 0)
			memcpy(names[nn++], t->f[i].name, SFS_TABLE_NAME);
	kf_journal_drop(f);
	f->building = 1;
	f->building_bytes = (uint64_t)nblocks * 32;
	kf_publish(w, t);
	pthread_mutex_unlock(&t->mu);
	if (w->kf_rebuild_delay_ms) {	/* tests: rounds commit meanwhile */
		struct timespec ts = { w->kf_rebuild_delay_ms / 1000,
				       (long)(w->kf_rebuild_delay_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
	for (size_t k = 0; k < nn && !rc; k++) {
		sfs_df_reader_t *rd = NULL;
		sfs_df_iter_t *it = NULL;
		struct sfs_df_row row;
		uint64_t ring[SFS_TBL_KF_AHEAD], nk = 0;	/* hashes whose blocks load */

		snprintf(path, sizeof(path), "%s/%s", t->dir, names[k]);
		if (!(rc = sfs_df_reader_open(path, NULL, &rd)) &&
		    !(rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it)))
			sfs_df_iter_keys_only(it);
		while (!rc && (rc = sfs_df_iter_next(it, &row)) == 1) {
			uint64_t h = sfs_df_filter_hash(row.key, row.klen);

			__builtin_prefetch(kf_block(nbits, nblocks, h), 1);
			if (nk >= SFS_TBL_KF_AHEAD)
				kf_set(nbits, nblocks, ring[nk % SFS_TBL_KF_AHEAD]);
			ring[nk++ % SFS_TBL_KF_AHEAD] = h;
			keys++;
			rc = 0;
		}
		for (uint64_t i = nk > SFS_TBL_KF_AHEAD ? nk - SFS_TBL_KF_AHEAD : 0; i < nk; i++)
			kf_set(nbits, nblocks, ring[i % SFS_TBL_KF_AHEAD]);
		if (rc > 0)
			rc = 0;
		if (!rc && sfs_load_relaxed(&w->stop))
			rc = -ECANCELED;
		sfs_df_iter_close(it);
		sfs_df_reader_close(rd);
	}
	pthread_mutex_lock(&t->mu);
	if (t->loads != loads || !f->building || f->jr_lost) {
		rc = -ECANCELED;	/* reloaded (the filter was dropped with the files),
					 * or a round's keys were lost */
	} else if (!rc) {
		for (size_t i = 0; i < f->njr; i++)
			kf_set(nbits, nblocks, f->jr[i]);
		free(f->bits);
		f->bits = nbits;
		nbits = NULL;
		f->nblocks = nblocks;
		f->n = keys + f->njr;
		f->cap = cap;
		f->valid = 1;
		uatomic_inc(&w->pub->tp_kfilter_rebuilds);
		uatomic_add(&w->pub->tp_kfilter_rebuild_ns, sfs_now_ns() - t0);
	}
	if (t->loads == loads) {
		f->building = 0;
		f->building_bytes = 0;
		kf_journal_drop(f);
	}
	kf_publish(w, t);
	pthread_mutex_unlock(&t->mu);
	free(nbits);	/* not taken */
	free(names);
	if (rc == -ECANCELED || rc == -ENOENT)
		return 0;
	return rc < 0 ? rc : 1;
}
