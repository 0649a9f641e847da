/*
 * query.h — what a query is to the runtime, and the calls its operators
 * make.
 *
 * A query is a pipeline of keyed stages.  Stage 0 is fed by the sources:
 * every worker generates its split of the Nexmark stream and the query's
 * source() routes each event it needs to the worker owning the event's key
 * (rt_owner + rt_send).  Stage s's process() runs on the worker owning the
 * record's key, may send to stage s + 1 (a key change: another exchange)
 * and writes result changes to the sink (rt_sink_*), which is co-located
 * with the last stage (a forward edge: a result row's changes always come
 * from the same worker).  flush() runs when a stage has aligned a barrier
 * and at end of input: operators that defer work (mini-batches of dirty
 * keys, join batches) emit it there, before the barrier travels on.
 *
 * Event time: every stage has a watermark (engine.h: a source's max event
 * time - 4 s; a stage's, the minimum over its inputs).  When it advances,
 * watermark() runs — operators fire their timers there (runtime/timers.h)
 * and may send to the next stage, which gets those records before the
 * watermark itself; at end of input it runs once more with INT64_MAX,
 * before flush().  rt_watermark() is the stage's current one, for the late
 * rule of tests/nexmark/README.md: a contribution to window [s, e) is
 * dropped when e - 1 <= it.
 *
 * All state goes through op->st (runtime/backend.h), so a query runs
 * unchanged on every backend.  Operator code is single-threaded per worker.
 */
#ifndef SFS_RUNTIME_QUERY_H
#define SFS_RUNTIME_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "sfs_keygroup.h"
#include "nexmark/gen.h"
#include "runtime/backend.h"

struct rt_engine;

struct rt_op {
	struct rt_backend *st;
	const struct rt_backend_ops *so;  /* == st->ops */
	uint32_t worker, workers, maxp;
	void *priv;                       /* the query's process-local state */
	struct rt_engine *eng;
};

#define RT_KIND(k) (1u << (k))

struct rt_query {
	const char *name;
	const char *columns;   /* CSV header, lower case, no newline */
	const char *shapes;    /* one line: the state it keeps (for --help) */
	unsigned stages;       /* 1..RT_MAX_STAGES */
	unsigned kinds;        /* RT_KIND(NX_*) the source needs */
	size_t priv_size;
	int (*open)(struct rt_op *op);
	int (*source)(struct rt_op *op, const struct nx_event *ev);
	int (*process)(struct rt_op *op, unsigned stage, const void *rec, uint32_t len);
	int (*flush)(struct rt_op *op, unsigned stage);   /* may be NULL */
	int (*watermark)(struct rt_op *op, unsigned stage, int64_t wm);  /* may be NULL */
	void (*close)(struct rt_op *op);                  /* may be NULL */
};

/* The queries compiled in, by name: query/queries.h (the table is the
 * queries' own, above the runtime, which is handed the lookup:
 * engine.h's rt_engine_env). */

/* The worker owning @key's key group (Flink's assignment). */
static inline uint32_t rt_owner(const struct rt_op *op, const void *key, size_t klen)
{
	return sfs_kg_owner(sfs_key_group(key, klen, op->maxp), op->workers, op->maxp);
}

/*
 * Room for a @len-byte record to stage @stage on worker @to: write it before
 * the next rt_send or the end of the current callback.  Never fails: a full
 * channel spills to a process-local queue drained in order (the source
 * pauses while anything is queued), so operators never block and workers
 * never deadlock on each other's full channels.
 */
void *rt_send(struct rt_op *op, unsigned stage, uint32_t to, uint32_t len);

/* Stage @stage's current watermark: INT64_MIN before the first, INT64_MAX
 * once every input ended.  O(1). */
int64_t rt_watermark(const struct rt_op *op, unsigned stage);

/* Result changes.  Upsert/delete by a result key (the sink's primary key),
 * or insert/retract a whole row where the result has no key.  A row is one
 * CSV line without its newline (runtime/row.h builds them). */
int rt_sink_upsert(struct rt_op *op, const void *key, size_t klen, const char *row, size_t len);
int rt_sink_delete(struct rt_op *op, const void *key, size_t klen);
int rt_sink_insert(struct rt_op *op, const char *row, size_t len);
int rt_sink_retract(struct rt_op *op, const char *row, size_t len);

/* Does the job materialize results at all (--output given)?  Queries may
 * skip building rows when not. */
int rt_sink_wanted(const struct rt_op *op);

/* A failed state call inside an operator: the message for the worker's
 * status line, and the code to return. */
int rt_fail(struct rt_op *op, int rc, const char *what);

/* Inside a long operator loop (a barrier's flush over many keys): beat the
 * worker's heartbeat when one is due, so the supervisor's hang detector
 * never kills a busy worker.  A clock read; call it every few hundred
 * keys, not per record. */
void rt_beat(struct rt_op *op);

#endif
