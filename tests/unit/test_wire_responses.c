/*
 * test_wire_responses.c - the Responses API wire (wire_responses.c): input
 * items into CoreMessages (messages, function calls joined to the
 * assistant message before them, outputs), tools of other types left out
 * and named, refusals that name the field, which of a conversation goes to
 * the engine, and the answer's shapes.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "t.h"
#include "wire_responses.h"

static cJSON *parse(const char *s)
{
	cJSON *v = NULL;
	struct gh_err e;

	if (gh_json_parse(s, strlen(s), "test", &v, &e) != GH_OK)
		return NULL;
	return v;
}

static char *dump(const cJSON *v)
{
	return gh_json_dump(v);
}

static void test_input_items(void)
{
	cJSON *body = parse(
		"{\"model\":\"a\",\"instructions\":\"I\",\"input\":["
		"{\"type\":\"message\",\"role\":\"developer\",\"content\":\"rules\"},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"one\"},"
		"{\"type\":\"input_text\",\"text\":\"two\"}]},"
		"{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
		"{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
		"\"text\":\"Checking.\"}]},"
		"{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"get weather\","
		"\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"},"
		"{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"t\",\"arguments\":\"\"},"
		"{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"{\\\"t\\\":1}\"},"
		"{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":"
		"[{\"type\":\"input_text\",\"text\":\"noon\"}]}]}");
	struct gh_responses_req q;
	struct gh_err e;
	char *s;

	T_ASSERT(body);
	T_EQ_INT(gh_responses_parse(body, &q, &e), GH_OK);
	T_EQ_STR(q.model, "a");
	T_EQ_STR(q.instructions, "I");
	T_EQ_INT(q.store, 1);
	s = dump(q.input);
	T_EQ_STR(s, "[{\"role\":\"system\",\"content\":\"rules\"},"
		    "{\"role\":\"user\",\"content\":\"one\\ntwo\"},"
		    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Checking.\"},"
		    "{\"type\":\"tool-call\",\"toolCallId\":\"c1\",\"toolName\":\"get_weather\","
		    "\"args\":{\"city\":\"Oslo\"}},"
		    "{\"type\":\"tool-call\",\"toolCallId\":\"c2\",\"toolName\":\"t\",\"args\":{}}]},"
		    "{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c1\","
		    "\"result\":{\"t\":1}}]},"
		    "{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c2\","
		    "\"result\":\"noon\"}]}]");
	free(s);
	gh_responses_req_free(&q);
	cJSON_Delete(body);
}

static void test_tools(void)
{
	cJSON *body = parse(
		"{\"model\":\"a\",\"input\":\"hi\",\"tools\":["
		"{\"type\":\"function\",\"name\":\"exec_command\",\"parameters\":{\"type\":\"object\","
		"\"properties\":{\"cmd\":{\"type\":\"string\"}}}},"
		"{\"type\":\"namespace\",\"name\":\"mcp\"},{\"type\":\"web_search\"}]}");
	struct gh_responses_req q;
	struct gh_err e;

	T_EQ_INT(gh_responses_parse(body, &q, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(q.client_defs), 1);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(q.client_defs, 0), "name"), "exec_command");
	T_EQ_STR(q.skipped, "namespace,web_search");
	gh_responses_req_free(&q);
	cJSON_Delete(body);

	/* tool_choice "none" offers none */
	body = parse("{\"model\":\"a\",\"input\":\"hi\",\"tool_choice\":\"none\",\"tools\":["
		     "{\"type\":\"function\",\"name\":\"t\"}]}");
	T_EQ_INT(gh_responses_parse(body, &q, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(q.client_defs), 0);
	gh_responses_req_free(&q);
	cJSON_Delete(body);
}

