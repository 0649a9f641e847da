/*
 * rocksdb.c — the RocksDB baseline of `bench_state` (bs.h): librocksdb
 * through its C API, one call per operation, as Flink's RocksDB backend
 * uses it: memtable only (a write buffer bigger than the data, auto
 * compactions off; checked after each run), WAL off, in a temporary
 * directory removed afterwards.  Errors go through common/rdb.h's adapter,
 * counters through its add operator; map state is one row per entry, key |
 * user key (Flink's MapState layout).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/state/bs.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/merge.h"
#include "common/rdb.h"

/* Open a fresh DB whose single memtable holds @mem_bytes; @merge: with
 * counter state's add operator (common/rdb.h: 8-byte cells, add wraps as a
 * uint64 add does). */
static int rdb_open(struct rdb *r, uint64_t mem_bytes, int merge, uint32_t vs)
{
	const char *tmp = getenv("TMPDIR");
	const char *names[1] = { "default" };
	const rocksdb_options_t *cfo[1];
	rocksdb_column_family_handle_t *h[1];
	char *err = NULL;

	memset(r, 0, sizeof(*r));
	r->vs = vs;
	r->val = calloc(1, vs ? vs : 8);
	if (!r->val)
		return -ENOMEM;
	snprintf(r->dir, sizeof(r->dir), "%s/sfs-bench-rocksdb-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(r->dir))
		return sfs__err(sfs__errno(), "mkdtemp %s: %s", r->dir, strerror(errno));
	snprintf(bs_rdb_dir, sizeof(bs_rdb_dir), "%s", r->dir);
	r->o = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(r->o, 1);
	rocksdb_options_set_write_buffer_size(r->o, mem_bytes);
	rocksdb_options_set_max_write_buffer_number(r->o, 2);
	rocksdb_options_set_arena_block_size(r->o, MIB);
	rocksdb_options_set_disable_auto_compactions(r->o, 1);
	rocksdb_options_set_info_log_level(r->o, 3 /* ERROR */);
	if (merge) {
		rocksdb_mergeoperator_t *m = sfs_rdb_i64_merge(SFS_MERGE_ADD);

		if (!m)
			return -ENOMEM;
		rocksdb_options_set_merge_operator(r->o, m);
	}
	cfo[0] = r->o;
	r->db = rocksdb_open_column_families(r->o, r->dir, 1, names, cfo, h, &err);
	if (err || !r->db) {
		int rc = sfs_rdb_err("rocksdb", r->dir, &err, "open");

		return rc ? rc : sfs__err(-EIO, "rocksdb open %s: no handle", r->dir);
	}
	r->cf = h[0];
	r->wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(r->wo, 1);
	r->ro = rocksdb_readoptions_create();
	return 0;
}

/* rdb_open, its failure said on stderr (as bs_sfsb_open's). */
int bs_rdb_open(struct rdb *r, uint64_t mem_bytes, int merge, uint32_t vs)
{
	int rc = rdb_open(r, mem_bytes, merge, vs);

	return rc ? bs_fail("open rocksdb", rc) : 0;
}

uint64_t bs_rdb_prop(struct rdb *r, const char *name)
{
	char *v = rocksdb_property_value(r->db, name);
	uint64_t n = v ? strtoull(v, NULL, 10) : 0;

	rocksdb_free(v);
	return n;
}

/* Was every write still in the active memtable?  (The baseline's premise.) */
void bs_rdb_check(struct rdb *r, const char *what)
{
	uint64_t imm = bs_rdb_prop(r, "rocksdb.num-immutable-mem-table");
	uint64_t l0 = bs_rdb_prop(r, "rocksdb.num-files-at-level0");

	if (imm || l0) {
		fprintf(stderr,
			"bench_state: warning: rocksdb %s left the memtable (%llu immutable "
			"memtables, %llu L0 files): its figures include flushes\n",
			what, (unsigned long long)imm, (unsigned long long)l0);
		bs_rdb_spilled = 1;
	}
}

void bs_rdb_close(struct rdb *r)
{
	char *err = NULL;

	if (r->cf)
		rocksdb_column_family_handle_destroy(r->cf);
	if (r->db)
		rocksdb_close(r->db);
	if (r->o && r->dir[0]) {
		rocksdb_destroy_db(r->o, r->dir, &err);
		sfs_rdb_err("rocksdb", r->dir, &err, "destroy");
	}
	if (r->wo)
		rocksdb_writeoptions_destroy(r->wo);
	if (r->ro)
		rocksdb_readoptions_destroy(r->ro);
	if (r->o)
		rocksdb_options_destroy(r->o);
	if (r->dir[0])
		(void)sfs_rmtree(r->dir);	/* what destroy_db left (LOG files) */
	bs_rdb_dir[0] = '\0';
	free(r->val);
	memset(r, 0, sizeof(*r));
}

static int rdb_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	char *err = NULL;

	for (uint64_t i = 0; i < n; i++) {
		memcpy(r->val, &i, 8);
		err = NULL;
		rocksdb_put(r->db, r->wo, (const char *)keys + i * KLEN, KLEN, (const char *)r->val,
			    r->vs, &err);
		if (err)
			return sfs_rdb_err("rocksdb", r->dir, &err, "put");
	}
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, KLEN);
}

