/*
 * job.c — `sfs run --query`: the supervisor's side of a query job.
 *
 * Before any worker starts it checks the arguments (one-line errors, exit
 * 2, nothing created or overwritten), then writes the job description and
 * carves the exchange channels (runtime/job.h) into node 0's segment.
 * A restore (--restore, or a recovery after a worker died) validates the
 * checkpoint, puts each worker's files in place, commits the sink epochs
 * the checkpoint covers and drops newer ones, and starts the sources at the
 * checkpoint's offsets.  While the group runs the checkpointer drives the
 * barriers; the supervisor shows progress on a terminal and watches the
 * workers' status lines: all done → commit the final sink epochs, replay
 * the changelogs into --output and print the summary; one failed → the
 * caller recovers or stops the group.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <inttypes.h>

#include "baseline/rocksdb_direct.h"
#include "checkpointer/ckstore.h"
#include "checkpointer/coord.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "query/queries.h"
#include "runtime/backend.h"
#include "runtime/engine.h"
#include "runtime/chan.h"
#include "runtime/job.h"
#include "runtime/query.h"
#include "runtime/sink.h"
#include "runtime/util.h"
#include "supervisor/sup.h"
#include "store/rocksdb/rocksdb.h"
#include "store/table/table.h"
#include "store/table/table_snap.h"
#include "store/target.h"
#include "shm/futex.h"
#include "common/keygroup.h"
#include "worker/state.h"
#include "shm/ckpt.h"

#define MS 1000000ull

static struct rt_job *job;
static struct sfs_ckpt *ck;     /* the group's checkpoint protocol (shm/ckpt.h) */
static struct sfs_seg *job_seg;
static const char *job_name;
static uint64_t t_start, next_progress;
static int progress_tty;

/* A failed runtime call (@rc < 0): its message (the runtime keeps its own,
 * runtime/util.h) becomes sfs's, which this file's callers report. */
static void carry_workers(void);

static int rt_adopt(int rc)
{
	return rc < 0 ? sfs__err(rc, "%s", rt_last_error()) : rc;
}

/* The run's totals of what lives in a segment and so would go with it at a
 * recovery (sup_query_carry): the bytes of the buffers flushed and every
 * checkpoint's duration in µs (grown by doubling; a run of 1 s checkpoints
 * adds 4 bytes a second). */
static struct {
	int done;                /* this incarnation carried already */
	uint64_t sealed_bytes;
	uint64_t ttl_dropped;    /* entries of TTL states dropped as expired at flush */
	uint32_t *ckpt_us;
	size_t nckpt, cap;
	uint64_t ckpt_max_ns;
	/* The workers' counters of earlier incarnations (carry_workers: before
	 * a restart destroys the job region, before a rollback in place clears
	 * it, and once before the summary), so the summary counts the run. */
	uint64_t barriers, stall_ns, seal_ns, seal_cpu_ns, seal_max_ns;
	uint64_t first_ns;       /* the first incarnation's first worker start */
	/* The checkpoint region's counters (recreated with the segment at a
	 * restart; a rollback in place keeps it). */
	uint64_t ck_count, ck_links, ck_refs;
} carried;

/* The run's recoveries, in order: each one's moments (CLOCK_MONOTONIC ns)
 * for the summary's recovery_* lists.  An entry is opened by
 * sup_query_recovery() once the old group is stopped, gets its restore's
 * end when the next incarnation's setup returns, and its first record when
 * that incarnation is carried (before the next recovery or the summary). */
struct recovery {
	uint64_t detect_ns;      /* the supervisor saw the worker's death */
	uint64_t stopped_ns;     /* the old group's children all stopped */
	uint64_t restored_ns;    /* segments recreated, checkpoint restored (0: setup failed) */
	uint64_t first_ns;       /* the new incarnation's workers' first record (0: none) */
	const char *kind;        /* "restart" (the whole group from its checkpoint) */
};
static struct {
	struct recovery *v;
	size_t n, cap;
	int open;                /* v[n - 1] still waits for its first record */
} recs;

static int writable_dir(const char *dir, int create)
{
	char probe[PATH_MAX];
	struct stat st;
	int fd;

	if (create && mkdir(dir, 0700)) {   /* the data directory: private */
		if (errno != EEXIST)
			return -errno;
	} else if (create && (fd = sfs_mkdirs_durable(dir, 0700))) {
		/* made now: its entry durable too (the checkpoints and the sink
		 * below it are; a power loss must not take the directory) */
		return fd;
	}
	if (stat(dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	snprintf(probe, sizeof(probe), "%s/.sfs-probe-%d", dir, (int)getpid());
	fd = open(probe, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	unlink(probe);
	return 0;
}

/*
 * The data directory holds the job's checkpoints, which a restore loads:
 * whoever can write it can plant state.  An existing one must be a real
 * directory (lstat: not a link, which could lead anywhere, e.g. the default
 * /tmp/sfs-<job> planted by another user), owned by this euid and not
 * group- or world-writable; a missing one is made 0700 by writable_dir.
 * Its parents are the user's choice and not checked.  Prints the line and
 * returns nonzero.
 */
static int private_dir(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st)) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "sfs run: --data %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		fprintf(stderr, "sfs run: --data %s: a symbolic link (refused: pass the directory "
			"it names)\n", dir);
		return SFS_EFOREIGN;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "sfs run: --data %s: not a directory\n", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		fprintf(stderr, "sfs run: --data %s: owned by uid %u, this process is uid %u "
			"(refused: another user could plant state in it)\n", dir,
			(unsigned)st.st_uid, (unsigned)geteuid());
		return SFS_EFOREIGN;
	}
	if (st.st_mode & 022) {
		fprintf(stderr, "sfs run: --data %s: mode %03o, group- or world-writable "
			"(refused: others could plant state in it; chmod 700)\n", dir,
			(unsigned)(st.st_mode & 07777));
		return SFS_EFOREIGN;
	}
	return 0;
}

int sup_query_check(struct sup_query *q, unsigned workers)
{
	char dir[PATH_MAX];
	int rc;

	if (q->exec) {
		const struct sfs_target_ops *t = sup_backend_target(q->backend);

		/* the user's program keeps its state in sfs: a flush target */
		if (!t || strcmp(t->name, q->backend)) {
			fprintf(stderr, "sfs run: --exec --backend %s: want table, rocksdb or memory\n",
				q->backend);
			return 2;
		}
		if (q->output) {
			fprintf(stderr, "sfs run: --output is a query's: the program writes its own\n");
			return 2;
		}
	} else if (!rt_query_find(q->query)) {
		fprintf(stderr, "sfs run: unknown query '%s' (known:", q->query);
		for (unsigned i = 0; rt_queries[i]; i++)
			fprintf(stderr, " %s", rt_queries[i]->name);
		fprintf(stderr, ")\n");
		return 2;
	}
	if (!rt_backend_find(q->backend)) {
		fprintf(stderr, "sfs run: unknown backend '%s' (known: %s)\n", q->backend,
			sup_backend_names());
		return 2;
	}
	if (workers > RT_MAX_WORKERS) {
		fprintf(stderr, "sfs run: --workers %u: a query job runs at most %u workers\n",
			workers, RT_MAX_WORKERS);
		return 2;
	}
	if (strlen(q->data_dir) >= RT_PATH_MAX - 24) {
		fprintf(stderr, "sfs run: --data %s: path too long\n", q->data_dir);
		return 2;
	}
	if ((rc = private_dir(q->data_dir)))
		return 2;
	if ((rc = writable_dir(q->data_dir, 1))) {
		fprintf(stderr, "sfs run: --data %s: not a writable directory (%s)\n", q->data_dir,
			strerror(-rc));
		return 2;
	}
	if (q->output) {
		const char *slash = strrchr(q->output, '/');

		if (slash)
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - q->output), q->output);
		else
			snprintf(dir, sizeof(dir), ".");
		if (!dir[0])
			snprintf(dir, sizeof(dir), "/");
		if ((rc = writable_dir(dir, 0))) {
			fprintf(stderr, "sfs run: --output %s: directory %s is not writable (%s)\n",
				q->output, dir, strerror(-rc));
			return 2;
		}
	}
	return 0;
}

