/*
 * table_snap.h — the `table` target's checkpoint image of one worker, and
 * its rescale at restore.
 *
 * A checkpoint stages a worker's table state as one FLAT directory: the
 * data files (store/table/layout/datafile.h) "t<sid>-<16 hex>.sst", at most one
 * deletion-vector index (store/table/layout/dvec.h) per table "t<sid>-<16 hex>.dvi",
 * and the text file TABLES that says which file belongs to which table at
 * which level.  Data and index files are immutable, so the stager links
 * them and only TABLES is new; TABLES is written last and is the commit:
 * a directory without it is incomplete.
 *
 * TABLES, format version 1 (text, one record per line, every line ended by
 * '\n', fields separated by exactly one space, integers in decimal without
 * sign or leading zeros):
 *
 *   sfs-tables 1
 *   watermark <u64>                       the writer's applied seq (informational)
 *   table <sid u32> <nfiles u32> <dvi>    <dvi>: the table's DV index file, or "-"
 *   file <name> <level u32> <rows u64>    nfiles of these follow each table line
 *   ...                                   (more tables)
 *   end <crc32c>                          8 lowercase hex digits: crc32c
 *                                         (common/crc32c.h) of every byte before
 *                                         this line; nothing may follow it
 *
 * Rules of the format (checked by the writer, which refuses with
 * SFS_EUSAGE, and by the reader, which refuses with SFS_ECORRUPT naming the
 * path and line: "<path>: line 7: duplicate file name 't1-….sst'"):
 *  - Names are plain names of files in the same directory, 1..255 bytes:
 *    no '/', not "." or "..", and — because fields are space separated —
 *    no byte <= 0x20 or 0x7f.  A dvi may not be named "-" (that means none).
 *  - A sid appears once; a name appears once in the whole file (data files
 *    and dvi files share one directory).
 *  - The order of tables and of files within a table is kept by read,
 *    write and rebuild (rebuild: merged tables in sid order, each holding
 *    src[0]'s files, then src[1]'s ...; sources are key-disjoint, so only
 *    the order within one source can matter, e.g. level-0 age).
 *  - A file that does not start with "sfs-tables " is SFS_EMAGIC (one
 *    shorter than that but a prefix of it is truncated); another version
 *    number is SFS_EVERSION; everything else wrong (truncation included:
 *    a missing file line, end line or final '\n') is SFS_ECORRUPT.  The
 *    structure is parsed first so a human gets the line of a syntax
 *    error; the crc then catches what still parses.
 *
 * What the files mean (the table engine's invariant, which rebuild keeps):
 * at levels >= 1 every file with its vector applied is standalone-correct
 * and a key has at most one live row across the files of a table; rows of
 * kind DELETE and MERGE occur at level 0 only.  A vector's rows must equal
 * its data file's rows (and TABLES' rows, which rebuild checks).
 *
 * Errors: int returns, 0 or a negative code (-errno, SFS_EUSAGE,
 * SFS_ECORRUPT, SFS_EVERSION, SFS_EMAGIC), with sfs_last_error() naming
 * the file.
 */
#ifndef SFS_STORE_TABLE_SNAP_H
#define SFS_STORE_TABLE_SNAP_H

#include <stdint.h>

#define SFS_TSNAP_VERSION 1u
#define SFS_TSNAP_FILE "TABLES"

struct sfs_tsnap_file {
	char name[256];         /* data file name, in the same directory */
	uint32_t level;
	uint64_t rows;          /* the data file's rows (its vector not applied) */
};

struct sfs_tsnap_table {
	uint32_t sid;           /* state id */
	char dvi[256];          /* its DV index file name in the same directory, "" none */
	uint32_t nfiles;
	struct sfs_tsnap_file *files;
};

struct sfs_tsnap {
	uint64_t watermark;     /* informational: the writer's applied seq */
	uint32_t ntables;
	struct sfs_tsnap_table *tables;
};

/*
 * sfs_tsnap_write - write @s as TABLES text to @path: "<path>.tmp.<pid>.<n>",
 * fsync, rename, fsync of the directory.  @s is validated first (names,
 * duplicates: SFS_EUSAGE naming table and file), so nothing the reader
 * would refuse is ever written.  Cost: O(files log files) for the
 * duplicate check, one write and two fsyncs.
 */
int sfs_tsnap_write(const char *path, const struct sfs_tsnap *s);

/*
 * sfs_tsnap_read - read and validate @path whole into @out (freed with
 * sfs_tsnap_free; on error @out is left empty).  Strict: see the rules
 * above; errors name the path and the line.  Cost: O(bytes) plus
 * O(files log files) for the duplicate check.
 */
int sfs_tsnap_read(const char *path, struct sfs_tsnap *out);

/*
 * sfs_tsnap_parse - sfs_tsnap_read's parser alone: @len bytes of a TABLES
 * named @path (for messages) into @out, by the same rules.  Apart so a
 * buffer can be checked without a file (tests/fuzz/fuzz_tables.c).
 */
int sfs_tsnap_parse(const char *path, const char *buf, size_t len, struct sfs_tsnap *out);

/* sfs_tsnap_free - what sfs_tsnap_read allocated; zeroes @s.  NULL is fine. */
void sfs_tsnap_free(struct sfs_tsnap *s);

/*
 * sfs_tsnap_rebuild - rescale at restore: build the flat directory @dst
 * (created, with missing parents; it must not exist or be empty, else
 * SFS_EUSAGE) holding the worker state of key groups [@kg_lo, @kg_hi]
 * only, from the old workers' flat snapshot directories @src[0..n) (each
 * with TABLES and its files).  Per file of each source table, by its
 * key-group range (the data file's min/max key):
 *   - wholly inside: hard-linked under the same name (copied when the
 *     file system refuses the link), its vector carried over;
 *   - disjoint: skipped;
 *   - overlapping: its rows in range and not masked by its vector are
 *     rewritten into a new "t<sid>-<16 random hex>.sst" at the same level
 *     (LZ4 at levels <= 1, ZSTD below), with no vector; no file if no row
 *     survives.
 * Tables of one sid from several sources become one table (the sources
 * owned disjoint key groups, so their files are key-disjoint).  A table
 * with any vector gets a new DV index "t<sid>-<16 random hex>.dvi"; a
 * table left without files is not listed.  dst/TABLES (watermark 0) is
 * written last, after the directory is fsynced.  On failure @dst is
 * emptied (and removed if this call created it), so a retry starts over.
 * Two sources holding the same file name is SFS_ECORRUPT.
 *
 * Cost: O(rows of overlapping files) (one decode, one encode per row),
 * plus per other file a reader open (O(its footer): the key-group range
 * is there) and, if contained, one link — no row of it is read — and
 * O(rows / 64) per carried or applied vector (decoded once into a
 * bitmap).  Memory: one reader, iterator and writer at a time, one
 * decoded vector, and the new DV indexes' encoded vectors until written.
 */
int sfs_tsnap_rebuild(const char *const *src, unsigned n, const char *dst, uint32_t kg_lo,
		      uint32_t kg_hi);

#endif
