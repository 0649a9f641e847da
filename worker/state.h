/*
 * state.h — the worker's state context (process-local) and the helpers the
 * compactor shares to find a worker's region.
 */
#ifndef SFS_WORKER_STATE_H
#define SFS_WORKER_STATE_H

#include <stdint.h>

#include "sfs.h"
#include "common/keygroup.h"
#include "common/ttl.h"
#include "shm/proc.h"
#include "shm/ring.h"
#include "worker/target_read.h"
#include "worker/vcache.h"
#include "worker/wbuf.h"
#include "worker/wctl.h"

#define SFS_FILL_KEY_MAX 64
#define SFS_FILLS_MAX 64

struct sfs_ckpt_worker;

/* Process-local: never in shared memory. */
struct sfs_ctx {
	struct sfs_seg seg;
	struct sfs_proc_slot *slot;
	uint32_t worker;
	uint32_t par, maxp, kg_start, kg_end;
	/* The ownership check of the hot path, precomputed at open: kg =
	 * hash & kg_mask when max parallelism is a power of two (the default
	 * 128: no division), else hash % maxp; owned iff kg - kg_start <=
	 * kg_span (one unsigned compare). */
	uint32_t kg_mask, kg_pow2, kg_span;
	/* SFS_WORKER_CALLER_KG: the key group of every state call is
	 * caller_kg (sfs_ctx_key_group), not kg_of(the key's hash). */
	int caller_kg_on;
	uint32_t caller_kg;
	int restarted;                 /* the region existed: a restart */
	uint64_t rb_dropped;           /* the rollback in place whose drop is done
				        * (sfs_worker_rollback), until it is */
	int need_active;               /* sealed, but no free buffer yet */
	/* The group's checkpoint words this context keeps to (shm/ckpt.h),
	 * found at open; NULL in a group without checkpoints.  ck_req: the
	 * newest barrier requested, where the group's checkpointer requests
	 * them (not in a host group: its engine numbers its own); ckw: this
	 * worker's entry, whose cw_barrier each barrier publishes. */
	const uint64_t *ck_req;
	struct sfs_ckpt_worker *ckw;
	uint64_t stall_timeout_ns;
	struct sfs_wctl *ctl;
	struct sfs_ring *ring;
	struct sfs_wbuf *buf[SFS_WCTL_MAX_BUFS];
	const struct sfs_target_read_ops *tops;  /* the flush target below the buffers */
	struct sfs_target_reader *tr;
	uint32_t order[SFS_WCTL_MAX_BUFS];  /* read order: active, then sealed newest first */
	uint32_t norder;
	/* The active buffer's probe geometry (struct sfs_wbuf_geom), copied
	 * when the read order is rebuilt: at open, at each seal and at each
	 * activation after a stall -- the only moments this process changes
	 * which buffer is active or resets one.  hot_on: order[0] is the
	 * active buffer and hot is its geometry; 0 while a seal waits for a
	 * free buffer (need_active). */
	struct sfs_wbuf_geom hot;
	int hot_on;
	uint8_t kinds[SFS_MAX_STATES]; /* kinds this worker registered, 0 = not */
	/* State TTL (common/ttl.h): this worker's registrations' durations
	 * (0: the state has none) and SFS_TTL_* flags, and its clocks (the
	 * processing one read at open, each quiescent point, online and
	 * barrier when any state has a TTL; the event one set by
	 * sfs_ctx_set_time, never backwards). */
	uint64_t ttl_ms[SFS_MAX_STATES];
	uint8_t ttl_flags[SFS_MAX_STATES];
	int ttl_any;
	struct sfs_ttl_clock clk;
	struct sfs_vcache *cache;      /* NULL: no value cache */
	/* Cache fills found by reads, applied at the next quiescent point:
	 * a fill moves cache memory, which would break views handed out since
	 * the last quiescent point.  Keys longer than the inline copy are not
	 * cached. */
	unsigned nfills;
	struct sfs_fill {
		uint64_t ns;
		uint64_t h;            /* the key's buffer hash (= its cache hash) */
		const void *val;       /* in the flushed store: valid until quiescent */
		uint32_t vlen;
		uint16_t klen;
		uint8_t absent;
		unsigned char key[SFS_FILL_KEY_MAX];
	} fills[SFS_FILLS_MAX];
	unsigned char kbuf[SFS_KEY_MAX + 8]; /* kg | state | key scratch */
	struct sfs_seen *seen;         /* map iteration: user keys already seen */
};

