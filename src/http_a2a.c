/*
 * http_a2a.c - the A2A surface's JSON-RPC: POST /a2a/:agentId (API key).
 * Cards are in http_a2a_card.c; the wire (both dialects, parts, tasks) is
 * in wire_a2a.c.
 *
 * Methods: A2A 1.0 SendMessage, SendStreamingMessage, GetTask, CancelTask
 * and the 0.3 names message/send, message/stream, tasks/get, tasks/cancel.
 * The method name picks the dialect of the answer; an A2A-Version header,
 * when sent, must name 0.3 or 1.0.
 *
 * One task per run. A message without taskId starts a task (and a run of
 * gh_run_generate); its contextId is the memory thread. A message with the
 * taskId of a task in input-required carries the client's tool results and
 * continues the run. Tasks live in the store (store_a2a.h) and are brought
 * up to date from the view of their run whenever they are read, so a run
 * resumed in the background after an approval shows in GetTask. A request
 * running a task holds its run (gh_run_hold) before the task shows as
 * working, so GetTask knows it is in flight and CancelTask can stop it.
 *
 * Per request, on the CivetWeb worker thread; nothing here is shared.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "run.h"
#include "store_a2a.h"
#include "tools.h"
#include "util.h"
#include "wire_a2a.h"

#define CANCEL_WAIT_MS 10000

/* ------------------------------------------------------------ JSON-RPC */

struct rpc {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *id;                         /* the request's id (owned), NULL = null */
	enum gh_a2a_dialect d;
	char headers[160];                 /* extra response headers */
};

static cJSON *envelope(struct rpc *c)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddItemToObject(o, "id", c->id ? cJSON_Duplicate(c->id, 1) : cJSON_CreateNull());
	return o;
}

/* Answers {jsonrpc, id, result}; takes result. */
static void rpc_result(struct rpc *c, cJSON *result)
{
	cJSON *o = envelope(c);

	if (!o || !result) {
		cJSON_Delete(o);
		cJSON_Delete(result);
		gh_http_errorf(c->r, GH_E_NOMEM, "out of memory");
		return;
	}
	cJSON_AddItemToObject(o, "result", result);
	gh_http_json(c->r, 200, o);
	cJSON_Delete(o);
}

static cJSON *error_envelope(struct rpc *c, int code, const char *msg)
{
	cJSON *o = envelope(c), *err;

	if (!o)
		return NULL;
	err = cJSON_AddObjectToObject(o, "error");
	cJSON_AddNumberToObject(err, "code", code);
	cJSON_AddStringToObject(err, "message", msg);
	return o;
}

