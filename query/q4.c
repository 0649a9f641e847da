/*
 * q4 — average winning price per category
 *
 *   SELECT Q.category, AVG(Q.final)
 *   FROM (SELECT MAX(B.price) AS final, A.category
 *         FROM auction A, bid B
 *         WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
 *         GROUP BY A.id, A.category) Q
 *   GROUP BY Q.category;
 *
 * Two keyed stages, as Flink plans it.
 *  Stage 0, keyed by auction id: the join keeps both sides (projected to
 *  the columns used, as Flink's planner does) — value state "auction" (id
 *  -> {dateTime, expires, category}), map state "bids" (id -> {event id ->
 *  {price, dateTime}}) — and the MAX per auction in value state "max".  A
 *  new maximum sends {category, old, new} to stage 1 (a retraction and an
 *  insertion: Flink's -U/+U).  Bids wait in a join batch (query/batch.h):
 *  per batch an auction and its maximum are read once for all its bids, and
 *  at most one change per auction goes on.
 *  Stage 1, keyed by category: SUM and COUNT as counters with add merges
 *  (a retraction is a negative delta, never a read), rows emitted once per
 *  barrier for the categories touched (mini-batch), AVG as integer division
 *  (BIGINT AVG).  Result: upserts keyed by category.
 */
#include "query/batch.h"
#include "query/records.h"
#include "runtime/query.h"

struct q4_auction {
	int64_t date_time, expires, category;
};

struct q4_bid {
	int64_t price, date_time;
};

struct q4_max {
	int64_t final, category;
};

struct q4_change {
	int64_t category, old_final, new_final, has_old;
};

struct q4 {
	uint32_t auction, bids, max, sum, count;
	struct q_batch batch;
	int64_t dirty_cat[64];  /* categories touched since the last flush */
	unsigned ndirty;
	struct rt_row row;
};

/* Wire records of stage 0: a tag, then the projected row. */
struct q4_rec {
	uint32_t tag, pad;
	int64_t id;        /* auction id (both kinds) */
	int64_t seq;       /* bid: event id */
	int64_t a, b, c;   /* auction: dateTime, expires, category; bid: price, dateTime */
};

static int open_q4(struct rt_op *op)
{
	struct q4 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q4.auction", SFS_STATE_VALUE, 0, &q->auction)) ||
	    (rc = op->so->reg(op->st, "q4.bids", SFS_STATE_MAP, 0, &q->bids)) ||
	    (rc = op->so->reg(op->st, "q4.max", SFS_STATE_VALUE, 0, &q->max)) ||
	    (rc = op->so->reg(op->st, "q4.sum", SFS_STATE_COUNTER, SFS_MERGE_ADD, &q->sum)) ||
	    (rc = op->so->reg(op->st, "q4.count", SFS_STATE_COUNTER, SFS_MERGE_ADD, &q->count)))
		return rt_fail(op, rc, "register q4 state");
	return q_batch_open(op, &q->batch);
}

static void close_q4(struct rt_op *op)
{
	struct q4 *q = op->priv;

	q_batch_close(&q->batch);
}

static int source_q4(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	struct q4_rec *r;
	int64_t id = e->kind == NX_BID ? e->bid.auction : e->auction.id;

	q_key_i64(k, id);
	r = rt_send(op, 0, rt_owner(op, k, 8), sizeof(*r));
	r->pad = 0;
	r->id = id;
	r->seq = (int64_t)e->seq;
	if (e->kind == NX_BID) {
		r->tag = Q_BID;
		r->a = e->bid.price;
		r->b = e->bid.date_time;
		r->c = 0;
	} else {
		r->tag = Q_AUCTION;
		r->a = e->auction.date_time;
		r->b = e->auction.expires;
		r->c = e->auction.category;
	}
	return 0;
}

static void send_change(struct rt_op *op, int64_t category, const struct q4_max *old,
			int64_t final)
{
	unsigned char k[8];
	struct q4_change *c;

	q_key_i64(k, category);
	c = rt_send(op, 1, rt_owner(op, k, 8), sizeof(*c));
	c->category = category;
	c->has_old = old != NULL;
	c->old_final = old ? old->final : 0;
	c->new_final = final;
}

struct scan {
	const struct q4_auction *a;
	int64_t max;
	int found;
};

static int scan_bid(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct scan *sc = arg;
	struct q4_bid b;

	if (vlen != sizeof(b))
		return 0;
	memcpy(&b, val, sizeof(b));
	if (b.date_time >= sc->a->date_time && b.date_time <= sc->a->expires &&
	    (!sc->found || b.price > sc->max)) {
		sc->max = b.price;
		sc->found = 1;
	}
	return 0;
}

/* Apply the bids of one auction (@one, or a batch's records for the key):
 * the auction and its maximum are read once; one change at most goes on. */