/* Segment bytes a query job needs beyond the group's own: per worker its
 * region as sized with the job's cache and buffers (--cache-mb and
 * --buffer-mb, which this once ignored: a larger cache left the memory
 * store no room), 2 MiB of smaller regions and the memory store. */
uint64_t sup_query_segment_bytes(const struct sup_query *q, unsigned workers)
{
	struct sfs_worker_opts o = { .parallelism = workers,
				     .cache_bytes = q->cache_bytes,
				     .buffer_bytes = q->buffer_bytes };
	uint64_t per_worker = sfs_worker_region_bytes(&o) + (2ull << 20);
	uint64_t chans = rt_chans_bytes(workers, sup_query_chan_bytes(workers));

	return workers * per_worker + workers * q->store_bytes + chans + (64ull << 20);
}

uint64_t sup_query_chan_bytes(unsigned workers)
{
	/* 1 MiB per channel up to 4 workers, shrinking to keep the region
	 * near 64 MiB; never below 64 KiB (a record is at most ~1 KiB).
	 * SFS_CHAN_KB (rounded up to a power of two, at least 8) overrides. */
	const char *env = getenv("SFS_CHAN_KB");	/* tests: tiny channels force spills */
	uint64_t b = 1ull << 20;

	if (env) {
		unsigned long kb = strtoul(env, NULL, 10);

		for (b = 8ull << 10; b < (uint64_t)kb << 10 && b < (1ull << 30); b <<= 1)
			;
		return b;
	}
	while (b > (64ull << 10) && (uint64_t)RT_MAX_STAGES * workers * workers * b > (64ull << 20))
		b >>= 1;
	return b;
}

/* The greatest checkpoint id under @root, valid or not: a new run's
 * barrier ids start above it, so no checkpoint directory is ever reused. */
static uint64_t max_checkpoint_id(const char *root)
{
	uint64_t *ids = NULL, max = 0;
	size_t n = 0;

	if (sfs__ck_ids(root, &ids, &n) == 0 && n)
		max = ids[0];	/* newest first */
	free(ids);
	return max;
}

static void stage_reset(const struct sup_query *q)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/stage", q->data_dir);
	if (sfs_rmtree(dir))
		sfs_log("%s", sfs_last_error());
}

/* The restore context of the backend's files on node 0 (one node: the
 * segment of node 0). */
static int files_env(const struct sup_query *q, const struct sfs_target_ops **f,
		     struct sfs_target_env *e, char *root, size_t len,
		     const struct sfs_target_cfg *cfg)
{
	int rc;

	*f = sup_backend_files(q->backend);
	if (!*f || !(*f)->instance_root)
		return 1;
	if ((rc = (*f)->instance_root(q->data_dir, 0, root, len)))
		return rc;
	*e = (struct sfs_target_env){ .seg = job_seg, .root = root, .cfg = cfg };
	return 0;
}

/* A start from the beginning: no sink output, no staged snapshots, no
 * restore left unadopted. */
static int fresh(const struct sup_query *q)
{
	struct sfs_target_cfg tc = { .store_bytes = q->store_bytes };
	const struct sfs_target_ops *f;
	struct sfs_target_env e;
	char root[PATH_MAX];
	int rc;

	snprintf(root, sizeof(root), SFS_CKPT_DIR_FMT, q->data_dir);
	ck->ck_first_barrier = max_checkpoint_id(root);
	stage_reset(q);
	if ((rc = files_env(q, &f, &e, root, sizeof(root), &tc)) < 0)
		return rc;
	for (unsigned w = 0; rc == 0 && f->forget && w < RT_MAX_WORKERS; w++)
		rc = f->forget(&e, w);
	if (rc < 0 || (rc = rt_adopt(rt_sink_reset(q->data_dir))))
		return rc;
	return 0;
}

struct put_arg {
	const struct ck_meta *m;
	const char *croot;
	uint32_t worker;
};

/* restore()'s put: worker's files of the checkpoint, flat, into @dir. */
static int put_files(void *arg, const char *dir)
{
	const struct put_arg *p = arg;

	return sfs__ck_restore_worker(p->m, p->croot, p->worker, dir);
}

/* Same parallelism: every worker's instance restored from its own files
 * (links), and adopted by its target before any child starts. */
static int adopt(const struct sup_query *q, const struct ck_meta *m, const char *croot,
		 unsigned workers)
{
	struct sfs_target_cfg tc = { .store_bytes = q->store_bytes };
	const struct sfs_target_ops *f;
	struct sfs_target_env e;
	char root[PATH_MAX];
	int rc;

	if ((rc = files_env(q, &f, &e, root, sizeof(root), &tc)))
		return rc < 0 ? rc : 0;
	if (!f->restore)
		return sfs__err(SFS_EUSAGE, "the %s backend cannot restore", f->name);
	for (uint32_t w = 0; w < workers; w++) {
		struct put_arg p = { m, croot, w };

		if ((rc = f->restore(&e, w, put_files, &p)))
			return rc;
	}
	return 0;
}

/* Another parallelism: each new worker's instance is rebuilt once from the
 * old instances whose key-group ranges overlap its own. */
static int rescale(const struct sup_query *q, const struct ck_meta *m, const char *croot,
		   unsigned workers)
{
	char tmp[PATH_MAX - 64], olds[RT_MAX_WORKERS][PATH_MAX], root[PATH_MAX], v[32];
	struct sfs_target_cfg tc = { .store_bytes = q->store_bytes };
	const char *src[RT_MAX_WORKERS];
	const struct sfs_target_ops *f;
	struct sfs_target_env e;
	uint32_t maxp = 128;
	int rc = files_env(q, &f, &e, root, sizeof(root), &tc);

	if (rc < 0)
		return rc;
	if (rc || !f->rebuild)
		return sfs__err(SFS_EUSAGE, "rescaling the %s backend is not supported yet",
				q->backend);
	if (sfs__ck_meta_config(m, "max_parallelism", v, sizeof(v)) == 0)
		maxp = (uint32_t)strtoul(v, NULL, 10);
	if (m->workers > RT_MAX_WORKERS || !m->workers)
		return sfs__err(SFS_ECORRUPT, "checkpoint of %u workers", m->workers);
	snprintf(tmp, sizeof(tmp), "%s/restore-tmp", q->data_dir);
	if ((rc = sfs_rmtree(tmp)))
		return rc;
	for (uint32_t w = 0; w < m->workers && !rc; w++) {
		snprintf(olds[w], sizeof(olds[w]), "%s/w%u", tmp, w);
		rc = sfs__ck_restore_worker(m, croot, w, olds[w]);
	}
	for (uint32_t nw = 0; nw < workers && !rc; nw++) {
		uint32_t lo = sfs_kg_range_start(nw, workers, maxp);
		uint32_t hi = sfs_kg_range_end(nw, workers, maxp);
		unsigned n = 0;

		for (uint32_t w = 0; w < m->workers; w++)
			if (sfs_kg_range_start(w, m->workers, maxp) <= hi &&
			    sfs_kg_range_end(w, m->workers, maxp) >= lo)
				src[n++] = olds[w];
		rc = f->rebuild(&e, nw, src, n, lo, hi);
		sfs_log("rescale: worker %u of %u (key groups %u..%u) rebuilt from %u of %u "
			"old instances", nw, workers, lo, hi, n, m->workers);
	}
	if (!rc)
		rc = sfs_rmtree(tmp);
	return rc;
}

