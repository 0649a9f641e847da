/*
 * get.c — `sfs get`: read one key of a running job's state from outside
 * the group, through the public queryable-state API (include/sfs.h,
 * worker/query.c): attach as a client, go online, read, go offline,
 * detach.  The answer is the key's state as of the owning worker's newest
 * sealed buffer (its last barrier or spill), never a write it has not
 * sealed yet.
 *
 * Exit codes: 0 found, 1 absent, 2 bad arguments, no such job, unknown
 * state or any other error (one line on stderr).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfs.h"
#include "common/err.h"
#include "shm/segment.h"
#include "supervisor/nodes.h"
#include "supervisor/sup.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sfs get --job NAME --state NAME (--key K | --key-hex HEX) [--ns N]\n"
		"               [--ukey U | --ukey-hex HEX] [--json]\n"
		"\n"
		"Read one key of a running job's state, from outside the group, as of the\n"
		"owning worker's newest sealed buffer (its last barrier): a value, a\n"
		"counter, or a map's entries (one user key with --ukey).\n"
		"\n"
		"  --job NAME      the running job\n"
		"  --state NAME    the state (e.g. q18.last)\n"
		"  --key K         the key's bytes as text; --key-hex HEX as hex (binary keys)\n"
		"  --ns N          the namespace (default 0)\n"
		"  --ukey U        map state: one user key (--ukey-hex HEX as hex)\n"
		"  --json          one JSON object\n"
		"\n"
		"Values print as text when printable, else as hex (0x...).  Exit 0 found,\n"
		"1 absent, 2 bad arguments, no such job, unknown state or another error.\n");
}

/* Decode @hex (an optional 0x, pairs of hex digits) into @out; its length or -1. */
static long unhex(const char *hex, unsigned char *out, size_t cap)
{
	size_t n = 0;

	if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X'))
		hex += 2;
	for (; hex[0]; hex += 2) {
		char b[3] = { hex[0], hex[1], 0 };
		char *end;

		if (!isxdigit((unsigned char)hex[0]) || !isxdigit((unsigned char)hex[1]) || n == cap)
			return -1;
		out[n++] = (unsigned char)strtoul(b, &end, 16);
	}
	return (long)n;
}

static int printable(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (!isprint(b[i]) && b[i] != '\t')
			return 0;
	return 1;
}

/* Text if printable (JSON: a string, escaped), else 0x + hex (JSON: a
 * string "0x..."). */
static void print_bytes(const void *p, size_t n, int json)
{
	const unsigned char *b = p;

	if (printable(p, n)) {
		if (json)
			putchar('"');
		for (size_t i = 0; i < n; i++) {
			if (json && (b[i] == '"' || b[i] == '\\'))
				putchar('\\');
			if (json && b[i] == '\t')
				fputs("\\t", stdout);
			else
				putchar(b[i]);
		}
		if (json)
			putchar('"');
		return;
	}
	fputs(json ? "\"0x" : "0x", stdout);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	if (json)
		putchar('"');
}

struct entries {
	int json;
	unsigned n;
};

static int print_entry(void *arg, const void *uk, uint32_t ul, const void *v, uint32_t vl)
{
	struct entries *e = arg;

	if (e->json) {
		fputs(e->n ? ", {\"ukey\": " : "{\"ukey\": ", stdout);
		print_bytes(uk, ul, 1);
		fputs(", \"value\": ", stdout);
		print_bytes(v, vl, 1);
		putchar('}');
	} else {
		print_bytes(uk, ul, 0);
		putchar('=');
		print_bytes(v, vl, 0);
		putchar('\n');
	}
	e->n++;
	return 0;
}

static const char *kind_name(int kind)
{
	switch (kind) {
	case SFS_STATE_VALUE: return "value";
	case SFS_STATE_COUNTER: return "counter";
	case SFS_STATE_MAP: return "map";
	case SFS_STATE_LIST: return "list";
	default: return "?";
	}
}

struct get_args {
	const char *job, *state;
	unsigned char *key, *ukey;
	size_t klen, ulen;
	int has_ukey, json;
	uint64_t ns;
};

/* Map state without --ukey: the entries are printed as they come, so the
 * JSON object is opened before the read. */
static int get_map_all(sfs_query_t *q, const struct get_args *a)
{
	struct entries e = { a->json, 0 };
	int rc;

	if (a->json)
		printf("{\"job\": \"%s\", \"state\": \"%s\", \"kind\": \"map\", \"key\": ", a->job,
		       a->state);
	if (a->json)
		print_bytes(a->key, a->klen, 1);
	if (a->json)
		printf(", \"ns\": %llu, \"entries\": [", (unsigned long long)a->ns);
	rc = sfs_query_map_iter(q, a->ns, a->key, a->klen, print_entry, &e);
	if (a->json && rc >= 0)
		printf("], \"seq\": %llu, \"found\": %s}\n", (unsigned long long)sfs_query_seq(q),
		       e.n ? "true" : "false");
	if (rc < 0)
		return rc;
	if (!e.n && !a->json)
		printf("absent\n");
	return e.n ? 1 : 0;
}

