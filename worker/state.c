/*
 * state.c — a worker's keyed state: registration, the write path into the
 * active buffer, the read path through buffers and the flushed store, and
 * the barrier that seals and swaps buffers (include/sfs.h for the API,
 * worker/wctl.h for the region and the buffer hand-off).
 *
 * Read path and counters.  A read walks the live buffers newest first.  A
 * PUT or DELETE ends the walk: it shadows everything older.  A counter's
 * MERGE cells are collected with their buffer's seq and the walk goes on.
 * When it runs out of buffers the flushed store gives the base and its
 * entry's tag: the deltas of buffers whose seq is greater than the tag are
 * folded over it, the others are already inside it (the compactor may have
 * flushed a buffer while it is still SEALED).  The active buffer has no seq
 * yet and always counts.  So a counter is exact at every moment of a flush,
 * and a redone flush can never count twice.
 *
 * Hot path.  A value get or put hashes its key once: the key-group hash of
 * the user key is the body hash the buffer's hash derives from (key_prep,
 * common/hash.h), and the value cache's hash under state 0 is the
 * buffer's.  Ownership is a mask (or a modulo) and one unsigned compare.
 * The buffers are probed inline (value_bufs, sfs__wbuf_find); the cache,
 * the store and every refusal are out of line.  A put touches the cache
 * only for a key new to the active buffer (sfs_value_put).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fingerprint.h"
#include "common/fs.h"
#include "common/keygroup.h"
#include "common/merge.h"
#include "shm/ckpt.h"
#include "shm/futex.h"
#include "shm/qsbr.h"
#include "shm/ring.h"
#include "worker/open.h"
#include "worker/state.h"
#include "worker/target_read.h"
#include "worker/wbuf.h"

#define MB (1024ull * 1024)

uint64_t sfs_wctl_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_wctl);
	SFS_FP_SIZE(h, struct sfs_wctl_buf);
	SFS_FP_SIZE(h, struct sfs_flush_req);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_magic);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_version);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_worker);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_layout);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_size);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_nbufs);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_parallelism);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_max_par);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_kg_start);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_kg_end);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_buf_bytes);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_buf_entries);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_ring_off);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_bufs_off);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_cache_off);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_cache_bytes);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_seq);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_pin_req);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_erb_to);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_erb_req);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_adopt_dir);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_owner);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_pin_rc);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_erb_rc);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_pin_ack);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_erb_ack);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_active);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_waiting);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_freed);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_barrier);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_barriers);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_spills);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_stalls);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_stall_ns);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_restarts);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_list_seq);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_sealed_bytes);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_flushed_seq);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_flushes);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_flush_entries);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_flush_ns);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_ttl_dropped);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_buf);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_state);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_at_barrier);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_seq);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_barrier);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_sealed_ns);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_flushed_ns);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, cb_ttl);
	SFS_FP_SIZE(h, struct sfs_map_ent);
	h = sfs_fp(h, 2);	/* map links 2: a superseded chain node names its current entry */
	return sfs_fp(h, SFS_WCTL_MAX_BUFS);
}

/* ---- registry -------------------------------------------------------------- */

static int register_state(sfs_ctx_t *c, const char *name, int kind, unsigned op,
			  const struct sfs_ttl *ttl, uint32_t *id);

int sfs_state_register(sfs_ctx_t *c, const char *name, int kind, uint32_t *id)
{
	sfs__err_clear();
	return register_state(c, name, kind, SFS_MERGE_ADD, NULL, id);
}

int sfs_state_register_merge(sfs_ctx_t *c, const char *name, unsigned op, uint32_t *id)
{
	sfs__err_clear();
	return register_state(c, name, SFS_STATE_COUNTER, op, NULL, id);
}

int sfs_state_register_ttl(sfs_ctx_t *c, const char *name, int kind, const struct sfs_ttl *ttl,
			   uint32_t *id)
{
	sfs__err_clear();
	if (!ttl || !ttl->ttl_ms || (ttl->flags & ~(SFS_TTL_REFRESH_ON_READ | SFS_TTL_EVENT_TIME)))
		return sfs__err(SFS_EUSAGE, "state '%s': a TTL needs ttl_ms > 0 and flags of "
				"SFS_TTL_REFRESH_ON_READ | SFS_TTL_EVENT_TIME", name ? name : "");
	if (kind != SFS_STATE_COUNTER && ttl->merge)
		return sfs__err(SFS_EUSAGE, "state '%s': a merge operator is a counter's", name);
	return register_state(c, name, kind, kind == SFS_STATE_COUNTER ? ttl->merge : SFS_MERGE_ADD,
			      ttl, id);
}

/* This worker's copy of state @i's registration. */
static void registered(sfs_ctx_t *c, uint32_t i, int kind, const struct sfs_ttl *ttl)
{
	c->kinds[i] = (uint8_t)kind;
	c->ttl_ms[i] = ttl ? ttl->ttl_ms : 0;
	c->ttl_flags[i] = ttl ? (uint8_t)ttl->flags : 0;
	if (ttl && !c->ttl_any) {
		c->ttl_any = 1;
		c->clk.proc_ms = sfs_now_realtime_ms();
	}
}

/* An existing state registered again: kind, operator and TTL must agree
 * with the segment's (a TTL's duration may change: it is stored as an
 * expiry per entry, and the registry's copy only steers maintenance). */
static int register_again(sfs_ctx_t *c, struct sfs_state_desc *d, const char *name, int kind,
			  unsigned op, const struct sfs_ttl *ttl)
{
	uint64_t had = sfs_load_relaxed(&d->sd_ttl_ms);
	int rc;

	if (d->sd_kind != (uint32_t)kind || d->sd_merge != op)
		return sfs__err(SFS_EUSAGE, "state '%s' is registered as kind %u merge %u, "
				"not kind %d merge %u", name, d->sd_kind, d->sd_merge, kind, op);
	if (!had != !ttl)
		return sfs__err(SFS_EUSAGE, "state '%s' is registered %s a TTL: its entries' "
				"format differs (turning a TTL on or off needs a new state)", name,
				had ? "with" : "without");
	if (ttl && ((sfs_load_relaxed(&d->sd_ttl_flags) ^ ttl->flags) & SFS_TTL_EVENT_TIME))
		return sfs__err(SFS_EUSAGE, "state '%s' is registered with a TTL on %s time", name,
				(ttl->flags & SFS_TTL_EVENT_TIME) ? "processing" : "event");
	/* The index matches; the function behind it must too (this worker's
	 * reads fold the state). */
	if (kind == SFS_STATE_COUNTER && (rc = sfs_merge_check(d->sd_merge, d->sd_merge_name, name)))
		return rc;
	if (ttl && had != ttl->ttl_ms) {
		sfs_store_relaxed(&d->sd_ttl_ms, ttl->ttl_ms);
		sfs_store_relaxed(&d->sd_ttl_flags, ttl->flags);
	}
	return 0;
}

static int register_state(sfs_ctx_t *c, const char *name, int kind, unsigned op,
			  const struct sfs_ttl *ttl, uint32_t *id)
{
	struct sfs_seg_hdr *h = c->seg.hdr;
	int rc;

	if (!name || !*name || strlen(name) >= SFS_STATE_NAME_MAX)
		return sfs__err(SFS_EUSAGE, "state name '%s': 1..%d characters", name ? name : "",
				SFS_STATE_NAME_MAX - 1);
	/* A state's name is written into every checkpoint's _metadata (one
	 * line, split at spaces, control bytes refused on read) and names a
	 * RocksDB column family; refused here, at the first use, rather than
	 * at the first checkpoint, where it would fail the job. */
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p == 0x7f || *p == '/') {
			char show[4 * SFS_STATE_NAME_MAX + 1];

			return sfs__err(SFS_EUSAGE, "state name '%s': no space, '/' or control "
					"byte", sfs_name_show(name, strlen(name), show, sizeof(show)));
		}
	if (kind < SFS_STATE_VALUE || kind > SFS_STATE_LIST)
		return sfs__err(SFS_EUSAGE,
				"state '%s': kind %d is not one of value, counter, map, list", name,
				kind);
	for (int pass = 0; pass < 2; pass++) {
		/* A new state: its operator's name goes into the segment.  (An
		 * existing one is checked against the segment's name below.) */
		if (pass == 1 && !sfs_merge_valid(op))
			return sfs__err(SFS_EUSAGE, "state '%s': merge operator %u is neither built "
					"in (add, max, min) nor defined in this process "
					"(sfs_merge_define)", name, op);
		for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
			struct sfs_state_desc *d = &h->sh_states[i];
			uint32_t st = sfs_load_acquire(&d->sd_state);

			if (st == SFS_SDESC_READY && strcmp(d->sd_name, name) == 0) {
				if ((rc = register_again(c, d, name, kind, op, ttl)))
					return rc;
				registered(c, i, kind, ttl);
				*id = i;
				return 0;
			}
			if (st != SFS_SDESC_FREE || pass == 0)
				continue;
			if (uatomic_cmpxchg(&d->sd_state, SFS_SDESC_FREE, SFS_SDESC_CLAIMED) !=
			    SFS_SDESC_FREE)
				continue;
			snprintf(d->sd_name, sizeof(d->sd_name), "%s", name);
			d->sd_kind = (uint32_t)kind;
			d->sd_merge = op;
			d->sd_ttl_ms = ttl ? ttl->ttl_ms : 0;
			d->sd_ttl_flags = ttl ? ttl->flags : 0;
			snprintf(d->sd_merge_name, sizeof(d->sd_merge_name), "%s",
				 op >= SFS_MERGE_USER ? sfs_merge_name(op) : "");
			sfs_store_release(&d->sd_state, SFS_SDESC_READY);
			/* Lost a race for the same name to a lower entry? Use it. */
			for (uint32_t j = 0; j < i; j++) {
				struct sfs_state_desc *e = &h->sh_states[j];

				if (sfs_load_acquire(&e->sd_state) == SFS_SDESC_READY &&
				    strcmp(e->sd_name, name) == 0) {
					sfs_store_release(&d->sd_state, SFS_SDESC_DUPLICATE);
					if ((rc = register_again(c, e, name, kind, op, ttl)))
						return rc;
					i = j;
					break;
				}
			}
			registered(c, i, kind, ttl);
			*id = i;
			return 0;
		}
	}
	return sfs__err(SFS_EFULL, "segment %s: state registry full (%d states)", c->seg.path,
			SFS_MAX_STATES);
}

void sfs_ctx_set_time(sfs_ctx_t *c, uint64_t event_ms)
{
	if (event_ms > c->clk.event_ms)
		c->clk.event_ms = event_ms;
}

/* The processing clock, when some state needs it: a vDSO read. */
static inline void clock_tick(sfs_ctx_t *c)
{
	if (c->ttl_any)
		c->clk.proc_ms = sfs_now_realtime_ms();
}

/* The compactor's check before each buffer it flushes (common/merge.h):
 * here, beside the registry it reads, since common/ knows no segment. */
int sfs_merge_check_states(const struct sfs_seg_hdr *h)
{
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *d = &h->sh_states[i];
		uint32_t st = sfs_load_acquire(&d->sd_state);
		int rc;

		/* No early stop at a FREE entry: a restored registry may have
		 * gaps (an original's DUPLICATE entries are not restored). */
		if (st == SFS_SDESC_READY && d->sd_kind == SFS_STATE_COUNTER &&
		    (rc = sfs_merge_check(d->sd_merge, d->sd_merge_name, d->sd_name)))
			return rc;
	}
	return 0;
}

/* ---- open / close -------------------------------------------------------------- */

static void region_name(uint32_t w, char *buf, size_t n)
{
	snprintf(buf, n, "worker.%u", w);
}

static uint64_t align64(uint64_t v)
{
	return (v + 63) & ~63ull;
}

/* Recompute the read order: the active buffer, then SEALED ones by seq,
 * newest first.  At open and at each seal: O(K^2), K <= 16. */
