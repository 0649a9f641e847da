/*
 * seed_metadata.c — writes fuzz_metadata's seed corpus into DIR: the
 * `_metadata` of real checkpoints committed with sfs__ck_store_open /
 * sfs__ck_txn_begin / sfs__ck_txn_add_dir / sfs__ck_txn_commit in a scratch store (one
 * worker or three; private and shared files; sources of 0, 1 and 300
 * bytes; tables), and one format-1 file (splits) built by hand, as this
 * build no longer writes them.  Each is prefixed with the target's mode
 * byte (once raw, once "reseal").
 *
 *   seed_metadata DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpointer/ckstore.h"
#include "common/crc32c.h"
#include "store/target.h"
#include "sfs.h"

static int out(const char *dir, const char *name, const char *p, size_t n)
{
	char path[600];
	int rc = 0;

	for (int mode = 0; mode < 2 && !rc; mode++) {
		uint8_t m = (uint8_t)mode;
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s-%d", dir, name, mode);
		rc = !(f = fopen(path, "wb")) || fwrite(&m, 1, 1, f) != 1 ||
		     fwrite(p, 1, n, f) != n || fclose(f) ? -1 : 0;
	}
	return rc;
}

static int spit(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	return !f || fputs(s, f) < 0 || fclose(f) ? -1 : 0;
}

static int slurp(const char *path, char **buf, size_t *n)
{
	FILE *f = fopen(path, "rb");
	long sz;

	if (!f || fseek(f, 0, SEEK_END) || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(*buf = malloc((size_t)sz + 1)) || fread(*buf, 1, (size_t)sz, f) != (size_t)sz) {
		if (f)
			fclose(f);
		return -1;
	}
	*n = (size_t)sz;
	return fclose(f);
}

/* Checkpoint @id of @workers workers, each staging a private file and
 * (odd workers) a shared one; @slen source bytes per worker. */
static int one(const char *dir, const char *root, uint64_t id, uint32_t workers, uint32_t slen,
	       int k)
{
	char stage[512], p[600], name[32];
	struct ck_store *s;
	struct ck_txn *t;
	struct ck_meta m;
	struct ck_source src[3];
	struct ck_table tab[3];
	uint8_t bytes[300];
	char *buf;
	size_t n;
	int rc;

	for (uint32_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 37 + k);
	if ((rc = sfs__ck_store_open(root, "seedjob", 2, UINT64_MAX, &s)))
		return rc;
	if ((rc = sfs__ck_txn_begin(s, id, &t))) {
		sfs__ck_store_close(s);
		return rc;
	}
	for (uint32_t w = 0; w < workers && !rc; w++) {
		snprintf(stage, sizeof(stage), "%s/stage-%llu-%u", root, (unsigned long long)id, w);
		mkdir(stage, 0700);
		snprintf(p, sizeof(p), "%s/data-%u.bin", stage, w);
		rc = spit(p, "private bytes of a worker\n");
		if (!rc && (w & 1)) {
			snprintf(p, sizeof(p), "%s/" SFS_STAGE_SHARED, stage);
			mkdir(p, 0700);
			snprintf(p, sizeof(p), "%s/" SFS_STAGE_SHARED "/t1-%016llx.sst", stage,
				 (unsigned long long)id);
			rc = spit(p, "an immutable shared file\n");
		}
		if (!rc)
			rc = sfs__ck_txn_add_dir(t, w, stage);
		src[w] = (struct ck_source){ w, w == 0 ? 0 : w == 1 ? 1 : slen, bytes };
		tab[w] = (struct ck_table){ w, id * 10 + w };
	}
	if (rc) {
		sfs__ck_txn_abort(t);
		sfs__ck_store_close(s);
		return rc;
	}
	memset(&m, 0, sizeof(m));
	m.id = id;
	m.time_ms = 1700000000000ull + id;
	snprintf(m.job, sizeof(m.job), "seedjob");
	snprintf(m.config, sizeof(m.config), k ? "query=q5 backend=table workers=%u states=0.2.0.counts/1.1.0.v"
					       : "", workers);
	m.workers = workers;
	m.sink_epoch = id - 1;
	m.nsources = workers;
	m.sources = src;
	m.ntables = k ? workers : 0;
	m.tables = tab;
	rc = sfs__ck_txn_commit(t, &m, NULL);
	sfs__ck_store_close(s);
	if (rc)
		return rc;
	snprintf(p, sizeof(p), "%s/chk-%llu/_metadata", root, (unsigned long long)id);
	if (slurp(p, &buf, &n))
		return -1;
	snprintf(name, sizeof(name), "seed-%llu", (unsigned long long)id);
	rc = out(dir, name, buf, n);
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	static const char v1[] =
		"sfs-checkpoint 1\nid 7\ntime_ms 1\njob old\nworkers 2\nconfig query=q3\n"
		"sink_epoch 6\nsplits 2\nsplit 0 100\nsplit 1 0\ntables 1\ntable 1 5\nfiles 1\n"
		"file p chk-7/w0/a.bin 0 a.bin 3 0x12345678\ntotal_bytes 3\nnew_bytes 3\n";
	char root[] = "/tmp/sfs-seed-metadata-XXXXXX", cmd[128], v1buf[sizeof(v1) + 32];
	int rc = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: seed_metadata DIR\n");
		return 2;
	}
	if (!mkdtemp(root))
		return perror("mkdtemp"), 1;
	rc = one(argv[1], root, 1, 1, 0, 0) || one(argv[1], root, 2, 3, 300, 1) ||
	     one(argv[1], root, 3, 2, 5, 1);
	if (rc)
		fprintf(stderr, "seed_metadata: %s\n", sfs_last_error());
	snprintf(v1buf, sizeof(v1buf), "%scrc32c 0x%08x\n", v1, sfs__ck_crc32c(0, v1, sizeof(v1) - 1));
	if (!rc && out(argv[1], "seed-v1", v1buf, strlen(v1buf)))
		rc = 1;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd))
		rc = 1;
	return rc ? 1 : 0;
}
