/*
 * read.c — the `rocksdb` target's readers (store/target.h, the worker
 * side; workers, any process of the node): each opens worker w's
 * instance as a RocksDB secondary and follows what write.c publishes in
 * the worker's region (rp_published, rp_cf_gen, rp_incarnation); values
 * are copied into the reader's arena.
 *
 * Reading (workers; any process).  Each reader opens the instance as a
 * secondary.  catch_up() (quiescent points) calls TryCatchUpWithPrimary
 * when rp_published moved since the last one, and resets the scratch arena
 * every returned value lives in (values are copied out of RocksDB: valid
 * until the caller's next quiescent point).  probe / map_get / map_iter
 * also catch up when rp_published moved, without resetting the arena: the
 * worker's read path stops at a RETIRING buffer (state.c: "flushed in seq
 * order") as soon as commit returned, possibly before the worker's next
 * quiescent point, so a read must see every published version.  The check
 * is one acquire load; the catch-up happens at most once per version.
 * A new column family needs a new handle: when rp_cf_gen moved, the
 * secondary is reopened instead.
 *
 * Tags: a probe result's tag is the applied marker of the key's state at
 * the version read (read once per catch-up).  Every buffer with seq <= the
 * marker that touched the state is in the store, every newer one is not,
 * so the worker folds exactly the deltas of buffers newer than the tag.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bump.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "store/rocksdb/rocksdb_int.h"

#define MG_MAX 256u
/* How long a reader waits for a rollback to end (r_incarnation). */
#define ROLLBACK_WAIT_NS (30ull * 1000000000ull)

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	struct sfs_rdbt_pub *pub;
	struct sfs_rdbt_knobs k;
	char path[PATH_MAX];
	char spath[PATH_MAX];
	rocksdb_options_t *dbo;
	rocksdb_options_t *defo;
	rocksdb_cache_t *cache;
	rocksdb_readoptions_t *ro;
	rocksdb_t *db;
	rocksdb_column_family_handle_t *def;
	rocksdb_column_family_handle_t *cf[SFS_MAX_STATES];
	rocksdb_options_t *cfo[SFS_MAX_STATES];
	uint64_t applied[SFS_MAX_STATES];
	uint64_t seen;          /* rp_published at the last catch-up */
	uint64_t cf_gen;        /* rp_cf_gen at the last (re)open */
	uint64_t inc;           /* rp_incarnation the secondary was opened under (even) */
	struct sfs_bump arena;     /* values handed out until the next catch-up */
	unsigned char kbuf[KBUF];
	unsigned char kend[KBUF];
	/* multiget scratch */
	unsigned char *mkeys;
	size_t mkcap;
	const char *mkp[MG_MAX];
	size_t mkl[MG_MAX];
	rocksdb_pinnableslice_t *mv[MG_MAX];
	char *merr[MG_MAX];
};

static int r_refresh(struct sfs_target_reader *r);
static uint64_t r_incarnation(const struct sfs_target_reader *r);
static int r_open_db(struct sfs_target_reader *r);
static void r_close_db(struct sfs_target_reader *r);
static int r_state(const struct sfs_probe *p);
static int probe_run(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     uint32_t sid, struct sfs_probe_result *res);
static int fill(struct sfs_target_reader *r, struct sfs_probe_result *res, const char *v,
		size_t len, uint32_t sid);

int sfs__rdbt_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	static unsigned nth;	/* secondaries opened by this process, atomic */
	struct sfs_target_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	r->k = sfs__rdbt_knobs_get();
	if ((rc = sfs__rdbt_inst_path(s, worker, r->path, sizeof(r->path)))) {
		free(r);
		return rc;
	}
	if ((size_t)snprintf(r->spath, sizeof(r->spath), "%s.sec/%d.%u", r->path, (int)getpid(),
			     __atomic_fetch_add(&nth, 1, __ATOMIC_RELAXED)) >= sizeof(r->spath)) {
		free(r);
		return sfs__err(SFS_EUSAGE, "rocksdb target %s: secondary path too long", r->path);
	}
	r->dbo = rocksdb_options_create();
	rocksdb_options_set_max_open_files(r->dbo, -1);	/* secondaries require it */
	rocksdb_options_set_keep_log_file_num(r->dbo, 2);
	r->defo = rocksdb_options_create();
	r->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
	r->ro = rocksdb_readoptions_create();
	*out = r;
	return 0;
}

int sfs__rdbt_catch_up(struct sfs_target_reader *r)
{
	sfs_bump_reset(&r->arena);
	return r_refresh(r);
}

