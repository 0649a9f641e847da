/*
 * test_segment.c — segments: create, attach from another process, the
 * checks that refuse a foreign or mismatched segment (each naming its
 * field), regions, stale detection, destroy; the layout fingerprint's
 * parts (shm/layout.h) and that bin/sfs computes the same fingerprint.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "common/err.h"
#include "shm/layout.h"
#include "common/fault.h"
#include "shm/segment.h"
#include "tests/helpers.h"

#define SEG_SIZE (4u << 20)

/* Patch @len bytes at @off of the segment file of @job, behind its back. */
static void poke(const char *job, off_t off, const void *val, size_t len)
{
	char path[256];
	int fd;

	cr_assert_eq(sfs_seg_path(job, 0, path, sizeof(path)), 0);
	fd = open(path, O_RDWR);
	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, val, len, off), (ssize_t)len);
	close(fd);
}

Test(segment, create_attach_destroy)
{
	struct sfs_seg a, b;
	char job[64];
	struct stat st;

	th_job(job, sizeof(job), "seg");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 7, &a), 0, "%s", sfs_last_error());
	cr_assert_eq(fstat(a.fd, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
	cr_assert_eq(a.hdr->sh_generation, 7);
	cr_assert_eq(a.hdr->sh_owner_pid, getpid());
	cr_assert_str_eq(a.hdr->sh_job, job);

	/* A second create of the same job fails: one group per job. */
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &b), -EEXIST);

	cr_assert_eq(sfs_seg_attach(job, 0, &b), 0, "%s", sfs_last_error());
	cr_assert_eq(b.size, a.size);
	cr_assert_eq(b.hdr->sh_fingerprint, sfs_layout_fingerprint());
	sfs_seg_detach(&b);
	sfs_seg_detach(&a);
	cr_assert_eq(sfs_seg_destroy(job, 0), 0);
	cr_assert_eq(sfs_seg_attach(job, 0, &b), -ENOENT);
	cr_assert(strstr(sfs_last_error(), "not running") || strstr(sfs_last_error(), "open"));
}

/* A create that fails (an injected ENOSPC before the file is made, and
 * after it is made but before it is sized) says which segment and why,
 * and leaves no file behind: the next create of the job succeeds. */
Test(segment, a_failed_create_is_named_and_leaves_no_file)
{
	static const char *const points[] = { "seg.create.open", "seg.create.size" };
	struct sfs_seg a;
	char job[64], path[256], rule[64];

	th_job(job, sizeof(job), "segf");
	for (unsigned i = 0; i < 2; i++) {
		snprintf(rule, sizeof(rule), "%s:1:fail=ENOSPC", points[i]);
		cr_assert_eq(sfs_fault_arm(rule), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &a), -ENOSPC, "%s", points[i]);
		cr_assert_eq(sfs_fault_hits(points[i]), 1, "%s not reached", points[i]);
		sfs_fault_reset();
		cr_assert(strstr(sfs_last_error(), job) && strstr(sfs_last_error(), strerror(ENOSPC)),
			  "%s: %s", points[i], sfs_last_error());
		cr_assert_eq(sfs_seg_path(job, 0, path, sizeof(path)), 0);
		cr_assert_neq(access(path, F_OK), 0, "%s left %s", points[i], path);
	}
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &a), 0, "%s", sfs_last_error());
	sfs_seg_detach(&a);
	cr_assert_eq(sfs_seg_destroy(job, 0), 0);
}