static void order_rebuild(sfs_ctx_t *c)
{
	struct sfs_wctl *ctl = c->ctl;
	unsigned n = 0, first;

	/* No ACTIVE buffer while a seal waits for a free one (need_active). */
	if (sfs_load_acquire(&ctl->wc_buf[ctl->wc_active].cb_state) == SFS_BUF_ACTIVE)
		c->order[n++] = ctl->wc_active;
	first = n;
	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		unsigned k;

		if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) != SFS_BUF_SEALED)
			continue;
		for (k = n; k > first && ctl->wc_buf[c->order[k - 1]].cb_seq < ctl->wc_buf[i].cb_seq;
		     k--)
			c->order[k] = c->order[k - 1];
		c->order[k] = i;
		n++;
	}
	c->norder = n;
	c->hot_on = first == 1;
	if (c->hot_on)
		sfs_wbuf_geom_of(c->buf[ctl->wc_active], &c->hot);
}

static int region_init(sfs_ctx_t *c, const struct sfs_worker_opts *o, uint64_t off,
		       uint64_t region_size)
{
	struct sfs_wctl *ctl = sfs_seg_ptr(&c->seg, off);
	uint64_t bufsz = align64(sfs_wbuf_size(o->buffer_keys, o->buffer_bytes));
	int rc;

	memset(ctl, 0, sizeof(*ctl));
	ctl->wc_version = SFS_WCTL_VERSION;
	ctl->wc_worker = c->worker;
	ctl->wc_layout = sfs_wctl_layout();
	ctl->wc_nbufs = o->buffers;
	ctl->wc_parallelism = c->par;
	ctl->wc_max_par = c->maxp;
	ctl->wc_kg_start = c->kg_start;
	ctl->wc_kg_end = c->kg_end;
	ctl->wc_buf_bytes = bufsz;
	ctl->wc_buf_entries = o->buffer_keys;
	/* struct sfs_ring is 128-byte aligned (its producer and consumer
	 * lines are two lines apart); the region itself is page aligned. */
	ctl->wc_ring_off = (sizeof(*ctl) + _Alignof(struct sfs_ring) - 1) &
			   ~(uint64_t)(_Alignof(struct sfs_ring) - 1);
	ctl->wc_bufs_off = align64(ctl->wc_ring_off +
				   sfs_ring_memsize(SFS_WCTL_RING_SLOTS, sizeof(struct sfs_flush_req)));
	ctl->wc_cache_off = ctl->wc_bufs_off + o->buffers * bufsz;
	ctl->wc_cache_bytes = (o->flags & SFS_WORKER_NO_CACHE) ? 0
								: align64(sfs_vcache_size(o->cache_bytes, 0));
	ctl->wc_size = ctl->wc_cache_off + ctl->wc_cache_bytes;
	if (ctl->wc_size > region_size)
		return sfs__err(SFS_EUSAGE,
				"worker %u: these options need %llu bytes, its region has %llu",
				c->worker, (unsigned long long)ctl->wc_size,
				(unsigned long long)region_size);
	rc = sfs_ring_init((char *)ctl + ctl->wc_ring_off, SFS_WCTL_RING_SLOTS,
			   sizeof(struct sfs_flush_req), SFS_RING_SPSC);
	for (uint32_t i = 0; rc == 0 && i < o->buffers; i++) {
		struct sfs_wbuf *b;

		rc = sfs_wbuf_init((char *)ctl + ctl->wc_bufs_off + i * bufsz, bufsz, o->buffer_keys,
				   &b);
	}
	if (rc)
		return rc;
	ctl->wc_active = 0;
	ctl->wc_buf[0].cb_state = SFS_BUF_ACTIVE;
	sfs_store_release(&ctl->wc_magic, SFS_WCTL_MAGIC);
	return 0;
}

static int region_check(const struct sfs_wctl *ctl, uint64_t size, const char *name)
{
	if (sfs_load_acquire(&ctl->wc_magic) != SFS_WCTL_MAGIC)
		return sfs__err(SFS_EMAGIC, "worker region %s: bad magic", name);
	if (ctl->wc_version != SFS_WCTL_VERSION)
		return sfs__err(SFS_EVERSION, "worker region %s: version %u, expected %u", name,
				ctl->wc_version, SFS_WCTL_VERSION);
	if (ctl->wc_layout != sfs_wctl_layout())
		return sfs__err(SFS_ELAYOUT, "worker region %s: layout fingerprint differs", name);
	if (ctl->wc_size > size || ctl->wc_nbufs < 2 || ctl->wc_nbufs > SFS_WCTL_MAX_BUFS)
		return sfs__err(SFS_ECORRUPT, "worker region %s: geometry does not fit the region",
				name);
	return 0;
}

int sfs_wctl_attach(struct sfs_seg *s, uint32_t w, struct sfs_wctl **ctl, struct sfs_ring **ring,
		    struct sfs_wbuf **bufs)
{
	char name[SFS_REGION_NAME_MAX];
	uint64_t off, size;
	int rc;

	region_name(w, name, sizeof(name));
	rc = sfs_seg_region_find(s, name, &off, &size);
	if (rc)
		return rc;
	*ctl = sfs_seg_ptr(s, off);
	rc = region_check(*ctl, size, name);
	if (rc)
		return rc;
	rc = sfs_ring_attach((char *)*ctl + (*ctl)->wc_ring_off, size - (*ctl)->wc_ring_off, ring);
	for (uint32_t i = 0; rc == 0 && i < (*ctl)->wc_nbufs; i++)
		rc = sfs_wbuf_attach((char *)*ctl + (*ctl)->wc_bufs_off + i * (*ctl)->wc_buf_bytes,
				     (*ctl)->wc_buf_bytes, &bufs[i]);
	return rc;
}

/* The defaults of struct sfs_worker_opts (include/sfs.h) filled in. */
static void opts_defaults(struct sfs_worker_opts *o)
{
	if (!o->parallelism)
		o->parallelism = 1;
	if (!o->max_parallelism)
		o->max_parallelism = SFS_MAX_PARALLELISM_DEFAULT;
	if (!o->buffers)
		o->buffers = 4;
	if (!o->buffer_bytes)
		o->buffer_bytes = 16 * MB;
	if (!o->buffer_keys)
		o->buffer_keys = o->buffer_bytes / 64 ? o->buffer_bytes / 64 : 1;
	if (!o->cache_bytes)
		o->cache_bytes = 8 * MB;
}

/* Region bytes of defaulted @o: control page, flush ring, buffers, cache. */
static uint64_t region_need(const struct sfs_worker_opts *o)
{
	uint64_t bufsz = align64(sfs_wbuf_size(o->buffer_keys, o->buffer_bytes));

	return 4096 + sfs_ring_memsize(SFS_WCTL_RING_SLOTS, sizeof(struct sfs_flush_req)) +
	       o->buffers * bufsz + 64 +
	       ((o->flags & SFS_WORKER_NO_CACHE) ? 0 : sfs_vcache_size(o->cache_bytes, 0));
}

uint64_t sfs_worker_region_bytes(const struct sfs_worker_opts *opts)
{
	struct sfs_worker_opts o = opts ? *opts : (struct sfs_worker_opts){ 0 };

	opts_defaults(&o);
	if (o.buffers < 2 || o.buffers > SFS_WCTL_MAX_BUFS ||
	    !sfs_wbuf_size(o.buffer_keys, o.buffer_bytes))
		return 0;
	return region_need(&o);
}

/* The active buffer holds exactly the writes since this worker's last
 * barrier: dropping it is the rollback of this worker's part (a restarted
 * incarnation's open, a rollback in place).  Sealed buffers stay for the
 * compactor.  A worker that died (or halted) between a seal and taking a
 * free buffer has no ACTIVE one: the next write or barrier takes one. */
static void drop_active(sfs_ctx_t *c)
{
	struct sfs_wctl *ctl = c->ctl;

	for (uint32_t i = 0; i < ctl->wc_nbufs; i++)
		if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) == SFS_BUF_ACTIVE) {
			sfs_wbuf_reset(c->buf[i]);
			ctl->wc_active = i;
		}
	if (sfs_load_acquire(&ctl->wc_buf[ctl->wc_active].cb_state) != SFS_BUF_ACTIVE)
		c->need_active = 1;
}

/* An empty value cache over the region's block (none when it has none). */
static int cache_fresh(sfs_ctx_t *c)
{
	struct sfs_wctl *ctl = c->ctl;

	if (!ctl->wc_cache_bytes)
		return 0;
	return sfs_vcache_init((char *)ctl + ctl->wc_cache_off, ctl->wc_cache_bytes, 0, &c->cache);
}

static int worker_reset(sfs_ctx_t *c, uint64_t timeout_ns);
static void ctx_close(sfs_ctx_t *c);

/* wc_owner's word for @c's process-table slot (worker/wctl.h). */
static uint64_t owner_word(const sfs_ctx_t *c)
{
	uint64_t idx = (uint64_t)(c->slot - c->seg.hdr->sh_procs);

	return (SFS_SLOT_GEN(sfs_load_acquire(&c->slot->ps_claim)) << 16) | (idx + 1);
}

/* The process-table slot of owner word @w if it still names a live
 * context (same claim, process alive), else NULL. */
static const struct sfs_proc_slot *owner_alive(const struct sfs_seg *s, uint64_t w)
{
	const struct sfs_proc_slot *sl;
	uint64_t claim, idx = (w & 0xffff) - 1;

	if (!w || idx >= SFS_MAX_PROCS)
		return NULL;
	sl = &s->hdr->sh_procs[idx];
	claim = sfs_load_acquire(&sl->ps_claim);
	if (SFS_SLOT_STATE(claim) != SFS_SLOT_LIVE ||
	    (SFS_SLOT_GEN(claim) & (UINT64_MAX >> 16)) != w >> 16 || !sfs_proc_slot_alive(sl))
		return NULL;
	return sl;
}

/* One context per worker region: two writers of one region corrupt it.
 * Taken over 0 or a holder that is gone (killed, or closed without
 * sfs_worker_close); SFS_ERUNNING while another context holds it. */
static int owner_claim(sfs_ctx_t *c)
{
	uint64_t mine = owner_word(c);

	for (;;) {
		uint64_t cur = sfs_load_acquire(&c->ctl->wc_owner);
		const struct sfs_proc_slot *o = owner_alive(&c->seg, cur);

		if (o)
			return sfs__err(SFS_ERUNNING, "worker %u of job %s is open in process %d",
					c->worker, c->seg.hdr->sh_job, (int)o->ps_pid);
		if (uatomic_cmpxchg(&c->ctl->wc_owner, cur, mine) == cur)
			return 0;
	}
}

/* A host group stages its first ck_workers slots only: a worker beyond
 * them would be flushed but never checkpointed. */
static int host_slot_check(sfs_ctx_t *c, uint32_t worker)
{
	struct sfs_ckpt *ck;

	if (sfs_ckpt_find(&c->seg, &ck) || ck->ck_interval_ms != SFS_CKPT_ENGINE ||
	    worker < ck->ck_workers)
		return 0;
	return sfs__err(SFS_EUSAGE, "worker %u: host group %s has worker slots 0..%u", worker,
			c->seg.hdr->sh_job, ck->ck_workers - 1);
}

/*
 * The group's shape and checkpoint words (shm/ckpt.h).  Every group `sfs
 * run` starts has a checkpoint region, whatever its interval, recording
 * its workers and key groups.  A worker whose range is its share of the
 * parallelism (no SFS_WORKER_KG_RANGE) must give exactly those: with
 * another parallelism it would own another worker's key groups (and the
 * region it lays out would keep that range, refusing the correct open that
 * follows).  Refused here, before any region is touched, so the process
 * can still open correctly.  A segment without the region (a program's
 * own) has no shape to keep to.  Cost: a region lookup, once.
 */
