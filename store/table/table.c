/*
 * table.c — the `table` flush target's writer (the compactor): barrier
 * deltas into Paimon-style tables (files and keys: table.h; reading:
 * table_read.c, table_view.h).
 *
 * One table per registered state per worker, in <store>/s<sid>/.  The
 * compactor's main thread stages a sealed buffer's entries per table
 * (apply), then commits them one touched table per commit(seq) call
 * (-EAGAIN until the last, which publishes), under the table's lock:
 *
 *  1. Map diff (map and list state).  The staged entries are compared with
 *     the image the table holds (one batch probe): an entry equal to its
 *     stored value is dropped, a removal of an absent entry too; a clear
 *     becomes a tombstone for each stored entry of the map that the buffer
 *     does not write again (one prefix scan).  So a changed row of a 3-row
 *     map writes 1 row and a reverted change writes none.
 *  2. Data commit.  The delta is written as one small level-0 data file
 *     (LZ4) and committed as a snapshot (kind DATA, watermark = seq): from
 *     here the buffer is durable.
 *  3. The minimal round.  That level-0 file is up-levelled at once: its
 *     keys are looked up in the table's level >= 1 files (the map diff's
 *     lookups when it made them, else one batch probe per file, positions
 *     only — values only for counters, whose deltas are folded over the
 *     base here: the aggregation merge), every
 *     superseded row gets a bit in its file's deletion vector, tombstones
 *     vanish, and the rows become a level-1 file — the same file relabelled
 *     when it holds puts only (no rewrite), else a rewrite of the delta.  One
 *     snapshot (kind COMPACT) commits the relabel or rewrite and the new
 *     deletion-vector index.  Cost: O(delta x log), never O(table) — except
 *     the vector index, rewritten whole per round (vectors are small: runs
 *     or bitmaps of superseded rows; a per-file index would make it
 *     O(files touched)).  A level >= 1 file whose rows are all masked
 *     leaves the table in the same commit.
 *  After the round every file of the table is standalone-correct with its
 *  vector applied: a read is a raw probe, no merge reader.  With the round
 *  switched off (SFS_TABLE_ROUND=0: the "background only" ablation) step 3
 *  runs on the background thread instead and readers merge level 0.
 *
 * The background thread (one per writer, i.e. per worker store) runs the
 * discretionary shaping merges: when a level holds FANIN files, they are
 * merged into one file of the next level (tiered, size ratio ~FANIN per
 * level; LZ4 to level 2, ZSTD from SFS_TABLE_ZSTD_FROM = 3).  Rows of
 * level >= 1 files are disjoint once masked, so a merge is a plain k-way
 * merge, no resolution.  It reads its
 * inputs without the table lock (files are immutable; its own readers,
 * the vectors copied); barrier rounds meanwhile may set more bits in the
 * inputs' vectors, which the merge carries over to the output by a
 * position map when it commits under the lock.  So merges may lag
 * arbitrarily without changing any result and never hold up a barrier
 * for longer than their commit.
 *
 * Maintenance session: a table's live file set, its vectors and its
 * watermark are loaded once (the full manifest chain, at open) and then
 * kept current from this writer's own commits — each commit folds just its
 * delta into the set (SFS_TABLE_SESSION=0: the ablation re-walks the whole
 * chain before every commit).  Every 32 commits the base manifest list is
 * rebased on the live set, and snapshots older than the previous one are
 * expired.
 *
 * Publication: after a commit the live files of every table (names,
 * levels, vector index names) and the applied seq are published in the
 * worker's region under a seqlock (table.h); readers catch up from it.
 * Files that leave the live set are unlinked after a QSBR grace period
 * (a reader that has not caught up may still open them).
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
 * Checkpoints: snapshot() links each table's live files and vector index
 * into the stage, flat, and writes TABLES (store/table/table_snap.h); a
 * restore puts them back at <store>/ and open() adopts them (links into
 * the table directories, one COMPACT snapshot per table).
 *
 * Rollback in place (store/target.h: pin, rollback; the design is above
 * tbl_pin).  snapshot() also keeps the staged version's metadata in memory
 * (file names, levels, manifest fields, vector index; the last VKEEP);
 * pin() makes one the rollback point, and until the next pin the files
 * it names are parked instead of unlinked when they leave the live set.
 * rollback() commits, per table, one snapshot whose live set is the
 * pinned one, behind an intent file (<store>/ROLLBACK) that the next open
 * finishes, then publishes once: no data file is read or copied.
 *
 * State TTL (common/ttl.h, store/target.h).  ttl() keeps the compactor's
 * rules and the newest buffer's clocks in the writer (relaxed atomics: the
 * background thread reads them; the clocks only move forward; nothing
 * expires before the first call).  The two places that turn rows of
 * several files into new ones drop a TTL state's expired puts, by the
 * engine's tombstone rule: an expired put is a delete of its key.  In the
 * round it masks what it supersedes in level >= 1 (as every row does) and
 * is not written, so the file is rewritten rather than relabelled (a
 * check of its values first: the staged rows in memory, or a pass over
 * the small level-0 file without them).  Below level 0 there are no
 * tombstones to keep: once masked, level >= 1 rows are disjoint, so an
 * expired row a shaping merge meets is the only unmasked version of its
 * key and is dropped whatever the output level — nothing older of it can
 * resurface.  Space: a relabelled or merged file keeps rows that expire
 * later until a shaping merge takes that file (a file of the highest
 * level waits for FANIN files there); a vector bit is never set for
 * expiry alone (it would cost a vector-index rewrite per round).  States
 * without a TTL pay one rule load per round or merge.  Dropped rows are
 * counted (tp_ttl_dropped).  The level-0 file keeps what the compactor
 * handed over (it drops expired entries at flush by the same clock).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fingerprint.h"
#include "common/fs.h"
#include "common/keycmp.h"
#include "common/log.h"
#include "common/merge.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/dvec.h"
#include "store/table/layout/manifest.h"
#include "store/table/layout/sync.h"
#include "shm/atomic.h"
#include "shm/proc.h"
#include "shm/qsbr.h"
#include "store/table/table.h"
#include "store/table/table_int.h"
#include "store/table/table_snap.h"
#include "store/table/table_view.h"
#include "common/keygroup.h"
#include "worker/wbuf.h"

#define FANIN 4u              /* files of a level that trigger a shaping merge */
#define DEBT_FILES (2u * FANIN) /* files of a level that make its merge urgent */
#define MERGE_MAX 8u          /* inputs of one merge */
#define REBASE_EVERY 32u      /* commits between base-list rebases */
#define ROUND_CHUNK 4096u     /* rows per batch probe of a round */
#define BG_POLL_MS 20
#define VKEEP 4u              /* staged versions kept for a pin, besides the pinned one */

/* ---- shared helpers (table_int.h) ---------------------------------------------------- */

uint64_t sfs_table_layout(void)
{
	uint64_t h = SFS_FP_INIT;

	SFS_FP_SIZE(h, struct sfs_table_pub);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_seq);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_published);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_applied);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_ntables);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_tables);
	SFS_FP_FIELD(h, struct sfs_table_pub, tp_files);
	return h;
}

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
	};
	uint32_t on = SFS_TABLE_K_ALL;

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		const char *v = getenv(k[i].env);

		if (v && strcmp(v, "0") == 0)
			on &= ~k[i].bit;
	}
	return on;
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