Test(segment, bad_job_names)
{
	struct sfs_seg s;

	cr_assert_eq(sfs_seg_create("", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create("a/b", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create(".", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create("..", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create(".hidden", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create("-rf", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "'-rf'"), "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_create("a b", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create("a\nb", 0, SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert_eq(sfs_seg_create("0123456789012345678901234567890123456789012345678", 0,
				    SEG_SIZE, 1, &s), SFS_EUSAGE);
	cr_assert(strstr(sfs_last_error(), "job name"));
}

struct child_arg {
	const char *job;
	uint64_t off;
};

/* Attach in another process (another address), find the region by name,
 * check the parent's bytes and answer through the region. */
static int child_attach(void *p)
{
	struct child_arg *a = p;
	struct sfs_seg s;
	uint64_t off = 0, size = 0;
	uint64_t *words;

	if (sfs_seg_attach(a->job, 0, &s))
		return 10;
	if (sfs_seg_region_find(&s, "test.region", &off, &size) || off != a->off || size < 4096)
		return 11;
	words = sfs_seg_ptr(&s, off);
	if (words[0] != 0x1234567890abcdefull)
		return 12;
	words[1] = (uint64_t)getpid();
	sfs_seg_detach(&s);
	return 0;
}

Test(segment, regions_across_processes)
{
	struct sfs_seg s;
	struct child_arg a;
	char job[64];
	uint64_t off, off2, *words;
	pid_t pid;

	th_job(job, sizeof(job), "reg");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_region_create(&s, "test.region", 100, SFS_ROLE_WORKER, &off), 0);
	cr_assert_eq(off % 4096, 0, "regions are page aligned");
	cr_assert_eq(sfs_seg_region_create(&s, "test.region", 100, SFS_ROLE_WORKER, &off2), -EEXIST);
	cr_assert_eq(sfs_seg_region_create(&s, "other", 5000, SFS_ROLE_WORKER, &off2), 0);
	cr_assert_geq(off2, off + 4096, "regions do not overlap");
	cr_assert_eq(sfs_seg_region_create(&s, "huge", 1ull << 40, SFS_ROLE_WORKER, &off2), SFS_EFULL);
	cr_assert(strstr(sfs_last_error(), "huge"), "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_region_find(&s, "nope", &off2, NULL), -ENOENT);

	words = sfs_seg_ptr(&s, off);
	words[0] = 0x1234567890abcdefull;
	a.job = job;
	a.off = off;
	pid = th_fork(child_attach, &a);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
	cr_assert_eq(words[1], (uint64_t)pid, "the child's write is visible here");
	sfs_seg_detach(&s);
	sfs_seg_destroy(job, 0);
}

/* Every identity field of the header is checked, and the error names it. */
Test(segment, mismatch_is_refused_naming_the_field)
{
	struct sfs_seg s, t;
	char job[64];
	uint64_t bad64 = 0xdeadbeefull;
	uint32_t bad32 = SFS_SEG_VERSION + 1;

	th_job(job, sizeof(job), "mis");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), 0);
	sfs_seg_detach(&s);

	poke(job, offsetof(struct sfs_seg_hdr, sh_fingerprint), &bad64, 8);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_ELAYOUT);
	cr_assert(strstr(sfs_last_error(), "layout fingerprint"), "%s", sfs_last_error());
	bad64 = sfs_layout_fingerprint();
	poke(job, offsetof(struct sfs_seg_hdr, sh_fingerprint), &bad64, 8);

	poke(job, offsetof(struct sfs_seg_hdr, sh_version), &bad32, 4);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EVERSION);
	{
		char want[64];

		snprintf(want, sizeof(want), "format version is %u", SFS_SEG_VERSION + 1);
		cr_assert(strstr(sfs_last_error(), want), "%s", sfs_last_error());
	}
	bad32 = SFS_SEG_VERSION;
	poke(job, offsetof(struct sfs_seg_hdr, sh_version), &bad32, 4);

	bad64 = 0x4141414141414141ull;
	poke(job, offsetof(struct sfs_seg_hdr, sh_magic), &bad64, 8);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EMAGIC);
	cr_assert(strstr(sfs_last_error(), "magic"), "%s", sfs_last_error());
	bad64 = SFS_SEG_MAGIC;
	poke(job, offsetof(struct sfs_seg_hdr, sh_magic), &bad64, 8);

	poke(job, offsetof(struct sfs_seg_hdr, sh_job), "other-job", 10);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EFOREIGN);
	cr_assert(strstr(sfs_last_error(), "other-job"), "%s", sfs_last_error());
	poke(job, offsetof(struct sfs_seg_hdr, sh_job), job, strlen(job) + 1);

	cr_assert_eq(sfs_seg_attach(job, 0, &t), 0, "restored header attaches: %s",
		     sfs_last_error());
	sfs_seg_detach(&t);
	sfs_seg_destroy(job, 0);
}

