/*
 * messages.c - CoreMessages, the engine's message format; see messages.h.
 */
#include "messages.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"

#define MAX_MESSAGES 1000

/* A part with type and the toolCallId it needs, and the name or nothing. */
static cJSON *tool_part(const char *type, const cJSON *p)
{
	cJSON *np = cJSON_CreateObject();

	if (!np)
		return NULL;
	cJSON_AddStringToObject(np, "type", type);
	cJSON_AddStringToObject(np, "toolCallId", gh_json_str(p, "toolCallId"));
	gh_json_add_str(np, "toolName", gh_json_str(p, "toolName"));
	return np;
}

static cJSON *tool_call_part(const cJSON *p)
{
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "args");
	cJSON *np = tool_part("tool-call", p);

	if (!args)
		args = cJSON_GetObjectItemCaseSensitive(p, "input");
	if (np)
		cJSON_AddItemToObject(np, "args", args ? cJSON_Duplicate(args, 1)
						       : cJSON_CreateObject());
	return np;
}

static cJSON *tool_result_part(const cJSON *p)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(p, "result");
	cJSON *np = tool_part("tool-result", p);

	if (!res) {
		/* AI SDK 5 shape: output {type, value} */
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(p, "output");

		res = cJSON_GetObjectItemCaseSensitive(o, "value");
		if (!res)
			res = o;
	}
	if (!np)
		return NULL;
	cJSON_AddItemToObject(np, "result", res ? cJSON_Duplicate(res, 1) : cJSON_CreateNull());
	if (gh_json_bool(p, "isError", 0))
		cJSON_AddBoolToObject(np, "isError", 1);
	return np;
}

static cJSON *text_part(const char *t)
{
	cJSON *np = cJSON_CreateObject();

	if (np) {
		cJSON_AddStringToObject(np, "type", "text");
		cJSON_AddStringToObject(np, "text", t ? t : "");
	}
	return np;
}

/* One part of a message of role: *np is the normalised part, or NULL when
 * the part is not forwarded (gatehouse passes text and tool parts only). */
static enum gh_code norm_part(const cJSON *p, const char *role, int idx, cJSON **np,
			      struct gh_err *e)
{
	const char *type = gh_json_str(p, "type");

	*np = NULL;
	if (cJSON_IsString(p))
		*np = text_part(p->valuestring);
	else if (!type)
		return gh_err_set(e, GH_E_BADREQ, "messages[%d].content: a part has no type", idx);
	else if (!strcmp(type, "text"))
		*np = text_part(gh_json_str(p, "text"));
	else if (!strcmp(type, "tool-call") && !strcmp(role, "assistant")) {
		if (!gh_json_str(p, "toolCallId") || !gh_json_str(p, "toolName"))
			return gh_err_set(e, GH_E_BADREQ, "messages[%d]: a tool-call part needs "
					  "toolCallId and toolName", idx);
		*np = tool_call_part(p);
	} else if (!strcmp(type, "tool-result") && !strcmp(role, "tool")) {
		if (!gh_json_str(p, "toolCallId"))
			return gh_err_set(e, GH_E_BADREQ, "messages[%d]: a tool-result part needs "
					  "toolCallId", idx);
		*np = tool_result_part(p);
	} else if (!strcmp(type, "image") || !strcmp(type, "file") ||
		   !strcmp(type, "reasoning") || !strcmp(type, "step-start") ||
		   !strcmp(type, "source") || !strcmp(type, "tool-invocation")) {
		return GH_OK;
	} else {
		return gh_err_set(e, GH_E_BADREQ, "messages[%d]: part type \"%s\" is not allowed "
				  "for role %s", idx, type, role);
	}
	return *np ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
}

static enum gh_code norm_parts(const cJSON *content, const char *role, int idx, cJSON **out,
			       struct gh_err *e)
{
	const cJSON *p;
	cJSON *arr;
	enum gh_code rc;

