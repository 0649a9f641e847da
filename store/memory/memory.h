/*
 * memory.h — the `memory` flush target: a worker's flushed state kept in
 * shared memory by its node's compactor, readable by the worker (and any
 * attached reader) without locks.  It is the heap-backend baseline of the
 * benchmarks and the store a worker falls back to after its buffers.
 *
 * One store per worker: region "mstore.<w>" of the worker's node segment,
 * written only by the compactor (single writer):
 *
 *   [struct sfs_mstore, one page] [half 0] [half 1]
 *
 * Log-structured semispaces, because a compactor may be killed at any
 * instruction and a free-list allocator caught mid-update cannot be trusted
 * again.  The active half is append-only: a record {hash, tag, ns, key
 * length | kind, value length, key, value} is written at the half's top
 * (the top advances first), and then published by a release store of its
 * offset into the index slot (hash tag:16 | region offset:48; 0 empty, 1
 * deleted).  A replaced or deleted record becomes garbage in place.  The
 * index itself is appended to the half too, and a bigger one replaces it by
 * a release store of ms_index (an RCU pointer swap).  When the active half
 * is full, the live records are copied into the other half with a fresh
 * index, which is then published (ms_index, ms_active); the old half is
 * reused only after a grace period.  Cost: half the region holds data; a
 * copy is O(live bytes), amortized over the garbage it reclaims.
 *
 * Map and list state, per entry.  A map (parent key P in namespace ns) is
 * a HEAD record under key P and one ENTRY record per live user key U under
 * key P|U, each in the index like any key: a get of one user key is one
 * probe.  The head and its entries form a doubly linked list whose link
 * block {next, prev} (region offsets, 0 = none) starts their value: the
 * head's next is the first entry.  Readers follow next only (acquire
 * loads); prev is the writer's, so that a flush replaces or unlinks an
 * entry in O(1).  A flush writes only what changed: a put appends the new
 * entry and splices it in place of the old version (or at the front for a
 * new user key), a remove unlinks one entry, a clear unpublishes the
 * map's records (O(its entries), each once) and a map left empty loses its
 * head.  An iteration walks the list: O(live entries), in list order — the
 * reverse order of first insertion of each user key since the map was last
 * empty (a replaced entry keeps its place).  Callers must not depend on it:
 * sfs_map_iter promises no order.  A reader walking during a flush sees
 * each entry old or new and never loses an unrelated one (a splice is one
 * release store); what a flush of buffer b changes is also in b, which the
 * worker reads above the store until b's commit.  Unlinked records stay in
 * place until the half is recycled after a grace period, so a reader that
 * stands on one still finds its way.
 *
 * Crashes.  A splice takes up to four stores in different records, so the
 * writer first writes an intent (ms_intent: which operation on which
 * records) and clears it when done; every step of an intent is idempotent
 * and derived from the records themselves, and sfs_mstore_open finishes a
 * pending one before anything else.  So a kill at any instruction leaves
 * the published state, unreachable bytes above a top, an empty head (a
 * redone flush links it), or an intent the restart completes.
 *
 * Dumps of a frozen version (a checkpoint that does not stop the flush).
 * sfs_mstore_freeze copies the published index's live slot words into a
 * frozen list appended to the active half (A), then publishes the pin
 * (ms_dump_*): every record the list names is in A (a copy moves all live
 * records into one half), and a record never changes once published except
 * a map record's link block, which a dump does not read.  So a dump thread
 * walks the list while the compactor keeps flushing newer buffers: appends
 * go above A's top, slot changes go to the live index, not the list.  The
 * one writer that could overwrite A is a semispace copy into it (the
 * second copy after the freeze); compact() first waits for the dump
 * (w->pin_wait) and so a writer that copies twice within one dump stalls
 * for the rest of it — the old cost, in that rare case only.  The pin is in
 * shared memory, so a compactor killed mid-dump leaves it, and its
 * successor redoes the dump from the same list (memdump.h, sfs_mdump_poll);
 * sfs_mstore_thaw, after the dump file is durable, records ms_dump_done and
 * drops the pin.  Cost: the list (8 bytes per live key) in the half, and a
 * pass over the index at the freeze (~10 ms per million slots), instead of
 * a whole-store dump inside the flush.
 *
 * State TTL (common/ttl.h).  The writer keeps the compactor's rules and the
 * newest buffer's clocks (sfs_mstore_ttl; process-local, the clocks only
 * move forward, nothing expires before the first call).  A semispace copy
 * leaves behind every record of a TTL state whose expiry (a value's or
 * counter's first 8 bytes; a map entry's first 8 after its link block) is
 * <= the clock its rule names: the store keeps one version per key, so
 * not copying a record deletes it, and nothing older can resurface.  A
 * map whose entries all expired loses its head too.  Readers never see
 * the difference: their clock is at least the flushed buffer's, at which
 * every record left behind was already expired.  A copy runs when a half
 * fills (above) and, with TTL states, also at a commit once enough of the
 * clock has passed (sfs_mstore_commit: the rule and its cost are there).
 * States without a TTL cost one rule load per record in a copy (nothing
 * at all while no state has a TTL).
 *
 * Tags make flushes idempotent and reads exact.  Every record carries the
 * sequence number (tag) of the write buffer whose flush wrote it.  A flush
 * of buffer b skips a key whose record already has tag >= b (a redone flush
 * after a compactor crash changes nothing; a counter is never added twice),
 * a clear of a map whose head has tag >= b (created by this flush after its
 * clear), and a reader folds a buffered counter delta of buffer b over a
 * store value only when b > the record's tag.  Buffers are flushed in
 * sequence order.
 */
