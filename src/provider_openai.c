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
 * Stateless; any thread (the exchange takes curl handles from the pool).
 */
#include "provider.h"

#include "jread.h"
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

/* The request body is written as it is built, with no tree of its own:
 * the request's messages and tool schemas are read where they are. A
 * failed write sticks in rc and the body is then discarded. */
struct body {
	struct gh_buf b;
	int rc;
};

static void put(struct body *o, const char *s)
{
	if (o->rc == GH_BUF_OK)
		o->rc = gh_buf_puts(&o->b, s);
}

static void put_str(struct body *o, const char *s)
{
	if (o->rc == GH_BUF_OK)
		o->rc = gh_buf_json_str(&o->b, s);
}

static void put_strn(struct body *o, const char *s, size_t n)
{
	if (o->rc == GH_BUF_OK)
		o->rc = gh_buf_json_strn(&o->b, s, n);
}

static void put_json(struct body *o, const cJSON *v)
{
	if (o->rc == GH_BUF_OK)
		o->rc = gh_json_print(v, &o->b);
}

static enum gh_code user_content(const struct gh_provider_conf *conf, size_t i,
				 const cJSON *content, struct body *o, struct gh_err *e)
{
	const cJSON *p;

	if (cJSON_IsString(content)) {
		put_str(o, content->valuestring);
		return GH_OK;
	}
	if (!cJSON_IsArray(content))
		return gh_provider_bad_msg(conf, TYPE, i,
					   "content: expected a string or an array of parts", e);
	put(o, "[");
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type");

		if (p != content->child)
			put(o, ",");
		if (type && !strcmp(type, "text")) {
			const char *text = gh_json_str(p, "text");

			put(o, "{\"type\":\"text\",\"text\":");
			put_str(o, text ? text : "");
			put(o, "}");
		} else if (type && !strcmp(type, "image")) {
			char *url = image_url(p);

			if (!url)
				return gh_provider_bad_msg(conf, TYPE, i,
							   "image part without an image", e);
			put(o, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
			put_str(o, url);
			put(o, "}}");
			free(url);
		} else {
			return gh_provider_bad_msg(conf, TYPE, i, "unsupported content part type",
						   e);
		}
	}
	put(o, "]");
	return GH_OK;
}

/* An assistant message: its text (null when it only calls tools), then its
 * tool calls with their arguments as JSON text. */
static enum gh_code assistant_msg(const struct gh_provider_conf *conf, size_t i,
				  const cJSON *content, struct body *o, struct gh_err *e)
{
	struct gh_buf text;
	const cJSON *p;
	size_t ncalls = 0;
	enum gh_code rc = GH_OK;

	if (!cJSON_IsArray(content) && !cJSON_IsString(content) && content)
		return gh_provider_bad_msg(conf, TYPE, i,
					   "content: expected a string or an array of parts", e);
	cJSON_ArrayForEach(p, content) { /* a string has no children */
		const char *type = gh_json_str(p, "type");

		if (!type || strcmp(type, "tool-call"))
			continue;   /* text is below; reasoning stays with us */
		if (!gh_json_str(p, "toolCallId") || !gh_json_str(p, "toolName"))
			return gh_provider_bad_msg(conf, TYPE, i,
						   "tool-call part needs toolCallId and toolName",
						   e);
		ncalls++;
	}
	gh_buf_init(&text, (size_t)-1 / 2);
	if (gh_provider_content_text(content, &text) != GH_BUF_OK) {
		gh_buf_free(&text);
		return gh_provider_oom(conf, TYPE, e);
	}
	if (ncalls && text.len == 0)
		put(o, "null");
	else
		put_strn(o, text.data ? text.data : "", text.len);
	gh_buf_free(&text);
	if (!ncalls)
		return GH_OK;
	put(o, ",\"tool_calls\":[");
	ncalls = 0;
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type");
		char *args;

		if (!type || strcmp(type, "tool-call"))
			continue;
		if (!(args = gh_provider_args_text(cJSON_GetObjectItemCaseSensitive(p, "args")))) {
			rc = gh_provider_oom(conf, TYPE, e);
			break;
		}
		put(o, ncalls++ ? ",{\"id\":" : "{\"id\":");
		put_str(o, gh_json_str(p, "toolCallId"));
		put(o, ",\"type\":\"function\",\"function\":{\"name\":");
		put_str(o, gh_json_str(p, "toolName"));
		put(o, ",\"arguments\":");
		put_str(o, args);
		put(o, "}}");
		free(args);
	}
	put(o, "]");
	return rc;
}

