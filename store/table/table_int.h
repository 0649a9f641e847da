/*
 * table_int.h — the `table` target's private header: what the files of
 * store/table/ share, not for other modules.  First what the writer and
 * the readers share (the row key, the region, the readers' and the
 * supervisor's entries); then the writer's engine (the compactor): its
 * structs and the functions one file of it calls in another, grouped by
 * the file that defines them (table.c has the floor plan).
 */
#ifndef SFS_STORE_TABLE_INT_H
#define SFS_STORE_TABLE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/ttl.h"
#include "shm/proc.h"
#include "shm/segment.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/manifest.h"
#include "store/table/table.h"
#include "store/table/table_view.h"

/*
 * The prefix filter of a map or list table's data files (store/table/layout/datafile.h):
 * each row's prefix is its map's  parent | ns  — what a map read asks
 * (sfs__tv_prefix) — so a file answers "no entry of this map here" from its
 * filter.  Rows are parent | ns | user key and the parent carries its own
 * length (common/keygroup.h), so every row that starts with a map's prefix
 * has exactly that prefix: the promise prefix_of asks for.
 */
#define SFS_TABLE_PFX_MAP 1u
uint32_t sfs__table_map_prefix(const void *key, size_t klen);

/* Worker @worker's region; created (by the compactor) when @create, else
 * *@out stays NULL until it exists. */
int sfs__table_pub_find(struct sfs_seg *s, uint32_t worker, int create, struct sfs_table_pub **out);

/* <sh_data_dir>/w<worker>: the worker's store. */
int sfs__table_store_dir(const struct sfs_seg *s, uint32_t worker, char *buf, size_t len);

/* The row key of buffered key @key (@klen bytes) in namespace @ns (table.h):
 * @map: a map entry whose parent is @plen bytes (@klen == @plen: the map's
 * prefix in @ns).  @out holds @klen + 8 bytes; returns that length. */
size_t sfs__table_enc(unsigned char *out, int map, uint32_t plen, uint64_t ns, const void *key,
		      uint32_t klen);

/* The table target's reader side (table_read.c). */
int sfs__table_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out);
int sfs__table_catch_up(struct sfs_target_reader *r);
int sfs__table_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     struct sfs_probe_result *res);
int sfs__table_map_get(struct sfs_target_reader *r, const struct sfs_probe *parent,
		       const void *ukey, uint32_t ulen, struct sfs_probe_result *res);
int sfs__table_map_iter(struct sfs_target_reader *r, const struct sfs_probe *parent,
			int (*fn)(void *arg, const void *ukey, uint32_t ulen, const void *val,
				  uint32_t vlen),
			void *arg);
void sfs__table_reader_close(struct sfs_target_reader *r);
/* The probe work (datafile.h) of the reader's files open now, summed into
 * *@out: what a test reads to see how a probe was answered (a page's
 * binary search, or a walk of its rows).  O(open files). */
void sfs__table_reader_work(const struct sfs_target_reader *r, struct sfs_df_counters *out);
struct sfs_wbuf;
int sfs__table_images(struct sfs_target_reader *r, const struct sfs_wbuf *const **b,
		      const uint64_t **seq, unsigned *n);

/* The table target's entries for the supervisor (table_admin.c). */
struct sfs_target_env;
int sfs__table_instance_root(const char *data_dir, int node, char *buf, size_t len);
/* The offline scan of a checkpoint image (store/target.h, scan): table_scan.c. */
struct sfs_scan_entry;
struct sfs_state_desc;
int sfs__table_scan(const char *dir, const struct sfs_state_desc *states,
		    int (*fn)(void *arg, const struct sfs_scan_entry *e), void *arg);
int sfs__table_restore(const struct sfs_target_env *e, uint32_t worker,
		       int (*put)(void *arg, const char *dir), void *arg);
int sfs__table_rebuild(const struct sfs_target_env *e, uint32_t worker, const char *const *src,
		       unsigned n, uint32_t kg_lo, uint32_t kg_hi);
int sfs__table_forget(const struct sfs_target_env *e, uint32_t worker);
void sfs__table_summary_json(struct sfs_seg *s, uint32_t workers, FILE *out);

