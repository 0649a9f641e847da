/*
 * table_admin.c — the table target's entries for the supervisor
 * (store/target.h, "The instance on disk"; "Reports"): where a node's
 * tables live, a restore (a checkpoint's TABLES and files put flat into
 * the instance, then adopted by an open: table_open.c's adopt links them into
 * per-table directories under this segment's identity), a rescale
 * (sfs_tsnap_rebuild, then the same adoption), a fresh start (a TABLES no
 * group adopted is dropped: its files are then wiped as another group's),
 * and the counters of a run summary.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"
#include "store/table/table.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"
#include "store/target.h"

int sfs__table_instance_root(const char *data_dir, int node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/sfs-table.%d", data_dir, node);

	return n < 0 || (size_t)n >= len ? sfs__err(SFS_EUSAGE, "%s: path too long", data_dir) : 0;
}

/* The group's first open finds TABLES and adopts it; done here, before any
 * child starts, so no worker's reader ever sees the store half-adopted. */
static int adopt_now(const struct sfs_target_env *e, uint32_t worker)
{
	struct sfs_target_writer *w;
	int rc = sfs_target_table.open(e->seg, worker, NULL, e->cfg, &w);

	if (!rc)
		sfs_target_table.close(w);
	return rc;
}

int sfs__table_restore(const struct sfs_target_env *e, uint32_t worker,
		       int (*put)(void *arg, const char *dir), void *arg)
{
	char dir[PATH_MAX];
	int rc;

	if ((rc = sfs_target_instance_put(e, worker, put, arg, dir, sizeof(dir))))
		return rc;
	return adopt_now(e, worker);
}

int sfs__table_rebuild(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
		       unsigned n, uint32_t kg_lo, uint32_t kg_hi)
{
	char dir[PATH_MAX];
	int rc;

	if ((rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir))) ||
	    (rc = sfs_rmtree(dir)) || (rc = sfs_tsnap_rebuild(src, n, dir, kg_lo, kg_hi)))
		return rc;
	return adopt_now(e, worker);
}

int sfs__table_forget(const struct sfs_target_env *e, uint32_t worker)
{
	char dir[PATH_MAX], path[PATH_MAX + 8];
	int rc = sfs_target_instance_dir(e->root, worker, dir, sizeof(dir));

	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/TABLES", dir);
	if (unlink(path) && errno != ENOENT)
		return sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	return 0;
}

