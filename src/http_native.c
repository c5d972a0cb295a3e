/*
 * http_native.c - the native agent API, wire-compatible with Mastra's
 * client-js (shapes in wire_native.c):
 *   GET  /api/agents                      GET /api/agents/:id
 *   POST /api/agents/:id/generate         {text, finishReason, toolCalls, ...}
 *   POST /api/agents/:id/stream           SSE chunks {type, runId, from, payload}, [DONE]
 *   POST /api/agents/:id/approve-tool-call | decline-tool-call   {runId, toolCallId} (SSE)
 *   POST /api/agents/:id/approve-tool-call-generate | decline-tool-call-generate (JSON)
 * and the routes Mastra 1.x clients use to pick runs up again:
 *   GET  /api/agents/:id/suspended-runs   the key's runs waiting on an approval or client
 *   POST /api/agents/:id/send-tool-approval   {toolCallId, approved} (JSON, background)
 *   POST /api/agents/:id/resume-stream    {runId, resumeData, toolCallId?} (SSE)
 *   POST /api/agents/:id/observe          {runId, offset?}: the run's events again (SSE)
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
#include "run_journal.h"
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
	if (gh_toolset_build(gh_app_cfg(r->app), gh_app_mcp(r->app), a, r->who.policy, NULL, &ts, &e) == GH_OK) {
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

	for (i = 0; i < gh_app_cfg(r->app)->nagents; i++) {
		const struct gh_agent_conf *a = &gh_app_cfg(r->app)->agents[i];

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

/* How many tool calls a stream remembers having shown (see send_chunk). */
#define SHOWN_MAX 32

/* A native SSE stream bound to a request. */
struct native_stream {
	struct gh_http_stream hs;
	struct gh_run_sink sink;      /* hand to the engine */
	int finished;                 /* a finish or error chunk was sent */
	char (*shown)[GH_ID_MAX];     /* tool calls this stream showed (made on
				       * the first: most streams show none, and
				       * a stream's worker keeps its stack) */
	size_t nshown;
};

static int shown(struct native_stream *s, const char *id, int add)
{
	size_t i;

	for (i = 0; i < s->nshown; i++)
		if (!strcmp(s->shown[i], id))
			return 1;
	if (add && !s->shown)
		s->shown = calloc(SHOWN_MAX, sizeof(*s->shown));
	/* out of memory: the call may be shown twice, never not at all */
	if (add && s->shown && s->nshown < SHOWN_MAX)
		gh_strlcpy(s->shown[s->nshown++], id, GH_ID_MAX);
	return 0;
}

/* Ends the stream (when it was started) and frees what it kept. */
static void stream_end(struct native_stream *s)
{
	gh_http_stream_end(&s->hs, 1);
	free(s->shown);
	s->shown = NULL;
}

static int send_chunk(struct native_stream *s, const struct gh_run_event *ev);

/* Mastra's client builds its messages from one stream and refuses a
 * tool-result whose tool-call it did not see: a stream that continues a
 * run (after an approval was decided) shows the call first. */
static int show_call(struct native_stream *s, const struct gh_run_event *ev)
{
	struct gh_run_event call;

	if (!ev->call || !ev->call->id)
		return 0;
	if (ev->kind == GH_EV_TOOL_CALL) {
		shown(s, ev->call->id, 1);
		return 0;
	}
	if (ev->kind != GH_EV_TOOL_RESULT || shown(s, ev->call->id, 1))
		return 0;
	call = *ev;
	call.kind = GH_EV_TOOL_CALL;
	return send_chunk(s, &call);
}

