/*
 * fake_upstream.c - a scripted stand-in for the OpenAI and Anthropic APIs and for HTTP tool
 * servers, so gatehouse's integration tests, client-compatibility tests and benchmarks can run
 * its real provider code (libcurl) without reaching an LLM service.
 *
 * It speaks the providers' wire formats byte for byte: Chat Completions JSON and SSE
 * ("data: {...}" chunks, tool_calls deltas by index, the usage chunk, "data: [DONE]") and the
 * Messages API JSON and SSE (message_start ... message_stop). Tests queue replies per model or
 * per tool through POST /_script, read back what gatehouse sent through GET /_requests, and can
 * make the upstream misbehave: error statuses, delays, a connection closed without an answer,
 * a stream truncated, reset mid-way or carrying a malformed event. tests/fake/README.md is the
 * reference for the REPLY format.
 *
 * Responses are written raw (status line, headers, body in one write; SSE as hand-made
 * chunked frames, one frame per event) so the bytes on the wire are exactly the ones meant.
 * CivetWeb has no call that hands out a connection's socket, so dropping or resetting one
 * finds its descriptor by the connection's address pair.
 *
 * Threading: CivetWeb runs each request on one of its worker threads. The reply queues, the
 * request log and the id counter live in one struct fake guarded by fake.mu; handlers copy
 * what they need under the lock and never sleep or write to a socket while holding it. Sleeps
 * wait on fake.stop_cv so SIGTERM ends them at once.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <civetweb.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "json.h"
#include "util.h"

#define GH_FAKE_MAX_BODY (8u << 20)      /* request bodies; more is answered 413 */
#define GH_FAKE_DRAIN_MAX (64u << 20)    /* read and dropped before that 413 */
#define GH_FAKE_LOG_MAX 2000             /* requests kept for GET /_requests */
#define GH_FAKE_LOG_BYTES (256u << 20)   /* and at most this much of them */
#define GH_FAKE_MAX_DELAY_MS 60000       /* delay_ms and chunk_delay_ms are clamped to this */
#define GH_FAKE_MAX_PAD (64u << 20)      /* tool reply "size" */
#define GH_FAKE_OUT_MAX (512u << 20)     /* any one response */
#define GH_FAKE_NAME_MAX 256             /* model / tool names in query strings */
#define GH_FAKE_DEFAULT_MODEL "fake-model"
#define GH_FAKE_TAG "bench-stream-"          /* a request carrying it is timed (GET /_timings) */
#define GH_FAKE_TAG_MAX 40

enum kind { KIND_OPENAI, KIND_ANTHROPIC, KIND_TOOL, KIND_CONTROL };

struct reply_node {
	cJSON *reply;
	struct reply_node *next;
};

/* Replies waiting for one model ("*" = fallback) or one tool. */
struct queue {
	char *name;
	int tool;
	struct reply_node *head, *tail;
	struct queue *next;
};

/* One recorded request: its JSON text (with "seq") and the keys GET /_requests filters on. */
struct log_ent {
	char *json;
	size_t len;
	char *model; /* NULL when the body had none */
	char *tool;  /* NULL unless POST /tools/<name> */
};

/* When the fake read a tagged streamed request and when it wrote the first text of its answer
 * (CLOCK_MONOTONIC ns, comparable with the client's clock on this machine): a benchmark takes
 * the time the fake itself spent out of what its client measured. */
struct timing {
	char tag[GH_FAKE_TAG_MAX];
	int64_t recv_ns, first_ns;
};

struct fake {
	pthread_mutex_t mu; /* guards queues, log*, seq, next_id, timings* */
	struct timing timings[GH_FAKE_LOG_MAX];
	size_t ntimings;
	struct queue *queues;
	struct log_ent log[GH_FAKE_LOG_MAX];
	size_t log_first, log_count, log_bytes;
	uint64_t seq;
	uint64_t next_id;

	pthread_mutex_t stop_mu; /* guards stopping */
	pthread_cond_t stop_cv;
	int stopping; /* 1 once SIGTERM came, 2 once CivetWeb has stopped */

	int port; /* the listening port; under mu (set once workers already run) */
	int verbose;
};

/* One request being answered; lives on the handler's stack. */
struct req {
	struct fake *f;
	struct mg_connection *conn;
	const struct mg_request_info *ri;
	char *body; /* NUL-terminated; owned */
	size_t body_len;
	cJSON *json; /* the body parsed, or NULL when it is not JSON; owned */
	int keep_alive;
	int64_t t_start; /* CLOCK_MONOTONIC ns when the handler began */
	long timing;     /* its slot in fake.timings, or -1 */
};

/* A tool call of a reply, ready to send. */
struct call {
	const char *id;   /* borrowed from the reply, or idbuf */
	char idbuf[48];
	const char *name; /* borrowed from the reply */
	char *args;       /* the JSON text sent as arguments; owned */
};

/* What an LLM reply says, with every default filled in. */
struct plan {
	char *text; /* owned; NULL = no text (tool calls only) */
	const char *thinking; /* borrowed from the reply; NULL = no thinking block (Anthropic) */
	const char *signature; /* its signature */
	struct call *calls;
	int ncalls;
	const char *finish; /* OpenAI's name: stop, tool_calls, length, ... */
	int64_t in_tokens, out_tokens;
	int64_t gap_ms, words_per_chunk, reset_after, malformed_after;
	int truncate;
};

/* An SSE response in progress. */
struct sse {
	struct req *r;
	int64_t gap_ms, reset_after, malformed_after;
	int64_t sent; /* events written */
	int malformed_done, dead;
	const char *malformed_event; /* "event:" line for the malformed event, or NULL */
	int text_seen; /* the first text went out (timed) */
	int text_next; /* the next event emitted carries text */
};

/* ---- small helpers ---- */

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t new_id(struct fake *f)
{
	uint64_t n;

	pthread_mutex_lock(&f->mu);
	n = ++f->next_id;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* Sleeps ms milliseconds (clamped to a minute), or less when the server is stopping. */
static void nap(struct fake *f, int64_t ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	if (ms > GH_FAKE_MAX_DELAY_MS)
		ms = GH_FAKE_MAX_DELAY_MS;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->stop_mu);
	while (!f->stopping)
		if (pthread_cond_timedwait(&f->stop_cv, &f->stop_mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->stop_mu);
}

static int64_t count_words(const char *s)
{
	int64_t n = 0;
	int in = 0;

	for (; *s; s++) {
		if (isspace((unsigned char)*s)) {
			in = 0;
		} else if (!in) {
			in = 1;
			n++;
		}
	}
	return n;
}

/* Words in the strings of v that sit under a "content" or "text" key (or anywhere when
 * counted is set): the prompt size of a Chat Completions or Messages request. */
static int64_t words_in(const cJSON *v, int counted)
{
	const cJSON *c;
	int64_t n = 0;

	if (cJSON_IsString(v))
		return counted ? count_words(v->valuestring) : 0;
	if (cJSON_IsArray(v)) {
		cJSON_ArrayForEach(c, v)
			n += words_in(c, counted);
	} else if (cJSON_IsObject(v)) {
		cJSON_ArrayForEach(c, v)
			n += words_in(c, c->string && (!strcmp(c->string, "content") ||
						       !strcmp(c->string, "text")));
	}
	return n;
}

/* The text of one message: its content string, or the "text" parts of its content array
 * joined by newlines. Appends to out. */
static int message_text(const cJSON *msg, struct gh_buf *out)
{
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content"), *part;
	const char *t, *type;
	int first = 1;

	if (cJSON_IsString(content))
		return gh_buf_puts(out, content->valuestring);
	cJSON_ArrayForEach(part, (cJSON_IsArray(content) ? content : NULL)) {
		t = gh_json_str(part, "text");
		type = gh_json_str(part, "type");
		if (!t || !type || strcmp(type, "text"))
			continue;
		if ((!first && gh_buf_putc(out, '\n')) || gh_buf_puts(out, t))
			return -1;
		first = 0;
	}
	return 0;
}

/* "echo: " + the text of the last user message that has any. Caller frees. */
static char *echo_text(const cJSON *body)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages"), *m, *last = NULL;
	struct gh_buf b, t;
	char *s = NULL;

	gh_buf_init(&b, GH_FAKE_MAX_BODY + 16);
	gh_buf_init(&t, GH_FAKE_MAX_BODY);
	cJSON_ArrayForEach(m, (cJSON_IsArray(msgs) ? msgs : NULL)) {
		const char *role = gh_json_str(m, "role");

		if (!role || strcmp(role, "user"))
			continue;
		gh_buf_reset(&t);
		if (message_text(m, &t) == 0 && t.len > 0)
			last = m;
	}
	gh_buf_reset(&t);
	if (gh_buf_puts(&b, "echo: ") || (last && message_text(last, &t)) ||
	    gh_buf_append(&b, t.data ? t.data : "", t.len))
		goto out;
	s = gh_buf_detach(&b);
out:
	gh_buf_free(&b);
	gh_buf_free(&t);
	return s;
}

/* End of the next group of n words starting at off: each word takes the whitespace before
 * it, and trailing whitespace joins the last group, so the pieces concatenate to s. */
static size_t next_words(const char *s, size_t len, size_t off, int64_t n)
{
	size_t i = off, j;

	while (n-- > 0 && i < len) {
		while (i < len && isspace((unsigned char)s[i]))
			i++;
		while (i < len && !isspace((unsigned char)s[i]))
			i++;
	}
	for (j = i; j < len && isspace((unsigned char)s[j]); j++)
		;
	return j == len ? len : i;
}

/* Moves a cut forward to the next UTF-8 character boundary. */
static size_t utf8_boundary(const char *s, size_t len, size_t i)
{
	while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80)
		i++;
	return i;
}

/* Splits len bytes into up to three pieces, as providers split tool arguments: cuts[0..2]
 * are the piece ends. Returns the number of pieces (0 for an empty string). */
