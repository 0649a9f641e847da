/*
 * top.c — `sfs top --job J`: a live terminal view of a running group, one
 * frame about every second; `--once` prints a single frame without escape
 * codes, for scripts.
 *
 * Every number comes from two snapshots of shared memory (snapshot.c's
 * sup_snap_take, the one reader `sfs stat` and /metrics use)
 * and the difference between them: per worker events/s, records/s, buffer
 * seals/s, the share of wall time stalled on back-pressure and the value
 * cache's hit rate over the interval; its buffers by state now.  CPU
 * shares come from /proc/PID/stat of the pids in sh_children (utime +
 * stime between the two samples), the last checkpoints' sizes from their
 * _metadata on disk (checkpointer/ckstore.h), their durations from the
 * checkpoint region.  The segments are mapped afresh at each sample, so a
 * group that recovers (new segments) is followed, and one that stops is
 * said to be gone.
 *
 * The terminal: the alternate screen, the cursor homed and each line
 * overwritten and cleared to its end (no flicker: nothing is erased
 * before it is redrawn), lines cut at the terminal's width; keys are read
 * in cbreak mode (termios: no echo, no line buffering).  The terminal is
 * put back on every way out: q, end of the group, SIGINT/SIGTERM/SIGHUP
 * (a flag the loop sees: poll() returns EINTR), and exit() (atexit).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "checkpointer/ckstore.h"
#include "common/clock.h"
#include "common/err.h"
#include "supervisor/args.h"
#include "supervisor/snapshot.h"
#include "supervisor/sup.h"

#define MAX_LINES 128
#define LINE_MAX_BYTES 512

typedef unsigned long long ull;

struct frame {
	int n;
	char line[MAX_LINES][LINE_MAX_BYTES];
};

/* CPU time (utime + stime, clock ticks) of each pid, sampled with a snapshot. */
struct cpu_sample {
	int pid[SFS_MAX_CHILDREN + SFS_MAX_PROCS];
	uint64_t ticks[SFS_MAX_CHILDREN + SFS_MAX_PROCS];
};

static struct termios saved_tio;
static int tio_saved, screen_on;
static volatile sig_atomic_t stop_sig;

