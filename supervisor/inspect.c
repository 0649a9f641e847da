/*
 * inspect.c — `sfs inspect PATH [--json]`: look inside state on disk
 * without writing code.  PATH is one of
 *   a checkpoint   chk-<id> (or its _metadata): id, job, config, each
 *                  worker's kept bytes, table versions, every file with its
 *                  size, crc32c and whether it is shared; every file's
 *                  content checked against its crc32c;
 *   a table        a table directory of the table target (snapshot-*):
 *                  the snapshot chain on disk, the newest snapshot's
 *                  manifests, live files per level, deletion vectors; every
 *                  live data file opened (header, footer, checksums);
 *   a data file    a table data file: rows by kind, pages, codec, filter,
 *                  key and key-group range; every page read, decompressed
 *                  and checksummed, and the keys checked sorted;
 *   an index       a deletion-vector index (.dvi): its vectors.
 * Readers are the engine's own (store/table/layout/, checkpointer/ckstore.h):
 * each validates as it reads and names the file and what is wrong, which
 * is printed as is.  Exit 0 when everything checked is sound, 1 when
 * something is corrupt or missing, 2 for bad arguments.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpointer/ckstore.h"
#include "common/err.h"
#include "store/table/layout/datafile.h"
#include "store/table/layout/dvec.h"
#include "store/table/layout/manifest.h"
#include "supervisor/sup.h"

static int json;

static const char *codec_name(int c)
{
	return c == SFS_DF_LZ4 ? "lz4" : c == SFS_DF_ZSTD ? "zstd" : c == SFS_DF_NONE ? "none" : "?";
}

/* @n bytes as hex, at most 32 of them ("..." after). */
static void hex(FILE *f, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n && i < 32; i++)
		fprintf(f, "%02x", b[i]);
	if (n > 32)
		fprintf(f, "...");
}

/* A JSON string of bytes that may not be text: printable ASCII as is,
 * anything else \u00XX. */
static void jstr(FILE *f, const void *p, size_t n)
{
	const uint8_t *b = p;

	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '"' || b[i] == '\\')
			fprintf(f, "\\%c", b[i]);
		else if (b[i] >= 0x20 && b[i] < 0x7f)
			fputc(b[i], f);
		else
			fprintf(f, "\\u%04x", b[i]);
	}
	fputc('"', f);
}

static int bad(const char *what)
{
	fprintf(stderr, "sfs inspect: %s\n", what);
	return 1;
}

/* ---- a data file ----------------------------------------------------------------- */

struct df_check {
	uint64_t rows, puts, deletes, merges, key_bytes, value_bytes;
};

/* Every row, in order: pages decompressed and checksummed on the way. */
static int df_scan(sfs_df_reader_t *r, const char *path, struct df_check *c)
{
	struct sfs_df_row row;
	sfs_df_iter_t *it;
	uint8_t prev[SFS_MF_KEY_MAX];
	size_t plen = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = sfs_df_iter_range(r, NULL, 0, NULL, 0, NULL, 0, &it)))
		return rc;
	while ((rc = sfs_df_iter_next(it, &row)) == 1) {
		size_t m = row.klen < plen ? row.klen : plen;
		int cmp = memcmp(prev, row.key, m);

		if (c->rows && (cmp > 0 || (cmp == 0 && plen >= row.klen))) {
			rc = sfs__err(SFS_ECORRUPT, "%s: row %" PRIu64 " (position %" PRIu64 "): key "
				      "not above the previous one", path, c->rows, row.pos);
			break;
		}
		if (row.klen > sizeof(prev)) {
			rc = sfs__err(SFS_ECORRUPT, "%s: row %" PRIu64 ": key of %zu bytes", path,
				      c->rows, row.klen);
			break;
		}
		memcpy(prev, row.key, row.klen);
		plen = row.klen;
		c->rows++;
		c->key_bytes += row.klen;
		c->value_bytes += row.vlen;
		c->puts += row.kind == SFS_DF_PUT;
		c->deletes += row.kind == SFS_DF_DELETE;
		c->merges += row.kind == SFS_DF_MERGE;
	}
	sfs_df_iter_close(it);
	return rc < 0 ? rc : 0;
}

