/*
 * engine.c — the worker's operator loop (engine.h): channels, source split,
 * watermarks, barrier alignment, sink commit.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfs.h"
#include "runtime/chan.h"
#include "runtime/engine.h"
#include "runtime/query.h"
#include "runtime/sink.h"
#include "runtime/util.h"

#define SOURCE_BATCH 256u   /* events per loop round */
#define DRAIN_BATCH 512u    /* records per channel per round */
#define WM_DELAY_MS 4000    /* WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND */

/* A channel's process-local overflow: records that did not fit, in order. */
struct rt_out {
	struct rt_chan_end e;
	unsigned char *q;
	size_t qhead, qlen, qcap;
};

struct rt_in {
	struct rt_chan_end e;
	int64_t wm;        /* the last watermark it delivered */
	uint8_t blocked;   /* delivered the barrier being aligned */
	uint8_t ended;
	uint8_t released;  /* consumed space not yet handed back */
};

struct rt_stage {
	unsigned aligned, ended;
	uint64_t barrier;  /* id being aligned */
	int64_t wm;        /* min over the inputs' (an ended one: INT64_MAX) */
	int held;          /* aligned; resumes after the seal */
	int done;          /* every input ended, flushed, END sent on */
};

struct rt_engine {
	const struct rt_engine_env *env;
	sfs_handle_t *h;        /* the engine's own attach (an observer) */
	struct rt_job *job;
	struct rt_worker_status *ws;
	struct rt_bell *bells;
	const struct rt_query *q;
	struct rt_op op;
	struct rt_sink sink;
	uint32_t me, W;
	unsigned stages;
	struct rt_in in[RT_MAX_STAGES][RT_MAX_WORKERS];
	struct rt_out out[RT_MAX_STAGES][RT_MAX_WORKERS];
	struct rt_stage st[RT_MAX_STAGES];
	uint64_t queued;        /* records in overflows */
	uint64_t records;       /* processed, published to ws each round */
	/* source split */
	struct nx_config gen;
	uint64_t nblocks, block, next_ev, end_ev, events;
	/* Source splits: split s is blocks s, s + S, s + 2S, ... (S = rj_nsplits,
	 * the parallelism the job started with); this worker owns splits
	 * me, me + W, ... and generates them a block each in turn.  A split's
	 * offset is its next block.  `block` is the current block. */
	uint32_t nsplit, cur;
	uint32_t split_id[RT_MAX_WORKERS];
	uint64_t split_next[RT_MAX_WORKERS];
	uint64_t injected;      /* last barrier id this source injected */
	uint64_t inj_off[8][RT_MAX_WORKERS]; /* split offsets at barrier id (by id & 7) */
	uint64_t max_id;        /* greatest event id generated (0: none yet) */
	int64_t wm_sent;        /* last watermark injected */
	int source_done;
	uint64_t throttle_until;  /* --max-rate: no events before this (ns) */
	uint64_t next_beat;       /* the heartbeat's next due time */
	int finished;           /* part committed */
	int io_said;            /* a sink write is being retried: said once */
	/* Checkpoints, through the public task API like any program: NULL
	 * when the group takes none.  The bytes kept with a checkpoint are
	 * this worker's split offsets (rt_source_bytes). */
	sfs_task_t *task;
	uint64_t committed;     /* last checkpoint whose sink epochs it committed */
	struct nx_event ev;
};

/* ---- failure ------------------------------------------------------------------ */

static int fail(struct rt_engine *g, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct rt_engine *g, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->ws->rw_error, sizeof(g->ws->rw_error), fmt, ap);
	va_end(ap);
	rt_log("worker %u failed: %s", g->me, g->ws->rw_error);
	rt_store_release(&g->ws->rw_state, RT_W_FAILED);
	if (g->task)
		sfs_task_finish(g->task);	/* it seals nothing more */
	return rc ? rc : -EIO;
}

void rt_beat(struct rt_op *op)
{
	struct rt_engine *g = op->eng;
	uint64_t now = rt_now_ns();

	if (now >= g->next_beat) {
		g->env->beat(g->env->beat_arg);
		g->next_beat = now + g->env->heartbeat_ns;
	}
}

int rt_fail(struct rt_op *op, int rc, const char *what)
{
	struct rt_engine *g = op->eng;

	return fail(g, rc, "%s %s: %s (%s)", g->q->name, what, sfs_strerror(rc),
		    rt_last_error());
}

/* ---- sending ------------------------------------------------------------------- */

static void *queue_rec(struct rt_out *o, uint32_t len, uint32_t type)
{
	uint64_t need = rt_rec_span(len);
	struct rt_rec *r;

	if (o->qlen + need > o->qcap) {
		size_t cap = o->qcap ? o->qcap * 2 : 64 * 1024;
		unsigned char *q;

		while (cap < o->qlen + need)
			cap *= 2;
		q = realloc(o->q, cap);
		if (!q) {
			rt_log("exchange overflow: out of memory (%zu bytes queued)", o->qlen);
			abort();	/* the supervisor restarts us; nothing to salvage */
		}
		o->q = q;
		o->qcap = cap;
	}
	r = (struct rt_rec *)(o->q + o->qlen);
	r->len = len;
	r->type = type;
	o->qlen += need;
	return r->data;
}

