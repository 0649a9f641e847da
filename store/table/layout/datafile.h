/*
 * datafile.h — the table store's data file: the sorted rows of one table
 * (one registered state in one worker bucket), immutable once written.
 * The table engine (issue 7) writes one per table per barrier (L0), merges
 * them into deeper levels, masks superseded rows with per-file deletion
 * vectors, and reads them by batch probe and by range scan.  This layer
 * knows bytes, not tables: keys arrive already encoded so that bytewise
 * order is the table order (key group big-endian | key | namespace | user
 * key), and it never merges files.
 *
 * File layout (format version 3; version 2 files read the same, version 1
 * files too, without the prefix filter; integers little-endian):
 *
 *   0            +--------------------------------------------------------+
 *                | header, 32 B: magic "SFSDATA\0", version, codec,       |
 *                |   crc32c of the header                                 |
 *   32           +--------------------------------------------------------+
 *                | key pages and value pages, interleaved in the order    |  each compressed
 *                |   the writer cut them (version 3; versions 1 and 2:    |  (LZ4, ZSTD or
 *                |   every key page, then every value page); each kind    |   stored raw)
 *                |   in row order, together tiling this area              |
 *                |   key page raw: kind[n] | pad to 4 | u32 end[n] | keys |
 *                |   value page raw: u32 end[n] | value bytes             |
 *                +--------------------------------------------------------+
 *                | key filter: split-block bloom, 32-B blocks (raw)       |
 *                | prefix filter (version 2, optional): the same, over    |
 *                |   the writer's key prefixes (see prefix_of)            |
 *   footer_off   +--------------------------------------------------------+  8-aligned
 *                | stats, 96 B: rows, PUT/DELETE/MERGE counts, K, V,      |
 *                |   kg range, codec, filter offset/size/crc/blocks,      |
 *                |   prefix rule/blocks/crc (0: no prefix filter)         |
 *                | K key-page entries, 56 B: offset, first row, stored    |
 *                |   and raw size, rows, crc32c, min/max key refs, codec  |
 *                | V value-page entries, 40 B: offset, first row, sizes,  |
 *                |   rows, crc32c, codec                                  |
 *                | key area: every page's min and max key                 |
 *   size - 32    +--------------------------------------------------------+
 *                | trailer, 32 B: footer_off, footer_len, version, crc32c |
 *                |   of footer + trailer head, magic "SFSDATA\0"          |
 *                +--------------------------------------------------------+
 *
 * Design points (issue 7), where each lives:
 *  - Column-wise pages: a key page holds the keys (and row kinds) of a run
 *    of rows; value pages hold the values of the same rows in the same
 *    order, cut independently at the target size.  A probe decompresses
 *    key pages only, and a value page only when one of its rows matched;
 *    a tombstone needs no value page at all.
 *  - Page statistics in the footer: min/max key, row count, first row
 *    number.  Rows are sorted and pages disjoint, so min/max alone send a
 *    key to at most one page, and range scans start and stop by binary
 *    search over them.
 *  - One key filter per file, not per page: since min/max already resolve
 *    a key to its one candidate page, a per-page filter could prune no
 *    more than a per-file one of the same bits per key, while small pages
 *    make many tiny filters (rounding waste, a header each).  The per-file
 *    filter is a split-block bloom (Parquet's SBBF): one 32-byte block per
 *    key, 8 bits set, ~10 bits/key -> ~1 % false positives, one cache
 *    line per probe, and a scan never touches it.
 *  - An optional second filter over key prefixes (version 2), for prefix
 *    scans: a map's entries are rows parent | ns | user key, and reading a
 *    map scans the prefix parent | ns in every file of its table, where it
 *    is usually absent (q4 reads the bids of a new auction).  The key
 *    filter cannot answer for a prefix; this one does, with one hash and
 *    one cache line per file instead of two binary searches and a page.
 *    The writer's prefix_of names each row's prefix (consecutive equal
 *    prefixes are added once); the footer records the caller's rule id,
 *    and a reader asks only under the same rule (sfs_df_prefix_maybe).
 *  - crc32c everywhere: header, every page (checked on first touch of the
 *    page, then remembered per reader), the filter (first use) and the
 *    footer (at open).  Page structure is bounds-checked when decoded.
 *  - Row positions 0..rows-1 in key order: deletion vectors (the engine's
 *    per-file position sets) are passed as bitmaps and masked rows skip.
 *  - Key group range of the file = the first 2 bytes (big-endian) of its
 *    min and max keys; keys are therefore at least 2 bytes.
 *
 * Rules of this API:
 *  - int returns: 0 / a positive count, or a negative code (-errno,
 *    SFS_EUSAGE, SFS_ECORRUPT, SFS_EVERSION, SFS_EMAGIC) with
 *    sfs_last_error() naming the file and, for bad bytes, the byte offset
 *    ("<path>: key page 3 at offset 81920: checksum mismatch").
 *  - The writer copies what it is given; add() returns with the caller's
 *    buffers free.  finish() and abort() consume the writer.
 *  - A reader maps the file read-only (MAP_SHARED) and relies on the OS
 *    page cache for re-reads: the only application-side bytes of committed
 *    state are decompressed pages, in a per-reader cache of at most
 *    cache_pages pages and, over every reader of the process, about the
 *    decoded-page budget (iterators own one key page and one value page
 *    each besides).  Pages stored uncompressed (codec none, or incompressible
 *    pages) are read in place from the mapping.
 *  - Returned pointers (keys, values) are valid until the next call on the
 *    same reader (probe) or iterator (next), or its close.  An iterator
 *    must be closed before its reader.
 *  - A reader or iterator is not thread-safe: one per thread.  Files are
 *    immutable once finished; never rewrite one in place while mapped.
 */
