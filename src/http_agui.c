/*
 * http_agui.c - the AG-UI surface, so TanStack AI's ChatClient, CopilotKit
 * and @ag-ui/client's HttpAgent work unchanged:
 *
 *   POST /ag-ui/:agentId    a RunAgentInput; the answer is AG-UI events as
 *                           SSE (RUN_STARTED ... RUN_FINISHED or RUN_ERROR),
 *                           each with an "id:" line, its offset in the run
 *   GET  /ag-ui/:agentId?runId=R&offset=N
 *                           the events of the client's run R from after
 *                           offset N (-1: from the start) while it runs and
 *                           for 5 minutes after; Last-Event-ID does the same,
 *                           also on a POST repeated after a broken stream
 *
 * threadId names a thread of the key's owner: the client holds the
 * conversation and resends it, the thread records what is new. The
 * request's tools are client tools governed by the key's policy (those it
 * refuses are kept from the model). Server tools run inside and show as
 * TOOL_CALL_START/ARGS/END and TOOL_CALL_RESULT; a client call the gate let
 * through ends the run (outcome success with pendingToolCallIds, and a
 * CUSTOM "tool-input-available" event TanStack's client runs it on); the
 * next request, ending with the tool messages, continues it.
 *
 * A call that needs the caller's approval ends the run with an interrupt
 * (wire_agui.c) which a later request's resume answers (approved, reason,
 * editedArgs); one an administrator decides is waited for up to
 * server.approval_wait_ms (keep-alive comments) and, still pending, ends
 * the run with an interrupt naming the approval, which a resume waits on
 * again.
 *
 * A client that leaves does not stop the run: its turn goes on to the end
 * so that a reconnect gets every event, once and in order. The events of
 * each request are kept in the engine's run journal (run_journal.h), as
 * its GH_JOURNAL_AGUI stream of (owner, runId), with the journal's bounds;
 * everything else is per request, on the worker thread that serves it.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "run.h"
#include "run_journal.h"
#include "tools.h"
#include "util.h"
#include "wire_agui.h"

/* The offset a client resumes after: Last-Event-ID, else ?offset, else -1
 * (from the start). -2 when what it sent is no offset. */
static int64_t resume_offset(struct gh_req *r)
{
	const char *h = gh_http_header(r, "Last-Event-ID");
	char buf[32];
	const char *q = h ? h : gh_http_query(r, "offset", buf, sizeof(buf));
	char *end;
	long long v;

	if (!q || !*q)
		return -1;
	v = strtoll(q, &end, 10);
	if (*end || v < -1)
		return -2;
	return (int64_t)v;
}

/* A client following a run's kept events. */
struct joiner {
	struct gh_http_stream hs;
};

static int join_event(void *ud, int64_t seq, const char *type, const char *data, size_t len)
{
	struct joiner *j = ud;
	char id[24];

	(void)type;
	snprintf(id, sizeof(id), "%lld", (long long)seq);
	return gh_http_stream_send_id(&j->hs, id, data, len) != 0 ||
	       atomic_load(&j->hs.r->app->stopping);
}

static int join_idle(void *ud)
{
	struct joiner *j = ud;

	if (!j->hs.begun && gh_http_stream_begin(&j->hs) != 0)
		return 1;
	return gh_http_stream_tick(&j->hs) != 0 || atomic_load(&j->hs.r->app->stopping);
}

/* Streams the kept events of the caller's run from after an offset.
 * GH_E_NOTFOUND (nothing answered yet) when none are kept here. */
static enum gh_code join_run(struct gh_req *r, const char *run)
{
	struct joiner j;
	struct gh_err e;
	int64_t after = resume_offset(r);
	enum gh_code rc;
	cJSON *ev;

	if (after == -2) {
		gh_http_errorf(r, GH_E_BADREQ, "offset: expected an event offset (-1 for the "
			       "start)");
		return GH_E_BADREQ;
	}
	memset(&j, 0, sizeof(j));
	if (gh_http_stream_start(r, &j.hs) != 0)
		return GH_E_UNAVAILABLE;
	rc = gh_run_journal_follow(GH_JOURNAL_AGUI, r->who.key.owner, run, after + 1, join_event,
				   join_idle, &j, &e);
	if (rc == GH_E_NOTFOUND && !j.hs.begun)
		return rc;
	if (rc != GH_OK && !j.hs.gone && (ev = gh_agui_event("RUN_ERROR", gh_now_ms()))) {
		cJSON_AddStringToObject(ev, "message", e.msg);
		cJSON_AddStringToObject(ev, "code", gh_code_name(e.code));
		cJSON_AddStringToObject(ev, "runId", run);
		gh_http_stream_json(&j.hs, NULL, ev);
	}
	gh_http_stream_end(&j.hs, 0);
	return GH_OK;
}

