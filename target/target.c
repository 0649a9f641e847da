/*
 * target.c — the table of flush targets, and the memory target's entry in
 * it (target/memory.c holds the store itself).
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "target/memory.h"
#include "target/target.h"

/* ---- memory target: thin adapters over target/memory.c ---------------- */

struct sfs_target_writer {
	struct sfs_mstore_writer m;
};

struct sfs_target_reader {
	struct sfs_seg *seg;
	uint32_t worker;
	struct sfs_mstore *ms;   /* NULL until the compactor created it */
};

static int mem_open(struct sfs_seg *s, uint32_t worker, const struct sfs_proc_slot *self,
		    const struct sfs_target_cfg *cfg, struct sfs_target_writer **out)
{
	struct sfs_target_writer *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	rc = sfs_mstore_open(s, worker, cfg->store_bytes, self, &w->m);
	if (rc) {
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

static int mem_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq)
{
	for (unsigned i = 0; i < n; i++) {
		int64_t d;
		int rc;

		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_PUT, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, v[i].value, v[i].len, seq);
			break;
		case SFS_WBUF_DELETE:
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_DELETE, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, NULL, 0, seq);
			break;
		case SFS_WBUF_MERGE:
			d = sfs_wbuf_view_i64(&v[i]);
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_ADD, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, &d, 8, seq);
			break;
		default:
			rc = sfs__err(SFS_ECORRUPT, "memory target: entry of unknown kind %u",
				      v[i].kind);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int mem_commit(struct sfs_target_writer *w, uint64_t seq)
{
	sfs_mstore_commit(&w->m, seq);
	return 0;
}

static int mem_busy(struct sfs_target_writer *w)
{
	return sfs_mstore_pending(&w->m);
}

static int mem_files(struct sfs_target_writer *w, int (*fn)(void *arg, const char *path), void *arg)
{
	(void)w;
	(void)fn;
	(void)arg;
	return 0;	/* all in memory: a checkpoint serializes the store */
}

static void mem_close(struct sfs_target_writer *w)
{
	sfs_mstore_close(&w->m);
	free(w);
}

static int mem_reader_open(struct sfs_seg *s, uint32_t worker, struct sfs_target_reader **out)
{
	struct sfs_target_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->seg = s;
	r->worker = worker;
	*out = r;
	return 0;
}

/* The store is read in place: catching up only finds it once it exists. */
static int mem_catch_up(struct sfs_target_reader *r)
{
	if (!r->ms)
		return sfs_mstore_attach(r->seg, r->worker, &r->ms);
	return 0;
}

static int mem_probe(struct sfs_target_reader *r, const struct sfs_probe *keys, unsigned n,
		     struct sfs_probe_result *res)
{
	if (!r->ms)
		mem_catch_up(r);
	for (unsigned i = 0; i < n; i++) {
		struct sfs_mstore_view v;

		res[i].found = r->ms && sfs_mstore_get(r->ms, keys[i].hash, keys[i].ns, keys[i].key,
						       keys[i].klen, &v);
		res[i].value = res[i].found ? v.value : NULL;
		res[i].len = res[i].found ? v.len : 0;
		res[i].tag = res[i].found ? v.tag : 0;
	}
	return 0;
}

static void mem_reader_close(struct sfs_target_reader *r)
{
	free(r);
}

const struct sfs_target_ops sfs_target_memory = {
	.name = "memory",
	.open = mem_open,
	.apply = mem_apply,
	.commit = mem_commit,
	.busy = mem_busy,
	.files = mem_files,
	.close = mem_close,
	.reader_open = mem_reader_open,
	.catch_up = mem_catch_up,
	.probe = mem_probe,
	.reader_close = mem_reader_close,
};

/* ---- the table ---------------------------------------------------------------- */

static const struct sfs_target_ops *const targets[] = { &sfs_target_memory };

const struct sfs_target_ops *sfs_target_find(const char *name)
{
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
		if (strcmp(targets[i]->name, name) == 0)
			return targets[i];
	return NULL;
}

const struct sfs_target_ops *sfs_target_of(const struct sfs_seg *s)
{
	const char *b = s->hdr->sh_backend;

	return sfs_target_find(b[0] ? b : "memory");
}
