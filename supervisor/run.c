/*
 * run.c — `sfs run`: the supervisor of a job's process group.
 *
 * It creates one segment per NUMA node, starts the children (N workers
 * pinned one per core on their node, one compactor per node, one
 * checkpointer), restarts a child that dies (exponential backoff, a restart
 * budget per child and window), kills and restarts a child whose heartbeat
 * stops, and on SIGINT/SIGTERM (or --duration-ms) stops the group in order —
 * workers, then compactors, then the checkpointer — reaps every child and
 * removes the segments.  Children get a parent-death signal, so they stop
 * when the supervisor is killed; the next `sfs run` of the same job finds the
 * stale segments by their dead owner and removes them, with a message.
 *
 * The loop is single-threaded and signal-driven: every signal it cares about
 * is blocked and taken with sigtimedwait() at a fixed tick, so there is no
 * async-signal-safety to reason about and no zombie outlives one tick.
 */
#include <getopt.h>
#include <limits.h>
#include <numa.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/merge.h"
#include "common/procinfo.h"
#include "shm/atomic.h"
#include "shm/child.h"
#include "shm/futex.h"
#include "shm/proc.h"
#include "runtime/backend.h"
#include "store/target.h"
#include "supervisor/args.h"
#include "supervisor/metrics.h"
#include "supervisor/nodes.h"
#include "supervisor/sup.h"

#define MS 1000000ull
#define TICK_NS (20 * MS)
#define MAX_NODES 16

struct run_cfg {
	const char *job;
	unsigned workers;
	uint64_t segment_bytes;
	uint64_t heartbeat_ns;     /* children's beat period */
	uint64_t hang_ns;          /* no beat for this long: kill + restart */
	uint64_t start_ns;         /* a child must register within this */
	unsigned budget;           /* restarts allowed per child per window */
	uint64_t window_ns;
	uint64_t io_stall_ns;       /* a child that cannot write this long stops the group */
	uint64_t backoff_min_ns, backoff_max_ns;
	uint64_t duration_ns;      /* 0: until a signal */
	uint64_t stop_grace_ns;    /* SIGTERM -> SIGKILL per role */
	char bindir[PATH_MAX];
	const char *merge_lib;     /* --merge-lib: loaded here and by every child */
	struct sup_query q;        /* --query: a query job */
	unsigned max_recoveries;   /* job restarts from a checkpoint */
	int restart_only;          /* --recovery restart: never roll back in place */
	int maint_spare;           /* --maintenance-cpus spare */
	unsigned maint_threads;    /* --maintenance-threads; 0: per node, its spare cores */
	const char *metrics_addr;  /* --metrics-addr: serve /metrics there (NULL: no) */
	int host;                  /* --host: an engine's threads are the workers */
	pid_t watch_pid;           /* --watch-pid: stop when it is gone (0: none) */
	uint64_t watch_start;      /* its start time (pid reuse) */
	char job_buf[64];
	char data_buf[PATH_MAX];
};

/* Process-local view of a child; its report lives in sh_children[]. */
struct child {
	struct sfs_child_desc *d;
	unsigned role;
	uint32_t index;
	int node;
	int cpu;                    /* -1: node-wide affinity */
	pid_t pid;
	uint64_t started_ns;
	uint64_t restart_at_ns;
	unsigned consecutive;       /* deaths since it last ran a full window */
	uint64_t window_start_ns;
	unsigned window_restarts;
	int slot;                   /* cached process-table index, -1 unknown */
	int exited;                 /* an --exec worker that exited 0: its input is done */
	int hang_killed;            /* SIGKILL sent for a hang: the kill is said and
				     * counted once, not at every tend() until the
				     * kernel has torn the process down */
	unsigned held;              /* a worker held by its state backend's own
				     * back-pressure (enum rt_held), as last seen */
	uint64_t held_since_ns;     /* when this supervisor first saw it held */
	int held_said;              /* this episode was said and counted */
};

static struct run_cfg cfg;
static struct sfs_seg segs[MAX_NODES];
static int nnodes;
static struct child kids[SFS_MAX_CHILDREN];
static unsigned nkids;
static sigset_t old_mask;
static struct sup_usage used;	/* every reaped child's resources, by role */
static int usage_failed;	/* an --exec worker exited 2: the run exits 2 */

/* A host group is an --exec job whose workers are not our children: the
 * engine's threads (sfs_worker_open) in a process we do not supervise. */
static char *host_prog[] = { "host", NULL };

/* A job with checkpoints and recovery: our queries, or a user's program. */
static int is_job(void)
{
	return cfg.q.query || cfg.q.exec;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sfs run --job NAME [options]\n"
		"Runs the job as a supervised process group in the foreground until\n"
		"SIGINT/SIGTERM or --duration-ms.  Exit status: 0 at the end of the input\n"
		"or a planned stop (SIGINT, SIGTERM, SIGHUP, --duration-ms); 1 when the group\n"
		"failed (a child beyond its restart budget or a fatal exit, recoveries spent,\n"
		"I/O stalled, the output not written, the watched process gone); 2 on a\n"
		"usage error.\n"
		"\n"
		"  --job NAME             job name ([A-Za-z0-9_.-], at most %d chars)\n"
		"  --workers N            operator workers, one per core (default: cores)\n"
		"  --segment-mb MB        the least size of each node's segment (default 64);\n"
		"                         a job's is raised to what it needs: each worker's\n"
		"                         region (buffers, cache), the channels and --store-mb\n"
		"                         per worker (sparse: untouched pages cost nothing);\n"
		"                         the log says the size made\n"
		"  --heartbeat-ms MS      children's heartbeat period (default 100)\n"
		"  --hang-timeout-ms MS   kill a child silent for this long (default 3000)\n"
		"  --io-stall-timeout-ms MS  stop the group when a child has not been able\n"
		"                         to write its files (disk full, quota, I/O error) for\n"
		"                         this long (default 60000; it retries until then)\n"
		"  --restart-budget N     restarts per child per window (default 5)\n"
		"  --restart-window-ms MS the window (default 60000)\n"
		"  --maintenance-cpus spare|all  cores of the compactor and checkpointer:\n"
		"                         those no worker holds (if any), or all (default)\n"
		"  --maintenance-threads N  threads of each compactor (default: its node's\n"
		"                         cores that no worker holds, at least 1)\n"
		"  --duration-ms MS       stop the group after MS (default: run until signalled)\n"
		"  --bin-dir DIR          where sfs-worker etc. live (default: beside sfs)\n"
		"  --merge-lib PATH       shared object whose sfs_merge_init() defines user merge\n"
		"                         operators; loaded here and in every child\n"
		"  --metrics-addr [HOST:]PORT  serve the group's Prometheus metrics at\n"
		"                         http://HOST:PORT/metrics while it runs (HOST\n"
		"                         default 127.0.0.1); what sfs stat --prometheus prints\n"
		"\n"
		"A query job (the Nexmark suite; --job defaults to nexmark-QUERY):\n"
		"  --query qN             q3 q4 q5 q7 q8 q9 q11 q12 q15 q17 q18 q19 q20\n"
		"  --events N             events of the stream (default 1000000)\n"
		"  --backend NAME         table (sfs flushing to its LSM tables; default: keeps\n"
		"                         up as the state grows), memory (sfs, the in-memory\n"
		"                         baseline: the state must fit --store-mb), rocksdb\n"
		"                         (sfs flushing to RocksDB) or rocksdb-direct (baseline)\n"
		"  --checkpoint-interval MS  barrier period (default 1000; 0: none)\n"
		"  --data DIR             files of the job (default /tmp/sfs-JOB)\n"
		"  --output FILE          the result as CSV (default: discarded)\n"
		"  --rate N               event-time rate, events/s (default 10000000)\n"
		"  --max-rate N           throttle the sources to N events/s of wall-clock\n"
		"                         time in total (default: as fast as they go)\n"
		"  --cache-mb MB          value cache per worker (sfs backends; default 8)\n"
		"  --buffer-mb MB         each of a worker's 4 write buffers (sfs backends;\n"
		"                         default 16): a full one is flushed between barriers\n"
		"  --rocksdb-memory-mb MB rocksdb-direct: a worker's managed memory, as Flink\n"
		"                         gives a slot (default 2847, the published runs'\n"
		"                         8 GiB TaskManager of one slot): a shared block cache\n"
		"                         of 5/6 of it and a write buffer manager of 1/3\n"
		"                         charged to it (Flink's write-buffer-ratio 0.5)\n"
		"  --table-keys raw|compressed  table backend: key pages stored raw (the\n"
		"                         default: a probe reads keys in place) or compressed\n"
		"                         like value pages (smaller files and checkpoints for\n"
		"                         long, padded keys, as Flink's serialized rows)\n"
		"  --state-ttl MS         the queries' state expires MS ms of processing time\n"
		"                         after its last write (Flink's table.exec.state.ttl;\n"
		"                         sfs backends; timers never expire)\n"
		"  --store-mb MB          memory backend: its store per worker, sparse (default\n"
		"                         4096; half is usable: it compacts by copying); a run\n"
		"                         whose state outgrows it stops (exit 1) saying so\n"
		"  --json                 print one summary object, no progress\n"
		"  --restore latest|DIR   start from the newest valid checkpoint in --data\n"
		"                         (latest) or from a checkpoint directory (chk-N or a\n"
		"                         savepoint)\n"
		"  --retain N             checkpoints kept (default 3)\n"
		"  --max-recoveries N     a failed worker restarts the job from its last\n"
		"                         checkpoint at most N times (default 10)\n"
		"  --recovery in-place|restart  after a worker's death, roll the group back\n"
		"                         to its last checkpoint in shared memory and the\n"
		"                         live stores, restarting only the workers (in-place,\n"
		"                         the default; a restart when it cannot, saying why),\n"
		"                         or restart the whole group from the checkpoint's\n"
		"                         files (restart)\n"
		"\n"
		"A user's program as the workers (options as for a query job: --backend\n"
		"table|rocksdb|memory, --checkpoint-interval, --data, --restore, --retain,\n"
		"--max-recoveries, --workers, --cache-mb, --buffer-mb, --store-mb):\n"
		"  --exec PROGRAM [ARGS...]  the rest of the line: N copies of PROGRAM run as\n"
		"                         the workers, with SFS_JOB, SFS_WORKER (0..N-1),\n"
		"                         SFS_WORKERS, SFS_NODE and SFS_DATA in their\n"
		"                         environment (README, \"Your program as the workers\");\n"
		"                         exit 0: its input is done; exit 2: a usage error\n"
		"                         that fails the run (exit 2); any other death\n"
		"                         restarts the job from its last checkpoint\n"
		"\n"
		"A host group for an engine that opens workers itself (Flink's TaskManager:\n"
		"flink/README.md); options --backend, --data, --workers (its worker slots),\n"
		"--buffer-mb, --cache-mb, --segment-mb, --table-keys as above:\n"
		"  --host                 start the compactor and checkpointer only; the\n"
		"                         engine opens worker slots 0..N-1 (sfs_worker_open),\n"
		"                         seals its own barriers and reads each one's staged\n"
		"                         files (sfs_worker_staged); sfs requests no checkpoint\n"
		"  --watch-pid PID        stop the group, removing its segments, once PID\n"
		"                         (the engine's process) is gone\n",
		SFS_JOB_NAME_MAX);
}

