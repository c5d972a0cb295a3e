/*
 * http_mcp.c - gatehouse as an MCP server: POST/GET/DELETE /mcp (and
 * /mcp/:agentId), Streamable HTTP.
 *
 * The key's policy decides everything: tools/list offers the server tools
 * of the agent (the default agent at /mcp) that the key may call, from
 * the run's own tool set (gh_toolset_build); tools/call is a run of one
 * call the caller makes itself (gh_run_request.call_tool), through the
 * same gate and audit log as a model's call.
 *
 * Two eras: 2025-06-18 / 2025-11-25 with sessions (initialize,
 * Mcp-Session-Id; mcp_sessions.h), and the stateless 2026-07-28 revision
 * (server/discover, the per-request _meta envelope, Mcp-Method / Mcp-Name
 * header checks), told apart by the envelope in the body.
 *
 * A call waiting on an approval: where the caller approves and the client
 * can answer a form elicitation, it is asked (elicitation/create on the
 * request's SSE stream; on 2026-07-28 an input_required result); where an
 * admin approves, the call is held up to server.approval_wait_ms (SSE with
 * progress notifications when the client sent a progressToken), then
 * answered with an isError result naming the approval (2026-07-28:
 * input_required with the approval's id in requestState). The same call
 * repeated later picks up that approval's run: it executes once.
 *
 * One handler per request on its CivetWeb worker; elicitation answers are
 * handed between requests through a small table under a mutex.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <civetweb.h>

#include "answer.h"
#include "approvals.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "mcp.h"
#include "mcp_sessions.h"
#include "run.h"
#include "store.h"
#include "tools.h"
#include "util.h"
#include "wire_mcp.h"

/* -------------------------------------------------- elicitation answers */

/* A request waiting for the client's answer to an elicitation it sent;
 * the answer comes in another POST of the same session. */
struct pending_elicit {
	char req_id[GH_ID_MAX + 16];
	char session[GH_MCP_SID_MAX];
	cJSON *answer;                  /* the response's result, or an error object */
	int done;
	struct pending_elicit *next;
};

static pthread_mutex_t elicit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t elicit_cv = PTHREAD_COND_INITIALIZER;
static struct pending_elicit *elicit_head;

static void elicit_add(struct pending_elicit *p)
{
	pthread_mutex_lock(&elicit_mu);
	p->next = elicit_head;
	elicit_head = p;
	pthread_mutex_unlock(&elicit_mu);
}

