/*
 * merge.c — this process's table of merge operators (merge.h): the user's
 * definitions, the checks that a state's operator folds here as the
 * segment says it should, and the loader of `--merge-lib` plugins.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/merge.h"

_Static_assert(SFS_MERGE_NOPS <= SFS_MERGE_USER && SFS_MERGE_USER < SFS_MERGE_MAX_OPS,
	       "built-in, then user indexes");

/* Built-ins never call through the table (sfs_merge_i64 inlines them);
 * their entries stay undefined so a stray indirect call aborts too. */
sfs_merge_fn sfs__merge_fns[SFS_MERGE_MAX_OPS] = {
	[0 ... SFS_MERGE_MAX_OPS - 1] = sfs__merge_undefined,
};

static char names[SFS_MERGE_MAX_OPS][SFS_MERGE_NAME_MAX] = {
	[SFS_MERGE_ADD] = "add",
	[SFS_MERGE_MAX] = "max",
	[SFS_MERGE_MIN] = "min",
};

int64_t sfs__merge_undefined(int64_t acc, int64_t delta)
{
	/* A fold reached an index no check let through: folding it as add (or
	 * anything) would corrupt the state silently. */
	fprintf(stderr, "sfs: a counter fold with a merge operator this process has not "
		"defined (a state skipped sfs_merge_check)\n");
	abort();
}

static int name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n >= SFS_MERGE_NAME_MAX)
		return 0;
	/* Names go into checkpoint metadata and RocksDB operator names. */
	return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789_-") == n;
}

int sfs_merge_define(unsigned op, const char *name, sfs_merge_fn fn)
{
	sfs__err_clear();
	if (op < SFS_MERGE_USER || op >= SFS_MERGE_MAX_OPS)
		return sfs__err(SFS_EUSAGE, "merge operator %u '%s': %s (user indexes are %d..%d)",
				op, name ? name : "", op < SFS_MERGE_USER ? "a built-in index"
									    : "out of range",
				SFS_MERGE_USER, SFS_MERGE_MAX_OPS - 1);
	if (!fn || !name_ok(name))
		return sfs__err(SFS_EUSAGE, "merge operator %u '%s': %s", op, name ? name : "",
				fn ? "a name is 1..31 of [A-Za-z0-9_-]" : "no function");
	if (sfs__merge_fns[op] != sfs__merge_undefined) {
		if (strcmp(names[op], name) == 0 && sfs__merge_fns[op] == fn)
			return 0;
		return sfs__err(SFS_EUSAGE, "merge operator %u is already defined as '%s'%s", op,
				names[op], strcmp(names[op], name) ? "" : " with another function");
	}
	for (unsigned i = SFS_MERGE_USER; i < SFS_MERGE_MAX_OPS; i++)
		if (strcmp(names[i], name) == 0)
			return sfs__err(SFS_EUSAGE, "merge operator '%s' is already index %u, "
					"not %u", name, i, op);
	snprintf(names[op], sizeof(names[op]), "%s", name);
	/* Release: a thread that sees the function sees its name (start-up
	 * only, but the rocksdb target's threads may already run in tests).
	 * A process-local table: the compiler's atomics, not shm/atomic.h's
	 * shared-memory vocabulary (common/ includes nothing above it). */
	__atomic_store_n(&sfs__merge_fns[op], fn, __ATOMIC_RELEASE);
	return 0;
}

const char *sfs_merge_name(unsigned op)
{
	if (op < SFS_MERGE_NOPS)
		return names[op];
	if (op < SFS_MERGE_USER || op >= SFS_MERGE_MAX_OPS ||
	    __atomic_load_n(&sfs__merge_fns[op], __ATOMIC_ACQUIRE) == sfs__merge_undefined)
		return NULL;
	return names[op];
}

int sfs_merge_check(unsigned op, const char *name, const char *state)
{
	const char *mine = sfs_merge_name(op);

	if (op < SFS_MERGE_NOPS)
		return 0;
	if (op < SFS_MERGE_USER || op >= SFS_MERGE_MAX_OPS)
		return sfs__err(SFS_EUSAGE, "state '%s': merge operator %u is neither built in "
				"(0..%d) nor a user index (%d..%d)", state, op, SFS_MERGE_NOPS - 1,
				SFS_MERGE_USER, SFS_MERGE_MAX_OPS - 1);
	if (!mine)
		return sfs__err(SFS_EUSAGE, "state '%s': merge operator %u '%s' is not defined in "
				"this process (sfs_merge_define, or sfs run --merge-lib)", state,
				op, name);
	if (strcmp(mine, name) != 0)
		return sfs__err(SFS_EUSAGE, "state '%s': merge operator %u is '%s' in the segment "
				"but '%s' in this process", state, op, name, mine);
	return 0;
}

int sfs_merge_load(const char *path)
{
	void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	int (*init)(void);
	int rc;

	if (!so)
		return sfs__err(SFS_EUSAGE, "merge library %s: %s", path, dlerror());
	*(void **)&init = dlsym(so, "sfs_merge_init");
	if (!init) {
		rc = sfs__err(SFS_EUSAGE, "merge library %s: no sfs_merge_init: %s", path,
			      dlerror());
		dlclose(so);
		return rc;
	}
	/* On failure the object stays loaded: entries it defined before the
	 * failure point into it. */
	if ((rc = init())) {
		char why[256];

		snprintf(why, sizeof(why), "%s", sfs_last_error());	/* the buffer we write */
		return sfs__err(rc < 0 ? rc : SFS_EUSAGE, "merge library %s: sfs_merge_init "
				"failed: %s", path, why);
	}
	return 0;
}

int64_t sfs_merge_fold(unsigned op, int64_t acc, int64_t delta)
{
	return sfs_merge_i64(op, acc, delta);
}
