/*
 * wire_native.c - the native agent API's wire shapes; see wire_native.h.
 */
#include "wire_native.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approvals.h"
#include "json.h"
#include "messages.h"
#include "tools.h"

/* ------------------------------------------------------------ requests */

/* Picks a string id from a few spellings; NULL when none. Errors when the
 * value is present but not a string. */
static enum gh_code pick_id(const cJSON *v, const char *field, const char **out,
			    struct gh_err *e)
{
	if (!v || cJSON_IsNull(v))
		return GH_OK;
	if (cJSON_IsObject(v)) {
		v = cJSON_GetObjectItemCaseSensitive(v, "id");
		if (!v)
			return GH_OK;
	}
	if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > GH_NAME_MAX)
		return gh_err_set(e, GH_E_BADREQ, "%s: expected a non-empty string of at most %d "
				  "characters", field, GH_NAME_MAX);
	*out = v->valuestring;
	return GH_OK;
}

static enum gh_code parse_ids(const cJSON *body, struct gh_native_req *out, struct gh_err *e)
{
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(body, "memory");
	enum gh_code rc;

	if (mem && !cJSON_IsObject(mem) && !cJSON_IsNull(mem))
		return gh_err_set(e, GH_E_BADREQ, "memory: expected {thread, resource}");
	if ((rc = pick_id(cJSON_GetObjectItemCaseSensitive(mem, "thread"), "memory.thread",
			  &out->thread_id, e)) != GH_OK ||
	    (rc = pick_id(cJSON_GetObjectItemCaseSensitive(mem, "resource"), "memory.resource",
			  &out->resource_id, e)) != GH_OK)
		return rc;
	if (!out->thread_id && (rc = pick_id(cJSON_GetObjectItemCaseSensitive(body, "threadId"),
					     "threadId", &out->thread_id, e)) != GH_OK)
		return rc;
	if (!out->resource_id &&
	    (rc = pick_id(cJSON_GetObjectItemCaseSensitive(body, "resourceId"), "resourceId",
			  &out->resource_id, e)) != GH_OK)
		return rc;
	return pick_id(cJSON_GetObjectItemCaseSensitive(body, "runId"), "runId", &out->run_id, e);
}

