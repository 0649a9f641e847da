/*
 * datafile_read.c — the table store's data file, read (format and API:
 * datafile.h; what the writer shares: datafile_fmt.h).
 *
 * The footer is read in place from the mapping (fixed-size,
 * 8-aligned entries: no decoded copy of the index); per page a verified
 * bit (crc32c and structure) is set on first touch; decompressed pages
 * live in a per-reader cache of up to cache_pages slots (CLOCK, found by
 * page id in O(1)), which grows past two slots only while every reader of
 * the process together holds less than the decoded-page budget
 * (sfs_df_set_decoded_budget).  A probe of hashed keys prefetches the
 * filter blocks of the keys a few ahead of the one it tests, since those
 * blocks are random reads of a big array.  A probe copies the values it
 * returns from compressed pages into an arena reset at each call, so the
 *
 * Last on a key's path: the worker's readers (store/table/table_read.c)
 * and the engine's probes and merges read files through here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/keycmp.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/datafile_fmt.h"

#define DF_CACHE_DEFAULT 8u
#define DF_DECODED_BUDGET (32ull << 20)
#define DF_ARENA_CHUNK (64u << 10)
#define DF_FILTER_AHEAD 8	/* keys a probe prefetches filter blocks ahead */

/* A decompressed page in a cache slot (or an iterator's own). */
struct df_slot {
	int64_t sl_pid;              /* page id (key pages 0..K-1, value pages K..), -1 empty */
	uint8_t *sl_buf;
	size_t sl_cap;
	int sl_ref;                  /* CLOCK: used since the hand last passed */
	uint32_t sl_pin;             /* open cached iterators reading this page: not evicted */
};

/* A decoded view of one page. */
struct df_page {
	const uint8_t *pg_kind;      /* key pages: n kinds */
	const uint8_t *pg_end;       /* n u32 end offsets (unaligned) */
	const uint8_t *pg_data;
	uint32_t pg_rows;
	uint64_t pg_first;
	int pg_mapped;               /* 1: bytes are in the mapping (stored raw) */
};

/* One candidate of a probe: a key that survived min/max and the filter. */
struct df_cand {
	uint64_t c_hash;
	uint32_t c_key;              /* index into the caller's keys */
	uint32_t c_page;
	/* the batched bisection (search_pages): its bounds, its answer (a row
	 * of the page, DF_ROW_NONE, or DF_ROW_WALK: the page is walked), and
	 * the first candidate of its page's group (where the page is kept) */
	uint32_t c_lo, c_hi, c_row, c_g;
};

#define DF_ROW_NONE UINT32_MAX
#define DF_ROW_WALK (UINT32_MAX - 1)

struct df_chunk {
	struct df_chunk *ch_next;
	size_t ch_cap, ch_used;
	uint8_t ch_data[];
};

struct sfs_df_reader {
	char *dr_path;
	const uint8_t *dr_map;
	size_t dr_size;
	const struct df_stats *dr_st;      /* all four in the mapping */
	const struct df_kpe *dr_kp;
	const struct df_vpe *dr_vp;
	const uint8_t *dr_keys;
	uint8_t *dr_ok;                    /* verified bit per page (K + V) */
	int dr_filter_ok, dr_pfx_ok;       /* checksummed (first use) */
	struct df_slot *dr_cache;
	uint32_t dr_ncache;
	uint32_t dr_nused;                 /* slots [0, dr_nused) have held a page */
	uint32_t dr_hand;                  /* CLOCK hand over them */
	int32_t *dr_slot_of;               /* per page: its cache slot, -1 none */
	ZSTD_DCtx *dr_zd;                  /* made at the first ZSTD page */
	struct df_chunk *dr_arena;         /* probe values of the current call */
	/* probe scratch, grown to the largest batch seen */
	struct df_cand *dr_cand;
	struct df_page *dr_pgs;      /* search_pages: the key page of each group */
	uint32_t *dr_set, *dr_dup, *dr_match, *dr_act;
	size_t dr_cand_cap, dr_set_cap;
	struct sfs_df_counters dr_c;
};

struct sfs_df_iter {
	sfs_df_reader_t *di_r;
	uint8_t *di_lo, *di_hi;            /* copies; NULL: unbounded */
	size_t di_lolen, di_hilen;
	const uint64_t *di_dv;
	size_t di_dvw;
	uint32_t di_page, di_end;          /* current key page, first page past the range */
	uint32_t di_row;                   /* next row in the current page */
	int di_loaded, di_check_hi, di_seek, di_done, di_err;
	int di_cached;                     /* pages through the reader's cache */
	int di_keys_only;                  /* sfs_df_iter_keys_only: no value pages */
	int32_t di_kpin, di_vpin;          /* ... the slots it holds pinned, -1 none */
	struct df_page di_kpg, di_vpg;
	int64_t di_vpid;                   /* value page in di_vpg, -1 none */
	struct df_slot di_kslot, di_vslot;
};

/* Decoded bytes held by the caches of every reader of this process (slot
 * buffers, kept across evictions), and what they may grow to: atomic,
 * readers of several threads share them. */
static uint64_t df_decoded_bytes;
static uint64_t df_decoded_budget = DF_DECODED_BUDGET;

static int check_footer(sfs_df_reader_t *r);
static int corrupt(const sfs_df_reader_t *r, ull off, const char *what);
static const uint8_t *kmin(const sfs_df_reader_t *r, uint32_t i, size_t *len);
static const uint8_t *kmax(const sfs_df_reader_t *r, uint32_t i, size_t *len);
static int probe_scratch(sfs_df_reader_t *r, size_t n);
static int cand_cmp(const void *a, const void *b);
static int sparse_page(uint32_t want, uint32_t rows);
static int search_pages(sfs_df_reader_t *r, const struct sfs_df_key *keys, struct df_cand *cand,
			size_t nc, int *done);
static int filter_maybe(sfs_df_reader_t *r, uint64_t h, int *maybe);
static int sbbf_maybe(const uint8_t *f, uint32_t nblocks, uint64_t h);
static uint32_t page_lower(sfs_df_reader_t *r, const void *key, size_t klen);
static uint32_t page_search(sfs_df_reader_t *r, const void *key, size_t klen, int by_min);
static int page_get(sfs_df_reader_t *r, struct df_slot *own, uint32_t pid, struct df_page *pg);
static int page_check(const struct df_page *pg, size_t raw, int is_key, const char **why);
static struct df_slot *cache_victim(sfs_df_reader_t *r);
static inline const uint8_t *pg_item(const struct df_page *pg, uint32_t i, size_t *len);
static uint32_t vpage_of(const sfs_df_reader_t *r, uint64_t pos);
static int row_value(sfs_df_reader_t *r, const struct df_page *vp, uint32_t vidx, uint64_t pos, int kind,
		     const uint8_t **val, size_t *vlen);
static inline int dv_masked(const uint64_t *dv, size_t words, uint64_t pos);
static void *arena_alloc(sfs_df_reader_t *r, size_t n);
static void arena_reset(sfs_df_reader_t *r, int all);

