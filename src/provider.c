/*
 * provider.c - gh_provider_chat() picks the provider a config entry names,
 * and the machinery provider_openai.c and provider_anthropic.c share (see
 * provider_int.h): one HTTP exchange through upstream.c, reading an SSE
 * reply through sse.c with bounded lines and events, assembling streamed
 * text and tool calls within the reply's byte budget, and turning an
 * upstream's error reply into "provider NAME (TYPE): HTTP 500: message".
 * Provider keys are scrubbed from every error message on the way out.
 *
 * Stateless: every call works on its caller's structures, so any number of
 * threads may chat at once (each transfer with curl handles of its own
 * from the pool, upstream.h).
 */
#include "provider.h"

#include "json.h"
#include "metrics.h"
#include "provider_int.h"
#include "sse.h"
#include "upstream.h"
#include "util.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include <sodium.h>

#define URL_MAX 8192
#define UPSTREAM_MSG_MAX 200   /* bytes of a non-JSON error body quoted */

static void scrub_text(const struct gh_provider_conf *conf, char *msg, size_t cap);

void gh_chat_response_clear(struct gh_chat_response *r)
{
	size_t i;

	if (!r)
		return;
	free(r->text);
	for (i = 0; i < r->ncalls; i++) {
		free(r->calls[i].id);
		free(r->calls[i].name);
		cJSON_Delete(r->calls[i].args);
		free(r->calls[i].raw_args);
	}
	free(r->calls);
	cJSON_Delete(r->reasoning);
	memset(r, 0, sizeof(*r));
}

/* The caller's events, passed through, noting when the first token (text,
 * reasoning or a tool call's delta) arrived: the time to first token. */
struct first_token {
	const struct gh_chat_events *in;
	int64_t at_ns;                    /* 0 until then */
};

static int ft_text(void *ud, const char *text, size_t len)
{
	struct first_token *f = ud;

	if (!f->at_ns)
		f->at_ns = gh_mono_ns();
	return f->in->text_delta(f->in->ud, text, len);
}

static int ft_tool(void *ud, int index, const char *id, const char *name, const char *args)
{
	struct first_token *f = ud;

	if (!f->at_ns)
		f->at_ns = gh_mono_ns();
	return f->in->tool_delta(f->in->ud, index, id, name, args);
}

static int ft_reasoning(void *ud, const char *text, size_t len, const char *signature)
{
	struct first_token *f = ud;

	if (!f->at_ns)
		f->at_ns = gh_mono_ns();
	return f->in->reasoning_delta(f->in->ud, text, len, signature);
}

static int ft_tick(void *ud)
{
	struct first_token *f = ud;

	return f->in->tick(f->in->ud);
}

static int ft_batch(void *ud, int open)
{
	struct first_token *f = ud;

	return f->in->batch(f->in->ud, open);
}

static void ft_sent(void *ud)
{
	struct first_token *f = ud;

	f->in->sent(f->in->ud);
}

static int ft_relay(void *ud, int op)
{
	struct first_token *f = ud;

	return f->in->relay(f->in->ud, op);
}

static enum gh_metrics_outcome outcome_of(enum gh_code rc)
{
	return rc == GH_OK ? GH_MO_OK : rc == GH_E_TIMEOUT ? GH_MO_TIMEOUT
	       : rc == GH_E_RATELIMIT ? GH_MO_RATE_LIMITED : rc == GH_E_CANCELLED ? GH_MO_CANCELLED
	       : GH_MO_ERROR;
}

static const char *type_name(enum gh_provider_type t)
{
	return t == GH_PROVIDER_OPENAI ? "openai" : t == GH_PROVIDER_ANTHROPIC ? "anthropic" : "mock";
}

enum gh_code gh_provider_chat(const struct gh_provider_conf *conf,
			      const struct gh_chat_request *req,
			      const struct gh_chat_events *events,
			      struct gh_chat_response *out, struct gh_err *e)
{
	static const struct gh_chat_events none;
	const struct gh_provider_ops *ops;
	struct first_token ft = {events ? events : &none, 0};
	struct gh_chat_events ev = *ft.in;
	int64_t t0 = gh_mono_ns();
	enum gh_code rc;

