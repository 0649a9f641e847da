/*
 * bs.h — what the files of `bench_state` share.  The benchmark: the
 * keyed-state paths of issue 3 measured against two baselines in the same
 * command, on the same keys and the same operation sequences (DESIGN.md
 * section 7):
 *
 *   raw      an in-process open-addressing hash table written here: linear
 *            probing over 8-byte slots (tag | entry number), keys and values
 *            copied into one flat arena, values overwritten in place.  The
 *            limit: no shared memory, no layers, no key groups.
 *   rocksdb  librocksdb through its C API (common/rdb.h's error adapter and
 *            merge operator), one call per operation, as
 *            Flink's RocksDB backend uses it: memtable only (a write buffer
 *            bigger than the data, auto compactions off; checked after each
 *            run), WAL off, in a temporary directory removed afterwards.
 *
 * Keys are 16 bytes, a bijective mix of a counter (so the same N keys in
 * every structure); each repetition draws one random sequence of keys that
 * the three structures then run in a rotating order (RocksDB, 10-100x
 * slower, runs the first fifth of it), and a ratio is the median of the
 * per-repetition ratios (pairs measured seconds apart share the machine's
 * mood).  The sfs side runs as a real worker: a job segment
 * of its own, sfs_worker_open() with parallelism 1 (every key group owned),
 * a quiescent point every 64 operations (one input batch), and for the
 * flushed cases the compactor's flush cycle stepped in this process with
 * its own attach and process-table slot (compactor/flush.h), always while
 * the worker is quiescent and never inside a timed loop.
 *
 * Phases, each with its own segment, so the big ones never coexist:
 *   value (N keys, value size V)
 *     A: insert N keys into the active buffer (timed once, each structure
 *        loaded the same way), then get and multiget of 64 (all hits in the
 *        active buffer, N live keys everywhere), then put (overwrite random
 *        keys: RocksDB's memtable keeps the old versions from here on).  The worker has
 *        its default options, value cache included: a put pays the cache
 *        invalidation it always pays.
 *     B: insert N keys, barrier, drain the flusher (untimed): every key is
 *        only in the memory store; then get and multiget through the empty
 *        active buffer to the store.  The value cache is disabled here when
 *        the build has one (SFS_WORKER_NO_CACHE), so the store path is what
 *        is timed.  The baselines run their plain gets again.
 *   map (N entries = N/8 map keys x 8 user keys, the middle value size):
 *        load, iterate one key's 8 entries, put (overwrite), iterate again
 *        (each map's buffer chain now holds every write; rocksdb's memtable
 *        every version).  rocksdb: rows key|user key, iterator seek + prefix.
 *   counter (N keys): blind int64 adds (raw: in place; rocksdb: Merge with
 *        counter state's add operator, the design's counter flush).
 *   seal (10K and the largest N): N counter entries in the active buffer,
 *        sfs_barrier() timed, then the flusher drains (untimed) and the
 *        buffer is refilled: median / p99 over the samples.
 *
 * Memory: the written parts of the sfs arena and the raw arena are touched
 * before the timed loops (a worker reuses its buffers barrier after
 * barrier, so steady state has them resident); RocksDB allocates its
 * memtable arena as it goes, as it always does.  A size whose estimated
 * footprint exceeds MemAvailable is skipped with a message.
 *
 * --quick (10K and 1M keys, 100K operations, 3 repetitions: ~25 s here)
 * times RocksDB's first 100K inserts and loads the rest in key order by
 * write batches: 4-8x faster to load, but its later gets are then ~30 %
 * faster than after an arrival-order load (nodes adjacent in memory), so
 * --quick's ratios to RocksDB read lower than the full run's.  The full
 * run loads every structure one key at a time in arrival order.
 *
 * Every segment has a unique job name and is destroyed on every exit path,
 * SIGINT/SIGTERM included; so is the RocksDB directory.
 *
 * Files, one idea each: keys.c (the keys and each repetition's sequence),
 * raw.c, rocksdb.c and sfs.c (the three structures, each an operation table
 * struct bs_impl), run.c (the one timing runner: a case table's rows,
 * repetitions, medians and ratios), cases.c (the case table and the phases
 * that set up what its rows run on), mem.c (memory: prefaulting and the
 * skip of a size that would not fit), report.c (the table and --json),
 * cli.c (the command line and the cleanup on signals).
 */
