/*
 * run.c — the one timing runner of `bench_state` (bs.h): it runs a
 * step's rows of the case table (cases.c) on the structures a phase set
 * up, does the timing, the repetitions (the structures take turns in a
 * rotating order within each, RocksDB on the first 1/RDB_FRACTION of the
 * sequence), the medians and the ratios, and keeps the results for
 * report.c.  A ratio is the median of the per-repetition ratios: pairs
 * measured seconds apart share the machine's mood.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/state/bs.h"
#include "common/clock.h"
#include "common/err.h"

struct result bs_results[MAX_RESULTS];
unsigned bs_nresults;
struct seal_result bs_seals[MAX_SIZES];
unsigned bs_nseals;
struct bpe bs_bpes[MAX_RESULTS];
unsigned bs_nbpes;
char bs_skipped[MAX_SIZES * MAX_SIZES][200];
unsigned bs_nskipped;
int bs_rdb_spilled;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
	double s[1024];

	if (!n)
		return 0;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int bs_fail(const char *what, int rc)
{
	fprintf(stderr, "bench_state: %s: %s (%s)\n", what,
		sfs_last_error()[0] ? sfs_last_error() : "", sfs_strerror(rc));
	return rc ? rc : -EIO;
}

void bs_progress(const char *fmt, ...)
{
	va_list ap;

	static uint64_t t0;
	uint64_t now = sfs_now_ns();

	if (!t0)
		t0 = now;
	va_start(ap, fmt);
	fprintf(stderr, "  %6.1f s  ", (now - t0) / 1e9);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

const char *bs_size_name(uint64_t n, char *buf, size_t len)
{
	if (n >= 1000000 && n % 1000000 == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(n / 1000000));
	else if (n >= 1000 && n % 1000 == 0)
		snprintf(buf, len, "%lluK", (unsigned long long)(n / 1000));
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

static struct result *result_new(const char *name, uint64_t keys, uint32_t vs)
{
	struct result *r;

	if (bs_nresults == MAX_RESULTS)
		return NULL;
	r = &bs_results[bs_nresults++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->keys = keys;
	r->vsize = vs;
	return r;
}

static void ratios(struct result *r, const double v[NIMPL][MAX_REPS], unsigned reps)
{
	double rr[MAX_REPS], rd[MAX_REPS];

	for (unsigned i = 0; i < reps; i++) {
		rr[i] = v[I_RAW][i] > 0 ? v[I_SFS][i] / v[I_RAW][i] : 0;
		rd[i] = v[I_RDB][i] > 0 ? v[I_SFS][i] / v[I_RDB][i] : 0;
	}
	for (int k = 0; k < NIMPL; k++)
		r->ops_s[k] = median(v[k], reps);
	r->r_raw[0] = median(rr, reps);
	r->r_rdb[0] = median(rd, reps);
	r->r_raw[1] = r->r_raw[2] = rr[0];
	r->r_rdb[1] = r->r_rdb[2] = rd[0];
	for (unsigned i = 1; i < reps; i++) {
		r->r_raw[1] = fmin(r->r_raw[1], rr[i]);
		r->r_raw[2] = fmax(r->r_raw[2], rr[i]);
		r->r_rdb[1] = fmin(r->r_rdb[1], rd[i]);
		r->r_rdb[2] = fmax(r->r_rdb[2], rd[i]);
	}
}

static uint64_t rdb_ops_for(uint64_t ops)
{
	uint64_t n = ops / RDB_FRACTION / BATCH * BATCH;

	return n < RDB_OPS_MIN ? (ops < RDB_OPS_MIN ? ops : RDB_OPS_MIN) : n;
}

/* @x->reps repetitions of @ops random keys of row @c; the structures take
 * turns in a rotating order within each repetition. */