	switch (conf->type) {
	case GH_PROVIDER_OPENAI:
		ops = &gh_provider_openai;
		break;
	case GH_PROVIDER_ANTHROPIC:
		ops = &gh_provider_anthropic;
		break;
	case GH_PROVIDER_MOCK:
		ops = &gh_provider_mock;
		break;
	default:
		return gh_err_set(e, GH_E_INTERNAL, "provider %s: unknown type", conf->name);
	}
	if (req->error_detail && req->error_detail_cap)
		req->error_detail[0] = '\0';
	ev.ud = &ft;
	ev.text_delta = ft.in->text_delta ? ft_text : NULL;
	ev.tool_delta = ft.in->tool_delta ? ft_tool : NULL;
	ev.reasoning_delta = ft.in->reasoning_delta ? ft_reasoning : NULL;
	ev.tick = ft.in->tick ? ft_tick : NULL;
	ev.batch = ft.in->batch ? ft_batch : NULL;
	ev.sent = ft.in->sent ? ft_sent : NULL;
	ev.relay = ft.in->relay ? ft_relay : NULL;
	rc = ops->wire ? gh_provider_http_chat(ops->wire, conf, req, &ev, out, e)
		       : ops->chat(conf, req, &ev, out, e);
	gh_metrics_upstream(conf->name, type_name(conf->type), outcome_of(rc), gh_mono_ns() - t0,
			    ft.at_ns ? ft.at_ns - t0 : -1, rc == GH_OK ? out->input_tokens : -1,
			    rc == GH_OK ? out->output_tokens : -1);
	if (rc != GH_OK) {
		gh_chat_response_clear(out);
		gh_provider_scrub(conf, e);
		if (req->error_detail && req->error_detail_cap) {
			/* failures the upstream did not word have no more to tell */
			if (!req->error_detail[0] && e)
				gh_strlcpy(req->error_detail, e->msg, req->error_detail_cap);
			scrub_text(conf, req->error_detail, req->error_detail_cap);
		}
	}
	return rc;
}

void gh_provider_scrub(const struct gh_provider_conf *conf, struct gh_err *e)
{
	if (e)
		scrub_text(conf, e->msg, sizeof(e->msg));
}

/* Replaces conf's api_key in msg (cap bytes) by a mask. */
static void scrub_text(const struct gh_provider_conf *conf, char *msg, size_t cap)
{
	static const char mask[] = "[redacted]";
	char tmp[GH_ERR_MSG_MAX];
	const char *key = conf ? conf->api_key : NULL, *p, *hit;
	size_t klen, o = 0;

	if (!msg || !key || !*key || !strstr(msg, key))
		return;
	if (cap > sizeof(tmp))
		cap = sizeof(tmp);
	klen = strlen(key);
	for (p = msg; (hit = strstr(p, key)); p = hit + klen) {
		size_t n = (size_t)(hit - p);

		if (o + n + sizeof(mask) > sizeof(tmp))
			break;
		memcpy(tmp + o, p, n);
		o += n;
		memcpy(tmp + o, mask, sizeof(mask) - 1);
		o += sizeof(mask) - 1;
	}
	if (hit) {
		/* no room for the rest: cut the message at the key */
		tmp[o] = '\0';
	} else {
		gh_strlcpy(tmp + o, p, sizeof(tmp) - o);
	}
	gh_strlcpy(msg, tmp, cap);
}

/* ---- streamed replies ---- */

void gh_provider_stream_init(struct gh_provider_stream *st, const struct gh_provider_conf *conf,
			     const char *type, const struct gh_chat_request *req,
			     const struct gh_chat_events *ev)
{
	size_t cap = conf->max_response_bytes > 0 ? (size_t)conf->max_response_bytes : 8u << 20;

	memset(st, 0, sizeof(*st));
	st->conf = conf;
	st->ev = ev;
	st->type = type;
	st->detail = req->error_detail_cap ? req->error_detail : NULL;
	st->detail_cap = st->detail ? req->error_detail_cap : 0;
	st->uerr = req->upstream_error;
	st->budget = cap;
	gh_buf_init(&st->text, cap);
	st->finish = GH_FINISH_OTHER;
	gh_err_clear(&st->err);
}

