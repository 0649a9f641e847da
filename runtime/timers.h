/*
 * timers.h — an operator's timers, kept in sfs state: Flink's
 * InternalTimerService (one per operator and time domain) over the backend
 * table, so timers are checkpointed with the rest of the state and run on
 * every backend.
 *
 * A timer is (key, timestamp): a key of the operator's stage, owned by this
 * worker, and an int64 time.  rt_timers_advance(t, wm) fires, in timestamp
 * order, every timer with timestamp <= wm, calling back once per (key,
 * timestamp); registering a timer that is already pending is a no-op (a
 * set, like Flink's), and a deleted timer never fires.  Event time is
 * driven by the stage's watermark (the query's watermark callback calls
 * advance), processing time by whatever clock the operator reads.
 *
 * Ownership.  sfs refuses a key whose key group this worker does not own,
 * so a timer cannot live under a worker-wide key that another worker would
 * own after a rescale.  Timers are kept per key group instead, as Flink's
 * key-group-partitioned timer queues are: a key's timers stay in the key's
 * group and move with its key-group range on a restore with another
 * parallelism, like every other state.  Two kinds of small keys carry them,
 * both pure functions of what they stand for, so any worker (restarted or
 * rescaled) computes the same ones:
 *   A(g)      the anchor of group g: the smallest 4-byte big-endian integer
 *             whose key group is g, found at open for every owned group
 *             (~maxp * ln(groups owned) hashes: ~600 for 128 groups);
 *   B(ts, g)  the bucket of timestamp ts in group g: ts (8 bytes, big-endian,
 *             sign bit flipped) | the smallest 4-byte suffix that lands in g
 *             (~maxp hashes, once per new (ts, g); the index keeps it).
 * State, per timer service called NAME, every map in namespace 0:
 *   NAME.timers  map  B(ts, g) -> {timer key -> ()}: the keys of group g
 *                     with a timer at ts;
 *   NAME.index   map  A(g) -> {ts -> suffix}: group g's pending buckets.
 * (Why not namespaces: sfs's flush loses the maps of one key in several
 * namespaces (tests/test_backend.c, maps_of_one_key_in_several_namespaces),
 * and an empty user key; a bucket key per (ts, g) needs neither.  An empty
 * timer key is refused for the second reason.)
 *
 * Process-local (derived, never the truth): a min-heap of pending (ts, g)
 * with a hash set beside it, rebuilt at open from every owned group's index
 * (O(groups + pending)); and a direct-mapped filter of recent registrations
 * (keys up to 23 bytes) so that re-registering a pending timer — a window
 * operator does it for every element — costs a probe, not a state write.
 *
 * Cost.  Register: a filter probe; on a miss one map put, plus, when (ts, g)
 * is new, the suffix search and one index put.  Delete: one map remove (its
 * (ts, g) stays pending until it fires and finds nothing), none when
 * nothing is pending at (ts, g).  Fire, per pending (ts, g): one map scan,
 * one clear and one index remove; per timer, the callback.  Keys of one
 * timestamp fire in bytewise order, so the firing order does not depend on
 * the worker count or the backend.  advance() makes a quiescent point every
 * 256 callbacks (a large end-of-input firing must let the compactor's grace
 * periods pass): callers and callbacks hold no state views across it.
 *
 * A callback may register and delete timers, Flink's semantics: a timer
 * registered at a time <= the advancing watermark fires in the same
 * advance; a pending timer of the timestamp being fired that a callback
 * deletes does not fire, and re-registering one that has not fired yet is
 * a no-op.  A handle is single-threaded, like the backend it uses.
 */
#ifndef SFS_RUNTIME_TIMERS_H
#define SFS_RUNTIME_TIMERS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/query.h"

struct rt_timers;

/* Called once per fired timer; a non-zero return stops the advance and is
 * returned by it. */
typedef int (*rt_timer_fn)(void *arg, const void *key, uint32_t klen, int64_t ts);

/*
 * Register NAME.timers and NAME.index in @op's backend (NAME at most 40
 * bytes), find the anchors of the key groups worker op->worker of
 * op->workers owns, and load the pending timestamps.  0 or a negative code
 * (sfs_last_error() says why).  Only op->st, so, worker, workers and maxp
 * are used.
 */
int rt_timers_open(struct rt_op *op, const char *name, struct rt_timers **out);
void rt_timers_close(struct rt_timers *t);

/* A timer for @key at @ts; no-op if pending.  SFS_EUSAGE for a key this
 * worker does not own. */
int rt_timer_register(struct rt_timers *t, const void *key, size_t klen, int64_t ts);

/* Remove the timer (@key, @ts) if pending. */
int rt_timer_delete(struct rt_timers *t, const void *key, size_t klen, int64_t ts);

/* Fire every timer with timestamp <= @wm (see above).  Not reentrant: a
 * callback calling it gets SFS_EUSAGE. */
int rt_timers_advance(struct rt_timers *t, int64_t wm, rt_timer_fn fn, void *arg);

/* The earliest pending timestamp (INT64_MAX: none).  O(1). */
int64_t rt_timers_next(const struct rt_timers *t);

/*
 * A small key this worker owns (the anchor of its first key group), for
 * operator state that belongs to no record key — a partial aggregate of
 * the worker's share — together with a timer under the same key: both
 * then move with that key group, whoever owns it.
 */
const void *rt_timers_local_key(const struct rt_timers *t, uint32_t *klen);

#endif
