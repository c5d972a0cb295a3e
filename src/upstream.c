/*
 * upstream.c - outbound HTTP with libcurl; see upstream.h for the contract.
 *
 * Handles come in pairs (a multi handle and an easy handle, with the last
 * URL parsed) kept in one process-wide pool: a transfer takes a pair for
 * its duration and gives it back, and the pool hands out the pair given
 * back last. The easy handle is added to the multi handle for one request
 * and removed afterwards, so the multi handle's connection cache keeps
 * upstream connections alive between requests, whichever thread makes the
 * next one: a request that lands on any worker thread finds the connection
 * the previous request left open (with one handle pair per thread, every
 * thread opened its own). curl_easy_reset() clears the previous request's
 * options first. The pool grows to the most transfers in flight at once;
 * gh_upstream_idle_close() closes the pairs nobody took for a while (the
 * server's maintenance thread calls it every second). The transfer is
 * driven with curl_multi_poll(), which also watches the caller's wake descriptor (a
 * streaming client's connection), in slices of at most 50 ms (tick_ms with
 * a wake descriptor) so on_tick runs on time, and an abort removes the
 * transfer at once.
 *
 * A pair also holds what the built-in client (upstream_plain.c) needs
 * for its target, when that is a plain-HTTP one at an address, and the
 * connections it keeps alive; such a transfer goes through it instead of
 * curl, with the same retries around each attempt (upstream_do).
 *
 * Every easy handle uses one process-wide share object for the DNS cache
 * and TLS sessions, so a worker thread's first request to a provider
 * neither resolves its name again (curl's threaded resolver starts a
 * thread per lookup) nor makes a full TLS handshake. Connections are not
 * put in the share (libcurl does not support sharing a connection cache
 * between concurrent threads); the pool moves a whole pair, connection
 * cache and all, from one thread to the next instead, and a pair is only
 * ever used by the thread that took it. The share's locks, one per kind of
 * data, and the pool's mutex are all that threads have in common here.
 */
#include "upstream.h"

#include "otel.h"
#include "upstream_int.h"
#include "util.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SLEEP_SLICE_MS 20            /* backoff sleeps wake this often to tick */
#define MAX_BACKOFF_MS INT64_C(30000)

struct handles {
	CURLM *multi;                     /* NULL until a transfer goes through curl */
	CURL *easy;                       /* likewise */
	/* The last URL this pair was asked for, parsed once: a provider's URL
	 * comes back request after request, and curl would parse it again for
	 * every transfer (and url_origin once more for the error messages). */
	char *url;                        /* wiped when replaced: it may hold a key */
	CURLU *curlu;                     /* NULL: url did not parse (curl says why) */
	char origin[ORIGIN_MAX];
	struct upstream_plain plain;      /* the target, for the built-in client */
	struct upstream_conns conns;      /* its idle connections */
	int64_t idle_since_ns;            /* given back (monotonic) */
	struct handles *next;             /* in the pool */
};

static CURLSH *share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

/* The pairs not in use, the one given back last first (so idle_since_ns
 * falls along the list). */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct handles *pool;

static void target_forget(struct handles *h);

static void handles_destroy(struct handles *h)
{
	if (!h)
		return;
	target_forget(h);
	upstream_conns_close(&h->conns);
	/* the easy handle is never left attached to the multi handle */
	if (h->easy)
		curl_easy_cleanup(h->easy);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	free(h);
}

/* Makes h's easy handle anew (or for the first time): 0, or -1 (then h
 * has none, and curl_ready tries again on the next transfer). */
static int easy_renew(struct handles *h)
{
	curl_easy_cleanup(h->easy);
	h->easy = curl_easy_init();
	if (h->easy && curl_easy_setopt(h->easy, CURLOPT_SHARE, share) == CURLE_OK)
		return 0;
	curl_easy_cleanup(h->easy);
	h->easy = NULL;
	return -1;
}

