/*
 * test_ring.c — shm/ring: argument and header validation, a model test
 * against a reference queue, SPSC and MPSC across processes (also through
 * tiny rings, and mapped at different addresses), futex sleep/wake of both
 * sides, and an MPSC producer that dies between reserve and commit.
 *
 * Multi-process rules: forked children report only through their exit
 * code (a child never calls cr_assert: it would talk to the runner as if it
 * were the test), die with their parent (PR_SET_PDEATHSIG), and are always
 * reaped with a timeout (killed when it runs out) before the test asserts.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "common/clock.h"
#include "common/err.h"
#include "shm/ring.h"

#define MS 1000000ull

/* ---- small helpers (rt_: ring test) ---------------------------------- */

static struct sfs_ring *rt_ring(uint32_t count, uint32_t esize, unsigned flags, size_t *len)
{
	size_t n = sfs_ring_memsize(count, esize);
	void *mem;

	cr_assert(n > 0);
	mem = th_map(n);
	cr_assert_eq(sfs_ring_init(mem, count, esize, flags), 0, "%s", sfs_last_error());
	*len = n;
	return mem;
}

/* th_fork() plus: the child dies with the test process (a Criterion
 * timeout kills the test, not its children), and never returns into
 * Criterion. */
static pid_t rt_spawn(int (*fn)(void *), void *arg)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	cr_assert(pid >= 0, "fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(120);
		_exit(fn(arg));
	}
	return pid;
}

/* Reap @pid within @timeout_ns (killed when it runs out): its exit code,
 * or -1 if it was killed or died of a signal. */
static int rt_reap(pid_t pid, uint64_t timeout_ns)
{
	return th_exit_code(th_wait(pid, (int)(timeout_ns / MS)));
}

/* A checkable 16-byte record: tag = producer << 48 | sequence. */
struct rec16 {
	uint64_t tag;
	uint64_t check;
};

static uint64_t rt_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static struct rec16 rt_rec(uint64_t producer, uint64_t seq)
{
	struct rec16 r = { producer << 48 | seq, 0 };

	r.check = rt_mix(r.tag);
	return r;
}

/* ---- validation ------------------------------------------------------- */

Test(ring, bad_args_rejected)
{
	void *mem = th_map(sfs_ring_memsize(1024, 64));

	cr_expect_eq(sfs_ring_memsize(0, 16), 0);
	cr_expect_eq(sfs_ring_memsize(1, 16), 0);
	cr_expect_eq(sfs_ring_memsize(3, 16), 0);
	cr_expect_eq(sfs_ring_memsize(1000, 16), 0);
	cr_expect_eq(sfs_ring_memsize(1u << 31, 16), 0);
	cr_expect_eq(sfs_ring_memsize(64, 0), 0);
	cr_expect_eq(sfs_ring_memsize(64, 12), 0);
	cr_expect_eq(sfs_ring_memsize(64, SFS_RING_ESIZE_MAX + 8), 0);
	cr_expect_gt(sfs_ring_memsize(64, 16), sizeof(struct sfs_ring) + 64 * 16);
	cr_expect_eq(sfs_ring_memsize(64, 16) % SFS_CACHE_LINE, 0);

	cr_expect_eq(sfs_ring_init(mem, 3, 16, SFS_RING_SPSC), SFS_EUSAGE);
	cr_expect(strstr(sfs_last_error(), "count 3") != NULL, "%s", sfs_last_error());
	cr_expect_eq(sfs_ring_init(mem, 0, 16, SFS_RING_SPSC), SFS_EUSAGE);
	cr_expect_eq(sfs_ring_init(mem, 64, 20, SFS_RING_SPSC), SFS_EUSAGE);
	cr_expect(strstr(sfs_last_error(), "record size 20") != NULL, "%s", sfs_last_error());
	cr_expect_eq(sfs_ring_init(mem, 64, 16, 0), SFS_EUSAGE);
	cr_expect_eq(sfs_ring_init(mem, 64, 16, SFS_RING_SPSC | SFS_RING_MPSC), SFS_EUSAGE);
	cr_expect_eq(sfs_ring_init(mem, 64, 16, 0x10), SFS_EUSAGE);
	cr_expect(strstr(sfs_last_error(), "flags 0x10") != NULL, "%s", sfs_last_error());
	cr_expect_eq(sfs_ring_init(NULL, 64, 16, SFS_RING_SPSC), SFS_EUSAGE);
	cr_expect_eq(sfs_ring_init((char *)mem + 8, 64, 16, SFS_RING_SPSC), SFS_EUSAGE);
	/* Nothing was laid out by the failed calls. */
	cr_expect_eq(sfs_ring_check(mem), SFS_EMAGIC);
	cr_expect_eq(sfs_ring_init(mem, 1024, 64, SFS_RING_MPSC), 0);
	cr_expect_eq(sfs_ring_check(mem), 0);
}

