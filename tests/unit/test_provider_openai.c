/*
 * test_provider_openai.c - the Chat Completions provider against a server
 * on 127.0.0.1 that answers like the real API: the request body for every
 * CoreMessage shape, tools, options and stream_options; JSON replies with
 * text and tool calls (invalid arguments kept raw); SSE streams split at
 * odd bytes with tool calls joined by index and the usage chunk; truncated,
 * malformed, erroring and reset streams; HTTP errors with the upstream's
 * message (429 retried, then rate-limited); timeouts, refused connections,
 * the reply cap, redirects; aborts from tick and text_delta. No error
 * message may carry the API key.
 */
#include "provider.h"

#include "buf.h"
#include "err.h"
#include "json.h"
#include "provider_int.h"
#include "t.h"
#include "t_provider.h"
#include "upstream.h"
#include "util.h"

#include <cjson/cJSON.h>

/* Points t_conf at t_srv.base + prefix. */
static void setup(const char *prefix)
{
	t_provider_setup(prefix, "local", GH_PROVIDER_OPENAI, "gpt-test");
}

static const char *const simple_msgs = "[{\"role\":\"user\",\"content\":\"Hi\"}]";

static const char json_reply[] =
	"{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
	"\"message\":{\"role\":\"assistant\",\"content\":\"Hi there\"},"
	"\"finish_reason\":\"stop\"}],"
	"\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}";