static enum gh_code add_messages(const struct gh_provider_conf *conf,
				 const struct gh_chat_request *req, struct body *o,
				 struct gh_err *e)
{
	const cJSON *m;
	size_t i = 0, n = 0;
	enum gh_code rc;

	if (req->system && *req->system) {
		put(o, "{\"role\":\"system\",\"content\":");
		put_str(o, req->system);
		put(o, "}");
		n++;
	}
	if (req->messages && !cJSON_IsArray(req->messages))
		return gh_err_set(e, GH_E_BADREQ,
				  "provider %s (" TYPE "): messages: expected an array",
				  conf->name);
	cJSON_ArrayForEach(m, req->messages) {
		const char *role = gh_json_str(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");

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
				char *res;

				if (!type || strcmp(type, "tool-result"))
					continue;
				if (!id)
					return gh_provider_bad_msg(conf, TYPE, i,
								   "tool-result part needs "
								   "toolCallId", e);
				res = gh_provider_result_text(
					cJSON_GetObjectItemCaseSensitive(p, "result"));
				if (!res)
					return gh_provider_oom(conf, TYPE, e);
				put(o, n++ ? ",{\"role\":\"tool\",\"tool_call_id\":"
					   : "{\"role\":\"tool\",\"tool_call_id\":");
				put_str(o, id);
				put(o, ",\"content\":");
				put_str(o, res);
				put(o, "}");
				free(res);
			}
			i++;
			continue;
		}
		if (n++)
			put(o, ",");
		if (!strcmp(role, "user")) {
			put(o, "{\"role\":\"user\",\"content\":");
			if ((rc = user_content(conf, i, content, o, e)) != GH_OK)
				return rc;
		} else if (!strcmp(role, "assistant")) {
			put(o, "{\"role\":\"assistant\",\"content\":");
			if ((rc = assistant_msg(conf, i, content, o, e)) != GH_OK)
				return rc;
		} else if (!strcmp(role, "system")) {
			struct gh_buf t;

			gh_buf_init(&t, (size_t)-1 / 2);
			if (gh_provider_content_text(content, &t) != GH_BUF_OK) {
				gh_buf_free(&t);
				return gh_provider_oom(conf, TYPE, e);
			}
			put(o, "{\"role\":\"system\",\"content\":");
			put_strn(o, t.data ? t.data : "", t.len);
			gh_buf_free(&t);
		} else {
			return gh_provider_bad_msg(conf, TYPE, i,
						   "role: expected user, assistant, tool or system",
						   e);
		}
		put(o, "}");
		i++;
	}
	return GH_OK;
}