int sfs_df_reader_open(const char *path, const struct sfs_df_read_opts *opts, sfs_df_reader_t **out)
{
	sfs_df_reader_t *r;
	struct stat sb;
	uint32_t npages;
	void *m;
	int fd, rc;

	*out = NULL;
	if (!(r = calloc(1, sizeof(*r))) || !(r->dr_path = strdup(path))) {
		free(r);
		return -ENOMEM;
	}
	/* O_NOFOLLOW: a data file is named by a manifest or TABLES; a link in
	 * its place could lead out of the table's directory. */
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat(fd, &sb)) {
		rc = sfs__err(sfs__errno(), "%s: open: %s%s", path, strerror(errno),
			      errno == ELOOP ? " (a symbolic link: never followed)" : "");
		goto fail_fd;
	}
	r->dr_size = (size_t)sb.st_size;
	if (r->dr_size == 0) {
		rc = sfs__err(SFS_ECORRUPT, "%s: truncated at offset 0: empty file", path);
		goto fail_fd;
	}
	m = mmap(NULL, r->dr_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = sfs__err(sfs__errno(), "%s: mmap %zu bytes: %s", path, r->dr_size, strerror(errno));
		goto fail_fd;
	}
	close(fd);
	fd = -1;
	r->dr_map = m;
	if ((rc = check_footer(r)))
		goto fail;
	npages = r->dr_st->s_kpages + r->dr_st->s_vpages;
	r->dr_ncache = opts && opts->cache_pages ? opts->cache_pages : DF_CACHE_DEFAULT;
	if (r->dr_ncache < 2)
		r->dr_ncache = 2;   /* a key page and a value page at once */
	if (!(r->dr_ok = calloc((npages + 7) / 8, 1)) ||
	    !(r->dr_cache = calloc(r->dr_ncache, sizeof(*r->dr_cache))) ||
	    !(r->dr_slot_of = malloc(((size_t)npages + 1) * sizeof(*r->dr_slot_of)))) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < r->dr_ncache; i++)
		r->dr_cache[i].sl_pid = -1;
	for (uint64_t i = 0; i < npages; i++)
		r->dr_slot_of[i] = -1;
	*out = r;
	return 0;
fail_fd:
	if (fd >= 0)
		close(fd);
fail:
	sfs_df_reader_close(r);
	return rc;
}

/* Validate the footer (see sfs_df_reader_open). */
static int check_footer(sfs_df_reader_t *r)
{
	const uint8_t *m = r->dr_map;
	const struct df_header *h = (const void *)m;
	struct df_trailer t;
	const struct df_stats *st;
	uint64_t fo, end, rows, expect, pfx;
	char what[96];

	if (r->dr_size >= DF_HDR && memcmp(h->h_magic, DF_MAGIC, 8))
		return sfs__err(SFS_EMAGIC, "%s: header at offset 0: bad magic (not a data file)", r->dr_path);
	if (r->dr_size >= DF_HDR && (h->h_version < SFS_DF_VERSION_MIN || h->h_version > SFS_DF_VERSION))
		return sfs__err(SFS_EVERSION, "%s: header at offset 8: format version %u, expected %u..%u",
				r->dr_path, h->h_version, SFS_DF_VERSION_MIN, SFS_DF_VERSION);
	if (r->dr_size < DF_HDR + sizeof(struct df_stats) + DF_TRAILER)
		return sfs__err(SFS_ECORRUPT, "%s: truncated at offset %zu: shorter than header and footer",
				r->dr_path, r->dr_size);
	if (sfs_crc32c(0, h, offsetof(struct df_header, h_crc)) != h->h_crc)
		return corrupt(r, 0, "header: checksum mismatch,");
	memcpy(&t, m + r->dr_size - DF_TRAILER, sizeof(t));
	if (memcmp(t.t_magic, DF_MAGIC, 8))
		return sfs__err(SFS_ECORRUPT, "%s: footer at offset %zu: bad magic (truncated?)", r->dr_path,
				r->dr_size - DF_TRAILER);
	if (t.t_version != h->h_version)
		return sfs__err(SFS_EVERSION, "%s: footer at offset %zu: format version %u, the header's %u",
				r->dr_path, r->dr_size - DF_TRAILER + 12, t.t_version, h->h_version);
	fo = t.t_footer_off;
	if (fo < DF_HDR || fo % 8 || t.t_footer_len < sizeof(struct df_stats) ||
	    fo + t.t_footer_len + DF_TRAILER != r->dr_size)
		return sfs__err(SFS_ECORRUPT, "%s: footer at offset %zu: footer offset %llu + %u bytes do not "
				"end at the trailer (truncated?)", r->dr_path, r->dr_size - DF_TRAILER,
				(ull)fo, t.t_footer_len);
	if (sfs_crc32c(sfs_crc32c(0, m + fo, t.t_footer_len), &t, offsetof(struct df_trailer, t_crc)) != t.t_crc)
		return sfs__err(SFS_ECORRUPT, "%s: footer at offset %llu: checksum mismatch", r->dr_path,
				(ull)fo);

	/* The checksum holds: what follows catches a writer bug or a forged
	 * file, so that nothing below can read outside the mapping. */
	r->dr_st = st = (const void *)(m + fo);
	expect = sizeof(*st) + (uint64_t)st->s_kpages * sizeof(struct df_kpe) +
		 (uint64_t)st->s_vpages * sizeof(struct df_vpe) + st->s_keys_len;
	if (expect != t.t_footer_len || !st->s_kpages || !st->s_vpages || !st->s_rows ||
	    st->s_codec > SFS_DF_ZSTD || st->s_puts > st->s_rows || st->s_deletes > st->s_rows ||
	    st->s_merges > st->s_rows || st->s_puts + st->s_deletes + st->s_merges != st->s_rows)
		return corrupt(r, fo, "footer: inconsistent counts (pages, rows or key area),");
	r->dr_kp = (const void *)(st + 1);
	r->dr_vp = (const void *)(r->dr_kp + st->s_kpages);
	r->dr_keys = (const uint8_t *)(r->dr_vp + st->s_vpages);

	end = DF_HDR;
	rows = 0;
	for (uint32_t i = 0; i < st->s_kpages; i++) {
		const struct df_kpe *e = r->dr_kp + i;
		uint64_t eo = fo + sizeof(*st) + (uint64_t)i * sizeof(*e);
		const uint8_t *a, *b;
		size_t al, bl;

		snprintf(what, sizeof(what), "footer: entry of key page %u", i);
		if (e->k_off < DF_HDR || e->k_first_row != rows || !e->k_rows || e->k_codec > SFS_DF_ZSTD ||
		    (e->k_codec == SFS_DF_NONE && e->k_stored != e->k_raw) || e->k_raw > DF_PAGE_MAX ||
		    (uint64_t)e->k_rows * 5 > e->k_raw || e->k_off + e->k_stored > fo ||
		    (uint64_t)e->k_min_off + e->k_min_len > st->s_keys_len ||
		    (uint64_t)e->k_max_off + e->k_max_len > st->s_keys_len || e->k_min_len < SFS_DF_KEY_MIN ||
		    e->k_max_len < SFS_DF_KEY_MIN)
			return corrupt(r, eo, what);
		a = kmin(r, i, &al);
		b = kmax(r, i, &bl);
		if (sfs_keycmp(a, al, b, bl) > 0)
			return corrupt(r, eo, what);
		if (i) {
			a = kmax(r, i - 1, &al);
			b = kmin(r, i, &bl);
			if (sfs_keycmp(a, al, b, bl) >= 0)
				return corrupt(r, eo, what);
		}
		rows += e->k_rows;
	}
	if (rows != st->s_rows)
		return corrupt(r, fo, "footer: key pages do not add up to the row count,");
	rows = 0;
	for (uint32_t i = 0; i < st->s_vpages; i++) {
		const struct df_vpe *e = r->dr_vp + i;
		uint64_t eo = fo + sizeof(*st) + (uint64_t)st->s_kpages * sizeof(struct df_kpe) +
			      (uint64_t)i * sizeof(*e);

		snprintf(what, sizeof(what), "footer: entry of value page %u", i);
		if (e->v_off < DF_HDR || e->v_first_row != rows || !e->v_rows || e->v_codec > SFS_DF_ZSTD ||
		    (e->v_codec == SFS_DF_NONE && e->v_stored != e->v_raw) || e->v_raw > DF_PAGE_MAX ||
		    (uint64_t)e->v_rows * 4 > e->v_raw || e->v_off + e->v_stored > fo)
			return corrupt(r, eo, what);
		rows += e->v_rows;
	}
	if (rows != st->s_rows)
		return corrupt(r, fo, "footer: value pages do not add up to the row count,");
	/* The pages tile the data area: each starts where the one before it
	 * ends, key and value pages each in row order, interleaved as they
	 * were cut (version 3; before it every key page came first). */
	for (uint32_t i = 0, j = 0; i < st->s_kpages || j < st->s_vpages;) {
		if (i < st->s_kpages && r->dr_kp[i].k_off == end) {
			end += r->dr_kp[i++].k_stored;
		} else if (j < st->s_vpages && r->dr_vp[j].v_off == end &&
			   (h->h_version >= 3 || i == st->s_kpages)) {
			end += r->dr_vp[j++].v_stored;
		} else {
			uint64_t eo = fo + sizeof(*st) +
				      (i < st->s_kpages ? (uint64_t)i * sizeof(struct df_kpe)
							: (uint64_t)st->s_kpages * sizeof(struct df_kpe) +
								  (uint64_t)j * sizeof(struct df_vpe));

			snprintf(what, sizeof(what), "footer: no page starts at offset %llu (next: %s page %u),",
				 (ull)end, i < st->s_kpages ? "key" : "value", i < st->s_kpages ? i : j);
			return corrupt(r, eo, what);
		}
	}
	pfx = 32ull * st->s_pfx_blocks;	/* the prefix filter (version 2) */
	if (st->s_filter_off != end || !st->s_filter_blocks ||
	    st->s_filter_len != 32ull * st->s_filter_blocks || end + st->s_filter_len + pfx > fo ||
	    fo - (end + st->s_filter_len + pfx) >= 8)
		return corrupt(r, fo, "footer: filter out of place,");
	if ((h->h_version < 2 && (st->s_pfx_rule || st->s_pfx_blocks || st->s_pfx_crc)) ||
	    (!st->s_pfx_rule != !st->s_pfx_blocks) || (!st->s_pfx_rule && st->s_pfx_crc))
		return corrupt(r, fo, "footer: prefix filter fields inconsistent,");
	{
		size_t l0, l1;
		const uint8_t *a = kmin(r, 0, &l0), *b = kmax(r, st->s_kpages - 1, &l1);

		if (st->s_kg_lo != be16(a) || st->s_kg_hi != be16(b))
			return corrupt(r, fo, "footer: key-group range differs from the min/max keys,");
	}
	return 0;
}

