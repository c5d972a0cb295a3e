/*
 * provider_mock.c - an offline, deterministic model driven by rules in the
 * provider's config object, so gatehouse can be tried, demonstrated and
 * tested without an LLM service:
 *
 *   "offline": { "type": "mock",
 *     "rules": [
 *       { "if_contains": "remember", "tool": "memory_save",
 *         "args": { "content": "{{after:remember that}}" },
 *         "then": "Noted: {{result.content}}" },
 *       { "if_contains": "hello", "text": "Hello! I am gatehouse's offline mock model." } ],
 *     "default": "You said: {{message}}",
 *     "after_tool": "{{tool}} returned {{result}}" }
 *
 * When the conversation ends with tool results, each result is answered
 * with the "then" of the first rule for that tool (whose if_contains
 * matches the last user message), else "after_tool", else
 * "{{tool}} returned {{result}}". Otherwise the first rule whose
 * if_contains occurs in the last user message (ASCII case-insensitive; no
 * if_contains matches always) decides: a "tool" rule calls that tool when
 * the request offers it (else the next rule is tried), a "text" rule
 * replies. With no rule, "default" (or "You said: {{message}}") replies.
 *
 * Templates: {{message}} the last user text; {{after:X}} what follows the
 * first occurrence of X in it, trimmed (all of it when X is absent);
 * {{tool}} the tool's name; {{result}} the tool result (a string as is,
 * else compact JSON); {{result.a.0.b}} a path into it ("" when missing).
 * Unknown {{...}} stay as written. A rendered text holds at most 64 KB.
 * Usage counts whitespace-separated words.
 *
 * Stateless apart from one atomic counter for tool call ids; any thread.
 */
#include "provider.h"

#include "json.h"
#include "provider_int.h"
#include "util.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TYPE "mock"
#define OUT_MAX (64u << 10)          /* a rendered text */
#define USER_MAX (16u << 20)         /* the last user text we look at */
#define KEY_MAX 256                  /* a {{...}} key */

static atomic_uint_fast64_t next_call = 1;

/* What templates can refer to. */
struct tctx {
	const char *message;
	const char *tool;            /* NULL outside a tool result */
	const cJSON *result;
};

/* First ASCII case-insensitive occurrence of needle in hay, or NULL. */
static const char *ci_find(const char *hay, const char *needle)
{
	size_t n = strlen(needle), i;

	if (!n)
		return hay;
	for (; *hay; hay++) {
		for (i = 0; i < n && hay[i]; i++)
			if (tolower((unsigned char)hay[i]) != tolower((unsigned char)needle[i]))
				break;
		if (i == n)
			return hay;
	}
	return NULL;
}

/* Appends what fits of s[0..n) under the cap, never cutting a UTF-8
 * sequence; GH_BUF_TOOBIG once the output is full. */
static int put(struct gh_buf *b, const char *s, size_t n)
{
	size_t room = b->cap - b->len;
	int rc;

	if (n <= room)
		return gh_buf_append(b, s, n);
	n = room;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	rc = gh_buf_append(b, s, n);
	return rc == GH_BUF_OK ? GH_BUF_TOOBIG : rc;
}

static int put_str(struct gh_buf *b, const char *s)
{
	return put(b, s, strlen(s));
}

