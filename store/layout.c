/*
 * layout.c — the list of layout-fingerprint parts above shm/ (shm/layout.h):
 * every module with structs in the segment, each by its own fingerprint
 * function.  shm/ hashes the list and knows none of the modules; this file
 * sits at the top of the store layer, above worker/ and every engine, so
 * it may name them all.  Why one list and not constructors: shm/layout.h.
 *
 * Add a line here for a new module with a struct in the segment.  The
 * order is the fold order: changing it changes the fingerprint (as any
 * layout change does: builds that differ refuse each other's segments).
 */
#include <stddef.h>

#include "shm/layout.h"
#include "store/memory/memory.h"
#include "store/rocksdb/rocksdb.h"
#include "worker/joinbatch.h"
#include "worker/vcache.h"
#include "worker/wbuf.h"
#include "worker/wctl.h"

const struct sfs_layout_part sfs_layout_parts[] = {
	{ "wbuf", sfs_wbuf_layout },       /* worker/wbuf.h: write buffers */
	{ "wctl", sfs_wctl_layout },       /* worker/wctl.h: a worker's control block */
	{ "mstore", sfs_mstore_layout },   /* store/memory/memory.h: the memory target */
	{ "rdbt", sfs_rdbt_layout },       /* store/rocksdb/rocksdb.h: its published state */
	{ "vcache", sfs_vcache_layout },   /* worker/vcache.h: a worker's value cache */
	{ "joinbatch", sfs_jb_layout },    /* worker/joinbatch.h: join batches */
	{ NULL, NULL },
};
