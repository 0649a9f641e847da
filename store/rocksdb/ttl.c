/*
 * ttl.c — state TTL (store/target.h, common/ttl.h): the compaction filter
 * a TTL state's column family gets (attached by open.c when the family is
 * opened or created) and the clock it compares against, moved forward by
 * ttl() before each buffer.
 *
 * State TTL (common/ttl.h).  Entries of a TTL state are stored as the
 * flush hands them over ([expiry][user bytes]); expired ones go in
 * RocksDB's own compactions: each TTL state's family gets a compaction
 * filter (ttl_filter; attached when the family is created and when the
 * instance is opened, also after a restore) that removes a Put whose
 * expiry is <= the state's clock as of the compactor's newest buffer
 * (ttl(), published to RocksDB's threads with atomics; 0 until the first:
 * nothing expires).  RocksDB writes a deletion for a removed Put wherever
 * an older version may lie below, so none resurfaces.  Families of
 * states without a TTL get no filter: no cost.  Drops are counted
 * (rp_ttl_dropped: `sfs stat`, the --json summary, the closing log line).
 */
#include <string.h>

#include "shm/atomic.h"
#include "store/rocksdb/rocksdb_int.h"

static unsigned char ttl_filter(void *st, int level, const char *key, size_t klen,
				const char *val, size_t vlen, char **nval, size_t *nvlen,
				unsigned char *changed);
static const char *ttl_filter_name(void *st);
static void ttl_filter_destroy(void *st);

/*
 * State TTL (store/target.h): before the first apply of each buffer, the
 * registry's rules and the buffer's clocks.  Each TTL state's filter
 * (ttl_filter) gets the clock its rule names; it only moves forward (a
 * smaller one — another clock source after a restart of this writer,
 * which starts at 0 — is ignored).  The rules are the compactor's: only
 * the clock values are kept.  Also publishes the filter's drop count
 * for `sfs stat`.  O(states) per buffer.
 */
void sfs__rdbt_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		     const struct sfs_ttl_clock *now)
{
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		uint64_t t;

		if (!rules[i].ttl_ms)
			continue;
		t = sfs_ttl_now(&rules[i], now);
		/* this thread is the only writer: a plain compare, then a store */
		if (t > __atomic_load_n(&w->ttl[i].now, __ATOMIC_RELAXED))
			__atomic_store_n(&w->ttl[i].now, t, __ATOMIC_RELAXED);
	}
	sfs_store_relaxed(&w->pub->rp_ttl_dropped,
			  __atomic_load_n(&w->ttl_dropped, __ATOMIC_RELAXED));
}

/* The filter for family options @o of state @sid, if the registry gives
 * it a TTL (NULL: none; a state without one gets nothing, so no cost).
 * The registry's sd_ttl_ms is set before READY and never turns off
 * (include/sfs.h), so the family's open or creation is when to decide. */
rocksdb_compactionfilter_t *sfs__rdbt_ttl_attach(struct sfs_target_writer *w, int sid,
					      rocksdb_options_t *o)
{
	rocksdb_compactionfilter_t *f;

	if (sid < 0 || !sfs_load_relaxed(&w->seg->hdr->sh_states[sid].sd_ttl_ms))
		return NULL;
	f = rocksdb_compactionfilter_create(&w->ttl[sid], ttl_filter_destroy, ttl_filter,
					    ttl_filter_name);
	rocksdb_options_set_compaction_filter(o, f);
	return f;
}

/*
 * State TTL (common/ttl.h): the compaction filter of a TTL state's family.
 * Called by RocksDB for the newest version of each key a compaction
 * reads, when it is a Put (older versions under it go without asking;
 * merge operands never come: the C API's filter is Filter(), and
 * CompactionFilter's default keeps operands — a TTL state has none
 * anyway, its counters are puts; tests/test_target_rocksdb.c shows a
 * counter's merges, folded in a compaction, are not filtered either).
 * Removes an entry whose expiry is <= the state's clock of the newest
 * ttl(); RocksDB then writes a deletion in its place unless the output
 * is the bottommost level with nothing older below (tests: an older
 * version below never resurfaces).  The applied marker is the family's
 * own bookkeeping, not an entry: never dropped (its 8 bytes would read
 * as an expiry = its seq, long past).  So the count is of keys dropped,
 * not versions; a compaction that fails and is redone counts again.
 * Cost: two loads and a compare per key compacted, in TTL families only.
 */
static unsigned char ttl_filter(void *st, int level, const char *key, size_t klen,
				const char *val, size_t vlen, char **nval, size_t *nvlen,
				unsigned char *changed)
{
	struct wttl *t = st;
	uint64_t now = __atomic_load_n(&t->now, __ATOMIC_RELAXED);

	(void)level;
	(void)nval;
	(void)nvlen;
	*changed = 0;
	if (!now || (klen == MARKER_LEN && memcmp(key, MARKER_KEY, MARKER_LEN) == 0) ||
	    !sfs_ttl_expired(val, vlen > UINT32_MAX ? UINT32_MAX : (uint32_t)vlen, now))
		return 0;
	__atomic_fetch_add(&t->w->ttl_dropped, 1, __ATOMIC_RELAXED);
	return 1;
}

static const char *ttl_filter_name(void *st)
{
	(void)st;
	return "sfs.ttl";
}

static void ttl_filter_destroy(void *st)
{
	(void)st;	/* the writer's: freed with it */
}
