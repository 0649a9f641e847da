/*
 * rocksdb.c — the `rocksdb` flush target (layout and files: rocksdb.h).
 *
 * Writing (the compactor, the only writer of each instance).  apply()
 * appends a sealed buffer's entries to one WriteBatch (several calls per
 * buffer; a failed call is rolled back to its save point, so the flush
 * loop's retry from the same position never appends twice).  commit(seq)
 * adds each touched column family's "applied" marker (= seq) to the batch,
 * writes it with the WAL off and flushes the memtables (atomic_flush: every
 * column family in one MANIFEST edit) before it returns.  So:
 *  - durable at commit: the compactor frees the buffer after a grace
 *    period, and a kill -9 after commit loses nothing (the data is in SST
 *    files and the MANIFEST; the memtable was the only volatile copy);
 *  - exactly once: a buffer's entries and its markers reach the files
 *    together, or not at all.  A redone flush (compactor restarted, or
 *    apply called again for a seq already committed) skips every entry of
 *    a state whose marker is >= seq, so a counter merge is never applied
 *    twice;
 *  - visible to secondaries: with the WAL off a secondary sees only SST
 *    files, so the flush at commit is also what publishes the version;
 *    rp_published is bumped after it.
 * Counters are RocksDB merges (the state's sd_merge: add/max/min on int64),
 * so a flush never reads.  A map clear (mh_clear_pos in the buffer's head)
 * is a DeleteRange over the map's range in that namespace, written before
 * the buffer's surviving entries of that map.
 *
 * Cost of durability: one memtable flush (an L0 file per touched column
 * family, fdatasync'ed by RocksDB) per committed buffer.  Buffers are large
 * (16 MiB by default) and committed once per barrier or spill, so this is
 * a few flushes per second per worker.
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
 *
 * File deletion vs secondaries.  A secondary opens every table file of a
 * version when it installs it (max_open_files = -1), so an unlinked file it
 * uses stays readable; the danger is a file deleted between the primary's
 * MANIFEST edit and a secondary's catch-up over that edit.  The compactor
 * keeps file deletions disabled; after a commit it starts a grace period
 * over the process table (QSBR: every live online worker passes a
 * quiescent point, where it catches up) and only then opens a deletion
 * window (EnableFileDeletions purges what is obsolete, DisableFileDeletions
 * closes it again).  A secondary that still replays edits naming files
 * deleted since skips those intermediate versions (RocksDB's manifest
 * tailer installs only versions whose files exist).  A compactor restart
 * opens the primary, which purges obsolete files at open: the same rule
 * does not cover that moment (documented gap, as is a worker that stays
 * offline for longer than a window).
 *
 * Tuning per column family: LZ4 on L0/L1, ZSTD below and as the explicit
 * bottommost compression, a full bloom filter (10 bits/key, whole keys),
 * partitioned filters with a two-level index for value and counter state
 * (random point reads), a merge operator for counters, WAL off, and for
 * map and list state a prefix bloom over kg|state|ns|klen + 8 key bytes
 * (MAP_PREFIX_LEN), used by a scan only when its prefix is at least that
 * long (adaptive: shorter scans seek in total order).  Not done (yet):
 * hash-linklist memtable and prefix extractor for value state (a fixed
 * prefix over kg|state|ns would put a whole key group in one bucket; the
 * primary never reads its memtable anyway), per-state prefix lengths from
 * observed key lengths, pacing of RocksDB's background compaction.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fingerprint.h"
#include "common/log.h"
#include "common/merge.h"
#include "shm/qsbr.h"
#include "shm/segment.h"
#include "common/rdb.h"
#include "target/rocksdb.h"
#include "worker/keygroup.h"

#define CF_PREFIX "st:"
#define NS_LEN 8u
#define KBUF (SFS_KEY_MAX + SFS_KEY_PREFIX + NS_LEN + 32)
#define MARKER_KEY "\xff\xff" "sfs.applied"
#define MARKER_LEN (sizeof(MARKER_KEY) - 1)
#define IDENT_KEY "sfs.identity"
#define BLOCK_CACHE_BYTES (32ull << 20)
#define ARENA_CHUNK (256u << 10)
#define MG_MAX 256u
/* Prefix bloom of map and list state: kg|state|ns|klen and 8 key bytes, a
 * map of an int64 key (every map of the Nexmark queries).  A scan whose
 * prefix is shorter seeks in total order (no prefix filter): a filter over
 * a longer prefix than the probe's would skip files holding its entries. */
#define MAP_PREFIX_LEN (SFS_KEY_PREFIX + NS_LEN + 2 + 8)

uint64_t sfs_rdbt_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_rdbt_pub);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_published);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_applied);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_cf_gen);
	SFS_FP_FIELD(h, struct sfs_rdbt_pub, rp_purges);
	return h;
}

/* ---- shared helpers --------------------------------------------------------- */

/* RocksDB's errptr, through the one adapter (common/rdb.h). */
static int rdbt_err(const char *path, char **err, const char *op)
{
	return sfs_rdb_err("rocksdb target", path, err, op);
}

