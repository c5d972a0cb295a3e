/*
 * test_wire_agui.c - the AG-UI wire (wire_agui.c): a RunAgentInput into
 * what the engine runs (a new turn with what the thread already holds, or
 * the trailing tool results of a continuation), client tools under the
 * names the client gave them, context as a system message, resume entries
 * and their refusals, and the interrupts gatehouse answers with.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "t.h"
#include "wire_agui.h"

static cJSON *parse(const char *s)
{
	cJSON *v = NULL;
	struct gh_err e;

	if (gh_json_parse(s, strlen(s), "test", &v, &e) != GH_OK)
		return NULL;
	return v;
}

static const char *role_at(const cJSON *msgs, int i)
{
	return gh_json_str(cJSON_GetArrayItem(msgs, i), "role");
}

static void test_new_turn_history(void)
{
	cJSON *body = parse(
		"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":["
		"{\"id\":\"1\",\"role\":\"user\",\"content\":\"Hi\"},"
		"{\"id\":\"2\",\"role\":\"assistant\",\"content\":\"Looking.\",\"toolCalls\":["
		"{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"lookup\","
		"\"arguments\":\"{\\\"w\\\":1}\"}}]},"
		"{\"id\":\"3\",\"role\":\"tool\",\"toolCallId\":\"c1\",\"content\":\"found\"},"
		"{\"id\":\"4\",\"role\":\"reasoning\",\"content\":\"hm\"},"
		"{\"id\":\"5\",\"role\":\"assistant\",\"content\":\"Done.\"},"
		"{\"id\":\"6\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Next\"}]}],"
		"\"context\":[{\"description\":\"page\",\"value\":\"/settings\"}],"
		"\"state\":{\"x\":1},\"forwardedProps\":{}}");
	struct gh_agui_req q;
	struct gh_err e;
	char *t;

	T_ASSERT(body);
	T_EQ_INT(gh_agui_parse(body, &q, &e), GH_OK);
	T_EQ_STR(q.thread_id, "t");
	T_EQ_STR(q.run_id, "r");
	T_EQ_INT(q.continuation, 0);
	/* context first, then the conversation with the tool round in words */
	T_EQ_STR(role_at(q.messages, 0), "system");
	T_CONTAINS(gh_json_str(cJSON_GetArrayItem(q.messages, 0), "content"), "page: /settings");
	T_EQ_STR(role_at(q.messages, 1), "user");
	T_EQ_STR(role_at(q.messages, 2), "assistant");
	T_EQ_INT(cJSON_GetArraySize(q.messages), 4);
	/* the thread holds all but the last user message */
	T_EQ_INT(q.history_len, 3);
	t = gh_json_dump(q.messages);
	T_CONTAINS(t, "lookup");
	T_CONTAINS(t, "Done.");
	T_ASSERT(!strstr(t, "\"tool\""));
	free(t);
	gh_agui_req_free(&q);
	cJSON_Delete(body);
}

static void test_continuation(void)
{
	cJSON *body = parse(
		"{\"threadId\":\"t\",\"runId\":\"r2\",\"parentRunId\":\"r\",\"messages\":["
		"{\"id\":\"1\",\"role\":\"user\",\"content\":\"Where?\"},"
		"{\"id\":\"2\",\"role\":\"assistant\",\"toolCalls\":[{\"id\":\"c2\",\"type\":"
		"\"function\",\"function\":{\"name\":\"get location\",\"arguments\":\"{}\"}}]},"
		"{\"id\":\"3\",\"role\":\"tool\",\"toolCallId\":\"c2\",\"content\":\"\","
		"\"error\":\"no GPS\"}],"
		"\"tools\":[{\"name\":\"get location\",\"description\":\"Where\","
		"\"parameters\":{\"type\":\"object\"}}]}");
	struct gh_agui_req q;
	struct gh_err e;
	const cJSON *part;

	T_ASSERT(body);
	T_EQ_INT(gh_agui_parse(body, &q, &e), GH_OK);
	T_EQ_STR(q.parent_run_id, "r");
	T_EQ_INT(q.continuation, 1);
	T_EQ_INT(cJSON_GetArraySize(q.messages), 1);
	part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(q.messages, 0),
								    "content"), 0);
	T_EQ_STR(gh_json_str(part, "toolCallId"), "c2");
	T_EQ_STR(gh_json_str(part, "result"), "no GPS");
	/* the tool's name normalised; the client's own name kept */
	T_EQ_INT(cJSON_GetArraySize(q.client_defs), 1);
	T_EQ_STR(gh_agui_client_name(q.client_defs, gh_json_str(cJSON_GetArrayItem(q.client_defs, 0),
								"name")),
		 "get location");
	gh_agui_req_free(&q);
	cJSON_Delete(body);
}

