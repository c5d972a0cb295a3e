/*
 * http_responses.c - the OpenAI Responses API surface, so the openai SDK's
 * responses API and Codex work unchanged:
 *
 *   POST /v1/responses       a Response object, or with "stream": true
 *                            the Responses stream events (response.created
 *                            ... response.completed), numbered by
 *                            sequence_number
 *   GET  /v1/responses/:id   a stored response (the key's own)
 *
 * "model" names an agent, as on /v1/chat/completions. The request's
 * function tools are client tools, governed by the key's policy; the
 * agent's memory and configured tools run inside the gateway and never
 * appear on this wire. The model's client calls come back as function_call
 * items only once the gate let them through; the client's
 * function_call_output items on the next request continue the same run
 * (matched by call_id), and the engine audits each as client_result.
 *
 * A conversation goes on either by resending it ("store": false, as Codex
 * does) or by previous_response_id, which prepends the stored response's
 * conversation. Either way a request ending with function_call_output
 * items continues the waiting run; otherwise the whole conversation goes
 * to a new run with no thread (earlier tool rounds told in words).
 *
 * A call waiting for a person's approval holds the answer for up to
 * server.approval_wait_ms (streams get keep-alive comments); when it is
 * still pending, the output has an mcp_approval_request item per call and
 * a message naming the approval. Wire shapes are in wire_responses.c.
 *
 * Per request, on the CivetWeb worker thread that serves it; nothing here
 * is shared between threads.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "tools.h"
#include "buf.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "run.h"
#include "store_responses.h"
#include "util.h"
#include "wire_responses.h"

#define TEXT_MAX (16u << 20)        /* text one message item carries */
#define CONV_MAX (8u << 20)         /* a stored conversation, as JSON text, before
				     * this request's output */
#define HEADERS_MAX 1024

/* The kinds of item written piece by piece. */
enum { ITEM_NONE, ITEM_MESSAGE, ITEM_REASONING };

/* One Responses request, from parsing to the last byte. */
struct rsp {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *body;                        /* owned */
	struct gh_responses_req req;        /* owned */
	struct gh_stored_response prev;     /* owned: previous_response_id's */
	cJSON *conv;                        /* owned: the conversation so far */
	cJSON *messages;                    /* owned: CoreMessages for the engine */
	struct gh_run_request rq;
	char id[GH_ID_MAX];                 /* resp_... */
	char run_id[GH_ID_MAX];
	int64_t created;                    /* Unix seconds */
	int64_t seq;                        /* the next event's sequence_number */
	cJSON *output;                      /* owned: finished output items */
	/* the message or reasoning item being written */
	char item_id[GH_ID_MAX];
	int item;                           /* ITEM_* */
	struct gh_buf item_text;
	/* streaming */
	struct gh_run_sink sink;
	struct gh_http_stream hs;
	char approvals[256];                /* pending approval ids, comma separated */
	char headers[HEADERS_MAX];
};

/* ---------------------------------------------------------------- headers */

