/*
 * t_httpd.h - scripted HTTP servers on 127.0.0.1 for the unit tests of
 * gatehouse's outbound HTTP (test_upstream.c, test_provider_*.c).
 *
 * t_httpd is a CivetWeb server (keep-alive on) whose routes answer from a
 * script: hit n gets replies[min(n, nreplies - 1)], each a status, extra
 * headers and either a body (sent with Content-Length) or chunks (sent as
 * chunked frames, optionally with a pause between them, so a stream reaches
 * the client split at odd places), or an endless drip of SSE comments. A
 * test binary starts one server (stopping one takes CivetWeb up to two
 * seconds) and routes a fresh URI per test. A route records what the last
 * request carried (method, body, headers, client ports) so a test can
 * check what gatehouse put on the wire.
 *
 * t_srv is the test binary's one server, started on first use by t_srv_up
 * and stopped at exit; t_srv_route scripts a route on it and t_split cuts a
 * stream into chunks of awkward sizes for a reply's chunks.
 *
 * t_raw is a bare TCP server for what CivetWeb cannot do: reply with exact
 * bytes and then close or reset the connection mid-response.
 *
 * Threading: CivetWeb runs handlers on its worker threads; a route's record
 * is guarded by its mutex and its hit counter is atomic. Waits inside
 * handlers end as soon as their route closes or the server stops.
 */
#ifndef GH_T_HTTPD_H
#define GH_T_HTTPD_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <civetweb.h>

#define T_HTTPD_MAX_REPLIES 4
#define T_HTTPD_MAX_BODY (4u << 20)

struct t_reply {
	int status;
	const char *headers;         /* extra header lines, each ending "\r\n" */
	const char *body;            /* with Content-Length, when chunks is NULL */
	const char *const *chunks;   /* NULL-terminated: chunked frames */
	int chunk_delay_ms;          /* pause between chunks */
	int delay_ms;                /* pause before the status line */
	int drip_ms;                 /* > 0: SSE comments every drip_ms until the client leaves */
};

struct t_httpd;

struct t_route {
	struct t_httpd *srv;
	char uri[128];
	atomic_int closing;          /* set by t_route_close: waits end at once */
	struct t_reply replies[T_HTTPD_MAX_REPLIES];
	int nreplies;
	atomic_int hits;
	pthread_mutex_t mu;
	char method[16];             /* the last request's ... */
	char *body;
	size_t body_len;
	char *headers;               /* "name: value\n" lines */
	char query[256];
	int remote_port;
	int ports[16];               /* client ports of the first 16 hits */
};

struct t_httpd {
	struct mg_context *ctx;
	int port;
	char base[64];               /* "http://127.0.0.1:PORT" */
	atomic_int stopping;
};

static inline void t_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static inline double t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static inline int t_route_live(struct t_route *r)
{
	return !atomic_load(&r->closing) && !atomic_load(&r->srv->stopping);
}

/* Sleeps up to ms, less when the route closes or the server stops; 0 then. */
static inline int t_route_wait(struct t_route *r, int ms)
{
	while (ms > 0 && t_route_live(r)) {
		int step = ms < 5 ? ms : 5;

		t_sleep_ms(step);
		ms -= step;
	}
	return t_route_live(r);
}

