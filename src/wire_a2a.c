/*
 * wire_a2a.c - the A2A wire in both dialects; see wire_a2a.h.
 */
#include "wire_a2a.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "tools.h"
#include "util.h"

#define MAX_PARTS 256
#define MAX_RESULTS 128

/* -------------------------------------------------------- wire shapes */

const char *gh_a2a_state_wire(const char *state, enum gh_a2a_dialect d)
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
			return d == GH_A2A_V10 ? map[i].v10 : map[i].v03;
	return d == GH_A2A_V10 ? "TASK_STATE_UNSPECIFIED" : "unknown";
}

int gh_a2a_terminal(const char *state)
{
	return !strcmp(state, GH_A2A_COMPLETED) || !strcmp(state, GH_A2A_FAILED) ||
	       !strcmp(state, GH_A2A_CANCELED);
}

static cJSON *parts_out(const cJSON *parts, enum gh_a2a_dialect d);

/* A stored object (1.0 shape) in the 0.3 spelling: {kind}, then its
 * members, with a message's role and parts spelt the 0.3 way. */
static cJSON *v03_out(const cJSON *src, const char *kind)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *it;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "kind", kind);
	cJSON_ArrayForEach(it, src) {
		if (!strcmp(it->string, "role"))
			cJSON_AddStringToObject(o, "role", cJSON_IsString(it) &&
						!strcmp(it->valuestring, "ROLE_USER") ? "user" : "agent");
		else if (!strcmp(it->string, "parts"))
			cJSON_AddItemToObject(o, "parts", parts_out(it, GH_A2A_V03));
		else
			cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
	}
	return o;
}

/* A stored part (1.0 shape) as the dialect spells it. */
cJSON *gh_a2a_part_out(const cJSON *p, enum gh_a2a_dialect d)
{
	if (d == GH_A2A_V10)
		return cJSON_Duplicate(p, 1);
	return v03_out(p, cJSON_GetObjectItemCaseSensitive(p, "text") ? "text" : "data");
}

static cJSON *parts_out(const cJSON *parts, enum gh_a2a_dialect d)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *p;

	cJSON_ArrayForEach(p, parts)
		cJSON_AddItemToArray(arr, gh_a2a_part_out(p, d));
	return arr;
}

/* A stored message (1.0 shape) as the dialect spells it. */
static cJSON *message_out(const cJSON *m, enum gh_a2a_dialect d)
{
	return d == GH_A2A_V10 ? cJSON_Duplicate(m, 1) : v03_out(m, "message");
}

static cJSON *artifact_out(const cJSON *a, enum gh_a2a_dialect d)
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

cJSON *gh_a2a_status_out(const struct gh_a2a_task *t, enum gh_a2a_dialect d)
{
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "state", gh_a2a_state_wire(t->state, d));
	if (t->status_message)
		cJSON_AddItemToObject(o, "message", message_out(t->status_message, d));
	gh_iso8601(t->updated_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "timestamp", ts);
	return o;
}

/* The task as the dialect spells it; history_len < 0 = all of it, else
 * the newest history_len messages. */