/* A JSON-RPC error: HTTP 200, as JSON-RPC over HTTP answers. */
static void rpc_error(struct rpc *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rpc_error(struct rpc *c, int code, const char *fmt, ...)
{
	char msg[GH_ERR_MSG_MAX];
	va_list ap;
	cJSON *o;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = error_envelope(c, code, msg);
	if (!o) {
		gh_http_errorf(c->r, GH_E_NOMEM, "out of memory");
		return;
	}
	if (code == GH_RPC_INTERNAL)
		gh_warn("%s a2a: %s", c->r->id, msg);
	gh_http_json(c->r, 200, o);
	cJSON_Delete(o);
}

static void rpc_fail(struct rpc *c, const struct gh_err *e)
{
	rpc_error(c, gh_a2a_rpc_code(e->code), "%s", e->msg);
}

/* --------------------------------------------------------- the run sink */

/* What a request running a task hands the engine: for streams the SSE
 * events (text deltas as artifact chunks) and the stream's tick. */
struct a2a_run {
	struct rpc *c;
	struct gh_a2a_task *t;
	struct gh_run_hold hold;
	struct gh_run_sink sink;
	struct gh_http_stream hs;
	int stream;
	char art_id[GH_ID_MAX + 32];  /* artifact of the current step */
	int art_chunks;               /* chunks of it sent */
	char *pending;                /* the newest text delta, held back so the
				       * last one can carry lastChunk */
};

/* Sends one SSE event {jsonrpc, id, result}; takes result. */
static int sse_result(struct a2a_run *s, cJSON *result)
{
	cJSON *o;

	if (s->hs.gone || !result || !(o = envelope(s->c))) {
		cJSON_Delete(result);
		return -1;
	}
	cJSON_AddItemToObject(o, "result", result);
	return gh_http_stream_json(&s->hs, NULL, o);
}

/* The 1.0 StreamResponse member or the 0.3 kind around an event. */
static cJSON *stream_wrap(struct a2a_run *s, const char *v10_member, const char *v03_kind,
			  cJSON *ev)
{
	cJSON *o;

	if (!ev)
		return NULL;
	if (s->c->d == GH_A2A_V03) {
		cJSON_AddStringToObject(ev, "kind", v03_kind);
		return ev;
	}
	o = cJSON_CreateObject();
	if (!o) {
		cJSON_Delete(ev);
		return NULL;
	}
	cJSON_AddItemToObject(o, v10_member, ev);
	return o;
}

static int send_task(struct a2a_run *s, const struct gh_a2a_task *t)
{
	cJSON *task = gh_a2a_task_out(t, s->c->d, -1);

	if (s->c->d == GH_A2A_V10) {
		cJSON *o = cJSON_CreateObject();

		if (o)
			cJSON_AddItemToObject(o, "task", task);
		else
			cJSON_Delete(task);
		task = o;
	}
	return sse_result(s, task);
}

static int send_status(struct a2a_run *s, const struct gh_a2a_task *t, int final)
{
	cJSON *ev = cJSON_CreateObject();

	if (!ev)
		return -1;
	cJSON_AddStringToObject(ev, "taskId", t->id);
	cJSON_AddStringToObject(ev, "contextId", t->context_id);
	cJSON_AddItemToObject(ev, "status", gh_a2a_status_out(t, s->c->d));
	if (s->c->d == GH_A2A_V03)
		cJSON_AddBoolToObject(ev, "final", final);
	return sse_result(s, stream_wrap(s, "statusUpdate", "status-update", ev));
}

/* One chunk of the current step's text artifact. */
static int send_chunk(struct a2a_run *s, const char *text, int last)
{
	cJSON *ev = cJSON_CreateObject(), *a, *parts, *p;

	if (!ev)
		return -1;
	cJSON_AddStringToObject(ev, "taskId", s->t->id);
	cJSON_AddStringToObject(ev, "contextId", s->t->context_id);
	a = cJSON_AddObjectToObject(ev, "artifact");
	cJSON_AddStringToObject(a, "artifactId", s->art_id);
	cJSON_AddStringToObject(a, "name", "response");
	parts = cJSON_AddArrayToObject(a, "parts");
	p = gh_a2a_text_part(text);
	if (p)
		cJSON_AddItemToArray(parts, gh_a2a_part_out(p, s->c->d));
	cJSON_Delete(p);
	cJSON_AddBoolToObject(ev, "append", s->art_chunks > 0);
	cJSON_AddBoolToObject(ev, "lastChunk", last);
	s->art_chunks++;
	return sse_result(s, stream_wrap(s, "artifactUpdate", "artifact-update", ev));
}

static void flush_pending(struct a2a_run *s, int last)
{
	if (!s->pending)
		return;
	send_chunk(s, s->pending, last);
	free(s->pending);
	s->pending = NULL;
}

static int sink_event(void *ud, const struct gh_run_event *ev)
{
	struct a2a_run *s = ud;

	if (!s->stream)
		return 0;
	if (s->hs.gone)
		return 1;
	if (ev->kind == GH_EV_STEP_START) {
		flush_pending(s, 1);
		gh_a2a_artifact_id(ev->run_id, ev->step, s->art_id, sizeof(s->art_id));
		s->art_chunks = 0;
	} else if (ev->kind == GH_EV_TEXT_DELTA && ev->len) {
		flush_pending(s, 0);
		if ((s->pending = malloc(ev->len + 1))) {
			memcpy(s->pending, ev->text, ev->len);
			s->pending[ev->len] = '\0';
		}
	} else if (ev->kind == GH_EV_STEP_FINISH) {
		flush_pending(s, 1);
	}
	return s->hs.gone;
}

static int sink_tick(void *ud)
{
	struct a2a_run *s = ud;

	return s->stream ? gh_http_stream_tick(&s->hs) : 0;
}

/* Sets up a request's run of task t; the run is held from here on (before
 * the task shows as working, so a GetTask in between does not take it for
 * a task a restart interrupted). A stream's slot is taken already. */
static enum gh_code run_init(struct a2a_run *s, struct rpc *c, struct gh_a2a_task *t,
			     int stream, struct gh_err *e)
{
	struct gh_http_stream hs = s->hs;

	memset(s, 0, sizeof(*s));
	s->c = c;
	s->t = t;
	s->stream = stream;
	s->hs = hs;
	s->sink.event = sink_event;
	s->sink.tick = sink_tick;
	s->sink.ud = s;
	return gh_run_hold(c->r->app, t->owner, t->run_id, &s->hold, e);
}

static void run_done(struct a2a_run *s)
{
	free(s->pending);
	s->pending = NULL;
	gh_run_release(s->c->r->app, &s->hold);
}

/* ------------------------------------------------------------- methods */

/* Brings a stored task that may be behind its run up to date (a run
 * resumed after an approval, a request a restart interrupted), and saves
 * it. Best effort: on a store error the task is shown as stored. The task
 * was read before the look at the runs in flight: the request running it
 * may have settled it and let go in between, and then the save finds the
 * state moved on (GH_E_CONFLICT) and the task is read again, as that
 * request left it (its status message says why it ended), instead of
 * shown as this look at the run alone would have it. */
static void reconcile(struct gh_app *app, struct gh_a2a_task *t)
{
	struct gh_run_view v;
	struct gh_a2a_task again;
	struct gh_err e;
	char before[16];
	enum gh_code rc;

	if (gh_a2a_terminal(t->state))
		return;
	if (gh_run_in_flight(t->owner, t->run_id))
		return; /* a request of this process runs it */
	gh_strlcpy(before, t->state, sizeof(before));
	rc = gh_run_view_get(app, t->owner, t->run_id, &v, &e);
	if (rc == GH_E_NOTFOUND) {
		if (strcmp(t->state, GH_A2A_WORKING))
			return;
		/* a new run persists nothing until it ends: nobody runs it */
		gh_a2a_task_set(t, GH_A2A_FAILED, gh_a2a_error_message(
					t, "interrupted", "gatehouse stopped before the answer was "
					"ready; send the message again"));
	} else if (rc != GH_OK) {
		return;
	} else {
		if (v.updated_at <= t->updated_at &&
		    !strcmp(gh_a2a_state_of_run(v.status), t->state)) {
			gh_run_view_clear(&v);
			return;
		}
		gh_a2a_task_sync(t, &v);
		gh_run_view_clear(&v);
	}
	rc = gh_store_a2a_task_save(app->store, t, before, &e);
	if (rc == GH_E_CONFLICT) {
		memset(&again, 0, sizeof(again));
		if (gh_store_a2a_task_get(app->store, t->owner, t->agent_id, t->id, &again, &e) ==
		    GH_OK) {
			gh_a2a_task_clear(t);
			*t = again;
			return;
		}
	}
	if (rc != GH_OK)
		gh_debug("a2a: task %s not brought up to date: %s", t->id, e.msg);
}

/* Loads the caller's task of this agent and brings it up to date. Answers
 * the error itself and returns -1 when it cannot. */
static int load_task(struct rpc *c, const char *id, struct gh_a2a_task *t)
{
	struct gh_err e;
	enum gh_code rc = gh_store_a2a_task_get(c->r->app->store, c->r->who.key.owner,
						 c->agent->id, id, t, &e);

	if (rc == GH_E_NOTFOUND) {
		rpc_error(c, GH_A2A_TASK_NOT_FOUND, "task %s not found", id);
		return -1;
	}
	if (rc != GH_OK) {
		rpc_fail(c, &e);
		return -1;
	}
	reconcile(c->r->app, t);
	return 0;
}

static void get_task(struct rpc *c, const cJSON *params)
{
	struct gh_a2a_task t;
	struct gh_err e;
	const char *id = gh_json_str(params, "id");
	int64_t hl;

	memset(&t, 0, sizeof(t));
	if (!id || !*id || strlen(id) >= GH_ID_MAX) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "params.id: expected a task id");
		return;
	}
	if (gh_a2a_history_len(params, "params", &hl, &e)) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "%s", e.msg);
		return;
	}
	if (load_task(c, id, &t) != 0)
		return;
	rpc_result(c, gh_a2a_task_out(&t, c->d, hl));
	gh_a2a_task_clear(&t);
}

