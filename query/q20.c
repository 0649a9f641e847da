/*
 * q20 — expand bids with their auction, category 10 only
 *
 *   SELECT auction, bidder, price, channel, url, B.dateTime, B.extra,
 *          itemName, description, initialBid, reserve, A.dateTime, expires,
 *          seller, category, A.extra
 *   FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
 *   WHERE A.category = 10;
 *
 * A regular (unwindowed) join, keyed by auction id; the filter on the
 * auction side runs before the exchange, as Flink's planner pushes it.
 * State: both sides, as Flink's join keeps them — value state "auction"
 * (auction id -> the auction row; the id is unique) and map state "bids"
 * (auction id -> {event id -> bid row}).  A bid probes the auction; an
 * auction scans the bids that waited for it.  Bids, the large side, wait
 * in a join batch (query/batch.h): per batch, each auction's state is read
 * once for all its bids.  The result has no key: rows are inserted into a
 * multiset (append-only: a join of inserts never retracts).
 */
#include "query/batch.h"
#include "query/records.h"
#include "runtime/query.h"

struct q20 {
	uint32_t auction, bids;
	struct q_batch batch;
	struct rt_row row;
	uint64_t abuf[SFS_ROW_SCRATCH];
};

static int open_q20(struct rt_op *op)
{
	struct q20 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q20.auction", SFS_STATE_VALUE, 0, &q->auction)) ||
	    (rc = op->so->reg(op->st, "q20.bids", SFS_STATE_MAP, 0, &q->bids)))
		return rt_fail(op, rc, "register q20 state");
	return q_batch_open(op, &q->batch);
}

static void close_q20(struct rt_op *op)
{
	struct q20 *q = op->priv;

	q_batch_close(&q->batch);
}

static int source_q20(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];

	if (e->kind == NX_BID) {
		q_key_i64(k, e->bid.auction);
		q_bid_encode(rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)q_bid_size(e)), e);
	} else if (e->auction.category == 10) {
		q_key_i64(k, e->auction.id);
		q_auction_encode(rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)q_auction_size(e)),
				 e);
	}
	return 0;
}

static int emit(struct rt_op *op, const struct q_bid *b, const struct q_auction *a)
{
	struct q20 *q = op->priv;
	struct rt_row *w = &q->row;

	if (!rt_sink_wanted(op))
		return rt_sink_insert(op, NULL, 0);
	rt_row_init(w);
	q_row_bid(w, b);
	rt_row_str(w, q_auction_item(a), a->item_len);
	rt_row_str(w, q_auction_desc(a), a->desc_len);
	rt_row_i64(w, a->initial_bid);
	rt_row_i64(w, a->reserve);
	rt_row_i64(w, a->date_time);
	rt_row_i64(w, a->expires);
	rt_row_i64(w, a->seller);
	rt_row_i64(w, a->category);
	rt_row_str(w, q_auction_extra(a), a->extra_len);
	return rt_sink_insert(op, w->buf, w->len);
}

struct scan {
	struct rt_op *op;
	const struct q_auction *a;
	int rc;
};

static int scan_bid(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct scan *sc = arg;
	uint64_t tmp[SFS_ROW_SCRATCH];

	sc->rc = emit(sc->op, q_aligned(val, vlen, tmp), sc->a);
	return sc->rc;
}

static int apply_bid(struct rt_op *op, const unsigned char *k, const struct q_auction *a,
		     const struct q_bid *b, uint32_t len)
{
	struct q20 *q = op->priv;
	unsigned char uk[8];
	int rc;

	q_key_i64(uk, b->seq);
	rc = op->so->map_put(op->st, q->bids, 0, k, 8, uk, 8, b, len);
	if (rc)
		return rt_fail(op, rc, "q20 map put");
	return a ? emit(op, b, a) : 0;
}

/* Apply the bids of one auction (@one, or a batch's records for the key):
 * the auction is read once for all of them. */
static int apply_bids(struct rt_op *op, const unsigned char *k, const struct q_bid *one,
		      const struct sfs_jb *jb, struct sfs_jb_iter *it)
{
	struct q20 *q = op->priv;
	const struct q_auction *a = NULL;
	struct sfs_view v;
	const void *first = one, *rec;
	uint32_t len;
	int rc;

	rc = op->so->value_get(op->st, q->auction, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q20 auction get");
	if (rc == 1) {
		memcpy(q->abuf, v.data, v.len);	/* the puts below may move it */
		a = (const struct q_auction *)q->abuf;
	}
	while (q_batch_next(&first, one ? (uint32_t)q_bid_len(one) : 0, jb, it, &rec, &len))
		if ((rc = apply_bid(op, k, a, rec, len)))
			return rc;
	return 0;
}

static int flush_key(void *arg, const struct sfs_jb *jb, struct sfs_jb_iter *it,
		     const void *key, uint32_t klen, uint32_t nrec)
{
	return apply_bids(arg, key, NULL, jb, it);
}

static int process_q20(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q20 *q = op->priv;
	unsigned char k[8];
	int rc;

	if (*(const uint32_t *)rec == Q_BID) {
		const struct q_bid *b = rec;

		q_key_i64(k, b->auction);
		rc = q_batch_add(op, &q->batch, k, 8, b, len, flush_key);
		return rc == 1 ? apply_bids(op, k, b, NULL, NULL) : rc;
	} else {
		const struct q_auction *a = rec;
		struct scan sc = { op, a, 0 };

		q_key_i64(k, a->id);
		rc = op->so->value_put(op->st, q->auction, 0, k, 8, a, len);
		if (rc)
			return rt_fail(op, rc, "q20 auction put");
		rc = op->so->map_iter(op->st, q->bids, 0, k, 8, scan_bid, &sc);
		if (rc < 0 && !sc.rc)
			return rt_fail(op, rc, "q20 bids scan");
		return sc.rc;
	}
}

static int flush_q20(struct rt_op *op, unsigned stage)
{
	struct q20 *q = op->priv;

	return q_batch_flush(op, &q->batch, flush_key);
}

const struct rt_query rt_q20 = {
	.name = "q20",
	.columns = "auction,bidder,price,channel,url,bid_datetime,bid_extra,itemname,description,"
		   "initialbid,reserve,auction_datetime,expires,seller,category,auction_extra",
	.shapes = "join: value state auction id -> auction (category 10), map state auction id -> "
		  "{event id -> bid}",
	.stages = 1,
	.kinds = RT_KIND(NX_BID) | RT_KIND(NX_AUCTION),
	.priv_size = sizeof(struct q20),
	.open = open_q20,
	.source = source_q20,
	.process = process_q20,
	.flush = flush_q20,
	.close = close_q20,
};
