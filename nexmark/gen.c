/*
 * gen.c — the Nexmark generator: one event from (config, event number).
 *
 * A port of Beam's sdks/java/testing/nexmark .../sources/generator (seeding,
 * id arithmetic, draw order) with nexmark/nexmark's nexmark-flink formulas
 * (timestamps, the bid's channel and url), as /work/shared/NEXMARK.md
 * specifies.  Every field is drawn from a java.util.Random (jrand.h) seeded
 * with the event id, in exactly the Java order, so tests/nexmark/java's
 * reference reproduces these events byte for byte.
 *
 * Where the sources disagree, and what sfs does:
 *
 *  - Randomness.  Beam seeds `new Random(eventId)` per event; Flink shares
 *    one unseeded Random (later versions a SplittableRandom) across events,
 *    so its streams are not reproducible.  sfs: Beam's seeding.
 *  - Timestamps.  Beam keeps the inter-event delay in whole microseconds,
 *    (1e6 + rate/2) / rate, which is 0 at 10M events/s (every event at the
 *    base time); Flink keeps it as a double, 1e6 / rate * generators, and
 *    truncates (long)(number * delay) / 1000.  sfs: Flink's.
 *  - Bid channel and url.  Beam's bid has neither.  Flink draws them after
 *    the price and before the extra padding (so a bid's extra differs from
 *    Beam's for the same seed): nextInt(2) > 0 picks one of four hot
 *    channels with nextInt(4), else "channel-" + nextInt(10000).  Its url
 *    strings come from fresh unseeded `new Random()`s: the four hot urls at
 *    class load, a channel's url on its first use (cached), and another
 *    `new Random().nextInt(10) > 0` to append "&channel_id=" +
 *    abs(Integer.reverse(channel)).  sfs keeps the formula and the cache but
 *    seeds each url's Random with its channel number (hot channel i:
 *    10000 + i) and draws the channel_id decision from that same Random
 *    after the three path parts, so a url depends on its channel alone.
 *  - Bidder id.  Some Flink versions add FIRST_PERSON_ID to the bidder
 *    twice (ids ~2000 above the persons); Beam and NEXMARK.md once.  sfs:
 *    once.
 *  - Flink's extended-bid and uniform-bid modes are not ported; avg sizes,
 *    proportions and hot ratios are Beam's and Flink's shared defaults.
 *
 * Java details kept: Math.round of a positive double is round-half-up
 * (llround); String.trim() strips the spaces nextString can put at either
 * end; nextExactString's `'a' + rnd % 26` with a negative rnd yields 'H'..'`'
 * (Java's % keeps the dividend's sign, as C's does).  Math.pow (HotSpot's
 * intrinsic) and glibc's pow (an FMA variant on this machine) are not both
 * correctly rounded, so they may differ in the last ulp of a rare power;
 * that moves a price by a cent only if 100 * 10^x lands within an ulp of
 * a .5.  No such case shows in the 2M events compared with the Java
 * reference, nor in the golden hashes.
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "nexmark/gen.h"
#include "nexmark/jrand.h"

#define PERSON_ID_LEAD 10
#define AUCTION_ID_LEAD 10
#define NUM_ACTIVE_PEOPLE 1000
#define NUM_IN_FLIGHT_AUCTIONS 100
#define HOT_SELLERS_RATIO 4	/* config: P(hot) = 1 - 1/4 */
#define HOT_AUCTION_RATIO 2
#define HOT_BIDDERS_RATIO 4
#define HOT_ID_RATIO 100	/* hot ids are the first (+1 for bidders) of each 100 */
#define HOT_CHANNELS_RATIO 2
#define CHANNELS_NUMBER 10000
#define MIN_STRING_LENGTH 3

static const char *const first_names[] = { "Peter", "Paul", "Luke", "John", "Saul", "Vicky",
					   "Kate", "Julie", "Sarah", "Deiter", "Walter" };
static const char *const last_names[] = { "Shultz", "Abrams", "Spencer", "White", "Bartels",
					  "Walton", "Smith", "Jones", "Noris" };
