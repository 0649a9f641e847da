/*
 * sync.h — whether layout/ makes each file it writes durable on its own.
 *
 * On (the default): every data file, manifest, manifest list, snapshot and
 * deletion-vector index is fsynced before its rename, and its directory
 * after: a committed snapshot survives a power loss.
 *
 * Off: the same writes, renames and links, in the same order, without an
 * fsync.  A kill -9 loses nothing either way (the page cache holds every
 * completed write, and a rename is atomic in the namespace); only a crash
 * of the machine can leave a renamed file short.  For a store whose
 * durability comes from elsewhere — sfs's table target: the checkpointer
 * fsyncs every file it links into a checkpoint (and the checkpoint's
 * directories) before it writes _metadata, a restore rebuilds the working
 * tables from a checkpoint, and a new group starts them empty (IDENTITY).
 * Its per-commit fsyncs bought nothing and cost ~26 fsync(2) per data
 * commit on the barrier path (bench/RESULTS.md, issue 7).
 *
 * Process-wide, read at each write: set it before the first one.
 */
#ifndef SFS_LAYOUT_SYNC_H
#define SFS_LAYOUT_SYNC_H

void sfs_layout_set_sync(int on);
int sfs_layout_sync(void);

#endif