static void elicit_remove(struct pending_elicit *p)
{
	struct pending_elicit **pp;

	pthread_mutex_lock(&elicit_mu);
	for (pp = &elicit_head; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	pthread_mutex_unlock(&elicit_mu);
	cJSON_Delete(p->answer);
}

/* Hands a client's response to the request waiting for it. 0 when one was. */
static int elicit_deliver(const char *session, const char *id, const cJSON *answer)
{
	struct pending_elicit *p;
	int found = -1;

	pthread_mutex_lock(&elicit_mu);
	for (p = elicit_head; p; p = p->next) {
		if (!p->done && !strcmp(p->req_id, id) && !strcmp(p->session, session)) {
			p->answer = cJSON_Duplicate(answer, 1);
			p->done = 1;
			found = 0;
			pthread_cond_broadcast(&elicit_cv);
			break;
		}
	}
	pthread_mutex_unlock(&elicit_mu);
	return found;
}

/* Waits up to ms for p's answer, checking gone every 100 ms. 1 answered. */
static int elicit_wait(struct pending_elicit *p, int64_t ms, int (*gone)(void *), void *ud)
{
	int64_t end = gh_now_ms() + ms;
	int done;

	pthread_mutex_lock(&elicit_mu);
	while (!p->done && gh_now_ms() < end) {
		struct timespec ts;

		pthread_mutex_unlock(&elicit_mu);
		if (gone && gone(ud)) {
			pthread_mutex_lock(&elicit_mu);
			break;
		}
		pthread_mutex_lock(&elicit_mu);
		gh_deadline(CLOCK_REALTIME, 100, &ts);
		if (!p->done)
			pthread_cond_timedwait(&elicit_cv, &elicit_mu, &ts);
	}
	done = p->done;
	pthread_mutex_unlock(&elicit_mu);
	return done;
}

/* ------------------------------------------------------------ the request */

struct mcp {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	struct gh_mcp_in in;
	int modern;                     /* 2026-07-28: stateless */
	struct gh_mcp_session sess;     /* legacy requests after initialize */
	int has_sess;
	int elicit;                     /* the client answers form elicitations */
	char hdr[GH_MCP_SID_MAX + 64];  /* extra response headers */
	struct gh_http_stream hs;       /* when the answer became a stream */
	int streaming;
	int64_t progress;               /* progress notifications sent */
	int64_t last_progress_ns;
};

/* Sends one JSON-RPC message: on the stream when there is one, else as
 * the JSON response (status 200). Takes o. */
static void send_msg(struct mcp *m, cJSON *o)
{
	if (!o) {
		if (!m->streaming)
			gh_http_errorf(m->r, GH_E_NOMEM, "out of memory");
		return;
	}
	if (m->streaming) {
		gh_http_stream_json(&m->hs, NULL, o);
		return;
	}
	gh_http_json(m->r, 200, o);
	cJSON_Delete(o);
}

static cJSON *req_id(struct mcp *m)
{
	return m->in.id ? cJSON_Duplicate(m->in.id, 1) : NULL;
}

/* A JSON-RPC error for this request with HTTP status (200 in-band). */
static void rpc_error(struct mcp *m, int status, int code, const char *msg, cJSON *data)
{
	cJSON *o = gh_mcp_error(req_id(m), code, msg, data);

	if (!o) {
		gh_http_errorf(m->r, GH_E_NOMEM, "out of memory");
		return;
	}
	if (m->streaming || status == 200) {
		send_msg(m, o);
		return;
	}
	gh_http_json(m->r, status, o);
	cJSON_Delete(o);
}

/* A result; on 2026-07-28 it says it is complete. Takes result. */
static void rpc_result(struct mcp *m, cJSON *result)
{
	if (result && m->modern && !cJSON_GetObjectItemCaseSensitive(result, "resultType"))
		cJSON_AddStringToObject(result, "resultType", "complete");
	send_msg(m, gh_mcp_result(req_id(m), result));
}

/* Turns the answer into an SSE stream (once). -1 when refused (answered)
 * or the client is gone. */
static int begin_stream(struct mcp *m)
{
	if (m->streaming)
		return m->hs.gone ? -1 : 0;
	if (gh_http_stream_start(m->r, &m->hs) != 0)
		return -1;
	m->streaming = 1;
	return gh_http_stream_begin(&m->hs);
}

static int gone(void *ud)
{
	struct mcp *m = ud;

	if (m->streaming)
		return gh_http_stream_tick(&m->hs);
	return gh_http_client_gone(m->r);
}

/* While a held call waits: progress notifications (when the client asked
 * for them with a progressToken), every heartbeat interval. */
static int hold_tick(void *ud)
{
	struct mcp *m = ud;
	int64_t now = gh_mono_ns();
	cJSON *p;

	if (m->streaming && m->in.progress_token &&
	    now - m->last_progress_ns >= gh_app_cfg(m->r->app)->server.heartbeat_ms * 1000000) {
		m->last_progress_ns = now;
		p = cJSON_CreateObject();
		if (p) {
			cJSON_AddItemToObject(p, "progressToken",
					      cJSON_Duplicate(m->in.progress_token, 1));
			cJSON_AddNumberToObject(p, "progress", (double)++m->progress);
			cJSON_AddStringToObject(p, "message", "waiting for an approval");
			if (gh_http_stream_json(&m->hs, NULL,
						gh_mcp_notification("notifications/progress", p)) != 0)
				return 1;
		}
	}
	return gone(m);
}

/* ------------------------------------------------------------- checks */

/* The Origin header, when a browser sent one, must be gatehouse's own:
 * server.public_url's origin, or (without it) the address it listens on. */
static int origin_ok(struct gh_req *r)
{
	const char *origin = gh_http_header(r, "Origin");
	char base[512], local[128];
	size_t n;
	const char *p;

	if (!origin)
		return 1;
	gh_a2a_base_url(r->app, r->ri->server_port, base, sizeof(base));
	/* the origin is the scheme, host and port: no path */
	if ((p = strstr(base, "://")) && (p = strchr(p + 3, '/')))
		base[p - base] = '\0';
	n = strlen(origin);
	while (n > 0 && origin[n - 1] == '/')
		n--;
	if (n == strlen(base) && !strncasecmp(origin, base, n))
		return 1;
	if (gh_app_cfg(r->app)->server.public_url && *gh_app_cfg(r->app)->server.public_url)
		return 0;
	snprintf(local, sizeof(local), "http://localhost:%d", r->ri->server_port);
	return n == strlen(local) && !strncasecmp(origin, local, n);
}

/* ------------------------------------------------------------- tools */

/* The tools of m's agent that the key may call, as MCP lists them. */
static enum gh_code tools_json(struct mcp *m, cJSON **out, struct gh_err *e)
{
	struct gh_toolset ts;
	cJSON *arr;
	size_t i;
	enum gh_code rc;

	*out = NULL;
	rc = gh_toolset_build(gh_app_cfg(m->r->app), gh_app_mcp(m->r->app), m->agent, m->r->who.policy, NULL, &ts,
			      e);
	if (rc != GH_OK)
		return rc;
	if (!(arr = cJSON_CreateArray())) {
		gh_toolset_free(&ts);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	for (i = 0; i < ts.n; i++) {
		const struct gh_tool *t = &ts.v[i];
		cJSON *o, *meta;

		if (!t->offered || t->src == GH_SRC_CLIENT || !(o = cJSON_CreateObject()))
			continue;
		cJSON_AddItemToArray(arr, o);
		cJSON_AddStringToObject(o, "name", t->name);
		cJSON_AddStringToObject(o, "description", t->description ? t->description : "");
		cJSON_AddItemToObject(o, "inputSchema",
				      t->schema ? cJSON_Duplicate(t->schema, 1)
						: gh_json_parse_stored("{\"type\":\"object\"}"));
		/* MCP's outputSchema describes structuredContent, an object */
		if (t->output_schema && gh_json_str(t->output_schema, "type") &&
		    !strcmp(gh_json_str(t->output_schema, "type"), "object"))
			cJSON_AddItemToObject(o, "outputSchema", cJSON_Duplicate(t->output_schema, 1));
		cJSON_AddItemToObject(o, "annotations", gh_tool_annotations(t));
		/* what gatehouse will do with a call: run it, or ask whom first */
		meta = cJSON_AddObjectToObject(o, "_meta");
		if (meta)
			cJSON_AddStringToObject(meta, "gatehouse/approval",
						t->decision.verdict != GH_V_APPROVAL ? "none"
						: t->decision.approver == GH_APPROVER_CALLER ? "caller"
											     : "admin");
	}
	gh_toolset_free(&ts);
	*out = arr;
	return GH_OK;
}

static void tools_list(struct mcp *m)
{
	struct gh_err e;
	cJSON *tools, *res;

	if (tools_json(m, &tools, &e) != GH_OK) {
		rpc_error(m, 200, GH_MCP_INTERNAL, e.msg, NULL);
		return;
	}
	res = cJSON_CreateObject();
	if (!res) {
		cJSON_Delete(tools);
		rpc_error(m, 200, GH_MCP_INTERNAL, "out of memory", NULL);
		return;
	}
	cJSON_AddItemToObject(res, "tools", tools);
	if (m->modern) {
		cJSON_AddNumberToObject(res, "ttlMs", 0);
		cJSON_AddStringToObject(res, "cacheScope", "private");
	}
	rpc_result(m, res);
}

/* An MCP tool result from the engine's: text content (the JSON of the
 * result), structuredContent when it is an object, isError. Takes none. */
static cJSON *call_result(const cJSON *result, int is_error)
{
	cJSON *o = cJSON_CreateObject(), *content, *t;
	const char *err = is_error ? gh_json_str(result, "error") : NULL;
	char *text = err ? NULL : gh_json_dump(result);

	if (!o || !(content = cJSON_AddArrayToObject(o, "content")) ||
	    !(t = cJSON_CreateObject())) {
		cJSON_Delete(o);
		free(text);
		return NULL;
	}
	cJSON_AddItemToArray(content, t);
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", err ? err : text ? text : "null");
	if (!is_error && cJSON_IsObject(result))
		cJSON_AddItemToObject(o, "structuredContent", cJSON_Duplicate(result, 1));
	cJSON_AddBoolToObject(o, "isError", is_error);
	free(text);
	return o;
}

/* An isError result whose text says msg. */
static cJSON *error_result(const char *msg)
{
	cJSON *r = cJSON_CreateObject(), *res;

	if (!r)
		return NULL;
	cJSON_AddStringToObject(r, "error", msg);
	res = call_result(r, 1);
	cJSON_Delete(r);
	return res;
}

/* Answers with the one call of a collected run. */
static void answer_view(struct mcp *m, const struct gh_run_view *v)
{
	if (v->ncalls < 1 || v->calls[0].state != GH_CALL_DONE) {
		rpc_result(m, error_result("the call has no result"));
		return;
	}
	rpc_result(m, call_result(v->calls[0].result, v->calls[0].is_error));
}

/* Collects run_id's result and answers with it. */
static void collect(struct mcp *m, const char *run_id)
{
	struct gh_run_view v;
	struct gh_err e;
	enum gh_code rc = gh_run_call_collect(m->r->app, m->r->who.key.owner, run_id, &v, &e);

	if (rc == GH_OK)
		answer_view(m, &v);
	else if (rc == GH_E_CONFLICT)
		rpc_result(m, error_result("the result of this call was delivered to an earlier "
					   "request already"));
	else
		rpc_error(m, 200, GH_MCP_INTERNAL, e.msg, NULL);
	gh_run_view_clear(&v);
}

/* The message that asks a person to approve a, naming its arguments and
 * their digest (the approval binds that digest). */
static void approval_text(const struct gh_approval *a, char *out, size_t cap)
{
	char *args = gh_json_dump(a->args);

	snprintf(out, cap, "gatehouse: allow the call to %s with arguments %.1500s? "
		 "(approval %s; arguments sha256:%s)", a->tool_name, args ? args : "{}", a->id,
		 a->args_sha256);
	free(args);
}

static cJSON *elicit_params(const struct gh_approval *a)
{
	cJSON *p = cJSON_CreateObject(), *s, *props, *ap, *rs, *req;
	char msg[2048];

	if (!p)
		return NULL;
	approval_text(a, msg, sizeof(msg));
	cJSON_AddStringToObject(p, "mode", "form");
	cJSON_AddStringToObject(p, "message", msg);
	s = cJSON_AddObjectToObject(p, "requestedSchema");
	cJSON_AddStringToObject(s, "type", "object");
	props = cJSON_AddObjectToObject(s, "properties");
	ap = cJSON_AddObjectToObject(props, "approve");
	cJSON_AddStringToObject(ap, "type", "boolean");
	cJSON_AddStringToObject(ap, "title", "Approve");
	cJSON_AddStringToObject(ap, "description", "Run this call once, with exactly these "
						   "arguments");
	rs = cJSON_AddObjectToObject(props, "reason");
	cJSON_AddStringToObject(rs, "type", "string");
	cJSON_AddStringToObject(rs, "title", "Reason");
	req = cJSON_AddArrayToObject(s, "required");
	cJSON_AddItemToArray(req, cJSON_CreateString("approve"));
	return p;
}

/* Decides approval a with the caller's answer and runs the call (on this
 * thread); then answers with its result. */
static void decide_and_answer(struct mcp *m, const struct gh_approval *a, const cJSON *answer)
{
	struct gh_tool_answer ta;
	struct gh_answer_out out;
	struct gh_err e;
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(answer, "content");
	int approve = gh_mcp_elicit_accepted(answer);
	enum gh_code rc;

	memset(&ta, 0, sizeof(ta));
	ta.approval_id = a->id;
	ta.approve = approve;
	ta.reason = gh_json_str(content, "reason");
	if (!ta.reason)
		ta.reason = approve ? "approved by the caller (MCP elicitation)"
				    : "declined by the caller (MCP elicitation)";
	ta.mode = GH_ANSWER_CONTINUE;
	ta.wait_ms = gh_app_cfg(m->r->app)->server.approval_wait_ms;
	ta.gone = gone;
	ta.ud = m;
	rc = gh_answer_tool_call(m->r->app, &m->r->who, &ta, NULL, &out, &e);
	gh_answer_out_clear(&out);
	if (rc != GH_OK && rc != GH_E_CONFLICT) {
		rpc_error(m, 200, GH_MCP_INTERNAL, e.msg, NULL);
		return;
	}
	collect(m, a->run_id);
}

/* 2026-07-28: the call needs input (an elicitation) or time (an admin's
 * decision): input_required, the approval's id in requestState. */
static void input_required(struct mcp *m, const struct gh_approval *a, int ask)
{
	cJSON *res = cJSON_CreateObject(), *reqs, *el;

	if (!res) {
		rpc_error(m, 200, GH_MCP_INTERNAL, "out of memory", NULL);
		return;
	}
	cJSON_AddStringToObject(res, "resultType", "input_required");
	cJSON_AddStringToObject(res, "requestState", a->id);
	if (ask) {
		reqs = cJSON_AddObjectToObject(res, "inputRequests");
		el = cJSON_AddObjectToObject(reqs, "approval");
		cJSON_AddStringToObject(el, "method", "elicitation/create");
		cJSON_AddItemToObject(el, "params", elicit_params(a));
	}
	rpc_result(m, res);
}

/* Asks the caller over this request's SSE stream and waits for its answer
 * (another POST of the session), then decides. */
static void elicit(struct mcp *m, const struct gh_approval *a)
{
	struct pending_elicit p;
	cJSON *rq;
	int answered;

	memset(&p, 0, sizeof(p));
	snprintf(p.req_id, sizeof(p.req_id), "gh-approval-%s", a->id);
	gh_strlcpy(p.session, m->sess.id, sizeof(p.session));
	if (begin_stream(m) != 0)
		return;
	elicit_add(&p);
	rq = gh_mcp_request(p.req_id, "elicitation/create", elicit_params(a));
	if (!rq || gh_http_stream_json(&m->hs, NULL, rq) != 0) {
		elicit_remove(&p);
		return;
	}
	answered = elicit_wait(&p, gh_app_cfg(m->r->app)->server.approval_wait_ms, gone, m);
	if (!answered) {
		char msg[512];

		elicit_remove(&p);
		snprintf(msg, sizeof(msg), "Waiting for approval %s: the call to %s was not "
			 "answered in time. Approve it (POST /api/approvals/%s/approve), then call "
			 "the tool again with the same arguments.", a->id, a->tool_name, a->id);
		rpc_result(m, error_result(msg));
		return;
	}
	decide_and_answer(m, a, p.answer);
	elicit_remove(&p);
}

/* Holds the call while an admin decides, up to server.approval_wait_ms. */
static void hold(struct mcp *m, const struct gh_approval *a)
{
	struct gh_run_view v;
	struct gh_err e;
	enum gh_code rc;
	char msg[512];

	if (m->in.progress_token && !m->modern && begin_stream(m) != 0)
		return;
	m->last_progress_ns = 0;
	rc = gh_run_wait(m->r->app, m->r->who.key.owner, a->run_id, GH_UNTIL_SETTLED,
			 gh_app_cfg(m->r->app)->server.approval_wait_ms, hold_tick, m, &v, &e);
	if (rc == GH_E_CANCELLED) {
		gh_run_view_clear(&v);
		return;
	}
	if (rc == GH_OK && v.status == GH_RUN_WAITING) {
		gh_run_view_clear(&v);
		collect(m, a->run_id);
		return;
	}
	if (rc == GH_OK && gh_run_status_final(v.status)) {
		/* collected by another request, or the resumption failed */
		snprintf(msg, sizeof(msg), v.status == GH_RUN_COMPLETED
				 ? "the result of this call was delivered to an earlier request already"
				 : "the call was not carried out: %.300s",
			 v.error ? v.error : gh_run_status_name(v.status));
		gh_run_view_clear(&v);
		rpc_result(m, error_result(msg));
		return;
	}
	gh_run_view_clear(&v);
	if (rc != GH_OK && rc != GH_E_TIMEOUT) {
		rpc_error(m, 200, GH_MCP_INTERNAL, e.msg, NULL);
		return;
	}
	if (m->modern) {
		input_required(m, a, 0);
		return;
	}
	snprintf(msg, sizeof(msg), "Waiting for approval %s (tool %s needs %s approval). Ask "
		 "an administrator to review it, then call the tool again with the same "
		 "arguments.", a->id, a->tool_name,
		 !strcmp(a->approver, "caller") ? "your" : "an admin's");
	rpc_result(m, error_result(msg));
}

/* A call whose approval a is pending, or decided and not yet collected. */
static void approval_flow(struct mcp *m, const struct gh_approval *a,
			  const struct gh_mcp_call *call)
{
	struct gh_run_view v;
	struct gh_err e;
	enum gh_run_status st;

	if (gh_run_view_get(m->r->app, m->r->who.key.owner, a->run_id, &v, &e) != GH_OK) {
		rpc_error(m, 200, GH_MCP_INTERNAL, e.msg, NULL);
		return;
	}
	st = v.status;
	gh_run_view_clear(&v);
	if (st == GH_RUN_WAITING) {
		collect(m, a->run_id);
		return;
	}
	if (st == GH_RUN_SUSPENDED && !strcmp(a->status, "pending") &&
	    !strcmp(a->approver, "caller")) {
		const cJSON *ans = call && call->input_responses
			? cJSON_GetObjectItemCaseSensitive(call->input_responses, "approval")
			: NULL;

		if (m->modern && ans) {
			decide_and_answer(m, a, ans);
			return;
		}
		if (m->elicit) {
			if (m->modern)
				input_required(m, a, 1);
			else
				elicit(m, a);
			return;
		}
	}
	hold(m, a);
}

static void tools_call(struct mcp *m)
{
	struct gh_mcp_call call;
	struct gh_run_request rq;
	struct gh_run_result res;
	struct gh_approval a;
	struct gh_err e;
	char run_id[GH_ID_MAX], apr[GH_ID_MAX], hash[65];
	cJSON *empty = NULL, *msgs = NULL;
	struct gh_tool_verdict v;
	const cJSON *tr;
	enum gh_code rc;

	memset(&a, 0, sizeof(a));
	if (gh_mcp_in_call_params(&m->in, &call, &e) != GH_OK) {
		rpc_error(m, 200, GH_MCP_INVALID_PARAMS, e.msg, NULL);
		return;
	}
	if (!call.args && !(empty = cJSON_CreateObject())) {
		rpc_error(m, 200, GH_MCP_INTERNAL, "out of memory", NULL);
		return;
	}
	if (!call.args)
		call.args = empty;
	/* 2026-07-28: the retry of a call that was waiting names its approval;
	 * it must be this key's approval of exactly this call */
	if (call.request_state) {
		gh_approval_args_hash(call.args, hash);
		if (gh_approval_get(m->r->app, m->r->who.key.owner, call.request_state, &a, &e) !=
			    GH_OK ||
		    strcmp(a.key_id, m->r->who.key.id) || strcmp(a.tool_name, call.name) ||
		    strcmp(a.args_sha256, hash)) {
			rpc_error(m, 200, GH_MCP_INVALID_PARAMS, "params.requestState: no approval of "
				  "this key for this call with these arguments", NULL);
			goto out;
		}
		approval_flow(m, &a, &call);
		goto out;
	}
	/* the same call again, after an approval was asked for it (only a tool
	 * that needs approval can have one) */
	{
		struct gh_mcp_tool *mt = gh_mcp_tool_find(gh_app_mcp(m->r->app), call.name);

		gh_tools_decide(gh_app_cfg(m->r->app), mt, m->agent, m->r->who.policy, call.name, NULL,
				&v);
		gh_mcp_tool_unref(mt);
	}
	if (v.d.verdict == GH_V_APPROVAL &&
	    gh_run_call_find(m->r->app, &m->r->who, call.name, call.args, run_id, apr, &e) == GH_OK &&
	    gh_approval_get(m->r->app, m->r->who.key.owner, apr, &a, &e) == GH_OK) {
		approval_flow(m, &a, &call);
		goto out;
	}
	memset(&rq, 0, sizeof(rq));
	rq.who = &m->r->who;
	rq.agent = m->agent;
	rq.stateless = 1;
	rq.surface = "mcp";
	rq.call_tool = call.name;
	rq.call_args = call.args;
	rq.resource_id = gh_http_header(m->r, "X-Gatehouse-Resource");
	if (!(msgs = cJSON_CreateArray())) {
		rpc_error(m, 200, GH_MCP_INTERNAL, "out of memory", NULL);
		goto out;
	}
	rq.messages = msgs;
	rc = gh_run_generate(m->r->app, &rq, NULL, &res, &e);
	if (rc != GH_OK) {
		/* gatehouse failed (the audit log, the store): a JSON-RPC error */
		rpc_error(m, 200, rc == GH_E_FORBIDDEN ? GH_MCP_INVALID_PARAMS : GH_MCP_INTERNAL,
			  e.msg, NULL);
		goto out;
	}
	if (res.status == GH_RUN_SUSPENDED) {
		const char *id = gh_json_str(cJSON_GetArrayItem(res.approvals, 0), "id");

		if (id && gh_approval_get(m->r->app, m->r->who.key.owner, id, &a, &e) == GH_OK)
			approval_flow(m, &a, &call);
		else
			rpc_error(m, 200, GH_MCP_INTERNAL, "the call waits on an approval that "
				  "cannot be read", NULL);
		gh_run_result_clear(&res);
		goto out;
	}
	tr = cJSON_GetArrayItem(res.tool_results, 0);
	if (!tr)
		rpc_result(m, error_result("the call has no result"));
	else
		rpc_result(m, call_result(cJSON_GetObjectItemCaseSensitive(tr, "result"),
					  gh_json_bool(tr, "isError", 0)));
	gh_run_result_clear(&res);
out:
	gh_approval_clear(&a);
	cJSON_Delete(msgs);
	cJSON_Delete(empty);
}

/* ----------------------------------------------------------- lifecycle */

static cJSON *server_info(void)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		cJSON_AddStringToObject(o, "name", "gatehouse");
		cJSON_AddStringToObject(o, "version", GH_VERSION);
	}
	return o;
}

