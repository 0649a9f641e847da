/*
 * records.h — the bytes of Nexmark rows as queries send them through the
 * exchange and keep them in state: fixed integer fields, then the string
 * lengths, then the strings.  Records sit 8-aligned in channels and state
 * values are read in place, so decoding is a cast plus offsets (no copy).
 * A query sends only the rows it needs (projection happens in source()).
 */
#ifndef SFS_QUERY_RECORDS_H
#define SFS_QUERY_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nexmark/gen.h"
#include "runtime/row.h"

enum { Q_BID = 1, Q_AUCTION = 2, Q_PERSON = 3 };

struct q_bid {
	uint32_t tag;         /* Q_BID */
	uint16_t channel_len, url_len;
	uint16_t extra_len, pad[3];
	int64_t seq, auction, bidder, price, date_time;
	char s[];             /* channel | url | extra */
};

struct q_auction {
	uint32_t tag;         /* Q_AUCTION */
	uint16_t item_len, desc_len;
	uint16_t extra_len, pad[3];
	int64_t seq, id, initial_bid, reserve, date_time, expires, seller, category;
	char s[];             /* itemName | description | extra */
};

static inline size_t q_bid_size(const struct nx_event *e)
{
	const struct nx_bid *b = &e->bid;

	return sizeof(struct q_bid) + b->channel_len + b->url_len + b->extra_len;
}

static inline void q_bid_encode(void *out, const struct nx_event *e)
{
	const struct nx_bid *b = &e->bid;
	struct q_bid *r = out;
	char *p = r->s;

	memset(r, 0, sizeof(*r));
	r->tag = Q_BID;
	r->channel_len = b->channel_len;
	r->url_len = b->url_len;
	r->extra_len = b->extra_len;
	r->seq = (int64_t)e->seq;
	r->auction = b->auction;
	r->bidder = b->bidder;
	r->price = b->price;
	r->date_time = b->date_time;
	memcpy(p, b->channel, b->channel_len);
	p += b->channel_len;
	memcpy(p, b->url, b->url_len);
	p += b->url_len;
	memcpy(p, b->extra, b->extra_len);
}

static inline size_t q_bid_len(const struct q_bid *r)
{
	return sizeof(*r) + r->channel_len + r->url_len + r->extra_len;
}

static inline const char *q_bid_channel(const struct q_bid *r) { return r->s; }
static inline const char *q_bid_url(const struct q_bid *r) { return r->s + r->channel_len; }
static inline const char *q_bid_extra(const struct q_bid *r)
{
	return r->s + r->channel_len + r->url_len;
}

static inline size_t q_auction_size(const struct nx_event *e)
{
	const struct nx_auction *a = &e->auction;

	return sizeof(struct q_auction) + a->item_name_len + a->description_len + a->extra_len;
}

static inline void q_auction_encode(void *out, const struct nx_event *e)
{
	const struct nx_auction *a = &e->auction;
	struct q_auction *r = out;
	char *p = r->s;

	memset(r, 0, sizeof(*r));
	r->tag = Q_AUCTION;
	r->item_len = a->item_name_len;
	r->desc_len = a->description_len;
	r->extra_len = a->extra_len;
	r->seq = (int64_t)e->seq;
	r->id = a->id;
	r->initial_bid = a->initial_bid;
	r->reserve = a->reserve;
	r->date_time = a->date_time;
	r->expires = a->expires;
	r->seller = a->seller;
	r->category = a->category;
	memcpy(p, a->item_name, a->item_name_len);
	p += a->item_name_len;
	memcpy(p, a->description, a->description_len);
	p += a->description_len;
	memcpy(p, a->extra, a->extra_len);
}

static inline size_t q_auction_len(const struct q_auction *r)
{
	return sizeof(*r) + r->item_len + r->desc_len + r->extra_len;
}

static inline const char *q_auction_item(const struct q_auction *r) { return r->s; }
static inline const char *q_auction_desc(const struct q_auction *r) { return r->s + r->item_len; }
static inline const char *q_auction_extra(const struct q_auction *r)
{
	return r->s + r->item_len + r->desc_len;
}

/* Row fragments in the sink's column order. */
static inline void q_row_bid(struct rt_row *w, const struct q_bid *b)
{
	rt_row_i64(w, b->auction);
	rt_row_i64(w, b->bidder);
	rt_row_i64(w, b->price);
	rt_row_str(w, q_bid_channel(b), b->channel_len);
	rt_row_str(w, q_bid_url(b), b->url_len);
	rt_row_i64(w, b->date_time);
	rt_row_str(w, q_bid_extra(b), b->extra_len);
}

static inline void q_row_auction(struct rt_row *w, const struct q_auction *a)
{
	rt_row_i64(w, a->id);
	rt_row_str(w, q_auction_item(a), a->item_len);
	rt_row_str(w, q_auction_desc(a), a->desc_len);
	rt_row_i64(w, a->initial_bid);
	rt_row_i64(w, a->reserve);
	rt_row_i64(w, a->date_time);
	rt_row_i64(w, a->expires);
	rt_row_i64(w, a->seller);
	rt_row_i64(w, a->category);
	rt_row_str(w, q_auction_extra(a), a->extra_len);
}

/* Scratch for an unaligned state value (u64 words; rows stay below 8 KiB). */
#define SFS_ROW_SCRATCH 1024

/* A state value read back may be unaligned in a store; copy when so. */
static inline const void *q_aligned(const void *p, size_t len, void *scratch)
{
	if (((uintptr_t)p & 7) == 0)
		return p;
	memcpy(scratch, p, len);
	return scratch;
}

/* Big-endian integer keys: memcmp order is numeric order. */
static inline void q_key_i64(unsigned char *k, int64_t v)
{
	uint64_t u = (uint64_t)v;

	for (int i = 7; i >= 0; i--, u >>= 8)
		k[i] = (unsigned char)u;
}

#endif
