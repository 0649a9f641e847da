/*
 * table_ttl.c — state TTL (store/target.h: ttl): the compactor's rules and
 * clocks kept for the round (table_round.c) and the shaping merges
 * (table_merge.c), which drop expired puts (sfs__tbl_ttl_drops,
 * table_int.h).
 *
 * State TTL (common/ttl.h, store/target.h).  ttl() keeps the compactor's
 * rules and the newest buffer's clocks in the writer (relaxed atomics: the
 * background thread reads them; the clocks only move forward; nothing
 * expires before the first call).  The two places that turn rows of
 * several files into new ones drop a TTL state's expired puts, by the
 * engine's tombstone rule: an expired put is a delete of its key.  In the
 * round it masks what it supersedes in level >= 1 (as every row does) and
 * is not written, so the file is rewritten rather than relabelled (a
 * check of its values first: the staged rows in memory, or a pass over
 * the small level-0 file without them).  Below level 0 there are no
 * tombstones to keep: once masked, level >= 1 rows are disjoint, so an
 * expired row a shaping merge meets is the only unmasked version of its
 * key and is dropped whatever the output level — nothing older of it can
 * resurface.  Space: a relabelled or merged file keeps rows that expire
 * later until a shaping merge takes that file, or until all of them have
 * expired and the file is dropped whole, or half of them and it is
 * rewritten alone (table_merge.c: ttl_drop_files, pick_ttl, within the
 * merge budget); a vector bit is never set for
 * expiry alone (it would cost a vector-index rewrite per round).  States
 * without a TTL pay one rule load per round or merge.  Dropped rows are
 * counted (tp_ttl_dropped).  The level-0 file keeps what the compactor
 * handed over (it drops expired entries at flush by the same clock).
 *
 * Not on a key's path: its clocks are read there (table_round.c).
 */
#include "shm/atomic.h"
#include "store/table/table_int.h"

/* The target op (store/target.h): the rules copied (the compactor's array
 * lives for the call only), each clock moved forward only.  O(states),
 * once per buffer. */
void sfs__tbl_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		  const struct sfs_ttl_clock *now)
{
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		sfs_store_relaxed(&w->ttl_ms[i], rules[i].ttl_ms);
		sfs_store_relaxed(&w->ttl_event[i], rules[i].event_time);
	}
	/* only this (the main) thread stores them: no lost update */
	if (now->proc_ms > sfs_load_relaxed(&w->ttl_proc_ms))
		sfs_store_relaxed(&w->ttl_proc_ms, now->proc_ms);
	if (now->event_ms > sfs_load_relaxed(&w->ttl_event_ms))
		sfs_store_relaxed(&w->ttl_event_ms, now->event_ms);
	sfs_store_release(&w->ttl_on, 1);
}

/* 1 and *@now, the clock @t's rows expire by, when @t is a TTL state's
 * table and a clock is known; else 0 (nothing of @t expires).  Read once
 * per round or merge: one decision for all its rows. */
int sfs__tbl_ttl_now(struct sfs_target_writer *w, const struct table *t, uint64_t *now)
{
	struct sfs_ttl_rule r;
	struct sfs_ttl_clock c;

	if (!sfs_load_acquire(&w->ttl_on) || !(r.ttl_ms = sfs_load_relaxed(&w->ttl_ms[t->sid])))
		return 0;
	r.event_time = sfs_load_relaxed(&w->ttl_event[t->sid]);
	c.proc_ms = sfs_load_relaxed(&w->ttl_proc_ms);
	c.event_ms = sfs_load_relaxed(&w->ttl_event_ms);
	*now = sfs_ttl_now(&r, &c);
	return 1;
}