static void test_json_text_reply(void)
{
	static const struct t_reply rp[] = {{200, NULL, json_reply, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	char v[256], *body;
	cJSON *sent;

	setup("/json");
	t_srv_route(&r, "/json/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Hi there");
	T_EQ_INT(out.ncalls, 0);
	T_EQ_INT(out.finish, GH_FINISH_STOP);
	T_EQ_INT(out.input_tokens, 12);
	T_EQ_INT(out.output_tokens, 3);
	T_EQ_STR(r.method, "POST");
	T_ASSERT(t_route_header(&r, "Authorization", v, sizeof(v)));
	T_EQ_STR(v, "Bearer " T_KEY);
	T_ASSERT(t_route_header(&r, "Content-Type", v, sizeof(v)));
	T_EQ_STR(v, "application/json");
	body = t_route_body(&r);
	sent = cJSON_Parse(body);
	T_ASSERT(t_json_eq(sent, "{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"user\","
			       "\"content\":\"Hi\"}]}"));
	cJSON_Delete(sent);
	free(body);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

/* The reply read without a tree gives what the tree gives, and hands
 * back to the tree everything it does not read the tree's way. */
static void test_reply_read_without_tree(void)
{
	static const struct {
		const char *reply;
		int read; /* 1: read from the text; 0: left to the tree */
	} cases[] = {
		{json_reply, 1},
		{"{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
		 "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
		 "\"{\\\"q\\\":\\\"\\u00e9\\\\n\\\"}\"}},{\"function\":{\"name\":\"g\"}},{}]},"
		 "\"finish_reason\":\"stop\"},{\"message\":{}}],\"usage\":{\"prompt_tokens\":-0,"
		 "\"completion_tokens\":\"7\"}}", 1},
		{"{\"usage\":{\"completion_tokens\":9},\"choices\":[{\"finish_reason\":\"length\","
		 "\"message\":{\"tool_calls\":{},\"content\":[1]}}],\"extra\":[1e5,{\"a\":[]}]}", 1},
		/* the tree's: a 5.0 count, arguments as an object, choices as an
		 * object (cJSON reads its first member as entry 0), a \u0000, a
		 * leading control byte cJSON skips */
		{"{\"choices\":[{\"message\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":5.0}}", 0},
		{"{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\","
		 "\"arguments\":{\"x\":1}}}]}}]}", 0},
		{"{\"choices\":{\"x\":{\"message\":{\"content\":\"odd\"}}}}", 0},
		{"{\"choices\":[{\"message\":{\"content\":\"nul \\u0000 here\"}}]}", 0},
		{"\x01{\"choices\":[{\"message\":{\"content\":\"a\"}}]}", 0},
		/* and the ones the tree refuses */
		{"{\"choices\":[]}", 0},
		{"{\"choices\":[{\"message\":\"no\"}]}", 0},
		{"{\"choices\":[{\"message\":{}}],\"choices\":[]}", 0},
		{"{\"choices\":[{\"message\":{}}]", 0},
	};
	const struct gh_provider_wire *w = gh_provider_openai.wire;

	setup(""); /* names the provider in the tree's errors */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *s = cases[i].reply;
		struct gh_chat_response a, b;
		struct gh_err e;
		cJSON *tree = NULL;
		enum gh_code trc = GH_E_BADREQ;

		T_EQ_INT(w->read_reply(s, strlen(s), &a), cases[i].read);
		memset(&b, 0, sizeof(b));
		if (gh_json_parse_opts(s, strlen(s), "reply", GH_JSON_UPSTREAM, &tree, &e) == GH_OK)
			trc = w->parse_reply(&t_conf, tree, &b, &e);
		cJSON_Delete(tree);
		if (!cases[i].read) {
			T_ASSERT(a.text == NULL && a.calls == NULL && a.ncalls == 0);
			gh_chat_response_clear(&b);
			continue;
		}
		T_EQ_INT(trc, GH_OK);
		T_EQ_STR(a.text, b.text);
		T_EQ_INT(a.finish, b.finish);
		T_EQ_INT(a.input_tokens, b.input_tokens);
		T_EQ_INT(a.output_tokens, b.output_tokens);
		T_EQ_INT(a.ncalls, b.ncalls);
		for (size_t k = 0; k < a.ncalls; k++) {
			T_EQ_STR(a.calls[k].id, b.calls[k].id);
			T_EQ_STR(a.calls[k].name, b.calls[k].name);
			T_EQ_STR(a.calls[k].raw_args, b.calls[k].raw_args);
			T_ASSERT(cJSON_Compare(a.calls[k].args, b.calls[k].args, 1) ||
				 (!a.calls[k].args && !b.calls[k].args));
		}
		gh_chat_response_clear(&a);
		gh_chat_response_clear(&b);
	}
	t_provider_teardown();
}

static void test_request_translation(void)
{
	static const struct t_reply rp[] = {{200, NULL, json_reply, NULL, 0, 0, 0}};
	static const char msgs[] =
		"[{\"role\":\"system\",\"content\":\"Extra rules.\"},"
		"{\"role\":\"user\",\"content\":\"Hi\"},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Look:\"},"
		" {\"type\":\"image\",\"image\":\"https://x.test/a.png\"},"
		" {\"type\":\"image\",\"image\":\"QUJD\",\"mimeType\":\"image/jpeg\"}]},"
		"{\"role\":\"assistant\",\"content\":\"Sure.\"},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Checking.\"},"
		" {\"type\":\"reasoning\",\"text\":\"hmm\"},"
		" {\"type\":\"tool-call\",\"toolCallId\":\"c1\",\"toolName\":\"get_weather\","
		"  \"args\":{\"city\":\"Paris\"}},"
		" {\"type\":\"tool-call\",\"toolCallId\":\"c2\",\"toolName\":\"get_time\","
		"  \"args\":\"{\\\"tz\\\":\\\"UTC\\\"}\"}]},"
		"{\"role\":\"tool\",\"content\":["
		" {\"type\":\"tool-result\",\"toolCallId\":\"c1\",\"toolName\":\"get_weather\","
		"  \"result\":{\"temp\":21}},"
		" {\"type\":\"tool-result\",\"toolCallId\":\"c2\",\"toolName\":\"get_time\","
		"  \"result\":\"10:00\",\"isError\":true}]},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\","
		"\"toolCallId\":\"c3\","
		" \"toolName\":\"noargs\"}]},"
		"{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c3\","
		" \"toolName\":\"noargs\",\"result\":null}]}]";
	static const char want_msgs[] =
		"[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
		"{\"role\":\"system\",\"content\":\"Extra rules.\"},"
		"{\"role\":\"user\",\"content\":\"Hi\"},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Look:\"},"
		" {\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x.test/a.png\"}},"
		" {\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/jpeg;base64,"
		"QUJD\"}}]},"
		"{\"role\":\"assistant\",\"content\":\"Sure.\"},"
		"{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":["
		" {\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
		"  \"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
		" {\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"get_time\","
		"  \"arguments\":\"{\\\"tz\\\":\\\"UTC\\\"}\"}}]},"
		"{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"{\\\"temp\\\":21}\"},"
		"{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"10:00\"},"
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
		" {\"id\":\"c3\",\"type\":\"function\",\"function\":{\"name\":\"noargs\","
		"  \"arguments\":\"{}\"}}]},"
		"{\"role\":\"tool\",\"tool_call_id\":\"c3\",\"content\":\"null\"}]";
	static const char want_tools[] =
		"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
		" \"description\":\"Weather by city\",\"parameters\":{\"type\":\"object\","
		" \"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
		"{\"type\":\"function\",\"function\":{\"name\":\"noargs\","
		" \"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
	struct t_route r;
	struct gh_chat_request req;
	struct gh_chat_response out;
	struct gh_tool_spec tools[2];
	struct gh_err e;
	cJSON *m = cJSON_Parse(msgs), *schema, *sent;
	char *body;

	schema = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
			     "\"required\":[\"city\"]}");
	tools[0].name = "get_weather";
	tools[0].description = "Weather by city";
	tools[0].schema = schema;
	tools[1].name = "noargs";
	tools[1].description = NULL;
	tools[1].schema = NULL;
	setup("/tr");
	t_srv_route(&r, "/tr/chat/completions", rp, 1);
	memset(&req, 0, sizeof(req));
	req.model = "gpt-test";
	req.system = "You are helpful.";
	req.messages = m;
	req.tools = tools;
	req.ntools = 2;
	req.has_temperature = 1;
	req.temperature = 0.5;
	req.max_tokens = 100;
	T_ASSERT(m && schema);
	T_EQ_INT(gh_provider_chat(&t_conf, &req, NULL, &out, &e), GH_OK);
	body = t_route_body(&r);
	sent = cJSON_Parse(body);
	T_ASSERT(sent);
	T_EQ_STR(gh_json_str(sent, "model"), "gpt-test");
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "messages"), want_msgs));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "tools"), want_tools));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "temperature"), "0.5"));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "max_tokens"), "100"));
	T_ASSERT(!cJSON_GetObjectItem(sent, "stream"));
	T_ASSERT(!cJSON_GetObjectItem(sent, "stream_options"));
	{
		/* written straight to the wire: compact, in this order */
		cJSON *wm = cJSON_Parse(want_msgs), *wt = cJSON_Parse(want_tools);
		char *dm = gh_json_dump(wm), *dt = gh_json_dump(wt);
		struct gh_buf want;

		gh_buf_init(&want, 1 << 20);
		T_ASSERT(dm && dt);
		T_ASSERT(gh_buf_printf(&want, "{\"model\":\"gpt-test\",\"messages\":%s,"
				       "\"tools\":%s,\"temperature\":0.5,\"max_tokens\":100}",
				       dm, dt) == GH_BUF_OK);
		T_EQ_STR(body, want.data);
		gh_buf_free(&want);
		free(dm);
		free(dt);
		cJSON_Delete(wm);
		cJSON_Delete(wt);
	}
	cJSON_Delete(sent);
	free(body);
	cJSON_Delete(m);
	cJSON_Delete(schema);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_json_tool_calls(void)
{
	static const struct t_reply rp[] = {{200, NULL,
		"{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
		"\"content\":null,\"tool_calls\":["
		"{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
		"\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}},"
		"{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"memory_save\","
		"\"arguments\":\"{oops\"}}]},\"finish_reason\":\"tool_calls\"}],"
		"\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":20}}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/tc");
	t_srv_route(&r, "/tc/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_EQ_STR(out.text, "");
	T_EQ_INT(out.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT(out.ncalls, 2);
	T_EQ_STR(out.calls[0].id, "call_1");
	T_EQ_STR(out.calls[0].name, "get_weather");
	T_ASSERT(t_json_eq(out.calls[0].args, "{\"city\":\"Oslo\"}"));
	T_EQ_STR(out.calls[0].raw_args, "{\"city\":\"Oslo\"}");
	T_EQ_STR(out.calls[1].name, "memory_save");
	T_ASSERT(out.calls[1].args == NULL);
	T_EQ_STR(out.calls[1].raw_args, "{oops");
	T_EQ_INT(out.input_tokens, 50);
	T_EQ_INT(out.output_tokens, 20);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static const char stream_text[] =
	"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
	"\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"
	"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo \\u00e9\"},"
	"\"finish_reason\":null}]}\r\n\r\n"
	": keep-alive\n\n"
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
	"\"id\":\"call_a\","
	"\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n"
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
	"\"id\":\"call_b\","
	"\"type\":\"function\",\"function\":{\"name\":\"memory_save\","
	"\"arguments\":\"{\\\"con\"}}]}}]}"
	"\r\r"
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
	"{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n"
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
	"{\"arguments\":\"\\\"Paris\\\"}\"}}]}}]}\n\n"
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":"
	"{\"arguments\":\"tent\\\":\\\"x\\\"}\"}}]}}]}\n\n"
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":31,\"completion_tokens\":9,"
	"\"total_tokens\":40}}\n\n"
	"data: [DONE]\n\n";

static void test_sse_stream_split_oddly(void)
{
	struct t_reply rp[1] = {{200, NULL, NULL, NULL, 1, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;
	char **chunks = t_split(stream_text), *body;
	cJSON *sent;

	rp[0].chunks = (const char *const *)chunks;
	t_cap_init(&c);
	setup("/sse");
	t_srv_route(&r, "/sse/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Hello \xc3\xa9");
	T_EQ_STR(c.text.data, "Hello \xc3\xa9");
	T_EQ_INT(c.ndeltas, 2);
	T_EQ_STR(c.tools.data, "0|call_a|get_weather|\n"
			       "1|call_b|memory_save|\n"
			       "1|-|-|{\"con\n"
			       "0|-|-|{\"city\":\n"
			       "0|-|-|\"Paris\"}\n"
			       "1|-|-|tent\":\"x\"}\n");
	T_EQ_INT(out.ncalls, 2);
	T_EQ_STR(out.calls[0].id, "call_a");
	T_EQ_STR(out.calls[0].name, "get_weather");
	T_ASSERT(t_json_eq(out.calls[0].args, "{\"city\":\"Paris\"}"));
	T_EQ_STR(out.calls[1].id, "call_b");
	T_ASSERT(t_json_eq(out.calls[1].args, "{\"content\":\"x\"}"));
	T_EQ_INT(out.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT(out.input_tokens, 31);
	T_EQ_INT(out.output_tokens, 9);
	T_ASSERT(c.ticks >= 1);
	body = t_route_body(&r);
	sent = cJSON_Parse(body);
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "stream"), "true"));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "stream_options"), "{\"include_usage\":true}"));
	cJSON_Delete(sent);
	free(body);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_cap_free(&c);
	t_free_chunks(chunks);
	t_provider_teardown();
}

