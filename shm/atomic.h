/*
 * atomic.h — the memory-ordering vocabulary of sfs's shared structs, built on
 * liburcu's uatomic/cmm primitives (header-only under _LGPL_SOURCE; they work
 * in shared memory because they are plain instructions on the address).
 *
 * liburcu 0.13 has no acquire/release loads and stores by name, so they are
 * spelled here once: on x86-64 both are a compiler barrier plus a plain
 * access (TSO), elsewhere cmm_smp_{r,w}mb emits the fence.
 */
#ifndef SFS_SHM_ATOMIC_H
#define SFS_SHM_ATOMIC_H

#include <urcu/arch.h>
#include <urcu/compiler.h>
#include <urcu/system.h>
#include <urcu/uatomic.h>

#define SFS_CACHE_LINE 64
#define __sfs_cache_aligned __attribute__((aligned(SFS_CACHE_LINE)))

/* Load that orders every later access after it (pairs with store_release). */
#define sfs_load_acquire(p)                                                    \
	__extension__({                                                        \
		__typeof__(*(p)) _v = CMM_LOAD_SHARED(*(p));                   \
		cmm_smp_rmb();                                                 \
		cmm_barrier();                                                 \
		_v;                                                            \
	})

/* Store that publishes every earlier access before it. */
#define sfs_store_release(p, v)                                                \
	do {                                                                   \
		cmm_barrier();                                                 \
		cmm_smp_wmb();                                                 \
		CMM_STORE_SHARED(*(p), (v));                                   \
	} while (0)

/* Relaxed accesses: single-copy atomic, no ordering. */
#define sfs_load_relaxed(p) CMM_LOAD_SHARED(*(p))
#define sfs_store_relaxed(p, v) CMM_STORE_SHARED(*(p), (v))

#endif
