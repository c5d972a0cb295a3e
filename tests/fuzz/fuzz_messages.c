/*
 * fuzz_messages.c - what a client sends to generate/stream: the messages
 * (normalised into CoreMessages) and the client tool definitions (Mastra
 * and OpenAI shapes, schemas checked). Input: a JSON document
 * {"messages": ..., "clientTools": ..., "tools": ...}, read with
 * gh_json_parse as request bodies are.
 *
 * Checks, besides no crash, no leak and bounded time:
 *   - accepted messages: one CoreMessage per message sent, each {role,
 *     content} with a known role and content a string or parts; a part is
 *     text, a tool-call (assistant only, with ids and args) or a
 *     tool-result (tool only, with its id and a result);
 *   - normalising is idempotent: normalise(normalise(m)) has the same
 *     canonical form as normalise(m);
 *   - gh_messages_text gives a string content as it is and the text
 *     parts run together;
 *   - accepted tool definitions: one per tool sent (Mastra ones first, in
 *     order), at most 128, each named gh_tool_normalize(origName) - 1..63
 *     of [a-zA-Z0-9_-], not starting with a digit or '-', a fixed point of
 *     gh_tool_normalize - with a description, parameters that
 *     gh_schema_check accepts and a boolean requireApproval.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "messages.h"
#include "schema.h"
#include "tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT (1u << 16)

static int is_role(const char *r)
{
	return r && (!strcmp(r, "user") || !strcmp(r, "assistant") || !strcmp(r, "system") ||
		     !strcmp(r, "tool"));
}

static void check_part(const cJSON *p, const char *role)
{
	const char *type = gh_json_str(p, "type");

	CHECK(cJSON_IsObject(p) && type);
	if (!strcmp(type, "text")) {
		CHECK(gh_json_str(p, "text"));
	} else if (!strcmp(type, "tool-call")) {
		CHECK(!strcmp(role, "assistant"));
		CHECK(gh_json_str(p, "toolCallId") && gh_json_str(p, "toolName"));
		CHECK(cJSON_GetObjectItemCaseSensitive(p, "args"));
	} else if (!strcmp(type, "tool-result")) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "toolName");

		CHECK(!strcmp(role, "tool"));
		CHECK(gh_json_str(p, "toolCallId"));
		CHECK(cJSON_IsString(name) || cJSON_IsNull(name));
		CHECK(cJSON_GetObjectItemCaseSensitive(p, "result"));
	} else {
		CHECK(0); /* nothing else is forwarded */
	}
}

/* The text of a content as documented, against gh_messages_text. */
static void check_text(const cJSON *content)
{
	char *got = gh_messages_text(content);
	struct gh_buf want;
	const cJSON *p, *parts = cJSON_IsArray(content) ? content : NULL;

	CHECK(got);
	gh_buf_init(&want, 1u << 24);
	if (cJSON_IsString(content))
		CHECK(gh_buf_puts(&want, content->valuestring) == GH_BUF_OK);
	cJSON_ArrayForEach(p, parts) {
		const char *type = gh_json_str(p, "type");

		if (type && !strcmp(type, "text"))
			CHECK(gh_buf_puts(&want, gh_json_str(p, "text")) == GH_BUF_OK);
	}
	CHECK(!strcmp(got, want.data ? want.data : ""));
	gh_buf_free(&want);
	free(got);
}

static void check_messages(const cJSON *in, const cJSON *msgs)
{
	const cJSON *m;
	cJSON *again = NULL;
	struct gh_buf c1, c2;
	struct gh_err e;

	CHECK(cJSON_IsArray(msgs));
	CHECK(cJSON_GetArraySize(msgs) == (cJSON_IsString(in) ? 1 : cJSON_GetArraySize(in)));
	cJSON_ArrayForEach(m, msgs) {
		const char *role = gh_json_str(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *p;

		CHECK(is_role(role));
		CHECK(cJSON_IsString(content) || cJSON_IsArray(content));
		if (cJSON_IsArray(content))
			cJSON_ArrayForEach(p, content)
				check_part(p, role);
		check_text(content);
	}
	CHECK(gh_messages_normalize(msgs, &again, &e) == GH_OK);
	gh_buf_init(&c1, 16u << 20);
	gh_buf_init(&c2, 16u << 20);
	CHECK(gh_json_canonical(msgs, &c1) == GH_BUF_OK);
	CHECK(gh_json_canonical(again, &c2) == GH_BUF_OK);
	CHECK(c1.len == c2.len && !memcmp(c1.data, c2.data, c1.len));
	gh_buf_free(&c1);
	gh_buf_free(&c2);
	cJSON_Delete(again);
}

/* One accepted definition, declared under orig. */
static void check_def(const cJSON *d, const char *orig)
{
	const char *name = gh_json_str(d, "name");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(d, "parameters");
	char norm[GH_TOOL_NAME_MAX];
	size_t i, n;

	CHECK(orig && gh_json_str(d, "origName") && !strcmp(orig, gh_json_str(d, "origName")));
	CHECK(name);
	n = strlen(name);
	CHECK(n >= 1 && n <= 63);
	CHECK(!(name[0] >= '0' && name[0] <= '9') && name[0] != '-');
	for (i = 0; i < n; i++)
		CHECK(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
			     name[i]));
	gh_tool_normalize(orig, norm);
	CHECK(!strcmp(norm, name));
	gh_tool_normalize(name, norm);
	CHECK(!strcmp(norm, name));
	CHECK(gh_json_str(d, "description"));
	CHECK(cJSON_IsObject(params) || cJSON_IsBool(params));
	CHECK(gh_schema_check(params, NULL, 0) == 0);
	CHECK(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(d, "requireApproval")));
}

static void check_defs(const cJSON *mastra, const cJSON *openai, const cJSON *defs)
{
	const cJSON *d = defs ? defs->child : NULL, *it;
	const cJSON *m = cJSON_IsObject(mastra) ? mastra : NULL;
	const cJSON *o = cJSON_IsArray(openai) ? openai : NULL;

	CHECK(cJSON_IsArray(defs) && cJSON_GetArraySize(defs) <= 128);
	cJSON_ArrayForEach(it, m) {
		CHECK(d);
		check_def(d, it->string);
		d = d->next;
	}
	cJSON_ArrayForEach(it, o) {
		CHECK(d);
		check_def(d, gh_json_str(cJSON_GetObjectItemCaseSensitive(it, "function"), "name"));
		d = d->next;
	}
	CHECK(!d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc = NULL, *msgs = NULL, *defs = NULL;
	const cJSON *in, *mastra, *openai;
	struct gh_err e;

	if (size > MAX_INPUT)
		return 0;
	if (gh_json_parse((const char *)data, size, "input", &doc, &e) != GH_OK)
		return 0;
	in = cJSON_GetObjectItemCaseSensitive(doc, "messages");
	if (gh_messages_normalize(in, &msgs, &e) == GH_OK)
		check_messages(in, msgs);
	mastra = cJSON_GetObjectItemCaseSensitive(doc, "clientTools");
	openai = cJSON_GetObjectItemCaseSensitive(doc, "tools");
	if (gh_tools_client_defs(mastra, openai, "clientTools", &defs, &e) == GH_OK)
		check_defs(mastra, openai, defs);
	cJSON_Delete(defs);
	cJSON_Delete(msgs);
	cJSON_Delete(doc);
	return 0;
}
