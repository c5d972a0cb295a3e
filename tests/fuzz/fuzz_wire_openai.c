/*
 * fuzz_wire_openai.c - the OpenAI chat completions wire (wire_openai.c): a
 * request body parsed into CoreMessages and client tools, the choice of
 * what goes to the engine (trailing tool results, what follows the last
 * answer, tool rounds folded into text), and tool_calls rendered back.
 * Input: a request body. Must never crash or leak, and what the wire
 * accepts must be well-formed: one CoreMessage per message, each of which
 * the engine's own normaliser takes; folded history carries no tool
 * messages; rendered arguments are JSON text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "messages.h"
#include "wire_openai.h"
#include "wire_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int has_role(const cJSON *msgs, const char *role)
{
	const cJSON *m;

	cJSON_ArrayForEach(m, msgs) {
		const char *r = gh_json_str(m, "role");

		if (r && !strcmp(r, role))
			return 1;
	}
	return 0;
}

/* The model's tool calls of the conversation, rendered as tool_calls. */
static void check_tool_calls(const struct gh_openai_req *q)
{
	cJSON *calls = cJSON_CreateArray(), *out, *it;
	const cJSON *m, *p;

	CHECK(calls);
	cJSON_ArrayForEach(m, q->messages)
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content"))
			if (gh_json_str(p, "toolCallId") && gh_json_str(p, "toolName"))
				cJSON_AddItemReferenceToArray(calls, (cJSON *)(uintptr_t)p);
	out = gh_openai_tool_calls(calls, q->client_defs, 1);
	CHECK(cJSON_GetArraySize(out) == cJSON_GetArraySize(calls));
	cJSON_ArrayForEach(it, out) {
		const char *args = gh_json_str(cJSON_GetObjectItemCaseSensitive(it, "function"),
					       "arguments");
		cJSON *parsed = NULL;
		struct gh_err e;

		CHECK(args);
		CHECK(gh_json_parse(args, strlen(args), "arguments", &parsed, &e) == GH_OK);
		cJSON_Delete(parsed);
	}
	cJSON_Delete(out);
	cJSON_Delete(calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_openai_req q;
	cJSON *body = NULL, *part;
	struct gh_err e;
	char thread[GH_ID_MAX];

	if (gh_json_parse((const char *)data, size, "input", &body, &e) != GH_OK)
		return 0;
	if (gh_openai_parse(body, &q, &e) == GH_OK) {
		const cJSON *d;

		CHECK(q.model && *q.model);
		CHECK(cJSON_GetArraySize(q.messages) ==
		      cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(body, "messages")));
		check_core(q.messages, 1);
		cJSON_ArrayForEach(d, q.client_defs) {
			const char *name = gh_json_str(d, "name");

			CHECK(name && *name && strlen(name) <= 63);
		}
		if ((part = gh_openai_trailing_results(q.messages))) {
			CHECK(!has_role(part, "user") && !has_role(part, "assistant"));
			check_core(part, 1);
			cJSON_Delete(part);
		}
		part = gh_openai_after_answer(q.messages);
		CHECK(part && !has_role(part, "tool") && !has_role(part, "assistant"));
		check_core(part, 1);
		cJSON_Delete(part);
		part = gh_openai_fold_tool_rounds(q.messages);
		CHECK(part && !has_role(part, "tool"));
		check_core(part, 1);
		cJSON_Delete(part);
		check_tool_calls(&q);
		if (q.user) {
			gh_openai_user_thread("owner", q.model, q.user, thread);
			CHECK(strlen(thread) == 28 && !strncmp(thread, "usr_", 4));
		}
	}
	gh_openai_req_free(&q);
	cJSON_Delete(body);
	return 0;
}
