/*
 * target.c — the `memory` target's entry in the flush-target table: thin
 * adapters from the contract (store/target.h) to the store itself
 * (store/memory/memory.c) and its checkpoint dump (memdump.c).  The
 * instance on disk holds only what a restore puts there: the dumps to
 * load (<root>/w<N>/store.dump, or r<lo>-<hi>.<n>.dump for a rescale).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/fs.h"
#include "store/memory/memdump.h"
#include "store/memory/memory.h"
#include "common/keygroup.h"
#include "store/target.h"
#include "worker/wbuf.h"

/* ---- memory target: thin adapters over store/memory/memory.c ---------------- */

struct sfs_target_writer {
	struct sfs_mstore_writer m;
	struct sfs_mdump_job dj;  /* the checkpoint dump beside the flush */
};

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	struct sfs_mstore *ms;   /* NULL until the compactor created it */
	uint64_t absent_at;      /* sfs_mstore_attach_after's: regions ready at the
				  * last search that found no store */
};

/*
 * Create worker @worker's store and load the dumps a restore put in its
 * instance — "store.dump" (same parallelism) or "r<lo>-<hi>.<n>.dump" (a
 * rescale: that key-group range of an old worker's dump) — then remove
 * them.  store/memory/memdump.h has the format.
 */
static int mem_load(struct sfs_seg *s, uint32_t worker, uint64_t store_bytes)
{
	char dir[300], path[600];
	struct sfs_target_writer wr, *w = &wr;
	struct dirent *e;
	uint64_t total = 0;
	DIR *d;
	int rc = 0;

	if (!s->hdr->sh_data_dir[0])
		return 0;
	if ((rc = sfs_mstore_open(s, worker, store_bytes, NULL, &w->m)))
		return rc;
	snprintf(dir, sizeof(dir), "%.256s/w%u", s->hdr->sh_data_dir, worker);
	if (!(d = opendir(dir))) {
		sfs_mstore_close(&w->m);
		return 0;
	}
	while (rc == 0 && (e = readdir(d))) {
		unsigned lo = 0, hi = UINT32_MAX, old;
		size_t n = strlen(e->d_name);
		uint64_t recs = 0;

		if (n < 6 || strcmp(e->d_name + n - 5, ".dump") != 0)
			continue;
		if (strcmp(e->d_name, "store.dump") != 0 &&
		    sscanf(e->d_name, "r%u-%u.%u.dump", &lo, &hi, &old) != 3) {
			rc = sfs__err(SFS_ECORRUPT, "%s/%s: not a restore dump name", dir, e->d_name);
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		rc = sfs_mdump_load(&w->m, path, lo, hi, &recs);
		total += recs;
	}
	closedir(d);
	sfs_mstore_close(&w->m);
	if (rc)
		return rc;
	if (!(d = opendir(dir)))
		return 0;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n > 5 && strcmp(e->d_name + n - 5, ".dump") == 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	}
	closedir(d);
	sfs_log("memory store %u: restored %" PRIu64 " records from %s", worker, total, dir);
	return 0;
}

/* The scan's view of a dump record. */
struct mscan {
	int (*fn)(void *arg, const struct sfs_scan_entry *e);
	void *arg;
};

static int mscan_one(void *arg, const struct sfs_mdump_rec *r)
{
	struct mscan *m = arg;
	struct sfs_scan_entry e = { .key = r->key, .klen = r->klen, .ns = r->ns, .val = r->val,
				    .vlen = r->vlen };

	return m->fn(m->arg, &e);
}

/* Offline read of a checkpoint's dump (store/target.h, scan): a dump holds
 * the live state whole (values, folded counters, live map entries), so its
 * records are the entries as they are.  Every "*.dump" of @dir is read (a
 * checkpoint's worker has one, store.dump).  @states is not needed. */
static int mem_scan(const char *dir, const struct sfs_state_desc *states,
		    int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg)
{
	struct mscan m = { .fn = fn, .arg = arg };
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);
	int rc = 0;

	(void)states;
	if (!d)
		return sfs__err(sfs__errno(), "%s: %s", dir, strerror(errno));
	while (rc == 0 && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n < 6 || strcmp(e->d_name + n - 5, ".dump") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		rc = sfs_mdump_read(path, mscan_one, &m, NULL);
	}
	closedir(d);
	return rc;
}

