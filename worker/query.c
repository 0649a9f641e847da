/*
 * query.c — queryable state: a process attached with sfs_attach reads a
 * running job's state by state name and key (include/sfs.h, "Queryable
 * state", has the contract; DESIGN.md section 1, `sfs get`).
 *
 * Routing.  A key's key group (common/keygroup.h) names the worker that
 * owns it, over the parallelism and max parallelism every worker region
 * records (wc_parallelism, wc_max_par: worker/wctl.h).  The query maps
 * that worker's region (control block and buffers, sfs_wctl_attach) and
 * opens the flush target's reader for that worker index
 * (worker/target_read.h), once per worker, at the first key routed to it.
 * Every target's reader opens in any process of the node: the memory
 * store is read in place in the segment; the table target maps the files
 * its publication names; the rocksdb target opens a secondary instance in
 * a directory of its own (<instance>.sec/<pid>.<n>, removed at close).
 *
 * What is read, and why not the rest.  The owner writes its ACTIVE buffer
 * with plain stores and no lock (an overwrite appends and swaps a slot,
 * but a counter cell is folded in place and a map head's chain start and
 * a chain node's flags are rewritten in place), and rewrites its value
 * cache in place (a put may move or evict the record a get reads; no
 * seqlock: worker/vcache.h).  Neither is read here.  A SEALED buffer is
 * immutable (worker/wbuf.h, worker/mapstate.c: the in-place words are the
 * active buffer's only), and the flushed store publishes whole records
 * or whole versions.  So a read takes a snapshot of the owner's SEALED
 * buffers (state, seq), newest first, probes them, then the store.
 *
 * The snapshot's seq S is the newest seal the read is as of: the largest
 * seq of a SEALED or RETIRING buffer, or wc_flushed_seq when every buffer
 * has been recycled since.  The store holds every buffer up to the flushed
 * one (a RETIRING buffer's commit is published before its state turns, so
 * it is skipped here like the owner's walk skips it), and may hold part
 * of a SEALED one (the memory target applies records before its commit):
 * those are read from the buffer itself, above the store, and a
 * counter's delta of buffer seq b is folded over a store base only when b
 * is newer than the base's tag — the owner's rule (worker/state.c), so
 * nothing is counted twice or missed.  What the snapshot cannot see is a
 * buffer sealed after it and flushed into the store while the read runs.
 * So after reading, S is taken again: if it moved, the read starts over.
 * That check is sound: a store record of buffer S+1 was written by a
 * compactor that had seen S+1 SEALED (acquire), and this process read the
 * record after it (acquire), so it sees S+1 SEALED or RETIRING at the
 * check — not FREE, since its RETIRING came after this process went
 * online and its grace period waits for this slot.
 *
 * Reclamation.  The caller is online (sfs_online) for the length of the
 * call and until its next quiescent point.  Every reuse of what a read
 * follows waits for a grace period over the process table, and
 * sfs_qsbr_check (shm/qsbr.c) waits for every live online slot but its
 * caller's, client slots included: a RETIRING buffer is freed
 * (compactor/flush.c, release_retired), a half of the memory store reused
 * (store/memory/mstore_compact.c), a table file unlinked (store/table/table_publish.c)
 * and a RocksDB deletion window opened (store/rocksdb/write.c) only
 * after it.  The owner itself never waits for a reader.  One difference
 * from a worker: a query's rocksdb secondary catches up at its next call,
 * not at the caller's quiescent point, so a deletion window may open
 * between the two — the case write.c already covers for a worker that
 * was offline ("File deletion vs secondaries": the secondary keeps the
 * files of the version it installed open, and a catch-up over deleted
 * files reopens it).
 *
 * Cost: no write to shared memory but this process's slot (online,
 * quiescent: the caller's), no lock, no syscall on the memory target.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/keygroup.h"
#include "common/merge.h"
#include "shm/handle.h"
#include "worker/open.h"
#include "worker/state.h"
#include "worker/target_read.h"
#include "worker/wbuf.h"

/* Reads started over because a newer seal reached the store meanwhile. */
#define RETRIES 64

