/*
 * http_openai.c - the OpenAI-compatible surface, so the official openai
 * clients work unchanged:
 *
 *   POST /v1/chat/completions   a chat.completion, or with "stream": true
 *                               chat.completion.chunk SSE events and
 *                               "data: [DONE]"
 *   GET  /v1/models             the agents the key's policy allows
 *   GET  /v1/models/:id
 *
 * "model" names an agent. The request's tools are client tools, governed by
 * the key's policy; the agent's memory and configured tools run inside the
 * gateway and never appear on this wire. Pending client calls come back as
 * tool_calls with finish_reason "tool_calls"; the client's next request (its
 * history plus role "tool" messages) continues the same run, matched by
 * tool_call_id.
 *
 * OpenAI clients resend the whole conversation every time. With a pinned
 * thread (X-Gatehouse-Thread, or "user") only what the thread does not hold
 * yet is passed on, so nothing is stored twice; without one the run is
 * stateless. A call waiting for a person's approval holds the response for
 * up to server.approval_wait_ms (streams get keep-alive comments); when it
 * is still pending the answer is an assistant message naming the approval.
 *
 * Per request, on the CivetWeb worker thread that serves it; nothing here
 * is shared between threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "approvals.h"
#include "buf.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "run.h"
#include "store.h"
#include "tools.h"
#include "util.h"

#define MAX_MESSAGES 1000
#define TEXT_MAX (16u << 20)        /* assistant text one response carries */
#define HEADERS_MAX 1024

/* One chat completion request, from parsing to the last byte. */
struct oai {
	struct gh_req *r;
	const struct gh_agent_conf *agent;
	cJSON *body;                        /* owned */
	cJSON *messages;                    /* owned: CoreMessages for the engine */
	cJSON *client_defs;                 /* owned */
	struct gh_run_request rq;
	char run_id[GH_ID_MAX];             /* generated (new run) or found (continuation) */
	char thread_id[GH_NAME_MAX + 1];    /* the run's thread; "" none */
	int continuation;
	int stream, include_usage;
	int64_t created;                    /* Unix seconds */
	/* the answer under construction */
	struct gh_buf text;                 /* every step's text (non-streaming) */
	int has_text, sep;                  /* sep: a step began after text */
	/* streaming */
	struct gh_run_sink sink;
	int begun, gone;
	int64_t last_write_ns;
	const char *approvals;              /* for the head, when known before it */
	char headers[HEADERS_MAX];
	char user_thread[GH_ID_MAX];        /* the thread the "user" field names */
};

/* How a request ended, whichever way the engine got there. */
struct outcome {
	const char *finish;                 /* OpenAI finish_reason */
	cJSON *calls;                       /* owned: pending client calls, or NULL */
	char *tail;                         /* owned: text after the streamed text, or NULL */
	char approvals[256];                /* pending approval ids, comma separated */
	int64_t in_tok, out_tok;
};

/* A string member, or dflt when absent. */
static const char *str_or(const cJSON *o, const char *key, const char *dflt)
{
	const char *v = gh_json_str(o, key);

	return v ? v : dflt;
}

/* ---------------------------------------------------------------- agents */

/* The agent a "model" names, when the caller's policy allows it; otherwise
 * answers 404 / 403 and returns NULL. */
static const struct gh_agent_conf *find_agent(struct gh_req *r, const char *id)
{
	const struct gh_agent_conf *a = gh_config_agent(r->app->cfg, id);
	struct gh_decision d;

	if (!a) {
		gh_http_errorf(r, GH_E_NOTFOUND, "model \"%s\" does not exist: a model is an agent "
			       "id, and GET /v1/models lists the ones this key may use", id);
		return NULL;
	}
	gh_policy_agent(r->who.policy, a->id, &d);
	if (d.verdict != GH_V_ALLOW) {
		gh_http_errorf(r, GH_E_FORBIDDEN, "model \"%s\" refused: %s", a->id, d.rule);
		return NULL;
	}
	return a;
}

static cJSON *model_json(struct gh_req *r, const struct gh_agent_conf *a)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", a->id);
	cJSON_AddStringToObject(o, "object", "model");
	cJSON_AddNumberToObject(o, "created", (double)(r->app->started_ms / 1000));
	cJSON_AddStringToObject(o, "owned_by", "gatehouse");
	return o;
}

