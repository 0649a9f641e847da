/*
 * manifest.c — snapshots, manifest lists and manifests (format and
 * commit protocol in manifest.h).  Every file is one frame: header
 * {magic, version, count, 0}, records, trailer {crc32c, magic}; the
 * parsers check the frame first and then walk the records with bounds on
 * every field, so a reader never touches a byte outside the file.  Also
 * the two cleanups: expire (old snapshots and what only they name) and
 * gc (what crashes left), both as name sets built from the lists.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/fs.h"
#include "store/table/layout/manifest.h"

#define MF_MAGIC_MANIFEST 0x4d464d53u   /* "SMFM" */
#define MF_MAGIC_LIST 0x4c464d53u       /* "SMFL" */
#define MF_MAGIC_SNAP 0x53464d53u       /* "SMFS" */
#define MF_MAGIC_HINT 0x48464d53u       /* "SMFH" */
#define MF_HDR 16u
#define MF_TRL 8u
#define MF_ENTRY 32u                     /* fixed part of a manifest entry */
#define MF_ITEM 10u                      /* ... of a list item */
#define MF_SNAP 48u                      /* ... of a snapshot */

typedef unsigned long long ull;

/* ---- writing frames -------------------------------------------------------------------- */

struct obuf {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

static void put(struct obuf *b, const void *p, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		uint8_t *q;

		while (cap < b->len + n)
			cap *= 2;
		if (!(q = realloc(b->p, cap))) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

#define PUT(b, v) do { __typeof__(v) v_ = (v); put((b), &v_, sizeof(v_)); } while (0)

static void frame_begin(struct obuf *b, uint32_t magic, uint32_t count)
{
	PUT(b, magic);
	PUT(b, (uint32_t)SFS_MF_VERSION);
	PUT(b, count);
	PUT(b, (uint32_t)0);
}

static int frame_write(struct obuf *b, uint32_t magic, const char *dir, const char *name, int excl)
{
	char path[PATH_MAX];
	int rc;

	PUT(b, sfs_crc32c(0, b->p, b->len));
	PUT(b, magic);
	if (b->oom)
		rc = -ENOMEM;
	else if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		rc = sfs__err(SFS_EUSAGE, "%s/%s: path too long", dir, name);
	else
		rc = sfs__layout_write(path, b->p, b->len, excl);
	free(b->p);
	memset(b, 0, sizeof(*b));
	return rc;
}

/* ---- reading frames ------------------------------------------------------------------------ */

struct frame {
	char path[PATH_MAX];
	uint8_t *buf;
	size_t len;       /* records end here (the trailer follows) */
	size_t off;       /* parse position */
	uint32_t count;
};

static int bad(const struct frame *f, size_t off, const char *what)
{
	return sfs__err(SFS_ECORRUPT, "%s: %s at offset %zu", f->path, what, off);
}

static int frame_read(struct frame *f, const char *dir, const char *name, uint32_t magic, const char *what)
{
	uint32_t m, v, z, crc;
	size_t len;
	int rc;

	f->buf = NULL;
	if (snprintf(f->path, sizeof(f->path), "%s/%s", dir, name) >= (int)sizeof(f->path))
		return sfs__err(SFS_EUSAGE, "%s/%s: path too long", dir, name);
	if ((rc = sfs__layout_read(f->path, &f->buf, &len)))
		return rc;
	if (len < MF_HDR + MF_TRL)
		return bad(f, len, "truncated (shorter than header and trailer)");
	memcpy(&m, f->buf, 4);
	memcpy(&v, f->buf + 4, 4);
	memcpy(&f->count, f->buf + 8, 4);
	memcpy(&z, f->buf + 12, 4);
	if (m != magic)
		return sfs__err(SFS_EMAGIC, "%s: bad magic at offset 0 (not a %s)", f->path, what);
	if (v != SFS_MF_VERSION)
		return sfs__err(SFS_EVERSION, "%s: version %u at offset 4, this build reads %u", f->path, v,
				SFS_MF_VERSION);
	f->len = len - MF_TRL;
	memcpy(&crc, f->buf + f->len, 4);
	memcpy(&m, f->buf + f->len + 4, 4);
	if (m != magic)
		return bad(f, f->len + 4, "trailer magic missing (truncated?)");
	if (sfs_crc32c(0, f->buf, f->len) != crc)
		return bad(f, f->len, "checksum mismatch");
	if (z)
		return bad(f, 12, "reserved header field not zero");
	f->off = MF_HDR;
	return 0;
}

/* @n bytes at the parse position, or NULL if they run past the records. */
static const uint8_t *take(struct frame *f, size_t n)
{
	const uint8_t *p = f->buf + f->off;

	if (n > f->len - f->off)
		return NULL;
	f->off += n;
	return p;
}

/* A name of @nl bytes at the parse position into @out (NUL-terminated). */
static int take_name(struct frame *f, size_t nl, char *out, int optional)
{
	size_t at = f->off;
	const uint8_t *p = take(f, nl);

	if (!p || nl > SFS_LAYOUT_NAME_MAX)
		return bad(f, at, "name out of bounds");
	memcpy(out, p, nl);
	out[nl] = 0;
	if ((nl || !optional) && (strlen(out) != nl || !sfs__layout_name_ok(out))) {
		char show[4 * 64 + 1], what[4 * 64 + 96];

		snprintf(what, sizeof(what), "bad name '%s' (not a plain file name of its directory)",
			 sfs_name_show((const char *)p, nl, show, sizeof(show)));
		return bad(f, at, what);
	}
	return 0;
}

static int kcmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = al && bl ? memcmp(a, b, al < bl ? al : bl) : 0;   /* a key may be NULL, 0 bytes */

	return c ? c : (al > bl) - (al < bl);
}

/* ---- manifests ----------------------------------------------------------------------------- */

static int entry_ok(const struct sfs_mf_entry *e)
{
	return (e->op == SFS_MF_ADD || e->op == SFS_MF_DELETE) && sfs__layout_name_ok(e->file) &&
	       e->kg_lo <= e->kg_hi && (e->min_key || !e->min_klen) && (e->max_key || !e->max_klen) &&
	       kcmp(e->min_key, e->min_klen, e->max_key, e->max_klen) <= 0;
}

static int manifest_write(const char *dir, const char *name, const struct sfs_mf_entry *es, size_t n)
{
	struct obuf b = { 0 };

	if (n > UINT32_MAX)
		return sfs__err(SFS_EUSAGE, "%s/%s: %zu entries", dir, name, n);
	frame_begin(&b, MF_MAGIC_MANIFEST, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		const struct sfs_mf_entry *e = &es[i];

		if (!entry_ok(e)) {
			free(b.p);
			return sfs__err(SFS_EUSAGE, "%s/%s: entry %zu (op %d, file '%s'): bad op, name, "
					"key range or key-group range", dir, name, i, e->op, e->file ? e->file : "");
		}
		PUT(&b, (uint8_t)e->op);
		PUT(&b, (uint8_t)0);
		PUT(&b, (uint16_t)strlen(e->file));
		PUT(&b, e->level);
		PUT(&b, e->rows);
		PUT(&b, e->size);
		PUT(&b, e->kg_lo);
		PUT(&b, e->kg_hi);
		PUT(&b, e->min_klen);
		PUT(&b, e->max_klen);
		put(&b, e->file, strlen(e->file));
		put(&b, e->min_key, e->min_klen);
		put(&b, e->max_key, e->max_klen);
	}
	return frame_write(&b, MF_MAGIC_MANIFEST, dir, name, 0);
}

/* Entries of manifest @name; with @expect != UINT64_MAX its count must
 * match (what the list said). */
static int manifest_walk(const char *dir, const char *name, uint64_t expect, sfs_mf_entry_fn fn, void *arg)
{
	struct frame f;
	char file[SFS_LAYOUT_NAME_MAX + 1];
	int rc = frame_read(&f, dir, name, MF_MAGIC_MANIFEST, "manifest");

	if (!rc && expect != UINT64_MAX && f.count != expect)
		rc = sfs__err(SFS_ECORRUPT, "%s: %u entries, its manifest list says %llu", f.path, f.count,
			      (ull)expect);
	/* validate everything first: a caller never sees half a manifest */
	for (int pass = 0; pass < 2 && !rc; pass++) {
		f.off = MF_HDR;
		for (uint32_t i = 0; i < f.count && !rc; i++) {
			struct sfs_mf_entry e;
			size_t at = f.off;
			const uint8_t *p = take(&f, MF_ENTRY);
			uint16_t nl;

			if (!p) {
				rc = bad(&f, at, "entry truncated");
				break;
			}
			e.op = p[0];
			memcpy(&nl, p + 2, 2);
			memcpy(&e.level, p + 4, 4);
			memcpy(&e.rows, p + 8, 8);
			memcpy(&e.size, p + 16, 8);
			memcpy(&e.kg_lo, p + 24, 2);
			memcpy(&e.kg_hi, p + 26, 2);
			memcpy(&e.min_klen, p + 28, 2);
			memcpy(&e.max_klen, p + 30, 2);
			if (p[1] || (rc = take_name(&f, nl, file, 0))) {
				rc = rc ? rc : bad(&f, at, "entry: reserved byte not zero");
				break;
			}
			e.file = file;
			e.min_key = take(&f, e.min_klen);
			e.max_key = take(&f, e.max_klen);
			if (!e.min_key || !e.max_key || !entry_ok(&e)) {
				rc = bad(&f, at, "entry: bad op, keys or key-group range");
				break;
			}
			if (pass)
				rc = fn(&e, arg);
		}
		if (!rc && f.off != f.len)
			rc = bad(&f, f.off, "stray bytes after the entries");
	}
	free(f.buf);
	return rc;
}

int sfs_mf_manifest_read(const char *dir, const char *name, sfs_mf_entry_fn fn, void *arg)
{
	return manifest_walk(dir, name, UINT64_MAX, fn, arg);
}

/* ---- manifest lists -------------------------------------------------------------------------- */

static int list_write(const char *dir, const char *name, const struct sfs_mf_list_item *it, size_t n)
{
	struct obuf b = { 0 };

	frame_begin(&b, MF_MAGIC_LIST, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		PUT(&b, it[i].entries);
		PUT(&b, (uint16_t)strlen(it[i].name));
		put(&b, it[i].name, strlen(it[i].name));
	}
	return frame_write(&b, MF_MAGIC_LIST, dir, name, 0);
}

int sfs_mf_list_read(const char *dir, const char *name, struct sfs_mf_list_item **items, size_t *n)
{
	struct frame f;
	struct sfs_mf_list_item *it = NULL;
	int rc = frame_read(&f, dir, name, MF_MAGIC_LIST, "manifest list");

	/* each item takes >= MF_ITEM + 1 bytes: a count the file cannot hold is refused
	 * before it sizes an allocation */
	if (!rc && (uint64_t)f.count * (MF_ITEM + 1) > f.len - MF_HDR)
		rc = bad(&f, 8, "item count exceeds the file");
	if (!rc && !(it = calloc(f.count ? f.count : 1, sizeof(*it))))
		rc = -ENOMEM;
	for (uint32_t i = 0; !rc && i < f.count; i++) {
		size_t at = f.off;
		const uint8_t *p = take(&f, MF_ITEM);
		uint16_t nl;

		if (!p) {
			rc = bad(&f, at, "item truncated");
			break;
		}
		memcpy(&it[i].entries, p, 8);
		memcpy(&nl, p + 8, 2);
		rc = take_name(&f, nl, it[i].name, 0);
	}
	if (!rc && f.off != f.len)
		rc = bad(&f, f.off, "stray bytes after the items");
	free(f.buf);
	if (rc) {
		free(it);
		return rc;
	}
	*items = it;
	*n = f.count;
	return 0;
}

/* ---- snapshots ----------------------------------------------------------------------------------- */

int sfs_mf_snapshot_read(const char *dir, uint64_t id, struct sfs_mf_snapshot *s)
{
	char name[32];
	struct frame f;
	const uint8_t *p;
	uint16_t bl, dl, xl;
	int rc;

	snprintf(name, sizeof(name), "snapshot-%llu", (ull)id);
	if ((rc = frame_read(&f, dir, name, MF_MAGIC_SNAP, "snapshot")))
		goto out;
	if (f.count != 1 || !(p = take(&f, MF_SNAP))) {
		rc = bad(&f, MF_HDR, "snapshot record truncated");
		goto out;
	}
	memset(s, 0, sizeof(*s));
	memcpy(&s->id, p, 8);
	memcpy(&s->prev_id, p + 8, 8);
	memcpy(&s->schema_id, p + 16, 8);
	memcpy(&s->delta_entries, p + 24, 8);
	memcpy(&s->watermark, p + 32, 8);
	s->kind = p[40];
	memcpy(&bl, p + 42, 2);
	memcpy(&dl, p + 44, 2);
	memcpy(&xl, p + 46, 2);
	if (s->id != id || s->prev_id != id - 1 || p[41] ||
	    (s->kind != SFS_MF_DATA && s->kind != SFS_MF_COMPACT)) {
		rc = bad(&f, MF_HDR, "snapshot record: wrong id, previous id or kind");
		goto out;
	}
	if ((rc = take_name(&f, bl, s->base_list, 0)) || (rc = take_name(&f, dl, s->delta_list, 0)) ||
	    (rc = take_name(&f, xl, s->dv_index, 1)))
		goto out;
	if (f.off != f.len)
		rc = bad(&f, f.off, "stray bytes after the snapshot record");
out:
	free(f.buf);
	return rc;
}

static int walk_list(const char *dir, const char *list, sfs_mf_entry_fn fn, void *arg)
{
	struct sfs_mf_list_item *it = NULL;
	size_t n = 0;
	int rc = sfs_mf_list_read(dir, list, &it, &n);

	for (size_t i = 0; !rc && i < n; i++)
		rc = manifest_walk(dir, it[i].name, it[i].entries, fn, arg);
	free(it);
	return rc;
}

int sfs_mf_for_all(const char *dir, const struct sfs_mf_snapshot *s, sfs_mf_entry_fn fn, void *arg)
{
	int rc = walk_list(dir, s->base_list, fn, arg);

	return rc ? rc : walk_list(dir, s->delta_list, fn, arg);
}

int sfs_mf_for_delta(const char *dir, const struct sfs_mf_snapshot *s, sfs_mf_entry_fn fn, void *arg)
{
	return walk_list(dir, s->delta_list, fn, arg);
}

/* ---- commit ------------------------------------------------------------------------------------- */

static void unlink_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* The new snapshot's base list: with rebase one manifest @rman of the
 * caller's live set (none if it is empty), else the previous base + delta. */
static int base_items(const char *dir, const struct sfs_mf_snapshot *prev, const struct sfs_mf_commit *c,
		      const char *rman, struct sfs_mf_list_item **all, size_t *n)
{
	struct sfs_mf_list_item *base = NULL, *delta = NULL;
	size_t nb = 0, nd = 0;
	int rc = 0;

	if (!c->rebase && prev && ((rc = sfs_mf_list_read(dir, prev->base_list, &base, &nb)) ||
				   (rc = sfs_mf_list_read(dir, prev->delta_list, &delta, &nd))))
		goto out;
	if (c->rebase)
		nb = c->rebase_n ? 1 : 0;
	if (!(*all = malloc((nb + nd + 1) * sizeof(**all)))) {
		rc = -ENOMEM;
		goto out;
	}
	if (c->rebase && nb) {
		snprintf((*all)[0].name, sizeof((*all)[0].name), "%s", rman);
		(*all)[0].entries = c->rebase_n;
	} else if (nb) {
		memcpy(*all, base, nb * sizeof(**all));
	}
	if (nd)
		memcpy(*all + nb, delta, nd * sizeof(**all));
	*n = nb + nd;
out:
	free(base);
	free(delta);
	return rc;
}

int sfs_mf_commit(const char *dir, uint64_t id, const struct sfs_mf_commit *c)
{
	struct sfs_mf_snapshot prev, s = { .id = id, .prev_id = id - 1 };
	struct sfs_mf_list_item *all = NULL, one;
	size_t nall = 0;
	char man[SFS_LAYOUT_NAME_MAX + 1], rman[SFS_LAYOUT_NAME_MAX + 1], snap[32];
	uint64_t r;
	struct obuf b = { 0 };
	int rc;

	if (!id || (c->kind != SFS_MF_DATA && c->kind != SFS_MF_COMPACT) ||
	    (c->dv_index && !sfs__layout_name_ok(c->dv_index)) || (c->n && !c->entries))
		return sfs__err(SFS_EUSAGE, "%s: commit of snapshot %llu: bad id, kind or index name", dir,
				(ull)id);
	/* a rebase restates snapshot id-1's live set: ADDs only, and none at id 1 */
	if (c->rebase && c->rebase_n && (!c->rebase_entries || id == 1))
		return sfs__err(SFS_EUSAGE, "%s: commit of snapshot %llu: rebase of %zu entries %s", dir,
				(ull)id, c->rebase_n, id == 1 ? "onto no snapshot" : "without entries");
	for (size_t i = 0; c->rebase && i < c->rebase_n; i++)
		if (c->rebase_entries[i].op != SFS_MF_ADD)
			return sfs__err(SFS_EUSAGE, "%s: commit of snapshot %llu: rebase entry %zu is not an ADD",
					dir, (ull)id, i);
	if (id > 1 && (rc = sfs_mf_snapshot_read(dir, id - 1, &prev)))
		return rc;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return sfs__err(sfs__errno(), "%s: getrandom: %s", dir, strerror(errno));
	snprintf(man, sizeof(man), "manifest-%016llx", (ull)r);
	snprintf(rman, sizeof(rman), "manifest-%016llx-rebase", (ull)r);
	snprintf(s.delta_list, sizeof(s.delta_list), "manifest-list-%016llx-delta", (ull)r);
	snprintf(s.base_list, sizeof(s.base_list), "manifest-list-%016llx-base", (ull)r);
	if ((rc = base_items(dir, id > 1 ? &prev : NULL, c, rman, &all, &nall)))
		goto out;
	if (c->dv_index)
		snprintf(s.dv_index, sizeof(s.dv_index), "%s", c->dv_index);
	s.kind = c->kind;
	s.schema_id = c->schema_id;
	s.watermark = c->watermark;
	s.delta_entries = c->n;
	snprintf(one.name, sizeof(one.name), "%s", man);
	one.entries = c->n;
	if ((rc = manifest_write(dir, man, c->entries, c->n)) ||
	    (c->rebase && c->rebase_n && (rc = manifest_write(dir, rman, c->rebase_entries, c->rebase_n))) ||
	    (rc = list_write(dir, s.delta_list, &one, 1)) || (rc = list_write(dir, s.base_list, all, nall)))
		goto orphans;
	frame_begin(&b, MF_MAGIC_SNAP, 1);
	PUT(&b, s.id);
	PUT(&b, s.prev_id);
	PUT(&b, s.schema_id);
	PUT(&b, s.delta_entries);
	PUT(&b, s.watermark);
	PUT(&b, (uint8_t)s.kind);
	PUT(&b, (uint8_t)0);
	PUT(&b, (uint16_t)strlen(s.base_list));
	PUT(&b, (uint16_t)strlen(s.delta_list));
	PUT(&b, (uint16_t)strlen(s.dv_index));
	put(&b, s.base_list, strlen(s.base_list));
	put(&b, s.delta_list, strlen(s.delta_list));
	put(&b, s.dv_index, strlen(s.dv_index));
	snprintf(snap, sizeof(snap), "snapshot-%llu", (ull)id);
	if ((rc = frame_write(&b, MF_MAGIC_SNAP, dir, snap, 1)))
		goto orphans;
	/* The hint: a failure to write it costs readers a directory scan, not
	 * correctness, so it does not fail the commit that is already durable.
	 * Every SFS_MF_HINT_EVERY-th snapshot only: sfs_mf_latest() verifies
	 * forward from it (that many stat(2) at most, once per table open),
	 * and each rewrite was an inode allocation per commit (temp + rename),
	 * ~1 of the ~7 a table's data commit made. */
	if ((id - 1) % SFS_MF_HINT_EVERY == 0) {
		frame_begin(&b, MF_MAGIC_HINT, 1);
		PUT(&b, id);
		frame_write(&b, MF_MAGIC_HINT, dir, "LATEST", 0);
	}
	goto out;
orphans:
	/* A loser's (or a failed writer's) files: nothing references them. */
	unlink_in(dir, man);
	if (c->rebase)
		unlink_in(dir, rman);
	unlink_in(dir, s.delta_list);
	unlink_in(dir, s.base_list);
out:
	free(all);
	return rc;
}

/* 1 and *@id if @name is a snapshot file's: "snapshot-" and the id in
 * canonical decimal (1.., no leading zero, no overflow), nothing after. */
static int snap_id(const char *name, uint64_t *id)
{
	const char *d;
	uint64_t v = 0;

	if (strncmp(name, "snapshot-", 9) || name[9] < '1' || name[9] > '9')
		return 0;
	for (d = name + 9; *d >= '0' && *d <= '9'; d++) {
		if (v > (UINT64_MAX - (uint64_t)(*d - '0')) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*d - '0');
	}
	if (*d)
		return 0;
	*id = v;
	return 1;
}

static int exists(const char *dir, uint64_t id)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/snapshot-%llu", dir, (ull)id);
	return access(path, F_OK) == 0;
}

