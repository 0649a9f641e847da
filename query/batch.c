/*
 * batch.c — join batches of the join queries (batch.h).
 */
#include <stdlib.h>
#include <string.h>

#include "query/batch.h"
#include "runtime/util.h"

#define BATCH_RECS  4096u
#define BATCH_BYTES (4u << 20)
#define BATCH_KEYS  4096u

int q_batch_open(struct rt_op *op, struct q_batch *b)
{
	const char *env = getenv("SFS_JOIN_BATCH");
	struct sfs_jb_config cfg = { BATCH_KEYS, BATCH_RECS, BATCH_BYTES };
	size_t size = sfs_jb_size(BATCH_KEYS, BATCH_BYTES + (BATCH_BYTES >> 2));
	int rc;

	memset(b, 0, sizeof(*b));
	/* A baseline (rocksdb-direct: Flink's RocksDB backend) takes one
	 * state access per record, none of sfs's batching. */
	if ((env && !strcmp(env, "0")) || (op->so->flags & RT_BACKEND_UNBATCHED))
		return 0;
	b->mem = aligned_alloc(SFS_JB_ALIGN, (size + SFS_JB_ALIGN - 1) & ~(size_t)(SFS_JB_ALIGN - 1));
	if (!b->mem)
		return rt_fail(op, -12, "join batch");
	rc = rt_sfs(sfs_jb_init(b->mem, size, &cfg, &b->jb));
	return rc ? rt_fail(op, rc, "join batch") : 0;
}

void q_batch_close(struct q_batch *b)
{
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

/* A flush may take long (every distinct key's state read): the worker
 * beats every 256 keys so the supervisor never takes it for hung. */
struct beat_tramp {
	struct rt_op *op;
	sfs_jb_key_fn fn;
	unsigned n;
};

static int beat_key(void *arg, const sfs_jb_t *jb, struct sfs_jb_iter *it, const void *key,
		    uint32_t klen, uint32_t nrec)
{
	struct beat_tramp *t = arg;

	if ((++t->n & 255) == 0)
		rt_beat(t->op);
	return t->fn(t->op, jb, it, key, klen, nrec);
}

int q_batch_flush(struct rt_op *op, struct q_batch *b, sfs_jb_key_fn fn)
{
	struct beat_tramp t = { op, fn, 0 };
	uint32_t seq0 = rt__err_seq;
	int rc;

	if (!b->jb || !sfs_jb_records(b->jb))
		return 0;
	rc = rt_sfs_cb(sfs_jb_flush(b->jb, beat_key, &t), seq0);
	return rc > 0 ? -rc : rc;
}

int q_batch_add(struct rt_op *op, struct q_batch *b, const void *key, uint32_t klen,
		const void *rec, uint32_t len, sfs_jb_key_fn fn)
{
	int rc;

	if (!b->jb)
		return 1;
	rc = sfs_jb_add(b->jb, key, klen, rec, len, 0);
	if (rc == SFS_EFULL) {
		if ((rc = q_batch_flush(op, b, fn)))
			return rc;
		rc = sfs_jb_add(b->jb, key, klen, rec, len, 0);
	}
	rc = rt_sfs(rc);
	if (rc)
		return rt_fail(op, rc, "join batch add");
	return sfs_jb_should_flush(b->jb) ? q_batch_flush(op, b, fn) : 0;
}