/*
 * Follow the primary when it published a version since the last time.  A
 * rollback (rp_incarnation moved: rollback.c, "Rollback") is followed by a
 * reopen, never a catch-up, and an open or catch-up that overlapped one
 * (odd, or moved by the end) is thrown away and redone: a secondary may
 * hold the old instance's version or the new one's, never a mix.
 */
static int r_refresh(struct sfs_target_reader *r)
{
	uint64_t v, g, inc;
	char *err = NULL;
	int rc;

	if (!r->pub) {
		if ((rc = sfs__rdbt_pub_find(r->seg, r->worker, 0, &r->pub)))
			return rc;
		if (!r->pub)
			return 0;	/* nothing flushed yet: an empty store */
	}
	v = sfs_load_acquire(&r->pub->rp_published);
	g = sfs_load_acquire(&r->pub->rp_cf_gen);
	inc = sfs_load_acquire(&r->pub->rp_incarnation);
	if (r->db && v == r->seen && g == r->cf_gen && inc == r->inc)
		return 0;
	if ((inc & 1) && r->db)
		return 0;	/* the version held stays readable until the rollback ends */
	for (unsigned tries = 0;; tries++) {
		if ((inc = r_incarnation(r)) & 1) {
			r_close_db(r);
			return sfs__err(SFS_ETIMEDOUT, "rocksdb target %s: a rollback of the "
					"instance has not ended in %llu s", r->path,
					ROLLBACK_WAIT_NS / 1000000000ull);
		}
		v = sfs_load_acquire(&r->pub->rp_published);
		g = sfs_load_acquire(&r->pub->rp_cf_gen);
		rc = 0;
		if (!r->db || g != r->cf_gen || inc != r->inc) {
			if ((rc = r_open_db(r)))
				goto check;
			r->cf_gen = g;
		} else {
			rocksdb_try_catch_up_with_primary(r->db, &err);
			if (err) {
				/* Retry once from scratch: a reopen reads CURRENT anew. */
				rocksdb_free(err);
				err = NULL;
				rc = r_open_db(r);
			}
		}
check:
		/* The files read above, then the incarnation: a rollback that
		 * began meanwhile shows here. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (sfs_load_acquire(&r->pub->rp_incarnation) == inc) {
			if (rc)
				return rc;
			break;
		}
		r_close_db(r);
		if (tries >= 8)
			return sfs__err(SFS_ETIMEDOUT, "rocksdb target %s: the instance was rolled "
					"back during each of %u reopens", r->path, tries + 1);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (r->cf[i])
			r->applied[i] = sfs__rdbt_read_marker(r->db, r->ro, r->cf[i]);
	r->seen = v;
	r->inc = inc;
	return 0;
}

/* rp_incarnation once it is even (no rollback replacing the instance),
 * waiting up to ROLLBACK_WAIT_NS; odd if it stays odd that long (a
 * compactor killed mid-rollback: its successor's open makes it even). */
static uint64_t r_incarnation(const struct sfs_target_reader *r)
{
	uint64_t inc = sfs_load_acquire(&r->pub->rp_incarnation), until = 0;

	while ((inc & 1) && (!until || sfs_now_ns() < until)) {
		if (!until)
			until = sfs_now_ns() + ROLLBACK_WAIT_NS;
		usleep(1000);
		inc = sfs_load_acquire(&r->pub->rp_incarnation);
	}
	return inc;
}

/* (Re)open the secondary with every column family the primary has now. */
static int r_open_db(struct sfs_target_reader *r)
{
	char *err = NULL, **names;
	size_t ncf = 0;
	int rc = 0;
	const char **cn;
	const rocksdb_options_t **co;
	rocksdb_column_family_handle_t **ch;

	r_close_db(r);
	if ((rc = sfs_mkdirs(r->spath, 0700)))
		return rc;
	names = rocksdb_list_column_families(r->dbo, r->path, &ncf, &err);
	if (err) {
		if (names)
			rocksdb_list_column_families_destroy(names, 0);
		return sfs__rdbt_err(r->path, &err, "list column families");
	}
	cn = calloc(ncf, sizeof(*cn));
	co = calloc(ncf, sizeof(*co));
	ch = calloc(ncf, sizeof(*ch));
	if (!cn || !co || !ch) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ncf; i++) {
		int sid = sfs__rdbt_cf_state(r->seg, names[i]);

		cn[i] = names[i];
		if (sid >= 0 && !r->cfo[sid]) {
			r->cfo[sid] = sfs__rdbt_cf_options(sfs__rdbt_desc_of(r->seg, sid), r->cache, &r->k, 0);
			co[i] = r->cfo[sid];
		} else {
			co[i] = r->defo;
		}
	}
	r->db = rocksdb_open_as_secondary_column_families(r->dbo, r->path, r->spath, (int)ncf, cn,
							   co, ch, &err);
	if (err || !r->db) {
		rc = sfs__rdbt_err(r->path, &err, "open as secondary");
		rc = rc ? rc : -EIO;
		goto out;
	}
	for (size_t i = 0; i < ncf; i++) {
		int sid = sfs__rdbt_cf_state(r->seg, names[i]);

		if (sid >= 0 && co[i] == r->cfo[sid] && !r->cf[sid])
			r->cf[sid] = ch[i];
		else if (!strcmp(names[i], "default") && !r->def)
			r->def = ch[i];
		else
			rocksdb_column_family_handle_destroy(ch[i]);
	}
out:
	free(cn);
	free(co);
	free(ch);
	rocksdb_list_column_families_destroy(names, ncf);
	return rc;
}

static void r_close_db(struct sfs_target_reader *r)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (r->cf[i])
			rocksdb_column_family_handle_destroy(r->cf[i]);
		if (r->cfo[i])
			rocksdb_options_destroy(r->cfo[i]);
		r->cf[i] = NULL;
		r->cfo[i] = NULL;
		r->applied[i] = 0;
	}
	if (r->def)
		rocksdb_column_family_handle_destroy(r->def);
	r->def = NULL;
	if (r->db)
		rocksdb_close(r->db);
	r->db = NULL;
}

