/*
 * memdump.c — full dumps of the memory store and their load (memdump.h);
 * the reader is memdump_read.c.
 */
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/keygroup.h"
#include "common/log.h"
#include "shm/child.h"
#include "store/memory/memdump.h"
#include "store/memory/memdump_fmt.h"
#include "worker/wbuf.h"

#define RETRY_NS 1000000000ull	/* a failed dump is tried again after a second */

struct dump_ctx {
	FILE *f;
	uint64_t n, h;
	int beat;               /* main thread: sfs_child_progress */
	const int *stop;        /* a dump thread: give up when set */
};

static int dump_one(void *arg, const struct sfs_mstore_entry *e, const void *key,
		    const void *value)
{
	struct dump_ctx *d = arg;
	uint32_t kind = e->me_kf >> 24;
	struct rec_hdr r;

	if (kind == SFS_MSTORE_K_HEAD)
		return 0;

	memset(&r, 0, sizeof(r));
	r.kind = kind == SFS_MSTORE_K_ENTRY ? 'E' : 'V';
	r.klen = e->me_kf & 0xffffffu;
	r.vlen = e->me_vlen;
	r.ns = e->me_ns;
	if (kind == SFS_MSTORE_K_ENTRY) {
		if (r.vlen < sizeof(struct sfs_mstore_link))
			return sfs__err(SFS_ECORRUPT, "memory store: map entry of %u bytes", r.vlen);
		value = (const char *)value + sizeof(struct sfs_mstore_link);
		r.vlen -= sizeof(struct sfs_mstore_link);
	}
	fwrite(&r, sizeof(r), 1, d->f);
	fwrite(key, 1, r.klen, d->f);
	fwrite(value, 1, r.vlen, d->f);
	d->h = sfs_hash_bytes(d->h, &r, sizeof(r));
	d->h = sfs_hash_bytes(d->h, key, r.klen);
	d->h = sfs_hash_bytes(d->h, value, r.vlen);
	if (++d->n % 4096 == 0) {
		if (d->beat)
			sfs_child_progress();	/* a dump grows with the state */
		if (d->stop && sfs_load_relaxed(d->stop))
			return -ECANCELED;
	}
	return 0;
}

/* Write the live version (@frozen 0) or the pinned one (1) of @ms. */
static int write_file(const struct sfs_mstore *ms, uint32_t worker, const char *path, int frozen,
		      int beat, const int *stop, uint64_t *records)
{
	char tmp[4200];
	struct dump_ctx d = { NULL, 0, SFS_HASH_P0, beat, stop };
	uint32_t hw[2] = { worker, 0 };
	int rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	d.f = fopen(tmp, "w");
	if (!d.f)
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	setvbuf(d.f, NULL, _IOFBF, 1 << 20);
	fwrite(MAGIC, 1, 8, d.f);
	fwrite(hw, sizeof(hw), 1, d.f);
	rc = !ms ? 0 : frozen ? sfs_mstore_frozen_foreach(ms, dump_one, &d)
			      : sfs_mstore_foreach(ms, dump_one, &d);
	fwrite(END, 1, 8, d.f);
	fwrite(&d.n, sizeof(d.n), 1, d.f);
	fwrite(&d.h, sizeof(d.h), 1, d.f);
	rc = sfs_file_commit(d.f, tmp, path, rc);
	if (!rc)
		*records = d.n;
	return rc;
}

int sfs_mdump_write(const struct sfs_mstore *ms, uint32_t worker, const char *path,
		    uint64_t *records)
{
	return write_file(ms, worker, path, 0, 1, NULL, records);
}

/* ---- the dump thread ------------------------------------------------------ */

static void *dump_main(void *arg)
{
	struct sfs_mdump_job *j = arg;
	const struct sfs_mstore *ms = j->dj_ms;
	char dir[SFS_MSTORE_DUMP_PATH], *slash;
	uint64_t recs = 0;
	int rc = 0;

	/* A successor's redo: the stage directory normally exists already. */
	snprintf(dir, sizeof(dir), "%s", ms->ms_dump_path);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = 0;
		if (access(dir, F_OK))
			rc = sfs_mkdirs(dir, 0700);
	}
	if (!rc)
		rc = write_file(ms, ms->ms_worker, ms->ms_dump_path, 1, 0, &j->dj_stop, &recs);
	j->dj_rc = rc;
	j->dj_records = recs;
	if (rc)
		snprintf(j->dj_err, sizeof(j->dj_err), "%s", sfs_last_error());
	sfs_store_release(&j->dj_done, 1);
	return NULL;
}

