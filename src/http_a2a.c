/*
 * http_a2a.c - the A2A surface: agent cards and JSON-RPC, in both wire
 * dialects clients speak.
 *
 *   GET  /.well-known/agent-card.json                the default agent's card (public)
 *   GET  /a2a/:agentId/.well-known/agent-card.json   an agent's card (public)
 *   POST /a2a/:agentId                               JSON-RPC (API key)
 *
 * Methods: A2A 1.0 SendMessage, SendStreamingMessage, GetTask, CancelTask
 * (protobuf-JSON shapes: TASK_STATE_*, ROLE_*, parts told apart by their
 * member) and the 0.3 names message/send, message/stream, tasks/get,
 * tasks/cancel (kind:"task", "completed", parts with kind). The method name
 * picks the dialect of the answer; an A2A-Version header, when sent, must
 * name 0.3 or 1.0. The card follows A2A-Version: 1.x gets the 1.0 card,
 * 0.x or no header the 0.3 card (which also lists the 1.0 interfaces).
 *
 * One task per run. A message without taskId starts a task (and a run of
 * gh_run_generate); its contextId is the memory thread. A message with the
 * taskId of a task in input-required carries the client's tool results in a
 * DataPart {results:[{toolCallId, result, isError?}]} (metadata type
 * "tool-results") and continues the run. Client tool definitions ride in a
 * DataPart {tools:[OpenAI function tools]} (metadata type
 * "tool-definitions"). Tasks live in the store (store_a2a.h) and are
 * brought up to date from their run whenever they are read, so a run
 * resumed in the background after an approval shows in GetTask.
 *
 * Per request, on the CivetWeb worker thread. The only shared state is the
 * list of tasks being run by requests of this process (mutex), which
 * CancelTask uses to stop a working task and GetTask to tell a working task
 * from one a restart interrupted.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <civetweb.h>

#include "approvals.h"
#include "buf.h"
#include "http.h"
#include "http_native.h"
#include "json.h"
#include "log.h"
#include "run.h"
#include "store_a2a.h"
#include "tools.h"
#include "util.h"

/* The extension under which client tools ride in DataParts. */
#define EXT_TOOLS_URI "urn:gatehouse:a2a:client-tools:v1"
#define EXT_TOOLS_DESC                                                                          \
	"Client tools. Declare tools in a DataPart {\"tools\": [OpenAI function tools]} with "  \
	"metadata {\"type\": \"tool-definitions\"}. Calls the model makes to them come back "  \
	"with the task in input-required as a DataPart {\"toolCalls\": [{toolCallId, toolName, " \
	"args}]} (metadata type \"tool-calls\"); answer on the same task with a DataPart "     \
	"{\"results\": [{toolCallId, result, isError?}]} (metadata type \"tool-results\"). A "  \
	"call that needs a person's approval shows as a DataPart {\"approval\": {id, "         \
	"toolName, args, approver}} (metadata type \"approval-required\")."

#define MAX_PARTS 256
#define MAX_RESULTS 128
#define CANCEL_WAIT_MS 10000

/* JSON-RPC and A2A error codes. */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL -32603
#define A2A_TASK_NOT_FOUND -32001
#define A2A_NOT_CANCELABLE -32002
#define A2A_PUSH_NOT_SUPPORTED -32003
#define A2A_UNSUPPORTED -32004
#define A2A_CONTENT_TYPE -32005
#define A2A_EXTENDED_CARD -32007
#define A2A_VERSION -32009

enum dialect { V03, V10 };

/* ------------------------------------------------- tasks run right now */

/* A task a request of this process is running. Lives on that request's
 * stack while linked. */
struct active {
	char id[GH_ID_MAX];
	_Atomic int cancel;                /* CancelTask asked to stop it */
	struct active *next;
};

static pthread_mutex_t active_mu = PTHREAD_MUTEX_INITIALIZER;
static struct active *active_head;

static void active_add(struct active *a, const char *id)
{
	gh_strlcpy(a->id, id, sizeof(a->id));
	atomic_store(&a->cancel, 0);
	pthread_mutex_lock(&active_mu);
	a->next = active_head;
	active_head = a;
	pthread_mutex_unlock(&active_mu);
}

static void active_remove(struct active *a)
{
	struct active **p;

	pthread_mutex_lock(&active_mu);
	for (p = &active_head; *p; p = &(*p)->next) {
		if (*p == a) {
			*p = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&active_mu);
}

/* 1 when a request of this process runs task id; with cancel, asks it to
 * stop. */
static int active_find(const char *id, int cancel)
{
	struct active *a;
	int found = 0;

	pthread_mutex_lock(&active_mu);
	for (a = active_head; a; a = a->next) {
		if (!strcmp(a->id, id)) {
			found = 1;
			if (cancel)
				atomic_store(&a->cancel, 1);
		}
	}
	pthread_mutex_unlock(&active_mu);
	return found;
}

/* ------------------------------------------------------------ JSON-RPC */

struct rpc {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *id;                         /* the request's id (owned), NULL = null */
	enum dialect d;
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
	if (code == RPC_INTERNAL)
		gh_warn("%s a2a: %s", c->r->id, msg);
	gh_http_json(c->r, 200, o);
	cJSON_Delete(o);
}

/* The JSON-RPC code for a gatehouse error. */
static int rpc_code_of(enum gh_code code)
{
	switch (code) {
	case GH_E_BADREQ:
	case GH_E_CONFLICT:
	case GH_E_FORBIDDEN:
	case GH_E_TOOBIG:
		return RPC_INVALID_PARAMS;
	case GH_E_NOTFOUND:
		return A2A_TASK_NOT_FOUND;
	default:
		return RPC_INTERNAL;
	}
}

static void rpc_fail(struct rpc *c, const struct gh_err *e)
{
	rpc_error(c, rpc_code_of(e->code), "%s", e->msg);
}

/* -------------------------------------------------------- wire shapes */

static const char *state_wire(const char *state, enum dialect d)
{
	static const struct {
		const char *v03, *v10;
	} map[] = {
		{GH_A2A_WORKING, "TASK_STATE_WORKING"},
		{GH_A2A_INPUT_REQUIRED, "TASK_STATE_INPUT_REQUIRED"},
		{GH_A2A_COMPLETED, "TASK_STATE_COMPLETED"},
		{GH_A2A_FAILED, "TASK_STATE_FAILED"},
		{GH_A2A_CANCELED, "TASK_STATE_CANCELED"},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(map); i++)
		if (!strcmp(state, map[i].v03))
			return d == V10 ? map[i].v10 : map[i].v03;
	return d == V10 ? "TASK_STATE_UNSPECIFIED" : "unknown";
}

static int is_terminal(const char *state)
{
	return !strcmp(state, GH_A2A_COMPLETED) || !strcmp(state, GH_A2A_FAILED) ||
	       !strcmp(state, GH_A2A_CANCELED);
}

/* A stored part (1.0 shape) as the dialect spells it. */
static cJSON *part_out(const cJSON *p, enum dialect d)
{
	cJSON *o;
	const cJSON *it;

	if (d == V10)
		return cJSON_Duplicate(p, 1);
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "kind", cJSON_GetObjectItemCaseSensitive(p, "text") ? "text"
										      : "data");
	cJSON_ArrayForEach(it, p)
		cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
	return o;
}

static cJSON *parts_out(const cJSON *parts, enum dialect d)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *p;

	cJSON_ArrayForEach(p, parts)
		cJSON_AddItemToArray(arr, part_out(p, d));
	return arr;
}

/* A stored message (1.0 shape) as the dialect spells it. */
static cJSON *message_out(const cJSON *m, enum dialect d)
{
	cJSON *o;
	const cJSON *it;

	if (d == V10)
		return cJSON_Duplicate(m, 1);
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "kind", "message");
	cJSON_ArrayForEach(it, m) {
		if (!strcmp(it->string, "role"))
			cJSON_AddStringToObject(o, "role", cJSON_IsString(it) &&
						!strcmp(it->valuestring, "ROLE_USER") ? "user" : "agent");
		else if (!strcmp(it->string, "parts"))
			cJSON_AddItemToObject(o, "parts", parts_out(it, d));
		else
			cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
	}
	return o;
}

static cJSON *artifact_out(const cJSON *a, enum dialect d)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *it;

	if (!o)
		return NULL;
	cJSON_ArrayForEach(it, a) {
		if (!strcmp(it->string, "parts"))
			cJSON_AddItemToObject(o, "parts", parts_out(it, d));
		else
			cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
	}
	return o;
}