static void *send_rec(struct rt_engine *g, unsigned stage, uint32_t to, uint32_t len,
		      uint32_t type)
{
	struct rt_out *o = &g->out[stage][to];
	void *p;

	if (o->qhead == o->qlen) {
		p = rt_chan_reserve(&o->e, len, type);
		if (p)
			return p;
	}
	g->queued++;
	return queue_rec(o, len, type);
}

void *rt_send(struct rt_op *op, unsigned stage, uint32_t to, uint32_t len)
{
	return send_rec(op->eng, stage, to, len, RT_REC_DATA);
}

static void send_marker(struct rt_engine *g, unsigned stage, uint32_t type, uint64_t id)
{
	for (uint32_t to = 0; to < g->W; to++) {
		uint64_t *p = send_rec(g, stage, to, sizeof(id), type);

		*p = id;
	}
}

/* Move queued records into their channels as room allows. */
static int drain_queues(struct rt_engine *g)
{
	int moved = 0;

	for (unsigned s = 0; s < g->stages; s++)
		for (uint32_t to = 0; to < g->W; to++) {
			struct rt_out *o = &g->out[s][to];

			while (o->qhead < o->qlen) {
				struct rt_rec *r = (struct rt_rec *)(o->q + o->qhead);
				void *p = rt_chan_reserve(&o->e, r->len, r->type);

				if (!p)
					break;
				memcpy(p, r->data, r->len);
				o->qhead += rt_rec_span(r->len);
				g->queued--;
				moved = 1;
			}
			if (o->qhead == o->qlen)
				o->qhead = o->qlen = 0;
		}
	return moved;
}

static void wake(struct rt_engine *g, uint32_t w)
{
	struct rt_bell *b = &g->bells[w];

	if (rt_load_relaxed(&b->bl_sleeping)) {
		__atomic_fetch_add(&b->bl_word, 1, __ATOMIC_SEQ_CST);
		rt_futex_wake(&b->bl_word, 1);
	}
}

/* Publish every channel written this round and wake sleeping consumers;
 * hand consumed space back and wake producers waiting for room. */
static void publish(struct rt_engine *g)
{
	uint64_t woke = 0, freed = 0;

	for (unsigned s = 0; s < g->stages; s++)
		for (uint32_t w = 0; w < g->W; w++) {
			if (rt_chan_publish(&g->out[s][w].e))
				woke |= 1ull << w;
			if (g->in[s][w].released) {
				rt_chan_release(&g->in[s][w].e);
				g->in[s][w].released = 0;
				freed |= 1ull << w;
			}
		}
	if (!(woke | freed))
		return;
	rt_fence();	/* our stores before their sleeping flags (Dekker) */
	for (uint32_t w = 0; w < g->W; w++)
		if (w != g->me && ((woke | freed) >> w & 1))
			wake(g, w);
}

/* ---- sink ---------------------------------------------------------------------- */

int rt_sink_wanted(const struct rt_op *op)
{
	return op->eng->sink.materialize;
}

int rt_sink_upsert(struct rt_op *op, const void *key, size_t klen, const char *row, size_t len)
{
	return rt_sink_put(&op->eng->sink, key, klen, row, len);
}

int rt_sink_delete(struct rt_op *op, const void *key, size_t klen)
{
	return rt_sink_del(&op->eng->sink, key, klen);
}

int rt_sink_insert(struct rt_op *op, const char *row, size_t len)
{
	return rt_sink_add(&op->eng->sink, row, len, 1);
}

int rt_sink_retract(struct rt_op *op, const char *row, size_t len)
{
	return rt_sink_add(&op->eng->sink, row, len, -1);
}

/*
 * Epoch @epoch's changelog, written until it is: a disk's trouble (no
 * space, a quota, an I/O error: sfs_task_io says which errors a retry may
 * cure) is retried every 100 ms, offline, the sources waiting meanwhile
 * (back-pressure, as a full write buffer's); said once, and the supervisor
 * stops the group if it outlasts --io-stall-timeout-ms.  Any other error
 * is the caller's, as before.
 */
static int sink_write(struct rt_engine *g, uint64_t epoch, uint64_t *rows)
{
	for (;;) {
		int rc = rt_sink_write_epoch(&g->sink, g->job->rj_data_dir, g->me, epoch, rows), io;

		if (rc == 0) {
			if (g->io_said) {
				rt_log("worker %u: sink epoch %llu written: the disk has room again",
				       g->me, (unsigned long long)epoch);
				g->io_said = 0;
			}
			if (g->task)
				(void)sfs_task_io(g->task, 0);
			return 0;
		}
		if (!g->task || *g->env->stop || (io = sfs_task_io(g->task, rc)) < 0)
			return rc;	/* no retry cures it, or the group stops */
		if (io == 1 || !g->io_said)
			rt_log("worker %u: sink epoch %llu: %s: retrying every 100 ms", g->me,
			       (unsigned long long)epoch, rt_last_error());
		g->io_said = 1;
		if (g->op.so->idle)
			g->op.so->idle(g->op.st, 1);
		{
			struct timespec ts = { 0, 100 * 1000000L };

			nanosleep(&ts, NULL);
		}
		g->env->beat(g->env->beat_arg);	/* waiting, not hung */
		if (g->op.so->idle)
			g->op.so->idle(g->op.st, 0);
	}
}

