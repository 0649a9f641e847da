/*
 * segment.c — create, attach, check and destroy a job's segments; carve
 * regions.  Everything here is a slow path (start-up, attach, recovery).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/procinfo.h"
#include "shm/segment.h"

#define HUGETLBFS_MAGIC 0x958458f6

static const char *const role_names[SFS_ROLE_MAX] = {
	[SFS_ROLE_NONE] = "none",
	[SFS_ROLE_SUPERVISOR] = "supervisor",
	[SFS_ROLE_WORKER] = "worker",
	[SFS_ROLE_COMPACTOR] = "compactor",
	[SFS_ROLE_CHECKPOINTER] = "checkpointer",
	[SFS_ROLE_CLIENT] = "client",
};

const char *sfs_role_name(unsigned role)
{
	return role < SFS_ROLE_MAX ? role_names[role] : "?";
}

int sfs_role_parse(const char *name)
{
	for (int r = 1; r < SFS_ROLE_MAX; r++)
		if (strcmp(name, role_names[r]) == 0)
			return r;
	return -1;
}

int sfs_job_name_check(const char *job)
{
	size_t n = job ? strlen(job) : 0;

	if (n == 0 || n > SFS_JOB_NAME_MAX)
		return sfs__err(SFS_EUSAGE, "job name '%s': must be 1..%d characters",
				job ? job : "", SFS_JOB_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = job[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
			return sfs__err(SFS_EUSAGE,
					"job name '%s': only letters, digits, '_', '-', '.' allowed",
					job);
	}
	/* The name becomes part of file names (sfs.<job>.<node>, /tmp/sfs-<job>)
	 * and an argument of other commands: never "." or "..", never hidden,
	 * never read as an option. */
	if (job[0] == '.' || job[0] == '-')
		return sfs__err(SFS_EUSAGE, "job name '%s': must not start with '%c'", job, job[0]);
	return 0;
}

/*
 * The checks on an open segment file, for create (after O_EXCL made it:
 * a second line of defence that costs one fstat) and attach (where it is
 * the only one): a regular file (not a FIFO or a device a link led to),
 * owned by this euid (root can open anything: the check is explicit, not
 * left to open(2)), mode 0600 and one link (a hard link planted elsewhere
 * could otherwise hand over a file of ours that is not a segment).  The
 * message names the path and the field.
 */
static int seg_fd_check(int fd, const char *path, struct stat *st)
{
	if (fstat(fd, st) != 0)
		return sfs__err(sfs__errno(), "segment %s: stat: %s", path, strerror(errno));
	if (!S_ISREG(st->st_mode))
		return sfs__err(SFS_EFOREIGN, "segment %s: file type 0%o, not a regular file", path,
				(unsigned)(st->st_mode & S_IFMT));
	if (st->st_uid != geteuid())
		return sfs__err(SFS_EFOREIGN, "segment %s: owned by uid %u, this process is uid %u",
				path, (unsigned)st->st_uid, (unsigned)geteuid());
	if ((st->st_mode & 07777) != 0600)
		return sfs__err(SFS_EFOREIGN, "segment %s: mode %03o, expected 0600", path,
				(unsigned)(st->st_mode & 07777));
	if (st->st_nlink != 1)
		return sfs__err(SFS_EFOREIGN, "segment %s: link count %lu, expected 1", path,
				(unsigned long)st->st_nlink);
	return 0;
}

/* What is in the way at @path, for the message of a create or open that
 * failed with EEXIST or ELOOP: sfs never follows a link or takes over a
 * file it did not make. */
static int seg_in_the_way(const char *path, int err, const char *op)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		return sfs__err(SFS_EFOREIGN, "segment %s: %s: a symbolic link is in the way "
				"(never followed; remove it if it is not an attack)", path, op);
	if (err == -EEXIST && lstat(path, &st) == 0)
		return sfs__err(-EEXIST, "segment %s: %s: exists (type 0%o, uid %u, mode %03o)", path,
				op, (unsigned)(st.st_mode & S_IFMT), (unsigned)st.st_uid,
				(unsigned)(st.st_mode & 07777));
	return sfs__err(err, "segment %s: %s: %s", path, op, strerror(-err));
}

static const char *shm_dir(void)
{
	const char *d = getenv("SFS_SHM_DIR");

	return d && *d ? d : "/dev/shm";
}