/* Cancels a task waiting on input: its run is cancelled (approvals stay as
 * they are) and the task canceled. */
static enum gh_code cancel_waiting(struct gh_app *app, struct gh_a2a_task *t, struct gh_err *e)
{
	enum gh_cancel_outcome how;
	enum gh_code rc = gh_run_cancel(app, t->owner, t->run_id, &how, e);

	if (rc == GH_OK && how != GH_CANCEL_DONE)
		rc = gh_err_set(e, GH_E_CONFLICT, "run %s is running", t->run_id);
	if (rc != GH_OK)
		return rc;
	gh_a2a_task_set(t, GH_A2A_CANCELED, NULL);
	return gh_store_a2a_task_save(app->store, t, GH_A2A_INPUT_REQUIRED, e);
}

/* A working task: its run is asked to stop, then (bounded) the request
 * running it settles the task. 0 with t reloaded; -1 answered. */
static int stop_working(struct rpc *c, const char *id, struct gh_a2a_task *t)
{
	struct gh_app *app = c->r->app;
	enum gh_cancel_outcome how;
	struct gh_run_view v;
	struct gh_err e;

	/* (a continuation that has not claimed its run yet finds it cancelled) */
	if (gh_run_cancel(app, t->owner, t->run_id, &how, &e) != GH_OK) {
		rpc_error(c, GH_A2A_NOT_CANCELABLE, "task %s is being continued in the background "
			  "(an approval was decided); it cannot be canceled until it waits again",
			  t->id);
		return -1;
	}
	/* the request running it stops at its next step or upstream wait */
	gh_run_wait(app, t->owner, t->run_id, GH_UNTIL_IDLE, CANCEL_WAIT_MS, NULL, NULL, &v, &e);
	gh_run_view_clear(&v);
	gh_a2a_task_clear(t);
	if (gh_store_a2a_task_get(app->store, c->r->who.key.owner, c->agent->id, id, t, &e) !=
	    GH_OK) {
		rpc_fail(c, &e);
		return -1;
	}
	return 0;
}

