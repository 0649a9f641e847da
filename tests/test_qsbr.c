/*
 * test_qsbr.c — cross-process QSBR: an object is never reclaimed while a
 * reader in another process may hold it; a reader killed with SIGKILL (or
 * offline) does not block reclamation; a live stuck reader does, and the
 * timeout names it.
 */
#include <criterion/criterion.h>
#include <signal.h>

#include "common/err.h"
#include "shm/qsbr.h"
#include "tests/helpers.h"

#define SEG_SIZE (4u << 20)
#define NOBJ 64

/* The shared test region: a published object and a pool of objects. */
struct obj {
	uint64_t value;     /* seq when live, POISON once reclaimed */
	uint64_t pad[7];
};
#define POISON 0xdeaddeaddeaddeadull

struct area {
	uint64_t current;        /* offset of the published object (release) */
	int32_t holding;         /* child -> parent: it holds a reference */
	int32_t go;              /* parent -> child: may pass a quiescent point */
	uint64_t pad[6];
	struct obj objs[NOBJ];
};

static struct sfs_seg seg;
static char job[64];
static uint64_t area_off;

static void setup(void)
{
	th_job(job, sizeof(job), "qsbr");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_region_create(&seg, "qsbr.test", sizeof(struct area), 0, &area_off), 0);
}

static void teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

TestSuite(qsbr, .init = setup, .fini = teardown, .timeout = 60);

/* Child side: attach at its own address, register, go online. */
static int child_attach(struct sfs_seg *s, struct sfs_proc_slot **sl, struct area **a)
{
	uint64_t off;

	if (sfs_seg_attach(job, 0, s))
		return 10;
	if (sfs_proc_register(s, SFS_ROLE_CLIENT, 0, sl))
		return 11;
	if (sfs_seg_region_find(s, "qsbr.test", &off, NULL))
		return 12;
	*a = sfs_seg_ptr(s, off);
	sfs_qsbr_online(s->hdr, *sl);
	return 0;
}

static int wait_flag(int32_t *flag, int ms)
{
	for (int i = 0; i < ms * 10; i++) {
		if (sfs_load_acquire(flag))
			return 1;
		usleep(100);
	}
	return 0;
}

/* Holds a reference until told to go, checking it stays intact. */
static int reader_holds(void *p)
{
	struct sfs_seg s;
	struct sfs_proc_slot *sl;
	struct area *a;
	int rc = child_attach(&s, &sl, &a);
	struct obj *o;

	if (rc)
		return rc;
	o = sfs_seg_ptr(&s, sfs_load_acquire(&a->current));
	if (o->value != 1)
		return 13;
	sfs_store_release(&a->holding, 1);
	while (!sfs_load_acquire(&a->go))
		if (o->value == POISON)
			return 14;	/* reclaimed under our feet */
	sfs_qsbr_quiescent(s.hdr, sl);
	sfs_qsbr_offline(sl);
	sfs_proc_unregister(sl);
	return 0;
}

Test(qsbr, object_not_reclaimed_while_another_process_holds_it)
{
	struct area *a = sfs_seg_ptr(&seg, area_off);
	uint64_t token;
	pid_t pid;

	a->objs[0].value = 1;
	sfs_store_release(&a->current, sfs_seg_off(&seg, &a->objs[0]));
	pid = th_fork(reader_holds, NULL);
	cr_assert(wait_flag(&a->holding, 10000), "reader took its reference");

	/* Unpublish, then wait for a grace period that must not end yet. */
	a->objs[1].value = 2;
	sfs_store_release(&a->current, sfs_seg_off(&seg, &a->objs[1]));
	token = sfs_qsbr_start(seg.hdr);
	for (int i = 0; i < 50; i++) {
		cr_assert_eq(sfs_qsbr_check(&seg, NULL, token, 0), 0, "reader still holds obj 0");
		usleep(2000);
	}
	cr_assert_eq(sfs_qsbr_check(&seg, NULL, token, 20 * 1000000ull), SFS_ETIMEDOUT);
	cr_assert(strstr(sfs_last_error(), "blocked by slot"), "%s", sfs_last_error());
	sfs_store_release(&a->go, 1);
	cr_assert_eq(sfs_qsbr_check(&seg, NULL, token, 10000 * 1000000ull), 1);
	a->objs[0].value = POISON;	/* reclaim */
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
}