static int launch(struct sfs_mstore_writer *w, struct sfs_mdump_job *j)
{
	sigset_t all, old;
	int rc;

	j->dj_ms = w->ms;
	j->dj_done = 0;
	j->dj_rc = 0;
	j->dj_stop = 0;
	j->dj_started_ns = sfs_now_ns();
	/* Signals stay with the main thread (its loop checks sfs_child_stop). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&j->dj_thread, NULL, dump_main, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return sfs__err(-rc, "memory store %u: dump thread: %s", w->ms->ms_worker,
				strerror(rc));
	j->dj_running = 1;
	return 0;
}

/* Join a thread that finished: 1 (its result in dj_rc), 0 still running. */
static int reap(struct sfs_mdump_job *j)
{
	if (!j->dj_running || !sfs_load_acquire(&j->dj_done))
		return 0;
	pthread_join(j->dj_thread, NULL);
	j->dj_running = 0;
	return 1;
}

/* After a reap: thaw a durable dump, or schedule the retry of a failed
 * one.  0 or the attempt's error. */
static int finished(struct sfs_mstore_writer *w, struct sfs_mdump_job *j, uint64_t now)
{
	if (j->dj_rc == 0) {
		sfs_mstore_thaw(w);
		j->dj_last_ns = now - j->dj_started_ns;
		return 0;
	}
	j->dj_retry_ns = now + RETRY_NS;
	return sfs__err(j->dj_rc, "memory store %u: dump of checkpoint %llu to %s failed, "
			"retried: %s", w->ms->ms_worker, (unsigned long long)w->ms->ms_dump_id,
			w->ms->ms_dump_path, j->dj_err);
}

/* With no thread running: a pin to finish (a predecessor's, or a failed
 * attempt's whose retry is due). */
static int resume(struct sfs_mstore_writer *w, struct sfs_mdump_job *j, uint64_t now)
{
	struct sfs_mstore *ms = w->ms;
	int rc;

	if (j->dj_running || !ms->ms_dump_list)
		return 0;
	if (sfs_load_acquire(&ms->ms_dump_done) == ms->ms_dump_id) {
		sfs_mstore_thaw(w);	/* killed between the two stores of a thaw */
		return 0;
	}
	if (now < j->dj_retry_ns)
		return 0;
	rc = launch(w, j);
	if (rc)
		j->dj_retry_ns = now + RETRY_NS;
	return rc;
}

int sfs_mdump_start(struct sfs_mstore_writer *w, struct sfs_mdump_job *j, uint64_t id,
		    const char *path)
{
	int rc;

	if (!w->ms->ms_dump_list && sfs_load_acquire(&w->ms->ms_dump_done) == id)
		return 0;	/* durable already (a redone flush); poll reports it */
	rc = sfs_mstore_freeze(w, id, path);
	if (rc < 0)
		return rc;
	/* Pinned now, or before by this id (a redone flush after a kill). */
	j->dj_retry_ns = 0;
	if (resume(w, j, sfs_now_ns()))
		sfs_log("%s (retried)", sfs_last_error());	/* the pin holds: poll retries */
	return 0;
}

int sfs_mdump_poll(struct sfs_mstore_writer *w, struct sfs_mdump_job *j, uint64_t *id,
		   uint64_t *seq)
{
	struct sfs_mstore *ms = w->ms;
	uint64_t now = sfs_now_ns(), done;
	int rc = 0, rrc;

	if (reap(j))
		rc = finished(w, j, now);
	rrc = resume(w, j, now);
	if (rc || rrc)
		return rc ? rc : rrc;
	done = sfs_load_acquire(&ms->ms_dump_done);
	if (done <= j->dj_reported)
		return 0;
	*id = done;
	*seq = ms->ms_dump_done_seq;
	j->dj_reported = done;
	return 1;
}

int sfs_mdump_busy(const struct sfs_mstore_writer *w, const struct sfs_mdump_job *j)
{
	return w->ms->ms_dump_list || sfs_load_relaxed(&w->ms->ms_dump_done) > j->dj_reported;
}

int sfs_mdump_wait(struct sfs_mstore_writer *w, struct sfs_mdump_job *j)
{
	uint64_t t0 = sfs_now_ns();
	int said = 0;

	while (w->ms->ms_dump_list) {
		uint64_t now = sfs_now_ns();
		int rc = 0;

		if (reap(j))
			rc = finished(w, j, now);
		if (!rc)
			rc = resume(w, j, now);
		if (rc && !said) {
			sfs_log("%s", sfs_last_error());
			said = 1;
		}
		if (sfs_child_stop)
			return sfs__err(-EINTR, "memory store %u: stopped while waiting for its dump",
					w->ms->ms_worker);
		if (!w->ms->ms_dump_list)
			break;
		usleep(1000);
		sfs_child_progress();	/* this thread is not stuck: it waits */
	}
	sfs_log("memory store %u: a copy waited %.1f ms for the checkpoint dump",
		w->ms->ms_worker, (sfs_now_ns() - t0) / 1e6);
	return 0;
}

void sfs_mdump_stop(struct sfs_mstore_writer *w, struct sfs_mdump_job *j)
{
	if (!j->dj_running)
		return;
	sfs_store_relaxed(&j->dj_stop, 1);
	pthread_join(j->dj_thread, NULL);
	j->dj_running = 0;
	if (j->dj_rc == 0)
		sfs_mstore_thaw(w);	/* it had finished: no redo for the successor */
}

struct load {
	struct sfs_mstore_writer *w;
	uint32_t kg_lo, kg_hi;
	uint64_t n, loaded;
};

static int load_one(void *arg, const struct sfs_mdump_rec *r)
{
	struct load *l = arg;
	uint32_t kg = sfs_key_prefix_kg(r->key);
	int rc;

	if (++l->n % 4096 == 0)
		sfs_child_progress();
	if (kg < l->kg_lo || kg > l->kg_hi)
		return 0;
	if (r->kind == 'V')
		rc = sfs_mstore_apply(l->w, SFS_MSTORE_PUT, 0, sfs_wbuf_hash(r->ns, r->key, r->klen),
				      r->ns, r->key, r->klen, r->val, r->vlen, 0);
	else
		rc = sfs_mstore_map_put(l->w, sfs_wbuf_hash(r->ns, r->key, r->klen),
					sfs_wbuf_hash(r->ns, r->key, r->plen), r->ns, r->key, r->klen,
					r->plen, r->val, r->vlen, 0);
	if (!rc)
		l->loaded++;
	return rc;
}

int sfs_mdump_load(struct sfs_mstore_writer *w, const char *path, uint32_t kg_lo,
		   uint32_t kg_hi, uint64_t *records)
{
	struct load l = { .w = w, .kg_lo = kg_lo, .kg_hi = kg_hi };
	int rc = sfs_mdump_read(path, load_one, &l, NULL);

	if (rc)
		return rc;
	sfs_mstore_commit(w, 0);
	*records = l.loaded;
	return 0;
}
