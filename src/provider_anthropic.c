/*
 * provider_anthropic.c - the Anthropic Messages API: POST
 * {base_url}/v1/messages with x-api-key and anthropic-version, JSON or SSE.
 *
 * CoreMessages become Messages API turns made of content blocks: text,
 * image, tool_use (an assistant's tool-call part, input as an object) and
 * tool_result (a tool message, sent as a user turn). The API wants user and
 * assistant turns to alternate, so consecutive turns of one role are
 * merged, and turns left without blocks are dropped. System messages join
 * the system prompt. max_tokens is mandatory there: 4096 when the agent
 * sets none.
 *
 * Reasoning parts become thinking / redacted_thinking blocks, signature and
 * all, so a turn that used tools can continue. A client of the Messages API
 * itself (the /v1/messages surface) is passed through: a CoreMessage
 * carrying "anthropic" (the message as the client sent it) is sent as it
 * is, one with "anthropic": false not at all (the system prompt, sent in
 * the passed-through "system"), and the request's passed-through fields
 * (thinking, context_management, cache settings, ...) join the body.
 *
 * Streams are message_start, content_block_start/delta/stop per block,
 * message_delta (stop reason, output tokens) and message_stop; a tool_use
 * block's input arrives as partial_json pieces accumulated per block index.
 * A stream without message_stop is truncated and reported as such.
 *
 * Stateless; any thread (the exchange takes curl handles from the pool).
 */
#include "provider.h"

#include "jread.h"
#include "json.h"
#include "provider_int.h"
#include "provider_wire.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define TYPE "anthropic"
#define DEFAULT_MAX_TOKENS 4096

/* Appends a block object to blocks; NULL on OOM. */
static cJSON *add_block(cJSON *blocks, const char *type)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddItemToArray(blocks, o);
	return cJSON_AddStringToObject(o, "type", type) ? o : NULL;
}

static int add_text(cJSON *blocks, const char *text)
{
	cJSON *o;

	if (!text || !*text)
		return 0;   /* the API refuses empty text blocks */
	return (o = add_block(blocks, "text")) && cJSON_AddStringToObject(o, "text", text) ? 0 : -1;
}

/* An image part as an image block: a URL source for http(s), base64 for a
 * data: URL or bare base64. */
static int add_image(cJSON *blocks, const cJSON *part)
{
	const char *img = gh_json_str(part, "image"), *mime = gh_json_str(part, "mimeType");
	cJSON *o, *src;
	char media[128];

	if (!img)
		return 1;
	if (!(o = add_block(blocks, "image")) || !(src = cJSON_AddObjectToObject(o, "source")))
		return -1;
	if (!strncmp(img, "http://", 7) || !strncmp(img, "https://", 8))
		return cJSON_AddStringToObject(src, "type", "url") &&
		       cJSON_AddStringToObject(src, "url", img) ? 0 : -1;
	if (!strncmp(img, "data:", 5)) {
		const char *semi = strchr(img, ';'), *comma = strchr(img, ',');
		size_t n;

		if (!semi || !comma || comma < semi || strncmp(semi, ";base64,", 8))
			return 1;
		n = (size_t)(semi - img - 5);
		if (n >= sizeof(media))
			return 1;
		memcpy(media, img + 5, n);
		media[n] = '\0';
		mime = media;
		img = comma + 1;
	}
	return cJSON_AddStringToObject(src, "type", "base64") &&
	       cJSON_AddStringToObject(src, "media_type", mime ? mime : "image/png") &&
	       cJSON_AddStringToObject(src, "data", img) ? 0 : -1;
}

/* tool_use input must be an object: args as given, a string holding an
 * object parsed, anything else {}. */
static cJSON *tool_input(const cJSON *args)
{
	if (cJSON_IsObject(args))
		return cJSON_Duplicate(args, 1);
	if (cJSON_IsString(args)) {
		struct gh_err ignore;
		cJSON *v = NULL;

		gh_json_parse_opts(args->valuestring, strlen(args->valuestring), "tool input",
				   GH_JSON_UPSTREAM, &v, &ignore);

		if (cJSON_IsObject(v))
			return v;
		cJSON_Delete(v);
	}
	return cJSON_CreateObject();
}

/* 1 when a tool's result already is tool_result content: text and image
 * blocks (what a Messages client sends back), so it goes as it is. */
static int content_blocks(const cJSON *result)
{
	const cJSON *b;

	if (!cJSON_IsArray(result) || !result->child)
		return 0;
	cJSON_ArrayForEach(b, result) {
		const char *t = gh_json_str(b, "type");

		if (!t || (strcmp(t, "text") && strcmp(t, "image")))
			return 0;
	}
	return 1;
}

/* The blocks of one CoreMessage, appended to blocks. */
static enum gh_code message_blocks(const struct gh_provider_conf *conf, size_t i,
				   const char *role, const cJSON *content, cJSON *blocks,
				   struct gh_err *e)
{
	const cJSON *p;
	int r;