/* End of input: the final epoch's changelog (committed by the supervisor
 * once every worker is done: the job's last checkpoint). */
static int commit(struct rt_engine *g)
{
	uint64_t rows = 0;
	int rc;

	rc = sink_write(g, RT_EPOCH_FINAL, &rows);
	if (rc)
		return fail(g, rc, "sink: %s", rt_last_error());
	g->ws->rw_rows += rows;
	g->ws->rw_end_ns = rt_now_ns();
	rt_store_release(&g->ws->rw_state, RT_W_DONE);
	if (g->task)
		sfs_task_finish(g->task);
	g->finished = 1;
	rt_log("worker %u: end of input, %llu events, %llu records, %llu result changes",
	       g->me, (unsigned long long)g->events, (unsigned long long)g->records,
	       (unsigned long long)g->ws->rw_rows);
	return 0;
}

/* ---- stages -------------------------------------------------------------------- */

int64_t rt_watermark(const struct rt_op *op, unsigned stage)
{
	return op->eng->st[stage].wm;
}

/*
 * Stage @s's watermark is the minimum of its inputs' last ones (an ended
 * input counts as +infinity: Flink's MAX_WATERMARK at end of input).  When
 * it advances, the operator's callback runs first (its timers fire, their
 * output is sent), then the watermark goes on to the next stage's channels
 * behind that output.  INT64_MAX is not forwarded: END follows and counts
 * as it.  O(workers) per watermark record.
 */
static int stage_watermark(struct rt_engine *g, unsigned s)
{
	struct rt_stage *S = &g->st[s];
	int64_t wm = INT64_MAX;
	int rc;

	for (uint32_t p = 0; p < g->W; p++)
		if (!g->in[s][p].ended && g->in[s][p].wm < wm)
			wm = g->in[s][p].wm;
	if (wm <= S->wm)
		return 0;
	S->wm = wm;
	if (g->q->watermark && (rc = g->q->watermark(&g->op, s, wm)))
		return rc;
	if (s + 1 < g->stages && wm != INT64_MAX)
		send_marker(g, s + 1, RT_REC_WATERMARK, (uint64_t)wm);
	return 0;
}

/* The calling thread's CPU time, ns (a syscall: per barrier, not per record). */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int seal(struct rt_engine *g, uint64_t id)
{
	uint64_t t0 = rt_now_ns(), c0 = cpu_ns(), dt;
	int rc;

	/* Whatever the last stage sent before the seal leaves first. */
	publish(g);
	rc = g->op.so->barrier(g->op.st, id);
	if (rc)
		return fail(g, rc, "barrier %llu: %s", (unsigned long long)id, rt_last_error());
	if (g->task) {
		/* the pre-commit of epoch @id, then the seal with the offsets */
		uint64_t rows = 0;
		char bytes[SFS_TASK_BYTES_MAX];
		int n;

		rc = sink_write(g, id, &rows);
		if (rc)
			return fail(g, rc, "sink epoch %llu: %s", (unsigned long long)id,
				    rt_last_error());
		g->ws->rw_rows += rows;
		if (g->op.so->snapshot) {
			char dir[RT_PATH_MAX + 64];

			if ((rc = rt_sfs(sfs_task_stage_dir(g->task, id, dir, sizeof(dir)))) ||
			    (rc = g->op.so->snapshot(g->op.st, id, dir)) ||
			    (rc = rt_sfs(sfs_task_staged(g->task, id, 0))))
				return fail(g, rc, "snapshot %llu: %s", (unsigned long long)id,
					    rt_last_error());
		}
		rt_store_relaxed(&g->ws->rw_sink_epoch, id);
		/* A barrier this worker's source did not inject (it had ended:
		 * the stages aligned on the other workers' barriers and this
		 * input's END) has no inj_off slot of its own — the slot holds
		 * zeros or an older barrier's offsets.  The split offsets are then
		 * the final ones: every split read to its end.  The power-loss
		 * test (tests/e2e_powerloss.sh) found it: a checkpoint taken after
		 * worker 0's end of input recorded split 0 at block 0, and a
		 * restore from it read the split again onto state that had it. */
		n = rt_source_bytes(bytes, sizeof(bytes), g->split_id,
				    g->injected >= id ? g->inj_off[id & 7] : g->split_next, g->nsplit);
		if (n < 0 || (rc = rt_sfs(sfs_task_sealed(g->task, id, bytes, (size_t)n))))
			return fail(g, n < 0 ? n : rc, "seal %llu: %s", (unsigned long long)id,
				    rt_last_error());
	}
	for (unsigned s = 0; s < g->stages; s++) {
		g->st[s].held = 0;
		g->st[s].aligned = 0;
		for (uint32_t w = 0; w < g->W; w++)
			g->in[s][w].blocked = 0;
	}
	dt = rt_now_ns() - t0;
	rt_store_relaxed(&g->ws->rw_seal_cpu_ns, g->ws->rw_seal_cpu_ns + (cpu_ns() - c0));
	rt_store_relaxed(&g->ws->rw_seal_ns, g->ws->rw_seal_ns + dt);
	if (dt > g->ws->rw_seal_max_ns)
		rt_store_relaxed(&g->ws->rw_seal_max_ns, dt);
	rt_store_relaxed(&g->ws->rw_barriers, g->ws->rw_barriers + 1);
	rt_store_release(&g->ws->rw_last_barrier, id);
	if (g->op.so->stall_ns)
		rt_store_relaxed(&g->ws->rw_stall_ns, g->op.so->stall_ns(g->op.st));
	return 0;
}