static enum gh_code build_body(const struct gh_provider_conf *conf,
			       const struct gh_chat_request *req, char **out, struct gh_err *e)
{
	struct body o;
	enum gh_code rc;
	size_t i;

	*out = NULL;
	gh_buf_init(&o.b, (size_t)1 << 30);
	o.rc = GH_BUF_OK;
	put(&o, "{\"model\":");
	put_str(&o, req->model ? req->model : "");
	put(&o, ",\"messages\":[");
	if ((rc = add_messages(conf, req, &o, e)) != GH_OK)
		goto out;
	put(&o, "]");
	for (i = 0; i < req->ntools; i++) {
		const struct gh_tool_spec *t = &req->tools[i];

		put(&o, i ? ",{\"type\":\"function\",\"function\":{\"name\":"
			  : ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":");
		put_str(&o, t->name);
		if (t->description) {
			put(&o, ",\"description\":");
			put_str(&o, t->description);
		}
		put(&o, ",\"parameters\":");
		if (t->schema)
			put_json(&o, t->schema);
		else
			put(&o, "{\"type\":\"object\",\"properties\":{}}");
		put(&o, i + 1 == req->ntools ? "}}]" : "}}");
	}
	if (req->has_temperature) {
		put(&o, ",\"temperature\":");
		if (o.rc == GH_BUF_OK)
			o.rc = gh_json_print_number(req->temperature, &o.b);
	}
	if (req->max_tokens > 0) {
		put(&o, ",\"max_tokens\":");
		if (o.rc == GH_BUF_OK)
			o.rc = gh_json_print_number((double)req->max_tokens, &o.b);
	}
	if (req->stream)
		put(&o, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
	put(&o, "}");
	if (o.rc != GH_BUF_OK) {
		rc = gh_provider_oom(conf, TYPE, e);
		goto out;
	}
	*out = gh_buf_detach(&o.b);
	if (!*out)
		rc = gh_provider_oom(conf, TYPE, e);
out:
	gh_buf_free(&o.b);
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

/* ---- the reply read without a tree ----
 *
 * What parse_reply reads, straight from the text: choices[0]'s message
 * (content, tool_calls) and finish_reason, and usage's token counts, the
 * rest checked and skipped. Whatever parse_reply would refuse or read in
 * cJSON's own way (choices or an entry that is not what it should be,
 * arguments that are not a string, too many calls, an integer count
 * written as 5.0) and whatever the reader does not take (jread.h) goes
 * back to the tree. fuzz_openai_reply holds the two to the same result. */

struct reply_reader {
	struct gh_jr jr;
	struct gh_chat_response *out;
	struct gh_buf text, finish, id, name, args;
	int has_text, has_finish, has_message;
	size_t calls_cap;
};

/* One tool_calls entry, appended to out->calls. */
static int read_call(struct reply_reader *rr)
{
	struct gh_jr *r = &rr->jr;
	struct gh_chat_response *out = rr->out;
	int has_id = 0, has_name = 0, has_args = 0, k;
	const char *n;
	size_t len;

	if (out->ncalls == GH_PROVIDER_MAX_CALLS || gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &n, &len)) == 1) {
		if (GH_JR_NAME_IS(n, len, "id")) {
			if ((k = gh_jr_string_opt(r, &rr->id, &has_id)) != 1)
				return k;
		} else if (GH_JR_NAME_IS(n, len, "function")) {
			if (gh_jr_object(r))
				return 0;
			while ((k = gh_jr_member(r, &n, &len)) == 1) {
				if (GH_JR_NAME_IS(n, len, "name")) {
					if ((k = gh_jr_string_opt(r, &rr->name, &has_name)) != 1)
						return k;
				} else if (GH_JR_NAME_IS(n, len, "arguments")) {
					if (gh_jr_peek(r) != GH_JR_STRING)
						return 0;
					if ((k = gh_jr_string_opt(r, &rr->args, &has_args)) != 1)
						return k;
				} else if (gh_jr_skip(r)) {
					return 0;
				}
			}
			if (k < 0)
				return 0;
		} else if (gh_jr_skip(r)) {
			return 0;
		}
	}
	if (k < 0)
		return 0;
	if (out->ncalls == rr->calls_cap) {
		size_t cap = rr->calls_cap ? rr->calls_cap * 2 : 4;
		struct gh_tool_call *c = realloc(out->calls, cap * sizeof(*c));

		if (!c)
			return -1;
		out->calls = c;
		rr->calls_cap = cap;
	}
	out->ncalls++;
	/* no arguments at all are parse_reply's "{}" */
	if (gh_provider_call_set(&out->calls[out->ncalls - 1], has_id ? rr->id.data : NULL,
				 has_name ? rr->name.data : NULL,
				 has_args ? rr->args.data : "{}",
				 has_args ? rr->args.len : 2) != GH_OK)
		return -1;
	return 1;
}

/* choices[0].message. */
static int read_message(struct reply_reader *rr)
{
	struct gh_jr *r = &rr->jr;
	const char *n;
	size_t len;
	int k;

	if (gh_jr_object(r))
		return 0;
	rr->has_message = 1;
	while ((k = gh_jr_member(r, &n, &len)) == 1) {
		if (GH_JR_NAME_IS(n, len, "content")) {
			if ((k = gh_jr_string_opt(r, &rr->text, &rr->has_text)) != 1)
				return k;
		} else if (GH_JR_NAME_IS(n, len, "tool_calls") && gh_jr_peek(r) == GH_JR_ARRAY) {
			if (gh_jr_array(r))
				return 0;
			while ((k = gh_jr_next(r)) == 1)
				if ((k = read_call(rr)) != 1)
					return k;
			if (k < 0)
				return 0;
		} else if (gh_jr_skip(r)) {
			return 0;
		}
	}
	return k < 0 ? 0 : 1;
}

