/*
 * export.c — `sfs export --checkpoint DIR [--state NAME] [--format csv|jsonl]
 * [--out FILE] [--merge-lib PATH]`: the keyed state of a checkpoint or
 * savepoint as rows, read offline — the analog of Flink's State Processor
 * API.  One row per live entry:
 *
 *   worker, key_group, state, kind, namespace, key, user_key, value
 *
 * (user_key: a map entry's or list element's, empty otherwise; value: a
 * counter's folded int64 in decimal, else the bytes).  Bytes print as text
 * when every byte is printable ASCII and they do not start with "0x", else
 * as "0x" and lowercase hex, so "0x..." always means hex.  CSV has a header
 * and quotes per RFC 4180; JSONL writes one object per line with "key",
 * "user_key", "value" as JSON strings (or "key_hex", "user_key_hex",
 * "value_hex" for bytes that are not text; a counter's "value" is a number).
 *
 * How: the checkpoint's _metadata is read with every file's crc32c checked
 * (checkpointer/ckstore.h); its config names the backend (backend=) and
 * the state registry (states=, checkpointer/coord.c: id.kind.merge[:op].name),
 * which names the states and says how to fold them.  Each worker's files
 * are materialized in a temporary directory (sfs__ck_restore_worker, as a
 * restore does) and read with the flush target's own code through the
 * contract's scan (store/target.h), then removed.  Exit 0; 1 when a file
 * is missing or corrupt (one line naming it); 2 for bad arguments, a path
 * that is not a checkpoint, an unknown --state.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpointer/ckstore.h"
#include "checkpointer/coord.h"
#include "common/err.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/keygroup.h"
#include "common/merge.h"
#include "common/ttl.h"
#include "shm/segment.h"
#include "store/target.h"
#include "supervisor/sup.h"

#define USAGE "usage: sfs export --checkpoint DIR [--state NAME] [--format csv|jsonl] " \
	      "[--out FILE] [--merge-lib PATH] [--now MS]\n"

struct xp {
	FILE *out;
	int jsonl;
	int only;                    /* -1: every state, else its id */
	uint32_t worker;
	const struct sfs_state_desc *st;
	uint64_t rows;
	uint64_t now_ms;             /* TTL: the clock of processing-time states */
	int now_given;               /* --now: event-time states' clock too */
};

static const char *kind_name(uint32_t k)
{
	return k == SFS_STATE_VALUE ? "value" : k == SFS_STATE_COUNTER ? "counter" :
	       k == SFS_STATE_MAP ? "map" : k == SFS_STATE_LIST ? "list" : "?";
}

static int is_text(const unsigned char *p, size_t n)
{
	if (n >= 2 && p[0] == '0' && p[1] == 'x')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return 0;
	return 1;
}

static void put_hex(FILE *f, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

/* A CSV field of bytes: text (quoted when it holds , " or a space at an
 * end, "" for "), or 0x-hex. */
static void csv_bytes(FILE *f, const unsigned char *p, size_t n)
{
	if (!is_text(p, n)) {
		fputs("0x", f);
		put_hex(f, p, n);
		return;
	}
	if (memchr(p, ',', n) || memchr(p, '"', n) || (n && (p[0] == ' ' || p[n - 1] == ' '))) {
		fputc('"', f);
		for (size_t i = 0; i < n; i++) {
			if (p[i] == '"')
				fputc('"', f);
			fputc(p[i], f);
		}
		fputc('"', f);
		return;
	}
	fwrite(p, 1, n, f);
}

/* A JSON member "name": "text" or "name_hex": "hex". */
static void json_bytes(FILE *f, const char *name, const unsigned char *p, size_t n)
{
	if (!is_text(p, n)) {
		fprintf(f, ", \"%s_hex\": \"", name);
		put_hex(f, p, n);
		fputc('"', f);
		return;
	}
	fprintf(f, ", \"%s\": \"", name);
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '"' || p[i] == '\\')
			fputc('\\', f);
		fputc(p[i], f);
	}
	fputc('"', f);
}

