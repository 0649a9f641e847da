/*
 * test_bufimage.c — buffer images (store/table/layout/bufimage.h): a
 * sealed write buffer saved and mapped back answers every get, walk and
 * sort exactly as the buffer in memory did, through a read-only mapping;
 * the strict reader refuses every truncation, every flipped byte, a wrong
 * version or layout, and the structural lies a resealed file can tell
 * (not sealed, sizes that disagree, bytes past the top); the writer's
 * failure at each fault point leaves no file under the final name and no
 * temp file.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "common/err.h"
#include "common/fault.h"
#include "store/table/layout/bufimage.h"
#include "store/table/layout/file.h"
#include "store/table/layout/sync.h"
#include "worker/wbuf.h"

/* The seal's context of worker @w's buffer @seq (no clocks, spilled). */
#define META(w_, s_) ((struct sfs_bufimg_meta){ .worker = (w_), .seq = (s_) })

static char dir[64];
static char path[128];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-bi-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/w0-1.img", dir);
	sfs_layout_set_sync(1);
}

static void teardown(void)
{
	sfs_fault_reset();
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(bufimage, .init = setup, .fini = teardown, .timeout = 120);

static struct sfs_wbuf *mkbuf(uint64_t max_entries, uint64_t arena)
{
	size_t size = sfs_wbuf_size(max_entries, arena);
	struct sfs_wbuf *b;

	cr_assert_neq(size, 0);
	cr_assert_eq(sfs_wbuf_init(th_map(size), size, max_entries, &b), 0, "%s", sfs_last_error());
	return b;
}

/* A buffer with every kind of entry, after one earlier life (so the index
 * holds stale slots of another generation), sealed at barrier 7. */
static struct sfs_wbuf *mixed(unsigned n)
{
	struct sfs_wbuf *b = mkbuf(4 * n + 64, 256 * n + 4096);
	char k[32], v[64];

	for (unsigned i = 0; i < n; i++) {   /* the earlier life */
		snprintf(k, sizeof(k), "old-%u", i);
		cr_assert_eq(sfs_wbuf_put(b, 1, k, strlen(k), "x", 1), 0);
	}
	sfs_wbuf_reset(b);
	for (unsigned i = 0; i < n; i++) {
		int64_t one = 5;

		snprintf(k, sizeof(k), "key-%05u", i);
		snprintf(v, sizeof(v), "value %u %.*s", i, (int)(i % 40), "abcdefghijklmnopqrstuvwxyzabcdefghijklmn");
		switch (i % 5) {
		case 0: cr_assert_eq(sfs_wbuf_put(b, i % 3, k, strlen(k), v, strlen(v)), 0); break;
		case 1: cr_assert_eq(sfs_wbuf_put(b, 1, k, strlen(k), "first", 5), 0);
			cr_assert_eq(sfs_wbuf_put(b, 1, k, strlen(k), v, strlen(v)), 0); break;
		case 2: cr_assert_eq(sfs_wbuf_delete(b, 2, k, strlen(k)), 0); break;
		case 3: cr_assert_eq(sfs_wbuf_merge_add(b, 3, k, strlen(k), (int64_t)i), 0);
			cr_assert_eq(sfs_wbuf_merge_add(b, 3, k, strlen(k), -2), 0); break;
		case 4: cr_assert_eq(sfs_wbuf_put(b, 4, k, strlen(k), &one, 8), 0);
			cr_assert_eq(sfs_wbuf_merge_add(b, 4, k, strlen(k), 10), 0); break;
		}
	}
	cr_assert_eq(sfs_wbuf_seal(b, 7), 0);
	return b;
}

/* Every current entry of @a is in @b, alike; and as many. */
static void same(const struct sfs_wbuf *a, const struct sfs_wbuf *b)
{
	struct sfs_wbuf_iter it = { 0 };
	struct sfs_wbuf_view va, vb;
	uint64_t n = 0, m = 0;
	size_t na, nb;
	uint64_t *oa, *ob;
	int rc;

	while ((rc = sfs_wbuf_next(a, &it, &va)) == 0) {
		n++;
		cr_assert_eq(sfs_wbuf_get(b, va.ns, va.key, va.klen, &vb), 0, "key %u bytes missing",
			     va.klen);
		cr_assert_eq(vb.kind, va.kind);
		cr_assert_eq(vb.flags, va.flags);
		cr_assert_eq(vb.len, va.len);
		cr_assert_eq(vb.off, va.off, "the same offsets: the arena is byte for byte");
		if (va.value)
			cr_assert_eq(memcmp(va.value, vb.value, va.len), 0);
	}
	cr_assert_eq(rc, -ENOENT);
	it.pos = 0;
	while ((rc = sfs_wbuf_next(b, &it, &vb)) == 0)
		m++;
	cr_assert_eq(rc, -ENOENT);
	cr_assert_eq(m, n);
	oa = calloc(n + 1, 8);
	ob = calloc(n + 1, 8);
	cr_assert_eq(sfs_wbuf_sorted(a, oa, n + 1, &na), 0);
	cr_assert_eq(sfs_wbuf_sorted(b, ob, n + 1, &nb), 0, "%s", sfs_last_error());
	cr_assert_eq(na, nb);
	cr_assert_eq(memcmp(oa, ob, na * 8), 0, "the same sorted order");
	free(oa);
	free(ob);
}

Test(bufimage, roundtrip_in_place)
{
	struct sfs_wbuf *b = mixed(1000);
	struct sfs_bufimg *im;
	struct sfs_wbuf_view v;
	struct stat st;
	struct sfs_bufimg_meta m = { .worker = 3, .seq = 42, .ttl_proc_ms = 1700000000123ull,
				     .ttl_event_ms = 99, .flags = SFS_BUFIMG_AT_BARRIER };

	snprintf(path, sizeof(path), "%s/l0/w3-42.img", dir);   /* l0/ is made */
	cr_assert_eq(sfs_bufimg_write(path, b, &m), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_bufimg_open(path, &im), 0, "%s", sfs_last_error());
	cr_assert(im->meta.worker == 3 && im->meta.seq == 42 && im->meta.ttl_event_ms == 99 &&
		  im->meta.ttl_proc_ms == m.ttl_proc_ms && im->meta.flags == SFS_BUFIMG_AT_BARRIER,
		  "the seal's context as written");
	cr_assert_eq(im->worker, 3);
	cr_assert_eq(im->seq, 42);
	cr_assert_eq(im->barrier, 7);
	cr_assert_eq(im->live, 1000);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, SFS_BUFIMG_HDR + b->wb_top, "header + the used buffer");
	same(b, im->b);   /* through the PROT_READ mapping: a write would fault */
	cr_assert_eq(sfs_wbuf_get(im->b, 3, "key-00003", 9, &v), 0);
	cr_assert_eq(v.kind, SFS_WBUF_MERGE);
	cr_assert_eq(sfs_wbuf_view_i64(&v), 1, "3 - 2");
	cr_assert_eq(sfs_wbuf_get(im->b, 4, "key-00004", 9, &v), 0);
	cr_assert_eq(v.kind, SFS_WBUF_PUT);
	cr_assert_eq(sfs_wbuf_view_i64(&v), 15);
	cr_assert_eq(sfs_wbuf_get(im->b, 1, "old-1", 5, &v), -ENOENT, "a stale slot is free");
	sfs_bufimg_close(im);
}

