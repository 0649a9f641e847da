/*
 * sink.c — the epoch table, its changelogs and their replay (sink.h).
 *
 * Changelog file (little-endian, one per worker and epoch):
 *   "SFSSINK1" u32 worker u32 0 u64 epoch
 *   records: u8 op ('U' upsert key+row, 'D' delete key, 'C' count row by
 *            delta) u32 klen u32 rlen i64 delta, key bytes, row bytes
 *   "SFSSEND1" u64 records u64 hash (of every record's bytes, chained)
 * A file without its trailer, or whose hash differs, is refused by name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfs.h"
#include "sfs_keygroup.h"	/* sfs_hash_bytes */
#include "runtime/sink.h"
#include "runtime/util.h"

struct rt_sink_ent {
	uint64_t hash;
	int64_t count;
	uint32_t klen, rlen;
	uint32_t cap;   /* bytes allocated for key + row */
	uint32_t keyed; /* an upsert/delete entry (count 1: row, 0: deleted) */
	char bytes[];   /* key, then row (a multiset row is the key) */
};

static uint64_t key_hash(const void *k, size_t n)
{
	return sfs_hash_bytes(SFS_HASH_P0 ^ n, k, n) | 1;
}

int rt_sink_init(struct rt_sink *s, int mode)
{
	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->materialize = mode != RT_SINK_DISCARD;
	if (!s->materialize)
		return 0;
	s->cap = 1024;
	s->slot = calloc(s->cap, sizeof(*s->slot));
	return s->slot ? 0 : rt_err(-ENOMEM, "sink: out of memory");
}

void rt_sink_free(struct rt_sink *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

static size_t find(const struct rt_sink *s, uint64_t h, const void *k, size_t klen)
{
	size_t mask = s->cap - 1, i = h & mask;

	for (;; i = (i + 1) & mask) {
		const struct rt_sink_ent *e = s->slot[i];

		if (!e || (e->hash == h && e->klen == klen && !memcmp(e->bytes, k, klen)))
			return i;
	}
}

static int grow(struct rt_sink *s)
{
	size_t ncap = s->cap * 2;
	struct rt_sink_ent **ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return rt_err(-ENOMEM, "sink: out of memory (%zu rows)", s->used);
	for (size_t i = 0; i < s->cap; i++) {
		struct rt_sink_ent *e = s->slot[i];
		size_t j;

		if (!e)
			continue;
		for (j = e->hash & (ncap - 1); ns[j]; j = (j + 1) & (ncap - 1))
			;
		ns[j] = e;
	}
	free(s->slot);
	s->slot = ns;
	s->cap = ncap;
	return 0;
}

/* Backward-shift deletion keeps every probe chain unbroken. */
static void remove_at(struct rt_sink *s, size_t i)
{
	size_t mask = s->cap - 1, j = i;

	free(s->slot[i]);
	s->slot[i] = NULL;
	s->used--;
	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		if (!s->slot[j])
			return;
		home = s->slot[j]->hash & mask;
		/* move j to the hole at i unless its home lies in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			s->slot[i] = s->slot[j];
			s->slot[j] = NULL;
			i = j;
		}
	}
}

static struct rt_sink_ent *ent_new(uint64_t h, const void *k, size_t klen, const char *row,
				   size_t rlen)
{
	struct rt_sink_ent *e = malloc(sizeof(*e) + klen + rlen);

	if (!e)
		return NULL;
	e->hash = h;
	e->count = 1;
	e->keyed = 1;
	e->klen = (uint32_t)klen;
	e->rlen = (uint32_t)rlen;
	e->cap = (uint32_t)(klen + rlen);
	memcpy(e->bytes, k, klen);
	memcpy(e->bytes + klen, row, rlen);
	return e;
}

int rt_sink_put(struct rt_sink *s, const void *key, size_t klen, const char *row, size_t rlen)
{
	uint64_t h;
	size_t i;
	struct rt_sink_ent *e;

	s->changes++;
	if (!s->materialize)
		return 0;
	if ((s->used + 1) * 4 > s->cap * 3 && grow(s))
		return -ENOMEM;
	h = key_hash(key, klen);
	i = find(s, h, key, klen);
	e = s->slot[i];
	if (e && e->count && e->rlen == rlen && !memcmp(e->bytes + klen, row, rlen))
		return 0;
	if (e && e->cap >= klen + rlen) {
		/* an update of a key: the row is rewritten in place, no allocation */
		memcpy(e->bytes + klen, row, rlen);
		e->rlen = (uint32_t)rlen;
		e->count = 1;
		return 0;
	}
	e = ent_new(h, key, klen, row, rlen);
	if (!e)
		return rt_err(-ENOMEM, "sink: out of memory");
	if (s->slot[i])
		free(s->slot[i]);
	else
		s->used++;
	s->slot[i] = e;
	return 0;
}