static int split_args(const char *s, size_t len, size_t cuts[3])
{
	int n = 0, k, parts = len >= 3 ? 3 : (int)len;
	size_t prev = 0, c;

	for (k = 1; k <= parts; k++) {
		c = k == parts ? len : utf8_boundary(s, len, len * (size_t)k / (size_t)parts);
		if (c > prev) {
			cuts[n++] = c;
			prev = c;
		}
	}
	return n;
}

static char *substr(const char *s, size_t from, size_t to)
{
	char *p = malloc(to - from + 1);

	if (p) {
		memcpy(p, s + from, to - from);
		p[to - from] = '\0';
	}
	return p;
}

static const char *status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 529: return "Site Overloaded";
	default: return "Status";
	}
}

static int header_name_ok(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
			return 0;
	return 1;
}

static int header_value_ok(const char *s)
{
	return s && !strpbrk(s, "\r\n");
}

static const char *openai_finish(const char *f)
{
	if (!strcmp(f, "end_turn") || !strcmp(f, "stop_sequence"))
		return "stop";
	if (!strcmp(f, "tool_use"))
		return "tool_calls";
	if (!strcmp(f, "max_tokens"))
		return "length";
	return f;
}

static const char *anthropic_stop(const char *f)
{
	if (!strcmp(f, "stop"))
		return "end_turn";
	if (!strcmp(f, "tool_calls") || !strcmp(f, "function_call"))
		return "tool_use";
	if (!strcmp(f, "length"))
		return "max_tokens";
	return f;
}

/* ---- connections ---- */

/* The descriptor of r's connection, found by its address pair, or -1. */
static int conn_fd(const struct req *r)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	struct sockaddr_in a;
	socklen_t alen;
	char ip[INET_ADDRSTRLEN];
	int64_t v;
	int fd, port, found = -1;

	if (!d)
		return -1;
	pthread_mutex_lock(&r->f->mu);
	port = r->f->port;
	pthread_mutex_unlock(&r->f->mu);
	while (found < 0 && (de = readdir(d)) != NULL) {
		if (gh_parse_i64(de->d_name, 0, INT_MAX, &v) != 0 || (int)v == dirfd(d))
			continue;
		fd = (int)v;
		alen = sizeof a;
		if (getsockname(fd, (struct sockaddr *)&a, &alen) != 0 || a.sin_family != AF_INET ||
		    ntohs(a.sin_port) != port)
			continue;
		alen = sizeof a;
		if (getpeername(fd, (struct sockaddr *)&a, &alen) != 0 || a.sin_family != AF_INET ||
		    ntohs(a.sin_port) != r->ri->remote_port)
			continue;
		if (!inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip) ||
		    strcmp(ip, r->ri->remote_addr))
			continue;
		found = fd;
	}
	closedir(d);
	return found;
}

/* Ends r's connection without a word: a FIN, or with reset set an RST (SO_LINGER 0, then the
 * socket is closed by putting a fresh unconnected socket in its descriptor slot, so CivetWeb's
 * own close later hits that one and the number is never reused under it). */