static int check_stage(struct rt_engine *g, unsigned s)
{
	struct rt_stage *S = &g->st[s];
	int last = s + 1 == g->stages, rc;

	if (!S->held && S->aligned && S->aligned + S->ended == g->W) {
		if (g->q->flush && (rc = g->q->flush(&g->op, s)))
			return rc;
		S->held = 1;
		if (!last)
			send_marker(g, s + 1, RT_REC_BARRIER, S->barrier);
		else if ((rc = seal(g, S->barrier)))
			return rc;
	}
	if (!S->done && S->ended == g->W) {
		/* end of input: every window fires, then deferred work */
		if ((rc = stage_watermark(g, s)))
			return rc;
		if (g->q->flush && (rc = g->q->flush(&g->op, s)))
			return rc;
		S->done = 1;
		if (!last)
			send_marker(g, s + 1, RT_REC_END, 0);
		else
			return commit(g);
	}
	return 0;
}

/* Drain stage @s's inputs; returns records taken or an error. */
static int drain_stage(struct rt_engine *g, unsigned s)
{
	struct rt_stage *S = &g->st[s];
	int did = 0, rc;

	if (S->held || S->done)
		return 0;
	for (uint32_t p = 0; p < g->W; p++) {
		struct rt_in *in = &g->in[s][p];

		for (unsigned n = 0; n < DRAIN_BATCH && !in->blocked && !in->ended; n++) {
			const struct rt_rec *r = rt_chan_peek(&in->e);

			if (!r)
				break;
			did++;
			in->released = 1;
			if (r->type == RT_REC_DATA) {
				rc = g->q->process(&g->op, s, r->data, r->len);
				rt_chan_consume(&in->e, r);
				if (rc)
					return rc;
				/* the first one of this incarnation: the end of a
				 * recovery for the supervisor's recovery_ms */
				if (!g->records++)
					rt_store_relaxed(&g->ws->rw_first_record_ns, rt_now_ns());
				continue;
			}
			if (r->type == RT_REC_BARRIER) {
				uint64_t id;

				memcpy(&id, r->data, sizeof(id));
				if (S->aligned && id != S->barrier)
					return fail(g, SFS_ECORRUPT,
						    "stage %u: barrier %llu from worker %u while "
						    "aligning %llu", s, (unsigned long long)id, p,
						    (unsigned long long)S->barrier);
				S->barrier = id;
				S->aligned++;
				in->blocked = 1;
			} else if (r->type == RT_REC_WATERMARK || r->type == RT_REC_END) {
				int64_t wm;

				if (r->type == RT_REC_END) {
					S->ended++;
					in->ended = 1;
				} else {
					memcpy(&wm, r->data, sizeof(wm));
					if (wm > in->wm)
						in->wm = wm;
				}
				/* consumed first: the callback may send, never read */
				rt_chan_consume(&in->e, r);
				if ((rc = stage_watermark(g, s)))
					return rc;
				continue;
			} else {
				return fail(g, SFS_ECORRUPT, "stage %u: record of type %u from worker %u",
					    s, r->type, p);
			}
			rt_chan_consume(&in->e, r);
		}
	}
	rc = check_stage(g, s);
	return rc ? rc : did;
}

/* ---- source -------------------------------------------------------------------- */

/* The next block to generate: the current split's next one, taking the
 * splits in turn; none left → next_ev == end_ev == 0 (end of input). */
static void source_block(struct rt_engine *g)
{
	uint64_t B = g->job->rj_block_events, E = g->job->rj_events;

	for (uint32_t tried = 0; tried < g->nsplit; tried++) {
		uint32_t i = (g->cur + tried) % g->nsplit;

		if (g->split_next[i] < g->nblocks) {
			g->cur = i;
			g->block = g->split_next[i];
			g->next_ev = g->block * B;
			g->end_ev = g->next_ev + B < E ? g->next_ev + B : E;
			return;
		}
	}
	g->next_ev = g->end_ev = 0;
}

/* At a block boundary: the watermark of everything generated so far, if
 * it advanced.  Event time is monotone in the event number (gen.h), so the
 * greatest id gives the greatest time: one timestamp per block, none per
 * event.  Per source, so workers' watermarks differ by up to a round of
 * blocks; a stage takes the minimum. */
