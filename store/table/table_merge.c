/*
 * table_merge.c — the background thread: shaping merges (and rounds, when
 * the SFS_TABLE_ROUND=0 ablation takes them off the barrier).
 *
 * The background thread (one per writer, i.e. per worker store) runs the
 * discretionary shaping merges: when a level holds FANIN files, they are
 * merged into one file of the next level (tiered, size ratio ~FANIN per
 * level; LZ4 to level 2, ZSTD from level 3, or SFS_TABLE_ZSTD_FROM=L).  Rows of
 * level >= 1 files are disjoint once masked, so a merge is a plain k-way
 * merge, no resolution.  It reads its
 * inputs without the table lock (files are immutable; its own readers,
 * the vectors copied); barrier rounds meanwhile may set more bits in the
 * inputs' vectors, which the merge carries over to the output by a
 * position map when it commits under the lock.  So merges may lag
 * arbitrarily without changing any result and never hold up a barrier
 * for longer than their commit.  For a value or counter table the commit
 * forwards the key index's entries of the inputs to the output (O(inputs):
 * table_kindex.c's sfs__tbl_kix_merged) and removes its expired rows'.
 * The same thread rebuilds an invalid key index (table_kindex.c).
 *
 * Pace (pace below): merges get a share of the maintenance core
 * proportional to the bytes the flush writes — B bytes of merge input per
 * byte flushed (SFS_TABLE_MERGE_BUDGET) at the compactor's own priority,
 * the rest on idle CPU time — so on a saturated node they neither starve
 * (files pile up, every round and read probes more of them, expired state
 * waits) nor take the core from the flush beyond what it paid for.
 * State TTL (ttl_drop_files, pick_ttl, expiry_pass): a file whose rows
 * have all expired leaves whole, unread; a mostly expired one is
 * rewritten alone within the budget; so a TTL state's live bytes follow
 * what its last TTL of events wrote rather than when a merge happens to
 * take its file.  What it costs and what the back-pressure is are
 * counted in the region (table.h: tp_merge_*, tp_flush_wait_ns, tp_ttl_*).
 *
 * Off a key's path (its rows come back here later); the path goes on at
 * table_session.c's set_commit and table_publish.c.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/keycmp.h"
#include "common/log.h"
#include "shm/atomic.h"
#include "shm/proc.h"
#include "store/table/layout/dvec.h"
#include "store/table/table_int.h"

#define FANIN 4u              /* files of a level that trigger a shaping merge */
#define DEBT_FILES (2u * FANIN) /* files of a level that make its merge urgent */
#define MERGE_MAX 8u          /* inputs of one merge */
#define BG_POLL_MS 20

static int shaping_merge(struct sfs_target_writer *w, struct table *t);
static size_t pick_merge(struct table *t, size_t *in, uint32_t *level, size_t *held);
static size_t pick_ttl(struct table *t, uint64_t now, size_t *in, uint32_t *level);
static int pace(struct sfs_target_writer *w, uint64_t in_bytes, int due);
static int ttl_drop_files(struct sfs_target_writer *w, struct table *t);
static int expiry_pass(struct sfs_target_writer *w, struct table *t);
static struct tfile *file_named(struct table *t, const char *name);
static void bg_priority(struct sfs_target_writer *w, int idle);
static int bg_may_idle(void);

