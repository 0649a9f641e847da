/*
 * write.c — the flush round (store/target.h: apply, commit, busy): a
 * sealed buffer's entries staged per state (the staged copy: stage.c),
 * then written into the instance open.c keeps open, made durable and
 * published to the readers (read.c).
 *
 * Writing (the compactor, the only writer of each instance).  apply()
 * stages a sealed buffer's entries per state, process-locally (several
 * calls per buffer; a failed call is rolled back to its save point, so the
 * flush loop's retry from the same position never stages twice).
 * commit(seq) then writes each state one of two ways, in bounded steps
 * (-EAGAIN: call again):
 *  - a state with at least ingest_min entries in the buffer (default
 *    INGEST_MIN_DEFAULT, measured: bench/RESULTS.md, issue 5): one SST
 *    (SstFileWriter, the entries in key order, its "applied" marker = seq
 *    as the last key), ingested into its column family (a link and one
 *    MANIFEST edit, no memtable, no flush);
 *  - the other states: one WriteBatch of their entries and markers, WAL
 *    off, then their memtables flushed (atomic_flush: one MANIFEST edit).
 * So:
 *  - durable at commit: the compactor frees the buffer after a grace
 *    period, and a kill -9 after commit loses nothing (the data is in SST
 *    files and the MANIFEST; a memtable was the only volatile copy);
 *  - exactly once, per state: a state's entries and its marker reach the
 *    files together (one ingested file, or one batch and its flush), or
 *    not at all.  A redone flush (compactor restarted, a commit retried
 *    after an error, apply called again for a seq already committed) skips
 *    every entry of a state whose marker is >= seq, so a counter merge is
 *    never applied twice, also when a kill fell between two states'
 *    ingests;
 *  - visible to secondaries: with the WAL off a secondary sees only SST
 *    files, so the ingest or flush is also what publishes the version;
 *    rp_published is bumped after the whole buffer is in.
 * Counters are RocksDB merges (the state's sd_merge on int64: a built-in or
 * a user operator, "sfs.user.<name>" in the OPTIONS), so a flush never
 * reads.  A map clear (mh_clear_pos in the buffer's head) is a DeleteRange
 * over the map's range in that namespace: in a batch
 * written before the buffer's surviving entries of that map; in an SST a
 * range tombstone with the file's one sequence number, which covers only
 * older entries, so those same entries survive it.
 *
 * Failures (disk full, EFBIG, an I/O error): the commit fails loudly (the
 * instance, the file and RocksDB's status in the compactor's log, when it
 * starts, every 10 s while it lasts, and when it ends; rp_errors counts
 * attempts), the buffer stays sealed (its worker back-pressures) and the
 * commit is retried from the staged copy with a back-off (10 ms doubling
 * to 1 s).  A failed write, flush or ingest may leave RocksDB stopped on a
 * background error, with writes in its memtables that never became
 * durable: the instance is closed and opened again before the retry, and
 * the markers on disk say which states still need writing.  Nothing
 * committed is touched.  An L0 backlog (compaction behind) makes commit
 * wait (-EAGAIN) instead of stalling inside RocksDB.
 *
 * Cost of durability: per committed buffer, one SST per large state and
 * one memtable flush for the rest, each fsync'ed.  Buffers are large
 * (16 MiB by default) and committed once per barrier or spill, so this is
 * a few files per second per worker.
 *
 * File deletion vs secondaries.  A secondary opens every table file of a
 * version when it installs it (max_open_files = -1), so an unlinked file it
 * uses stays readable; the danger is a file deleted between the primary's
 * MANIFEST edit and a secondary's catch-up over that edit.  The compactor
 * keeps file deletions disabled; after a commit it starts a grace period
 * over the process table (QSBR: every live online worker passes a
 * quiescent point, where it catches up) and only then opens a deletion
 * window (EnableFileDeletions purges what is obsolete, DisableFileDeletions
 * closes it again).  A secondary that still replays edits naming files
 * deleted since skips those intermediate versions (RocksDB's manifest
 * tailer installs only versions whose files exist).  A compactor restart
 * opens the primary, which purges obsolete files at open: the same rule
 * does not cover that moment (documented gap, as is a worker that stays
 * offline for longer than a window).
 *
 * Next on a key's path: read.c (a secondary catches up).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/merge.h"
#include "shm/qsbr.h"
#include "store/rocksdb/rocksdb_int.h"
#include "worker/wbuf.h"

/* Records written to an SST per commit step (~10 ms). */
#define SST_STEP 32768u

