/*
 * datafile_write.c — the table store's data file, written (format and
 * API: datafile.h; what the reader shares: datafile_fmt.h).
 *
 * Rows arrive sorted; the key column is cut into key pages and the
 * value column into value pages, independently, and each page goes to
 * "<path>.tmp" as it is cut (version 3: key and value pages interleaved in
 * the order they were cut; the footer names every page's offset).  Every
 * byte is written once: versions 1 and 2 put all key pages before the
 * first value page, so a writer had to spill the values to a scratch file
 * and copy them after the keys — twice the value bytes through the page
 * cache and an inode per large file, 15 % of a q20 compactor at 20M events
 * (bench/RESULTS.md, issue 18).  finish() appends the filters (built from
 * the 8-byte key hashes kept per row and per distinct prefix, sized once
 * the counts are known) and the footer, then fsync (while
 * sfs_layout_sync(): sync.h) + rename.
 *
 * Next on a key's path: the file is committed by the table engine
 * (store/table/table_session.c) and read by datafile_read.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "common/keycmp.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/datafile_fmt.h"
#include "store/table/layout/sync.h"

#define DF_PAGE_DEFAULT (16u << 10)
#define DF_FILTER_BITS 10u

/*
 * Pages reach their file in runs of DF_OUT_BYTES, not one write(2) each: a
 * 4 KiB page per call made ~900 writes per table commit of q4 (strace), 9 us
 * each on ext4.  @out holds what is not written yet; dw_off counts it as
 * written (offsets are the file's once flushed).
 */
#define DF_OUT_BYTES (256u << 10)

/*
 * A big file's write-back starts as it is written, each DF_WB_BYTES
 * (sync_file_range WRITE: the I/O begins, nothing waits for it), so the
 * checkpoint that links a merge's output of gigabytes finds its pages
 * mostly clean instead of fsyncing them all at once: those fsyncs were the
 * longest checkpoints at 100M (bench/RESULTS.md, issue 34).  Files under
 * DF_WB_BYTES (every barrier's level-0 file) are left to the kernel.
 * SFS_DF_WRITEBACK=0: off.
 */
#define DF_WB_BYTES (16u << 20)

/*
 * LZ4's acceleration for key pages (values: 1, LZ4's default).  Key pages
 * are compressed only where keys are long and repetitive — Flink's
 * serialized rows (`table-keys compressed`); the C runtime keeps them raw.
 * On a file of Flink's q20 (250-byte keys) acceleration 4 compressed its
 * key pages at 940 MB/s against 744, for 4 % more bytes (bench/RESULTS.md,
 * issue 34's sixth stop).  SFS_DF_KEY_ACCEL=N sets it (1..65537).
 */
#define DF_KEY_ACCEL 4

struct df_buf {
	uint8_t *p;
	size_t len, cap;
};

struct sfs_df_writer {
	char *dw_path, *dw_tmp;
	int dw_fd;                   /* the temp file: header, pages, rest at finish */
	uint64_t dw_off;             /* bytes written to it (dw_out counted) */
	int dw_codec, dw_zlevel;
	uint32_t dw_page_bytes, dw_page_rows, dw_filter_bits;
	int dw_keys_raw;
	int dw_key_accel;            /* LZ4 acceleration of key pages (DF_KEY_ACCEL) */
	int dw_err;                  /* sticky I/O error */
	int dw_renamed;              /* finish got as far as the rename */
	int dw_wb;                   /* start write-back as it goes (DF_WB_BYTES) */
	uint64_t dw_wb_from;         /* bytes whose write-back was started */

	/* the key page being built: kinds, end offsets, key bytes */
	struct df_buf dw_kkind, dw_kend, dw_kdata;
	uint32_t dw_krows;
	uint64_t dw_kfirst;
	/* the value page being built */
	struct df_buf dw_vend, dw_vdata;
	uint32_t dw_vrows;
	uint64_t dw_vfirst;