static void addl(struct frame *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addl(struct frame *f, const char *fmt, ...)
{
	va_list ap;

	if (f->n == MAX_LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(f->line[f->n++], LINE_MAX_BYTES, fmt, ap);
	va_end(ap);
}

/* utime + stime of @pid from /proc/PID/stat (fields 14 and 15, after the
 * parenthesised name, which may hold spaces); 0 when it is gone. */
static uint64_t proc_ticks(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* ") S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime" */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

static void cpu_take(const struct sup_snap *s, struct cpu_sample *c)
{
	for (int i = 0; i < s->nprocs; i++) {
		c->pid[i] = s->procs[i].pid;
		c->ticks[i] = proc_ticks(s->procs[i].pid);
	}
}

/* CPU share (percent of one core) of process @i between the samples; -1
 * when its pid changed (restarted) or is gone. */
static double cpu_pct(const struct sup_snap *a, const struct cpu_sample *ca,
		      const struct sup_snap *b, const struct cpu_sample *cb, int i)
{
	double dt = (double)(b->taken_ns - a->taken_ns) / 1e9;

	for (int k = 0; k < a->nprocs; k++)
		if (ca->pid[k] == cb->pid[i] && cb->pid[i] > 0 && dt > 0 &&
		    cb->ticks[i] >= ca->ticks[k] && cb->ticks[i])
			return (double)(cb->ticks[i] - ca->ticks[k]) /
			       (double)sysconf(_SC_CLK_TCK) / dt * 100.0;
	return -1;
}

static void human(char *buf, size_t n, double v)
{
	if (v >= 1e9)
		snprintf(buf, n, "%.1fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, n, "%.1fM", v / 1e6);
	else if (v >= 1e4)
		snprintf(buf, n, "%.1fK", v / 1e3);
	else
		snprintf(buf, n, "%.0f", v);
}

static void bytes_h(char *buf, size_t n, uint64_t v)
{
	if (v >= 1ull << 30)
		snprintf(buf, n, "%.1f GiB", (double)v / (1 << 30));
	else if (v >= 1ull << 20)
		snprintf(buf, n, "%.1f MiB", (double)v / (1 << 20));
	else if (v >= 1ull << 10)
		snprintf(buf, n, "%.1f KiB", (double)v / (1 << 10));
	else
		snprintf(buf, n, "%llu B", (ull)v);
}

static const struct sup_snap_worker *worker_in(const struct sup_snap *s, uint32_t w)
{
	for (int i = 0; i < s->nworkers; i++)
		if (s->workers[i].worker == w)
			return &s->workers[i];
	return NULL;
}

/* Files of checkpoint @m that the older checkpoint @older does not hold:
 * what it linked or copied anew (its private files are always new).
 * O(files^2) over a few dozen files. */
static unsigned new_files(const struct ck_meta *m, const struct ck_meta *older)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < m->nfiles; i++) {
		uint32_t j = 0;

		if (m->files[i].shared)
			for (; j < older->nfiles; j++)
				if (!strcmp(m->files[i].path, older->files[j].path))
					break;
		n += !m->files[i].shared || j == older->nfiles;
	}
	return n;
}

/* The newest checkpoints on disk: id, size, bytes and files new (against
 * the next older one on disk), files; durations from the region (the i-th
 * newest completed by this incarnation). */
static void checkpoints(const struct sup_snap *b, struct frame *f, int max)
{
	char root[PATH_MAX - 64];
	struct ck_meta m[6];
	uint64_t *ids = NULL;
	size_t n = 0;
	int nm = 0;
	unsigned k = 0;	/* rank among those this incarnation completed */

	if (!b->data_dir[0])
		return;
	if (max > 5)
		max = 5;
	snprintf(root, sizeof(root), "%s/checkpoints", b->data_dir);
	if (sfs__ck_ids(root, &ids, &n) || !n) {
		free(ids);
		addl(f, "  (none completed yet)");
		return;
	}
	/* ids newest first; one more than shown, for the files new. */
	for (size_t i = 0; i < n && nm <= max; i++) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/chk-%llu", root, (ull)ids[i]);
		if (sfs__ck_read(dir, NULL, 0, &m[nm]) == 0)
			nm++;
	}
	free(ids);
	addl(f, "  %-8s %10s %12s %12s %13s", "ID", "DURATION", "SIZE", "NEW", "FILES NEW/ALL");
	for (int i = 0; i < nm && i < max; i++) {
		char dur[32], sz[32], nw[32], fl[32];

		/* Newer than the region's snapshot (completed since), or older
		 * than the durations kept: no duration. */
		if (m[i].id <= b->ck_done && k < b->ck_nrecent)
			snprintf(dur, sizeof(dur), "%.1f ms", b->ck_recent_us[k++] / 1e3);
		else
			snprintf(dur, sizeof(dur), "-");
		bytes_h(sz, sizeof(sz), m[i].total_bytes);
		bytes_h(nw, sizeof(nw), m[i].new_bytes);
		if (i + 1 < nm)
			snprintf(fl, sizeof(fl), "%u/%u", new_files(&m[i], &m[i + 1]), m[i].nfiles);
		else
			snprintf(fl, sizeof(fl), "-/%u", m[i].nfiles);
		addl(f, "  %-8llu %10s %12s %12s %13s", (ull)m[i].id, dur, sz, nw, fl);
	}
	for (int i = 0; i < nm; i++)
		sfs__ck_meta_free(&m[i]);
}

/* One frame from two snapshots @a (older) and @b, at most @rows lines. */
static void build(const struct sup_snap *a, const struct cpu_sample *ca,
		  const struct sup_snap *b, const struct cpu_sample *cb, struct frame *f, int rows)
{
	double dt = (double)(b->taken_ns - a->taken_ns) / 1e9;
	uint64_t ev = 0, restarts = 0;
	char t[16], hb[160];
	time_t now = time(NULL);
	struct tm tm;
	int nw = 0, wrows, extra;

	f->n = 0;
	if (dt <= 0)
		dt = 1e-9;
	localtime_r(&now, &tm);
	strftime(t, sizeof(t), "%H:%M:%S", &tm);
	for (int i = 0; i < b->nworkers; i++)
		ev += b->workers[i].events;
	for (int i = 0; i < b->nprocs; i++)
		restarts += b->procs[i].restarts;
	if (b->query[0] || b->backend[0])
		snprintf(hb, sizeof(hb), " (%s%s%s)", b->query, b->query[0] && b->backend[0] ? ", " : "",
			 b->backend);
	else
		hb[0] = '\0';
	addl(f, "sfs top - job %s%s, generation %llu  %s", b->job, hb, (ull)b->generation, t);
	if (b->has_job)
		snprintf(hb, sizeof(hb), "events %llu of %llu (%.0f%%)", (ull)ev,
			 (ull)b->job_events, b->job_events ? 100.0 * (double)ev / (double)b->job_events : 0);
	else
		snprintf(hb, sizeof(hb), "workers %d", b->nworkers);
	addl(f, "%s  recoveries %u  restarts %llu", hb, b->ck_recoveries, (ull)restarts);
	addl(f, "%s", "");
	addl(f, "%-6s %9s %9s %7s %8s %6s %7s %5s", "WORKER", "EVENTS/S", "RECORDS/S", "SEALS/S",
	     "BUF F/S/R", "STALL%", "VC_HIT%", "CPU%");

	/* Rows left for workers: the rest of the frame takes about 12. */
	wrows = rows - 4 - 12;
	if (wrows < 2)
		wrows = 2;
	for (int i = 0; i < b->nworkers; i++) {
		const struct sup_snap_worker *w = &b->workers[i], *o = worker_in(a, w->worker);
		char e[16] = "-", r[16] = "-", sl[16] = "-", bufs[16] = "-", st[16] = "-",
		     vc[16] = "-", cpu[16] = "-";

		if (nw == wrows - 1 && b->nworkers - i > 1) {
			addl(f, "... %d more workers", b->nworkers - i);
			break;
		}
		nw++;
		if (o && w->has_rt && w->events >= o->events) {
			human(e, sizeof(e), (double)(w->events - o->events) / dt);
			human(r, sizeof(r), (double)(w->records - o->records) / dt);
		}
		if (w->has_ctl) {
			snprintf(bufs, sizeof(bufs), "%u/%u/%u", w->nfree, w->nsealed, w->nretiring);
			if (o && o->has_ctl && w->seq >= o->seq && w->stall_ns >= o->stall_ns) {
				snprintf(sl, sizeof(sl), "%.1f", (double)(w->seq - o->seq) / dt);
				snprintf(st, sizeof(st), "%.1f",
					 (double)(w->stall_ns - o->stall_ns) / 1e9 / dt * 100);
			}
		}
		if (o && w->has_cache && o->has_cache && w->vc_misses >= o->vc_misses &&
		    w->vc_hits >= o->vc_hits && w->vc_neg_hits >= o->vc_neg_hits) {
			uint64_t h = w->vc_hits + w->vc_neg_hits - o->vc_hits - o->vc_neg_hits;
			uint64_t m = w->vc_misses - o->vc_misses;

			if (h + m)
				snprintf(vc, sizeof(vc), "%.1f", 100.0 * (double)h / (double)(h + m));
		}
		for (int k = 0; k < b->nprocs; k++)
			if (b->procs[k].child && !strcmp(b->procs[k].role, "worker") &&
			    b->procs[k].index == w->worker) {
				double c = cpu_pct(a, ca, b, cb, k);

				if (c >= 0)
					snprintf(cpu, sizeof(cpu), "%.0f", c);
			}
		addl(f, "%-6u %9s %9s %7s %8s %6s %7s %5s", w->worker, e, r, sl, bufs, st, vc, cpu);
	}
	addl(f, "%s", "");
	addl(f, "%-13s %5s %8s %-9s %5s %6s %9s %8s", "MAINTENANCE", "INDEX", "PID", "STATE",
	     "CPU%", "QUEUE", "FLUSHES/S", "FLUSH%");
	for (int k = 0; k < b->nprocs; k++) {
		const struct sup_snap_proc *p = &b->procs[k];
		char cpu[16] = "-", q[16] = "-", fl[16] = "-", fp[16] = "-";
		double c;

		if (!p->child || !strcmp(p->role, "worker"))
			continue;
		if ((c = cpu_pct(a, ca, b, cb, k)) >= 0)
			snprintf(cpu, sizeof(cpu), "%.0f", c);
		if (!strcmp(p->role, "compactor")) {
			/* Its queue: the sealed buffers of its node's workers. */
			uint64_t qn = 0, fn = 0, fns = 0, ofn = 0, ofns = 0;

			for (int i = 0; i < b->nworkers; i++) {
				const struct sup_snap_worker *w = &b->workers[i], *o;

				if (!w->has_ctl || w->node != p->node)
					continue;
				qn += w->nsealed;
				fn += w->flushes;
				fns += w->flush_ns;
				if ((o = worker_in(a, w->worker))) {
					ofn += o->flushes;
					ofns += o->flush_ns;
				}
			}
			snprintf(q, sizeof(q), "%llu", (ull)qn);
			if (fn >= ofn && fns >= ofns) {
				snprintf(fl, sizeof(fl), "%.1f", (double)(fn - ofn) / dt);
				snprintf(fp, sizeof(fp), "%.0f", (double)(fns - ofns) / 1e9 / dt * 100);
			}
		}
		addl(f, "%-13s %5u %8d %-9s %5s %6s %9s %8s", p->role, p->index, p->pid,
		     sup_child_state_name(p->state), cpu, q, fl, fp);
	}
	if (b->has_ckpt) {
		addl(f, "%s", "");
		addl(f, "CHECKPOINTS %llu done %llu aborted  last %.0f ms max %.0f ms  "
			"files %llu linked %llu ref", (ull)b->ck_count, (ull)b->ck_aborted,
		     b->ck_last_ns / 1e6, b->ck_max_ns / 1e6, (ull)b->ck_links, (ull)b->ck_refs);
		extra = rows - f->n - 3;
		checkpoints(b, f, extra < 1 ? 1 : extra > 5 ? 5 : extra);
	}
	addl(f, "%s", "");
	addl(f, "q: quit");
}

static void term_restore(void)
{
	if (screen_on) {
		/* cursor shown, main screen back */
		fputs("\033[?25h\033[?1049l", stdout);
		fflush(stdout);
		screen_on = 0;
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
		tio_saved = 0;
	}
}

static void on_signal(int sig)
{
	stop_sig = sig;
}

static int term_enter(void)
{
	struct termios t;
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: poll() returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	atexit(term_restore);
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		t = saved_tio;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
			tio_saved = 1;
	}
	/* alternate screen, cursor hidden */
	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	screen_on = 1;
	return 0;
}