static void drop_conn(struct req *r, int reset)
{
	struct linger lg = { 1, 0 };
	int fd = conn_fd(r), dummy;

	mg_disable_connection_keep_alive(r->conn);
	r->keep_alive = 0;
	if (fd < 0)
		return;
	if (!reset) {
		shutdown(fd, SHUT_RDWR);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	dummy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (dummy < 0 || dup2(dummy, fd) < 0)
		shutdown(fd, SHUT_RDWR);
	if (dummy >= 0)
		close(dummy);
}

static int write_all(struct req *r, const char *p, size_t n)
{
	int w;

	while (n > 0) {
		w = mg_write(r->conn, p, n > (1u << 30) ? (1u << 30) : n);
		if (w <= 0) {
			/* half a response went out: the connection cannot carry another */
			mg_disable_connection_keep_alive(r->conn);
			r->keep_alive = 0;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Status line and headers. clen < 0 means a chunked SSE body. hdrs (borrowed, may be NULL) are
 * a reply's "headers"; a Content-Type among them replaces ctype. more holds ready lines. */
static int put_head(struct req *r, struct gh_buf *o, int status, const char *ctype,
		    long long clen, const char *more, const cJSON *hdrs)
{
	const cJSON *h;
	int rc = 0;

	cJSON_ArrayForEach(h, (cJSON_IsObject(hdrs) ? hdrs : NULL))
		if (!strcasecmp(h->string, "content-type") && cJSON_IsString(h) &&
		    header_value_ok(h->valuestring))
			ctype = h->valuestring;
	rc |= gh_buf_printf(o, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", status,
			    status_text(status), ctype);
	if (clen >= 0)
		rc |= gh_buf_printf(o, "Content-Length: %lld\r\n", clen);
	else
		rc |= gh_buf_puts(o, "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
	rc |= gh_buf_puts(o, r->keep_alive ? "Connection: keep-alive\r\n"
					   : "Connection: close\r\n");
	if (more)
		rc |= gh_buf_puts(o, more);
	cJSON_ArrayForEach(h, (cJSON_IsObject(hdrs) ? hdrs : NULL)) {
		if (!header_name_ok(h->string) || !strcasecmp(h->string, "content-type") ||
		    !strcasecmp(h->string, "content-length") ||
		    !strcasecmp(h->string, "transfer-encoding") ||
		    !strcasecmp(h->string, "connection"))
			continue;
		if (cJSON_IsString(h) && header_value_ok(h->valuestring))
			rc |= gh_buf_printf(o, "%s: %s\r\n", h->string, h->valuestring);
		else if (gh_json_is_int(h))
			rc |= gh_buf_printf(o, "%s: %lld\r\n", h->string,
					    (long long)h->valuedouble);
	}
	rc |= gh_buf_puts(o, "\r\n");
	return rc ? -1 : 0;
}

/* Sends a whole response; returns status (the handler's return value). */
static int send_full(struct req *r, int status, const char *ctype, const char *body, size_t len,
		     const char *more, const cJSON *hdrs)
{
	struct gh_buf o;

	gh_buf_init(&o, GH_FAKE_OUT_MAX);
	if (put_head(r, &o, status, ctype, (long long)len, more, hdrs) == 0 &&
	    gh_buf_append(&o, body, len) == GH_BUF_OK)
		write_all(r, o.data, o.len);
	gh_buf_free(&o);
	return status;
}

/* Sends v (borrowed) as a JSON response. */
static int send_json(struct req *r, int status, const cJSON *v, const char *more,
		     const cJSON *hdrs)
{
	char *s = v ? cJSON_PrintUnformatted(v) : NULL;

	if (!s)
		return send_full(r, 500, "application/json", "{\"error\":\"out of memory\"}", 25,
				 NULL, NULL);
	send_full(r, status, "application/json", s, strlen(s), more, hdrs);
	cJSON_free(s);
	return status;
}

/* The error body each API sends for status, with msg as its message. Caller deletes. */
static cJSON *error_body(enum kind kind, int status, const char *msg)
{
	cJSON *root = cJSON_CreateObject(), *e;
	const char *type, *code = NULL;

	if (kind == KIND_ANTHROPIC) {
		switch (status) {
		case 401: type = "authentication_error"; break;
		case 403: type = "permission_error"; break;
		case 404: type = "not_found_error"; break;
		case 413: type = "request_too_large"; break;
		case 429: type = "rate_limit_error"; break;
		case 529: type = "overloaded_error"; break;
		default: type = status >= 500 ? "api_error" : "invalid_request_error"; break;
		}
		cJSON_AddStringToObject(root, "type", "error");
		e = cJSON_AddObjectToObject(root, "error");
		cJSON_AddStringToObject(e, "type", type);
		cJSON_AddStringToObject(e, "message", msg);
		return root;
	}
	if (kind == KIND_OPENAI) {
		type = status >= 500 ? "server_error" : "invalid_request_error";
		if (status == 401)
			code = "invalid_api_key";
		if (status == 429) {
			type = "requests";
			code = "rate_limit_exceeded";
		}
		e = cJSON_AddObjectToObject(root, "error");
		cJSON_AddStringToObject(e, "message", msg);
		cJSON_AddStringToObject(e, "type", type);
		cJSON_AddNullToObject(e, "param");
		gh_json_add_str(e, "code", code);
		return root;
	}
	cJSON_AddBoolToObject(root, "ok", 0);
	cJSON_AddStringToObject(root, "error", msg);
	cJSON_AddNumberToObject(root, "status", status);
	return root;
}

static int send_error(struct req *r, enum kind kind, int status, const char *msg)
{
	cJSON *b = error_body(kind, status, msg);

	send_json(r, status, b, NULL, NULL);
	cJSON_Delete(b);
	return status;
}

/* A reply with "status" and/or "body": sent as scripted (a missing body becomes the API's
 * own error shape for the status). */
static int send_custom(struct req *r, enum kind kind, const cJSON *reply)
{
	const cJSON *body = cJSON_GetObjectItemCaseSensitive(reply, "body");
	const cJSON *hdrs = cJSON_GetObjectItemCaseSensitive(reply, "headers");
	const char *ctype = gh_json_str(reply, "content_type");
	int64_t status = gh_json_int(reply, "status", 200);
	char msg[64];
	cJSON *dflt;

	if (status < 200 || status > 599)
		status = 500;
	if (!ctype || !header_value_ok(ctype))
		ctype = "application/json";
	if (cJSON_IsString(body))
		return send_full(r, (int)status, ctype, body->valuestring,
				 strlen(body->valuestring), NULL, hdrs);
	if (body)
		return send_json(r, (int)status, body, NULL, hdrs);
	snprintf(msg, sizeof msg, "fake upstream error (status %d)", (int)status);
	dflt = status >= 400 ? error_body(kind, (int)status, msg) : cJSON_CreateObject();
	send_json(r, (int)status, dflt, NULL, hdrs);
	cJSON_Delete(dflt);
	return (int)status;
}

/* ---- SSE ---- */

static void timing_text(struct sse *s);

static int sse_raw(struct sse *s, const char *event, const char *data)
{
	struct gh_buf ev, ch;
	int rc = -1;

	gh_buf_init(&ev, GH_FAKE_OUT_MAX);
	gh_buf_init(&ch, GH_FAKE_OUT_MAX);
	if ((event && gh_buf_printf(&ev, "event: %s\n", event)) ||
	    gh_buf_printf(&ev, "data: %s\n\n", data) ||
	    gh_buf_printf(&ch, "%zx\r\n", ev.len) || gh_buf_append(&ch, ev.data, ev.len) ||
	    gh_buf_puts(&ch, "\r\n"))
		goto out;
	rc = write_all(s->r, ch.data, ch.len);
out:
	gh_buf_free(&ev);
	gh_buf_free(&ch);
	return rc;
}

/* Writes one event, after the pacing gap, unless the script says the stream breaks here.
 * Returns -1 once the stream is over (reset, or the client went away). */
static int sse_emit(struct sse *s, const char *event, const char *data)
{
	if (s->dead)
		return -1;
	if (s->sent > 0)
		nap(s->r->f, s->gap_ms);
	if (s->reset_after >= 0 && s->sent >= s->reset_after) {
		drop_conn(s->r, 1);
		s->dead = 1;
		return -1;
	}
	if (!s->malformed_done && s->malformed_after >= 0 && s->sent >= s->malformed_after) {
		s->malformed_done = 1;
		if (sse_raw(s, s->malformed_event, "{not json") != 0) {
			s->dead = 1;
			return -1;
		}
	}
	if (s->text_next) {
		/* stamped before the write: the reader may run before write() returns */
		s->text_next = 0;
		timing_text(s);
	}
	if (sse_raw(s, event, data) != 0) {
		s->dead = 1;
		return -1;
	}
	s->sent++;
	return 0;
}

/* Emits v as one event and deletes it. */
static int sse_json(struct sse *s, const char *event, cJSON *v)
{
	char *t = v ? cJSON_PrintUnformatted(v) : NULL;
	int rc;

	cJSON_Delete(v);
	if (!t) {
		s->dead = 1;
		return -1;
	}
	rc = sse_emit(s, event, t);
	cJSON_free(t);
	return rc;
}

static int sse_start(struct sse *s, struct req *r, const struct plan *p, const char *more,
		     const cJSON *hdrs)
{
	struct gh_buf o;
	int rc = -1;

	memset(s, 0, sizeof *s);
	s->r = r;
	s->gap_ms = p->gap_ms;
	s->reset_after = p->reset_after;
	s->malformed_after = p->malformed_after;
	gh_buf_init(&o, 1u << 20);
	if (put_head(r, &o, 200, "text/event-stream; charset=utf-8", -1, more, hdrs) == 0)
		rc = write_all(r, o.data, o.len);
	gh_buf_free(&o);
	if (rc != 0)
		s->dead = 1;
	return rc;
}

/* Ends the stream cleanly, unless a scripted break has not happened yet: then the malformed
 * event and the reset come here. */
static void sse_finish(struct sse *s)
{
	if (s->dead)
		return;
	if (!s->malformed_done && s->malformed_after >= 0) {
		s->malformed_done = 1;
		if (sse_raw(s, s->malformed_event, "{not json") != 0)
			return;
	}
	if (s->reset_after >= 0) {
		drop_conn(s->r, 1);
		return;
	}
	write_all(s->r, "0\r\n\r\n", 5);
}

/* ---- replies ---- */

static void plan_free(struct plan *p)
{
	int i;

	for (i = 0; i < p->ncalls; i++)
		free(p->calls[i].args);
	free(p->calls);
	free(p->text);
	memset(p, 0, sizeof *p);
}

/* Fills p from reply (borrowed; NULL = the default echo reply). -1 on OOM. */
static int plan_build(struct req *r, const cJSON *reply, enum kind kind, struct plan *p)
{
	const cJSON *calls = cJSON_GetObjectItemCaseSensitive(reply, "tool_calls"), *c, *a;
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(reply, "usage");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(reply, "stream");
	const char *text = gh_json_str(reply, "text"), *fin = gh_json_str(reply, "finish_reason");
	struct call *k;
	int n;

	memset(p, 0, sizeof *p);
	n = cJSON_IsArray(calls) ? cJSON_GetArraySize(calls) : 0;
	if (n > 0) {
		p->calls = calloc((size_t)n, sizeof *p->calls);
		if (!p->calls)
			return -1;
		cJSON_ArrayForEach(c, calls) {
			k = &p->calls[p->ncalls++];
			k->id = gh_json_str(c, "id");
			if (!k->id) {
				snprintf(k->idbuf, sizeof k->idbuf, "%s%llu",
					 kind == KIND_ANTHROPIC ? "toolu_" : "call_",
					 (unsigned long long)new_id(r->f));
				k->id = k->idbuf;
			}
			k->name = gh_json_str(c, "name") ? gh_json_str(c, "name") : "tool";
			a = cJSON_GetObjectItemCaseSensitive(c, "arguments");
			if (gh_json_str(c, "arguments_raw"))
				k->args = gh_strdup(gh_json_str(c, "arguments_raw"));
			else if (cJSON_IsString(a))
				k->args = gh_strdup(a->valuestring);
			else if (a)
				k->args = gh_json_dump(a);
			else
				k->args = gh_strdup("{}");
			if (!k->args)
				return -1;
		}
	}
	{
		const cJSON *th = cJSON_GetObjectItemCaseSensitive(reply, "thinking");

		p->thinking = cJSON_IsString(th) ? th->valuestring : gh_json_str(th, "text");
		p->signature = gh_json_str(th, "signature");
		if (p->thinking && !p->signature)
			p->signature = "c2lnbmF0dXJl";
	}
	if (text)
		p->text = gh_strdup(text);
	else if (!p->ncalls)
		p->text = echo_text(r->json);
	if (!p->text && (text || !p->ncalls))
		return -1;
	p->finish = fin ? openai_finish(fin) : p->ncalls ? "tool_calls" : "stop";

	p->in_tokens = words_in(cJSON_GetObjectItemCaseSensitive(r->json, "messages"), 0) +
		       words_in(cJSON_GetObjectItemCaseSensitive(r->json, "system"), 1);
	p->out_tokens = (p->text ? count_words(p->text) : 0) + p->ncalls;
	p->in_tokens = gh_json_int(u, "prompt_tokens", gh_json_int(u, "input_tokens",
								     p->in_tokens));
	p->out_tokens = gh_json_int(u, "completion_tokens", gh_json_int(u, "output_tokens",
									 p->out_tokens));

	p->gap_ms = gh_json_int(st, "chunk_delay_ms", 0);
	p->words_per_chunk = gh_json_int(st, "words_per_chunk", 1);
	if (p->words_per_chunk < 1)
		p->words_per_chunk = 1;
	p->truncate = gh_json_bool(st, "truncate", 0);
	p->reset_after = gh_json_int(st, "reset_after_chunks", -1);
	p->malformed_after = gh_json_int(st, "malformed_after_chunks", -1);
	return 0;
}

static cJSON *openai_usage(const struct plan *p)
{
	cJSON *u = cJSON_CreateObject(), *d;

	cJSON_AddNumberToObject(u, "prompt_tokens", (double)p->in_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens", (double)p->out_tokens);
	cJSON_AddNumberToObject(u, "total_tokens", (double)(p->in_tokens + p->out_tokens));
	d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
	cJSON_AddNumberToObject(d, "cached_tokens", 0);
	cJSON_AddNumberToObject(d, "audio_tokens", 0);
	d = cJSON_AddObjectToObject(u, "completion_tokens_details");
	cJSON_AddNumberToObject(d, "reasoning_tokens", 0);
	cJSON_AddNumberToObject(d, "audio_tokens", 0);
	cJSON_AddNumberToObject(d, "accepted_prediction_tokens", 0);
	cJSON_AddNumberToObject(d, "rejected_prediction_tokens", 0);
	return u;
}

static cJSON *anthropic_usage(const struct plan *p, int64_t out_tokens)
{
	cJSON *u = cJSON_CreateObject();

	cJSON_AddNumberToObject(u, "input_tokens", (double)p->in_tokens);
	cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
	cJSON_AddNumberToObject(u, "cache_read_input_tokens", 0);
	cJSON_AddNumberToObject(u, "output_tokens", (double)out_tokens);
	return u;
}

static int openai_json(struct req *r, const struct plan *p, const char *model, const char *more,
		       const cJSON *hdrs, uint64_t n)
{
	cJSON *root = cJSON_CreateObject(), *ch, *msg, *calls, *tc, *fn;
	char id[48];
	int i, rc;

	snprintf(id, sizeof id, "chatcmpl-%llu", (unsigned long long)n);
	cJSON_AddStringToObject(root, "id", id);
	cJSON_AddStringToObject(root, "object", "chat.completion");
	cJSON_AddNumberToObject(root, "created", (double)time(NULL));
	cJSON_AddStringToObject(root, "model", model);
	ch = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), ch);
	cJSON_AddNumberToObject(ch, "index", 0);
	msg = cJSON_AddObjectToObject(ch, "message");
	cJSON_AddStringToObject(msg, "role", "assistant");
	gh_json_add_str(msg, "content", p->text);
	if (p->ncalls) {
		calls = cJSON_AddArrayToObject(msg, "tool_calls");
		for (i = 0; i < p->ncalls; i++) {
			tc = cJSON_CreateObject();
			cJSON_AddItemToArray(calls, tc);
			cJSON_AddStringToObject(tc, "id", p->calls[i].id);
			cJSON_AddStringToObject(tc, "type", "function");
			fn = cJSON_AddObjectToObject(tc, "function");
			cJSON_AddStringToObject(fn, "name", p->calls[i].name);
			cJSON_AddStringToObject(fn, "arguments", p->calls[i].args);
		}
	}
	cJSON_AddNullToObject(msg, "refusal");
	cJSON_AddArrayToObject(msg, "annotations");
	cJSON_AddNullToObject(ch, "logprobs");
	cJSON_AddStringToObject(ch, "finish_reason", p->finish);
	cJSON_AddItemToObject(root, "usage", openai_usage(p));
	cJSON_AddStringToObject(root, "service_tier", "default");
	cJSON_AddStringToObject(root, "system_fingerprint", "fp_fake");
	rc = send_json(r, 200, root, more, hdrs);
	cJSON_Delete(root);
	return rc;
}

struct oa_stream {
	struct sse s;
	char id[48];
	double created;
	const char *model;
	int usage;
};

/* A chat.completion.chunk carrying delta (taken) and finish (NULL = null). */
static cJSON *oa_chunk(const struct oa_stream *o, cJSON *delta, const char *finish)
{
	cJSON *root = cJSON_CreateObject(), *ch = cJSON_CreateObject();

	cJSON_AddStringToObject(root, "id", o->id);
	cJSON_AddStringToObject(root, "object", "chat.completion.chunk");
	cJSON_AddNumberToObject(root, "created", o->created);
	cJSON_AddStringToObject(root, "model", o->model);
	cJSON_AddStringToObject(root, "service_tier", "default");
	cJSON_AddStringToObject(root, "system_fingerprint", "fp_fake");
	if (!cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), ch))
		cJSON_Delete(ch);
	cJSON_AddNumberToObject(ch, "index", 0);
	if (!cJSON_AddItemToObject(ch, "delta", delta))
		cJSON_Delete(delta);
	cJSON_AddNullToObject(ch, "logprobs");
	gh_json_add_str(ch, "finish_reason", finish);
	if (o->usage)
		cJSON_AddNullToObject(root, "usage");
	return root;
}

static int openai_stream(struct req *r, const struct plan *p, const char *model,
			 const char *more, const cJSON *hdrs, uint64_t n)
{
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(r->json, "stream_options");
	struct oa_stream o;
	cJSON *d, *tcs, *tc, *fn, *last;
	size_t len, off, end, cuts[3];
	char *piece;
	int i, j, np;

	memset(&o, 0, sizeof o);
	snprintf(o.id, sizeof o.id, "chatcmpl-%llu", (unsigned long long)n);
	o.created = (double)time(NULL);
	o.model = model;
	o.usage = gh_json_bool(so, "include_usage", 0);
	if (sse_start(&o.s, r, p, more, hdrs) != 0)
		return 200;
	if (p->text || !p->ncalls) {
		d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "role", "assistant");
		cJSON_AddStringToObject(d, "content", "");
		cJSON_AddNullToObject(d, "refusal");
		if (sse_json(&o.s, NULL, oa_chunk(&o, d, NULL)) != 0)
			goto out;
		len = p->text ? strlen(p->text) : 0;
		for (off = 0; off < len; off = end) {
			end = next_words(p->text, len, off, p->words_per_chunk);
			piece = substr(p->text, off, end);
			d = cJSON_CreateObject();
			cJSON_AddStringToObject(d, "content", piece ? piece : "");
			free(piece);
			o.s.text_next = 1;
			if (sse_json(&o.s, NULL, oa_chunk(&o, d, NULL)) != 0)
				goto out;
		}
	}
	for (i = 0; i < p->ncalls; i++) {
		d = cJSON_CreateObject();
		if (i == 0 && !p->text) {
			cJSON_AddStringToObject(d, "role", "assistant");
			cJSON_AddNullToObject(d, "content");
		}
		tcs = cJSON_AddArrayToObject(d, "tool_calls");
		tc = cJSON_CreateObject();
		cJSON_AddItemToArray(tcs, tc);
		cJSON_AddNumberToObject(tc, "index", i);
		cJSON_AddStringToObject(tc, "id", p->calls[i].id);
		cJSON_AddStringToObject(tc, "type", "function");
		fn = cJSON_AddObjectToObject(tc, "function");
		cJSON_AddStringToObject(fn, "name", p->calls[i].name);
		cJSON_AddStringToObject(fn, "arguments", "");
		if (i == 0 && !p->text)
			cJSON_AddNullToObject(d, "refusal");
		if (sse_json(&o.s, NULL, oa_chunk(&o, d, NULL)) != 0)
			goto out;
		len = strlen(p->calls[i].args);
		np = split_args(p->calls[i].args, len, cuts);
		for (j = 0, off = 0; j < np; off = cuts[j++]) {
			piece = substr(p->calls[i].args, off, cuts[j]);
			d = cJSON_CreateObject();
			tc = cJSON_CreateObject();
			cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), tc);
			cJSON_AddNumberToObject(tc, "index", i);
			fn = cJSON_AddObjectToObject(tc, "function");
			cJSON_AddStringToObject(fn, "arguments", piece ? piece : "");
			free(piece);
			if (sse_json(&o.s, NULL, oa_chunk(&o, d, NULL)) != 0)
				goto out;
		}
	}
	if (p->truncate)
		goto out;
	if (sse_json(&o.s, NULL, oa_chunk(&o, cJSON_CreateObject(), p->finish)) != 0)
		goto out;
	if (o.usage) {
		last = oa_chunk(&o, cJSON_CreateObject(), NULL);
		cJSON_ReplaceItemInObjectCaseSensitive(last, "choices", cJSON_CreateArray());
		cJSON_ReplaceItemInObjectCaseSensitive(last, "usage", openai_usage(p));
		if (sse_json(&o.s, NULL, last) != 0)
			goto out;
	}
	if (sse_emit(&o.s, NULL, "[DONE]") != 0)
		goto out;
