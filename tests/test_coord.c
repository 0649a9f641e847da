/*
 * test_coord.c — the checkpointer's coordination (checkpointer/coord.h)
 * driven step by step over the protocol region, with the workers played
 * through the public task API and their "snapshots" staged by hand: a
 * checkpoint completes only when every worker has sealed and staged it;
 * the workers' bytes land in _metadata; a worker that finished cleanly is
 * carried (its files and bytes from the newest checkpoint) while the other
 * goes on; an end whose last seal is in no checkpoint aborts the one in
 * flight and stops them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpointer/ckstore.h"
#include "checkpointer/coord.h"
#include "common/clock.h"
#include "common/fs.h"
#include "helpers.h"
#include "shm/ckpt.h"
#include "shm/segment.h"
#include "store/target.h"

struct fx {
	char job[64], data[PATH_MAX];
	struct sfs_seg seg;
	struct sfs_ckpt *ck;
	sfs_handle_t *h;
	sfs_task_t *t[2];
	struct ck_coord c;
};

static void setup(struct fx *f)
{
	th_job(f->job, sizeof(f->job), "coord");
	snprintf(f->data, sizeof(f->data), "/tmp/sfs-%s", f->job);
	cr_assert_eq(sfs_mkdirs(f->data, 0700), 0);
	cr_assert_eq(sfs_seg_create(f->job, 0, 4u << 20, 1, &f->seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_ckpt_create(&f->seg, 2, &f->ck), 0);
	f->ck->ck_interval_ms = 1;
	f->ck->ck_max_parallelism = 128;
	snprintf(f->ck->ck_data_dir, sizeof(f->ck->ck_data_dir), "%.200s", f->data);
	snprintf(f->ck->ck_config, sizeof(f->ck->ck_config), "exec=test backend=toy");
	cr_assert_eq(sfs_attach(f->job, 0, 0, &f->h), 0);
	cr_assert_eq(sfs__ck_coord_open(&f->c, &f->seg, f->job), 0, "%s", sfs_last_error());
}

static void teardown(struct fx *f)
{
	sfs__ck_coord_close(&f->c);
	for (int i = 0; i < 2; i++)
		if (f->t[i])
			sfs_task_close(f->t[i]);
	sfs_detach(f->h);
	sfs_seg_detach(&f->seg);
	sfs_seg_destroy(f->job, 0);
	sfs_rmtree(f->data);
}

/* Steps until nothing happens (at most @n rounds, 2 ms apart). */
static void steps(struct fx *f, int n)
{
	uint64_t poll;

	for (int i = 0; i < n; i++) {
		usleep(2000);
		cr_assert_geq(sfs__ck_coord_step(&f->c, sfs_now_ns(), &poll), 0, "%s", sfs_last_error());
	}
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	cr_assert_not_null(fp = fopen(p, "w"), "%s", p);
	fputs(text, fp);
	cr_assert_eq(fclose(fp), 0);
}

/* Stage one shared and one private file of worker @w for @id, as the
 * compactor would, and say so. */
static void stage(struct fx *f, uint32_t w, uint64_t id, const char *bytes)
{
	char dir[PATH_MAX], sh[PATH_MAX + 16], name[32];

	cr_assert_eq(sfs_task_stage_dir(f->t[w], id, dir, sizeof(dir)), 0);
	snprintf(sh, sizeof(sh), "%s/%s", dir, SFS_STAGE_SHARED);
	cr_assert_eq(sfs_mkdirs(sh, 0700), 0);
	snprintf(name, sizeof(name), "d%llu.dat", (unsigned long long)id);
	put(sh, name, "immutable data");
	put(dir, "MANIFEST", bytes);
	f->ck->ck_w[w].cw_snap_version = id * 10 + w;
	sfs_store_release(&f->ck->ck_w[w].cw_snap_barrier, id);
}

/* Worker @w seals @id with @bytes; its state is staged. */
static void seal_and_stage(struct fx *f, uint32_t w, uint64_t id, const char *bytes)
{
	cr_assert_eq(sfs_task_sealed(f->t[w], id, bytes, strlen(bytes)), 0, "%s", sfs_last_error());
	stage(f, w, id, bytes);
}

static void meta(struct fx *f, uint64_t id, struct ck_meta *m)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/checkpoints/chk-%llu", f->data, (unsigned long long)id);
	cr_assert_eq(sfs__ck_read(p, f->job, 1, m), 0, "%s", sfs_last_error());
}

static int has_file(const struct ck_meta *m, uint32_t w, const char *local)
{
	for (uint32_t i = 0; i < m->nfiles; i++)
		if (m->files[i].worker == w && !strcmp(m->files[i].local, local))
			return 1;
	return 0;
}

