/*
 * coord.c — checkpoint coordination (coord.h); the state registry's config
 * value and its parser are coord_states.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "checkpointer/ckstore.h"
#include "checkpointer/coord.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "common/log.h"
#include "sfs.h"
#include "shm/proc.h"

#define MS 1000000ull
#define POLL_NS (1 * MS)          /* while a checkpoint is in flight */
#define WAIT_LOG_NS (10000 * MS)  /* "still waiting" every 10 s */

int sfs__ck_coord_open(struct ck_coord *c, struct sfs_seg *seg, const char *job)
{
	struct sfs_ckpt *ck;
	uint64_t base;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = sfs_ckpt_find(seg, &c->ck)))
		return rc;
	ck = c->ck;
	c->name = job;
	c->seg = seg;
	c->interval_ns = ck->ck_interval_ms == SFS_CKPT_ENGINE ? 0 : ck->ck_interval_ms * MS;
	snprintf(c->root, sizeof(c->root), SFS_CKPT_DIR_FMT, ck->ck_data_dir);
	/* The reference set: this run's last checkpoint, else the one it
	 * restored from, else none (never a newer one of an abandoned branch). */
	base = sfs_load_acquire(&ck->ck_done);
	if (!base)
		base = ck->ck_restored_id;
	rc = sfs__ck_store_open(c->root, job, ck->ck_retain ? ck->ck_retain : CK_DEFAULT_RETAIN, base,
			   &c->store);
	if (rc)
		return rc;
	/* A barrier requested by our predecessor and not completed: finish it. */
	if (sfs_load_relaxed(&ck->ck_barrier_req) > ck->ck_first_barrier &&
	    sfs_load_relaxed(&ck->ck_barrier_req) > base) {
		c->inflight = ck->ck_barrier_req;
		c->t_begin = sfs_now_ns();
		sfs_log("checkpoint %" PRIu64 " was in flight: completing it", c->inflight);
	}
	c->next_ns = sfs_now_ns() + c->interval_ns;
	return 0;
}

void sfs__ck_coord_close(struct ck_coord *c)
{
	if (c->store)
		sfs__ck_store_close(c->store);
	c->store = NULL;
}

static void drop_stage(struct ck_coord *c, uint64_t id)
{
	char dir[SFS_CKPT_PATH_MAX + 64];

	for (uint32_t w = 0; w < c->ck->ck_workers; w++) {
		if (sfs_ckpt_stage_dir(c->ck, w, id, dir, sizeof(dir)) || sfs_rmtree(dir))
			sfs_log("%s", sfs_last_error());
	}
}

/*
 * Worker @w has finished (SFS_CKW_FINISHED): stage its files of the newest
 * completed checkpoint in @dir and take its version and bytes from there
 * (read once per checkpoint into @prev).  Its final state is in that one:
 * no checkpoint completed without its last seal.
 */
static int carry(struct ck_coord *c, struct ck_meta *prev, uint32_t w, const char *dir,
		 struct ck_table *table, struct ck_source *source)
{
	uint64_t last = sfs__ck_store_last(c->store);
	char cdir[SFS_CKPT_PATH_MAX + 64];
	int rc;

	if (!prev->id) {
		if (!last)
			return sfs__err(SFS_EUSAGE, "worker %u finished before any checkpoint", w);
		snprintf(cdir, sizeof(cdir), "%s/chk-%" PRIu64, c->root, last);
		if ((rc = sfs__ck_read(cdir, c->name, 0, prev)))
			return rc;
	}
	if (prev->workers != c->ck->ck_workers)
		return sfs__err(SFS_EUSAGE, "worker %u finished, and checkpoint %" PRIu64 " has %u "
				"workers, not %u", w, prev->id, prev->workers, c->ck->ck_workers);
	if ((rc = sfs_rmtree(dir)) || (rc = sfs__ck_stage_carry(prev, c->root, w, dir)))
		return rc;
	for (uint32_t i = 0; i < prev->ntables; i++)
		if (prev->tables[i].worker == w)
			table->version = prev->tables[i].version;
	for (uint32_t i = 0; i < prev->nsources; i++)
		if (prev->sources[i].worker == w)
			*source = prev->sources[i];
	return 0;
}

