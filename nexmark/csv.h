/*
 * csv.h — Nexmark events as CSV lines: the format of `sfs gen`'s
 * person.csv / auction.csv / bid.csv, which other code compares byte for
 * byte, and of the runtime's CSV sink.
 *
 * RFC 4180, minimal: a field is quoted (with "" for a quote inside) only
 * when it holds a comma, a double quote, CR or LF; integers and epoch
 * milliseconds are plain decimals; every line ends with "\n".  The
 * generator never produces a character that needs quoting today, but the
 * writers do not rely on it.
 */
#ifndef SFS_NEXMARK_CSV_H
#define SFS_NEXMARK_CSV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nexmark/gen.h"

#define NX_CSV_PERSON_HEADER "seq,id,name,emailAddress,creditCard,city,state,dateTime,extra\n"
#define NX_CSV_AUCTION_HEADER \
	"seq,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra\n"
#define NX_CSV_BID_HEADER "seq,auction,bidder,price,channel,url,dateTime,extra\n"

/* Room nx_csv_event() may need: every string quoted and doubled, every
 * integer 20 digits and a sign (the auction is the longest). */
#define NX_CSV_LINE_MAX 2048

/* The header line (with its "\n") of the file for @kind. */
const char *nx_csv_header(enum nx_kind kind);

/* Does @s[0..n) need quoting?  O(n). */
int nx_csv_needs_quote(const char *s, size_t n);

/* Write one field, quoted only if needed, to @dst, which must have room for
 * 2n + 2 bytes; returns the bytes written (no separator, no NUL). */
size_t nx_csv_field_buf(char *dst, const char *s, size_t n);

/* The same to a stdio stream; 0, or -EIO if the stream reports an error. */
int nx_csv_field(FILE *f, const char *s, size_t n);

/* Decimal of @v into @dst (room for 20 bytes); returns the length. */
size_t nx_csv_i64(char *dst, int64_t v);

/* The CSV line of @e (its kind's columns, "\n" included, no NUL) into
 * @dst, which has NX_CSV_LINE_MAX bytes; returns its length. */
size_t nx_csv_event(char *dst, const struct nx_event *e);

#endif