struct qworker {
	int open;                      /* 1: mapped and reader open */
	struct sfs_wctl *ctl;
	struct sfs_wbuf *buf[SFS_WCTL_MAX_BUFS];
	struct sfs_target_reader *tr;
};

/* The SEALED buffers of one worker, newest first, and the seq S they and
 * the store are read as of. */
struct snap {
	unsigned n;
	uint32_t idx[SFS_WCTL_MAX_BUFS];
	uint64_t seq[SFS_WCTL_MAX_BUFS];
	uint64_t s;
};

struct qent {
	const void *k, *v;
	uint32_t kl, vl;
};

struct sfs_query {
	sfs_handle_t *h;
	struct sfs_seg *seg;
	const struct sfs_target_read_ops *tops;
	uint32_t state, kind, op;
	struct sfs_ttl_rule ttl;       /* the state's TTL (common/ttl.h): ttl_ms 0 none */
	uint32_t par, maxp;
	uint64_t seq;                  /* S of the last answer */
	struct qworker *w;             /* [par] */
	struct sfs_seen *seen;         /* map iteration */
	struct qent *ents;             /* map iteration: collected, then delivered */
	size_t nents, cap;
	int err;
	unsigned char *kbuf;           /* kg | state | [klen] | key | ukey */
};

/* The first worker region of the segment: the job's geometry. */
static int geometry(struct sfs_query *q)
{
	const struct sfs_seg_hdr *hdr = q->seg->hdr;

	for (unsigned i = 0; i < SFS_MAX_REGIONS; i++) {
		const struct sfs_region_desc *d = &hdr->sh_regions[i];
		struct sfs_wctl *ctl;
		struct sfs_ring *ring;
		struct sfs_wbuf *bufs[SFS_WCTL_MAX_BUFS];
		unsigned w;
		char tail;

		if (sfs_load_acquire(&d->rd_state) != SFS_REGION_READY ||
		    sscanf(d->rd_name, "worker.%u%c", &w, &tail) != 1)
			continue;
		if (sfs_wctl_attach(q->seg, w, &ctl, &ring, bufs))
			continue;	/* still being laid out */
		q->par = ctl->wc_parallelism;
		q->maxp = ctl->wc_max_par;
		if (q->par == 0 || q->maxp < q->par || q->maxp > 32768)
			return sfs__err(SFS_ECORRUPT, "worker region %s of %s: parallelism %u, max "
					"parallelism %u", d->rd_name, q->seg->path, q->par, q->maxp);
		return 0;
	}
	return sfs__err(-ENOENT, "segment %s holds no worker region: the job has not started "
			"its workers, or its backend keeps no state in shared memory "
			"(rocksdb-direct)", q->seg->path);
}