#ifndef SFS_BENCH_STATE_BS_H
#define SFS_BENCH_STATE_BS_H

#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "sfs.h"
#include "shm/segment.h"

struct sfs_flusher;
struct sfs_proc_slot;
struct sfs_wbuf;

#define KLEN        16u
#define BATCH       64u            /* records per input batch (quiescent point) */
#define MAX_SIZES   8
#define MAX_REPS    15
#define MAX_RESULTS 256
#define MIB         (1ull << 20)

enum { I_SFS, I_RAW, I_RDB, NIMPL };

/* ---- configuration ------------------------------------------------------------ */

struct bs_cfg {
	int quick, json, no_rocksdb;
	uint64_t keys[MAX_SIZES];
	unsigned nkeys;
	uint32_t vs[MAX_SIZES];
	unsigned nvs;
	unsigned reps;         /* 0: per size */
	uint64_t ops;          /* 0: per size */
	unsigned cases;        /* C_* bits to run */
};

/* --cases (profiling a single path): the loads always run. */
enum {
	C_PUT = 1, C_GET = 2, C_MGET = 4, C_STORE = 8, C_COUNTER = 16, C_SEAL = 32, C_MAP = 64,
	C_ALL = 127
};

/* RocksDB runs 1/RDB_FRACTION of the operations of a repetition (the first
 * ones of the same sequence): it is 10-100x slower, and its time would
 * otherwise be the whole run. */
#define RDB_FRACTION 5
#define RDB_OPS_MIN  (20 * BATCH * 16)
/* --quick: RocksDB's load times its first QUICK_RDB_TIMED inserts in
 * arrival order; the rest go in key order by write batches, untimed. */
#define QUICK_RDB_TIMED 100000

/* ---- results (run.c fills them, report.c prints them) ------------------------------ */

struct result {
	char name[48];
	uint64_t keys;
	uint32_t vsize;
	unsigned reps;
	uint64_t ops;          /* operations per repetition (sfs, raw) */
	uint64_t rdb_ops;      /* RocksDB's share of them */
	double ops_s[NIMPL];   /* medians; 0 = not run */
	double r_raw[3], r_rdb[3]; /* median, lowest, highest per-rep ratio */
	char note[96];
};

struct seal_result {
	uint64_t keys;
	unsigned n;
	double median, p99, max;
	uint64_t stalls;
};

struct bpe {
	char kind[16];
	uint32_t vsize;
	uint64_t keys;
	double sfs, sfs_arena, store, raw, rdb; /* bytes per live entry; 0 = n/a */
};

extern struct result bs_results[MAX_RESULTS];
extern unsigned bs_nresults;
extern struct seal_result bs_seals[MAX_SIZES];
extern unsigned bs_nseals;
extern struct bpe bs_bpes[MAX_RESULTS];
extern unsigned bs_nbpes;
extern char bs_skipped[MAX_SIZES * MAX_SIZES][200];
extern unsigned bs_nskipped;
extern int bs_rdb_spilled;     /* a RocksDB run left the memtable: reported */

void bs_bpe_add(const char *kind, uint32_t vs, uint64_t keys, double sfs, double arena,
		double store, double raw, double rdb);

/* ---- the structures: one operation table each ------------------------------------- */

/* Run operation @op on @n keys of @keys (KLEN bytes each).  Value and
 * counter operations take one key each; map operations take a map key and
 * pick the user key (ukey_pick); the loads take bs_keys in key-number order. */
typedef int (*bs_fn)(void *arg, const unsigned char *keys, uint64_t n);

enum bs_op {
	OP_LOAD,   /* insert: value i for key i */
	OP_PUT,    /* overwrite */
	OP_GET,    /* point reads, all hits */
	OP_MGET,   /* reads in batches of BATCH */
	OP_ADD,    /* counter: blind adds (the first of each key appends it) */
	OP_MLOAD,  /* map: user key j of every map, then j + 1 */
	OP_MPUT,   /* map: overwrite one user key */
	OP_MITER,  /* map: iterate one map key's MAP_FANOUT entries */
	NOPS
};