int rt_sink_del(struct rt_sink *s, const void *key, size_t klen)
{
	size_t i;

	s->changes++;
	if (!s->materialize)
		return 0;
	if (s->mode == RT_SINK_EPOCH) {
		/* a tombstone: the delete must reach the changelog */
		uint64_t h = key_hash(key, klen);

		if ((s->used + 1) * 4 > s->cap * 3 && grow(s))
			return -ENOMEM;
		i = find(s, h, key, klen);
		if (!s->slot[i]) {
			if (!(s->slot[i] = ent_new(h, key, klen, "", 0)))
				return rt_err(-ENOMEM, "sink: out of memory");
			s->used++;
		}
		s->slot[i]->rlen = 0;
		s->slot[i]->count = 0;
		return 0;
	}
	/* TABLE: a consolidated epoch may delete a key it put itself (put and
	 * delete in one epoch leave the delete): absent is fine */
	i = find(s, key_hash(key, klen), key, klen);
	if (s->slot[i])
		remove_at(s, i);
	return 0;
}

int rt_sink_add(struct rt_sink *s, const char *row, size_t rlen, int64_t delta)
{
	int64_t sum;
	uint64_t h;
	size_t i;

	s->changes++;
	if (!s->materialize)
		return 0;
	if ((s->used + 1) * 4 > s->cap * 3 && grow(s))
		return -ENOMEM;
	h = key_hash(row, rlen);
	i = find(s, h, row, rlen);
	if (!s->slot[i]) {
		s->slot[i] = ent_new(h, row, rlen, "", 0);
		if (!s->slot[i])
			return rt_err(-ENOMEM, "sink: out of memory");
		s->slot[i]->keyed = 0;
		s->slot[i]->count = delta;
		s->used++;
		return 0;
	}
	/* a corrupt changelog's deltas (the replay's) must not wrap a count */
	if (__builtin_add_overflow(s->slot[i]->count, delta, &sum))
		return rt_err(-EOVERFLOW, "sink: a row's count overflows (%" PRId64 " more)", delta);
	s->slot[i]->count = sum;
	if (s->slot[i]->count == 0)
		remove_at(s, i);
	return 0;
}

static const char *row_of(const struct rt_sink_ent *e, size_t *len)
{
	/* keyed rows carry the row after the key; multiset rows are the key */
	if (e->keyed) {
		*len = e->rlen;
		return e->bytes + e->klen;
	}
	*len = e->klen;
	return e->bytes;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct rt_sink_ent *x = *(const struct rt_sink_ent *const *)a;
	const struct rt_sink_ent *y = *(const struct rt_sink_ent *const *)b;
	size_t xl, yl;
	const char *xr = row_of(x, &xl), *yr = row_of(y, &yl);
	int c = memcmp(xr, yr, xl < yl ? xl : yl);

	return c ? c : (xl > yl) - (xl < yl);
}


static void sink_dir(char *buf, size_t len, const char *data_dir)
{
	snprintf(buf, len, "%s/" RT_SINK_DIR, data_dir);
}

void rt_sink_path(char *buf, size_t len, const char *data_dir, uint32_t w, uint64_t epoch,
		  int committed)
{
	snprintf(buf, len, "%s/" RT_SINK_DIR "/w%u-e%020" PRIu64 ".%s", data_dir, w, epoch,
		 committed ? "log" : "pending");
}

/* ---- changelogs ------------------------------------------------------------------ */

static const char LOG_MAGIC[8] = "SFSSINK1", LOG_END[8] = "SFSSEND1";

struct rec_hdr {
	uint8_t op;
	uint8_t pad[3];
	uint32_t klen, rlen;
	uint32_t pad2;
	int64_t delta;
};

/* fsync directory @dir: the entries renamed or made in it become durable. */
static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return rt_err(rt_errno(), "%s: open: %s", dir, strerror(errno));
	if (fsync(fd))
		rc = rt_err(rt_errno(), "%s: fsync: %s", dir, strerror(errno));
	close(fd);
	return rc;
}