	if (cJSON_IsString(content))
		return add_text(blocks, content->valuestring) ? gh_provider_oom(conf, TYPE, e)
							      : GH_OK;
	if (content && !cJSON_IsArray(content))
		return gh_provider_bad_msg(conf, TYPE, i,
					   "content: expected a string or an array of parts", e);
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type");
		cJSON *o, *in;

		if (!type)
			return gh_provider_bad_msg(conf, TYPE, i, "content part without a type", e);
		if (!strcmp(type, "text")) {
			if (add_text(blocks, gh_json_str(p, "text")))
				return gh_provider_oom(conf, TYPE, e);
		} else if (!strcmp(type, "image") && !strcmp(role, "user")) {
			if ((r = add_image(blocks, p)) < 0)
				return gh_provider_oom(conf, TYPE, e);
			if (r > 0)
				return gh_provider_bad_msg(conf, TYPE, i,
							   "image part without a usable image", e);
		} else if (!strcmp(type, "tool-call") && !strcmp(role, "assistant")) {
			if (!gh_json_str(p, "toolCallId") || !gh_json_str(p, "toolName"))
				return gh_provider_bad_msg(conf, TYPE, i,
							   "tool-call part needs toolCallId and "
							   "toolName", e);
			if (!(o = add_block(blocks, "tool_use")) ||
			    !cJSON_AddStringToObject(o, "id", gh_json_str(p, "toolCallId")) ||
			    !cJSON_AddStringToObject(o, "name", gh_json_str(p, "toolName")) ||
			    !(in = tool_input(cJSON_GetObjectItemCaseSensitive(p, "args"))))
				return gh_provider_oom(conf, TYPE, e);
			cJSON_AddItemToObject(o, "input", in);
		} else if (!strcmp(type, "tool-result") && !strcmp(role, "tool")) {
			const char *id = gh_json_str(p, "toolCallId");
			const cJSON *result = cJSON_GetObjectItemCaseSensitive(p, "result");
			int is_error = gh_json_bool(p, "isError", 0);
			char *res;

			if (!id)
				return gh_provider_bad_msg(conf, TYPE, i,
							   "tool-result part needs toolCallId", e);
			const cJSON *raw = content_blocks(result) ? result : NULL;

			res = gh_provider_result_text(result);
			if (!res || !(o = add_block(blocks, "tool_result")) ||
			    !cJSON_AddStringToObject(o, "tool_use_id", id) ||
			    !(raw ? cJSON_AddItemToObject(o, "content", cJSON_Duplicate(raw, 1))
				  : cJSON_AddStringToObject(o, "content", res) != NULL) ||
			    (is_error && !cJSON_AddTrueToObject(o, "is_error"))) {
				free(res);
				return gh_provider_oom(conf, TYPE, e);
			}
			free(res);
		} else if (!strcmp(type, "reasoning") && !strcmp(role, "assistant")) {
			const char *t = gh_json_str(p, "text"), *sig = gh_json_str(p, "signature");

			/* a thinking block is only valid with its signature */
			if (!sig)
				continue;
			if (!(o = add_block(blocks, "thinking")) ||
			    !cJSON_AddStringToObject(o, "thinking", t ? t : "") ||
			    !cJSON_AddStringToObject(o, "signature", sig))
				return gh_provider_oom(conf, TYPE, e);
		} else if (!strcmp(type, "redacted-reasoning") && !strcmp(role, "assistant")) {
			const char *d = gh_json_str(p, "data");

			if (d && (!(o = add_block(blocks, "redacted_thinking")) ||
				  !cJSON_AddStringToObject(o, "data", d)))
				return gh_provider_oom(conf, TYPE, e);
		} else if (!strcmp(role, "user")) {
			return gh_provider_bad_msg(conf, TYPE, i, "unsupported content part type",
						   e);
		}
		/* other assistant parts stay with us */
	}
	return GH_OK;
}

static enum gh_code add_messages(const struct gh_provider_conf *conf,
				 const struct gh_chat_request *req, cJSON *arr,
				 struct gh_buf *system, struct gh_err *e)
{
	const cJSON *m;
	cJSON *last = NULL;
	const char *last_role = NULL;
	size_t i = 0;
	enum gh_code rc;