uint32_t sfs__table_map_prefix(const void *key, size_t klen)
{
	uint32_t p = klen <= UINT32_MAX ? sfs_map_parent_len(key, (uint32_t)klen) : 0;

	return p && (size_t)p + 8 <= klen ? p + 8 : 0;
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

/*
 * Fault injection (tests): kill points (common/fault.h) table.datafile (a
 * level-0 file written, not committed), table.datacommit (committed, not
 * up-levelled), table.roundfile (the round's rewrite written, not
 * committed), table.round (the round committed, not published),
 * table.mergefile, table.merge (the same for a shaping merge),
 * table.rollback.intent, table.rollback.table, table.rollback.done (a
 * rollback's intent written; one more table switched; all switched).
 */

/* ---- the writer's state -------------------------------------------------------------- */

struct tfile {
	char name[SFS_TABLE_NAME];
	uint32_t level;
	uint64_t rows, size;
	uint64_t order;             /* creation order: level 0 is read newest first */
	sfs_df_reader_t *rd;        /* main thread's reader */
	uint64_t *dv;               /* deletion vector (NULL: none yet) */
	size_t dv_words;
	uint64_t dv_set;
	unsigned char *min_key, *max_key;
	uint16_t min_klen, max_klen, kg_lo, kg_hi;
	int merging;                /* an input of the running shaping merge */
};

struct srow {                       /* a staged row: offsets into the stage buffer */
	uint64_t koff, voff;
	uint32_t klen, vlen;
	int kind;                   /* SFS_DF_* */
	int32_t old_file;           /* the map diff's lookup, for the round: the level >= 1
				     * file (t->f index) holding the key, -1 none,
				     * PRE_UNKNOWN not looked up */
	uint64_t old_pos;           /* its row there */
	uint64_t ord;               /* staging order: of equal keys the first staged (the
				     * buffer's own row) sorts first and is the one kept */
};

#define PRE_UNKNOWN (-2)

/*
 * One table, process-local to the compactor.  Two threads use it: the main
 * thread (apply, commit, snapshot) and the background thread (shaping
 * merges; rounds when they are not at the barrier).  t->mu guards the file
 * set (f, nf), the vectors, snap, watermark, commits, dvi, order, loads and
 * loaded, and every data-file reader in f (a reader is single-threaded);
 * the staging fields are the main thread's alone.  A merge reads its
 * inputs through its own readers, without the lock.
 */
struct table {
	uint32_t sid;
	int kind;                   /* SFS_STATE_* */
	int merge;                  /* counter: its operator; else -1 */
	char dir[640];
	pthread_mutex_t mu;         /* the file set, vectors, snapshots: both threads */
	uint64_t snap;              /* latest committed snapshot */
	uint64_t watermark;         /* its watermark */
	uint32_t commits;           /* since the last rebase */
	struct tfile *f;
	size_t nf, cap;
	char dvi[SFS_TABLE_NAME];   /* current vector index, "" none */
	uint64_t order;
	uint64_t loads;             /* table_load calls: a merge that saw another
				     * load (vectors rolled back) gives up */
	/* staging (main thread only) */
	unsigned char *sb;          /* keys and values */
	size_t sb_len, sb_cap;
	struct srow *rows;
	size_t nrows, rows_cap;
	struct srow *clr;           /* staged clears: the prefix parent | ns of each map
				     * cleared in the buffer (kind DELETE, no value) */
	size_t nclr, clr_cap;
	size_t save_rows, save_sb, save_clr;
	uint64_t save_gen;
	int loaded;
};

/* Scratch of batch lookups: one per thread. */
struct scratch {
	struct sfs_df_key *pk, *sk; /* probe keys, and tv_probe's scratch */
	uint32_t *pi;
	struct sfs_df_hit *ph;
	struct tv_res *pr;
	uint64_t *pm;               /* per probe key: the files that may hold it */
	size_t cap;
	struct sfs_bump arena;
};

/* A kept version (rollback in place: see tbl_pin). */
struct vfile {
	char name[SFS_TABLE_NAME];
	uint32_t level;
	uint64_t rows, size;
	unsigned char *min_key, *max_key;
	uint16_t min_klen, max_klen, kg_lo, kg_hi;
};

struct vtable {
	uint32_t sid;
	char dvi[SFS_TABLE_NAME];
	struct vfile *f;
	size_t nf;
};

struct version {
	uint64_t id;                /* the checkpoint (0: the version at open) */
	uint64_t seq;               /* its applied seq */
	struct vtable t[SFS_MAX_STATES];
	uint32_t nt;
};

/*
 * The writer of one worker's store.  t[] entries are created by the main
 * thread and published to the background thread with a release store;
 * pub (shared memory) is written under pub_mu (publish) or with relaxed
 * counter stores; del[] is guarded by del_mu; the rest is the main
 * thread's.
 */
struct sfs_target_writer {
	struct sfs_seg *seg;
	uint32_t worker;
	const struct sfs_proc_slot *self;
	char base[512];
	uint32_t knobs;
	struct sfs_table_pub *pub;
	struct table *t[SFS_MAX_STATES];
	uint64_t applied;
	uint64_t commit_seq;        /* the buffer being committed, table by table */
	uint64_t commit_ns;         /* its commit time so far */
	int more;                   /* tables of it remain: busy */
	uint64_t gen;               /* apply calls: save points */
	int failing;
	pthread_mutex_t pub_mu;     /* publication: both threads */
	pthread_mutex_t commit_mu;  /* held by the main thread from a buffer's first table
				     * commit to its publication: the background thread
				     * publishes only when it gets it (a set with a table
				     * ahead of w->applied would make readers fold a
				     * buffer's counter deltas twice) */
	int in_commit;              /* the main thread holds commit_mu */
	struct sfs_table_pub_table *gt; /* publish's gathered set (under pub_mu) */
	struct sfs_table_pub_file *gf;
	pthread_mutex_t del_mu;     /* the deferred deletions */
	struct pend {
		char path[1024];
		uint64_t seq;       /* defer order (del_seq) */
		uint64_t token;     /* the grace period, from the first publication
				     * after the defer (valid when published) */
		int published;
	} *del;
	size_t ndel, delcap;
	uint64_t del_seq;
	pthread_t bg;
	int bg_on;
	int bg_idle;                /* background thread: runs under SCHED_IDLE now */
	int bg_can_idle;            /* ... and may switch back (bg_priority) */
	int stop;                   /* close (release), the background thread (relaxed) */
	struct scratch main_sc;     /* lookups of the main thread */
	struct scratch bg_sc;       /* ... and of the background thread */
	/* State TTL (tbl_ttl; ttl_now reads them): written by the main
	 * thread, read by both, relaxed word by word; ttl_on (release) once
	 * the first call stored them. */
	uint64_t ttl_ms[SFS_MAX_STATES];
	uint32_t ttl_event[SFS_MAX_STATES];
	uint64_t ttl_proc_ms, ttl_event_ms;
	int ttl_on;
	/* Rollback in place (tbl_pin, tbl_rollback): the versions staged for
	 * checkpoints (oldest first) and the pinned one, the main thread's;
	 * held (the sorted names of every file and vector index they name)
	 * and hold (files that left the live set while held: unlinked once
	 * no kept version names them) are guarded by del_mu. */
	struct version *staged[VKEEP];
	unsigned nstaged;
	struct version *pinned;
	char (*held)[SFS_TABLE_NAME];
	size_t nheld;
	struct pend *hold;
	size_t nhold, holdcap;
	int rb_failed;              /* a rollback failed midway: never publish again */
};

static struct table *table_at(struct sfs_target_writer *w, uint32_t sid);
static int vtable_capture(struct sfs_target_writer *w, struct table *t, struct vtable *vt);
static int version_keep(struct sfs_target_writer *w, struct version *v);
static void version_free(struct version *v);
static int held_rebuild(struct sfs_target_writer *w);
static void prefix_opts(const struct table *t, struct sfs_df_write_opts *wo);

static uint64_t rand64(void)
{
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = sfs_now_ns() ^ ((uint64_t)getpid() << 32);
	return r;
}

static void new_name(char *buf, uint32_t sid, const char *ext)
{
	snprintf(buf, SFS_TABLE_NAME, "t%u-%016llx.%s", sid, (unsigned long long)rand64(), ext);
}

/* A file name of this store into a name field: ours are short (new_name). */
static int name_set(char *dst, const char *src, const char *where)
{
	size_t n = strlen(src);

	if (n >= SFS_TABLE_NAME)
		return sfs__err(SFS_ECORRUPT, "%s: file name %.40s... is not one of the table "
				"target's", where, src);
	memcpy(dst, src, n + 1);
	return 0;
}

static void scratch_free(struct scratch *sc)
{
	free(sc->pk);
	free(sc->sk);
	free(sc->pi);
	free(sc->ph);
	free(sc->pr);
	free(sc->pm);
	sfs_bump_free(&sc->arena);
	memset(sc, 0, sizeof(*sc));
}

static int scratch_grow(struct scratch *sc, size_t n)
{
	if (n <= sc->cap)
		return 0;
	free(sc->pk);
	free(sc->sk);
	free(sc->pi);
	free(sc->ph);
	free(sc->pr);
	free(sc->pm);
	sc->pk = malloc(n * sizeof(*sc->pk));
	sc->sk = malloc(n * sizeof(*sc->sk));
	sc->pi = malloc(n * sizeof(*sc->pi));
	sc->ph = malloc(n * sizeof(*sc->ph));
	sc->pr = malloc(n * sizeof(*sc->pr));
	sc->pm = malloc(n * sizeof(*sc->pm));
	if (!sc->pk || !sc->sk || !sc->pi || !sc->ph || !sc->pr || !sc->pm) {
		sc->cap = 0;
		return -ENOMEM;
	}
	sc->cap = n;
	return 0;
}

/* Bytes of the file at @path (0 if it cannot be stat'ed): the counted
 * write volume (tp_bytes_written, tp_merge_bytes), one stat per file. */
static uint64_t file_bytes(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* Keys asked and key pages walked so far by the probes of the view's
 * readers (their counters never reset: callers diff two readings). */
static void view_work(const struct tv_file *vf, int nv, uint64_t *keys, uint64_t *pages)
{
	*keys = *pages = 0;
	for (int k = 0; k < nv; k++) {
		const struct sfs_df_counters *c = sfs_df_reader_counters(vf[k].rd);

		*keys += c->probe_keys;
		*pages += c->page_reads;
	}
}

static void count_probe_work(struct sfs_target_writer *w, const struct tv_file *vf, int nv,
			     uint64_t keys0, uint64_t pages0)
{
	uint64_t keys, pages;

	view_work(vf, nv, &keys, &pages);
	uatomic_add(&w->pub->tp_probe_keys, keys - keys0);
	uatomic_add(&w->pub->tp_probe_pages, pages - pages0);
}

static int held_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* 1 if a kept version (staged or pinned) names the file at @path.  del_mu
 * held.  O(log held). */
static int is_held(const struct sfs_target_writer *w, const char *path)
{
	const char *name = strrchr(path, '/');

	name = name ? name + 1 : path;
	return w->nheld && bsearch(name, w->held, w->nheld, sizeof(*w->held), held_cmp) != NULL;
}

/* Append to a pending list (del or hold); 0, or -ENOMEM (the file leaks:
 * the next open's gc collects it).  del_mu held. */
static int pend_push(struct pend **arr, size_t *n, size_t *cap, const char *path, uint64_t seq)
{
	struct pend *d;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct pend *na = realloc(*arr, nc * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	d = &(*arr)[(*n)++];
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->seq = seq;
	d->token = 0;
	d->published = 0;
	return 0;
}

/*
 * Unlink @path once every reader that might still open it caught up.  The
 * grace period starts at the first publication that no longer lists the
 * file (publish), not here: a reader that passes a quiescent point after
 * this call but before that publication still copies a set naming the
 * file.  (Started here, a merge's inputs vanished under readers whenever
 * the background thread ran another merge between its commit and its
 * publication — seen once merges ran at idle priority.)  A file a kept
 * version names (rollback in place) waits in w->hold instead, until no
 * kept version names it (held_rebuild) or a rollback makes it live again
 * (rollback_unhold).
 */
static void defer_unlink(struct sfs_target_writer *w, const char *path)
{
	pthread_mutex_lock(&w->del_mu);
	if (!w->self)
		unlink(path);	/* the supervisor's adopt: no reader exists yet */
	else if (is_held(w, path))
		(void)pend_push(&w->hold, &w->nhold, &w->holdcap, path, ++w->del_seq);
	else
		(void)pend_push(&w->del, &w->ndel, &w->delcap, path, ++w->del_seq);
	pthread_mutex_unlock(&w->del_mu);
}

static int reap(struct sfs_target_writer *w)
{
	size_t k = 0;

	pthread_mutex_lock(&w->del_mu);
	for (size_t i = 0; i < w->ndel; i++) {
		if (w->del[i].published && sfs_qsbr_check(w->seg, w->self, w->del[i].token, 0) == 1)
			unlink(w->del[i].path);
		else
			w->del[k++] = w->del[i];
	}
	w->ndel = k;
	pthread_mutex_unlock(&w->del_mu);
	return k > 0;
}

static void file_free(struct tfile *f)
{
	sfs_df_reader_close(f->rd);
	free(f->dv);
	free(f->min_key);
	free(f->max_key);
	memset(f, 0, sizeof(*f));
}

static void table_drop_files(struct table *t)
{
	for (size_t i = 0; i < t->nf; i++)
		file_free(&t->f[i]);
	t->nf = 0;
	t->dvi[0] = '\0';
}

static struct tfile *file_add(struct table *t)
{
	if (t->nf == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 8;
		struct tfile *nf = realloc(t->f, cap * sizeof(*nf));

		if (!nf)
			return NULL;
		t->f = nf;
		t->cap = cap;
	}
	memset(&t->f[t->nf], 0, sizeof(t->f[0]));
	return &t->f[t->nf++];
}

static void file_remove(struct table *t, size_t i)
{
	file_free(&t->f[i]);
	memmove(&t->f[i], &t->f[i + 1], (t->nf - i - 1) * sizeof(t->f[0]));
	t->nf--;
}

/* Open the file's reader and take its key range from the footer. */
static int file_open(struct table *t, struct tfile *f)
{
	char path[1024];
	struct sfs_df_meta m;
	int rc;

	struct sfs_df_read_opts ropts = { .cache_pages = SFS_TABLE_CACHE_PAGES };

	snprintf(path, sizeof(path), "%s/%s", t->dir, f->name);
	if ((rc = sfs_df_reader_open(path, &ropts, &f->rd)))
		return rc;
	sfs_df_reader_meta(f->rd, &m);
	f->rows = m.rows;
	f->size = m.file_size;
	f->kg_lo = m.kg_lo;
	f->kg_hi = m.kg_hi;
	f->min_klen = (uint16_t)m.min_klen;
	f->max_klen = (uint16_t)m.max_klen;
	f->min_key = malloc(m.min_klen);
	f->max_key = malloc(m.max_klen);
	if (!f->min_key || !f->max_key)
		return -ENOMEM;
	memcpy(f->min_key, m.min_key, m.min_klen);
	memcpy(f->max_key, m.max_key, m.max_klen);
	return 0;
}

static void entry_of(const struct tfile *f, int op, uint32_t level, struct sfs_mf_entry *e)
{
	e->op = op;
	e->file = f->name;
	e->level = level;
	e->rows = f->rows;
	e->size = f->size;
	e->min_key = f->min_key;
	e->max_key = f->max_key;
	e->min_klen = f->min_klen;
	e->max_klen = f->max_klen;
	e->kg_lo = f->kg_lo;
	e->kg_hi = f->kg_hi;
}

static int dv_set_bit(struct tfile *f, uint64_t pos)
{
	if (!f->dv) {
		f->dv_words = sfs_dv_words(f->rows);
		if (!(f->dv = calloc(f->dv_words ? f->dv_words : 1, sizeof(uint64_t))))
			return -ENOMEM;
	}
	if (pos >= f->rows)
		return sfs__err(SFS_ECORRUPT, "%s: row %llu of %llu", f->name,
				(unsigned long long)pos, (unsigned long long)f->rows);
	if (!(f->dv[pos / 64] & (1ull << (pos % 64)))) {
		f->dv[pos / 64] |= 1ull << (pos % 64);
		f->dv_set++;
	}
	return 0;
}

/* Write the table's vector index (every file with a bit set) under a new
 * name into @name ("" when no file has one). */
static int dv_write(struct table *t, char *name)
{
	sfs_dv_builder_t *b;
	char path[1024];
	int rc, any = 0;

	name[0] = '\0';
	if ((rc = sfs_dv_builder_new(&b)))
		return rc;
	for (size_t i = 0; i < t->nf && !rc; i++)
		if (t->f[i].dv_set) {
			rc = sfs_dv_builder_add(b, t->f[i].name, t->f[i].rows, t->f[i].dv,
						t->f[i].dv_words);
			any = 1;
		}
	if (!rc && any) {
		new_name(name, t->sid, "dvi");
		snprintf(path, sizeof(path), "%s/%s", t->dir, name);
		rc = sfs_dv_builder_write(b, path);
		if (rc)
			name[0] = '\0';
	}
	sfs_dv_builder_free(b);
	return rc;
}

/* ---- loading a table (the maintenance session's one full read) ------------------------- */

struct load_ctx {
	struct table *t;
	int rc;
};

static int load_entry(const struct sfs_mf_entry *e, void *arg)
{
	struct load_ctx *c = arg;
	struct table *t = c->t;

	if (e->op == SFS_MF_ADD) {
		struct tfile *f = file_add(t);

		if (!f)
			return -ENOMEM;
		if (name_set(f->name, e->file, t->dir)) {
			t->nf--;
			return SFS_ECORRUPT;
		}
		f->level = e->level;
		f->order = ++t->order;
		return 0;
	}
	for (size_t i = t->nf; i-- > 0;)
		if (strcmp(t->f[i].name, e->file) == 0) {
			file_remove(t, i);
			return 0;
		}
	return sfs__err(SFS_ECORRUPT, "%s: the manifest deletes %s, which is not live", t->dir,
			e->file);
}

static int keep_live(const char *name, void *arg)
{
	struct table *t = arg;

	if (strcmp(name, t->dvi) == 0)
		return 1;
	for (size_t i = 0; i < t->nf; i++)
		if (strcmp(t->f[i].name, name) == 0)
			return 1;
	return 0;
}

/* The vectors of @t's files (none set yet) from its index t->dvi. */
static int dv_load(struct table *t)
{
	sfs_dv_index_t *ix = NULL;
	char path[1024];
	int rc = 0;

	if (!t->dvi[0])
		return 0;
	snprintf(path, sizeof(path), "%s/%s", t->dir, t->dvi);
	if ((rc = sfs_dv_open(path, &ix)))
		return rc;
	for (size_t i = 0; i < t->nf && !rc; i++) {
		struct tfile *f = &t->f[i];
		int k = sfs_dv_find(ix, f->name);
		struct sfs_dv_info info;

		if (k < 0)
			continue;
		sfs_dv_info(ix, (size_t)k, &info);
		if (info.rows != f->rows) {
			rc = sfs__err(SFS_ECORRUPT, "%s: vector of %s covers %llu rows, the file "
				      "has %llu", path, f->name, (unsigned long long)info.rows,
				      (unsigned long long)f->rows);
			break;
		}
		f->dv_words = sfs_dv_words(f->rows);
		if (!(f->dv = calloc(f->dv_words ? f->dv_words : 1, 8)))
			rc = -ENOMEM;
		else if (!(rc = sfs_dv_decode(ix, (size_t)k, f->dv, f->dv_words)))
			f->dv_set = info.deleted;
	}
	sfs_dv_close(ix);
	return rc;
}

/*
 * (Re)load the table from its latest snapshot: the live set, the readers,
 * the vectors, the watermark.  With @gc, orphans are collected (open only:
 * nothing else writes the directory then).
 */
static int table_load(struct table *t, int gc)
{
	struct load_ctx c = { t, 0 };
	struct sfs_mf_snapshot s;
	uint64_t id = 0;
	int rc;

	table_drop_files(t);
	t->loads++;
	t->snap = 0;
	t->watermark = 0;
	t->order = 0;
	if ((rc = sfs_mf_latest(t->dir, &id)))
		return rc;
	if (id) {
		if ((rc = sfs_mf_snapshot_read(t->dir, id, &s)) ||
		    (rc = sfs_mf_for_all(t->dir, &s, load_entry, &c)))
			goto fail;
		t->snap = id;
		t->watermark = s.watermark;
		if ((rc = name_set(t->dvi, s.dv_index, t->dir)))
			goto fail;
	}
	for (size_t i = 0; i < t->nf; i++)
		if ((rc = file_open(t, &t->f[i])))
			goto fail;
	if ((rc = dv_load(t)))
		goto fail;
	if (gc && (rc = sfs_mf_gc(t->dir, keep_live, t)) < 0)
		goto fail;
	t->loaded = 1;
	return 0;
fail:
	table_drop_files(t);
	t->loaded = 0;
	return rc;
}

/*
 * Commit snapshot snap+1 of @t from @e[0..n) and the current vector index;
 * then expire what the previous snapshot alone named.
 */
static int table_commit(struct sfs_target_writer *w, struct table *t, int kind,
			const struct sfs_mf_entry *e, size_t n)
{
	struct sfs_mf_commit c = { .kind = kind, .schema_id = t->sid,
				   .dv_index = t->dvi[0] ? t->dvi : NULL, .entries = e, .n = n,
				   .watermark = t->watermark };
	struct sfs_mf_entry *live = NULL;
	int rc;

	if (++t->commits >= REBASE_EVERY) {
		/* The live set of snapshot snap, as the session holds it, minus
		 * nothing: this commit's delta comes after it. */
		size_t k = 0;

		if (!(live = malloc((t->nf ? t->nf : 1) * sizeof(*live))))
			return -ENOMEM;
		for (size_t i = 0; i < t->nf; i++) {
			int in_delta = 0;

			for (size_t j = 0; j < n && !in_delta; j++)
				in_delta = e[j].op == SFS_MF_ADD && strcmp(e[j].file, t->f[i].name) == 0 &&
					   e[j].level == t->f[i].level;
			if (!in_delta)
				entry_of(&t->f[i], SFS_MF_ADD, t->f[i].level, &live[k++]);
		}
		c.rebase = 1;
		c.rebase_entries = live;
		c.rebase_n = k;
	}
	rc = sfs_mf_commit(t->dir, t->snap + 1, &c);
	free(live);
	if (rc)
		return rc;
	if (c.rebase)
		t->commits = 0;
	t->snap++;
	if (t->snap > 2 && (rc = sfs_mf_expire(t->dir, t->snap - 1)) < 0)
		sfs_log("table %s: expiring snapshots: %s", t->dir, sfs_last_error());
	(void)w;
	return 0;
}

/* A failed step left memory ahead of the disk: back to the last snapshot. */
static void table_recover(struct sfs_target_writer *w, struct table *t, const char *what)
{
	int rc;

	sfs_log("worker %u, table %s: %s failed, back to snapshot %llu: %s", w->worker, t->dir,
		what, (unsigned long long)t->snap, sfs_last_error());
	if (w->pub)
		uatomic_inc(&w->pub->tp_errors);
	if ((rc = table_load(t, 0)))
		sfs_log("worker %u, table %s: reload failed (retried with the commit): %s",
			w->worker, t->dir, sfs_last_error());
}

/* ---- publication ---------------------------------------------------------------------- */

static int lvl_cmp(const void *x, const void *y)
{
	const struct tfile *a = *(const struct tfile *const *)x, *b = *(const struct tfile *const *)y;

	/* level 0 first, newest first; then by level */
	if ((a->level == 0) != (b->level == 0))
		return a->level == 0 ? -1 : 1;
	if (a->level == 0)
		return a->order > b->order ? -1 : a->order < b->order;
	return a->level < b->level ? -1 : a->level > b->level;
}

/* Sorted pointers to @t's files (lvl_cmp); @out holds t->nf. */
static void files_sorted(struct table *t, struct tfile **out)
{
	for (size_t i = 0; i < t->nf; i++)
		out[i] = &t->f[i];
	if (t->nf > 1)
		qsort(out, t->nf, sizeof(*out), lvl_cmp);
}

/*
 * Publish the live set of every table and the applied seq.  Gathered first
 * (each table under its lock, which a round or merge on the other thread
 * may hold for a while), then copied into the region: readers see the
 * seqlock odd only for the copy.  pub_mu serializes the two threads'
 * publications (gather and copy), so the region never goes back to an
 * older set.  Callers hold commit_mu (the set must match the tag: no table
 * may be ahead of w->applied).
 */
static int publish(struct sfs_target_writer *w)
{
	struct sfs_table_pub *p = w->pub;
	struct tfile **tmp = NULL;
	size_t tcap = 0;
	uint32_t nt = 0, nf = 0;
	uint64_t dropped;
	int rc = 0;

	if (w->rb_failed)
		return sfs__err(SFS_ECORRUPT, "worker %u: a rollback failed midway, the tables "
				"are not one version: nothing is published", w->worker);
	pthread_mutex_lock(&w->pub_mu);
	/* files deferred so far have left the sets gathered below */
	pthread_mutex_lock(&w->del_mu);
	dropped = w->del_seq;
	pthread_mutex_unlock(&w->del_mu);
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = table_at(w, sid);
		struct sfs_table_pub_table *pt;

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		if (!t->loaded) {
			pthread_mutex_unlock(&t->mu);
			continue;
		}
		if (t->nf > tcap) {
			free(tmp);
			if (!(tmp = malloc((tcap = t->nf * 2) * sizeof(*tmp)))) {
				tcap = 0;
				rc = -ENOMEM;
			}
		}
		if (!rc && nf + t->nf > SFS_TABLE_PUB_FILES)
			rc = sfs__err(SFS_EFULL, "worker %u: more than %u live table files", w->worker,
				      SFS_TABLE_PUB_FILES);
		if (!rc) {
			pt = &w->gt[nt++];
			pt->pt_sid = sid;
			pt->pt_first = nf;
			pt->pt_nfiles = (uint32_t)t->nf;
			memcpy(pt->pt_dvi, t->dvi, sizeof(pt->pt_dvi));
			files_sorted(t, tmp);
			for (size_t i = 0; i < t->nf; i++, nf++) {
				memcpy(w->gf[nf].pf_name, tmp[i]->name, SFS_TABLE_NAME);
				w->gf[nf].pf_level = tmp[i]->level;
				w->gf[nf].pf_rows = tmp[i]->rows;
			}
		}
		pthread_mutex_unlock(&t->mu);
	}
	if (!rc) {
		/* odd: changing — already odd when a compactor died in this copy
		 * (kill -9): then the torn set stays marked until this copy ends */
		uint64_t seq = p->tp_seq | 1;

		sfs_store_release(&p->tp_seq, seq);
		cmm_smp_wmb();
		memcpy(p->tp_tables, w->gt, nt * sizeof(*w->gt));
		if (nf)
			memcpy(p->tp_files, w->gf, nf * sizeof(*w->gf));
		p->tp_ntables = nt;
		p->tp_nfiles = nf;
		p->tp_applied = w->applied;
		cmm_smp_wmb();
		sfs_store_release(&p->tp_seq, seq + 1);
		sfs_store_release(&p->tp_published, p->tp_published + 1);
		/* their grace period starts now that no published set names them */
		pthread_mutex_lock(&w->del_mu);
		for (size_t i = 0; i < w->ndel; i++)
			if (!w->del[i].published && w->del[i].seq <= dropped) {
				w->del[i].token = sfs_qsbr_start(w->seg->hdr);
				w->del[i].published = 1;
			}
		for (size_t i = 0; i < w->nhold; i++)
			if (w->hold[i].seq <= dropped)
				w->hold[i].published = 1;	/* out of the published set */
		pthread_mutex_unlock(&w->del_mu);
	}
	pthread_mutex_unlock(&w->pub_mu);
	free(tmp);
	return rc;
}

/* ---- state TTL ----------------------------------------------------------------------------- */

/* The target op (store/target.h): the rules copied (the compactor's array
 * lives for the call only), each clock moved forward only.  O(states),
 * once per buffer. */
static void tbl_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		    const struct sfs_ttl_clock *now)
{
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		sfs_store_relaxed(&w->ttl_ms[i], rules[i].ttl_ms);
		sfs_store_relaxed(&w->ttl_event[i], rules[i].event_time);
	}
	/* only this (the main) thread stores them: no lost update */
	if (now->proc_ms > sfs_load_relaxed(&w->ttl_proc_ms))
		sfs_store_relaxed(&w->ttl_proc_ms, now->proc_ms);
	if (now->event_ms > sfs_load_relaxed(&w->ttl_event_ms))
		sfs_store_relaxed(&w->ttl_event_ms, now->event_ms);
	sfs_store_release(&w->ttl_on, 1);
}

