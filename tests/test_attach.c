/*
 * test_attach.c — the public attach API (include/sfs.h): an external
 * process attaches by job name, appears in the process table as a client,
 * reports quiescent states that grace periods honour, and detaches cleanly.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include "sfs.h"
#include "shm/qsbr.h"
#include "tests/helpers.h"

static struct sfs_seg seg;
static char job[64];

static void setup(void)
{
	th_job(job, sizeof(job), "att");
	cr_assert_eq(sfs_seg_create(job, 0, 1u << 20, 1, &seg), 0, "%s", sfs_last_error());
}

static void teardown(void)
{
	sfs_seg_detach(&seg);
	sfs_seg_destroy(job, 0);
}

TestSuite(attach, .init = setup, .fini = teardown, .timeout = 30);

static int clients(void)
{
	int n = 0;

	for (int i = 0; i < SFS_MAX_PROCS; i++)
		n += sfs_proc_slot_alive(&seg.hdr->sh_procs[i]) &&
		     seg.hdr->sh_procs[i].ps_role == SFS_ROLE_CLIENT;
	return n;
}

Test(attach, attach_registers_a_client_and_detach_frees_it)
{
	sfs_handle_t *h, *o;

	cr_assert_eq(sfs_attach(job, SFS_NODE_ANY, 0, &h), 0, "%s", sfs_last_error());
	cr_assert_eq(clients(), 1);
	cr_assert_eq(sfs_attach(job, 0, SFS_ATTACH_OBSERVER, &o), 0);
	cr_assert_eq(clients(), 1, "an observer takes no slot");
	cr_assert_eq(sfs_detach(o), 0);
	cr_assert_eq(sfs_detach(h), 0);
	cr_assert_eq(clients(), 0);
}

Test(attach, errors_name_the_problem)
{
	sfs_handle_t *h;

	cr_assert_eq(sfs_attach("no-such-job-here", 0, 0, &h), -ENOENT);
	cr_assert(strstr(sfs_last_error(), "sfs.no-such-job-here.0"), "%s", sfs_last_error());
	cr_assert_str_eq(sfs_strerror(-ENOENT), strerror(ENOENT));
	cr_assert_eq(sfs_attach("bad/name", 0, 0, &h), SFS_EUSAGE);
	cr_assert_str_eq(sfs_strerror(SFS_ELAYOUT), "layout fingerprint differs");
	cr_assert_eq(sfs_detach(NULL), SFS_EUSAGE);
}

static int external_reader(void *p)
{
	sfs_handle_t *h;
	int32_t *flags = p;

	if (sfs_attach(job, 0, 0, &h))
		return 10;
	sfs_online(h);
	sfs_store_release(&flags[0], 1);	/* holding */
	while (!sfs_load_acquire(&flags[1]))
		;
	sfs_quiescent(h);
	sfs_offline(h);
	return sfs_detach(h) ? 11 : 0;
}

Test(attach, an_external_reader_holds_grace_periods_until_quiescent)
{
	uint64_t off, token;
	int32_t *flags;
	pid_t pid;

	cr_assert_eq(sfs_seg_region_create(&seg, "flags", 64, 0, &off), 0);
	flags = sfs_seg_ptr(&seg, off);
	pid = th_fork(external_reader, flags);
	for (int i = 0; i < 100000 && !sfs_load_acquire(&flags[0]); i++)
		usleep(100);
	cr_assert(flags[0]);
	token = sfs_qsbr_start(seg.hdr);
	usleep(20000);
	cr_assert_eq(sfs_qsbr_check(&seg, NULL, token, 0), 0, "online reader blocks");
	sfs_store_release(&flags[1], 1);
	cr_assert_eq(sfs_qsbr_check(&seg, NULL, token, 5000000000ull), 1);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
}

/* A program finds the regions the segment's creator made, by name, at the
 * same bytes in its own mapping; a missing name is -ENOENT with a message. */
Test(attach, a_region_is_found_by_name)
{
	sfs_handle_t *h;
	uint64_t off, size = 0;
	void *p = NULL;
	uint32_t *mine;

	cr_assert_eq(sfs_seg_region_create(&seg, "prog.cfg", 4096, 0, &off), 0);
	mine = sfs_seg_ptr(&seg, off);
	mine[7] = 0x5f5f1234u;
	cr_assert_eq(sfs_attach(job, 0, SFS_ATTACH_OBSERVER, &h), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_region_find(h, "prog.cfg", &p, &size), 0, "%s", sfs_last_error());
	cr_assert(size >= 4096);
	cr_assert_eq(((uint32_t *)p)[7], 0x5f5f1234u);
	cr_assert_eq(sfs_region_find(h, "prog.cfg", &p, NULL), 0);
	cr_assert_eq(sfs_region_find(h, "no.such", &p, &size), -ENOENT);
	cr_assert(strstr(sfs_last_error(), "no.such"), "%s", sfs_last_error());
	cr_assert_eq(sfs_region_find(h, NULL, &p, &size), SFS_EUSAGE);
	cr_assert_eq(sfs_detach(h), 0);
}
