/*
 * args.h — the command line's number arguments, shared by every `sfs`
 * subcommand: one parser, so each option's range check and message read
 * the same.  A command-line helper: it prints and exits, which no library
 * function may do.
 */
#ifndef SFS_SUPERVISOR_ARGS_H
#define SFS_SUPERVISOR_ARGS_H

/* Parse a decimal in [lo, hi] for option @opt of `sfs @cmd`, or print a
 * message naming both and exit 2 (the usage exit code). */
long sfs_arg_num(const char *cmd, const char *opt, const char *v, long lo, long hi);

#endif
