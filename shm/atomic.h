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

#ifdef __SANITIZE_THREAD__
/*
 * ThreadSanitizer sees neither liburcu's inline-assembly atomics nor the
 * plain loads and stores behind CMM_LOAD_SHARED and its fences: under
 * -fsanitize=thread the same orders go through GCC's __atomic builtins,
 * which it models (on x86 they are the same instructions).  Only TSan
 * builds take this branch (make tsan).
 */
#undef uatomic_read
#undef uatomic_set
#undef uatomic_add
#undef uatomic_add_return
#undef uatomic_inc
#undef uatomic_dec
#undef uatomic_xchg
#undef uatomic_cmpxchg
#define uatomic_read(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define uatomic_set(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define uatomic_add_return(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define uatomic_add(p, v) ((void)__atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST))
#define uatomic_inc(p) uatomic_add((p), 1)
#define uatomic_dec(p) uatomic_add((p), -1)
#define uatomic_xchg(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#define uatomic_cmpxchg(p, o, n) __sync_val_compare_and_swap((p), (o), (n))
#undef sfs_load_acquire
#undef sfs_store_release
#undef sfs_load_relaxed
#undef sfs_store_relaxed
#define sfs_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define sfs_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define sfs_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define sfs_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#endif

#endif
