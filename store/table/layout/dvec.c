/*
 * dvec.c — deletion-vector index files (format and rules in dvec.h); the
 * whole-file I/O is store/table/layout/file.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "store/table/layout/dvec.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "formats are little-endian, read in place");

#define DV_MAGIC 0x49564453u   /* "SDVI" */
#define DV_HDR 16u
#define DV_TRAILER 24u
#define DV_ENTRY 36u           /* fixed part of an index entry */

typedef unsigned long long ull;

/* ---- varints and encodings -------------------------------------------------------------- */

static size_t put_varint(uint8_t *o, uint64_t v)
{
	size_t n = 0;

	do {
		if (o)
			o[n] = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
		n++;
		v >>= 7;
	} while (v);
	return n;
}

/* 1 and the value, or 0 if the varint runs past @end or over 64 bits. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		if (shift == 63 && b > 1)
			return 0;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 1;
		}
	}
	return 0;
}

static int bit(const uint64_t *w, uint64_t p) { return (int)(w[p >> 6] >> (p & 63)) & 1; }

/* Runs encoding of @bits into @o (NULL: size only). */
static size_t runs_encode(const uint64_t *bits, uint64_t rows, uint8_t *o)
{
	size_t n = 0;
	uint64_t prev_end = 0, p = 0;

	while (p < rows) {
		if (!bits[p >> 6] && !(p & 63)) {   /* skip empty words */
			p += 64;
			continue;
		}
		if (!bit(bits, p)) {
			p++;
			continue;
		}
		uint64_t s = p;

		while (p < rows && bit(bits, p))
			p++;
		n += put_varint(o ? o + n : NULL, s - prev_end);
		n += put_varint(o ? o + n : NULL, p - s - 1);
		prev_end = p;
	}
	return n;
}

/* ---- builder ------------------------------------------------------------------------------- */

struct dv_ent {
	char *file;
	uint64_t rows, deleted;
	uint8_t *body;
	uint32_t len;
	int enc;
};

struct sfs_dv_builder {
	struct dv_ent *db_ents;
	size_t db_n, db_cap;
};

int sfs_dv_builder_new(sfs_dv_builder_t **out)
{
	return (*out = calloc(1, sizeof(**out))) ? 0 : -ENOMEM;
}

void sfs_dv_builder_free(sfs_dv_builder_t *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->db_n; i++) {
		free(b->db_ents[i].file);
		free(b->db_ents[i].body);
	}
	free(b->db_ents);
	free(b);
}

int sfs_dv_builder_add(sfs_dv_builder_t *b, const char *file, uint64_t rows, const uint64_t *bits,
		       size_t words)
{
	size_t nw = sfs_dv_words(rows), rlen, blen = nw * 8;
	struct dv_ent e = { 0 };

	if (!sfs__layout_name_ok(file))
		return sfs__err(SFS_EUSAGE, "deletion vector: bad data-file name '%s'", file ? file : "(null)");
	if (rows > SFS_DV_ROWS_MAX || words < nw || (words && !bits))
		return sfs__err(SFS_EUSAGE, "deletion vector of %s: %llu rows in %zu words", file, (ull)rows,
				words);
	for (size_t i = 0; i < words; i++) {
		uint64_t stray = i >= nw ? bits[i] : i + 1 == nw && (rows & 63) ? bits[i] >> (rows & 63) : 0;

		if (stray)
			return sfs__err(SFS_EUSAGE, "deletion vector of %s: positions >= %llu rows set", file,
					(ull)rows);
		if (i < nw)
			e.deleted += (uint64_t)__builtin_popcountll(bits[i]);
	}
	rlen = runs_encode(bits, rows, NULL);
	e.enc = rlen < blen ? SFS_DV_RUNS : SFS_DV_BITMAP;
	e.len = (uint32_t)(e.enc == SFS_DV_RUNS ? rlen : blen);
	e.rows = rows;
	if (b->db_n == b->db_cap) {
		size_t cap = b->db_cap ? b->db_cap * 2 : 16;
		struct dv_ent *n = realloc(b->db_ents, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->db_ents = n;
		b->db_cap = cap;
	}
	if (!(e.file = strdup(file)) || !(e.body = malloc(e.len ? e.len : 1))) {
		free(e.file);
		return -ENOMEM;
	}
	if (e.enc == SFS_DV_RUNS)
		runs_encode(bits, rows, e.body);
	else if (blen)
		memcpy(e.body, bits, blen);
	b->db_ents[b->db_n++] = e;
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dv_ent *)a)->file, ((const struct dv_ent *)b)->file);
}