static cJSON *status_out(const struct gh_a2a_task *t, enum dialect d)
{
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "state", state_wire(t->state, d));
	if (t->status_message)
		cJSON_AddItemToObject(o, "message", message_out(t->status_message, d));
	gh_iso8601(t->updated_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "timestamp", ts);
	return o;
}

/* The task as the dialect spells it; history_len < 0 = all of it, else
 * the newest history_len messages. */
static cJSON *task_out(const struct gh_a2a_task *t, enum dialect d, int64_t history_len)
{
	cJSON *o = cJSON_CreateObject(), *h, *arts, *md;
	const cJSON *it;
	int n = cJSON_GetArraySize(t->history), i;

	if (!o)
		return NULL;
	if (d == V03)
		cJSON_AddStringToObject(o, "kind", "task");
	cJSON_AddStringToObject(o, "id", t->id);
	cJSON_AddStringToObject(o, "contextId", t->context_id);
	cJSON_AddItemToObject(o, "status", status_out(t, d));
	arts = cJSON_AddArrayToObject(o, "artifacts");
	cJSON_ArrayForEach(it, t->artifacts)
		cJSON_AddItemToArray(arts, artifact_out(it, d));
	h = cJSON_AddArrayToObject(o, "history");
	i = history_len < 0 || history_len >= n ? 0 : n - (int)history_len;
	for (; i < n; i++)
		cJSON_AddItemToArray(h, message_out(cJSON_GetArrayItem(t->history, i), d));
	md = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(md, "runId", t->run_id);
	return o;
}

/* ------------------------------------------------------ agent messages */

static cJSON *text_part(const char *text)
{
	cJSON *p = cJSON_CreateObject();

	if (p)
		cJSON_AddStringToObject(p, "text", text);
	return p;
}

/* A DataPart {data} with metadata {type}; takes data. */
static cJSON *data_part(cJSON *data, const char *type)
{
	cJSON *p = cJSON_CreateObject(), *md;

	if (!p) {
		cJSON_Delete(data);
		return NULL;
	}
	cJSON_AddItemToObject(p, "data", data ? data : cJSON_CreateObject());
	md = cJSON_AddObjectToObject(p, "metadata");
	cJSON_AddStringToObject(md, "type", type);
	return p;
}

/* An agent message of task t holding parts (taken). */
static cJSON *agent_message(const struct gh_a2a_task *t, cJSON *parts)
{
	cJSON *m = cJSON_CreateObject();
	char id[GH_ID_MAX];

	if (!m) {
		cJSON_Delete(parts);
		return NULL;
	}
	gh_id_new("msg_", id, sizeof(id));
	cJSON_AddStringToObject(m, "messageId", id);
	cJSON_AddStringToObject(m, "role", "ROLE_AGENT");
	cJSON_AddItemToObject(m, "parts", parts ? parts : cJSON_CreateArray());
	cJSON_AddStringToObject(m, "contextId", t->context_id);
	cJSON_AddStringToObject(m, "taskId", t->id);
	return m;
}

/* Sets t's state and status message (taken; NULL = none); a message also
 * goes into the history. */
static void task_set(struct gh_a2a_task *t, const char *state, cJSON *status_message)
{
	gh_strlcpy(t->state, state, sizeof(t->state));
	cJSON_Delete(t->status_message);
	t->status_message = status_message;
	if (status_message)
		cJSON_AddItemToArray(t->history, cJSON_Duplicate(status_message, 1));
	t->updated_at = gh_now_ms();
}

/* The text of the run's last step when it was the model's (the words that
 * came with its tool calls). Caller frees; NULL when none. */
static char *last_step_text(const cJSON *state)
{
	const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(state, "context");
	const cJSON *last = cJSON_GetArrayItem(ctx, cJSON_GetArraySize(ctx) - 1);
	const char *role = gh_json_str(last, "role");

	if (!role || strcmp(role, "assistant"))
		return NULL;
	return gh_run_content_text(cJSON_GetObjectItemCaseSensitive(last, "content"));
}

/* The failure of t as its status message: a text part and a DataPart
 * {error:{code, message}}. */
static cJSON *error_message(const struct gh_a2a_task *t, const char *code, const char *msg)
{
	cJSON *parts = cJSON_CreateArray(), *err = cJSON_CreateObject(), *o;

	if (err) {
		o = cJSON_AddObjectToObject(err, "error");
		cJSON_AddStringToObject(o, "code", code);
		cJSON_AddStringToObject(o, "message", msg);
	}
	cJSON_AddItemToArray(parts, text_part(msg));
	cJSON_AddItemToArray(parts, data_part(err, "error"));
	return agent_message(t, parts);
}

/* The parts telling the client what the run waits for: the step's text,
 * a tool-calls DataPart for client calls, an approval-required DataPart
 * per call waiting on a person. */
static cJSON *waiting_parts(struct gh_app *app, const char *owner, const cJSON *state)
{
	cJSON *parts = cJSON_CreateArray(), *calls = gh_run_pending_calls(state);
	const cJSON *c;
	char *text = last_step_text(state);
	int has_text = 0;

	if (!parts || !calls) {
		cJSON_Delete(parts);
		cJSON_Delete(calls);
		free(text);
		return NULL;
	}
	if (text && *text) {
		cJSON_AddItemToArray(parts, text_part(text));
		has_text = 1;
	}
	free(text);
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(state, "calls")) {
		const char *st = gh_json_str(c, "state");
		cJSON *d, *ap;
		struct gh_approval a;
		struct gh_err e;
		char ts[GH_ISO8601_MAX];

		if (!st || strcmp(st, "pending_approval") || !(d = cJSON_CreateObject()))
			continue;
		ap = cJSON_AddObjectToObject(d, "approval");
		gh_json_add_str(ap, "id", gh_json_str(c, "approvalId"));
		gh_json_add_str(ap, "toolCallId", gh_json_str(c, "toolCallId"));
		gh_json_add_str(ap, "toolName", gh_json_str(c, "toolName"));
		cJSON_AddItemToObject(ap, "args", cJSON_Duplicate(
					      cJSON_GetObjectItemCaseSensitive(c, "args"), 1));
		if (gh_json_str(c, "approvalId") &&
		    gh_approval_get(app, owner, gh_json_str(c, "approvalId"), &a, &e) == GH_OK) {
			cJSON_AddStringToObject(ap, "approver", a.approver);
			cJSON_AddStringToObject(ap, "status", a.status);
			gh_approval_clear(&a);
		}
		if (gh_json_int(c, "expiresAt", 0) > 0) {
			gh_iso8601(gh_json_int(c, "expiresAt", 0), ts, sizeof(ts));
			cJSON_AddStringToObject(ap, "expiresAt", ts);
		}
		cJSON_AddItemToArray(parts, data_part(d, "approval-required"));
	}
	if (cJSON_GetArraySize(calls) > 0) {
		cJSON *d = cJSON_CreateObject();

		cJSON_AddItemToObject(d, "toolCalls", calls);
		/* after the text, before approvals: what the client itself can do */
		cJSON_InsertItemInArray(parts, has_text, data_part(d, "tool-calls"));
	} else {
		cJSON_Delete(calls);
	}
	return parts;
}

/* The artifact id for the text of step `step` of run_id. Streaming uses the
 * same ids, so the stored artifact is the one the stream built. */
static void artifact_id(const char *run_id, int64_t step, char *out, size_t cap)
{
	snprintf(out, cap, "%s-s%lld", run_id, (long long)step);
}

static int has_artifact(const struct gh_a2a_task *t, const char *id)
{
	const cJSON *a;

	cJSON_ArrayForEach(a, t->artifacts) {
		const char *aid = gh_json_str(a, "artifactId");

		if (aid && !strcmp(aid, id))
			return 1;
	}
	return 0;
}

/* Brings t to where its run is: completed (answer as artifact and agent
 * message), input-required (what it waits for), failed, canceled or
 * working. */
