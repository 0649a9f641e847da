/*
 * seed_sinklog.c — writes fuzz_sinklog's seed corpus into DIR: changelogs
 * written by rt_sink_write_epoch, the sink's writer, from EPOCH-mode sinks
 * fed upserts, deletes and multiset counts (empty; keyed only; counted
 * only; mixed, large rows), each prefixed with the target's mode byte
 * (once raw, once "reseal").
 *
 *   seed_sinklog DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "runtime/sink.h"
#include "runtime/util.h"
#include "tests/fuzz/seed.h"

static int seed(const char *dir, const char *scratch, int n, int puts, int dels, int adds)
{
	struct rt_sink s;
	char path[4096], key[32], row[600], fill[501];
	uint64_t recs;
	FILE *f;
	int rc;

	memset(fill, 'x', sizeof(fill) - 1);
	fill[sizeof(fill) - 1] = 0;
	if ((rc = rt_sink_init(&s, RT_SINK_EPOCH)))
		return rc;
	for (int i = 0; i < puts && !rc; i++) {
		int kl = snprintf(key, sizeof(key), "k%d", i);
		int rl = snprintf(row, sizeof(row), "%d,row %d,%.*s", i, n, i * 7 % 500, fill);

		rc = rt_sink_put(&s, key, (size_t)kl, row, (size_t)rl);
	}
	for (int i = 0; i < dels && !rc; i++) {
		int kl = snprintf(key, sizeof(key), "k%d", i * 2);

		rc = rt_sink_del(&s, key, (size_t)kl);
	}
	for (int i = 0; i < adds && !rc; i++) {
		int rl = snprintf(row, sizeof(row), "counted,%d", i % 5);

		rc = rt_sink_add(&s, row, (size_t)rl, i % 3 == 2 ? -1 : 1);
	}
	if (!rc)
		rc = rt_sink_write_epoch(&s, scratch, (uint32_t)n, (uint64_t)n + 1, &recs);
	rt_sink_free(&s);
	if (rc)
		return rc;
	rt_sink_path(path, sizeof(path), scratch, (uint32_t)n, (uint64_t)n + 1, 0);
	if (!(f = fopen(path, "rb")))
		return -1;
	return seed_write_moded(f, path, dir, n);
}

int main(int argc, char **argv)
{
	static const int sets[][3] = { { 0, 0, 0 }, { 3, 0, 0 }, { 4, 2, 0 }, { 0, 0, 7 },
				       { 10, 3, 12 }, { 60, 20, 30 } };
	char scratch[] = "/tmp/sfs-seed-sinklog-XXXXXX";

	if (argc != 2) {
		fprintf(stderr, "usage: seed_sinklog DIR\n");
		return 2;
	}
	if (!mkdtemp(scratch))
		return perror("mkdtemp"), 1;
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++)
		if (seed(argv[1], scratch, (int)i, sets[i][0], sets[i][1], sets[i][2])) {
			fprintf(stderr, "seed_sinklog: %s\n", rt_last_error());
			sfs_rmtree(scratch);
			return 1;
		}
	sfs_rmtree(scratch);
	return 0;
}
