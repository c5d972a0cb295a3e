/*
 * wire_responses.c - the OpenAI Responses API wire; see wire_responses.h.
 */
#include "wire_responses.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "tools.h"
#include "util.h"
#include "wire_openai.h"

#define MAX_ITEMS 1000
#define TEXT_MAX (16u << 20)        /* text one item carries */

static const char *str_or(const cJSON *o, const char *key, const char *dflt)
{
	const char *v = gh_json_str(o, key);

	return v ? v : dflt;
}

static int absent(const cJSON *v)
{
	return !v || cJSON_IsNull(v);
}

static int is_role(const cJSON *m, const char *role)
{
	const char *r = gh_json_str(m, "role");

	return r && !strcmp(r, role);
}

/* ----------------------------------------------------------------- items */

/* The text of a message's content (a string, or an array of text parts)
 * into *out (caller frees). Images, files and audio are refused: gatehouse
 * passes text only. */
static enum gh_code content_text(const cJSON *content, const char *where, int i, char **out,
				 struct gh_err *e)
{
	struct gh_buf b;
	const cJSON *p;
	int j = 0, full = 0;

	*out = NULL;
	if (cJSON_IsString(content)) {
		*out = gh_strdup(content->valuestring);
		return *out ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (!cJSON_IsArray(content))
		return gh_err_set(e, GH_E_BADREQ, "%s[%d].content: expected a string or an array "
				  "of content parts", where, i);
	gh_buf_init(&b, TEXT_MAX);
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type"), *t = NULL;

		if (!type) {
			gh_buf_free(&b);
			return gh_err_set(e, GH_E_BADREQ, "%s[%d].content[%d]: expected a part "
					  "{\"type\": \"input_text\", \"text\": ...}", where, i, j);
		}
		if (!strcmp(type, "input_text") || !strcmp(type, "output_text") ||
		    !strcmp(type, "text") || !strcmp(type, "summary_text")) {
			t = gh_json_str(p, "text");
		} else if (!strcmp(type, "refusal")) {
			t = gh_json_str(p, "refusal");
		} else if (!strcmp(type, "input_image") || !strcmp(type, "input_file") ||
			   !strcmp(type, "input_audio")) {
			gh_buf_free(&b);
			return gh_err_set(e, GH_E_BADREQ, "%s[%d].content[%d]: \"%s\" parts are "
					  "not supported; gatehouse passes text only", where, i, j,
					  type);
		} else {
			gh_buf_free(&b);
			return gh_err_set(e, GH_E_BADREQ, "%s[%d].content[%d]: unknown part type "
					  "\"%s\"", where, i, j, type);
		}
		if (!t) {
			gh_buf_free(&b);
			return gh_err_set(e, GH_E_BADREQ, "%s[%d].content[%d]: a %s part needs its "
					  "text", where, i, j, type);
		}
		if (b.len && *t)
			full |= gh_buf_putc(&b, '\n') != GH_BUF_OK;
		full |= gh_buf_puts(&b, t) != GH_BUF_OK;
		j++;
	}
	if (full) {
		gh_buf_free(&b);
		return gh_err_set(e, GH_E_TOOBIG, "%s[%d].content: more text than gatehouse "
				  "takes in one item", where, i);
	}
	*out = gh_buf_detach(&b);
	if (!*out)
		*out = gh_strdup("");
	return *out ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
}

static enum gh_code message_item(const cJSON *it, const char *where, int i, cJSON *out,
				 struct gh_err *e)
{
	const char *role = gh_json_str(it, "role");
	cJSON *m;
	char *text = NULL;
	enum gh_code rc;

	if (!role)
		return gh_err_set(e, GH_E_BADREQ, "%s[%d]: a message needs a role", where, i);
	if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
	    strcmp(role, "developer"))
		return gh_err_set(e, GH_E_BADREQ, "%s[%d].role: expected user, assistant, system "
				  "or developer, got \"%s\"", where, i, role);
	if ((rc = content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), where, i, &text,
			       e)) != GH_OK)
		return rc;
	if (!(m = cJSON_CreateObject())) {
		free(text);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_AddStringToObject(m, "role", !strcmp(role, "developer") ? "system" : role);
	cJSON_AddStringToObject(m, "content", text);
	free(text);
	cJSON_AddItemToArray(out, m);
	return GH_OK;
}

