/*
 * q17 — auction statistics per day
 *
 *   SELECT auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
 *          count(*) AS total_bids,
 *          count(*) FILTER (WHERE price < 10000) AS rank1_bids,
 *          count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
 *          count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
 *          min(price) AS min_price, max(price) AS max_price,
 *          avg(price) AS avg_price, sum(price) AS sum_price
 *   FROM bid GROUP BY auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd');
 *
 * State: counters keyed by (auction, day) — count, three bucket counts and
 * the sum (add merges), min and max (min/max merges).  Every bid is six
 * blind merges and no read: merge-friendly.  Like Flink's mini-batch
 * aggregation, the result row of a key is emitted once per batch — here the
 * keys touched since the last barrier (a process-local dirty set), read back
 * at the barrier's alignment and at end of input, BATCH keys at a time, one
 * batched read per counter (rt_counter_multiget).  Result: upserts keyed by
 * (auction, day); avg is integer division (BIGINT AVG).
 */
#include <stdlib.h>

#include "query/records.h"
#include "runtime/query.h"

enum { C_COUNT, C_RANK1, C_RANK2, C_RANK3, C_MIN, C_MAX, C_SUM, C_N };

static const struct {
	const char *name;
	unsigned merge;
} counters[C_N] = {
	{ "q17.count", SFS_MERGE_ADD }, { "q17.rank1", SFS_MERGE_ADD },
	{ "q17.rank2", SFS_MERGE_ADD }, { "q17.rank3", SFS_MERGE_ADD },
	{ "q17.min", SFS_MERGE_MIN },   { "q17.max", SFS_MERGE_MAX },
	{ "q17.sum", SFS_MERGE_ADD },
};

#define BATCH 256u

struct q17 {
	uint32_t st[C_N];
	/* dirty keys since the last flush: open addressing over 16-byte keys */
	unsigned char (*dirty)[16];
	size_t dcap, dused;
	struct rt_row row;
	int64_t val[C_N][BATCH];    /* emit's reads of a batch, per counter */
};

struct q17_rec {
	int64_t auction, day, price;
};

static int open_q17(struct rt_op *op)
{
	struct q17 *q = op->priv;

	for (int i = 0; i < C_N; i++) {
		int rc = op->so->reg(op->st, counters[i].name, SFS_STATE_COUNTER, counters[i].merge,
				     &q->st[i]);

		if (rc)
			return rt_fail(op, rc, counters[i].name);
	}
	q->dcap = 4096;
	q->dirty = calloc(q->dcap, 16);
	return q->dirty ? 0 : rt_fail(op, -12, "dirty set");
}

static void close_q17(struct rt_op *op)
{
	struct q17 *q = op->priv;

	free(q->dirty);
}

static int64_t day_of(int64_t ms)
{
	return ms >= 0 ? ms / 86400000 : (ms - 86399999) / 86400000;
}

static void key_of(unsigned char *k, int64_t auction, int64_t day)
{
	q_key_i64(k, auction);
	q_key_i64(k + 8, day);
}

static int source_q17(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[16];
	struct q17_rec *r;
	int64_t day = day_of(e->bid.date_time);

	key_of(k, e->bid.auction, day);
	r = rt_send(op, 0, rt_owner(op, k, sizeof(k)), sizeof(*r));
	r->auction = e->bid.auction;
	r->day = day;
	r->price = e->bid.price;
	return 0;
}

static const unsigned char zero16[16];

static int mark_dirty(struct q17 *q, const unsigned char *k)
{
	size_t i;

	if ((q->dused + 1) * 2 > q->dcap) {
		size_t ncap = q->dcap * 2;
		unsigned char (*nd)[16] = calloc(ncap, 16);

		if (!nd)
			return -12;
		for (size_t j = 0; j < q->dcap; j++) {
			if (!memcmp(q->dirty[j], zero16, 16))
				continue;
			for (i = sfs_hash_bytes(SFS_HASH_P0, q->dirty[j], 16) & (ncap - 1);
			     memcmp(nd[i], zero16, 16); i = (i + 1) & (ncap - 1))
				;
			memcpy(nd[i], q->dirty[j], 16);
		}
		free(q->dirty);
		q->dirty = nd;
		q->dcap = ncap;
	}
	for (i = sfs_hash_bytes(SFS_HASH_P0, k, 16) & (q->dcap - 1);; i = (i + 1) & (q->dcap - 1)) {
		if (!memcmp(q->dirty[i], k, 16))
			return 0;
		if (!memcmp(q->dirty[i], zero16, 16)) {
			memcpy(q->dirty[i], k, 16);
			q->dused++;
			return 0;
		}
	}
}

