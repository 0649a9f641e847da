/*
 * util.c — the runtime's log line, error message and mkdir -p (util.h).
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

void rt_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s[%d]: ", log_role, (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
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

/* @path exists: a directory, or -ENOTDIR. */
static int is_dir(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return rt_err(rt_errno(), "directory %s: stat: %s", path, strerror(errno));
	return S_ISDIR(st.st_mode) ? 0 :
		rt_err(-ENOTDIR, "directory %s: exists and is not a directory", path);
}

/* One mkdir(2) when the parent exists; a walk of the components on ENOENT. */
int rt_mkdirs(const char *path, mode_t mode)
{
	char p[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(p))
		return rt_err(SFS_EUSAGE, "directory '%s': empty or too long", path);
	if (!mkdir(path, mode))
		return 0;
	if (errno == EEXIST)
		return is_dir(path);
	if (errno != ENOENT)
		return rt_err(rt_errno(), "directory %s: mkdir: %s", path, strerror(errno));
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		char c;

		if (*s != '/' && *s != '\0')
			continue;
		c = *s;
		*s = '\0';
		if (mkdir(p, mode) && errno != EEXIST)
			return rt_err(rt_errno(), "directory %s: mkdir: %s", p, strerror(errno));
		*s = c;
		if (c == '\0' || s[1] == '\0')
			return is_dir(path);
	}
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT)
		return rt_err(rt_errno(), "remove %s: %s", path, strerror(errno));
	return 0;
}

int rt_rmtree(const char *path)
{
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc == -1 && errno == ENOENT)
		return 0;
	if (rc == -1)
		return rt_err(rt_errno(), "remove %s: %s", path, strerror(errno));
	return rc;
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
