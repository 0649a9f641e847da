/*
 * clicks.c — an example stream processor on sfs: sessionized click counts,
 * exactly once, through the public API only (<sfs.h>, built with
 * `pkg-config --cflags --libs sfs`).  Run it as the workers of a group:
 *
 *   sfs run --job clicks --workers 2 --backend table --checkpoint-interval 100 \
 *       --data /tmp/clicks --exec ./clicks 200000
 *
 * The input: a generated stream of EVENTS clicks (user, page, time; event e
 * at e ms), the same for every worker, as a topic every consumer reads; a
 * worker takes the clicks of the users whose key group it owns (Flink's
 * keyBy).  Its position is the number of events it has read.
 *
 * The state of a user (keyed by an 8-byte big-endian user id):
 *   "session"  value:   start and last click time of the open session
 *   "clicks"   counter: every click of the user, ever
 *   "pages"    map:     page -> clicks in the open session
 * A click more than GAP_MS after the user's last one closes the session:
 * the worker emits "user,start_ms,end_ms,clicks,distinct_pages,total".
 *
 * Exactly once, with the library's recipe (<sfs_output.h>): the lines of
 * the records between checkpoints N-1 and N are epoch N of an
 * epoch-committed output, staged at the seal of N and committed once N is
 * complete; an open after a restart or a rollback commits what the
 * checkpoint covers and drops the rest.  The bytes kept with a checkpoint
 * are the worker's position, saved per key group (sfs_positions_seal).
 * After a restore, each user's clicks resume where the worker that owned
 * the user's key group at the checkpoint had read, whatever the number of
 * workers now (a rescale moves key groups): the worker reads from the
 * slowest of its key groups' positions and seals no checkpoint before it
 * has passed the fastest (its position would understate what the state
 * holds).
 * At the end of its input a worker seals one more checkpoint, waits for
 * it, commits and finishes (sessions still open stay open, as a streaming
 * job's would).  The result: every committed line, in any order.
 * When another worker dies, this one rolls back in its process (the group
 * returns to its last checkpoint: sfs_worker_rollback) and starts over from
 * that checkpoint, as a restarted worker would; the dead one is restarted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sfs.h>
#include <sfs_output.h>

#define USERS 5000u
#define PAGES 40u
#define GAP_MS 10000
#define BATCH 256u        /* events between polls of the checkpoint words */

struct session {
	int64_t start, last;
};

struct worker {
	sfs_ctx_t *ctx;
	sfs_task_t *task;
	struct sfs_task_info info;
	uint32_t s_session, s_clicks, s_pages;
	sfs_output_t *out;       /* the session lines, epoch-committed */
	uint64_t events;         /* of the whole stream */
	uint64_t next;           /* next event to read: the position */
	uint32_t kg_first, kg_last; /* the key groups it owns (a contiguous range) */
	uint64_t *from;          /* after a restore: per key group, its position */
	uint64_t caught_up;      /* after a restore: seal nothing before reading here */
	uint64_t injected;       /* last checkpoint sealed */
};

static int die(const char *what, int rc)
{
	fprintf(stderr, "clicks: %s: %s (%s)\n", what, sfs_strerror(rc), sfs_last_error());
	exit(rc == SFS_EUSAGE ? 2 : 1);
}

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void key_of(uint64_t user, uint8_t k[8])
{
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(user >> (56 - 8 * i));
}

