/*
 * upstream_plain.c - the built-in HTTP/1.1 client for plain-HTTP upstreams
 * (see upstream_int.h).
 *
 * Plain-HTTP targets at an IP address or localhost (upstream_plain_target) are
 * served by a small HTTP/1.1 client instead of curl: one sendmsg for the
 * request, reads straight into h1.c's parser, and on a kept-alive
 * connection nothing else, where curl's state machine costs as much CPU as
 * the loopback send itself. It keeps the contract of upstream.h whole:
 * the same timeouts, ticks, wake descriptor, batches, limits, retries and
 * error messages, and, as curl does, a request that finds its kept-alive
 * connection closed by the server before any reply byte is sent again
 * once on a new one. Connections are kept per pair (PLAIN_CONNS of them,
 * any target), so they move with the pair as curl's do.
 *
 * Threading: a pair's target and connections are its taker's alone (as
 * in upstream.c); plain_allowed is written once before any transfer.
 */
#include "upstream_int.h"

#include "h1.h"
#include "otel.h"
#include "relay.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#define PLAIN_CONNECT_MS INT64_C(300000) /* curl's connect timeout when none is set */

/* 0 when an http_proxy, all_proxy or ALL_PROXY setting would make curl
 * send plain-HTTP requests through a proxy: then they all go through
 * curl. */
static int plain_allowed;

void upstream_plain_init(void)
{
	const char *proxies[] = {"http_proxy", "all_proxy", "ALL_PROXY"};
	size_t k;

	plain_allowed = 1;
	for (k = 0; k < sizeof(proxies) / sizeof(proxies[0]); k++) {
		const char *v = getenv(proxies[k]);

		if (v && *v)
			plain_allowed = 0;
	}
}

void upstream_plain_forget(struct upstream_plain *pl)
{
	free(pl->path);
	memset(pl, 0, sizeof(*pl));
}

void upstream_conns_close(struct upstream_conns *cs)
{
	int i;

	for (i = 0; i < cs->n; i++)
		close(cs->c[i].fd);
	cs->n = 0;
}

/* One address of a plain target: 0, or -1 when host is not a literal. */
static int plain_addr(struct upstream_plain *pl, const char *host, unsigned port)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)&pl->addr[pl->naddr];
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&pl->addr[pl->naddr];

	memset(&pl->addr[pl->naddr], 0, sizeof(pl->addr[0]));
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		pl->alen[pl->naddr++] = sizeof(*v4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		pl->alen[pl->naddr++] = sizeof(*v6);
		return 0;
	}
	return -1;
}

/*
 * Decides whether the built-in client takes the target in u: an http://
 * URL without user info whose host is an IP address or localhost, with no
 * proxy configured. Anything else (https, a name to resolve, a proxy) goes
 * through curl.
 */
void upstream_plain_target(struct upstream_plain *pl, CURLU *u)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL;
	char *user = NULL, lit[INET6_ADDRSTRLEN + 2];
	int64_t pn = 0;
	size_t hl;

	if (!plain_allowed || !u || curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    strcmp(scheme, "http") || curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
	    gh_parse_i64(port, 1, 65535, &pn) != 0 ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		goto out;
	if (curl_url_get(u, CURLUPART_QUERY, &query, 0) != CURLUE_OK)
		query = NULL;
	hl = strlen(host);
	if (!strcasecmp(host, "localhost")) {
		if (plain_addr(pl, "127.0.0.1", (unsigned)pn) || plain_addr(pl, "::1", (unsigned)pn))
			goto fail;
	} else if (host[0] == '[' && hl > 2 && hl - 2 < sizeof(lit) && host[hl - 1] == ']') {
		memcpy(lit, host + 1, hl - 2);
		lit[hl - 2] = '\0';
		if (plain_addr(pl, lit, (unsigned)pn))
			goto fail;
	} else if (plain_addr(pl, host, (unsigned)pn)) {
		goto fail;
	}
	if (pn == 80)
		snprintf(pl->host, sizeof(pl->host), "%s", host);
	else
		snprintf(pl->host, sizeof(pl->host), "%s:%lld", host, (long long)pn);
	hl = strlen(path) + (query ? strlen(query) + 1 : 0) + 1;
	if (!(pl->path = malloc(hl)))
		goto fail;
	snprintf(pl->path, hl, "%s%s%s", path, query ? "?" : "", query ? query : "");
	goto out;
fail:
	free(pl->path);
	memset(pl, 0, sizeof(*pl));
out:
	curl_free(scheme);
	curl_free(user);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(query);
}

