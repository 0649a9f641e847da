/*
 * ckstore.h — checkpoint storage: incremental checkpoints as directories of
 * hard links, their `_metadata`, retention, restore and savepoints.
 *
 * Layout under the storage root (default <data>/checkpoints):
 *
 *   shared/<name>            immutable state files (RocksDB SSTs), linked
 *                            once, referenced by every checkpoint that
 *                            contains them
 *   chk-<id>/_metadata       the checkpoint exists iff this file is valid
 *   chk-<id>/w<w>/<local>    private files, copied per checkpoint (RocksDB
 *                            MANIFEST, CURRENT, OPTIONS; memory-store dumps)
 *
 * Input of a checkpoint: per worker, a staged directory of the files that
 * make up its state at barrier <id> (<data>/stage/w<w>/b<id>, written by the
 * compactor or the worker; see checkpointer/README in the header of
 * coord.c).  The files in its subdirectory "shared" (SFS_STAGE_SHARED,
 * store/target.h) are shared: the target that staged them says they are
 * immutable once written, their local names unique within the worker's
 * instance; every other file is private.  A restore puts both back flat.
 *
 * Incremental: the store keeps the file set of the last confirmed
 * checkpoint (the reference set) in memory, keyed by (worker, local name,
 * size).  In a checkpoint's synchronous phase a shared file found in the
 * reference set rides as a reference (no I/O at all); a new one is
 * hard-linked into shared/ (copied across filesystems) under a name unique
 * to this store incarnation, and its crc32c computed once.  So the link
 * volume per checkpoint is O(new files), never O(live files); the counts
 * are returned so tests can prove it.  The reference set and the shared
 * files' reference counts over retained checkpoints are kept as state,
 * updated per commit, and built once per sfs__ck_store_open (reading only the
 * retained checkpoints' _metadata).
 *
 * `_metadata` is a text file (format version 2): checkpointer/metadata.h.
 * Written to a temporary name, fsynced, renamed, and the directory
 * fsynced.  Readers refuse a bad checksum, an unknown version, another
 * job's metadata, a missing file or a size mismatch, with a message
 * naming the file and the problem.
 *
 * Retention keeps the newest R checkpoints (default 3); a shared file is
 * unlinked when no retained checkpoint references it.  Nothing is deleted
 * while restoring.
 *
 * Single writer: one checkpointer process per storage root.  Readers (the
 * supervisor restoring, `sfs checkpoints`) only read.
 */
#ifndef SFS_CHECKPOINTER_CKSTORE_H
#define SFS_CHECKPOINTER_CKSTORE_H

#include <stdint.h>
#include <stdio.h>

#include "checkpointer/metadata.h"

#define CK_DEFAULT_RETAIN 3u

/* ---- the writer (checkpointer) ------------------------------------------------ */

struct ck_store;
struct ck_txn;

struct ck_txn_stats {
	uint32_t links;           /* shared files hard-linked into shared/ */
	uint32_t copies;          /* files copied (private ones; shared across fs) */
	uint32_t referenced;      /* shared files riding as references */
	uint64_t new_bytes;
};

/*
 * Open (creating the skeleton once) the store at @root for @job, keeping
 * @retain checkpoints.  The reference set is the newest valid checkpoint
 * with id <= @base_id (UINT64_MAX: the newest valid one; 0: none, a fresh
 * lineage).  Invalid checkpoint directories are reported (sfs_log) and left
 * alone (they protect no shared file).  Also collects what a crash left:
 * chk-<id> directories without _metadata (removed), stray _metadata.tmp,
 * checkpoints beyond @retain, and shared files no retained checkpoint
 * references.  Retention never removes the reference checkpoint, however
 * old, until a newer one is committed.  Cost: reads every retained
 * _metadata and lists shared/ once.
 */
int sfs__ck_store_open(const char *root, const char *job, uint32_t retain, uint64_t base_id,
		  struct ck_store **out);
void sfs__ck_store_close(struct ck_store *s);

/* The id of the reference checkpoint (0: none). */
uint64_t sfs__ck_store_last(const struct ck_store *s);