static int mkdirs(const char *path)
{
	return sfs_rdb_mkdirs(path);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	(void)remove(p);	/* best effort: a reader's LOG files */
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int inst_path(const struct sfs_seg *s, uint32_t worker, char *buf, size_t n)
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

static void region_name(uint32_t w, char *buf, size_t n)
{
	snprintf(buf, n, "rdbt.%u", w);
}

/* State id of column family @name in @s's registry, or -1. */
static int cf_state(const struct sfs_seg *s, const char *name)
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

/*
 * Fault injection (tests): SFS_RDBT_CRASH_AT="POINT:N" kills this process
 * with SIGKILL the Nth time it reaches POINT: "apply" (a piece appended to
 * the batch), "write" (the batch is in the memtables, not yet flushed),
 * "flush" (durable, not yet published).  Read once per process.
 */
static void fault(const char *point)
{
	static int left = -1;
	static char want[16];

	if (left < 0) {
		const char *e = getenv("SFS_RDBT_CRASH_AT");

		left = 0;
		if (e && sscanf(e, "%15[a-z]:%d", want, &left) != 2)
			left = 0;
	}
	if (left > 0 && strcmp(point, want) == 0 && --left == 0)
		raise(SIGKILL);
}

/* ---- merge operators (counters) --------------------------------------------- */

void sfs_rdbt_tuning(const struct sfs_state_desc *d, char *buf, size_t n)
{
	static const char *const merges[SFS_MERGE_NOPS] = { "add", "max", "min" };
	int point = d->sd_kind == SFS_STATE_VALUE || d->sd_kind == SFS_STATE_COUNTER;
	int prefix = d->sd_kind == SFS_STATE_MAP || d->sd_kind == SFS_STATE_LIST;

	snprintf(buf, n, "skiplist memtable, WAL off, LZ4 L0-L1, ZSTD below and bottommost, "
		 "bloom 10 bits%s%s%s%s",
		 point ? ", partitioned filters + two-level index" : "",
		 prefix ? ", prefix bloom (used only for probes at least that long)" : "",
		 d->sd_kind == SFS_STATE_COUNTER ? ", merge operator " : "",
		 d->sd_kind == SFS_STATE_COUNTER ?
			 merges[d->sd_merge < SFS_MERGE_NOPS ? d->sd_merge : 0] : "");
}

/* Options of a state's column family (@d NULL: an unknown family, plain
 * options).  Every choice here is printed in the instance's LOG. */
static rocksdb_options_t *cf_options(const struct sfs_state_desc *d, rocksdb_cache_t *cache)
{
	static int levels[7] = { rocksdb_lz4_compression, rocksdb_lz4_compression,
				 rocksdb_zstd_compression, rocksdb_zstd_compression,
				 rocksdb_zstd_compression, rocksdb_zstd_compression,
				 rocksdb_zstd_compression };
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
	int point = d && (d->sd_kind == SFS_STATE_VALUE || d->sd_kind == SFS_STATE_COUNTER);

	rocksdb_options_set_num_levels(o, 7);
	rocksdb_options_set_compression_per_level(o, levels, 7);
	rocksdb_options_set_bottommost_compression(o, rocksdb_zstd_compression);
	rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom_full(10));
	rocksdb_block_based_options_set_whole_key_filtering(t, 1);
	if (cache)
		rocksdb_block_based_options_set_block_cache(t, cache);
	if (point) {
		/* Random point reads: partitioned filters, two-level index. */
		rocksdb_block_based_options_set_partition_filters(t, 1);
		rocksdb_block_based_options_set_index_type(
			t, rocksdb_block_based_table_index_type_two_level_index_search);
		rocksdb_block_based_options_set_cache_index_and_filter_blocks(t, 1);
		rocksdb_block_based_options_set_pin_top_level_index_and_filter(t, 1);
	}
	rocksdb_options_set_block_based_table_factory(o, t);
	rocksdb_block_based_options_destroy(t);
	if (d && (d->sd_kind == SFS_STATE_MAP || d->sd_kind == SFS_STATE_LIST))
		rocksdb_options_set_prefix_extractor(
			o, rocksdb_slicetransform_create_fixed_prefix(MAP_PREFIX_LEN));
	if (d && d->sd_kind == SFS_STATE_COUNTER)
		rocksdb_options_set_merge_operator(
			o, sfs_rdb_i64_merge(d->sd_merge));
	return o;
}

static const struct sfs_state_desc *desc_of(const struct sfs_seg *s, int sid)
{
	return sid >= 0 ? &s->hdr->sh_states[sid] : NULL;
}

/* RocksDB key of (@ns, @key): kg|state|ns(BE)|rest, into @out; its length. */
static uint32_t enc_key(unsigned char *out, uint64_t ns, const void *key, uint32_t klen)
{
	memcpy(out, key, SFS_KEY_PREFIX);
	for (unsigned i = 0; i < NS_LEN; i++)
		out[SFS_KEY_PREFIX + i] = (unsigned char)(ns >> (56 - 8 * i));
	memcpy(out + SFS_KEY_PREFIX + NS_LEN, (const char *)key + SFS_KEY_PREFIX,
	       klen - SFS_KEY_PREFIX);
	return klen + NS_LEN;
}

/* The first key after every key that starts with @p[0, @n): @p + 1. */
static void prefix_end(unsigned char *p, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;)
		if (++p[i] != 0)
			return;
}

/* ---- writer ------------------------------------------------------------------- */

struct wcf {
	rocksdb_column_family_handle_t *h;
	rocksdb_options_t *o;
	uint64_t applied;       /* its marker */
	int touched;            /* has entries in the batch */
};

struct sfs_target_writer {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	uint32_t worker;
	struct sfs_rdbt_pub *pub;
	char path[PATH_MAX];
	rocksdb_options_t *dbo;
	rocksdb_cache_t *cache;
	rocksdb_t *db;
	rocksdb_writeoptions_t *wo;
	rocksdb_flushoptions_t *fo;
	rocksdb_readoptions_t *ro;
	rocksdb_column_family_handle_t *def;	/* only to destroy: the default family
						 * is used through the non-_cf calls */
	rocksdb_options_t *defo;
	struct wcf cf[SFS_MAX_STATES];
	rocksdb_writebatch_t *wb;
	uint64_t wb_seq;        /* the buffer the batch holds, 0 none */
	int written;            /* the batch is in the memtables, a flush is due */
	int flushing;           /* its flush is scheduled, not yet installed */
	uint64_t flush_t0;      /* when it was scheduled */
	int marked;             /* the applied markers are in the batch */
	uint64_t purge_token;   /* grace period before the next deletion window */
	unsigned char kbuf[KBUF];
	unsigned char kend[KBUF];
};

static void w_close_db(struct sfs_target_writer *w)
{
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (w->cf[i].h)
			rocksdb_column_family_handle_destroy(w->cf[i].h);
		if (w->cf[i].o)
			rocksdb_options_destroy(w->cf[i].o);
		w->cf[i] = (struct wcf){ 0 };
	}
	if (w->def)
		rocksdb_column_family_handle_destroy(w->def);
	w->def = NULL;
	if (w->db)
		rocksdb_close(w->db);
	w->db = NULL;
}

static uint64_t read_marker(rocksdb_t *db, const rocksdb_readoptions_t *ro,
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

/* Open the primary with every column family it has; 1 if it belongs to
 * this segment (identity key matches @ident), 0 if not, < 0 error. */
static int w_open_db(struct sfs_target_writer *w, const char *ident)
{
	char *err = NULL, **names = NULL;
	size_t ncf = 0;
	int rc = 0, mine = 0;

	names = rocksdb_list_column_families(w->dbo, w->path, &ncf, &err);
	if (err) {	/* no instance yet (the C API returns an empty list anyway) */
		rocksdb_free(err);
		err = NULL;
		if (names)
			rocksdb_list_column_families_destroy(names, 0);
		names = NULL;
		ncf = 0;
	}
	if (ncf == 0) {
		w->db = rocksdb_open(w->dbo, w->path, &err);
		if (err || !w->db)
			return (rc = rdbt_err(w->path, &err, "open")) ? rc : -EIO;
	} else {
		const char **cn = calloc(ncf, sizeof(*cn));
		const rocksdb_options_t **co = calloc(ncf, sizeof(*co));
		rocksdb_column_family_handle_t **ch = calloc(ncf, sizeof(*ch));
		rocksdb_options_t **own = calloc(ncf, sizeof(*own));

		if (!cn || !co || !ch || !own) {
			rc = -ENOMEM;
			goto out_lists;
		}
		for (size_t i = 0; i < ncf; i++) {
			int sid = strcmp(names[i], "default") ? cf_state(w->seg, names[i]) : -1;

			cn[i] = names[i];
			own[i] = strcmp(names[i], "default") ? cf_options(desc_of(w->seg, sid), w->cache)
							      : NULL;
			co[i] = own[i] ? own[i] : w->defo;
		}
		w->db = rocksdb_open_column_families(w->dbo, w->path, (int)ncf, cn, co, ch, &err);
		if (err || !w->db) {
			rc = rdbt_err(w->path, &err, "open");
			rc = rc ? rc : -EIO;
			for (size_t i = 0; i < ncf; i++)
				if (own[i])
					rocksdb_options_destroy(own[i]);
			goto out_lists;
		}
		for (size_t i = 0; i < ncf; i++) {
			int sid = own[i] ? cf_state(w->seg, names[i]) : -1;

			if (!own[i]) {
				w->def = ch[i];
			} else if (sid >= 0 && !w->cf[sid].h) {
				w->cf[sid].h = ch[i];
				w->cf[sid].o = own[i];
			} else {	/* of another job's registry: never read */
				rocksdb_column_family_handle_destroy(ch[i]);
				rocksdb_options_destroy(own[i]);
			}
		}
out_lists:
		free(cn);
		free(co);
		free(ch);
		free(own);
		if (rc)
			goto out;
	}
	{
		size_t len = 0;
		char *v = rocksdb_get(w->db, w->ro, IDENT_KEY, sizeof(IDENT_KEY) - 1, &len, &err);

		if (err) {
			rc = rdbt_err(w->path, &err, "read identity");
			goto out;
		}
		mine = v && len == strlen(ident) && memcmp(v, ident, len) == 0;
		if (v)
			rocksdb_free(v);
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->cf[i].h)
			w->cf[i].applied = read_marker(w->db, w->ro, w->cf[i].h);
	rc = mine;
out:
	if (names)
		rocksdb_list_column_families_destroy(names, ncf);
	return rc;
}

/* A fresh instance for this segment: whatever a previous job left at the
 * path is destroyed, the identity written and flushed. */
static int w_fresh(struct sfs_target_writer *w, const char *ident)
{
	char *err = NULL;
	int rc;

	w_close_db(w);
	rocksdb_destroy_db(w->dbo, w->path, &err);
	if ((rc = rdbt_err(w->path, &err, "destroy a previous job's instance")))
		return rc;
	w->db = rocksdb_open(w->dbo, w->path, &err);
	if (err || !w->db)
		return (rc = rdbt_err(w->path, &err, "open")) ? rc : -EIO;
	rocksdb_put(w->db, w->wo, IDENT_KEY, sizeof(IDENT_KEY) - 1, ident, strlen(ident), &err);
	if ((rc = rdbt_err(w->path, &err, "write identity")))
		return rc;
	{
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();

		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(w->db, fo, &err);
		rocksdb_flushoptions_destroy(fo);
	}
	return rdbt_err(w->path, &err, "flush identity");
}

static void rdbt_close(struct sfs_target_writer *w)
{
	char *err = NULL;

	if (!w)
		return;
	if (w->pub)
		sfs_log("rocksdb target %s: %llu commits, %llu entries (%llu skipped), write %.1f ms, "
			"flush %.1f ms, %llu deletion windows",
			w->path, (unsigned long long)w->pub->rp_commits,
			(unsigned long long)w->pub->rp_entries,
			(unsigned long long)w->pub->rp_skipped, w->pub->rp_write_ns / 1e6,
			w->pub->rp_flush_ns / 1e6, (unsigned long long)w->pub->rp_purges);
	if (w->db) {
		/* Leave the deletion count as RocksDB starts it: the next
		 * open disables again. */
		rocksdb_enable_file_deletions(w->db, 1, &err);
		if (err)
			rocksdb_free(err);
	}
	w_close_db(w);
	if (w->wb)
		rocksdb_writebatch_destroy(w->wb);
	if (w->wo)
		rocksdb_writeoptions_destroy(w->wo);
	if (w->fo)
		rocksdb_flushoptions_destroy(w->fo);
	if (w->ro)
		rocksdb_readoptions_destroy(w->ro);
	if (w->defo)
		rocksdb_options_destroy(w->defo);
	if (w->dbo)
		rocksdb_options_destroy(w->dbo);
	if (w->cache)
		rocksdb_cache_destroy(w->cache);
	free(w);
}

static int pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_rdbt_pub **out)
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

static int rdbt_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		     const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	char ident[SFS_JOB_NAME_MAX + 64], *err = NULL;
	int rc;

	(void)cfg;
	if (!w)
		return -ENOMEM;
	w->seg = s;
	w->self = self;
	w->worker = worker;
	if ((rc = inst_path(s, worker, w->path, sizeof(w->path))) || (rc = mkdirs(w->path)))
		goto fail;
	if ((rc = pub_find(s, worker, 1, &w->pub)))
		goto fail;
	snprintf(ident, sizeof(ident), "%s/%llu/%llu", s->hdr->sh_job,
		 (unsigned long long)s->hdr->sh_created_ns,
		 (unsigned long long)s->hdr->sh_generation);
	w->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
	w->dbo = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(w->dbo, 1);
	rocksdb_options_set_create_missing_column_families(w->dbo, 1);
	rocksdb_options_set_atomic_flush(w->dbo, 1);
	rocksdb_options_set_max_open_files(w->dbo, -1);
	rocksdb_options_set_keep_log_file_num(w->dbo, 4);
	/* Flushes and compactions in RocksDB's own threads of this process,
	 * a flush never queued behind a compaction. */
	rocksdb_options_set_max_background_jobs(w->dbo, 4);
	w->defo = rocksdb_options_create();
	w->wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(w->wo, 1);
	/* A write RocksDB would stall (too many L0 files) fails instead and
	 * the commit is retried: the flush loop never blocks in RocksDB. */
	rocksdb_writeoptions_set_no_slowdown(w->wo, 1);
	w->fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(w->fo, 0);
	w->ro = rocksdb_readoptions_create();
	w->wb = rocksdb_writebatch_create();
	rc = w_open_db(w, ident);
	if (rc == 0)
		rc = w_fresh(w, ident);
	else if (rc == 1)
		rc = 0;
	if (rc)
		goto fail;
	rocksdb_disable_file_deletions(w->db, &err);
	if ((rc = rdbt_err(w->path, &err, "disable file deletions")))
		goto fail;
	/* A reader may still replay edits of the previous primary. */
	w->purge_token = sfs_qsbr_start(s->hdr);
	if (sfs_load_acquire(&w->pub->rp_magic) != SFS_RDBT_MAGIC)
		sfs_store_release(&w->pub->rp_magic, SFS_RDBT_MAGIC);
	sfs_store_release(&w->pub->rp_cf_gen, w->pub->rp_cf_gen + 1);
	*out = w;
	return 0;
fail:
	rdbt_close(w);
	return rc;
}

