/*
 * table_l0.c — a level 0 that is the sealed buffer's own bytes (knob
 * SFS_TABLE_L0_IMAGE=1; off by default): absorb() saves a whole sealed
 * write buffer as one image file (layout/bufimage.h: a header, the
 * buffer's index and arena byte for byte, crc32c) instead of sorting,
 * encoding and committing it at the barrier; the conversion turns the
 * oldest image into today's level-0 data commit later, through the same
 * apply and commit (table_write.c), so its result is exactly a flush's.
 *
 * What the barrier path costs with it: one crc32c pass and one writev of
 * the used buffer (header + 8 B x 2^k of index + the used arena), a
 * rename, and the list's rewrite (a few hundred bytes) — no sort, no
 * encoding, no LZ4, no map diff, no round.  What moves: all of those, to
 * the conversion, which the compactor's flush thread runs one step at a
 * time after each buffer it takes (compactor/flush.c, l0_step: a stage,
 * then a table's commit per step), not the maintenance thread: apply and
 * commit are the main thread's, and the merges' publication protocol
 * (commit_mu) stays as it is.  The worker waits only when L0_MAX images
 * wait (back-pressure) or while a conversion commits (below).
 *
 * The images a store holds: the list L0 in the instance directory, replaced
 * whole (layout/file.h: temp, rename; fsync per sync.h) after each image is
 * written and after each conversion, so its entries are always files that
 * exist and are whole:
 *
 *   [u64 magic "\3SFSL0L1"][u32 version 1][u32 n]
 *   n x [u64 seq][char name[SFS_TABLE_NAME], NUL-padded]
 *   [u32 crc32c of everything before]
 *
 * seqs strictly increasing, each above the store's applied seq when
 * written (an image at or below it was converted: a kill between the
 * commit and the list's rewrite; the next conversion drops it without
 * applying it again).  Images live in l0/ under the instance; names are
 * "i<random>.img" (sfs__tbl_new_name's), unique within the instance
 * whatever the seq (seqs restart at 1 after a restore).  An image not in the list (a kill after its rename,
 * before the list's) and a temp file are removed at open.
 *
 * Crash points (common/fault.h, kill only): table.l0.image (an image
 * written, the list not), table.l0.list (the list names it: absorbed),
 * table.l0.commit (its conversion committed, the list still names it).
 * Whatever the kill, the next open finds every absorbed buffer exactly
 * once: in the list (and converted later) or in the tables (applied seq).
 * A buffer whose absorb did not return is sealed still, and the compactor
 * absorbs it again (idempotent: a seq already listed or applied is done).
 *
 * Ordering with today's flush: images hold seqs in order, all above the
 * applied seq; apply/commit of a later buffer through the old path would
 * break that order, so the writer converts every image first
 * (sfs__tbl_l0_drain) before it stages, snapshots or applies anything the
 * old way.  Checkpoints (snapshot), rollback and reset therefore see no
 * image: snapshot drains first (the checkpoint's barrier pays the
 * conversion), rollback and reset drop every image (each is newer than
 * any staged version, which drained).  Checkpoints holding images as
 * shared files (immutable) are the next step, not this one.
 *
 * Readers.  The list is published in sfs_table_pub (tp_l0, under the
 * seqlock with the applied seq) before absorb returns, so before the
 * compactor retires the buffer.  Never while a conversion's commit is
 * under way (absorb says -EAGAIN then): that commit has committed some
 * tables of its image, not yet the applied seq, and a publication would
 * show a reader those rows beside the image (counters folded twice).  The
 * target's reader (table_read.c) maps each published image once (opened
 * shallow, as a sealed buffer in shared memory is trusted: bufimage.h;
 * the writer's open after a restart is deep), keeps one it
 * drops mapped until the next quiescent point, and hands the worker the
 * images newer than its tables, newest first (images(), worker/
 * target_read.h).  The worker reads them as further sealed buffers, below
 * its own and above the store (worker/state.c walk and value_bufs_any,
 * worker/mapstate.c layers): a counter's delta folds by seq over the
 * store's tag as a sealed buffer's does, so exactly once; an image whose
 * buffer the walk met still SEALED (published, not yet retired) is
 * skipped.  Not yet: queries from other processes (worker/query.c read
 * the worker's buffers and the store only, so they miss what is in an
 * image until its conversion), so the knob stays off where `sfs get` or
 * a Flink queryable state reads a running job.
 *
 * Threads: the list is the main thread's; the background thread reads it
 * when it publishes (a merge), so every change of w->l0 / w->nl0 after
 * open is made under pub_mu, which sfs__tbl_publish holds while it copies.
 *
 * TTL: a conversion drops what expired by the image's clocks (the seal's,
 * bufimage.h), by the rules the compactor last gave (ttl()), as the flush
 * does (compactor/flush.c ttl_drop, whose rule this mirrors).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "common/keygroup.h"
#include "common/ttl.h"
#include "shm/atomic.h"
#include "store/table/layout/bufimage.h"
#include "store/table/layout/file.h"
#include "store/table/table_int.h"
#include "worker/wbuf_ttl.h"

#define L0_MAGIC   0x314c304c53465303ull  /* "\3SFSL0L1" little-endian */
#define L0_VERSION 1u
#define L0_HEAD    16u
#define L0_REC     (8u + SFS_TABLE_NAME)
/* Images waiting for their conversion beyond which absorb says -EAGAIN:
 * the worker then waits for the conversion (back-pressure), as it waits
 * for today's flush; disk held: this many used buffers. */
