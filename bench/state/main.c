/*
 * main.c — bench_state, the keyed-state benchmark's program
 * ($(BUILD)/bench/bench_state; bs.h for what it measures): options, the
 * phases per size, the report; and the cleanup on SIGINT/SIGTERM/SIGHUP of
 * the live segment and RocksDB directory.  A program of its own, beside
 * the other benchmarks, so that bin/sfs (the product's CLI) depends on no
 * benchmark.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench/state/bs.h"
#include "common/clock.h"

char bs_seg_path[256];
char bs_rdb_dir[256];

/* Async-signal-safe: unlink the segment, empty and remove the RocksDB
 * directory with raw getdents64, exit. */
static void on_signal(int sig)
{
	if (bs_seg_path[0])
		unlink(bs_seg_path);
	if (bs_rdb_dir[0]) {
		int fd = open(bs_rdb_dir, O_RDONLY | O_DIRECTORY);
		char buf[4096];
		long n;

		while (fd >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
			for (long off = 0; off < n;) {
				struct {
					uint64_t ino;
					int64_t off;
					unsigned short reclen;
					unsigned char type;
					char name[];
				} *d = (void *)(buf + off);

				if (d->name[0] != '.')
					unlinkat(fd, d->name, 0);
				off += d->reclen;
			}
		}
		if (fd >= 0)
			close(fd);
		rmdir(bs_rdb_dir);
	}
	_exit(128 + sig);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_state [--quick] [--json] [--keys N,...] [--value-sizes V,...]\n"
		"                   [--reps R] [--ops N] [--no-rocksdb] [--cases LIST]\n"
		"Keyed-state hot paths (value put/get, reads through to the flushed memory\n"
		"store, multiget, map put/iterate, counter add, barrier seal+swap) against a\n"
		"raw in-process hash table and RocksDB (memtable, WAL off), measured in this\n"
		"command.  --quick (10K and 1M keys) takes about 25 s, the full run ~15 min.\n"
		"  --keys         live keys per run (default 10K,1M,10M; --quick 10K,1M);\n"
		"                 K and M suffixes accepted\n"
		"  --value-sizes  value bytes (default 16,64,256; 8..65536; map state uses\n"
		"                 the middle one)\n"
		"  --reps         repetitions per case (default 5; 3 with --quick or >= 5M keys)\n"
		"  --ops          operations per repetition (default 500K/1M; 100K with --quick)\n"
		"  --no-rocksdb   skip the RocksDB baseline (profiling)\n"
		"  --cases        only these (profiling): put,get,multiget,store,counter,seal,map;\n"
		"                 the loads of the chosen phases always run\n"
		"  --json         one JSON object on stdout (progress goes to stderr)\n");
}

static int parse_list(const char *s, uint64_t *out, unsigned max, uint64_t lo, uint64_t hi,
		      const char *opt)
{
	const char *arg = s;
	unsigned n = 0;

	while (*s) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(s, &end, 10);
		if (end == s || errno)
			goto bad;
		if (*end == 'K' || *end == 'k')
			v *= 1000, end++;
		else if (*end == 'M' || *end == 'm')
			v *= 1000000, end++;
		if (v < lo || v > hi || n == max || (*end && *end != ','))
			goto bad;
		out[n++] = v;
		s = *end ? end + 1 : end;
	}
	if (n)
		return (int)n;
bad:
	if (max == 1)
		fprintf(stderr, "bench_state: %s: '%s' is not a number in [%llu, %llu]\n", opt,
			arg, (unsigned long long)lo, (unsigned long long)hi);
	else
		fprintf(stderr, "bench_state: %s: expected up to %u comma-separated numbers in "
				"[%llu, %llu]\n", opt, max, (unsigned long long)lo,
			(unsigned long long)hi);
	exit(2);
}