void gh_provider_stream_free(struct gh_provider_stream *st)
{
	size_t i;

	gh_buf_free(&st->text);
	for (i = 0; i < st->ncalls; i++) {
		free(st->calls[i].id);
		free(st->calls[i].name);
		gh_buf_free(&st->calls[i].args);
	}
	free(st->calls);
	st->calls = NULL;
	st->ncalls = st->alloc = 0;
	cJSON_Delete(st->reasoning);
	st->reasoning = NULL;
}

void gh_provider_note_error(struct gh_provider_stream *st, int status, const cJSON *body)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(body, "error");
	const char *type, *msg;

	if (!st->uerr)
		return;
	if (!cJSON_IsObject(err))
		err = body;
	type = gh_json_str(err, "type");
	msg = gh_json_str(err, "message");
	memset(st->uerr, 0, sizeof(*st->uerr));
	st->uerr->status = status;
	gh_strlcpy(st->uerr->type, type ? type : "", sizeof(st->uerr->type));
	gh_strlcpy(st->uerr->message, msg ? msg : "", sizeof(st->uerr->message));
	scrub_text(st->conf, st->uerr->message, sizeof(st->uerr->message));
}

/* Writes the whole story of a failure to st->detail, when there is one. */
static void detail(struct gh_provider_stream *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void detail(struct gh_provider_stream *st, const char *fmt, ...)
{
	va_list ap;

	if (!st->detail)
		return;
	va_start(ap, fmt);
	vsnprintf(st->detail, st->detail_cap, fmt, ap);
	va_end(ap);
}

/* Records the stream's first failure: tenants see "provider NAME (TYPE): "
 * + what, or + the formatted text when what is NULL; the detail operators
 * see has the formatted text. Returns 1 (stop). */
__attribute__((format(printf, 3, 0)))
static int vfail(struct gh_provider_stream *st, const char *what, const char *fmt, va_list ap)
{
	char msg[GH_ERR_MSG_MAX];

	if (st->err.code != GH_OK)
		return 1;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (what)
		detail(st, "provider %s (%s): %s", st->conf->name, st->type, msg);
	gh_err_set(&st->err, GH_E_UPSTREAM, "provider %s (%s): %s", st->conf->name, st->type,
		   what ? what : msg);
	return 1;
}

int gh_provider_stream_fail(struct gh_provider_stream *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(st, NULL, fmt, ap);
	va_end(ap);
	return 1;
}

int gh_provider_stream_fail_upstream(struct gh_provider_stream *st, const char *what,
				     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(st, what, fmt, ap);
	va_end(ap);
	return 1;
}

static int spend(struct gh_provider_stream *st, size_t n)
{
	if (n > st->budget)
		return gh_provider_stream_fail(st, "reply over %lld bytes",
					       (long long)st->conf->max_response_bytes);
	st->budget -= n;
	return 0;
}

int gh_provider_stream_text(struct gh_provider_stream *st, const char *s, size_t n)
{
	if (!n)
		return 0;
	if (spend(st, n))
		return 1;
	if (gh_buf_append(&st->text, s, n) != GH_BUF_OK)
		return gh_provider_stream_fail(st, "out of memory");
	if (st->ev->text_delta && st->ev->text_delta(st->ev->ud, s, n)) {
		st->cancelled = 1;
		return 1;
	}
	return gh_provider_stream_first_out(st);
}

int gh_provider_stream_first_out(struct gh_provider_stream *st)
{
	if (st->first_out)
		return 0;
	st->first_out = 1;
	if (!st->in_batch || !st->ev->batch)
		return 0;
	if (st->ev->batch(st->ev->ud, 0) || st->ev->batch(st->ev->ud, 1)) {
		st->cancelled = 1;
		return 1;
	}
	return 0;
}

struct gh_provider_acc *gh_provider_stream_call(struct gh_provider_stream *st, int key)
{
	size_t i;

	for (i = st->ncalls; i > 0; i--)
		if (st->calls[i - 1].key == key)
			return &st->calls[i - 1];
	return NULL;
}

int gh_provider_stream_call_start(struct gh_provider_stream *st, int key, const char *id,
				  const char *name, struct gh_provider_acc **out)
{
	struct gh_provider_acc *a;

	*out = NULL;
	if (!id)
		id = "";
	if (!name)
		name = "";
	if (st->ncalls >= GH_PROVIDER_MAX_CALLS)
		return gh_provider_stream_fail(st, "more than %d tool calls in one reply",
					       GH_PROVIDER_MAX_CALLS);
	if (spend(st, strlen(id) + strlen(name)))
		return 1;
	if (st->ncalls == st->alloc) {
		size_t n = st->alloc ? st->alloc * 2 : 4;
		struct gh_provider_acc *v = realloc(st->calls, n * sizeof(*v));

		if (!v)
			return gh_provider_stream_fail(st, "out of memory");
		st->calls = v;
		st->alloc = n;
	}
	a = &st->calls[st->ncalls];
	memset(a, 0, sizeof(*a));
	a->key = key;
	gh_buf_init(&a->args, st->text.cap);
	a->id = strdup(id);
	a->name = strdup(name);
	if (!a->id || !a->name) {
		free(a->id);
		free(a->name);
		return gh_provider_stream_fail(st, "out of memory");
	}
	st->ncalls++;
	*out = a;
	if (st->ev->tool_delta &&
	    st->ev->tool_delta(st->ev->ud, (int)(st->ncalls - 1), a->id, a->name, "")) {
		st->cancelled = 1;
		return 1;
	}
	return 0;
}

int gh_provider_stream_call_args(struct gh_provider_stream *st, struct gh_provider_acc *a,
				 const char *frag)
{
	size_t n = frag ? strlen(frag) : 0;

	if (!n)
		return 0;
	if (spend(st, n))
		return 1;
	if (gh_buf_append(&a->args, frag, n) != GH_BUF_OK)
		return gh_provider_stream_fail(st, "out of memory");
	if (st->ev->tool_delta &&
	    st->ev->tool_delta(st->ev->ud, (int)(a - st->calls), NULL, NULL, frag)) {
		st->cancelled = 1;
		return 1;
	}
	return 0;
}

enum gh_code gh_provider_call_set(struct gh_tool_call *c, const char *id, const char *name,
				  const char *args, size_t args_len)
{
	struct gh_err ignore;
	size_t i = 0;

	memset(c, 0, sizeof(*c));
	c->id = strdup(id ? id : "");
	c->name = strdup(name ? name : "");
	c->raw_args = malloc(args_len + 1);
	if (!c->id || !c->name || !c->raw_args)
		return GH_E_NOMEM;
	if (args_len)
		memcpy(c->raw_args, args, args_len);
	c->raw_args[args_len] = '\0';
	while (i < args_len && isspace((unsigned char)args[i]))
		i++;
	if (i == args_len) {
		/* no arguments at all: a call of a tool without parameters */
		if (!(c->args = cJSON_CreateObject()))
			return GH_E_NOMEM;
		return GH_OK;
	}
	/* invalid JSON leaves args NULL; the engine tells the model */
	gh_json_parse_opts(args, args_len, "tool arguments", GH_JSON_UPSTREAM, &c->args, &ignore);
	return GH_OK;
}

enum gh_code gh_provider_stream_take(struct gh_provider_stream *st, struct gh_chat_response *out,
				     struct gh_err *e)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!(out->text = gh_buf_detach(&st->text)))
		goto nomem;
	if (st->ncalls) {
		if (!(out->calls = calloc(st->ncalls, sizeof(*out->calls))))
			goto nomem;
		for (i = 0; i < st->ncalls; i++) {
			struct gh_provider_acc *a = &st->calls[i];

			out->ncalls++;
			if (gh_provider_call_set(&out->calls[i], a->id, a->name,
						 a->args.data ? a->args.data : "", a->args.len))
				goto nomem;
		}
	}
	out->finish = st->finish;
	if (out->ncalls && out->finish == GH_FINISH_STOP)
		out->finish = GH_FINISH_TOOL_CALLS;
	out->reasoning = st->reasoning;
	st->reasoning = NULL;
	out->input_tokens = st->input_tokens;
	out->output_tokens = st->output_tokens;
	return GH_OK;