/*
 * The pre-commit of an epoch is durable before the worker seals it: the
 * file is fsynced before its rename (rt_file_commit), the sink directory
 * after it, and the sink directory's own entry in the data directory when
 * it is made.  The power-loss test (tests/e2e_powerloss.sh) showed both
 * directory fsyncs missing: after a power loss the checkpoint that covers
 * epoch N was there but `sink/` or its `wW-eN.pending` was not, and
 * `--restore latest` gave a result without those epochs' rows.
 */
int rt_sink_write_epoch(struct rt_sink *s, const char *data_dir, uint32_t w, uint64_t epoch,
			uint64_t *records)
{
	char path[4096], tmp[4200];
	uint64_t n = 0, h = SFS_HASH_P0;
	uint32_t hw[2] = { w, 0 };
	FILE *f;
	int rc;

	*records = 0;
	if (s->mode != RT_SINK_EPOCH)
		return 0;
	rt_sink_path(path, sizeof(path), data_dir, w, epoch, 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f && errno == ENOENT) {
		/* the directory on the first miss only (made once, no cache of
		 * it); one mkdir(2): the data directory exists (`sfs run` makes
		 * it), and another worker may have made the sink's already.
		 * 0700: it lives in the data directory, which is private */
		char dir[4096];

		sink_dir(dir, sizeof(dir), data_dir);
		if (mkdir(dir, 0700) && errno != EEXIST)
			return rt_err(rt_errno(), "%s: mkdir: %s", dir, strerror(errno));
		if ((rc = sync_dir(data_dir)))
			return rc;
		f = fopen(tmp, "w");
	}
	if (!f)
		return rt_err(rt_errno(), "%s: %s", tmp, strerror(errno));
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	fwrite(LOG_MAGIC, 1, 8, f);
	fwrite(hw, sizeof(hw), 1, f);
	fwrite(&epoch, sizeof(epoch), 1, f);
	for (size_t i = 0; i < s->cap; i++) {
		struct rt_sink_ent *e = s->slot[i];
		struct rec_hdr r;

		if (!e)
			continue;
		memset(&r, 0, sizeof(r));
		r.op = !e->keyed ? 'C' : e->count ? 'U' : 'D';
		r.klen = e->klen;
		r.rlen = e->keyed ? e->rlen : 0;
		r.delta = e->count;
		fwrite(&r, sizeof(r), 1, f);
		fwrite(e->bytes, 1, (size_t)r.klen + r.rlen, f);
		h = sfs_hash_bytes(h, &r, sizeof(r));
		h = sfs_hash_bytes(h, e->bytes, (size_t)r.klen + r.rlen);
		n++;
	}
	fwrite(LOG_END, 1, 8, f);
	fwrite(&n, sizeof(n), 1, f);
	fwrite(&h, sizeof(h), 1, f);
	rc = rt_file_commit(f, tmp, path, 0);
	if (rc == 0) {
		char dir[4096];

		sink_dir(dir, sizeof(dir), data_dir);
		rc = sync_dir(dir);
	}
	if (rc)
		return rc;	/* the epoch's rows stay: a retry writes them again */
	for (size_t i = 0; i < s->cap; i++) {
		free(s->slot[i]);
		s->slot[i] = NULL;
	}
	s->used = 0;
	*records = n;
	return 0;
}

/* "w<w>-e<epoch>.<ext>": 1 and the fields, or 0. */
static int parse_name(const char *name, uint32_t *w, uint64_t *epoch, const char **ext)
{
	char *end;
	unsigned long lw;

	if (name[0] != 'w')
		return 0;
	lw = strtoul(name + 1, &end, 10);
	if (end == name + 1 || end[0] != '-' || end[1] != 'e' || lw > UINT32_MAX)
		return 0;
	*epoch = strtoull(end + 2, &end, 10);
	if (*end != '.')
		return 0;
	*w = (uint32_t)lw;
	*ext = end + 1;
	return 1;
}

/* rt_sink_commit_upto's walk, for worker @only's changelogs (UINT32_MAX: all);
 * the directory fsynced after it with @sync. */
