/*
 * futex.h — sleep and wake on a 32-bit word in shared memory, across
 * processes.  liburcu's futex_noasync issues FUTEX_WAIT/FUTEX_WAKE without
 * FUTEX_PRIVATE_FLAG, which is what a word shared between processes needs
 * (the private variant keys on the mm and would never wake another process).
 * These are syscalls: callers reach them only when idle.
 */
#ifndef SFS_SHM_FUTEX_H
#define SFS_SHM_FUTEX_H

#include <limits.h>
#include <stdint.h>
#include <time.h>
#include <urcu/futex.h>

/* Sleep while *@word == @expected, at most @timeout_ns (0: no limit).
 * Returns 0 when woken or the word already differed, -ETIMEDOUT, -EINTR. */
static inline int sfs_futex_wait(int32_t *word, int32_t expected, uint64_t timeout_ns)
{
	struct timespec ts, *tp = NULL;

	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tp = &ts;
	}
	if (futex_noasync(word, FUTEX_WAIT, expected, tp, NULL, 0) == 0)
		return 0;
	if (errno == EAGAIN)
		return 0;
	return -errno;
}

/* Wake up to @n sleepers on @word (INT_MAX: all). */
static inline void sfs_futex_wake(int32_t *word, int n)
{
	(void)futex_noasync(word, FUTEX_WAKE, n, NULL, NULL, 0);
}

#endif