static struct wcf *w_cf(struct sfs_target_writer *w, uint32_t sid)
{
	struct wcf *c = &w->cf[sid];
	char name[sizeof(CF_PREFIX) + SFS_STATE_NAME_MAX], *err = NULL;

	if (c->h)
		return c;
	snprintf(name, sizeof(name), CF_PREFIX "%s", w->seg->hdr->sh_states[sid].sd_name);
	c->o = cf_options(&w->seg->hdr->sh_states[sid], w->cache);
	c->h = rocksdb_create_column_family(w->db, c->o, name, &err);
	if (err || !c->h) {
		int rc = rdbt_err(w->path, &err, "create column family");

		(void)rc;
		if (!err && !c->h)
			sfs__err(-EIO, "rocksdb target %s: column family %s: no handle", w->path,
				 name);
		rocksdb_options_destroy(c->o);
		c->o = NULL;
		c->h = NULL;
		return NULL;
	}
	c->applied = 0;
	sfs_store_release(&w->pub->rp_cf_gen, w->pub->rp_cf_gen + 1);
	return c;
}

static void rollback(struct sfs_target_writer *w)
{
	char *err = NULL;

	rocksdb_writebatch_rollback_to_save_point(w->wb, &err);
	if (err)
		rocksdb_free(err);
}

static int kind_of_state(const struct sfs_seg *s, uint32_t sid)
{
	return sid < SFS_MAX_STATES ? (int)s->hdr->sh_states[sid].sd_kind : 0;
}

/* One map (a parent's run @v[0, @n), every namespace in it): per
 * namespace, a DeleteRange when the buffer cleared it, then its entries. */
static int w_map(struct sfs_target_writer *w, struct wcf *c, const struct sfs_wbuf_view *v,
		 unsigned n, uint32_t plen)
{
	for (unsigned i = 0; i < n; i++) {
		struct sfs_map_head hd = { 0, 0 };
		int seen = 0, cleared = 0;
		uint64_t ns = v[i].ns;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = v[j].ns == ns;
		if (seen)
			continue;
		for (unsigned j = i; j < n; j++)
			if (v[j].ns == ns && v[j].klen == plen && v[j].len == sizeof(hd)) {
				memcpy(&hd, v[j].value, sizeof(hd));
				cleared = hd.mh_clear_pos != 0;
			}
		if (cleared) {
			uint32_t pl = enc_key(w->kbuf, ns, v[i].key, plen);

			memcpy(w->kend, w->kbuf, pl);
			prefix_end(w->kend, pl);
			rocksdb_writebatch_delete_range_cf(w->wb, c->h, (const char *)w->kbuf, pl,
							   (const char *)w->kend, pl);
		}
		for (unsigned j = i; j < n; j++) {
			struct sfs_map_ent me = { 0, SFS_MAP_REMOVED };
			uint32_t kl;

			if (v[j].ns != ns || v[j].klen == plen)
				continue;
			if (cleared && v[j].off < hd.mh_clear_pos)
				continue;	/* written before the clear: gone */
			if (v[j].len >= sizeof(me))
				memcpy(&me, v[j].value, sizeof(me));
			kl = enc_key(w->kbuf, ns, v[j].key, v[j].klen);
			if (me.me_flags & SFS_MAP_REMOVED)
				rocksdb_writebatch_delete_cf(w->wb, c->h, (const char *)w->kbuf, kl);
			else
				rocksdb_writebatch_put_cf(w->wb, c->h, (const char *)w->kbuf, kl,
							  (const char *)v[j].value + sizeof(me),
							  v[j].len - sizeof(me));
		}
	}
	return 0;
}

