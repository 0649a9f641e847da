/*
 * memdump.h — the memory target's checkpoint: a full dump of a worker's
 * store, and its load at a restore.
 *
 * The `memory` backend is the heap-backend baseline, so its checkpoint
 * serializes the whole state (Flink's heap backend does the same): every
 * live value and map entry as a (kind, namespace, key, value) record.  Map
 * heads are not written (a load recreates them) and hashes are recomputed
 * at load, so a dump does not depend on the store's layout or hash.
 *
 * File: "SFSMDMP1" u32 worker u32 0, then records { u8 kind ('V' value or
 * counter, 'E' map entry), u8 pad[3], u32 klen, u32 vlen, u32 pad, u64 ns,
 * key, value }, then "SFSMEND1" u64 records u64 hash (chained over the
 * records).  A file that is truncated or whose hash differs is refused by
 * name.
 */
#ifndef SFS_TARGET_MEMDUMP_H
#define SFS_TARGET_MEMDUMP_H

#include <stdint.h>

#include "target/memory.h"

/* Write @ms (worker @worker) to @path (tmp, fsync, rename). */
int sfs_mdump_write(const struct sfs_mstore *ms, uint32_t worker, const char *path,
		    uint64_t *records);

/*
 * Load the records of @path whose key group is in [@kg_lo, @kg_hi] into
 * the store as buffer 0 (tag 0: below every buffer of the new run).
 * Idempotent (the store's tags skip what a previous attempt loaded), so a
 * load cut short by a kill is simply done again.
 */
int sfs_mdump_load(struct sfs_mstore_writer *w, const char *path, uint32_t kg_lo,
		   uint32_t kg_hi, uint64_t *records);

#endif
