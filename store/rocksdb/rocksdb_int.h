/*
 * rocksdb_int.h — the `rocksdb` target's private header: what the files of
 * store/rocksdb/ share, not for other modules.  First the instance's names
 * and keys and the tuning constants more than one file needs; then the
 * writer's structs (the compactor's, one per worker's instance); then the
 * functions one file calls in another, grouped by the file that defines
 * them (rocksdb.c has the floor plan).  The readers' struct is read.c's
 * alone.
 */
#ifndef SFS_STORE_ROCKSDB_INT_H
#define SFS_STORE_ROCKSDB_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "common/keygroup.h"
#include "common/ttl.h"
#include "shm/segment.h"
#include "store/rocksdb/rocksdb.h"
#include "store/target.h"

#define CF_PREFIX "st:"
#define NS_LEN 8u
#define KBUF (SFS_KEY_MAX + SFS_KEY_PREFIX + NS_LEN + 32)
#define MARKER_KEY "\xff\xff" "sfs.applied"
#define MARKER_LEN (sizeof(MARKER_KEY) - 1)
#define IDENT_KEY "sfs.identity"
#define RESTORED_MARK "SFS-RESTORED"   /* rocksdb.h: a restore's files, to adopt */
#define BLOCK_CACHE_BYTES (32ull << 20)

/* Prefix bloom of map and list state: kg|state|ns|klen and 8 key bytes, a
 * map of an int64 key (every map of the Nexmark queries).  A scan whose
 * prefix is shorter seeks in total order (no prefix filter): a filter over
 * a longer prefix than the probe's would skip files holding its entries. */
#define MAP_PREFIX_LEN (SFS_KEY_PREFIX + NS_LEN + 2 + 8)

/* L0 files of a family at which commit waits for compaction: below
 * RocksDB's level0_slowdown_writes_trigger (20 leveled; L0_BACKLOG_U + 4
 * universal, cf_shape), where a write would stall and a memtable flush
 * request (FlushOptions.allow_write_stall is false, and the C API cannot
 * set it) blocks the caller until compaction catches up — seconds with
 * paced compaction, long enough for the supervisor to take a compactor
 * blocked there for hung. */
#define L0_BACKLOG 16u

/* Universal: sorted runs in L0 at which a compaction starts (RocksDB's
 * default 4), and the backlog.  8, measured: a byte is merged about
 * log_8 instead of log_2 times (q20 at 20M events: 5.7-6.1 instead of 8.5
 * GB compacted, 59-75 instead of 104 CPU s); the cost is up to 8 more
 * runs a probe may look at, each behind its bloom filter. */
#define UNIV_TRIGGER 8
#define L0_BACKLOG_U 24u

/* Compaction pacing (SFS_RDBT_PACING) and the unpaced setting. */
#define PACE_JOBS 3	/* RocksDB: max(1, 3/4) = 1 flush, 2 compactions */
#define PACE_RATE_MB 128
#define UNPACED_JOBS 4

/* Staged versions kept for a pin at once: checkpoints complete in order,
 * a few at most are staged and not yet complete. */
#define CAND_MAX 4u

/* ---- the writer ------------------------------------------------------------- */

struct wcf {
	rocksdb_column_family_handle_t *h;
	rocksdb_options_t *o;
	rocksdb_compactionfilter_t *f; /* a TTL state's (ttl_filter): the options hold a
					* raw pointer, so it outlives the instance */
	rocksdb_options_t *so;  /* its SstFileWriter's (sst_options), made at the first ingest */
	uint64_t applied;       /* its marker, as on disk */
};

/*
 * A state's share of the buffer being flushed, staged process-locally by
 * apply() and written by commit(): records (op, key and value lengths, the
 * RocksDB key, the value) in apply order, which a WriteBatch replays as
 * they came (a DeleteRange before the entries that follow it), and the
 * offsets of its point records, which an SST writes in key order.  The
 * staged copy outlives a failed commit, so a retry rebuilds the batch or
 * the SST from it after the buffer's own memory is long unread.
 */
enum { SOP_PUT = 1, SOP_DEL, SOP_MERGE, SOP_RANGE /* value: the range's end key */ };
#define SREC_HDR 9u     /* op(1) | klen(4) | vlen(4) */

struct wstage {
	unsigned char *buf;     /* records, in apply order */
	size_t len, cap;
	uint64_t *idx;          /* offsets of the point records */
	size_t n, ncap;
	size_t nrange;          /* DeleteRange records */
	int unsorted;           /* a point key not after the one before it */
	int dup;                /* two records of one key: batch only (an SST needs order) */
	int touched;            /* has records of this buffer */
	int done;               /* its records and marker are durable (an SST ingested) */
	int inbatch;            /* in the WriteBatch being written and flushed */
	rocksdb_sstfilewriter_t *sw; /* the SST being written */
	size_t sst_pos;         /* next idx[] the SST gets */
	uint64_t sst_t0;
	/* apply's save point: what to roll back to when a call fails */
	uint32_t mgen;
	size_t m_len, m_n, m_nrange;
	int m_unsorted, m_dup, m_touched;
};

