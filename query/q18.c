/*
 * q18 — find the last bid of every (bidder, auction): Flink's deduplication
 *
 *   SELECT auction, bidder, price, channel, url, dateTime, extra
 *   FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction
 *                                      ORDER BY dateTime DESC) AS rank_number
 *         FROM bid)
 *   WHERE rank_number <= 1;
 *
 * State: one value state "last" keyed by (bidder, auction) holding the
 * newest bid row (ties on dateTime broken by event id: the later event
 * wins).  Many cold keys and a miss on nearly every first bid: the read of
 * a key that was never written goes through every layer to the store.
 * Result: upserts keyed by (bidder, auction) — Flink emits -U/+U pairs.
 */
#include "query/records.h"
#include "runtime/query.h"

struct q18 {
	uint32_t last;
	struct rt_row row;
	uint64_t scratch[SFS_ROW_SCRATCH];
};

static int open_q18(struct rt_op *op)
{
	struct q18 *q = op->priv;
	int rc = op->so->reg(op->st, "q18.last", SFS_STATE_VALUE, 0, &q->last);

	return rc ? rt_fail(op, rc, "register q18.last") : 0;
}

static void key_of(unsigned char *k, int64_t bidder, int64_t auction)
{
	q_key_i64(k, bidder);
	q_key_i64(k + 8, auction);
}

static int source_q18(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[16];
	size_t len = q_bid_size(e);

	key_of(k, e->bid.bidder, e->bid.auction);
	q_bid_encode(rt_send(op, 0, rt_owner(op, k, sizeof(k)), (uint32_t)len), e);
	return 0;
}

static int process_q18(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q18 *q = op->priv;
	const struct q_bid *b = rec;
	struct sfs_view v;
	unsigned char k[16];
	int rc;

	key_of(k, b->bidder, b->auction);
	rc = op->so->value_get(op->st, q->last, 0, k, sizeof(k), &v);
	if (rc < 0)
		return rt_fail(op, rc, "get q18.last");
	if (rc == 1) {
		const struct q_bid *old = q_aligned(v.data, v.len, q->scratch);

		if (old->date_time > b->date_time ||
		    (old->date_time == b->date_time && old->seq > b->seq))
			return 0;
	}
	rc = op->so->value_put(op->st, q->last, 0, k, sizeof(k), b, len);
	if (rc)
		return rt_fail(op, rc, "put q18.last");
	if (rt_sink_wanted(op)) {
		struct rt_row *w = &q->row;

		rt_row_init(w);
		q_row_bid(w, b);
		return rt_sink_upsert(op, k, sizeof(k), w->buf, w->len);
	}
	return rt_sink_upsert(op, k, sizeof(k), NULL, 0);
}

const struct rt_query rt_q18 = {
	.name = "q18",
	.columns = "auction,bidder,price,channel,url,datetime,extra",
	.shapes = "value state per (bidder, auction): the newest bid",
	.stages = 1,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q18),
	.open = open_q18,
	.source = source_q18,
	.process = process_q18,
};