static int group_check(sfs_ctx_t *c, const struct sfs_worker_opts *o, uint32_t worker)
{
	struct sfs_ckpt *ck;
	int rc = sfs__ckpt_find_any(&c->seg, &ck);

	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (!(o->flags & SFS_WORKER_KG_RANGE) &&
	    (o->parallelism != ck->ck_workers ||
	     (ck->ck_max_parallelism && o->max_parallelism != ck->ck_max_parallelism)))
		return sfs__err(SFS_EUSAGE,
				"worker %u: opened with parallelism %u and max parallelism %u, but "
				"group %s has %u workers and %u key groups (SFS_WORKERS, "
				"sfs_task_info): it would own another worker's key groups", worker,
				o->parallelism, o->max_parallelism, c->seg.hdr->sh_job,
				ck->ck_workers, ck->ck_max_parallelism ? ck->ck_max_parallelism
								       : o->max_parallelism);
	if (!ck->ck_interval_ms || worker >= ck->ck_workers)
		return 0;
	c->ckw = &ck->ck_w[worker];
	if (ck->ck_interval_ms != SFS_CKPT_ENGINE)
		c->ck_req = &ck->ck_barrier_req;
	return 0;
}

int sfs__worker_open(const char *job, int node, uint32_t worker,
		     const struct sfs_worker_opts *opts, sfs_target_read_of_fn *read_of,
		     sfs_ctx_t **out)
{
	struct sfs_worker_opts o = opts ? *opts : (struct sfs_worker_opts){ 0 };
	char name[SFS_REGION_NAME_MAX];
	sfs_ctx_t *c;
	uint64_t off, size;
	int rc;

	sfs__err_clear();
	opts_defaults(&o);
	if (o.buffers < 2 || o.buffers > SFS_WCTL_MAX_BUFS)
		return sfs__err(SFS_EUSAGE, "worker %u: %u buffers, need 2..%d", worker, o.buffers,
				SFS_WCTL_MAX_BUFS);
	if (o.flags & SFS_WORKER_KG_RANGE) {
		if (o.kg_first > o.kg_last || o.kg_last >= o.max_parallelism ||
		    o.max_parallelism > 32768 || worker >= SFS_MAX_WORKER_SLOTS)
			return sfs__err(SFS_EUSAGE,
					"worker %u: key groups %u..%u of max parallelism %u: out of "
					"range", worker, o.kg_first, o.kg_last, o.max_parallelism);
	} else if (worker >= o.parallelism || o.max_parallelism < o.parallelism ||
		   o.max_parallelism > 32768) {
		return sfs__err(SFS_EUSAGE,
				"worker %u of parallelism %u, max parallelism %u: out of range",
				worker, o.parallelism, o.max_parallelism);
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return sfs__err(-ENOMEM, "worker %u: no memory for a context", worker);
	c->worker = worker;
	c->par = o.parallelism;
	c->maxp = o.max_parallelism;
	if (o.flags & SFS_WORKER_KG_RANGE) {
		c->kg_start = o.kg_first;
		c->kg_end = o.kg_last;
	} else {
		c->kg_start = sfs_kg_range_start(worker, c->par, c->maxp);
		c->kg_end = sfs_kg_range_end(worker, c->par, c->maxp);
	}
	c->caller_kg_on = (o.flags & SFS_WORKER_CALLER_KG) != 0;
	c->caller_kg = c->kg_start;
	c->kg_pow2 = (c->maxp & (c->maxp - 1)) == 0;
	c->kg_mask = c->maxp - 1;
	c->kg_span = c->kg_end - c->kg_start;
	c->stall_timeout_ns = o.stall_timeout_ns;
	rc = sfs_seg_attach(job, node, &c->seg);
	if (rc)
		goto fail_free;
	rc = sfs_proc_register(&c->seg, SFS_ROLE_WORKER, worker, &c->slot);
	if (rc)
		goto fail_seg;
	if ((rc = host_slot_check(c, worker)) || (rc = group_check(c, &o, worker)))
		goto fail_slot;
	sfs_qsbr_online(c->seg.hdr, c->slot);

	region_name(worker, name, sizeof(name));
	if (sfs_seg_region_find(&c->seg, name, &off, &size) == 0 &&
	    sfs_load_acquire(&((struct sfs_wctl *)sfs_seg_ptr(&c->seg, off))->wc_magic) ==
		    SFS_WCTL_MAGIC) {
		c->restarted = 1;
	} else if (sfs_seg_region_find(&c->seg, name, &off, &size) == 0) {
		/* A previous incarnation died while laying out its region:
		 * nothing in it was ever published, so lay it out again. */
		rc = region_init(c, &o, off, size);
		if (rc)
			goto fail_slot;
	} else {
		uint64_t need = region_need(&o);

		if (!sfs_wbuf_size(o.buffer_keys, o.buffer_bytes)) {
			rc = sfs__err(SFS_EUSAGE, "worker %u: buffer of %llu bytes, %llu keys refused",
				      worker, (unsigned long long)o.buffer_bytes,
				      (unsigned long long)o.buffer_keys);
			goto fail_slot;
		}
		rc = sfs_seg_region_create(&c->seg, name, need, SFS_ROLE_WORKER, &off);
		if (rc == 0)
			rc = sfs_seg_region_find(&c->seg, name, &off, &size);
		if (rc == 0)
			rc = region_init(c, &o, off, size);
		if (rc)
			goto fail_slot;
	}
	rc = sfs_wctl_attach(&c->seg, worker, &c->ctl, &c->ring, c->buf);
	if (rc || (rc = owner_claim(c)))
		goto fail_slot;
	if (c->restarted) {
		struct sfs_wctl *ctl = c->ctl;

		/* A previous incarnation died: drop its active buffer. */
		drop_active(c);
		ctl->wc_restarts++;
		if ((ctl->wc_kg_start != c->kg_start || ctl->wc_kg_end != c->kg_end) &&
		    !(o.flags & SFS_WORKER_RESET)) {
			rc = sfs__err(SFS_EUSAGE,
				      "worker region %s owns key groups %u..%u, this worker %u..%u",
				      name, ctl->wc_kg_start, ctl->wc_kg_end, c->kg_start, c->kg_end);
			goto fail_slot;
		}
	}
	c->tops = read_of(&c->seg);
	if (!c->tops) {
		rc = sfs__err(SFS_EUSAGE, "segment %s: unknown flush target '%.16s'", c->seg.path,
			      c->seg.hdr->sh_backend);
		goto fail_slot;
	}
	rc = c->tops->reader_open(&c->seg, worker, &c->tr);
	if (rc)
		goto fail_slot;
	/* Derived data: a fresh cache at every open, so a restarted worker
	 * never serves a value of its dropped active buffer. */
	if ((rc = cache_fresh(c)))
		goto fail_slot;
	order_rebuild(c);
	if ((o.flags & SFS_WORKER_RESET) && c->restarted) {
		if ((rc = worker_reset(c, o.stall_timeout_ns))) {
			ctx_close(c);
			return rc;
		}
		/* the store is empty: the region takes this task's range */
		c->ctl->wc_kg_start = c->kg_start;
		c->ctl->wc_kg_end = c->kg_end;
	}
	if (c->ckw) {
		/* from now on this worker's seals need its barrier (ckpt.h) */
		sfs_store_release(&c->ckw->cw_barrier, c->ctl->wc_barrier);
		sfs_store_release(&c->ckw->cw_keyed, 1);
	}
	*out = c;
	return 0;
fail_slot:
	sfs_proc_unregister(c->slot);
fail_seg:
	sfs_seg_detach(&c->seg);
fail_free:
	free(c);
	return rc;
}

int sfs_worker_task(sfs_ctx_t *c, sfs_task_t **out)
{
	sfs__err_clear();
	if (!c || !out)
		return sfs__err(SFS_EUSAGE, "sfs_worker_task: NULL argument");
	return sfs__task_open_seg(&c->seg, c->worker, c->slot, out);
}

/* sfs_worker_close without touching the thread's message: also the undo
 * of a failed open, whose message stays the caller's. */
static void ctx_close(sfs_ctx_t *c)
{
	(void)uatomic_cmpxchg(&c->ctl->wc_owner, owner_word(c), 0);
	c->nfills = 0;
	sfs__map_free(c);
	c->tops->reader_close(c->tr);
	sfs_qsbr_offline(c->slot);
	sfs_proc_unregister(c->slot);
	sfs_seg_detach(&c->seg);
	free(c);
}

int sfs_worker_close(sfs_ctx_t *c)
{
	sfs__err_clear();
	if (!c)
		return sfs__err(SFS_EUSAGE, "sfs_worker_close: NULL context");
	ctx_close(c);
	return 0;
}

/* ---- rollback in place (include/sfs.h, shm/ckpt.h) ---------------------------- */

/* Drop what this process holds since its last barrier, as a restarted
 * worker's open does (sfs_worker_open): the active buffer's writes, the
 * cache (derived data, some of it read from buffers the rollback drops),
 * pending fills, and the TTL clock a new process would start with; then go
 * offline, so the compactor's grace periods never wait on a halted worker. */
static int rollback_drop(sfs_ctx_t *c)
{
	int rc;

	c->nfills = 0;
	drop_active(c);
	memset(&c->clk, 0, sizeof(c->clk));
	if (c->ttl_any)
		c->clk.proc_ms = sfs_now_realtime_ms();
	if ((rc = cache_fresh(c)))
		return rc;
	sfs_qsbr_offline(c->slot);
	return 0;
}

int sfs_worker_rollback(sfs_ctx_t *c, sfs_task_t *t, uint64_t timeout_ns)
{
	uint64_t r;
	int rc;

	sfs__err_clear();
	if (!c || !t)
		return sfs__err(SFS_EUSAGE, "sfs_worker_rollback: NULL argument");
	r = sfs_task_rollback_requested(t);
	if (!r)
		return sfs__err(SFS_EUSAGE, "worker %u: no rollback requested", c->worker);
	if (c->rb_dropped != r) {
		if ((rc = rollback_drop(c)))
			return rc;
		c->rb_dropped = r;
	}
	if ((rc = sfs_task_rollback_wait(t, timeout_ns)))
		return rc;
	/* The compactor dropped every sealed buffer (a read stops at a freed
	 * one anyway: the rebuild only spares the steps) and returned the
	 * store to the checkpoint, which the reader catches up with. */
	c->rb_dropped = 0;
	order_rebuild(c);
	sfs_ctx_online(c);
	return 0;
}

/* ---- the engine's own checkpoints (a host group: Flink's local recovery) ------------ */

/* Wake the compactor: a seal, or a request in this worker's control block. */
static void ring_bell(sfs_ctx_t *c)
{
	struct sfs_seg_hdr *h = c->seg.hdr;

	uatomic_inc(&h->sh_bell);	/* full barrier: the seal is visible first */
	if (sfs_load_relaxed(&h->sh_bell_sleeping))
		sfs_futex_wake(&h->sh_bell, 1);
}

int sfs_worker_pin(sfs_ctx_t *c, uint64_t id)
{
	sfs__err_clear();
	if (!c || !id)
		return sfs__err(SFS_EUSAGE, "sfs_worker_pin: NULL context or checkpoint 0");
	if (id > c->ctl->wc_barrier)
		return sfs__err(SFS_EUSAGE, "worker %u: checkpoint %llu was never sealed (last %llu)",
				c->worker, (unsigned long long)id,
				(unsigned long long)c->ctl->wc_barrier);
	if (id > sfs_load_relaxed(&c->ctl->wc_pin_req)) {
		sfs_store_release(&c->ctl->wc_pin_req, id);
		ring_bell(c);
	}
	return 0;
}

/* Wait (offline, polling every 1 ms) until *@word >= @want, at most until
 * @deadline (0: none). */
static int wait_word(sfs_ctx_t *c, const uint64_t *word, uint64_t want, uint64_t deadline,
		     const char *what)
{
	while (sfs_load_acquire(word) < want) {
		struct timespec ms = { 0, 1000000 };

		if (deadline && sfs_now_ns() >= deadline)
			return sfs__err(SFS_ETIMEDOUT, "worker %u: the compactor did not answer the %s",
					c->worker, what);
		nanosleep(&ms, NULL);
	}
	return 0;
}

/*
 * Ask the compactor to return this worker's store to @to (the pinned
 * checkpoint; 0: empty) and wait for its answer: wc_erb_to, then
 * wc_erb_req (release), answered in wc_erb_ack/rc (worker/wctl.h).
 */
static int engine_rollback(sfs_ctx_t *c, uint64_t to, uint64_t deadline)
{
	struct sfs_wctl *ctl = c->ctl;
	uint64_t req = sfs_load_relaxed(&ctl->wc_erb_req) + 1;
	int rc;

	sfs_store_relaxed(&ctl->wc_erb_to, to);
	sfs_store_release(&ctl->wc_erb_req, req);
	ring_bell(c);
	if ((rc = wait_word(c, &ctl->wc_erb_ack, req, deadline,
			    to == SFS_ERB_ADOPT ? "adoption" : to ? "rollback" : "reset")))
		return rc;
	if ((rc = sfs_load_relaxed(&ctl->wc_erb_rc)) == 0)
		return 0;
	if (to == SFS_ERB_ADOPT)
		return sfs__err(rc, "worker %u: the compactor could not adopt the files of %s",
				c->worker, ctl->wc_adopt_dir);
	if (to)
		return sfs__err(rc, "worker %u: the compactor could not return to checkpoint %llu",
				c->worker, (unsigned long long)to);
	return sfs__err(rc, "worker %u: the compactor could not empty its store", c->worker);
}

int sfs_worker_restore_pinned(sfs_ctx_t *c, uint64_t id, uint64_t timeout_ns)
{
	struct sfs_wctl *ctl;
	uint64_t deadline;
	int rc;

	sfs__err_clear();
	if (!c || !id)
		return sfs__err(SFS_EUSAGE, "sfs_worker_restore_pinned: NULL context or checkpoint 0");
	ctl = c->ctl;
	if (sfs_load_relaxed(&ctl->wc_pin_req) != id)
		return sfs__err(-ENOENT, "worker %u: checkpoint %llu was not pinned (%llu was)",
				c->worker, (unsigned long long)id,
				(unsigned long long)sfs_load_relaxed(&ctl->wc_pin_req));
	deadline = timeout_ns ? sfs_now_ns() + timeout_ns : 0;
	/* Everything since the last barrier goes, as at a rollback in place. */
	if ((rc = rollback_drop(c)))
		return rc;
	ring_bell(c);
	if ((rc = wait_word(c, &ctl->wc_pin_ack, id, deadline, "pin")))
		goto out;
	if (sfs_load_relaxed(&ctl->wc_pin_ack) != id || sfs_load_relaxed(&ctl->wc_pin_rc)) {
		rc = sfs__err(-ENOENT, "worker %u: checkpoint %llu could not be pinned", c->worker,
			      (unsigned long long)id);
		goto out;
	}
	rc = engine_rollback(c, id, deadline);
out:
	/* The compactor dropped the sealed buffers (on success) and the reader
	 * catches up with the returned store at its next read. */
	order_rebuild(c);
	sfs_ctx_online(c);
	return rc;
}

/* The list sequence of the worker that staged @dir (SFS_STAGE_LIST_SEQ):
 * this worker's is raised to it, so its appends land above the adopted
 * elements, not over one of them. */
static int raise_list_seq(sfs_ctx_t *c, const char *dir)
{
	char path[PATH_MAX];
	unsigned long long v;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "%s/%s", dir, SFS_STAGE_LIST_SEQ);
	if (!(f = fopen(path, "r")))
		return sfs__err(SFS_EUSAGE, "sfs_worker_adopt: %s: %s (a stage of an older sfs: "
				"restore it by writes)", path, strerror(errno));
	n = fscanf(f, "%llu", &v);
	fclose(f);
	if (n != 1)
		return sfs__err(SFS_ECORRUPT, "sfs_worker_adopt: %s: no sequence number in it", path);
	if (v > sfs_load_relaxed(&c->ctl->wc_list_seq))
		sfs_store_relaxed(&c->ctl->wc_list_seq, v);
	return 0;
}

