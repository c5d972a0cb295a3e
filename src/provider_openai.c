/*
 * provider_openai.c - the OpenAI Chat Completions API, and any server that
 * speaks it (vLLM, llama.cpp, Ollama, LM Studio, gateways): POST
 * {base_url}/chat/completions, JSON or SSE.
 *
 * CoreMessages become Chat Completions messages: the system prompt first;
 * user text or parts; assistant text plus tool_calls whose arguments are a
 * JSON string; every tool-result part its own role "tool" message. Streamed
 * tool calls arrive as fragments joined by their index: the first carries
 * id and function name, later ones pieces of the arguments text. A stream
 * that stops before "data: [DONE]" or without a finish_reason is truncated,
 * and reported as such rather than passed on as a short answer.
 *
 * Stateless; any thread (the exchange uses the caller's curl handles).
 */
#include "provider.h"

#include "json.h"
#include "provider_int.h"
#include "provider_wire.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define TYPE "openai"

/* An image part's URL: http(s) and data: URLs as they are, bare base64 as
 * a data: URL. Caller frees. */
static char *image_url(const cJSON *part)
{
	const char *img = gh_json_str(part, "image"), *mime = gh_json_str(part, "mimeType");
	struct gh_buf b;

	if (!img)
		return NULL;
	if (!strncmp(img, "http://", 7) || !strncmp(img, "https://", 8) ||
	    !strncmp(img, "data:", 5))
		return strdup(img);
	gh_buf_init(&b, (size_t)-1 / 2);
	if (gh_buf_printf(&b, "data:%s;base64,%s", mime ? mime : "image/png", img) != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}

static enum gh_code user_content(const struct gh_provider_conf *conf, size_t i,
				 const cJSON *content, cJSON *msg, struct gh_err *e)
{
	const cJSON *p;
	cJSON *parts;

	if (cJSON_IsString(content))
		return cJSON_AddStringToObject(msg, "content", content->valuestring)
			       ? GH_OK
			       : gh_provider_oom(conf, TYPE, e);
	if (!cJSON_IsArray(content))
		return gh_provider_bad_msg(conf, TYPE, i,
					   "content: expected a string or an array of parts", e);
	if (!(parts = cJSON_AddArrayToObject(msg, "content")))
		return gh_provider_oom(conf, TYPE, e);
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type");
		cJSON *o;

		if (type && !strcmp(type, "text")) {
			const char *text = gh_json_str(p, "text");

			if (!(o = cJSON_CreateObject()))
				return gh_provider_oom(conf, TYPE, e);
			cJSON_AddItemToArray(parts, o);
			if (!cJSON_AddStringToObject(o, "type", "text") ||
			    !cJSON_AddStringToObject(o, "text", text ? text : ""))
				return gh_provider_oom(conf, TYPE, e);
		} else if (type && !strcmp(type, "image")) {
			char *url = image_url(p);
			cJSON *iu;

			if (!url)
				return gh_provider_bad_msg(conf, TYPE, i,
							   "image part without an image", e);
			if (!(o = cJSON_CreateObject())) {
				free(url);
				return gh_provider_oom(conf, TYPE, e);
			}
			cJSON_AddItemToArray(parts, o);
			if (!cJSON_AddStringToObject(o, "type", "image_url") ||
			    !(iu = cJSON_AddObjectToObject(o, "image_url")) ||
			    !cJSON_AddStringToObject(iu, "url", url)) {
				free(url);
				return gh_provider_oom(conf, TYPE, e);
			}
			free(url);
		} else {
			return gh_provider_bad_msg(conf, TYPE, i, "unsupported content part type",
						   e);
		}
	}
	return GH_OK;
}