/* 1 and *@now, the clock @t's rows expire by, when @t is a TTL state's
 * table and a clock is known; else 0 (nothing of @t expires).  Read once
 * per round or merge: one decision for all its rows. */
static int ttl_now(struct sfs_target_writer *w, const struct table *t, uint64_t *now)
{
	struct sfs_ttl_rule r;
	struct sfs_ttl_clock c;

	if (!sfs_load_acquire(&w->ttl_on) || !(r.ttl_ms = sfs_load_relaxed(&w->ttl_ms[t->sid])))
		return 0;
	r.event_time = sfs_load_relaxed(&w->ttl_event[t->sid]);
	c.proc_ms = sfs_load_relaxed(&w->ttl_proc_ms);
	c.event_ms = sfs_load_relaxed(&w->ttl_event_ms);
	*now = sfs_ttl_now(&r, &c);
	return 1;
}

/* A row a round or merge drops as expired (only puts carry an expiry: a
 * TTL counter is written by read-modify-write, never as a delta). */
static int ttl_drops(int kind, const void *val, size_t vlen, uint64_t now)
{
	return kind == SFS_DF_PUT && sfs_ttl_expired(val, (uint32_t)vlen, now);
}

static const unsigned char *sb_at(const struct table *t, uint64_t off);

/* Whether level-0 file @f0 of @t holds a put expired at @now: 1, 0, or < 0
 * (a read error).  From the staged rows @pre (its rows, in memory) when
 * given, else one pass over the file (a round after a restart or in the
 * background: rare, and the file is one buffer's delta). */
static int l0_has_expired(const struct table *t, sfs_df_reader_t *rd, const struct srow *pre,
			  size_t npre, uint64_t now)
{
	sfs_df_iter_t *it = NULL;
	struct sfs_df_row row;
	int rc;

	if (pre) {
		for (size_t j = 0; j < npre; j++)
			if (ttl_drops(pre[j].kind, pre[j].vlen ? sb_at(t, pre[j].voff) : NULL,
				      pre[j].vlen, now))
				return 1;
		return 0;
	}
	if ((rc = sfs_df_iter_range(rd, NULL, 0, NULL, 0, NULL, 0, &it)))
		return rc;
	while ((rc = sfs_df_iter_next(it, &row)) == 1 && !ttl_drops(row.kind, row.val, row.vlen, now))
		;
	sfs_df_iter_close(it);
	return rc;
}

/* ---- the round: up-level one level-0 file ------------------------------------------------ */

static int lookup_view(struct table *t, const struct tfile *skip, struct tv_file *vf,
		       size_t *map, int levels_only)
{
	struct tfile *srt[t->nf ? t->nf : 1];
	int n = 0;

	files_sorted(t, srt);
	for (size_t i = 0; i < t->nf; i++) {
		struct tfile *f = srt[i];

		if (f == skip || (levels_only && f->level == 0))
			continue;
		vf[n].rd = f->rd;
		vf[n].dv = f->dv;
		vf[n].dv_words = f->dv_words;
		vf[n].level = f->level;
		map[n++] = (size_t)(f - t->f);
	}
	return n;
}

/*
 * The commit of a round or a merge (t->mu held): @t->f[@gone[0..ngone)]
 * leave the live set, @add (a file of @t->dir, NULL: none) joins it at
 * @level, @relabel (index or -1) moves from level 0 to 1 without a
 * rewrite, and every level >= 1 file whose rows are now all masked leaves
 * too.  A new vector index is written when bits changed (@masked) or a
 * file with a vector leaves.  @add_dv (@add_dv_set bits; owned by this
 * call) is the added file's vector.  On success the set in memory is the
 * snapshot's and the files that left are queued for unlinking; on failure
 * the set is unchanged but the vectors may be ahead (the caller reloads).
 */
static int set_commit(struct sfs_target_writer *w, struct table *t, const size_t *gone,
		      size_t ngone, const char *add, uint32_t level, long relabel, int masked,
		      uint64_t *add_dv, uint64_t add_dv_set)
{
	size_t old_nf = t->nf, ne = 0;
	struct sfs_mf_entry *e = NULL;
	unsigned char *leave = NULL;
	uint64_t *keep = NULL;
	char old_dvi[SFS_TABLE_NAME], dvi[SFS_TABLE_NAME], path[1024];
	int rc = 0, dv_changed = masked;

	/* first the new file (file_add may move t->f: entries point into it) */
	if (add) {
		struct tfile *nf = file_add(t);

		if (!nf)
			return -ENOMEM;
		snprintf(nf->name, sizeof(nf->name), "%s", add);
		nf->level = level;
		nf->order = ++t->order;
		if ((rc = file_open(t, nf))) {
			file_remove(t, t->nf - 1);
			free(add_dv);
			return rc;
		}
		if (add_dv_set) {
			nf->dv = add_dv;
			nf->dv_words = sfs_dv_words(nf->rows);
			nf->dv_set = add_dv_set;
			add_dv = NULL;
			dv_changed = 1;
		}
	}
	free(add_dv);
	e = malloc((ngone + old_nf + 3) * sizeof(*e));
	leave = calloc(old_nf + 1, 1);
	keep = malloc((t->nf + 1) * sizeof(*keep));
	if (!e || !leave || !keep) {
		rc = -ENOMEM;
		goto undo;
	}
	for (size_t k = 0; k < ngone; k++)
		leave[gone[k]] = 1;
	for (size_t k = 0; k < old_nf; k++)
		if (t->f[k].level > 0 && t->f[k].rows && t->f[k].dv_set == t->f[k].rows &&
		    !t->f[k].merging)
			leave[k] = 1;	/* wholly superseded */
	for (size_t k = 0; k < old_nf; k++)
		if (leave[k]) {
			entry_of(&t->f[k], SFS_MF_DELETE, t->f[k].level, &e[ne++]);
			dv_changed |= t->f[k].dv_set != 0;
		}
	if (relabel >= 0) {
		entry_of(&t->f[relabel], SFS_MF_DELETE, 0, &e[ne++]);
		entry_of(&t->f[relabel], SFS_MF_ADD, 1, &e[ne++]);
	}
	if (add)
		entry_of(&t->f[old_nf], SFS_MF_ADD, level, &e[ne++]);
	memcpy(old_dvi, t->dvi, sizeof(old_dvi));
	if (dv_changed) {
		/* the index of the files that stay */
		for (size_t k = 0; k < t->nf; k++) {
			keep[k] = t->f[k].dv_set;
			if (k < old_nf && leave[k])
				t->f[k].dv_set = 0;
		}
		rc = dv_write(t, dvi);
		for (size_t k = 0; k < t->nf; k++)
			t->f[k].dv_set = keep[k];
		if (rc)
			goto undo;
		memcpy(t->dvi, dvi, sizeof(t->dvi));
	}
	if ((rc = table_commit(w, t, SFS_MF_COMPACT, e, ne))) {
		memcpy(t->dvi, old_dvi, sizeof(t->dvi));
		goto undo;
	}
	if (dv_changed && old_dvi[0]) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, old_dvi);
		defer_unlink(w, path);
	}
	if (relabel >= 0) {
		t->f[relabel].level = 1;
		uatomic_add(&w->pub->tp_upgrades, 1);
	}
	for (size_t k = old_nf; k-- > 0;)
		if (leave[k]) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->f[k].name);
			defer_unlink(w, path);
			file_remove(t, k);
		}
	goto out;
undo:
	if (add)
		file_remove(t, old_nf);
out:
	free(e);
	free(leave);
	free(keep);
	return rc;
}

/* The round's commit: level-0 file @i leaves (rewritten into @oname, or
 * relabelled when !@rewrite). */
static int round_commit(struct sfs_target_writer *w, struct table *t, size_t i, int rewrite,
			const char *oname, uint64_t masked)
{
	size_t gone = i;

	if (!rewrite)
		return set_commit(w, t, NULL, 0, NULL, 0, (long)i, masked != 0, NULL, 0);
	return set_commit(w, t, &gone, 1, oname, 1, -1, masked != 0, NULL, 0);
}

/* Did the map diff look up all of @n rows (@left staged rows remain)? */
static int known(const struct srow *r, size_t n, size_t left)
{
	if (n > left)
		return 0;
	for (size_t j = 0; j < n; j++)
		if (r[j].old_file == PRE_UNKNOWN)
			return 0;
	return 1;
}

/*
 * Up-level level-0 file @t->f[@i] (t->mu held): mask the rows it supersedes
 * in the level >= 1 files, fold its counter deltas, drop its tombstones
 * and its expired puts (state TTL: a tombstone too), and commit it as
 * level 1 (relabelled, or rewritten when it holds more than live puts).  Older level-0 files must have been up-levelled first.
 * @pre (NULL: none): the staged rows the file was written from, in its
 * row order, with the map diff's lookups (struct srow's old_file).
 */
static int uplevel(struct sfs_target_writer *w, struct table *t, size_t i, struct scratch *sc,
		   const struct srow *pre, size_t npre)
{
	struct tfile *f0 = &t->f[i];
	struct sfs_df_meta m;
	uint64_t t0 = sfs_now_ns(), masked = 0;
	int rewrite, rc, nv;
	sfs_df_writer_t *out = NULL;
	sfs_df_iter_t *it = NULL;
	struct sfs_df_write_opts wo = { .codec = SFS_DF_LZ4, .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	struct tv_file *vf = malloc((t->nf + 1) * sizeof(*vf));
	size_t *map = malloc((t->nf + 1) * sizeof(*map));
	char oname[SFS_TABLE_NAME], path[1024];
	unsigned char *kb = NULL, *vb = NULL;
	struct { uint32_t koff, klen, voff, vlen; int kind; } *ch = NULL;
	uint64_t orows = 0, added = 0, g = 0, expired = 0, now = 0;
	int done = 0, from_pre, ttl = ttl_now(w, t, &now);

	if (!vf || !map) {
		free(vf);
		free(map);
		return -ENOMEM;
	}
	sfs_df_reader_meta(f0->rd, &m);
	rewrite = m.puts != m.rows;
	if (!rewrite && ttl && (rewrite = l0_has_expired(t, f0->rd, pre, npre, now)) < 0) {
		rc = rewrite;
		goto fail;
	}
	nv = lookup_view(t, f0, vf, map, 1);
	ch = malloc(ROUND_CHUNK * sizeof(*ch));
	if (!ch || (rc = scratch_grow(sc, ROUND_CHUNK)))
		goto fail_nomem;
	if ((rc = sfs_df_iter_range(f0->rd, NULL, 0, NULL, 0, NULL, 0, &it)))
		goto fail;
	if (rewrite) {
		new_name(oname, t->sid, "sst");
		snprintf(path, sizeof(path), "%s/%s", t->dir, oname);
		prefix_opts(t, &wo);
		if ((rc = sfs_df_writer_open(path, &wo, &out)))
			goto fail;
	}
	while (!done) {
		size_t n = 0, kl = 0, vl = 0, kcap = 0, vcap = 0;
		struct sfs_df_row row;

		/* a chunk of rows, copied (the iterator's pointers move) */
		while (n < ROUND_CHUNK && (rc = sfs_df_iter_next(it, &row)) == 1) {
			if (kl + row.klen > kcap) {
				unsigned char *nk = realloc(kb, kcap = (kl + row.klen) * 2 + 4096);

				if (!nk)
					goto fail_nomem;
				kb = nk;
			}
			if (vl + row.vlen > vcap) {
				unsigned char *nvb = realloc(vb, vcap = (vl + row.vlen) * 2 + 4096);

				if (!nvb)
					goto fail_nomem;
				vb = nvb;
			}
			memcpy(kb + kl, row.key, row.klen);
			if (row.vlen)
				memcpy(vb + vl, row.val, row.vlen);
			ch[n].koff = (uint32_t)kl;
			ch[n].klen = (uint32_t)row.klen;
			ch[n].voff = (uint32_t)vl;
			ch[n].vlen = (uint32_t)row.vlen;
			ch[n].kind = row.kind;
			kl += row.klen;
			vl += row.vlen;
			n++;
		}
		if (rc < 0)
			goto fail;
		done = rc == 0;
		if (!n)
			break;
		for (size_t j = 0; j < n; j++) {
			sc->pk[j].p = kb + ch[j].koff;
			sc->pk[j].len = ch[j].klen;
		}
		sfs_bump_reset(&sc->arena);
		from_pre = pre && known(pre + g, n, npre - g);
		if (from_pre) {
			/* the map diff looked these keys up a moment ago (same files,
			 * same lock): no second probe */
			for (size_t j = 0; j < n; j++) {
				sc->pr[j].state = pre[g + j].old_file >= 0;
				sc->pr[j].file = pre[g + j].old_file;
				sc->pr[j].pos = pre[g + j].old_pos;
			}
			rc = 0;
		} else {
			uint64_t k0, p0;

			view_work(vf, nv, &k0, &p0);
			rc = tv_probe(vf, (unsigned)nv, sc->pk, n, NULL, t->merge,
			      (t->merge >= 0 ? 0 : SFS_DF_PROBE_NO_VALUES) |
				      SFS_DF_PROBE_SEEK_SPARSE |
				      ((w->knobs & SFS_TABLE_K_HASH_IN) ? 0 : SFS_DF_PROBE_PER_LITERAL),
			      &sc->arena, sc->pr, sc->sk, sc->pi, sc->ph);
			count_probe_work(w, vf, nv, k0, p0);
		}
		if (rc)
			goto fail;
		for (size_t j = 0; j < n && !from_pre; j++)
			if (sc->pr[j].file >= 0)
				sc->pr[j].file = (int32_t)map[sc->pr[j].file];	/* view -> t->f */
		g += n;
		for (size_t j = 0; j < n; j++) {
			struct tv_res *r = &sc->pr[j];
			const unsigned char *v = vb + ch[j].voff;
			uint32_t vlen = ch[j].vlen;
			int64_t folded;

			if (r->file >= 0) {
				if ((rc = dv_set_bit(&t->f[r->file], r->pos)))
					goto fail;
				masked++;
			}
			if (ch[j].kind == SFS_DF_DELETE || !out)
				continue;
			if (ttl && ttl_drops(ch[j].kind, v, vlen, now)) {
				expired++;	/* a delete: masked what it supersedes, not kept */
				continue;
			}
			if (ch[j].kind == SFS_DF_MERGE) {
				folded = sfs_df_merge_delta(v);
				if (r->state == 1 && r->vlen == 8 && t->merge >= 0) {
					int64_t base;

					memcpy(&base, r->val, 8);
					folded = sfs_merge_i64((unsigned)t->merge, base, folded);
				}
				v = (const unsigned char *)&folded;
				vlen = 8;
			}
			if ((rc = sfs_df_writer_add(out, kb + ch[j].koff, ch[j].klen, SFS_DF_PUT, v,
						    vlen)))
				goto fail;
			added++;
		}
	}
	sfs_df_iter_close(it);
	it = NULL;
	if (out && added == 0) {
		sfs_df_writer_abort(out);	/* only tombstones: nothing to keep */
		out = NULL;
	} else if (out) {
		rc = sfs_df_writer_finish(out, &orows);
		out = NULL;
		if (rc)
			goto fail;
		uatomic_add(&w->pub->tp_bytes_written, file_bytes(path));
		sfs_fault("table.roundfile");
	}
	rc = round_commit(w, t, i, rewrite, orows ? oname : NULL, masked);
	if (rc)
		goto fail;
	sfs_fault("table.round");
	uatomic_add(&w->pub->tp_rounds, 1);
	uatomic_add(&w->pub->tp_rows_masked, masked);
	if (expired)
		uatomic_add(&w->pub->tp_ttl_dropped, expired);
	uatomic_add(&w->pub->tp_round_ns, (sfs_now_ns() - t0));
	free(vf);
	free(map);
	free(ch);
	free(kb);
	free(vb);
	return 0;
fail_nomem:
	rc = -ENOMEM;
fail:
	sfs_df_iter_close(it);
	sfs_df_writer_abort(out);
	free(vf);
	free(map);
	free(ch);
	free(kb);
	free(vb);
	return rc;
}

/* ---- staging (apply) --------------------------------------------------------------------- */

static int is_map_kind(int kind)
{
	return kind == SFS_STATE_MAP || kind == SFS_STATE_LIST;
}

/* Writer options for a file of @t: the prefix filter on map and list tables. */
static void prefix_opts(const struct table *t, struct sfs_df_write_opts *wo)
{
	if (is_map_kind(t->kind)) {
		wo->prefix_of = sfs__table_map_prefix;
		wo->prefix_rule = SFS_TABLE_PFX_MAP;
	}
}

static struct table *table_get(struct sfs_target_writer *w, uint32_t sid)
{
	struct table *t = w->t[sid];

	if (t)
		return t;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	t->sid = sid;
	t->kind = (int)w->seg->hdr->sh_states[sid].sd_kind;
	t->merge = t->kind == SFS_STATE_COUNTER ? (int)w->seg->hdr->sh_states[sid].sd_merge : -1;
	snprintf(t->dir, sizeof(t->dir), "%.490s/s%u", w->base, sid);
	pthread_mutex_init(&t->mu, NULL);
	t->loaded = 1;	/* a new table: empty, nothing on disk to load */
	__atomic_store_n(&w->t[sid], t, __ATOMIC_RELEASE);	/* the background thread looks */
	return t;
}

static int sb_put(struct table *t, const void *p, size_t n, uint64_t *off)
{
	if (t->sb_len + n > t->sb_cap) {
		size_t cap = t->sb_cap ? t->sb_cap : 65536;
		unsigned char *nb;

		while (cap < t->sb_len + n)
			cap *= 2;
		if (!(nb = realloc(t->sb, cap)))
			return -ENOMEM;
		t->sb = nb;
		t->sb_cap = cap;
	}
	*off = t->sb_len;
	if (n)
		memcpy(t->sb + t->sb_len, p, n);
	t->sb_len += n;
	return 0;
}

/* Stage a row whose key is encoded already. */
static int stage_raw(struct table *t, struct srow **arr, size_t *cnt, size_t *cap,
		     const void *enc, uint32_t el, int kind, const void *val, uint32_t vlen)
{
	struct srow *r;
	int rc;

	if (*cnt == *cap) {
		size_t nc = *cap ? 2 * *cap : 256;
		struct srow *na = realloc(*arr, nc * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	r = &(*arr)[*cnt];
	r->klen = el;
	r->vlen = vlen;
	r->kind = kind;
	r->old_file = PRE_UNKNOWN;
	r->old_pos = 0;
	r->ord = *cnt;
	if ((rc = sb_put(t, enc, el, &r->koff)) || (rc = sb_put(t, val, vlen, &r->voff)))
		return rc;
	(*cnt)++;
	return 0;
}

static int stage_row(struct table *t, struct srow **arr, size_t *cnt, size_t *cap, int map,
		     uint32_t plen, uint64_t ns, const void *key, uint32_t klen, int kind,
		     const void *val, uint32_t vlen)
{
	unsigned char enc[SFS_DF_KEY_MAX];

	if ((size_t)klen + 8 > SFS_DF_KEY_MAX)
		return sfs__err(SFS_EUSAGE, "table %s: a key of %u bytes is too long for a data "
				"file", t->dir, klen);
	return stage_raw(t, arr, cnt, cap, enc, (uint32_t)sfs__table_enc(enc, map, plen, ns, key,
									 klen),
			 kind, val, vlen);
}

static void save_point(struct sfs_target_writer *w, struct table *t)
{
	if (t->save_gen == w->gen)
		return;
	t->save_gen = w->gen;
	t->save_rows = t->nrows;
	t->save_sb = t->sb_len;
	t->save_clr = t->nclr;
}

/* A map's run (sfs_map_run_walk): clears become staged prefixes, entries
 * rows (a removal a tombstone). */
static int stage_clear_prefix(void *arg, const struct sfs_wbuf_view *h, uint32_t plen)
{
	struct table *t = arg;

	return stage_row(t, &t->clr, &t->nclr, &t->clr_cap, 1, plen, h->ns, h->key, plen,
			 SFS_DF_DELETE, NULL, 0);
}

static int stage_entry(void *arg, const struct sfs_wbuf_view *e, uint32_t plen,
		       const struct sfs_wbuf_view *head, const void *val, uint32_t len)
{
	struct table *t = arg;

	(void)head;
	return stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 1, plen, e->ns, e->key, e->klen,
			 val ? SFS_DF_PUT : SFS_DF_DELETE, val, len);
}

static int stage_map(struct table *t, const struct sfs_wbuf_view *v, unsigned n)
{
	static const struct sfs_map_run_ops ops = { stage_clear_prefix, stage_entry };

	return sfs_map_run_walk(v, n, "table target", &ops, t);
}

static int tbl_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq)
{
	int rc = 0;

	(void)seq;
	w->gen++;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		uint32_t sid;
		struct table *t;
		int64_t d;

		if (v[i].klen < SFS_KEY_PREFIX ||
		    (sid = sfs_key_prefix_state(v[i].key)) >= SFS_MAX_STATES) {
			rc = sfs__err(SFS_ECORRUPT, "table target: a buffered key of %u bytes",
				      v[i].klen);
			break;
		}
		if (!(t = table_get(w, sid))) {
			rc = -ENOMEM;
			break;
		}
		save_point(w, t);
		if (is_map_kind(t->kind)) {
			rc = stage_map(t, &v[i], n - i);
			if (rc > 0) {
				i += (unsigned)rc - 1;
				rc = 0;
			}
			continue;
		}
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 0, 0, v[i].ns, v[i].key,
				       v[i].klen, SFS_DF_PUT, v[i].value, v[i].len);
			break;
		case SFS_WBUF_DELETE:
			rc = stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 0, 0, v[i].ns, v[i].key,
				       v[i].klen, SFS_DF_DELETE, NULL, 0);
			break;
		case SFS_WBUF_MERGE:
			d = sfs_wbuf_view_i64(&v[i]);
			rc = stage_row(t, &t->rows, &t->nrows, &t->rows_cap, 0, 0, v[i].ns, v[i].key,
				       v[i].klen, SFS_DF_MERGE, &d, 8);
			break;
		default:
			rc = sfs__err(SFS_ECORRUPT, "table target: entry of unknown kind %u",
				      v[i].kind);
		}
	}
	if (rc) {
		/* back to this call's save points: the retry stages them again */
		for (uint32_t sid = 0; sid < SFS_MAX_STATES; sid++) {
			struct table *t = w->t[sid];

			if (t && t->save_gen == w->gen) {
				t->nrows = t->save_rows;
				t->sb_len = t->save_sb;
				t->nclr = t->save_clr;
			}
		}
	}
	return rc;
}

static void stage_clear(struct table *t)
{
	t->nrows = 0;
	t->nclr = 0;
	t->sb_len = 0;
}

/* ---- commit: map diff, data commit, round ----------------------------------------------------- */

static const unsigned char *sb_at(const struct table *t, uint64_t off)
{
	return t->sb + off;
}

static __thread const struct table *sort_t;	/* qsort has no context argument (per thread) */

static int srow_cmp(const void *x, const void *y)
{
	const struct srow *a = x, *b = y;
	int c = sfs_keycmp(sb_at(sort_t, a->koff), a->klen, sb_at(sort_t, b->koff), b->klen);

	if (c)
		return c;
	return a->ord < b->ord ? -1 : a->ord > b->ord;
}

/* Rows arrive in the buffer's order (key, then namespace), which is the
 * table's order whenever keys are not prefixes of one another and a map
 * has one namespace — nearly always: check in O(n) before sorting. */
static void sort_rows(struct table *t)
{
	size_t i;

	sort_t = t;
	for (i = 1; i < t->nrows && srow_cmp(&t->rows[i - 1], &t->rows[i]) < 0; i++)
		;
	if (i < t->nrows)
		qsort(t->rows, t->nrows, sizeof(*t->rows), srow_cmp);
}

