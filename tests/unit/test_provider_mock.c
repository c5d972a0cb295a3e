/*
 * test_provider_mock.c - the offline mock model: every kind of rule (text,
 * tool when offered, tool skipped when not, default, built-in default), the
 * answers after tool results ("then" chosen by tool and if_contains,
 * "after_tool", the built-in one), every template form, the 64 KB bound,
 * word-count usage, unique call ids, and streaming word by word with ticks
 * and aborts.
 */
#include "provider.h"

#include "buf.h"
#include "err.h"
#include "t.h"

#include <cjson/cJSON.h>

static const char cfg_json[] =
	"{\"type\":\"mock\",\"rules\":["
	"{\"if_contains\":\"remember\",\"tool\":\"memory_save\","
	" \"args\":{\"content\":\"{{after:remember that}}\"},\"then\":\"Noted:"
	" {{result.content}}\"},"
	"{\"if_contains\":\"favourite colour\",\"tool\":\"memory_search\","
	" \"args\":{\"query\":\"favourite colour\"},"
	" \"then\":\"From memory: {{result.memories.0.content}}\"},"
	"{\"if_contains\":\"weather in\",\"tool\":\"get_weather\","
	" \"args\":{\"city\":\"{{after:weather in}}\",\"opts\":{\"units\":[\"metric\","
	"\"{{message}}\"],"
	"  \"days\":3,\"alerts\":true}}},"
	"{\"if_contains\":\"forecast\",\"tool\":\"get_weather\",\"args\":{\"city\":\"Oslo\"},"
	" \"then\":\"Forecast: {{result.temp}} degrees [{{result.nothing.0}}]\"},"
	"{\"if_contains\":\"hello\",\"text\":\"Hello! I am gatehouse's offline mock model.\"},"
	"{\"if_contains\":\"echo\",\"text\":\"<{{ message }}|{{after:echo}}|{{after:absent}}|"
	"{{tool}}|{{result}}|{{unknown}}|{{result.x}}|{{oops\"},"
	"{\"if_contains\":\"remember\",\"text\":\"I cannot remember without my tool.\"}],"
	"\"default\":\"Default: {{message}}\","
	"\"after_tool\":\"Tool {{tool}} said {{result}}\"}";

static cJSON *cfg;
static struct gh_provider_conf conf;

static const struct gh_tool_spec tools[] = {
	{"memory_save", "Save a memory", NULL},
	{"memory_search", "Search memories", NULL},
	{"get_weather", "Weather", NULL},
};

static void setup(const char *json)
{
	cJSON_Delete(cfg);
	cfg = json ? cJSON_Parse(json) : NULL;
	memset(&conf, 0, sizeof(conf));
	conf.name = "offline";
	conf.type = GH_PROVIDER_MOCK;
	conf.mock = cfg;
}

static void teardown(void)
{
	cJSON_Delete(cfg);
	cfg = NULL;
}

/* Runs one chat over messages (JSON text) with the first ntools tools. */
static enum gh_code run(const char *messages, size_t ntools, const struct gh_chat_events *ev,
			int stream, struct gh_chat_response *out, struct gh_err *e)
{
	cJSON *m = cJSON_Parse(messages);
	struct gh_chat_request req;
	enum gh_code rc;

	memset(&req, 0, sizeof(req));
	req.model = "mock";
	req.messages = m;
	req.tools = tools;
	req.ntools = ntools;
	req.stream = stream;
	memset(out, 0, sizeof(*out));
	gh_err_clear(e);
	rc = gh_provider_chat(&conf, &req, ev, out, e);
	cJSON_Delete(m);
	return rc;
}

static char *args_json(const struct gh_tool_call *c)
{
	return c->args ? cJSON_PrintUnformatted(c->args) : NULL;
}

static void test_text_rule_case_insensitive(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"Well HeLLo there\"}]", 3, NULL, 0, &r, &e),
		 GH_OK);
	T_EQ_STR(r.text, "Hello! I am gatehouse's offline mock model.");
	T_EQ_INT(r.ncalls, 0);
	T_EQ_INT(r.finish, GH_FINISH_STOP);
	T_EQ_INT(r.input_tokens, 3);
	T_EQ_INT(r.output_tokens, 7);
	gh_chat_response_clear(&r);
	teardown();
}