static void sync_from_run(struct gh_app *app, struct gh_a2a_task *t, const struct gh_run_row *run)
{
	if (!strcmp(run->status, "completed")) {
		const char *text = gh_json_str(run->output, "text");
		char aid[GH_ID_MAX + 32];
		cJSON *a, *parts;

		if (!text)
			text = "";
		artifact_id(t->run_id, gh_json_int(run->state, "step", 0), aid, sizeof(aid));
		if (!has_artifact(t, aid)) {
			a = cJSON_CreateObject();
			cJSON_AddStringToObject(a, "artifactId", aid);
			cJSON_AddStringToObject(a, "name", "response");
			parts = cJSON_AddArrayToObject(a, "parts");
			cJSON_AddItemToArray(parts, text_part(text));
			cJSON_AddItemToArray(t->artifacts, a);
		}
		parts = cJSON_CreateArray();
		cJSON_AddItemToArray(parts, text_part(text));
		task_set(t, GH_A2A_COMPLETED, NULL);
		cJSON_AddItemToArray(t->history, agent_message(t, parts));
	} else if (!strcmp(run->status, "waiting") || !strcmp(run->status, "suspended")) {
		task_set(t, GH_A2A_INPUT_REQUIRED,
			 agent_message(t, waiting_parts(app, t->owner, run->state)));
	} else if (!strcmp(run->status, "failed")) {
		task_set(t, GH_A2A_FAILED, error_message(t, "failed", run->error ? run->error
										 : "the run failed"));
	} else if (!strcmp(run->status, "cancelled")) {
		task_set(t, GH_A2A_CANCELED, NULL);
	} else {
		task_set(t, GH_A2A_WORKING, NULL);
	}
}

static const char *state_of_run(const char *status)
{
	if (!strcmp(status, "completed"))
		return GH_A2A_COMPLETED;
	if (!strcmp(status, "waiting") || !strcmp(status, "suspended"))
		return GH_A2A_INPUT_REQUIRED;
	if (!strcmp(status, "failed"))
		return GH_A2A_FAILED;
	if (!strcmp(status, "cancelled"))
		return GH_A2A_CANCELED;
	return GH_A2A_WORKING;
}

/* Brings a stored task that may be behind its run up to date (a run
 * resumed after an approval, a request a restart interrupted), and saves
 * it. Best effort: on a store error the task is shown as stored. */
static void reconcile(struct gh_app *app, struct gh_a2a_task *t)
{
	struct gh_run_row run;
	struct gh_err e;
	char before[16];
	enum gh_code rc;

	if (is_terminal(t->state) || active_find(t->id, 0))
		return;
	gh_strlcpy(before, t->state, sizeof(before));
	rc = gh_store_run_get(app->store, t->owner, t->run_id, &run, &e);
	if (rc == GH_E_NOTFOUND) {
		if (strcmp(t->state, GH_A2A_WORKING))
			return;
		/* a new run persists nothing until it ends: nobody runs it */
		task_set(t, GH_A2A_FAILED,
			 error_message(t, "interrupted", "gatehouse stopped before the answer was "
				       "ready; send the message again"));
	} else if (rc != GH_OK) {
		return;
	} else {
		if (run.updated_at <= t->updated_at && !strcmp(state_of_run(run.status), t->state)) {
			gh_run_row_clear(&run);
			return;
		}
		sync_from_run(app, t, &run);
		gh_run_row_clear(&run);
	}
	if (gh_store_a2a_task_save(app->store, t, before, &e) != GH_OK)
		gh_debug("a2a: task %s not brought up to date: %s", t->id, e.msg);
}

/* ------------------------------------------------------ incoming message */

struct incoming {
	cJSON *stored;              /* the message as stored (1.0 shape; owned) */
	char *text;                 /* its text for the model (owned), NULL when none */
	cJSON *client_defs;         /* from a tool-definitions DataPart (owned) or NULL */
	const cJSON *results;       /* array from a tool-results DataPart (borrowed) */
	const char *task_id;        /* borrowed from the request */
	const char *context_id;
	const char *resource_id;
};

static void incoming_free(struct incoming *in)
{
	cJSON_Delete(in->stored);
	free(in->text);
	cJSON_Delete(in->client_defs);
	memset(in, 0, sizeof(*in));
}

/* An optional id field: absent/null is fine; else a string of 1..128. */
static int opt_id(const cJSON *obj, const char *key, const char *where, const char **out,
		  struct gh_err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > GH_NAME_MAX) {
		gh_err_set(e, GH_E_BADREQ, "%s.%s: expected a string of 1 to %d characters", where,
			   key, GH_NAME_MAX);
		return RPC_INVALID_PARAMS;
	}
	*out = v->valuestring;
	return 0;
}

/* Checks a tool-results DataPart's data: {results:[{toolCallId, result,
 * isError?}]}. */
static int check_results(const cJSON *data, int i, const cJSON **out, struct gh_err *e)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(data, "results"), *r;
	int j = 0;

	if (!cJSON_IsArray(res) || cJSON_GetArraySize(res) == 0 ||
	    cJSON_GetArraySize(res) > MAX_RESULTS) {
		gh_err_set(e, GH_E_BADREQ, "message.parts[%d].data.results: expected an array of 1 "
			   "to %d {toolCallId, result, isError?}", i, MAX_RESULTS);
		return RPC_INVALID_PARAMS;
	}
	cJSON_ArrayForEach(r, res) {
		const cJSON *ie = cJSON_GetObjectItemCaseSensitive(r, "isError");
		const char *id = gh_json_str(r, "toolCallId");

		if (!cJSON_IsObject(r) || !id || !*id || strlen(id) >= GH_ID_MAX ||
		    (ie && !cJSON_IsBool(ie))) {
			gh_err_set(e, GH_E_BADREQ, "message.parts[%d].data.results[%d]: expected "
				   "{toolCallId: string, result: any JSON, isError?: boolean}", i, j);
			return RPC_INVALID_PARAMS;
		}
		j++;
	}
	*out = res;
	return 0;
}

/* Parses params.message (either dialect) into in. Returns 0, or the
 * JSON-RPC error code with e filled. */
