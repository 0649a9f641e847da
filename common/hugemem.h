/*
 * hugemem.h — zeroed memory for a big table read and written at random
 * (the compactor's key filters and key indexes): from 2 MiB on it is
 * 2 MiB-aligned and advised into transparent huge pages, so a random
 * access of a table of hundreds of MB misses the cache once, not the cache
 * and the TLB (a page-table walk per access with 4 KiB pages).  The advice
 * takes where the kernel's THP mode is madvise or always (docs/targets.md);
 * elsewhere it is 4 KiB pages, as calloc's.  Release with free().
 */
#ifndef SFS_COMMON_HUGEMEM_H
#define SFS_COMMON_HUGEMEM_H

#include <stddef.h>

/* @n x @size zeroed bytes, or NULL (out of memory, or the product
 * overflows). */
void *sfs_huge_calloc(size_t n, size_t size);

#endif