/* A config value of the checkpoint must equal this job's. */
static int same(const struct ck_meta *m, const char *key, const char *mine, const char *path)
{
	char v[128];

	if (sfs__ck_meta_config(m, key, v, sizeof(v)) || strcmp(v, mine) != 0) {
		fprintf(stderr, "sfs run: checkpoint %s: %s is %s, this job's is %s\n", path, key,
			sfs__ck_meta_config(m, key, v, sizeof(v)) ? "missing" : v, mine);
		return 0;
	}
	return 1;
}

/* What the job's checkpoints record and a restore must match (but the
 * splits: the first run's parallelism, which a rescale keeps). */
static void job_config(const struct sup_query *q)
{
	if (q->exec) {
		const char *base = strrchr(q->exec[0], '/');

		snprintf(ck->ck_config, sizeof(ck->ck_config),
			 "exec=%.64s backend=%s workers=%u max_parallelism=%u",
			 base ? base + 1 : q->exec[0], job->rj_backend, job->rj_workers,
			 job->rj_max_parallelism);
		return;
	}
	snprintf(ck->ck_config, sizeof(ck->ck_config),
		 "query=%s backend=%s workers=%u max_parallelism=%u events=%" PRIu64
		 " first_event=%" PRIu64 " rate=%.6f base_time_ms=%" PRId64 " block_events=%u"
		 " splits=%u", job->rj_query, job->rj_backend, job->rj_workers,
		 job->rj_max_parallelism, job->rj_events, job->rj_first_event, job->rj_rate,
		 job->rj_base_time_ms, job->rj_block_events, job->rj_nsplits);
}

/*
 * The workers' bytes of checkpoint @m into the protocol region, for
 * sfs_task_restored(), and the source splits of the job (the first run's
 * parallelism, kept in the config).  A format-1 checkpoint kept offsets per
 * split instead: they are handed to old worker 0 in the runtime's encoding
 * (rt_source_bytes), which every worker reads after a rescale anyway.
 */
static int restore_sources(const struct sup_query *q, const struct ck_meta *m, const char *dir)
{
	char v[32];

	if (m->workers > SFS_CKPT_MAX_WORKERS) {
		fprintf(stderr, "sfs run: checkpoint %s: %u workers, at most %u\n", dir, m->workers,
			SFS_CKPT_MAX_WORKERS);
		return 2;
	}
	ck->ck_prev_workers = m->workers;
	if (m->version == 1) {
		uint32_t ids[RT_MAX_WORKERS];
		uint64_t offs[RT_MAX_WORKERS];
		int n;

		if (m->nsplits == 0 || m->nsplits > RT_MAX_WORKERS) {
			fprintf(stderr, "sfs run: checkpoint %s: %u source splits\n", dir, m->nsplits);
			return 2;
		}
		for (uint32_t i = 0; i < m->nsplits; i++) {
			ids[i] = m->splits[i].split;
			offs[i] = m->splits[i].offset;
		}
		n = rt_source_bytes((char *)ck->ck_prev[0].cp_bytes, SFS_CKPT_BYTES_MAX, ids, offs,
				    m->nsplits);
		if (n < 0) {
			fprintf(stderr, "sfs run: checkpoint %s: %s\n", dir, rt_last_error());
			return 2;
		}
		ck->ck_prev[0].cp_len = (uint32_t)n;
		job->rj_nsplits = m->nsplits;
		return 0;
	}
	for (uint32_t i = 0; i < m->nsources; i++) {
		const struct ck_source *x = &m->sources[i];

		memcpy(ck->ck_prev[x->worker].cp_bytes, x->bytes, x->len);
		ck->ck_prev[x->worker].cp_len = x->len;
	}
	if (q->exec)
		return 0;	/* the program's bytes are its own */
	if (sfs__ck_meta_config(m, "splits", v, sizeof(v)) ||
	    (job->rj_nsplits = (uint32_t)strtoul(v, NULL, 10)) == 0 ||
	    job->rj_nsplits > RT_MAX_WORKERS) {
		fprintf(stderr, "sfs run: checkpoint %s: no source splits in its config\n", dir);
		return 2;
	}
	return 0;
}

