/*
 * http_anthropic.c - the Anthropic Messages surface, so Claude Code and the
 * Anthropic SDKs work unchanged:
 *
 *   POST /v1/messages                a message, or with "stream": true the
 *                                    API's named SSE events
 *   POST /v1/messages/count_tokens   {"input_tokens": N} (an estimate)
 *
 * "model" names an agent: its id, or a model-name glob in an agent's
 * "models". The request's tools are client tools: the ones the key's
 * policy refuses are left out of what the model is offered (logged), not a
 * 403, since coding agents always declare their whole tool set. Every
 * tool_use the model emits passes the gate before the client sees it: text
 * and thinking stream as they come, tool_use blocks only once allowed. A
 * refused call never reaches the client (the engine answers the model with
 * the reason and the turn goes on); a call waiting for approval holds the
 * response (streams get ping events) up to server.approval_wait_ms. The
 * client's tool_result blocks continue the run, matched by tool_use_id.
 * Wire shapes and what passes through untouched are in wire_anthropic.c.
 *
 * Per request, on the CivetWeb worker thread that serves it; nothing here
 * is shared between threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "buf.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "run.h"
#include "tools.h"
#include "upstream.h"
#include "util.h"
#include "wire_anthropic.h"

#define TEXT_MAX (16u << 20)        /* text one content block carries (non-streaming) */

enum block { B_NONE, B_TEXT, B_THINKING };

/* One Messages request, from parsing to the last byte. */
struct an {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *body;                        /* owned */
	struct gh_anthropic_req req;        /* owned */
	cJSON *defs;                        /* the client tools (in req), refused ones withheld */
	struct gh_run_request rq;
	struct gh_upstream_header hdr[2];   /* anthropic-version, anthropic-beta */
	struct gh_provider_error uerr;      /* the upstream's own error, when it gave one */
	char thread[GH_NAME_MAX + 1];
	char run_id[GH_ID_MAX];
	/* the content blocks under way */
	cJSON *content;                     /* owned: the blocks (non-streaming) */
	cJSON *cur;                         /* the open block (in content, non-streaming) */
	enum block open;
	int index;                          /* the next block's index */
	struct gh_buf acc;                  /* the open block's text (non-streaming) */
	int sep;                            /* a step began after text */
	/* streaming */
	struct gh_run_sink sink;
	struct gh_http_stream hs;
};

/* How a request ended, whichever way the engine got there. */
struct outcome {
	const char *stop;                   /* stop_reason */
	cJSON *calls;                       /* owned: pending client calls, or NULL */
	char *tail;                         /* owned: text after the streamed text, or NULL */
	struct gh_run_usage usage;
};

/* ---------------------------------------------------------------- errors */

/* An error in the API's shape with the status it goes with. */
static void send_error(struct gh_req *r, int status, const char *type, const char *msg)
{
	cJSON *o = gh_anthropic_error(type ? type : gh_anthropic_error_type(status), msg);

	if (status >= 500)
		gh_warn("%s %s %s: %d %s", r->id, r->method, r->path, status, msg);
	gh_http_json(r, status, o);
	cJSON_Delete(o);
}

/* A failure before anything was streamed: the upstream's own error, in its
 * words and with its status, when it gave one (clients match on them). */
static void fail_plain(struct an *q, const struct gh_err *e)
{
	if (e->code == GH_E_CANCELLED) {
		gh_http_error(q->r, e);
		return;
	}
	if (q->uerr.status >= 400 && q->uerr.message[0]) {
		send_error(q->r, q->uerr.status, q->uerr.type[0] ? q->uerr.type : NULL,
			   q->uerr.message);
		return;
	}
	gh_http_error(q->r, e);   /* in this API's shape (http.c) */
}

/* --------------------------------------------------------------- request */

static void tool_removed(void *ud, const char *name, const char *rule)
{
	struct an *q = ud;

	gh_info("%s /v1/messages: tool %s not offered to the model: %s", q->r->id, name, rule);
}