static unsigned parse_cases(const char *arg)
{
	static const struct {
		const char *name;
		unsigned bit;
	} known[] = { { "put", C_PUT },	    { "get", C_GET },	      { "multiget", C_MGET },
		      { "store", C_STORE }, { "counter", C_COUNTER }, { "seal", C_SEAL },
		      { "map", C_MAP } };
	char buf[256], *save = NULL;
	unsigned bits = 0;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned k;

		for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (!strcmp(t, known[k].name))
				break;
		if (k == sizeof(known) / sizeof(known[0])) {
			fprintf(stderr, "bench_state: --cases: unknown case '%s' (put, get, "
					"multiget, store, counter, seal, map)\n", t);
			exit(2);
		}
		bits |= known[k].bit;
	}
	return bits;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'J' },
		{ "keys", required_argument, NULL, 'k' },
		{ "value-sizes", required_argument, NULL, 'v' },
		{ "reps", required_argument, NULL, 'r' },
		{ "ops", required_argument, NULL, 'o' },
		{ "no-rocksdb", no_argument, NULL, 'R' },
		{ "cases", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bs_cfg cfg = { 0 };
	uint64_t tmp[MAX_SIZES], seal_small, seal_big = 0, t0 = sfs_now_ns();
	int c, rc = 0, keys_given = 0;
	struct sigaction sa;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'q': cfg.quick = 1; break;
		case 'J': cfg.json = 1; break;
		case 'R': cfg.no_rocksdb = 1; break;
		case 'k':
			cfg.nkeys = (unsigned)parse_list(optarg, cfg.keys, MAX_SIZES, 64, 200000000,
							 "--keys");
			keys_given = 1;
			break;
		case 'v':
			cfg.nvs = (unsigned)parse_list(optarg, tmp, MAX_SIZES, 8, 65536,
						       "--value-sizes");
			for (unsigned i = 0; i < cfg.nvs; i++)
				cfg.vs[i] = (uint32_t)tmp[i];
			break;
		case 'r':
			parse_list(optarg, tmp, 1, 1, MAX_REPS, "--reps");
			cfg.reps = (unsigned)tmp[0];
			break;
		case 'o':
			parse_list(optarg, tmp, 1, BATCH, 1000000000, "--ops");
			cfg.ops = tmp[0];
			break;
		case 'c':
			cfg.cases = parse_cases(optarg);
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!cfg.cases)
		cfg.cases = C_ALL;
	if (!keys_given) {
		cfg.keys[0] = 10000;
		cfg.keys[1] = 1000000;
		cfg.keys[2] = 10000000;
		cfg.nkeys = cfg.quick ? 2 : 3;
	}
	if (!cfg.nvs) {
		cfg.vs[0] = 16;
		cfg.vs[1] = 64;
		cfg.vs[2] = 256;
		cfg.nvs = 3;
	}
	/* Seal latency at 10K (or the smallest size) and at the largest. */
	seal_small = cfg.keys[0];
	for (unsigned i = 0; i < cfg.nkeys; i++) {
		if (cfg.keys[i] == 10000 || (seal_small != 10000 && cfg.keys[i] < seal_small))
			seal_small = cfg.keys[i];
		if (cfg.keys[i] > seal_big)
			seal_big = cfg.keys[i];
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	for (unsigned k = 0; k < cfg.nkeys && rc == 0; k++) {
		uint64_t n = cfg.keys[k];

		for (unsigned v = 0; v < cfg.nvs && rc == 0; v++)
			if (cfg.cases & (C_PUT | C_GET | C_MGET | C_STORE))
				rc = bs_phase_value(&cfg, n, cfg.vs[v]);
		if (rc == 0 && (cfg.cases & C_MAP))
			rc = bs_phase_map(&cfg, n, cfg.vs[cfg.nvs / 2]);
		if (rc == 0 && (cfg.cases & (C_COUNTER | C_SEAL)))
			rc = bs_phase_counter(&cfg, n, n == seal_small || n == seal_big);
	}
	bs_keys_free();
	if (rc) {
		fprintf(stderr, "bench_state: stopped: %s\n", sfs_strerror(rc));
		return 1;
	}
	fprintf(stderr, "[done in %.1f s]\n", (sfs_now_ns() - t0) / 1e9);
	if (cfg.json)
		bs_print_json(&cfg);
	else
		bs_print_text(&cfg);
	return 0;
}