static void join(struct gh_req *r)
{
	const struct gh_agent_conf *agent;
	struct gh_err e;
	char run[GH_NAME_MAX + 1];

	if (gh_run_agent(r->app, &r->who, r->params[0], &agent, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	if (!gh_http_query(r, "runId", run, sizeof(run)) || !*run) {
		gh_http_errorf(r, GH_E_BADREQ, "runId: required (the run to join)");
		return;
	}
	if (join_run(r, run) == GH_E_NOTFOUND)
		gh_http_errorf(r, GH_E_NOTFOUND, "no run %s of yours is running here or ended in the "
			       "last %d minutes", run, GH_JOURNAL_KEEP_MS / 60000);
}

/* ------------------------------------------------------------- the run */

/* One AG-UI request, from parsing to the last byte. */
struct ag {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *body;                      /* owned */
	struct gh_agui_req req;           /* owned */
	struct gh_run_request rq;
	struct gh_run_sink sink;
	struct gh_http_stream hs;
	int kept;                         /* events go to the run journal */
	int64_t seq;                      /* the next event's offset */
	int started, ended;
	char named[GH_ID_MAX];            /* a new run's id (from runId) */
	char msg_id[GH_ID_MAX];           /* the text message open, "" none */
	char rs_id[GH_ID_MAX];            /* the reasoning message open, "" none */
	char parent[GH_ID_MAX];           /* the last assistant message, for tool calls */
	cJSON *shown;                     /* owned: ids of calls shown as TOOL_CALL_* */
	struct gh_run_usage usage;
};

/* One event out: offset, kept, sent (unless the client left). Takes ev. */
static void emit_raw(struct ag *q, cJSON *ev)
{
	char *data = ev ? gh_json_dump(ev) : NULL;
	const char *type = ev ? gh_json_str(ev, "type") : NULL;
	char id[24];
	int64_t off;

	if (data && q->kept)            /* the journal numbers them as off does */
		gh_run_journal_add(GH_JOURNAL_AGUI, q->r->who.key.owner, q->req.run_id,
				   type ? type : "", data, strlen(data), 0);
	cJSON_Delete(ev);
	if (!data)
		return;
	off = q->seq++;
	snprintf(id, sizeof(id), "%lld", (long long)off);
	if (!q->hs.gone)
		gh_http_stream_send_id(&q->hs, id, data, strlen(data));
	free(data);
}

/* The head and RUN_STARTED: the first thing sent. */
static int open_stream(struct gh_http_stream *hs, void *ud)
{
	struct ag *q = ud;
	cJSON *ev = gh_agui_event("RUN_STARTED", gh_now_ms());

	if (gh_http_sse_begin(hs->r) != 0)
		hs->gone = 1;
	q->started = 1;
	if (ev) {
		cJSON_AddStringToObject(ev, "threadId", q->req.thread_id);
		cJSON_AddStringToObject(ev, "runId", q->req.run_id);
		if (q->req.parent_run_id)
			cJSON_AddStringToObject(ev, "parentRunId", q->req.parent_run_id);
	}
	emit_raw(q, ev);
	return hs->gone ? -1 : 0;
}

static void emit(struct ag *q, cJSON *ev)
{
	if (!q->started)
		gh_http_stream_begin(&q->hs);
	emit_raw(q, ev);
}

static cJSON *event(const char *type)
{
	return gh_agui_event(type, gh_now_ms());
}

/* Ends the reasoning message open, and its span. */
/* An event that names only its message. */
static void emit_id(struct ag *q, const char *type, const char *msg_id)
{
	cJSON *ev = event(type);

	if (ev)
		cJSON_AddStringToObject(ev, "messageId", msg_id);
	emit(q, ev);
}

/* The same with one more string field (key: the n bytes at val). */
static void emit_id_str(struct ag *q, const char *type, const char *msg_id, const char *key,
			const char *val, size_t n)
{
	cJSON *ev = event(type);
	char *s = malloc(n + 1);

	if (ev && s) {
		memcpy(s, val, n);
		s[n] = '\0';
		cJSON_AddStringToObject(ev, "messageId", msg_id);
		cJSON_AddStringToObject(ev, key, s);
	} else {
		cJSON_Delete(ev);   /* out of memory: emit says so */
		ev = NULL;
	}
	free(s);
	emit(q, ev);
}

static void reasoning_close(struct ag *q)
{
	if (!q->rs_id[0])
		return;
	emit_id(q, "REASONING_MESSAGE_END", q->rs_id);
	emit_id(q, "REASONING_END", q->rs_id);
	q->rs_id[0] = '\0';
}

/* The model's reasoning, as a reasoning message of its own. */
static void reasoning_delta(struct ag *q, const char *t, size_t len)
{
	if (!t || !len)
		return;
	if (q->msg_id[0]) {
		emit_id(q, "TEXT_MESSAGE_END", q->msg_id);
		q->msg_id[0] = '\0';
	}
	if (!q->rs_id[0]) {
		gh_id_new("rsn_", q->rs_id, sizeof(q->rs_id));
		emit_id(q, "REASONING_START", q->rs_id);
		emit_id_str(q, "REASONING_MESSAGE_START", q->rs_id, "role", "reasoning", 9);
	}
	emit_id_str(q, "REASONING_MESSAGE_CONTENT", q->rs_id, "delta", t, len);
}

/* Ends whatever message is open (text or reasoning). */
static void text_close(struct ag *q)
{
	reasoning_close(q);
	if (!q->msg_id[0])
		return;
	emit_id(q, "TEXT_MESSAGE_END", q->msg_id);
	q->msg_id[0] = '\0';
}

static void text_delta(struct ag *q, const char *t, size_t len)
{
	if (!t || !len)
		return;
	reasoning_close(q);
	if (!q->msg_id[0]) {
		gh_id_new("msg_", q->msg_id, sizeof(q->msg_id));
		gh_strlcpy(q->parent, q->msg_id, sizeof(q->parent));
		emit_id_str(q, "TEXT_MESSAGE_START", q->msg_id, "role", "assistant", 9);
	}
	emit_id_str(q, "TEXT_MESSAGE_CONTENT", q->msg_id, "delta", t, len);
}

/* A call as TOOL_CALL_START, one TOOL_CALL_ARGS and TOOL_CALL_END. */
static void show_call(struct ag *q, const char *id, const char *name, const cJSON *args)
{
	char *a = args ? gh_json_dump(args) : NULL;
	cJSON *ev;

	text_close(q);
	if ((ev = event("TOOL_CALL_START"))) {
		cJSON_AddStringToObject(ev, "toolCallId", id);
		cJSON_AddStringToObject(ev, "toolCallName", name);
		if (q->parent[0])
			cJSON_AddStringToObject(ev, "parentMessageId", q->parent);
	}
	emit(q, ev);
	if ((ev = event("TOOL_CALL_ARGS"))) {
		cJSON_AddStringToObject(ev, "toolCallId", id);
		cJSON_AddStringToObject(ev, "delta", a && strcmp(a, "null") ? a : "{}");
	}
	emit(q, ev);
	if ((ev = event("TOOL_CALL_END")))
		cJSON_AddStringToObject(ev, "toolCallId", id);
	emit(q, ev);
	cJSON_AddItemToArray(q->shown, cJSON_CreateString(id));
	free(a);
}

static int shown(const struct ag *q, const char *id)
{
	const cJSON *s;

	cJSON_ArrayForEach(s, q->shown)
		if (id && !strcmp(s->valuestring, id))
			return 1;
	return 0;
}

static void show_result(struct ag *q, const struct gh_run_call *c)
{
	char mid[GH_ID_MAX];
	char *content = c->result ? gh_json_dump(c->result) : NULL;
	cJSON *ev;

	gh_id_new("msg_", mid, sizeof(mid));
	if ((ev = event("TOOL_CALL_RESULT"))) {
		cJSON_AddStringToObject(ev, "messageId", mid);
		cJSON_AddStringToObject(ev, "toolCallId", c->id);
		cJSON_AddStringToObject(ev, "content", content ? content : "null");
		cJSON_AddStringToObject(ev, "role", "tool");
	}
	emit(q, ev);
	free(content);
}

/* A client call the gate let through: shown, and announced the way
 * TanStack's client runs its tools. */
static void hand_out(struct ag *q, const cJSON *call)
{
	const char *id = gh_json_str(call, "toolCallId");
	const char *name = gh_agui_client_name(q->req.client_defs, gh_json_str(call, "toolName"));
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "args");
	cJSON *ev, *v;

	if (!id || shown(q, id))
		return;
	show_call(q, id, name, args);
	if ((ev = event("CUSTOM"))) {
		cJSON_AddStringToObject(ev, "name", "tool-input-available");
		v = cJSON_AddObjectToObject(ev, "value");
		cJSON_AddStringToObject(v, "toolCallId", id);
		cJSON_AddStringToObject(v, "toolName", name);
		cJSON_AddItemToObject(v, "input", args ? cJSON_Duplicate(args, 1)
						       : cJSON_CreateObject());
	}
	emit(q, ev);
}

static int is_client(const struct ag *q, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, q->req.client_defs)
		if (!strcmp(gh_json_str(d, "name") ? gh_json_str(d, "name") : "", name))
			return 1;
	return 0;
}