/* A JSON value as text: strings raw, the rest compact. */
static int put_value(struct gh_buf *b, const cJSON *v)
{
	char *s;
	int rc;

	if (!v)
		return GH_BUF_OK;
	if (cJSON_IsString(v))
		return put_str(b, v->valuestring);
	if (!(s = gh_json_dump(v)))
		return GH_BUF_NOMEM;
	rc = put_str(b, s);
	free(s);
	return rc;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* {{after:X}} */
static int put_after(struct gh_buf *b, const char *msg, const char *x)
{
	const char *hit = *x ? ci_find(msg, x) : NULL;
	const char *s = hit ? hit + strlen(x) : msg, *end = s + strlen(s);

	while (s < end && is_space(*s))
		s++;
	while (end > s && is_space(end[-1]))
		end--;
	return put(b, s, (size_t)(end - s));
}

/* {{result.a.0.b}}: path is "a.0.b" (modified in place). */
static int put_path(struct gh_buf *b, const cJSON *v, char *path)
{
	char *seg = path, *dot;

	while (v && seg) {
		dot = strchr(seg, '.');
		if (dot)
			*dot = '\0';
		if (cJSON_IsObject(v)) {
			v = cJSON_GetObjectItemCaseSensitive(v, seg);
		} else if (cJSON_IsArray(v)) {
			int64_t i;

			v = gh_parse_i64(seg, 0, INT32_MAX, &i) == 0 ? cJSON_GetArrayItem(v, (int)i)
								      : NULL;
		} else {
			v = NULL;
		}
		seg = dot ? dot + 1 : NULL;
	}
	return put_value(b, v);
}

/* Renders tpl into out (cap OUT_MAX). Only GH_BUF_NOMEM is an error: a
 * full output just stops. */
static int render(const char *tpl, const struct tctx *c, struct gh_buf *out)
{
	const char *p = tpl, *open, *close;
	char key[KEY_MAX];
	int rc = GH_BUF_OK;

	while (rc == GH_BUF_OK && (open = strstr(p, "{{")) && (close = strstr(open + 2, "}}"))) {
		const char *k = open + 2, *ke = close;
		size_t kl;

		if ((rc = put(out, p, (size_t)(open - p))) != GH_BUF_OK)
			break;
		p = close + 2;
		while (k < ke && is_space(*k))
			k++;
		while (ke > k && is_space(ke[-1]))
			ke--;
		kl = (size_t)(ke - k);
		if (kl >= sizeof(key)) {
			rc = put(out, open, (size_t)(p - open));
			continue;
		}
		memcpy(key, k, kl);
		key[kl] = '\0';
		if (!strcmp(key, "message"))
			rc = put_str(out, c->message);
		else if (!strcmp(key, "tool"))
			rc = put_str(out, c->tool ? c->tool : "");
		else if (!strcmp(key, "result"))
			rc = put_value(out, c->result);
		else if (!strncmp(key, "result.", 7))
			rc = put_path(out, c->result, key + 7);
		else if (!strncmp(key, "after:", 6))
			rc = put_after(out, c->message, key + 6);
		else
			rc = put(out, open, (size_t)(p - open));   /* left as written */
	}
	if (rc == GH_BUF_OK)
		rc = put_str(out, p);
	return rc == GH_BUF_TOOBIG ? GH_BUF_OK : rc;
}

/* Renders every string in v (an args object copy) in place. */
static int render_values(cJSON *v, const struct tctx *c)
{
	cJSON *it;
	int rc;

	if (cJSON_IsString(v)) {
		struct gh_buf b;
		char *s;

		gh_buf_init(&b, OUT_MAX);
		if ((rc = render(v->valuestring, c, &b)) != GH_BUF_OK ||
		    !(s = gh_buf_detach(&b))) {
			gh_buf_free(&b);
			return GH_BUF_NOMEM;
		}
		rc = cJSON_SetValuestring(v, s) ? GH_BUF_OK : GH_BUF_NOMEM;
		free(s);
		return rc;
	}
	for (it = v ? v->child : NULL; it; it = it->next)
		if ((rc = render_values(it, c)) != GH_BUF_OK)
			return rc;
	return GH_BUF_OK;
}

static int64_t count_words(const char *s)
{
	int64_t n = 0;
	int in = 0;

	for (; s && *s; s++) {
		if (is_space(*s))
			in = 0;
		else if (!in) {
			in = 1;
			n++;
		}
	}
	return n;
}

/* Words of all input messages: texts, tool-call arguments, tool results. */
static int64_t input_words(const cJSON *messages)
{
	const cJSON *m, *p;
	int64_t n = 0;

	cJSON_ArrayForEach(m, messages) {
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");

		if (cJSON_IsString(content)) {
			n += count_words(content->valuestring);
			continue;
		}
		cJSON_ArrayForEach(p, content) {
			const char *type = gh_json_str(p, "type");
			const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "args");
			const cJSON *result = cJSON_GetObjectItemCaseSensitive(p, "result");
			char *s = NULL;

			if (!type)
				continue;
			if (!strcmp(type, "text"))
				n += count_words(gh_json_str(p, "text"));
			else if (!strcmp(type, "tool-call"))
				s = gh_provider_args_text(args);
			else if (!strcmp(type, "tool-result"))
				s = gh_provider_result_text(result);
			n += count_words(s);
			free(s);
		}
	}
	return n;
}