static int inspect_datafile(const char *path)
{
	struct sfs_df_meta m;
	struct df_check c;
	sfs_df_reader_t *r;
	int rc;

	if ((rc = sfs_df_reader_open(path, NULL, &r)))
		return bad(sfs_last_error());
	sfs_df_reader_meta(r, &m);
	rc = df_scan(r, path, &c);
	if (!rc && (c.rows != m.rows || c.puts != m.puts || c.deletes != m.deletes ||
		    c.merges != m.merges))
		rc = sfs__err(SFS_ECORRUPT, "%s: the footer says %" PRIu64 " rows (%" PRIu64 " puts, %"
			      PRIu64 " deletes, %" PRIu64 " merges), the pages hold %" PRIu64 " (%"
			      PRIu64 ", %" PRIu64 ", %" PRIu64 ")", path, m.rows, m.puts, m.deletes,
			      m.merges, c.rows, c.puts, c.deletes, c.merges);
	if (json) {
		printf("{\"kind\": \"data file\", \"path\": ");
		jstr(stdout, path, strlen(path));
		printf(", \"size\": %" PRIu64 ", \"rows\": %" PRIu64 ", \"puts\": %" PRIu64
		       ", \"deletes\": %" PRIu64 ", \"merges\": %" PRIu64 ", \"key_pages\": %u"
		       ", \"value_pages\": %u, \"codec\": \"%s\", \"prefix_filter_rule\": %u"
		       ", \"key_groups\": [%u, %u], \"min_key\": \"", m.file_size, m.rows, m.puts,
		       m.deletes, m.merges, m.key_pages, m.value_pages, codec_name(m.codec),
		       m.prefix_rule, m.kg_lo, m.kg_hi);
		hex(stdout, m.min_key, m.min_klen);
		printf("\", \"max_key\": \"");
		hex(stdout, m.max_key, m.max_klen);
		printf("\", \"key_bytes\": %" PRIu64 ", \"value_bytes\": %" PRIu64
		       ", \"checked\": %s}\n", c.key_bytes, c.value_bytes, rc ? "false" : "true");
	} else {
		printf("data file %s: %" PRIu64 " bytes, %" PRIu64 " rows (%" PRIu64 " puts, %" PRIu64
		       " deletes, %" PRIu64 " merges)\n", path, m.file_size, m.rows, m.puts, m.deletes,
		       m.merges);
		printf("  pages: %u key, %u value; codec %s; prefix filter %s (rule %u)\n",
		       m.key_pages, m.value_pages, codec_name(m.codec), m.prefix_rule ? "yes" : "no",
		       m.prefix_rule);
		printf("  key groups %u..%u; keys ", m.kg_lo, m.kg_hi);
		hex(stdout, m.min_key, m.min_klen);
		printf(" .. ");
		hex(stdout, m.max_key, m.max_klen);
		printf("\n  content: %" PRIu64 " key bytes, %" PRIu64 " value bytes; %s\n", c.key_bytes,
		       c.value_bytes, rc ? "NOT sound" : "every page checksummed, keys in order");
	}
	sfs_df_reader_close(r);
	return rc ? bad(sfs_last_error()) : 0;
}

/* ---- a deletion-vector index ------------------------------------------------------ */

static int inspect_dvec(const char *path)
{
	struct sfs_dv_info in;
	sfs_dv_index_t *ix;
	uint64_t deleted = 0;
	size_t n;

	if (sfs_dv_open(path, &ix))
		return bad(sfs_last_error());
	n = sfs_dv_count(ix);
	if (json) {
		printf("{\"kind\": \"deletion-vector index\", \"path\": ");
		jstr(stdout, path, strlen(path));
		printf(", \"vectors\": [");
	} else {
		printf("deletion-vector index %s: %zu vectors\n", path, n);
	}
	for (size_t i = 0; i < n; i++) {
		sfs_dv_info(ix, i, &in);
		deleted += in.deleted;
		if (json)
			printf("%s{\"file\": \"%s\", \"rows\": %" PRIu64 ", \"deleted\": %" PRIu64
			       ", \"bytes\": %u}", i ? ", " : "", in.file, in.rows, in.deleted, in.bytes);
		else
			printf("  %-48s %10" PRIu64 " rows %10" PRIu64 " deleted %8u bytes\n", in.file,
			       in.rows, in.deleted, in.bytes);
	}
	if (json)
		printf("], \"deleted\": %" PRIu64 "}\n", deleted);
	sfs_dv_close(ix);
	return 0;
}