#define CK_IO_RETRY_NS (1000 * MS)

static int complete_once(struct ck_coord *c, uint64_t now);

/* Checkpoint c->inflight could not be written for @rc, a disk's trouble:
 * it stays in flight and is tried again later (complete() starts over: a
 * failed commit removed what it wrote).  The first failure of an episode
 * is logged with the file the message names; the supervisor stops the
 * group if the trouble outlasts --io-stall-timeout-ms. */
static int io_retry(struct ck_coord *c, uint64_t now, int rc)
{
	if (sfs_proc_io(c->self, rc))
		sfs_log("checkpoint %" PRIu64 " cannot be written: %s; retrying every %llu ms "
			"(checkpoint %" PRIu64 " stays the last complete one)", c->inflight,
			sfs_last_error(), (unsigned long long)(CK_IO_RETRY_NS / MS),
			sfs_load_relaxed(&c->ck->ck_done));
	c->io_retries++;
	c->io_retry_at = now + CK_IO_RETRY_NS;
	return 0;
}

/* The synchronous phase of checkpoint c->inflight. */
static int complete(struct ck_coord *c, uint64_t now)
{
	int rc = complete_once(c, now);

	if (rc < 0 && sfs_io_trouble_errno(rc))
		return io_retry(c, now, rc);
	if (rc > 0 && c->io_retries) {
		sfs_log("checkpoint %" PRIu64 " written after %" PRIu64 " retries: the disk has room "
			"again", sfs_load_relaxed(&c->ck->ck_done), c->io_retries);
		c->io_retries = 0;
	}
	if (rc > 0)
		sfs_proc_io(c->self, 0);
	return rc;
}

