/*
 * test_merge.c — user merge operators (common/merge.c, sfs_merge_define):
 * the rules of a definition; a user operator folded in worker buffer
 * cells, across sealed buffers, by the compactor into the memory, table
 * and rocksdb targets and by reads over the flushed base, against a
 * reference fold at every step; processes that lack the operator, or
 * define another under its index, refused where they register or flush
 * it (and a checkpoint's registry refused by a restore without it); the
 * `--merge-lib` plugin loaded by path (a bad path refused by name), and
 * the real compactor binary flushing a plugin's operator.
 *
 * Forked children report through their exit code only (helpers.h).  Each
 * test is its own process: what it defines does not leak into the next.
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>

#include "checkpointer/coord.h"
#include "common/err.h"
#include "common/merge.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "shm/child.h"
#include "tests/helpers.h"
#include "tests/state_helpers.h"
#include "worker/state.h"

#define SEG_MB 64
#define OP_BITOR 16
#define OP_MAXABS 17           /* tests/merge_plugin.c */
#define NKEYS 16

static struct sfs_seg seg;
static char dir[128];

static void setup(void)
{
	th_job(job, sizeof(job), "merge");
	cr_assert_eq(sfs_seg_create(job, 0, (size_t)SEG_MB << 20, 1, &seg), 0, "%s",
		     sfs_last_error());
	snprintf(dir, sizeof(dir), "/tmp/sfs-merge-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[sizeof(dir) + 16];

	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

TestSuite(merge, .init = setup, .fini = teardown, .timeout = 120);

/* Associative and commutative, and unlike add: a bit set twice stays one. */
static int64_t bitor(int64_t acc, int64_t delta)
{
	return (int64_t)((uint64_t)acc | (uint64_t)delta);
}

static int64_t other(int64_t acc, int64_t delta)
{
	return acc ^ delta;
}

/* The plugin beside this binary (the Makefile builds it there). */
static const char *plugin_path(void)
{
	static char path[PATH_MAX];
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	cr_assert_gt(n, 0);
	self[n] = '\0';
	snprintf(path, sizeof(path), "%s/merge_plugin.so", dirname(self));
	return path;
}

/* What the supervisor does for --backend @backend (NULL: memory). */
static void use_target(const char *backend)
{
	if (!backend)
		return;
	snprintf(seg.hdr->sh_backend, sizeof(seg.hdr->sh_backend), "%s", backend);
	snprintf(seg.hdr->sh_data_dir, sizeof(seg.hdr->sh_data_dir), "%s/store", dir);
}

/* sfs_merge_fold (public) folds as the state layer does: built-ins, and a
 * user operator defined in this process. */
static int64_t fold_or(int64_t a, int64_t b)
{
	return a | b;
}

Test(merge, fold_by_index)
{
	cr_assert_eq(sfs_merge_fold(SFS_MERGE_ADD, 40, 2), 42);
	cr_assert_eq(sfs_merge_fold(SFS_MERGE_ADD, INT64_MAX, 1), INT64_MIN, "add wraps");
	cr_assert_eq(sfs_merge_fold(SFS_MERGE_MAX, -3, 7), 7);
	cr_assert_eq(sfs_merge_fold(SFS_MERGE_MIN, -3, 7), -3);
	cr_assert_eq(sfs_merge_define(SFS_MERGE_USER + 9, "bitor", fold_or), 0, "%s",
		     sfs_last_error());
	cr_assert_eq(sfs_merge_fold(SFS_MERGE_USER + 9, 0x10, 0x01), 0x11);
}

Test(merge, define_rules)
{
	cr_assert_eq(sfs_merge_define(SFS_MERGE_ADD, "add2", bitor), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(SFS_MERGE_NOPS, "x", bitor), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(SFS_MERGE_USER - 1, "x", bitor), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(SFS_MERGE_MAX_OPS, "x", bitor), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "out of range"), "%s", sfs_last_error());
	cr_assert_eq(sfs_merge_define(OP_BITOR, "", bitor), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(OP_BITOR, NULL, bitor), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "a.b", bitor), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "0123456789012345678901234567890123", bitor),
		     SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", NULL), SFS_EUSAGE);
	cr_assert_null(sfs_merge_name(OP_BITOR), "nothing refused was defined");

	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", bitor), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", bitor), 0, "idempotent");
	cr_assert_eq(sfs_merge_define(OP_BITOR, "xor", other), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", other), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "another function"), "%s", sfs_last_error());
	cr_assert_eq(sfs_merge_define(OP_BITOR + 1, "bitor", bitor), SFS_EUSAGE,
		     "one index a name");
	cr_assert_str_eq(sfs_merge_name(OP_BITOR), "bitor");
	cr_assert_str_eq(sfs_merge_name(SFS_MERGE_MAX), "max");
	cr_assert(sfs_merge_valid(OP_BITOR) && !sfs_merge_valid(OP_BITOR + 1) &&
		  !sfs_merge_valid(SFS_MERGE_NOPS) && !sfs_merge_valid(SFS_MERGE_MAX_OPS));
	cr_assert_eq(sfs_merge_i64(OP_BITOR, 5, 3), 7);
	cr_assert_eq(sfs_merge_i64(SFS_MERGE_ADD, 5, 3), 8, "built-ins unchanged");

	cr_assert_eq(sfs_merge_check(OP_BITOR, "bitor", "s"), 0);
	cr_assert_eq(sfs_merge_check(OP_BITOR, "xor", "s"), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "'xor'") && strstr(sfs_last_error(), "'bitor'"),
		  "%s", sfs_last_error());
	cr_assert_eq(sfs_merge_check(OP_BITOR + 1, "nope", "s"), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "17 'nope' is not defined"), "%s", sfs_last_error());
}

