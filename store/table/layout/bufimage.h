/*
 * bufimage.h — a sealed write buffer saved as it is: the level 0 the
 * compactor can write at a barrier at memcpy speed (one file per worker
 * and barrier), readable in place by the workers' readers, restore and the
 * first background merge, which turns images into sorted, compressed data
 * files (datafile.h).  Sorting, encoding and compression leave the barrier
 * path; the image is what a crash or a checkpoint finds until then.
 *
 * File layout (little-endian, this build's struct layouts):
 *
 *   [struct sfs_bufimg_hdr, 128 B]  identity, geometry, lengths, crc32c of
 *                                   the body and of the header itself
 *   [body: bi_body_len bytes]       the sealed buffer (worker/wbuf.h) from
 *                                   its first byte up to its arena top:
 *                                   its 128-byte header, the index of 2^k
 *                                   slots, the used arena, byte for byte;
 *                                   zero bytes after the top up to the
 *                                   wbuf's least arena (64 B) if shorter
 *
 * One field of the copied wbuf header differs from the buffer in memory:
 * wb_size is the body's length, not the shm block's, so the wbuf's own
 * readers (sfs_wbuf_get, _next, _view_at, _sorted), which bound every
 * offset they follow by wb_size, never step past the file's end.  The body
 * starts at file offset 128, so a mapping (page-aligned) puts the wbuf at
 * the 64-byte alignment sfs_wbuf_attach asks for.
 *
 * What the reader checks before it hands out the buffer (nothing is
 * followed first): the file's length against the header's, the magic, the
 * image format version, the header's crc32c, the wbuf version and layout
 * fingerprint of this build (the buffer's hash places keys in its index:
 * a build with another SFS_WBUF_VERSION or layout refuses the file with
 * SFS_EVERSION / SFS_ELAYOUT naming it), the body's crc32c, then the
 * buffer itself: sfs_wbuf_attach (geometry), the copied header agrees with
 * the file header (sealed at bi_barrier, the same 2^k, top and live count),
 * and sfs_wbuf_verify (every occupied slot names a whole, valid entry
 * inside the used arena, reachable from its home slot, once; the live
 * count).  An image that passes is exactly what the wbuf's readers accept
 * from a sealed buffer, and they are read-only (the mapping is PROT_READ:
 * a write would fault, tests/test_bufimage.c reads through one).
 *
 * Costs.  Writing: one header crc, one crc32c pass over the body (~10
 * GB/s with SSE4.2), one writev of three pieces from the shm buffer (no
 * copy in user space), and the durability points below.  Opening deep:
 * a crc32c pass and the verify below; shallow (sfs_bufimg_open_ex): the
 * header only.  The index is
 * written whole: 8 B x 2^k whatever the fill (a buffer sized for many more
 * keys than a barrier writes pays for its empty slots on disk; stale slots
 * of earlier lives of the buffer, whose generation is not the current one,
 * are written as they are and read as free).  Opening: a crc32c pass and
 * the O(slots x probe) verify, once per process per image.
 *
 * Durability (the writer): the file is written whole to
 * "<path>.tmp.<pid>.<n>", fsynced (while sfs_layout_sync(): sync.h),
 * renamed into place, and its directory fsynced (same rule).  A crash
 * leaves at most the temp file or the whole image, never a short file
 * under the final name while sync is on; the owner of the directory
 * removes "*.tmp.*" names when it opens it (no temp file survives a
 * restart to be taken for an image: they never end in the image suffix).
 * Fault points before each step: layout.bufimg.open, .write, .fsync,
 * .rename, .dirsync (common/fault.h), so tests fail or kill at each.
 *
 * Immutability: an image is never rewritten or truncated, only unlinked
 * (a mapping outlives its name); so a reader's mapping cannot SIGBUS.
 */
#ifndef SFS_LAYOUT_BUFIMAGE_H
#define SFS_LAYOUT_BUFIMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "worker/wbuf.h"

#define SFS_BUFIMG_MAGIC   0x314d494246535303ull /* "\3SFSBIM1" little-endian */
#define SFS_BUFIMG_VERSION 1u
#define SFS_BUFIMG_HDR     128u