nomem:
	gh_chat_response_clear(out);
	return gh_err_set(e, GH_E_NOMEM, "provider %s (%s): out of memory", st->conf->name,
			  st->type);
}

int gh_provider_replay(const struct gh_chat_events *ev, const struct gh_chat_response *r)
{
	size_t i;

	if (ev->text_delta && r->text && *r->text &&
	    ev->text_delta(ev->ud, r->text, strlen(r->text)))
		return 1;
	for (i = 0; ev->tool_delta && i < r->ncalls; i++) {
		if (ev->tool_delta(ev->ud, (int)i, r->calls[i].id, r->calls[i].name, ""))
			return 1;
		if (r->calls[i].raw_args && *r->calls[i].raw_args &&
		    ev->tool_delta(ev->ud, (int)i, NULL, NULL, r->calls[i].raw_args))
			return 1;
	}
	return 0;
}

/* ---- one exchange ---- */

struct xctx {
	struct gh_provider_stream *st;
	const struct gh_provider_http *h;
	struct gh_upstream_resp *resp;
	struct gh_sse_parser *sse;
	struct gh_buf raw;     /* a JSON body sent in answer to a stream request */
	int mode;              /* -1 undecided, 0 JSON, 1 SSE */
};

static int ctype_is_json(const char *ct)
{
	char low[sizeof(((struct gh_upstream_resp *)0)->content_type)];
	size_t i;

	for (i = 0; ct[i] && i < sizeof(low) - 1; i++)
		low[i] = (char)tolower((unsigned char)ct[i]);
	low[i] = '\0';
	return strstr(low, "json") != NULL;
}

