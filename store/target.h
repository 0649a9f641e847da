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

#include <stdint.h>

#include "shm/proc.h"
#include "worker/target_read.h"
#include "worker/wbuf.h"

struct sfs_target_writer;

struct sfs_target_cfg {
	uint64_t store_bytes;   /* memory target: region bytes per worker */
};

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

/* By name; NULL if unknown. */
const struct sfs_target_ops *sfs_target_find(const char *name);

extern const struct sfs_target_ops sfs_target_memory;

/*
 * A restore of the memory target, before any child starts (the supervisor):
 * create worker @worker's store and load the dumps the restore put in
 * <sh_data_dir>/w<worker>/ — "store.dump" (same parallelism) or
 * "r<lo>-<hi>.<n>.dump" (a rescale: that key-group range of an old
 * worker's dump) — then remove them.  store/memory/memdump.h has the format.
 */
int sfs_target_memory_restore(struct sfs_seg *s, uint32_t worker, uint64_t store_bytes);

#endif
