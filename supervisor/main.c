/*
 * main.c — `sfs`, the command users run: subcommand dispatch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline/rocksdb_direct.h"
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
		"  gen       write Nexmark events as CSV (person, auction, bid)\n"
		"  version   print versions of sfs and its allocator\n"
		"\n"
		"'sfs COMMAND --help' describes each command.\n");
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
	if (!strcmp(argv[1], "gen"))
		return sfs_cmd_gen(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))
		return sfs_cmd_version(argc - 1, argv + 1);
	fprintf(stderr, "sfs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