/* A pair for one transfer, the caller's alone until handles_give: from
 * the pool, or new when all are in use. NULL when out of memory. curl's
 * handles come with the first transfer that needs them (curl_ready): one
 * to a plain http:// upstream goes through the built-in client, and a
 * thousand streams held at once would otherwise each hold a multi handle
 * (and its two wake-up sockets) and an easy handle they never use. */
static struct handles *handles_take(void)
{
	struct handles *h;

	pthread_mutex_lock(&pool_mu);
	h = pool;
	if (h)
		pool = h->next;
	pthread_mutex_unlock(&pool_mu);
	if (h) {
		h->next = NULL;
		return h;
	}
	return calloc(1, sizeof(struct handles));
}

/* h's curl handles, made when missing: 0, or -1 when out of memory (then
 * the next transfer tries again). curl_easy_reset() keeps the share, so
 * it is attached once, by easy_renew. */
static int curl_ready(struct handles *h)
{
	if (!h->multi && !(h->multi = curl_multi_init()))
		return -1;
	return h->easy || easy_renew(h) == 0 ? 0 : -1;
}

/* Detaches the pairs given back before cutoff (the tail of the list) and
 * returns them. Called with pool_mu held. */
static struct handles *pool_cut(int64_t cutoff_ns)
{
	struct handles **pp = &pool, *old;

	while (*pp && (*pp)->idle_since_ns >= cutoff_ns)
		pp = &(*pp)->next;
	old = *pp;
	*pp = NULL;
	return old;
}

static size_t destroy_list(struct handles *h)
{
	struct handles *next;
	size_t n = 0;

	for (; h; h = next, n++) {
		next = h->next;
		handles_destroy(h);
	}
	return n;
}

/* Gives h back, first in line for the next transfer. */
static void handles_give(struct handles *h)
{
	h->idle_since_ns = gh_mono_ns();
	pthread_mutex_lock(&pool_mu);
	h->next = pool;
	pool = h;
	pthread_mutex_unlock(&pool_mu);
}

size_t gh_upstream_idle_close(int64_t idle_ms)
{
	struct handles *old;

	pthread_mutex_lock(&pool_mu);
	old = pool_cut(gh_mono_ns() - idle_ms * 1000000);
	pthread_mutex_unlock(&pool_mu);
	return destroy_list(old);
}

static void share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *ud)
{
	(void)c;
	(void)a;
	(void)ud;
	if ((unsigned)d < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&share_locks[d]);
}

static void share_unlock(CURL *c, curl_lock_data d, void *ud)
{
	(void)c;
	(void)ud;
	if ((unsigned)d < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&share_locks[d]);
}

int gh_upstream_global_init(void)
{
	int i;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -1;
	upstream_plain_init();
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&share_locks[i], NULL);
	share = curl_share_init();
	if (!share || curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
	    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
		gh_upstream_global_cleanup();
		return -1;
	}
	return 0;
}

void gh_upstream_global_cleanup(void)
{
	struct handles *h;
	int i;

	/* every transfer has ended by now (the threads that made them have
	 * stopped): the whole pool is here */
	pthread_mutex_lock(&pool_mu);
	h = pool;
	pool = NULL;
	pthread_mutex_unlock(&pool_mu);
	destroy_list(h);
	if (share && curl_share_cleanup(share) != CURLSHE_OK)
		return;
	share = NULL;
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&share_locks[i]);
	curl_global_cleanup();
}

/* A response before anything was received (the body aside). */
static void resp_blank(struct gh_upstream_resp *r)
{
	r->status = 0;
	r->content_type[0] = '\0';
	r->retry_after_ms = -1;
	r->attempts = 0;
	r->streamed_bytes = 0;
	r->captured[0] = '\0';
	r->captured_long = 0;
	r->error[0] = '\0';
}

void gh_upstream_resp_init(struct gh_upstream_resp *r, size_t cap)
{
	resp_blank(r);
	gh_buf_init(&r->body, cap);
}

void gh_upstream_resp_free(struct gh_upstream_resp *r)
{
	if (!r)
		return;
	gh_buf_free(&r->body);
}

