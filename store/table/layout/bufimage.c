/*
 * bufimage.c — the writer and the strict reader of buffer images (format,
 * checks, durability and costs in bufimage.h).  The writer reads the
 * sealed buffer in shared memory and writes it with writev from there; the
 * reader maps the file read-only and hands the wbuf's own readers a buffer
 * it has validated whole.  Every system call of the writer passes a fault
 * point first (layout.bufimg.*, common/fault.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fs.h"
#include "store/table/layout/bufimage.h"
#include "store/table/layout/file.h"
#include "store/table/layout/sync.h"

#define WB_MIN_ARENA 64u  /* worker/wbuf.c: the least arena a buffer has */

static const uint8_t zeros[WB_MIN_ARENA];

/* Fault point @point: non-zero with errno set when a failure is injected. */
static int fault(const char *point)
{
	int e = sfs_fault(point);

	if (e)
		errno = -e;
	return e;
}

/* Bytes of the body of a buffer with the arena at @arena_off and its top
 * at @top: the used part, at least the least arena a buffer may have. */
static uint64_t body_len_of(uint64_t arena_off, uint64_t top)
{
	return top > arena_off + WB_MIN_ARENA ? top : arena_off + WB_MIN_ARENA;
}

static uint32_t hdr_crc(const struct sfs_bufimg_hdr *h)
{
	struct sfs_bufimg_hdr c = *h;

	c.bi_hdr_crc = 0;
	return sfs_crc32c(0, &c, sizeof(c));
}

/* writev until every byte of @iov[0..@n) is written (the iovecs are
 * consumed). */
static int writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w;

		if (fault("layout.bufimg.write"))
			return sfs__errno();
		w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return sfs__errno();
		if (w == 0)
			return -EIO;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int sfs_bufimg_write(const char *path, const struct sfs_wbuf *b, const struct sfs_bufimg_meta *m)
{
	static unsigned tmpseq;
	struct sfs_bufimg_hdr h;
	struct sfs_wbuf wh;
	struct sfs_wbuf *chk;
	struct iovec iov[5];
	char tmp[PATH_MAX], dir[PATH_MAX];
	uint64_t barrier, top, body;
	const char *slash;
	int fd, rc;

	if (!sfs_wbuf_sealed(b, &barrier) || (m->flags & ~SFS_BUFIMG_AT_BARRIER))
		return sfs__err(SFS_EUSAGE, "%s: buffer image of worker %u seq %" PRIu64
				": the buffer is not sealed, or flags %#x unknown", path, m->worker,
				m->seq, m->flags);
	/* The geometry is the buffer's own, as a reader in another process
	 * must trust it: checked so the copy stays inside the block. */
	if ((rc = sfs_wbuf_attach((void *)(uintptr_t)b, b->wb_size, &chk)))
		return sfs__err(rc, "%s: buffer image of worker %u seq %" PRIu64 ": the buffer: %s",
				path, m->worker, m->seq, sfs_last_error());
	top = sfs_load_relaxed(&b->wb_top);
	body = body_len_of(b->wb_arena_off, top);

	memcpy(&wh, b, sizeof(wh));
	wh.wb_size = body;   /* the one field that differs (bufimage.h) */
	memset(&h, 0, sizeof(h));
	h.bi_magic = SFS_BUFIMG_MAGIC;
	h.bi_version = SFS_BUFIMG_VERSION;
	h.bi_hdr_len = SFS_BUFIMG_HDR;
	h.bi_wbuf_layout = sfs_wbuf_layout();
	h.bi_wbuf_version = SFS_WBUF_VERSION;
	h.bi_worker = m->worker;
	h.bi_seq = m->seq;
	h.bi_ttl_proc_ms = m->ttl_proc_ms;
	h.bi_ttl_event_ms = m->ttl_event_ms;
	h.bi_flags = m->flags;
	h.bi_barrier = barrier;
	h.bi_bits = b->wb_bits;
	h.bi_arena_off = b->wb_arena_off;
	h.bi_top = top;
	h.bi_live = sfs_load_relaxed(&b->wb_live);
	h.bi_body_len = body;

	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ &wh, sizeof(wh) };
	iov[2] = (struct iovec){ (char *)(uintptr_t)b + SFS_WBUF_INDEX_OFF,
				 b->wb_arena_off - SFS_WBUF_INDEX_OFF };
	iov[3] = (struct iovec){ (char *)(uintptr_t)b + b->wb_arena_off, top - b->wb_arena_off };
	iov[4] = (struct iovec){ (void *)(uintptr_t)zeros, body - top };
	h.bi_body_crc = 0;
	for (int i = 1; i < 5; i++)
		h.bi_body_crc = sfs_crc32c(h.bi_body_crc, iov[i].iov_base, iov[i].iov_len);
	h.bi_hdr_crc = hdr_crc(&h);

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
		     __atomic_fetch_add(&tmpseq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp))
		return sfs__err(SFS_EUSAGE, "%s: path too long", path);
	slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1,
		 slash ? path : ".");
	for (int tries = 0;; tries++) {
		fd = fault("layout.bufimg.open") ? -1
						 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != ENOENT || tries)
			return sfs__err(sfs__errno(), "%s: create: %s", tmp, strerror(errno));
		if ((rc = sfs_mkdirs(dir, 0700)))   /* the first miss only; data: private */
			return rc;
	}
	if ((rc = writev_all(fd, iov, 5)))
		rc = sfs__err(rc, "%s: write: %s", tmp, strerror(-rc));
	else if (sfs_layout_sync() && (fault("layout.bufimg.fsync") || fsync(fd)))
		rc = sfs__err(sfs__errno(), "%s: fsync: %s", tmp, strerror(errno));
	else if (fault("layout.bufimg.rename") || rename(tmp, path))
		rc = sfs__err(sfs__errno(), "rename %s -> %s: %s", tmp, path, strerror(errno));
	close(fd);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	/* The name is durable only with its directory. */
	if (sfs_layout_sync() && fault("layout.bufimg.dirsync"))
		return sfs__err(sfs__errno(), "%s: fsync directory: %s", dir, strerror(errno));
	return sfs__layout_sync_dir(dir);
}

