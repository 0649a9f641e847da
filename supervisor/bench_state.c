/*
 * bench_state.c — `sfs bench state`: the keyed-state paths of issue 3
 * measured against two baselines in the same command, on the same keys and
 * the same operation sequences (DESIGN.md section 7):
 *
 *   raw      an in-process open-addressing hash table written here: linear
 *            probing over 8-byte slots (tag | entry number), keys and values
 *            copied into one flat arena, values overwritten in place.  The
 *            limit: no shared memory, no layers, no key groups.
 *   rocksdb  librocksdb through its C API, one call per operation, as
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
 *        a uint64-add merge operator, the design's counter flush).
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
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "common/clock.h"
#include "common/err.h"
#include "compactor/flush.h"
#include "sfs.h"
#include "shm/proc.h"
#include "shm/segment.h"
#include "supervisor/sup.h"
#include "store/memory/memory.h"
#include "common/keygroup.h"
#include "worker/state.h"
#include "worker/wbuf.h"

#define KLEN        16u
#define BATCH       64u            /* records per input batch (quiescent point) */
#define MAX_SIZES   8
#define MAX_REPS    15
#define MAX_RESULTS 256
#define MIB         (1ull << 20)

enum { I_SFS, I_RAW, I_RDB, NIMPL };
static const char *const impl_name[NIMPL] = { "sfs", "raw", "rocksdb" };

/* ---- configuration and results -------------------------------------------- */

struct cfg {
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

static struct result results[MAX_RESULTS];
static unsigned nresults;
static struct seal_result seals[MAX_SIZES];
static unsigned nseals;
static struct bpe bpes[MAX_RESULTS];
static unsigned nbpes;
static char skipped[MAX_SIZES * MAX_SIZES][200];
static unsigned nskipped;
static int rdb_spilled;        /* a RocksDB run left the memtable: reported */

/* ---- cleanup on signals ----------------------------------------------------- */

static char g_seg_path[256];   /* the live bench segment, "" if none */
static char g_rdb_dir[256];    /* the live RocksDB directory, "" if none */

/* Async-signal-safe: unlink the segment, empty and remove the RocksDB
 * directory with raw getdents64, exit. */
static void on_signal(int sig)
{
	if (g_seg_path[0])
		unlink(g_seg_path);
	if (g_rdb_dir[0]) {
		int fd = open(g_rdb_dir, O_RDONLY | O_DIRECTORY);
		char buf[4096];
		long n;

		while (fd >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
			for (long off = 0; off < n;) {
				struct {
					uint64_t ino;
					int64_t off;
					unsigned short reclen;
					unsigned char type;
					char name[];
				} *d = (void *)(buf + off);

				if (d->name[0] != '.')
					unlinkat(fd, d->name, 0);
				off += d->reclen;
			}
		}
		if (fd >= 0)
			close(fd);
		rmdir(g_rdb_dir);
	}
	_exit(128 + sig);
}

/* ---- small helpers ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Key i: two mixed words; the first is a bijection of i, so keys are unique. */
static void key_of(uint64_t i, unsigned char *k)
{
	uint64_t a = mix64(i + 0x9e3779b97f4a7c15ull), b = mix64(i ^ 0x5851f42d4c957f2dull);

	memcpy(k, &a, 8);
	memcpy(k + 8, &b, 8);
}

static unsigned char *g_keys;  /* N keys, 16 B each */
static uint64_t g_nkeys;
static unsigned char *g_ops;   /* one repetition's key sequence */
static uint64_t g_ops_cap;
static volatile uint64_t g_sink;

static int keys_make(uint64_t n)
{
	free(g_keys);
	g_keys = malloc(n * KLEN);
	if (!g_keys)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		key_of(i, g_keys + i * KLEN);
	g_nkeys = n;
	return 0;
}

/* The key sequence of repetition @seed: @ops keys drawn uniformly. */
static int ops_make(uint64_t ops, uint64_t seed)
{
	uint64_t x = mix64(seed) | 1;

	if (ops > g_ops_cap) {
		free(g_ops);
		g_ops = malloc(ops * KLEN);
		if (!g_ops)
			return -ENOMEM;
		g_ops_cap = ops;
	}
	for (uint64_t i = 0; i < ops; i++) {
		uint64_t idx;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		idx = (uint64_t)(((__uint128_t)x * g_nkeys) >> 64);
		memcpy(g_ops + i * KLEN, g_keys + idx * KLEN, KLEN);
	}
	return 0;
}

static uint32_t pad8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

static uint64_t pow2_slots(uint64_t n)  /* smallest 2^k >= 8 with 3/4 of it >= n */
{
	uint64_t s = 8;

	while (s / 4 * 3 < n)
		s *= 2;
	return s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
	double s[1024];

	if (!n)
		return 0;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024ull;
}

/* Touch [p, p + len) writably without changing its bytes' meaning: the
 * region is unused arena (nothing reads past its top).  MADV_POPULATE_WRITE
 * where the kernel has it, else one store per page. */
static void prefault(void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p & ~4095ul, e = ((uintptr_t)p + len + 4095) & ~4095ul;

#ifdef MADV_POPULATE_WRITE
	if (madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
		return;
#endif
	for (uintptr_t q = (uintptr_t)p; q < (uintptr_t)p + len; q += 4096)
		*(volatile char *)q = 0;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "sfs bench state: %s: %s (%s)\n", what,
		sfs_last_error()[0] ? sfs_last_error() : "", sfs_strerror(rc));
	return rc ? rc : -EIO;
}

static void progress(const struct cfg *cfg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void progress(const struct cfg *cfg, const char *fmt, ...)
{
	va_list ap;

	static uint64_t t0;
	uint64_t now = sfs_now_ns();

	(void)cfg;
	if (!t0)
		t0 = now;
	va_start(ap, fmt);
	fprintf(stderr, "  %6.1f s  ", (now - t0) / 1e9);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static const char *size_name(uint64_t n, char *buf, size_t len)
{
	if (n >= 1000000 && n % 1000000 == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(n / 1000000));
	else if (n >= 1000 && n % 1000 == 0)
		snprintf(buf, len, "%lluK", (unsigned long long)(n / 1000));
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

/* ---- (a) raw: an in-process open-addressing table --------------------------------- */

#define RAW_TAG 0xffff000000000000ull

struct raw {
	uint64_t *slot;         /* 0 empty, else hash tag | (entry number + 1) */
	unsigned char *arena;   /* entries: key (16 B), value (vs padded to 8) */
	uint64_t mask, n, cap;
	uint32_t esz, vs;
	unsigned char *val;
};

static inline uint64_t raw_hash(const unsigned char *k)
{
	uint64_t a, b;
	__uint128_t r;

	memcpy(&a, k, 8);
	memcpy(&b, k + 8, 8);
	r = (__uint128_t)(a ^ 0xa0761d6478bd642full) * (b ^ 0xe7037ed1a0b428dbull);
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline int key_eq(const unsigned char *x, const unsigned char *y)
{
	uint64_t a0, a1, b0, b1;

	memcpy(&a0, x, 8);
	memcpy(&a1, x + 8, 8);
	memcpy(&b0, y, 8);
	memcpy(&b1, y + 8, 8);
	return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

static inline unsigned char *raw_find(const struct raw *t, const unsigned char *k, uint64_t h,
				      uint64_t *pos)
{
	uint64_t i = h & t->mask;

	for (;; i = (i + 1) & t->mask) {
		uint64_t w = t->slot[i];

		if (!w) {
			*pos = i;
			return NULL;
		}
		if ((w & RAW_TAG) == (h & RAW_TAG)) {
			unsigned char *e = t->arena + ((w & ~RAW_TAG) - 1) * t->esz;

			if (key_eq(e, k))
				return e;
		}
	}
}

static int raw_open(struct raw *t, uint64_t n, uint32_t vs)
{
	uint64_t slots = pow2_slots(n);

	memset(t, 0, sizeof(*t));
	t->esz = KLEN + pad8(vs);
	t->vs = vs;
	t->mask = slots - 1;
	t->cap = n;
	t->slot = calloc(slots, 8);
	t->arena = malloc(n * t->esz);
	t->val = calloc(1, vs);
	if (!t->slot || !t->arena || !t->val)
		return -ENOMEM;
	/* Resident before timing, as sfs's buffer is.  Not memset: gcc turns
	 * malloc + memset(0) into calloc, whose fresh pages stay untouched. */
	prefault(t->slot, slots * 8);
	prefault(t->arena, n * t->esz);
	return 0;
}

static void raw_close(struct raw *t)
{
	free(t->slot);
	free(t->arena);
	free(t->val);
	memset(t, 0, sizeof(*t));
}

static inline int raw_put1(struct raw *t, const unsigned char *k, const void *v)
{
	uint64_t h = raw_hash(k), pos;
	unsigned char *e = raw_find(t, k, h, &pos);

	if (!e) {
		if (t->n == t->cap)
			return SFS_EFULL;
		e = t->arena + t->n * t->esz;
		memcpy(e, k, KLEN);
		t->slot[pos] = (h & RAW_TAG) | ++t->n;
	}
	memcpy(e + KLEN, v, t->vs);
	return 0;
}

static int raw_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;

	for (uint64_t i = 0; i < n; i++) {
		memcpy(t->val, &i, 8);
		if (raw_put1(t, keys + i * KLEN, t->val))
			return sfs__err(SFS_EFULL, "raw table full");
	}
	return 0;
}

static int raw_put(void *arg, const unsigned char *keys, uint64_t n)
{
	return raw_load(arg, keys, n);
}

static int raw_get(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;
	uint64_t acc = 0, pos;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		const unsigned char *e = raw_find(t, k, raw_hash(k), &pos);

		if (!e)
			return sfs__err(SFS_ECORRUPT, "raw get: key %llu missing",
					(unsigned long long)i);
		acc += e[KLEN];
	}
	g_sink += acc;
	return 0;
}

/* A batch: hash and prefetch every home slot first, then probe. */
static int raw_mget(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;
	uint64_t acc = 0, pos, h[BATCH];

	for (uint64_t b = 0; b < n; b += BATCH) {
		const unsigned char *kb = keys + b * KLEN;

		for (unsigned i = 0; i < BATCH; i++) {
			h[i] = raw_hash(kb + i * KLEN);
			__builtin_prefetch(&t->slot[h[i] & t->mask]);
		}
		for (unsigned i = 0; i < BATCH; i++) {
			const unsigned char *e = raw_find(t, kb + i * KLEN, h[i], &pos);

			if (!e)
				return sfs__err(SFS_ECORRUPT, "raw multiget: key missing");
			acc += e[KLEN];
		}
	}
	g_sink += acc;
	return 0;
}

static int raw_add(void *arg, const unsigned char *keys, uint64_t n)
{
	struct raw *t = arg;
	uint64_t pos;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		uint64_t h = raw_hash(k), v;
		unsigned char *e = raw_find(t, k, h, &pos);

		if (!e) {
			if (t->n == t->cap)
				return sfs__err(SFS_EFULL, "raw counter table full");
			e = t->arena + t->n * t->esz;
			memcpy(e, k, KLEN);
			memset(e + KLEN, 0, 8);
			t->slot[pos] = (h & RAW_TAG) | ++t->n;
		}
		memcpy(&v, e + KLEN, 8);
		v += i % 7 + 1;
		memcpy(e + KLEN, &v, 8);
	}
	return 0;
}

/* ---- (b) RocksDB, one call per operation ----------------------------------------- */

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

/* The one adapter of RocksDB's errptr (it never clears it: reset before
 * every call). */
static int rdb_err(char **err, const char *what)
{
	int rc;

	if (!*err)
		return 0;
	rc = sfs__err(-EIO, "rocksdb %s: %s", what, *err);
	rocksdb_free(*err);
	*err = NULL;
	return rc;
}

static char *u64add_full(void *st, const char *key, size_t klen, const char *existing,
			 size_t elen, const char *const *ops, const size_t *oplen, int nops,
			 unsigned char *success, size_t *newlen)
{
	uint64_t acc = 0, d;
	char *r = malloc(8);

	if (existing && elen == 8)
		memcpy(&acc, existing, 8);
	for (int i = 0; i < nops; i++)
		if (oplen[i] == 8) {
			memcpy(&d, ops[i], 8);
			acc += d;
		}
	if (r)
		memcpy(r, &acc, 8);
	*success = r != NULL;
	*newlen = 8;
	return r;
}

static char *u64add_partial(void *st, const char *key, size_t klen, const char *const *ops,
			    const size_t *oplen, int nops, unsigned char *success, size_t *newlen)
{
	return u64add_full(st, key, klen, NULL, 0, ops, oplen, nops, success, newlen);
}

static void u64add_delete(void *st, const char *v, size_t len)
{
	free((void *)v);
}

static void u64add_destroy(void *st)
{
}

static const char *u64add_name(void *st)
{
	return "sfs.bench.u64add";
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Open a fresh DB whose single memtable holds @mem_bytes; @merge: with the
 * uint64-add merge operator. */
static int rdb_open(struct rdb *r, uint64_t mem_bytes, int merge, uint32_t vs)
{
	const char *tmp = getenv("TMPDIR");
	const char *names[1] = { "default" };
	const rocksdb_options_t *cfo[1];
	rocksdb_column_family_handle_t *h[1];
	char *err = NULL;

	memset(r, 0, sizeof(*r));
	r->vs = vs;
	r->val = calloc(1, vs ? vs : 8);
	if (!r->val)
		return -ENOMEM;
	snprintf(r->dir, sizeof(r->dir), "%s/sfs-bench-rocksdb-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(r->dir))
		return sfs__err(sfs__errno(), "mkdtemp %s: %s", r->dir, strerror(errno));
	snprintf(g_rdb_dir, sizeof(g_rdb_dir), "%s", r->dir);
	r->o = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(r->o, 1);
	rocksdb_options_set_write_buffer_size(r->o, mem_bytes);
	rocksdb_options_set_max_write_buffer_number(r->o, 2);
	rocksdb_options_set_arena_block_size(r->o, MIB);
	rocksdb_options_set_disable_auto_compactions(r->o, 1);
	rocksdb_options_set_info_log_level(r->o, 3 /* ERROR */);
	if (merge)
		rocksdb_options_set_merge_operator(
			r->o, rocksdb_mergeoperator_create(NULL, u64add_destroy, u64add_full,
							   u64add_partial, u64add_delete,
							   u64add_name));
	cfo[0] = r->o;
	r->db = rocksdb_open_column_families(r->o, r->dir, 1, names, cfo, h, &err);
	if (err || !r->db) {
		int rc = rdb_err(&err, "open");

		return rc ? rc : sfs__err(-EIO, "rocksdb open %s: no handle", r->dir);
	}
	r->cf = h[0];
	r->wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(r->wo, 1);
	r->ro = rocksdb_readoptions_create();
	return 0;
}

static uint64_t rdb_prop(struct rdb *r, const char *name)
{
	char *v = rocksdb_property_value(r->db, name);
	uint64_t n = v ? strtoull(v, NULL, 10) : 0;

	rocksdb_free(v);
	return n;
}

/* Was every write still in the active memtable?  (The baseline's premise.) */
static void rdb_check(struct rdb *r, const char *what)
{
	uint64_t imm = rdb_prop(r, "rocksdb.num-immutable-mem-table");
	uint64_t l0 = rdb_prop(r, "rocksdb.num-files-at-level0");

	if (imm || l0) {
		fprintf(stderr,
			"sfs bench state: warning: rocksdb %s left the memtable (%llu immutable "
			"memtables, %llu L0 files): its figures include flushes\n",
			what, (unsigned long long)imm, (unsigned long long)l0);
		rdb_spilled = 1;
	}
}

static void rdb_close(struct rdb *r)
{
	char *err = NULL;

	if (r->cf)
		rocksdb_column_family_handle_destroy(r->cf);
	if (r->db)
		rocksdb_close(r->db);
	if (r->o && r->dir[0]) {
		rocksdb_destroy_db(r->o, r->dir, &err);
		rdb_err(&err, "destroy");
	}
	if (r->wo)
		rocksdb_writeoptions_destroy(r->wo);
	if (r->ro)
		rocksdb_readoptions_destroy(r->ro);
	if (r->o)
		rocksdb_options_destroy(r->o);
	if (r->dir[0])
		rm_dir(r->dir);
	g_rdb_dir[0] = '\0';
	free(r->val);
	memset(r, 0, sizeof(*r));
}

static int rdb_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	char *err = NULL;

	for (uint64_t i = 0; i < n; i++) {
		memcpy(r->val, &i, 8);
		err = NULL;
		rocksdb_put(r->db, r->wo, (const char *)keys + i * KLEN, KLEN, (const char *)r->val,
			    r->vs, &err);
		if (err)
			return rdb_err(&err, "put");
	}
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, KLEN);
}

/* Keys @from.. of g_keys in key order, by write batches of 1000 (Put, or
 * Merge of 1 for counters): the untimed rest of a --quick load. */
static int rdb_bulk(struct rdb *r, uint64_t from, int merge)
{
	uint64_t n = g_nkeys - from, one = 1;
	unsigned char *k = malloc(n * KLEN);
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	char *err = NULL;
	int rc = 0;

	if (!k) {
		rocksdb_writebatch_destroy(wb);
		return -ENOMEM;
	}
	memcpy(k, g_keys + from * KLEN, n * KLEN);
	qsort(k, n, KLEN, cmp_key);
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		if (merge)
			rocksdb_writebatch_merge(wb, (const char *)k + i * KLEN, KLEN,
						 (const char *)&one, 8);
		else
			rocksdb_writebatch_put(wb, (const char *)k + i * KLEN, KLEN,
					       (const char *)r->val, r->vs);
		if (i % 1000 == 999 || i == n - 1) {
			err = NULL;
			rocksdb_write(r->db, r->wo, wb, &err);
			rc = rdb_err(&err, "write batch");
			rocksdb_writebatch_clear(wb);
		}
	}
	rocksdb_writebatch_destroy(wb);
	free(k);
	return rc;
}

static int rdb_bulk_put(void *arg, uint64_t from)
{
	return rdb_bulk(arg, from, 0);
}

static int rdb_bulk_merge(void *arg, uint64_t from)
{
	return rdb_bulk(arg, from, 1);
}

static int rdb_put(void *arg, const unsigned char *keys, uint64_t n)
{
	return rdb_load(arg, keys, n);
}

static int rdb_get(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		char *err = NULL;
		rocksdb_pinnableslice_t *s =
			rocksdb_get_pinned(r->db, r->ro, (const char *)keys + i * KLEN, KLEN, &err);
		const char *v;
		size_t len;

		if (err)
			return rdb_err(&err, "get");
		if (!s)
			return sfs__err(SFS_ECORRUPT, "rocksdb get: key %llu missing",
					(unsigned long long)i);
		v = rocksdb_pinnableslice_value(s, &len);
		acc += (unsigned char)v[0];
		rocksdb_pinnableslice_destroy(s);
	}
	g_sink += acc;
	return 0;
}

/* RocksDB's batched MultiGet (pinned values, one call per 64 keys). */
static int rdb_mget(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	const char *kp[BATCH];
	size_t kl[BATCH];
	rocksdb_pinnableslice_t *vals[BATCH];
	char *errs[BATCH];
	uint64_t acc = 0;
	int rc = 0;

	for (unsigned i = 0; i < BATCH; i++)
		kl[i] = KLEN;
	for (uint64_t b = 0; b < n; b += BATCH) {
		for (unsigned i = 0; i < BATCH; i++) {
			kp[i] = (const char *)keys + (b + i) * KLEN;
			errs[i] = NULL;
		}
		rocksdb_batched_multi_get_cf(r->db, r->ro, r->cf, BATCH, kp, kl, vals, errs, 0);
		for (unsigned i = 0; i < BATCH; i++) {
			if (errs[i] && !rc)
				rc = rdb_err(&errs[i], "multiget");
			else if (errs[i])
				rocksdb_free(errs[i]);
			if (!vals[i]) {
				if (!rc)
					rc = sfs__err(SFS_ECORRUPT, "rocksdb multiget: key missing");
				continue;
			}
			size_t len;
			const char *v = rocksdb_pinnableslice_value(vals[i], &len);

			acc += (unsigned char)v[0];
			rocksdb_pinnableslice_destroy(vals[i]);
		}
		if (rc)
			return rc;
	}
	g_sink += acc;
	return 0;
}

static int rdb_add(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t d = i % 7 + 1;
		char *err = NULL;

		rocksdb_merge(r->db, r->wo, (const char *)keys + i * KLEN, KLEN, (const char *)&d, 8,
			      &err);
		if (err)
			return rdb_err(&err, "merge");
	}
	return 0;
}

/* ---- sfs: a worker on a segment of its own, and an in-process flusher --------------- */

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

static int sfsb_open(struct sfsb *b, const char *tag, uint64_t seg_bytes,
		     const struct sfs_worker_opts *o, int kind, uint32_t vs, uint64_t store_bytes)
{
	int rc;

	memset(b, 0, sizeof(*b));
	b->vs = vs;
	b->val = calloc(1, vs ? vs : 8);
	if (!b->val)
		return -ENOMEM;
	snprintf(b->job, sizeof(b->job), "bench-state-%d-%s", (int)getpid(), tag);
	rc = sfs_seg_create(b->job, 0, seg_bytes, 1, &b->seg);
	if (rc)
		return fail("create the bench segment", rc);
	b->created = 1;
	snprintf(g_seg_path, sizeof(g_seg_path), "%s", b->seg.path);
	rc = sfs_worker_open(b->job, 0, 0, o, &b->c);
	if (rc)
		return fail("sfs_worker_open", rc);
	rc = sfs_state_register(b->c, kind == SFS_STATE_VALUE ? "v" : "cnt", kind, &b->st);
	if (rc)
		return fail("sfs_state_register", rc);
	if (!store_bytes)
		return 0;
	b->f = calloc(1, sizeof(*b->f));
	if (!b->f)
		return -ENOMEM;
	rc = sfs_seg_attach(b->job, 0, &b->fseg);
	if (rc)
		return fail("attach the flusher", rc);
	b->fattached = 1;
	rc = sfs_proc_register(&b->fseg, SFS_ROLE_COMPACTOR, 0, &b->fslot);
	if (rc)
		return fail("register the flusher", rc);
	rc = sfs_flusher_init(b->f, &b->fseg, b->fslot, store_bytes);
	if (rc)
		return fail("sfs_flusher_init", rc);
	return 0;
}

static void sfsb_close(struct sfsb *b)
{
	if (b->f && b->fslot)
		sfs_flusher_fini(b->f);
	if (b->fslot)
		sfs_proc_unregister(b->fslot);
	if (b->fattached)
		sfs_seg_detach(&b->fseg);
	free(b->f);
	if (b->c)
		sfs_worker_close(b->c);
	if (b->created) {
		sfs_seg_detach(&b->seg);
		sfs_seg_destroy(b->job, 0);
		g_seg_path[0] = '\0';
	}
	free(b->val);
	memset(b, 0, sizeof(*b));
}

static struct sfs_wbuf *sfsb_active(struct sfsb *b)
{
	return b->c->buf[b->c->ctl->wc_active];
}

/* Touch the first @bytes of the active buffer's free arena. */
static void sfsb_prefault(struct sfsb *b, uint64_t bytes)
{
	struct sfs_wbuf *w = sfsb_active(b);
	uint64_t top = w->wb_top, end = top + bytes;

	if (end > w->wb_size)
		end = w->wb_size;
	prefault((char *)w + top, end - top);
}

/* Step the flusher until every sealed buffer is flushed and free.  The
 * worker is quiescent before every step, as a worker between batches is. */
static int sfsb_drain(struct sfsb *b)
{
	uint64_t deadline = sfs_now_ns() + 900ull * 1000000000ull;
	unsigned failing = 0;

	for (;;) {
		int pending = 0, rc;

		sfs_ctx_quiescent(b->c);
		rc = sfs_flusher_step(b->f, 1u << 16, &pending);
		if (rc < 0)
			return fail("flusher step", rc);
		if (rc == 0 && !pending)
			return 0;
		failing = b->f->w[0].failing ? failing + 1 : 0;
		if (failing > 1000)
			return fail("the flush keeps failing", SFS_EFULL);
		if (sfs_now_ns() > deadline)
			return fail("the flusher did not go idle in 900 s", SFS_ETIMEDOUT);
	}
}

static int sfs_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		int rc;

		memcpy(b->val, &i, 8);
		rc = sfs_value_put(b->c, b->st, 0, keys + i * KLEN, KLEN, b->val, b->vs);
		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

static int sfs_put(void *arg, const unsigned char *keys, uint64_t n)
{
	return sfs_load(arg, keys, n);
}

static int sfs_get(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		struct sfs_view v;
		int rc = sfs_value_get(b->c, b->st, 0, keys + i * KLEN, KLEN, &v);

		if (rc != 1)
			return rc < 0 ? rc : sfs__err(SFS_ECORRUPT, "sfs get: key %llu missing",
						      (unsigned long long)i);
		acc += *(const unsigned char *)v.data;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	g_sink += acc;
	return 0;
}

static int sfs_mget(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;
	struct sfs_key k[BATCH];
	struct sfs_view v[BATCH];
	int res[BATCH];
	uint64_t acc = 0;

	for (unsigned i = 0; i < BATCH; i++) {
		k[i].ns = 0;
		k[i].klen = KLEN;
	}
	for (uint64_t at = 0; at < n; at += BATCH) {
		int rc;

		for (unsigned i = 0; i < BATCH; i++)
			k[i].key = keys + (at + i) * KLEN;
		rc = sfs_multiget(b->c, b->st, k, BATCH, v, res);
		if (rc)
			return rc;
		for (unsigned i = 0; i < BATCH; i++) {
			if (res[i] != 1)
				return sfs__err(SFS_ECORRUPT, "sfs multiget: key missing");
			acc += *(const unsigned char *)v[i].data;
		}
		sfs_ctx_quiescent(b->c);
	}
	g_sink += acc;
	return 0;
}

