/*
 * log.h — one line per event on stderr, prefixed with the process's role
 * and pid, so a supervised group's interleaved output stays readable.
 * Never on a hot path.
 */
#ifndef SFS_COMMON_LOG_H
#define SFS_COMMON_LOG_H

void sfs_log_init(const char *role);
void sfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