static void put(uint8_t **o, const void *p, size_t n)
{
	memcpy(*o, p, n);
	*o += n;
}

int sfs_dv_builder_write(sfs_dv_builder_t *b, const char *path)
{
	size_t len = DV_HDR + DV_TRAILER;
	uint8_t *img, *o, *ix;
	uint64_t ixoff;
	uint32_t v = SFS_DV_VERSION, m = DV_MAGIC, n32 = (uint32_t)b->db_n, crc;
	int rc;

	qsort(b->db_ents, b->db_n, sizeof(*b->db_ents), ent_cmp);
	for (size_t i = 0; i < b->db_n; i++) {
		if (i && !strcmp(b->db_ents[i - 1].file, b->db_ents[i].file))
			return sfs__err(SFS_EUSAGE, "%s: two vectors for data file %s", path, b->db_ents[i].file);
		len += b->db_ents[i].len + DV_ENTRY + strlen(b->db_ents[i].file);
	}
	if (!(img = calloc(1, len)))
		return -ENOMEM;
	o = img;
	put(&o, &m, 4);
	put(&o, &v, 4);
	o += 8;
	for (size_t i = 0; i < b->db_n; i++)
		put(&o, b->db_ents[i].body, b->db_ents[i].len);
	ix = o;
	ixoff = (uint64_t)(o - img);
	for (size_t i = 0, off = DV_HDR; i < b->db_n; off += b->db_ents[i++].len) {
		struct dv_ent *e = &b->db_ents[i];
		uint64_t off64 = off;
		uint32_t c = sfs_crc32c(0, e->body, e->len);
		uint16_t nl = (uint16_t)strlen(e->file);
		uint8_t enc[2] = { (uint8_t)e->enc, 0 };

		put(&o, &e->rows, 8);
		put(&o, &e->deleted, 8);
		put(&o, &off64, 8);
		put(&o, &e->len, 4);
		put(&o, &c, 4);
		put(&o, enc, 2);
		put(&o, &nl, 2);
		put(&o, e->file, nl);
	}
	put(&o, &ixoff, 8);
	put(&o, &n32, 4);
	crc = sfs_crc32c(0, ix, (size_t)(o - ix));
	put(&o, &crc, 4);
	put(&o, &v, 4);
	put(&o, &m, 4);
	rc = sfs__layout_write(path, img, len, 0);
	free(img);
	return rc;
}

/* ---- reader ---------------------------------------------------------------------------------- */

struct sfs_dv_index {
	char *dx_path;
	uint8_t *dx_buf;
	size_t dx_n;
	struct dv_rent {
		struct sfs_dv_info info;
		const uint8_t *body;
	} *dx_ents;
	char *dx_names;          /* NUL-terminated copies of the names */
};

static int bad(const sfs_dv_index_t *x, uint64_t off, const char *what)
{
	return sfs__err(SFS_ECORRUPT, "%s: %s at offset %llu", x->dx_path, what, (ull)off);
}

/* Decode @e into @out (NULL: validate only).  0 or -1 (bad structure). */
static int decode(const struct dv_rent *e, uint64_t *out)
{
	const uint8_t *p = e->body, *end = p + e->info.bytes;
	size_t nw = sfs_dv_words(e->info.rows);
	uint64_t cnt = 0, pos = 0, gap, l1;

	if (out)
		memset(out, 0, nw * 8);
	if (e->info.enc == SFS_DV_BITMAP) {
		if (e->info.bytes != nw * 8)
			return -1;
		for (size_t i = 0; i < nw; i++) {
			uint64_t w;

			memcpy(&w, p + i * 8, 8);
			if (i + 1 == nw && (e->info.rows & 63) && w >> (e->info.rows & 63))
				return -1;
			cnt += (uint64_t)__builtin_popcountll(w);
			if (out)
				out[i] = w;
		}
		return cnt == e->info.deleted ? 0 : -1;
	}
	for (int first = 1; p < end; first = 0) {
		if (!get_varint(&p, end, &gap) || !get_varint(&p, end, &l1) || (!first && !gap) ||
		    gap > e->info.rows - pos || l1 >= e->info.rows - pos - gap)
			return -1;
		pos += gap;
		for (uint64_t q = pos; out && q < pos + l1 + 1; q++)   /* O(deleted): fine for metadata */
			out[q >> 6] |= 1ull << (q & 63);
		pos += l1 + 1;
		cnt += l1 + 1;
	}
	/* the encoder picks runs only when strictly smaller: canonical form */
	return cnt == e->info.deleted && e->info.bytes < nw * 8 ? 0 : -1;
}