static int commit_upto(const char *data_dir, uint32_t only, uint64_t upto, int drop_newer,
		       int sync)
{
	char dir[4096], from[4400], to[4500];
	struct dirent *d;
	DIR *dp;
	int rc = 0, fd;

	sink_dir(dir, sizeof(dir), data_dir);
	dp = opendir(dir);
	if (!dp)
		return errno == ENOENT ? 0 : rt_err(rt_errno(), "%s: %s", dir, strerror(errno));
	while ((d = readdir(dp))) {
		uint32_t w;
		uint64_t e;
		const char *ext;

		if (!parse_name(d->d_name, &w, &e, &ext) || (only != UINT32_MAX && w != only))
			continue;
		snprintf(from, sizeof(from), "%s/%s", dir, d->d_name);
		if (strcmp(ext, "pending") == 0 && e <= upto) {
			rt_sink_path(to, sizeof(to), data_dir, w, e, 1);
			if (rename(from, to) && !rc)
				rc = rt_err(rt_errno(), "commit %s: %s", from, strerror(errno));
		} else if (drop_newer && e > upto && strcmp(ext, "pending") == 0) {
			unlink(from);
		} else if (drop_newer && e > upto && strcmp(ext, "log") == 0) {
			snprintf(to, sizeof(to), "%s.abandoned", from);
			if (rename(from, to) && !rc)
				rc = rt_err(rt_errno(), "set aside %s: %s", from, strerror(errno));
		}
	}
	closedir(dp);
	if (sync && (fd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0) {
		if (fsync(fd) && !rc)
			rc = rt_err(rt_errno(), "%s: fsync: %s", dir, strerror(errno));
		close(fd);
	}
	return rc;
}

int rt_sink_commit_upto(const char *data_dir, uint64_t upto, int drop_newer)
{
	return commit_upto(data_dir, UINT32_MAX, upto, drop_newer, 1);
}

int rt_sink_rollback(const char *data_dir, uint64_t upto)
{
	return commit_upto(data_dir, UINT32_MAX, upto, 1, 0);
}

int rt_sink_commit_worker(const char *data_dir, uint32_t w, uint64_t upto)
{
	return commit_upto(data_dir, w, upto, 0, 1);
}

int rt_sink_reset(const char *data_dir)
{
	char dir[4096], path[4400];
	struct dirent *d;
	DIR *dp;

	sink_dir(dir, sizeof(dir), data_dir);
	dp = opendir(dir);
	if (!dp)
		return errno == ENOENT ? 0 : rt_err(rt_errno(), "%s: %s", dir, strerror(errno));
	while ((d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		unlink(path);
	}
	closedir(dp);
	return 0;
}

/* ---- replay ----------------------------------------------------------------------- */

struct log_name {
	uint64_t epoch;
	uint32_t w;
	char name[64];
};

static int cmp_logs(const void *a, const void *b)
{
	const struct log_name *x = a, *y = b;

	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return (x->w > y->w) - (x->w < y->w);
}

int rt_sink_read_log(struct rt_sink *t, FILE *f, const char *path, char **buf, size_t *cap)
{
	char magic[8];
	uint32_t hw[2];
	uint64_t epoch, n = 0, want_n, want_h, h = SFS_HASH_P0;
	struct rec_hdr r;
	int rc = 0;

	if (fread(magic, 1, 8, f) != 8 || memcmp(magic, LOG_MAGIC, 8) ||
	    fread(hw, sizeof(hw), 1, f) != 1 || fread(&epoch, sizeof(epoch), 1, f) != 1)
		return rt_err(SFS_ECORRUPT, "%s: not a sink changelog (bad header)", path);
	for (;;) {
		size_t len;

		if (fread(&r, 1, 8, f) != 8)
			goto truncated;
		if (memcmp(&r, LOG_END, 8) == 0)
			break;
		if (fread((char *)&r + 8, sizeof(r) - 8, 1, f) != 1)
			goto truncated;
		len = (size_t)r.klen + r.rlen;
		if (len > (64u << 20) || (r.op != 'U' && r.op != 'D' && r.op != 'C'))
			return rt_err(SFS_ECORRUPT, "%s: record %" PRIu64 " is malformed", path, n);
		/* never NULL, even for an empty key and row: the table copies and
		 * compares through it (memcpy/memcmp of a NULL is undefined) */
		if (len > *cap || !*buf) {
			char *nb = realloc(*buf, len ? len : 1);

			if (!nb)
				return rt_err(-ENOMEM, "replay: out of memory");
			*buf = nb;
			*cap = len ? len : 1;
		}
		if (len && fread(*buf, 1, len, f) != len)
			goto truncated;
		h = sfs_hash_bytes(h, &r, sizeof(r));
		h = sfs_hash_bytes(h, *buf, len);
		n++;
		if (r.op == 'U')
			rc = rt_sink_put(t, *buf, r.klen, *buf + r.klen, r.rlen);
		else if (r.op == 'D')
			rc = rt_sink_del(t, *buf, r.klen);
		else
			rc = rt_sink_add(t, *buf, r.klen, r.delta);
		if (rc == -EOVERFLOW)
			return rt_err(SFS_ECORRUPT, "%s: record %" PRIu64 ": a row's count overflows "
				      "(delta %" PRId64 ")", path, n - 1, r.delta);
		if (rc)
			return rc;
	}
	if (fread(&want_n, sizeof(want_n), 1, f) != 1 || fread(&want_h, sizeof(want_h), 1, f) != 1)
		goto truncated;
	if (want_n != n || want_h != h)
		return rt_err(SFS_ECORRUPT, "%s: checksum mismatch (%" PRIu64 " records read, "
			      "%" PRIu64 " written)", path, n, want_n);
	return 0;
truncated:
	return rt_err(SFS_ECORRUPT, "%s: truncated after %" PRIu64 " records", path, n);
}

static int replay_one(struct rt_sink *t, const char *path, char **buf, size_t *cap)
{
	FILE *f = fopen(path, "r");
	int rc;

	if (!f)
		return rt_err(rt_errno(), "%s: %s", path, strerror(errno));
	rc = rt_sink_read_log(t, f, path, buf, cap);
	fclose(f);
	return rc;
}

int rt_sink_replay(const char *data_dir, const char *header, const char *out_path,
		   uint64_t *rows)
{
	char dir[4096], path[4400], tmp[4096];
	struct log_name *logs = NULL;
	size_t nlogs = 0, lcap = 0, bcap = 0;
	struct rt_sink t;
	struct rt_sink_ent **v = NULL;
	struct dirent *d;
	char *buf = NULL;
	uint64_t lines = 0;
	size_t n = 0;
	FILE *out;
	DIR *dp;
	int rc;

	*rows = 0;
	if ((rc = rt_sink_init(&t, RT_SINK_TABLE)))
		return rc;
	sink_dir(dir, sizeof(dir), data_dir);
	dp = opendir(dir);
	if (!dp && errno != ENOENT) {
		rt_sink_free(&t);
		return rt_err(rt_errno(), "%s: %s", dir, strerror(errno));
	}
	while (dp && (d = readdir(dp))) {
		uint32_t w;
		uint64_t e;
		const char *ext;

		if (!parse_name(d->d_name, &w, &e, &ext) || strcmp(ext, "log") != 0 ||
		    strlen(d->d_name) >= sizeof(logs->name))
			continue;
		if (nlogs == lcap) {
			struct log_name *nl = realloc(logs, (lcap = lcap ? lcap * 2 : 64) * sizeof(*nl));

			if (!nl) {
				rc = rt_err(-ENOMEM, "replay: out of memory");
				goto out;
			}
			logs = nl;
		}
		logs[nlogs].epoch = e;
		logs[nlogs].w = w;
		memcpy(logs[nlogs].name, d->d_name, strlen(d->d_name) + 1);	/* length checked */
		nlogs++;
	}
	if (nlogs)	/* qsort(NULL, 0) is undefined */
		qsort(logs, nlogs, sizeof(*logs), cmp_logs);
	for (size_t i = 0; i < nlogs; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, logs[i].name);
		if ((rc = replay_one(&t, path, &buf, &bcap)))
			goto out;
	}
	for (size_t i = 0; i < t.cap; i++)
		if (t.slot[i] && t.slot[i]->count < 0)
			t.anomalies++;
	if (t.anomalies)
		rt_log("sink: %llu rows retracted more often than inserted in the changelogs",
		       (unsigned long long)t.anomalies);

	v = malloc((t.used + 1) * sizeof(*v));
	if (!v) {
		rc = rt_err(-ENOMEM, "replay: out of memory");
		goto out;
	}
	for (size_t i = 0; i < t.cap; i++)
		if (t.slot[i] && t.slot[i]->count > 0)
			v[n++] = t.slot[i];
	qsort(v, n, sizeof(*v), cmp_rows);
	snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
	out = fopen(tmp, "w");
	if (!out) {
		rc = rt_err(rt_errno(), "%s: %s", tmp, strerror(errno));
		goto out;
	}
	setvbuf(out, NULL, _IOFBF, 1 << 20);
	fprintf(out, "%s\n", header);
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const char *r = row_of(v[i], &len);

		for (int64_t c = 0; c < v[i]->count; c++, lines++) {
			fwrite(r, 1, len, out);
			fputc('\n', out);
		}
	}
	rc = rt_file_commit(out, tmp, out_path, 0);
	if (rc == 0)
		*rows = lines;
out:
	if (dp)
		closedir(dp);
	free(v);
	free(buf);
	free(logs);
	rt_sink_free(&t);
	return rc;
}