static int cmp_mkey(const void *a, const void *b)
{
	return memcmp(a, b, KLEN + ULEN);
}

/* Write the @n keys of @klen bytes at @k (KLEN: value or counter rows,
 * KLEN + ULEN: map rows) in key order by write batches of 1000 (Put, or
 * Merge of 1 for counters); @k is sorted in place and freed.  The untimed
 * rest of a --quick load. */
static int rdb_bulk_write(struct rdb *r, unsigned char *k, uint64_t n, size_t klen, int merge)
{
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	uint64_t one = 1;
	char *err = NULL;
	int rc = 0;

	qsort(k, n, klen, klen == KLEN ? cmp_key : cmp_mkey);
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		if (merge)
			rocksdb_writebatch_merge(wb, (const char *)k + i * klen, klen,
						 (const char *)&one, 8);
		else
			rocksdb_writebatch_put(wb, (const char *)k + i * klen, klen,
					       (const char *)r->val, r->vs);
		if (i % 1000 == 999 || i == n - 1) {
			err = NULL;
			rocksdb_write(r->db, r->wo, wb, &err);
			rc = sfs_rdb_err("rocksdb", r->dir, &err, "write batch");
			rocksdb_writebatch_clear(wb);
		}
	}
	rocksdb_writebatch_destroy(wb);
	free(k);
	return rc;
}

/* Keys @from.. of bs_keys (Put, or Merge of 1 for counters). */
static int rdb_bulk(struct rdb *r, uint64_t from, int merge)
{
	uint64_t n = bs_nkeys - from;
	unsigned char *k = malloc(n * KLEN);

	if (!k)
		return -ENOMEM;
	memcpy(k, bs_keys + from * KLEN, n * KLEN);
	return rdb_bulk_write(r, k, n, KLEN, merge);
}

static int rdb_bulk_put(void *arg, uint64_t from)
{
	return rdb_bulk(arg, from, 0);
}

static int rdb_bulk_merge(void *arg, uint64_t from)
{
	return rdb_bulk(arg, from, 1);
}

static int rdb_put(void *arg, const unsigned char *keys, uint64_t n)
{
	return rdb_load(arg, keys, n);
}

static int rdb_get(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		char *err = NULL;
		rocksdb_pinnableslice_t *s =
			rocksdb_get_pinned(r->db, r->ro, (const char *)keys + i * KLEN, KLEN, &err);
		const char *v;
		size_t len;

		if (err)
			return sfs_rdb_err("rocksdb", r->dir, &err, "get");
		if (!s)
			return sfs__err(SFS_ECORRUPT, "rocksdb get: key %llu missing",
					(unsigned long long)i);
		v = rocksdb_pinnableslice_value(s, &len);
		acc += (unsigned char)v[0];
		rocksdb_pinnableslice_destroy(s);
	}
	bs_sink += acc;
	return 0;
}

