/*
 * util.h — the runtime's own small utilities, so runtime/ and query/ need
 * nothing from inside sfs but its public headers (include/): a monotonic
 * clock, a log line, the runtime's error message, memory-order helpers and
 * futexes for its own shared structs (the job description and the exchange
 * channels, job.h and chan.h), and files: mkdir -p, rm -rf, a durable
 * rename-commit.
 *
 * Errors.  The runtime keeps its own per-thread message (rt_err) beside
 * sfs's (sfs_last_error): every runtime function that fails sets it, and a
 * failed sfs call is adopted where the runtime calls sfs (rt_sfs: the
 * backends' adapter, the engine's task calls), so rt_last_error() always
 * names the latest failure the runtime saw.  The adoption copies only on
 * failure: a call that succeeds costs one compare.
 *
 * Memory order and futexes are liburcu's uatomic/cmm and futex_noasync
 * (a public library, header-only under _LGPL_SOURCE), as shm/ uses them:
 * on x86-64 acquire and release are a compiler barrier and a plain access.
 */
#ifndef SFS_RUNTIME_UTIL_H
#define SFS_RUNTIME_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <urcu/arch.h>
#include <urcu/compiler.h>
#include <urcu/futex.h>
#include <urcu/system.h>
#include <urcu/uatomic.h>

#define RT_CACHE_LINE 64
#define __rt_cache_aligned __attribute__((aligned(RT_CACHE_LINE)))

/* Load that orders every later access after it (pairs with rt_store_release). */
#define rt_load_acquire(p)                                                     \
	__extension__({                                                        \
		__typeof__(*(p)) _v = CMM_LOAD_SHARED(*(p));                   \
		cmm_smp_rmb();                                                 \
		cmm_barrier();                                                 \
		_v;                                                            \
	})

/* Store that publishes every earlier access before it. */
#define rt_store_release(p, v)                                                 \
	do {                                                                   \
		cmm_barrier();                                                 \
		cmm_smp_wmb();                                                 \
		CMM_STORE_SHARED(*(p), (v));                                   \
	} while (0)

/* Relaxed accesses: single-copy atomic, no ordering. */
#define rt_load_relaxed(p) CMM_LOAD_SHARED(*(p))
#define rt_store_relaxed(p, v) CMM_STORE_SHARED(*(p), (v))

/* Monotonic clock, ns (a vDSO read, no syscall). */
static inline uint64_t rt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Sleep while *@word == @expected, at most @timeout_ns (0: no limit), on a
 * word in shared memory: FUTEX_WAIT without FUTEX_PRIVATE_FLAG, which a
 * word shared between processes needs.  0 when woken or the word already
 * differed, -ETIMEDOUT, -EINTR.  A syscall: the idle path only.
 */
static inline int rt_futex_wait(int32_t *word, int32_t expected, uint64_t timeout_ns)
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

/* Wake up to @n sleepers on @word. */
static inline void rt_futex_wake(int32_t *word, int n)
{
	(void)futex_noasync(word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* The log line's prefix: "ROLE[pid]: " (default "sfs"). */
void rt_log_init(const char *role);
/* One line to stderr, one write(2): lines of several processes never mix. */
void rt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set this thread's runtime message and return @code. */
int rt_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* -errno of the last failed system call (-EIO if errno is 0). */
static inline int rt_errno(void)
{
	return errno ? -errno : -EIO;
}
/* Adopt sfs's message of a failed call (@code < 0) and return @code. */
int rt_err_sfs(int code);
/* Messages set on this thread so far (rt_err and rt_err_sfs count): a
 * caller of an sfs call that runs callbacks (a map iteration) adopts sfs's
 * message only when no callback set one (rt_sfs_cb). */
extern __thread uint32_t rt__err_seq;
/* The result of an sfs call: on failure its message becomes the runtime's. */
static inline int rt_sfs(int rc)
{
	return __builtin_expect(rc < 0, 0) ? rt_err_sfs(rc) : rc;
}
/* The result of an sfs call that ran runtime callbacks, @seq0 the
 * rt__err_seq before it: a callback's own message is kept. */
static inline int rt_sfs_cb(int rc, uint32_t seq0)
{
	return __builtin_expect(rc < 0, 0) && rt__err_seq == seq0 ? rt_err_sfs(rc) : rc;
}
/* This thread's message for the last failure ("" if none). */
const char *rt_last_error(void);

/* mkdir -p with @mode for each directory it creates; 0 or an error with a
 * message. */
int rt_mkdirs(const char *path, mode_t mode);

/* Finish a file written through @f at @tmp: flush, fsync, close, rename
 * to @path (the commit); on any error @tmp is removed.  With @rc != 0 (the
 * writer failed) it only closes and removes.  The first error, by file. */
int rt_file_commit(FILE *f, const char *tmp, const char *path, int rc);

/* rm -rf @path (a missing path is fine); an error names the path. */
int rt_rmtree(const char *path);

#endif