Test(ring, magic_version_layout_checked)
{
	size_t len = sfs_ring_memsize(64, 16);
	struct sfs_ring *r = th_map(len), *out = NULL;

	cr_expect_eq(sfs_ring_check(r), SFS_EMAGIC);
	cr_expect(strstr(sfs_last_error(), "magic") != NULL, "%s", sfs_last_error());
	cr_assert_eq(sfs_ring_init(r, 64, 16, SFS_RING_SPSC), 0);
	cr_expect_eq(sfs_ring_check(r), 0);
	cr_expect_eq(sfs_ring_attach(r, len, &out), 0);
	cr_expect_eq(out, r);

	r->rg_version = SFS_RING_VERSION + 1;
	cr_expect_eq(sfs_ring_check(r), SFS_EVERSION);
	cr_expect(strstr(sfs_last_error(), "version 2") != NULL, "%s", sfs_last_error());
	r->rg_version = SFS_RING_VERSION;

	r->rg_layout ^= 1;
	cr_expect_eq(sfs_ring_check(r), SFS_ELAYOUT);
	r->rg_layout ^= 1;

	r->rg_mask = 31;
	cr_expect_eq(sfs_ring_check(r), SFS_ECORRUPT);
	r->rg_mask = 63;
	r->rg_flags = 7;
	cr_expect_eq(sfs_ring_check(r), SFS_ECORRUPT);
	r->rg_flags = SFS_RING_SPSC;
	cr_expect_eq(sfs_ring_check(r), 0);

	cr_expect_eq(sfs_ring_attach(r, len - 64, &out), SFS_ECORRUPT);
	cr_expect(strstr(sfs_last_error(), "mapped") != NULL, "%s", sfs_last_error());
	r->rg_magic = 0x1234;
	cr_expect_eq(sfs_ring_attach(r, len, &out), SFS_EMAGIC);
}

/* ---- single process --------------------------------------------------- */

/* Fill to capacity, partial enqueue, drain, and positions that wrap the
 * 32-bit index space. */