#ifndef SFS_STORE_MEMORY_H
#define SFS_STORE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "common/ttl.h"
#include "shm/qsbr.h"
#include "shm/segment.h"

#define SFS_MSTORE_MAGIC 0x34524f5453534d53ull /* "SMSSTOR4" */
#define SFS_MSTORE_VERSION 4u
#define SFS_MSTORE_DUMP_PATH 512

struct sfs_mstore {
	uint64_t ms_magic;      /* creator, release, last */
	uint32_t ms_version;    /* creator */
	uint32_t ms_worker;     /* creator */
	uint64_t ms_layout;     /* creator: sfs_mstore_layout() */
	uint64_t ms_size;       /* creator: region bytes */
	uint64_t ms_half;       /* creator: bytes per half */
	uint64_t ms_half_off[2];/* creator: region offset of each half */
	uint64_t ms_index;      /* compactor, release: region offset of the index */
	uint32_t ms_active;     /* compactor, release (with ms_index): the half in use */
	uint32_t ms_intent;     /* compactor only: SFS_MSTORE_I_* in progress, 0 none;
				 * written after its operands, cleared after its steps */
	uint64_t ms_intent_rec; /* compactor only: region offset of the intent's record */
	uint64_t ms_top[2];     /* compactor: bytes used in each half (advanced before writing) */
	uint64_t ms_garbage;    /* compactor: dead bytes in the active half */
	uint64_t ms_applied;    /* compactor, release: seq of the last buffer fully flushed */
	uint64_t ms_commits;    /* compactor, release: versions published */
	uint64_t ms_live;       /* compactor, relaxed: keys (map heads and entries included) */
	uint64_t ms_bytes;      /* compactor, relaxed: key + value bytes */
	uint64_t ms_skipped;    /* compactor, relaxed: writes skipped as already applied */
	uint64_t ms_copies;     /* compactor, relaxed: semispace copies done */
	uint64_t ms_written;    /* compactor, relaxed: record bytes appended by flushes
				 * (semispace copies not included) */
	uint64_t ms_maps;       /* compactor, relaxed: map heads (a kill may leave it off by
				 * one until the next copy, which counts them) */
	uint64_t ms_redone;     /* compactor, relaxed: intents finished at open */
	uint64_t ms_ttl_dropped;/* compactor, relaxed: values, counters and map entries of
				 * TTL states a copy left behind as expired ("State TTL") */
	/* The frozen version of a dump in flight (see the top).  The ms_dump_*
	 * operands are written by the compactor's main thread before the
	 * release store of ms_dump_list that publishes the pin, and stay fixed
	 * until ms_dump_list returns to 0 (release, after ms_dump_done). */
	uint64_t ms_dump_list;  /* region offset of the frozen list, 0 = no pin */
	uint64_t ms_dump_id;    /* the caller's name for the dump (a barrier id) */
	uint64_t ms_dump_seq;   /* ms_applied when it was frozen */
	uint64_t ms_dump_bytes; /* bytes of the list (garbage after the thaw) */
	uint32_t ms_dump_half;  /* the half pinned */
	uint32_t ms_dump_pad;
	uint64_t ms_dump_done;  /* compactor, release: id of the last dump made durable */
	uint64_t ms_dump_done_seq; /* compactor, before ms_dump_done: its ms_dump_seq */
	char ms_dump_path[SFS_MSTORE_DUMP_PATH]; /* the dump file */
};