/* ---- children ---------------------------------------------------------- */

static const char *role_binary(unsigned role)
{
	switch (role) {
	case SFS_ROLE_WORKER: return "sfs-worker";
	case SFS_ROLE_COMPACTOR: return "sfs-compactor";
	default: return "sfs-checkpointer";
	}
}

/*
 * Where a child runs.  A worker: its own core.  The maintenance processes
 * (compactor, checkpointer and the threads they start): SCHED_BATCH, so
 * that a wakeup never preempts the running task (same CPU share, not niced:
 * compaction at nice 19 starved behind a busy worker, issue 5) — a worker
 * rings the compactor's bell inside its barrier, and the woken compactor,
 * placed beside its waker, took the worker's core right there.  Their cores:
 * the node's, or with --maintenance-cpus spare the node's cores that no
 * worker holds (all of them when workers hold every core).  Spare cores
 * isolate the workers fully — the barrier's wall time then equals its CPU
 * time at any state size — but give maintenance fewer cores: the choice of
 * the deployment (q18 at 4M events, 200 ms checkpoints, 2 cores, 1 worker:
 * rocksdb target's barrier wall time 56–81 ms default policy, 17–45 ms
 * batch, 0.6 ms spare; the table target, whose compactor merges in the
 * background, loses a third of its throughput on one spare core;
 * bench/RESULTS.md, issue 6).
 */
static void place(const struct child *k)
{
	int maint = k->role != SFS_ROLE_WORKER;
	cpu_set_t set, left;

	CPU_ZERO(&set);
	if (k->cpu >= 0) {
		CPU_SET(k->cpu, &set);
	} else if (numa_available() >= 0) {
		struct bitmask *bm = numa_allocate_cpumask();

		if (numa_node_to_cpus(k->node, bm) == 0)
			for (unsigned i = 0; i < bm->size && i < CPU_SETSIZE; i++)
				if (numa_bitmask_isbitset(bm, i))
					CPU_SET(i, &set);
		numa_free_cpumask(bm);
	} else if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		CPU_ZERO(&set);
	}
	if (maint) {
		struct sched_param sp = { .sched_priority = 0 };

		(void)sched_setscheduler(0, SCHED_BATCH, &sp);
	}
	if (maint && cfg.maint_spare) {
		left = set;
		for (unsigned i = 0; i < nkids; i++)
			if (kids[i].role == SFS_ROLE_WORKER && kids[i].cpu >= 0)
				CPU_CLR(kids[i].cpu, &left);
		if (CPU_COUNT(&left))
			set = left;
	}
	if (CPU_COUNT(&set))
		(void)sched_setaffinity(0, sizeof(set), &set);
}

/*
 * A compactor's maintenance threads (compactor/flush.h): --maintenance-threads,
 * else the cores of its node that no worker is pinned to — the cores the
 * compactor can run on without taking a worker's — at least 1.  Results
 * are the same for any count.
 */
static int node_cpu(int node, unsigned i);

static unsigned maint_threads(int node)
{
	cpu_set_t node_set, held;
	unsigned spare = 0;
	int cpu;

	if (cfg.maint_threads)
		return cfg.maint_threads;
	CPU_ZERO(&node_set);
	CPU_ZERO(&held);
	for (unsigned i = 0; (cpu = node_cpu(node, i)) >= 0 && cpu < CPU_SETSIZE &&
			     !CPU_ISSET(cpu, &node_set); i++)
		CPU_SET(cpu, &node_set);	/* node_cpu wraps: stop at the first repeat */
	for (unsigned i = 0; i < nkids; i++)
		if (kids[i].role == SFS_ROLE_WORKER && kids[i].node == node && kids[i].cpu >= 0 &&
		    kids[i].cpu < CPU_SETSIZE)
			CPU_SET(kids[i].cpu, &held);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &node_set) && !CPU_ISSET(cpu, &held))
			spare++;
	return spare ? spare : 1;
}