/* The table target's work over every worker (store/table/table.h counters). */
void sfs__table_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out)
{
	uint64_t c = 0, cns = 0, cmax = 0, tmax = 0, dc = 0, rounds = 0, rns = 0, up = 0, merges = 0;
	uint64_t mrows = 0, masked = 0, same = 0, pruned = 0, rows = 0, files = 0, idle = 0;
	uint64_t pkeys = 0, ppages = 0, wbytes = 0, mbytes = 0, expired = 0;
	uint64_t budget = 0, owed = 0, owed_max = 0, mnorm = 0, midle = 0, fwait = 0, xfiles = 0, xrw = 0;
	uint64_t ixk = 0, ixb = 0, ixa = 0, ixh = 0, ixr = 0, ixrk = 0, ixrns = 0, ixns = 0;
	uint64_t ixbad = 0, ixmis = 0;

	for (uint32_t w = 0; w < workers; w++) {
		const struct sfs_table_pub *p = sfs_table_pub_of(s, w);

		if (!p)
			continue;
		c += p->tp_commits;
		cns += p->tp_commit_ns;
		cmax = p->tp_commit_max_ns > cmax ? p->tp_commit_max_ns : cmax;
		tmax = p->tp_table_max_ns > tmax ? p->tp_table_max_ns : tmax;
		dc += p->tp_data_commits;
		rows += p->tp_rows_written;
		rounds += p->tp_rounds;
		rns += p->tp_round_ns;
		up += p->tp_upgrades;
		merges += p->tp_merges;
		idle += p->tp_merges_idle;
		mrows += p->tp_merge_rows;
		masked += p->tp_rows_masked;
		same += p->tp_map_unchanged;
		pruned += p->tp_map_pruned;
		files += p->tp_nfiles;
		pkeys += p->tp_probe_keys;
		ppages += p->tp_probe_pages;
		wbytes += p->tp_bytes_written;
		mbytes += p->tp_merge_bytes;
		expired += p->tp_ttl_dropped;
		budget = p->tp_merge_budget;
		owed += p->tp_merge_owed;
		owed_max = p->tp_merge_owed_max > owed_max ? p->tp_merge_owed_max : owed_max;
		mnorm += p->tp_merge_ns_normal;
		midle += p->tp_merge_ns_idle;
		fwait += p->tp_flush_wait_ns;
		xfiles += p->tp_ttl_files_dropped;
		xrw += p->tp_ttl_rewrites;
		ixk += p->tp_index_keys;
		ixb += p->tp_index_bytes;
		ixa += p->tp_index_asked;
		ixh += p->tp_index_hits;
		ixr += p->tp_index_rebuilds;
		ixrk += p->tp_index_rebuild_keys;
		ixrns += p->tp_index_rebuild_ns;
		ixns += p->tp_index_ns;
		ixbad += p->tp_index_broken;
		ixmis += p->tp_index_mismatch;
	}
	fprintf(out, ", \"table_commit_ms\": %.3f, \"table_commit_max_ms\": %.3f, "
	       "\"table_sync_max_ms\": %.3f, "
	       "\"table_data_commits\": %llu, \"table_rows_written\": %llu, \"table_rounds\": %llu, "
	       "\"table_round_ms\": %.3f, \"table_relabels\": %llu, \"table_merges\": %llu, "
	       "\"table_merges_idle\": %llu, \"table_merge_rows\": %llu, \"table_rows_masked\": %llu, "
	       "\"table_map_unchanged\": %llu, \"table_map_pruned\": %llu, \"table_files\": %llu, "
	       "\"table_probe_keys\": %llu, \"table_probe_pages\": %llu, "
	       "\"table_bytes_written\": %llu, \"table_merge_bytes\": %llu, "
	       "\"table_ttl_dropped\": %llu",
	       c ? cns / 1e6 / c : 0.0, cmax / 1e6, tmax / 1e6, (unsigned long long)dc,
	       (unsigned long long)rows, (unsigned long long)rounds,
	       rounds ? rns / 1e6 / rounds : 0.0, (unsigned long long)up,
	       (unsigned long long)merges, (unsigned long long)idle, (unsigned long long)mrows,
	       (unsigned long long)masked, (unsigned long long)same, (unsigned long long)pruned,
	       (unsigned long long)files, (unsigned long long)pkeys, (unsigned long long)ppages,
	       (unsigned long long)wbytes, (unsigned long long)mbytes,
	       (unsigned long long)expired);
	fprintf(out, ", \"table_merge_budget\": %llu, \"table_merge_owed_bytes\": %llu, "
	       "\"table_merge_owed_max_bytes\": %llu, "
	       "\"table_merge_normal_ms\": %.3f, \"table_merge_idle_ms\": %.3f, "
	       "\"table_flush_wait_ms\": %.3f, \"table_ttl_files_dropped\": %llu, "
	       "\"table_ttl_rewrites\": %llu",
	       (unsigned long long)budget, (unsigned long long)owed,
	       (unsigned long long)owed_max, mnorm / 1e6, midle / 1e6,
	       fwait / 1e6, (unsigned long long)xfiles, (unsigned long long)xrw);
	fprintf(out, ", \"table_index_keys\": %llu, \"table_index_bytes\": %llu, "
		"\"table_index_asked\": %llu, \"table_index_hits\": %llu, "
		"\"table_index_rebuilds\": %llu, \"table_index_rebuild_keys\": %llu, "
		"\"table_index_rebuild_ms\": %.3f, \"table_index_upkeep_ms\": %.3f, "
		"\"table_index_broken\": %llu, \"table_index_mismatch\": %llu",
		(unsigned long long)ixk, (unsigned long long)ixb, (unsigned long long)ixa,
		(unsigned long long)ixh, (unsigned long long)ixr, (unsigned long long)ixrk,
		ixrns / 1e6, ixns / 1e6, (unsigned long long)ixbad, (unsigned long long)ixmis);
	{	/* the key filter of map and list tables (table_kfilter.c) */
		unsigned long long kb = 0, kr = 0, kn = 0, kns = 0;

		for (uint32_t w = 0; w < workers; w++) {
			const struct sfs_table_pub *p = sfs_table_pub_of(s, w);

			kb += p ? p->tp_kfilter_bytes : 0;
			kr += p ? p->tp_kfilter_rejects : 0;
			kn += p ? p->tp_kfilter_rebuilds : 0;
			kns += p ? p->tp_kfilter_rebuild_ns : 0;
		}
		fprintf(out, ", \"table_kfilter_bytes\": %llu, \"table_kfilter_rejects\": %llu, "
			"\"table_kfilter_rebuilds\": %llu, \"table_kfilter_rebuild_ms\": %.3f",
			kb, kr, kn, kns / 1e6);
	}
	{	/* level-0 images (table_l0.c), SFS_TABLE_L0_IMAGE=1 */
		unsigned long long ab = 0, cv = 0;

		for (uint32_t w = 0; w < workers; w++) {
			const struct sfs_table_pub *p = sfs_table_pub_of(s, w);

			ab += p ? p->tp_l0_absorbed : 0;
			cv += p ? p->tp_l0_converted : 0;
		}
		fprintf(out, ", \"table_l0_absorbed\": %llu, \"table_l0_converted\": %llu", ab, cv);
	}
}