#ifndef SFS_LAYOUT_DATAFILE_H
#define SFS_LAYOUT_DATAFILE_H

#include <stddef.h>
#include <stdint.h>

#define SFS_DF_VERSION 3u
#define SFS_DF_VERSION_MIN 1u          /* oldest version read */
#define SFS_DF_KEY_MIN 2u              /* the key group, big-endian */
#define SFS_DF_KEY_MAX 65535u          /* keys are small; a bigger one is a caller bug */
#define SFS_DF_VALUE_MAX (256u << 20)  /* one value; also bounds a page */

/* Row kinds (one byte in the key page). */
enum sfs_df_kind {
	SFS_DF_PUT = 1,     /* value = the row's value */
	SFS_DF_DELETE = 2,  /* tombstone, empty value */
	SFS_DF_MERGE = 3,   /* value = an int64 delta, 8 bytes little-endian
			     * (aggregation merge, sum: folded when up-levelled) */
};

/* Page codecs: chosen per file by the writer (the engine: LZ4 at L0/L1,
 * ZSTD below); a page that does not shrink is stored raw whatever the file
 * codec. */
enum sfs_df_codec {
	SFS_DF_NONE = 0,
	SFS_DF_LZ4 = 1,
	SFS_DF_ZSTD = 2,
};

/* ---- writer ----------------------------------------------------------------------- */

typedef struct sfs_df_writer sfs_df_writer_t;

struct sfs_df_write_opts {
	int codec;              /* enum sfs_df_codec (default 0 = none) */
	int zstd_level;         /* 0: 3 */
	uint32_t page_bytes;    /* target uncompressed key bytes per key page, and
				 * value bytes per value page; 0: 16 KiB */
	uint32_t page_rows;     /* also cut a key page at this many rows; 0: no limit */
	uint32_t filter_bits;   /* key filter bits per key; 0: 10 */
	int keys_raw;           /* store key pages uncompressed whatever the codec: a
				 * probe then reads keys in place from the mapping and
				 * decompresses only the value pages of its hits */
	/* The prefix filter (none when prefix_of is NULL): prefix_of(key,
	 * klen) is the length of the row's prefix, 1..klen; a row for which
	 * it returns 0 leaves the file without a prefix filter.  The caller
	 * promises that every key starting with a prefix P it will ask about
	 * (sfs_df_prefix_maybe) has prefix_of == |P|.  prefix_rule (nonzero)
	 * names that promise in the footer. */
	uint32_t (*prefix_of)(const void *key, size_t klen);
	uint32_t prefix_rule;
};