enum gh_code gh_native_parse(const cJSON *body, const struct gh_principal *who,
			     const struct gh_agent_conf *a, struct gh_native_req *out,
			     struct gh_err *e)
{
	const cJSON *v;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	v = cJSON_GetObjectItemCaseSensitive(body, "messages");
	if (!v)
		return gh_err_set(e, GH_E_BADREQ, "messages: required");
	if ((rc = gh_messages_normalize(v, &out->messages, e)) != GH_OK)
		return rc;
	if (cJSON_GetArraySize(out->messages) == 0)
		return gh_err_set(e, GH_E_BADREQ, "messages: at least one message is required");
	if ((rc = gh_tools_client_defs(cJSON_GetObjectItemCaseSensitive(body, "clientTools"), NULL,
				       "clientTools", &out->client_defs, e)) != GH_OK)
		return rc;
	if ((rc = parse_ids(body, out, e)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(body, "maxSteps");
	if (v && !cJSON_IsNull(v)) {
		if (!gh_json_is_int(v) || v->valuedouble < 1 || v->valuedouble > 100)
			return gh_err_set(e, GH_E_BADREQ, "maxSteps: expected an integer in 1..100");
		out->max_steps = (int)v->valuedouble;
	}
	/* a client that waits less for its own tools than the agent allows */
	v = cJSON_GetObjectItemCaseSensitive(body, "clientToolTimeoutS");
	if (v && !cJSON_IsNull(v)) {
		if (!gh_json_is_int(v) || v->valuedouble < 1 || v->valuedouble > 30 * 86400)
			return gh_err_set(e, GH_E_BADREQ, "clientToolTimeoutS: expected an integer "
					  "in 1..2592000 (seconds)");
		out->rq.client_tool_timeout_s = (int64_t)v->valuedouble;
	}
	out->rq.who = who;
	out->rq.agent = a;
	out->rq.thread_id = out->thread_id;
	out->rq.resource_id = out->resource_id;
	if (out->run_id) {
		/* runId is a name within the caller's owner */
		gh_run_named_id(who->key.owner, out->run_id, out->named_run);
		out->rq.run_id = out->named_run;
	}
	out->rq.messages = out->messages;
	out->rq.client_defs = out->client_defs;
	out->rq.max_steps = out->max_steps;
	out->rq.surface = "native";
	return GH_OK;
}

void gh_native_req_free(struct gh_native_req *n)
{
	cJSON_Delete(n->messages);
	cJSON_Delete(n->client_defs);
	memset(n, 0, sizeof(*n));
}

/* -------------------------------------------------------------- events */

const char *gh_wire_native_type(enum gh_run_event_kind k)
{
	switch (k) {
	case GH_EV_START: return "start";
	case GH_EV_STEP_START: return "step-start";
	case GH_EV_TEXT_DELTA: return "text-delta";
	case GH_EV_TOOL_CALL: return "tool-call";
	case GH_EV_TOOL_RESULT: return "tool-result";
	case GH_EV_TOOL_PROGRESS: return "tool-progress";
	case GH_EV_APPROVAL: return "tool-call-approval";
	case GH_EV_STEP_FINISH: return "step-finish";
	case GH_EV_FINISH: return "finish";
	case GH_EV_ERROR: return "error";
	case GH_EV_REASONING_DELTA:
	case GH_EV_TOOL_CALL_START:
	case GH_EV_TOOL_CALL_DELTA:
		break;
	}
	return NULL;
}

/* ,"key":"value" (a JSON string) */
static int put_str(struct gh_buf *b, const char *key, const char *v)
{
	int rc = gh_buf_printf(b, ",\"%s\":", key);

	return rc != GH_BUF_OK ? rc : gh_buf_json_str(b, v ? v : "");
}

/* toolCallId, toolName and args of a call, without the braces. */
static int put_call(struct gh_buf *b, const struct gh_run_call *c)
{
	int rc = gh_buf_puts(b, "\"toolCallId\":");

	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(b, c->id ? c->id : "");
	if (rc == GH_BUF_OK)
		rc = put_str(b, "toolName", c->name);
	if (rc == GH_BUF_OK && c->args) {
		rc = gh_buf_puts(b, ",\"args\":");
		if (rc == GH_BUF_OK)
			rc = gh_json_print(c->args, b);
	}
	return rc;
}

static int put_usage(struct gh_buf *b, const struct gh_run_usage *u)
{
	return gh_buf_printf(b, "\"usage\":{\"inputTokens\":%lld,\"outputTokens\":%lld,"
			     "\"totalTokens\":%lld}", (long long)u->input_tokens,
			     (long long)u->output_tokens,
			     (long long)(u->input_tokens + u->output_tokens));
}

/* {"stepResult":{"reason":R[,"isContinued":false]},"output":{"usage":U}[,"status":S]} */
static int put_step(struct gh_buf *b, const struct gh_run_event *ev, int finish)
{
	int rc = gh_buf_puts(b, "{\"stepResult\":{\"reason\":");

	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(b, gh_run_finish_name(ev->finish));
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(b, finish ? "},\"output\":{" : ",\"isContinued\":false},"
				 "\"output\":{");
	if (rc == GH_BUF_OK)
		rc = put_usage(b, &ev->usage);
	if (rc == GH_BUF_OK)
		rc = gh_buf_putc(b, '}');
	if (rc == GH_BUF_OK && finish)
		rc = put_str(b, "status", gh_run_status_name(ev->status));
	return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
}

int gh_wire_native_error(enum gh_code code, const char *msg, int status, struct gh_buf *b)
{
	int rc = gh_buf_puts(b, "{\"error\":{\"code\":");

	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(b, gh_code_name(code));
	if (rc == GH_BUF_OK)
		rc = put_str(b, "message", msg);
	if (rc == GH_BUF_OK && status)
		rc = gh_buf_printf(b, ",\"status\":%d", status);
	return rc == GH_BUF_OK ? gh_buf_puts(b, "}}") : rc;
}

static int put_result(struct gh_buf *b, const struct gh_run_call *c)
{
	int rc = gh_buf_putc(b, '{');

	if (rc == GH_BUF_OK)
		rc = put_call(b, c);
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(b, ",\"result\":");
	if (rc == GH_BUF_OK)
		rc = gh_json_print(c->result, b);
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(b, c->is_error ? ",\"isError\":true}" : ",\"isError\":false}");
	return rc;
}

static int put_approval(struct gh_buf *b, const struct gh_run_event *ev)
{
	int rc = gh_buf_putc(b, '{');

	if (rc == GH_BUF_OK)
		rc = put_call(b, ev->call);
	if (rc == GH_BUF_OK)
		rc = put_str(b, "approvalId", ev->call->approval_id);
	if (rc == GH_BUF_OK)
		rc = put_str(b, "approver", ev->approver);
	if (rc == GH_BUF_OK)
		rc = put_str(b, "reason", ev->rule);
	if (rc == GH_BUF_OK && ev->call->approval_expires_at > 0) {
		char ts[GH_ISO8601_MAX];

		/* times on the JSON API are ISO-8601 strings */
		gh_iso8601(ev->call->approval_expires_at, ts, sizeof(ts));
		rc = put_str(b, "expiresAt", ts);
	}
	return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
}

/* {toolCallId, toolName, progress, total?, message?} */
static int put_progress(struct gh_buf *b, const struct gh_run_event *ev)
{
	int rc = gh_buf_putc(b, '{');

	if (rc == GH_BUF_OK)
		rc = put_call(b, ev->call);
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(b, ",\"progress\":%.17g",
				   isfinite(ev->progress) ? ev->progress : 0.0);
	if (rc == GH_BUF_OK && ev->total >= 0 && isfinite(ev->total))
		rc = gh_buf_printf(b, ",\"total\":%.17g", ev->total);
	if (rc == GH_BUF_OK && ev->message)
		rc = put_str(b, "message", ev->message);
	return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
}

int gh_wire_native_payload(const struct gh_run_event *ev, struct gh_buf *b)
{
	int rc;

	switch (ev->kind) {
	case GH_EV_START:
		return gh_buf_puts(b, "{}");
	case GH_EV_STEP_START:
		rc = gh_buf_puts(b, "{\"messageId\":");
		if (rc == GH_BUF_OK)
			rc = gh_buf_json_str(b, ev->message_id ? ev->message_id : "");
		return rc == GH_BUF_OK ? gh_buf_printf(b, ",\"step\":%lld}", (long long)ev->step)
				       : rc;
	case GH_EV_TEXT_DELTA:
		rc = gh_buf_puts(b, "{\"id\":\"0\",\"text\":");
		if (rc == GH_BUF_OK)
			rc = gh_buf_json_strn(b, ev->text ? ev->text : "", ev->text ? ev->len : 0);
		return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
	case GH_EV_TOOL_CALL:
		rc = gh_buf_putc(b, '{');
		if (rc == GH_BUF_OK)
			rc = put_call(b, ev->call);
		return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
	case GH_EV_TOOL_RESULT:
		return put_result(b, ev->call);
	case GH_EV_TOOL_PROGRESS:
		return put_progress(b, ev);
	case GH_EV_APPROVAL:
		return put_approval(b, ev);
	case GH_EV_STEP_FINISH:
		return put_step(b, ev, 0);
	case GH_EV_FINISH:
		return put_step(b, ev, 1);
	case GH_EV_ERROR:
		return gh_wire_native_error(ev->code, ev->message, 0, b);
	case GH_EV_REASONING_DELTA:
	case GH_EV_TOOL_CALL_START:
	case GH_EV_TOOL_CALL_DELTA:
		break;
	}
	return gh_buf_puts(b, "{}");
}

int gh_wire_native_envelope(const char *type, const char *run_id, struct gh_buf *b)
{
	int rc = gh_buf_puts(b, "{\"type\":");

	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(b, type);
	if (rc == GH_BUF_OK)
		rc = put_str(b, "runId", run_id);
	return rc == GH_BUF_OK ? gh_buf_puts(b, ",\"from\":\"AGENT\",\"payload\":") : rc;
}

int gh_wire_native_chunk(const struct gh_run_event *ev, struct gh_buf *b)
{
	const char *type = gh_wire_native_type(ev->kind);
	int rc;

	if (!type)
		return GH_BUF_OK;
	rc = gh_wire_native_envelope(type, ev->run_id, b);
	if (rc == GH_BUF_OK)
		rc = gh_wire_native_payload(ev, b);
	return rc == GH_BUF_OK ? gh_buf_putc(b, '}') : rc;
}

/* ------------------------------------------------------------- results */

/* A tool call or result in both Mastra shapes: {type, runId, from,
 * payload:{...}} and the same fields flat. */
static cJSON *chunk_json(const char *type, const char *run_id, const cJSON *fields)
{
	cJSON *o = cJSON_CreateObject(), *it;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddStringToObject(o, "runId", run_id);
	cJSON_AddStringToObject(o, "from", "AGENT");
	cJSON_AddItemToObject(o, "payload", cJSON_Duplicate(fields, 1));
	cJSON_ArrayForEach(it, fields)
		if (strcmp(it->string, "type"))
			cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
	return o;
}

static void add_usage(cJSON *o, const struct gh_run_usage *u)
{
	cJSON *j = cJSON_AddObjectToObject(o, "usage");

	cJSON_AddNumberToObject(j, "inputTokens", (double)u->input_tokens);
	cJSON_AddNumberToObject(j, "outputTokens", (double)u->output_tokens);
	cJSON_AddNumberToObject(j, "totalTokens", (double)(u->input_tokens + u->output_tokens));
	cJSON_AddNumberToObject(j, "promptTokens", (double)u->input_tokens);
	cJSON_AddNumberToObject(j, "completionTokens", (double)u->output_tokens);
}

/* The shape both results share; calls [{toolCallId, toolName, args,
 * source?}], results [{toolCallId, toolName, result, isError}]. */
static cJSON *result_json(const char *run_id, const char *text, const char *finish,
			  const cJSON *calls, const cJSON *results, const cJSON *messages,
			  const struct gh_run_usage *u, const char *thread_id,
			  const char *resource_id, enum gh_run_status status)
{
	cJSON *o = cJSON_CreateObject(), *arr, *it, *resp;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "text", text ? text : "");
	cJSON_AddStringToObject(o, "finishReason", finish);
	arr = cJSON_AddArrayToObject(o, "toolCalls");
	cJSON_ArrayForEach(it, calls) {
		cJSON *f = cJSON_Duplicate(it, 1);

		cJSON_DeleteItemFromObjectCaseSensitive(f, "source");
		cJSON_AddItemToArray(arr, chunk_json("tool-call", run_id, f));
		cJSON_Delete(f);
	}
	arr = cJSON_AddArrayToObject(o, "toolResults");
	cJSON_ArrayForEach(it, results)
		cJSON_AddItemToArray(arr, chunk_json("tool-result", run_id, it));
	resp = cJSON_AddObjectToObject(o, "response");
	cJSON_AddStringToObject(resp, "id", run_id);
	cJSON_AddItemToObject(resp, "messages", messages ? cJSON_Duplicate(messages, 1)
							 : cJSON_CreateArray());
	add_usage(o, u);
	cJSON_AddStringToObject(o, "runId", run_id);
	gh_json_add_str(o, "threadId", thread_id[0] ? thread_id : NULL);
	gh_json_add_str(o, "resourceId", resource_id[0] ? resource_id : NULL);
	cJSON_AddStringToObject(o, "status", gh_run_status_name(status));
	return o;
}

cJSON *gh_wire_native_result(const struct gh_run_result *res)
{
	cJSON *o = result_json(res->run_id, res->text, gh_run_finish_name(res->finish),
			       res->tool_calls, res->tool_results, res->messages, &res->usage,
			       res->thread_id, res->resource_id, res->status);

	if (o && cJSON_GetArraySize(res->approvals) > 0)
		cJSON_AddItemToObject(o, "approvals", cJSON_Duplicate(res->approvals, 1));
	return o;
}

/* What a stored run says about how its turn ended: an answer's finish
 * reason; "suspended" or "tool-calls" while it waits; else its status. */
static const char *view_finish(const struct gh_run_view *v)
{
	if (v->status == GH_RUN_SUSPENDED)
		return gh_run_finish_name(GH_RUN_FINISH_SUSPENDED);
	if (v->status == GH_RUN_WAITING)
		return gh_run_finish_name(GH_RUN_FINISH_TOOL_CALLS);
	if (v->has_output)
		return gh_run_finish_name(v->finish);
	return gh_run_status_name(v->status);
}

cJSON *gh_wire_native_view_result(const struct gh_run_view *v)
{
	cJSON *calls = gh_run_view_pending_json(v), *results = cJSON_CreateArray(), *o;

	o = result_json(v->id, v->has_output ? v->text : "", view_finish(v), calls, results, NULL,
			&v->usage, v->thread_id, v->resource_id, v->status);
	if (o)
		gh_json_add_str(o, "error", v->error);
	cJSON_Delete(calls);
	cJSON_Delete(results);
	return o;
}

cJSON *gh_wire_native_run(const struct gh_run_view *v)
{
	cJSON *o = cJSON_CreateObject(), *apprs, *u;
	char ts[GH_ISO8601_MAX];
	size_t i;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", v->id);
	cJSON_AddStringToObject(o, "status", gh_run_status_name(v->status));
	cJSON_AddStringToObject(o, "agentId", v->agent_id);
	gh_json_add_str(o, "threadId", v->thread_id[0] ? v->thread_id : NULL);
	gh_json_add_str(o, "resourceId", v->resource_id[0] ? v->resource_id : NULL);
	cJSON_AddStringToObject(o, "keyId", v->key_id);
	gh_iso8601(v->created_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "createdAt", ts);
	gh_iso8601(v->updated_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "updatedAt", ts);
	cJSON_AddItemToObject(o, "pending", gh_run_view_pending_json(v));
	apprs = cJSON_AddArrayToObject(o, "approvals");
	for (i = 0; i < v->ncalls; i++)
		if (v->calls[i].state == GH_CALL_PENDING_APPROVAL && v->calls[i].approval)
			cJSON_AddItemToArray(apprs, gh_approval_json(v->calls[i].approval));
	if (v->has_output) {
		cJSON *out = cJSON_AddObjectToObject(o, "output");

		cJSON_AddStringToObject(out, "text", v->text ? v->text : "");
		cJSON_AddStringToObject(out, "finishReason", gh_run_finish_name(v->finish));
		u = cJSON_AddObjectToObject(out, "usage");
		cJSON_AddNumberToObject(u, "inputTokens", (double)v->usage.input_tokens);
		cJSON_AddNumberToObject(u, "outputTokens", (double)v->usage.output_tokens);
	} else {
		cJSON_AddNullToObject(o, "output");
	}
	gh_json_add_str(o, "error", v->error);
	u = cJSON_AddObjectToObject(o, "usage");
	cJSON_AddNumberToObject(u, "input", (double)v->usage.input_tokens);
	cJSON_AddNumberToObject(u, "output", (double)v->usage.output_tokens);
	return o;
}

/* ------------------------------------------------------ suspended runs */

/* What a waiting call waits on, as Mastra's suspendPayload: an approval
 * (its id, who approves, expiry, the digest it binds to) or the client. */
static cJSON *suspend_payload(const struct gh_run_call *c)
{
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!o)
		return NULL;
	if (c->state != GH_CALL_PENDING_APPROVAL) {
		cJSON_AddStringToObject(o, "waitingOn", "client");
		return o;
	}
	cJSON_AddStringToObject(o, "waitingOn", "approval");
	gh_json_add_str(o, "approvalId", c->approval_id);
	if (c->approval) {
		cJSON_AddStringToObject(o, "approver", c->approval->approver);
		cJSON_AddStringToObject(o, "argsSha256", c->approval->args_sha256);
	}
	if (c->approval_expires_at > 0) {
		gh_iso8601(c->approval_expires_at, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "expiresAt", ts);
	}
	return o;
}