int sfs__rdbt_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		      struct sfs_probe_result *res)
{
	int rc = r_refresh(r);

	if (rc)
		return rc;
	for (unsigned i = 0; i < n;) {
		int sid = r_state(&keys[i]);
		unsigned run = 1;

		while (i + run < n && run < MG_MAX && r_state(&keys[i + run]) == sid)
			run++;
		if (!r->db || sid < 0 || !r->cf[sid]) {
			for (unsigned k = 0; k < run; k++)
				res[i + k] = (struct sfs_probe_result){ 0 };
		} else if ((rc = probe_run(r, &keys[i], run, (uint32_t)sid, &res[i]))) {
			return rc;
		}
		i += run;
	}
	return 0;
}

static int r_state(const struct sfs_probe *p)
{
	return p->klen >= SFS_KEY_PREFIX ? (int)sfs_key_prefix_state(p->key) : -1;
}

/* MultiGet of @keys[0, @n), all of state @sid, in one call. */
static int probe_run(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     uint32_t sid, struct sfs_probe_result *res)
{
	size_t need = 0, at = 0;
	int rc = 0;

	for (unsigned i = 0; i < n; i++)
		need += keys[i].klen + NS_LEN;
	if (need > r->mkcap) {
		unsigned char *nk = realloc(r->mkeys, need);

		if (!nk)
			return -ENOMEM;
		r->mkeys = nk;
		r->mkcap = need;
	}
	for (unsigned i = 0; i < n; i++) {
		r->mkp[i] = (const char *)r->mkeys + at;
		r->mkl[i] = sfs__rdbt_enc_key(r->mkeys + at, keys[i].ns, keys[i].key, keys[i].klen);
		at += r->mkl[i];
		r->merr[i] = NULL;
		r->mv[i] = NULL;
	}
	rocksdb_batched_multi_get_cf(r->db, r->ro, r->cf[sid], n, r->mkp, r->mkl, r->mv, r->merr,
				     0);
	for (unsigned i = 0; i < n; i++) {
		res[i] = (struct sfs_probe_result){ 0 };
		if (r->merr[i]) {
			int e = sfs__rdbt_err(r->path, &r->merr[i], "multiget");

			rc = rc ? rc : e;
		} else if (r->mv[i]) {
			size_t len = 0;
			const char *v = rocksdb_pinnableslice_value(r->mv[i], &len);
			int e = fill(r, &res[i], v, len, sid);

			rc = rc ? rc : e;
		}
		if (r->mv[i])
			rocksdb_pinnableslice_destroy(r->mv[i]);
	}
	return rc;
}

static int fill(struct sfs_target_reader *r, struct sfs_probe_result *res, const char *v,
		size_t len, uint32_t sid)
{
	res->found = 1;
	res->value = len ? sfs_bump_copy(&r->arena, v, len) : "";
	res->len = (uint32_t)len;
	res->tag = r->applied[sid];
	if (!res->value)
		return sfs__err(-ENOMEM, "rocksdb target %s: no memory for a %zu-byte value", r->path,
				len);
	return 0;
}