static void test_tool_rule_when_offered(void)
{
	struct gh_chat_response r;
	struct gh_err e;
	char *a;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":"
		     "\"Please REMEMBER THAT my favourite colour is green  \"}]",
		     3, NULL, 0, &r, &e), GH_OK);
	T_EQ_INT(r.ncalls, 1);
	T_EQ_INT(r.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_STR(r.text, "");
	T_EQ_STR(r.calls[0].name, "memory_save");
	T_ASSERT(!strncmp(r.calls[0].id, "mock_call_", 10));
	a = args_json(&r.calls[0]);
	T_EQ_STR(a, "{\"content\":\"my favourite colour is green\"}");
	T_EQ_STR(r.calls[0].raw_args, a);
	T_EQ_INT(r.output_tokens, 5);
	free(a);
	gh_chat_response_clear(&r);
	teardown();
}

static void test_tool_rule_skipped_when_not_offered(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup(cfg_json);
	/* memory_save is not offered: the later "remember" text rule answers */
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"remember that I like tea\"}]", 0, NULL, 0,
		     &r, &e), GH_OK);
	T_EQ_INT(r.ncalls, 0);
	T_EQ_STR(r.text, "I cannot remember without my tool.");
	gh_chat_response_clear(&r);
	teardown();
}

static void test_nested_args_rendered(void)
{
	struct gh_chat_response r;
	struct gh_err e;
	char *a;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"what is the weather in Paris?\"}]", 3,
		     NULL, 0, &r, &e), GH_OK);
	T_EQ_INT(r.ncalls, 1);
	T_EQ_STR(r.calls[0].name, "get_weather");
	a = args_json(&r.calls[0]);
	T_EQ_STR(a, "{\"city\":\"Paris?\",\"opts\":{\"units\":[\"metric\",\"what is the weather in "
		    "Paris?\"],\"days\":3,\"alerts\":true}}");
	free(a);
	gh_chat_response_clear(&r);
	teardown();
}

static void test_call_ids_unique(void)
{
	struct gh_chat_response r1, r2;
	struct gh_err e;
	unsigned long long n1, n2;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"remember that a\"}]", 1, NULL, 0, &r1, &e),
		 GH_OK);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"remember that a\"}]", 1, NULL, 0, &r2, &e),
		 GH_OK);
	T_EQ_INT(r1.ncalls, 1);
	T_EQ_INT(r2.ncalls, 1);
	T_ASSERT(sscanf(r1.calls[0].id, "mock_call_%llu", &n1) == 1);
	T_ASSERT(sscanf(r2.calls[0].id, "mock_call_%llu", &n2) == 1);
	T_EQ_INT(n2, n1 + 1);
	gh_chat_response_clear(&r1);
	gh_chat_response_clear(&r2);
	teardown();
}

static void test_then_after_tool_result(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"remember that I like tea\"},"
		     "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\","
		     "\"toolCallId\":\"c1\",\"toolName\":\"memory_save\","
		     "\"args\":{\"content\":\"I like tea\"}}]},"
		     "{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
		     "\"toolCallId\":\"c1\",\"toolName\":\"memory_save\","
		     "\"result\":{\"id\":\"m1\",\"content\":\"I like tea\"}}]}]",
		     1, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "Noted: I like tea");
	T_EQ_INT(r.ncalls, 0);
	T_EQ_INT(r.finish, GH_FINISH_STOP);
	/* 5 user words + 3 in {"content":"I like tea"} + 3 in the result JSON */
	T_EQ_INT(r.input_tokens, 11);
	T_EQ_INT(r.output_tokens, 4);
	gh_chat_response_clear(&r);
	teardown();
}

static void test_result_path_into_array(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"what is my favourite colour?\"},"
		     "{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
		     "\"toolCallId\":\"c1\","
		     "\"toolName\":\"memory_search\","
		     "\"result\":{\"memories\":[{\"content\":\"green\"},"
		     "{\"content\":\"blue\"}]}}]}]", 2, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "From memory: green");
	gh_chat_response_clear(&r);
	teardown();
}