struct bs_impl {
	const char *name;
	bs_fn op[NOPS];
	/* A load's untimed rest from key @from on (--quick; RocksDB only), by load op. */
	int (*rest[NOPS])(void *arg, uint64_t from);
};

extern const struct bs_impl bs_sfs_impl, bs_raw_impl, bs_rdb_impl;

/* raw.c: an in-process open-addressing table of N keys, values of @vs bytes. */
struct raw {
	uint64_t *slot;         /* 0 empty, else hash tag | (entry number + 1) */
	unsigned char *arena;   /* entries: key (16 B), value (vs padded to 8) */
	uint64_t mask, n, cap;
	uint32_t esz, vs;
	unsigned char *val;
};

/* raw: key -> one block {count, MAP_FANOUT x (user key, value)}. */
struct rawmap {
	struct raw t;
	uint32_t vs, slot;
	unsigned char *val;
};

int bs_raw_open(struct raw *t, uint64_t n, uint32_t vs);
void bs_raw_close(struct raw *t);
int bs_rawmap_open(struct rawmap *m, uint64_t maps, uint32_t vs);
void bs_rawmap_close(struct rawmap *m);

/* rocksdb.c */
struct rdb {
	rocksdb_t *db;
	rocksdb_options_t *o;
	rocksdb_writeoptions_t *wo;
	rocksdb_readoptions_t *ro;
	rocksdb_column_family_handle_t *cf;
	char dir[256];
	uint32_t vs;
	unsigned char *val;
};

/* A fresh DB in a temporary directory whose one memtable holds @mem_bytes;
 * @merge: counters, with counter state's add operator.  A failure is said
 * on stderr.  bs_rdb_close destroys the DB and removes the directory. */
int bs_rdb_open(struct rdb *r, uint64_t mem_bytes, int merge, uint32_t vs);
void bs_rdb_close(struct rdb *r);
/* A numeric property of the DB (0 if it has none). */
uint64_t bs_rdb_prop(struct rdb *r, const char *name);
/* Warn (and mark the report) when a run left the memtable. */
void bs_rdb_check(struct rdb *r, const char *what);

/* sfs.c: a worker on a segment of its own, and an in-process flusher */
struct sfsb {
	char job[SFS_JOB_NAME_MAX + 1];
	struct sfs_seg seg;            /* the creator's mapping */
	int created;
	sfs_ctx_t *c;
	uint32_t st;                   /* the state: value or counter */
	uint32_t vs;
	unsigned char *val;
	uint64_t barrier;
	/* The compactor's flush cycle, stepped here (NULL: none). */
	struct sfs_seg fseg;
	int fattached;
	struct sfs_proc_slot *fslot;
	struct sfs_flusher *f;
};

/* A segment "bench-state-PID-@tag" of @seg_bytes, a worker with options @o
 * and one state of @kind; with @store_bytes, a flusher of that store too.
 * A failure is said on stderr; bs_sfsb_close undoes what was done. */
int bs_sfsb_open(struct sfsb *b, const char *tag, uint64_t seg_bytes,
		 const struct sfs_worker_opts *o, int kind, uint32_t vs, uint64_t store_bytes);
void bs_sfsb_close(struct sfsb *b);
struct sfs_wbuf *bs_sfsb_active(struct sfsb *b);
/* Touch the first @bytes of the active buffer's free arena. */
void bs_sfsb_prefault(struct sfsb *b, uint64_t bytes);
/* Step the flusher until every sealed buffer is flushed and free. */
int bs_sfsb_drain(struct sfsb *b);
/* Bytes of the active buffer per live entry: arena used + its index. */
void bs_sfsb_bytes_per_entry(struct sfsb *b, double *total, double *arena);

/* ---- the case table and its runner (cases.c, run.c) --------------------------------- */

/* A step: the rows that run, in table order, on the structures as one
 * phase has set them up. */