cJSON *gh_a2a_task_out(const struct gh_a2a_task *t, enum gh_a2a_dialect d,
			int64_t history_len)
{
	cJSON *o = cJSON_CreateObject(), *h, *arts, *md;
	const cJSON *it;
	int n = cJSON_GetArraySize(t->history), i;

	if (!o)
		return NULL;
	if (d == GH_A2A_V03)
		cJSON_AddStringToObject(o, "kind", "task");
	cJSON_AddStringToObject(o, "id", t->id);
	cJSON_AddStringToObject(o, "contextId", t->context_id);
	cJSON_AddItemToObject(o, "status", gh_a2a_status_out(t, d));
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

cJSON *gh_a2a_text_part(const char *text)
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
void gh_a2a_task_set(struct gh_a2a_task *t, const char *state, cJSON *status_message)
{
	gh_strlcpy(t->state, state, sizeof(t->state));
	cJSON_Delete(t->status_message);
	t->status_message = status_message;
	if (status_message)
		cJSON_AddItemToArray(t->history, cJSON_Duplicate(status_message, 1));
	t->updated_at = gh_now_ms();
}

/* The failure of t as its status message: a text part and a DataPart
 * {error:{code, message}}. */
cJSON *gh_a2a_error_message(const struct gh_a2a_task *t, const char *code, const char *msg)
{
	cJSON *parts = cJSON_CreateArray(), *err = cJSON_CreateObject(), *o;

	if (err) {
		o = cJSON_AddObjectToObject(err, "error");
		cJSON_AddStringToObject(o, "code", code);
		cJSON_AddStringToObject(o, "message", msg);
	}
	cJSON_AddItemToArray(parts, gh_a2a_text_part(msg));
	cJSON_AddItemToArray(parts, data_part(err, "error"));
	return agent_message(t, parts);
}

/* The artifact id for the text of step `step` of run_id. Streaming uses the
 * same ids, so the stored artifact is the one the stream built. */
cJSON *gh_a2a_gone_message(const struct gh_a2a_task *t)
{
	return gh_a2a_error_message(t, "cancelled", "the client went away before the answer "
				    "was ready");
}

void gh_a2a_artifact_id(const char *run_id, int64_t step, char *out, size_t cap)
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

/* The text of the run's last step when it was the model's (the words that
 * came with its tool calls), a tool-calls DataPart for client calls, an
 * approval-required DataPart per call waiting on a person. */
static cJSON *waiting_parts(const struct gh_run_view *v)
{
	cJSON *parts = cJSON_CreateArray(), *calls = gh_run_view_pending_json(v);
	size_t i;

	if (!parts || !calls) {
		cJSON_Delete(parts);
		cJSON_Delete(calls);
		return NULL;
	}
	if (v->last_step_text && *v->last_step_text)
		cJSON_AddItemToArray(parts, gh_a2a_text_part(v->last_step_text));
	/* after the text, before approvals: what the client itself can do */
	if (cJSON_GetArraySize(calls) > 0) {
		cJSON *d = cJSON_CreateObject();

		if (d)
			cJSON_AddItemToObject(d, "toolCalls", calls);
		else
			cJSON_Delete(calls);
		cJSON_AddItemToArray(parts, data_part(d, "tool-calls"));
	} else {
		cJSON_Delete(calls);
	}
	for (i = 0; i < v->ncalls; i++) {
		const struct gh_run_call *c = &v->calls[i];
		char ts[GH_ISO8601_MAX];
		cJSON *d, *ap;

		if (c->state != GH_CALL_PENDING_APPROVAL || !(d = cJSON_CreateObject()))
			continue;
		ap = cJSON_AddObjectToObject(d, "approval");
		gh_json_add_str(ap, "id", c->approval_id);
		gh_json_add_str(ap, "toolCallId", c->id);
		gh_json_add_str(ap, "toolName", c->name);
		if (c->args)
			cJSON_AddItemToObject(ap, "args", cJSON_Duplicate(c->args, 1));
		if (c->approval) {
			cJSON_AddStringToObject(ap, "approver", c->approval->approver);
			cJSON_AddStringToObject(ap, "status", c->approval->status);
		}
		if (c->approval_expires_at > 0) {
			gh_iso8601(c->approval_expires_at, ts, sizeof(ts));
			cJSON_AddStringToObject(ap, "expiresAt", ts);
		}
		cJSON_AddItemToArray(parts, data_part(d, "approval-required"));
	}
	return parts;
}

const char *gh_a2a_state_of_run(enum gh_run_status s)
{
	switch (s) {
	case GH_RUN_COMPLETED: return GH_A2A_COMPLETED;
	case GH_RUN_WAITING:
	case GH_RUN_SUSPENDED: return GH_A2A_INPUT_REQUIRED;
	case GH_RUN_FAILED:
	case GH_RUN_EXPIRED: return GH_A2A_FAILED;
	case GH_RUN_CANCELLED: return GH_A2A_CANCELED;
	case GH_RUN_RUNNING: break;
	}
	return GH_A2A_WORKING;
}

/* The answer as an artifact (once per step) and an agent message. */
static void sync_completed(struct gh_a2a_task *t, const struct gh_run_view *v)
{
	char aid[GH_ID_MAX + 32];
	cJSON *a, *parts;

	gh_a2a_artifact_id(t->run_id, v->step, aid, sizeof(aid));
	if (!has_artifact(t, aid)) {
		a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "artifactId", aid);
		cJSON_AddStringToObject(a, "name", "response");
		parts = cJSON_AddArrayToObject(a, "parts");
		cJSON_AddItemToArray(parts, gh_a2a_text_part(v->text));
		cJSON_AddItemToArray(t->artifacts, a);
	}
	parts = cJSON_CreateArray();
	cJSON_AddItemToArray(parts, gh_a2a_text_part(v->text));
	gh_a2a_task_set(t, GH_A2A_COMPLETED, NULL);
	cJSON_AddItemToArray(t->history, agent_message(t, parts));
}

