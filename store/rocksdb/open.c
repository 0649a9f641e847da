/*
 * open.c — a writer's life (store/target.h: open, close; the compactor, the
 * only writer of each instance): the instance found ours (its identity key
 * names this segment), adopted from a restore (RESTORED_MARK beside the
 * files admin.c put there: every applied marker reset) or destroyed and
 * made fresh; the instance-wide options (tune.c's knobs: pacing, rate
 * limit); each state's column family opened or created with tune.c's
 * options and ttl.c's filter; reopened after a failed write, flush or
 * ingest (write.c); closed, with the run's counters logged.
 *
 * Next on a key's path: write.c (apply, commit).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "shm/qsbr.h"
#include "store/rocksdb/rocksdb_int.h"

static int w_open_db(struct sfs_target_writer *w, const char *ident);
static int w_adopt(struct sfs_target_writer *w, const char *mark);
static int w_fresh(struct sfs_target_writer *w, const char *ident);

int sfs__rdbt_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		     const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	char pacing[200];
	int rc;

	(void)cfg;
	if (!w)
		return -ENOMEM;
	w->seg = s;
	w->self = self;
	w->worker = worker;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->ttl[i].w = w;
	w->k = sfs__rdbt_knobs_get();
	if ((rc = sfs__rdbt_inst_path(s, worker, w->path, sizeof(w->path))) || (rc = sfs_mkdirs(w->path, 0700)))
		goto fail;
	/* SSTs are written beside the instance (its directory is RocksDB's),
	 * on the same file system (ingest moves them by a link); what a
	 * killed compactor left there goes now. */
	if ((size_t)snprintf(w->ipath, sizeof(w->ipath), "%.*s.ingest", PATH_MAX - 16, w->path) >=
	    sizeof(w->ipath)) {
		rc = sfs__err(SFS_EUSAGE, "rocksdb target %s: path too long", w->path);
		goto fail;
	}
	sfs__rdbt_rm_tree(w->ipath);
	if ((rc = sfs_mkdirs(w->ipath, 0700)))
		goto fail;
	/* Pins die with their compactor (store/target.h): what a previous
	 * one kept goes, with the old instance a rollback killed after its
	 * swap left in r<n> (the swap itself is one atomic rename). */
	snprintf(w->ppath, sizeof(w->ppath), "%.*s.pin", PATH_MAX - 16, w->path);
	sfs__rdbt_rm_tree(w->ppath);
	if ((rc = sfs_mkdirs(w->ppath, 0700)))
		goto fail;
	if ((rc = sfs__rdbt_pub_find(s, worker, 1, &w->pub)))
		goto fail;
	/* A rollback killed between its two bumps: readers held off are
	 * released (sfs__rdbt_start's rp_cf_gen bump makes them reopen). */
	if (sfs_load_acquire(&w->pub->rp_incarnation) & 1)
		sfs_store_release(&w->pub->rp_incarnation, w->pub->rp_incarnation + 1);
	sfs_store_relaxed(&w->pub->rp_knobs, w->k.on);
	sfs_store_relaxed(&w->pub->rp_ingest_min, w->k.ingest_min);
	w->ttl_dropped = w->pub->rp_ttl_dropped;	/* counted on across compactor runs */
	snprintf(w->ident, sizeof(w->ident), "%s/%llu/%llu", s->hdr->sh_job,
		 (unsigned long long)s->hdr->sh_created_ns,
		 (unsigned long long)s->hdr->sh_generation);
	w->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
	w->dbo = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(w->dbo, 1);
	rocksdb_options_set_create_missing_column_families(w->dbo, 1);
	rocksdb_options_set_atomic_flush(w->dbo, 1);
	rocksdb_options_set_max_open_files(w->dbo, -1);
	rocksdb_options_set_keep_log_file_num(w->dbo, 4);
	/* Compaction stats (per level, stall counters, AddFile bytes) in the
	 * LOG every 30 s instead of RocksDB's 600: what a run at scale is
	 * diagnosed from, for a few KB of LOG per dump. */
	rocksdb_options_set_stats_dump_period_sec(w->dbo, 30);
	/* The hash-linklist memtable cannot take concurrent inserts; the
	 * compactor is one thread, so this costs nothing (its WriteBatch is
	 * inserted by that thread either way). */
	rocksdb_options_set_allow_concurrent_memtable_write(
		w->dbo, !(w->k.on & SFS_RDBT_K_HASH_MEMTABLE));
	if (w->k.on & SFS_RDBT_K_PACING) {
		/* Flushes and compactions run in RocksDB's threads of this
		 * process, beside the flush loop and, on a small machine, the
		 * workers: one flush and two compactions at a time and their
		 * writes rate-limited, so compaction takes at most two cores
		 * and a bounded share of the disk.  Two, not one: with one, a
		 * long merge of q4's bids held up every other family, L0
		 * filled and commits waited 6.8 s of a 37 s run; with two, 0 s
		 * and no more CPU (bench/RESULTS.md, issue 18).  Not lower: compaction
		 * threads at low CPU priority (tried: nice 19) starve behind a
		 * busy worker, L0 fills and commits wait for it — measured, the
		 * flush loop's buffers took up to 6 s instead of 0.25 s
		 * (bench/RESULTS.md, issue 5).  An L0 backlog is handled by
		 * commit (it waits, the worker back-pressures). */
		rocksdb_options_set_max_background_jobs(w->dbo, PACE_JOBS);
		rocksdb_options_set_max_subcompactions(w->dbo, 1);
		w->limiter = rocksdb_ratelimiter_create((int64_t)PACE_RATE_MB << 20, 100000, 10);
		rocksdb_options_set_ratelimiter(w->dbo, w->limiter);
	} else {
		rocksdb_options_set_max_background_jobs(w->dbo, UNPACED_JOBS);
	}
	w->defo = rocksdb_options_create();
	w->wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(w->wo, 1);
	/* A write RocksDB would stall (too many L0 files) fails instead and
	 * the commit is retried: the flush loop never blocks in RocksDB. */
	rocksdb_writeoptions_set_no_slowdown(w->wo, 1);
	w->fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(w->fo, 0);
	w->ro = rocksdb_readoptions_create();
	w->eo = rocksdb_envoptions_create();
	w->io = rocksdb_ingestexternalfileoptions_create();
	rocksdb_ingestexternalfileoptions_set_move_files(w->io, 1);
	rocksdb_ingestexternalfileoptions_set_allow_global_seqno(w->io, 1);
	/* Memtables are empty between commits (each commit flushes them):
	 * a blocking flush before an ingest never happens in practice. */
	rocksdb_ingestexternalfileoptions_set_allow_blocking_flush(w->io, 1);
	w->wb = rocksdb_writebatch_create();
	if ((rc = sfs__rdbt_start(w)))
		goto fail;
	if (sfs_load_acquire(&w->pub->rp_magic) != SFS_RDBT_MAGIC)
		sfs_store_release(&w->pub->rp_magic, SFS_RDBT_MAGIC);
	sfs_rdbt_pacing(&w->k, pacing, sizeof(pacing));
	sfs_log("rocksdb target %s: %s; a state's entries of a buffer go as an SST from %llu "
		"(0: never); tunings on: 0x%x of 0x%x (hash memtable, partitioned filters, prefix, "
		"LZ4, merge, pacing, universal)", w->path, pacing, (unsigned long long)w->k.ingest_min, w->k.on,
		SFS_RDBT_K_ALL);
	*out = w;
	return 0;
