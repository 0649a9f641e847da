/*
 * helpers.h — what the multi-process tests share.
 *
 * Criterion runs every test in its own process, in parallel.  A child
 * forked inside a test reports through its exit code only (cr_assert in a
 * forked child hangs the runner), is waited for with a timeout, and is
 * killed and reaped if it overstays: this machine's pid 1 reaps nothing.
 */
#ifndef SFS_TESTS_HELPERS_H
#define SFS_TESTS_HELPERS_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* `make soak` sets SFS_SOAK: the randomized and crash tests run this many
 * times longer (1 under `make test`). */
static inline int th_soak(void)
{
	const char *s = getenv("SFS_SOAK");

	return s && *s && *s != '0' ? 20 : 1;
}

/* Anonymous shared memory of @len bytes (children of fork() see it);
 * aborts the test process when the machine refuses it. */
static inline void *th_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "th_map: mmap %zu bytes failed\n", len);
		abort();
	}
	return p;
}

/* splitmix64: the seeded generator of the randomized model tests. */
static inline uint64_t th_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A job name no other test (or concurrent run) uses. */
static inline const char *th_job(char *buf, size_t n, const char *tag)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, n, "t-%s-%d-%ld", tag, (int)getpid(), (long)(ts.tv_nsec % 100000));
	return buf;
}

/* Fork a child running fn(arg) whose return value is its exit code.  It
 * dies with the test process: a failed cr_assert in the parent must not
 * leave a spinning orphan behind. */
static inline pid_t th_fork(int (*fn)(void *), void *arg)
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		_exit(fn(arg));
	}
	return pid;
}

/* Wait for @pid at most @ms; on timeout SIGKILL + reap and return -1.
 * Otherwise the raw wait status. */
static inline int th_wait(pid_t pid, int ms)
{
	int status;

	for (int waited = 0; waited < ms; waited += 2) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0)
			return -1;
		usleep(2000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* Exit code of a child that exited normally, or -1. */
static inline int th_exit_code(int status)
{
	return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif
