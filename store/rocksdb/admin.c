/*
 * admin.c — the `rocksdb` target's entries for the supervisor
 * (store/target.h, "The instance on disk"; "Reports"): where a node's
 * instances live; a restore (a checkpoint's files put flat into the
 * instance and marked, then adopted by an open: open.c resets the
 * applied markers under this segment's identity); a rescale (each old
 * instance's rows of the new key-group range copied into a fresh one,
 * then the same adoption); a fresh start (a mark no group adopted
 * dropped); and what `sfs stat` and a run's --json summary print from
 * each worker's region.  The offline scan is scan.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb_int.h"

static int adopt_now(const struct sfs_target_env *e, uint32_t worker);

int sfs__rdbt_instance_root(const char *data_dir, int node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sfs-rocksdb.%d", data_dir, node);

	return n < 0 || (size_t)n >= len ? sfs__err(SFS_EUSAGE, "%s: path too long", data_dir) : 0;
}

/* The checkpoint's files put into the instance, marked (RESTORED_MARK: a
 * kill before the adoption completes leaves the mark, so the next open
 * adopts again), then adopted. */
int sfs__rdbt_restore(const struct sfs_target_env *e, uint32_t worker,
			int (*put)(void *arg, const char *dir), void *arg)
{
	char dir[PATH_MAX], mark[PATH_MAX + 32];
	int fd, rc;

	if ((rc = sfs_target_instance_put(e, worker, put, arg, dir, sizeof(dir))))
		return rc;
	snprintf(mark, sizeof(mark), "%s/" RESTORED_MARK, dir);
	if ((fd = open(mark, O_CREAT | O_WRONLY | O_TRUNC, 0600)) < 0)
		return sfs__err(sfs__errno(), "%s: %s", mark, strerror(errno));
	close(fd);
	return adopt_now(e, worker);
}

/* Opened once before any child starts: sfs__rdbt_start adopts what carries the
 * mark, or keeps an instance of this segment's identity. */
static int adopt_now(const struct sfs_target_env *e, uint32_t worker)
{
	struct sfs_target_writer *w;
	int rc = sfs__rdbt_open(e->seg, worker, NULL, e->cfg, &w);

	if (!rc)
		sfs__rdbt_close(w);
	return rc;
}

int sfs__rdbt_rebuild_op(const struct sfs_target_env *e, uint32_t worker,
			   const char *const *src, unsigned n, uint32_t kg_lo, uint32_t kg_hi)
{
	char dir[PATH_MAX];
	int rc;

	if ((rc = sfs__rdbt_inst_path(e->seg, worker, dir, sizeof(dir))) || (rc = sfs_rmtree(dir)) ||
	    (rc = sfs_rdbt_rebuild(e->seg, worker, src, n, kg_lo, kg_hi)))
		return rc;
	return adopt_now(e, worker);
}

/*
 * Rescale at restore: build worker @worker's instance (this segment's,
 * fresh) from the restored instances @src[0..n) of the old workers whose
 * key-group ranges overlap [@kg_lo, @kg_hi]: every column family's rows in
 * that range (keys lead with the key group, big-endian; the applied
 * markers sort after every key group and stay behind), read with their
 * merge operators (a counter's merges read folded) and written as plain
 * values, then flushed.  Once, by the supervisor, before any child starts;
 * the state registry must already be the checkpoint's.
 */
int sfs_rdbt_rebuild(struct sfs_seg *s, uint32_t worker, const char *const *src, unsigned n,
		     uint32_t kg_lo, uint32_t kg_hi)
{
	struct sfs_target_cfg tc = { 0 };
	struct sfs_target_writer *w;
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	char *err = NULL;
	int rc = sfs__rdbt_open(s, worker, NULL, &tc, &w);

	rocksdb_writeoptions_disable_WAL(wo, 1);
	if (rc)
		goto out_opts;
	for (unsigned i = 0; i < n && !rc; i++) {
		rocksdb_options_t *opts[SFS_MAX_STATES + 1];
		rocksdb_column_family_handle_t *h[SFS_MAX_STATES + 1];
		int sids[SFS_MAX_STATES + 1];
		size_t ncf = 0;
		char **names = rocksdb_list_column_families(w->dbo, src[i], &ncf, &err);
		rocksdb_t *in;

		if ((rc = sfs__rdbt_err(src[i], &err, "list column families")))
			break;
		if (ncf > SFS_MAX_STATES + 1) {
			rocksdb_list_column_families_destroy(names, ncf);
			rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: %zu column families", src[i], ncf);
			break;
		}
		for (size_t c = 0; c < ncf; c++) {
			sids[c] = strcmp(names[c], "default") ? sfs__rdbt_cf_state(s, names[c]) : -1;
			opts[c] = sids[c] >= 0 ? sfs__rdbt_cf_options(sfs__rdbt_desc_of(s, sids[c]), w->cache, &w->k, 1)
					       : rocksdb_options_create_copy(w->defo);
		}
		in = rocksdb_open_for_read_only_column_families(w->dbo, src[i], (int)ncf,
								 (const char *const *)names,
								 (const rocksdb_options_t *const *)opts, h,
								 0, &err);
		rc = sfs__rdbt_err(src[i], &err, "open read-only");
		for (size_t c = 0; c < ncf && in && !rc; c++) {
			struct wcf *dst;

			if (sids[c] < 0)
				continue;	/* default, or a state this job does not have */
			if (!(dst = sfs__rdbt_family(w, (uint32_t)sids[c]))) {
				rc = -EIO;
				break;
			}
			rc = sfs_rdb_copy_kg_range(in, h[c], w->db, dst->h, wo, kg_lo, kg_hi,
						   "rocksdb target", w->path);
		}
		for (size_t c = 0; c < ncf; c++) {
			if (in)
				rocksdb_column_family_handle_destroy(h[c]);
			rocksdb_options_destroy(opts[c]);
		}
		if (in)
			rocksdb_close(in);
		rocksdb_list_column_families_destroy(names, ncf);
	}
	if (!rc) {
		/* WAL off: the flush is what makes the rebuilt rows durable */
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		for (unsigned i = 0; i < SFS_MAX_STATES && !rc; i++)
			if (w->cf[i].h) {
				rocksdb_flush_cf(w->db, fo, w->cf[i].h, &err);
				rc = sfs__rdbt_err(w->path, &err, "flush");
			}
		rocksdb_flushoptions_destroy(fo);
	}
	sfs__rdbt_close(w);
out_opts:
	rocksdb_writeoptions_destroy(wo);
	return rc;
}

