/*
 * util.h — the runtime's own small utilities, so runtime/ and query/ need
 * nothing from inside sfs but its public headers (include/): a monotonic
 * clock, a log line, the runtime's error message, memory-order helpers and
 * futexes for its own shared structs (the job description and the exchange
 * channels, job.h and chan.h), and a durable rename-commit of a file.
 *
 * Errors.  The runtime keeps its own per-thread message (rt_err) beside
 * sfs's (sfs_last_error): every runtime function that fails sets it, and a
 * failed sfs call is adopted where the runtime calls sfs (rt_sfs: the
 * backends' adapter, the engine's task calls), so rt_last_error() always
 * names the latest failure the runtime saw.  The adoption copies only on
 * failure: a call that succeeds costs one compare.
 *
 * Memory order and futexes are what any program on Linux writes: GCC's
 * __atomic builtins (what C11's <stdatomic.h> is built on, usable on the
 * plain fields of a struct in shared memory) and the futex(2) syscall.  On
 * x86-64 an acquire load or a release store is a plain access, the full
 * fence an mfence; ThreadSanitizer models them as they are.
 */
#ifndef SFS_RUNTIME_UTIL_H
#define SFS_RUNTIME_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define RT_CACHE_LINE 64
#define __rt_cache_aligned __attribute__((aligned(RT_CACHE_LINE)))

/* Acquire: every later access stays after it (pairs with rt_store_release,
 * which publishes every earlier access before it).  Relaxed: single-copy
 * atomic, no ordering.  rt_fence: a full fence (store-load ordering, the
 * doorbell's Dekker handshake). */
#define rt_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define rt_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define rt_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define rt_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define rt_fence() __atomic_thread_fence(__ATOMIC_SEQ_CST)

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
 * differed, -ETIMEDOUT, -EINTR.  Wake up to @n sleepers with
 * rt_futex_wake.  Syscalls: the idle path only (runtime/util.c).
 */
int rt_futex_wait(int32_t *word, int32_t expected, uint64_t timeout_ns);
void rt_futex_wake(int32_t *word, int n);

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

/* Finish a file written through @f at @tmp: flush, fsync, close, rename
 * to @path (the commit); on any error @tmp is removed.  With @rc != 0 (the
 * writer failed) it only closes and removes.  The first error, by file. */
int rt_file_commit(FILE *f, const char *tmp, const char *path, int rc);

#endif