/* The assistant message a function_call belongs to: the last message when
 * it is the assistant's (its text becomes a part), else a new one. */
static cJSON *assistant_parts(cJSON *out)
{
	int n = cJSON_GetArraySize(out);
	cJSON *last = n ? cJSON_GetArrayItem(out, n - 1) : NULL, *content, *m;

	if (last && is_role(last, "assistant")) {
		content = cJSON_GetObjectItemCaseSensitive(last, "content");
		if (cJSON_IsArray(content))
			return content;
		if (cJSON_IsString(content)) {
			cJSON *parts = cJSON_CreateArray(), *tp = cJSON_CreateObject();

			if (!parts || !tp) {
				cJSON_Delete(parts);
				cJSON_Delete(tp);
				return NULL;
			}
			cJSON_AddItemToArray(parts, tp);
			cJSON_AddStringToObject(tp, "type", "text");
			cJSON_AddStringToObject(tp, "text", content->valuestring);
			cJSON_ReplaceItemInObjectCaseSensitive(last, "content", parts);
			return parts;
		}
	}
	if (!(m = cJSON_CreateObject()))
		return NULL;
	cJSON_AddItemToArray(out, m);
	cJSON_AddStringToObject(m, "role", "assistant");
	return cJSON_AddArrayToObject(m, "content");
}

static enum gh_code call_item(const cJSON *it, const char *where, int i, cJSON *out,
			      struct gh_err *e)
{
	const char *id = gh_json_str(it, "call_id"), *name = gh_json_str(it, "name");
	const char *args = gh_json_str(it, "arguments");
	char norm[GH_TOOL_NAME_MAX];
	cJSON *parsed = NULL, *parts, *part;
	struct gh_err pe;

	if (!id || !*id || !name || !*name ||
	    (cJSON_GetObjectItemCaseSensitive(it, "arguments") && !args))
		return gh_err_set(e, GH_E_BADREQ, "%s[%d]: a function_call needs call_id, name "
				  "and arguments (a JSON string)", where, i);
	if (!args || !*args)
		parsed = cJSON_CreateObject();
	else if (gh_json_parse(args, strlen(args), "arguments", &parsed, &pe) != GH_OK)
		return gh_err_set(e, GH_E_BADREQ, "%s[%d].arguments: not valid JSON (%s)", where, i,
				  pe.msg);
	if (!parsed || !(parts = assistant_parts(out)) || !(part = cJSON_CreateObject())) {
		cJSON_Delete(parsed);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	gh_tool_normalize(name, norm);
	cJSON_AddItemToArray(parts, part);
	cJSON_AddStringToObject(part, "type", "tool-call");
	cJSON_AddStringToObject(part, "toolCallId", id);
	cJSON_AddStringToObject(part, "toolName", norm);
	cJSON_AddItemToObject(part, "args", parsed);
	return GH_OK;
}

static enum gh_code output_item(const cJSON *it, const char *where, int i, cJSON *out,
				struct gh_err *e)
{
	const char *id = gh_json_str(it, "call_id");
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, "output");
	cJSON *m;
	char *t = NULL;
	enum gh_code rc;

	if (!id || !*id)
		return gh_err_set(e, GH_E_BADREQ, "%s[%d].call_id: required (the call_id of the "
				  "function_call this output answers)", where, i);
	if (!o)
		return gh_err_set(e, GH_E_BADREQ, "%s[%d].output: required, a string or an array "
				  "of content parts", where, i);
	if ((rc = content_text(o, where, i, &t, e)) != GH_OK)
		return rc;
	if (!(m = cJSON_CreateObject()))
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
	else if ((rc = gh_openai_tool_result(m, id, t, e)) != GH_OK)
		cJSON_Delete(m);
	else
		cJSON_AddItemToArray(out, m);
	free(t);
	return rc;
}

enum gh_code gh_responses_items(const cJSON *items, const char *where, cJSON *out,
				struct gh_err *e)
{
	const cJSON *it;
	enum gh_code rc = GH_OK;
	int i = 0;

