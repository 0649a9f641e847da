/*
 * test_child.c — the loop every supervised child runs (shm/child.h):
 * a step that outlasts several beat periods keeps the heartbeat going
 * only by calling sfs_child_progress(), and the call is a no-op outside
 * a child's loop.
 */
#include <criterion/criterion.h>

#include "common/clock.h"
#include "common/err.h"
#include "shm/atomic.h"
#include "shm/child.h"
#include "tests/helpers.h"

#define BEAT_NS (5 * 1000000ull)	/* the children's beat, shortened */

static struct sfs_child child;
static char job[64];
static int progress;	/* the long step calls sfs_child_progress() */
static int beats;	/* heartbeat changes seen during the long step */

static void setup(void)
{
	th_job(job, sizeof(job), "child");
	cr_assert_eq(sfs_seg_create(job, 0, 1u << 20, 1, &child.seg), 0, "%s", sfs_last_error());
	sfs_seg_detach(&child.seg);
	child.job = job;
	child.role = SFS_ROLE_COMPACTOR;
	child.heartbeat_ns = BEAT_NS;
	cr_assert_eq(sfs_child_start(&child), 0, "%s", sfs_last_error());
	sfs_child_stop = 0;
	beats = 0;
}

static void teardown(void)
{
	sfs_child_finish(&child);
	sfs_seg_destroy(job, 0);
}

TestSuite(child, .init = setup, .fini = teardown, .timeout = 30);

/* One step of 10 beat periods (a dump of a large store, say), then stop. */
static int long_step(struct sfs_child *c, unsigned budget)
{
	uint64_t end = sfs_now_ns() + 10 * BEAT_NS;
	uint64_t last = sfs_load_relaxed(&c->slot->ps_heartbeat);

	(void)budget;
	while (sfs_now_ns() < end) {
		uint64_t b;

		if (progress)
			sfs_child_progress();
		b = sfs_load_relaxed(&c->slot->ps_heartbeat);
		beats += b != last;
		last = b;
	}
	sfs_child_stop = 1;
	return 1;
}

Test(child, a_long_step_beats_through_progress)
{
	progress = 1;
	cr_assert_eq(sfs_child_loop(&child, long_step), 0);
	cr_assert_geq(beats, 5, "%d beats in 10 beat periods", beats);
}

Test(child, a_long_step_without_progress_is_silent)
{
	progress = 0;
	cr_assert_eq(sfs_child_loop(&child, long_step), 0);
	cr_assert_eq(beats, 0, "%d beats", beats);
}

Test(child, progress_outside_a_loop_does_nothing)
{
	uint64_t b = sfs_load_relaxed(&child.slot->ps_heartbeat);

	sfs_child_progress();
	cr_assert_eq(sfs_load_relaxed(&child.slot->ps_heartbeat), b);
}