/* A failure of the wbuf's own check, re-said naming the image. */
static int wbuf_refused(const char *name, int rc, const char *what)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", sfs_last_error());
	return sfs__err(rc, "%s: buffer image: %s: %s", name, what, msg);
}

/* The checks of bufimage.h; @deep: the body's crc32c, the zero padding,
 * the occupied slots and sfs_wbuf_verify too. */
static int check(const char *name, const void *p, size_t len, struct sfs_bufimg_hdr *out, int deep)
{
	struct sfs_bufimg_hdr h;
	const struct sfs_wbuf *b;
	struct sfs_wbuf *att;
	const uint64_t *slots;
	uint64_t barrier, occupied = 0, nslots, gen;
	const uint8_t *body;
	int rc;

	if (len < SFS_BUFIMG_HDR)
		return sfs__err(SFS_ECORRUPT, "%s: buffer image of %zu bytes is shorter than its header",
				name, len);
	memcpy(&h, p, sizeof(h));
	if (h.bi_magic != SFS_BUFIMG_MAGIC)
		return sfs__err(SFS_EMAGIC, "%s: magic %#" PRIx64 ", expected %#llx (not a buffer image)",
				name, h.bi_magic, SFS_BUFIMG_MAGIC);
	if (h.bi_version != SFS_BUFIMG_VERSION)
		return sfs__err(SFS_EVERSION, "%s: buffer image format version %u, this build reads %u",
				name, h.bi_version, SFS_BUFIMG_VERSION);
	if (h.bi_hdr_crc != hdr_crc(&h))
		return sfs__err(SFS_ECORRUPT, "%s: buffer image header crc32c %#x, computed %#x", name,
				h.bi_hdr_crc, hdr_crc(&h));
	if (h.bi_hdr_len != SFS_BUFIMG_HDR || h.bi_pad0 || h.bi_pad1 || h.bi_reserved ||
	    (h.bi_flags & ~SFS_BUFIMG_AT_BARRIER))
		return sfs__err(SFS_ECORRUPT, "%s: buffer image header of %u bytes, flags %#x or"
				" reserved fields not zero", name, h.bi_hdr_len, h.bi_flags);
	if (h.bi_wbuf_version != SFS_WBUF_VERSION)
		return sfs__err(SFS_EVERSION, "%s: buffer image of write buffer format %u, this build"
				" has %u", name, h.bi_wbuf_version, SFS_WBUF_VERSION);
	if (h.bi_wbuf_layout != sfs_wbuf_layout())
		return sfs__err(SFS_ELAYOUT, "%s: buffer image of write buffer layout %#" PRIx64
				", this build has %#" PRIx64, name, h.bi_wbuf_layout, sfs_wbuf_layout());
	if (h.bi_body_len != len - SFS_BUFIMG_HDR)
		return sfs__err(SFS_ECORRUPT, "%s: buffer image body of %" PRIu64 " bytes, the file"
				" holds %zu (truncated or extended)", name, h.bi_body_len,
				len - SFS_BUFIMG_HDR);
	body = (const uint8_t *)p + SFS_BUFIMG_HDR;
	if (deep && h.bi_body_crc != sfs_crc32c(0, body, h.bi_body_len))
		return sfs__err(SFS_ECORRUPT, "%s: buffer image body crc32c %#x does not match", name,
				h.bi_body_crc);
	/* The buffer: its geometry first (nothing past the body is read). */
	if ((rc = sfs_wbuf_attach((void *)(uintptr_t)body, h.bi_body_len, &att)))
		return wbuf_refused(name, rc == SFS_EUSAGE ? SFS_ECORRUPT : rc, "the buffer");
	b = att;
	if (b->wb_size != h.bi_body_len || b->wb_bits != h.bi_bits ||
	    b->wb_arena_off != h.bi_arena_off || b->wb_top != h.bi_top || b->wb_live != h.bi_live ||
	    h.bi_body_len != body_len_of(h.bi_arena_off, h.bi_top))
		return sfs__err(SFS_ECORRUPT, "%s: buffer image: the buffer's size, index, arena, top or"
				" live count disagree with the image header", name);
	if (!sfs_wbuf_sealed(b, &barrier) || barrier != h.bi_barrier)
		return sfs__err(SFS_ECORRUPT, "%s: buffer image: the buffer is not sealed at barrier %"
				PRIu64, name, h.bi_barrier);
	if (!deep)
		goto ok;
	for (uint64_t o = h.bi_top; o < h.bi_body_len; o++)
		if (body[o])
			return sfs__err(SFS_ECORRUPT, "%s: buffer image: byte %" PRIu64 " past the arena"
					" top is not zero", name, o);
	/* Bound the verify's probes: an index fuller than the buffer allows
	 * is refused in one pass (a free slot ends every probe). */
	slots = sfs__wbuf_slots(b);
	nslots = (uint64_t)1 << b->wb_bits;
	gen = b->wb_gen;
	for (uint64_t i = 0; i < nslots; i++)
		occupied += sfs__wbuf_slot_gen(slots[i]) == gen;
	if (occupied > b->wb_max_entries || occupied != b->wb_live)
		return sfs__err(SFS_ECORRUPT, "%s: buffer image: %" PRIu64 " occupied slots, the header"
				" says %" PRIu64 " (at most %" PRIu64 ")", name, occupied, b->wb_live,
				b->wb_max_entries);
	if ((rc = sfs_wbuf_verify(b)))
		return wbuf_refused(name, rc, "the index");
ok:
	if (out)
		*out = h;
	return 0;
}

