/*
 * http.c - the CivetWeb server, routing, authentication, error mapping and
 * response writing; see http.h.
 *
 * Threading: CivetWeb calls dispatch() on a worker thread per connection.
 * Everything here is per request except the route tables (static) and the
 * app (shared, thread-safe). A worker thread frees its request block on
 * exit.
 */
/* POLLRDHUP: tells a peer that closed its side from one that is idle */
#define _GNU_SOURCE

#include "http.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <civetweb.h>
#include <sodium.h>

#include "admin_auth.h"
#include "audit_health.h"
#include "buf.h"
#include "front.h"
#include "hub.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "mcp.h"
#include "mcp_sessions.h"
#include "metrics.h"
#include "otel.h"
#include "ratelimit.h"
#include "relay.h"
#include "replica.h"
#include "run.h"
#include "util.h"
#include "wire_anthropic.h"

struct gh_http {
	struct mg_context *ctx;
	struct gh_app *app;
	struct gh_front *front;           /* owns the listening port; see front.h */
	int port;
};

static void health(struct gh_req *r);

static const struct gh_route routes_core[] = {
	{"GET", "/healthz", GH_AUTH_NONE, health},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};

/* gh_routes_admin comes before gh_routes_approvals: its
 * GET /api/approvals/events must win over GET /api/approvals/:id. */
static const struct gh_route *const route_tables[] = {
	routes_core,       gh_routes_native, gh_routes_memory, gh_routes_login, gh_routes_admin,
	gh_routes_approvals, gh_routes_runs, gh_routes_policy, gh_routes_audit,
	gh_routes_openai,  gh_routes_responses, gh_routes_a2a, gh_routes_a2a_cards,
	gh_routes_mcp_servers, gh_routes_mcp, gh_routes_anthropic, gh_routes_agui,
	gh_routes_metrics, gh_routes_notify,
};

/* The surface each route table serves, in route_tables' order (metrics.h). */
static const enum gh_metrics_surface route_surfaces[] = {
	GH_MS_HEALTH, GH_MS_NATIVE, GH_MS_NATIVE, GH_MS_ADMIN, GH_MS_ADMIN,
	GH_MS_ADMIN, GH_MS_NATIVE, GH_MS_ADMIN, GH_MS_ADMIN,
	GH_MS_OPENAI, GH_MS_RESPONSES, GH_MS_A2A, GH_MS_A2A,
	GH_MS_ADMIN, GH_MS_MCP, GH_MS_ANTHROPIC, GH_MS_AGUI,
	GH_MS_METRICS, GH_MS_ADMIN,
};
_Static_assert(GH_ARRAY_LEN(route_surfaces) == GH_ARRAY_LEN(route_tables),
	       "one surface per route table");

/* ------------------------------------------------------------ errors */

int gh_http_status_of(enum gh_code code)
{
	switch (code) {
	case GH_OK: return 200;
	case GH_E_BADREQ: return 400;
	case GH_E_AUTH: return 401;
	case GH_E_FORBIDDEN: return 403;
	case GH_E_NOTFOUND: return 404;
	case GH_E_METHOD: return 405;
	case GH_E_CONFLICT: return 409;
	case GH_E_TOOBIG: return 413;
	case GH_E_RATELIMIT: return 429;
	case GH_E_UPSTREAM: return 502;
	case GH_E_UNAVAILABLE: return 503;
	case GH_E_TIMEOUT: return 504;
	case GH_E_CANCELLED: return 499;
	case GH_E_INTERNAL:
	case GH_E_NOMEM:
	case GH_E_IO: return 500;
	}
	return 500;
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 429: return "Too Many Requests";
	case 499: return "Client Closed Request";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	}
	return "Status";
}

/* ---------------------------------------------------------- responses */

static int keep_alive(struct gh_req *r)
{
	const char *c = mg_get_header(r->conn, "Connection");

	if (r->must_close)
		return 0;

	if (r->ri->http_version && !strcmp(r->ri->http_version, "1.0"))
		return c && !strcasecmp(c, "keep-alive");
	return !(c && !strcasecmp(c, "close"));
}

/* The response head, written piece by piece: it is on every response,
 * and printf's format engine cost more than the rest of it. Callers give
 * b room for it (4 KB over the body). */