Test(segment, truncated_or_foreign_file_is_refused)
{
	char job[64], path[256];
	struct sfs_seg t;
	int fd;

	th_job(job, sizeof(job), "trunc");
	cr_assert_eq(sfs_seg_path(job, 0, path, sizeof(path)), 0);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "garbage", 7), 7);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EMAGIC);
	cr_assert(strstr(sfs_last_error(), "smaller than a header"), "%s", sfs_last_error());
	cr_assert_eq(ftruncate(fd, 1 << 20), 0);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EMAGIC);
	close(fd);
	unlink(path);
}

Test(segment, another_uid_or_mode_is_refused)
{
	struct sfs_seg s, t;
	char job[64], path[256];

	th_job(job, sizeof(job), "uid");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), 0);
	cr_assert_eq(sfs_seg_path(job, 0, path, sizeof(path)), 0);

	cr_assert_eq(chmod(path, 0644), 0);
	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EFOREIGN);
	cr_assert(strstr(sfs_last_error(), "mode 644"), "%s", sfs_last_error());
	cr_assert_eq(chmod(path, 0600), 0);

	if (geteuid() == 0) {
		/* As root, hand the file to nobody: attach must refuse it
		 * although root could open it. */
		cr_assert_eq(chown(path, 65534, 65534), 0);
		cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EFOREIGN);
		cr_assert(strstr(sfs_last_error(), "uid 65534"), "%s", sfs_last_error());
		cr_assert_eq(chown(path, 0, 0), 0);
	}
	cr_assert_eq(sfs_seg_attach(job, 0, &t), 0);
	sfs_seg_detach(&t);
	sfs_seg_detach(&s);
	sfs_seg_destroy(job, 0);
}

/* A symlink planted at the segment path, to a file elsewhere that looks
 * like a segment of ours (a copy of a real one): create does not follow
 * it, attach and the stale check refuse it by name, destroy removes only
 * the link; the target's bytes are unchanged throughout. */
Test(segment, a_planted_symlink_is_never_followed)
{
	char job[64], path[256], target[] = "/tmp/sfs-seg-target-XXXXXX", buf[4096], orig[4096];
	struct sfs_seg s, t;
	uint64_t gen = 0;
	pid_t owner = 0;
	int fd, sfd;

	th_job(job, sizeof(job), "link");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_path(job, 0, path, sizeof(path)), 0);
	fd = mkstemp(target);
	cr_assert(fd >= 0);
	cr_assert_eq(pread(s.fd, orig, sizeof(orig), 0), (ssize_t)sizeof(orig));
	cr_assert_eq(pwrite(fd, orig, sizeof(orig), 0), (ssize_t)sizeof(orig));
	cr_assert_eq(ftruncate(fd, (off_t)s.size), 0);
	cr_assert_eq(fchmod(fd, 0600), 0);
	sfs_seg_detach(&s);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(symlink(target, path), 0);

	cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EFOREIGN, "attach followed the link");
	cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "symbolic link"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), SFS_EFOREIGN);
	cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "symbolic link"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 2, &s), SFS_EFOREIGN);
	cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "symbolic link"), "%s",
		  sfs_last_error());
	sfd = open(target, O_RDONLY);
	cr_assert(sfd >= 0);
	cr_assert_eq(pread(sfd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	cr_assert_eq(memcmp(buf, orig, sizeof(buf)), 0, "the link's target was written");
	close(sfd);

	/* a dangling link: create makes nothing at its target */
	cr_assert_eq(unlink(target), 0);
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 2, &s), SFS_EFOREIGN);
	cr_assert_neq(access(target, F_OK), 0, "create followed a dangling link");
	cr_assert_eq(sfs_seg_destroy(job, 0), 0, "%s", sfs_last_error());   /* our own link */
	close(fd);
}

/* A file planted at the segment path by another user (as root: chowned to
 * nobody), with mode 0666, or a FIFO: create, attach and the stale check
 * each refuse it naming the path, and destroy leaves another user's file. */