static int complete_once(struct ck_coord *c, uint64_t now)
{
	struct sfs_ckpt *ck = c->ck;
	uint64_t id = c->inflight, took;
	struct ck_source sources[SFS_CKPT_MAX_WORKERS];
	struct ck_table tables[SFS_CKPT_MAX_WORKERS];
	struct ck_txn_stats st;
	struct ck_meta m, prev;
	struct ck_txn *t;
	struct timeval tv;
	char dir[SFS_CKPT_PATH_MAX + 64];
	int rc;

	if (sfs__ck_store_max_id(c->store) >= id) {
		/* A predecessor died between the _metadata rename and publishing
		 * it: if chk-<id> is valid it is complete — adopt it as the
		 * reference set and finish phase two; if not, skip the id. */
		struct ck_meta done;
		char cdir[SFS_CKPT_PATH_MAX + 64];

		memset(&done, 0, sizeof(done));
		snprintf(cdir, sizeof(cdir), "%s/chk-%" PRIu64, c->root, id);
		rc = sfs__ck_read(cdir, c->name, 0, &done);
		sfs__ck_meta_free(&done);
		sfs__ck_store_close(c->store);
		c->store = NULL;
		if ((rc = sfs__ck_store_open(c->root, c->name, ck->ck_retain ? ck->ck_retain :
					CK_DEFAULT_RETAIN, rc ? ck->ck_done : id, &c->store)))
			return rc;
		if (sfs__ck_store_last(c->store) != id) {
			sfs_log("checkpoint %" PRIu64 " exists but is not valid: skipped", id);
			sfs_store_relaxed(&ck->ck_aborted, ck->ck_aborted + 1);
			drop_stage(c, id);
			c->inflight = 0;
			return 1;
		}
		memset(&st, 0, sizeof(st));
		goto published;
	}
	rc = sfs__ck_txn_begin(c->store, id, &t);
	if (rc)
		return rc;
	memset(&prev, 0, sizeof(prev));
	for (uint32_t w = 0; w <= ck->ck_workers; w++) {
		struct sfs_ckpt_worker *cw = &ck->ck_w[w];

		/* A rollback asked meanwhile (a worker died) waits for no more
		 * files: the checkpoint is abandoned before its _metadata, and
		 * the next step answers (rollback()). */
		if (sfs_load_acquire(&ck->ck_rb_req) > sfs_load_relaxed(&ck->ck_rb_ack)) {
			sfs__ck_txn_abort(t);
			sfs__ck_meta_free(&prev);
			return 1;
		}
		if (w == ck->ck_workers)
			break;
		if ((rc = sfs_ckpt_stage_dir(ck, w, id, dir, sizeof(dir)))) {
			sfs__ck_txn_abort(t);
			sfs__ck_meta_free(&prev);
			return rc;
		}
		tables[w].worker = w;
		sources[w].worker = w;
		if (sfs_load_relaxed(&cw->cw_sealed) < id) {
			/* finished (sfs__ck_coord_step): its state and bytes as the
			 * newest checkpoint has them */
			if ((rc = carry(c, &prev, w, dir, &tables[w], &sources[w]))) {
				sfs__ck_txn_abort(t);
				sfs__ck_meta_free(&prev);
				return rc;
			}
		} else {
			tables[w].version = sfs_load_relaxed(&cw->cw_snap_version);
			/* stable: the worker sealed id (acquire in sfs__ck_coord_step)
			 * and writes no bytes again before id+1 is requested */
			sources[w].len = cw->cw_bytes_len <= SFS_CKPT_BYTES_MAX ? cw->cw_bytes_len : 0;
			sources[w].bytes = cw->cw_bytes;
		}
		if ((rc = sfs__ck_txn_add_dir(t, w, dir))) {
			sfs__ck_txn_abort(t);
			sfs__ck_meta_free(&prev);
			return rc;
		}
	}
	memset(&m, 0, sizeof(m));
	m.version = CK_FORMAT_VERSION;
	m.id = id;
	gettimeofday(&tv, NULL);
	m.time_ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
	snprintf(m.job, sizeof(m.job), "%s", c->name);
	snprintf(m.config, sizeof(m.config), "%.*s", SFS_CKPT_CONFIG_MAX, ck->ck_config);
	{
		size_t used = strlen(m.config);

		if (used)
			m.config[used++] = ' ';
		if ((rc = sfs__ck_coord_states(c->seg, m.config + used,
					  (unsigned)(sizeof(m.config) - used)))) {
			sfs__ck_txn_abort(t);
			sfs__ck_meta_free(&prev);
			return rc;
		}
	}
	m.workers = ck->ck_workers;
	m.sink_epoch = id;
	m.nsources = ck->ck_workers;
	m.sources = sources;
	m.ntables = ck->ck_workers;
	m.tables = tables;
	rc = sfs__ck_txn_commit(t, &m, &st);
	sfs__ck_meta_free(&prev);
	if (rc)
		return rc;
published:
	sfs_ckpt_publish_done(ck, id);
	took = sfs_now_ns() - c->t_begin;
	/* every duration, for the summary's median and max (a ring of the
	 * last SFS_CKPT_DURATIONS) */
	ck->ck_us[ck->ck_count % SFS_CKPT_DURATIONS] =
		took / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(took / 1000);
	if (took > ck->ck_max_ns)
		sfs_store_relaxed(&ck->ck_max_ns, took);
	sfs_store_relaxed(&ck->ck_count, ck->ck_count + 1);
	sfs_store_relaxed(&ck->ck_last_ns, took);
	sfs_store_relaxed(&ck->ck_links, ck->ck_links + st.links + st.copies);
	sfs_store_relaxed(&ck->ck_refs, ck->ck_refs + st.referenced);
	drop_stage(c, id);
	sfs_log("checkpoint %" PRIu64 " complete in %.1f ms (barrier to snapshots %.1f ms, "
		"storage %.1f ms): %u files linked, %u copied, %u referenced, %" PRIu64
		" new bytes", id, (sfs_now_ns() - c->t_begin) / 1e6, (now - c->t_begin) / 1e6,
		(sfs_now_ns() - now) / 1e6, st.links, st.copies, st.referenced, st.new_bytes);
	c->inflight = 0;
	c->next_ns = c->t_begin + c->interval_ns > now ? c->t_begin + c->interval_ns : now;
	return 1;
}

/*
 * Rollback R asked (shm/ckpt.h, step a): abandon the checkpoint in flight,
 * name the one to return to and ack.  Every worker is gone and reset to
 * STARTING, so nothing is requested again until they all run.
 */