static int row(void *arg, const struct sfs_scan_entry *e)
{
	struct xp *x = arg;
	const unsigned char *k = e->key, *key, *ukey = NULL;
	uint32_t sid, kg, klen, ulen = 0;
	const struct sfs_state_desc *d;
	const unsigned char *val;
	uint64_t expires = 0;
	int64_t ctr = 0;
	uint32_t vlen;
	int counter;

	if (e->klen < SFS_KEY_PREFIX)
		return sfs__err(SFS_ECORRUPT, "worker %u: a key of %u bytes", x->worker, e->klen);
	kg = sfs_key_prefix_kg(k);
	sid = sfs_key_prefix_state(k);
	if (sid >= SFS_MAX_STATES || x->st[sid].sd_state != SFS_SDESC_READY)
		return sfs__err(SFS_ECORRUPT, "worker %u: an entry of state %u, which the "
				"checkpoint's registry does not have", x->worker, sid);
	if (x->only >= 0 && sid != (uint32_t)x->only)
		return 0;
	d = &x->st[sid];
	key = k + SFS_KEY_PREFIX;
	klen = e->klen - SFS_KEY_PREFIX;
	if (d->sd_kind == SFS_STATE_MAP || d->sd_kind == SFS_STATE_LIST) {
		uint32_t plen = sfs_map_parent_len(k, e->klen);

		if (!plen)
			return sfs__err(SFS_ECORRUPT, "worker %u: state %s: an entry key without "
					"its map key", x->worker, d->sd_name);
		key = k + SFS_MAP_PREFIX;
		klen = plen - SFS_MAP_PREFIX;
		ukey = k + plen;
		ulen = e->klen - plen;
	}
	val = e->val;
	vlen = e->vlen;
	if (d->sd_ttl_ms) {
		int event = (d->sd_ttl_flags & SFS_TTL_EVENT_TIME) != 0;

		if (vlen < SFS_TTL_PREFIX)
			return sfs__err(SFS_ECORRUPT, "worker %u: state %s: a value of %u bytes "
					"without its expiry", x->worker, d->sd_name, vlen);
		expires = sfs_ttl_expiry_of(val);
		if ((!event || x->now_given) && sfs_ttl_expired(val, vlen, x->now_ms))
			return 0;
		val += SFS_TTL_PREFIX;
		vlen -= SFS_TTL_PREFIX;
	}
	counter = d->sd_kind == SFS_STATE_COUNTER && vlen == 8;
	if (counter)
		memcpy(&ctr, val, 8);
	if (!x->jsonl) {
		fprintf(x->out, "%u,%u,%s,%s,%" PRIu64 ",", x->worker, kg, d->sd_name,
			kind_name(d->sd_kind), e->ns);
		csv_bytes(x->out, key, klen);
		fputc(',', x->out);
		if (ukey)
			csv_bytes(x->out, ukey, ulen);
		fputc(',', x->out);
		if (counter)
			fprintf(x->out, "%" PRId64, ctr);
		else
			csv_bytes(x->out, val, vlen);
		fputs("\r\n", x->out);
	} else {
		fprintf(x->out, "{\"worker\": %u, \"key_group\": %u, \"state\": \"%s\", "
			"\"kind\": \"%s\", \"namespace\": %" PRIu64, x->worker, kg, d->sd_name,
			kind_name(d->sd_kind), e->ns);
		json_bytes(x->out, "key", key, klen);
		if (ukey)
			json_bytes(x->out, "user_key", ukey, ulen);
		if (counter)
			fprintf(x->out, ", \"value\": %" PRId64, ctr);
		else
			json_bytes(x->out, "value", val, vlen);
		if (d->sd_ttl_ms)
			fprintf(x->out, ", \"expires_ms\": %" PRIu64, expires);
		fputs("}\n", x->out);
	}
	x->rows++;
	return 0;
}

