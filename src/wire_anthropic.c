/*
 * wire_anthropic.c - the Anthropic Messages wire; see wire_anthropic.h.
 */
#include "wire_anthropic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "buf.h"
#include "json.h"
#include "messages.h"
#include "tools.h"
#include "util.h"

#define MAX_MESSAGES 10000
#define MAX_BLOCKS 10000           /* content blocks of one message */
#define FOLD_MAX 2000              /* bytes of a folded argument or result */

/* Fields gatehouse reads itself; every other one passes through. */
static const char *const own_fields[] = {"model", "messages", "max_tokens", "stream", "tools",
					 NULL};

static cJSON *text_part(const char *t)
{
	cJSON *p = cJSON_CreateObject();

	if (!p)
		return NULL;
	cJSON_AddStringToObject(p, "type", "text");
	cJSON_AddStringToObject(p, "text", t ? t : "");
	return p;
}

/* The text of a tool_result's content: a string, or its text blocks. */
static void result_text(const cJSON *content, struct gh_buf *b)
{
	const cJSON *p;

	if (cJSON_IsString(content)) {
		gh_buf_puts(b, content->valuestring);
		return;
	}
	cJSON_ArrayForEach(p, content) {
		const char *t = gh_json_str(p, "text");

		if (t) {
			if (b->len)
				gh_buf_putc(b, '\n');
			gh_buf_puts(b, t);
		}
	}
}

/* The name of the tool_use block with id, earlier in the conversation. */
static const char *tool_name_of(const cJSON *msgs, const char *id)
{
	const cJSON *m, *b;

	cJSON_ArrayForEach(m, msgs) {
		cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(m, "content")) {
			const char *t = gh_json_str(b, "type"), *bid = gh_json_str(b, "id");

			if (t && !strcmp(t, "tool_use") && bid && id && !strcmp(bid, id))
				return gh_json_str(b, "name");
		}
	}
	return NULL;
}

/* An image block as a CoreMessage image part; NULL when unusable. */
static cJSON *image_part(const cJSON *b)
{
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(b, "source");
	const char *st = gh_json_str(src, "type");
	cJSON *p;

	if (!st)
		return NULL;
	if (!(p = cJSON_CreateObject()))
		return NULL;
	cJSON_AddStringToObject(p, "type", "image");
	if (!strcmp(st, "url") && gh_json_str(src, "url")) {
		cJSON_AddStringToObject(p, "image", gh_json_str(src, "url"));
	} else if (!strcmp(st, "base64") && gh_json_str(src, "data")) {
		cJSON_AddStringToObject(p, "image", gh_json_str(src, "data"));
		gh_json_add_str(p, "mimeType", gh_json_str(src, "media_type"));
	} else {
		cJSON_Delete(p);
		return NULL;
	}
	return p;
}

/* A short line telling of a tool round, for providers that are not
 * Anthropic (the conversation is resent without its tool messages):
 * "(" lead " " name sep what ")", what cut at FOLD_MAX bytes. */
static cJSON *fold_part(const char *lead, const char *name, const char *sep, const char *what)
{
	struct gh_buf b;
	cJSON *p;

	gh_buf_init(&b, FOLD_MAX + 256);
	gh_buf_printf(&b, "(%s %s%s%.*s)", lead, name ? name : "?", sep, (int)FOLD_MAX,
		      what ? what : "");
	p = text_part(b.data ? b.data : "");
	gh_buf_free(&b);
	return p;
}

/* One message's blocks as CoreMessage parts. results (a continuation's
 * last user message) gets its tool results as tool-result parts; other
 * tool rounds are folded into words. */
static enum gh_code blocks_to_parts(const cJSON *all, const cJSON *content, int i,
				    int assistant, cJSON *parts, cJSON *results,
				    struct gh_err *e)
{
	const cJSON *b;
	int j = 0;