static void list_models(struct gh_req *r)
{
	cJSON *o = cJSON_CreateObject(), *data;
	size_t i;

	cJSON_AddStringToObject(o, "object", "list");
	data = cJSON_AddArrayToObject(o, "data");
	for (i = 0; i < r->app->cfg->nagents; i++) {
		const struct gh_agent_conf *a = &r->app->cfg->agents[i];
		struct gh_decision d;

		/* what the key may use, admin or not: the run enforces the same */
		gh_policy_agent(r->who.policy, a->id, &d);
		if (d.verdict == GH_V_ALLOW)
			cJSON_AddItemToArray(data, model_json(r, a));
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void get_model(struct gh_req *r)
{
	const struct gh_agent_conf *a = find_agent(r, r->params[0]);
	cJSON *o;

	if (!a)
		return;
	o = model_json(r, a);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
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

/* A tool message: its content is the result, as JSON when it parses. */
static enum gh_code tool_msg(const cJSON *m, int i, cJSON *out, struct gh_err *e)
{
	const char *id = gh_json_str(m, "tool_call_id");
	cJSON *parts = NULL, *content, *part, *result = NULL;
	struct gh_err ignore;
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
	if (!*t || gh_json_parse(t, strlen(t), "tool result", &result, &ignore) != GH_OK)
		result = cJSON_CreateString(t);
	free(t);
	cJSON_AddStringToObject(out, "role", "tool");
	content = cJSON_AddArrayToObject(out, "content");
	part = cJSON_CreateObject();
	cJSON_AddItemToArray(content, part);
	cJSON_AddStringToObject(part, "type", "tool-result");
	cJSON_AddStringToObject(part, "toolCallId", id);
	cJSON_AddItemToObject(part, "result", result);
	return GH_OK;
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

/* Earlier tool rounds told in words. Tool results in a request are answers
 * to a waiting run (the engine matches them by id), so a resent history
 * that the run has to take whole (stateless, or a new thread) cannot carry
 * them as tool messages: each call and its result become a line of the
 * assistant's text, and consecutive assistant texts are merged. Caller
 * frees. */
static cJSON *fold_tool_rounds(const cJSON *msgs)
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

/* A thread or resource id from a header or "user": it goes back out in a
 * response header, so no control characters. */
static enum gh_code check_id(const char *v, const char *field, struct gh_err *e)
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

/* Which messages go to the engine (see the file comment and the README):
 * a request ending with tool messages continues the run waiting for them;
 * otherwise a pinned thread that already exists gets what follows the last
 * assistant message, and everything else the whole conversation. */
static enum gh_code pick_messages(struct oai *q, cJSON *all, const char *pin, struct gh_err *e)
{
	struct gh_req *r = q->r;
	int n = cJSON_GetArraySize(all), i, from;
	cJSON *m, *out;

	for (from = n; from > 0 && is_role(cJSON_GetArrayItem(all, from - 1), "tool"); from--)
		;
	if (from < n) {
		/* a continuation: only the trailing results; earlier ones are history */
		char rid[48], st[16];
		struct gh_run_row row;
		struct gh_err ignore;

		q->continuation = 1;
		if (!(out = cJSON_CreateArray()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		for (i = from; i < n; i++)
			cJSON_AddItemToArray(out, cJSON_Duplicate(cJSON_GetArrayItem(all, i), 1));
		q->messages = out;
		/* the run's id and thread, for a stream's first bytes; the engine
		 * gives the real answer when they are wrong */
		m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(out, 0),
									"content"), 0);
		if (gh_store_tool_call_find(r->app->store, r->who.key.owner,
					    gh_json_str(m, "toolCallId"), rid, st,
					    &ignore) == GH_OK &&
		    gh_store_run_get(r->app->store, r->who.key.owner, rid, &row,
				     &ignore) == GH_OK) {
			gh_strlcpy(q->run_id, row.id, sizeof(q->run_id));
			gh_strlcpy(q->thread_id, row.thread_id, sizeof(q->thread_id));
			gh_run_row_clear(&row);
		}
		return GH_OK;
	}
	gh_id_new("run_", q->run_id, sizeof(q->run_id));
	q->rq.run_id = q->run_id;
	if (pin && q->agent->memory_enabled) {
		cJSON *th = NULL;
		enum gh_code rc;

		gh_strlcpy(q->thread_id, pin, sizeof(q->thread_id));
		q->rq.thread_id = pin;
		rc = gh_store_thread_get(r->app->store, r->who.key.owner, pin, &th, e);
		cJSON_Delete(th);
		if (rc == GH_OK) {
			/* the thread holds everything up to its last answer */
			for (from = n; from > 0 && !is_role(cJSON_GetArrayItem(all, from - 1),
							    "assistant"); from--)
				;
			if (!(out = cJSON_CreateArray()))
				return gh_err_set(e, GH_E_NOMEM, "out of memory");
			for (i = from; i < n; i++) {
				m = cJSON_GetArrayItem(all, i);
				if (!is_role(m, "tool"))
					cJSON_AddItemToArray(out, cJSON_Duplicate(m, 1));
			}
			if (cJSON_GetArraySize(out) == 0) {
				cJSON_Delete(out);
				return gh_err_set(e, GH_E_BADREQ, "messages: nothing after "
						  "the last assistant message; thread \"%s\" "
						  "already holds the rest", pin);
			}
			q->messages = out;
			return GH_OK;
		}
		if (rc != GH_E_NOTFOUND)
			return rc;
		/* a new thread takes the whole conversation */
	} else {
		q->rq.stateless = 1;
	}
	if (!(q->messages = fold_tool_rounds(all)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return GH_OK;
}

static enum gh_code parse_request(struct oai *q, struct gh_err *e)
{
	struct gh_req *r = q->r;
	const cJSON *v, *tc;
	const char *pin, *resource, *user = NULL;
	cJSON *all = NULL;
	enum gh_code rc;

	if ((rc = gh_http_body_object(r, &q->body, e)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(q->body, "model");
	if (!cJSON_IsString(v) || !*v->valuestring)
		return gh_err_set(e, GH_E_BADREQ, "model: required, the id of an agent (GET "
				  "/v1/models lists them)");
	v = cJSON_GetObjectItemCaseSensitive(q->body, "stream");
	if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
		return gh_err_set(e, GH_E_BADREQ, "stream: expected true or false");
	q->stream = cJSON_IsTrue(v);
	v = cJSON_GetObjectItemCaseSensitive(q->body, "stream_options");
	if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v))
		return gh_err_set(e, GH_E_BADREQ, "stream_options: expected an object");
	q->include_usage = gh_json_bool(v, "include_usage", 0);
	v = cJSON_GetObjectItemCaseSensitive(q->body, "n");
	if (v && !cJSON_IsNull(v) && !(gh_json_is_int(v) && v->valuedouble == 1))
		return gh_err_set(e, GH_E_BADREQ, "n: gatehouse answers with one choice; "
				  "expected 1");
	v = cJSON_GetObjectItemCaseSensitive(q->body, "user");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsString(v))
			return gh_err_set(e, GH_E_BADREQ, "user: expected a string");
		user = v->valuestring;
		if ((rc = check_id(user, "user", e)) != GH_OK)
			return rc;
	}
	pin = gh_http_header(r, "X-Gatehouse-Thread");
	if (pin && (rc = check_id(pin, "X-Gatehouse-Thread", e)) != GH_OK)
		return rc;
	resource = gh_http_header(r, "X-Gatehouse-Resource");
	if (resource && (rc = check_id(resource, "X-Gatehouse-Resource", e)) != GH_OK)
		return rc;
	if (!pin && user) {
		/* "user" is unique within one owner and one agent: the thread it
		 * names is derived from all three (thread ids are per owner now;
		 * the owner stays in the hash so existing threads keep theirs). */
		unsigned char h[12];
		crypto_generichash_state hs;
		const char *owner = r->who.key.owner;
		const char *agent = cJSON_GetObjectItemCaseSensitive(q->body, "model")->valuestring;

		crypto_generichash_init(&hs, NULL, 0, sizeof(h));
		crypto_generichash_update(&hs, (const unsigned char *)owner, strlen(owner) + 1);
		crypto_generichash_update(&hs, (const unsigned char *)agent, strlen(agent) + 1);
		crypto_generichash_update(&hs, (const unsigned char *)user, strlen(user));
		crypto_generichash_final(&hs, h, sizeof(h));
		memcpy(q->user_thread, "usr_", 4);
		gh_hex(h, sizeof(h), q->user_thread + 4);
		pin = q->user_thread;
	}
	if (!resource)
		resource = user;
	/* tools are client tools; tool_choice "none" offers none of them */
	if ((rc = gh_tools_client_defs(NULL, cJSON_GetObjectItemCaseSensitive(q->body, "tools"),
				       "tools", &q->client_defs, e)) != GH_OK)
		return rc;
	tc = cJSON_GetObjectItemCaseSensitive(q->body, "tool_choice");
	if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
		cJSON_Delete(q->client_defs);
		if (!(q->client_defs = cJSON_CreateArray()))
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if ((rc = convert_messages(cJSON_GetObjectItemCaseSensitive(q->body, "messages"), &all,
				   e)) != GH_OK)
		return rc;
	q->agent = find_agent(r, cJSON_GetObjectItemCaseSensitive(q->body, "model")->valuestring);
	if (!q->agent) {
		cJSON_Delete(all);
		return GH_E_NOTFOUND; /* answered */
	}
	q->rq.who = &r->who;
	q->rq.agent = q->agent;
	q->rq.resource_id = resource;
	q->rq.client_defs = q->client_defs;
	q->rq.stream = q->stream;
	q->rq.surface = "openai";
	rc = pick_messages(q, all, pin, e);
	cJSON_Delete(all);
	q->rq.messages = q->messages;
	return rc;
}

/* ------------------------------------------------------------- answering */

/* The name the client declared for a (normalised) client tool name. */
static const char *client_name(const struct oai *q, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, q->client_defs)
		if (!strcmp(str_or(d, "name", ""), name))
			return str_or(d, "origName", name);
	return name;
}

static const char *finish_of(const char *engine)
{
	if (!engine)
		return "stop";
	if (!strcmp(engine, "length") || !strcmp(engine, "max-steps"))
		return "length";
	if (!strcmp(engine, "content-filter"))
		return "content_filter";
	return "stop";
}

/* OpenAI tool_calls for pending client calls [{toolCallId, toolName, args}]. */
static cJSON *tool_calls_json(const struct oai *q, const cJSON *calls, int indexed)
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
		cJSON_AddStringToObject(fn, "name", client_name(q, str_or(c, "toolName", "")));
		cJSON_AddStringToObject(fn, "arguments",
					args && strcmp(args, "null") ? args : "{}");
		free(args);
		cJSON_AddItemToArray(arr, o);
		i++;
	}
	return arr;
}

static void add_header(struct gh_buf *b, const char *name, const char *value)
{
	const unsigned char *p;

	if (!value || !*value)
		return;
	for (p = (const unsigned char *)value; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return;
	gh_buf_printf(b, "%s: %s\r\n", name, value);
}

/* X-Gatehouse-Run / -Thread / -Approval for the response head. */
static void set_headers(struct oai *q, const char *approvals)
{
	struct gh_buf b;

	gh_buf_init(&b, sizeof(q->headers) - 1);
	add_header(&b, "X-Gatehouse-Run", q->run_id);
	add_header(&b, "X-Gatehouse-Thread", q->thread_id);
	add_header(&b, "X-Gatehouse-Approval", approvals);
	gh_strlcpy(q->headers, b.data ? b.data : "", sizeof(q->headers));
	gh_buf_free(&b);
	q->r->extra_headers = q->headers[0] ? q->headers : NULL;
}

static cJSON *usage_json(int64_t in, int64_t out)
{
	cJSON *u = cJSON_CreateObject();

	cJSON_AddNumberToObject(u, "prompt_tokens", (double)in);
	cJSON_AddNumberToObject(u, "completion_tokens", (double)out);
	cJSON_AddNumberToObject(u, "total_tokens", (double)(in + out));
	return u;
}

static cJSON *envelope(const struct oai *q, const char *object)
{
	cJSON *o = cJSON_CreateObject();
	char id[GH_ID_MAX + 16];

	snprintf(id, sizeof(id), "chatcmpl-%s", q->run_id);
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "object", object);
	cJSON_AddNumberToObject(o, "created", (double)q->created);
	cJSON_AddStringToObject(o, "model", q->agent->id);
	cJSON_AddNullToObject(o, "system_fingerprint");
	return o;
}

/* ------------------------------------------------------------- streaming */

static int send_json(struct oai *q, cJSON *o)
{
	char *data = gh_json_dump(o);

	cJSON_Delete(o);
	if (!data)
		return -1;
	if (!q->gone && gh_http_sse_send(q->r, NULL, data, strlen(data)) != 0)
		q->gone = 1;
	free(data);
	q->last_write_ns = gh_mono_ns();
	return q->gone ? -1 : 0;
}

/* One chat.completion.chunk with delta (taken) and finish_reason. */
static int send_chunk(struct oai *q, cJSON *delta, const char *finish)
{
	cJSON *o = envelope(q, "chat.completion.chunk"), *ch, *c;

	ch = cJSON_AddArrayToObject(o, "choices");
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(ch, c);
	cJSON_AddNumberToObject(c, "index", 0);
	cJSON_AddItemToObject(c, "delta", delta ? delta : cJSON_CreateObject());
	cJSON_AddNullToObject(c, "logprobs");
	if (finish)
		cJSON_AddStringToObject(c, "finish_reason", finish);
	else
		cJSON_AddNullToObject(c, "finish_reason");
	if (q->include_usage)
		cJSON_AddNullToObject(o, "usage");
	return send_json(q, o);
}

/* Sends the SSE head and the role chunk, once. */
static int begin(struct oai *q)
{
	cJSON *d;

	if (q->begun)
		return q->gone ? -1 : 0;
	q->begun = 1;
	set_headers(q, q->approvals);
	if (gh_http_sse_begin(q->r) != 0) {
		q->gone = 1;
		return -1;
	}
	d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "role", "assistant");
	cJSON_AddStringToObject(d, "content", "");
	return send_chunk(q, d, NULL);
}