	struct df_buf dw_last;       /* the previous key: the order check */
	struct df_buf dw_kdir, dw_vdir, dw_keys;  /* footer parts */
	struct df_buf dw_hashes;     /* u64 per row, for the filter */
	uint32_t (*dw_prefix_of)(const void *, size_t);  /* NULL: no prefix filter */
	uint32_t dw_pfx_rule;
	uint32_t dw_last_plen;       /* the previous row's prefix length */
	struct df_buf dw_phashes;    /* u64 per distinct prefix */
	struct df_buf dw_page, dw_zbuf;
	struct df_buf dw_out;        /* pages not yet written to dw_fd */
	ZSTD_CCtx *dw_zc;
	uint64_t dw_rows, dw_puts, dw_deletes, dw_merges;
};

static int open_tmp(sfs_df_writer_t *w);
static void dir_of(const char *path, char *out, size_t cap);
static void writer_free(sfs_df_writer_t *w);
static int add_prefix(sfs_df_writer_t *w, const void *key, size_t klen);
static int flush_key_page(sfs_df_writer_t *w);
static int flush_value_page(sfs_df_writer_t *w);
static int compress_page(sfs_df_writer_t *w, const uint8_t *raw, size_t n, int accel,
			 const uint8_t **out, size_t *olen);
static int out_put(int fd, struct df_buf *out, const void *p, size_t n);
static void writeback_ahead(struct sfs_df_writer *w);
static int out_flush(int fd, struct df_buf *out);
static int write_all(int fd, const void *p, size_t n);
static int df_fault(const char *point);
static int finish(sfs_df_writer_t *w);
static void sbbf_add(uint8_t *f, uint32_t nblocks, uint64_t h);
static int buf_reserve(struct df_buf *b, size_t more);
static int buf_put(struct df_buf *b, const void *src, size_t n);
static void buf_free(struct df_buf *b);