static int spawn(struct child *k)
{
	char path[PATH_MAX + 32], idx[16], node[16], beat[16];
	pid_t sup = getpid(), pid;

	snprintf(path, sizeof(path), "%s/%s", cfg.bindir, role_binary(k->role));
	snprintf(idx, sizeof(idx), "%u", k->index);
	snprintf(node, sizeof(node), "%d", k->node);
	snprintf(beat, sizeof(beat), "%llu", (unsigned long long)(cfg.heartbeat_ns / MS));
	pid = fork();
	if (pid < 0) {
		sfs_log("fork %s: %s", path, strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		char *argv[] = { path, "--job", (char *)cfg.job, "--index", idx, "--node", node,
				 "--heartbeat-ms", beat,
				 cfg.merge_lib ? "--merge-lib" : NULL, (char *)cfg.merge_lib, NULL };

		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		/* Die with the supervisor; close the race with its death
		 * before prctl() took effect. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != sup)
			_exit(1);
		place(k);
		if (k->role == SFS_ROLE_COMPACTOR) {
			char nt[16];

			snprintf(nt, sizeof(nt), "%u", maint_threads(k->node));
			setenv("SFS_MAINT_THREADS", nt, 1);
		}
		if (cfg.q.exec && k->role == SFS_ROLE_WORKER) {
			char w[16], n[16];

			snprintf(w, sizeof(w), "%u", cfg.workers);
			snprintf(n, sizeof(n), "%d", k->node);
			setenv("SFS_JOB", cfg.job, 1);
			setenv("SFS_WORKER", idx, 1);
			setenv("SFS_WORKERS", w, 1);
			setenv("SFS_NODE", n, 1);
			setenv("SFS_DATA", cfg.q.data_dir, 1);
			execvp(cfg.q.exec[0], cfg.q.exec);
			fprintf(stderr, "sfs: exec %s: %s\n", cfg.q.exec[0], strerror(errno));
			_exit(2);
		}
		execv(path, argv);
		fprintf(stderr, "sfs: exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	k->pid = pid;
	k->slot = -1;
	k->started_ns = sfs_now_ns();
	k->hang_killed = 0;
	k->held = RT_HELD_NONE;
	k->held_said = 0;
	sfs_store_relaxed(&k->d->cd_pid, pid);
	sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_STARTING);
	k->d->cd_started_ns = k->started_ns;
	return 0;
}

static struct child *child_by_pid(pid_t pid)
{
	for (unsigned i = 0; i < nkids; i++)
		if (kids[i].pid == pid)
			return &kids[i];
	return NULL;
}

/* The child's process-table slot, once it has registered. */
static struct sfs_proc_slot *child_slot(struct child *k)
{
	struct sfs_seg *s = &segs[k->node];

	if (k->slot >= 0) {
		struct sfs_proc_slot *sl = &s->hdr->sh_procs[k->slot];

		if (sl->ps_pid == k->pid &&
		    SFS_SLOT_STATE(sfs_load_acquire(&sl->ps_claim)) == SFS_SLOT_LIVE)
			return sl;
		k->slot = -1;
	}
	for (int i = 0; i < SFS_MAX_PROCS; i++) {
		struct sfs_proc_slot *sl = &s->hdr->sh_procs[i];

		if (SFS_SLOT_STATE(sfs_load_acquire(&sl->ps_claim)) == SFS_SLOT_LIVE &&
		    sl->ps_pid == k->pid) {
			k->slot = i;
			return sl;
		}
	}
	return NULL;
}

/* The freshest heartbeat among @k's slots: a worker holds two (its
 * child skeleton's and its state context's), and beats the one of the wait
 * it is in — a barrier stalled on the compactor beats the context's. */
static uint64_t child_beat(struct child *k, const struct sfs_proc_slot *first)
{
	struct sfs_seg *s = &segs[k->node];
	uint64_t beat = sfs_load_relaxed(&first->ps_heartbeat);

	if (k->role != SFS_ROLE_WORKER)
		return beat;
	for (int i = k->slot + 1; i < SFS_MAX_PROCS; i++) {
		struct sfs_proc_slot *sl = &s->hdr->sh_procs[i];

		if (SFS_SLOT_STATE(sfs_load_acquire(&sl->ps_claim)) == SFS_SLOT_LIVE &&
		    sl->ps_pid == k->pid && sfs_load_relaxed(&sl->ps_heartbeat) > beat)
			beat = sfs_load_relaxed(&sl->ps_heartbeat);
	}
	return beat;
}

static uint64_t backoff(unsigned consecutive)
{
	uint64_t b = cfg.backoff_min_ns;

	for (unsigned i = 1; i < consecutive && b < cfg.backoff_max_ns; i++)
		b *= 2;
	return b < cfg.backoff_max_ns ? b : cfg.backoff_max_ns;
}

static void describe_status(int status, char *buf, size_t n)
{
	if (WIFEXITED(status))
		snprintf(buf, n, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, n, "status 0x%x", status);
}

/* A child died while the group runs: schedule its restart, or fail (-1),
 * or (-2) restart the whole query job from its last checkpoint: a worker's
 * in-flight records and exchange channels cannot be rolled back alone. */
static int on_child_death(struct child *k, int status, uint64_t now)
{
	char why[64];

	describe_status(status, why, sizeof(why));
	k->pid = 0;
	k->slot = -1;
	sfs_store_relaxed(&k->d->cd_pid, 0);
	k->d->cd_last_status = status;
	if (cfg.q.exec && k->role == SFS_ROLE_WORKER && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0) {
		char lost[160];

		if (sup_query_worker_unfinished(k->index, lost, sizeof(lost)))
			sfs_log("worker %u: %s exited 0 without sfs_task_finish after writing "
				"state (%s): what it wrote since is in no checkpoint", k->index,
				cfg.q.exec[0], lost);
		else
			sfs_log("worker %u: end of input (exit 0)", k->index);
		k->exited = 1;
		sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_STOPPED);
		return 0;
	}
	if (cfg.q.exec && k->role == SFS_ROLE_WORKER && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 2) {
		sfs_log("worker %u: %s exited 2 (a usage error): failing the run", k->index,
			cfg.q.exec[0]);
		sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_FAILED);
		usage_failed = 1;
		return -1;
	}
	if (is_job() && k->role == SFS_ROLE_WORKER) {
		sfs_log("worker %u died (%s): the job restarts from its last checkpoint if "
			"--max-recoveries allows", k->index, why);
		sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_FAILED);
		return -2;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == SFS_CHILD_EXIT_FATAL) {
		sfs_log("%s %u stopped on a failure no restart repairs (its log says which): "
			"failing the group", sfs_role_name(k->role), k->index);
		sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_FAILED);
		return -1;
	}
	if (now - k->window_start_ns > cfg.window_ns) {
		k->window_start_ns = now;
		k->window_restarts = 0;
	}
	if (now - k->started_ns > cfg.window_ns)
		k->consecutive = 0;
	if (k->window_restarts >= cfg.budget) {
		sfs_log("%s %u died (%s): restart budget of %u per %llu ms spent, failing the group",
			sfs_role_name(k->role), k->index, why, cfg.budget,
			(unsigned long long)(cfg.window_ns / MS));
		sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_FAILED);
		return -1;
	}
	k->window_restarts++;
	k->consecutive++;
	k->restart_at_ns = now + backoff(k->consecutive);
	sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_BACKOFF);
	sfs_log("%s %u died (%s): restart %u in %llu ms", sfs_role_name(k->role), k->index, why,
		k->d->cd_restarts + 1,
		(unsigned long long)((k->restart_at_ns - now) / MS));
	return 0;
}

/* Add a reaped child's rusage to its role's totals.  wait4() is the only
 * place a child's CPU time, write_bytes and peak RSS can still be read once
 * it is gone (and it costs nothing more than the waitpid() it replaces);
 * it covers every thread the child ran, so RocksDB's and the table
 * target's background threads count for the compactor that started them.
 * ru_maxrss includes the segment's pages the child touched: shared, so
 * roles' peaks do not add up. */
static void account(const struct child *k, const struct rusage *ru)
{
	struct sup_role_usage *u = &used.role[k->role < SFS_ROLE_MAX ? k->role : SFS_ROLE_NONE];

	u->cpu_ns += (uint64_t)ru->ru_utime.tv_sec * 1000000000ull +
		     (uint64_t)ru->ru_utime.tv_usec * 1000ull +
		     (uint64_t)ru->ru_stime.tv_sec * 1000000000ull +
		     (uint64_t)ru->ru_stime.tv_usec * 1000ull;
	u->write_bytes += (uint64_t)ru->ru_oublock * 512;
	if ((uint64_t)ru->ru_maxrss > u->max_rss_kb)
		u->max_rss_kb = (uint64_t)ru->ru_maxrss;
	u->processes++;
}

/* The segments' pages ever touched (tmpfs and hugetlbfs allocate a page at
 * its first touch and no part of a segment is punched out, so st_blocks at
 * the end is the run's high-water mark) and the bytes carved into regions. */
static void account_segments(void)
{
	struct stat st;

	used.shm_bytes = used.shm_reserved = 0;
	for (int n = 0; n < nnodes; n++) {
		if (!segs[n].hdr)
			continue;
		if (fstat(segs[n].fd, &st) == 0)
			used.shm_bytes += (uint64_t)st.st_blocks * 512;
		used.shm_reserved += sfs_seg_used(&segs[n]);
	}
}

/* Reap every exited child without blocking; returns -1 when one exhausted
 * its budget, -2 when a query job must recover (only while @running). */
static int reap(int running)
{
	uint64_t now = sfs_now_ns();
	struct rusage ru;
	int status, rc = 0;
	pid_t pid;

	while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
		struct child *k = child_by_pid(pid);

		if (!k)
			continue;	/* not ours (cannot happen: we fork only kids) */
		account(k, &ru);
		if (!running) {
			k->pid = 0;
			sfs_store_relaxed(&k->d->cd_pid, 0);
			k->d->cd_last_status = status;
			sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_STOPPED);
			continue;
		}
		switch (on_child_death(k, status, now)) {
		case -1: rc = -1; break;
		case -2: if (!rc) rc = -2; break;
		}
	}
	return rc;
}

/*
 * Is worker @k held by its state backend's own back-pressure (a RocksDB
 * write stall or stop, sfs's buffers waiting for the compactor)?  Tracks
 * the episode in @k (since when, said or not) and ends it into the run's
 * totals.  Such a worker is waiting for maintenance to catch up, not hung:
 * tend() spares it and says which it saw.  O(1).
 */
