/*
 * q19 — the ten highest bids of every auction
 *
 *   SELECT * FROM
 *     (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC)
 *             AS rank_number FROM bid)
 *   WHERE rank_number <= 10;
 *
 * Flink's append-only Top-N, keyed by auction.  State: value state "top"
 * (auction -> its current top 10, sorted: price DESC, then the earlier
 * event, as Flink's buffer keeps equal sort keys in arrival order).  One
 * value instead of Flink's map of sort key -> rows: a bid that does not
 * enter the top 10 costs one read and no write, one that does rewrites at
 * most ten rows.  Result: upserts keyed by (auction, rank_number); a new
 * entry re-emits every rank it shifts, as Flink's -U/+U pairs do.
 */
#include "query/records.h"
#include "runtime/query.h"

#define TOP_N 10

struct q19 {
	uint32_t top;
	struct rt_row row;
	uint64_t cur[4 * SFS_ROW_SCRATCH];  /* the current list, copied out of state */
	uint64_t next[4 * SFS_ROW_SCRATCH]; /* the new list */
};

/* A list: u32 count, u32 pad, then per entry u32 len, u32 pad, the q_bid
 * padded to 8. */
struct top_ent {
	uint32_t len, pad;
	struct q_bid bid;
};

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static unsigned char *append(unsigned char *out, const struct q_bid *src)
{
	struct top_ent *t = (struct top_ent *)out;

	t->len = (uint32_t)q_bid_len(src);
	t->pad = 0;
	memcpy(&t->bid, src, t->len);
	return out + 8 + pad8(t->len);
}

static int open_q19(struct rt_op *op)
{
	struct q19 *q = op->priv;
	int rc = op->so->reg(op->st, "q19.top", SFS_STATE_VALUE, 0, &q->top);

	return rc ? rt_fail(op, rc, "register q19.top") : 0;
}

static int source_q19(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];

	q_key_i64(k, e->bid.auction);
	q_bid_encode(rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)q_bid_size(e)), e);
	return 0;
}

/* Does @b rank before @e?  price DESC, then the earlier event. */
static int before(const struct q_bid *b, const struct q_bid *e)
{
	return b->price > e->price || (b->price == e->price && b->seq < e->seq);
}

static int emit(struct rt_op *op, const struct q_bid *b, int64_t rank)
{
	struct q19 *q = op->priv;
	struct rt_row *w = &q->row;
	unsigned char k[16];

	q_key_i64(k, b->auction);
	q_key_i64(k + 8, rank);
	if (!rt_sink_wanted(op))
		return rt_sink_upsert(op, k, 16, NULL, 0);
	rt_row_init(w);
	q_row_bid(w, b);
	rt_row_i64(w, rank);
	return rt_sink_upsert(op, k, 16, w->buf, w->len);
}

static int process_q19(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q19 *q = op->priv;
	const struct q_bid *b = rec;
	const struct top_ent *ents[TOP_N];
	unsigned char k[8];
	struct sfs_view v;
	uint32_t n = 0, pos, m;
	unsigned char *out;
	int rc;

	q_key_i64(k, b->auction);
	rc = op->so->value_get(op->st, q->top, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q19 top get");
	if (rc == 1) {
		const unsigned char *p;

		if (v.len > sizeof(q->cur))
			return rt_fail(op, SFS_ECORRUPT, "q19 top: oversized list");
		memcpy(q->cur, v.data, v.len);
		n = *(const uint32_t *)q->cur;
		p = (const unsigned char *)q->cur + 8;
		for (uint32_t i = 0; i < n && i < TOP_N; i++) {
			ents[i] = (const struct top_ent *)p;
			p += 8 + pad8(ents[i]->len);
		}
	}
	for (pos = 0; pos < n && !before(b, &ents[pos]->bid); pos++)
		;
	if (pos >= TOP_N)
		return 0;
	/* the new list: [0, pos) | b | [pos, n), cut at TOP_N */
	out = (unsigned char *)q->next + 8;
	m = 0;
	for (uint32_t i = 0; i <= n && m < TOP_N; i++, m++)
		out = append(out, i < pos ? &ents[i]->bid : i == pos ? b : &ents[i - 1]->bid);
	*(uint32_t *)q->next = m;
	((uint32_t *)q->next)[1] = 0;
	rc = op->so->value_put(op->st, q->top, 0, k, 8, q->next,
			       (size_t)(out - (unsigned char *)q->next));
	if (rc)
		return rt_fail(op, rc, "q19 top put");
	/* ranks pos+1 .. count moved: re-emit them from the new list */
	{
		const unsigned char *p = (const unsigned char *)q->next + 8;
		uint32_t cnt = *(const uint32_t *)q->next;

		for (uint32_t i = 0; i < cnt; i++) {
			const struct top_ent *t = (const struct top_ent *)p;

			if (i >= pos && (rc = emit(op, &t->bid, i + 1)))
				return rt_fail(op, rc, "q19 sink");
			p += 8 + pad8(t->len);
		}
	}
	return 0;
}

const struct rt_query rt_q19 = {
	.name = "q19",
	.columns = "auction,bidder,price,channel,url,datetime,extra,rank_number",
	.shapes = "value state per auction: its top 10 bids, sorted",
	.stages = 1,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q19),
	.open = open_q19,
	.source = source_q19,
	.process = process_q19,
};