int sfs__rdbt_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
			const void *ukey, uint32_t ulen, struct sfs_probe_result *res)
{
	int rc = r_refresh(r), sid = r_state(parent);
	rocksdb_pinnableslice_t *ps;
	char *err = NULL;
	uint32_t kl;

	*res = (struct sfs_probe_result){ 0 };
	if (rc)
		return rc;
	if (!r->db || sid < 0 || !r->cf[sid])
		return 0;
	if (parent->klen + ulen + NS_LEN > sizeof(r->kbuf))
		return sfs__err(SFS_EUSAGE, "rocksdb target: map key of %u bytes", parent->klen + ulen);
	kl = sfs__rdbt_enc_key(r->kbuf, parent->ns, parent->key, parent->klen);
	memcpy(r->kbuf + kl, ukey, ulen);
	ps = rocksdb_get_pinned_cf(r->db, r->ro, r->cf[sid], (const char *)r->kbuf, kl + ulen, &err);
	if (err)
		return sfs__rdbt_err(r->path, &err, "map get");
	if (ps) {
		size_t len = 0;
		const char *v = rocksdb_pinnableslice_value(ps, &len);

		rc = fill(r, res, v, len, (uint32_t)sid);
		rocksdb_pinnableslice_destroy(ps);
		if (rc)
			return rc;
	}
	return res->found;
}

/* A bounded scan of the map's range.  Every entry is copied into the arena
 * and the iterator closed before @fn runs, so @fn may make any state call
 * (another scan, a probe that catches up or reopens the secondary). */
int sfs__rdbt_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
			 int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				   uint32_t vlen),
			 void *arg)
{
	int rc = r_refresh(r), sid = r_state(parent);
	struct ent {
		const void *k, *v;
		uint32_t kl, vl;
	} *e = NULL;
	size_t ne = 0, cap = 0;
	unsigned char *lo, *hi;
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	uint32_t pl;
	char *err = NULL;

	if (rc)
		return rc;
	if (!r->db || sid < 0 || !r->cf[sid])
		return 0;
	lo = malloc(2 * ((size_t)parent->klen + NS_LEN));
	if (!lo)
		return -ENOMEM;
	hi = lo + parent->klen + NS_LEN;
	pl = sfs__rdbt_enc_key(lo, parent->ns, parent->key, parent->klen);
	memcpy(hi, lo, pl);
	sfs__rdbt_prefix_end(hi, pl);
	ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_iterate_lower_bound(ro, (const char *)lo, pl);
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)hi, pl);
	if (pl >= MAP_PREFIX_LEN && (r->k.on & SFS_RDBT_K_PREFIX))
		rocksdb_readoptions_set_prefix_same_as_start(ro, 1);	/* the prefix bloom */
	else
		rocksdb_readoptions_set_total_order_seek(ro, 1);
	it = rocksdb_create_iterator_cf(r->db, ro, r->cf[sid]);
	for (rocksdb_iter_seek(it, (const char *)lo, pl); rc == 0 && rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t kl = 0, vl = 0;
		const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);

		if (kl < pl)
			continue;
		if (ne == cap) {
			struct ent *ne2 = realloc(e, (cap = cap ? cap * 2 : 64) * sizeof(*e));

			if (!ne2) {
				rc = -ENOMEM;
				break;
			}
			e = ne2;
		}
		e[ne].k = kl > pl ? sfs_bump_copy(&r->arena, k + pl, kl - pl) : "";
		e[ne].v = vl ? sfs_bump_copy(&r->arena, v, vl) : "";
		e[ne].kl = (uint32_t)(kl - pl);
		e[ne].vl = (uint32_t)vl;
		if (!e[ne].k || !e[ne].v)
			rc = -ENOMEM;
		ne++;
	}
	if (rc == 0) {
		rocksdb_iter_get_error(it, &err);
		rc = sfs__rdbt_err(r->path, &err, "map iterate");
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	free(lo);
	for (size_t i = 0; rc == 0 && i < ne; i++)
		rc = fn(arg, e[i].k, e[i].kl, e[i].v, e[i].vl);
	free(e);
	return rc;
}

void sfs__rdbt_reader_close(struct sfs_target_reader *r)
{
	if (!r)
		return;
	r_close_db(r);
	sfs_bump_free(&r->arena);
	free(r->mkeys);
	if (r->ro)
		rocksdb_readoptions_destroy(r->ro);
	if (r->dbo)
		rocksdb_options_destroy(r->dbo);
	if (r->defo)
		rocksdb_options_destroy(r->defo);
	if (r->cache)
		rocksdb_cache_destroy(r->cache);
	sfs__rdbt_rm_tree(r->spath);
	free(r);
}