static unsigned held_by_backend(struct child *k, uint64_t now)
{
	unsigned why = is_job() && !cfg.q.exec && k->role == SFS_ROLE_WORKER ?
		       sup_query_held(k->index) : RT_HELD_NONE;

	if (why != RT_HELD_NONE && k->held == RT_HELD_NONE)
		k->held_since_ns = now;
	if (why == RT_HELD_NONE && k->held != RT_HELD_NONE) {
		if (k->held_said) {
			used.held_ns += now - k->held_since_ns;
			sfs_log("%s %u (pid %d): no longer held by its state backend (%s) after "
				"%llu ms", sfs_role_name(k->role), k->index, (int)k->pid,
				rt_held_name(k->held),
				(unsigned long long)((now - k->held_since_ns) / MS));
		}
		k->held_said = 0;
	}
	k->held = why;
	return why;
}

/* Restarts that are due; kills of children whose heartbeat stopped —
 * unless their state backend's back-pressure holds them (said once per
 * episode, counted in the summary's backend_held). */
static void tend(uint64_t now)
{
	for (unsigned i = 0; i < nkids; i++) {
		struct child *k = &kids[i];
		struct sfs_proc_slot *sl;
		int user;

		if (k->pid == 0) {
			if (k->d->cd_state == SFS_CHILD_BACKOFF && now >= k->restart_at_ns &&
			    spawn(k) == 0)
				k->d->cd_restarts++;
			continue;
		}
		if (k->hang_killed)
			continue;	/* reaped when it is gone */
		/* A user's program beats when it seals a checkpoint, and may
		 * wait or work without calling into sfs: its hangs are its own
		 * (no kill; sfs stat shows its state and last beat). */
		user = cfg.q.exec && k->role == SFS_ROLE_WORKER;
		sl = child_slot(k);
		if (sl) {
			uint64_t beat = child_beat(k, sl);
			unsigned held = held_by_backend(k, now);
			int silent = !user && now > beat && now - beat > cfg.hang_ns;

			if (k->d->cd_state == SFS_CHILD_STARTING)
				sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_RUNNING);
			/* sfs's wait for a free buffer beats (worker/state.c):
			 * silent in it, the worker is stopped or hung, not held. */
			if (held == RT_HELD_BUFFERS && silent)
				held = RT_HELD_NONE;
			/* Held: said once when it outlasts the hang timeout or
			 * silences the worker that long (sfs's own wait still
			 * beats; a RocksDB stall cannot), never killed. */
			if (held != RT_HELD_NONE && !k->held_said &&
			    (silent || now - k->held_since_ns > cfg.hang_ns)) {
				sfs_log("%s %u (pid %d): %s %llu ms: held by its state backend's "
					"back-pressure (%s) for %llu ms, not hung: not killing it",
					sfs_role_name(k->role), k->index, (int)k->pid,
					silent ? "no heartbeat for" : "heartbeat",
					(unsigned long long)(now > beat ? (now - beat) / MS : 0),
					rt_held_name(held),
					(unsigned long long)((now - k->held_since_ns) / MS));
				k->held_said = 1;
				used.held_episodes++;
				used.held_why = rt_held_name(held);
			}
			if (silent && held == RT_HELD_NONE) {
				sfs_log("%s %u (pid %d): no heartbeat for %llu ms and not held by "
					"its state backend: hung, killing it",
					sfs_role_name(k->role), k->index, (int)k->pid,
					(unsigned long long)((now - beat) / MS));
				k->d->cd_hang_kills++;
				used.hang_kills++;
				k->hang_killed = 1;
				kill(k->pid, SIGKILL);
			}
		} else if (!user && now - k->started_ns > cfg.start_ns) {
			sfs_log("%s %u (pid %d): not registered after %llu ms, killing it",
				sfs_role_name(k->role), k->index, (int)k->pid,
				(unsigned long long)((now - k->started_ns) / MS));
			k->d->cd_hang_kills++;
			used.hang_kills++;
			k->hang_killed = 1;
			kill(k->pid, SIGKILL);
		}
	}
}

/*
 * A child that has not been able to write its files for --io-stall-timeout-ms
 * (its slot's I/O-trouble word, shm/proc.h: a full disk, a quota, an I/O
 * error; it retries and back-pressures meanwhile): 1 after the one line
 * that says so — which child, since when, the error; the child's own log
 * named the file when the trouble began — and the group stops (exit 1),
 * its last completed checkpoint intact.  Else 0.  O(children).
 */
static int io_stalled(uint64_t now)
{
	/* Every live slot, not only the children's own: a worker's state and
	 * checkpoint calls report through its keyed-state context's slot. */
	for (int n = 0; n < nnodes; n++)
		for (unsigned i = 0; segs[n].hdr && i < SFS_MAX_PROCS; i++) {
			struct sfs_proc_slot *sl = &segs[n].hdr->sh_procs[i];
			uint64_t io, since_ms;

			if (SFS_SLOT_STATE(sfs_load_acquire(&sl->ps_claim)) != SFS_SLOT_LIVE)
				continue;
			io = sfs_load_relaxed(&sl->ps_io);
			since_ms = io >> 16;
			if (!io || now / MS < since_ms || now / MS - since_ms < cfg.io_stall_ns / MS ||
			    !sfs_proc_alive(sl->ps_pid, sl->ps_start))
				continue;	/* a dead process's word is no trouble of now */
			sfs_log("job %s: %s %u (pid %d) cannot write for %llu s (%s; its log above "
				"names the file): stopping; checkpoint %llu stays the last complete one",
				cfg.job, sfs_role_name(sl->ps_role), sl->ps_index, (int)sl->ps_pid,
				(unsigned long long)((now / MS - since_ms) / 1000),
				strerror((int)(io & 0xffff)),
				(unsigned long long)(is_job() ? sup_query_last_checkpoint() : 0));
			return 1;
		}
	return 0;
}

/* Stop one role: SIGTERM, wait up to the grace period, then SIGKILL; every
 * child of the role is reaped before this returns. */
static void stop_role(unsigned role)
{
	uint64_t deadline = sfs_now_ns() + cfg.stop_grace_ns;
	int left;

	for (unsigned i = 0; i < nkids; i++)
		if (kids[i].role == role && kids[i].pid > 0) {
			sfs_store_relaxed(&kids[i].d->cd_state, SFS_CHILD_STOPPING);
			kill(kids[i].pid, SIGTERM);
			kill(kids[i].pid, SIGCONT);	/* a stopped child must see it */
		}
	for (;;) {
		reap(0);
		left = 0;
		for (unsigned i = 0; i < nkids; i++)
			if (kids[i].role == role && kids[i].pid > 0)
				left++;
		if (!left)
			return;
		if (sfs_now_ns() > deadline) {
			for (unsigned i = 0; i < nkids; i++)
				if (kids[i].role == role && kids[i].pid > 0) {
					sfs_log("%s %u (pid %d) ignored SIGTERM, killing it",
						sfs_role_name(role), kids[i].index, (int)kids[i].pid);
					kill(kids[i].pid, SIGKILL);
				}
			while (left) {
				struct child *k;
				struct rusage ru;
				int status;
				pid_t pid = wait4(-1, &status, 0, &ru);

				if (pid < 0)
					return;
				k = child_by_pid(pid);
				if (k && k->role == role)
					left--;
				if (k) {
					account(k, &ru);
					k->pid = 0;
					sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_STOPPED);
				}
			}
			return;
		}
		sfs_sleep_ns(5 * MS);
	}
}

/* ---- segments ---------------------------------------------------------- */

/* Kill what a dead supervisor left running in a stale segment's table:
 * parent-death signals normally got there first. */
static void kill_leftovers(const char *job, int node)
{
	struct sfs_seg s;

	if (sfs_seg_attach(job, node, &s))
		return;
	for (int i = 0; i < SFS_MAX_PROCS; i++) {
		struct sfs_proc_slot *sl = &s.hdr->sh_procs[i];

		if (sl->ps_role != SFS_ROLE_CLIENT && sl->ps_pid != getpid() &&
		    sfs_proc_slot_alive(sl)) {
			sfs_log("killing leftover %s pid %d of the dead group",
				sfs_role_name(sl->ps_role), (int)sl->ps_pid);
			kill(sl->ps_pid, SIGKILL);
		}
	}
	sfs_seg_detach(&s);
}