static cJSON *capabilities(void)
{
	cJSON *c = cJSON_CreateObject(), *t;

	if (c && (t = cJSON_AddObjectToObject(c, "tools")))
		cJSON_AddBoolToObject(t, "listChanged", 0);
	return c;
}

static void initialize(struct mcp *m)
{
	const char *asked, *version;
	const cJSON *caps;
	struct gh_mcp_session s;
	struct gh_err e;
	cJSON *res;

	if (gh_mcp_init_params(&m->in, &asked, &caps, &e) != GH_OK) {
		rpc_error(m, 200, GH_MCP_INVALID_PARAMS, e.msg, NULL);
		return;
	}
	version = gh_mcp_negotiate(asked);
	if (gh_mcp_sessions_open(m->r->app->mcp_sessions, m->r->who.key.id, m->agent->id, version,
				 gh_mcp_caps_elicit_form(caps), &s, &e) != GH_OK) {
		gh_http_error(m->r, &e);
		return;
	}
	snprintf(m->hdr, sizeof(m->hdr), "Mcp-Session-Id: %s\r\n", s.id);
	m->r->extra_headers = m->hdr;
	if (!(res = cJSON_CreateObject())) {
		rpc_error(m, 200, GH_MCP_INTERNAL, "out of memory", NULL);
		return;
	}
	cJSON_AddStringToObject(res, "protocolVersion", version);
	cJSON_AddItemToObject(res, "capabilities", capabilities());
	cJSON_AddItemToObject(res, "serverInfo", server_info());
	cJSON_AddStringToObject(res, "instructions",
				"Tools governed by gatehouse: every call is checked against your "
				"key's policy and recorded in an audit log; some need an approval.");
	rpc_result(m, res);
}