fail:
	sfs__rdbt_close(w);
	return rc;
}

/* Open the instance (again): the primary, its markers, file deletions off. */
int sfs__rdbt_start(struct sfs_target_writer *w)
{
	char *err = NULL, mark[PATH_MAX + 32];
	int rc = w_open_db(w, w->ident);

	snprintf(mark, sizeof(mark), "%.*s/" RESTORED_MARK, PATH_MAX, w->path);
	if (rc >= 0 && access(mark, F_OK) == 0)
		rc = w_adopt(w, mark);
	else if (rc == 0)
		rc = w_fresh(w, w->ident);
	else if (rc == 1)
		rc = 0;
	if (rc)
		return rc;
	rocksdb_disable_file_deletions(w->db, &err);
	if ((rc = sfs__rdbt_err(w->path, &err, "disable file deletions")))
		return rc;
	/* A reader may still replay edits of the previous primary. */
	w->purge_token = sfs_qsbr_start(w->seg->hdr);
	sfs_store_release(&w->pub->rp_cf_gen, w->pub->rp_cf_gen + 1);
	return 0;
}

/* Open the primary with every column family it has; 1 if it belongs to
 * this segment (identity key matches @ident), 0 if not, < 0 error. */
static int w_open_db(struct sfs_target_writer *w, const char *ident)
{
	char *err = NULL, **names = NULL;
	size_t ncf = 0;
	int rc = 0, mine = 0;

	names = rocksdb_list_column_families(w->dbo, w->path, &ncf, &err);
	if (err) {	/* no instance yet (the C API returns an empty list anyway) */
		rocksdb_free(err);
		err = NULL;
		if (names)
			rocksdb_list_column_families_destroy(names, 0);
		names = NULL;
		ncf = 0;
	}
	if (ncf == 0) {
		w->db = rocksdb_open(w->dbo, w->path, &err);
		if (err || !w->db)
			return (rc = sfs__rdbt_err(w->path, &err, "open")) ? rc : -EIO;
	} else {
		const char **cn = calloc(ncf, sizeof(*cn));
		const rocksdb_options_t **co = calloc(ncf, sizeof(*co));
		rocksdb_column_family_handle_t **ch = calloc(ncf, sizeof(*ch));
		rocksdb_options_t **own = calloc(ncf, sizeof(*own));
		rocksdb_compactionfilter_t **fl = calloc(ncf, sizeof(*fl));

		if (!cn || !co || !ch || !own || !fl) {
			rc = -ENOMEM;
			goto out_lists;
		}
		for (size_t i = 0; i < ncf; i++) {
			int sid = strcmp(names[i], "default") ? sfs__rdbt_cf_state(w->seg, names[i]) : -1;

			cn[i] = names[i];
			own[i] = strcmp(names[i], "default") ? sfs__rdbt_cf_options(sfs__rdbt_desc_of(w->seg, sid), w->cache, &w->k, 1)
							      : NULL;
			/* a restored instance's families too: the registry is
			 * the checkpoint's before the compactor opens */
			fl[i] = own[i] ? sfs__rdbt_ttl_attach(w, sid, own[i]) : NULL;
			co[i] = own[i] ? own[i] : w->defo;
		}
		w->db = rocksdb_open_column_families(w->dbo, w->path, (int)ncf, cn, co, ch, &err);
		if (err || !w->db) {
			rc = sfs__rdbt_err(w->path, &err, "open");
			rc = rc ? rc : -EIO;
			for (size_t i = 0; i < ncf; i++) {
				if (own[i])
					rocksdb_options_destroy(own[i]);
				if (fl[i])
					rocksdb_compactionfilter_destroy(fl[i]);
			}
			goto out_lists;
		}
		for (size_t i = 0; i < ncf; i++) {
			int sid = own[i] ? sfs__rdbt_cf_state(w->seg, names[i]) : -1;

			if (!own[i]) {
				w->def = ch[i];
			} else if (sid >= 0 && !w->cf[sid].h) {
				w->cf[sid].h = ch[i];
				w->cf[sid].o = own[i];
				w->cf[sid].f = fl[i];
			} else {	/* of another job's registry: never read */
				rocksdb_column_family_handle_destroy(ch[i]);
				rocksdb_options_destroy(own[i]);	/* sid < 0: no filter */
			}
		}
out_lists:
		free(cn);
		free(co);
		free(ch);
		free(own);
		free(fl);
		if (rc)
			goto out;
	}
	{
		size_t len = 0;
		char *v = rocksdb_get(w->db, w->ro, IDENT_KEY, sizeof(IDENT_KEY) - 1, &len, &err);

		if (err) {
			rc = sfs__rdbt_err(w->path, &err, "read identity");
			goto out;
		}
		mine = v && len == strlen(ident) && memcmp(v, ident, len) == 0;
		if (v)
			rocksdb_free(v);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->cf[i].h)
			w->cf[i].applied = sfs__rdbt_read_marker(w->db, w->ro, w->cf[i].h);
	rc = mine;
out:
	if (names)
		rocksdb_list_column_families_destroy(names, ncf);
	return rc;
}

