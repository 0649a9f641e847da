/*
 * gen.h — the Nexmark event generator (persons, auctions, bids).
 *
 * Event number n of a configuration is a pure function of (config, n):
 * nx_event() seeds a java.util.Random with the event's id, as Beam does,
 * and draws every field from it with Flink's formulas, so any worker, split
 * or restarted source regenerates the same event for the same n, and the
 * stream equals the Java generators' (see gen.c for where those disagree).
 * /work/shared/NEXMARK.md is the specification.
 *
 * Cost: no allocation, no stdio, no locks on the per-event path; ~0.16 us
 * per event on one core over the 1:3:46 mix (bench/bench_gen.c: ~6M
 * events/s), an auction several times a bid (~500 bytes of random text).  The first bid with an unpopular
 * channel builds the process-wide channel URL table once (~1 ms,
 * pthread_once), which a forked child inherits.
 *
 * Strings are fixed inline arrays sized from the generator's maxima (the
 * static_asserts in gen.c prove them), each NUL-terminated and with its
 * length beside it, so an event is one flat struct a caller can keep on its
 * stack or copy into a ring.
 */
#ifndef SFS_NEXMARK_GEN_H
#define SFS_NEXMARK_GEN_H

#include <stdint.h>

/* The Nexmark constants (Beam's GeneratorConfig / NexmarkConfiguration). */
#define NX_PERSON_PROPORTION 1
#define NX_AUCTION_PROPORTION 3
#define NX_BID_PROPORTION 46
#define NX_PROPORTION_DENOMINATOR 50
#define NX_FIRST_PERSON_ID 1000
#define NX_FIRST_AUCTION_ID 1000
#define NX_FIRST_CATEGORY_ID 10
#define NX_NUM_CATEGORIES 5
#define NX_AVG_PERSON_BYTES 200
#define NX_AVG_AUCTION_BYTES 500
#define NX_AVG_BID_BYTES 100
#define NX_DEFAULT_BASE_TIME_MS 1436918400000ll	/* 2015-07-15T00:00:00Z */
#define NX_DEFAULT_RATE 1e7

/*
 * Capacities of the inline strings, NUL included: the longest value the
 * generator can produce + 1, rounded up.  extra is the padding that brings
 * an event to its average size: up to ~1.2x (average - fixed fields).
 */
#define NX_NAME_CAP 16		/* "Deiter Spencer": 14 */
#define NX_EMAIL_CAP 16		/* 6 + "@" + 4 + ".com": 15 */
#define NX_CARD_CAP 20		/* "dddd dddd dddd dddd": 19 */
#define NX_CITY_CAP 16		/* "San Francisco": 13 */
#define NX_STATE_CAP 4		/* "WA": 2 */
#define NX_PERSON_EXTRA_CAP 184	/* 181 */
#define NX_ITEM_NAME_CAP 20	/* 19 */
#define NX_DESC_CAP 100		/* 99 */
#define NX_AUCTION_EXTRA_CAP 544	/* 541 */
#define NX_CHANNEL_CAP 16	/* "channel-9999": 12 */
#define NX_URL_CAP 80		/* 55 + "&channel_id=" + 11: 78 */
#define NX_BID_EXTRA_CAP 88	/* 81 */

/*
 * What to generate.  Event number of call n is first_event_number + n; the
 * out-of-order group permutes numbers inside each group of ooo_group; the
 * event id (seed, kind, and the value of seq) is first_event_id + that
 * permuted number, and the timestamp is a function of the permuted number
 * alone: baseTime + (int64)(number * 1e6 / rate * generators) / 1000 ms.
 * sfs splits a stream across workers by n (or first_event_number), never by
 * first_event_id or generators: both change the events (Beam's parallel
 * timelines), and a worker count must not.
 */
struct nx_config {
	uint64_t first_event_id;	/* 0 */
	uint64_t first_event_number;	/* 0 */
	uint64_t events;		/* how many a source emits; nx_event ignores it */
	double rate;			/* events per second of event time, 1e7 */
	uint32_t generators;		/* Flink's numEventGenerators, 1 */
	uint32_t ooo_group;		/* out-of-order group size, 1 (in order) */
	int64_t base_time_ms;		/* time of event number 0 */
};

/* Beam's defaults: rate 1e7/s, in order, base time 2015-07-15, 0 events. */
void nx_config_default(struct nx_config *c);

enum nx_kind { NX_PERSON, NX_AUCTION, NX_BID };

struct nx_person {
	int64_t id;
	int64_t date_time;		/* epoch ms */
	uint16_t name_len, email_len, credit_card_len, city_len, state_len, extra_len;
	char name[NX_NAME_CAP];
	char email[NX_EMAIL_CAP];
	char credit_card[NX_CARD_CAP];
	char city[NX_CITY_CAP];
	char state[NX_STATE_CAP];
	char extra[NX_PERSON_EXTRA_CAP];
};

struct nx_auction {
	int64_t id, initial_bid, reserve, date_time, expires, seller, category;
	uint16_t item_name_len, description_len, extra_len;
	char item_name[NX_ITEM_NAME_CAP];
	char description[NX_DESC_CAP];
	char extra[NX_AUCTION_EXTRA_CAP];
};

struct nx_bid {
	int64_t auction, bidder, price, date_time;
	uint16_t channel_len, url_len, extra_len;
	char channel[NX_CHANNEL_CAP];
	char url[NX_URL_CAP];
	char extra[NX_BID_EXTRA_CAP];
};

struct nx_event {
	enum nx_kind kind;
	uint64_t seq;			/* the event id */
	union {
		struct nx_person person;
		struct nx_auction auction;
		struct nx_bid bid;
	};
};

/*
 * Generate event number @n (0-based, within @c) into @out.  Pure and
 * reentrant: any thread, any order, any process gives the same bytes for
 * the same (c, n) (only the fields of out->kind's member are written).
 * Preconditions: rate > 0, generators >= 1, and the event number below
 * 2^53 (timestamps are computed in double, as Flink does).
 */
void nx_event(const struct nx_config *c, uint64_t n, struct nx_event *out);

/* The id of event @n, which is also its kind: id % 50 < 1 person, < 4
 * auction, else bid.  O(1), no random draws. */
static inline uint64_t nx_event_id(const struct nx_config *c, uint64_t n)
{
	uint64_t num = c->first_event_number + n, g = c->ooo_group;

	if (g > 1)
		num = (num / g) * g + (num * 953) % g;
	return c->first_event_id + num;
}

static inline enum nx_kind nx_kind_of(uint64_t id)
{
	uint64_t rem = id % NX_PROPORTION_DENOMINATOR;

	if (rem < NX_PERSON_PROPORTION)
		return NX_PERSON;
	if (rem < NX_PERSON_PROPORTION + NX_AUCTION_PROPORTION)
		return NX_AUCTION;
	return NX_BID;
}

/* Event time of (permuted) event number @num: Flink's timestampForEvent. */
int64_t nx_timestamp_ms(const struct nx_config *c, uint64_t num);

/* Tests only: the generator's nextString(@max, @special) and
 * nextExactString(@len) from the Random @r, into @dst (no terminator);
 * nextString returns its length after trim(). */
struct jrand;
size_t nx__next_string(struct jrand *r, int32_t max, char special, char *dst);
void nx__next_exact_string(struct jrand *r, int32_t len, char *dst);

#endif