int sfs_bufimg_check(const char *name, const void *p, size_t len, struct sfs_bufimg_hdr *h)
{
	return check(name, p, len, h, 1);
}

int sfs_bufimg_open_ex(const char *path, unsigned flags, struct sfs_bufimg **out)
{
	struct sfs_bufimg_hdr h;
	struct sfs_bufimg *im;
	struct stat st;
	void *map;
	int fd, rc;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sfs__err(sfs__errno(), "%s: open: %s%s", path, strerror(errno),
				errno == ELOOP ? " (a symbolic link: never followed)" : "");
	if (fstat(fd, &st)) {
		rc = sfs__err(sfs__errno(), "%s: stat: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	if ((uint64_t)st.st_size < SFS_BUFIMG_HDR || !S_ISREG(st.st_mode)) {
		close(fd);
		return sfs__err(SFS_ECORRUPT, "%s: buffer image of %lld bytes is shorter than its header"
				" or not a file", path, (long long)st.st_size);
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = sfs__err(sfs__errno(), "%s: mmap: %s", path, strerror(errno));
		close(fd);
		return rc;
	}
	close(fd);
	if ((rc = check(path, map, (size_t)st.st_size, &h, !(flags & SFS_BUFIMG_SHALLOW)))) {
		munmap(map, (size_t)st.st_size);
		return rc;
	}
	if (!(im = calloc(1, sizeof(*im)))) {
		munmap(map, (size_t)st.st_size);
		return -ENOMEM;
	}
	im->b = (const struct sfs_wbuf *)((const char *)map + SFS_BUFIMG_HDR);
	im->worker = h.bi_worker;
	im->seq = h.bi_seq;
	im->barrier = h.bi_barrier;
	im->live = h.bi_live;
	im->meta = (struct sfs_bufimg_meta){ .worker = h.bi_worker, .seq = h.bi_seq,
					     .ttl_proc_ms = h.bi_ttl_proc_ms,
					     .ttl_event_ms = h.bi_ttl_event_ms, .flags = h.bi_flags };
	im->map = map;
	im->map_len = (size_t)st.st_size;
	*out = im;
	return 0;
}

int sfs_bufimg_open(const char *path, struct sfs_bufimg **out)
{
	return sfs_bufimg_open_ex(path, 0, out);
}

void sfs_bufimg_close(struct sfs_bufimg *im)
{
	if (!im)
		return;
	munmap(im->map, im->map_len);
	free(im);
}

void sfs__bufimg_reseal(void *p, size_t len)
{
	struct sfs_bufimg_hdr h;

	if (len < SFS_BUFIMG_HDR)
		return;
	memcpy(&h, p, sizeof(h));
	h.bi_body_crc = sfs_crc32c(0, (const uint8_t *)p + SFS_BUFIMG_HDR, len - SFS_BUFIMG_HDR);
	h.bi_hdr_crc = hdr_crc(&h);
	memcpy(p, &h, sizeof(h));
}
