/*
 * http_native.c - the native agent API, wire-compatible with Mastra's
 * client-js (shapes in wire_native.c):
 *   GET  /api/agents                      GET /api/agents/:id
 *   POST /api/agents/:id/generate         {text, finishReason, toolCalls, ...}
 *   POST /api/agents/:id/stream           SSE chunks {type, runId, from, payload}, [DONE]
 *   POST /api/agents/:id/approve-tool-call | decline-tool-call   {runId, toolCallId} (SSE)
 *   POST /api/agents/:id/approve-tool-call-generate | decline-tool-call-generate (JSON)
 *
 * A translator: parse the body into a run request, call the engine (run.h,
 * answer.h), write its events and result back. While the run waits on an
 * upstream the stream's tick notices a client that went away (the run is
 * then cancelled and the upstream transfer aborted) and sends heartbeats.
 * One stream pins one CivetWeb worker; streams are capped
 * (server.max_streams). Per request, on the worker thread.
 */
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "approvals.h"
#include "http.h"
#include "json.h"
#include "run.h"
#include "tools.h"
#include "wire_native.h"

/* The largest chunk built (as gh_json_dump allows): payloads are bounded
 * where they are made. */
#define CHUNK_MAX ((size_t)1 << 30)

/* ---------------------------------------------------------------- agents */

static cJSON *tool_json(const char *name, const char *desc, const cJSON *schema,
			const cJSON *annotations)
{
	cJSON *t = cJSON_CreateObject();

	if (!t)
		return NULL;
	cJSON_AddStringToObject(t, "id", name);
	cJSON_AddStringToObject(t, "description", desc ? desc : "");
	cJSON_AddItemToObject(t, "inputSchema", schema ? cJSON_Duplicate(schema, 1)
						       : cJSON_CreateObject());
	if (annotations)
		cJSON_AddItemToObject(t, "annotations", cJSON_Duplicate(annotations, 1));
	return t;
}

/* An agent as GET /api/agents shows it: only the tools its callers' policy
 * lets them see. */
static cJSON *agent_json(struct gh_req *r, const struct gh_agent_conf *a)
{
	cJSON *o = cJSON_CreateObject(), *tools;
	struct gh_toolset ts;
	struct gh_err e;
	size_t i;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", a->id);
	cJSON_AddStringToObject(o, "name", a->name);
	cJSON_AddStringToObject(o, "description", a->description ? a->description : "");
	cJSON_AddStringToObject(o, "instructions", a->instructions ? a->instructions : "");
	cJSON_AddStringToObject(o, "provider", a->prov->name);
	cJSON_AddStringToObject(o, "modelId", a->model);
	cJSON_AddNumberToObject(o, "maxSteps", (double)a->max_steps);
	cJSON_AddBoolToObject(o, "memory", a->memory_enabled);
	tools = cJSON_AddObjectToObject(o, "tools");
	if (gh_toolset_build(r->app->cfg, r->app->mcp, a, r->who.policy, NULL, &ts, &e) == GH_OK) {
		for (i = 0; i < ts.n; i++) {
			const struct gh_tool *t = &ts.v[i];

			if (!t->offered)
				continue;
			cJSON_AddItemToObject(tools, t->name,
					      tool_json(t->name, t->description, t->schema,
							t->annotations));
		}
		gh_toolset_free(&ts);
	}
	return o;
}

