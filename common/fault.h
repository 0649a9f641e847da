/*
 * fault.h — one fault-injection facility for every layer (SQLite's model:
 * named points, one syntax).  A call site names its point with a string
 * constant, `if ((rc = sfs_fault("flush.commit"))) return rc;`, and a test
 * or an end-to-end script arms rules that fire at the n-th hit of a point:
 * kill the process there, or make the point return an error.
 *
 * Rules of the facility:
 *  - A point is free when nothing is armed: sfs_fault() is one predictable
 *    branch on a process-global flag (points sit on the compactor's flush
 *    path).  Armed, a hit scans at most SFS_FAULT_RULES_MAX rules.
 *  - The environment variable SFS_FAULT is read once per process, lazily,
 *    at the first point or sfs_fault_arm() (thread-safe).  A bad SFS_FAULT
 *    is never ignored (a crash test would test nothing): the process prints
 *    the message, naming the rule, on stderr and aborts.
 *  - Every point is listed in SFS_FAULT_POINTS below, with what it can do.
 *    A rule naming no listed point is refused; a point hit with a name not
 *    listed aborts the process while anything is armed (a typo at a call
 *    site is found by the first test that arms anything).
 *  - Hits are counted per rule, by every thread; a test asserts that its
 *    point was reached with sfs_fault_hits() (a rule with n = 0 only counts).
 *  - Process-local: a forked child inherits the rules and their counts.
 *
 * Grammar (SFS_FAULT and sfs_fault_arm()):
 *
 *    spec   := rule { ',' rule }
 *    rule   := point ':' n [ '+' ] [ ':' action ]
 *    point  := a name below, or a prefix of names ending in '*' ("memory.*")
 *    n      := decimal: the hit (1-based, counted for this rule) at which the
 *              action fires; 0 never fires (the rule only counts hits);
 *              "n+" fires at the n-th hit and at every hit after it
 *    action := kill           SIGKILL to the process, at once (the default)
 *            | powerloss      power loss: write $SFS_POWERLOSS_DIR/.powerloss
 *                             (when set) and SIGKILL the whole process
 *                             group, at once; with the LD_PRELOAD shim of
 *                             tests/powerloss/ every write not made durable
 *                             by fsync is then discarded (tests/e2e_powerloss.sh)
 *            | fail=ERR       the point returns -ERR, ERR a name (EIO, ENOSPC,
 *                             EDQUOT, EFBIG, EROFS, ENOMEM, EACCES, ENOENT,
 *                             EEXIST, EINTR, EAGAIN, EBUSY) or a decimal errno;
 *                             refused for a point marked kill only
 *
 *    SFS_FAULT=table.datafile:1                 die after the first level-0 file
 *    SFS_FAULT=layout.file.*:3:fail=EIO         the 3rd metadata I/O call fails
 *    SFS_FAULT=flush.apply:2+:fail=ENOSPC,seg.create.size:0
 *    SFS_FAULT=ck.commit.meta-tmp:3:powerloss   the power fails at the 3rd commit
 *
 * Room to grow: an action is an enum and a few lines of the parser
 * (short writes and delays are the next ones).
 */
#ifndef SFS_COMMON_FAULT_H
#define SFS_COMMON_FAULT_H

#include <stdint.h>

/* What a point can do besides being counted. */
#define SFS_FAULT_KILL_ONLY 0	/* a crash point between two steps: kill */
#define SFS_FAULT_CAN_FAIL 1	/* also returns an injected error (fail=ERR) */

/*
 * Every point: X(name, what, where and what a kill there leaves).
 * Names are <area>.<step>; an area's points share a prefix for "area.*".
 */