#define LOG_EVERY_NS (10ull * 1000000000ull)

static int kind_of_state(const struct sfs_seg *s, uint32_t sid);
static int w_map(struct sfs_target_writer *w, struct wstage *s, const struct sfs_wbuf_view *v,
		 unsigned n, uint32_t plen);
static int w_fold(struct sfs_target_writer *w, struct wcf *c, uint32_t sid, uint32_t kl,
		  int64_t d, int64_t *out);
static int commit_step(struct sfs_target_writer *w, uint64_t seq);
static int ingest_step(struct sfs_target_writer *w, uint32_t sid, uint64_t seq);
static void sst_path(const struct sfs_target_writer *w, uint32_t sid, uint64_t seq, char *buf,
		     size_t n);
static rocksdb_options_t *sst_options(struct sfs_target_writer *w, uint32_t sid);
static int sst_fail(struct sfs_target_writer *w, struct wstage *s, const char *file, char **err,
		    const char *op);
static int batch_step(struct sfs_target_writer *w, uint64_t seq);
static int l0_backlog(struct sfs_target_writer *w, uint32_t sid);
static int backlog_wait(struct sfs_target_writer *w, int waiting);
static int flushed(struct sfs_target_writer *w);

int sfs__rdbt_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		      uint64_t seq)
{
	uint64_t skipped = 0, written = 0;
	int rc = 0;

	w->applied_any = 1;
	if (w->seq != seq) {
		/* Staged entries of another buffer that never committed:
		 * this flush starts over (the loop flushes in seq order). */
		sfs__rdbt_stages_reset(w);
		w->seq = seq;
	}
	if (w->batched)
		return 0;	/* the buffer is staged whole: commit finishes it */
	if (!w->db && (rc = sfs__rdbt_reopen(w)))
		return rc;
	w->gen++;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		uint32_t sid, kl;
		struct wcf *c;
		struct wstage *s;
		int kind;

		if (v[i].klen < SFS_KEY_PREFIX) {
			rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: key of %u bytes", w->path,
				      v[i].klen);
			break;
		}
		sid = sfs_key_prefix_state(v[i].key);
		kind = kind_of_state(w->seg, sid);
		if (sid >= SFS_MAX_STATES || !(c = sfs__rdbt_family(w, sid))) {
			rc = sid >= SFS_MAX_STATES
				     ? sfs__err(SFS_ECORRUPT, "rocksdb target %s: state id %u",
						w->path, sid)
				     : -EIO;
			break;
		}
		s = &w->st[sid];
		if (kind == SFS_STATE_MAP || kind == SFS_STATE_LIST) {
			uint32_t plen = sfs_map_parent_len(v[i].key, v[i].klen);
			unsigned run = 1;

			if (!plen) {
				rc = sfs__err(SFS_ECORRUPT,
					      "rocksdb target %s: malformed map key of %u bytes",
					      w->path, v[i].klen);
				break;
			}
			while (i + run < n && v[i + run].klen >= plen &&
			       memcmp(v[i + run].key, v[i].key, plen) == 0)
				run++;
			if (c->applied >= seq) {
				skipped += run;
			} else {
				rc = w_map(w, s, &v[i], run, plen);
				written += run;
			}
			i += run - 1;
			continue;
		}
		if (c->applied >= seq) {
			skipped++;
			continue;	/* a redone flush: this state holds @seq already */
		}
		written++;
		kl = sfs__rdbt_enc_key(w->kbuf, v[i].ns, v[i].key, v[i].klen);
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = sfs__rdbt_stage_add(s, SOP_PUT, w->kbuf, kl, v[i].value, v[i].len, w->gen);
			break;
		case SFS_WBUF_DELETE:
			rc = sfs__rdbt_stage_add(s, SOP_DEL, w->kbuf, kl, NULL, 0, w->gen);
			break;
		case SFS_WBUF_MERGE: {
			int64_t d = sfs_wbuf_view_i64(&v[i]);

			if (!(w->k.on & SFS_RDBT_K_MERGE) && (rc = w_fold(w, c, sid, kl, d, &d)))
				break;
			rc = sfs__rdbt_stage_add(s, (w->k.on & SFS_RDBT_K_MERGE) ? SOP_MERGE : SOP_PUT,
				       w->kbuf, kl, &d, 8, w->gen);
			break;
		}
		default:
			rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: entry of unknown kind %u",
				      w->path, v[i].kind);
		}
	}
	if (rc) {
		sfs__rdbt_stages_rollback(w, w->gen);	/* the loop retries this piece */
		return rc;
	}
	w->staged = 1;
	sfs_store_relaxed(&w->pub->rp_skipped, w->pub->rp_skipped + skipped);
	sfs_store_relaxed(&w->pub->rp_entries, w->pub->rp_entries + written);
	sfs_fault("rocksdb.apply");
	return 0;
}