/*
 * sfs_df_writer_open - start the data file @path (@opts NULL: defaults).
 * Rows go to "<path>.tmp", opened directly: only when that fails with
 * ENOENT is the parent directory created (mkdir -p) and the open retried
 * once — nothing is remembered between files.  Values past one 256 KiB
 * run spill to an unlinked scratch file beside it (created then) until
 * finish() places them after the key pages.  Memory: one key page and one
 * value page being built, a 256 KiB run of each on its way out, the
 * page directory, and 8 bytes per row (key hashes for the filter; 8 more
 * per distinct prefix with a prefix filter).
 */
int sfs_df_writer_open(const char *path, const struct sfs_df_write_opts *opts,
		       sfs_df_writer_t **out);

/*
 * sfs_df_writer_add - append a row.  Keys must be strictly increasing
 * (bytewise) and SFS_DF_KEY_MIN..SFS_DF_KEY_MAX bytes; DELETE has no
 * value (vlen 0), MERGE exactly 8 bytes (an int64, little-endian).  A row
 * that breaks these is refused with SFS_EUSAGE and not added (the writer
 * stays usable); an I/O error is sticky: finish() then fails.  Cost: a
 * copy of the row, a hash of the key, and per full page one compression
 * and one write.
 */
int sfs_df_writer_add(sfs_df_writer_t *w, const void *key, size_t klen, int kind,
		      const void *val, size_t vlen);

/*
 * sfs_df_writer_finish - write the last pages, the value pages, the filter
 * and the footer, fsync, rename "<path>.tmp" to @path and fsync the
 * directory (the fsyncs only while sfs_layout_sync(): store/table/layout/sync.h).
 * Consumes @w; on any error (also: no rows, SFS_EUSAGE) the
 * temporary file is removed and @path untouched.  @rows_out (may be NULL)
 * gets the row count.
 */
int sfs_df_writer_finish(sfs_df_writer_t *w, uint64_t *rows_out);

/* sfs_df_writer_abort - drop the file being written (removes the temp).
 * Consumes @w; NULL is fine. */
void sfs_df_writer_abort(sfs_df_writer_t *w);

/* ---- reader ----------------------------------------------------------------------- */

typedef struct sfs_df_reader sfs_df_reader_t;

struct sfs_df_read_opts {
	uint32_t cache_pages;   /* decompressed pages kept per reader; 0: 8 (min 2) */
};

/* What the decompressed-page caches of all readers of this process may
 * hold together (32 MiB unless set): a reader's cache grows past two
 * pages only while the total is below it.  Bytes held now: the second. */
void sfs_df_set_decoded_budget(uint64_t bytes);
uint64_t sfs_df_decoded_bytes(void);

/* File-level statistics: what the engine's manifest records. */
struct sfs_df_meta {
	uint64_t rows, puts, deletes, merges;
	uint64_t file_size;
	uint32_t key_pages, value_pages;
	uint16_t kg_lo, kg_hi;       /* key groups of the min and max key */
	int codec;
	const void *min_key, *max_key;  /* in the mapping: valid until close */
	size_t min_klen, max_klen;
	uint32_t prefix_rule;        /* the prefix filter's rule; 0: none */
};

/*
 * Work counters a reader accumulates (never reset; diff them).  They make
 * the probe's cost observable: a batch probe does one filter probe and a
 * binary search over pages per key, then one hash lookup per row of each
 * candidate page (hash_lookups = rows walked), and key comparisons only
 * for hash hits — never one comparison per (row, literal) pair, which is
 * what the SFS_DF_PROBE_PER_LITERAL ablation does instead.
 */
struct sfs_df_counters {
	uint64_t probe_keys;       /* keys asked */
	uint64_t pruned_range;     /* keys outside every page's [min, max] */
	uint64_t pruned_filter;    /* keys the filter excluded */
	uint64_t prefix_asks;      /* sfs_df_prefix_maybe calls that had a filter */
	uint64_t pruned_prefix;    /* ... and were answered "absent" */
	uint64_t page_reads;       /* key pages walked by probes */
	uint64_t rows_walked;      /* rows of those pages visited */
	uint64_t hash_lookups;     /* lookups into the batch's hash set */
	uint64_t key_compares;     /* key comparisons evaluating the IN-set */
	uint64_t seek_compares;    /* key comparisons of binary searches and
				    * range checks (O(log) per key or scan) */
	uint64_t masked;           /* matches or scanned rows the deletion vector hid */
	uint64_t values_decoded;   /* values returned by probes */
	uint64_t decompressions;   /* pages decompressed (cache misses) */
	uint64_t checksums;        /* pages and filters checksummed (first touch) */
};

