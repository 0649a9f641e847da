/*
 * table.c — the `table` flush target (store/target.h) as a whole: its ops
 * table, which names the file of store/table/ that holds each op of the
 * contract, and what the writer and the readers share: the knobs, the
 * worker's published region and the row key of a buffered entry (files
 * and keys: table.h).
 *
 * The floor plan (the engine's private structs and cross-file functions:
 * table_int.h):
 *   open, close, busy       table_open.c      a writer's life: the store
 *                                             ours, adopted from a restore,
 *                                             or wiped
 *   apply, commit           table_write.c     staging, the map diff, the
 *                                             data commit of a level-0 file
 *                           table_round.c     the minimal round: level 0 up
 *                                             to level 1
 *                           table_kindex.c    the key index of value and
 *                                             counter tables: one file
 *                                             asked per key
 *                           table_session.c   a table in memory: its files,
 *                                             vectors and snapshot commits
 *                           table_publish.c   publication to the readers,
 *                                             deferred unlinks
 *   (background)            table_merge.c     shaping merges
 *   ttl                     table_ttl.c       the rules and clocks kept
 *   (absorb, conversion)    table_l0.c        a sealed buffer saved whole as
 *                                             level 0, converted later
 *                                             (SFS_TABLE_L0_IMAGE=1; off)
 *   snapshot, files         table_stage.c     a version staged for a
 *                                             checkpoint
 *   pin, rollback, reset    table_rollback.c  kept versions, the switch back
 *   instance_root, restore, rebuild, forget, summary_json
 *                           table_admin.c     the supervisor's entries
 *   scan                    table_scan.c      a checkpoint image, offline
 *   rd (the worker side)    table_read.c      over table_view.c's reads
 *   (TABLES, the image)     table_snap.c
 *   (the files)             layout/           data files (datafile_write.c,
 *                                             datafile_read.c), deletion
 *                                             vectors, manifests
 *
 * One key's path from commit() to the disk: table_write.c (staged, diffed,
 * written by layout/datafile_write.c as a level-0 file, committed by
 * table_session.c), table_round.c (up-levelled), table_publish.c (seen by
 * the readers: table_read.c).
 *
 * Faults: any failed step reloads the table from its last committed
 * snapshot (in-memory vectors included) and the commit is retried later;
 * a kill -9 anywhere leaves the last committed snapshot, and the next open
 * collects orphans (layout's gc: files no snapshot names) and up-levels a
 * level-0 file left by a kill between data commit and round.  A redone
 * buffer skips every table whose watermark has reached its seq.
 *
 * Durability comes from checkpoints, as for the rocksdb target's WAL-less
 * writes: the working tables' files are written and renamed without
 * fsync (store/table/layout/sync.h; SFS_TABLE_CKPT_SYNC=0 restores per-commit fsync
 * for the ablation).  A kill -9 loses nothing by it; a machine crash ends
 * the group, and what follows starts from a checkpoint.
 *
 * Fault injection (tests): kill points (common/fault.h) table.datafile (a
 * level-0 file written, not committed), table.datacommit (committed, not
 * up-levelled), table.roundfile (the round's rewrite written, not
 * committed), table.round (the round committed, not published),
 * table.mergefile, table.merge (the same for a shaping merge),
 * table.rollback.intent, table.rollback.table, table.rollback.done (a
 * rollback's intent written; one more table switched; all switched).
 *
 * Next on a key's path: table_write.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fingerprint.h"
#include "common/keygroup.h"
#include "shm/atomic.h"
#include "store/table/table_int.h"

const struct sfs_target_ops sfs_target_table = {
	.name = "table",
	.open = sfs__tbl_open,
	.apply = sfs__tbl_apply,
	.commit = sfs__tbl_commit,
	.busy = sfs__tbl_busy,
	.files = sfs__tbl_files,
	.snapshot = sfs__tbl_snapshot,
	.close = sfs__tbl_close,
	.instance_root = sfs__table_instance_root,
	.restore = sfs__table_restore,
	.rebuild = sfs__table_rebuild,
	.forget = sfs__table_forget,
	.scan = sfs__table_scan,
	.ttl = sfs__tbl_ttl,
	.absorb = sfs__tbl_absorb_op,
	.l0_step = sfs__tbl_l0_step,
	.pin = sfs__tbl_pin,
	.rollback = sfs__tbl_rollback,
	.reset = sfs__tbl_reset,
	.summary_json = sfs__table_summary_json,
	.rd.reader_open = sfs__table_reader_open,
	.rd.catch_up = sfs__table_catch_up,
	.rd.probe = sfs__table_probe,
	.rd.map_get = sfs__table_map_get,
	.rd.map_iter = sfs__table_map_iter,
	.rd.reader_close = sfs__table_reader_close,
	.rd.images = sfs__table_images,
};

uint32_t sfs_table_knobs(void)
{
	static const struct {
		const char *env;
		uint32_t bit;
	} k[] = {
		{ "SFS_TABLE_ROUND", SFS_TABLE_K_ROUND },
		{ "SFS_TABLE_SHAPING", SFS_TABLE_K_SHAPING },
		{ "SFS_TABLE_MAP_DIFF", SFS_TABLE_K_MAP_DIFF },
		{ "SFS_TABLE_HASH_IN", SFS_TABLE_K_HASH_IN },
		{ "SFS_TABLE_SESSION", SFS_TABLE_K_SESSION },
		{ "SFS_TABLE_CKPT_SYNC", SFS_TABLE_K_CKPT_SYNC },
		{ "SFS_TABLE_BG_IDLE", SFS_TABLE_K_BG_IDLE },
		{ "SFS_TABLE_KEY_INDEX", SFS_TABLE_K_KEY_INDEX },
		{ "SFS_TABLE_KEY_FILTER", SFS_TABLE_K_KEY_FILTER },
	};
	uint32_t on = SFS_TABLE_K_ALL;

	const char *l0 = getenv("SFS_TABLE_L0_IMAGE");

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		const char *v = getenv(k[i].env);

		if (v && strcmp(v, "0") == 0)
			on &= ~k[i].bit;
	}
	if (l0 && strcmp(l0, "1") == 0)	/* off by default (table_l0.c) */
		on |= SFS_TABLE_K_L0_IMAGE;
	return on;
}