static int kind_of_state(const struct sfs_seg *s, uint32_t sid)
{
	return sid < SFS_MAX_STATES ? (int)s->hdr->sh_states[sid].sd_kind : 0;
}

/* One map (a parent's run @v[0, @n), every namespace in it): per
 * namespace, a DeleteRange when the buffer cleared it, then its entries. */
static int w_map(struct sfs_target_writer *w, struct wstage *s, const struct sfs_wbuf_view *v,
		 unsigned n, uint32_t plen)
{
	int rc = 0;

	for (unsigned i = 0; i < n && rc == 0; i++) {
		struct sfs_map_head hd = { 0, 0 };
		int seen = 0, cleared = 0;
		uint64_t ns = v[i].ns;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = v[j].ns == ns;
		if (seen)
			continue;
		for (unsigned j = i; j < n; j++)
			if (v[j].ns == ns && v[j].klen == plen && v[j].len == sizeof(hd)) {
				memcpy(&hd, v[j].value, sizeof(hd));
				cleared = hd.mh_clear_pos != 0;
			}
		if (cleared) {
			uint32_t pl = sfs__rdbt_enc_key(w->kbuf, ns, v[i].key, plen);

			memcpy(w->kend, w->kbuf, pl);
			sfs__rdbt_prefix_end(w->kend, pl);
			rc = sfs__rdbt_stage_add(s, SOP_RANGE, w->kbuf, pl, w->kend, pl, w->gen);
		}
		for (unsigned j = i; j < n && rc == 0; j++) {
			struct sfs_map_ent me = { 0, SFS_MAP_REMOVED };
			uint32_t kl;

			if (v[j].ns != ns || v[j].klen == plen)
				continue;
			if (cleared && v[j].off < hd.mh_clear_pos)
				continue;	/* written before the clear: gone */
			if (v[j].len >= sizeof(me))
				memcpy(&me, v[j].value, sizeof(me));
			if (v[j].flags & SFS_WBUF_EXPIRED)
				me.me_flags |= SFS_MAP_REMOVED;	/* dropped at flush (common/ttl.h) */
			kl = sfs__rdbt_enc_key(w->kbuf, ns, v[j].key, v[j].klen);
			if (me.me_flags & SFS_MAP_REMOVED)
				rc = sfs__rdbt_stage_add(s, SOP_DEL, w->kbuf, kl, NULL, 0, w->gen);
			else
				rc = sfs__rdbt_stage_add(s, SOP_PUT, w->kbuf, kl,
					       (const char *)v[j].value + sizeof(me),
					       v[j].len - (uint32_t)sizeof(me), w->gen);
		}
	}
	return rc;
}

/* A counter delta without the merge operator (the ablation's
 * SFS_RDBT_MERGE=0): read the stored value and stage the folded one.  A
 * read per counter per flush: what the merge operator saves. */
static int w_fold(struct sfs_target_writer *w, struct wcf *c, uint32_t sid, uint32_t kl,
		  int64_t d, int64_t *out)
{
	char *err = NULL, *v;
	size_t len = 0;
	int64_t cur;

	v = rocksdb_get_cf(w->db, w->ro, c->h, (const char *)w->kbuf, kl, &len, &err);
	if (err)
		return sfs__rdbt_err(w->path, &err, "read a counter (no merge operator)");
	if (v && len == 8) {
		memcpy(&cur, v, 8);
		*out = sfs_merge_i64(w->seg->hdr->sh_states[sid].sd_merge, cur, d);
	} else {
		*out = d;
	}
	if (v)
		rocksdb_free(v);
	return 0;
}

/*
 * commit: the staged buffer @seq becomes durable and published, in bounded
 * steps (-EAGAIN: call again).  A failure (disk full, a write error) is
 * logged with the instance, the file and RocksDB's status when it starts
 * and every LOG_EVERY_NS while it lasts, and retried with a back-off (10 ms
 * doubling to 1 s) from the staged copy: the buffer stays sealed meanwhile,
 * so its worker back-pressures, and nothing committed before is touched.
 */
