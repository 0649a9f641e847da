/*
 * csv.c — the CSV writers of nexmark/csv.h.  Formatting goes into a caller's
 * buffer (no stdio per field) so `sfs gen` and the runtime's sink pay one
 * fwrite per line; nx_csv_field() is the stream form for occasional use.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "nexmark/csv.h"

/* Worst case per string column: quoted and every byte a doubled quote. */
#define Q(cap) (2 * ((cap) - 1) + 2)
static_assert(NX_CSV_LINE_MAX >= 8 * 21 + Q(NX_ITEM_NAME_CAP) + Q(NX_DESC_CAP) +
				  Q(NX_AUCTION_EXTRA_CAP) + 11,
	      "auction line");
static_assert(NX_CSV_LINE_MAX >= 3 * 21 + Q(NX_NAME_CAP) + Q(NX_EMAIL_CAP) + Q(NX_CARD_CAP) +
				  Q(NX_CITY_CAP) + Q(NX_STATE_CAP) + Q(NX_PERSON_EXTRA_CAP) + 9,
	      "person line");
static_assert(NX_CSV_LINE_MAX >= 5 * 21 + Q(NX_CHANNEL_CAP) + Q(NX_URL_CAP) +
				  Q(NX_BID_EXTRA_CAP) + 8,
	      "bid line");

const char *nx_csv_header(enum nx_kind kind)
{
	switch (kind) {
	case NX_PERSON:
		return NX_CSV_PERSON_HEADER;
	case NX_AUCTION:
		return NX_CSV_AUCTION_HEADER;
	case NX_BID:
		return NX_CSV_BID_HEADER;
	}
	return "";
}

/* The bytes that force quoting, for the tail of a scan. */
static const uint8_t quote_byte[256] = { [','] = 1, ['"'] = 1, ['\r'] = 1, ['\n'] = 1 };

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Non-zero iff a byte of @x equals @c (exact: the borrow trick only errs on
 * bytes above a zero byte, and then there is a zero byte anyway). */
static inline uint64_t has_byte(uint64_t x, uint8_t c)
{
	uint64_t y = x ^ (ONES * c);

	return (y - ONES) & ~y & HIGHS;
}

/*
 * Eight bytes per step, the four tests OR-ed without branches: extras are
 * most of a line's bytes and never need quoting, so this scan is a large
 * part of formatting a line (a byte-table loop was ~2x slower).
 */
int nx_csv_needs_quote(const char *s, size_t n)
{
	uint64_t acc = 0, x;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&x, s + i, 8);
		acc |= has_byte(x, ',') | has_byte(x, '"') | has_byte(x, '\r') | has_byte(x, '\n');
	}
	for (; i < n; i++)
		acc |= quote_byte[(uint8_t)s[i]];
	return acc != 0;
}

size_t nx_csv_field_buf(char *dst, const char *s, size_t n)
{
	char *p = dst;

	if (!nx_csv_needs_quote(s, n)) {
		memcpy(dst, s, n);
		return n;
	}
	*p++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"')
			*p++ = '"';
		*p++ = s[i];
	}
	*p++ = '"';
	return (size_t)(p - dst);
}

int nx_csv_field(FILE *f, const char *s, size_t n)
{
	if (!nx_csv_needs_quote(s, n)) {
		if (n && fwrite(s, 1, n, f) != n)
			return -EIO;
		return 0;
	}
	if (putc('"', f) == EOF)
		return -EIO;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' && putc('"', f) == EOF)
			return -EIO;
		if (putc(s[i], f) == EOF)
			return -EIO;
	}
	return putc('"', f) == EOF ? -EIO : 0;
}

/* "00".."99": two digits per divide halves the dependent chain of
 * multiply-shifts, which is most of a bid line's formatting time. */
static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

size_t nx_csv_i64(char *dst, int64_t v)
{
	char tmp[20], *p = tmp + sizeof(tmp);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	size_t len;

	while (u >= 100) {
		unsigned d = (unsigned)(u % 100);

		u /= 100;
		p -= 2;
		memcpy(p, digit_pairs + 2 * d, 2);
	}
	if (u >= 10) {
		p -= 2;
		memcpy(p, digit_pairs + 2 * u, 2);
	} else {
		*--p = (char)('0' + u);
	}
	len = (size_t)(tmp + sizeof(tmp) - p);
	if (v < 0)
		*dst++ = '-';
	memcpy(dst, p, len);
	return len + (v < 0);
}

/* Append helpers: each returns the new end. */
static inline char *put_i64(char *p, int64_t v)
{
	p += nx_csv_i64(p, v);
	*p = ',';
	return p + 1;
}

static inline char *put_str(char *p, const char *s, size_t n)
{
	p += nx_csv_field_buf(p, s, n);
	*p = ',';
	return p + 1;
}

size_t nx_csv_event(char *dst, const struct nx_event *e)
{
	char *p = put_i64(dst, (int64_t)e->seq);

	switch (e->kind) {
	case NX_PERSON: {
		const struct nx_person *x = &e->person;

		p = put_i64(p, x->id);
		p = put_str(p, x->name, x->name_len);
		p = put_str(p, x->email, x->email_len);
		p = put_str(p, x->credit_card, x->credit_card_len);
		p = put_str(p, x->city, x->city_len);
		p = put_str(p, x->state, x->state_len);
		p = put_i64(p, x->date_time);
		p = put_str(p, x->extra, x->extra_len);
		break;
	}
	case NX_AUCTION: {
		const struct nx_auction *x = &e->auction;

		p = put_i64(p, x->id);
		p = put_str(p, x->item_name, x->item_name_len);
		p = put_str(p, x->description, x->description_len);
		p = put_i64(p, x->initial_bid);
		p = put_i64(p, x->reserve);
		p = put_i64(p, x->date_time);
		p = put_i64(p, x->expires);
		p = put_i64(p, x->seller);
		p = put_i64(p, x->category);
		p = put_str(p, x->extra, x->extra_len);
		break;
	}
	case NX_BID: {
		const struct nx_bid *x = &e->bid;

		p = put_i64(p, x->auction);
		p = put_i64(p, x->bidder);
		p = put_i64(p, x->price);
		p = put_str(p, x->channel, x->channel_len);
		p = put_str(p, x->url, x->url_len);
		p = put_i64(p, x->date_time);
		p = put_str(p, x->extra, x->extra_len);
		break;
	}
	}
	p[-1] = '\n';	/* the last field's separator */
	return (size_t)(p - dst);
}