static void cancel_task(struct rpc *c, const cJSON *params)
{
	struct gh_a2a_task t;
	struct gh_err e;
	const char *id = gh_json_str(params, "id");

	memset(&t, 0, sizeof(t));
	if (!id || !*id || strlen(id) >= GH_ID_MAX) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "params.id: expected a task id");
		return;
	}
	if (load_task(c, id, &t) != 0)
		return;
	if (gh_a2a_terminal(t.state)) {
		rpc_error(c, GH_A2A_NOT_CANCELABLE, "task %s is %s and cannot be canceled", t.id,
			  t.state);
		goto out;
	}
	if (!strcmp(t.state, GH_A2A_WORKING) && stop_working(c, id, &t) != 0)
		goto out;
	if (!strcmp(t.state, GH_A2A_INPUT_REQUIRED) && cancel_waiting(c->r->app, &t, &e) != GH_OK) {
		rpc_error(c, GH_A2A_NOT_CANCELABLE, "task %s cannot be canceled now: %s", t.id,
			  e.msg);
		goto out;
	}
	if (strcmp(t.state, GH_A2A_CANCELED)) {
		/* it finished before the request running it noticed */
		rpc_error(c, GH_A2A_NOT_CANCELABLE, "task %s is %s and cannot be canceled", t.id,
			  !strcmp(t.state, GH_A2A_WORKING) ? "still working" : t.state);
		goto out;
	}
	rpc_result(c, gh_a2a_task_out(&t, c->d, -1));
out:
	gh_a2a_task_clear(&t);
}

/* Checks that every result answers a call task t's run handed out and
 * still waits for. */
static int check_result_ids(struct rpc *c, const struct gh_a2a_task *t, const cJSON *results,
			    struct gh_err *e)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, results) {
		const char *id = gh_json_str(r, "toolCallId");
		char run_id[GH_ID_MAX];
		int answered;
		enum gh_code rc = gh_run_find_call(c->r->app, c->r->who.key.owner, id, run_id,
						   &answered, e);

		if (rc == GH_E_NOTFOUND || (rc == GH_OK && strcmp(run_id, t->run_id))) {
			gh_err_set(e, GH_E_BADREQ, "toolCallId \"%s\" is not a client tool call of "
				   "task %s", id, t->id);
			return GH_RPC_INVALID_PARAMS;
		}
		if (rc != GH_OK)
			return GH_RPC_INTERNAL;
		if (answered) {
			gh_err_set(e, GH_E_BADREQ, "toolCallId \"%s\" was already answered", id);
			return GH_RPC_INVALID_PARAMS;
		}
	}
	return 0;
}

/* The answer to a send: the task (blocking) or the final stream events. */
static void answer_task(struct rpc *c, struct a2a_run *s, const struct gh_a2a_task *t,
			int64_t history_len)
{
	if (s->stream) {
		gh_http_stream_hold(&s->hs); /* the final events leave with the end */
		flush_pending(s, 1);
		send_status(s, t, 1);
		gh_http_stream_end(&s->hs, 0);
		return;
	}
	if (c->d == GH_A2A_V10) {
		cJSON *o = cJSON_CreateObject();

		if (o)
			cJSON_AddItemToObject(o, "task", gh_a2a_task_out(t, c->d, history_len));
		rpc_result(c, o);
	} else {
		rpc_result(c, gh_a2a_task_out(t, c->d, history_len));
	}
}

/* A JSON-RPC error as the answer to a send: a plain response, or the last
 * event of a stream that already began. */
static void answer_error(struct rpc *c, struct a2a_run *s, int code, const char *msg)
{
	if (s && s->stream && c->r->responded) {
		cJSON *o = error_envelope(c, code, msg);
		char *data = o ? gh_json_dump(o) : NULL;

		gh_http_stream_hold(&s->hs);
		flush_pending(s, 1);
		if (data && gh_http_stream_send(&s->hs, NULL, data, strlen(data)) == 0)
			gh_http_stream_end(&s->hs, 0);
		free(data);
		cJSON_Delete(o);
		return;
	}
	rpc_error(c, code, "%s", msg);
}

/* Starts the SSE answer (the stream slot is already taken): the head and
 * the task as it starts. A client already gone cancels the run at its first
 * event. */
static void stream_begin(struct a2a_run *s, const struct gh_a2a_task *t)
{
	if (gh_http_stream_begin(&s->hs) == 0)
		send_task(s, t);
}

/* Puts t back as prev was before this message (a continuation that did
 * not happen) and saves it. Takes prev's JSON. */