static enum gh_code assistant_msg(const struct gh_provider_conf *conf, size_t i,
				  const cJSON *content, cJSON *msg, struct gh_err *e)
{
	struct gh_buf text;
	const cJSON *p;
	cJSON *calls = NULL;
	enum gh_code rc = GH_OK;

	gh_buf_init(&text, (size_t)-1 / 2);
	if (gh_provider_content_text(content, &text) != GH_BUF_OK) {
		rc = gh_provider_oom(conf, TYPE, e);
		goto out;
	}
	if (cJSON_IsArray(content)) {
		cJSON_ArrayForEach(p, content) {
			const char *type = gh_json_str(p, "type");
			cJSON *c, *fn;
			char *args;

			if (!type || strcmp(type, "tool-call"))
				continue;   /* text is above; reasoning stays with us */
			if (!gh_json_str(p, "toolCallId") || !gh_json_str(p, "toolName")) {
				rc = gh_provider_bad_msg(conf, TYPE, i,
							 "tool-call part needs toolCallId and "
							 "toolName", e);
				goto out;
			}
			if (!calls && !(calls = cJSON_CreateArray()))
				goto nomem;
			if (!(c = cJSON_CreateObject()))
				goto nomem;
			cJSON_AddItemToArray(calls, c);
			args = gh_provider_args_text(cJSON_GetObjectItemCaseSensitive(p, "args"));
			if (!args)
				goto nomem;
			if (!cJSON_AddStringToObject(c, "id", gh_json_str(p, "toolCallId")) ||
			    !cJSON_AddStringToObject(c, "type", "function") ||
			    !(fn = cJSON_AddObjectToObject(c, "function")) ||
			    !cJSON_AddStringToObject(fn, "name", gh_json_str(p, "toolName")) ||
			    !cJSON_AddStringToObject(fn, "arguments", args)) {
				free(args);
				goto nomem;
			}
			free(args);
		}
	} else if (!cJSON_IsString(content) && content) {
		rc = gh_provider_bad_msg(conf, TYPE, i,
					 "content: expected a string or an array of parts", e);
		goto out;
	}
	/* with tool calls and no text, content is null */
	if (calls && text.len == 0) {
		if (!cJSON_AddNullToObject(msg, "content"))
			goto nomem;
	} else if (!cJSON_AddStringToObject(msg, "content", text.data ? text.data : "")) {
		goto nomem;
	}
	if (calls) {
		cJSON_AddItemToObject(msg, "tool_calls", calls);
		calls = NULL;
	}
	goto out;
nomem:
	rc = gh_provider_oom(conf, TYPE, e);
out:
	cJSON_Delete(calls);
	gh_buf_free(&text);
	return rc;
}

