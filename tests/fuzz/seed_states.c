/*
 * seed_states.c — writes fuzz_states' seed corpus into DIR: `states=`
 * values written by sfs__ck_coord_states, the checkpointer's writer, over a
 * registry in plain memory (one state; every kind; counters with built-in
 * and user operators; TTLs on either clock, refreshed on read or not;
 * sparse ids up to SFS_MAX_STATES - 1; names with dots and '@').  The
 * value is stored without its "states=" prefix, as the parser reads it.
 *
 *   seed_states DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpointer/coord.h"
#include "sfs.h"

struct st {
	uint32_t id, kind, merge;
	const char *op, *name;
	uint64_t ttl;
	uint32_t tf;
};

static const struct st sets[][6] = {
	{ { 0, SFS_STATE_VALUE, 0, "", "v", 0, 0 } },
	{ { 0, SFS_STATE_COUNTER, 0, "", "counts", 0, 0 }, { 1, SFS_STATE_VALUE, 0, "", "last", 0, 0 },
	  { 2, SFS_STATE_MAP, 0, "", "bids.by.auction", 0, 0 }, { 3, SFS_STATE_LIST, 0, "", "l", 0, 0 } },
	{ { 5, SFS_STATE_COUNTER, SFS_MERGE_MAX, "", "hi", 0, 0 },
	  { 9, SFS_STATE_COUNTER, SFS_MERGE_NOPS, "my_op-1", "custom@op", 0, 0 } },
	{ { 0, SFS_STATE_VALUE, 0, "", "ttl", 60000, 0 },
	  { 1, SFS_STATE_MAP, 0, "", "ev", 5, SFS_TTL_EVENT_TIME },
	  { 2, SFS_STATE_LIST, 0, "", "rr", 18446744073709551615ull,
	    SFS_TTL_EVENT_TIME | SFS_TTL_REFRESH_ON_READ },
	  { SFS_MAX_STATES - 1, SFS_STATE_COUNTER, SFS_MERGE_MIN, "", "last.one", 1,
	    SFS_TTL_REFRESH_ON_READ } },
};

int main(int argc, char **argv)
{
	static char buf[1 << 16];
	struct sfs_seg seg = { 0 };

	if (argc != 2) {
		fprintf(stderr, "usage: seed_states DIR\n");
		return 2;
	}
	if (!(seg.hdr = calloc(1, sizeof(*seg.hdr))))
		return 1;
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++) {
		char out[600];
		FILE *f;

		memset(seg.hdr->sh_states, 0, sizeof(seg.hdr->sh_states));
		for (size_t k = 0; k < 6 && sets[i][k].name; k++) {
			const struct st *s = &sets[i][k];
			struct sfs_state_desc *d = &seg.hdr->sh_states[s->id];

			d->sd_kind = s->kind;
			d->sd_merge = s->merge;
			snprintf(d->sd_merge_name, sizeof(d->sd_merge_name), "%s", s->op);
			snprintf(d->sd_name, sizeof(d->sd_name), "%s", s->name);
			d->sd_ttl_ms = s->ttl;
			d->sd_ttl_flags = s->tf;
			d->sd_state = SFS_SDESC_READY;
		}
		if (sfs__ck_coord_states(&seg, buf, sizeof(buf))) {
			fprintf(stderr, "seed_states: %s\n", sfs_last_error());
			return 1;
		}
		snprintf(out, sizeof(out), "%s/seed-%zu", argv[1], i);
		if (!(f = fopen(out, "wb")) || fputs(buf + 7, f) < 0 || fclose(f))
			return perror(out), 1;
	}
	free(seg.hdr);
	return 0;
}