static void discover(struct mcp *m)
{
	cJSON *res = cJSON_CreateObject(), *v, *meta;

	if (!res) {
		rpc_error(m, 200, GH_MCP_INTERNAL, "out of memory", NULL);
		return;
	}
	v = cJSON_AddArrayToObject(res, "supportedVersions");
	cJSON_AddItemToArray(v, cJSON_CreateString(GH_MCP_V2026));
	cJSON_AddItemToArray(v, cJSON_CreateString(GH_MCP_V20251125));
	cJSON_AddItemToArray(v, cJSON_CreateString(GH_MCP_V20250618));
	cJSON_AddItemToObject(res, "capabilities", capabilities());
	cJSON_AddNumberToObject(res, "ttlMs", 0);
	cJSON_AddStringToObject(res, "cacheScope", "private");
	meta = cJSON_AddObjectToObject(res, "_meta");
	if (meta)
		cJSON_AddItemToObject(meta, GH_MCP_META_SERVER, server_info());
	rpc_result(m, res);
}

static void dispatch_request(struct mcp *m)
{
	const char *method = m->in.method;

	if (!strcmp(method, "ping"))
		rpc_result(m, cJSON_CreateObject());
	else if (!strcmp(method, "tools/list"))
		tools_list(m);
	else if (!strcmp(method, "tools/call"))
		tools_call(m);
	else if (m->modern && !strcmp(method, "server/discover"))
		discover(m);
	else {
		char msg[160];

		snprintf(msg, sizeof(msg), "method not found: %.100s", method);
		rpc_error(m, 200, GH_MCP_METHOD_NOT_FOUND, msg, NULL);
	}
}

