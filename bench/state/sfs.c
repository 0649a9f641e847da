/*
 * sfs.c — the sfs side of `bench_state` (bs.h): a real worker on a job
 * segment of its own, sfs_worker_open() with parallelism 1 (every key group
 * owned), a quiescent point every BATCH operations (one input batch), and
 * for the flushed cases the compactor's flush cycle stepped in this process
 * with its own attach and process-table slot (compactor/flush.h), always
 * while the worker is quiescent and never inside a timed loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/state/bs.h"
#include "common/clock.h"
#include "common/err.h"
#include "compactor/flush.h"
#include "shm/proc.h"
#include "worker/state.h"
#include "worker/wbuf.h"

int bs_sfsb_open(struct sfsb *b, const char *tag, uint64_t seg_bytes,
		     const struct sfs_worker_opts *o, int kind, uint32_t vs, uint64_t store_bytes)
{
	int rc;

	memset(b, 0, sizeof(*b));
	b->vs = vs;
	b->val = calloc(1, vs ? vs : 8);
	if (!b->val)
		return -ENOMEM;
	snprintf(b->job, sizeof(b->job), "bench-state-%d-%s", (int)getpid(), tag);
	rc = sfs_seg_create(b->job, 0, seg_bytes, 1, &b->seg);
	if (rc)
		return bs_fail("create the bench segment", rc);
	b->created = 1;
	snprintf(bs_seg_path, sizeof(bs_seg_path), "%s", b->seg.path);
	rc = sfs_worker_open(b->job, 0, 0, o, &b->c);
	if (rc)
		return bs_fail("sfs_worker_open", rc);
	rc = sfs_state_register(b->c, kind == SFS_STATE_VALUE ? "v" : "cnt", kind, &b->st);
	if (rc)
		return bs_fail("sfs_state_register", rc);
	if (!store_bytes)
		return 0;
	b->f = calloc(1, sizeof(*b->f));
	if (!b->f)
		return -ENOMEM;
	rc = sfs_seg_attach(b->job, 0, &b->fseg);
	if (rc)
		return bs_fail("attach the flusher", rc);
	b->fattached = 1;
	rc = sfs_proc_register(&b->fseg, SFS_ROLE_COMPACTOR, 0, &b->fslot);
	if (rc)
		return bs_fail("register the flusher", rc);
	rc = sfs_flusher_init(b->f, &b->fseg, b->fslot, store_bytes);
	if (rc)
		return bs_fail("sfs_flusher_init", rc);
	return 0;
}

void bs_sfsb_close(struct sfsb *b)
{
	if (b->f && b->fslot)
		sfs_flusher_fini(b->f);
	if (b->fslot)
		sfs_proc_unregister(b->fslot);
	if (b->fattached)
		sfs_seg_detach(&b->fseg);
	free(b->f);
	if (b->c)
		sfs_worker_close(b->c);
	if (b->created) {
		sfs_seg_detach(&b->seg);
		sfs_seg_destroy(b->job, 0);
		bs_seg_path[0] = '\0';
	}
	free(b->val);
	memset(b, 0, sizeof(*b));
}

struct sfs_wbuf *bs_sfsb_active(struct sfsb *b)
{
	return b->c->buf[b->c->ctl->wc_active];
}

/* Touch the first @bytes of the active buffer's free arena. */
void bs_sfsb_prefault(struct sfsb *b, uint64_t bytes)
{
	struct sfs_wbuf *w = bs_sfsb_active(b);
	uint64_t top = w->wb_top, end = top + bytes;

	if (end > w->wb_size)
		end = w->wb_size;
	bs_prefault((char *)w + top, end - top);
}

/* Step the flusher until every sealed buffer is flushed and free.  The
 * worker is quiescent before every step, as a worker between batches is. */
int bs_sfsb_drain(struct sfsb *b)
{
	uint64_t deadline = sfs_now_ns() + 900ull * 1000000000ull;
	unsigned failing = 0;

	for (;;) {
		int pending = 0, rc;

		sfs_ctx_quiescent(b->c);
		rc = sfs_flusher_step(b->f, 1u << 16, &pending);
		if (rc < 0)
			return bs_fail("flusher step", rc);
		if (rc == 0 && !pending)
			return 0;
		failing = b->f->w[0].failing ? failing + 1 : 0;
		if (failing > 1000)
			return bs_fail("the flush keeps failing", SFS_EFULL);
		if (sfs_now_ns() > deadline)
			return bs_fail("the flusher did not go idle in 900 s", SFS_ETIMEDOUT);
	}
}