#define L0_MAX     8u
_Static_assert(L0_MAX <= SFS_TABLE_PUB_L0, "every image is published");

static void l0_paths(const struct sfs_target_writer *w, char *list, size_t llen, char *dir,
		     size_t dlen)
{
	if (list)
		snprintf(list, llen, "%s/L0", w->base);
	if (dir)
		snprintf(dir, dlen, "%s/l0", w->base);
}

/* Write the list of w->l0[0..n) whole. */
static int l0_write(struct sfs_target_writer *w)
{
	size_t len = L0_HEAD + w->nl0 * L0_REC + 4;
	uint8_t *p = calloc(1, len);
	uint32_t n = (uint32_t)w->nl0, ver = L0_VERSION, crc;
	uint64_t magic = L0_MAGIC;
	char path[1024];
	int rc;

	if (!p)
		return -ENOMEM;
	memcpy(p, &magic, 8);
	memcpy(p + 8, &ver, 4);
	memcpy(p + 12, &n, 4);
	for (size_t i = 0; i < w->nl0; i++) {
		memcpy(p + L0_HEAD + i * L0_REC, &w->l0[i].seq, 8);
		memcpy(p + L0_HEAD + i * L0_REC + 8, w->l0[i].name, strlen(w->l0[i].name));
	}
	crc = sfs_crc32c(0, p, len - 4);
	memcpy(p + len - 4, &crc, 4);
	l0_paths(w, path, sizeof(path), NULL, 0);
	rc = sfs__layout_write(path, p, len, 0);
	free(p);
	return rc;
}

/* Parse the list at @path (@p, @len) into w->l0 (names and seqs only). */
static int l0_parse(struct sfs_target_writer *w, const char *path, const uint8_t *p, size_t len)
{
	uint64_t magic, prev = 0;
	uint32_t ver, n, crc;

	if (len < L0_HEAD + 4)
		return sfs__err(SFS_ECORRUPT, "%s: %zu bytes, shorter than an empty list", path, len);
	memcpy(&magic, p, 8);
	memcpy(&ver, p + 8, 4);
	memcpy(&n, p + 12, 4);
	memcpy(&crc, p + len - 4, 4);
	if (magic != L0_MAGIC)
		return sfs__err(SFS_EMAGIC, "%s: not a list of buffer images", path);
	if (ver != L0_VERSION)
		return sfs__err(SFS_EVERSION, "%s: list version %u, this build reads %u", path, ver,
				L0_VERSION);
	if (len != L0_HEAD + (uint64_t)n * L0_REC + 4 || crc != sfs_crc32c(0, p, len - 4))
		return sfs__err(SFS_ECORRUPT, "%s: %u images in %zu bytes, or crc32c wrong", path, n,
				len);
	if (!(w->l0 = calloc(n ? n : 1, sizeof(*w->l0))))
		return -ENOMEM;
	w->l0cap = n ? n : 1;
	for (uint32_t i = 0; i < n; i++) {
		struct sfs_tbl_l0 *e = &w->l0[i];
		const uint8_t *r = p + L0_HEAD + (size_t)i * L0_REC;
		size_t nl;

		memcpy(&e->seq, r, 8);
		memcpy(e->name, r + 8, SFS_TABLE_NAME);
		nl = strnlen(e->name, SFS_TABLE_NAME);
		if (nl == SFS_TABLE_NAME || !sfs__layout_name_ok(e->name) || e->seq <= prev ||
		    nl < 5 || strcmp(e->name + nl - 4, ".img"))
			return sfs__err(SFS_ECORRUPT, "%s: image %u (seq %" PRIu64 ") badly named or out"
					" of order", path, i, e->seq);
		prev = e->seq;
		w->nl0 = i + 1;
	}
	return 0;
}