static void source_watermark(struct rt_engine *g)
{
	int64_t wm;

	if (!g->max_id)
		return;
	wm = nx_timestamp_ms(&g->gen, g->max_id - 1 - g->gen.first_event_id) - WM_DELAY_MS;
	if (wm > g->wm_sent) {
		g->wm_sent = wm;
		send_marker(g, 0, RT_REC_WATERMARK, (uint64_t)wm);
	}
}

static int source_step(struct rt_engine *g)
{
	unsigned budget = SOURCE_BATCH;
	int did = 0, rc;

	if (g->source_done || g->queued)
		return 0;
	while (budget) {
		if (g->next_ev == g->end_ev && g->job->rj_max_rate > 0) {
			/* --max-rate: this worker's share, checked per block */
			double per_ns = g->job->rj_max_rate / g->W / 1e9;
			uint64_t now = rt_now_ns(), due = g->ws->rw_start_ns +
				(uint64_t)((double)g->events / per_ns);

			if (due > now) {
				g->throttle_until = due;
				return did;
			}
			g->throttle_until = 0;
		}
		if (g->next_ev == g->end_ev) {
			uint64_t req = g->task ? sfs_task_requested(g->task) : 0;

			if (g->nsplit && g->split_next[g->cur] < g->nblocks) {
				g->split_next[g->cur] += g->job->rj_nsplits;
				g->cur = (g->cur + 1) % g->nsplit;
				rt_store_relaxed(&g->ws->rw_source_block, g->block);
			}
			source_watermark(g);
			if (req > g->injected) {
				g->injected = req;	/* ids may skip (an aborted checkpoint) */
				memcpy(g->inj_off[req & 7], g->split_next,
				       g->nsplit * sizeof(g->split_next[0]));
				send_marker(g, 0, RT_REC_BARRIER, g->injected);
			}
			source_block(g);
			if (g->next_ev == g->end_ev) {
				send_marker(g, 0, RT_REC_END, 0);
				g->source_done = 1;
				return did + 1;
			}
			if (g->queued)
				break;
		}
		{
			uint64_t n = g->next_ev++;
			uint64_t id = nx_event_id(&g->gen, n);

			/* every event moves the watermark, whatever kinds the query reads */
			if (id + 1 > g->max_id)
				g->max_id = id + 1;
			g->events++;
			did++;
			if (!(g->q->kinds & RT_KIND(nx_kind_of(id))))
				continue;
			nx_event(&g->gen, n, &g->ev);
			rc = g->q->source(&g->op, &g->ev);
			if (rc)
				return rc;
			budget--;
		}
	}
	return did;
}

/* ---- checkpoints ------------------------------------------------------------- */

int rt_source_bytes(char *buf, size_t len, const uint32_t *split, const uint64_t *off, uint32_t n)
{
	size_t used = 0;

	for (uint32_t i = 0; i < n; i++) {
		int k = snprintf(buf + used, len - used, "%s%u:%llu", i ? " " : "", split[i],
				 (unsigned long long)off[i]);

		if (k < 0 || (size_t)k >= len - used)
			return rt_err(-E2BIG, "%u split offsets: over %zu bytes", n, len);
		used += (size_t)k;
	}
	return (int)used;
}

/* The events this worker's splits delivered before their offsets (0 on a
 * fresh start): split s's blocks s, s + S, ... below its offset, each whole
 * but the stream's last.  What the run's summary adds to this
 * incarnation's events to count the whole run.  O(blocks done). */
static uint64_t events_before(const struct rt_engine *g)
{
	uint64_t B = g->job->rj_block_events, E = g->job->rj_events, n = 0;

	for (uint32_t i = 0; i < g->nsplit; i++)
		for (uint64_t b = g->split_id[i]; b < g->split_next[i] && b < g->nblocks;
		     b += g->job->rj_nsplits)
			n += (b + 1) * B <= E ? B : E - b * B;
	return n;
}

/* A restored or rescaled start: each of this worker's splits resumes at
 * the offset some old worker kept for it (after a rescale, any of them). */
static int restore_splits(struct rt_engine *g, const struct sfs_task_info *info)
{
	uint64_t found[RT_MAX_WORKERS] = { 0 };
	char text[SFS_TASK_BYTES_MAX + 1];

	for (uint32_t pw = 0; pw < info->prev_workers; pw++) {
		struct sfs_view v;
		const char *p = text;
		int rc = rt_sfs(sfs_task_restored(g->task, pw, &v));

		if (rc)
			return fail(g, rc, "restore: %s", rt_last_error());
		memcpy(text, v.data, v.len);
		text[v.len] = '\0';
		while (*p) {
			unsigned sp;
			unsigned long long o;
			int used = 0;

			if (sscanf(p, "%u:%llu%n", &sp, &o, &used) != 2 || !used)
				return fail(g, SFS_ECORRUPT, "checkpoint %llu: old worker %u's bytes "
					    "are not split offsets: '%.40s'",
					    (unsigned long long)info->checkpoint, pw, p);
			for (uint32_t i = 0; i < g->nsplit; i++)
				if (g->split_id[i] == sp) {
					g->split_next[i] = o;
					found[i] = 1;
				}
			p += used;
			p += *p == ' ';
		}
	}
	for (uint32_t i = 0; i < g->nsplit; i++)
		if (!found[i])
			return fail(g, SFS_ECORRUPT, "checkpoint %llu has no offset of split %u",
				    (unsigned long long)info->checkpoint, g->split_id[i]);
	return 0;
}