static inline int t_httpd_handler(struct mg_connection *c, void *cbdata)
{
	struct t_route *r = cbdata;
	const struct mg_request_info *ri = mg_get_request_info(c);
	const struct t_reply *rp;
	char *body = malloc(T_HTTPD_MAX_BODY + 1), *hdrs = malloc(16384);
	size_t len = 0, hl = 0;
	int n, i, hit;

	if (!body || !hdrs) {
		free(body);
		free(hdrs);
		return 500;
	}
	while (len < T_HTTPD_MAX_BODY && (n = mg_read(c, body + len, T_HTTPD_MAX_BODY - len)) > 0)
		len += (size_t)n;
	body[len] = '\0';
	hdrs[0] = '\0';
	for (i = 0; i < ri->num_headers; i++) {
		int w = snprintf(hdrs + hl, 16384 - hl, "%s: %s\n", ri->http_headers[i].name,
				 ri->http_headers[i].value);

		if (w < 0 || (size_t)w >= 16384 - hl)
			break;
		hl += (size_t)w;
	}
	hit = atomic_fetch_add(&r->hits, 1);
	pthread_mutex_lock(&r->mu);
	snprintf(r->method, sizeof(r->method), "%s", ri->request_method);
	snprintf(r->query, sizeof(r->query), "%s", ri->query_string ? ri->query_string : "");
	free(r->body);
	free(r->headers);
	r->body = body;
	r->body_len = len;
	r->headers = hdrs;
	r->remote_port = ri->remote_port;
	if (hit < 16)
		r->ports[hit] = ri->remote_port;
	pthread_mutex_unlock(&r->mu);

	rp = &r->replies[hit < r->nreplies ? hit : r->nreplies - 1];
	if (rp->delay_ms && !t_route_wait(r, rp->delay_ms))
		return 499;
	if (rp->chunks || rp->drip_ms) {
		mg_printf(c, "HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n%s\r\n", rp->status,
			  rp->headers ? rp->headers : "Content-Type: text/event-stream\r\n");
		for (i = 0; rp->chunks && rp->chunks[i]; i++) {
			if (i && rp->chunk_delay_ms && !t_route_wait(r, rp->chunk_delay_ms))
				return 499;
			if (mg_send_chunk(c, rp->chunks[i], (unsigned)strlen(rp->chunks[i])) <= 0)
				return 499;
		}
		while (rp->drip_ms && t_route_wait(r, rp->drip_ms))
			if (mg_send_chunk(c, ": drip\n\n", 8) <= 0)
				return 499;
		mg_send_chunk(c, "", 0);
	} else {
		const char *b = rp->body ? rp->body : "";
		const char *h = rp->headers ? rp->headers : "Content-Type: application/json\r\n";

		mg_printf(c, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n", rp->status,
			  strlen(b), h);
		mg_write(c, b, strlen(b));
	}
	return rp->status;
}

static inline int t_httpd_start(struct t_httpd *s)
{
	const char *opts[] = {"listening_ports", "127.0.0.1:0", "num_threads", "16",
			      "enable_keep_alive", "yes", "request_timeout_ms", "10000", NULL};
	struct mg_callbacks cb;
	struct mg_server_port p[2];

	memset(&cb, 0, sizeof(cb));
	memset(s, 0, sizeof(*s));
	atomic_init(&s->stopping, 0);
	s->ctx = mg_start(&cb, NULL, opts);
	if (!s->ctx)
		return -1;
	if (mg_get_server_ports(s->ctx, 2, p) < 1) {
		mg_stop(s->ctx);
		return -1;
	}
	s->port = p[0].port;
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
	return 0;
}

/* Routes uri to r until t_route_close(r); r's script is set by the caller
 * before any request reaches it. */
static inline void t_httpd_route(struct t_httpd *s, const char *uri, struct t_route *r)
{
	r->srv = s;
	snprintf(r->uri, sizeof(r->uri), "%s", uri);
	atomic_init(&r->hits, 0);
	atomic_init(&r->closing, 0);
	pthread_mutex_init(&r->mu, NULL);
	mg_set_request_handler(s->ctx, uri, t_httpd_handler, r);
}

/* Ends r's pending waits, unroutes it (waiting for its handlers to return)
 * and frees what it recorded. */
static inline void t_route_close(struct t_route *r)
{
	atomic_store(&r->closing, 1);
	if (r->srv->ctx)
		mg_set_request_handler(r->srv->ctx, r->uri, NULL, NULL);
	free(r->body);
	free(r->headers);
	r->body = r->headers = NULL;
	pthread_mutex_destroy(&r->mu);
}

static inline void t_httpd_stop(struct t_httpd *s)
{
	if (!s->ctx)
		return;
	atomic_store(&s->stopping, 1);
	mg_stop(s->ctx);
	s->ctx = NULL;
}

/* Copies the last request's header value for name (case-insensitive) into
 * out; "" when absent. Returns 1 when present. */
static inline int t_route_header(struct t_route *r, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *p;
	int found = 0;

	out[0] = '\0';
	pthread_mutex_lock(&r->mu);
	for (p = r->headers; p && *p;) {
		const char *eol = strchr(p, '\n');
		size_t ll = eol ? (size_t)(eol - p) : strlen(p);

		if (ll > nl + 1 && !strncasecmp(p, name, nl) && p[nl] == ':') {
			size_t vl = ll - nl - 2;

			if (vl >= cap)
				vl = cap - 1;
			memcpy(out, p + nl + 2, vl);
			out[vl] = '\0';
			found = 1;
			break;
		}
		p = eol ? eol + 1 : p + ll;
	}
	pthread_mutex_unlock(&r->mu);
	return found;
}

