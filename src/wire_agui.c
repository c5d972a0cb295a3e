/*
 * wire_agui.c - the AG-UI wire; see wire_agui.h.
 *
 * AG-UI messages are OpenAI chat messages in camelCase (toolCalls with
 * function {name, arguments}, toolCallId), so a RunAgentInput is first
 * rewritten into a chat completion body and read by wire_openai.c, which
 * owns the conversion into CoreMessages and client tools; the reasoning
 * and activity messages AG-UI clients keep for their own display are left
 * out. Every input is bounded by the body cap, the 1000-message cap of the
 * conversion and the caps below.
 */
#include "wire_agui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "util.h"
#include "wire_openai.h"

#define CONTEXT_MAX (256u << 10)      /* the context entries told as one message */

/* ------------------------------------------------------------- request */

/* AG-UI toolCalls -> OpenAI tool_calls (arguments stay JSON text). */
static cJSON *tool_calls(const cJSON *calls)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *c;

	cJSON_ArrayForEach(c, calls) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddItemToArray(out, o);
		if (cJSON_GetObjectItemCaseSensitive(c, "id"))
			cJSON_AddItemToObject(o, "id",
					      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "id"), 1));
		cJSON_AddStringToObject(o, "type", "function");
		if (fn)
			cJSON_AddItemToObject(o, "function", cJSON_Duplicate(fn, 1));
	}
	return out;
}

/* One AG-UI message as an OpenAI chat message; NULL for the roles the
 * model never sees (reasoning, activity), *bad for an unknown role. */
static cJSON *chat_message(const cJSON *m, int *bad)
{
	const char *role = gh_json_str(m, "role");
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(m, "error");
	cJSON *o;

	*bad = 0;
	if (role && (!strcmp(role, "reasoning") || !strcmp(role, "activity")))
		return NULL;
	if (!role || (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") &&
		      strcmp(role, "assistant") && strcmp(role, "tool"))) {
		*bad = 1;
		return NULL;
	}
	if (!(o = cJSON_CreateObject()))
		return NULL;
	cJSON_AddStringToObject(o, "role", role);
	/* a tool message that failed says so in its content */
	if (!strcmp(role, "tool") && cJSON_IsString(err) &&
	    (!cJSON_IsString(content) || !*content->valuestring))
		content = err;
	if (content)
		cJSON_AddItemToObject(o, "content", cJSON_Duplicate(content, 1));
	if (!strcmp(role, "assistant") && cJSON_GetObjectItemCaseSensitive(m, "toolCalls")) {
		const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "toolCalls");

		cJSON_AddItemToObject(o, "tool_calls", cJSON_IsArray(tc) ? tool_calls(tc)
									 : cJSON_Duplicate(tc, 1));
	}
	if (!strcmp(role, "tool") && cJSON_GetObjectItemCaseSensitive(m, "toolCallId"))
		cJSON_AddItemToObject(o, "tool_call_id",
				      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(m,
										       "toolCallId"),
						      1));
	return o;
}

/* AG-UI tools -> OpenAI function tools. GH_E_BADREQ naming the tool. */
static enum gh_code chat_tools(const cJSON *tools, cJSON *out, struct gh_err *e)
{
	const cJSON *t;
	int i = 0;