/*
 * sfs_df_reader_open - map @path and validate it: header (magic, version,
 * crc), trailer and footer (magic, version, crc, every offset, size and
 * count in bounds, pages contiguous, rows numbered, page key ranges sorted
 * and disjoint).  Pages are not read.  Cost: O(footer) — one crc over it
 * and one key comparison per page.  Errors: SFS_EMAGIC (not a data file),
 * SFS_EVERSION, SFS_ECORRUPT (truncated, bad checksum or structure),
 * -errno.
 */
int sfs_df_reader_open(const char *path, const struct sfs_df_read_opts *opts,
		       sfs_df_reader_t **out);

/* sfs_df_reader_close - unmap and free; NULL is fine. */
void sfs_df_reader_close(sfs_df_reader_t *r);

void sfs_df_reader_meta(const sfs_df_reader_t *r, struct sfs_df_meta *out);
const struct sfs_df_counters *sfs_df_reader_counters(const sfs_df_reader_t *r);

/* A byte string (a probe key), and its sfs_df_filter_hash when the probe
 * says SFS_DF_PROBE_HASHED. */
struct sfs_df_key {
	const void *p;
	size_t len;
	uint64_t h;
};

/* The hash of both filters (part of the format): of a key for the key
 * filter, of a prefix for the prefix filter.  A caller asking many files
 * about one key or prefix hashes it once. */
uint64_t sfs_df_filter_hash(const void *bytes, size_t len);

/* Start loading the key filter's block for the key hashed @h: a reader of
 * several files prefetches every file's block before probing any, so the
 * filters' cache misses overlap. */
void sfs_df_prefetch_filter(const sfs_df_reader_t *r, uint64_t h);

/* One probe result. */
struct sfs_df_hit {
	int found;             /* 1: the file holds the key (and it is not masked) */
	int kind;              /* enum sfs_df_kind */
	uint64_t pos;          /* row position (for the engine's deletion vectors) */
	const void *val;       /* valid until the reader's next call or close */
	size_t vlen;
};

/* Probe flags. */
#define SFS_DF_PROBE_PER_LITERAL 0x1u  /* ablation: compare each row with every
					* literal of its page instead of the hash set */
#define SFS_DF_PROBE_NO_VALUES   0x2u  /* kind and position only (up-levelling
					* lookups that only build deletion vectors) */
#define SFS_DF_PROBE_SEEK_SPARSE 0x4u  /* a page with few candidates (2 x keys x
					* log2 rows < rows) is searched by bisection
					* per key instead of walked: deep, big files
					* probed with small batches (see the bench) */
#define SFS_DF_PROBE_HASHED      0x8u  /* keys[i].h is sfs_df_filter_hash of the key */

/*
 * sfs_df_probe - the per-batch key probe: find each of @n keys (any order,
 * duplicates allowed) in the file, in one pass.  Each key is hashed once
 * and checked in the filter, then sent to its one candidate page by binary
 * search over page min/max; the survivors go into a hash set built once
 * per call, and each candidate page's key column is walked once, every
 * row looked up in the set (one hash, one lookup per row).  Values are
 * decoded only for matching rows; rows whose bit is set in @dv
 * (@dv_words 64-bit words, bit p of word p/64; NULL: none) are reported
 * absent.  Fills @out[0..n).  Returns the number found, or a negative
 * code.  Cost: O(n log pages + rows of the candidate pages + matches); a
 * value is copied into a per-reader arena when its page is compressed
 * (points into the mapping otherwise) — the arena holds one call's values.
 */
int sfs_df_probe(sfs_df_reader_t *r, const struct sfs_df_key *keys, size_t n,
		 const uint64_t *dv, size_t dv_words, unsigned flags, struct sfs_df_hit *out);

