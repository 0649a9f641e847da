/*
 * fs.c — directory chores (fs.h).
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT)
		return sfs__err(sfs__errno(), "remove %s: %s", path, strerror(errno));
	return 0;
}

int sfs_rmtree(const char *path)
{
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc == -1 && errno == ENOENT)
		return 0;
	if (rc == -1)
		return sfs__err(sfs__errno(), "remove %s: %s", path, strerror(errno));
	return rc;
}

int sfs_mkdirs(const char *path)
{
	char p[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(p))
		return sfs__err(SFS_EUSAGE, "directory '%s': empty or too long", path);
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		char c;

		if (*s != '/' && *s != '\0')
			continue;
		c = *s;
		*s = '\0';
		if (mkdir(p, 0700) && errno != EEXIST)
			return sfs__err(sfs__errno(), "directory %s: mkdir: %s", p, strerror(errno));
		*s = c;
		if (c == '\0')
			return 0;
	}
}

int sfs_file_commit(FILE *f, const char *tmp, const char *path, int rc)
{
	if (!rc && (fflush(f) || fsync(fileno(f))))
		rc = sfs__err(sfs__errno(), "%s: write: %s", tmp, strerror(errno));
	if (fclose(f) && !rc)
		rc = sfs__err(sfs__errno(), "%s: close: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = sfs__err(sfs__errno(), "rename %s: %s", tmp, strerror(errno));
	if (rc)
		unlink(tmp);
	return rc;
}