static int mem_instance_root(const char *data_dir, int node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sfs-memory.%d", data_dir, node);

	return n < 0 || (size_t)n >= len ? sfs__err(SFS_EUSAGE, "%s: path too long", data_dir) : 0;
}

/* The checkpoint's dump into the instance, then loaded into a new store:
 * no worker may read the store before the restored state is in. */
static int mem_restore(const struct sfs_target_env *e, uint32_t worker,
		       int (*put)(void *arg, const char *dir), void *arg)
{
	char dir[PATH_MAX];
	int rc;

	if ((rc = sfs_target_instance_put(e, worker, put, arg, dir, sizeof(dir))))
		return rc;
	return mem_load(e->seg, worker, e->cfg->store_bytes);
}

/* A rescale: each old dump is linked in under the name of the range to
 * keep of it (r<lo>-<hi>.<i>.dump), then loaded: one pass over each. */
static int mem_rebuild(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
		       unsigned n, uint32_t lo, uint32_t hi)
{
	char dir[PATH_MAX], from[PATH_MAX + 16], to[PATH_MAX + 64];
	int rc;

	if ((rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir))) ||
	    (rc = sfs_target_instance_reset(dir)))
		return rc;
	for (unsigned i = 0; i < n; i++) {
		snprintf(from, sizeof(from), "%s/store.dump", src[i]);
		snprintf(to, sizeof(to), "%s/r%u-%u.%u.dump", dir, lo, hi, i);
		if (link(from, to))
			return sfs__err(sfs__errno(), "link %s to %s: %s", from, to, strerror(errno));
	}
	return mem_load(e->seg, worker, e->cfg->store_bytes);
}

/* Dumps of a restore that never loaded them (the load removes them). */
static int mem_forget(const struct sfs_target_env *e, uint32_t worker)
{
	char dir[PATH_MAX];
	int rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir));

	return rc ? rc : sfs_rmtree(dir);
}

static int stage_dir(const char *dir, char *path, size_t n)
{
	/* the stage's parents exist after the first checkpoint: one mkdir(2) */
	int rc = sfs_mkdirs(dir, 0700);

	if (rc)
		return rc;
	snprintf(path, n, "%.580s/store.dump", dir);
	return 0;
}

/* The checkpoint of the heap baseline: the whole store, every time.  The
 * synchronous form (the flush waits); the compactor uses the next two. */
static int mem_snapshot(struct sfs_target_writer *w, const char *dir)
{
	char path[600];
	uint64_t recs;
	int rc = stage_dir(dir, path, sizeof(path));

	return rc ? rc : sfs_mdump_write(w->m.ms, w->m.ms->ms_worker, path, &recs);
}

/* The same dump of a frozen version, written by a thread while newer
 * buffers flush (store/memory/memdump.h). */
static int mem_snapshot_begin(struct sfs_target_writer *w, const char *dir, uint64_t id)
{
	char path[600];
	int rc;

	if (w->m.ms->ms_dump_list && w->m.ms->ms_dump_id != id)
		return SFS_ERUNNING;	/* before any mkdir: the older one finishes first */
	rc = stage_dir(dir, path, sizeof(path));
	return rc ? rc : sfs_mdump_start(&w->m, &w->dj, id, path);
}

static int mem_snapshot_poll(struct sfs_target_writer *w, uint64_t *id, uint64_t *seq)
{
	return sfs_mdump_poll(&w->m, &w->dj, id, seq);
}

static int mem_pin_wait(void *arg)
{
	struct sfs_target_writer *w = arg;

	return sfs_mdump_wait(&w->m, &w->dj);
}

static int mem_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		    const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	rc = sfs_mstore_open(s, worker, cfg->store_bytes, self, &w->m);
	if (rc) {
		free(w);
		return rc;
	}
	w->m.pin_wait = mem_pin_wait;
	w->m.pin_arg = w;
	*out = w;
	return 0;
}

static int kind_of(struct sfs_seg *s, const struct sfs_wbuf_view *v)
{
	const unsigned char *k = v->key;
	uint32_t sid;

	if (v->klen < SFS_KEY_PREFIX)
		return 0;
	sid = sfs_key_prefix_state(k);
	return sid < SFS_MAX_STATES ? (int)s->hdr->sh_states[sid].sd_kind : 0;
}

