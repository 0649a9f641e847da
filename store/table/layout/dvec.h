/*
 * dvec.h — the table store's deletion vectors: per data file, the set of
 * row positions (0..rows-1, see datafile.h) superseded by rows of newer
 * files.  Issue 7's up-levelling rounds produce them; a snapshot names one
 * deletion-vector index file holding the vectors of many data files, keyed
 * by data-file name.  In memory a vector is the bitmap the data-file reader
 * takes (`const uint64_t *dv, size_t dv_words`: bit p of word p/64, set =
 * deleted).
 *
 * On disk (little-endian; one index file, written whole, never updated):
 *
 *   header   16 B   magic "SDVI", version, 8 reserved zero bytes
 *   bodies          one per vector, each in the smaller of two encodings
 *                   (ties go to the bitmap, which decodes by memcpy):
 *                     BITMAP  ceil(rows/64) words; bits >= rows are zero
 *                     RUNS    maximal runs of set bits, each as two LEB128
 *                             varints: gap from the previous run's end (the
 *                             first: from 0; later gaps >= 1, so the
 *                             encoding is canonical) and length - 1
 *                   each body has its own crc32c (in its index entry)
 *   index           per vector, sorted by name (strictly: no duplicates):
 *                   rows u64, deleted u64, body offset u64, body length
 *                   u32, body crc u32, encoding u8, zero u8, name length
 *                   u16, name bytes
 *   trailer  24 B   index offset u64, count u32, crc32c of index + these
 *                   12 bytes u32, version u32, magic
 *
 * Every byte is covered by a check (magic, version, zero fields, a crc).
 *
 * Rules of this API (and of manifest.h):
 *  - int returns: 0 / a count, or a negative code; SFS_ECORRUPT (truncated,
 *    bad checksum or structure), SFS_EMAGIC, SFS_EVERSION, SFS_EUSAGE,
 *    -errno, with sfs_last_error() naming the file and, for bad bytes, the
 *    offset ("<path>: index entry 3 at offset 812: body out of bounds").
 *  - Names, writing and reading: store/table/layout/file.h (the shared file helpers;
 *    it also gives SFS_LAYOUT_NAME_MAX to users of this header).
 *  - An index is read whole and validated at open (every crc and every
 *    vector's structure), so lookups after a successful open cannot fail
 *    on bad bytes.
 */
#ifndef SFS_LAYOUT_DVEC_H
#define SFS_LAYOUT_DVEC_H

#include <stddef.h>
#include <stdint.h>

#include "store/table/layout/file.h"

#define SFS_DV_VERSION 1u
#define SFS_DV_ROWS_MAX (1ull << 32)   /* rows of one data file; bounds a decode */

enum sfs_dv_enc {
	SFS_DV_BITMAP = 1,
	SFS_DV_RUNS = 2,
};

/* Words of a bitmap of @rows positions. */
static inline size_t sfs_dv_words(uint64_t rows) { return (size_t)((rows + 63) / 64); }

/* ---- building and writing an index ---------------------------------------------------- */

typedef struct sfs_dv_builder sfs_dv_builder_t;

int sfs_dv_builder_new(sfs_dv_builder_t **out);

/*
 * sfs_dv_builder_add - the vector of data file @file (@rows rows) from
 * @bits (@words words, at least sfs_dv_words(rows); bits >= rows must be
 * clear).  Encodes it at once (the caller's buffer is free on return).
 * SFS_EUSAGE for a bad name, rows > SFS_DV_ROWS_MAX or stray bits; a
 * duplicate name is found by write().  Cost: O(words).
 */
int sfs_dv_builder_add(sfs_dv_builder_t *b, const char *file, uint64_t rows, const uint64_t *bits,
		       size_t words);

/* sfs_dv_builder_write - sort, write @path (tmp + fsync + rename + fsync of
 * the directory).  The builder stays valid (write it again elsewhere). */
int sfs_dv_builder_write(sfs_dv_builder_t *b, const char *path);

void sfs_dv_builder_free(sfs_dv_builder_t *b);

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct sfs_dv_index sfs_dv_index_t;

struct sfs_dv_info {
	const char *file;        /* NUL-terminated; valid until close */
	uint64_t rows;           /* rows of the data file */
	uint64_t deleted;        /* set bits */
	int enc;                 /* enum sfs_dv_enc, as stored */
	uint32_t bytes;          /* stored body size */
};

/* sfs_dv_open - read and validate @path whole.  Cost: O(file). */
int sfs_dv_open(const char *path, sfs_dv_index_t **out);
void sfs_dv_close(sfs_dv_index_t *ix);

/* Vectors in the index (iteration: 0..count-1, in name order). */
size_t sfs_dv_count(const sfs_dv_index_t *ix);
void sfs_dv_info(const sfs_dv_index_t *ix, size_t i, struct sfs_dv_info *out);

/* sfs_dv_find - the position of @file's vector, or -ENOENT.  O(log n). */
int sfs_dv_find(const sfs_dv_index_t *ix, const char *file);

/* sfs_dv_decode - vector @i into @bits (@cap words; the first
 * sfs_dv_words(rows) are written, SFS_EUSAGE if @cap is smaller). */
int sfs_dv_decode(const sfs_dv_index_t *ix, size_t i, uint64_t *bits, size_t cap);

/* sfs_dv_lookup - @file's vector, decoded into a malloc'd bitmap (*@bits,
 * *@words; the caller frees).  0, or -ENOENT if the index has none. */
int sfs_dv_lookup(const sfs_dv_index_t *ix, const char *file, uint64_t **bits, size_t *words);

/* ---- internal: the fuzz target ------------------------------------------------------------ */

/* Recompute the checksums of an index image @buf of @len bytes in place
 * (every body's crc the index can locate, then the index crc), as far as
 * its possibly mutated structure can be followed: so mutations reach the
 * index and vector parsers behind the checks. */
void sfs__dv_reseal(uint8_t *buf, size_t len);

#endif