static enum gh_code parse_request(struct an *q, int counting, struct gh_err *e)
{
	struct gh_req *r = q->r;
	const char *v;
	const cJSON *t;
	size_t n = 0;
	enum gh_code rc;

	if ((rc = gh_http_body_object(r, &q->body, e)) != GH_OK ||
	    (rc = gh_anthropic_parse(q->body, counting, &q->req, e)) != GH_OK)
		return rc;
	q->agent = gh_anthropic_agent(gh_app_cfg(r->app), r->who.policy, q->req.model);
	if (!q->agent)
		return gh_err_set(e, GH_E_NOTFOUND, "model: %s (no agent answers to this model "
				  "name: name an agent id, or list it in an agent's \"models\")",
				  q->req.model);
	if ((rc = gh_run_agent(r->app, &r->who, q->agent->id, &q->agent, e)) != GH_OK)
		return rc;
	if (counting)
		return GH_OK;
	cJSON_ArrayForEach(t, q->req.skipped_tools)
		gh_info("%s /v1/messages: tool %s has no input_schema (a server tool of the API); "
			"not offered", r->id, t->valuestring);
	q->defs = q->req.client_defs;
	gh_tools_client_defs_withhold(r->who.policy, q->defs, tool_removed, q);
	if ((v = gh_http_header(r, "anthropic-version"))) {
		q->hdr[n].name = "anthropic-version";
		q->hdr[n++].value = v;
	}
	if ((v = gh_http_header(r, "anthropic-beta"))) {
		q->hdr[n].name = "anthropic-beta";
		q->hdr[n++].value = v;
	}
	gh_anthropic_session_thread(gh_http_header(r, "X-Claude-Code-Session-Id"),
				    q->req.user_id, q->thread);
	q->rq.who = &r->who;
	q->rq.agent = q->agent;
	q->rq.client_defs = q->defs;
	q->rq.stream = q->req.stream;
	q->rq.surface = "anthropic";
	q->rq.messages = q->req.messages;
	q->rq.stateless = 1;
	q->rq.thread_id = q->thread[0] ? q->thread : NULL;
	q->rq.history_len = q->req.history_len + (q->req.messages &&
						  cJSON_GetArraySize(q->req.messages) > 0 &&
						  gh_json_str(cJSON_GetArrayItem(q->req.messages, 0),
							      "role") &&
						  !strcmp(gh_json_str(cJSON_GetArrayItem(
								  q->req.messages, 0), "role"),
							  "system") ? 1 : 0);
	q->rq.model = q->req.model;
	q->rq.max_tokens = q->req.max_tokens;
	q->rq.passthrough_type = "anthropic";
	q->rq.passthrough = q->req.passthrough;
	q->rq.pass_headers = q->hdr;
	q->rq.npass_headers = n;
	q->rq.upstream_error = &q->uerr;
	return GH_OK;
}

/* ---------------------------------------------------------------- blocks */

static int send_event(struct an *q, const char *type, cJSON *o)
{
	return gh_http_stream_json(&q->hs, type, o);
}

static cJSON *event(const char *type, int index)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "type", type);
	if (index >= 0)
		cJSON_AddNumberToObject(o, "index", index);
	return o;
}

static void close_block(struct an *q)
{
	if (q->open == B_NONE)
		return;
	if (q->req.stream) {
		send_event(q, "content_block_stop", event("content_block_stop", q->index));
	} else if (q->cur) {
		const char *key = q->open == B_TEXT ? "text" : "thinking";

		cJSON_DeleteItemFromObjectCaseSensitive(q->cur, key);
		cJSON_AddStringToObject(q->cur, key, q->acc.data ? q->acc.data : "");
		if (q->open == B_THINKING && !cJSON_GetObjectItemCaseSensitive(q->cur, "signature"))
			cJSON_AddStringToObject(q->cur, "signature", "");
	}
	gh_buf_free(&q->acc);
	gh_buf_init(&q->acc, TEXT_MAX);
	q->cur = NULL;
	q->open = B_NONE;
	q->index++;
}