static int rdbt_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		      uint64_t seq)
{
	uint64_t skipped = 0, written = 0;

	if (w->wb_seq != seq) {
		/* A batch of another buffer that never committed: this flush
		 * starts over (the loop flushes in seq order). */
		rocksdb_writebatch_clear(w->wb);
		for (unsigned i = 0; i < SFS_MAX_STATES; i++)
			w->cf[i].touched = 0;
		w->wb_seq = seq;
		w->written = 0;
		w->flushing = 0;
		w->marked = 0;
	}
	if (w->written)
		return 0;	/* the batch is already written: commit finishes it */
	rocksdb_writebatch_set_save_point(w->wb);
	for (unsigned i = 0; i < n; i++) {
		uint32_t sid, kl;
		struct wcf *c;
		int kind;

		if (v[i].klen < SFS_KEY_PREFIX) {
			rollback(w);
			return sfs__err(SFS_ECORRUPT, "rocksdb target %s: key of %u bytes", w->path,
					v[i].klen);
		}
		sid = sfs_key_prefix_state(v[i].key);
		kind = kind_of_state(w->seg, sid);
		if (sid >= SFS_MAX_STATES || !(c = w_cf(w, sid))) {
			rollback(w);
			return sid >= SFS_MAX_STATES
				       ? sfs__err(SFS_ECORRUPT, "rocksdb target %s: state id %u",
						  w->path, sid)
				       : -EIO;
		}
		if (kind == SFS_STATE_MAP || kind == SFS_STATE_LIST) {
			uint32_t plen = sfs_map_parent_len(v[i].key, v[i].klen);
			unsigned run = 1;

			if (!plen) {
				rollback(w);
				return sfs__err(SFS_ECORRUPT,
						"rocksdb target %s: malformed map key of %u bytes",
						w->path, v[i].klen);
			}
			while (i + run < n && v[i + run].klen >= plen &&
			       memcmp(v[i + run].key, v[i].key, plen) == 0)
				run++;
			if (c->applied >= seq) {
				skipped += run;
			} else {
				w_map(w, c, &v[i], run, plen);
				c->touched = 1;
				written += run;
			}
			i += run - 1;
			continue;
		}
		if (c->applied >= seq) {
			skipped++;
			continue;	/* a redone flush: this state holds @seq already */
		}
		c->touched = 1;
		written++;
		kl = enc_key(w->kbuf, v[i].ns, v[i].key, v[i].klen);
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rocksdb_writebatch_put_cf(w->wb, c->h, (const char *)w->kbuf, kl, v[i].value,
						  v[i].len);
			break;
		case SFS_WBUF_DELETE:
			rocksdb_writebatch_delete_cf(w->wb, c->h, (const char *)w->kbuf, kl);
			break;
		case SFS_WBUF_MERGE: {
			int64_t d = sfs_wbuf_view_i64(&v[i]);

			rocksdb_writebatch_merge_cf(w->wb, c->h, (const char *)w->kbuf, kl,
						    (const char *)&d, 8);
			break;
		}
		default:
			rollback(w);
			return sfs__err(SFS_ECORRUPT, "rocksdb target %s: entry of unknown kind %u",
					w->path, v[i].kind);
		}
	}
	{
		char *err = NULL;

		rocksdb_writebatch_pop_save_point(w->wb, &err);
		if (err)
			rocksdb_free(err);
	}
	sfs_store_relaxed(&w->pub->rp_skipped, w->pub->rp_skipped + skipped);
	sfs_store_relaxed(&w->pub->rp_entries, w->pub->rp_entries + written);
	fault("apply");
	return 0;
}

/* Open a file-deletion window once the grace period of the last one's
 * successor has passed: obsolete files go now. */
static int rdbt_busy(struct sfs_target_writer *w)
{
	char *err = NULL;

	if (!w->purge_token || sfs_qsbr_check(w->seg, w->self, w->purge_token, 0) != 1)
		return w->purge_token != 0 || w->flushing;
	rocksdb_enable_file_deletions(w->db, 0, &err);
	if (err)
		rocksdb_free(err);
	err = NULL;
	rocksdb_disable_file_deletions(w->db, &err);
	if (err)
		rocksdb_free(err);
	w->purge_token = 0;
	sfs_store_relaxed(&w->pub->rp_purges, w->pub->rp_purges + 1);
	return w->flushing;
}

/* 1 when no memtable of a touched family waits for its flush any more (the
 * flush's files are in the MANIFEST), 0 while one does, < 0 when RocksDB
 * stopped on a background error (a failed flush: disk full, I/O). */
static int flushed(struct sfs_target_writer *w)
{
	uint64_t v = 0;

	if (rocksdb_property_int(w->db, "rocksdb.background-errors", &v) == 0 && v > 0)
		return sfs__err(-EIO, "rocksdb target %s: %llu background errors (a flush failed; "
				"see its LOG)", w->path, (unsigned long long)v);
	for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
		if (!w->cf[i].touched)
			continue;
		if (rocksdb_property_int_cf(w->db, w->cf[i].h, "rocksdb.num-immutable-mem-table",
					    &v) != 0 || v != 0)
			return 0;
		if (rocksdb_property_int_cf(w->db, w->cf[i].h, "rocksdb.mem-table-flush-pending",
					    &v) != 0 || v != 0)
			return 0;
	}
	return 1;
}