	if (!tools || cJSON_IsNull(tools))
		return GH_OK;
	if (!cJSON_IsArray(tools))
		return gh_err_set(e, GH_E_BADREQ, "tools: expected an array of {name, description, "
				  "parameters}");
	cJSON_ArrayForEach(t, tools) {
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(t, "parameters");
		const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
		cJSON *o, *fn;

		if (!cJSON_IsObject(t) || !gh_json_str(t, "name"))
			return gh_err_set(e, GH_E_BADREQ, "tools[%d]: expected {name, description, "
					  "parameters}", i);
		if (desc && !cJSON_IsString(desc))
			return gh_err_set(e, GH_E_BADREQ, "tools[%d].description: expected a string",
					  i);
		if (!(o = cJSON_CreateObject()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		cJSON_AddItemToArray(out, o);
		cJSON_AddStringToObject(o, "type", "function");
		fn = cJSON_AddObjectToObject(o, "function");
		cJSON_AddStringToObject(fn, "name", gh_json_str(t, "name"));
		if (desc)
			cJSON_AddStringToObject(fn, "description", desc->valuestring);
		if (params && !cJSON_IsNull(params))
			cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(params, 1));
		i++;
	}
	return GH_OK;
}

/* The context entries as one system message's text; NULL when there are
 * none (*rc GH_OK) or they are malformed (*rc set). Caller frees. */
static char *context_text(const cJSON *ctx, enum gh_code *rc, struct gh_err *e)
{
	struct gh_buf b;
	const cJSON *c;
	int i = 0, berr;

	*rc = GH_OK;
	if (!ctx || cJSON_IsNull(ctx) || (cJSON_IsArray(ctx) && !cJSON_GetArraySize(ctx)))
		return NULL;
	if (!cJSON_IsArray(ctx)) {
		*rc = gh_err_set(e, GH_E_BADREQ, "context: expected an array of {description, "
				 "value}");
		return NULL;
	}
	gh_buf_init(&b, CONTEXT_MAX);
	berr = gh_buf_puts(&b, "Context from the application:");
	cJSON_ArrayForEach(c, ctx) {
		const char *d = gh_json_str(c, "description"), *v = gh_json_str(c, "value");

		if (!d || !v) {
			gh_buf_free(&b);
			*rc = gh_err_set(e, GH_E_BADREQ, "context[%d]: expected {description, value} "
					 "strings", i);
			return NULL;
		}
		if (!berr)
			berr = gh_buf_printf(&b, "\n- %s: %s", d, v);
		i++;
	}
	if (berr) {
		gh_buf_free(&b);
		*rc = gh_err_set(e, GH_E_TOOBIG, "context: more than %u bytes", CONTEXT_MAX);
		return NULL;
	}
	return gh_buf_detach(&b);
}

/* messages and tools through the OpenAI wire: CoreMessages (NULL when
 * there are no messages) and client tool definitions. */
static enum gh_code convert(const cJSON *body, struct gh_openai_req *oq, struct gh_err *e)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages"), *m;
	cJSON *chat = cJSON_CreateObject(), *arr, *tools;
	enum gh_code rc;
	int i = 0;

	memset(oq, 0, sizeof(*oq));
	if (!chat)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddStringToObject(chat, "model", "agui");
	arr = cJSON_AddArrayToObject(chat, "messages");
	tools = cJSON_AddArrayToObject(chat, "tools");
	if (!arr || !tools) {
		cJSON_Delete(chat);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_ArrayForEach(m, msgs) {
		int bad;
		cJSON *cm = chat_message(m, &bad);

		if (bad) {
			cJSON_Delete(chat);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].role: expected developer, "
					  "system, user, assistant, tool, reasoning or activity", i);
		}
		if (cm)
			cJSON_AddItemToArray(arr, cm);
		i++;
	}
	if ((rc = chat_tools(cJSON_GetObjectItemCaseSensitive(body, "tools"), tools, e)) != GH_OK) {
		cJSON_Delete(chat);
		return rc;
	}
	if (cJSON_GetArraySize(arr) == 0) {
		/* only the tools: parse them with a stand-in message */
		cJSON *u = cJSON_CreateObject();

		cJSON_AddStringToObject(u, "role", "user");
		cJSON_AddStringToObject(u, "content", "");
		cJSON_AddItemToArray(arr, u);
		rc = gh_openai_parse(chat, oq, e);
		cJSON_Delete(oq->messages);
		oq->messages = NULL;
	} else {
		rc = gh_openai_parse(chat, oq, e);
	}
	cJSON_Delete(chat);
	return rc;
}

/* A string field of the body: 1..GH_NAME_MAX bytes, no control characters
 * (required, or NULL when absent). */
static enum gh_code id_field(const cJSON *body, const char *key, int required, const char **out,
			     struct gh_err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);

	*out = NULL;
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return gh_err_set(e, GH_E_BADREQ, "%s: required (a string)", key);
		return GH_OK;
	}
	if (!cJSON_IsString(v))
		return gh_err_set(e, GH_E_BADREQ, "%s: expected a string", key);
	if (gh_openai_check_id(v->valuestring, key, e) != GH_OK)
		return GH_E_BADREQ;
	*out = v->valuestring;
	return GH_OK;
}

