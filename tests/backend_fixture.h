/*
 * backend_fixture.h — the fixture of tests that run one body on every state
 * backend through the ops table (runtime/backend.h): a segment and a data
 * directory per test, a backend handle and, for the memory backend, an
 * in-process compactor that flushes on demand.  A file may add fields to
 * struct fx by defining FX_EXTRA before including this.
 */
#ifndef SFS_TESTS_BACKEND_FIXTURE_H
#define SFS_TESTS_BACKEND_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baseline/rocksdb_direct.h"
#include "runtime/backend.h"

/* state_helpers.h brings more helpers than a backend test needs. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "tests/state_helpers.h"
#pragma GCC diagnostic pop

/* The memory backend takes sfs's default buffers (4 x 16 MiB + 8 MiB cache)
 * and the in-process compactor a 16 MiB store: room for both. */
#define SEG_MB 128

static struct sfs_seg seg;
static char dir[PATH_MAX];

static void fx_setup(const char *tag)
{
	const char *tmp = getenv("TMPDIR");

	th_job(job, sizeof(job), tag);
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
	snprintf(dir, sizeof(dir), "%s/sfs-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
	cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
}

static int fx_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void fx_teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	if (dir[0])
		nftw(dir, fx_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct fx {
	const struct rt_backend_ops *ops;
	struct rt_backend *b;
	int mem;              /* memory: a compactor (in this process) */
	struct inproc p;
	uint64_t barrier;
#ifdef FX_EXTRA
	FX_EXTRA
#endif
};

/* Open backend @name as worker @worker of @workers; the open's code. */
static int fx_open_backend(struct fx *f, const char *name, uint32_t worker, uint32_t workers)
{
	struct rt_backend_cfg cfg = { .job = job, .node = 0, .worker = worker, .workers = workers,
				      .max_parallelism = 0, .data_dir = dir };
	int rc;

	memset(f, 0, sizeof(*f));
	/* as the binaries do (worker/main.c): the baseline lives above the
	 * runtime, which finds it by name once registered */
	cr_assert_eq(rt_backend_register(&rt_backend_rocksdb_direct), 0);
	f->ops = rt_backend_find(name);
	cr_assert_not_null(f->ops, "backend %s", name);
	rc = f->ops->open(&cfg, &f->b);
	f->mem = rc == 0 && strcmp(name, "memory") == 0;
	if (f->mem)
		inproc_start(&f->p);
	return rc;
}

/* Memory: flush every sealed buffer, so the next barrier finds a free one.
 * A quiescent point (through the ops table) either way. */
static void fx_drain(struct fx *f)
{
	uint64_t deadline = sfs_now_ns() + 10000000000ull;

	if (!f->mem) {
		f->ops->quiescent(f->b);
		return;
	}
	while (sfs_now_ns() < deadline) {
		int pending = 0, rc;

		f->ops->quiescent(f->b);
		rc = sfs_flusher_step(&f->p.f, 1000, &pending);
		cr_assert_geq(rc, 0, "%s", sfs_last_error());
		if (rc == 0 && !pending)
			return;
		if (rc == 0)
			usleep(200);
	}
	cr_assert_fail("flusher never went idle");
}

/* A barrier the memory backend never back-pressures on. */
static void fx_barrier_only(struct fx *f)
{
	fx_drain(f);
	cr_assert_eq(f->ops->barrier(f->b, ++f->barrier), 0, "%s", sfs_last_error());
}

static void fx_close_backend(struct fx *f)
{
	if (f->mem)
		inproc_stop(&f->p);
	f->ops->close(f->b);
}

#endif