int sfs__query_open(sfs_handle_t *h, const char *state, sfs_target_read_of_fn *read_of,
		    sfs_query_t **out)
{
	struct sfs_query *q;
	const struct sfs_state_desc *d = NULL;
	int rc;

	sfs__err_clear();
	if (!h || !state || !out)
		return sfs__err(SFS_EUSAGE, "query open: NULL argument");
	if (!h->slot)
		return sfs__err(SFS_EUSAGE, "query open: an observer handle (SFS_ATTACH_OBSERVER) "
				"holds no process-table slot, so nothing it reads would be "
				"protected from reuse: attach without it");
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *e = &h->seg.hdr->sh_states[i];

		if (sfs_load_acquire(&e->sd_state) == SFS_SDESC_READY &&
		    strncmp(e->sd_name, state, SFS_STATE_NAME_MAX) == 0) {
			d = e;
			break;
		}
	}
	if (!d) {
		struct sfs_query probe = { .seg = &h->seg };

		/* No worker region at all says more than "no such state". */
		rc = geometry(&probe);
		return rc ? rc : sfs__err(SFS_EUSAGE, "job %s has no state named '%s'",
					  h->seg.hdr->sh_job, state);
	}
	if (d->sd_kind == SFS_STATE_COUNTER &&
	    (rc = sfs_merge_check(d->sd_merge, d->sd_merge_name, d->sd_name)))
		return rc;
	q = calloc(1, sizeof(*q));
	if (!q)
		return sfs__err(-ENOMEM, "query of state %s: no memory", state);
	q->h = h;
	q->seg = &h->seg;
	q->state = (uint32_t)(d - h->seg.hdr->sh_states);
	q->kind = d->sd_kind;
	q->op = d->sd_merge;
	q->ttl.ttl_ms = sfs_load_relaxed(&d->sd_ttl_ms);
	q->ttl.event_time = !!(sfs_load_relaxed(&d->sd_ttl_flags) & SFS_TTL_EVENT_TIME);
	q->tops = read_of(q->seg);
	if (!q->tops) {
		rc = sfs__err(SFS_EUSAGE, "segment %s: unknown flush target '%.16s'", q->seg->path,
			      q->seg->hdr->sh_backend);
		goto fail;
	}
	if ((rc = geometry(q)))
		goto fail;
	q->w = calloc(q->par, sizeof(*q->w));
	q->kbuf = malloc(SFS_KEY_MAX + 8);
	if (!q->w || !q->kbuf) {
		rc = -ENOMEM;
		goto fail;
	}
	*out = q;
	return 0;
fail:
	free(q->w);
	free(q->kbuf);
	free(q);
	return rc;
}

int sfs_query_kind(const sfs_query_t *q)
{
	return (int)q->kind;
}

uint64_t sfs_query_seq(const sfs_query_t *q)
{
	return q->seq;
}

int sfs_query_close(sfs_query_t *q)
{
	sfs__err_clear();
	if (!q)
		return sfs__err(SFS_EUSAGE, "sfs_query_close: NULL query");
	for (uint32_t i = 0; i < q->par; i++)
		if (q->w[i].open)
			q->tops->reader_close(q->w[i].tr);
	sfs__seen_free(&q->seen);
	free(q->ents);
	free(q->w);
	free(q->kbuf);
	free(q);
	return 0;
}

/* The checks every read starts with: kind, online, key length (+@extra). */
static int ready(struct sfs_query *q, uint32_t kind, size_t klen, size_t extra, const char *op)
{
	if (q->kind != kind)
		return sfs__err(SFS_EUSAGE, "%s: state '%s' is of another kind (%u)", op,
				q->seg->hdr->sh_states[q->state].sd_name, q->kind);
	if (sfs_load_relaxed(&q->h->slot->ps_qsbr) == 0)
		return sfs__err(SFS_EUSAGE, "%s: call sfs_online() first (an offline reader's "
				"views are not protected from reuse)", op);
	if (klen + extra > SFS_KEY_MAX)
		return sfs__err(SFS_EUSAGE, "%s: key of %zu bytes, at most %u", op, klen + extra,
				SFS_KEY_MAX);
	return 0;
}

/* The owner of key group @kg, its region mapped and its store reader open. */
static int route(struct sfs_query *q, uint32_t kg, struct qworker **out)
{
	uint32_t wi = sfs_kg_owner(kg, q->par, q->maxp);
	struct qworker *w = &q->w[wi];
	struct sfs_ring *ring;
	int rc;

	if (!w->open) {
		rc = sfs_wctl_attach(q->seg, wi, &w->ctl, &ring, w->buf);
		if (rc == -ENOENT)
			return sfs__err(-EXDEV, "worker %u (key group %u) has no region in segment "
					"%s (node %d): attach to its node's segment", wi, kg,
					q->seg->path, q->seg->node);
		if (rc)
			return rc;
		if (kg < w->ctl->wc_kg_start || kg > w->ctl->wc_kg_end)
			return sfs__err(SFS_ECORRUPT, "worker %u owns key groups %u..%u, not %u (a "
					"parallelism of %u, max %u)", wi, w->ctl->wc_kg_start,
					w->ctl->wc_kg_end, kg, q->par, q->maxp);
		rc = q->tops->reader_open(q->seg, wi, &w->tr);
		if (rc)
			return rc;
		w->open = 1;
	}
	/* Values of the previous call are dropped here (table, rocksdb: the
	 * reader's arena), which is why a view lives until the next call. */
	(void)q->tops->catch_up(w->tr);
	*out = w;
	return 0;
}

