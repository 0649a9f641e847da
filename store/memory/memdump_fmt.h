/*
 * memdump_fmt.h — the dump file's layout, shared by its writer (memdump.c)
 * and its reader (memdump_read.c); internal to those two.
 *
 * Little-endian: "SFSMDMP1" u32 worker u32 0, then records (struct
 * rec_hdr, key bytes, value bytes), then "SFSMEND1" u64 records u64 hash
 * (sfs_hash_bytes chained over every record's header, key and value).
 */
#ifndef SFS_STORE_MEMORY_MEMDUMP_FMT_H
#define SFS_STORE_MEMORY_MEMDUMP_FMT_H
#include <stdint.h>

static const char MAGIC[8] = "SFSMDMP1", END[8] = "SFSMEND1";

struct rec_hdr {
	uint8_t kind;           /* 'V' value or counter, 'E' map or list entry */
	uint8_t pad[3];
	uint32_t klen, vlen, pad2;
	uint64_t ns;
};

#endif
