/*
 * rocksdb.c — the `rocksdb` flush target (store/target.h) as a whole: its
 * ops table, which names the file of store/rocksdb/ that holds each op of
 * the contract, and what the writer, the readers and the supervisor's
 * entries share: the instance's path, the worker's published region, the
 * state of a column family, the RocksDB key of a buffered key and the
 * applied marker (layout and files: rocksdb.h).
 *
 * The floor plan (the engine's private structs and cross-file functions:
 * rocksdb_int.h):
 *   open, close             open.c       a writer's life: the instance ours,
 *                                        adopted from a restore, or fresh;
 *                                        reopened after a failure; a
 *                                        state's column family created
 *   apply, commit, busy     write.c      a buffer staged per state, then an
 *                                        SST per large state and one batch
 *                                        and flush for the rest; deletion
 *                                        windows after a grace period
 *                           stage.c      the staged copy of a buffer:
 *                                        records, save points, key order
 *   (family options)        tune.c       the knobs; memtable, filters,
 *                                        compression and compaction shape
 *                                        of a state's family
 *   ttl                     ttl.c        a TTL state's compaction filter
 *                                        and its clock
 *   snapshot, files         snapshot.c   a version staged for a checkpoint
 *   pin, rollback           rollback.c   kept versions, the swap back
 *   instance_root, restore, rebuild, forget, stat, summary_json
 *                           admin.c      the supervisor's entries, reports
 *   scan                    scan.c       a checkpoint image, offline
 *   rd (the worker side)    read.c       secondaries: catch-up, probes,
 *                                        map reads
 *   (the region's layout)   layout.c     its fingerprint, without RocksDB
 *
 * One key's path: write.c (staged by stage.c, written as an SST or in a
 * batch, flushed, published), then read.c (a secondary catches up).
 *
 * Next on a key's path: write.c.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/rdb.h"
#include "store/rocksdb/rocksdb_int.h"

/*
 * Fault injection (tests): kill points (common/fault.h) rocksdb.apply (a
 * piece staged), rocksdb.write (the batch is in the memtables, not yet
 * flushed), rocksdb.flush (the batch durable, the buffer not yet
 * published), rocksdb.sst (a state's SST written, not yet ingested),
 * rocksdb.ingest (a state's SST ingested, the buffer's other states not
 * yet), rocksdb.rollback.copy (the pin's link copy made, not swapped in)
 * and rocksdb.rollback.swap (swapped in, the old instance not removed).
 * The facility is thread-safe; with read.c's counter of secondaries the
 * only process-wide mutable state these files touch, so writers are safe
 * on the compactor's flush threads (each writer used by one thread at a
 * time).
 */

const struct sfs_target_ops sfs_target_rocksdb = {
	.name = "rocksdb",
	.open = sfs__rdbt_open,			/* open.c */
	.apply = sfs__rdbt_apply,			/* write.c */
	.commit = sfs__rdbt_commit,
	.busy = sfs__rdbt_busy,
	.files = sfs__rdbt_files,			/* snapshot.c */
	.snapshot = sfs__rdbt_snapshot,
	.close = sfs__rdbt_close,			/* open.c */
	.instance_root = sfs__rdbt_instance_root,	/* admin.c */
	.restore = sfs__rdbt_restore,
	.rebuild = sfs__rdbt_rebuild_op,
	.forget = sfs__rdbt_forget,
	.scan = sfs__rdbt_scan,			/* scan.c */
	.ttl = sfs__rdbt_ttl,			/* ttl.c */
	.pin = sfs__rdbt_pin,			/* rollback.c */
	.rollback = sfs__rdbt_rollback,
	.summary_json = sfs__rdbt_summary_json,	/* admin.c */
	.stat = sfs__rdbt_stat,
	.rd.reader_open = sfs__rdbt_reader_open,	/* read.c */
	.rd.catch_up = sfs__rdbt_catch_up,
	.rd.probe = sfs__rdbt_probe,
	.rd.map_get = sfs__rdbt_map_get,
	.rd.map_iter = sfs__rdbt_map_iter,
	.rd.reader_close = sfs__rdbt_reader_close,
};

static void region_name(uint32_t w, char *buf, size_t n);