static int corrupt(const sfs_df_reader_t *r, ull off, const char *what)
{
	return sfs__err(SFS_ECORRUPT, "%s: %s at offset %llu", r->dr_path, what, off);
}

static const struct df_kpe *kpe(const sfs_df_reader_t *r, uint32_t i)
{
	return r->dr_kp + i;
}

static const uint8_t *kmin(const sfs_df_reader_t *r, uint32_t i, size_t *len)
{
	*len = r->dr_kp[i].k_min_len;
	return r->dr_keys + r->dr_kp[i].k_min_off;
}

static const uint8_t *kmax(const sfs_df_reader_t *r, uint32_t i, size_t *len)
{
	*len = r->dr_kp[i].k_max_len;
	return r->dr_keys + r->dr_kp[i].k_max_off;
}

void sfs_df_reader_meta(const sfs_df_reader_t *r, struct sfs_df_meta *out)
{
	const struct df_stats *st = r->dr_st;
	const uint8_t *a, *b;
	size_t al, bl;

	a = kmin(r, 0, &al);
	b = kmax(r, st->s_kpages - 1, &bl);
	*out = (struct sfs_df_meta){
		.rows = st->s_rows, .puts = st->s_puts, .deletes = st->s_deletes, .merges = st->s_merges,
		.file_size = r->dr_size, .key_pages = st->s_kpages, .value_pages = st->s_vpages,
		.kg_lo = st->s_kg_lo, .kg_hi = st->s_kg_hi, .codec = (int)st->s_codec,
		.min_key = a, .min_klen = al, .max_key = b, .max_klen = bl,
		.prefix_rule = st->s_pfx_rule,
	};
}

const struct sfs_df_counters *sfs_df_reader_counters(const sfs_df_reader_t *r)
{
	return &r->dr_c;
}

void sfs_df_reader_close(sfs_df_reader_t *r)
{
	if (!r)
		return;
	if (r->dr_map)
		munmap((void *)r->dr_map, r->dr_size);
	for (uint32_t i = 0; r->dr_cache && i < r->dr_ncache; i++) {
		__atomic_sub_fetch(&df_decoded_bytes, r->dr_cache[i].sl_cap, __ATOMIC_RELAXED);
		free(r->dr_cache[i].sl_buf);
	}
	free(r->dr_slot_of);
	arena_reset(r, 1);
	free(r->dr_cache);
	free(r->dr_ok);
	free(r->dr_cand);
	free(r->dr_pgs);
	free(r->dr_act);
	free(r->dr_set);
	free(r->dr_dup);
	free(r->dr_match);
	ZSTD_freeDCtx(r->dr_zd);
	free(r->dr_path);
	free(r);
}

void sfs_df_set_decoded_budget(uint64_t bytes)
{
	__atomic_store_n(&df_decoded_budget, bytes, __ATOMIC_RELAXED);
}

uint64_t sfs_df_decoded_bytes(void)
{
	return __atomic_load_n(&df_decoded_bytes, __ATOMIC_RELAXED);
}

