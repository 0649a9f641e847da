/*
 * bench_gen.c — how fast nexmark/gen.c makes events: nx_event() over events
 * 0..N-1 of the default configuration (person:auction:bid = 1:3:46), and
 * the same plus nx_csv_event() (what `sfs gen` and the CSV sink pay per
 * line, without the write).  The runtime calls nx_event once per source
 * event, so its rate bounds a single-core source; the target is >= 3M/s.
 *
 *   make build/bench/bench_gen && ./build/bench/bench_gen [N]
 *
 * N defaults to 2M.  Each figure is the median of 3 runs; one warm-up pass
 * first builds the channel url table and faults in the pages.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "nexmark/csv.h"
#include "nexmark/gen.h"

#define RUNS 3

/* Keeps the compiler from dropping the work. */
static volatile uint64_t sink;

static uint64_t run(const struct nx_config *c, uint64_t n, int csv)
{
	static char line[NX_CSV_LINE_MAX];
	struct nx_event e;
	uint64_t t0 = sfs_now_ns(), acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		nx_event(c, i, &e);
		acc += csv ? nx_csv_event(line, &e) : e.seq;
	}
	sink = acc;
	return sfs_now_ns() - t0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
	struct nx_config c;

	if (n == 0) {
		fprintf(stderr, "usage: bench_gen [N > 0]\n");
		return 2;
	}
	nx_config_default(&c);
	run(&c, n / 10 + 1, 1);
	for (int csv = 0; csv <= 1; csv++) {
		uint64_t t[RUNS];
		double ns;

		for (int r = 0; r < RUNS; r++)
			t[r] = run(&c, n, csv);
		qsort(t, RUNS, sizeof(t[0]), cmp_u64);
		ns = (double)t[RUNS / 2] / (double)n;
		printf("%-24s %lu events: %6.1f ns/event  %6.2f Mevents/s  (median of %d)\n",
		       csv ? "nx_event+nx_csv_event" : "nx_event", (unsigned long)n, ns, 1e3 / ns,
		       RUNS);
	}
	return 0;
}
