/*
 * mcp_http.c - an upstream MCP server over Streamable HTTP (protocol
 * revisions 2025-11-25 and 2025-06-18); see mcp_int.h.
 *
 * Every message is a POST of one JSON-RPC message to the configured URL
 * (the only URL this connection ever calls; redirects are not followed),
 * with Accept: application/json, text/event-stream, the config's headers,
 * the session id the server gave at initialize (Mcp-Session-Id) and,
 * after initialize, the agreed MCP-Protocol-Version. A request's answer
 * comes back as one JSON body or as an SSE stream that may carry the
 * request's progress notifications (handed to the caller as they arrive),
 * other notifications and requests of the server's before the answer. A
 * 404 to a request that carried a session id means the session ended: the
 * request fails with GH_E_NOTFOUND and the upstream renews the session (a
 * new connection: a connection's session never changes once shared).
 * Notifications get 202. At close the session is ended with a DELETE.
 *
 * The server may also talk on its own: after initialize a listener
 * thread holds a GET stream open (Accept: text/event-stream) and hands
 * what arrives to the upstream (notifications/tools/list_changed, mostly).
 * A server that answers the GET with 405 has no such stream; the thread
 * then ends. A broken stream is opened again after a pause.
 *
 * Threading: requests run on the caller's thread with curl handles taken
 * from the pool for the transfer (upstream.h); the session id and version
 * are guarded by a mutex; the listener has its own thread (its stream
 * holds a pair of handles while open) and is stopped through a pipe it
 * watches.
 */
#define _GNU_SOURCE

#include "mcp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "upstream.h"
#include "util.h"

#define MAX_HEADERS 40
#define STREAM_RETRY_MS 1000   /* pause before the listener opens its stream again */
#define DELETE_TIMEOUT_MS 2000

struct http_conn {
	struct mcp_conn base;
	const struct gh_mcp_server_conf *conf;
	struct mcp_events ev;
	pthread_mutex_t mu;             /* sid, version */
	char sid[256];                  /* "" until the server gives one */
	char version[32];               /* "" until initialize agreed one */
	pthread_t listener;
	int listener_started;
	int wake[2];                    /* close() stops the listener */
	_Atomic int closing;
};

/* One exchange: what the reply stream delivers. */
struct exchange {
	struct http_conn *c;
	int64_t id;                     /* the request's; -1 for a notification */
	const struct mcp_req_opts *o;
	struct gh_upstream_resp *resp;
	struct gh_mcp_reader *rd;       /* made when the first body bytes show the type */
	int got;                        /* reply holds the answer */
	struct gh_mcp_msg reply;
	int toobig;
	int stop;                       /* the listener is asked to end */
};

/* --------------------------------------------------------------- replies */

static int on_msg(void *ud, struct gh_mcp_msg *m)
{
	struct exchange *x = ud;
	struct http_conn *c = x->c;

	switch (m->kind) {
	case GH_MCP_RESPONSE:
	case GH_MCP_ERROR:
		if (x->id >= 0 && m->id == x->id && !x->got) {
			x->reply = *m;
			m->root = NULL;
			x->got = 1;
		} else {
			gh_debug("mcp %s: an answer to no request in flight (id %lld)",
				 c->conf->name, (long long)m->id);
		}
		break;
	case GH_MCP_NOTIFICATION:
		if (!strcmp(m->method, "notifications/progress")) {
			struct gh_mcp_progress pr;

			if (gh_mcp_parse_progress(m->params, &pr) == 0 && x->id >= 0 &&
			    pr.token == x->id && x->o && x->o->progress)
				x->o->progress(x->o->ud, &pr);
			break;
		}
		mcp_msg_other(c->conf, &c->ev, m, "something");
		break;
	case GH_MCP_REQUEST:
	case GH_MCP_INVALID:
		mcp_msg_other(c->conf, &c->ev, m, "something");
		break;
	}
	return 0;
}