/* What a TTL state's compaction filter reads (ttl_filter), on RocksDB's
 * background threads: the clock its rule names as of the newest ttl()
 * (ms; 0 before the first: nothing expires), stored by the compactor's
 * thread, loaded by the filter — atomics, the only data they share. */
struct wttl {
	struct sfs_target_writer *w;
	uint64_t now;
};

struct sfs_target_writer {
	struct sfs_seg *seg;
	const struct sfs_proc_slot *self;
	uint32_t worker;
	struct sfs_rdbt_pub *pub;
	struct sfs_rdbt_knobs k;
	char path[PATH_MAX];
	char ipath[PATH_MAX];   /* <path>.ingest: SSTs being written */
	char ident[SFS_JOB_NAME_MAX + 64];
	int stage_ready;        /* the checkpoint stage's parent exists */
	rocksdb_options_t *dbo;
	rocksdb_cache_t *cache;
	rocksdb_ratelimiter_t *limiter;
	rocksdb_t *db;          /* NULL after a failed reopen: commit opens it again */
	rocksdb_writeoptions_t *wo;
	rocksdb_flushoptions_t *fo;
	rocksdb_readoptions_t *ro;
	rocksdb_envoptions_t *eo;
	rocksdb_ingestexternalfileoptions_t *io;
	rocksdb_column_family_handle_t *def;	/* only to destroy: the default family
						 * is used through the non-_cf calls */
	rocksdb_options_t *defo;
	struct wcf cf[SFS_MAX_STATES];
	struct wstage st[SFS_MAX_STATES];
	rocksdb_writebatch_t *wb;
	uint64_t seq;           /* the buffer staged, 0 none */
	uint32_t gen;           /* apply calls (save points) */
	int staged;             /* apply staged records of @seq: a commit is due */
	int batched;            /* the WriteBatch is built from the stages */
	int batch_any;          /* ... and holds something */
	int written;            /* the batch is in the memtables, a flush is due */
	int flushing;           /* its flush is scheduled, not yet installed */
	int reopen;             /* a RocksDB call failed: reopen before the next try */
	uint64_t flush_t0;      /* when it was scheduled */
	uint64_t purge_token;   /* grace period before the next deletion window */
	uint64_t wait_t0;       /* a commit waits for an L0 backlog since, 0 not */
	uint64_t wait_ns;       /* ... time waited so far (backlog_wait) */
	/* a failing commit: retried with a back-off, logged when it starts,
	 * every LOG_EVERY_NS while it lasts, and when it ends */
	unsigned fails;
	int last_rc;
	uint64_t retry_ns, logged_ns;
	unsigned char kbuf[KBUF];
	unsigned char kend[KBUF];
	struct wttl ttl[SFS_MAX_STATES];  /* per state, kept across reopens */
	uint64_t ttl_dropped;   /* entries ttl_filter removed (atomic, relaxed) */
	/* Rollback in place (rollback.c): process-local, like a pin */
	char ppath[PATH_MAX];   /* <path>.pin */
	struct {
		uint64_t id, seq;
		uint64_t ttl[SFS_MAX_STATES];   /* the TTL filters' clocks at staging */
	} cand[CAND_MAX];       /* staged, not pinned: c<id> */
	unsigned ncand;
	int pinned;             /* <ppath>/c<pin_id> is the version a rollback returns to */
	uint64_t pin_ttl[SFS_MAX_STATES]; /* its filters' clocks, put back by a rollback */
	int applied_any;        /* apply was called since open: pin(0) is refused */
	uint64_t rollbacks;     /* this writer's: names <ppath>/r<n>, the swapped-out one */
	unsigned trashing;      /* old instances being removed by a thread (atomic) */
	uint64_t pin_id, pin_seq;
};

/* ---- rocksdb.c: what every part shares --------------------------------------- */

/* <sh_data_dir>/w<worker>: the worker's instance. */
int sfs__rdbt_inst_path(const struct sfs_seg *s, uint32_t worker, char *buf, size_t n);
/* Worker @worker's region; created (by the compactor) when @create, else
 * *@out stays NULL until it exists. */