static int sink_tick(void *ud)
{
	struct ag *q = ud;

	/* heartbeats; a client that left does not stop the run */
	gh_http_stream_tick(&q->hs);
	return 0;
}

/* The engine's events: text as it comes; server tools' calls and results;
 * client calls only once the gate let them through (at the end). */
static int sink_event(void *ud, const struct gh_run_event *ev)
{
	struct ag *q = ud;
	const struct gh_run_call *c = ev->call;

	switch (ev->kind) {
	case GH_EV_TEXT_DELTA:
		text_delta(q, ev->text, ev->len);
		break;
	case GH_EV_REASONING_DELTA:
		/* a signature alone shows nothing */
		reasoning_delta(q, ev->text, ev->len);
		break;
	case GH_EV_STEP_START:
		text_close(q);
		break;
	case GH_EV_TOOL_CALL:
		/* before the gate: a name the client declared is its own tool */
		if (c && c->id && c->name && !is_client(q, c->name))
			show_call(q, c->id, c->name, c->args);
		break;
	case GH_EV_TOOL_RESULT:
		/* a server call shown by an earlier request (approved or denied
		 * since) gets its result here */
		if (c && c->id && (shown(q, c->id) || (c->source && strcmp(c->source, "client"))))
			show_result(q, c);
		break;
	default:
		break;
	}
	return 0;
}