static unsigned merge_of(struct sfs_seg *s, const struct sfs_wbuf_view *v)
{
	uint32_t sid = sfs_key_prefix_state(v->key);

	return sid < SFS_MAX_STATES ? s->hdr->sh_states[sid].sd_merge : 0;
}

static int is_map(int kind)
{
	return kind == SFS_STATE_MAP || kind == SFS_STATE_LIST;
}


/*
 * The memory target's map run: each head with a clear drops the stored map
 * first; then every entry written after its namespace's clear is put or
 * removed one by one: the store sees only what changed.  Idempotent
 * through the store's tags.
 */
struct mem_run {
	struct sfs_target_writer *w;
	uint64_t seq;
};

static int mem_run_clear(void *arg, const struct sfs_wbuf_view *h, uint32_t plen)
{
	struct mem_run *m = arg;

	return sfs_mstore_map_clear(&m->w->m, h->hash, h->ns, h->key, plen, m->seq);
}

static int mem_run_entry(void *arg, const struct sfs_wbuf_view *e, uint32_t plen,
			 const struct sfs_wbuf_view *head, const void *val, uint32_t len)
{
	struct mem_run *m = arg;
	uint64_t ph = head ? head->hash : sfs_wbuf_hash(e->ns, e->key, plen);

	if (!val)
		return sfs_mstore_map_remove(&m->w->m, e->hash, e->ns, e->key, e->klen, m->seq);
	return sfs_mstore_map_put(&m->w->m, e->hash, ph, e->ns, e->key, e->klen, plen, val, len,
				  m->seq);
}

static int apply_map(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq)
{
	static const struct sfs_map_run_ops ops = { mem_run_clear, mem_run_entry };
	struct mem_run m = { w, seq };

	return sfs_map_run_walk(v, n, "memory target", &ops, &m);
}

static int mem_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq)
{
	/* A batch's probes are independent misses in a big index: start them
	 * all (slots, then the records they name) before the first write. */
	for (unsigned i = 0; i < n; i++)
		sfs_mstore_prefetch(w->m.ms, v[i].hash);
	for (unsigned i = 0; i < n; i++)
		sfs_mstore_prefetch_rec(w->m.ms, v[i].hash);
	for (unsigned i = 0; i < n; i++) {
		int64_t d;
		int rc;

		if (is_map(kind_of(w->m.seg, &v[i]))) {
			rc = apply_map(w, &v[i], n - i, seq);
			if (rc < 0)
				return rc;
			i += (unsigned)rc - 1;
			continue;
		}
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_PUT, 0, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, v[i].value, v[i].len, seq);
			break;
		case SFS_WBUF_DELETE:
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_DELETE, 0, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, NULL, 0, seq);
			break;
		case SFS_WBUF_MERGE:
			d = sfs_wbuf_view_i64(&v[i]);
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_MERGE, merge_of(w->m.seg, &v[i]),
					      v[i].hash, v[i].ns, v[i].key, v[i].klen, &d, 8, seq);
			break;
		default:
			rc = sfs__err(SFS_ECORRUPT, "memory target: entry of unknown kind %u",
				      v[i].kind);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int mem_commit(struct sfs_target_writer *w, uint64_t seq)
{
	sfs_mstore_commit(&w->m, seq);
	return 0;
}

static int mem_busy(struct sfs_target_writer *w)
{
	return sfs_mstore_pending(&w->m) | sfs_mdump_busy(&w->m, &w->dj);
}

static int mem_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg)
{
	(void)w;
	(void)fn;
	(void)arg;
	return 0;	/* all in memory: a checkpoint serializes the store */
}

static void mem_close(struct sfs_target_writer *w)
{
	sfs_mdump_stop(&w->m, &w->dj);
	sfs_mstore_close(&w->m);
	free(w);
}

/* State TTL (store/target.h): the rules and clocks go to the store's
 * writer, whose semispace copies leave expired records behind (memory.h,
 * "State TTL"). */
static void mem_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		    const struct sfs_ttl_clock *now)
{
	sfs_mstore_ttl(&w->m, rules, now);
}

/* A run's --json summary: the expired records the copies of every
 * worker's store left behind. */
static void mem_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out)
{
	uint64_t dropped = 0;

	for (uint32_t i = 0; i < workers; i++) {
		struct sfs_mstore *ms;

		if (sfs_mstore_attach(s, i, &ms) == 0 && ms)
			dropped += sfs_load_relaxed(&ms->ms_ttl_dropped);
	}
	fprintf(out, ", \"memory_ttl_dropped\": %llu", (unsigned long long)dropped);
}

