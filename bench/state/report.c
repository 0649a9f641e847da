/*
 * report.c — what `bench_state` prints (bs.h): the table of the case
 * rows with their notes, the barrier latencies, the bytes per live entry
 * and issue 3's targets; or, with --json, the same as one object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/state/bs.h"

static const struct result *find_result(const char *name, uint64_t keys, uint32_t vs)
{
	for (unsigned i = 0; i < bs_nresults; i++)
		if (!strcmp(bs_results[i].name, name) && bs_results[i].keys == keys &&
		    bs_results[i].vsize == vs)
			return &bs_results[i];
	return NULL;
}

/* Targets of issue 3 at 1M keys: value put and get >= 0.5x raw, >= 20x rocksdb. */
static void targets(const struct bs_cfg *cfg, FILE *f, int json)
{
	static const char *const names[] = { "value put", "value get (active buffer)" };
	int first = 1;

	for (unsigned v = 0; v < cfg->nvs; v++)
		for (unsigned k = 0; k < 2; k++) {
			const struct result *r = find_result(names[k], 1000000, cfg->vs[v]);
			int raw_ok, rdb_ok;

			if (!r)
				continue;
			raw_ok = r->r_raw[0] >= 0.5;
			rdb_ok = r->r_rdb[0] >= 20;
			if (json) {
				fprintf(f,
					"%s{\"name\": \"%s\", \"value_size\": %u, \"ratio_vs_raw\": %.3f, "
					"\"raw_target_met\": %s, \"ratio_vs_rocksdb\": %.2f, "
					"\"rocksdb_target_met\": %s}",
					first ? "" : ", ", r->name, r->vsize, r->r_raw[0],
					raw_ok ? "true" : "false", r->r_rdb[0],
					cfg->no_rocksdb ? "null" : rdb_ok ? "true" : "false");
			} else {
				fprintf(f, "  %-28s %3u B: %.2fx raw (>= 0.5: %s), %.1fx rocksdb (>= 20: %s)\n",
					r->name, r->vsize, r->r_raw[0], raw_ok ? "met" : "NOT met",
					r->r_rdb[0],
					cfg->no_rocksdb ? "not run" : rdb_ok ? "met" : "NOT met");
			}
			first = 0;
		}
	if (first && !json)
		fprintf(f, "  (no 1M-key run: targets not evaluated)\n");
}