static void head(struct gh_req *r, struct gh_buf *b, int status, const char *ctype,
		 int64_t len)
{
	int keep = keep_alive(r);

	gh_buf_puts(b, "HTTP/1.1 ");
	gh_buf_put_int(b, status);
	gh_buf_putc(b, ' ');
	gh_buf_puts(b, reason_phrase(status));
	gh_buf_puts(b, "\r\n");
	if (ctype) {
		gh_buf_puts(b, "Content-Type: ");
		gh_buf_puts(b, ctype);
		gh_buf_puts(b, "\r\n");
	}
	if (len >= 0) {
		gh_buf_puts(b, "Content-Length: ");
		gh_buf_put_int(b, len);
		gh_buf_puts(b, "\r\n");
	}
	gh_buf_puts(b, "X-Request-Id: ");
	gh_buf_puts(b, r->id);
	gh_buf_puts(b, "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n");
	if (r->rl_set) {
		gh_buf_puts(b, "RateLimit-Limit: ");
		gh_buf_put_int(b, r->rl_limit);
		gh_buf_puts(b, "\r\nRateLimit-Remaining: ");
		gh_buf_put_int(b, r->rl_remaining);
		gh_buf_puts(b, "\r\nRateLimit-Reset: ");
		gh_buf_put_int(b, r->rl_reset_s);
		gh_buf_puts(b, "\r\n");
	}
	if (gh_admin_ui_path(r->path))
		gh_buf_puts(b, GH_ADMIN_SECURITY_HEADERS);
	if (r->extra_headers)
		gh_buf_puts(b, r->extra_headers);
	gh_buf_puts(b, keep ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
	if (!keep)
		mg_disable_connection_keep_alive(r->conn);
}

static int flush_held(struct gh_req *r);

void gh_http_send(struct gh_req *r, int status, const char *content_type, const char *body,
		  size_t len)
{
	struct gh_buf b;

	if (r->responded)
		return;
	r->responded = 1;
	r->status = status;
	gh_buf_init(&b, len + 4096);
	head(r, &b, status, content_type, (int64_t)len);
	gh_buf_puts(&b, "\r\n");
	/* one write: headers and body leave in the same packet */
	if (strcmp(r->method, "HEAD") && len && gh_buf_append(&b, body, len) != GH_BUF_OK) {
		mg_write(r->conn, b.data, b.len);
		mg_write(r->conn, body, len);
	} else {
		mg_write(r->conn, b.data, b.len);
	}
	gh_buf_free(&b);
}

void gh_http_json(struct gh_req *r, int status, const cJSON *body)
{
	char *s = gh_json_dump(body);

	if (!s) {
		static const char oom[] =
			"{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\"}}";

		gh_http_send(r, 500, "application/json", oom, sizeof(oom) - 1);
		return;
	}
	gh_http_send(r, status, "application/json", s, strlen(s));
	free(s);
}

/* OpenAI's error type for a status. */
static const char *openai_error_type(int status)
{
	switch (status) {
	case 401: return "authentication_error";
	case 403: return "permission_error";
	case 404: return "not_found_error";
	case 409: return "conflict_error";
	case 429: return "rate_limit_error";
	}
	return status >= 500 ? "server_error" : "invalid_request_error";
}

void gh_http_error(struct gh_req *r, const struct gh_err *e)
{
	cJSON *o = cJSON_CreateObject(), *err;
	int status = gh_http_status_of(e->code);
	char ra[64];

	if (e->code == GH_E_CANCELLED) {
		/* the client is gone: nothing to answer */
		r->responded = 1;
		r->status = 499;
		return;
	}
	if ((status == 429 || status == 503) && !r->extra_headers) {
		snprintf(ra, sizeof(ra), "Retry-After: %d\r\n", e->retry_after > 0 ? e->retry_after
										  : 1);
		r->extra_headers = ra;
	}
	if (!strncmp(r->path, "/v1/messages", 12)) {
		/* the Anthropic API's own shape: its clients read it */
		cJSON_Delete(o);
		o = gh_anthropic_error(gh_anthropic_error_type(status), e->msg);
	} else {
		err = cJSON_AddObjectToObject(o, "error");
		cJSON_AddStringToObject(err, "code", gh_code_name(e->code));
		cJSON_AddStringToObject(err, "message", e->msg);
		cJSON_AddStringToObject(err, "requestId", r->id);
		/* with these two, also the error shape of OpenAI's API */
		cJSON_AddStringToObject(err, "type", openai_error_type(status));
		cJSON_AddNullToObject(err, "param");
	}
	if (status >= 500)
		gh_warn("%s %s %s: %d %s", r->id, r->method, r->path, status, e->msg);
	gh_http_json(r, status, o);
	cJSON_Delete(o);
	if (r->extra_headers == ra)
		r->extra_headers = NULL;
}

void gh_http_errorf(struct gh_req *r, enum gh_code code, const char *fmt, ...)
{
	struct gh_err e;
	va_list ap;

	va_start(ap, fmt);
	gh_err_vset(&e, code, fmt, ap);
	va_end(ap);
	gh_http_error(r, &e);
}

/* ------------------------------------------------------------ requests */

enum gh_code gh_http_body_object(struct gh_req *r, cJSON **out, struct gh_err *e)
{
	enum gh_code rc;

	*out = NULL;
	if (!r->body || r->body_len == 0)
		return gh_err_set(e, GH_E_BADREQ, "request body is empty; expected a JSON object");
	rc = gh_json_parse(r->body, r->body_len, "request body", out, e);
	if (rc != GH_OK)
		return rc;
	if (!cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return gh_err_set(e, GH_E_BADREQ, "request body must be a JSON object");
	}
	return GH_OK;
}

const char *gh_http_query(struct gh_req *r, const char *name, char *buf, size_t cap)
{
	const char *qs = r->ri->query_string;
	int n;

	if (!qs)
		return NULL;
	n = mg_get_var(qs, strlen(qs), name, buf, cap);
	return n >= 0 ? buf : NULL;
}

const char *gh_http_header(struct gh_req *r, const char *name)
{
	return mg_get_header(r->conn, name);
}

/* Reads the body into r->body, bounded by max_body_bytes. */
static GH_NOINLINE enum gh_code read_body(struct gh_req *r, struct gh_err *e)
{
	int64_t max = gh_app_cfg(r->app)->server.max_body_bytes;
	long long cl = r->ri->content_length;
	struct gh_buf b;
	char chunk[4096]; /* small: a stream's worker keeps its stack for the stream's life */
	int n;

	if (cl > max) {
		return gh_err_set(e, GH_E_TOOBIG, "request body of %lld bytes is larger than "
				  "server.max_body_bytes (%lld)", cl, (long long)max);
	}
	if (cl == 0)
		return GH_OK;
	gh_buf_init(&b, (size_t)max);
	while ((n = mg_read(r->conn, chunk, sizeof(chunk))) > 0) {
		if (gh_buf_append(&b, chunk, (size_t)n) != GH_BUF_OK) {
			gh_buf_free(&b);
			return gh_err_set(e, GH_E_TOOBIG, "request body is larger than "
					  "server.max_body_bytes (%lld)", (long long)max);
		}
	}
	if (n < 0) {
		gh_buf_free(&b);
		return gh_err_set(e, GH_E_BADREQ, "request body could not be read");
	}
	r->body_len = b.len;
	r->body = b.data ? b.data : NULL;
	if (!r->body) {
		r->body = calloc(1, 1);
		if (!r->body)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	return GH_OK;
}

/*
 * Request framing that a proxy in front could read differently from
 * CivetWeb: two Content-Length headers (CivetWeb takes the first), a length
 * that is not a plain number (CivetWeb reads "12abc" as 12), or a length
 * together with Transfer-Encoding (CivetWeb takes the chunks). Any of them
 * lets a request be smuggled inside another one's body, so the request is
 * refused and the connection closed: nothing after it can be trusted.
 */
static GH_NOINLINE enum gh_code check_framing(struct gh_req *r, struct gh_err *e)
{
	const struct mg_request_info *ri = r->ri;
	const char *cl = NULL, *p;
	int ncl = 0, nte = 0, i;

	for (i = 0; i < ri->num_headers; i++) {
		const char *name = ri->http_headers[i].name;

		if (!strcasecmp(name, "Content-Length")) {
			ncl++;
			cl = ri->http_headers[i].value;
		} else if (!strcasecmp(name, "Transfer-Encoding")) {
			nte++;
		}
	}
	if (ncl > 1)
		return gh_err_set(e, GH_E_BADREQ, "the request has %d Content-Length headers; "
				  "at most one is allowed", ncl);
	if (nte > 1)
		return gh_err_set(e, GH_E_BADREQ, "the request has %d Transfer-Encoding headers; "
				  "at most one is allowed", nte);
	if (ncl && nte)
		return gh_err_set(e, GH_E_BADREQ, "the request has both Content-Length and "
				  "Transfer-Encoding; send one of them");
	if (cl) {
		for (p = cl; *p == ' ' || *p == '\t'; p++)
			;
		for (i = 0; p[i] >= '0' && p[i] <= '9'; i++)
			;
		if (i == 0 || i > 18 || strspn(p + i, " \t") != strlen(p + i))
			return gh_err_set(e, GH_E_BADREQ, "Content-Length \"%.40s\" is not a "
					  "number of bytes", cl);
	}
	return GH_OK;
}

/* Percent-decodes s (what names the part: "path", "query string") into out
 * (strlen(s) + 1 bytes), or only checks it when out is NULL. Refuses an
 * escape that is not '%' and two hex digits, and %00: decoded into a C
 * string it would cut the rest off (/api/agents/assistant%00x served as
 * "assistant"). */
static enum gh_code percent_decode(const char *s, const char *what, char *out,
				   struct gh_err *e)
{
	size_t i, n = 0;

	for (i = 0; s[i]; i++) {
		int hi, lo;

		if (s[i] != '%') {
			if (out)
				out[n++] = s[i];
			continue;
		}
		hi = s[i + 1] ? gh_hex_digit(s[i + 1]) : -1;
		lo = hi >= 0 && s[i + 2] ? gh_hex_digit(s[i + 2]) : -1;
		if (hi < 0 || lo < 0)
			return gh_err_set(e, GH_E_BADREQ, "the request's %s has an invalid percent "
					  "escape at byte %zu (expected %%XX with two hex digits)",
					  what, i + 1);
		if (hi == 0 && lo == 0)
			return gh_err_set(e, GH_E_BADREQ, "the request's %s contains %%00 (a NUL "
					  "byte) at byte %zu", what, i + 1);
		if (out)
			out[n++] = (char)(hi << 4 | lo);
		i += 2;
	}
	if (out)
		out[n] = '\0';
	return GH_OK;
}

/* The request target: the path decoded into *path (caller frees), the
 * query string checked (gh_http_query decodes its values). CivetWeb is
 * told not to decode, so the raw escapes are still there to check; it has
 * removed the dot segments it could see, and an escaped one ("%2e%2e") is
 * refused here. */
static GH_NOINLINE enum gh_code decode_target(struct gh_req *r, char **path, struct gh_err *e)
{
	const char *raw = r->ri->local_uri ? r->ri->local_uri : "/";
	const char *seg;
	enum gh_code rc;

	*path = malloc(strlen(raw) + 1);
	if (!*path)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if ((rc = percent_decode(raw, "path", *path, e)) != GH_OK)
		return rc;
	for (seg = *path; *seg;) {
		const char *s = seg[0] == '/' ? seg + 1 : seg;
		size_t len = strcspn(s, "/");

		if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
			return gh_err_set(e, GH_E_BADREQ, "the request's path has an escaped dot "
					  "segment (%%2e)");
		seg = s + len;
	}
	if (r->ri->query_string)
		return percent_decode(r->ri->query_string, "query string", NULL, e);
	return GH_OK;
}

/* Matches path against pattern, filling params. */
static int match(const char *pattern, const char *path, struct gh_req *r)
{
	const char *p = pattern, *s = path;
	int np = 0;

	while (*p && *s) {
		if (*p == ':') {
			const char *end = strchr(s, '/');
			size_t len = end ? (size_t)(end - s) : strlen(s);

			if (len == 0 || np >= GH_ROUTE_PARAMS)
				goto fail;
			if (r) {
				r->params[np] = malloc(len + 1);
				if (!r->params[np])
					goto fail;
				memcpy(r->params[np], s, len);
				r->params[np][len] = '\0';
			}
			np++;
			s += len;
			while (*p && *p != '/')
				p++;
			continue;
		}
		if (*p != *s)
			goto fail;
		p++;
		s++;
	}
	if (*p == '\0' && *s == '\0')
		return 1;
fail:
	if (r) {
		for (int i = 0; i < np; i++) {
			free(r->params[i]);
			r->params[i] = NULL;
		}
	}
	return 0;
}

static const struct gh_route *route(struct gh_req *r, int *method_mismatch,
				   enum gh_metrics_surface *surface)
{
	size_t t;
	const struct gh_route *rt;

	*method_mismatch = 0;
	for (t = 0; t < GH_ARRAY_LEN(route_tables); t++) {
		for (rt = route_tables[t]; rt->method; rt++) {
			if (!match(rt->pattern, r->path, NULL))
				continue;
			if (strcmp(rt->method, r->method) &&
			    !(!strcmp(r->method, "HEAD") && !strcmp(rt->method, "GET"))) {
				*method_mismatch = 1;
				continue;
			}
			match(rt->pattern, r->path, r);
			*surface = route_surfaces[t];
			return rt;
		}
	}
	return NULL;
}

/* Per-key request rate limit; fills the RateLimit-* headers. */
static GH_NOINLINE int request_allowed(struct gh_req *r, struct gh_err *e)
{
	const struct gh_policy_conf *p = r->who.policy;
	struct gh_rl_limit lim;
	struct gh_rl_result res;
	char key[80];

	if (!p || p->requests_per_minute <= 0 || !r->app->rl || !r->who.key.id[0])
		return 1;
	lim = (struct gh_rl_limit){p->requests_per_minute, 60000, p->burst};
	snprintf(key, sizeof(key), "req:%s", r->who.key.id);
	if (gh_rl_take(r->app->rl, key, &lim, 1, &res) != GH_OK) {
		/* fail closed; replicas: the database holding the limits is
		 * out of reach, a 503 */
		gh_err_set(e, r->app->replica ? GH_E_UNAVAILABLE : GH_E_RATELIMIT,
			   "rate limiter unavailable");
		e->retry_after = 1;
		return 0;
	}
	r->rl_set = 1;
	r->rl_limit = res.limit;
	r->rl_remaining = res.remaining;
	r->rl_reset_s = (res.reset_ms + 999) / 1000;
	if (!res.allowed) {
		int s = (int)((res.retry_after_ms + 999) / 1000);

		gh_err_set(e, GH_E_RATELIMIT, "policy \"%s\": rate_limits.requests_per_minute = %lld "
			   "(burst %lld) exceeded; retry after %d s", p->name,
			   (long long)p->requests_per_minute, (long long)p->burst, s > 0 ? s : 1);
		e->retry_after = s > 0 ? s : 1;
		return 0;
	}
	return 1;
}

static enum gh_code authenticate_key(struct gh_req *r, const char *auth, struct gh_err *e)
{
	enum gh_code rc = gh_keys_authenticate(r->app->store, r->app->hashkey, auth, &r->who.key,
					       e);

	if (rc != GH_OK)
		return rc;
	r->authed = 1;
	r->who.policy = gh_policy_for_key(gh_app_cfg(r->app), &r->who.key);
	r->who.admin = r->who.key.admin;
	snprintf(r->who.actor, sizeof(r->who.actor), "key:%s", r->who.key.id);
	if (r->who.key.last_used_at < gh_now_ms() - 60000)
		gh_store_key_touch(r->app->store, r->who.key.id, gh_now_ms());
	return GH_OK;
}

static GH_NOINLINE enum gh_code authenticate(struct gh_req *r, enum gh_auth need,
					  struct gh_err *e)
{
	const char *auth = mg_get_header(r->conn, "Authorization");
	const char *xkey = mg_get_header(r->conn, "x-api-key");
	char xb[GH_KEY_SECRET_MAX + 8];
	enum gh_code rc;

	if ((!auth || !*auth) && xkey && *xkey) {
		/* Anthropic clients send the key as x-api-key */
		snprintf(xb, sizeof(xb), "Bearer %s", xkey);
		auth = xb;
		rc = authenticate_key(r, auth, e);
		sodium_memzero(xb, sizeof(xb));
		if (rc != GH_OK)
			return rc;
		goto role;
	}

	if (!auth || !*auth) {
		/* no key: an admin session cookie, and for a request that changes
		 * state, its CSRF token */
		char csrf[GH_ADMIN_CSRF_MAX];

		rc = gh_admin_session_auth(r->app, mg_get_header(r->conn, "Cookie"), &r->who, csrf,
					   e);
		if (rc == GH_OK) {
			r->session = 1;
			r->authed = 1;
			rc = gh_admin_csrf_check(r->method,
						 mg_get_header(r->conn, GH_ADMIN_CSRF_HEADER),
						 mg_get_header(r->conn, "Origin"),
						 mg_get_header(r->conn, "Host"), csrf, e);
		}
		sodium_memzero(csrf, sizeof(csrf));
		if (rc != GH_OK)
			return rc;
	} else if ((rc = authenticate_key(r, auth, e)) != GH_OK) {
		return rc;
	}
role:
	if (need == GH_AUTH_ADMIN && !r->who.admin)
		return gh_err_set(e, GH_E_FORBIDDEN, "this endpoint needs an admin (a key created "
				  "with --admin, or an admin session)");
	return GH_OK;
}

/* Everything before the handler: framing, target, route, body, key. 1 to
 * run the route's handler (*rt), 0 when the request was answered here.
 * Apart from dispatch so its error takes stack only while it runs: a
 * stream's worker keeps every stack page it touched. */
static GH_NOINLINE int admit(struct gh_req *r, const struct gh_route **rt, char **path,
			     enum gh_metrics_surface *surface)
{
	struct gh_err e;
	int mismatch;

	gh_err_clear(&e);
	if (check_framing(r, &e) != GH_OK) {
		r->must_close = 1;
		mg_disable_connection_keep_alive(r->conn);
		gh_http_error(r, &e);
		return 0;
	}
	if (decode_target(r, path, &e) != GH_OK) {
		gh_http_error(r, &e);
		return 0;
	}
	r->path = *path;
	*rt = route(r, &mismatch, surface);
	if (!*rt) {
		if (mismatch)
			gh_http_errorf(r, GH_E_METHOD, "%s is not allowed on %s", r->method, r->path);
		else
			gh_http_errorf(r, GH_E_NOTFOUND, "no route for %s %s", r->method, r->path);
		return 0;
	}
	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD") && strcmp(r->method, "OPTIONS")) {
		if (read_body(r, &e) != GH_OK) {
			if (e.code == GH_E_TOOBIG) {
				r->must_close = 1;
				mg_disable_connection_keep_alive(r->conn);
			}
			gh_http_error(r, &e);
			return 0;
		}
	}
	if ((*rt)->auth != GH_AUTH_NONE) {
		if (authenticate(r, (*rt)->auth, &e) != GH_OK) {
			gh_http_error(r, &e);
			return 0;
		}
		if (!r->session && !request_allowed(r, &e)) {
			gh_http_error(r, &e);
			return 0;
		}
	}
	return 1;
}

/* One request, its state at r (zeroed). */
static int serve(struct gh_req *r, struct mg_connection *conn, void *cbdata)
{
	const struct gh_route *rt = NULL;
	char *path = NULL;
	int i;
	enum gh_metrics_surface surface = GH_MS_NONE;
	/* the request runs under the config current when it arrived, however
	 * long it streams and whatever a reload installs meanwhile */
	struct gh_cfg_gen *gen = gh_app_cfg_acquire(cbdata), *prev_gen = gh_app_cfg_enter(gen);

	r->gen = gen;
	gh_buf_init(&r->held, 1024 * 1024);
	r->conn = conn;
	r->ri = mg_get_request_info(conn);
	r->app = cbdata;
	r->method = r->ri->request_method;
	r->path = r->ri->local_uri ? r->ri->local_uri : "/";
	r->t0_ns = gh_mono_ns();
	r->sock = -1;
	gh_id_new("req_", r->id, sizeof(r->id));
	if (gh_otel_enabled())
		gh_otel_request_begin(mg_get_header(conn, "traceparent"),
				      mg_get_header(conn, "tracestate"));
	if (!admit(r, &rt, &path, &surface))
		goto done;
	rt->fn(r);
	if (!r->responded)
		gh_http_errorf(r, GH_E_INTERNAL, "the handler sent no response");
done:
	if (gh_otel_enabled())
		gh_otel_request_end();
	r->hold = 0;
	flush_held(r);
	gh_buf_free(&r->held);
	if (r->streaming)
		atomic_fetch_sub(&r->app->active_streams, 1);
	gh_metrics_request(surface, r->status ? r->status : 200, gh_mono_ns() - r->t0_ns);
	{
		/* the key's id, never any part of its secret */
		struct gh_log_request lr = {r->id, r->method, r->path, rt ? rt->pattern : NULL,
					    r->status, (double)(gh_mono_ns() - r->t0_ns) / 1e6,
					    r->who.key.id};

		gh_log_request(&lr);
	}
	for (i = 0; i < GH_ROUTE_PARAMS; i++)
		free(r->params[i]);
	free(r->body);
	free(path);
	gh_app_cfg_leave(prev_gen);
	gh_app_cfg_release(r->gen);
	return r->status ? r->status : 200;
}

/* The request's state is on the heap, not in this frame: a stream's
 * worker keeps every stack page it touched for as long as it lives. Each
 * worker keeps its block from one request to the next (freed when the
 * worker exits): a fresh 1 KB calloc a request was served outside glibc's
 * per-thread cache, and its size made malloc consolidate its fast bins. */
static _Thread_local struct gh_req *worker_req;

static int dispatch(struct mg_connection *conn, void *cbdata)
{
	struct gh_req *r = worker_req;
	int status;

	if (r) {
		worker_req = NULL; /* a nested dispatch (never) would get its own */
		memset(r, 0, sizeof(*r));
	} else if (!(r = calloc(1, sizeof(*r)))) {
		mg_send_http_error(conn, 503, "out of memory");
		return 503;
	}
	status = serve(r, conn, cbdata);
	if (worker_req)
		free(r);
	else
		worker_req = r;
	return status;
}

/* --------------------------------------------------------------- SSE */

int gh_http_stream_acquire(struct gh_req *r)
{
	int max = (int)gh_app_cfg(r->app)->server.max_streams;

	if (atomic_fetch_add(&r->app->active_streams, 1) >= max) {
		struct gh_err e;

		atomic_fetch_sub(&r->app->active_streams, 1);
		gh_err_set(&e, GH_E_UNAVAILABLE, "too many concurrent streams (server.max_streams "
			   "= %d); retry shortly", max);
		e.retry_after = 1;
		gh_http_error(r, &e);
		return -1;
	}
	r->streaming = 1;
	return 0;
}

/* A hold sends what it collected once it reaches this much. */
#define HELD_FLUSH (64 * 1024)

/* Writes what the client's socket takes now, without waiting: how much,
 * or -1 when the client is gone. */
static ssize_t send_now(struct gh_req *r, const char *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = send(r->sock, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0)
			done += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		else
			return -1;
	}
	return (ssize_t)done;
}

