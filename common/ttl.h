/*
 * ttl.h — state time-to-live: the expiry every entry of a TTL state
 * carries, and the one rule that says whether it is still live.
 *
 * Format.  A state registered with a TTL (sfs_state_register_ttl,
 * include/sfs.h; sd_ttl_ms in the segment's registry and in a checkpoint's
 * states= record) stores every value, counter, map entry and list element
 * as [expiry: 8 bytes][the user's bytes]: the expiry is the entry's last
 * write time (or read time, with SFS_TTL_REFRESH_ON_READ) plus the state's
 * TTL, in milliseconds of the clock the state uses, a native uint64 (sfs
 * runs on little-endian Linux only, as its int64 counters do).  Below the
 * state API nobody interprets it: buffers, value cache and flush targets
 * hold the prefixed bytes as any value, so each layer's code is unchanged
 * and an expired entry shadows older ones exactly as a live one does (it
 * is the newest version; the version under it is older, so expired too).
 * A TTL counter is a value of 8 + 8 bytes, [expiry][int64], written by a
 * read-modify-write (never a blind merge: a delta folded over a base that
 * expired in between would resurrect it), so a TTL state's stored entries
 * are only puts and deletes.
 *
 * Clocks.  Each worker keeps two: processing time (CLOCK_REALTIME in ms,
 * read at each quiescent point and barrier — Flink's default) and event
 * time (what the program sets with sfs_ctx_set_time, its watermark; it
 * never goes back, not even across a restore).  A state uses one
 * (SFS_TTL_EVENT_TIME picks event time).  Each sealed buffer carries both
 * clocks as of its seal (struct sfs_ttl_clock); maintenance never reads a
 * clock of its own: what it drops was expired at the worker's clock of the
 * newest buffer it flushed, so a drop is never visible to a reader, whose
 * clock is at least that.
 *
 * Cost: 8 bytes per entry of a TTL state; a compare per read.  States
 * without a TTL are untouched (no prefix, no check).
 */
#ifndef SFS_COMMON_TTL_H
#define SFS_COMMON_TTL_H

#include <stdint.h>
#include <string.h>

#include "sfs.h"

#define SFS_TTL_PREFIX 8u  /* bytes of the expiry in front of a TTL value */

/* The clocks of a sealed buffer (worker/wctl.h cb_ttl) and of maintenance. */
struct sfs_ttl_clock {
	uint64_t proc_ms;   /* processing time, CLOCK_REALTIME ms */
	uint64_t event_ms;  /* event time the program set (0: never set) */
};

/* What maintenance knows of a state: its TTL (0: none) and which clock. */
struct sfs_ttl_rule {
	uint64_t ttl_ms;
	uint32_t event_time;  /* 1: the event clock */
};

static inline uint64_t sfs_ttl_expiry_of(const void *val)
{
	uint64_t e;

	memcpy(&e, val, sizeof(e));
	return e;
}

/* write time + ttl, saturating (a TTL near UINT64_MAX never expires). */
static inline uint64_t sfs_ttl_deadline(uint64_t now_ms, uint64_t ttl_ms)
{
	return now_ms > UINT64_MAX - ttl_ms ? UINT64_MAX : now_ms + ttl_ms;
}

/* 1 when a TTL value of @len bytes at @val has expired at @now_ms (or is
 * too short to carry an expiry: never a live value), else 0.  Flink's
 * rule: expired once last write + ttl <= now. */
static inline int sfs_ttl_expired(const void *val, uint32_t len, uint64_t now_ms)
{
	return len < SFS_TTL_PREFIX || sfs_ttl_expiry_of(val) <= now_ms;
}

/* A read's answer @rc (1: found, with its stored bytes in *@v) made the
 * user's at @now_ms: 0 and an empty view when it has expired, else 1 and
 * the view past the expiry.  Any other @rc is passed on.  The one rule of
 * every reader (the owner's reads, queryable state). */
static inline int sfs_ttl_answer(int rc, struct sfs_view *v, uint64_t now_ms)
{
	if (rc != 1)
		return rc;
	if (sfs_ttl_expired(v->data, v->len, now_ms)) {
		v->data = NULL;
		v->len = 0;
		return 0;
	}
	v->data = (const char *)v->data + SFS_TTL_PREFIX;
	v->len -= SFS_TTL_PREFIX;
	return 1;
}

/* The clock of @c a state with rule @r uses. */
static inline uint64_t sfs_ttl_now(const struct sfs_ttl_rule *r, const struct sfs_ttl_clock *c)
{
	return r->event_time ? c->event_ms : c->proc_ms;
}

#endif