/* Shared with worker/mapstate.c: get an ACTIVE buffer after a stalled
 * seal; seal the active buffer early (it is full); check a state, kind,
 * key length (+@extra bytes) and key-group ownership (returns the kg). */
int sfs__state_ready(sfs_ctx_t *c);
/* The store's sealed buffers not yet in its own format, newest first
 * (target_read.h images): read below this worker's buffers, only those
 * older than its oldest SEALED one (state.c). */
int sfs__ctx_images(sfs_ctx_t *c, const struct sfs_wbuf *const **b, const uint64_t **seq,
		    unsigned *n);
int sfs__state_spill(sfs_ctx_t *c);
int sfs__state_check(sfs_ctx_t *c, uint32_t state, uint32_t kind, const void *key, size_t klen,
		     size_t extra, const char *op);
void sfs__map_free(sfs_ctx_t *c);

/* TTL (common/ttl.h), for worker/mapstate.c: the clock state @state uses
 * now; the expiry a write of it stamps; and a read's answer @rc with its
 * view *@out turned into the user's: the expiry stripped, or absent (0,
 * empty view) when it has passed.  Only for a state with c->ttl_ms set. */
static inline uint64_t sfs__ttl_now(const sfs_ctx_t *c, uint32_t state)
{
	return (c->ttl_flags[state] & SFS_TTL_EVENT_TIME) ? c->clk.event_ms : c->clk.proc_ms;
}
static inline uint64_t sfs__ttl_expiry(const sfs_ctx_t *c, uint32_t state)
{
	return sfs_ttl_deadline(sfs__ttl_now(c, state), c->ttl_ms[state]);
}
static inline int sfs__ttl_view(const sfs_ctx_t *c, uint32_t state, int rc, struct sfs_view *out)
{
	return sfs_ttl_answer(rc, out, sfs__ttl_now(c, state));
}

/* Map state in one buffer, for any reader of it (worker/mapstate.c; the
 * owner's reads and worker/query.c's).  head_of: 1 and map @p's head in
 * buffer @b, 0 when it has none.  get_in: user key @pk[plen..plen+ulen)
 * of map @pk[0..plen) (head hash @hp, entry hash @he): 1 and its value, 0
 * removed or shadowed by a clear in @b, -ENOENT when @b does not decide
 * (older layers next), or an error.  iter_in: @b's live entries (head
 * @hd) to @fn, each user key once, recording every key it meets in
 * *@seen (older layers skip those).  The seen set is process-local. */
struct sfs_seen;
int sfs__map_head_of(const struct sfs_wbuf *b, uint64_t h, uint64_t ns, const unsigned char *p,
		     size_t n, struct sfs_map_head *hd);
int sfs__map_get_in(const struct sfs_wbuf *b, uint64_t hp, uint64_t he, uint64_t ns,
		    const unsigned char *pk, size_t plen, size_t ulen, struct sfs_view *out);
int sfs__map_iter_in(struct sfs_seen **seen, const struct sfs_wbuf *b,
		     const struct sfs_map_head *hd, size_t plen, sfs_entry_fn fn, void *arg);
/* 1 if @k is new to the set (now in it), 0 if seen, < 0 on no memory. */
int sfs__seen_add(struct sfs_seen **seen, const void *k, uint32_t len);
void sfs__seen_reset(struct sfs_seen *s);
void sfs__seen_free(struct sfs_seen **s);

/* Map worker @w's region in @s: control block, ring and buffers. */
int sfs_wctl_attach(struct sfs_seg *s, uint32_t w, struct sfs_wctl **ctl, struct sfs_ring **ring,
		    struct sfs_wbuf **bufs);

/* sfs_merge_check (common/merge.h) over every registered counter state of
 * segment @h (the registry sfs_state_register fills).  O(SFS_MAX_STATES)
 * descriptor reads: run it per buffer, not per entry. */
int sfs_merge_check_states(const struct sfs_seg_hdr *h);

#endif