static int reader_sleeps_online(void *p)
{
	struct sfs_seg s;
	struct sfs_proc_slot *sl;
	struct area *a;
	int rc = child_attach(&s, &sl, &a);

	if (rc)
		return rc;
	sfs_store_release(&a->holding, 1);
	for (;;)
		pause();	/* online forever, until killed */
}

Test(qsbr, killed_reader_does_not_block)
{
	struct area *a = sfs_seg_ptr(&seg, area_off);
	pid_t pid = th_fork(reader_sleeps_online, NULL);
	uint64_t t0;

	cr_assert(wait_flag(&a->holding, 10000));
	cr_assert_eq(sfs_qsbr_check(&seg, NULL, sfs_qsbr_start(seg.hdr), 0), 0,
		     "a live online reader blocks");
	kill(pid, SIGKILL);
	/* Not reaped yet: a zombie must not block either. */
	t0 = sfs_now_ns();
	cr_assert_eq(sfs_qsbr_synchronize(&seg, NULL, 5000 * 1000000ull), 0, "%s",
		     sfs_last_error());
	cr_assert_lt(sfs_now_ns() - t0, 2000 * 1000000ull);
	th_wait(pid, 5000);
	cr_assert_eq(sfs_qsbr_synchronize(&seg, NULL, 5000 * 1000000ull), 0);
}

Test(qsbr, stopped_reader_blocks_offline_reader_does_not)
{
	struct area *a = sfs_seg_ptr(&seg, area_off);
	struct sfs_proc_slot *mine;
	pid_t pid = th_fork(reader_sleeps_online, NULL);

	cr_assert(wait_flag(&a->holding, 10000));
	kill(pid, SIGSTOP);	/* alive, stuck: must block, and be named */
	cr_assert_eq(sfs_qsbr_synchronize(&seg, NULL, 50 * 1000000ull), SFS_ETIMEDOUT);
	cr_assert(strstr(sfs_last_error(), "pid"), "%s", sfs_last_error());
	kill(pid, SIGKILL);
	th_wait(pid, 5000);

	/* This process registered but offline: no grace period waits on it. */
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_CLIENT, 0, &mine), 0);
	sfs_qsbr_online(seg.hdr, mine);
	sfs_qsbr_offline(mine);
	cr_assert_eq(sfs_qsbr_synchronize(&seg, NULL, 1000 * 1000000ull), 0);
	/* Online, it would block anyone else's grace period; its own
	 * synchronize skips its slot (updaters hold no references). */
	sfs_qsbr_online(seg.hdr, mine);
	cr_assert_eq(sfs_qsbr_check(&seg, NULL, sfs_qsbr_start(seg.hdr), 0), 0);
	cr_assert_eq(sfs_qsbr_synchronize(&seg, mine, 1000 * 1000000ull), 0);
	sfs_proc_unregister(mine);
}

/* ---- stress: readers in other processes vs an updater that reclaims ---- */

#define STRESS_READERS 3
#define STRESS_UPDATES (20000u * (unsigned)th_soak())

/* Reads the published object repeatedly between quiescent points; any
 * poisoned read is a use-after-free the grace periods should have prevented. */
