/*
 * test_output.c — epoch-committed output and source positions
 * (include/sfs_output.h) over the checkpoint region of shm/ckpt.h, driven
 * by hand in place of the checkpointer and the supervisor: commit after
 * completion only, what an open settles after a restore, a rollback in
 * place or a rescale, and a program killed at every output fault point
 * whose committed output is still exactly once.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fault.h"
#include "helpers.h"
#include "shm/ckpt.h"
#include "shm/segment.h"
#include "sfs.h"
#include "sfs_output.h"

struct fx {
	char job[64], dir[256];
	struct sfs_seg seg;
	struct sfs_ckpt *ck;
	sfs_handle_t *h;
};

/* A group of @workers, fresh, ids above 7, every id up to 100 requested
 * (stage checks the id was requested: the tests seal many in a row). */
static void setup(struct fx *f, uint32_t workers)
{
	th_job(f->job, sizeof(f->job), "out");
	snprintf(f->dir, sizeof(f->dir), "/tmp/sfs-test-output-%d-XXXXXX", (int)getpid());
	cr_assert_not_null(mkdtemp(f->dir));
	cr_assert_eq(sfs_seg_create(f->job, 0, 4u << 20, 1, &f->seg), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_ckpt_create(&f->seg, workers, &f->ck), 0, "%s", sfs_last_error());
	f->ck->ck_interval_ms = 100;
	f->ck->ck_max_parallelism = 128;
	f->ck->ck_first_barrier = 7;
	f->ck->ck_barrier_req = 100;
	cr_assert_eq(sfs_attach(f->job, 0, 0, &f->h), 0, "%s", sfs_last_error());
}

static void teardown(struct fx *f)
{
	char cmd[300];

	sfs_detach(f->h);
	sfs_seg_detach(&f->seg);
	sfs_seg_destroy(f->job, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	cr_assert_eq(system(cmd), 0);
}

/* The group starts again from checkpoint @m (0: fresh) with ids above
 * @base, as the supervisor leaves the region for the workers. */
static void restart(struct fx *f, uint64_t m, uint64_t base, uint32_t prev_workers)
{
	f->ck->ck_start = m ? (prev_workers == f->ck->ck_workers ? SFS_START_RESTORED
								  : SFS_START_RESCALED)
			    : SFS_START_FRESH;
	f->ck->ck_restored_id = m;
	f->ck->ck_prev_workers = m ? prev_workers : 0;
	f->ck->ck_first_barrier = base;
	f->ck->ck_done = m;
}

/* Files of @dir named @kind ("committed": no leading dot, else those
 * ending in @kind), sorted, joined by spaces. */
static void names(const char *dir, const char *kind, char *out, size_t len)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	size_t at = 0;

	out[0] = '\0';
	cr_assert_geq(n, 0);
	for (int i = 0; i < n; i++) {
		const char *s = v[i]->d_name;
		size_t l = strlen(s), kl = strlen(kind);
		int take = !strcmp(kind, "committed") ? s[0] != '.'
						      : s[0] == '.' && l > kl && !strcmp(s + l - kl, kind);

		if (take && strcmp(s, ".") && strcmp(s, ".."))
			at += (size_t)snprintf(out + at, len - at, "%s%s", at ? " " : "", s);
		free(v[i]);
	}
	free(v);
}

/* Every committed file's bytes, in name order (epoch, then worker). */
static void committed(const char *dir, char *out, size_t len)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	size_t at = 0;

	out[0] = '\0';
	cr_assert_geq(n, 0);
	for (int i = 0; i < n; i++) {
		char p[512];
		FILE *fp;

		if (v[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, v[i]->d_name);
			cr_assert_not_null(fp = fopen(p, "r"));
			at += fread(out + at, 1, len - 1 - at, fp);
			fclose(fp);
		}
		free(v[i]);
	}
	free(v);
	out[at] = '\0';
}

static void put_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	cr_assert_not_null(fp = fopen(p, "w"));
	fputs(text, fp);
	fclose(fp);
}

static void emit(sfs_output_t *o, uint64_t id)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "epoch %llu\n", (unsigned long long)id);

	cr_assert_eq(sfs_output_write(o, line, (size_t)n), 0, "%s", sfs_last_error());
}