int sfs__rdbt_commit(struct sfs_target_writer *w, uint64_t seq)
{
	uint64_t now = sfs_now_ns();
	int rc;

	if (w->fails && now < w->retry_ns)
		return w->last_rc;
	rc = commit_step(w, seq);
	if (rc == 0 || rc == -EAGAIN) {
		if (w->fails && rc == 0)
			sfs_log("rocksdb target %s: buffer seq %llu committed after %u failed "
				"attempts", w->path, (unsigned long long)seq, w->fails);
		if (rc == 0)
			w->fails = 0;
		return rc;
	}
	w->fails++;
	w->last_rc = rc;
	w->retry_ns = now + (w->fails < 8 ? 10000000ull << (w->fails - 1) : 1000000000ull);
	sfs_store_relaxed(&w->pub->rp_errors, w->pub->rp_errors + 1);
	if (w->fails == 1 || now - w->logged_ns >= LOG_EVERY_NS) {
		sfs_log("rocksdb target %s: commit of buffer seq %llu failed (attempt %u), the "
			"buffer stays sealed and is retried: %s", w->path,
			(unsigned long long)seq, w->fails, sfs_last_error());
		w->logged_ns = now;
	}
	return rc;
}

/* One bounded step of committing buffer @seq (sfs__rdbt_commit's contract). */
static int commit_step(struct sfs_target_writer *w, uint64_t seq)
{
	int rc, any = 0;

	if (w->seq == seq)
		for (unsigned i = 0; i < SFS_MAX_STATES && !any; i++)
			any = w->st[i].touched;
	if (!any) {
		/* Nothing of this buffer to write (empty, or all applied). */
		sfs__rdbt_stages_reset(w);
		if (seq > w->pub->rp_applied)
			sfs_store_release(&w->pub->rp_applied, seq);
		return 0;
	}
	if ((w->reopen || !w->db) && (rc = sfs__rdbt_reopen(w)))
		return rc;
	/* Large states: an SST each, one step at a time. */
	for (unsigned i = 0; w->k.ingest_min && i < SFS_MAX_STATES; i++) {
		struct wstage *s = &w->st[i];

		if (!s->touched || s->done || s->dup || s->n + s->nrange < w->k.ingest_min)
			continue;
		if (w->cf[i].applied >= seq) {
			s->done = 1;	/* ingested before a reopen */
			continue;
		}
		rc = ingest_step(w, i, seq);
		if (rc)
			return rc;
		return -EAGAIN;	/* bounded: the next state at the next step */
	}
	/* The others: one batch, flushed. */
	if ((rc = batch_step(w, seq)))
		return rc;
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->st[i].touched)
			w->cf[i].applied = seq;
	sfs__rdbt_stages_reset(w);
	sfs_store_relaxed(&w->pub->rp_commits, w->pub->rp_commits + 1);
	sfs_store_release(&w->pub->rp_applied, seq);
	sfs_store_release(&w->pub->rp_published, w->pub->rp_published + 1);
	if (!w->purge_token)
		w->purge_token = sfs_qsbr_start(w->seg->hdr);
	(void)sfs__rdbt_busy(w);
	return 0;
}

/*
 * One bounded step of writing state @sid's staged records as one SST, its
 * marker (= @seq) as the SST's last key, and ingesting it: RocksDB adds a
 * file to the MANIFEST atomically, so the state's entries and its marker
 * become durable and visible together, or not at all (a redo skips the
 * state when its marker shows @seq).  0 when ingested, -EAGAIN when more
 * steps are due, < 0 error (the SST is dropped and rewritten next time).
 * Cost per step: at most SST_STEP records; the ingest is a link, an
 * fsync'ed MANIFEST edit and no memtable flush (the memtables are empty).
 */