/*
 * A restore put a checkpoint's files at the path and RESTORED_MARK beside
 * them (the supervisor, before any child started, with the state registry
 * of the checkpoint: column families map to the same states).  Adopt the
 * instance: this segment's identity, every applied marker reset (the new
 * run's buffers count from seq 1; everything restored is older than all of
 * them), flushed, then the mark removed.  Redone whole if killed midway.
 */
static int w_adopt(struct sfs_target_writer *w, const char *mark)
{
	char *err = NULL;
	int rc;

	rocksdb_writebatch_clear(w->wb);
	rocksdb_writebatch_put(w->wb, IDENT_KEY, sizeof(IDENT_KEY) - 1, w->ident, strlen(w->ident));
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->cf[i].h) {
			rocksdb_writebatch_delete_cf(w->wb, w->cf[i].h, MARKER_KEY, MARKER_LEN);
			w->cf[i].applied = 0;
		}
	rocksdb_write(w->db, w->wo, w->wb, &err);
	rocksdb_writebatch_clear(w->wb);
	if ((rc = sfs__rdbt_err(w->path, &err, "adopt a restored instance")))
		return rc;
	{
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(w->db, fo, &err);
		rocksdb_flushoptions_destroy(fo);
	}
	if ((rc = sfs__rdbt_err(w->path, &err, "flush the adopted instance")))
		return rc;
	unlink(mark);
	sfs_log("rocksdb target %s: adopted the restored instance", w->path);
	return 0;
}