static const struct ck_source *source_of(const struct ck_meta *m, uint32_t w)
{
	for (uint32_t i = 0; i < m->nsources; i++)
		if (m->sources[i].worker == w)
			return &m->sources[i];
	return NULL;
}

Test(coord, completes_when_all_sealed_and_staged_and_carries_a_finished_worker, .timeout = 60)
{
	const struct ck_source *src;
	struct ck_meta m;
	struct fx f = { 0 };

	setup(&f);
	/* nothing is requested before every worker runs */
	steps(&f, 3);
	cr_assert_eq(f.ck->ck_barrier_req, 0);
	cr_assert_eq(sfs_task_open(f.h, 0, &f.t[0]), 0);
	cr_assert_eq(sfs_task_open(f.h, 1, &f.t[1]), 0);
	steps(&f, 2);
	cr_assert_eq(sfs_task_requested(f.t[0]), 1);

	/* checkpoint 1: sealed and staged by both, then complete */
	seal_and_stage(&f, 0, 1, "pos=100");
	steps(&f, 3);
	cr_assert_eq(sfs_task_completed(f.t[0]), 0, "one worker is not a checkpoint");
	seal_and_stage(&f, 1, 1, "pos=200");
	steps(&f, 2);
	cr_assert_eq(sfs_task_completed(f.t[0]), 1);
	meta(&f, 1, &m);
	cr_assert_not_null(src = source_of(&m, 1));
	cr_assert_eq(src->len, 7);
	cr_assert_eq(memcmp(src->bytes, "pos=200", 7), 0);
	cr_assert(strstr(m.config, "exec=test backend=toy states=") == m.config, "%s", m.config);
	sfs__ck_meta_free(&m);

	/* worker 1 finishes cleanly (its last seal is complete): carried */
	cr_assert_eq(sfs_task_finish(f.t[1]), 0);
	cr_assert_eq(f.ck->ck_w[1].cw_phase, SFS_CKW_FINISHED);
	steps(&f, 2);
	cr_assert_eq(sfs_task_requested(f.t[0]), 2);
	seal_and_stage(&f, 0, 2, "pos=300");
	steps(&f, 2);
	cr_assert_eq(sfs_task_completed(f.t[0]), 2, "a finished worker holds up no checkpoint");
	meta(&f, 2, &m);
	cr_assert(has_file(&m, 1, "d1.dat") && has_file(&m, 1, "MANIFEST"),
		  "worker 1's files of checkpoint 1 ride in checkpoint 2");
	cr_assert(!has_file(&m, 1, "d2.dat"));
	cr_assert_not_null(src = source_of(&m, 1));
	cr_assert_eq(memcmp(src->bytes, "pos=200", 7), 0, "and its bytes");
	cr_assert_not_null(src = source_of(&m, 0));
	cr_assert_eq(memcmp(src->bytes, "pos=300", 7), 0);
	for (uint32_t i = 0; i < m.ntables; i++)
		if (m.tables[i].worker == 1)
			cr_assert_eq(m.tables[i].version, 11);
	sfs__ck_meta_free(&m);

	/* worker 0 seals checkpoint 3 and ends before it completes (ENDED):
	 * 3 completes once staged, and none is requested after it */
	steps(&f, 2);
	cr_assert_eq(sfs_task_requested(f.t[0]), 3);
	cr_assert_eq(sfs_task_sealed(f.t[0], 3, "pos=400", 7), 0);
	cr_assert_eq(sfs_task_finish(f.t[0]), 0);
	cr_assert_eq(f.ck->ck_w[0].cw_phase, SFS_CKW_ENDED);
	steps(&f, 2);
	cr_assert_eq(sfs_task_completed(f.t[0]), 2, "sealed, not staged yet");
	stage(&f, 0, 3, "pos=400");
	steps(&f, 3);
	cr_assert_eq(sfs_task_completed(f.t[0]), 3);
	steps(&f, 3);
	cr_assert_eq(sfs_task_requested(f.t[0]), 3, "no checkpoint after an early end");
	cr_assert_eq(f.ck->ck_aborted, 0);
	teardown(&f);
}

/* A worker that ends with nothing sealed: the checkpoint in flight cannot
 * have its state, so it is aborted, and no other is requested. */