Test(merge, register_refuses_an_operator_not_defined_here)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t st;

	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_merge(c, "bits", OP_BITOR, &st), SFS_EUSAGE);
	cr_assert_eq(sfs_state_register_merge(c, "bits", SFS_MERGE_NOPS, &st), SFS_EUSAGE);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", bitor), 0);
	cr_assert_eq(sfs_state_register_merge(c, "bits", OP_BITOR, &st), 0, "%s", sfs_last_error());
	cr_assert_str_eq(seg.hdr->sh_states[st].sd_merge_name, "bitor", "the name is recorded");
	cr_assert_eq(sfs_state_register_merge(c, "bits", SFS_MERGE_ADD, &st), SFS_EUSAGE);
	sfs_worker_close(c);
}

/* A user operator through every layer into target @backend: deltas folded
 * in the active buffer's cells, across sealed buffers, by the compactor
 * (one entry at a time, reading between steps) and by reads over the
 * flushed base, compared with a reference fold after every step. */
static void fold_through(const char *backend)
{
	struct sfs_worker_opts o = small_opts();
	int64_t ref[NKEYS] = { 0 };
	int have[NKEYS] = { 0 };
	struct inproc p;
	sfs_ctx_t *c;
	uint32_t st, sum;
	unsigned seed = 7;

	o.stall_timeout_ns = 20000000000ull;	/* a stuck flush fails, never hangs */
	use_target(backend);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", bitor), 0);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_merge(c, "bits", OP_BITOR, &st), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register(c, "sum", SFS_STATE_COUNTER, &sum), 0);
	inproc_start(&p);

	for (int round = 0; round < 6; round++) {
		/* Three sealed buffers wait before the compactor sees any. */
		for (int b = 0; b < 3; b++) {
			for (int i = 0; i < 40; i++) {
				unsigned k = (unsigned)rand_r(&seed) % NKEYS;
				int64_t d = (int64_t)(1ull << (rand_r(&seed) % 64));
				char key[8];

				snprintf(key, sizeof(key), "k%u", k);
				cr_assert_eq(sfs_counter_add(c, st, 0, key, strlen(key), d), 0);
				cr_assert_eq(sfs_counter_add(c, sum, 0, key, strlen(key), 1), 0);
				ref[k] = have[k] ? bitor(ref[k], d) : d;
				have[k] = 1;
			}
			cr_assert_eq(sfs_barrier(c, (uint64_t)(round * 3 + b + 1)), 0);
		}
		for (int step = 0; step < 400; step++) {
			int pending;

			sfs_ctx_quiescent(c);
			cr_assert_geq(sfs_flusher_step(&p.f, 7, &pending), 0, "%s",
				      sfs_last_error());
			for (unsigned k = 0; k < NKEYS; k += 5) {
				char key[8];
				int64_t v;

				snprintf(key, sizeof(key), "k%u", k);
				cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &v),
					     have[k]);
				cr_assert_eq(v, have[k] ? ref[k] : 0, "%s round %d step %d key %u",
					     backend ? backend : "memory", round, step, k);
			}
		}
		inproc_drain(&p, c);	/* a disk target commits (and frees) later */
	}
	for (unsigned k = 0; k < NKEYS; k++) {
		char key[8];
		int64_t v;

		snprintf(key, sizeof(key), "k%u", k);
		cr_assert_eq(sfs_counter_get(c, st, 0, key, strlen(key), &v), have[k]);
		cr_assert_eq(v, have[k] ? ref[k] : 0, "key %u from the flushed base", k);
	}
	inproc_stop(&p);
	sfs_worker_close(c);
}