static int mem_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	struct sfs_target_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	r->absent_at = UINT64_MAX;	/* no search yet */
	*out = r;
	return 0;
}

/* The store is read in place: catching up only finds it once it exists. */
static int mem_catch_up(struct sfs_target_reader *r)
{
	if (!r->ms)
		return sfs_mstore_attach_after(r->seg, r->worker, &r->absent_at, &r->ms);
	return 0;
}

static int mem_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     struct sfs_probe_result *res)
{
	const struct sfs_mstore *ms = r->ms;

	if (__builtin_expect(!ms, 0)) {
		mem_catch_up(r);
		if (!(ms = r->ms)) {
			memset(res, 0, n * sizeof(*res));	/* no store yet: nothing flushed */
			return 0;
		}
	}
	if (n > 1) {
		/* Overlap the misses: every key's home slot, then the record
		 * each slot names (its line came in while the others were
		 * asked for). */
		for (unsigned i = 0; i < n; i++)
			sfs_mstore_prefetch(ms, keys[i].hash);
		for (unsigned i = 0; i < n; i++)
			sfs_mstore_prefetch_rec(ms, keys[i].hash);
	}
	for (unsigned i = 0; i < n; i++) {
		struct sfs_mstore_view v;

		if (sfs_mstore_get(ms, keys[i].hash, keys[i].ns, keys[i].key, keys[i].klen, &v))
			res[i] = (struct sfs_probe_result){ 1, v.value, v.len, v.tag };
		else
			res[i] = (struct sfs_probe_result){ 0, NULL, 0, 0 };
	}
	return 0;
}

/* A point lookup of the entry's own key P|U. */
static int mem_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		       const void *ukey, uint32_t ulen, struct sfs_probe_result *res)
{
	const char *pk = parent->key;
	unsigned char local[512], *k = local;
	uint32_t klen = parent->klen + ulen;
	struct sfs_mstore_view v;

	res->found = 0;
	res->value = NULL;
	res->len = 0;
	res->tag = 0;
	if (!r->ms)
		mem_catch_up(r);
	if (!r->ms)
		return 0;
	if ((const char *)ukey == pk + parent->klen) {
		k = (unsigned char *)(uintptr_t)pk;	/* P|U contiguous already (the worker's) */
	} else {
		if (klen > sizeof(local) && !(k = malloc(klen)))
			return -ENOMEM;
		memcpy(k, pk, parent->klen);
		memcpy(k + parent->klen, ukey, ulen);
	}
	res->found = sfs_mstore_get(r->ms, sfs_wbuf_hash(parent->ns, k, klen), parent->ns, k, klen,
				    &v);
	if (k != local && k != (const unsigned char *)pk)
		free(k);
	res->value = res->found ? v.value : NULL;
	res->len = res->found ? v.len : 0;
	res->tag = res->found ? v.tag : 0;
	return res->found;
}

static int mem_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg)
{
	if (!r->ms)
		mem_catch_up(r);
	if (!r->ms)
		return 0;
	return sfs_mstore_map_iter(r->ms, parent->hash, parent->ns, parent->key, parent->klen, fn,
				   arg);
}

static void mem_reader_close(struct sfs_target_reader *r)
{
	free(r);
}

const struct sfs_target_ops sfs_target_memory = {
	.name = "memory",
	.open = mem_open,
	.apply = mem_apply,
	.commit = mem_commit,
	.busy = mem_busy,
	.files = mem_files,
	.snapshot = mem_snapshot,
	.snapshot_begin = mem_snapshot_begin,
	.snapshot_poll = mem_snapshot_poll,
	.close = mem_close,
	.instance_root = mem_instance_root,
	.restore = mem_restore,
	.rebuild = mem_rebuild,
	.scan = mem_scan,
	.forget = mem_forget,
	.ttl = mem_ttl,
	.summary_json = mem_summary_json,
	.rd.reader_open = mem_reader_open,
	.rd.catch_up = mem_catch_up,
	.rd.probe = mem_probe,
	.rd.map_get = mem_map_get,
	.rd.map_iter = mem_map_iter,
	.rd.reader_close = mem_reader_close,
};
