/*
 * child.h — what every process the supervisor starts does the same way:
 * parse the common arguments, attach to the job's segment, register in the
 * process table, heartbeat, and obey shutdown.  The roles' own work is
 * called from the loop in bounded steps (STYLE.md rule 6).
 *
 * It is in shm/, not common/: every part of it is the segment's (attach,
 * a process-table slot, QSBR reports, the shutdown futex).
 */
#ifndef SFS_SHM_CHILD_H
#define SFS_SHM_CHILD_H

#include <signal.h>
#include <stdint.h>

#include "shm/proc.h"

struct sfs_child {
	const char *job;
	unsigned role;
	uint32_t index;
	int node;
	uint64_t heartbeat_ns;      /* beat period */
	struct sfs_seg seg;
	struct sfs_proc_slot *slot;
	/* Idle sleep, set by the role: a futex word other processes bump when
	 * there is work (NULL: the segment's shutdown word, i.e. just a timed
	 * sleep), the flag that tells them a sleeper needs a wake, and how long
	 * to sleep at most this round (0: one beat; a step sets it shorter
	 * while it polls for a grace period). */
	int32_t *wake_word;
	int32_t *wake_flag;
	uint64_t idle_ns;
};

/* A child's exit status for a failure no restart repairs (a store that
 * does not fit the segment, a configuration the role refuses, files of
 * another format version, a merge operator the job names but the process
 * lacks): the supervisor fails the group at once instead
 * of spending its restart budget on the same failure.  Any other nonzero
 * status is a crash to restart. */
#define SFS_CHILD_EXIT_FATAL 3

/* Set by SIGTERM/SIGINT; the loop ends at its next check. */
extern volatile sig_atomic_t sfs_child_stop;

/* Parse --job, --index, --node, --heartbeat-ms, --merge-lib (loaded here,
 * sfs_merge_load), --help.  Exits 2 with a usage message on bad arguments
 * or a merge library that does not load. */
void sfs_child_args(struct sfs_child *c, unsigned role, int argc, char **argv);

/* Attach + register; logs and returns an error code on failure. */
int sfs_child_start(struct sfs_child *c);

/*
 * Run until stopped: each round calls @step (may be NULL) with a budget of
 * work, beats, reports a quiescent state, and when @step found nothing to do
 * sleeps on the segment's shutdown futex for up to one beat period — an
 * idle role costs no CPU, a busy one no syscall beyond its own work.
 * Returns 0 on a clean stop.
 */
typedef int (*sfs_child_step_fn)(struct sfs_child *c, unsigned budget);
int sfs_child_loop(struct sfs_child *c, sfs_child_step_fn step);

/*
 * sfs_child_progress - a sign of life from inside one long step: beats if a
 * beat is due (one clock read; a store at most once per beat period).  For
 * loops whose length grows with the state — a full dump of the memory
 * store, a checkpoint's copy of a file — which can outlast the supervisor's
 * hang timeout on a busy machine (a 480 MB dump did, and the group was
 * killed as hung).  A stuck loop never calls it, so a hang is still found.
 * Main thread only (a background thread that beats would hide a stuck main
 * loop); a no-op outside a child's loop (tests, the supervisor).
 */
void sfs_child_progress(void);

/*
 * sfs_child_progress_hook - for the calling thread only: sfs_child_progress
 * calls @fn(@arg) instead of beating.  For a thread that runs part of the
 * loop's step on the loop thread's behalf (the compactor's maintenance
 * threads, compactor/flush.h): it tells the loop thread, which beats once
 * every such thread has moved.  NULL: back to the default.
 */
void sfs_child_progress_hook(void (*fn)(void *arg), void *arg);

/* Offline, unregister, detach. */
void sfs_child_finish(struct sfs_child *c);

#endif
