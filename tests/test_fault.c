/*
 * test_fault.c — the fault-injection facility (common/fault.h): the
 * grammar, the n-th hit, "n+", counting rules, prefixes, both actions,
 * SFS_FAULT read once (and a bad one ending the process with a message),
 * bad specs refused naming the rule, the hook, and hit counts exact when
 * threads pass the same point.  The points' own tests live with their
 * modules (test_mstore, test_ckstore, test_target_table, ...).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include "common/err.h"
#include "common/fault.h"
#include "tests/helpers.h"

static void setup(void)
{
	unsetenv("SFS_FAULT");
	sfs_fault_reset();
}

TestSuite(fault, .init = setup, .fini = sfs_fault_reset, .timeout = 60);

Test(fault, nothing_armed_costs_one_branch)
{
	cr_assert_eq(sfs_fault("flush.apply"), 0);
	/* SFS_FAULT read (unset): the flag is down, the fast path returns. */
	cr_assert_eq(__atomic_load_n(&sfs__fault_on, __ATOMIC_RELAXED), 0);
	cr_assert_eq(sfs_fault("no.such.point"), 0, "unchecked on the fast path");
	cr_assert_eq(sfs_fault_arm("flush.apply:0"), 0);
	cr_assert_neq(__atomic_load_n(&sfs__fault_on, __ATOMIC_RELAXED), 0);
	sfs_fault_reset();
	cr_assert_eq(sfs_fault("flush.apply"), 0);
	cr_assert_eq(__atomic_load_n(&sfs__fault_on, __ATOMIC_RELAXED), 0);
}

Test(fault, fail_fires_at_the_nth_hit_only)
{
	cr_assert_eq(sfs_fault_arm("flush.apply:3:fail=EIO"), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_fault("flush.apply"), 0);
	cr_assert_eq(sfs_fault("flush.commit"), 0, "another point does not count");
	cr_assert_eq(sfs_fault("flush.apply"), 0);
	cr_assert_eq(sfs_fault("flush.apply"), -EIO);
	cr_assert(strstr(sfs_last_error(), "flush.apply"), "%s", sfs_last_error());
	cr_assert_eq(sfs_fault("flush.apply"), 0);
	cr_assert_eq(sfs_fault_hits("flush.apply"), 4);
	cr_assert_eq(sfs_fault_hits("flush.commit"), 0, "no rule for it");
}

Test(fault, n_plus_fires_from_the_nth_hit_on)
{
	cr_assert_eq(sfs_fault_arm("layout.df.write:2+:fail=ENOSPC"), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_fault("layout.df.write"), 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(sfs_fault("layout.df.write"), -ENOSPC);
	cr_assert_eq(sfs_fault_hits("layout.df.write"), 6);
}

Test(fault, zero_counts_and_never_fires)
{
	cr_assert_eq(sfs_fault_arm("seg.create.size:0,seg.create.open:0:fail=EIO"), 0, "%s",
		     sfs_last_error());
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(sfs_fault("seg.create.size"), 0);
		cr_assert_eq(sfs_fault("seg.create.open"), 0);
	}
	cr_assert_eq(sfs_fault_hits("seg.create.size"), 100);
	cr_assert_eq(sfs_fault_hits("seg.create.open"), 100);
}

Test(fault, a_prefix_counts_every_point_it_names)
{
	cr_assert_eq(sfs_fault_arm("layout.file.*:3:fail=28"), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_fault("layout.file.open"), 0);
	cr_assert_eq(sfs_fault("layout.df.write"), 0, "not under the prefix");
	cr_assert_eq(sfs_fault("layout.file.write"), 0);
	cr_assert_eq(sfs_fault("layout.file.fsync"), -ENOSPC, "errno 28 by number");
	cr_assert_eq(sfs_fault_hits("layout.file.*"), 3);
}

Test(fault, rules_add_up_and_the_first_to_fire_decides)
{
	cr_assert_eq(sfs_fault_arm("layout.file.write:1:fail=EIO"), 0);
	cr_assert_eq(sfs_fault_arm("layout.file.*:1:fail=EROFS"), 0);
	cr_assert_eq(sfs_fault("layout.file.write"), -EIO);
	cr_assert_eq(sfs_fault_hits("layout.file.write"), 1);
	cr_assert_eq(sfs_fault_hits("layout.file.*"), 1, "counted although the other fired");
}

static int kill_child(void *arg)
{
	sfs_fault_reset();
	if (sfs_fault_arm(arg))
		return 10;
	for (int i = 0; i < 5; i++)
		(void)sfs_fault("table.round");
	return 0;
}

static void expect_killed_at_second(const char *spec)
{
	int status = th_wait(th_fork(kill_child, (void *)spec), 10000);

	cr_assert(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "%s: status %d exit %d", spec, status, th_exit_code(status));
}

