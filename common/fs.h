/*
 * fs.h — directory chores shared by the checkpointer, the supervisor's
 * restore and the snapshotting backends.
 */
#ifndef SFS_COMMON_FS_H
#define SFS_COMMON_FS_H

#include <stdio.h>

/* mkdir -p @path (mode 0700 for what it creates); an error names the directory. */
int sfs_mkdirs(const char *path);

/* Finish a file written through @f at @tmp: flush, fsync, close, rename
 * to @path; on any error @tmp is removed (a rename is the commit).  With
 * @rc != 0 (the writer already failed) it only closes and removes.
 * Returns the first error, named by file. */
int sfs_file_commit(FILE *f, const char *tmp, const char *path, int rc);

/*
 * Place the immutable file @from at @to: a hard link (no bytes moved), or a
 * copy (fsynced) where the file system refuses links (EXDEV, EPERM,
 * EMLINK, EOPNOTSUPP).  -EEXIST, without a message, when @to exists: the
 * caller decides whether that is fine.  Other errors name the file.
 */
int sfs_link_or_copy(const char *from, const char *to);

/* rm -rf @path (a missing path is fine); an error names the path. */
int sfs_rmtree(const char *path);

#endif
