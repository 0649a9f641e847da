/*
 * q15 — bidding statistics per day, with distinct bidders and auctions
 *
 *   SELECT DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
 *          count(*) AS total_bids,
 *          count(*) FILTER (WHERE price < 10000) AS rank1_bids, ... rank2, rank3,
 *          count(DISTINCT bidder) AS total_bidders,
 *          count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders, ...,
 *          count(DISTINCT auction) AS total_auctions,
 *          count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions, ...
 *   FROM bid GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd');
 *
 * Keyed by day.  State: counter state "q15.count" per day with the column
 * in the namespace (12 counters, add merges); map states "q15.bidders"
 * and "q15.auctions" (day -> {bidder or auction -> a mask of the filters
 * that have counted it}), as Flink keeps a map of distinct value -> count
 * under the grouping key.  Nearly every bid looks up a (day, bidder) and
 * a (day, auction) that are new: miss-heavy.  Rows are emitted per barrier
 * for the days touched (mini-batch), as upserts keyed by day.
 */
#include "query/records.h"
#include "runtime/query.h"

enum { C_BIDS = 0, C_BIDDERS = 4, C_AUCTIONS = 8, C_N = 12 };

struct q15 {
	uint32_t count, bidders, auctions;
	int64_t dirty[16];
	unsigned ndirty;
	struct rt_row row;
};

struct q15_rec {
	int64_t day, bidder, auction, price;
};

static int open_q15(struct rt_op *op)
{
	struct q15 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q15.count", SFS_STATE_COUNTER, SFS_MERGE_ADD, &q->count)) ||
	    (rc = op->so->reg(op->st, "q15.bidders", SFS_STATE_MAP, 0, &q->bidders)) ||
	    (rc = op->so->reg(op->st, "q15.auctions", SFS_STATE_MAP, 0, &q->auctions)))
		return rt_fail(op, rc, "register q15 state");
	return 0;
}

static int64_t day_of(int64_t ms)
{
	return ms >= 0 ? ms / 86400000 : (ms - 86399999) / 86400000;
}

static int source_q15(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	struct q15_rec *r;
	int64_t day = day_of(e->bid.date_time);

	q_key_i64(k, day);
	r = rt_send(op, 0, rt_owner(op, k, 8), sizeof(*r));
	r->day = day;
	r->bidder = e->bid.bidder;
	r->auction = e->bid.auction;
	r->price = e->bid.price;
	return 0;
}

/* Count @id as distinct under the filters in @bits it has not met yet. */
static int distinct(struct rt_op *op, uint32_t st, const unsigned char *dk, int64_t id,
		    unsigned bits, unsigned base)
{
	struct q15 *q = op->priv;
	unsigned char uk[8];
	struct sfs_view v;
	uint8_t mask = 0, fresh;
	int rc;

	q_key_i64(uk, id);
	rc = op->so->map_get(op->st, st, 0, dk, 8, uk, 8, &v);
	if (rc < 0)
		return rc;
	if (rc == 1 && v.len == 1)
		mask = *(const uint8_t *)v.data;
	fresh = (uint8_t)(bits & ~mask);
	if (!fresh)
		return 0;
	mask |= fresh;
	if ((rc = op->so->map_put(op->st, st, 0, dk, 8, uk, 8, &mask, 1)))
		return rc;
	for (unsigned b = 0; b < 4; b++)
		if (fresh >> b & 1 && (rc = op->so->counter_add(op->st, q->count, base + b, dk, 8, 1)))
			return rc;
	return 0;
}

static int process_q15(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q15 *q = op->priv;
	const struct q15_rec *r = rec;
	unsigned rank = r->price < 10000 ? 1 : r->price < 1000000 ? 2 : 3;
	unsigned bits = 1u | 1u << rank;
	unsigned char k[8];
	int rc;

	q_key_i64(k, r->day);
	if ((rc = op->so->counter_add(op->st, q->count, C_BIDS, k, 8, 1)) ||
	    (rc = op->so->counter_add(op->st, q->count, C_BIDS + rank, k, 8, 1)) ||
	    (rc = distinct(op, q->bidders, k, r->bidder, bits, C_BIDDERS)) ||
	    (rc = distinct(op, q->auctions, k, r->auction, bits, C_AUCTIONS)))
		return rt_fail(op, rc, "q15 update");
	for (unsigned i = 0; i < q->ndirty; i++)
		if (q->dirty[i] == r->day)
			return 0;
	if (q->ndirty == 16)
		return rt_fail(op, SFS_EFULL, "q15: more than 16 days in one batch");
	q->dirty[q->ndirty++] = r->day;
	return 0;
}

static int flush_q15(struct rt_op *op, unsigned stage)
{
	struct q15 *q = op->priv;

	for (unsigned i = 0; i < q->ndirty; i++) {
		unsigned char k[8];
		int rc;

		q_key_i64(k, q->dirty[i]);
		rt_row_init(&q->row);
		rt_row_day(&q->row, q->dirty[i] * 86400000);
		for (unsigned c = 0; c < C_N; c++) {
			int64_t v;

			if ((rc = op->so->counter_get(op->st, q->count, c, k, 8, &v)) < 0)
				return rt_fail(op, rc, "q15 counter get");
			rt_row_i64(&q->row, v);
		}
		if ((rc = rt_sink_upsert(op, k, 8, q->row.buf, q->row.len)))
			return rt_fail(op, rc, "q15 sink");
	}
	q->ndirty = 0;
	return 0;
}

const struct rt_query rt_q15 = {
	.name = "q15",
	.columns = "day,total_bids,rank1_bids,rank2_bids,rank3_bids,total_bidders,rank1_bidders,"
		   "rank2_bidders,rank3_bidders,total_auctions,rank1_auctions,rank2_auctions,"
		   "rank3_auctions",
	.shapes = "counters per day (column in the namespace); map states day -> {bidder} and "
		  "day -> {auction} holding a mask of the filters counted (count distinct)",
	.stages = 1,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q15),
	.open = open_q15,
	.source = source_q15,
	.process = process_q15,
	.flush = flush_q15,
};