static int on_data(void *ud, const char *p, size_t n)
{
	struct exchange *x = ud;
	int rc;

	if (!x->rd) {
		const char *ct = x->resp->content_type;
		enum gh_mcp_framing f = !strncasecmp(ct, "text/event-stream", 17) ? GH_MCP_SSE
										     : GH_MCP_JSON;

		x->rd = gh_mcp_reader_new(f, (size_t)x->c->conf->max_message_bytes);
		if (!x->rd)
			return 1;
	}
	rc = gh_mcp_reader_feed(x->rd, p, n, on_msg, x);
	if (rc == GH_MCP_READ_TOOBIG)
		x->toobig = 1;
	return rc != 0;
}

static int on_tick(void *ud)
{
	struct exchange *x = ud;

	if (x->stop || atomic_load(&x->c->closing))
		return 1;
	return x->o && x->o->tick ? x->o->tick(x->o->ud) : 0;
}

/* First bytes of an error body, printable, for messages. */
static void excerpt(const struct gh_buf *b, char *out, size_t cap)
{
	mcp_log_safe(b->data ? b->data : "", b->len < cap - 1 ? b->len : cap - 1, out, cap);
}

/* A 400 whose body talks about the session: some servers (the SDK's
 * examples among them) answer an unknown session id that way rather than
 * with the 404 the specification asks for. */
static int session_complaint(const struct gh_buf *b)
{
	return b->data && strcasestr(b->data, "session") != NULL;
}

/* The headers of every message: cap MAX_HEADERS. sid and version are
 * copies taken under the mutex. */
static size_t make_headers(struct http_conn *c, struct gh_upstream_header *h, const char *accept,
			   int body, char *sid, size_t sidcap, char *version, size_t vcap)
{
	size_t n = 0, i;

	pthread_mutex_lock(&c->mu);
	gh_strlcpy(sid, c->sid, sidcap);
	gh_strlcpy(version, c->version, vcap);
	pthread_mutex_unlock(&c->mu);
	if (body)
		h[n++] = (struct gh_upstream_header){"Content-Type", "application/json"};
	h[n++] = (struct gh_upstream_header){"Accept", accept};
	if (sid[0])
		h[n++] = (struct gh_upstream_header){"Mcp-Session-Id", sid};
	if (version[0])
		h[n++] = (struct gh_upstream_header){"MCP-Protocol-Version", version};
	for (i = 0; i < c->conf->nheaders && n < MAX_HEADERS; i++)
		h[n++] = (struct gh_upstream_header){c->conf->headers[i].name,
						     c->conf->headers[i].value};
	return n;
}

/* POSTs one message and reads what comes back. id < 0: a notification
 * or a response (202 expected). */
static enum gh_code post(struct http_conn *c, int64_t id, const char *body, size_t len,
			 const struct mcp_req_opts *o, int64_t timeout_ms, struct gh_mcp_msg *reply,
			 struct gh_err *e)
{
	struct gh_upstream_header h[MAX_HEADERS];
	struct gh_upstream_req req;
	struct gh_upstream_resp resp;
	struct exchange x;
	struct gh_err ue;
	char sid[256], version[32], ex[201];
	enum gh_code rc;

