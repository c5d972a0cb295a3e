/*
 * wire_openai.c - the OpenAI chat completions wire; see wire_openai.h.
 */
#include "wire_openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "buf.h"
#include "json.h"
#include "tools.h"

#define MAX_MESSAGES 1000
#define TEXT_MAX (16u << 20)        /* assistant text one response carries */

/* A string member, or dflt when absent. */
static const char *str_or(const cJSON *o, const char *key, const char *dflt)
{
	const char *v = gh_json_str(o, key);

	return v ? v : dflt;
}

/* -------------------------------------------------------------- messages */

/* Text parts of OpenAI content (a string, null, or an array of parts) as
 * CoreMessage text parts. Images, audio and files are refused: gatehouse
 * passes text only. *out: caller frees. */
static enum gh_code text_parts(const cJSON *content, int i, int assistant, cJSON **out,
			       struct gh_err *e)
{
	const cJSON *p;
	cJSON *arr = cJSON_CreateArray();
	int j = 0;

	*out = NULL;
	if (!arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (cJSON_IsString(content)) {
		cJSON *tp = cJSON_CreateObject();

		cJSON_AddItemToArray(arr, tp);
		cJSON_AddStringToObject(tp, "type", "text");
		cJSON_AddStringToObject(tp, "text", content->valuestring);
		*out = arr;
		return GH_OK;
	}
	if (content && !cJSON_IsNull(content) && !cJSON_IsArray(content)) {
		cJSON_Delete(arr);
		return gh_err_set(e, GH_E_BADREQ, "messages[%d].content: expected a string or an "
				  "array of content parts", i);
	}
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type"), *t = NULL;
		cJSON *tp;

		if (!type) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].content[%d]: expected "
					  "a part {\"type\": \"text\", \"text\": ...}", i, j);
		}
		if (!strcmp(type, "text")) {
			t = gh_json_str(p, "text");
		} else if (assistant && !strcmp(type, "refusal")) {
			t = gh_json_str(p, "refusal");
		} else if (!strcmp(type, "image_url") || !strcmp(type, "input_audio") ||
			   !strcmp(type, "file")) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].content[%d]: \"%s\" "
					  "parts are not supported; gatehouse passes text only",
					  i, j, type);
		} else {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].content[%d]: unknown part "
					  "type \"%s\"", i, j, type);
		}
		if (!t) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].content[%d]: a %s part "
					  "needs its \"%s\" string", i, j, type, type);
		}
		tp = cJSON_CreateObject();
		cJSON_AddItemToArray(arr, tp);
		cJSON_AddStringToObject(tp, "type", "text");
		cJSON_AddStringToObject(tp, "text", t);
		j++;
	}
	*out = arr;
	return GH_OK;
}

/* The texts of CoreMessage text parts joined by newlines. Caller frees. */
static char *join_text(const cJSON *parts)
{
	struct gh_buf b;
	const cJSON *p;
	int n = 0;

	gh_buf_init(&b, TEXT_MAX);
	cJSON_ArrayForEach(p, parts) {
		const char *t = gh_json_str(p, "text");

		if (!t || strcmp(str_or(p, "type", ""), "text"))
			continue;
		if (n++)
			gh_buf_putc(&b, '\n');
		gh_buf_puts(&b, t);
	}
	return gh_buf_detach(&b);
}

/* An assistant message: text, then one tool-call part per tool_calls entry
 * (arguments parsed; a name as the model knows it, normalised). */