/* Is the encoded key @k staged?  (rows sorted) */
static int staged(struct table *t, const void *k, uint32_t klen, size_t nrows)
{
	size_t lo = 0, hi = nrows;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct srow *r = &t->rows[mid];
		int c = sfs_keycmp(sb_at(t, r->koff), r->klen, k, klen);

		if (!c)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Did the buffer clear the map of prefix @pfx (parent | ns)? */
static int cleared(const struct table *t, const unsigned char *pfx, uint32_t plen)
{
	for (size_t c = 0; c < t->nclr; c++)
		if (t->clr[c].klen == plen && memcmp(sb_at(t, t->clr[c].koff), pfx, plen) == 0)
			return 1;
	return 0;
}

/*
 * The keys of the first @base staged rows that the map diff must probe,
 * into sc->pk[0..*@np) with sc->pm[] the files whose prefix filters admit
 * their maps (tv_probe asks only those), their rows marked old_file
 * PRE_UNKNOWN; the others are rows of a map (parent | namespace) that no file of the view @vf[0..nf)
 * admits by its prefix filter — a map new to the table, which holds none
 * of its entries — marked -1 (absent everywhere) and not probed.  Rows are
 * sorted, so a map's rows are adjacent: one hash and one filter block per
 * file per map instead of per row.  q4 writes the bids of auctions born
 * since the last barrier: nearly every row of its bids map is one.
 */
static int probe_keys_of_known_maps(struct sfs_target_writer *w, struct table *t,
				    const struct tv_file *vf, unsigned nf, size_t base, size_t *np)
{
	struct scratch *sc = &w->main_sc;
	const unsigned char *prev = NULL;
	uint32_t prev_len = 0;
	uint64_t pruned = 0, admit = TV_ADMIT_ALL;

	*np = 0;
	for (size_t k = 0; k < base; k++) {
		struct srow *r = &t->rows[k];
		const unsigned char *key = sb_at(t, r->koff);
		uint32_t plen = sfs__table_map_prefix(key, r->klen);

		if (!plen) {
			admit = TV_ADMIT_ALL;	/* no map prefix (not expected): probe it */
			prev = NULL;
		} else if (!prev || plen != prev_len || memcmp(prev, key, plen)) {
			/* every file's answer, not just the first yes: the probe
			 * below asks only the files that admit the map */
			uint64_t ph = sfs_df_filter_hash(key, plen);

			admit = 0;
			for (unsigned f = 0; f < nf; f++) {
				int rc = sfs_df_prefix_maybe_h(vf[f].rd, SFS_TABLE_PFX_MAP, ph);

				if (rc < 0)
					return rc;
				if (rc)
					admit |= f < 64 ? 1ull << f : ~0ull << 63;
			}
			prev = key;
			prev_len = plen;
		}
		if (!admit) {
			r->old_file = -1;
			pruned++;
			continue;
		}
		r->old_file = PRE_UNKNOWN;
		sc->pm[*np] = admit;
		sc->pk[*np].p = key;
		sc->pk[(*np)++].len = r->klen;
	}
	if (pruned)
		uatomic_add(&w->pub->tp_map_pruned, pruned);
	return 0;
}

/*
 * Map and list state: the buffer's rows against the image the table
 * holds.  Clears become tombstones of the stored entries the buffer does
 * not write again; with the diff on, puts equal to the stored value and
 * removals of absent entries are dropped; with it off (the ablation) each
 * touched map is rewritten whole.
 */
static int map_diff(struct sfs_target_writer *w, struct table *t)
{
	struct tv_file *vf = malloc((t->nf + 1) * sizeof(*vf));
	size_t *map = malloc((t->nf + 1) * sizeof(*map));
	struct scratch *sc = &w->main_sc;
	size_t base = t->nrows, kept = 0;
	int nv, rc = 0, l0 = 0;

	if (!vf || !map) {
		free(vf);
		free(map);
		return -ENOMEM;
	}
	nv = lookup_view(t, NULL, vf, map, 0);
	for (int k = 0; k < nv; k++)
		l0 |= vf[k].level == 0;
	sfs_bump_reset(&sc->arena);
	sort_rows(t);
	/* prefixes to rewrite: the clears, and (diff off) every touched map */
	for (size_t c = 0; c < t->nclr + ((w->knobs & SFS_TABLE_K_MAP_DIFF) ? 0 : base) && !rc; c++) {
		unsigned char pfx[SFS_DF_KEY_MAX], key[SFS_DF_KEY_MAX];
		uint32_t plen;
		int is_clear = c < t->nclr;
		struct tv_row *rows = NULL;
		size_t nr = 0;

		/* copied: staging below may move the stage buffer */
		if (is_clear) {
			plen = t->clr[c].klen;
			memcpy(pfx, sb_at(t, t->clr[c].koff), plen);
		} else {
			const struct srow *r = &t->rows[c - t->nclr];

			plen = sfs_map_parent_len(sb_at(t, r->koff), r->klen) + 8;	/* parent | ns */
			if (plen > r->klen) {
				rc = sfs__err(SFS_ECORRUPT, "%s: a staged map key of %u bytes", t->dir,
					      r->klen);
				break;
			}
			memcpy(pfx, sb_at(t, r->koff), plen);
			if (c > t->nclr) {
				const struct srow *p = &t->rows[c - t->nclr - 1];

				if (p->klen >= plen && memcmp(sb_at(t, p->koff), pfx, plen) == 0)
					continue;	/* the same map as the row before */
			}
			if (cleared(t, pfx, plen))
				continue;	/* its clear tombstones what is not written again */
		}
		if ((rc = tv_prefix(vf, (unsigned)nv, pfx, plen, &sc->arena, &rows, &nr)))
			break;
		for (size_t k = 0; k < nr && !rc; k++) {
			if (plen + rows[k].klen > sizeof(key)) {
				rc = sfs__err(SFS_ECORRUPT, "%s: a stored key of %u bytes", t->dir,
					      plen + rows[k].klen);
				break;
			}
			memcpy(key, pfx, plen);
			memcpy(key + plen, rows[k].key, rows[k].klen);
			if (staged(t, key, plen + rows[k].klen, base))
				continue;
			/* a clear: tombstone; a whole-map rewrite: the same value again */
			rc = stage_raw(t, &t->rows, &t->nrows, &t->rows_cap, key, plen + rows[k].klen,
				       is_clear ? SFS_DF_DELETE : SFS_DF_PUT,
				       is_clear ? NULL : rows[k].val, is_clear ? 0 : rows[k].vlen);
			if (!rc) {
				t->rows[t->nrows - 1].old_file = rows[k].file >= 0 ?
					(int32_t)map[rows[k].file] : -1;
				t->rows[t->nrows - 1].old_pos = rows[k].pos;
			}
		}
		free(rows);
	}
	if (!rc && (w->knobs & SFS_TABLE_K_MAP_DIFF) && base) {
		/* one probe of the buffer's own rows: drop what would change
		 * nothing; rows of maps new to the table are not probed */
		size_t np = 0;

		uint64_t k0, p0;

		view_work(vf, nv, &k0, &p0);
		if (!(rc = scratch_grow(sc, base)))
			rc = probe_keys_of_known_maps(w, t, vf, (unsigned)nv, base, &np);
		if (!rc && np)
			rc = tv_probe(vf, (unsigned)nv, sc->pk, np, sc->pm, -1,
				      SFS_DF_PROBE_SEEK_SPARSE |
					      ((w->knobs & SFS_TABLE_K_HASH_IN) ? 0
										: SFS_DF_PROBE_PER_LITERAL),
				      &sc->arena, sc->pr, sc->sk, sc->pi, sc->ph);
		count_probe_work(w, vf, nv, k0, p0);
		/* spread the np results over the base rows, from the end (a
		 * probed row's result moves to an index >= its own) */
		for (size_t k = base; !rc && k-- > 0;)
			sc->pr[k] = t->rows[k].old_file == PRE_UNKNOWN
					    ? sc->pr[--np]
					    : (struct tv_res){ .state = 0, .file = -1 };
		for (size_t k = 0; !rc && k < base; k++) {
			const struct srow *r = &t->rows[k];
			const struct tv_res *p = &sc->pr[k];
			int same = r->kind == SFS_DF_DELETE ? p->state != 1
							    : p->state == 1 && p->vlen == r->vlen &&
								      memcmp(p->val, sb_at(t, r->voff),
									     r->vlen) == 0;

			if (same) {
				uatomic_add(&w->pub->tp_map_unchanged, 1);
				continue;
			}
			t->rows[kept] = *r;
			t->rows[kept].old_file = p->file >= 0 ? (int32_t)map[p->file] : -1;
			t->rows[kept++].old_pos = p->pos;
		}
		if (!rc) {
			memmove(&t->rows[kept], &t->rows[base], (t->nrows - base) * sizeof(*t->rows));
			t->nrows = kept + (t->nrows - base);
		}
	}
	free(vf);
	free(map);
	/* a level-0 hit hides whether a level >= 1 row is below it: the
	 * round must look for itself then */
	for (size_t k = 0; l0 && k < t->nrows; k++)
		t->rows[k].old_file = PRE_UNKNOWN;
	if (!rc)
		sort_rows(t);
	return rc;
}

/* Data commit of @t's staged delta as a level-0 file, then (knob) the round. */
static int commit_table(struct sfs_target_writer *w, struct table *t, uint64_t seq)
{
	struct sfs_df_write_opts wo = { .codec = SFS_DF_LZ4, .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	sfs_df_writer_t *out = NULL;
	char name[SFS_TABLE_NAME], path[1024];
	struct sfs_mf_entry e;
	struct tfile *f;
	size_t written = 0;
	int rc = 0;

	if (t->watermark >= seq && t->snap) {
		stage_clear(t);	/* a redone buffer this table holds already */
		return 0;
	}
	if (!(w->knobs & SFS_TABLE_K_SESSION) && t->snap && (rc = table_load(t, 0)))
		return rc;	/* the ablation: the whole chain again, every commit */
	if (is_map_kind(t->kind))
		rc = map_diff(w, t);
	else
		sort_rows(t);
	if (rc)
		return rc;
	if (!t->nrows) {
		stage_clear(t);
		return 0;
	}
	new_name(name, t->sid, "sst");
	snprintf(path, sizeof(path), "%s/%s", t->dir, name);
	prefix_opts(t, &wo);
	if ((rc = sfs_df_writer_open(path, &wo, &out)))
		return rc;
	for (size_t i = 0; i < t->nrows && !rc; i++) {
		const struct srow *r = &t->rows[i];

		if (i && r->klen == t->rows[i - 1].klen &&
		    memcmp(sb_at(t, r->koff), sb_at(t, t->rows[i - 1].koff), r->klen) == 0)
			continue;	/* a key staged twice: the first (the buffer's) wins */
		rc = sfs_df_writer_add(out, sb_at(t, r->koff), r->klen, r->kind,
				       r->vlen ? sb_at(t, r->voff) : NULL, r->vlen);
		written++;
	}
	if (rc) {
		sfs_df_writer_abort(out);
		return rc;
	}
	if ((rc = sfs_df_writer_finish(out, NULL)))
		return rc;
	uatomic_add(&w->pub->tp_bytes_written, file_bytes(path));
	sfs_fault("table.datafile");
	if (!(f = file_add(t)))
		return -ENOMEM;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->level = 0;
	f->order = ++t->order;
	if ((rc = file_open(t, f))) {
		file_remove(t, t->nf - 1);
		return rc;
	}
	entry_of(f, SFS_MF_ADD, 0, &e);
	t->watermark = seq;
	if ((rc = table_commit(w, t, SFS_MF_DATA, &e, 1))) {
		table_recover(w, t, "data commit");
		return rc;
	}
	sfs_fault("table.datacommit");
	uatomic_add(&w->pub->tp_data_commits, 1);
	uatomic_add(&w->pub->tp_rows_written, t->nrows);
	if (w->knobs & SFS_TABLE_K_ROUND) {
		/* the data is durable: a failed round is redone at the next open or commit */
		rc = uplevel(w, t, t->nf - 1, &w->main_sc, written == t->nrows ? t->rows : NULL,
			     t->nrows);
		if (rc)
			table_recover(w, t, "up-levelling round");
	}
	stage_clear(t);
	return 0;
}

/* Level-0 files left behind (a kill between data commit and round, a
 * failed round): up-level them, oldest first.  t->mu held. */
static int catch_up_rounds(struct sfs_target_writer *w, struct table *t, struct scratch *sc)
{
	for (;;) {
		size_t oldest = SIZE_MAX;
		int rc;

		for (size_t i = 0; i < t->nf; i++)
			if (t->f[i].level == 0 && (oldest == SIZE_MAX ||
						   t->f[i].order < t->f[oldest].order))
				oldest = i;
		if (oldest == SIZE_MAX)
			return 0;
		if ((rc = uplevel(w, t, oldest, sc, NULL, 0))) {
			table_recover(w, t, "up-levelling round");
			return rc;
		}
	}
}

/*
 * Commit buffer @seq, one table per call: -EAGAIN while tables remain
 * (busy() says so: the compactor polls again within a millisecond, after
 * the other workers' flushes had their turn), so that one worker's big
 * commit does not hold up the flushes of the others for longer than a
 * table's.  The last call publishes the version.  Calling again at once
 * instead of after the poll measured no different on q4 (RESULTS).
 */
static int tbl_commit(struct sfs_target_writer *w, uint64_t seq)
{
	uint64_t t0 = sfs_now_ns();
	uint32_t sid;
	int rc = 0;

	if (w->commit_seq != seq) {
		w->commit_seq = seq;
		w->commit_ns = 0;
	}
	if (!w->in_commit) {
		pthread_mutex_lock(&w->commit_mu);
		w->in_commit = 1;
	}
	for (sid = 0; sid < SFS_MAX_STATES; sid++)
		if (w->t[sid] && (w->t[sid]->nrows || w->t[sid]->nclr))
			break;
	if (sid < SFS_MAX_STATES) {
		struct table *t = w->t[sid];

		pthread_mutex_lock(&t->mu);
		if (!t->loaded)
			rc = table_load(t, 0);
		if (!rc && (w->knobs & SFS_TABLE_K_ROUND))
			rc = catch_up_rounds(w, t, &w->main_sc);
		if (!rc)
			rc = commit_table(w, t, seq);
		pthread_mutex_unlock(&t->mu);
		t0 = sfs_now_ns() - t0;
		w->commit_ns += t0;
		if (t0 > w->pub->tp_table_max_ns)
			sfs_store_relaxed(&w->pub->tp_table_max_ns, t0);
		t0 = sfs_now_ns();
		if (rc) {
			if (!w->failing)
				sfs_log("worker %u: commit of buffer seq %llu failed, will retry: %s",
					w->worker, (unsigned long long)seq, sfs_last_error());
			w->failing = 1;
			uatomic_inc(&w->pub->tp_errors);
			return rc;
		}
		w->more = 1;
		return -EAGAIN;
	}
	if (w->failing)
		sfs_log("worker %u: commit of buffer seq %llu succeeded again", w->worker,
			(unsigned long long)seq);
	w->failing = 0;
	w->more = 0;
	if (seq > w->applied)
		w->applied = seq;	/* a redone older buffer must not move the tag back */
	rc = publish(w);
	w->in_commit = 0;
	pthread_mutex_unlock(&w->commit_mu);
	t0 = w->commit_ns + (sfs_now_ns() - t0);
	uatomic_add(&w->pub->tp_commits, 1);
	uatomic_add(&w->pub->tp_commit_ns, t0);
	if (t0 > w->pub->tp_commit_max_ns)
		sfs_store_relaxed(&w->pub->tp_commit_max_ns, t0);
	return rc;
}

/* ---- the background thread: shaping merges (and rounds, when not at the barrier) --------- */

/* Inputs of the next shaping merge of @t (t->mu held): the files of the
 * lowest level >= 1 holding FANIN of them (at most MERGE_MAX); *@held is
 * how many that level holds in all. */
static size_t pick_merge(struct table *t, size_t *in, uint32_t *level, size_t *held)
{
	for (uint32_t l = 1; l < 64; l++) {
		size_t n = 0, any = 0, all = 0;

		for (size_t i = 0; i < t->nf; i++) {
			if (t->f[i].level < l)
				continue;
			any = 1;
			if (t->f[i].level != l || t->f[i].merging)
				continue;
			all++;
			if (n < MERGE_MAX)
				in[n++] = i;
		}
		if (!any)
			return 0;
		if (n >= FANIN) {
			*level = l + 1;
			*held = all;
			return n;
		}
	}
	return 0;
}

/*
 * bg_priority - the background thread's CPU priority for its next piece
 * of work.  Shaping merges are discretionary (they change no result), so
 * while a level holds fewer than DEBT_FILES files they run under
 * SCHED_IDLE: on CPU time no worker, compactor main thread or checkpointer
 * wants.  On a node whose cores are all busy they wait, and reads probe a
 * few more files meanwhile; a level that reaches DEBT_FILES is merge debt,
 * and its merge (like the rounds of the background-only ablation) runs at
 * the compactor's own priority, so a saturated node cannot grow a table's
 * read amplification without bound.  Only a merge's unlocked reading and
 * writing runs idle: the thread is back at normal priority before it takes
 * a lock the main thread also takes, so a starved merge never holds up a
 * barrier's commit.  Measured on q4 (bench/RESULTS.md):
 * the merges otherwise take ~10 % of a two-core node from its worker.
 * Leaving SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE that allows
 * nice 0 (sched(7)): a compactor with neither never enters it.  One
 * syscall per change, on this thread only.
 */
static void bg_priority(struct sfs_target_writer *w, int idle)
{
	struct sched_param sp = { 0 };

	idle = idle && w->bg_can_idle && (w->knobs & SFS_TABLE_K_BG_IDLE);
	if (idle == w->bg_idle)
		return;
	if (sched_setscheduler(0, idle ? SCHED_IDLE : SCHED_OTHER, &sp) == 0)
		w->bg_idle = idle;
	else if (!idle)
		w->bg_can_idle = 0;	/* stuck idle would starve the debt: stop trying */
}

/* Whether this thread may leave SCHED_IDLE again (see bg_priority). */
static int bg_may_idle(void)
{
	struct rlimit rl;

	if (geteuid() == 0)
		return 1;
	return getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20);
}

struct min {
	sfs_df_reader_t *rd;
	sfs_df_iter_t *it;
	struct sfs_df_row row;
	int live;
	uint64_t *dv;           /* the vector as the merge read it */
	size_t dv_words;
	uint32_t *to;           /* input row -> output row (UINT32_MAX: not written) */
	uint64_t rows;
	char name[SFS_TABLE_NAME];
};

/* One shaping merge of @t; 1 if it did one, 0 if none was due, < 0 error. */
static int shaping_merge(struct sfs_target_writer *w, struct table *t)
{
	size_t in[MERGE_MAX], n, gone[MERGE_MAX], held = 0;
	int idle, ttl;
	struct min m[MERGE_MAX];
	uint32_t level = 0;
	uint64_t t0 = sfs_now_ns(), outrow = 0, loads, expired = 0, now = 0;
	char oname[SFS_TABLE_NAME], path[1024];
	struct sfs_df_write_opts wo = { .page_bytes = SFS_TABLE_PAGE_BYTES,
					 .keys_raw = SFS_TABLE_KEYS_RAW };
	sfs_df_writer_t *out = NULL;
	int rc = 0;

	memset(m, 0, sizeof(m));
	pthread_mutex_lock(&t->mu);
	if (!t->loaded || !(n = pick_merge(t, in, &level, &held))) {
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	loads = t->loads;
	for (size_t k = 0; k < n && !rc; k++) {
		struct tfile *f = &t->f[in[k]];

		f->merging = 1;
		memcpy(m[k].name, f->name, sizeof(m[k].name));
		m[k].rows = f->rows;
		m[k].dv_words = sfs_dv_words(f->rows);
		m[k].dv = calloc(m[k].dv_words ? m[k].dv_words : 1, 8);
		m[k].to = malloc((f->rows ? f->rows : 1) * sizeof(uint32_t));
		if (!m[k].dv || !m[k].to || f->rows > UINT32_MAX)
			rc = -ENOMEM;
		else if (f->dv)
			memcpy(m[k].dv, f->dv, m[k].dv_words * 8);
	}
	pthread_mutex_unlock(&t->mu);
	ttl = ttl_now(w, t, &now);
	bg_priority(w, held < DEBT_FILES);
	idle = w->bg_idle;
	/* read and write without the lock: the inputs are immutable */
	for (size_t k = 0; k < n && !rc; k++) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, m[k].name);
		if (!(rc = sfs_df_reader_open(path, NULL, &m[k].rd)))
			rc = sfs_df_iter_range(m[k].rd, NULL, 0, NULL, 0, m[k].dv, m[k].dv_words,
					       &m[k].it);
		if (!rc) {
			memset(m[k].to, 0xff, m[k].rows * sizeof(uint32_t));
			rc = sfs_df_iter_next(m[k].it, &m[k].row);
			m[k].live = rc == 1;
			rc = rc < 0 ? rc : 0;
		}
	}
	wo.codec = level >= SFS_TABLE_ZSTD_FROM ? SFS_DF_ZSTD : SFS_DF_LZ4;
	wo.zstd_level = SFS_TABLE_ZSTD_LEVEL;
	prefix_opts(t, &wo);
	new_name(oname, t->sid, "sst");
	snprintf(path, sizeof(path), "%s/%s", t->dir, oname);
	if (!rc)
		rc = sfs_df_writer_open(path, &wo, &out);
	while (!rc && !sfs_load_relaxed(&w->stop)) {
		int best = -1;

		for (size_t k = 0; k < n; k++) {
			int c;

			if (!m[k].live)
				continue;
			if (best < 0) {
				best = (int)k;
				continue;
			}
			c = sfs_keycmp(m[k].row.key, m[k].row.klen, m[best].row.key, m[best].row.klen);
			if (c < 0)
				best = (int)k;
		}
		if (best < 0)
			break;
		if (ttl && ttl_drops(m[best].row.kind, m[best].row.val, m[best].row.vlen, now)) {
			/* expired: a delete of the only unmasked version of its key
			 * (level >= 1 rows are disjoint), so nothing is kept for it
			 * at any output level; a bit set on it meanwhile maps to no
			 * output row (to[] stays UINT32_MAX) */
			expired++;
		} else {
			rc = sfs_df_writer_add(out, m[best].row.key, m[best].row.klen, SFS_DF_PUT,
					       m[best].row.val, m[best].row.vlen);
			if (rc)
				break;
			m[best].to[m[best].row.pos] = (uint32_t)outrow++;
		}
		rc = sfs_df_iter_next(m[best].it, &m[best].row);
		m[best].live = rc == 1;
		rc = rc < 0 ? rc : 0;
	}
	bg_priority(w, 0);	/* no lock is taken at idle priority: see bg_priority */
	if (sfs_load_relaxed(&w->stop) && !rc)
		rc = -ECANCELED;
	if (!rc && outrow == 0) {
		sfs_df_writer_abort(out);	/* every row masked meanwhile, or expired */
		out = NULL;
	} else if (!rc) {
		rc = sfs_df_writer_finish(out, NULL);
		out = NULL;
		if (!rc) {
			uatomic_add(&w->pub->tp_merge_bytes, file_bytes(path));
			sfs_fault("table.mergefile");
		}
	}
	pthread_mutex_lock(&t->mu);
	if (!rc && t->loads != loads)
		rc = -ECANCELED;	/* reloaded meanwhile: the copied vectors may be ahead */
	if (!rc) {
		/* the inputs by name again (the set moved meanwhile), their new
		 * bits carried over to the output's rows */
		uint64_t *odv = NULL;
		size_t ow = sfs_dv_words(outrow), nset = 0;

		if (outrow && !(odv = calloc(ow ? ow : 1, 8)))
			rc = -ENOMEM;
		for (size_t k = 0; k < n && !rc; k++) {
			struct tfile *f = NULL;

			for (size_t i = 0; i < t->nf; i++)
				if (strcmp(t->f[i].name, m[k].name) == 0)
					f = &t->f[i];
			if (!f) {
				rc = sfs__err(SFS_ECORRUPT, "%s: merge input %s left the table", t->dir,
					      m[k].name);
				break;
			}
			gone[k] = (size_t)(f - t->f);
			for (size_t x = 0; f->dv && x < m[k].dv_words; x++) {
				uint64_t nb = f->dv[x] & ~m[k].dv[x];

				while (nb) {
					uint64_t p = x * 64 + (uint64_t)__builtin_ctzll(nb);

					nb &= nb - 1;
					if (m[k].to[p] != UINT32_MAX) {
						odv[m[k].to[p] / 64] |= 1ull << (m[k].to[p] % 64);
						nset++;
					}
				}
			}
		}
		if (!rc) {
			rc = set_commit(w, t, gone, n, outrow ? oname : NULL, level, -1, 0, odv, nset);
			odv = NULL;
		}
		free(odv);
		if (!rc) {
			sfs_fault("table.merge");
			uatomic_add(&w->pub->tp_merges, 1);
			if (idle)
				uatomic_add(&w->pub->tp_merges_idle, 1);
			uatomic_add(&w->pub->tp_merge_rows, outrow);
			if (expired)
				uatomic_add(&w->pub->tp_ttl_dropped, expired);
			uatomic_add(&w->pub->tp_merge_ns, (sfs_now_ns() - t0));
		}
	}
	if (rc) {
		for (size_t i = 0; i < t->nf; i++)
			for (size_t k = 0; k < n; k++)
				if (strcmp(t->f[i].name, m[k].name) == 0)
					t->f[i].merging = 0;
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t k = 0; k < n; k++) {
		sfs_df_iter_close(m[k].it);
		sfs_df_reader_close(m[k].rd);
		free(m[k].dv);
		free(m[k].to);
	}
	sfs_df_writer_abort(out);
	if (rc) {
		/* a disk's trouble is said once per episode of the process (the
		 * flush's own failure says it first: shm/proc.h), the rest each time */
		if (rc != -ECANCELED &&
		    (!sfs_io_trouble_errno(rc) ||
		     sfs_proc_io((struct sfs_proc_slot *)(uintptr_t)w->self, rc)))
			sfs_log("worker %u, table %s: shaping merge failed (retried later): %s",
				w->worker, t->dir, sfs_last_error());
		snprintf(path, sizeof(path), "%s/%s", t->dir, oname);
		unlink(path);
		return rc;
	}
	return 1;
}