Test(output, commits_only_once_the_checkpoint_completed)
{
	char got[1024];
	sfs_output_t *o;
	sfs_task_t *t;
	uint64_t c = 99;
	struct fx f;

	setup(&f, 1);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_output_open(t, f.dir, "bad/name", NULL, &o), SFS_EUSAGE);
	cr_assert_eq(sfs_output_open(t, f.dir, ".hidden", NULL, &o), SFS_EUSAGE);
	cr_assert_eq(sfs_output_open(t, f.dir, "out", ".csv", &o), 0, "%s", sfs_last_error());
	emit(o, 8);
	names(f.dir, ".open", got, sizeof(got));
	cr_assert_str_eq(got, "", "buffered: no file before 64 KiB or the stage");
	cr_assert_eq(sfs_output_stage(o, 7), SFS_EUSAGE, "not above the base id");
	cr_assert_eq(sfs_output_stage(o, 8), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_output_stage(o, 8), SFS_EUSAGE, "ids go up");
	cr_assert_eq(sfs_output_stage(o, 101), SFS_EUSAGE, "not requested");
	names(f.dir, ".pending", got, sizeof(got));
	cr_assert_str_eq(got, ".out-00000000000000000008-w0.csv.pending");
	/* checkpoint 8 not complete: nothing visible */
	f.ck->ck_done = 7;
	cr_assert_eq(sfs_output_commit(o, &c), 0);
	cr_assert_eq(c, 0);
	names(f.dir, "committed", got, sizeof(got));
	cr_assert_str_eq(got, "");
	/* an empty epoch stages no file */
	cr_assert_eq(sfs_output_stage(o, 9), 0);
	emit(o, 10);
	cr_assert_eq(sfs_output_stage(o, 10), 0);
	f.ck->ck_done = 9;
	cr_assert_eq(sfs_output_commit(o, &c), 0);
	cr_assert_eq(c, 8);
	names(f.dir, "committed", got, sizeof(got));
	cr_assert_str_eq(got, "out-00000000000000000008-w0.csv");
	f.ck->ck_done = 10;
	cr_assert_eq(sfs_output_commit(o, &c), 0);
	cr_assert_eq(c, 10);
	committed(f.dir, got, sizeof(got));
	cr_assert_str_eq(got, "epoch 8\nepoch 10\n");
	names(f.dir, ".pending", got, sizeof(got));
	cr_assert_str_eq(got, "");
	sfs_output_close(o);
	sfs_task_close(t);
	teardown(&f);
}

Test(output, a_large_epoch_goes_through_the_open_file)
{
	static char big[200000], got[300000];
	sfs_output_t *o;
	sfs_task_t *t;
	struct fx f;

	setup(&f, 1);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_output_open(t, f.dir, "big", NULL, &o), 0);
	cr_assert_eq(sfs_output_write(o, "x", 1), 0);
	cr_assert_eq(sfs_output_write(o, big, sizeof(big)), 0);
	names(f.dir, ".open", got, sizeof(got));
	cr_assert_str_eq(got, ".big-w0.open");
	cr_assert_eq(sfs_output_stage(o, 8), 0);
	f.ck->ck_done = 8;
	cr_assert_eq(sfs_output_commit(o, NULL), 0);
	committed(f.dir, got, sizeof(got));
	cr_assert_eq(strlen(got), sizeof(big) + 1);
	cr_assert_eq(memcmp(got + 1, big, sizeof(big)), 0);
	sfs_output_close(o);
	sfs_task_close(t);
	teardown(&f);
}

/* What a crash leaves, settled by the next open: pending <= M committed,
 * pending > M and the open epoch dropped — including an id the new run
 * (a restore from files: ids restart above the newest stored checkpoint)
 * stages again, which must hold the new run's bytes only. */