static int measure(const struct bs_run *x, const struct bs_case *c, uint64_t ops,
		   const char *note)
{
	double v[NIMPL][MAX_REPS] = { { 0 } };
	struct result *r = result_new(c->name, x->keys, x->vs);
	uint64_t seed = x->n * c->seed + x->salt;

	if (!r)
		return SFS_EFULL;
	r->reps = x->reps;
	r->ops = ops;
	r->rdb_ops = rdb_ops_for(ops);
	snprintf(r->note, sizeof(r->note), "%s", note);
	for (unsigned rep = 0; rep < x->reps; rep++) {
		int rc = bs_seq_make(ops, seed * 1000 + rep);

		if (rc)
			return rc;
		for (int j = 0; j < NIMPL; j++) {
			int i = (int)((rep + (unsigned)j) % NIMPL);
			uint64_t t0, n = i == I_RDB ? r->rdb_ops : ops;

			if (!x->impl[i])
				continue;
			t0 = sfs_now_ns();
			rc = x->impl[i]->op[c->op](x->arg[i], bs_seq, n);
			if (rc) {
				char what[96];

				snprintf(what, sizeof(what), "%s (%s)", c->name, x->impl[i]->name);
				return bs_fail(what, rc);
			}
			v[i][rep] = (double)n * 1e9 / (double)(sfs_now_ns() - t0);
		}
	}
	ratios(r, v, x->reps);
	return 0;
}

static uint64_t rdb_load_timed(const struct bs_cfg *cfg, uint64_t n)
{
	return cfg->quick && n > QUICK_RDB_TIMED ? QUICK_RDB_TIMED : n;
}

/* The load of all @x->keys keys of row @c (in key-number order: hashed, so
 * random key order), timed once per structure.  RocksDB under --quick
 * times its first QUICK_RDB_TIMED inserts and loads the others untimed
 * (its rest[] of the load's operation). */
static int measure_load(const struct bs_run *x, const struct bs_case *c)
{
	double v[NIMPL][MAX_REPS] = { { 0 } };
	uint64_t keys = x->keys, rdb_timed = rdb_load_timed(x->cfg, keys);
	struct result *r = result_new(c->name, keys, x->vs);

	if (!r)
		return SFS_EFULL;
	r->reps = 1;
	r->ops = keys;
	r->rdb_ops = rdb_timed;
	snprintf(r->note, sizeof(r->note), "one timed load per structure%s",
		 rdb_timed < keys ? "; rocksdb: its first inserts only" : "");
	for (int i = 0; i < NIMPL; i++) {
		uint64_t t0, n = i == I_RDB ? rdb_timed : keys;
		int rc;

		if (!x->impl[i])
			continue;
		t0 = sfs_now_ns();
		rc = x->impl[i]->op[c->op](x->arg[i], bs_keys, n);
		if (rc == 0 && n < keys) {
			v[i][0] = (double)n * 1e9 / (double)(sfs_now_ns() - t0);
			rc = x->impl[i]->rest[c->op] ? x->impl[i]->rest[c->op](x->arg[i], n)
						      : sfs__err(SFS_EUSAGE, "no untimed load");
		} else if (rc == 0) {
			v[i][0] = (double)n * 1e9 / (double)(sfs_now_ns() - t0);
		}
		if (rc) {
			char what[96];

			snprintf(what, sizeof(what), "%s (%s)", c->name, x->impl[i]->name);
			return bs_fail(what, rc);
		}
	}
	ratios(r, v, 1);
	return 0;
}

/* Formats of the case table, whose one argument is the phase's chain
 * length (a row's note or progress line may use it, or not). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void row_text(char *buf, size_t len, const char *fmt, double chain)
{
	snprintf(buf, len, fmt, chain);
}
#pragma GCC diagnostic pop

int bs_run_step(const struct bs_run *x, enum bs_step step)
{
	for (unsigned k = 0; k < bs_ncases; k++) {
		const struct bs_case *c = &bs_cases[k];
		char say[96], note[96];
		int rc;

		if (c->step != step || (c->only && !(x->cfg->cases & c->only)))
			continue;
		if (!c->seed) {
			rc = measure_load(x, c);
		} else {
			row_text(say, sizeof(say), c->say ? c->say : c->name, x->chain);
			row_text(note, sizeof(note), c->note ? c->note : "", x->chain);
			bs_progress("%s", say);
			rc = measure(x, c, x->count[c->count], note);
		}
		if (rc)
			return rc;
	}
	return 0;
}

void bs_bpe_add(const char *kind, uint32_t vs, uint64_t keys, double sfs, double arena,
		    double store, double raw, double rdb)
{
	struct bpe *e;

	if (bs_nbpes == MAX_RESULTS)
		return;
	e = &bs_bpes[bs_nbpes++];
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	e->vsize = vs;
	e->keys = keys;
	e->sfs = sfs;
	e->sfs_arena = arena;
	e->store = store;
	e->raw = raw;
	e->rdb = rdb;
}