/* choices: the first entry read, the others checked. */
static int read_choices(struct reply_reader *rr)
{
	struct gh_jr *r = &rr->jr;
	const char *n;
	size_t len;
	int k, i = 0;

	if (gh_jr_array(r))
		return 0;
	while ((k = gh_jr_next(r)) == 1) {
		if (i++) {
			if (gh_jr_skip(r))
				return 0;
			continue;
		}
		if (gh_jr_object(r))
			return 0;
		while ((k = gh_jr_member(r, &n, &len)) == 1) {
			if (GH_JR_NAME_IS(n, len, "message")) {
				if ((k = read_message(rr)) != 1)
					return k;
			} else if (GH_JR_NAME_IS(n, len, "finish_reason")) {
				if ((k = gh_jr_string_opt(r, &rr->finish, &rr->has_finish)) != 1)
					return k;
			} else if (gh_jr_skip(r)) {
				return 0;
			}
		}
		if (k < 0)
			return 0;
	}
	return k < 0 ? 0 : 1;
}

/* usage's two counts into *in and *out; a count that is not a number
 * keeps what they held (read_usage's default). */
static int read_usage_text(struct gh_jr *r, int64_t *in, int64_t *out)
{
	const char *n;
	size_t len;
	int k;

	if (gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &n, &len)) == 1) {
		int64_t *v = GH_JR_NAME_IS(n, len, "prompt_tokens")       ? in
			     : GH_JR_NAME_IS(n, len, "completion_tokens") ? out
								     : NULL;

		if (v && gh_jr_peek(r) == GH_JR_NUMBER ? gh_jr_int(r, v) : gh_jr_skip(r))
			return 0;
	}
	return k < 0 ? 0 : 1;
}

static int read_reply(const char *s, size_t n, struct gh_chat_response *out)
{
	struct reply_reader rr;
	const char *name;
	size_t len;
	int k, rc = 0;

	memset(out, 0, sizeof(*out));
	rr.out = out;
	rr.has_text = rr.has_finish = rr.has_message = 0;
	rr.calls_cap = 0;
	gh_buf_init(&rr.text, n);
	gh_buf_init(&rr.finish, n);
	gh_buf_init(&rr.id, n);
	gh_buf_init(&rr.name, n);
	gh_buf_init(&rr.args, n);
	gh_jr_init(&rr.jr, s, n);
	if (gh_jr_object(&rr.jr))
		goto out;
	while ((k = gh_jr_member(&rr.jr, &name, &len)) == 1) {
		if (GH_JR_NAME_IS(name, len, "choices"))
			k = read_choices(&rr);
		else if (GH_JR_NAME_IS(name, len, "usage") && gh_jr_peek(&rr.jr) == GH_JR_OBJECT)
			k = read_usage_text(&rr.jr, &out->input_tokens, &out->output_tokens);
		else
			k = gh_jr_skip(&rr.jr) ? 0 : 1;
		if (k != 1) {
			rc = k;
			goto out;
		}
	}
	if (k < 0 || gh_jr_done(&rr.jr) || !rr.has_message)
		goto out;
	rc = -1;
	if (!(out->text = rr.has_text ? gh_buf_detach(&rr.text) : strdup("")))
		goto out;
	out->finish = gh_provider_finish(finish_reasons, rr.has_finish ? rr.finish.data : NULL);
	if (out->ncalls && out->finish == GH_FINISH_STOP)
		out->finish = GH_FINISH_TOOL_CALLS;
	rc = 1;
out:
	if (rc != 1)
		gh_chat_response_clear(out);
	gh_buf_free(&rr.text);
	gh_buf_free(&rr.finish);
	gh_buf_free(&rr.id);
	gh_buf_free(&rr.name);
	gh_buf_free(&rr.args);
	return rc;
}

/* ---- a stream's chunk read without a tree ----
 *
 * Most chunks of a stream are one choice's text delta,
 * {"id":..,"choices":[{"index":0,"delta":{"content":" w00041"},
 * "finish_reason":null}]}, and the last ones bring finish_reason and
 * usage. read_chunk takes such a chunk straight from its text. Whatever
 * else on_event_tree reads (an error, tool calls, more than one choice, a
 * choice or delta that is not an object, an index other than 0 or a count
 * not written as an integer) and whatever the reader does not take
 * (jread.h) goes to the tree. fuzz_openai_chunk holds the two to the same
 * result. */

struct chunk {
	struct gh_jr jr;
	struct gh_buf text, finish;
	int has_text, has_finish;
	int64_t in, out;        /* the stream's counts, replaced when given */
};

static int read_delta(struct gh_jr *r, struct chunk *c)
{
	const char *n;
	size_t len;
	int k;

	if (gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &n, &len)) == 1) {
		if (GH_JR_NAME_IS(n, len, "content")) {
			if (gh_jr_string_opt(r, &c->text, &c->has_text) != 1)
				return 0;
		} else if (GH_JR_NAME_IS(n, len, "tool_calls") || gh_jr_skip(r)) {
			return 0;
		}
	}
	return k < 0 ? 0 : 1;
}