/* ------------------------------------------------------------ endings */

static cJSON *usage_array(const struct gh_run_usage *u)
{
	cJSON *arr = cJSON_CreateArray(), *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "inputTokens", (double)u->input_tokens);
	cJSON_AddNumberToObject(o, "outputTokens", (double)u->output_tokens);
	cJSON_AddNumberToObject(o, "totalTokens", (double)(u->input_tokens + u->output_tokens));
	cJSON_AddItemToArray(arr, o);
	return arr;
}

/* RUN_FINISHED with outcome (taken). */
static void finish(struct ag *q, cJSON *outcome)
{
	cJSON *ev = event("RUN_FINISHED");

	text_close(q);
	if (ev) {
		cJSON_AddStringToObject(ev, "threadId", q->req.thread_id);
		cJSON_AddStringToObject(ev, "runId", q->req.run_id);
		cJSON_AddItemToObject(ev, "outcome", outcome);
		cJSON_AddItemToObject(ev, "usage", usage_array(&q->usage));
	} else {
		cJSON_Delete(outcome);
	}
	if (!q->started)
		gh_http_stream_begin(&q->hs);
	emit_raw(q, ev);
	q->ended = 1;
}

/* Success; pending client calls (may be NULL) handed out first. */
static void finish_success(struct ag *q, const cJSON *pending)
{
	cJSON *out = cJSON_CreateObject(), *ids = NULL;
	const cJSON *c;

	cJSON_ArrayForEach(c, pending) {
		hand_out(q, c);
		if (!ids)
			ids = cJSON_CreateArray();
		cJSON_AddItemToArray(ids, cJSON_CreateString(gh_json_str(c, "toolCallId")));
	}
	cJSON_AddStringToObject(out, "type", "success");
	if (ids)
		cJSON_AddItemToObject(out, "pendingToolCallIds", ids);
	finish(q, out);
}