	*out = NULL;
	if (cJSON_IsString(content)) {
		*out = cJSON_CreateString(content->valuestring);
		return *out ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (!cJSON_IsArray(content))
		return gh_err_set(e, GH_E_BADREQ,
				  "messages[%d].content: expected a string or an array of parts", idx);
	arr = cJSON_CreateArray();
	if (!arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(p, content) {
		cJSON *np;

		if ((rc = norm_part(p, role, idx, &np, e)) != GH_OK) {
			cJSON_Delete(arr);
			return rc;
		}
		if (np)
			cJSON_AddItemToArray(arr, np);
	}
	*out = arr;
	return GH_OK;
}

enum gh_code gh_messages_normalize(const cJSON *in, cJSON **out, struct gh_err *e)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *m;
	enum gh_code rc;
	int i = 0;

	*out = NULL;
	if (!arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (cJSON_IsString(in)) {
		cJSON *u = cJSON_CreateObject();

		cJSON_AddStringToObject(u, "role", "user");
		cJSON_AddStringToObject(u, "content", in->valuestring);
		cJSON_AddItemToArray(arr, u);
		*out = arr;
		return GH_OK;
	}
	if (!cJSON_IsArray(in)) {
		cJSON_Delete(arr);
		return gh_err_set(e, GH_E_BADREQ, "messages: expected a string or an array");
	}
	cJSON_ArrayForEach(m, in) {
		const char *role;
		const cJSON *content;
		cJSON *nm, *nc;

		if (i >= MAX_MESSAGES) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages: more than %d", MAX_MESSAGES);
		}
		if (cJSON_IsString(m)) {
			nm = cJSON_CreateObject();
			cJSON_AddStringToObject(nm, "role", "user");
			cJSON_AddStringToObject(nm, "content", m->valuestring);
			cJSON_AddItemToArray(arr, nm);
			i++;
			continue;
		}
		role = gh_json_str(m, "role");
		if (!cJSON_IsObject(m) || !role) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d]: expected {role, content}", i);
		}
		if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
		    strcmp(role, "tool")) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].role: expected user, "
					  "assistant, system or tool, got \"%s\"", i, role);
		}
		content = cJSON_GetObjectItemCaseSensitive(m, "content");
		/* UI messages (Mastra streams) carry their text in parts */
		if ((!content || (cJSON_IsString(content) && !*content->valuestring)) &&
		    cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "parts")))
			content = cJSON_GetObjectItemCaseSensitive(m, "parts");
		if (!content) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d]: content is missing", i);
		}
		if ((rc = norm_parts(content, role, i, &nc, e)) != GH_OK) {
			cJSON_Delete(arr);
			return rc;
		}
		nm = cJSON_CreateObject();
		if (!nm) {
			cJSON_Delete(nc);
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		cJSON_AddStringToObject(nm, "role", role);
		cJSON_AddItemToObject(nm, "content", nc);
		cJSON_AddItemToArray(arr, nm);
		i++;
	}
	*out = arr;
	return GH_OK;
}

char *gh_messages_text(const cJSON *content)
{
	struct gh_buf b;
	const cJSON *p;

	if (cJSON_IsString(content))
		return strdup(content->valuestring);
	gh_buf_init(&b, 1 << 24);
	cJSON_ArrayForEach(p, content) {
		const char *t = gh_json_str(p, "text");

		if (t && !strcmp(gh_json_str(p, "type") ? gh_json_str(p, "type") : "", "text"))
			gh_buf_puts(&b, t);
	}
	return gh_buf_detach(&b);
}

cJSON *gh_messages_sanitize_history(const cJSON *hist)
{
	cJSON *out = cJSON_CreateArray();
	int n = cJSON_GetArraySize(hist), i;

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		cJSON *m = cJSON_GetArrayItem(hist, i);
		const char *role = gh_json_str(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *p;
		int calls = 0;

		if (!role)
			continue;
		if (!strcmp(role, "tool"))
			continue; /* only kept together with its assistant message below */
		if (!strcmp(role, "assistant") && cJSON_IsArray(content)) {
			cJSON_ArrayForEach(p, content)
				calls += !strcmp(gh_json_str(p, "type") ? gh_json_str(p, "type") : "",
						 "tool-call");
		}
		if (calls) {
			cJSON *next = cJSON_GetArrayItem(hist, i + 1);
			const cJSON *nc = cJSON_GetObjectItemCaseSensitive(next, "content"), *q;
			int answered = 0;

			if (next && !strcmp(gh_json_str(next, "role") ? gh_json_str(next, "role") : "",
					    "tool")) {
				cJSON_ArrayForEach(p, content) {
					const char *id = gh_json_str(p, "toolCallId");

					if (!id)
						continue;
					cJSON_ArrayForEach(q, nc)
						if (!strcmp(gh_json_str(q, "toolCallId")
								    ? gh_json_str(q, "toolCallId") : "", id))
							answered++;
				}
			}
			if (answered == calls) {
				cJSON_AddItemToArray(out, cJSON_Duplicate(m, 1));
				cJSON_AddItemToArray(out, cJSON_Duplicate(next, 1));
				i++;
			} else {
				/* keep the text, drop the unanswered calls */
				char *t = gh_messages_text(content);

				if (t && *t) {
					cJSON *tm = cJSON_CreateObject();

					cJSON_AddStringToObject(tm, "role", "assistant");
					cJSON_AddStringToObject(tm, "content", t);
					cJSON_AddItemToArray(out, tm);
				}
				free(t);
			}
			continue;
		}
		cJSON_AddItemToArray(out, cJSON_Duplicate(m, 1));
	}
	return out;
}


cJSON *gh_messages_tool_results(const cJSON *messages)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *m, *p;

	if (!out)
		return NULL;
	cJSON_ArrayForEach(m, messages) {
		if (strcmp(gh_json_str(m, "role") ? gh_json_str(m, "role") : "", "tool"))
			continue;
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content"))
			if (!strcmp(gh_json_str(p, "type") ? gh_json_str(p, "type") : "",
				    "tool-result"))
				cJSON_AddItemReferenceToArray(out, (cJSON *)(uintptr_t)p);
	}
	return out;
}