static struct table *table_at(struct sfs_target_writer *w, uint32_t sid)
{
	return __atomic_load_n(&w->t[sid], __ATOMIC_ACQUIRE);
}

static void *bg_main(void *arg)
{
	struct sfs_target_writer *w = arg;

	w->bg_can_idle = bg_may_idle();
	while (!sfs_load_relaxed(&w->stop)) {
		int did = 0;

		for (uint32_t sid = 0; sid < SFS_MAX_STATES && !sfs_load_relaxed(&w->stop); sid++) {
			struct table *t = table_at(w, sid);

			if (!t)
				continue;
			if (!(w->knobs & SFS_TABLE_K_ROUND)) {
				/* the ablation: rounds lag behind the barrier */
				size_t l0 = 0;

				bg_priority(w, 0);
				pthread_mutex_lock(&t->mu);
				for (size_t i = 0; i < t->nf; i++)
					l0 += t->f[i].level == 0;
				if (l0 && t->loaded && catch_up_rounds(w, t, &w->bg_sc) == 0)
					did = 1;
				pthread_mutex_unlock(&t->mu);
			}
			if ((w->knobs & SFS_TABLE_K_SHAPING) && shaping_merge(w, t) > 0)
				did = 1;
		}
		reap(w);
		if (did && pthread_mutex_trylock(&w->commit_mu) == 0) {
			/* else a commit is under way: its publication covers this */
			if (publish(w))
				sfs_log("worker %u: publishing the table files: %s", w->worker,
					sfs_last_error());
			pthread_mutex_unlock(&w->commit_mu);
		} else if (!did) {
			struct timespec ts = { 0, BG_POLL_MS * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

/* ---- checkpoints ------------------------------------------------------------------------- */

/*
 * Stage the store's current version in @dir: every table's live data files
 * linked into @dir/shared (immutable; names are unique per table:
 * t<sid>-...), its vector index linked beside TABLES (table_snap.h), which
 * describes them: a checkpoint copies those two.  Each table is read under its
 * lock, so a shaping merge committing meanwhile is seen whole or not at
 * all; merges change no row, so tables need not be read at one instant.
 */
static int tbl_snapshot(struct sfs_target_writer *w, const char *dir)
{
	struct sfs_tsnap s = { .watermark = w->applied };
	struct sfs_tsnap_table tabs[SFS_MAX_STATES];
	char from[1024], to[1024];
	struct version *v = NULL;
	uint64_t id;
	int rc = 0;

	/* a checkpoint's stage: its version kept for a pin (tbl_pin) */
	if (sfs_target_stage_id(dir, &id) && !(v = calloc(1, sizeof(*v))))
		return -ENOMEM;
	if (v) {
		v->id = id;
		v->seq = w->applied;
	}
	memset(tabs, 0, sizeof(tabs));
	s.tables = tabs;
	snprintf(to, sizeof(to), "%s/" SFS_STAGE_SHARED, dir);
	if ((rc = sfs_mkdirs(to, 0700)))	/* one mkdir(2) once the parents exist */
		return rc;
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = table_at(w, sid);
		struct sfs_tsnap_table *st;

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		if (!t->loaded) {
			rc = sfs__err(-EAGAIN, "table %s is not loaded (a failed reload)", t->dir);
		} else if (t->nf) {
			if (v)
				rc = vtable_capture(w, t, &v->t[v->nt++]);
			st = &tabs[s.ntables++];
			st->sid = sid;
			snprintf(st->dvi, sizeof(st->dvi), "%s", t->dvi);
			if (!(st->files = calloc(t->nf, sizeof(*st->files))))
				rc = -ENOMEM;
			for (size_t i = 0; i < t->nf && !rc; i++) {
				snprintf(st->files[i].name, sizeof(st->files[i].name), "%s", t->f[i].name);
				st->files[i].level = t->f[i].level;
				st->files[i].rows = t->f[i].rows;
				st->nfiles++;
				snprintf(from, sizeof(from), "%s/%s", t->dir, t->f[i].name);
				snprintf(to, sizeof(to), "%s/" SFS_STAGE_SHARED "/%s", dir,
					 t->f[i].name);
				/* already staged (a retried snapshot): fine if the same */
				rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
			}
			if (!rc && t->dvi[0]) {
				snprintf(from, sizeof(from), "%s/%s", t->dir, t->dvi);
				snprintf(to, sizeof(to), "%s/%s", dir, t->dvi);
				rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
			}
		}
		pthread_mutex_unlock(&t->mu);
	}
	if (!rc) {
		snprintf(to, sizeof(to), "%s/TABLES", dir);
		rc = sfs_tsnap_write(to, &s);
	}
	for (uint32_t i = 0; i < s.ntables; i++)
		free(tabs[i].files);
	if (!rc && v)
		return version_keep(w, v);
	if (v) {
		version_free(v);
		(void)held_rebuild(w);	/* what its capture held */
	}
	return rc;
}

static int tbl_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg)
{
	char path[1024];
	int rc = 0;

	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = table_at(w, sid);

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		for (size_t i = 0; i < t->nf && !rc; i++) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->f[i].name);
			rc = fn(arg, path);
		}
		if (!rc && t->dvi[0]) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->dvi);
			rc = fn(arg, path);
		}
		pthread_mutex_unlock(&t->mu);
	}
	return rc;
}

/* ---- rollback in place (store/target.h) -------------------------------------------------- */

/*
 * A kept version is the metadata of one published version: per table its
 * live files as their manifest entries need them, in creation order (level
 * 0's age), and its vector index; and the applied seq.  Taken at staging
 * (tbl_snapshot, under each table's lock, so it is exactly what the stage
 * holds) or at pin(0) (the version at open); O(files) bytes, no I/O.
 *
 * What protects a kept version's files: every name it holds is in w->held,
 * and defer_unlink parks a held file in w->hold instead of unlinking it
 * after the grace period.  Merges, rounds and vector-index rewrites are
 * the only ways a file leaves a live set while the writer lives, and all
 * go through defer_unlink.  The orphan gc runs at open only (no version is
 * kept then), snapshot expiry removes metadata only (manifest.h), and a
 * rollback reads nothing but the kept version: so an expired snapshot
 * loses nothing a rollback needs.
 *
 * Rollback: an intent (<store>/ROLLBACK, TABLES' format: the pinned
 * version) is written first; then each table commits one COMPACT snapshot
 * whose live set is the pinned one (table_switch: a delta deleting the
 * current files the pinned version does not keep and adding its others,
 * the pinned seq as watermark), and its session is rebuilt from the kept
 * version in memory (table_take); then the intent goes and the version is
 * published once.  A kill before the intent is in place leaves the
 * version before; after it, the next open finishes the switch
 * (rollforward_table) before its gc: never a mix.  Cost per table: one
 * manifest commit (a manifest, lists, a snapshot file; the usual rebase
 * and expiry), a footer read per pinned file the current version no
 * longer has, the pinned vector index read; per rollback one intent write
 * (two fsyncs); no data file is read or copied.  Measured (the test
 * a_rollback_costs_*): 16 tables x 200 live files, 100 pinned each,
 * ~120 ms on a busy 2-core machine; 4 x 40: ~8 ms.
 */
static void vtable_free(struct vtable *vt)
{
	for (size_t i = 0; i < vt->nf; i++) {
		free(vt->f[i].min_key);
		free(vt->f[i].max_key);
	}
	free(vt->f);
	memset(vt, 0, sizeof(*vt));
}

static void version_free(struct version *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < v->nt; i++)
		vtable_free(&v->t[i]);
	free(v);
}

static const struct vtable *version_table(const struct version *v, uint32_t sid)
{
	for (uint32_t i = 0; v && i < v->nt; i++)
		if (v->t[i].sid == sid)
			return &v->t[i];
	return NULL;
}

static int vfile_set(struct vfile *vf, const struct tfile *f, uint32_t level)
{
	memcpy(vf->name, f->name, sizeof(vf->name));
	vf->level = level;
	vf->rows = f->rows;
	vf->size = f->size;
	vf->min_klen = f->min_klen;
	vf->max_klen = f->max_klen;
	vf->kg_lo = f->kg_lo;
	vf->kg_hi = f->kg_hi;
	vf->min_key = malloc(f->min_klen ? f->min_klen : 1);
	vf->max_key = malloc(f->max_klen ? f->max_klen : 1);
	if (!vf->min_key || !vf->max_key)
		return -ENOMEM;
	memcpy(vf->min_key, f->min_key, f->min_klen);
	memcpy(vf->max_key, f->max_key, f->max_klen);
	return 0;
}