int sfs_df_probe(sfs_df_reader_t *r, const struct sfs_df_key *keys, size_t n, const uint64_t *dv,
		 size_t dv_words, unsigned flags, struct sfs_df_hit *out)
{
	const struct df_stats *st = r->dr_st;
	size_t fminl = 0, fmaxl = 0, nc = 0, set_mask;
	const uint8_t *fmin = NULL, *fmax = NULL;	/* the file's key range, at first need */
	int per_literal = flags & SFS_DF_PROBE_PER_LITERAL, found = 0, rc, batched = 0;
	struct df_cand *cand;
	uint32_t *set, *dup, *match;

	arena_reset(r, 0);
	for (size_t i = 0; i < n; i++)
		out[i] = (struct sfs_df_hit){ 0 };
	if (n > UINT32_MAX - 1)
		return sfs__err(SFS_EUSAGE, "%s: probe batch of %zu keys", r->dr_path, n);
	if (!n)
		return 0;
	if ((rc = probe_scratch(r, n)))
		return rc;
	cand = r->dr_cand;
	set = r->dr_set;
	dup = r->dr_dup;
	match = r->dr_match;

	/* Hashed keys start their filter blocks loading DF_FILTER_AHEAD keys
	 * ahead of the test, so the blocks' cache misses (the filter of a big
	 * file is megabytes, read at random) overlap instead of queueing: on
	 * q5 at 20M the worker's filter tests, mostly of absent keys, were
	 * half its probe time.  A few keys ahead, not the whole batch: a
	 * round's batch of thousands would evict its own first blocks. */
	if (flags & SFS_DF_PROBE_HASHED)
		for (size_t i = 0; i < n && i < DF_FILTER_AHEAD; i++)
			sfs_df_prefetch_filter(r, keys[i].h);

	/* 1. Prune: file range, the filter, the one candidate page by min/max.
	 *    One hash per key, reused by the filter and the hash set; the
	 *    filter (one cache line) before the binary search over pages
	 *    (log2 pages key compares), since most probes of a deep file are
	 *    misses the filter ends. */
	for (size_t i = 0; i < n; i++) {
		const void *k = keys[i].p;
		size_t kl = keys[i].len, ml;
		uint32_t pg;
		int maybe = 1;

		if ((flags & SFS_DF_PROBE_HASHED) && i + DF_FILTER_AHEAD < n)
			sfs_df_prefetch_filter(r, keys[i + DF_FILTER_AHEAD].h);
		r->dr_c.probe_keys++;
		/* A hashed key meets the filter first: its block is loading
		 * already, while the file's range keys are cold (its key-page
		 * table, then the key bytes: two misses in a chain), and over
		 * keys spread by a hash every file's range holds every key, so
		 * the range rarely prunes; most probes of a deep table are
		 * misses the filter ends (q18 at 100M: the range test was a
		 * third of the worker's probe time).  An unhashed key meets the
		 * range first, which saves its hash. */
		if (flags & SFS_DF_PROBE_HASHED) {
			cand[nc].c_hash = keys[i].h;
			if ((rc = filter_maybe(r, cand[nc].c_hash, &maybe)))
				return rc;
			if (!maybe) {
				r->dr_c.pruned_filter++;
				continue;
			}
		}
		if (!fmin) {
			fmin = kmin(r, 0, &fminl);
			fmax = kmax(r, st->s_kpages - 1, &fmaxl);
		}
		r->dr_c.seek_compares += 2;
		if (kl < SFS_DF_KEY_MIN || sfs_keycmp(k, kl, fmin, fminl) < 0 ||
		    sfs_keycmp(k, kl, fmax, fmaxl) > 0) {
			r->dr_c.pruned_range++;
			continue;
		}
		if (!(flags & SFS_DF_PROBE_HASHED)) {
			cand[nc].c_hash = df_hash(k, kl);
			if ((rc = filter_maybe(r, cand[nc].c_hash, &maybe)))
				return rc;
			if (!maybe) {
				r->dr_c.pruned_filter++;
				continue;
			}
		}
		pg = page_lower(r, k, kl);
		const uint8_t *m = kmin(r, pg, &ml);

		r->dr_c.seek_compares++;
		if (sfs_keycmp(k, kl, m, ml) < 0) {   /* between two pages */
			r->dr_c.pruned_range++;
			continue;
		}
		cand[nc].c_key = (uint32_t)i;
		cand[nc].c_page = pg;
		nc++;
	}
	if (!nc)
		return 0;
	qsort(cand, nc, sizeof(*cand), cand_cmp);

	/* 2. The batch's exact IN-set, built once per call: open addressing
	 *    over candidate indexes (+1; 0 is empty), equal keys chained. */
	set_mask = 15;
	while (set_mask + 1 < 2 * nc)
		set_mask = set_mask * 2 + 1;
	if (!per_literal) {
		memset(set, 0, (set_mask + 1) * 4);
		for (uint32_t c = 0; c < nc; c++) {
			size_t s = cand[c].c_hash & set_mask;

			dup[c] = UINT32_MAX;
			for (;; s = (s + 1) & set_mask) {
				uint32_t o = set[s];

				if (!o) {
					set[s] = c + 1;
					break;
				}
				if (cand[o - 1].c_hash == cand[c].c_hash &&
				    !sfs_keycmp(keys[cand[o - 1].c_key].p, keys[cand[o - 1].c_key].len,
						keys[cand[c].c_key].p, keys[cand[c].c_key].len)) {
					dup[c] = dup[o - 1];
					dup[o - 1] = c;
					break;
				}
			}
		}
	}

	/* 3. Per candidate page: one pass over its key column, or a
	 *    bisection per key of a big page (all the batch's at once when
	 *    the key pages are stored raw: search_pages). */
	if ((flags & SFS_DF_PROBE_SEEK_SPARSE) && !per_literal && nc > 1 &&
	    (rc = search_pages(r, keys, cand, nc, &batched)))
		return rc;
	for (size_t g = 0; g < nc;) {
		uint32_t pid = cand[g].c_page, want = 0, got = 0, nm = 0;
		struct df_page pg;
		size_t ge = g;

		while (ge < nc && cand[ge].c_page == pid)
			ge++;
		want = (uint32_t)(ge - g);
		if (batched)
			pg = r->dr_pgs[g];
		else if ((rc = page_get(r, NULL, pid, &pg)))
			return rc;
		r->dr_c.page_reads++;
		if (batched && cand[g].c_row != DF_ROW_WALK) {
			for (size_t c = g; c < ge; c++)
				if (cand[c].c_row != DF_ROW_NONE) {
					match[2 * nm] = (uint32_t)c;
					match[2 * nm + 1] = cand[c].c_row;
					nm++;
				}
			want = 0;   /* no walk */
		} else if (!batched && (flags & SFS_DF_PROBE_SEEK_SPARSE) &&
			   sparse_page(want, pg.pg_rows)) {
			/* Few candidates in a big page: a binary search each costs
			 * less than hashing every row.  The page is cold (a point
			 * read of a big table), and each step's key is found
			 * through the row's end offset: the offsets (4 bytes a
			 * row) are prefetched whole first, and each step
			 * prefetches the keys of both of its possible next
			 * steps, so a search waits for about one miss per step,
			 * not two in a chain (q17 at 20M: the search was two
			 * thirds of the worker's probe time). */
			for (uint32_t o = 0; o < 4 * pg.pg_rows; o += 64)
				__builtin_prefetch(pg.pg_end + o);
			for (size_t c = g; c < ge; c++) {
				const struct sfs_df_key *q = &keys[cand[c].c_key];
				uint32_t a = 0, b = pg.pg_rows;

				while (a < b) {
					uint32_t mid = a + (b - a) / 2;
					size_t kl;
					const uint8_t *k;
					int cmp;

					if (mid > a)
						__builtin_prefetch(pg_item(&pg, a + (mid - a) / 2, &kl));
					if (mid + 1 < b)
						__builtin_prefetch(pg_item(&pg, mid + 1 + (b - mid - 1) / 2,
									   &kl));
					k = pg_item(&pg, mid, &kl);
					cmp = sfs_keycmp(k, kl, q->p, q->len);

					r->dr_c.seek_compares++;
					if (!cmp) {
						match[2 * nm] = (uint32_t)c;
						match[2 * nm + 1] = mid;
						nm++;
						break;
					}
					if (cmp < 0)
						a = mid + 1;
					else
						b = mid;
				}
			}
			want = 0;   /* no walk */
		}
		for (uint32_t j = 0; j < pg.pg_rows && got < want; j++) {
			size_t kl;
			const uint8_t *k = pg_item(&pg, j, &kl);

			r->dr_c.rows_walked++;
			if (per_literal) {
				/* The ablation: IN as an OR of equalities. */
				for (size_t c = g; c < ge; c++) {
					const struct sfs_df_key *q = &keys[cand[c].c_key];

					r->dr_c.key_compares++;
					if (q->len == kl && !memcmp(q->p, k, kl)) {
						match[2 * nm] = (uint32_t)c;
						match[2 * nm + 1] = j;
						nm++;
						got++;
					}
				}
				continue;
			}
			uint64_t h = df_hash(k, kl);

			r->dr_c.hash_lookups++;
			for (size_t s = h & set_mask; set[s]; s = (s + 1) & set_mask) {
				uint32_t c = set[s] - 1;
				const struct sfs_df_key *q = &keys[cand[c].c_key];

				if (cand[c].c_hash != h)
					continue;
				r->dr_c.key_compares++;
				if (q->len != kl || !sfs_keyeq(q->p, k, kl))
					continue;
				for (; c != UINT32_MAX; c = dup[c]) {
					match[2 * nm] = c;
					match[2 * nm + 1] = j;
					nm++;
					got++;
				}
				break;
			}
		}

		/* 4. Kinds and positions from the key page, then values — only
		 *    for matching rows, never for masked ones or tombstones.  The
		 *    key page is not used past this point (value pages may evict
		 *    it from the cache). */
		for (uint32_t m = 0; m < nm; m++) {
			struct sfs_df_hit *o = &out[cand[match[2 * m]].c_key];
			uint32_t j = match[2 * m + 1];

			o->pos = pg.pg_first + j;
			o->kind = pg.pg_kind[j];
			if (dv_masked(dv, dv_words, o->pos)) {
				r->dr_c.masked++;
				o->kind = 0;
				continue;
			}
			o->found = 1;
			found++;
		}
		for (uint32_t m = 0; m < nm; m++) {
			struct sfs_df_hit *o = &out[cand[match[2 * m]].c_key];
			uint32_t j = match[2 * m + 1], vidx;
			struct df_page vp;
			const uint8_t *v;
			size_t vl;

			if (!o->found || o->kind == SFS_DF_DELETE || (flags & SFS_DF_PROBE_NO_VALUES) ||
			    o->val)
				continue;
			vidx = vpage_of(r, o->pos);
			if ((rc = page_get(r, NULL, st->s_kpages + vidx, &vp)) ||
			    (rc = row_value(r, &vp, vidx, o->pos, o->kind, &v, &vl)))
				return rc;
			r->dr_c.values_decoded++;
			o->vlen = vl;
			if (vp.pg_mapped || !vl) {
				o->val = vl ? v : (const void *)"";
			} else {
				void *copy = arena_alloc(r, vl);

				if (!copy)
					return -ENOMEM;
				memcpy(copy, v, vl);
				o->val = copy;
			}
			/* duplicates of this key share the copy */
			for (uint32_t m2 = m + 1; m2 < nm && match[2 * m2 + 1] == j; m2++) {
				struct sfs_df_hit *o2 = &out[cand[match[2 * m2]].c_key];

				o2->val = o->val;
				o2->vlen = o->vlen;
			}
		}
		g = ge;
	}
	return found;
}

