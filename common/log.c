/*
 * log.c — stderr logging with a role/pid prefix; one write(2) per line so
 * lines from several processes never interleave mid-line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static char log_role[32] = "sfs";

void sfs_log_init(const char *role)
{
	snprintf(log_role, sizeof(log_role), "%s", role);
}

void sfs_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s[%d]: ", log_role, (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