/* Sends what a hold collected: 0, or -1 when the client is gone. Without
 * blocking (nb), what the socket does not take stays held, and the
 * request is behind until its worker writes it (stream_relay, LEAVE). */
static int flush_held(struct gh_req *r)
{
	int rc = 0;

	if (r->nb) {
		ssize_t w;

		if (r->behind || !r->held.len)
			return 0;
		if ((w = send_now(r, r->held.data, r->held.len)) < 0)
			return -1;
		if ((size_t)w < r->held.len) {
			gh_buf_consume(&r->held, (size_t)w);
			r->behind = 1;
			return 0;
		}
	} else if (r->held.len &&
		   mg_write(r->conn, r->held.data, r->held.len) != (int)r->held.len) {
		rc = -1;
	}
	gh_buf_free(&r->held); /* a held stream keeps no buffer between batches */
	return rc;
}

/* Writes p now, or, while a hold is open, adds it to what leaves when the
 * hold ends. */
static int put(struct gh_req *r, const char *p, size_t n)
{
	if (r->nb && (r->hold > 0 || r->behind)) {
		if (gh_buf_append(&r->held, p, n) != GH_BUF_OK)
			return -1; /* a megabyte behind: the client is as good as gone */
		return r->hold > 0 && r->held.len >= HELD_FLUSH ? flush_held(r) : 0;
	}
	if (r->nb) {
		ssize_t w = send_now(r, p, n);

		if (w < 0)
			return -1;
		if ((size_t)w < n && gh_buf_append(&r->held, p + w, n - (size_t)w) != GH_BUF_OK)
			return -1;
		r->behind = (size_t)w < n;
		return 0;
	}
	if (r->hold > 0) {
		if (gh_buf_append(&r->held, p, n) != GH_BUF_OK)
			return flush_held(r) == 0 && mg_write(r->conn, p, n) == (int)n ? 0 : -1;
		return r->held.len >= HELD_FLUSH ? flush_held(r) : 0;
	}
	return mg_write(r->conn, p, n) == (int)n ? 0 : -1;
}