cJSON *gh_wire_native_suspended_run(const struct gh_run_view *v)
{
	cJSON *o = cJSON_CreateObject(), *calls;
	char ts[GH_ISO8601_MAX];
	size_t i;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "runId", v->id);
	cJSON_AddStringToObject(o, "status", "suspended");
	gh_json_add_str(o, "threadId", v->thread_id[0] ? v->thread_id : NULL);
	gh_json_add_str(o, "resourceId", v->resource_id[0] ? v->resource_id : NULL);
	gh_iso8601(v->updated_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "suspendedAt", ts);
	calls = cJSON_AddArrayToObject(o, "toolCalls");
	for (i = 0; calls && i < v->ncalls; i++) {
		const struct gh_run_call *c = &v->calls[i];
		cJSON *t;

		if (c->state != GH_CALL_PENDING_APPROVAL && !gh_call_state_client(c->state))
			continue;
		t = cJSON_CreateObject();
		if (!t)
			break;
		cJSON_AddStringToObject(t, "toolCallId", c->id);
		cJSON_AddStringToObject(t, "toolName", c->name);
		cJSON_AddItemToObject(t, "args", c->args ? cJSON_Duplicate(c->args, 1)
							 : cJSON_CreateObject());
		cJSON_AddBoolToObject(t, "requiresApproval", c->state == GH_CALL_PENDING_APPROVAL);
		cJSON_AddItemToObject(t, "suspendPayload", suspend_payload(c));
		cJSON_AddItemToArray(calls, t);
	}
	return o;
}
