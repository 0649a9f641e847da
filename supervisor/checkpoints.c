/*
 * checkpoints.c — `sfs checkpoints` lists a data directory's checkpoints
 * and `sfs savepoint` writes a self-contained copy of one: thin commands
 * over checkpointer/ckstore.h, which holds the format and every check.
 * The storage root of --data DIR is DIR/checkpoints.  Both only read the
 * storage: nothing there is created, repaired or deleted.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpointer/ckstore.h"
#include "sfs.h"
#include "supervisor/args.h"
#include "supervisor/sup.h"

typedef unsigned long long ull;

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < ' ')
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* One object per checkpoint, newest first; invalid ones with the reason. */
static int list_json(const char root[PATH_MAX - 64])
{
	uint64_t *ids;
	size_t n;
	int rc = sfs__ck_ids(root, &ids, &n);

	if (rc)
		return rc;
	printf("{\"root\": ");
	json_str(root);
	printf(", \"checkpoints\": [");
	for (size_t i = 0; i < n; i++) {
		char dir[PATH_MAX];
		struct ck_meta m;

		snprintf(dir, sizeof(dir), "%s/chk-%llu", root, (ull)ids[i]);
		printf("%s{\"id\": %llu, ", i ? ", " : "", (ull)ids[i]);
		if (sfs__ck_read(dir, NULL, 0, &m)) {
			printf("\"valid\": false, \"error\": ");
			json_str(sfs_last_error());
			printf("}");
			continue;
		}
		printf("\"valid\": true, \"job\": ");
		json_str(m.job);
		printf(", \"time_ms\": %llu, \"size\": %llu, \"new_bytes\": %llu, \"files\": %u, "
		       "\"workers\": %u, \"sink_epoch\": %llu, \"config\": ",
		       (ull)m.time_ms, (ull)m.total_bytes, (ull)m.new_bytes, m.nfiles, m.workers,
		       (ull)m.sink_epoch);
		json_str(m.config);
		printf("}");
		sfs__ck_meta_free(&m);
	}
	printf("]}\n");
	free(ids);
	return 0;
}

static void usage_list(FILE *f)
{
	fprintf(f, "usage: sfs checkpoints --data DIR | --job NAME [--json]\n"
		   "Lists the checkpoints under DIR/checkpoints, newest first: id, time,\n"
		   "job, size, bytes new in that checkpoint, files.  Invalid ones are shown\n"
		   "with the reason (files are checked for presence and size, not content).\n");
}

static void usage_savepoint(FILE *f)
{
	fprintf(f, "usage: sfs savepoint --data DIR | --job NAME --id N|latest --out DEST\n"
		   "(--job NAME: the data directory sfs run uses by default, /tmp/sfs-NAME,\n"
		   "and only that job's checkpoints)\n"
		   "Writes a self-contained copy of checkpoint N (or the newest valid one)\n"
		   "of DIR/checkpoints to DEST (new or empty), after checking every file's\n"
		   "crc32c.  DEST is a checkpoint storage root of its own: it survives the\n"
		   "deletion of DIR (files are hard-linked on the same filesystem, copied\n"
		   "across filesystems).\n");
}

static const char *job_name;        /* --job */
static char job_data[PATH_MAX];

/* getopt_long over @opts: 'd' --data, 'j' --job, 'J' --json, 'i' --id, 'o' --out.
 * 0 to go on, or the exit code (0 for --help, 2 for a bad argument). */
static int parse(const char *cmd, int argc, char **argv, const struct option *opts,
		 void (*usage)(FILE *), const char **data, int *json, const char **id, const char **out)
{
	int c;

	optind = 1;
	opterr = 0;	/* our own one-line messages */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': *data = optarg; break;
		case 'j': job_name = optarg; break;
		case 'J': *json = 1; break;
		case 'i': *id = optarg; break;
		case 'o': *out = optarg; break;
		case 'h': usage(stdout); return -1;
		case ':':
			fprintf(stderr, "sfs %s: %s needs a value (see sfs %s --help)\n", cmd,
				argv[optind - 1], cmd);
			return 2;
		default:
			fprintf(stderr, "sfs %s: unknown option '%s' (see sfs %s --help)\n", cmd,
				argv[optind - 1], cmd);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sfs %s: unexpected argument '%s'\n", cmd, argv[optind]);
		return 2;
	}
	if ((!*data || !**data) && job_name && *job_name && !strchr(job_name, '/')) {
		snprintf(job_data, sizeof(job_data), "/tmp/sfs-%s", job_name);
		*data = job_data;
	}
	if (!*data || !**data) {
		fprintf(stderr, "sfs %s: --data DIR or --job NAME is required\n", cmd);
		return 2;
	}
	return 0;
}

int sfs_cmd_checkpoints(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "job", required_argument, NULL, 'j' },
		{ "json", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data = NULL, *id = NULL, *out = NULL;
	char root[PATH_MAX - 64];
	int json = 0, rc;

	rc = parse("checkpoints", argc, argv, opts, usage_list, &data, &json, &id, &out);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (snprintf(root, sizeof(root), "%s/checkpoints", data) >= (int)sizeof(root)) {
		fprintf(stderr, "sfs checkpoints: --data: path too long\n");
		return 2;
	}
	rc = json ? list_json(root) : sfs__ck_list(root, stdout);
	if (rc) {
		fprintf(stderr, "sfs checkpoints: %s\n", sfs_last_error());
		return 1;
	}
	return 0;
}

int sfs_cmd_savepoint(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "job", required_argument, NULL, 'j' },
		{ "id", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *data = NULL, *id = NULL, *out = NULL;
	char root[PATH_MAX - 64], src[PATH_MAX];
	struct ck_meta m;
	int json = 0, rc;

	rc = parse("savepoint", argc, argv, opts, usage_savepoint, &data, &json, &id, &out);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!id || !out || !*out) {
		fprintf(stderr, "sfs savepoint: %s is required\n", !id ? "--id N|latest" : "--out DEST");
		return 2;
	}
	if (snprintf(root, sizeof(root), "%s/checkpoints", data) >= (int)sizeof(root)) {
		fprintf(stderr, "sfs savepoint: --data: path too long\n");
		return 2;
	}
	if (!strcmp(id, "latest")) {
		if (sfs__ck_latest(root, job_name, 1, &m, src, sizeof(src))) {
			fprintf(stderr, "sfs savepoint: %s\n", sfs_last_error());
			return 1;
		}
		sfs__ck_meta_free(&m);
	} else {
		snprintf(src, sizeof(src), "%s/chk-%ld", root,
			 sfs_arg_num("savepoint", "--id", id, 1, LONG_MAX));
	}
	if (sfs__ck_savepoint(root, src, out) || sfs__ck_read(src, NULL, 0, &m)) {
		fprintf(stderr, "sfs savepoint: %s\n", sfs_last_error());
		return 1;
	}
	printf("sfs savepoint: chk-%llu of job %s (%u files, %llu bytes) saved to %s\n", (ull)m.id,
	       m.job, m.nfiles, (ull)m.total_bytes, out);
	sfs__ck_meta_free(&m);
	return 0;
}
