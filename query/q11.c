/*
 * q11 — user sessions: bids per bidder per session window (gap 10 s)
 *
 *   SELECT B.bidder, count(*) AS bid_count,
 *          SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
 *          SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
 *   FROM bid B
 *   GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND);
 *
 * One stage keyed by bidder, Flink's merging WindowOperator as
 * tests/nexmark/q11.sql simulates it (G = 10000 ms, wm = the stage's
 * watermark when the bid arrives):
 *   1. a live session [start, end) with end - 1 <= wm has fired already
 *      (its timer at end - 1 ran when the watermark got there);
 *   2. the bid's window [t, t + G) merges with every live session it
 *      intersects, inclusive at both ends (start <= t + G and end >= t);
 *   3. intersecting none, it is dropped if t + G - 1 <= wm;
 *   4. at end of input (watermark +infinity) every live session fires.
 * A fired session is never reopened.  Live sessions never intersect each
 * other (a merge covers everything the bid touched), so their ends differ.
 *
 * State: value state "q11.sessions" keyed by bidder: the live sessions,
 * an array of {start, end, count} (one, nearly always), and timers "q11"
 * (runtime/timers.h) keyed by bidder.  Invariant: every live session has a
 * pending timer at or before its end - 1.  A new session registers one at
 * end - 1; growing or merging keeps the invariant (a session's end only
 * moves later), so an extended session's timer stays where it was — Flink
 * deletes and re-registers on every merge, which would be a timer write
 * (and, at a low event rate, a new timestamp) per bid.  A firing emits the
 * bidder's sessions with end - 1 <= its time and re-registers at end - 1
 * for the others (an idempotent no-op when that timer is pending; one at
 * or below the advancing watermark fires in the same advance), so each
 * session fires exactly when the watermark reaches its end - 1.  Per bid:
 * one get and one put; a timer write per new session and per firing of an
 * extended one.  A fired session is an inserted row (bidder, bid_count,
 * starttime, endtime): a bag.
 */
#include <errno.h>
#include <stdlib.h>

#include "query/records.h"
#include "runtime/query.h"
#include "runtime/timers.h"

#define GAP 10000

struct q11_session {
	int64_t start, end, count;
};

struct q11_rec {
	int64_t bidder, date_time;
};

struct q11 {
	uint32_t sessions;
	struct rt_timers *tm;
	struct q11_session *s;      /* scratch copy of one bidder's sessions */
	size_t ns, cap;
	const char *err;            /* what failed inside a timer callback */
	struct rt_row row;
};

static int open_q11(struct rt_op *op)
{
	struct q11 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q11.sessions", SFS_STATE_VALUE, 0, &q->sessions)))
		return rt_fail(op, rc, "register q11.sessions");
	if ((rc = rt_timers_open(op, "q11", &q->tm)))
		return rt_fail(op, rc, "q11 timers");
	return 0;
}

static void close_q11(struct rt_op *op)
{
	struct q11 *q = op->priv;

	rt_timers_close(q->tm);
	free(q->s);
}

static int source_q11(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	struct q11_rec *r;

	q_key_i64(k, e->bid.bidder);
	r = rt_send(op, 0, rt_owner(op, k, 8), sizeof(*r));
	r->bidder = e->bid.bidder;
	r->date_time = e->bid.date_time;
	return 0;
}

