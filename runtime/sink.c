/*
 * sink.c — the worker's result table and its part files (sink.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/hash.h"
#include "runtime/sink.h"

struct rt_sink_ent {
	uint64_t hash;
	int64_t count;
	uint32_t klen, rlen;
	uint32_t cap;   /* bytes allocated for key + row */
	uint32_t pad;
	char bytes[];   /* key, then row */
};

static uint64_t key_hash(const void *k, size_t n)
{
	return sfs_hash_bytes(SFS_HASH_P0 ^ n, k, n) | 1;
}

int rt_sink_init(struct rt_sink *s, int materialize)
{
	memset(s, 0, sizeof(*s));
	s->materialize = materialize;
	if (!materialize)
		return 0;
	s->cap = 1024;
	s->slot = calloc(s->cap, sizeof(*s->slot));
	return s->slot ? 0 : sfs__err(-ENOMEM, "sink: out of memory");
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
		return sfs__err(-ENOMEM, "sink: out of memory (%zu rows)", s->used);
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
	if (e && e->rlen == rlen && !memcmp(e->bytes + klen, row, rlen))
		return 0;
	if (e && e->cap >= klen + rlen) {
		/* an update of a key: the row is rewritten in place, no allocation */
		memcpy(e->bytes + klen, row, rlen);
		e->rlen = (uint32_t)rlen;
		return 0;
	}
	e = ent_new(h, key, klen, row, rlen);
	if (!e)
		return sfs__err(-ENOMEM, "sink: out of memory");
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
	i = find(s, key_hash(key, klen), key, klen);
	if (!s->slot[i]) {
		s->anomalies++;
		return 0;
	}
	remove_at(s, i);
	return 0;
}

int rt_sink_add(struct rt_sink *s, const char *row, size_t rlen, int64_t delta)
{
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
		if (delta < 0)
			s->anomalies++;
		s->slot[i] = ent_new(h, row, rlen, "", 0);
		if (!s->slot[i])
			return sfs__err(-ENOMEM, "sink: out of memory");
		s->slot[i]->count = delta;
		s->used++;
		return 0;
	}
	s->slot[i]->count += delta;
	if (s->slot[i]->count == 0)
		remove_at(s, i);
	return 0;
}

static const char *row_of(const struct rt_sink_ent *e, size_t *len)
{
	/* keyed rows carry the row after the key; multiset rows are the key */
	if (e->rlen) {
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

int rt_sink_commit(struct rt_sink *s, const char *path, uint64_t *rows)
{
	char tmp[4096];
	struct rt_sink_ent **v;
	size_t n = 0;
	uint64_t lines = 0;
	FILE *f;
	int fd;

	v = malloc((s->used + 1) * sizeof(*v));
	if (!v)
		return sfs__err(-ENOMEM, "sink: out of memory");
	for (size_t i = 0; i < s->cap; i++)
		if (s->slot[i] && s->slot[i]->count > 0)
			v[n++] = s->slot[i];
	qsort(v, n, sizeof(*v), cmp_rows);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		free(v);
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	}
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const char *r = row_of(v[i], &len);

		for (int64_t c = 0; c < v[i]->count; c++, lines++) {
			fwrite(r, 1, len, f);
			fputc('\n', f);
		}
	}
	free(v);
	fd = fileno(f);
	if (fflush(f) || fsync(fd) || fclose(f)) {
		int rc = sfs__err(sfs__errno(), "%s: write: %s", tmp, strerror(errno));

		unlink(tmp);
		return rc;
	}
	if (rename(tmp, path))
		return sfs__err(sfs__errno(), "rename %s: %s", tmp, strerror(errno));
	*rows = lines;
	return 0;
}

struct part_cursor {
	FILE *f;
	char *line;
	size_t cap;
	ssize_t len;
};

static int line_less(const struct part_cursor *a, const struct part_cursor *b)
{
	size_t n = (size_t)(a->len < b->len ? a->len : b->len);
	int c = memcmp(a->line, b->line, n);

	return c < 0 || (c == 0 && a->len < b->len);
}

int rt_sink_merge(const char *const *parts, unsigned n, const char *header,
		  const char *out_path, uint64_t *rows)
{
	struct part_cursor *cur = calloc(n ? n : 1, sizeof(*cur));
	char tmp[4096];
	uint64_t lines = 0;
	FILE *out;
	int rc = 0;

	if (!cur)
		return sfs__err(-ENOMEM, "merge: out of memory");
	snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
	out = fopen(tmp, "w");
	if (!out) {
		free(cur);
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	}
	setvbuf(out, NULL, _IOFBF, 1 << 20);
	fprintf(out, "%s\n", header);
	for (unsigned i = 0; i < n; i++) {
		cur[i].f = fopen(parts[i], "r");
		if (!cur[i].f) {
			rc = sfs__err(sfs__errno(), "%s: %s", parts[i], strerror(errno));
			goto out;
		}
		cur[i].len = getline(&cur[i].line, &cur[i].cap, cur[i].f);
	}
	/* n is the worker count (<= 48): a linear pick beats a heap here. */
	for (;;) {
		int best = -1;

		for (unsigned i = 0; i < n; i++)
			if (cur[i].len > 0 && (best < 0 || line_less(&cur[i], &cur[best])))
				best = (int)i;
		if (best < 0)
			break;
		fwrite(cur[best].line, 1, (size_t)cur[best].len, out);
		lines++;
		cur[best].len = getline(&cur[best].line, &cur[best].cap, cur[best].f);
	}
out:
	for (unsigned i = 0; i < n; i++) {
		if (cur[i].f)
			fclose(cur[i].f);
		free(cur[i].line);
	}
	free(cur);
	if (fflush(out) || fsync(fileno(out)))
		rc = rc ? rc : sfs__err(sfs__errno(), "%s: write: %s", tmp, strerror(errno));
	fclose(out);
	if (!rc && rename(tmp, out_path))
		rc = sfs__err(sfs__errno(), "rename %s: %s", tmp, strerror(errno));
	if (rc)
		unlink(tmp);
	*rows = lines;
	return rc;
}