static void restore(struct gh_app *app, struct gh_a2a_task *t, struct gh_a2a_task *prev)
{
	struct gh_err e;

	gh_strlcpy(t->state, prev->state, sizeof(t->state));
	cJSON_Delete(t->status_message);
	cJSON_Delete(t->history);
	cJSON_Delete(t->artifacts);
	t->status_message = prev->status_message;
	t->history = prev->history;
	t->artifacts = prev->artifacts;
	prev->status_message = prev->history = prev->artifacts = NULL;
	t->updated_at = gh_now_ms();
	if (gh_store_a2a_task_save(app->store, t, GH_A2A_WORKING, &e) != GH_OK)
		gh_warn("a2a: task %s not restored: %s", t->id, e.msg);
}

/* The continuation did not happen and the run waits as before: the task
 * goes back to what it was, and the client hears why. */
static void not_continued(struct rpc *c, struct a2a_run *s, struct gh_a2a_task *t,
			  struct gh_a2a_task *prev, enum gh_code rc, const struct gh_err *e,
			  int64_t history_len)
{
	struct gh_err se;

	restore(c->r->app, t, prev);
	if (gh_run_hold_cancelled(&s->hold) && cancel_waiting(c->r->app, t, &se) == GH_OK)
		answer_task(c, s, t, history_len);
	else if (rc == GH_E_CANCELLED)
		answer_error(c, s, GH_RPC_INTERNAL, "the run was cancelled before it went on");
	else
		answer_error(c, s, gh_a2a_rpc_code(rc), e->msg);
}

/* Runs rq for task t (already saved as working) and settles the task from
 * its run. prev is the task before this message when the message continues
 * it (restored when the run went back to waiting), else NULL. */
static void run_task(struct rpc *c, struct a2a_run *s, struct gh_a2a_task *t,
		     struct gh_a2a_task *prev, struct gh_run_request *rq, int64_t history_len)
{
	struct gh_app *app = c->r->app;
	struct gh_run_result res;
	struct gh_run_view v;
	struct gh_err e, se;
	enum gh_code rc, grc;
	int cancel;

	gh_err_clear(&e);
	gh_err_clear(&se);
	rq->stream = s->stream;
	rc = gh_run_generate(app, rq, &s->sink, &res, &e);
	if (rc == GH_OK)
		gh_run_result_clear(&res);
	cancel = gh_run_hold_cancelled(&s->hold);
	grc = gh_run_view_get(app, t->owner, t->run_id, &v, &se);
	if (rc != GH_OK && prev && grc == GH_OK &&
	    (v.status == GH_RUN_WAITING || v.status == GH_RUN_SUSPENDED)) {
		gh_run_view_clear(&v);
		not_continued(c, s, t, prev, rc, &e, history_len);
		return;
	}
	if (grc == GH_OK)
		gh_a2a_task_sync(t, &v);
	else if (cancel || rc == GH_E_CANCELLED)
		gh_a2a_task_set(t, GH_A2A_CANCELED, NULL);
	else if (rc != GH_OK)
		gh_a2a_task_set(t, GH_A2A_FAILED, gh_a2a_error_message(t, gh_code_name(rc), e.msg));
	else
		gh_a2a_task_set(t, GH_A2A_FAILED, gh_a2a_error_message(t, gh_code_name(grc),
								       se.msg));
	gh_run_view_clear(&v);
	/* a run nobody asked to stop was cancelled because its client left;
	 * whether the engine saw that at a tick (GH_E_CANCELLED) or at a failed
	 * write to the stream (another code) is timing */
	if (!cancel && !strcmp(t->state, GH_A2A_CANCELED))
		gh_a2a_task_set(t, GH_A2A_CANCELED, gh_a2a_gone_message(t));
	if (gh_store_a2a_task_save(app->store, t, GH_A2A_WORKING, &se) != GH_OK)
		gh_warn("%s a2a: task %s not saved: %s", c->r->id, t->id, se.msg);
	answer_task(c, s, t, history_len);
}

/* Why a message on task t cannot continue it, or 0. */
static int continue_refused(struct rpc *c, const struct gh_a2a_incoming *in,
			    const struct gh_a2a_task *t)
{
	struct gh_err e;
	char why[512];
	int code;

	if (in->context_id && strcmp(in->context_id, t->context_id)) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "params.message.contextId: task %s belongs to "
			  "context %s", t->id, t->context_id);
		return -1;
	}
	if (gh_a2a_terminal(t->state)) {
		rpc_error(c, GH_A2A_UNSUPPORTED, "task %s is %s and takes no more messages; send "
			  "the message without taskId (same contextId) to start a new task", t->id,
			  t->state);
		return -1;
	}
	if (!strcmp(t->state, GH_A2A_WORKING)) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "task %s is still working on an earlier "
			  "message", t->id);
		return -1;
	}
	if (!in->results) {
		gh_a2a_describe_wait(t, why, sizeof(why));
		rpc_error(c, GH_RPC_INVALID_PARAMS, "%s", why);
		return -1;
	}
	if ((code = check_result_ids(c, t, in->results, &e))) {
		rpc_error(c, code, "%s", e.msg);
		return -1;
	}
	return 0;
}

