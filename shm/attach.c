/*
 * attach.c — the public attach API (include/sfs.h) for processes outside the
 * supervised group: map the job's segment and take a process-table slot as
 * a "client" reader that reports quiescent states like any worker.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/err.h"
#include "shm/handle.h"
#include "shm/qsbr.h"

int sfs_attach(const char *job, int node, unsigned flags, sfs_handle_t **out)
{
	sfs_handle_t *h = calloc(1, sizeof(*h));
	int rc;

	sfs__err_clear();
	if (!h)
		return sfs__err(-ENOMEM, "attach to job %s: no memory", job ? job : "(null)");
	rc = sfs_seg_attach(job, node, &h->seg);
	if (rc)
		goto fail;
	if (!(flags & SFS_ATTACH_OBSERVER)) {
		rc = sfs_proc_register(&h->seg, SFS_ROLE_CLIENT, 0, &h->slot);
		if (rc) {
			sfs_seg_detach(&h->seg);
			goto fail;
		}
	}
	*out = h;
	return 0;
fail:
	free(h);
	return rc;
}

int sfs_detach(sfs_handle_t *h)
{
	sfs__err_clear();
	if (!h)
		return sfs__err(SFS_EUSAGE, "sfs_detach: NULL handle");
	if (h->slot)
		sfs_proc_unregister(h->slot);
	sfs_seg_detach(&h->seg);
	free(h);
	return 0;
}

int sfs_region_find(sfs_handle_t *h, const char *name, void **ptr, uint64_t *size)
{
	uint64_t off, sz;
	int rc;

	sfs__err_clear();
	if (!h || !name || !ptr)
		return sfs__err(SFS_EUSAGE, "sfs_region_find: NULL argument");
	rc = sfs_seg_region_find(&h->seg, name, &off, &sz);
	if (rc)
		return rc == -ENOENT ? sfs__err(-ENOENT, "segment %s: no region '%s'", h->seg.path,
						  name) : rc;
	*ptr = sfs_seg_ptr(&h->seg, off);
	if (size)
		*size = sz;
	return 0;
}

void sfs_online(sfs_handle_t *h)
{
	if (h->slot)
		sfs_qsbr_online(h->seg.hdr, h->slot);
}

void sfs_quiescent(sfs_handle_t *h)
{
	if (h->slot) {
		sfs_qsbr_quiescent(h->seg.hdr, h->slot);
		/* The clock read costs ~35 ns, 90x the quiescent store. */
		if ((h->quiescents++ & 63) == 0)
			sfs_proc_heartbeat(h->slot);
	}
}

void sfs_offline(sfs_handle_t *h)
{
	if (h->slot)
		sfs_qsbr_offline(h->slot);
}