Test(coord, an_end_with_no_state_in_a_checkpoint_aborts_the_one_in_flight, .timeout = 60)
{
	struct fx f = { 0 };

	setup(&f);
	cr_assert_eq(sfs_task_open(f.h, 0, &f.t[0]), 0);
	cr_assert_eq(sfs_task_open(f.h, 1, &f.t[1]), 0);
	steps(&f, 2);
	cr_assert_eq(sfs_task_requested(f.t[0]), 1);
	seal_and_stage(&f, 0, 1, "a");
	cr_assert_eq(sfs_task_finish(f.t[1]), 0);
	cr_assert_eq(f.ck->ck_w[1].cw_phase, SFS_CKW_ENDED);
	steps(&f, 4);
	cr_assert_eq(f.ck->ck_aborted, 1);
	cr_assert_eq(sfs_task_completed(f.t[0]), 0);
	cr_assert_eq(sfs_task_requested(f.t[0]), 1);
	teardown(&f);
}

/* A rollback in place (shm/ckpt.h, step a): the checkpoint in flight is
 * abandoned with its stage, the answer names the newest completed one, and
 * nothing is requested until every worker runs again — then above every
 * id used (the abandoned one is never reused). */
Test(coord, a_rollback_abandons_the_checkpoint_in_flight_and_names_the_last_complete, .timeout = 60)
{
	char dir[PATH_MAX];
	struct stat st;
	struct fx f = { 0 };

	setup(&f);
	cr_assert_eq(sfs_task_open(f.h, 0, &f.t[0]), 0);
	cr_assert_eq(sfs_task_open(f.h, 1, &f.t[1]), 0);
	steps(&f, 2);
	seal_and_stage(&f, 0, 1, "a1");
	seal_and_stage(&f, 1, 1, "b1");
	steps(&f, 3);
	cr_assert_eq(sfs_task_completed(f.t[0]), 1);
	cr_assert_eq(sfs_task_requested(f.t[0]), 2);
	seal_and_stage(&f, 0, 2, "a2");
	cr_assert_eq(sfs_task_stage_dir(f.t[0], 2, dir, sizeof(dir)), 0);
	cr_assert_eq(stat(dir, &st), 0);

	/* the supervisor: workers gone, phases back to STARTING, rollback 1 */
	for (int w = 0; w < 2; w++) {
		sfs_task_close(f.t[w]);
		f.t[w] = NULL;
		sfs_store_release(&f.ck->ck_w[w].cw_phase, SFS_CKW_STARTING);
	}
	sfs_store_release(&f.ck->ck_rb_req, 1);
	steps(&f, 1);
	cr_assert_eq(f.ck->ck_rb_ack, 1);
	cr_assert_eq(f.ck->ck_rb_to, 1, "the newest completed checkpoint");
	cr_assert_eq(f.ck->ck_aborted, 1);
	cr_assert_neq(stat(dir, &st), 0, "the abandoned checkpoint's stage is gone");
	steps(&f, 3);
	cr_assert_eq(f.ck->ck_done, 1);
	cr_assert_eq(f.ck->ck_barrier_req, 2, "nothing requested while the workers start");

	/* the supervisor's start words; the workers run again */
	f.ck->ck_first_barrier = 2;
	sfs_store_release(&f.ck->ck_barrier_req, 2);
	cr_assert_eq(sfs_task_open(f.h, 0, &f.t[0]), 0);
	cr_assert_eq(sfs_task_open(f.h, 1, &f.t[1]), 0);
	usleep(3000);
	steps(&f, 2);
	cr_assert_eq(sfs_task_requested(f.t[0]), 3, "the abandoned id 2 is not reused");
	seal_and_stage(&f, 0, 3, "a3");
	seal_and_stage(&f, 1, 3, "b3");
	steps(&f, 3);
	cr_assert_eq(sfs_task_completed(f.t[0]), 3);
	/* a second rollback names checkpoint 3 */
	sfs_store_release(&f.ck->ck_rb_req, 2);
	steps(&f, 1);
	cr_assert_eq(f.ck->ck_rb_ack, 2);
	cr_assert_eq(f.ck->ck_rb_to, 3);
	teardown(&f);
}

/* The one formatter of a stage directory's path refuses a buffer it does not
 * fit (it was snprintf'd unchecked in four places before) and says which. */
Test(coord, a_stage_directory_that_does_not_fit_is_refused_by_name, .timeout = 60)
{
	char dir[PATH_MAX], small[8];
	struct fx f = { 0 };

	setup(&f);
	cr_assert_eq(sfs_ckpt_stage_dir(f.ck, 1, 7, dir, sizeof(dir)), 0);
	cr_assert(strstr(dir, "/stage/w1/b7") && !strcmp(strstr(dir, "/stage/w1/b7"), "/stage/w1/b7"),
		  "%s", dir);
	cr_assert_eq(sfs_ckpt_stage_dir(f.ck, 1, 7, small, sizeof(small)), -ENAMETOOLONG);
	cr_assert(strstr(sfs_last_error(), "stage directory of worker 1, barrier 7"), "%s",
		  sfs_last_error());
	teardown(&f);
}