/* The start shape of a block of kind k (text or thinking). */
static cJSON *block_of(enum block k)
{
	cJSON *b = cJSON_CreateObject();

	if (k == B_THINKING) {
		cJSON_AddStringToObject(b, "type", "thinking");
		cJSON_AddStringToObject(b, "thinking", "");
		cJSON_AddStringToObject(b, "signature", "");
	} else {
		cJSON_AddStringToObject(b, "type", "text");
		cJSON_AddStringToObject(b, "text", "");
	}
	return b;
}

/* Opens a block of kind k, closing another first; one of that kind open
 * already stays as it is (its shape is built only here, when it opens). */
static void open_block(struct an *q, enum block k)
{
	cJSON *block, *o;

	if (q->open == k)
		return;
	close_block(q);
	q->open = k;
	block = block_of(k);
	if (q->req.stream) {
		o = event("content_block_start", q->index);
		cJSON_AddItemToObject(o, "content_block", block);
		send_event(q, "content_block_start", o);
	} else {
		cJSON_AddItemToArray(q->content, block);
		q->cur = block;
	}
}

/* The event a stream sends most, formatted straight from the text: no
 * JSON tree per delta. */
static void delta(struct an *q, const char *dtype, const char *key, const char *s, size_t len)
{
	struct gh_buf b;

	if (!q->req.stream) {
		gh_buf_append(&q->acc, s, len);
		return;
	}
	gh_buf_init(&b, len * 6 + 128);
	if (gh_buf_puts(&b, "{\"type\":\"content_block_delta\",\"index\":") == GH_BUF_OK &&
	    gh_buf_put_int(&b, q->index) == GH_BUF_OK &&
	    gh_buf_puts(&b, ",\"delta\":{\"type\":\"") == GH_BUF_OK &&
	    gh_buf_puts(&b, dtype) == GH_BUF_OK && gh_buf_puts(&b, "\",\"") == GH_BUF_OK &&
	    gh_buf_puts(&b, key) == GH_BUF_OK && gh_buf_puts(&b, "\":") == GH_BUF_OK &&
	    gh_buf_json_strn(&b, s, len) == GH_BUF_OK && gh_buf_puts(&b, "}}") == GH_BUF_OK)
		gh_http_stream_send(&q->hs, "content_block_delta", b.data, b.len);
	gh_buf_free(&b);
}

static void add_text(struct an *q, const char *t, size_t len)
{
	if (!t || !len)
		return;
	open_block(q, B_TEXT);
	delta(q, "text_delta", "text", t, len);
}

static void add_reasoning(struct an *q, const char *t, size_t len, const char *sig)
{
	open_block(q, B_THINKING);
	if (len)
		delta(q, "thinking_delta", "thinking", t, len);
	if (sig && *sig) {
		/* the signature closes the block, byte for byte as given */
		if (q->req.stream) {
			cJSON *o = event("content_block_delta", q->index), *d;

			d = cJSON_AddObjectToObject(o, "delta");
			cJSON_AddStringToObject(d, "type", "signature_delta");
			cJSON_AddStringToObject(d, "signature", sig);
			send_event(q, "content_block_delta", o);
		} else if (q->cur) {
			cJSON_DeleteItemFromObjectCaseSensitive(q->cur, "signature");
			cJSON_AddStringToObject(q->cur, "signature", sig);
		}
		close_block(q);
	}
}