enum bs_step {
	S_VALUE_LOAD, S_VALUE_ACTIVE, S_VALUE_STORE,
	S_MAP_LOAD, S_MAP,
	S_COUNTER_LOAD, S_COUNTER,
};

/* How many operations a row runs per repetition: bs_run.count[]. */
enum bs_count { N_OPS, N_MAP_ITERS, N_MAP_ITERS_CHAINED, NCOUNTS };

/* One row of the report.  A load (seed 0) runs once per structure, on
 * bs_keys in key-number order; any other row runs bs_run.reps repetitions
 * of a random sequence, seeded by keys x @seed + bs_run.salt. */
struct bs_case {
	enum bs_step step;
	const char *name;
	unsigned only;           /* --cases bit that selects it; 0: always */
	enum bs_op op;
	uint64_t seed;
	enum bs_count count;
	/* printf formats; their one argument, where one is used, is
	 * bs_run.chain.  @say: the progress line (NULL: the name). */
	const char *note, *say;
};

/* What a phase sets up for its rows. */
struct bs_run {
	const struct bs_cfg *cfg;
	uint64_t n;                      /* the size: keys (seeds use it) */
	uint64_t keys;                   /* the report's keys column (map: entries) */
	uint32_t vs;
	uint64_t salt;                   /* added to a row's seed */
	unsigned reps;
	uint64_t count[NCOUNTS];
	double chain;                    /* map: writes per map's buffer chain */
	const struct bs_impl *impl[NIMPL];   /* NULL: not run */
	void *arg[NIMPL];
};

extern const struct bs_case bs_cases[];
extern const unsigned bs_ncases;

/* Run the rows of @step (run.c).  0, or the first error (already said). */
int bs_run_step(const struct bs_run *x, enum bs_step step);

int bs_phase_value(const struct bs_cfg *cfg, uint64_t n, uint32_t vs);
int bs_phase_map(const struct bs_cfg *cfg, uint64_t n, uint32_t vs);
int bs_phase_counter(const struct bs_cfg *cfg, uint64_t n, int seal);

/* ---- keys (keys.c) ------------------------------------------------------------------ */

extern unsigned char *bs_keys;  /* N keys, 16 B each */
extern uint64_t bs_nkeys;
extern unsigned char *bs_seq;   /* one repetition's key sequence */
extern volatile uint64_t bs_sink;

int bs_keys_make(uint64_t n);
int bs_seq_make(uint64_t ops, uint64_t seed);
void bs_keys_free(void);

#define MAP_FANOUT 8u   /* user keys per map key */
#define ULEN       8u   /* user key bytes (a big-endian index, as Flink serializes ints) */

static inline void ukey_of(unsigned j, unsigned char *u)
{
	for (int b = 0; b < 8; b++)
		u[b] = (unsigned char)((uint64_t)j >> (56 - 8 * b));
}

/* The user key a random operation on map key @k touches. */
static inline unsigned ukey_pick(const unsigned char *k)
{
	return k[15] % MAP_FANOUT;
}

/* Load order: user key j of every map, then j + 1 (arrival interleaves
 * maps, so a map's entries are not adjacent in any structure). */
static inline const unsigned char *load_map_key(uint64_t i, unsigned *j)
{
	*j = (unsigned)(i / bs_nkeys);
	return bs_keys + (i % bs_nkeys) * KLEN;
}

static inline uint32_t pad8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

static inline uint64_t pow2_slots(uint64_t n)  /* smallest 2^k >= 8 with 3/4 of it >= n */
{
	uint64_t s = 8;

	while (s / 4 * 3 < n)
		s *= 2;
	return s;
}

/* ---- memory, progress, errors ------------------------------------------------------- */

void bs_prefault(void *p, uint64_t len);
int bs_check_memory(uint64_t need, uint64_t n, uint32_t vs, const char *phase);
int bs_fail(const char *what, int rc);
void bs_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *bs_size_name(uint64_t n, char *buf, size_t len);

/* cli.c: what the signal handler removes ("" if none). */
extern char bs_seg_path[256];
extern char bs_rdb_dir[256];

void bs_print_text(const struct bs_cfg *cfg);
void bs_print_json(const struct bs_cfg *cfg);

#endif