/* A frozen list: the live slot words of the index at a freeze. */
struct sfs_mstore_frozen {
	uint64_t mf_n;
	uint64_t mf_word[];
};

struct sfs_mstore_index {
	uint64_t mi_slots;      /* power of two */
	uint64_t mi_used;       /* occupied + deleted slots (compactor only) */
	uint64_t mi_slot[];     /* release stores by the compactor, acquire loads by readers */
};

/* A record.  Immutable once published, except the link block of a map
 * record (next: compactor release stores, reader acquire loads; prev:
 * compactor only). */
struct sfs_mstore_entry {
	uint64_t me_hash;
	uint64_t me_tag;        /* seq of the buffer whose flush wrote it */
	uint64_t me_ns;
	uint32_t me_kf;         /* key length (bits 0..23) | kind << 24 (SFS_MSTORE_K_*) */
	uint32_t me_vlen;       /* value bytes; a map record's include its link block */
	/* key, then value at the key length rounded up to 8 */
};

/* Record kinds. */
enum {
	SFS_MSTORE_K_VALUE = 0, /* value or counter state */
	SFS_MSTORE_K_HEAD = 1,  /* a map's head: key P, value = link block */
	SFS_MSTORE_K_ENTRY = 2, /* a map entry: key P|U, value = link block + user value */
};

/* The value of a map record starts with its links. */
struct sfs_mstore_link {
	uint64_t ml_next;       /* region offset of the next entry, 0 = end */
	uint64_t ml_prev;       /* region offset of the previous entry or the head */
};

struct sfs_mstore_view {
	const void *value;
	uint32_t len;
	uint64_t tag;
};

uint64_t sfs_mstore_layout(void);

/* Region name of worker @w's store. */
void sfs_mstore_name(uint32_t w, char *buf, size_t n);

/* ---- reader side (any process; lock-free, zero-copy) ----------------- */

/* The store of worker @w in @s, or NULL when it does not exist (yet): a
 * missing store reads as empty.  Checks magic, version and layout. */
int sfs_mstore_attach(struct sfs_seg *s, uint32_t w, struct sfs_mstore **out);

/* sfs_mstore_attach for a caller that asks at every quiescent point until
 * the store exists: *@absent_at is the segment's ready-region count
 * (sfs_seg_regions_ready) when a search last found no store (start with
 * UINT64_MAX); while it has not moved there is nothing new to find, and
 * the search (a formatted name, a walk of the region directory: ~800
 * instructions) is skipped. */
int sfs_mstore_attach_after(struct sfs_seg *s, uint32_t w, uint64_t *absent_at,
			    struct sfs_mstore **out);

/*
 * sfs_mstore_get - look up (@ns, @key) with hash @h (sfs_wbuf_hash).
 * Returns 1 and fills @v (valid until the caller's next quiescent point),
 * or 0 when absent.  For a map entry (key P|U) the view is the user value;
 * a map head reads as absent.  Cost: a probe of the published index.
 */
int sfs_mstore_get(const struct sfs_mstore *ms, uint64_t h, uint64_t ns, const void *key,
		   uint32_t klen, struct sfs_mstore_view *v);