	if (req->messages && !cJSON_IsArray(req->messages))
		return gh_err_set(e, GH_E_BADREQ,
				  "provider %s (" TYPE "): messages: expected an array",
				  conf->name);
	cJSON_ArrayForEach(m, req->messages) {
		const char *role = gh_json_str(m, "role"), *wire;
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
		const cJSON *raw = cJSON_GetObjectItemCaseSensitive(m, "anthropic");
		cJSON *blocks, *o, *b;

		if (!role)
			return gh_provider_bad_msg(conf, TYPE, i, "role: expected a string", e);
		if (cJSON_IsFalse(raw)) {
			i++;
			continue;
		}
		if (cJSON_IsObject(raw)) {
			/* as the client sent it: new roles and block types too */
			if (!(o = cJSON_Duplicate(raw, 1)))
				return gh_provider_oom(conf, TYPE, e);
			cJSON_AddItemToArray(arr, o);
			last = o;
			last_role = gh_json_str(o, "role") ? gh_json_str(o, "role") : "";
			i++;
			continue;
		}
		if (!strcmp(role, "system")) {
			if ((system->len && gh_buf_puts(system, "\n\n") != GH_BUF_OK) ||
			    gh_provider_content_text(content, system) != GH_BUF_OK)
				return gh_provider_oom(conf, TYPE, e);
			i++;
			continue;
		}
		if (!strcmp(role, "user") || !strcmp(role, "tool"))
			wire = "user";
		else if (!strcmp(role, "assistant"))
			wire = "assistant";
		else
			return gh_provider_bad_msg(conf, TYPE, i,
						   "role: expected user, assistant, tool or system",
						   e);
		if (!(blocks = cJSON_CreateArray()))
			return gh_provider_oom(conf, TYPE, e);
		if ((rc = message_blocks(conf, i, role, content, blocks, e)) != GH_OK) {
			cJSON_Delete(blocks);
			return rc;
		}
		i++;
		if (!blocks->child) {
			cJSON_Delete(blocks);
			continue;
		}
		if (last && !strcmp(last_role, wire) &&
		    cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(last, "content"))) {
			/* same role twice: one turn */
			cJSON *into = cJSON_GetObjectItemCaseSensitive(last, "content");

			while ((b = blocks->child)) {
				cJSON_DetachItemViaPointer(blocks, b);
				cJSON_AddItemToArray(into, b);
			}
			cJSON_Delete(blocks);
			continue;
		}
		if (!(o = cJSON_CreateObject())) {
			cJSON_Delete(blocks);
			return gh_provider_oom(conf, TYPE, e);
		}
		cJSON_AddItemToArray(arr, o);
		if (!cJSON_AddStringToObject(o, "role", wire)) {
			cJSON_Delete(blocks);
			return gh_provider_oom(conf, TYPE, e);
		}
		cJSON_AddItemToObject(o, "content", blocks);
		last = o;
		last_role = wire;
	}
	return GH_OK;
}

/* tool_choice naming a tool that is not offered (the policy removed it) is
 * dropped, and so is any tool_choice when no tool is offered. */
static int choice_fits(const struct gh_chat_request *req, const cJSON *choice)
{
	const char *type = gh_json_str(choice, "type"), *name = gh_json_str(choice, "name");
	size_t i;

	if (!req->ntools)
		return 0;
	if (!type || strcmp(type, "tool"))
		return 1;
	for (i = 0; name && i < req->ntools; i++)
		if (!strcmp(req->tools[i].name, name))
			return 1;
	return 0;
}

/* What the client sent that gatehouse does not interpret joins the body;
 * "system" is sent as given, the agent's instructions (if any) first. -1
 * on OOM. */
static int pass_fields(const struct gh_chat_request *req, cJSON *b)
{
	const cJSON *f;

	cJSON_ArrayForEach(f, req->passthrough) {
		cJSON *v;

		if (!f->string || cJSON_GetObjectItemCaseSensitive(b, f->string) ||
		    !strcmp(f->string, "stream") || !strcmp(f->string, "tools"))
			continue;
		if (!strcmp(f->string, "tool_choice") && !choice_fits(req, f))
			continue;
		if (!strcmp(f->string, "system") && req->system && *req->system) {
			cJSON *arr = cJSON_CreateArray(), *tb;

			if (!arr || add_text(arr, req->system)) {
				cJSON_Delete(arr);
				return -1;
			}
			if (cJSON_IsString(f) && *f->valuestring) {
				if (add_text(arr, f->valuestring)) {
					cJSON_Delete(arr);
					return -1;
				}
			} else if (cJSON_IsArray(f)) {
				cJSON_ArrayForEach(tb, f)
					cJSON_AddItemToArray(arr, cJSON_Duplicate(tb, 1));
			}
			cJSON_AddItemToObject(b, "system", arr);
			continue;
		}
		if (!(v = cJSON_Duplicate(f, 1)))
			return -1;
		cJSON_AddItemToObject(b, f->string, v);
	}
	return 0;
}

