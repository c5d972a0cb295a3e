/*
 * test_wire_anthropic.c - the Anthropic Messages wire: which requests
 * continue a run (the last user message's tool results, past a trailing
 * system-role reminder), what passes through, which tools are client
 * tools, model names to agents, and the session that names a thread.
 */
#include "wire_anthropic.h"

#include "json.h"
#include "t.h"
#include "util.h"

static void test_continuation_past_a_system_reminder(void)
{
	cJSON *body = gh_json_parse_stored(
		"{\"model\":\"claude-x\",\"max_tokens\":9,\"messages\":["
		"{\"role\":\"user\",\"content\":\"go\"},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"call_1\","
		"\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}]},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\","
		"\"content\":\"a b\",\"is_error\":true}]},"
		"{\"role\":\"system\",\"content\":\"reminder\"}]}");
	struct gh_anthropic_req q;
	struct gh_err e;
	const cJSON *m, *part;

	T_ASSERT(body);
	T_EQ_INT(gh_anthropic_parse(body, 0, &q, &e), GH_OK);
	T_EQ_INT(q.continuation, 1);
	T_EQ_INT(cJSON_GetArraySize(q.messages), 1);
	m = cJSON_GetArrayItem(q.messages, 0);
	T_EQ_STR(gh_json_str(m, "role"), "tool");
	part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"), 0);
	T_EQ_STR(gh_json_str(part, "toolCallId"), "call_1");
	T_EQ_STR(gh_json_str(part, "toolName"), "Bash");
	T_EQ_INT(gh_json_bool(part, "isError", 0), 1);
	gh_anthropic_req_free(&q);
	cJSON_Delete(body);
}

static void test_new_turn_folds_tool_rounds_and_keeps_the_messages(void)
{
	cJSON *body = gh_json_parse_stored(
		"{\"model\":\"claude-x\",\"max_tokens\":9,\"system\":[{\"type\":\"text\",\"text\":\"S\","
		"\"cache_control\":{\"type\":\"ephemeral\"}}],\"thinking\":{\"type\":\"adaptive\"},"
		"\"stream\":true,\"messages\":["
		"{\"role\":\"user\",\"content\":\"go\"},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\","
		"\"signature\":\"s1\"},{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"Bash\","
		"\"input\":{\"command\":\"ls\"}}]},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\","
		"\"content\":\"a b\"}]},"
		"{\"role\":\"assistant\",\"content\":\"done\"},"
		"{\"role\":\"user\",\"content\":\"again\"}]}");
	struct gh_anthropic_req q;
	struct gh_err e;
	const cJSON *m;

	T_ASSERT(body);
	T_EQ_INT(gh_anthropic_parse(body, 0, &q, &e), GH_OK);
	T_EQ_INT(q.continuation, 0);
	T_EQ_INT(q.stream, 1);
	T_EQ_INT(q.history_len, 4);                  /* through the last answer */
	T_EQ_INT(cJSON_GetArraySize(q.messages), 6); /* system + 5 */
	m = cJSON_GetArrayItem(q.messages, 0);
	T_EQ_STR(gh_json_str(m, "role"), "system");
	T_EQ_STR(gh_json_str(m, "content"), "S");
	T_ASSERT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m, "anthropic")));
	m = cJSON_GetArrayItem(q.messages, 2);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"), 0),
			     "type"), "reasoning");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"), 1),
			     "text"), "(called tool Bash with {\"command\":\"ls\"})");
	T_ASSERT(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(m, "anthropic"),
			       cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(body, "messages"),
						  1), 1));
	m = cJSON_GetArrayItem(q.messages, 3);
	T_EQ_STR(gh_json_str(m, "role"), "user");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "content"), 0),
			     "text"), "(tool Bash answered: a b)");
	/* what gatehouse does not read passes through; what it reads does not */
	T_ASSERT(cJSON_GetObjectItemCaseSensitive(q.passthrough, "system"));
	T_ASSERT(cJSON_GetObjectItemCaseSensitive(q.passthrough, "thinking"));
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(q.passthrough, "messages"));
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(q.passthrough, "stream"));
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(q.passthrough, "max_tokens"));
	gh_anthropic_req_free(&q);
	cJSON_Delete(body);
}