	if (cJSON_IsString(content)) {
		cJSON_AddItemToArray(parts, text_part(content->valuestring));
		return GH_OK;
	}
	if (!cJSON_IsArray(content))
		return gh_err_set(e, GH_E_BADREQ, "messages.%d.content: expected a string or an "
				  "array of content blocks", i);
	if (cJSON_GetArraySize(content) > MAX_BLOCKS)
		return gh_err_set(e, GH_E_BADREQ, "messages.%d.content: at most %d blocks", i,
				  MAX_BLOCKS);
	cJSON_ArrayForEach(b, content) {
		const char *type = gh_json_str(b, "type");
		cJSON *p = NULL;

		if (!cJSON_IsObject(b) || !type)
			return gh_err_set(e, GH_E_BADREQ, "messages.%d.content.%d.type: Field "
					  "required", i, j);
		if (!strcmp(type, "text")) {
			if (!gh_json_str(b, "text"))
				return gh_err_set(e, GH_E_BADREQ, "messages.%d.content.%d.text: "
						  "Field required", i, j);
			p = text_part(gh_json_str(b, "text"));
		} else if (!strcmp(type, "image")) {
			p = image_part(b);
		} else if (!strcmp(type, "thinking") && assistant) {
			if (!(p = cJSON_CreateObject()))
				break;
			cJSON_AddStringToObject(p, "type", "reasoning");
			gh_json_add_str(p, "text", gh_json_str(b, "thinking"));
			if (gh_json_str(b, "signature"))
				cJSON_AddStringToObject(p, "signature", gh_json_str(b, "signature"));
		} else if (!strcmp(type, "redacted_thinking") && assistant) {
			if (!(p = cJSON_CreateObject()))
				break;
			cJSON_AddStringToObject(p, "type", "redacted-reasoning");
			gh_json_add_str(p, "data", gh_json_str(b, "data"));
		} else if (!strcmp(type, "tool_use") && assistant) {
			const char *id = gh_json_str(b, "id"), *name = gh_json_str(b, "name");
			char *args;

			if (!id || !name)
				return gh_err_set(e, GH_E_BADREQ, "messages.%d.content.%d: tool_use "
						  "needs id and name", i, j);
			args = gh_json_dump(cJSON_GetObjectItemCaseSensitive(b, "input"));
			p = fold_part("called tool", name, " with ", args ? args : "{}");
			free(args);
		} else if (!strcmp(type, "tool_result") && !assistant) {
			const char *id = gh_json_str(b, "tool_use_id");
			const cJSON *rc = cJSON_GetObjectItemCaseSensitive(b, "content");
			int is_err = gh_json_bool(b, "is_error", 0);
			struct gh_buf t;

			if (!id)
				return gh_err_set(e, GH_E_BADREQ, "messages.%d.content.%d.tool_use_id: "
						  "Field required", i, j);
			if (results) {
				cJSON *r = cJSON_CreateObject();

				if (!r)
					break;
				cJSON_AddStringToObject(r, "type", "tool-result");
				cJSON_AddStringToObject(r, "toolCallId", id);
				gh_json_add_str(r, "toolName", tool_name_of(all, id));
				cJSON_AddItemToObject(r, "result", rc ? cJSON_Duplicate(rc, 1)
								      : cJSON_CreateString(""));
				if (is_err)
					cJSON_AddTrueToObject(r, "isError");
				cJSON_AddItemToArray(results, r);
				j++;
				continue;
			}
			gh_buf_init(&t, FOLD_MAX + 1);
			result_text(rc, &t);
			p = fold_part("tool", tool_name_of(all, id), is_err ? " failed: " : " answered: ",
				      t.data ? t.data : "");
			gh_buf_free(&t);
		}
		/* other blocks (documents, server tool results, new types) reach
		 * an Anthropic upstream in the message as sent, and no other */
		if (p)
			cJSON_AddItemToArray(parts, p);
		j++;
	}
	return GH_OK;
}

/* The system prompt: a string or text blocks. */
static enum gh_code system_message(const cJSON *sys, cJSON *out, struct gh_err *e)
{
	struct gh_buf b;
	cJSON *m;

	if (!sys || cJSON_IsNull(sys))
		return GH_OK;
	if (!cJSON_IsString(sys) && !cJSON_IsArray(sys))
		return gh_err_set(e, GH_E_BADREQ, "system: expected a string or an array of text "
				  "blocks");
	gh_buf_init(&b, GH_JSON_MAX_BYTES);
	result_text(sys, &b);
	if (b.len && (m = cJSON_CreateObject())) {
		cJSON_AddStringToObject(m, "role", "system");
		cJSON_AddStringToObject(m, "content", b.data);
		/* an Anthropic upstream gets "system" as sent */
		cJSON_AddFalseToObject(m, "anthropic");
		cJSON_AddItemToArray(out, m);
	}
	gh_buf_free(&b);
	return GH_OK;
}

/* The last message of role user, skipping trailing messages of other roles
 * (Claude Code may end with a system-role reminder); -1 when none. */
static int last_user(const cJSON *msgs)
{
	int i;

	for (i = cJSON_GetArraySize(msgs) - 1; i >= 0; i--) {
		const char *role = gh_json_str(cJSON_GetArrayItem(msgs, i), "role");

		if (role && !strcmp(role, "user"))
			return i;
		if (role && !strcmp(role, "assistant"))
			return -1;
	}
	return -1;
}

