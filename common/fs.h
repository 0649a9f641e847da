/*
 * fs.h — directory chores shared by the checkpointer, the supervisor's
 * restore and the snapshotting backends.
 */
#ifndef SFS_COMMON_FS_H
#define SFS_COMMON_FS_H

/* mkdir -p @path (mode 0700 for what it creates); an error names the directory. */
int sfs_mkdirs(const char *path);

/* rm -rf @path (a missing path is fine); an error names the path. */
int sfs_rmtree(const char *path);

#endif
