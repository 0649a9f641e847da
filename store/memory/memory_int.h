/*
 * memory_int.h — the `memory` target's private header: what the files of
 * its adapter (target.c and the files it names) share, not for other
 * modules.  The writer's handle, then the functions of each file that
 * target.c's ops table names, grouped by the file that defines them.  The
 * store under the adapter has its own private header (mstore_int.h).
 */
#ifndef SFS_STORE_MEMORY_MEMORY_INT_H
#define SFS_STORE_MEMORY_MEMORY_INT_H

#include <stdint.h>
#include <stdio.h>

#include "store/memory/memdump.h"
#include "store/memory/memory.h"
#include "store/target.h"

/* A worker's writer (the compactor's, one per worker's store). */
struct sfs_target_writer {
	struct sfs_mstore_writer m;
	struct sfs_mdump_job dj;  /* the checkpoint dump beside the flush */
};

/* The flush round (write.c). */
int sfs__mem_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		   uint64_t seq);
int sfs__mem_commit(struct sfs_target_writer *w, uint64_t seq);
void sfs__mem_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		  const struct sfs_ttl_clock *now);

/* A checkpoint's dump (snapshot.c); pin_wait: a copy waits for the dump
 * that reads the other half. */
int sfs__mem_snapshot(struct sfs_target_writer *w, const char *dir);
int sfs__mem_snapshot_begin(struct sfs_target_writer *w, const char *dir, uint64_t id);
int sfs__mem_snapshot_poll(struct sfs_target_writer *w, uint64_t *id, uint64_t *seq);
int sfs__mem_pin_wait(void *arg);

/* The supervisor's entries and the offline scan (admin.c). */
int sfs__mem_scan(const char *dir, const struct sfs_state_desc *states,
		  int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg);
int sfs__mem_instance_root(const char *data_dir, int node, char *buf, size_t len);
int sfs__mem_restore(const struct sfs_target_env *e, uint32_t worker,
		     int (*put)(void *arg, const char *dir), void *arg);
int sfs__mem_rebuild(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
		     unsigned n, uint32_t lo, uint32_t hi);
int sfs__mem_forget(const struct sfs_target_env *e, uint32_t worker);
void sfs__mem_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out);

/* The worker's side (read.c). */
int sfs__mem_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out);
int sfs__mem_catch_up(struct sfs_target_reader *r);
int sfs__mem_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		   struct sfs_probe_result *res);
int sfs__mem_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		     const void *ukey, uint32_t ulen, struct sfs_probe_result *res);
int sfs__mem_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
		      int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				uint32_t vlen),
		      void *arg);
void sfs__mem_reader_close(struct sfs_target_reader *r);

#endif