int sfs_mf_latest(const char *dir, uint64_t *out)
{
	struct frame f;
	uint64_t id = 0;
	const uint8_t *p;
	int hint = 0;

	if (!frame_read(&f, dir, "LATEST", MF_MAGIC_HINT, "LATEST hint") && f.count == 1 && (p = take(&f, 8)) &&
	    f.off == f.len) {
		memcpy(&id, p, 8);
		hint = exists(dir, id);
	}
	free(f.buf);
	if (!hint) {
		/* no usable hint: the newest snapshot-<id> in the directory */
		DIR *d = opendir(dir);
		struct dirent *de;

		id = 0;
		if (!d)
			return errno == ENOENT ? (*out = 0, 0)
					       : sfs__err(sfs__errno(), "%s: opendir: %s", dir, strerror(errno));
		while ((de = readdir(d))) {
			uint64_t v;

			if (snap_id(de->d_name, &v) && v > id)
				id = v;
		}
		closedir(d);
	}
	while (exists(dir, id + 1))   /* the hint may lag: verify forward */
		id++;
	*out = id;
	return 0;
}

/* ---- expire and gc ------------------------------------------------------------------------ */

/* A set of file names: appended, then sealed (sorted, deduplicated) once
 * and probed by binary search.  Sorting beats a hash table here: built
 * once, O(n log n), no tuning. */
