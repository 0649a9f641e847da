/*
 * q7 — highest bid: the bids at each 10 s window's highest price
 *
 *   SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
 *   FROM bid B
 *   JOIN (SELECT MAX(price) AS maxprice, window_end AS dateTime
 *         FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
 *         GROUP BY window_start, window_end) B1
 *   ON B.price = B1.maxprice
 *   WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime;
 *
 * (sink columns auction, bidder, price, datetime, extra, by name: see
 * tests/nexmark/q7.sql.)  B1 is a window aggregate: a bid counts in window
 * [e - 10000, e) iff e - 1 > the watermark when it arrives.  The join is a
 * regular one: every bid, late or not, meets every fired B1 row with its
 * price and e - 10000 <= dateTime <= e (both ends inclusive).
 *
 * Three stages.  The window max is global, so a window-keyed stage alone
 * would put every bid on one worker; as Flink's two-phase aggregation does,
 * each worker pre-aggregates its share first.
 *  Stage 0, keyed by price: the join's bid side and the partial max.
 *    map state "q7.bids"   price -> {event id -> bid row}: every bid, kept
 *                          (a regular join's state only grows);
 *    value state "q7.pmax" worker key, namespace e -> the max price of this
 *                          worker's bids of window e (a process-local copy
 *                          of the current window's saves the read; written
 *                          only when it rises);
 *    timers "q7.s0"        worker key at e - 1.
 *    The worker key is rt_timers_local_key(): state of no record key, in a
 *    key group this worker owns, fired by a timer in the same group.  A bid
 *    also probes "q7.wins" (below) for windows already joined at its price.
 *  Stage 1, keyed by window end e: value state "q7.max" e -> max of the
 *    partial maxes; timers "q7.s1" at e - 1 send B1 = {e, max} on.
 *  Stage 2, keyed by price (the same worker as stage 0 for that price):
 *    value state "q7.wins" price -> the window ends whose max it is; then
 *    the bids stored at that price are scanned for the window's range.
 * Stages 0 and 2 are the two sides of a symmetric hash join on the same
 * worker: each stores, then probes the other, so every pair meets once in
 * whatever order they come.  Rows are inserted (a bag).
 */
#include <errno.h>
#include <stdlib.h>

#include "query/records.h"
#include "runtime/query.h"
#include "runtime/timers.h"

#define SIZE 10000

/* A bid to stage 0, and as stored in q7.bids (the whole record). */
struct q7_bid {
	int64_t seq, auction, bidder, price, date_time;
	uint32_t extra_len, pad;
	char extra[];
};

struct q7_max {
	int64_t wend, price;
};

struct q7 {
	uint32_t bids, pmax, max, wins;
	struct rt_timers *tm[2];
	const void *lkey;          /* this worker's key (stage 0) */
	uint32_t lklen;
	int64_t pm_wend, pm_price; /* stage 0: the state's pmax of window pm_wend */
	int pm_have;
	int64_t *ends;             /* stage 2: scratch of windows won */
	size_t nends;
	const char *err;
	struct rt_row row;
	uint64_t scratch[SFS_ROW_SCRATCH];
};

static int open_q7(struct rt_op *op)
{
	struct q7 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q7.bids", SFS_STATE_MAP, 0, &q->bids)) ||
	    (rc = op->so->reg(op->st, "q7.pmax", SFS_STATE_VALUE, 0, &q->pmax)) ||
	    (rc = op->so->reg(op->st, "q7.max", SFS_STATE_VALUE, 0, &q->max)) ||
	    (rc = op->so->reg(op->st, "q7.wins", SFS_STATE_VALUE, 0, &q->wins)))
		return rt_fail(op, rc, "register q7 state");
	if ((rc = rt_timers_open(op, "q7.s0", &q->tm[0])) ||
	    (rc = rt_timers_open(op, "q7.s1", &q->tm[1])))
		return rt_fail(op, rc, "q7 timers");
	q->lkey = rt_timers_local_key(q->tm[0], &q->lklen);
	if (!q->lkey)
		return rt_fail(op, SFS_EUSAGE, "q7: this worker owns no key group");
	return 0;
}

static void close_q7(struct rt_op *op)
{
	struct q7 *q = op->priv;

	rt_timers_close(q->tm[0]);
	rt_timers_close(q->tm[1]);
	free(q->ends);
}