static int restore(struct sup_query *q, unsigned workers)
{
	char root[PATH_MAX - 64], dir[PATH_MAX], mine[RT_PATH_MAX * 2], want[128];
	const char *names[] = { "exec", "query", "backend", "events", "first_event", "rate",
				"base_time_ms", "block_events", "max_parallelism" };
	uint64_t t0 = sfs_now_ns();
	struct ck_meta m;
	int rc;

	snprintf(root, sizeof(root), SFS_CKPT_DIR_FMT, q->data_dir);
	memset(&m, 0, sizeof(m));
	if (q->recover_id) {
		snprintf(dir, sizeof(dir), "%s/chk-%" PRIu64, root, q->recover_id);
		rc = sfs__ck_read(dir, job_name, 1, &m);
	} else if (strcmp(q->restore, "latest") == 0) {
		rc = sfs__ck_latest(root, job_name, 1, &m, dir, sizeof(dir));
		if (rc == -ENOENT) {
			fprintf(stderr, "sfs run: --restore latest: no valid checkpoint of job %s "
				"in %s\n", job_name, root);
			return 2;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s", q->restore);
		rc = sfs__ck_read(dir, job_name, 1, &m);
	}
	if (rc) {
		fprintf(stderr, "sfs run: cannot restore: %s\n", sfs_last_error());
		sfs__ck_meta_free(&m);
		return 2;
	}
	{
		/* first: the same state ids as the checkpoint's (keys carry them) */
		char states[CK_CONFIG_MAX];

		if (sfs__ck_meta_config(&m, "states", states, sizeof(states)) == 0 &&
		    (rc = sfs__ck_coord_states_restore(job_seg, states))) {
			fprintf(stderr, "sfs run: restoring %s: %s\n", dir, sfs_last_error());
			sfs__ck_meta_free(&m);
			return 2;
		}
	}
	/* the storage root of the checkpoint: the directory holding chk-<id> */
	{
		size_t n = strlen(dir);

		while (n > 1 && dir[n - 1] == '/')
			dir[--n] = '\0';
		if (n > 10 && strcmp(dir + n - 10, "/_metadata") == 0)
			dir[n - 10] = '\0';
	}
	snprintf(mine, sizeof(mine), "%s", ck->ck_config);
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *p = strstr(mine, names[i]);
		size_t kl = strlen(names[i]);

		while (p && (p[kl] != '=' || (p != mine && p[-1] != ' ')))
			p = strstr(p + 1, names[i]);
		if (!p)
			continue;
		snprintf(want, sizeof(want), "%.*s", (int)strcspn(p + kl + 1, " "), p + kl + 1);
		if (!same(&m, names[i], want, dir)) {
			sfs__ck_meta_free(&m);
			return 2;
		}
	}
	if ((rc = restore_sources(q, &m, dir))) {
		sfs__ck_meta_free(&m);
		return rc;
	}
	{
		char croot[PATH_MAX];
		char *slash;

		snprintf(croot, sizeof(croot), "%s", dir);
		slash = strrchr(croot, '/');
		if (slash)
			*slash = '\0';
		else
			snprintf(croot, sizeof(croot), ".");
		if (m.workers == workers)
			rc = adopt(q, &m, croot, workers);
		else
			rc = rescale(q, &m, croot, workers);
		if (rc) {
			fprintf(stderr, "sfs run: restoring %s: %s\n", dir, sfs_last_error());
			sfs__ck_meta_free(&m);
			return 2;
		}
	}
	ck->ck_start = m.workers == workers ? SFS_START_RESTORED : SFS_START_RESCALED;
	ck->ck_restored_id = m.id;
	ck->ck_first_barrier = max_checkpoint_id(root);
	if (ck->ck_first_barrier < m.id)
		ck->ck_first_barrier = m.id;
	stage_reset(q);
	/* The epochs the checkpoint covers are the sink's; newer ones replay. */
	rc = rt_adopt(rt_sink_commit_upto(q->data_dir, m.sink_epoch, 1));
	sfs_log("restored %s: checkpoint %" PRIu64 " of job %s, %u workers%s%s in %.1f ms", dir,
		m.id, m.job, m.workers, m.workers != workers ? " rescaled" : " adopted",
		q->recover_id ? " (recovery)" : "", (sfs_now_ns() - t0) / 1e6);
	sfs__ck_meta_free(&m);
	return rc;
}

/* ---- rollback in place (sup.h) ------------------------------------------------------------ */

/* Stage directories of checkpoints after @id (<data>/stage/w<w>/b<N>, N >
 * @id): what a snapshot begun for an abandoned checkpoint left.  The
 * w<w> directories stay (a target creates them once and remembers). */
static void stage_drop_after(const struct sup_query *q, uint64_t id)
{
	char dir[PATH_MAX], sub[PATH_MAX + 300];

	for (uint32_t w = 0; w < job->rj_workers; w++) {
		struct dirent *e;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/stage/w%u", q->data_dir, w);
		if (!(d = opendir(dir)))
			continue;
		while ((e = readdir(d))) {
			char *end;
			unsigned long long n = e->d_name[0] == 'b' ?
				strtoull(e->d_name + 1, &end, 10) : 0;

			if (n > id) {
				snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
				if (sfs_rmtree(sub))
					sfs_log("%s", sfs_last_error());
			}
		}
		closedir(d);
	}
}

int sup_query_rollback_inproc(uint32_t w)
{
	return ck && w < ck->ck_workers && sfs_load_acquire(&ck->ck_w[w].cw_rb_inproc);
}

void sup_query_rollback_halt(void)
{
	sfs_store_release(&ck->ck_rb_halt, ck->ck_rb_req + 1);
	/* Our runtime's workers may nap on their bells (a heartbeat long):
	 * ring them, so each sees the request at once.  A program's own
	 * workers see it at their next look. */
	for (uint32_t w = 0; job && w < job->rj_workers; w++) {
		uatomic_inc(&job->rj_bell[w].bl_word);
		sfs_futex_wake(&job->rj_bell[w].bl_word, INT_MAX);
	}
}

int sup_query_rollback_halted(uint32_t w)
{
	return sfs_load_acquire(&ck->ck_w[w].cw_rb_halted) >= ck->ck_rb_halt;
}

void sup_query_rollback_go(void)
{
	sfs_store_release(&ck->ck_rb_go, (int32_t)ck->ck_rb_halt);
	sfs_futex_wake(&ck->ck_rb_go, INT_MAX);
}

void sup_query_rollback_ask(void)
{
	for (uint32_t w = 0; w < ck->ck_workers; w++)
		sfs_store_release(&ck->ck_w[w].cw_phase, SFS_CKW_STARTING);
	sfs_store_release(&ck->ck_rb_req, ck->ck_rb_req + 1);
}

int sup_query_rollback_poll(char *why, size_t n)
{
	uint64_t r = ck->ck_rb_req;

	if (sfs_load_acquire(&ck->ck_rb_ack) < r)
		return 0;
	for (uint32_t w = 0; w < ck->ck_workers; w++) {
		struct sfs_wctl *ctl;
		struct sfs_ring *ring;
		struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];

		/* A worker that never laid out its keyed state (it died
		 * first) has none to roll back, and no compactor answers for
		 * it: answered here, while no process of it exists, so the
		 * compactor that meets its next incarnation's region takes R
		 * as done instead of dropping that one's sealed buffers. */
		if (sfs_wctl_attach(job_seg, w, &ctl, &ring, bufs)) {
			ck->ck_w[w].cw_rb_rc = 0;
			sfs_store_release(&ck->ck_w[w].cw_rb_ack, r);
			continue;
		}
		if (sfs_load_acquire(&ck->ck_w[w].cw_rb_ack) < r)
			return 0;
		if (ck->ck_w[w].cw_rb_rc) {
			snprintf(why, n, "worker %u's %s target could not return to checkpoint %"
				 PRIu64 " (%s; the compactor's log says more)", w, job->rj_backend,
				 ck->ck_rb_to, sfs_strerror(ck->ck_w[w].cw_rb_rc));
			return -1;
		}
	}
	return 1;
}

uint64_t sup_query_rollback_to(void)
{
	if (!ck)
		return 0;
	return sfs_load_acquire(&ck->ck_rb_ack) < ck->ck_rb_req ? UINT64_MAX : ck->ck_rb_to;
}