static void rt_basic(unsigned flags)
{
	size_t len;
	struct sfs_ring *r = rt_ring(8, 16, flags, &len);
	struct rec16 in[12], out[12];
	uint32_t start = 0xfffffffau, i;

	/* Pretend 2^32 - 6 records went through already. */
	r->rg_prod_head = r->rg_cons_tail = start;
	r->rg_prod_tail_cache = r->rg_cons_head_cache = start;
	for (i = 0; i < 8; i++) /* seq words as the previous lap left them */
		sfs__ring_seq(r)[(start + i) & 7] = start + i - 8 + 1;

	for (i = 0; i < 12; i++)
		in[i] = rt_rec(1, i);
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(sfs_ring_count(r), 0);
		cr_assert_eq(sfs_ring_free(r), 8);
		cr_assert_eq(sfs_ring_dequeue_burst(r, out, 4), 0);
		cr_assert_eq(sfs_ring_enqueue_burst(r, in, 5), 5);
		cr_assert_eq(sfs_ring_enqueue_burst(r, in + 5, 7), 3, "only 3 free");
		cr_assert_eq(sfs_ring_enqueue_burst(r, in + 8, 1), 0, "full");
		cr_assert_eq(sfs_ring_count(r), 8);
		cr_assert_eq(sfs_ring_dequeue_burst(r, out, 3), 3);
		cr_assert_eq(sfs_ring_dequeue_burst(r, out + 3, 12), 5);
		cr_assert_eq(memcmp(in, out, 8 * sizeof(in[0])), 0);
	}
	cr_expect_eq(sfs_ring_dequeue_wait(r, out, 4, 0), 0);
	cr_expect_eq(r->rg_cons_tail, start + 24);
}

Test(ring, basic_spsc) { rt_basic(SFS_RING_SPSC); }
Test(ring, basic_mpsc) { rt_basic(SFS_RING_MPSC); }

/* Random burst sizes against a plain array queue, 24-byte records. */
static void rt_model(unsigned flags, uint64_t seed)
{
	enum { COUNT = 64, OPS = 200000, MAXB = 100 };
	struct rec24 {
		uint64_t v, nv, v3;
	} buf[MAXB];
	size_t len;
	struct sfs_ring *r = rt_ring(COUNT, sizeof(struct rec24), flags, &len);
	uint64_t model[COUNT], mhead = 0, mtail = 0, next = 0;
	unsigned i, k, want, n;

	for (i = 0; i < OPS; i++) {
		n = (unsigned)(th_rand(&seed) % MAXB);
		if (th_rand(&seed) & 1) {
			for (k = 0; k < n; k++)
				buf[k] = (struct rec24){ next + k, ~(next + k), 3 * (next + k) };
			want = n < COUNT - (mhead - mtail) ? n : (unsigned)(COUNT - (mhead - mtail));
			k = sfs_ring_enqueue_burst(r, buf, n);
			cr_assert_eq(k, want, "op %u: enqueue %u -> %u, model %u", i, n, k, want);
			for (k = 0; k < want; k++)
				model[mhead++ % COUNT] = next++;
		} else {
			want = n < mhead - mtail ? n : (unsigned)(mhead - mtail);
			k = sfs_ring_dequeue_burst(r, buf, n);
			cr_assert_eq(k, want, "op %u: dequeue %u -> %u, model %u", i, n, k, want);
			for (k = 0; k < want; k++) {
				uint64_t v = model[mtail++ % COUNT];

				cr_assert(buf[k].v == v && buf[k].nv == ~v && buf[k].v3 == 3 * v,
					  "op %u rec %u: got %llu, model %llu", i, k,
					  (unsigned long long)buf[k].v, (unsigned long long)v);
			}
		}
		cr_assert_eq(sfs_ring_count(r), mhead - mtail);
		cr_assert_eq(sfs_ring_free(r), COUNT - (mhead - mtail));
	}
}

Test(ring, model_spsc) { rt_model(SFS_RING_SPSC, 0x9e3779b97f4a7c15ull); }
Test(ring, model_mpsc) { rt_model(SFS_RING_MPSC, 0x2545f4914f6cdd1dull); }

/* ---- across processes ------------------------------------------------- */

struct rt_prod {
	struct sfs_ring *r;
	uint64_t id, n;
	int memfd;      /* >= 0: map the ring again from this fd, drop the inherited map */
	size_t len;
};

/* Producer child: records id:0..n-1 in bursts of 1..64, each burst waiting
 * for space up to 10 s.  Exit 0, or 3 if the consumer stopped taking. */
