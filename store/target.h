/*
 * target.h — the flush-target interface: what the compactor writes sealed
 * buffers into and what a worker reads below its buffers and cache.
 *
 * A target is a table of operations (process-local: function pointers never
 * reach shared memory; the segment names its target by string).  The
 * worker and the compactor only ever talk to a target through this table,
 * so the RocksDB and table-store targets of later issues plug in without
 * changing either.  Contracts:
 *
 * Compactor side (one writer per worker's store):
 *  - apply(w, entries, n, seq): write n entries of buffer @seq, given in the
 *    buffer's sorted (key-group-leading) order.  Idempotent: a redone flush
 *    of @seq after a crash must not change the result (counters included).
 *    May be called in several bounded pieces for one buffer, but a map's
 *    parent and entries (a contiguous group) always come in one call.
 *  - commit(w, seq): every entry of @seq is applied; publish the version.
 *    After it returns 0, a reader that catches up sees all of @seq, and the
 *    version survives a kill -9 of the compactor.  -EAGAIN: durability is
 *    under way in the background (a RocksDB flush); the compactor calls it
 *    again (busy() says so) and releases nothing meanwhile.
 *  - busy(w): background work is pending (a grace period, a compaction):
 *    the compactor polls instead of sleeping.
 *  - files(w, fn, arg): the files that make up the current version, for
 *    checkpoints (a target in memory has none).
 *
 * Staging (snapshot, snapshot_begin): a stage directory holds the files of
 * the worker's state at the barrier, flat, with one exception: the files
 * the target will never change again (immutable, named uniquely within
 * the instance) go in its subdirectory SFS_STAGE_SHARED.  A checkpoint
 * links each of those once and references it from then on; every other
 * file is copied into each checkpoint (checkpointer/ckstore.h).  A restore
 * puts both kinds back flat.  So the target, not a naming rule of the
 * checkpointer, says what is shared.
 *
 * The instance on disk, restore and rescale (the supervisor, before any
 * child starts, single-threaded; env->seg is the new group's segment, the
 * checkpoint's state registry already in it).  Worker w's instance is
 * <root>/w<w> (sfs_target_instance_dir), root being instance_root()'s; the
 * target owns everything under it:
 *  - instance_root(data, node, buf, len): the node's root under the job's
 *    data directory; the supervisor puts it in the segment (sh_data_dir).
 *  - restore(env, w, put, arg): replace worker w's instance by its files
 *    of a checkpoint: the target empties the instance, has put(arg, dir)
 *    place the checkpoint's files of w flat in a directory of its choice,
 *    and adopts them, so that the group's first open finds that state (this
 *    segment's identity; every applied marker reset: the new run's buffers
 *    count from seq 1).  Killed midway, the next restore starts over.
 *  - rebuild(env, w, src, n, lo, hi): a rescale: worker w's instance with
 *    key groups [lo, hi] only, from the old workers' files restored flat
 *    in src[0..n) (those whose ranges overlap [lo, hi]); adopted as above.
 *  - forget(env, w): a fresh start: drop what a restore left in w's
 *    instance and no group adopted yet (this group must not adopt it).
 * Any of the three may be NULL: that target cannot restore (say so).
 *  - scan(dir, states, fn, arg): offline, no segment, no child: read the
 *    files of one worker's checkpoint restored flat in @dir (what put()
 *    places) with the target's own code, and call fn once per live entry
 *    with its newest visible version: merges folded with the state's
 *    operator, deletes and cleared maps dropped, in no promised order.
 *    @states is the checkpoint's registry (SFS_MAX_STATES entries indexed
 *    by state id, sd_state SFS_SDESC_READY where one is registered).  The
 *    entry's key is the buffered key (kg | state | rest, common/keygroup.h:
 *    rest is the key of a value or counter, parent rest | user key of a
 *    map or list entry); a counter's value is its folded int64 (8 bytes,
 *    native).  A non-zero return of fn stops the scan and is passed on.
 *    `sfs export` is its user.  NULL: the target cannot be read offline.
 *
 * State TTL (common/ttl.h; NULL: the target drops expired entries only
 * where the compactor does, at flush): ttl(w, rules, now) is called before
 * the first apply of each buffer with the registry's rules
 * (SFS_MAX_STATES entries by state id, ttl_ms 0 for a state without one;
 * the compactor's memory, valid during the call only: copy what is kept)
 * and the buffer's clocks.  The target may then drop, in its own
 * maintenance (merges, compactions), any entry of a TTL state whose
 * expiry (the value's first 8 bytes; a map or list entry's value as
 * apply's map run hands it over) is <= the clock its rule names — as a
 * delete wherever an older version of the key may lie below, so a drop
 * never brings one back.  Expired views of a buffer arrive already turned
 * into deletes (values, counters) or flagged SFS_WBUF_EXPIRED (map and
 * list entries: sfs_map_run_walk treats them as removed).
 *
 * Rollback in place (NULL: the target cannot, and a worker's death
 * restarts the group from the checkpoint's files; supervisor/run.c says
 * so).  When a worker dies, the group returns to the last completed
 * checkpoint C without leaving shared memory or the live instances: the
 * workers restart, and each target's published version goes back to
 * the one it staged for C.  The compactor's thread that owns worker w
 * calls, on w's writer, in this order:
 *  - pin(w, id): checkpoint @id is complete (ck_done).  If this writer
 *    staged @id (snapshot or snapshot_begin, its version's seq then
 *    reported), that version becomes the one a rollback returns to; the
 *    previous pin is released.  Until the next pin, nothing the pinned
 *    version needs is deleted or rewritten in place (files leaving the
 *    live set by merges or compactions included) — the cost is disk held
 *    for one checkpoint interval's churn, never a copy of the instance.
 *    @id 0, called right after open when nothing was applied since: the
 *    version at open (a fresh or restored instance) is pinned.  Returns 0,
 *    or -ENOENT when this writer did not stage @id (staged before the
 *    compactor restarted): nothing is pinned then, and a rollback before
 *    the next pin falls back.
 *  - rollback(w, &seq): make the pinned version the published one again,
 *    as a new publication readers catch up to like any other (a reader
 *    holding a newer version must see the change; the target reopens what
 *    it must), with its applied seq; everything applied, committed or
 *    staged after it is dropped — a flush that was under way is
 *    abandoned (the compactor discards its buffer), a background snapshot
 *    or merge is stopped or its result discarded.  *@seq: the pinned
 *    version's applied seq.  The pin stays (a second rollback before the
 *    next pin returns to the same version).  Survives a kill -9 at any
 *    point: the next open finds either the version before the call or the
 *    pinned one, never a mix.  -ENOENT: nothing pinned (the caller
 *    falls back to a restore from files); any other error also falls back.
 *    The time it takes is the recovery's: it must not grow with the
 *    state (the target's metadata of one version, not its data).
 *  - reset(w, &seq) (NULL: the target cannot): make an empty store the
 *    published version, as rollback does for the pinned one — every
 *    state's entries go, whatever was under way is dropped, the pin is
 *    released — so a worker slot of a running group can serve a new task
 *    (a host group's slot reused by a task that restores from files).
 *    *@seq: the applied seq it keeps (the last published one: seqs never
 *    go back).  Same kill -9 promise and cost bound as rollback.
 *
 * Reports (NULL: none): summary_json(s, workers, out) appends the target's
 * counters over workers [0, workers) to a run's --json summary, as
 * `, "name": value` members; stat(s, out) adds lines to `sfs stat`.
 *
 * Registration: a target is one ops table in its own folder and one line
 * in store/registry.c; sfs_target_register adds one at run time (tests,
 * plugins): every process of a group must register the same ones.
 *
 * Worker side (lock-free readers, any process of the node; the ops are
 * struct sfs_target_read_ops, member rd, declared in worker/target_read.h
 * so the worker need not include this header):
 *  - catch_up(r): called at a quiescent point, at most once per published
 *    version (cheap when nothing changed).
 *  - map_get / map_iter: one entry, or every entry, of a map key.
 *  - probe(r, keys, n, res): a batch of point lookups (the keys of one
 *    input batch that missed the buffers and the cache).  A result's value
 *    stays valid until the caller's next quiescent point; its tag is the
 *    seq of the buffer that last wrote the key (counters fold buffered
 *    deltas of newer buffers only).
 */