static int ingest_step(struct sfs_target_writer *w, uint32_t sid, uint64_t seq)
{
	struct wstage *s = &w->st[sid];
	char file[PATH_MAX + 64], *err = NULL;
	const char *files[1] = { file };
	size_t end;

	sst_path(w, sid, seq, file, sizeof(file));
	if (!s->sw) {
		if (backlog_wait(w, l0_backlog(w, sid)))
			return -EAGAIN;
		sfs__rdbt_stage_sort(s);
		if (s->dup)
			return 0;	/* two records of one key: the batch takes it */
		s->sst_t0 = sfs_now_ns();
		(void)unlink(file);
		s->sw = rocksdb_sstfilewriter_create(w->eo, sst_options(w, sid));
		rocksdb_sstfilewriter_open(s->sw, file, &err);
		if (err)
			return sst_fail(w, s, file, &err, "open an SST");
		for (size_t off = 0; off < s->len;) {
			unsigned op;
			const unsigned char *k, *v;
			uint32_t kl, vl;

			sfs__rdbt_srec_at(s, off, &op, &k, &kl, &v, &vl);
			off += SREC_HDR + (size_t)kl + vl;
			if (op != SOP_RANGE)
				continue;
			/* Same global seqno as the file's entries: a range
			 * tombstone covers only older ones, so the entries
			 * written after a clear survive it. */
			rocksdb_sstfilewriter_delete_range(s->sw, (const char *)k, kl,
							   (const char *)v, vl, &err);
			if (err)
				return sst_fail(w, s, file, &err, "write a range deletion to an SST");
		}
		s->sst_pos = 0;
	}
	end = s->sst_pos + SST_STEP < s->n ? s->sst_pos + SST_STEP : s->n;
	for (; s->sst_pos < end; s->sst_pos++) {
		unsigned op;
		const unsigned char *k, *v;
		uint32_t kl, vl;

		sfs__rdbt_srec_at(s, s->idx[s->sst_pos], &op, &k, &kl, &v, &vl);
		if (op == SOP_PUT)
			rocksdb_sstfilewriter_put(s->sw, (const char *)k, kl, (const char *)v, vl,
						  &err);
		else if (op == SOP_DEL)
			rocksdb_sstfilewriter_delete(s->sw, (const char *)k, kl, &err);
		else
			rocksdb_sstfilewriter_merge(s->sw, (const char *)k, kl, (const char *)v, vl,
						    &err);
		if (err)
			return sst_fail(w, s, file, &err, "write an SST");
	}
	if (s->sst_pos < s->n)
		return -EAGAIN;
	rocksdb_sstfilewriter_put(s->sw, MARKER_KEY, MARKER_LEN, (const char *)&seq, 8, &err);
	if (err)
		return sst_fail(w, s, file, &err, "write the applied marker to an SST");
	rocksdb_sstfilewriter_finish(s->sw, &err);	/* fsync'ed */
	if (err)
		return sst_fail(w, s, file, &err, "finish an SST");
	rocksdb_sstfilewriter_destroy(s->sw);
	s->sw = NULL;
	sfs_fault("rocksdb.sst");
	rocksdb_ingest_external_file_cf(w->db, w->cf[sid].h, files, 1, w->io, &err);
	if (err) {
		w->reopen = 1;
		return sst_fail(w, s, file, &err, "ingest an SST");
	}
	w->cf[sid].applied = seq;
	s->done = 1;
	sfs_store_relaxed(&w->pub->rp_ingests, w->pub->rp_ingests + 1);
	sfs_store_relaxed(&w->pub->rp_ingest_entries, w->pub->rp_ingest_entries + s->n);
	sfs_store_relaxed(&w->pub->rp_ingest_ns,
			  w->pub->rp_ingest_ns + (sfs_now_ns() - s->sst_t0));
	sfs_fault("rocksdb.ingest");
	return 0;
}

static void sst_path(const struct sfs_target_writer *w, uint32_t sid, uint64_t seq, char *buf,
		     size_t n)
{
	snprintf(buf, n, "%s/%llu.%u.sst", w->ipath, (unsigned long long)seq, sid);
}

/*
 * The options an SST of state @sid is written with: its family's, but one
 * compression, L0's.  SstFileWriter compresses with the last entry of
 * compression_per_level (ZSTD, meant for the bottom level), and an ingested
 * file usually lands in L0, where every reader probe decompresses it:
 * measured, ZSTD SSTs made the join and dedup queries slower than batches.
 */
static rocksdb_options_t *sst_options(struct sfs_target_writer *w, uint32_t sid)
{
	int l0 = (w->k.on & SFS_RDBT_K_LZ4) ? rocksdb_lz4_compression : rocksdb_zstd_compression;

	if (!w->cf[sid].so) {
		w->cf[sid].so = sfs__rdbt_cf_options(&w->seg->hdr->sh_states[sid], NULL, &w->k, 1);
		rocksdb_options_set_compression_per_level(w->cf[sid].so, &l0, 1);
		rocksdb_options_set_compression(w->cf[sid].so, l0);
		rocksdb_options_set_bottommost_compression(w->cf[sid].so, l0);
	}
	return w->cf[sid].so;
}