static enum gh_code add_messages(const struct gh_provider_conf *conf,
				 const struct gh_chat_request *req, cJSON *arr, struct gh_err *e)
{
	const cJSON *m;
	size_t i = 0;
	enum gh_code rc;

	if (req->system && *req->system) {
		cJSON *s = cJSON_CreateObject();

		if (!s)
			return gh_provider_oom(conf, TYPE, e);
		cJSON_AddItemToArray(arr, s);
		if (!cJSON_AddStringToObject(s, "role", "system") ||
		    !cJSON_AddStringToObject(s, "content", req->system))
			return gh_provider_oom(conf, TYPE, e);
	}
	if (req->messages && !cJSON_IsArray(req->messages))
		return gh_err_set(e, GH_E_BADREQ,
				  "provider %s (" TYPE "): messages: expected an array",
				  conf->name);
	cJSON_ArrayForEach(m, req->messages) {
		const char *role = gh_json_str(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
		cJSON *o;

		if (!role)
			return gh_provider_bad_msg(conf, TYPE, i, "role: expected a string", e);
		if (!strcmp(role, "tool")) {
			const cJSON *p;

			if (!cJSON_IsArray(content))
				return gh_provider_bad_msg(conf, TYPE, i,
							   "content: expected tool-result parts",
							   e);
			cJSON_ArrayForEach(p, content) {
				const char *type = gh_json_str(p, "type");
				const char *id = gh_json_str(p, "toolCallId");
				const cJSON *result = cJSON_GetObjectItemCaseSensitive(p, "result");
				char *res;

				if (!type || strcmp(type, "tool-result"))
					continue;
				if (!id)
					return gh_provider_bad_msg(conf, TYPE, i,
								   "tool-result part needs "
								   "toolCallId", e);
				if (!(o = cJSON_CreateObject()))
					return gh_provider_oom(conf, TYPE, e);
				cJSON_AddItemToArray(arr, o);
				res = gh_provider_result_text(result);
				if (!res || !cJSON_AddStringToObject(o, "role", "tool") ||
				    !cJSON_AddStringToObject(o, "tool_call_id", id) ||
				    !cJSON_AddStringToObject(o, "content", res)) {
					free(res);
					return gh_provider_oom(conf, TYPE, e);
				}
				free(res);
			}
			i++;
			continue;
		}
		if (!(o = cJSON_CreateObject()))
			return gh_provider_oom(conf, TYPE, e);
		cJSON_AddItemToArray(arr, o);
		if (!strcmp(role, "user")) {
			if (!cJSON_AddStringToObject(o, "role", "user"))
				return gh_provider_oom(conf, TYPE, e);
			if ((rc = user_content(conf, i, content, o, e)) != GH_OK)
				return rc;
		} else if (!strcmp(role, "assistant")) {
			if (!cJSON_AddStringToObject(o, "role", "assistant"))
				return gh_provider_oom(conf, TYPE, e);
			if ((rc = assistant_msg(conf, i, content, o, e)) != GH_OK)
				return rc;
		} else if (!strcmp(role, "system")) {
			struct gh_buf t;
			int brc;

			gh_buf_init(&t, (size_t)-1 / 2);
			brc = gh_provider_content_text(content, &t);
			if (brc != GH_BUF_OK || !cJSON_AddStringToObject(o, "role", "system") ||
			    !cJSON_AddStringToObject(o, "content", t.data ? t.data : "")) {
				gh_buf_free(&t);
				return gh_provider_oom(conf, TYPE, e);
			}
			gh_buf_free(&t);
		} else {
			return gh_provider_bad_msg(conf, TYPE, i,
						   "role: expected user, assistant, tool or system",
						   e);
		}
		i++;
	}
	return GH_OK;
}

static enum gh_code build_body(const struct gh_provider_conf *conf,
			       const struct gh_chat_request *req, char **out, struct gh_err *e)
{
	cJSON *b = cJSON_CreateObject(), *msgs, *tools, *so;
	enum gh_code rc = GH_OK;
	size_t i;

	*out = NULL;
	if (!b || !cJSON_AddStringToObject(b, "model", req->model ? req->model : "") ||
	    !(msgs = cJSON_AddArrayToObject(b, "messages")))
		goto nomem;
	if ((rc = add_messages(conf, req, msgs, e)) != GH_OK)
		goto out;
	if (req->ntools) {
		if (!(tools = cJSON_AddArrayToObject(b, "tools")))
			goto nomem;
		for (i = 0; i < req->ntools; i++) {
			const struct gh_tool_spec *t = &req->tools[i];
			cJSON *o = cJSON_CreateObject(), *fn;

			if (!o)
				goto nomem;
			cJSON_AddItemToArray(tools, o);
			if (!cJSON_AddStringToObject(o, "type", "function") ||
			    !(fn = cJSON_AddObjectToObject(o, "function")) ||
			    gh_provider_tool_fields(fn, t, "parameters") != 0)
				goto nomem;
		}
	}
	if (req->has_temperature && !cJSON_AddNumberToObject(b, "temperature", req->temperature))
		goto nomem;
	if (req->max_tokens > 0 &&
	    !cJSON_AddNumberToObject(b, "max_tokens", (double)req->max_tokens))
		goto nomem;
	if (req->stream) {
		if (!cJSON_AddTrueToObject(b, "stream") ||
		    !(so = cJSON_AddObjectToObject(b, "stream_options")) ||
		    !cJSON_AddTrueToObject(so, "include_usage"))
			goto nomem;
	}
	if (!(*out = gh_json_dump(b)))
		goto nomem;
	goto out;
nomem:
	rc = gh_provider_oom(conf, TYPE, e);
out:
	cJSON_Delete(b);
	return rc;
}

/* OpenAI's finish_reason. */
static const struct gh_provider_finish_name finish_reasons[] = {
	{"stop", GH_FINISH_STOP},
	{"length", GH_FINISH_LENGTH},
	{"tool_calls", GH_FINISH_TOOL_CALLS},
	{"function_call", GH_FINISH_TOOL_CALLS},
	{"content_filter", GH_FINISH_CONTENT_FILTER},
	{NULL, GH_FINISH_OTHER},
};

static void read_usage(const cJSON *usage, int64_t *in, int64_t *out)
{
	if (!cJSON_IsObject(usage))
		return;
	*in = gh_json_int(usage, "prompt_tokens", *in);
	*out = gh_json_int(usage, "completion_tokens", *out);
}

static enum gh_code parse_reply(const struct gh_provider_conf *conf, const cJSON *j,
				struct gh_chat_response *out, struct gh_err *e)
{
	const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
	const cJSON *c0 = cJSON_GetArrayItem(choices, 0);
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
	const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *tc;
	const char *text = gh_json_str(msg, "content");
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(msg))
		return gh_err_set(e, GH_E_UPSTREAM,
				  "provider %s (" TYPE "): reply has no choices[0].message",
				  conf->name);
	if (!(out->text = strdup(text ? text : "")))
		goto nomem;
	if (cJSON_IsArray(calls) && cJSON_GetArraySize(calls) > 0) {
		size_t max = (size_t)cJSON_GetArraySize(calls);

		if (max > GH_PROVIDER_MAX_CALLS) {
			gh_chat_response_clear(out);
			return gh_err_set(e, GH_E_UPSTREAM,
					  "provider %s (" TYPE "): more than %d tool calls in one "
					  "reply", conf->name, GH_PROVIDER_MAX_CALLS);
		}
		if (!(out->calls = calloc(max, sizeof(*out->calls))))
			goto nomem;
		cJSON_ArrayForEach(tc, calls) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
			const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
			char *a = cJSON_IsString(args) ? strdup(args->valuestring)
						       : gh_provider_args_text(args);

			if (!a)
				goto nomem;
			out->ncalls = ++n;
			if (gh_provider_call_set(&out->calls[n - 1], gh_json_str(tc, "id"),
						 gh_json_str(fn, "name"), a, strlen(a)) != GH_OK) {
				free(a);
				goto nomem;
			}
			free(a);
		}
	}
	out->finish = gh_provider_finish(finish_reasons, gh_json_str(c0, "finish_reason"));
	if (out->ncalls && out->finish == GH_FINISH_STOP)
		out->finish = GH_FINISH_TOOL_CALLS;
	read_usage(cJSON_GetObjectItemCaseSensitive(j, "usage"), &out->input_tokens,
		   &out->output_tokens);
	return GH_OK;
