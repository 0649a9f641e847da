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
#include "common/fs.h"
#include "runtime/chan.h"
#include "runtime/row.h"
#include "runtime/sink.h"
#include "runtime/util.h"
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

/* The expected output of a reference state: header, sorted rows. */
static char *expect_out(const struct ref_row *keyed, const struct ref_row *bag, uint64_t *n)
{
	static char bags[NKEYS][8];
	char *rows[4 * NKEYS * 64], *out;
	size_t ne = 0, len = 4;

	for (unsigned k = 0; k < NKEYS; k++) {
		if (keyed[k].live)
			rows[ne++] = (char *)keyed[k].row;
		snprintf(bags[k], sizeof(bags[k]), "bag%02u", k);
		for (int64_t c = 0; c < bag[k].count && ne < sizeof(rows) / sizeof(rows[0]); c++)
			rows[ne++] = bags[k];
	}
	qsort(rows, ne, sizeof(rows[0]), cmp_str);
	out = calloc(1, 4 + ne * 40 + 1);
	memcpy(out, "a,b\n", 4);
	for (size_t i = 0; i < ne; i++) {
		size_t l = strlen(rows[i]);

		memcpy(out + len, rows[i], l);
		out[len + l] = '\n';
		len += l + 1;
	}
	*n = ne;
	return out;
}

/* Random changes on two workers in epochs: each epoch's changelog is
 * written (pending) at a "barrier", some are committed as checkpoints
 * complete, the rest at the end; the replay equals the reference.  Then a
 * restore from an older epoch: pending epochs above it are dropped,
 * committed ones set aside, and the replay equals the reference as of it. */
Test(sink, epochs_commit_and_replay_like_a_reference)
{
	char dir[] = "/tmp/sfs-sink-XXXXXX", out[64], path[256];
	struct rt_sink s[2];
	struct ref_row keyed[NKEYS], bag[NKEYS], keyed_at[NKEYS], bag_at[NKEYS];
	uint64_t seed = 0x51c4, recs, n, want_n, epoch = 0, keep = 0;
	char *got, *want;

	cr_assert_not_null(mkdtemp(dir));
	memset(keyed, 0, sizeof(keyed));
	memset(bag, 0, sizeof(bag));
	for (int w = 0; w < 2; w++)
		cr_assert_eq(rt_sink_init(&s[w], RT_SINK_EPOCH), 0);
	/* keys and rows are split between two workers by parity, as a
	 * forward edge keeps a row's changes on one worker */
	for (int i = 0; i < 20000 * th_soak(); i++) {
		uint64_t r = th_rand(&seed);
		unsigned k = (unsigned)(r % NKEYS), w = k & 1;
		char key[8], row[32];

		if (i % 997 == 996) {	/* a barrier */
			epoch++;
			for (int x = 0; x < 2; x++)
				cr_assert_eq(rt_sink_write_epoch(&s[x], dir, (uint32_t)x, epoch, &recs), 0);
			if (epoch % 3 == 0)	/* a checkpoint completes */
				cr_assert_eq(rt_sink_commit_upto(dir, epoch, 0), 0);
			if (epoch == 7) {
				keep = epoch;
				memcpy(keyed_at, keyed, sizeof(keyed));
				memcpy(bag_at, bag, sizeof(bag));
			}
		}
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
	cr_assert_geq(epoch, 10);
	for (int w = 0; w < 2; w++) {
		cr_assert_eq(rt_sink_write_epoch(&s[w], dir, (uint32_t)w, RT_EPOCH_FINAL, &recs), 0);
		rt_sink_free(&s[w]);
	}
	/* not committed yet: the replay sees the committed epochs only */
	snprintf(out, sizeof(out), "%s/out.csv", dir);
	cr_assert_eq(rt_sink_commit_upto(dir, UINT64_MAX, 0), 0);
	cr_assert_eq(rt_sink_replay(dir, "a,b", out, &n), 0);
	want = expect_out(keyed, bag, &want_n);
	got = slurp(out);
	cr_assert_eq(n, want_n);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);

	/* restore as of epoch 7: newer committed epochs go aside */
	cr_assert_eq(rt_sink_commit_upto(dir, keep, 1), 0);
	cr_assert_eq(rt_sink_replay(dir, "a,b", out, &n), 0);
	want = expect_out(keyed_at, bag_at, &want_n);
	got = slurp(out);
	cr_assert_eq(n, want_n);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);

	/* a truncated changelog is refused by name */
	rt_sink_path(path, sizeof(path), dir, 1, 5, 1);
	cr_assert_eq(truncate(path, 40), 0);
	cr_assert_neq(rt_sink_replay(dir, "a,b", out, &n), 0);
	cr_assert(strstr(rt_last_error(), path) && strstr(rt_last_error(), "truncated"), "%s",
		  rt_last_error());
	cr_assert_eq(rt_sink_reset(dir), 0);
	unlink(out);
	cr_assert_eq(sfs_rmtree(dir), 0);	/* the reset keeps sink/ for the next run */
}

Test(sink, a_pending_epoch_is_invisible_until_committed)
{
	char dir[] = "/tmp/sfs-sink-XXXXXX", out[64];
	struct rt_sink s;
	uint64_t recs, n;
	char *got;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/out.csv", dir);
	cr_assert_eq(rt_sink_init(&s, RT_SINK_EPOCH), 0);
	cr_assert_eq(rt_sink_put(&s, "k", 1, "k,1", 3), 0);
	cr_assert_eq(rt_sink_write_epoch(&s, dir, 0, 1, &recs), 0);
	cr_assert_eq(recs, 1);
	cr_assert_eq(rt_sink_del(&s, "k", 1), 0);
	cr_assert_eq(rt_sink_write_epoch(&s, dir, 0, 2, &recs), 0);
	cr_assert_eq(rt_sink_replay(dir, "h", out, &n), 0);
	cr_assert_eq(n, 0, "nothing committed yet");
	cr_assert_eq(rt_sink_commit_upto(dir, 1, 0), 0);
	cr_assert_eq(rt_sink_replay(dir, "h", out, &n), 0);
	got = slurp(out);
	cr_assert_str_eq(got, "h\nk,1\n");
	free(got);
	cr_assert_eq(rt_sink_commit_upto(dir, 2, 0), 0);
	cr_assert_eq(rt_sink_replay(dir, "h", out, &n), 0);
	cr_assert_eq(n, 0, "the delete of epoch 2");
	rt_sink_free(&s);
	rt_sink_reset(dir);
	unlink(out);
	cr_assert_eq(sfs_rmtree(dir), 0);
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