Test(merge, user_operator_through_buffers_and_the_memory_target)
{
	fold_through(NULL);
}

Test(merge, user_operator_through_the_table_target)
{
	fold_through("table");
}

Test(merge, user_operator_through_the_rocksdb_target, .timeout = 180)
{
	fold_through("rocksdb");
}

/* ---- processes without the operator ----------------------------------------- */

static int gate[2];

/* Forked before the parent defines anything: waits for the parent's state
 * and sealed buffer, then tries to use them with @arg's definition at
 * index 16 (NULL: none).  0 when refused as expected. */
static int lacking(void *arg)
{
	const char *name = arg;
	struct sfs_worker_opts o = small_opts();
	struct sfs_seg s;
	struct sfs_proc_slot *slot;
	struct sfs_flusher f;
	sfs_ctx_t *c;
	uint32_t st;
	int pending, rc;
	char b;

	if (read(gate[0], &b, 1) != 1)
		return 10;
	if (name && sfs_merge_define(OP_BITOR, name, other))
		return 11;
	/* A worker (and so its reads) refuses the state. */
	if (sfs_worker_open(job, 0, 0, &o, &c))
		return 12;
	rc = sfs_state_register_merge(c, "bits", OP_BITOR, &st);
	if (rc != SFS_EUSAGE || !strstr(sfs_last_error(), "'bitor'"))
		return 13;
	sfs_worker_close(c);
	/* A compactor refuses to flush the buffer holding it. */
	if (sfs_seg_attach(job, 0, &s) || sfs_proc_register(&s, SFS_ROLE_COMPACTOR, 0, &slot) ||
	    sfs_flusher_init(&f, &s, slot, 16u << 20))
		return 14;
	for (int i = 0; i < 100 && (rc = sfs_flusher_step(&f, 1000, &pending)) >= 0; i++)
		usleep(1000);
	if (rc != SFS_EUSAGE || !strstr(sfs_last_error(), "merge operator 16"))
		return 15;
	sfs_flusher_fini(&f);
	sfs_proc_unregister(slot);
	sfs_seg_detach(&s);
	return 0;
}

static void refused_in_a_child(const char *name)
{
	struct sfs_worker_opts o = small_opts();
	sfs_ctx_t *c;
	uint32_t st;
	pid_t pid;
	int status;

	cr_assert_eq(pipe(gate), 0);
	pid = th_fork(lacking, (void *)name);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", bitor), 0);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_merge(c, "bits", OP_BITOR, &st), 0);
	cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, 3), 0);
	cr_assert_eq(sfs_barrier(c, 1), 0);
	sfs_worker_close(c);	/* the sealed buffer stays for a compactor */
	cr_assert_eq(write(gate[1], "go", 1), 1);
	status = th_wait(pid, 20000);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
	close(gate[0]);
	close(gate[1]);
}

Test(merge, a_process_without_the_operator_is_refused)
{
	refused_in_a_child(NULL);
}

Test(merge, a_process_with_another_operator_at_the_index_is_refused)
{
	refused_in_a_child("xor");
}

/* A checkpoint's registry carries the operator's index and name; a
 * restore into a process set without it is refused. */

/* Forked before the definition: restores the registry the parent sends. */
static int restore_without(void *arg)
{
	char states[4096];
	struct sfs_seg s2;
	ssize_t n = read(gate[0], states, sizeof(states) - 1);
	int rc;

	if (n <= 0 || sfs_seg_create(arg, 0, 8u << 20, 1, &s2))
		return 10;
	states[n] = '\0';
	rc = sfs__ck_coord_states_restore(&s2, states);
	sfs_seg_detach(&s2);
	sfs_seg_destroy(arg, 0);
	return rc == SFS_EUSAGE && strstr(sfs_last_error(), "'bitor'") ? 0 : 11;
}