out:
	sse_finish(&o.s);
	return 200;
}

/* The tool input as Anthropic sends it: the parsed arguments, or the raw text as a string
 * when it is not JSON. */
static cJSON *tool_input(const char *args)
{
	cJSON *v = cJSON_Parse(args);

	return v ? v : cJSON_CreateString(args);
}

static int anthropic_json(struct req *r, const struct plan *p, const char *model,
			  const char *more, const cJSON *hdrs, uint64_t n)
{
	cJSON *root = cJSON_CreateObject(), *content, *b;
	char id[48];
	int i, rc;

	snprintf(id, sizeof id, "msg_%llu", (unsigned long long)n);
	cJSON_AddStringToObject(root, "id", id);
	cJSON_AddStringToObject(root, "type", "message");
	cJSON_AddStringToObject(root, "role", "assistant");
	cJSON_AddStringToObject(root, "model", model);
	content = cJSON_AddArrayToObject(root, "content");
	if (p->thinking) {
		b = cJSON_CreateObject();
		cJSON_AddItemToArray(content, b);
		cJSON_AddStringToObject(b, "type", "thinking");
		cJSON_AddStringToObject(b, "thinking", p->thinking);
		cJSON_AddStringToObject(b, "signature", p->signature);
	}
	if (p->text || !p->ncalls) {
		b = cJSON_CreateObject();
		cJSON_AddItemToArray(content, b);
		cJSON_AddStringToObject(b, "type", "text");
		cJSON_AddStringToObject(b, "text", p->text ? p->text : "");
	}
	for (i = 0; i < p->ncalls; i++) {
		b = cJSON_CreateObject();
		cJSON_AddItemToArray(content, b);
		cJSON_AddStringToObject(b, "type", "tool_use");
		cJSON_AddStringToObject(b, "id", p->calls[i].id);
		cJSON_AddStringToObject(b, "name", p->calls[i].name);
		cJSON_AddItemToObject(b, "input", tool_input(p->calls[i].args));
	}
	cJSON_AddStringToObject(root, "stop_reason", anthropic_stop(p->finish));
	cJSON_AddNullToObject(root, "stop_sequence");
	cJSON_AddItemToObject(root, "usage", anthropic_usage(p, p->out_tokens));
	rc = send_json(r, 200, root, more, hdrs);
	cJSON_Delete(root);
	return rc;
}

static cJSON *an_event(const char *type, int64_t index)
{
	cJSON *v = cJSON_CreateObject();

	cJSON_AddStringToObject(v, "type", type);
	if (index >= 0)
		cJSON_AddNumberToObject(v, "index", (double)index);
	return v;
}

/* content_block_delta at index with a delta {"type": dtype, key: val}. */
static cJSON *an_delta(int64_t index, const char *dtype, const char *key, const char *val)
{
	cJSON *v = an_event("content_block_delta", index), *d;

	d = cJSON_AddObjectToObject(v, "delta");
	cJSON_AddStringToObject(d, "type", dtype);
	cJSON_AddStringToObject(d, key, val);
	return v;
}