/* The one choice: index 0 (or none, or not a number: gh_json_int's
 * default), its delta and finish_reason. */
static int read_choice(struct gh_jr *r, struct chunk *c)
{
	const char *n;
	size_t len;
	int64_t index;
	int k;

	if (gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &n, &len)) == 1) {
		if (GH_JR_NAME_IS(n, len, "index") && gh_jr_peek(r) == GH_JR_NUMBER) {
			if (gh_jr_int(r, &index) || index != 0)
				return 0;
		} else if (GH_JR_NAME_IS(n, len, "delta")) {
			if (gh_jr_peek(r) != GH_JR_OBJECT || read_delta(r, c) != 1)
				return 0;
		} else if (GH_JR_NAME_IS(n, len, "finish_reason")) {
			if (gh_jr_string_opt(r, &c->finish, &c->has_finish) != 1)
				return 0;
		} else if (gh_jr_skip(r)) {
			return 0;
		}
	}
	return k < 0 ? 0 : 1;
}

/* 1 when c holds the chunk as on_event_tree would read it, 0 to give it
 * to the tree. c's buffers are the caller's to free either way. */
static int read_chunk(const char *s, size_t n, struct chunk *c)
{
	struct gh_jr *r = &c->jr;
	const char *name;
	size_t len;
	int k, i;

	gh_jr_init(r, s, n);
	if (gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &name, &len)) == 1) {
		if (GH_JR_NAME_IS(name, len, "error")) {
			return 0;
		} else if (GH_JR_NAME_IS(name, len, "choices")) {
			if (gh_jr_array(r))
				return 0;
			for (i = 0; (k = gh_jr_next(r)) == 1; i++)
				if (i || gh_jr_peek(r) != GH_JR_OBJECT || read_choice(r, c) != 1)
					return 0;
			if (k < 0)
				return 0;
		} else if (GH_JR_NAME_IS(name, len, "usage") && gh_jr_peek(r) == GH_JR_OBJECT) {
			if (read_usage_text(r, &c->in, &c->out) != 1)
				return 0;
		} else if (gh_jr_skip(r)) {
			return 0;
		}
	}
	return k == 0 && !gh_jr_done(r);
}

/* What on_event_tree does with the chunk read_chunk read. */
static int apply_chunk(struct gh_provider_stream *st, const struct chunk *c)
{
	if (c->has_text && gh_provider_stream_text(st, c->text.data, c->text.len))
		return 1;
	if (c->has_finish) {
		st->finish = gh_provider_finish(finish_reasons, c->finish.data);
		st->have_finish = 1;
	}
	st->input_tokens = c->in;
	st->output_tokens = c->out;
	return 0;
}

static int on_event_tree(struct gh_provider_stream *st, const struct gh_sse_event *ev);

/* One chunk of a stream: "data: {...}" or "data: [DONE]". */
static int on_event(struct gh_provider_stream *st, const struct gh_sse_event *ev)
{
	struct chunk c;
	int stop;

	if (st->done || !ev->data_len || !strcmp(ev->data, "[DONE]"))
		return on_event_tree(st, ev);
	gh_buf_init(&c.text, ev->data_len);
	gh_buf_init(&c.finish, ev->data_len);
	c.has_text = c.has_finish = 0;
	c.in = st->input_tokens;
	c.out = st->output_tokens;
	stop = read_chunk(ev->data, ev->data_len, &c) ? apply_chunk(st, &c)
						       : on_event_tree(st, ev);
	gh_buf_free(&c.text);
	gh_buf_free(&c.finish);
	return stop;
}

/* One chunk of a stream through its cJSON tree. */
static int on_event_tree(struct gh_provider_stream *st, const struct gh_sse_event *ev)
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
	if (gh_buf_append(scratch, "Bearer ", 7) != GH_BUF_OK ||
	    gh_buf_puts(scratch, conf->api_key) != GH_BUF_OK)
		return gh_provider_oom(conf, TYPE, e);
	hdr[0].name = "Authorization";
	hdr[0].value = scratch->data;
	(*n)++;
	return GH_OK;
}

static const struct gh_provider_wire wire = {
	TYPE, "/chat/completions", build_body, headers, parse_reply, on_event, incomplete,
	read_reply, on_event_tree,
};

const struct gh_provider_ops gh_provider_openai = {"openai", NULL, &wire};
