/*
 * manifest.h — the table store's metadata chain, as in Apache Paimon:
 *
 *   snapshot-<id>  ->  base manifest list  ->  manifests  ->  entries
 *                  ->  delta manifest list ->  manifest (this commit's)
 *                  ->  deletion-vector index file (dvec.h), or none
 *
 * A manifest lists entries {op ADD|DELETE, data file, level, rows, size,
 * min/max key, key-group range}.  A manifest list lists manifest names
 * with their entry counts.  Snapshot k's base list = snapshot k-1's base
 * + delta manifests; its delta list = the one manifest of commit k.  The
 * live file set = every ADD minus every DELETE over base then delta, in
 * order; a maintenance session that already holds snapshot k-1's set
 * folds in snapshot k's delta only (sfs_mf_for_delta).
 *
 * All three files share one frame (little-endian): header 16 B {magic,
 * version, record count, zero}, records, trailer 8 B {crc32c of all
 * before it, magic}.  Written with tmp + fsync + rename; manifest and
 * list names carry 64 random bits, so two committers racing for the same
 * snapshot id never overwrite each other's files.
 *
 * Commit and concurrency: the snapshot file is written to a temporary
 * name and link(2)ed to snapshot-<id>, which fails if the name exists:
 * of two committers of the same id exactly one wins, the other gets
 * -EEXIST (its manifests are removed), re-reads the latest snapshot and
 * retries at id+1.  LATEST is a hint written after a commit (it may lag
 * or even regress under races): sfs_mf_latest() verifies it by probing
 * snapshot-<id+1>, ... and falls back to a directory scan when it is
 * missing or bad.
 *
 * Error and naming rules: see dvec.h.  Readers copy files whole and
 * validate everything before returning anything.
 */
#ifndef SFS_LAYOUT_MANIFEST_H
#define SFS_LAYOUT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "layout/dvec.h"

#define SFS_MF_VERSION 1u
#define SFS_MF_KEY_MAX 65535u

enum sfs_mf_op { SFS_MF_ADD = 1, SFS_MF_DELETE = 2 };
enum sfs_mf_kind { SFS_MF_DATA = 1, SFS_MF_COMPACT = 2 };

struct sfs_mf_entry {
	int op;                     /* enum sfs_mf_op */
	const char *file;           /* data-file name */
	uint32_t level;
	uint64_t rows, size;
	const void *min_key, *max_key;   /* min <= max bytewise */
	uint16_t min_klen, max_klen;
	uint16_t kg_lo, kg_hi;      /* kg_lo <= kg_hi */
};

struct sfs_mf_snapshot {
	uint64_t id, prev_id;       /* prev 0: the first snapshot */
	uint64_t schema_id;         /* the table's schema / state id */
	int kind;                   /* enum sfs_mf_kind */
	char base_list[SFS_LAYOUT_NAME_MAX + 1];
	char delta_list[SFS_LAYOUT_NAME_MAX + 1];
	char dv_index[SFS_LAYOUT_NAME_MAX + 1];   /* "" = none */
	uint64_t delta_entries;     /* entries of this commit */
};

/* What a commit adds to the previous snapshot. */
struct sfs_mf_commit {
	int kind;                   /* enum sfs_mf_kind */
	uint64_t schema_id;
	const char *dv_index;       /* NULL: none */
	const struct sfs_mf_entry *entries;
	size_t n;
};

/*
 * sfs_mf_commit - commit snapshot @id of the table in @dir on top of
 * snapshot @id-1 (none when @id is 1): write the delta manifest, the delta
 * list and the base list (= the previous base + delta manifests), then
 * create snapshot-<id> only if absent, then the LATEST hint.  Returns 0,
 * or -EEXIST when another committer took @id (this commit's manifests are
 * removed: re-read with sfs_mf_latest() and retry at the new id + 1), or
 * another code.  Cost: O(entries + manifests of the base).
 */
int sfs_mf_commit(const char *dir, uint64_t id, const struct sfs_mf_commit *c);

/* sfs_mf_latest - the newest committed snapshot id in @dir (0: none). */
int sfs_mf_latest(const char *dir, uint64_t *id);

/* sfs_mf_snapshot_read - snapshot-<id> of @dir into @out. */
int sfs_mf_snapshot_read(const char *dir, uint64_t id, struct sfs_mf_snapshot *out);

/* An entry callback: non-zero stops the walk and is returned. */
typedef int (*sfs_mf_entry_fn)(const struct sfs_mf_entry *e, void *arg);

/* sfs_mf_for_all - every entry of snapshot @s, base manifests then delta,
 * in commit order.  Entry pointers are valid during the callback only. */
int sfs_mf_for_all(const char *dir, const struct sfs_mf_snapshot *s, sfs_mf_entry_fn fn, void *arg);

/* sfs_mf_for_delta - the entries of snapshot @s's own commit only. */
int sfs_mf_for_delta(const char *dir, const struct sfs_mf_snapshot *s, sfs_mf_entry_fn fn, void *arg);

/* ---- the single files (tests, tools, the fuzz target) --------------------------------- */

/* Entries of manifest @name in @dir, through @fn. */
int sfs_mf_manifest_read(const char *dir, const char *name, sfs_mf_entry_fn fn, void *arg);

struct sfs_mf_list_item {
	char name[SFS_LAYOUT_NAME_MAX + 1];
	uint64_t entries;
};

/* Items of manifest list @name in @dir: *@items malloc'd (caller frees). */
int sfs_mf_list_read(const char *dir, const char *name, struct sfs_mf_list_item **items, size_t *n);

#endif