struct nameset {
	char **v;
	size_t n, cap;
};

static int ns_add(struct nameset *ns, const char *name)
{
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 64;
		char **v = realloc(ns->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	if (!(ns->v[ns->n] = strdup(name)))
		return -ENOMEM;
	ns->n++;
	return 0;
}

static int ns_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void ns_seal(struct nameset *ns)
{
	size_t k = 0;

	if (ns->n)
		qsort(ns->v, ns->n, sizeof(*ns->v), ns_cmp);
	for (size_t i = 0; i < ns->n; i++) {
		if (k && !strcmp(ns->v[k - 1], ns->v[i]))
			free(ns->v[i]);
		else
			ns->v[k++] = ns->v[i];
	}
	ns->n = k;
}

static int ns_has(const struct nameset *ns, const char *name)
{
	return ns->n && bsearch(&name, ns->v, ns->n, sizeof(*ns->v), ns_cmp);
}

static void ns_free(struct nameset *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
}

/* The metadata snapshot @id names, into @ns: its two lists and every
 * manifest they list (not its deletion-vector index; *@s has it). */
static int snap_refs(const char *dir, uint64_t id, struct nameset *ns, struct sfs_mf_snapshot *s)
{
	int rc = sfs_mf_snapshot_read(dir, id, s);

	if (!rc && !(rc = ns_add(ns, s->base_list)))
		rc = ns_add(ns, s->delta_list);
	for (int l = 0; l < 2 && !rc; l++) {
		struct sfs_mf_list_item *it = NULL;
		size_t n = 0;

		rc = sfs_mf_list_read(dir, l ? s->delta_list : s->base_list, &it, &n);
		for (size_t i = 0; !rc && i < n; i++)
			rc = ns_add(ns, it[i].name);
		free(it);
	}
	return rc;
}

/* Remove @dir/@name: 1 removed, 0 already gone, or a negative code.
 * @spare: expire's removals of files a commit made, whose inodes the next
 * commits reuse (file.h, sfs__layout_remove); gc's are unlinked (an
 * orphan, or a spare of a writer gone). */
static int remove_in(const char *dir, const char *name, int spare)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return sfs__err(SFS_EUSAGE, "%s/%s: path too long", dir, name);
	if (spare)
		return sfs__layout_remove(path);
	if (!unlink(path))
		return 1;
	return errno == ENOENT ? 0 : sfs__err(sfs__errno(), "%s: unlink: %s", path, strerror(errno));
}