/* Buffer @i's state and, when SEALED or RETIRING, the seq it was sealed
 * as: the state is loaded again after the seq, so a buffer recycled and
 * sealed anew between the two loads (possible for one that was RETIRING
 * before this process went online) is not taken with the new seq. */
static uint32_t buf_state(const struct sfs_wctl *ctl, uint32_t i, uint64_t *seq)
{
	for (;;) {
		uint32_t st = sfs_load_acquire(&ctl->wc_buf[i].cb_state);

		if (st != SFS_BUF_SEALED && st != SFS_BUF_RETIRING)
			return st;
		*seq = sfs_load_acquire(&ctl->wc_buf[i].cb_seq);
		if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) == st)
			return st;
	}
}

/* S: the newest seal the owner's buffers and store hold (see the top). */
static uint64_t newest_seal(const struct sfs_wctl *ctl)
{
	uint64_t s = sfs_load_acquire(&ctl->wc_flushed_seq);

	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		uint64_t seq = 0;
		uint32_t st = buf_state(ctl, i, &seq);

		if ((st == SFS_BUF_SEALED || st == SFS_BUF_RETIRING) && seq > s)
			s = seq;
	}
	return s;
}

/* The SEALED buffers, newest first.  Never the ACTIVE one (the owner
 * writes it in place), nor a RETIRING one (in the store already). */
static void snap_take(const struct qworker *w, struct snap *sn)
{
	const struct sfs_wctl *ctl = w->ctl;

	sn->n = 0;
	sn->s = newest_seal(ctl);
	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		unsigned k;
		uint64_t seq = 0;

		if (buf_state(ctl, i, &seq) != SFS_BUF_SEALED)
			continue;
		for (k = sn->n; k > 0 && sn->seq[k - 1] < seq; k--) {
			sn->idx[k] = sn->idx[k - 1];
			sn->seq[k] = sn->seq[k - 1];
		}
		sn->idx[k] = i;
		sn->seq[k] = seq;
		sn->n++;
	}
}

/* The read was as of sn->s if no newer seal appeared meanwhile. */
static int snap_held(struct sfs_query *q, const struct qworker *w, const struct snap *sn)
{
	if (newest_seal(w->ctl) != sn->s)
		return 0;
	q->seq = sn->s;
	return 1;
}

static int changing(const struct sfs_query *q, const char *op)
{
	return sfs__err(SFS_ETIMEDOUT, "%s: state '%s' kept changing: %d reads started over as "
			"newer buffers were sealed", op, q->seg->hdr->sh_states[q->state].sd_name,
			RETRIES);
}

/* kg | state | key into q->kbuf; returns its length, the kg in *@kg. */
static size_t point_key(struct sfs_query *q, const void *key, size_t klen, uint32_t *kg)
{
	*kg = sfs_key_group(key, klen, q->maxp);
	sfs_key_prefix(q->kbuf, *kg, q->state);
	memcpy(q->kbuf + SFS_KEY_PREFIX, key, klen);
	return klen + SFS_KEY_PREFIX;
}

/* What the sealed buffers say of a point key: 1 PUT (view or int64 set),
 * 0 tombstone, -ENOENT undecided (store next), < 0 error.  Counter deltas
 * go to dseq/dval. */
struct pwalk {
	unsigned nd;
	uint64_t dseq[SFS_WCTL_MAX_BUFS];
	int64_t dval[SFS_WCTL_MAX_BUFS];
};

