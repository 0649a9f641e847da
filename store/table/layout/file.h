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

/* Read @path whole into a malloc'd buffer (*@buf, *@len). */
int sfs__layout_read(const char *path, uint8_t **buf, size_t *len);

/* fsync directory @dir: makes the creations and removals of names in it
 * durable (and ordered before what the caller does next). */
int sfs__layout_sync_dir(const char *dir);

/* sfs__layout_write passes a fault point (common/fault.h) before each of
 * its system calls: layout.file.open, .write, .fsync, .rename or .link; a
 * fail=ERR rule fails that call with ERR as errno. */

#endif