int sup_query_rollback_finish(struct sup_query *q, char *why, size_t n)
{
	char root[PATH_MAX - 64], dir[PATH_MAX];
	uint64_t to = ck->ck_rb_to, first, off, size;
	struct ck_meta m;
	int rc = 0;

	snprintf(root, sizeof(root), SFS_CKPT_DIR_FMT, q->data_dir);
	memset(&m, 0, sizeof(m));
	if (to) {
		/* Its bytes and sink epoch only: not the crc32c of every file (a
		 * read of the whole state, the restart's cost), just their sizes. */
		snprintf(dir, sizeof(dir), "%s/chk-%" PRIu64, root, to);
		if ((rc = sfs__ck_read(dir, job_name, 0, &m))) {
			snprintf(why, n, "%s", sfs_last_error());
			sfs__ck_meta_free(&m);
			return -1;
		}
		/* A checkpoint of this group: the workers start restored from
		 * it.  The one the group started from: its start words stand
		 * (a rescale stays a rescale). */
		if (to != ck->ck_restored_id || ck->ck_start == SFS_START_FRESH) {
			if ((rc = restore_sources(q, &m, dir))) {
				snprintf(why, n, "checkpoint %s: its sources cannot be read", dir);
				sfs__ck_meta_free(&m);
				return -1;
			}
			ck->ck_start = SFS_START_RESTORED;
			ck->ck_restored_id = to;
		}
		rc = rt_adopt(rt_sink_rollback(q->data_dir, m.sink_epoch));
	} else {
		rc = rt_adopt(rt_sink_reset(q->data_dir));
	}
	sfs__ck_meta_free(&m);
	if (rc) {
		snprintf(why, n, "the sink: %s", sfs_last_error());
		return -1;
	}
	/* Ids are never reused: above every one requested or stored. */
	first = sfs_load_relaxed(&ck->ck_barrier_req);
	if (max_checkpoint_id(root) > first)
		first = max_checkpoint_id(root);
	if (ck->ck_done > first)
		first = ck->ck_done;
	ck->ck_first_barrier = first;
	sfs_store_release(&ck->ck_barrier_req, first);
	ck->ck_recoveries = q->recoveries;
	stage_drop_after(q, to);
	if (!q->exec && sfs_seg_region_find(job_seg, RT_CHAN_REGION, &off, &size) == 0) {
		unsigned char *chans = sfs_seg_ptr(job_seg, off);

		for (uint64_t i = 0; i < (uint64_t)RT_MAX_STAGES * job->rj_workers * job->rj_workers;
		     i++)
			rt_chan_init((struct rt_chan *)(chans + i * rt_chan_stride(job->rj_chan_bytes)),
				     job->rj_chan_bytes);
	}
	carry_workers();
	memset(job->rj_ws, 0, sizeof(job->rj_ws));
	memset(job->rj_bell, 0, sizeof(job->rj_bell));
	return 0;
}

void sup_query_recovery_restored(void)
{
	if (recs.open && !recs.v[recs.n - 1].restored_ns)
		recs.v[recs.n - 1].restored_ns = sfs_now_ns();
}

uint64_t sup_query_last_checkpoint(void)
{
	uint64_t id;

	if (!job || !ck)
		return 0;
	id = ck ? sfs_load_acquire(&ck->ck_done) : 0;
	return id || !ck ? id : ck->ck_restored_id;
}

int sup_query_setup(struct sup_query *q, struct sfs_seg *seg, unsigned workers)
{
	uint64_t off, coff, cb = sup_query_chan_bytes(workers);
	unsigned char *chans;
	int rc;

	rc = sfs_seg_region_create(seg, RT_JOB_REGION, sizeof(struct rt_job), SFS_ROLE_SUPERVISOR,
				   &off);
	if (rc)
		return rc;
	job = sfs_seg_ptr(seg, off);
	job_seg = seg;
	job_name = seg->hdr->sh_job;
	memset(job, 0, sizeof(*job));
	job->rj_magic = RT_JOB_MAGIC;
	job->rj_version = RT_JOB_VERSION;
	job->rj_workers = workers;
	job->rj_max_parallelism = 128;
	job->rj_block_events = q->block_events;
	job->rj_events = q->events;
	job->rj_rate = q->rate;
	job->rj_max_rate = q->max_rate;
	job->rj_base_time_ms = 1436918400000ll;
	job->rj_chan_bytes = cb;
	job->rj_sink = q->output != NULL;
	snprintf(job->rj_query, sizeof(job->rj_query), "%s", q->query ? q->query : "");
	snprintf(job->rj_backend, sizeof(job->rj_backend), "%s", q->backend);
	snprintf(job->rj_data_dir, sizeof(job->rj_data_dir), "%s", q->data_dir);
	job->rj_nsplits = workers;
	job->rj_cache_bytes = q->cache_bytes;
	job->rj_buffer_bytes = q->buffer_bytes;
	job->rj_state_ttl_ms = q->state_ttl_ms;
	job->rj_rdb_memory_bytes = q->rdb_memory_bytes;
	if ((rc = sfs_ckpt_create(seg, workers, &ck)))
		return rc;
	ck->ck_max_parallelism = job->rj_max_parallelism;
	ck->ck_interval_ms = q->host ? SFS_CKPT_ENGINE : q->checkpoint_ns / MS;
	ck->ck_retain = q->retain;
	ck->ck_recoveries = q->recoveries;
	snprintf(ck->ck_data_dir, sizeof(ck->ck_data_dir), "%s", q->data_dir);
	job_config(q);
	rc = q->restore || q->recover_id ? restore(q, workers) : fresh(q);
	if (rc)
		return rc;
	job_config(q);	/* a restore's splits are the checkpoint's */
	ck->ck_barrier_req = ck->ck_first_barrier;
	t_start = sfs_now_ns();
	if (recs.open && !recs.v[recs.n - 1].restored_ns)
		recs.v[recs.n - 1].restored_ns = t_start;
	progress_tty = !q->json && isatty(STDERR_FILENO);
	carried.done = 0;
	if (q->exec)
		return 0;	/* the program's workers exchange nothing through us */
	rc = sfs_seg_region_create(seg, RT_CHAN_REGION, rt_chans_bytes(workers, cb),
				   SFS_ROLE_SUPERVISOR, &coff);
	if (rc)
		return rc;
	chans = sfs_seg_ptr(seg, coff);
	for (uint64_t i = 0; i < (uint64_t)RT_MAX_STAGES * workers * workers; i++)
		rt_chan_init((struct rt_chan *)(chans + i * rt_chan_stride(cb)), cb);
	progress_tty = !q->json && isatty(STDERR_FILENO);
	carried.done = 0;
	return 0;
}

void sup_query_recovery(uint64_t detect_ns, uint64_t stopped_ns, const char *kind)
{
	struct recovery *r;

	sup_query_recovery_close();	/* not closed yet: an earlier one in place */
	if (recs.n == recs.cap) {
		size_t cap = recs.cap ? recs.cap * 2 : 16;

		r = realloc(recs.v, cap * sizeof(*r));
		if (!r) {
			sfs_log("recovery times: out of memory, this one is left out");
			return;
		}
		recs.v = r;
		recs.cap = cap;
	}
	r = &recs.v[recs.n++];
	memset(r, 0, sizeof(*r));
	r->detect_ns = detect_ns;
	r->stopped_ns = stopped_ns;
	r->kind = kind;
	recs.open = 1;
}

/* The open recovery's end: the latest first record of the incarnation's
 * workers (every worker that processed one: the job runs again once each
 * of them does), read before the segment goes (or a rollback resets it). */