/* The owner's fold (worker/state.c): deltas newer than @tag over @base. */
static int64_t fold(const struct sfs_query *q, const struct pwalk *pw, int have, int64_t base,
		    uint64_t tag)
{
	int64_t acc = base;

	for (unsigned d = 0; d < pw->nd; d++) {
		if (pw->dseq[d] <= tag)
			continue;
		acc = have ? sfs_merge_i64(q->op, acc, pw->dval[d]) : pw->dval[d];
		have = 1;
	}
	return acc;
}

/* One point read of @n key bytes in q->kbuf against snapshot @sn:
 * value state fills @out, counter state @sum. */
static int point_once(struct sfs_query *q, struct qworker *w, const struct snap *sn, size_t n,
		      uint64_t ns, struct sfs_view *out, int64_t *sum)
{
	uint64_t h = sfs_wbuf_hash(ns, q->kbuf, n);
	struct sfs_probe p = { .hash = h, .ns = ns, .key = q->kbuf, .klen = (uint32_t)n };
	struct sfs_probe_result r;
	struct pwalk pw = { 0 };
	int counter = sum != NULL, rc;
	int64_t base = 0;

	out->data = NULL;
	out->len = 0;
	for (unsigned k = 0; k < sn->n; k++) {
		struct sfs_wbuf_view v = { 0 };

		rc = sfs_wbuf_get_h(w->buf[sn->idx[k]], h, ns, q->kbuf, n, &v);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		if (v.kind == SFS_WBUF_MERGE) {
			if (counter && v.len == 8) {
				pw.dseq[pw.nd] = sn->seq[k];
				pw.dval[pw.nd++] = sfs_wbuf_view_i64(&v);
			}
			continue;
		}
		if (v.kind == SFS_WBUF_DELETE) {
			if (counter)
				*sum = pw.nd ? fold(q, &pw, 0, 0, 0) : 0;
			return counter && pw.nd ? 1 : 0;
		}
		if (counter) {	/* PUT: shadows everything older */
			*sum = fold(q, &pw, 1, v.len == 8 ? sfs_wbuf_view_i64(&v) : 0, 0);
			return 1;
		}
		out->data = v.value;
		out->len = v.len;
		return 1;
	}
	rc = q->tops->probe(w->tr, &p, 1, &r);
	if (rc)
		return rc;
	if (!counter) {
		out->data = r.found ? r.value : NULL;
		out->len = r.found ? r.len : 0;
		return r.found;
	}
	if (r.found && r.len == 8)
		memcpy(&base, r.value, 8);
	*sum = r.found ? fold(q, &pw, 1, base, r.tag) : fold(q, &pw, 0, 0, 0);
	return r.found || pw.nd;
}

static int point(struct sfs_query *q, uint64_t ns, const void *key, size_t klen,
		 struct sfs_view *out, int64_t *sum, const char *op)
{
	struct qworker *w;
	struct snap sn;
	uint32_t kg;
	size_t n = point_key(q, key, klen, &kg);
	int rc = route(q, kg, &w);

	if (rc)
		return rc;
	for (int t = 0; t < RETRIES; t++) {
		snap_take(w, &sn);
		rc = point_once(q, w, &sn, n, ns, out, sum);
		if (rc < 0 || snap_held(q, w, &sn))
			return rc;
	}
	return changing(q, op);
}

/*
 * The clock a TTL state's answers are judged by (sfs_ttl_answer,
 * common/ttl.h): the owner's as of its newest seal (the largest a buffer control records),
 * which is what the answer is as of: an entry the owner could still read
 * at S is returned, and one maintenance may have dropped never is.
 */
static uint64_t ttl_clock(const struct sfs_query *q, const struct qworker *w)
{
	uint64_t now = 0;

	for (uint32_t i = 0; i < w->ctl->wc_nbufs; i++) {
		const struct sfs_ttl_clock *c = &w->ctl->wc_buf[i].cb_ttl;
		uint64_t t = q->ttl.event_time ? sfs_load_relaxed(&c->event_ms)
					       : sfs_load_relaxed(&c->proc_ms);

		now = t > now ? t : now;
	}
	return now;
}