static int rt_producer(void *arg)
{
	struct rt_prod *p = arg;
	struct sfs_ring *r = p->r;
	struct rec16 b[64];
	uint64_t seed = p->id * 7919 + 1, seq = 0;

	if (p->memfd >= 0) {
		void *again = mmap(NULL, p->len, PROT_READ | PROT_WRITE, MAP_SHARED, p->memfd, 0);

		if (again == MAP_FAILED || again == (void *)r)
			return 4;
		/* From here on the child sees the ring only at its own address. */
		munmap(r, p->len);
		if (sfs_ring_attach(again, p->len, &r))
			return 5;
	}
	while (seq < p->n) {
		unsigned k = 1 + (unsigned)(th_rand(&seed) % 64), i;

		if (k > p->n - seq)
			k = (unsigned)(p->n - seq);
		for (i = 0; i < k; i++)
			b[i] = rt_rec(p->id, seq + i);
		if (sfs_ring_enqueue_wait(r, b, k, 10000 * MS) != (int)k)
			return 3;
		seq += k;
	}
	return 0;
}

struct rt_result {
	uint64_t got, sum, bad_check, bad_order, bad_producer;
	int no_progress;
};

/* Consumer (the test process): take @total records from @np producers,
 * checking each record's checksum and per-producer order.  Gives up after
 * 10 s without progress. */
static struct rt_result rt_consume(struct sfs_ring *r, unsigned np, uint64_t total)
{
	struct rt_result res = { 0 };
	uint64_t next[8] = { 0 }, last = sfs_now_ns();
	struct rec16 b[128];

	while (res.got < total) {
		int k = sfs_ring_dequeue_wait(r, b, 128, 100 * MS), i;

		if (k == 0) {
			if (sfs_now_ns() - last > 10000 * MS) {
				res.no_progress = 1;
				break;
			}
			continue;
		}
		last = sfs_now_ns();
		for (i = 0; i < k; i++) {
			uint64_t id = b[i].tag >> 48, seq = b[i].tag & ((1ull << 48) - 1);

			if (b[i].check != rt_mix(b[i].tag))
				res.bad_check++;
			if (id >= np) {
				res.bad_producer++;
				continue;
			}
			if (seq != next[id])
				res.bad_order++;
			next[id] = seq + 1;
			res.sum += b[i].check;
		}
		res.got += (uint64_t)k;
	}
	return res;
}

static uint64_t rt_expected_sum(unsigned np, uint64_t per)
{
	uint64_t s = 0, id, i;

	for (id = 0; id < np; id++)
		for (i = 0; i < per; i++)
			s += rt_mix(id << 48 | i);
	return s;
}

static void rt_check_result(struct rt_result res, unsigned np, uint64_t per, const int *rcs)
{
	unsigned i;

	for (i = 0; i < np; i++)
		cr_expect_eq(rcs[i], 0, "producer %u exit %d", i, rcs[i]);
	cr_expect_eq(res.no_progress, 0, "consumer saw no progress for 10 s");
	cr_expect_eq(res.got, np * per, "got %llu of %llu", (unsigned long long)res.got,
		     (unsigned long long)(np * per));
	cr_expect_eq(res.bad_check, 0);
	cr_expect_eq(res.bad_producer, 0);
	cr_expect_eq(res.bad_order, 0, "%llu records out of order (lost or duplicated)",
		     (unsigned long long)res.bad_order);
	cr_expect_eq(res.sum, rt_expected_sum(np, per));
}

/* @np producer processes of @per records each through a ring of @count
 * slots, the test process consuming. */
static void rt_cross(unsigned flags, uint32_t count, unsigned np, uint64_t per)
{
	size_t len;
	struct sfs_ring *r = rt_ring(count, 16, flags, &len);
	struct rt_prod p[4];
	pid_t pid[4];
	int rc[4];
	unsigned i;
	struct rt_result res;

	cr_assert(np <= 4);
	for (i = 0; i < np; i++) {
		p[i] = (struct rt_prod){ r, i, per, -1, len };
		pid[i] = rt_spawn(rt_producer, &p[i]);
	}
	res = rt_consume(r, np, np * per);
	for (i = 0; i < np; i++)
		rc[i] = rt_reap(pid[i], 10000 * MS);
	rt_check_result(res, np, per, rc);
	cr_expect_eq(sfs_ring_count(r), 0);
	cr_expect_eq(sfs_ring_stalled_ns(r), 0);
}