int gh_http_sse_begin(struct gh_req *r)
{
	struct gh_buf b;
	int rc;

	if (r->responded)
		return -1;
	r->responded = 1;
	r->status = 200;
	gh_buf_init(&b, 8192);
	head(r, &b, 200, "text/event-stream", -1);
	gh_buf_puts(&b, "Transfer-Encoding: chunked\r\nX-Accel-Buffering: no\r\n\r\n");
	rc = put(r, b.data, b.len);
	gh_buf_free(&b);
	return rc;
}

/* The parts of one chunk of a chunked response, written with one mg_write:
 * CivetWeb's mg_send_chunk writes the size line, the data and the closing
 * CRLF one by one, three segments and three wake-ups of the client on a
 * no-delay socket for every event of a stream. */
struct part {
	const char *p;
	size_t n;
};

/* One chunk of v's parts, put whole; small ones (a stream's text deltas)
 * are assembled on the stack, kept short because a stream's worker keeps
 * every stack page it touched. */
static int write_chunk(struct gh_req *r, const struct part *v, int nv)
{
	char small[512], *out = small;
	size_t total = 0, n;
	int i, rc;

	for (i = 0; i < nv; i++)
		total += v[i].n;
	if (total == 0)
		return 0;
	if (total > sizeof(small) - 32 && !(out = malloc(total + 32)))
		return -1;
	n = gh_fmt_hex(out, total);
	memcpy(out + n, "\r\n", 2);
	n += 2;
	for (i = 0; i < nv; i++) {
		memcpy(out + n, v[i].p, v[i].n);
		n += v[i].n;
	}
	memcpy(out + n, "\r\n", 2);
	rc = put(r, out, n + 2);
	if (out != small)
		free(out);
	return rc;
}