static int recover_stale(uint64_t *generation)
{
	for (int n = 0; n < nnodes; n++) {
		uint64_t gen = 0;
		pid_t owner = 0;
		int rc = sfs_seg_check_stale(cfg.job, n, &gen, &owner);

		if (rc == 0)
			continue;
		if (rc != SFS_ESTALE) {
			if (rc == SFS_ERUNNING) {
				fprintf(stderr, "sfs: job %s is already running\n", cfg.job);
				return rc;
			}
			sfs_log("cannot start job %s: %s", cfg.job, sfs_last_error());
			return rc;
		}
		sfs_log("found a stale segment of job %s on node %d (dead supervisor pid %d, "
			"generation %llu): cleaning it up",
			cfg.job, n, (int)owner, (unsigned long long)gen);
		kill_leftovers(cfg.job, n);
		rc = sfs_seg_destroy(cfg.job, n);
		if (rc) {
			sfs_log("%s", sfs_last_error());
			return rc;
		}
		if (gen + 1 > *generation)
			*generation = gen + 1;
	}
	return 0;
}

static void destroy_segments(void)
{
	for (int n = 0; n < nnodes; n++) {
		if (segs[n].hdr) {
			sfs_seg_detach(&segs[n]);
			sfs_seg_destroy(cfg.job, n);
		}
	}
}

/* ---- the group ----------------------------------------------------------- */

static struct child *add_child(unsigned role, uint32_t index, int node, int cpu)
{
	struct child *k = &kids[nkids];

	k->d = &segs[0].hdr->sh_children[nkids];
	k->role = role;
	k->index = index;
	k->node = node;
	k->cpu = cpu;
	k->slot = -1;
	k->window_start_ns = sfs_now_ns();
	k->d->cd_role = role;
	k->d->cd_index = index;
	k->d->cd_cpu = cpu;
	nkids++;
	sfs_store_relaxed(&segs[0].hdr->sh_nchildren, nkids);
	return k;
}

/* The i-th cpu of @node, wrapping when there are more workers than cores. */
static int node_cpu(int node, unsigned i)
{
	struct bitmask *bm;
	int found = -1, count = 0;

	if (numa_available() < 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		return (int)(i % (unsigned)(n > 0 ? n : 1));
	}
	bm = numa_allocate_cpumask();
	if (numa_node_to_cpus(node, bm) == 0) {
		for (unsigned c = 0; c < bm->size; c++)
			if (numa_bitmask_isbitset(bm, c))
				count++;
		if (count) {
			unsigned want = i % (unsigned)count, seen = 0;

			for (unsigned c = 0; c < bm->size; c++)
				if (numa_bitmask_isbitset(bm, c) && seen++ == want) {
					found = (int)c;
					break;
				}
		}
	}
	numa_free_cpumask(bm);
	return found;
}

static void plan_children(void)
{
	/* Workers in contiguous blocks per node, so a node's workers own a
	 * contiguous key-group range; one per core of that node. */
	for (unsigned w = 0; !cfg.host && w < cfg.workers; w++) {
		int node = (int)((uint64_t)w * (unsigned)nnodes / cfg.workers);
		unsigned first = (unsigned)(((uint64_t)node * cfg.workers + (unsigned)nnodes - 1) /
					    (unsigned)nnodes);

		add_child(SFS_ROLE_WORKER, w, node, node_cpu(node, w - first));
	}
	for (int n = 0; n < nnodes; n++)
		add_child(SFS_ROLE_COMPACTOR, (uint32_t)n, n, -1);
	add_child(SFS_ROLE_CHECKPOINTER, 0, 0, -1);
}

static void report(FILE *f)
{
	fprintf(f, "sfs: job %s: %u children over %d node(s)\n", cfg.job, nkids, nnodes);
	fprintf(f, "  %-12s %5s %8s %8s %10s\n", "role", "index", "restarts", "hangs", "last");
	for (unsigned i = 0; i < nkids; i++) {
		char why[64] = "-";

		if (kids[i].d->cd_restarts || kids[i].d->cd_state == SFS_CHILD_STOPPED)
			describe_status(kids[i].d->cd_last_status, why, sizeof(why));
		fprintf(f, "  %-12s %5u %8u %8u %10s\n", sfs_role_name(kids[i].role),
			kids[i].index, kids[i].d->cd_restarts, kids[i].d->cd_hang_kills, why);
	}
}

/* 1 if @path is a regular file this process may execute (execvp's test: a
 * directory has X_OK too, and execve then fails with EACCES). */
static int runnable(const char *path)
{
	struct stat st;

	return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The program --exec names: a path, or a name found on $PATH as execvp
 * finds it; refused (one line naming the path and the problem) when
 * missing, a directory or not executable. */
static int exec_check(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];
	struct stat st;

	if (strchr(prog, '/')) {
		if (runnable(prog))
			return 0;
		fprintf(stderr, "sfs run: --exec %s: %s\n", prog,
			stat(prog, &st) ? strerror(errno) :
			S_ISDIR(st.st_mode) ? "is a directory, not a program" :
			!S_ISREG(st.st_mode) ? "not a regular file" : "not executable");
		return 2;
	}
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? p : ".", prog);
		if (runnable(buf))
			return 0;
		p += n + (p[n] == ':');
	}
	fprintf(stderr, "sfs run: --exec %s: no such program on PATH\n", prog);
	return 2;
}