int sfs_mf_expire(const char *dir, uint64_t keep_from)
{
	struct nameset gone = { 0 }, kept = { 0 };
	struct sfs_mf_snapshot s;
	uint64_t latest, lo = keep_from;
	int rc, removed = 0;

	if (keep_from <= 1)
		return 0;
	if ((rc = sfs_mf_latest(dir, &latest)))
		return rc;
	if (keep_from > latest)
		return sfs__err(SFS_EUSAGE, "%s: expire below snapshot %llu: the newest is %llu", dir,
				(ull)keep_from, (ull)latest);
	/* Ids are contiguous (see manifest.h), so probing down finds every
	 * snapshot to remove without scanning the directory's data files. */
	while (lo > 1 && exists(dir, lo - 1))
		lo--;
	/* Read everything before removing anything.  Every retained snapshot
	 * is read, not just keep_from's base (which by the commit protocol
	 * already names every older manifest a newer snapshot names): correct
	 * whatever wrote the newer ones, and cheap while the engine rebases. */
	for (uint64_t id = lo; !rc && id < keep_from; id++)
		rc = snap_refs(dir, id, &gone, &s);
	for (uint64_t id = keep_from; !rc && id <= latest; id++)
		rc = snap_refs(dir, id, &kept, &s);
	if (rc)
		goto out;
	ns_seal(&gone);
	ns_seal(&kept);
	for (uint64_t id = lo; id < keep_from; id++) {   /* oldest first: ids stay contiguous */
		char name[32];

		snprintf(name, sizeof(name), "snapshot-%llu", (ull)id);
		if ((rc = remove_in(dir, name, 1)) < 0)
			goto out;
		removed += rc;
	}
	/* the snapshots' removal durable before their files go: a crash must
	 * never leave a snapshot naming a removed manifest */
	if ((rc = sfs__layout_sync_dir(dir)))
		goto out;
	/* Unsynced: a removal a crash undoes leaves an orphan for gc. */
	for (size_t i = 0; i < gone.n; i++) {
		if (ns_has(&kept, gone.v[i]))
			continue;
		if ((rc = remove_in(dir, gone.v[i], 1)) < 0)
			goto out;
		removed += rc;
	}
	rc = removed;
out:
	ns_free(&gone);
	ns_free(&kept);
	return rc;
}