static int send_text(struct oai *q, const char *t)
{
	cJSON *d;

	if (begin(q) != 0)
		return -1;
	d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "content", t);
	return send_chunk(q, d, NULL);
}

/* Client gone? Heartbeat due? Shared by the run's ticks and the approval
 * wait. Nonzero: the client is gone. */
static int stream_tick(struct oai *q)
{
	int64_t now = gh_mono_ns();

	if (q->gone)
		return 1;
	if (gh_http_client_gone(q->r)) {
		q->gone = 1;
		gh_info("%s: client went away; cancelling run %s", q->r->id, q->run_id);
		return 1;
	}
	if (now - q->last_write_ns >= q->r->app->cfg->server.heartbeat_ms * 1000000) {
		if (!q->begun)
			begin(q);
		else if (gh_http_sse_comment(q->r, "keep-alive") != 0)
			q->gone = 1;
		q->last_write_ns = now;
	}
	return q->gone;
}

static int sink_tick(void *ud)
{
	return stream_tick(ud);
}

/* Text to the answer: streamed at once, or kept for the JSON response. */
static void add_text(struct oai *q, const char *t)
{
	if (!t || !*t)
		return;
	if (q->sep && q->has_text) {
		/* the text of a step after a tool round: a paragraph of its own */
		if (q->stream)
			send_text(q, "\n\n");
		else
			gh_buf_puts(&q->text, "\n\n");
	}
	q->sep = 0;
	q->has_text = 1;
	if (q->stream)
		send_text(q, t);
	else
		gh_buf_puts(&q->text, t);
}