static int parse_message(const cJSON *params, struct incoming *in, struct gh_err *e)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "message");
	const cJSON *parts, *p, *md;
	const char *role, *mid;
	cJSON *sparts;
	struct gh_buf text;
	int i = 0, rc, has_text = 0, too_big = 0;

	memset(in, 0, sizeof(*in));
	if (!cJSON_IsObject(m)) {
		gh_err_set(e, GH_E_BADREQ, "params.message: expected a message object");
		return RPC_INVALID_PARAMS;
	}
	role = gh_json_str(m, "role");
	if (!role || (strcmp(role, "user") && strcmp(role, "ROLE_USER"))) {
		gh_err_set(e, GH_E_BADREQ, "params.message.role: expected \"ROLE_USER\" (A2A 1.0) "
			   "or \"user\" (0.3)");
		return RPC_INVALID_PARAMS;
	}
	mid = gh_json_str(m, "messageId");
	if (!mid || !*mid || strlen(mid) > GH_NAME_MAX) {
		gh_err_set(e, GH_E_BADREQ, "params.message.messageId: expected a string of 1 to %d "
			   "characters", GH_NAME_MAX);
		return RPC_INVALID_PARAMS;
	}
	if ((rc = opt_id(m, "taskId", "params.message", &in->task_id, e)) ||
	    (rc = opt_id(m, "contextId", "params.message", &in->context_id, e)))
		return rc;
	md = cJSON_GetObjectItemCaseSensitive(m, "metadata");
	if ((rc = opt_id(md, "resourceId", "params.message.metadata", &in->resource_id, e)))
		return rc;
	if (!in->resource_id &&
	    (rc = opt_id(cJSON_GetObjectItemCaseSensitive(params, "metadata"), "resourceId",
			 "params.metadata", &in->resource_id, e)))
		return rc;
	parts = cJSON_GetObjectItemCaseSensitive(m, "parts");
	if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) == 0 ||
	    cJSON_GetArraySize(parts) > MAX_PARTS) {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts: expected an array of 1 to %d "
			   "parts", MAX_PARTS);
		return RPC_INVALID_PARAMS;
	}
	in->stored = cJSON_CreateObject();
	if (!in->stored) {
		gh_err_set(e, GH_E_NOMEM, "out of memory");
		return RPC_INTERNAL;
	}
	cJSON_AddStringToObject(in->stored, "messageId", mid);
	cJSON_AddStringToObject(in->stored, "role", "ROLE_USER");
	sparts = cJSON_AddArrayToObject(in->stored, "parts");
	if (cJSON_IsObject(md))
		cJSON_AddItemToObject(in->stored, "metadata", cJSON_Duplicate(md, 1));
	gh_buf_init(&text, 1 << 26);
	cJSON_ArrayForEach(p, parts) {
		const char *kind = gh_json_str(p, "kind");
		const cJSON *pmd = cJSON_GetObjectItemCaseSensitive(p, "metadata");
		const cJSON *data = cJSON_GetObjectItemCaseSensitive(p, "data");
		const char *ptype = gh_json_str(pmd, "type");
		cJSON *sp;

		if (!cJSON_IsObject(p) || (pmd && !cJSON_IsObject(pmd) && !cJSON_IsNull(pmd))) {
			gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: expected a part object "
				   "with optional metadata object", i);
			rc = RPC_INVALID_PARAMS;
			goto out;
		}
		if (cJSON_GetObjectItemCaseSensitive(p, "url") ||
		    cJSON_GetObjectItemCaseSensitive(p, "raw") ||
		    cJSON_GetObjectItemCaseSensitive(p, "file") || (kind && !strcmp(kind, "file"))) {
			gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: file parts are not "
				   "supported; send text or data parts", i);
			rc = A2A_CONTENT_TYPE;
			goto out;
		}
		sp = cJSON_CreateObject();
		cJSON_AddItemToArray(sparts, sp);
		if (cJSON_GetObjectItemCaseSensitive(p, "text") && (!kind || !strcmp(kind, "text"))) {
			const char *t = gh_json_str(p, "text");

			if (!t) {
				gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d].text: expected "
					   "a string", i);
				rc = RPC_INVALID_PARAMS;
				goto out;
			}
			cJSON_AddStringToObject(sp, "text", t);
			if (has_text)
				too_big |= gh_buf_puts(&text, "\n") != GH_BUF_OK;
			too_big |= gh_buf_puts(&text, t) != GH_BUF_OK;
			has_text = 1;
		} else if (data && (!kind || !strcmp(kind, "data"))) {
			cJSON_AddItemToObject(sp, "data", cJSON_Duplicate(data, 1));
			if (ptype && !strcmp(ptype, "tool-definitions")) {
				const cJSON *tools = cJSON_GetObjectItemCaseSensitive(data, "tools");
				char where[64];

				if (in->client_defs) {
					gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: only "
						   "one tool-definitions part per message", i);
					rc = RPC_INVALID_PARAMS;
					goto out;
				}
				if (!cJSON_IsArray(tools)) {
					gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d].data."
						   "tools: expected an array of OpenAI function tools",
						   i);
					rc = RPC_INVALID_PARAMS;
					goto out;
				}
				snprintf(where, sizeof(where), "message.parts[%d].data.tools", i);
				if (gh_tools_client_defs(NULL, tools, where, &in->client_defs, e) !=
				    GH_OK) {
					rc = RPC_INVALID_PARAMS;
					goto out;
				}
			} else if ((ptype && !strcmp(ptype, "tool-results")) ||
				   (!ptype && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(
							  data, "results")))) {
				if (in->results) {
					gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: only "
						   "one tool-results part per message", i);
					rc = RPC_INVALID_PARAMS;
					goto out;
				}
				if ((rc = check_results(data, i, &in->results, e)))
					goto out;
			} else {
				/* other structured input reaches the model as JSON */
				char *js = gh_json_dump(data);

				if (has_text)
					too_big |= gh_buf_puts(&text, "\n") != GH_BUF_OK;
				too_big |= gh_buf_puts(&text, js ? js : "null") != GH_BUF_OK;
				free(js);
				has_text = 1;
			}
		} else {
			gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: expected a text part "
				   "({\"text\"}) or a data part ({\"data\"})", i);
			rc = RPC_INVALID_PARAMS;
			goto out;
		}
		if (cJSON_IsObject(pmd))
			cJSON_AddItemToObject(sp, "metadata", cJSON_Duplicate(pmd, 1));
		i++;
	}
	if (too_big) {
		gh_err_set(e, GH_E_TOOBIG, "params.message: the text is too large");
		rc = RPC_INVALID_PARAMS;
		goto out;
	}
	if (has_text) {
		in->text = gh_buf_detach(&text);
		if (!in->text) {
			gh_err_set(e, GH_E_NOMEM, "out of memory");
			rc = RPC_INTERNAL;
			goto out;
		}
	}
	rc = 0;
out:
	gh_buf_free(&text);
	return rc;
}

/* historyLength of params (GetTask) or params.configuration (send): -1 when
 * absent. */
static int parse_history_len(const cJSON *obj, const char *where, int64_t *out, struct gh_err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "historyLength");

	*out = -1;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!gh_json_is_int(v) || v->valuedouble < 0 || v->valuedouble > 1e9) {
		gh_err_set(e, GH_E_BADREQ, "%s.historyLength: expected an integer >= 0", where);
		return RPC_INVALID_PARAMS;
	}
	*out = (int64_t)v->valuedouble;
	return 0;
}

/* --------------------------------------------------------- the run sink */

/* What a request running a task hands the engine: the cancel flag on every
 * tick, and for streams the SSE events (text deltas as artifact chunks). */
struct a2a_run {
	struct rpc *c;
	struct gh_a2a_task *t;
	struct active act;
	struct gh_run_sink sink;
	int stream;
	int gone;                     /* the stream's client went away */
	int64_t last_write_ns;
	char art_id[GH_ID_MAX + 32];  /* artifact of the current step */
	int art_chunks;               /* chunks of it sent */
	char *pending;                /* the newest text delta, held back so the
				       * last one can carry lastChunk */
};

/* Sends one SSE event {jsonrpc, id, result}; takes result. */
static int sse_result(struct a2a_run *s, cJSON *result)
{
	cJSON *o;
	char *data;
	int rc;

	if (s->gone || !result) {
		cJSON_Delete(result);
		return -1;
	}
	o = envelope(s->c);
	if (!o) {
		cJSON_Delete(result);
		return -1;
	}
	cJSON_AddItemToObject(o, "result", result);
	data = gh_json_dump(o);
	cJSON_Delete(o);
	if (!data)
		return -1;
	rc = gh_http_sse_send(s->c->r, NULL, data, strlen(data));
	free(data);
	s->last_write_ns = gh_mono_ns();
	if (rc != 0)
		s->gone = 1;
	return rc;
}