/* "scheme://host:port" of the URL in u, never its path, query or user
 * info; "(invalid URL)" when u is NULL or lacks a part. */
static void curlu_origin(CURLU *u, char *out, size_t cap)
{
	char *scheme = NULL, *host = NULL, *port = NULL;

	gh_strlcpy(out, "(invalid URL)", cap);
	if (u && curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
		snprintf(out, cap, "%s://%s:%s", scheme, host, port);
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
}

/* url parsed, or NULL when it does not parse (or out of memory). */
static CURLU *url_parse(const char *url)
{
	CURLU *u = url ? curl_url() : NULL;

	if (u && curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
		curl_url_cleanup(u);
		u = NULL;
	}
	return u;
}

static void url_origin(const char *url, char *out, size_t cap)
{
	CURLU *u = url_parse(url);

	curlu_origin(u, out, cap);
	curl_url_cleanup(u);
}

static void target_forget(struct handles *h)
{
	if (h->url) {
		sodium_memzero(h->url, strlen(h->url));
		free(h->url);
	}
	curl_url_cleanup(h->curlu);
	h->url = NULL;
	h->curlu = NULL;
	h->origin[0] = '\0';
	upstream_plain_forget(&h->plain);
}

/* Makes url this thread's current target (h->curlu, h->origin), parsing it
 * only when it is not the one before. */
static void target_set(struct handles *h, const char *url)
{
	if (h->url && !strcmp(h->url, url))
		return;
	target_forget(h);
	h->curlu = url_parse(url);
	curlu_origin(h->curlu, h->origin, sizeof(h->origin));
	if (!(h->url = strdup(url))) {
		/* kept unparsed: the next request parses it again */
		curl_url_cleanup(h->curlu);
		h->curlu = NULL;
	}
	upstream_plain_target(&h->plain, h->curlu);
}

/* Body bytes of a response with status code: to on_data, or buffered.
 * 0, or -1 to stop the transfer (x says why). */
int upstream_take_body(struct upstream_xfer *x, long code, const char *p, size_t n)
{
	if (x->mode < 0)
		x->mode = x->req->on_data && code >= 200 && code < 300;
	if (x->mode == 1) {
		if (n && x->req->on_data(x->req->ud, p, n)) {
			x->cancelled = 1;
			return -1;
		}
		x->resp->streamed_bytes += (int64_t)n;
		return 0;
	}
	if (n > x->limit - x->resp->body.len ||
	    gh_buf_append(&x->resp->body, p, n) != GH_BUF_OK) {
		x->toobig = 1;
		return -1;
	}
	return 0;
}

static size_t write_cb(char *p, size_t size, size_t nmemb, void *ud)
{
	struct upstream_xfer *x = ud;
	size_t n = size * nmemb;
	long code = 0;

	if (x->mode < 0)
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	return upstream_take_body(x, code, p, n) == 0 ? n : CURL_WRITEFUNC_ERROR;
}

/* Copies a header's value (after "name:") trimmed into out. */
static void header_value(const char *p, size_t n, size_t skip, char *out, size_t cap)
{
	size_t a = skip, b = n, len;

	while (a < b && (p[a] == ' ' || p[a] == '\t'))
		a++;
	while (b > a && (p[b - 1] == '\r' || p[b - 1] == '\n' || p[b - 1] == ' ' ||
			 p[b - 1] == '\t'))
		b--;
	len = b - a;
	if (len >= cap)
		len = cap - 1;
	memcpy(out, p + a, len);
	out[len] = '\0';
}

/* Retry-After: delay-seconds or an HTTP-date; -1 when unusable. */
static int64_t parse_retry_after(const char *v)
{
	int64_t secs;
	time_t t;

	if (gh_parse_i64(v, 0, INT64_MAX / 1000, &secs) == 0)
		return secs * 1000;
	t = curl_getdate(v, NULL);
	if (t == (time_t)-1)
		return -1;
	secs = (int64_t)t * 1000 - gh_now_ms();
	return secs > 0 ? secs : 0;
}

size_t upstream_header_cb(char *p, size_t size, size_t nmemb, void *ud)
{
	struct upstream_xfer *x = ud;
	size_t n = size * nmemb;
	char v[128];

	if (n >= 5 && !memcmp(p, "HTTP/", 5)) {
		/* a new response head (after a 1xx): forget the last one's */
		x->resp->content_type[0] = '\0';
		x->resp->retry_after_ms = -1;
		x->resp->captured[0] = '\0';
		x->resp->captured_long = 0;
	} else if (x->req->capture_header && n > x->clen && p[x->clen - 1] == ':' &&
		   !strncasecmp(p, x->req->capture_header, x->clen - 1)) {
		size_t len;

		header_value(p, n, x->clen, x->resp->captured, sizeof(x->resp->captured));
		len = strlen(x->resp->captured);
		x->resp->captured_long = len + 1 >= sizeof(x->resp->captured);
	} else if (n > 13 && !strncasecmp(p, "content-type:", 13)) {
		header_value(p, n, 13, x->resp->content_type, sizeof(x->resp->content_type));
	} else if (n > 12 && !strncasecmp(p, "retry-after:", 12)) {
		header_value(p, n, 12, v, sizeof(v));
		x->resp->retry_after_ms = parse_retry_after(v);
	}
	return n;
}

int upstream_bad_header_text(const char *s)
{
	return !s || strpbrk(s, "\r\n") != NULL;
}

/* Wipes and frees a header list: its lines may hold secret values. */
static void headers_free(struct curl_slist *list)
{
	struct curl_slist *t;

	for (t = list; t; t = t->next)
		if (t->data)
			sodium_memzero(t->data, strlen(t->data));
	curl_slist_free_all(list);
}

/* "name: value" in line (emptied first). */
static int header_line(struct gh_buf *line, const char *name, const char *value)
{
	int rc;

	gh_buf_reset(line);
	if ((rc = gh_buf_puts(line, name)) != GH_BUF_OK ||
	    (rc = gh_buf_append(line, ": ", 2)) != GH_BUF_OK)
		return rc;
	return gh_buf_puts(line, value);
}

/* Appends "name: value" to *list; -1 when out of memory. */
static int add_line(struct curl_slist **list, struct gh_buf *line, const char *name,
		    const char *value)
{
	struct curl_slist *t;

	if (header_line(line, name, value) != GH_BUF_OK ||
	    !(t = curl_slist_append(*list, line->data)))
		return -1;
	*list = t;
	return 0;
}

/* Builds the header list once per request: "Expect:" first so curl never
 * waits for a 100-continue, then the caller's headers. */
static enum gh_code make_headers(const struct gh_upstream_req *req, const char *origin,
				 struct curl_slist **out, struct gh_err *e)
{
	struct curl_slist *list, *t;
	struct gh_buf line;
	enum gh_code rc = GH_OK;
	size_t i;

	*out = NULL;
	gh_buf_init(&line, 64 << 10);
	if (!(list = curl_slist_append(NULL, "Expect:")))
		rc = gh_err_set(e, GH_E_NOMEM, "upstream %s: out of memory", origin);
	for (i = 0; rc == GH_OK && i < req->nheaders; i++) {
		const struct gh_upstream_header *h = &req->headers[i];

		if (upstream_bad_header_text(h->name) || !*h->name || strchr(h->name, ':') ||
		    upstream_bad_header_text(h->value)) {
			/* name the header, never its value */
			rc = gh_err_set(e, GH_E_INTERNAL,
					"upstream %s: header \"%.64s\" is not valid", origin,
					upstream_bad_header_text(h->name) ? "?" : h->name);
			break;
		}
		if (header_line(&line, h->name, h->value) != GH_BUF_OK) {
			rc = gh_err_set(e, GH_E_INTERNAL,
					"upstream %s: header \"%.64s\" is too long", origin,
					h->name);
			break;
		}
		if (!(t = curl_slist_append(list, line.data))) {
			rc = gh_err_set(e, GH_E_NOMEM, "upstream %s: out of memory", origin);
			break;
		}
		list = t;
	}
	if (rc == GH_OK && gh_otel_enabled()) {
		/* the span this thread works under goes on with the request */
		char tp[GH_TRACEPARENT_LEN + 1], ts[GH_TRACESTATE_MAX + 1];

		if (gh_otel_outgoing(tp, sizeof(tp), ts, sizeof(ts)) &&
		    (add_line(&list, &line, "traceparent", tp) ||
		     (ts[0] && add_line(&list, &line, "tracestate", ts))))
			rc = gh_err_set(e, GH_E_NOMEM, "upstream %s: out of memory", origin);
	}
	if (line.data)
		sodium_memzero(line.data, line.alloc);
	gh_buf_free(&line);
	if (rc != GH_OK) {
		headers_free(list);
		return rc;
	}
	*out = list;
	return GH_OK;
}

static int setopts(CURL *c, CURLU *curlu, const struct gh_upstream_req *req,
		   struct curl_slist *headers, struct upstream_xfer *x)
{
	const char *method = req->method ? req->method : "POST";
	CURLcode r = CURLE_OK;

#define SET(opt, val) do { if (r == CURLE_OK) r = curl_easy_setopt(c, opt, val); } while (0)
	/* curl reads a parsed URL as it is (and never changes it) */
	if (curlu)
		SET(CURLOPT_CURLU, curlu);
	else
		SET(CURLOPT_URL, req->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_TCP_NODELAY, 1L);
	/* LLM replies arrive in small pieces; a smaller receive buffer than
	 * curl's 16 KB default keeps a thousand streaming workers lighter
	 * (streamed events are a few hundred bytes each) */
	SET(CURLOPT_BUFFERSIZE, req->on_data ? 4096L : 8192L);
	SET(CURLOPT_USERAGENT, "gatehouse");
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_TIMEOUT_MS, (long)(req->timeout_ms > 0 ? req->timeout_ms : 0));
	SET(CURLOPT_CONNECTTIMEOUT_MS,
	    (long)(req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 0));
	SET(CURLOPT_WRITEFUNCTION, write_cb);
	SET(CURLOPT_WRITEDATA, x);
	SET(CURLOPT_HEADERFUNCTION, upstream_header_cb);
	SET(CURLOPT_HEADERDATA, x);
	if (!strcmp(method, "GET")) {
		SET(CURLOPT_HTTPGET, 1L);
	} else {
		if (strcmp(method, "POST"))
			SET(CURLOPT_CUSTOMREQUEST, method);
		if (req->body || strcmp(method, "POST") == 0) {
			SET(CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)(req->body ? req->body_len : 0));
			SET(CURLOPT_POSTFIELDS, req->body ? req->body : "");
		}
	}