static void test_then_chosen_by_if_contains(void)
{
	struct gh_chat_response r;
	struct gh_err e;
	const char *tail = "{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
			   "\"toolCallId\":\"c1\",\"toolName\":\"get_weather\","
			   "\"result\":{\"temp\":21}}]}]";
	char msgs[512];

	setup(cfg_json);
	/* the "weather in" rule has no "then"; the "forecast" one matches */
	snprintf(msgs, sizeof(msgs), "[{\"role\":\"user\",\"content\":\"forecast please\"},"
				     "%s", tail);
	T_EQ_INT(run(msgs, 3, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "Forecast: 21 degrees []");
	gh_chat_response_clear(&r);
	/* no rule with a "then" matches this user text: after_tool */
	snprintf(msgs, sizeof(msgs), "[{\"role\":\"user\",\"content\":\"weather in Oslo\"},"
				     "%s", tail);
	T_EQ_INT(run(msgs, 3, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "Tool get_weather said {\"temp\":21}");
	gh_chat_response_clear(&r);
	teardown();
}

static void test_builtin_after_tool(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup("{\"type\":\"mock\"}");
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"time?\"},"
		     "{\"role\":\"tool\",\"content\":["
		     "{\"type\":\"tool-result\",\"toolCallId\":\"a\",\"toolName\":\"get_time\","
		     "\"result\":\"10:00\"},"
		     "{\"type\":\"tool-result\",\"toolCallId\":\"b\",\"toolName\":\"get_date\","
		     "\"result\":[1,{\"x\":null}],"
		     "\"isError\":true}]}]", 0, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "get_time returned 10:00\nget_date returned [1,{\"x\":null}]");
	gh_chat_response_clear(&r);
	teardown();
}

static void test_default_and_builtin_default(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"something else\"}]", 3, NULL, 0, &r, &e),
		 GH_OK);
	T_EQ_STR(r.text, "Default: something else");
	gh_chat_response_clear(&r);
	setup("{\"type\":\"mock\",\"rules\":[]}");
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
		     "\"yo\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"two\"},"
		     "{\"type\":\"text\",\"text\":\"parts\"}]}]", 0, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "You said: two\nparts");
	T_EQ_INT(r.input_tokens, 4);
	gh_chat_response_clear(&r);
	/* no config object at all */
	setup(NULL);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"ping\"}]", 0, NULL, 0, &r, &e), GH_OK);
	T_EQ_STR(r.text, "You said: ping");
	gh_chat_response_clear(&r);
	teardown();
}

static void test_template_forms(void)
{
	struct gh_chat_response r;
	struct gh_err e;

	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\" please ECHO  this back"
		     " \"}]", 0, NULL, 0, &r,
		     &e), GH_OK);
	T_EQ_STR(r.text, "< please ECHO  this back |this back|please ECHO  this back|||"
			 "{{unknown}}||{{oops");
	gh_chat_response_clear(&r);
	teardown();
}

static void test_output_bounded(void)
{
	struct gh_chat_response r;
	struct gh_err e;
	struct gh_buf msg;
	size_t n;
	int i;

	setup("{\"type\":\"mock\",\"default\":\"You said: x{{message}}\"}");
	gh_buf_init(&msg, 1 << 20);
	gh_buf_puts(&msg, "[{\"role\":\"user\",\"content\":\"");
	for (i = 0; i < 40000; i++)
		gh_buf_puts(&msg, "\xc3\xa9");   /* é: two bytes */
	gh_buf_puts(&msg, "\"}]");
	T_EQ_INT(run(msg.data, 0, NULL, 0, &r, &e), GH_OK);
	n = strlen(r.text);
	/* 11 bytes of prefix leave an odd 65525 bytes: the last é must not be cut */
	T_EQ_INT(n, 65535);
	T_ASSERT(!memcmp(r.text + n - 2, "\xc3\xa9", 2));
	gh_chat_response_clear(&r);
	gh_buf_free(&msg);
	teardown();
}

struct capture {
	char deltas[16][64];
	int ndeltas;
	char tools[4][256];
	int ntools;
	int ticks;
	int stop_on_delta;   /* return 1 on this delta (1-based) */
	int stop_on_tick;
};

static int cap_text(void *ud, const char *t, size_t n)
{
	struct capture *c = ud;

	if (c->ndeltas < 16)
		snprintf(c->deltas[c->ndeltas], sizeof(c->deltas[0]), "%.*s", (int)n, t);
	c->ndeltas++;
	return c->stop_on_delta && c->ndeltas >= c->stop_on_delta;
}