/* A whole block at once (tool_use); taken. */
static void whole_block(struct an *q, cJSON *block)
{
	close_block(q);
	if (!q->req.stream) {
		cJSON_AddItemToArray(q->content, block);
	} else {
		cJSON *o = event("content_block_start", q->index), *start, *d;
		char *args = gh_json_dump(cJSON_GetObjectItemCaseSensitive(block, "input"));

		start = cJSON_Duplicate(block, 1);
		cJSON_ReplaceItemInObjectCaseSensitive(start, "input", cJSON_CreateObject());
		cJSON_AddItemToObject(o, "content_block", start);
		send_event(q, "content_block_start", o);
		o = event("content_block_delta", q->index);
		d = cJSON_AddObjectToObject(o, "delta");
		cJSON_AddStringToObject(d, "type", "input_json_delta");
		cJSON_AddStringToObject(d, "partial_json", args ? args : "{}");
		free(args);
		send_event(q, "content_block_delta", o);
		send_event(q, "content_block_stop", event("content_block_stop", q->index));
		cJSON_Delete(block);
	}
	q->index++;
}

/* ------------------------------------------------------------- streaming */

static void message_id(const struct an *q, char *out, size_t cap)
{
	snprintf(out, cap, "msg_%s", q->run_id[0] ? q->run_id + (strncmp(q->run_id, "run_", 4) ? 0 : 4)
					: "gatehouse");
}

/* The message's opening: id, model, empty content. */
static cJSON *message_shell(const struct an *q)
{
	cJSON *m = cJSON_CreateObject();
	char id[GH_ID_MAX + 8];

	message_id(q, id, sizeof(id));
	cJSON_AddStringToObject(m, "id", id);
	cJSON_AddStringToObject(m, "type", "message");
	cJSON_AddStringToObject(m, "role", "assistant");
	cJSON_AddStringToObject(m, "model", q->req.model);
	return m;
}

static int open_stream(struct gh_http_stream *hs, void *ud)
{
	struct an *q = ud;
	cJSON *o, *m;
	struct gh_run_usage none = {0, 0};

	if (gh_http_sse_begin(hs->r) != 0)
		return -1;
	o = event("message_start", -1);
	m = message_shell(q);
	cJSON_AddArrayToObject(m, "content");
	cJSON_AddNullToObject(m, "stop_reason");
	cJSON_AddNullToObject(m, "stop_sequence");
	cJSON_AddItemToObject(m, "usage", gh_anthropic_usage(&none));
	cJSON_AddItemToObject(o, "message", m);
	if (gh_http_stream_json(hs, "message_start", o) != 0)
		return -1;
	return gh_http_stream_send(hs, "ping", "{\"type\": \"ping\"}", 16);
}

static int sink_tick(void *ud)
{
	struct an *q = ud;

	return gh_http_stream_tick(&q->hs);
}

static int sink_event(void *ud, const struct gh_run_event *ev)
{
	struct an *q = ud;

	if (q->hs.gone)
		return 1;
	if (!q->run_id[0] && ev->run_id)
		gh_strlcpy(q->run_id, ev->run_id, sizeof(q->run_id));
	switch (ev->kind) {
	case GH_EV_TEXT_DELTA:
		if (q->sep && ev->len) {
			/* a step after a tool round: its text is a block of its own */
			close_block(q);
			q->sep = 0;
		}
		add_text(q, ev->text, ev->len);
		break;
	case GH_EV_REASONING_DELTA:
		add_reasoning(q, ev->text, ev->len, ev->signature);
		break;
	case GH_EV_STEP_START:
		q->sep = 1;
		break;
	case GH_EV_APPROVAL:
		/* a wait follows */
		if (q->req.stream)
			gh_http_stream_send(&q->hs, "ping", "{\"type\": \"ping\"}", 16);
		break;
	default:
		break;
	}
	return q->hs.gone;
}

/* -------------------------------------------------------------- approvals */

/* The text that says which approvals still wait, so the developer sees why
 * the turn ended. */
