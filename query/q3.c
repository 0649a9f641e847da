/*
 * q3 — local item suggestion: who sells in category 10 from OR, ID or CA
 *
 *   SELECT P.name, P.city, P.state, A.id
 *   FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
 *   WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
 *
 * A regular join keyed by person id (the auction's seller); both filters run
 * before the exchange, as Flink's planner pushes them.  State: value state
 * "person" (id -> name, city, state; the id is unique) and map state
 * "auctions" (seller -> {auction id -> nothing}) for auctions that came
 * before their seller.  Auctions, the larger side, wait in a join batch
 * (query/batch.h): per batch a seller is read once for all its auctions.
 * Result: a multiset of rows, insert only.
 */
#include "query/batch.h"
#include "query/records.h"
#include "runtime/query.h"

struct q3_rec {
	uint32_t tag;          /* Q_PERSON or Q_AUCTION */
	uint16_t name_len, city_len;
	uint16_t state_len, pad[3];
	int64_t id;            /* person id, or the auction's seller */
	int64_t auction;       /* auction id */
	char s[];              /* person: name | city | state */
};

struct q3 {
	uint32_t person, auctions;
	struct q_batch batch;
	struct rt_row row;
	uint64_t scratch[SFS_ROW_SCRATCH];
};

static int open_q3(struct rt_op *op)
{
	struct q3 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q3.person", SFS_STATE_VALUE, 0, &q->person)) ||
	    (rc = op->so->reg(op->st, "q3.auctions", SFS_STATE_MAP, 0, &q->auctions)))
		return rt_fail(op, rc, "register q3 state");
	return q_batch_open(op, &q->batch);
}

static void close_q3(struct rt_op *op)
{
	struct q3 *q = op->priv;

	q_batch_close(&q->batch);
}

static int wanted_state(const char *s, size_t n)
{
	return n == 2 && ((s[0] == 'O' && s[1] == 'R') || (s[0] == 'I' && s[1] == 'D') ||
			  (s[0] == 'C' && s[1] == 'A'));
}

static int source_q3(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	struct q3_rec *r;

	if (e->kind == NX_PERSON) {
		const struct nx_person *p = &e->person;
		size_t len = sizeof(*r) + p->name_len + p->city_len + p->state_len;

		if (!wanted_state(p->state, p->state_len))
			return 0;
		q_key_i64(k, p->id);
		r = rt_send(op, 0, rt_owner(op, k, 8), (uint32_t)len);
		memset(r, 0, sizeof(*r));
		r->tag = Q_PERSON;
		r->name_len = p->name_len;
		r->city_len = p->city_len;
		r->state_len = p->state_len;
		r->id = p->id;
		memcpy(r->s, p->name, p->name_len);
		memcpy(r->s + p->name_len, p->city, p->city_len);
		memcpy(r->s + p->name_len + p->city_len, p->state, p->state_len);
	} else if (e->kind == NX_AUCTION && e->auction.category == 10) {
		q_key_i64(k, e->auction.seller);
		r = rt_send(op, 0, rt_owner(op, k, 8), sizeof(*r));
		memset(r, 0, sizeof(*r));
		r->tag = Q_AUCTION;
		r->id = e->auction.seller;
		r->auction = e->auction.id;
	}
	return 0;
}

static int emit(struct rt_op *op, const struct q3_rec *p, int64_t auction)
{
	struct q3 *q = op->priv;
	struct rt_row *w = &q->row;

	if (!rt_sink_wanted(op))
		return rt_sink_insert(op, NULL, 0);
	rt_row_init(w);
	rt_row_str(w, p->s, p->name_len);
	rt_row_str(w, p->s + p->name_len, p->city_len);
	rt_row_str(w, p->s + p->name_len + p->city_len, p->state_len);
	rt_row_i64(w, auction);
	return rt_sink_insert(op, w->buf, w->len);
}

struct scan {
	struct rt_op *op;
	const struct q3_rec *p;
	int rc;
};

static int scan_auction(void *arg, const void *ukey, uint32_t ulen, const void *val,
			uint32_t vlen)
{
	struct scan *sc = arg;
	int64_t id = 0;

	for (uint32_t i = 0; i < ulen && i < 8; i++)
		id = id << 8 | ((const unsigned char *)ukey)[i];
	sc->rc = emit(sc->op, sc->p, id);
	return sc->rc;
}

/* Apply the auctions of one seller (@one, or a batch's records for the
 * key): the seller is read once for all of them. */
static int apply_auctions(struct rt_op *op, const unsigned char *k, const struct q3_rec *one,
			  const struct sfs_jb *jb, struct sfs_jb_iter *it)
{
	const void *first = one, *rec;
	struct q3 *q = op->priv;
	const struct q3_rec *p = NULL;
	struct sfs_view v;
	int rc;

	rc = op->so->value_get(op->st, q->person, 0, k, 8, &v);
	if (rc < 0)
		return rt_fail(op, rc, "q3 person get");
	if (rc == 1) {
		memcpy(q->scratch, v.data, v.len);	/* the puts below may move it */
		p = (const struct q3_rec *)q->scratch;
	}
	while (q_batch_next(&first, 0, jb, it, &rec, NULL)) {
		const struct q3_rec *r = rec;
		unsigned char uk[8];

		q_key_i64(uk, r->auction);
		rc = op->so->map_put(op->st, q->auctions, 0, k, 8, uk, 8, "", 0);
		if (rc)
			return rt_fail(op, rc, "q3 auctions put");
		if (p && (rc = emit(op, p, r->auction)))
			return rc;
	}
	return 0;
}

static int flush_key(void *arg, const struct sfs_jb *jb, struct sfs_jb_iter *it,
		     const void *key, uint32_t klen, uint32_t nrec)
{
	return apply_auctions(arg, key, NULL, jb, it);
}

static int process_q3(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q3 *q = op->priv;
	const struct q3_rec *r = rec;
	unsigned char k[8];
	int rc;

	q_key_i64(k, r->id);
	if (r->tag == Q_AUCTION) {
		rc = q_batch_add(op, &q->batch, k, 8, r, len, flush_key);
		return rc == 1 ? apply_auctions(op, k, r, NULL, NULL) : rc;
	} else {
		struct scan sc = { op, r, 0 };

		rc = op->so->value_put(op->st, q->person, 0, k, 8, r, len);
		if (rc)
			return rt_fail(op, rc, "q3 person put");
		rc = op->so->map_iter(op->st, q->auctions, 0, k, 8, scan_auction, &sc);
		if (rc < 0 && !sc.rc)
			return rt_fail(op, rc, "q3 auctions scan");
		return sc.rc;
	}
}

static int flush_q3(struct rt_op *op, unsigned stage)
{
	struct q3 *q = op->priv;

	return q_batch_flush(op, &q->batch, flush_key);
}

const struct rt_query rt_q3 = {
	.name = "q3",
	.columns = "name,city,state,id",
	.shapes = "join: value state person id -> person (OR/ID/CA), map state seller -> "
		  "{auction id} (category 10)",
	.stages = 1,
	.kinds = RT_KIND(NX_PERSON) | RT_KIND(NX_AUCTION),
	.priv_size = sizeof(struct q3),
	.open = open_q3,
	.source = source_q3,
	.process = process_q3,
	.flush = flush_q3,
	.close = close_q3,
};
