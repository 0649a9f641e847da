/*
 * procinfo.h — process identity that survives pid reuse.
 *
 * A pid alone names a process only until it is reaped; pid + the process's
 * start time (field 22 of /proc/PID/stat, clock ticks since boot) names it
 * for the machine's uptime.  Reading /proc is a slow path: callers use it
 * when they register and when a slot looks stuck, never per record.
 */
#ifndef SFS_COMMON_PROCINFO_H
#define SFS_COMMON_PROCINFO_H

#include <stdint.h>
#include <sys/types.h>

/* Start time of @pid in clock ticks since boot; 0 if the pid does not exist
 * or is a zombie (dead, not yet reaped). */
uint64_t sfs_proc_starttime(pid_t pid);

/* True when @pid is running and its start time is still @start. */
int sfs_proc_alive(pid_t pid, uint64_t start);

#endif