/* A message on an existing task: the client's tool results for the run it
 * waits on. */
static void continue_task(struct rpc *c, struct gh_a2a_incoming *in, int stream,
			  int64_t history_len)
{
	struct gh_app *app = c->r->app;
	struct gh_a2a_task t, prev;
	struct gh_run_request rq;
	struct a2a_run s;
	struct gh_err e;
	cJSON *msgs = NULL;
	int started = 0;

	memset(&t, 0, sizeof(t));
	memset(&prev, 0, sizeof(prev));
	memset(&s, 0, sizeof(s));
	if (load_task(c, in->task_id, &t) != 0 || continue_refused(c, in, &t) != 0)
		goto out;
	msgs = gh_a2a_results_messages(in->results);
	if (!msgs || gh_a2a_task_copy(&t, &prev) != 0) {
		rpc_error(c, GH_RPC_INTERNAL, "out of memory");
		goto out;
	}
	if (stream && gh_http_stream_start(c->r, &s.hs) != 0)
		goto out;
	cJSON_AddStringToObject(in->stored, "contextId", t.context_id);
	cJSON_AddStringToObject(in->stored, "taskId", t.id);
	cJSON_AddItemToArray(t.history, in->stored);
	in->stored = NULL;
	gh_a2a_task_set(&t, GH_A2A_WORKING, NULL);
	started = 1;
	if (run_init(&s, c, &t, stream, &e) != GH_OK ||
	    gh_store_a2a_task_save(app->store, &t, GH_A2A_INPUT_REQUIRED, &e) != GH_OK) {
		if (e.code == GH_E_CONFLICT)
			rpc_error(c, GH_RPC_INVALID_PARAMS, "task %s is busy with another message",
				  t.id);
		else
			rpc_fail(c, &e);
		goto out;
	}
	memset(&rq, 0, sizeof(rq));
	rq.who = &c->r->who;
	rq.agent = c->agent;
	rq.messages = msgs;
	rq.surface = "a2a";
	if (stream)
		stream_begin(&s, &t);
	run_task(c, &s, &t, &prev, &rq, history_len);
out:
	if (started)
		run_done(&s);
	cJSON_Delete(msgs);
	gh_a2a_task_clear(&prev);
	gh_a2a_task_clear(&t);
}

/* The context a new task runs in: the one the client names, or a new one;
 * and its resource. */
static void new_context(struct rpc *c, const struct gh_a2a_incoming *in, struct gh_a2a_task *t,
			const char **resource)
{
	struct gh_err e;
	cJSON *th = NULL;

	*resource = in->resource_id;
	if (!in->context_id) {
		gh_id_new("ctx_", t->context_id, sizeof(t->context_id));
		if (!*resource)
			*resource = "a2a";
		return;
	}
	/* contexts are threads, and thread ids are per owner: another owner's
	 * context with this id is neither in the way nor seen */
	gh_strlcpy(t->context_id, in->context_id, sizeof(t->context_id));
	/* an existing thread keeps its resource */
	if (!*resource && gh_store_thread_get(c->r->app->store, c->r->who.key.owner,
					      in->context_id, &th, &e) != GH_OK)
		*resource = "a2a";
	cJSON_Delete(th);
}

/* Refusals a new task's message earns before any task exists. -1 answered. */
static int new_refused(struct rpc *c, const struct gh_a2a_incoming *in)
{
	if (in->results) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "tool results go to the task that asked for "
			  "them: set params.message.taskId");
		return -1;
	}
	if (!in->text) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "params.message.parts: a new task needs at "
			  "least one text part");
		return -1;
	}
	return 0;
}

/* Client tools the policy refuses are the request's fault, not the task's. */
static int tools_refused(struct rpc *c, const struct gh_a2a_incoming *in)
{
	struct gh_toolset ts;
	struct gh_err e;

	if (!in->client_defs)
		return 0;
	if (gh_toolset_build(gh_app_cfg(c->r->app), gh_app_mcp(c->r->app), c->agent, c->r->who.policy,
			     in->client_defs, &ts, &e) != GH_OK) {
		rpc_error(c, GH_RPC_INVALID_PARAMS, "%s", e.msg);
		return -1;
	}
	gh_toolset_free(&ts);
	return 0;
}

/* A new task's first state. */
static void new_task_init(struct rpc *c, struct gh_a2a_incoming *in, struct gh_a2a_task *t)
{
	const struct gh_principal *who = &c->r->who;

	gh_id_new("task_", t->id, sizeof(t->id));
	gh_id_new("run_", t->run_id, sizeof(t->run_id));
	gh_strlcpy(t->agent_id, c->agent->id, sizeof(t->agent_id));
	gh_strlcpy(t->owner, who->key.owner, sizeof(t->owner));
	gh_strlcpy(t->key_id, who->key.id, sizeof(t->key_id));
	gh_strlcpy(t->state, GH_A2A_WORKING, sizeof(t->state));
	t->history = cJSON_CreateArray();
	t->artifacts = cJSON_CreateArray();
	t->created_at = t->updated_at = gh_now_ms();
	cJSON_AddStringToObject(in->stored, "contextId", t->context_id);
	cJSON_AddStringToObject(in->stored, "taskId", t->id);
	cJSON_AddItemToArray(t->history, in->stored);
	in->stored = NULL;
}

