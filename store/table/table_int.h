/*
 * table_int.h — what the `table` target's writer (table.c) and readers
 * (table_read.c) share; not for other modules.
 */
#ifndef SFS_STORE_TABLE_INT_H
#define SFS_STORE_TABLE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shm/segment.h"
#include "store/table/table.h"

/*
 * The prefix filter of a map or list table's data files (store/table/layout/datafile.h):
 * each row's prefix is its map's  parent | ns  — what a map read asks
 * (tv_prefix) — so a file answers "no entry of this map here" from its
 * filter.  Rows are parent | ns | user key and the parent carries its own
 * length (common/keygroup.h), so every row that starts with a map's prefix
 * has exactly that prefix: the promise prefix_of asks for.
 */
#define SFS_TABLE_PFX_MAP 1u
uint32_t sfs__table_map_prefix(const void *key, size_t klen);

/* Worker @worker's region; created (by the compactor) when @create, else
 * *@out stays NULL until it exists. */
int sfs__table_pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_table_pub **out);

/* <sh_data_dir>/w<worker>: the worker's store. */
int sfs__table_store_dir(const struct sfs_seg *s, uint32_t worker, char *buf, size_t len);

/* The row key of buffered key @key (@klen bytes) in namespace @ns (table.h):
 * @map: a map entry whose parent is @plen bytes (@klen == @plen: the map's
 * prefix in @ns).  @out holds @klen + 8 bytes; returns that length. */
size_t sfs__table_enc(unsigned char *out, int map, uint32_t plen, uint64_t ns, const void *key,
		      uint32_t klen);

/* The table target's reader side (table_read.c). */
int sfs__table_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out);
int sfs__table_catch_up(struct sfs_target_reader *r);
int sfs__table_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     struct sfs_probe_result *res);
int sfs__table_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		       const void *ukey, uint32_t ulen, struct sfs_probe_result *res);
int sfs__table_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg);
void sfs__table_reader_close(struct sfs_target_reader *r);

/* The table target's entries for the supervisor (table_admin.c). */
struct sfs_target_env;
int sfs__table_instance_root(const char *data_dir, int node, char *buf, size_t len);
/* The offline scan of a checkpoint image (store/target.h, scan): table_scan.c. */
struct sfs_scan_entry;
struct sfs_state_desc;
int sfs__table_scan(const char *dir, const struct sfs_state_desc *states,
		    int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg);
int sfs__table_restore(const struct sfs_target_env *e, uint32_t worker,
		       int (*put)(void *arg, const char *dir), void *arg);
int sfs__table_rebuild(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
		       unsigned n, uint32_t kg_lo, uint32_t kg_hi);
int sfs__table_forget(const struct sfs_target_env *e, uint32_t worker);
void sfs__table_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out);

#endif