Test(output, open_after_a_restore_commits_up_to_the_checkpoint_and_drops_the_rest)
{
	char got[1024];
	sfs_output_t *o;
	sfs_task_t *t;
	struct fx f;

	setup(&f, 2);
	put_file(f.dir, ".out-00000000000000000008-w0.pending", "old 8\n");
	put_file(f.dir, ".out-00000000000000000009-w0.pending", "old 9\n");
	put_file(f.dir, ".out-00000000000000000010-w0.pending", "old 10 (not complete)\n");
	put_file(f.dir, ".out-w0.open", "old 11 open\n");
	put_file(f.dir, ".out-00000000000000000010-w1.pending", "worker 1's\n");
	put_file(f.dir, "other-00000000000000000010-w0", "another output's\n");
	restart(&f, 9, 9, 2);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_output_open(t, f.dir, "out", NULL, &o), 0, "%s", sfs_last_error());
	names(f.dir, "committed", got, sizeof(got));
	cr_assert_str_eq(got, "other-00000000000000000010-w0 out-00000000000000000008-w0 "
			      "out-00000000000000000009-w0");
	names(f.dir, ".pending", got, sizeof(got));
	cr_assert_str_eq(got, ".out-00000000000000000010-w1.pending", "worker 1 settles its own");
	names(f.dir, ".open", got, sizeof(got));
	cr_assert_str_eq(got, "");
	/* the new run's epoch 10 */
	emit(o, 10);
	cr_assert_eq(sfs_output_stage(o, 10), 0);
	f.ck->ck_done = 10;
	cr_assert_eq(sfs_output_commit(o, NULL), 0);
	committed(f.dir, got, sizeof(got));
	cr_assert_str_eq(got, "another output's\nold 8\nold 9\nepoch 10\n");
	sfs_output_close(o);
	sfs_task_close(t);
	teardown(&f);
}

/* 3 workers to 2: worker 0 settles old worker 2's files, worker 1 does
 * not; a commit renames only what its process staged. */
Test(output, a_rescale_down_settles_the_old_workers_files_once)
{
	char got[1024];
	sfs_output_t *o0, *o1;
	sfs_task_t *t0, *t1;
	struct fx f;

	setup(&f, 2);
	put_file(f.dir, ".out-00000000000000000005-w2.pending", "w2 5\n");
	put_file(f.dir, ".out-00000000000000000006-w2.pending", "w2 6 (not complete)\n");
	put_file(f.dir, ".out-w2.open", "w2 open\n");
	restart(&f, 5, 6, 3);
	cr_assert_eq(sfs_task_open(f.h, 1, &t1), 0);
	cr_assert_eq(sfs_output_open(t1, f.dir, "out", NULL, &o1), 0);
	names(f.dir, ".pending", got, sizeof(got));
	cr_assert_str_eq(got, ".out-00000000000000000005-w2.pending "
			      ".out-00000000000000000006-w2.pending");
	cr_assert_eq(sfs_task_open(f.h, 0, &t0), 0);
	cr_assert_eq(sfs_output_open(t0, f.dir, "out", NULL, &o0), 0);
	names(f.dir, ".pending", got, sizeof(got));
	cr_assert_str_eq(got, "");
	names(f.dir, ".open", got, sizeof(got));
	cr_assert_str_eq(got, "");
	/* a stray pending file of worker 1 it never staged is not committed */
	put_file(f.dir, ".out-00000000000000000007-w1.pending", "stray\n");
	emit(o1, 8);
	cr_assert_eq(sfs_output_stage(o1, 8), 0);
	f.ck->ck_done = 8;
	cr_assert_eq(sfs_output_commit(o1, NULL), 0);
	committed(f.dir, got, sizeof(got));
	cr_assert_str_eq(got, "w2 5\nepoch 8\n");
	sfs_output_close(o0);
	sfs_output_close(o1);
	sfs_task_close(t0);
	sfs_task_close(t1);
	teardown(&f);
}

Test(output, a_rollback_in_place_must_be_told_and_settles)
{
	char got[1024];
	sfs_output_t *o;
	sfs_task_t *t;
	struct fx f;

	setup(&f, 1);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_output_open(t, f.dir, "out", NULL, &o), 0);
	for (uint64_t id = 8; id <= 10; id++) {
		emit(o, id);
		cr_assert_eq(sfs_output_stage(o, id), 0);
	}
	emit(o, 11);	/* open */
	/* checkpoint 9 completed, but this worker had not committed it when
	 * another died: the group rolls back to 9, ids above 10 */
	restart(&f, 9, 10, 1);
	emit(o, 11);
	cr_assert_eq(sfs_output_stage(o, 11), SFS_EUSAGE);
	cr_assert_not_null(strstr(sfs_last_error(), "sfs_output_rollback"));
	cr_assert_eq(sfs_output_rollback(o), 0, "%s", sfs_last_error());
	emit(o, 11);
	cr_assert_eq(sfs_output_stage(o, 11), 0);
	f.ck->ck_done = 11;
	cr_assert_eq(sfs_output_commit(o, NULL), 0);
	committed(f.dir, got, sizeof(got));
	cr_assert_str_eq(got, "epoch 8\nepoch 9\nepoch 11\n");
	sfs_output_close(o);
	sfs_task_close(t);
	teardown(&f);
}

