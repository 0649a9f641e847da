/*
 * fs.h — the one set of file helpers: mkdir -p, link-or-copy, copy, write
 * all, commit by rename, rm -rf.  Shared by the checkpointer, the
 * supervisor's restore and generator, the flush targets and the table's
 * on-disk formats; no other file keeps its own copy.
 *
 * Rules, once: every call returns 0 or a negative sfs code, and a failure
 * leaves a message naming the path and the problem (sfs_last_error).
 * Every creating call takes its mode from the caller: data, checkpoint and
 * savepoint directories are 0700 (one user's state; nobody else reads it),
 * and a call site that picks another mode says why.
 *
 * Directories that must exist before a file is created are made the
 * "mkdir-once" way, not with a cache of directories known to exist: the
 * hot path opens its file, and only the first ENOENT makes the parent
 * (sfs_mkdir_parent) and retries once.  That costs no syscall while the
 * directory exists and, unlike a cache, cannot go stale when sfs_rmtree
 * or retention removes a directory behind it.
 */
#ifndef SFS_COMMON_FS_H
#define SFS_COMMON_FS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * mkdir -p @path, each directory it creates with @mode.  Cost: one mkdir(2)
 * when the parent exists (a stat(2) more when @path does too); a walk of
 * the components only on ENOENT.  Something other than a directory in the
 * way: -ENOTDIR, "exists and is not a directory".
 */
int sfs_mkdirs(const char *path, mode_t mode);

/*
 * sfs_mkdirs, then durable: the parent of every directory it creates, and
 * of @path itself whether created now or before, is fsynced, so the whole
 * chain survives a power loss (a directory made by mkdir(2) alone may not:
 * tests/e2e_powerloss.sh).  For directories that hold durable data, made
 * once per process (the checkpoint storage, the sink); not for hot paths.
 */
int sfs_mkdirs_durable(const char *path, mode_t mode);

/* mkdir -p of @path's parent directory, with @mode: the retry of a create
 * that failed with ENOENT (the mkdir-once rule above). */
int sfs_mkdir_parent(const char *path, mode_t mode);

/*
 * write(2) all @n bytes of @p to @fd, retrying short writes and EINTR.  A
 * write that returns 0 for a non-empty buffer is an error (-EIO: no
 * progress, never a loop); @name (the file, for the message) may be NULL.
 */
int sfs_write_all(int fd, const void *p, size_t n, const char *name);

/* Finish a file written through @f at @tmp: flush, fsync, close, rename
 * to @path; on any error @tmp is removed (a rename is the commit).  With
 * @rc != 0 (the writer already failed) it only closes and removes.
 * Returns the first error, named by file. */
int sfs_file_commit(FILE *f, const char *tmp, const char *path, int rc);

/* What placing a file does when its target already exists.  Each call site
 * names one; there is no default. */
enum sfs_exist {
	SFS_EXIST_FAIL = 1,   /* -EEXIST (with a message): the caller picks another name or reports */
	SFS_EXIST_REPLACE,    /* the target is replaced, atomically (rename(2)) */
	SFS_EXIST_SAME,       /* fine when the target holds the same bytes (a retried step); else -EEXIST */
};

/* What a copy did, for callers that check or count it; every field out but
 * @progress. */
struct sfs_copy_info {
	int copied;               /* 1: bytes were copied, 0: linked or accepted as the same */
	uint32_t crc;             /* crc32c of the bytes copied (copied only) */
	uint64_t size;            /* bytes copied (copied only) */
	void (*progress)(void);   /* in, or NULL: called per MiB copied (a heartbeat) */
};

/*
 * Copy @from to @to, fsynced, the new file mode 0600.  @ex says what an
 * existing @to means; @dmode != 0 creates a missing parent of @to with that
 * mode (mkdir-once), 0 leaves a missing parent an error.  @info may be
 * NULL.  Cost: O(size), one 1 MiB buffer; SFS_EXIST_SAME on an existing
 * target compares it byte for byte, O(size) again.
 */
int sfs_copy_file(const char *from, const char *to, enum sfs_exist ex, mode_t dmode,
		  struct sfs_copy_info *info);

/*
 * Place the immutable file @from at @to: a hard link (O(1), no bytes
 * moved), or sfs_copy_file where the file system refuses links (EXDEV,
 * EPERM, EMLINK, EOPNOTSUPP).  @ex, @dmode and @info as sfs_copy_file;
 * with SFS_EXIST_SAME a target that is @from's inode costs one stat(2).
 */
int sfs_link_or_copy(const char *from, const char *to, enum sfs_exist ex, mode_t dmode,
		     struct sfs_copy_info *info);

/*
 * 1 if the @n bytes at @name are a plain file name, one entry of the
 * directory it is joined to: 1..255 bytes, no '/', no control byte (below
 * 0x20, or 0x7f), not "." or "..".  The one check every on-disk format
 * (_metadata, TABLES, manifests, snapshots, deletion-vector indexes) runs
 * on a name it read before the name is joined to a path, so no file can
 * name anything outside its root.  Formats that split lines at spaces
 * refuse spaces on top.  O(n).
 */
int sfs_name_is_plain(const char *name, size_t n);

/* @name's first @n bytes for a message, into @buf: control bytes and bytes
 * >= 0x7f as \xNN, cut at @cap - 1 (a name read from a hostile file must
 * not write to the terminal).  Returns @buf. */
const char *sfs_name_show(const char *name, size_t n, char *buf, size_t cap);

/* rm -rf @path (a missing path is fine); an error names the path. */
int sfs_rmtree(const char *path);

/* Tests only: the write(2) that sfs_write_all calls (NULL: write(2)), so a
 * test can return 0 or a short count; link(2) likewise, to make EXDEV or
 * EPERM on one file system. */
extern ssize_t (*sfs__fs_write)(int fd, const void *p, size_t n);
extern int (*sfs__fs_link)(const char *from, const char *to);

#endif
