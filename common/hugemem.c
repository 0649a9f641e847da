/*
 * hugemem.c — see hugemem.h.  Why by hand: calloc of a big block is an
 * mmap at a 4 KiB boundary, which khugepaged may or may not collapse much
 * later; aligned_alloc at 2 MiB plus MADV_HUGEPAGE before the first touch
 * gets huge pages at fault time.  The block is touched at once (memset):
 * its pages fault in 2 MiB at a time, here, not one by one on the hot path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/hugemem.h"

#define HUGE_PAGE (2u << 20)

void *sfs_huge_calloc(size_t n, size_t size)
{
	size_t bytes, whole;
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	bytes = n * size;
	if (bytes < HUGE_PAGE)
		return calloc(n, size);
	whole = (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
	if (!(p = aligned_alloc(HUGE_PAGE, whole)))
		return NULL;
	(void)madvise(p, whole, MADV_HUGEPAGE);	/* advice only */
	memset(p, 0, bytes);
	return p;
}