/*
 * A program killed at each output fault point and started again from the
 * newest complete checkpoint, until it ends: the committed output is every
 * record once.  Its records are 0..RECORDS-1; run k puts 3 + k of them in
 * an epoch, so epochs of different runs hold different records (a wrong
 * commit of a dead run's epoch shows as a duplicate, not hidden by the same
 * name being staged again).  The program plays the checkpointer too: it
 * requests id, stages, saves its position and completes id — a death
 * between the stage and the completion leaves the checkpoint incomplete.
 * A restart is a restore from files (ids restart above the checkpoint: the
 * dead run's staged epoch collides) or, with @in_place, a group that went
 * on (ids above every one requested).
 */
#define RECORDS 40u
#define MAX_ID 4096u

struct prog {
	struct fx *f;
	const char *fault;
	unsigned run;
	uint64_t *pos;	/* shared: pos[id] = records before epoch id+1 */
};

static int run_prog(void *arg)
{
	struct prog *p = arg;
	struct sfs_ckpt *ck = p->f->ck;
	sfs_output_t *o;
	sfs_handle_t *h;
	sfs_task_t *t;
	uint64_t r;
	char line[64];

	if (p->fault && sfs_fault_arm(p->fault))
		return 3;
	if (sfs_attach(p->f->job, 0, 0, &h) || sfs_task_open(h, 0, &t) ||
	    sfs_output_open(t, p->f->dir, "out", NULL, &o))
		return 4;
	r = p->pos[ck->ck_first_barrier];
	for (uint64_t id = ck->ck_first_barrier + 1; r < RECORDS && id < MAX_ID; id++) {
		for (uint64_t e = r + 3 + p->run; r < RECORDS && r < e; r++) {
			int n = snprintf(line, sizeof(line), "record %llu\n", (unsigned long long)r);

			if (sfs_output_write(o, line, (size_t)n))
				return 5;
		}
		__atomic_store_n(&ck->ck_barrier_req, id, __ATOMIC_RELEASE);
		if (sfs_output_stage(o, id))
			return 6;
		p->pos[id] = r;
		__atomic_store_n(&ck->ck_done, id, __ATOMIC_RELEASE);
		if (sfs_output_commit(o, NULL))
			return 7;
	}
	sfs_output_close(o);
	return 0;
}

static void run_with_kills(const char *const *faults, unsigned nfaults, int in_place,
			   unsigned *kills)
{
	char got[4096], want[4096] = "";
	uint64_t *pos = th_map(MAX_ID * sizeof(uint64_t));
	struct fx f;
	size_t at = 0;

	setup(&f, 1);
	f.ck->ck_barrier_req = 7;
	for (uint64_t r = 0; r < RECORDS; r++)
		at += (size_t)snprintf(want + at, sizeof(want) - at, "record %llu\n",
				       (unsigned long long)r);
	for (unsigned i = 0; i <= nfaults; i++) {
		struct prog p = { &f, i < nfaults ? faults[i] : NULL, i, pos };
		int st = th_wait(th_fork(run_prog, &p), 10000);
		uint64_t m = f.ck->ck_done, base = in_place ? f.ck->ck_barrier_req : m;

		if (i < nfaults) {
			cr_assert(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
				  "%s: the program was not killed there (status %d)", faults[i], st);
			++*kills;
		} else {
			cr_assert_eq(th_exit_code(st), 0, "the last run: status %d", st);
		}
		/* the supervisor's restart from the newest complete checkpoint */
		if (!m)
			base = in_place ? base : 7;
		restart(&f, m, base, 1);
		pos[base] = pos[m];
		f.ck->ck_barrier_req = base;
	}
	committed(f.dir, got, sizeof(got));
	cr_assert_str_eq(got, want, "after kills at %s%s (%s)", faults[0],
			 nfaults > 1 ? "..." : "", in_place ? "ids went on" : "ids restarted");
	names(f.dir, ".pending", got, sizeof(got));
	cr_assert_str_eq(got, "", "a pending file left: %s", got);
	munmap(pos, MAX_ID * sizeof(uint64_t));
	teardown(&f);
}