static int sfs_add(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		int rc = sfs_counter_add(b->c, b->st, 0, keys + i * KLEN, KLEN, (int64_t)(i % 7 + 1));

		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

/* ---- measuring --------------------------------------------------------------------- */

typedef int (*run_fn)(void *arg, const unsigned char *keys, uint64_t n);

struct runner {
	run_fn fn[NIMPL];
	void *arg[NIMPL];
};

static struct result *result_new(const char *name, uint64_t keys, uint32_t vs)
{
	struct result *r;

	if (nresults == MAX_RESULTS)
		return NULL;
	r = &results[nresults++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->keys = keys;
	r->vsize = vs;
	return r;
}

static void ratios(struct result *r, const double v[NIMPL][MAX_REPS], unsigned reps)
{
	double rr[MAX_REPS], rd[MAX_REPS];

	for (unsigned i = 0; i < reps; i++) {
		rr[i] = v[I_RAW][i] > 0 ? v[I_SFS][i] / v[I_RAW][i] : 0;
		rd[i] = v[I_RDB][i] > 0 ? v[I_SFS][i] / v[I_RDB][i] : 0;
	}
	for (int k = 0; k < NIMPL; k++)
		r->ops_s[k] = median(v[k], reps);
	r->r_raw[0] = median(rr, reps);
	r->r_rdb[0] = median(rd, reps);
	r->r_raw[1] = r->r_raw[2] = rr[0];
	r->r_rdb[1] = r->r_rdb[2] = rd[0];
	for (unsigned i = 1; i < reps; i++) {
		r->r_raw[1] = fmin(r->r_raw[1], rr[i]);
		r->r_raw[2] = fmax(r->r_raw[2], rr[i]);
		r->r_rdb[1] = fmin(r->r_rdb[1], rd[i]);
		r->r_rdb[2] = fmax(r->r_rdb[2], rd[i]);
	}
}

static uint64_t rdb_ops_for(uint64_t ops)
{
	uint64_t n = ops / RDB_FRACTION / BATCH * BATCH;

	return n < RDB_OPS_MIN ? (ops < RDB_OPS_MIN ? ops : RDB_OPS_MIN) : n;
}

/* @reps repetitions of @ops random keys; the structures take turns in a
 * rotating order within each repetition. */
static int measure(const char *name, uint64_t keys, uint32_t vs, const struct runner *ru,
		   unsigned reps, uint64_t ops, uint64_t seed, const char *note)
{
	double v[NIMPL][MAX_REPS] = { { 0 } };
	struct result *r = result_new(name, keys, vs);

	if (!r)
		return SFS_EFULL;
	r->reps = reps;
	r->ops = ops;
	r->rdb_ops = rdb_ops_for(ops);
	snprintf(r->note, sizeof(r->note), "%s", note ? note : "");
	for (unsigned rep = 0; rep < reps; rep++) {
		int rc = ops_make(ops, seed * 1000 + rep);

		if (rc)
			return rc;
		for (int j = 0; j < NIMPL; j++) {
			int i = (int)((rep + (unsigned)j) % NIMPL);
			uint64_t t0, n = i == I_RDB ? r->rdb_ops : ops;

			if (!ru->fn[i])
				continue;
			t0 = sfs_now_ns();
			rc = ru->fn[i](ru->arg[i], g_ops, n);
			if (rc) {
				char what[96];

				snprintf(what, sizeof(what), "%s (%s)", name, impl_name[i]);
				return fail(what, rc);
			}
			v[i][rep] = (double)n * 1e9 / (double)(sfs_now_ns() - t0);
		}
	}
	ratios(r, v, reps);
	return 0;
}

/* The load of all N keys (in key-number order: hashed, so random key
 * order), timed once per structure.  RocksDB times its first @rdb_timed
 * inserts; @rdb_rest loads the others untimed. */
static int measure_load(const char *name, uint64_t keys, uint32_t vs, const struct runner *ru,
			uint64_t rdb_timed, int (*rdb_rest)(void *arg, uint64_t from))
{
	double v[NIMPL][MAX_REPS] = { { 0 } };
	struct result *r = result_new(name, keys, vs);

	if (!r)
		return SFS_EFULL;
	r->reps = 1;
	r->ops = keys;
	r->rdb_ops = rdb_timed;
	snprintf(r->note, sizeof(r->note), "one timed load per structure%s",
		 rdb_timed < keys ? "; rocksdb: its first inserts only" : "");
	for (int i = 0; i < NIMPL; i++) {
		uint64_t t0, n = i == I_RDB ? rdb_timed : keys;
		int rc;

		if (!ru->fn[i])
			continue;
		t0 = sfs_now_ns();
		rc = ru->fn[i](ru->arg[i], g_keys, n);
		if (rc == 0 && i == I_RDB && n < keys) {
			v[i][0] = (double)n * 1e9 / (double)(sfs_now_ns() - t0);
			rc = rdb_rest(ru->arg[i], n);
		} else if (rc == 0) {
			v[i][0] = (double)n * 1e9 / (double)(sfs_now_ns() - t0);
		}
		if (rc) {
			char what[96];

			snprintf(what, sizeof(what), "%s (%s)", name, impl_name[i]);
			return fail(what, rc);
		}
	}
	ratios(r, v, 1);
	return 0;
}

static uint64_t rdb_load_timed(const struct cfg *cfg, uint64_t n)
{
	return cfg->quick && n > QUICK_RDB_TIMED ? QUICK_RDB_TIMED : n;
}

static unsigned reps_for(const struct cfg *cfg, uint64_t n)
{
	if (cfg->reps)
		return cfg->reps;
	return cfg->quick || n >= 5000000 ? 3 : 5;
}

static uint64_t ops_for(const struct cfg *cfg, uint64_t n)
{
	uint64_t ops = cfg->ops ? cfg->ops : cfg->quick ? 100000 : n <= 100000 ? 500000 : 1000000;

	return (ops + BATCH - 1) / BATCH * BATCH;
}

/* sfs write-buffer entry bytes for a 16-byte user key (+4 prefix). */
static uint64_t sfs_esize(uint32_t vs)
{
	return sfs_wbuf_entry_size(KLEN + 4, vs);
}

/* The memory store of @n keys of @vs bytes, @rewrites extra versions of
 * each: one half holds them with its index growth, the region two halves. */
static uint64_t store_bytes_for(uint64_t n, uint32_t vs, unsigned versions)
{
	uint64_t slots = 1024, half;

	while (slots < 2 * (n + 1))
		slots *= 2;
	half = n * (56 + pad8(vs)) * versions + 3 * 8 * slots + 16 * MIB;
	return 2 * half + 4096 + MIB;
}

static uint64_t rdb_bytes_for(uint64_t entries, uint32_t vs)
{
	/* key + value + ~8 B sequence/type + varint lengths + skiplist node */
	return entries * (KLEN + vs + 48) * 3 / 2 + 64 * MIB;
}

static int check_memory(uint64_t need, uint64_t n, uint32_t vs, const char *phase)
{
	uint64_t avail = mem_available();
	char nb[24];

	if (need < avail / 10 * 9)
		return 0;
	if (nskipped < sizeof(skipped) / sizeof(skipped[0]))
		snprintf(skipped[nskipped++], sizeof(skipped[0]),
			 "%s keys, %s%u B: skipped, needs about %.1f GiB and MemAvailable is %.1f GiB",
			 size_name(n, nb, sizeof(nb)), phase, vs, need / 1073741824.0,
			 avail / 1073741824.0);
	fprintf(stderr, "sfs bench state: %s\n", skipped[nskipped - 1]);
	return 1;
}

static void bpe_add(const char *kind, uint32_t vs, uint64_t keys, double sfs, double arena,
		    double store, double raw, double rdb)
{
	struct bpe *e;

	if (nbpes == MAX_RESULTS)
		return;
	e = &bpes[nbpes++];
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	e->vsize = vs;
	e->keys = keys;
	e->sfs = sfs;
	e->sfs_arena = arena;
	e->store = store;
	e->raw = raw;
	e->rdb = rdb;
}

/* Bytes of the active buffer per live entry: arena used + its index. */
static void sfs_bytes_per_entry(struct sfsb *b, double *total, double *arena)
{
	struct sfs_wbuf_stats ws;

	sfs_wbuf_stats(sfsb_active(b), &ws);
	*arena = ws.entries ? (double)ws.bytes_used / (double)ws.entries : 0;
	*total = ws.entries ? (double)(ws.bytes_used + ws.slots * 8 + SFS_WBUF_INDEX_OFF) /
				      (double)ws.entries
			    : 0;
}

static uint64_t worker_seg_bytes(const struct sfs_worker_opts *o, uint64_t store)
{
	return 2 * sfs_wbuf_size(o->buffer_keys, o->buffer_bytes) + store + 64 * MIB;
}

/* ---- phases ------------------------------------------------------------------------ */

static int phase_value(const struct cfg *cfg, uint64_t n, uint32_t vs)
{
	unsigned reps = reps_for(cfg, n);
	uint64_t ops = ops_for(cfg, n), es = sfs_esize(vs);
	uint64_t arena_a = (n + reps * ops) * es + MIB, arena_b = n * es + MIB;
	uint64_t store = store_bytes_for(n, vs, 1);
	uint64_t rdb_mem = rdb_bytes_for(n + reps * ops, vs);
	uint64_t raw_mem = pow2_slots(n) * 8 + n * (KLEN + pad8(vs));
	uint64_t idx = pow2_slots(n) * 8;
	uint64_t a_mem = 2 * idx + arena_a + 16 * MIB;
	uint64_t b_mem = 2 * idx + arena_b + store / 2 + n * 24;
	uint64_t need = raw_mem + (cfg->no_rocksdb ? 0 : rdb_mem) + (a_mem > b_mem ? a_mem : b_mem) +
			n * KLEN + ops * KLEN;
	struct raw raw;
	struct rdb rdb;
	struct sfsb sa, sb;
	struct runner ru;
	struct sfs_worker_opts o;
	struct sfs_worker_stats ws;
	double bpe_total, bpe_arena, rdb_bpe = 0;
	char nb[24];
	uint64_t t0;
	int rc;

	memset(&raw, 0, sizeof(raw));
	memset(&rdb, 0, sizeof(rdb));
	memset(&sa, 0, sizeof(sa));
	memset(&sb, 0, sizeof(sb));
	if (check_memory(need, n, vs, "value "))
		return 0;
	fprintf(stderr, "[value state: %s keys, %u-byte values, %u reps x %llu ops]\n",
		size_name(n, nb, sizeof(nb)), vs, reps, (unsigned long long)ops);
	rc = keys_make(n);
	if (rc)
		goto out;
	rc = raw_open(&raw, n, vs);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb) {
		rc = rdb_open(&rdb, rdb_mem, 0, vs);
		if (rc) {
			fail("open rocksdb", rc);
			goto out;
		}
	}

	/* A: everything in the active buffer. */
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = n, .buffer_bytes = arena_a };
	rc = sfsb_open(&sa, "a", worker_seg_bytes(&o, 0), &o, SFS_STATE_VALUE, vs, 0);
	if (rc)
		goto out;
	sfsb_prefault(&sa, arena_a);
	ru = (struct runner){ { sfs_load, raw_load, cfg->no_rocksdb ? NULL : rdb_load },
			      { &sa, &raw, &rdb } };
	progress(cfg, "loading %s keys into each structure", nb);
	rc = measure_load("value insert", n, vs, &ru, rdb_load_timed(cfg, n), rdb_bulk_put);
	if (rc)
		goto out;
	sfs_bytes_per_entry(&sa, &bpe_total, &bpe_arena);
	if (!cfg->no_rocksdb)
		rdb_bpe = (double)rdb_prop(&rdb, "rocksdb.cur-size-all-mem-tables") / (double)n;
	bpe_add("value", vs, n, bpe_total, bpe_arena, 0,
		(double)(pow2_slots(n) * 8 + n * (KLEN + pad8(vs))) / (double)n, rdb_bpe);

	if (!(cfg->cases & C_GET))
		goto mget;
	ru = (struct runner){ { sfs_get, raw_get, cfg->no_rocksdb ? NULL : rdb_get },
			      { &sa, &raw, &rdb } };
	progress(cfg, "value get (active buffer)");
	rc = measure("value get (active buffer)", n, vs, &ru, reps, ops, n * 37 + vs, NULL);
	if (rc)
		goto out;
mget:
	if (!(cfg->cases & C_MGET))
		goto put;
	ru = (struct runner){ { sfs_mget, raw_mget, cfg->no_rocksdb ? NULL : rdb_mget },
			      { &sa, &raw, &rdb } };
	progress(cfg, "multiget 64 (active buffer)");
	rc = measure("multiget 64 (active buffer)", n, vs, &ru, reps, ops, n * 41 + vs,
		     "ops = keys; rocksdb: batched MultiGet");
	if (rc)
		goto out;
put:
	if (!(cfg->cases & C_PUT))
		goto store;
	ru = (struct runner){ { sfs_put, raw_put, cfg->no_rocksdb ? NULL : rdb_put },
			      { &sa, &raw, &rdb } };
	progress(cfg, "value put");
	rc = measure("value put", n, vs, &ru, reps, ops, n * 31 + vs, "overwrites of live keys");
	if (rc)
		goto out;
store:
	sfsb_close(&sa);
	if (!(cfg->cases & C_STORE))
		goto out;

	/* B: every key only in the flushed memory store. */
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = n, .buffer_bytes = arena_b,
#ifdef SFS_WORKER_NO_CACHE
				      .flags = SFS_WORKER_NO_CACHE,
#endif
	};
	rc = sfsb_open(&sb, "b", worker_seg_bytes(&o, store), &o, SFS_STATE_VALUE, vs, store);
	if (rc)
		goto out;
	sfsb_prefault(&sb, arena_b);
	progress(cfg, "sfs: load, barrier, flush %s keys to the memory store", nb);
	t0 = sfs_now_ns();
	rc = sfs_load(&sb, g_keys, n);
	if (rc) {
		fail("load for the store phase", rc);
		goto out;
	}
	rc = sfs_barrier(sb.c, ++sb.barrier);
	if (rc) {
		fail("barrier", rc);
		goto out;
	}
	rc = sfsb_drain(&sb);
	if (rc)
		goto out;
	sfs_worker_stats(sb.c, &ws);
	if (ws.buffers_sealed || ws.flushed_seq != 1 || ws.active_entries) {
		rc = fail("after the drain a buffer is still sealed or not empty", SFS_ECORRUPT);
		goto out;
	}
	{
		struct sfs_mstore *ms = NULL;

		if (sfs_mstore_attach(&sb.c->seg, 0, &ms) == 0 && ms && ms->ms_live)
			bpes[nbpes - 1].store =
				(double)(ms->ms_top[ms->ms_active] - ms->ms_garbage) / (double)ms->ms_live;
	}
	progress(cfg, "flushed in %.1f s", (sfs_now_ns() - t0) / 1e9);
	ru = (struct runner){ { sfs_get, raw_get, cfg->no_rocksdb ? NULL : rdb_get },
			      { &sb, &raw, &rdb } };
	progress(cfg, "value get (flushed store)");
	rc = measure("value get (flushed store)", n, vs, &ru, reps, ops, n * 43 + vs,
		     "sfs: key only in the memory store; baselines: plain get after the puts");
	if (rc)
		goto out;
	ru = (struct runner){ { sfs_mget, raw_mget, cfg->no_rocksdb ? NULL : rdb_mget },
			      { &sb, &raw, &rdb } };
	progress(cfg, "multiget 64 (flushed store)");
	rc = measure("multiget 64 (flushed store)", n, vs, &ru, reps, ops, n * 47 + vs,
		     "ops = keys");
	if (rc)
		goto out;
	if (!cfg->no_rocksdb)
		rdb_check(&rdb, "value run");