/* A fresh instance for this segment: whatever a previous job left at the
 * path is destroyed, the identity written and flushed. */
static int w_fresh(struct sfs_target_writer *w, const char *ident)
{
	char *err = NULL, cur[PATH_MAX + 16];
	int rc, dfd;

	sfs__rdbt_close_db(w);
	/* CURRENT first: DestroyDB unlinks the MANIFEST before CURRENT, and a
	 * kill -9 between the two left a CURRENT naming a missing MANIFEST,
	 * which no later open could get past.  Without CURRENT the directory
	 * holds no instance, and the next open creates one. */
	snprintf(cur, sizeof(cur), "%s/CURRENT", w->path);
	if (unlink(cur) && errno != ENOENT)
		return sfs__err(sfs__errno(), "%s: %s", cur, strerror(errno));
	if ((dfd = open(w->path, O_RDONLY | O_DIRECTORY)) >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	rocksdb_destroy_db(w->dbo, w->path, &err);
	if ((rc = sfs__rdbt_err(w->path, &err, "destroy a previous job's instance")))
		return rc;
	/* DestroyDB removed the directory, and RocksDB's create_if_missing
	 * would make it 0755: made here again, 0700 (data: private). */
	if ((rc = sfs_mkdirs(w->path, 0700)))
		return rc;
	w->db = rocksdb_open(w->dbo, w->path, &err);
	if (err || !w->db)
		return (rc = sfs__rdbt_err(w->path, &err, "open")) ? rc : -EIO;
	rocksdb_put(w->db, w->wo, IDENT_KEY, sizeof(IDENT_KEY) - 1, ident, strlen(ident), &err);
	if ((rc = sfs__rdbt_err(w->path, &err, "write identity")))
		return rc;
	{
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(w->db, fo, &err);
		rocksdb_flushoptions_destroy(fo);
	}
	return sfs__rdbt_err(w->path, &err, "flush identity");
}

/*
 * After a failed write, flush or ingest: RocksDB may have stopped on a
 * background error (its memtables then hold writes that never became
 * durable), so the instance is closed and opened again.  The markers on
 * disk then say which states of the staged buffer still need writing.
 * The same gap as a compactor restart: the open purges obsolete files
 * without a grace period (rocksdb.h).
 */
int sfs__rdbt_reopen(struct sfs_target_writer *w)
{
	int rc;

	sfs__rdbt_close_db(w);
	rocksdb_writebatch_clear(w->wb);
	w->batched = w->batch_any = w->written = w->flushing = 0;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		w->st[i].inbatch = 0;
	sfs_store_relaxed(&w->pub->rp_reopens, w->pub->rp_reopens + 1);
	if ((rc = sfs__rdbt_start(w))) {
		sfs__rdbt_close_db(w);	/* tried again at the next commit */
		return rc;
	}
	w->reopen = 0;
	return 0;
}

struct wcf *sfs__rdbt_family(struct sfs_target_writer *w, uint32_t sid)
{
	struct wcf *c = &w->cf[sid];
	char name[sizeof(CF_PREFIX) + SFS_STATE_NAME_MAX], *err = NULL;

	if (c->h)
		return c;
	snprintf(name, sizeof(name), CF_PREFIX "%s", w->seg->hdr->sh_states[sid].sd_name);
	c->o = sfs__rdbt_cf_options(&w->seg->hdr->sh_states[sid], w->cache, &w->k, 1);
	c->f = sfs__rdbt_ttl_attach(w, (int)sid, c->o);
	c->h = rocksdb_create_column_family(w->db, c->o, name, &err);
	if (err || !c->h) {
		int rc = sfs__rdbt_err(w->path, &err, "create column family");

		(void)rc;
		if (!err && !c->h)
			sfs__err(-EIO, "rocksdb target %s: column family %s: no handle", w->path,
				 name);
		rocksdb_options_destroy(c->o);
		if (c->f)	/* no family uses it */
			rocksdb_compactionfilter_destroy(c->f);
		c->o = NULL;
		c->f = NULL;
		c->h = NULL;
		return NULL;
	}
	c->applied = 0;
	sfs_store_release(&w->pub->rp_cf_gen, w->pub->rp_cf_gen + 1);
	return c;
}

void sfs__rdbt_close(struct sfs_target_writer *w)
{
	char *err = NULL;

	if (!w)
		return;
	if (w->db) {
		/* Leave the deletion count as RocksDB starts it: the next
		 * open disables again. */
		rocksdb_enable_file_deletions(w->db, 1, &err);
		if (err)
			rocksdb_free(err);
	}
	sfs__rdbt_close_db(w);	/* its compactions done: the filter's count is final */
	if (w->pub) {
		sfs_store_relaxed(&w->pub->rp_ttl_dropped,
				  __atomic_load_n(&w->ttl_dropped, __ATOMIC_RELAXED));
		sfs_log("rocksdb target %s: %llu commits, %llu entries (%llu skipped), write %.1f ms, "
			"flush %.1f ms, %llu SSTs ingested (%llu entries, %.1f ms), %llu waits for "
			"an L0 backlog (%.1f ms), %llu failed commit attempts, %llu reopens, %llu "
			"deletion windows, %llu expired entries dropped by compactions",
			w->path, (unsigned long long)w->pub->rp_commits,
			(unsigned long long)w->pub->rp_entries,
			(unsigned long long)w->pub->rp_skipped, w->pub->rp_write_ns / 1e6,
			w->pub->rp_flush_ns / 1e6, (unsigned long long)w->pub->rp_ingests,
			(unsigned long long)w->pub->rp_ingest_entries, w->pub->rp_ingest_ns / 1e6,
			(unsigned long long)w->pub->rp_stalls, w->wait_ns / 1e6,
			(unsigned long long)w->pub->rp_errors,
			(unsigned long long)w->pub->rp_reopens, (unsigned long long)w->pub->rp_purges,
			(unsigned long long)w->pub->rp_ttl_dropped);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		sfs__rdbt_stage_reset(&w->st[i]);
		free(w->st[i].buf);
		free(w->st[i].idx);
	}
	if (w->ipath[0])
		sfs__rdbt_rm_tree(w->ipath);
	while (__atomic_load_n(&w->trashing, __ATOMIC_ACQUIRE))
		usleep(1000);	/* a rollback's old instance still being removed */
	if (w->ppath[0])
		sfs__rdbt_rm_tree(w->ppath);
	if (w->wb)
		rocksdb_writebatch_destroy(w->wb);
	if (w->wo)
		rocksdb_writeoptions_destroy(w->wo);
	if (w->fo)
		rocksdb_flushoptions_destroy(w->fo);
	if (w->ro)
		rocksdb_readoptions_destroy(w->ro);
	if (w->eo)
		rocksdb_envoptions_destroy(w->eo);
	if (w->io)
		rocksdb_ingestexternalfileoptions_destroy(w->io);
	if (w->defo)
		rocksdb_options_destroy(w->defo);
	if (w->dbo)
		rocksdb_options_destroy(w->dbo);
	if (w->limiter)
		rocksdb_ratelimiter_destroy(w->limiter);
	if (w->cache)
		rocksdb_cache_destroy(w->cache);
	free(w);
}

void sfs__rdbt_close_db(struct sfs_target_writer *w)
{
	rocksdb_compactionfilter_t *f[SFS_MAX_STATES];

	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (w->cf[i].h)
			rocksdb_column_family_handle_destroy(w->cf[i].h);
		if (w->cf[i].o)
			rocksdb_options_destroy(w->cf[i].o);
		if (w->cf[i].so)
			rocksdb_options_destroy(w->cf[i].so);
		f[i] = w->cf[i].f;
		w->cf[i] = (struct wcf){ 0 };
	}
	if (w->def)
		rocksdb_column_family_handle_destroy(w->def);
	w->def = NULL;
	if (w->db)
		rocksdb_close(w->db);	/* waits for its compactions: no filter runs after */
	w->db = NULL;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (f[i])
			rocksdb_compactionfilter_destroy(f[i]);
}

void sfs_rdbt_test_handles(struct sfs_target_writer *w, uint32_t sid, void **db, void **cf)
{
	*db = w->db;
	*cf = sid < SFS_MAX_STATES ? w->cf[sid].h : NULL;
}