#undef SET
	return r == CURLE_OK ? 0 : -1;
}

static int method_ok(const char *m)
{
	size_t i;

	if (!m)
		return 1;
	for (i = 0; m[i]; i++)
		if (m[i] < 'A' || m[i] > 'Z' || i >= 16)
			return 0;
	return i > 0;
}

/* Error text for a failed transfer, from curl's result, the system's
 * error and whether a connection was up; names no header and no URL
 * path. */
enum gh_code upstream_transfer_error(CURLcode cc, long oserr, int connected,
				      const struct gh_upstream_req *req, const char *origin,
				      struct gh_err *e)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: %s", origin,
				  oserr == ECONNREFUSED ? "connection refused"
							: "could not connect");
	case CURLE_COULDNT_RESOLVE_HOST:
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: could not resolve host", origin);
	case CURLE_OPERATION_TIMEDOUT:
		if (!connected)
			return gh_err_set(e, GH_E_TIMEOUT,
					  "upstream %s: no connection within %lld ms", origin,
					  (long long)req->connect_timeout_ms);
		return gh_err_set(e, GH_E_TIMEOUT, "upstream %s: no complete answer within %lld ms",
				  origin, (long long)req->timeout_ms);
	case CURLE_GOT_NOTHING:
		return gh_err_set(e, GH_E_UPSTREAM,
				  "upstream %s: connection closed without a reply", origin);
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: connection broken mid-reply (%s)",
				  origin, curl_easy_strerror(cc));
	default:
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: %s", origin,
				  curl_easy_strerror(cc));
	}
}

