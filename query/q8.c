/*
 * q8 — monitor new users: persons who created an auction in the same 10 s
 * window they entered the system
 *
 *   SELECT P.id, P.name, P.starttime
 *   FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
 *         FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
 *         GROUP BY id, name, window_start, window_end) P
 *   JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
 *         FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
 *         GROUP BY seller, window_start, window_end) A
 *   ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
 *
 * One stage keyed by person id = seller: a window join.  Each side is a
 * GROUP BY, so a set per window: a person (auction) counts in its window
 * [s, s + 10000) unless late, s + 9999 <= the stage's watermark
 * (tests/nexmark/q8.sql).  When the window fires, the persons of an id that
 * sold something in it are the result rows (id, name, stime = s), inserted
 * (a bag).
 *
 * State, all in namespace s (the window start):
 *   value state "q8.person" id -> the P rows: the set of names, each a u16
 *                           length and its bytes (one, in practice: a
 *                           person id is one event) — not a map: sfs's
 *                           flush loses a key's maps in several namespaces
 *                           (runtime/timers.h);
 *   value state "q8.seller" seller -> 1: the A row, written once per window
 *                           (a get first: hot sellers sell many times);
 *   timers "q8" at s + 9999 keyed by id, registered by either side; the
 *   firing reads both, emits, and deletes both: nothing outlives its window.
 */
#include <errno.h>
#include <stdlib.h>

#include "query/records.h"
#include "runtime/query.h"
#include "runtime/timers.h"

#define SIZE 10000

struct q8_rec {
	uint32_t tag;        /* Q_PERSON or Q_AUCTION */
	uint16_t name_len, pad;
	int64_t id;          /* person id or seller */
	int64_t date_time;
	char name[NX_NAME_CAP];  /* persons only (the record is cut before it) */
};

struct q8 {
	uint32_t person, seller;
	struct rt_timers *tm;
	const char *err;
	unsigned char *names;   /* scratch: a window's set of names */
	size_t cap;
	struct rt_row row;
};

static int open_q8(struct rt_op *op)
{
	struct q8 *q = op->priv;
	int rc;

	if ((rc = op->so->reg(op->st, "q8.person", SFS_STATE_VALUE, 0, &q->person)) ||
	    (rc = op->so->reg(op->st, "q8.seller", SFS_STATE_VALUE, 0, &q->seller)))
		return rt_fail(op, rc, "register q8 state");
	if ((rc = rt_timers_open(op, "q8", &q->tm)))
		return rt_fail(op, rc, "q8 timers");
	return 0;
}

static void close_q8(struct rt_op *op)
{
	struct q8 *q = op->priv;

	rt_timers_close(q->tm);
	free(q->names);
}

static int source_q8(struct rt_op *op, const struct nx_event *e)
{
	unsigned char k[8];
	struct q8_rec *r;
	int64_t id = e->kind == NX_PERSON ? e->person.id : e->auction.seller;
	uint32_t len = e->kind == NX_PERSON ? (uint32_t)(offsetof(struct q8_rec, name) +
							 e->person.name_len)
					    : (uint32_t)offsetof(struct q8_rec, name);

	q_key_i64(k, id);
	r = rt_send(op, 0, rt_owner(op, k, 8), len);
	r->pad = 0;
	r->id = id;
	if (e->kind == NX_PERSON) {
		r->tag = Q_PERSON;
		r->name_len = e->person.name_len;
		r->date_time = e->person.date_time;
		memcpy(r->name, e->person.name, e->person.name_len);
	} else {
		r->tag = Q_AUCTION;
		r->name_len = 0;
		r->date_time = e->auction.date_time;
	}
	return 0;
}

static int64_t window_start(int64_t t)
{
	return t - ((t % SIZE) + SIZE) % SIZE;
}