/* ==== the writer (the compactor) ==== */

#define VKEEP 4u              /* staged versions kept for a pin, besides the pinned one */

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
	/* State TTL (table_merge.c): the newest and oldest expiry of its rows
	 * (the first 8 bytes of each value, common/ttl.h), known when a merge
	 * wrote it or the background thread read it once; unknown (0) for
	 * files of no TTL state and until then */
	int exp_known;
	uint64_t exp_min, exp_max;
	uint32_t fid;               /* stable id within the table (the key index's file:
				     * t->f indexes shift), set when its reader opens */
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
#define PRE_KF_REJECTED (-3)        /* the map diff's check: probed, though the key filter
				     * rejected it (table_write.c) */

/* The key index of a value or counter table (table_kindex.c). */
struct kix_slot {
	uint64_t h;                 /* sfs_df_filter_hash of the key */
	uint32_t fid;               /* struct tfile's fid (maybe forwarded); 0: empty */
} __attribute__((packed));

struct kix_upd {                    /* one key's change: file ofid -> file nfid */
	uint64_t h;
	uint32_t ofid;              /* 0: the key had no entry */
	uint32_t nfid;              /* 0: the entry leaves */
};

#define KIX_FID_GONE UINT32_MAX     /* a forward: the merge wrote none of the file's rows */

struct kix {                        /* guarded by t->mu */
	struct kix_slot *s;
	size_t mask, n;             /* capacity - 1 (a power of two); entries */
	int valid;                  /* else the rounds probe every file */
	int building;               /* a rebuild reads the files: rounds journal */
	struct kix_upd *jr;
	size_t njr, jrcap;
	int jr_lost;
	uint64_t pub_keys, pub_bytes; /* this table's share of tp_index_keys, _bytes */
	/* Merged files' forwards (sfs__tbl_kix_merged): fwd[fid] is the fid
	 * of the file the merge of file fid wrote, KIX_FID_GONE, or 0 (a
	 * live file, or one that left with no entries); nfwd entries. */
	uint32_t *fwd;
	uint32_t nfwd;
};

/* The key filter of a map or list table (table_kfilter.c). */
struct kfilter {                    /* guarded by t->mu */
	uint32_t *bits;             /* nblocks blocks of 8 words (datafile_fmt.h's sbbf) */
	uint32_t nblocks;
	int valid;                  /* else: "maybe" to every key */
	int wanted;                 /* the map diff asked files enough to pay for it */
	uint64_t diff_rows, diff_probed; /* the map diff's rows and keys probed in files
				     * over the table's life ... */
	uint32_t diffs;             /* ... and its diffs */
	uint64_t n, cap;            /* keys added; keys it was sized for */
	int building;               /* a rebuild reads the files: rounds journal their keys */
	uint64_t building_bytes;    /* the size of the filter it builds */
	uint64_t *jr;               /* the journal: key hashes */
	size_t njr, jrcap;
	int jr_lost;                /* a journal entry could not be kept: the rebuild gives up */
	uint64_t pub_bytes;         /* this table's share of tp_kfilter_bytes */
};

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
	uint32_t fids;              /* the last struct tfile fid given */
	struct kix kix;             /* the key index (value and counter tables) */
	struct kfilter kf;          /* the key filter (map and list tables) */
	uint64_t loads;             /* sfs__tbl_table_load calls: a merge that saw another
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
	struct sfs_df_key *pk, *sk; /* probe keys, and sfs__tv_probe's scratch */
	uint32_t *pi;
	struct sfs_df_hit *ph;
	struct tv_res *pr;
	uint64_t *pm;               /* per probe key: the files that may hold it */
	size_t cap;
	struct sfs_bump arena;
};

/* A kept version (rollback in place: see sfs__tbl_pin). */
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

/* An absorbed buffer's image (table_l0.c), oldest first in the writer. */
struct sfs_tbl_l0 {
	uint64_t seq;
	char name[SFS_TABLE_NAME];  /* in <base>/l0/ */
	struct sfs_bufimg *im;      /* mapped, validated */
};