/* Checkpoint N is complete: this worker's sink epochs up to N are the
 * result's (a rename each; a failure is retried at the next one). */
static void sink_commit(struct rt_engine *g)
{
	uint64_t done = sfs_task_completed(g->task);

	if (rt_sink_commit_worker(g->job->rj_data_dir, g->me, done)) {
		rt_log("worker %u: commit of checkpoint %llu: %s (retried at the next one)", g->me,
		       (unsigned long long)done, rt_last_error());
		return;
	}
	g->committed = done;
	rt_store_relaxed(&g->ws->rw_sink_committed, done);
}

/* ---- set-up -------------------------------------------------------------------- */

/* The backend's report that RocksDB's back-pressure holds this worker (from
 * the backend's watcher thread, the one writer of rw_held): since when
 * (ms) and why, for the hang detector (runtime/job.h). */
static void engine_held(void *arg, unsigned why)
{
	struct rt_worker_status *ws = arg;

	rt_store_relaxed(&ws->rw_held, why == RT_HELD_NONE ? 0 :
			 (rt_now_ns() / 1000000) << 8 | (why & 0xff));
}

/* What outlives a rollback in place (engine_rollback): the attach, the
 * job's description, the checkpoint task and the keyed state. */
static int engine_attach(struct rt_engine *g, const struct rt_engine_env *env)
{
	const struct rt_backend_ops *bo;
	struct rt_backend_cfg bc;
	struct sfs_task_info info = { 0 };
	uint64_t size;
	void *jp;
	int rc;

	g->env = env;
	g->me = env->index;
	/* An observer: this process's slot is the skeleton's (env->beat). */
	rc = sfs_attach(env->job, env->node, SFS_ATTACH_OBSERVER, &g->h);
	if (rc) {
		rt_log("worker %u: attach to job %s: %s", g->me, env->job, sfs_last_error());
		return rc;
	}
	if (sfs_region_find(g->h, RT_JOB_REGION, &jp, &size))
		return -ENOENT;	/* no query job: a plain worker */
	g->job = jp;
	if (size < sizeof(*g->job) || g->job->rj_magic != RT_JOB_MAGIC ||
	    g->job->rj_version != RT_JOB_VERSION) {
		rt_log("region %s of job %s: not a version %u job description", RT_JOB_REGION,
		       env->job, RT_JOB_VERSION);
		return SFS_EVERSION;
	}
	g->W = g->job->rj_workers;
	if (g->me >= g->W || g->W > RT_MAX_WORKERS) {
		rt_log("worker %u: the job has %u workers", g->me, g->W);
		return SFS_EUSAGE;
	}
	g->ws = &g->job->rj_ws[g->me];
	g->q = env->query_find(g->job->rj_query);
	bo = rt_backend_find(g->job->rj_backend);
	if (!g->q || !bo)
		return fail(g, SFS_EUSAGE, "unknown query '%s' or backend '%s'", g->job->rj_query,
			    g->job->rj_backend);
	if (g->ws->rw_state != RT_W_STARTING)
		return fail(g, SFS_EUSAGE,
			    "restarted: recovery of a query job needs checkpoints (the "
			    "checkpointer issue); the run fails instead of giving wrong results");
	rc = sfs_task_open(g->h, g->me, &g->task);
	if (rc && rc != -ENOENT)
		return fail(g, rc, "checkpoints: %s", sfs_last_error());
	if (g->task)
		sfs_task_info(g->task, &info);

	memset(&bc, 0, sizeof(bc));
	bc.job = env->job;
	bc.node = env->node;
	bc.worker = g->me;
	bc.workers = g->W;
	bc.max_parallelism = g->job->rj_max_parallelism;
	bc.data_dir = g->job->rj_data_dir;
	bc.restored = g->task && info.start != SFS_START_FRESH;
	bc.cache_bytes = g->job->rj_cache_bytes;
	bc.buffer_bytes = g->job->rj_buffer_bytes;
	bc.state_ttl_ms = g->job->rj_state_ttl_ms;
	bc.rdb_memory_bytes = g->job->rj_rdb_memory_bytes;
	bc.held = engine_held;
	bc.held_arg = g->ws;
	rc = bo->open(&bc, &g->op.st);
	if (rc)
		return fail(g, rc, "backend %s: %s", bo->name, rt_last_error());
	g->op.so = bo;
	/* Its state can roll back in place: so can this worker (every other
	 * part of it starts over in engine_rollback). */
	if (g->task && bo->rollback && (rc = sfs_task_rollback_enable(g->task)))
		return fail(g, rc, "checkpoints: %s", sfs_last_error());
	return 0;
}

/* Everything of one run of the job in this process: channels, source
 * splits (restored from the task's checkpoint), operators and sink. */