Test(bufimage, empty_buffer_is_padded)
{
	struct sfs_wbuf *b = mkbuf(8, 64);
	struct sfs_bufimg *im;
	struct sfs_wbuf_iter it = { 0 };
	struct sfs_wbuf_view v;

	cr_assert_eq(sfs_wbuf_seal(b, 1), 0);
	cr_assert_eq(sfs_bufimg_write(path, b, &META(0, 1)), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_bufimg_open(path, &im), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs_wbuf_next(im->b, &it, &v), -ENOENT);
	sfs_bufimg_close(im);
}

Test(bufimage, unsealed_refused)
{
	struct sfs_wbuf *b = mkbuf(8, 256);

	cr_assert_eq(sfs_wbuf_put(b, 0, "k", 1, "v", 1), 0);
	cr_assert_eq(sfs_bufimg_write(path, b, &META(0, 1)), SFS_EUSAGE);
	cr_assert_eq(access(path, F_OK), -1);
}

/* The image of a small mixed buffer, read whole. */
static void image(uint8_t **img, size_t *len)
{
	struct sfs_wbuf *b = mixed(40);

	cr_assert_eq(sfs_bufimg_write(path, b, &META(1, 2)), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__layout_read(path, img, len), 0);
}

/* @len bytes at @img (copied to aligned memory) through the checker. */
static int check(const uint8_t *img, size_t len)
{
	void *p = aligned_alloc(64, (len + 63) / 64 * 64 + 64);
	int rc;

	memcpy(p, img, len);
	rc = sfs_bufimg_check("t", p, len, NULL);
	free(p);
	return rc;
}