/* Environment variable @name as an integer in [@lo, @hi]; @def when unset,
 * empty or anything else. */
static uint32_t env_u32(const char *name, uint32_t def, unsigned long lo, unsigned long hi)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return def;
	x = strtoul(v, &end, 10);
	return *end || x < lo || x > hi ? def : (uint32_t)x;
}

uint32_t sfs_table_merge_budget(void)
{
	return env_u32("SFS_TABLE_MERGE_BUDGET", SFS_TABLE_MERGE_BUDGET_DEFAULT, 0, 1000000);
}

uint32_t sfs_table_zstd_from(void)
{
	return env_u32("SFS_TABLE_ZSTD_FROM", SFS_TABLE_ZSTD_FROM, 1, 64);
}

uint32_t sfs_table_kfilter_min_keys(void)
{
	return env_u32("SFS_TABLE_KFILTER_MIN_KEYS", SFS_TABLE_KFILTER_MIN_KEYS_DEFAULT, 16,
		       1u << 30);
}

uint32_t sfs_table_kfilter_after(void)
{
	return env_u32("SFS_TABLE_KFILTER_AFTER", SFS_TABLE_KFILTER_AFTER_DEFAULT, 0, 1000000);
}

int sfs__table_pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_table_pub **out)
{
	char name[SFS_REGION_NAME_MAX];
	uint64_t off, size;
	struct sfs_table_pub *p;
	int rc;

	*out = NULL;
	snprintf(name, sizeof(name), "table.%u", worker);
	if (sfs_seg_region_find(s, name, &off, &size)) {
		if (!create)
			return 0;
		rc = sfs_seg_region_create(s, name, sizeof(*p), SFS_ROLE_COMPACTOR, &off);
		if (rc)
			return rc;
		if ((rc = sfs_seg_region_find(s, name, &off, &size)))
			return rc;
	}
	if (size < sizeof(*p))
		return sfs__err(SFS_ELAYOUT, "table target region %s: %llu bytes, this build "
				"needs %zu", name, (unsigned long long)size, sizeof(*p));
	p = sfs_seg_ptr(s, off);
	if (sfs_load_acquire(&p->tp_magic) == SFS_TABLE_MAGIC) {
		if (p->tp_version != SFS_TABLE_VERSION || p->tp_layout != sfs_table_layout())
			return sfs__err(SFS_ELAYOUT, "table target region %s: version %u or layout "
					"differs from this build's", name, p->tp_version);
		*out = p;
		return 0;
	}
	if (!create)
		return 0;
	memset(p, 0, sizeof(*p));
	p->tp_version = SFS_TABLE_VERSION;
	p->tp_worker = worker;
	p->tp_layout = sfs_table_layout();
	sfs_store_release(&p->tp_magic, SFS_TABLE_MAGIC);
	*out = p;
	return 0;
}

uint64_t sfs_table_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_table_pub);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_seq);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_published);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_applied);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_ntables);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_index_mismatch);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_tables);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_files);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_l0);
	return h;
}

const struct sfs_table_pub *sfs_table_pub_of(struct sfs_seg *s, uint32_t worker)
{
	struct sfs_table_pub *p = NULL;

	return sfs__table_pub_find(s, worker, 0, &p) == 0 ? p : NULL;
}

int sfs__table_store_dir(const struct sfs_seg *s, uint32_t worker, char *buf, size_t len)
{
	if (!s->hdr->sh_data_dir[0])
		return sfs__err(SFS_EUSAGE, "the table target needs a data directory (segment %s "
				"has none)", s->path);
	snprintf(buf, len, "%.400s/w%u", s->hdr->sh_data_dir, worker);
	return 0;
}

size_t sfs__table_enc(unsigned char *out, int map, uint32_t plen, uint64_t ns, const void *key,
		      uint32_t klen)
{
	uint32_t head = map ? plen : klen;

	memcpy(out, key, head);
	for (int i = 0; i < 8; i++)
		out[head + i] = (unsigned char)(ns >> (56 - 8 * i));
	if (klen > head)
		memcpy(out + head + 8, (const char *)key + head, klen - head);
	return (size_t)klen + 8;
}

uint32_t sfs__table_map_prefix(const void *key, size_t klen)
{
	uint32_t p = klen <= UINT32_MAX ? sfs_map_parent_len(key, (uint32_t)klen) : 0;

	return p && (size_t)p + 8 <= klen ? p + 8 : 0;
}