/* The 1.0 StreamResponse member or the 0.3 kind around an event. */
static cJSON *stream_wrap(struct a2a_run *s, const char *v10_member, const char *v03_kind,
			  cJSON *ev)
{
	cJSON *o;

	if (!ev)
		return NULL;
	if (s->c->d == V03) {
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
	cJSON *task = task_out(t, s->c->d, -1);

	if (s->c->d == V10) {
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
	cJSON_AddItemToObject(ev, "status", status_out(t, s->c->d));
	if (s->c->d == V03)
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
	p = text_part(text);
	if (p)
		cJSON_AddItemToArray(parts, part_out(p, s->c->d));
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

static int sink_event(void *ud, const char *run_id, const char *type, const cJSON *payload)
{
	struct a2a_run *s = ud;

	if (atomic_load(&s->act.cancel))
		return 1;
	if (!s->stream)
		return 0;
	if (s->gone)
		return 1;
	if (!strcmp(type, "step-start")) {
		flush_pending(s, 1);
		artifact_id(run_id, gh_json_int(payload, "step", 0), s->art_id, sizeof(s->art_id));
		s->art_chunks = 0;
	} else if (!strcmp(type, "text-delta")) {
		const char *t = gh_json_str(payload, "text");

		if (t && *t) {
			flush_pending(s, 0);
			s->pending = strdup(t);
		}
	} else if (!strcmp(type, "step-finish")) {
		flush_pending(s, 1);
	}
	return s->gone;
}

static int sink_tick(void *ud)
{
	struct a2a_run *s = ud;
	int64_t now;

	if (atomic_load(&s->act.cancel))
		return 1;
	if (!s->stream)
		return 0;
	if (s->gone)
		return 1;
	if (gh_http_client_gone(s->c->r)) {
		s->gone = 1;
		gh_info("%s: a2a client went away mid-stream; cancelling the run", s->c->r->id);
		return 1;
	}
	now = gh_mono_ns();
	if (now - s->last_write_ns >= s->c->r->app->cfg->server.heartbeat_ms * 1000000) {
		if (gh_http_sse_comment(s->c->r, "keep-alive") != 0)
			s->gone = 1;
		s->last_write_ns = now;
	}
	return s->gone;
}

static void run_init(struct a2a_run *s, struct rpc *c, struct gh_a2a_task *t, int stream)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->t = t;
	s->stream = stream;
	s->sink.event = sink_event;
	s->sink.tick = sink_tick;
	s->sink.ud = s;
	s->last_write_ns = gh_mono_ns();
	active_add(&s->act, t->id);
}

static void run_done(struct a2a_run *s)
{
	free(s->pending);
	s->pending = NULL;
	active_remove(&s->act);
}

/* ------------------------------------------------------------- methods */

/* Loads the caller's task of this agent and brings it up to date. Answers
 * the error itself and returns -1 when it cannot. */
static int load_task(struct rpc *c, const char *id, struct gh_a2a_task *t)
{
	struct gh_err e;
	enum gh_code rc = gh_store_a2a_task_get(c->r->app->store, c->r->who.key.owner,
						 c->agent->id, id, t, &e);

	if (rc == GH_E_NOTFOUND) {
		rpc_error(c, A2A_TASK_NOT_FOUND, "task %s not found", id);
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
		rpc_error(c, RPC_INVALID_PARAMS, "params.id: expected a task id");
		return;
	}
	if (parse_history_len(params, "params", &hl, &e)) {
		rpc_error(c, RPC_INVALID_PARAMS, "%s", e.msg);
		return;
	}
	if (load_task(c, id, &t) != 0)
		return;
	rpc_result(c, task_out(&t, c->d, hl));
	gh_a2a_task_clear(&t);
}

/* Cancels a task waiting on input: its run is marked cancelled (approvals
 * stay as they are) and the task canceled. */
static enum gh_code cancel_waiting(struct gh_app *app, struct gh_a2a_task *t, struct gh_err *e)
{
	enum gh_code rc;

	rc = gh_store_run_transition(app->store, t->run_id, "waiting", "cancelled", e);
	if (rc == GH_E_CONFLICT || rc == GH_E_NOTFOUND)
		rc = gh_store_run_transition(app->store, t->run_id, "suspended", "cancelled", e);
	if (rc != GH_OK)
		return rc;
	task_set(t, GH_A2A_CANCELED, NULL);
	return gh_store_a2a_task_save(app->store, t, GH_A2A_INPUT_REQUIRED, e);
}

static void cancel_task(struct rpc *c, const cJSON *params)
{
	struct gh_app *app = c->r->app;
	struct gh_a2a_task t;
	struct gh_err e;
	const char *id = gh_json_str(params, "id");
	int64_t deadline;

	memset(&t, 0, sizeof(t));
	if (!id || !*id || strlen(id) >= GH_ID_MAX) {
		rpc_error(c, RPC_INVALID_PARAMS, "params.id: expected a task id");
		return;
	}
	if (load_task(c, id, &t) != 0)
		return;
	if (is_terminal(t.state)) {
		rpc_error(c, A2A_NOT_CANCELABLE, "task %s is %s and cannot be canceled", t.id,
			  t.state);
		goto out;
	}
	if (!strcmp(t.state, GH_A2A_WORKING)) {
		if (!active_find(t.id, 1)) {
			rpc_error(c, A2A_NOT_CANCELABLE, "task %s is being continued in the "
				  "background (an approval was decided); it cannot be canceled "
				  "until it waits again", t.id);
			goto out;
		}
		/* the request running it stops at its next step or upstream wait */
		deadline = gh_mono_ns() + (int64_t)CANCEL_WAIT_MS * 1000000;
		while (!strcmp(t.state, GH_A2A_WORKING) && gh_mono_ns() < deadline) {
			struct timespec ts = {0, 20 * 1000000};

			nanosleep(&ts, NULL);
			gh_a2a_task_clear(&t);
			if (gh_store_a2a_task_get(app->store, c->r->who.key.owner, c->agent->id, id,
						  &t, &e) != GH_OK) {
				rpc_fail(c, &e);
				goto out;
			}
		}
	}
	if (!strcmp(t.state, GH_A2A_INPUT_REQUIRED)) {
		if (cancel_waiting(app, &t, &e) != GH_OK) {
			rpc_error(c, A2A_NOT_CANCELABLE, "task %s cannot be canceled now: %s", t.id,
				  e.msg);
			goto out;
		}
	}
	if (strcmp(t.state, GH_A2A_CANCELED)) {
		/* it finished before the request running it noticed */
		rpc_error(c, A2A_NOT_CANCELABLE, "task %s is %s and cannot be canceled", t.id,
			  !strcmp(t.state, GH_A2A_WORKING) ? "still working" : t.state);
		goto out;
	}
	rpc_result(c, task_out(&t, c->d, -1));
out:
	gh_a2a_task_clear(&t);
}

/* The CoreMessages carrying the client's tool results to the engine. */
static cJSON *results_messages(const cJSON *results)
{
	cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject(), *content;
	const cJSON *r;

	if (!msgs || !m) {
		cJSON_Delete(msgs);
		cJSON_Delete(m);
		return NULL;
	}
	cJSON_AddStringToObject(m, "role", "tool");
	content = cJSON_AddArrayToObject(m, "content");
	cJSON_ArrayForEach(r, results) {
		cJSON *p = cJSON_CreateObject();
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "result");

		cJSON_AddStringToObject(p, "type", "tool-result");
		cJSON_AddStringToObject(p, "toolCallId", gh_json_str(r, "toolCallId"));
		cJSON_AddItemToObject(p, "result", v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
		if (gh_json_bool(r, "isError", 0))
			cJSON_AddBoolToObject(p, "isError", 1);
		cJSON_AddItemToArray(content, p);
	}
	cJSON_AddItemToArray(msgs, m);
	return msgs;
}

/* What a waiting task waits for, for the message that did not bring it. */
static void describe_wait(const struct gh_a2a_task *t, char *out, size_t cap)
{
	const cJSON *p;
	int calls = 0, approvals = 0;

	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(t->status_message, "parts")) {
		const char *ty = gh_json_str(cJSON_GetObjectItemCaseSensitive(p, "metadata"), "type");

		if (ty && !strcmp(ty, "tool-calls"))
			calls++;
		else if (ty && !strcmp(ty, "approval-required"))
			approvals++;
	}
	if (calls)
		snprintf(out, cap, "task %s waits for client tool results: send a DataPart "
			 "{\"results\": [{\"toolCallId\", \"result\"}]} with metadata {\"type\": "
			 "\"tool-results\"}", t->id);
	else if (approvals)
		snprintf(out, cap, "task %s waits for a person to decide %d approval%s; poll "
			 "GetTask until it moves on", t->id, approvals, approvals > 1 ? "s" : "");
	else
		snprintf(out, cap, "task %s waits for input", t->id);
}

/* Checks that every result answers a call task t's run handed out and
 * still waits for. */
static int check_result_ids(struct rpc *c, const struct gh_a2a_task *t, const cJSON *results,
			    struct gh_err *e)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, results) {
		const char *id = gh_json_str(r, "toolCallId");
		char run_id[48], status[16];
		enum gh_code rc = gh_store_tool_call_find(c->r->app->store, c->r->who.key.owner, id,
							  run_id, status, e);

		if (rc == GH_E_NOTFOUND || (rc == GH_OK && strcmp(run_id, t->run_id))) {
			gh_err_set(e, GH_E_BADREQ, "toolCallId \"%s\" is not a client tool call of "
				   "task %s", id, t->id);
			return RPC_INVALID_PARAMS;
		}
		if (rc != GH_OK)
			return RPC_INTERNAL;
		if (strcmp(status, "pending")) {
			gh_err_set(e, GH_E_BADREQ, "toolCallId \"%s\" was already answered", id);
			return RPC_INVALID_PARAMS;
		}
	}
	return 0;
}

/* The answer to a send: the task (blocking) or the final stream events. */
static void answer_task(struct rpc *c, struct a2a_run *s, const struct gh_a2a_task *t,
			int64_t history_len)
{
	if (s->stream) {
		flush_pending(s, 1);
		send_status(s, t, 1);
		if (!s->gone)
			gh_http_sse_end(c->r);
		return;
	}
	if (c->d == V10) {
		cJSON *o = cJSON_CreateObject();

		if (o)
			cJSON_AddItemToObject(o, "task", task_out(t, c->d, history_len));
		rpc_result(c, o);
	} else {
		rpc_result(c, task_out(t, c->d, history_len));
	}
}

