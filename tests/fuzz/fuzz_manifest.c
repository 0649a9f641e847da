/*
 * fuzz_manifest.c — libFuzzer target for the table metadata readers
 * (store/table/layout/manifest.c): the input, less its first byte, is written into a
 * temp table directory as snapshot-<id> (id taken from where a snapshot
 * record keeps it, so the record's id check can pass) and as LATEST, then
 * read as a snapshot, a manifest list, a manifest and the LATEST hint —
 * each parser refuses the other kinds at the magic, so every input feeds
 * all of them.  The first byte picks the mode: odd = reseal the frame
 * checksum first (sfs__mf_reseal), so mutations reach the record parsers;
 * even = the raw bytes (the frame checks themselves).  A crash, leak or
 * sanitizer report is a bug, and so is a success that hands back a bad
 * name (abort()); an error return is the expected answer to a bad file.
 * The directory is on tmpfs (/dev/shm): creating files on a disk file
 * system costs ~10x the parsing.
 *
 *   make fuzz     (with the data-file and deletion-vector targets)
 *
 * Seeds: tests/fuzz/seed_manifest.c writes every file of a small table.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/table/layout/manifest.h"

static char dir[64];

static void rm_dir(void) { rmdir(dir); }

static int spit(const char *name, const uint8_t *p, size_t n)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "wb")))
		return -1;
	fwrite(p, 1, n, f);
	return fclose(f);
}

static void unlink_in(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* Touch every byte an entry hands out: the sanitizers see a bad pointer. */
static int touch(const struct sfs_mf_entry *e, void *arg)
{
	volatile uint8_t sink = 0;

	if (!sfs__layout_name_ok(e->file))
		abort();
	for (size_t i = 0; i < e->min_klen; i++)
		sink ^= ((const uint8_t *)e->min_key)[i];
	for (size_t i = 0; i < e->max_klen; i++)
		sink ^= ((const uint8_t *)e->max_key)[i];
	(void)sink;
	++*(size_t *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_mf_snapshot s;
	struct sfs_mf_list_item *it;
	char snap[32];
	uint64_t id = 1, latest;
	uint8_t *img;
	size_t n, seen = 0;

	if (!size)
		return 0;
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/dev/shm/sfs-fuzz-mf-%d", (int)getpid());
		if (mkdir(dir, 0700))
			abort();
		atexit(rm_dir);
	}
	if (!(img = malloc(size)))
		return 0;
	memcpy(img, data + 1, size - 1);
	if (data[0] & 1)
		sfs__mf_reseal(img, size - 1);
	if (size - 1 >= 24)
		memcpy(&id, img + 16, 8);   /* the snapshot record's id */
	snprintf(snap, sizeof(snap), "snapshot-%llu", (unsigned long long)id);
	if (spit(snap, img, size - 1) || spit("LATEST", img, size - 1)) {
		free(img);
		return 0;
	}
	free(img);

	if (sfs_mf_snapshot_read(dir, id, &s) == 0 &&
	    (!sfs__layout_name_ok(s.base_list) || !sfs__layout_name_ok(s.delta_list) ||
	     (s.dv_index[0] && !sfs__layout_name_ok(s.dv_index)) || s.id != id))
		abort();
	if (sfs_mf_list_read(dir, snap, &it, &n) == 0) {
		for (size_t i = 0; i < n; i++)
			if (!sfs__layout_name_ok(it[i].name))
				abort();
		free(it);
	}
	if (sfs_mf_manifest_read(dir, snap, touch, &seen) == 0 && seen > (size - 1) / 32)
		abort();   /* more entries than the file can hold */
	sfs_mf_latest(dir, &latest);
	unlink_in(snap);
	unlink_in("LATEST");
	return 0;
}