void sup_query_recovery_close(void)
{
	struct recovery *r;
	char line[512];
	size_t len = 0;

	if (!recs.open || !job)
		return;
	recs.open = 0;
	r = &recs.v[recs.n - 1];
	line[0] = 0;
	for (uint32_t w = 0; w < job->rj_workers; w++) {
		uint64_t t = sfs_load_relaxed(&job->rj_ws[w].rw_first_record_ns);

		if (t > r->first_ns)
			r->first_ns = t;
		if (t >= r->detect_ns && len < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len, "%sworker %u %.1f ms",
						len ? ", " : "", w, (t - r->detect_ns) / 1e6);
	}
	if (r->first_ns && r->first_ns < r->detect_ns)
		r->first_ns = 0;	/* cannot be: not this incarnation's */
	/* Which worker the job waited for (the one restarted, or one kept). */
	if (line[0])
		sfs_log("recovery %zu (%s): first records after the death: %s", recs.n, r->kind,
			line);
}

static void ms_or_null(const char *sep, uint64_t from, uint64_t to)
{
	if (from && to >= from)
		printf("%s%.3f", sep, (double)(to - from) / 1e6);
	else
		printf("%snull", sep);
}

/* The summary's recovery lists, one entry per recovery (see README). */
static void recovery_json(void)
{
	static const char *const names[] = { "recovery_ms", "recovery_stop_ms",
					     "recovery_restore_ms", "recovery_first_record_ms" };

	sup_query_recovery_close();
	printf(", \"recovery_kind\": [");
	for (size_t i = 0; i < recs.n; i++)
		printf("%s\"%s\"", i ? ", " : "", recs.v[i].kind);
	printf("]");
	for (unsigned f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
		printf(", \"%s\": [", names[f]);
		for (size_t i = 0; i < recs.n; i++) {
			const struct recovery *r = &recs.v[i];
			const char *sep = i ? ", " : "";

			switch (f) {
			case 0: ms_or_null(sep, r->first_ns ? r->detect_ns : 0, r->first_ns); break;
			case 1: ms_or_null(sep, r->detect_ns, r->stopped_ns); break;
			case 2: ms_or_null(sep, r->restored_ns ? r->stopped_ns : 0, r->restored_ns); break;
			case 3: ms_or_null(sep, r->first_ns ? r->restored_ns : 0, r->first_ns); break;
			}
		}
		printf("]");
	}
}

/* Fold the workers' status counters (rj_ws) into carried: before they are
 * cleared or destroyed.  The events are not folded: a restored worker
 * reports the events before its checkpoint (rw_events_before), so the
 * last incarnation's status holds the run's. */
static void carry_workers(void)
{
	uint64_t bar = 0;

	for (unsigned w = 0; w < job->rj_workers; w++) {
		const struct rt_worker_status *s = &job->rj_ws[w];

		if (!w || s->rw_barriers < bar)
			bar = s->rw_barriers;
		carried.stall_ns += s->rw_stall_ns;
		carried.seal_ns += s->rw_seal_ns;
		carried.seal_cpu_ns += s->rw_seal_cpu_ns;
		if (s->rw_seal_max_ns > carried.seal_max_ns)
			carried.seal_max_ns = s->rw_seal_max_ns;
		if (s->rw_start_ns && (!carried.first_ns || s->rw_start_ns < carried.first_ns))
			carried.first_ns = s->rw_start_ns;
	}
	carried.barriers += bar;
}

unsigned sup_query_held(uint32_t w)
{
	struct sfs_wctl *ctl;
	struct sfs_ring *ring;
	struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
	uint64_t h;

	if (!job || w >= job->rj_workers)
		return RT_HELD_NONE;
	h = sfs_load_relaxed(&job->rj_ws[w].rw_held);
	if (h && sfs_now_ns() / 1000000 <= (h >> 8) + RT_HELD_FRESH_MS)
		return (unsigned)(h & 0xff);
	if (sfs_wctl_attach(job_seg, w, &ctl, &ring, bufs) == 0 &&
	    sfs_load_relaxed(&ctl->wc_waiting))
		return RT_HELD_BUFFERS;
	return RT_HELD_NONE;
}

int sup_query_worker_unfinished(uint32_t w, char *why, size_t n)
{
	struct sfs_wctl *ctl;
	struct sfs_ring *ring;
	struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
	uint64_t buffered, seals;
	uint32_t phase;

	if (!ck || !job_seg || w >= ck->ck_workers)
		return 0;
	phase = sfs_load_acquire(&ck->ck_w[w].cw_phase);
	if (phase == SFS_CKW_FINISHED || phase == SFS_CKW_ENDED)
		return 0;
	if (sfs_wctl_attach(job_seg, w, &ctl, &ring, bufs))
		return 0;	/* no state opened: nothing to lose */
	buffered = sfs_load_relaxed(&bufs[sfs_load_acquire(&ctl->wc_active)]->wb_appends);
	seals = sfs_load_relaxed(&ctl->wc_seq);
	if (!buffered && !seals)
		return 0;
	snprintf(why, n, "%llu entries in its write buffer, %llu buffers sealed, last checkpoint "
		 "sealed %llu", (unsigned long long)buffered, (unsigned long long)seals,
		 (unsigned long long)sfs_load_relaxed(&ck->ck_w[w].cw_sealed));
	return 1;
}

void sup_query_carry(struct sfs_seg *segs, int nsegs)
{
	uint64_t n;

	if (!job || carried.done)
		return;
	carried.done = 1;
	sup_query_recovery_close();
	carry_workers();
	carried.ck_count += ck->ck_count;
	carried.ck_links += ck->ck_links;
	carried.ck_refs += ck->ck_refs;
	for (uint32_t w = 0; w < job->rj_workers; w++) {
		/* the worker's region is in its node's segment (none for
		 * rocksdb-direct, whose workers write no buffers) */
		for (int s = 0; s < nsegs; s++) {
			struct sfs_wctl *ctl;
			struct sfs_ring *ring;
			struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];

			if (segs[s].hdr && sfs_wctl_attach(&segs[s], w, &ctl, &ring, bufs) == 0) {
				/* sealed, less what is still waiting for its flush
				 * (a run ends without flushing its last buffers): the
				 * bytes the compactor flushed */
				carried.sealed_bytes += sfs_load_relaxed(&ctl->wc_sealed_bytes);
				carried.ttl_dropped += sfs_load_relaxed(&ctl->wc_ttl_dropped);
				for (uint32_t i = 0; i < ctl->wc_nbufs; i++)
					if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) == SFS_BUF_SEALED)
						carried.sealed_bytes -= bufs[i]->wb_top - bufs[i]->wb_arena_off;
				break;
			}
		}
	}
	if (ck->ck_max_ns > carried.ckpt_max_ns)
		carried.ckpt_max_ns = ck->ck_max_ns;
	n = ck->ck_count < SFS_CKPT_DURATIONS ? ck->ck_count : SFS_CKPT_DURATIONS;
	if (carried.nckpt + n > carried.cap) {
		size_t cap = carried.cap ? carried.cap : 256;
		uint32_t *p;

		while (cap < carried.nckpt + n)
			cap *= 2;
		p = realloc(carried.ckpt_us, cap * sizeof(*p));
		if (!p) {
			sfs_log("checkpoint durations: out of memory, the median leaves out %llu",
				(unsigned long long)n);
			return;
		}
		carried.ckpt_us = p;
		carried.cap = cap;
	}
	for (uint64_t i = ck->ck_count - n; i < ck->ck_count; i++)
		carried.ckpt_us[carried.nckpt++] = ck->ck_us[i % SFS_CKPT_DURATIONS];
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The summary's resource fields: CPU, disk writes and peak RSS of each
 * role, write amplification, shared memory, checkpoint median and max. */