static int send_chunk(struct native_stream *s, const struct gh_run_event *ev)
{
	struct gh_buf b;

	if (!gh_wire_native_type(ev->kind))
		return s->hs.gone;
	if (show_call(s, ev))
		return s->hs.gone;
	if (ev->kind == GH_EV_FINISH || ev->kind == GH_EV_ERROR) {
		/* the run's last event: it leaves with [DONE] and the end of
		 * the response, one write and one wake-up of the client */
		s->finished = 1;
		gh_http_stream_hold(&s->hs);
	}
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
 * (already answered 503). Nothing is sent yet: the head leaves with the
 * first event (the run's opening events leave together, after the
 * model's request), or with the error of a run that failed up front. */
static int stream_start(struct gh_req *r, struct native_stream *s)
{
	memset(s, 0, sizeof(*s));
	return gh_http_run_start(r, 1, &s->hs, NULL, sink_event, sink_tick, s, &s->sink);
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

/* A stream request's working state, on the heap: a stream's worker keeps
 * every stack page it touched for as long as it lives. */
struct stream_work {
	struct gh_native_req nr;
	struct native_stream s;
	struct gh_run_result res;
	struct gh_err e;
};

/* Streams the run body asks for (a stream request of agent params[0]). */
static void stream_run(struct gh_req *r, const struct gh_agent_conf *a, const cJSON *body)
{
	struct stream_work *w = calloc(1, sizeof(*w));

	if (!w) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	/* everything that can fail as a plain HTTP error does so before the
	 * stream starts */
	if (gh_native_parse(body, &r->who, a, &w->nr, &w->e) != GH_OK) {
		gh_http_error(r, &w->e);
		goto out;
	}
	if (stream_start(r, &w->s) != 0)
		goto out;
	w->nr.rq.stream = 1;
	if (gh_run_generate(r->app, &w->nr.rq, &w->s.sink, &w->res, &w->e) != GH_OK)
		/* a run that had begun already told the client; one that
		 * failed up front (policy, conflict) says it here */
		stream_fail(&w->s, w->nr.rq.run_id, &w->e);
	else
		gh_run_result_clear(&w->res);
	stream_end(&w->s);
out:
	gh_native_req_free(&w->nr);
	free(w);
}

static void stream(struct gh_req *r)
{
	cJSON *body;
	const struct gh_agent_conf *a = agent_and_body(r, &body);

	if (a)
		stream_run(r, a, body);
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

/* Answers the call ta names and writes what follows: the continuation as
 * a stream (as_stream) or the JSON answer. */
static void answer_call(struct gh_req *r, struct gh_tool_answer *ta, int as_stream)
{
	struct gh_answer_out out;
	struct native_stream s;
	struct gh_err e;
	enum gh_code rc;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	ta->mode = GH_ANSWER_CONTINUE;
	ta->wait_ms = gh_app_cfg(r->app)->server.approval_wait_ms;
	ta->gone = client_gone;
	ta->ud = r;
	/* the stream's head waits for the first chunk, so a refusal of the
	 * answer itself is a plain error with its status */
	if (as_stream && stream_start(r, &s) != 0)
		goto out;
	rc = gh_answer_tool_call(r->app, &r->who, ta, as_stream ? &s.sink : NULL, &out, &e);
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
	free(s.shown);
	gh_answer_out_clear(&out);
}

static void tool_call_decision(struct gh_req *r, int approve, int as_stream)
{
	struct gh_tool_answer ta;
	cJSON *body;

	if (!agent_and_body(r, &body)) {
		cJSON_Delete(body);
		return;
	}
	memset(&ta, 0, sizeof(ta));
	ta.tool_call_id = gh_json_str(body, "toolCallId");
	ta.run_id = gh_json_str(body, "runId");
	ta.reason = gh_json_str(body, "reason");
	ta.approve = approve;
	if (!ta.tool_call_id)
		gh_http_errorf(r, GH_E_BADREQ, "toolCallId: required");
	else
		answer_call(r, &ta, as_stream);
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

/* ------------------------------------------ Mastra 1.x: picking runs up */

struct page {
	cJSON *runs;
	int64_t total, skip, take;    /* take < 0: every run */
};

static int add_suspended(void *ud, const struct gh_run_view *v)
{
	struct page *p = ud;

	if (p->total >= p->skip && (p->take < 0 || p->total < p->skip + p->take))
		cJSON_AddItemToArray(p->runs, gh_wire_native_suspended_run(v));
	p->total++;
	return 0;
}

/* Query parameter name as a time (Unix ms into *ms, 0 when absent); -1
 * after answering 400. */
static int query_time(struct gh_req *r, const char *name, int64_t *ms)
{
	char buf[64];
	const char *v = gh_http_query(r, name, buf, sizeof(buf));

	*ms = 0;
	if (!v || !*v || gh_parse_time(v, ms) == 0)
		return 0;
	gh_http_errorf(r, GH_E_BADREQ, "%s: expected an ISO-8601 time", name);
	return -1;
}

static int query_int(struct gh_req *r, const char *name, int64_t min, int64_t *out)
{
	char buf[32];
	const char *v = gh_http_query(r, name, buf, sizeof(buf));

	if (!v || !*v || gh_parse_i64(v, min, GH_RUN_WAITING_MAX, out) == 0)
		return 0;
	gh_http_errorf(r, GH_E_BADREQ, "%s: expected an integer in %lld..%d", name,
		       (long long)min, GH_RUN_WAITING_MAX);
	return -1;
}

/* GET /api/agents/:id/suspended-runs: the caller's key's runs on the agent
 * that wait on an approval or on client tool results. */
static void suspended_runs(struct gh_req *r)
{
	const struct gh_agent_conf *a = find_agent(r, r->params[0]);
	struct gh_run_waiting_filter f;
	struct page p = {NULL, 0, 0, -1};
	char thread[GH_NAME_MAX + 1], resource[GH_NAME_MAX + 1];
	int64_t per_page = -1, page = 0;
	struct gh_err e;
	cJSON *o;

	if (!a)
		return;
	memset(&f, 0, sizeof(f));
	f.agent_id = a->id;
	f.thread_id = gh_http_query(r, "threadId", thread, sizeof(thread));
	f.resource_id = gh_http_query(r, "resourceId", resource, sizeof(resource));
	if (f.thread_id && !*f.thread_id)
		f.thread_id = NULL;
	if (f.resource_id && !*f.resource_id)
		f.resource_id = NULL;
	if (query_time(r, "fromDate", &f.from_ms) || query_time(r, "toDate", &f.to_ms) ||
	    query_int(r, "perPage", 1, &per_page) || query_int(r, "page", 0, &page))
		return;
	p.take = per_page;
	p.skip = per_page > 0 ? page * per_page : 0;
	p.runs = cJSON_CreateArray();
	if (!p.runs) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	if (gh_run_list_waiting(r->app, &r->who, &f, add_suspended, &p, &e) != GH_OK) {
		cJSON_Delete(p.runs);
		gh_http_error(r, &e);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "runs", p.runs);
	cJSON_AddNumberToObject(o, "total", (double)p.total);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* An approval's answer in Mastra's resumeData: true/false, or {approved,
 * reason, args} (args: approve with these arguments). -1 when it says
 * neither. */
static int resume_answer(const cJSON *rd, struct gh_tool_answer *ta)
{
	const cJSON *ok = cJSON_IsObject(rd) ? cJSON_GetObjectItemCaseSensitive(rd, "approved") : rd;

	if (cJSON_IsObject(rd)) {
		if (gh_json_str(rd, "reason"))
			ta->reason = gh_json_str(rd, "reason");
		ta->edited_args = cJSON_GetObjectItemCaseSensitive(rd, "args");
		if (cJSON_IsNull(ta->edited_args))
			ta->edited_args = NULL;
	}
	if (!cJSON_IsBool(ok))
		return -1;
	ta->approve = cJSON_IsTrue(ok);
	return 0;
}

/* POST /api/agents/:id/send-tool-approval {toolCallId, approved, threadId,
 * resourceId, resumeData?}: decides a caller-approvable call; the run
 * goes on in the background. */
static void send_tool_approval(struct gh_req *r)
{
	cJSON *body, *o;
	const struct gh_agent_conf *a = agent_and_body(r, &body);
	struct gh_tool_answer ta;
	struct gh_answer_out out;
	struct gh_approval apr;
	struct gh_err e;
	const char *thread;

	memset(&out, 0, sizeof(out));
	memset(&apr, 0, sizeof(apr));
	if (!a)
		goto out;
	memset(&ta, 0, sizeof(ta));
	ta.tool_call_id = gh_json_str(body, "toolCallId");
	ta.reason = gh_json_str(body, "reason");
	thread = gh_json_str(body, "threadId");
	if (!ta.tool_call_id) {
		gh_http_errorf(r, GH_E_BADREQ, "toolCallId: required");
		goto out;
	}
	if (!cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(body, "approved"))) {
		gh_http_errorf(r, GH_E_BADREQ, "approved: expected true or false");
		goto out;
	}
	if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(body, "resumeData")))
		resume_answer(cJSON_GetObjectItemCaseSensitive(body, "resumeData"), &ta);
	ta.approve = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "approved"));
	/* the call must be of this agent (and thread, when named) */
	if (gh_approval_by_call(r->app, r->who.admin ? NULL : r->who.key.owner, ta.tool_call_id,
				&apr, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	if (strcmp(apr.agent_id, a->id) || (thread && *thread && strcmp(apr.thread_id, thread))) {
		gh_http_errorf(r, GH_E_CONFLICT, "toolCallId %s belongs to agent %s%s%s, not this "
			       "%s", ta.tool_call_id, apr.agent_id, apr.thread_id[0] ? " thread " : "",
			       apr.thread_id, strcmp(apr.agent_id, a->id) ? "agent" : "thread");
		goto out;
	}
	ta.approval_id = apr.id;
	ta.tool_call_id = NULL;
	ta.mode = GH_ANSWER_BACKGROUND;
	if (gh_answer_tool_call(r->app, &r->who, &ta, NULL, &out, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "accepted");
	cJSON_AddStringToObject(o, "runId", out.approval.run_id);
	cJSON_AddStringToObject(o, "toolCallId", out.approval.tool_call_id);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
out:
	gh_approval_clear(&apr);
	gh_answer_out_clear(&out);
	cJSON_Delete(body);
}

/* The stored run a client names (its id, or the name it gave), of the
 * caller's owner and this agent; -1 after answering. */
static int load_run_view(struct gh_req *r, const struct gh_agent_conf *a, const char *id,
			 struct gh_run_view *v)
{
	struct gh_err e;
	enum gh_code rc = gh_run_view_find(r->app, r->who.admin ? NULL : r->who.key.owner, id, v,
					   &e);

	if (rc == GH_OK && strcmp(v->agent_id, a->id)) {
		gh_run_view_clear(v);
		rc = GH_E_NOTFOUND;
	}
	if (rc == GH_E_NOTFOUND)
		gh_err_set(&e, GH_E_NOTFOUND, "no run %s of agent %s", id, a->id);
	if (rc != GH_OK) {
		gh_http_error(r, &e);
		return -1;
	}
	return 0;
}

/* The call of v a resumption answers: the one named, or the one waiting;
 * NULL after answering. */
static const struct gh_run_call *resume_target(struct gh_req *r, const struct gh_run_view *v,
					       const char *tool_call_id)
{
	const struct gh_run_call *found = NULL;
	size_t i, waiting = 0;

	for (i = 0; i < v->ncalls; i++) {
		const struct gh_run_call *c = &v->calls[i];
		int waits = c->state == GH_CALL_PENDING_APPROVAL || gh_call_state_client(c->state);

		waiting += waits;
		if (tool_call_id ? !strcmp(c->id, tool_call_id) : waits)
			found = found && !tool_call_id ? found : c;
	}
	if (!tool_call_id && waiting > 1) {
		gh_http_errorf(r, GH_E_BADREQ, "toolCallId: required: run %s waits on %zu calls",
			       v->id, waiting);
		return NULL;
	}
	if (!found || (found->state != GH_CALL_PENDING_APPROVAL &&
		       !gh_call_state_client(found->state))) {
		gh_http_errorf(r, GH_E_CONFLICT, "run %s is %s and waits on no call%s%s",
			       v->id, gh_run_status_name(v->status), tool_call_id ? " " : "",
			       tool_call_id ? tool_call_id : "");
		return NULL;
	}
	return found;
}

/* A client call's result (resumeData) sent on as the tool message a
 * stream continuation carries. */
static void resume_with_result(struct gh_req *r, const struct gh_agent_conf *a, const cJSON *body,
			       const struct gh_run_call *c)
{
	cJSON *b2 = cJSON_CreateObject(), *msgs, *m, *content, *part;
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(body, "memory");

	msgs = cJSON_AddArrayToObject(b2, "messages");
	m = cJSON_CreateObject();
	cJSON_AddItemToArray(msgs, m);
	cJSON_AddStringToObject(m, "role", "tool");
	content = cJSON_AddArrayToObject(m, "content");
	part = cJSON_CreateObject();
	cJSON_AddItemToArray(content, part);
	cJSON_AddStringToObject(part, "type", "tool-result");
	cJSON_AddStringToObject(part, "toolCallId", c->id);
	cJSON_AddStringToObject(part, "toolName", c->name);
	cJSON_AddItemToObject(part, "result",
			      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(body, "resumeData"), 1));
	if (mem)
		cJSON_AddItemToObject(b2, "memory", cJSON_Duplicate(mem, 1));
	stream_run(r, a, b2);
	cJSON_Delete(b2);
}

/* POST /api/agents/:id/resume-stream {runId, resumeData, toolCallId?}:
 * answers what the run waits on and streams the continuation: an
 * approval (resumeData true/false or {approved, reason, args}) or a
 * client tool's result (resumeData is the result). */
static void resume_stream(struct gh_req *r)
{
	cJSON *body;
	const struct gh_agent_conf *a = agent_and_body(r, &body);
	const struct gh_run_call *c;
	struct gh_run_view v;
	struct gh_tool_answer ta;
	const char *run_id = a ? gh_json_str(body, "runId") : NULL;

	memset(&v, 0, sizeof(v));
	if (!a)
		goto out;
	if (!run_id) {
		gh_http_errorf(r, GH_E_BADREQ, "runId: required");
		goto out;
	}
	if (load_run_view(r, a, run_id, &v) != 0)
		goto out;
	if (!(c = resume_target(r, &v, gh_json_str(body, "toolCallId"))))
		goto out;
	if (c->state != GH_CALL_PENDING_APPROVAL) {
		resume_with_result(r, a, body, c);
		goto out;
	}
	memset(&ta, 0, sizeof(ta));
	ta.approval_id = c->approval_id;
	ta.run_id = v.id;
	if (resume_answer(cJSON_GetObjectItemCaseSensitive(body, "resumeData"), &ta) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "resumeData: call %s waits on an approval: expected "
			       "true, false or {approved, reason?, args?}", c->id);
		goto out;
	}
	answer_call(r, &ta, 1);
out:
	gh_run_view_clear(&v);
	cJSON_Delete(body);
}

/* POST /api/agents/:id/observe {runId, offset?}: the run's stream again,
 * from event offset (0-based) on, then live until its turn ends. */
struct observer {
	struct gh_http_stream hs;
	char id[GH_ID_MAX];
};

static int observe_event(void *ud, int64_t seq, const char *type, const char *data, size_t len)
{
	struct observer *o = ud;
	struct gh_buf b;
	int rc = -1;

	(void)seq;
	gh_buf_init(&b, len + 256);
	if (gh_wire_native_envelope(type, o->id, &b) == GH_BUF_OK &&
	    gh_buf_append(&b, data, len) == GH_BUF_OK && gh_buf_putc(&b, '}') == GH_BUF_OK)
		rc = gh_http_stream_send(&o->hs, NULL, b.data, b.len);
	gh_buf_free(&b);
	return rc != 0;
}

static int observe_idle(void *ud)
{
	struct observer *o = ud;

	return gh_http_stream_tick(&o->hs);
}

static void observe(struct gh_req *r)
{
	cJSON *body;
	const struct gh_agent_conf *a = agent_and_body(r, &body);
	const cJSON *off = body ? cJSON_GetObjectItemCaseSensitive(body, "offset") : NULL;
	const char *owner = r->who.admin ? NULL : r->who.key.owner;
	const char *run_id = body ? gh_json_str(body, "runId") : NULL;
	struct observer o;
	struct gh_err e;
	enum gh_code rc;

	memset(&o, 0, sizeof(o));
	if (!a)
		goto out;
	if (!run_id) {
		gh_http_errorf(r, GH_E_BADREQ, "runId: required");
		goto out;
	}
	if (off && !cJSON_IsNull(off) &&
	    (!cJSON_IsNumber(off) || off->valuedouble < 0 || off->valuedouble > 1e15 ||
	     off->valuedouble != (double)(int64_t)off->valuedouble)) {
		gh_http_errorf(r, GH_E_BADREQ, "offset: expected a whole number from 0");
		goto out;
	}
	if (gh_http_stream_start(r, &o.hs) != 0)
		goto out;
	gh_strlcpy(o.id, run_id, sizeof(o.id));
	rc = gh_run_journal_follow(GH_JOURNAL_NATIVE, owner, o.id,
				   cJSON_IsNumber(off) ? (int64_t)off->valuedouble : 0,
				   observe_event, observe_idle, &o, &e);
	if (rc == GH_E_NOTFOUND && owner) {
		gh_run_named_id(owner, run_id, o.id);
		rc = gh_run_journal_follow(GH_JOURNAL_NATIVE, owner, o.id,
					   cJSON_IsNumber(off) ? (int64_t)off->valuedouble : 0,
					   observe_event, observe_idle, &o, &e);
	}
	if (rc != GH_OK && !o.hs.begun) {
		gh_http_error(r, &e);
	} else if (rc != GH_OK && !o.hs.gone) {
		struct gh_buf b;

		gh_buf_init(&b, CHUNK_MAX);
		if (gh_wire_native_envelope("error", o.id, &b) == GH_BUF_OK &&
		    gh_wire_native_error(e.code, e.msg, gh_http_status_of(e.code), &b) == GH_BUF_OK &&
		    gh_buf_putc(&b, '}') == GH_BUF_OK)
			gh_http_stream_send(&o.hs, NULL, b.data, b.len);
		gh_buf_free(&b);
	}
	if (o.hs.begun || !r->responded)
		gh_http_stream_end(&o.hs, 1);
out:
	cJSON_Delete(body);
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
	{"GET", "/api/agents/:id/suspended-runs", GH_AUTH_KEY, suspended_runs},
	{"POST", "/api/agents/:id/send-tool-approval", GH_AUTH_KEY, send_tool_approval},
	{"POST", "/api/agents/:id/resume-stream", GH_AUTH_KEY, resume_stream},
	{"POST", "/api/agents/:id/observe", GH_AUTH_KEY, observe},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
