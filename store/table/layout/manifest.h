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
 * folds in snapshot k's delta only (sfs_mf_for_delta).  A base list grows
 * by one manifest per commit, so the engine now and then commits with
 * rebase: that snapshot's base list is one new manifest holding snapshot
 * k-1's live set (ADDs only), and every later base builds on it.
 *
 * Each snapshot records a watermark: the engine's applied seq, the last
 * write-buffer seq whose data the snapshot holds.
 *
 * All three files share one frame (little-endian): header 16 B {magic,
 * version, record count, zero}, records, trailer 8 B {crc32c of all
 * before it, magic}.  Written with tmp + fsync + rename (store/table/layout/file.h);
 * manifest and list names carry 64 random bits, so two committers racing
 * for the same snapshot id never overwrite each other's files.  Every
 * snapshot has its own two lists; a manifest is named by the lists of
 * consecutive snapshots, from its commit to the next rebase.
 *
 * Commit and concurrency: the snapshot file is written to a temporary
 * name and link(2)ed to snapshot-<id>, which fails if the name exists:
 * of two committers of the same id exactly one wins, the other gets
 * -EEXIST (its manifests are removed), re-reads the latest snapshot and
 * retries at id+1.  LATEST is a hint written after every
 * SFS_MF_HINT_EVERY-th commit (it lags, and may even regress under
 * races): sfs_mf_latest() verifies it by probing snapshot-<id+1>, ... and
 * falls back to a directory scan when it is missing or bad.
 *
 * Cleanup: sfs_mf_expire() drops old snapshots and the metadata only
 * they name; sfs_mf_gc() collects what crashes left (temp files, the
 * manifests of a commit or an expire that died half way).  Snapshot ids
 * stay contiguous: commits add at the top, expire removes from the
 * bottom, oldest first.  Neither touches data files or deletion-vector
 * indexes by itself: the engine owns those (gc asks it through keep()).
 *
 * Error and naming rules: see dvec.h and file.h.  Readers copy files
 * whole and validate everything before returning anything.
 */
#ifndef SFS_LAYOUT_MANIFEST_H
#define SFS_LAYOUT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "store/table/layout/dvec.h"   /* a snapshot names an index: its readers use both */
#include "store/table/layout/file.h"

/* 2: the snapshot's watermark.  Other versions are refused (SFS_EVERSION). */
#define SFS_MF_VERSION 2u
#define SFS_MF_KEY_MAX 65535u
#define SFS_MF_HINT_EVERY 16u  /* LATEST rewritten at snapshots 1, 17, 33, ... */

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
	uint64_t watermark;         /* the commit's watermark (the engine's applied seq) */
};

/* What a commit adds to the previous snapshot. */
struct sfs_mf_commit {
	int kind;                   /* enum sfs_mf_kind */
	uint64_t schema_id;
	uint64_t watermark;         /* stored as is: the engine's applied seq */
	const char *dv_index;       /* NULL: none */
	const struct sfs_mf_entry *entries;
	size_t n;
	/* rebase: the new base list is one manifest of these entries, which
	 * must be snapshot @id-1's live set, all ADDs (not checked against the
	 * chain: that would cost the read the rebase saves).  rebase_n 0 (an
	 * empty live set, always so at @id 1): an empty base list. */
	int rebase;
	const struct sfs_mf_entry *rebase_entries;
	size_t rebase_n;
};

/*
 * sfs_mf_commit - commit snapshot @id of the table in @dir on top of
 * snapshot @id-1 (none when @id is 1): write the delta manifest, the delta
 * list and the base list (the previous base + delta manifests, or with
 * @c->rebase one manifest of @c->rebase_entries), then create
 * snapshot-<id> only if absent, then (every SFS_MF_HINT_EVERY-th id) the
 * LATEST hint.  Returns 0, or
 * -EEXIST when another committer took @id (this commit's manifests are
 * removed: re-read with sfs_mf_latest() and retry at the new id + 1), or
 * another code.  Cost: O(entries + manifests of the previous base), or
 * O(entries + rebase entries) with rebase.
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

/*
 * sfs_mf_expire - remove snapshot-<id> of @dir for every id < @keep_from,
 * oldest first, fsync the directory, then remove every manifest list and
 * manifest those snapshots name that no snapshot >= @keep_from names.
 * The order makes a crash harmless: it leaves snapshots that are still
 * whole, or manifests nothing names, which sfs_mf_gc() collects.  Data
 * files and deletion-vector indexes are never touched.  @keep_from <= 1:
 * nothing to do; @keep_from above the newest snapshot: SFS_EUSAGE (the
 * table keeps at least one).  If any snapshot involved or its lists fail
 * to read, nothing is removed.  Safe beside a committer (a new snapshot
 * names only what the newest one names, or new files), not beside
 * another expire or gc.  Returns the number of files removed, or a
 * negative code.  Cost: O(list items of the removed and the retained
 * snapshots), each list read whole; the directory is never scanned.
 */
int sfs_mf_expire(const char *dir, uint64_t keep_from);

/* A gc keep() callback: non-zero keeps file @name (a name, not a path). */
typedef int (*sfs_mf_keep_fn)(const char *name, void *arg);

/*
 * sfs_mf_gc - orphan collection, at open (single writer, nothing in
 * flight): remove every regular file of @dir that is none of
 * snapshot-<id>, LATEST, a manifest list or manifest named by an existing
 * snapshot, the deletion-vector index a snapshot names, or a file
 * @keep(name, @arg) keeps (@keep is required: the data files are only
 * known to it).  Temp files of the writers (store/table/layout/file.h's
 * "*.tmp.<pid>.<n>", datafile_write.c's "*.tmp") are asked about like any other
 * file.  Subdirectories, symlinks and other non-regular files are left
 * alone.  If any snapshot or list fails to read, nothing is removed and
 * the error is returned: a corrupt snapshot's files may still matter.
 * Returns the number of files removed, or a negative code.  Cost: one
 * directory scan, O(files · log(named)), plus the lists of every
 * snapshot read whole.
 */
int sfs_mf_gc(const char *dir, sfs_mf_keep_fn keep, void *arg);

/* ---- the single files (tests, tools, the fuzz target) --------------------------------- */

/* Entries of manifest @name in @dir, through @fn. */
int sfs_mf_manifest_read(const char *dir, const char *name, sfs_mf_entry_fn fn, void *arg);

struct sfs_mf_list_item {
	char name[SFS_LAYOUT_NAME_MAX + 1];
	uint64_t entries;
};

/* Items of manifest list @name in @dir: *@items malloc'd (caller frees). */
int sfs_mf_list_read(const char *dir, const char *name, struct sfs_mf_list_item **items, size_t *n);

/* Internal, for the fuzz target: recompute the frame checksum of a
 * snapshot, list, manifest or LATEST image @buf of @len bytes in place,
 * so mutations reach the record parsers behind the check. */
void sfs__mf_reseal(uint8_t *buf, size_t len);

#endif
