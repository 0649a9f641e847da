/*
 * qsbr.h — quiescent-state-based reclamation across processes.
 *
 * liburcu's grace periods end at the process boundary, so sfs runs QSBR over
 * the process table, on the model of DPDK's rte_rcu_qsbr: a token in the
 * segment header (sh_qsbr_token) that updaters advance, and one counter per
 * reader (ps_qsbr in its own cache-line slot) where 0 means offline.
 *
 * Reader side (static inline, no syscall, no atomic RMW):
 *   online     store token; full fence (store-load: the token must be visible
 *              before the reader's next shared load, or an updater could miss
 *              it and free what the reader is about to read)
 *   quiescent  store token with release order: everything read before is done
 *   offline    store 0 with release order
 * A view of shared state obtained while online is valid until the reader's
 * next quiescent() or offline().
 *
 * Updater side (shm/qsbr.c): sfs_qsbr_start() advances the token and returns
 * it; sfs_qsbr_check(t) is true once every LIVE, online slot has reported a
 * token >= t.  A slot that lags is tested for liveness (pid + start time): a
 * dead process — crashed while online — never blocks a grace period.
 * The caller's own slot is skipped: an updater holds no references while it
 * waits (the DPDK rule).
 */
#ifndef SFS_SHM_QSBR_H
#define SFS_SHM_QSBR_H

#include <stdint.h>

#include "shm/proc.h"

static inline void sfs_qsbr_online(struct sfs_seg_hdr *h, struct sfs_proc_slot *me)
{
	sfs_store_relaxed(&me->ps_qsbr, sfs_load_relaxed(&h->sh_qsbr_token));
	cmm_smp_mb();
}

static inline void sfs_qsbr_quiescent(struct sfs_seg_hdr *h, struct sfs_proc_slot *me)
{
	sfs_store_release(&me->ps_qsbr, sfs_load_acquire(&h->sh_qsbr_token));
}

static inline void sfs_qsbr_offline(struct sfs_proc_slot *me)
{
	sfs_store_release(&me->ps_qsbr, 0);
}

/* Advance the token: objects unlinked before this call may be freed once
 * sfs_qsbr_check() passes for the returned token.  One atomic RMW. */
static inline uint64_t sfs_qsbr_start(struct sfs_seg_hdr *h)
{
	return uatomic_add_return(&h->sh_qsbr_token, 1);
}

/*
 * sfs_qsbr_check - has every live online reader passed @token?
 * @self: the caller's slot (skipped), may be NULL.
 * @wait: 0 = one pass, return 0/1; otherwise poll until true or @wait ns
 * passed (then SFS_ETIMEDOUT).  Cost: O(table) loads; /proc reads only for
 * slots that lag after the first passes.
 */
int sfs_qsbr_check(struct sfs_seg *s, const struct sfs_proc_slot *self, uint64_t token,
		   uint64_t wait_ns);

/* start + check(wait): a full grace period. */
int sfs_qsbr_synchronize(struct sfs_seg *s, const struct sfs_proc_slot *self, uint64_t wait_ns);

/*
 * Deferred reclamation (DPDK's rte_rcu_qsbr_dq): an updater queues
 * (token, free function, argument) and reclaims in bounded steps.  The queue
 * is process-local — it holds a function pointer, which must never reach
 * shared memory — so a crashed updater's pending frees are lost with it;
 * owners of shared regions rebuild their free lists from shared state on
 * restart.
 */
typedef void (*sfs_qsbr_free_fn)(void *ctx, uint64_t obj);

struct sfs_qsbr_defer {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	sfs_qsbr_free_fn fn;
	void *ctx;
	uint32_t cap, head, tail;  /* ring of entries, process-local */
	struct { uint64_t token, obj; } *ent;
};

int sfs_qsbr_defer_init(struct sfs_qsbr_defer *d, struct sfs_seg *s,
			const struct sfs_proc_slot *self, uint32_t cap, sfs_qsbr_free_fn fn,
			void *ctx);
void sfs_qsbr_defer_fini(struct sfs_qsbr_defer *d);

/* Queue @obj for freeing after a grace period.  When the queue is full it
 * first reclaims what it can, then waits for the oldest entry's grace period
 * (bounded by @wait_ns: SFS_ETIMEDOUT leaves @obj not queued). */
int sfs_qsbr_defer(struct sfs_qsbr_defer *d, uint64_t obj, uint64_t wait_ns);

/* Free up to @max entries whose grace period has passed; returns how many. */
unsigned sfs_qsbr_reclaim(struct sfs_qsbr_defer *d, unsigned max);

static inline unsigned sfs_qsbr_pending(const struct sfs_qsbr_defer *d)
{
	return d->tail - d->head;
}

#endif
