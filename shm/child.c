/*
 * child.c — the shared skeleton of sfs-worker, sfs-compactor and
 * sfs-checkpointer: arguments, registration, heartbeat, shutdown.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/merge.h"
#include "shm/child.h"
#include "shm/futex.h"
#include "shm/qsbr.h"

volatile sig_atomic_t sfs_child_stop;

static void on_stop(int sig)
{
	(void)sig;
	sfs_child_stop = 1;
}

static void usage(const char *prog, FILE *f)
{
	fprintf(f,
		"usage: %s --job NAME [--index N] [--node N] [--heartbeat-ms MS]\n"
		"       [--merge-lib PATH]\n"
		"Started by 'sfs run'; attaches to the job's segment, registers in its\n"
		"process table, heartbeats and stops on SIGTERM.\n",
		prog);
}

static long parse_num(const char *prog, const char *opt, const char *v, long lo, long hi)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < lo || n > hi) {
		fprintf(stderr, "%s: %s: '%s' is not a number in [%ld, %ld]\n", prog, opt, v, lo, hi);
		usage(prog, stderr);
		exit(2);
	}
	return n;
}

void sfs_child_args(struct sfs_child *c, unsigned role, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "index", required_argument, NULL, 'i' },
		{ "node", required_argument, NULL, 'n' },
		{ "heartbeat-ms", required_argument, NULL, 'b' },
		{ "merge-lib", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *prog = argv[0];
	int o;

	memset(c, 0, sizeof(*c));
	c->role = role;
	c->heartbeat_ns = 100 * 1000000ull;
	c->seg.fd = -1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'j': c->job = optarg; break;
		case 'i': c->index = (uint32_t)parse_num(prog, "--index", optarg, 0, 1 << 20); break;
		case 'n': c->node = (int)parse_num(prog, "--node", optarg, 0, 1023); break;
		case 'b':
			c->heartbeat_ns = (uint64_t)parse_num(prog, "--heartbeat-ms", optarg, 1, 60000) *
					  1000000ull;
			break;
		case 'm':	/* before attaching: a state's operator is checked there */
			if (sfs_merge_load(optarg)) {
				fprintf(stderr, "%s: %s\n", prog, sfs_last_error());
				exit(2);
			}
			break;
		case 'h': usage(prog, stdout); exit(0);
		default: usage(prog, stderr); exit(2);
		}
	}
	if (optind != argc || !c->job) {
		fprintf(stderr, "%s: %s\n", prog, c->job ? "unexpected argument" : "--job is required");
		usage(prog, stderr);
		exit(2);
	}
	if (sfs_job_name_check(c->job)) {
		fprintf(stderr, "%s: %s\n", prog, sfs_last_error());
		exit(2);
	}
}

int sfs_child_start(struct sfs_child *c)
{
	struct sigaction sa = { .sa_handler = on_stop };
	char role[48];
	int rc;

	snprintf(role, sizeof(role), "%s%u", sfs_role_name(c->role), c->index);
	sfs_log_init(role);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	rc = sfs_seg_attach(c->job, c->node, &c->seg);
	if (rc) {
		sfs_log("attach failed: %s", sfs_last_error());
		return rc;
	}
	rc = sfs_proc_register(&c->seg, c->role, c->index, &c->slot);
	if (rc) {
		sfs_log("register failed: %s", sfs_last_error());
		sfs_seg_detach(&c->seg);
		return rc;
	}
	c->slot->ps_node = (uint32_t)c->node;
	sfs_qsbr_online(c->seg.hdr, c->slot);
	return 0;
}

/* The child whose loop runs in this process, and its next beat (the
 * loop's and sfs_child_progress's). */
static struct sfs_child *loop_child;
static uint64_t next_beat;

/* This thread's sfs_child_progress_hook (NULL: the loop's own beat). */
static __thread void (*progress_fn)(void *arg);
static __thread void *progress_arg;

void sfs_child_progress_hook(void (*fn)(void *arg), void *arg)
{
	progress_fn = fn;
	progress_arg = arg;
}

void sfs_child_progress(void)
{
	uint64_t now;

	if (progress_fn) {
		progress_fn(progress_arg);
		return;
	}
	if (!loop_child)
		return;
	now = sfs_now_ns();
	if (now >= next_beat) {
		sfs_proc_heartbeat(loop_child->slot);
		next_beat = now + loop_child->heartbeat_ns;
	}
}

int sfs_child_loop(struct sfs_child *c, sfs_child_step_fn step)
{
	struct sfs_seg_hdr *h = c->seg.hdr;
	int rc = 0;

	loop_child = c;
	next_beat = 0;

	/* Only SIGTERM stops a child, not sh_shutdown: the supervisor stops
	 * the roles in order (workers first), one signal per role. */
	while (!sfs_child_stop) {
		int did = step ? step(c, 256) : 0;

		if (did < 0) {
			rc = did;
			break;
		}
		sfs_qsbr_quiescent(h, c->slot);
		sfs_child_progress();
		if (did == 0) {
			/* Idle: go offline so no grace period waits on a sleeper,
			 * announce the sleep, look for work once more (a bump
			 * between the two is then either seen or changes the
			 * word), and sleep until woken, a beat is due or SIGTERM
			 * interrupts the wait (EINTR). */
			int32_t *word = c->wake_word ? c->wake_word : &h->sh_shutdown;
			int32_t seen = sfs_load_acquire(word);
			uint64_t nap = c->idle_ns && c->idle_ns < c->heartbeat_ns ? c->idle_ns
										   : c->heartbeat_ns;

			sfs_qsbr_offline(c->slot);
			if (c->wake_flag) {
				sfs_store_relaxed(c->wake_flag, 1);
				cmm_smp_mb();
				did = step ? step(c, 256) : 0;
			}
			if (did == 0)
				sfs_futex_wait(word, seen, nap);
			if (c->wake_flag)
				sfs_store_relaxed(c->wake_flag, 0);
			sfs_qsbr_online(h, c->slot);
			if (did < 0) {
				rc = did;
				break;
			}
		}
	}
	loop_child = NULL;
	return rc;
}

void sfs_child_finish(struct sfs_child *c)
{
	if (c->slot) {
		sfs_qsbr_offline(c->slot);
		sfs_proc_unregister(c->slot);
		c->slot = NULL;
	}
	if (c->seg.hdr)
		sfs_seg_detach(&c->seg);
}
