/*
 * crc32c.c — crc32c (crc32c.h): Intel's ISA-L (libisal), and a byte table
 * to test it against.
 *
 * Why a library: every data file page is checksummed when the compactor
 * writes it and again when a merge or a reader decodes it, and the
 * checkpointer checksums every file it links; a q20 run at 20M events
 * spent 5.6 % of the compactor's CPU in the one-instruction-per-8-bytes
 * loop this file had (its latency bound: ~9 GB/s on 4 KiB pages here).
 * ISA-L folds with carry-less multiplies over independent streams: ~47
 * GB/s on 4 KiB pages, 66 GB/s on 64 KiB (measured on this machine), and
 * dispatches on the CPU itself.  ISA-L's crc32_iscsi neither inverts its
 * input nor its output, so sfs_crc32c(crc, p, n) = ~crc32_iscsi(p, n, ~crc),
 * in pieces of at most INT_MAX bytes (its length is an int).
 *
 * ISA-L's AVX-512 routine returns with the upper halves of the vector
 * registers dirty (no vzeroupper).  Until the next vzeroupper, every
 * legacy-SSE instruction of the process then waits on a merge with those
 * upper bits: libm's pow in the Nexmark generator ran 14x slower in a loop
 * after one checksum, and Debian's liblz4, libzstd and our own -O2 code are
 * all SSE-encoded.  So each call ends with a vzeroupper (about a cycle)
 * where the CPU has AVX (crc32c_avx, set once at load).
 */
#include <isa-l/crc.h>
#include <limits.h>
#include <pthread.h>

#include "common/crc32c.h"

static uint32_t crc_tab[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc32c_avx;

__attribute__((constructor)) static void crc32c_cpu(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_avx = __builtin_cpu_supports("avx");
#endif
}

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[i] = c;
	}
}

uint32_t sfs__crc32c_table(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (n--)
		crc = crc_tab[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint32_t sfs_crc32c(uint32_t crc, const void *p, size_t n)
{
	unsigned char *b = (unsigned char *)(uintptr_t)p;	/* ISA-L only reads it */

	crc = ~crc;
	while (n) {
		int k = n > INT_MAX ? INT_MAX : (int)n;

		crc = crc32_iscsi(b, k, crc);
		b += k;
		n -= (size_t)k;
	}
#if defined(__x86_64__)
	if (crc32c_avx)
		__asm__ volatile("vzeroupper" ::: "memory");
#endif
	return ~crc;
}
