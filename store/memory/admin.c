/*
 * admin.c — the memory target's entries for the supervisor (store/target.h:
 * instance_root, restore, rebuild, forget, scan, summary_json): a
 * checkpoint's dump put into the instance and loaded into a new store
 * (whole, or a rescale's key-group ranges of old dumps), the offline read
 * of a dump, and a run's --json summary.
 *
 * Next: the store itself, memory.c.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "store/memory/memory_int.h"

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
int sfs__mem_scan(const char *dir, const struct sfs_state_desc *states,
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

int sfs__mem_instance_root(const char *data_dir, int node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sfs-memory.%d", data_dir, node);

	return n < 0 || (size_t)n >= len ? sfs__err(SFS_EUSAGE, "%s: path too long", data_dir) : 0;
}

/* The checkpoint's dump into the instance, then loaded into a new store:
 * no worker may read the store before the restored state is in. */
int sfs__mem_restore(const struct sfs_target_env *e, uint32_t worker,
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
int sfs__mem_rebuild(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
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
int sfs__mem_forget(const struct sfs_target_env *e, uint32_t worker)
{
	char dir[PATH_MAX];
	int rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir));

	return rc ? rc : sfs_rmtree(dir);
}

/* A run's --json summary: the expired records the copies of every
 * worker's store left behind. */
void sfs__mem_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out)
{
	uint64_t dropped = 0;

	for (uint32_t i = 0; i < workers; i++) {
		struct sfs_mstore *ms;

		if (sfs_mstore_attach(s, i, &ms) == 0 && ms)
			dropped += sfs_load_relaxed(&ms->ms_ttl_dropped);
	}
	fprintf(out, ", \"memory_ttl_dropped\": %llu", (unsigned long long)dropped);
}