static int offered(const struct gh_chat_request *req, const char *tool)
{
	size_t i;

	for (i = 0; i < req->ntools; i++)
		if (req->tools[i].name && !strcmp(req->tools[i].name, tool))
			return 1;
	return 0;
}

static int rule_matches(const cJSON *rule, const char *user)
{
	const char *ic = gh_json_str(rule, "if_contains");

	return !ic || ci_find(user, ic) != NULL;
}

/* The reply to the tool results in the last message: one rendered line per
 * result. 0 when the message holds none. */
static int answer_results(const cJSON *cfg, const cJSON *last, const char *user,
			  struct gh_buf *text, int *rc)
{
	const cJSON *rules = cJSON_GetObjectItemCaseSensitive(cfg, "rules"), *p, *r;
	const char *after = gh_json_str(cfg, "after_tool");
	int n = 0;

	*rc = GH_BUF_OK;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(last, "content")) {
		const char *type = gh_json_str(p, "type"), *name = gh_json_str(p, "toolName");
		const char *tpl = NULL;
		struct tctx c;

		if (!type || strcmp(type, "tool-result"))
			continue;
		cJSON_ArrayForEach(r, rules) {
			const char *tool = gh_json_str(r, "tool");

			if (tool && name && !strcmp(tool, name) && gh_json_str(r, "then") &&
			    rule_matches(r, user)) {
				tpl = gh_json_str(r, "then");
				break;
			}
		}
		if (!tpl)
			tpl = after ? after : "{{tool}} returned {{result}}";
		c.message = user;
		c.tool = name ? name : "";
		c.result = cJSON_GetObjectItemCaseSensitive(p, "result");
		if (n++ && (*rc = put(text, "\n", 1)) != GH_BUF_OK)
			break;
		if ((*rc = render(tpl, &c, text)) != GH_BUF_OK)
			break;
	}
	if (*rc == GH_BUF_TOOBIG)
		*rc = GH_BUF_OK;
	return n;
}

/* Streams text word by word (each word with the whitespace after it). */
static int stream_text(const struct gh_chat_events *ev, const char *s)
{
	size_t i = 0, start;

	while (s[i]) {
		start = i;
		while (s[i] && is_space(s[i]))
			i++;
		while (s[i] && !is_space(s[i]))
			i++;
		while (s[i] && is_space(s[i]))
			i++;
		if (start && ev->tick && ev->tick(ev->ud))
			return 1;
		if (ev->text_delta(ev->ud, s + start, i - start))
			return 1;
	}
	return 0;
}

static enum gh_code chat(const struct gh_provider_conf *conf, const struct gh_chat_request *req,
			 const struct gh_chat_events *events, struct gh_chat_response *out,
			 struct gh_err *e)
{
	static const struct gh_chat_events none;
	const cJSON *cfg = conf->mock, *rules = cJSON_GetObjectItemCaseSensitive(cfg, "rules");
	const cJSON *m, *last = NULL, *r, *chosen = NULL;
	const char *role;
	struct gh_buf user, text;
	struct tctx c = {"", NULL, NULL};
	cJSON *args = NULL;
	char *raw = NULL, id[48];
	enum gh_code rc = GH_E_NOMEM;
	int brc = GH_BUF_OK;