static int sst_fail(struct sfs_target_writer *w, struct wstage *s, const char *file, char **err,
		    const char *op)
{
	int rc = sfs__rdbt_err(file, err, op);

	if (s->sw)
		rocksdb_sstfilewriter_destroy(s->sw);
	s->sw = NULL;
	s->sst_pos = 0;
	(void)unlink(file);
	return rc ? rc : -EIO;
}

/*
 * The states not ingested: one WriteBatch of their records and markers,
 * written with the WAL off, then their memtables flushed (atomic_flush:
 * one MANIFEST edit for all).  0 when the flush is installed, -EAGAIN
 * while it runs (called again: the flush loop never blocks on it), < 0
 * error.
 */
static int batch_step(struct sfs_target_writer *w, uint64_t seq)
{
	char *err = NULL;
	int rc;
	uint64_t t0;

	if (!w->batched) {
		rocksdb_writebatch_clear(w->wb);
		w->batch_any = 0;
		for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
			struct wstage *s = &w->st[i];
			rocksdb_column_family_handle_t *h = w->cf[i].h;

			s->inbatch = 0;
			if (!s->touched || s->done || w->cf[i].applied >= seq)
				continue;
			for (size_t off = 0; off < s->len;) {
				unsigned op;
				const unsigned char *k, *v;
				uint32_t kl, vl;

				sfs__rdbt_srec_at(s, off, &op, &k, &kl, &v, &vl);
				off += SREC_HDR + (size_t)kl + vl;
				if (op == SOP_PUT)
					rocksdb_writebatch_put_cf(w->wb, h, (const char *)k, kl,
								  (const char *)v, vl);
				else if (op == SOP_DEL)
					rocksdb_writebatch_delete_cf(w->wb, h, (const char *)k, kl);
				else if (op == SOP_MERGE)
					rocksdb_writebatch_merge_cf(w->wb, h, (const char *)k, kl,
								    (const char *)v, vl);
				else
					rocksdb_writebatch_delete_range_cf(w->wb, h, (const char *)k,
									   kl, (const char *)v, vl);
			}
			rocksdb_writebatch_put_cf(w->wb, h, MARKER_KEY, MARKER_LEN,
						  (const char *)&seq, 8);
			s->inbatch = 1;
			w->batch_any = 1;
		}
		w->batched = 1;
	}
	if (!w->batch_any)
		return 0;
	if (!w->written) {
		int wait = 0;

		/* Neither the write nor its flush may wait inside RocksDB:
		 * wait here, the buffer sealed. */
		for (unsigned i = 0; i < SFS_MAX_STATES && !wait; i++)
			wait = w->st[i].inbatch && l0_backlog(w, i);
		if (backlog_wait(w, wait))
			return -EAGAIN;
		t0 = sfs_now_ns();
		rocksdb_write(w->db, w->wo, w->wb, &err);
		if (err && strncmp(err, "Incomplete", 10) == 0) {
			/* A write stall (no_slowdown): try again at the next step. */
			rocksdb_free(err);
			(void)backlog_wait(w, 1);
			return -EAGAIN;
		}
		(void)backlog_wait(w, 0);
		if (err) {
			w->reopen = 1;
			return sfs__rdbt_err(w->path, &err, "write a buffer's batch");
		}
		w->written = 1;
		sfs_store_relaxed(&w->pub->rp_write_ns, w->pub->rp_write_ns + (sfs_now_ns() - t0));
		sfs_fault("rocksdb.write");
	}
	if (!w->flushing) {
		/* Switch every batched family's memtable and schedule the
		 * flush; commit is called again until it is installed, so the
		 * compactor's loop never blocks on a flush (nor misses its
		 * heartbeat). */
		for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
			if (!w->st[i].inbatch)
				continue;
			rocksdb_flush_cf(w->db, w->fo, w->cf[i].h, &err);
			if (err) {
				w->reopen = 1;
				return sfs__rdbt_err(w->path, &err, "flush (make a buffer durable)");
			}
		}
		w->flushing = 1;
		w->flush_t0 = sfs_now_ns();
	}
	rc = flushed(w);
	if (rc < 0) {
		w->reopen = 1;	/* the memtables' writes are lost with the instance */
		return rc;
	}
	if (rc == 0)
		return -EAGAIN;
	w->flushing = 0;
	sfs_fault("rocksdb.flush");
	sfs_store_relaxed(&w->pub->rp_flush_ns,
			  w->pub->rp_flush_ns + (sfs_now_ns() - w->flush_t0));
	return 0;
}