/* 1 when req's body goes out: as with curl, a GET sends none, and a POST
 * sends one (empty without req->body). */
static int has_body(const struct gh_upstream_req *req)
{
	const char *method = req->method ? req->method : "POST";

	return strcmp(method, "GET") && (req->body || !strcmp(method, "POST"));
}

/* The head of req as curl would write it: request line, Host,
 * User-Agent and Accept unless the caller gives its own, the caller's
 * headers (one with an empty value is left out, as curl does), a trace
 * context, curl's Content-Type for a body without one, Content-Length. */
enum gh_code upstream_plain_head(const struct gh_upstream_req *req,
				 const struct upstream_plain *pl, const char *origin,
				 struct gh_buf *out, struct gh_err *e)
{
	const char *method = req->method ? req->method : "POST";
	int body = has_body(req), has_host = 0, has_ua = 0;
	int has_accept = 0, has_type = 0, rc = GH_BUF_OK;
	size_t i;

	for (i = 0; i < req->nheaders; i++) {
		const struct gh_upstream_header *hd = &req->headers[i];

		if (upstream_bad_header_text(hd->name) || !*hd->name || strchr(hd->name, ':') ||
		    upstream_bad_header_text(hd->value))
			return gh_err_set(e, GH_E_INTERNAL, "upstream %s: header \"%.64s\" is not valid",
					  origin, upstream_bad_header_text(hd->name) ? "?" : hd->name);
		has_host |= !strcasecmp(hd->name, "host");
		has_ua |= !strcasecmp(hd->name, "user-agent");
		has_accept |= !strcasecmp(hd->name, "accept");
		has_type |= !strcasecmp(hd->name, "content-type");
	}
	/* no printf: its format parsing took 2.4k of the head's 5.5k
	 * instructions */
	gh_buf_puts(out, method);
	gh_buf_putc(out, ' ');
	gh_buf_puts(out, pl->path);
	gh_buf_append(out, " HTTP/1.1\r\n", 11);
	if (!has_host) {
		gh_buf_append(out, "Host: ", 6);
		gh_buf_puts(out, pl->host);
		gh_buf_append(out, "\r\n", 2);
	}
	if (!has_ua)
		gh_buf_puts(out, "User-Agent: gatehouse\r\n");
	if (!has_accept)
		gh_buf_puts(out, "Accept: */*\r\n");
	for (i = 0; i < req->nheaders; i++) {
		const struct gh_upstream_header *hd = &req->headers[i];
		const char *v = hd->value;

		while (*v == ' ' || *v == '\t')
			v++;
		if (!*v || !strcasecmp(hd->name, "content-length"))
			continue;
		gh_buf_puts(out, hd->name);
		gh_buf_append(out, ": ", 2);
		gh_buf_puts(out, v);
		gh_buf_append(out, "\r\n", 2);
	}
	if (gh_otel_enabled()) {
		char tp[GH_TRACEPARENT_LEN + 1], ts[GH_TRACESTATE_MAX + 1];

		if (gh_otel_outgoing(tp, sizeof(tp), ts, sizeof(ts))) {
			gh_buf_printf(out, "traceparent: %s\r\n", tp);
			if (ts[0])
				gh_buf_printf(out, "tracestate: %s\r\n", ts);
		}
	}
	if (body && !has_type)
		gh_buf_puts(out, "Content-Type: application/x-www-form-urlencoded\r\n");
	if (body) {
		gh_buf_puts(out, "Content-Length: ");
		gh_buf_put_int(out, (long long)(req->body ? req->body_len : 0));
		gh_buf_append(out, "\r\n", 2);
	}
	/* one check at the end: a buffer that failed once stays failed */
	if ((rc = gh_buf_append(out, "\r\n", 2)) != GH_BUF_OK)
		return gh_err_set(e, rc == GH_BUF_TOOBIG ? GH_E_INTERNAL : GH_E_NOMEM,
				  rc == GH_BUF_TOOBIG ? "upstream %s: request headers too long"
						      : "upstream %s: out of memory", origin);
	return GH_OK;
}

/* 1 when a kept-alive connection has nothing to read: neither the
 * server's close nor stray bytes (either makes it useless). */