/*
 * The files of @dir become this worker's store (include/sfs.h): as a
 * reset, with the directory named in wc_adopt_dir before the request.
 */
int sfs_worker_adopt(sfs_ctx_t *c, const char *dir, uint64_t timeout_ns)
{
	struct sfs_ckpt *ck;
	struct stat st;
	int rc;

	sfs__err_clear();
	if (!c || !dir)
		return sfs__err(SFS_EUSAGE, "sfs_worker_adopt: NULL context or directory");
	if (dir[0] != '/' || strlen(dir) >= sizeof(c->ctl->wc_adopt_dir))
		return sfs__err(SFS_EUSAGE, "sfs_worker_adopt: %s: want an absolute path of at most "
				"%zu bytes", dir, sizeof(c->ctl->wc_adopt_dir) - 1);
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return sfs__err(SFS_EUSAGE, "sfs_worker_adopt: %s is not a directory", dir);
	if (sfs_ckpt_find(&c->seg, &ck) || ck->ck_interval_ms != SFS_CKPT_ENGINE)
		return sfs__err(SFS_EUSAGE, "worker %u: sfs_worker_adopt is for a worker of a host "
				"group (sfs run --host)", c->worker);
	if ((rc = raise_list_seq(c, dir)) || (rc = rollback_drop(c)))
		return rc;
	snprintf(c->ctl->wc_adopt_dir, sizeof(c->ctl->wc_adopt_dir), "%s", dir);
	rc = engine_rollback(c, SFS_ERB_ADOPT, timeout_ns ? sfs_now_ns() + timeout_ns : 0);
	order_rebuild(c);
	sfs_ctx_online(c);
	return rc;
}

/* SFS_WORKER_RESET: the slot's store emptied in place (sfs_worker_open). */
static int worker_reset(sfs_ctx_t *c, uint64_t timeout_ns)
{
	struct sfs_ckpt *ck;
	int rc;

	/* Only a host group's compactor answers (an engine's own checkpoints):
	 * anywhere else the call would wait for nothing. */
	if (sfs_ckpt_find(&c->seg, &ck) || ck->ck_interval_ms != SFS_CKPT_ENGINE)
		return sfs__err(SFS_EUSAGE, "worker %u: SFS_WORKER_RESET is for a worker of a host "
				"group (sfs run --host)", c->worker);
	if ((rc = rollback_drop(c)))
		return rc;
	rc = engine_rollback(c, 0, timeout_ns ? sfs_now_ns() + timeout_ns : 0);
	order_rebuild(c);
	sfs_ctx_online(c);
	return rc;
}

/* Put the reads' store results into the cache, unless the key was written
 * since (then it is in the active buffer).  Runs before every quiescent
 * point and every seal, so the active buffer holds every write since the
 * read.  O(fills). */
static void apply_fills(sfs_ctx_t *c)
{
	struct sfs_wbuf *a = c->buf[c->ctl->wc_active];
	int active_ok = !c->need_active;

	for (unsigned i = 0; i < c->nfills; i++) {
		struct sfs_fill *f = &c->fills[i];
		struct sfs_wbuf_view v;

		if (!active_ok || sfs_wbuf_get_h(a, f->h, f->ns, f->key, f->klen, &v) != -ENOENT)
			continue;
		if (f->absent)
			(void)sfs_vcache_put_absent_h(c->cache, f->h, 0, f->ns, f->key, f->klen, 0);
		else
			(void)sfs_vcache_put_h(c->cache, f->h, 0, f->ns, f->key, f->klen, f->val, f->vlen,
					       0);
	}
	c->nfills = 0;
}

void sfs_ctx_quiescent(sfs_ctx_t *c)
{
	if (c->nfills)
		apply_fills(c);
	clock_tick(c);
	/* The compactor retires sealed buffers oldest first: drop them from
	 * the read order as they go, so reads stop stepping over them until
	 * the next seal (a read stops at a retired one anyway). */
	if (c->norder > (unsigned)c->hot_on) {
		uint32_t st = sfs_load_acquire(&c->ctl->wc_buf[c->order[c->norder - 1]].cb_state);

		if (st == SFS_BUF_RETIRING || st == SFS_BUF_FREE)
			order_rebuild(c);
	}
	sfs_qsbr_quiescent(c->seg.hdr, c->slot);
	(void)c->tops->catch_up(c->tr);
}

void sfs_ctx_offline(sfs_ctx_t *c)
{
	if (c->nfills)
		apply_fills(c);
	sfs_qsbr_offline(c->slot);
}

void sfs_ctx_online(sfs_ctx_t *c)
{
	clock_tick(c);
	sfs_qsbr_online(c->seg.hdr, c->slot);
	(void)c->tops->catch_up(c->tr);
}

uint32_t sfs_key_group_of(const sfs_ctx_t *c, const void *key, size_t klen)
{
	return sfs_key_group(key, klen, c->maxp);
}

/* ---- barrier ------------------------------------------------------------------- */

/* Take a FREE buffer as the active one, waiting (offline) for the compactor
 * to free one when there is none: back-pressure. */
static int activate_free(sfs_ctx_t *c)
{
	struct sfs_wctl *ctl = c->ctl;
	uint64_t t0 = 0, deadline = 0;
	int stalled = 0;

	for (;;) {
		int32_t seen = sfs_load_acquire(&ctl->wc_freed);

		for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
			if (sfs_load_acquire(&ctl->wc_buf[i].cb_state) != SFS_BUF_FREE)
				continue;
			sfs_wbuf_reset(c->buf[i]);
			sfs_store_release(&ctl->wc_buf[i].cb_state, SFS_BUF_ACTIVE);
			sfs_store_release(&ctl->wc_active, i);
			if (stalled) {
				sfs_store_relaxed(&ctl->wc_waiting, 0);
				sfs_qsbr_online(c->seg.hdr, c->slot);
				sfs_store_relaxed(&ctl->wc_stall_ns,
						  ctl->wc_stall_ns + (sfs_now_ns() - t0));
			}
			return 0;
		}
		if (!stalled) {
			/* Offline while waiting: the compactor's grace period
			 * must not wait for us, or neither side moves. */
			stalled = 1;
			t0 = sfs_now_ns();
			deadline = c->stall_timeout_ns ? t0 + c->stall_timeout_ns : 0;
			sfs_store_relaxed(&ctl->wc_stalls, ctl->wc_stalls + 1);
			sfs_qsbr_offline(c->slot);
			sfs_store_relaxed(&ctl->wc_waiting, 1);
			cmm_smp_mb();
			continue;	/* re-check after announcing: no lost wake-up */
		}
		if (deadline && sfs_now_ns() > deadline) {
			sfs_store_relaxed(&ctl->wc_waiting, 0);
			sfs_qsbr_online(c->seg.hdr, c->slot);
			sfs_store_relaxed(&ctl->wc_stall_ns, ctl->wc_stall_ns + (sfs_now_ns() - t0));
			return sfs__err(SFS_ETIMEDOUT,
					"worker %u: no free write buffer after %llu ms (compactor behind?)",
					c->worker,
					(unsigned long long)((sfs_now_ns() - t0) / 1000000));
		}
		sfs_proc_heartbeat(c->slot);
		sfs_futex_wait(&ctl->wc_freed, seen, 100 * 1000000ull);
	}
}

/* Seal the active buffer as the next seq of checkpoint @id, queue its flush
 * and activate a free buffer.  If no buffer frees up within the stall
 * timeout the seal stands and c->need_active makes the next write or
 * barrier wait again before touching any buffer. */