int gh_http_sse_send(struct gh_req *r, const char *type, const char *data, size_t len)
{
	return gh_http_sse_send_id(r, NULL, type, data, len);
}

int gh_http_sse_send_id(struct gh_req *r, const char *id, const char *type, const char *data,
			size_t len)
{
	struct part v[9];
	int n = 0;

	if (id) {
		v[n++] = (struct part){"id: ", 4};
		v[n++] = (struct part){id, strlen(id)};
		v[n++] = (struct part){"\n", 1};
	}
	if (type) {
		v[n++] = (struct part){"event: ", 7};
		v[n++] = (struct part){type, strlen(type)};
		v[n++] = (struct part){"\n", 1};
	}
	v[n++] = (struct part){"data: ", 6};
	v[n++] = (struct part){data, len};
	v[n] = (struct part){"\n\n", 2};
	return write_chunk(r, v, n + 1);
}

int gh_http_sse_comment(struct gh_req *r, const char *text)
{
	struct part v[3] = {{": ", 2}, {text, strlen(text)}, {"\n\n", 2}};

	return write_chunk(r, v, 3);
}

void gh_http_sse_end(struct gh_req *r)
{
	/* the terminating chunk leaves with whatever a hold collected */
	r->hold = 1;
	put(r, "0\r\n\r\n", 5);
	r->hold = 0;
	flush_held(r);
}

/* ------------------------------------------------- one streamed response */

int gh_http_stream_start(struct gh_req *r, struct gh_http_stream *s)
{
	memset(s, 0, sizeof(*s));
	s->r = r;
	s->last_write_ns = gh_mono_ns();
	return gh_http_stream_acquire(r);
}

int gh_http_stream_begin(struct gh_http_stream *s)
{
	if (s->begun)
		return s->gone ? -1 : 0;
	s->begun = 1;
	if (s->open ? s->open(s, s->ud) != 0 : gh_http_sse_begin(s->r) != 0)
		s->gone = 1;
	s->last_write_ns = gh_mono_ns();
	return s->gone ? -1 : 0;
}

