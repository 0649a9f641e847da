/*
 * test_proc.c — the process table: claiming, recycling dead slots, liveness
 * that survives pid reuse and zombies, and claim races across processes.
 */
#include <criterion/criterion.h>

#include "common/err.h"
#include "common/procinfo.h"
#include "shm/proc.h"
#include "tests/helpers.h"

#define SEG_SIZE (1u << 20)

static struct sfs_seg seg;
static char job[64];

static void setup(void)
{
	th_job(job, sizeof(job), "proc");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &seg), 0, "%s", sfs_last_error());
}

static void teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

TestSuite(proc, .init = setup, .fini = teardown);

Test(proc, register_fields_and_unregister)
{
	struct sfs_proc_slot *sl;

	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_WORKER, 3, &sl), 0);
	cr_assert_eq(sl->ps_pid, getpid());
	cr_assert_eq(sl->ps_role, SFS_ROLE_WORKER);
	cr_assert_eq(sl->ps_index, 3);
	cr_assert_eq(sl->ps_start, sfs_proc_starttime(getpid()));
	cr_assert_eq(sl->ps_qsbr, 0, "a new slot is offline");
	cr_assert(sfs_proc_slot_alive(sl));
	cr_assert_eq(sfs_proc_find(&seg, SFS_ROLE_WORKER, 3), sl);
	cr_assert_null(sfs_proc_find(&seg, SFS_ROLE_WORKER, 4));
	sfs_proc_unregister(sl);
	cr_assert_not(sfs_proc_slot_alive(sl));
	cr_assert_eq(SFS_SLOT_STATE(sl->ps_claim), SFS_SLOT_FREE);
}

Test(proc, liveness_survives_pid_reuse)
{
	struct sfs_proc_slot *sl;

	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_CLIENT, 0, &sl), 0);
	/* Same pid, other start time: another process that reused the pid. */
	sl->ps_start += 1;
	cr_assert_not(sfs_proc_slot_alive(sl));
	cr_assert_not(sfs_proc_alive(getpid(), sfs_proc_starttime(getpid()) + 1));
	cr_assert(sfs_proc_alive(getpid(), sfs_proc_starttime(getpid())));
}

static int exit_now(void *p)
{
	(void)p;
	return 0;
}

Test(proc, zombie_is_dead)
{
	pid_t pid = th_fork(exit_now, NULL);
	uint64_t st = 1;

	/* Not reaped yet: a zombie must read as dead. */
	for (int i = 0; i < 2000 && st; i++) {
		st = sfs_proc_starttime(pid);
		usleep(1000);
	}
	cr_assert_eq(st, 0, "zombie reads as dead");
	th_wait(pid, 5000);
}

static int register_and_die(void *p)
{
	struct sfs_seg s;
	struct sfs_proc_slot *sl;

	if (sfs_seg_attach(p, 0, &s))
		return 10;
	if (sfs_proc_register(&s, SFS_ROLE_WORKER, 9, &sl))
		return 11;
	return 0;	/* dies holding the slot */
}

Test(proc, dead_slots_are_recycled_and_table_fills)
{
	struct sfs_proc_slot *sl;
	pid_t pids[4];
	int live = 0;

	/* Four processes die holding slots 0..3. */
	for (int i = 0; i < 4; i++) {
		pids[i] = th_fork(register_and_die, job);
		cr_assert_eq(th_exit_code(th_wait(pids[i], 10000)), 0);
	}
	cr_assert_eq(SFS_SLOT_STATE(seg.hdr->sh_procs[0].ps_claim), SFS_SLOT_LIVE);
	/* This process can now take every slot: free ones, then dead ones. */
	for (int i = 0; i < SFS_MAX_PROCS; i++) {
		cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_CLIENT, (uint32_t)i, &sl), 0,
			     "slot %d: %s", i, sfs_last_error());
		live++;
	}
	cr_assert_eq(live, SFS_MAX_PROCS);
	cr_assert_eq(sfs_proc_register(&seg, SFS_ROLE_CLIENT, 999, &sl), SFS_EFULL);
	cr_assert(strstr(sfs_last_error(), "process table full"));
	for (int i = 0; i < SFS_MAX_PROCS; i++)
		cr_assert_eq(seg.hdr->sh_procs[i].ps_pid, getpid());
}

/* Claim races: processes register and unregister in a loop; each checks its
 * slot stays its own while it holds it.  A double claim shows up as another
 * pid in a held slot. */
static int churn(void *p)
{
	struct sfs_seg s;

	if (sfs_seg_attach(p, 0, &s))
		return 10;
	for (int i = 0; i < 20000; i++) {
		struct sfs_proc_slot *sl;

		if (sfs_proc_register(&s, SFS_ROLE_CLIENT, (uint32_t)i, &sl))
			return 11;
		for (int k = 0; k < 3; k++)
			if (sl->ps_pid != getpid() || sl->ps_index != (uint32_t)i)
				return 12;
		sfs_proc_unregister(sl);
	}
	return 0;
}

Test(proc, concurrent_claims_never_collide)
{
	pid_t pids[4];

	for (int i = 0; i < 4; i++)
		pids[i] = th_fork(churn, job);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(th_exit_code(th_wait(pids[i], 60000)), 0, "child %d", i);
}