/* The failure: a plain error while nothing was sent, else RUN_ERROR. */
static void fail(struct ag *q, const struct gh_err *e)
{
	cJSON *ev;

	if (!q->started) {
		gh_http_error(q->r, e);
		return;
	}
	text_close(q);
	if ((ev = event("RUN_ERROR"))) {
		cJSON_AddStringToObject(ev, "message", e->msg);
		cJSON_AddStringToObject(ev, "code", gh_code_name(e->code));
		cJSON_AddStringToObject(ev, "threadId", q->req.thread_id);
		cJSON_AddStringToObject(ev, "runId", q->req.run_id);
	}
	emit_raw(q, ev);
	q->ended = 1;
}

/* The calls of v waiting on a person, as interrupts; *callers counts those
 * the caller decides. NULL when none waits. */
static cJSON *interrupts(struct ag *q, const struct gh_run_view *v, int *callers)
{
	cJSON *arr = NULL;
	size_t i;

	*callers = 0;
	for (i = 0; i < v->ncalls; i++) {
		const struct gh_run_call *c = &v->calls[i];
		struct gh_agui_pending p;
		int caller;

		if (!gh_run_call_awaits_decision(c, &caller))
			continue;
		memset(&p, 0, sizeof(p));
		p.approval_id = c->approval_id;
		p.tool_call_id = c->id;
		p.tool_name = c->source && !strcmp(c->source, "client")
				      ? gh_agui_client_name(q->req.client_defs, c->name)
				      : c->name;
		p.args = c->args;
		p.args_sha256 = c->approval->args_sha256;
		p.approver = c->approval->approver;
		p.rule = c->approval->rule;
		p.expires_at = c->approval_expires_at;
		*callers += caller;
		if (!arr)
			arr = cJSON_CreateArray();
		cJSON_AddItemToArray(arr, gh_agui_interrupt(&p));
	}
	return arr;
}

static void finish_interrupted(struct ag *q, cJSON *list)
{
	cJSON *out = cJSON_CreateObject();

	cJSON_AddStringToObject(out, "type", "interrupt");
	cJSON_AddItemToObject(out, "interrupts", list);
	finish(q, out);
}

static int wait_gone(void *ud)
{
	struct ag *q = ud;

	return gh_http_stream_tick(&q->hs);
}

/* Where a run stands after someone else's decision was waited for
 * (timed_out: still pending), as the run's end. */
static void settled(struct ag *q, const struct gh_run_view *v, int timed_out)
{
	struct gh_err e;
	int callers;
	cJSON *list, *pending;

	q->usage = v->usage;
	if (v->status == GH_RUN_SUSPENDED || timed_out) {
		if ((list = interrupts(q, v, &callers))) {
			finish_interrupted(q, list);
			return;
		}
	}
	if (v->status == GH_RUN_COMPLETED) {
		if (v->text && *v->text)
			text_delta(q, v->text, strlen(v->text));
		finish_success(q, NULL);
	} else if (v->status == GH_RUN_WAITING) {
		pending = gh_run_view_pending_json(v);
		finish_success(q, pending);
		cJSON_Delete(pending);
	} else if (gh_run_status_final(v->status)) {
		gh_err_set(&e, GH_E_UPSTREAM, "run %s %s: %s", v->id, gh_run_status_name(v->status),
			   v->error ? v->error : "no reason recorded");
		fail(q, &e);
	} else {
		/* decided, and being carried out elsewhere still: say where the
		 * answer will be */
		char note[256];

		snprintf(note, sizeof(note), "The approval was decided and run %s is carrying it "
			 "out; its answer will be at GET /api/runs/%s.", v->id, v->id);
		text_delta(q, note, strlen(note));
		finish_success(q, NULL);
	}
}

/* A run that stopped on approvals: the caller's end the run as interrupts
 * at once; an administrator's are waited for (keep-alive) first. */
static void suspended(struct ag *q, const char *run_id)
{
	struct gh_run_view v;
	struct gh_err e;
	enum gh_code rc;
	int callers;
	cJSON *list;

	if ((rc = gh_run_view_get(q->r->app, q->r->who.key.owner, run_id, &v, &e)) != GH_OK) {
		fail(q, &e);
		return;
	}
	list = interrupts(q, &v, &callers);
	gh_run_view_clear(&v);
	if (list && callers) {
		finish_interrupted(q, list);
		return;
	}
	cJSON_Delete(list);
	rc = gh_run_wait(q->r->app, q->r->who.key.owner, run_id, GH_UNTIL_SETTLED,
			 gh_app_cfg(q->r->app)->server.approval_wait_ms, wait_gone, q, &v, &e);
	if (rc == GH_OK || rc == GH_E_TIMEOUT || rc == GH_E_CANCELLED)
		settled(q, &v, rc != GH_OK);
	else
		fail(q, &e);
	gh_run_view_clear(&v);
}