/* A JSON-RPC error as the answer to a send: a plain response, or the last
 * event of a stream that already began. */
static void answer_error(struct rpc *c, struct a2a_run *s, int code, const char *msg)
{
	if (s && s->stream && c->r->responded) {
		cJSON *o = error_envelope(c, code, msg);
		char *data = o ? gh_json_dump(o) : NULL;

		flush_pending(s, 1);
		if (data && !s->gone && gh_http_sse_send(c->r, NULL, data, strlen(data)) == 0)
			gh_http_sse_end(c->r);
		free(data);
		cJSON_Delete(o);
		return;
	}
	rpc_error(c, code, "%s", msg);
}

/* Starts the SSE answer (the stream slot is already taken): the head and
 * the task as it starts. A client already gone cancels the run at its first
 * event. */
static void stream_begin(struct rpc *c, struct a2a_run *s, const struct gh_a2a_task *t)
{
	if (gh_http_sse_begin(c->r) != 0) {
		s->gone = 1;
		return;
	}
	s->last_write_ns = gh_mono_ns();
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

/* Runs rq for task t (already saved as working) and settles the task from
 * its run. prev is the task before this message when the message continues
 * it (restored when the run went back to waiting), else NULL. */
static void run_task(struct rpc *c, struct a2a_run *s, struct gh_a2a_task *t,
		     struct gh_a2a_task *prev, struct gh_run_request *rq, int64_t history_len)
{
	struct gh_app *app = c->r->app;
	struct gh_run_result res;
	struct gh_run_row run;
	struct gh_err e, se;
	enum gh_code rc, grc;
	int cancel;

	gh_err_clear(&e);
	gh_err_clear(&se);
	rq->stream = s->stream;
	rc = gh_run_generate(app, rq, &s->sink, &res, &e);
	if (rc == GH_OK)
		gh_run_result_clear(&res);
	cancel = atomic_load(&s->act.cancel);
	grc = gh_store_run_get(app->store, t->owner, t->run_id, &run, &se);
	if (rc != GH_OK && prev && grc == GH_OK &&
	    (!strcmp(run.status, "waiting") || !strcmp(run.status, "suspended"))) {
		/* the continuation did not happen: the run waits as before */
		gh_run_row_clear(&run);
		restore(app, t, prev);
		if (cancel && cancel_waiting(app, t, &se) == GH_OK)
			answer_task(c, s, t, history_len);
		else if (rc == GH_E_CANCELLED)
			answer_error(c, s, RPC_INTERNAL, "the run was cancelled before it went on");
		else
			answer_error(c, s, rpc_code_of(rc), e.msg);
		return;
	}
	if (grc == GH_OK) {
		sync_from_run(app, t, &run);
		gh_run_row_clear(&run);
	} else if (cancel || rc == GH_E_CANCELLED) {
		task_set(t, GH_A2A_CANCELED, NULL);
	} else if (rc != GH_OK) {
		task_set(t, GH_A2A_FAILED, error_message(t, gh_code_name(rc), e.msg));
	} else {
		task_set(t, GH_A2A_FAILED, error_message(t, gh_code_name(grc), se.msg));
	}
	if (rc == GH_E_CANCELLED && !cancel && !strcmp(t->state, GH_A2A_CANCELED))
		task_set(t, GH_A2A_CANCELED, error_message(t, "cancelled", "the client went away "
							  "before the answer was ready"));
	if (gh_store_a2a_task_save(app->store, t, GH_A2A_WORKING, &se) != GH_OK)
		gh_warn("%s a2a: task %s not saved: %s", c->r->id, t->id, se.msg);
	answer_task(c, s, t, history_len);
}

/* A copy of t's JSON and state (for restore). */
static int task_copy(const struct gh_a2a_task *t, struct gh_a2a_task *out)
{
	*out = *t;
	out->status_message = t->status_message ? cJSON_Duplicate(t->status_message, 1) : NULL;
	out->history = cJSON_Duplicate(t->history, 1);
	out->artifacts = cJSON_Duplicate(t->artifacts, 1);
	if (!out->history || !out->artifacts || (t->status_message && !out->status_message)) {
		gh_a2a_task_clear(out);
		return -1;
	}
	return 0;
}

/* A message on an existing task: the client's tool results for the run it
 * waits on. */
static void continue_task(struct rpc *c, struct incoming *in, int stream, int64_t history_len)
{
	struct gh_app *app = c->r->app;
	struct gh_a2a_task t, prev;
	struct gh_run_request rq;
	struct a2a_run s;
	struct gh_err e;
	cJSON *msgs = NULL;
	char why[512];
	int code, started = 0;

	memset(&t, 0, sizeof(t));
	memset(&prev, 0, sizeof(prev));
	if (load_task(c, in->task_id, &t) != 0)
		return;
	if (in->context_id && strcmp(in->context_id, t.context_id)) {
		rpc_error(c, RPC_INVALID_PARAMS, "params.message.contextId: task %s belongs to "
			  "context %s", t.id, t.context_id);
		goto out;
	}
	if (is_terminal(t.state)) {
		rpc_error(c, A2A_UNSUPPORTED, "task %s is %s and takes no more messages; send the "
			  "message without taskId (same contextId) to start a new task", t.id,
			  t.state);
		goto out;
	}
	if (!strcmp(t.state, GH_A2A_WORKING)) {
		rpc_error(c, RPC_INVALID_PARAMS, "task %s is still working on an earlier message",
			  t.id);
		goto out;
	}
	if (!in->results) {
		describe_wait(&t, why, sizeof(why));
		rpc_error(c, RPC_INVALID_PARAMS, "%s", why);
		goto out;
	}
	if ((code = check_result_ids(c, &t, in->results, &e))) {
		rpc_error(c, code, "%s", e.msg);
		goto out;
	}
	msgs = results_messages(in->results);
	if (!msgs || task_copy(&t, &prev) != 0) {
		rpc_error(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	if (stream && gh_http_stream_acquire(c->r) != 0)
		goto out;
	cJSON_AddStringToObject(in->stored, "contextId", t.context_id);
	cJSON_AddStringToObject(in->stored, "taskId", t.id);
	cJSON_AddItemToArray(t.history, in->stored);
	in->stored = NULL;
	task_set(&t, GH_A2A_WORKING, NULL);
	/* listed as running before it shows as working, so a GetTask in
	 * between does not take it for a task a restart interrupted */
	run_init(&s, c, &t, stream);
	started = 1;
	if (gh_store_a2a_task_save(app->store, &t, GH_A2A_INPUT_REQUIRED, &e) != GH_OK) {
		if (e.code == GH_E_CONFLICT)
			rpc_error(c, RPC_INVALID_PARAMS, "task %s is busy with another message",
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
		stream_begin(c, &s, &t);
	run_task(c, &s, &t, &prev, &rq, history_len);
out:
	if (started)
		run_done(&s);
	cJSON_Delete(msgs);
	gh_a2a_task_clear(&prev);
	gh_a2a_task_clear(&t);
}

/* A message without taskId: a new task and a new run in its context. */
static void new_task(struct rpc *c, struct incoming *in, int stream, int64_t history_len)
{
	struct gh_app *app = c->r->app;
	const struct gh_principal *who = &c->r->who;
	struct gh_a2a_task t;
	struct gh_run_request rq;
	struct gh_toolset ts;
	struct a2a_run s;
	struct gh_err e;
	cJSON *msgs = NULL, *um, *th = NULL;
	const char *resource = in->resource_id;
	int started = 0;

	memset(&t, 0, sizeof(t));
	if (in->results) {
		rpc_error(c, RPC_INVALID_PARAMS, "tool results go to the task that asked for them: "
			  "set params.message.taskId");
		return;
	}
	if (!in->text) {
		rpc_error(c, RPC_INVALID_PARAMS, "params.message.parts: a new task needs at least "
			  "one text part");
		return;
	}
	if (in->context_id) {
		/* contexts are threads, and thread ids are per owner: another
		 * owner's context with this id is neither in the way nor seen */
		gh_strlcpy(t.context_id, in->context_id, sizeof(t.context_id));
		/* an existing thread keeps its resource */
		if (!resource && gh_store_thread_get(app->store, who->key.owner, in->context_id,
						     &th, &e) != GH_OK)
			resource = "a2a";
		cJSON_Delete(th);
	} else {
		gh_id_new("ctx_", t.context_id, sizeof(t.context_id));
		if (!resource)
			resource = "a2a";
	}
	/* refusals of client tools are the request's fault, not the task's */
	if (in->client_defs) {
		if (gh_toolset_build(app->cfg, app->mcp, c->agent, who->policy, in->client_defs, &ts,
				     &e) != GH_OK) {
			rpc_error(c, RPC_INVALID_PARAMS, "%s", e.msg);
			return;
		}
		gh_toolset_free(&ts);
	}
	msgs = cJSON_CreateArray();
	um = cJSON_CreateObject();
	if (!msgs || !um) {
		cJSON_Delete(um);
		rpc_error(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	cJSON_AddStringToObject(um, "role", "user");
	cJSON_AddStringToObject(um, "content", in->text);
	cJSON_AddItemToArray(msgs, um);
	if (stream && gh_http_stream_acquire(c->r) != 0)
		goto out;
	gh_id_new("task_", t.id, sizeof(t.id));
	gh_id_new("run_", t.run_id, sizeof(t.run_id));
	gh_strlcpy(t.agent_id, c->agent->id, sizeof(t.agent_id));
	gh_strlcpy(t.owner, who->key.owner, sizeof(t.owner));
	gh_strlcpy(t.key_id, who->key.id, sizeof(t.key_id));
	gh_strlcpy(t.state, GH_A2A_WORKING, sizeof(t.state));
	t.history = cJSON_CreateArray();
	t.artifacts = cJSON_CreateArray();
	t.created_at = t.updated_at = gh_now_ms();
	cJSON_AddStringToObject(in->stored, "contextId", t.context_id);
	cJSON_AddStringToObject(in->stored, "taskId", t.id);
	cJSON_AddItemToArray(t.history, in->stored);
	in->stored = NULL;
	run_init(&s, c, &t, stream);
	started = 1;
	if (gh_store_a2a_task_insert(app->store, &t, &e) != GH_OK) {
		rpc_fail(c, &e);
		goto out;
	}
	memset(&rq, 0, sizeof(rq));
	rq.who = who;
	rq.agent = c->agent;
	rq.thread_id = t.context_id;
	rq.resource_id = resource;
	rq.run_id = t.run_id;
	rq.messages = msgs;
	rq.client_defs = in->client_defs;
	rq.surface = "a2a";
	if (stream)
		stream_begin(c, &s, &t);
	run_task(c, &s, &t, NULL, &rq, history_len);
out:
	if (started)
		run_done(&s);
	cJSON_Delete(msgs);
	gh_a2a_task_clear(&t);
}

static void send_message(struct rpc *c, const cJSON *params, int stream)
{
	struct incoming in;
	struct gh_err e;
	int64_t hl;
	int code;

	if ((code = parse_history_len(cJSON_GetObjectItemCaseSensitive(params, "configuration"),
				      "params.configuration", &hl, &e))) {
		rpc_error(c, code, "%s", e.msg);
		return;
	}
	if ((code = parse_message(params, &in, &e))) {
		rpc_error(c, code, "%s", e.msg);
		incoming_free(&in);
		return;
	}
	if (in.task_id)
		continue_task(c, &in, stream, hl);
	else
		new_task(c, &in, stream, hl);
	incoming_free(&in);
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
	enum dialect d;
	void (*fn)(struct rpc *c, const cJSON *params);
	int unsupported;               /* an A2A method gatehouse does not offer: its code */
} methods[] = {
	{"SendMessage", V10, send_blocking, 0},
	{"SendStreamingMessage", V10, send_streaming, 0},
	{"GetTask", V10, get_task, 0},
	{"CancelTask", V10, cancel_task, 0},
	{"message/send", V03, send_blocking, 0},
	{"message/stream", V03, send_streaming, 0},
	{"tasks/get", V03, get_task, 0},
	{"tasks/cancel", V03, cancel_task, 0},
	{"ListTasks", V10, NULL, A2A_UNSUPPORTED},
	{"SubscribeToTask", V10, NULL, A2A_UNSUPPORTED},
	{"tasks/resubscribe", V03, NULL, A2A_UNSUPPORTED},
	{"CreateTaskPushNotificationConfig", V10, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"GetTaskPushNotificationConfig", V10, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"ListTaskPushNotificationConfigs", V10, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"DeleteTaskPushNotificationConfig", V10, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/set", V03, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/get", V03, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/list", V03, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"tasks/pushNotificationConfig/delete", V03, NULL, A2A_PUSH_NOT_SUPPORTED},
	{"GetExtendedAgentCard", V10, NULL, A2A_EXTENDED_CARD},
	{"agent/getAuthenticatedExtendedCard", V03, NULL, A2A_EXTENDED_CARD},
};

/* 0 for "0.3" and "1.0" (patch ignored), -1 otherwise. */
static int version_supported(const char *v)
{
	int64_t major, minor;
	char buf[16];
	char *dot, *dot2;

	if (strlen(v) >= sizeof(buf))
		return -1;
	gh_strlcpy(buf, v, sizeof(buf));
	dot = strchr(buf, '.');
	if (!dot)
		return -1;
	*dot = '\0';
	dot2 = strchr(dot + 1, '.');
	if (dot2)
		*dot2 = '\0';
	if (gh_parse_i64(buf, 0, 1000, &major) || gh_parse_i64(dot + 1, 0, 1000, &minor))
		return -1;
	return (major == 0 && minor == 3) || (major == 1 && minor == 0) ? 0 : -1;
}

/* The client activated the client-tools extension: say it is active. */
static void extension_header(struct rpc *c)
{
	const char *names[] = {"A2A-Extensions", "X-A2A-Extensions"};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(names); i++) {
		const char *v = gh_http_header(c->r, names[i]);

		if (v && strstr(v, EXT_TOOLS_URI)) {
			snprintf(c->headers, sizeof(c->headers), "%s: %s\r\n", names[i],
				 EXT_TOOLS_URI);
			c->r->extra_headers = c->headers;
			return;
		}
	}
}

static void rpc_post(struct gh_req *r)
{
	struct rpc c;
	cJSON *body = NULL;
	const cJSON *method, *params, *id, *jv;
	const char *ver = gh_http_header(r, "A2A-Version");
	struct gh_err e;
	size_t i;

	memset(&c, 0, sizeof(c));
	c.r = r;
	c.d = V10;
	c.agent = gh_native_agent(r, r->params[0]);
	if (!c.agent)
		return;
	extension_header(&c);
	if (!r->body || r->body_len == 0) {
		rpc_error(&c, RPC_PARSE_ERROR, "request body is empty; expected a JSON-RPC request");
		return;
	}
	if (gh_json_parse(r->body, r->body_len, "request body", &body, &e) != GH_OK) {
		rpc_error(&c, RPC_PARSE_ERROR, "%s", e.msg);
		return;
	}
	if (cJSON_IsArray(body)) {
		rpc_error(&c, RPC_INVALID_REQUEST, "batch requests are not supported");
		goto out;
	}
	if (!cJSON_IsObject(body)) {
		rpc_error(&c, RPC_INVALID_REQUEST, "expected a JSON-RPC request object");
		goto out;
	}
	id = cJSON_GetObjectItemCaseSensitive(body, "id");
	if (id && (cJSON_IsString(id) || cJSON_IsNumber(id)))
		c.id = cJSON_Duplicate(id, 0);
	jv = cJSON_GetObjectItemCaseSensitive(body, "jsonrpc");
	if (!cJSON_IsString(jv) || strcmp(jv->valuestring, "2.0")) {
		rpc_error(&c, RPC_INVALID_REQUEST, "jsonrpc: expected \"2.0\"");
		goto out;
	}
	if (!id || !(cJSON_IsString(id) || cJSON_IsNumber(id) || cJSON_IsNull(id))) {
		rpc_error(&c, RPC_INVALID_REQUEST, "id: expected a string or a number (A2A methods "
			  "always answer, so notifications are not accepted)");
		goto out;
	}
	method = cJSON_GetObjectItemCaseSensitive(body, "method");
	if (!cJSON_IsString(method)) {
		rpc_error(&c, RPC_INVALID_REQUEST, "method: expected a string");
		goto out;
	}
	for (i = 0; i < GH_ARRAY_LEN(methods); i++)
		if (!strcmp(methods[i].name, method->valuestring))
			break;
	if (i < GH_ARRAY_LEN(methods))
		c.d = methods[i].d;
	if (ver && *ver && version_supported(ver) != 0) {
		rpc_error(&c, A2A_VERSION, "A2A-Version %.32s is not supported; gatehouse speaks "
			  "1.0 and 0.3", ver);
		goto out;
	}
	if (i == GH_ARRAY_LEN(methods)) {
		rpc_error(&c, RPC_METHOD_NOT_FOUND, "method %.64s not found", method->valuestring);
		goto out;
	}
	if (!methods[i].fn) {
		rpc_error(&c, methods[i].unsupported, "%s is not supported by gatehouse",
			  methods[i].name);
		goto out;
	}
	params = cJSON_GetObjectItemCaseSensitive(body, "params");
	if (!cJSON_IsObject(params)) {
		rpc_error(&c, RPC_INVALID_PARAMS, "params: expected an object");
		goto out;
	}
	methods[i].fn(&c, params);
out:
	if (r->extra_headers == c.headers)
		r->extra_headers = NULL;
	cJSON_Delete(c.id);
	cJSON_Delete(body);
}

/* ---------------------------------------------------------------- cards */

void gh_a2a_base_url(const struct gh_app *app, int port, char *out, size_t cap)
{
	const char *pub = app->cfg->server.public_url;
	const char *listen = app->listen ? app->listen : app->cfg->server.listen;
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	char host[256];
	size_t n = colon ? (size_t)(colon - listen) : 0;

	if (pub && *pub) {
		gh_strlcpy(out, pub, cap);
		n = strlen(out);
		while (n > 0 && out[n - 1] == '/')
			out[--n] = '\0';
		return;
	}
	/* the Host header is the client's to say: a card built from it would
	 * send other clients wherever the asker liked */
	if (n >= sizeof(host))
		n = sizeof(host) - 1;
	if (n)
		memcpy(host, listen, n);
	host[n] = '\0';
	if (!n || !strcmp(host, "0.0.0.0"))
		gh_strlcpy(host, "127.0.0.1", sizeof(host));
	else if (!strcmp(host, "[::]"))
		gh_strlcpy(host, "[::1]", sizeof(host));
	snprintf(out, cap, "http://%s:%d", host, port);
}

/* Where clients reach gatehouse: the port is the one this request came in
 * on (a listening port: port 0 in the config means one picked at start). */
static void base_url(struct gh_req *r, char *out, size_t cap)
{
	gh_a2a_base_url(r->app, r->ri->server_port, out, cap);
}

static cJSON *iface(const char *url, const char *version)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "url", url);
	cJSON_AddStringToObject(o, "protocolBinding", "JSONRPC");
	cJSON_AddStringToObject(o, "protocolVersion", version);
	return o;
}

static cJSON *string_array(const char *const *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
	return a;
}

static cJSON *card_json(struct gh_req *r, const struct gh_agent_conf *a, enum dialect d)
{
	static const char *const modes[] = {"text/plain", "application/json"};
	static const char *const tags[] = {"gatehouse", "agent"};
	cJSON *o = cJSON_CreateObject(), *arr, *caps, *ext, *sch, *bearer, *skill, *prov;
	char base[512], url[1024], desc[512];

	if (!o)
		return NULL;
	base_url(r, base, sizeof(base));
	snprintf(url, sizeof(url), "%s/a2a/%s", base, a->id);
	if (a->description && *a->description)
		gh_strlcpy(desc, a->description, sizeof(desc));
	else
		snprintf(desc, sizeof(desc), "%s, served by gatehouse", a->name);
	cJSON_AddStringToObject(o, "name", a->name);
	cJSON_AddStringToObject(o, "description", desc);
	if (d == V03) {
		cJSON_AddStringToObject(o, "protocolVersion", "0.3.0");
		cJSON_AddStringToObject(o, "url", url);
		cJSON_AddStringToObject(o, "preferredTransport", "JSONRPC");
	}
	arr = cJSON_AddArrayToObject(o, "supportedInterfaces");
	cJSON_AddItemToArray(arr, iface(url, "1.0"));
	cJSON_AddItemToArray(arr, iface(url, "0.3"));
	prov = cJSON_AddObjectToObject(o, "provider");
	cJSON_AddStringToObject(prov, "organization", "gatehouse");
	cJSON_AddStringToObject(prov, "url", base);
	cJSON_AddStringToObject(o, "version", GH_VERSION);
	caps = cJSON_AddObjectToObject(o, "capabilities");
	cJSON_AddBoolToObject(caps, "streaming", 1);
	cJSON_AddBoolToObject(caps, "pushNotifications", 0);
	arr = cJSON_AddArrayToObject(caps, "extensions");
	ext = cJSON_CreateObject();
	cJSON_AddStringToObject(ext, "uri", EXT_TOOLS_URI);
	cJSON_AddStringToObject(ext, "description", EXT_TOOLS_DESC);
	cJSON_AddBoolToObject(ext, "required", 0);
	cJSON_AddItemToArray(arr, ext);
	sch = cJSON_AddObjectToObject(o, "securitySchemes");
	bearer = cJSON_AddObjectToObject(sch, "bearer");
	if (d == V10) {
		cJSON *h = cJSON_AddObjectToObject(bearer, "httpAuthSecurityScheme");

		cJSON_AddStringToObject(h, "description", "A gatehouse API key");
		cJSON_AddStringToObject(h, "scheme", "Bearer");
		cJSON_AddStringToObject(h, "bearerFormat", "gatehouse API key");
		arr = cJSON_AddArrayToObject(o, "securityRequirements");
		sch = cJSON_CreateObject();
		bearer = cJSON_AddObjectToObject(cJSON_AddObjectToObject(sch, "schemes"), "bearer");
		cJSON_AddArrayToObject(bearer, "list");
		cJSON_AddItemToArray(arr, sch);
	} else {
		cJSON_AddStringToObject(bearer, "type", "http");
		cJSON_AddStringToObject(bearer, "scheme", "bearer");
		cJSON_AddStringToObject(bearer, "bearerFormat", "gatehouse API key");
		cJSON_AddStringToObject(bearer, "description", "A gatehouse API key");
		arr = cJSON_AddArrayToObject(o, "security");
		sch = cJSON_CreateObject();
		cJSON_AddArrayToObject(sch, "bearer");
		cJSON_AddItemToArray(arr, sch);
	}
	cJSON_AddItemToObject(o, "defaultInputModes", string_array(modes, GH_ARRAY_LEN(modes)));
	cJSON_AddItemToObject(o, "defaultOutputModes", string_array(modes, GH_ARRAY_LEN(modes)));
	arr = cJSON_AddArrayToObject(o, "skills");
	skill = cJSON_CreateObject();
	cJSON_AddStringToObject(skill, "id", a->id);
	cJSON_AddStringToObject(skill, "name", a->name);
	cJSON_AddStringToObject(skill, "description", desc);
	cJSON_AddItemToObject(skill, "tags", string_array(tags, GH_ARRAY_LEN(tags)));
	cJSON_AddItemToArray(arr, skill);
	return o;
}

static void send_card(struct gh_req *r, const char *agent_id)
{
	const struct gh_agent_conf *a = gh_config_agent(r->app->cfg, agent_id);
	const char *ver = gh_http_header(r, "A2A-Version");
	cJSON *card;

	if (!a) {
		gh_http_errorf(r, GH_E_NOTFOUND, "no agent \"%s\"", agent_id);
		return;
	}
	/* 1.x asks for the 1.0 card; no header means a 0.3 client */
	card = card_json(r, a, ver && ver[0] >= '1' && ver[0] <= '9' ? V10 : V03);
	if (!card) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	r->extra_headers = "Vary: A2A-Version\r\n";
	gh_http_json(r, 200, card);
	r->extra_headers = NULL;
	cJSON_Delete(card);
}

static void default_card(struct gh_req *r)
{
	send_card(r, r->app->cfg->default_agent);
}

static void agent_card(struct gh_req *r)
{
	send_card(r, r->params[0]);
}

const struct gh_route gh_routes_a2a[] = {
	{"GET", "/.well-known/agent-card.json", GH_AUTH_NONE, default_card},
	{"GET", "/.well-known/agent.json", GH_AUTH_NONE, default_card},
	{"GET", "/a2a/:id/.well-known/agent-card.json", GH_AUTH_NONE, agent_card},
	{"GET", "/a2a/:id/.well-known/agent.json", GH_AUTH_NONE, agent_card},
	{"POST", "/a2a/:id", GH_AUTH_KEY, rpc_post},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
