/*
 * fuzz_wire_anthropic.c - the Anthropic Messages wire (wire_anthropic.c): a
 * request body parsed into CoreMessages, client tools and the fields passed
 * through; the session that names a thread; the token estimate; tool_use
 * blocks rendered back. Input: a request body. Must never crash or leak,
 * and what the wire accepts must be well-formed: a continuation is exactly
 * one tool message of tool-result parts; otherwise one CoreMessage per
 * message (and one for the system prompt), each with a known role and
 * typed parts, carrying the message as sent; nothing gatehouse reads
 * itself is among the passed-through fields; a session thread is a usable
 * id.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "wire_anthropic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                  \
	do {                      \
		if (!(c))         \
			abort();  \
	} while (0)

static int role_ok(const char *r)
{
	return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") ||
		     !strcmp(r, "tool"));
}

static void check_message(const cJSON *m, int continuation)
{
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *p;
	const char *role = gh_json_str(m, "role");

	CHECK(role_ok(role));
	CHECK(cJSON_IsString(content) || cJSON_IsArray(content));
	if (continuation) {
		CHECK(!strcmp(role, "tool"));
		CHECK(cJSON_GetArraySize(content) > 0);
	}
	cJSON_ArrayForEach(p, content) {
		const char *t = gh_json_str(p, "type");

		CHECK(t);
		if (!strcmp(t, "tool-result"))
			CHECK(continuation && gh_json_str(p, "toolCallId"));
		else
			CHECK(!continuation);
		/* tool rounds of the history are told in words */
		CHECK(strcmp(t, "tool-call"));
		if (!strcmp(t, "text"))
			CHECK(gh_json_str(p, "text"));
	}
	if (!continuation && strcmp(role, "system"))
		CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "anthropic")));
}

static void check_id(const char *s)
{
	const unsigned char *p;

	CHECK(strlen(s) <= GH_NAME_MAX);
	for (p = (const unsigned char *)s; *p; p++)
		CHECK(*p >= 0x20 && *p != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_anthropic_req q;
	cJSON *body = NULL;
	struct gh_err e;
	char thread[GH_NAME_MAX + 1];
	int counting;

	if (gh_json_parse((const char *)data, size, "input", &body, &e) != GH_OK)
		return 0;
	for (counting = 0; counting < 2; counting++) {
		if (gh_anthropic_parse(body, counting, &q, &e) == GH_OK) {
			const cJSON *m, *d, *f;
			int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(body, "messages"));

			CHECK(q.model && *q.model);
			CHECK(counting || q.max_tokens >= 1);
			CHECK(!counting || !q.stream);
			if (q.continuation)
				CHECK(cJSON_GetArraySize(q.messages) == 1);
			else
				CHECK(cJSON_GetArraySize(q.messages) == n ||
				      cJSON_GetArraySize(q.messages) == n + 1);
			CHECK(q.history_len >= 0 && q.history_len <= n);
			cJSON_ArrayForEach(m, q.messages)
				check_message(m, q.continuation);
			cJSON_ArrayForEach(d, q.client_defs) {
				const char *name = gh_json_str(d, "name");
				cJSON *use, *call = cJSON_CreateObject();

				CHECK(name && *name && strlen(name) <= 63);
				CHECK(call);
				cJSON_AddStringToObject(call, "toolCallId", "call_1");
				cJSON_AddStringToObject(call, "toolName", name);
				use = gh_anthropic_tool_use(call, q.client_defs);
				CHECK(use && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(use, "input")));
				CHECK(gh_json_str(use, "name"));
				cJSON_Delete(use);
				cJSON_Delete(call);
			}
			cJSON_ArrayForEach(f, q.passthrough)
				CHECK(strcmp(f->string, "model") && strcmp(f->string, "messages") &&
				      strcmp(f->string, "tools") && strcmp(f->string, "stream") &&
				      strcmp(f->string, "max_tokens"));
			gh_anthropic_session_thread(NULL, q.user_id, thread);
			check_id(thread);
			CHECK(!q.user_id || !*q.user_id || thread[0]);
			CHECK(gh_anthropic_estimate_tokens(body) >= 1);
		}
		gh_anthropic_req_free(&q);
	}
	gh_anthropic_session_thread(gh_json_str(body, "model"), NULL, thread);
	check_id(thread);
	cJSON_Delete(body);
	return 0;
}