	if (!cJSON_IsArray(items))
		return gh_err_set(e, GH_E_BADREQ, "%s: expected a string or an array of items",
				  where);
	if (cJSON_GetArraySize(items) > MAX_ITEMS)
		return gh_err_set(e, GH_E_BADREQ, "%s: more than %d items", where, MAX_ITEMS);
	cJSON_ArrayForEach(it, items) {
		const char *type = gh_json_str(it, "type");

		if (!cJSON_IsObject(it))
			rc = gh_err_set(e, GH_E_BADREQ, "%s[%d]: expected an item object", where, i);
		else if (!type || !strcmp(type, "message"))
			rc = message_item(it, where, i, out, e);
		else if (!strcmp(type, "function_call"))
			rc = call_item(it, where, i, out, e);
		else if (!strcmp(type, "function_call_output"))
			rc = output_item(it, where, i, out, e);
		else if (!strcmp(type, "reasoning") || !strcmp(type, "mcp_approval_request"))
			; /* read, not passed on: no provider here carries them */
		else if (!strcmp(type, "mcp_approval_response")) {
			/* a decision: acted on by the surface when it ends the input */
			if (!gh_json_str(it, "approval_request_id") ||
			    !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(it, "approve")))
				rc = gh_err_set(e, GH_E_BADREQ, "%s[%d]: an mcp_approval_response "
						"needs approval_request_id and approve (true or false)",
						where, i);
		}
		else
			rc = gh_err_set(e, GH_E_BADREQ, "%s[%d].type: \"%s\" items are not "
					"supported (message, function_call, "
					"function_call_output, reasoning and "
					"mcp_approval_response are)", where, i, type);
		if (rc != GH_OK)
			return rc;
		i++;
	}
	return GH_OK;
}

/* -------------------------------------------------------------- request */

/* The function tools in the chat completions shape gh_tools_client_defs
 * reads; other types are named in q->skipped. */
static enum gh_code function_tools(const cJSON *tools, struct gh_responses_req *q,
				   struct gh_err *e)
{
	struct gh_buf sk;
	cJSON *conv;
	const cJSON *t;
	enum gh_code rc;
	int i = 0;

	if (absent(tools))
		return gh_tools_client_defs(NULL, NULL, "tools", &q->client_defs, e);
	if (!cJSON_IsArray(tools))
		return gh_err_set(e, GH_E_BADREQ, "tools: expected an array of tools");
	if (!(conv = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	gh_buf_init(&sk, sizeof(q->skipped) - 1);
	cJSON_ArrayForEach(t, tools) {
		const char *type = gh_json_str(t, "type");
		cJSON *c, *fn;

		if (!cJSON_IsObject(t) || !type) {
			gh_buf_free(&sk);
			cJSON_Delete(conv);
			return gh_err_set(e, GH_E_BADREQ, "tools[%d]: expected {\"type\": "
					  "\"function\", name, parameters}", i);
		}
		i++;
		if (strcmp(type, "function")) {
			if (sk.len)
				gh_buf_putc(&sk, ',');
			gh_buf_puts(&sk, type);
			continue;
		}
		c = cJSON_CreateObject();
		cJSON_AddItemToArray(conv, c);
		cJSON_AddStringToObject(c, "type", "function");
		fn = cJSON_AddObjectToObject(c, "function");
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "name")))
			cJSON_AddStringToObject(fn, "name", gh_json_str(t, "name"));
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "description")))
			cJSON_AddStringToObject(fn, "description", gh_json_str(t, "description"));
		if (!absent(cJSON_GetObjectItemCaseSensitive(t, "parameters")))
			cJSON_AddItemToObject(fn, "parameters",
					      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
								      t, "parameters"), 1));
	}
	gh_strlcpy(q->skipped, sk.data ? sk.data : "", sizeof(q->skipped));
	gh_buf_free(&sk);
	rc = gh_tools_client_defs(NULL, conv, "tools", &q->client_defs, e);
	cJSON_Delete(conv);
	return rc;
}