static int process_q17(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q17 *q = op->priv;
	const struct q17_rec *r = rec;
	const struct rt_backend_ops *so = op->so;
	unsigned char k[16];
	int rank = r->price < 10000 ? C_RANK1 : r->price < 1000000 ? C_RANK2 : C_RANK3;
	int rc;

	key_of(k, r->auction, r->day);
	if ((rc = so->counter_add(op->st, q->st[C_COUNT], 0, k, 16, 1)) ||
	    (rc = so->counter_add(op->st, q->st[rank], 0, k, 16, 1)) ||
	    (rc = so->counter_add(op->st, q->st[C_MIN], 0, k, 16, r->price)) ||
	    (rc = so->counter_add(op->st, q->st[C_MAX], 0, k, 16, r->price)) ||
	    (rc = so->counter_add(op->st, q->st[C_SUM], 0, k, 16, r->price)))
		return rt_fail(op, rc, "q17 counter add");
	/* auction ids start at 1000: an all-zero key never occurs */
	return mark_dirty(q, k) ? rt_fail(op, -12, "q17 dirty set") : 0;
}

static int emit(struct rt_op *op, unsigned char (*keys)[16], unsigned n)
{
	struct q17 *q = op->priv;
	int64_t (*val)[BATCH] = q->val;
	struct sfs_key ks[BATCH];
	int res[BATCH];

	/* each counter's reads of the batch in one call: the store is asked
	 * for the batch at once, not key after key */
	for (unsigned i = 0; i < n; i++)
		ks[i] = (struct sfs_key){ .ns = 0, .key = keys[i], .klen = 16 };
	for (int c = 0; c < C_N; c++) {
		int rc = rt_counter_multiget(op->so, op->st, q->st[c], ks, n, val[c], res);

		if (rc < 0)
			return rt_fail(op, rc, "q17 counter get");
	}
	for (unsigned i = 0; i < n; i++) {
		struct rt_row *w = &q->row;
		int64_t auction = 0, day = 0, count = val[C_COUNT][i], sum = val[C_SUM][i];

		for (int b = 0; b < 8; b++) {
			auction = auction << 8 | keys[i][b];
			day = day << 8 | keys[i][8 + b];
		}
		rt_row_init(w);
		rt_row_i64(w, auction);
		rt_row_day(w, day * 86400000);
		rt_row_i64(w, count);
		rt_row_i64(w, val[C_RANK1][i]);
		rt_row_i64(w, val[C_RANK2][i]);
		rt_row_i64(w, val[C_RANK3][i]);
		rt_row_i64(w, val[C_MIN][i]);
		rt_row_i64(w, val[C_MAX][i]);
		rt_row_i64(w, count ? sum / count : 0);
		rt_row_i64(w, sum);
		if (rt_sink_upsert(op, keys[i], 16, w->buf, w->len))
			return rt_fail(op, -12, "q17 sink");
	}
	return 0;
}

/* Emit every dirty key's row (reads batched per counter), then forget them. */
static int flush_q17(struct rt_op *op, unsigned stage)
{
	struct q17 *q = op->priv;
	unsigned char keys[BATCH][16];
	unsigned n = 0;
	int rc;

	for (size_t i = 0; i < q->dcap; i++) {
		if (!memcmp(q->dirty[i], zero16, 16))
			continue;
		memcpy(keys[n++], q->dirty[i], 16);
		memset(q->dirty[i], 0, 16);
		if (n == BATCH) {
			if ((rc = emit(op, keys, n)))
				return rc;
			op->so->quiescent(op->st);
			rt_beat(op);
			n = 0;
		}
	}
	q->dused = 0;
	return n ? emit(op, keys, n) : 0;
}

const struct rt_query rt_q17 = {
	.name = "q17",
	.columns = "auction,day,total_bids,rank1_bids,rank2_bids,rank3_bids,min_price,"
		   "max_price,avg_price,sum_price",
	.shapes = "7 counters per (auction, day): count, 3 price buckets, sum (add), min, max",
	.stages = 1,
	.kinds = RT_KIND(NX_BID),
	.priv_size = sizeof(struct q17),
	.open = open_q17,
	.source = source_q17,
	.process = process_q17,
	.flush = flush_q17,
	.close = close_q17,
};