/* How the request's turn ended, as the run's end. */
static void ended(struct ag *q, const struct gh_run_result *res)
{
	q->usage = res->usage;
	if (res->status == GH_RUN_SUSPENDED)
		suspended(q, res->run_id);
	else
		finish_success(q, res->status == GH_RUN_WAITING ? res->pending : NULL);
}

/* ------------------------------------------------------------ resuming */

/* Answers each resume entry; the last continuation's result goes into
 * *res (*ran = 1), or a decision waited for into *v (*waited = 1, with
 * *timed_out). */
static enum gh_code answer_all(struct ag *q, struct gh_run_result *res, int *ran,
			       struct gh_run_view *v, int *waited, int *timed_out,
			       struct gh_err *e)
{
	enum gh_code rc = GH_OK;
	size_t i;

	*ran = *waited = *timed_out = 0;
	for (i = 0; i < q->req.nresume && rc == GH_OK; i++) {
		const struct gh_agui_resume *en = &q->req.resume[i];
		struct gh_tool_answer ta;
		struct gh_answer_out out;

		memset(&ta, 0, sizeof(ta));
		ta.approval_id = en->interrupt_id;
		ta.approve = en->approve;
		ta.reason = en->reason ? en->reason : en->cancelled ? "cancelled by the user" : NULL;
		ta.edited_args = en->edited_args;
		ta.mode = GH_ANSWER_CONTINUE;
		ta.wait_ms = gh_app_cfg(q->r->app)->server.approval_wait_ms;
		ta.gone = wait_gone;
		ta.ud = q;
		rc = gh_answer_tool_call(q->r->app, &q->r->who, &ta, &q->sink, &out, e);
		if (rc == GH_OK && out.continued) {
			gh_run_result_clear(res);
			*res = out.result;
			memset(&out.result, 0, sizeof(out.result));
			*ran = 1;
			*waited = 0;
		} else if (rc == GH_OK && out.waited) {
			gh_run_view_clear(v);
			*v = out.view;
			memset(&out.view, 0, sizeof(out.view));
			*waited = 1;
			*ran = 0;
			*timed_out = out.wait_rc != GH_OK;
		}
		gh_answer_out_clear(&out);
	}
	return rc;
}

/* ------------------------------------------------------------- request */

static void tool_removed(void *ud, const char *name, const char *rule)
{
	struct ag *q = ud;

	gh_info("%s /ag-ui: tool %s not offered to the model: %s", q->r->id, name, rule);
}

/* Tool messages answering calls no run waits for are history the client
 * resends (a server tool's result, shown to it earlier): left out, unless
 * none is left (the engine then says what is wrong). */
static void drop_echoed_results(struct ag *q)
{
	cJSON *m = q->req.messages ? q->req.messages->child : NULL, *next;
	char run[GH_ID_MAX];
	int answered, kept = 0, dropped = 0;
	struct gh_err e;

	for (; m; m = m->next) {
		const cJSON *part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"),
						       0);

		if (gh_run_find_call(q->r->app, q->r->who.key.owner,
				     gh_json_str(part, "toolCallId") ? gh_json_str(part, "toolCallId")
								     : "",
				     run, &answered, &e) == GH_OK)
			kept++;
	}
	if (!kept)
		return;
	for (m = q->req.messages->child; m; m = next) {
		const cJSON *part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"),
						       0);
		const char *id = gh_json_str(part, "toolCallId");

		next = m->next;
		if (gh_run_find_call(q->r->app, q->r->who.key.owner, id ? id : "", run, &answered,
				     &e) != GH_OK) {
			cJSON_Delete(cJSON_DetachItemViaPointer(q->req.messages, m));
			dropped++;
		}
	}
	if (dropped)
		gh_info("%s /ag-ui: %d resent tool result(s) of earlier calls left out", q->r->id,
			dropped);
}