static int source_q7(struct rt_op *op, const struct nx_event *e)
{
	const struct nx_bid *b = &e->bid;
	unsigned char k[8];
	struct q7_bid *r;

	q_key_i64(k, b->price);
	r = rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)(sizeof(*r) + b->extra_len));
	r->seq = (int64_t)e->seq;
	r->auction = b->auction;
	r->bidder = b->bidder;
	r->price = b->price;
	r->date_time = b->date_time;
	r->extra_len = b->extra_len;
	r->pad = 0;
	memcpy(r->extra, b->extra, b->extra_len);
	return 0;
}

static int64_t window_end(int64_t t)
{
	return t - ((t % SIZE) + SIZE) % SIZE + SIZE;
}

static int64_t get_i64(const struct sfs_view *v)
{
	int64_t x = 0;

	if (v->len == sizeof(x))
		memcpy(&x, v->data, sizeof(x));
	return x;
}

/* One result row: @b joined a window of its price. */
static int emit(struct rt_op *op, const struct q7_bid *b)
{
	struct q7 *q = op->priv;
	struct rt_row *w = &q->row;

	rt_row_init(w);
	rt_row_i64(w, b->auction);
	rt_row_i64(w, b->bidder);
	rt_row_i64(w, b->price);
	rt_row_i64(w, b->date_time);
	rt_row_str(w, b->extra, b->extra_len);
	return rt_sink_insert(op, w->buf, w->len);
}

static int in_window(int64_t t, int64_t wend)
{
	return t >= wend - SIZE && t <= wend;
}

/* Stage 0: store the bid, probe the windows won at its price, and raise
 * the worker's partial max of its window. */