static enum gh_code assistant_msg(const cJSON *m, int i, cJSON *out, struct gh_err *e)
{
	const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), *tc;
	cJSON *parts = NULL;
	enum gh_code rc;
	int j = 0;

	if (cJSON_GetObjectItemCaseSensitive(m, "function_call"))
		return gh_err_set(e, GH_E_BADREQ, "messages[%d].function_call: the legacy function "
				  "call form is not supported; use tool_calls", i);
	if ((rc = text_parts(cJSON_GetObjectItemCaseSensitive(m, "content"), i, 1, &parts, e)) !=
	    GH_OK)
		return rc;
	if (calls && !cJSON_IsNull(calls) && !cJSON_IsArray(calls)) {
		cJSON_Delete(parts);
		return gh_err_set(e, GH_E_BADREQ, "messages[%d].tool_calls: expected an array", i);
	}
	cJSON_ArrayForEach(tc, calls) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
		const char *id = gh_json_str(tc, "id"), *name = gh_json_str(fn, "name");
		const char *args = gh_json_str(fn, "arguments");
		char norm[GH_TOOL_NAME_MAX];
		cJSON *parsed = NULL, *part;
		struct gh_err pe;

		if (!id || !*id || !name || !*name ||
		    (cJSON_GetObjectItemCaseSensitive(fn, "arguments") && !args)) {
			cJSON_Delete(parts);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].tool_calls[%d]: expected "
					  "{id, type: \"function\", function: {name, arguments: a "
					  "JSON string}}", i, j);
		}
		if (!args || !*args)
			parsed = cJSON_CreateObject();
		else if (gh_json_parse(args, strlen(args), "arguments", &parsed, &pe) != GH_OK) {
			cJSON_Delete(parts);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].tool_calls[%d].function."
					  "arguments: not valid JSON (%s)", i, j, pe.msg);
		}
		gh_tool_normalize(name, norm);
		part = cJSON_CreateObject();
		cJSON_AddItemToArray(parts, part);
		cJSON_AddStringToObject(part, "type", "tool-call");
		cJSON_AddStringToObject(part, "toolCallId", id);
		cJSON_AddStringToObject(part, "toolName", norm);
		cJSON_AddItemToObject(part, "args", parsed);
		j++;
	}
	cJSON_AddStringToObject(out, "role", "assistant");
	if (j == 0) {
		char *t = join_text(parts);

		cJSON_Delete(parts);
		if (!t)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		cJSON_AddStringToObject(out, "content", t);
		free(t);
	} else {
		cJSON_AddItemToObject(out, "content", parts);
	}
	return GH_OK;
}

enum gh_code gh_openai_tool_result(cJSON *msg, const char *id, const char *text,
				   struct gh_err *e)
{
	cJSON *content, *part, *result = NULL;
	struct gh_err ignore;

	if (!*text || gh_json_parse(text, strlen(text), "tool result", &result, &ignore) != GH_OK)
		result = cJSON_CreateString(text);
	if (!result || !cJSON_AddStringToObject(msg, "role", "tool") ||
	    !(content = cJSON_AddArrayToObject(msg, "content")) || !(part = cJSON_CreateObject())) {
		cJSON_Delete(result);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_AddItemToArray(content, part);
	cJSON_AddStringToObject(part, "type", "tool-result");
	cJSON_AddStringToObject(part, "toolCallId", id);
	cJSON_AddItemToObject(part, "result", result);
	return GH_OK;
}

/* A tool message: its content is the result, as JSON when it parses. */
static enum gh_code tool_msg(const cJSON *m, int i, cJSON *out, struct gh_err *e)
{
	const char *id = gh_json_str(m, "tool_call_id");
	cJSON *parts = NULL;
	enum gh_code rc;
	char *t;

	if (!id || !*id)
		return gh_err_set(e, GH_E_BADREQ, "messages[%d].tool_call_id: required (the id of "
				  "the tool call this message answers)", i);
	if ((rc = text_parts(cJSON_GetObjectItemCaseSensitive(m, "content"), i, 0, &parts, e)) !=
	    GH_OK)
		return rc;
	t = join_text(parts);
	cJSON_Delete(parts);
	if (!t)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = gh_openai_tool_result(out, id, t, e);
	free(t);
	return rc;
}

/* OpenAI messages -> CoreMessages, one for one. *out: caller frees. */
static enum gh_code convert_messages(const cJSON *in, cJSON **out, struct gh_err *e)
{
	cJSON *arr;
	const cJSON *m;
	enum gh_code rc = GH_OK;
	int i = 0;

