/*
 * bench_state.h — `sfs bench`: the entry point bin/sfs dispatches to.  The
 * benchmark (bench/state/) is compiled into bin/sfs, not into libsfs: it is
 * a command, with the supervisor's argument helpers (supervisor/sup.h).
 */
#ifndef SFS_BENCH_STATE_BENCH_STATE_H
#define SFS_BENCH_STATE_BENCH_STATE_H

/* `sfs bench BENCHMARK [OPTIONS]` (argv[0] is "bench"); the exit code. */
int sfs_cmd_bench(int argc, char **argv);

#endif