/* One event, with an id line when id is set. */
static int stream_event(struct gh_http_stream *s, const char *id, const char *type,
			const char *data, size_t len)
{
	if (gh_http_stream_begin(s) != 0)
		return -1;
	if (gh_http_sse_send_id(s->r, id, type, data, len) != 0)
		s->gone = 1;
	s->last_write_ns = gh_mono_ns();
	return s->gone ? -1 : 0;
}

int gh_http_stream_send(struct gh_http_stream *s, const char *type, const char *data,
			size_t len)
{
	return stream_event(s, NULL, type, data, len);
}

int gh_http_stream_send_id(struct gh_http_stream *s, const char *id, const char *data,
			   size_t len)
{
	return stream_event(s, id, NULL, data, len);
}

int gh_http_stream_json(struct gh_http_stream *s, const char *type, cJSON *o)
{
	char *data = o ? gh_json_dump(o) : NULL;
	int rc = data ? gh_http_stream_send(s, type, data, strlen(data)) : -1;

	free(data);
	cJSON_Delete(o);
	return rc;
}

int gh_http_stream_comment(struct gh_http_stream *s, const char *text)
{
	if (s->gone || !s->begun)
		return s->gone ? -1 : 0;
	if (gh_http_sse_comment(s->r, text) != 0)
		s->gone = 1;
	s->last_write_ns = gh_mono_ns();
	return s->gone ? -1 : 0;
}

int gh_http_stream_tick(struct gh_http_stream *s)
{
	int64_t now = gh_mono_ns();

	if (s->gone)
		return 1;
	if (gh_http_client_gone(s->r)) {
		s->gone = 1;
		gh_info("%s: the client went away mid-stream", s->r->id);
		return 1;
	}
	if (now - s->last_write_ns >= gh_app_cfg(s->r->app)->server.heartbeat_ms * 1000000) {
		if (!s->begun)
			gh_http_stream_begin(s);
		else
			gh_http_stream_comment(s, "keep-alive");
		s->last_write_ns = now;
	}
	return s->gone;
}

void gh_http_stream_hold(struct gh_http_stream *s)
{
	s->r->hold++;
}

void gh_http_stream_end(struct gh_http_stream *s, int done_marker)
{
	if (s->gone || gh_http_stream_begin(s) != 0)
		return;
	if (done_marker)
		gh_http_sse_send(s->r, NULL, "[DONE]", 6);
	gh_http_sse_end(s->r);
}

/* A watch stream (it holds nothing from the config but its key's policy)
 * moves to the current config generation when a reload installed one, so
 * an admin's event stream left open for days does not keep an old
 * generation, and the upstream MCP servers it started, alive. */
static void follow_reload(struct gh_req *r)
{
	struct gh_cfg_gen *g;

	if (!r->gen || atomic_load(&r->app->gen) == r->gen || !(g = gh_app_cfg_acquire(r->app)))
		return;
	gh_app_cfg_enter(g);
	gh_app_cfg_release(r->gen);
	r->gen = g;
	if (r->who.key.id[0])
		r->who.policy = gh_policy_for_key(g->cfg, &r->who.key);
}

void gh_http_stream_follow(struct gh_http_stream *s, struct gh_hub_sub *sub,
			   int (*on_event)(void *ud, const char *type, const char *data),
			   int (*on_lost)(void *ud), int (*on_idle)(void *ud), void *ud)
{
	char *type, *data;

	while (!atomic_load(&s->r->app->stopping) && !s->gone) {
		int rc = sub ? gh_hub_next(sub, 100, &type, &data) : 0;

		if (rc == 1) {
			rc = on_event(ud, type, data);
			free(type);
			free(data);
			if (rc != 0)
				break;
		} else if (rc == -1 && on_lost(ud) != 0) {
			break;
		}
		if (gh_http_stream_tick(s) || (on_idle && on_idle(ud)))
			break;
		follow_reload(s->r);
	}
}

/* ------------------------------------------------------ chunked downloads */

int gh_http_chunked_begin(struct gh_req *r, const char *content_type, const char *extra_headers)
{
	struct gh_buf b;
	int rc;

	if (gh_http_stream_acquire(r) != 0)
		return -1;
	if (r->responded)
		return -1;
	r->responded = 1;
	r->status = 200;
	gh_buf_init(&b, 8192);
	head(r, &b, 200, content_type, -1);
	if (extra_headers)
		gh_buf_puts(&b, extra_headers);
	gh_buf_puts(&b, "Transfer-Encoding: chunked\r\n\r\n");
	rc = b.data && mg_write(r->conn, b.data, b.len) > 0 ? 0 : -1;
	gh_buf_free(&b);
	return rc;
}

int gh_http_chunked_write(struct gh_req *r, const char *data, size_t len)
{
	struct part v = {data, len};

	return write_chunk(r, &v, 1);
}

void gh_http_chunked_end(struct gh_req *r)
{
	mg_write(r->conn, "0\r\n\r\n", 5);
}

void gh_http_chunked_abort(struct gh_req *r)
{
	/* without the terminating chunk, and with the connection closed once
	 * the handler returns, a client cannot take the body for complete */
	mg_disable_connection_keep_alive(r->conn);
	r->status = 500;
}

/* 1 when fd is the TCP connection from r's client to r's server port. */
static int is_client_socket(struct gh_req *r, int fd)
{
	struct sockaddr_storage peer, local;
	socklen_t pl = sizeof(peer), ll = sizeof(local);
	char addr[INET6_ADDRSTRLEN];
	int port, lport;

	if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 ||
	    getsockname(fd, (struct sockaddr *)&local, &ll) != 0)
		return 0;
	if (peer.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, addr, sizeof(addr));
		port = ntohs(((struct sockaddr_in *)&peer)->sin_port);
		lport = ntohs(((struct sockaddr_in *)&local)->sin_port);
	} else if (peer.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, addr, sizeof(addr));
		port = ntohs(((struct sockaddr_in6 *)&peer)->sin6_port);
		lport = ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
	} else {
		return 0;
	}
	return port == r->ri->remote_port && lport == r->ri->server_port &&
	       !strcmp(addr, r->ri->remote_addr);
}

static int scan_sockets(struct gh_req *r);

/* Finds the client's socket (CivetWeb 1.15 has no call that gives it):
 * the record accept() keeps (front.c) first, else a scan of this
 * process's sockets by their address pair. */
static int find_socket(struct gh_req *r)
{
	int hint = gh_front_fd_hint(r->ri->remote_port);

	if (hint >= 0 && is_client_socket(r, hint))
		return hint;
	gh_debug("%s: client socket not recorded at accept; scanning descriptors", r->id);
	return scan_sockets(r);
}

static int match_client(int fd, void *ud)
{
	return is_client_socket(ud, fd);
}

static int scan_sockets(struct gh_req *r)
{
	return gh_fd_find(match_client, r);
}