Test(segment, a_planted_file_or_fifo_is_refused)
{
	char job[64], path[256];
	struct sfs_seg s;
	uint64_t gen = 0;
	pid_t owner = 0;
	struct stat st;
	int fd;

	th_job(job, sizeof(job), "plant");
	cr_assert_eq(sfs_seg_path(job, 0, path, sizeof(path)), 0);

	/* mode 0666, ours: refused (another user could have written it) */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(fchmod(fd, 0666), 0);
	cr_assert_eq(ftruncate(fd, SEG_SIZE), 0);
	close(fd);
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), -EEXIST);
	cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "mode 666"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_seg_attach(job, 0, &s), SFS_EFOREIGN);
	cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "mode 666"), "%s",
		  sfs_last_error());
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), SFS_EFOREIGN);

	if (geteuid() == 0) {
		cr_assert_eq(chmod(path, 0600), 0);
		cr_assert_eq(chown(path, 65534, 65534), 0);
		cr_assert_eq(sfs_seg_attach(job, 0, &s), SFS_EFOREIGN);
		cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "uid 65534"),
			  "%s", sfs_last_error());
		cr_assert_eq(sfs_seg_destroy(job, 0), SFS_EFOREIGN, "removed another user's file");
		cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "uid 65534"),
			  "%s", sfs_last_error());
		cr_assert_eq(lstat(path, &st), 0, "another user's file is gone");
	}
	cr_assert_eq(unlink(path), 0);

	/* a FIFO of ours, mode 0600: not a regular file (and no open blocks) */
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(sfs_seg_attach(job, 0, &s), SFS_EFOREIGN);
	cr_assert(strstr(sfs_last_error(), path) && strstr(sfs_last_error(), "not a regular file"),
		  "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), SFS_EFOREIGN);
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), -EEXIST);
	cr_assert(strstr(sfs_last_error(), path), "%s", sfs_last_error());
	cr_assert_eq(sfs_seg_destroy(job, 0), SFS_EFOREIGN, "removed a FIFO");
	cr_assert_eq(unlink(path), 0);

	/* a second link to a segment of ours: link count 2 */
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), 0, "%s", sfs_last_error());
	{
		char other[300];
		struct sfs_seg t;

		snprintf(other, sizeof(other), "%s.other", path);
		cr_assert_eq(link(path, other), 0);
		cr_assert_eq(sfs_seg_attach(job, 0, &t), SFS_EFOREIGN);
		cr_assert(strstr(sfs_last_error(), "link count 2"), "%s", sfs_last_error());
		unlink(other);
	}
	sfs_seg_detach(&s);
	cr_assert_eq(sfs_seg_destroy(job, 0), 0, "%s", sfs_last_error());
}

static int child_create_and_die(void *p)
{
	struct sfs_seg s;

	if (sfs_seg_create(p, 0, SEG_SIZE, 41, &s))
		return 10;
	return 0;	/* exits without destroy: the segment is now stale */
}

Test(segment, stale_segment_is_found_by_dead_owner)
{
	char job[64];
	uint64_t gen = 0;
	pid_t owner = 0, pid;
	struct sfs_seg s;

	th_job(job, sizeof(job), "stale");
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), 0, "none yet");

	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 5, &s), 0);
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), SFS_ERUNNING,
		     "the owner (this process) lives");
	cr_assert(strstr(sfs_last_error(), "running"));
	sfs_seg_detach(&s);
	sfs_seg_destroy(job, 0);

	pid = th_fork(child_create_and_die, job);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), SFS_ESTALE);
	cr_assert_eq(owner, pid);
	cr_assert_eq(gen, 41);
	cr_assert_eq(sfs_seg_destroy(job, 0), 0);
}

/* A segment of another build (other layout) whose owner died is still
 * recognised as stale from its frozen identity prefix. */
