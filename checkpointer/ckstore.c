/*
 * ckstore.c — checkpoint storage: the layout and rules are in ckstore.h.
 * This file holds the writer (open, txn, commit, retention, garbage
 * collection), the reading of one checkpoint (sfs__ck_read: its `_metadata`
 * loaded and parsed, then its files checked) and the readers built on it
 * (latest, list, restore, savepoint).  The `_metadata` format itself, its
 * writer and strict parser, is metadata.c's.
 *
 * Writer state, all process-local: every shared file referenced by a
 * retained checkpoint (or new in the open txn) is one `struct ck_sf` in a
 * hash map by storage path, with its reference count over retained
 * checkpoints; the reference set (the files of the last confirmed
 * checkpoint) is a second map over the same objects by (worker, local
 * name, size).  Each retained checkpoint keeps the array of its shared
 * files, so retention decrements counts without reading anything.
 *
 * Crash ordering: new files are linked and fsynced, then `_metadata` is
 * written to a temporary name, fsynced, renamed and its directories
 * fsynced; only then is anything deleted.  Retention removes a
 * checkpoint's `_metadata` (durably) before its files.  Whatever a crash
 * leaves — a chk-<id> without `_metadata`, shared files no valid
 * checkpoint references — is garbage that the next sfs__ck_store_open removes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpointer/ckstore.h"
#include "store/target.h"	/* SFS_STAGE_SHARED: the stage directory's layout */
#include "common/crc32c.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/log.h"
#include "shm/child.h"

#define CK_META "_metadata"
#define CK_META_TMP "_metadata.tmp"
#define CK_META_MAX (256u << 20)   /* refuse a bigger _metadata outright */
#define CK_IO_BUF (1u << 20)

typedef unsigned long long ull;

/* ---- files and directories --------------------------------------------------------- */

/* snprintf into a path buffer; -ENAMETOOLONG instead of truncating. */
__attribute__((format(printf, 3, 4))) static int fmt_path(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap)
		return sfs__err(-ENAMETOOLONG, "%s...: path too long", out);
	return 0;
}

static int pjoin(char *out, size_t cap, const char *a, const char *b)
{
	int n = snprintf(out, cap, "%s/%s", a, b);

	if (n < 0 || (size_t)n >= cap)
		return sfs__err(-ENAMETOOLONG, "%s/%s: path too long", a, b);
	return 0;
}

static int job_ok(const char *job)
{
	return job && strlen(job) < CK_JOB_MAX && sfs__ck_name_ok(job, strlen(job));
}