Test(ring, spsc_10m_across_processes, .timeout = 60)
{
	rt_cross(SFS_RING_SPSC, 4096, 1, 10000000);
}

Test(ring, mpsc_3_producers, .timeout = 60)
{
	rt_cross(SFS_RING_MPSC, 1024, 3, 1000000);
}

/* Tiny rings: the full/empty edges, wrap-around and the futex sleep and
 * wake paths on every few records. */
Test(ring, spsc_tiny_ring, .timeout = 60)
{
	rt_cross(SFS_RING_SPSC, 4, 1, 200000);
}

Test(ring, mpsc_tiny_ring_4_producers, .timeout = 60)
{
	rt_cross(SFS_RING_MPSC, 8, 4, 50000);
}

/* Producer and consumer see the ring at different addresses: the creator
 * maps a memfd twice (initializes through one map, consumes through the
 * other), the child maps it a third time and drops the maps it inherited. */
static void rt_diff_addr(unsigned flags)
{
	enum { N = 1000000 };
	size_t len = sfs_ring_memsize(256, 16);
	int fd = memfd_create("sfs-test-ring", MFD_CLOEXEC), rc;
	void *a, *b;
	struct sfs_ring *r;
	struct rt_result res;
	struct rt_prod p;
	pid_t pid;

	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(a != MAP_FAILED && b != MAP_FAILED && a != b);
	cr_assert_eq(sfs_ring_init(a, 256, 16, flags), 0);
	cr_assert_eq(sfs_ring_attach(b, len, &r), 0, "%s", sfs_last_error());
	munmap(a, len);

	p = (struct rt_prod){ r, 0, N, fd, len };
	pid = rt_spawn(rt_producer, &p);
	res = rt_consume(r, 1, N);
	rc = rt_reap(pid, 10000 * MS);
	rt_check_result(res, 1, N, &rc);
	munmap(b, len);
	close(fd);
}

Test(ring, spsc_different_addresses, .timeout = 60) { rt_diff_addr(SFS_RING_SPSC); }
Test(ring, mpsc_different_addresses, .timeout = 60) { rt_diff_addr(SFS_RING_MPSC); }

/* ---- sleeping and waking ---------------------------------------------- */

/* Wait until *word is 1 (a peer announced it sleeps), for at most 5 s. */
static int rt_until_announced(int32_t *word)
{
	uint64_t end = sfs_now_ns() + 5000 * MS;

	while (sfs_load_acquire(word) != 1)
		if (sfs_now_ns() > end)
			return 0;
		else
			sfs_sleep_ns(MS);
	return 1;
}

static int rt_late_producer(void *arg)
{
	struct sfs_ring *r = arg;
	struct rec16 b[5];
	unsigned i;

	if (!rt_until_announced(&r->rg_cons_sleeping))
		return 2;
	sfs_sleep_ns(50 * MS); /* well inside futex_wait by now */
	for (i = 0; i < 5; i++)
		b[i] = rt_rec(0, i);
	return sfs_ring_enqueue_burst(r, b, 5) == 5 ? 0 : 3;
}