static void accepted(struct gh_req *r)
{
	gh_http_send(r, 202, NULL, "", 0);
}

/* The agent whose tools the route serves, when the key may use it. */
static int pick_agent(struct gh_req *r, const struct gh_agent_conf **out)
{
	struct gh_err e;
	const char *id = r->params[0] ? r->params[0] : gh_app_cfg(r->app)->default_agent;

	if (gh_run_agent(r->app, &r->who, id, out, &e) != GH_OK) {
		gh_http_error(r, &e);
		return -1;
	}
	return 0;
}

/* What every /mcp request checks first: a browser's origin, and that an
 * API key (not an admin's UI session) is calling. */
static int front_checks(struct gh_req *r)
{
	if (!origin_ok(r)) {
		gh_http_errorf(r, GH_E_FORBIDDEN, "Origin %s may not use /mcp (only gatehouse's "
			       "own origin, server.public_url, may)", gh_http_header(r, "Origin"));
		return -1;
	}
	if (!r->who.key.id[0]) {
		gh_http_errorf(r, GH_E_AUTH, "/mcp needs an API key (Authorization: Bearer)");
		return -1;
	}
	return 0;
}

/* The session a legacy request names: 400 without one, 404 for one that
 * is unknown, ended, or another key's. */
static int need_session(struct mcp *m)
{
	const char *sid = gh_http_header(m->r, "Mcp-Session-Id");

	if (!sid) {
		rpc_error(m, 400, GH_MCP_INVALID_REQUEST,
			  "Bad Request: the Mcp-Session-Id header is required (initialize first)",
			  NULL);
		return -1;
	}
	if (gh_mcp_sessions_get(m->r->app->mcp_sessions, sid, m->r->who.key.id, &m->sess) != 0) {
		rpc_error(m, 404, GH_MCP_INVALID_REQUEST,
			  "Session not found: it ended or the server restarted; initialize again",
			  NULL);
		return -1;
	}
	m->has_sess = 1;
	m->elicit = m->sess.elicit_form;
	return 0;
}