	if (reply)
		memset(reply, 0, sizeof(*reply));
	if (atomic_load(&c->base.dead))
		return gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: the session is closed",
				  c->conf->name);
	memset(&x, 0, sizeof(x));
	x.c = c;
	x.id = id;
	x.o = o;
	x.resp = &resp;
	memset(&req, 0, sizeof(req));
	req.url = c->conf->url;
	req.method = "POST";
	req.headers = h;
	req.nheaders = make_headers(c, h, "application/json, text/event-stream", 1, sid,
				    sizeof(sid), version, sizeof(version));
	req.body = body;
	req.body_len = len;
	req.timeout_ms = timeout_ms;
	req.connect_timeout_ms = c->conf->connect_timeout_ms < timeout_ms
					 ? c->conf->connect_timeout_ms : timeout_ms;
	req.max_response = 64 << 10; /* error bodies; replies are streamed to on_data */
	req.on_data = on_data;
	req.on_tick = on_tick;
	req.ud = &x;
	if (o) {
		req.wake_fd = o->wake_fd;
		req.tick_ms = o->tick_ms;
	}
	req.capture_header = "Mcp-Session-Id";
	gh_upstream_resp_init(&resp, 64 << 10);
	rc = gh_upstream_do(&req, &resp, &ue);
	if (rc == GH_OK && x.rd) {
		int fr = gh_mcp_reader_finish(x.rd, on_msg, &x);

		if (fr == GH_MCP_READ_TOOBIG)
			x.toobig = 1;
	}
	if (x.toobig) {
		rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: a message over %lld bytes "
						  "(max_message_bytes)", c->conf->name,
				(long long)c->conf->max_message_bytes);
	} else if (rc == GH_E_CANCELLED) {
		rc = atomic_load(&c->closing)
			     ? gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: the session is closing",
					  c->conf->name)
			     : gh_err_set(e, GH_E_CANCELLED, "cancelled");
	} else if (rc == GH_E_TIMEOUT) {
		rc = gh_err_set(e, GH_E_TIMEOUT, "MCP server %s: no answer within %lld ms",
				c->conf->name, (long long)timeout_ms);
	} else if (rc != GH_OK) {
		/* the server cannot be reached or broke the connection: this
		 * session is gone, the upstream reconnects with backoff. Its
		 * address is for the log and admins (the connection's why),
		 * not for messages a model or a tenant reads. */
		rc = gh_err_set(e, rc, "MCP server %s: %s", c->conf->name,
				resp.error[0] ? resp.error : "the request failed");
		if (mcp_conn_fail(&c->base, ue.msg) && c->ev.closed)
			c->ev.closed(c->ev.ud, ue.msg);
	} else if (sid[0] && (resp.status == 404 ||
			      (resp.status == 400 && session_complaint(&resp.body)))) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "MCP server %s: the session has ended (HTTP %ld)",
				c->conf->name, resp.status);
	} else if (resp.status < 200 || resp.status > 299) {
		excerpt(&resp.body, ex, sizeof(ex));
		rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s answered HTTP %ld%s%s%s",
				c->conf->name, resp.status,
				resp.status >= 300 && resp.status < 400
					? " (redirects are not followed)" : "",
				ex[0] ? ": " : "", ex);
	} else if (id >= 0 && !x.got) {
		rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: the reply (HTTP %ld, %s) held no "
						  "answer to the request", c->conf->name,
				resp.status, resp.content_type[0] ? resp.content_type : "no body");
	}
	if (rc == GH_OK && resp.captured[0] && !resp.captured_long) {
		/* a session id is visible ASCII (0x21-0x7E) */
		size_t i;
		int ok = 1;

		for (i = 0; resp.captured[i]; i++)
			ok &= resp.captured[i] > 0x20 && resp.captured[i] < 0x7f;
		/* the session of a connection is the one initialize got: a
		 * connection is shared only after that, and never changes
		 * session (a new session is a new connection) */
		pthread_mutex_lock(&c->mu);
		if (ok && !c->sid[0] && !c->version[0]) {
			gh_strlcpy(c->sid, resp.captured, sizeof(c->sid));
			snprintf(c->base.session, sizeof(c->base.session), "%s", c->sid);
		}
		pthread_mutex_unlock(&c->mu);
	}
	if (rc == GH_OK && reply && x.got) {
		*reply = x.reply;
		x.reply.root = NULL;
	}
	gh_mcp_msg_clear(&x.reply);
	gh_mcp_reader_free(x.rd);
	gh_upstream_resp_free(&resp);
	return rc;
}

static enum gh_code http_request(struct mcp_conn *base, int64_t id, const char *method,
				 const cJSON *params, const struct mcp_req_opts *o,
				 struct gh_mcp_msg *reply, struct gh_err *e)
{
	struct http_conn *c = (struct http_conn *)base;
	struct gh_buf b;
	enum gh_code rc;