/* /proc/mounts costs ~25 us to parse; mounts do not change under a
 * running group, so the answer is kept for the process's life, found once
 * (pthread_once: the supervisor's metrics thread attaches segments too). */
static pthread_once_t huge_once = PTHREAD_ONCE_INIT;
static char huge_mount[256];	/* "" = none */

static void huge_find(void)
{
	char line[512], dev[128], mnt[256], type[64];
	FILE *f = fopen("/proc/mounts", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %255s %63s", dev, mnt, type) == 3 &&
		    strcmp(type, "hugetlbfs") == 0) {
			snprintf(huge_mount, sizeof(huge_mount), "%s", mnt);
			break;
		}
	fclose(f);
}

/* A hugetlbfs mount to place segments on: $SFS_HUGETLBFS, else the first
 * hugetlbfs in /proc/mounts; NULL when there is none. */
static const char *huge_dir(char *buf, size_t n)
{
	const char *env = getenv("SFS_HUGETLBFS");
	struct statfs sf;

	if (env && *env) {
		if (statfs(env, &sf) == 0 && (unsigned long)sf.f_type == HUGETLBFS_MAGIC) {
			snprintf(buf, n, "%s", env);
			return buf;
		}
		return NULL;
	}
	pthread_once(&huge_once, huge_find);
	if (!huge_mount[0])
		return NULL;
	snprintf(buf, n, "%s", huge_mount);
	return buf;
}

static int path_in(const char *dir, const char *job, int node, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s/sfs.%s.%d", dir, job, node);

	if (len < 0 || (size_t)len >= n)
		return sfs__err(-ENAMETOOLONG, "segment path under %s too long", dir);
	return 0;
}