static int parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "workers", required_argument, NULL, 'w' },
		{ "segment-mb", required_argument, NULL, 's' },
		{ "heartbeat-ms", required_argument, NULL, 'b' },
		{ "hang-timeout-ms", required_argument, NULL, 't' },
		{ "io-stall-timeout-ms", required_argument, NULL, 'I' },
		{ "restart-budget", required_argument, NULL, 'r' },
		{ "restart-window-ms", required_argument, NULL, 'W' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "bin-dir", required_argument, NULL, 'B' },
		{ "query", required_argument, NULL, 'Q' },
		{ "events", required_argument, NULL, 'E' },
		{ "backend", required_argument, NULL, 'K' },
		{ "checkpoint-interval", required_argument, NULL, 'C' },
		{ "data", required_argument, NULL, 'D' },
		{ "output", required_argument, NULL, 'O' },
		{ "rate", required_argument, NULL, 'R' },
		{ "max-rate", required_argument, NULL, 'P' },
		{ "store-mb", required_argument, NULL, 'S' },
		{ "cache-mb", required_argument, NULL, 'c' },
		{ "buffer-mb", required_argument, NULL, 'F' },
		{ "state-ttl", required_argument, NULL, 'Y' },
		{ "rocksdb-memory-mb", required_argument, NULL, 'G' },
		{ "table-keys", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'J' },
		{ "restore", required_argument, NULL, 'X' },
		{ "retain", required_argument, NULL, 'T' },
		{ "max-recoveries", required_argument, NULL, 'M' },
		{ "recovery", required_argument, NULL, 'V' },
		{ "maintenance-cpus", required_argument, NULL, 'U' },
		{ "maintenance-threads", required_argument, NULL, 'N' },
		{ "merge-lib", required_argument, NULL, 'L' },
		{ "metrics-addr", required_argument, NULL, 'A' },
		{ "host", no_argument, NULL, 'H' },
		{ "watch-pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int o;

	memset(&cfg, 0, sizeof(cfg));
	cfg.workers = ncpu > 0 ? (unsigned)ncpu : 1;
	cfg.segment_bytes = 64ull << 20;
	cfg.heartbeat_ns = 100 * MS;
	cfg.hang_ns = 3000 * MS;
	cfg.budget = 5;
	cfg.max_recoveries = 10;
	cfg.window_ns = 60000 * MS;
	cfg.io_stall_ns = 60000 * MS;
	cfg.backoff_min_ns = 100 * MS;
	cfg.backoff_max_ns = 5000 * MS;
	cfg.stop_grace_ns = 5000 * MS;
	cfg.q.backend = "table";	/* keeps up as state grows; memory must fit --store-mb */
	cfg.q.events = 1000000;
	cfg.q.rate = 1e7;
	cfg.q.block_events = 1000;
	cfg.q.checkpoint_ns = 1000 * MS;
	cfg.q.store_bytes = 4096ull << 20;
	/* --exec takes the rest of the line as the program and its arguments:
	 * cut it off before getopt (which would permute them). */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--exec")) {
			if (i + 1 == argc) {
				fprintf(stderr, "sfs run: --exec needs a program\n");
				return 2;
			}
			cfg.q.exec = argv + i + 1;
			argv[i] = NULL;
			argc = i;
			if (exec_check(cfg.q.exec[0]))
				return 2;
			break;
		}
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'j': cfg.job = optarg; break;
		case 'w': cfg.workers = (unsigned)sfs_arg_num("run", "--workers", optarg, 1, 48); break;
		case 's':
			cfg.segment_bytes = (uint64_t)sfs_arg_num("run", "--segment-mb", optarg, 1,
								  1 << 20) << 20;
			break;
		case 'b':
			cfg.heartbeat_ns = (uint64_t)sfs_arg_num("run", "--heartbeat-ms", optarg, 1,
								 60000) * MS;
			break;
		case 'I':
			cfg.io_stall_ns = (uint64_t)sfs_arg_num("run", "--io-stall-timeout-ms", optarg,
								100, (long)1 << 40) * MS;
			break;
		case 't':
			cfg.hang_ns = (uint64_t)sfs_arg_num("run", "--hang-timeout-ms", optarg, 10,
							    3600000) * MS;
			break;
		case 'r':
			cfg.budget = (unsigned)sfs_arg_num("run", "--restart-budget", optarg, 0, 1000000);
			break;
		case 'W':
			cfg.window_ns = (uint64_t)sfs_arg_num("run", "--restart-window-ms", optarg, 1,
							      INT32_MAX) * MS;
			break;
		case 'd':
			cfg.duration_ns = (uint64_t)sfs_arg_num("run", "--duration-ms", optarg, 1,
								INT32_MAX) * MS;
			break;
		case 'B': snprintf(cfg.bindir, sizeof(cfg.bindir), "%s", optarg); break;
		case 'Q': cfg.q.query = optarg; break;
		case 'E':
			cfg.q.events = (uint64_t)sfs_arg_num("run", "--events", optarg, 1,
							     (long)1 << 50);
			break;
		case 'K': cfg.q.backend = optarg; break;
		case 'C':
			cfg.q.checkpoint_ns = (uint64_t)sfs_arg_num("run", "--checkpoint-interval",
								    optarg, 0, INT32_MAX) * MS;
			break;
		case 'D': cfg.q.data_dir = optarg; break;
		case 'O': cfg.q.output = optarg; break;
		case 'P':
			cfg.q.max_rate = (double)sfs_arg_num("run", "--max-rate", optarg, 1, (long)1 << 40);
			break;
		case 'R':
			cfg.q.rate = (double)sfs_arg_num("run", "--rate", optarg, 1, (long)1 << 40);
			break;
		case 'S':
			cfg.q.store_bytes = (uint64_t)sfs_arg_num("run", "--store-mb", optarg, 1,
								  1 << 20) << 20;
			break;
		case 'J': cfg.q.json = 1; break;
		case 'k':
			/* The table target's writers (the compactor and checkpointer,
			 * our children) read SFS_TABLE_KEYS_RAW (store/table/table.h);
			 * readers take either kind of page. */
			if (strcmp(optarg, "raw") && strcmp(optarg, "compressed")) {
				fprintf(stderr, "sfs run: --table-keys %s: raw or compressed\n", optarg);
				return 2;
			}
			setenv("SFS_TABLE_KEYS_RAW", strcmp(optarg, "raw") ? "0" : "1", 1);
			break;
		case 'X': cfg.q.restore = optarg; break;
		case 'c':
			cfg.q.cache_bytes = (uint64_t)sfs_arg_num("run", "--cache-mb", optarg, 1, 65536)
					    << 20;
			break;
		case 'Y':
			cfg.q.state_ttl_ms = (uint64_t)sfs_arg_num("run", "--state-ttl", optarg, 1,
								   (long)1 << 50);
			break;
		case 'F':
			cfg.q.buffer_bytes = (uint64_t)sfs_arg_num("run", "--buffer-mb", optarg, 1, 4096)
					     << 20;
			break;
		case 'G':
			cfg.q.rdb_memory_bytes = (uint64_t)sfs_arg_num("run", "--rocksdb-memory-mb",
								       optarg, 1, 1 << 24) << 20;
			break;
		case 'T':
			cfg.q.retain = (uint32_t)sfs_arg_num("run", "--retain", optarg, 1, 1000);
			break;
		case 'U':
			if (strcmp(optarg, "spare") != 0 && strcmp(optarg, "all") != 0) {
				fprintf(stderr, "sfs run: --maintenance-cpus: '%s', want spare or all\n",
					optarg);
				return 2;
			}
			cfg.maint_spare = optarg[0] == 's';
			break;
		case 'N':
			/* at most SFS_FLUSH_MAX_WORKERS: a thread per worker */
			cfg.maint_threads = (unsigned)sfs_arg_num("run", "--maintenance-threads", optarg,
								  1, 256);
			break;
		case 'M':
			cfg.max_recoveries = (unsigned)sfs_arg_num("run", "--max-recoveries", optarg, 0,
								   1000);
			break;
		case 'V':
			if (strcmp(optarg, "in-place") && strcmp(optarg, "restart")) {
				fprintf(stderr, "sfs run: --recovery %s: want in-place or restart\n",
					optarg);
				return 2;
			}
			cfg.restart_only = !strcmp(optarg, "restart");
			break;
		case 'L':	/* here too: a restore checks the checkpoint's operators */
			cfg.merge_lib = optarg;
			if (sfs_merge_load(optarg)) {
				fprintf(stderr, "sfs run: %s\n", sfs_last_error());
				return 2;
			}
			break;
		case 'A': cfg.metrics_addr = optarg; break;
		case 'H': cfg.host = 1; break;
		case 'p':
			cfg.watch_pid = (pid_t)sfs_arg_num("run", "--watch-pid", optarg, 1, INT32_MAX);
			cfg.watch_start = sfs_proc_starttime(cfg.watch_pid);
			if (!cfg.watch_start) {
				fprintf(stderr, "sfs run: --watch-pid %d: no such process\n",
					(int)cfg.watch_pid);
				return 2;
			}
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sfs run: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!cfg.job && cfg.q.query) {
		snprintf(cfg.job_buf, sizeof(cfg.job_buf), "nexmark-%.32s", cfg.q.query);
		cfg.job = cfg.job_buf;
	}
	if (!cfg.job) {
		fprintf(stderr, "sfs run: --job is required\n");
		usage(stderr);
		return 2;
	}
	if (sfs_job_name_check(cfg.job)) {
		fprintf(stderr, "sfs run: %s\n", sfs_last_error());
		return 2;
	}
	if (cfg.heartbeat_ns * 3 > cfg.hang_ns) {
		fprintf(stderr, "sfs run: --hang-timeout-ms must be at least 3 heartbeats\n");
		return 2;
	}
	cfg.start_ns = cfg.hang_ns > 10000 * MS ? cfg.hang_ns : 10000 * MS;
	if (cfg.host && (cfg.q.query || cfg.q.exec)) {
		fprintf(stderr, "sfs run: --host runs no workers: no --query or --exec\n");
		return 2;
	}
	if (cfg.host) {
		/* the engine requests, seals and keeps its own checkpoints */
		cfg.q.exec = host_prog;
		cfg.q.host = 1;
	}
	if (cfg.q.query && cfg.q.exec) {
		fprintf(stderr, "sfs run: --query and --exec: one or the other\n");
		return 2;
	}
	if (!cfg.job && cfg.q.exec) {
		fprintf(stderr, "sfs run: --exec needs --job\n");
		return 2;
	}
	if (cfg.q.state_ttl_ms && (!cfg.q.query || !sup_backend_target(cfg.q.backend))) {
		fprintf(stderr, "sfs run: --state-ttl is for --query on an sfs backend (memory, "
			"rocksdb, table; '%s' keeps its state outside sfs; a program of --exec "
			"registers its own TTLs: sfs_state_register_ttl)\n",
			cfg.q.query ? cfg.q.backend : "--exec");
		return 2;
	}
	if (is_job()) {
		int rc;

		if (!cfg.q.data_dir) {
			snprintf(cfg.data_buf, sizeof(cfg.data_buf), "/tmp/sfs-%s", cfg.job);
			cfg.q.data_dir = cfg.data_buf;
		}
		if ((rc = sup_query_check(&cfg.q, cfg.workers)))
			return rc;
		if (cfg.segment_bytes < sup_query_segment_bytes(&cfg.q, cfg.workers))
			cfg.segment_bytes = sup_query_segment_bytes(&cfg.q, cfg.workers);
	}
	if (!cfg.bindir[0]) {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n <= 0) {
			fprintf(stderr, "sfs run: cannot find own binary: %s\n", strerror(errno));
			return 1;
		}
		self[n] = '\0';
		*strrchr(self, '/') = '\0';
		snprintf(cfg.bindir, sizeof(cfg.bindir), "%s", self);
	}
	return 0;
}

/* ---- rollback in place ------------------------------------------------------------ */