static enum gh_code transfer_error(CURL *c, CURLcode cc, const struct gh_upstream_req *req,
				   const char *origin, struct gh_err *e)
{
	long oserr = 0;
	curl_off_t connect_us = 0;

	curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &oserr);
	if (cc == CURLE_OPERATION_TIMEDOUT)
		curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
	return upstream_transfer_error(cc, oserr, connect_us != 0, req, origin, e);
}

/* 1 once curl has written the request's head and all of its body (on a
 * new connection, not before the connection is up; a large body takes
 * several passes). */
static int request_written(CURL *c, const struct gh_upstream_req *req)
{
	curl_off_t body = 0;
	long head = 0;

	if (curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &head) != CURLE_OK || head <= 0)
		return 0;
	if (!req->body || !req->body_len)
		return 1;
	return curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &body) == CURLE_OK &&
	       body >= (curl_off_t)req->body_len;
}

/* Runs one attempt. *cc_out gets curl's result (CURLE_OK when the transfer
 * completed or a callback stopped it). */
static enum gh_code attempt(struct handles *h, const struct gh_upstream_req *req,
			    struct gh_upstream_resp *resp, struct curl_slist *headers,
			    const char *origin, CURLcode *cc_out, struct gh_err *e)
{
	struct upstream_xfer x = {req, resp, NULL, resp->body.cap, -1, 0, 0,
			 req->capture_header ? strlen(req->capture_header) + 1 : 0};
	struct curl_waitfd wfd;
	CURLcode cc = CURLE_OK;
	CURLMcode mc;
	CURLMsg *msg;
	int running = 1, left, done = 0, stirred = 0;
	int sent = !req->on_sent; /* the request written whole (or no one asks) */
	/* on_tick runs when due (monotonic ns) or when the wake descriptor
	 * stirred: not after every piece of data */
	int wake = req->on_tick && req->wake_fd > 0 ? req->wake_fd : -1;
	int64_t every = wake < 0 || req->tick_ms <= TICK_MS ? TICK_MS
			: req->tick_ms < WAKE_TICK_MAX_MS ? req->tick_ms : WAKE_TICK_MAX_MS;
	int64_t due = 0, now, wait_ms;

	*cc_out = CURLE_OK;
	if (curl_ready(h) != 0)
		return gh_err_set(e, GH_E_NOMEM, "upstream %s: could not create a curl handle",
				  origin);
	x.easy = h->easy;
	if (req->max_response && req->max_response < x.limit)
		x.limit = req->max_response;
	curl_easy_reset(h->easy);
	if (setopts(h->easy, h->curlu, req, headers, &x) != 0) {
		/* a transfer that failed before it had a connection (a URL
		 * curl cannot parse) leaves curl 7.88's receive buffer behind,
		 * and the handle then refuses CURLOPT_BUFFERSIZE for good:
		 * the pair goes on with a fresh handle (connections live in the
		 * multi handle, so none is lost) */
		if (easy_renew(h) != 0 || (x.easy = h->easy,
					   setopts(h->easy, h->curlu, req, headers, &x) != 0))
			return gh_err_set(e, GH_E_INTERNAL,
					  "upstream %s: could not set up the request", origin);
	}
	if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK)
		return gh_err_set(e, GH_E_INTERNAL, "upstream %s: could not start the request",
				  origin);
	while (!done) {
		if (req->on_batch)
			req->on_batch(req->ud, 1);
		mc = curl_multi_perform(h->multi, &running);
		if (req->on_batch && req->on_batch(req->ud, 0))
			x.cancelled = 1;
		if (!sent && request_written(h->easy, req)) {
			sent = 1;
			req->on_sent(req->ud);
		}
		if (mc != CURLM_OK) {
			cc = CURLE_FAILED_INIT;
			break;
		}
		while ((msg = curl_multi_info_read(h->multi, &left))) {
			if (msg->msg == CURLMSG_DONE && msg->easy_handle == h->easy) {
				cc = msg->data.result;
				done = 1;
			}
		}
		if (done || !running) {
			done = 1;
			break;
		}
		if (x.cancelled)
			break;
		wait_ms = TICK_MS;
		if (req->on_tick) {
			now = gh_mono_ns();
			if (stirred || now >= due) {
				if (req->on_tick(req->ud)) {
					x.cancelled = 1;
					break;
				}
				if (stirred) {
					/* readable and still there: the client sent
					 * bytes, which would keep the descriptor
					 * readable; watch by the clock from now on */
					wake = -1;
					every = TICK_MS;
				}
				due = now + every * 1000000;
			}
			wait_ms = (due - now + 999999) / 1000000;
			if (wait_ms < 1)
				wait_ms = 1;
		}
		wfd.fd = wake;
		wfd.events = CURL_WAIT_POLLIN;
		wfd.revents = 0;
		if (curl_multi_poll(h->multi, wake >= 0 ? &wfd : NULL, wake >= 0 ? 1 : 0,
				    (int)wait_ms, NULL) != CURLM_OK) {
			cc = CURLE_FAILED_INIT;
			break;
		}
		stirred = wake >= 0 && wfd.revents != 0;
	}
	/* removing a transfer in flight closes its connection: the abort is
	 * immediate */
	curl_multi_remove_handle(h->multi, h->easy);
	curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &resp->status);
	if (x.cancelled)
		return gh_err_set(e, GH_E_CANCELLED, "upstream %s: request cancelled", origin);
	if (x.toobig)
		return gh_err_set(e, GH_E_UPSTREAM, "upstream %s: response body over %zu bytes",
				  origin, x.limit);
	*cc_out = cc;
	if (cc == CURLE_OK)
		return GH_OK;
	return transfer_error(h->easy, cc, req, origin, e);
}