Test(fault, kill_is_sigkill_at_the_nth_hit)
{
	expect_killed_at_second("table.round:2");
	expect_killed_at_second("table.round:2:kill");
	expect_killed_at_second("table.*:2");
	/* n past the hits: the child lives. */
	cr_assert_eq(th_exit_code(th_wait(th_fork(kill_child, (void *)"table.round:6"), 10000)), 0);
}

/* powerloss: a group of two (this child, leader of its own group, and a
 * grandchild); both hold the write end of @arg's pipe. */
struct pl_arg {
	int wfd;
	char dir[64];
};

static int powerloss_child(void *arg)
{
	struct pl_arg *a = arg;

	if (setpgid(0, 0))
		return 9;
	if (fork() == 0) {
		for (;;)
			pause();	/* only the group kill ends it */
	}
	setenv("SFS_POWERLOSS_DIR", a->dir, 1);
	return kill_child((void *)"table.round:2:powerloss");
}

Test(fault, powerloss_kills_the_whole_group_and_marks_the_directory)
{
	struct pl_arg a;
	int p[2], status;
	char buf[128], path[128];
	struct pollfd pfd;
	ssize_t n;
	FILE *f;

	snprintf(a.dir, sizeof(a.dir), "/tmp/sfs-fault-pl-XXXXXX");
	cr_assert(mkdtemp(a.dir));
	cr_assert_eq(pipe(p), 0);
	a.wfd = p[1];
	status = th_wait(th_fork(powerloss_child, &a), 10000);
	close(p[1]);
	cr_assert(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "status %d exit %d", status, th_exit_code(status));
	/* EOF once every holder of the write end is dead: the grandchild too. */
	pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 5000), 1, "the group's other process survived");
	cr_assert_eq(read(p[0], buf, sizeof(buf)), 0);
	close(p[0]);
	snprintf(path, sizeof(path), "%s/.powerloss", a.dir);
	cr_assert((f = fopen(path, "r")), "no marker");
	n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n > 0 ? n : 0] = 0;
	cr_assert(strstr(buf, " table.round\n"), "marker says '%s'", buf);
	unlink(path);
	rmdir(a.dir);
}

Test(fault, bad_specs_are_refused_naming_the_rule)
{
	static const struct {
		const char *spec, *says;
	} bad[] = {
		{ "", "empty" },
		{ "flush.apply", "expected POINT:N" },
		{ ":1", "no point named" },
		{ "no.such.point:1", "no such point" },
		{ "nosuch.*:1", "no point has this prefix" },
		{ "fl*sh.apply:1", "'*' only at the end" },
		{ "flush.apply:", "decimal hit count" },
		{ "flush.apply:x", "decimal hit count" },
		{ "flush.apply:-1", "decimal hit count" },
		{ "flush.apply:0+", "N+ needs" },
		{ "flush.apply:1:boom", "kill, powerloss or fail=ERR" },
		{ "flush.apply:1:fail=EWHAT", "errno name" },
		{ "flush.apply:1:fail=0", "errno name" },
		{ "table.round:1:fail=EIO", "kill only" },
		{ "memory.*:1:fail=EIO", "kill only" },
		{ "flush.apply:1,,flush.commit:1", "expected POINT:N" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(sfs_fault_arm(bad[i].spec), SFS_EUSAGE, "'%s' accepted", bad[i].spec);
		cr_assert(strstr(sfs_last_error(), bad[i].says), "'%s': %s", bad[i].spec,
			  sfs_last_error());
		cr_assert(strstr(sfs_last_error(), "sfs_fault_arm"), "%s", sfs_last_error());
	}
	/* The rule is named, and a spec is armed whole or not at all. */
	cr_assert_eq(sfs_fault_arm("flush.apply:1:fail=EIO,flush.commit:1:fail=EBADNESS"),
		     SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "rule 'flush.commit:1:fail=EBADNESS'"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_fault("flush.apply"), 0, "half a bad spec was armed");
	/* A table of SFS_FAULT_RULES_MAX at most. */
	for (int i = 0; i < SFS_FAULT_RULES_MAX; i++)
		cr_assert_eq(sfs_fault_arm("flush.apply:0"), 0);
	cr_assert_eq(sfs_fault_arm("flush.apply:0"), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "more than"), "%s", sfs_last_error());
}

