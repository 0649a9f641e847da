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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fingerprint.h"
#include "common/merge.h"
#include "shm/futex.h"
#include "shm/qsbr.h"
#include "shm/ring.h"
#include "target/target.h"
#include "worker/keygroup.h"
#include "worker/state.h"
#include "worker/wbuf.h"

#define MB (1024ull * 1024)

uint64_t sfs_wctl_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_wctl);
	SFS_FP_SIZE(h, struct sfs_wctl_buf);
	SFS_FP_SIZE(h, struct sfs_flush_req);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_seq);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_list_seq);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_freed);
	SFS_FP_FIELD(h, struct sfs_wctl, wc_buf);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, wb_state);
	SFS_FP_FIELD(h, struct sfs_wctl_buf, wb_seq);
	return sfs_fp(h, SFS_WCTL_MAX_BUFS);
}

/* ---- registry -------------------------------------------------------------- */

static int sfs_state_register_merge_kind(sfs_ctx_t *c, const char *name, int kind, unsigned op,
					 uint32_t *id);

int sfs_state_register(sfs_ctx_t *c, const char *name, int kind, uint32_t *id)
{
	return sfs_state_register_merge_kind(c, name, kind, SFS_MERGE_ADD, id);
}

int sfs_state_register_merge(sfs_ctx_t *c, const char *name, unsigned op, uint32_t *id)
{
	if (op >= SFS_MERGE_NOPS)
		return sfs__err(SFS_EUSAGE, "state '%s': merge operator %u is not one of add, max, min",
				name ? name : "", op);
	return sfs_state_register_merge_kind(c, name, SFS_STATE_COUNTER, op, id);
}

static int sfs_state_register_merge_kind(sfs_ctx_t *c, const char *name, int kind, unsigned op,
					 uint32_t *id)
{
	struct sfs_seg_hdr *h = c->seg.hdr;

	if (!name || !*name || strlen(name) >= SFS_STATE_NAME_MAX)
		return sfs__err(SFS_EUSAGE, "state name '%s': 1..%d characters", name ? name : "",
				SFS_STATE_NAME_MAX - 1);
	if (kind < SFS_STATE_VALUE || kind > SFS_STATE_LIST)
		return sfs__err(SFS_EUSAGE,
				"state '%s': kind %d is not one of value, counter, map, list", name,
				kind);
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
			struct sfs_state_desc *d = &h->sh_states[i];
			uint32_t st = sfs_load_acquire(&d->sd_state);

			if (st == SFS_SDESC_READY && strcmp(d->sd_name, name) == 0) {
				if (d->sd_kind != (uint32_t)kind || d->sd_merge != op)
					return sfs__err(SFS_EUSAGE,
							"state '%s' is registered as kind %u merge %u, "
							"not kind %d merge %u",
							name, d->sd_kind, d->sd_merge, kind, op);
				c->kinds[i] = (uint8_t)kind;
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
			sfs_store_release(&d->sd_state, SFS_SDESC_READY);
			/* Lost a race for the same name to a lower entry? Use it. */
			for (uint32_t j = 0; j < i; j++) {
				struct sfs_state_desc *e = &h->sh_states[j];

				if (sfs_load_acquire(&e->sd_state) == SFS_SDESC_READY &&
				    strcmp(e->sd_name, name) == 0) {
					sfs_store_release(&d->sd_state, SFS_SDESC_DUPLICATE);
					i = j;
					break;
				}
			}
			c->kinds[i] = (uint8_t)kind;
			*id = i;
			return 0;
		}
	}
	return sfs__err(SFS_EFULL, "segment %s: state registry full (%d states)", c->seg.path,
			SFS_MAX_STATES);
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
	if (sfs_load_acquire(&ctl->wc_buf[ctl->wc_active].wb_state) == SFS_BUF_ACTIVE)
		c->order[n++] = ctl->wc_active;
	first = n;
	for (uint32_t i = 0; i < ctl->wc_nbufs; i++) {
		unsigned k;

		if (sfs_load_acquire(&ctl->wc_buf[i].wb_state) != SFS_BUF_SEALED)
			continue;
		for (k = n; k > first && ctl->wc_buf[c->order[k - 1]].wb_seq < ctl->wc_buf[i].wb_seq;
		     k--)
			c->order[k] = c->order[k - 1];
		c->order[k] = i;
		n++;
	}
	c->norder = n;
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
	ctl->wc_buf[0].wb_state = SFS_BUF_ACTIVE;
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

