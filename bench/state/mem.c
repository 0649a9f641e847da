/*
 * mem.c — memory for `bench_state` (bs.h): the written parts of the
 * sfs arena and the raw arena are touched before the timed loops (a worker
 * reuses its buffers barrier after barrier, so steady state has them
 * resident); a size whose estimated footprint exceeds MemAvailable is
 * skipped with a message.
 */
#include <stdio.h>
#include <sys/mman.h>

#include "bench/state/bs.h"

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024ull;
}

/* Touch [p, p + len) writably without changing its bytes' meaning: the
 * region is unused arena (nothing reads past its top).  MADV_POPULATE_WRITE
 * where the kernel has it, else one store per page. */
void bs_prefault(void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p & ~4095ul, e = ((uintptr_t)p + len + 4095) & ~4095ul;

#ifdef MADV_POPULATE_WRITE
	if (madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
		return;
#endif
	for (uintptr_t q = (uintptr_t)p; q < (uintptr_t)p + len; q += 4096)
		*(volatile char *)q = 0;
}

int bs_check_memory(uint64_t need, uint64_t n, uint32_t vs, const char *phase)
{
	uint64_t avail = mem_available();
	char nb[24];

	if (need < avail / 10 * 9)
		return 0;
	if (bs_nskipped < sizeof(bs_skipped) / sizeof(bs_skipped[0]))
		snprintf(bs_skipped[bs_nskipped++], sizeof(bs_skipped[0]),
			 "%s keys, %s%u B: skipped, needs about %.1f GiB and MemAvailable is %.1f GiB",
			 bs_size_name(n, nb, sizeof(nb)), phase, vs, need / 1073741824.0,
			 avail / 1073741824.0);
	fprintf(stderr, "bench_state: %s\n", bs_skipped[bs_nskipped - 1]);
	return 1;
}