void gh_a2a_task_sync(struct gh_a2a_task *t, const struct gh_run_view *v)
{
	const char *state = gh_a2a_state_of_run(v->status);

	if (!strcmp(state, GH_A2A_COMPLETED))
		sync_completed(t, v);
	else if (!strcmp(state, GH_A2A_INPUT_REQUIRED))
		gh_a2a_task_set(t, state, agent_message(t, waiting_parts(v)));
	else if (!strcmp(state, GH_A2A_FAILED))
		gh_a2a_task_set(t, state, gh_a2a_error_message(t, "failed", v->error ? v->error
										 : "the run failed"));
	else
		gh_a2a_task_set(t, state, NULL);
}

/* ------------------------------------------------------ incoming message */

void gh_a2a_incoming_free(struct gh_a2a_incoming *in)
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
		return GH_RPC_INVALID_PARAMS;
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
		return GH_RPC_INVALID_PARAMS;
	}
	cJSON_ArrayForEach(r, res) {
		const cJSON *ie = cJSON_GetObjectItemCaseSensitive(r, "isError");
		const char *id = gh_json_str(r, "toolCallId");

		if (!cJSON_IsObject(r) || !id || !*id || strlen(id) >= GH_ID_MAX ||
		    (ie && !cJSON_IsBool(ie))) {
			gh_err_set(e, GH_E_BADREQ, "message.parts[%d].data.results[%d]: expected "
				   "{toolCallId: string, result: any JSON, isError?: boolean}", i, j);
			return GH_RPC_INVALID_PARAMS;
		}
		j++;
	}
	*out = res;
	return 0;
}

/* Text for the model, parts joined by newlines, bounded. */
struct text_acc {
	struct gh_buf b;
	int has, too_big;
};

static void add_text(struct text_acc *t, const char *s)
{
	if (t->has)
		t->too_big |= gh_buf_puts(&t->b, "\n") != GH_BUF_OK;
	t->too_big |= gh_buf_puts(&t->b, s) != GH_BUF_OK;
	t->has = 1;
}

/* A tool-definitions DataPart: the client's tools (one part per message). */
static int tool_definitions(const cJSON *data, int i, struct gh_a2a_incoming *in,
			    struct gh_err *e)
{
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(data, "tools");
	char where[64];

	if (in->client_defs) {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: only one tool-definitions "
			   "part per message", i);
		return GH_RPC_INVALID_PARAMS;
	}
	if (!cJSON_IsArray(tools)) {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d].data.tools: expected an array "
			   "of OpenAI function tools", i);
		return GH_RPC_INVALID_PARAMS;
	}
	snprintf(where, sizeof(where), "message.parts[%d].data.tools", i);
	if (gh_tools_client_defs(NULL, tools, where, &in->client_defs, e) != GH_OK)
		return GH_RPC_INVALID_PARAMS;
	return 0;
}

/* A DataPart: tool definitions, tool results, or structured input that
 * reaches the model as JSON. */