static int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0 || fsync(fd))
		rc = sfs__err(sfs__errno(), "fsync %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Read all of @fd, computing crc32c and size.  Cost: O(size), one 1 MiB
 * buffer. */
static int stream_file(const char *path, int fd, uint32_t *crc, uint64_t *size)
{
	char *buf = malloc(CK_IO_BUF);
	uint32_t c = 0;
	uint64_t total = 0;
	int rc = 0;

	if (!buf)
		return sfs__err(-ENOMEM, "%s: no memory", path);
	for (;;) {
		ssize_t r = read(fd, buf, CK_IO_BUF);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sfs__err(sfs__errno(), "read %s: %s", path, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		c = sfs__ck_crc32c(c, buf, (size_t)r);
		total += (uint64_t)r;
		sfs_child_progress();	/* a large file takes a while */
	}
	free(buf);
	*crc = c;
	*size = total;
	return rc;
}

/* crc32c and size of @path; @sync: also fsync it (a file just linked). */
static int crc_file(const char *path, int sync, uint32_t *crc, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	rc = stream_file(path, fd, crc, size);
	if (!rc && sync && fsync(fd))
		rc = sfs__err(sfs__errno(), "fsync %s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

/*
 * Files reach a checkpoint, a restore or a savepoint through common/fs.c:
 * sfs_link_or_copy for shared files, sfs_copy_file for private ones, both
 * with SFS_EXIST_FAIL (a name is never reused: add_shared picks another on
 * -EEXIST, the rest write into new directories) and CK_DIR_MODE for a
 * missing parent, made on the first miss only.  A copy reports its crc32c
 * and size (struct sfs_copy_info), read on the way; a link is summed by
 * crc_file.
 */
#define CK_DIR_MODE 0700	/* checkpoints and savepoints hold one user's state */

static void rm_tree(const char *dir)
{
	if (sfs_rmtree(dir))
		sfs_log("%s", sfs_last_error());
}

static int cmp_u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* "chk-<id>" in canonical decimal; 0 if @name is not one. */
static uint64_t chk_id(const char *name)
{
	char canon[32];
	uint64_t id;

	if (strncmp(name, "chk-", 4) || name[4] < '1' || name[4] > '9' || strlen(name) > 24)
		return 0;
	id = strtoull(name + 4, NULL, 10);
	snprintf(canon, sizeof(canon), "chk-%llu", (ull)id);
	return strcmp(canon, name) ? 0 : id;
}

int sfs__ck_ids(const char *root, uint64_t **ids, size_t *n)
{
	DIR *d = opendir(root);
	struct dirent *e;
	size_t cap = 0;

	*ids = NULL;
	*n = 0;
	if (!d)
		return sfs__err(sfs__errno(), "checkpoint storage %s: %s", root, strerror(errno));
	while ((e = readdir(d))) {
		uint64_t id = chk_id(e->d_name);

		if (!id)
			continue;
		if (*n == cap) {
			uint64_t *g = realloc(*ids, (cap = cap ? 2 * cap : 16) * sizeof(*g));

			if (!g) {
				closedir(d);
				free(*ids);
				*ids = NULL;
				return sfs__err(-ENOMEM, "%s: no memory", root);
			}
			*ids = g;
		}
		(*ids)[(*n)++] = id;
	}
	closedir(d);
	if (*n)
		qsort(*ids, *n, sizeof(**ids), cmp_u64_desc);
	return 0;
}

/* ---- reading a checkpoint ------------------------------------------------------------- */

static int meta_load(const char *file, char **buf, size_t *len)
{
	int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;
	struct stat st;
	size_t got = 0;

	*buf = NULL;
	if (fd < 0)
		return errno == ENOENT ? sfs__err(-ENOENT, "%s: missing (not a checkpoint)", file)
				       : sfs__err(sfs__errno(), "%s: %s%s", file, strerror(errno),
						  errno == ELOOP ? " (a symbolic link: never followed)" : "");
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > CK_META_MAX) {
		rc = sfs__err(SFS_ECORRUPT, "%s: not a regular file of at most %u bytes", file, CK_META_MAX);
		goto out;
	}
	if (!(*buf = malloc((size_t)st.st_size + 1))) {
		rc = sfs__err(-ENOMEM, "%s: no memory", file);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, *buf + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sfs__err(sfs__errno(), "read %s: %s", file, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	*len = got;
out:
	close(fd);
	if (rc) {
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

/* @dir (a chk-<id> path) and its id from @path (the directory or its
 * _metadata); @root: the storage root holding it. */
static int resolve(const char *path, char *dir, char *root, uint64_t *id)
{
	size_t n;
	char *base;

	if (snprintf(dir, PATH_MAX, "%s", path) >= PATH_MAX)
		return sfs__err(-ENAMETOOLONG, "%s: path too long", path);
	for (n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
		dir[n - 1] = 0;
	if (n >= 10 && !strcmp(dir + n - 10, "/" CK_META))
		dir[n - 10] = 0;
	base = strrchr(dir, '/');
	*id = chk_id(base ? base + 1 : dir);
	if (!*id)
		return sfs__err(SFS_EUSAGE, "%s: not a checkpoint directory (chk-<id>)", path);
	if (!base)
		snprintf(root, PATH_MAX, ".");
	else
		snprintf(root, PATH_MAX, "%.*s", base == dir ? 1 : (int)(base - dir), dir);
	return 0;
}

int sfs__ck_read(const char *path, const char *job, int verify, struct ck_meta *m)
{
	char dir[PATH_MAX], root[PATH_MAX], file[PATH_MAX], p[PATH_MAX];
	char *buf;
	size_t len = 0;
	uint64_t id;
	int rc;

	memset(m, 0, sizeof(*m));
	if ((rc = resolve(path, dir, root, &id)) || (rc = pjoin(file, sizeof(file), dir, CK_META)) ||
	    (rc = meta_load(file, &buf, &len)))
		return rc;
	rc = sfs__ck_meta_parse(file, buf, len, m);
	free(buf);
	if (rc)
		return rc;
	if (m->id != id)
		rc = sfs__err(SFS_ECORRUPT, "%s: says id %llu, but its directory is chk-%llu", file,
			      (ull)m->id, (ull)id);
	else if (job && strcmp(job, m->job))
		rc = sfs__err(SFS_EFOREIGN, "%s: a checkpoint of job '%s', expected job '%s'", file,
			      m->job, job);
	for (uint32_t i = 0; !rc && i < m->nfiles; i++) {
		const struct ck_file *f = &m->files[i];
		struct stat st;
		uint64_t size;
		uint32_t crc;

		if ((rc = pjoin(p, sizeof(p), root, f->path)))
			break;
		/* lstat: a link in the root is refused, never followed (it could
		 * name any file; the restore would copy it into the data). */
		if (lstat(p, &st))
			rc = sfs__err(sfs__errno(), "%s: file %s is missing (%s)", file, f->path,
				      strerror(errno));
		else if (S_ISLNK(st.st_mode))
			rc = sfs__err(SFS_ECORRUPT, "%s: file %s is a symbolic link (never followed)",
				      file, f->path);
		else if (!S_ISREG(st.st_mode))
			rc = sfs__err(SFS_ECORRUPT, "%s: file %s is not a regular file", file, f->path);
		else if ((uint64_t)st.st_size != f->size)
			rc = sfs__err(SFS_ECORRUPT, "%s: file %s has %llu bytes, _metadata says %llu",
				      file, f->path, (ull)st.st_size, (ull)f->size);
		else if (verify && !(rc = crc_file(p, 0, &crc, &size)) && (crc != f->crc || size != f->size))
			rc = sfs__err(SFS_ECORRUPT, "%s: file %s has crc32c 0x%08x, _metadata says 0x%08x",
				      file, f->path, crc, f->crc);
	}
	if (rc)
		sfs__ck_meta_free(m);
	return rc;
}

/* ---- the writer -------------------------------------------------------------------- */

/* A shared file referenced by a retained checkpoint or new in the txn. */
struct ck_sf {
	struct ck_sf *sf_next_path;  /* chain in st_by_path */
	struct ck_sf *sf_next_key;   /* chain in st_by_key while in the reference set */
	uint32_t sf_refs;            /* retained checkpoints naming it; 0: new in the open txn */
	struct ck_file sf_f;
};

struct ck_kept {                     /* a retained checkpoint, ascending ids in st_kept */
	uint64_t k_id;
	uint32_t k_n;
	struct ck_sf **k_sf;         /* its shared files */
};

struct ck_map {
	struct ck_sf **m_b;
	size_t m_nb, m_n;            /* buckets (a power of two), entries */
};

struct ck_store {
	char st_root[PATH_MAX];
	char st_job[CK_JOB_MAX];
	uint32_t st_retain;
	uint64_t st_inc;             /* incarnation: names shared files of this open */
	uint64_t st_last;            /* the reference checkpoint, 0: none */
	uint64_t st_max;             /* the newest chk-<id> on disk (valid or not) */
	uint32_t st_invalid;         /* checkpoints left alone: their references are unknown */
	struct ck_map st_by_path;    /* every ck_sf, by sf_f.path */
	struct ck_map st_by_key;     /* the reference set, by (worker, local, size) */
	struct ck_kept *st_kept;
	uint32_t st_nkept, st_capkept;
	struct ck_txn *st_txn;
};

struct ck_txn {
	struct ck_store *t_s;
	uint64_t t_id;
	char t_dir[PATH_MAX];
	struct ck_file *t_files;
	struct ck_sf **t_sf;         /* per file: its ck_sf, NULL for a private file */
	uint32_t t_n, t_cap;
	uint32_t *t_workers, t_nw;
	int t_new_shared;            /* shared/ gained entries: fsync it before _metadata */
	struct ck_txn_stats t_st;
};

static uint64_t h_path(const char *p)
{
	return sfs_hash_bytes(0x636b7061746811ull, p, strlen(p));
}

static uint64_t h_key(uint32_t w, const char *local, uint64_t size)
{
	return sfs_hash_bytes(sfs_hash_mum(w + SFS_HASH_P0, size ^ SFS_HASH_P1), local, strlen(local));
}

static struct ck_sf *path_find(const struct ck_store *s, const char *path)
{
	const struct ck_map *m = &s->st_by_path;

	if (!m->m_nb)
		return NULL;
	for (struct ck_sf *sf = m->m_b[h_path(path) & (m->m_nb - 1)]; sf; sf = sf->sf_next_path)
		if (!strcmp(sf->sf_f.path, path))
			return sf;
	return NULL;
}

/* Amortized O(1): the table doubles when it holds one entry per bucket. */
static int path_insert(struct ck_store *s, struct ck_sf *sf)
{
	struct ck_map *m = &s->st_by_path;
	struct ck_sf **b;

	if (m->m_n >= m->m_nb) {
		size_t nb = m->m_nb ? 2 * m->m_nb : 64;

		if (!(b = calloc(nb, sizeof(*b))))
			return sfs__err(-ENOMEM, "checkpoint store: no memory");
		for (size_t i = 0; i < m->m_nb; i++)
			for (struct ck_sf *x = m->m_b[i], *next; x; x = next) {
				next = x->sf_next_path;
				x->sf_next_path = b[h_path(x->sf_f.path) & (nb - 1)];
				b[h_path(x->sf_f.path) & (nb - 1)] = x;
			}
		free(m->m_b);
		m->m_b = b;
		m->m_nb = nb;
	}
	b = &m->m_b[h_path(sf->sf_f.path) & (m->m_nb - 1)];
	sf->sf_next_path = *b;
	*b = sf;
	m->m_n++;
	return 0;
}

static void path_remove(struct ck_store *s, struct ck_sf *sf)
{
	struct ck_map *m = &s->st_by_path;

	if (!m->m_nb)
		return;
	for (struct ck_sf **p = &m->m_b[h_path(sf->sf_f.path) & (m->m_nb - 1)]; *p; p = &(*p)->sf_next_path)
		if (*p == sf) {
			*p = sf->sf_next_path;
			m->m_n--;
			return;
		}
}

static struct ck_sf *key_find(const struct ck_store *s, uint32_t w, const char *local, uint64_t size)
{
	const struct ck_map *m = &s->st_by_key;

	if (!m->m_nb)
		return NULL;
	for (struct ck_sf *sf = m->m_b[h_key(w, local, size) & (m->m_nb - 1)]; sf; sf = sf->sf_next_key)
		if (sf->sf_f.worker == w && sf->sf_f.size == size && !strcmp(sf->sf_f.local, local))
			return sf;
	return NULL;
}

/* The reference set becomes @n files: O(n) in memory, no I/O.  On ENOMEM
 * it is left empty: the next checkpoint links everything (correct, not
 * incremental). */
static void key_rebuild(struct ck_store *s, struct ck_sf **sf, uint32_t n)
{
	struct ck_map *m = &s->st_by_key;
	size_t nb = 64;

	while (nb < 2 * (size_t)n)
		nb *= 2;
	free(m->m_b);
	memset(m, 0, sizeof(*m));
	if (!(m->m_b = calloc(nb, sizeof(*m->m_b)))) {
		sfs_log("%s: no memory for the reference set; the next checkpoint is a full one", s->st_root);
		return;
	}
	m->m_nb = nb;
	for (uint32_t i = 0; i < n; i++) {
		struct ck_sf **b = &m->m_b[h_key(sf[i]->sf_f.worker, sf[i]->sf_f.local, sf[i]->sf_f.size) & (nb - 1)];

		sf[i]->sf_next_key = *b;
		*b = sf[i];
		m->m_n++;
	}
}

static uint64_t incarnation(void)
{
	static uint64_t seq;
	struct timespec ts;
	uint64_t z;

	clock_gettime(CLOCK_REALTIME, &ts);
	z = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^
	    (++seq * 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) | 1;
}

/* Checkpoint @k leaves the retained set: its _metadata first (durably: a
 * crash after this point leaves a chk-<id> without _metadata, garbage),
 * then its directory, then the shared files nobody else references.
 * Nonzero (and nothing deleted) when _metadata cannot be removed. */
static int drop_kept(struct ck_store *s, uint32_t k)
{
	struct ck_kept kp = s->st_kept[k];
	char dir[PATH_MAX], p[PATH_MAX];

	if (fmt_path(dir, sizeof(dir), "%s/chk-%llu", s->st_root, (ull)kp.k_id) ||
	    pjoin(p, sizeof(p), dir, CK_META) || (unlink(p) && errno != ENOENT) || fsync_path(dir)) {
		sfs_log("retention: cannot remove %s (%s); chk-%llu stays", p, strerror(errno), (ull)kp.k_id);
		return -1;
	}
	sfs_fault("ck.retention");
	rm_tree(dir);
	for (uint32_t i = 0; i < kp.k_n; i++) {
		struct ck_sf *sf = kp.k_sf[i];

		if (--sf->sf_refs)
			continue;
		if (!pjoin(p, sizeof(p), s->st_root, sf->sf_f.path) && unlink(p) && errno != ENOENT)
			sfs_log("retention: cannot remove %s: %s", p, strerror(errno));
		path_remove(s, sf);
		free(sf);
	}
	free(kp.k_sf);
	memmove(&s->st_kept[k], &s->st_kept[k + 1], (s->st_nkept - k - 1) * sizeof(kp));
	s->st_nkept--;
	return 0;
}

/* Keep the newest st_retain checkpoints, and the reference one whatever
 * its age (after a restore from an older checkpoint, until the next
 * commit replaces it). */
static void retain_apply(struct ck_store *s)
{
	for (uint32_t k = 0; s->st_nkept > s->st_retain && k < s->st_nkept - s->st_retain;)
		if (s->st_kept[k].k_id == s->st_last || drop_kept(s, k))
			k++;
}

/* Room for one more retained checkpoint. */
static int kept_reserve(struct ck_store *s)
{
	if (s->st_nkept == s->st_capkept) {
		uint32_t cap = s->st_capkept ? 2 * s->st_capkept : 8;
		struct ck_kept *g = realloc(s->st_kept, cap * sizeof(*g));

		if (!g)
			return sfs__err(-ENOMEM, "checkpoint store: no memory");
		s->st_kept = g;
		s->st_capkept = cap;
	}
	return 0;
}

static void kept_push(struct ck_store *s, uint64_t id, struct ck_sf **sf, uint32_t n)
{
	s->st_kept[s->st_nkept++] = (struct ck_kept){ .k_id = id, .k_n = n, .k_sf = sf };
}

/* Take chk-<id> into the retained set from its _metadata alone.  Without
 * _metadata it is the garbage of a crash and removed; with an invalid one
 * it is reported and left alone (it protects no file). */
static int load_one(struct ck_store *s, uint64_t id)
{
	char dir[PATH_MAX], file[PATH_MAX], *buf = NULL;
	struct ck_sf **sfs;
	struct ck_meta m;
	uint32_t n = 0;
	size_t len = 0;
	int rc;

	if ((rc = fmt_path(dir, sizeof(dir), "%s/chk-%llu", s->st_root, (ull)id)) ||
	    (rc = pjoin(file, sizeof(file), dir, CK_META)))
		return rc;
	rc = meta_load(file, &buf, &len);
	if (rc == -ENOENT) {
		sfs_log("%s: no _metadata (an interrupted checkpoint or retention): removing it", dir);
		rm_tree(dir);
		return 0;
	}
	if (id > s->st_max)
		s->st_max = id;
	if (!rc) {
		rc = sfs__ck_meta_parse(file, buf, len, &m);
		free(buf);
		if (!rc && m.id != id)
			rc = sfs__err(SFS_ECORRUPT, "%s: says id %llu", file, (ull)m.id);
		else if (!rc && strcmp(m.job, s->st_job))
			rc = sfs__err(SFS_EFOREIGN, "%s: a checkpoint of job '%s', not '%s'", file, m.job, s->st_job);
		if (rc)
			sfs__ck_meta_free(&m);
	}
	if (rc) {
		sfs_log("%s; left alone", sfs_last_error());
		s->st_invalid++;
		return rc == -ENOMEM ? rc : 0;
	}
	if (!pjoin(file, sizeof(file), dir, CK_META_TMP))
		unlink(file);
	for (uint32_t i = 0; i < m.nfiles; i++) {
		struct ck_sf *sf = m.files[i].shared ? path_find(s, m.files[i].path) : NULL;

		if (sf && (sf->sf_f.size != m.files[i].size || sf->sf_f.crc != m.files[i].crc)) {
			sfs_log("%s/%s: disagrees with an older checkpoint about %s; left alone", dir, CK_META,
				m.files[i].path);
			sfs__ck_meta_free(&m);
			s->st_invalid++;
			return 0;
		}
	}
	if (!(sfs = calloc(m.nfiles + 1, sizeof(*sfs)))) {
		sfs__ck_meta_free(&m);
		return sfs__err(-ENOMEM, "checkpoint store: no memory");
	}
	for (uint32_t i = 0; i < m.nfiles; i++) {
		struct ck_sf *sf;

		if (!m.files[i].shared)
			continue;
		if (!(sf = path_find(s, m.files[i].path))) {
			if (!(sf = calloc(1, sizeof(*sf)))) {
				rc = -ENOMEM;
				break;
			}
			sf->sf_f = m.files[i];
			if ((rc = path_insert(s, sf))) {
				free(sf);
				break;
			}
		}
		sf->sf_refs++;
		sfs[n++] = sf;
	}
	sfs__ck_meta_free(&m);
	if (!rc && !(rc = kept_reserve(s)))
		kept_push(s, id, sfs, n);
	if (rc)
		free(sfs);
	return rc;
}

/* Remove what no retained checkpoint references from shared/: the
 * leftovers of a crash during a checkpoint or retention.  O(shared files),
 * once per open; nothing while an invalid or foreign checkpoint exists. */
static void gc_shared(struct ck_store *s)
{
	char dir[PATH_MAX], p[CK_PATH_MAX + 8];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	if (pjoin(dir, sizeof(dir), s->st_root, "shared") || !(d = opendir(dir)))
		return;
	if (s->st_invalid) {
		/* An invalid or foreign checkpoint may still reference any of
		 * them (a repaired _metadata, another job's storage): keep all. */
		sfs_log("%s: %u checkpoint(s) left alone; no shared file is collected", dir,
			s->st_invalid);
		closedir(d);
		return;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "shared/%s", e->d_name);
		if (path_find(s, p))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0))
			sfs_log("%s/%s: cannot remove: %s", dir, e->d_name, strerror(errno));
		else
			n++;
	}
	closedir(d);
	if (n)
		sfs_log("%s: removed %u shared files no checkpoint references", dir, n);
}

int sfs__ck_store_open(const char *root, const char *job, uint32_t retain, uint64_t base_id,
		  struct ck_store **out)
{
	struct ck_store *s;
	uint64_t *ids = NULL;
	size_t nids = 0;
	char p[PATH_MAX];
	int rc;

	*out = NULL;
	if (!job_ok(job))
		return sfs__err(SFS_EUSAGE, "checkpoint storage %s: job name '%s' is empty, too long or "
				"has a space or '/'", root, job ? job : "");
	if (!retain)
		return sfs__err(SFS_EUSAGE, "checkpoint storage %s: retain must be >= 1", root);
	if (strlen(root) + CK_PATH_MAX + 2 > PATH_MAX)
		return sfs__err(-ENAMETOOLONG, "checkpoint storage %s: path too long", root);
	if (!(s = calloc(1, sizeof(*s))))
		return sfs__err(-ENOMEM, "checkpoint storage %s: no memory", root);
	snprintf(s->st_root, sizeof(s->st_root), "%s", root);
	snprintf(s->st_job, sizeof(s->st_job), "%s", job);
	s->st_retain = retain;
	s->st_inc = incarnation();
	/* The skeleton, once: chk-<id> directories are made per checkpoint. */
	/* Durable, parents included: the power-loss test (tests/e2e_powerloss.sh)
	 * showed that with mkdir(2) alone the data directory's entry of
	 * checkpoints/ was never fsynced, and a power loss took every
	 * checkpoint with it although each commit fsynced its own files and
	 * checkpoints/ itself. */
	if ((rc = sfs_mkdirs_durable(root, CK_DIR_MODE)) || (rc = pjoin(p, sizeof(p), root, "shared")) ||
	    (rc = sfs_mkdirs_durable(p, CK_DIR_MODE)) ||
	    (rc = sfs__ck_ids(root, &ids, &nids)))
		goto fail;
	for (size_t i = nids; i-- > 0;)
		if ((rc = load_one(s, ids[i])))
			goto fail;
	/* The reference set: the newest retained checkpoint at or below
	 * @base_id whose files are all there (stat only, no reads). */
	for (uint32_t k = s->st_nkept; k-- > 0;) {
		struct ck_meta m;

		if (s->st_kept[k].k_id > base_id)
			continue;
		snprintf(p, sizeof(p), "%s/chk-%llu", root, (ull)s->st_kept[k].k_id);
		if (sfs__ck_read(p, job, 0, &m)) {
			sfs_log("%s; not usable as the base of the next checkpoint", sfs_last_error());
			continue;
		}
		sfs__ck_meta_free(&m);
		s->st_last = s->st_kept[k].k_id;
		key_rebuild(s, s->st_kept[k].k_sf, s->st_kept[k].k_n);
		break;
	}
	retain_apply(s);
	gc_shared(s);
	free(ids);
	*out = s;
	return 0;
fail:
	free(ids);
	sfs__ck_store_close(s);
	return rc;
}

void sfs__ck_store_close(struct ck_store *s)
{
	if (!s)
		return;
	if (s->st_txn)
		sfs__ck_txn_abort(s->st_txn);
	for (size_t i = 0; i < s->st_by_path.m_nb; i++)
		for (struct ck_sf *sf = s->st_by_path.m_b[i], *next; sf; sf = next) {
			next = sf->sf_next_path;
			free(sf);
		}
	for (uint32_t k = 0; k < s->st_nkept; k++)
		free(s->st_kept[k].k_sf);
	free(s->st_kept);
	free(s->st_by_path.m_b);
	free(s->st_by_key.m_b);
	free(s);
}

uint64_t sfs__ck_store_last(const struct ck_store *s)
{
	return s->st_last;
}

uint64_t sfs__ck_store_max_id(const struct ck_store *s)
{
	return s->st_max;
}

int sfs__ck_txn_begin(struct ck_store *s, uint64_t id, struct ck_txn **out)
{
	struct ck_txn *t;

	*out = NULL;
	if (s->st_txn)
		return sfs__err(SFS_EUSAGE, "%s: checkpoint %llu is still open", s->st_root,
				(ull)s->st_txn->t_id);
	if (id <= s->st_max)
		return sfs__err(SFS_EUSAGE, "%s: checkpoint id %llu is not above the newest, chk-%llu",
				s->st_root, (ull)id, (ull)s->st_max);
	if (!(t = calloc(1, sizeof(*t))))
		return sfs__err(-ENOMEM, "%s: no memory", s->st_root);
	t->t_s = s;
	t->t_id = id;
	if (fmt_path(t->t_dir, sizeof(t->t_dir), "%s/chk-%llu", s->st_root, (ull)id) ||
	    mkdir(t->t_dir, CK_DIR_MODE)) {
		int rc = sfs__err(sfs__errno(), "cannot create %s: %s", t->t_dir, strerror(errno));

		free(t);
		return rc;
	}
	s->st_txn = t;
	*out = t;
	return 0;
}

static int txn_push(struct ck_txn *t, const struct ck_file *f, struct ck_sf *sf)
{
	if (t->t_n == t->t_cap) {
		uint32_t cap = t->t_cap ? 2 * t->t_cap : 64;
		struct ck_file *files = realloc(t->t_files, cap * sizeof(*files));
		struct ck_sf **sfs = files ? realloc(t->t_sf, cap * sizeof(*sfs)) : NULL;

		if (files)
			t->t_files = files;
		if (!sfs)
			return sfs__err(-ENOMEM, "checkpoint %llu: no memory", (ull)t->t_id);
		t->t_sf = sfs;
		t->t_cap = cap;
	}
	t->t_files[t->t_n] = *f;
	t->t_sf[t->t_n++] = sf;
	return 0;
}

/* SFS_CK_LINK_ALL=1: the benchmark's "link every live file" ablation. */
static int link_all(void)
{
	static int on = -1;

	if (on < 0) {
		const char *e = getenv("SFS_CK_LINK_ALL");

		on = e && strcmp(e, "1") == 0;
	}
	return on;
}

/* A shared file: a reference when the reference set has it (no I/O),
 * else linked under a name of this incarnation, fsynced and summed once. */
static int add_shared(struct ck_txn *t, uint32_t w, const char *src, const char *name, uint64_t size)
{
	struct ck_store *s = t->t_s;
	struct ck_sf *sf = key_find(s, w, name, size);
	struct sfs_copy_info ci = { .progress = sfs_child_progress };
	char dst[PATH_MAX];
	uint64_t got = 0;
	int rc;

	if (sf) {
		t->t_st.referenced++;
		if (link_all()) {
			/* the ablation: what linking every live file would cost (a link
			 * under a scratch name and its removal; the bookkeeping stays) */
			if ((rc = pjoin(dst, sizeof(dst), s->st_root, "shared/.link-all")))
				return rc;
			if (link(src, dst) == 0 || errno == EEXIST)
				t->t_st.links++;
			unlink(dst);
		}
		return txn_push(t, &sf->sf_f, sf);
	}
	if (!(sf = calloc(1, sizeof(*sf))))
		return sfs__err(-ENOMEM, "checkpoint %llu: no memory", (ull)t->t_id);
	sf->sf_f.shared = 1;
	sf->sf_f.worker = w;
	snprintf(sf->sf_f.local, sizeof(sf->sf_f.local), "%s", name);
	for (int tries = 0;; tries++) {
		if ((rc = fmt_path(sf->sf_f.path, sizeof(sf->sf_f.path), "shared/w%u-%016llx-%s", w,
				   (ull)s->st_inc, name)) ||
		    (rc = pjoin(dst, sizeof(dst), s->st_root, sf->sf_f.path)))
			break;
		rc = sfs_link_or_copy(src, dst, SFS_EXIST_FAIL, CK_DIR_MODE, &ci);
		if (rc != -EEXIST || tries == 4)
			break;
		s->st_inc = incarnation();	/* taken (a name reused after a restore) */
	}
	if (rc) {
		free(sf);
		return rc;
	}
	if (!ci.copied)
		rc = crc_file(dst, 1, &sf->sf_f.crc, &got);
	else
		sf->sf_f.crc = ci.crc, got = ci.size;
	if (!rc && got != size)
		rc = sfs__err(SFS_ECORRUPT, "%s: %llu bytes when listed, %llu when linked (still being written?)",
			      src, (ull)size, (ull)got);
	sf->sf_f.size = got;
	if (!rc)
		rc = txn_push(t, &sf->sf_f, sf);
	if (rc) {
		unlink(dst);
		free(sf);
		return rc;
	}
	t->t_new_shared = 1;
	if (ci.copied)
		t->t_st.copies++;
	else
		t->t_st.links++;
	t->t_st.new_bytes += got;
	return path_insert(s, sf);	/* on failure abort still finds it in t_sf */
}

static int add_private(struct ck_txn *t, uint32_t w, const char *src, const char *name)
{
	struct sfs_copy_info ci = { .progress = sfs_child_progress };
	struct ck_file f;
	char dst[PATH_MAX];
	int rc;

	memset(&f, 0, sizeof(f));
	f.worker = w;
	snprintf(f.local, sizeof(f.local), "%s", name);
	if ((rc = fmt_path(f.path, sizeof(f.path), "chk-%llu/w%u/%s", (ull)t->t_id, w, name)) ||
	    (rc = pjoin(dst, sizeof(dst), t->t_s->st_root, f.path)) ||
	    (rc = sfs_copy_file(src, dst, SFS_EXIST_FAIL, CK_DIR_MODE, &ci)))
		return rc;
	f.crc = ci.crc;
	f.size = ci.size;
	t->t_st.copies++;
	t->t_st.new_bytes += f.size;
	return txn_push(t, &f, NULL);
}

static int cmp_dirent(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file of @dir: shared (immutable, linked once) or private
 * (copied).  Counts the private ones in *@nprivate. */
static int add_files(struct ck_txn *t, uint32_t worker, const char *dir, int shared,
		     uint32_t *nprivate)
{
	struct dirent **ents;
	char p[PATH_MAX];
	int n, rc = 0;

	if ((n = scandir(dir, &ents, NULL, cmp_dirent)) < 0)
		return sfs__err(sfs__errno(), "staged directory %s: %s", dir, strerror(errno));
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		size_t len = strlen(name);
		struct stat st;

		if (rc || !strcmp(name, ".") || !strcmp(name, ".."))
			;
		else if (!sfs__ck_name_ok(name, len))
			rc = sfs__err(SFS_EUSAGE, "%s/%s: a name a checkpoint cannot carry (space, control "
				      "byte or over %u bytes)", dir, name, CK_LOCAL_MAX);
		else if ((rc = pjoin(p, sizeof(p), dir, name)))
			;
		else if (lstat(p, &st))
			rc = sfs__err(sfs__errno(), "%s: %s", p, strerror(errno));
		else if (!shared && S_ISDIR(st.st_mode) && !strcmp(name, SFS_STAGE_SHARED))
			rc = add_files(t, worker, p, 1, nprivate);
		else if (!S_ISREG(st.st_mode))
			rc = sfs__err(SFS_EUSAGE, "%s: not a regular file", p);
		else if (shared)
			rc = add_shared(t, worker, p, name, (uint64_t)st.st_size);
		else if (!(rc = add_private(t, worker, p, name)))
			(*nprivate)++;
		free(ents[i]);
	}
	free(ents);
	return rc;
}

int sfs__ck_txn_add_dir(struct ck_txn *t, uint32_t worker, const char *staged)
{
	uint32_t *ws, nprivate = 0;
	char p[PATH_MAX];
	int rc;

	for (uint32_t i = 0; i < t->t_nw; i++)
		if (t->t_workers[i] == worker)
			return sfs__err(SFS_EUSAGE, "checkpoint %llu: worker %u added twice", (ull)t->t_id, worker);
	if (!(ws = realloc(t->t_workers, (t->t_nw + 1) * sizeof(*ws))))
		return sfs__err(-ENOMEM, "checkpoint %llu: no memory", (ull)t->t_id);
	t->t_workers = ws;
	if (access(staged, F_OK))
		return sfs__err(sfs__errno(), "staged directory %s: %s", staged, strerror(errno));
	ws[t->t_nw++] = worker;
	rc = add_files(t, worker, staged, 0, &nprivate);
	if (!rc && nprivate) {
		if (!(rc = fmt_path(p, sizeof(p), "%s/w%u", t->t_dir, worker)))
			rc = fsync_path(p);
	}
	return rc;
}

static int meta_check(const struct ck_txn *t, const struct ck_meta *m)
{
	const char *what = NULL;

	if (m->id && m->id != t->t_id)
		what = "id differs from the txn's";
	else if (m->job[0] && strcmp(m->job, t->t_s->st_job))
		return sfs__err(SFS_EFOREIGN, "checkpoint %llu: job '%s', the store's is '%s'",
				(ull)t->t_id, m->job, t->t_s->st_job);
	else if (!m->workers || m->workers > (1u << 16))
		what = "workers must be in [1, 65536]";
	else if (strnlen(m->config, CK_CONFIG_MAX) == CK_CONFIG_MAX)
		what = "config too long";
	else if (m->nsplits)
		what = "source offsets per split are format 1's: write sources";
	else if (m->nsources > m->workers || m->ntables > CK_LIST_MAX)
		what = "more sources than workers, or too many tables";
	for (const char *c = m->config; !what && *c; c++)
		if ((unsigned char)*c < ' ' || (unsigned char)*c >= 0x7f)
			what = "config has a control or non-ASCII byte";
	for (uint32_t i = 0; !what && i < m->nsources; i++)
		if (m->sources[i].worker >= m->workers || m->sources[i].len > CK_SOURCE_MAX ||
		    (m->sources[i].len && !m->sources[i].bytes))
			what = "a source's worker is not below workers, or its bytes are over 4096";
	for (uint32_t i = 0; !what && i < m->ntables; i++)
		if (m->tables[i].worker >= m->workers)
			what = "a table's worker is not below workers";
	for (uint32_t i = 0; !what && i < t->t_nw; i++)
		if (t->t_workers[i] >= m->workers)
			what = "a worker added to the txn is not below workers";
	return what ? sfs__err(SFS_EUSAGE, "checkpoint %llu: %s", (ull)t->t_id, what) : 0;
}

static int write_meta(struct ck_txn *t, const struct ck_meta *w)
{
	char tmp[PATH_MAX], file[PATH_MAX], *buf = NULL;
	size_t len = 0;
	int fd, rc;

	if ((rc = pjoin(tmp, sizeof(tmp), t->t_dir, CK_META_TMP)) ||
	    (rc = pjoin(file, sizeof(file), t->t_dir, CK_META)) ||
	    (rc = sfs__ck_meta_format(w, &buf, &len)))
		return rc;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);	/* private, as its directory */
	if (fd < 0)
		rc = sfs__err(sfs__errno(), "create %s: %s", tmp, strerror(errno));
	else if (!(rc = sfs_write_all(fd, buf, len, tmp)) && fsync(fd))
		rc = sfs__err(sfs__errno(), "fsync %s: %s", tmp, strerror(errno));
	if (fd >= 0 && close(fd) && !rc)
		rc = sfs__err(sfs__errno(), "close %s: %s", tmp, strerror(errno));
	free(buf);
	if (rc)
		return rc;
	sfs_fault("ck.commit.meta-tmp");
	if (rename(tmp, file))
		return sfs__err(sfs__errno(), "rename %s: %s", tmp, strerror(errno));
	if ((rc = fsync_path(t->t_dir)) || (rc = fsync_path(t->t_s->st_root)))
		return rc;
	sfs_fault("ck.commit.renamed");
	return 0;
}

int sfs__ck_txn_commit(struct ck_txn *t, const struct ck_meta *m, struct ck_txn_stats *stats)
{
	struct ck_store *s = t->t_s;
	struct ck_sf **ksf = NULL;
	struct ck_meta w;
	struct timespec ts;
	char p[PATH_MAX];
	uint32_t nsh = 0;
	int rc;

	if ((rc = meta_check(t, m)))
		goto fail;
	w = *m;
	w.version = CK_FORMAT_VERSION;
	w.id = t->t_id;
	snprintf(w.job, sizeof(w.job), "%s", s->st_job);
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!w.time_ms)
		w.time_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	w.files = t->t_files;
	w.nfiles = t->t_n;
	w.total_bytes = 0;
	w.new_bytes = t->t_st.new_bytes;
	for (uint32_t i = 0; i < t->t_n; i++)
		w.total_bytes += t->t_files[i].size;
	/* Everything that can fail in memory, before the checkpoint exists. */
	rc = -ENOMEM;
	if (!(ksf = calloc(t->t_n + 1, sizeof(*ksf))) || kept_reserve(s))
		goto fail;
	if (t->t_new_shared && ((rc = pjoin(p, sizeof(p), s->st_root, "shared")) || (rc = fsync_path(p))))
		goto fail;
	if ((rc = fsync_path(t->t_dir)))
		goto fail;
	sfs_fault("ck.commit.linked");
	if ((rc = write_meta(t, &w)))
		goto fail;

	/* Committed: the txn's files become the reference set, then retention. */
	for (uint32_t i = 0; i < t->t_n; i++)
		if (t->t_sf[i]) {
			t->t_sf[i]->sf_refs++;
			ksf[nsh++] = t->t_sf[i];
		}
	kept_push(s, t->t_id, ksf, nsh);
	key_rebuild(s, ksf, nsh);
	s->st_last = s->st_max = t->t_id;
	retain_apply(s);
	if (stats)
		*stats = t->t_st;
	s->st_txn = NULL;
	free(t->t_files);
	free(t->t_sf);
	free(t->t_workers);
	free(t);
	return 0;
fail:
	if (rc == -ENOMEM)
		sfs__err(rc, "checkpoint %llu: no memory", (ull)t->t_id);
	free(ksf);
	sfs__ck_txn_abort(t);
	return rc;
}

void sfs__ck_txn_abort(struct ck_txn *t)
{
	struct ck_store *s = t->t_s;
	char p[PATH_MAX];

	for (uint32_t i = 0; i < t->t_n; i++) {
		struct ck_sf *sf = t->t_sf[i];

		if (!sf || sf->sf_refs)
			continue;
		if (!pjoin(p, sizeof(p), s->st_root, sf->sf_f.path))
			unlink(p);
		path_remove(s, sf);
		free(sf);
	}
	rm_tree(t->t_dir);
	s->st_txn = NULL;
	free(t->t_files);
	free(t->t_sf);
	free(t->t_workers);
	free(t);
}

/* ---- readers ------------------------------------------------------------------------ */

int sfs__ck_latest(const char *root, const char *job, int verify, struct ck_meta *m, char *dir,
	      size_t dirlen)
{
	char d[PATH_MAX];
	uint64_t *ids;
	size_t n;
	int rc, refused = 0;

	memset(m, 0, sizeof(*m));
	if ((rc = sfs__ck_ids(root, &ids, &n)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		snprintf(d, sizeof(d), "%s/chk-%llu", root, (ull)ids[i]);
		rc = sfs__ck_read(d, job, verify, m);
		if (!rc) {
			if (refused)
				sfs_log("falling back to chk-%llu (%s)", (ull)ids[i], d);
			if (dir)
				snprintf(dir, dirlen, "%s", d);
			free(ids);
			return 0;
		}
		if (rc == -ENOMEM)
			break;
		sfs_log("checkpoint refused: %s", sfs_last_error());
		refused++;
	}
	free(ids);
	if (rc == -ENOMEM)
		return rc;
	return sfs__err(-ENOENT, "%s: no valid checkpoint%s%s (%d refused)", root, job ? " of job " : "",
			job ? job : "", refused);
}

int sfs__ck_list(const char *root, FILE *out)
{
	uint64_t *ids;
	size_t n;
	int rc = sfs__ck_ids(root, &ids, &n);

	if (rc)
		return rc;
	fprintf(out, "%-8s %-20s %-16s %12s %12s %7s\n", "id", "time (UTC)", "job", "size", "new", "files");
	for (size_t i = 0; i < n; i++) {
		char d[PATH_MAX], when[32];
		struct ck_meta m;
		struct tm tm;
		time_t sec;

		snprintf(d, sizeof(d), "%s/chk-%llu", root, (ull)ids[i]);
		if (sfs__ck_read(d, NULL, 0, &m)) {
			fprintf(out, "%-8llu invalid: %s\n", (ull)ids[i], sfs_last_error());
			continue;
		}
		sec = (time_t)(m.time_ms / 1000);
		gmtime_r(&sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(out, "%-8llu %-20s %-16s %12llu %12llu %7u\n", (ull)m.id, when, m.job,
			(ull)m.total_bytes, (ull)m.new_bytes, m.nfiles);
		sfs__ck_meta_free(&m);
	}
	if (!n)
		fprintf(out, "(no checkpoints under %s)\n", root);
	free(ids);
	return 0;
}

/* Worker @w's files of @m into @dest; @staged: shared ones in its
 * SFS_STAGE_SHARED subdirectory, as a target stages them, else flat. */
static int put_worker(const struct ck_meta *m, const char *root, uint32_t w, const char *dest,
		      int staged)
{
	char src[PATH_MAX], dst[PATH_MAX], sub[PATH_MAX];
	int rc = sfs_mkdirs(dest, CK_DIR_MODE);   /* a data directory: private */

	if (!rc && staged && !(rc = pjoin(sub, sizeof(sub), dest, SFS_STAGE_SHARED)))
		rc = sfs_mkdirs(sub, CK_DIR_MODE);
	for (uint32_t i = 0; !rc && i < m->nfiles; i++) {
		const struct ck_file *f = &m->files[i];
		struct sfs_copy_info ci = { .progress = sfs_child_progress };

		if (f->worker != w)
			continue;
		if ((rc = pjoin(src, sizeof(src), root, f->path)) ||
		    (rc = pjoin(dst, sizeof(dst), staged && f->shared ? sub : dest, f->local)))
			break;
		rc = f->shared ? sfs_link_or_copy(src, dst, SFS_EXIST_FAIL, CK_DIR_MODE, &ci)
			       : sfs_copy_file(src, dst, SFS_EXIST_FAIL, CK_DIR_MODE, &ci);
		/* A copy read every byte anyway: check it on the way. */
		if (!rc && ci.copied && (ci.crc != f->crc || ci.size != f->size))
			rc = sfs__err(SFS_ECORRUPT, "%s: crc32c 0x%08x and %llu bytes, checkpoint %llu says "
				      "0x%08x and %llu", src, ci.crc, (ull)ci.size, (ull)m->id, f->crc,
				      (ull)f->size);
	}
	return rc ? rc : fsync_path(dest);
}

int sfs__ck_restore_worker(const struct ck_meta *m, const char *root, uint32_t w, const char *dest)
{
	return put_worker(m, root, w, dest, 0);
}

int sfs__ck_stage_carry(const struct ck_meta *m, const char *root, uint32_t w, const char *dest)
{
	return put_worker(m, root, w, dest, 1);
}

static int dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int empty = 1;

	if (!d)
		return 0;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

int sfs__ck_savepoint(const char *root, const char *src, const char *dest)
{
	char sdir[PATH_MAX], ddir[PATH_MAX], s[PATH_MAX], d[PATH_MAX];
	struct sfs_copy_info ci = { .progress = sfs_child_progress };
	struct ck_meta m, check;
	int rc;

	if (strchr(src, '/'))
		snprintf(sdir, sizeof(sdir), "%s", src);
	else if ((rc = pjoin(sdir, sizeof(sdir), root, src)))
		return rc;
	if ((rc = sfs__ck_read(sdir, NULL, 1, &m)))
		return rc;
	if (mkdir(dest, CK_DIR_MODE) && (errno != EEXIST || !dir_empty(dest))) {
		rc = errno == EEXIST ? sfs__err(-EEXIST, "savepoint %s: exists and is not empty", dest)
				     : sfs_mkdirs(dest, CK_DIR_MODE);
		if (rc)
			goto out;
	}
	snprintf(ddir, sizeof(ddir), "%s/chk-%llu", dest, (ull)m.id);
	if ((rc = pjoin(d, sizeof(d), dest, "shared")) || (rc = sfs_mkdirs(d, CK_DIR_MODE)) ||
	    (rc = sfs_mkdirs(ddir, CK_DIR_MODE)))
		goto out;
	for (uint32_t i = 0; !rc && i < m.nfiles; i++) {
		const struct ck_file *f = &m.files[i];

		if ((rc = pjoin(s, sizeof(s), root, f->path)) || (rc = pjoin(d, sizeof(d), dest, f->path)) ||
		    (rc = sfs_link_or_copy(s, d, SFS_EXIST_FAIL, CK_DIR_MODE, &ci)))
			break;
		/* Files are grouped by worker: sync a private directory once. */
		if (!f->shared && (i + 1 == m.nfiles || m.files[i + 1].worker != f->worker ||
				   m.files[i + 1].shared)) {
			*strrchr(d, '/') = 0;
			rc = fsync_path(d);
		}
	}
	if (rc || (rc = pjoin(s, sizeof(s), sdir, CK_META)) || (rc = pjoin(d, sizeof(d), ddir, CK_META_TMP)) ||
	    (rc = sfs_copy_file(s, d, SFS_EXIST_FAIL, CK_DIR_MODE, &ci)))
		goto out;
	if ((rc = pjoin(s, sizeof(s), ddir, CK_META)))
		goto out;
	if (rename(d, s)) {
		rc = sfs__err(sfs__errno(), "rename %s: %s", d, strerror(errno));
		goto out;
	}
	if ((rc = fsync_path(ddir)) || (rc = pjoin(d, sizeof(d), dest, "shared")) || (rc = fsync_path(d)) ||
	    (rc = fsync_path(dest)) || (rc = sfs__ck_read(ddir, m.job, 0, &check)))
		goto out;
	sfs__ck_meta_free(&check);
out:
	sfs__ck_meta_free(&m);
	return rc;
}