/* Remove what l0/ holds besides the listed images (a kill between an
 * image's rename and the list's rewrite; temp files). */
static int l0_gc(struct sfs_target_writer *w)
{
	char dir[1024], path[1400];
	struct dirent *e;
	DIR *d;

	l0_paths(w, NULL, 0, dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : sfs__err(sfs__errno(), "%s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		size_t i;

		if (e->d_name[0] == '.')
			continue;
		for (i = 0; i < w->nl0 && strcmp(w->l0[i].name, e->d_name); i++)
			;
		if (i < w->nl0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		(void)unlink(path);
	}
	closedir(d);
	return 0;
}

int sfs__tbl_l0_load(struct sfs_target_writer *w)
{
	char path[1024], ipath[1400];
	uint8_t *p = NULL;
	size_t len = 0;
	int rc;

	l0_paths(w, path, sizeof(path), NULL, 0);
	rc = sfs__layout_read(path, &p, &len);
	if (rc == -ENOENT) {
		sfs__err_clear();
		return l0_gc(w);
	}
	if (rc)
		return rc;
	rc = l0_parse(w, path, p, len);
	free(p);
	for (size_t i = 0; !rc && i < w->nl0; i++) {
		snprintf(ipath, sizeof(ipath), "%s/l0/%s", w->base, w->l0[i].name);
		if (!(rc = sfs_bufimg_open(ipath, &w->l0[i].im)) &&
		    (w->l0[i].im->meta.seq != w->l0[i].seq || w->l0[i].im->meta.worker != w->worker))
			rc = sfs__err(SFS_ECORRUPT, "%s: image of worker %u seq %" PRIu64 ", the list"
				      " says worker %u seq %" PRIu64, ipath, w->l0[i].im->meta.worker,
				      w->l0[i].im->meta.seq, w->worker, w->l0[i].seq);
	}
	return rc ? rc : l0_gc(w);
}

void sfs__tbl_l0_free(struct sfs_target_writer *w)
{
	for (size_t i = 0; i < w->nl0; i++)
		sfs_bufimg_close(w->l0[i].im);
	free(w->l0);
	w->l0 = NULL;
	w->nl0 = w->l0cap = 0;
	free(w->l0_offs);
	free(w->l0_views);
	w->l0_offs = NULL;
	w->l0_views = NULL;
	w->l0_vcap = 0;
	w->l0_conv = 0;
}

int sfs__tbl_l0_wipe(const char *base)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/L0", base);
	if (unlink(path) && errno != ENOENT)
		return sfs__err(sfs__errno(), "%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/l0", base);
	return sfs_rmtree(path);
}

int sfs__tbl_absorb(struct sfs_target_writer *w, const struct sfs_wbuf *b,
		    const struct sfs_bufimg_meta *m)
{
	struct sfs_tbl_l0 e = { .seq = m->seq };
	char path[1400];
	int rc;

	if (m->seq <= w->applied)
		return 0;	/* applied before a kill: done */
	if (w->nl0 && m->seq <= w->l0[w->nl0 - 1].seq)
		return sfs__tbl_publish(w);	/* absorbed: its publication may have failed */
	if (w->nl0 == w->l0cap) {
		size_t cap = w->l0cap ? w->l0cap * 2 : 8;
		struct sfs_tbl_l0 *n;

		pthread_mutex_lock(&w->pub_mu);	/* the background thread publishes w->l0 */
		n = realloc(w->l0, cap * sizeof(*n));
		if (n) {
			w->l0 = n;
			w->l0cap = cap;
		}
		pthread_mutex_unlock(&w->pub_mu);
		if (!n)
			return -ENOMEM;
	}
	sfs__tbl_new_name(e.name, 0, "img");
	e.name[0] = 'i';   /* "i" + the random part: not a table's file */
	snprintf(path, sizeof(path), "%s/l0/%s", w->base, e.name);
	if ((rc = sfs_bufimg_write(path, b, m)))
		return rc;
	sfs_fault("table.l0.image");
	/* shallow: written from the buffer just now (bufimage.h); a restart
	 * opens it deep (sfs__tbl_l0_load) */
	if ((rc = sfs_bufimg_open_ex(path, SFS_BUFIMG_SHALLOW, &e.im))) {
		(void)unlink(path);
		return rc;
	}
	pthread_mutex_lock(&w->pub_mu);
	w->l0[w->nl0++] = e;
	pthread_mutex_unlock(&w->pub_mu);
	if ((rc = l0_write(w))) {
		pthread_mutex_lock(&w->pub_mu);
		w->nl0--;
		pthread_mutex_unlock(&w->pub_mu);
		sfs_bufimg_close(e.im);
		(void)unlink(path);
		return rc;
	}
	sfs_fault("table.l0.list");
	uatomic_inc(&w->pub->tp_l0_absorbed);
	/* before the compactor retires the buffer: a reader that sees it
	 * retired sees the image (store/target.h absorb) */
	return sfs__tbl_publish(w);
}

/*
 * An expired put of a TTL state in @v[0..n) becomes a delete (a value or
 * a counter) or is flagged SFS_WBUF_EXPIRED (a map or list entry): the
 * flush's rule (worker/wbuf_ttl.h), by the image's clocks @clk and the
 * rules ttl() last stored.  Returns the entries dropped.
 */
static uint64_t l0_ttl_drop(struct sfs_target_writer *w, struct sfs_wbuf_view *v, size_t n,
			    const struct sfs_ttl_clock *clk)
{
	uint64_t dropped = 0;

	if (!sfs_load_acquire(&w->ttl_on))
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct sfs_ttl_rule r = { 0 };
		uint32_t sid;

		if (v[i].klen < SFS_KEY_PREFIX || v[i].kind != SFS_WBUF_PUT ||
		    (sid = sfs_key_prefix_state(v[i].key)) >= SFS_MAX_STATES ||
		    !(r.ttl_ms = sfs_load_relaxed(&w->ttl_ms[sid])))
			continue;
		r.event_time = sfs_load_relaxed(&w->ttl_event[sid]);
		dropped += (uint64_t)sfs_wbuf_view_ttl_drop(&v[i], w->seg->hdr->sh_states[sid].sd_kind,
							    &r, clk);
	}
	return dropped;
}