static void test_stream_invalid_tool_args(void)
{
	static const char *const chunks[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
		"\"id\":\"c\",\"function\":{\"name\":\"f\","
		"\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{},"
		"\"finish_reason\":\"tool_calls\"}]}\n\n",
		"data: [DONE]\n\n", NULL};
	static const struct t_reply rp[] = {{200, NULL, NULL, chunks, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/badargs");
	t_srv_route(&r, "/badargs/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, NULL, &out, &e), GH_OK);
	T_EQ_INT(out.ncalls, 1);
	T_ASSERT(out.calls[0].args == NULL);
	T_EQ_STR(out.calls[0].raw_args, "{\"a\":");
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

/* Runs a stream that must fail with GH_E_UPSTREAM and a message holding
 * want. */
/* What the last stream_fails showed tenants. */
static char last_public[GH_ERR_MSG_MAX];

static void stream_fails(const char *prefix, const char *const *chunks, const char *want)
{
	struct t_reply rp[1] = {{200, NULL, NULL, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;
	char uri[128];

	rp[0].chunks = chunks;
	t_cap_init(&c);
	setup(prefix);
	snprintf(uri, sizeof(uri), "%s/chat/completions", prefix);
	t_srv_route(&r, uri, rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_E_UPSTREAM);
	printf("  %s\n  %s\n", e.msg, t_detail);
	T_CONTAINS(e.msg, "provider local (openai): ");
	T_CONTAINS(t_detail, "provider local (openai): ");
	T_CONTAINS(t_detail, want);
	T_ASSERT(!strstr(e.msg, T_KEY) && !strstr(t_detail, T_KEY));
	gh_strlcpy(last_public, e.msg, sizeof(last_public));
	T_ASSERT(out.text == NULL && out.ncalls == 0);
	T_EQ_INT(atomic_load(&r.hits), 1);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

static void test_stream_truncated(void)
{
	static const char *const no_done[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		NULL};
	static const char *const no_finish[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\n",
		"data: [DONE]\n\n", NULL};
	static const char *const cut_event[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		"data: [DO", NULL};

	stream_fails("/trunc1", no_done, "stream ended early");
	stream_fails("/trunc2", no_finish, "stream ended early");
	stream_fails("/trunc3", cut_event, "stream ended early");
}

static void test_stream_malformed_chunk(void)
{
	static const char *const chunks[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"\n\n",
		"data: [DONE]\n\n", NULL};

	stream_fails("/malformed", chunks, "malformed chunk");
}

static void test_stream_error_chunk(void)
{
	static const char *const chunks[] = {
		"data: {\"error\":{\"message\":\"model overloaded\","
		"\"type\":\"server_error\"}}\n\n",
		NULL};

	stream_fails("/errchunk", chunks, "model overloaded");
	/* the upstream's own words stay out of what tenants see */
	T_EQ_STR(last_public, "provider local (openai): stream error");
}

static void test_stream_reset(void)
{
	static const char reply[] =
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
		"Transfer-Encoding: chunked\r\n\r\n"
		"3f\r\ndata: {\"choices\":[{\"index\":0,"
		"\"delta\":{\"content\":\"partial\"}}]}\n\n\r\n";
	struct t_raw raw;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;

	t_cap_init(&c);
	setup("");
	T_ASSERT(t_raw_start(&raw, reply, sizeof(reply) - 1, 1, 1) == 0);
	snprintf(t_base_url, sizeof(t_base_url), "%s/v1", raw.base);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_E_UPSTREAM);
	printf("  %s\n  %s\n", e.msg, t_detail);
	/* tenants see the provider and what failed; the address is in the detail */
	T_CONTAINS(e.msg, "provider local (openai): ");
	T_ASSERT(!strstr(e.msg, "127.0.0.1") && !strstr(e.msg, "upstream"));
	T_CONTAINS(t_detail, "provider local (openai): upstream http://127.0.0.1:");
	T_EQ_STR(c.text.data, "partial");
	T_ASSERT(!strstr(t_detail, T_KEY) && !strstr(t_detail, "/v1"));
	t_raw_stop(&raw);
	T_EQ_INT(atomic_load(&raw.accepted), 1);
	t_cap_free(&c);
	t_provider_teardown();
}

/* A stream's events and the text it adds up to are bounded by
 * max_response_bytes. */
static void test_stream_over_cap(void)
{
	static char big_event[2100], small[128];
	static const char *const done[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		"data: [DONE]\n\n", NULL};
	const char *one[3] = {big_event, "data: [DONE]\n\n", NULL};
	const char *many[40];
	struct t_reply rp[2] = {{200, NULL, NULL, one, 0, 0, 0}, {200, NULL, NULL, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	char pad[2001];
	int i;

	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	snprintf(big_event, sizeof(big_event),
		 "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}\n\n", pad);
	/* 38 deltas of 30 bytes: each event is small, the text is not */
	snprintf(small, sizeof(small),
		 "data: {\"choices\":[{\"delta\":{\"content\":\"%030d\"}}]}\n\n", 0);
	for (i = 0; i < 38; i++)
		many[i] = small;
	many[38] = done[0];
	many[39] = NULL;
	rp[1].chunks = many;
	setup("/capsse");
	t_conf.max_response_bytes = 1024;
	t_srv_route(&r, "/capsse/chat/completions", rp, 2);
	T_EQ_INT(t_chat(simple_msgs, 1, NULL, &out, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "stream event over 1024 bytes");
	T_EQ_INT(t_chat(simple_msgs, 1, NULL, &out, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "reply over 1024 bytes");
	t_route_close(&r);
	t_provider_teardown();
}

static void test_http_500_retried_then_reported(void)
{
	static const struct t_reply rp[] = {{500, NULL,
		"{\"error\":{\"message\":\"The server had an error\","
		"\"type\":\"server_error\"}}", NULL,
		0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/e500");
	t_conf.max_retries = 2;
	t_srv_route(&r, "/e500/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	T_EQ_STR(e.msg, "provider local (openai): HTTP 500");
	T_EQ_STR(t_detail, "provider local (openai): HTTP 500: The server had an error");
	T_EQ_INT(atomic_load(&r.hits), 3);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_http_error_plain_body(void)
{
	static char body[400];
	struct t_reply rp[1] = {{400, "Content-Type: text/html\r\n", body, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	const char *p;

	memset(body, 'x', sizeof(body) - 1);
	memcpy(body, "<html>\n", 7);
	setup("/e400");
	t_conf.max_retries = 2;
	t_srv_route(&r, "/e400/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	T_EQ_STR(e.msg, "provider local (openai): HTTP 400");
	p = strstr(t_detail, "HTTP 400: ");
	T_ASSERT(p);
	p += 10;
	T_EQ_INT(strlen(p), 200);
	T_ASSERT(!strncmp(p, "<html> xxx", 10));
	T_EQ_INT(atomic_load(&r.hits), 1);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_429_then_success(void)
{
	static const struct t_reply rp[] = {
		{429, "Content-Type: application/json\r\nRetry-After: 0\r\n",
		 "{\"error\":{\"message\":\"Rate limit reached\"}}", NULL, 0, 0, 0},
		{200, NULL, json_reply, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/r429");
	t_conf.max_retries = 2;
	t_srv_route(&r, "/r429/chat/completions", rp, 2);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Hi there");
	T_EQ_INT(atomic_load(&r.hits), 2);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_429_exhausted_is_ratelimit(void)
{
	static const struct t_reply rp[] = {
		{429, "Content-Type: application/json\r\nRetry-After: 0\r\n",
		 "{\"error\":{\"message\":\"Rate limit reached for requests\"}}", NULL, 0, 0, 0},
		{429, "Content-Type: application/json\r\nRetry-After: 7\r\n",
		 "{\"error\":{\"message\":\"Rate limit reached for requests\"}}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/x429");
	t_conf.max_retries = 1;
	t_srv_route(&r, "/x429/chat/completions", rp, 2);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_RATELIMIT);
	T_EQ_STR(e.msg, "provider local (openai): HTTP 429");
	T_EQ_STR(t_detail, "provider local (openai): HTTP 429: Rate limit reached for requests");
	T_EQ_INT(e.retry_after, 7);
	T_EQ_INT(atomic_load(&r.hits), 2);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_key_echoed_by_upstream_is_redacted(void)
{
	static const struct t_reply rp[] = {{401, NULL,
		"{\"error\":{\"message\":\"Incorrect API key provided: " T_KEY ". Find yours at "
		"https://example.test.\",\"type\":\"invalid_request_error\"}}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/e401");
	t_srv_route(&r, "/e401/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	printf("  %s\n", e.msg);
	T_ASSERT(!strstr(e.msg, T_KEY) && !strstr(t_detail, T_KEY));
	T_EQ_STR(e.msg, "provider local (openai): HTTP 401");
	T_CONTAINS(t_detail, "HTTP 401: Incorrect API key provided: [redacted]. Find yours");
	t_route_close(&r);
	t_provider_teardown();
}

static void test_timeout(void)
{
	static const struct t_reply rp[] = {{200, NULL, json_reply, NULL, 0, 3000, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	double t0 = t_now_ms(), ms;

	setup("/slow");
	t_conf.timeout_ms = 300;
	t_conf.max_retries = 2;
	t_srv_route(&r, "/slow/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_TIMEOUT);
	ms = t_now_ms() - t0;
	printf("  %.0f ms: %s\n", ms, e.msg);
	T_ASSERT(ms < 1500);
	T_CONTAINS(e.msg, "provider local (openai): no complete answer within 300 ms");
	T_ASSERT(!strstr(e.msg, "127.0.0.1"));
	T_CONTAINS(t_detail, "provider local (openai): upstream http://127.0.0.1:");
	T_ASSERT(!strstr(t_detail, T_KEY) && !strstr(t_detail, "/slow"));
	T_EQ_INT(atomic_load(&r.hits), 1);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_connection_refused(void)
{
	struct gh_chat_response out;
	struct gh_err e;
	double t0, ms;
	char want[96];
	int port = t_dead_port();

	setup("");
	t_conf.max_retries = 2;
	t_conf.retry_base_ms = 5;
	snprintf(t_base_url, sizeof(t_base_url), "http://127.0.0.1:%d/v1", port);
	snprintf(want, sizeof(want), "upstream http://127.0.0.1:%d: connection refused", port);
	t0 = t_now_ms();
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	ms = t_now_ms() - t0;
	printf("  %.0f ms: %s\n", ms, e.msg);
	T_ASSERT(ms < 1000);
	T_EQ_STR(e.msg, "provider local (openai): connection refused (3 attempts)");
	T_CONTAINS(t_detail, want);
	T_ASSERT(!strstr(t_detail, T_KEY));
	t_provider_teardown();
}

static void test_reply_over_cap(void)
{
	static char big[5000];
	struct t_reply rp[1] = {{200, NULL, big, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	memset(big, ' ', sizeof(big) - 1);
	memcpy(big, json_reply, strlen(json_reply));
	setup("/big");
	t_conf.max_response_bytes = 1024;
	t_srv_route(&r, "/big/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "over 1024 bytes");
	/* the same reply fits a bigger cap */
	t_conf.max_response_bytes = 8192;
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Hi there");
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_redirect_not_followed(void)
{
	static const struct t_reply rp[] = {{307, "Location: /elsewhere/chat/completions\r\n", "",
					      NULL, 0, 0, 0}};
	static const struct t_reply tp[] = {{200, NULL, json_reply, NULL, 0, 0, 0}};
	struct t_route r, t;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/moved");
	t_srv_route(&r, "/moved/chat/completions", rp, 1);
	t_srv_route(&t, "/elsewhere/chat/completions", tp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "HTTP 307");
	T_EQ_INT(atomic_load(&t.hits), 0);
	t_route_close(&r);
	t_route_close(&t);
	t_provider_teardown();
}

static void test_tick_abort(void)
{
	static const char *const first[] = {
		"data: {\"choices\":[{\"index\":0,"
		"\"delta\":{\"content\":\"thinking\"}}]}\n\n", NULL};
	static const struct t_reply rp[] = {{200, NULL, NULL, first, 0, 0, 20}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;
	double ret;

	t_cap_init(&c);
	c.stop_at_ms = 250;
	setup("/drip");
	t_conf.timeout_ms = 20000;
	t_srv_route(&r, "/drip/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_E_CANCELLED);
	ret = t_now_ms();
	printf("  returned %.1f ms after the client left\n", ret - c.stopped_at);
	T_ASSERT(ret - c.start < 1000);
	T_ASSERT(ret - c.stopped_at < 150);   /* 100 ms promised; slack for sanitizers */
	T_EQ_STR(c.text.data, "thinking");
	T_ASSERT(out.text == NULL);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

static void test_text_delta_abort(void)
{
	static const char *const chunks[] = {
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"two\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		"data: [DONE]\n\n", NULL};
	static const struct t_reply rp[] = {{200, NULL, NULL, chunks, 20, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;

	t_cap_init(&c);
	c.stop_on_delta = 1;
	setup("/stopdelta");
	t_srv_route(&r, "/stopdelta/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_E_CANCELLED);
	T_EQ_STR(c.text.data, "one");
	T_EQ_INT(c.ndeltas, 1);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

static void test_stream_answered_with_json(void)
{
	static const struct t_reply rp[] = {{200, NULL, json_reply, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;

	t_cap_init(&c);
	setup("/jsonstream");
	t_srv_route(&r, "/jsonstream/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Hi there");
	T_EQ_STR(c.text.data, "Hi there");
	T_EQ_INT(out.input_tokens, 12);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

static void test_no_key_no_authorization(void)
{
	static const struct t_reply rp[] = {{200, NULL, json_reply, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	char v[128];

	setup("/nokey");
	t_conf.api_key = NULL;
	t_srv_route(&r, "/nokey/chat/completions", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_ASSERT(!t_route_header(&r, "Authorization", v, sizeof(v)));
	gh_chat_response_clear(&out);
	t_conf.api_key = "";
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_ASSERT(!t_route_header(&r, "Authorization", v, sizeof(v)));
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_bad_message_refused(void)
{
	struct gh_chat_response out;
	struct gh_err e;

	setup("/never");
	T_EQ_INT(t_chat("[{\"role\":\"robot\",\"content\":\"x\"}]", 0, NULL, &out, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "messages[0]: role");
	T_EQ_INT(t_chat("[{\"role\":\"user\","
		      "\"content\":[{\"type\":\"video\"}]}]", 0, NULL, &out, &e),
		 GH_E_BADREQ);
	T_CONTAINS(e.msg, "messages[0]: unsupported content part type");
	t_provider_teardown();
}

/* A stream's chunks through on_event (the common ones read from their
 * text) and through on_event_tree give the same stream: the text, the
 * finish reason, the counts, the calls, also for chunks the text reader
 * leaves to the tree. */
static void test_chunks_read_without_tree(void)
{
	static const char *chunks[] = {
		"{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
		"\"content\":\"\"},\"finish_reason\":null}]}",
		"{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\\u00e9 \"},"
		"\"finish_reason\":null}]}",
		/* the tree's: an index written 0.0, two choices, a tool call */
		"{\"choices\":[{\"index\":0.0,\"delta\":{\"content\":\"a\"}}]}",
		"{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}},{\"delta\":{\"content\":\"b\"}}]}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"k1\","
		"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}",
		"{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}",
		"{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}",
		"[DONE]",
	};
	const struct gh_provider_wire *w = gh_provider_openai.wire;
	struct gh_chat_request req;
	struct gh_chat_events ev;
	struct gh_provider_stream a, b;
	size_t i;

	setup("");
	memset(&req, 0, sizeof(req));
	memset(&ev, 0, sizeof(ev));
	gh_provider_stream_init(&a, &t_conf, "openai", &req, &ev);
	gh_provider_stream_init(&b, &t_conf, "openai", &req, &ev);
	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		struct gh_sse_event e = {"message", chunks[i], strlen(chunks[i]), "", -1};

		T_EQ_INT(w->on_event(&a, &e), 0);
		T_EQ_INT(w->on_event_tree(&b, &e), 0);
	}
	T_EQ_INT((int)a.text.len, (int)strlen("caf\xc3\xa9 ab"));
	T_ASSERT(!memcmp(a.text.data, "caf\xc3\xa9 ab", a.text.len));
	T_ASSERT(a.text.len == b.text.len && !memcmp(a.text.data, b.text.data, a.text.len));
	T_EQ_INT(a.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT(b.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT((int)a.input_tokens, 12);
	T_EQ_INT((int)a.output_tokens, 3);
	T_EQ_INT((int)b.input_tokens, 12);
	T_EQ_INT((int)a.ncalls, 1);
	T_EQ_INT((int)b.ncalls, 1);
	T_EQ_STR(a.calls[0].id, "k1");
	T_ASSERT(a.done && b.done);
	gh_provider_stream_free(&a);
	gh_provider_stream_free(&b);
	t_provider_teardown();
}

T_MAIN(T(test_json_text_reply), T(test_reply_read_without_tree),
       T(test_chunks_read_without_tree), T(test_request_translation), T(test_json_tool_calls),
       T(test_sse_stream_split_oddly), T(test_stream_invalid_tool_args), T(test_stream_truncated),
       T(test_stream_malformed_chunk), T(test_stream_error_chunk), T(test_stream_reset), T(test_stream_over_cap),
       T(test_http_500_retried_then_reported), T(test_http_error_plain_body),
       T(test_429_then_success), T(test_429_exhausted_is_ratelimit),
       T(test_key_echoed_by_upstream_is_redacted), T(test_timeout), T(test_connection_refused),
       T(test_reply_over_cap), T(test_redirect_not_followed), T(test_tick_abort),
       T(test_text_delta_abort), T(test_stream_answered_with_json),
       T(test_no_key_no_authorization), T(test_bad_message_refused))