static void term_size(int *rows, int *cols)
{
	struct winsize ws;

	*rows = 24;
	*cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

/* Home, each line overwritten and cleared to its end, the rest of the
 * screen cleared; one write. */
static void draw(const struct frame *f, int rows, int cols)
{
	static char out[MAX_LINES * (LINE_MAX_BYTES + 8) + 16];
	size_t o = 0;

	o += (size_t)snprintf(out + o, sizeof(out) - o, "\033[H");
	for (int i = 0; i < f->n && i < rows; i++) {
		int len = (int)strlen(f->line[i]);

		if (len > cols)
			len = cols;
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%.*s\033[K%s", len, f->line[i],
				      i + 1 < f->n && i + 1 < rows ? "\r\n" : "");
	}
	o += (size_t)snprintf(out + o, sizeof(out) - o, "\033[J");
	fwrite(out, 1, o, stdout);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sfs top --job NAME [--once] [--interval-ms MS]\n"
		   "A live view of a running group, refreshed every MS (default 1000):\n"
		   "per worker events/s, records/s, buffer seals/s, buffers free/sealed/\n"
		   "retiring, stall share, value-cache hit rate and CPU; the compactor's\n"
		   "queue, flushes and CPU; the last checkpoints; recoveries.  q quits.\n"
		   "--once: one frame (two samples MS apart) without escape codes.\n");
}