static char *pending_note(const struct an *q, const struct gh_run_view *v)
{
	const struct gh_run_call *c;
	struct gh_buf b;
	int n = 0, caller;
	size_t i = 0;

	gh_buf_init(&b, 1 << 16);
	while ((c = gh_answer_next_waiting(v, &i, &caller))) {
		gh_buf_printf(&b, "%sgatehouse: the %s call is waiting for approval %s (%s).",
			      n ? " " : "", c->name ? c->name : "?", c->approval_id,
			      caller ? "approve it with POST /api/approvals/<id>/approve"
				     : "an administrator must approve it");
		n++;
	}
	if (n)
		gh_buf_printf(&b, " Once %s decided, send your message again.",
			      n > 1 ? "they are" : "it is");
	else
		gh_buf_printf(&b, "gatehouse: the approval was decided and run %s is carrying it "
			      "out; its answer will be at GET /api/runs/%s.", q->run_id, q->run_id);
	return gh_buf_detach(&b);
}

/* Whether the client left while an approval waits; streams get a ping
 * whenever nothing went out for a while. */
static int wait_gone(void *ud)
{
	struct an *q = ud;
	int64_t every = gh_app_cfg(q->r->app)->server.heartbeat_ms / 2;

	if (!q->req.stream)
		return gh_http_client_gone(q->r);
	if (every > 5000)
		every = 5000;
	if (every < 100)
		every = 100;
	if (gh_mono_ns() - q->hs.last_write_ns >= every * 1000000LL &&
	    gh_http_stream_send(&q->hs, "ping", "{\"type\": \"ping\"}", 16) != 0)
		return 1;
	return gh_http_stream_tick(&q->hs);
}

/* The run waits on approvals: wait (bounded by server.approval_wait_ms)
 * for a person's decision, which the background resumer carries out:
 * approved client calls are handed out, refused ones answered to the
 * model; still pending, the turn ends with text naming the approval. */
static enum gh_code await_approval(struct an *q, const struct gh_run_result *res,
				   struct outcome *oc, struct gh_err *e)
{
	struct gh_run_view v;
	enum gh_code rc = gh_answer_await(q->r->app, q->r->who.key.owner, res->run_id, wait_gone,
					  q, &v, e);

	if (rc == GH_OK && v.status == GH_RUN_SUSPENDED) {
		oc->tail = pending_note(q, &v);
		oc->stop = "end_turn";
	} else if (rc == GH_OK) {
		oc->usage = v.usage;
		if (v.status == GH_RUN_COMPLETED) {
			oc->tail = gh_strdup(v.text);
			oc->stop = gh_anthropic_stop_reason(v.finish);
		} else {
			oc->calls = gh_run_view_pending_json(&v);
			oc->stop = "tool_use";
		}
	}
	gh_run_view_clear(&v);
	return rc;
}

static enum gh_code outcome_of(struct an *q, const struct gh_run_result *res,
			       struct outcome *oc, struct gh_err *e)
{
	gh_strlcpy(q->run_id, res->run_id, sizeof(q->run_id));
	oc->usage = res->usage;
	if (res->status == GH_RUN_SUSPENDED)
		return await_approval(q, res, oc, e);
	if (cJSON_GetArraySize(res->pending) > 0) {
		oc->calls = cJSON_Duplicate(res->pending, 1);
		oc->stop = "tool_use";
	} else {
		oc->stop = gh_anthropic_stop_reason(res->finish);
	}
	return GH_OK;
}

/* ---------------------------------------------------------------- answer */

/* The end of the turn: text the engine did not stream, the calls the
 * client may run. */
static void finish_blocks(struct an *q, const struct outcome *oc)
{
	const cJSON *c;

	if (oc->tail && *oc->tail) {
		close_block(q);
		add_text(q, oc->tail, strlen(oc->tail));
	}
	cJSON_ArrayForEach(c, oc->calls)
		whole_block(q, gh_anthropic_tool_use(c, q->defs));
	close_block(q);
}

static void respond_json(struct an *q, const struct outcome *oc)
{
	cJSON *m;

	finish_blocks(q, oc);
	m = message_shell(q);
	cJSON_AddItemToObject(m, "content", q->content);
	q->content = NULL;
	cJSON_AddStringToObject(m, "stop_reason", oc->stop);
	cJSON_AddNullToObject(m, "stop_sequence");
	cJSON_AddItemToObject(m, "usage", gh_anthropic_usage(&oc->usage));
	gh_http_json(q->r, 200, m);
	cJSON_Delete(m);
}

