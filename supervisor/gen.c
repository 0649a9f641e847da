/*
 * gen.c — `sfs gen`: write a Nexmark event stream as three CSV files
 * (DIR/person.csv, auction.csv, bid.csv; nexmark/csv.h), the input of batch
 * checks and of file-fed runs.  Events n = 0..N-1 of the configuration are
 * generated in order and each line goes to its kind's file; the seq column
 * (the event id) interleaves them back.
 *
 * --first-event K moves the event *number* (not Beam's first event id), so
 * `--first-event K --events M` writes exactly the lines K..K+M-1 of a longer
 * run, timestamps included: a replay from an offset.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sfs.h"
#include "common/fs.h"
#include "nexmark/csv.h"
#include "nexmark/gen.h"
#include "supervisor/args.h"
#include "supervisor/sup.h"

/* stdio buffer per file: a few hundred lines per write(2). */
#define GEN_BUF_BYTES (1u << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sfs gen --events N --out DIR [--rate R] [--first-event K] [--base-time MS]\n"
		"\n"
		"Write Nexmark events 0..N-1 to DIR/person.csv, DIR/auction.csv and\n"
		"DIR/bid.csv (DIR is created if missing).  Deterministic: the same options\n"
		"give the same bytes.\n"
		"\n"
		"  --events N        how many events (person:auction:bid = 1:3:46)\n"
		"  --out DIR         output directory\n"
		"  --rate R          events per second of event time (10000000)\n"
		"  --first-event K   start at event number K: the lines K.. of a longer run (0)\n"
		"  --base-time MS    epoch ms of event 0 (1436918400000, 2015-07-15 UTC)\n");
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t cap, char **buf)
{
	FILE *f;

	snprintf(path, cap, "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	*buf = malloc(GEN_BUF_BYTES);
	if (*buf)
		setvbuf(f, *buf, _IOFBF, GEN_BUF_BYTES);
	return f;
}

int sfs_cmd_gen(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "events", required_argument, NULL, 'n' },
		{ "out", required_argument, NULL, 'o' },
		{ "rate", required_argument, NULL, 'r' },
		{ "first-event", required_argument, NULL, 'f' },
		{ "base-time", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const names[] = { "person.csv", "auction.csv", "bid.csv" };
	char paths[3][PATH_MAX], *bufs[3] = { NULL, NULL, NULL }, line[NX_CSV_LINE_MAX];
	const char *out = NULL;
	struct nx_config cfg;
	struct nx_event ev;
	uint64_t counts[3] = { 0, 0, 0 };
	FILE *files[3] = { NULL, NULL, NULL };
	int c, rc = 0, have_events = 0;

	nx_config_default(&cfg);
	optind = 1;
	opterr = 0;	/* our own one-line messages */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			cfg.events = (uint64_t)sfs_arg_num("gen", "--events", optarg, 1, LONG_MAX);
			have_events = 1;
			break;
		case 'o':
			out = optarg;
			break;
		case 'r':
			cfg.rate = (double)sfs_arg_num("gen", "--rate", optarg, 1, LONG_MAX);
			break;
		case 'f':
			cfg.first_event_number =
				(uint64_t)sfs_arg_num("gen", "--first-event", optarg, 0, LONG_MAX);
			break;
		case 'b':
			cfg.base_time_ms = sfs_arg_num("gen", "--base-time", optarg, 0, LONG_MAX);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "sfs gen: %s needs a value (see sfs gen --help)\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "sfs gen: unknown option '%s' (see sfs gen --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sfs gen: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!have_events) {
		fprintf(stderr, "sfs gen: --events N is required (N >= 1)\n");
		return 2;
	}
	if (!out || !*out) {
		fprintf(stderr, "sfs gen: --out DIR is required\n");
		return 2;
	}
	/* Event time is computed in double: keep every event number exact. */
	if (cfg.first_event_number + cfg.events > (1ull << 53)) {
		fprintf(stderr, "sfs gen: --first-event + --events must stay below 2^53\n");
		return 2;
	}
	/* 0755, not the 0700 of job state: generated input is meant to be read
	 * by other users and tools (the engines it is compared with). */
	rc = sfs_mkdirs(out, 0755);
	if (rc) {
		fprintf(stderr, "sfs gen: %s\n", sfs_last_error());
		return 2;
	}
	for (int k = 0; k < 3; k++) {
		files[k] = open_out(out, names[k], paths[k], sizeof(paths[k]), &bufs[k]);
		if (!files[k]) {
			fprintf(stderr, "sfs gen: cannot write '%s': %s\n", paths[k], strerror(errno));
			rc = 2;
			goto out;
		}
		fputs(nx_csv_header((enum nx_kind)k), files[k]);
	}

	for (uint64_t n = 0; n < cfg.events; n++) {
		size_t len;

		nx_event(&cfg, n, &ev);
		len = nx_csv_event(line, &ev);
		fwrite_unlocked(line, 1, len, files[ev.kind]);
		counts[ev.kind]++;
	}

out:
	for (int k = 0; k < 3; k++) {
		if (!files[k])
			continue;
		if ((ferror(files[k]) | fclose(files[k])) && !rc) {
			fprintf(stderr, "sfs gen: writing '%s' failed: %s\n", paths[k],
				strerror(errno ? errno : EIO));
			rc = 1;
		}
		free(bufs[k]);
	}
	if (!rc)
		printf("sfs gen: %llu events: %llu persons, %llu auctions, %llu bids in %s\n",
		       (unsigned long long)cfg.events, (unsigned long long)counts[NX_PERSON],
		       (unsigned long long)counts[NX_AUCTION], (unsigned long long)counts[NX_BID],
		       out);
	return rc;
}
