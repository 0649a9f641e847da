/*
 * chan.h — the exchange channel between two workers: a single-producer
 * single-consumer ring of variable-length records in shared memory.
 *
 * shm/ring.h moves fixed-size records; exchanged rows are 30 B to 1 KiB, so
 * a fixed slot would waste most of the bandwidth it moves.  This is the same
 * protocol over bytes (the Lamport/DPDK ring with cached opposite indexes):
 *
 *   ch_head  producer line: bytes written, published with a release store
 *            once per batch (rt_chan_publish), never per record;
 *   ch_tail  consumer line: bytes consumed, published the same way.
 *
 * Positions are free-running 64-bit byte counts (no wrap-around to reason
 * about).  A record is an 8-byte header {len, type} and len bytes padded to
 * 8; one that would straddle the end of the ring is preceded by a PAD record
 * filling the rest, so a record is always contiguous and can be read in
 * place (zero-copy: a view is valid until the consumer publishes its tail).
 * Each side keeps its cursor and its cached copy of the other's index in
 * process-local memory: a busy pair touches each other's line once per
 * batch.  No call makes a syscall, allocates or locks; waking a sleeping
 * consumer is the engine's business (job.h doorbells).
 */
#ifndef SFS_RUNTIME_CHAN_H
#define SFS_RUNTIME_CHAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "runtime/util.h"

enum rt_rec_type {
	RT_REC_PAD = 0,      /* filler up to the end of the ring */
	RT_REC_DATA = 1,     /* an operator's record */
	RT_REC_BARRIER = 2,  /* checkpoint barrier: payload u64 id */
	RT_REC_END = 3,      /* end of input of this producer */
	RT_REC_WATERMARK = 4, /* event-time watermark: payload int64 ms */
};

struct rt_chan {
	uint64_t ch_head __rt_cache_aligned;  /* producer: release */
	uint64_t ch_tail __rt_cache_aligned;  /* consumer: release */
	uint64_t ch_size __rt_cache_aligned;  /* data bytes, power of two: constant */
	uint64_t ch_pad[7];
	unsigned char ch_data[] __rt_cache_aligned;
};

struct rt_rec {
	uint32_t len;
	uint32_t type;
	unsigned char data[];
};

/* A side's process-local cursor. */
struct rt_chan_end {
	struct rt_chan *ch;
	uint64_t mask;
	uint64_t pos;      /* producer: head written; consumer: tail read */
	uint64_t other;    /* cached opposite index */
	uint64_t published;
};

#define RT_REC_HDR 8u

static inline uint64_t rt_rec_span(uint32_t len)
{
	return RT_REC_HDR + (((uint64_t)len + 7) & ~7ull);
}

/* Creator only, before any side attaches. */
static inline void rt_chan_init(struct rt_chan *ch, uint64_t data_bytes)
{
	memset(ch, 0, sizeof(*ch));
	ch->ch_size = data_bytes;
}

static inline void rt_chan_end_init(struct rt_chan_end *e, struct rt_chan *ch, int producer)
{
	e->ch = ch;
	e->mask = ch->ch_size - 1;
	if (producer) {
		e->pos = rt_load_acquire(&ch->ch_head);
		e->other = rt_load_acquire(&ch->ch_tail);
	} else {
		e->pos = rt_load_acquire(&ch->ch_tail);
		e->other = rt_load_acquire(&ch->ch_head);
	}
	e->published = e->pos;
}

/*
 * Producer: room for a record of @len bytes of @type; returns where to write
 * the payload, or NULL if the ring is full (nothing was written).  The
 * record becomes visible at the next rt_chan_publish().
 */
static inline void *rt_chan_reserve(struct rt_chan_end *e, uint32_t len, uint32_t type)
{
	uint64_t size = e->mask + 1, need = rt_rec_span(len);
	uint64_t off = e->pos & e->mask, pad = off + need > size ? size - off : 0;
	struct rt_rec *r;

	if (e->pos + pad + need - e->other > size) {
		e->other = rt_load_acquire(&e->ch->ch_tail);
		if (e->pos + pad + need - e->other > size)
			return NULL;
	}
	if (pad) {
		r = (struct rt_rec *)(e->ch->ch_data + off);
		r->len = (uint32_t)(pad - RT_REC_HDR);
		r->type = RT_REC_PAD;
		e->pos += pad;
	}
	r = (struct rt_rec *)(e->ch->ch_data + (e->pos & e->mask));
	r->len = len;
	r->type = type;
	e->pos += need;
	return r->data;
}

/* Producer: make every reserved record visible.  Returns 1 if it published
 * anything (the caller then checks whether the consumer sleeps). */
static inline int rt_chan_publish(struct rt_chan_end *e)
{
	if (e->pos == e->published)
		return 0;
	rt_store_release(&e->ch->ch_head, e->pos);
	e->published = e->pos;
	return 1;
}

/* Consumer: the next record, or NULL when nothing is published. */
static inline const struct rt_rec *rt_chan_peek(struct rt_chan_end *e)
{
	for (;;) {
		const struct rt_rec *r;

		if (e->pos == e->other) {
			e->other = rt_load_acquire(&e->ch->ch_head);
			if (e->pos == e->other)
				return NULL;
		}
		r = (const struct rt_rec *)(e->ch->ch_data + (e->pos & e->mask));
		if (r->type != RT_REC_PAD)
			return r;
		e->pos += rt_rec_span(r->len);
	}
}

/* Consumer: done with @r (the record rt_chan_peek returned). */
static inline void rt_chan_consume(struct rt_chan_end *e, const struct rt_rec *r)
{
	e->pos += rt_rec_span(r->len);
}

/* Consumer: hand consumed space back (views into it end here). */
static inline void rt_chan_release(struct rt_chan_end *e)
{
	if (e->pos != e->published) {
		rt_store_release(&e->ch->ch_tail, e->pos);
		e->published = e->pos;
	}
}

/* Either side, any process: bytes in flight (published). */
static inline uint64_t rt_chan_used(const struct rt_chan *ch)
{
	return rt_load_relaxed(&ch->ch_head) - rt_load_relaxed(&ch->ch_tail);
}

#endif