static void mcp_post(struct gh_req *r)
{
	struct mcp m;
	struct gh_err e;
	cJSON *id = NULL;
	const char *pv;
	int code = 0;

	memset(&m, 0, sizeof(m));
	m.r = r;
	if (front_checks(r) != 0)
		return;
	if (gh_mcp_in_parse(r->body, r->body_len, &m.in, &code, &id, &e) != GH_OK) {
		cJSON *o = gh_mcp_error(id, code, e.msg, NULL);

		if (o) {
			gh_http_json(r, 400, o);
			cJSON_Delete(o);
		} else {
			gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		}
		return;
	}
	cJSON_Delete(id);
	if (pick_agent(r, &m.agent) != 0)
		goto out;
	m.modern = m.in.meta_version != NULL && m.in.type != GH_MCP_IN_RESPONSE;
	if (m.modern) {
		if (gh_mcp_check_modern(&m.in, gh_http_header(r, "Mcp-Method"),
					gh_http_header(r, "Mcp-Name"),
					gh_http_header(r, "MCP-Protocol-Version"), &code, &e) != 0) {
			cJSON *data = NULL;

			if (code == GH_MCP_UNSUPPORTED_VERSION && (data = cJSON_CreateObject())) {
				cJSON *sv = cJSON_AddArrayToObject(data, "supported");

				cJSON_AddItemToArray(sv, cJSON_CreateString(GH_MCP_V2026));
				cJSON_AddStringToObject(data, "requested", m.in.meta_version);
			}
			rpc_error(&m, 400, code, e.msg, data);
			goto out;
		}
		if (m.in.type == GH_MCP_IN_NOTIFICATION) {
			accepted(r);
			goto out;
		}
		m.elicit = gh_mcp_caps_elicit_form(m.in.meta_caps);
		dispatch_request(&m);
		goto out;
	}
	if (m.in.type == GH_MCP_IN_REQUEST && !strcmp(m.in.method, "initialize")) {
		initialize(&m);
		goto out;
	}
	if (need_session(&m) != 0)
		goto out;
	pv = gh_http_header(r, "MCP-Protocol-Version");
	if (pv && !gh_mcp_session_version(pv)) {
		char msg[128];

		snprintf(msg, sizeof(msg), "Bad Request: unsupported MCP-Protocol-Version %.40s", pv);
		rpc_error(&m, 400, GH_MCP_INVALID_REQUEST, msg, NULL);
		goto out;
	}
	switch (m.in.type) {
	case GH_MCP_IN_RESPONSE:
		if (cJSON_IsString(m.in.id))
			elicit_deliver(m.sess.id, m.in.id->valuestring,
				       m.in.result ? m.in.result : m.in.error);
		accepted(r);
		break;
	case GH_MCP_IN_NOTIFICATION:
		if (!strcmp(m.in.method, "notifications/initialized"))
			gh_mcp_sessions_initialized(r->app->mcp_sessions, m.sess.id);
		accepted(r);
		break;
	case GH_MCP_IN_REQUEST:
		dispatch_request(&m);
		break;
	}
out:
	if (m.streaming)
		gh_http_stream_end(&m.hs, 0);
	gh_mcp_in_clear(&m.in);
}