static int data_in(const cJSON *data, const char *ptype, int i, struct gh_a2a_incoming *in,
		   struct text_acc *text, struct gh_err *e)
{
	char *js;

	if (ptype && !strcmp(ptype, "tool-definitions"))
		return tool_definitions(data, i, in, e);
	if ((ptype && !strcmp(ptype, "tool-results")) ||
	    (!ptype && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(data, "results")))) {
		if (in->results) {
			gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: only one "
				   "tool-results part per message", i);
			return GH_RPC_INVALID_PARAMS;
		}
		return check_results(data, i, &in->results, e);
	}
	js = gh_json_dump(data);
	add_text(text, js ? js : "null");
	free(js);
	return 0;
}

/* One part of the message: stored as sp, its text (if any) into text. */
static int part_in(const cJSON *p, int i, cJSON *sp, struct gh_a2a_incoming *in,
		   struct text_acc *text, struct gh_err *e)
{
	const char *kind = gh_json_str(p, "kind");
	const cJSON *pmd = cJSON_GetObjectItemCaseSensitive(p, "metadata");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(p, "data");
	int rc;

	if (!cJSON_IsObject(p) || (pmd && !cJSON_IsObject(pmd) && !cJSON_IsNull(pmd))) {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: expected a part object with "
			   "optional metadata object", i);
		return GH_RPC_INVALID_PARAMS;
	}
	if (cJSON_GetObjectItemCaseSensitive(p, "url") || cJSON_GetObjectItemCaseSensitive(p, "raw") ||
	    cJSON_GetObjectItemCaseSensitive(p, "file") || (kind && !strcmp(kind, "file"))) {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: file parts are not supported; "
			   "send text or data parts", i);
		return GH_A2A_CONTENT_TYPE;
	}
	if (cJSON_GetObjectItemCaseSensitive(p, "text") && (!kind || !strcmp(kind, "text"))) {
		const char *t = gh_json_str(p, "text");

		if (!t) {
			gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d].text: expected a string",
				   i);
			return GH_RPC_INVALID_PARAMS;
		}
		cJSON_AddStringToObject(sp, "text", t);
		add_text(text, t);
	} else if (data && (!kind || !strcmp(kind, "data"))) {
		cJSON_AddItemToObject(sp, "data", cJSON_Duplicate(data, 1));
		if ((rc = data_in(data, gh_json_str(pmd, "type"), i, in, text, e)))
			return rc;
	} else {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts[%d]: expected a text part "
			   "({\"text\"}) or a data part ({\"data\"})", i);
		return GH_RPC_INVALID_PARAMS;
	}
	if (cJSON_IsObject(pmd))
		cJSON_AddItemToObject(sp, "metadata", cJSON_Duplicate(pmd, 1));
	return 0;
}

/* role, messageId and the ids of params.message. */
static int message_head(const cJSON *params, const cJSON *m, struct gh_a2a_incoming *in,
			struct gh_err *e)
{
	const char *role = gh_json_str(m, "role"), *mid = gh_json_str(m, "messageId");
	int rc;

	if (!role || (strcmp(role, "user") && strcmp(role, "ROLE_USER"))) {
		gh_err_set(e, GH_E_BADREQ, "params.message.role: expected \"ROLE_USER\" (A2A 1.0) "
			   "or \"user\" (0.3)");
		return GH_RPC_INVALID_PARAMS;
	}
	if (!mid || !*mid || strlen(mid) > GH_NAME_MAX) {
		gh_err_set(e, GH_E_BADREQ, "params.message.messageId: expected a string of 1 to %d "
			   "characters", GH_NAME_MAX);
		return GH_RPC_INVALID_PARAMS;
	}
	if ((rc = opt_id(m, "taskId", "params.message", &in->task_id, e)) ||
	    (rc = opt_id(m, "contextId", "params.message", &in->context_id, e)) ||
	    (rc = opt_id(cJSON_GetObjectItemCaseSensitive(m, "metadata"), "resourceId",
			 "params.message.metadata", &in->resource_id, e)))
		return rc;
	if (!in->resource_id &&
	    (rc = opt_id(cJSON_GetObjectItemCaseSensitive(params, "metadata"), "resourceId",
			 "params.metadata", &in->resource_id, e)))
		return rc;
	return 0;
}