static void rt_wake_consumer(unsigned flags)
{
	size_t len;
	struct sfs_ring *r = rt_ring(64, 16, flags, &len);
	struct rec16 b[16];
	struct sfs_ring_stats st;
	uint64_t t0, dt;
	pid_t pid;
	int got, rc, i;

	pid = rt_spawn(rt_late_producer, r);
	t0 = sfs_now_ns();
	got = sfs_ring_dequeue_wait(r, b, 16, 10000 * MS);
	dt = sfs_now_ns() - t0;
	rc = rt_reap(pid, 5000 * MS);

	cr_expect_eq(rc, 0, "producer exit %d", rc);
	cr_expect_eq(got, 5);
	for (i = 0; i < got; i++)
		cr_expect_eq(b[i].tag, (uint64_t)i);
	cr_expect_geq(dt, 50 * MS, "returned after %llu ns: before the records existed",
		      (unsigned long long)dt);
	cr_expect_lt(dt, 5000 * MS, "woken by the enqueue, not by the 10 s timeout");
	sfs_ring_stats(r, &st);
	cr_expect_geq(st.cons_sleeps, 1);
	cr_expect_eq(st.cons_wakes, 1, "exactly one wake syscall");
	cr_expect_eq(r->rg_cons_sleeping, 0);
}

Test(ring, consumer_woken_spsc, .timeout = 30) { rt_wake_consumer(SFS_RING_SPSC); }
Test(ring, consumer_woken_mpsc, .timeout = 30) { rt_wake_consumer(SFS_RING_MPSC); }

Test(ring, dequeue_wait_times_out)
{
	size_t len;
	struct sfs_ring *r = rt_ring(64, 16, SFS_RING_SPSC, &len);
	struct rec16 b[4];
	uint64_t t0 = sfs_now_ns(), dt;

	cr_expect_eq(sfs_ring_dequeue_wait(r, b, 4, 100 * MS), 0);
	dt = sfs_now_ns() - t0;
	cr_expect_geq(dt, 100 * MS);
	cr_expect_lt(dt, 3000 * MS);
	cr_expect_eq(sfs_ring_dequeue_wait(r, b, 4, 0), 0, "timeout 0 polls");
	cr_expect_eq(r->rg_cons_sleeping, 0);
}

/* Consumer child: wait until the producer sleeps for space, then drain and
 * check 8 + 16 records. */
static int rt_late_consumer(void *arg)
{
	struct sfs_ring *r = arg;
	struct rec16 b[24];
	unsigned got = 0, i;
	uint64_t end;

	if (!rt_until_announced(&r->rg_prod_sleeping))
		return 2;
	sfs_sleep_ns(50 * MS);
	end = sfs_now_ns() + 5000 * MS;
	while (got < 24 && sfs_now_ns() < end)
		got += (unsigned)sfs_ring_dequeue_wait(r, b + got, 24 - got, 100 * MS);
	if (got != 24)
		return 3;
	for (i = 0; i < 24; i++)
		if (b[i].tag != i || b[i].check != rt_mix(i))
			return 4;
	return 0;
}

static void rt_wake_producer(unsigned flags)
{
	size_t len;
	struct sfs_ring *r = rt_ring(8, 16, flags, &len);
	struct rec16 b[24];
	uint64_t t0;
	pid_t pid;
	int n, rc, i;

	for (i = 0; i < 24; i++)
		b[i] = rt_rec(0, (uint64_t)i);
	cr_assert_eq(sfs_ring_enqueue_burst(r, b, 8), 8);
	t0 = sfs_now_ns();
	cr_expect_eq(sfs_ring_enqueue_wait(r, b + 8, 4, 50 * MS), 0, "full ring times out");
	cr_expect_geq(sfs_now_ns() - t0, 50 * MS);
	/* An MPSC producer leaves its announcement up (ring.c says why); drop
	 * it so the child waits for the next call's. */
	r->rg_prod_sleeping = 0;

	pid = rt_spawn(rt_late_consumer, r);
	n = sfs_ring_enqueue_wait(r, b + 8, 16, 10000 * MS);
	rc = rt_reap(pid, 10000 * MS);
	cr_expect_eq(n, 16);
	cr_expect_eq(rc, 0, "consumer exit %d", rc);
	cr_expect_geq(r->rg_prod_wakes, 1);
}