/* Stage the oldest image: its entries sorted, TTL dropped, applied. */
static int l0_stage(struct sfs_target_writer *w)
{
	const struct sfs_bufimg *im = w->l0[0].im;
	struct sfs_ttl_clock clk = { im->meta.ttl_proc_ms, im->meta.ttl_event_ms };
	size_t n = (size_t)im->live;
	uint64_t dropped;
	int rc;

	if (n > w->l0_vcap) {
		uint64_t *o = realloc(w->l0_offs, n * sizeof(*o));
		struct sfs_wbuf_view *v = o ? realloc(w->l0_views, n * sizeof(*v)) : NULL;

		if (o)
			w->l0_offs = o;
		if (!v)
			return -ENOMEM;
		w->l0_views = v;
		w->l0_vcap = n;
	}
	if ((rc = sfs_wbuf_sorted(im->b, w->l0_offs, w->l0_vcap, &n)))
		return rc;
	for (size_t i = 0; i < n; i++)
		if ((rc = sfs_wbuf_view_at(im->b, w->l0_offs[i], &w->l0_views[i])))
			return rc;
	dropped = l0_ttl_drop(w, w->l0_views, n, &clk);
	if (n > UINT32_MAX)
		return sfs__err(SFS_EUSAGE, "image seq %" PRIu64 ": %zu entries", w->l0[0].seq, n);
	if (n && (rc = sfs__tbl_apply(w, w->l0_views, (unsigned)n, w->l0[0].seq)))
		return rc;
	uatomic_add(&w->pub->tp_l0_ttl_dropped, dropped);	/* once: a retry restages */
	return 0;
}