/* ---- iterators (range scans) -------------------------------------------------------- */

typedef struct sfs_df_iter sfs_df_iter_t;

struct sfs_df_row {
	const void *key;       /* valid until the iterator's next call or close */
	size_t klen;
	const void *val;
	size_t vlen;
	uint64_t pos;
	int kind;
};

/*
 * sfs_df_iter_range - rows with @lo <= key < @hi in key order (@lo NULL:
 * from the first row; @hi NULL: to the last), skipping rows masked by
 * @dv.  Pages outside the range are never touched (file and page min/max
 * prune them; binary search finds the first row); a page wholly masked by
 * @dv is skipped without being read.  The iterator owns its page buffers
 * (one key page, one value page), so a scan does not disturb the reader's
 * cache; it copies @lo and @hi.
 */
int sfs_df_iter_range(sfs_df_reader_t *r, const void *lo, size_t lolen, const void *hi,
		      size_t hilen, const uint64_t *dv, size_t dv_words, sfs_df_iter_t **out);

/* From now on @it returns keys only (val NULL, vlen 0): no value page is
 * read or decompressed.  A scan of keys (an index's or filter's rebuild)
 * then costs the key pages alone. */
void sfs_df_iter_keys_only(sfs_df_iter_t *it);

/* Rows whose key group (first 2 key bytes, big-endian) is in [kg_lo, kg_hi]:
 * restore/rescale clipping and level merges. */
int sfs_df_iter_kg(sfs_df_reader_t *r, uint32_t kg_lo, uint32_t kg_hi, const uint64_t *dv,
		   size_t dv_words, sfs_df_iter_t **out);

/*
 * sfs_df_prefix_maybe - 0 when no row's key starts with @prefix: the file
 * has a prefix filter written under @rule and it excludes @prefix; 1 when
 * some may (also: no such filter, another rule); < 0 when the filter's
 * checksum fails (first use).  Cost: one hash of @prefix and one 32-byte
 * block read.  @rule must be the writer's: see prefix_of.
 */
int sfs_df_prefix_maybe(sfs_df_reader_t *r, uint32_t rule, const void *prefix, size_t plen);

/* The same with the prefix hashed once by the caller (sfs_df_filter_hash),
 * for one prefix asked of many files. */
int sfs_df_prefix_maybe_h(sfs_df_reader_t *r, uint32_t rule, uint64_t h);

/* Rows whose key starts with @prefix (map state: every entry of a parent
 * key): the range [prefix, prefix's successor). */
int sfs_df_iter_prefix(sfs_df_reader_t *r, const void *prefix, size_t plen, const uint64_t *dv,
		       size_t dv_words, sfs_df_iter_t **out);

/* The same, for short scans (a map's entries): pages come from and stay in
 * the reader's cache, as a probe's do, so the next scan or probe of the
 * same page decompresses nothing.  The reader must not be used by anything
 * else (a probe, another iterator) until this iterator is closed: they
 * share the cache's slots. */
int sfs_df_iter_prefix_cached(sfs_df_reader_t *r, const void *prefix, size_t plen,
			      const uint64_t *dv, size_t dv_words, sfs_df_iter_t **out);

/* sfs_df_iter_next - the next row into @row: 1, or 0 at the end, or a
 * negative code (a corrupt page: the iterator stays at its error). */
int sfs_df_iter_next(sfs_df_iter_t *it, struct sfs_df_row *row);

void sfs_df_iter_close(sfs_df_iter_t *it);

/* The int64 of a MERGE row's value. */
static inline int64_t sfs_df_merge_delta(const void *val)
{
	int64_t d;

	__builtin_memcpy(&d, val, 8);
	return d;
}

/* ---- internal: tests and the fuzz target ---------------------------------------------- */

/* The writer passes a fault point (common/fault.h) before each of its
 * system calls: layout.df.open, .write, .fsync, .rename; a fail=ERR rule
 * fails that call with ERR as errno. */

/* Recompute every checksum of a data file image @buf of @len bytes in
 * place, as far as its (possibly mutated) structure can be followed: the
 * fuzz target uses it so mutations reach the parsers behind the checks. */
void sfs__df_reseal(uint8_t *buf, size_t len);

#endif