Test(output, killed_at_every_point_the_committed_output_is_exactly_once)
{
	static const char *const plans[][3] = {
		{ "output.staged:1", "output.staged:3", NULL },
		{ "output.commit:1", "output.commit:2", NULL },
		{ "output.committed:2", "output.staged:2", NULL },
		{ "output.staged:4", "output.settle:1", "output.commit:3" },
		{ "output.commit:4", "output.settle:1", NULL },
	};
	unsigned kills = 0, planned = 0;

	for (int in_place = 0; in_place < 2; in_place++)
		for (unsigned i = 0; i < sizeof(plans) / sizeof(plans[0]); i++) {
			unsigned n = 0;

			while (n < 3 && plans[i][n])
				n++;
			planned += n;
			run_with_kills(plans[i], n, in_place, &kills);
		}
	cr_assert_eq(kills, planned, "every planned kill landed at its point");
}

Test(output, positions_are_found_by_split_after_a_rescale)
{
	struct sfs_split_range r[2] = { { 0, 63, 1000 }, { 200, 200, 7 } }, back[4];
	struct sfs_view v;
	uint64_t pos, lo, hi;
	sfs_task_t *t;
	unsigned n;
	struct fx f;

	setup(&f, 2);
	cr_assert_eq(sfs_task_open(f.h, 0, &t), 0);
	cr_assert_eq(sfs_positions_find(t, 3, &pos), -ENOENT, "a fresh start");
	r[0].first = 64;
	cr_assert_eq(sfs_positions_seal(t, 8, r, 1, NULL, 0), SFS_EUSAGE, "first > last");
	r[0].first = 0;
	cr_assert_eq(sfs_positions_seal(t, 8, r, SFS_POSITIONS_MAX + 1, NULL, 0), SFS_EUSAGE);
	cr_assert_eq(sfs_positions_seal(t, 8, r, 2, "clock", 5), 0, "%s", sfs_last_error());
	/* the checkpoint of 3 old workers: worker 0's bytes as sealed, 1's
	 * by hand, 2's not positions */
	restart(&f, 8, 8, 3);
	memcpy(f.ck->ck_prev[0].cp_bytes, f.ck->ck_w[0].cw_bytes, f.ck->ck_w[0].cw_bytes_len);
	f.ck->ck_prev[0].cp_len = f.ck->ck_w[0].cw_bytes_len;
	cr_assert_eq(sfs_positions_find(t, 3, &pos), SFS_ECORRUPT, "old worker 1 sealed none");
	{
		struct sfs_split_range r1 = { 64, 127, 900 };
		unsigned char b[16 + 24] = { 0x53, 0x46, 0x53, 0x50, 1, 0, 1, 0 };

		memcpy(b + 16, &r1, 24);
		memcpy(f.ck->ck_prev[1].cp_bytes, b, sizeof(b));
		f.ck->ck_prev[1].cp_len = sizeof(b);
	}
	memcpy(f.ck->ck_prev[2].cp_bytes, "17", 2);
	f.ck->ck_prev[2].cp_len = 2;
	cr_assert_eq(sfs_positions_find(t, 3, &pos), SFS_ECORRUPT);
	cr_assert_not_null(strstr(sfs_last_error(), "old worker 2"));
	f.ck->ck_prev_workers = 2;
	f.ck->ck_start = SFS_START_RESCALED;
	cr_assert_eq(sfs_positions_find(t, 3, &pos), 0, "%s", sfs_last_error());
	cr_assert_eq(pos, 1000);
	cr_assert_eq(sfs_positions_find(t, 100, &pos), 0);
	cr_assert_eq(pos, 900);
	cr_assert_eq(sfs_positions_find(t, 150, &pos), -ENOENT);
	/* a new worker of key groups 43..85 (3 workers of 128) */
	cr_assert_eq(sfs_positions_span(t, 43, 85, &lo, &hi), 0);
	cr_assert_eq(lo, 900);
	cr_assert_eq(hi, 1000);
	cr_assert_eq(sfs_positions_restored(t, 0, back, 4, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(back[1].first, 200);
	cr_assert_eq(back[1].pos, 7);
	cr_assert_eq(sfs_positions_bytes(t, 0, &v), 0);
	cr_assert_eq(v.len, 5);
	cr_assert_eq(memcmp(v.data, "clock", 5), 0);
	cr_assert_eq(sfs_positions_restored(t, 2, back, 4, &n), SFS_EUSAGE, "only 2 old workers");
	sfs_task_close(t);
	teardown(&f);
}