static const char *const us_cities[] = { "Phoenix", "Los Angeles", "San Francisco", "Boise",
					 "Portland", "Bend", "Redmond", "Seattle", "Kent",
					 "Cheyenne" };
static const char *const us_states[] = { "AZ", "CA", "ID", "OR", "WA", "WY" };
static const char *const hot_channels[] = { "Google", "Facebook", "Baidu", "Apple" };

#define NELEM(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

/*
 * The longest extra nextExtra() can return for an event whose other fields
 * take at least @min_cur of Beam's byte count: (avg - cur) + round(0.2 *
 * (avg - cur)) - 1, largest when cur is smallest.
 */
#define EXTRA_MAX(avg, min_cur) \
	((avg) - (min_cur) + (2 * ((avg) - (min_cur)) + 5) / 10 - 1)

/* Beam's size model: person 8 + the five strings (shortest: "Paul White",
 * an email of two blank strings "@.com", the card, "Kent", the state);
 * auction 8 + item name + description (both can trim to "") + 5 x 8; bid
 * 4 x 8 (Flink does not count channel and url). */
#define PERSON_MIN_CUR (8 + 10 + 5 + 19 + 4 + 2)
#define AUCTION_MIN_CUR (8 + 0 + 0 + 40)
#define BID_CUR 32

static_assert(EXTRA_MAX(NX_AVG_PERSON_BYTES, PERSON_MIN_CUR) == 181, "person extra");
static_assert(EXTRA_MAX(NX_AVG_AUCTION_BYTES, AUCTION_MIN_CUR) == 541, "auction extra");
static_assert(EXTRA_MAX(NX_AVG_BID_BYTES, BID_CUR) == 81, "bid extra");
static_assert(NX_PERSON_EXTRA_CAP > EXTRA_MAX(NX_AVG_PERSON_BYTES, PERSON_MIN_CUR), "cap");
static_assert(NX_AUCTION_EXTRA_CAP > EXTRA_MAX(NX_AVG_AUCTION_BYTES, AUCTION_MIN_CUR), "cap");
static_assert(NX_BID_EXTRA_CAP > EXTRA_MAX(NX_AVG_BID_BYTES, BID_CUR), "cap");
/* nextString(max) is at most max - 1 characters. */
static_assert(NX_NAME_CAP > sizeof("Deiter Spencer") - 1, "name");
static_assert(NX_EMAIL_CAP > (7 - 1) + 1 + (5 - 1) + 4, "email");
static_assert(NX_CARD_CAP > 19, "card");
static_assert(NX_CITY_CAP > sizeof("San Francisco") - 1, "city");
static_assert(NX_ITEM_NAME_CAP > 20 - 1 && NX_DESC_CAP > 100 - 1, "auction strings");
static_assert(NX_CHANNEL_CAP > sizeof("channel-9999") - 1, "channel");

#define URL_PREFIX "https://www.nexmark.com/"
#define URL_SUFFIX "item.htm?query=1"
#define URL_CHANNEL_ID "&channel_id="
#define URL_MAX \
	(sizeof(URL_PREFIX) - 1 + 3 * (4 + 1) + sizeof(URL_SUFFIX) - 1 + \
	 sizeof(URL_CHANNEL_ID) - 1 + sizeof("-2147483648") - 1)
static_assert(NX_URL_CAP > URL_MAX, "url");

void nx_config_default(struct nx_config *c)
{
	*c = (struct nx_config){
		.first_event_id = 0,
		.first_event_number = 0,
		.events = 0,
		.rate = NX_DEFAULT_RATE,
		.generators = 1,
		.ooo_group = 1,
		.base_time_ms = NX_DEFAULT_BASE_TIME_MS,
	};
}

int64_t nx_timestamp_ms(const struct nx_config *c, uint64_t num)
{
	double delay_us = 1000000.0 / c->rate * (double)c->generators;

	return c->base_time_ms + (int64_t)((double)num * delay_us) / 1000;
}

/* ---- ids (Beam's PersonGenerator / AuctionGenerator), base 0 ------------ */

