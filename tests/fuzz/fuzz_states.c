/*
 * fuzz_states.c — libFuzzer target for the state registry as checkpointed
 * (checkpointer/coord_states.c: sfs__ck_coord_states_parse, the reader of the
 * `states=` config value: id.kind.merge[:opname][@ttl[e][r]].name/...,
 * used by the restore and `sfs export`).  The input is the value's text
 * (cut at its first NUL, as a C string from the config is).  A crash, leak
 * or sanitizer report is a bug, and so is a success whose entries break
 * the format's rules (abort()): a kind out of range, a merge operator on a
 * state that is not a counter, an empty or unterminated name or a name
 * with '/'.  Each registry that parses is written back with the writer
 * (sfs__ck_coord_states, over a registry in plain memory) and parsed again:
 * the two must agree entry by entry.  Every counter's operator goes
 * through sfs_merge_check, as the restore does.  An error return is the
 * expected answer to a bad value.
 *
 *   make fuzz-states     (make fuzz: every target)
 *
 * Seeds: tests/fuzz/seed_states.c writes registries with sfs__ck_coord_states.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/save.h"
#include "checkpointer/coord.h"
#include "common/merge.h"
#include "sfs.h"

static struct sfs_state_desc st[SFS_MAX_STATES], again[SFS_MAX_STATES];
static struct sfs_seg seg;

static void check(const struct sfs_state_desc *d)
{
	size_t nl = strnlen(d->sd_name, sizeof(d->sd_name));
	size_t ml = strnlen(d->sd_merge_name, sizeof(d->sd_merge_name));

	if (d->sd_kind < SFS_STATE_VALUE || d->sd_kind > SFS_STATE_LIST || !nl ||
	    nl == sizeof(d->sd_name) || ml == sizeof(d->sd_merge_name) || strchr(d->sd_name, '/') ||
	    (d->sd_kind != SFS_STATE_COUNTER && (d->sd_merge || ml)) ||
	    (d->sd_ttl_flags & ~(uint32_t)(SFS_TTL_EVENT_TIME | SFS_TTL_REFRESH_ON_READ)) ||
	    (!d->sd_ttl_ms && d->sd_ttl_flags))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[1 << 16];
	char *val;

	if (!seg.hdr && !(seg.hdr = calloc(1, sizeof(*seg.hdr))))
		abort();
	if (!(val = malloc(size + 1)))
		return 0;
	memcpy(val, data, size);
	val[size] = 0;
	fuzz_save(val, size);
	memset(st, 0, sizeof(st));
	if (sfs__ck_coord_states_parse(val, st) == 0) {
		for (uint32_t i = 0; i < SFS_MAX_STATES; i++) {
			if (st[i].sd_state != SFS_SDESC_READY)
				continue;
			check(&st[i]);
			if (st[i].sd_kind == SFS_STATE_COUNTER)
				sfs_merge_check(st[i].sd_merge, st[i].sd_merge_name, st[i].sd_name);
		}
		memcpy(seg.hdr->sh_states, st, sizeof(st));
		if (sfs__ck_coord_states(&seg, out, sizeof(out)) == 0) {
			memset(again, 0, sizeof(again));
			if (sfs__ck_coord_states_parse(out + 7, again))
				abort();   /* the writer wrote what the reader refuses */
			for (uint32_t i = 0; i < SFS_MAX_STATES; i++)
				if (memcmp(&st[i], &again[i], sizeof(st[i])))
					abort();
		}
	}
	free(val);
	return 0;
}
