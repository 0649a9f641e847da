/*
 * batch.h — a join operator's batch of one input (include/sfs_join.h):
 * records of the larger side wait grouped by join key and are applied per
 * key at a size threshold, a barrier's alignment and end of input (the
 * query's flush()), so the other side's state is read once per key per
 * batch instead of once per record — OmniStateStore's two-stream join cache.
 *
 * Results do not change: a pair is emitted exactly once, by whichever of its
 * two records is applied second, and a batched record counts as applied
 * when its batch is flushed.  The batch lives in the worker's own memory
 * (one writer, nothing to share until `sfs stat` shows batches); 4096
 * records or 4 MiB, whichever comes first.  SFS_JOIN_BATCH=0 in the
 * environment turns batching off (the A/B of bench/RESULTS.md); the
 * rocksdb-direct baseline never batches (Flink's backend does not).
 */
#ifndef SFS_QUERY_BATCH_H
#define SFS_QUERY_BATCH_H

#include "sfs_join.h"
#include "runtime/query.h"

struct q_batch {
	sfs_jb_t *jb;     /* NULL: batching off, records are applied at once */
	void *mem;
};

int q_batch_open(struct rt_op *op, struct q_batch *b);
void q_batch_close(struct q_batch *b);

/*
 * Add a record under @key; flushes the batch through @fn first when it is
 * full, and after the add when it reached its threshold.  With batching
 * off it returns 1 and buffers nothing: the caller applies the record itself.
 */
int q_batch_add(struct rt_op *op, struct q_batch *b, const void *key, uint32_t klen,
		const void *rec, uint32_t len, sfs_jb_key_fn fn);

/*
 * The records a key's apply walks: the single record @*one (batching off;
 * it is taken once: *@one becomes NULL), else the batch's next record of
 * the key.  1 with *@rec (and *@len when @len is not NULL), 0 when done.
 */
static inline int q_batch_next(const void **one, uint32_t one_len, const sfs_jb_t *jb,
			       struct sfs_jb_iter *it, const void **rec, uint32_t *len)
{
	if (*one) {
		*rec = *one;
		if (len)
			*len = one_len;
		*one = NULL;
		return 1;
	}
	return jb && sfs_jb_next_rec(jb, it, rec, len, NULL) == 0;
}

/* Apply everything buffered (flush() of the query). */
int q_batch_flush(struct rt_op *op, struct q_batch *b, sfs_jb_key_fn fn);

#endif
