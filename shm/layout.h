/*
 * layout.h — the layout fingerprint's parts: how the modules above shm/
 * that keep structs in the segment get them into its fingerprint without
 * shm/ including them (shm/layout.c hashes; it knows none of them).
 *
 * One explicit list, not registration by constructors.  Every binary — sfs,
 * sfs-worker, sfs-compactor, sfs-checkpointer, the tests, the benches, a
 * user's program linking libsfs.a — must compute the SAME fingerprint, or
 * processes of one build refuse each other's segments.  A constructor in a
 * static library runs only when the linker pulled its object for some other
 * reason, so the set of parts (and the fingerprint) would depend on which
 * objects a binary happens to use.  Instead the list sfs_layout_parts is
 * one array in one file at the top of the store layer (store/layout.c),
 * referenced by sfs_layout_fingerprint(), which segment create and attach
 * call: any binary that can map a segment links the whole list, and a
 * binary without it does not link (no weak default that would silently
 * hash nothing).  The cost: a new shared struct above shm/ is one line in
 * that list as well as its module's own fingerprint function.
 */
#ifndef SFS_SHM_LAYOUT_H
#define SFS_SHM_LAYOUT_H

#include <stdint.h>

/* One module's shared structs: @fp returns its layout fingerprint (sizes
 * and offsets, common/fingerprint.h), which its own attach checks too. */
struct sfs_layout_part {
	const char *name;          /* the module's, for tests and messages */
	uint64_t (*fp)(void);
};

/* Every part above shm/, in the order they are folded, ended by an entry
 * with fp == NULL.  Defined in store/layout.c, the one list. */
extern const struct sfs_layout_part sfs_layout_parts[];

/* The fingerprint over shm/'s own structs, then @parts in order (ended by
 * fp == NULL).  sfs_layout_fingerprint() (shm/segment.h) is this over
 * sfs_layout_parts; tests pass other lists to see each part counted.
 * O(fields + parts), no allocation. */
uint64_t sfs_layout_fingerprint_of(const struct sfs_layout_part *parts);

#endif
