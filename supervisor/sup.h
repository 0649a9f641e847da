/*
 * sup.h — the sfs command: subcommands share this header.
 */
#ifndef SFS_SUPERVISOR_SUP_H
#define SFS_SUPERVISOR_SUP_H

int sfs_cmd_run(int argc, char **argv);
int sfs_cmd_stat(int argc, char **argv);
int sfs_cmd_clean(int argc, char **argv);
int sfs_cmd_bench(int argc, char **argv);

/* Parse a decimal in [lo, hi] for option @opt or exit 2 with a message. */
long sfs_arg_num(const char *cmd, const char *opt, const char *v, long lo, long hi);

/* Number of NUMA nodes the group spans (1 without libnuma support). */
int sfs_node_count(void);

#endif