Test(segment, stale_segment_of_another_build)
{
	char job[64];
	uint64_t gen = 0, bad = 0x1111ull;
	pid_t owner = 0, pid;

	th_job(job, sizeof(job), "stalex");
	pid = th_fork(child_create_and_die, job);
	cr_assert_eq(th_exit_code(th_wait(pid, 10000)), 0);
	poke(job, offsetof(struct sfs_seg_hdr, sh_fingerprint), &bad, 8);
	cr_assert_eq(sfs_seg_check_stale(job, 0, &gen, &owner), SFS_ESTALE);
	cr_assert_eq(owner, pid);
	cr_assert_eq(gen, 41);
	cr_assert_eq(sfs_seg_destroy(job, 0), 0);
}

/* Huge pages: with a hugetlbfs mount and free huge pages the segment lives
 * there and says so.  Needs root; the mount is made in a private mount
 * namespace so the tests running beside this one never see it, and the
 * machine's huge page pool is put back as it was. */
Test(segment, hugetlbfs_when_the_machine_has_huge_pages)
{
	char dir[] = "/tmp/sfs-huge-XXXXXX", job[64], buf[32];
	struct sfs_seg s, t;
	long before = -1;
	FILE *f;

	if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		cr_skip_test("needs root and mount namespaces");
	f = fopen("/proc/sys/vm/nr_hugepages", "r+");
	if (!f || !fgets(buf, sizeof(buf), f))
		cr_skip_test("no huge page pool");
	before = atol(buf);
	if (before < 4) {
		rewind(f);
		fprintf(f, "%ld\n", before + 4);
	}
	fclose(f);
	cr_assert_not_null(mkdtemp(dir));
	if (mount("nodev", dir, "hugetlbfs", 0, NULL) != 0) {
		rmdir(dir);
		cr_skip_test("cannot mount hugetlbfs");
	}
	setenv("SFS_HUGETLBFS", dir, 1);
	th_job(job, sizeof(job), "huge");
	int rc = sfs_seg_create(job, 0, 3u << 20, 1, &s);
	int huge = rc == 0 && (s.hdr->sh_flags & SFS_SEG_HUGE);
	uint64_t page = rc == 0 ? s.hdr->sh_page_size : 0;
	int attached = rc == 0 && sfs_seg_attach(job, 0, &t) == 0;

	if (attached) {
		cr_expect(strncmp(t.path, dir, strlen(dir)) == 0, "attach finds %s", t.path);
		sfs_seg_detach(&t);
	}
	if (rc == 0) {
		sfs_seg_detach(&s);
		sfs_seg_destroy(job, 0);
	}
	umount(dir);
	rmdir(dir);
	if (before >= 0 && before < 4) {
		f = fopen("/proc/sys/vm/nr_hugepages", "w");
		if (f) {
			fprintf(f, "%ld\n", before);
			fclose(f);
		}
	}
	cr_assert_eq(rc, 0, "%s", sfs_last_error());
	cr_assert(huge, "segment is on huge pages");
	cr_assert_geq(page, 2u << 20);
	cr_assert(attached);
}

/* The segment's pages are bound to the NUMA node it was created for. */
Test(segment, memory_is_bound_to_its_node)
{
	struct sfs_seg s;
	char job[64];
	unsigned long mask[16] = { 0 };
	int mode = -1;

	if (numa_available() < 0)
		cr_skip_test("no NUMA support");
	th_job(job, sizeof(job), "numa");
	cr_assert_eq(sfs_seg_create(job, 0, SEG_SIZE, 1, &s), 0);
	cr_assert_eq(get_mempolicy(&mode, mask, sizeof(mask) * 8, s.hdr, MPOL_F_ADDR), 0);
	cr_assert_eq(mode, MPOL_BIND, "policy %d", mode);
	cr_assert_eq(mask[0] & 1ul, 1ul, "node 0 in the mask");
	sfs_seg_detach(&s);
	sfs_seg_destroy(job, 0);
}

/* ---- the layout fingerprint's parts (shm/layout.h) ---------------------- */

static uint64_t (*bumped_of)(void);
static uint64_t bumped(void)
{
	return bumped_of() + 1;
}

/* Every module above shm/ with structs in the segment is in the one list,
 * and each part counts: one part's layout changing (its fingerprint moving)
 * or one part missing changes the segment's fingerprint. */