/* Prefetch the home slot of hash @h (batched probes), then, once it is in
 * cache, the record it names when its tag matches: a batch of probes
 * overlaps its misses. */
void sfs_mstore_prefetch(const struct sfs_mstore *ms, uint64_t h);
void sfs_mstore_prefetch_rec(const struct sfs_mstore *ms, uint64_t h);

/*
 * sfs_mstore_map_iter - call @fn(arg, ukey, ulen, value, vlen) for every
 * live entry of the map whose parent key is @pk (@plen bytes, hash @ph) in
 * namespace @ns, in list order (see the top), until @fn returns non-zero
 * (passed on).  Views valid until the caller's next quiescent point.
 * SFS_ECORRUPT if a link leaves the region.  Cost: a probe, then
 * O(entries) dependent loads.
 */
int sfs_mstore_map_iter(const struct sfs_mstore *ms, uint64_t ph, uint64_t ns, const void *pk,
			uint32_t plen,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg);

/* ---- writer side (the compactor) -------------------------------------- */

struct sfs_mstore_writer {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	struct sfs_mstore *ms;
	uint64_t idle_token;    /* grace period that frees the inactive half, 0 = free */
	uint64_t hd_ix, hd_slot, hd_off; /* the last map head used: index, slot, record */
	/* A copy into the half a dump pins waits for it: called by compact()
	 * (the dump finishes and sfs_mstore_thaw runs inside), 0 or an error.
	 * NULL: such a copy fails with SFS_ETIMEDOUT. */
	int (*pin_wait)(void *arg);
	void *pin_arg;
	/* State TTL (sfs_mstore_ttl; the writer's process only). */
	int ttl_on;             /* sfs_mstore_ttl was called */
	int ttl_any;            /* some rule has a TTL (never before the first call) */
	struct sfs_ttl_rule ttl_rule[SFS_MAX_STATES]; /* by state id */
	struct sfs_ttl_clock ttl_now;   /* the newest buffer's clocks, never back */
	uint64_t ttl_min[2];    /* smallest TTL on the processing [0] and event [1]
				 * clock, 0: no state uses that clock */
	/* As of the last copy (any cause): its clocks, ms_written, and the
	 * bytes it copied — what the commit-time trigger measures against. */
	struct sfs_ttl_clock ttl_mark;
	uint64_t ttl_mark_written, ttl_mark_copied;
};

/* Find or create the store of worker @w (@bytes for a new region); @self is
 * the compactor's process-table slot (skipped by its grace periods).  An
 * intent left by a killed writer is finished first. */
int sfs_mstore_open(struct sfs_seg *s, uint32_t w, uint64_t bytes,
		    const struct sfs_proc_slot *self, struct sfs_mstore_writer *out);
void sfs_mstore_close(struct sfs_mstore_writer *w);

enum { SFS_MSTORE_PUT = 1, SFS_MSTORE_DELETE = 2, SFS_MSTORE_MERGE = 3 };

/*
 * sfs_mstore_apply - apply one buffered write of buffer @tag: PUT the value,
 * DELETE the key, or MERGE an int64 delta (@value points to 8 bytes) into
 * the stored value with operator @mop (common/merge.h; absent: the delta).
 * Skipped when the key's record already carries a tag >= @tag.  Value and
 * counter state only.  Returns 0, SFS_EFULL (store region full: nothing
 * changed), SFS_EUSAGE (ADD over a value that is not 8 bytes).
 */
int sfs_mstore_apply(struct sfs_mstore_writer *w, int op, unsigned mop, uint64_t h, uint64_t ns,
		     const void *key, uint32_t klen, const void *value, uint32_t vlen, uint64_t tag);

/*
 * Map writes of buffer @tag.  @key is P|U (@klen bytes, hash @h), its first
 * @plen bytes the parent P (hash @ph); a clear takes P alone.
 *  - map_put: U := @value; skipped when U's entry has a tag >= @tag.
 *    Appends the entry (and the head of a new map): O(1).
 *  - map_remove: unlink U's entry (a no-op when absent or tag >= @tag).  O(1).
 *  - map_clear: drop every entry and the head, unless the head's tag is >=
 *    @tag.  O(entries of the map).
 * 0, SFS_EFULL (nothing changed), SFS_ECORRUPT (a key of another kind).
 */
