/*
 * metrics.h — the Prometheus text exposition of a running group's
 * snapshot (supervisor/snapshot.h): `sfs stat --prometheus` and `sfs run
 * --metrics-addr` (metrics_http.c).
 */
#ifndef SFS_SUPERVISOR_METRICS_H
#define SFS_SUPERVISOR_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "supervisor/snapshot.h"

/* The Prometheus text exposition format 0.0.4 of @s: every family with its
 * HELP and TYPE lines, counters named _total, units in the names. */
void sup_metrics_write(const struct sup_snap *s, FILE *out);

/* Attach, snapshot, write, detach: the one path of the CLI and the HTTP
 * server.  0, or an attach error (sfs_last_error()). */
int sup_metrics_text(const char *job, FILE *out);

/* `sfs run --metrics-addr`: parse "[HOST:]PORT" ("PORT" alone binds
 * 127.0.0.1), bind and listen, and serve /metrics of @job from
 * libmicrohttpd's own thread.  Call with the signals the supervisor takes
 * blocked (the thread inherits the mask).  0, or 2 with one line on stderr
 * (malformed address, port in use, ...). */
struct sup_metrics_server;
int sup_metrics_serve(const char *addr, const char *job, struct sup_metrics_server **out);
void sup_metrics_stop(struct sup_metrics_server *m);

#endif