	*out = NULL;
	if (!cJSON_IsArray(in) || cJSON_GetArraySize(in) == 0)
		return gh_err_set(e, GH_E_BADREQ, "messages: required, a non-empty array");
	if (cJSON_GetArraySize(in) > MAX_MESSAGES)
		return gh_err_set(e, GH_E_BADREQ, "messages: more than %d", MAX_MESSAGES);
	if (!(arr = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(m, in) {
		const char *role = gh_json_str(m, "role");
		cJSON *nm = cJSON_CreateObject(), *parts = NULL;

		if (!nm) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			break;
		}
		cJSON_AddItemToArray(arr, nm);
		if (!role) {
			rc = gh_err_set(e, GH_E_BADREQ, "messages[%d]: expected {role, content}",
					i);
		} else if (!strcmp(role, "system") || !strcmp(role, "developer")) {
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");

			rc = text_parts(c, i, 0, &parts, e);
			if (rc == GH_OK) {
				char *t = join_text(parts);

				cJSON_AddStringToObject(nm, "role", "system");
				cJSON_AddStringToObject(nm, "content", t ? t : "");
				free(t);
			}
			cJSON_Delete(parts);
		} else if (!strcmp(role, "user")) {
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");

			rc = text_parts(c, i, 0, &parts, e);
			cJSON_AddStringToObject(nm, "role", "user");
			if (rc == GH_OK && cJSON_IsString(c)) {
				cJSON_AddStringToObject(nm, "content", c->valuestring);
				cJSON_Delete(parts);
			} else if (rc == GH_OK) {
				cJSON_AddItemToObject(nm, "content", parts);
			}
		} else if (!strcmp(role, "assistant")) {
			rc = assistant_msg(m, i, nm, e);
		} else if (!strcmp(role, "tool")) {
			rc = tool_msg(m, i, nm, e);
		} else {
			rc = gh_err_set(e, GH_E_BADREQ, "messages[%d].role: expected system, "
					"developer, user, assistant or tool, got \"%s\"", i, role);
		}
		if (rc != GH_OK)
			break;
		i++;
	}
	if (rc != GH_OK) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return GH_OK;
}

static int is_role(const cJSON *m, const char *role)
{
	const char *r = gh_json_str(m, "role");

	return r && !strcmp(r, role);
}

static int has_tool_calls(const cJSON *m)
{
	const cJSON *p;

	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content"))
		if (!strcmp(str_or(p, "type", ""), "tool-call"))
			return 1;
	return 0;
}

/* The result a later tool message gives for call id, or NULL. */
static const cJSON *find_result(const cJSON *from, const char *id)
{
	const cJSON *m, *p;

	for (m = from; m; m = m->next) {
		if (!is_role(m, "tool"))
			continue;
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content"))
			if (!strcmp(str_or(p, "toolCallId", ""), id))
				return cJSON_GetObjectItemCaseSensitive(p, "result");
	}
	return NULL;
}

/* Tool results in a request are answers to a waiting run (the engine
 * matches them by id), so a resent history that the run has to take whole
 * (stateless, or a new thread) cannot carry them as tool messages. */
cJSON *gh_openai_fold_tool_rounds(const cJSON *msgs)
{
	cJSON *out = cJSON_CreateArray(), *last = NULL;
	const cJSON *m;

	if (!out)
		return NULL;
	cJSON_ArrayForEach(m, msgs) {
		cJSON *nm;

		if (is_role(m, "tool"))
			continue;
		if (is_role(m, "assistant") && has_tool_calls(m)) {
			const cJSON *p;
			struct gh_buf b;
			char *t;

			gh_buf_init(&b, TEXT_MAX);
			cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content")) {
				const char *type = gh_json_str(p, "type");
				char *args, *res = NULL;
				const cJSON *rv;

				if (type && !strcmp(type, "text")) {
					if (b.len)
						gh_buf_putc(&b, '\n');
					gh_buf_puts(&b, str_or(p, "text", ""));
					continue;
				}
				args = gh_json_dump(cJSON_GetObjectItemCaseSensitive(p, "args"));
				rv = find_result(m->next, gh_json_str(p, "toolCallId"));
				if (rv)
					res = gh_json_dump(rv);
				if (b.len)
					gh_buf_putc(&b, '\n');
				gh_buf_printf(&b, "[called %s(%s) -> %s]",
					      str_or(p, "toolName", "?"), args ? args : "{}",
					      res ? res : "no result");
				free(args);
				free(res);
			}
			t = gh_buf_detach(&b);
			nm = cJSON_CreateObject();
			cJSON_AddStringToObject(nm, "role", "assistant");
			cJSON_AddStringToObject(nm, "content", t ? t : "");
			free(t);
		} else {
			nm = cJSON_Duplicate(m, 1);
		}
		if (!nm)
			continue;
		if (last && is_role(nm, "assistant") && is_role(last, "assistant") &&
		    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(nm, "content")) &&
		    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(last, "content"))) {
			const char *a = gh_json_str(last, "content");
			const char *c = gh_json_str(nm, "content");
			struct gh_buf b;
			char *t;

			gh_buf_init(&b, TEXT_MAX);
			gh_buf_puts(&b, a);
			if (*a && *c)
				gh_buf_puts(&b, "\n\n");
			gh_buf_puts(&b, c);
			t = gh_buf_detach(&b);
			if (t)
				cJSON_ReplaceItemInObjectCaseSensitive(last, "content",
								       cJSON_CreateString(t));
			free(t);
			cJSON_Delete(nm);
			continue;
		}
		cJSON_AddItemToArray(out, nm);
		last = nm;
	}
	return out;
}

