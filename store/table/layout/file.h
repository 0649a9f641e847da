/*
 * file.h — the whole-file I/O that the table store's metadata formats
 * share (deletion-vector indexes in dvec.c; snapshots, manifest lists and
 * manifests in manifest.c): one naming rule, one writer discipline and
 * one set of fault points for all of them.  Internal to layout/.
 *
 *  - Names (data files, manifests, indexes) are 1..SFS_LAYOUT_NAME_MAX
 *    bytes, contain no '/' and are not "." or "..": they are files of the
 *    table directory.
 *  - Files are written whole to "<path>.tmp.<pid>.<n>", fsynced and
 *    renamed (or linked: create-if-absent), then the directory is fsynced
 *    (both fsyncs only while sfs_layout_sync(): sync.h);
 *    a missing parent directory is created on the first ENOENT only (as
 *    datafile_write.c).  A crash leaves at most a temp file, which
 *    sfs_mf_gc() collects.
 *  - Files are read whole: metadata files are small, and a copy cannot
 *    turn into SIGBUS when the file is truncated under a mapping.
 */
#ifndef SFS_LAYOUT_FILE_H
#define SFS_LAYOUT_FILE_H

#include <stddef.h>
#include <stdint.h>

#define SFS_LAYOUT_NAME_MAX 255u

/* A valid table-directory name (see the rules above). */
int sfs__layout_name_ok(const char *name);

/* Write @len bytes to @path atomically: "<path>.tmp.<pid>.<n>", fsync, rename,
 * fsync the directory; parent created on the first ENOENT.  With @excl the
 * final step is link(2) instead of rename — create-if-absent, -EEXIST if
 * @path exists (the temp file is removed either way). */
int sfs__layout_write(const char *path, const void *buf, size_t len, int excl);

/* Remove @path, a metadata file nothing else names: 1 removed, 0 already
 * gone, or a negative code naming it.  An inode only this name holds is
 * kept as a spare of its directory (renamed "spare.tmp.<pid>.<n>"), which
 * a later sfs__layout_write there renames to its temp name and overwrites
 * instead of creating a file.  Why: each metadata commit creates four
 * files and its expire removes four, and on ext4 without a journal an
 * inode allocation skips, one buffer lookup each, every inode of the
 * group freed in the last 60-360 s (ext4's recently_deleted()): a
 * create's cost grows with the commits of the last minutes (q9 at 30M
 * events: 8 % of the compactor's samples in find_inode_bit).  A rename
 * allocates nothing.  Process-local pools (file.c); off with
 * sfs_layout_set_spares(0). */
int sfs__layout_remove(const char *path);
void sfs_layout_set_spares(int on);
/* Read @path whole into a malloc'd buffer (*@buf, *@len). */
int sfs__layout_read(const char *path, uint8_t **buf, size_t *len);

/* fsync directory @dir: makes the creations and removals of names in it
 * durable (and ordered before what the caller does next). */
int sfs__layout_sync_dir(const char *dir);

/* sfs__layout_write passes a fault point (common/fault.h) before each of
 * its system calls: layout.file.open, .write, .fsync, .rename or .link; a
 * fail=ERR rule fails that call with ERR as errno. */

#endif