static int cap_tool(void *ud, int index, const char *id, const char *name, const char *frag)
{
	struct capture *c = ud;

	if (c->ntools < 4)
		snprintf(c->tools[c->ntools], sizeof(c->tools[0]), "%d|%s|%s|%s", index,
			 id ? "id" : "-", name ? name : "-", frag);
	c->ntools++;
	return 0;
}

static int cap_tick(void *ud)
{
	struct capture *c = ud;

	c->ticks++;
	return c->stop_on_tick && c->ticks >= c->stop_on_tick;
}

static void test_stream_words(void)
{
	struct capture c;
	struct gh_chat_events ev = {cap_text, cap_tool, cap_tick, &c, 0, 0, NULL, NULL, NULL, NULL};
	struct gh_chat_response r;
	struct gh_err e;

	memset(&c, 0, sizeof(c));
	setup("{\"type\":\"mock\",\"default\":\"  one two\\tthree  \"}");
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"x\"}]", 0, &ev, 1, &r, &e), GH_OK);
	T_EQ_STR(r.text, "  one two\tthree  ");
	T_EQ_INT(c.ndeltas, 3);
	T_EQ_STR(c.deltas[0], "  one ");
	T_EQ_STR(c.deltas[1], "two\t");
	T_EQ_STR(c.deltas[2], "three  ");
	T_EQ_INT(c.ticks, 2);
	T_EQ_INT(r.output_tokens, 3);
	gh_chat_response_clear(&r);
	/* not asked to stream: no deltas */
	memset(&c, 0, sizeof(c));
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"x\"}]", 0, &ev, 0, &r, &e), GH_OK);
	T_EQ_INT(c.ndeltas, 0);
	gh_chat_response_clear(&r);
	teardown();
}

static void test_stream_tool_call(void)
{
	struct capture c;
	struct gh_chat_events ev = {cap_text, cap_tool, cap_tick, &c, 0, 0, NULL, NULL, NULL, NULL};
	struct gh_chat_response r;
	struct gh_err e;

	memset(&c, 0, sizeof(c));
	setup(cfg_json);
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"remember that x\"}]", 1, &ev, 1, &r, &e),
		 GH_OK);
	T_EQ_INT(c.ndeltas, 0);
	T_EQ_INT(c.ntools, 2);
	T_EQ_STR(c.tools[0], "0|id|memory_save|");
	T_EQ_STR(c.tools[1], "0|-|-|{\"content\":\"x\"}");
	T_EQ_INT(r.ncalls, 1);
	gh_chat_response_clear(&r);
	teardown();
}

static void test_stream_aborts(void)
{
	struct capture c;
	struct gh_chat_events ev = {cap_text, cap_tool, cap_tick, &c, 0, 0, NULL, NULL, NULL, NULL};
	struct gh_chat_response r;
	struct gh_err e;

	setup("{\"type\":\"mock\",\"default\":\"a b c d\"}");
	memset(&c, 0, sizeof(c));
	c.stop_on_delta = 2;
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"x\"}]", 0, &ev, 1, &r, &e), GH_E_CANCELLED);
	T_EQ_INT(c.ndeltas, 2);
	T_ASSERT(r.text == NULL && r.ncalls == 0);
	memset(&c, 0, sizeof(c));
	c.stop_on_tick = 1;
	T_EQ_INT(run("[{\"role\":\"user\",\"content\":\"x\"}]", 0, &ev, 1, &r, &e), GH_E_CANCELLED);
	T_EQ_INT(c.ndeltas, 1);
	T_EQ_INT(e.code, GH_E_CANCELLED);
	teardown();
}

T_MAIN(T(test_text_rule_case_insensitive), T(test_tool_rule_when_offered),
       T(test_tool_rule_skipped_when_not_offered), T(test_nested_args_rendered),
       T(test_call_ids_unique), T(test_then_after_tool_result), T(test_result_path_into_array),
       T(test_then_chosen_by_if_contains), T(test_builtin_after_tool),
       T(test_default_and_builtin_default), T(test_template_forms), T(test_output_bounded),
       T(test_stream_words), T(test_stream_tool_call), T(test_stream_aborts))