#define SFS_FAULT_POINTS(X) \
	/* compactor/flush.c: one buffer's flush cycle */ \
	X("flush.apply", SFS_FAULT_CAN_FAIL, "before a batch goes to the target (fail: retried)") \
	X("flush.commit", SFS_FAULT_CAN_FAIL, "all applied, before the target's commit (fail: retried)") \
	X("flush.publish", SFS_FAULT_KILL_ONLY, "committed, before the flushed seq is published") \
	X("flush.rollback", SFS_FAULT_CAN_FAIL, "a rollback in place, before the target's " \
	  "(fail: the group restarts from files)") \
	X("flush.engine_rollback", SFS_FAULT_CAN_FAIL, "a host group's worker back to its pinned " \
	  "checkpoint, before the target's rollback (fail: its engine restores from files)") \
	X("flush.engine_reset", SFS_FAULT_CAN_FAIL, "a host group's slot emptied for a new task " \
	  "(SFS_WORKER_RESET), before the target's reset (fail: the open fails)") \
	X("flush.engine_adopt", SFS_FAULT_CAN_FAIL, "a host group's worker adopting a checkpoint's " \
	  "files (sfs_worker_adopt), its writer closed, before the files are placed (fail: the " \
	  "store reopens empty and the engine restores by writes)") \
	X("flush.engine_adopt_placed", 0, "the files placed and TABLES last, before the writer " \
	  "reopens over them (crash: the next compactor's open adopts them)") \
	/* shm/task.c: a worker's rollback in place */ \
	X("task.halted", SFS_FAULT_KILL_ONLY, "a worker halted for a rollback in place (acked), " \
	  "before the group's go") \
	/* worker/output.c: epoch-committed output (include/sfs_output.h), in the program */ \
	X("output.staged", SFS_FAULT_KILL_ONLY, "an epoch durable as pending, before the program " \
	  "seals its checkpoint (crash: the next open drops it)") \
	X("output.commit", SFS_FAULT_KILL_ONLY, "an epoch's checkpoint complete, before its rename " \
	  "(crash: the next open commits it)") \
	X("output.committed", SFS_FAULT_KILL_ONLY, "an epoch renamed, before the directory fsync") \
	X("output.settle", SFS_FAULT_KILL_ONLY, "an open settling an earlier run's files: one " \
	  "committed or removed") \
	/* shm/segment.c: sfs_seg_create */ \
	X("seg.create.open", SFS_FAULT_CAN_FAIL, "before the segment file is created") \
	X("seg.create.size", SFS_FAULT_CAN_FAIL, "file created, before it is sized and mapped") \
	/* checkpointer/ckstore.c: a checkpoint's commit */ \
	X("ck.commit.linked", SFS_FAULT_KILL_ONLY, "new files durable, before _metadata") \
	X("ck.commit.meta-tmp", SFS_FAULT_KILL_ONLY, "_metadata.tmp durable, before the rename") \
	X("ck.commit.renamed", SFS_FAULT_KILL_ONLY, "the checkpoint exists, before retention") \
	X("ck.retention", SFS_FAULT_KILL_ONLY, "an old _metadata removed, before its files") \
	X("ck.rollback", SFS_FAULT_KILL_ONLY, "a rollback: the checkpoint in flight abandoned, " \
	  "not answered") \
	/* store/table/table_{write,round,merge,rollback}.c: the table engine */ \
	X("table.datafile", SFS_FAULT_KILL_ONLY, "a level-0 file written, not committed") \
	X("table.datacommit", SFS_FAULT_KILL_ONLY, "committed, not up-levelled") \
	X("table.roundfile", SFS_FAULT_KILL_ONLY, "a round's rewrite written, not committed") \
	X("table.round", SFS_FAULT_KILL_ONLY, "the round committed, not published") \
	X("table.mergefile", SFS_FAULT_KILL_ONLY, "a shaping merge's file written, not committed") \
	X("table.merge", SFS_FAULT_KILL_ONLY, "the merge committed, not published") \
	X("table.rollback.intent", SFS_FAULT_KILL_ONLY, "a rollback's intent written, no table switched") \
	X("table.rollback.table", SFS_FAULT_KILL_ONLY, "a rollback switched one more table") \
	X("table.rollback.done", SFS_FAULT_KILL_ONLY, "every table switched, the intent still there") \
	/* store/table/table_l0.c: level 0 as buffer images */ \
	X("table.l0.image", SFS_FAULT_KILL_ONLY, "an image written, the list not") \
	X("table.l0.list", SFS_FAULT_KILL_ONLY, "the list names the image: absorbed") \
	X("table.l0.commit", SFS_FAULT_KILL_ONLY, "an image's conversion committed, the list not") \
	/* store/table/layout/file.c: atomic whole-file writes (metadata) */ \
	X("layout.file.open", SFS_FAULT_CAN_FAIL, "open(2) of the temp file") \
	X("layout.file.write", SFS_FAULT_CAN_FAIL, "each write(2)") \
	X("layout.file.fsync", SFS_FAULT_CAN_FAIL, "fsync(2) of the temp file (only with sync on)") \
	X("layout.file.rename", SFS_FAULT_CAN_FAIL, "rename(2) into place") \
	X("layout.file.link", SFS_FAULT_CAN_FAIL, "link(2) into place (create-if-absent)") \
	/* store/table/layout/bufimage.c: a sealed buffer's image (level 0) */ \
	X("layout.bufimg.open", SFS_FAULT_CAN_FAIL, "open(2) of the image's temp file") \
	X("layout.bufimg.write", SFS_FAULT_CAN_FAIL, "each writev(2) of the image") \
	X("layout.bufimg.fsync", SFS_FAULT_CAN_FAIL, "fsync(2) of the image (only with sync on)") \
	X("layout.bufimg.rename", SFS_FAULT_CAN_FAIL, "rename(2) of the image into place") \
	X("layout.bufimg.dirsync", SFS_FAULT_CAN_FAIL, "fsync(2) of its directory (only with sync on)") \
	/* store/table/layout/datafile_write.c: the data file writer */ \
	X("layout.df.open", SFS_FAULT_CAN_FAIL, "open(2) of the temp file") \
	X("layout.df.write", SFS_FAULT_CAN_FAIL, "each write(2)") \
	X("layout.df.fsync", SFS_FAULT_CAN_FAIL, "fsync(2) (only with sync on)") \
	X("layout.df.rename", SFS_FAULT_CAN_FAIL, "rename(2) into place") \
	/* store/memory/mstore_write.c: the steps of a map write */ \
	X("memory.head", SFS_FAULT_KILL_ONLY, "a new map's head appended and indexed") \
	X("memory.append", SFS_FAULT_KILL_ONLY, "an entry appended, before its intent") \
	X("memory.intent", SFS_FAULT_KILL_ONLY, "the intent recorded, before its steps") \
	X("memory.link", SFS_FAULT_KILL_ONLY, "prev's next set, next's prev not") \
	X("memory.unlink", SFS_FAULT_KILL_ONLY, "prev's next past the entry, next's prev not") \
	X("memory.index", SFS_FAULT_KILL_ONLY, "the list done, before the index") \
	X("memory.clear", SFS_FAULT_KILL_ONLY, "one entry of a cleared map unindexed") \
	X("memory.done", SFS_FAULT_KILL_ONLY, "the intent cleared") \
	X("memory.copy", SFS_FAULT_KILL_ONLY, "a semispace copy past one record (copied or " \
	  "left behind as expired), unpublished") \
	X("memory.copied", SFS_FAULT_KILL_ONLY, "a copy published, its counters not yet set") \
	/* store/rocksdb/ (write.c, rollback.c): the RocksDB target's flush */ \
	X("rocksdb.apply", SFS_FAULT_KILL_ONLY, "a piece staged") \
	X("rocksdb.write", SFS_FAULT_KILL_ONLY, "the batch in the memtables, not flushed") \
	X("rocksdb.flush", SFS_FAULT_KILL_ONLY, "the batch durable, the buffer not published") \
	X("rocksdb.sst", SFS_FAULT_KILL_ONLY, "a state's SST written, not ingested") \
	X("rocksdb.ingest", SFS_FAULT_KILL_ONLY, "one state's SST ingested, others not yet") \
	X("rocksdb.rollback.copy", SFS_FAULT_KILL_ONLY, "rollback: the pin's copy made, not swapped in") \
	X("rocksdb.rollback.swap", SFS_FAULT_KILL_ONLY, "rollback: swapped in, old instance not removed")