int sfs__rdbt_pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_rdbt_pub **out);
int sfs__rdbt_cf_state(const struct sfs_seg *s, const char *name);
const struct sfs_state_desc *sfs__rdbt_desc_of(const struct sfs_seg *s, int sid);
uint32_t sfs__rdbt_enc_key(unsigned char *out, uint64_t ns, const void *key, uint32_t klen);
void sfs__rdbt_prefix_end(unsigned char *p, uint32_t n);
uint64_t sfs__rdbt_read_marker(rocksdb_t *db, const rocksdb_readoptions_t *ro,
			       rocksdb_column_family_handle_t *h);
int sfs__rdbt_err(const char *path, char **err, const char *op);
void sfs__rdbt_rm_tree(const char *path);

/* ---- tune.c: the knobs and a state's family options ------------------------------ */

struct sfs_rdbt_knobs sfs__rdbt_knobs_get(void);
rocksdb_options_t *sfs__rdbt_cf_options(const struct sfs_state_desc *d, rocksdb_cache_t *cache,
					const struct sfs_rdbt_knobs *k, int primary);

/* ---- ttl.c: state TTL --------------------------------------------------------------- */

rocksdb_compactionfilter_t *sfs__rdbt_ttl_attach(struct sfs_target_writer *w, int sid,
						 rocksdb_options_t *o);
void sfs__rdbt_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		   const struct sfs_ttl_clock *now);

/* ---- open.c: a writer's life -------------------------------------------------------- */

int sfs__rdbt_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		   const struct sfs_target_cfg *cfg, struct sfs_target_writer **out);
int sfs__rdbt_start(struct sfs_target_writer *w);
int sfs__rdbt_reopen(struct sfs_target_writer *w);
/* State @sid's column family, created at its first use; NULL on an error. */
struct wcf *sfs__rdbt_family(struct sfs_target_writer *w, uint32_t sid);
void sfs__rdbt_close(struct sfs_target_writer *w);
void sfs__rdbt_close_db(struct sfs_target_writer *w);

/* ---- stage.c: the staged copy of a buffer -------------------------------------------- */

int sfs__rdbt_stage_add(struct wstage *s, unsigned op, const void *k, uint32_t kl, const void *v,
			uint32_t vl, uint32_t gen);
void sfs__rdbt_srec_at(const struct wstage *s, uint64_t off, unsigned *op,
		       const unsigned char **k, uint32_t *kl, const unsigned char **v,
		       uint32_t *vl);
void sfs__rdbt_stages_rollback(struct sfs_target_writer *w, uint32_t gen);
void sfs__rdbt_stage_sort(struct wstage *s);
void sfs__rdbt_stages_reset(struct sfs_target_writer *w);
void sfs__rdbt_stage_reset(struct wstage *s);

/* ---- write.c: apply, commit, busy ---------------------------------------------------- */

int sfs__rdbt_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		    uint64_t seq);
int sfs__rdbt_commit(struct sfs_target_writer *w, uint64_t seq);
int sfs__rdbt_busy(struct sfs_target_writer *w);

/* ---- snapshot.c: a version staged for a checkpoint ------------------------------------ */

int sfs__rdbt_snapshot(struct sfs_target_writer *w, const char *dir);
int sfs__rdbt_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path),
		    void *arg);

/* ---- rollback.c: rollback in place ------------------------------------------------------ */

/* Keep the stage @stage just made as a version a later pin may choose. */
void sfs__rdbt_cand_add(struct sfs_target_writer *w, const char *stage);
int sfs__rdbt_pin(struct sfs_target_writer *w, uint64_t id);
int sfs__rdbt_rollback(struct sfs_target_writer *w, uint64_t *seq);

/* ---- admin.c, scan.c: the supervisor's entries, reports --------------------------------- */

int sfs__rdbt_instance_root(const char *data_dir, int node, char *buf, size_t len);
int sfs__rdbt_restore(const struct sfs_target_env *e, uint32_t worker,
		      int (*put)(void *arg, const char *dir), void *arg);
int sfs__rdbt_rebuild_op(const struct sfs_target_env *e, uint32_t worker,
			 const char *const *src, unsigned n, uint32_t kg_lo, uint32_t kg_hi);
int sfs__rdbt_forget(const struct sfs_target_env *e, uint32_t worker);
void sfs__rdbt_stat(const struct sfs_seg *s, FILE *out);
void sfs__rdbt_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out);
int sfs__rdbt_scan(const char *dir, const struct sfs_state_desc *states,
		   int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg);

/* ---- read.c: the readers (workers) ----------------------------------------------------- */

int sfs__rdbt_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out);
int sfs__rdbt_catch_up(struct sfs_target_reader *r);
int sfs__rdbt_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		    struct sfs_probe_result *res);
int sfs__rdbt_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		      const void *ukey, uint32_t ulen, struct sfs_probe_result *res);
int sfs__rdbt_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
		       int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				 uint32_t vlen),
		       void *arg);
void sfs__rdbt_reader_close(struct sfs_target_reader *r);

#endif