enum gh_code gh_responses_parse(const cJSON *body, struct gh_responses_req *out,
				struct gh_err *e)
{
	const cJSON *v, *last;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	out->store = 1;
	if ((rc = gh_openai_model_stream(body, &out->model, &out->stream, e)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(body, "store");
	if (!absent(v) && !cJSON_IsBool(v))
		return gh_err_set(e, GH_E_BADREQ, "store: expected true or false");
	if (cJSON_IsFalse(v))
		out->store = 0;
	v = cJSON_GetObjectItemCaseSensitive(body, "background");
	if (cJSON_IsTrue(v))
		return gh_err_set(e, GH_E_BADREQ, "background: gatehouse answers in the "
				  "foreground; expected false");
	if (!absent(cJSON_GetObjectItemCaseSensitive(body, "conversation")))
		return gh_err_set(e, GH_E_BADREQ, "conversation: not supported; continue a "
				  "conversation with previous_response_id");
	v = cJSON_GetObjectItemCaseSensitive(body, "previous_response_id");
	if (!absent(v)) {
		if (!cJSON_IsString(v) || !*v->valuestring ||
		    strlen(v->valuestring) >= GH_ID_MAX)
			return gh_err_set(e, GH_E_BADREQ, "previous_response_id: expected the id "
					  "of a response");
		out->previous_id = v->valuestring;
	}
	v = cJSON_GetObjectItemCaseSensitive(body, "instructions");
	if (!absent(v)) {
		if (!cJSON_IsString(v))
			return gh_err_set(e, GH_E_BADREQ, "instructions: expected a string");
		out->instructions = v->valuestring;
	}
	v = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	if (!absent(v)) {
		if (!cJSON_IsObject(v))
			return gh_err_set(e, GH_E_BADREQ, "metadata: expected an object");
		out->metadata = v;
	}
	v = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
	if (!absent(v)) {
		if (!cJSON_IsString(v) && !cJSON_IsObject(v))
			return gh_err_set(e, GH_E_BADREQ, "tool_choice: expected \"none\", "
					  "\"auto\", \"required\" or an object");
		out->tool_choice = v;
	}
	out->tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
	if (cJSON_IsNull(out->tools))
		out->tools = NULL;
	if ((rc = function_tools(out->tools, out, e)) != GH_OK)
		return rc;
	if (cJSON_IsString(out->tool_choice) && !strcmp(out->tool_choice->valuestring, "none")) {
		cJSON_Delete(out->client_defs);
		if (!(out->client_defs = cJSON_CreateArray()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (!(out->input = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	v = cJSON_GetObjectItemCaseSensitive(body, "input");
	if (cJSON_IsString(v)) {
		cJSON *m = cJSON_CreateObject();

		if (!m)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		cJSON_AddItemToArray(out->input, m);
		cJSON_AddStringToObject(m, "role", "user");
		cJSON_AddStringToObject(m, "content", v->valuestring);
		return GH_OK;
	}
	if (absent(v))
		return gh_err_set(e, GH_E_BADREQ, "input: required, a string or an array of items");
	if ((rc = gh_responses_items(v, "input", out->input, e)) != GH_OK)
		return rc;
	last = cJSON_GetArrayItem(v, cJSON_GetArraySize(v) - 1);
	if (!strcmp(str_or(last, "type", ""), "mcp_approval_response")) {
		out->approval_id = gh_json_str(last, "approval_request_id");
		out->approve = gh_json_bool(last, "approve", 0);
		out->approval_reason = gh_json_str(last, "reason");
		return GH_OK;
	}
	if (cJSON_GetArraySize(out->input) == 0 && !out->previous_id)
		return gh_err_set(e, GH_E_BADREQ, "input: holds no message or function call "
				  "output");
	return GH_OK;
}

void gh_responses_req_free(struct gh_responses_req *q)
{
	cJSON_Delete(q->client_defs);
	cJSON_Delete(q->input);
	memset(q, 0, sizeof(*q));
}

enum gh_code gh_responses_conversation(const cJSON *prev, const cJSON *input,
				       const char *instructions, cJSON **all, cJSON **out,
				       int *continuation, struct gh_err *e)
{
	cJSON *conv = prev ? cJSON_Duplicate(prev, 1) : cJSON_CreateArray(), *msgs, *folded;
	const cJSON *m;

	*out = NULL;
	*all = NULL;
	*continuation = 0;
	if (!conv)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(m, input)
		cJSON_AddItemToArray(conv, cJSON_Duplicate(m, 1));
	if (cJSON_GetArraySize(conv) > MAX_ITEMS) {
		cJSON_Delete(conv);
		return gh_err_set(e, GH_E_BADREQ, "input: the conversation holds more than %d "
				  "messages", MAX_ITEMS);
	}
	/* results at the end answer the run that waits for them */
	if ((msgs = gh_openai_trailing_results(conv))) {
		*continuation = 1;
		*out = msgs;
		*all = conv;
		return GH_OK;
	}
	if (!(folded = gh_openai_fold_tool_rounds(conv)) || !(msgs = cJSON_CreateArray())) {
		cJSON_Delete(folded);
		cJSON_Delete(conv);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (instructions && *instructions) {
		cJSON *sys = cJSON_CreateObject();

		cJSON_AddItemToArray(msgs, sys);
		cJSON_AddStringToObject(sys, "role", "system");
		cJSON_AddStringToObject(sys, "content", instructions);
	}
	while (cJSON_GetArraySize(folded) > 0)
		cJSON_AddItemToArray(msgs, cJSON_DetachItemFromArray(folded, 0));
	cJSON_Delete(folded);
	*out = msgs;
	*all = conv;
	return GH_OK;
}

/* ---------------------------------------------------------------- answers */

/* {type, text}; NULL on OOM. */
static cJSON *text_of_type(const char *type, const char *text)
{
	cJSON *p = cJSON_CreateObject();

	if (!p)
		return NULL;
	cJSON_AddStringToObject(p, "type", type);
	cJSON_AddStringToObject(p, "text", text ? text : "");
	return p;
}

/* An output item's {id, type, status}; NULL on OOM. */
static cJSON *item_of_type(const char *id, const char *type, int done)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddStringToObject(o, "status", done ? "completed" : "in_progress");
	return o;
}

cJSON *gh_responses_text_part(const char *text)
{
	cJSON *p = text_of_type("output_text", text);

	if (!p)
		return NULL;
	cJSON_AddArrayToObject(p, "annotations");
	cJSON_AddArrayToObject(p, "logprobs");
	return p;
}

cJSON *gh_responses_message_item(const char *id, const char *text, int done)
{
	cJSON *o = item_of_type(id, "message", done), *c;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "role", "assistant");
	c = cJSON_AddArrayToObject(o, "content");
	if (done && c)
		cJSON_AddItemToArray(c, gh_responses_text_part(text));
	return o;
}

cJSON *gh_responses_summary_part(const char *text)
{
	return text_of_type("summary_text", text);
}

cJSON *gh_responses_reasoning_item(const char *id, const char *text, int done)
{
	cJSON *o = item_of_type(id, "reasoning", done), *sum;

	if (!o)
		return NULL;
	sum = cJSON_AddArrayToObject(o, "summary");
	if (done && sum)
		cJSON_AddItemToArray(sum, gh_responses_summary_part(text));
	return o;
}

char *gh_responses_call_args(const cJSON *call)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(call, "args");
	char *s = a && !cJSON_IsNull(a) ? gh_json_dump(a) : NULL;

	return s ? s : gh_strdup("{}");
}

cJSON *gh_responses_call_item(const char *id, const cJSON *call, const cJSON *client_defs,
			      int done)
{
	cJSON *o = item_of_type(id, "function_call", done);
	char *args = done ? gh_responses_call_args(call) : NULL;

	if (!o || (done && !args)) {
		cJSON_Delete(o);
		free(args);
		return NULL;
	}
	cJSON_AddStringToObject(o, "arguments", args ? args : "");
	cJSON_AddStringToObject(o, "call_id", str_or(call, "toolCallId", ""));
	cJSON_AddStringToObject(o, "name",
				gh_openai_client_name(client_defs, str_or(call, "toolName", "")));
	free(args);
	return o;
}

cJSON *gh_responses_approval_item(const char *id, const char *name, const cJSON *args)
{
	cJSON *o = cJSON_CreateObject();
	char *a = args && !cJSON_IsNull(args) ? gh_json_dump(args) : NULL;

	if (!o) {
		free(a);
		return NULL;
	}
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "type", "mcp_approval_request");
	cJSON_AddStringToObject(o, "server_label", "gatehouse");
	cJSON_AddStringToObject(o, "name", name ? name : "");
	cJSON_AddStringToObject(o, "arguments", a ? a : "{}");
	free(a);
	return o;
}

cJSON *gh_responses_usage(const struct gh_run_usage *u)
{
	cJSON *o = cJSON_CreateObject(), *d;

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "input_tokens", (double)u->input_tokens);
	d = cJSON_AddObjectToObject(o, "input_tokens_details");
	cJSON_AddNumberToObject(d, "cached_tokens", 0);
	cJSON_AddNumberToObject(o, "output_tokens", (double)u->output_tokens);
	d = cJSON_AddObjectToObject(o, "output_tokens_details");
	cJSON_AddNumberToObject(d, "reasoning_tokens", 0);
	cJSON_AddNumberToObject(o, "total_tokens", (double)(u->input_tokens + u->output_tokens));
	return o;
}

static void add_copy_or_null(cJSON *o, const char *key, const cJSON *v)
{
	if (v)
		cJSON_AddItemToObject(o, key, cJSON_Duplicate(v, 1));
	else
		cJSON_AddNullToObject(o, key);
}

cJSON *gh_responses_object(const char *id, int64_t created_at, const char *model,
			   const struct gh_responses_req *q, const char *status, cJSON *output,
			   const struct gh_run_usage *usage, const char *incomplete,
			   cJSON *error)
{
	cJSON *o = cJSON_CreateObject(), *x;

	if (!o) {
		cJSON_Delete(output);
		cJSON_Delete(error);
		return NULL;
	}
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "object", "response");
	cJSON_AddNumberToObject(o, "created_at", (double)created_at);
	cJSON_AddStringToObject(o, "status", status);
	cJSON_AddBoolToObject(o, "background", 0);
	if (error)
		cJSON_AddItemToObject(o, "error", error);
	else
		cJSON_AddNullToObject(o, "error");
	if (incomplete) {
		x = cJSON_AddObjectToObject(o, "incomplete_details");
		cJSON_AddStringToObject(x, "reason", incomplete);
	} else {
		cJSON_AddNullToObject(o, "incomplete_details");
	}
	gh_json_add_str(o, "instructions", q->instructions);
	cJSON_AddNullToObject(o, "max_output_tokens");
	cJSON_AddStringToObject(o, "model", model);
	cJSON_AddItemToObject(o, "output", output ? output : cJSON_CreateArray());
	cJSON_AddBoolToObject(o, "parallel_tool_calls", 1);
	gh_json_add_str(o, "previous_response_id", q->previous_id);
	x = cJSON_AddObjectToObject(o, "reasoning");
	cJSON_AddNullToObject(x, "effort");
	cJSON_AddNullToObject(x, "summary");
	cJSON_AddBoolToObject(o, "store", q->store);
	cJSON_AddNullToObject(o, "temperature");
	x = cJSON_AddObjectToObject(o, "text");
	x = cJSON_AddObjectToObject(x, "format");
	cJSON_AddStringToObject(x, "type", "text");
	if (q->tool_choice)
		cJSON_AddItemToObject(o, "tool_choice", cJSON_Duplicate(q->tool_choice, 1));
	else
		cJSON_AddStringToObject(o, "tool_choice", "auto");
	if (q->tools)
		cJSON_AddItemToObject(o, "tools", cJSON_Duplicate(q->tools, 1));
	else
		cJSON_AddArrayToObject(o, "tools");
	cJSON_AddNullToObject(o, "top_p");
	cJSON_AddStringToObject(o, "truncation", "disabled");
	if (usage)
		cJSON_AddItemToObject(o, "usage", gh_responses_usage(usage));
	else
		cJSON_AddNullToObject(o, "usage");
	cJSON_AddNullToObject(o, "user");
	if (q->metadata)
		add_copy_or_null(o, "metadata", q->metadata);
	else
		cJSON_AddObjectToObject(o, "metadata");
	return o;
}
