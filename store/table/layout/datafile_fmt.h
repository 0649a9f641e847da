/*
 * datafile_fmt.h — what the data file's writer (datafile_write.c) and
 * reader (datafile_read.c) share: the on-disk structures, the in-place
 * integer loads, the filter hash and the split-block bloom filter's
 * block choice (format and API: datafile.h).  Private to those two files.
 *
 *
 * The filter hash (df_hash, of both filters) is part of the format: a
 * pinned copy of the wyhash-structured hash of common/hash.h, so that a
 */
#ifndef SFS_STORE_TABLE_LAYOUT_DATAFILE_FMT_H
#define SFS_STORE_TABLE_LAYOUT_DATAFILE_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/table/layout/datafile.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "datafile: little-endian hosts only");

typedef unsigned long long ull;

#define DF_MAGIC "SFSDATA"            /* 8 bytes with its NUL */
#define DF_HDR 32u
#define DF_TRAILER 32u
#define DF_PAGE_BYTES_MAX (64u << 20)
/* The largest raw page a writer can make, so the most a reader will
 * allocate for one: a key page of 2-byte keys (5 B of kind and offset
 * each) up to the target plus one key, or a value page up to the target
 * plus one value. */
#define DF_PAGE_MAX (SFS_DF_VALUE_MAX + 4u * DF_PAGE_BYTES_MAX)

struct df_header {
	char h_magic[8];
	uint32_t h_version;
	uint32_t h_codec;        /* the file's codec (pages may still be raw) */
	uint32_t h_reserved[3];
	uint32_t h_crc;          /* crc32c of the 28 bytes before it */
};

struct df_stats {
	uint64_t s_rows, s_puts, s_deletes, s_merges;
	uint64_t s_filter_off;
	uint32_t s_kpages, s_vpages;
	uint32_t s_filter_len;   /* 32 * s_filter_blocks */
	uint32_t s_filter_crc;
	uint32_t s_filter_blocks;
	uint32_t s_keys_len;     /* bytes of the key area */
	uint32_t s_codec;
	uint16_t s_kg_lo, s_kg_hi;
	/* version 2: the prefix filter, right after the key filter (0: none) */
	uint32_t s_pfx_rule;
	uint32_t s_pfx_blocks;
	uint32_t s_pfx_crc;
	uint32_t s_reserved[3];
};

/* A key page.  min/max are (offset, length) in the footer's key area. */
struct df_kpe {
	uint64_t k_off, k_first_row;
	uint32_t k_stored, k_raw, k_rows, k_crc;
	uint32_t k_min_off, k_min_len, k_max_off, k_max_len;
	uint32_t k_codec, k_pad;
};

struct df_vpe {
	uint64_t v_off, v_first_row;
	uint32_t v_stored, v_raw, v_rows, v_crc;
	uint32_t v_codec, v_pad;
};

struct df_trailer {
	uint64_t t_footer_off;
	uint32_t t_footer_len;   /* stats + entries + key area, up to the trailer */
	uint32_t t_version;
	uint32_t t_flags;
	uint32_t t_crc;          /* crc32c of the footer and the 20 bytes before it */
	char t_magic[8];
};

_Static_assert(sizeof(struct df_header) == DF_HDR, "header layout");
_Static_assert(sizeof(struct df_stats) == 96, "stats layout");
_Static_assert(sizeof(struct df_kpe) == 56, "key page entry layout");
_Static_assert(sizeof(struct df_vpe) == 40, "value page entry layout");
_Static_assert(sizeof(struct df_trailer) == DF_TRAILER, "trailer layout");

static inline uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint32_t be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

/* ---- the filter hash and the split-block bloom filter ------------------------------------ */

#define DF_P0 0xa0761d6478bd642full
#define DF_P1 0xe7037ed1a0b428dbull
#define DF_P2 0x8ebc6af09c88c6e3ull

static inline uint64_t df_mum(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Part of the format (see the top).  ~2 multiplies per 16 key bytes. */
static inline uint64_t df_hash(const void *key, size_t n)
{
	const uint8_t *p = key;
	uint64_t seed = df_mum(DF_P0, (uint64_t)n ^ DF_P2), a, b;

	if (n <= 16) {
		if (n >= 4) {
			size_t m = (n >> 3) << 2;

			a = (uint64_t)ld32(p) << 32 | ld32(p + m);
			b = (uint64_t)ld32(p + n - 4) << 32 | ld32(p + n - 4 - m);
		} else if (n > 0) {
			a = (uint64_t)p[0] << 16 | (uint64_t)p[n >> 1] << 8 | p[n - 1];
			b = 0;
		} else {
			a = b = 0;
		}
	} else {
		size_t i = n;

		while (i > 16) {
			seed = df_mum(ld64(p) ^ DF_P1, ld64(p + 8) ^ seed);
			p += 16;
			i -= 16;
		}
		a = ld64(p + i - 16);
		b = ld64(p + i - 8);
	}
	return df_mum(DF_P1 ^ n, df_mum(a ^ DF_P1, b ^ seed));
}

/* Parquet's split-block bloom filter: the high half of the hash picks a
 * 32-byte block, the low half sets one bit in each of its 8 words. */
static const uint32_t sbbf_salt[8] = { 0x47b6137bu, 0x44974d91u, 0x8824ad5bu, 0xa2b7289du,
				       0x705495c7u, 0x2df1424bu, 0x9efc4947u, 0x5c6bfb31u };

static inline uint8_t *sbbf_block(uint8_t *f, uint32_t nblocks, uint64_t h)
{
	return f + 32 * (((h >> 32) * nblocks) >> 32);
}

/* The one bit of word @i of its block that the key of hash @h sets. */
static inline uint32_t sbbf_bit(uint64_t h, int i)
{
	return 1u << (((uint32_t)h * sbbf_salt[i]) >> 27);
}

#endif