static void add_header(struct gh_buf *b, const char *name, const char *value)
{
	const unsigned char *p;

	if (!value || !*value)
		return;
	for (p = (const unsigned char *)value; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return;
	gh_buf_printf(b, "%s: %s\r\n", name, value);
}

static void set_headers(struct rsp *q)
{
	struct gh_buf b;

	gh_buf_init(&b, sizeof(q->headers) - 1);
	add_header(&b, "X-Gatehouse-Run", q->run_id);
	add_header(&b, "X-Gatehouse-Approval", q->approvals);
	gh_strlcpy(q->headers, b.data ? b.data : "", sizeof(q->headers));
	gh_buf_free(&b);
	q->r->extra_headers = q->headers[0] ? q->headers : NULL;
}

/* ----------------------------------------------------------------- events */

/* A stream event of type, numbered; NULL when not streaming. */
static cJSON *ev_new(struct rsp *q, const char *type)
{
	cJSON *o;

	/* the head and the opening events go first, numbered before this one */
	if (!q->req.stream || gh_http_stream_begin(&q->hs) != 0 || !(o = cJSON_CreateObject()))
		return NULL;
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddNumberToObject(o, "sequence_number", (double)q->seq++);
	return o;
}

static void ev_send(struct rsp *q, cJSON *o)
{
	if (o)
		gh_http_stream_json(&q->hs, gh_json_str(o, "type"), o);
}

static cJSON *response_now(struct rsp *q, const char *status, cJSON *output,
			   const struct gh_run_usage *u, const char *incomplete, cJSON *error)
{
	return gh_responses_object(q->id, q->created, q->agent->id, &q->req, status, output, u,
				   incomplete, error);
}

/* The stream's opening: the head, response.created, response.in_progress. */
static int open_stream(struct gh_http_stream *hs, void *ud)
{
	struct rsp *q = ud;
	cJSON *o;

	set_headers(q);
	if (gh_http_sse_begin(hs->r) != 0)
		return -1;
	if ((o = ev_new(q, "response.created"))) {
		cJSON_AddItemToObject(o, "response", response_now(q, "in_progress", NULL, NULL,
								  NULL, NULL));
		ev_send(q, o);
	}
	if ((o = ev_new(q, "response.in_progress"))) {
		cJSON_AddItemToObject(o, "response", response_now(q, "in_progress", NULL, NULL,
								  NULL, NULL));
		ev_send(q, o);
	}
	return q->hs.gone ? -1 : 0;
}

static int output_index(const struct rsp *q)
{
	return cJSON_GetArraySize(q->output);
}

static cJSON *item_event(struct rsp *q, const char *type, const char *item_id)
{
	cJSON *o = ev_new(q, type);

	if (o) {
		if (item_id)
			cJSON_AddStringToObject(o, "item_id", item_id);
		cJSON_AddNumberToObject(o, "output_index", output_index(q));
	}
	return o;
}

static void item_close(struct rsp *q);

/* An item of kind starts, unless one is open already (another kind is
 * finished first): a message with its output_text part, or a reasoning
 * item with its summary part. */
static void item_open(struct rsp *q, int kind)
{
	int msg = kind == ITEM_MESSAGE;
	cJSON *o;

	if (q->item == kind)
		return;
	item_close(q);
	q->item = kind;
	gh_id_new(msg ? "msg_" : "rs_", q->item_id, sizeof(q->item_id));
	gh_buf_reset(&q->item_text);
	if ((o = item_event(q, "response.output_item.added", NULL))) {
		cJSON_AddItemToObject(o, "item",
				      msg ? gh_responses_message_item(q->item_id, NULL, 0)
					  : gh_responses_reasoning_item(q->item_id, NULL, 0));
		ev_send(q, o);
	}
	if ((o = item_event(q, msg ? "response.content_part.added"
				   : "response.reasoning_summary_part.added", q->item_id))) {
		cJSON_AddNumberToObject(o, msg ? "content_index" : "summary_index", 0);
		cJSON_AddItemToObject(o, "part", msg ? gh_responses_text_part("")
						     : gh_responses_summary_part(""));
		ev_send(q, o);
	}
}

/* Text (or reasoning) to the item of its kind. */
static void item_text(struct rsp *q, int kind, const char *t, size_t len)
{
	int msg = kind == ITEM_MESSAGE;
	cJSON *o;
	char *s;

	if (!t || !len)
		return;
	item_open(q, kind);
	gh_buf_append(&q->item_text, t, len);
	if (!q->req.stream || !(s = malloc(len + 1)))
		return;
	memcpy(s, t, len);
	s[len] = '\0';
	if ((o = item_event(q, msg ? "response.output_text.delta"
				   : "response.reasoning_summary_text.delta", q->item_id))) {
		cJSON_AddNumberToObject(o, msg ? "content_index" : "summary_index", 0);
		cJSON_AddStringToObject(o, "delta", s);
		if (msg)
			cJSON_AddArrayToObject(o, "logprobs");
		ev_send(q, o);
	}
	free(s);
}

/* The open item is finished: its done events, and into output. */
static void item_close(struct rsp *q)
{
	const char *text = q->item_text.data ? q->item_text.data : "";
	int msg = q->item == ITEM_MESSAGE;
	cJSON *o;

	if (q->item == ITEM_NONE)
		return;
	q->item = ITEM_NONE;
	if ((o = item_event(q, msg ? "response.output_text.done"
				   : "response.reasoning_summary_text.done", q->item_id))) {
		cJSON_AddNumberToObject(o, msg ? "content_index" : "summary_index", 0);
		cJSON_AddStringToObject(o, "text", text);
		if (msg)
			cJSON_AddArrayToObject(o, "logprobs");
		ev_send(q, o);
	}
	if ((o = item_event(q, msg ? "response.content_part.done"
				   : "response.reasoning_summary_part.done", q->item_id))) {
		cJSON_AddNumberToObject(o, msg ? "content_index" : "summary_index", 0);
		cJSON_AddItemToObject(o, "part", msg ? gh_responses_text_part(text)
						     : gh_responses_summary_part(text));
		ev_send(q, o);
	}
	if ((o = item_event(q, "response.output_item.done", NULL))) {
		cJSON_AddItemToObject(o, "item", msg ? gh_responses_message_item(q->item_id, text, 1)
						     : gh_responses_reasoning_item(q->item_id, text, 1));
		ev_send(q, o);
	}
	cJSON_AddItemToArray(q->output, msg ? gh_responses_message_item(q->item_id, text, 1)
					    : gh_responses_reasoning_item(q->item_id, text, 1));
	gh_buf_reset(&q->item_text);
}

/* A whole message item at once. */
static void add_message(struct rsp *q, const char *text)
{
	if (!text || !*text)
		return;
	item_close(q);
	item_text(q, ITEM_MESSAGE, text, strlen(text));
	item_close(q);
}

/* A client call the gate let through, as a function_call item. */
static void add_call(struct rsp *q, const cJSON *call)
{
	char id[GH_ID_MAX];
	char *args = gh_responses_call_args(call);
	cJSON *o;

	if (!args)
		return;
	item_close(q);
	gh_id_new("fc_", id, sizeof(id));
	if ((o = item_event(q, "response.output_item.added", NULL))) {
		cJSON_AddItemToObject(o, "item", gh_responses_call_item(id, call,
									q->req.client_defs, 0));
		ev_send(q, o);
	}
	if ((o = item_event(q, "response.function_call_arguments.delta", id))) {
		cJSON_AddStringToObject(o, "delta", args);
		ev_send(q, o);
	}
	if ((o = item_event(q, "response.function_call_arguments.done", id))) {
		cJSON_AddStringToObject(o, "arguments", args);
		ev_send(q, o);
	}
	if ((o = item_event(q, "response.output_item.done", NULL))) {
		cJSON_AddItemToObject(o, "item", gh_responses_call_item(id, call,
									q->req.client_defs, 1));
		ev_send(q, o);
	}
	cJSON_AddItemToArray(q->output, gh_responses_call_item(id, call, q->req.client_defs, 1));
	free(args);
}

/* A call waiting on approval id, as an mcp_approval_request item. */
static void add_approval(struct rsp *q, const char *id, const char *name, const cJSON *args)
{
	cJSON *o;

	item_close(q);
	if ((o = item_event(q, "response.output_item.added", NULL))) {
		cJSON_AddItemToObject(o, "item", gh_responses_approval_item(id, name, args));
		ev_send(q, o);
	}
	if ((o = item_event(q, "response.output_item.done", NULL))) {
		cJSON_AddItemToObject(o, "item", gh_responses_approval_item(id, name, args));
		ev_send(q, o);
	}
	cJSON_AddItemToArray(q->output, gh_responses_approval_item(id, name, args));
}

static int sink_tick(void *ud)
{
	struct rsp *q = ud;

	return gh_http_stream_tick(&q->hs);
}

/* The engine's events: text and reasoning go out as they come, a step
 * after a tool round starts new items, tool rounds stay inside. */
static int sink_event(void *ud, const struct gh_run_event *ev)
{
	struct rsp *q = ud;
	char line[200];

	if (q->hs.gone)
		return 1;
	if (!q->run_id[0] && ev->run_id)
		gh_strlcpy(q->run_id, ev->run_id, sizeof(q->run_id));
	switch (ev->kind) {
	case GH_EV_TEXT_DELTA:
		item_text(q, ITEM_MESSAGE, ev->text, ev->len);
		break;
	case GH_EV_REASONING_DELTA:
		/* shown as the reasoning's summary; a signature alone adds nothing */
		item_text(q, ITEM_REASONING, ev->text, ev->len);
		break;
	case GH_EV_STEP_START:
		item_close(q);
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

/* Calls still waiting on a person: an mcp_approval_request item each, and a
 * message an unmodified client shows. */
static void pending_note(struct rsp *q, const struct gh_run_view *v)
{
	const struct gh_run_call *c;
	struct gh_buf ids;
	char *note;
	size_t i = 0;

	while ((c = gh_answer_next_waiting(v, &i, NULL)))
		add_approval(q, c->approval_id, c->name, c->args);
	gh_buf_init(&ids, sizeof(q->approvals) - 1);
	note = gh_answer_waiting_note(v, &ids);
	gh_strlcpy(q->approvals, ids.data ? ids.data : "", sizeof(q->approvals));
	add_message(q, note);
	free(note);
	gh_buf_free(&ids);
}

static int wait_gone(void *ud)
{
	struct rsp *q = ud;

	return q->req.stream ? gh_http_stream_tick(&q->hs) : gh_http_client_gone(q->r);
}

/* Where a run stands after a wait for a decision (wait_rc: GH_OK settled,
 * GH_E_TIMEOUT still pending), for the answer. */
static enum gh_code settled(struct rsp *q, const struct gh_run_view *v, enum gh_code wait_rc,
			    enum gh_run_finish *finish, struct gh_run_usage *usage,
			    struct gh_err *e)
{
	enum gh_code rc = gh_answer_settled(v, wait_rc, e);

	if (rc != GH_OK)
		return rc;
	if (v->status == GH_RUN_SUSPENDED) {
		pending_note(q, v);
		return GH_OK;
	}
	*usage = v->usage;
	if (v->status == GH_RUN_COMPLETED) {
		add_message(q, v->text);
		*finish = v->finish;
	} else {
		cJSON *calls = gh_run_view_pending_json(v), *c;

		cJSON_ArrayForEach(c, calls)
			add_call(q, c);
		cJSON_Delete(calls);
	}
	return GH_OK;
}

/* The run is suspended on approvals: wait (bounded by
 * server.approval_wait_ms) for the decision, which the background resumer
 * carries out, then answer with where the run got to. */
static enum gh_code await_approval(struct rsp *q, const struct gh_run_result *res,
				   enum gh_run_finish *finish, struct gh_run_usage *usage,
				   struct gh_err *e)
{
	struct gh_run_view v;
	enum gh_code rc = gh_answer_await(q->r->app, q->r->who.key.owner, res->run_id, wait_gone,
					  q, &v, e);

	if (rc == GH_OK)
		rc = settled(q, &v, GH_OK, finish, usage, e);
	gh_run_view_clear(&v);
	return rc;
}

/* The input ends with the client's decision on an approval: it is
 * recorded, and the run goes on here (the caller may decide it) or, when
 * an admin must, the answer waits for the run like any approval. *res is
 * the continuation's result when it ran here (*ran = 1). */
static enum gh_code answer_approval(struct rsp *q, struct gh_run_result *res, int *ran,
				    enum gh_run_finish *finish, struct gh_run_usage *usage,
				    struct gh_err *e)
{
	struct gh_tool_answer ta;
	struct gh_answer_out out;
	enum gh_code rc;

	memset(&ta, 0, sizeof(ta));
	ta.approval_id = q->req.approval_id;
	ta.approve = q->req.approve;
	ta.reason = q->req.approval_reason;
	ta.mode = GH_ANSWER_CONTINUE;
	ta.wait_ms = gh_app_cfg(q->r->app)->server.approval_wait_ms;
	ta.gone = wait_gone;
	ta.ud = q;
	*ran = 0;
	rc = gh_answer_tool_call(q->r->app, &q->r->who, &ta, &q->sink, &out, e);
	if (out.approval.run_id[0])
		gh_strlcpy(q->run_id, out.approval.run_id, sizeof(q->run_id));
	if (rc == GH_OK && out.continued) {
		*res = out.result;
		memset(&out.result, 0, sizeof(out.result));
		*ran = 1;
	} else if (rc == GH_OK && out.waited) {
		rc = settled(q, &out.view, out.wait_rc, finish, usage, e);
	}
	gh_answer_out_clear(&out);
	return rc;
}

/* --------------------------------------------------------------- request */

/* The agent a "model" names, when the caller's policy allows it. */
static enum gh_code find_agent(struct rsp *q, struct gh_err *e)
{
	enum gh_code rc = gh_run_agent(q->r->app, &q->r->who, q->req.model, &q->agent, e);

	if (rc == GH_E_NOTFOUND)
		return gh_err_set(e, GH_E_NOTFOUND, "model \"%s\" does not exist: a model is an "
				  "agent id, and GET /v1/models lists the ones this key may use",
				  q->req.model);
	return rc;
}

static void tool_removed(void *ud, const char *name, const char *rule)
{
	struct rsp *q = ud;

	gh_info("%s /v1/responses: tool %s not offered to the model: %s", q->r->id, name, rule);
}

static enum gh_code parse_request(struct rsp *q, struct gh_err *e)
{
	struct gh_req *r = q->r;
	enum gh_code rc;
	int continuation;

	if ((rc = gh_http_body_object(r, &q->body, e)) != GH_OK ||
	    (rc = gh_responses_parse(q->body, &q->req, e)) != GH_OK ||
	    (rc = find_agent(q, e)) != GH_OK)
		return rc;
	if (q->req.skipped[0])
		gh_info("%s: tools of types gatehouse does not run were left out: %s", r->id,
			q->req.skipped);
	if (q->req.previous_id) {
		rc = gh_store_response_get(r->app->store, r->who.key.id, q->req.previous_id,
					   &q->prev, e);
		if (rc == GH_E_NOTFOUND)
			return gh_err_set(e, GH_E_NOTFOUND, "previous_response_id: response \"%s\" "
					  "not found", q->req.previous_id);
		if (rc != GH_OK)
			return rc;
	}
	if ((rc = gh_responses_conversation(q->prev.conversation, q->req.input,
					    q->req.instructions, &q->conv, &q->messages,
					    &continuation, e)) != GH_OK)
		return rc;
	if (q->req.store) {
		/* each stored response keeps its whole conversation: bounded */
		char *t = gh_json_dump(q->conv);
		size_t n = t ? strlen(t) : 0;

		free(t);
		if (!t)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		if (n > CONV_MAX)
			return gh_err_set(e, GH_E_TOOBIG, "the conversation (%zu bytes) is larger "
					  "than gatehouse stores (%u bytes); continue it with "
					  "\"store\": false, resending it whole", n, CONV_MAX);
	}
	/* a continuation goes on in its run; anything else is a new one without
	 * a thread: the conversation is the client's (or its stored chain) */
	q->rq.stateless = !continuation;
	q->rq.who = &r->who;
	q->rq.agent = q->agent;
	/* coding agents declare their whole tool set: what the policy refuses
	 * is kept from the model, not a 403 for the request */
	gh_tools_client_defs_withhold(r->who.policy, q->req.client_defs, tool_removed, q);
	q->rq.client_defs = q->req.client_defs;
	q->rq.stream = q->req.stream;
	q->rq.surface = "responses";
	q->rq.messages = q->messages;
	return GH_OK;
}

/* ---------------------------------------------------------------- answer */

static const char *incomplete_reason(enum gh_run_finish f)
{
	switch (f) {
	case GH_RUN_FINISH_LENGTH:
	case GH_RUN_FINISH_MAX_STEPS:
		return "max_output_tokens";
	case GH_RUN_FINISH_CONTENT_FILTER:
		return "content_filter";
	case GH_RUN_FINISH_STOP:
	case GH_RUN_FINISH_TOOL_CALLS:
	case GH_RUN_FINISH_SUSPENDED:
		break;
	}
	return NULL;
}

/* Keeps the response for GET and previous_response_id: its conversation is
 * what came before, this input and its output. */
static enum gh_code store_response(struct rsp *q, const cJSON *object, struct gh_err *e)
{
	struct gh_stored_response s;
	enum gh_code rc;

	memset(&s, 0, sizeof(s));
	if ((rc = gh_responses_items(q->output, "output", q->conv, e)) != GH_OK)
		return rc;
	gh_strlcpy(s.id, q->id, sizeof(s.id));
	gh_strlcpy(s.owner, q->r->who.key.owner, sizeof(s.owner));
	gh_strlcpy(s.key_id, q->r->who.key.id, sizeof(s.key_id));
	gh_strlcpy(s.agent_id, q->agent->id, sizeof(s.agent_id));
	gh_strlcpy(s.run_id, q->run_id, sizeof(s.run_id));
	if (q->req.previous_id)
		gh_strlcpy(s.previous_id, q->req.previous_id, sizeof(s.previous_id));
	s.body = (cJSON *)(uintptr_t)object;
	s.conversation = q->conv;
	s.created_at = q->created * 1000;
	return gh_store_response_insert(q->r->app->store, &s, e);
}

/* A failure: a plain error while nothing was sent; once the stream has
 * begun, response.failed with what was written so far. */
static void fail(struct rsp *q, const struct gh_err *e)
{
	cJSON *o, *err;

	if (!q->hs.begun) {
		gh_http_error(q->r, e);
		return;
	}
	if (q->hs.gone)
		return;
	item_close(q);
	if ((o = ev_new(q, "response.failed"))) {
		err = cJSON_CreateObject();
		cJSON_AddStringToObject(err, "code", gh_code_name(e->code));
		cJSON_AddStringToObject(err, "message", e->msg);
		cJSON_AddItemToObject(o, "response",
				      response_now(q, "failed", cJSON_Duplicate(q->output, 1), NULL,
						   NULL, err));
		ev_send(q, o);
	}
	gh_http_stream_end(&q->hs, 0);
}

static void create(struct gh_req *r)
{
	struct rsp q;
	struct gh_run_result res;
	struct gh_run_usage usage;
	enum gh_run_finish finish;
	const char *incomplete;
	struct gh_err e;
	enum gh_code rc;
	int ran;
	cJSON *obj = NULL, *c;

	memset(&q, 0, sizeof(q));
	memset(&res, 0, sizeof(res));
	gh_err_clear(&e);
	q.r = r;
	q.created = gh_now_ms() / 1000;
	q.hs.r = r;
	q.hs.last_write_ns = gh_mono_ns();
	gh_buf_init(&q.item_text, TEXT_MAX);
	gh_id_new("resp_", q.id, sizeof(q.id));
	if (!(q.output = cJSON_CreateArray())) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (parse_request(&q, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	/* the head waits for the first byte worth sending, so a refusal before
	 * it (policy, conflict, budget) is a plain error with its status */
	if (gh_http_run_start(r, q.req.stream, &q.hs, open_stream, sink_event, sink_tick, &q,
			      &q.sink) != 0)
		goto out;
	usage = (struct gh_run_usage){0, 0};
	finish = GH_RUN_FINISH_STOP;
	ran = 1;
	if (q.req.approval_id)
		rc = answer_approval(&q, &res, &ran, &finish, &usage, &e);
	else
		rc = gh_run_generate(r->app, &q.rq, &q.sink, &res, &e);
	if (rc != GH_OK) {
		fail(&q, &e);
		goto out;
	}
	item_close(&q);
	/* a decision waited for has its answer already: where the run got to */
	if (ran) {
		gh_strlcpy(q.run_id, res.run_id, sizeof(q.run_id));
		usage = res.usage;
		finish = res.finish;
		if (res.status != GH_RUN_SUSPENDED) {
			cJSON_ArrayForEach(c, res.pending)
				add_call(&q, c);
		} else if (await_approval(&q, &res, &finish, &usage, &e) != GH_OK) {
			fail(&q, &e);
			goto out;
		}
	}
	if (q.req.stream)
		gh_http_stream_hold(&q.hs); /* the closing events leave together */
	item_close(&q);
	incomplete = incomplete_reason(finish);
	obj = response_now(&q, incomplete ? "incomplete" : "completed",
			   cJSON_Duplicate(q.output, 1), &usage, incomplete, NULL);
	if (!obj) {
		gh_err_set(&e, GH_E_NOMEM, "out of memory");
		fail(&q, &e);
		goto out;
	}
	if (q.req.store && store_response(&q, obj, &e) != GH_OK) {
		fail(&q, &e);
		goto out;
	}
	if (!q.req.stream) {
		set_headers(&q);
		gh_http_json(r, 200, obj);
		goto out;
	}
	if (gh_http_stream_begin(&q.hs) == 0) {
		cJSON *o = ev_new(&q, incomplete ? "response.incomplete" : "response.completed");

		if (o) {
			cJSON_AddItemToObject(o, "response", obj);
			obj = NULL;
			ev_send(&q, o);
		}
		gh_http_stream_end(&q.hs, 0);
	}
out:
	if (r->extra_headers == q.headers)
		r->extra_headers = NULL;
	cJSON_Delete(obj);
	gh_run_result_clear(&res);
	gh_buf_free(&q.item_text);
	cJSON_Delete(q.output);
	cJSON_Delete(q.messages);
	cJSON_Delete(q.conv);
	gh_stored_response_clear(&q.prev);
	gh_responses_req_free(&q.req);
	cJSON_Delete(q.body);
}

static void get_response(struct gh_req *r)
{
	struct gh_stored_response s;
	struct gh_err e;

	if (gh_store_response_get(r->app->store, r->who.key.id, r->params[0], &s, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	gh_http_json(r, 200, s.body);
	gh_stored_response_clear(&s);
}

const struct gh_route gh_routes_responses[] = {
	{"POST", "/v1/responses", GH_AUTH_KEY, create},
	{"GET", "/v1/responses/:id", GH_AUTH_KEY, get_response},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