/* Attach, snapshot, detach: the group as it is now; 0 or the attach error. */
static int sample(const char *job, struct sup_snap *s, struct cpu_sample *c)
{
	struct sfs_seg segs[SUP_SNAP_MAX_NODES];
	int nsegs, rc = sup_snap_attach(job, segs, &nsegs);

	if (rc)
		return rc;
	sup_snap_take(segs, nsegs, s);
	sup_snap_detach(segs, nsegs);
	cpu_take(s, c);
	return 0;
}

int sfs_cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "once", no_argument, NULL, 'o' },
		{ "interval-ms", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct sup_snap snaps[2];
	static struct cpu_sample cpus[2];
	static struct frame fr;
	const char *job = NULL;
	int once = 0, o, cur = 0, rows, cols, gone = 0, keys;
	long interval_ms = 1000;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'j': job = optarg; break;
		case 'o': once = 1; break;
		case 'i': interval_ms = sfs_arg_num("top", "--interval-ms", optarg, 50, 60000); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !job) {
		fprintf(stderr, "sfs top: %s\n", job ? "unexpected argument" : "--job is required");
		usage(stderr);
		return 2;
	}
	if (sfs_job_name_check(job)) {
		fprintf(stderr, "sfs top: %s\n", sfs_last_error());
		return 2;
	}
	if (sample(job, &snaps[0], &cpus[0])) {
		fprintf(stderr, "sfs top: %s\n", sfs_last_error());
		return 1;
	}
	if (once) {
		struct timespec ts = { interval_ms / 1000, (interval_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
		if (sample(job, &snaps[1], &cpus[1])) {
			fprintf(stderr, "sfs top: %s\n", sfs_last_error());
			return 1;
		}
		build(&snaps[0], &cpus[0], &snaps[1], &cpus[1], &fr, MAX_LINES);
		for (int i = 0; i < fr.n; i++)
			if (strcmp(fr.line[i], "q: quit"))
				printf("%s\n", fr.line[i]);
		return 0;
	}
	term_enter();
	/* The first frame after a short interval, then every interval_ms.
	 * Keys are read from a terminal only (stdin at EOF would end it at
	 * once: without one, a signal stops it). */
	keys = isatty(STDIN_FILENO);
	for (long wait_ms = interval_ms < 250 ? interval_ms : 250; !stop_sig;) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		int r = poll(&p, keys ? 1 : 0, (int)wait_ms);

		if (r < 0 && errno == EINTR)
			continue;	/* a signal: stop_sig says which */
		if (r > 0) {
			char c;
			ssize_t n = read(STDIN_FILENO, &c, 1);

			if (n == 0 || (n == 1 && (c == 'q' || c == 'Q')))
				break;
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				break;
			continue;	/* another key: keep the cadence roughly */
		}
		wait_ms = interval_ms;
		term_size(&rows, &cols);
		if (sample(job, &snaps[cur ^ 1], &cpus[cur ^ 1])) {
			fr.n = 0;
			addl(&fr, "sfs top - job %s: %s", job, sfs_last_error());
			addl(&fr, "(the group stopped, or is recovering: retrying)");
			addl(&fr, "%s", "");
			addl(&fr, "q: quit");
			draw(&fr, rows, cols);
			gone = 1;
			continue;
		}
		if (gone) {	/* back after a recovery: start the rates afresh */
			snaps[cur] = snaps[cur ^ 1];
			cpus[cur] = cpus[cur ^ 1];
			gone = 0;
		}
		build(&snaps[cur], &cpus[cur], &snaps[cur ^ 1], &cpus[cur ^ 1], &fr, rows);
		draw(&fr, rows, cols);
		cur ^= 1;
	}
	term_restore();
	return 0;
}