/* The engine's events: text goes out, tool rounds stay inside. */
static int sink_event(void *ud, const char *run_id, const char *type, const cJSON *payload)
{
	struct oai *q = ud;

	if (q->gone)
		return 1;
	if (!q->run_id[0])
		gh_strlcpy(q->run_id, run_id, sizeof(q->run_id));
	if (!strcmp(type, "text-delta")) {
		add_text(q, gh_json_str(payload, "text"));
	} else if (!strcmp(type, "step-start")) {
		q->sep = 1;
	} else if (!strcmp(type, "tool-call-approval") && q->stream) {
		char line[200];

		/* a wait follows: say why in a comment clients ignore */
		snprintf(line, sizeof(line), "approval %s pending for tool %s",
			 str_or(payload, "approvalId", ""), str_or(payload, "toolName", ""));
		if (q->begun && gh_http_sse_comment(q->r, line) != 0)
			q->gone = 1;
	}
	return q->gone;
}

/* -------------------------------------------------------------- approvals */

/* The assistant message that says which approvals still wait, so an
 * unmodified client shows something sensible. */
static void pending_note(struct oai *q, const cJSON *approvals, struct outcome *oc)
{
	struct gh_buf b, ids;
	const cJSON *a;
	int admin = 0, n = 0;
	char *one = NULL;

	gh_buf_init(&b, 1 << 16);
	gh_buf_init(&ids, sizeof(oc->approvals) - 1);
	cJSON_ArrayForEach(a, approvals) {
		const char *id = gh_json_str(a, "id"), *tool = gh_json_str(a, "toolName");
		struct gh_approval ap;
		struct gh_err ignore;
		int mine = 0;

		if (!id)
			continue;
		if (gh_approval_get(q->r->app, q->r->who.key.owner, id, &ap, &ignore) == GH_OK) {
			int decided = strcmp(ap.status, "pending") != 0;

			mine = !strcmp(ap.approver, "caller");
			gh_approval_clear(&ap);
			if (decided)
				continue;
		}
		admin |= !mine;
		gh_buf_printf(&b, "%sWaiting for approval %s (tool %s needs %s).", n ? " " : "", id,
			      tool ? tool : "?", mine ? "your approval" : "an admin's approval");
		if (ids.len)
			gh_buf_putc(&ids, ',');
		gh_buf_puts(&ids, id);
		if (!one)
			one = gh_strdup(id);
		n++;
	}
	if (admin)
		gh_buf_printf(&b, " Ask an administrator to review %s, then send your message "
			      "again.", n > 1 ? "them" : "it");
	else if (n)
		gh_buf_printf(&b, " Approve or deny %s with POST /api/approvals/%s/approve (or "
			      "/deny), then send your message again.", n > 1 ? "each" : "it",
			      n > 1 ? "<id>" : one);
	else
		/* decided just now: the background resumer is carrying it out */
		gh_buf_printf(&b, "The approval was decided and run %s is carrying it out; its "
			      "answer will be at GET /api/runs/%s.", q->run_id, q->run_id);
	gh_strlcpy(oc->approvals, ids.data ? ids.data : "", sizeof(oc->approvals));
	oc->tail = gh_buf_detach(&b);
	oc->finish = "stop";
	free(one);
	gh_buf_free(&ids);
	gh_buf_free(&b);
}