/* The last request's body; caller frees. */
static inline char *t_route_body(struct t_route *r)
{
	char *b;

	pthread_mutex_lock(&r->mu);
	b = strdup(r->body ? r->body : "");
	pthread_mutex_unlock(&r->mu);
	return b;
}

/* ---- the test binary's one server ---- */

static struct t_httpd t_srv;

static inline void t_srv_stop(void)
{
	t_httpd_stop(&t_srv);
}

/* Starts t_srv unless it runs (it stops at exit); exits 2 when it cannot. */
static inline void t_srv_up(void)
{
	if (t_srv.ctx)
		return;
	if (t_httpd_start(&t_srv) != 0) {
		fprintf(stderr, "could not start the test server\n");
		exit(2);
	}
	atexit(t_srv_stop);
}

/* Routes uri on t_srv to r (cleared first), which answers hit i with
 * rp[min(i, n - 1)]; n is 1..T_HTTPD_MAX_REPLIES. */
static inline void t_srv_route(struct t_route *r, const char *uri, const struct t_reply *rp,
			       int n)
{
	int i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < n; i++)
		r->replies[i] = rp[i];
	r->nreplies = n;
	t_httpd_route(&t_srv, uri, r);
}

/* Cuts s into chunks of awkward sizes, as a NULL-terminated array for a
 * reply's chunks (caller frees with t_free_chunks). */
static inline char **t_split(const char *s)
{
	static const size_t sizes[] = {1, 6, 17, 2, 40, 3, 11, 64};
	size_t len = strlen(s), off = 0, n = 0, i = 0;
	char **v = calloc(len + 1, sizeof(*v));

	while (v && off < len) {
		size_t k = sizes[i++ % (sizeof(sizes) / sizeof(sizes[0]))];

		if (k > len - off)
			k = len - off;
		v[n] = malloc(k + 1);
		memcpy(v[n], s + off, k);
		v[n][k] = '\0';
		n++;
		off += k;
	}
	return v;
}

static inline void t_free_chunks(char **v)
{
	size_t i;

	for (i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* ---- a bare TCP server ---- */

struct t_raw {
	int fd;
	int port;
	char base[64];
	const char *reply;           /* bytes written after the request head */
	size_t reply_len;
	int reset;                   /* close with RST (SO_LINGER 0) instead of FIN */
	int conns;                   /* connections to serve before the thread ends */
	atomic_int accepted;
	pthread_t th;
};

static inline void *t_raw_main(void *ud)
{
	struct t_raw *s = ud;
	int i;

	for (i = 0; i < s->conns; i++) {
		struct pollfd pf = {s->fd, POLLIN, 0};
		char buf[65536];
		size_t got = 0;
		int c;

		if (poll(&pf, 1, 5000) <= 0)
			break;
		c = accept(s->fd, NULL, NULL);
		if (c < 0)
			break;
		atomic_fetch_add(&s->accepted, 1);
		/* read the request head and whatever body came with it */
		for (;;) {
			struct pollfd cp = {c, POLLIN, 0};
			ssize_t n;

			if (poll(&cp, 1, got && strstr(buf, "\r\n\r\n") ? 50 : 2000) <= 0)
				break;
			n = read(c, buf + got, sizeof(buf) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
			buf[got] = '\0';
			if (got >= sizeof(buf) - 1)
				break;
		}
		if (s->reply_len && write(c, s->reply, s->reply_len) < 0) {
			/* the client went away first */
		}
		t_sleep_ms(20);
		if (s->reset) {
			struct linger lg = {1, 0};

			setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		close(c);
	}
	return NULL;
}

static inline int t_raw_start(struct t_raw *s, const char *reply, size_t reply_len, int reset,
			      int conns)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);

	memset(s, 0, sizeof(*s));
	atomic_init(&s->accepted, 0);
	s->reply = reply;
	s->reply_len = reply_len;
	s->reset = reset;
	s->conns = conns;
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s->fd, (struct sockaddr *)&a, sizeof(a)) || listen(s->fd, 8) ||
	    getsockname(s->fd, (struct sockaddr *)&a, &al)) {
		close(s->fd);
		return -1;
	}
	s->port = ntohs(a.sin_port);
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
	if (pthread_create(&s->th, NULL, t_raw_main, s)) {
		close(s->fd);
		return -1;
	}
	return 0;
}

static inline void t_raw_stop(struct t_raw *s)
{
	pthread_join(s->th, NULL);
	close(s->fd);
}

/* A loopback port nothing listens on (bound, then closed). */
static inline int t_dead_port(void)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 1;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &al))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

#endif
