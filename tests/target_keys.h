/*
 * target_keys.h — keys and views as a worker's buffers hold them, for the
 * tests that drive a flush target directly through its ops
 * (test_target_rocksdb.c, test_target_table.c): a value key kg | state |
 * key, a map parent kg | state | klen | key, a counter delta's view.
 */
#ifndef SFS_TESTS_TARGET_KEYS_H
#define SFS_TESTS_TARGET_KEYS_H

#include <stdint.h>
#include <string.h>

#include "common/keygroup.h"
#include "sfs.h"
#include "worker/wbuf.h"

static inline uint32_t vkey(unsigned char *out, uint32_t sid, const char *k)
{
	size_t n = strlen(k);

	sfs_key_prefix(out, sfs_key_group(k, n, SFS_MAX_PARALLELISM_DEFAULT), sid);
	memcpy(out + SFS_KEY_PREFIX, k, n);
	return (uint32_t)(SFS_KEY_PREFIX + n);
}

static inline uint32_t pkey(unsigned char *out, uint32_t sid, const char *k)
{
	size_t n = strlen(k);

	sfs_key_prefix(out, sfs_key_group(k, n, SFS_MAX_PARALLELISM_DEFAULT), sid);
	out[4] = (unsigned char)(n >> 8);
	out[5] = (unsigned char)n;
	memcpy(out + SFS_MAP_PREFIX, k, n);
	return (uint32_t)(SFS_MAP_PREFIX + n);
}

/* A counter delta @d of key @k in state @sid, as the flush hands it over. */
struct mview {
	unsigned char key[32];
	int64_t d;
};

static inline void merge_view(struct sfs_wbuf_view *v, struct mview *m, uint32_t sid,
			      const char *k, int64_t d)
{
	m->d = d;
	*v = (struct sfs_wbuf_view){ .value = &m->d, .key = m->key, .len = 8,
				     .klen = vkey(m->key, sid, k), .kind = SFS_WBUF_MERGE };
}

#endif
