/*
 * util.c — the runtime's log line, error message, futexes and file commit
 * (util.h).
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sfs.h"
#include "runtime/util.h"

static char log_role[48] = "sfs";
static __thread char last_msg[512];
__thread uint32_t rt__err_seq;

void rt_log_init(const char *role)
{
	snprintf(log_role, sizeof(log_role), "%s", role);
}

/* stderr is unbuffered, and glibc formats a whole fprintf to an unbuffered
 * stream in a buffer of its own before it writes: one write(2) a line,
 * whatever the line (the message is cut at 1 KiB). */
void rt_log(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s[%d]: %s\n", log_role, (int)getpid(), msg);
}

int rt_futex_wait(int32_t *word, int32_t expected, uint64_t timeout_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000ull),
			       .tv_nsec = (long)(timeout_ns % 1000000000ull) };

	if (syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout_ns ? &ts : NULL, NULL, 0) &&
	    errno != EAGAIN)
		return -errno;
	return 0;
}

void rt_futex_wake(int32_t *word, int n)
{
	(void)syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

int rt_err(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_msg, sizeof(last_msg), fmt, ap);
	va_end(ap);
	rt__err_seq++;
	return code;
}

int rt_err_sfs(int code)
{
	const char *m = sfs_last_error();

	snprintf(last_msg, sizeof(last_msg), "%s", *m ? m : sfs_strerror(code));
	rt__err_seq++;
	return code;
}

const char *rt_last_error(void)
{
	return last_msg;
}

int rt_file_commit(FILE *f, const char *tmp, const char *path, int rc)
{
	/* ferror: a buffered write that failed earlier (a full disk) drops
	 * its chunk, and a later fflush of the rest may well succeed — a
	 * committed file with a hole (found by tests/e2e_diskfull.sh) */
	if (!rc && (fflush(f) || ferror(f) || fsync(fileno(f))))
		rc = rt_err(errno ? rt_errno() : -EIO, "%s: write: %s", tmp,
			    strerror(errno ? errno : EIO));
	if (fclose(f) && !rc)
		rc = rt_err(rt_errno(), "%s: close: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = rt_err(rt_errno(), "rename %s: %s", tmp, strerror(errno));
	if (rc)
		unlink(tmp);
	return rc;
}
