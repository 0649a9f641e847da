/*
 * coord_states.c — the state registry as a checkpoint's config value
 * (coord.h: sfs__ck_coord_states, its parser and the restore), apart from the
 * coordinator so a harness links the parser alone (tests/fuzz/fuzz_states.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpointer/coord.h"
#include "common/err.h"
#include "common/merge.h"
#include "sfs.h"

int sfs__ck_coord_states(const struct sfs_seg *seg, char *buf, unsigned len)
{
	unsigned n = (unsigned)snprintf(buf, len, "states=");

	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		const struct sfs_state_desc *d = &seg->hdr->sh_states[i];
		uint64_t ttl;
		uint32_t tf;
		char ttlbuf[40] = "";

		if (sfs_load_acquire(&d->sd_state) != SFS_SDESC_READY)
			continue;
		if (strpbrk(d->sd_name, " /\n\t"))
			return sfs__err(SFS_EUSAGE, "state '%s': a name with a space or '/' cannot "
					"be checkpointed", d->sd_name);
		ttl = sfs_load_relaxed(&d->sd_ttl_ms);
		tf = sfs_load_relaxed(&d->sd_ttl_flags);
		if (ttl)
			snprintf(ttlbuf, sizeof(ttlbuf), "@%" PRIu64 "%s%s", ttl,
				 (tf & SFS_TTL_EVENT_TIME) ? "e" : "",
				 (tf & SFS_TTL_REFRESH_ON_READ) ? "r" : "");
		n += (unsigned)snprintf(buf + (n < len ? n : len), n < len ? len - n : 0,
					"%s%u.%u.%u%s%s%s.%s", n > 7 ? "/" : "", i, d->sd_kind,
					d->sd_merge, d->sd_merge_name[0] ? ":" : "",
					d->sd_merge_name, ttlbuf, d->sd_name);
		if (n >= len)
			return sfs__err(-E2BIG, "the state registry does not fit in a checkpoint's "
					"config (%u bytes)", len);
	}
	return 0;
}

int sfs__ck_coord_states_parse(const char *val, struct sfs_state_desc *st)
{
	const char *p = val;

	while (*p) {
		unsigned id, kind, merge;
		int used = 0;
		unsigned long long ttl = 0;
		uint32_t tflags = 0;
		const char *name, *q;
		char *end;
		struct sfs_state_desc *d;
		size_t nl, ml = 0;

		/* id.kind.merge[:opname][@ttl[e][r]].name: a user operator's
		 * name (never '.', '/' or '@': sfs_merge_define's charset) and
		 * a TTL ride along. */
		if (sscanf(p, "%u.%u.%u%n", &id, &kind, &merge, &used) != 3 || !used ||
		    id >= SFS_MAX_STATES || kind < SFS_STATE_VALUE || kind > SFS_STATE_LIST ||
		    (p[used] == ':' && ((ml = strcspn(p + used + 1, "./@")) == 0 ||
					ml >= SFS_MERGE_NAME_MAX)) ||
		    (kind != SFS_STATE_COUNTER && (merge || ml)))
			return sfs__err(SFS_ECORRUPT, "checkpoint state registry: bad entry at '%.40s'",
					p);
		q = p + used + (ml ? ml + 1 : 0);
		if (*q == '@') {
			errno = 0;
			ttl = strtoull(q + 1, &end, 10);
			if (end == q + 1 || errno || !ttl)
				return sfs__err(SFS_ECORRUPT, "checkpoint state registry: bad TTL at "
						"'%.40s'", q);
			q = end;
			for (; *q == 'e' || *q == 'r'; q++)
				tflags |= *q == 'e' ? SFS_TTL_EVENT_TIME : SFS_TTL_REFRESH_ON_READ;
		}
		if (*q != '.')
			return sfs__err(SFS_ECORRUPT, "checkpoint state registry: bad entry at '%.40s'",
					p);
		name = q + 1;
		nl = strcspn(name, "/");
		if (!nl || nl >= SFS_STATE_NAME_MAX)
			return sfs__err(SFS_ECORRUPT, "checkpoint state registry: bad name at '%.40s'",
					name);
		d = &st[id];
		memset(d, 0, sizeof(*d));
		memcpy(d->sd_merge_name, p + used + 1, ml);
		memcpy(d->sd_name, name, nl);
		d->sd_kind = kind;
		d->sd_merge = merge;
		d->sd_ttl_ms = ttl;
		d->sd_ttl_flags = tflags;
		d->sd_state = SFS_SDESC_READY;
		p = name + nl;
		if (*p == '/')
			p++;
	}
	return 0;
}

int sfs__ck_coord_states_restore(struct sfs_seg *seg, const char *val)
{
	static struct sfs_state_desc st[SFS_MAX_STATES];
	int rc;

	memset(st, 0, sizeof(st));
	if ((rc = sfs__ck_coord_states_parse(val, st)))
		return rc;
	for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
		struct sfs_state_desc *d = &seg->hdr->sh_states[i];

		if (st[i].sd_state != SFS_SDESC_READY)
			continue;
		/* This process set must fold the state as the checkpoint's did. */
		if (st[i].sd_kind == SFS_STATE_COUNTER &&
		    (rc = sfs_merge_check(st[i].sd_merge, st[i].sd_merge_name, st[i].sd_name)))
			return rc;
		memcpy(d->sd_name, st[i].sd_name, sizeof(d->sd_name));
		memcpy(d->sd_merge_name, st[i].sd_merge_name, sizeof(d->sd_merge_name));
		d->sd_kind = st[i].sd_kind;
		d->sd_merge = st[i].sd_merge;
		d->sd_ttl_ms = st[i].sd_ttl_ms;
		d->sd_ttl_flags = st[i].sd_ttl_flags;
		sfs_store_release(&d->sd_state, SFS_SDESC_READY);
	}
	return 0;
}