static enum gh_code build_body(const struct gh_provider_conf *conf,
			       const struct gh_chat_request *req, char **out, struct gh_err *e)
{
	cJSON *b = cJSON_CreateObject(), *msgs, *tools;
	struct gh_buf system;
	enum gh_code rc = GH_OK;
	size_t i;
	int pass_system = req->passthrough_type && !strcmp(req->passthrough_type, TYPE) &&
			  cJSON_GetObjectItemCaseSensitive(req->passthrough, "system");

	*out = NULL;
	gh_buf_init(&system, (size_t)-1 / 2);
	if (req->system && *req->system && gh_buf_puts(&system, req->system) != GH_BUF_OK)
		goto nomem;
	if (!b || !cJSON_AddStringToObject(b, "model", req->model ? req->model : "") ||
	    !cJSON_AddNumberToObject(b, "max_tokens",
				     (double)(req->max_tokens > 0 ? req->max_tokens
								   : DEFAULT_MAX_TOKENS)) ||
	    !(msgs = cJSON_CreateArray()))
		goto nomem;
	if ((rc = add_messages(conf, req, msgs, &system, e)) != GH_OK) {
		cJSON_Delete(msgs);
		goto out;
	}
	if (system.len && !pass_system && !cJSON_AddStringToObject(b, "system", system.data)) {
		cJSON_Delete(msgs);
		goto nomem;
	}
	cJSON_AddItemToObject(b, "messages", msgs);
	if (req->ntools) {
		if (!(tools = cJSON_AddArrayToObject(b, "tools")))
			goto nomem;
		for (i = 0; i < req->ntools; i++) {
			const struct gh_tool_spec *t = &req->tools[i];
			cJSON *o = cJSON_CreateObject();

			if (!o)
				goto nomem;
			cJSON_AddItemToArray(tools, o);
			if (gh_provider_tool_fields(o, t, "input_schema") != 0)
				goto nomem;
		}
	}
	if (req->has_temperature && !cJSON_AddNumberToObject(b, "temperature", req->temperature))
		goto nomem;
	if (req->stream && !cJSON_AddTrueToObject(b, "stream"))
		goto nomem;
	if (req->passthrough_type && !strcmp(req->passthrough_type, TYPE) &&
	    pass_fields(req, b) != 0)
		goto nomem;
	if (!(*out = gh_json_dump(b)))
		goto nomem;
	goto out;
nomem:
	rc = gh_provider_oom(conf, TYPE, e);
out:
	cJSON_Delete(b);
	gh_buf_free(&system);
	return rc;
}

/* Anthropic's stop_reason. */
static const struct gh_provider_finish_name stop_reasons[] = {
	{"end_turn", GH_FINISH_STOP},
	{"stop_sequence", GH_FINISH_STOP},
	{"max_tokens", GH_FINISH_LENGTH},
	{"tool_use", GH_FINISH_TOOL_CALLS},
	{"refusal", GH_FINISH_CONTENT_FILTER},
	{NULL, GH_FINISH_OTHER},
};

/* Input tokens include what the prompt cache wrote and read. */
static void read_usage(const cJSON *u, int64_t *in, int64_t *out)
{
	if (!cJSON_IsObject(u))
		return;
	if (cJSON_GetObjectItemCaseSensitive(u, "input_tokens"))
		*in = gh_json_int(u, "input_tokens", 0) +
		      gh_json_int(u, "cache_creation_input_tokens", 0) +
		      gh_json_int(u, "cache_read_input_tokens", 0);
	*out = gh_json_int(u, "output_tokens", *out);
}

/* A thinking or redacted_thinking block as a reasoning part, appended to
 * *arr (made when NULL). -1 on OOM. */
static int reasoning_part(cJSON **arr, const cJSON *block)
{
	const char *type = gh_json_str(block, "type");
	cJSON *p;

	if (!*arr && !(*arr = cJSON_CreateArray()))
		return -1;
	if (!(p = cJSON_CreateObject()))
		return -1;
	cJSON_AddItemToArray(*arr, p);
	if (!strcmp(type, "redacted_thinking")) {
		cJSON_AddStringToObject(p, "type", "redacted-reasoning");
		return cJSON_AddStringToObject(p, "data", gh_json_str(block, "data") ?
						  gh_json_str(block, "data") : "") ? 0 : -1;
	}
	cJSON_AddStringToObject(p, "type", "reasoning");
	cJSON_AddStringToObject(p, "text", gh_json_str(block, "thinking") ?
					   gh_json_str(block, "thinking") : "");
	if (gh_json_str(block, "signature"))
		cJSON_AddStringToObject(p, "signature", gh_json_str(block, "signature"));
	return 0;
}

/* A streamed thinking fragment or signature, into the newest reasoning
 * part. -1 on OOM. */
static int reasoning_add(cJSON *part, const char *key, const char *s)
{
	const char *old = gh_json_str(part, key);
	size_t a = old ? strlen(old) : 0, n = strlen(s);
	char *v = malloc(a + n + 1);

	if (!v)
		return -1;
	memcpy(v, old ? old : "", a);
	memcpy(v + a, s, n + 1);
	cJSON_DeleteItemFromObjectCaseSensitive(part, key);
	if (!cJSON_AddStringToObject(part, key, v)) {
		free(v);
		return -1;
	}
	free(v);
	return 0;
}