Test(bufimage, every_flip_and_truncation_refused)
{
	uint8_t *img;
	size_t len;

	image(&img, &len);
	cr_assert_eq(check(img, len), 0, "%s", sfs_last_error());
	for (size_t i = 0; i < len; i++) {
		img[i] ^= 0x10;
		cr_assert_neq(check(img, len), 0, "a flip at byte %zu accepted", i);
		img[i] ^= 0x10;
	}
	for (size_t n = 0; n < len; n += n < 256 ? 1 : 61)
		cr_assert_neq(check(img, n), 0, "truncated to %zu accepted", n);
	free(img);
}

/* Rewrite the copied wbuf header's field at @off (8 bytes) and reseal. */
static int lie(const uint8_t *img, size_t len, size_t off, uint64_t val)
{
	uint8_t *c = malloc(len);
	int rc;

	memcpy(c, img, len);
	memcpy(c + SFS_BUFIMG_HDR + off, &val, 8);
	sfs__bufimg_reseal(c, len);
	rc = check(c, len);
	free(c);
	return rc;
}

Test(bufimage, resealed_lies_refused)
{
	uint8_t *img, *c;
	size_t len;
	struct sfs_bufimg_hdr h;
	uint32_t w;

	image(&img, &len);
	memcpy(&h, img, sizeof(h));
	cr_assert_eq(lie(img, len, offsetof(struct sfs_wbuf, wb_top), h.bi_top), 0, "the truth passes");
	cr_assert_eq(lie(img, len, offsetof(struct sfs_wbuf, wb_size), h.bi_body_len + 64), SFS_ECORRUPT,
		     "a buffer larger than the file");
	cr_assert_eq(lie(img, len, offsetof(struct sfs_wbuf, wb_top), h.bi_top - 8), SFS_ECORRUPT);
	cr_assert_eq(lie(img, len, offsetof(struct sfs_wbuf, wb_live), h.bi_live - 1), SFS_ECORRUPT);
	cr_assert_eq(lie(img, len, offsetof(struct sfs_wbuf, wb_barrier), 8), SFS_ECORRUPT);
	w = 0;   /* not sealed */
	c = malloc(len);
	memcpy(c, img, len);
	memcpy(c + SFS_BUFIMG_HDR + offsetof(struct sfs_wbuf, wb_sealed), &w, 4);
	sfs__bufimg_reseal(c, len);
	cr_assert_eq(check(c, len), SFS_ECORRUPT, "an unsealed buffer");
	/* An entry's value length past the top (the index still names it). */
	memcpy(c, img, len);
	{
		const struct sfs_wbuf *b = (const void *)(img + SFS_BUFIMG_HDR);
		uint64_t off = b->wb_arena_off + 16;   /* the first entry's we_vlen... */
		uint32_t big = 1u << 20;

		memcpy(c + SFS_BUFIMG_HDR + off + 4, &big, 4);   /* ...is at +20 */
	}
	sfs__bufimg_reseal(c, len);
	cr_assert_eq(check(c, len), SFS_ECORRUPT, "an entry past the arena");
	/* Version, wbuf version and layout: each its own code. */
	memcpy(c, img, len);
	h.bi_version = 2;
	memcpy(c, &h, sizeof(h));
	sfs__bufimg_reseal(c, len);
	cr_assert_eq(check(c, len), SFS_EVERSION);
	memcpy(&h, img, sizeof(h));
	h.bi_wbuf_version++;
	memcpy(c, &h, sizeof(h));
	sfs__bufimg_reseal(c, len);
	cr_assert_eq(check(c, len), SFS_EVERSION);
	memcpy(&h, img, sizeof(h));
	h.bi_wbuf_layout ^= 1;
	memcpy(c, &h, sizeof(h));
	sfs__bufimg_reseal(c, len);
	cr_assert_eq(check(c, len), SFS_ELAYOUT);
	/* A non-zero byte past the top (a small buffer is padded). */
	free(c);
	free(img);
}

