/*
 * http_openai.c - the OpenAI-compatible surface, so the official openai
 * clients work unchanged:
 *
 *   POST /v1/chat/completions   a chat.completion, or with "stream": true
 *                               chat.completion.chunk SSE events and
 *                               "data: [DONE]"
 *   GET  /v1/models             the agents the key's policy allows
 *   GET  /v1/models/:id
 *
 * "model" names an agent. The request's tools are client tools, governed by
 * the key's policy; the agent's memory and configured tools run inside the
 * gateway and never appear on this wire. Pending client calls come back as
 * tool_calls with finish_reason "tool_calls"; the client's next request (its
 * history plus role "tool" messages) continues the same run, matched by
 * tool_call_id. Wire shapes and which messages go to the engine are in
 * wire_openai.c.
 *
 * With a pinned thread (X-Gatehouse-Thread, or "user") only what the thread
 * does not hold yet is passed on, so nothing is stored twice; without one
 * the run is stateless. A call waiting for a person's approval holds the
 * response for up to server.approval_wait_ms (streams get keep-alive
 * comments); when it is still pending the answer is an assistant message
 * naming the approval.
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
#include "util.h"
#include "wire_openai.h"

#define TEXT_MAX (16u << 20)        /* assistant text one response carries */
#define HEADERS_MAX 1024

/* One chat completion request, from parsing to the last byte. */
struct oai {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *body;                        /* owned */
	struct gh_openai_req req;           /* owned */
	cJSON *messages;                    /* owned: CoreMessages for the engine */
	struct gh_run_request rq;
	char run_id[GH_ID_MAX];             /* generated (new run) or found (continuation) */
	char thread_id[GH_NAME_MAX + 1];    /* the run's thread; "" none */
	int64_t created;                    /* Unix seconds */
	/* the answer under construction */
	struct gh_buf text;                 /* every step's text (non-streaming) */
	int has_text, sep;                  /* sep: a step began after text */
	/* streaming */
	struct gh_run_sink sink;
	struct gh_http_stream hs;
	const char *approvals;              /* for the head, when known before it */
	char headers[HEADERS_MAX];
	char user_thread[GH_ID_MAX];        /* the thread the "user" field names */
};

/* How a request ended, whichever way the engine got there. */
struct outcome {
	const char *finish;                 /* OpenAI finish_reason */
	cJSON *calls;                       /* owned: pending client calls, or NULL */
	char *tail;                         /* owned: text after the streamed text, or NULL */
	char approvals[256];                /* pending approval ids, comma separated */
	struct gh_run_usage usage;
};

/* ---------------------------------------------------------------- agents */

/* The agent a "model" names, when the caller's policy allows it; otherwise
 * answers 404 / 403 and returns NULL. */
static const struct gh_agent_conf *find_agent(struct gh_req *r, const char *id)
{
	const struct gh_agent_conf *a = gh_config_agent(gh_app_cfg(r->app), id);
	struct gh_decision d;

	if (!a) {
		gh_http_errorf(r, GH_E_NOTFOUND, "model \"%s\" does not exist: a model is an agent "
			       "id, and GET /v1/models lists the ones this key may use", id);
		return NULL;
	}
	gh_policy_agent(r->who.policy, a->id, &d);
	if (d.verdict != GH_V_ALLOW) {
		gh_http_errorf(r, GH_E_FORBIDDEN, "model \"%s\" refused: %s", a->id, d.rule);
		return NULL;
	}
	return a;
}

static cJSON *model_json(struct gh_req *r, const struct gh_agent_conf *a)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", a->id);
	cJSON_AddStringToObject(o, "object", "model");
	cJSON_AddNumberToObject(o, "created", (double)(r->app->started_ms / 1000));
	cJSON_AddStringToObject(o, "owned_by", "gatehouse");
	return o;
}