struct sfs_bufimg_hdr {
	uint64_t bi_magic;        /* SFS_BUFIMG_MAGIC */
	uint32_t bi_version;      /* SFS_BUFIMG_VERSION */
	uint32_t bi_hdr_len;      /* SFS_BUFIMG_HDR: the body's offset */
	uint64_t bi_wbuf_layout;  /* sfs_wbuf_layout() of the writing build */
	uint32_t bi_wbuf_version; /* SFS_WBUF_VERSION of the writing build */
	uint32_t bi_worker;       /* the worker whose buffer this was */
	uint64_t bi_seq;          /* the buffer's flush sequence number */
	uint64_t bi_barrier;      /* the barrier that sealed it */
	uint32_t bi_bits;         /* the index has 2^bi_bits slots */
	uint32_t bi_pad0;
	uint64_t bi_arena_off;    /* first arena byte, from the body's start */
	uint64_t bi_top;          /* end of the used arena, from the body's start */
	uint64_t bi_live;         /* live keys (occupied slots) */
	uint64_t bi_body_len;     /* bytes after the header: the file is 128 + this */
	uint32_t bi_body_crc;     /* crc32c of the body */
	uint32_t bi_hdr_crc;      /* crc32c of these 128 bytes with this field 0 */
	uint64_t bi_ttl_proc_ms;  /* the worker's clocks at the seal (worker/wctl.h */
	uint64_t bi_ttl_event_ms; /*   cb_ttl): what the first merge drops TTL by */
	uint32_t bi_flags;        /* SFS_BUFIMG_AT_BARRIER or 0 */
	uint32_t bi_pad1;
	uint64_t bi_reserved;     /* 0 */
};

/* bi_flags: sealed by a barrier (cb_at_barrier), not spilled. */
#define SFS_BUFIMG_AT_BARRIER 0x1u

/* What the writer records besides the buffer (the seal's context, which
 * the buffer itself does not hold: worker/wctl.h's struct sfs_wctl_buf). */
struct sfs_bufimg_meta {
	uint32_t worker;          /* the worker whose buffer it is */
	uint64_t seq;             /* its flush sequence number (cb_seq) */
	uint64_t ttl_proc_ms;     /* cb_ttl.proc_ms */
	uint64_t ttl_event_ms;    /* cb_ttl.event_ms */
	uint32_t flags;           /* SFS_BUFIMG_AT_BARRIER if cb_at_barrier */
};

_Static_assert(sizeof(struct sfs_bufimg_hdr) == SFS_BUFIMG_HDR, "image header is 128 bytes");

/*
 * sfs_bufimg_write - save the sealed buffer @b (a reader's view of it: not
 * modified) as the image @path, with the seal's context @m.  @path's
 * directory is created if missing.  0, or an error naming the file (the
 * buffer is not sealed, or @m's flags unknown: SFS_EUSAGE; I/O: the
 * errno).  A failure leaves no file at @path that was not there (an
 * existing one is replaced only whole).
 */
int sfs_bufimg_write(const char *path, const struct sfs_wbuf *b, const struct sfs_bufimg_meta *m);

/* An opened image: the mapping and what its header says.  Read-only. */
struct sfs_bufimg {
	const struct sfs_wbuf *b;  /* the sealed buffer, in the mapping */
	uint32_t worker;
	uint64_t seq;
	uint64_t barrier;
	uint64_t live;
	struct sfs_bufimg_meta meta;  /* worker, seq, clocks, flags (as written) */
	size_t map_len;
	void *map;
};

/*
 * sfs_bufimg_open - map @path read-only and check everything (above).  0
 * and *@out (free with sfs_bufimg_close), or SFS_EMAGIC, SFS_EVERSION,
 * SFS_ELAYOUT, SFS_ECORRUPT, or the errno of open/stat/mmap; the message
 * names @path.  A symbolic link is refused (O_NOFOLLOW).
 */
int sfs_bufimg_open(const char *path, struct sfs_bufimg **out);

/*
 * sfs_bufimg_open_ex - sfs_bufimg_open with @flags: SFS_BUFIMG_SHALLOW
 * checks the header (crc32c included), the buffer's geometry (attach),
 * the seal and the header's agreement with the buffer, not the body's
 * crc32c nor the index (no pass over the body: O(1) but the mapping).
 * What that trusts is what a reader of a sealed buffer in shared memory
 * trusts: the wbuf's readers bound every offset they follow and every
 * probe (a corrupt index gives SFS_ECORRUPT or a miss, never a wild
 * access; fuzz_bufimg reads shallow-opened images too), but a flipped
 * value byte reads as it is.  For the live path only (an image written
 * by this group moments ago, converted soon): the compactor's conversion
 * and the workers' readers; anything that adopts an image from disk
 * later (open after a restart, restore, scan) opens it deep.
 */
#define SFS_BUFIMG_SHALLOW 0x1u
int sfs_bufimg_open_ex(const char *path, unsigned flags, struct sfs_bufimg **out);

/* Unmap and free; NULL is a no-op. */
void sfs_bufimg_close(struct sfs_bufimg *im);

/*
 * sfs_bufimg_check - the same checks on @len bytes at @p, an image already
 * in memory (@p 64-byte aligned), named @name in messages.  On success the
 * buffer is at @p + SFS_BUFIMG_HDR and *@h (may be NULL) is a copy of the
 * header.  For the fuzzers' regression tests and the open above.
 */
int sfs_bufimg_check(const char *name, const void *p, size_t len, struct sfs_bufimg_hdr *h);

/* Test and fuzz hook: recompute both crcs of the image at @p (@len bytes)
 * when its header's lengths allow, so mutations reach the later checks. */
void sfs__bufimg_reseal(void *p, size_t len);

#endif