static void emit(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(struct worker *w, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if ((rc = sfs_output_write(w->out, line, (size_t)n)))
		die("output", rc);
}

static int count_page(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	(void)ukey, (void)ulen, (void)val, (void)vlen;
	(*(unsigned *)arg)++;
	return 0;
}

/* One click: close the user's session if the gap has passed, count. */
static void click(struct worker *w, uint64_t user, uint32_t page, int64_t t)
{
	uint8_t k[8], pk[4] = { (uint8_t)(page >> 24), (uint8_t)(page >> 16), (uint8_t)(page >> 8),
				(uint8_t)page };
	struct session s = { t, t };
	struct sfs_view v;
	int64_t total, n = 0;
	int rc;

	key_of(user, k);
	if ((rc = sfs_value_get(w->ctx, w->s_session, 0, k, 8, &v)) < 0)
		die("get session", rc);
	if (rc == 1) {
		memcpy(&s, v.data, sizeof(s));
		if (t - s.last > GAP_MS) {
			unsigned pages = 0;
			int64_t in_session = 0;

			/* the session's clicks: the pages' counts */
			if ((rc = sfs_map_iter(w->ctx, w->s_pages, 0, k, 8, count_page, &pages)))
				die("pages", rc);
			if ((rc = sfs_counter_get(w->ctx, w->s_clicks, 1, k, 8, &in_session)) < 0 ||
			    (rc = sfs_counter_get(w->ctx, w->s_clicks, 0, k, 8, &total)) < 0)
				die("clicks", rc);
			emit(w, "%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%u,%" PRId64 "\n",
			     user, s.start, s.last, in_session, pages, total);
			if ((rc = sfs_map_clear(w->ctx, w->s_pages, 0, k, 8)) ||
			    (rc = sfs_counter_add(w->ctx, w->s_clicks, 1, k, 8, -in_session)))
				die("close session", rc);
			s.start = t;
		}
		s.last = t;
	}
	if ((rc = sfs_value_put(w->ctx, w->s_session, 0, k, 8, &s, sizeof(s))))
		die("put session", rc);
	/* namespace 0: every click of the user; 1: the open session's */
	if ((rc = sfs_counter_add(w->ctx, w->s_clicks, 0, k, 8, 1)) ||
	    (rc = sfs_counter_add(w->ctx, w->s_clicks, 1, k, 8, 1)))
		die("count", rc);
	if ((rc = sfs_map_get(w->ctx, w->s_pages, 0, k, 8, pk, 4, &v)) < 0)
		die("page", rc);
	if (rc == 1)
		memcpy(&n, v.data, sizeof(n));
	n++;
	if ((rc = sfs_map_put(w->ctx, w->s_pages, 0, k, 8, pk, 4, &n, sizeof(n))))
		die("page", rc);
}

/* The old worker that owned key group @kg under @par workers (Flink's
 * operator index for a key group). */
static uint32_t owner(uint32_t kg, uint32_t par, uint32_t maxp)
{
	return (uint32_t)((uint64_t)kg * par / maxp);
}

/* Event e of the stream, if it is ours and not read before the restore. */
static void event(struct worker *w, uint64_t e)
{
	uint64_t h = mix(e), user = h % USERS;
	uint8_t k[8];
	uint32_t kg;

	key_of(user, k);
	kg = sfs_key_group_of(w->ctx, k, 8);
	if (owner(kg, w->info.workers, w->info.max_parallelism) != w->info.worker)
		return;
	if (w->from && e < w->from[kg - w->kg_first])
		return;	/* in the checkpoint's state already */
	click(w, user, (uint32_t)(h >> 32) % PAGES, (int64_t)e);
}

/* Checkpoint @id requested: seal the state, pre-commit the epoch's
 * lines, publish with the position of every key group it owns. */
static void seal(struct worker *w, uint64_t id)
{
	struct sfs_split_range pos = { w->kg_first, w->kg_last, w->next };
	int rc;

	if ((rc = sfs_barrier(w->ctx, id)))
		die("barrier", rc);
	if ((rc = sfs_output_stage(w->out, id)))
		die("stage", rc);
	if ((rc = sfs_positions_seal(w->task, id, &pos, 1, NULL, 0)))
		die("seal", rc);
	w->injected = id;
}

static void poll_checkpoints(struct worker *w)
{
	int rc;

	if (sfs_task_requested(w->task) > w->injected)
		seal(w, sfs_task_requested(w->task));
	if ((rc = sfs_output_commit(w->out, NULL)))	/* one load when nothing is due */
		die("commit", rc);
}

static void start(struct worker *w)
{
	uint32_t maxp;
	int rc;

	sfs_task_info(w->task, &w->info);
	maxp = w->info.max_parallelism;
	w->injected = w->info.base_id;
	w->kg_first = UINT32_MAX;
	for (uint32_t kg = 0; kg < maxp; kg++)
		if (owner(kg, w->info.workers, maxp) == w->info.worker) {
			if (w->kg_first == UINT32_MAX)
				w->kg_first = kg;
			w->kg_last = kg;
		}
	free(w->from);
	w->from = NULL;
	if (w->info.start == SFS_START_FRESH)
		return;
	/* Where each of its key groups resumes: the position of the old
	 * worker that owned it, whatever the old parallelism. */
	if (!(w->from = calloc(w->kg_last - w->kg_first + 1, sizeof(*w->from))))
		die("restore", -ENOMEM);
	for (uint32_t kg = w->kg_first; kg <= w->kg_last; kg++)
		if ((rc = sfs_positions_find(w->task, kg, &w->from[kg - w->kg_first])))
			die("restored positions", rc);
	if ((rc = sfs_positions_span(w->task, w->kg_first, w->kg_last, &w->next, &w->caught_up)))
		die("restored positions", rc);
}

/* The stream from the task's start to its end (0), or until the group
 * rolls back because another worker died (1: start over). */
static int run_stream(struct worker *w, uint64_t rate)
{
	int rc;
	uint64_t before;
	struct timespec t0;

	start(w);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (w->next < w->events) {
		uint64_t end = w->next + BATCH < w->events ? w->next + BATCH : w->events;

		if (sfs_task_rollback_requested(w->task))
			return 1;
		for (; w->next < end; w->next++)
			event(w, w->next);
		sfs_ctx_quiescent(w->ctx);
		/* The position kept with a checkpoint says "every event before
		 * it is in the state" for all this worker's keys: not true while
		 * it reads from the slowest old worker's position up to the
		 * fastest's (the others' keys are in the state further on). */
		if (w->next >= w->caught_up)
			poll_checkpoints(w);
		if (rate) {	/* a throttle, so a test can kill it mid-stream */
			struct timespec now;
			double due;

			clock_gettime(CLOCK_MONOTONIC, &now);
			due = (double)w->next / (double)rate - (double)(now.tv_sec - t0.tv_sec) -
			      (now.tv_nsec - t0.tv_nsec) / 1e9;
			if (due > 0)
				usleep((useconds_t)(due * 1e6));
		}
	}
	/* The end: one more checkpoint for the last records (the next one
	 * requested), its completion, then the commit of everything. */
	before = w->injected;
	sfs_ctx_offline(w->ctx);
	while (w->injected == before) {
		usleep(1000);
		if (sfs_task_rollback_requested(w->task))
			return 1;
		sfs_ctx_online(w->ctx);
		poll_checkpoints(w);
		sfs_ctx_offline(w->ctx);
	}
	while (sfs_task_completed(w->task) < w->injected) {
		sfs_task_wait_completed(w->task, w->injected, 10 * 1000000ull);
		if (sfs_task_rollback_requested(w->task))
			return 1;
		sfs_ctx_online(w->ctx);
		poll_checkpoints(w);	/* a newer one: sealed too */
		sfs_ctx_offline(w->ctx);
	}
	if ((rc = sfs_output_commit(w->out, NULL)))
		die("commit", rc);
	return 0;
}

/* Another worker died: the group returns to its last checkpoint and this
 * process with it (include/sfs.h, "Rollback in place") — what it holds
 * since then goes (its read position, the lines of the open epoch; the
 * keyed state's part is sfs_worker_rollback's), then it waits for the
 * group and starts over from the checkpoint, as a restarted worker would. */
static void rollback(struct worker *w)
{
	int rc;

	w->next = 0;
	w->caught_up = 0;
	while ((rc = sfs_worker_rollback(w->ctx, w->task, 100 * 1000000ull)) == SFS_ETIMEDOUT)
		;
	if (rc)
		die("rollback", rc);
	/* the open epoch's lines go; epochs the checkpoint covers commit */
	if ((rc = sfs_output_rollback(w->out)))
		die("output rollback", rc);
}

int main(int argc, char **argv)
{
	const char *job = getenv("SFS_JOB"), *ws = getenv("SFS_WORKER"), *wn = getenv("SFS_WORKERS");
	struct sfs_worker_opts o = { 0 };
	struct worker w = { 0 };
	uint64_t rate = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
	char dir[4096];
	int rc;

	if (argc < 2 || !job || !ws || !wn || !getenv("SFS_DATA")) {
		fprintf(stderr, "usage: sfs run --job J --exec clicks EVENTS [EVENTS_PER_SEC]\n");
		return 2;
	}
	w.events = strtoull(argv[1], NULL, 10);
	o.parallelism = (uint32_t)atoi(wn);
	if ((rc = sfs_worker_open(job, SFS_NODE_ANY, (uint32_t)atoi(ws), &o, &w.ctx)))
		die("open", rc);
	if ((rc = sfs_worker_task(w.ctx, &w.task)))
		die("checkpoints (run with --checkpoint-interval)", rc);
	if ((rc = sfs_state_register(w.ctx, "session", SFS_STATE_VALUE, &w.s_session)) ||
	    (rc = sfs_state_register(w.ctx, "clicks", SFS_STATE_COUNTER, &w.s_clicks)) ||
	    (rc = sfs_state_register(w.ctx, "pages", SFS_STATE_MAP, &w.s_pages)))
		die("register", rc);
	/* Before the first seal: it settles what an earlier run left. */
	snprintf(dir, sizeof(dir), "%s/out", getenv("SFS_DATA"));
	if ((rc = sfs_output_open(w.task, dir, "clicks", ".csv", &w.out)))
		die("output", rc);
	/* Everything it holds outside sfs is rebuilt by start(): it can roll
	 * back in place. */
	if ((rc = sfs_task_rollback_enable(w.task)))
		die("rollback in place", rc);
	while (run_stream(&w, rate))
		rollback(&w);
	sfs_task_finish(w.task);
	sfs_output_close(w.out);
	sfs_task_close(w.task);
	sfs_worker_close(w.ctx);
	free(w.from);
	return 0;
}