Test(segment, layout_parts_each_counted)
{
	static const char *const want[] = { "wbuf", "wctl", "mstore", "rdbt", "vcache", "joinbatch" };
	struct sfs_layout_part copy[16];
	unsigned n = 0;
	uint64_t fp = sfs_layout_fingerprint();

	while (sfs_layout_parts[n].fp)
		n++;
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]), "%u parts listed", n);
	for (unsigned i = 0; i < n; i++)
		cr_assert_str_eq(sfs_layout_parts[i].name, want[i]);
	cr_assert_eq(sfs_layout_fingerprint_of(sfs_layout_parts), fp);
	for (unsigned i = 0; i < n; i++) {
		memcpy(copy, sfs_layout_parts, (n + 1) * sizeof(copy[0]));
		bumped_of = copy[i].fp;
		copy[i].fp = bumped;
		cr_assert_neq(sfs_layout_fingerprint_of(copy), fp, "part %s changed",
			      sfs_layout_parts[i].name);
		memcpy(copy, sfs_layout_parts, (n + 1) * sizeof(copy[0]));
		memmove(&copy[i], &copy[i + 1], (n - i) * sizeof(copy[0]));
		cr_assert_neq(sfs_layout_fingerprint_of(copy), fp, "part %s missing",
			      sfs_layout_parts[i].name);
	}
}

struct run_arg {
	char *const *argv;
	const char *out;        /* stdout and stderr go here */
};

static int run_exec(void *p)
{
	const struct run_arg *r = p;
	int fd = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		return 98;
	execv(r->argv[0], r->argv);
	return 97;
}

/* Run @argv (20 s at most) with its output in @out (@n bytes); its exit code. */
static int run_bin(char *const *argv, char *out, size_t n)
{
	char path[] = "/tmp/sfs-test-seg-XXXXXX";
	int fd = mkstemp(path), code;
	struct run_arg r = { argv, path };
	ssize_t got;

	cr_assert(fd >= 0);
	code = th_exit_code(th_wait(th_fork(run_exec, &r), 20000));
	got = pread(fd, out, n - 1, 0);
	out[got > 0 ? got : 0] = '\0';
	close(fd);
	unlink(path);
	return code;
}

/* Another binary, bin/sfs (built from other objects of libsfs.a than this
 * test), computes the same fingerprint: it prints it, and it attaches a
 * segment this process created (sfs stat).  Fails when the two link
 * different part lists or different layouts. */
Test(segment, same_fingerprint_in_sfs_binary, .timeout = 60)
{
	const char *bin = getenv("SFS_BIN") && *getenv("SFS_BIN") ? getenv("SFS_BIN") : "bin";
	char sfs[512], job[64], out[4096], want[64];
	struct sfs_seg segs[64];
	int nodes = numa_available() < 0 ? 1 : numa_max_node() + 1, code;

	snprintf(sfs, sizeof(sfs), "%s/sfs", bin);
	cr_assert_eq(access(sfs, X_OK), 0, "%s: build it first (make)", sfs);
	snprintf(want, sizeof(want), "layout fingerprint %#018llx",
		 (unsigned long long)sfs_layout_fingerprint());
	code = run_bin((char *const[]){ sfs, "version", NULL }, out, sizeof(out));
	cr_assert_eq(code, 0, "sfs version: %s", out);
	cr_assert(strstr(out, want), "this test has '%s', sfs version says:\n%s", want, out);

	th_job(job, sizeof(job), "fp");
	cr_assert_leq(nodes, 64);
	for (int i = 0; i < nodes; i++)
		cr_assert_eq(sfs_seg_create(job, i, SEG_SIZE, 1, &segs[i]), 0, "%s",
			     sfs_last_error());
	code = run_bin((char *const[]){ sfs, "stat", "--job", job, NULL }, out, sizeof(out));
	for (int i = 0; i < nodes; i++) {
		sfs_seg_detach(&segs[i]);
		sfs_seg_destroy(job, i);
	}
	cr_assert(!strstr(out, "fingerprint"), "sfs stat: %s", out);
	cr_assert_eq(code, 0, "sfs stat: %s", out);
}