/* The worker a point key of q->kbuf routes to (for ttl_clock). */
static const struct qworker *owner_of(const struct sfs_query *q, const void *key, size_t klen)
{
	return &q->w[sfs_kg_owner(sfs_key_group(key, klen, q->maxp), q->par, q->maxp)];
}

int sfs_query_value(sfs_query_t *q, uint64_t ns, const void *key, size_t klen,
		    struct sfs_view *out)
{
	int rc = ready(q, SFS_STATE_VALUE, klen, 0, "query value");

	out->data = NULL;
	out->len = 0;
	if (rc)
		return rc;
	rc = point(q, ns, key, klen, out, NULL, "query value");
	return q->ttl.ttl_ms && rc == 1 ? sfs_ttl_answer(rc, out, ttl_clock(q, owner_of(q, key, klen)))
					: rc;
}

int sfs_query_counter(sfs_query_t *q, uint64_t ns, const void *key, size_t klen, int64_t *out)
{
	struct sfs_view v;
	int rc = ready(q, SFS_STATE_COUNTER, klen, 0, "query counter");

	*out = 0;
	if (rc)
		return rc;
	if (!q->ttl.ttl_ms)
		return point(q, ns, key, klen, &v, out, "query counter");
	/* A TTL counter is a put of [expiry][int64], never a merge. */
	rc = point(q, ns, key, klen, &v, NULL, "query counter");
	rc = rc == 1 ? sfs_ttl_answer(rc, &v, ttl_clock(q, owner_of(q, key, klen))) : rc;
	if (rc == 1 && v.len != 8)
		return sfs__err(SFS_ECORRUPT, "query counter: a value of %u bytes, not 8", v.len);
	if (rc == 1)
		memcpy(out, v.data, 8);
	return rc;
}

/* ---- map state ----------------------------------------------------------- */

/* P = kg | state | klen | key in q->kbuf (the user key, if any, after it);
 * returns P's length. */
static size_t parent_key(struct sfs_query *q, const void *key, size_t klen, const void *ukey,
			 size_t ulen, uint32_t *kg)
{
	*kg = sfs_key_group(key, klen, q->maxp);
	sfs_key_prefix(q->kbuf, *kg, q->state);
	q->kbuf[4] = (unsigned char)(klen >> 8);
	q->kbuf[5] = (unsigned char)klen;
	memcpy(q->kbuf + SFS_MAP_PREFIX, key, klen);
	if (ulen)
		memcpy(q->kbuf + SFS_MAP_PREFIX + klen, ukey, ulen);
	return SFS_MAP_PREFIX + klen;
}

int sfs_query_map_get(sfs_query_t *q, uint64_t ns, const void *key, size_t klen,
		      const void *ukey, size_t ulen, struct sfs_view *out)
{
	int rc = ready(q, SFS_STATE_MAP, klen, ulen + SFS_MAP_PREFIX - SFS_KEY_PREFIX,
		       "query map get");
	struct qworker *w;
	struct snap sn;
	uint32_t kg;
	size_t plen;
	uint64_t hp, he;

	out->data = NULL;
	out->len = 0;
	if (rc)
		return rc;
	if (!ulen)
		return sfs__err(SFS_EUSAGE, "query map get: empty user key");
	plen = parent_key(q, key, klen, ukey, ulen, &kg);
	hp = sfs_wbuf_hash(ns, q->kbuf, plen);
	he = sfs_wbuf_hash(ns, q->kbuf, plen + ulen);
	if ((rc = route(q, kg, &w)))
		return rc;
	for (int t = 0; t < RETRIES; t++) {
		struct sfs_probe parent = { .hash = hp, .ns = ns, .key = q->kbuf,
					    .klen = (uint32_t)plen };
		struct sfs_probe_result r;

		snap_take(w, &sn);
		rc = -ENOENT;
		for (unsigned k = 0; k < sn.n && rc == -ENOENT; k++)
			rc = sfs__map_get_in(w->buf[sn.idx[k]], hp, he, ns, q->kbuf, plen, ulen, out);
		if (rc == -ENOENT) {
			rc = q->tops->map_get(w->tr, &parent, q->kbuf + plen, (uint32_t)ulen, &r);
			if (rc >= 0) {
				out->data = r.found ? r.value : NULL;
				out->len = r.found ? r.len : 0;
				rc = r.found;
			}
		}
		if (rc < 0 || snap_held(q, w, &sn))
			return q->ttl.ttl_ms ? sfs_ttl_answer(rc, out, ttl_clock(q, w)) : rc;
	}
	return changing(q, "query map get");
}

