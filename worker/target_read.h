/*
 * target_read.h — the read half of the flush-target contract: what a worker
 * reads below its buffers and value cache.  store/target.h is the whole
 * contract (its comment states the rules of these calls, "Worker side");
 * the read half lives here, at the worker's level, so the worker includes
 * nothing above it: store/target.h includes this header (struct
 * sfs_target_ops holds these ops as its member rd), never the reverse.
 *
 * Which target a segment reads is the store's registry's to say
 * (store/registry.c, the one table of targets, above this layer): the
 * worker layer never calls up to it.  The public opens that need a target
 * (sfs_worker_open, sfs_query_open) live in store/open.c and hand the
 * worker's opens (worker/open.h) the registry's lookup, a function of type
 * sfs_target_read_of_fn, which the worker calls once its segment is
 * attached.
 */
#ifndef SFS_WORKER_TARGET_READ_H
#define SFS_WORKER_TARGET_READ_H

#include <stdint.h>

struct sfs_seg;
struct sfs_target_reader;
struct sfs_wbuf;

/* The most sealed buffers images() hands out at once. */
#define SFS_TARGET_IMAGES_MAX 16u

struct sfs_probe {
	uint64_t hash;          /* sfs_wbuf_hash(ns, key) */
	uint64_t ns;
	const void *key;        /* kg | state | user key */
	uint32_t klen;
};

struct sfs_probe_result {
	int found;
	const void *value;
	uint32_t len;
	uint64_t tag;
};

struct sfs_target_read_ops {
	int (*reader_open)(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out);
	int (*catch_up)(struct sfs_target_reader *r);
	int (*probe)(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     struct sfs_probe_result *res);
	/* Map state: @parent is the map's parent key (common/keygroup.h).
	 * map_get: 1 and the value of @ukey, or 0.  map_iter: @fn per entry
	 * (stops at a non-zero return, which it passes on). */
	int (*map_get)(struct sfs_target_reader *r, const struct sfs_probe *parent,
		       const void *ukey, uint32_t ulen, struct sfs_probe_result *res);
	int (*map_iter)(struct sfs_target_reader *r, const struct sfs_probe *parent,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg);
	void (*reader_close)(struct sfs_target_reader *r);
	/* Sealed buffers the store holds as they are, not yet in its own
	 * format (NULL: none ever; the table target's level-0 images,
	 * store/table/table_l0.c): *@n buffers and their seqs, newest first,
	 * each older than any buffer the worker still has and newer than the
	 * store (their seqs are above every probe result's tag).  Read like
	 * sealed buffers (worker/wbuf.h readers; a delta folds over the store
	 * once, by seq); valid until the caller's next quiescent point. */
	int (*images)(struct sfs_target_reader *r, const struct sfs_wbuf *const **b,
		      const uint64_t **seq, unsigned *n);
};

/* The read half of the target segment @s was created for (sh_backend; ""
 * means "memory"), or NULL for a name no target has: store/registry.c's
 * sfs_target_read_of, passed down by store/open.c. */
typedef const struct sfs_target_read_ops *sfs_target_read_of_fn(const struct sfs_seg *s);

#endif