static int conn_alive(int fd)
{
	char c;

	return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
	       (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* A kept-alive connection to one of pl's addresses (the newest first),
 * taken out of h, with that address's index in *ai; -1 when none is left
 * alive. */
static int conn_take(struct upstream_conns *cs, const struct upstream_plain *pl, int *ai)
{
	int i, k;

	for (i = cs->n - 1; i >= 0; i--) {
		int fd = cs->c[i].fd;

		for (k = 0; k < pl->naddr; k++)
			if (cs->c[i].alen == pl->alen[k] &&
			    !memcmp(&cs->c[i].addr, &pl->addr[k], pl->alen[k]))
				break;
		if (k == pl->naddr)
			continue;
		memmove(&cs->c[i], &cs->c[i + 1], (size_t)(cs->n - i - 1) * sizeof(cs->c[0]));
		cs->n--;
		if (conn_alive(fd)) {
			*ai = k;
			return fd;
		}
		close(fd);
	}
	return -1;
}

/* Keeps fd (connected to addr) for the next request; the oldest kept one
 * goes when there are PLAIN_CONNS. */
static void conn_keep(struct upstream_conns *cs, int fd, const struct sockaddr_storage *addr,
		      socklen_t alen)
{
	if (cs->n == PLAIN_CONNS) {
		close(cs->c[0].fd);
		memmove(&cs->c[0], &cs->c[1], (PLAIN_CONNS - 1) * sizeof(cs->c[0]));
		cs->n--;
	}
	cs->c[cs->n].fd = fd;
	cs->c[cs->n].alen = alen;
	memcpy(&cs->c[cs->n].addr, addr, alen);
	cs->n++;
}

/* The clock and the ticks of one attempt of the built-in client. */
struct plain_clock {
	const struct gh_upstream_req *req;
	int wake;          /* the wake descriptor while it is watched, else -1 */
	int64_t every;     /* ms between ticks */
	int64_t due;       /* next tick (monotonic ns); 0: at once */
};

enum { WAIT_READY, WAIT_TIMEOUT, WAIT_CANCELLED, WAIT_FAILED };

/* Runs on_tick when it is due, or at once when the wake descriptor
 * stirred: 1 when it cancels. A stir that does not cancel means the
 * client sent bytes, which keep the descriptor readable, so the caller
 * stops watching it and ticks go by the clock from then on. */
static int plain_tick(struct plain_clock *k, int stirred)
{
	const struct gh_upstream_req *req = k->req;

	if (!req->on_tick || (!stirred && gh_mono_ns() < k->due))
		return 0;
	if (req->on_tick(req->ud))
		return 1;
	if (stirred) {
		k->wake = -1;
		k->every = TICK_MS;
	}
	k->due = gh_mono_ns() + k->every * 1000000;
	return 0;
}

/* Waits until fd is ready for events, calling on_tick when due or when the
 * wake descriptor stirs (as attempt does), or until deadline (monotonic
 * ns, 0: none) passes. */
static int plain_wait(struct plain_clock *k, int fd, short events, int64_t deadline)
{
	const struct gh_upstream_req *req = k->req;

	for (;;) {
		struct pollfd pfd[2];
		int64_t now = gh_mono_ns(), wait_ms = TICK_MS;
		int n;

		if (plain_tick(k, 0))
			return WAIT_CANCELLED;
		if (req->on_tick)
			wait_ms = (k->due - now + 999999) / 1000000;
		if (deadline) {
			if (now >= deadline)
				return WAIT_TIMEOUT;
			if ((deadline - now + 999999) / 1000000 < wait_ms)
				wait_ms = (deadline - now + 999999) / 1000000;
		}
		if (wait_ms < 1)
			wait_ms = 1;
		pfd[0].fd = fd;
		pfd[0].events = events;
		pfd[0].revents = 0;
		pfd[1].fd = k->wake;
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		n = poll(pfd, k->wake >= 0 ? 2 : 1, (int)wait_ms);
		if (n < 0 && errno != EINTR)
			return WAIT_FAILED;
		if (n > 0 && pfd[0].revents)
			return WAIT_READY;
		if (n > 0 && pfd[1].revents && plain_tick(k, 1))
			return WAIT_CANCELLED;
	}
}

/* Connects to one of pl's addresses: the descriptor, or -1 with *cc
 * (and *oserr) or *wait saying why. */
static int plain_connect(const struct upstream_plain *pl, struct plain_clock *k, int64_t deadline,
			 int *ai, CURLcode *cc, long *oserr, int *wait)
{
	int i, fd = -1, one = 1;

	*wait = WAIT_READY;
	for (i = 0; i < pl->naddr; i++) {
		int err = 0;
		socklen_t el = sizeof(err);

		fd = socket(pl->addr[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			*oserr = errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (const struct sockaddr *)&pl->addr[i], pl->alen[i]) == 0) {
			*ai = i;
			return fd;
		}
		if (errno == EINPROGRESS) {
			*wait = plain_wait(k, fd, POLLOUT, deadline);
			if (*wait != WAIT_READY) {
				close(fd);
				if (*wait == WAIT_TIMEOUT)
					*cc = CURLE_OPERATION_TIMEDOUT;
				return -1;
			}
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) {
				*ai = i;
				return fd;
			}
		} else {
			err = errno;
		}
		*oserr = err;
		close(fd);
		fd = -1;
	}
	*cc = CURLE_COULDNT_CONNECT;
	return -1;
}

/* Writes the head and the body; 0, or -1 with errno (EPIPE and the like)
 * or *wait saying why. */
static int plain_send(int fd, const struct gh_buf *head, const struct gh_upstream_req *req,
		      struct plain_clock *k, int64_t deadline, int *wait)
{
	size_t blen = has_body(req) && req->body ? req->body_len : 0;
	size_t total = head->len + blen, done = 0;

	*wait = WAIT_READY;
	while (done < total) {
		struct iovec iov[2];
		struct msghdr m;
		ssize_t w;
		int n = 0;

		if (done < head->len) {
			iov[n].iov_base = head->data + done;
			iov[n++].iov_len = head->len - done;
		}
		if (blen) {
			size_t off = done > head->len ? done - head->len : 0;

			iov[n].iov_base = (char *)(uintptr_t)req->body + off;
			iov[n++].iov_len = blen - off;
		}
		memset(&m, 0, sizeof(m));
		m.msg_iov = iov;
		m.msg_iovlen = (size_t)n;
		w = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w > 0) {
			done += (size_t)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if ((*wait = plain_wait(k, fd, POLLOUT, deadline)) != WAIT_READY)
				return -1;
		} else if (w < 0 && errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

/* What the parser's callbacks need. */
struct plain_read {
	struct upstream_xfer *x;
	const struct gh_h1 *p;
};

static int plain_header(void *ud, const char *line, size_t n)
{
	struct plain_read *r = ud;

	upstream_header_cb((char *)(uintptr_t)line, 1, n, r->x);
	return 0;
}

static int plain_body(void *ud, const char *b, size_t n)
{
	struct plain_read *r = ud;

	return upstream_take_body(r->x, r->p->status, b, n);
}

/* How one read pass ended. */
enum { READ_MORE, READ_DONE, READ_EOF, READ_ERROR, READ_STOP, READ_BAD };

/* Reads what the connection has (a pass: one on_batch bracket) into p. */
static int plain_read(int fd, struct gh_h1 *p, struct plain_read *r, char *buf, size_t cap,
		      size_t *extra, long *oserr)
{
	const struct gh_h1_cb cb = {plain_header, plain_body, r};

	for (;;) {
		ssize_t got = recv(fd, buf, cap, 0);
		size_t used;
		enum gh_h1_rc rc;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return READ_MORE;
		if (got < 0) {
			*oserr = errno;
			return READ_ERROR;
		}
		if (got == 0)
			return gh_h1_eof(p) == GH_H1_DONE ? READ_DONE : READ_EOF;
		rc = gh_h1_feed(p, buf, (size_t)got, &used, &cb);
		if (rc == GH_H1_DONE) {
			*extra = (size_t)got - used;
			return READ_DONE;
		}
		if (rc == GH_H1_STOP)
			return READ_STOP;
		if (rc == GH_H1_ERROR)
			return READ_BAD;
		if ((size_t)got < cap)
			return READ_MORE; /* drained, most likely: poll says */
	}
}

/* One pass over the connection: what one read brings goes to on_data as
 * one batch (a batch's close that cancels marks x cancelled). */
static int read_pass(int fd, struct gh_h1 *p, struct plain_read *r, char *buf, size_t cap,
		     size_t *extra, long *oserr)
{
	const struct gh_upstream_req *req = r->x->req;
	int how;

	if (req->on_batch)
		req->on_batch(req->ud, 1);
	how = plain_read(fd, p, r, buf, cap, extra, oserr);
	if (req->on_batch && req->on_batch(req->ud, 0))
		r->x->cancelled = 1;
	return how;
}

/* ------------------------------------------------------------ the relay */

/* A streamed reply read by the relay thread (relay.h): what a pass needs,
 * and how the reply went while it was there. */
struct plain_relay {
	struct gh_relay_job job;
	struct plain_clock *k;
	struct gh_h1 *p;
	struct plain_read *r;
	size_t *extra;
	long *oserr;
	int64_t deadline;
	int how;      /* the last read pass's READ_* */
	int wait;     /* WAIT_TIMEOUT or WAIT_CANCELLED when a tick ended it */
};

static int64_t relay_due(const struct plain_relay *pr)
{
	return pr->deadline && pr->deadline < pr->k->due ? pr->deadline : pr->k->due;
}

/* What plain_wait checks before it waits: the deadline, then the tick;
 * 1 when either ends the transfer (pr->wait says why). */
static int relay_tick(struct plain_relay *pr, int stirred)
{
	if (pr->deadline && gh_mono_ns() >= pr->deadline) {
		pr->wait = WAIT_TIMEOUT;
		return 1;
	}
	if (plain_tick(pr->k, stirred)) {
		pr->wait = WAIT_CANCELLED;
		return 1;
	}
	if (stirred)
		gh_relay_unwatch(&pr->job);
	return 0;
}

/* On the relay thread: one pass over the reply, or a tick. */
static int relay_ready(struct gh_relay_job *j, enum gh_relay_why why, char *buf)
{
	struct plain_relay *pr = (struct plain_relay *)j;
	const struct gh_upstream_req *req = pr->k->req;
	int back;

	req->on_relay(req->ud, GH_RELAY_PASS);
	back = relay_tick(pr, why == GH_RELAY_STIRRED);
	if (!back && why == GH_RELAY_READABLE) {
		pr->how = read_pass(j->fd, pr->p, pr->r, buf, GH_RELAY_BUF, pr->extra, pr->oserr);
		back = pr->how != READ_MORE || pr->r->x->cancelled;
	}
	atomic_store(&j->due_ns, relay_due(pr));
	/* a client that did not take everything sends the job back */
	if (req->on_relay(req->ud, GH_RELAY_PASSED))
		back = 1;
	return back;
}

/* Reads the reply on fd through the relay when the request's consumer
 * allows it: 1 when it did (*how, *wait say how it ended; READ_MORE with
 * WAIT_READY: the client fell behind and the caller reads the rest), 0
 * when the caller reads it all. */
static int relay_read(int fd, struct plain_clock *k, struct gh_h1 *p, struct plain_read *r,
		      int64_t deadline, size_t *extra, long *oserr, int *how, int *wait)
{
	const struct gh_upstream_req *req = k->req;
	struct plain_relay pr = {
		.job = {.fd = fd, .wake = k->wake, .ready = relay_ready},
		.k = k, .p = p, .r = r, .extra = extra, .oserr = oserr, .deadline = deadline,
		.how = READ_MORE, .wait = WAIT_READY,
	};

	if (!req->on_relay || !req->on_data || !req->on_tick ||
	    req->on_relay(req->ud, GH_RELAY_ENTER) != 0)
		return 0;
	if (!k->due)
		k->due = gh_mono_ns() + k->every * 1000000;
	atomic_init(&pr.job.due_ns, relay_due(&pr));
	if (gh_relay_start(&pr.job) != 0) {
		req->on_relay(req->ud, GH_RELAY_LEAVE);
		return 0;
	}
	gh_relay_wait(&pr.job);
	k->wake = pr.job.wake > 0 ? pr.job.wake : -1;
	req->on_relay(req->ud, GH_RELAY_LEAVE);
	if (pr.job.refused)
		return 0;
	*how = pr.how;
	*wait = pr.wait;
	return 1;
}

enum gh_code upstream_plain_attempt(const struct upstream_plain *pl, struct upstream_conns *conns,
				    const struct gh_upstream_req *req,
				    struct gh_upstream_resp *resp, const struct gh_buf *head,
				    const char *origin, CURLcode *cc_out, struct gh_err *e)
{
	struct upstream_xfer x = {req, resp, NULL, resp->body.cap, -1, 0, 0,
			 req->capture_header ? strlen(req->capture_header) + 1 : 0};
	struct plain_clock k = {req, -1, TICK_MS, 0};
	struct gh_h1 p;
	struct plain_read r = {&x, &p};
	int64_t start = gh_mono_ns(), deadline = 0, cdeadline;
	int fd = -1, ai = 0, reused, connected = 0, tried = 0, sent = !req->on_sent;
	int wait = WAIT_READY, how = READ_MORE;
	size_t extra = 0;
	long oserr = 0;
	CURLcode cc = CURLE_OK;
	/* small: a stream's worker keeps its stack for the stream's life */
	char buf[4096];
	const char *bad = NULL;

	*cc_out = CURLE_OK;
	if (req->max_response && req->max_response < x.limit)
		x.limit = req->max_response;
	if (req->on_tick && req->wake_fd > 0) {
		k.wake = req->wake_fd;
		k.every = req->tick_ms <= TICK_MS ? TICK_MS
			  : req->tick_ms < WAKE_TICK_MAX_MS ? req->tick_ms : WAKE_TICK_MAX_MS;
	}
	if (req->timeout_ms > 0)
		deadline = start + req->timeout_ms * 1000000;
	cdeadline = start + (req->connect_timeout_ms > 0 ? req->connect_timeout_ms
							 : PLAIN_CONNECT_MS) * 1000000;
	if (deadline && deadline < cdeadline)
		cdeadline = deadline;
	gh_h1_init(&p, req->method && !strcmp(req->method, "HEAD"));
again:
	reused = (fd = conn_take(conns, pl, &ai)) >= 0;
	if (fd < 0 && (fd = plain_connect(pl, &k, cdeadline, &ai, &cc, &oserr, &wait)) < 0)
		goto out;
	connected = 1;
	if (plain_send(fd, head, req, &k, deadline, &wait) != 0) {
		if (wait == WAIT_READY) {
			oserr = errno;
			if (reused && !tried++) {
				close(fd);
				goto again;
			}
			cc = CURLE_SEND_ERROR;
		} else if (wait == WAIT_TIMEOUT) {
			cc = CURLE_OPERATION_TIMEDOUT;
		}
		goto out;
	}
	if (!sent) {
		sent = 1;
		req->on_sent(req->ud);
	}
	how = READ_MORE;
	if (relay_read(fd, &k, &p, &r, deadline, &extra, &oserr, &how, &wait)) {
		if (wait == WAIT_TIMEOUT)
			cc = CURLE_OPERATION_TIMEDOUT;
		if (wait != WAIT_READY)
			goto out;
	}
	while (how == READ_MORE && !x.cancelled) {
		if ((wait = plain_wait(&k, fd, POLLIN, deadline)) != WAIT_READY) {
			if (wait == WAIT_TIMEOUT)
				cc = CURLE_OPERATION_TIMEDOUT;
			goto out;
		}
		how = read_pass(fd, &p, &r, buf, sizeof(buf), &extra, &oserr);
	}
	if ((how == READ_EOF || how == READ_ERROR) && p.received == 0 && reused && !tried++) {
		/* the server closed the kept-alive connection as the request
		 * went out: nothing was acted on, send it again on a new one */
		close(fd);
		fd = -1;
		gh_h1_free(&p);
		gh_h1_init(&p, req->method && !strcmp(req->method, "HEAD"));
		goto again;
	}
	if (how == READ_EOF)
		cc = p.received == 0 ? CURLE_GOT_NOTHING : CURLE_PARTIAL_FILE;
	else if (how == READ_ERROR)
		cc = p.received == 0 ? CURLE_RECV_ERROR : CURLE_PARTIAL_FILE;
	else if (how == READ_BAD)
		bad = p.err;
out:
	resp->status = p.status;
	if (fd >= 0) {
		if (how == READ_DONE && p.keep_alive && !extra && !x.cancelled && !x.toobig)
			conn_keep(conns, fd, &pl->addr[ai], pl->alen[ai]);
		else
			close(fd); /* an abort closes the connection at once */
	}
	gh_h1_free(&p);
	if (x.cancelled || wait == WAIT_CANCELLED)
		return gh_err_set(e, GH_E_CANCELLED, "upstream %s: request cancelled", origin);
	if (x.toobig)
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: response body over %zu bytes",
				  origin, x.limit);
	if (wait == WAIT_FAILED)
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: poll failed: %s", origin,
				  strerror(errno));
	if (bad)
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: not a valid HTTP reply (%s)",
				  origin, bad);
	*cc_out = cc;
	if (cc == CURLE_OK)
		return GH_OK;
	return upstream_transfer_error(cc, oserr, connected, req, origin, e);
}