/* --------------------------------------------------------------- request */

enum gh_code gh_openai_check_id(const char *v, const char *field, struct gh_err *e)
{
	const unsigned char *p;

	if (!*v || strlen(v) > GH_NAME_MAX)
		return gh_err_set(e, GH_E_BADREQ, "%s: expected 1..%d characters", field,
				  GH_NAME_MAX);
	for (p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return gh_err_set(e, GH_E_BADREQ, "%s: control characters are not allowed",
					  field);
	return GH_OK;
}

void gh_openai_user_thread(const char *owner, const char *agent, const char *user,
			   char out[GH_ID_MAX])
{
	unsigned char h[12];
	crypto_generichash_state hs;

	crypto_generichash_init(&hs, NULL, 0, sizeof(h));
	crypto_generichash_update(&hs, (const unsigned char *)owner, strlen(owner) + 1);
	crypto_generichash_update(&hs, (const unsigned char *)agent, strlen(agent) + 1);
	crypto_generichash_update(&hs, (const unsigned char *)user, strlen(user));
	crypto_generichash_final(&hs, h, sizeof(h));
	memcpy(out, "usr_", 4);
	gh_hex(h, sizeof(h), out + 4);
}

cJSON *gh_openai_trailing_results(const cJSON *all)
{
	int n = cJSON_GetArraySize(all), from, i;
	cJSON *out;

	for (from = n; from > 0 && is_role(cJSON_GetArrayItem(all, from - 1), "tool"); from--)
		;
	if (from == n || !(out = cJSON_CreateArray()))
		return NULL;
	for (i = from; i < n; i++)
		cJSON_AddItemToArray(out, cJSON_Duplicate(cJSON_GetArrayItem(all, i), 1));
	return out;
}

cJSON *gh_openai_after_answer(const cJSON *all)
{
	int n = cJSON_GetArraySize(all), from, i;
	cJSON *out = cJSON_CreateArray();

	if (!out)
		return NULL;
	for (from = n; from > 0 && !is_role(cJSON_GetArrayItem(all, from - 1), "assistant"); from--)
		;
	for (i = from; i < n; i++) {
		const cJSON *m = cJSON_GetArrayItem(all, i);

		if (!is_role(m, "tool"))
			cJSON_AddItemToArray(out, cJSON_Duplicate(m, 1));
	}
	return out;
}

/* A field that is absent or null, or else of the expected kind. */
static int absent(const cJSON *v)
{
	return !v || cJSON_IsNull(v);
}

enum gh_code gh_openai_model_stream(const cJSON *body, const char **model, int *stream,
				    struct gh_err *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "model");

	if (!cJSON_IsString(v) || !*v->valuestring)
		return gh_err_set(e, GH_E_BADREQ, "model: required, the id of an agent (GET "
				  "/v1/models lists them)");
	*model = v->valuestring;
	v = cJSON_GetObjectItemCaseSensitive(body, "stream");
	if (!absent(v) && !cJSON_IsBool(v))
		return gh_err_set(e, GH_E_BADREQ, "stream: expected true or false");
	*stream = cJSON_IsTrue(v);
	return GH_OK;
}

