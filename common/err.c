/*
 * err.c — error names and the per-thread last-error message.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

static __thread char last_msg[512];

int sfs__err(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_msg, sizeof(last_msg), fmt, ap);
	va_end(ap);
	return code;
}

void sfs__err_clear(void)
{
	last_msg[0] = '\0';
}

const char *sfs_last_error(void)
{
	return last_msg;
}

const char *sfs_strerror(int err)
{
	static const char *const names[] = {
		[SFS_EMAGIC - SFS_E_BASE] = "not an sfs object (bad magic)",
		[SFS_EVERSION - SFS_E_BASE] = "format version differs",
		[SFS_ELAYOUT - SFS_E_BASE] = "layout fingerprint differs",
		[SFS_EFOREIGN - SFS_E_BASE] = "belongs to another job or user",
		[SFS_EFULL - SFS_E_BASE] = "no space left in table or region",
		[SFS_ESTALE - SFS_E_BASE] = "owner is dead (stale)",
		[SFS_ERUNNING - SFS_E_BASE] = "already running",
		[SFS_EUSAGE - SFS_E_BASE] = "bad argument",
		[SFS_ECORRUPT - SFS_E_BASE] = "corrupt data",
		[SFS_ETIMEDOUT - SFS_E_BASE] = "timed out",
	};

	if (err == 0)
		return "success";
	if (err >= SFS_E_BASE && err < SFS_E_LAST)
		return names[err - SFS_E_BASE];
	return strerror(-err);
}