int sfs_worker_open(const char *job, int node, uint32_t worker, const struct sfs_worker_opts *opts,
		    sfs_ctx_t **out)
{
	struct sfs_worker_opts o = opts ? *opts : (struct sfs_worker_opts){ 0 };
	char name[SFS_REGION_NAME_MAX];
	sfs_ctx_t *c;
	uint64_t off, size;
	int rc;

	if (!o.parallelism)
		o.parallelism = 1;
	if (!o.max_parallelism)
		o.max_parallelism = SFS_MAX_PARALLELISM_DEFAULT;
	if (!o.buffers)
		o.buffers = 4;
	if (!o.buffer_bytes)
		o.buffer_bytes = 16 * MB;
	if (!o.buffer_keys)
		o.buffer_keys = o.buffer_bytes / 64 ? o.buffer_bytes / 64 : 1;
	if (!o.cache_bytes)
		o.cache_bytes = 8 * MB;
	if (o.buffers < 2 || o.buffers > SFS_WCTL_MAX_BUFS)
		return sfs__err(SFS_EUSAGE, "worker %u: %u buffers, need 2..%d", worker, o.buffers,
				SFS_WCTL_MAX_BUFS);
	if (worker >= o.parallelism || o.max_parallelism < o.parallelism ||
	    o.max_parallelism > 32768)
		return sfs__err(SFS_EUSAGE,
				"worker %u of parallelism %u, max parallelism %u: out of range",
				worker, o.parallelism, o.max_parallelism);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->worker = worker;
	c->par = o.parallelism;
	c->maxp = o.max_parallelism;
	c->kg_start = sfs_kg_range_start(worker, c->par, c->maxp);
	c->kg_end = sfs_kg_range_end(worker, c->par, c->maxp);
	c->stall_timeout_ns = o.stall_timeout_ns;
	rc = sfs_seg_attach(job, node, &c->seg);
	if (rc)
		goto fail_free;
	rc = sfs_proc_register(&c->seg, SFS_ROLE_WORKER, worker, &c->slot);
	if (rc)
		goto fail_seg;
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
		uint64_t bufsz = align64(sfs_wbuf_size(o.buffer_keys, o.buffer_bytes));
		uint64_t need = 4096 + sfs_ring_memsize(SFS_WCTL_RING_SLOTS,
							sizeof(struct sfs_flush_req)) +
				o.buffers * bufsz + 64 +
				((o.flags & SFS_WORKER_NO_CACHE) ? 0
								 : sfs_vcache_size(o.cache_bytes, 0));

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
	if (rc)
		goto fail_slot;
	if (c->restarted) {
		struct sfs_wctl *ctl = c->ctl;

		/* A previous incarnation died: its active buffer holds exactly
		 * the writes since its last barrier; dropping it is the
		 * rollback.  Sealed buffers stay for the compactor. */
		for (uint32_t i = 0; i < ctl->wc_nbufs; i++)
			if (sfs_load_acquire(&ctl->wc_buf[i].wb_state) == SFS_BUF_ACTIVE) {
				sfs_wbuf_reset(c->buf[i]);
				ctl->wc_active = i;
			}
		/* Died between a seal and taking a free buffer: no ACTIVE one. */
		if (sfs_load_acquire(&ctl->wc_buf[ctl->wc_active].wb_state) != SFS_BUF_ACTIVE)
			c->need_active = 1;
		ctl->wc_restarts++;
		if (ctl->wc_kg_start != c->kg_start || ctl->wc_kg_end != c->kg_end) {
			rc = sfs__err(SFS_EUSAGE,
				      "worker region %s owns key groups %u..%u, this worker %u..%u",
				      name, ctl->wc_kg_start, ctl->wc_kg_end, c->kg_start, c->kg_end);
			goto fail_slot;
		}
	}
	c->tops = sfs_target_of(&c->seg);
	if (!c->tops) {
		rc = sfs__err(SFS_EUSAGE, "segment %s: unknown flush target '%.16s'", c->seg.path,
			      c->seg.hdr->sh_backend);
		goto fail_slot;
	}
	rc = c->tops->reader_open(&c->seg, worker, &c->tr);
	if (rc)
		goto fail_slot;
	if (c->ctl->wc_cache_bytes) {
		/* Derived data: a fresh cache at every open, so a restarted
		 * worker never serves a value of its dropped active buffer. */
		rc = sfs_vcache_init((char *)c->ctl + c->ctl->wc_cache_off, c->ctl->wc_cache_bytes, 0,
				     &c->cache);
		if (rc)
			goto fail_slot;
	}
	order_rebuild(c);
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

int sfs_worker_close(sfs_ctx_t *c)
{
	if (!c)
		return SFS_EUSAGE;
	c->nfills = 0;
	sfs__map_free(c);
	c->tops->reader_close(c->tr);
	sfs_qsbr_offline(c->slot);
	sfs_proc_unregister(c->slot);
	sfs_seg_detach(&c->seg);
	free(c);
	return 0;
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

		if (!active_ok || sfs_wbuf_get(a, f->ns, f->key, f->klen, &v) != -ENOENT)
			continue;
		if (f->absent)
			(void)sfs_vcache_put_absent(c->cache, 0, f->ns, f->key, f->klen, 0);
		else
			(void)sfs_vcache_put(c->cache, 0, f->ns, f->key, f->klen, f->val, f->vlen, 0);
	}
	c->nfills = 0;
}

