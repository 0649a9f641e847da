/*
 * q5 — hot items: the auctions with the most bids per sliding window
 *
 *   SELECT AuctionBids.auction, AuctionBids.num
 *   FROM (SELECT auction, count(*) AS num, window_start AS starttime,
 *                window_end AS endtime
 *         FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND,
 *                        INTERVAL '10' SECOND))
 *         GROUP BY auction, window_start, window_end) AS AuctionBids
 *   JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
 *         FROM (... the same counts ...) AS CountBids
 *         GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
 *   ON AuctionBids.starttime = MaxBids.starttime AND
 *      AuctionBids.endtime = MaxBids.endtime AND AuctionBids.num >= MaxBids.maxn;
 *
 * Windows: HOP(slide 2 s, size 10 s), epoch-aligned; a bid at t lies in the
 * 2 s slice ending se = floor(t / 2000) * 2000 + 2000 and in the 5 windows
 * ending se, se + 2000, ..., se + 8000.  A bid counts in window [e - 10000,
 * e) iff e - 1 > the watermark when it arrives (tests/nexmark/q5.sql).
 *
 * Stage 0, keyed by auction: Flink's slicing window aggregate.  A bid adds
 * one to its slice's count unless the slice's last window (se + 8000) has
 * fired; a window sums its 5 slices when it fires — fired windows never see
 * a later bid, unfired ones do, which is exactly the rule above.
 *   value state "q5.slice"  auction, namespace se -> count: per bid one get
 *                           and one put; deleted when its last window fires;
 *   timers "q5.s0"          auction at e - 1 for every unfired window of a
 *                           slice, registered when the slice is created.
 * A firing multigets the window's 5 slices and sends {e, auction, num} on,
 * keyed by the window.
 * Stage 1, keyed by window end e: the max per window and the auctions that
 * reach it, kept incrementally (a count above the max restarts the list):
 *   value state "q5.max"  e -> max num;
 *   list state "q5.top"   e -> auction ids whose num equals the max;
 *   timers "q5.s1"        e at e - 1.
 * Stage 1's watermark passes e - 1 only after every stage-0 worker fired
 * window e (the watermark follows the output), so the firing sees every
 * count: it inserts a row (auction, num) per listed auction (a bag: once
 * per window where the auction is a max) and clears the window.
 */
#include "query/records.h"
#include "runtime/query.h"
#include "runtime/timers.h"

#define SLIDE 2000
#define SIZE 10000
#define SLICES (SIZE / SLIDE)

struct q5_bid {
	int64_t auction, date_time;
};

struct q5_count {
	int64_t wend, auction, num;
};

struct q5 {
	uint32_t slice, max, top;
	struct rt_timers *tm[2];
	const char *err;
	struct rt_row row;
};

static int open_q5(struct rt_op *op)
{
	struct q5 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q5.slice", SFS_STATE_VALUE, 0, &q->slice)) ||
	    (rc = op->so->reg(op->st, "q5.max", SFS_STATE_VALUE, 0, &q->max)) ||
	    (rc = op->so->reg(op->st, "q5.top", SFS_STATE_LIST, 0, &q->top)))
		return rt_fail(op, rc, "register q5 state");
	if ((rc = rt_timers_open(op, "q5.s0", &q->tm[0])) ||
	    (rc = rt_timers_open(op, "q5.s1", &q->tm[1])))
		return rt_fail(op, rc, "q5 timers");
	return 0;
}

static void close_q5(struct rt_op *op)
{
	struct q5 *q = op->priv;

	rt_timers_close(q->tm[0]);
	rt_timers_close(q->tm[1]);
}

static int source_q5(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	struct q5_bid *r;

	q_key_i64(k, e->bid.auction);
	r = rt_send(op, 0, rt_owner(op, k, 8), sizeof(*r));
	r->auction = e->bid.auction;
	r->date_time = e->bid.date_time;
	return 0;
}

static int64_t get_i64(const struct sfs_view *v)
{
	int64_t x = 0;

	if (v->len == sizeof(x))
		memcpy(&x, v->data, sizeof(x));
	return x;
}