/* ---- a table directory -------------------------------------------------------------- */

#define LEVELS 16

struct live_file {
	char name[SFS_LAYOUT_NAME_MAX + 1];
	uint32_t level;
	uint64_t rows, size;
	uint16_t kg_lo, kg_hi;
};

struct tbl_walk {
	const char *dir;
	struct live_file *f;
	size_t n, cap;
};

/* The live set: every ADD minus every DELETE of the same file and level,
 * over the base manifests then the delta, in order (manifest.h). */
static int tbl_entry(const struct sfs_mf_entry *e, void *arg)
{
	struct tbl_walk *w = arg;

	if (e->op == SFS_MF_DELETE) {
		for (size_t i = 0; i < w->n; i++)
			if (w->f[i].level == e->level && !strcmp(w->f[i].name, e->file)) {
				w->f[i] = w->f[--w->n];
				return 0;
			}
		return sfs__err(SFS_ECORRUPT, "%s: a manifest deletes %s at level %u, which is not "
				"live", w->dir, e->file, e->level);
	}
	if (w->n == w->cap) {
		struct live_file *p = realloc(w->f, (w->cap = w->cap * 2 + 16) * sizeof(*p));

		if (!p)
			return -ENOMEM;
		w->f = p;
	}
	snprintf(w->f[w->n].name, sizeof(w->f[w->n].name), "%s", e->file);
	w->f[w->n].level = e->level;
	w->f[w->n].rows = e->rows;
	w->f[w->n].size = e->size;
	w->f[w->n].kg_lo = e->kg_lo;
	w->f[w->n].kg_hi = e->kg_hi;
	w->n++;
	return 0;
}

static int by_level(const void *a, const void *b)
{
	const struct live_file *x = a, *y = b;

	return x->level != y->level ? (x->level > y->level) - (x->level < y->level)
				    : strcmp(x->name, y->name);
}

static int inspect_table(const char *dir)
{
	struct tbl_walk w = { .dir = dir };
	unsigned files[LEVELS] = { 0 }, broken = 0;
	uint64_t rows[LEVELS] = { 0 }, bytes[LEVELS] = { 0 };
	struct sfs_mf_snapshot s;
	uint64_t latest, oldest;
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if ((rc = sfs_mf_latest(dir, &latest)))
		return bad(sfs_last_error());
	if (!latest)
		return bad("no snapshot in the table directory");
	for (oldest = latest; oldest > 1; oldest--) {
		snprintf(path, sizeof(path), "%s/snapshot-%" PRIu64, dir, oldest - 1);
		if (stat(path, &st))
			break;
	}
	if ((rc = sfs_mf_snapshot_read(dir, latest, &s)))
		return bad(sfs_last_error());
	if (json) {
		printf("{\"kind\": \"table\", \"path\": ");
		jstr(stdout, dir, strlen(dir));
		printf(", \"snapshots\": [%" PRIu64 ", %" PRIu64 "], \"latest\": {\"id\": %" PRIu64
		       ", \"prev\": %" PRIu64 ", \"state\": %" PRIu64 ", \"kind\": \"%s\", "
		       "\"watermark\": %" PRIu64 ", \"base_list\": \"%s\", \"delta_list\": \"%s\", "
		       "\"delta_entries\": %" PRIu64 ", \"dv_index\": \"%s\"}, \"files\": [",
		       oldest, latest, s.id, s.prev_id, s.schema_id,
		       s.kind == SFS_MF_COMPACT ? "compact" : "data", s.watermark, s.base_list,
		       s.delta_list, s.delta_entries, s.dv_index);
	} else {
		printf("table %s: snapshots %" PRIu64 "..%" PRIu64 " on disk\n", dir, oldest, latest);
		printf("  latest: snapshot %" PRIu64 " (after %" PRIu64 "), state %" PRIu64 ", %s "
		       "commit, watermark %" PRIu64 "\n", s.id, s.prev_id, s.schema_id,
		       s.kind == SFS_MF_COMPACT ? "a compaction" : "a data", s.watermark);
		printf("  manifest lists: base %s, delta %s (%" PRIu64 " entries); deletion vectors: "
		       "%s\n", s.base_list, s.delta_list, s.delta_entries,
		       s.dv_index[0] ? s.dv_index : "none");
		printf("  live files:\n");
	}
	rc = sfs_mf_for_all(dir, &s, tbl_entry, &w);
	qsort(w.f, w.n, sizeof(*w.f), by_level);
	for (size_t i = 0; i < w.n; i++) {
		const struct live_file *e = &w.f[i];
		unsigned lv = e->level < LEVELS ? e->level : LEVELS - 1;
		sfs_df_reader_t *r;
		int ok;

		files[lv]++;
		rows[lv] += e->rows;
		bytes[lv] += e->size;
		snprintf(path, sizeof(path), "%s/%s", dir, e->name);
		ok = sfs_df_reader_open(path, NULL, &r) == 0;
		if (ok)
			sfs_df_reader_close(r);
		else
			fprintf(stderr, "sfs inspect: %s\n", sfs_last_error());
		broken += !ok;
		if (json)
			printf("%s{\"file\": \"%s\", \"level\": %u, \"rows\": %" PRIu64 ", \"size\": %"
			       PRIu64 ", \"key_groups\": [%u, %u], \"sound\": %s}", i ? ", " : "",
			       e->name, e->level, e->rows, e->size, e->kg_lo, e->kg_hi,
			       ok ? "true" : "false");
		else
			printf("  L%u %-44s %10" PRIu64 " rows %12" PRIu64 " bytes  kg %u..%u%s\n",
			       e->level, e->name, e->rows, e->size, e->kg_lo, e->kg_hi,
			       ok ? "" : "  CORRUPT");
	}
	if (json)
		printf("], \"levels\": [");
	for (unsigned lv = 0, first = 1; lv < LEVELS; lv++) {
		if (!files[lv])
			continue;
		if (json)
			printf("%s{\"level\": %u, \"files\": %u, \"rows\": %" PRIu64 ", \"bytes\": %"
			       PRIu64 "}", first ? "" : ", ", lv, files[lv], rows[lv], bytes[lv]);
		else
			printf("  level %u: %u files, %" PRIu64 " rows, %" PRIu64 " bytes\n", lv,
			       files[lv], rows[lv], bytes[lv]);
		first = 0;
	}
	if (json)
		printf("], \"files_corrupt\": %u}\n", broken);
	else if (s.dv_index[0]) {
		snprintf(path, sizeof(path), "%s/%s", dir, s.dv_index);
		if (inspect_dvec(path))
			broken++;
	}
	free(w.f);
	if (rc)
		return bad(sfs_last_error());
	return broken ? 1 : 0;
}