/* RocksDB's batched MultiGet (pinned values, one call per 64 keys). */
static int rdb_mget(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	const char *kp[BATCH];
	size_t kl[BATCH];
	rocksdb_pinnableslice_t *vals[BATCH];
	char *errs[BATCH];
	uint64_t acc = 0;
	int rc = 0;

	for (unsigned i = 0; i < BATCH; i++)
		kl[i] = KLEN;
	for (uint64_t b = 0; b < n; b += BATCH) {
		for (unsigned i = 0; i < BATCH; i++) {
			kp[i] = (const char *)keys + (b + i) * KLEN;
			errs[i] = NULL;
		}
		rocksdb_batched_multi_get_cf(r->db, r->ro, r->cf, BATCH, kp, kl, vals, errs, 0);
		for (unsigned i = 0; i < BATCH; i++) {
			if (errs[i] && !rc)
				rc = sfs_rdb_err("rocksdb", r->dir, &errs[i], "multiget");
			else if (errs[i])
				rocksdb_free(errs[i]);
			if (!vals[i]) {
				if (!rc)
					rc = sfs__err(SFS_ECORRUPT, "rocksdb multiget: key missing");
				continue;
			}
			size_t len;
			const char *v = rocksdb_pinnableslice_value(vals[i], &len);

			acc += (unsigned char)v[0];
			rocksdb_pinnableslice_destroy(vals[i]);
		}
		if (rc)
			return rc;
	}
	bs_sink += acc;
	return 0;
}

static int rdb_add(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t d = i % 7 + 1;
		char *err = NULL;

		rocksdb_merge(r->db, r->wo, (const char *)keys + i * KLEN, KLEN, (const char *)&d, 8,
			      &err);
		if (err)
			return sfs_rdb_err("rocksdb", r->dir, &err, "merge");
	}
	return 0;
}

/* RocksDB: one row per entry, key | user key (Flink's MapState layout);
 * iterate = an iterator seeked to the key, read while the prefix holds. */
static void rdb_map_key(unsigned char *out, const unsigned char *k, unsigned j)
{
	memcpy(out, k, KLEN);
	ukey_of(j, out + KLEN);
}

static int rdb_mput1(struct rdb *r, const unsigned char *k, unsigned j)
{
	unsigned char mk[KLEN + ULEN];
	char *err = NULL;

	rdb_map_key(mk, k, j);
	rocksdb_put(r->db, r->wo, (const char *)mk, sizeof(mk), (const char *)r->val, r->vs, &err);
	return sfs_rdb_err("rocksdb", r->dir, &err, "map put");
}

static int rdb_mload(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *k = load_map_key(i, &j);
		int rc;

		memcpy(r->val, &i, 8);
		rc = rdb_mput1(r, k, j);
		if (rc)
			return rc;
	}
	return 0;
}

/* The untimed rest of a --quick map load: entries @from.. in load order. */
static int rdb_bulk_map(void *arg, uint64_t from)
{
	uint64_t n = bs_nkeys * MAP_FANOUT - from;
	unsigned char *k = malloc(n * (KLEN + ULEN));

	if (!k)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *mk = load_map_key(from + i, &j);

		rdb_map_key(k + i * (KLEN + ULEN), mk, j);
	}
	return rdb_bulk_write(arg, k, n, KLEN + ULEN, 0);
}

static int rdb_mput(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		int rc;

		memcpy(r->val, &i, 8);
		rc = rdb_mput1(r, k, ukey_pick(k));
		if (rc)
			return rc;
	}
	return 0;
}

static int rdb_miter(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ro);
		unsigned cnt = 0;
		char *err = NULL;
		int rc;

		for (rocksdb_iter_seek(it, (const char *)k, KLEN); rocksdb_iter_valid(it);
		     rocksdb_iter_next(it)) {
			size_t kl, vl;
			const char *ik = rocksdb_iter_key(it, &kl);
			const char *v;

			if (kl < KLEN || memcmp(ik, k, KLEN) != 0)
				break;
			v = rocksdb_iter_value(it, &vl);
			acc += (unsigned char)v[0];
			cnt++;
		}
		rocksdb_iter_get_error(it, &err);
		rocksdb_iter_destroy(it);
		rc = sfs_rdb_err("rocksdb", r->dir, &err, "map iterate");
		if (rc)
			return rc;
		if (cnt != MAP_FANOUT)
			return sfs__err(SFS_ECORRUPT, "rocksdb map iterate: %u entries", cnt);
	}
	bs_sink += acc;
	return 0;
}

const struct bs_impl bs_rdb_impl = {
	.name = "rocksdb",
	.op = {
		[OP_LOAD] = rdb_load, [OP_PUT] = rdb_put, [OP_GET] = rdb_get,
		[OP_MGET] = rdb_mget, [OP_ADD] = rdb_add, [OP_MLOAD] = rdb_mload,
		[OP_MPUT] = rdb_mput, [OP_MITER] = rdb_miter,
	},
	.rest = { [OP_LOAD] = rdb_bulk_put, [OP_ADD] = rdb_bulk_merge, [OP_MLOAD] = rdb_bulk_map },
};