#define ROLLBACK_BOUND_NS (10000 * MS)  /* the protocol's answers; then a restart */

/* Reap what exited while a rollback runs (non-blocking): workers are
 * expected; a compactor's or checkpointer's death is handled as always
 * (its restart scheduled) and makes the rollback fall back (1). */
static int rollback_reap(void)
{
	struct rusage ru;
	int status, lost = 0;
	pid_t pid;

	while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
		struct child *k = child_by_pid(pid);

		if (!k)
			continue;
		account(k, &ru);
		if (k->role == SFS_ROLE_WORKER) {
			if (k->d->cd_state != SFS_CHILD_STOPPING) {
				char why[64];

				describe_status(status, why, sizeof(why));
				sfs_log("worker %u died during the rollback (%s): it starts again "
					"from the checkpoint", k->index, why);
			}
			k->pid = 0;
			k->slot = -1;
			sfs_store_relaxed(&k->d->cd_pid, 0);
			k->d->cd_last_status = status;
			sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_STOPPED);
			continue;
		}
		on_child_death(k, status, sfs_now_ns());
		lost = 1;
	}
	return lost;
}

/* Wake the compactors (their doorbells) and the checkpointer (it naps on
 * the shutdown word): the rollback's requests are theirs to see now. */
static void rollback_wake(void)
{
	for (int n = 0; n < nnodes; n++) {
		struct sfs_seg_hdr *h = segs[n].hdr;

		uatomic_inc(&h->sh_bell);
		sfs_futex_wake(&h->sh_bell, INT_MAX);
		sfs_futex_wake(&h->sh_shutdown, INT_MAX);
	}
}

#define HALT_BOUND_NS (1000 * MS)  /* a worker's halt; then it is killed */

/*
 * A worker died: roll the group back to its last completed checkpoint in
 * place (shm/ckpt.h, "Rollback in place"; sup.h): every other worker that
 * rolls back in its process is halted, the rest are killed and reaped;
 * the checkpointer and the compactors answer the rollback; the halted
 * workers start over from that checkpoint in their processes and the dead
 * ones are started again as restored from it — the segments, the
 * compactors with their open stores and the checkpointer stay.  0 with
 * the workers running; -1 when it cannot (why in @why: the caller restarts
 * the group from files instead, the halted workers with it).
 */
static int rollback(uint64_t detect_ns, char *why, size_t n)
{
	const struct sfs_target_ops *t = sup_backend_target(cfg.q.backend);
	uint64_t deadline, halt_deadline, stopped, ck_at = 0, answered;
	unsigned halted, spawned = 0;
	int rc, live;

	if (!cfg.q.checkpoint_ns) {
		snprintf(why, n, "the job takes no checkpoints");
		return -1;
	}
	if (!t || !t->pin || !t->rollback) {
		snprintf(why, n, "the %s backend cannot roll back in place", cfg.q.backend);
		return -1;
	}
	for (unsigned i = 0; i < nkids; i++)
		if (kids[i].role != SFS_ROLE_WORKER && kids[i].pid <= 0) {
			snprintf(why, n, "%s %u is down", sfs_role_name(kids[i].role), kids[i].index);
			return -1;
		}
	sup_query_rollback_halt();
	for (unsigned i = 0; i < nkids; i++)
		if (kids[i].role == SFS_ROLE_WORKER && kids[i].pid > 0 &&
		    !sup_query_rollback_inproc(kids[i].index)) {
			sfs_store_relaxed(&kids[i].d->cd_state, SFS_CHILD_STOPPING);
			kill(kids[i].pid, SIGKILL);
		}
	deadline = sfs_now_ns() + ROLLBACK_BOUND_NS;
	halt_deadline = sfs_now_ns() + HALT_BOUND_NS;
	/* Every worker halted (acked, still alive) or reaped; one that does
	 * not halt in time is killed like the others. */
	do {
		if (rollback_reap()) {
			snprintf(why, n, "a maintenance process died while the workers stopped");
			return -1;
		}
		live = 0;
		for (unsigned i = 0; i < nkids; i++) {
			struct child *k = &kids[i];

			if (k->role != SFS_ROLE_WORKER || k->pid <= 0)
				continue;
			if (k->d->cd_state != SFS_CHILD_STOPPING && sup_query_rollback_halted(k->index))
				continue;
			live++;
			if (k->d->cd_state != SFS_CHILD_STOPPING && sfs_now_ns() > halt_deadline) {
				sfs_log("job %s: worker %u did not halt for the rollback in %llu ms: "
					"killed", cfg.job, k->index,
					(unsigned long long)(HALT_BOUND_NS / MS));
				sfs_store_relaxed(&k->d->cd_state, SFS_CHILD_STOPPING);
				kill(k->pid, SIGKILL);
			}
		}
		if (live && sfs_now_ns() > deadline) {
			snprintf(why, n, "%d workers outlived SIGKILL for %llu ms", live,
				 (unsigned long long)(ROLLBACK_BOUND_NS / MS));
			return -1;
		}
		if (live)
			sfs_sleep_ns(MS / 4);
	} while (live);
	stopped = sfs_now_ns();
	sup_query_recovery_close();	/* the previous one's first record, before the reset */
	sup_query_rollback_ask();
	while ((rc = sup_query_rollback_poll(why, n)) == 0) {
		if (!ck_at && sup_query_rollback_to() != UINT64_MAX)
			ck_at = sfs_now_ns();
		/* A halted worker may die here too: it is started again below. */
		if (rollback_reap()) {
			snprintf(why, n, "a maintenance process died during the rollback");
			return -1;
		}
		if (sfs_now_ns() > deadline) {
			snprintf(why, n, "no answer from the checkpointer and compactors in %llu ms",
				 (unsigned long long)(ROLLBACK_BOUND_NS / MS));
			return -1;
		}
		rollback_wake();
		sfs_sleep_ns(MS / 4);
	}
	answered = sfs_now_ns();
	if (!ck_at)
		ck_at = answered;
	if (rc < 0 || sup_query_rollback_finish(&cfg.q, why, n))
		return -1;
	if (rollback_reap()) {
		snprintf(why, n, "a maintenance process died during the rollback");
		return -1;
	}
	sup_query_recovery(detect_ns, stopped, "in-place");
	sup_query_recovery_restored();
	sup_query_rollback_go();
	rc = 0;
	halted = 0;
	for (unsigned i = 0; i < nkids; i++) {
		if (kids[i].role != SFS_ROLE_WORKER)
			continue;
		if (kids[i].pid > 0) {
			halted++;	/* starts over in its process */
			continue;
		}
		kids[i].exited = 0;
		if (spawn(&kids[i]))
			rc = -1;
		else
			kids[i].d->cd_restarts++, spawned++;
	}
	if (rc) {
		snprintf(why, n, "a worker could not be started again");
		return -1;
	}
	sfs_log("job %s: rolled back in place to checkpoint %llu in %.1f ms (workers halted or "
		"stopped in %.1f ms, the checkpointer's answer %.1f ms later, the compactors' %.1f "
		"ms after it); %u worker(s) started over in their processes, %u started again",
		cfg.job, (unsigned long long)sup_query_rollback_to(),
		(sfs_now_ns() - detect_ns) / 1e6, (stopped - detect_ns) / 1e6,
		(ck_at - stopped) / 1e6, (answered - ck_at) / 1e6, halted, spawned);
	return 0;
}

/* Segments, the job description, every child: one incarnation of the
 * group.  On failure everything it made is undone. */