enum gh_code gh_openai_parse(const cJSON *body, struct gh_openai_req *out, struct gh_err *e)
{
	const cJSON *v, *tc;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	if ((rc = gh_openai_model_stream(body, &out->model, &out->stream, e)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(body, "stream_options");
	if (!absent(v) && !cJSON_IsObject(v))
		return gh_err_set(e, GH_E_BADREQ, "stream_options: expected an object");
	out->include_usage = gh_json_bool(v, "include_usage", 0);
	v = cJSON_GetObjectItemCaseSensitive(body, "n");
	if (!absent(v) && !(gh_json_is_int(v) && v->valuedouble == 1))
		return gh_err_set(e, GH_E_BADREQ, "n: gatehouse answers with one choice; "
				  "expected 1");
	v = cJSON_GetObjectItemCaseSensitive(body, "user");
	if (!absent(v)) {
		if (!cJSON_IsString(v))
			return gh_err_set(e, GH_E_BADREQ, "user: expected a string");
		out->user = v->valuestring;
		if ((rc = gh_openai_check_id(out->user, "user", e)) != GH_OK)
			return rc;
	}
	/* tools are client tools; tool_choice "none" offers none of them */
	if ((rc = gh_tools_client_defs(NULL, cJSON_GetObjectItemCaseSensitive(body, "tools"),
				       "tools", &out->client_defs, e)) != GH_OK)
		return rc;
	tc = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
	if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
		cJSON_Delete(out->client_defs);
		if (!(out->client_defs = cJSON_CreateArray()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	return convert_messages(cJSON_GetObjectItemCaseSensitive(body, "messages"),
				&out->messages, e);
}

void gh_openai_req_free(struct gh_openai_req *q)
{
	cJSON_Delete(q->client_defs);
	cJSON_Delete(q->messages);
	memset(q, 0, sizeof(*q));
}

/* --------------------------------------------------------------- answers */

const char *gh_openai_finish(enum gh_run_finish f)
{
	switch (f) {
	case GH_RUN_FINISH_LENGTH:
	case GH_RUN_FINISH_MAX_STEPS:
		return "length";
	case GH_RUN_FINISH_CONTENT_FILTER:
		return "content_filter";
	case GH_RUN_FINISH_TOOL_CALLS:   /* a turn that hands calls out says so itself */
	case GH_RUN_FINISH_STOP:
	case GH_RUN_FINISH_SUSPENDED:
		break;
	}
	return "stop";
}

cJSON *gh_openai_envelope(const char *run_id, const char *object, int64_t created,
			  const char *model)
{
	cJSON *o = cJSON_CreateObject();
	char id[GH_ID_MAX + 16];

	if (!o)
		return NULL;
	snprintf(id, sizeof(id), "chatcmpl-%s", run_id);
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "object", object);
	cJSON_AddNumberToObject(o, "created", (double)created);
	cJSON_AddStringToObject(o, "model", model);
	cJSON_AddNullToObject(o, "system_fingerprint");
	return o;
}

cJSON *gh_openai_usage(const struct gh_run_usage *u)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "prompt_tokens", (double)u->input_tokens);
	cJSON_AddNumberToObject(o, "completion_tokens", (double)u->output_tokens);
	cJSON_AddNumberToObject(o, "total_tokens", (double)(u->input_tokens + u->output_tokens));
	return o;
}

const char *gh_openai_client_name(const cJSON *client_defs, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, client_defs)
		if (!strcmp(str_or(d, "name", ""), name))
			return str_or(d, "origName", name);
	return name;
}

cJSON *gh_openai_tool_calls(const cJSON *calls, const cJSON *client_defs, int indexed)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *c;
	int i = 0;

	cJSON_ArrayForEach(c, calls) {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "args");
		cJSON *o = cJSON_CreateObject(), *fn;
		char *args = a ? gh_json_dump(a) : NULL;

		if (indexed)
			cJSON_AddNumberToObject(o, "index", i);
		gh_json_add_str(o, "id", gh_json_str(c, "toolCallId"));
		cJSON_AddStringToObject(o, "type", "function");
		fn = cJSON_AddObjectToObject(o, "function");
		cJSON_AddStringToObject(fn, "name", gh_openai_client_name(client_defs,
								str_or(c, "toolName", "")));
		cJSON_AddStringToObject(fn, "arguments",
					args && strcmp(args, "null") ? args : "{}");
		free(args);
		cJSON_AddItemToArray(arr, o);
		i++;
	}
	return arr;
}