int sfs_dv_open(const char *path, sfs_dv_index_t **out)
{
	sfs_dv_index_t *x = calloc(1, sizeof(*x));
	uint32_t m, v, cnt, crc;
	uint64_t ixoff, tr;
	size_t len;
	const uint8_t *p;
	char *nm;
	int rc;

	if (!x || !(x->dx_path = strdup(path))) {
		free(x);
		return -ENOMEM;
	}
	if ((rc = sfs__layout_read(path, &x->dx_buf, &len)))
		goto fail;
	rc = SFS_ECORRUPT;
	if (len < DV_HDR + DV_TRAILER) {
		rc = bad(x, len, "truncated (shorter than header and trailer)");
		goto fail;
	}
	memcpy(&m, x->dx_buf, 4);
	memcpy(&v, x->dx_buf + 4, 4);
	if (m != DV_MAGIC) {
		rc = sfs__err(SFS_EMAGIC, "%s: bad magic at offset 0 (not a deletion-vector index)", path);
		goto fail;
	}
	if (v != SFS_DV_VERSION) {
		rc = sfs__err(SFS_EVERSION, "%s: version %u at offset 4, this build reads %u", path, v,
			      SFS_DV_VERSION);
		goto fail;
	}
	for (int i = 8; i < 16; i++)
		if (x->dx_buf[i]) {
			rc = bad(x, (uint64_t)i, "reserved header byte not zero");
			goto fail;
		}
	tr = len - DV_TRAILER;
	p = x->dx_buf + tr;
	memcpy(&ixoff, p, 8);
	memcpy(&cnt, p + 8, 4);
	memcpy(&crc, p + 12, 4);
	memcpy(&v, p + 16, 4);
	memcpy(&m, p + 20, 4);
	if (m != DV_MAGIC) {
		rc = bad(x, tr + 20, "trailer magic missing (truncated?)");
		goto fail;
	}
	if (v != SFS_DV_VERSION) {
		rc = sfs__err(SFS_EVERSION, "%s: trailer version %u at offset %llu, this build reads %u", path,
			      v, (ull)(tr + 16), SFS_DV_VERSION);
		goto fail;
	}
	if (ixoff < DV_HDR || ixoff > tr || (uint64_t)cnt * DV_ENTRY > tr - ixoff) {
		rc = bad(x, tr, "index offset or count out of bounds");
		goto fail;
	}
	if (sfs_crc32c(0, x->dx_buf + ixoff, (size_t)(tr + 12 - ixoff)) != crc) {
		rc = bad(x, ixoff, "index checksum mismatch");
		goto fail;
	}
	if (!(x->dx_ents = calloc(cnt ? cnt : 1, sizeof(*x->dx_ents))) ||
	    !(x->dx_names = malloc(tr - ixoff + 1))) {
		rc = -ENOMEM;
		goto fail;
	}
	nm = x->dx_names;
	p = x->dx_buf + ixoff;
	for (uint64_t i = 0, body_end = DV_HDR; i < cnt; i++) {
		struct dv_rent *e = &x->dx_ents[i];
		uint64_t off, at = (uint64_t)(p - x->dx_buf);
		uint32_t blen, bcrc;
		uint16_t nl;

		if (DV_ENTRY > tr - at) {
			rc = bad(x, at, "index entry truncated");
			goto fail;
		}
		memcpy(&e->info.rows, p, 8);
		memcpy(&e->info.deleted, p + 8, 8);
		memcpy(&off, p + 16, 8);
		memcpy(&blen, p + 24, 4);
		memcpy(&bcrc, p + 28, 4);
		e->info.enc = p[32];
		memcpy(&nl, p + 34, 2);
		if (nl < 1 || nl > SFS_LAYOUT_NAME_MAX || nl > tr - at - DV_ENTRY || p[33] ||
		    (e->info.enc != SFS_DV_BITMAP && e->info.enc != SFS_DV_RUNS) ||
		    e->info.rows > SFS_DV_ROWS_MAX || e->info.deleted > e->info.rows) {
			rc = bad(x, at, "index entry malformed");
			goto fail;
		}
		/* bodies are contiguous, in index order, and end where the index starts */
		if (off != body_end || blen > ixoff - off || (i + 1 == cnt && off + blen != ixoff)) {
			rc = bad(x, at, "vector body out of bounds");
			goto fail;
		}
		body_end = off + blen;
		memcpy(nm, p + DV_ENTRY, nl);
		nm[nl] = 0;
		if (strlen(nm) != nl || !sfs__layout_name_ok(nm) || (i && strcmp(x->dx_ents[i - 1].info.file, nm) >= 0)) {
			rc = bad(x, at + DV_ENTRY, "bad or unsorted data-file name");
			goto fail;
		}
		e->info.file = nm;
		e->info.bytes = blen;
		e->body = x->dx_buf + off;
		if (sfs_crc32c(0, e->body, blen) != bcrc) {
			rc = bad(x, off, "vector checksum mismatch");
			goto fail;
		}
		if (decode(e, NULL)) {
			rc = bad(x, off, "vector structure invalid");
			goto fail;
		}
		nm += nl + 1;
		p += DV_ENTRY + nl;
	}
	if (p != x->dx_buf + tr || (!cnt && ixoff != DV_HDR)) {
		rc = bad(x, (uint64_t)(p - x->dx_buf), "stray bytes in index");
		goto fail;
	}
	x->dx_n = cnt;
	*out = x;
	return 0;
fail:
	sfs_dv_close(x);
	return rc;
}