static int seal_and_swap(sfs_ctx_t *c, uint64_t id, int spill)
{
	struct sfs_wctl *ctl = c->ctl;
	uint32_t a = ctl->wc_active;
	struct sfs_wctl_buf *d = &ctl->wc_buf[a];
	struct sfs_flush_req req;
	uint64_t seq = ctl->wc_seq + 1;
	int rc;

	if (c->nfills)
		apply_fills(c);
	d->cb_seq = seq;
	d->cb_barrier = id;
	d->cb_at_barrier = !spill;
	d->cb_sealed_ns = sfs_now_ns();
	clock_tick(c);
	d->cb_ttl = c->clk;	/* what maintenance may drop by (common/ttl.h) */
	rc = sfs_wbuf_seal(c->buf[a], id);
	if (rc)
		return rc;
	sfs_store_release(&d->cb_state, SFS_BUF_SEALED);
	sfs_store_relaxed(&ctl->wc_seq, seq);
	sfs_store_relaxed(&ctl->wc_sealed_bytes, ctl->wc_sealed_bytes +
			  (c->buf[a]->wb_top - c->buf[a]->wb_arena_off));
	if (spill)
		sfs_store_relaxed(&ctl->wc_spills, ctl->wc_spills + 1);
	else
		sfs_store_relaxed(&ctl->wc_barriers, ctl->wc_barriers + 1);
	req = (struct sfs_flush_req){ .fr_buf = a, .fr_worker = c->worker, .fr_seq = seq,
				      .fr_barrier = id,
				      .fr_off = (uint64_t)((char *)c->buf[a] - (char *)ctl) };
	/* The ring has more slots than buffers and each sealed buffer has one
	 * request: it cannot be full of live requests.  If a dead compactor
	 * left it full, the compactor's scan of SEALED states still finds
	 * this buffer: the request is a doorbell, not the truth. */
	(void)sfs_ring_enqueue_burst(c->ring, &req, 1);
	ring_bell(c);
	rc = activate_free(c);
	c->need_active = rc != 0;
	order_rebuild(c);
	return rc;
}

/* A previous seal could not get a free buffer: get one now. */
static int ensure_active(sfs_ctx_t *c)
{
	int rc;

	if (caa_likely(!c->need_active))
		return 0;
	rc = activate_free(c);
	if (rc == 0) {
		c->need_active = 0;
		order_rebuild(c);
	}
	return rc;
}

int sfs_barrier(sfs_ctx_t *c, uint64_t id)
{
	int rc;

	sfs__err_clear();
	if (id <= c->ctl->wc_barrier)
		return sfs__err(SFS_EUSAGE, "worker %u: barrier %llu after barrier %llu", c->worker,
				(unsigned long long)id, (unsigned long long)c->ctl->wc_barrier);
	/* The checkpointer stages and completes only the ids it requested: a
	 * seal of another is never part of a checkpoint (include/sfs.h).  A
	 * load. */
	if (c->ck_req && id > sfs_load_acquire(c->ck_req))
		return sfs__err(SFS_EUSAGE, "worker %u: barrier %llu was never requested: the "
				"group's checkpointer has requested up to %llu "
				"(sfs_task_requested)", c->worker, (unsigned long long)id,
				(unsigned long long)sfs_load_acquire(c->ck_req));
	rc = ensure_active(c);
	if (rc == 0) {
		rc = seal_and_swap(c, id, 0);
		/* Sealed even when no buffer freed up in time (rc then says so). */
		sfs_store_relaxed(&c->ctl->wc_barrier, id);
		if (c->ckw)
			sfs_store_release(&c->ckw->cw_barrier, id);
	}
	sfs_qsbr_quiescent(c->seg.hdr, c->slot);
	/* A sign of life for sfs stat, once per checkpoint (a clock read). */
	sfs_proc_heartbeat(c->slot);
	return rc;
}

uint64_t sfs_worker_last_barrier(const sfs_ctx_t *c)
{
	return c ? sfs_load_relaxed(&c->ctl->wc_barrier) : 0;
}

int sfs__state_ready(sfs_ctx_t *c)
{
	return ensure_active(c);
}

int sfs__state_spill(sfs_ctx_t *c)
{
	return seal_and_swap(c, c->ctl->wc_barrier + 1, 1);
}

/* ---- writes --------------------------------------------------------------------- */

/* The key group of a key whose sfs_key_hash is @kh (the caller's, when it
 * assigns them: one predictable branch). */
static inline uint32_t kg_of(const sfs_ctx_t *c, uint64_t kh)
{
	if (c->caller_kg_on)
		return c->caller_kg;
	return c->kg_pow2 ? (uint32_t)(kh & c->kg_mask) : (uint32_t)(kh % c->maxp);
}

int sfs_ctx_key_group(sfs_ctx_t *c, uint32_t kg)
{
	if (!c->caller_kg_on)
		return sfs__err(SFS_EUSAGE, "sfs_ctx_key_group: worker %u was opened without "
				"SFS_WORKER_CALLER_KG", c->worker);
	if (kg - c->kg_start > c->kg_span)
		return sfs__err(SFS_EUSAGE, "sfs_ctx_key_group: key group %u is not worker %u's "
				"(%u..%u)", kg, c->worker, c->kg_start, c->kg_end);
	c->caller_kg = kg;
	return 0;
}

/* Checks that @state is registered with @kind and that this worker owns
 * @key's key group; returns the key group or an error.  Slow path (it
 * words the refusals); the value and counter paths use key_prep. */
int sfs__state_check(sfs_ctx_t *c, uint32_t state, uint32_t kind, const void *key, size_t klen,
		     size_t extra, const char *op)
{
	uint32_t kg;

	if (state >= SFS_MAX_STATES || c->kinds[state] == 0)
		return sfs__err(SFS_EUSAGE, "%s: state id %u is not registered by this worker", op,
				state);
	if (c->kinds[state] != kind)
		return sfs__err(SFS_EUSAGE, "%s: state '%s' is of another kind", op,
				c->seg.hdr->sh_states[state].sd_name);
	if (klen + extra > SFS_KEY_MAX)
		return sfs__err(SFS_EUSAGE, "%s: key of %zu bytes, at most %u", op, klen + extra,
				SFS_KEY_MAX);
	kg = kg_of(c, sfs_key_hash(key, klen));
	if (kg - c->kg_start > c->kg_span)
		return sfs__err(SFS_EUSAGE, "%s: key group %u is not worker %u's (%u..%u)", op, kg,
				c->worker, c->kg_start, c->kg_end);
	return (int)kg;
}

/* key_prep's refusals, out of line: sfs__state_check words them. */
static __attribute__((noinline, cold)) int key_refused(sfs_ctx_t *c, uint32_t state, uint32_t kind,
							const void *key, size_t klen, const char *op)
{
	int rc = sfs__state_check(c, state, kind, key, klen, 0, op);

	return rc < 0 ? rc : sfs__err(SFS_EUSAGE, "%s: key refused", op);
}

/*
 * The hot-path identity of a key: checks state, kind, length and key-group
 * ownership with a few compares; returns the buffered key's length
 * (SFS_KEY_PREFIX + @klen), with its prefix word (kg | state) in *@pfx and
 * its buffer hash in *@h.  The key is hashed once: its key-group hash is
 * the body hash the buffer hash is derived from (sfs_wbuf_hash_kh, one
 * multiply), and the value cache uses the buffer hash as it is
 * (sfs_vcache_hash, state 0).  No call on the accepting path.
 */
static inline __attribute__((always_inline)) int key_ident(sfs_ctx_t *c, uint32_t state,
							   uint32_t kind, uint64_t ns,
							   const void *key, size_t klen,
							   const char *op, uint32_t *pfx,
							   uint64_t *h)
{
	uint64_t kh;
	uint32_t kg;

	*h = 0;	/* written on every path: the callers' compilers can see it */
	*pfx = 0;
	if (__builtin_expect(state >= SFS_MAX_STATES || c->kinds[state] != kind ||
			     klen > SFS_KEY_MAX, 0))
		return key_refused(c, state, kind, key, klen, op);
	kh = sfs_key_hash(key, klen);
	kg = kg_of(c, kh);
	if (__builtin_expect(kg - c->kg_start > c->kg_span, 0))
		return key_refused(c, state, kind, key, klen, op);
	*pfx = sfs_key_prefix_word(kg, state);
	*h = sfs_wbuf_hash_kh(ns, *pfx, klen + SFS_KEY_PREFIX, kh);
	return (int)(klen + SFS_KEY_PREFIX);
}

/* kg | state | key into @out (room for SFS_KEY_PREFIX + @klen). */
static inline void key_write(unsigned char *out, uint32_t pfx, const void *key, size_t klen)
{
	memcpy(out, &pfx, SFS_KEY_PREFIX);
	sfs__wbuf_copy(out + SFS_KEY_PREFIX, key, klen);
}

/* key_ident, and the buffered key written to @out. */
static inline __attribute__((always_inline)) int key_prep(sfs_ctx_t *c, uint32_t state,
							  uint32_t kind, uint64_t ns,
							  const void *key, size_t klen,
							  const char *op, unsigned char *out,
							  uint64_t *h)
{
	uint32_t pfx;
	int n = key_ident(c, state, kind, ns, key, klen, op, &pfx, h);

	if (n >= 0)
		key_write(out, pfx, key, klen);
	return n;
}

/* A write refused for room: spill the active buffer (seal it under the
 * coming barrier's id) and retry once in a fresh one. */
#define WRITE_WITH_SPILL(c, expr)                                                   \
	__extension__({                                                             \
		int _rc = ensure_active(c);                                         \
		if (_rc == 0)                                                       \
			_rc = (expr);                                               \
		if (_rc == SFS_EFULL) {                                             \
			_rc = seal_and_swap((c), (c)->ctl->wc_barrier + 1, 1);      \
			if (_rc == 0)                                               \
				_rc = (expr);                                       \
		}                                                                   \
		_rc;                                                                \
	})

static inline struct sfs_wbuf *active(sfs_ctx_t *c)
{
	return c->buf[c->ctl->wc_active];
}

/* Drop the key (prefix word @pfx, user key @key) from the value cache.
 * Only a key the cache can hold: it holds buffered keys of at most
 * SFS_FILL_KEY_MAX bytes, and nothing when it is empty.  Writes the
 * buffered key to c->kbuf when it does drop. */
static inline void cache_drop(sfs_ctx_t *c, uint64_t h, uint64_t ns, uint32_t pfx,
			      const void *key, size_t klen)
{
	if (c->cache && c->cache->vc_live && klen + SFS_KEY_PREFIX <= SFS_FILL_KEY_MAX) {
		key_write(c->kbuf, pfx, key, klen);
		(void)sfs_vcache_invalidate_h(c->cache, h, 0, ns, c->kbuf, klen + SFS_KEY_PREFIX);
	}
}

static int counter_add_ttl(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key,
			   size_t klen, uint64_t h, int64_t delta);

/* A put of a TTL state (value or counter): [@expiry][@val] (common/ttl.h),
 * written in two parts (no staging copy).  The cache always drops the key:
 * put2 does not say whether it was new to the active buffer.  Out of line:
 * states without a TTL never come here. */
static __attribute__((noinline)) int put_ttl(sfs_ctx_t *c, uint32_t state, uint64_t ns,
					     const void *key, size_t klen, uint32_t pfx, uint64_t h,
					     uint64_t expiry, const void *val, size_t vlen)
{
	if (vlen > SFS_VALUE_MAX - SFS_TTL_PREFIX)
		return sfs__err(SFS_EUSAGE, "put: value of %zu bytes, at most %u in a state with "
				"a TTL", vlen, SFS_VALUE_MAX - SFS_TTL_PREFIX);
	(void)state;
	cache_drop(c, h, ns, pfx, key, klen);
	key_write(c->kbuf, pfx, key, klen);
	return WRITE_WITH_SPILL(c, sfs_wbuf_put2_h(active(c), h, ns, c->kbuf, klen + SFS_KEY_PREFIX,
						   &expiry, SFS_TTL_PREFIX, val, vlen, NULL));
}