/*
 * The writer of one worker's store.  t[] entries are created by the main
 * thread and published to the background thread with a release store;
 * pub (shared memory) is written under pub_mu (sfs__tbl_publish) or with relaxed
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
	/* The merge budget (table_merge.c, SFS_TABLE_MERGE_BUDGET): merge input
	 * bytes earned per byte the flush writes, at the compactor's own
	 * priority; merge_spent is the background thread's alone. */
	uint32_t merge_budget;
	uint32_t zstd_from;         /* the first level merges write as ZSTD (at open) */
	uint32_t kf_min_keys;       /* the fewest keys a key filter is sized for (at open) */
	uint32_t kf_after;          /* keys probed per row above which a map table gets its
				     * key filter (at open; 0: every map table, at once) */
	uint32_t kf_rebuild_delay_ms; /* tests: a key filter rebuild waits this long before it
				     * reads the files, so rounds commit meanwhile */
	uint64_t merge_base;        /* tp_bytes_written at open (the region outlives us) */
	uint64_t merge_spent;
	int stop;                   /* close (release), the background thread (relaxed) */
	struct scratch main_sc;     /* lookups of the main thread */
	struct scratch bg_sc;       /* ... and of the background thread */
	/* State TTL (sfs__tbl_ttl; sfs__tbl_ttl_now reads them): written by the main
	 * thread, read by both, relaxed word by word; ttl_on (release) once
	 * the first call stored them. */
	uint64_t ttl_ms[SFS_MAX_STATES];
	uint32_t ttl_event[SFS_MAX_STATES];
	uint64_t ttl_proc_ms, ttl_event_ms;
	int ttl_on;
	/* Rollback in place (sfs__tbl_pin, sfs__tbl_rollback): the versions staged for
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
	int kix_check;              /* SFS_TABLE_KEY_INDEX_CHECK=1: rounds also probe
				     * every file and count differences (tests) */
	/* Level 0 as buffer images (table_l0.c), the main thread's. */
	struct sfs_tbl_l0 *l0;
	size_t nl0, l0cap;
	uint64_t l0_conv;           /* seq of the image staged for its commit, 0 none */
	uint64_t *l0_offs;          /* its sorted entries */
	struct sfs_wbuf_view *l0_views;
	size_t l0_vcap;
};

/* ---- small helpers, inline (hot: per row or per compare) ---- */

static inline struct table *sfs__tbl_table_at(struct sfs_target_writer *w, uint32_t sid)
{
	return __atomic_load_n(&w->t[sid], __ATOMIC_ACQUIRE);
}

static inline const unsigned char *sfs__tbl_sb_at(const struct table *t, uint64_t off)
{
	return t->sb + off;
}

static inline int sfs__tbl_is_map_kind(int kind)
{
	return kind == SFS_STATE_MAP || kind == SFS_STATE_LIST;
}

/* A row a round or merge drops as expired (only puts carry an expiry: a
 * TTL counter is written by read-modify-write, never as a delta). */
static inline int sfs__tbl_ttl_drops(int kind, const void *val, size_t vlen, uint64_t now)
{
	return kind == SFS_DF_PUT && sfs_ttl_expired(val, (uint32_t)vlen, now);
}

/* table_open.c: a writer's life: open, close, busy */
int sfs__tbl_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		  const struct sfs_target_cfg *cfg, struct sfs_target_writer **out);
int sfs__tbl_busy(struct sfs_target_writer *w);
void sfs__tbl_close(struct sfs_target_writer *w);

/* table_write.c: the flush: apply, commit (staging, map diff, data commit) */
int sfs__tbl_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		   uint64_t seq);
int sfs__tbl_commit(struct sfs_target_writer *w, uint64_t seq);
void sfs__tbl_stage_clear(struct table *t);

/* table_round.c: the minimal round: level-0 files up-levelled */
int sfs__tbl_catch_up_rounds(struct sfs_target_writer *w, struct table *t, struct scratch *sc);
int sfs__tbl_uplevel(struct sfs_target_writer *w, struct table *t, size_t i, struct scratch *sc,
		     const struct srow *pre, size_t npre);