/* The newest chk-<id> on disk, valid or not (0: none): the next id must be
 * above it.  After a restore from an older checkpoint, barrier ids go on
 * from here, not from the restored id. */
uint64_t sfs__ck_store_max_id(const struct ck_store *s);

/* Start checkpoint @id (greater than every existing id). */
int sfs__ck_txn_begin(struct ck_store *s, uint64_t id, struct ck_txn **out);

/* Add worker @w's staged files (every regular file in @staged_dir, and in
 * its subdirectory SFS_STAGE_SHARED as shared files; any
 * other entry, or a name with a space, control byte or over CK_LOCAL_MAX
 * bytes, is refused with SFS_EUSAGE).  Once per worker per txn.  Cost:
 * one stat per file, plus a link, fsync and crc32c read per new shared
 * file and a copy per private one.  On error the txn stays open: abort it. */
int sfs__ck_txn_add_dir(struct ck_txn *t, uint32_t worker, const char *staged_dir);

/*
 * Write _metadata from @m (id, job, config, workers, sources, tables,
 * sink_epoch; files are the txn's), make it durable, make the txn's set
 * the reference set, then apply retention.  @stats may be NULL.
 * After an error the txn is aborted (its new files unlinked unless
 * referenced elsewhere, chk-<id> removed) and freed.
 */
int sfs__ck_txn_commit(struct ck_txn *t, const struct ck_meta *m, struct ck_txn_stats *stats);
void sfs__ck_txn_abort(struct ck_txn *t);

/* ---- readers ----------------------------------------------------------------------- */

/* The ids of every chk-<id> directory under @root, newest first (valid or
 * not); *ids is malloc'd. */
int sfs__ck_ids(const char *root, uint64_t **ids, size_t *n);

/*
 * Read and validate checkpoint @path (a chk-<id> directory or its
 * _metadata).  @job: refuse another job's checkpoint (NULL: any).
 * @verify: also check every file's crc32c (else existence and size).
 * On failure: an sfs error code, and sfs_last_error() names the file and
 * the problem.
 */
int sfs__ck_read(const char *path, const char *job, int verify, struct ck_meta *m);

/*
 * The newest valid checkpoint of @job under @root into @m (and its
 * directory into @dir).  Invalid newer ones are skipped with a log line
 * naming the file and the problem ("falling back to chk-<id>").
 * -ENOENT if there is none.
 */
int sfs__ck_latest(const char *root, const char *job, int verify, struct ck_meta *m, char *dir,
	      size_t dirlen);

/* `sfs checkpoints`: one line per checkpoint (id, time, size, new bytes,
 * files; invalid ones marked with the reason). */
int sfs__ck_list(const char *root, FILE *out);

/*
 * Materialize worker @w's files of checkpoint @m (stored under @root) in
 * @dest (created): shared files hard-linked (copied across filesystems),
 * private ones copied, each under its local name.  An existing file of
 * the same name in @dest is an error (-EEXIST): restore into a fresh
 * directory.  Copies are checked against their crc32c on the way.
 */
int sfs__ck_restore_worker(const struct ck_meta *m, const char *root, uint32_t w, const char *dest);

/* Stage worker @w's files of checkpoint @m in @dest as its target staged
 * them (shared ones in SFS_STAGE_SHARED, linked; private ones copied): a
 * finished worker's state, carried into the next checkpoint unchanged (its
 * shared files then ride as references). */
int sfs__ck_stage_carry(const struct ck_meta *m, const char *root, uint32_t w, const char *dest);

/* A self-contained copy of checkpoint @src (a chk-<id> directory under
 * @root) at @dest: its own shared files, restorable after @root is gone. */
int sfs__ck_savepoint(const char *root, const char *src, const char *dest);

/* ---- internal: tests --------------------------------------------------------------- */

/* A commit passes kill points (common/fault.h) at each of its steps:
 * ck.commit.linked (new files durable, before _metadata), ck.commit.meta-tmp
 * (_metadata.tmp durable, before the rename), ck.commit.renamed (the
 * checkpoint exists, before retention), ck.retention (an old checkpoint's
 * _metadata removed, before its files).  A test arms one in a forked child
 * (sfs_fault_arm), an end-to-end script with SFS_FAULT. */

#endif
