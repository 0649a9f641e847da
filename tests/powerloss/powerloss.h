/*
 * powerloss.h — names shared by the power-loss shim (shim.c), its restore
 * tool (restore.c) and the fault facility's `powerloss` action
 * (common/fault.c writes PL_MARKER; it does not include this header).
 */
#ifndef SFS_TESTS_POWERLOSS_H
#define SFS_TESTS_POWERLOSS_H

#include <stdio.h>
#include <sys/stat.h>

#define PL_SHADOW ".durable"	/* the records, under $SFS_POWERLOSS_DIR */
#define PL_MARKER ".powerloss"	/* written by the fault action: the power is off */
#define PL_KEY_MAX 64

/* An object's key: inode number and birth time (a reused inode number is
 * another object). */
static inline void pl_key_statx(const struct statx *sx, char *out, size_t cap)
{
	snprintf(out, cap, "%llu-%lld.%09u", (unsigned long long)sx->stx_ino,
		 (long long)sx->stx_btime.tv_sec, (unsigned)sx->stx_btime.tv_nsec);
}

#endif