static void respond_stream(struct an *q, const struct outcome *oc)
{
	cJSON *o, *d;

	gh_http_stream_hold(&q->hs);
	if (gh_http_stream_begin(&q->hs) != 0)
		return;
	finish_blocks(q, oc);
	o = event("message_delta", -1);
	d = cJSON_AddObjectToObject(o, "delta");
	cJSON_AddStringToObject(d, "stop_reason", oc->stop);
	cJSON_AddNullToObject(d, "stop_sequence");
	cJSON_AddItemToObject(o, "usage", gh_anthropic_usage(&oc->usage));
	send_event(q, "message_delta", o);
	send_event(q, "message_stop", event("message_stop", -1));
	gh_http_stream_end(&q->hs, 0);
}

/* A failure: a plain error while nothing was sent; once the stream has
 * begun, an error event. */
static void fail(struct an *q, const struct gh_err *e)
{
	const char *type, *msg;

	if (!q->hs.begun) {
		fail_plain(q, e);
		return;
	}
	if (q->hs.gone)
		return;
	if (q->uerr.message[0]) {
		type = q->uerr.type[0] ? q->uerr.type : "api_error";
		msg = q->uerr.message;
	} else {
		type = gh_anthropic_error_type(gh_http_status_of(e->code));
		msg = e->msg;
	}
	send_event(q, "error", gh_anthropic_error(type, msg));
	gh_http_stream_end(&q->hs, 0);
}

static void messages(struct gh_req *r)
{
	struct an q;
	struct outcome oc;
	struct gh_run_result res;
	struct gh_err e;

	memset(&q, 0, sizeof(q));
	memset(&oc, 0, sizeof(oc));
	memset(&res, 0, sizeof(res));
	gh_err_clear(&e);
	q.r = r;
	q.hs.r = r;
	q.hs.last_write_ns = gh_mono_ns();
	gh_buf_init(&q.acc, TEXT_MAX);
	q.content = cJSON_CreateArray();
	if (!q.content) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (parse_request(&q, 0, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	/* the stream's head waits for the first byte worth sending, so a
	 * refusal before it is a plain error with its status */
	if (gh_http_run_start(r, q.req.stream, &q.hs, open_stream, sink_event, sink_tick, &q,
			      &q.sink) != 0)
		goto out;
	if (gh_run_generate(r->app, &q.rq, &q.sink, &res, &e) != GH_OK ||
	    outcome_of(&q, &res, &oc, &e) != GH_OK) {
		fail(&q, &e);
		goto out;
	}
	if (q.req.stream)
		respond_stream(&q, &oc);
	else
		respond_json(&q, &oc);
out:
	gh_run_result_clear(&res);
	cJSON_Delete(oc.calls);
	free(oc.tail);
	gh_buf_free(&q.acc);
	cJSON_Delete(q.content);
	gh_anthropic_req_free(&q.req);
	cJSON_Delete(q.body);
}

static void count_tokens(struct gh_req *r)
{
	struct an q;
	struct gh_err e;
	cJSON *o;

	memset(&q, 0, sizeof(q));
	gh_err_clear(&e);
	q.r = r;
	if (parse_request(&q, 1, &e) != GH_OK) {
		gh_http_error(r, &e);
	} else {
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "input_tokens",
					(double)gh_anthropic_estimate_tokens(q.body));
		gh_http_json(r, 200, o);
		cJSON_Delete(o);
	}
	gh_anthropic_req_free(&q.req);
	cJSON_Delete(q.body);
}

const struct gh_route gh_routes_anthropic[] = {
	{"POST", "/v1/messages", GH_AUTH_KEY, messages},
	{"POST", "/v1/messages/count_tokens", GH_AUTH_KEY, count_tokens},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