int sfs_mstore_map_put(struct sfs_mstore_writer *w, uint64_t h, uint64_t ph, uint64_t ns,
		       const void *key, uint32_t klen, uint32_t plen, const void *value,
		       uint32_t vlen, uint64_t tag);
int sfs_mstore_map_remove(struct sfs_mstore_writer *w, uint64_t h, uint64_t ns, const void *key,
			  uint32_t klen, uint64_t tag);
int sfs_mstore_map_clear(struct sfs_mstore_writer *w, uint64_t ph, uint64_t ns, const void *pk,
			 uint32_t plen, uint64_t tag);

/* Publish: every write of buffer @seq is applied.  Then, with TTL states,
 * maybe a copy that drops what expired (see mstore_compact.c, ttl_due). */
void sfs_mstore_commit(struct sfs_mstore_writer *w, uint64_t seq);

/*
 * sfs_mstore_ttl - the TTL rules (@rules: SFS_MAX_STATES by state id,
 * ttl_ms 0 for none; copied) and the clocks of the buffer about to be
 * applied (each kept only if it moves forward).  O(states).
 */
void sfs_mstore_ttl(struct sfs_mstore_writer *w, const struct sfs_ttl_rule *rules,
		    const struct sfs_ttl_clock *now);

/* A semispace copy now (tests; the writer's triggers call it too): 0, or
 * as a copy fails (SFS_EFULL, a wait for a grace period or a dump). */
int sfs_mstore_compact(struct sfs_mstore_writer *w);

/*
 * sfs_mstore_freeze - pin the version of the last commit for a dump named
 * @id (writer; see the top): its frozen list, @path recorded for a
 * successor.  0; 1 when a dump of @id is already pinned (a redone flush:
 * nothing changed); SFS_ERUNNING when another dump is pinned; SFS_EFULL
 * when the list does not fit.  O(index slots).
 */
int sfs_mstore_freeze(struct sfs_mstore_writer *w, uint64_t id, const char *path);

/* The pinned list, or NULL when no dump is in flight. */
const struct sfs_mstore_frozen *sfs_mstore_frozen(const struct sfs_mstore *ms);

/* Calls @fn for every record of the frozen version, like foreach: any
 * thread of the writer's process, while the pin holds. */
int sfs_mstore_frozen_foreach(const struct sfs_mstore *ms,
			      int (*fn)(void *arg, const struct sfs_mstore_entry *e,
					const void *key, const void *value),
			      void *arg);

/* The dump of the pin is durable: ms_dump_done := its id, the pin goes
 * (its list becomes garbage).  Writer only. */
void sfs_mstore_thaw(struct sfs_mstore_writer *w);

/* True while the inactive half still waits for its grace period. */
int sfs_mstore_pending(struct sfs_mstore_writer *w);

/* Calls @fn for every live record (checkpoints, tests): map heads and
 * entries included, their values with the link block (kind in me_kf).
 * Writer or a reader that stays online for the walk. */
int sfs_mstore_foreach(const struct sfs_mstore *ms,
		       int (*fn)(void *arg, const struct sfs_mstore_entry *e, const void *key,
				 const void *value),
		       void *arg);

/*
 * sfs_mstore_verify - the writer's invariants (tests, after a crash): every
 * indexed map entry is on its head's list exactly once, every listed entry
 * is the indexed version of its key, prev links mirror next links, no
 * intent is pending.  0 or SFS_ECORRUPT naming what broke.  O(live).
 */
int sfs_mstore_verify(const struct sfs_mstore *ms);

/*
 * Fault injection (tests): the writer passes a kill point at each step of
 * a map write (memory.head, .append, .intent, .link, .unlink, .index,
 * .clear, .done: common/fault.h); a test kills the process there to check
 * that a restart loses and doubles nothing.
 */

/* The `memory` flush target (store/memory/target.c: its ops table). */
struct sfs_target_ops;
extern const struct sfs_target_ops sfs_target_memory;

#endif
