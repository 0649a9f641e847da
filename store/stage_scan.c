/*
 * stage_scan.c — sfs_stage_scan (include/sfs.h, "A worker's own
 * checkpoints"): a worker's staged checkpoint read with the group's flush
 * target, offline, as `sfs export` reads a checkpoint (the contract's scan,
 * store/target.h).  It lives in store/, above the worker layer that stages
 * (worker/stage.c), because the targets do.
 *
 * Threads: reads the segment's registry (entries never change once READY)
 * and the files, never the context's state: another thread than the
 * context's may call it while the owner writes state.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fs.h"
#include "common/keygroup.h"
#include "shm/atomic.h"
#include "store/target.h"
#include "worker/state.h"

/* Link every regular file of @from into @to (flat). */
static int link_flat(const char *from, const char *to)
{
	DIR *d = opendir(from);
	struct dirent *e;
	char a[PATH_MAX], b[PATH_MAX];
	int rc = 0;

	if (!d)
		return sfs__err(-errno, "%s: %s", from, strerror(errno));
	while (rc == 0 && (e = readdir(d))) {
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		if (stat(a, &st) || !S_ISREG(st.st_mode))
			continue;
		snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
		rc = sfs_link_or_copy(a, b, SFS_EXIST_SAME, 0, NULL);
	}
	closedir(d);
	return rc;
}

struct scan_arg {
	sfs_stage_fn fn;
	void *arg;
	const struct sfs_state_desc *states;
};

/* The target's entry (kg | state | rest) as the user's (state, kg, key,
 * user key): a map or list entry's rest is klen (2 B) | key | user key. */
static int scan_entry(void *arg, const struct sfs_scan_entry *se)
{
	const struct scan_arg *a = arg;
	const unsigned char *k = se->key;
	struct sfs_stage_entry e = { 0 };
	uint32_t kind, plen;

	if (se->klen < SFS_KEY_PREFIX)
		return sfs__err(SFS_ECORRUPT, "staged entry of %u bytes: no key prefix", se->klen);
	e.kg = sfs_key_prefix_kg(k);
	e.state = sfs_key_prefix_state(k);
	e.ns = se->ns;
	e.val = se->val;
	e.vlen = se->vlen;
	kind = e.state < SFS_MAX_STATES ? a->states[e.state].sd_kind : 0;
	if (kind == SFS_STATE_MAP || kind == SFS_STATE_LIST) {
		plen = sfs_map_parent_len(k, se->klen);
		if (!plen || plen > se->klen)
			return sfs__err(SFS_ECORRUPT, "staged map entry of %u bytes: bad parent",
					se->klen);
		e.key = k + SFS_MAP_PREFIX;
		e.klen = plen - SFS_MAP_PREFIX;
		e.ukey = k + plen;
		e.ulen = se->klen - plen;
	} else {
		e.key = k + SFS_KEY_PREFIX;
		e.klen = se->klen - SFS_KEY_PREFIX;
	}
	return a->fn(a->arg, &e);
}

int sfs_stage_scan(sfs_ctx_t *c, const char *dir, const struct sfs_stage_state *given, unsigned n,
		   sfs_stage_fn fn, void *arg)
{
	const struct sfs_target_ops *t;
	struct sfs_state_desc *states;
	struct scan_arg a;
	char tmp[PATH_MAX], sub[PATH_MAX];
	int rc;

	sfs__err_clear();
	if (!c || !dir || !fn)
		return sfs__err(SFS_EUSAGE, "sfs_stage_scan: NULL argument");
	t = sfs_target_of(&c->seg);
	if (!t || !t->scan)
		return sfs__err(SFS_EUSAGE, "job %s: the %.16s target cannot be read offline",
				c->seg.hdr->sh_job, c->seg.hdr->sh_backend);
	states = calloc(SFS_MAX_STATES, sizeof(*states));
	if (!states)
		return -ENOMEM;
	if (given) {
		/* the registry of the group that wrote the files, as its engine
		 * recorded it (a restore on another TaskManager) */
		for (unsigned i = 0; i < n; i++) {
			if (given[i].id >= SFS_MAX_STATES || given[i].kind < SFS_STATE_VALUE ||
			    given[i].kind > SFS_STATE_LIST) {
				free(states);
				return sfs__err(SFS_EUSAGE, "sfs_stage_scan: state %u of kind %d: out of "
						"range", given[i].id, given[i].kind);
			}
			states[given[i].id].sd_state = SFS_SDESC_READY;
			states[given[i].id].sd_kind = (uint32_t)given[i].kind;
			states[given[i].id].sd_ttl_ms = given[i].ttl_ms;
			snprintf(states[given[i].id].sd_name, sizeof(states[given[i].id].sd_name), "s%u",
				 given[i].id);
		}
	} else {
		/* The registry as of now: every state the staged files name was
		 * registered before its first write, and entries never change
		 * once READY (shm/segment.h). */
		for (uint32_t i = 0; i < SFS_MAX_STATES; i++)
			if (sfs_load_acquire(&c->seg.hdr->sh_states[i].sd_state) == SFS_SDESC_READY)
				states[i] = c->seg.hdr->sh_states[i];
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.scan.XXXXXX", dir) >= sizeof(tmp) ||
	    !mkdtemp(tmp)) {
		free(states);
		return sfs__err(-errno, "%s: cannot make a scan directory beside it: %s", dir,
				strerror(errno));
	}
	/* The scan reads a worker's files flat, as a restore places them. */
	snprintf(sub, sizeof(sub), "%s/" SFS_STAGE_SHARED, dir);
	rc = link_flat(dir, tmp);
	if (rc == 0 && access(sub, F_OK) == 0)
		rc = link_flat(sub, tmp);
	a = (struct scan_arg){ .fn = fn, .arg = arg, .states = states };
	if (rc == 0)
		rc = t->scan(tmp, states, scan_entry, &a);
	sfs_rmtree(tmp);
	free(states);
	return rc;
}

