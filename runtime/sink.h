/*
 * sink.h — a worker's share of the query result, as an upsert/retract
 * table, and its commit as a sorted part file.
 *
 * The sink stands for the external system a streaming job writes to: rows
 * keyed by the result's primary key (upsert/delete), or whole rows counted
 * as a multiset (insert/retract) where the result has no key.  It lives in
 * the worker's own memory — a sink is not operator state — and is committed
 * as a part file `result.part<w>` (written to a temporary name, fsynced,
 * renamed): at end of input for now, at completed checkpoints once the
 * checkpointer drives them (two-phase).  `sfs run --output` merges the parts.
 *
 * Open addressing (linear probing, backward-shift deletion) over
 * malloc'ed entries; O(1) per change.
 */
#ifndef SFS_RUNTIME_SINK_H
#define SFS_RUNTIME_SINK_H

#include <stddef.h>
#include <stdint.h>

struct rt_sink_ent;

struct rt_sink {
	int materialize;            /* 0: count changes only (no --output) */
	struct rt_sink_ent **slot;
	size_t cap, used;
	uint64_t changes;
	uint64_t anomalies;         /* retract/delete of an absent row */
};

int rt_sink_init(struct rt_sink *s, int materialize);
void rt_sink_free(struct rt_sink *s);

int rt_sink_put(struct rt_sink *s, const void *key, size_t klen, const char *row, size_t rlen);
int rt_sink_del(struct rt_sink *s, const void *key, size_t klen);
int rt_sink_add(struct rt_sink *s, const char *row, size_t rlen, int64_t delta);

/* Write the live rows, sorted bytewise, one per line (a multiset row as
 * often as it counts), to @path atomically; *rows gets the line count. */
int rt_sink_commit(struct rt_sink *s, const char *path, uint64_t *rows);

/* Merge sorted part files into @out_path: @header, then every line in
 * bytewise order.  *rows gets the line count (without the header). */
int rt_sink_merge(const char *const *parts, unsigned n, const char *header,
		  const char *out_path, uint64_t *rows);

#endif