static enum gh_code parse_reply(const struct gh_provider_conf *conf, const cJSON *j,
				struct gh_chat_response *out, struct gh_err *e)
{
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content"), *b;
	struct gh_buf text;
	size_t n = 0, max = 0;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsArray(content))
		return gh_err_set(e, GH_E_UPSTREAM, "provider %s (" TYPE "): reply has no content",
				  conf->name);
	gh_buf_init(&text, (size_t)-1 / 2);
	cJSON_ArrayForEach(b, content) {
		const char *type = gh_json_str(b, "type");

		if (type && (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) &&
		    reasoning_part(&out->reasoning, b))
			goto nomem;
		if (type && !strcmp(type, "tool_use"))
			max++;
		else if (type && !strcmp(type, "text") && gh_json_str(b, "text") &&
			 gh_buf_puts(&text, gh_json_str(b, "text")) != GH_BUF_OK)
			goto nomem;
	}
	if (max > GH_PROVIDER_MAX_CALLS) {
		gh_buf_free(&text);
		return gh_err_set(e, GH_E_UPSTREAM,
				  "provider %s (" TYPE "): more than %d tool calls in one reply",
				  conf->name, GH_PROVIDER_MAX_CALLS);
	}
	if (!(out->text = gh_buf_detach(&text)))
		goto nomem;
	if (max && !(out->calls = calloc(max, sizeof(*out->calls))))
		goto nomem;
	cJSON_ArrayForEach(b, content) {
		const char *type = gh_json_str(b, "type");
		const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
		char *a;

		if (!type || strcmp(type, "tool_use"))
			continue;
		if (!(a = input ? gh_json_dump(input) : strdup("{}")))
			goto nomem;
		out->ncalls = ++n;
		if (gh_provider_call_set(&out->calls[n - 1], gh_json_str(b, "id"),
					 gh_json_str(b, "name"), a, strlen(a)) != GH_OK) {
			free(a);
			goto nomem;
		}
		free(a);
	}
	out->finish = gh_provider_finish(stop_reasons, gh_json_str(j, "stop_reason"));
	read_usage(cJSON_GetObjectItemCaseSensitive(j, "usage"), &out->input_tokens,
		   &out->output_tokens);
	return GH_OK;
nomem:
	gh_buf_free(&text);
	gh_chat_response_clear(out);
	return gh_provider_oom(conf, TYPE, e);
}

/* Reasoning counts against the reply's budget like text. */
static int spend_text(struct gh_provider_stream *st, size_t n)
{
	if (n > st->budget)
		return gh_provider_stream_fail(st, "reply over %lld bytes",
					       (long long)st->conf->max_response_bytes);
	st->budget -= n;
	return 0;
}

int gh_provider_anthropic_text_delta(const char *data, size_t n, const char **text,
				     size_t *len)
{
	static const char head[] = "{\"type\":\"content_block_delta\",\"index\":";
	static const char mid[] = ",\"delta\":{\"type\":\"text_delta\",\"text\":\"";
	static const char tail[] = "\"}}";
	size_t i = sizeof(head) - 1, digits, start;

	if (n < sizeof(head) - 1 + 1 + sizeof(mid) - 1 + sizeof(tail) - 1 ||
	    memcmp(data, head, sizeof(head) - 1) != 0)
		return 0;
	for (digits = 0; i < n && data[i] >= '0' && data[i] <= '9'; i++)
		digits++;
	/* an index as JSON writes one: no sign, no leading zero, no fraction */
	if (digits == 0 || digits > 9 || (digits > 1 && data[i - digits] == '0'))
		return 0;
	if (n - i < sizeof(mid) - 1 || memcmp(data + i, mid, sizeof(mid) - 1) != 0)
		return 0;
	start = i += sizeof(mid) - 1;
	while (i < n && (unsigned char)data[i] >= 0x20 && data[i] != '"' && data[i] != '\\')
		i++;
	if (n - i != sizeof(tail) - 1 || memcmp(data + i, tail, sizeof(tail) - 1) != 0)
		return 0;
	*text = data + start;
	*len = i - start;
	return 1;
}

/* ---- a stream's other events read without a tree ----
 *
 * Besides its text deltas (above), a stream brings message_start, a
 * content_block_start and a content_block_stop per block, ping,
 * message_delta and message_stop, and a tool_use block one
 * input_json_delta per fragment of its input. read_event takes these from
 * their text (jread.h) into struct event, and apply_event does with them
 * what on_event_tree does with their tree. An error event (by its type),
 * a thinking block or delta, a delta, message or content_block that is not an
 * object, an index or count that is a number not written as an integer,
 * and whatever the reader does not take go to the tree.
 * fuzz_anthropic_event holds the two to the same result. */

/* The strings an event may carry: its type, the delta's type, text,
 * partial_json and stop_reason, the content_block's type, text, id and
 * name. */
enum { S_TYPE, S_DTYPE, S_TEXT, S_JSON, S_STOP, S_BTYPE, S_BTEXT, S_BID, S_BNAME, S_N };

/* A usage object's counts (a usage that is no object leaves it zeroed,
 * which read_usage ignores too). */
struct usage_text {
	int has_in;             /* input_tokens was given, of any type */
	int has_out;            /* output_tokens was an integer */
	int64_t in, cache_w, cache_r, out;   /* 0 unless given as integers */
};

/* A member read into one of the event's strings. */
struct field {
	const char *name;
	int slot;
};