static int start_group(uint64_t generation, struct sfs_proc_slot **me)
{
	const struct sfs_target_ops *tgt;
	int rc;

	for (int n = 0; n < nnodes; n++) {
		rc = sfs_seg_create(cfg.job, n, cfg.segment_bytes, generation, &segs[n]);
		if (rc) {
			sfs_log("%s", sfs_last_error());
			destroy_segments();
			return 1;
		}
		if (is_job() && (tgt = sup_backend_target(cfg.q.backend))) {
			/* Before any child exists: read-only from here on.  The
			 * target's instance root: its files, or where a restore
			 * leaves them (store/target.h). */
			snprintf(segs[n].hdr->sh_backend, sizeof(segs[n].hdr->sh_backend), "%s",
				 tgt->name);
			rc = tgt->instance_root(cfg.q.data_dir, n, segs[n].hdr->sh_data_dir,
						sizeof(segs[n].hdr->sh_data_dir));
			if (rc) {
				sfs_log("%s", sfs_last_error());
				destroy_segments();
				return 1;
			}
		}
		sfs_log("segment %s: %llu MiB on node %d, %s pages", segs[n].path,
			(unsigned long long)(segs[n].size >> 20), n,
			(segs[n].hdr->sh_flags & SFS_SEG_HUGE) ? "huge (hugetlbfs)" : "plain 4 KiB");
	}
	if (sfs_proc_register(&segs[0], SFS_ROLE_SUPERVISOR, 0, me)) {
		sfs_log("%s", sfs_last_error());
		destroy_segments();
		return 1;
	}
	nkids = 0;
	memset(kids, 0, sizeof(kids));
	plan_children();
	if (is_job()) {
		rc = sup_query_setup(&cfg.q, &segs[0], cfg.workers);
		if (rc) {
			if (rc != 2)
				sfs_log("%s", sfs_last_error());
			sfs_proc_unregister(*me);
			destroy_segments();
			return rc == 2 ? 2 : 1;
		}
	}
	rc = 0;
	for (unsigned i = 0; i < nkids; i++)
		if (spawn(&kids[i]))
			rc = -1;
	sfs_log("job %s started: %u workers, %d compactor(s), 1 checkpointer (generation %llu)",
		cfg.job, cfg.workers, nnodes, (unsigned long long)generation);
	return rc;
}

/* Every --exec worker exited 0. */
static int exec_done(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nkids; i++)
		if (kids[i].role == SFS_ROLE_WORKER && !kids[i].exited)
			return 0;
		else
			n += kids[i].role == SFS_ROLE_WORKER;
	return n > 0;
}

static unsigned recoveries;

/* A worker's death or failure while the job runs (detected at
 * @detect_ns): 1 once the group rolled back in place, 0 when the caller
 * restarts it from files (--recovery restart, the budget spent, or a
 * rollback that could not be done: said why). */
static int in_place(uint64_t detect_ns)
{
	char why[256];

	if (cfg.restart_only || !is_job() || recoveries >= cfg.max_recoveries)
		return 0;
	recoveries++;
	cfg.q.recoveries = recoveries;
	if (rollback(detect_ns, why, sizeof(why)) == 0) {
		sfs_log("job %s: recovery %u of at most %u (in place)", cfg.job, recoveries,
			cfg.max_recoveries);
		return 1;
	}
	recoveries--;
	cfg.q.recoveries = recoveries;
	sfs_log("job %s: no rollback in place (%s): restarting the group from its last "
		"checkpoint's files", cfg.job, why);
	return 0;
}

int sfs_cmd_run(int argc, char **argv)
{
	struct sup_metrics_server *metrics = NULL;
	struct sfs_proc_slot *me = NULL;
	uint64_t generation = 1, t0, stop_at, detect_ns, stopped_ns;
	sigset_t set;
	int rc = parse(argc, argv), failed, sig, done, recover;

	if (rc)
		return rc;
	sfs_log_init("sfs");
	nnodes = sfs_node_count();
	if (nnodes > MAX_NODES)
		nnodes = MAX_NODES;

	/* Every signal the loop handles is blocked and taken synchronously. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old_mask);

	/* The children's environment, set once before the metrics thread
	 * exists: setenv() while another thread's getenv() (a scrape maps
	 * the segments, shm/segment.c reads SFS_SHM_DIR) is a data race. */
	if (is_job()) {
		char mb[32];

		snprintf(mb, sizeof(mb), "%llu", (unsigned long long)(cfg.q.store_bytes >> 20));
		setenv("SFS_STORE_MB", mb, 1);
	}
	/* Bound before anything starts (a port in use: exit 2), and started
	 * with those signals blocked: its thread inherits the mask, so they
	 * stay this loop's. */
	if (cfg.metrics_addr && (rc = sup_metrics_serve(cfg.metrics_addr, cfg.job, &metrics)))
		return rc;
	rc = recover_stale(&generation);
	if (rc) {
		sup_metrics_stop(metrics);
		return rc == SFS_ERUNNING ? 2 : 1;
	}
	t0 = sfs_now_ns();
	stop_at = cfg.duration_ns ? t0 + cfg.duration_ns : UINT64_MAX;
	for (;;) {
		failed = sig = done = recover = 0;
		detect_ns = 0;
		rc = start_group(generation, &me);
		if (rc > 0) {
			sup_metrics_stop(metrics);
			return rc;
		}
		failed = rc != 0;
		while (!failed) {
			struct timespec tick = { 0, (long)TICK_NS };
			uint64_t now;
			int r;

			sig = sigtimedwait(&set, NULL, &tick);
			if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
				break;
			if ((r = reap(1))) {
				failed = 1;
				recover = r == -2;
			}
			now = sfs_now_ns();
			if (failed)
				detect_ns = now;	/* a death: its recovery starts here */
			if (failed && recover && in_place(detect_ns)) {
				failed = recover = 0;
				continue;
			}
			if (cfg.watch_pid &&
			    sfs_proc_starttime(cfg.watch_pid) != cfg.watch_start) {
				sfs_log("job %s: process %d is gone", cfg.job, (int)cfg.watch_pid);
				sig = -1;
				break;
			}
			if (cfg.q.exec && !cfg.host && !failed && exec_done()) {
				done = 1;
				break;
			}
			if (cfg.q.query && !failed) {
				int st = sup_query_tick(&cfg.q, now);

				if (st < 0) {
					failed = recover = 1;
					detect_ns = now;
					if (in_place(detect_ns)) {
						failed = recover = 0;
						continue;
					}
				}
				if (st > 0) {
					done = 1;
					break;
				}
			}
			tend(now);
			if (!failed && io_stalled(now)) {
				failed = 1;
				break;
			}
			sfs_proc_heartbeat(me);
			if (now >= stop_at) {
				sig = 0;
				break;
			}
		}

		sfs_log("stopping job %s (%s)", cfg.job,
			failed ? "a child failed" : done ? "end of input" :
			sig > 0 ? strsignal(sig) : sig < 0 ? "its engine's process is gone" :
			"duration reached");
		/* Tell observers; the children themselves are stopped role by role. */
		for (int n = 0; n < nnodes; n++)
			sfs_store_release(&segs[n].hdr->sh_shutdown, 1);
		stop_role(SFS_ROLE_WORKER);
		stop_role(SFS_ROLE_COMPACTOR);
		stop_role(SFS_ROLE_CHECKPOINTER);
		stopped_ns = sfs_now_ns();
		if (failed && recover && is_job() && recoveries < cfg.max_recoveries) {
			/* Exactly once: the next incarnation starts from the last
			 * completed checkpoint (or from the beginning), the sinks'
			 * uncommitted epochs are dropped and the sources replay. */
			recoveries++;
			cfg.q.recoveries = recoveries;
			cfg.q.recover_id = sup_query_last_checkpoint();
			cfg.q.restore = NULL;
			sup_query_carry(segs, nnodes);
			sup_query_recovery(detect_ns ? detect_ns : stopped_ns, stopped_ns, "restart");
			sfs_proc_unregister(me);
			destroy_segments();
			generation++;
			sfs_log("job %s: recovery %u of at most %u", cfg.job, recoveries,
				cfg.max_recoveries);
			continue;
		}
		break;
	}
	report(is_job() ? stderr : stdout);
	fflush(stdout);
	if (is_job()) {
		sup_query_carry(segs, nnodes);
		account_segments();
		rc = sup_query_finish(&cfg.q, done && !failed, &used);
	}
	sup_metrics_stop(metrics);
	sfs_proc_unregister(me);
	destroy_segments();
	sfs_log("job %s stopped", cfg.job);
	if (usage_failed)
		return 2;
	/* A planned stop (a signal, --duration-ms) before the input ended is no
	 * failure: exit 0, with the summary's "ok" false (not all read, no
	 * final commit of the output); 1 is a failure only. */
	if (is_job())
		return !failed && !done && sig >= 0 && rc == 1 ? 0 : rc;
	return failed ? 1 : 0;
}

int sfs_cmd_clean(int argc, char **argv)
{
	uint64_t generation = 0;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: sfs clean --job NAME\n"
		       "Removes the segments of a job whose supervisor is dead (and kills\n"
		       "processes it left).  Refuses while the job runs.\n");
		return 0;
	}
	if (argc != 3 || strcmp(argv[1], "--job")) {
		fprintf(stderr, "usage: sfs clean --job NAME\n");
		return 2;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.job = argv[2];
	if (sfs_job_name_check(cfg.job)) {
		fprintf(stderr, "sfs clean: %s\n", sfs_last_error());
		return 2;
	}
	sfs_log_init("sfs");
	nnodes = sfs_node_count();
	return recover_stale(&generation) ? 1 : 0;
}