static int anthropic_stream(struct req *r, const struct plan *p, const char *model,
			    const char *more, const cJSON *hdrs, uint64_t n)
{
	struct sse s;
	cJSON *v, *m, *b, *d;
	char id[48], *piece;
	const char *text = p->text ? p->text : "";
	size_t len, off, end, cuts[3];
	int64_t idx = 0;
	int i, j, np, pinged = 0;

	if (sse_start(&s, r, p, more, hdrs) != 0)
		return 200;
	s.malformed_event = "content_block_delta";
	snprintf(id, sizeof id, "msg_%llu", (unsigned long long)n);
	v = an_event("message_start", -1);
	m = cJSON_AddObjectToObject(v, "message");
	cJSON_AddStringToObject(m, "id", id);
	cJSON_AddStringToObject(m, "type", "message");
	cJSON_AddStringToObject(m, "role", "assistant");
	cJSON_AddStringToObject(m, "model", model);
	cJSON_AddArrayToObject(m, "content");
	cJSON_AddNullToObject(m, "stop_reason");
	cJSON_AddNullToObject(m, "stop_sequence");
	cJSON_AddItemToObject(m, "usage", anthropic_usage(p, 1));
	if (sse_json(&s, "message_start", v) != 0)
		goto out;
	if (p->thinking) {
		const char *tt = p->thinking;

		v = an_event("content_block_start", idx);
		b = cJSON_AddObjectToObject(v, "content_block");
		cJSON_AddStringToObject(b, "type", "thinking");
		cJSON_AddStringToObject(b, "thinking", "");
		cJSON_AddStringToObject(b, "signature", "");
		if (sse_json(&s, "content_block_start", v) != 0 ||
		    sse_emit(&s, "ping", "{\"type\": \"ping\"}") != 0)
			goto out;
		pinged = 1;
		len = strlen(tt);
		for (off = 0; off < len; off = end) {
			end = next_words(tt, len, off, p->words_per_chunk);
			piece = substr(tt, off, end);
			v = an_delta(idx, "thinking_delta", "thinking", piece ? piece : "");
			free(piece);
			if (sse_json(&s, "content_block_delta", v) != 0)
				goto out;
		}
		if (sse_json(&s, "content_block_delta",
			     an_delta(idx, "signature_delta", "signature", p->signature)) != 0 ||
		    sse_json(&s, "content_block_stop", an_event("content_block_stop", idx)) != 0)
			goto out;
		idx++;
	}
	if (p->text || !p->ncalls) {
		v = an_event("content_block_start", idx);
		b = cJSON_AddObjectToObject(v, "content_block");
		cJSON_AddStringToObject(b, "type", "text");
		cJSON_AddStringToObject(b, "text", "");
		if (sse_json(&s, "content_block_start", v) != 0 ||
		    (!pinged && sse_emit(&s, "ping", "{\"type\": \"ping\"}") != 0))
			goto out;
		pinged = 1;
		len = strlen(text);
		for (off = 0; off < len; off = end) {
			end = next_words(text, len, off, p->words_per_chunk);
			piece = substr(text, off, end);
			v = an_delta(idx, "text_delta", "text", piece ? piece : "");
			free(piece);
			s.text_next = 1;
			if (sse_json(&s, "content_block_delta", v) != 0)
				goto out;
		}
		if (sse_json(&s, "content_block_stop", an_event("content_block_stop", idx)) != 0)
			goto out;
		idx++;
	}
	for (i = 0; i < p->ncalls; i++, idx++) {
		v = an_event("content_block_start", idx);
		b = cJSON_AddObjectToObject(v, "content_block");
		cJSON_AddStringToObject(b, "type", "tool_use");
		cJSON_AddStringToObject(b, "id", p->calls[i].id);
		cJSON_AddStringToObject(b, "name", p->calls[i].name);
		cJSON_AddObjectToObject(b, "input");
		if (sse_json(&s, "content_block_start", v) != 0)
			goto out;
		if (!pinged && sse_emit(&s, "ping", "{\"type\": \"ping\"}") != 0)
			goto out;
		pinged = 1;
		if (sse_json(&s, "content_block_delta",
			     an_delta(idx, "input_json_delta", "partial_json", "")) != 0)
			goto out;
		len = strlen(p->calls[i].args);
		np = split_args(p->calls[i].args, len, cuts);
		for (j = 0, off = 0; j < np; off = cuts[j++]) {
			piece = substr(p->calls[i].args, off, cuts[j]);
			v = an_delta(idx, "input_json_delta", "partial_json", piece ? piece : "");
			free(piece);
			if (sse_json(&s, "content_block_delta", v) != 0)
				goto out;
		}
		if (sse_json(&s, "content_block_stop", an_event("content_block_stop", idx)) != 0)
			goto out;
	}
	if (p->truncate)
		goto out;
	v = an_event("message_delta", -1);
	d = cJSON_AddObjectToObject(v, "delta");
	cJSON_AddStringToObject(d, "stop_reason", anthropic_stop(p->finish));
	cJSON_AddNullToObject(d, "stop_sequence");
	d = cJSON_AddObjectToObject(v, "usage");
	cJSON_AddNumberToObject(d, "output_tokens", (double)p->out_tokens);
	if (sse_json(&s, "message_delta", v) != 0)
		goto out;
	sse_json(&s, "message_stop", an_event("message_stop", -1));
out:
	sse_finish(&s);
	return 200;
}

/* ---- the scripted queues ---- */

static struct queue *queue_find(struct fake *f, int tool, const char *name, int create)
{
	struct queue *q;

	for (q = f->queues; q; q = q->next)
		if (q->tool == tool && !strcmp(q->name, name))
			return q;
	if (!create)
		return NULL;
	q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->name = gh_strdup(name);
	if (!q->name) {
		free(q);
		return NULL;
	}
	q->tool = tool;
	q->next = f->queues;
	f->queues = q;
	return q;
}

/* The next reply of q (caller deletes), or NULL. "repeat" replies stay queued. Lock held. */
static cJSON *queue_pop(struct queue *q)
{
	struct reply_node *n;
	cJSON *r;

	if (!q || !q->head)
		return NULL;
	n = q->head;
	if (gh_json_bool(n->reply, "repeat", 0))
		return cJSON_Duplicate(n->reply, 1);
	q->head = n->next;
	if (!q->head)
		q->tail = NULL;
	r = n->reply;
	free(n);
	return r;
}

/* The reply for a model or tool name, falling back to the "*" queue. Caller deletes;
 * NULL = none scripted. */
static cJSON *take_reply(struct fake *f, int tool, const char *name)
{
	cJSON *r;

	pthread_mutex_lock(&f->mu);
	r = queue_pop(queue_find(f, tool, name, 0));
	if (!r)
		r = queue_pop(queue_find(f, tool, "*", 0));
	pthread_mutex_unlock(&f->mu);
	return r;
}

static void queues_free(struct fake *f)
{
	struct queue *q, *qn;
	struct reply_node *n, *nn;

	for (q = f->queues; q; q = qn) {
		qn = q->next;
		for (n = q->head; n; n = nn) {
			nn = n->next;
			cJSON_Delete(n->reply);
			free(n);
		}
		free(q->name);
		free(q);
	}
	f->queues = NULL;
}

/* ---- the request log ---- */

static void log_drop_oldest(struct fake *f)
{
	struct log_ent *e = &f->log[f->log_first];

	f->log_bytes -= e->len;
	free(e->json);
	free(e->model);
	free(e->tool);
	memset(e, 0, sizeof *e);
	f->log_first = (f->log_first + 1) % GH_FAKE_LOG_MAX;
	f->log_count--;
}

static void log_clear(struct fake *f)
{
	while (f->log_count)
		log_drop_oldest(f);
	f->log_first = 0;
}

/* Records r for GET /_requests. tool is the tool name for /tools/<name>, else NULL. */
static void log_request(struct req *r, const char *tool)
{
	const char *model = gh_json_str(r->json, "model");
	struct fake *f = r->f;
	cJSON *e = cJSON_CreateObject(), *h;
	struct log_ent ent = { 0 };
	struct gh_buf name;
	char *text = NULL, head[40];
	size_t hl, tl;
	int i;

	gh_buf_init(&name, 1024);
	cJSON_AddStringToObject(e, "path", r->ri->local_uri ? r->ri->local_uri : "");
	cJSON_AddStringToObject(e, "method", r->ri->request_method);
	gh_json_add_str(e, "query", r->ri->query_string);
	h = cJSON_AddObjectToObject(e, "headers");
	for (i = 0; i < r->ri->num_headers; i++) {
		const char *n = r->ri->http_headers[i].name, *v = r->ri->http_headers[i].value;
		cJSON *old;
		struct gh_buf joined;

		gh_buf_reset(&name);
		for (; n && *n; n++)
			gh_buf_putc(&name, (char)tolower((unsigned char)*n));
		if (!name.data)
			continue;
		old = cJSON_GetObjectItemCaseSensitive(h, name.data);
		if (cJSON_IsString(old)) {
			gh_buf_init(&joined, 1u << 20);
			if (gh_buf_printf(&joined, "%s, %s", old->valuestring, v ? v : "") == 0)
				cJSON_ReplaceItemInObjectCaseSensitive(
					h, name.data, cJSON_CreateString(joined.data));
			gh_buf_free(&joined);
		} else {
			cJSON_AddStringToObject(h, name.data, v ? v : "");
		}
	}
	gh_buf_free(&name);
	if (r->json)
		cJSON_AddItemReferenceToObject(e, "body", r->json);
	else if (r->body_len)
		cJSON_AddStringToObject(e, "body", r->body);
	else
		cJSON_AddNullToObject(e, "body");
	gh_json_add_str(e, "model", model);
	text = cJSON_PrintUnformatted(e);
	cJSON_Delete(e);
	if (!text || text[0] != '{' || text[1] == '}')
		goto out;
	ent.model = model ? gh_strdup(model) : NULL;
	ent.tool = tool ? gh_strdup(tool) : NULL;
	if ((model && !ent.model) || (tool && !ent.tool))
		goto out;
	tl = strlen(text + 1);
	ent.json = malloc(sizeof head + tl + 1);
	if (!ent.json)
		goto out;

	pthread_mutex_lock(&f->mu);
	hl = (size_t)snprintf(head, sizeof head, "{\"seq\":%llu,", (unsigned long long)++f->seq);
	ent.len = hl + tl;
	if (hl < sizeof head && ent.len <= GH_FAKE_LOG_BYTES) {
		memcpy(ent.json, head, hl);
		memcpy(ent.json + hl, text + 1, tl + 1);
		while (f->log_count && (f->log_count == GH_FAKE_LOG_MAX ||
					f->log_bytes + ent.len > GH_FAKE_LOG_BYTES))
			log_drop_oldest(f);
		f->log[(f->log_first + f->log_count) % GH_FAKE_LOG_MAX] = ent;
		f->log_count++;
		f->log_bytes += ent.len;
		memset(&ent, 0, sizeof ent);
	}
	pthread_mutex_unlock(&f->mu);
out:
	free(ent.json);
	free(ent.model);
	free(ent.tool);
	cJSON_free(text);
}