static void test_tools_and_fields(void)
{
	static const struct {
		const char *body, *err; /* err NULL: parses */
		int counting, ndefs;
	} cases[] = {
		{"{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		 "\"tools\":[{\"name\":\"Bash\",\"input_schema\":{\"type\":\"object\"}},"
		 "{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}]}", NULL, 0, 1},
		{"{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		 "\"tools\":[{\"name\":\"Bash\",\"input_schema\":{\"type\":\"object\"}}],"
		 "\"tool_choice\":{\"type\":\"none\"}}", NULL, 0, 0},
		{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
		 "max_tokens: Field required", 0, 0},
		{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", NULL, 1, 0},
		{"{\"max_tokens\":5,\"messages\":[]}", "model: Field required", 0, 0},
		{"{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}", "messages: at least one", 0, 0},
		{"{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\"}]}",
		 "messages.0.content: Field required", 0, 0},
		{"{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"
		 "[{\"type\":\"text\"}]}]}", "messages.0.content.0.text: Field required", 0, 0},
		{"{\"model\":\"m\",\"max_tokens\":5,\"tool_choice\":\"auto\",\"messages\":[{\"role\":"
		 "\"user\",\"content\":\"x\"}]}", "tool_choice: expected", 0, 0},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(cases); i++) {
		cJSON *body = gh_json_parse_stored(cases[i].body);
		struct gh_anthropic_req q;
		struct gh_err e;
		enum gh_code rc;

		T_ASSERT(body);
		gh_err_clear(&e);
		rc = gh_anthropic_parse(body, cases[i].counting, &q, &e);
		if (cases[i].err) {
			T_EQ_INT(rc, GH_E_BADREQ);
			if (!strstr(e.msg, cases[i].err))
				fprintf(stderr, "  case %zu: %s\n", i, e.msg);
			T_ASSERT(strstr(e.msg, cases[i].err) != NULL);
		} else {
			T_EQ_INT(rc, GH_OK);
			T_EQ_INT(cJSON_GetArraySize(q.client_defs), cases[i].ndefs);
		}
		gh_anthropic_req_free(&q);
		cJSON_Delete(body);
	}
}

static void test_models_to_agents(void)
{
	static const char text[] =
		"{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{"
		"\"hidden\":{\"provider\":\"m\",\"models\":[\"claude-*\"]},"
		"\"claude\":{\"provider\":\"m\",\"models\":[\"claude-*\"]},"
		"\"haiku\":{\"provider\":\"m\",\"models\":[\"claude-haiku-*\"]}},"
		"\"policies\":{\"p\":{\"agents\":[\"claude\",\"haiku\"]}}}";
	struct gh_config *c = NULL;
	const struct gh_policy_conf *p;
	struct gh_err e;

	T_EQ_INT(gh_config_parse("m.json", text, strlen(text), &c, &e), GH_OK);
	p = gh_config_policy(c, "p");
	T_EQ_STR(gh_anthropic_agent(c, p, "haiku")->id, "haiku");          /* an agent's id */
	T_EQ_STR(gh_anthropic_agent(c, p, "claude-opus-4")->id, "claude"); /* the first allowed */
	T_EQ_STR(gh_anthropic_agent(c, NULL, "claude-opus-4")->id, "hidden"); /* none allowed */
	T_ASSERT(gh_anthropic_agent(c, p, "gpt-4o") == NULL);
	gh_config_free(c);
}

static void test_session_names_the_thread(void)
{
	char t[GH_NAME_MAX + 1], long_id[300];

	gh_anthropic_session_thread("sess-1", "{\"session_id\":\"other\"}", t);
	T_EQ_STR(t, "sess-1");
	gh_anthropic_session_thread(NULL, "{\"device_id\":\"d\",\"session_id\":\"abc-123\"}", t);
	T_EQ_STR(t, "abc-123");
	gh_anthropic_session_thread(NULL, "user_ab12_account__session_9f0e-77", t);
	T_EQ_STR(t, "9f0e-77");
	gh_anthropic_session_thread(NULL, "dev-1", t);
	T_EQ_STR(t, "dev-1");
	memset(long_id, 'x', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	gh_anthropic_session_thread(long_id, NULL, t);
	T_EQ_INT((int64_t)strlen(t), 28);
	T_ASSERT(!strncmp(t, "ses_", 4));
	gh_anthropic_session_thread("a\tb", NULL, t);
	T_ASSERT(!strncmp(t, "ses_", 4));
	gh_anthropic_session_thread(NULL, NULL, t);
	T_EQ_STR(t, "");
}

T_MAIN(T(test_continuation_past_a_system_reminder),
       T(test_new_turn_folds_tool_rounds_and_keeps_the_messages), T(test_tools_and_fields),
       T(test_models_to_agents), T(test_session_names_the_thread))
