/*
 * seed_memdump.c — writes fuzz_memdump's seed corpus into DIR: the empty
 * dump of the writer (sfs_mdump_write of no store), and dumps laid out as
 * the writer lays them out (memdump_fmt.h) with values, counters and map
 * entries, since a non-empty dump needs a running memory store.  Each is
 * checked with sfs_mdump_read before it is kept, and prefixed with the
 * target's mode byte (once raw, once "reseal").
 *
 *   seed_memdump DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hash.h"
#include "store/memory/memdump.h"
#include "sfs.h"
#include "tests/fuzz/seed.h"

struct rec {
	uint8_t kind;
	uint8_t pad[3];
	uint32_t klen, vlen, pad2;
	uint64_t ns;
};

static int count(void *arg, const struct sfs_mdump_rec *r)
{
	(void)r;
	++*(uint64_t *)arg;
	return 0;
}

/* @n records: values and counters ('V'), and (@maps) a parent key with
 * map entries ('E': the parent key, a length-prefixed map key). */
static int hand(const char *path, int nrec, int maps)
{
	FILE *f = fopen(path, "wb");
	uint32_t hw[2] = { 3, 0 };
	uint64_t n = 0, h = SFS_HASH_P0;

	if (!f)
		return -1;
	fwrite("SFSMDMP1", 1, 8, f);
	fwrite(hw, sizeof(hw), 1, f);
	for (int i = 0; i < nrec; i++) {
		unsigned char key[64], val[64];
		struct rec r;

		memset(&r, 0, sizeof(r));
		r.ns = (uint64_t)i * 1000;
		/* kg (2 bytes, big-endian) | state id (2 bytes) | rest */
		key[0] = 0;
		key[1] = (unsigned char)(i % 7);
		key[2] = 0;
		key[3] = (unsigned char)(1 + (maps && i % 2));
		if (maps && i % 2) {
			/* a map entry: parent = prefix | user key length (2 B,
			 * big-endian) | user key, then the entry's own key */
			r.kind = 'E';
			key[4] = 0;
			key[5] = 1;
			key[6] = (unsigned char)('0' + i % 10);
			key[7] = 'm';
			key[8] = (unsigned char)('a' + i % 26);
			r.klen = 9;
		} else {
			r.kind = 'V';
			r.klen = 4 + (uint32_t)snprintf((char *)key + 4, 60, "key%d", i);
		}
		r.vlen = (uint32_t)snprintf((char *)val, sizeof(val), "value %d", i * 31);
		fwrite(&r, sizeof(r), 1, f);
		fwrite(key, 1, r.klen, f);
		fwrite(val, 1, r.vlen, f);
		h = sfs_hash_bytes(h, &r, sizeof(r));
		h = sfs_hash_bytes(h, key, r.klen);
		h = sfs_hash_bytes(h, val, r.vlen);
		n++;
	}
	fwrite("SFSMEND1", 1, 8, f);
	fwrite(&n, sizeof(n), 1, f);
	fwrite(&h, sizeof(h), 1, f);
	return fclose(f) ? -1 : 0;
}

static int keep(const char *dir, const char *path, int n)
{
	uint64_t seen = 0, recs = 0;
	FILE *f;

	if (sfs_mdump_read(path, count, &seen, &recs) || !(f = fopen(path, "rb")))
		return -1;
	return seed_write_moded(f, path, dir, n);
}

int main(int argc, char **argv)
{
	static const int sets[][2] = { { 1, 0 }, { 5, 0 }, { 8, 1 }, { 40, 1 } };
	char path[600];
	uint64_t recs;

	if (argc != 2) {
		fprintf(stderr, "usage: seed_memdump DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/.seed.dump", argv[1]);
	if (sfs_mdump_write(NULL, 0, path, &recs) || keep(argv[1], path, 0)) {
		fprintf(stderr, "seed_memdump: %s\n", sfs_last_error());
		return 1;
	}
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++)
		if (hand(path, sets[i][0], sets[i][1]) || keep(argv[1], path, (int)i + 1)) {
			fprintf(stderr, "seed_memdump: set %zu: %s\n", i, sfs_last_error());
			return 1;
		}
	return 0;
}