/* One read: 1 found (printed), 0 absent, < 0 error. */
static int get_one(sfs_query_t *q, const struct get_args *a)
{
	int kind = sfs_query_kind(q), rc;
	struct sfs_view v = { 0 };
	int64_t n = 0;

	if (kind == SFS_STATE_MAP && !a->has_ukey)
		return get_map_all(q, a);
	if (kind == SFS_STATE_VALUE)
		rc = sfs_query_value(q, a->ns, a->key, a->klen, &v);
	else if (kind == SFS_STATE_COUNTER)
		rc = sfs_query_counter(q, a->ns, a->key, a->klen, &n);
	else if (kind == SFS_STATE_MAP)
		rc = sfs_query_map_get(q, a->ns, a->key, a->klen, a->ukey, a->ulen, &v);
	else
		return sfs__err(SFS_EUSAGE, "state '%s' is %s state: sfs get reads value, counter "
				"and map state", a->state, kind_name(kind));
	if (rc < 0)
		return rc;
	if (a->json) {
		printf("{\"job\": \"%s\", \"state\": \"%s\", \"kind\": \"%s\", \"key\": ", a->job,
		       a->state, kind_name(kind));
		print_bytes(a->key, a->klen, 1);
		if (a->has_ukey) {
			fputs(", \"ukey\": ", stdout);
			print_bytes(a->ukey, a->ulen, 1);
		}
		printf(", \"ns\": %llu, \"seq\": %llu, \"found\": %s", (unsigned long long)a->ns,
		       (unsigned long long)sfs_query_seq(q), rc ? "true" : "false");
		if (rc && kind == SFS_STATE_COUNTER) {
			printf(", \"value\": %lld", (long long)n);
		} else if (rc) {
			fputs(", \"value\": ", stdout);
			print_bytes(v.data, v.len, 1);
		}
		printf("}\n");
	} else if (!rc) {
		printf("absent\n");
	} else if (kind == SFS_STATE_COUNTER) {
		printf("%lld\n", (long long)n);
	} else {
		print_bytes(v.data, v.len, 0);
		putchar('\n');
	}
	return rc;
}

int sfs_cmd_get(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "state", required_argument, NULL, 's' },
		{ "key", required_argument, NULL, 'k' },
		{ "key-hex", required_argument, NULL, 'K' },
		{ "ns", required_argument, NULL, 'n' },
		{ "ukey", required_argument, NULL, 'u' },
		{ "ukey-hex", required_argument, NULL, 'U' },
		{ "json", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static unsigned char kb[SFS_KEY_MAX], ub[SFS_KEY_MAX];
	struct get_args a = { .key = kb, .ukey = ub };
	const char *key = NULL, *khex = NULL, *uk = NULL, *uhex = NULL;
	char why[512] = "";
	int o, rc = 0, nodes = sfs_node_count();
	char *end;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'j': a.job = optarg; break;
		case 's': a.state = optarg; break;
		case 'k': key = optarg; break;
		case 'K': khex = optarg; break;
		case 'u': uk = optarg; break;
		case 'U': uhex = optarg; break;
		case 'J': a.json = 1; break;
		case 'n':
			errno = 0;
			a.ns = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end || optarg[0] == '-') {
				fprintf(stderr, "sfs get: --ns: '%s' is not an unsigned number\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !a.job || !a.state || !key == !khex || (uk && uhex)) {
		fprintf(stderr, "sfs get: %s\n",
			optind != argc ? "unexpected argument"
			: !a.job       ? "--job is required"
			: !a.state     ? "--state is required"
			: !key == !khex ? "one of --key and --key-hex is required"
					: "--ukey and --ukey-hex exclude each other");
		usage(stderr);
		return 2;
	}
	if (sfs_job_name_check(a.job)) {
		fprintf(stderr, "sfs get: %s\n", sfs_last_error());
		return 2;
	}
	if (key) {
		a.klen = strlen(key);
		if (a.klen > sizeof(kb)) {
			fprintf(stderr, "sfs get: --key: longer than %zu bytes\n", sizeof(kb));
			return 2;
		}
		memcpy(kb, key, a.klen);
	} else {
		long n = unhex(khex, kb, sizeof(kb));

		if (n < 0) {
			fprintf(stderr, "sfs get: --key-hex: '%s' is not an even number of hex "
				"digits (at most %zu bytes)\n", khex, sizeof(kb));
			return 2;
		}
		a.klen = (size_t)n;
	}
	if (uk || uhex) {
		long n = uk ? (long)strlen(uk) : unhex(uhex, ub, sizeof(ub));

		if (n <= 0 || (size_t)n > sizeof(ub)) {
			fprintf(stderr, "sfs get: --ukey%s: an empty, too long or malformed user key\n",
				uk ? "" : "-hex");
			return 2;
		}
		if (uk)
			memcpy(ub, uk, (size_t)n);
		a.ulen = (size_t)n;
		a.has_ukey = 1;
	}
	/* The owning worker may live in any node's segment: try each. */
	for (int node = 0; node < nodes; node++) {
		sfs_handle_t *h;
		sfs_query_t *q;

		rc = sfs_attach(a.job, node, 0, &h);
		if (rc) {
			if (rc == -ENOENT)
				fprintf(stderr, "sfs get: no such job '%s' (%s)\n", a.job,
					sfs_last_error());
			else
				fprintf(stderr, "sfs get: %s\n", sfs_last_error());
			return 2;
		}
		rc = sfs_query_open(h, a.state, &q);
		if (rc == 0) {
			if (sfs_query_kind(q) != SFS_STATE_MAP && a.has_ukey) {
				rc = sfs__err(SFS_EUSAGE, "--ukey: state '%s' is %s state, not map",
					      a.state, kind_name(sfs_query_kind(q)));
			} else {
				sfs_online(h);
				rc = get_one(q, &a);
				sfs_offline(h);
			}
			sfs_query_close(q);
		}
		/* the message before sfs_detach, which starts with a clear one */
		if (rc < 0)
			snprintf(why, sizeof(why), "%s", sfs_last_error());
		sfs_detach(h);
		if (rc != -EXDEV)
			break;
	}
	if (rc < 0) {
		fprintf(stderr, "sfs get: %s\n", why);
		return 2;
	}
	return rc ? 0 : 1;
}
