/*
 * main.c — `sfs`, the command users run: subcommand dispatch.
 */
#include <dlfcn.h>
#include <errno.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfs.h"
#include "baseline/rocksdb_direct.h"
#include "bench/state/bench_state.h"
#include "shm/segment.h"
#include "supervisor/sup.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sfs COMMAND [OPTIONS]\n"
		"\n"
		"commands:\n"
		"  run       run a job as a supervised process group (foreground)\n"
		"  stat      show a running group's processes and segments (--prometheus)\n"
		"  top       a live terminal view of a running group\n"
		"  get       read one key of a running job's state (queryable state)\n"
		"  clean     remove a dead job's leftover segments\n"
		"  checkpoints  list the checkpoints of a data directory\n"
		"  savepoint    write a self-contained copy of a checkpoint\n"
		"  inspect   look inside a checkpoint, table directory, data file or index\n"
		"  export    a checkpoint's state as rows (csv or jsonl), read offline\n"
		"  bench     benchmarks: 'sfs bench state' (keyed state vs raw table and RocksDB)\n"
		"  gen       write Nexmark events as CSV (person, auction, bid)\n"
		"  version   print versions of sfs and its allocator\n"
		"\n"
		"'sfs COMMAND --help' describes each command.\n");
}

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

int sfs_node_count(void)
{
	if (numa_available() < 0)
		return 1;
	return numa_max_node() + 1;
}

/* jemalloc is linked as every sfs process's malloc; prove it by asking it.
 * The layout fingerprint is the one this build writes into and demands of
 * a segment (tests/test_segment.c compares it with a test binary's). */
static int cmd_version(void)
{
	int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
		(int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT,
									       "mallctl");
	const char *jv = NULL;
	size_t len = sizeof(jv);

	printf("sfs %d.%d\n", SFS_VERSION_MAJOR, SFS_VERSION_MINOR);
	printf("layout fingerprint %#018llx\n", (unsigned long long)sfs_layout_fingerprint());
	if (mallctl && mallctl("version", &jv, &len, NULL, 0) == 0)
		printf("allocator jemalloc %s\n", jv);
	else
		printf("allocator libc\n");
	return 0;
}

int main(int argc, char **argv)
{
	/* `sfs run --backend rocksdb-direct` checks the name here; the workers
	 * (worker/main.c) register the same backend */
	if (rt_backend_register(&rt_backend_rocksdb_direct))
		return 1;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "run"))
		return sfs_cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stat"))
		return sfs_cmd_stat(argc - 1, argv + 1);
	if (!strcmp(argv[1], "top"))
		return sfs_cmd_top(argc - 1, argv + 1);
	if (!strcmp(argv[1], "get"))
		return sfs_cmd_get(argc - 1, argv + 1);
	if (!strcmp(argv[1], "clean"))
		return sfs_cmd_clean(argc - 1, argv + 1);
	if (!strcmp(argv[1], "checkpoints"))
		return sfs_cmd_checkpoints(argc - 1, argv + 1);
	if (!strcmp(argv[1], "savepoint"))
		return sfs_cmd_savepoint(argc - 1, argv + 1);
	if (!strcmp(argv[1], "inspect"))
		return sfs_cmd_inspect(argc - 1, argv + 1);
	if (!strcmp(argv[1], "export"))
		return sfs_cmd_export(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return sfs_cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "gen"))
		return sfs_cmd_gen(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))
		return cmd_version();
	fprintf(stderr, "sfs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
