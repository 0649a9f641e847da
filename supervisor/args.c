/*
 * args.c — the command line's number arguments (supervisor/args.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "supervisor/args.h"

long sfs_arg_num(const char *cmd, const char *opt, const char *v, long lo, long hi)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi) {
		fprintf(stderr, "sfs %s: %s: '%s' is not a number in [%ld, %ld]\n", cmd, opt, v, lo,
			hi);
		exit(2);
	}
	return n;
}