void bs_print_text(const struct bs_cfg *cfg)
{
	char nb[24];
	double load[3];

	getloadavg(load, 3);
	printf("bench_state — node 0, %ld CPUs, load %.2f %.2f %.2f%s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2],
	       cfg->quick ? " (--quick)" : "");
	printf("ops/s are medians over the repetitions; ratios are medians of per-repetition "
	       "ratios [lowest-highest]\n\n");
	printf("%-28s %5s %5s %10s %10s %10s %19s %19s\n", "case", "keys", "value", "sfs Mops/s",
	       "raw Mops/s", "rdb Mops/s", "x raw", "x rocksdb");
	for (unsigned i = 0; i < bs_nresults; i++) {
		const struct result *r = &bs_results[i];
		char a[48], b[48];

		snprintf(a, sizeof(a), "%.2g [%.2g-%.2g]", r->r_raw[0], r->r_raw[1], r->r_raw[2]);
		if (r->ops_s[I_RDB] > 0)
			snprintf(b, sizeof(b), "%.3g [%.3g-%.3g]", r->r_rdb[0], r->r_rdb[1],
				 r->r_rdb[2]);
		else
			snprintf(b, sizeof(b), "-");
		printf("%-28s %5s %5u %10.3g %10.3g %10.3g %19s %19s\n", r->name,
		       bs_size_name(r->keys, nb, sizeof(nb)), r->vsize, r->ops_s[I_SFS] / 1e6,
		       r->ops_s[I_RAW] / 1e6, r->ops_s[I_RDB] / 1e6, a, b);
	}
	printf("\ncase notes:\n");
	for (unsigned i = 0; i < bs_nresults; i++) {
		int seen = 0;

		for (unsigned j = 0; j < i; j++)
			seen |= !strcmp(bs_results[j].name, bs_results[i].name) &&
				!strcmp(bs_results[j].note, bs_results[i].note);
		if (!seen && bs_results[i].note[0])
			printf("  %-28s %s\n", bs_results[i].name, bs_results[i].note);
	}
	printf("  rocksdb runs 1/%d of each repetition's operations (>= %u)\n", RDB_FRACTION,
	       RDB_OPS_MIN);
	printf("  not measured: map/list reads from the flushed store, list state\n");
	printf("\nbarrier seal+swap (sfs_barrier), flusher draining between barriers, untimed:\n");
	for (unsigned i = 0; i < bs_nseals; i++)
		printf("  %5s live entries: median %.2f us, p99 %.2f us, max %.2f us (%u samples, "
		       "%llu stalls)\n",
		       bs_size_name(bs_seals[i].keys, nb, sizeof(nb)), bs_seals[i].median, bs_seals[i].p99,
		       bs_seals[i].max, bs_seals[i].n, (unsigned long long)bs_seals[i].stalls);
	printf("\nbytes per live entry (16-byte keys):\n");
	printf("  %-8s %5s %5s %12s %12s %12s %8s %12s\n", "state", "keys", "value", "sfs buffer",
	       "(arena)", "sfs store", "raw", "rdb memtable");
	for (unsigned i = 0; i < bs_nbpes; i++) {
		const struct bpe *e = &bs_bpes[i];

		char st[16];

		snprintf(st, sizeof(st), e->store > 0 ? "%.1f" : "-", e->store);
		printf("  %-8s %5s %5u %12.1f %12.1f %12s %8.1f %12.1f\n", e->kind,
		       bs_size_name(e->keys, nb, sizeof(nb)), e->vsize, e->sfs, e->sfs_arena, st,
		       e->raw, e->rdb);
	}
	printf("\ntargets (issue 3, at 1M keys):\n");
	targets(cfg, stdout, 0);
	printf("  barrier median < 10 us:");
	for (unsigned i = 0; i < bs_nseals; i++)
		printf(" %s %s", bs_size_name(bs_seals[i].keys, nb, sizeof(nb)),
		       bs_seals[i].median < 10 ? "met" : "NOT met");
	printf("\n");
	for (unsigned i = 0; i < bs_nskipped; i++)
		printf("\n%s", bs_skipped[i]);
	if (bs_rdb_spilled)
		printf("\nwarning: a RocksDB run left its memtable; see stderr\n");
	printf("\nnotes: a quiescent point every %u operations; sfs insert/put overwrite append "
	       "to the buffer's arena (prefaulted);\n"
	       "  flushed-store reads go through the (empty) active buffer%s; multiget ops/s count "
	       "keys.\n",
	       BATCH,
#ifdef SFS_WORKER_NO_CACHE
	       ", value cache off"
#else
	       ""
#endif
	);
}