	gh_buf_init(&b, (size_t)c->conf->max_message_bytes);
	if (gh_mcp_build_request(&b, id, method, params) != GH_BUF_OK)
		rc = gh_err_set(e, GH_E_TOOBIG, "MCP server %s: the %s request is over %lld bytes",
				c->conf->name, method, (long long)c->conf->max_message_bytes);
	else
		rc = post(c, id, b.data, b.len, o, o->timeout_ms, reply, e);
	gh_buf_free(&b);
	return rc;
}

static enum gh_code http_notify(struct mcp_conn *base, const char *method, const cJSON *params,
				int64_t timeout_ms, struct gh_err *e)
{
	struct http_conn *c = (struct http_conn *)base;
	struct gh_buf b;
	enum gh_code rc;

	gh_buf_init(&b, (size_t)c->conf->max_message_bytes);
	if (gh_mcp_build_notification(&b, method, params) != GH_BUF_OK)
		rc = gh_err_set(e, GH_E_TOOBIG, "MCP server %s: the notification is too large",
				c->conf->name);
	else
		rc = post(c, -1, b.data, b.len, NULL, timeout_ms, NULL, e);
	gh_buf_free(&b);
	return rc;
}

static enum gh_code http_respond(struct mcp_conn *base, const char *body, size_t len,
				 struct gh_err *e)
{
	struct http_conn *c = (struct http_conn *)base;

	return post(c, -1, body, len, NULL, 5000, NULL, e);
}

/* ------------------------------------------------------------ listener */

static void pause_ms(struct http_conn *c, int64_t ms)
{
	struct timespec ts;
	int64_t end = gh_mono_ns() / 1000000 + ms;

	while (!atomic_load(&c->closing) && gh_mono_ns() / 1000000 < end) {
		ts.tv_sec = 0;
		ts.tv_nsec = 20 * 1000000L;
		nanosleep(&ts, NULL);
	}
}

static void *listener_main(void *arg)
{
	struct http_conn *c = arg;
	struct mcp_req_opts o;

	int had_stream = 0;

	memset(&o, 0, sizeof(o));
	while (!atomic_load(&c->closing)) {
		struct gh_upstream_header h[MAX_HEADERS];
		struct gh_upstream_req req;
		struct gh_upstream_resp resp;
		struct exchange x;
		struct gh_err ue;
		char sid[256], version[32];
		enum gh_code rc;

		memset(&x, 0, sizeof(x));
		x.c = c;
		x.id = -1;
		x.o = &o;
		x.resp = &resp;
		memset(&req, 0, sizeof(req));
		req.url = c->conf->url;
		req.method = "GET";
		req.headers = h;
		req.nheaders = make_headers(c, h, "text/event-stream", 0, sid, sizeof(sid), version,
					    sizeof(version));
		req.connect_timeout_ms = c->conf->connect_timeout_ms;
		req.max_response = 64 << 10;
		req.on_data = on_data;
		req.on_tick = on_tick;
		req.ud = &x;
		req.wake_fd = c->wake[0];
		req.tick_ms = 60000;
		gh_upstream_resp_init(&resp, 64 << 10);
		rc = gh_upstream_do(&req, &resp, &ue);
		gh_mcp_reader_free(x.rd);
		gh_upstream_resp_free(&resp);
		if (atomic_load(&c->closing))
			break;
		if (rc == GH_OK && sid[0] &&
		    (resp.status == 404 || (resp.status == 400 && had_stream))) {
			char why[96];

			/* the server forgot the session (it restarted, mostly) */
			snprintf(why, sizeof(why), "the session ended (HTTP %ld on its event stream)",
				 resp.status);
			if (mcp_conn_fail(&c->base, why) && c->ev.closed)
				c->ev.closed(c->ev.ud, why);
			break;
		}
		if (rc == GH_OK && (resp.status == 405 || resp.status == 400)) {
			/* no stream offered: list changes arrive only with replies */
			gh_debug("mcp %s: no GET stream (HTTP %ld)", c->conf->name, resp.status);
			break;
		}
		if (rc == GH_OK && resp.status >= 200 && resp.status < 300)
			had_stream = 1;
		if (rc == GH_E_UPSTREAM || rc == GH_E_TIMEOUT) {
			char why[GH_ERR_MSG_MAX + 32];

			snprintf(why, sizeof(why), "its event stream failed: %s", ue.msg);
			if (mcp_conn_fail(&c->base, why) && c->ev.closed)
				c->ev.closed(c->ev.ud, why);
			break;
		}
		pause_ms(c, STREAM_RETRY_MS);
	}
	return NULL;
}