struct event {
	struct gh_jr jr;
	struct gh_buf s[S_N];
	int has[S_N];           /* the member was a string (else: gh_json_str's NULL) */
	int has_index;          /* index was an integer */
	int64_t index;
	struct usage_text usage, msg_usage;
};

/* String i as gh_json_str would give it: NULL when it was not one. */
static const char *ev_str(const struct event *v, int i)
{
	return v->has[i] ? (v->s[i].data ? v->s[i].data : "") : NULL;
}

/* 1 when the value at the cursor was read into string i (or skipped when
 * it is no string), else 0 (to the tree) or -1 (out of memory). */
static int ev_string(struct event *v, int i)
{
	return gh_jr_string_opt(&v->jr, &v->s[i], &v->has[i]);
}

/* The integer at the cursor into *out (*has 1); a value that is not a
 * number is skipped (gh_json_int's default stands); 0 for a number not
 * written as an integer. */
static int ev_int(struct gh_jr *r, int64_t *out, int *has)
{
	if (gh_jr_peek(r) != GH_JR_NUMBER)
		return gh_jr_skip(r) ? 0 : 1;
	if (gh_jr_int(r, out))
		return 0;
	if (has)
		*has = 1;
	return 1;
}

static int read_usage_obj(struct gh_jr *r, struct usage_text *u)
{
	const char *n;
	size_t len;
	int k;

	if (gh_jr_peek(r) != GH_JR_OBJECT)
		return gh_jr_skip(r) ? 0 : 1;
	if (gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &n, &len)) == 1) {
		if (GH_JR_NAME_IS(n, len, "input_tokens")) {
			u->has_in = 1;
			k = ev_int(r, &u->in, NULL);
		} else if (GH_JR_NAME_IS(n, len, "cache_creation_input_tokens")) {
			k = ev_int(r, &u->cache_w, NULL);
		} else if (GH_JR_NAME_IS(n, len, "cache_read_input_tokens")) {
			k = ev_int(r, &u->cache_r, NULL);
		} else if (GH_JR_NAME_IS(n, len, "output_tokens")) {
			k = ev_int(r, &u->out, &u->has_out);
		} else {
			k = gh_jr_skip(r) ? 0 : 1;
		}
		if (k != 1)
			return 0;
	}
	return k < 0 ? 0 : 1;
}

/* An object member's members: those in fields[] (n of them) into the
 * event's strings, usage (when usage is not NULL) into *usage, the rest
 * skipped. A value that is not an object goes to the tree. */
static int read_members(struct event *v, const struct field *fields, size_t n,
			struct usage_text *usage)
{
	struct gh_jr *r = &v->jr;
	const char *name;
	size_t len, i;
	int k;

	if (gh_jr_peek(r) != GH_JR_OBJECT || gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &name, &len)) == 1) {
		for (i = 0; i < n; i++)
			if (strlen(fields[i].name) == len && !memcmp(fields[i].name, name, len))
				break;
		if (i < n)
			k = ev_string(v, fields[i].slot);
		else if (usage && GH_JR_NAME_IS(name, len, "usage"))
			k = read_usage_obj(r, usage);
		else
			k = gh_jr_skip(r) ? 0 : 1;
		if (k != 1)
			return 0;
	}
	return k < 0 ? 0 : 1;
}

/* 1 when v holds the event as on_event_tree would read it, 0 to give it
 * to the tree. */
static int read_event(const char *s, size_t n, struct event *v)
{
	static const struct field delta[] = {
		{"type", S_DTYPE}, {"text", S_TEXT}, {"partial_json", S_JSON}, {"stop_reason", S_STOP}};
	static const struct field block[] = {
		{"type", S_BTYPE}, {"text", S_BTEXT}, {"id", S_BID}, {"name", S_BNAME}};
	struct gh_jr *r = &v->jr;
	const char *name;
	size_t len;
	int k;

	gh_jr_init(r, s, n);
	if (gh_jr_object(r))
		return 0;
	while ((k = gh_jr_member(r, &name, &len)) == 1) {
		if (GH_JR_NAME_IS(name, len, "type"))
			k = ev_string(v, S_TYPE);
		else if (GH_JR_NAME_IS(name, len, "index"))
			k = ev_int(r, &v->index, &v->has_index);
		else if (GH_JR_NAME_IS(name, len, "delta"))
			k = read_members(v, delta, GH_ARRAY_LEN(delta), NULL);
		else if (GH_JR_NAME_IS(name, len, "content_block"))
			k = read_members(v, block, GH_ARRAY_LEN(block), NULL);
		else if (GH_JR_NAME_IS(name, len, "message"))
			k = read_members(v, NULL, 0, &v->msg_usage);
		else if (GH_JR_NAME_IS(name, len, "usage"))
			k = read_usage_obj(r, &v->usage);
		else
			k = gh_jr_skip(r) ? 0 : 1;
		if (k != 1)
			return 0;
	}
	return k == 0 && !gh_jr_done(r);
}