static int collect(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct sfs_query *q = arg;

	if (q->nents == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 64;
		struct qent *e = realloc(q->ents, cap * sizeof(*e));

		if (!e)
			return q->err = -ENOMEM;
		q->ents = e;
		q->cap = cap;
	}
	q->ents[q->nents++] = (struct qent){ ukey, val, ulen, vlen };
	return 0;
}

static int collect_new(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct sfs_query *q = arg;
	int rc = sfs__seen_add(&q->seen, ukey, ulen);

	if (rc < 0)
		return q->err = rc;
	return rc ? collect(q, ukey, ulen, val, vlen) : 0;
}

/* The map's live entries as of snapshot @sn into q->ents: the owner's
 * iteration (worker/mapstate.c), over the snapshot's buffers. */
static int map_once(struct sfs_query *q, struct qworker *w, const struct snap *sn,
		    const struct sfs_probe *parent)
{
	int rc = 0, layers = 0;

	q->nents = 0;
	q->err = 0;
	sfs__seen_reset(q->seen);
	for (unsigned k = 0; k < sn->n; k++) {
		const struct sfs_wbuf *b = w->buf[sn->idx[k]];
		struct sfs_map_head hd;

		if (!sfs__map_head_of(b, parent->hash, parent->ns, parent->key, parent->klen, &hd))
			continue;
		layers++;
		rc = sfs__map_iter_in(&q->seen, b, &hd, parent->klen, collect, q);
		if (rc || q->err || hd.mh_clear_pos)
			return q->err ? q->err : rc;	/* a clear shadows every older layer */
	}
	rc = q->tops->map_iter(w->tr, parent, layers ? collect_new : collect, q);
	return q->err ? q->err : rc;
}

int sfs_query_map_iter(sfs_query_t *q, uint64_t ns, const void *key, size_t klen,
		       sfs_entry_fn fn, void *arg)
{
	int rc = ready(q, SFS_STATE_MAP, klen, SFS_MAP_PREFIX - SFS_KEY_PREFIX, "query map iterate");
	struct sfs_probe parent;
	struct qworker *w;
	struct snap sn;
	uint32_t kg;

	if (rc)
		return rc;
	parent.klen = (uint32_t)parent_key(q, key, klen, NULL, 0, &kg);
	parent.key = q->kbuf;
	parent.ns = ns;
	parent.hash = sfs_wbuf_hash(ns, q->kbuf, parent.klen);
	if ((rc = route(q, kg, &w)))
		return rc;
	for (int t = 0; t < RETRIES; t++) {
		snap_take(w, &sn);
		rc = map_once(q, w, &sn, &parent);
		if (rc < 0)
			return rc;
		if (!snap_held(q, w, &sn))
			continue;
		/* Delivered only now: a read that started over gave nothing.
		 * A TTL state's expired entries (collected, so they shadowed
		 * older versions) are skipped here. */
		for (size_t i = 0; i < q->nents; i++) {
			struct sfs_view v = { q->ents[i].v, q->ents[i].vl };

			if (q->ttl.ttl_ms && sfs_ttl_answer(1, &v, ttl_clock(q, w)) != 1)
				continue;
			if ((rc = fn(arg, q->ents[i].k, q->ents[i].kl, v.data, v.len)))
				return rc;
		}
		return 0;
	}
	return changing(q, "query map iterate");
}