static void list_models(struct gh_req *r)
{
	cJSON *o = cJSON_CreateObject(), *data;
	size_t i;

	cJSON_AddStringToObject(o, "object", "list");
	data = cJSON_AddArrayToObject(o, "data");
	/* what the key may use, admin or not: the run enforces the same */
	for (i = 0; i < gh_app_cfg(r->app)->nagents; i++)
		if (gh_policy_agent_allowed(r->who.policy, gh_app_cfg(r->app)->agents[i].id))
			cJSON_AddItemToArray(data, model_json(r, &gh_app_cfg(r->app)->agents[i]));
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void get_model(struct gh_req *r)
{
	const struct gh_agent_conf *a = find_agent(r, r->params[0]);
	cJSON *o;

	if (!a)
		return;
	o = model_json(r, a);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* --------------------------------------------------------------- request */

/* A continuation: only the trailing results go to the engine (earlier
 * ones are history). The run's id and thread are looked up for a stream's
 * first bytes; the engine gives the real answer when they are wrong. */
static void continuation(struct oai *q, cJSON *results)
{
	const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
						    cJSON_GetArrayItem(results, 0), "content"), 0);
	struct gh_run_view v;
	struct gh_err ignore;
	char rid[GH_ID_MAX];
	int answered;

	q->messages = results;
	if (gh_run_find_call(q->r->app, q->r->who.key.owner, gh_json_str(m, "toolCallId"), rid,
			     &answered, &ignore) == GH_OK &&
	    gh_run_view_get(q->r->app, q->r->who.key.owner, rid, &v, &ignore) == GH_OK) {
		gh_strlcpy(q->run_id, v.id, sizeof(q->run_id));
		gh_strlcpy(q->thread_id, v.thread_id, sizeof(q->thread_id));
		gh_run_view_clear(&v);
	}
}

/* Which messages go to the engine (see wire_openai.h and the README). */
static enum gh_code pick_messages(struct oai *q, const char *pin, struct gh_err *e)
{
	const cJSON *all = q->req.messages;
	cJSON *out;

