/*
 * write.c — the memory target's flush round (store/target.h: apply,
 * commit, ttl): a sealed buffer's entries applied to the store one by one
 * (a value put or delete, a counter merge, a map's run of puts, removes
 * and clears), idempotent through the store's tags; a commit publishes the
 * buffer's seq.  The store's side: mstore_write.c.
 *
 * Next: read.c.
 */
#include "common/err.h"
#include "common/keygroup.h"
#include "store/memory/memory_int.h"
#include "worker/wbuf.h"

static int kind_of(struct sfs_seg *s, const struct sfs_wbuf_view *v)
{
	const unsigned char *k = v->key;
	uint32_t sid;

	if (v->klen < SFS_KEY_PREFIX)
		return 0;
	sid = sfs_key_prefix_state(k);
	return sid < SFS_MAX_STATES ? (int)s->hdr->sh_states[sid].sd_kind : 0;
}

static unsigned merge_of(struct sfs_seg *s, const struct sfs_wbuf_view *v)
{
	uint32_t sid = sfs_key_prefix_state(v->key);

	return sid < SFS_MAX_STATES ? s->hdr->sh_states[sid].sd_merge : 0;
}

static int is_map(int kind)
{
	return kind == SFS_STATE_MAP || kind == SFS_STATE_LIST;
}


/*
 * The memory target's map run: each head with a clear drops the stored map
 * first; then every entry written after its namespace's clear is put or
 * removed one by one: the store sees only what changed.  Idempotent
 * through the store's tags.
 */
struct mem_run {
	struct sfs_target_writer *w;
	uint64_t seq;
};

static int mem_run_clear(void *arg, const struct sfs_wbuf_view *h, uint32_t plen)
{
	struct mem_run *m = arg;

	return sfs_mstore_map_clear(&m->w->m, h->hash, h->ns, h->key, plen, m->seq);
}

static int mem_run_entry(void *arg, const struct sfs_wbuf_view *e, uint32_t plen,
			 const struct sfs_wbuf_view *head, const void *val, uint32_t len)
{
	struct mem_run *m = arg;
	uint64_t ph = head ? head->hash : sfs_wbuf_hash(e->ns, e->key, plen);

	if (!val)
		return sfs_mstore_map_remove(&m->w->m, e->hash, e->ns, e->key, e->klen, m->seq);
	return sfs_mstore_map_put(&m->w->m, e->hash, ph, e->ns, e->key, e->klen, plen, val, len,
				  m->seq);
}

static int apply_map(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		     uint64_t seq)
{
	static const struct sfs_map_run_ops ops = { mem_run_clear, mem_run_entry };
	struct mem_run m = { w, seq };

	return sfs_map_run_walk(v, n, "memory target", &ops, &m);
}

int sfs__mem_apply(struct sfs_target_writer *w, const struct sfs_wbuf_view *v, unsigned n,
		   uint64_t seq)
{
	/* A batch's probes are independent misses in a big index: start them
	 * all (slots, then the records they name) before the first write. */
	for (unsigned i = 0; i < n; i++)
		sfs_mstore_prefetch(w->m.ms, v[i].hash);
	for (unsigned i = 0; i < n; i++)
		sfs_mstore_prefetch_rec(w->m.ms, v[i].hash);
	for (unsigned i = 0; i < n; i++) {
		int64_t d;
		int rc;

		if (is_map(kind_of(w->m.seg, &v[i]))) {
			rc = apply_map(w, &v[i], n - i, seq);
			if (rc < 0)
				return rc;
			i += (unsigned)rc - 1;
			continue;
		}
		switch (v[i].kind) {
		case SFS_WBUF_PUT:
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_PUT, 0, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, v[i].value, v[i].len, seq);
			break;
		case SFS_WBUF_DELETE:
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_DELETE, 0, v[i].hash, v[i].ns, v[i].key,
					      v[i].klen, NULL, 0, seq);
			break;
		case SFS_WBUF_MERGE:
			d = sfs_wbuf_view_i64(&v[i]);
			rc = sfs_mstore_apply(&w->m, SFS_MSTORE_MERGE, merge_of(w->m.seg, &v[i]),
					      v[i].hash, v[i].ns, v[i].key, v[i].klen, &d, 8, seq);
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

int sfs__mem_commit(struct sfs_target_writer *w, uint64_t seq)
{
	sfs_mstore_commit(&w->m, seq);
	return 0;
}

/* State TTL (store/target.h): the rules and clocks go to the store's
 * writer, whose semispace copies leave expired records behind (memory.h,
 * "State TTL"). */
void sfs__mem_ttl(struct sfs_target_writer *w, const struct sfs_ttl_rule *rules,
		  const struct sfs_ttl_clock *now)
{
	sfs_mstore_ttl(&w->m, rules, now);
}
