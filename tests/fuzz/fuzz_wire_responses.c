/*
 * fuzz_wire_responses.c - the OpenAI Responses API wire (wire_responses.c):
 * a request body parsed into CoreMessages and client tools, the choice of
 * what goes to the engine (trailing function_call_output items continue a
 * run; otherwise instructions and the conversation with tool rounds told
 * in words), and the answer's items rendered back and read again.
 * Input: a request body. Must never crash or leak, and what the wire
 * accepts must be well-formed: CoreMessages the engine's own normaliser
 * takes, a continuation made of tool results only and a new run's messages
 * without them, rendered arguments that are JSON text, and rendered output
 * items that the wire reads back as the same calls.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "messages.h"
#include "wire_responses.h"
#include "wire_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every tool call of the input rendered as a function_call item, and the
 * items read back: the same calls, with the same arguments. */
static void check_round_trip(const struct gh_responses_req *q)
{
	cJSON *items = cJSON_CreateArray(), *back = cJSON_CreateArray(), *calls = cJSON_CreateArray();
	const cJSON *m, *p, *c, *b;
	struct gh_err e;
	int n = 0;

	CHECK(items && back && calls);
	cJSON_ArrayForEach(m, q->input)
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content"))
			if (gh_json_str(p, "toolCallId") && gh_json_str(p, "toolName"))
				cJSON_AddItemReferenceToArray(calls, (cJSON *)(uintptr_t)p);
	cJSON_ArrayForEach(c, calls) {
		cJSON *it = gh_responses_call_item("fc_1", c, q->client_defs, 1), *parsed = NULL;
		const char *args = gh_json_str(it, "arguments");

		CHECK(it && args);
		CHECK(gh_json_parse(args, strlen(args), "arguments", &parsed, &e) == GH_OK);
		cJSON_Delete(parsed);
		cJSON_AddItemToArray(items, it);
		n++;
	}
	cJSON_AddItemToArray(items, gh_responses_message_item("msg_1", "text", 1));
	cJSON_AddItemToArray(items, gh_responses_approval_item("apr_1", "t", NULL));
	CHECK(gh_responses_items(items, "output", back, &e) == GH_OK);
	check_core(back, 1);
	/* one assistant message: the calls, then the text after them */
	CHECK(count_role(back, "assistant") == (n ? 2 : 1));
	if (n) {
		const cJSON *parts = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(back, 0),
								      "content");
		int i = 0;

		CHECK(cJSON_GetArraySize(parts) == n);
		cJSON_ArrayForEach(b, parts) {
			const cJSON *orig = cJSON_GetArrayItem(calls, i++);

			CHECK(!strcmp(gh_json_str(b, "toolCallId"), gh_json_str(orig, "toolCallId")));
			CHECK(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(b, "args"),
					    cJSON_GetObjectItemCaseSensitive(orig, "args"), 1));
		}
	}
	cJSON_Delete(items);
	cJSON_Delete(back);
	cJSON_Delete(calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_responses_req q;
	cJSON *body = NULL, *all = NULL, *msgs = NULL, *obj;
	struct gh_run_usage u = {1, 2};
	struct gh_err e;
	int cont = 0;

	if (gh_json_parse((const char *)data, size, "input", &body, &e) != GH_OK)
		return 0;
	if (gh_responses_parse(body, &q, &e) == GH_OK) {
		const cJSON *d;

		CHECK(q.model && *q.model);
		check_core(q.input, 1);
		if (q.approval_id) {
			const cJSON *in = cJSON_GetObjectItemCaseSensitive(body, "input");

			CHECK(!strcmp(gh_json_str(cJSON_GetArrayItem(in, cJSON_GetArraySize(in) - 1),
						  "type"), "mcp_approval_response"));
		}
		cJSON_ArrayForEach(d, q.client_defs) {
			const char *name = gh_json_str(d, "name");

			CHECK(name && *name && strlen(name) <= 63);
		}
		/* the input after itself, as a stored conversation would be */
		if (gh_responses_conversation(q.input, q.input, q.instructions, &all, &msgs, &cont,
					      &e) == GH_OK) {
			CHECK(cJSON_GetArraySize(all) == 2 * cJSON_GetArraySize(q.input));
			if (cont)
				CHECK(count_role(msgs, "tool") == cJSON_GetArraySize(msgs));
			else
				CHECK(count_role(msgs, "tool") == 0);
			check_core(msgs, 1);
		}
		check_round_trip(&q);
		obj = gh_responses_object("resp_1", 0, q.model, &q, "completed", NULL, &u, NULL, NULL);
		CHECK(obj && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(obj, "output")));
		cJSON_Delete(obj);
	}
	cJSON_Delete(all);
	cJSON_Delete(msgs);
	gh_responses_req_free(&q);
	cJSON_Delete(body);
	return 0;
}