	if ((out = gh_openai_trailing_results(all))) {
		continuation(q, out);
		return GH_OK;
	}
	gh_id_new("run_", q->run_id, sizeof(q->run_id));
	q->rq.run_id = q->run_id;
	q->rq.run_id_new = 1;
	if (pin && q->agent->memory_enabled) {
		cJSON *th = NULL;
		enum gh_code rc;

		gh_strlcpy(q->thread_id, pin, sizeof(q->thread_id));
		q->rq.thread_id = pin;
		rc = gh_store_thread_get(q->r->app->store, q->r->who.key.owner, pin, &th, e);
		cJSON_Delete(th);
		if (rc == GH_OK) {
			/* the thread holds everything up to its last answer */
			if (!(out = gh_openai_after_answer(all)))
				return gh_err_set(e, GH_E_NOMEM, "out of memory");
			if (cJSON_GetArraySize(out) == 0) {
				cJSON_Delete(out);
				return gh_err_set(e, GH_E_BADREQ, "messages: nothing after the last "
						  "assistant message; thread \"%s\" already holds "
						  "the rest", pin);
			}
			q->messages = out;
			return GH_OK;
		}
		if (rc != GH_E_NOTFOUND)
			return rc;
		/* a new thread takes the whole conversation */
	} else {
		q->rq.stateless = 1;
	}
	if (!(q->messages = gh_openai_fold_tool_rounds(all)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return GH_OK;
}

/* The thread pinned by header or "user", and the resource; checked. */
static enum gh_code pins(struct oai *q, const char **pin, const char **resource,
			 struct gh_err *e)
{
	struct gh_req *r = q->r;
	enum gh_code rc;

	*pin = gh_http_header(r, "X-Gatehouse-Thread");
	if (*pin && (rc = gh_openai_check_id(*pin, "X-Gatehouse-Thread", e)) != GH_OK)
		return rc;
	*resource = gh_http_header(r, "X-Gatehouse-Resource");
	if (*resource && (rc = gh_openai_check_id(*resource, "X-Gatehouse-Resource", e)) != GH_OK)
		return rc;
	if (!*pin && q->req.user) {
		gh_openai_user_thread(r->who.key.owner, q->req.model, q->req.user, q->user_thread);
		*pin = q->user_thread;
	}
	if (!*resource)
		*resource = q->req.user;
	return GH_OK;
}

static enum gh_code parse_request(struct oai *q, struct gh_err *e)
{
	struct gh_req *r = q->r;
	const char *pin, *resource;
	enum gh_code rc;

	if ((rc = gh_http_body_object(r, &q->body, e)) != GH_OK ||
	    (rc = gh_openai_parse(q->body, &q->req, e)) != GH_OK ||
	    (rc = pins(q, &pin, &resource, e)) != GH_OK)
		return rc;
	if (!(q->agent = find_agent(r, q->req.model)))
		return GH_E_NOTFOUND; /* answered */
	q->rq.who = &r->who;
	q->rq.agent = q->agent;
	q->rq.resource_id = resource;
	q->rq.client_defs = q->req.client_defs;
	q->rq.stream = q->req.stream;
	q->rq.surface = "openai";
	rc = pick_messages(q, pin, e);
	q->rq.messages = q->messages;
	return rc;
}

/* ------------------------------------------------------------- answering */

static void add_header(struct gh_buf *b, const char *name, const char *value)
{
	const unsigned char *p;
	size_t len = b->len;

	if (!value || !*value)
		return;
	for (p = (const unsigned char *)value; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return;
	/* whole or not at all (the buffer is bounded by q->headers); appends,
	 * as printf's format parsing costs more than the copying */
	if (gh_buf_puts(b, name) != GH_BUF_OK || gh_buf_append(b, ": ", 2) != GH_BUF_OK ||
	    gh_buf_puts(b, value) != GH_BUF_OK || gh_buf_append(b, "\r\n", 2) != GH_BUF_OK) {
		b->len = len;
		if (b->data)
			b->data[len] = '\0';
	}
}

/* X-Gatehouse-Run / -Thread / -Approval for the response head. */
static void set_headers(struct oai *q, const char *approvals)
{
	struct gh_buf b;

	gh_buf_init(&b, sizeof(q->headers) - 1);
	add_header(&b, "X-Gatehouse-Run", q->run_id);
	add_header(&b, "X-Gatehouse-Thread", q->thread_id);
	add_header(&b, "X-Gatehouse-Approval", approvals);
	gh_strlcpy(q->headers, b.data ? b.data : "", sizeof(q->headers));
	gh_buf_free(&b);
	q->r->extra_headers = q->headers[0] ? q->headers : NULL;
}

static cJSON *envelope(const struct oai *q, const char *object)
{
	return gh_openai_envelope(q->run_id, object, q->created, q->agent->id);
}

/* ------------------------------------------------------------- streaming */

static int send_json(struct oai *q, cJSON *o)
{
	return gh_http_stream_json(&q->hs, NULL, o);
}

/* One chat.completion.chunk with delta (taken) and finish_reason. */
static int send_chunk(struct oai *q, cJSON *delta, const char *finish)
{
	cJSON *o = envelope(q, "chat.completion.chunk"), *ch, *c;

	ch = cJSON_AddArrayToObject(o, "choices");
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(ch, c);
	cJSON_AddNumberToObject(c, "index", 0);
	cJSON_AddItemToObject(c, "delta", delta ? delta : cJSON_CreateObject());
	cJSON_AddNullToObject(c, "logprobs");
	if (finish)
		cJSON_AddStringToObject(c, "finish_reason", finish);
	else
		cJSON_AddNullToObject(c, "finish_reason");
	if (q->req.include_usage)
		cJSON_AddNullToObject(o, "usage");
	return send_json(q, o);
}

/* The stream's opening: the head, then the role chunk. */
static int open_stream(struct gh_http_stream *hs, void *ud)
{
	struct oai *q = ud;
	cJSON *d;

	set_headers(q, q->approvals);
	if (gh_http_sse_begin(hs->r) != 0)
		return -1;
	d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "role", "assistant");
	cJSON_AddStringToObject(d, "content", "");
	return send_chunk(q, d, NULL);
}

static int send_text(struct oai *q, const char *t, size_t len)
{
	cJSON *d = cJSON_CreateObject();
	char *s = malloc(len + 1);

	if (!d || !s) {
		cJSON_Delete(d);
		free(s);
		return -1;
	}
	memcpy(s, t, len);
	s[len] = '\0';
	cJSON_AddStringToObject(d, "content", s);
	free(s);
	return send_chunk(q, d, NULL);
}

static int sink_tick(void *ud)
{
	struct oai *q = ud;

	return gh_http_stream_tick(&q->hs);
}

/* Text to the answer: streamed at once, or kept for the JSON response. */
static void add_text(struct oai *q, const char *t, size_t len)
{
	if (!t || !len)
		return;
	if (q->sep && q->has_text) {
		/* the text of a step after a tool round: a paragraph of its own */
		if (q->req.stream)
			send_text(q, "\n\n", 2);
		else
			gh_buf_puts(&q->text, "\n\n");
	}
	q->sep = 0;
	q->has_text = 1;
	if (q->req.stream)
		send_text(q, t, len);
	else
		gh_buf_append(&q->text, t, len);
}

/* The engine's events: text goes out, tool rounds stay inside. */
static int sink_event(void *ud, const struct gh_run_event *ev)
{
	struct oai *q = ud;
	char line[200];

	if (q->hs.gone)
		return 1;
	if (!q->run_id[0])
		gh_strlcpy(q->run_id, ev->run_id, sizeof(q->run_id));
	switch (ev->kind) {
	case GH_EV_TEXT_DELTA:
		add_text(q, ev->text, ev->len);
		break;
	case GH_EV_STEP_START:
		q->sep = 1;
		break;
	case GH_EV_APPROVAL:
		/* a wait follows: say why in a comment clients ignore */
		snprintf(line, sizeof(line), "approval %s pending for tool %s",
			 ev->call->approval_id ? ev->call->approval_id : "",
			 ev->call->name ? ev->call->name : "");
		if (q->req.stream)
			gh_http_stream_comment(&q->hs, line);
		break;
	default:
		break;
	}
	return q->hs.gone;
}

/* -------------------------------------------------------------- approvals */

/* The assistant message that says which approvals still wait, so an
 * unmodified client shows something sensible. */
static void pending_note(const struct gh_run_view *v, struct outcome *oc)
{
	struct gh_buf ids;

	gh_buf_init(&ids, sizeof(oc->approvals) - 1);
	oc->tail = gh_answer_waiting_note(v, &ids);
	gh_strlcpy(oc->approvals, ids.data ? ids.data : "", sizeof(oc->approvals));
	oc->finish = "stop";
	gh_buf_free(&ids);
}

/* Whether the client left while an approval waits; a stream's head goes
 * out with the first heartbeat. */
static int wait_gone(void *ud)
{
	struct oai *q = ud;

	return q->req.stream ? gh_http_stream_tick(&q->hs) : gh_http_client_gone(q->r);
}

/* The run is suspended on approvals: wait (bounded by
 * server.approval_wait_ms) for a person's decision, which the background
 * resumer carries out, then answer with where the run got to. Returns
 * GH_E_CANCELLED when the client left, GH_E_UPSTREAM when the resumed run
 * failed. */
static enum gh_code await_approval(struct oai *q, const struct gh_run_result *res,
				   struct outcome *oc, struct gh_err *e)
{
	struct gh_run_view v;
	enum gh_code rc = gh_answer_await(q->r->app, q->r->who.key.owner, res->run_id, wait_gone,
					  q, &v, e);

	if (rc == GH_OK && v.status == GH_RUN_SUSPENDED) {
		pending_note(&v, oc);
	} else if (rc == GH_OK) {
		/* decided and carried out: the stored run tells the outcome */
		oc->usage = v.usage;
		if (v.status == GH_RUN_COMPLETED) {
			oc->tail = gh_strdup(v.text);
			oc->finish = gh_openai_finish(v.finish);
		} else {
			oc->calls = gh_run_view_pending_json(&v);
			oc->finish = "tool_calls";
		}
	}
	gh_run_view_clear(&v);
	return rc;
}

/* ---------------------------------------------------------------- answer */

static void respond_json(struct oai *q, struct outcome *oc)
{
	cJSON *o = envelope(q, "chat.completion"), *ch, *c, *msg;
	int ncalls = cJSON_GetArraySize(oc->calls);

	if (oc->tail && *oc->tail) {
		if (q->has_text)
			gh_buf_puts(&q->text, "\n\n");
		gh_buf_puts(&q->text, oc->tail);
	}
	ch = cJSON_AddArrayToObject(o, "choices");
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(ch, c);
	cJSON_AddNumberToObject(c, "index", 0);
	msg = cJSON_AddObjectToObject(c, "message");
	cJSON_AddStringToObject(msg, "role", "assistant");
	if (q->text.len == 0 && ncalls)
		cJSON_AddNullToObject(msg, "content");
	else
		cJSON_AddStringToObject(msg, "content", q->text.data ? q->text.data : "");
	cJSON_AddNullToObject(msg, "refusal");
	if (ncalls)
		cJSON_AddItemToObject(msg, "tool_calls",
				      gh_openai_tool_calls(oc->calls, q->req.client_defs, 0));
	cJSON_AddNullToObject(c, "logprobs");
	cJSON_AddStringToObject(c, "finish_reason", oc->finish);
	cJSON_AddItemToObject(o, "usage", gh_openai_usage(&oc->usage));
	set_headers(q, oc->approvals);
	gh_http_json(q->r, 200, o);
	cJSON_Delete(o);
}

/* Client calls by index: id, type and name first, then the arguments. */
static void stream_calls(struct oai *q, const cJSON *pending)
{
	cJSON *calls = gh_openai_tool_calls(pending, q->req.client_defs, 1), *it, *d, *tc, *f;

	cJSON_ArrayForEach(it, calls) {
		cJSON *fn = cJSON_GetObjectItemCaseSensitive(it, "function");
		cJSON *first = cJSON_Duplicate(it, 1), *args = cJSON_CreateObject();
		cJSON *first_fn = cJSON_GetObjectItemCaseSensitive(first, "function");

		cJSON_ReplaceItemInObjectCaseSensitive(first_fn, "arguments",
						       cJSON_CreateString(""));
		d = cJSON_CreateObject();
		tc = cJSON_AddArrayToObject(d, "tool_calls");
		cJSON_AddItemToArray(tc, first);
		send_chunk(q, d, NULL);
		cJSON_AddNumberToObject(args, "index", gh_json_int(it, "index", 0));
		f = cJSON_AddObjectToObject(args, "function");
		cJSON_AddStringToObject(f, "arguments", gh_json_str(fn, "arguments"));
		d = cJSON_CreateObject();
		tc = cJSON_AddArrayToObject(d, "tool_calls");
		cJSON_AddItemToArray(tc, args);
		send_chunk(q, d, NULL);
	}
	cJSON_Delete(calls);
}

static void respond_stream(struct oai *q, struct outcome *oc)
{
	cJSON *o;

	q->approvals = oc->approvals;
	if (oc->tail && *oc->tail) {
		q->sep = 1;
		add_text(q, oc->tail, strlen(oc->tail));
	}
	gh_http_stream_hold(&q->hs);
	if (gh_http_stream_begin(&q->hs) != 0)
		return;
	stream_calls(q, oc->calls);
	send_chunk(q, NULL, oc->finish);
	if (q->req.include_usage) {
		o = envelope(q, "chat.completion.chunk");
		cJSON_AddArrayToObject(o, "choices");
		cJSON_AddItemToObject(o, "usage", gh_openai_usage(&oc->usage));
		send_json(q, o);
	}
	gh_http_stream_end(&q->hs, 1);
}

/* A failure: a plain JSON error while nothing was sent; once the stream
 * has begun, an error event and [DONE]. */
static void fail(struct oai *q, const struct gh_err *e)
{
	cJSON *o, *err;

	if (!q->hs.begun) {
		gh_http_error(q->r, e);
		return;
	}
	if (q->hs.gone)
		return;
	o = cJSON_CreateObject();
	err = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(err, "code", gh_code_name(e->code));
	cJSON_AddStringToObject(err, "message", e->msg);
	cJSON_AddNumberToObject(err, "status", gh_http_status_of(e->code));
	send_json(q, o);
	gh_http_stream_end(&q->hs, 1);
}

/* Where the turn ended, for the answer. */
static enum gh_code outcome_of(struct oai *q, const struct gh_run_result *res,
			       struct outcome *oc, struct gh_err *e)
{
	gh_strlcpy(q->run_id, res->run_id, sizeof(q->run_id));
	gh_strlcpy(q->thread_id, res->thread_id, sizeof(q->thread_id));
	oc->usage = res->usage;
	if (res->status == GH_RUN_SUSPENDED)
		return await_approval(q, res, oc, e);
	if (cJSON_GetArraySize(res->pending) > 0) {
		oc->calls = cJSON_Duplicate(res->pending, 1);
		oc->finish = "tool_calls";
	} else {
		oc->finish = gh_openai_finish(res->finish);
	}
	return GH_OK;
}

static void chat_completions(struct gh_req *r)
{
	struct oai q;
	struct outcome oc;
	struct gh_run_result res;
	struct gh_err e;

	memset(&q, 0, sizeof(q));
	memset(&oc, 0, sizeof(oc));
	memset(&res, 0, sizeof(res));
	gh_err_clear(&e);
	q.r = r;
	q.created = gh_now_ms() / 1000;
	q.hs.r = r;
	q.hs.last_write_ns = gh_mono_ns();
	gh_buf_init(&q.text, TEXT_MAX);
	if (parse_request(&q, &e) != GH_OK) {
		if (!r->responded)
			gh_http_error(r, &e);
		goto out;
	}
	/* the stream head waits for the first byte worth sending, so a refusal
	 * before it (policy, conflict, budget) is a plain error with its status */
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
	if (r->extra_headers == q.headers)
		r->extra_headers = NULL;
	gh_run_result_clear(&res);
	cJSON_Delete(oc.calls);
	free(oc.tail);
	gh_buf_free(&q.text);
	cJSON_Delete(q.messages);
	gh_openai_req_free(&q.req);
	cJSON_Delete(q.body);
}

const struct gh_route gh_routes_openai[] = {
	{"POST", "/v1/chat/completions", GH_AUTH_KEY, chat_completions},
	{"GET", "/v1/models", GH_AUTH_KEY, list_models},
	{"GET", "/v1/models/:id", GH_AUTH_KEY, get_model},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