static int apply_bids(struct rt_op *op, const unsigned char *k, const struct q4_rec *one,
		      const struct sfs_jb *jb, struct sfs_jb_iter *it)
{
	const void *first = one, *rec;
	struct q4 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	struct q4_auction a;
	struct q4_max old, m;
	struct sfs_view v;
	int have_a, has_old = 0, changed = 0, rc;

	rc = so->value_get(op->st, q->auction, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q4 auction get");
	have_a = rc == 1 && v.len == sizeof(a);
	if (have_a) {
		memcpy(&a, v.data, sizeof(a));
		rc = so->value_get(op->st, q->max, 0, k, 8, &v);
		if (rc < 0)
			return rt_fail(op, rc, "q4 max get");
		has_old = rc == 1 && v.len == sizeof(old);
		if (has_old)
			memcpy(&old, v.data, sizeof(old));
		m = has_old ? old : (struct q4_max){ INT64_MIN, a.category };
	}
	while (q_batch_next(&first, sizeof(*one), jb, it, &rec, NULL)) {
		const struct q4_rec *r = rec;
		struct q4_bid b;
		unsigned char uk[8];

		b.price = r->a;
		b.date_time = r->b;
		q_key_i64(uk, r->seq);
		if ((rc = so->map_put(op->st, q->bids, 0, k, 8, uk, 8, &b, sizeof(b))))
			return rt_fail(op, rc, "q4 bids put");
		if (have_a && b.date_time >= a.date_time && b.date_time <= a.expires &&
		    b.price > m.final) {
			m.final = b.price;
			changed = 1;
		}
	}
	if (!changed)
		return 0;
	if ((rc = so->value_put(op->st, q->max, 0, k, 8, &m, sizeof(m))))
		return rt_fail(op, rc, "q4 max put");
	send_change(op, m.category, has_old ? &old : NULL, m.final);
	return 0;
}

static int flush_key(void *arg, const struct sfs_jb *jb, struct sfs_jb_iter *it,
		     const void *key, uint32_t klen, uint32_t nrec)
{
	return apply_bids(arg, key, NULL, jb, it);
}

static int join(struct rt_op *op, const struct q4_rec *r)
{
	struct q4 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	struct q4_auction a = { r->a, r->b, r->c };
	struct scan sc = { &a, 0, 0 };
	unsigned char k[8];
	struct q4_max m;
	int rc;

	q_key_i64(k, r->id);
	if (r->tag == Q_BID) {
		rc = q_batch_add(op, &q->batch, k, 8, r, sizeof(*r), flush_key);
		return rc == 1 ? apply_bids(op, k, r, NULL, NULL) : rc;
	}
	if ((rc = so->value_put(op->st, q->auction, 0, k, 8, &a, sizeof(a))))
		return rt_fail(op, rc, "q4 auction put");
	if ((rc = so->map_iter(op->st, q->bids, 0, k, 8, scan_bid, &sc)) < 0)
		return rt_fail(op, rc, "q4 bids scan");
	if (!sc.found)
		return 0;
	/* the auction arrives once: no earlier maximum */
	m.final = sc.max;
	m.category = a.category;
	if ((rc = so->value_put(op->st, q->max, 0, k, 8, &m, sizeof(m))))
		return rt_fail(op, rc, "q4 max put");
	send_change(op, m.category, NULL, m.final);
	return 0;
}

static int average(struct rt_op *op, const struct q4_change *c)
{
	struct q4 *q = op->priv;
	unsigned char k[8];
	int rc;

	q_key_i64(k, c->category);
	rc = op->so->counter_add(op->st, q->sum, 0, k, 8,
				 c->new_final - (c->has_old ? c->old_final : 0));
	if (!rc && !c->has_old)
		rc = op->so->counter_add(op->st, q->count, 0, k, 8, 1);
	if (rc)
		return rt_fail(op, rc, "q4 average add");
	for (unsigned i = 0; i < q->ndirty; i++)
		if (q->dirty_cat[i] == c->category)
			return 0;
	if (q->ndirty == 64)
		return rt_fail(op, SFS_EFULL, "q4: more than 64 categories in one batch");
	q->dirty_cat[q->ndirty++] = c->category;
	return 0;
}

static int process_q4(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	return stage == 0 ? join(op, rec) : average(op, rec);
}

static int flush_q4(struct rt_op *op, unsigned stage)
{
	struct q4 *q = op->priv;

	if (stage == 0)
		return q_batch_flush(op, &q->batch, flush_key);
	for (unsigned i = 0; i < q->ndirty; i++) {
		unsigned char k[8];
		int64_t sum, count;
		int rc;

		q_key_i64(k, q->dirty_cat[i]);
		if ((rc = op->so->counter_get(op->st, q->sum, 0, k, 8, &sum)) < 0 ||
		    (rc = op->so->counter_get(op->st, q->count, 0, k, 8, &count)) < 0)
			return rt_fail(op, rc, "q4 average get");
		if (count == 0) {
			rc = rt_sink_delete(op, k, 8);
		} else {
			rt_row_init(&q->row);
			rt_row_i64(&q->row, q->dirty_cat[i]);
			rt_row_i64(&q->row, sum / count);
			rc = rt_sink_upsert(op, k, 8, q->row.buf, q->row.len);
		}
		if (rc)
			return rt_fail(op, rc, "q4 sink");
	}
	q->ndirty = 0;
	return 0;
}

const struct rt_query rt_q4 = {
	.name = "q4",
	.columns = "id,final",
	.shapes = "join: value state id -> auction, map state id -> {event id -> bid}; value state "
		  "id -> max; counters category -> sum, count",
	.stages = 2,
	.kinds = RT_KIND(NX_BID) | RT_KIND(NX_AUCTION),
	.priv_size = sizeof(struct q4),
	.open = open_q4,
	.source = source_q4,
	.process = process_q4,
	.flush = flush_q4,
	.close = close_q4,
};