static void usage_json(const struct sup_usage *u)
{
	static const struct { const char *name; unsigned role; } roles[] = {
		{ "worker", SFS_ROLE_WORKER }, { "compactor", SFS_ROLE_COMPACTOR },
		{ "checkpointer", SFS_ROLE_CHECKPOINTER }, { "supervisor", SFS_ROLE_SUPERVISOR },
	};
	struct sup_role_usage r[SFS_ROLE_MAX];
	const unsigned nroles = sizeof(roles) / sizeof(roles[0]);
	struct rusage self;
	uint64_t maint;

	memcpy(r, u->role, sizeof(r));
	/* the supervisor itself, to here: its own loop, restore and the
	 * --output replay */
	if (getrusage(RUSAGE_SELF, &self) == 0) {
		struct sup_role_usage *s = &r[SFS_ROLE_SUPERVISOR];

		s->cpu_ns += (uint64_t)self.ru_utime.tv_sec * 1000000000ull +
			     (uint64_t)self.ru_utime.tv_usec * 1000ull +
			     (uint64_t)self.ru_stime.tv_sec * 1000000000ull +
			     (uint64_t)self.ru_stime.tv_usec * 1000ull;
		s->write_bytes += (uint64_t)self.ru_oublock * 512;
		s->max_rss_kb = (uint64_t)self.ru_maxrss;
		s->processes = 1;
	}
	printf(", \"cpu_ms_by_role\": {");
	for (unsigned i = 0; i < nroles; i++)
		printf("%s\"%s\": %.1f", i ? ", " : "", roles[i].name,
		       r[roles[i].role].cpu_ns / 1e6);
	printf("}, \"disk_write_bytes_by_role\": {");
	for (unsigned i = 0; i < nroles; i++)
		printf("%s\"%s\": %llu", i ? ", " : "", roles[i].name,
		       (unsigned long long)r[roles[i].role].write_bytes);
	printf("}, \"peak_rss_kb_by_role\": {");
	for (unsigned i = 0; i < nroles; i++)
		printf("%s\"%s\": %llu", i ? ", " : "", roles[i].name,
		       (unsigned long long)r[roles[i].role].max_rss_kb);
	printf("}, \"processes_by_role\": {");
	for (unsigned i = 0; i < nroles; i++)
		printf("%s\"%s\": %u", i ? ", " : "", roles[i].name, r[roles[i].role].processes);
	/* Write amplification: what maintenance wrote to disk (flushes,
	 * merges, checkpoint staging and copies) per byte of the buffers it
	 * flushed; undefined without buffers (rocksdb-direct). */
	maint = r[SFS_ROLE_COMPACTOR].write_bytes + r[SFS_ROLE_CHECKPOINTER].write_bytes;
	printf("}, \"buffer_bytes\": %llu, \"write_amp\": ",
	       (unsigned long long)carried.sealed_bytes);
	if (carried.sealed_bytes)
		printf("%.3f", (double)maint / (double)carried.sealed_bytes);
	else
		printf("null");
	printf(", \"ttl_dropped_at_flush\": %llu", (unsigned long long)carried.ttl_dropped);
	printf(", \"shm_bytes\": %llu, \"shm_reserved_bytes\": %llu",
	       (unsigned long long)u->shm_bytes, (unsigned long long)u->shm_reserved);
	if (carried.nckpt) {
		size_t n = carried.nckpt;
		double med;

		qsort(carried.ckpt_us, n, sizeof(*carried.ckpt_us), cmp_u32);
		med = n % 2 ? carried.ckpt_us[n / 2] :
			      ((double)carried.ckpt_us[n / 2 - 1] + carried.ckpt_us[n / 2]) / 2;
		printf(", \"checkpoint_median_ms\": %.3f, \"checkpoint_max_ms\": %.3f",
		       med / 1e3, carried.ckpt_max_ns / 1e6);
	} else {
		printf(", \"checkpoint_median_ms\": null, \"checkpoint_max_ms\": null");
	}
}

static void totals(uint64_t *events, uint64_t *barriers, uint64_t *stall_ns)
{
	*events = *barriers = *stall_ns = 0;
	for (unsigned w = 0; w < job->rj_workers; w++) {
		*events += sfs_load_relaxed(&job->rj_ws[w].rw_events_before) +
			   sfs_load_relaxed(&job->rj_ws[w].rw_events);
		*stall_ns += sfs_load_relaxed(&job->rj_ws[w].rw_stall_ns);
		if (!w || sfs_load_relaxed(&job->rj_ws[w].rw_barriers) < *barriers)
			*barriers = sfs_load_relaxed(&job->rj_ws[w].rw_barriers);
	}
}

/* Sealed buffers not yet flushed, over every worker of node 0's segment
 * (the flush backlog of the progress line; 0 for a backend without them). */
static uint64_t flush_backlog(void)
{
	uint64_t n = 0;

	for (uint32_t w = 0; w < job->rj_workers; w++) {
		struct sfs_wctl *ctl;
		struct sfs_ring *ring;
		struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];

		if (sfs_wctl_attach(job_seg, w, &ctl, &ring, bufs) == 0)
			n += sfs_load_relaxed(&ctl->wc_seq) - sfs_load_relaxed(&ctl->wc_flushed_seq);
	}
	return n;
}

int sup_query_tick(struct sup_query *q, uint64_t now)
{
	unsigned done = 0;

	for (unsigned w = 0; w < job->rj_workers; w++) {
		uint32_t st = sfs_load_acquire(&job->rj_ws[w].rw_state);

		if (st == RT_W_FAILED) {
			sfs_log("worker %u failed: %s", w, job->rj_ws[w].rw_error);
			return -1;
		}
		done += st == RT_W_DONE;
	}
	if (progress_tty && now >= next_progress) {
		uint64_t ev, bar, stall;
		double s = (double)(now - t_start) / 1e9;

		totals(&ev, &bar, &stall);
		fprintf(stderr, "\r%s: %llu/%llu events, %.0f events/s, %llu checkpoints, "
			"flush backlog %llu buffers  ", q->query, (unsigned long long)ev,
			(unsigned long long)q->events, s > 0 ? ev / s : 0.0, (unsigned long long)bar,
			(unsigned long long)flush_backlog());
		next_progress = now + 500 * MS;
	}
	return done == job->rj_workers ? 1 : 0;
}

/* An --exec job's summary: what sfs knows of it (the program's own
 * results are its own). */
static int exec_finish(const struct sup_query *q, int ok, const struct sup_usage *u)
{
	double secs = (double)(sfs_now_ns() - t_start) / 1e9;

	if (q->json) {
		printf("{\"exec\": \"%s\", \"backend\": \"%s\", \"workers\": %u, "
		       "\"seconds\": %.3f, \"checkpoint_last_ms\": %.3f", q->exec[0], q->backend,
		       job->rj_workers, secs, ck->ck_last_ns / 1e6);
		usage_json(u);
		printf(", \"checkpoints_completed\": %llu, \"recoveries\": %u",
		       (unsigned long long)ck->ck_count, q->recoveries);
		recovery_json();
		printf(", \"ok\": %s}\n", ok ? "true" : "false");
	} else {
		printf("sfs: %s on %s, %u workers: %s in %.3f s, %llu checkpoints, %u recoveries\n",
		       q->exec[0], q->backend, job->rj_workers, ok ? "done" : "stopped", secs,
		       (unsigned long long)ck->ck_count, q->recoveries);
	}
	fflush(stdout);
	return ok ? 0 : 1;
}