/* Bytes of the active buffer per live entry: arena used + its index. */
void bs_sfsb_bytes_per_entry(struct sfsb *b, double *total, double *arena)
{
	struct sfs_wbuf_stats ws;

	sfs_wbuf_stats(bs_sfsb_active(b), &ws);
	*arena = ws.entries ? (double)ws.bytes_used / (double)ws.entries : 0;
	*total = ws.entries ? (double)(ws.bytes_used + ws.slots * 8 + SFS_WBUF_INDEX_OFF) /
				      (double)ws.entries
			    : 0;
}

static int sfs_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		int rc;

		memcpy(b->val, &i, 8);
		rc = sfs_value_put(b->c, b->st, 0, keys + i * KLEN, KLEN, b->val, b->vs);
		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

static int sfs_put(void *arg, const unsigned char *keys, uint64_t n)
{
	return sfs_load(arg, keys, n);
}

static int sfs_get(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		struct sfs_view v;
		int rc = sfs_value_get(b->c, b->st, 0, keys + i * KLEN, KLEN, &v);

		if (rc != 1)
			return rc < 0 ? rc : sfs__err(SFS_ECORRUPT, "sfs get: key %llu missing",
						      (unsigned long long)i);
		acc += *(const unsigned char *)v.data;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	bs_sink += acc;
	return 0;
}

static int sfs_mget(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;
	struct sfs_key k[BATCH];
	struct sfs_view v[BATCH];
	int res[BATCH];
	uint64_t acc = 0;

	for (unsigned i = 0; i < BATCH; i++) {
		k[i].ns = 0;
		k[i].klen = KLEN;
	}
	for (uint64_t at = 0; at < n; at += BATCH) {
		int rc;

		for (unsigned i = 0; i < BATCH; i++)
			k[i].key = keys + (at + i) * KLEN;
		rc = sfs_multiget(b->c, b->st, k, BATCH, v, res);
		if (rc)
			return rc;
		for (unsigned i = 0; i < BATCH; i++) {
			if (res[i] != 1)
				return sfs__err(SFS_ECORRUPT, "sfs multiget: key missing");
			acc += *(const unsigned char *)v[i].data;
		}
		sfs_ctx_quiescent(b->c);
	}
	bs_sink += acc;
	return 0;
}

static int sfs_add(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		int rc = sfs_counter_add(b->c, b->st, 0, keys + i * KLEN, KLEN, (int64_t)(i % 7 + 1));

		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

/* sfs */
static int sfs_mput1(struct sfsb *b, const unsigned char *k, unsigned j, uint64_t i)
{
	unsigned char u[ULEN];

	ukey_of(j, u);
	memcpy(b->val, &i, 8);
	return sfs_map_put(b->c, b->st, 0, k, KLEN, u, ULEN, b->val, b->vs);
}

static int sfs_mload(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *k = load_map_key(i, &j);
		int rc = sfs_mput1(b, k, j, i);

		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

static int sfs_mput(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		int rc = sfs_mput1(b, k, ukey_pick(k), i);

		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

struct iter_acc {
	uint64_t acc, n;
};

static int iter_cb(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct iter_acc *a = arg;

	a->acc += *(const unsigned char *)val;
	a->n++;
	return 0;
}

static int sfs_miter(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;
	struct iter_acc a = { 0, 0 };

	for (uint64_t i = 0; i < n; i++) {
		uint64_t before = a.n;
		int rc = sfs_map_iter(b->c, b->st, 0, keys + i * KLEN, KLEN, iter_cb, &a);

		if (rc)
			return rc;
		if (a.n - before != MAP_FANOUT)
			return sfs__err(SFS_ECORRUPT, "sfs map iterate: %llu entries",
					(unsigned long long)(a.n - before));
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	bs_sink += a.acc;
	return 0;
}

const struct bs_impl bs_sfs_impl = {
	.name = "sfs",
	.op = {
		[OP_LOAD] = sfs_load, [OP_PUT] = sfs_put, [OP_GET] = sfs_get,
		[OP_MGET] = sfs_mget, [OP_ADD] = sfs_add, [OP_MLOAD] = sfs_mload,
		[OP_MPUT] = sfs_mput, [OP_MITER] = sfs_miter,
	},
};