void sfs_ctx_quiescent(sfs_ctx_t *c)
{
	if (c->nfills)
		apply_fills(c);
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
	sfs_qsbr_online(c->seg.hdr, c->slot);
	(void)c->tops->catch_up(c->tr);
}

uint32_t sfs_key_group_of(const sfs_ctx_t *c, const void *key, size_t klen)
{
	return sfs_key_group(key, klen, c->maxp);
}

/* ---- barrier ------------------------------------------------------------------- */

static void ring_bell(sfs_ctx_t *c)
{
	struct sfs_seg_hdr *h = c->seg.hdr;

	uatomic_inc(&h->sh_bell);	/* full barrier: the seal is visible first */
	if (sfs_load_relaxed(&h->sh_bell_sleeping))
		sfs_futex_wake(&h->sh_bell, 1);
}

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
			if (sfs_load_acquire(&ctl->wc_buf[i].wb_state) != SFS_BUF_FREE)
				continue;
			sfs_wbuf_reset(c->buf[i]);
			sfs_store_release(&ctl->wc_buf[i].wb_state, SFS_BUF_ACTIVE);
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
	d->wb_seq = seq;
	d->wb_barrier = id;
	d->wb_at_barrier = !spill;
	d->wb_sealed_ns = sfs_now_ns();
	rc = sfs_wbuf_seal(c->buf[a], id);
	if (rc)
		return rc;
	sfs_store_release(&d->wb_state, SFS_BUF_SEALED);
	sfs_store_relaxed(&ctl->wc_seq, seq);
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

	if (id <= c->ctl->wc_barrier)
		return sfs__err(SFS_EUSAGE, "worker %u: barrier %llu after barrier %llu", c->worker,
				(unsigned long long)id, (unsigned long long)c->ctl->wc_barrier);
	rc = ensure_active(c);
	if (rc == 0) {
		rc = seal_and_swap(c, id, 0);
		/* Sealed even when no buffer freed up in time (rc then says so). */
		sfs_store_relaxed(&c->ctl->wc_barrier, id);
	}
	sfs_qsbr_quiescent(c->seg.hdr, c->slot);
	return rc;
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

