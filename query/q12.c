/*
 * q12 — bids per bidder per processing-time window
 *
 *   SELECT B.bidder, count(*) AS bid_count,
 *          TUMBLE_START(B.p_time, INTERVAL '10' SECOND) AS starttime,
 *          TUMBLE_END(B.p_time, INTERVAL '10' SECOND) AS endtime
 *   FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
 *   GROUP BY B.bidder, TUMBLE(B.p_time, INTERVAL '10' SECOND);
 *
 * One stage keyed by bidder.  p_time is the wall clock (CLOCK_REALTIME, ms)
 * when the worker owning the bidder processes the bid; windows are 10 s,
 * epoch-aligned.  The result depends on timing, so the oracle cannot check
 * it: only that the counts add up to the number of bids (tests/
 * e2e_nexmark.sh).
 *
 * State: value state "q12.count" bidder, namespace window start -> count
 * (one get and one put per bid, deleted when the window fires); timers
 * "q12" (runtime/timers.h) at window end - 1, driven by the clock: checked
 * on every bid (one vDSO clock read) and at every watermark, which serves
 * as a periodic tick.  Unlike Flink, which drops processing-time windows
 * still open when a bounded input ends, end of input fires them all, so
 * every bid is counted.  A fired window is an inserted row (bidder,
 * bid_count, starttime, endtime).
 */
#include <time.h>

#include "query/records.h"
#include "runtime/query.h"
#include "runtime/timers.h"

#define SIZE 10000

struct q12 {
	uint32_t count;
	struct rt_timers *tm;
	const char *err;
	struct rt_row row;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int open_q12(struct rt_op *op)
{
	struct q12 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q12.count", SFS_STATE_VALUE, 0, &q->count)))
		return rt_fail(op, rc, "register q12.count");
	if ((rc = rt_timers_open(op, "q12", &q->tm)))
		return rt_fail(op, rc, "q12 timers");
	return 0;
}

static void close_q12(struct rt_op *op)
{
	struct q12 *q = op->priv;

	rt_timers_close(q->tm);
}

static int source_q12(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	int64_t *r;

	q_key_i64(k, e->bid.bidder);
	r = rt_send(op, 0, rt_owner(op, k, 8), sizeof(*r));
	*r = e->bid.bidder;
	return 0;
}

static int64_t get_i64(const struct sfs_view *v)
{
	int64_t x = 0;

	if (v->len == sizeof(x))
		memcpy(&x, v->data, sizeof(x));
	return x;
}

/* Window [ts - 9999, ts + 1) of a bidder fires. */
static int fire(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q12 *q = op->priv;
	int64_t start = ts - (SIZE - 1), bidder = 0;
	struct rt_row *w = &q->row;
	struct sfs_view v;
	int rc;

	q->err = "q12 count get";
	if ((rc = op->so->value_get(op->st, q->count, (uint64_t)start, key, klen, &v)) <= 0)
		return rc;
	for (int b = 0; b < 8; b++)
		bidder = bidder << 8 | ((const unsigned char *)key)[b];
	rt_row_init(w);
	rt_row_i64(w, bidder);
	rt_row_i64(w, get_i64(&v));
	rt_row_i64(w, start);
	rt_row_i64(w, start + SIZE);
	q->err = "q12 sink";
	if ((rc = rt_sink_insert(op, w->buf, w->len)))
		return rc;
	q->err = "q12 count delete";
	return op->so->value_delete(op->st, q->count, (uint64_t)start, key, klen);
}

/* Fire the windows the clock (or end of input: INT64_MAX) has left: those
 * ending by @now, so no later bid can still fall in one that fired. */
static int advance(struct rt_op *op, int64_t now)
{
	struct q12 *q = op->priv;
	int64_t upto = now == INT64_MAX ? now : now - 1;
	int rc;

	if (upto < rt_timers_next(q->tm))
		return 0;
	q->err = "q12 timers";
	rc = rt_timers_advance(q->tm, upto, fire, op);
	return rc ? rt_fail(op, rc, q->err) : 0;
}

static int process_q12(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q12 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	int64_t now = now_ms(), start = now - now % SIZE, n = 1;
	unsigned char k[8];
	struct sfs_view v;
	int rc;

	/* first, so that no view is held across the advance's quiescent points */
	if ((rc = advance(op, now)))
		return rc;
	q_key_i64(k, *(const int64_t *)rec);
	rc = so->value_get(op->st, q->count, (uint64_t)start, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q12 count get");
	if (rc)
		n = get_i64(&v) + 1;
	else if ((rc = rt_timer_register(q->tm, k, 8, start + SIZE - 1)))
		return rt_fail(op, rc, "q12 timer");
	rc = so->value_put(op->st, q->count, (uint64_t)start, k, 8, &n, sizeof(n));
	return rc ? rt_fail(op, rc, "q12 count put") : 0;
}

static int watermark_q12(struct rt_op *op, unsigned stage, int64_t wm)
{
	return advance(op, wm == INT64_MAX ? INT64_MAX : now_ms());
}

const struct rt_query rt_q12 = {
	.name = "q12",
	.columns = "bidder,bid_count,starttime,endtime",
	.shapes = "value state (bidder, processing-time 10 s window) -> count; timers at window "
		  "end - 1 on the wall clock",
	.stages = 1,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q12),
	.open = open_q12,
	.source = source_q12,
	.process = process_q12,
	.watermark = watermark_q12,
	.close = close_q12,
};
