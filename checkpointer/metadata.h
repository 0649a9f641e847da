/*
 * metadata.h — a checkpoint's `_metadata` (checkpointer/metadata.c): the
 * format, its writer and its strict parser, apart from the storage that
 * writes and reads the file (ckstore.h), so a buffer can be checked on
 * its own (tests/fuzz/fuzz_metadata.c).
 *
 * `_metadata` is a text file (format version 2): a header line, the job
 * name and config, the workers' opaque bytes (hex), per-worker table versions,
 * the sink epoch, the file list (storage path, worker, local name, size,
 * crc32c, shared or private), and a last line with the crc32c of all the
 * preceding bytes.  The parser refuses a bad checksum, an unknown version
 * or any line not exactly as the writer puts it, with a message naming
 * the file, the line and the problem.
 *
 * Format 1 (read, never written) kept source offsets per split instead of
 * a worker's opaque bytes; a restore migrates them.
 */
#ifndef SFS_CHECKPOINTER_METADATA_H
#define SFS_CHECKPOINTER_METADATA_H

#include <stddef.h>
#include <stdint.h>

/* 2: a worker's opaque bytes ("source W LEN HEX") in place of format 1's
 * source offsets per split, which are still read (a restore migrates
 * them) */
#define CK_FORMAT_VERSION 2u
#define CK_SOURCE_MAX 4096u  /* bytes a worker keeps with a checkpoint (SFS_TASK_BYTES_MAX) */
#define CK_PATH_MAX 256u
#define CK_JOB_MAX 64u
#define CK_CONFIG_MAX 512u
#define CK_LOCAL_MAX 200u  /* a staged file name: leaves room for shared/w<w>-<inc>- */

/* Format 1 only (read, never written): a source split's offset. */
struct ck_split {
	uint32_t split;        /* source split index */
	uint64_t offset;       /* next source block of that split */
};

/* The opaque bytes worker @worker saved with the checkpoint (its source
 * positions; sfs stores them and never reads them). */
struct ck_source {
	uint32_t worker;
	uint32_t len;          /* <= CK_SOURCE_MAX */
	uint8_t *bytes;        /* malloc'd by sfs__ck_read; the caller's in a commit */
};

struct ck_table {
	uint32_t worker;
	uint64_t version;      /* target version (flushed seq) in the checkpoint */
};

struct ck_file {
	char path[CK_PATH_MAX];   /* relative to the storage root */
	char local[CK_PATH_MAX];  /* name in the worker's instance directory */
	uint32_t worker;
	uint32_t shared;          /* 1: shared/..., 0: private chk-<id>/w<w>/... */
	uint64_t size;
	uint32_t crc;             /* crc32c of the whole content */
};

struct ck_meta {
	uint32_t version;         /* CK_FORMAT_VERSION */
	uint64_t id;              /* checkpoint (barrier) id */
	uint64_t time_ms;         /* wall clock at completion */
	char job[CK_JOB_MAX];
	char config[CK_CONFIG_MAX];  /* "key=value key=value ..." (query, backend,
	                                workers, max_parallelism, events, ...) */
	uint32_t workers;
	uint64_t sink_epoch;      /* sink output committed up to this barrier id */
	uint32_t nsources;        /* format 2: one per worker (any order) */
	struct ck_source *sources;
	uint32_t nsplits;         /* format 1 only */
	struct ck_split *splits;
	uint32_t ntables;
	struct ck_table *tables;
	uint32_t nfiles;
	struct ck_file *files;
	uint64_t total_bytes;     /* sum of file sizes */
	uint64_t new_bytes;       /* bytes linked or copied by this checkpoint */
};

void sfs__ck_meta_free(struct ck_meta *m);

/* Look up "key=" in m->config; copies the value, 0 if found. */
int sfs__ck_meta_config(const struct ck_meta *m, const char *key, char *val, size_t len);

#define CK_LIST_MAX (1u << 22)     /* splits, tables or files in one checkpoint */

void sfs__ck_meta_free(struct ck_meta *m);

/* Look up "key=" in m->config; copies the value, 0 if found. */
int sfs__ck_meta_config(const struct ck_meta *m, const char *key, char *val, size_t len);

/*
 * The strict parser of sfs__ck_read alone: @len bytes of a _metadata named
 * @file (for messages) into @m, without the checks that need the
 * directory (its id, the job, the files).  Freed with sfs__ck_meta_free; on
 * error @m is left empty.  Apart so a buffer can be checked on its own
 * (tests/fuzz/fuzz_metadata.c).
 */
int sfs__ck_meta_parse(const char *file, const char *buf, size_t len, struct ck_meta *m);

/* The text of @m (files and sizes as given) with its checksum line, in a
 * malloc'd *@buf of *@len bytes: what sfs__ck_txn_commit writes. */
int sfs__ck_meta_format(const struct ck_meta *m, char **buf, size_t *len);

/* 1..CK_LOCAL_MAX printable bytes without space or '/', not "." or "..":
 * a name that can neither split a metadata line nor leave its directory. */
int sfs__ck_name_ok(const char *s, size_t len);

/* crc32c (Castagnoli) of @n bytes, continuing @crc (0 to start).  SSE4.2
 * when the CPU has it, else a table. */
uint32_t sfs__ck_crc32c(uint32_t crc, const void *p, size_t n);

/* The table implementation, to test the SSE4.2 one against. */
uint32_t sfs__ck_crc32c_table(uint32_t crc, const void *p, size_t n);

#endif