static int rollback(struct ck_coord *c, uint64_t r, uint64_t now)
{
	struct sfs_ckpt *ck = c->ck;
	uint64_t to = sfs_load_relaxed(&ck->ck_done);

	if (!to)
		to = ck->ck_restored_id;
	if (c->inflight) {
		sfs_log("checkpoint %" PRIu64 " abandoned: the group rolls back to checkpoint %"
			PRIu64, c->inflight, to);
		sfs_store_relaxed(&ck->ck_aborted, ck->ck_aborted + 1);
		drop_stage(c, c->inflight);
		c->inflight = 0;
	}
	c->finishing = 0;
	c->io_retry_at = 0;
	c->next_ns = now + c->interval_ns;
	sfs_fault("ck.rollback");
	sfs_store_relaxed(&ck->ck_rb_to, to);
	sfs_store_release(&ck->ck_rb_ack, r);
	return 1;
}

int sfs__ck_coord_step(struct ck_coord *c, uint64_t now, uint64_t *poll_ns)
{
	struct sfs_ckpt *ck = c->ck;
	uint64_t id = c->inflight, r = sfs_load_acquire(&ck->ck_rb_req);
	unsigned ready = 0, running = 0;

	*poll_ns = 0;
	if (r > sfs_load_relaxed(&ck->ck_rb_ack))
		return rollback(c, r, now);
	if (!c->interval_ns) {
		/* A host group (sfs run --host): its engine requests and keeps
		 * its own checkpoints from the staged files. */
		*poll_ns = 100 * MS;
		return 0;
	}
	if (!id) {
		if (c->finishing)
			return 0;
		for (uint32_t w = 0; w < ck->ck_workers; w++) {
			uint32_t ph = sfs_load_acquire(&ck->ck_w[w].cw_phase);

			if (ph == SFS_CKW_ENDED) {
				c->finishing = 1;
				return 0;
			}
			if (ph == SFS_CKW_FINISHED)
				continue;
			if (ph != SFS_CKW_RUNNING) {
				*poll_ns = 10 * MS;
				return 0;	/* still starting */
			}
			running++;
		}
		if (!running) {
			c->finishing = 1;	/* every worker finished cleanly */
			return 0;
		}
		if (now < c->next_ns) {
			*poll_ns = c->next_ns - now;
			return 0;
		}
		id = sfs_load_relaxed(&ck->ck_barrier_req);
		if (sfs_load_relaxed(&ck->ck_done) > id)
			id = ck->ck_done;
		if (sfs__ck_store_max_id(c->store) > id)
			id = sfs__ck_store_max_id(c->store);	/* never reuse a directory */
		c->inflight = ++id;
		c->t_begin = now;
		c->next_wait_log = now + WAIT_LOG_NS;
		sfs_store_release(&ck->ck_barrier_req, id);
		*poll_ns = POLL_NS;
		return 1;
	}
	for (uint32_t w = 0; w < ck->ck_workers; w++) {
		struct sfs_ckpt_worker *cw = &ck->ck_w[w];

		if (sfs_load_acquire(&cw->cw_sealed) < id) {
			uint32_t ph = sfs_load_acquire(&cw->cw_phase);

			if (ph == SFS_CKW_FINISHED) {
				ready++;	/* carried: complete() */
				continue;
			}
			if (ph == SFS_CKW_ENDED) {
				/* it will never seal id: the end of input takes over */
				sfs_log("checkpoint %" PRIu64 " aborted: worker %u finished its "
					"input", id, w);
				sfs_store_relaxed(&ck->ck_aborted, ck->ck_aborted + 1);
				drop_stage(c, id);
				c->inflight = 0;
				c->finishing = 1;
				return 1;
			}
			continue;
		}
		if (sfs_load_acquire(&cw->cw_snap_barrier) < id)
			continue;
		ready++;
	}
	if (ready == ck->ck_workers && c->io_retry_at > now) {
		*poll_ns = c->io_retry_at - now;
		return 0;
	}
	if (ready < ck->ck_workers) {
		if (now >= c->next_wait_log) {
			sfs_log("checkpoint %" PRIu64 ": %u of %u workers sealed and snapshotted "
				"after %.1f s", id, ready, ck->ck_workers, (now - c->t_begin) / 1e9);
			c->next_wait_log = now + WAIT_LOG_NS;
		}
		*poll_ns = POLL_NS;
		return 0;
	}
	return complete(c, now);
}