/* Stage 0: count the bid in its slice. */
static int count_bid(struct rt_op *op, const struct q5_bid *b)
{
	struct q5 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	int64_t wm = rt_watermark(op, 0);
	int64_t t = b->date_time, se = t - ((t % SLIDE) + SLIDE) % SLIDE + SLIDE, n = 1;
	unsigned char k[8];
	struct sfs_view v;
	int rc;

	if (se + SIZE - SLIDE - 1 <= wm)
		return 0;	/* every window of the slice has fired */
	q_key_i64(k, b->auction);
	rc = so->value_get(op->st, q->slice, (uint64_t)se, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q5 slice get");
	if (rc)
		n = get_i64(&v) + 1;
	if ((rc = so->value_put(op->st, q->slice, (uint64_t)se, k, 8, &n, sizeof(n))))
		return rt_fail(op, rc, "q5 slice put");
	if (n > 1)
		return 0;
	/* a new slice: a timer for each of its windows still to fire */
	for (int64_t e = se; e < se + SIZE; e += SLIDE)
		if (e - 1 > wm && (rc = rt_timer_register(q->tm[0], k, 8, e - 1)))
			return rt_fail(op, rc, "q5 timer");
	return 0;
}

/* Stage 0: window [ts + 1 - SIZE, ts + 1) of one auction fires. */
static int fire_count(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q5 *q = op->priv;
	int64_t e = ts + 1, num = 0;
	struct sfs_key keys[SLICES];
	struct sfs_view views[SLICES];
	int res[SLICES], rc;
	struct q5_count *c;
	unsigned char k[8];

	for (int i = 0; i < SLICES; i++)
		keys[i] = (struct sfs_key){ (uint64_t)(e - i * SLIDE), key, klen };
	q->err = "q5 slice multiget";
	if ((rc = op->so->multiget(op->st, q->slice, keys, SLICES, views, res)) < 0)
		return rc;
	for (int i = 0; i < SLICES; i++) {
		if (res[i] < 0)
			return res[i];
		if (res[i])
			num += get_i64(&views[i]);
	}
	/* the window's oldest slice has no later window */
	q->err = "q5 slice delete";
	if (res[SLICES - 1] &&
	    (rc = op->so->value_delete(op->st, q->slice, (uint64_t)(e - SIZE + SLIDE), key, klen)))
		return rc;
	if (!num)
		return 0;
	q_key_i64(k, e);
	c = rt_send(op, 1, rt_owner(op, k, 8), sizeof(*c));
	c->wend = e;
	c->auction = 0;
	for (int b = 0; b < 8; b++)
		c->auction = c->auction << 8 | ((const unsigned char *)key)[b];
	c->num = num;
	return 0;
}

/* Stage 1: keep the window's max and the auctions at it. */
static int max_count(struct rt_op *op, const struct q5_count *c)
{
	struct q5 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	unsigned char k[8];
	struct sfs_view v;
	int64_t max = 0;
	int rc, seen;

	q_key_i64(k, c->wend);
	seen = so->value_get(op->st, q->max, 0, k, 8, &v);
	if (seen < 0)
		return rt_fail(op, seen, "q5 max get");
	if (seen)
		max = get_i64(&v);
	if (seen && c->num < max)
		return 0;
	if (!seen && (rc = rt_timer_register(q->tm[1], k, 8, c->wend - 1)))
		return rt_fail(op, rc, "q5 timer");
	if (!seen || c->num > max) {
		/* a new max: the auctions listed so far are below it */
		if ((rc = so->value_put(op->st, q->max, 0, k, 8, &c->num, sizeof(c->num))) ||
		    (seen && (rc = so->list_clear(op->st, q->top, 0, k, 8))))
			return rt_fail(op, rc, "q5 max put");
	}
	rc = so->list_append(op->st, q->top, 0, k, 8, &c->auction, sizeof(c->auction));
	return rc ? rt_fail(op, rc, "q5 top append") : 0;
}

struct emit {
	struct rt_op *op;
	int64_t max;
	int rc;
};

static int emit_top(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct emit *e = arg;
	struct q5 *q = e->op->priv;
	int64_t auction;

	if (vlen != sizeof(auction))
		return e->rc = SFS_ECORRUPT;
	memcpy(&auction, val, sizeof(auction));
	rt_row_init(&q->row);
	rt_row_i64(&q->row, auction);
	rt_row_i64(&q->row, e->max);
	return e->rc = rt_sink_insert(e->op, q->row.buf, q->row.len);
}

/* Stage 1: window @key fires: its max auctions are rows. */
static int fire_max(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q5 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	struct emit e = { op, 0, 0 };
	struct sfs_view v;
	int rc;

	q->err = "q5 max get";
	if ((rc = so->value_get(op->st, q->max, 0, key, klen, &v)) <= 0)
		return rc;
	e.max = get_i64(&v);
	q->err = "q5 top";
	if ((rc = so->list_get(op->st, q->top, 0, key, klen, emit_top, &e)) || (rc = e.rc) ||
	    (rc = so->list_clear(op->st, q->top, 0, key, klen)) ||
	    (rc = so->value_delete(op->st, q->max, 0, key, klen)))
		return rc;
	return 0;
}

static int process_q5(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	return stage == 0 ? count_bid(op, rec) : max_count(op, rec);
}

static int watermark_q5(struct rt_op *op, unsigned stage, int64_t wm)
{
	struct q5 *q = op->priv;
	int rc;

	q->err = "q5 timers";
	rc = rt_timers_advance(q->tm[stage], wm, stage == 0 ? fire_count : fire_max, op);
	return rc ? rt_fail(op, rc, q->err) : 0;
}

const struct rt_query rt_q5 = {
	.name = "q5",
	.columns = "auction,num",
	.shapes = "value state (auction, 2 s slice) -> count; per window: value state max, list "
		  "state auctions at the max; timers at window end - 1",
	.stages = 2,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q5),
	.open = open_q5,
	.source = source_q5,
	.process = process_q5,
	.watermark = watermark_q5,
	.close = close_q5,
};
