/*
 * merge.h — the merge operators of counter/aggregate state, by index.
 *
 * A state registers its operator's index at start-up (sd_merge in the
 * segment's registry), and for a user operator its name (sd_merge_name);
 * every process — worker, compactor, checkpointer, supervisor — maps the
 * index to code of its own: the built-ins compiled into libsfs, the user's
 * defined by sfs_merge_define() (include/sfs.h), usually from the shared
 * object `--merge-lib` names (sfs_merge_load).  No function pointer ever
 * reaches shared memory.  Each operator is associative and commutative on
 * int64: deltas are folded in any grouping (inside a buffer's cell, across
 * buffers, over the store's base, in RocksDB merges).
 *
 * Where the check happens.  Folding is the hot path (a buffer cell per
 * counter add), so sfs_merge_i64() never validates: a process checks a
 * state's operator where it looks the state up — the worker when it
 * registers it (its reads fold only registered states), the compactor
 * before each buffer it flushes (sfs_merge_check_states, worker/state.h:
 * the segment's state registry is the worker's; O(states)), the
 * supervisor when it restores a checkpoint's registry.  An index that
 * slipped past them aborts in sfs__merge_undefined instead of folding as
 * something else.
 */
#ifndef SFS_COMMON_MERGE_H
#define SFS_COMMON_MERGE_H

#include <stdint.h>

#include "sfs.h"

/* This process's operators by index (merge.c): written by sfs_merge_define
 * at start-up, read-only afterwards.  Every entry not defined, and entry
 * SFS_MERGE_NOPS always, holds sfs__merge_undefined. */
extern sfs_merge_fn sfs__merge_fns[SFS_MERGE_MAX_OPS];
int64_t sfs__merge_undefined(int64_t acc, int64_t delta) __attribute__((noreturn));

/* Fold @b into @a with operator @op.  Built-ins inline; a user operator is
 * one indirect call through the table (an index out of range lands on the
 * always-undefined entry SFS_MERGE_NOPS). */
static inline int64_t sfs_merge_i64(unsigned op, int64_t a, int64_t b)
{
	switch (op) {
	case SFS_MERGE_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);	/* add wraps */
	case SFS_MERGE_MAX: return a > b ? a : b;
	case SFS_MERGE_MIN: return a < b ? a : b;
	default: return sfs__merge_fns[op < SFS_MERGE_MAX_OPS ? op : SFS_MERGE_NOPS](a, b);
	}
}

/* The name of @op in this process ("add", "max", "min" or the user's), or
 * NULL when it folds nothing here.  sfs_merge_valid: the one validity rule
 * of an operator index (a built-in, or a user index defined here). */
const char *sfs_merge_name(unsigned op);
static inline int sfs_merge_valid(unsigned op)
{
	return sfs_merge_name(op) != NULL;
}

/*
 * sfs_merge_check - may this process fold state @state, whose registry
 * entry says operator @op named @name ("" for a built-in)?  0, or
 * SFS_EUSAGE with a message naming the state, the index and both names
 * when @op is not valid here or is defined here under another name.
 */
int sfs_merge_check(unsigned op, const char *name, const char *state);

/*
 * sfs_merge_load - dlopen the shared object @path and call its
 * `int sfs_merge_init(void)`, which defines its operators with
 * sfs_merge_define().  Call before attaching.  Errors (SFS_EUSAGE, or what
 * sfs_merge_init returned) name @path and dlerror().  The object stays
 * loaded for the life of the process (the table points into it).
 */
int sfs_merge_load(const char *path);

#endif