	if (!events)
		events = &none;
	memset(out, 0, sizeof(*out));
	gh_buf_init(&user, USER_MAX);
	gh_buf_init(&text, OUT_MAX);
	cJSON_ArrayForEach(m, req->messages) {
		last = m;
		role = gh_json_str(m, "role");
		if (role && !strcmp(role, "user")) {
			gh_buf_reset(&user);
			/* an oversized message is looked at up to the cap */
			if (gh_provider_content_text(cJSON_GetObjectItemCaseSensitive(m, "content"),
						     &user) == GH_BUF_NOMEM)
				goto nomem;
		}
	}
	c.message = user.data ? user.data : "";
	out->input_tokens = input_words(req->messages);
	role = gh_json_str(last, "role");
	if (role && !strcmp(role, "tool") && answer_results(cfg, last, c.message, &text, &brc)) {
		if (brc != GH_BUF_OK)
			goto nomem;
		out->finish = GH_FINISH_STOP;
	} else {
		cJSON_ArrayForEach(r, rules) {
			const char *tool = gh_json_str(r, "tool");

			if (!rule_matches(r, c.message) || (tool && !offered(req, tool)))
				continue;
			chosen = r;
			break;
		}
		if (chosen && gh_json_str(chosen, "tool")) {
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(chosen, "args");
			const char *tool = gh_json_str(chosen, "tool");

			args = cJSON_IsObject(a) ? cJSON_Duplicate(a, 1) : cJSON_CreateObject();
			if (!args || render_values(args, &c) != GH_BUF_OK ||
			    !(raw = gh_json_dump(args)))
				goto nomem;
			snprintf(id, sizeof(id), "mock_call_%llu",
				 (unsigned long long)atomic_fetch_add(&next_call, 1));
			if (!(out->calls = calloc(1, sizeof(*out->calls))))
				goto nomem;
			out->ncalls = 1;
			if (gh_provider_call_set(&out->calls[0], id, tool, raw, strlen(raw)))
				goto nomem;
			out->finish = GH_FINISH_TOOL_CALLS;
			out->output_tokens = count_words(raw);
		} else {
			const char *tpl = chosen ? gh_json_str(chosen, "text")
						 : gh_json_str(cfg, "default");

			if (render(tpl ? tpl : "You said: {{message}}", &c, &text) != GH_BUF_OK)
				goto nomem;
			out->finish = GH_FINISH_STOP;
		}
	}
	if (!(out->text = gh_buf_detach(&text)))
		goto nomem;
	if (!out->ncalls)
		out->output_tokens = count_words(out->text);
	if (req->stream) {
		int stop = 0;

		if (events->text_delta && *out->text)
			stop = stream_text(events, out->text);
		if (!stop && out->ncalls && events->tool_delta) {
			const struct gh_tool_call *tc = &out->calls[0];

			stop = events->tool_delta(events->ud, 0, tc->id, tc->name, "") ||
			       (events->tick && events->tick(events->ud)) ||
			       events->tool_delta(events->ud, 0, NULL, NULL, tc->raw_args);
		}
		if (stop) {
			rc = gh_err_set(e, GH_E_CANCELLED, "provider %s (" TYPE "): cancelled",
					conf->name);
			goto done;
		}
	}
	rc = GH_OK;
	goto done;
nomem:
	rc = gh_err_set(e, GH_E_NOMEM, "provider %s (" TYPE "): out of memory", conf->name);
done:
	if (rc != GH_OK)
		gh_chat_response_clear(out);
	cJSON_Delete(args);
	free(raw);
	gh_buf_free(&user);
	gh_buf_free(&text);
	return rc;
}

const struct gh_provider_ops gh_provider_mock = {"mock", chat, NULL};