static int probe_scratch(sfs_df_reader_t *r, size_t n)
{
	size_t set = 16;

	while (set < 2 * n)
		set *= 2;
	if (n > r->dr_cand_cap) {
		struct df_cand *c = realloc(r->dr_cand, n * sizeof(*c));
		uint32_t *d = c ? realloc(r->dr_dup, n * 4) : NULL;
		uint32_t *m = d ? realloc(r->dr_match, n * 8) : NULL;
		struct df_page *pg = m ? realloc(r->dr_pgs, n * sizeof(*pg)) : NULL;
		uint32_t *act = pg ? realloc(r->dr_act, n * 4) : NULL;

		if (c)
			r->dr_cand = c;
		if (d)
			r->dr_dup = d;
		if (m)
			r->dr_match = m;
		if (pg)
			r->dr_pgs = pg;
		if (act)
			r->dr_act = act;
		if (!act)
			return -ENOMEM;
		r->dr_cand_cap = n;
	}
	if (set > r->dr_set_cap) {
		uint32_t *s = realloc(r->dr_set, set * 4);

		if (!s)
			return -ENOMEM;
		r->dr_set = s;
		r->dr_set_cap = set;
	}
	return 0;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct df_cand *x = a, *y = b;

	if (x->c_page != y->c_page)
		return x->c_page < y->c_page ? -1 : 1;
	return (x->c_key > y->c_key) - (x->c_key < y->c_key);
}

/* SFS_DF_PROBE_SEEK_SPARSE: search @want keys by bisection rather than
 * walk @rows rows when 2 * want * log2(rows) < rows (a comparison costs
 * about half a hash of a short key). */
static int sparse_page(uint32_t want, uint32_t rows)
{
	uint32_t lg = 1;

	while (lg < 32 && (1u << lg) < rows)
		lg++;
	return (uint64_t)want * 2 * lg < rows;
}

/*
 * The bisections of a probe's sparse pages, all keys in lockstep: each
 * round starts every search's next row offset loading, then its key, then
 * compares them all, so a round waits about two misses for the whole
 * batch where one search after another waited two per step per key (a
 * point read of a big table: q17's batched counter reads at 20M spent
 * half their probe time on this load).  Only when every candidate page is
 * stored raw (the table's key pages: their bytes stay in the mapping
 * while other pages are read; a decoded page may be evicted by the next);
 * otherwise *@done stays 0 and the caller searches page by page.  Leaves
 * each group's page in r->dr_pgs[first candidate], and per candidate its
 * row, DF_ROW_NONE, or DF_ROW_WALK (a dense page: walked by the caller).
 */
static int search_pages(sfs_df_reader_t *r, const struct sfs_df_key *keys, struct df_cand *cand,
			size_t nc, int *done)
{
	uint32_t *act = r->dr_act, nact = 0, sparse = 0;
	int rc;

	*done = 0;
	for (size_t g = 0; g < nc;) {
		uint32_t pid = cand[g].c_page;
		size_t ge = g;

		if (r->dr_kp[pid].k_codec != SFS_DF_NONE)
			return 0;
		while (ge < nc && cand[ge].c_page == pid)
			ge++;
		if ((rc = page_get(r, NULL, pid, &r->dr_pgs[g])))
			return rc;
		for (size_t c = g; c < ge; c++) {
			cand[c].c_g = (uint32_t)g;
			cand[c].c_row = DF_ROW_WALK;
		}
		if (sparse_page((uint32_t)(ge - g), r->dr_pgs[g].pg_rows))
			for (size_t c = g; c < ge; c++) {
				cand[c].c_lo = 0;
				cand[c].c_hi = r->dr_pgs[g].pg_rows;
				cand[c].c_row = DF_ROW_NONE;
				act[nact++] = (uint32_t)c;
				sparse++;
			}
		g = ge;
	}
	if (!sparse)
		return 0;	/* every page walked: nothing batched */
	while (nact) {
		uint32_t kept = 0;

		for (uint32_t i = 0; i < nact; i++) {
			const struct df_cand *c = &cand[act[i]];
			uint32_t mid = c->c_lo + (c->c_hi - c->c_lo) / 2;

			__builtin_prefetch(r->dr_pgs[c->c_g].pg_end + 4 * (mid ? mid - 1 : 0));
		}
		for (uint32_t i = 0; i < nact; i++) {
			const struct df_cand *c = &cand[act[i]];
			uint32_t mid = c->c_lo + (c->c_hi - c->c_lo) / 2;
			size_t kl;

			__builtin_prefetch(pg_item(&r->dr_pgs[c->c_g], mid, &kl));
		}
		for (uint32_t i = 0; i < nact; i++) {
			struct df_cand *c = &cand[act[i]];
			const struct sfs_df_key *q = &keys[c->c_key];
			uint32_t mid = c->c_lo + (c->c_hi - c->c_lo) / 2;
			size_t kl;
			const uint8_t *k = pg_item(&r->dr_pgs[c->c_g], mid, &kl);
			int cmp = sfs_keycmp(k, kl, q->p, q->len);

			r->dr_c.seek_compares++;
			if (!cmp) {
				c->c_row = mid;
				continue;
			}
			if (cmp < 0)
				c->c_lo = mid + 1;
			else
				c->c_hi = mid;
			if (c->c_lo < c->c_hi)
				act[kept++] = act[i];
		}
		nact = kept;
	}
	*done = 1;
	return 0;
}

static int filter_maybe(sfs_df_reader_t *r, uint64_t h, int *maybe)
{
	const struct df_stats *st = r->dr_st;
	const uint8_t *f = r->dr_map + st->s_filter_off;

	if (!r->dr_filter_ok) {
		r->dr_c.checksums++;
		if (sfs_crc32c(0, f, st->s_filter_len) != st->s_filter_crc)
			return sfs__err(SFS_ECORRUPT, "%s: key filter at offset %llu: checksum mismatch",
					r->dr_path, (ull)st->s_filter_off);
		r->dr_filter_ok = 1;
	}
	*maybe = sbbf_maybe(f, st->s_filter_blocks, h);
	return 0;
}

/* The block's 8 words tested together, one branch on the result: a test
 * that returned at the first clear bit ended at a random word, a branch
 * mispredicted about once per key and file, and most keys of a point read
 * are tested in files that do not hold them (q5 at 20M: 135M of 150M
 * file probes ended here).  Together, the usual answer "absent" is one
 * well-predicted branch. */
static int sbbf_maybe(const uint8_t *f, uint32_t nblocks, uint64_t h)
{
	const uint8_t *b = sbbf_block((uint8_t *)f, nblocks, h);
	uint32_t clear = 0;

	for (int i = 0; i < 8; i++)
		clear |= ~ld32(b + 4 * i) & sbbf_bit(h, i);
	return clear == 0;
}

static uint32_t page_lower(sfs_df_reader_t *r, const void *key, size_t klen)
{
	return page_search(r, key, klen, 0);
}

static uint32_t page_min_lower(sfs_df_reader_t *r, const void *key, size_t klen)
{
	return page_search(r, key, klen, 1);
}

