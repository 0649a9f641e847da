/*
 * fault.c — the fault-injection rules behind sfs_fault() (fault.h: the
 * grammar, the points and the rules of use).
 *
 * Design: a fixed array of rules, filled under a mutex and published by a
 * release store of their count, so a hit scans them without a lock; each
 * rule's hit count is an atomic RMW (the compactor's maintenance threads
 * pass the same points).  The fast path's flag, sfs__fault_on, starts at 1
 * so that the first point reads SFS_FAULT; after that it is 1 only while a
 * rule or the hook is armed.  Cost when armed: a strcmp per point name to
 * find it listed, then one per rule — nothing a test notices.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fault.h"

enum { ACT_KILL, ACT_FAIL, ACT_POWERLOSS };

#define POINT_MAX 48
#define RULE_TEXT_MAX 128

struct rule {
	char r_point[POINT_MAX];  /* as armed, a trailing '*' included */
	size_t r_plen;            /* bytes compared: before the '*' */
	int r_prefix;             /* 1: r_point ends in '*' */
	uint64_t r_n;             /* fires at this hit; 0 never */
	int r_repeat;             /* "n+": and at every later hit */
	int r_action;             /* ACT_* */
	int r_err;                /* ACT_FAIL: the positive errno */
	uint64_t r_hits;          /* atomic RMW, any thread */
};

/* Written under mu only; rules[0..nrules) are read without it after an
 * acquire load of nrules (a rule is filled before the count covers it). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[SFS_FAULT_RULES_MAX];
static unsigned nrules;
static int env_read;	/* release store under mu; acquire load on a hit */
static int (*hook_fn)(const char *point, void *arg);
static void *hook_arg;

int sfs__fault_on = 1;

static const struct {
	const char *name;
	int what;
} points[] = {
#define P(name, what, where) { name, what },
	SFS_FAULT_POINTS(P)
#undef P
};

#define NPOINTS (sizeof(points) / sizeof(points[0]))

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT }, { "EFBIG", EFBIG },
	{ "EROFS", EROFS }, { "ENOMEM", ENOMEM }, { "EACCES", EACCES }, { "ENOENT", ENOENT },
	{ "EEXIST", EEXIST }, { "EINTR", EINTR }, { "EAGAIN", EAGAIN }, { "EBUSY", EBUSY },
};

static int matches(const struct rule *r, const char *point)
{
	return r->r_prefix ? strncmp(point, r->r_point, r->r_plen) == 0 : strcmp(point, r->r_point) == 0;
}

static int known(const char *point)
{
	for (size_t i = 0; i < NPOINTS; i++)
		if (strcmp(points[i].name, point) == 0)
			return 1;
	return 0;
}

/* Under mu. */
static void flag_update(void)
{
	int on = !env_read || nrules || hook_fn;

	__atomic_store_n(&sfs__fault_on, on, __ATOMIC_RELAXED);
}

/* A decimal in [@min, @max] spanning @s..@end exactly. */
static int decimal(const char *s, const char *end, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == end)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Parse one rule (@txt, NUL-terminated) into @r; 0 or a reason for a human. */
static const char *parse_rule(char *txt, struct rule *r)
{
	char *c1 = strchr(txt, ':'), *c2, *nend;
	size_t plen;
	uint64_t v;
	int any = 0, killonly = 0;

	memset(r, 0, sizeof(*r));
	if (!c1)
		return "expected POINT:N[:ACTION]";
	plen = (size_t)(c1 - txt);
	if (plen == 0)
		return "no point named";
	if (plen >= POINT_MAX)
		return "point name too long";
	memcpy(r->r_point, txt, plen);
	r->r_prefix = r->r_point[plen - 1] == '*';
	r->r_plen = plen - (size_t)r->r_prefix;
	if (memchr(r->r_point, '*', r->r_plen))
		return "'*' only at the end of a point";
	for (size_t i = 0; i < NPOINTS; i++)
		if (matches(r, points[i].name)) {
			any = 1;
			killonly |= points[i].what == SFS_FAULT_KILL_ONLY;
		}
	if (!any)
		return r->r_prefix ? "no point has this prefix (fault.h lists them)" :
				     "no such point (fault.h lists them)";

	c2 = strchr(c1 + 1, ':');
	nend = c2 ? c2 : c1 + 1 + strlen(c1 + 1);
	if (nend > c1 + 1 && nend[-1] == '+') {
		r->r_repeat = 1;
		nend--;
	}
	if (decimal(c1 + 1, nend, r->r_repeat ? 1 : 0, UINT64_MAX / 2, &v))
		return r->r_repeat ? "N+ needs a decimal N >= 1" : "N must be a decimal hit count";
	r->r_n = v;

	r->r_action = ACT_KILL;
	if (!c2 || strcmp(c2 + 1, "kill") == 0)
		return NULL;
	if (strcmp(c2 + 1, "powerloss") == 0) {
		r->r_action = ACT_POWERLOSS;
		return NULL;
	}
	if (strncmp(c2 + 1, "fail=", 5) != 0)
		return "the action is kill, powerloss or fail=ERR";
	{
		const char *e = c2 + 6;

		for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]) && !r->r_err; i++)
			if (strcmp(e, errnames[i].name) == 0)
				r->r_err = errnames[i].err;
		if (!r->r_err && decimal(e, e + strlen(e), 1, 4095, &v) == 0)
			r->r_err = (int)v;
		if (!r->r_err)
			return "fail=ERR needs an errno name (EIO, ENOSPC, ...) or 1..4095";
	}
	if (killonly)
		return "a point it names is kill only: it cannot fail";
	r->r_action = ACT_FAIL;
	return NULL;
}