/* Approvals still pending in a stored run, as [{id, toolName}]. */
static cJSON *row_approvals(const struct gh_run_row *row)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *c;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(row->state, "calls")) {
		cJSON *o;

		if (strcmp(str_or(c, "state", ""), "pending_approval"))
			continue;
		o = cJSON_CreateObject();
		gh_json_add_str(o, "id", gh_json_str(c, "approvalId"));
		gh_json_add_str(o, "toolName", gh_json_str(c, "toolName"));
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

/* Whether the client left while an approval waits; a stream's head goes
 * out with the first heartbeat. */
static int wait_gone(void *ud)
{
	struct oai *q = ud;

	return q->stream ? stream_tick(q) : gh_http_client_gone(q->r);
}

/* The run is suspended on approvals: wait (bounded by
 * server.approval_wait_ms) for a person's decision, which the background
 * resumer carries out, then answer with where the run got to. Returns
 * GH_E_CANCELLED when the client left, GH_E_UPSTREAM when the resumed run
 * failed. */
static enum gh_code await_approval(struct oai *q, const struct gh_run_result *res,
				   struct outcome *oc, struct gh_err *e)
{
	struct gh_run_row row;
	enum gh_code rc;

	rc = gh_run_wait_settled(q->r->app, q->r->who.key.owner, res->run_id,
				 q->r->app->cfg->server.approval_wait_ms, wait_gone, q, &row, e);
	if (rc == GH_E_TIMEOUT) {
		cJSON *ap = row_approvals(&row);

		gh_err_clear(e);
		pending_note(q, cJSON_GetArraySize(ap) ? ap : res->approvals, oc);
		cJSON_Delete(ap);
		gh_run_row_clear(&row);
		return GH_OK;
	}
	if (rc != GH_OK) {
		gh_run_row_clear(&row);
		return rc;
	}
	/* decided and carried out: the stored run tells the outcome */
	{
		const cJSON *usage = cJSON_GetObjectItemCaseSensitive(row.state, "usage");

		oc->in_tok = gh_json_int(usage, "input", oc->in_tok);
		oc->out_tok = gh_json_int(usage, "output", oc->out_tok);
	}
	if (!strcmp(row.status, "completed")) {
		oc->tail = gh_strdup(str_or(row.output, "text", ""));
		oc->finish = finish_of(gh_json_str(row.output, "finishReason"));
		rc = GH_OK;
	} else if (!strcmp(row.status, "waiting")) {
		oc->calls = gh_run_pending_calls(row.state);
		oc->finish = "tool_calls";
		rc = GH_OK;
	} else {
		rc = gh_err_set(e, GH_E_UPSTREAM, "run %s %s after the approval: %s", row.id,
				row.status, row.error ? row.error : "no reason recorded");
	}
	gh_run_row_clear(&row);
	return rc;
}

/* ---------------------------------------------------------------- answer */

static void respond_json(struct oai *q, struct outcome *oc)
{
	cJSON *o = envelope(q, "chat.completion"), *ch, *c, *msg;
	int ncalls = cJSON_GetArraySize(oc->calls);

	if (oc->tail && *oc->tail) {
		if (q->has_text)
			gh_buf_puts(&q->text, "\n\n");
		gh_buf_puts(&q->text, oc->tail);
	}
	ch = cJSON_AddArrayToObject(o, "choices");
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(ch, c);
	cJSON_AddNumberToObject(c, "index", 0);
	msg = cJSON_AddObjectToObject(c, "message");
	cJSON_AddStringToObject(msg, "role", "assistant");
	if (q->text.len == 0 && ncalls)
		cJSON_AddNullToObject(msg, "content");
	else
		cJSON_AddStringToObject(msg, "content", q->text.data ? q->text.data : "");
	cJSON_AddNullToObject(msg, "refusal");
	if (ncalls)
		cJSON_AddItemToObject(msg, "tool_calls", tool_calls_json(q, oc->calls, 0));
	cJSON_AddNullToObject(c, "logprobs");
	cJSON_AddStringToObject(c, "finish_reason", oc->finish);
	cJSON_AddItemToObject(o, "usage", usage_json(oc->in_tok, oc->out_tok));
	set_headers(q, oc->approvals);
	gh_http_json(q->r, 200, o);
	cJSON_Delete(o);
}

static void respond_stream(struct oai *q, struct outcome *oc)
{
	cJSON *calls, *it, *d, *o;

	q->approvals = oc->approvals;
	if (oc->tail && *oc->tail) {
		q->sep = 1;
		add_text(q, oc->tail);
	}
	if (begin(q) != 0)
		return;
	/* client calls by index: id, type and name first, then the arguments */
	calls = tool_calls_json(q, oc->calls, 1);
	cJSON_ArrayForEach(it, calls) {
		cJSON *fn = cJSON_GetObjectItemCaseSensitive(it, "function");
		cJSON *first = cJSON_Duplicate(it, 1), *args = cJSON_CreateObject(), *tc, *f;
		cJSON *first_fn = cJSON_GetObjectItemCaseSensitive(first, "function");

		cJSON_ReplaceItemInObjectCaseSensitive(first_fn, "arguments",
						       cJSON_CreateString(""));
		d = cJSON_CreateObject();
		tc = cJSON_AddArrayToObject(d, "tool_calls");
		cJSON_AddItemToArray(tc, first);
		send_chunk(q, d, NULL);
		cJSON_AddNumberToObject(args, "index", gh_json_int(it, "index", 0));
		f = cJSON_AddObjectToObject(args, "function");
		cJSON_AddStringToObject(f, "arguments", gh_json_str(fn, "arguments"));
		d = cJSON_CreateObject();
		tc = cJSON_AddArrayToObject(d, "tool_calls");
		cJSON_AddItemToArray(tc, args);
		send_chunk(q, d, NULL);
	}
	cJSON_Delete(calls);
	send_chunk(q, NULL, oc->finish);
	if (q->include_usage) {
		o = envelope(q, "chat.completion.chunk");
		cJSON_AddArrayToObject(o, "choices");
		cJSON_AddItemToObject(o, "usage", usage_json(oc->in_tok, oc->out_tok));
		send_json(q, o);
	}
	if (!q->gone) {
		gh_http_sse_send(q->r, NULL, "[DONE]", 6);
		gh_http_sse_end(q->r);
	}
}

/* A failure: a plain JSON error while nothing was sent; once the stream
 * has begun, an error event and [DONE]. */
static void fail(struct oai *q, const struct gh_err *e)
{
	cJSON *o, *err;

	if (!q->begun) {
		gh_http_error(q->r, e);
		return;
	}
	if (q->gone)
		return;
	o = cJSON_CreateObject();
	err = cJSON_AddObjectToObject(o, "error");
	cJSON_AddStringToObject(err, "code", gh_code_name(e->code));
	cJSON_AddStringToObject(err, "message", e->msg);
	cJSON_AddNumberToObject(err, "status", gh_http_status_of(e->code));
	send_json(q, o);
	if (!q->gone) {
		gh_http_sse_send(q->r, NULL, "[DONE]", 6);
		gh_http_sse_end(q->r);
	}
}

static void chat_completions(struct gh_req *r)
{
	struct oai q;
	struct outcome oc;
	struct gh_run_result res;
	struct gh_err e;

	memset(&q, 0, sizeof(q));
	memset(&oc, 0, sizeof(oc));
	memset(&res, 0, sizeof(res));
	gh_err_clear(&e);
	q.r = r;
	q.created = gh_now_ms() / 1000;
	q.last_write_ns = gh_mono_ns();
	gh_buf_init(&q.text, TEXT_MAX);
	if (parse_request(&q, &e) != GH_OK) {
		if (!r->responded)
			gh_http_error(r, &e);
		goto out;
	}
	/* the stream head waits for the first byte worth sending, so a refusal
	 * before it (policy, conflict, budget) is a plain error with its status */
	if (q.stream && gh_http_stream_acquire(r) != 0)
		goto out;
	q.sink.event = sink_event;
	q.sink.tick = q.stream ? sink_tick : NULL;
	q.sink.ud = &q;
	if (q.stream)
		gh_http_stream_wake(r, &q.sink.wake_fd, &q.sink.tick_ms);
	if (gh_run_generate(r->app, &q.rq, &q.sink, &res, &e) != GH_OK) {
		fail(&q, &e);
		goto out;
	}
	gh_strlcpy(q.run_id, res.run_id, sizeof(q.run_id));
	gh_strlcpy(q.thread_id, res.thread_id, sizeof(q.thread_id));
	oc.in_tok = res.input_tokens;
	oc.out_tok = res.output_tokens;
	if (!strcmp(res.status, "suspended")) {
		if (await_approval(&q, &res, &oc, &e) != GH_OK) {
			fail(&q, &e);
			goto out;
		}
	} else if (cJSON_GetArraySize(res.pending) > 0) {
		oc.calls = cJSON_Duplicate(res.pending, 1);
		oc.finish = "tool_calls";
	} else {
		oc.finish = finish_of(res.finish_reason);
	}
	if (q.stream)
		respond_stream(&q, &oc);
	else
		respond_json(&q, &oc);
out:
	if (r->extra_headers == q.headers)
		r->extra_headers = NULL;
	gh_run_result_clear(&res);
	cJSON_Delete(oc.calls);
	free(oc.tail);
	gh_buf_free(&q.text);
	cJSON_Delete(q.messages);
	cJSON_Delete(q.client_defs);
	cJSON_Delete(q.body);
}

const struct gh_route gh_routes_openai[] = {
	{"POST", "/v1/chat/completions", GH_AUTH_KEY, chat_completions},
	{"GET", "/v1/models", GH_AUTH_KEY, list_models},
	{"GET", "/v1/models/:id", GH_AUTH_KEY, get_model},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