static int bid(struct rt_op *op, const struct q7_bid *b, uint32_t len)
{
	struct q7 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	int64_t wend = window_end(b->date_time);
	unsigned char k[8], uk[8];
	struct sfs_view v;
	int rc;

	q_key_i64(k, b->price);
	q_key_i64(uk, b->seq);
	if ((rc = so->map_put(op->st, q->bids, 0, k, 8, uk, 8, b, len)))
		return rt_fail(op, rc, "q7 bids put");
	rc = so->value_get(op->st, q->wins, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q7 wins get");
	for (uint32_t i = 0; rc && i + sizeof(int64_t) <= v.len; i += sizeof(int64_t)) {
		int64_t e;
		int erc;

		memcpy(&e, (const char *)v.data + i, sizeof(e));
		if (in_window(b->date_time, e) && (erc = emit(op, b)))
			return rt_fail(op, erc, "q7 sink");
	}
	if (wend - 1 <= rt_watermark(op, 0))
		return 0;	/* late for B1; joined all the same */
	if (!q->pm_have || q->pm_wend != wend) {
		rc = so->value_get(op->st, q->pmax, (uint64_t)wend, q->lkey, q->lklen, &v);
		if (rc < 0)
			return rt_fail(op, rc, "q7 pmax get");
		q->pm_wend = wend;
		q->pm_have = 1;
		q->pm_price = rc ? get_i64(&v) : INT64_MIN;
		if (!rc && (rc = rt_timer_register(q->tm[0], q->lkey, q->lklen, wend - 1)))
			return rt_fail(op, rc, "q7 timer");
	}
	if (b->price <= q->pm_price)
		return 0;
	q->pm_price = b->price;
	rc = so->value_put(op->st, q->pmax, (uint64_t)wend, q->lkey, q->lklen, &b->price,
			   sizeof(b->price));
	return rc ? rt_fail(op, rc, "q7 pmax put") : 0;
}

/* Stage 0: this worker's share of window @ts + 1 is complete. */
static int fire_partial(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q7 *q = op->priv;
	int64_t wend = ts + 1;
	unsigned char k[8];
	struct q7_max *m;
	struct sfs_view v;
	int rc;

	q->err = "q7 pmax";
	if ((rc = op->so->value_get(op->st, q->pmax, (uint64_t)wend, key, klen, &v)) <= 0)
		return rc;
	q_key_i64(k, wend);
	m = rt_send(op, 1, rt_owner(op, k, 8), sizeof(*m));
	m->wend = wend;
	m->price = get_i64(&v);
	if (q->pm_have && q->pm_wend == wend)
		q->pm_have = 0;
	return op->so->value_delete(op->st, q->pmax, (uint64_t)wend, key, klen);
}

/* Stage 1: the max of the partial maxes. */
static int global_max(struct rt_op *op, const struct q7_max *m)
{
	struct q7 *q = op->priv;
	unsigned char k[8];
	struct sfs_view v;
	int rc;

	q_key_i64(k, m->wend);
	rc = op->so->value_get(op->st, q->max, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q7 max get");
	if (rc && get_i64(&v) >= m->price)
		return 0;
	if (!rc && (rc = rt_timer_register(q->tm[1], k, 8, m->wend - 1)))
		return rt_fail(op, rc, "q7 timer");
	rc = op->so->value_put(op->st, q->max, 0, k, 8, &m->price, sizeof(m->price));
	return rc ? rt_fail(op, rc, "q7 max put") : 0;
}

/* Stage 1: window @key fires: B1 = {e, max} goes to the price's worker. */
static int fire_max(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q7 *q = op->priv;
	unsigned char k[8];
	struct q7_max *m;
	struct sfs_view v;
	int64_t price;
	int rc;

	q->err = "q7 max";
	if ((rc = op->so->value_get(op->st, q->max, 0, key, klen, &v)) <= 0)
		return rc;
	price = get_i64(&v);
	q_key_i64(k, price);
	m = rt_send(op, 2, rt_owner(op, k, 8), sizeof(*m));
	m->wend = ts + 1;
	m->price = price;
	return op->so->value_delete(op->st, q->max, 0, key, klen);
}

struct probe {
	struct rt_op *op;
	int64_t wend;
	int rc;
};

static int probe_bid(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct probe *p = arg;
	struct q7 *q = p->op->priv;
	const struct q7_bid *b;

	if (vlen < sizeof(*b) || vlen > sizeof(q->scratch))
		return p->rc = SFS_ECORRUPT;
	b = q_aligned(val, vlen, q->scratch);
	if (in_window(b->date_time, p->wend))
		p->rc = emit(p->op, b);
	return p->rc;
}

/* Stage 2: a window's max arrives at its price: remember it, join the
 * bids stored so far. */
static int join_max(struct rt_op *op, const struct q7_max *m)
{
	struct q7 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	struct probe p = { op, m->wend, 0 };
	unsigned char k[8];
	struct sfs_view v;
	size_t n = 0;
	int rc;

	q_key_i64(k, m->price);
	rc = so->value_get(op->st, q->wins, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q7 wins get");
	if (rc)
		n = v.len / sizeof(int64_t);
	if (n + 1 > q->nends) {
		int64_t *e = realloc(q->ends, (n + 1) * 2 * sizeof(*e));

		if (!e)
			return rt_fail(op, -ENOMEM, "q7 wins");
		q->ends = e;
		q->nends = (n + 1) * 2;
	}
	if (n)
		memcpy(q->ends, v.data, n * sizeof(int64_t));
	q->ends[n++] = m->wend;
	if ((rc = so->value_put(op->st, q->wins, 0, k, 8, q->ends, n * sizeof(int64_t))))
		return rt_fail(op, rc, "q7 wins put");
	rc = so->map_iter(op->st, q->bids, 0, k, 8, probe_bid, &p);
	if (rc || (rc = p.rc))
		return rt_fail(op, rc, "q7 bids scan");
	return 0;
}

static int process_q7(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	if (stage == 0)
		return bid(op, rec, len);
	return stage == 1 ? global_max(op, rec) : join_max(op, rec);
}

static int watermark_q7(struct rt_op *op, unsigned stage, int64_t wm)
{
	struct q7 *q = op->priv;
	int rc;

	if (stage == 2)
		return 0;
	q->err = "q7 timers";
	rc = rt_timers_advance(q->tm[stage], wm, stage == 0 ? fire_partial : fire_max, op);
	return rc ? rt_fail(op, rc, q->err) : 0;
}

const struct rt_query rt_q7 = {
	.name = "q7",
	.columns = "auction,bidder,price,datetime,extra",
	.shapes = "map state price -> {event id -> bid}; value state (worker, window) -> partial "
		  "max, window -> max, price -> windows won; timers at window end - 1",
	.stages = 3,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q7),
	.open = open_q7,
	.source = source_q7,
	.process = process_q7,
	.watermark = watermark_q7,
	.close = close_q7,
};