static int on_sse(void *ud, const struct gh_sse_event *ev)
{
	struct xctx *x = ud;

	return x->h->on_event(x->st, ev) ? 1 : 0;
}

static int on_data(void *ud, const char *p, size_t n)
{
	struct xctx *x = ud;
	int rc;

	if (x->mode < 0)
		x->mode = ctype_is_json(x->resp->content_type) ? 0 : 1;
	if (x->mode == 0) {
		if (gh_buf_append(&x->raw, p, n) != GH_BUF_OK)
			return gh_provider_stream_fail(x->st, "reply over %lld bytes",
						       (long long)x->st->conf->max_response_bytes);
		return 0;
	}
	rc = gh_sse_feed(x->sse, p, n, on_sse, NULL, x);
	if (rc == GH_SSE_OK)
		return 0;
	if (rc == GH_SSE_TOOBIG)
		return gh_provider_stream_fail(x->st, "stream event over %lld bytes",
					       (long long)x->st->conf->max_response_bytes);
	if (rc == GH_SSE_NOMEM)
		return gh_provider_stream_fail(x->st, "out of memory");
	return 1;
}

/* The events of one pass over the upstream connection (it may bring many
 * chunks) go to the consumer as one batch. */
static int on_batch(void *ud, int open)
{
	struct xctx *x = ud;
	const struct gh_chat_events *ev = x->st->ev;

	x->st->in_batch = open;
	if (ev->batch(ev->ud, open) && !open) {
		x->st->cancelled = 1;
		return 1;
	}
	return 0;
}

static void on_sent(void *ud)
{
	struct xctx *x = ud;

	x->st->ev->sent(x->st->ev->ud);
}

static int on_relay(void *ud, int op)
{
	struct xctx *x = ud;

	return x->st->ev->relay(x->st->ev->ud, op);
}

static int on_tick(void *ud)
{
	struct xctx *x = ud;
	const struct gh_chat_events *ev = x->st->ev;

	if (ev->tick && ev->tick(ev->ud)) {
		x->st->cancelled = 1;
		return 1;
	}
	return 0;
}

/* The upstream's own words from an error body: error.message, a string
 * error, message, or else the first bytes of the body; control characters
 * become spaces. */
