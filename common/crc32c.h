/*
 * crc32c.h — crc32c (Castagnoli), the checksum of every sfs file format:
 * checkpoint files and metadata (checkpointer/ckstore.c, metadata.c) and
 * the table store's data files (store/table/layout/datafile_{write,read}.c).  It moved
 * here from ckstore.c unchanged, so both formats share one implementation (ckstore keeps its
 * sfs__ck_crc32c name as a wrapper).
 */
#ifndef SFS_COMMON_CRC32C_H
#define SFS_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c of @n bytes, continuing @crc (0 to start): ISA-L's folding
 * implementation (crc32c.c says why).  Thread-safe. */
uint32_t sfs_crc32c(uint32_t crc, const void *p, size_t n);

/* A byte table, to test the library's answers against. */
uint32_t sfs__crc32c_table(uint32_t crc, const void *p, size_t n);

#endif