/* A message without taskId: a new task and a new run in its context. */
static void new_task(struct rpc *c, struct gh_a2a_incoming *in, int stream, int64_t history_len)
{
	struct gh_a2a_task t;
	struct gh_run_request rq;
	struct a2a_run s;
	struct gh_err e;
	cJSON *msgs = NULL, *um;
	const char *resource;
	int started = 0;

	memset(&t, 0, sizeof(t));
	memset(&s, 0, sizeof(s));
	if (new_refused(c, in) != 0)
		return;
	new_context(c, in, &t, &resource);
	if (tools_refused(c, in) != 0)
		return;
	msgs = cJSON_CreateArray();
	um = cJSON_CreateObject();
	if (!msgs || !um) {
		cJSON_Delete(um);
		rpc_error(c, GH_RPC_INTERNAL, "out of memory");
		goto out;
	}
	cJSON_AddStringToObject(um, "role", "user");
	cJSON_AddStringToObject(um, "content", in->text);
	cJSON_AddItemToArray(msgs, um);
	if (stream && gh_http_stream_start(c->r, &s.hs) != 0)
		goto out;
	new_task_init(c, in, &t);
	started = 1;
	if (run_init(&s, c, &t, stream, &e) != GH_OK ||
	    gh_store_a2a_task_insert(c->r->app->store, &t, &e) != GH_OK) {
		rpc_fail(c, &e);
		goto out;
	}
	memset(&rq, 0, sizeof(rq));
	rq.who = &c->r->who;
	rq.agent = c->agent;
	rq.thread_id = t.context_id;
	rq.resource_id = resource;
	rq.run_id = t.run_id;
	rq.messages = msgs;
	rq.client_defs = in->client_defs;
	rq.surface = "a2a";
	if (stream)
		stream_begin(&s, &t);
	run_task(c, &s, &t, NULL, &rq, history_len);
out:
	if (started)
		run_done(&s);
	cJSON_Delete(msgs);
	gh_a2a_task_clear(&t);
}

static void send_message(struct rpc *c, const cJSON *params, int stream)
{
	struct gh_a2a_incoming in;
	struct gh_err e;
	int64_t hl;
	int code;

	if ((code = gh_a2a_history_len(cJSON_GetObjectItemCaseSensitive(params, "configuration"),
				       "params.configuration", &hl, &e))) {
		rpc_error(c, code, "%s", e.msg);
		return;
	}
	if ((code = gh_a2a_parse_message(params, &in, &e))) {
		rpc_error(c, code, "%s", e.msg);
		gh_a2a_incoming_free(&in);
		return;
	}
	if (in.task_id)
		continue_task(c, &in, stream, hl);
	else
		new_task(c, &in, stream, hl);
	gh_a2a_incoming_free(&in);
}

static void send_blocking(struct rpc *c, const cJSON *params)
{
	send_message(c, params, 0);
}

static void send_streaming(struct rpc *c, const cJSON *params)
{
	send_message(c, params, 1);
}

/* ------------------------------------------------------------ dispatch */

static const struct {
	const char *name;
	enum gh_a2a_dialect d;
	void (*fn)(struct rpc *c, const cJSON *params);
	int unsupported;               /* an A2A method gatehouse does not offer: its code */
} methods[] = {
	{"SendMessage", GH_A2A_V10, send_blocking, 0},
	{"SendStreamingMessage", GH_A2A_V10, send_streaming, 0},
	{"GetTask", GH_A2A_V10, get_task, 0},
	{"CancelTask", GH_A2A_V10, cancel_task, 0},
	{"message/send", GH_A2A_V03, send_blocking, 0},
	{"message/stream", GH_A2A_V03, send_streaming, 0},
	{"tasks/get", GH_A2A_V03, get_task, 0},
	{"tasks/cancel", GH_A2A_V03, cancel_task, 0},
	{"ListTasks", GH_A2A_V10, NULL, GH_A2A_UNSUPPORTED},
	{"SubscribeToTask", GH_A2A_V10, NULL, GH_A2A_UNSUPPORTED},
	{"tasks/resubscribe", GH_A2A_V03, NULL, GH_A2A_UNSUPPORTED},
	{"CreateTaskPushNotificationConfig", GH_A2A_V10, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"GetTaskPushNotificationConfig", GH_A2A_V10, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"ListTaskPushNotificationConfigs", GH_A2A_V10, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"DeleteTaskPushNotificationConfig", GH_A2A_V10, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/set", GH_A2A_V03, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/get", GH_A2A_V03, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/list", GH_A2A_V03, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/delete", GH_A2A_V03, NULL, GH_A2A_PUSH_NOT_SUPPORTED},
	{"GetExtendedAgentCard", GH_A2A_V10, NULL, GH_A2A_EXTENDED_CARD},
	{"agent/getAuthenticatedExtendedCard", GH_A2A_V03, NULL, GH_A2A_EXTENDED_CARD},
};