/* A shallow open (the live path) does not verify the index: the wbuf's
 * readers must still refuse an entry whose length wraps the 8-byte pad
 * (a value of 2^32 - 7 bytes once read as 0 bytes of pad and passed). */
Test(bufimage, shallow_open_readers_refuse_a_wrapping_value_length)
{
	struct sfs_wbuf *b = mixed(40);
	struct sfs_wbuf_iter it = { 0 };
	struct sfs_wbuf_view v;
	struct sfs_bufimg *im;
	uint8_t *img;
	size_t len;
	uint32_t big = 0xfffffff9u;
	int rc, bad = 0;
	FILE *f;

	cr_assert_eq(sfs_bufimg_write(path, b, &META(0, 1)), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__layout_read(path, &img, &len), 0);
	memcpy(img + SFS_BUFIMG_HDR + b->wb_arena_off + 20, &big, 4);   /* first entry's vlen */
	sfs__bufimg_reseal(img, len);
	cr_assert_not_null(f = fopen(path, "wb"));
	cr_assert_eq(fwrite(img, 1, len, f), len);
	fclose(f);
	free(img);
	cr_assert_neq(sfs_bufimg_open(path, &im), 0, "deep: the index is verified");
	cr_assert_eq(sfs_bufimg_open_ex(path, SFS_BUFIMG_SHALLOW, &im), 0, "%s", sfs_last_error());
	while ((rc = sfs_wbuf_next(im->b, &it, &v)) != -ENOENT) {
		if (rc) {
			bad++;
			continue;
		}
		cr_assert_leq((const char *)v.key + v.klen, (const char *)im->map + im->map_len);
		if (v.value)
			cr_assert_leq((const char *)v.value + v.len,
				      (const char *)im->map + im->map_len, "a view past the file");
	}
	cr_assert_eq(bad, 1, "the bad entry refused, the others read");
	sfs_bufimg_close(im);
}

Test(bufimage, padding_must_be_zero)
{
	struct sfs_wbuf *b = mkbuf(8, 64);
	uint8_t *img;
	size_t len;

	cr_assert_eq(sfs_wbuf_put(b, 0, "k", 1, "v", 1), 0);
	cr_assert_eq(sfs_wbuf_seal(b, 1), 0);
	cr_assert_eq(sfs_bufimg_write(path, b, &META(0, 1)), 0, "%s", sfs_last_error());
	cr_assert_eq(sfs__layout_read(path, &img, &len), 0);
	cr_assert_gt(len - 1, SFS_BUFIMG_HDR + b->wb_top, "padded");
	img[len - 1] = 1;
	sfs__bufimg_reseal(img, len);
	cr_assert_eq(check(img, len), SFS_ECORRUPT);
	free(img);
}

static int files_in_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(bufimage, each_fault_leaves_nothing)
{
	static const char *const pts[] = { "layout.bufimg.open", "layout.bufimg.write",
					   "layout.bufimg.fsync", "layout.bufimg.rename" };
	struct sfs_wbuf *b = mixed(100);
	struct sfs_bufimg *im;
	char rule[64];

	for (size_t i = 0; i < sizeof(pts) / sizeof(*pts); i++) {
		sfs_fault_reset();
		snprintf(rule, sizeof(rule), "%s:1:fail=EIO", pts[i]);
		cr_assert_eq(sfs_fault_arm(rule), 0, "%s", sfs_last_error());
		cr_assert_eq(sfs_bufimg_write(path, b, &META(0, 1)), -EIO, "%s", pts[i]);
		cr_assert_eq(sfs_fault_hits(pts[i]), 1, "%s reached", pts[i]);
		cr_assert_eq(files_in_dir(), 0, "%s: nothing left", pts[i]);
	}
	/* The directory's fsync fails after the rename: the whole image is there. */
	sfs_fault_reset();
	cr_assert_eq(sfs_fault_arm("layout.bufimg.dirsync:1:fail=EIO"), 0);
	cr_assert_eq(sfs_bufimg_write(path, b, &META(0, 1)), -EIO);
	cr_assert_eq(files_in_dir(), 1);
	cr_assert_eq(sfs_bufimg_open(path, &im), 0, "%s", sfs_last_error());
	sfs_bufimg_close(im);
}