int gh_http_client_fd(struct gh_req *r)
{
	if (r->sock == -1)
		r->sock = find_socket(r);
	if (r->sock < 0)
		r->sock = -2; /* not found: don't search again */
	return r->sock > 0 ? r->sock : 0;
}

void gh_http_stream_wake(struct gh_req *r, int *wake_fd, int64_t *tick_ms)
{
	int64_t hb = gh_app_cfg(r->app)->server.heartbeat_ms;

	*wake_fd = gh_http_client_fd(r);
	/* the ticks left are for heartbeats: a quarter of the interval late at
	 * most */
	*tick_ms = hb / 4 > 50 ? hb / 4 : 50;
}

/* A run's sink batch: the events of one upstream read leave in one write,
 * one wake-up of the client instead of one per event. */
static void stream_batch(void *ud, int open)
{
	struct gh_http_stream *s = ud;

	if (open)
		s->r->hold++;
	else if (s->r->hold > 0 && --s->r->hold == 0 && flush_held(s->r) != 0)
		s->gone = 1;
}

/* The relay thread reads the run's model reply (relay.h). Its writes go
 * out without blocking: CivetWeb's mg_write would wait for a slow client
 * and hold up every stream the relay carries. */
static int stream_relay(void *ud, int op)
{
	struct gh_http_stream *s = ud;
	struct gh_req *r = s->r;

	switch (op) {
	case GH_RELAY_ENTER:
		if (s->gone || r->hold > 0 || r->ri->is_ssl ||
		    !gh_http_client_fd(r))
			return -1;
		r->nb = 1;
		r->behind = 0;
		return 0;
	case GH_RELAY_PASS:
		r->relay_prev = gh_app_cfg_enter(r->gen);
		return 0;
	case GH_RELAY_PASSED:
		gh_app_cfg_leave(r->relay_prev);
		return r->behind;
	case GH_RELAY_LEAVE:
		r->nb = 0;
		if (r->behind) {
			r->behind = 0;
			if (r->hold == 0 && flush_held(r) != 0)
				s->gone = 1;
		}
		return 0;
	default:
		return -1;
	}
}

int gh_http_run_start(struct gh_req *r, int stream, struct gh_http_stream *hs,
		      int (*open)(struct gh_http_stream *s, void *ud),
		      int (*event)(void *ud, const struct gh_run_event *ev),
		      int (*tick)(void *ud), void *ud, struct gh_run_sink *sink)
{
	if (stream && gh_http_stream_start(r, hs) != 0)
		return -1;
	hs->open = open;
	hs->ud = ud;
	sink->event = event;
	sink->tick = stream ? tick : NULL;
	sink->ud = ud;
	sink->batch = stream ? stream_batch : NULL;
	sink->batch_ud = hs;
	sink->relay = stream ? stream_relay : NULL;
	if (stream)
		gh_http_stream_wake(r, &sink->wake_fd, &sink->tick_ms);
	return 0;
}

int gh_http_client_gone(struct gh_req *r)
{
	struct pollfd pfd;
	char c;

	if (!gh_http_client_fd(r))
		return 0;
	pfd.fd = r->sock;
	pfd.events = POLLIN | POLLRDHUP;
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return 1;
	if (pfd.revents & POLLIN) {
		ssize_t n = recv(r->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);

		return n == 0;
	}
	return 0;
}

/* ------------------------------------------------------------ health */

/* 200 either way: "degraded" says the audit log needs attention (chain
 * not intact, read-only, or the witness failing), with the details under
 * "audit"; a load balancer that should stop sending traffic reads it. */