static void error_text(const struct gh_buf *body, char *out, size_t cap)
{
	struct gh_err ignore;
	cJSON *j = NULL;
	const cJSON *err;
	const char *s;
	size_t n, i;

	if (body->len)
		gh_json_parse_opts(body->data, body->len, "error body", GH_JSON_UPSTREAM, &j, &ignore);
	err = cJSON_GetObjectItemCaseSensitive(j, "error");
	s = gh_json_str(err, "message");

	if (!s && cJSON_IsString(err))
		s = err->valuestring;
	if (!s)
		s = gh_json_str(j, "message");
	if (s) {
		n = strlen(s);
	} else {
		s = body->len ? body->data : "(empty body)";
		n = body->len ? body->len : strlen(s);
		if (n > UPSTREAM_MSG_MAX) {
			n = UPSTREAM_MSG_MAX;
			/* do not cut a UTF-8 sequence */
			while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
				n--;
		}
	}
	if (n >= cap)
		n = cap - 1;
	for (i = 0; i < n; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7F ? ' ' : s[i];
	out[n] = '\0';
	cJSON_Delete(j);
}

/* A JSON reply's text parsed, or the error tenants see ("provider NAME
 * (TYPE): reply ..."). */
static enum gh_code parse_reply_text(const struct gh_provider_conf *conf, const char *type,
				     const struct gh_buf *b, cJSON **json, struct gh_err *e)
{
	struct gh_err pe;

	if (gh_json_parse_opts(b->data ? b->data : "", b->len, "reply", GH_JSON_UPSTREAM, json,
			       &pe) != GH_OK)
		return gh_err_set(e, GH_E_UPSTREAM, "provider %s (%s): %s", conf->name, type,
				  pe.msg);
	return GH_OK;
}

/* An upstream's answer with a status other than 2xx, as the exchange's
 * error. Apart from gh_provider_exchange so its buffers take stack only
 * on this path: a stream's worker keeps every stack page it touched. */
static GH_NOINLINE enum gh_code status_failed(const struct gh_provider_conf *conf,
					      const char *type, struct gh_provider_stream *st,
					      const struct gh_upstream_resp *resp, struct gh_err *e)
{
	char what[GH_ERR_MSG_MAX];
	enum gh_code rc;

	/* so is the upstream's own wording of its error */
	error_text(&resp->body, what, sizeof(what));
	detail(st, "provider %s (%s): HTTP %ld: %s", conf->name, type, resp->status, what);
	if (st->uerr) {
		cJSON *j = NULL;
		struct gh_err pe;

		if (resp->body.len && gh_json_parse_opts(resp->body.data, resp->body.len, "error",
							 GH_JSON_UPSTREAM, &j, &pe) == GH_OK)
			gh_provider_note_error(st, (int)resp->status, j);
		else
			gh_provider_note_error(st, (int)resp->status, NULL);
		cJSON_Delete(j);
	}
	rc = gh_err_set(e, resp->status == 429 ? GH_E_RATELIMIT : GH_E_UPSTREAM,
			"provider %s (%s): HTTP %ld", conf->name, type, resp->status);
	if (rc == GH_E_RATELIMIT && e && resp->retry_after_ms >= 0)
		e->retry_after = (int)((resp->retry_after_ms + 999) / 1000);
	return rc;
}

enum gh_code gh_provider_exchange(const struct gh_provider_conf *conf, const char *type,
				  const struct gh_provider_http *h, struct gh_provider_stream *st,
				  struct gh_buf *raw, struct gh_err *e)
{
	struct gh_upstream_req req;
	struct gh_upstream_resp resp;
	struct gh_buf url;
	struct xctx x;
	size_t cap = conf->max_response_bytes > 0 ? (size_t)conf->max_response_bytes : 8u << 20;
	enum gh_code rc;

	gh_buf_init(raw, cap);
	memset(&x, 0, sizeof(x));
	x.st = st;
	x.h = h;
	x.resp = &resp;
	x.mode = -1;
	gh_buf_init(&x.raw, cap);
	gh_buf_init(&url, URL_MAX);
	gh_upstream_resp_init(&resp, cap);
	if (!conf->base_url || gh_buf_puts(&url, conf->base_url) != GH_BUF_OK ||
	    gh_buf_puts(&url, h->path) != GH_BUF_OK) {
		rc = gh_err_set(e, GH_E_INTERNAL, "provider %s (%s): bad base_url", conf->name,
				type);
		goto out;
	}
	if (h->stream && !(x.sse = gh_sse_new(GH_PROVIDER_MAX_LINE, cap))) {
		rc = gh_err_set(e, GH_E_NOMEM, "provider %s (%s): out of memory", conf->name, type);
		goto out;
	}
	memset(&req, 0, sizeof(req));
	req.url = url.data;
	req.method = "POST";
	req.headers = h->headers;
	req.nheaders = h->nheaders;
	req.body = h->body;
	req.body_len = h->body_len;
	req.timeout_ms = conf->timeout_ms;
	req.connect_timeout_ms = conf->connect_timeout_ms;
	req.max_response = cap;
	req.on_data = h->stream ? on_data : NULL;
	req.on_batch = h->stream && st->ev->batch ? on_batch : NULL;
	req.on_sent = h->stream && st->ev->sent ? on_sent : NULL;
	req.on_relay = h->stream && st->ev->relay ? on_relay : NULL;
	req.on_tick = on_tick;
	req.ud = &x;
	req.wake_fd = st->ev->wake_fd;
	req.tick_ms = st->ev->tick_ms;
	req.max_retries = (int)conf->max_retries;
	req.retry_base_ms = conf->retry_base_ms;
	rc = gh_upstream_do(&req, &resp, e);
	if (rc == GH_E_CANCELLED) {
		if (st->err.code != GH_OK) {
			if (e)
				*e = st->err;
			rc = st->err.code;
		} else {
			rc = gh_err_set(e, GH_E_CANCELLED, "provider %s (%s): cancelled",
					conf->name, type);
		}
		goto out;
	}
	if (rc != GH_OK) {
		/* the upstream's address is for operators only */
		detail(st, "provider %s (%s): %s", conf->name, type, e ? e->msg : resp.error);
		gh_err_set(e, rc, "provider %s (%s): %s", conf->name, type, resp.error);
		goto out;
	}
	if (resp.status < 200 || resp.status > 299) {
		rc = status_failed(conf, type, st, &resp, e);
		goto out;
	}
	/* a stream's completeness is judged by the provider, by its end marker */
	if (!h->stream || x.mode == 0) {
		struct gh_buf *b = h->stream ? &x.raw : &resp.body;

		*raw = *b;
		gh_buf_init(b, cap);
		if (!raw->data && gh_buf_append(raw, "", 0) != GH_BUF_OK) {
			rc = gh_err_set(e, GH_E_NOMEM, "provider %s (%s): out of memory",
					conf->name, type);
			goto out;
		}
	}
	rc = GH_OK;
out:
	gh_upstream_resp_free(&resp);
	gh_buf_free(&url);
	gh_buf_free(&x.raw);
	gh_sse_free(x.sse);
	if (rc != GH_OK)
		gh_provider_scrub(conf, e);
	return rc;
}

/* ---- CoreMessage readers ---- */

int gh_provider_tool_fields(cJSON *o, const struct gh_tool_spec *t, const char *schema_key)
{
	cJSON *schema;

	if (!cJSON_AddStringToObject(o, "name", t->name))
		return -1;
	if (t->description && !cJSON_AddStringToObject(o, "description", t->description))
		return -1;
	schema = t->schema ? cJSON_Duplicate(t->schema, 1)
			   : gh_json_parse_stored("{\"type\":\"object\",\"properties\":{}}");
	if (!schema)
		return -1;
	cJSON_AddItemToObject(o, schema_key, schema);
	return 0;
}

int gh_provider_content_text(const cJSON *content, struct gh_buf *b)
{
	const cJSON *p;
	int first = 1, rc;

	if (cJSON_IsString(content))
		return gh_buf_puts(b, content->valuestring);
	if (!cJSON_IsArray(content))
		return GH_BUF_OK;
	cJSON_ArrayForEach(p, content) {
		const char *t = gh_json_str(p, "type"), *text = gh_json_str(p, "text");

		if (!t || strcmp(t, "text") || !text)
			continue;
		if (!first && (rc = gh_buf_putc(b, '\n')) != GH_BUF_OK)
			return rc;
		if ((rc = gh_buf_puts(b, text)) != GH_BUF_OK)
			return rc;
		first = 0;
	}
	return GH_BUF_OK;
}

char *gh_provider_result_text(const cJSON *result)
{
	if (cJSON_IsString(result))
		return strdup(result->valuestring);
	if (!result)
		return strdup("null");
	return gh_json_dump(result);
}

char *gh_provider_args_text(const cJSON *args)
{
	if (!args || cJSON_IsNull(args))
		return strdup("{}");
	if (cJSON_IsString(args))
		return strdup(args->valuestring);
	return gh_json_dump(args);
}

enum gh_code gh_provider_http_chat(const struct gh_provider_wire *w,
				   const struct gh_provider_conf *conf,
				   const struct gh_chat_request *req,
				   const struct gh_chat_events *events,
				   struct gh_chat_response *out, struct gh_err *e)
{
	static const struct gh_chat_events none;
	struct gh_upstream_header hdr[3 + GH_PROVIDER_PASS_HEADERS];
	struct gh_provider_http h;
	size_t i, j;
	struct gh_provider_stream st;
	struct gh_buf scratch, raw = {0};
	char *body = NULL;
	cJSON *json = NULL;
	const char *missing;
	enum gh_code rc;

	if (!events)
		events = &none;
	memset(out, 0, sizeof(*out));
	memset(&h, 0, sizeof(h));
	gh_provider_stream_init(&st, conf, w->type, req, events);
	gh_buf_init(&scratch, 64 << 10);
	hdr[h.nheaders].name = "Content-Type";
	hdr[h.nheaders++].value = "application/json";
	if ((rc = w->build_body(conf, req, &body, e)) != GH_OK ||
	    (rc = w->headers(conf, hdr + 1, &h.nheaders, &scratch, e)) != GH_OK)
		goto out;
	/* a client of the upstream's own API: its version and beta headers */
	for (i = 0; req->passthrough_type && !strcmp(req->passthrough_type, w->type) &&
		    i < req->npass_headers && i < GH_PROVIDER_PASS_HEADERS; i++) {
		for (j = 1; j < h.nheaders; j++)
			if (!strcasecmp(hdr[j].name, req->pass_headers[i].name))
				break;
		hdr[j].name = req->pass_headers[i].name;
		hdr[j].value = req->pass_headers[i].value;
		if (j == h.nheaders)
			h.nheaders++;
	}
	h.path = w->path;
	h.headers = hdr;
	h.body = body;
	h.body_len = strlen(body);
	h.stream = req->stream;
	h.on_event = w->on_event;
	if ((rc = gh_provider_exchange(conf, w->type, &h, &st, &raw, e)) != GH_OK)
		goto out;
	if (raw.data) {
		int read = w->read_reply ? w->read_reply(raw.data, raw.len, out) : 0;

		if (read < 0)
			rc = gh_err_set(e, GH_E_NOMEM, "provider %s (%s): out of memory",
					conf->name, w->type);
		else if (!read && (rc = parse_reply_text(conf, w->type, &raw, &json, e)) == GH_OK)
			rc = w->parse_reply(conf, json, out, e);
		if (rc == GH_OK && req->stream && gh_provider_replay(events, out))
			rc = gh_err_set(e, GH_E_CANCELLED, "provider %s (%s): cancelled", conf->name,
					w->type);
	} else if ((missing = w->incomplete(&st))) {
		rc = gh_err_set(e, GH_E_UPSTREAM, "provider %s (%s): stream ended early%s",
				conf->name, w->type, missing);
	} else {
		rc = gh_provider_stream_take(&st, out, e);
	}
out:
	if (rc != GH_OK)
		gh_chat_response_clear(out);
	cJSON_Delete(json);
	gh_buf_free(&raw);
	free(body);
	if (scratch.data)
		sodium_memzero(scratch.data, scratch.alloc);
	gh_buf_free(&scratch);
	gh_provider_stream_free(&st);
	return rc;
}