static int is(const char *s, const char *lit)
{
	return s && !strcmp(s, lit);
}

/* 1 when on_event_tree must read the event after all: what it does with
 * it needs the tree. */
static int needs_tree(const struct event *v, const char *type)
{
	const char *bt = ev_str(v, S_BTYPE), *dt = ev_str(v, S_DTYPE);

	return is(type, "error") ||
	       (is(type, "content_block_start") &&
		(is(bt, "thinking") || is(bt, "redacted_thinking"))) ||
	       (is(type, "content_block_delta") &&
		(is(dt, "thinking_delta") || is(dt, "signature_delta")));
}

/* read_usage's reading of a usage read from its text. */
static void apply_usage(const struct usage_text *u, int64_t *in, int64_t *out)
{
	if (u->has_in)
		*in = u->in + u->cache_w + u->cache_r;
	if (u->has_out)
		*out = u->out;
}

/* What on_event_tree does with the event read_event read. */
static int apply_event(struct gh_provider_stream *st, const struct event *v, const char *type)
{
	int64_t index = v->has_index ? v->index : -1;

	if (!strcmp(type, "message_start")) {
		apply_usage(&v->msg_usage, &st->input_tokens, &st->output_tokens);
	} else if (!strcmp(type, "content_block_start")) {
		const char *bt = ev_str(v, S_BTYPE), *t = ev_str(v, S_BTEXT);
		struct gh_provider_acc *a;

		if (index < 0 || index > INT32_MAX)
			return gh_provider_stream_fail(st, "content block without an index");
		if (is(bt, "text"))
			return t ? gh_provider_stream_text(st, t, v->s[S_BTEXT].len) : 0;
		if (is(bt, "tool_use"))
			return gh_provider_stream_call_start(st, (int)index, ev_str(v, S_BID),
							     ev_str(v, S_BNAME), &a);
	} else if (!strcmp(type, "content_block_delta")) {
		const char *dt = ev_str(v, S_DTYPE), *t = ev_str(v, S_TEXT);
		struct gh_provider_acc *a = NULL;

		if (is(dt, "text_delta"))
			return t ? gh_provider_stream_text(st, t, v->s[S_TEXT].len) : 0;
		if (!is(dt, "input_json_delta"))
			return 0;
		if (index >= 0 && index <= INT32_MAX)
			a = gh_provider_stream_call(st, (int)index);
		if (!a)
			return gh_provider_stream_fail(st, "input_json_delta for block %lld, which "
							   "is not a tool_use", (long long)index);
		return gh_provider_stream_call_args(st, a, ev_str(v, S_JSON));
	} else if (!strcmp(type, "message_delta")) {
		const char *sr = ev_str(v, S_STOP);

		if (sr) {
			st->finish = gh_provider_finish(stop_reasons, sr);
			st->have_finish = 1;
		}
		apply_usage(&v->usage, &st->input_tokens, &st->output_tokens);
	} else if (!strcmp(type, "message_stop")) {
		st->done = 1;
	}
	/* ping, content_block_stop and newer event types need nothing */
	return 0;
}

static int on_event_tree(struct gh_provider_stream *st, const struct gh_sse_event *ev);

static int on_event(struct gh_provider_stream *st, const struct gh_sse_event *ev)
{
	struct event v;
	const char *t, *type;
	size_t tl;
	int i, stop;

	if (st->done || !ev->data_len)
		return 0;
	if (gh_provider_anthropic_text_delta(ev->data, ev->data_len, &t, &tl))
		return gh_provider_stream_text(st, t, tl);
	memset(&v, 0, sizeof(v));
	for (i = 0; i < S_N; i++)
		gh_buf_init(&v.s[i], ev->data_len);
	stop = -1;
	if (read_event(ev->data, ev->data_len, &v)) {
		type = v.has[S_TYPE] ? ev_str(&v, S_TYPE) : ev->type;
		if (!needs_tree(&v, type))
			stop = apply_event(st, &v, type);
	}
	if (stop < 0)
		stop = on_event_tree(st, ev);
	for (i = 0; i < S_N; i++)
		gh_buf_free(&v.s[i]);
	return stop;
}