/*
 * A put drops the key from the value cache only when the key is new to the
 * active buffer.  A key the active buffer holds cannot be in the cache: it
 * was dropped when it entered this buffer, and a fill is applied only when
 * the active buffer has no entry for its key (apply_fills).  So overwrites
 * within an epoch pay nothing for the cache.
 */
int sfs_value_put(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		  const void *val, size_t vlen)
{
	uint64_t h;
	uint32_t pfx;
	int n = key_ident(c, state, SFS_STATE_VALUE, ns, key, klen, "put", &pfx, &h), rc;

	if (n < 0)
		return n;
	if (__builtin_expect(vlen > SFS_VALUE_MAX, 0))
		return sfs__err(SFS_EUSAGE, "put: value of %zu bytes, at most %u", vlen, SFS_VALUE_MAX);
	if (__builtin_expect(c->ttl_ms[state] != 0, 0))
		return put_ttl(c, state, ns, key, klen, pfx, h, sfs__ttl_expiry(c, state), val, vlen);
	/* ensure_active, or a spill, leaves c->hot the new active buffer's. */
	rc = WRITE_WITH_SPILL(c, sfs_wbuf_upsert_pk(&c->hot, h, ns, pfx, key, klen, val, vlen));
	if (rc <= 0)
		return rc;
	cache_drop(c, h, ns, pfx, key, klen);	/* new to the active buffer */
	return 0;
}

int sfs_value_delete(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen)
{
	uint64_t h;
	uint32_t pfx;
	int n = key_ident(c, state, SFS_STATE_VALUE, ns, key, klen, "delete", &pfx, &h);

	if (n < 0)
		return n;
	cache_drop(c, h, ns, pfx, key, klen);
	key_write(c->kbuf, pfx, key, klen);
	return WRITE_WITH_SPILL(c, sfs_wbuf_delete_h(active(c), h, ns, c->kbuf, (size_t)n));
}

int sfs_counter_add(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    int64_t delta)
{
	uint64_t h;
	int n = key_prep(c, state, SFS_STATE_COUNTER, ns, key, klen, "counter add", c->kbuf, &h);

	if (n < 0)
		return n;
	if (__builtin_expect(c->ttl_ms[state] != 0, 0))
		return counter_add_ttl(c, state, ns, key, klen, h, delta);
	return WRITE_WITH_SPILL(c, sfs_wbuf_merge_h(active(c), h, ns, c->kbuf, (size_t)n,
						    c->seg.hdr->sh_states[state].sd_merge, delta));
}

/* ---- reads ------------------------------------------------------------------------ */

/* Queue a cache fill for @key (see apply_fills). */
static void remember(sfs_ctx_t *c, const unsigned char *key, uint64_t ns, uint64_t h, size_t n,
		     const void *val, uint32_t vlen, int absent)
{
	struct sfs_fill *f;

	if (!c->cache || n > SFS_FILL_KEY_MAX || c->nfills == SFS_FILLS_MAX)
		return;
	f = &c->fills[c->nfills++];
	f->ns = ns;
	f->h = h;
	f->val = val;
	f->vlen = vlen;
	f->klen = (uint16_t)n;
	f->absent = (uint8_t)absent;
	memcpy(f->key, key, n);
}

/* What the buffers said about one key, before the store is asked. */
struct walk {
	int done;                 /* 1: the answer is final (res/out/sum set) */
	int res;
	unsigned nd;              /* counter deltas still to fold */
	uint64_t dseq[SFS_WCTL_MAX_BUFS + SFS_TARGET_IMAGES_MAX];
	int64_t dval[SFS_WCTL_MAX_BUFS + SFS_TARGET_IMAGES_MAX];
	unsigned op;              /* the counter's merge operator */
};

/*
 * The store's sealed buffers not yet in its own format (target_read.h
 * images: the table target's level-0 images), newest first, in *@b and
 * *@seq: the layer between this worker's buffers and the store.  Only
 * those older than @lo count (the seq of the oldest SEALED buffer a walk
 * met: an absorbed buffer is published before it is retired, so for a
 * moment it is both).  0 when the target keeps none.  One call per read
 * that the buffers leave open (a load of the target's publication when
 * nothing changed).
 */
__attribute__((noinline)) int sfs__ctx_images(sfs_ctx_t *c, const struct sfs_wbuf *const **b,
					      const uint64_t **seq, unsigned *n)
{
	*n = 0;
	return c->tops->images ? c->tops->images(c->tr, b, seq, n) : 0;
}

/* Fold the walk's deltas of buffers newer than @tag over @base (@have: is
 * there a base) with the state's operator: deltas the base already holds
 * are not folded twice. */
static int64_t fold(const struct walk *w, int have, int64_t base, uint64_t tag)
{
	int64_t acc = base;

	for (unsigned d = 0; d < w->nd; d++) {
		if (w->dseq[d] <= tag)
			continue;
		acc = have ? sfs_merge_i64(w->op, acc, w->dval[d]) : w->dval[d];
		have = 1;
	}
	return acc;
}

/* The value cache's answer for a value-state key no buffer holds: 1 with
 * *@out set (and w->res) when it knows the key, 0 when the store must be
 * asked.  Out of line: the buffer-hit path never calls it. */
static __attribute__((noinline)) int walk_cache(sfs_ctx_t *c, const unsigned char *key, size_t n,
						uint64_t ns, uint64_t h, struct sfs_view *out,
						struct walk *w)
{
	struct sfs_vcache_view cv;

	if (sfs_vcache_get_h(c->cache, h, 0, ns, key, n, &cv) != 0)
		return 0;
	out->data = cv.absent ? NULL : cv.value;
	out->len = cv.absent ? 0 : cv.len;
	w->res = !cv.absent;
	return 1;
}

/*
 * Walk the buffers, newest first, and the cache for the composite key
 * @key[0..n) whose buffer hash is @h.  Sets w->done when they decide the
 * answer; otherwise the flushed store must be probed (and for a counter,
 * w holds the deltas).  Inlined into each caller with @counter a constant:
 * a value get that hits a buffer is this loop, the probe and two stores,
 * with no call (the probe is sfs__wbuf_find, inline; a MERGE entry, which
 * a value state never writes, is treated as the general path treats it).
 */
static inline __attribute__((always_inline)) int walk(sfs_ctx_t *c, const unsigned char *key,
						      size_t n, uint64_t ns, uint64_t h,
						      int counter, struct sfs_view *out,
						      int64_t *sum, struct walk *w)
{
	struct sfs_wctl *ctl = c->ctl;
	const struct sfs_wbuf *const *ib = NULL;
	const uint64_t *is = NULL;
	uint64_t lo = UINT64_MAX;
	unsigned nimg = 0;

	w->done = 1;
	w->nd = 0;
	if (counter)
		w->op = c->seg.hdr->sh_states[sfs_key_prefix_state(key)].sd_merge;
	out->data = NULL;
	out->len = 0;
	for (unsigned k = 0;; k++) {
		const struct sfs_wbuf *b;
		const struct sfs_wbuf_entry *e;
		uint64_t slot, bseq;
		uint32_t kind;
		int rc;

		if (k < c->norder) {
			uint32_t i = c->order[k];
			uint32_t st = sfs_load_acquire(&ctl->wc_buf[i].cb_state);

			if (st == SFS_BUF_RETIRING || st == SFS_BUF_FREE) {
				k = c->norder - 1;	/* flushed in seq order: all older ones */
				continue;		/* are too; the store's images next */
			}
			b = c->buf[i];
			bseq = st == SFS_BUF_ACTIVE ? UINT64_MAX : ctl->wc_buf[i].cb_seq;
			if (st != SFS_BUF_ACTIVE)
				lo = bseq;
		} else {
			if (k == c->norder && (rc = sfs__ctx_images(c, &ib, &is, &nimg)) < 0)
				return w->res = rc;
			if (k - c->norder >= nimg)
				break;
			if (is[k - c->norder] >= lo)
				continue;	/* absorbed, still sealed here: walked */
			b = ib[k - c->norder];
			bseq = is[k - c->norder];
		}
		if (sfs_load_relaxed(&b->wb_live) == 0)
			continue;	/* empty (a fresh active buffer): skip the miss */
		rc = sfs__wbuf_find(b, h, ns, key, (uint32_t)n, &e, &slot);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return w->res = rc;
		kind = sfs__wbuf_kindb(e) & SFS_WBUF_KIND_MASK;
		if (kind == SFS_WBUF_MERGE) {
			w->dseq[w->nd] = bseq;
			w->dval[w->nd++] = (int64_t)sfs_load_relaxed((const uint64_t *)sfs__wbuf_value(e));
			continue;
		}
		if (kind == SFS_WBUF_DELETE) {
			/* Shadows everything older; newer deltas fold over nothing. */
			if (sum)
				*sum = w->nd ? fold(w, 0, 0, 0) : 0;
			return w->res = counter && w->nd ? 1 : 0;
		}
		/* PUT: shadows everything older. */
		if (counter) {
			*sum = fold(w, 1, e->we_vlen == 8 ?
				  (int64_t)sfs_load_relaxed((const uint64_t *)sfs__wbuf_value(e)) : 0,
				    0);
			return w->res = 1;
		}
		out->data = sfs__wbuf_value(e);
		out->len = e->we_vlen;
		return w->res = 1;
	}
	/* Value state: the cache answers what the store would. */
	if (!counter && c->cache && walk_cache(c, key, n, ns, h, out, w))
		return w->res;
	w->done = 0;
	return 0;
}

/* Finish a walk with the store's answer @r for the key @key[0..n). */
static int resolve(sfs_ctx_t *c, const unsigned char *key, size_t n, uint64_t ns, uint64_t h,
		   int counter, const struct sfs_probe_result *r, struct walk *w,
		   struct sfs_view *out, int64_t *sum)
{
	int64_t base = 0;

	if (!counter) {
		/* No buffer holds the key: the store's answer may be cached. */
		remember(c, key, ns, h, n, r->found ? r->value : NULL, r->len, !r->found);
		out->data = r->found ? r->value : NULL;
		out->len = r->found ? r->len : 0;
		return r->found;
	}
	/* Deltas of buffers the store already contains (seq <= its tag) are
	 * not folded again. */
	if (r->found && r->len == 8)
		memcpy(&base, r->value, 8);
	*sum = r->found ? fold(w, 1, base, r->tag) : fold(w, 0, 0, 0);
	return r->found || w->nd;
}

/* The store's part of a lookup that the buffers and the cache left open. */
static __attribute__((noinline)) int lookup_store(sfs_ctx_t *c, size_t n, uint64_t ns, uint64_t h,
						  int counter, struct sfs_view *out, int64_t *sum,
						  struct walk *w)
{
	struct sfs_probe p = { .hash = h, .ns = ns, .key = c->kbuf, .klen = (uint32_t)n };
	struct sfs_probe_result r;
	int rc = c->tops->probe(c->tr, &p, 1, &r);

	if (rc)
		return rc;
	return resolve(c, c->kbuf, n, ns, h, counter, &r, w, out, sum);
}

/* One key (in c->kbuf, hash @h) through every layer: 1 found, 0 absent,
 * < 0 error. */
static inline __attribute__((always_inline)) int lookup(sfs_ctx_t *c, size_t n, uint64_t ns,
							uint64_t h, int counter,
							struct sfs_view *out, int64_t *sum)
{
	struct walk w;
	int rc = walk(c, c->kbuf, n, ns, h, counter, out, sum, &w);

	if (w.done || rc < 0)
		return w.res;
	return lookup_store(c, n, ns, h, counter, out, sum, &w);
}

