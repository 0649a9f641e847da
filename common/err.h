/*
 * err.h — sfs's one error convention, internal side.
 *
 * Functions return 0 or a negative code (see include/sfs.h).  Where a human
 * will read the failure, the function also records a message in a
 * thread-local buffer with sfs__err() — naming the file or object and what
 * was expected — which sfs_last_error() returns.  errno is translated here
 * and nowhere else.
 */
#ifndef SFS_COMMON_ERR_H
#define SFS_COMMON_ERR_H

#include <errno.h>
#include "sfs.h"

/* Record a message for the caller's thread and return @code (for tail calls:
 * `return sfs__err(-ENOENT, "segment %s: not found", name);`). */
int sfs__err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the thread's last message: at the start of every public call but
 * the hot state calls (include/sfs.h, sfs_last_error), so a failure without
 * a message of its own never shows another call's.  A TLS byte store. */
void sfs__err_clear(void);

/* errno as a negative code, -EIO if errno was somehow 0. */
static inline int sfs__errno(void) { return errno ? -errno : -EIO; }

#endif