static void http_agreed(struct mcp_conn *base, const char *version)
{
	struct http_conn *c = (struct http_conn *)base;

	pthread_mutex_lock(&c->mu);
	gh_strlcpy(c->version, version, sizeof(c->version));
	pthread_mutex_unlock(&c->mu);
}

static void http_listen(struct mcp_conn *base)
{
	struct http_conn *c = (struct http_conn *)base;

	if (!c->listener_started && pthread_create(&c->listener, NULL, listener_main, c) == 0)
		c->listener_started = 1;
}

/* ------------------------------------------------------------- closing */

static void http_close(struct mcp_conn *base, char *why, size_t cap)
{
	struct http_conn *c = (struct http_conn *)base;
	char sid[256];

	atomic_store(&c->closing, 1);
	if (c->listener_started) {
		ssize_t w;

		do
			w = write(c->wake[1], "x", 1);
		while (w < 0 && errno == EINTR);
		pthread_join(c->listener, NULL);
		c->listener_started = 0;
	}
	pthread_mutex_lock(&c->mu);
	gh_strlcpy(sid, c->sid, sizeof(sid));
	pthread_mutex_unlock(&c->mu);
	if (sid[0] && !atomic_load(&c->base.dead)) {
		struct gh_upstream_header h[MAX_HEADERS];
		struct gh_upstream_req req;
		struct gh_upstream_resp resp;
		struct gh_err ue;
		char version[32];

		memset(&req, 0, sizeof(req));
		req.url = c->conf->url;
		req.method = "DELETE";
		req.headers = h;
		req.nheaders = make_headers(c, h, "application/json, text/event-stream", 0, sid,
					    sizeof(sid), version, sizeof(version));
		req.timeout_ms = DELETE_TIMEOUT_MS;
		req.connect_timeout_ms = DELETE_TIMEOUT_MS;
		gh_upstream_resp_init(&resp, 4096);
		if (gh_upstream_do(&req, &resp, &ue) == GH_OK) {
			if (why && cap)
				snprintf(why, cap, "session ended (DELETE: HTTP %ld)", resp.status);
		} else if (why && cap) {
			snprintf(why, cap, "session not ended: %s", ue.msg);
		}
		gh_upstream_resp_free(&resp);
	} else if (why && cap) {
		why[0] = '\0';
	}
	mcp_conn_fail(&c->base, "the session was closed");
}

static void http_destroy(struct mcp_conn *base)
{
	struct http_conn *c = (struct http_conn *)base;

	if (c->listener_started)
		http_close(base, NULL, 0);
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static const struct mcp_conn_ops http_ops = {
	http_request, http_notify, http_respond, http_agreed, http_listen, http_close,
	http_destroy,
};

enum gh_code mcp_http_open(const struct gh_mcp_server_conf *conf, const struct mcp_events *ev,
			   struct mcp_conn **out, struct gh_err *e)
{
	struct http_conn *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	c->conf = conf;
	c->ev = *ev;
	c->base.ops = &http_ops;
	atomic_init(&c->base.refs, 1);
	atomic_init(&c->base.dead, 0);
	atomic_init(&c->base.failing, 0);
	atomic_init(&c->closing, 0);
	pthread_mutex_init(&c->mu, NULL);
	if (pipe2(c->wake, O_CLOEXEC) != 0) {
		pthread_mutex_destroy(&c->mu);
		free(c);
		return gh_err_set(e, GH_E_IO, "MCP server %s: cannot make a pipe: %s", conf->name,
				  strerror(errno));
	}
	snprintf(c->base.session, sizeof(c->base.session), "(no session id)");
	*out = &c->base;
	return GH_OK;
}