/* ---- request plumbing ---- */

/* 1 when needle (lower case) occurs in hay, ignoring case. */
static int contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (!strncasecmp(hay, needle, n))
			return 1;
	return 0;
}

static void req_close(struct req *r)
{
	cJSON_Delete(r->json);
	free(r->body);
	r->json = NULL;
	r->body = NULL;
}

/* Answers 413 and closes the connection. The rest of the body is read first (up to
 * GH_FAKE_DRAIN_MAX) so the client is not reset mid-upload and gets to see the answer. */
static int too_big(struct req *r, enum kind kind, size_t seen)
{
	char tmp[16384];
	int n;

	while (seen < GH_FAKE_DRAIN_MAX && (n = mg_read(r->conn, tmp, sizeof tmp)) > 0)
		seen += (size_t)n;
	mg_disable_connection_keep_alive(r->conn);
	r->keep_alive = 0;
	return send_error(r, kind, 413, "request body is over 8 MB");
}

/* Reads the body (into r->body and, when it is JSON, r->json). Returns 0, or answers the
 * request itself (413 for a body over 8 MB) and returns the status sent. */
static int req_open(struct req *r, struct mg_connection *conn, enum kind kind)
{
	const char *cn, *expect;
	struct gh_buf b;
	struct gh_err e;
	char tmp[16384];
	size_t seen;
	int n;

	memset(r, 0, sizeof *r);
	r->t_start = mono_ns();
	r->timing = -1;
	r->conn = conn;
	r->ri = mg_get_request_info(conn);
	r->f = mg_get_user_data(mg_get_context(conn));
	cn = mg_get_header(conn, "Connection");
	r->keep_alive = strcmp(r->ri->http_version ? r->ri->http_version : "", "1.0") != 0 &&
			!(cn && contains_ci(cn, "close"));
	if (!r->keep_alive)
		mg_disable_connection_keep_alive(conn);
	if (r->f->verbose)
		fprintf(stderr, "fake_upstream: %s %s\n", r->ri->request_method,
			r->ri->local_uri ? r->ri->local_uri : "");
	expect = mg_get_header(conn, "Expect");
	if (expect && !strcasecmp(expect, "100-continue")) {
		/* CivetWeb leaves the interim answer to the handler. Refused up front, the
		 * client never sends the body, so there is nothing to drain. */
		if (r->ri->content_length > (long long)GH_FAKE_MAX_BODY)
			return too_big(r, kind, GH_FAKE_DRAIN_MAX);
		if (write_all(r, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 0)
			return 499;
	}
	if (r->ri->content_length > (long long)GH_FAKE_MAX_BODY)
		return too_big(r, kind, 0);
	gh_buf_init(&b, GH_FAKE_MAX_BODY);
	while ((n = mg_read(conn, tmp, sizeof tmp)) > 0) {
		if (gh_buf_append(&b, tmp, (size_t)n) != GH_BUF_OK) {
			seen = b.len + (size_t)n;
			gh_buf_free(&b);
			return too_big(r, kind, seen);
		}
	}
	r->body_len = b.len;
	r->body = gh_buf_detach(&b);
	gh_buf_free(&b);
	if (!r->body)
		return send_error(r, kind, 500, "out of memory");
	/* deep: a test scripts replies around arguments of gatehouse's full depth */
	if (r->body_len && gh_json_parse_opts(r->body, r->body_len, "body", GH_JSON_DEEP, &r->json,
					      &e) != GH_OK)
		r->json = NULL;
	return 0;
}

static int is_method(const struct req *r, const char *m)
{
	return !strcmp(r->ri->request_method, m);
}

/* delay_ms and close, common to every kind of reply. Returns 1 when the connection was
 * dropped and nothing more must be sent. */
static int reply_prelude(struct req *r, const cJSON *reply)
{
	nap(r->f, gh_json_int(reply, "delay_ms", 0));
	if (gh_json_bool(reply, "close", 0)) {
		drop_conn(r, 0);
		return 1;
	}
	return 0;
}

/* A streamed LLM request whose body carries GH_FAKE_TAG followed by a name gets a timing slot
 * (while there is room: /_reset empties them), started when its handler began. */
static void timing_start(struct req *r)
{
	const char *t;
	struct timing *tm;
	size_t n = 0;

	r->timing = -1;
	if (!gh_json_bool(r->json, "stream", 0) || !r->body || !(t = strstr(r->body, GH_FAKE_TAG)))
		return;
	pthread_mutex_lock(&r->f->mu);
	if (r->f->ntimings < GH_FAKE_LOG_MAX) {
		r->timing = (long)r->f->ntimings++;
		tm = &r->f->timings[r->timing];
		while (n + 1 < sizeof tm->tag && (isalnum((unsigned char)t[n]) || t[n] == '-'))
			n++;
		memcpy(tm->tag, t, n);
		tm->tag[n] = '\0';
		tm->recv_ns = r->t_start;
		tm->first_ns = 0;
	}
	pthread_mutex_unlock(&r->f->mu);
}

/* The first text of a timed request's answer is being written. */
static void timing_text(struct sse *s)
{
	struct req *r = s->r;

	if (s->text_seen)
		return;
	s->text_seen = 1;
	if (r->timing < 0)
		return;
	pthread_mutex_lock(&r->f->mu);
	if ((size_t)r->timing < r->f->ntimings)
		r->f->timings[r->timing].first_ns = mono_ns();
	pthread_mutex_unlock(&r->f->mu);
}

/* Answers POST /v1/chat/completions or POST /v1/messages. */
static int handle_llm(struct mg_connection *conn, enum kind kind)
{
	struct req r;
	struct plan p;
	cJSON *reply = NULL;
	const cJSON *hdrs;
	const char *model;
	char more[64];
	uint64_t n;
	int rc;

	rc = req_open(&r, conn, kind);
	if (rc)
		return rc;
	log_request(&r, NULL);
	if (!is_method(&r, "POST")) {
		rc = send_error(&r, kind, 405, "use POST");
		goto out;
	}
	if (!cJSON_IsObject(r.json)) {
		rc = send_error(&r, kind, 400, "the request body must be a JSON object");
		goto out;
	}
	timing_start(&r);
	model = gh_json_str(r.json, "model");
	reply = take_reply(r.f, 0, model ? model : "");
	if (reply_prelude(&r, reply)) {
		rc = 499;
		goto out;
	}
	if (cJSON_GetObjectItemCaseSensitive(reply, "status") ||
	    cJSON_GetObjectItemCaseSensitive(reply, "body")) {
		rc = send_custom(&r, kind, reply);
		goto out;
	}
	if (plan_build(&r, reply, kind, &p) != 0) {
		plan_free(&p);
		rc = send_error(&r, kind, 500, "out of memory");
		goto out;
	}
	hdrs = cJSON_GetObjectItemCaseSensitive(reply, "headers");
	n = new_id(r.f);
	snprintf(more, sizeof more, "%s: req_%llu\r\n",
		 kind == KIND_ANTHROPIC ? "request-id" : "x-request-id", (unsigned long long)n);
	if (!model)
		model = GH_FAKE_DEFAULT_MODEL;
	if (gh_json_bool(r.json, "stream", 0))
		rc = kind == KIND_ANTHROPIC ? anthropic_stream(&r, &p, model, more, hdrs, n)
					    : openai_stream(&r, &p, model, more, hdrs, n);
	else
		rc = kind == KIND_ANTHROPIC ? anthropic_json(&r, &p, model, more, hdrs, n)
					    : openai_json(&r, &p, model, more, hdrs, n);
	plan_free(&p);
out:
	cJSON_Delete(reply);
	req_close(&r);
	return rc;
}

static int handle_chat(struct mg_connection *conn, void *cbdata)
{
	return handle_llm(conn, KIND_OPENAI);
}

/* POST /v1/messages/count_tokens: {"input_tokens": words of messages and
 * system}. */
static int handle_count_tokens(struct mg_connection *conn)
{
	struct req r;
	cJSON *o;
	int rc;

	rc = req_open(&r, conn, KIND_ANTHROPIC);
	if (rc)
		return rc;
	log_request(&r, NULL);
	if (!is_method(&r, "POST") || !cJSON_IsObject(r.json)) {
		rc = send_error(&r, KIND_ANTHROPIC, 400, "the request body must be a JSON object");
	} else {
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "input_tokens",
					(double)(words_in(cJSON_GetObjectItemCaseSensitive(r.json,
											  "messages"), 0) +
						 words_in(cJSON_GetObjectItemCaseSensitive(r.json,
											  "system"), 1)));
		rc = send_json(&r, 200, o, NULL, NULL);
		cJSON_Delete(o);
	}
	req_close(&r);
	return rc;
}

static int handle_messages(struct mg_connection *conn, void *cbdata)
{
	const struct mg_request_info *ri = mg_get_request_info(conn);

	if (ri->local_uri && !strcmp(ri->local_uri, "/v1/messages/count_tokens"))
		return handle_count_tokens(conn);
	return handle_llm(conn, KIND_ANTHROPIC);
}