#ifndef SFS_STORE_TARGET_H
#define SFS_STORE_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/ttl.h"
#include "shm/proc.h"
#include "worker/target_read.h"

struct sfs_target_writer;
/* A buffered entry as apply() and sfs_map_run_walk() see it
 * (worker/wbuf.h): only pointers to it here, so this header includes none
 * of the worker's buffer code; a target that reads the views includes
 * worker/wbuf.h itself. */
struct sfs_wbuf_view;
struct sfs_wbuf;

struct sfs_target_cfg {
	uint64_t store_bytes;   /* memory target: region bytes per worker */
};

/* SFS_STAGE_SHARED, the subdirectory of a stage directory that holds its
 * immutable files: include/sfs.h (public: a worker staging files of its
 * own uses it too). */

/* What a restore works with (see "The instance on disk" above). */
struct sfs_target_env {
	struct sfs_seg *seg;                 /* the new group's segment (NULL: a
					      * backend that keeps no state in one) */
	const char *root;                    /* instance_root() of this node */
	const struct sfs_target_cfg *cfg;
};

/* One entry of a scan (see "scan" above); valid during the callback. */
struct sfs_scan_entry {
	const void *key;         /* kg | state | rest */
	uint32_t klen;
	uint64_t ns;
	const void *val;
	uint32_t vlen;
};

