/*
 * test_runtime.c — the runtime's own pieces: the exchange channel between
 * two processes (order, content, wrap-around, full ring), the result sink
 * against a simple reference under random upserts/deletes/inserts/retracts,
 * its sorted part files and their merge, and the CSV row builder.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sfs.h"
#include "runtime/chan.h"
#include "runtime/row.h"
#include "runtime/sink.h"
#include "tests/helpers.h"

/* ---- channel --------------------------------------------------------------------- */

#define CHAN_DATA (64u * 1024)
#define CHAN_RECS 200000u

/* Record i: length and bytes are a function of i, so the consumer checks
 * both without sharing anything else. */
static uint32_t rec_len(uint64_t i)
{
	uint64_t s = i * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(th_rand(&s) % 1500);
}

static unsigned char rec_byte(uint64_t i, uint32_t k)
{
	return (unsigned char)(i * 31 + k * 7);
}

static int producer(void *arg)
{
	struct rt_chan *ch = arg;
	struct rt_chan_end e;

	rt_chan_end_init(&e, ch, 1);
	for (uint64_t i = 0; i < CHAN_RECS;) {
		uint32_t len = rec_len(i) + 8;
		unsigned char *p = rt_chan_reserve(&e, len, RT_REC_DATA);

		if (!p) {
			rt_chan_publish(&e);	/* full: let the consumer see what is there */
			continue;
		}
		memcpy(p, &i, 8);
		for (uint32_t k = 8; k < len; k++)
			p[k] = rec_byte(i, k);
		if (++i % 7 == 0)
			rt_chan_publish(&e);
	}
	rt_chan_publish(&e);
	return 0;
}

static int consumer(void *arg)
{
	struct rt_chan *ch = arg;
	struct rt_chan_end e;

	rt_chan_end_init(&e, ch, 0);
	for (uint64_t i = 0; i < CHAN_RECS;) {
		const struct rt_rec *r = rt_chan_peek(&e);
		uint64_t got;

		if (!r) {
			rt_chan_release(&e);
			continue;
		}
		if (r->type != RT_REC_DATA || r->len != rec_len(i) + 8)
			return 2;
		memcpy(&got, r->data, 8);
		if (got != i)
			return 3;
		for (uint32_t k = 8; k < r->len; k++)
			if (r->data[k] != rec_byte(i, k))
				return 4;
		rt_chan_consume(&e, r);
		if (++i % 5 == 0)
			rt_chan_release(&e);
	}
	rt_chan_release(&e);
	return rt_chan_peek(&e) ? 5 : 0;
}

Test(chan, records_cross_processes_in_order_through_wrap_and_full_ring, .timeout = 60)
{
	struct rt_chan *ch = th_map(sizeof(struct rt_chan) + CHAN_DATA);
	pid_t p, c;
	int sp, sc;

	rt_chan_init(ch, CHAN_DATA);
	c = th_fork(consumer, ch);
	p = th_fork(producer, ch);
	sp = th_wait(p, 50000);
	sc = th_wait(c, 50000);
	cr_assert_eq(th_exit_code(sp), 0, "producer status %d", sp);
	cr_assert_eq(th_exit_code(sc), 0, "consumer failed with %d", th_exit_code(sc));
	cr_assert_eq(rt_chan_used(ch), 0);
	cr_assert(ch->ch_head > CHAN_DATA * 100, "the ring wrapped many times");
}

Test(chan, reserve_refuses_when_full_and_writes_nothing)
{
	struct rt_chan *ch = th_map(sizeof(struct rt_chan) + 4096);
	struct rt_chan_end pe, ce;
	unsigned n = 0;

	rt_chan_init(ch, 4096);
	rt_chan_end_init(&pe, ch, 1);
	rt_chan_end_init(&ce, ch, 0);
	while (rt_chan_reserve(&pe, 100, RT_REC_DATA))
		n++;
	cr_assert_eq(n, 4096 / rt_rec_span(100));
	cr_assert_null(rt_chan_peek(&ce), "nothing visible before publish");
	rt_chan_publish(&pe);
	for (unsigned i = 0; i < n; i++) {
		const struct rt_rec *r = rt_chan_peek(&ce);

		cr_assert_not_null(r);
		rt_chan_consume(&ce, r);
	}
	cr_assert_null(rt_chan_peek(&ce));
	cr_assert_null(rt_chan_reserve(&pe, 100, RT_REC_DATA), "tail not released yet");
	rt_chan_release(&ce);
	cr_assert_not_null(rt_chan_reserve(&pe, 100, RT_REC_DATA));
}

/* ---- sink ---------------------------------------------------------------------- */

#define NKEYS 64