/* The last person id generated at or before event @id. */
static inline int64_t last_person(int64_t id)
{
	int64_t epoch = id / NX_PROPORTION_DENOMINATOR, off = id % NX_PROPORTION_DENOMINATOR;

	if (off >= NX_PERSON_PROPORTION)
		off = NX_PERSON_PROPORTION - 1;
	return epoch * NX_PERSON_PROPORTION + off;
}

/* The last auction id generated at or before event @id (-1 before any). */
static inline int64_t last_auction(int64_t id)
{
	int64_t epoch = id / NX_PROPORTION_DENOMINATOR, off = id % NX_PROPORTION_DENOMINATOR;

	if (off < NX_PERSON_PROPORTION) {
		epoch--;
		off = NX_AUCTION_PROPORTION - 1;
	} else if (off >= NX_PERSON_PROPORTION + NX_AUCTION_PROPORTION) {
		off = NX_AUCTION_PROPORTION - 1;
	} else {
		off -= NX_PERSON_PROPORTION;
	}
	return epoch * NX_AUCTION_PROPORTION + off;
}

/* LongGenerator.nextLong: uniform below 2^31 - 1, Beam's skewed fallback
 * above (reached only for auction lengths at rates below ~1 event/s). */
static inline int64_t next_long(struct jrand *r, int64_t n)
{
	if (n < INT32_MAX)
		return jr_next_int_n(r, (int32_t)n);
	int64_t v = jr_next_long(r) % n;

	return v < 0 ? -v : v;
}

/* A person among the 1000 most recent, or up to 10 not yet generated. */
static inline int64_t next_person(struct jrand *r, int64_t id)
{
	int64_t people = last_person(id) + 1;
	int64_t active = people < NUM_ACTIVE_PEOPLE ? people : NUM_ACTIVE_PEOPLE;

	return people - active + next_long(r, active + PERSON_ID_LEAD);
}

/* An auction among the ~100 in flight, or up to 10 not yet generated. */
static inline int64_t next_auction(struct jrand *r, int64_t id)
{
	int64_t max = last_auction(id);
	int64_t min = max - NUM_IN_FLIGHT_AUCTIONS > 0 ? max - NUM_IN_FLIGHT_AUCTIONS : 0;

	return min + next_long(r, max - min + 1 + AUCTION_ID_LEAD);
}

/* ---- strings (StringsGenerator) ------------------------------------------ */

/*
 * nextString(maxLength, special): 3..maxLength-1 characters, each @special
 * with probability 1/13, else a lowercase letter; then String.trim(), which
 * strips only spaces here ('_' is above ' ').  Writes @dst unterminated,
 * returns the length.
 */
static inline size_t next_string(struct jrand *r, int32_t max, char special, char *dst)
{
	int32_t len = MIN_STRING_LENGTH + jr_next_int_n(r, max - MIN_STRING_LENGTH);
	uint64_t s = r->jr_seed;
	size_t b = 0, e;

	for (int32_t i = 0; i < len; i++) {
		/* Both candidate next states at once: one draw past s (special?)
		 * and two (the letter), so a character waits for one multiply
		 * of the LCG chain instead of two. */
		uint64_t s1 = (s * JR_MULT + JR_ADD) & JR_MASK, s2 = (s * JR_MULT2 + JR_ADD2) & JR_MASK;
		int32_t b1 = (int32_t)(s1 >> 17), b2 = (int32_t)(s2 >> 17);
		int32_t v1 = b1 % 13, v2 = b2 % 26;

		if (__builtin_expect(jr_rejects(b1, v1, 13) || (v1 && jr_rejects(b2, v2, 26)), 0)) {
			/* a retried draw (p ~ 1e-8): the plain way */
			r->jr_seed = s;
			dst[i] = jr_next_int_n(r, 13) == 0 ? special : (char)('a' + jr_next_int_n(r, 26));
			s = r->jr_seed;
			continue;
		}
		dst[i] = v1 ? (char)('a' + v2) : special;
		s = v1 ? s2 : s1;
	}
	r->jr_seed = s;
	e = (size_t)len;
	if (special == ' ') {
		while (b < e && dst[b] == ' ')
			b++;
		while (e > b && dst[e - 1] == ' ')
			e--;
		if (b)
			memmove(dst, dst + b, e - b);
	}
	return e - b;
}