/* GET /v1/models, in Anthropic's shape when the request carries anthropic-version. */
static int handle_models(struct mg_connection *conn, void *cbdata)
{
	struct req r;
	cJSON *root, *m;
	int rc, an;

	rc = req_open(&r, conn, KIND_OPENAI);
	if (rc)
		return rc;
	log_request(&r, NULL);
	an = mg_get_header(conn, "anthropic-version") != NULL;
	if (!is_method(&r, "GET")) {
		rc = send_error(&r, an ? KIND_ANTHROPIC : KIND_OPENAI, 405, "use GET");
		goto out;
	}
	root = cJSON_CreateObject();
	m = cJSON_CreateObject();
	if (an) {
		cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
		cJSON_AddStringToObject(m, "type", "model");
		cJSON_AddStringToObject(m, "id", GH_FAKE_DEFAULT_MODEL);
		cJSON_AddStringToObject(m, "display_name", "Fake Model");
		cJSON_AddStringToObject(m, "created_at", "2025-01-01T00:00:00Z");
		cJSON_AddBoolToObject(root, "has_more", 0);
		cJSON_AddStringToObject(root, "first_id", GH_FAKE_DEFAULT_MODEL);
		cJSON_AddStringToObject(root, "last_id", GH_FAKE_DEFAULT_MODEL);
	} else {
		cJSON_AddStringToObject(root, "object", "list");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
		cJSON_AddStringToObject(m, "id", GH_FAKE_DEFAULT_MODEL);
		cJSON_AddStringToObject(m, "object", "model");
		cJSON_AddNumberToObject(m, "created", 1735689600);
		cJSON_AddStringToObject(m, "owned_by", "gatehouse-fake");
	}
	rc = send_json(&r, 200, root, NULL, NULL);
	cJSON_Delete(root);
out:
	req_close(&r);
	return rc;
}

/* POST /tools/<name>: the fake HTTP tool server. */
static int handle_tool(struct mg_connection *conn, void *cbdata)
{
	const char *uri = mg_get_request_info(conn)->local_uri, *name, *loc;
	const cJSON *hdrs;
	struct gh_buf o;
	struct req r;
	cJSON *reply = NULL, *root;
	char *more = NULL;
	int64_t size, status;
	int rc;

	rc = req_open(&r, conn, KIND_TOOL);
	if (rc)
		return rc;
	name = uri && !strncmp(uri, "/tools/", 7) ? uri + 7 : "";
	if (!*name) {
		rc = send_error(&r, KIND_TOOL, 404, "no tool name in the path");
		goto out;
	}
	log_request(&r, name);
	reply = take_reply(r.f, 1, name);
	hdrs = cJSON_GetObjectItemCaseSensitive(reply, "headers");
	if (reply_prelude(&r, reply)) {
		rc = 499;
		goto out;
	}
	loc = gh_json_str(reply, "redirect");
	if (loc && header_value_ok(loc)) {
		status = gh_json_int(reply, "status", 302);
		if (status < 300 || status > 399)
			status = 302;
		gh_buf_init(&o, 64 + strlen(loc));
		if (gh_buf_printf(&o, "Location: %s\r\n", loc) == 0)
			more = gh_buf_detach(&o);
		gh_buf_free(&o);
		root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "redirect", loc);
		rc = send_json(&r, (int)status, root, more, hdrs);
		cJSON_Delete(root);
		goto out;
	}
	size = gh_json_int(reply, "size", -1);
	if (size >= 0) {
		status = gh_json_int(reply, "status", 200);
		if (status < 200 || status > 599)
			status = 500;
		if (size > (int64_t)GH_FAKE_MAX_PAD)
			size = GH_FAKE_MAX_PAD;
		gh_buf_init(&o, GH_FAKE_MAX_PAD + 64);
		gh_buf_puts(&o, "{\"ok\":true,\"pad\":\"");
		while (o.len + 2 < (size_t)size && gh_buf_putc(&o, 'x') == GH_BUF_OK)
			;
		gh_buf_puts(&o, "\"}");
		rc = send_full(&r, (int)status, "application/json", o.data, o.len, NULL, hdrs);
		gh_buf_free(&o);
		goto out;
	}
	if (cJSON_GetObjectItemCaseSensitive(reply, "status") ||
	    cJSON_GetObjectItemCaseSensitive(reply, "body")) {
		rc = send_custom(&r, KIND_TOOL, reply);
		goto out;
	}
	root = cJSON_CreateObject();
	cJSON_AddBoolToObject(root, "ok", 1);
	cJSON_AddStringToObject(root, "tool", name);
	if (r.json)
		cJSON_AddItemReferenceToObject(root, "args", r.json);
	else if (r.body_len)
		cJSON_AddStringToObject(root, "args", r.body);
	else
		cJSON_AddNullToObject(root, "args");
	rc = send_json(&r, 200, root, NULL, hdrs);
	cJSON_Delete(root);
out:
	free(more);
	cJSON_Delete(reply);
	req_close(&r);
	return rc;
}

/* ---- control endpoints ---- */

static int send_ok(struct req *r, cJSON *extra_taken)
{
	cJSON *root = extra_taken ? extra_taken : cJSON_CreateObject();
	int rc;

	cJSON_AddBoolToObject(root, "ok", 1);
	rc = send_json(r, 200, root, NULL, NULL);
	cJSON_Delete(root);
	return rc;
}

/* POST /_script {"model"|"tool": name, "replies": [REPLY, ...]} */
static int handle_script(struct mg_connection *conn, void *cbdata)
{
	const char *model, *tool, *name;
	struct reply_node *first = NULL, *last = NULL, *nd;
	struct queue *q;
	cJSON *replies, *it, *res;
	struct req r;
	int rc, count = 0;

	rc = req_open(&r, conn, KIND_CONTROL);
	if (rc)
		return rc;
	if (!is_method(&r, "POST")) {
		rc = send_error(&r, KIND_CONTROL, 405, "use POST");
		goto out;
	}
	model = gh_json_str(r.json, "model");
	tool = gh_json_str(r.json, "tool");
	replies = cJSON_GetObjectItemCaseSensitive(r.json, "replies");
	if (!cJSON_IsObject(r.json) || (!model == !tool) || !cJSON_IsArray(replies)) {
		rc = send_error(&r, KIND_CONTROL, 400,
				"expected {\"model\" or \"tool\": name, \"replies\": [...]}");
		goto out;
	}
	cJSON_ArrayForEach(it, replies) {
		if (!cJSON_IsObject(it)) {
			rc = send_error(&r, KIND_CONTROL, 400, "each reply must be an object");
			goto out;
		}
	}
	name = model ? model : tool;
	while (replies->child) {
		it = cJSON_DetachItemViaPointer(replies, replies->child);
		nd = calloc(1, sizeof *nd);
		if (!nd) {
			cJSON_Delete(it);
			break;
		}
		nd->reply = it;
		if (last)
			last->next = nd;
		else
			first = nd;
		last = nd;
		count++;
	}
	pthread_mutex_lock(&r.f->mu);
	q = queue_find(r.f, tool != NULL, name, 1);
	if (q && first) {
		if (q->tail)
			q->tail->next = first;
		else
			q->head = first;
		q->tail = last;
		first = NULL;
	}
	pthread_mutex_unlock(&r.f->mu);
	if (first) {
		for (; first; first = nd) {
			nd = first->next;
			cJSON_Delete(first->reply);
			free(first);
		}
		rc = send_error(&r, KIND_CONTROL, 500, "out of memory");
		goto out;
	}
	res = cJSON_CreateObject();
	cJSON_AddNumberToObject(res, "queued", count);
	rc = send_ok(&r, res);
out:
	req_close(&r);
	return rc;
}

/* POST /_reset: empties every queue and the request log. */
static int handle_reset(struct mg_connection *conn, void *cbdata)
{
	struct req r;
	int rc = req_open(&r, conn, KIND_CONTROL);

	if (rc)
		return rc;
	if (!is_method(&r, "POST")) {
		rc = send_error(&r, KIND_CONTROL, 405, "use POST");
		goto out;
	}
	pthread_mutex_lock(&r.f->mu);
	queues_free(r.f);
	log_clear(r.f);
	r.f->ntimings = 0;
	pthread_mutex_unlock(&r.f->mu);
	rc = send_ok(&r, NULL);
out:
	req_close(&r);
	return rc;
}

/* Sends the JSON list a control endpoint built in o (then freed), or 500 when building it
 * failed (bad). */
static int send_list(struct req *r, struct gh_buf *o, int bad)
{
	int rc = bad ? send_error(r, KIND_CONTROL, 500, "out of memory")
		     : send_full(r, 200, "application/json", o->data, o->len, NULL, NULL);

	gh_buf_free(o);
	return rc;
}

/* GET /_requests[?model=M|tool=T]: the recorded requests, oldest first. */
static int handle_requests(struct mg_connection *conn, void *cbdata)
{
	char model[GH_FAKE_NAME_MAX], tool[GH_FAKE_NAME_MAX];
	const char *qs;
	struct gh_buf o;
	struct log_ent *e;
	struct req r;
	int rc, hm, ht, first = 1, bad = 0;
	size_t i;

	rc = req_open(&r, conn, KIND_CONTROL);
	if (rc)
		return rc;
	if (!is_method(&r, "GET")) {
		rc = send_error(&r, KIND_CONTROL, 405, "use GET");
		goto out;
	}
	qs = r.ri->query_string ? r.ri->query_string : "";
	hm = mg_get_var(qs, strlen(qs), "model", model, sizeof model);
	ht = mg_get_var(qs, strlen(qs), "tool", tool, sizeof tool);
	if (hm < -1 || ht < -1) {
		rc = send_error(&r, KIND_CONTROL, 400, "model/tool name too long");
		goto out;
	}
	gh_buf_init(&o, GH_FAKE_LOG_BYTES + 2 * GH_FAKE_LOG_MAX + 16);
	gh_buf_putc(&o, '[');
	pthread_mutex_lock(&r.f->mu);
	for (i = 0; i < r.f->log_count; i++) {
		e = &r.f->log[(r.f->log_first + i) % GH_FAKE_LOG_MAX];
		if (hm >= 0 && (!e->model || strcmp(e->model, model)))
			continue;
		if (ht >= 0 && (!e->tool || strcmp(e->tool, tool)))
			continue;
		if ((!first && gh_buf_putc(&o, ',')) || gh_buf_append(&o, e->json, e->len))
			bad = 1;
		first = 0;
	}
	pthread_mutex_unlock(&r.f->mu);
	bad |= gh_buf_putc(&o, ']');
	rc = send_list(&r, &o, bad);
out:
	req_close(&r);
	return rc;
}