void *sfs__tbl_bg_main(void *arg)
{
	struct sfs_target_writer *w = arg;

	w->bg_can_idle = bg_may_idle();
	while (!sfs_load_relaxed(&w->stop)) {
		int did = 0;

		for (uint32_t sid = 0; sid < SFS_MAX_STATES && !sfs_load_relaxed(&w->stop); sid++) {
			struct table *t = sfs__tbl_table_at(w, sid);

			if (!t)
				continue;
			if (!(w->knobs & SFS_TABLE_K_ROUND)) {
				/* the ablation: rounds lag behind the barrier */
				size_t l0 = 0;

				bg_priority(w, 0);
				pthread_mutex_lock(&t->mu);
				for (size_t i = 0; i < t->nf; i++)
					l0 += t->f[i].level == 0;
				if (l0 && t->loaded && sfs__tbl_catch_up_rounds(w, t, &w->bg_sc) == 0)
					did = 1;
				pthread_mutex_unlock(&t->mu);
			}
			/* a map table's key filter: built when it pays, rebuilt
			 * when it fills or after a reload (table_kfilter.c) */
			if (!sfs_load_relaxed(&w->stop) && sfs__tbl_kf_upkeep(w, t) < 0)
				sfs_log("worker %u, table %s: rebuilding the key filter (retried "
					"later): %s", w->worker, t->dir, sfs_last_error());
			if (!(w->knobs & SFS_TABLE_K_SHAPING))
				continue;
			if (ttl_drop_files(w, t) > 0)
				did = 1;
			if (shaping_merge(w, t) > 0 || expiry_pass(w, t) > 0)
				did = 1;
			/* an invalid key index (a reload, a rollback, the open):
			 * rebuilt from the files, reading without the lock */
			if (!sfs_load_relaxed(&w->stop) && sfs__tbl_kix_rebuild(w, t, 0) < 0)
				sfs_log("worker %u, table %s: rebuilding the key index (retried "
					"later): %s", w->worker, t->dir, sfs_last_error());
		}
		sfs__tbl_reap(w);
		if (did && pthread_mutex_trylock(&w->commit_mu) == 0) {
			/* else a commit is under way: its publication covers this */
			if (sfs__tbl_publish(w))
				sfs_log("worker %u: publishing the table files: %s", w->worker,
					sfs_last_error());
			pthread_mutex_unlock(&w->commit_mu);
		} else if (!did) {
			struct timespec ts = { 0, BG_POLL_MS * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

struct min {
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_row row;
	int live;
	uint64_t *dv;           /* the vector as the merge read it */
	size_t dv_words;
	uint32_t *to;           /* input row -> output row (UINT32_MAX: not written) */
	uint64_t rows;
	uint32_t fid;           /* its fid (the key index's forward) */
	char name[SFS_TABLE_NAME];
};

/* One shaping merge of @t; 1 if it did one, 0 if none was due, < 0 error. */
static int shaping_merge(struct sfs_target_writer *w, struct table *t)
{
	size_t in[MERGE_MAX], n, gone[MERGE_MAX], held = 0;
	int idle, ttl;
	struct min m[MERGE_MAX];
	uint32_t level = 0;
	uint64_t t0 = sfs_now_ns(), outrow = 0, loads, expired = 0, now = 0, in_bytes = 0;
	uint64_t emin = UINT64_MAX, emax = 0;
	int normal;
	char oname[SFS_TABLE_NAME], path[1024];
	struct sfs_df_write_opts wo = { .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	sfs_df_writer_t *out = NULL;
	int rc = 0, kx = sfs__tbl_kix_on(w, t);
	size_t nex = 0, excap = 0;
	struct kix_upd *ex = NULL;      /* the key index: the expired rows that leave it */

	memset(m, 0, sizeof(m));
	ttl = sfs__tbl_ttl_now(w, t, &now);
	pthread_mutex_lock(&t->mu);
	n = t->loaded ? pick_merge(t, in, &level, &held) : 0;
	if (t->loaded && ttl && w->merge_budget && (!n || held < DEBT_FILES)) {
		/* a file mostly expired first, unless a level is in debt */
		size_t tin[1];
		uint32_t tl;

		if (pick_ttl(t, now, tin, &tl)) {
			n = 1;
			in[0] = tin[0];
			level = tl;
			held = 0;
			uatomic_add(&w->pub->tp_ttl_rewrites, 1);
		}
	}
	if (!n) {
		pthread_mutex_unlock(&t->mu);
		pace(w, 0, 0);
		return 0;
	}
	loads = t->loads;
	for (size_t k = 0; k < n; k++)
		in_bytes += t->f[in[k]].size;
	normal = pace(w, in_bytes, 1);
	for (size_t k = 0; k < n && !rc; k++) {
		struct tfile *f = &t->f[in[k]];

		f->merging = 1;
		memcpy(m[k].name, f->name, sizeof(m[k].name));
		m[k].fid = f->fid;
		m[k].rows = f->rows;
		m[k].dv_words = sfs_dv_words(f->rows);
		m[k].dv = calloc(m[k].dv_words ? m[k].dv_words : 1, 8);
		m[k].to = malloc((f->rows ? f->rows : 1) * sizeof(uint32_t));
		if (!m[k].dv || !m[k].to || f->rows > UINT32_MAX)
			rc = -ENOMEM;
		else if (f->dv)
			memcpy(m[k].dv, f->dv, m[k].dv_words * 8);
	}
	pthread_mutex_unlock(&t->mu);
	bg_priority(w, held < DEBT_FILES && !normal);
	idle = w->bg_idle;
	/* read and write without the lock: the inputs are immutable */
	for (size_t k = 0; k < n && !rc; k++) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, m[k].name);
		if (!(rc = sfs_df_reader_open(path, NULL, &m[k].rd)))
			rc = sfs_df_iter_range(m[k].rd, NULL, 0, NULL, 0, m[k].dv, m[k].dv_words,
					       &m[k].it);
		if (!rc) {
			memset(m[k].to, 0xff, m[k].rows * sizeof(uint32_t));
			rc = sfs_df_iter_next(m[k].it, &m[k].row);
			m[k].live = rc == 1;
			rc = rc < 0 ? rc : 0;
		}
	}
	wo.codec = level >= w->zstd_from ? SFS_DF_ZSTD : SFS_DF_LZ4;
	wo.zstd_level = SFS_TABLE_ZSTD_LEVEL;
	sfs__tbl_prefix_opts(t, &wo);
	sfs__tbl_new_name(oname, t->sid, "sst");
	snprintf(path, sizeof(path), "%s/%s", t->dir, oname);
	if (!rc)
		rc = sfs_df_writer_open(path, &wo, &out);
	while (!rc && !sfs_load_relaxed(&w->stop)) {
		int best = -1;

		for (size_t k = 0; k < n; k++) {
			int c;

			if (!m[k].live)
				continue;
			if (best < 0) {
				best = (int)k;
				continue;
			}
			c = sfs_keycmp(m[k].row.key, m[k].row.klen, m[best].row.key, m[best].row.klen);
			if (c < 0)
				best = (int)k;
		}
		if (best < 0)
			break;
		if (ttl && sfs__tbl_ttl_drops(m[best].row.kind, m[best].row.val, m[best].row.vlen, now)) {
			/* expired: a delete of the only unmasked version of its key
			 * (level >= 1 rows are disjoint), so nothing is kept for it
			 * at any output level; a bit set on it meanwhile maps to no
			 * output row (to[] stays UINT32_MAX) */
			expired++;
			if (kx && nex == excap) {
				struct kix_upd *ne = realloc(ex, (excap = excap ? 2 * excap : 256) *
								     sizeof(*ne));

				if (!ne) {
					rc = -ENOMEM;
					break;
				}
				ex = ne;
			}
			if (kx)
				ex[nex++] = (struct kix_upd){
					.h = sfs_df_filter_hash(m[best].row.key, m[best].row.klen),
					.ofid = m[best].fid };
		} else {
			rc = sfs_df_writer_add(out, m[best].row.key, m[best].row.klen, SFS_DF_PUT,
					       m[best].row.val, m[best].row.vlen);
			if (rc)
				break;
			if (ttl) {
				uint64_t e = m[best].row.vlen >= SFS_TTL_PREFIX ?
					     sfs_ttl_expiry_of(m[best].row.val) : 0;

				emin = e < emin ? e : emin;
				emax = e > emax ? e : emax;
			}
			m[best].to[m[best].row.pos] = (uint32_t)outrow++;
		}
		rc = sfs_df_iter_next(m[best].it, &m[best].row);
		m[best].live = rc == 1;
		rc = rc < 0 ? rc : 0;
	}
	bg_priority(w, 0);	/* no lock is taken at idle priority: see bg_priority */
	if (sfs_load_relaxed(&w->stop) && !rc)
		rc = -ECANCELED;
	if (!rc && outrow == 0) {
		sfs_df_writer_abort(out);	/* every row masked meanwhile, or expired */
		out = NULL;
	} else if (!rc) {
		rc = sfs_df_writer_finish(out, NULL);
		out = NULL;
		if (!rc) {
			uatomic_add(&w->pub->tp_merge_bytes, sfs__tbl_file_bytes(path));
			sfs_fault("table.mergefile");
		}
	}
	pthread_mutex_lock(&t->mu);
	if (!rc && t->loads != loads)
		rc = -ECANCELED;	/* reloaded meanwhile: the copied vectors may be ahead */
	if (!rc) {
		/* the inputs by name again (the set moved meanwhile), their new
		 * bits carried over to the output's rows */
		uint64_t *odv = NULL;
		size_t ow = sfs_dv_words(outrow), nset = 0;

		if (outrow && !(odv = calloc(ow ? ow : 1, 8)))
			rc = -ENOMEM;
		for (size_t k = 0; k < n && !rc; k++) {
			struct tfile *f = NULL;

			for (size_t i = 0; i < t->nf; i++)
				if (strcmp(t->f[i].name, m[k].name) == 0)
					f = &t->f[i];
			if (!f) {
				rc = sfs__err(SFS_ECORRUPT, "%s: merge input %s left the table", t->dir,
					      m[k].name);
				break;
			}
			gone[k] = (size_t)(f - t->f);
			for (size_t x = 0; f->dv && x < m[k].dv_words; x++) {
				uint64_t nb = f->dv[x] & ~m[k].dv[x];

				while (nb) {
					uint64_t p = x * 64 + (uint64_t)__builtin_ctzll(nb);

					nb &= nb - 1;
					if (m[k].to[p] != UINT32_MAX) {
						odv[m[k].to[p] / 64] |= 1ull << (m[k].to[p] % 64);
						nset++;
					}
				}
			}
		}
		if (!rc) {
			rc = sfs__tbl_set_commit(w, t, gone, n, outrow ? oname : NULL, level, -1, 0, odv, nset);
			odv = NULL;
		}
		free(odv);
		if (!rc && outrow && ttl) {
			struct tfile *of = file_named(t, oname);

			if (of) {
				of->exp_known = 1;
				of->exp_min = emin;
				of->exp_max = emax;
			}
		}
		if (!rc && kx) {
			/* the key index follows the rows to the output */
			uint32_t ofid = 0, ifid[MERGE_MAX];

			for (size_t i = 0; outrow && i < t->nf; i++)
				if (strcmp(t->f[i].name, oname) == 0)
					ofid = t->f[i].fid;
			for (size_t k = 0; k < n; k++)
				ifid[k] = m[k].fid;
			sfs__tbl_kix_merged(w, t, (unsigned)n, ifid, ofid, ex, nex);
		}
		if (!rc) {
			sfs_fault("table.merge");
			uatomic_add(&w->pub->tp_merges, 1);
			if (idle)
				uatomic_add(&w->pub->tp_merges_idle, 1);
			uatomic_add(idle ? &w->pub->tp_merge_ns_idle : &w->pub->tp_merge_ns_normal,
				    sfs_now_ns() - t0);
			uatomic_add(&w->pub->tp_merge_rows, outrow);
			if (expired)
				uatomic_add(&w->pub->tp_ttl_dropped, expired);
			uatomic_add(&w->pub->tp_merge_ns, (sfs_now_ns() - t0));
		}
	}
	if (rc) {
		for (size_t i = 0; i < t->nf; i++)
			for (size_t k = 0; k < n; k++)
				if (strcmp(t->f[i].name, m[k].name) == 0)
					t->f[i].merging = 0;
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t k = 0; k < n; k++) {
		sfs_df_iter_close(m[k].it);
		sfs_df_reader_close(m[k].rd);
		free(m[k].dv);
		free(m[k].to);
	}
	sfs_df_writer_abort(out);
	free(ex);
	if (rc) {
		/* a disk's trouble is said once per episode of the process (the
		 * flush's own failure says it first: shm/proc.h), the rest each time */
		if (rc != -ECANCELED &&
		    (!sfs_io_trouble_errno(rc) ||
		     sfs_proc_io((struct sfs_proc_slot *)(uintptr_t)w->self, rc)))
			sfs_log("worker %u, table %s: shaping merge failed (retried later): %s",
				w->worker, t->dir, sfs_last_error());
		snprintf(path, sizeof(path), "%s/%s", t->dir, oname);
		unlink(path);
		return rc;
	}
	return 1;
}

/*
 * pick_ttl - a file of @t (t->mu held) worth rewriting alone for its
 * expired rows at @now: level >= 2 (level 1 is merged soon anyway), its
 * expiries known, at least half its rows expired by the estimate that
 * their expiries spread evenly over [exp_min, exp_max] (rows written over
 * a stretch of time with one TTL do), the one with most expired bytes by
 * it.  The rewrite keeps its level and learns the true oldest expiry of
 * what is left, so the estimate falls to 0 and the file waits until half
 * of it has expired again: each byte is rewritten this way at most
 * log2 times of its file's size before its file is dropped whole.
 */
static size_t pick_ttl(struct table *t, uint64_t now, size_t *in, uint32_t *level)
{
	double best = 0;
	size_t n = 0;

	for (size_t i = 0; i < t->nf; i++) {
		const struct tfile *f = &t->f[i];
		double share;

		if (f->level < 2 || f->merging || !f->exp_known || !f->rows || f->exp_min > now ||
		    f->exp_max <= now)
			continue;
		share = (double)(now - f->exp_min) / (double)(f->exp_max - f->exp_min);
		if (share >= 0.5 && share * (double)f->size > best) {
			best = share * (double)f->size;
			in[0] = i;
			*level = f->level;
			n = 1;
		}
	}
	return n;
}

/*
 * pace - the merge budget (SFS_TABLE_MERGE_BUDGET = B): whether the merge
 * about to read @in_bytes (@due: one is due; else nothing is and this only
 * keeps the account) runs at the compactor's own priority.  Every byte the
 * flush writes (tp_bytes_written: level-0 files and round rewrites) earns
 * B bytes of merge input; a merge runs at normal priority while the
 * earned exceeds the spent, and is then charged its whole input (so a big
 * merge borrows ahead and the next ones idle until the flush has paid for
 * it).  Beyond the budget merges run idle as with B = 0.  The unit is
 * merge input (the inputs' file sizes, known before the merge starts, so
 * the priority is decided once, before any work); credit banks up to BANK
 * bytes while no merge is due, so a burst after a quiet spell is bounded.
 * What was earned but not spent while merges were due is the work owed
 * (tp_merge_owed, a gauge): it grows when the budget cannot keep up.
 * Background thread only; relaxed reads of the flush's counter.
 */
#define BANK (64ull << 20)

static int pace(struct sfs_target_writer *w, uint64_t in_bytes, int due)
{
	uint64_t earned, owed;

	if (!w->merge_budget)
		return 0;
	earned = (sfs_load_relaxed(&w->pub->tp_bytes_written) - w->merge_base) * w->merge_budget;
	owed = earned > w->merge_spent ? earned - w->merge_spent : 0;
	if (!due) {
		if (owed > BANK)
			w->merge_spent = earned - BANK;
		sfs_store_relaxed(&w->pub->tp_merge_owed, 0);
		return 0;
	}
	sfs_store_relaxed(&w->pub->tp_merge_owed, owed);
	if (owed > sfs_load_relaxed(&w->pub->tp_merge_owed_max))
		sfs_store_relaxed(&w->pub->tp_merge_owed_max, owed);
	w->merge_spent += in_bytes;
	return owed > 0;
}

static struct tfile *file_named(struct table *t, const char *name)
{
	for (size_t i = 0; i < t->nf; i++)
		if (strcmp(t->f[i].name, name) == 0)
			return &t->f[i];
	return NULL;
}

/*
 * ttl_drop_files - drop whole every level >= 1 file of @t whose newest
 * expiry has passed: no read, no rewrite, one commit (as a merge whose
 * output is empty).  Why nothing older resurfaces: level >= 1 rows are
 * disjoint once masked, so each unmasked row of such a file is the only
 * live version of its key, and it has expired — a delete, the very row a
 * merge of this file would drop (table_ttl.c).  Every older version of
 * its key was masked by a bit its round set in the older file's vector;
 * those bits stay with those files (the dropped file takes only its own
 * vector along), so no probe finds an older version afterwards; a newer
 * version (level 0, staged) is newer whatever happens here.  A file's
 * expiries are absolute deadlines written with each row, so a TTL
 * duration changed between runs changes nothing here: a row drops when
 * its own stored deadline passes, as in a merge; a state whose TTL was
 * removed returns no clock (sfs__tbl_ttl_now) and drops nothing.  Masked
 * rows count in exp_max too (harmless: it only delays).  Costs a pass over
 * the file list per table per loop, at normal priority (a commit takes
 * t->mu: never at idle priority).  1 when some file left, 0 none, < 0.
 */
static int ttl_drop_files(struct sfs_target_writer *w, struct table *t)
{
	uint64_t now;
	size_t *gone, n = 0;
	int rc = 0;

	if (!sfs__tbl_ttl_now(w, t, &now))
		return 0;
	pthread_mutex_lock(&t->mu);
	if (!t->loaded || !(gone = malloc((t->nf + 1) * sizeof(*gone)))) {
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	for (size_t i = 0; i < t->nf; i++)
		if (t->f[i].level >= 1 && !t->f[i].merging && t->f[i].exp_known &&
		    t->f[i].exp_max <= now)
			gone[n++] = i;
	if (n) {
		bg_priority(w, 0);
		if (!(rc = sfs__tbl_set_commit(w, t, gone, n, NULL, 0, -1, 0, NULL, 0))) {
			uatomic_add(&w->pub->tp_ttl_files_dropped, n);
			/* the key index still names their expired rows, whose keys
			 * are not known without reading the files: rebuilt from the
			 * files left (table_kindex.c) */
			if (sfs__tbl_kix_on(w, t))
				sfs__tbl_kix_invalidate(t);
		}
		else
			sfs_log("worker %u, table %s: dropping expired files (retried later): %s",
				w->worker, t->dir, sfs_last_error());
	}
	pthread_mutex_unlock(&t->mu);
	free(gone);
	return rc ? rc : n > 0;
}

/*
 * expiry_pass - learn the expiries of one level >= 2 file of a TTL state's
 * table that has none in memory (files of an earlier run of the
 * compactor, or merged before the first clock): one read of its values,
 * without the lock (marked merging meanwhile, so no commit removes it),
 * paid from the merge budget like a merge's input.  Level 1 is left to
 * its merge.  1 when it learned one, 0 none due, < 0 error.
 */
static int expiry_pass(struct sfs_target_writer *w, struct table *t)
{
	char name[SFS_TABLE_NAME], path[1024];
	uint64_t now, emin = UINT64_MAX, emax = 0, size = 0;
	sfs_df_reader_t *rd = NULL;
	sfs_df_iter_t *it = NULL;
	struct sfs_df_row row;
	struct tfile *f = NULL;
	int rc;

	if (!sfs__tbl_ttl_now(w, t, &now))
		return 0;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; t->loaded && i < t->nf && !f; i++)
		if (t->f[i].level >= 2 && !t->f[i].merging && !t->f[i].exp_known)
			f = &t->f[i];
	if (f) {
		f->merging = 1;
		memcpy(name, f->name, sizeof(name));
		size = f->size;
	}
	pthread_mutex_unlock(&t->mu);
	if (!f)
		return 0;
	bg_priority(w, !pace(w, size, 1));
	snprintf(path, sizeof(path), "%s/%s", t->dir, name);
	if (!(rc = sfs_df_reader_open(path, NULL, &rd)) &&
	    !(rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it)))
		while (!sfs_load_relaxed(&w->stop) && (rc = sfs_df_iter_next(it, &row)) == 1) {
			uint64_t e = row.vlen >= SFS_TTL_PREFIX ? sfs_ttl_expiry_of(row.val) : 0;

			emin = e < emin ? e : emin;
			emax = e > emax ? e : emax;
		}
	sfs_df_iter_close(it);
	sfs_df_reader_close(rd);
	bg_priority(w, 0);
	pthread_mutex_lock(&t->mu);
	if ((f = file_named(t, name))) {
		f->merging = 0;
		if (rc < 0) {
			/* unreadable now: never dropped or rewritten for its
			 * expiries (its merge still drops them), not retried */
			f->exp_known = 1;
			f->exp_min = f->exp_max = UINT64_MAX;
		} else if (!sfs_load_relaxed(&w->stop)) {
			f->exp_known = 1;
			f->exp_min = emin;
			f->exp_max = emax;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return rc < 0 ? rc : 1;
}

/* Inputs of the next shaping merge of @t (t->mu held): the files of the
 * lowest level >= 1 holding FANIN of them (at most MERGE_MAX); *@held is
 * how many that level holds in all. */
static size_t pick_merge(struct table *t, size_t *in, uint32_t *level, size_t *held)
{
	for (uint32_t l = 1; l < 64; l++) {
		size_t n = 0, any = 0, all = 0;

		for (size_t i = 0; i < t->nf; i++) {
			if (t->f[i].level < l)
				continue;
			any = 1;
			if (t->f[i].level != l || t->f[i].merging)
				continue;
			all++;
			if (n < MERGE_MAX)
				in[n++] = i;
		}
		if (!any)
			return 0;
		if (n >= FANIN) {
			*level = l + 1;
			*held = all;
			return n;
		}
	}
	return 0;
}

/*
 * bg_priority - the background thread's CPU priority for its next piece
 * of work.  Shaping merges are discretionary (they change no result), so
 * while a level holds fewer than DEBT_FILES files they run under
 * SCHED_IDLE: on CPU time no worker, compactor main thread or checkpointer
 * wants.  On a node whose cores are all busy they wait, and reads probe a
 * few more files meanwhile; a level that reaches DEBT_FILES is merge debt,
 * and its merge (like the rounds of the background-only ablation, and any
 * merge the budget has paid for: pace) runs at the compactor's own priority, so a saturated node cannot grow a table's
 * read amplification without bound.  Only a merge's unlocked reading and
 * writing runs idle: the thread is back at normal priority before it takes
 * a lock the main thread also takes, so a starved merge never holds up a
 * barrier's commit.  Measured on q4 (bench/RESULTS.md):
 * the merges otherwise take ~10 % of a two-core node from its worker.
 * Leaving SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE that allows
 * nice 0 (sched(7)): a compactor with neither never enters it.  One
 * syscall per change, on this thread only.
 */
static void bg_priority(struct sfs_target_writer *w, int idle)
{
	struct sched_param sp = { 0 };

	idle = idle && w->bg_can_idle && (w->knobs & SFS_TABLE_K_BG_IDLE);
	if (idle == w->bg_idle)
		return;
	if (sched_setscheduler(0, idle ? SCHED_IDLE : SCHED_OTHER, &sp) == 0)
		w->bg_idle = idle;
	else if (!idle)
		w->bg_can_idle = 0;	/* stuck idle would starve the debt: stop trying */
}

/* Whether this thread may leave SCHED_IDLE again (see bg_priority). */
static int bg_may_idle(void)
{
	struct rlimit rl;

	if (geteuid() == 0)
		return 1;
	return getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20);
}