/* First key page whose max key (@by_min: min key) >= @key (K when none). */
static uint32_t page_search(sfs_df_reader_t *r, const void *key, size_t klen, int by_min)
{
	uint32_t lo = 0, hi = r->dr_st->s_kpages;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		size_t ml;
		const uint8_t *m = by_min ? kmin(r, mid, &ml) : kmax(r, mid, &ml);

		r->dr_c.seek_compares++;
		if (sfs_keycmp(m, ml, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * page_get - page @pid (key pages 0..K-1, value pages K..K+V-1) into @pg:
 * checksummed on first touch, read in place when stored raw, else
 * decompressed into @own (an iterator's slot) or the reader's LRU cache.
 */
static int page_get(sfs_df_reader_t *r, struct df_slot *own, uint32_t pid, struct df_page *pg)
{
	uint32_t K = r->dr_st->s_kpages;
	int is_key = pid < K;
	uint64_t off = is_key ? r->dr_kp[pid].k_off : r->dr_vp[pid - K].v_off;
	uint32_t stored = is_key ? r->dr_kp[pid].k_stored : r->dr_vp[pid - K].v_stored;
	uint32_t raw = is_key ? r->dr_kp[pid].k_raw : r->dr_vp[pid - K].v_raw;
	uint32_t crc = is_key ? r->dr_kp[pid].k_crc : r->dr_vp[pid - K].v_crc;
	uint32_t codec = is_key ? r->dr_kp[pid].k_codec : r->dr_vp[pid - K].v_codec;
	uint32_t idx = is_key ? pid : pid - K;
	const char *kindname = is_key ? "key" : "value";
	int verified = r->dr_ok[pid / 8] >> (pid % 8) & 1;
	const uint8_t *src = r->dr_map + off, *bytes;
	struct df_slot *sl = own;
	const char *why;

	if (!verified) {
		r->dr_c.checksums++;
		if (sfs_crc32c(0, src, stored) != crc)
			return sfs__err(SFS_ECORRUPT, "%s: %s page %u at offset %llu: checksum mismatch",
					r->dr_path, kindname, idx, (ull)off);
	}
	if (codec == SFS_DF_NONE) {
		bytes = src;
	} else {
		if (!own) {
			int32_t s = r->dr_slot_of[pid];

			sl = s >= 0 ? &r->dr_cache[s] : cache_victim(r);
			if (!sl)
				return sfs__err(SFS_EFULL, "%s: all %u cached pages are held by open "
						"iterators", r->dr_path, r->dr_ncache);
			sl->sl_ref = 1;
		}
		if (sl->sl_pid != pid) {
			size_t got;
			unsigned long long zsz;

			if (!own && sl->sl_pid >= 0)
				r->dr_slot_of[sl->sl_pid] = -1;
			sl->sl_pid = -1;
			/* Before allocating: can @stored bytes hold @raw?  (LZ4
			 * expands at most ~255x; a ZSTD frame states its size.) */
			if (codec == SFS_DF_LZ4 ? (uint64_t)raw > 255ull * stored + 64
						: ((zsz = ZSTD_getFrameContentSize(src, stored)) != raw))
				return sfs__err(SFS_ECORRUPT, "%s: %s page %u at offset %llu: %u compressed "
						"bytes cannot hold its %u bytes", r->dr_path, kindname, idx,
						(ull)off, stored, raw);
			if (sl->sl_cap < raw) {
				uint8_t *b = realloc(sl->sl_buf, raw ? raw : 1);

				if (!b)
					return -ENOMEM;
				if (!own)
					__atomic_add_fetch(&df_decoded_bytes, raw - sl->sl_cap,
							   __ATOMIC_RELAXED);
				sl->sl_buf = b;
				sl->sl_cap = raw;
			}
			r->dr_c.decompressions++;
			if (codec == SFS_DF_LZ4) {
				int n = LZ4_decompress_safe((const char *)src, (char *)sl->sl_buf, (int)stored,
							    (int)raw);

				got = n < 0 ? (size_t)-1 : (size_t)n;
			} else {
				if (!r->dr_zd && !(r->dr_zd = ZSTD_createDCtx()))
					return -ENOMEM;	/* only files with ZSTD pages need one */
				got = ZSTD_decompressDCtx(r->dr_zd, sl->sl_buf, raw, src, stored);
				if (ZSTD_isError(got))
					got = (size_t)-1;
			}
			if (got != raw)
				return sfs__err(SFS_ECORRUPT, "%s: %s page %u at offset %llu: does not "
						"decompress (%s) to its %u bytes", r->dr_path, kindname, idx,
						(ull)off, codec == SFS_DF_LZ4 ? "lz4" : "zstd", raw);
			sl->sl_pid = pid;
			if (!own)
				r->dr_slot_of[pid] = (int32_t)(sl - r->dr_cache);
		}
		bytes = sl->sl_buf;
	}
	pg->pg_mapped = codec == SFS_DF_NONE;
	if (is_key) {
		pg->pg_rows = r->dr_kp[idx].k_rows;
		pg->pg_first = r->dr_kp[idx].k_first_row;
		pg->pg_kind = bytes;
		pg->pg_end = bytes + (pg->pg_rows + 3u) / 4 * 4;
		pg->pg_data = pg->pg_end + 4ull * pg->pg_rows;
	} else {
		pg->pg_rows = r->dr_vp[idx].v_rows;
		pg->pg_first = r->dr_vp[idx].v_first_row;
		pg->pg_kind = NULL;
		pg->pg_end = bytes;
		pg->pg_data = bytes + 4ull * pg->pg_rows;
	}
	if (!verified) {
		if (page_check(pg, raw, is_key, &why)) {
			if (sl && !own)
				r->dr_slot_of[pid] = -1;
			if (sl)
				sl->sl_pid = -1;
			return sfs__err(SFS_ECORRUPT, "%s: %s page %u at offset %llu: %s", r->dr_path,
					kindname, idx, (ull)off, why);
		}
		r->dr_ok[pid / 8] |= (uint8_t)(1u << (pid % 8));
	}
	return 0;
}

/* Structure of a decoded page, checked once per page per reader: every
 * offset inside the page, every kind known. */
static int page_check(const struct df_page *pg, size_t raw, int is_key, const char **why)
{
	size_t hdr = (size_t)pg->pg_rows * 4 + (is_key ? (pg->pg_rows + 3u) / 4 * 4 : 0);
	uint32_t prev = 0;

	if (raw < hdr)
		return *why = "header larger than the page", -1;
	for (uint32_t i = 0; i < pg->pg_rows; i++) {
		uint32_t e = ld32(pg->pg_end + 4 * i);

		if (e < prev)
			return *why = "offsets out of order", -1;
		prev = e;
		if (is_key && (pg->pg_kind[i] < SFS_DF_PUT || pg->pg_kind[i] > SFS_DF_MERGE))
			return *why = "unknown row kind", -1;
	}
	if (prev != raw - hdr)
		return *why = "offsets do not end at the page end", -1;
	return 0;
}

static void cache_pin(sfs_df_reader_t *r, uint32_t pid, int32_t *pin)
{
	*pin = r->dr_slot_of[pid];
	if (*pin >= 0)
		r->dr_cache[*pin].sl_pin++;
}

/* A cached iterator's hold on the cache slot of page @pid (none when the
 * page is read in place): *@pin is the slot it holds, -1 none. */
static void cache_unpin(sfs_df_reader_t *r, int32_t *pin)
{
	if (*pin >= 0)
		r->dr_cache[*pin].sl_pin--;
	*pin = -1;
}

/* The reader's cache slot for page @pid, which it does not hold: an unused
 * slot while the reader has fewer than two (a key page and a value page
 * at once) or the process is under its decoded-page budget, else the
 * first unpinned slot the CLOCK hand finds unreferenced — or, when open
 * iterators pin every used slot, an unused one past the budget (pins are
 * two per iterator).  NULL: all cache_pages slots pinned. */
static struct df_slot *cache_victim(sfs_df_reader_t *r)
{
	if (r->dr_nused < r->dr_ncache &&
	    (r->dr_nused < 2 || __atomic_load_n(&df_decoded_bytes, __ATOMIC_RELAXED) <
					 __atomic_load_n(&df_decoded_budget, __ATOMIC_RELAXED)))
		return &r->dr_cache[r->dr_nused++];
	for (uint32_t n = 0; n < 2 * r->dr_nused; n++) {
		struct df_slot *c = &r->dr_cache[r->dr_hand];

		r->dr_hand = r->dr_hand + 1 < r->dr_nused ? r->dr_hand + 1 : 0;
		if (c->sl_pin)
			continue;
		if (!c->sl_ref)
			return c;
		c->sl_ref = 0;
	}
	return r->dr_nused < r->dr_ncache ? &r->dr_cache[r->dr_nused++] : NULL;
}

static inline const uint8_t *pg_item(const struct df_page *pg, uint32_t i, size_t *len)
{
	uint32_t s = i ? ld32(pg->pg_end + 4 * (i - 1)) : 0, e = ld32(pg->pg_end + 4 * i);

	*len = e - s;
	return pg->pg_data + s;
}

/* The value page holding row @pos. */
static uint32_t vpage_of(const sfs_df_reader_t *r, uint64_t pos)
{
	uint32_t lo = 0, hi = r->dr_st->s_vpages - 1;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (r->dr_vp[mid].v_first_row <= pos)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* A row's value from value page view @vp (loaded for @pos), checked
 * against its kind. */
static int row_value(sfs_df_reader_t *r, const struct df_page *vp, uint32_t vidx, uint64_t pos, int kind,
		     const uint8_t **val, size_t *vlen)
{
	*val = pg_item(vp, (uint32_t)(pos - vp->pg_first), vlen);
	if (kind == SFS_DF_MERGE && *vlen != 8)
		return sfs__err(SFS_ECORRUPT, "%s: value page %u at offset %llu: row %llu: merge value of "
				"%zu bytes, expected 8", r->dr_path, vidx, (ull)r->dr_vp[vidx].v_off,
				(ull)pos, *vlen);
	return 0;
}

static inline int dv_masked(const uint64_t *dv, size_t words, uint64_t pos)
{
	return dv && pos / 64 < words && (dv[pos / 64] >> (pos % 64) & 1);
}

/* Every row of [first, first + n) masked: the page need not be read. */
static int dv_all(const uint64_t *dv, size_t words, uint64_t first, uint64_t n)
{
	uint64_t p = first, end = first + n;

	if (!dv || end > (uint64_t)words * 64)
		return 0;
	while (p < end) {
		if (p % 64 == 0 && end - p >= 64) {
			if (dv[p / 64] != ~0ull)
				return 0;
			p += 64;
		} else {
			if (!dv_masked(dv, words, p))
				return 0;
			p++;
		}
	}
	return 1;
}

static void *arena_alloc(sfs_df_reader_t *r, size_t n)
{
	struct df_chunk *c = r->dr_arena;

	if (!c || c->ch_cap - c->ch_used < n) {
		size_t cap = n > DF_ARENA_CHUNK ? n : DF_ARENA_CHUNK;

		if (!(c = malloc(sizeof(*c) + cap)))
			return NULL;
		c->ch_cap = cap;
		c->ch_used = 0;
		/* a full chunk goes second: the head keeps filling */
		if (r->dr_arena && cap > DF_ARENA_CHUNK) {
			c->ch_next = r->dr_arena->ch_next;
			r->dr_arena->ch_next = c;
			c->ch_used = n;
			return c->ch_data;
		}
		c->ch_next = r->dr_arena;
		r->dr_arena = c;
	}
	c->ch_used += n;
	return c->ch_data + c->ch_used - n;
}

static void arena_reset(sfs_df_reader_t *r, int all)
{
	struct df_chunk *c = r->dr_arena, *keep = NULL;

	while (c) {
		struct df_chunk *n = c->ch_next;

		if (!all && !keep && c->ch_cap == DF_ARENA_CHUNK) {
			keep = c;
			keep->ch_used = 0;
			keep->ch_next = NULL;
		} else {
			free(c);
		}
		c = n;
	}
	r->dr_arena = keep;
}

uint64_t sfs_df_filter_hash(const void *bytes, size_t len)
{
	return df_hash(bytes, len);
}

void sfs_df_prefetch_filter(const sfs_df_reader_t *r, uint64_t h)
{
	const struct df_stats *st = r->dr_st;

	if (st->s_filter_blocks)
		__builtin_prefetch(sbbf_block((uint8_t *)(uintptr_t)(r->dr_map + st->s_filter_off),
					      st->s_filter_blocks, h));
}

int sfs_df_prefix_maybe(sfs_df_reader_t *r, uint32_t rule, const void *prefix, size_t plen)
{
	return sfs_df_prefix_maybe_h(r, rule, df_hash(prefix, plen));
}

int sfs_df_prefix_maybe_h(sfs_df_reader_t *r, uint32_t rule, uint64_t h)
{
	const struct df_stats *st = r->dr_st;
	const uint8_t *f;

	if (!rule || st->s_pfx_rule != rule)
		return 1;
	f = r->dr_map + st->s_filter_off + st->s_filter_len;
	if (!r->dr_pfx_ok) {
		r->dr_c.checksums++;
		if (sfs_crc32c(0, f, 32ull * st->s_pfx_blocks) != st->s_pfx_crc)
			return sfs__err(SFS_ECORRUPT, "%s: prefix filter at offset %llu: checksum mismatch",
					r->dr_path, (ull)(st->s_filter_off + st->s_filter_len));
		r->dr_pfx_ok = 1;
	}
	r->dr_c.prefix_asks++;
	if (sbbf_maybe(f, st->s_pfx_blocks, h))
		return 1;
	r->dr_c.pruned_prefix++;
	return 0;
}

int sfs_df_iter_range(sfs_df_reader_t *r, const void *lo, size_t lolen, const void *hi, size_t hilen,
		      const uint64_t *dv, size_t dv_words, sfs_df_iter_t **out)
{
	sfs_df_iter_t *it;
	const struct df_stats *st = r->dr_st;

	*out = NULL;
	if (!(it = calloc(1, sizeof(*it))))
		return -ENOMEM;
	it->di_r = r;
	it->di_dv = dv;
	it->di_dvw = dv_words;
	it->di_vpid = -1;
	it->di_kslot.sl_pid = it->di_vslot.sl_pid = -1;
	it->di_kpin = it->di_vpin = -1;
	if ((lo && !(it->di_lo = malloc(lolen ? lolen : 1))) || (hi && !(it->di_hi = malloc(hilen ? hilen : 1)))) {
		sfs_df_iter_close(it);
		return -ENOMEM;
	}
	if (lo)
		memcpy(it->di_lo, lo, lolen);
	if (hi)
		memcpy(it->di_hi, hi, hilen);
	it->di_lolen = lolen;
	it->di_hilen = hilen;
	/* Pages outside [lo, hi) are pruned by their min/max, by binary search. */
	it->di_page = lo ? page_lower(r, lo, lolen) : 0;
	it->di_end = hi ? page_min_lower(r, hi, hilen) : st->s_kpages;
	it->di_seek = lo != NULL;
	if (it->di_page >= it->di_end)
		it->di_done = 1;
	*out = it;
	return 0;
}

int sfs_df_iter_kg(sfs_df_reader_t *r, uint32_t kg_lo, uint32_t kg_hi, const uint64_t *dv,
		   size_t dv_words, sfs_df_iter_t **out)
{
	uint8_t lo[2] = { (uint8_t)(kg_lo >> 8), (uint8_t)kg_lo };
	uint8_t hi[2] = { (uint8_t)((kg_hi + 1) >> 8), (uint8_t)(kg_hi + 1) };

	if (kg_lo > kg_hi || kg_hi > 0xffff)
		return sfs__err(SFS_EUSAGE, "%s: key-group range [%u, %u]", r->dr_path, kg_lo, kg_hi);
	/* Every key is >= 2 bytes, so kg in [lo, hi] is lo.. <= key < (hi+1).. */
	return sfs_df_iter_range(r, lo, 2, kg_hi == 0xffff ? NULL : hi, 2, dv, dv_words, out);
}

int sfs_df_iter_prefix_cached(sfs_df_reader_t *r, const void *prefix, size_t plen,
			      const uint64_t *dv, size_t dv_words, sfs_df_iter_t **out)
{
	int rc = sfs_df_iter_prefix(r, prefix, plen, dv, dv_words, out);

	if (rc == 0)
		(*out)->di_cached = 1;
	return rc;
}

int sfs_df_iter_prefix(sfs_df_reader_t *r, const void *prefix, size_t plen, const uint64_t *dv,
		       size_t dv_words, sfs_df_iter_t **out)
{
	uint8_t stack[256], *succ = plen <= sizeof(stack) ? stack : malloc(plen);
	size_t slen = plen;
	int rc;

	if (!succ)
		return -ENOMEM;
	if (!plen)
		return sfs_df_iter_range(r, NULL, 0, NULL, 0, dv, dv_words, out);
	/* The successor: drop trailing 0xff bytes, increment the last. */
	memcpy(succ, prefix, plen);
	while (slen && succ[slen - 1] == 0xff)
		slen--;
	if (slen)
		succ[slen - 1]++;
	rc = sfs_df_iter_range(r, prefix, plen, slen ? succ : NULL, slen, dv, dv_words, out);
	if (succ != stack)
		free(succ);
	return rc;
}

int sfs_df_iter_next(sfs_df_iter_t *it, struct sfs_df_row *row)
{
	sfs_df_reader_t *r = it->di_r;
	uint32_t K = r->dr_st->s_kpages;
	int rc;

	for (;;) {
		if (it->di_err)
			return it->di_err;
		if (it->di_done)
			return 0;
		if (!it->di_loaded) {
			const struct df_kpe *e;
			size_t ml;
			const uint8_t *m;

			if (it->di_page >= it->di_end) {
				it->di_done = 1;
				return 0;
			}
			e = kpe(r, it->di_page);
			if (dv_all(it->di_dv, it->di_dvw, e->k_first_row, e->k_rows)) {
				r->dr_c.masked += e->k_rows;
				it->di_page++;
				it->di_seek = 0;
				continue;
			}
			if (it->di_cached)
				cache_unpin(r, &it->di_kpin);	/* the last key page is done */
			if ((rc = page_get(r, it->di_cached ? NULL : &it->di_kslot, it->di_page,
					   &it->di_kpg)))
				return it->di_err = rc;
			if (it->di_cached)
				cache_pin(r, it->di_page, &it->di_kpin);
			it->di_row = 0;
			if (it->di_seek) {
				/* first row >= lo in the first page */
				uint32_t a = 0, b = it->di_kpg.pg_rows;

				while (a < b) {
					uint32_t mid = a + (b - a) / 2;
					size_t kl;
					const uint8_t *k = pg_item(&it->di_kpg, mid, &kl);

					r->dr_c.seek_compares++;
					if (sfs_keycmp(k, kl, it->di_lo, it->di_lolen) < 0)
						a = mid + 1;
					else
						b = mid;
				}
				it->di_row = a;
				it->di_seek = 0;
			}
			m = kmax(r, it->di_page, &ml);
			it->di_check_hi = it->di_hi && sfs_keycmp(m, ml, it->di_hi, it->di_hilen) >= 0;
			it->di_loaded = 1;
		}
		if (it->di_row >= it->di_kpg.pg_rows) {
			it->di_loaded = 0;
			it->di_page++;
			continue;
		}

		uint32_t j = it->di_row++;
		uint64_t pos = it->di_kpg.pg_first + j;
		size_t kl;
		const uint8_t *k = pg_item(&it->di_kpg, j, &kl);

		if (it->di_check_hi) {
			r->dr_c.seek_compares++;
			if (sfs_keycmp(k, kl, it->di_hi, it->di_hilen) >= 0) {
				it->di_done = 1;
				return 0;
			}
		}
		if (dv_masked(it->di_dv, it->di_dvw, pos)) {
			r->dr_c.masked++;
			continue;
		}
		row->key = k;
		row->klen = kl;
		row->pos = pos;
		row->kind = it->di_kpg.pg_kind[j];
		row->val = NULL;
		row->vlen = 0;
		if (row->kind != SFS_DF_DELETE && !it->di_keys_only) {
			const uint8_t *v;

			if (it->di_vpid < 0 || pos < it->di_vpg.pg_first ||
			    pos >= it->di_vpg.pg_first + it->di_vpg.pg_rows) {
				uint32_t vidx = vpage_of(r, pos);

				it->di_vpid = -1;
				if (it->di_cached)
					cache_unpin(r, &it->di_vpin);
				if ((rc = page_get(r, it->di_cached ? NULL : &it->di_vslot, K + vidx,
						   &it->di_vpg)))
					return it->di_err = rc;
				it->di_vpid = K + vidx;
				if (it->di_cached)
					cache_pin(r, K + vidx, &it->di_vpin);
			}
			if ((rc = row_value(r, &it->di_vpg, (uint32_t)(it->di_vpid - K), pos, row->kind, &v,
					    &row->vlen)))
				return it->di_err = rc;
			row->val = row->vlen ? v : (const void *)"";
		}
		return 1;
	}
}

void sfs_df_iter_keys_only(sfs_df_iter_t *it)
{
	it->di_keys_only = 1;
}

void sfs_df_iter_close(sfs_df_iter_t *it)
{
	if (!it)
		return;
	cache_unpin(it->di_r, &it->di_kpin);
	cache_unpin(it->di_r, &it->di_vpin);
	free(it->di_kslot.sl_buf);
	free(it->di_vslot.sl_buf);
	free(it->di_lo);
	free(it->di_hi);
	free(it);
}

void sfs__df_reseal(uint8_t *buf, size_t len)
{
	struct df_header h;
	struct df_trailer t;
	struct df_stats st;
	uint64_t fo, e0;

	if (len < DF_HDR)
		return;
	memcpy(&h, buf, sizeof(h));
	h.h_crc = sfs_crc32c(0, &h, offsetof(struct df_header, h_crc));
	memcpy(buf, &h, sizeof(h));
	if (len < DF_HDR + sizeof(st) + DF_TRAILER)
		return;
	memcpy(&t, buf + len - DF_TRAILER, sizeof(t));
	fo = t.t_footer_off;
	if (fo < DF_HDR || t.t_footer_len < sizeof(st) || fo + t.t_footer_len + DF_TRAILER != len)
		return;
	memcpy(&st, buf + fo, sizeof(st));
	e0 = fo + sizeof(st);
	for (uint64_t i = 0; i < st.s_kpages && e0 + (i + 1) * sizeof(struct df_kpe) <= fo + t.t_footer_len; i++) {
		struct df_kpe e;

		memcpy(&e, buf + e0 + i * sizeof(e), sizeof(e));
		if (e.k_off <= len && e.k_stored <= len - e.k_off) {
			e.k_crc = sfs_crc32c(0, buf + e.k_off, e.k_stored);
			memcpy(buf + e0 + i * sizeof(e), &e, sizeof(e));
		}
	}
	e0 += (uint64_t)st.s_kpages * sizeof(struct df_kpe);
	for (uint64_t i = 0; i < st.s_vpages && e0 + (i + 1) * sizeof(struct df_vpe) <= fo + t.t_footer_len; i++) {
		struct df_vpe e;

		memcpy(&e, buf + e0 + i * sizeof(e), sizeof(e));
		if (e.v_off <= len && e.v_stored <= len - e.v_off) {
			e.v_crc = sfs_crc32c(0, buf + e.v_off, e.v_stored);
			memcpy(buf + e0 + i * sizeof(e), &e, sizeof(e));
		}
	}
	if (st.s_filter_off <= len && st.s_filter_len <= len - st.s_filter_off) {
		uint64_t po = st.s_filter_off + st.s_filter_len;

		st.s_filter_crc = sfs_crc32c(0, buf + st.s_filter_off, st.s_filter_len);
		if (st.s_pfx_blocks && 32ull * st.s_pfx_blocks <= len - po)
			st.s_pfx_crc = sfs_crc32c(0, buf + po, 32ull * st.s_pfx_blocks);
		memcpy(buf + fo, &st, sizeof(st));
	}
	t.t_crc = sfs_crc32c(sfs_crc32c(0, buf + fo, t.t_footer_len), &t, offsetof(struct df_trailer, t_crc));
	memcpy(buf + len - DF_TRAILER, &t, sizeof(t));
}
