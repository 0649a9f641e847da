/*
 * qsbr.c — the updater side of cross-process QSBR: grace-period checks with
 * liveness, and the deferred-free queue.
 */
#include <stdlib.h>

#include "common/err.h"
#include "shm/qsbr.h"

/* Polls of a lagging slot before its process is tested for liveness: the
 * /proc read costs microseconds, a healthy reader passes within a few polls. */
#define LAG_POLLS_BEFORE_LIVENESS 64
/* A one-pass check (wait 0, called by the compactor every step) reads /proc
 * for a lagging slot only once its heartbeat is this old: a live reader
 * beats far more often, so the common "not yet" costs a load, not a read. */
#define STALE_BEAT_NS (250 * 1000000ull)

static int slot_passed(const struct sfs_proc_slot *sl, uint64_t token, unsigned polls,
		       int one_pass)
{
	uint64_t claim = sfs_load_acquire(&sl->ps_claim);
	uint64_t c;

	if (SFS_SLOT_STATE(claim) != SFS_SLOT_LIVE)
		return 1;	/* free, or still claiming: it went online after token */
	c = sfs_load_acquire(&sl->ps_qsbr);
	if (c == 0 || c >= token)
		return 1;
	if (one_pass) {
		uint64_t beat = sfs_load_relaxed(&sl->ps_heartbeat), now = sfs_now_ns();

		if (now < beat || now - beat < STALE_BEAT_NS)
			return 0;
	} else if (polls < LAG_POLLS_BEFORE_LIVENESS || (polls & 255) != 0) {
		return 0;	/* /proc at most every 256 polls */
	}
	return !sfs_proc_slot_alive(sl);	/* crashed while online: never blocks */
}

int sfs_qsbr_check(struct sfs_seg *s, const struct sfs_proc_slot *self, uint64_t token,
		   uint64_t wait_ns)
{
	uint64_t deadline = wait_ns ? sfs_now_ns() + wait_ns : 0, spin_until = 0;
	unsigned first = 0, polls = 0;

	for (;;) {
		unsigned i;

		/* Resume from the first slot that lagged: slots already seen
		 * past @token stay past it (counters only grow while online,
		 * and going offline or dying also passes). */
		for (i = first; i < SFS_MAX_PROCS; i++) {
			const struct sfs_proc_slot *sl = &s->hdr->sh_procs[i];

			if (sl == self)
				continue;
			if (!slot_passed(sl, token, polls, !wait_ns))
				break;
		}
		if (i == SFS_MAX_PROCS)
			return 1;
		if (!wait_ns)
			return 0;
		if (i != first)
			polls = 0;
		first = i;
		/* Spin ~30 us (a reader running on another core passes within
		 * a batch), then sleep.  On an oversubscribed machine a yield
		 * does not let the reader run (measured: 12 ms per grace period
		 * with two readers on two cores, 4 ms with one reader beside a
		 * busy process), a 20 us sleep does (~0.1-0.2 ms). */
		++polls;
		if (!spin_until)
			spin_until = sfs_now_ns() + 30000;
		if ((polls & 15) || sfs_now_ns() < spin_until)
			caa_cpu_relax();
		else
			sfs_sleep_ns(polls > 4096 ? 200000 : 20000);
		if ((polls & 63) == 0 && sfs_now_ns() > deadline)
			return sfs__err(SFS_ETIMEDOUT,
					"segment %s: grace period %llu blocked by slot %u (pid %d)",
					s->path, (unsigned long long)token, i,
					(int)s->hdr->sh_procs[i].ps_pid);
	}
}

int sfs_qsbr_synchronize(struct sfs_seg *s, const struct sfs_proc_slot *self, uint64_t wait_ns)
{
	int rc = sfs_qsbr_check(s, self, sfs_qsbr_start(s->hdr), wait_ns ? wait_ns : UINT64_MAX);

	return rc == 1 ? 0 : rc;
}

int sfs_qsbr_defer_init(struct sfs_qsbr_defer *d, struct sfs_seg *s,
			const struct sfs_proc_slot *self, uint32_t cap, sfs_qsbr_free_fn fn,
			void *ctx)
{
	if (cap == 0 || (cap & (cap - 1)) || !fn)
		return sfs__err(SFS_EUSAGE, "qsbr defer queue: capacity %u must be a power of two",
				cap);
	d->ent = calloc(cap, sizeof(*d->ent));
	if (!d->ent)
		return -ENOMEM;
	d->seg = s;
	d->self = self;
	d->cap = cap;
	d->head = d->tail = 0;
	d->fn = fn;
	d->ctx = ctx;
	return 0;
}

void sfs_qsbr_defer_fini(struct sfs_qsbr_defer *d)
{
	free(d->ent);
	d->ent = NULL;
}

unsigned sfs_qsbr_reclaim(struct sfs_qsbr_defer *d, unsigned max)
{
	unsigned n = 0;

	/* Tokens are queued in increasing order: stop at the first not passed. */
	while (n < max && d->head != d->tail) {
		uint32_t i = d->head & (d->cap - 1);

		if (sfs_qsbr_check(d->seg, d->self, d->ent[i].token, 0) != 1)
			break;
		d->fn(d->ctx, d->ent[i].obj);
		d->head++;
		n++;
	}
	return n;
}

int sfs_qsbr_defer(struct sfs_qsbr_defer *d, uint64_t obj, uint64_t wait_ns)
{
	if (d->tail - d->head == d->cap) {
		sfs_qsbr_reclaim(d, d->cap);
		if (d->tail - d->head == d->cap) {
			uint32_t i = d->head & (d->cap - 1);
			int rc = sfs_qsbr_check(d->seg, d->self, d->ent[i].token,
						wait_ns ? wait_ns : 1);

			if (rc != 1)
				return rc ? rc : SFS_ETIMEDOUT;
			sfs_qsbr_reclaim(d, d->cap);
		}
	}
	d->ent[d->tail & (d->cap - 1)].token = sfs_qsbr_start(d->seg->hdr);
	d->ent[d->tail & (d->cap - 1)].obj = obj;
	d->tail++;
	return 0;
}