/* A restore's mark no group adopted: the instance is then another group's
 * (its identity differs) and the next open starts it empty. */
int sfs__rdbt_forget(const struct sfs_target_env *e, uint32_t worker)
{
	char dir[PATH_MAX], mark[PATH_MAX + 32];
	int rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir));

	if (rc)
		return rc;
	snprintf(mark, sizeof(mark), "%s/" RESTORED_MARK, dir);
	if (unlink(mark) && errno != ENOENT)
		return sfs__err(sfs__errno(), "%s: %s", mark, strerror(errno));
	return 0;
}

/* `sfs stat`: what each instance's compactor published (its knobs, pacing
 * and write-path counters) and each state's column-family tuning under
 * those knobs. */
void sfs__rdbt_stat(const struct sfs_seg *s, FILE *out)
{
	const struct sfs_seg_hdr *h = s->hdr;
	struct sfs_rdbt_knobs k, *kp = NULL;

	for (uint32_t w = 0; w < SFS_MAX_PROCS; w++) {
		const struct sfs_rdbt_pub *p;
		char rn[32], pacing[200];
		uint64_t off, size;

		snprintf(rn, sizeof(rn), "rdbt.%u", w);
		if (sfs_seg_region_find(s, rn, &off, &size))
			continue;
		p = sfs_seg_ptr(s, off);
		if (sfs_load_acquire(&p->rp_magic) != SFS_RDBT_MAGIC ||
		    p->rp_version != SFS_RDBT_VERSION || p->rp_layout != sfs_rdbt_layout())
			continue;
		k.on = sfs_load_relaxed(&p->rp_knobs);
		k.ingest_min = sfs_load_relaxed(&p->rp_ingest_min);
		kp = &k;
		sfs_rdbt_pacing(&k, pacing, sizeof(pacing));
		fprintf(out, "  w%-3u %s\n"
		       "       commits %llu (entries %llu, skipped as applied %llu), SSTs ingested %llu "
		       "(%llu entries, %.1f ms), batch write %.1f ms, memtable flush %.1f ms,\n"
		       "       failed commit attempts %llu, reopens %llu, L0-backlog waits %llu, "
		       "deletion windows %llu, expired entries dropped by compactions %llu, "
		       "rollbacks %llu\n",
		       w, pacing, (unsigned long long)p->rp_commits,
		       (unsigned long long)p->rp_entries, (unsigned long long)p->rp_skipped,
		       (unsigned long long)p->rp_ingests, (unsigned long long)p->rp_ingest_entries,
		       p->rp_ingest_ns / 1e6, p->rp_write_ns / 1e6, p->rp_flush_ns / 1e6,
		       (unsigned long long)p->rp_errors, (unsigned long long)p->rp_reopens,
		       (unsigned long long)p->rp_stalls, (unsigned long long)p->rp_purges,
		       (unsigned long long)sfs_load_relaxed(&p->rp_ttl_dropped),
		       (unsigned long long)sfs_load_relaxed(&p->rp_rollbacks));
	}
	for (int i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *d = &h->sh_states[i];
		char tuning[320];

		if (sfs_load_acquire(&d->sd_state) != SFS_SDESC_READY)
			continue;
		sfs_rdbt_tuning(d, kp, tuning, sizeof(tuning));
		fprintf(out, "  %-24s %s\n", d->sd_name, tuning);
	}
}

/* A run's --json summary: what the compaction filters of every worker's
 * instance dropped as expired (state TTL; as of each compactor's last
 * buffer or close). */
void sfs__rdbt_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out)
{
	uint64_t dropped = 0;

	for (uint32_t w = 0; w < workers; w++) {
		struct sfs_rdbt_pub *p;

		if (sfs__rdbt_pub_find(s, w, 0, &p) == 0 && p)
			dropped += sfs_load_relaxed(&p->rp_ttl_dropped);
	}
	fprintf(out, ", \"rocksdb_ttl_dropped\": %llu", (unsigned long long)dropped);
}