static int stress_reader(void *p)
{
	struct sfs_seg s;
	struct sfs_proc_slot *sl;
	struct area *a;
	int rc = child_attach(&s, &sl, &a);
	uint64_t last = 0;

	if (rc)
		return rc;
	uatomic_add(&a->holding, 1);
	while (!sfs_load_acquire(&a->go)) {
		struct obj *held[4];

		/* A read-side section: take several references ... */
		for (int k = 0; k < 4; k++) {
			held[k] = sfs_seg_ptr(&s, sfs_load_acquire(&a->current));
			if (held[k]->value == POISON)
				return 20;
			for (int spin = 0; spin < 50; spin++)
				caa_cpu_relax();
		}
		/* ... all still intact until the quiescent point. */
		for (int k = 0; k < 4; k++) {
			uint64_t v = held[k]->value;

			if (v == POISON)
				return 21;
			if (v < last)
				return 22;	/* publication went backwards */
			last = v;
		}
		sfs_qsbr_quiescent(s.hdr, sl);
		if ((last & 255) == 0) {	/* sometimes go offline for a while */
			sfs_qsbr_offline(sl);
			caa_cpu_relax();
			sfs_qsbr_online(s.hdr, sl);
		}
	}
	sfs_qsbr_offline(sl);
	sfs_proc_unregister(sl);
	return 0;
}

static void poison(void *ctx, uint64_t off)
{
	struct sfs_seg *s = ctx;
	struct obj *o = sfs_seg_ptr(s, off);

	o->value = POISON;
}

Test(qsbr, stress_readers_never_see_reclaimed_objects)
{
	struct area *a = sfs_seg_ptr(&seg, area_off);
	struct sfs_qsbr_defer dq;
	pid_t pids[STRESS_READERS];
	uint64_t freelist[NOBJ];
	unsigned nfree = 0, reclaimed = 0;

	cr_assert_eq(sfs_qsbr_defer_init(&dq, &seg, NULL, 32, poison, &seg), 0);
	a->objs[0].value = 1;
	sfs_store_release(&a->current, sfs_seg_off(&seg, &a->objs[0]));
	for (int i = 1; i < NOBJ; i++)
		freelist[nfree++] = sfs_seg_off(&seg, &a->objs[i]);
	for (int i = 0; i < STRESS_READERS; i++)
		pids[i] = th_fork(stress_reader, NULL);
	cr_assert(wait_flag(&a->holding, 10000));
	while (sfs_load_acquire(&a->holding) < STRESS_READERS)
		usleep(100);

	for (uint64_t seq = 2; seq < STRESS_UPDATES; seq++) {
		uint64_t old = sfs_load_relaxed(&a->current), off;
		struct obj *o;

		/* Recycle objects only after their grace period passed: the
		 * poison callback ran, then they may be reused. */
		while (nfree == 0) {
			unsigned n0 = sfs_qsbr_pending(&dq);
			unsigned got = sfs_qsbr_reclaim(&dq, 8);

			cr_assert_leq(got, n0);
			for (unsigned k = 0; k < got; k++) {
				/* The poisoned ones are the oldest queued: find them. */
				for (int i = 0; i < NOBJ; i++) {
					uint64_t oo = sfs_seg_off(&seg, &a->objs[i]);
					int listed = 0;

					if (a->objs[i].value != POISON)
						continue;
					for (unsigned f = 0; f < nfree; f++)
						listed |= freelist[f] == oo;
					if (!listed) {
						freelist[nfree++] = oo;
						break;
					}
				}
			}
			reclaimed += got;
			if (!got)
				caa_cpu_relax();
		}
		off = freelist[--nfree];
		o = sfs_seg_ptr(&seg, off);
		o->value = seq;
		sfs_store_release(&a->current, off);
		cr_assert_eq(sfs_qsbr_defer(&dq, old, 10000 * 1000000ull), 0, "%s", sfs_last_error());
	}
	sfs_store_release(&a->go, 1);
	for (int i = 0; i < STRESS_READERS; i++)
		cr_assert_eq(th_exit_code(th_wait(pids[i], 20000)), 0, "reader %d", i);
	cr_assert_gt(reclaimed, STRESS_UPDATES / 2, "reclamation made progress");
	sfs_qsbr_defer_fini(&dq);
}
