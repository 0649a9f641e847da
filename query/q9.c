/*
 * q9 — winning bids: the highest bid of every auction within its lifetime
 *
 *   SELECT id, itemName, description, initialBid, reserve, dateTime, expires,
 *          seller, category, extra, auction, bidder, price, bid_dateTime, bid_extra
 *   FROM (SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime,
 *                B.extra AS bid_extra,
 *                ROW_NUMBER() OVER (PARTITION BY A.id
 *                                   ORDER BY B.price DESC, B.dateTime ASC) AS rownum
 *         FROM auction A, bid B
 *         WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
 *   WHERE rownum <= 1;
 *
 * Keyed by auction id.  State: the join's two sides as Flink keeps them —
 * value state "auction" (id -> auction row), map state "bids" (id ->
 * {event id -> bid row}) — and the rank's top-1, value state "best" (id ->
 * the winning bid).  Ties: price DESC, dateTime ASC, then the earlier event.
 * Result: upserts keyed by auction id (Flink's retracting top-1 emits
 * -U/+U when the winner changes).  Bids wait in a join batch (query/batch.h):
 * per batch an auction, its winner and its result row are read and written
 * once for all its bids.
 */
#include "query/batch.h"
#include "query/records.h"
#include "runtime/query.h"

struct q9 {
	uint32_t auction, bids, best;
	struct q_batch batch;
	struct rt_row row;
	uint64_t abuf[SFS_ROW_SCRATCH];   /* the auction, copied out of state */
	uint64_t bbuf[SFS_ROW_SCRATCH];   /* the best bid of a scan */
};

static int open_q9(struct rt_op *op)
{
	struct q9 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q9.auction", SFS_STATE_VALUE, 0, &q->auction)) ||
	    (rc = op->so->reg(op->st, "q9.bids", SFS_STATE_MAP, 0, &q->bids)) ||
	    (rc = op->so->reg(op->st, "q9.best", SFS_STATE_VALUE, 0, &q->best)))
		return rt_fail(op, rc, "register q9 state");
	return q_batch_open(op, &q->batch);
}

static void close_q9(struct rt_op *op)
{
	struct q9 *q = op->priv;

	q_batch_close(&q->batch);
}

static int source_q9(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];

	if (e->kind == NX_BID) {
		q_key_i64(k, e->bid.auction);
		q_bid_encode(rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)q_bid_size(e)), e);
	} else {
		q_key_i64(k, e->auction.id);
		q_auction_encode(rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)q_auction_size(e)),
				 e);
	}
	return 0;
}

static int in_range(const struct q_auction *a, const struct q_bid *b)
{
	return b->date_time >= a->date_time && b->date_time <= a->expires;
}

/* Does @b beat @old?  price DESC, dateTime ASC, event id ASC. */
static int beats(const struct q_bid *b, const struct q_bid *old)
{
	if (b->price != old->price)
		return b->price > old->price;
	if (b->date_time != old->date_time)
		return b->date_time < old->date_time;
	return b->seq < old->seq;
}

static int win(struct rt_op *op, const struct q_auction *a, const struct q_bid *b)
{
	struct q9 *q = op->priv;
	struct rt_row *w = &q->row;
	unsigned char k[8];
	int rc;

	q_key_i64(k, a->id);
	rc = op->so->value_put(op->st, q->best, 0, k, 8, b, q_bid_len(b));
	if (rc)
		return rt_fail(op, rc, "q9 best put");
	if (!rt_sink_wanted(op))
		return rt_sink_upsert(op, k, 8, NULL, 0);
	rt_row_init(w);
	q_row_auction(w, a);
	rt_row_i64(w, b->auction);
	rt_row_i64(w, b->bidder);
	rt_row_i64(w, b->price);
	rt_row_i64(w, b->date_time);
	rt_row_str(w, q_bid_extra(b), b->extra_len);
	return rt_sink_upsert(op, k, 8, w->buf, w->len);
}

struct scan {
	const struct q_auction *a;
	struct q_bid *best;  /* into q->bbuf */
	int found;
};