/*
 * The buffers' answer for a value-state key with buffer hash @h, from the
 * read order's @first buffer on (c->hot_on when the caller has asked the
 * active buffer already: value_active): 1 and *@out set (a PUT), 0 and
 * *@out empty (a tombstone), -ENOENT when no buffer holds it (the cache and
 * the store are next), or an error.  The key is @key[0..n) (@split 0), or
 * the prefix word @pfx then @key[0..n) (@split 1: sfs__wbuf_find_pk, no
 * scratch copy); @split is a constant at each call, so each gets its own
 * code.  What walk() does for a value state, without a counter's
 * bookkeeping (the deltas array that made walk() keep a 300-byte frame),
 * and with no call.  A MERGE entry (a value state never writes one) is
 * skipped and any other kind reads as a PUT, as in walk().
 */
static inline __attribute__((always_inline)) int value_bufs_any(sfs_ctx_t *c, unsigned first,
								const void *key, uint32_t n,
								uint32_t pfx, int split,
								uint64_t ns, uint64_t h,
								struct sfs_view *out)
{
	const struct sfs_wctl *ctl = c->ctl;
	unsigned norder = c->norder, nimg = 0;
	const struct sfs_wbuf *const *ib = NULL;
	const uint64_t *is = NULL;
	uint64_t lo = UINT64_MAX;

	for (unsigned k = first;; k++) {
		const struct sfs_wbuf *b;
		const struct sfs_wbuf_entry *e;
		uint64_t slot;
		uint32_t kind;
		int rc;

		if (k < norder) {
			uint32_t i = c->order[k];
			uint32_t st = sfs_load_acquire(&ctl->wc_buf[i].cb_state);

			if (st == SFS_BUF_RETIRING || st == SFS_BUF_FREE) {
				k = norder - 1;	/* flushed in seq order: all older ones */
				continue;	/* are too; the store's images next */
			}
			b = c->buf[i];
			if (st != SFS_BUF_ACTIVE)
				lo = ctl->wc_buf[i].cb_seq;
		} else {
			if (k == norder &&
			    (rc = sfs__ctx_images(c, &ib, &is, &nimg)) < 0) {
				out->data = NULL;
				out->len = 0;
				return rc;
			}
			if (k - norder >= nimg)
				break;
			if (is[k - norder] >= lo)
				continue;	/* absorbed, still sealed here: walked */
			b = ib[k - norder];
		}
		if (sfs_load_relaxed(&b->wb_live) == 0)
			continue;	/* empty (a fresh active buffer): skip the miss */
		rc = split ? sfs__wbuf_find_pk(b, h, ns, pfx, key, n, &e, &slot)
			   : sfs__wbuf_find(b, h, ns, key, n, &e, &slot);
		if (rc == -ENOENT)
			continue;
		if (__builtin_expect(rc < 0, 0)) {
			out->data = NULL;
			out->len = 0;
			return rc;
		}
		kind = sfs__wbuf_kindb(e) & SFS_WBUF_KIND_MASK;
		if (kind == SFS_WBUF_DELETE) {
			out->data = NULL;
			out->len = 0;
			return 0;
		}
		if (kind != SFS_WBUF_MERGE) {	/* PUT (anything else reads as one, as in walk) */
			out->data = (const uint8_t *)(e + 1) + sfs__wbuf_pad8(split ? n + 4 : n);
			out->len = e->we_vlen;
			return 1;
		}
	}
	return -ENOENT;
}

/* value_bufs_any of the buffered key @key[0..n). */
static inline __attribute__((always_inline)) int value_bufs(sfs_ctx_t *c, const unsigned char *key,
							    uint32_t n, uint64_t ns, uint64_t h,
							    struct sfs_view *out)
{
	return value_bufs_any(c, 0, key, n, 0, 0, ns, h, out);
}

/* A value get that no buffer answered, for the buffered key in c->kbuf
 * (@n bytes): the cache, then the store, whose answer is queued for the
 * cache (remember).  Out of line, so the buffer-hit path saves no
 * registers for it; one frame for both layers (what walk_cache,
 * lookup_store and resolve do for a value state, without a counter's
 * walk state). */
static __attribute__((noinline)) int value_below(sfs_ctx_t *c, size_t n, uint64_t ns, uint64_t h,
						 struct sfs_view *out)
{
	struct sfs_probe p = { .hash = h, .ns = ns, .key = c->kbuf, .klen = (uint32_t)n };
	struct sfs_probe_result r;
	struct sfs_vcache_view cv;
	int rc;

	if (c->cache && sfs_vcache_get_h(c->cache, h, 0, ns, c->kbuf, n, &cv) == 0) {
		out->data = cv.absent ? NULL : cv.value;
		out->len = cv.absent ? 0 : cv.len;
		return !cv.absent;
	}
	rc = c->tops->probe(c->tr, &p, 1, &r);
	if (__builtin_expect(rc != 0, 0)) {
		out->data = NULL;
		out->len = 0;
		return rc;
	}
	remember(c, c->kbuf, ns, h, n, r.found ? r.value : NULL, r.len, !r.found);
	out->data = r.found ? r.value : NULL;
	out->len = r.found ? r.len : 0;
	return r.found;
}

/* A value get the active buffer did not answer: the older buffers, then
 * the cache and the store (the buffered key is assembled only for those).
 * Out of line, so the active-buffer hit saves no registers for it. */
static __attribute__((noinline)) int value_get_older(sfs_ctx_t *c, const void *key, uint32_t klen,
						     uint32_t pfx, uint64_t ns, uint64_t h,
						     struct sfs_view *out)
{
	int rc = value_bufs_any(c, (unsigned)c->hot_on, key, klen, pfx, 1, ns, h, out);

	if (rc != -ENOENT)
		return rc;
	key_write(c->kbuf, pfx, key, klen);
	return value_below(c, (size_t)klen + SFS_KEY_PREFIX, ns, h, out);
}

/*
 * The active buffer's answer for a value-state key, probed with the
 * buffer's geometry kept in the context (c->hot: no load of its shared
 * header but the live count) and the key in two parts (prefix word, user
 * key: no copy): 1 and *@out set (a PUT), 0 (a tombstone), -ENOENT when it
 * has no answer (no active buffer, an empty one, no entry, or a MERGE,
 * which a value state never writes: the older layers are next, from
 * order[c->hot_on]), or an error.  What value_bufs_any does for the
 * active buffer, in about half the instructions of the general walk.
 */
static inline __attribute__((always_inline)) int value_active(sfs_ctx_t *c, const void *key,
							      uint32_t klen, uint32_t pfx,
							      uint64_t ns, uint64_t h,
							      struct sfs_view *out)
{
	const struct sfs_wbuf_entry *e;
	uint64_t slot;
	uint32_t kind;
	int rc;

	if (!__builtin_expect(c->hot_on, 1) || sfs_load_relaxed(&c->hot.b->wb_live) == 0)
		return -ENOENT;
	rc = sfs__wbuf_probe_g(&c->hot, h, ns, key, klen, pfx, 1, &e, &slot);
	if (rc == 0) {
		kind = sfs__wbuf_kindb(e) & SFS_WBUF_KIND_MASK;
		if (kind == SFS_WBUF_DELETE) {
			out->data = NULL;
			out->len = 0;
			return 0;
		}
		if (kind == SFS_WBUF_MERGE)
			return -ENOENT;
		out->data = (const uint8_t *)(e + 1) + sfs__wbuf_pad8(klen + SFS_KEY_PREFIX);
		out->len = e->we_vlen;
		return 1;
	}
	if (__builtin_expect(rc != -ENOENT, 0)) {
		out->data = NULL;
		out->len = 0;
	}
	return rc;
}

/*
 * A read of a TTL state (value or counter: both store [expiry][bytes],
 * only puts and deletes): every layer as for a value, then the expiry
 * checked and stripped (sfs__ttl_view).  With SFS_TTL_REFRESH_ON_READ and
 * @refresh, a live entry is written again with a new expiry; the view
 * stays on the old copy, which no write moves (the arena only grows, and
 * a spilled buffer is reused only after this worker's next quiescent
 * point).
 */
static __attribute__((noinline)) int get_ttl(sfs_ctx_t *c, uint32_t state, uint64_t ns,
					     const void *key, size_t klen, uint32_t pfx, uint64_t h,
					     struct sfs_view *out, int refresh)
{
	int rc = value_active(c, key, (uint32_t)klen, pfx, ns, h, out), wr;
	uint64_t e;

	if (rc == -ENOENT)
		rc = value_get_older(c, key, (uint32_t)klen, pfx, ns, h, out);
	rc = sfs__ttl_view(c, state, rc, out);
	if (rc != 1 || !refresh || !(c->ttl_flags[state] & SFS_TTL_REFRESH_ON_READ) ||
	    sfs_ttl_expiry_of((const char *)out->data - SFS_TTL_PREFIX) ==
		    (e = sfs__ttl_expiry(c, state)))
		return rc;
	wr = put_ttl(c, state, ns, key, klen, pfx, h, e, out->data, out->len);
	return wr ? wr : 1;
}

static __attribute__((noinline)) int counter_get_ttl(sfs_ctx_t *c, uint32_t state, uint64_t ns,
						     const void *key, size_t klen, uint64_t h,
						     int64_t *out, int refresh)
{
	uint32_t pfx;
	struct sfs_view v;
	int rc;

	memcpy(&pfx, c->kbuf, SFS_KEY_PREFIX);
	rc = get_ttl(c, state, ns, key, klen, pfx, h, &v, refresh);
	*out = 0;
	if (rc == 1 && v.len != 8)
		return sfs__err(SFS_ECORRUPT, "counter '%s': a value of %u bytes, not 8",
				c->seg.hdr->sh_states[state].sd_name, v.len);
	if (rc == 1)
		memcpy(out, v.data, 8);
	return rc;
}

/* A TTL counter's add: read (live or not), fold, put with a new expiry. */
static __attribute__((noinline)) int counter_add_ttl(sfs_ctx_t *c, uint32_t state, uint64_t ns,
						     const void *key, size_t klen, uint64_t h,
						     int64_t delta)
{
	uint32_t pfx;
	int64_t v;
	int rc;

	memcpy(&pfx, c->kbuf, SFS_KEY_PREFIX);
	rc = counter_get_ttl(c, state, ns, key, klen, h, &v, 0);
	if (rc < 0)
		return rc;
	v = rc ? sfs_merge_i64(c->seg.hdr->sh_states[state].sd_merge, v, delta) : delta;
	return put_ttl(c, state, ns, key, klen, pfx, h, sfs__ttl_expiry(c, state), &v, 8);
}

/* The active buffer first (value_active), then value_get_older. */
int sfs_value_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		  struct sfs_view *out)
{
	uint64_t h;
	uint32_t pfx;
	int n = key_ident(c, state, SFS_STATE_VALUE, ns, key, klen, "get", &pfx, &h), rc;

	if (n < 0)
		return n;
	if (__builtin_expect(c->ttl_ms[state] != 0, 0))
		return get_ttl(c, state, ns, key, klen, pfx, h, out, 1);
	rc = value_active(c, key, (uint32_t)klen, pfx, ns, h, out);
	if (rc != -ENOENT)
		return rc;
	return value_get_older(c, key, (uint32_t)klen, pfx, ns, h, out);
}

int sfs_counter_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    int64_t *out)
{
	struct sfs_view v;
	uint64_t h;
	int n = key_prep(c, state, SFS_STATE_COUNTER, ns, key, klen, "counter get", c->kbuf, &h);

	if (n < 0)
		return n;
	*out = 0;
	if (__builtin_expect(c->ttl_ms[state] != 0, 0))
		return counter_get_ttl(c, state, ns, key, klen, h, out, 1);
	return lookup(c, (size_t)n, ns, h, 1, &v, out);
}