static int order_cmp(const void *x, const void *y)
{
	const struct tfile *a = *(const struct tfile *const *)x, *b = *(const struct tfile *const *)y;

	return a->order > b->order ? 1 : a->order < b->order ? -1 : 0;
}

static int held_add(struct sfs_target_writer *w, const struct vtable *vt);

/* @t's live set into @vt, its names held at once (t->mu held; an empty
 * table leaves @vt empty). */
static int vtable_capture(struct sfs_target_writer *w, struct table *t, struct vtable *vt)
{
	struct tfile **fs;
	int rc = 0;

	memset(vt, 0, sizeof(*vt));
	vt->sid = t->sid;
	memcpy(vt->dvi, t->dvi, sizeof(vt->dvi));
	if (!t->nf)
		return 0;
	if (!(fs = malloc(t->nf * sizeof(*fs))) || !(vt->f = calloc(t->nf, sizeof(*vt->f)))) {
		free(fs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nf; i++)
		fs[i] = &t->f[i];
	qsort(fs, t->nf, sizeof(*fs), order_cmp);
	for (size_t i = 0; i < t->nf && !rc; i++, vt->nf++)
		rc = vfile_set(&vt->f[i], fs[i], fs[i]->level);
	free(fs);
	return rc ? rc : held_add(w, vt);
}

/* Add @vt's names to w->held at once, under the table's lock its capture
 * held (t->mu, then del_mu: set_commit's order): a merge committing right
 * after the capture parks them instead of unlinking.  O(held log held). */
static int held_add(struct sfs_target_writer *w, const struct vtable *vt)
{
	size_t add = vt->nf + (vt->dvi[0] != '\0'), n;
	char (*held)[SFS_TABLE_NAME];
	int rc = 0;

	if (!add)
		return 0;
	pthread_mutex_lock(&w->del_mu);
	n = w->nheld;
	if (!(held = realloc(w->held, (n + add) * sizeof(*held)))) {
		rc = -ENOMEM;
	} else {
		for (size_t f = 0; f < vt->nf; f++)
			memcpy(held[n++], vt->f[f].name, SFS_TABLE_NAME);
		if (vt->dvi[0])
			memcpy(held[n++], vt->dvi, SFS_TABLE_NAME);
		qsort(held, n, sizeof(*held), held_cmp);
		w->held = held;
		w->nheld = n;
	}
	pthread_mutex_unlock(&w->del_mu);
	return rc;
}

/* Rebuild w->held from the kept versions, and hand the parked files no
 * kept version names any more to the deferred unlinks.  Main thread. */
static int held_rebuild(struct sfs_target_writer *w)
{
	struct version *vs[VKEEP + 1];
	char (*held)[SFS_TABLE_NAME];
	size_t n = 0, cap = 0, k = 0;
	unsigned nv = 0;

	for (unsigned i = 0; i < w->nstaged; i++)
		vs[nv++] = w->staged[i];
	if (w->pinned)
		vs[nv++] = w->pinned;
	for (unsigned i = 0; i < nv; i++)
		for (uint32_t j = 0; j < vs[i]->nt; j++)
			cap += vs[i]->t[j].nf + 1;
	if (!(held = malloc((cap ? cap : 1) * sizeof(*held))))
		return -ENOMEM;
	for (unsigned i = 0; i < nv; i++)
		for (uint32_t j = 0; j < vs[i]->nt; j++) {
			const struct vtable *vt = &vs[i]->t[j];

			for (size_t f = 0; f < vt->nf; f++)
				memcpy(held[n++], vt->f[f].name, SFS_TABLE_NAME);
			if (vt->dvi[0])
				memcpy(held[n++], vt->dvi, SFS_TABLE_NAME);
		}
	if (n > 1)
		qsort(held, n, sizeof(*held), held_cmp);
	pthread_mutex_lock(&w->del_mu);
	free(w->held);
	w->held = held;
	w->nheld = n;
	for (size_t i = 0; i < w->nhold; i++) {
		struct pend *h = &w->hold[i];

		if (is_held(w, h->path)) {
			w->hold[k++] = *h;
		} else if (pend_push(&w->del, &w->ndel, &w->delcap, h->path, h->seq) == 0 &&
			   h->published) {
			/* gone from the published set already: its grace starts now */
			w->del[w->ndel - 1].token = sfs_qsbr_start(w->seg->hdr);
			w->del[w->ndel - 1].published = 1;
		}
	}
	w->nhold = k;
	pthread_mutex_unlock(&w->del_mu);
	return 0;
}

/* The current version of every table as version @id (main thread: no
 * commit runs; merges may, each table is read whole under its lock). */
static int version_capture(struct sfs_target_writer *w, uint64_t id, struct version **out)
{
	struct version *v = calloc(1, sizeof(*v));
	int rc = 0;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	v->id = id;
	v->seq = w->applied;
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		struct table *t = table_at(w, sid);

		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		if (!t->loaded)
			rc = sfs__err(-EAGAIN, "table %s is not loaded (a failed reload)", t->dir);
		else if (t->nf || t->dvi[0])
			rc = vtable_capture(w, t, &v->t[v->nt++]);
		pthread_mutex_unlock(&t->mu);
	}
	if (rc) {
		version_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

/* Keep @v as the version staged for checkpoint v->id (a retried staging
 * replaces its earlier capture; beyond VKEEP the oldest goes). */
static int version_keep(struct sfs_target_writer *w, struct version *v)
{
	for (unsigned i = 0; i < w->nstaged; i++)
		if (w->staged[i]->id == v->id) {
			version_free(w->staged[i]);
			memmove(&w->staged[i], &w->staged[i + 1],
				(w->nstaged - i - 1) * sizeof(w->staged[0]));
			w->nstaged--;
			break;
		}
	if (w->nstaged == VKEEP) {
		version_free(w->staged[0]);
		memmove(&w->staged[0], &w->staged[1], (VKEEP - 1) * sizeof(w->staged[0]));
		w->nstaged--;
	}
	w->staged[w->nstaged++] = v;
	return held_rebuild(w);
}

/*
 * The target op: pin version @id (see store/target.h).  O(files of the
 * kept versions) in memory: no I/O.  A failed pin leaves nothing pinned.
 */
static int tbl_pin(struct sfs_target_writer *w, uint64_t id)
{
	struct version *v = NULL;
	unsigned k = 0;
	int rc;

	if (id == 0) {
		if (w->gen)
			rc = sfs__err(-ENOENT, "worker %u: pin of the version at open after "
				      "applies", w->worker);
		else
			rc = version_capture(w, 0, &v);
	} else {
		rc = sfs__err(-ENOENT, "worker %u: checkpoint %llu was not staged by this "
			      "writer", w->worker, (unsigned long long)id);
		for (unsigned i = 0; i < w->nstaged; i++)
			if (w->staged[i]->id == id) {
				v = w->staged[i];
				w->staged[i] = NULL;
				rc = 0;
			}
	}
	version_free(w->pinned);
	w->pinned = v;
	/* the versions staged up to it will never be pinned */
	for (unsigned i = 0; i < w->nstaged; i++) {
		if (w->staged[i] && (!v || w->staged[i]->id > id))
			w->staged[k++] = w->staged[i];
		else
			version_free(w->staged[i]);
	}
	w->nstaged = k;
	if (held_rebuild(w) && !rc)
		rc = -ENOMEM;
	return rc;
}

/* The manifest entry of kept file @f. */
static void ventry_of(const struct vfile *f, int op, struct sfs_mf_entry *e)
{
	e->op = op;
	e->file = f->name;
	e->level = f->level;
	e->rows = f->rows;
	e->size = f->size;
	e->min_key = f->min_key;
	e->max_key = f->max_key;
	e->min_klen = f->min_klen;
	e->max_klen = f->max_klen;
	e->kg_lo = f->kg_lo;
	e->kg_hi = f->kg_hi;
}

/* 1 if @vt (NULL: an empty table) names @name. */
static int vtable_names(const struct vtable *vt, const char *name)
{
	if (!vt || !name[0])
		return 0;
	if (strcmp(vt->dvi, name) == 0)
		return 1;
	for (size_t i = 0; i < vt->nf; i++)
		if (strcmp(vt->f[i].name, name) == 0)
			return 1;
	return 0;
}

/*
 * The session of @t (t->mu held) becomes @vt, just committed: the readers
 * of the files it keeps are taken over, the others opened, the vectors
 * read from its index; t->loads moves, so a shaping merge under way drops
 * its output (its inputs and vectors were the abandoned version's).
 * @match[k]: the current file that is @vt's k-th, or -1.
 */
static int table_take(struct table *t, const struct vtable *vt, const long *match)
{
	size_t nk = vt ? vt->nf : 0;
	struct tfile *nf = calloc(nk + 1, sizeof(*nf));
	int rc = 0;

	t->loads++;
	if (!nf)
		return -ENOMEM;
	for (size_t k = 0; k < nk && !rc; k++) {
		struct tfile *f = &nf[k];

		if (match[k] >= 0) {
			*f = t->f[match[k]];
			memset(&t->f[match[k]], 0, sizeof(*f));
			free(f->dv);
			f->dv = NULL;
			f->dv_words = 0;
			f->dv_set = 0;
			f->merging = 0;
		} else {
			memcpy(f->name, vt->f[k].name, sizeof(f->name));
			rc = file_open(t, f);
		}
		f->level = vt->f[k].level;
		f->order = k + 1;
	}
	table_drop_files(t);
	free(t->f);
	t->f = nf;
	t->nf = nk;
	t->cap = nk + 1;
	t->order = nk;
	memcpy(t->dvi, vt ? vt->dvi : "", vt ? sizeof(t->dvi) : 1);
	if (!rc)
		rc = dv_load(t);
	t->loaded = rc == 0;
	return rc;
}

/*
 * Switch table @t (loaded, t->mu held) to @vt (NULL: empty) with watermark
 * @seq: one COMPACT snapshot through table_commit (so its rebase and
 * expiry policy holds) whose delta deletes the current files @vt does not
 * keep and adds @vt's others, then the session taken over (table_take;
 * on failure reloaded from the disk).  The current files @vt does not
 * name are deferred (held ones stay parked; at open nothing is held, and
 * the gc that follows collects the data files before their grace ends,
 * but not the vector index the previous snapshot names).  Cost: O(current
 * x kept files) name compares, one manifest commit, a footer read per file
 * the current version does not share.
 */
static int table_switch(struct sfs_target_writer *w, struct table *t, const struct vtable *vt,
			uint64_t seq)
{
	size_t nk = vt ? vt->nf : 0, ne = 0;
	struct sfs_mf_entry *e = malloc((t->nf + nk + 1) * sizeof(*e));
	unsigned char *keep = calloc(t->nf + 1, 1);
	long *match = malloc((nk + 1) * sizeof(*match));
	char old_dvi[SFS_TABLE_NAME], path[1024];
	uint64_t old_wm = t->watermark;
	int rc = 0;

	if (!e || !keep || !match) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < nk; k++) {
		match[k] = -1;
		for (size_t i = 0; i < t->nf && match[k] < 0; i++)
			if (!keep[i] && t->f[i].level == vt->f[k].level &&
			    strcmp(t->f[i].name, vt->f[k].name) == 0) {
				keep[i] = 1;
				match[k] = (long)i;
			}
	}
	for (size_t i = 0; i < t->nf; i++)
		if (!keep[i])
			entry_of(&t->f[i], SFS_MF_DELETE, t->f[i].level, &e[ne++]);
	for (size_t k = 0; k < nk; k++)
		if (match[k] < 0)
			ventry_of(&vt->f[k], SFS_MF_ADD, &e[ne++]);
	memcpy(old_dvi, t->dvi, sizeof(old_dvi));
	memcpy(t->dvi, vt ? vt->dvi : "", vt ? sizeof(t->dvi) : 1);
	t->watermark = seq;
	if ((rc = table_commit(w, t, SFS_MF_COMPACT, e, ne))) {
		memcpy(t->dvi, old_dvi, sizeof(t->dvi));
		t->watermark = old_wm;
		goto out;
	}
	for (size_t i = 0; i < t->nf; i++)
		if (!vtable_names(vt, t->f[i].name)) {
			snprintf(path, sizeof(path), "%s/%s", t->dir, t->f[i].name);
			defer_unlink(w, path);
		}
	if (old_dvi[0] && !vtable_names(vt, old_dvi)) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, old_dvi);
		defer_unlink(w, path);
	}
	if ((rc = table_take(t, vt, match)))
		rc = table_load(t, 0);	/* the disk has the switch: reread it */
	else
		t->watermark = seq;
out:
	free(e);
	free(keep);
	free(match);
	return rc;
}

/* The files of @vt are live again: no longer parked.  Right after the
 * table's switch, under its lock: a merge of the switched table that
 * parks one of them again later must stay parked. */
static void rollback_unhold(struct sfs_target_writer *w, const struct vtable *vt)
{
	size_t k = 0;

	pthread_mutex_lock(&w->del_mu);
	for (size_t i = 0; i < w->nhold; i++) {
		const char *name = strrchr(w->hold[i].path, '/');

		name = name ? name + 1 : w->hold[i].path;
		if (!vtable_names(vt, name))
			w->hold[k++] = w->hold[i];
	}
	w->nhold = k;
	pthread_mutex_unlock(&w->del_mu);
}

/* @v as TABLES text at @path: the rollback's intent. */
static int intent_write(const char *path, const struct version *v)
{
	struct sfs_tsnap s = { .watermark = v->seq, .ntables = 0 };
	struct sfs_tsnap_table tabs[SFS_MAX_STATES];
	int rc = 0;

	memset(tabs, 0, sizeof(tabs));
	s.tables = tabs;
	for (uint32_t i = 0; i < v->nt && !rc; i++) {
		const struct vtable *vt = &v->t[i];
		struct sfs_tsnap_table *st = &tabs[s.ntables++];

		st->sid = vt->sid;
		snprintf(st->dvi, sizeof(st->dvi), "%s", vt->dvi);
		if (vt->nf && !(st->files = calloc(vt->nf, sizeof(*st->files))))
			rc = -ENOMEM;
		for (size_t f = 0; f < vt->nf && !rc; f++, st->nfiles++) {
			snprintf(st->files[f].name, sizeof(st->files[f].name), "%s", vt->f[f].name);
			st->files[f].level = vt->f[f].level;
			st->files[f].rows = vt->f[f].rows;
		}
	}
	if (!rc)
		rc = sfs_tsnap_write(path, &s);
	for (uint32_t i = 0; i < s.ntables; i++)
		free(tabs[i].files);
	return rc;
}

/*
 * The target op: back to the pinned version as a new publication (see
 * store/target.h and above).  The flush under way is abandoned (every
 * table's staged rows dropped, commit_mu released after the publication);
 * commit_mu is held throughout, so the background thread publishes
 * nothing meanwhile and readers see the version before or the pinned one.
 * The versions staged after the pin are dropped; the pin stays.
 */