/* Too many L0 files in @sid's family: RocksDB would stall a write (and an
 * ingest would wait inside RocksDB); the commit waits for compaction
 * instead, with the buffer sealed (the worker back-pressures). */
static int l0_backlog(struct sfs_target_writer *w, uint32_t sid)
{
	/* A string property (rocksdb_property_int_cf refuses it). */
	char *p = rocksdb_property_value_cf(w->db, w->cf[sid].h, "rocksdb.num-files-at-level0");
	uint64_t n = p ? strtoull(p, NULL, 10) : 0, rate = 0;

	if (p)
		rocksdb_free(p);
	if (n >= ((w->k.on & SFS_RDBT_K_UNIVERSAL) ? L0_BACKLOG_U : L0_BACKLOG))
		return 1;
	/* Writes already delayed (another family's backlog): a flush
	 * request would wait too. */
	return rocksdb_property_int(w->db, "rocksdb.actual-delayed-write-rate", &rate) == 0 &&
	       rate > 0;
}

/* Account a commit step deferred by an L0 backlog (@waiting) or going on
 * (0): rp_stalls counts the deferrals, wait_ns their time (in the close
 * line).  Returns @waiting. */
static int backlog_wait(struct sfs_target_writer *w, int waiting)
{
	uint64_t now = sfs_now_ns();

	if (waiting && !w->wait_t0) {
		w->wait_t0 = now;
		sfs_store_relaxed(&w->pub->rp_stalls, w->pub->rp_stalls + 1);
	} else if (!waiting && w->wait_t0) {
		w->wait_ns += now - w->wait_t0;
		w->wait_t0 = 0;
	}
	return waiting;
}

/* 1 when no memtable of a batched family waits for its flush any more (the
 * flush's files are in the MANIFEST), 0 while one does, < 0 when RocksDB
 * stopped on a background error (a failed flush: disk full, I/O). */
static int flushed(struct sfs_target_writer *w)
{
	uint64_t v = 0;

	if (rocksdb_property_int(w->db, "rocksdb.background-errors", &v) == 0 && v > 0) {
		/* The C API has no call for the background error itself; a
		 * write returns it (the instance refuses writes after it). */
		char *err = NULL;

		rocksdb_put(w->db, w->wo, IDENT_KEY ".probe", sizeof(IDENT_KEY ".probe") - 1, "", 0,
			    &err);
		if (err)
			return sfs__rdbt_err(w->path, &err, "a memtable flush failed (the file is in the "
					"instance's LOG)");
		return sfs__err(-EIO, "rocksdb target %s: %llu background errors (a memtable flush "
				"failed: see %s/LOG)", w->path, (unsigned long long)v, w->path);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (!w->st[i].inbatch)
			continue;
		if (rocksdb_property_int_cf(w->db, w->cf[i].h, "rocksdb.num-immutable-mem-table",
					    &v) != 0 || v != 0)
			return 0;
		if (rocksdb_property_int_cf(w->db, w->cf[i].h, "rocksdb.mem-table-flush-pending",
					    &v) != 0 || v != 0)
			return 0;
	}
	return 1;
}

/* Open a file-deletion window once the grace period of the last one's
 * successor has passed: obsolete files go now. */
int sfs__rdbt_busy(struct sfs_target_writer *w)
{
	char *err = NULL;
	int work = w->flushing || w->staged || w->fails;

	if (!w->db || !w->purge_token ||
	    sfs_qsbr_check(w->seg, w->self, w->purge_token, 0) != 1)
		return w->purge_token != 0 || work;
	rocksdb_enable_file_deletions(w->db, 0, &err);
	if (err)
		rocksdb_free(err);
	err = NULL;
	rocksdb_disable_file_deletions(w->db, &err);
	if (err)
		rocksdb_free(err);
	w->purge_token = 0;
	sfs_store_relaxed(&w->pub->rp_purges, w->pub->rp_purges + 1);
	return work;
}