static int engine_start(struct rt_engine *g)
{
	struct sfs_task_info info = { 0 };
	unsigned char *chans;
	uint64_t csize;
	void *cp;
	int rc;

	g->ws = &g->job->rj_ws[g->me];
	g->bells = g->job->rj_bell;
	g->stages = g->q->stages;
	rc = sfs_region_find(g->h, RT_CHAN_REGION, &cp, &csize);
	if (rc || csize < rt_chans_bytes(g->W, g->job->rj_chan_bytes))
		return fail(g, SFS_ECORRUPT, "region %s missing or too small", RT_CHAN_REGION);
	chans = cp;
	for (unsigned s = 0; s < g->stages; s++)
		for (uint32_t w = 0; w < g->W; w++) {
			uint64_t stride = rt_chan_stride(g->job->rj_chan_bytes);
			struct rt_chan *to = (struct rt_chan *)(chans +
				rt_chan_index(g->W, s, g->me, w) * stride);
			struct rt_chan *from = (struct rt_chan *)(chans +
				rt_chan_index(g->W, s, w, g->me) * stride);

			rt_chan_end_init(&g->out[s][w].e, to, 1);
			rt_chan_end_init(&g->in[s][w].e, from, 0);
		}

	nx_config_default(&g->gen);
	g->gen.rate = g->job->rj_rate;
	g->gen.base_time_ms = g->job->rj_base_time_ms;
	g->gen.first_event_number = g->job->rj_first_event;
	g->nblocks = (g->job->rj_events + g->job->rj_block_events - 1) / g->job->rj_block_events;
	for (uint32_t sp = g->me; sp < g->job->rj_nsplits && g->nsplit < RT_MAX_WORKERS;
	     sp += g->W) {
		g->split_id[g->nsplit] = sp;
		g->split_next[g->nsplit++] = sp;	/* split sp's first block */
	}
	if (g->task) {
		sfs_task_info(g->task, &info);
		g->injected = info.base_id;
		if (info.start != SFS_START_FRESH && (rc = restore_splits(g, &info)))
			return rc;
	}
	rt_store_relaxed(&g->ws->rw_events_before, events_before(g));
	g->wm_sent = INT64_MIN;
	for (unsigned s = 0; s < g->stages; s++) {
		g->st[s].wm = INT64_MIN;
		for (uint32_t w = 0; w < g->W; w++)
			g->in[s][w].wm = INT64_MIN;
	}
	source_block(g);

	g->op.worker = g->me;
	g->op.workers = g->W;
	g->op.maxp = g->job->rj_max_parallelism;
	g->op.eng = g;
	if (g->q->priv_size && !(g->op.priv = calloc(1, g->q->priv_size)))
		return fail(g, -ENOMEM, "out of memory");
	if ((rc = g->q->open(&g->op)))
		return rc;
	if ((rc = rt_sink_init(&g->sink, g->job->rj_sink ? RT_SINK_EPOCH : RT_SINK_DISCARD)))
		return fail(g, rc, "sink: %s", rt_last_error());
	g->ws->rw_start_ns = rt_now_ns();
	rt_store_release(&g->ws->rw_state, RT_W_RUNNING);
	rt_log("worker %u: query %s on %s, %u workers, %u source split(s) of %u, %llu blocks%s",
	       g->me, g->q->name, g->op.so->name, g->W, g->nsplit, g->job->rj_nsplits,
	       (unsigned long long)g->nblocks,
	       info.start == SFS_START_FRESH ? "" : ", restored");
	return 0;
}

/* The run's part of the engine (engine_start's): its operators, sink and
 * overflow queues. */
static void engine_stop(struct rt_engine *g)
{
	if (g->q && g->q->close && g->op.priv)
		g->q->close(&g->op);
	free(g->op.priv);
	g->op.priv = NULL;
	if (g->sink.slot)
		rt_sink_free(&g->sink);
	for (unsigned s = 0; s < RT_MAX_STAGES; s++)
		for (uint32_t w = 0; w < RT_MAX_WORKERS; w++)
			free(g->out[s][w].q);
}

static void engine_close(struct rt_engine *g)
{
	engine_stop(g);
	if (g->op.st)
		g->op.so->close(g->op.st);
	if (g->task)
		sfs_task_close(g->task);
	if (g->h)
		sfs_detach(g->h);
}

#define ROLLBACK_SLICE_NS 100000000ull  /* the wait's slice: a beat, a look at stop */

/*
 * Another worker died and the group rolls back in place (include/sfs.h,
 * shm/ckpt.h): everything this run holds is past the checkpoint — its
 * operators' memory, overflow queues, the sink's open epoch, the source
 * positions — and goes; the keyed state drops its active buffer and
 * halts until the group has rolled back, then the run starts over from
 * the checkpoint as a restarted worker's would, in this process: its
 * attach and its view of the store carry over.  0, or an error (or stop)
 * that ends the worker.
 */