struct sfs_state_desc;

struct sfs_target_ops {
	const char *name;
	int (*open)(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		    const struct sfs_target_cfg *cfg, struct sfs_target_writer **out);
	int (*apply)(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq);
	int (*commit)(struct sfs_target_writer *w, uint64_t seq);
	int (*busy)(struct sfs_target_writer *w);
	int (*files)(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg);
	/* Stage the files of the current version (the worker's state as of the
	 * last commit) in @dir, which must not exist: a checkpoint's input
	 * (checkpointer/coord.h).  NULL: the target cannot (yet). */
	int (*snapshot)(struct sfs_target_writer *w, const char *dir);
	/* Staging beside the flush (NULL: the compactor calls snapshot, which
	 * holds the flush for its length).  snapshot_begin captures the current
	 * version as snapshot @id, to be staged in @dir (created), and returns
	 * 0 at once: newer buffers may be applied while its files are written.
	 * SFS_ERUNNING (no message): an older one is still being written, call
	 * again.  snapshot_poll: 1 and (@id, the version's seq) once a begun
	 * snapshot is complete in its directory, 0 while none is, < 0 when an
	 * attempt failed (the target retries it).  busy() is true meanwhile. */
	int (*snapshot_begin)(struct sfs_target_writer *w, const char *dir, uint64_t id);
	int (*snapshot_poll)(struct sfs_target_writer *w, uint64_t *id, uint64_t *seq);
	void (*close)(struct sfs_target_writer *w);

	/* The instance on disk, restore and rescale (the supervisor). */
	int (*instance_root)(const char *data_dir, int node, char *buf, size_t len);
	int (*restore)(const struct sfs_target_env *e, uint32_t worker,
		       int (*put)(void *arg, const char *dir), void *arg);
	int (*rebuild)(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
		       unsigned n, uint32_t kg_lo, uint32_t kg_hi);
	int (*forget)(const struct sfs_target_env *e, uint32_t worker);
	int (*scan)(const char *dir, const struct sfs_state_desc *states,
		    int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg);

	/* State TTL (see above). */
	void (*ttl)(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		    const struct sfs_ttl_clock *now);