/* table_session.c: a table in memory: files, vectors, snapshot commits, probe views */
struct table *sfs__tbl_table_get(struct sfs_target_writer *w, uint32_t sid);
int sfs__tbl_table_load(struct table *t, int gc);
int sfs__tbl_dv_load(struct table *t);
int sfs__tbl_file_open(struct table *t, struct tfile *f);
struct tfile *sfs__tbl_file_add(struct table *t);
void sfs__tbl_file_remove(struct table *t, size_t i);
void sfs__tbl_file_free(struct tfile *f);
void sfs__tbl_table_drop_files(struct table *t);
int sfs__tbl_table_commit(struct sfs_target_writer *w, struct table *t, int kind,
			  const struct sfs_mf_entry *e, size_t n);
int sfs__tbl_set_commit(struct sfs_target_writer *w, struct table *t, const size_t *gone,
			size_t ngone, const char *add, uint32_t level, long relabel, int masked,
			uint64_t *add_dv, uint64_t add_dv_set);
void sfs__tbl_entry_of(const struct tfile *f, int op, uint32_t level, struct sfs_mf_entry *e);
void sfs__tbl_table_recover(struct sfs_target_writer *w, struct table *t, const char *what);
int sfs__tbl_dv_set_bit(struct tfile *f, uint64_t pos);
void sfs__tbl_new_name(char *buf, uint32_t sid, const char *ext);
int sfs__tbl_name_set(char *dst, const char *src, const char *where);
int sfs__tbl_lookup_view(struct table *t, const struct tfile *skip, struct tv_file *vf,
			 size_t *map, int levels_only);
void sfs__tbl_files_sorted(struct table *t, struct tfile **out);
void sfs__tbl_prefix_opts(const struct table *t, struct sfs_df_write_opts *wo);
int sfs__tbl_scratch_grow(struct scratch *sc, size_t n);
void sfs__tbl_scratch_free(struct scratch *sc);
void sfs__tbl_view_work(const struct tv_file *vf, int nv, uint64_t *keys, uint64_t *pages);
uint64_t sfs__tbl_count_probe_work(struct sfs_target_writer *w, const struct tv_file *vf, int nv,
				   uint64_t keys0, uint64_t pages0);
uint64_t sfs__tbl_file_bytes(const char *path);

/* table_kindex.c: the key index of value and counter tables */
/* The slot where @h's probe starts, and a prefetch of it: the index is
 * hundreds of megabytes read at random (q18 at 100M: 403 MB), so each
 * loop over many keys (a round's asks and updates, a grow's rehash, a
 * rebuild) starts KIX_AHEAD keys' slots loading before
 * it reaches them; without it each key waited for its own miss. */
#define KIX_AHEAD 16u

static inline size_t sfs__kix_home(const struct kix *x, uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h & x->mask;
}

static inline void sfs__kix_prefetch(const struct kix *x, uint64_t h)
{
	if (x->s)
		__builtin_prefetch(&x->s[sfs__kix_home(x, h)]);
}

int sfs__kix_put(struct kix *x, uint64_t h, uint32_t fid);
long sfs__kix_find(const struct kix *x, uint64_t h, uint32_t fid);
unsigned sfs__kix_cands(const struct kix *x, uint64_t h, uint32_t *fids, unsigned max);
int sfs__tbl_kix_on(const struct sfs_target_writer *w, const struct table *t);
void sfs__tbl_kix_invalidate(struct table *t);
void sfs__tbl_kix_free(struct sfs_target_writer *w, struct table *t);
void sfs__tbl_kix_maybe_empty(struct sfs_target_writer *w, struct table *t);
void sfs__tbl_kix_commit(struct sfs_target_writer *w, struct table *t, const struct kix_upd *u,
			 size_t n);
void sfs__tbl_kix_merged(struct sfs_target_writer *w, struct table *t, unsigned n,
			 const uint32_t *ifid, uint32_t ofid, const struct kix_upd *ex, size_t nex);