Test(merge, checkpoint_registry_carries_the_operator)
{
	struct sfs_worker_opts o = small_opts();
	char buf[4096], job2[64], job3[64];
	const char *ck_states = buf + strlen("states=");
	struct sfs_seg s2;
	sfs_ctx_t *c;
	uint32_t st, mx;
	pid_t pid;
	int status;

	th_job(job2, sizeof(job2), "merge2");
	th_job(job3, sizeof(job3), "merge3");
	cr_assert_eq(pipe(gate), 0);
	pid = th_fork(restore_without, job3);
	cr_assert_eq(sfs_merge_define(OP_BITOR, "bitor", bitor), 0);
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_merge(c, "mx", SFS_MERGE_MAX, &mx), 0);
	cr_assert_eq(sfs_state_register_merge(c, "bits", OP_BITOR, &st), 0);
	cr_assert_eq(sfs__ck_coord_states(&c->seg, buf, sizeof(buf)), 0, "%s", sfs_last_error());
	cr_assert(strstr(buf, ".2.16:bitor.bits"), "%s", buf);
	sfs_worker_close(c);
	cr_assert_eq(write(gate[1], ck_states, strlen(ck_states)), (ssize_t)strlen(ck_states));
	status = th_wait(pid, 10000);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);

	cr_assert_eq(sfs_seg_create(job2, 0, 8u << 20, 1, &s2), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__ck_coord_states_restore(&s2, ck_states), 0, "%s", sfs_last_error());
	cr_assert_eq(s2.hdr->sh_states[st].sd_merge, OP_BITOR);
	cr_assert_str_eq(s2.hdr->sh_states[st].sd_merge_name, "bitor");
	cr_assert_eq(s2.hdr->sh_states[mx].sd_merge, SFS_MERGE_MAX);
	cr_assert_str_eq(s2.hdr->sh_states[mx].sd_merge_name, "");
	sfs_seg_detach(&s2);
	sfs_seg_destroy(job2, 0);
	close(gate[0]);
	close(gate[1]);
}

/* ---- the plugin -------------------------------------------------------------- */

Test(merge, plugin_loaded_by_path)
{
	const char *lib = plugin_path();

	cr_assert_eq(sfs_merge_load("/nonexistent/merge.so"), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "/nonexistent/merge.so"), "%s", sfs_last_error());
	cr_assert_eq(sfs_merge_load("libm.so.6"), SFS_EUSAGE, "no sfs_merge_init");
	cr_assert(strstr(sfs_last_error(), "libm.so.6: no sfs_merge_init"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_merge_load(lib), 0, "%s: %s", lib, sfs_last_error());
	cr_assert_eq(sfs_merge_load(lib), 0, "twice: idempotent");
	cr_assert_str_eq(sfs_merge_name(OP_MAXABS), "maxabs");
	cr_assert_eq(sfs_merge_i64(OP_MAXABS, -5, 3), -5);
	cr_assert_eq(sfs_merge_i64(OP_MAXABS, 5, -5), 5);
	cr_assert_eq(sfs_merge_i64(OP_MAXABS, -5, 5), 5);
}

/* The real compactor: without --merge-lib it stops at the buffer holding
 * the plugin's operator (nothing flushed); with it, it flushes and reads
 * fold over the base as the reference does. */
Test(merge, compactor_binary_takes_the_plugin, .timeout = 60)
{
	struct sfs_worker_opts o = small_opts();
	const char *lib = plugin_path();
	static const int64_t d[] = { 3, -9, 4, 9, -2, 7 };	/* two a buffer */
	sfs_ctx_t *c;
	uint32_t st;
	int64_t v;
	pid_t comp;
	int status;

	cr_assert_eq(sfs_merge_load(lib), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_worker_open(job, 0, 0, &o, &c), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_state_register_merge(c, "ma", OP_MAXABS, &st), 0);
	for (unsigned i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		cr_assert_eq(sfs_counter_add(c, st, 0, "k", 1, d[i]), 0);
		if (i % 2)	/* three sealed + the active: all 4 buffers */
			cr_assert_eq(sfs_barrier(c, i / 2 + 1), 0);
	}
	comp = start_compactor();
	status = th_wait(comp, 20000);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == SFS_CHILD_EXIT_FATAL,
		  "a compactor without the plugin stops, for good: status 0x%x", status);
	cr_assert(!wait_flushed(c, 1, 10), "and flushed nothing");
	comp = start_compactor_lib(lib);
	cr_assert(wait_flushed(c, 3, 20000), "flushed with the plugin");
	cr_assert_eq(sfs_counter_get(c, st, 0, "k", 1, &v), 1);
	cr_assert_eq(v, 9, "maxabs of the deltas: 9 beats -9 on the tie");
	kill(comp, SIGTERM);
	status = th_wait(comp, 10000);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
	sfs_worker_close(c);
}
