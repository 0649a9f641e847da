/*
 * metrics_http.c — `sfs run --metrics-addr [HOST:]PORT`: /metrics of the
 * running group over HTTP, served by libmicrohttpd from its own thread
 * (MHD_USE_INTERNAL_POLLING_THREAD) inside the supervisor process.
 *
 * The supervisor's loop knows nothing of it: it shares no lock and no
 * variable with the server.  Each scrape maps the job's segments afresh
 * (sup_metrics_text: an open and an mmap per node, tens of microseconds),
 * reads them and unmaps them, instead of borrowing the loop's mapping —
 * a recovery destroys and unmaps the loop's segments at any moment, and a
 * mapping of the scrape's own cannot be pulled from under it.  While a
 * recovery has no segment, a scrape gets 503 with the reason.  The reads
 * are relaxed loads of counters (metrics.c): the workers' path never
 * waits for a scrape, and a slow client holds only the server's thread.
 *
 * The address is bound here, before the group starts (a port in use is
 * a usage error, exit 2, with nothing started), and the socket handed to
 * libmicrohttpd (MHD_OPTION_LISTEN_SOCKET).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/err.h"
#include "supervisor/metrics.h"

struct sup_metrics_server {
	struct MHD_Daemon *d;
	char job[SFS_JOB_NAME_MAX + 1];
};

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **req_cls)
{
	struct sup_metrics_server *m = cls;
	char *body = NULL;
	size_t len = 0;
	unsigned status = MHD_HTTP_OK;
	FILE *f;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	else if (strcmp(url, "/metrics") && strcmp(url, "/"))
		status = MHD_HTTP_NOT_FOUND;
	if (!(f = open_memstream(&body, &len)))
		return MHD_NO;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		fprintf(f, "GET /metrics\n");
	else if (status == MHD_HTTP_NOT_FOUND)
		fprintf(f, "not found: the metrics are at /metrics\n");
	else if (!strcmp(url, "/"))
		fprintf(f, "sfs job %s: metrics at /metrics\n", m->job);
	else if (sup_metrics_text(m->job, f)) {
		/* No segment: the group is between incarnations (a recovery)
		 * or stopping.  Whatever was written is dropped. */
		fflush(f);
		rewind(f);
		fprintf(f, "sfs job %s: no segment to read: %s\n", m->job, sfs_last_error());
		fflush(f);
		len = (size_t)ftell(f);
		status = MHD_HTTP_SERVICE_UNAVAILABLE;
	}
	if (fclose(f)) {
		free(body);
		return MHD_NO;
	}
	return reply(c, status, body, len);
}

/* "[HOST:]PORT", "[v6addr]:PORT"; HOST "" or absent: 127.0.0.1.  2 with a
 * message on anything else. */
static int parse_addr(const char *spec, char *host, size_t hn, char *port, size_t pn)
{
	const char *colon = strrchr(spec, ':'), *p;
	char *end;
	long n;

	if (!colon) {
		snprintf(host, hn, "127.0.0.1");
		p = spec;
	} else if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close + 1 != colon || close == spec + 1 ||
		    (size_t)(close - spec - 1) >= hn)
			return 2;
		snprintf(host, hn, "%.*s", (int)(close - spec - 1), spec + 1);
		p = colon + 1;
	} else {
		if (memchr(spec, ':', (size_t)(colon - spec)) || (size_t)(colon - spec) >= hn)
			return 2;	/* an IPv6 address wants brackets */
		snprintf(host, hn, "%.*s", (int)(colon - spec), spec);
		if (!host[0])
			snprintf(host, hn, "127.0.0.1");
		p = colon + 1;
	}
	if (*p < '0' || *p > '9')
		return 2;
	errno = 0;
	n = strtol(p, &end, 10);
	if (errno || *end || n < 1 || n > 65535)
		return 2;
	snprintf(port, pn, "%ld", n);
	return 0;
}

/* A listening socket on @host:@port, or -1 with a message on stderr. */
static int listen_on(const char *spec, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai, *a;
	int rc = getaddrinfo(host, port, &hints, &ai), fd = -1, err = 0, one = 1;

	if (rc) {
		fprintf(stderr, "sfs run: --metrics-addr %s: host '%s': %s\n", spec, host,
			gai_strerror(rc));
		return -1;
	}
	for (a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		/* Reuse a port in TIME_WAIT; a port someone listens on still fails. */
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 64)) {
			err = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		fprintf(stderr, "sfs run: --metrics-addr %s: cannot listen on %s port %s: %s\n",
			spec, host, port, strerror(err));
	return fd;
}

int sup_metrics_serve(const char *spec, const char *job, struct sup_metrics_server **out)
{
	char host[256], port[8];
	struct sup_metrics_server *m;
	int fd;

	if (parse_addr(spec, host, sizeof(host), port, sizeof(port))) {
		fprintf(stderr, "sfs run: --metrics-addr '%s': want [HOST:]PORT (PORT 1..65535, "
				"an IPv6 HOST in brackets)\n", spec);
		return 2;
	}
	if ((fd = listen_on(spec, host, port)) < 0)
		return 2;
	if (!(m = calloc(1, sizeof(*m)))) {
		close(fd);
		fprintf(stderr, "sfs run: --metrics-addr: out of memory\n");
		return 2;
	}
	snprintf(m->job, sizeof(m->job), "%s", job);
	m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
				handle, m, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u,
				MHD_OPTION_CONNECTION_LIMIT, 32u, MHD_OPTION_END);
	if (!m->d) {
		close(fd);
		free(m);
		fprintf(stderr, "sfs run: --metrics-addr %s: the HTTP server did not start\n",
			spec);
		return 2;
	}
	*out = m;
	return 0;
}

void sup_metrics_stop(struct sup_metrics_server *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);	/* joins its thread; closes the listening socket */
	free(m);
}