/* The summary without a carry before it (a caller that never recovered
 * and never called sup_query_carry): fold this incarnation now. */
static void carry_workers_once(void)
{
	if (carried.done)
		return;
	carried.done = 1;
	carry_workers();
	carried.ck_count += ck->ck_count;
	carried.ck_links += ck->ck_links;
	carried.ck_refs += ck->ck_refs;
}

/* rocksdb-direct's configuration, as Flink's RocksDB backend would have
 * it for one slot (baseline/rocksdb_direct.c says where each comes from). */
static void rdb_config_json(const struct sup_query *q)
{
	struct rt_rdb_memory m;

	rt_rocksdb_direct_memory(q->rdb_memory_bytes, &m);
	printf(", \"rocksdb_direct\": {\"managed_memory_bytes\": %llu, \"block_cache_bytes\": %llu, "
	       "\"write_buffer_manager_bytes\": %llu, \"write_buffer_ratio\": %.2f, "
	       "\"high_prio_pool_ratio\": %.2f, \"write_buffer_bytes\": %llu, "
	       "\"max_write_buffers\": 2, \"compaction\": \"level\", \"compression\": \"snappy\", "
	       "\"bloom_filter\": false, \"block_bytes\": 4096, \"background_jobs\": 2, "
	       "\"instances\": \"one per worker, a column family per state\", "
	       "\"checkpoint\": \"incremental: flush + native checkpoint on the worker (sync), "
	       "files linked by the checkpointer (async)\"}",
	       (unsigned long long)m.managed, (unsigned long long)m.cache,
	       (unsigned long long)m.write_buffers, m.write_buffer_ratio, m.high_prio_ratio,
	       (unsigned long long)m.write_buffer);
}

int sup_query_finish(struct sup_query *q, int ok, const struct sup_usage *u)
{
	const struct rt_query *rq = q->query ? rt_query_find(q->query) : NULL;
	const struct sfs_target_ops *tgt = sup_backend_target(q->backend);
	uint64_t ev = 0, rows = 0, first, last = 0, cpu;
	double secs;
	int rc = 0;

	if (progress_tty)
		fprintf(stderr, "\n");
	if (!job)
		return 1;
	if (q->exec)
		return exec_finish(q, ok, u);
	/* The whole run, across recoveries: sup_query_carry folded every
	 * incarnation's counters, this last one's included, into carried; the
	 * events are where the sources stand — each worker's events before its
	 * restored checkpoint plus the ones since — and the time runs from the
	 * first incarnation's start, recoveries' downtime included. */
	carry_workers_once();
	for (unsigned w = 0; w < job->rj_workers; w++) {
		struct rt_worker_status *s = &job->rj_ws[w];

		ev += s->rw_events_before + s->rw_events;
		if (s->rw_end_ns > last)
			last = s->rw_end_ns;
	}
	first = carried.first_ns ? carried.first_ns : t_start;
	secs = ok && last > first ? (double)(last - first) / 1e9 : (double)(sfs_now_ns() - first) / 1e9;
	if (ok && q->output) {
		/* every worker is done: its final epochs are the job's last commit */
		rc = rt_sink_commit_upto(q->data_dir, UINT64_MAX, 0);
		if (rc == 0)
			rc = rt_sink_replay(q->data_dir, rq->columns, q->output, &rows);
		if (rc) {
			sfs_log("writing %s: %s", q->output, rt_last_error());
			ok = 0;
		}
	}
	/* CPU of every process serving the job but the supervisor: workers,
	 * compactors, checkpointers (FLINK.md, "Comparing fairly"). */
	cpu = u->role[SFS_ROLE_WORKER].cpu_ns + u->role[SFS_ROLE_COMPACTOR].cpu_ns +
	      u->role[SFS_ROLE_CHECKPOINTER].cpu_ns;
	if (q->json) {
		printf("{\"query\": \"%s\", \"backend\": \"%s\", \"workers\": %u, \"events\": %llu, "
		       "\"seconds\": %.3f, \"events_per_sec\": %.0f, \"events_per_cpu_s\": %.0f, "
		       "\"events_per_sec_per_worker\": [",
		       q->query, q->backend, job->rj_workers, (unsigned long long)ev, secs,
		       secs > 0 ? ev / secs : 0.0, cpu ? ev / (cpu / 1e9) : 0.0);
		for (unsigned w = 0; w < job->rj_workers; w++) {
			struct rt_worker_status *s = &job->rj_ws[w];

			printf("%s%.0f", w ? ", " : "",
			       secs > 0 ? (s->rw_events_before + s->rw_events) / secs : 0.0);
		}
		printf("], \"barrier_ms\": %.3f, \"barrier_cpu_ms\": %.3f, \"barrier_max_ms\": %.3f, "
		       "\"checkpoint_last_ms\": %.3f, \"checkpoint_files_linked\": %llu, "
		       "\"checkpoint_files_referenced\": %llu",
		       carried.seal_ns / 1e6, carried.seal_cpu_ns / 1e6, carried.seal_max_ns / 1e6,
		       ck->ck_last_ns / 1e6, (unsigned long long)carried.ck_links,
		       (unsigned long long)carried.ck_refs);
		if (tgt && tgt->summary_json)
			tgt->summary_json(job_seg, job->rj_workers, stdout);
		if (strcmp(q->backend, "rocksdb-direct") == 0)
			rdb_config_json(q);
		usage_json(u);
		printf(", \"checkpoints\": %llu, \"checkpoints_completed\": %llu, "
		       "\"recoveries\": %u", (unsigned long long)carried.barriers,
		       (unsigned long long)carried.ck_count, q->recoveries);
		recovery_json();
		printf(", \"hang_kills\": %u, \"backend_held\": {\"episodes\": %u, \"ms\": %.0f, "
		       "\"why\": ", u->hang_kills, u->held_episodes, u->held_ns / 1e6);
		if (u->held_why)
			printf("\"%s\"}", u->held_why);
		else
			printf("null}");
		printf(", \"stall_ms\": %.3f, \"result_rows\": %llu, \"ok\": %s}\n",
		       carried.stall_ns / 1e6, (unsigned long long)rows, ok ? "true" : "false");
	} else {
		printf("sfs: %s on %s, %u workers: %llu events in %.3f s = %.0f events/s "
		       "(%.0f per worker, %.0f per CPU-second), %llu checkpoints, stall %.3f ms%s%s\n",
		       q->query, q->backend, job->rj_workers, (unsigned long long)ev, secs,
		       secs > 0 ? ev / secs : 0.0,
		       secs > 0 ? ev / secs / job->rj_workers : 0.0, cpu ? ev / (cpu / 1e9) : 0.0,
		       (unsigned long long)carried.barriers, carried.stall_ns / 1e6,
		       q->output && ok ? ", result in " : "", q->output && ok ? q->output : "");
	}
	fflush(stdout);
	return ok ? 0 : 1;
}