/* Whether entry @de of @d is a regular file: d_type where the file system
 * gives it, else one fstatat (symlinks are not followed). */
static int regular(DIR *d, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_REG;
	return !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode);
}

int sfs_mf_gc(const char *dir, sfs_mf_keep_fn keep, void *arg)
{
	struct nameset files = { 0 }, named = { 0 };
	struct sfs_mf_snapshot s;
	struct dirent *de;
	DIR *d;
	uint64_t id;
	int rc = 0, removed = 0;

	if (!keep)
		return sfs__err(SFS_EUSAGE, "%s: gc without a keep() for the data files", dir);
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : sfs__err(sfs__errno(), "%s: opendir: %s", dir, strerror(errno));
	while (!rc && (errno = 0, de = readdir(d)))
		if (regular(d, de))
			rc = ns_add(&files, de->d_name);
	if (!rc && errno)
		rc = sfs__err(sfs__errno(), "%s: readdir: %s", dir, strerror(errno));
	closedir(d);
	/* every snapshot read before anything goes: one that fails may name
	 * files we cannot see, so then nothing is removed */
	for (size_t i = 0; !rc && i < files.n; i++)
		if (snap_id(files.v[i], &id) && !(rc = snap_refs(dir, id, &named, &s)) && s.dv_index[0])
			rc = ns_add(&named, s.dv_index);
	if (rc)
		goto out;
	ns_seal(&named);
	for (size_t i = 0; i < files.n; i++) {
		const char *f = files.v[i];

		if (snap_id(f, &id) || !strcmp(f, "LATEST") || ns_has(&named, f) || keep(f, arg))
			continue;
		if ((rc = remove_in(dir, f, 0)) < 0)
			goto out;
		removed += rc;
	}
	rc = removed;
out:
	ns_free(&files);
	ns_free(&named);
	return rc;
}

/* ---- fuzzing ---------------------------------------------------------------------------- */

void sfs__mf_reseal(uint8_t *buf, size_t len)
{
	uint32_t crc;

	if (len < MF_HDR + MF_TRL)
		return;
	crc = sfs_crc32c(0, buf, len - MF_TRL);
	memcpy(buf + len - MF_TRL, &crc, 4);
}