/* ---- a checkpoint --------------------------------------------------------------------- */

static int printable(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] >= 0x7f)
			return 0;
	return 1;
}

static int inspect_checkpoint(const char *path)
{
	struct ck_meta m;
	uint64_t shared = 0;

	if (sfs__ck_read(path, NULL, 1, &m))
		return bad(sfs_last_error());
	for (uint32_t i = 0; i < m.nfiles; i++)
		shared += m.files[i].shared;
	if (json) {
		printf("{\"kind\": \"checkpoint\", \"path\": ");
		jstr(stdout, path, strlen(path));
		printf(", \"format\": %u, \"id\": %" PRIu64 ", \"time_ms\": %" PRIu64 ", \"job\": ",
		       m.version, m.id, m.time_ms);
		jstr(stdout, m.job, strlen(m.job));
		printf(", \"workers\": %u, \"config\": ", m.workers);
		jstr(stdout, m.config, strlen(m.config));
		printf(", \"sink_epoch\": %" PRIu64 ", \"sources\": [", m.sink_epoch);
		for (uint32_t i = 0; i < m.nsources; i++) {
			printf("%s{\"worker\": %u, \"bytes\": ", i ? ", " : "", m.sources[i].worker);
			jstr(stdout, m.sources[i].bytes, m.sources[i].len);
			printf("}");
		}
		printf("], \"tables\": [");
		for (uint32_t i = 0; i < m.ntables; i++)
			printf("%s{\"worker\": %u, \"version\": %" PRIu64 "}", i ? ", " : "",
			       m.tables[i].worker, m.tables[i].version);
		printf("], \"files\": [");
		for (uint32_t i = 0; i < m.nfiles; i++)
			printf("%s{\"worker\": %u, \"local\": \"%s\", \"path\": \"%s\", \"size\": %"
			       PRIu64 ", \"crc32c\": \"0x%08x\", \"shared\": %s}", i ? ", " : "",
			       m.files[i].worker, m.files[i].local, m.files[i].path, m.files[i].size,
			       m.files[i].crc, m.files[i].shared ? "true" : "false");
		printf("], \"total_bytes\": %" PRIu64 ", \"new_bytes\": %" PRIu64
		       ", \"checked\": true}\n", m.total_bytes, m.new_bytes);
	} else {
		printf("checkpoint %" PRIu64 " of job %s (format %u): %u workers, %u files (%" PRIu64
		       " shared), %" PRIu64 " bytes (%" PRIu64 " new)\n", m.id, m.job, m.version,
		       m.workers, m.nfiles, shared, m.total_bytes, m.new_bytes);
		printf("  config: %s\n  sink epoch %" PRIu64 "\n", m.config, m.sink_epoch);
		for (uint32_t i = 0; i < m.nsources; i++) {
			const struct ck_source *x = &m.sources[i];

			printf("  worker %u kept %u bytes: ", x->worker, x->len);
			if (printable(x->bytes, x->len))
				printf("%.*s\n", (int)x->len, (const char *)x->bytes);
			else {
				hex(stdout, x->bytes, x->len);
				printf("\n");
			}
		}
		for (uint32_t i = 0; i < m.nsplits; i++)
			printf("  split %u at block %" PRIu64 " (format 1)\n", m.splits[i].split,
			       m.splits[i].offset);
		for (uint32_t i = 0; i < m.ntables; i++)
			printf("  worker %u: target version %" PRIu64 "\n", m.tables[i].worker,
			       m.tables[i].version);
		for (uint32_t i = 0; i < m.nfiles; i++)
			printf("  w%-3u %-8s %-40s %12" PRIu64 " bytes crc32c 0x%08x  %s\n",
			       m.files[i].worker, m.files[i].shared ? "shared" : "private",
			       m.files[i].local, m.files[i].size, m.files[i].crc, m.files[i].path);
		printf("  every file present, of its size and crc32c\n");
	}
	sfs__ck_meta_free(&m);
	return 0;
}

