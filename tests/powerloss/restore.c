/*
 * restore.c — after a power loss (common/fault.h, action `powerloss`),
 * replace the tree under ROOT with its durable image, as the power-loss
 * shim (shim.c: the model and its limits) recorded it in ROOT/.durable:
 *
 *    powerloss_restore ROOT
 *
 * From ROOT's own record down: a directory gets the entries of its last
 * sync (none if never synced), a file the content of its last sync (empty
 * if never synced); a file reached twice (hard links) is linked, not
 * copied.  Everything else under ROOT is removed.  The image is built in
 * ROOT/.rebuilt, then moved into place; ROOT/.durable stays (the next
 * power loss of a run continued here keeps recording into it), the marker
 * ROOT/.powerloss goes.  Prints one line: what was restored.  Exit 0, or 1
 * with a message.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/powerloss/powerloss.h"

#define REBUILT ".rebuilt"

static char root[PATH_MAX], shadow[PATH_MAX];
static unsigned long ndirs, nfiles, nempty, nlinks;
static unsigned long long nbytes;

/* The files made so far: key -> path, for hard links. */
static struct made {
	char key[PL_KEY_MAX];
	char *path;
} *made;
static size_t nmade, capmade;

static void fail(const char *what, const char *path)
{
	fprintf(stderr, "powerloss_restore: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static const char *made_find(const char *key)
{
	for (size_t i = 0; i < nmade; i++)
		if (!strcmp(made[i].key, key))
			return made[i].path;
	return NULL;
}

static void made_add(const char *key, const char *path)
{
	if (nmade == capmade) {
		capmade = capmade ? 2 * capmade : 256;
		if (!(made = realloc(made, capmade * sizeof(*made))))
			fail("realloc", "");
	}
	snprintf(made[nmade].key, sizeof(made[nmade].key), "%s", key);
	if (!(made[nmade++].path = strdup(path)))
		fail("strdup", path);
}

static void make_file(const char *key, const char *path)
{
	char src[PATH_MAX], b[1 << 16];
	const char *prev = made_find(key);
	int in, out;
	ssize_t r;

	if (prev) {
		if (link(prev, path))
			fail("link", path);
		nlinks++;
		return;
	}
	if ((out = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0)
		fail("create", path);
	snprintf(src, sizeof(src), "%s/f/%s", shadow, key);
	if ((in = open(src, O_RDONLY)) < 0) {
		if (errno != ENOENT)
			fail("open", src);
		nempty++;	/* never synced: empty */
	} else {
		while ((r = read(in, b, sizeof(b))) > 0) {
			if (write(out, b, (size_t)r) != r)
				fail("write", path);
			nbytes += (unsigned long long)r;
		}
		if (r < 0)
			fail("read", src);
		close(in);
	}
	close(out);
	nfiles++;
	made_add(key, path);
}

/* Build directory @key's durable entries into @path (made by the caller). */
static void make_dir(const char *key, const char *path, int depth)
{
	char rec[PATH_MAX], line[PATH_MAX + 2 * PL_KEY_MAX], sub[PATH_MAX], k[PL_KEY_MAX];
	FILE *f;

	if (depth > 64) {
		errno = ELOOP;
		fail("too deep", path);
	}
	snprintf(rec, sizeof(rec), "%s/d/%s", shadow, key);
	if (!(f = fopen(rec, "r"))) {
		if (errno != ENOENT)
			fail("open", rec);
		return;	/* never synced: empty */
	}
	while (fgets(line, sizeof(line), f)) {
		char type, *name;
		size_t n = strlen(line);

		if (n && line[n - 1] == '\n')
			line[--n] = 0;
		if (n < 4 || line[1] != ' ' || !(name = strchr(line + 2, ' '))) {
			errno = EINVAL;
			fail("bad record line in", rec);
		}
		type = line[0];
		snprintf(k, sizeof(k), "%.*s", (int)(name - line - 2), line + 2);
		name++;
		snprintf(sub, sizeof(sub), "%s/%s", path, name);
		if (type == 'd') {
			if (mkdir(sub, 0700))
				fail("mkdir", sub);
			ndirs++;
			make_dir(k, sub, depth + 1);
		} else {
			make_file(k, sub);
		}
	}
	fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT)
		fail("remove", path);
	return 0;
}

static void rmtree(const char *path)
{
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
		fail("remove", path);
}

static int ours(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, PL_SHADOW) ||
	       !strcmp(name, REBUILT);
}

int main(int argc, char **argv)
{
	char rebuilt[PATH_MAX], p[PATH_MAX], q[PATH_MAX], key[PL_KEY_MAX];
	struct statx sx;
	struct dirent *e;
	DIR *d;

	if (argc != 2) {
		fprintf(stderr, "usage: powerloss_restore ROOT\n");
		return 2;
	}
	if (!realpath(argv[1], root))
		fail("realpath", argv[1]);
	snprintf(shadow, sizeof(shadow), "%s/%s", root, PL_SHADOW);
	snprintf(rebuilt, sizeof(rebuilt), "%s/%s", root, REBUILT);
	if (statx(AT_FDCWD, root, 0, STATX_INO | STATX_BTIME, &sx))
		fail("statx", root);
	pl_key_statx(&sx, key, sizeof(key));
	rmtree(rebuilt);
	if (mkdir(rebuilt, 0700))
		fail("mkdir", rebuilt);
	make_dir(key, rebuilt, 0);

	/* The power is back: what was not durable is gone. */
	if (!(d = opendir(root)))
		fail("opendir", root);
	while ((e = readdir(d)))
		if (!ours(e->d_name)) {
			snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
			rmtree(p);
		}
	closedir(d);
	if (!(d = opendir(rebuilt)))
		fail("opendir", rebuilt);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", rebuilt, e->d_name);
			snprintf(q, sizeof(q), "%s/%s", root, e->d_name);
			if (rename(p, q))
				fail("rename", p);
		}
	closedir(d);
	if (rmdir(rebuilt))
		fail("rmdir", rebuilt);
	printf("restored %s: %lu directories, %lu files (%llu bytes, %lu never synced: empty), %lu hard links\n",
	       root, ndirs, nfiles, nbytes, nempty, nlinks);
	return 0;
}