int sfs_seg_path(const char *job, int node, char *buf, size_t n)
{
	char hbuf[256];
	const char *hd;
	int rc = sfs_job_name_check(job);

	if (rc)
		return rc;
	if (node < 0)
		node = 0;
	/* An existing segment on hugetlbfs wins; otherwise the plain dir. */
	hd = huge_dir(hbuf, sizeof(hbuf));
	if (hd && path_in(hd, job, node, buf, n) == 0 &&
	    faccessat(AT_FDCWD, buf, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	return path_in(shm_dir(), job, node, buf, n);
}

static void seg_close(struct sfs_seg *s)
{
	if (s->hdr && s->hdr != MAP_FAILED)
		munmap(s->hdr, s->size);
	if (s->fd >= 0)
		close(s->fd);
	s->hdr = NULL;
	s->fd = -1;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Free huge pages of the default size, from /proc/meminfo. */
static uint64_t huge_pages_free(uint64_t *page_size)
{
	char line[128];
	uint64_t free_pages = 0, kb = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Free: %lu", &free_pages);
		sscanf(line, "Hugepagesize: %lu kB", &kb);
	}
	fclose(f);
	*page_size = kb * 1024;
	return free_pages;
}

int sfs_seg_create(const char *job, int node, size_t size, uint64_t generation,
		   struct sfs_seg *out)
{
	struct sfs_seg s = { .fd = -1, .node = node < 0 ? 0 : node };
	struct sfs_seg_hdr *h;
	char hbuf[256];
	const char *hd;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), hpage = 0;
	unsigned flags = 0;
	int rc = sfs_job_name_check(job);

	if (rc)
		return rc;
	if (size < sizeof(struct sfs_seg_hdr) + page)
		size = sizeof(struct sfs_seg_hdr) + page;

	hd = huge_dir(hbuf, sizeof(hbuf));
	if (hd && huge_pages_free(&hpage) * hpage >= round_up(size, hpage ? hpage : 1) && hpage) {
		flags |= SFS_SEG_HUGE;
		page = hpage;
		rc = path_in(hd, job, s.node, s.path, sizeof(s.path));
	} else {
		rc = path_in(shm_dir(), job, s.node, s.path, sizeof(s.path));
	}
	if (rc)
		return rc;
	size = round_up(size, page);

	if ((rc = sfs_fault("seg.create.open")))
		return sfs__err(rc, "segment %s: create: %s", s.path, strerror(-rc));
	/* O_EXCL: a file or link already at the path (planted by anyone) is
	 * never reused or followed; O_NOFOLLOW says so twice. */
	s.fd = open(s.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s.fd < 0)
		return seg_in_the_way(s.path, sfs__errno(), "create");
	/* The mode must be 0600 whatever the umask. */
	if ((rc = sfs_fault("seg.create.size")))
		errno = -rc;
	if (rc || fchmod(s.fd, 0600) != 0 || ftruncate(s.fd, (off_t)size) != 0) {
		rc = sfs__err(sfs__errno(), "segment %s: size %zu: %s", s.path, size, strerror(errno));
		goto fail;
	}
	{
		struct stat st;

		if ((rc = seg_fd_check(s.fd, s.path, &st)))
			goto fail;
	}
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
	if (h == MAP_FAILED) {
		rc = sfs__err(sfs__errno(), "segment %s: mmap %zu bytes: %s", s.path, size,
			      strerror(errno));
		goto fail;
	}
	s.hdr = h;
	s.size = size;
	/* Bind before the first touch so every page is placed on @node. */
	if (node >= 0 && numa_available() >= 0 && node <= numa_max_node()) {
		unsigned long mask[16] = { 0 };

		mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
		if (mbind(h, size, MPOL_BIND, mask, sizeof(mask) * 8, 0) != 0) {
			rc = sfs__err(sfs__errno(), "segment %s: bind to node %d: %s", s.path,
				      node, strerror(errno));
			goto fail;
		}
	}
	memset(h, 0, sizeof(*h));
	h->sh_version = SFS_SEG_VERSION;
	h->sh_flags = flags;
	h->sh_fingerprint = sfs_layout_fingerprint();
	h->sh_size = size;
	h->sh_page_size = page;
	h->sh_generation = generation;
	h->sh_owner_pid = (int32_t)getpid();
	h->sh_owner_start = sfs_proc_starttime(getpid());
	h->sh_node = s.node;
	{
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		h->sh_created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	snprintf(h->sh_job, sizeof(h->sh_job), "%s", job);
	h->sh_data_off = round_up(sizeof(*h), (uint64_t)sysconf(_SC_PAGESIZE));
	h->sh_bump = h->sh_data_off;
	h->sh_qsbr_token = 1;
	sfs_store_release(&h->sh_magic, SFS_SEG_MAGIC);
	*out = s;
	return 0;
fail:
	seg_close(&s);
	unlink(s.path);
	return rc;
}

/* Check a mapped header against this build; the message names the field. */
static int hdr_check(const struct sfs_seg_hdr *h, const char *path, size_t file_size,
		     const char *job)
{
	uint64_t fp = sfs_layout_fingerprint();

	if (sfs_load_acquire(&h->sh_magic) != SFS_SEG_MAGIC)
		return sfs__err(SFS_EMAGIC, "segment %s: magic is 0x%016llx, expected 0x%016llx",
				path, (unsigned long long)h->sh_magic,
				(unsigned long long)SFS_SEG_MAGIC);
	if (h->sh_version != SFS_SEG_VERSION)
		return sfs__err(SFS_EVERSION, "segment %s: format version is %u, this build reads %u",
				path, h->sh_version, SFS_SEG_VERSION);
	if (h->sh_fingerprint != fp)
		return sfs__err(SFS_ELAYOUT,
				"segment %s: layout fingerprint is 0x%016llx, this build's is 0x%016llx "
				"(built from other struct layouts)",
				path, (unsigned long long)h->sh_fingerprint, (unsigned long long)fp);
	if (h->sh_size != file_size)
		return sfs__err(SFS_ECORRUPT, "segment %s: header size %llu, file size %zu", path,
				(unsigned long long)h->sh_size, file_size);
	if (job && strncmp(h->sh_job, job, sizeof(h->sh_job)) != 0)
		return sfs__err(SFS_EFOREIGN, "segment %s: job is '%s', expected '%s'", path,
				h->sh_job, job);
	return 0;
}

int sfs_seg_attach(const char *job, int node, struct sfs_seg *out)
{
	struct sfs_seg s = { .fd = -1, .node = node < 0 ? 0 : node };
	struct sfs_seg_hdr probe;
	struct stat st;
	int rc;

	rc = sfs_seg_path(job, s.node, s.path, sizeof(s.path));
	if (rc)
		return rc;
	/* O_NOFOLLOW: a link at the path is refused, never followed (as root
	 * it could lead anywhere); O_NONBLOCK: a FIFO planted there cannot
	 * hold the open, and seg_fd_check refuses it. */
	s.fd = open(s.path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (s.fd < 0 && errno == ELOOP)
		return seg_in_the_way(s.path, -ELOOP, "open");
	if (s.fd < 0)
		return sfs__err(sfs__errno(), "segment %s: open: %s%s", s.path, strerror(errno),
				errno == ENOENT ? " (is the job running?)" : "");
	if ((rc = seg_fd_check(s.fd, s.path, &st)))
		goto fail;
	if ((size_t)st.st_size < sizeof(probe)) {
		rc = sfs__err(SFS_EMAGIC, "segment %s: %lld bytes, smaller than a header", s.path,
			      (long long)st.st_size);
		goto fail;
	}
	/* Read the header with pread first: never map a foreign file's size. */
	if (pread(s.fd, &probe, sizeof(probe), 0) != (ssize_t)sizeof(probe)) {
		rc = sfs__err(SFS_EMAGIC, "segment %s: short header read", s.path);
		goto fail;
	}
	rc = hdr_check(&probe, s.path, (size_t)st.st_size, job);
	if (rc)
		goto fail;
	s.size = (size_t)st.st_size;
	s.hdr = mmap(NULL, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
	if (s.hdr == MAP_FAILED) {
		s.hdr = NULL;
		rc = sfs__err(sfs__errno(), "segment %s: mmap: %s", s.path, strerror(errno));
		goto fail;
	}
	*out = s;
	return 0;
fail:
	seg_close(&s);
	return rc;
}

void sfs_seg_detach(struct sfs_seg *s)
{
	seg_close(s);
}

int sfs_seg_destroy(const char *job, int node)
{
	char path[256];
	int rc = sfs_seg_path(job, node, path, sizeof(path));

	if (rc)
		return rc;
	/* Only a segment of ours goes: as root, unlink(2) would remove anyone's
	 * file at the path, even in the sticky /dev/shm.  A link is removed
	 * (unlink never follows it) only if this euid made it. */
	{
		struct stat st;

		if (lstat(path, &st) != 0)
			return sfs__err(sfs__errno(), "segment %s: unlink: %s", path, strerror(errno));
		if (st.st_uid != geteuid())
			return sfs__err(SFS_EFOREIGN, "segment %s: owned by uid %u, not removed", path,
					(unsigned)st.st_uid);
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
			return sfs__err(SFS_EFOREIGN, "segment %s: file type 0%o, not removed", path,
					(unsigned)(st.st_mode & S_IFMT));
	}
	if (unlink(path) != 0)
		return sfs__err(sfs__errno(), "segment %s: unlink: %s", path, strerror(errno));
	return 0;
}

/*
 * A segment left by another build of sfs (other version or layout) cannot be
 * attached, but its identity prefix — every field before sh_job, frozen
 * across versions for exactly this — still says who owns it: a dead owner's
 * segment is stale whatever its layout; a live one is refused as running.
 */
static int check_stale_foreign_build(const char *path, int why, uint64_t *generation,
				     pid_t *owner_pid)
{
	struct sfs_seg_hdr prefix;
	char msg[256];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t n;

	snprintf(msg, sizeof(msg), "%s", sfs_last_error());
	if (fd < 0)
		return sfs__err(sfs__errno(), "segment %s: open: %s", path, strerror(errno));
	n = pread(fd, &prefix, offsetof(struct sfs_seg_hdr, sh_job), 0);
	close(fd);
	if (n != (ssize_t)offsetof(struct sfs_seg_hdr, sh_job))
		return sfs__err(why, "%s", msg);
	*generation = prefix.sh_generation;
	*owner_pid = prefix.sh_owner_pid;
	if (sfs_proc_alive(prefix.sh_owner_pid, prefix.sh_owner_start))
		return sfs__err(SFS_ERUNNING, "%s; its owner pid %d is alive", msg,
				(int)prefix.sh_owner_pid);
	return SFS_ESTALE;
}

int sfs_seg_check_stale(const char *job, int node, uint64_t *generation, pid_t *owner_pid)
{
	struct sfs_seg s;
	char path[256];
	int rc = sfs_seg_path(job, node, path, sizeof(path));

	if (rc)
		return rc;
	/* lstat, not access(2): a link at the path (even a dangling one) is
	 * something in the way, which attach refuses by name. */
	if (lstat(path, &(struct stat){ 0 }) != 0)
		return 0;
	rc = sfs_seg_attach(job, node, &s);
	if (rc == SFS_ELAYOUT || rc == SFS_EVERSION)
		return check_stale_foreign_build(path, rc, generation, owner_pid);
	if (rc)
		return rc;
	*generation = s.hdr->sh_generation;
	*owner_pid = s.hdr->sh_owner_pid;
	rc = sfs_proc_alive(s.hdr->sh_owner_pid, s.hdr->sh_owner_start) ? SFS_ERUNNING : SFS_ESTALE;
	sfs_seg_detach(&s);
	if (rc == SFS_ERUNNING)
		return sfs__err(rc, "segment %s: job '%s' is running (supervisor pid %d)", path, job,
				(int)*owner_pid);
	return rc;
}

int sfs_seg_region_find(const struct sfs_seg *s, const char *name, uint64_t *off,
			uint64_t *size)
{
	for (unsigned i = 0; i < SFS_MAX_REGIONS; i++) {
		const struct sfs_region_desc *d = &s->hdr->sh_regions[i];
		uint32_t st = sfs_load_acquire(&d->rd_state);

		if (st == SFS_REGION_FREE)
			break;	/* entries are claimed in order: nothing past a free one */
		if (st == SFS_REGION_READY && strncmp(d->rd_name, name, SFS_REGION_NAME_MAX) == 0) {
			*off = d->rd_off;
			if (size)
				*size = d->rd_size;
			return 0;
		}
	}
	/* No message: "not there yet" is an expected answer on hot-ish paths
	 * (a worker looking for its store at every quiescent point). */
	return -ENOENT;
}

int sfs_seg_region_create(struct sfs_seg *s, const char *name, uint64_t size,
			  unsigned owner_role, uint64_t *off)
{
	struct sfs_seg_hdr *h = s->hdr;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start;

	if (!name || !*name || strlen(name) >= SFS_REGION_NAME_MAX)
		return sfs__err(SFS_EUSAGE, "region name '%s': 1..%d characters", name ? name : "",
				SFS_REGION_NAME_MAX - 1);
	if (sfs_seg_region_find(s, name, off, NULL) == 0)
		return sfs__err(-EEXIST, "segment %s: region '%s' exists", s->path, name);
	size = round_up(size, page);
	for (unsigned i = 0; i < SFS_MAX_REGIONS; i++) {
		struct sfs_region_desc *d = &h->sh_regions[i];

		if (uatomic_cmpxchg(&d->rd_state, SFS_REGION_FREE, SFS_REGION_CLAIMED) !=
		    SFS_REGION_FREE)
			continue;
		start = uatomic_add_return(&h->sh_bump, size) - size;
		if (start + size > h->sh_size) {
			/* Leave the entry claimed but empty-named: the bytes are gone
			 * anyway once the bump passed the end. */
			d->rd_size = 0;
			sfs_store_release(&d->rd_state, SFS_REGION_READY);
			uatomic_inc(&h->sh_regions_ready);
			return sfs__err(SFS_EFULL,
					"segment %s: region '%s' needs %llu bytes, %llu left", s->path,
					name, (unsigned long long)size,
					(unsigned long long)(h->sh_size > start ? h->sh_size - start : 0));
		}
		d->rd_off = start;
		d->rd_size = size;
		d->rd_owner_role = owner_role;
		snprintf(d->rd_name, sizeof(d->rd_name), "%s", name);
		sfs_store_release(&d->rd_state, SFS_REGION_READY);
		uatomic_inc(&h->sh_regions_ready);
		*off = start;
		return 0;
	}
	return sfs__err(SFS_EFULL, "segment %s: region directory full (%d entries)", s->path,
			SFS_MAX_REGIONS);
}

uint64_t sfs_seg_used(const struct sfs_seg *s)
{
	uint64_t b = sfs_load_relaxed(&s->hdr->sh_bump);

	return b > s->hdr->sh_size ? s->hdr->sh_size : b;
}