static int scan_bid(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct scan *sc = arg;
	uint64_t tmp[SFS_ROW_SCRATCH];
	const struct q_bid *b = q_aligned(val, vlen, tmp);

	if (in_range(sc->a, b) && (!sc->found || beats(b, sc->best))) {
		memcpy(sc->best, b, vlen);
		sc->found = 1;
	}
	return 0;
}

/* Apply the bids of one auction (@one, or a batch's records for the key):
 * the auction and its winner are read once, the winner written once. */
static int apply_bids(struct rt_op *op, const unsigned char *k, const struct q_bid *one,
		      const struct sfs_jb *jb, struct sfs_jb_iter *it)
{
	const void *first = one, *rec;
	uint32_t len;
	struct q9 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	const struct q_auction *a = NULL;
	struct q_bid *best = (struct q_bid *)q->bbuf;
	int have_best = 0, changed = 0, rc;
	struct sfs_view v;

	rc = so->value_get(op->st, q->auction, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q9 auction get");
	if (rc == 1) {
		memcpy(q->abuf, v.data, v.len);	/* the puts below may move it */
		a = (const struct q_auction *)q->abuf;
		rc = so->value_get(op->st, q->best, 0, k, 8, &v);
		if (rc < 0)
			return rt_fail(op, rc, "q9 best get");
		if (rc == 1) {
			memcpy(best, v.data, v.len);
			have_best = 1;
		}
	}
	while (q_batch_next(&first, one ? (uint32_t)q_bid_len(one) : 0, jb, it, &rec, &len)) {
		const struct q_bid *b = rec;
		unsigned char uk[8];

		q_key_i64(uk, b->seq);
		if ((rc = so->map_put(op->st, q->bids, 0, k, 8, uk, 8, b, len)))
			return rt_fail(op, rc, "q9 bids put");
		if (a && in_range(a, b) && (!have_best || beats(b, best))) {
			memcpy(best, b, len);
			have_best = changed = 1;
		}
	}
	return changed ? win(op, a, best) : 0;
}

static int flush_key(void *arg, const struct sfs_jb *jb, struct sfs_jb_iter *it,
		     const void *key, uint32_t klen, uint32_t nrec)
{
	return apply_bids(arg, key, NULL, jb, it);
}

static int process_q9(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q9 *q = op->priv;
	unsigned char k[8];
	int rc;

	if (*(const uint32_t *)rec == Q_BID) {
		const struct q_bid *b = rec;

		q_key_i64(k, b->auction);
		rc = q_batch_add(op, &q->batch, k, 8, b, len, flush_key);
		return rc == 1 ? apply_bids(op, k, b, NULL, NULL) : rc;
	} else {
		const struct q_auction *a = rec;
		struct scan sc = { a, (struct q_bid *)q->bbuf, 0 };

		q_key_i64(k, a->id);
		rc = op->so->value_put(op->st, q->auction, 0, k, 8, a, len);
		if (rc)
			return rt_fail(op, rc, "q9 auction put");
		rc = op->so->map_iter(op->st, q->bids, 0, k, 8, scan_bid, &sc);
		if (rc < 0)
			return rt_fail(op, rc, "q9 bids scan");
		return sc.found ? win(op, a, sc.best) : 0;
	}
}

static int flush_q9(struct rt_op *op, unsigned stage)
{
	struct q9 *q = op->priv;

	return q_batch_flush(op, &q->batch, flush_key);
}

const struct rt_query rt_q9 = {
	.name = "q9",
	.columns = "id,itemname,description,initialbid,reserve,datetime,expires,seller,category,"
		   "extra,auction,bidder,price,bid_datetime,bid_extra",
	.shapes = "join: value state id -> auction, map state id -> {event id -> bid}; top-1: "
		  "value state id -> winning bid",
	.stages = 1,
	.kinds = RT_KIND(NX_BID) | RT_KIND(NX_AUCTION),
	.priv_size = sizeof(struct q9),
	.open = open_q9,
	.source = source_q9,
	.process = process_q9,
	.flush = flush_q9,
	.close = close_q9,
};