/* Copy the bidder's live sessions into q->s (room for one more). */
static int load(struct rt_op *op, const unsigned char *k)
{
	struct q11 *q = op->priv;
	struct sfs_view v;
	size_t n;
	int rc = op->so->value_get(op->st, q->sessions, 0, k, 8, &v);

	if (rc < 0)
		return rc;
	n = rc ? v.len / sizeof(struct q11_session) : 0;
	if (n + 1 > q->cap) {
		size_t cap = (n + 1) * 2;
		struct q11_session *s = realloc(q->s, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		q->s = s;
		q->cap = cap;
	}
	if (n)
		memcpy(q->s, v.data, n * sizeof(*q->s));
	q->ns = n;
	return 0;
}

static int store(struct rt_op *op, const unsigned char *k)
{
	struct q11 *q = op->priv;

	if (!q->ns)
		return op->so->value_delete(op->st, q->sessions, 0, k, 8);
	return op->so->value_put(op->st, q->sessions, 0, k, 8, q->s, q->ns * sizeof(*q->s));
}

static int intersects(const struct q11_session *s, int64_t t)
{
	return s->start <= t + GAP && s->end >= t;
}

static int process_q11(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q11 *q = op->priv;
	const struct q11_rec *r = rec;
	int64_t wm = rt_watermark(op, 0), t = r->date_time;
	struct q11_session m = { t, t + GAP, 1 };
	unsigned char k[8];
	size_t keep = 0, merged = 0;
	int rc;

	q_key_i64(k, r->bidder);
	if ((rc = load(op, k)))
		return rt_fail(op, rc, "q11 sessions get");
	for (size_t i = 0; i < q->ns; i++) {
		const struct q11_session *s = &q->s[i];

		if (!intersects(s, t))
			continue;
		m.start = s->start < m.start ? s->start : m.start;
		m.end = s->end > m.end ? s->end : m.end;
		m.count += s->count;
		merged++;
	}
	if (!merged && t + GAP - 1 <= wm)
		return 0;	/* its window is late and joins no live session */
	for (size_t i = 0; i < q->ns; i++)
		if (!intersects(&q->s[i], t))
			q->s[keep++] = q->s[i];
	q->s[keep++] = m;
	q->ns = keep;
	/* a merge keeps the swallowed sessions' timers: all <= m.end - 1 */
	if (!merged && (rc = rt_timer_register(q->tm, k, 8, m.end - 1)))
		return rt_fail(op, rc, "q11 timer register");
	return (rc = store(op, k)) ? rt_fail(op, rc, "q11 sessions put") : 0;
}

/* A timer at @ts: every live session of the bidder ending by ts + 1 fires;
 * the others get a timer at their end - 1 (the invariant). */
static int fire(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q11 *q = op->priv;
	int64_t bidder = 0;
	size_t keep = 0;
	int rc;

	if ((rc = load(op, key))) {
		q->err = "q11 sessions get";
		return rc;
	}
	for (int b = 0; b < 8; b++)
		bidder = bidder << 8 | ((const unsigned char *)key)[b];
	for (size_t i = 0; i < q->ns; i++) {
		const struct q11_session *s = &q->s[i];
		struct rt_row *w = &q->row;

		if (s->end - 1 > ts) {
			if ((rc = rt_timer_register(q->tm, key, klen, s->end - 1))) {
				q->err = "q11 timer register";
				return rc;
			}
			q->s[keep++] = *s;
			continue;
		}
		rt_row_init(w);
		rt_row_i64(w, bidder);
		rt_row_i64(w, s->count);
		rt_row_i64(w, s->start);
		rt_row_i64(w, s->end);
		if ((rc = rt_sink_insert(op, w->buf, w->len))) {
			q->err = "q11 sink";
			return rc;
		}
	}
	if (keep == q->ns)
		return 0;	/* every session had moved on: re-armed */
	q->ns = keep;
	if ((rc = store(op, key)))
		q->err = "q11 sessions put";
	return rc;
}

static int watermark_q11(struct rt_op *op, unsigned stage, int64_t wm)
{
	struct q11 *q = op->priv;
	int rc;

	q->err = "q11 timers";
	rc = rt_timers_advance(q->tm, wm, fire, op);
	return rc ? rt_fail(op, rc, q->err) : 0;
}

const struct rt_query rt_q11 = {
	.name = "q11",
	.columns = "bidder,bid_count,starttime,endtime",
	.shapes = "value state bidder -> live sessions {start, end, count}; timers at session "
		  "end - 1",
	.stages = 1,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q11),
	.open = open_q11,
	.source = source_q11,
	.process = process_q11,
	.watermark = watermark_q11,
	.close = close_q11,
};