/* Checks that @state is registered with @kind and that this worker owns
 * @key's key group; returns the key group or an error. */
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
	kg = sfs_key_group(key, klen, c->maxp);
	if (kg < c->kg_start || kg > c->kg_end)
		return sfs__err(SFS_EUSAGE, "%s: key group %u is not worker %u's (%u..%u)", op, kg,
				c->worker, c->kg_start, c->kg_end);
	return (int)kg;
}

/* Build kg | state | key in the scratch buffer; checks ownership and limits. */
static int build_key(sfs_ctx_t *c, uint32_t state, const void *key, size_t klen, uint32_t kind,
		     const char *op)
{
	int kg = sfs__state_check(c, state, kind, key, klen, 0, op);

	if (kg < 0)
		return kg;
	sfs_key_prefix(c->kbuf, (uint32_t)kg, state);
	memcpy(c->kbuf + SFS_KEY_PREFIX, key, klen);
	return (int)(klen + SFS_KEY_PREFIX);
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

int sfs_value_put(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		  const void *val, size_t vlen)
{
	int n = build_key(c, state, key, klen, SFS_STATE_VALUE, "put");
	uint64_t h;

	if (n < 0)
		return n;
	if (vlen > SFS_VALUE_MAX)
		return sfs__err(SFS_EUSAGE, "put: value of %zu bytes, at most %u", vlen, SFS_VALUE_MAX);
	h = sfs_wbuf_hash(ns, c->kbuf, (size_t)n);
	if (c->cache && c->cache->vc_live)	/* nothing cached: nothing to drop */
		(void)sfs_vcache_invalidate(c->cache, 0, ns, c->kbuf, (size_t)n);
	return WRITE_WITH_SPILL(c, sfs_wbuf_put_h(active(c), h, ns, c->kbuf, (size_t)n, val, vlen));
}

int sfs_value_delete(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen)
{
	int n = build_key(c, state, key, klen, SFS_STATE_VALUE, "delete");
	uint64_t h;

	if (n < 0)
		return n;
	h = sfs_wbuf_hash(ns, c->kbuf, (size_t)n);
	if (c->cache && c->cache->vc_live)
		(void)sfs_vcache_invalidate(c->cache, 0, ns, c->kbuf, (size_t)n);
	return WRITE_WITH_SPILL(c, sfs_wbuf_delete_h(active(c), h, ns, c->kbuf, (size_t)n));
}

int sfs_counter_add(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    int64_t delta)
{
	int n = build_key(c, state, key, klen, SFS_STATE_COUNTER, "counter add");
	uint64_t h;

	if (n < 0)
		return n;
	h = sfs_wbuf_hash(ns, c->kbuf, (size_t)n);
	return WRITE_WITH_SPILL(c, sfs_wbuf_merge_h(active(c), h, ns, c->kbuf, (size_t)n,
						    c->seg.hdr->sh_states[state].sd_merge, delta));
}

/* ---- reads ------------------------------------------------------------------------ */

/* Queue a cache fill for the key in c->kbuf (see apply_fills). */
static void remember(sfs_ctx_t *c, const unsigned char *key, uint64_t ns, size_t n,
		     const void *val, uint32_t vlen, int absent)
{
	struct sfs_fill *f;

	if (!c->cache || n > SFS_FILL_KEY_MAX || c->nfills == SFS_FILLS_MAX)
		return;
	f = &c->fills[c->nfills++];
	f->ns = ns;
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
	uint64_t dseq[SFS_WCTL_MAX_BUFS];
	int64_t dval[SFS_WCTL_MAX_BUFS];
	unsigned op;              /* the counter's merge operator */
};

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

/*
 * Walk the buffers, newest first, and the cache for the composite key in
 * c->kbuf[0..n).  Sets w->done when they decide the answer; otherwise the
 * flushed store must be probed (and for a counter, w holds the deltas).
 */
static int walk(sfs_ctx_t *c, const unsigned char *key, size_t n, uint64_t ns, uint64_t h,
		int counter, struct sfs_view *out, int64_t *sum, struct walk *w)
{
	struct sfs_wctl *ctl = c->ctl;

	w->done = 1;
	w->nd = 0;
	w->op = c->seg.hdr->sh_states[sfs_key_prefix_state(key)].sd_merge;
	out->data = NULL;
	out->len = 0;
	for (unsigned k = 0; k < c->norder; k++) {
		uint32_t i = c->order[k];
		uint32_t st = sfs_load_acquire(&ctl->wc_buf[i].wb_state);
		struct sfs_wbuf_view v;
		int rc;

		if (st == SFS_BUF_RETIRING || st == SFS_BUF_FREE)
			break;	/* flushed in seq order: all older ones are too */
		if (sfs_load_relaxed(&c->buf[i]->wb_live) == 0)
			continue;	/* empty (a fresh active buffer): skip the miss */
		rc = sfs_wbuf_get_h(c->buf[i], h, ns, key, n, &v);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return w->res = rc;
		if (v.kind == SFS_WBUF_MERGE) {
			w->dseq[w->nd] = st == SFS_BUF_ACTIVE ? UINT64_MAX : ctl->wc_buf[i].wb_seq;
			w->dval[w->nd++] = sfs_wbuf_view_i64(&v);
			continue;
		}
		if (v.kind == SFS_WBUF_DELETE) {
			/* Shadows everything older; newer deltas fold over nothing. */
			if (sum)
				*sum = w->nd ? fold(w, 0, 0, 0) : 0;
			return w->res = counter && w->nd ? 1 : 0;
		}
		/* PUT: shadows everything older. */
		if (counter) {
			*sum = fold(w, 1, v.len == 8 ? sfs_wbuf_view_i64(&v) : 0, 0);
			return w->res = 1;
		}
		out->data = v.value;
		out->len = v.len;
		return w->res = 1;
	}
	/* Value state: the cache answers what the store would. */
	if (!counter && c->cache) {
		struct sfs_vcache_view cv;

		if (sfs_vcache_get(c->cache, 0, ns, key, n, &cv) == 0) {
			out->data = cv.absent ? NULL : cv.value;
			out->len = cv.absent ? 0 : cv.len;
			return w->res = !cv.absent;
		}
	}
	w->done = 0;
	return 0;
}

/* Finish a walk with the store's answer @r for the key in c->kbuf[0..n). */
static int resolve(sfs_ctx_t *c, const unsigned char *key, size_t n, uint64_t ns, int counter,
		   const struct sfs_probe_result *r, struct walk *w, struct sfs_view *out,
		   int64_t *sum)
{
	int64_t base = 0;

	if (!counter) {
		/* No buffer holds the key: the store's answer may be cached. */
		remember(c, key, ns, n, r->found ? r->value : NULL, r->len, !r->found);
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

/* One key through every layer: 1 found, 0 absent, < 0 error. */
static int lookup(sfs_ctx_t *c, size_t n, uint64_t ns, int counter, struct sfs_view *out,
		  int64_t *sum)
{
	uint64_t h = sfs_wbuf_hash(ns, c->kbuf, n);
	struct sfs_probe p = { .hash = h, .ns = ns, .key = c->kbuf, .klen = (uint32_t)n };
	struct sfs_probe_result r;
	struct walk w;
	int rc = walk(c, c->kbuf, n, ns, h, counter, out, sum, &w);

	if (w.done || rc < 0)
		return w.res;
	rc = c->tops->probe(c->tr, &p, 1, &r);
	if (rc)
		return rc;
	return resolve(c, c->kbuf, n, ns, counter, &r, &w, out, sum);
}

int sfs_value_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		  struct sfs_view *out)
{
	int n = build_key(c, state, key, klen, SFS_STATE_VALUE, "get");

	if (n < 0)
		return n;
	return lookup(c, (size_t)n, ns, 0, out, NULL);
}

int sfs_counter_get(sfs_ctx_t *c, uint32_t state, uint64_t ns, const void *key, size_t klen,
		    int64_t *out)
{
	struct sfs_view v;
	int n = build_key(c, state, key, klen, SFS_STATE_COUNTER, "counter get");

	if (n < 0)
		return n;
	*out = 0;
	return lookup(c, (size_t)n, ns, 1, &v, out);
}

/*
 * sfs_multiget - the keys of one input batch, in chunks of MG_BATCH:
 *   1. build each composite key, hash it, prefetch its home slot in the
 *      active buffer;
 *   2. prefetch the entry each home slot points to;
 *   3. walk the buffers and the cache per key (the misses now overlap
 *      instead of queueing one behind the other);
 *   4. probe the keys left over in the flushed store together (one target
 *      call: the memory store's probes, RocksDB's MultiGet, one table scan).
 * A key that does not fit the chunk's key scratch is looked up on its own.
 */
#define MG_BATCH 64
#define MG_KEYBYTES (16u << 10)

int sfs_multiget(sfs_ctx_t *c, uint32_t state, const struct sfs_key *keys, unsigned n,
		 struct sfs_view *views, int *results)
{
	static __thread unsigned char kstore[MG_KEYBYTES];
	struct sfs_probe probes[MG_BATCH];
	struct sfs_probe_result pr[MG_BATCH];
	struct {
		uint64_t h;
		const unsigned char *key;
		uint32_t len;
	} kb[MG_BATCH];
	unsigned idx[MG_BATCH];
	int errors = 0;

	for (unsigned base = 0; base < n;) {
		struct sfs_wbuf *act = c->need_active ? NULL : c->buf[c->ctl->wc_active];
		unsigned m = 0, np = 0, i;
		size_t used = 0;

		/* 1: keys, hashes, slot prefetches */
		for (i = base; i < n && m < MG_BATCH; i++) {
			int kn = build_key(c, state, keys[i].key, keys[i].klen, SFS_STATE_VALUE,
					   "multiget");

			if (kn < 0) {
				results[i] = kn;
				errors++;
				kb[m++].key = NULL;
				continue;
			}
			if (used + (size_t)kn > MG_KEYBYTES) {
				if (m)
					break;	/* next chunk */
				results[i] = lookup(c, (size_t)kn, keys[i].ns, 0, &views[i], NULL);
				errors += results[i] < 0;
				kb[m++].key = NULL;
				continue;
			}
			memcpy(kstore + used, c->kbuf, (size_t)kn);
			kb[m].key = kstore + used;
			kb[m].len = (uint32_t)kn;
			kb[m].h = sfs_wbuf_hash(keys[i].ns, kb[m].key, (size_t)kn);
			if (act)
				sfs_wbuf_prefetch(act, kb[m].h);
			used += (size_t)kn;
			m++;
		}
		/* 2: entry prefetches */
		if (act)
			for (unsigned k = 0; k < m; k++)
				if (kb[k].key)
					sfs_wbuf_prefetch_entry(act, kb[k].h);
		/* 3: buffers and cache */
		for (unsigned k = 0; k < m; k++) {
			unsigned at = base + k;
			struct walk w;

			if (!kb[k].key)
				continue;
			results[at] = walk(c, kb[k].key, kb[k].len, keys[at].ns, kb[k].h, 0, &views[at],
					   NULL, &w);
			if (w.done) {
				errors += results[at] < 0;
				continue;
			}
			probes[np] = (struct sfs_probe){ .hash = kb[k].h, .ns = keys[at].ns,
							 .key = kb[k].key, .klen = kb[k].len };
			idx[np++] = at;
		}
		/* 4: one batched probe of the store */
		if (np) {
			int rc = c->tops->probe(c->tr, probes, np, pr);

			for (unsigned k = 0; k < np; k++) {
				struct walk w = { .nd = 0 };

				results[idx[k]] = rc ? rc
						     : resolve(c, probes[k].key, probes[k].klen,
							       probes[k].ns, 0, &pr[k], &w, &views[idx[k]],
							       NULL);
				errors += results[idx[k]] < 0;
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
		uint32_t s = sfs_load_acquire(&ctl->wc_buf[i].wb_state);

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