/* ---- dispatch -------------------------------------------------------------------------- */

static int has(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d)))
		found = !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return found;
}

static int magic_of(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "rb");
	size_t got;

	if (!f)
		return -errno;
	got = fread(buf, 1, n, f);
	fclose(f);
	return (int)got;
}

int sfs_cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	char head[16], meta[PATH_MAX];
	const char *base;
	struct stat st;
	int n;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: sfs inspect PATH [--json]\n"
			       "PATH: a checkpoint (chk-N or its _metadata), a table directory, a table\n"
			       "data file or a deletion-vector index.  Checks what it reads; exit 1\n"
			       "naming the file and the problem when something is corrupt.\n");
			return 0;
		} else if (argv[i][0] == '-' || path) {
			fprintf(stderr, "usage: sfs inspect PATH [--json]\n");
			return 2;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fprintf(stderr, "usage: sfs inspect PATH [--json]\n");
		return 2;
	}
	if (stat(path, &st)) {
		fprintf(stderr, "sfs inspect: %s: %s\n", path, strerror(errno));
		return 2;
	}
	base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	if (S_ISDIR(st.st_mode)) {
		snprintf(meta, sizeof(meta), "%s/_metadata", path);
		if (!stat(meta, &st))
			return inspect_checkpoint(path);
		if (has(path, "snapshot-") || has(path, "LATEST"))
			return inspect_table(path);
		fprintf(stderr, "sfs inspect: %s: neither a checkpoint (no _metadata) nor a table "
			"directory (no snapshot-*)\n", path);
		return 1;
	}
	if (!strcmp(base, "_metadata"))
		return inspect_checkpoint(path);
	n = magic_of(path, head, sizeof(head));
	if (n >= 8 && !memcmp(head, "SFSDATA", 8))
		return inspect_datafile(path);
	if (strlen(base) > 4 && !strcmp(base + strlen(base) - 4, ".dvi"))
		return inspect_dvec(path);
	if (strlen(base) > 4 && !strcmp(base + strlen(base) - 4, ".sst"))
		return inspect_datafile(path);	/* its reader names what is wrong */
	fprintf(stderr, "sfs inspect: %s: not a checkpoint, table data file, deletion-vector index "
		"or table directory (starts with %d bytes that are none of their magics)\n", path,
		n < 0 ? 0 : n);
	return 1;
}