/* GET /_timings: every timed request since the last /_reset or POST /_timings, oldest
 * first: [{"tag", "recv_ns", "first_ns"}] (first_ns 0: no text went out). */
static int handle_timings(struct mg_connection *conn, void *cbdata)
{
	struct gh_buf o;
	struct req r;
	size_t i;
	int rc, bad = 0;

	rc = req_open(&r, conn, KIND_CONTROL);
	if (rc)
		return rc;
	if (is_method(&r, "POST")) {
		/* POST empties them (a benchmark's next phase), keeping the scripts */
		pthread_mutex_lock(&r.f->mu);
		r.f->ntimings = 0;
		pthread_mutex_unlock(&r.f->mu);
		rc = send_ok(&r, NULL);
		goto out;
	}
	if (!is_method(&r, "GET")) {
		rc = send_error(&r, KIND_CONTROL, 405, "use GET or POST");
		goto out;
	}
	gh_buf_init(&o, (size_t)GH_FAKE_LOG_MAX * (GH_FAKE_TAG_MAX + 96) + 16);
	bad |= gh_buf_putc(&o, '[');
	pthread_mutex_lock(&r.f->mu);
	for (i = 0; i < r.f->ntimings; i++) {
		const struct timing *t = &r.f->timings[i];

		bad |= gh_buf_printf(&o, "%s{\"tag\":", i ? "," : "");
		bad |= gh_buf_json_str(&o, t->tag);
		bad |= gh_buf_printf(&o, ",\"recv_ns\":%lld,\"first_ns\":%lld}",
				     (long long)t->recv_ns, (long long)t->first_ns);
	}
	pthread_mutex_unlock(&r.f->mu);
	bad |= gh_buf_putc(&o, ']');
	rc = send_list(&r, &o, bad);
out:
	req_close(&r);
	return rc;
}

static int handle_health(struct mg_connection *conn, void *cbdata)
{
	struct req r;
	int rc = req_open(&r, conn, KIND_CONTROL);

	if (rc)
		return rc;
	rc = send_ok(&r, NULL);
	req_close(&r);
	return rc;
}

static int handle_other(struct mg_connection *conn, void *cbdata)
{
	struct req r;
	int rc = req_open(&r, conn, KIND_OPENAI);

	if (rc)
		return rc;
	rc = send_error(&r, KIND_OPENAI, 404, "no such route on the fake upstream");
	req_close(&r);
	return rc;
}

static int on_log(const struct mg_connection *conn, const char *message)
{
	const struct fake *f = mg_get_user_data(mg_get_context(conn));

	if (f && f->verbose)
		fprintf(stderr, "fake_upstream: civetweb: %s\n", message);
	return 1;
}

/* ---- main ---- */

/* CivetWeb's listener checks for mg_stop only between polls that last up to two seconds; a
 * connection wakes it. Knocks until mg_stop has returned (stop_mu's "stopping" becomes 2),
 * at most for five seconds. */
static void *knock(void *arg)
{
	struct fake *f = arg;
	struct sockaddr_in a;
	struct timespec ts;
	int i, fd, done = 0;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)f->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < 250 && !done; i++) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
				done = 1; /* the listener is gone */
			close(fd);
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 20000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&f->stop_mu);
		if (f->stopping < 2)
			pthread_cond_timedwait(&f->stop_cv, &f->stop_mu, &ts);
		if (f->stopping >= 2)
			done = 1;
		pthread_mutex_unlock(&f->stop_mu);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: fake_upstream [--listen 127.0.0.1:PORT] [--threads N] "
			"[--port-file FILE] [--verbose]\n");
}

static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	FILE *fp;
	int n;

	n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof tmp)
		return -1;
	fp = fopen(tmp, "w");
	if (!fp)
		return -1;
	n = fprintf(fp, "%d\n", port);
	if (fclose(fp) != 0 || n < 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Sizes the descriptor table for a connection per worker (and some room
 * besides) before the workers start, as gatehouse does (serve.c,
 * reserve_descriptors): a table that grows while threads serve holds the
 * accept that needed the room for an RCU grace period, and the streams
 * opened meanwhile would carry that stall into the direct figures. */
static void size_descriptor_table(int64_t threads)
{
	struct rlimit rl;
	rlim_t top = (rlim_t)threads * 2 + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	gh_fd_table_grow((int)(rl.rlim_cur < top ? rl.rlim_cur : top));
}

int main(int argc, char **argv)
{
	static struct fake f; /* large (the log ring); static so it is not on the stack */
	const char *listen = "127.0.0.1:0", *port_file = NULL, *pstr;
	char ports_opt[32], threads_opt[16];
	const char *opts[11];
	struct mg_callbacks cb;
	struct mg_server_port sp[4];
	struct mg_context *ctx;
	pthread_condattr_t ca;
	pthread_t knocker;
	sigset_t set;
	int64_t port = 0, threads = 64;
	int i, sig, np, knocking, rc = 1;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			listen = argv[++i];
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			if (gh_parse_i64(argv[++i], 1, 1024, &threads) != 0) {
				fprintf(stderr, "fake_upstream: --threads wants 1..1024\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--port-file") && i + 1 < argc) {
			port_file = argv[++i];
		} else if (!strcmp(argv[i], "--verbose")) {
			f.verbose = 1;
		} else {
			usage();
			return 2;
		}
	}
	if (!strncmp(listen, "127.0.0.1:", 10))
		pstr = listen + 10;
	else if (!strncmp(listen, "localhost:", 10))
		pstr = listen + 10;
	else
		pstr = listen;
	if (gh_parse_i64(pstr, 0, 65535, &port) != 0) {
		fprintf(stderr, "fake_upstream: --listen wants 127.0.0.1:PORT (loopback only)\n");
		return 2;
	}
	snprintf(ports_opt, sizeof ports_opt, "127.0.0.1:%d", (int)port);
	snprintf(threads_opt, sizeof threads_opt, "%d", (int)threads);

	/* Workers inherit the blocked signals; only main's sigwait takes them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	size_descriptor_table(threads);

	pthread_mutex_init(&f.mu, NULL);
	pthread_mutex_init(&f.stop_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f.stop_cv, &ca);
	pthread_condattr_destroy(&ca);

	i = 0;
	opts[i++] = "listening_ports";
	opts[i++] = ports_opt;
	opts[i++] = "num_threads";
	opts[i++] = threads_opt;
	opts[i++] = "tcp_nodelay";
	opts[i++] = "1";
	opts[i++] = "enable_keep_alive";
	opts[i++] = "yes";
	/* longer than a client's own idle timeout (Node's fetch keeps a
	 * connection 4 s): with CivetWeb's 500 ms a test that paused under
	 * load reused a connection the fake had just closed */
	opts[i++] = "keep_alive_timeout_ms";
	opts[i++] = "10000";
	opts[i++] = NULL;
	memset(&cb, 0, sizeof cb);
	cb.log_message = on_log;
	mg_init_library(0);
	ctx = mg_start(&cb, &f, opts);
	if (!ctx) {
		fprintf(stderr, "fake_upstream: cannot listen on %s\n", ports_opt);
		goto out_lib;
	}
	mg_set_request_handler(ctx, "/v1/chat/completions", handle_chat, NULL);
	mg_set_request_handler(ctx, "/v1/messages", handle_messages, NULL);
	mg_set_request_handler(ctx, "/v1/models", handle_models, NULL);
	mg_set_request_handler(ctx, "/tools", handle_tool, NULL);
	mg_set_request_handler(ctx, "/_script", handle_script, NULL);
	mg_set_request_handler(ctx, "/_reset", handle_reset, NULL);
	mg_set_request_handler(ctx, "/_requests", handle_requests, NULL);
	mg_set_request_handler(ctx, "/_timings", handle_timings, NULL);
	mg_set_request_handler(ctx, "/_health", handle_health, NULL);
	mg_set_request_handler(ctx, "**", handle_other, NULL);

	memset(sp, 0, sizeof sp);
	np = mg_get_server_ports(ctx, (int)GH_ARRAY_LEN(sp), sp);
	if (np < 1 || sp[0].port <= 0) {
		fprintf(stderr, "fake_upstream: cannot tell the listening port\n");
		goto out_stop;
	}
	pthread_mutex_lock(&f.mu);
	f.port = sp[0].port;
	pthread_mutex_unlock(&f.mu);
	if (port_file && write_port_file(port_file, f.port) != 0) {
		fprintf(stderr, "fake_upstream: cannot write %s: %s\n", port_file, strerror(errno));
		goto out_stop;
	}
	printf("fake_upstream listening on %d\n", f.port);
	fflush(stdout);

	sig = 0;
	while (sigwait(&set, &sig) != 0)
		;
	if (f.verbose)
		fprintf(stderr, "fake_upstream: signal %d, stopping\n", sig);
	rc = 0;
out_stop:
	pthread_mutex_lock(&f.stop_mu);
	f.stopping = 1;
	pthread_cond_broadcast(&f.stop_cv);
	pthread_mutex_unlock(&f.stop_mu);
	knocking = f.port > 0 && pthread_create(&knocker, NULL, knock, &f) == 0;
	mg_stop(ctx);
	pthread_mutex_lock(&f.stop_mu);
	f.stopping = 2;
	pthread_cond_broadcast(&f.stop_cv);
	pthread_mutex_unlock(&f.stop_mu);
	if (knocking)
		pthread_join(knocker, NULL);
out_lib:
	mg_exit_library();
	queues_free(&f);
	log_clear(&f);
	pthread_cond_destroy(&f.stop_cv);
	pthread_mutex_destroy(&f.stop_mu);
	pthread_mutex_destroy(&f.mu);
	return rc;
}