int sfs__rdbt_inst_path(const struct sfs_seg *s, uint32_t worker, char *buf, size_t n)
{
	const char *dir = s->hdr->sh_data_dir;

	if (!dir[0])
		return sfs__err(SFS_EUSAGE,
				"segment %s: the rocksdb target needs a data directory (sh_data_dir "
				"is empty)",
				s->path);
	if ((size_t)snprintf(buf, n, "%.*s/w%u", SFS_SEG_DATA_DIR_MAX, dir, worker) >= n)
		return sfs__err(SFS_EUSAGE, "rocksdb target: data directory %s: path too long", dir);
	return 0;
}

int sfs__rdbt_pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_rdbt_pub **out)
{
	char name[SFS_REGION_NAME_MAX];
	uint64_t off, size;
	struct sfs_rdbt_pub *p;
	int rc;

	*out = NULL;
	region_name(worker, name, sizeof(name));
	if (sfs_seg_region_find(s, name, &off, &size)) {
		if (!create)
			return 0;
		rc = sfs_seg_region_create(s, name, 4096, SFS_ROLE_COMPACTOR, &off);
		if (rc)
			return rc;
		if ((rc = sfs_seg_region_find(s, name, &off, &size)))
			return rc;
	}
	p = sfs_seg_ptr(s, off);
	if (sfs_load_acquire(&p->rp_magic) == SFS_RDBT_MAGIC) {
		if (p->rp_version != SFS_RDBT_VERSION || p->rp_layout != sfs_rdbt_layout())
			return sfs__err(SFS_ELAYOUT, "rocksdb target region %s: version %u or layout "
					"differs from this build's", name, p->rp_version);
		*out = p;
		return 0;
	}
	if (!create)
		return 0;	/* being created: no version published yet */
	memset(p, 0, sizeof(*p));
	p->rp_version = SFS_RDBT_VERSION;
	p->rp_worker = worker;
	p->rp_layout = sfs_rdbt_layout();
	*out = p;
	return 0;
}

static void region_name(uint32_t w, char *buf, size_t n)
{
	snprintf(buf, n, "rdbt.%u", w);
}

/* State id of column family @name in @s's registry, or -1. */
int sfs__rdbt_cf_state(const struct sfs_seg *s, const char *name)
{
	if (strncmp(name, CF_PREFIX, sizeof(CF_PREFIX) - 1) != 0)
		return -1;
	name += sizeof(CF_PREFIX) - 1;
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *d = &s->hdr->sh_states[i];

		if (sfs_load_acquire(&d->sd_state) == SFS_SDESC_READY && strcmp(d->sd_name, name) == 0)
			return (int)i;
	}
	return -1;
}

const struct sfs_state_desc *sfs__rdbt_desc_of(const struct sfs_seg *s, int sid)
{
	return sid >= 0 ? &s->hdr->sh_states[sid] : NULL;
}

/* RocksDB key of (@ns, @key): kg|state|ns(BE)|rest, into @out; its length. */
uint32_t sfs__rdbt_enc_key(unsigned char *out, uint64_t ns, const void *key, uint32_t klen)
{
	memcpy(out, key, SFS_KEY_PREFIX);
	for (unsigned i = 0; i < NS_LEN; i++)
		out[SFS_KEY_PREFIX + i] = (unsigned char)(ns >> (56 - 8 * i));
	memcpy(out + SFS_KEY_PREFIX + NS_LEN, (const char *)key + SFS_KEY_PREFIX,
	       klen - SFS_KEY_PREFIX);
	return klen + NS_LEN;
}

/* The first key after every key that starts with @p[0, @n): @p + 1. */
void sfs__rdbt_prefix_end(unsigned char *p, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;)
		if (++p[i] != 0)
			return;
}

uint64_t sfs__rdbt_read_marker(rocksdb_t *db, const rocksdb_readoptions_t *ro,
			    rocksdb_column_family_handle_t *h)
{
	char *err = NULL, *v;
	size_t len = 0;
	uint64_t seq = 0;

	v = rocksdb_get_cf(db, ro, h, MARKER_KEY, MARKER_LEN, &len, &err);
	if (err)
		rocksdb_free(err);
	else if (v && len == 8)
		memcpy(&seq, v, 8);
	if (v)
		rocksdb_free(v);
	return seq;
}

/* RocksDB's errptr, through the one adapter (common/rdb.h). */
int sfs__rdbt_err(const char *path, char **err, const char *op)
{
	return sfs_rdb_err("rocksdb target", path, err, op);
}

void sfs__rdbt_rm_tree(const char *path)
{
	(void)sfs_rmtree(path);	/* best effort: a reader's LOG files */
}