static void health(struct gh_req *r)
{
	cJSON *o = cJSON_CreateObject(), *st_item, *m;
	struct gh_store_stats st;
	int degraded = 0;

	if (!o) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	gh_store_stats(r->app->store, &st);
	st_item = cJSON_AddStringToObject(o, "status", "ok");
	cJSON_AddStringToObject(o, "version", GH_VERSION);
	cJSON_AddNumberToObject(o, "schemaVersion", gh_store_schema_version(r->app->store));
	cJSON_AddNumberToObject(o, "uptimeSeconds",
				(double)((gh_now_ms() - r->app->started_ms) / 1000));
	cJSON_AddNumberToObject(o, "activeStreams", atomic_load(&r->app->active_streams));
	if (!gh_audit_health_json(r->app->audit, o))
		degraded = 1;
	/* every upstream MCP server's state: one failing is reported, and the
	 * gateway is degraded, not down */
	m = gh_app_mcp(r->app) ? gh_mcp_status_json(gh_app_mcp(r->app), 1, &degraded) : NULL;
	if (m)
		cJSON_AddItemToObject(o, "mcp", m);
	if (gh_replica_health_json(r->app, o) != 0)
		degraded = 1;
	if (gh_otel_enabled()) {
		/* trace export: counts only (the collector's address stays private) */
		cJSON *t = cJSON_AddObjectToObject(o, "otel");
		struct gh_otel_stats os;

		gh_otel_stats(&os);
		cJSON_AddNumberToObject(t, "exported", (double)os.exported);
		cJSON_AddNumberToObject(t, "dropped", (double)os.dropped);
		cJSON_AddNumberToObject(t, "queued", (double)os.queued);
		cJSON_AddNumberToObject(t, "failedExports", (double)os.failed_exports);
	}
	if (degraded && st_item)
		cJSON_SetValuestring(st_item, "degraded");
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* ------------------------------------------------------------ server */

/*
 * Worker stacks. CivetWeb 1.15 as Debian builds it starts every thread
 * with a 100 KiB stack (USE_STACK_SIZE, fixed at compile time; no run-time
 * option), and a request's worker runs all of gatehouse beneath it: cJSON
 * and gatehouse's own walks over documents of up to GH_JSON_MAX_DEPTH
 * levels (128 for stored ones), schema checks, SQLite and libcurl.
 * gatehouse defines pthread_attr_setstacksize: the dynamic linker binds
 * CivetWeb's call to this definition, which raises a size below
 * GH_HTTP_THREAD_STACK to it and passes every other call through. Only
 * address space is reserved; a worker touches the pages it uses.
 */
#define GH_HTTP_THREAD_STACK ((size_t)1 << 20)

typedef int (*setstacksize_fn)(pthread_attr_t *, size_t);
static _Atomic(setstacksize_fn) real_setstacksize;

int pthread_attr_setstacksize(pthread_attr_t *attr, size_t size)
{
	setstacksize_fn f = atomic_load(&real_setstacksize);

	if (!f) {
		f = (setstacksize_fn)(uintptr_t)dlsym(RTLD_NEXT, "pthread_attr_setstacksize");
		if (!f)
			return ENOSYS;
		atomic_store(&real_setstacksize, f);
	}
	return f(attr, size < GH_HTTP_THREAD_STACK ? GH_HTTP_THREAD_STACK : size);
}

/* Each worker checks once that its stack is the size asked for. */
static void *on_init_thread(const struct mg_context *ctx, int type)
{
	pthread_attr_t a;
	size_t size = 0;

	(void)ctx;
	if (type == 1 && pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstacksize(&a, &size);
		pthread_attr_destroy(&a);
		if (size < GH_HTTP_THREAD_STACK)
			gh_warn("worker thread stack is %zu KiB, not %zu KiB: deeply nested "
				"requests may not fit", size >> 10, GH_HTTP_THREAD_STACK >> 10);
	}
	return NULL;
}

static void on_exit_thread(const struct mg_context *ctx, int type, void *user)
{
	free(worker_req);
	worker_req = NULL;
}

/* CivetWeb closed a connection: the front counts it off its address. */
static void on_connection_closed(const struct mg_connection *conn)
{
	struct gh_http *h = mg_get_user_data(mg_get_context(conn));
	const struct mg_request_info *ri = mg_get_request_info(conn);

	if (h && ri)
		gh_front_closed(h->front, ri->remote_addr);
}

static int on_log(const struct mg_connection *conn, const char *msg)
{
	gh_debug("civetweb: %s", msg);
	return 1;
}

/* CivetWeb's authorization step: always passes (see gh_http_start). */
static int no_file_auth(struct mg_connection *conn, void *cbdata)
{
	(void)conn;
	(void)cbdata;
	return 1;
}

enum gh_code gh_http_start(struct gh_app *app, const char *listen, struct gh_http **out,
			   struct gh_err *e)
{
	const struct gh_server_conf *sc = &gh_app_cfg(app)->server;
	struct gh_http *h = calloc(1, sizeof(*h));
	struct gh_front_conf fc = {sc->head_timeout_ms, sc->max_connections_per_address};
	struct mg_callbacks cb;
	struct mg_server_port ports[4];
	char threads[16], timeout[24], keepalive[24], head_max[16];
	const char *opts[32];
	struct gh_err fe;
	int n = 0, np;

	*out = NULL;
	if (!h)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	h->app = app;
	app->mcp_sessions = gh_mcp_sessions_new(sc->mcp_sessions_per_key, sc->mcp_session_idle_ms);
	if (!app->mcp_sessions) {
		free(h);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	/* gatehouse listens itself and hands CivetWeb only connections whose
	 * request head has arrived (front.h); CivetWeb listens on a loopback
	 * port that the front takes over right after the start */
	if (gh_front_start(listen, &fc, &h->front, &fe) != GH_OK) {
		gh_mcp_sessions_free(app->mcp_sessions);
		app->mcp_sessions = NULL;
		free(h);
		return gh_err_set(e, GH_E_IO, "cannot listen on %s: %s", listen, fe.msg);
	}
	snprintf(threads, sizeof(threads), "%lld", (long long)sc->threads);
	snprintf(timeout, sizeof(timeout), "%lld", (long long)sc->request_timeout_ms);
	/* the next request's head on a kept-alive connection gets the same
	 * deadline as a new connection's head in the front */
	snprintf(keepalive, sizeof(keepalive), "%lld", (long long)sc->head_timeout_ms);
	snprintf(head_max, sizeof(head_max), "%d", GH_FRONT_HEAD_MAX);
	opts[n++] = "listening_ports";
	opts[n++] = "127.0.0.1:0";
	opts[n++] = "num_threads";
	opts[n++] = threads;
	opts[n++] = "enable_keep_alive";
	opts[n++] = "yes";
	opts[n++] = "keep_alive_timeout_ms";
	opts[n++] = keepalive;
	opts[n++] = "tcp_nodelay";
	opts[n++] = "1";
	opts[n++] = "request_timeout_ms";
	opts[n++] = timeout;
	opts[n++] = "max_request_size";
	opts[n++] = head_max;
	opts[n++] = "decode_url";
	opts[n++] = "no"; /* dispatch() decodes, refusing bad escapes and %00 */
	opts[n] = NULL;
	/* Plain HTTP: TLS is terminated in front of gatehouse (Debian's
	 * CivetWeb 1.15 is built for the OpenSSL 1.1 API and cannot load
	 * Debian 12's OpenSSL 3). With no features asked for, the return
	 * value (the features set up) is 0 on success too. */
	mg_init_library(0);
	memset(&cb, 0, sizeof(cb));
	cb.init_thread = on_init_thread;
	cb.exit_thread = on_exit_thread;
	cb.connection_closed = on_connection_closed;
	cb.log_message = on_log;
	h->ctx = mg_start(&cb, h, opts);
	if (!h->ctx) {
		mg_exit_library();
		gh_front_stop(h->front);
		gh_front_free(h->front);
		gh_mcp_sessions_free(app->mcp_sessions);
		app->mcp_sessions = NULL;
		free(h);
		return gh_err_set(e, GH_E_IO, "cannot start the HTTP server (CivetWeb)");
	}
	mg_set_request_handler(h->ctx, "/", dispatch, app);
	/* gatehouse authenticates every request itself (dispatch); without a
	 * handler of its own CivetWeb looks for a .htpasswd file on each one */
	mg_set_auth_handler(h->ctx, "/", no_file_auth, NULL);
	memset(ports, 0, sizeof(ports));
	np = mg_get_server_ports(h->ctx, 4, ports);
	if (np < 1 || gh_front_attach(h->front, ports[0].port, e) != GH_OK) {
		if (np < 1)
			gh_err_set(e, GH_E_IO, "CivetWeb reports no listening port");
		gh_http_stop(h);
		return e->code;
	}
	h->port = gh_front_port(h->front);
	*out = h;
	return GH_OK;
}

/* CivetWeb's accept loop polls with a 2 s timeout and notices a stop only
 * between polls. While mg_stop waits for it, this thread keeps waking the
 * loop through the front's eventfd so shutdown takes milliseconds. */
struct waker {
	struct gh_front *front;
	_Atomic int done;
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;

	while (!atomic_load(&w->done)) {
		gh_front_wake(w->front);
		usleep(20000);
	}
	return NULL;
}

void gh_http_stop(struct gh_http *h)
{
	struct waker w;
	pthread_t t;
	int started;

	if (!h)
		return;
	/* no new connections, and none left waiting for a worker */
	gh_front_stop(h->front);
	w.front = h->front;
	atomic_init(&w.done, 0);
	started = pthread_create(&t, NULL, waker_main, &w) == 0;
	mg_stop(h->ctx);
	atomic_store(&w.done, 1);
	if (started)
		pthread_join(t, NULL);
	mg_exit_library();
	gh_front_free(h->front);
	gh_mcp_sessions_free(h->app->mcp_sessions);
	h->app->mcp_sessions = NULL;
	free(h);
}

int gh_http_port(const struct gh_http *h)
{
	return h->port;
}