#define SFS_FAULT_RULES_MAX 16

/* Non-zero while SFS_FAULT is unread or anything is armed (fault.c). */
extern int sfs__fault_on;

int sfs__fault_hit(const char *point);

/*
 * sfs_fault - pass point @point (a name in SFS_FAULT_POINTS): 0 to go on,
 * or the negative code an armed fail rule injects; a kill rule does not
 * return.  O(1) when nothing is armed; otherwise O(rules).  Any thread.
 */
static inline int sfs_fault(const char *point)
{
	if (__builtin_expect(__atomic_load_n(&sfs__fault_on, __ATOMIC_RELAXED) == 0, 1))
		return 0;
	return sfs__fault_hit(point);
}

/*
 * sfs_fault_arm - add the rules of @spec (the grammar above) after reading
 * SFS_FAULT if not read yet.  0, or SFS_EUSAGE with sfs_last_error() naming
 * the bad rule and why (nothing of @spec armed then).  Arm before the
 * threads that should hit the rules start.  O(rules).
 */
int sfs_fault_arm(const char *spec);

/*
 * sfs_fault_reset - disarm every rule and the hook and drop their counts,
 * as at start: SFS_FAULT is read again at the next point or arm.  Call
 * when no other thread passes a point.
 */
void sfs_fault_reset(void);

/*
 * sfs_fault_hits - the hits counted by the rules armed as @pattern (the
 * point text of the rule, "memory.*" included), summed; 0 when none.
 */
uint64_t sfs_fault_hits(const char *pattern);

/*
 * sfs_fault_hook - call @fn(point, @arg) at every point passed (NULL:
 * none), before the rules; a non-zero return is what the point returns
 * (ignored at a kill-only point).  For a test that must act at a point
 * (corrupt a file, stop a peer).  Call when no other thread passes a
 * point, as sfs_fault_reset.
 */
void sfs_fault_hook(int (*fn)(const char *point, void *arg), void *arg);

#endif