struct ref_row {
	int live;
	char row[32];
	int64_t count;   /* multiset rows */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

Test(sink, random_changes_match_a_reference_and_parts_merge_sorted)
{
	char dir[] = "/tmp/sfs-sink-XXXXXX", part[2][64], out[64];
	struct rt_sink s[2];
	struct ref_row keyed[NKEYS], bag[NKEYS];
	uint64_t seed = 0x51c4, rows[2], merged;
	char *expect[4 * NKEYS * 4], *got;
	size_t ne = 0, len = 0;
	const char *parts[2];

	cr_assert_not_null(mkdtemp(dir));
	memset(keyed, 0, sizeof(keyed));
	memset(bag, 0, sizeof(bag));
	for (int w = 0; w < 2; w++)
		cr_assert_eq(rt_sink_init(&s[w], 1), 0);
	/* keys and rows are split between two workers by parity, as a
	 * forward edge keeps a row's changes on one worker */
	for (int n = 0; n < 20000 * th_soak(); n++) {
		uint64_t r = th_rand(&seed);
		unsigned k = (unsigned)(r % NKEYS), w = k & 1;
		char key[8], row[32];

		snprintf(key, sizeof(key), "k%02u", k);
		switch ((r >> 8) % 4) {
		case 0:
			snprintf(row, sizeof(row), "k%02u,v%llu", k, (unsigned long long)(r >> 20) % 5);
			cr_assert_eq(rt_sink_put(&s[w], key, strlen(key), row, strlen(row)), 0);
			keyed[k].live = 1;
			strcpy(keyed[k].row, row);
			break;
		case 1:
			if (!keyed[k].live)
				break;	/* a delete of an absent row is an anomaly */
			cr_assert_eq(rt_sink_del(&s[w], key, strlen(key)), 0);
			keyed[k].live = 0;
			break;
		case 2:
			snprintf(row, sizeof(row), "bag%02u", k);
			cr_assert_eq(rt_sink_add(&s[w], row, strlen(row), 1), 0);
			bag[k].count++;
			break;
		default:
			if (bag[k].count == 0)
				break;
			snprintf(row, sizeof(row), "bag%02u", k);
			cr_assert_eq(rt_sink_add(&s[w], row, strlen(row), -1), 0);
			bag[k].count--;
		}
	}
	for (int w = 0; w < 2; w++) {
		snprintf(part[w], sizeof(part[w]), "%s/part%d", dir, w);
		parts[w] = part[w];
		cr_assert_eq(rt_sink_commit(&s[w], part[w], &rows[w]), 0);
		cr_assert_eq(s[w].anomalies, 0);
		rt_sink_free(&s[w]);
	}
	snprintf(out, sizeof(out), "%s/out.csv", dir);
	cr_assert_eq(rt_sink_merge(parts, 2, "a,b", out, &merged), 0);
	cr_assert_eq(merged, rows[0] + rows[1]);

	for (unsigned k = 0; k < NKEYS; k++) {
		if (keyed[k].live)
			expect[ne++] = keyed[k].row;
		for (int64_t c = 0; c < bag[k].count; c++) {
			static char bags[NKEYS][8];

			snprintf(bags[k], sizeof(bags[k]), "bag%02u", k);
			expect[ne++] = bags[k];
		}
	}
	qsort(expect, ne, sizeof(expect[0]), cmp_str);
	cr_assert_eq(merged, ne);
	got = slurp(out);
	cr_assert(!strncmp(got, "a,b\n", 4), "header first");
	len = 4;
	for (size_t i = 0; i < ne; i++) {
		size_t l = strlen(expect[i]);

		cr_assert(!strncmp(got + len, expect[i], l) && got[len + l] == '\n',
			  "row %zu: want %s", i, expect[i]);
		len += l + 1;
	}
	cr_assert_eq(got[len], '\0');
	free(got);
	for (int w = 0; w < 2; w++)
		unlink(part[w]);
	unlink(out);
	rmdir(dir);
}

Test(sink, merge_names_a_missing_part)
{
	const char *parts[1] = { "/nonexistent/sfs-part" };
	uint64_t rows;

	cr_assert_neq(rt_sink_merge(parts, 1, "h", "/tmp/sfs-merge-missing.csv", &rows), 0);
	cr_assert(strstr(sfs_last_error(), "/nonexistent/sfs-part"), "%s", sfs_last_error());
	cr_assert_neq(access("/tmp/sfs-merge-missing.csv", F_OK), 0, "no output left");
}

/* ---- rows ------------------------------------------------------------------------ */

Test(row, csv_quoting_integers_and_days)
{
	struct rt_row r;

	rt_row_init(&r);
	rt_row_i64(&r, -42);
	rt_row_str(&r, "plain text", 10);
	rt_row_str(&r, "a,b", 3);
	rt_row_str(&r, "say \"hi\"", 8);
	rt_row_null(&r);
	rt_row_i64(&r, INT64_MIN);
	rt_row_day(&r, 1436918400000ll);	/* 2015-07-15T00:00:00Z */
	rt_row_day(&r, 951782400000ll);		/* 2000-02-29 */
	rt_row_day(&r, -1);			/* 1969-12-31 */
	cr_assert_eq(r.len, strlen("-42,plain text,\"a,b\",\"say \"\"hi\"\"\",,-9223372036854775808,"
				   "2015-07-15,2000-02-29,1969-12-31"));
	cr_assert(!memcmp(r.buf, "-42,plain text,\"a,b\",\"say \"\"hi\"\"\",,-9223372036854775808,"
				 "2015-07-15,2000-02-29,1969-12-31", r.len));
}