out:
	sfsb_close(&sb);
	sfsb_close(&sa);
	if (rdb.o)
		rdb_close(&rdb);
	raw_close(&raw);
	return rc;
}

/* ---- map state: N entries = N/8 map keys x 8 user keys --------------------------------- */

#define MAP_FANOUT 8u   /* user keys per map key */
#define ULEN       8u   /* user key bytes (a big-endian index, as Flink serializes ints) */

static void ukey_of(unsigned j, unsigned char *u)
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
	*j = (unsigned)(i / g_nkeys);
	return g_keys + (i % g_nkeys) * KLEN;
}

/* raw: key -> one block {count, MAP_FANOUT x (user key, value)}. */
struct rawmap {
	struct raw t;
	uint32_t vs, slot;
	unsigned char *val;
};

static int rawmap_open(struct rawmap *m, uint64_t maps, uint32_t vs)
{
	memset(m, 0, sizeof(*m));
	m->vs = vs;
	m->slot = ULEN + pad8(vs);
	m->val = calloc(1, vs);
	if (!m->val)
		return -ENOMEM;
	return raw_open(&m->t, maps, 8 + MAP_FANOUT * m->slot);
}

static void rawmap_close(struct rawmap *m)
{
	raw_close(&m->t);
	free(m->val);
	memset(m, 0, sizeof(*m));
}

static unsigned char *rawmap_block(struct rawmap *m, const unsigned char *k, int create)
{
	uint64_t h = raw_hash(k), pos;
	unsigned char *e = raw_find(&m->t, k, h, &pos);

	if (!e && create && m->t.n < m->t.cap) {
		e = m->t.arena + m->t.n * m->t.esz;
		memcpy(e, k, KLEN);
		memset(e + KLEN, 0, 8);
		m->t.slot[pos] = (h & RAW_TAG) | ++m->t.n;
	}
	return e ? e + KLEN : NULL;
}

static int rawmap_put1(struct rawmap *m, const unsigned char *k, unsigned j, const void *v)
{
	unsigned char *b = rawmap_block(m, k, 1), u[ULEN];
	uint64_t cnt, i, want, have;

	if (!b)
		return sfs__err(SFS_EFULL, "raw map table full");
	ukey_of(j, u);
	memcpy(&want, u, 8);
	memcpy(&cnt, b, 8);
	for (i = 0; i < cnt; i++) {
		memcpy(&have, b + 8 + i * m->slot, 8);
		if (have == want)
			break;
	}
	if (i == cnt) {
		if (cnt == MAP_FANOUT)
			return sfs__err(SFS_EFULL, "raw map block full");
		cnt++;
		memcpy(b, &cnt, 8);
		memcpy(b + 8 + i * m->slot, u, ULEN);
	}
	memcpy(b + 8 + i * m->slot + ULEN, v, m->vs);
	return 0;
}

static int rawmap_load(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rawmap *m = arg;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *k = load_map_key(i, &j);
		int rc;

		memcpy(m->val, &i, 8);
		rc = rawmap_put1(m, k, j, m->val);
		if (rc)
			return rc;
	}
	return 0;
}

static int rawmap_put(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rawmap *m = arg;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		int rc;

		memcpy(m->val, &i, 8);
		rc = rawmap_put1(m, k, ukey_pick(k), m->val);
		if (rc)
			return rc;
	}
	return 0;
}

static int rawmap_iter(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rawmap *m = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *b = rawmap_block(m, keys + i * KLEN, 0);
		uint64_t cnt;

		if (!b)
			return sfs__err(SFS_ECORRUPT, "raw map: key missing");
		memcpy(&cnt, b, 8);
		if (cnt != MAP_FANOUT)
			return sfs__err(SFS_ECORRUPT, "raw map: %llu entries", (unsigned long long)cnt);
		for (uint64_t e = 0; e < cnt; e++)
			acc += b[8 + e * m->slot + ULEN];
	}
	g_sink += acc;
	return 0;
}

/* RocksDB: one row per entry, key | user key (Flink's MapState layout);
 * iterate = an iterator seeked to the key, read while the prefix holds. */
static void rdb_map_key(unsigned char *out, const unsigned char *k, unsigned j)
{
	memcpy(out, k, KLEN);
	ukey_of(j, out + KLEN);
}

static int rdb_mput1(struct rdb *r, const unsigned char *k, unsigned j)
{
	unsigned char mk[KLEN + ULEN];
	char *err = NULL;

	rdb_map_key(mk, k, j);
	rocksdb_put(r->db, r->wo, (const char *)mk, sizeof(mk), (const char *)r->val, r->vs, &err);
	return rdb_err(&err, "map put");
}

static int rdb_mload(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *k = load_map_key(i, &j);
		int rc;

		memcpy(r->val, &i, 8);
		rc = rdb_mput1(r, k, j);
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_mkey(const void *a, const void *b)
{
	return memcmp(a, b, KLEN + ULEN);
}

/* The untimed rest of a --quick map load, in key order by write batches. */
static int rdb_bulk_map(void *arg, uint64_t from)
{
	struct rdb *r = arg;
	uint64_t n = g_nkeys * MAP_FANOUT - from;
	unsigned char *k = malloc(n * (KLEN + ULEN));
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	char *err = NULL;
	int rc = 0;

	if (!k) {
		rocksdb_writebatch_destroy(wb);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *mk = load_map_key(from + i, &j);

		rdb_map_key(k + i * (KLEN + ULEN), mk, j);
	}
	qsort(k, n, KLEN + ULEN, cmp_mkey);
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		rocksdb_writebatch_put(wb, (const char *)k + i * (KLEN + ULEN), KLEN + ULEN,
				       (const char *)r->val, r->vs);
		if (i % 1000 == 999 || i == n - 1) {
			err = NULL;
			rocksdb_write(r->db, r->wo, wb, &err);
			rc = rdb_err(&err, "write batch");
			rocksdb_writebatch_clear(wb);
		}
	}
	rocksdb_writebatch_destroy(wb);
	free(k);
	return rc;
}

static int rdb_mput(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		int rc;

		memcpy(r->val, &i, 8);
		rc = rdb_mput1(r, k, ukey_pick(k));
		if (rc)
			return rc;
	}
	return 0;
}

static int rdb_miter(void *arg, const unsigned char *keys, uint64_t n)
{
	struct rdb *r = arg;
	uint64_t acc = 0;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ro);
		unsigned cnt = 0;
		char *err = NULL;
		int rc;

		for (rocksdb_iter_seek(it, (const char *)k, KLEN); rocksdb_iter_valid(it);
		     rocksdb_iter_next(it)) {
			size_t kl, vl;
			const char *ik = rocksdb_iter_key(it, &kl);
			const char *v;

			if (kl < KLEN || memcmp(ik, k, KLEN) != 0)
				break;
			v = rocksdb_iter_value(it, &vl);
			acc += (unsigned char)v[0];
			cnt++;
		}
		rocksdb_iter_get_error(it, &err);
		rocksdb_iter_destroy(it);
		rc = rdb_err(&err, "map iterate");
		if (rc)
			return rc;
		if (cnt != MAP_FANOUT)
			return sfs__err(SFS_ECORRUPT, "rocksdb map iterate: %u entries", cnt);
	}
	g_sink += acc;
	return 0;
}

/* sfs */
static int sfs_mput1(struct sfsb *b, const unsigned char *k, unsigned j, uint64_t i)
{
	unsigned char u[ULEN];

	ukey_of(j, u);
	memcpy(b->val, &i, 8);
	return sfs_map_put(b->c, b->st, 0, k, KLEN, u, ULEN, b->val, b->vs);
}