int sfs__tbl_kix_rebuild(struct sfs_target_writer *w, struct table *t, int locked);
int sfs__tbl_kf_on(const struct sfs_target_writer *w, const struct table *t);
void sfs__tbl_kf_invalidate(struct table *t);
void sfs__tbl_kf_free(struct sfs_target_writer *w, struct table *t);
void sfs__tbl_kf_maybe_empty(struct sfs_target_writer *w, struct table *t);
void sfs__tbl_kf_add(struct table *t, const uint64_t *h, size_t n);
int sfs__tbl_kf_maybe(const struct table *t, uint64_t h);
void sfs__tbl_kf_prefetch(const struct table *t, uint64_t h);
/* How many keys ahead the filter's loops start loading a key's block: a
 * filter of q9's or q20's size at 100M (100-400 MB) misses the cache on
 * nearly every key, and eight misses in flight hide most of each wait. */
#define SFS_TBL_KF_AHEAD 8
int sfs__tbl_kf_upkeep(struct sfs_target_writer *w, struct table *t);
void sfs__tbl_kf_note_diff(struct sfs_target_writer *w, struct table *t, uint64_t rows,
			   uint64_t probed);

/* table_publish.c: publication and the deferred unlinks */
int sfs__tbl_publish(struct sfs_target_writer *w);
void sfs__tbl_defer_unlink(struct sfs_target_writer *w, const char *path);
int sfs__tbl_is_held(const struct sfs_target_writer *w, const char *path);
int sfs__tbl_held_cmp(const void *a, const void *b);
int sfs__tbl_pend_push(struct pend **arr, size_t *n, size_t *cap, const char *path, uint64_t seq);
int sfs__tbl_reap(struct sfs_target_writer *w);

/* table_ttl.c: state TTL: the rules and clocks */
void sfs__tbl_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		  const struct sfs_ttl_clock *now);
int sfs__tbl_ttl_now(struct sfs_target_writer *w, const struct table *t, uint64_t *now);

/* table_merge.c: the background thread: shaping merges */
void *sfs__tbl_bg_main(void *arg);

/* table_stage.c: checkpoints: snapshot, files */
int sfs__tbl_snapshot(struct sfs_target_writer *w, const char *dir);
int sfs__tbl_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg);

/* table_rollback.c: rollback in place: pin, rollback, reset */
struct sfs_tsnap;
int sfs__tbl_pin(struct sfs_target_writer *w, uint64_t id);
int sfs__tbl_version_keep(struct sfs_target_writer *w, struct version *v);
int sfs__tbl_vtable_capture(struct sfs_target_writer *w, struct table *t, struct vtable *vt);
int sfs__tbl_held_rebuild(struct sfs_target_writer *w);
void sfs__tbl_version_free(struct version *v);
int sfs__tbl_rollback(struct sfs_target_writer *w, uint64_t *seq);
int sfs__tbl_reset(struct sfs_target_writer *w, uint64_t *seq);
int sfs__tbl_rollforward_table(struct sfs_target_writer *w, struct table *t,
			       const struct sfs_tsnap *s);

/* table_l0.c: level 0 as buffer images (off unless SFS_TABLE_L0_IMAGE=1). */
struct sfs_bufimg_meta;
struct sfs_wbuf;
int sfs__tbl_l0_load(struct sfs_target_writer *w);
void sfs__tbl_l0_free(struct sfs_target_writer *w);
int sfs__tbl_l0_wipe(const char *base);
int sfs__tbl_absorb(struct sfs_target_writer *w, const struct sfs_wbuf *b,
		    const struct sfs_bufimg_meta *m);
int sfs__tbl_l0_convert(struct sfs_target_writer *w);
int sfs__tbl_l0_drain(struct sfs_target_writer *w);
int sfs__tbl_l0_drop(struct sfs_target_writer *w);
int sfs__tbl_absorb_op(struct sfs_target_writer *w, const struct sfs_wbuf *b, uint64_t seq,
		       int at_barrier, const struct sfs_ttl_clock *clk);
int sfs__tbl_l0_step(struct sfs_target_writer *w);

#endif