	/* Level 0 as the sealed buffer's own bytes (NULL, or -ENOTSUP without
	 * a message: the compactor sorts and applies the buffer).  absorb
	 * makes sealed buffer @b of seq @seq (sealed by a barrier if
	 * @at_barrier, with the worker's clocks @clk) durable and part of the
	 * store as it is, and returns: the compactor retires the buffer as
	 * after a commit.  Idempotent (a seq absorbed or applied is done).
	 * -EAGAIN: too many buffers wait for their conversion, call again
	 * later (the buffer stays sealed: back-pressure).  l0_step does one
	 * step of converting the oldest absorbed buffer into the store's own
	 * format: 1 if it did one, 0 if nothing waits, < 0 an error (retried).
	 * The store's readers see an absorbed buffer (store/table/table_l0.c
	 * says how far that goes). */
	int (*absorb)(struct sfs_target_writer *w, const struct sfs_wbuf *b, uint64_t seq,
		      int at_barrier, const struct sfs_ttl_clock *clk);
	int (*l0_step)(struct sfs_target_writer *w);

	/* Rollback in place (see above). */
	int (*pin)(struct sfs_target_writer *w, uint64_t id);
	int (*rollback)(struct sfs_target_writer *w, uint64_t *seq);
	int (*reset)(struct sfs_target_writer *w, uint64_t *seq);

	/* Reports. */
	void (*summary_json)(struct sfs_seg *s, uint32_t workers, FILE *out);
	void (*stat)(const struct sfs_seg *s, FILE *out);

	struct sfs_target_read_ops rd;  /* the worker side (worker/target_read.h) */
};

/*
 * A map's run in a sorted apply batch, for targets (the memory and table
 * targets walk it the same way): @v[0, @n) starts with a parent key; the
 * run is every view whose key starts with the parent (no parent is a
 * prefix of another: it carries its key's length), its heads (one per
 * namespace) first, then its entries.  @clear is called for each head whose
 * buffer cleared the map, then @entry for each entry written after its
 * namespace's clear (@val NULL: removed), with its namespace's head (NULL:
 * none in this buffer).  Returns the views consumed, or < 0 (a callback's
 * error; SFS_ECORRUPT for a malformed key, named after @who).
 */
struct sfs_map_run_ops {
	int (*clear)(void *arg, const struct sfs_wbuf_view *head, uint32_t plen);
	int (*entry)(void *arg, const struct sfs_wbuf_view *e, uint32_t plen,
		     const struct sfs_wbuf_view *head, const void *val, uint32_t len);
};

int sfs_map_run_walk(const struct sfs_wbuf_view *v, unsigned n, const char *who,
		     const struct sfs_map_run_ops *ops, void *arg);

/* The target a segment was created for (sh_backend; "" means "memory"). */
const struct sfs_target_ops *sfs_target_of(const struct sfs_seg *s);

/* The read half of sfs_target_of(@s) (&t->rd), or NULL: the lookup the
 * public opens hand the worker layer (worker/target_read.h,
 * sfs_target_read_of_fn; store/open.c). */
const struct sfs_target_read_ops *sfs_target_read_of(const struct sfs_seg *s);

/* By name; NULL if unknown. */
const struct sfs_target_ops *sfs_target_find(const char *name);

/* Add @ops to the table (process-local; at most a few, before any lookup
 * that should find them).  SFS_EEXIST: the name is taken; SFS_ENOSPC: full. */
int sfs_target_register(const struct sfs_target_ops *ops);

/* <root>/w<worker>: worker @worker's instance (see the contract above). */
int sfs_target_instance_dir(const char *root, uint32_t worker, char *buf, size_t len);

/* The checkpoint id of a stage directory the compactor hands snapshot()
 * (shm/ckpt.h's SFS_CKPT_STAGE_FMT: its last component is "b<id>"), for
 * a target that keeps staged versions to pin (snapshot is not given the
 * id): 1 and *@id, or 0 (another directory: nothing to pin). */
int sfs_target_stage_id(const char *dir, uint64_t *id);

/* restore()'s usual first step: @dir emptied (created 0700 if missing,
 * with its parents). */
int sfs_target_instance_reset(const char *dir);

/* restore()'s usual first two steps: worker @worker's instance emptied,
 * then put(arg, dir) — its path left in @dir. */
int sfs_target_instance_put(const struct sfs_target_env *e, uint32_t worker,
			    int (*put)(void *arg, const char *dir), void *arg, char *dir,
			    size_t len);

#endif