nomem:
	gh_chat_response_clear(out);
	return gh_provider_oom(conf, TYPE, e);
}

/* One chunk of a stream: "data: {...}" or "data: [DONE]". */
static int on_event(struct gh_provider_stream *st, const struct gh_sse_event *ev)
{
	const cJSON *choices, *c, *err;
	struct gh_err pe;
	cJSON *j;
	int stop = 0;

	if (st->done)
		return 0;
	if (!strcmp(ev->data, "[DONE]")) {
		st->done = 1;
		return 0;
	}
	if (!ev->data_len)
		return 0;
	if (gh_json_parse_opts(ev->data, ev->data_len, "chunk", GH_JSON_UPSTREAM, &j, &pe) != GH_OK)
		return gh_provider_stream_fail(st, "malformed chunk: %s", pe.msg);
	if ((err = cJSON_GetObjectItemCaseSensitive(j, "error"))) {
		const char *m = gh_json_str(err, "message");

		stop = gh_provider_stream_fail_upstream(st, "stream error",
							"stream error: %.300s",
							m ? m : cJSON_IsString(err) ? err->valuestring
										    : "(no message)");
		goto out;
	}
	choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
	cJSON_ArrayForEach(c, choices) {
		const cJSON *delta = cJSON_GetObjectItemCaseSensitive(c, "delta"), *tc;
		const cJSON *calls = cJSON_GetObjectItemCaseSensitive(delta, "tool_calls");
		const char *text = gh_json_str(delta, "content"), *fin;
		int pos = 0;

		if (gh_json_int(c, "index", 0) != 0)
			continue;   /* n > 1 was never asked for */
		if (text && (stop = gh_provider_stream_text(st, text, strlen(text))))
			goto out;
		cJSON_ArrayForEach(tc, calls) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
			const char *id = gh_json_str(tc, "id"), *name = gh_json_str(fn, "name");
			const char *args = gh_json_str(fn, "arguments");
			int64_t idx = gh_json_int(tc, "index", pos);
			struct gh_provider_acc *a;

			pos++;
			if (idx < 0 || idx >= GH_PROVIDER_MAX_CALLS) {
				stop = gh_provider_stream_fail(st, "tool call index out of range");
				goto out;
			}
			a = gh_provider_stream_call(st, (int)idx);
			/* a new id at a used index is a new call (some servers
			 * number every call 0) */
			if (!a || (id && *id && *a->id && strcmp(id, a->id))) {
				stop = gh_provider_stream_call_start(st, (int)idx, id, name, &a);
				if (stop)
					goto out;
			} else if (id && *id && !*a->id) {
				char *dup = strdup(id);

				if (!dup) {
					stop = gh_provider_stream_fail(st, "out of memory");
					goto out;
				}
				free(a->id);
				a->id = dup;
			}
			if ((stop = gh_provider_stream_call_args(st, a, args)))
				goto out;
		}
		if ((fin = gh_json_str(c, "finish_reason"))) {
			st->finish = gh_provider_finish(finish_reasons, fin);
			st->have_finish = 1;
		}
	}
	read_usage(cJSON_GetObjectItemCaseSensitive(j, "usage"), &st->input_tokens,
		   &st->output_tokens);
out:
	cJSON_Delete(j);
	return stop;
}

/* What a stream that stopped is missing; NULL when it ended whole. */
static const char *incomplete(const struct gh_provider_stream *st)
{
	if (!st->have_finish)
		return " (no finish_reason)";
	return st->done ? NULL : " (no [DONE])";
}

/* The key as Authorization: Bearer (made in scratch). */
static enum gh_code headers(const struct gh_provider_conf *conf, struct gh_upstream_header *hdr,
			    size_t *n, struct gh_buf *scratch, struct gh_err *e)
{
	if (!conf->api_key || !*conf->api_key)
		return GH_OK;
	if (gh_buf_printf(scratch, "Bearer %s", conf->api_key) != GH_BUF_OK)
		return gh_provider_oom(conf, TYPE, e);
	hdr[0].name = "Authorization";
	hdr[0].value = scratch->data;
	(*n)++;
	return GH_OK;
}

static const struct gh_provider_wire wire = {
	TYPE, "/chat/completions", build_body, headers, parse_reply, on_event, incomplete,
};

const struct gh_provider_ops gh_provider_openai = {"openai", NULL, &wire};