static int sfs_mload(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		unsigned j;
		const unsigned char *k = load_map_key(i, &j);
		int rc = sfs_mput1(b, k, j, i);

		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

static int sfs_mput(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;

	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *k = keys + i * KLEN;
		int rc = sfs_mput1(b, k, ukey_pick(k), i);

		if (rc)
			return rc;
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	return 0;
}

struct iter_acc {
	uint64_t acc, n;
};

static int iter_cb(void *arg, const void *ukey, uint32_t ulen, const void *val, uint32_t vlen)
{
	struct iter_acc *a = arg;

	a->acc += *(const unsigned char *)val;
	a->n++;
	return 0;
}

static int sfs_miter(void *arg, const unsigned char *keys, uint64_t n)
{
	struct sfsb *b = arg;
	struct iter_acc a = { 0, 0 };

	for (uint64_t i = 0; i < n; i++) {
		uint64_t before = a.n;
		int rc = sfs_map_iter(b->c, b->st, 0, keys + i * KLEN, KLEN, iter_cb, &a);

		if (rc)
			return rc;
		if (a.n - before != MAP_FANOUT)
			return sfs__err(SFS_ECORRUPT, "sfs map iterate: %llu entries",
					(unsigned long long)(a.n - before));
		if (i % BATCH == BATCH - 1)
			sfs_ctx_quiescent(b->c);
	}
	sfs_ctx_quiescent(b->c);
	g_sink += a.acc;
	return 0;
}

static uint64_t round_batch(uint64_t n)
{
	n = (n + BATCH - 1) / BATCH * BATCH;
	return n < 4 * BATCH ? 4 * BATCH : n;
}

/* Map state, all in the active buffer: load (insert), iterate, put
 * (overwrite), iterate again: the put case lengthens each map's chain in
 * the buffer (and RocksDB's memtable keeps the versions too). */
static int phase_map(const struct cfg *cfg, uint64_t n, uint32_t vs)
{
	uint64_t maps = n / MAP_FANOUT, entries = maps * MAP_FANOUT;
	unsigned reps = reps_for(cfg, n);
	uint64_t ops = ops_for(cfg, n), iters = round_batch(ops / MAP_FANOUT), iters2;
	uint64_t per_write = sfs_wbuf_entry_size(SFS_MAP_PREFIX + KLEN + ULEN,
						 (uint32_t)sizeof(struct sfs_map_ent) + vs) +
			     sfs_wbuf_entry_size(SFS_MAP_PREFIX + KLEN,
						 (uint32_t)sizeof(struct sfs_map_head));
	uint64_t arena = (entries + reps * ops) * per_write + MIB;
	uint64_t rdb_mem = rdb_bytes_for(entries + reps * ops, vs + ULEN);
	uint64_t raw_mem = pow2_slots(maps) * 8 + maps * (KLEN + 8 + MAP_FANOUT * (ULEN + pad8(vs)));
	uint64_t need = 2 * pow2_slots(entries + maps) * 8 + arena + raw_mem +
			(cfg->no_rocksdb ? 0 : rdb_mem) + maps * KLEN + ops * KLEN;
	double chain;
	struct rawmap raw;
	struct rdb rdb;
	struct sfsb sm;
	struct runner ru;
	struct sfs_worker_opts o;
	struct sfs_wbuf_stats ws;
	char nb[24], note[96];
	int rc;

	memset(&raw, 0, sizeof(raw));
	memset(&rdb, 0, sizeof(rdb));
	memset(&sm, 0, sizeof(sm));
	if (maps < BATCH || check_memory(need, n, vs, "map "))
		return 0;
	fprintf(stderr, "[map state: %s entries (%llu keys x %u), %u-byte values, %u reps]\n",
		size_name(entries, nb, sizeof(nb)), (unsigned long long)maps, MAP_FANOUT, vs, reps);
	rc = keys_make(maps);
	if (rc)
		goto out;
	rc = rawmap_open(&raw, maps, vs);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb) {
		rc = rdb_open(&rdb, rdb_mem, 0, vs);
		if (rc) {
			fail("open rocksdb", rc);
			goto out;
		}
	}
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = entries + maps + 1,
				      .buffer_bytes = arena };
	rc = sfsb_open(&sm, "m", worker_seg_bytes(&o, 0), &o, SFS_STATE_MAP, vs, 0);
	if (rc)
		goto out;
	sfsb_prefault(&sm, arena);
	ru = (struct runner){ { sfs_mload, rawmap_load, cfg->no_rocksdb ? NULL : rdb_mload },
			      { &sm, &raw, &rdb } };
	progress(cfg, "loading %s map entries into each structure", nb);
	rc = measure_load("map insert", entries, vs, &ru, rdb_load_timed(cfg, entries),
			  rdb_bulk_map);
	if (rc)
		goto out;
	sfs_wbuf_stats(sfsb_active(&sm), &ws);
	bpe_add("map", vs, entries, (double)(ws.bytes_used + ws.slots * 8) / (double)entries,
		(double)ws.bytes_used / (double)entries, 0,
		(double)raw_mem / (double)entries,
		cfg->no_rocksdb ? 0
				: (double)rdb_prop(&rdb, "rocksdb.cur-size-all-mem-tables") /
					  (double)entries);
	ru = (struct runner){ { sfs_miter, rawmap_iter, cfg->no_rocksdb ? NULL : rdb_miter },
			      { &sm, &raw, &rdb } };
	progress(cfg, "map iterate");
	rc = measure("map iterate (8 entries)", entries, vs, &ru, reps, iters, n * 59 + vs,
		     "ops = iterations of one map key's 8 entries");
	if (rc)
		goto out;
	ru = (struct runner){ { sfs_mput, rawmap_put, cfg->no_rocksdb ? NULL : rdb_mput },
			      { &sm, &raw, &rdb } };
	progress(cfg, "map put");
	rc = measure("map put", entries, vs, &ru, reps, ops, n * 61 + vs,
		     "overwrites of live entries (8-byte user keys)");
	if (rc)
		goto out;
	/* Every write so far is in each map's buffer chain. */
	chain = (double)(entries + reps * ops) / (double)maps;
	iters2 = round_batch((uint64_t)((double)iters * MAP_FANOUT / chain));
	snprintf(note, sizeof(note), "each map's buffer chain: %.0f writes on average", chain);
	ru = (struct runner){ { sfs_miter, rawmap_iter, cfg->no_rocksdb ? NULL : rdb_miter },
			      { &sm, &raw, &rdb } };
	progress(cfg, "map iterate after the puts (chains of %.0f)", chain);
	rc = measure("map iterate (after puts)", entries, vs, &ru, reps, iters2, n * 67 + vs, note);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb)
		rdb_check(&rdb, "map run");
out:
	sfsb_close(&sm);
	if (rdb.o)
		rdb_close(&rdb);
	rawmap_close(&raw);
	return rc;
}