/* gatehouse sends nothing outside the answer to a request: no stream to
 * open (the spec's 405). */
static void mcp_get(struct gh_req *r)
{
	if (front_checks(r) != 0)
		return;
	r->extra_headers = "Allow: POST, DELETE\r\n";
	gh_http_errorf(r, GH_E_METHOD, "gatehouse opens no stream outside a request: use POST");
}

static void mcp_delete(struct gh_req *r)
{
	const char *sid = gh_http_header(r, "Mcp-Session-Id");

	if (front_checks(r) != 0)
		return;
	if (!sid) {
		gh_http_errorf(r, GH_E_BADREQ, "the Mcp-Session-Id header is required");
		return;
	}
	if (gh_mcp_sessions_end(r->app->mcp_sessions, sid, r->who.key.id) != 0) {
		gh_http_errorf(r, GH_E_NOTFOUND, "session not found");
		return;
	}
	gh_http_send(r, 204, NULL, "", 0);
}

const struct gh_route gh_routes_mcp[] = {
	{"POST", "/mcp", GH_AUTH_KEY, mcp_post},
	{"GET", "/mcp", GH_AUTH_KEY, mcp_get},
	{"DELETE", "/mcp", GH_AUTH_KEY, mcp_delete},
	{"POST", "/mcp/:id", GH_AUTH_KEY, mcp_post},
	{"GET", "/mcp/:id", GH_AUTH_KEY, mcp_get},
	{"DELETE", "/mcp/:id", GH_AUTH_KEY, mcp_delete},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