/* Failures where the request cannot have been acted on, or (a connection
 * closed before any reply byte, typically a stale keep-alive) most likely
 * was not: worth another try. */
static int is_connect_error(CURLcode cc)
{
	return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
	       cc == CURLE_GOT_NOTHING;
}

/* Backoff before try number n + 1 (n >= 1 tries made): base * 2^(n-1) plus
 * up to half of that again at random, or the server's Retry-After; never
 * more than 30 s. */
static int64_t backoff_ms(const struct gh_upstream_req *req, int n, int64_t retry_after_ms)
{
	int64_t base = req->retry_base_ms > 0 ? req->retry_base_ms : 1, d = base;
	int i;

	if (retry_after_ms >= 0)
		return retry_after_ms < MAX_BACKOFF_MS ? retry_after_ms : MAX_BACKOFF_MS;
	for (i = 1; i < n && d < MAX_BACKOFF_MS; i++)
		d *= 2;
	if (d > MAX_BACKOFF_MS)
		d = MAX_BACKOFF_MS;
	d += (int64_t)randombytes_uniform((uint32_t)(d / 2 + 1));
	return d < MAX_BACKOFF_MS ? d : MAX_BACKOFF_MS;
}

/* Sleeps ms, calling on_tick every slice; nonzero when it asked to stop. */
static int sleep_ticking(const struct gh_upstream_req *req, int64_t ms)
{
	int64_t end = gh_mono_ns() + ms * 1000000, now, left;
	struct timespec ts;

	for (;;) {
		if (req->on_tick && req->on_tick(req->ud))
			return 1;
		now = gh_mono_ns();
		if (now >= end)
			return 0;
		left = end - now;
		if (left > SLEEP_SLICE_MS * INT64_C(1000000))
			left = SLEEP_SLICE_MS * INT64_C(1000000);
		ts.tv_sec = 0;
		ts.tv_nsec = (long)left;
		nanosleep(&ts, NULL);
	}
}