/* @path: a chk-<id> directory, its _metadata, or a storage root (its newest
 * valid checkpoint).  1: not a checkpoint at all; 0 with @m, @dir; < 0. */
static int find_checkpoint(const char *path, struct ck_meta *m, char *dir, size_t len)
{
	char meta[PATH_MAX + 16];
	struct stat sb;
	size_t n = strlen(path);

	if (n >= 10 && !strcmp(path + n - 10, "/_metadata")) {
		snprintf(dir, len, "%.*s", (int)(n - 10), path);
	} else if (!strcmp(path, "_metadata")) {
		snprintf(dir, len, ".");
	} else {
		snprintf(dir, len, "%s", path);
	}
	snprintf(meta, sizeof(meta), "%s/_metadata", dir);
	if (stat(meta, &sb) == 0)
		return sfs__ck_read(dir, NULL, 1, m);
	snprintf(meta, sizeof(meta), "%s/checkpoints", path);
	if (stat(meta, &sb) == 0 && S_ISDIR(sb.st_mode))	/* a data directory */
		path = meta;
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {	/* a storage root */
		int rc = sfs__ck_latest(path, NULL, 1, m, dir, len);

		return rc == -ENOENT ? 1 : rc;
	}
	return 1;
}

int sfs_cmd_export(int argc, char **argv)
{
	const char *path = NULL, *state = NULL, *format = "csv", *outp = NULL, *lib = NULL,
		   *now = NULL;
	static struct sfs_state_desc st[SFS_MAX_STATES];
	char dir[PATH_MAX], root[PATH_MAX + 4], tmp[PATH_MAX], wdir[PATH_MAX + 16], v[64];
	char *backend = NULL;
	const struct sfs_target_ops *t;
	struct xp x = { .only = -1 };
	struct ck_meta m = { 0 };
	int rc;

	for (int i = 1; i < argc; i++) {
		const char **opt = !strcmp(argv[i], "--checkpoint") ? &path :
				   !strcmp(argv[i], "--state") ? &state :
				   !strcmp(argv[i], "--format") ? &format :
				   !strcmp(argv[i], "--out") ? &outp :
				   !strcmp(argv[i], "--merge-lib") ? &lib :
				   !strcmp(argv[i], "--now") ? &now : NULL;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf(USAGE "  the state of a checkpoint or savepoint (chk-N) as rows:\n"
			       "  worker,key_group,state,kind,namespace,key,user_key,value\n"
			       "  bytes as text, or 0x-hex when not printable; counters as integers\n"
			       "  --now MS: the clock a TTL state's entries must be live at (default:\n"
			       "  the wall clock, for processing-time TTLs)\n");
			return 0;
		}
		if (!opt || i + 1 >= argc) {
			fprintf(stderr, "sfs export: %s '%s'\n" USAGE,
				opt ? "missing the value of" : "unknown argument", argv[i]);
			return 2;
		}
		*opt = argv[++i];
	}
	if (!path) {
		fprintf(stderr, "sfs export: --checkpoint DIR is required\n" USAGE);
		return 2;
	}
	if (strcmp(format, "csv") && strcmp(format, "jsonl")) {
		fprintf(stderr, "sfs export: --format '%s': want csv or jsonl\n", format);
		return 2;
	}
	x.jsonl = !strcmp(format, "jsonl");
	x.now_ms = sfs_now_realtime_ms();
	if (now) {
		char *end;

		errno = 0;
		x.now_ms = strtoull(now, &end, 10);
		if (!*now || *end || errno) {
			fprintf(stderr, "sfs export: --now '%s': want milliseconds\n", now);
			return 2;
		}
		x.now_given = 1;
	}
	if (lib && sfs_merge_load(lib)) {
		fprintf(stderr, "sfs export: %s\n", sfs_last_error());
		return 1;
	}
	if ((rc = find_checkpoint(path, &m, dir, sizeof(dir))) == 1) {
		fprintf(stderr, "sfs export: %s: not a checkpoint (no _metadata)\n", path);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "sfs export: %s\n", sfs_last_error());
		return 1;
	}
	if (sfs__ck_meta_config(&m, "backend", v, sizeof(v)) || !(backend = strdup(v)) ||
	    !(t = sup_backend_files(v))) {
		fprintf(stderr, "sfs export: %s: the checkpoint names no known backend ('%s')\n", dir,
			backend ? backend : "");
		rc = 1;
		goto out_meta;
	}
	if (!t->scan) {
		/* rocksdb-direct: its states live in the workers' RocksDB only, so
		 * its checkpoints carry no registry (states= is empty) to name
		 * them and say how to fold them */
		fprintf(stderr, "sfs export: %s: checkpoints of the %s backend cannot be read "
			"offline (no state registry; table, rocksdb and memory can)\n", dir,
			t->name);
		rc = 1;
		goto out_meta;
	}
	{
		/* states= is the config's last member and may exceed @v */
		const char *s = strstr(m.config, " states=");

		s = s ? s + 8 : (!strncmp(m.config, "states=", 7) ? m.config + 7 : NULL);
		if (s) {
			char reg[CK_CONFIG_MAX];

			snprintf(reg, sizeof(reg), "%.*s", (int)strcspn(s, " "), s);
			if (sfs__ck_coord_states_parse(reg, st)) {
				fprintf(stderr, "sfs export: %s: %s\n", dir, sfs_last_error());
				rc = 1;
				goto out_meta;
			}
		}
	}
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		if (st[i].sd_state != SFS_SDESC_READY)
			continue;
		if (state && !strcmp(st[i].sd_name, state))
			x.only = (int)i;
		if (st[i].sd_kind == SFS_STATE_COUNTER &&
		    sfs_merge_check(st[i].sd_merge, st[i].sd_merge_name, st[i].sd_name)) {
			fprintf(stderr, "sfs export: %s (--merge-lib PATH defines it)\n",
				sfs_last_error());
			rc = 1;
			goto out_meta;
		}
	}
	if (state && x.only < 0) {
		fprintf(stderr, "sfs export: --state '%s': the checkpoint has no such state\n", state);
		rc = 2;
		goto out_meta;
	}
	snprintf(root, sizeof(root), "%s/..", dir);
	snprintf(tmp, sizeof(tmp), "%s/sfs-export.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		fprintf(stderr, "sfs export: %s: %s\n", tmp, strerror(errno));
		rc = 1;
		goto out_meta;
	}
	x.out = outp ? fopen(outp, "w") : stdout;
	if (!x.out) {
		fprintf(stderr, "sfs export: %s: %s\n", outp, strerror(errno));
		rc = 1;
		goto out_tmp;
	}
	x.st = st;
	if (!x.jsonl)
		fputs("worker,key_group,state,kind,namespace,key,user_key,value\r\n", x.out);
	rc = 0;
	for (uint32_t w = 0; w < m.workers && !rc; w++) {
		snprintf(wdir, sizeof(wdir), "%s/w%u", tmp, w);
		x.worker = w;
		if ((rc = sfs__ck_restore_worker(&m, root, w, wdir)) == 0)
			rc = t->scan(wdir, st, row, &x);
		sfs_rmtree(wdir);
	}
	if (rc)
		fprintf(stderr, "sfs export: %s\n", sfs_last_error());
	if ((outp ? fclose(x.out) : fflush(x.out)) && !rc) {
		fprintf(stderr, "sfs export: %s: %s\n", outp ? outp : "stdout", strerror(errno));
		rc = 1;
	}
	rc = rc ? 1 : 0;
out_tmp:
	sfs_rmtree(tmp);
out_meta:
	free(backend);
	sfs__ck_meta_free(&m);
	return rc;
}