/*
 * nextExactString: six letters per nextInt(), lowest base-26 digit first
 * (Java: c = 'a' + rnd % 26; rnd /= 26).  Digits come straight from the
 * draw — truncating division composes, for negative draws too, so rnd /
 * 26^k % 26 is what k steps of that loop leave — two per lookup in a table
 * of letter pairs: a draw's six letters cost three independent divisions
 * instead of a chain of six dependent ones.  That chain was ~80 % of the
 * generator's samples (a bid's ~100 bytes of padding), and the generator
 * most of a q3 worker's (bench/RESULTS.md).
 */
static char exact_pairs[2 * 675 + 1][2];	/* see next_exact_string */

__attribute__((constructor)) static void exact_pairs_build(void)
{
	for (int32_t v = -675; v <= 675; v++) {
		exact_pairs[v + 675][0] = (char)('a' + v % 26);
		exact_pairs[v + 675][1] = (char)('a' + v / 26 % 26);
	}
}

static inline void next_exact_string(struct jrand *r, int32_t len, char *dst)
{
	/* Digits in pairs: digits 2k and 2k+1 of rnd are the two digits of
	 * rnd / 676^k % 676 (Java's signs: remainders -675..675 index a
	 * table of letter pairs). */
	for (; len >= 6; len -= 6, dst += 6) {
		int32_t rnd = jr_next_int(r);

		memcpy(dst, exact_pairs[rnd % 676 + 675], 2);
		memcpy(dst + 2, exact_pairs[rnd / 676 % 676 + 675], 2);
		memcpy(dst + 4, exact_pairs[rnd / 456976 % 676 + 675], 2);
	}
	if (len > 0) {
		int32_t rnd = jr_next_int(r);

		while (len-- > 0) {
			*dst++ = (char)('a' + rnd % 26);
			rnd /= 26;
		}
	}
}

size_t nx__next_string(struct jrand *r, int32_t max, char special, char *dst)
{
	return next_string(r, max, special, dst);
}

void nx__next_exact_string(struct jrand *r, int32_t len, char *dst)
{
	next_exact_string(r, len, dst);
}

/* nextExtra: padding so that @cur + length averages @avg, +-20%. */
static inline uint16_t next_extra(struct jrand *r, int32_t cur, int32_t avg, char *dst)
{
	int32_t want, delta, size;

	if (cur > avg) {
		dst[0] = 0;
		return 0;
	}
	want = avg - cur;
	delta = (int32_t)llround(want * 0.2);
	size = want - delta + (delta == 0 ? 0 : jr_next_int_n(r, 2 * delta));
	next_exact_string(r, size, dst);
	dst[size] = 0;
	return (uint16_t)size;
}

/* PriceGenerator: log-uniform cents in [100, 1e8). */
static inline int64_t next_price(struct jrand *r)
{
	return llround(pow(10.0, jr_next_double(r) * 6.0) * 100.0);
}

static inline uint16_t copy_str(char *dst, const char *s)
{
	size_t n = strlen(s);

	memcpy(dst, s, n + 1);
	return (uint16_t)n;
}

/* ---- the channel url table (Flink's CHANNEL_URL_CACHE) --------------------- */

struct chan_url {
	uint8_t name_len, url_len;
	char name[NX_CHANNEL_CAP];
	char url[NX_URL_CAP];
};

/* Channels 0..9999, then the four hot channels' urls.  Written once under
 * pthread_once, read-only after: ~1 MB per process. */
static struct chan_url chan_urls[CHANNELS_NUMBER + NELEM(hot_channels)];
static pthread_once_t chan_urls_once = PTHREAD_ONCE_INIT;