void bs_print_json(const struct bs_cfg *cfg)
{
	char date[32];
	time_t now = time(NULL);
	double load[3];

	getloadavg(load, 3);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
	printf("{\"node\": 0, \"quick\": %s, \"date\": \"%s\", \"cpus\": %ld, "
	       "\"loadavg\": [%.2f, %.2f, %.2f], \"batch\": %u, \"cases\": [",
	       cfg->quick ? "true" : "false", date, sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1],
	       load[2], BATCH);
	for (unsigned i = 0; i < bs_nresults; i++) {
		const struct result *r = &bs_results[i];

		printf("%s\n  {\"name\": \"%s\", \"keys\": %llu, \"value_size\": %u, "
		       "\"ops_per_sec\": %.0f, \"ratio_vs_raw\": %.4f, ",
		       i ? "," : "", r->name, (unsigned long long)r->keys, r->vsize, r->ops_s[I_SFS],
		       r->r_raw[0]);
		if (r->ops_s[I_RDB] > 0)
			printf("\"ratio_vs_rocksdb\": %.3f, ", r->r_rdb[0]);
		else
			printf("\"ratio_vs_rocksdb\": null, ");
		printf("\"raw_ops_per_sec\": %.0f, \"rocksdb_ops_per_sec\": %.0f, "
		       "\"ratio_vs_raw_range\": [%.4f, %.4f], \"ratio_vs_rocksdb_range\": [%.3f, %.3f], "
		       "\"reps\": %u, \"ops_per_rep\": %llu, \"rocksdb_ops_per_rep\": %llu, "
		       "\"note\": \"%s\"}",
		       r->ops_s[I_RAW], r->ops_s[I_RDB], r->r_raw[1], r->r_raw[2], r->r_rdb[1],
		       r->r_rdb[2], r->reps, (unsigned long long)r->ops,
		       (unsigned long long)r->rdb_ops, r->note);
	}
	printf("],\n \"not_measured\": [\"map/list reads from the flushed store\", \"list state\"],"
	       "\n \"seal_us_median\": {");
	for (unsigned i = 0; i < bs_nseals; i++)
		printf("%s\"%llu\": %.3f", i ? ", " : "", (unsigned long long)bs_seals[i].keys,
		       bs_seals[i].median);
	printf("},\n \"seal_us_p99\": {");
	for (unsigned i = 0; i < bs_nseals; i++)
		printf("%s\"%llu\": %.3f", i ? ", " : "", (unsigned long long)bs_seals[i].keys,
		       bs_seals[i].p99);
	printf("},\n \"seal_samples\": {");
	for (unsigned i = 0; i < bs_nseals; i++)
		printf("%s\"%llu\": %u", i ? ", " : "", (unsigned long long)bs_seals[i].keys, bs_seals[i].n);
	/* bytes_per_entry: {"value/16": {"10000": x, ...}, "counter/8": {...}} */
	printf("},\n \"bytes_per_entry\": {");
	for (unsigned i = 0, first = 1; i < bs_nbpes; i++) {
		int seen = 0;

		for (unsigned j = 0; j < i; j++)
			seen |= !strcmp(bs_bpes[j].kind, bs_bpes[i].kind) && bs_bpes[j].vsize == bs_bpes[i].vsize;
		if (seen)
			continue;
		printf("%s\"%s/%u\": {", first ? "" : ", ", bs_bpes[i].kind, bs_bpes[i].vsize);
		for (unsigned j = i, f2 = 1; j < bs_nbpes; j++)
			if (!strcmp(bs_bpes[j].kind, bs_bpes[i].kind) && bs_bpes[j].vsize == bs_bpes[i].vsize) {
				printf("%s\"%llu\": %.2f", f2 ? "" : ", ",
				       (unsigned long long)bs_bpes[j].keys, bs_bpes[j].sfs);
				f2 = 0;
			}
		printf("}");
		first = 0;
	}
	printf("},\n \"bytes_per_entry_detail\": [");
	for (unsigned i = 0; i < bs_nbpes; i++)
		printf("%s\n  {\"state\": \"%s\", \"keys\": %llu, \"value_size\": %u, "
		       "\"sfs_buffer\": %.2f, \"sfs_buffer_arena\": %.2f, \"sfs_store\": %.2f, "
		       "\"raw\": %.2f, \"rocksdb_memtable\": %.2f}",
		       i ? "," : "", bs_bpes[i].kind, (unsigned long long)bs_bpes[i].keys, bs_bpes[i].vsize,
		       bs_bpes[i].sfs, bs_bpes[i].sfs_arena, bs_bpes[i].store, bs_bpes[i].raw, bs_bpes[i].rdb);
	printf("],\n \"targets\": [");
	targets(cfg, stdout, 1);
	printf("],\n \"skipped\": [");
	for (unsigned i = 0; i < bs_nskipped; i++)
		printf("%s\"%s\"", i ? ", " : "", bs_skipped[i]);
	printf("],\n \"rocksdb_memtable_only\": %s}\n", bs_rdb_spilled ? "false" : "true");
}