/* resp->error: e's message without the "upstream <origin>: " every
 * message of gh_upstream_do starts with. Apart so its buffer takes stack
 * only on a failure. */
static GH_NOINLINE void error_copy(struct gh_upstream_resp *resp, const char *origin,
				   const struct gh_err *e)
{
	char prefix[ORIGIN_MAX + 16];
	size_t n;

	snprintf(prefix, sizeof(prefix), "upstream %s: ", origin);
	n = strlen(prefix);
	gh_strlcpy(resp->error, strncmp(e->msg, prefix, n) ? e->msg : e->msg + n,
		   sizeof(resp->error));
}

static enum gh_code upstream_do(const struct gh_upstream_req *req, struct gh_upstream_resp *resp,
				struct gh_err *e)
{
	struct curl_slist *headers = NULL;
	struct gh_buf head;
	struct handles *h = NULL;
	char unparsed[ORIGIN_MAX];
	const char *origin = unparsed;
	enum gh_code rc = GH_E_INTERNAL;
	int max_tries = req->max_retries > 0 ? req->max_retries + 1 : 1;
	int64_t retry_after;
	CURLcode cc = CURLE_OK;

	resp_blank(resp);
	gh_buf_reset(&resp->body);
	gh_buf_init(&head, 256 << 10);
	if (!req->url || !method_ok(req->method) || !(h = handles_take())) {
		url_origin(req->url, unparsed, sizeof(unparsed));
		if (!req->url || !method_ok(req->method))
			rc = gh_err_set(e, GH_E_INTERNAL, "upstream %s: bad request setup", origin);
		else
			rc = gh_err_set(e, GH_E_NOMEM, "upstream %s: out of memory", origin);
		goto out;
	}
	target_set(h, req->url);
	origin = h->origin;
	if ((rc = h->plain.naddr ? upstream_plain_head(req, &h->plain, origin, &head, e)
				 : make_headers(req, origin, &headers, e)) != GH_OK)
		goto out;
	for (;;) {
		resp->attempts++;
		if (h->plain.naddr)
			rc = upstream_plain_attempt(&h->plain, &h->conns, req, resp, &head, origin,
						    &cc, e);
		else
			rc = attempt(h, req, resp, headers, origin, &cc, e);
		if (resp->attempts >= max_tries || resp->streamed_bytes > 0)
			break;
		if (rc == GH_OK) {
			if (resp->status != 429 && (resp->status < 500 || resp->status > 599))
				break;
		} else if (rc != GH_E_UPSTREAM || !is_connect_error(cc)) {
			break;
		}
		retry_after = rc == GH_OK ? resp->retry_after_ms : -1;
		if (sleep_ticking(req, backoff_ms(req, resp->attempts, retry_after))) {
			rc = gh_err_set(e, GH_E_CANCELLED, "upstream %s: request cancelled",
					origin);
			break;
		}
		resp->status = 0;
		resp->content_type[0] = '\0';
		resp->retry_after_ms = -1;
		gh_buf_reset(&resp->body);
	}
	if (rc == GH_E_UPSTREAM && is_connect_error(cc) && resp->attempts > 1) {
		size_t len = strlen(e->msg);

		snprintf(e->msg + len, sizeof(e->msg) - len, " (%d attempts)", resp->attempts);
	}
out:
	headers_free(headers);
	if (head.data)
		sodium_memzero(head.data, head.alloc); /* header values may be secrets */
	gh_buf_free(&head);
	if (rc != GH_OK)
		error_copy(resp, origin, e);
	if (h)
		handles_give(h);
	return rc;
}

/* gh_upstream_do for a caller that wants no error: the gh_err it needs
 * anyway is in this frame, not in every transfer's. */
static GH_NOINLINE enum gh_code upstream_do_quiet(const struct gh_upstream_req *req,
						  struct gh_upstream_resp *resp)
{
	struct gh_err local;

	return upstream_do(req, resp, &local);
}

enum gh_code gh_upstream_do(const struct gh_upstream_req *req, struct gh_upstream_resp *resp,
			    struct gh_err *e)
{
	return e ? upstream_do(req, resp, e) : upstream_do_quiet(req, resp);
}