static void test_refusals_name_the_field(void)
{
	static const struct {
		const char *body, *msg;
	} cases[] = {
		{"{\"input\":\"x\"}", "model: required"},
		{"{\"model\":\"a\"}", "input: required"},
		{"{\"model\":\"a\",\"input\":[]}", "input: holds no message"},
		{"{\"model\":\"a\",\"input\":\"x\",\"stream\":1}", "stream: expected true or false"},
		{"{\"model\":\"a\",\"input\":\"x\",\"store\":\"no\"}", "store: expected"},
		{"{\"model\":\"a\",\"input\":\"x\",\"background\":true}", "background"},
		{"{\"model\":\"a\",\"input\":\"x\",\"conversation\":\"c\"}", "conversation"},
		{"{\"model\":\"a\",\"input\":\"x\",\"previous_response_id\":\"\"}",
		 "previous_response_id"},
		{"{\"model\":\"a\",\"input\":\"x\",\"instructions\":1}", "instructions"},
		{"{\"model\":\"a\",\"input\":\"x\",\"tool_choice\":1}", "tool_choice"},
		{"{\"model\":\"a\",\"input\":\"x\",\"tools\":[{\"name\":\"t\"}]}", "tools[0]"},
		{"{\"model\":\"a\",\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
		 "input[0].role: expected user, assistant, system or developer"},
		{"{\"model\":\"a\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
		 "\"input_file\"}]}]}", "input[0].content[0]: \"input_file\" parts are not"},
		{"{\"model\":\"a\",\"input\":[{\"type\":\"function_call\",\"name\":\"t\","
		 "\"arguments\":\"{}\"}]}", "input[0]: a function_call needs call_id"},
		{"{\"model\":\"a\",\"input\":[{\"type\":\"function_call_output\",\"output\":\"x\"}]}",
		 "input[0].call_id: required"},
		{"{\"model\":\"a\",\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}",
		 "input[0].output: required"},
		{"{\"model\":\"a\",\"input\":[\"x\"]}", "input[0]: expected an item object"},
		{"{\"model\":\"a\",\"input\":[{\"type\":\"custom_tool_call\"}]}",
		 "input[0].type: \"custom_tool_call\" items are not supported"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *body = parse(cases[i].body);
		struct gh_responses_req q;
		struct gh_err e;

		T_ASSERT(body);
		T_EQ_INT(gh_responses_parse(body, &q, &e), GH_E_BADREQ);
		T_CONTAINS(e.msg, cases[i].msg);
		gh_responses_req_free(&q);
		cJSON_Delete(body);
	}
}

static void test_approval_response(void)
{
	cJSON *body = parse("{\"model\":\"a\",\"input\":["
			    "{\"type\":\"mcp_approval_response\",\"approval_request_id\":\"apr_0\","
			    "\"approve\":false},{\"role\":\"user\",\"content\":\"x\"},"
			    "{\"type\":\"mcp_approval_response\",\"approval_request_id\":\"apr_1\","
			    "\"approve\":true,\"reason\":\"fine\"}]}");
	struct gh_responses_req q;
	struct gh_err e;

	/* the last one decides; earlier ones are history, passed on as nothing */
	T_EQ_INT(gh_responses_parse(body, &q, &e), GH_OK);
	T_EQ_STR(q.approval_id, "apr_1");
	T_EQ_INT(q.approve, 1);
	T_EQ_STR(q.approval_reason, "fine");
	T_EQ_INT(cJSON_GetArraySize(q.input), 1);
	gh_responses_req_free(&q);
	cJSON_Delete(body);

	body = parse("{\"model\":\"a\",\"input\":[{\"role\":\"user\",\"content\":\"x\"},"
		     "{\"type\":\"mcp_approval_response\",\"approval_request_id\":\"apr_1\"}]}");
	T_EQ_INT(gh_responses_parse(body, &q, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "input[1]: an mcp_approval_response needs approval_request_id and "
			  "approve");
	gh_responses_req_free(&q);
	cJSON_Delete(body);

	/* not at the end: no decision */
	body = parse("{\"model\":\"a\",\"input\":[{\"type\":\"mcp_approval_response\","
		     "\"approval_request_id\":\"apr_1\",\"approve\":true},"
		     "{\"role\":\"user\",\"content\":\"x\"}]}");
	T_EQ_INT(gh_responses_parse(body, &q, &e), GH_OK);
	T_ASSERT(q.approval_id == NULL);
	gh_responses_req_free(&q);
	cJSON_Delete(body);
}

static void test_conversation(void)
{
	cJSON *prev = parse("[{\"role\":\"user\",\"content\":\"hi\"},"
			    "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\","
			    "\"toolCallId\":\"c1\",\"toolName\":\"t\",\"args\":{}}]}]");
	cJSON *results = parse("[{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
			       "\"toolCallId\":\"c1\",\"result\":\"r\"}]}]");
	cJSON *next = parse("[{\"role\":\"user\",\"content\":\"and?\"}]");
	cJSON *all = NULL, *out = NULL;
	struct gh_err e;
	int cont = -1;
	char *s;

	/* results at the end: only they go to the engine */
	T_EQ_INT(gh_responses_conversation(prev, results, "I", &all, &out, &cont, &e), GH_OK);
	T_EQ_INT(cont, 1);
	T_EQ_INT(cJSON_GetArraySize(all), 3);
	s = dump(out);
	T_EQ_STR(s, "[{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
		    "\"toolCallId\":\"c1\",\"result\":\"r\"}]}]");
	free(s);
	cJSON_Delete(all);
	cJSON_Delete(out);

	/* a new message: instructions, then the whole conversation in words */
	cJSON_AddItemToArray(prev, cJSON_Duplicate(cJSON_GetArrayItem(results, 0), 1));
	T_EQ_INT(gh_responses_conversation(prev, next, "I", &all, &out, &cont, &e), GH_OK);
	T_EQ_INT(cont, 0);
	s = dump(out);
	T_EQ_STR(s, "[{\"role\":\"system\",\"content\":\"I\"},{\"role\":\"user\",\"content\":\"hi\"},"
		    "{\"role\":\"assistant\",\"content\":\"[called t({}) -> \\\"r\\\"]\"},"
		    "{\"role\":\"user\",\"content\":\"and?\"}]");
	free(s);
	cJSON_Delete(all);
	cJSON_Delete(out);
	cJSON_Delete(prev);
	cJSON_Delete(results);
	cJSON_Delete(next);
}

static void test_answer_shapes(void)
{
	cJSON *call = parse("{\"toolCallId\":\"call_1\",\"toolName\":\"get_weather\","
			    "\"args\":{\"city\":\"Oslo\"}}");
	cJSON *defs = parse("[{\"name\":\"get_weather\",\"origName\":\"get weather\"}]");
	cJSON *it, *back = cJSON_CreateArray(), *items = cJSON_CreateArray(), *obj;
	struct gh_responses_req q;
	struct gh_run_usage u = {3, 4};
	struct gh_err e;
	char *s;

	it = gh_responses_call_item("fc_1", call, defs, 1);
	s = dump(it);
	T_EQ_STR(s, "{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\","
		    "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\",\"call_id\":\"call_1\","
		    "\"name\":\"get weather\"}");
	free(s);
	cJSON_AddItemToArray(items, gh_responses_message_item("msg_1", "Checking.", 1));
	cJSON_AddItemToArray(items, it);
	cJSON_AddItemToArray(items, gh_responses_approval_item("apr_1", "send_email", NULL));
	/* the output read back: one assistant message with the text and the call */
	T_EQ_INT(gh_responses_items(items, "output", back, &e), GH_OK);
	s = dump(back);
	T_EQ_STR(s, "[{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
		    "\"Checking.\"},{\"type\":\"tool-call\",\"toolCallId\":\"call_1\","
		    "\"toolName\":\"get_weather\",\"args\":{\"city\":\"Oslo\"}}]}]");
	free(s);
	memset(&q, 0, sizeof(q));
	q.store = 1;
	obj = gh_responses_object("resp_1", 7, "a", &q, "completed", items, &u, NULL, NULL);
	T_EQ_STR(gh_json_str(obj, "object"), "response");
	T_EQ_INT(gh_json_int(obj, "created_at", 0), 7);
	T_EQ_INT(gh_json_int(cJSON_GetObjectItemCaseSensitive(obj, "usage"), "total_tokens", 0), 7);
	T_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(obj, "output")), 3);
	T_ASSERT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(obj, "previous_response_id")));
	cJSON_Delete(obj);
	cJSON_Delete(back);
	cJSON_Delete(call);
	cJSON_Delete(defs);
}

T_MAIN(T(test_input_items), T(test_tools), T(test_refusals_name_the_field),
       T(test_approval_response), T(test_conversation), T(test_answer_shapes))
