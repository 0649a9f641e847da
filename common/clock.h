/*
 * clock.h — time for heartbeats, backoff and benchmarks.
 * CLOCK_MONOTONIC through the vDSO: no syscall on x86-64.
 */
#ifndef SFS_COMMON_CLOCK_H
#define SFS_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock milliseconds (CLOCK_REALTIME, the vDSO): the processing time
 * of state TTL (common/ttl.h), comparable across processes and restarts. */
static inline uint64_t sfs_now_realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

static inline void sfs_sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

#endif