static int has_tool_result(const cJSON *m)
{
	const cJSON *b;

	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(m, "content")) {
		const char *t = gh_json_str(b, "type");

		if (t && !strcmp(t, "tool_result"))
			return 1;
	}
	return 0;
}

static enum gh_code convert_messages(const cJSON *body, struct gh_anthropic_req *out,
				     struct gh_err *e)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages"), *m;
	int n, i = 0, lu;
	cJSON *results = NULL;
	enum gh_code rc;

	if (!cJSON_IsArray(msgs))
		return gh_err_set(e, GH_E_BADREQ, "messages: Field required (an array of "
				  "messages)");
	n = cJSON_GetArraySize(msgs);
	if (n == 0)
		return gh_err_set(e, GH_E_BADREQ, "messages: at least one message is required");
	if (n > MAX_MESSAGES)
		return gh_err_set(e, GH_E_BADREQ, "messages: at most %d messages", MAX_MESSAGES);
	if (!(out->messages = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	lu = last_user(msgs);
	if (lu >= 0 && has_tool_result(cJSON_GetArrayItem(msgs, lu))) {
		out->continuation = 1;
		if (!(results = cJSON_CreateArray()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (!out->continuation &&
	    (rc = system_message(cJSON_GetObjectItemCaseSensitive(body, "system"), out->messages,
				 e)) != GH_OK)
		return rc;
	cJSON_ArrayForEach(m, msgs) {
		const char *role = gh_json_str(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
		int assistant;
		cJSON *cm, *parts;

		if (!cJSON_IsObject(m) || !role)
			rc = gh_err_set(e, GH_E_BADREQ, "messages.%d.role: Field required", i);
		else if (!content)
			rc = gh_err_set(e, GH_E_BADREQ, "messages.%d.content: Field required", i);
		else
			rc = GH_OK;
		if (rc != GH_OK) {
			cJSON_Delete(results);
			return rc;
		}
		assistant = !strcmp(role, "assistant");
		if (assistant)
			out->history_len = i + 1;
		if (out->continuation && i != lu) {
			/* history the run already holds; checked all the same */
			cJSON *scratch = cJSON_CreateArray();

			rc = scratch ? blocks_to_parts(msgs, content, i, assistant, scratch, NULL, e)
				     : gh_err_set(e, GH_E_NOMEM, "out of memory");
			cJSON_Delete(scratch);
			if (rc != GH_OK) {
				cJSON_Delete(results);
				return rc;
			}
			i++;
			continue;
		}
		cm = cJSON_CreateObject();
		parts = cJSON_CreateArray();
		if (!cm || !parts) {
			cJSON_Delete(cm);
			cJSON_Delete(parts);
			cJSON_Delete(results);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		rc = blocks_to_parts(msgs, content, i, assistant, parts,
				     out->continuation ? results : NULL, e);
		if (rc != GH_OK || out->continuation) {
			cJSON_Delete(cm);
			cJSON_Delete(parts);
			if (rc != GH_OK) {
				cJSON_Delete(results);
				return rc;
			}
			i++;
			continue;
		}
		/* roles gatehouse does not act on (a system reminder) are told
		 * as system text to other providers */
		cJSON_AddStringToObject(cm, "role", assistant ? "assistant" :
						    !strcmp(role, "user") ? "user" : "system");
		if (!strcmp(role, "user") || assistant) {
			cJSON_AddItemToObject(cm, "content", parts);
		} else {
			char *t = gh_messages_text(parts);

			cJSON_AddStringToObject(cm, "content", t ? t : "");
			free(t);
			cJSON_Delete(parts);
		}
		cJSON_AddItemToObject(cm, "anthropic", cJSON_Duplicate(m, 1));
		cJSON_AddItemToArray(out->messages, cm);
		i++;
	}
	if (out->continuation) {
		cJSON *tm = cJSON_CreateObject();

		if (!tm) {
			cJSON_Delete(results);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		cJSON_AddStringToObject(tm, "role", "tool");
		cJSON_AddItemToObject(tm, "content", results);
		cJSON_AddItemToArray(out->messages, tm);
	}
	return GH_OK;
}

/* "tools" as OpenAI function tools, then client tool definitions. Tools
 * without input_schema (the API's own server tools) are not client tools:
 * they are left out, by name. */
static enum gh_code convert_tools(const cJSON *tools, struct gh_anthropic_req *out,
				  struct gh_err *e)
{
	const cJSON *t;
	cJSON *oai;
	enum gh_code rc;
	int i = 0;

	if (!(out->skipped_tools = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (tools && !cJSON_IsArray(tools))
		return gh_err_set(e, GH_E_BADREQ, "tools: expected an array of tools");
	if (!(oai = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(t, tools) {
		const char *name = gh_json_str(t, "name");
		const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
		cJSON *o, *f;

		if (!cJSON_IsObject(t) || !name) {
			cJSON_Delete(oai);
			return gh_err_set(e, GH_E_BADREQ, "tools.%d.name: Field required", i);
		}
		i++;
		if (!schema) {
			cJSON_AddItemToArray(out->skipped_tools, cJSON_CreateString(name));
			continue;
		}
		o = cJSON_CreateObject();
		cJSON_AddItemToArray(oai, o);
		cJSON_AddStringToObject(o, "type", "function");
		f = cJSON_AddObjectToObject(o, "function");
		cJSON_AddStringToObject(f, "name", name);
		gh_json_add_str(f, "description", gh_json_str(t, "description"));
		cJSON_AddItemToObject(f, "parameters", cJSON_Duplicate(schema, 1));
	}
	rc = gh_tools_client_defs(NULL, oai, "tools", &out->client_defs, e);
	cJSON_Delete(oai);
	return rc;
}

enum gh_code gh_anthropic_parse(const cJSON *body, int counting, struct gh_anthropic_req *out,
				struct gh_err *e)
{
	const cJSON *v, *f;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(body))
		return gh_err_set(e, GH_E_BADREQ, "the request body must be a JSON object");
	out->model = gh_json_str(body, "model");
	if (!out->model || !*out->model)
		return gh_err_set(e, GH_E_BADREQ, "model: Field required");
	v = cJSON_GetObjectItemCaseSensitive(body, "max_tokens");
	if (v) {
		if (!gh_json_is_int(v) || v->valuedouble < 1)
			return gh_err_set(e, GH_E_BADREQ, "max_tokens: expected a positive integer");
		out->max_tokens = (int64_t)v->valuedouble;
	} else if (!counting) {
		return gh_err_set(e, GH_E_BADREQ, "max_tokens: Field required");
	}
	v = cJSON_GetObjectItemCaseSensitive(body, "stream");
	if (v && !cJSON_IsBool(v))
		return gh_err_set(e, GH_E_BADREQ, "stream: expected a boolean");
	out->stream = cJSON_IsTrue(v) && !counting;
	v = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	if (v && !cJSON_IsObject(v))
		return gh_err_set(e, GH_E_BADREQ, "metadata: expected an object");
	out->user_id = gh_json_str(v, "user_id");
	if ((rc = convert_tools(cJSON_GetObjectItemCaseSensitive(body, "tools"), out, e)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
	if (v && (!cJSON_IsObject(v) || !gh_json_str(v, "type")))
		return gh_err_set(e, GH_E_BADREQ, "tool_choice: expected {\"type\": \"auto\" | "
				  "\"any\" | \"tool\" | \"none\"}");
	if (v && !strcmp(gh_json_str(v, "type"), "none")) {
		cJSON_Delete(out->client_defs);
		if (!(out->client_defs = cJSON_CreateArray()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (!(out->passthrough = cJSON_CreateObject()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(f, body) {
		if (!f->string || gh_str_in(own_fields, f->string))
			continue;
		if (!cJSON_AddItemToObject(out->passthrough, f->string, cJSON_Duplicate(f, 1)))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	return convert_messages(body, out, e);
}

void gh_anthropic_req_free(struct gh_anthropic_req *q)
{
	cJSON_Delete(q->client_defs);
	cJSON_Delete(q->skipped_tools);
	cJSON_Delete(q->messages);
	cJSON_Delete(q->passthrough);
	memset(q, 0, sizeof(*q));
}

/* ------------------------------------------------------------- mapping */

const struct gh_agent_conf *gh_anthropic_agent(const struct gh_config *cfg,
					       const struct gh_policy_conf *p, const char *model)
{
	const struct gh_agent_conf *first = NULL;
	size_t i;

	if (!model)
		return NULL;
	if ((first = gh_config_agent(cfg, model)))
		return first;
	for (i = 0; i < cfg->nagents; i++) {
		const struct gh_agent_conf *a = &cfg->agents[i];

		if (!gh_strlist_match(&a->models, model))
			continue;
		if (gh_policy_agent_allowed(p, a->id))
			return a;
		if (!first)
			first = a;
	}
	return first;
}

static int id_ok(const char *v)
{
	const unsigned char *p;

	if (!v || !*v || strlen(v) > GH_NAME_MAX)
		return 0;
	for (p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

void gh_anthropic_session_thread(const char *header, const char *user_id,
				 char out[GH_NAME_MAX + 1])
{
	const char *v = header && *header ? header : NULL, *s;
	char buf[GH_NAME_MAX + 1];
	cJSON *j = NULL;
	struct gh_err ignore;

	out[0] = '\0';
	if (!v && user_id && *user_id) {
		v = user_id;
		/* Claude Code: a JSON string with a session id, or an older
		 * "user_<hash>_account_<id>_session_<uuid>" */
		if (user_id[0] == '{' &&
		    gh_json_parse(user_id, strlen(user_id), "metadata.user_id", &j, &ignore) ==
			    GH_OK &&
		    gh_json_str(j, "session_id")) {
			gh_strlcpy(buf, gh_json_str(j, "session_id"), sizeof(buf));
			v = buf;
		} else if ((s = strstr(user_id, "_session_")) && s[9]) {
			v = s + 9;
		}
	}
	if (v && id_ok(v)) {
		gh_strlcpy(out, v, GH_NAME_MAX + 1);
	} else if (v) {
		unsigned char h[12];

		crypto_generichash(h, sizeof(h), (const unsigned char *)v, strlen(v), NULL, 0);
		memcpy(out, "ses_", 4);
		gh_hex(h, sizeof(h), out + 4);
	}
	cJSON_Delete(j);
}

static void count_bytes(const cJSON *v, int64_t *n, int depth)
{
	const cJSON *c;

	if (depth > GH_JSON_MAX_DEPTH_STORED)
		return;
	if (cJSON_IsString(v)) {
		*n += (int64_t)strlen(v->valuestring);
		return;
	}
	cJSON_ArrayForEach(c, v) {
		if (c->string)
			*n += (int64_t)strlen(c->string) / 2;
		count_bytes(c, n, depth + 1);
	}
}

int64_t gh_anthropic_estimate_tokens(const cJSON *body)
{
	int64_t n = 0;

	count_bytes(cJSON_GetObjectItemCaseSensitive(body, "system"), &n, 0);
	count_bytes(cJSON_GetObjectItemCaseSensitive(body, "messages"), &n, 0);
	count_bytes(cJSON_GetObjectItemCaseSensitive(body, "tools"), &n, 0);
	return n / 4 + 1;
}

/* -------------------------------------------------------------- answers */

const char *gh_anthropic_stop_reason(enum gh_run_finish f)
{
	switch (f) {
	case GH_RUN_FINISH_LENGTH: return "max_tokens";
	case GH_RUN_FINISH_TOOL_CALLS: return "tool_use";
	case GH_RUN_FINISH_CONTENT_FILTER: return "refusal";
	case GH_RUN_FINISH_STOP:
	case GH_RUN_FINISH_SUSPENDED:
	case GH_RUN_FINISH_MAX_STEPS: return "end_turn";
	}
	return "end_turn";
}

const char *gh_anthropic_error_type(int status)
{
	switch (status) {
	case 400: return "invalid_request_error";
	case 401: return "authentication_error";
	case 402: return "billing_error";
	case 403: return "permission_error";
	case 404: return "not_found_error";
	case 405: return "invalid_request_error";
	case 409: return "invalid_request_error";
	case 413: return "request_too_large";
	case 429: return "rate_limit_error";
	case 503:
	case 529: return "overloaded_error";
	case 504: return "timeout_error";
	}
	return "api_error";
}

cJSON *gh_anthropic_error(const char *type, const char *message)
{
	cJSON *o = cJSON_CreateObject(), *err;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "type", "error");
	err = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(err, "type", type ? type : "api_error");
	cJSON_AddStringToObject(err, "message", message ? message : "");
	return o;
}

cJSON *gh_anthropic_usage(const struct gh_run_usage *u)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "input_tokens", (double)u->input_tokens);
	cJSON_AddNumberToObject(o, "output_tokens", (double)u->output_tokens);
	return o;
}

cJSON *gh_anthropic_tool_use(const cJSON *call, const cJSON *client_defs)
{
	const char *name = gh_json_str(call, "toolName");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "args"), *d;
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_ArrayForEach(d, client_defs) {
		const char *n = gh_json_str(d, "name");

		if (n && name && !strcmp(n, name) && gh_json_str(d, "origName")) {
			name = gh_json_str(d, "origName");
			break;
		}
	}
	cJSON_AddStringToObject(o, "type", "tool_use");
	gh_json_add_str(o, "id", gh_json_str(call, "toolCallId"));
	gh_json_add_str(o, "name", name);
	cJSON_AddItemToObject(o, "input", cJSON_IsObject(args) ? cJSON_Duplicate(args, 1)
							      : cJSON_CreateObject());
	return o;
}