static int rdbt_commit(struct sfs_target_writer *w, uint64_t seq)
{
	char *err = NULL;
	int rc, any = 0;
	uint64_t t0;

	if (w->wb_seq == seq)
		for (unsigned i = 0; i < SFS_MAX_STATES; i++)
			any |= w->cf[i].touched;
	if (!any) {
		/* Nothing of this buffer to write (empty, or all applied). */
		rocksdb_writebatch_clear(w->wb);
		w->wb_seq = 0;
		w->written = 0;
		w->flushing = 0;
		w->marked = 0;
		if (seq > w->pub->rp_applied)
			sfs_store_release(&w->pub->rp_applied, seq);
		return 0;
	}
	if (!w->written) {
		if (!w->marked)
			for (unsigned i = 0; i < SFS_MAX_STATES; i++)
				if (w->cf[i].touched)
					rocksdb_writebatch_put_cf(w->wb, w->cf[i].h, MARKER_KEY,
								  MARKER_LEN, (const char *)&seq, 8);
		w->marked = 1;
		t0 = sfs_now_ns();
		rocksdb_write(w->db, w->wo, w->wb, &err);
		if (err && strncmp(err, "Incomplete", 10) == 0) {
			/* A write stall (no_slowdown): try again at the next step. */
			rocksdb_free(err);
			return -EAGAIN;
		}
		if ((rc = rdbt_err(w->path, &err, "write a buffer's batch")))
			return rc;	/* not written: retried whole */
		w->written = 1;
		sfs_store_relaxed(&w->pub->rp_write_ns, w->pub->rp_write_ns + (sfs_now_ns() - t0));
		fault("write");
	}
	if (!w->flushing) {
		/* Switch every touched family's memtable and schedule the flush
		 * (atomic_flush: one MANIFEST edit for all of them); commit is
		 * called again until it is installed, so the compactor's loop
		 * never blocks on a flush (nor misses its heartbeat). */
		for (unsigned i = 0; i < SFS_MAX_STATES; i++) {
			if (!w->cf[i].touched)
				continue;
			rocksdb_flush_cf(w->db, w->fo, w->cf[i].h, &err);
			if ((rc = rdbt_err(w->path, &err, "flush (make a buffer durable)")))
				return rc;	/* retried: only the flush again */
		}
		w->flushing = 1;
		w->flush_t0 = sfs_now_ns();
	}
	rc = flushed(w);
	if (rc <= 0)
		return rc < 0 ? rc : -EAGAIN;	/* not yet: called again */
	w->flushing = 0;
	fault("flush");
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (w->cf[i].touched) {
			w->cf[i].applied = seq;
			w->cf[i].touched = 0;
		}
	rocksdb_writebatch_clear(w->wb);
	w->wb_seq = 0;
	w->written = 0;
	w->marked = 0;
	sfs_store_relaxed(&w->pub->rp_flush_ns,
			  w->pub->rp_flush_ns + (sfs_now_ns() - w->flush_t0));
	sfs_store_relaxed(&w->pub->rp_commits, w->pub->rp_commits + 1);
	sfs_store_release(&w->pub->rp_applied, seq);
	sfs_store_release(&w->pub->rp_published, w->pub->rp_published + 1);
	if (!w->purge_token)
		w->purge_token = sfs_qsbr_start(w->seg->hdr);
	(void)rdbt_busy(w);
	return 0;
}

static int rdbt_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path),
		      void *arg)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(w->db);
	char p[PATH_MAX * 2];
	int rc = 0;

	if (!lf)
		return 0;
	for (int i = 0; rc == 0 && i < rocksdb_livefiles_count(lf); i++) {
		snprintf(p, sizeof(p), "%s%s", w->path, rocksdb_livefiles_name(lf, i));
		rc = fn(arg, p);
	}
	rocksdb_livefiles_destroy(lf);
	return rc;
}

/* ---- reader ------------------------------------------------------------------- */

struct achunk {
	struct achunk *next;
	size_t used, size;
	char data[];
};

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	struct sfs_rdbt_pub *pub;
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
	struct achunk *arena;
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

static void *arena_copy(struct sfs_target_reader *r, const void *p, size_t n)
{
	struct achunk *c = r->arena;
	void *out;

	if (!c || c->size - c->used < n) {
		size_t size = n > ARENA_CHUNK ? n : ARENA_CHUNK;

		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->size = size;
		c->used = 0;
		c->next = r->arena;
		r->arena = c;
	}
	out = c->data + c->used;
	c->used += (n + 7) & ~(size_t)7;
	if (c->used > c->size)
		c->used = c->size;
	memcpy(out, p, n);
	return out;
}