static void list_agents(struct gh_req *r)
{
	cJSON *o = cJSON_CreateObject();
	size_t i;

	for (i = 0; i < r->app->cfg->nagents; i++) {
		const struct gh_agent_conf *a = &r->app->cfg->agents[i];

		if (r->who.admin || gh_policy_agent_allowed(r->who.policy, a->id))
			cJSON_AddItemToObject(o, a->id, agent_json(r, a));
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* The agent named id when the caller may use it; otherwise answers 404/403
 * and returns NULL. */
static const struct gh_agent_conf *find_agent(struct gh_req *r, const char *id)
{
	const struct gh_agent_conf *a;
	struct gh_err e;

	if (gh_run_agent(r->app, &r->who, id, &a, &e) != GH_OK) {
		gh_http_error(r, &e);
		return NULL;
	}
	return a;
}

static void get_agent(struct gh_req *r)
{
	const struct gh_agent_conf *a = find_agent(r, r->params[0]);
	cJSON *o;

	if (!a)
		return;
	o = agent_json(r, a);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* -------------------------------------------------------------- generate */

/* The agent the path names and the request body (the caller frees it);
 * NULL after answering when either is refused. */
static const struct gh_agent_conf *agent_and_body(struct gh_req *r, cJSON **body)
{
	const struct gh_agent_conf *a = find_agent(r, r->params[0]);
	struct gh_err e;

	*body = NULL;
	if (a && gh_http_body_object(r, body, &e) != GH_OK) {
		gh_http_error(r, &e);
		return NULL;
	}
	return a;
}

/* A generate/stream request parsed into nr (free it and the body after);
 * -1 after answering when it is refused. */
static int parse_run(struct gh_req *r, cJSON **body, struct gh_native_req *nr)
{
	const struct gh_agent_conf *a = agent_and_body(r, body);
	struct gh_err e;

	memset(nr, 0, sizeof(*nr));
	if (!a)
		return -1;
	if (gh_native_parse(*body, &r->who, a, nr, &e) != GH_OK) {
		gh_http_error(r, &e);
		return -1;
	}
	return 0;
}

static void generate(struct gh_req *r)
{
	struct gh_native_req nr;
	struct gh_run_result res;
	struct gh_err e;
	cJSON *body, *out;

	if (parse_run(r, &body, &nr) != 0)
		goto out;
	if (gh_run_generate(r->app, &nr.rq, NULL, &res, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	out = gh_wire_native_result(&res);
	gh_http_json(r, 200, out);
	cJSON_Delete(out);
	gh_run_result_clear(&res);
out:
	gh_native_req_free(&nr);
	cJSON_Delete(body);
}

/* ---------------------------------------------------------------- stream */

/* A native SSE stream bound to a request. */
struct native_stream {
	struct gh_http_stream hs;
	struct gh_run_sink sink;      /* hand to the engine */
	int finished;                 /* a finish or error chunk was sent */
};

static int send_chunk(struct native_stream *s, const struct gh_run_event *ev)
{
	struct gh_buf b;

	if (!gh_wire_native_type(ev->kind))
		return s->hs.gone;
	if (ev->kind == GH_EV_FINISH || ev->kind == GH_EV_ERROR)
		s->finished = 1;
	gh_buf_init(&b, CHUNK_MAX);
	/* out of memory ends the stream rather than lose a chunk */
	if (gh_wire_native_chunk(ev, &b) != GH_BUF_OK)
		s->hs.gone = 1;
	else
		gh_http_stream_send(&s->hs, NULL, b.data, b.len);
	gh_buf_free(&b);
	return s->hs.gone;
}

static int sink_event(void *ud, const struct gh_run_event *ev)
{
	struct native_stream *s = ud;

	return s->hs.gone ? 1 : send_chunk(s, ev);
}

static int sink_tick(void *ud)
{
	struct native_stream *s = ud;

	return gh_http_stream_tick(&s->hs);
}

/* Takes a stream slot and sets up the run's sink; -1 when refused
 * (already answered 503). Nothing is sent yet. */
static int stream_start(struct gh_req *r, struct native_stream *s)
{
	memset(s, 0, sizeof(*s));
	if (gh_http_stream_start(r, &s->hs) != 0)
		return -1;
	s->sink.event = sink_event;
	s->sink.tick = sink_tick;
	s->sink.ud = s;
	gh_http_stream_wake(r, &s->sink.wake_fd, &s->sink.tick_ms);
	return 0;
}

/* stream_start, and the SSE head; -1 when refused or the client is gone. */
static int stream_begin(struct gh_req *r, struct native_stream *s)
{
	return stream_start(r, s) != 0 ? -1 : gh_http_stream_begin(&s->hs);
}

/* Sends an error chunk for e unless the stream already ended: the engine
 * already sent "error" when the run had begun. */
static void stream_fail(struct native_stream *s, const char *run_id, const struct gh_err *e)
{
	struct gh_buf b;

	if (s->hs.gone || e->code == GH_E_CANCELLED || s->finished)
		return;
	gh_buf_init(&b, CHUNK_MAX);
	if (gh_wire_native_envelope("error", run_id ? run_id : "", &b) == GH_BUF_OK &&
	    gh_wire_native_error(e->code, e->msg, gh_http_status_of(e->code), &b) == GH_BUF_OK &&
	    gh_buf_putc(&b, '}') == GH_BUF_OK)
		gh_http_stream_send(&s->hs, NULL, b.data, b.len);
	gh_buf_free(&b);
	s->finished = 1;
}

static void stream(struct gh_req *r)
{
	struct gh_native_req nr;
	struct native_stream s;
	struct gh_run_result res;
	struct gh_err e;
	cJSON *body;

	/* everything that can fail as a plain HTTP error does so before the
	 * stream starts */
	if (parse_run(r, &body, &nr) != 0)
		goto out;
	if (stream_begin(r, &s) != 0)
		goto out;
	nr.rq.stream = 1;
	if (gh_run_generate(r->app, &nr.rq, &s.sink, &res, &e) != GH_OK)
		/* a run that had begun already told the client; one that
		 * failed up front (policy, conflict) says it here */
		stream_fail(&s, nr.rq.run_id, &e);
	else
		gh_run_result_clear(&res);
	gh_http_stream_end(&s.hs, 1);
out:
	gh_native_req_free(&nr);
	cJSON_Delete(body);
}

/* ------------------------------------------------ approve/decline a call */

static int client_gone(void *ud)
{
	return gh_http_client_gone(ud);
}

/* The finish chunk for a run an admin's decision moved on in the
 * background: its result as the generate response shows it. */
static void send_settled(struct native_stream *s, const struct gh_answer_out *out)
{
	cJSON *o = gh_wire_native_view_result(&out->view), *p = cJSON_CreateObject(), *sr;
	struct gh_buf b;

	if (o && p) {
		sr = cJSON_AddObjectToObject(p, "stepResult");
		cJSON_AddStringToObject(sr, "reason", gh_json_str(o, "finishReason"));
		cJSON_AddItemToObject(p, "output", cJSON_Duplicate(o, 1));
		cJSON_AddStringToObject(p, "status", gh_run_status_name(out->view.status));
		cJSON_AddStringToObject(p, "approval", out->approval.status);
		gh_buf_init(&b, CHUNK_MAX);
		if (gh_wire_native_envelope("finish", out->approval.run_id, &b) == GH_BUF_OK &&
		    gh_json_print(p, &b) == GH_BUF_OK && gh_buf_putc(&b, '}') == GH_BUF_OK)
			gh_http_stream_send(&s->hs, NULL, b.data, b.len);
		gh_buf_free(&b);
	}
	cJSON_Delete(p);
	cJSON_Delete(o);
}

/* The JSON answer: the continuation's result, or the settled run with the
 * approval as it stands. */
static void answer_json(struct gh_req *r, const struct gh_answer_out *out)
{
	cJSON *o;

	if (out->continued) {
		o = gh_wire_native_result(&out->result);
	} else {
		o = gh_wire_native_view_result(&out->view);
		if (o && out->approval.status[0])
			cJSON_AddItemToObject(o, "approval", gh_approval_json(&out->approval));
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void tool_call_decision(struct gh_req *r, int approve, int as_stream)
{
	struct gh_tool_answer ta;
	struct gh_answer_out out;
	struct native_stream s;
	struct gh_err e;
	cJSON *body;
	enum gh_code rc;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	if (!agent_and_body(r, &body)) {
		cJSON_Delete(body);
		return;
	}
	memset(&ta, 0, sizeof(ta));
	ta.tool_call_id = gh_json_str(body, "toolCallId");
	ta.run_id = gh_json_str(body, "runId");
	ta.reason = gh_json_str(body, "reason");
	ta.approve = approve;
	ta.mode = GH_ANSWER_CONTINUE;
	ta.wait_ms = r->app->cfg->server.approval_wait_ms;
	ta.gone = client_gone;
	ta.ud = r;
	if (!ta.tool_call_id) {
		gh_http_errorf(r, GH_E_BADREQ, "toolCallId: required");
		goto out;
	}
	/* the stream's head waits for the first chunk, so a refusal of the
	 * answer itself is a plain error with its status */
	if (as_stream && stream_start(r, &s) != 0)
		goto out;
	rc = gh_answer_tool_call(r->app, &r->who, &ta, as_stream ? &s.sink : NULL, &out, &e);
	if (rc != GH_OK && !(as_stream && out.continued))
		gh_http_error(r, &e);
	else if (!as_stream)
		answer_json(r, &out);
	else if (rc != GH_OK)
		stream_fail(&s, out.approval.run_id, &e);
	else if (out.waited)
		send_settled(&s, &out);
	if (as_stream && (s.hs.begun || !r->responded))
		gh_http_stream_end(&s.hs, 1);
out:
	gh_answer_out_clear(&out);
	cJSON_Delete(body);
}

static void approve_tool_call(struct gh_req *r)
{
	tool_call_decision(r, 1, 1);
}

static void decline_tool_call(struct gh_req *r)
{
	tool_call_decision(r, 0, 1);
}

static void approve_tool_call_json(struct gh_req *r)
{
	tool_call_decision(r, 1, 0);
}

static void decline_tool_call_json(struct gh_req *r)
{
	tool_call_decision(r, 0, 0);
}

const struct gh_route gh_routes_native[] = {
	{"GET", "/api/agents", GH_AUTH_KEY, list_agents},
	{"GET", "/api/agents/:id", GH_AUTH_KEY, get_agent},
	{"POST", "/api/agents/:id/generate", GH_AUTH_KEY, generate},
	{"POST", "/api/agents/:id/generate-legacy", GH_AUTH_KEY, generate},
	{"POST", "/api/agents/:id/stream", GH_AUTH_KEY, stream},
	{"POST", "/api/agents/:id/stream-legacy", GH_AUTH_KEY, stream},
	{"POST", "/api/agents/:id/approve-tool-call", GH_AUTH_KEY, approve_tool_call},
	{"POST", "/api/agents/:id/decline-tool-call", GH_AUTH_KEY, decline_tool_call},
	{"POST", "/api/agents/:id/approve-tool-call-generate", GH_AUTH_KEY, approve_tool_call_json},
	{"POST", "/api/agents/:id/decline-tool-call-generate", GH_AUTH_KEY, decline_tool_call_json},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
