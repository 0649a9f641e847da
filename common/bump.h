/*
 * bump.h — a bump arena for values a reader hands out: copies live until
 * the next sfs_bump_reset (a caller's quiescent point), so a value never
 * points into a mapping or a RocksDB buffer that a later catch-up frees.
 * Chunks of 256 KiB (a bigger value gets a chunk of its own); a reset keeps
 * one standard chunk, so a steady reader allocates nothing.  Not
 * thread-safe: one per reader.
 */
#ifndef SFS_COMMON_BUMP_H
#define SFS_COMMON_BUMP_H

#include <stddef.h>

struct sfs_bump_chunk;
struct sfs_bump {
	struct sfs_bump_chunk *head;
};

/* A copy of @n bytes of @p (8-aligned), or NULL when out of memory. */
void *sfs_bump_copy(struct sfs_bump *a, const void *p, size_t n);
/* Drop every copy; keeps one chunk. */
void sfs_bump_reset(struct sfs_bump *a);
void sfs_bump_free(struct sfs_bump *a);

#endif
