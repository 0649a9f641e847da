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

/* rm -rf @path (a missing path is fine); an error names the path. */
int sfs_rmtree(const char *path);

#endif