/* Add r's name to the window's set of names of r->id. */
static int add_name(struct rt_op *op, const unsigned char *k, int64_t s, const struct q8_rec *r)
{
	struct q8 *q = op->priv;
	struct sfs_view v;
	size_t n = 0;
	int rc = op->so->value_get(op->st, q->person, (uint64_t)s, k, 8, &v);

	if (rc < 0)
		return rc;
	if (rc) {
		const unsigned char *p = v.data;

		for (size_t i = 0; i + 2 <= v.len;) {
			size_t len = (size_t)p[i] << 8 | p[i + 1];

			if (len == r->name_len && i + 2 + len <= v.len &&
			    !memcmp(p + i + 2, r->name, len))
				return 0;	/* a set */
			i += 2 + len;
		}
		n = v.len;
	}
	if (n + 2 + r->name_len > q->cap) {
		size_t cap = (n + 2 + r->name_len) * 2;
		unsigned char *b = realloc(q->names, cap);

		if (!b)
			return -ENOMEM;
		q->names = b;
		q->cap = cap;
	}
	if (n)
		memcpy(q->names, v.data, n);
	q->names[n] = (unsigned char)(r->name_len >> 8);
	q->names[n + 1] = (unsigned char)r->name_len;
	memcpy(q->names + n + 2, r->name, r->name_len);
	return op->so->value_put(op->st, q->person, (uint64_t)s, k, 8, q->names,
				 n + 2 + r->name_len);
}

static int process_q8(struct rt_op *op, unsigned stage, const void *rec, uint32_t len)
{
	struct q8 *q = op->priv;
	const struct q8_rec *r = rec;
	const struct rt_backend_ops *so = op->so;
	int64_t s = window_start(r->date_time);
	unsigned char k[8];
	struct sfs_view v;
	int rc;

	if (s + SIZE - 1 <= rt_watermark(op, 0))
		return 0;	/* late: its window has fired */
	q_key_i64(k, r->id);
	if (r->tag == Q_PERSON) {
		if ((rc = add_name(op, k, s, r)))
			return rt_fail(op, rc, "q8 person");
	} else {
		rc = so->value_get(op->st, q->seller, (uint64_t)s, k, 8, &v);
		if (rc == 0)
			rc = so->value_put(op->st, q->seller, (uint64_t)s, k, 8, "", 1);
		if (rc < 0)
			return rt_fail(op, rc, "q8 seller");
	}
	rc = rt_timer_register(q->tm, k, 8, s + SIZE - 1);
	return rc ? rt_fail(op, rc, "q8 timer") : 0;
}

/* Window [ts - 9999, ts + 1) of one id fires: join, then forget it. */
static int fire(void *arg, const void *key, uint32_t klen, int64_t ts)
{
	struct rt_op *op = arg;
	struct q8 *q = op->priv;
	const struct rt_backend_ops *so = op->so;
	int64_t start = ts - (SIZE - 1), id = 0;
	struct sfs_view v;
	int rc, sold;

	for (int b = 0; b < 8; b++)
		id = id << 8 | ((const unsigned char *)key)[b];
	q->err = "q8 seller get";
	if ((sold = so->value_get(op->st, q->seller, (uint64_t)start, key, 8, &v)) < 0)
		return sold;
	q->err = "q8 seller delete";
	if (sold && (rc = so->value_delete(op->st, q->seller, (uint64_t)start, key, 8)))
		return rc;
	q->err = "q8 person get";
	if ((rc = so->value_get(op->st, q->person, (uint64_t)start, key, 8, &v)) <= 0)
		return rc;
	for (size_t i = 0; sold && i + 2 <= v.len;) {
		const unsigned char *p = v.data;
		size_t len = (size_t)p[i] << 8 | p[i + 1];
		struct rt_row *w = &q->row;

		if (i + 2 + len > v.len)
			return SFS_ECORRUPT;
		rt_row_init(w);
		rt_row_i64(w, id);
		rt_row_str(w, (const char *)p + i + 2, len);
		rt_row_i64(w, start);
		q->err = "q8 sink";
		if ((rc = rt_sink_insert(op, w->buf, w->len)))
			return rc;
		i += 2 + len;
	}
	q->err = "q8 person delete";
	return so->value_delete(op->st, q->person, (uint64_t)start, key, 8);
}

static int watermark_q8(struct rt_op *op, unsigned stage, int64_t wm)
{
	struct q8 *q = op->priv;
	int rc;

	q->err = "q8 timers";
	rc = rt_timers_advance(q->tm, wm, fire, op);
	return rc ? rt_fail(op, rc, q->err) : 0;
}

const struct rt_query rt_q8 = {
	.name = "q8",
	.columns = "id,name,stime",
	.shapes = "per (id, 10 s window): value state person -> names, value state seller; "
		  "timers at window end - 1",
	.stages = 1,
	.kinds = RT_KIND(NX_PERSON) | RT_KIND(NX_AUCTION),
	.priv_size = sizeof(struct q8),
	.open = open_q8,
	.source = source_q8,
	.process = process_q8,
	.watermark = watermark_q8,
	.close = close_q8,
};