/* The client activated the client-tools extension: say it is active. */
static void extension_header(struct rpc *c)
{
	const char *names[] = {"A2A-Extensions", "X-A2A-Extensions"};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(names); i++) {
		const char *v = gh_http_header(c->r, names[i]);

		if (v && strstr(v, GH_A2A_EXT_TOOLS_URI)) {
			snprintf(c->headers, sizeof(c->headers), "%s: %s\r\n", names[i],
				 GH_A2A_EXT_TOOLS_URI);
			c->r->extra_headers = c->headers;
			return;
		}
	}
}

/* Checks the JSON-RPC envelope and finds the method: its index, or -1
 * after answering. */
static int find_method(struct rpc *c, const cJSON *body)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(body, "id");
	const cJSON *jv = cJSON_GetObjectItemCaseSensitive(body, "jsonrpc");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(body, "method");
	const char *ver = gh_http_header(c->r, "A2A-Version");
	size_t i;

	if (id && (cJSON_IsString(id) || cJSON_IsNumber(id)))
		c->id = cJSON_Duplicate(id, 0);
	if (!cJSON_IsString(jv) || strcmp(jv->valuestring, "2.0")) {
		rpc_error(c, GH_RPC_INVALID_REQUEST, "jsonrpc: expected \"2.0\"");
		return -1;
	}
	if (!id || !(cJSON_IsString(id) || cJSON_IsNumber(id) || cJSON_IsNull(id))) {
		rpc_error(c, GH_RPC_INVALID_REQUEST, "id: expected a string or a number (A2A "
			  "methods always answer, so notifications are not accepted)");
		return -1;
	}
	if (!cJSON_IsString(method)) {
		rpc_error(c, GH_RPC_INVALID_REQUEST, "method: expected a string");
		return -1;
	}
	for (i = 0; i < GH_ARRAY_LEN(methods); i++)
		if (!strcmp(methods[i].name, method->valuestring))
			break;
	if (i < GH_ARRAY_LEN(methods))
		c->d = methods[i].d;
	if (ver && *ver && gh_a2a_version_supported(ver) != 0) {
		rpc_error(c, GH_A2A_VERSION, "A2A-Version %.32s is not supported; gatehouse speaks "
			  "1.0 and 0.3", ver);
		return -1;
	}
	if (i == GH_ARRAY_LEN(methods)) {
		rpc_error(c, GH_RPC_METHOD_NOT_FOUND, "method %.64s not found", method->valuestring);
		return -1;
	}
	if (!methods[i].fn) {
		rpc_error(c, methods[i].unsupported, "%s is not supported by gatehouse",
			  methods[i].name);
		return -1;
	}
	return (int)i;
}

static void rpc_post(struct gh_req *r)
{
	struct rpc c;
	cJSON *body = NULL;
	const cJSON *params;
	struct gh_err e;
	int m;

	memset(&c, 0, sizeof(c));
	c.r = r;
	c.d = GH_A2A_V10;
	if (gh_run_agent(r->app, &r->who, r->params[0], &c.agent, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	extension_header(&c);
	if (!r->body || r->body_len == 0) {
		rpc_error(&c, GH_RPC_PARSE_ERROR, "request body is empty; expected a JSON-RPC "
			  "request");
		goto out;
	}
	if (gh_json_parse(r->body, r->body_len, "request body", &body, &e) != GH_OK) {
		rpc_error(&c, GH_RPC_PARSE_ERROR, "%s", e.msg);
		goto out;
	}
	if (cJSON_IsArray(body) || !cJSON_IsObject(body)) {
		rpc_error(&c, GH_RPC_INVALID_REQUEST, cJSON_IsArray(body)
				  ? "batch requests are not supported"
				  : "expected a JSON-RPC request object");
		goto out;
	}
	if ((m = find_method(&c, body)) < 0)
		goto out;
	params = cJSON_GetObjectItemCaseSensitive(body, "params");
	if (!cJSON_IsObject(params)) {
		rpc_error(&c, GH_RPC_INVALID_PARAMS, "params: expected an object");
		goto out;
	}
	methods[m].fn(&c, params);
out:
	if (r->extra_headers == c.headers)
		r->extra_headers = NULL;
	cJSON_Delete(c.id);
	cJSON_Delete(body);
}

const struct gh_route gh_routes_a2a[] = {
	{"POST", "/a2a/:id", GH_AUTH_KEY, rpc_post},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