/* Flink's getBaseUrl(), from a Random seeded with the url's own number. */
static size_t base_url(struct jrand *r, char *dst)
{
	size_t n = sizeof(URL_PREFIX) - 1;

	memcpy(dst, URL_PREFIX, n);
	for (int i = 0; i < 3; i++) {
		n += next_string(r, 5, '_', dst + n);
		dst[n++] = '/';
	}
	memcpy(dst + n, URL_SUFFIX, sizeof(URL_SUFFIX) - 1);
	return n + sizeof(URL_SUFFIX) - 1;
}

static size_t fmt_i32(char *dst, int32_t v)
{
	char tmp[12];
	uint32_t u = v < 0 ? -(uint32_t)v : (uint32_t)v;
	size_t n = 0, len;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[n++] = '-';
	len = n;
	while (n)
		*dst++ = tmp[--n];
	return len;
}

/* Java's Math.abs(Integer.reverse(c)): abs(INT_MIN) stays INT_MIN. */
static int32_t java_abs_reverse(int32_t c)
{
	uint32_t v = (uint32_t)c, rev = 0;

	for (int i = 0; i < 32; i++, v >>= 1)
		rev = (rev << 1) | (v & 1);
	return (int32_t)rev < 0 ? (int32_t)(0u - rev) : (int32_t)rev;
}

static void chan_urls_build(void)
{
	for (int32_t c = 0; c < NELEM(chan_urls); c++) {
		struct chan_url *u = &chan_urls[c];
		struct jrand r;
		size_t n;

		jr_seed(&r, c);
		n = base_url(&r, u->url);
		if (c < CHANNELS_NUMBER) {
			if (jr_next_int_n(&r, 10) > 0) {
				memcpy(u->url + n, URL_CHANNEL_ID, sizeof(URL_CHANNEL_ID) - 1);
				n += sizeof(URL_CHANNEL_ID) - 1;
				n += fmt_i32(u->url + n, java_abs_reverse(c));
			}
			memcpy(u->name, "channel-", 8);
			u->name_len = (uint8_t)(8 + fmt_i32(u->name + 8, c));
		} else {
			u->name_len = (uint8_t)copy_str(u->name, hot_channels[c - CHANNELS_NUMBER]);
		}
		u->name[u->name_len] = 0;
		u->url[n] = 0;
		u->url_len = (uint8_t)n;
	}
}

/* ---- the three kinds ------------------------------------------------------- */

static void gen_person(struct jrand *r, int64_t id, int64_t ts, struct nx_person *p)
{
	int32_t cur;
	size_t n;

	p->id = last_person(id) + NX_FIRST_PERSON_ID;
	p->date_time = ts;

	n = copy_str(p->name, first_names[jr_next_int_n(r, NELEM(first_names))]);
	p->name[n++] = ' ';
	n += copy_str(p->name + n, last_names[jr_next_int_n(r, NELEM(last_names))]);
	p->name_len = (uint16_t)n;

	n = next_string(r, 7, ' ', p->email);
	p->email[n++] = '@';
	n += next_string(r, 5, ' ', p->email + n);
	memcpy(p->email + n, ".com", 5);
	p->email_len = (uint16_t)(n + 4);

	for (int i = 0; i < 4; i++) {
		int32_t d = jr_next_int_n(r, 10000);
		char *q = p->credit_card + 5 * i;

		q[0] = (char)('0' + d / 1000);
		q[1] = (char)('0' + d / 100 % 10);
		q[2] = (char)('0' + d / 10 % 10);
		q[3] = (char)('0' + d % 10);
		q[4] = i < 3 ? ' ' : 0;
	}
	p->credit_card_len = 19;

	p->city_len = copy_str(p->city, us_cities[jr_next_int_n(r, NELEM(us_cities))]);
	p->state_len = copy_str(p->state, us_states[jr_next_int_n(r, NELEM(us_states))]);

	cur = 8 + p->name_len + p->email_len + p->credit_card_len + p->city_len + p->state_len;
	p->extra_len = next_extra(r, cur, NX_AVG_PERSON_BYTES, p->extra);
}

