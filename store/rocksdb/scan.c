/*
 * scan.c — the `rocksdb` target's offline scan (store/target.h, scan):
 * every live entry of one worker's checkpoint image (the instance's files,
 * flat in one directory), for `sfs export`: no segment, no compactor,
 * RocksDB read-only with each state's family options (tune.c), so a
 * counter's merges come folded.
 */
#include <string.h>

#include "common/err.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb_int.h"

/*
 * Offline scan of a checkpoint's instance restored flat in @dir
 * (store/target.h, scan): opened read-only with every state's column
 * family under its own options (a counter's merge operator folds its
 * merges as the iterator reads), each family iterated whole; the applied
 * markers (0xff 0xff ...) are skipped and each key goes back to the
 * buffered key (kg | state | rest, the namespace taken out).  A family of
 * no registered state is an error: the registry is the checkpoint's own.
 */
int sfs__rdbt_scan(const char *dir, const struct sfs_state_desc *states,
		     int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg)
{
	struct sfs_rdbt_knobs k = sfs__rdbt_knobs_get();
	rocksdb_options_t *dbo = rocksdb_options_create();
	rocksdb_options_t *opts[SFS_MAX_STATES + 1];
	rocksdb_column_family_handle_t *h[SFS_MAX_STATES + 1];
	int sids[SFS_MAX_STATES + 1];
	size_t ncf = 0;
	char *err = NULL, **names;
	rocksdb_t *db = NULL;
	int rc;

	rocksdb_options_set_max_open_files(dbo, -1);
	names = rocksdb_list_column_families(dbo, dir, &ncf, &err);
	if ((rc = sfs__rdbt_err(dir, &err, "list column families"))) {
		rocksdb_options_destroy(dbo);
		return rc;
	}
	if (ncf > SFS_MAX_STATES + 1) {
		rocksdb_list_column_families_destroy(names, ncf);
		rocksdb_options_destroy(dbo);
		return sfs__err(SFS_ECORRUPT, "rocksdb target %s: %zu column families", dir, ncf);
	}
	for (size_t c = 0; c < ncf; c++) {
		sids[c] = -1;
		if (strcmp(names[c], "default")) {
			for (uint32_t i = 0; i < SFS_MAX_STATES; i++)
				if (states[i].sd_state == SFS_SDESC_READY &&
				    !strncmp(names[c], CF_PREFIX, sizeof(CF_PREFIX) - 1) &&
				    !strcmp(names[c] + sizeof(CF_PREFIX) - 1, states[i].sd_name))
					sids[c] = (int)i;
			if (sids[c] < 0 && !rc)
				rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: column family '%s' "
					      "of no state in the checkpoint's registry", dir, names[c]);
		}
		opts[c] = sids[c] >= 0 ? sfs__rdbt_cf_options(&states[sids[c]], NULL, &k, 0)
				       : rocksdb_options_create();
	}
	if (!rc) {
		db = rocksdb_open_for_read_only_column_families(dbo, dir, (int)ncf,
								 (const char *const *)names,
								 (const rocksdb_options_t *const *)opts,
								 h, 0, &err);
		rc = sfs__rdbt_err(dir, &err, "open read-only");
	}
	for (size_t c = 0; c < ncf && db && !rc; c++) {
		rocksdb_readoptions_t *ro;
		rocksdb_iterator_t *it;

		if (sids[c] < 0)
			continue;
		ro = rocksdb_readoptions_create();
		rocksdb_readoptions_set_total_order_seek(ro, 1);
		it = rocksdb_create_iterator_cf(db, ro, h[c]);
		for (rocksdb_iter_seek_to_first(it); !rc && rocksdb_iter_valid(it);
		     rocksdb_iter_next(it)) {
			size_t kl, vl;
			const unsigned char *key = (const unsigned char *)rocksdb_iter_key(it, &kl);
			const char *val = rocksdb_iter_value(it, &vl);
			unsigned char buf[KBUF];
			struct sfs_scan_entry e = { .key = buf, .val = val, .vlen = (uint32_t)vl };

			if (kl >= 2 && key[0] == 0xff && key[1] == 0xff)
				continue;	/* the applied marker */
			if (kl < SFS_KEY_PREFIX + NS_LEN || kl - NS_LEN > sizeof(buf)) {
				rc = sfs__err(SFS_ECORRUPT, "rocksdb target %s: family %s: a key of "
					      "%zu bytes", dir, names[c], kl);
				break;
			}
			memcpy(buf, key, SFS_KEY_PREFIX);
			for (unsigned i = 0; i < NS_LEN; i++)
				e.ns = e.ns << 8 | key[SFS_KEY_PREFIX + i];
			memcpy(buf + SFS_KEY_PREFIX, key + SFS_KEY_PREFIX + NS_LEN,
			       kl - SFS_KEY_PREFIX - NS_LEN);
			e.klen = (uint32_t)(kl - NS_LEN);
			rc = fn(arg, &e);
		}
		if (!rc) {
			rocksdb_iter_get_error(it, &err);
			rc = sfs__rdbt_err(dir, &err, "iterate");
		}
		rocksdb_iter_destroy(it);
		rocksdb_readoptions_destroy(ro);
	}
	for (size_t c = 0; c < ncf; c++) {
		if (db)
			rocksdb_column_family_handle_destroy(h[c]);
		rocksdb_options_destroy(opts[c]);
	}
	if (db)
		rocksdb_close(db);
	rocksdb_list_column_families_destroy(names, ncf);
	rocksdb_options_destroy(dbo);
	return rc;
}