/* One event of a stream through its cJSON tree. */
static int on_event_tree(struct gh_provider_stream *st, const struct gh_sse_event *ev)
{
	const cJSON *block, *delta;
	const char *type;
	struct gh_err pe;
	cJSON *j;
	int stop = 0;
	int64_t index;

	if (st->done || !ev->data_len)
		return 0;
	if (gh_json_parse_opts(ev->data, ev->data_len, "chunk", GH_JSON_UPSTREAM, &j, &pe) != GH_OK)
		return gh_provider_stream_fail(st, "malformed chunk: %s", pe.msg);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return gh_provider_stream_fail(st, "malformed chunk");
	}
	type = gh_json_str(j, "type");
	if (!type)
		type = ev->type;
	index = gh_json_int(j, "index", -1);
	delta = cJSON_GetObjectItemCaseSensitive(j, "delta");
	if (!strcmp(type, "message_start")) {
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");

		read_usage(cJSON_GetObjectItemCaseSensitive(msg, "usage"), &st->input_tokens,
			   &st->output_tokens);
	} else if (!strcmp(type, "content_block_start")) {
		const char *bt;

		block = cJSON_GetObjectItemCaseSensitive(j, "content_block");
		bt = gh_json_str(block, "type");
		if (index < 0 || index > INT32_MAX) {
			stop = gh_provider_stream_fail(st, "content block without an index");
		} else if (bt && !strcmp(bt, "text")) {
			const char *t = gh_json_str(block, "text");

			stop = t ? gh_provider_stream_text(st, t, strlen(t)) : 0;
		} else if (bt && (!strcmp(bt, "thinking") || !strcmp(bt, "redacted_thinking"))) {
			if (reasoning_part(&st->reasoning, block))
				stop = gh_provider_stream_fail(st, "out of memory");
		} else if (bt && !strcmp(bt, "tool_use")) {
			const char *id = gh_json_str(block, "id");
			const char *name = gh_json_str(block, "name");
			struct gh_provider_acc *a;

			stop = gh_provider_stream_call_start(st, (int)index, id, name, &a);
		}
	} else if (!strcmp(type, "content_block_delta")) {
		const char *dt = gh_json_str(delta, "type");

		if (dt && !strcmp(dt, "text_delta")) {
			const char *t = gh_json_str(delta, "text");

			stop = t ? gh_provider_stream_text(st, t, strlen(t)) : 0;
		} else if (dt && (!strcmp(dt, "thinking_delta") || !strcmp(dt, "signature_delta"))) {
			const char *t = gh_json_str(delta, "thinking"), *sig = gh_json_str(delta,
											    "signature");

			cJSON *part = st->reasoning ? cJSON_GetArrayItem(st->reasoning,
					cJSON_GetArraySize(st->reasoning) - 1) : NULL;

			if (t && spend_text(st, strlen(t)))
				stop = 1;
			else if (part && ((t && reasoning_add(part, "text", t)) ||
					  (sig && reasoning_add(part, "signature", sig))))
				stop = gh_provider_stream_fail(st, "out of memory");
			else if (st->ev && st->ev->reasoning_delta && (t || sig))
				stop = st->ev->reasoning_delta(st->ev->ud, t ? t : "", t ? strlen(t) : 0,
							       sig) ||
				       gh_provider_stream_first_out(st);
		} else if (dt && !strcmp(dt, "input_json_delta")) {
			const char *frag = gh_json_str(delta, "partial_json");
			struct gh_provider_acc *a = NULL;

			if (index >= 0 && index <= INT32_MAX)
				a = gh_provider_stream_call(st, (int)index);
			if (!a)
				stop = gh_provider_stream_fail(st, "input_json_delta for block "
								   "%lld, which is not a tool_use",
							       (long long)index);
			else
				stop = gh_provider_stream_call_args(st, a, frag);
		}
	} else if (!strcmp(type, "message_delta")) {
		const char *sr = gh_json_str(delta, "stop_reason");

		if (sr) {
			st->finish = gh_provider_finish(stop_reasons, sr);
			st->have_finish = 1;
		}
		read_usage(cJSON_GetObjectItemCaseSensitive(j, "usage"), &st->input_tokens,
			   &st->output_tokens);
	} else if (!strcmp(type, "message_stop")) {
		st->done = 1;
	} else if (!strcmp(type, "error")) {
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
		const char *m = gh_json_str(err, "message"), *et = gh_json_str(err, "type");

		gh_provider_note_error(st, 0, j);
		stop = gh_provider_stream_fail_upstream(st, "stream error",
							"stream error: %s%s%.300s", et ? et : "",
							et ? ": " : "", m ? m : "(no message)");
	}
	/* ping, content_block_stop and newer event types need nothing */
	cJSON_Delete(j);
	return stop;
}

/* What a stream that stopped is missing; NULL when it ended whole. */
static const char *incomplete(const struct gh_provider_stream *st)
{
	return st->done ? NULL : " (no message_stop)";
}

/* anthropic-version, and the key as x-api-key. */
static enum gh_code headers(const struct gh_provider_conf *conf, struct gh_upstream_header *hdr,
			    size_t *n, struct gh_buf *scratch, struct gh_err *e)
{
	(void)scratch;
	(void)e;
	hdr[0].name = "anthropic-version";
	hdr[0].value = conf->anthropic_version ? conf->anthropic_version : "2023-06-01";
	(*n)++;
	if (conf->api_key && *conf->api_key) {
		hdr[1].name = "x-api-key";
		hdr[1].value = conf->api_key;
		(*n)++;
	}
	return GH_OK;
}

static const struct gh_provider_wire wire = {
	TYPE, "/v1/messages", build_body, headers, parse_reply, on_event, incomplete,
	NULL, on_event_tree, /* replies are read from their trees */
};

const struct gh_provider_ops gh_provider_anthropic = {"anthropic", NULL, &wire};