static int engine_rollback(struct rt_engine *g)
{
	const struct rt_engine_env *env = g->env;
	sfs_handle_t *h = g->h;
	struct rt_job *job = g->job;
	const struct rt_query *q = g->q;
	sfs_task_t *task = g->task;
	struct rt_backend *st = g->op.st;
	const struct rt_backend_ops *so = g->op.so;
	uint64_t r = sfs_task_rollback_requested(task), t0 = rt_now_ns(), t1;
	uint32_t me = g->me, W = g->W;
	int rc;

	engine_stop(g);
	memset(g, 0, sizeof(*g));
	g->env = env;
	g->h = h;
	g->job = job;
	g->q = q;
	g->task = task;
	g->op.st = st;
	g->op.so = so;
	g->me = me;
	g->W = W;
	g->ws = &job->rj_ws[me];
	while ((rc = so->rollback(st, task, ROLLBACK_SLICE_NS)) == SFS_ETIMEDOUT) {
		if (*env->stop)
			return 0;	/* the group is stopped instead */
		env->beat(env->beat_arg);
	}
	if (rc)
		return fail(g, rc, "rollback %llu in place: %s", (unsigned long long)r,
			    rt_last_error());
	t1 = rt_now_ns();
	if ((rc = engine_start(g)))
		return rc;
	rt_log("worker %u: rolled back in place (rollback %llu): halted %.1f ms, started over "
	       "in %.1f ms", me, (unsigned long long)r, (t1 - t0) / 1e6, (rt_now_ns() - t1) / 1e6);
	return 0;
}

/* One round: returns work done (> 0), 0 when idle, or an error. */
static int step(struct rt_engine *g)
{
	int did = 0, rc;

	if (g->queued && drain_queues(g))
		did++;
	for (unsigned s = g->stages; s-- > 0;) {
		rc = drain_stage(g, s);
		if (rc < 0)
			return rc;
		did += rc;
	}
	rc = source_step(g);
	if (rc < 0)
		return rc;
	did += rc;
	publish(g);
	return did;
}

/* Is there anything to do?  The look after announcing sleep. */
static int pending(struct rt_engine *g)
{
	if (g->finished && !g->queued)
		return 0;
	if (!g->source_done && !g->queued && !g->throttle_until)
		return 1;
	if (g->queued) {
		for (unsigned s = 0; s < g->stages; s++)
			for (uint32_t w = 0; w < g->W; w++)
				if (g->out[s][w].qhead < g->out[s][w].qlen &&
				    rt_chan_used(g->out[s][w].e.ch) + 4096 <= g->out[s][w].e.ch->ch_size)
					return 1;
	}
	for (unsigned s = 0; s < g->stages; s++)
		for (uint32_t w = 0; w < g->W; w++)
			if (!g->in[s][w].blocked && !g->in[s][w].ended &&
			    rt_chan_peek(&g->in[s][w].e))
				return 1;
	return 0;
}

int rt_engine_run(const struct rt_engine_env *env)
{
	struct rt_engine *g = calloc(1, sizeof(*g));
	char role[48];
	int rc;

	if (!g)
		return -ENOMEM;
	snprintf(role, sizeof(role), "worker%u", env->index);
	rt_log_init(role);
	rc = engine_attach(g, env);
	if (rc == 0)
		rc = engine_start(g);
	if (rc) {
		engine_close(g);
		free(g);
		return rc;
	}
	/* Every state read goes through the backend's own registration (the
	 * sfs context's slot); the process's own slot only beats, and its
	 * skeleton keeps it offline (worker/main.c). */
	while (!*env->stop) {
		uint64_t now;
		int did;

		/* A plain load a round: another worker died, the group rolls
		 * back to its last checkpoint, this process with it. */
		if (g->task && g->op.so->rollback && sfs_task_rollback_requested(g->task)) {
			if ((rc = engine_rollback(g)))
				break;
			continue;
		}
		/* A finished worker still owes what its queues hold (an END
		 * marker among them): it steps until they are delivered. */
		did = g->finished && !g->queued ? 0 : step(g);

		if (did < 0) {
			rc = did;
			break;
		}
		g->op.so->quiescent(g->op.st);
		if (g->task && sfs_task_completed(g->task) > g->committed)
			sink_commit(g);
		rt_store_relaxed(&g->ws->rw_events, g->events);
		rt_store_relaxed(&g->ws->rw_records, g->records);
		now = rt_now_ns();
		if (now >= g->next_beat) {
			env->beat(env->beat_arg);
			g->next_beat = now + env->heartbeat_ns;
		}
		if (did)
			continue;
		/* Idle: offline, announce, look once more, sleep until a
		 * producer (or a consumer freeing room) rings. */
		{
			struct rt_bell *b = &g->bells[g->me];
			int32_t seen = rt_load_acquire(&b->bl_word);
			uint64_t nap = g->queued ? 1000000ull : env->heartbeat_ns;

			if (g->throttle_until) {
				nap = g->throttle_until > now ? g->throttle_until - now : 50000;
				if (nap > env->heartbeat_ns)
					nap = env->heartbeat_ns;
			}

			if (g->op.so->idle)
				g->op.so->idle(g->op.st, 1);
			rt_store_relaxed(&b->bl_sleeping, 1);
			rt_fence();
			if (!pending(g))
				rt_futex_wait(&b->bl_word, seen, nap);
			rt_store_relaxed(&b->bl_sleeping, 0);
			if (g->op.so->idle)
				g->op.so->idle(g->op.st, 0);
		}
	}
	engine_close(g);
	free(g);
	return rc;
}