/*
 * The power goes off: tell the test's durability model (the LD_PRELOAD
 * shim of tests/powerloss/ records nothing more once the marker exists),
 * then SIGKILL the whole process group, this process and the supervisor
 * included (the test runs the group under setsid).  No fsync after this
 * point is seen; every process dies with what it has not synced.
 */
static void power_off(const char *point)
{
	const char *dir = getenv("SFS_POWERLOSS_DIR");
	char p[4096], line[128];
	int fd, n;

	if (dir && *dir && snprintf(p, sizeof(p), "%s/.powerloss", dir) < (int)sizeof(p) &&
	    (fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) >= 0) {
		n = snprintf(line, sizeof(line), "%d %s\n", (int)getpid(), point);
		if (write(fd, line, (size_t)n) < 0) {
			/* the kill below is what matters */
		}
		close(fd);
	}
	kill(0, SIGKILL);
	raise(SIGKILL);	/* not in the group's reach (never: kill(0) includes us) */
}

/* Add the rules of @spec; under mu.  @src names it in the message. */
static int arm_locked(const char *src, const char *spec)
{
	struct rule add[SFS_FAULT_RULES_MAX];
	unsigned n = 0;
	const char *s = spec;

	if (!spec || !*spec)
		return sfs__err(SFS_EUSAGE, "%s: empty", src);
	for (;;) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		char txt[RULE_TEXT_MAX];
		const char *why;

		if (len >= sizeof(txt))
			return sfs__err(SFS_EUSAGE, "%s: rule '%.*s...': too long", src, 40, s);
		memcpy(txt, s, len);
		txt[len] = 0;
		if (nrules + n >= SFS_FAULT_RULES_MAX)
			return sfs__err(SFS_EUSAGE, "%s: rule '%s': more than %d rules", src, txt,
					SFS_FAULT_RULES_MAX);
		if ((why = parse_rule(txt, &add[n])))
			return sfs__err(SFS_EUSAGE, "%s: rule '%s': %s", src, txt, why);
		n++;
		if (!end)
			break;
		s = end + 1;
	}
	memcpy(&rules[nrules], add, n * sizeof(add[0]));
	__atomic_store_n(&nrules, nrules + n, __ATOMIC_RELEASE);
	flag_update();
	return 0;
}

/* Read SFS_FAULT once; under mu.  A bad one ends the process. */
static void read_env_locked(void)
{
	const char *e;

	if (env_read)
		return;
	e = getenv("SFS_FAULT");
	if (e && *e && arm_locked("SFS_FAULT", e)) {
		fprintf(stderr, "sfs[%d]: %s\n", (int)getpid(), sfs_last_error());
		fflush(stderr);
		abort();
	}
	__atomic_store_n(&env_read, 1, __ATOMIC_RELEASE);
	flag_update();
}

int sfs__fault_hit(const char *point)
{
	int (*fn)(const char *, void *);
	unsigned n;
	int rc = 0;

	if (!__atomic_load_n(&env_read, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&mu);
		read_env_locked();
		pthread_mutex_unlock(&mu);
	}
	if (!known(point)) {
		fprintf(stderr, "sfs[%d]: fault point '%s' is not listed in common/fault.h\n",
			(int)getpid(), point);
		fflush(stderr);
		abort();
	}
	fn = __atomic_load_n(&hook_fn, __ATOMIC_ACQUIRE);
	if (fn && (rc = fn(point, hook_arg)))
		return rc;
	n = __atomic_load_n(&nrules, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++) {
		struct rule *r = &rules[i];
		uint64_t h;

		if (!matches(r, point))
			continue;
		h = __atomic_add_fetch(&r->r_hits, 1, __ATOMIC_RELAXED);
		if (rc || !r->r_n || (h != r->r_n && !(r->r_repeat && h > r->r_n)))
			continue;
		if (r->r_action == ACT_KILL)
			raise(SIGKILL);	/* never returns: SIGKILL cannot be caught */
		if (r->r_action == ACT_POWERLOSS)
			power_off(point);	/* never returns either */
		rc = sfs__err(-r->r_err, "fault injected at %s: %s", point, strerror(r->r_err));
	}
	return rc;
}

int sfs_fault_arm(const char *spec)
{
	int rc;

	pthread_mutex_lock(&mu);
	read_env_locked();
	rc = arm_locked("sfs_fault_arm", spec);
	pthread_mutex_unlock(&mu);
	return rc;
}

void sfs_fault_reset(void)
{
	pthread_mutex_lock(&mu);
	__atomic_store_n(&nrules, 0, __ATOMIC_RELEASE);
	memset(rules, 0, sizeof(rules));
	__atomic_store_n(&hook_fn, NULL, __ATOMIC_RELEASE);
	hook_arg = NULL;
	__atomic_store_n(&env_read, 0, __ATOMIC_RELEASE);
	flag_update();
	pthread_mutex_unlock(&mu);
}

uint64_t sfs_fault_hits(const char *pattern)
{
	unsigned n = __atomic_load_n(&nrules, __ATOMIC_ACQUIRE);
	uint64_t sum = 0;

	for (unsigned i = 0; i < n; i++)
		if (strcmp(rules[i].r_point, pattern) == 0)
			sum += __atomic_load_n(&rules[i].r_hits, __ATOMIC_RELAXED);
	return sum;
}

void sfs_fault_hook(int (*fn)(const char *point, void *arg), void *arg)
{
	pthread_mutex_lock(&mu);
	hook_arg = arg;
	__atomic_store_n(&hook_fn, fn, __ATOMIC_RELEASE);
	flag_update();
	pthread_mutex_unlock(&mu);
}