static void gen_auction(const struct nx_config *c, struct jrand *r, int64_t id, uint64_t num,
			int64_t ts, struct nx_auction *a)
{
	/* Events until NUM_IN_FLIGHT_AUCTIONS more auctions exist: the
	 * auction length averages the event time they take. */
	const uint64_t ahead = (uint64_t)NUM_IN_FLIGHT_AUCTIONS * NX_PROPORTION_DENOMINATOR /
			       NX_AUCTION_PROPORTION;
	int64_t horizon, seller;
	int32_t cur;
	size_t n;

	a->id = last_auction(id) + NX_FIRST_AUCTION_ID;
	a->date_time = ts;
	if (jr_next_int_n(r, HOT_SELLERS_RATIO) > 0)
		seller = last_person(id) / HOT_ID_RATIO * HOT_ID_RATIO;
	else
		seller = next_person(r, id);
	a->seller = seller + NX_FIRST_PERSON_ID;
	a->category = NX_FIRST_CATEGORY_ID + jr_next_int_n(r, NX_NUM_CATEGORIES);
	a->initial_bid = next_price(r);
	horizon = nx_timestamp_ms(c, num + ahead) - ts;
	a->expires = ts + 1 + next_long(r, horizon * 2 > 1 ? horizon * 2 : 1);
	n = next_string(r, 20, ' ', a->item_name);
	a->item_name[n] = 0;
	a->item_name_len = (uint16_t)n;
	n = next_string(r, 100, ' ', a->description);
	a->description[n] = 0;
	a->description_len = (uint16_t)n;
	a->reserve = a->initial_bid + next_price(r);
	cur = 8 + a->item_name_len + a->description_len + 8 + 8 + 8 + 8 + 8;
	a->extra_len = next_extra(r, cur, NX_AVG_AUCTION_BYTES, a->extra);
}

static void gen_bid(struct jrand *r, int64_t id, int64_t ts, struct nx_bid *b)
{
	const struct chan_url *u;
	int64_t v;

	if (jr_next_int_n(r, HOT_AUCTION_RATIO) > 0)
		v = last_auction(id) / HOT_ID_RATIO * HOT_ID_RATIO;
	else
		v = next_auction(r, id);
	b->auction = v + NX_FIRST_AUCTION_ID;
	if (jr_next_int_n(r, HOT_BIDDERS_RATIO) > 0)
		v = last_person(id) / HOT_ID_RATIO * HOT_ID_RATIO + 1;
	else
		v = next_person(r, id);
	b->bidder = v + NX_FIRST_PERSON_ID;
	b->price = next_price(r);
	b->date_time = ts;

	pthread_once(&chan_urls_once, chan_urls_build);
	if (jr_next_int_n(r, HOT_CHANNELS_RATIO) > 0)
		u = &chan_urls[CHANNELS_NUMBER + jr_next_int_n(r, NELEM(hot_channels))];
	else
		u = &chan_urls[jr_next_int_n(r, CHANNELS_NUMBER)];
	memcpy(b->channel, u->name, sizeof(b->channel));
	b->channel_len = u->name_len;
	memcpy(b->url, u->url, sizeof(b->url));
	b->url_len = u->url_len;

	b->extra_len = next_extra(r, BID_CUR, NX_AVG_BID_BYTES, b->extra);
}

void nx_event(const struct nx_config *c, uint64_t n, struct nx_event *out)
{
	uint64_t num = c->first_event_number + n, g = c->ooo_group;
	int64_t id, ts;
	struct jrand r;

	if (g > 1)
		num = (num / g) * g + (num * 953) % g;
	id = (int64_t)(c->first_event_id + num);
	ts = nx_timestamp_ms(c, num);
	jr_seed(&r, id);
	out->seq = (uint64_t)id;
	out->kind = nx_kind_of((uint64_t)id);
	switch (out->kind) {
	case NX_PERSON:
		gen_person(&r, id, ts, &out->person);
		break;
	case NX_AUCTION:
		gen_auction(c, &r, id, num, ts, &out->auction);
		break;
	case NX_BID:
		gen_bid(&r, id, ts, &out->bid);
		break;
	}
}