int sfs_df_writer_open(const char *path, const struct sfs_df_write_opts *opts, sfs_df_writer_t **out)
{
	struct sfs_df_write_opts o = opts ? *opts : (struct sfs_df_write_opts){ 0 };
	struct df_header h = { .h_magic = DF_MAGIC, .h_version = SFS_DF_VERSION };
	sfs_df_writer_t *w;
	int rc;

	*out = NULL;
	if (o.codec < SFS_DF_NONE || o.codec > SFS_DF_ZSTD || o.page_bytes > DF_PAGE_BYTES_MAX ||
	    o.filter_bits > 64 || (o.prefix_of && !o.prefix_rule))
		return sfs__err(SFS_EUSAGE, "%s: bad writer options (codec %d, page_bytes %u, filter_bits %u, "
				"prefix rule %u)", path, o.codec, o.page_bytes, o.filter_bits, o.prefix_rule);
	if (!(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	w->dw_fd = -1;
	w->dw_wb = !getenv("SFS_DF_WRITEBACK") || strcmp(getenv("SFS_DF_WRITEBACK"), "0");
	w->dw_codec = o.codec;
	w->dw_zlevel = o.zstd_level ? o.zstd_level : 3;
	w->dw_page_bytes = o.page_bytes ? o.page_bytes : DF_PAGE_DEFAULT;
	w->dw_keys_raw = o.keys_raw;
	w->dw_key_accel = getenv("SFS_DF_KEY_ACCEL") ? atoi(getenv("SFS_DF_KEY_ACCEL")) : DF_KEY_ACCEL;
	if (w->dw_key_accel < 1 || w->dw_key_accel > 65537)
		w->dw_key_accel = DF_KEY_ACCEL;
	w->dw_page_rows = o.page_rows ? o.page_rows : UINT32_MAX;
	w->dw_filter_bits = o.filter_bits ? o.filter_bits : DF_FILTER_BITS;
	w->dw_prefix_of = o.prefix_of;
	w->dw_pfx_rule = o.prefix_rule;
	if (!(w->dw_path = strdup(path)) || asprintf(&w->dw_tmp, "%s.tmp", path) < 0) {
		w->dw_tmp = NULL;
		writer_free(w);
		return -ENOMEM;
	}
	if (w->dw_codec == SFS_DF_ZSTD && !(w->dw_zc = ZSTD_createCCtx())) {
		writer_free(w);
		return -ENOMEM;
	}
	if ((rc = open_tmp(w))) {
		writer_free(w);
		return rc;
	}
	h.h_codec = (uint32_t)w->dw_codec;
	h.h_crc = sfs_crc32c(0, &h, offsetof(struct df_header, h_crc));
	if ((rc = write_all(w->dw_fd, &h, sizeof(h)))) {
		rc = sfs__err(rc, "%s: write header: %s", w->dw_tmp, strerror(-rc));
		sfs_df_writer_abort(w);
		return rc;
	}
	w->dw_off = DF_HDR;
	*out = w;
	return 0;
}

static int open_tmp(sfs_df_writer_t *w)
{
	char dir[PATH_MAX];
	int rc;

	for (int tries = 0;; tries++) {
		w->dw_fd = df_fault("layout.df.open") ? -1 : open(w->dw_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (w->dw_fd >= 0)
			break;
		if (errno != ENOENT || tries)
			return sfs__err(sfs__errno(), "%s: create: %s", w->dw_tmp, strerror(errno));
		/* The first miss only: the engine's directories exist after this
		 * (fs.h's mkdir-once rule); data: private. */
		dir_of(w->dw_path, dir, sizeof(dir));
		if ((rc = sfs_mkdirs(dir, 0700)))
			return rc;
	}
	return 0;
}

/* The directory part of @path ("." for a bare name), into @out. */
static void dir_of(const char *path, char *out, size_t cap)
{
	const char *s = strrchr(path, '/');

	if (!s)
		snprintf(out, cap, ".");
	else if (s == path)
		snprintf(out, cap, "/");
	else
		snprintf(out, cap, "%.*s", (int)(s - path), path);
}

static void writer_free(sfs_df_writer_t *w)
{
	if (w->dw_fd >= 0)
		close(w->dw_fd);
	buf_free(&w->dw_kkind);
	buf_free(&w->dw_kend);
	buf_free(&w->dw_kdata);
	buf_free(&w->dw_vend);
	buf_free(&w->dw_vdata);
	buf_free(&w->dw_last);
	buf_free(&w->dw_kdir);
	buf_free(&w->dw_vdir);
	buf_free(&w->dw_keys);
	buf_free(&w->dw_hashes);
	buf_free(&w->dw_phashes);
	buf_free(&w->dw_page);
	buf_free(&w->dw_zbuf);
	buf_free(&w->dw_out);
	ZSTD_freeCCtx(w->dw_zc);
	free(w->dw_path);
	free(w->dw_tmp);
	free(w);
}

int sfs_df_writer_add(sfs_df_writer_t *w, const void *key, size_t klen, int kind, const void *val,
		      size_t vlen)
{
	uint32_t end;
	uint8_t k = (uint8_t)kind;
	uint64_t h;
	int rc;

	if (w->dw_err)
		return w->dw_err;
	if (klen < SFS_DF_KEY_MIN || klen > SFS_DF_KEY_MAX)
		return sfs__err(SFS_EUSAGE, "%s: row %llu: key of %zu bytes (%u..%u allowed)", w->dw_path,
				(ull)w->dw_rows, klen, SFS_DF_KEY_MIN, SFS_DF_KEY_MAX);
	if (kind != SFS_DF_PUT && kind != SFS_DF_DELETE && kind != SFS_DF_MERGE)
		return sfs__err(SFS_EUSAGE, "%s: row %llu: unknown kind %d", w->dw_path, (ull)w->dw_rows, kind);
	if ((kind == SFS_DF_PUT && vlen > SFS_DF_VALUE_MAX) || (kind == SFS_DF_DELETE && vlen) ||
	    (kind == SFS_DF_MERGE && vlen != 8))
		return sfs__err(SFS_EUSAGE, "%s: row %llu: kind %d with a %zu-byte value (PUT <= %u, "
				"DELETE 0, MERGE 8)", w->dw_path, (ull)w->dw_rows, kind, vlen,
				SFS_DF_VALUE_MAX);
	if (w->dw_rows && sfs_keycmp(key, klen, w->dw_last.p, w->dw_last.len) <= 0)
		return sfs__err(SFS_EUSAGE, "%s: row %llu: key not above the previous one (keys must be "
				"strictly increasing)", w->dw_path, (ull)w->dw_rows);

	/* Cut before a row that would overflow the target, so a big value or
	 * key sits alone rather than dragging a full page past it. */
	if (w->dw_krows && (w->dw_kdata.len + klen > w->dw_page_bytes || w->dw_krows >= w->dw_page_rows) &&
	    (rc = flush_key_page(w)))
		goto io;
	if (w->dw_vrows && w->dw_vend.len + w->dw_vdata.len + 4 + vlen > w->dw_page_bytes &&
	    (rc = flush_value_page(w)))
		goto io;

	if (w->dw_prefix_of && (rc = add_prefix(w, key, klen)))
		goto io;
	h = df_hash(key, klen);
	end = (uint32_t)(w->dw_kdata.len + klen);
	if ((rc = buf_put(&w->dw_kkind, &k, 1)) || (rc = buf_put(&w->dw_kend, &end, 4)) ||
	    (rc = buf_put(&w->dw_kdata, key, klen)) || (rc = buf_reserve(&w->dw_vend, 4)) ||
	    (rc = buf_reserve(&w->dw_vdata, vlen)) || (rc = buf_put(&w->dw_hashes, &h, 8)))
		goto io;
	end = (uint32_t)(w->dw_vdata.len + vlen);
	buf_put(&w->dw_vend, &end, 4);
	buf_put(&w->dw_vdata, val, vlen);
	w->dw_last.len = 0;
	if ((rc = buf_put(&w->dw_last, key, klen)))
		goto io;
	w->dw_krows++;
	w->dw_vrows++;
	w->dw_rows++;
	w->dw_puts += kind == SFS_DF_PUT;
	w->dw_deletes += kind == SFS_DF_DELETE;
	w->dw_merges += kind == SFS_DF_MERGE;
	return 0;
io:
	/* A half-added row or a lost page: the file can only be dropped. */
	w->dw_err = rc;
	return rc;
}

/* The prefix filter's share of a row (before dw_last moves on): its
 * prefix's hash, once per run of rows with the same prefix.  A row without
 * a prefix drops the file's prefix filter. */
static int add_prefix(sfs_df_writer_t *w, const void *key, size_t klen)
{
	uint32_t p = w->dw_prefix_of(key, klen);
	uint64_t h;

	if (!p || p > klen) {
		w->dw_prefix_of = NULL;
		buf_free(&w->dw_phashes);
		return 0;
	}
	if (w->dw_rows && p == w->dw_last_plen && w->dw_last.len >= p && memcmp(w->dw_last.p, key, p) == 0)
		return 0;
	w->dw_last_plen = p;
	h = df_hash(key, p);
	return buf_put(&w->dw_phashes, &h, 8);
}

/* The key area: a page's min or max key; its (offset, length). */
static int put_key(sfs_df_writer_t *w, const uint8_t *k, uint32_t len, uint32_t *off)
{
	*off = (uint32_t)w->dw_keys.len;
	if (w->dw_keys.len + len > UINT32_MAX)
		return sfs__err(SFS_EUSAGE, "%s: page keys exceed the footer's 4 GiB", w->dw_path);
	return buf_put(&w->dw_keys, k, len);
}

static int flush_key_page(sfs_df_writer_t *w)
{
	uint32_t n = w->dw_krows, pad = (4 - n % 4) % 4, lastb;
	struct df_kpe e = { 0 };
	const uint8_t *z;
	size_t zlen;
	int rc;

	if (!n)
		return 0;
	w->dw_page.len = 0;
	if ((rc = buf_put(&w->dw_page, w->dw_kkind.p, n)) ||
	    (rc = buf_put(&w->dw_page, "\0\0\0", pad)) ||
	    (rc = buf_put(&w->dw_page, w->dw_kend.p, w->dw_kend.len)) ||
	    (rc = buf_put(&w->dw_page, w->dw_kdata.p, w->dw_kdata.len)))
		return rc;
	lastb = n > 1 ? ld32(w->dw_kend.p + 4 * (n - 2)) : 0;
	if ((rc = put_key(w, w->dw_kdata.p, ld32(w->dw_kend.p), &e.k_min_off)) ||
	    (rc = put_key(w, w->dw_kdata.p + lastb, (uint32_t)w->dw_kdata.len - lastb, &e.k_max_off)))
		return rc;
	e.k_min_len = ld32(w->dw_kend.p);
	e.k_max_len = (uint32_t)w->dw_kdata.len - lastb;
	if (w->dw_keys_raw) {
		z = w->dw_page.p;
		zlen = w->dw_page.len;
		e.k_codec = SFS_DF_NONE;
	} else {
		e.k_codec = (uint32_t)compress_page(w, w->dw_page.p, w->dw_page.len, w->dw_key_accel,
						    &z, &zlen);
	}
	e.k_off = w->dw_off;
	e.k_first_row = w->dw_kfirst;
	e.k_stored = (uint32_t)zlen;
	e.k_raw = (uint32_t)w->dw_page.len;
	e.k_rows = n;
	e.k_crc = sfs_crc32c(0, z, zlen);
	if ((rc = out_put(w->dw_fd, &w->dw_out, z, zlen)))
		return rc == -ENOMEM ? rc : sfs__err(rc, "%s: write key pages before offset %llu: %s",
						     w->dw_tmp, (ull)w->dw_off, strerror(-rc));
	w->dw_off += zlen;
	writeback_ahead(w);
	if ((rc = buf_put(&w->dw_kdir, &e, sizeof(e))))
		return rc;
	w->dw_kkind.len = w->dw_kend.len = w->dw_kdata.len = 0;
	w->dw_kfirst += n;
	w->dw_krows = 0;
	return 0;
}

static int flush_value_page(sfs_df_writer_t *w)
{
	uint32_t n = w->dw_vrows;
	struct df_vpe e = { 0 };
	const uint8_t *z;
	size_t zlen;
	int rc;

	if (!n)
		return 0;
	w->dw_page.len = 0;
	if ((rc = buf_put(&w->dw_page, w->dw_vend.p, w->dw_vend.len)) ||
	    (rc = buf_put(&w->dw_page, w->dw_vdata.p, w->dw_vdata.len)))
		return rc;
	e.v_codec = (uint32_t)compress_page(w, w->dw_page.p, w->dw_page.len, 1, &z, &zlen);
	e.v_off = w->dw_off;
	e.v_first_row = w->dw_vfirst;
	e.v_stored = (uint32_t)zlen;
	e.v_raw = (uint32_t)w->dw_page.len;
	e.v_rows = n;
	e.v_crc = sfs_crc32c(0, z, zlen);
	if ((rc = out_put(w->dw_fd, &w->dw_out, z, zlen)))
		return rc == -ENOMEM ? rc : sfs__err(rc, "%s: write value pages before offset %llu: %s",
						     w->dw_tmp, (ull)w->dw_off, strerror(-rc));
	w->dw_off += zlen;
	writeback_ahead(w);
	if ((rc = buf_put(&w->dw_vdir, &e, sizeof(e))))
		return rc;
	w->dw_vend.len = w->dw_vdata.len = 0;
	w->dw_vfirst += n;
	w->dw_vrows = 0;
	return 0;
}

/* Compress @raw into w->dw_zbuf if that shrinks it (@accel: LZ4's
 * acceleration); the codec used. */
static int compress_page(sfs_df_writer_t *w, const uint8_t *raw, size_t n, int accel,
			 const uint8_t **out, size_t *olen)
{
	size_t bound, got = 0;

	*out = raw;
	*olen = n;
	if (w->dw_codec == SFS_DF_NONE || n == 0)
		return SFS_DF_NONE;
	bound = w->dw_codec == SFS_DF_LZ4 ? (size_t)LZ4_compressBound((int)n) : ZSTD_compressBound(n);
	if (buf_reserve(&w->dw_zbuf, bound))
		return SFS_DF_NONE;   /* no memory to compress: store raw, still correct */
	if (w->dw_codec == SFS_DF_LZ4) {
		int r = LZ4_compress_fast((const char *)raw, (char *)w->dw_zbuf.p, (int)n, (int)bound,
					  accel);

		got = r > 0 ? (size_t)r : 0;
	} else {
		size_t r = ZSTD_compressCCtx(w->dw_zc, w->dw_zbuf.p, bound, raw, n, w->dw_zlevel);

		got = ZSTD_isError(r) ? 0 : r;
	}
	if (!got || got >= n)
		return SFS_DF_NONE;
	*out = w->dw_zbuf.p;
	*olen = got;
	return w->dw_codec;
}

/* The file holds dw_off less what dw_out still buffers. */
static void writeback_ahead(struct sfs_df_writer *w)
{
	uint64_t on_file = w->dw_off - w->dw_out.len;

	if (!w->dw_wb || on_file - w->dw_wb_from < DF_WB_BYTES)
		return;
	(void)sync_file_range(w->dw_fd, (off_t)w->dw_wb_from, (off_t)(on_file - w->dw_wb_from),
			      SYNC_FILE_RANGE_WRITE);	/* a hint: its failure costs nothing */
	w->dw_wb_from = on_file;
}

static int out_put(int fd, struct df_buf *out, const void *p, size_t n)
{
	int rc = buf_put(out, p, n);

	if (rc == 0 && out->len >= DF_OUT_BYTES)
		rc = out_flush(fd, out);
	return rc;
}

static int out_flush(int fd, struct df_buf *out)
{
	int rc = out->len ? write_all(fd, out->p, out->len) : 0;

	out->len = 0;
	return rc;
}

/* The fault point, then the one write loop (common/fs.c), which also
 * refuses a write(2) that returns 0.  Callers name the file. */
static int write_all(int fd, const void *p, size_t n)
{
	return df_fault("layout.df.write") ? sfs__errno() : sfs_write_all(fd, p, n, NULL);
}

/* A fault injected at @point (common/fault.h): -1 with errno set, as the
 * syscall would. */
static int df_fault(const char *point)
{
	int e = sfs_fault(point);

	if (e) {
		errno = -e;
		return -1;
	}
	return 0;
}

int sfs_df_writer_finish(sfs_df_writer_t *w, uint64_t *rows_out)
{
	int rc = finish(w);

	/* An error leaves nothing behind: the temp file, or the renamed file
	 * whose directory entry could not be made durable. */
	if (rc)
		unlink(w->dw_renamed ? w->dw_path : w->dw_tmp);
	if (rows_out)
		*rows_out = rc ? 0 : w->dw_rows;
	writer_free(w);
	return rc;
}

static int finish(sfs_df_writer_t *w)
{
	struct df_stats st = { 0 };
	struct df_trailer t = { .t_magic = DF_MAGIC, .t_version = SFS_DF_VERSION };
	struct df_buf filt = { 0 }, foot = { 0 };
	const struct df_kpe *k0, *kl;
	uint64_t nblocks;
	char dir[PATH_MAX];
	int rc, dfd;

	if (w->dw_err)
		return w->dw_err;
	if (!w->dw_rows)
		return sfs__err(SFS_EUSAGE, "%s: no rows: a data file holds at least one", w->dw_path);
	if ((rc = flush_key_page(w)) || (rc = flush_value_page(w)))
		return rc;
	if ((rc = out_flush(w->dw_fd, &w->dw_out)))
		return sfs__err(rc, "%s: write pages: %s", w->dw_tmp, strerror(-rc));

	/* The filter, sized now that the row count is known. */
	nblocks = (w->dw_rows * w->dw_filter_bits + 255) / 256;
	if (nblocks > UINT32_MAX / 32)
		nblocks = UINT32_MAX / 32;
	if ((rc = buf_reserve(&filt, 32 * nblocks)))
		goto out;
	memset(filt.p, 0, 32 * nblocks);
	filt.len = 32 * nblocks;
	for (uint64_t i = 0; i < w->dw_rows; i++)
		sbbf_add(filt.p, (uint32_t)nblocks, ld64(w->dw_hashes.p + 8 * i));
	st.s_filter_len = (uint32_t)filt.len;
	st.s_filter_crc = sfs_crc32c(0, filt.p, filt.len);
	st.s_filter_blocks = (uint32_t)nblocks;
	if (w->dw_prefix_of) {
		/* the prefix filter, right after, by the distinct prefixes */
		size_t np = w->dw_phashes.len / 8;
		uint64_t pb = (np * w->dw_filter_bits + 255) / 256;
		uint8_t *pf;

		if (pb > UINT32_MAX / 32)
			pb = UINT32_MAX / 32;
		if ((rc = buf_reserve(&filt, 32 * pb)))
			goto out;
		pf = filt.p + filt.len;
		memset(pf, 0, 32 * pb);
		for (size_t i = 0; i < np; i++)
			sbbf_add(pf, (uint32_t)pb, ld64(w->dw_phashes.p + 8 * i));
		filt.len += 32 * pb;
		st.s_pfx_rule = w->dw_pfx_rule;
		st.s_pfx_blocks = (uint32_t)pb;
		st.s_pfx_crc = sfs_crc32c(0, pf, 32 * pb);
	}

	k0 = (const struct df_kpe *)w->dw_kdir.p;
	kl = k0 + w->dw_kdir.len / sizeof(*k0) - 1;
	st.s_rows = w->dw_rows;
	st.s_puts = w->dw_puts;
	st.s_deletes = w->dw_deletes;
	st.s_merges = w->dw_merges;
	st.s_filter_off = w->dw_off;
	st.s_kpages = (uint32_t)(w->dw_kdir.len / sizeof(struct df_kpe));
	st.s_vpages = (uint32_t)(w->dw_vdir.len / sizeof(struct df_vpe));
	st.s_keys_len = (uint32_t)w->dw_keys.len;
	st.s_codec = (uint32_t)w->dw_codec;
	st.s_kg_lo = (uint16_t)be16(w->dw_keys.p + k0->k_min_off);
	st.s_kg_hi = (uint16_t)be16(w->dw_keys.p + kl->k_max_off);
	/* pad so the footer's entries are 8-aligned in the mapping */
	if ((rc = buf_put(&filt, "\0\0\0\0\0\0\0", (8 - (w->dw_off + filt.len) % 8) % 8)))
		goto out;
	t.t_footer_off = w->dw_off + filt.len;
	if ((rc = buf_put(&foot, &st, sizeof(st))) || (rc = buf_put(&foot, w->dw_kdir.p, w->dw_kdir.len)) ||
	    (rc = buf_put(&foot, w->dw_vdir.p, w->dw_vdir.len)) ||
	    (rc = buf_put(&foot, w->dw_keys.p, w->dw_keys.len)))
		goto out;
	if (foot.len > UINT32_MAX) {
		rc = sfs__err(SFS_EUSAGE, "%s: footer of %zu bytes exceeds 4 GiB", w->dw_path, foot.len);
		goto out;
	}
	t.t_footer_len = (uint32_t)foot.len;
	t.t_crc = sfs_crc32c(sfs_crc32c(0, foot.p, foot.len), &t, offsetof(struct df_trailer, t_crc));
	if ((rc = buf_put(&foot, &t, sizeof(t))) || (rc = write_all(w->dw_fd, filt.p, filt.len)) ||
	    (rc = write_all(w->dw_fd, foot.p, foot.len))) {
		rc = rc == -ENOMEM ? rc : sfs__err(rc, "%s: write footer: %s", w->dw_tmp, strerror(-rc));
		goto out;
	}
	if (sfs_layout_sync() && (df_fault("layout.df.fsync") || fsync(w->dw_fd))) {
		rc = sfs__err(sfs__errno(), "%s: fsync: %s", w->dw_tmp, strerror(errno));
		goto out;
	}
	if (df_fault("layout.df.rename") || rename(w->dw_tmp, w->dw_path)) {
		rc = sfs__err(sfs__errno(), "rename %s -> %s: %s", w->dw_tmp, w->dw_path, strerror(errno));
		goto out;
	}
	w->dw_renamed = 1;
	/* The name is durable only with its directory. */
	dir_of(w->dw_path, dir, sizeof(dir));
	if (sfs_layout_sync() && (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (fsync(dfd))
			rc = sfs__err(sfs__errno(), "%s: fsync directory: %s", dir, strerror(errno));
		close(dfd);
	}
out:
	buf_free(&filt);
	buf_free(&foot);
	return rc;
}

void sfs_df_writer_abort(sfs_df_writer_t *w)
{
	if (!w)
		return;
	unlink(w->dw_tmp);
	writer_free(w);
}

static void sbbf_add(uint8_t *f, uint32_t nblocks, uint64_t h)
{
	uint8_t *b = sbbf_block(f, nblocks, h);

	for (int i = 0; i < 8; i++) {
		uint32_t w = ld32(b + 4 * i) | sbbf_bit(h, i);

		memcpy(b + 4 * i, &w, 4);
	}
}

static int buf_reserve(struct df_buf *b, size_t more)
{
	size_t cap;
	uint8_t *p;

	if (b->len + more <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	if (!(p = realloc(b->p, cap)))
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int buf_put(struct df_buf *b, const void *src, size_t n)
{
	int rc = buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
	return 0;
}

static void buf_free(struct df_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