Test(ring, producer_woken_spsc, .timeout = 30) { rt_wake_producer(SFS_RING_SPSC); }
Test(ring, producer_woken_mpsc, .timeout = 30) { rt_wake_producer(SFS_RING_MPSC); }

/* ---- a producer dies between reserve and commit ----------------------- */

static int rt_die_reserved(void *arg)
{
	struct sfs_ring *r = arg;
	uint32_t pos;

	/* Claim two positions, publish nothing, die. */
	return sfs__ring_mpsc_reserve(r, 2, &pos) == 2 ? 0 : 2;
}

static int rt_ten(void *arg)
{
	struct sfs_ring *r = arg;
	struct rec16 b[10];
	unsigned i;

	for (i = 0; i < 10; i++)
		b[i] = rt_rec(1, i);
	return sfs_ring_enqueue_burst(r, b, 10) == 10 ? 0 : 3;
}

Test(ring, mpsc_dead_producer_detected_and_skipped, .timeout = 30)
{
	size_t len;
	struct sfs_ring *r = rt_ring(16, 16, SFS_RING_MPSC, &len);
	struct rec16 b[16];
	uint64_t t0, s1, s2;
	int rc;

	cr_expect_eq(sfs_ring_stalled_ns(r), 0, "empty is not stalled");
	rc = rt_reap(rt_spawn(rt_die_reserved, r), 5000 * MS);
	cr_assert_eq(rc, 0);
	rc = rt_reap(rt_spawn(rt_ten, r), 5000 * MS);
	cr_assert_eq(rc, 0);
	cr_expect_eq(sfs_ring_count(r), 12, "2 reserved + 10 published");

	/* The consumer is blocked behind the dead slot, but never hangs. */
	cr_expect_eq(sfs_ring_dequeue_burst(r, b, 16), 0);
	t0 = sfs_now_ns();
	cr_expect_eq(sfs_ring_dequeue_wait(r, b, 16, 30 * MS), 0);
	cr_expect_lt(sfs_now_ns() - t0, 3000 * MS);
	/* Only 4 slots left: producers see the back-pressure. */
	for (int i = 0; i < 16; i++)
		b[i] = rt_rec(2, (uint64_t)i);
	cr_expect_eq(sfs_ring_enqueue_burst(r, b, 16), 4);
	s1 = sfs_ring_stalled_ns(r);
	cr_expect_geq(s1, 1);
	sfs_sleep_ns(20 * MS);
	s2 = sfs_ring_stalled_ns(r);
	cr_expect_geq(s2, 20 * MS, "stalled for %llu ns", (unsigned long long)s2);

	/* The supervisor confirmed the death: drop the two dead slots. */
	cr_expect_eq(sfs_ring_skip_stalled(r), 0);
	cr_expect_eq(sfs_ring_dequeue_burst(r, b, 16), 0, "second dead slot still blocks");
	cr_expect_eq(sfs_ring_skip_stalled(r), 0);
	cr_expect_eq(sfs_ring_stalled_ns(r), 0);
	cr_assert_eq(sfs_ring_dequeue_burst(r, b, 16), 14);
	for (int i = 0; i < 14; i++)
		cr_expect_eq(b[i].tag, i < 10 ? rt_rec(1, (uint64_t)i).tag : rt_rec(2, (uint64_t)i - 10).tag);
	cr_expect_eq(sfs_ring_skip_stalled(r), SFS_EUSAGE, "nothing to skip");
	cr_expect_eq(sfs_ring_count(r), 0);
}

Test(ring, skip_stalled_refused_on_spsc)
{
	size_t len;
	struct sfs_ring *r = rt_ring(16, 16, SFS_RING_SPSC, &len);

	cr_expect_eq(sfs_ring_stalled_ns(r), 0);
	cr_expect_eq(sfs_ring_skip_stalled(r), SFS_EUSAGE);
}