/*
 * sfs_multiget - the keys of one input batch, in chunks of MG_BATCH:
 *   1. check each key and hash it, prefetch its home slot in the active
 *      buffer;
 *   2. prefetch the entry each home slot points to (header and key);
 *   3. walk the buffers per key with the key in two parts (prefix word,
 *      user key: no copy; the misses now overlap instead of queueing one
 *      behind the other); a key no buffer holds is written out whole, for
 *      the cache and the store;
 *   4. probe the keys left over in the flushed store together (one target
 *      call: the memory store's probes, RocksDB's MultiGet, one table scan).
 * A left-over key that does not fit the chunk's key scratch is looked up
 * on its own.
 */
#define MG_BATCH 64
#define MG_KEYBYTES (16u << 10)

/* A chunk's key, checked and hashed (sfs_multiget, sfs_counter_multiget). */
struct mg_key {
	uint64_t h;
	uint32_t pfx;
	int n;          /* buffered key length, or the key's refusal */
};

/* Step 2 of a chunk: the active buffer's entries of its keys @kb[0..m)
 * loading (their slots were prefetched as they were hashed). */
static void mg_prefetch_entries(const struct sfs_wbuf_geom *act, const struct mg_key *kb,
				unsigned m)
{
	for (unsigned k = 0; act && k < m; k++)
		if (kb[k].n >= 0)
			sfs_wbuf_prefetch_entry_g(act, kb[k].h, (size_t)kb[k].n);
}

/* A chunk's answers of a TTL state made the user's (get_ttl's rule), with
 * its refreshes on read; returns the errors it met. */
static __attribute__((noinline)) int multiget_ttl(sfs_ctx_t *c, uint32_t state,
						  const struct sfs_key *keys, unsigned m,
						  struct sfs_view *views, int *results)
{
	int errors = 0;

	for (unsigned k = 0; k < m; k++) {
		uint64_t h, e;
		uint32_t pfx;

		results[k] = sfs__ttl_view(c, state, results[k], &views[k]);
		if (results[k] != 1 || !(c->ttl_flags[state] & SFS_TTL_REFRESH_ON_READ) ||
		    sfs_ttl_expiry_of((const char *)views[k].data - SFS_TTL_PREFIX) ==
			    (e = sfs__ttl_expiry(c, state)) ||
		    key_ident(c, state, SFS_STATE_VALUE, keys[k].ns, keys[k].key, keys[k].klen,
			      "multiget", &pfx, &h) < 0)
			continue;
		if (put_ttl(c, state, keys[k].ns, keys[k].key, keys[k].klen, pfx, h, e,
			    views[k].data, views[k].len)) {
			results[k] = SFS_EUSAGE;
			errors++;
		}
	}
	return errors;
}

int sfs_multiget(sfs_ctx_t *c, uint32_t state, const struct sfs_key *keys, unsigned n,
		 struct sfs_view *views, int *results)
{
	static __thread unsigned char kstore[MG_KEYBYTES];
	struct sfs_probe probes[MG_BATCH];
	struct sfs_probe_result pr[MG_BATCH];
	struct mg_key kb[MG_BATCH];
	unsigned idx[MG_BATCH];
	int errors = 0;

	for (unsigned base = 0; base < n;) {
		const struct sfs_wbuf_geom *act = c->hot_on ? &c->hot : NULL;
		unsigned m = 0, np = 0;
		size_t used = 0;

		/* 1: checks, hashes, slot prefetches */
		for (; m < MG_BATCH && base + m < n; m++) {
			const struct sfs_key *k = &keys[base + m];

			kb[m].n = key_ident(c, state, SFS_STATE_VALUE, k->ns, k->key, k->klen, "multiget",
					    &kb[m].pfx, &kb[m].h);
			if (act && kb[m].n >= 0)
				sfs_wbuf_prefetch_g(act, kb[m].h);
		}
		/* 2: entry prefetches */
		mg_prefetch_entries(act, kb, m);
		/* 3: buffers, then cache */
		for (unsigned k = 0; k < m; k++) {
			unsigned at = base + k;
			const struct sfs_key *key = &keys[at];
			unsigned char *bk;
			struct walk w;
			int rc = kb[k].n;

			if (rc >= 0)
				rc = value_active(c, key->key, (uint32_t)key->klen, kb[k].pfx, key->ns,
						  kb[k].h, &views[at]);
			if (rc == -ENOENT)
				rc = value_bufs_any(c, (unsigned)c->hot_on, key->key, (uint32_t)key->klen,
						    kb[k].pfx, 1, key->ns, kb[k].h, &views[at]);
			if (rc != -ENOENT) {
				results[at] = rc;
				errors += rc < 0;
				continue;
			}
			if ((size_t)kb[k].n > MG_KEYBYTES - used) {
				/* no room in the scratch: on its own */
				key_write(c->kbuf, kb[k].pfx, key->key, key->klen);
				results[at] = value_below(c, (size_t)kb[k].n, key->ns, kb[k].h, &views[at]);
				errors += results[at] < 0;
				continue;
			}
			bk = kstore + used;
			key_write(bk, kb[k].pfx, key->key, key->klen);
			used += (size_t)kb[k].n;
			w.nd = 0;
			if (c->cache && walk_cache(c, bk, (size_t)kb[k].n, key->ns, kb[k].h, &views[at], &w)) {
				results[at] = w.res;
				errors += w.res < 0;
				continue;
			}
			probes[np] = (struct sfs_probe){ .hash = kb[k].h, .ns = key->ns, .key = bk,
							 .klen = (uint32_t)kb[k].n };
			idx[np++] = at;
		}
		/* 4: one batched probe of the store */
		if (np) {
			int rc = c->tops->probe(c->tr, probes, np, pr);

			for (unsigned k = 0; k < np; k++) {
				struct walk w;

				w.nd = 0;	/* no deltas: a value state */
				results[idx[k]] = rc ? rc
						     : resolve(c, probes[k].key, probes[k].klen,
							       probes[k].ns, probes[k].hash, 0, &pr[k], &w,
							       &views[idx[k]], NULL);
				errors += results[idx[k]] < 0;
			}
		}
		if (__builtin_expect(state < SFS_MAX_STATES && c->ttl_ms[state] != 0, 0))
			errors += multiget_ttl(c, state, keys + base, m, views + base, results + base);
		base += m;
	}
	return errors ? SFS_EUSAGE : 0;
}

/*
 * sfs_counter_multiget - sfs_multiget's chunks for a counter state: each
 * key's buffers walked (its deltas collected, the active buffer's slots
 * and entries prefetched first), then the keys no PUT or DELETE decided
 * probed in the flushed store together, and each base folded with the
 * deltas its tag does not already hold (resolve).  For the table target
 * one sfs__tv_probe of the chunk instead of one per key: the files'
 * filter blocks and pages load for many keys at once, not one key's chain
 * of misses after another's.  A TTL state reads key by key (its
 * refreshes on read are writes).  The walks' deltas live in a per-thread
 * scratch (~34 KB: 64 walks of ~540 bytes).
 */
int sfs_counter_multiget(sfs_ctx_t *c, uint32_t state, const struct sfs_key *keys, unsigned n,
			 int64_t *vals, int *results)
{
	static __thread unsigned char kstore[MG_KEYBYTES];
	static __thread struct walk wk[MG_BATCH];
	struct sfs_probe probes[MG_BATCH];
	struct sfs_probe_result pr[MG_BATCH];
	struct mg_key kb[MG_BATCH];
	unsigned idx[MG_BATCH];
	int errors = 0;

	if (state < SFS_MAX_STATES && c->ttl_ms[state] != 0) {
		for (unsigned i = 0; i < n; i++) {
			results[i] = sfs_counter_get(c, state, keys[i].ns, keys[i].key, keys[i].klen,
						     &vals[i]);
			errors += results[i] < 0;
		}
		return errors ? SFS_EUSAGE : 0;
	}
	for (unsigned base = 0; base < n;) {
		const struct sfs_wbuf_geom *act = c->hot_on ? &c->hot : NULL;
		unsigned m = 0, np = 0;
		size_t used = 0;

		/* checks, buffered keys, the active buffer's slots loading */
		for (; m < MG_BATCH && base + m < n; m++) {
			const struct sfs_key *k = &keys[base + m];

			vals[base + m] = 0;
			if (k->klen + SFS_KEY_PREFIX > MG_KEYBYTES - used) {
				kb[m].n = INT_MIN;	/* no room in the scratch: on its own */
				continue;
			}
			kb[m].n = key_ident(c, state, SFS_STATE_COUNTER, k->ns, k->key, k->klen,
					    "counter multiget", &kb[m].pfx, &kb[m].h);
			if (kb[m].n >= 0) {
				key_write(kstore + used, kb[m].pfx, k->key, k->klen);
				used += (size_t)kb[m].n;
				if (act)
					sfs_wbuf_prefetch_g(act, kb[m].h);
			}
		}
		mg_prefetch_entries(act, kb, m);
		/* the buffers, newest first; the store's keys set aside */
		used = 0;
		for (unsigned k = 0; k < m; k++) {
			unsigned at = base + k;
			const struct sfs_key *key = &keys[at];
			struct sfs_view v;
			unsigned char *bk = kstore + used;
			int rc;

			if (kb[k].n == INT_MIN) {
				results[at] = sfs_counter_get(c, state, key->ns, key->key, key->klen,
							      &vals[at]);
				errors += results[at] < 0;
				continue;
			}
			if (kb[k].n < 0) {
				results[at] = kb[k].n;
				errors++;
				continue;
			}
			used += (size_t)kb[k].n;
			rc = walk(c, bk, (size_t)kb[k].n, key->ns, kb[k].h, 1, &v, &vals[at], &wk[k]);
			if (wk[k].done || rc < 0) {
				results[at] = wk[k].res;
				errors += wk[k].res < 0;
				continue;
			}
			probes[np] = (struct sfs_probe){ .hash = kb[k].h, .ns = key->ns, .key = bk,
							 .klen = (uint32_t)kb[k].n };
			idx[np++] = k;
		}
		/* one batched probe of the store */
		if (np) {
			int rc = c->tops->probe(c->tr, probes, np, pr);

			for (unsigned j = 0; j < np; j++) {
				unsigned at = base + idx[j];
				struct sfs_view v;

				results[at] = rc ? rc
						 : resolve(c, probes[j].key, probes[j].klen, probes[j].ns,
							   probes[j].hash, 1, &pr[j], &wk[idx[j]], &v,
							   &vals[at]);
				errors += results[at] < 0;
			}
		}
		base += m;
	}
	return errors ? SFS_EUSAGE : 0;
}

void sfs_worker_stats(const sfs_ctx_t *c, struct sfs_worker_stats *st)
{
	const struct sfs_wctl *ctl = c->ctl;
	struct sfs_wbuf_stats ws;

	memset(st, 0, sizeof(*st));
	st->seq = ctl->wc_seq;
	st->barriers = ctl->wc_barriers;
	st->spills = ctl->wc_spills;
	st->stalls = ctl->wc_stalls;
	st->stall_ns = ctl->wc_stall_ns;
	st->flushed_seq = sfs_load_acquire(&ctl->wc_flushed_seq);
	st->flushes = ctl->wc_flushes;
	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		uint32_t s = sfs_load_acquire(&ctl->wc_buf[i].cb_state);

		st->buffers_free += s == SFS_BUF_FREE;
		st->buffers_sealed += s == SFS_BUF_SEALED;
	}
	sfs_wbuf_stats(c->buf[ctl->wc_active], &ws);
	st->active_entries = ws.entries;
	st->active_bytes = ws.bytes_used;
	if (c->cache) {
		struct sfs_vcache_stats cs;

		sfs_vcache_stats(c->cache, &cs);
		st->cache_hits = cs.hits;
		st->cache_neg_hits = cs.neg_hits;
		st->cache_misses = cs.misses;
		st->cache_entries = cs.entries;
		st->cache_bytes = cs.bytes_used;
	}
}