/* Keep one standard chunk for the next batch. */
static void arena_reset(struct sfs_target_reader *r)
{
	struct achunk *keep = NULL;

	while (r->arena) {
		struct achunk *c = r->arena;

		r->arena = c->next;
		if (!keep && c->size == ARENA_CHUNK) {
			keep = c;
			continue;
		}
		free(c);
	}
	if (keep) {
		keep->used = 0;
		keep->next = NULL;
	}
	r->arena = keep;
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

static int rdbt_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	static unsigned nth;
	struct sfs_target_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	if ((rc = inst_path(s, worker, r->path, sizeof(r->path)))) {
		free(r);
		return rc;
	}
	if ((size_t)snprintf(r->spath, sizeof(r->spath), "%s.sec/%d.%u", r->path, (int)getpid(),
			     nth++) >= sizeof(r->spath)) {
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
	if ((rc = mkdirs(r->spath)))
		return rc;
	names = rocksdb_list_column_families(r->dbo, r->path, &ncf, &err);
	if (err) {
		if (names)
			rocksdb_list_column_families_destroy(names, 0);
		return rdbt_err(r->path, &err, "list column families");
	}
	cn = calloc(ncf, sizeof(*cn));
	co = calloc(ncf, sizeof(*co));
	ch = calloc(ncf, sizeof(*ch));
	if (!cn || !co || !ch) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ncf; i++) {
		int sid = cf_state(r->seg, names[i]);

		cn[i] = names[i];
		if (sid >= 0 && !r->cfo[sid]) {
			r->cfo[sid] = cf_options(desc_of(r->seg, sid), r->cache);
			co[i] = r->cfo[sid];
		} else {
			co[i] = r->defo;
		}
	}
	r->db = rocksdb_open_as_secondary_column_families(r->dbo, r->path, r->spath, (int)ncf, cn,
							   co, ch, &err);
	if (err || !r->db) {
		rc = rdbt_err(r->path, &err, "open as secondary");
		rc = rc ? rc : -EIO;
		goto out;
	}
	for (size_t i = 0; i < ncf; i++) {
		int sid = cf_state(r->seg, names[i]);

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

/* Follow the primary when it published a version since the last time. */
static int r_refresh(struct sfs_target_reader *r)
{
	uint64_t v, g;
	char *err = NULL;
	int rc;

	if (!r->pub) {
		if ((rc = pub_find(r->seg, r->worker, 0, &r->pub)))
			return rc;
		if (!r->pub)
			return 0;	/* nothing flushed yet: an empty store */
	}
	v = sfs_load_acquire(&r->pub->rp_published);
	g = sfs_load_acquire(&r->pub->rp_cf_gen);
	if (r->db && v == r->seen && g == r->cf_gen)
		return 0;
	if (!r->db || g != r->cf_gen) {
		if ((rc = r_open_db(r)))
			return rc;
		r->cf_gen = g;
	} else {
		rocksdb_try_catch_up_with_primary(r->db, &err);
		if (err) {
			/* Retry once from scratch: a reopen reads CURRENT anew. */
			rocksdb_free(err);
			if ((rc = r_open_db(r)))
				return rc;
		}
	}
	for (unsigned i = 0; i < SFS_MAX_STATES; i++)
		if (r->cf[i])
			r->applied[i] = read_marker(r->db, r->ro, r->cf[i]);
	r->seen = v;
	return 0;
}

static int rdbt_catch_up(struct sfs_target_reader *r)
{
	arena_reset(r);
	return r_refresh(r);
}

static int fill(struct sfs_target_reader *r, struct sfs_probe_result *res, const char *v,
		size_t len, uint32_t sid)
{
	res->found = 1;
	res->value = len ? arena_copy(r, v, len) : "";
	res->len = (uint32_t)len;
	res->tag = r->applied[sid];
	if (!res->value)
		return sfs__err(-ENOMEM, "rocksdb target %s: no memory for a %zu-byte value", r->path,
				len);
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
		r->mkl[i] = enc_key(r->mkeys + at, keys[i].ns, keys[i].key, keys[i].klen);
		at += r->mkl[i];
		r->merr[i] = NULL;
		r->mv[i] = NULL;
	}
	rocksdb_batched_multi_get_cf(r->db, r->ro, r->cf[sid], n, r->mkp, r->mkl, r->mv, r->merr,
				     0);
	for (unsigned i = 0; i < n; i++) {
		res[i] = (struct sfs_probe_result){ 0 };
		if (r->merr[i]) {
			int e = rdbt_err(r->path, &r->merr[i], "multiget");

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

static int rdbt_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
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

static int rdbt_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
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
	kl = enc_key(r->kbuf, parent->ns, parent->key, parent->klen);
	memcpy(r->kbuf + kl, ukey, ulen);
	ps = rocksdb_get_pinned_cf(r->db, r->ro, r->cf[sid], (const char *)r->kbuf, kl + ulen, &err);
	if (err)
		return rdbt_err(r->path, &err, "map get");
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
static int rdbt_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
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
	pl = enc_key(lo, parent->ns, parent->key, parent->klen);
	memcpy(hi, lo, pl);
	prefix_end(hi, pl);
	ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_iterate_lower_bound(ro, (const char *)lo, pl);
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)hi, pl);
	if (pl >= MAP_PREFIX_LEN)
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
		e[ne].k = kl > pl ? arena_copy(r, k + pl, kl - pl) : "";
		e[ne].v = vl ? arena_copy(r, v, vl) : "";
		e[ne].kl = (uint32_t)(kl - pl);
		e[ne].vl = (uint32_t)vl;
		if (!e[ne].k || !e[ne].v)
			rc = -ENOMEM;
		ne++;
	}
	if (rc == 0) {
		rocksdb_iter_get_error(it, &err);
		rc = rdbt_err(r->path, &err, "map iterate");
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	free(lo);
	for (size_t i = 0; rc == 0 && i < ne; i++)
		rc = fn(arg, e[i].k, e[i].kl, e[i].v, e[i].vl);
	free(e);
	return rc;
}

static void rdbt_reader_close(struct sfs_target_reader *r)
{
	if (!r)
		return;
	r_close_db(r);
	arena_reset(r);
	free(r->arena);
	free(r->mkeys);
	if (r->ro)
		rocksdb_readoptions_destroy(r->ro);
	if (r->dbo)
		rocksdb_options_destroy(r->dbo);
	if (r->defo)
		rocksdb_options_destroy(r->defo);
	if (r->cache)
		rocksdb_cache_destroy(r->cache);
	rm_tree(r->spath);
	free(r);
}

const struct sfs_target_ops sfs_target_rocksdb = {
	.name = "rocksdb",
	.open = rdbt_open,
	.apply = rdbt_apply,
	.commit = rdbt_commit,
	.busy = rdbt_busy,
	.files = rdbt_files,
	.close = rdbt_close,
	.reader_open = rdbt_reader_open,
	.catch_up = rdbt_catch_up,
	.probe = rdbt_probe,
	.map_get = rdbt_map_get,
	.map_iter = rdbt_map_iter,
	.reader_close = rdbt_reader_close,
};