void sfs_dv_close(sfs_dv_index_t *x)
{
	if (!x)
		return;
	free(x->dx_buf);
	free(x->dx_ents);
	free(x->dx_names);
	free(x->dx_path);
	free(x);
}

size_t sfs_dv_count(const sfs_dv_index_t *x) { return x->dx_n; }

void sfs_dv_info(const sfs_dv_index_t *x, size_t i, struct sfs_dv_info *out)
{
	*out = x->dx_ents[i].info;
}

int sfs_dv_find(const sfs_dv_index_t *x, const char *file)
{
	size_t lo = 0, hi = x->dx_n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(x->dx_ents[mid].info.file, file);

		if (!c)
			return (int)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

int sfs_dv_decode(const sfs_dv_index_t *x, size_t i, uint64_t *bits, size_t cap)
{
	if (i >= x->dx_n || cap < sfs_dv_words(x->dx_ents[i].info.rows))
		return sfs__err(SFS_EUSAGE, "%s: vector %zu: no such vector or buffer of %zu words too small",
				x->dx_path, i, cap);
	return decode(&x->dx_ents[i], bits) ? bad(x, 0, "vector structure invalid") : 0;
}

int sfs_dv_lookup(const sfs_dv_index_t *x, const char *file, uint64_t **bits, size_t *words)
{
	int i = sfs_dv_find(x, file), rc;
	size_t nw;

	if (i < 0)
		return i;
	nw = sfs_dv_words(x->dx_ents[i].info.rows);
	if (!(*bits = calloc(nw ? nw : 1, 8)))
		return -ENOMEM;
	if ((rc = sfs_dv_decode(x, (size_t)i, *bits, nw))) {
		free(*bits);
		*bits = NULL;
		return rc;
	}
	*words = nw;
	return 0;
}

void sfs__dv_reseal(uint8_t *buf, size_t len)
{
	uint64_t ixoff, tr, at;
	uint32_t cnt, crc;

	if (len < DV_HDR + DV_TRAILER)
		return;
	tr = len - DV_TRAILER;
	memcpy(&ixoff, buf + tr, 8);
	memcpy(&cnt, buf + tr + 8, 4);
	if (ixoff < DV_HDR || ixoff > tr)
		return;
	/* the bodies' crcs first: the index crc covers them */
	at = ixoff;
	for (uint32_t i = 0; i < cnt && DV_ENTRY <= tr - at; i++) {
		uint64_t off;
		uint32_t blen;
		uint16_t nl;

		memcpy(&off, buf + at + 16, 8);
		memcpy(&blen, buf + at + 24, 4);
		memcpy(&nl, buf + at + 34, 2);
		if (off <= len && blen <= len - off) {
			crc = sfs_crc32c(0, buf + off, blen);
			memcpy(buf + at + 28, &crc, 4);
		}
		if (nl > tr - at - DV_ENTRY)
			break;
		at += DV_ENTRY + nl;
	}
	crc = sfs_crc32c(0, buf + ixoff, (size_t)(tr + 12 - ixoff));
	memcpy(buf + tr + 12, &crc, 4);
}