static enum gh_code parse_request(struct ag *q, struct gh_err *e)
{
	struct gh_req *r = q->r;
	enum gh_code rc;

	if ((rc = gh_http_body_object(r, &q->body, e)) != GH_OK ||
	    (rc = gh_agui_parse(q->body, &q->req, e)) != GH_OK ||
	    (rc = gh_run_agent(r->app, &r->who, r->params[0], &q->agent, e)) != GH_OK)
		return rc;
	/* UIs declare the tools they have: what the policy refuses is kept from
	 * the model, not a 403 for the request */
	gh_tools_client_defs_withhold(r->who.policy, q->req.client_defs, tool_removed, q);
	if (q->req.continuation)
		drop_echoed_results(q);
	q->rq.who = &r->who;
	q->rq.agent = q->agent;
	q->rq.thread_id = q->req.thread_id;
	q->rq.messages = q->req.messages;
	q->rq.client_defs = q->req.client_defs;
	q->rq.stream = 1;
	q->rq.stateless = 1;
	q->rq.history_len = q->req.history_len;
	q->rq.surface = "agui";
	if (!q->req.continuation) {
		gh_run_named_id(r->who.key.owner, q->req.run_id, q->named);
		q->rq.run_id = q->named;
	}
	return GH_OK;
}

/* Runs the request's turn (a new run, a continuation or the answers to
 * interrupts) and ends the event stream. */
static void run_turn(struct ag *q)
{
	struct gh_run_result res;
	struct gh_run_view v;
	struct gh_err e;
	enum gh_code rc;
	int ran = 1, waited = 0, timed_out = 0;

	memset(&res, 0, sizeof(res));
	memset(&v, 0, sizeof(v));
	gh_err_clear(&e);
	if (q->req.nresume)
		rc = answer_all(q, &res, &ran, &v, &waited, &timed_out, &e);
	else
		rc = gh_run_generate(q->r->app, &q->rq, &q->sink, &res, &e);
	/* the closing events leave together with the end of the stream */
	gh_http_stream_hold(&q->hs);
	text_close(q);
	if (rc != GH_OK)
		fail(q, &e);
	else if (ran)
		ended(q, &res);
	else if (waited)
		settled(q, &v, timed_out);
	else
		finish_success(q, NULL);
	gh_run_result_clear(&res);
	gh_run_view_clear(&v);
}

static void run_agent(struct gh_req *r)
{
	struct ag q;
	struct gh_err e;

	memset(&q, 0, sizeof(q));
	gh_err_clear(&e);
	q.r = r;
	q.hs.r = r;
	q.hs.last_write_ns = gh_mono_ns();
	if (!(q.shown = cJSON_CreateArray())) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (parse_request(&q, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	/* a stream broken mid-way, sent again with the last offset it got */
	if (gh_http_header(r, "Last-Event-ID") && join_run(r, q.req.run_id) != GH_E_NOTFOUND)
		goto out;
	if (gh_run_journal_open(GH_JOURNAL_AGUI, r->who.key.owner, q.req.run_id, &e) == GH_OK)
		q.kept = 1;
	else if (e.code == GH_E_CONFLICT) {
		gh_http_errorf(r, GH_E_CONFLICT, "runId %s: a run of yours with this id is running or "
			       "just ended; join it with GET ?runId=%s&offset=-1", q.req.run_id,
			       q.req.run_id);
		goto out;
	}
	/* the head waits for the first event, so a refusal before it (policy,
	 * conflict, budget) is a plain error with its status */
	if (gh_http_run_start(r, 1, &q.hs, open_stream, sink_event, sink_tick, &q, &q.sink) != 0)
		goto out;
	/* ticks on a timer: a client that hung up must not wake them at once */
	q.sink.wake_fd = 0;
	q.sink.tick_ms = 0;
	run_turn(&q);
	if (q.started)
		gh_http_stream_end(&q.hs, 0);
out:
	if (q.kept)
		gh_run_journal_end(GH_JOURNAL_AGUI, r->who.key.owner, q.req.run_id);
	cJSON_Delete(q.shown);
	gh_agui_req_free(&q.req);
	cJSON_Delete(q.body);
}

const struct gh_route gh_routes_agui[] = {
	{"POST", "/ag-ui/:agentId", GH_AUTH_KEY, run_agent},
	{"GET", "/ag-ui/:agentId", GH_AUTH_KEY, join},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