static unsigned seal_samples(const struct cfg *cfg, uint64_t n)
{
	uint64_t s = (cfg->quick ? 3000000ull : 20000000ull) / n;
	uint64_t lo = cfg->quick ? 3 : 7;

	return (unsigned)(s < lo ? lo : s > 201 ? 201 : s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Counter adds, and (when @seal) barrier seal+swap latency with N entries in
 * the active buffer. */
static int phase_counter(const struct cfg *cfg, uint64_t n, int seal)
{
	unsigned reps = reps_for(cfg, n), ns = seal ? seal_samples(cfg, n) : 0;
	uint64_t ops = ops_for(cfg, n), es = sfs_esize(8), arena = n * es + MIB;
	uint64_t store = seal ? store_bytes_for(n, 8, 3) : 0;
	uint64_t rdb_mem = rdb_bytes_for(n + reps * ops, 8);
	uint64_t idx = pow2_slots(n) * 8;
	uint64_t need = 2 * (idx + arena) + store + n * 24 +
			pow2_slots(n) * 8 + n * (KLEN + 8) + (cfg->no_rocksdb ? 0 : rdb_mem) +
			n * KLEN + ops * KLEN;
	uint64_t *lat = NULL;
	struct raw raw;
	struct rdb rdb;
	struct sfsb sc;
	struct runner ru;
	struct sfs_worker_opts o;
	struct sfs_worker_stats ws;
	double bpe_total, bpe_arena;
	char nb[24];
	int rc;

	memset(&raw, 0, sizeof(raw));
	memset(&rdb, 0, sizeof(rdb));
	memset(&sc, 0, sizeof(sc));
	if (check_memory(need, n, 8, "counter "))
		return 0;
	fprintf(stderr, "[counter state: %s keys, %u reps x %llu ops%s]\n",
		size_name(n, nb, sizeof(nb)), reps, (unsigned long long)ops,
		seal ? ", then barrier latency" : "");
	rc = keys_make(n);
	if (rc)
		goto out;
	rc = raw_open(&raw, n, 8);
	if (rc)
		goto out;
	if (!cfg->no_rocksdb) {
		rc = rdb_open(&rdb, rdb_mem, 1, 8);
		if (rc) {
			fail("open rocksdb", rc);
			goto out;
		}
	}
	o = (struct sfs_worker_opts){ .buffers = 2, .buffer_keys = n, .buffer_bytes = arena };
	rc = sfsb_open(&sc, "c", worker_seg_bytes(&o, store), &o, SFS_STATE_COUNTER, 8, store);
	if (rc)
		goto out;
	sfsb_prefault(&sc, arena);
	/* The first add of each key appends its cell: N live counters. */
	ru = (struct runner){ { sfs_add, raw_add, cfg->no_rocksdb ? NULL : rdb_add },
			      { &sc, &raw, &rdb } };
	progress(cfg, "loading %s counters", nb);
	rc = measure_load("counter add (first)", n, 8, &ru, rdb_load_timed(cfg, n),
			  rdb_bulk_merge);
	if (rc)
		goto out;
	sfs_bytes_per_entry(&sc, &bpe_total, &bpe_arena);
	bpe_add("counter", 8, n, bpe_total, bpe_arena, 0,
		(double)(pow2_slots(n) * 8 + n * (KLEN + 8)) / (double)n,
		cfg->no_rocksdb ? 0
				: (double)rdb_prop(&rdb, "rocksdb.cur-size-all-mem-tables") /
					  (double)n);
	if (!(cfg->cases & C_COUNTER))
		goto seal;
	progress(cfg, "counter add");
	rc = measure("counter add", n, 8, &ru, reps, ops, n * 53,
		     "blind adds; rocksdb: Merge (uint64 add)");
	if (rc)
		goto out;
seal:
	if (!cfg->no_rocksdb) {
		rdb_check(&rdb, "counter run");
		rdb_close(&rdb);
	}
	raw_close(&raw);
	if (!seal || !(cfg->cases & C_SEAL))
		goto out;

	/* Seal + swap: N entries active, barrier timed, flusher drains. */
	lat = calloc(ns, sizeof(*lat));
	if (!lat) {
		rc = -ENOMEM;
		goto out;
	}
	progress(cfg, "barrier latency: %u samples at %s entries", ns, nb);
	for (unsigned s = 0; s < ns; s++) {
		uint64_t t0;

		if (s) {
			sfsb_prefault(&sc, arena);
			rc = sfs_add(&sc, g_keys, n);
			if (rc) {
				fail("refill", rc);
				goto out;
			}
		}
		sfs_worker_stats(sc.c, &ws);
		if (ws.active_entries != n) {
			rc = fail("active buffer does not hold N entries", SFS_ECORRUPT);
			goto out;
		}
		t0 = sfs_now_ns();
		rc = sfs_barrier(sc.c, ++sc.barrier);
		lat[s] = sfs_now_ns() - t0;
		if (rc) {
			fail("barrier", rc);
			goto out;
		}
		rc = sfsb_drain(&sc);
		if (rc)
			goto out;
	}
	sfs_worker_stats(sc.c, &ws);
	qsort(lat, ns, sizeof(*lat), cmp_u64);
	if (nseals < MAX_SIZES) {
		struct seal_result *sr = &seals[nseals++];
		unsigned p99 = (unsigned)ceil(0.99 * ns);

		sr->keys = n;
		sr->n = ns;
		sr->median = (ns % 2 ? lat[ns / 2] : (lat[ns / 2 - 1] + lat[ns / 2]) / 2) / 1e3;
		sr->p99 = lat[(p99 ? p99 : 1) - 1] / 1e3;
		sr->max = lat[ns - 1] / 1e3;
		sr->stalls = ws.stalls;
	}
out:
	free(lat);
	sfsb_close(&sc);
	if (rdb.o)
		rdb_close(&rdb);
	raw_close(&raw);
	return rc;
}

/* ---- output ---------------------------------------------------------------------------- */

static const struct result *find_result(const char *name, uint64_t keys, uint32_t vs)
{
	for (unsigned i = 0; i < nresults; i++)
		if (!strcmp(results[i].name, name) && results[i].keys == keys &&
		    results[i].vsize == vs)
			return &results[i];
	return NULL;
}

/* Targets of issue 3 at 1M keys: value put and get >= 0.5x raw, >= 20x rocksdb. */
static void targets(const struct cfg *cfg, FILE *f, int json)
{
	static const char *const names[] = { "value put", "value get (active buffer)" };
	int first = 1;

	for (unsigned v = 0; v < cfg->nvs; v++)
		for (unsigned k = 0; k < 2; k++) {
			const struct result *r = find_result(names[k], 1000000, cfg->vs[v]);
			int raw_ok, rdb_ok;

			if (!r)
				continue;
			raw_ok = r->r_raw[0] >= 0.5;
			rdb_ok = r->r_rdb[0] >= 20;
			if (json) {
				fprintf(f,
					"%s{\"name\": \"%s\", \"value_size\": %u, \"ratio_vs_raw\": %.3f, "
					"\"raw_target_met\": %s, \"ratio_vs_rocksdb\": %.2f, "
					"\"rocksdb_target_met\": %s}",
					first ? "" : ", ", r->name, r->vsize, r->r_raw[0],
					raw_ok ? "true" : "false", r->r_rdb[0],
					cfg->no_rocksdb ? "null" : rdb_ok ? "true" : "false");
			} else {
				fprintf(f, "  %-28s %3u B: %.2fx raw (>= 0.5: %s), %.1fx rocksdb (>= 20: %s)\n",
					r->name, r->vsize, r->r_raw[0], raw_ok ? "met" : "NOT met",
					r->r_rdb[0],
					cfg->no_rocksdb ? "not run" : rdb_ok ? "met" : "NOT met");
			}
			first = 0;
		}
	if (first && !json)
		fprintf(f, "  (no 1M-key run: targets not evaluated)\n");
}

static void print_text(const struct cfg *cfg)
{
	char nb[24];
	double load[3];

	getloadavg(load, 3);
	printf("sfs bench state — node 0, %ld CPUs, load %.2f %.2f %.2f%s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2],
	       cfg->quick ? " (--quick)" : "");
	printf("ops/s are medians over the repetitions; ratios are medians of per-repetition "
	       "ratios [lowest-highest]\n\n");
	printf("%-28s %5s %5s %10s %10s %10s %19s %19s\n", "case", "keys", "value", "sfs Mops/s",
	       "raw Mops/s", "rdb Mops/s", "x raw", "x rocksdb");
	for (unsigned i = 0; i < nresults; i++) {
		const struct result *r = &results[i];
		char a[48], b[48];

		snprintf(a, sizeof(a), "%.2g [%.2g-%.2g]", r->r_raw[0], r->r_raw[1], r->r_raw[2]);
		if (r->ops_s[I_RDB] > 0)
			snprintf(b, sizeof(b), "%.3g [%.3g-%.3g]", r->r_rdb[0], r->r_rdb[1],
				 r->r_rdb[2]);
		else
			snprintf(b, sizeof(b), "-");
		printf("%-28s %5s %5u %10.3g %10.3g %10.3g %19s %19s\n", r->name,
		       size_name(r->keys, nb, sizeof(nb)), r->vsize, r->ops_s[I_SFS] / 1e6,
		       r->ops_s[I_RAW] / 1e6, r->ops_s[I_RDB] / 1e6, a, b);
	}
	printf("\ncase notes:\n");
	for (unsigned i = 0; i < nresults; i++) {
		int seen = 0;

		for (unsigned j = 0; j < i; j++)
			seen |= !strcmp(results[j].name, results[i].name) &&
				!strcmp(results[j].note, results[i].note);
		if (!seen && results[i].note[0])
			printf("  %-28s %s\n", results[i].name, results[i].note);
	}
	printf("  rocksdb runs 1/%d of each repetition's operations (>= %u)\n", RDB_FRACTION,
	       RDB_OPS_MIN);
	printf("  not measured: map/list reads from the flushed store, list state\n");
	printf("\nbarrier seal+swap (sfs_barrier), flusher draining between barriers, untimed:\n");
	for (unsigned i = 0; i < nseals; i++)
		printf("  %5s live entries: median %.2f us, p99 %.2f us, max %.2f us (%u samples, "
		       "%llu stalls)\n",
		       size_name(seals[i].keys, nb, sizeof(nb)), seals[i].median, seals[i].p99,
		       seals[i].max, seals[i].n, (unsigned long long)seals[i].stalls);
	printf("\nbytes per live entry (16-byte keys):\n");
	printf("  %-8s %5s %5s %12s %12s %12s %8s %12s\n", "state", "keys", "value", "sfs buffer",
	       "(arena)", "sfs store", "raw", "rdb memtable");
	for (unsigned i = 0; i < nbpes; i++) {
		const struct bpe *e = &bpes[i];

		char st[16];

		snprintf(st, sizeof(st), e->store > 0 ? "%.1f" : "-", e->store);
		printf("  %-8s %5s %5u %12.1f %12.1f %12s %8.1f %12.1f\n", e->kind,
		       size_name(e->keys, nb, sizeof(nb)), e->vsize, e->sfs, e->sfs_arena, st,
		       e->raw, e->rdb);
	}
	printf("\ntargets (issue 3, at 1M keys):\n");
	targets(cfg, stdout, 0);
	printf("  barrier median < 10 us:");
	for (unsigned i = 0; i < nseals; i++)
		printf(" %s %s", size_name(seals[i].keys, nb, sizeof(nb)),
		       seals[i].median < 10 ? "met" : "NOT met");
	printf("\n");
	for (unsigned i = 0; i < nskipped; i++)
		printf("\n%s", skipped[i]);
	if (rdb_spilled)
		printf("\nwarning: a RocksDB run left its memtable; see stderr\n");
	printf("\nnotes: a quiescent point every %u operations; sfs insert/put overwrite append "
	       "to the buffer's arena (prefaulted);\n"
	       "  flushed-store reads go through the (empty) active buffer%s; multiget ops/s count "
	       "keys.\n",
	       BATCH,
#ifdef SFS_WORKER_NO_CACHE
	       ", value cache off"
#else
	       ""
#endif
	);
}

static void print_json(const struct cfg *cfg)
{
	char date[32];
	time_t now = time(NULL);
	double load[3];

	getloadavg(load, 3);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S%z", localtime(&now));
	printf("{\"node\": 0, \"quick\": %s, \"date\": \"%s\", \"cpus\": %ld, "
	       "\"loadavg\": [%.2f, %.2f, %.2f], \"batch\": %u, \"cases\": [",
	       cfg->quick ? "true" : "false", date, sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1],
	       load[2], BATCH);
	for (unsigned i = 0; i < nresults; i++) {
		const struct result *r = &results[i];

		printf("%s\n  {\"name\": \"%s\", \"keys\": %llu, \"value_size\": %u, "
		       "\"ops_per_sec\": %.0f, \"ratio_vs_raw\": %.4f, ",
		       i ? "," : "", r->name, (unsigned long long)r->keys, r->vsize, r->ops_s[I_SFS],
		       r->r_raw[0]);
		if (r->ops_s[I_RDB] > 0)
			printf("\"ratio_vs_rocksdb\": %.3f, ", r->r_rdb[0]);
		else
			printf("\"ratio_vs_rocksdb\": null, ");
		printf("\"raw_ops_per_sec\": %.0f, \"rocksdb_ops_per_sec\": %.0f, "
		       "\"ratio_vs_raw_range\": [%.4f, %.4f], \"ratio_vs_rocksdb_range\": [%.3f, %.3f], "
		       "\"reps\": %u, \"ops_per_rep\": %llu, \"rocksdb_ops_per_rep\": %llu, "
		       "\"note\": \"%s\"}",
		       r->ops_s[I_RAW], r->ops_s[I_RDB], r->r_raw[1], r->r_raw[2], r->r_rdb[1],
		       r->r_rdb[2], r->reps, (unsigned long long)r->ops,
		       (unsigned long long)r->rdb_ops, r->note);
	}
	printf("],\n \"not_measured\": [\"map/list reads from the flushed store\", \"list state\"],"
	       "\n \"seal_us_median\": {");
	for (unsigned i = 0; i < nseals; i++)
		printf("%s\"%llu\": %.3f", i ? ", " : "", (unsigned long long)seals[i].keys,
		       seals[i].median);
	printf("},\n \"seal_us_p99\": {");
	for (unsigned i = 0; i < nseals; i++)
		printf("%s\"%llu\": %.3f", i ? ", " : "", (unsigned long long)seals[i].keys,
		       seals[i].p99);
	printf("},\n \"seal_samples\": {");
	for (unsigned i = 0; i < nseals; i++)
		printf("%s\"%llu\": %u", i ? ", " : "", (unsigned long long)seals[i].keys, seals[i].n);
	/* bytes_per_entry: {"value/16": {"10000": x, ...}, "counter/8": {...}} */
	printf("},\n \"bytes_per_entry\": {");
	for (unsigned i = 0, first = 1; i < nbpes; i++) {
		int seen = 0;

		for (unsigned j = 0; j < i; j++)
			seen |= !strcmp(bpes[j].kind, bpes[i].kind) && bpes[j].vsize == bpes[i].vsize;
		if (seen)
			continue;
		printf("%s\"%s/%u\": {", first ? "" : ", ", bpes[i].kind, bpes[i].vsize);
		for (unsigned j = i, f2 = 1; j < nbpes; j++)
			if (!strcmp(bpes[j].kind, bpes[i].kind) && bpes[j].vsize == bpes[i].vsize) {
				printf("%s\"%llu\": %.2f", f2 ? "" : ", ",
				       (unsigned long long)bpes[j].keys, bpes[j].sfs);
				f2 = 0;
			}
		printf("}");
		first = 0;
	}
	printf("},\n \"bytes_per_entry_detail\": [");
	for (unsigned i = 0; i < nbpes; i++)
		printf("%s\n  {\"state\": \"%s\", \"keys\": %llu, \"value_size\": %u, "
		       "\"sfs_buffer\": %.2f, \"sfs_buffer_arena\": %.2f, \"sfs_store\": %.2f, "
		       "\"raw\": %.2f, \"rocksdb_memtable\": %.2f}",
		       i ? "," : "", bpes[i].kind, (unsigned long long)bpes[i].keys, bpes[i].vsize,
		       bpes[i].sfs, bpes[i].sfs_arena, bpes[i].store, bpes[i].raw, bpes[i].rdb);
	printf("],\n \"targets\": [");
	targets(cfg, stdout, 1);
	printf("],\n \"skipped\": [");
	for (unsigned i = 0; i < nskipped; i++)
		printf("%s\"%s\"", i ? ", " : "", skipped[i]);
	printf("],\n \"rocksdb_memtable_only\": %s}\n", rdb_spilled ? "false" : "true");
}

/* ---- command line ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sfs bench state [--quick] [--json] [--keys N,...] [--value-sizes V,...]\n"
		"                       [--reps R] [--ops N] [--no-rocksdb] [--cases LIST]\n"
		"Keyed-state hot paths (value put/get, reads through to the flushed memory\n"
		"store, multiget, map put/iterate, counter add, barrier seal+swap) against a\n"
		"raw in-process hash table and RocksDB (memtable, WAL off), measured in this\n"
		"command.  --quick (10K and 1M keys) takes about 25 s, the full run ~15 min.\n"
		"  --keys         live keys per run (default 10K,1M,10M; --quick 10K,1M);\n"
		"                 K and M suffixes accepted\n"
		"  --value-sizes  value bytes (default 16,64,256; 8..65536; map state uses\n"
		"                 the middle one)\n"
		"  --reps         repetitions per case (default 5; 3 with --quick or >= 5M keys)\n"
		"  --ops          operations per repetition (default 500K/1M; 100K with --quick)\n"
		"  --no-rocksdb   skip the RocksDB baseline (profiling)\n"
		"  --cases        only these (profiling): put,get,multiget,store,counter,seal,map;\n"
		"                 the loads of the chosen phases always run\n"
		"  --json         one JSON object on stdout (progress goes to stderr)\n");
}

static int parse_list(const char *s, uint64_t *out, unsigned max, uint64_t lo, uint64_t hi,
		      const char *opt)
{
	unsigned n = 0;

	while (*s) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(s, &end, 10);
		if (end == s || errno)
			goto bad;
		if (*end == 'K' || *end == 'k')
			v *= 1000, end++;
		else if (*end == 'M' || *end == 'm')
			v *= 1000000, end++;
		if (v < lo || v > hi || n == max || (*end && *end != ','))
			goto bad;
		out[n++] = v;
		s = *end ? end + 1 : end;
	}
	if (n)
		return (int)n;
bad:
	fprintf(stderr, "sfs bench state: %s: expected up to %u comma-separated numbers in "
			"[%llu, %llu]\n", opt, max, (unsigned long long)lo, (unsigned long long)hi);
	exit(2);
}

static unsigned parse_cases(const char *arg)
{
	static const struct {
		const char *name;
		unsigned bit;
	} known[] = { { "put", C_PUT },	    { "get", C_GET },	      { "multiget", C_MGET },
		      { "store", C_STORE }, { "counter", C_COUNTER }, { "seal", C_SEAL },
		      { "map", C_MAP } };
	char buf[256], *save = NULL;
	unsigned bits = 0;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned k;

		for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (!strcmp(t, known[k].name))
				break;
		if (k == sizeof(known) / sizeof(known[0])) {
			fprintf(stderr, "sfs bench state: --cases: unknown case '%s' (put, get, "
					"multiget, store, counter, seal, map)\n", t);
			exit(2);
		}
		bits |= known[k].bit;
	}
	return bits;
}

static int cmd_bench_state(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'J' },
		{ "keys", required_argument, NULL, 'k' },
		{ "value-sizes", required_argument, NULL, 'v' },
		{ "reps", required_argument, NULL, 'r' },
		{ "ops", required_argument, NULL, 'o' },
		{ "no-rocksdb", no_argument, NULL, 'R' },
		{ "cases", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cfg cfg = { 0 };
	uint64_t tmp[MAX_SIZES], seal_small, seal_big = 0, t0 = sfs_now_ns();
	int c, rc = 0, keys_given = 0;
	struct sigaction sa;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'q': cfg.quick = 1; break;
		case 'J': cfg.json = 1; break;
		case 'R': cfg.no_rocksdb = 1; break;
		case 'k':
			cfg.nkeys = (unsigned)parse_list(optarg, cfg.keys, MAX_SIZES, 64, 200000000,
							 "--keys");
			keys_given = 1;
			break;
		case 'v':
			cfg.nvs = (unsigned)parse_list(optarg, tmp, MAX_SIZES, 8, 65536,
						       "--value-sizes");
			for (unsigned i = 0; i < cfg.nvs; i++)
				cfg.vs[i] = (uint32_t)tmp[i];
			break;
		case 'r':
			cfg.reps = (unsigned)sfs_arg_num("bench state", "--reps", optarg, 1, MAX_REPS);
			break;
		case 'o':
			cfg.ops = (uint64_t)sfs_arg_num("bench state", "--ops", optarg, BATCH,
							1000000000);
			break;
		case 'c':
			cfg.cases = parse_cases(optarg);
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!cfg.cases)
		cfg.cases = C_ALL;
	if (!keys_given) {
		cfg.keys[0] = 10000;
		cfg.keys[1] = 1000000;
		cfg.keys[2] = 10000000;
		cfg.nkeys = cfg.quick ? 2 : 3;
	}
	if (!cfg.nvs) {
		cfg.vs[0] = 16;
		cfg.vs[1] = 64;
		cfg.vs[2] = 256;
		cfg.nvs = 3;
	}
	/* Seal latency at 10K (or the smallest size) and at the largest. */
	seal_small = cfg.keys[0];
	for (unsigned i = 0; i < cfg.nkeys; i++) {
		if (cfg.keys[i] == 10000 || (seal_small != 10000 && cfg.keys[i] < seal_small))
			seal_small = cfg.keys[i];
		if (cfg.keys[i] > seal_big)
			seal_big = cfg.keys[i];
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	for (unsigned k = 0; k < cfg.nkeys && rc == 0; k++) {
		uint64_t n = cfg.keys[k];

		for (unsigned v = 0; v < cfg.nvs && rc == 0; v++)
			if (cfg.cases & (C_PUT | C_GET | C_MGET | C_STORE))
				rc = phase_value(&cfg, n, cfg.vs[v]);
		if (rc == 0 && (cfg.cases & C_MAP))
			rc = phase_map(&cfg, n, cfg.vs[cfg.nvs / 2]);
		if (rc == 0 && (cfg.cases & (C_COUNTER | C_SEAL)))
			rc = phase_counter(&cfg, n, n == seal_small || n == seal_big);
	}
	free(g_keys);
	free(g_ops);
	g_keys = g_ops = NULL;
	g_ops_cap = 0;
	if (rc) {
		fprintf(stderr, "sfs bench state: stopped: %s\n", sfs_strerror(rc));
		return 1;
	}
	fprintf(stderr, "[done in %.1f s]\n", (sfs_now_ns() - t0) / 1e9);
	if (cfg.json)
		print_json(&cfg);
	else
		print_text(&cfg);
	return 0;
}

int sfs_cmd_bench(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout, "usage: sfs bench state [OPTIONS]\n"
						    "'sfs bench state --help' lists the options.\n");
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "state"))
		return cmd_bench_state(argc - 1, argv + 1);
	fprintf(stderr, "sfs bench: unknown benchmark '%s' (known: state)\n", argv[1]);
	return 2;
}
