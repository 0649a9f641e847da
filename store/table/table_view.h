/*
 * table_view.h — reading one table of the `table` target at one version:
 * the files of that version with their deletion vectors, level-0 files
 * first (newest first), then the files of levels >= 1.  Shared by the
 * compactor (up-levelling lookups, map diffs) and the workers' readers.
 *
 * Why a merge only over level 0: every file of level >= 1 is
 * standalone-correct with its vector applied and a key has at most one
 * live row among them, so below level 0 a read takes the one hit there is.
 * Level-0 files are raw barrier deltas (puts, tombstones, counter deltas);
 * they exist only between a data commit and its up-levelling round — for
 * the length of a commit() when the round runs at the barrier, longer when
 * it runs in the background (the ablation) — and a read folds them newest
 * first over the one level >= 1 hit.
 */
#ifndef SFS_STORE_TABLE_VIEW_H
#define SFS_STORE_TABLE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "common/bump.h"
#include "store/table/layout/datafile.h"

struct tv_file {
	sfs_df_reader_t *rd;
	const uint64_t *dv;      /* deletion vector, NULL: none */
	size_t dv_words;
	uint32_t level;
};

/* One key's answer. */
struct tv_res {
	int state;               /* 0: absent, 1: a value, 2: deleted at level 0 */
	const void *val;         /* in the arena (the folded counter too) */
	size_t vlen;
	int32_t file;            /* the level >= 1 file holding the row, -1 none */
	uint64_t pos;            /* its row position there */
};

/*
 * sfs__tv_probe - the per-batch probe of @n encoded keys over @f[0..nf): one
 * sfs_df_probe per file with the keys still unresolved (hash-set IN, or per
 * literal with SFS_DF_PROBE_PER_LITERAL in @flags), values copied into @a
 * (none with SFS_DF_PROBE_NO_VALUES).  @merge >= 0: counter state with that
 * operator — level-0 deltas fold over the level >= 1 value.  Scratch
 * (@scratch_keys, @scratch_idx, @hits: @n each) is the caller's.  Cost: per
 * file O(n log pages + rows of the candidate pages).
 *
 * @admit (NULL: every file for every key): per key, bit k set when file k
 * may hold it (bits of files 64.. are taken as set).  The caller knows
 * this from the files' prefix filters — a map row can only be in a file
 * that admits its map — and a file is asked only for the keys it admits:
 * the map diff of a join, whose maps are each in one or two of a table's
 * dozens of files, then costs a key-filter block per admitting file, not
 * per file (TV_ADMIT_ALL for a key with no knowledge).
 */
#define TV_ADMIT_ALL UINT64_MAX
int sfs__tv_probe(const struct tv_file *f, unsigned nf, const struct sfs_df_key *keys, size_t n,
	     const uint64_t *admit, int merge, unsigned flags, struct sfs_bump *a,
	     struct tv_res *out, struct sfs_df_key *scratch_keys, uint32_t *scratch_idx,
	     struct sfs_df_hit *hits);

/* One live row of a prefix scan (key: the part after the prefix). */
struct tv_row {
	const void *key, *val;
	uint32_t klen, vlen;
	int32_t file;            /* level >= 1 file of the row, -1: level 0 */
	uint64_t pos;
};

/*
 * sfs__tv_prefix - the live rows with key prefix @pfx over the view, in key
 * order, copied into @a; *@rows malloc'd (caller frees), *@n rows.  Rows
 * from every file are gathered, sorted and the newest of each key kept;
 * a level-0 tombstone hides the key.  @pfx is a map's prefix (parent |
 * ns): hashed once; a file whose prefix filter (SFS_TABLE_PFX_MAP)
 * excludes it costs one filter block, the others a range scan.  Cost:
 * O(files + m log m), m rows in range.
 */
int sfs__tv_prefix(const struct tv_file *f, unsigned nf, const void *pfx, size_t plen,
	      struct sfs_bump *a, struct tv_row **rows, size_t *n);

#endif