/* One resume entry {interruptId, status, payload?}. */
static enum gh_code resume_entry(const cJSON *r, int i, struct gh_agui_resume *out,
				 struct gh_err *e)
{
	const char *id = gh_json_str(r, "interruptId"), *st = gh_json_str(r, "status");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "payload");
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(p, "approved");
	const cJSON *why = cJSON_GetObjectItemCaseSensitive(p, "reason");
	const cJSON *ed = cJSON_GetObjectItemCaseSensitive(p, "editedArgs");

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(r) || !id || !*id || strlen(id) >= GH_ID_MAX)
		return gh_err_set(e, GH_E_BADREQ, "resume[%d].interruptId: required (the id of the "
				  "interrupt it answers)", i);
	if (!st || (strcmp(st, "resolved") && strcmp(st, "cancelled")))
		return gh_err_set(e, GH_E_BADREQ, "resume[%d].status: expected \"resolved\" or "
				  "\"cancelled\"", i);
	out->interrupt_id = id;
	out->cancelled = !strcmp(st, "cancelled");
	if (p && !cJSON_IsNull(p) && !cJSON_IsObject(p))
		return gh_err_set(e, GH_E_BADREQ, "resume[%d].payload: expected {approved, reason?, "
				  "editedArgs?}", i);
	if (why && !cJSON_IsNull(why) &&
	    (!cJSON_IsString(why) || strlen(why->valuestring) > GH_AGUI_REASON_MAX))
		return gh_err_set(e, GH_E_BADREQ, "resume[%d].payload.reason: expected a string of "
				  "at most %d bytes", i, GH_AGUI_REASON_MAX);
	out->reason = cJSON_IsString(why) ? why->valuestring : NULL;
	if (out->cancelled)
		return GH_OK;
	if (!cJSON_IsBool(ap))
		return gh_err_set(e, GH_E_BADREQ, "resume[%d].payload.approved: required (true or "
				  "false)", i);
	out->approve = cJSON_IsTrue(ap);
	if (ed && !cJSON_IsNull(ed)) {
		if (!cJSON_IsObject(ed))
			return gh_err_set(e, GH_E_BADREQ, "resume[%d].payload.editedArgs: expected an "
					  "object (the tool's arguments)", i);
		if (!out->approve)
			return gh_err_set(e, GH_E_BADREQ, "resume[%d].payload.editedArgs: only an "
					  "approval edits the arguments", i);
		out->edited_args = ed;
	}
	return GH_OK;
}

static enum gh_code parse_resume(const cJSON *body, struct gh_agui_req *q, struct gh_err *e)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(body, "resume"), *r;
	enum gh_code rc;
	size_t j;
	int i = 0;

	if (!res || cJSON_IsNull(res))
		return GH_OK;
	if (!cJSON_IsArray(res))
		return gh_err_set(e, GH_E_BADREQ, "resume: expected an array of {interruptId, status, "
				  "payload}");
	if (cJSON_GetArraySize(res) > GH_AGUI_RESUME_MAX)
		return gh_err_set(e, GH_E_BADREQ, "resume: more than %d entries", GH_AGUI_RESUME_MAX);
	cJSON_ArrayForEach(r, res) {
		if ((rc = resume_entry(r, i, &q->resume[q->nresume], e)) != GH_OK)
			return rc;
		for (j = 0; j < q->nresume; j++)
			if (!strcmp(q->resume[j].interrupt_id, q->resume[q->nresume].interrupt_id))
				return gh_err_set(e, GH_E_BADREQ, "resume[%d]: interrupt %s answered "
						  "twice", i, q->resume[j].interrupt_id);
		q->nresume++;
		i++;
	}
	return GH_OK;
}

/* The conversation for a new turn: earlier tool rounds in words, the
 * context first; history_len counts what the thread already holds. */
static enum gh_code new_turn(struct gh_agui_req *q, cJSON *core, const char *ctx,
			     struct gh_err *e)
{
	cJSON *folded = gh_openai_fold_tool_rounds(core), *m;
	int n = 0, i = 0;

	if (!folded)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(m, folded) {
		const char *role = gh_json_str(m, "role");

		i++;
		if (role && !strcmp(role, "assistant"))
			n = i;
	}
	if (ctx) {
		cJSON *sys = cJSON_CreateObject();

		cJSON_AddStringToObject(sys, "role", "system");
		cJSON_AddStringToObject(sys, "content", ctx);
		cJSON_InsertItemInArray(folded, 0, sys);
		n++;
	}
	q->messages = folded;
	q->history_len = n;
	if (cJSON_GetArraySize(folded) == n) {
		cJSON_Delete(folded);
		q->messages = NULL;
		return gh_err_set(e, GH_E_BADREQ, "messages: nothing new after the last assistant "
				  "message (send the user's message, or tool messages answering "
				  "its calls)");
	}
	return GH_OK;
}