static int tbl_rollback(struct sfs_target_writer *w, uint64_t *seq)
{
	const struct version *v = w->pinned;
	char path[1024];
	int rc = 0;

	if (!v)
		return sfs__err(-ENOENT, "worker %u: no version is pinned", w->worker);
	if (!w->in_commit) {
		pthread_mutex_lock(&w->commit_mu);
		w->in_commit = 1;
	}
	snprintf(path, sizeof(path), "%s/ROLLBACK", w->base);
	if ((rc = intent_write(path, v)))
		goto out;
	sfs_fault("table.rollback.intent");
	for (uint32_t sid = 0; sid < SFS_MAX_STATES && !rc; sid++) {
		const struct vtable *vt = version_table(v, sid);
		struct table *t = table_at(w, sid);

		if (!t && vt && !(t = table_get(w, sid))) {
			rc = -ENOMEM;
			break;
		}
		if (!t)
			continue;
		pthread_mutex_lock(&t->mu);
		stage_clear(t);	/* the abandoned flush's rows */
		if (!t->loaded)
			rc = table_load(t, 0);
		if (!rc && (vt || t->snap))
			rc = table_switch(w, t, vt, v->seq);
		if (!rc && vt)
			rollback_unhold(w, vt);
		pthread_mutex_unlock(&t->mu);
		if (!rc)
			sfs_fault("table.rollback.table");
	}
	if (rc) {
		w->rb_failed = 1;	/* some tables switched: never publish a mix */
		goto out;
	}
	sfs_fault("table.rollback.done");
	for (unsigned i = 0; i < w->nstaged; i++)
		version_free(w->staged[i]);
	w->nstaged = 0;
	(void)held_rebuild(w);	/* out of memory: their files stay parked a while longer */
	if (unlink(path) && errno != ENOENT) {
		rc = sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
		goto out;
	}
	w->applied = v->seq;
	w->commit_seq = 0;
	w->more = 0;
	w->failing = 0;
	w->rb_failed = 0;	/* every table is the pinned version again */
	rc = publish(w);
	if (!rc)
		*seq = v->seq;
out:
	w->in_commit = 0;
	pthread_mutex_unlock(&w->commit_mu);
	if (rc)
		sfs_log("worker %u: rollback to checkpoint %llu failed: %s", w->worker,
			(unsigned long long)v->id, sfs_last_error());
	return rc;
}

/*
 * The target op: an empty store as a new publication (store/target.h).  A
 * rollback to a version of no table at the applied seq: the intent names
 * no file, each table commits one snapshot with an empty live set, and a
 * kill midway is finished by the next open as any rollback's.  The pin and
 * the staged versions go (their files are unlinked after their grace
 * period).  Cost: one manifest commit per table, no data file read.
 */
static int tbl_reset(struct sfs_target_writer *w, uint64_t *seq)
{
	struct version *empty = calloc(1, sizeof(*empty)), *pinned = w->pinned;
	int rc;

	if (!empty)
		return -ENOMEM;
	empty->seq = w->applied;
	w->pinned = empty;
	rc = tbl_rollback(w, seq);
	w->pinned = NULL;
	version_free(empty);
	version_free(pinned);
	(void)held_rebuild(w);	/* out of memory: parked files wait for the next pin */
	return rc;
}

/*
 * At open, before the gc: a rollback killed after its intent is finished
 * from the intent (TABLES' format, so each file's entry comes from its
 * footer, as adopt's).  @t: the table of @sid, loaded without gc.
 */
static int rollforward_table(struct sfs_target_writer *w, struct table *t,
			     const struct sfs_tsnap *s)
{
	const struct sfs_tsnap_table *st = NULL;
	struct vtable vt;
	int rc = 0;

	for (uint32_t i = 0; i < s->ntables; i++)
		if (s->tables[i].sid == t->sid)
			st = &s->tables[i];
	memset(&vt, 0, sizeof(vt));
	vt.sid = t->sid;
	if (st) {
		if (st->dvi[0] && (rc = name_set(vt.dvi, st->dvi, w->base)))
			return rc;
		if (!(vt.f = calloc(st->nfiles + 1, sizeof(*vt.f))))
			return -ENOMEM;
		for (uint32_t i = 0; i < st->nfiles && !rc; i++) {
			struct tfile f;

			memset(&f, 0, sizeof(f));
			if (!(rc = name_set(f.name, st->files[i].name, w->base)) &&
			    !(rc = file_open(t, &f)) && !(rc = vfile_set(&vt.f[vt.nf], &f,
									  st->files[i].level)))
				vt.nf++;
			file_free(&f);
		}
	}
	if (!rc && (st || t->snap))
		rc = table_switch(w, t, st ? &vt : NULL, s->watermark);
	vtable_free(&vt);
	return rc;
}

/* ---- open, adopt, close ------------------------------------------------------------------ */

static int write_text(const char *path, const char *text)
{
	char tmp[1024];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return sfs__err(sfs__errno(), "%s: %s", tmp, strerror(errno));
	return sfs_file_commit(f, tmp, path, fputs(text, f) < 0 ? -EIO : 0);
}

/* Remove the table directories s<sid>/ of the store. */
static int drop_tables(struct sfs_target_writer *w)
{
	char path[1024];
	struct dirent *e;
	DIR *d = opendir(w->base);
	int rc = 0;

	if (!d)
		return 0;
	while (!rc && (e = readdir(d))) {
		unsigned sid;
		char c;

		if (sscanf(e->d_name, "s%u%c", &sid, &c) != 1)
			continue;
		snprintf(path, sizeof(path), "%s/%s", w->base, e->d_name);
		rc = sfs_rmtree(path);
	}
	closedir(d);
	return rc;
}

/*
 * A restore put a checkpoint's files and TABLES at the store's top level
 * (the supervisor, before any child started, with the checkpoint's state
 * registry): link them into fresh table directories, commit one snapshot
 * per table, then drop TABLES and the flat names.  A kill midway leaves
 * TABLES: the next open starts over.
 */
static int adopt(struct sfs_target_writer *w, const char *tables, const char *ident)
{
	struct sfs_tsnap s;
	char from[1024], to[1024];
	int rc;

	if ((rc = sfs_tsnap_read(tables, &s)))
		return rc;
	if ((rc = drop_tables(w)))
		goto out;
	for (uint32_t k = 0; k < s.ntables && !rc; k++) {
		const struct sfs_tsnap_table *st = &s.tables[k];
		struct sfs_mf_entry *e = NULL;
		struct sfs_mf_commit c = { .kind = SFS_MF_COMPACT, .schema_id = st->sid };
		struct table tt;

		if (st->sid >= SFS_MAX_STATES) {
			rc = sfs__err(SFS_ECORRUPT, "%s: state %u out of range", tables, st->sid);
			break;
		}
		memset(&tt, 0, sizeof(tt));
		snprintf(tt.dir, sizeof(tt.dir), "%.490s/s%u", w->base, st->sid);
		if ((rc = sfs_mkdirs(tt.dir, 0700)))
			break;
		if (!(e = calloc(st->nfiles + 1, sizeof(*e))) ||
		    !(tt.f = calloc(st->nfiles + 1, sizeof(*tt.f)))) {
			free(e);
			rc = -ENOMEM;
			break;
		}
		for (uint32_t i = 0; i < st->nfiles && !rc; i++) {
			struct tfile *f = &tt.f[tt.nf++];

			snprintf(from, sizeof(from), "%s/%s", w->base, st->files[i].name);
			snprintf(to, sizeof(to), "%s/%s", tt.dir, st->files[i].name);
			if (!(rc = name_set(f->name, st->files[i].name, tables)) &&
			    /* already there (a retried adoption): fine if the same */
			    !(rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL)) &&
			    !(rc = file_open(&tt, f)))
				entry_of(f, SFS_MF_ADD, st->files[i].level, &e[i]);
		}
		if (!rc && st->dvi[0]) {
			snprintf(from, sizeof(from), "%s/%s", w->base, st->dvi);
			snprintf(to, sizeof(to), "%s/%s", tt.dir, st->dvi);
			rc = sfs_link_or_copy(from, to, SFS_EXIST_SAME, 0, NULL);
			c.dv_index = st->dvi;
		}
		if (!rc) {
			c.entries = e;
			c.n = st->nfiles;
			rc = sfs_mf_commit(tt.dir, 1, &c);
		}
		for (size_t i = 0; i < tt.nf; i++)
			file_free(&tt.f[i]);
		free(tt.f);
		free(e);
	}
	if (!rc) {
		snprintf(to, sizeof(to), "%s/IDENTITY", w->base);
		rc = write_text(to, ident);
	}
	if (!rc && unlink(tables))
		rc = sfs__err(sfs__errno(), "%s: %s", tables, strerror(errno));
	for (uint32_t k = 0; k < s.ntables && !rc; k++) {
		for (uint32_t i = 0; i < s.tables[k].nfiles; i++) {
			snprintf(from, sizeof(from), "%s/%s", w->base, s.tables[k].files[i].name);
			unlink(from);
		}
		if (s.tables[k].dvi[0]) {
			snprintf(from, sizeof(from), "%s/%s", w->base, s.tables[k].dvi);
			unlink(from);
		}
	}
	if (!rc)
		sfs_log("table store %s: adopted %u tables of a restore", w->base, s.ntables);
out:
	sfs_tsnap_free(&s);
	return rc;
}

/* Ours (IDENTITY names this segment), adopted (TABLES), or wiped. */
static int store_prepare(struct sfs_target_writer *w)
{
	char path[1024], ident[SFS_JOB_NAME_MAX + 64], cur[SFS_JOB_NAME_MAX + 64] = "";
	struct stat st;
	FILE *f;
	int rc;

	snprintf(ident, sizeof(ident), "%s/%llu/%llu\n", w->seg->hdr->sh_job,
		 (unsigned long long)w->seg->hdr->sh_created_ns,
		 (unsigned long long)w->seg->hdr->sh_generation);
	if ((rc = sfs_mkdirs(w->base, 0700)))
		return rc;
	snprintf(path, sizeof(path), "%s/TABLES", w->base);
	if (stat(path, &st) == 0) {
		rc = adopt(w, path, ident);
		goto not_ours;
	}
	snprintf(path, sizeof(path), "%s/IDENTITY", w->base);
	if ((f = fopen(path, "r"))) {
		if (!fgets(cur, sizeof(cur), f))
			cur[0] = '\0';
		fclose(f);
	}
	if (strcmp(cur, ident) == 0)
		return 0;
	if (cur[0])
		sfs_log("table store %s: state of another group (%.*s): starting empty", w->base,
			(int)strcspn(cur, "\n"), cur);
	if (!(rc = drop_tables(w)))
		rc = write_text(path, ident);
not_ours:
	/* a rollback intent of the state just replaced is not this one's */
	snprintf(path, sizeof(path), "%s/ROLLBACK", w->base);
	if (!rc && unlink(path) && errno != ENOENT)
		rc = sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	return rc;
}

static void tbl_close(struct sfs_target_writer *w)
{
	if (!w)
		return;
	if (w->bg_on) {
		sfs_store_release(&w->stop, 1);
		pthread_join(w->bg, NULL);
	}
	for (uint32_t sid = 0; sid < SFS_MAX_STATES; sid++) {
		struct table *t = w->t[sid];

		if (!t)
			continue;
		table_drop_files(t);
		free(t->f);
		free(t->sb);
		free(t->rows);
		free(t->clr);
		pthread_mutex_destroy(&t->mu);
		free(t);
	}
	scratch_free(&w->main_sc);
	scratch_free(&w->bg_sc);
	for (unsigned i = 0; i < w->nstaged; i++)
		version_free(w->staged[i]);
	version_free(w->pinned);
	free(w->held);
	free(w->hold);	/* parked files: orphans the next open collects */
	free(w->del);	/* pending unlinks: orphans the next open collects */
	free(w->gt);
	free(w->gf);
	pthread_mutex_destroy(&w->pub_mu);
	/* A commit left half-way (a stop mid-flush) holds commit_mu, locked by
	 * the maintenance thread that owned this writer and has stopped: it is
	 * neither unlocked from here (another thread's lock: undefined) nor
	 * destroyed (a held mutex: undefined); its memory goes with w. */
	if (!w->in_commit)
		pthread_mutex_destroy(&w->commit_mu);
	pthread_mutex_destroy(&w->del_mu);
	free(w);
}

static int tbl_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		    const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	struct sfs_tsnap rb = { 0 };
	char intent[1024];
	struct stat ist;
	struct dirent *e;
	int have_rb = 0;
	DIR *d;
	int rc;

	(void)cfg;
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->pub_mu, NULL);
	pthread_mutex_init(&w->commit_mu, NULL);
	pthread_mutex_init(&w->del_mu, NULL);
	w->gt = calloc(SFS_MAX_STATES, sizeof(*w->gt));
	w->gf = calloc(SFS_TABLE_PUB_FILES, sizeof(*w->gf));
	if (!w->gt || !w->gf) {
		rc = -ENOMEM;
		goto fail;
	}
	w->seg = s;
	w->worker = worker;
	w->self = self;
	w->knobs = sfs_table_knobs();
	/* The working tables need no fsync of their own: the checkpointer
	 * fsyncs each file it links, a restore rebuilds them from a
	 * checkpoint and a new group starts them empty (store/table/layout/sync.h).
	 * This process writes no other layout files. */
	sfs_layout_set_sync(!(w->knobs & SFS_TABLE_K_CKPT_SYNC));
	if ((rc = sfs__table_store_dir(s, worker, w->base, sizeof(w->base))) ||
	    (rc = sfs__table_pub_find(s, worker, 1, &w->pub)) || (rc = store_prepare(w)))
		goto fail;
	sfs_store_relaxed(&w->pub->tp_knobs, w->knobs);
	w->applied = sfs_load_acquire(&w->pub->tp_applied);
	snprintf(intent, sizeof(intent), "%s/ROLLBACK", w->base);
	if (stat(intent, &ist) == 0) {
		/* a rollback killed after its intent: finished below, before the gc */
		if ((rc = sfs_tsnap_read(intent, &rb)))
			goto fail;
		have_rb = 1;
	}
	if (!(d = opendir(w->base))) {
		rc = sfs__err(sfs__errno(), "%s: %s", w->base, strerror(errno));
		goto fail;
	}
	while (!rc && (e = readdir(d))) {
		unsigned sid;
		char c;
		struct table *t;

		if (sscanf(e->d_name, "s%u%c", &sid, &c) != 1 || sid >= SFS_MAX_STATES)
			continue;
		if (!(t = table_get(w, sid))) {
			rc = -ENOMEM;
			break;
		}
		if (have_rb && ((rc = table_load(t, 0)) || (rc = rollforward_table(w, t, &rb))))
			break;
		if ((rc = table_load(t, 1)))
			break;
		if (w->knobs & SFS_TABLE_K_ROUND)
			rc = catch_up_rounds(w, t, &w->main_sc);
	}
	closedir(d);
	if (!rc && have_rb) {
		if (unlink(intent) && errno != ENOENT)
			rc = sfs__err(sfs__errno(), "%s: %s", intent, strerror(errno));
		else
			w->applied = rb.watermark;
		sfs_log("table store %s: finished a rollback to seq %llu", w->base,
			(unsigned long long)rb.watermark);
	}
	if (rc || (rc = publish(w)))
		goto fail;
	if (self) {
		if ((rc = -pthread_create(&w->bg, NULL, bg_main, w))) {
			sfs__err(rc, "worker %u: cannot start the table maintenance thread", worker);
			goto fail;
		}
		w->bg_on = 1;
	}
	sfs_tsnap_free(&rb);
	*out = w;
	return 0;
fail:
	sfs_tsnap_free(&rb);
	tbl_close(w);
	return rc;
}

static int tbl_busy(struct sfs_target_writer *w)
{
	/* background work has its own thread; unlinks are reaped there */
	return w->more;
}

const struct sfs_target_ops sfs_target_table = {
	.name = "table",
	.open = tbl_open,
	.apply = tbl_apply,
	.commit = tbl_commit,
	.busy = tbl_busy,
	.files = tbl_files,
	.snapshot = tbl_snapshot,
	.close = tbl_close,
	.instance_root = sfs__table_instance_root,
	.restore = sfs__table_restore,
	.rebuild = sfs__table_rebuild,
	.forget = sfs__table_forget,
	.scan = sfs__table_scan,
	.ttl = tbl_ttl,
	.pin = tbl_pin,
	.rollback = tbl_rollback,
	.reset = tbl_reset,
	.summary_json = sfs__table_summary_json,
	.rd.reader_open = sfs__table_reader_open,
	.rd.catch_up = sfs__table_catch_up,
	.rd.probe = sfs__table_probe,
	.rd.map_get = sfs__table_map_get,
	.rd.map_iter = sfs__table_map_iter,
	.rd.reader_close = sfs__table_reader_close,
};