int gh_a2a_parse_message(const cJSON *params, struct gh_a2a_incoming *in, struct gh_err *e)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "message");
	const cJSON *parts, *p, *md;
	cJSON *sparts;
	struct text_acc text;
	int i = 0, rc;

	memset(in, 0, sizeof(*in));
	if (!cJSON_IsObject(m)) {
		gh_err_set(e, GH_E_BADREQ, "params.message: expected a message object");
		return GH_RPC_INVALID_PARAMS;
	}
	if ((rc = message_head(params, m, in, e)))
		return rc;
	parts = cJSON_GetObjectItemCaseSensitive(m, "parts");
	if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) == 0 ||
	    cJSON_GetArraySize(parts) > MAX_PARTS) {
		gh_err_set(e, GH_E_BADREQ, "params.message.parts: expected an array of 1 to %d "
			   "parts", MAX_PARTS);
		return GH_RPC_INVALID_PARAMS;
	}
	if (!(in->stored = cJSON_CreateObject())) {
		gh_err_set(e, GH_E_NOMEM, "out of memory");
		return GH_RPC_INTERNAL;
	}
	cJSON_AddStringToObject(in->stored, "messageId", gh_json_str(m, "messageId"));
	cJSON_AddStringToObject(in->stored, "role", "ROLE_USER");
	sparts = cJSON_AddArrayToObject(in->stored, "parts");
	md = cJSON_GetObjectItemCaseSensitive(m, "metadata");
	if (cJSON_IsObject(md))
		cJSON_AddItemToObject(in->stored, "metadata", cJSON_Duplicate(md, 1));
	memset(&text, 0, sizeof(text));
	gh_buf_init(&text.b, 1 << 26);
	cJSON_ArrayForEach(p, parts) {
		cJSON *sp = cJSON_CreateObject();

		cJSON_AddItemToArray(sparts, sp);
		if ((rc = part_in(p, i++, sp, in, &text, e)))
			goto out;
	}
	rc = 0;
	if (text.too_big) {
		gh_err_set(e, GH_E_TOOBIG, "params.message: the text is too large");
		rc = GH_RPC_INVALID_PARAMS;
	} else if (text.has && !(in->text = gh_buf_detach(&text.b))) {
		gh_err_set(e, GH_E_NOMEM, "out of memory");
		rc = GH_RPC_INTERNAL;
	}
out:
	gh_buf_free(&text.b);
	return rc;
}

int gh_a2a_history_len(const cJSON *obj, const char *where, int64_t *out, struct gh_err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "historyLength");

	*out = -1;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!gh_json_is_int(v) || v->valuedouble < 0 || v->valuedouble > 1e9) {
		gh_err_set(e, GH_E_BADREQ, "%s.historyLength: expected an integer >= 0", where);
		return GH_RPC_INVALID_PARAMS;
	}
	*out = (int64_t)v->valuedouble;
	return 0;
}

int gh_a2a_rpc_code(enum gh_code code)
{
	switch (code) {
	case GH_E_BADREQ:
	case GH_E_CONFLICT:
	case GH_E_FORBIDDEN:
	case GH_E_TOOBIG:
		return GH_RPC_INVALID_PARAMS;
	case GH_E_NOTFOUND:
		return GH_A2A_TASK_NOT_FOUND;
	default:
		return GH_RPC_INTERNAL;
	}
}

cJSON *gh_a2a_results_messages(const cJSON *results)
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

void gh_a2a_describe_wait(const struct gh_a2a_task *t, char *out, size_t cap)
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

int gh_a2a_task_copy(const struct gh_a2a_task *t, struct gh_a2a_task *out)
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

int gh_a2a_version_supported(const char *v)
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