enum gh_code gh_agui_parse(const cJSON *body, struct gh_agui_req *out, struct gh_err *e)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
	struct gh_openai_req oq;
	enum gh_code rc;
	char *ctx = NULL;
	cJSON *trail;

	memset(out, 0, sizeof(*out));
	memset(&oq, 0, sizeof(oq));
	if (!cJSON_IsObject(body))
		return gh_err_set(e, GH_E_BADREQ, "expected a RunAgentInput object");
	if ((rc = id_field(body, "threadId", 1, &out->thread_id, e)) != GH_OK ||
	    (rc = id_field(body, "runId", 1, &out->run_id, e)) != GH_OK ||
	    (rc = id_field(body, "parentRunId", 0, &out->parent_run_id, e)) != GH_OK)
		return rc;
	if (msgs && !cJSON_IsNull(msgs) && !cJSON_IsArray(msgs))
		return gh_err_set(e, GH_E_BADREQ, "messages: expected an array");
	if ((rc = parse_resume(body, out, e)) != GH_OK)
		return rc;
	if (!out->nresume && cJSON_GetArraySize(msgs) == 0)
		return gh_err_set(e, GH_E_BADREQ, "messages: required, a non-empty array (or resume "
				  "entries answering interrupts)");
	ctx = context_text(cJSON_GetObjectItemCaseSensitive(body, "context"), &rc, e);
	if (rc != GH_OK || (rc = convert(body, &oq, e)) != GH_OK)
		goto out;
	out->client_defs = oq.client_defs;
	oq.client_defs = NULL;
	if (out->nresume)
		goto out;
	if (!oq.messages) {
		rc = gh_err_set(e, GH_E_BADREQ, "messages: none the model reads (only reasoning or "
				"activity messages)");
		goto out;
	}
	if ((trail = gh_openai_trailing_results(oq.messages))) {
		out->messages = trail;
		out->continuation = 1;
	} else {
		rc = new_turn(out, oq.messages, ctx, e);
	}
out:
	free(ctx);
	gh_openai_req_free(&oq);
	if (rc != GH_OK)
		gh_agui_req_free(out);
	return rc;
}

void gh_agui_req_free(struct gh_agui_req *q)
{
	cJSON_Delete(q->client_defs);
	cJSON_Delete(q->messages);
	memset(q, 0, sizeof(*q));
}

const char *gh_agui_client_name(const cJSON *client_defs, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, client_defs) {
		const char *n = gh_json_str(d, "name"), *orig = gh_json_str(d, "origName");

		if (n && name && !strcmp(n, name))
			return orig && *orig ? orig : n;
	}
	return name ? name : "";
}

/* -------------------------------------------------------------- answers */

cJSON *gh_agui_event(const char *type, int64_t now_ms)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddNumberToObject(o, "timestamp", (double)now_ms);
	return o;
}

/* What a caller's resume may carry, as a JSON Schema. */
static cJSON *response_schema(void)
{
	cJSON *s = cJSON_CreateObject(), *props, *p;

	cJSON_AddStringToObject(s, "type", "object");
	props = cJSON_AddObjectToObject(s, "properties");
	p = cJSON_AddObjectToObject(props, "approved");
	cJSON_AddStringToObject(p, "type", "boolean");
	p = cJSON_AddObjectToObject(props, "reason");
	cJSON_AddStringToObject(p, "type", "string");
	cJSON_AddNumberToObject(p, "maxLength", GH_AGUI_REASON_MAX);
	p = cJSON_AddObjectToObject(props, "editedArgs");
	cJSON_AddStringToObject(p, "type", "object");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(s, "required"), cJSON_CreateString("approved"));
	return s;
}

cJSON *gh_agui_interrupt(const struct gh_agui_pending *p)
{
	int caller = p->approver && !strcmp(p->approver, "caller");
	cJSON *o = cJSON_CreateObject(), *md;
	char msg[512], when[40];

	if (!o)
		return NULL;
	gh_json_add_str(o, "id", p->approval_id ? p->approval_id : "");
	cJSON_AddStringToObject(o, "reason", caller ? "approval_required"
						    : "admin_approval_pending");
	if (caller)
		snprintf(msg, sizeof(msg), "Approve or deny the call to %s (approval %s).",
			 p->tool_name ? p->tool_name : "?", p->approval_id ? p->approval_id : "");
	else
		snprintf(msg, sizeof(msg), "The call to %s waits for an administrator's decision "
			 "(approval %s); resume this interrupt to wait for it again.",
			 p->tool_name ? p->tool_name : "?", p->approval_id ? p->approval_id : "");
	cJSON_AddStringToObject(o, "message", msg);
	gh_json_add_str(o, "toolCallId", p->tool_call_id ? p->tool_call_id : "");
	if (p->expires_at > 0) {
		gh_iso8601(p->expires_at, when, sizeof(when));
		cJSON_AddStringToObject(o, "expiresAt", when);
	}
	if (caller)
		cJSON_AddItemToObject(o, "responseSchema", response_schema());
	md = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(md, caller ? "kind" : "gatehouseKind",
				caller ? "approval" : "admin_approval");
	gh_json_add_str(md, "toolName", p->tool_name ? p->tool_name : "");
	cJSON_AddItemToObject(md, "input", p->args ? cJSON_Duplicate(p->args, 1)
						   : cJSON_CreateObject());
	gh_json_add_str(md, "approvalId", p->approval_id ? p->approval_id : "");
	gh_json_add_str(md, "argsDigest", p->args_sha256 ? p->args_sha256 : "");
	gh_json_add_str(md, "approver", p->approver ? p->approver : "");
	if (p->rule)
		cJSON_AddStringToObject(md, "rule", p->rule);
	return o;
}