/* The oldest image is in the tables (or was before a kill): drop it from
 * the list, then its file. */
static int l0_pop(struct sfs_target_writer *w)
{
	struct sfs_tbl_l0 e = w->l0[0];
	char path[1400];
	int rc;

	pthread_mutex_lock(&w->pub_mu);
	memmove(w->l0, w->l0 + 1, (w->nl0 - 1) * sizeof(*w->l0));
	w->nl0--;
	pthread_mutex_unlock(&w->pub_mu);
	if ((rc = l0_write(w))) {
		pthread_mutex_lock(&w->pub_mu);
		memmove(w->l0 + 1, w->l0, w->nl0 * sizeof(*w->l0));
		w->l0[0] = e;
		w->nl0++;
		pthread_mutex_unlock(&w->pub_mu);
		return rc;
	}
	sfs_bufimg_close(e.im);
	snprintf(path, sizeof(path), "%s/l0/%s", w->base, e.name);
	(void)unlink(path);	/* a mapping outlives the name (bufimage.h) */
	uatomic_inc(&w->pub->tp_l0_converted);
	return sfs__tbl_publish(w);
}

int sfs__tbl_l0_convert(struct sfs_target_writer *w)
{
	uint64_t seq;
	int rc;

	if (!w->nl0)
		return 0;
	seq = w->l0[0].seq;
	if (seq <= w->applied)
		return (rc = l0_pop(w)) ? rc : 1;	/* committed before a kill */
	if (w->l0_conv != seq) {
		w->l0_conv = seq;	/* before apply: it drains images otherwise */
		if ((rc = l0_stage(w))) {
			w->l0_conv = 0;
			return rc;	/* apply went back to its save points */
		}
	}
	rc = sfs__tbl_commit(w, seq);
	if (rc == -EAGAIN)
		return 1;	/* tables remain: call again */
	if (rc)
		return rc;	/* retried: the rows stay staged */
	w->l0_conv = 0;
	sfs_fault("table.l0.commit");
	return (rc = l0_pop(w)) ? rc : 1;
}

int sfs__tbl_l0_drain(struct sfs_target_writer *w)
{
	int rc;

	while (w->nl0)
		if ((rc = sfs__tbl_l0_convert(w)) < 0)
			return rc;
	return 0;
}

int sfs__tbl_l0_drop(struct sfs_target_writer *w)
{
	char dir[1024];
	int rc;

	pthread_mutex_lock(&w->pub_mu);
	for (size_t i = 0; i < w->nl0; i++)
		sfs_bufimg_close(w->l0[i].im);
	w->nl0 = 0;
	pthread_mutex_unlock(&w->pub_mu);
	w->l0_conv = 0;
	if ((rc = l0_write(w)))
		return rc;	/* rollback and reset publish what follows */
	l0_paths(w, NULL, 0, dir, sizeof(dir));
	return l0_gc(w);
}

/* The target ops (store/target.h): -ENOTSUP unless the knob is on. */
int sfs__tbl_absorb_op(struct sfs_target_writer *w, const struct sfs_wbuf *b, uint64_t seq,
		       int at_barrier, const struct sfs_ttl_clock *clk)
{
	struct sfs_bufimg_meta m = { .worker = w->worker, .seq = seq, .ttl_proc_ms = clk->proc_ms,
				     .ttl_event_ms = clk->event_ms,
				     .flags = at_barrier ? SFS_BUFIMG_AT_BARRIER : 0 };

	if (!(w->knobs & SFS_TABLE_K_L0_IMAGE))
		return -ENOTSUP;
	/* A conversion's commit under way has committed some tables of its
	 * image, not the applied seq: a publication now would show readers
	 * those rows and the image both, and they would fold its counter
	 * deltas twice (table_int.h, commit_mu).  Its last table first. */
	if (w->in_commit)
		return -EAGAIN;
	if (w->nl0 >= L0_MAX && seq > w->l0[w->nl0 - 1].seq)
		return -EAGAIN;
	return sfs__tbl_absorb(w, b, &m);
}

int sfs__tbl_l0_step(struct sfs_target_writer *w)
{
	return w->nl0 ? sfs__tbl_l0_convert(w) : 0;
}
