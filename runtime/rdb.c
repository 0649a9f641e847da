/*
 * rdb.c — the runtime's RocksDB glue (rdb.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sfs.h"
#include "runtime/rdb.h"
#include "runtime/util.h"

int rt_rdb_err(const char *who, const char *path, char **err, const char *op)
{
	const char *m = *err;
	int code;

	if (!m)
		return 0;
	if (strncmp(m, "Corruption", 10) == 0)
		code = SFS_ECORRUPT;
	else if (strncmp(m, "Invalid argument", 16) == 0)
		code = SFS_EUSAGE;
	else if (strncmp(m, "Operation timed out", 19) == 0)
		code = SFS_ETIMEDOUT;
	else if (strstr(m, "/LOCK") && (strstr(m, "lock hold by current process") ||
					 strstr(m, "Resource temporarily unavailable")))
		code = SFS_ERUNNING;
	else if (strstr(m, "No space left"))
		code = -ENOSPC;
	else
		code = -EIO;
	code = rt_err(code, "%s %s: %s: %s", who, path, op, m);
	rocksdb_free(*err);
	*err = NULL;
	return code;
}

/* A merge operator's state: the built-in operator and the name RocksDB
 * records in the instance's OPTIONS ("sfs.i64.<name>", the names sfs's own
 * rocksdb target gives the built-ins: instances stay readable by both). */
struct i64_op {
	unsigned op;
	char name[32];
};

static char *i64_full(void *st, const char *key, size_t klen, const char *existing, size_t elen,
		      const char *const *ops, const size_t *oplen, int nops,
		      unsigned char *success, size_t *newlen)
{
	unsigned op = ((const struct i64_op *)st)->op;
	int64_t acc = 0, d;
	int have = 0;
	char *out;

	*success = 0;
	*newlen = 0;
	if (existing) {
		if (elen != 8)
			return NULL;
		memcpy(&acc, existing, 8);
		have = 1;
	}
	for (int i = 0; i < nops; i++) {
		if (oplen[i] != 8)
			return NULL;
		memcpy(&d, ops[i], 8);
		acc = have ? sfs_merge_fold(op, acc, d) : d;
		have = 1;
	}
	out = malloc(8);
	if (!out)
		return NULL;
	memcpy(out, &acc, 8);
	*newlen = 8;
	*success = 1;
	return out;
}

static char *i64_partial(void *st, const char *key, size_t klen, const char *const *ops,
			 const size_t *oplen, int nops, unsigned char *success, size_t *newlen)
{
	return i64_full(st, key, klen, NULL, 0, ops, oplen, nops, success, newlen);
}

static void i64_free(void *st, const char *value, size_t len)
{
	free((void *)value);
}

static void i64_destroy(void *st)
{
	free(st);
}

static const char *i64_name(void *st)
{
	return ((const struct i64_op *)st)->name;
}

rocksdb_mergeoperator_t *rt_rdb_i64_merge(unsigned op)
{
	static const char *const names[SFS_MERGE_NOPS] = {
		[SFS_MERGE_ADD] = "add", [SFS_MERGE_MAX] = "max", [SFS_MERGE_MIN] = "min",
	};
	struct i64_op *m;

	if (op >= SFS_MERGE_NOPS || !(m = malloc(sizeof(*m))))
		return NULL;
	m->op = op;
	snprintf(m->name, sizeof(m->name), "sfs.i64.%s", names[op]);
	return rocksdb_mergeoperator_create(m, i64_destroy, i64_full, i64_partial, i64_free,
					    i64_name);
}

int rt_rdb_copy_kg_range(rocksdb_t *in, rocksdb_column_family_handle_t *hin, rocksdb_t *out,
			 rocksdb_column_family_handle_t *hout, const rocksdb_writeoptions_t *wo,
			 uint32_t kg_lo, uint32_t kg_hi, const char *who, const char *path)
{
	char lo[2] = { (char)(kg_lo >> 8), (char)kg_lo };
	char hi[2] = { (char)((kg_hi + 1) >> 8), (char)(kg_hi + 1) };
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	rocksdb_iterator_t *it;
	char *err = NULL;
	int rc = 0;

	rocksdb_readoptions_set_total_order_seek(ro, 1);
	if (kg_hi < 0xffff)	/* key group 0xffff is the last: no bound */
		rocksdb_readoptions_set_iterate_upper_bound(ro, hi, 2);
	it = rocksdb_create_iterator_cf(in, ro, hin);
	for (rocksdb_iter_seek(it, lo, 2); rc == 0 && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl, bytes;
		const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);

		rocksdb_writebatch_put_cf(wb, hout, k, kl, v, vl);
		if (rocksdb_writebatch_data(wb, &bytes) && bytes >= (4u << 20)) {
			rocksdb_write(out, wo, wb, &err);
			rocksdb_writebatch_clear(wb);
			rc = rt_rdb_err(who, path, &err, "write");
		}
	}
	if (rc == 0) {
		rocksdb_write(out, wo, wb, &err);
		rc = rt_rdb_err(who, path, &err, "write");
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	rocksdb_writebatch_destroy(wb);
	return rc;
}

int rt_rdb_checkpoint(rocksdb_t *db, const char *dir, const char *shared, const char *who,
		      const char *path)
{
	char sub[PATH_MAX], from[PATH_MAX + 256], to[2 * PATH_MAX];
	rocksdb_checkpoint_t *cp;
	char *err = NULL;
	struct dirent *e;
	DIR *d;
	int rc;

	cp = rocksdb_checkpoint_object_create(db, &err);
	if ((rc = rt_rdb_err(who, path, &err, "checkpoint object")))
		return rc;
	err = NULL;
	rocksdb_checkpoint_create(cp, dir, 0, &err);	/* 0: always flush first */
	rocksdb_checkpoint_object_destroy(cp);
	if ((rc = rt_rdb_err(who, dir, &err, "checkpoint")))
		return rc;
	/* RocksDB makes the checkpoint directory 0755: the staged state is
	 * private like the instance (one chmod per checkpoint). */
	if (chmod(dir, 0700))
		return rt_err(rt_errno(), "%s %s: chmod: %s", who, dir, strerror(errno));
	snprintf(sub, sizeof(sub), "%s/%s", dir, shared);
	if (mkdir(sub, 0700) && errno != EEXIST)
		return rt_err(rt_errno(), "%s %s: mkdir: %s", who, sub, strerror(errno));
	if (!(d = opendir(dir)))
		return rt_err(rt_errno(), "%s %s: %s", who, dir, strerror(errno));
	while (!rc && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n <= 4 || strcmp(e->d_name + n - 4, ".sst") != 0)
			continue;
		snprintf(from, sizeof(from), "%s/%s", dir, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", sub, e->d_name);
		if (rename(from, to))
			rc = rt_err(rt_errno(), "%s: rename %s to %s: %s", who, from, to,
				    strerror(errno));
	}
	closedir(d);
	return rc;
}