static int env_child(void *arg)
{
	setenv("SFS_FAULT", arg, 1);
	sfs_fault_reset();	/* read again at the next point */
	if (sfs_fault("flush.apply") != 0 || sfs_fault("flush.commit") != -EIO ||
	    sfs_fault("flush.commit") != 0)
		return 10;
	/* Read once: a change is not seen. */
	setenv("SFS_FAULT", "flush.apply:1:fail=EIO", 1);
	if (sfs_fault("flush.apply") != 0)
		return 11;
	/* Programmatic rules add to SFS_FAULT's, counting from when armed. */
	if (sfs_fault_arm("flush.apply:2:fail=ENOSPC") || sfs_fault("flush.apply") != 0 ||
	    sfs_fault("flush.apply") != -ENOSPC)
		return 12;
	return sfs_fault_hits("flush.commit") == 2 ? 0 : 13;
}

Test(fault, sfs_fault_is_read_once_at_the_first_point)
{
	int status = th_wait(th_fork(env_child, "flush.commit:1:fail=EIO"), 10000);

	cr_assert_eq(th_exit_code(status), 0, "status %d", status);
}

static const char *err_log;

/* With stderr to err_log: set SFS_FAULT to @arg and pass a point. */
static int bad_env_child(void *arg)
{
	if (!freopen(err_log, "w", stderr))
		return 20;
	setenv("SFS_FAULT", arg, 1);
	sfs_fault_reset();
	(void)sfs_fault("flush.apply");
	return 0;
}

static void expect_abort_saying(int (*fn)(void *), const char *arg, const char *says)
{
	char path[] = "/tmp/sfs-fault-XXXXXX", buf[512] = "";
	int fd = mkstemp(path), status;
	ssize_t n;

	cr_assert_geq(fd, 0);
	err_log = path;
	status = th_wait(th_fork(fn, (void *)arg), 10000);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	cr_assert(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		  "'%s': status %d exit %d", arg, status, th_exit_code(status));
	cr_assert(n > 0 && strstr(buf, says), "'%s' said: %s", arg, buf);
}

Test(fault, a_bad_sfs_fault_ends_the_process_with_a_message)
{
	expect_abort_saying(bad_env_child, "flush.apply:one",
			    "SFS_FAULT: rule 'flush.apply:one': N must be a decimal hit count");
	expect_abort_saying(bad_env_child, "flush.aply:1", "SFS_FAULT: rule 'flush.aply:1': no such point");
}

static int unlisted_child(void *arg)
{
	if (!freopen(err_log, "w", stderr))
		return 20;
	sfs_fault_reset();
	if (sfs_fault_arm("flush.apply:0"))
		return 21;
	(void)sfs_fault(arg);
	return 0;
}

Test(fault, an_unlisted_point_aborts_while_armed)
{
	expect_abort_saying(unlisted_child, "flush.aply", "fault point 'flush.aply' is not listed");
}

static int hook_calls;

static int hook(const char *point, void *arg)
{
	hook_calls++;
	return strcmp(point, arg) == 0 ? -EDQUOT : 0;
}

Test(fault, the_hook_sees_every_point_before_the_rules)
{
	cr_assert_eq(sfs_fault_arm("seg.create.open:1:fail=EIO,seg.create.size:0"), 0);
	sfs_fault_hook(hook, "seg.create.open");
	cr_assert_eq(sfs_fault("seg.create.open"), -EDQUOT, "the hook decides first");
	cr_assert_eq(sfs_fault("seg.create.size"), 0);
	cr_assert_eq(hook_calls, 2);
	cr_assert_eq(sfs_fault_hits("seg.create.open"), 0, "the rules were not asked");
	cr_assert_eq(sfs_fault_hits("seg.create.size"), 1);
	sfs_fault_hook(NULL, NULL);
	cr_assert_eq(sfs_fault("seg.create.open"), -EIO);
	cr_assert_eq(hook_calls, 2);
	sfs_fault_hook(hook, "flush.apply");
	sfs_fault_reset();
	cr_assert_eq(sfs_fault("flush.apply"), 0, "reset drops the hook");
	cr_assert_eq(hook_calls, 2);
}

#define THREADS 4
#define PER_THREAD 20000

static int fired[THREADS];

static void *hammer(void *arg)
{
	int *mine = arg;

	for (int i = 0; i < PER_THREAD; i++)
		*mine += sfs_fault("flush.apply") == -EIO;
	return NULL;
}

/* The compactor's maintenance threads pass the same points: every hit is
 * counted once, and the n-th fires once. */
Test(fault, hits_are_exact_across_threads)
{
	pthread_t th[THREADS];
	int total = 0;

	cr_assert_eq(sfs_fault_arm("flush.apply:0,flush.apply:30000:fail=EIO"), 0);
	for (int i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, hammer, &fired[i]), 0);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		total += fired[i];
	}
	cr_assert_eq(sfs_fault_hits("flush.apply"), 2ull * THREADS * PER_THREAD);
	cr_assert_eq(total, 1, "fired %d times", total);
}