static void test_resume(void)
{
	cJSON *body = parse(
		"{\"threadId\":\"t\",\"runId\":\"r3\",\"messages\":[],\"resume\":["
		"{\"interruptId\":\"apr_1\",\"status\":\"resolved\",\"payload\":{\"approved\":true,"
		"\"editedArgs\":{\"to\":\"c\"}}},"
		"{\"interruptId\":\"apr_2\",\"status\":\"resolved\",\"payload\":{\"approved\":false,"
		"\"reason\":\"no\"}},"
		"{\"interruptId\":\"apr_3\",\"status\":\"cancelled\"}]}");
	struct gh_agui_req q;
	struct gh_err e;

	T_ASSERT(body);
	T_EQ_INT(gh_agui_parse(body, &q, &e), GH_OK);
	T_EQ_INT(q.nresume, 3);
	T_ASSERT(!q.messages);
	T_EQ_INT(q.resume[0].approve, 1);
	T_EQ_STR(gh_json_str(q.resume[0].edited_args, "to"), "c");
	T_EQ_INT(q.resume[1].approve, 0);
	T_EQ_STR(q.resume[1].reason, "no");
	T_EQ_INT(q.resume[2].cancelled, 1);
	T_EQ_INT(q.resume[2].approve, 0);
	gh_agui_req_free(&q);
	cJSON_Delete(body);
}

/* Each refusal names the field at fault and leaves nothing behind. */
static void test_refusals(void)
{
	static const struct {
		const char *body, *field;
	} cases[] = {
		{"{\"runId\":\"r\",\"messages\":[{\"id\":\"1\",\"role\":\"user\",\"content\":\"x\"}]}",
		 "threadId"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[]}", "messages"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"id\":\"1\",\"role\":\"bot\"}]}",
		 "messages[0].role"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"id\":\"1\",\"role\":"
		 "\"reasoning\",\"content\":\"x\"}],\"tools\":[{\"name\":\"a\"}]}", "messages"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"resume\":[{\"interruptId\":\"a\",\"status\":"
		 "\"resolved\",\"payload\":{\"approved\":false,\"editedArgs\":{}}}]}",
		 "resume[0].payload.editedArgs"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"resume\":[{\"interruptId\":\"a\",\"status\":"
		 "\"resolved\"}]}", "resume[0].payload.approved"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"resume\":[{\"interruptId\":\"a\",\"status\":"
		 "\"cancelled\"},{\"interruptId\":\"a\",\"status\":\"cancelled\"}]}", "resume[1]"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"id\":\"1\",\"role\":\"user\","
		 "\"content\":\"x\"}],\"context\":[{\"description\":1}]}", "context[0]"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"id\":\"1\",\"role\":\"user\","
		 "\"content\":\"x\"}],\"tools\":[{\"name\":\"a\",\"parameters\":{\"type\":7}}]}",
		 "tools"},
		{"{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"id\":\"1\",\"role\":"
		 "\"assistant\",\"content\":\"x\"}]}", "messages"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *body = parse(cases[i].body);
		struct gh_agui_req q;
		struct gh_err e;

		T_ASSERT(body);
		T_EQ_INT(gh_agui_parse(body, &q, &e), GH_E_BADREQ);
		T_CONTAINS(e.msg, cases[i].field);
		T_ASSERT(!q.messages && !q.client_defs);
		gh_agui_req_free(&q);
		cJSON_Delete(body);
	}
}

static void test_interrupts(void)
{
	cJSON *args = parse("{\"to\":\"bob\"}"), *it, *md;
	struct gh_agui_pending p = {"apr_1", "call_1", "send_email", args, "ab12", "caller",
				    "approval: send_*", 1795585504104};

	T_ASSERT(args);
	it = gh_agui_interrupt(&p);
	md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
	T_EQ_STR(gh_json_str(it, "id"), "apr_1");
	T_EQ_STR(gh_json_str(it, "reason"), "approval_required");
	T_EQ_STR(gh_json_str(it, "toolCallId"), "call_1");
	T_EQ_STR(gh_json_str(it, "expiresAt"), "2026-11-25T05:45:04.104Z");
	T_ASSERT(cJSON_GetObjectItemCaseSensitive(it, "responseSchema"));
	T_EQ_STR(gh_json_str(md, "kind"), "approval");
	T_EQ_STR(gh_json_str(md, "toolName"), "send_email");
	T_EQ_STR(gh_json_str(cJSON_GetObjectItemCaseSensitive(md, "input"), "to"), "bob");
	T_EQ_STR(gh_json_str(md, "argsDigest"), "ab12");
	T_EQ_STR(gh_json_str(md, "rule"), "approval: send_*");
	cJSON_Delete(it);
	/* an admin's: not the caller's to answer */
	p.approver = "admin";
	it = gh_agui_interrupt(&p);
	md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
	T_EQ_STR(gh_json_str(it, "reason"), "admin_approval_pending");
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(it, "responseSchema"));
	T_ASSERT(!gh_json_str(md, "kind"));
	T_EQ_STR(gh_json_str(md, "approver"), "admin");
	cJSON_Delete(it);
	cJSON_Delete(args);
}

T_MAIN(T(test_new_turn_history), T(test_continuation), T(test_resume), T(test_refusals),
       T(test_interrupts))
