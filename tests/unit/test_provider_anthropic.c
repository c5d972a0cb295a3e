/*
 * test_provider_anthropic.c - the Messages API provider against a server on
 * 127.0.0.1 that answers like the real API: headers (x-api-key,
 * anthropic-version), the request body for every CoreMessage shape with
 * same-role turns merged and empty turns dropped, tools as input_schema,
 * the max_tokens default; JSON replies with text and tool_use blocks and
 * every stop_reason; event streams split at odd bytes (text and
 * input_json_delta per block, ping, usage from message_start and
 * message_delta); error events, truncated and malformed streams; HTTP
 * errors with the upstream's message; aborts. No error message may carry
 * the API key.
 */
#include "provider.h"

#include <stdlib.h>

#include "buf.h"
#include "err.h"
#include "json.h"
#include "provider_int.h"
#include "sse.h"
#include "t.h"
#include "t_provider.h"
#include "upstream.h"
#include "util.h"

#include <cjson/cJSON.h>

/* Points t_conf at t_srv.base + prefix. */
static void setup(const char *prefix)
{
	t_provider_setup(prefix, "claude", GH_PROVIDER_ANTHROPIC, "claude-test");
	t_conf.anthropic_version = "2023-06-01";
}

static const char *const simple_msgs = "[{\"role\":\"user\",\"content\":\"Hi\"}]";

static const char json_reply[] =
	"{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\","
	"\"content\":[{\"type\":\"text\",\"text\":\"Let me check. \"},"
	"{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":"
	"\"Paris\"}},{\"type\":\"text\",\"text\":\"Done.\"}],"
	"\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
	"\"usage\":{\"input_tokens\":40,\"output_tokens\":22}}";

static const char text_reply[] =
	"{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":"
	"\"text\",\"text\":\"Hi there\"}],\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":"
	"5,\"output_tokens\":2}}";

static void test_json_reply_with_tool_use(void)
{
	static const struct t_reply rp[] = {{200, NULL, json_reply, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	char v[256], *body;
	cJSON *sent;

	setup("/json");
	t_conf.anthropic_version = "2099-01-01";
	t_srv_route(&r, "/json/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Let me check. Done.");
	T_EQ_INT(out.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT(out.ncalls, 1);
	T_EQ_STR(out.calls[0].id, "toolu_1");
	T_EQ_STR(out.calls[0].name, "get_weather");
	T_ASSERT(t_json_eq(out.calls[0].args, "{\"city\":\"Paris\"}"));
	T_EQ_STR(out.calls[0].raw_args, "{\"city\":\"Paris\"}");
	T_EQ_INT(out.input_tokens, 40);
	T_EQ_INT(out.output_tokens, 22);
	T_ASSERT(t_route_header(&r, "x-api-key", v, sizeof(v)));
	T_EQ_STR(v, T_KEY);
	T_ASSERT(t_route_header(&r, "anthropic-version", v, sizeof(v)));
	T_EQ_STR(v, "2099-01-01");
	T_ASSERT(t_route_header(&r, "content-type", v, sizeof(v)));
	T_EQ_STR(v, "application/json");
	T_ASSERT(!t_route_header(&r, "Authorization", v, sizeof(v)));
	body = t_route_body(&r);
	sent = cJSON_Parse(body);
	T_ASSERT(t_json_eq(sent, "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":["
			       "{\"role\":\"user\",\"content\":[{\"type\":\"text\","
			       "\"text\":\"Hi\"}]}]}"));
	cJSON_Delete(sent);
	free(body);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_request_translation(void)
{
	static const struct t_reply rp[] = {{200, NULL, text_reply, NULL, 0, 0, 0}};
	static const char msgs[] =
		"[{\"role\":\"system\",\"content\":\"Extra rules.\"},"
		"{\"role\":\"user\",\"content\":\"Hi\"},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Look:\"},"
		" {\"type\":\"image\",\"image\":\"https://x.test/a.png\"},"
		" {\"type\":\"image\",\"image\":\"data:image/jpeg;base64,QUJD\"}]},"
		"{\"role\":\"assistant\",\"content\":\"\"},"
		"{\"role\":\"user\",\"content\":\"Still there?\"},"
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
		"{\"role\":\"user\",\"content\":\"And tomorrow?\"},"
		"{\"role\":\"assistant\",\"content\":\"Sunny.\"},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\","
		"\"toolCallId\":\"c3\","
		" \"toolName\":\"noargs\"}]}]";
	static const char want_msgs[] =
		"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},"
		" {\"type\":\"text\",\"text\":\"Look:\"},"
		" {\"type\":\"image\",\"source\":{\"type\":\"url\","
		"\"url\":\"https://x.test/a.png\"}},"
		" {\"type\":\"image\",\"source\":{\"type\":\"base64\","
		"\"media_type\":\"image/jpeg\","
		"  \"data\":\"QUJD\"}},"
		" {\"type\":\"text\",\"text\":\"Still there?\"}]},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Checking.\"},"
		" {\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"get_weather\","
		"\"input\":{\"city\":\"Paris\"}},"
		" {\"type\":\"tool_use\",\"id\":\"c2\",\"name\":\"get_time\","
		"\"input\":{\"tz\":\"UTC\"}}]},"
		"{\"role\":\"user\",\"content\":["
		" {\"type\":\"tool_result\",\"tool_use_id\":\"c1\","
		"\"content\":\"{\\\"temp\\\":21}\"},"
		" {\"type\":\"tool_result\",\"tool_use_id\":\"c2\",\"content\":\"10:00\","
		"\"is_error\":true},"
		" {\"type\":\"text\",\"text\":\"And tomorrow?\"}]},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Sunny.\"},"
		" {\"type\":\"tool_use\",\"id\":\"c3\",\"name\":\"noargs\",\"input\":{}}]}]";
	static const char want_tools[] =
		"[{\"name\":\"get_weather\",\"description\":\"Weather by city\",\"input_schema\":"
		" {\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
		"  \"required\":[\"city\"]}},"
		"{\"name\":\"noargs\",\"input_schema\":{\"type\":\"object\",\"properties\":{}}}]";
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
	t_srv_route(&r, "/tr/v1/messages", rp, 1);
	memset(&req, 0, sizeof(req));
	req.model = "claude-test";
	req.system = "You are helpful.";
	req.messages = m;
	req.tools = tools;
	req.ntools = 2;
	req.has_temperature = 1;
	req.temperature = 0.25;
	req.max_tokens = 300;
	T_ASSERT(m && schema);
	T_EQ_INT(gh_provider_chat(&t_conf, &req, NULL, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Hi there");
	T_EQ_INT(out.finish, GH_FINISH_STOP);
	body = t_route_body(&r);
	sent = cJSON_Parse(body);
	T_ASSERT(sent);
	T_EQ_STR(gh_json_str(sent, "model"), "claude-test");
	T_EQ_STR(gh_json_str(sent, "system"), "You are helpful.\n\nExtra rules.");
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "messages"), want_msgs));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "tools"), want_tools));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "temperature"), "0.25"));
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "max_tokens"), "300"));
	T_ASSERT(!cJSON_GetObjectItem(sent, "stream"));
	cJSON_Delete(sent);
	free(body);
	cJSON_Delete(m);
	cJSON_Delete(schema);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_stop_reasons(void)
{
	static const struct t_reply rp[] = {
		{200, NULL, "{\"content\":[{\"type\":\"text\",\"text\":\"a\"}],"
			    "\"stop_reason\":\"end_turn\"}", NULL, 0, 0, 0},
		{200, NULL, "{\"content\":[{\"type\":\"text\",\"text\":\"b\"}],"
			    "\"stop_reason\":\"stop_sequence\"}", NULL, 0, 0, 0},
		{200, NULL, "{\"content\":[{\"type\":\"text\",\"text\":\"c\"}],"
			    "\"stop_reason\":\"max_tokens\"}", NULL, 0, 0, 0},
		{200, NULL, "{\"content\":[],\"stop_reason\":\"refusal\"}", NULL, 0, 0, 0}};
	static const enum gh_finish want[] = {GH_FINISH_STOP, GH_FINISH_STOP, GH_FINISH_LENGTH,
					      GH_FINISH_CONTENT_FILTER};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	int i;

	setup("/stops");
	t_srv_route(&r, "/stops/v1/messages", rp, 4);
	for (i = 0; i < 4; i++) {
		T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_OK);
		T_EQ_INT(out.finish, want[i]);
		gh_chat_response_clear(&out);
	}
	t_route_close(&r);
	t_provider_teardown();
}

static const char stream_text[] =
	"event: message_start\n"
	"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
	"\"role\":\"assistant\",\"content\":[],\"model\":\"claude-test\",\"stop_reason\":null,"
	"\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
	"event: content_block_start\n"
	"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
	"\"text\":\"\"}}\n\n"
	"event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n"
	"event: content_block_delta\n"
	"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
	"\"text\":\"Let me \"}}\n\n"
	"event: content_block_delta\n"
	"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
	"\"text\":\"check.\"}}\n\n"
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	"event: content_block_start\n"
	"data: {\"type\":\"content_block_start\",\"index\":1,"
	"\"content_block\":{\"type\":\"tool_use\","
	"\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n"
	"event: content_block_delta\n"
	"data: {\"type\":\"content_block_delta\",\"index\":1,"
	"\"delta\":{\"type\":\"input_json_delta\","
	"\"partial_json\":\"\"}}\n\n"
	"event: content_block_delta\n"
	"data: {\"type\":\"content_block_delta\",\"index\":1,"
	"\"delta\":{\"type\":\"input_json_delta\","
	"\"partial_json\":\"{\\\"city\\\": \\\"Par\"}}\n\n"
	"event: content_block_delta\n"
	"data: {\"type\":\"content_block_delta\",\"index\":1,"
	"\"delta\":{\"type\":\"input_json_delta\","
	"\"partial_json\":\"is\\\"}\"}}\n\n"
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
	"event: content_block_start\n"
	"data: {\"type\":\"content_block_start\",\"index\":2,"
	"\"content_block\":{\"type\":\"tool_use\","
	"\"id\":\"toolu_2\",\"name\":\"get_time\",\"input\":{}}}\n\n"
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","
	"\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n"
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/* Streams stream_text, whole in one read, for the messages msgs; c has
 * what the callbacks saw (the caller frees it). */
static void chat_whole(const char *msgs, struct t_capture *c)
{
	static const char *const whole[] = {stream_text, NULL};
	struct t_reply rp[1] = {{200, NULL, NULL, NULL, 1, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	rp[0].chunks = whole;
	t_cap_init(c);
	setup("/sse");
	t_srv_route(&r, "/sse/v1/messages", rp, 1);
	T_EQ_INT(t_chat(msgs, 1, c, &out, &e), GH_OK);
	T_EQ_STR(c->text.data, "Let me check.");
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

/* The whole stream in one read: its events are batched into one write to
 * the client, but the batch is cut after the first text so that the first
 * token does not wait for the rest. */
static void test_stream_first_text_leaves_at_once(void)
{
	struct t_capture c;

	chat_whole(simple_msgs, &c);
	T_EQ_INT(c.ndeltas, 2);
	T_EQ_INT(c.closed_at_first, 1);
	T_EQ_INT(c.batch_open, 0);
	T_EQ_INT(c.unbatched, 0);
	/* the request was reported written once, between two passes */
	T_EQ_INT(c.sent, 1);
	T_EQ_INT(c.sent_in_batch, 0);
	t_cap_free(&c);
}

/* A body curl writes in several passes (over 64 KB): the request is
 * reported written once, outside any pass's batch, and before any text
 * (reported when curl counts the whole body uploaded). */
static void test_stream_sent_after_a_large_body(void)
{
	struct t_capture c;
	struct gh_buf msgs;
	size_t i;

	gh_buf_init(&msgs, 1 << 20);
	gh_buf_puts(&msgs, "[{\"role\":\"user\",\"content\":\"");
	for (i = 0; i < 300000; i++)
		gh_buf_append(&msgs, "w", 1);
	gh_buf_puts(&msgs, "\"}]");
	chat_whole(msgs.data, &c);
	T_EQ_INT(c.sent, 1);
	T_EQ_INT(c.sent_in_batch, 0);
	T_EQ_INT(c.sent_after_text, 0);
	t_cap_free(&c);
	gh_buf_free(&msgs);
}

static void test_stream_split_oddly(void)
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
	t_srv_route(&r, "/sse/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_OK);
	T_EQ_STR(out.text, "Let me check.");
	T_EQ_STR(c.text.data, "Let me check.");
	T_EQ_INT(c.ndeltas, 2);
	/* every event came inside the batch of the read that brought it */
	T_ASSERT(c.batches >= 1);
	T_EQ_INT(c.batch_open, 0);
	T_EQ_INT(c.unbatched, 0);
	T_EQ_STR(c.tools.data, "0|toolu_1|get_weather|\n"
			       "0|-|-|{\"city\": \"Par\n"
			       "0|-|-|is\"}\n"
			       "1|toolu_2|get_time|\n");
	T_EQ_INT(out.ncalls, 2);
	T_EQ_STR(out.calls[0].id, "toolu_1");
	T_ASSERT(t_json_eq(out.calls[0].args, "{\"city\":\"Paris\"}"));
	T_EQ_STR(out.calls[1].name, "get_time");
	T_ASSERT(t_json_eq(out.calls[1].args, "{}"));
	T_EQ_INT(out.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT(out.input_tokens, 25);
	T_EQ_INT(out.output_tokens, 15);
	body = t_route_body(&r);
	sent = cJSON_Parse(body);
	T_ASSERT(t_json_eq(cJSON_GetObjectItem(sent, "stream"), "true"));
	cJSON_Delete(sent);
	free(body);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_cap_free(&c);
	t_free_chunks(chunks);
	t_provider_teardown();
}

/* Thinking blocks stream to the reasoning callback, with their signature;
 * they are not part of the answer's text. */
static void test_stream_thinking(void)
{
	static const char text[] =
		"event: message_start\n"
		"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
		"\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
		"event: content_block_start\n"
		"data: {\"type\":\"content_block_start\",\"index\":0,"
		"\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n"
		"event: content_block_delta\n"
		"data: {\"type\":\"content_block_delta\",\"index\":0,"
		"\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Hmm, \"}}\n\n"
		"event: content_block_delta\n"
		"data: {\"type\":\"content_block_delta\",\"index\":0,"
		"\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Paris.\"}}\n\n"
		"event: content_block_delta\n"
		"data: {\"type\":\"content_block_delta\",\"index\":0,"
		"\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAh==\"}}\n\n"
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
		"event: content_block_start\n"
		"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
		"{\"type\":\"text\",\"text\":\"\"}}\n\n"
		"event: content_block_delta\n"
		"data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
		"\"text_delta\",\"text\":\"Paris.\"}}\n\n"
		"event: message_delta\n"
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
		"\"usage\":{\"output_tokens\":9}}\n\n"
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
	const char *const chunks[] = {text, NULL};
	struct t_reply rp[1] = {{200, NULL, NULL, chunks, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	struct t_capture c;

	t_cap_init(&c);
	setup("/think");
	t_srv_route(&r, "/think/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_OK);
	T_EQ_STR(c.reasoning.data, "Hmm, Paris.|sig:EqQBCgIYAh==");
	T_EQ_STR(out.text, "Paris.");
	T_EQ_STR(c.text.data, "Paris.");
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

static void test_stream_invalid_tool_json(void)
{
	static const char *const chunks[] = {
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
		"\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\","
		"\"input\":{}}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
		"\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\","
		"\"delta\":{\"stop_reason\":"
		"\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", NULL};
	static const struct t_reply rp[] = {{200, NULL, NULL, chunks, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/badjson");
	t_srv_route(&r, "/badjson/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, NULL, &out, &e), GH_OK);
	T_EQ_INT(out.ncalls, 1);
	T_ASSERT(out.calls[0].args == NULL);
	T_EQ_STR(out.calls[0].raw_args, "{\"a\":");
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_provider_teardown();
}

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
	snprintf(uri, sizeof(uri), "%s/v1/messages", prefix);
	t_srv_route(&r, uri, rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_E_UPSTREAM);
	printf("  %s\n  %s\n", e.msg, t_detail);
	T_CONTAINS(e.msg, "provider claude (anthropic): ");
	T_CONTAINS(t_detail, "provider claude (anthropic): ");
	T_CONTAINS(t_detail, want);
	T_ASSERT(!strstr(e.msg, T_KEY) && !strstr(t_detail, T_KEY));
	gh_strlcpy(last_public, e.msg, sizeof(last_public));
	T_ASSERT(out.text == NULL && out.ncalls == 0);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

static void test_stream_error_event(void)
{
	static const char *const chunks[] = {
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
		"{\"input_tokens\":3}}}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
		"\"message\":\"Overloaded\"}}\n\n", NULL};

	stream_fails("/errev", chunks, "stream error: overloaded_error: Overloaded");
	/* the upstream's own words stay out of what tenants see */
	T_EQ_STR(last_public, "provider claude (anthropic): stream error");
}

static void test_stream_truncated(void)
{
	static const char *const chunks[] = {
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
		"{\"input_tokens\":3}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
		"\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
		"\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\","
		"\"delta\":{\"stop_reason\":"
		"\"end_turn\"}}\n\n", NULL};

	stream_fails("/trunc", chunks, "stream ended early");
}

static void test_stream_malformed_chunk(void)
{
	static const char *const chunks[] = {
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
		"\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", NULL};

	stream_fails("/malformed", chunks, "malformed chunk");
}

static void test_stream_delta_for_unknown_block(void)
{
	static const char *const chunks[] = {
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":4,"
		"\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", NULL};

	stream_fails("/unknownblock", chunks, "not a tool_use");
}

static void test_http_error_retried_then_reported(void)
{
	static const struct t_reply rp[] = {{529, NULL,
		"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
		"\"message\":\"Overloaded\"}}",
		NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/e529");
	t_conf.max_retries = 1;
	t_srv_route(&r, "/e529/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	T_EQ_STR(e.msg, "provider claude (anthropic): HTTP 529");
	T_EQ_STR(t_detail, "provider claude (anthropic): HTTP 529: Overloaded");
	T_EQ_INT(atomic_load(&r.hits), 2);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_key_echoed_by_upstream_is_redacted(void)
{
	static const struct t_reply rp[] = {{401, NULL,
		"{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
		"\"message\":\"invalid x-api-key " T_KEY "\"}}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/e401");
	t_srv_route(&r, "/e401/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	printf("  %s\n", e.msg);
	T_ASSERT(!strstr(e.msg, T_KEY));
	T_EQ_STR(e.msg, "provider claude (anthropic): HTTP 401");
	T_EQ_STR(t_detail, "provider claude (anthropic): HTTP 401: invalid x-api-key [redacted]");
	t_route_close(&r);
	t_provider_teardown();
}

static void test_429_is_ratelimit(void)
{
	static const struct t_reply rp[] = {{429, "Retry-After: 3\r\n",
		"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
		"\"Number of requests has exceeded your rate limit\"}}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;

	setup("/r429");
	t_srv_route(&r, "/r429/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_RATELIMIT);
	T_EQ_STR(e.msg, "provider claude (anthropic): HTTP 429");
	T_CONTAINS(t_detail, "HTTP 429: Number of requests has exceeded your rate limit");
	T_EQ_INT(e.retry_after, 3);
	t_route_close(&r);
	t_provider_teardown();
}

static void test_timeout_and_refused(void)
{
	static const struct t_reply rp[] = {{200, NULL, text_reply, NULL, 0, 3000, 0}};
	struct t_route r;
	struct gh_chat_response out;
	struct gh_err e;
	double t0;

	setup("/slow");
	t_conf.timeout_ms = 250;
	t_srv_route(&r, "/slow/v1/messages", rp, 1);
	t0 = t_now_ms();
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_TIMEOUT);
	T_ASSERT(t_now_ms() - t0 < 1500);
	T_ASSERT(!strstr(e.msg, "127.0.0.1"));
	T_CONTAINS(t_detail, "provider claude (anthropic): upstream http://127.0.0.1:");
	T_ASSERT(!strstr(t_detail, T_KEY));
	t_route_close(&r);
	snprintf(t_base_url, sizeof(t_base_url), "http://127.0.0.1:%d", t_dead_port());
	t0 = t_now_ms();
	T_EQ_INT(t_chat(simple_msgs, 0, NULL, &out, &e), GH_E_UPSTREAM);
	T_ASSERT(t_now_ms() - t0 < 1000);
	T_EQ_STR(e.msg, "provider claude (anthropic): connection refused");
	T_CONTAINS(t_detail, "upstream http://127.0.0.1:");
	t_provider_teardown();
}

static void test_tick_abort(void)
{
	static const char *const first[] = {
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
		"\"content_block\":{\"type\":\"text\",\"text\":\"thinking\"}}\n\n", NULL};
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
	t_srv_route(&r, "/drip/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_E_CANCELLED);
	ret = t_now_ms();
	printf("  returned %.1f ms after the client left\n", ret - c.stopped_at);
	T_ASSERT(ret - c.start < 1000);
	T_ASSERT(ret - c.stopped_at < 150);   /* 100 ms promised; slack for sanitizers */
	T_EQ_STR(c.text.data, "thinking");
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
	t_srv_route(&r, "/jsonstream/v1/messages", rp, 1);
	T_EQ_INT(t_chat(simple_msgs, 1, &c, &out, &e), GH_OK);
	T_EQ_STR(c.text.data, "Let me check. Done.");
	T_EQ_STR(c.tools.data, "0|toolu_1|get_weather|\n0|-|-|{\"city\":\"Paris\"}\n");
	T_EQ_INT(out.ncalls, 1);
	gh_chat_response_clear(&out);
	t_route_close(&r);
	t_cap_free(&c);
	t_provider_teardown();
}

/* cJSON's allocations while the hooks below are in: a stream's common
 * events are read from their text (read_event), so none of them may
 * build a tree. */
static int tree_nodes;

static void *counting_malloc(size_t n)
{
	tree_nodes++;
	return malloc(n);
}

/* Feeds one event to the wire's stream reader: the cJSON allocations it
 * made, or -1 when the reader stopped the stream. */
static int feed(struct gh_provider_stream *st, const char *type, const char *data)
{
	const struct gh_provider_wire *w = gh_provider_anthropic.wire;
	cJSON_Hooks hooks = {counting_malloc, free};
	struct gh_sse_event ev;
	int stop;

	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.data = data;
	ev.data_len = strlen(data);
	ev.id = "";
	ev.retry_ms = -1;
	tree_nodes = 0;
	cJSON_InitHooks(&hooks);
	stop = w->on_event(st, &ev);
	cJSON_InitHooks(NULL);
	return stop ? -1 : tree_nodes;
}

static void test_stream_events_read_without_a_tree(void)
{
	struct gh_provider_conf conf = {.name = "claude", .type = GH_PROVIDER_ANTHROPIC,
					.max_response_bytes = 1 << 20};
	struct gh_chat_request req;
	struct gh_chat_events ev;
	struct gh_provider_stream st;

	memset(&req, 0, sizeof(req));
	memset(&ev, 0, sizeof(ev));
	gh_provider_stream_init(&st, &conf, "claude", &req, &ev);
	T_EQ_INT(feed(&st, "message_start", "{\"type\":\"message_start\",\"message\":{\"id\":"
		      "\"msg_1\",\"content\":[],\"usage\":{\"input_tokens\":10,"
		      "\"cache_creation_input_tokens\":2,\"cache_read_input_tokens\":3,"
		      "\"output_tokens\":1}}}"), 0);
	T_EQ_INT(st.input_tokens, 15);
	T_EQ_INT(st.output_tokens, 1);
	T_EQ_INT(feed(&st, "content_block_start", "{\"type\":\"content_block_start\",\"index\":0,"
		      "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"), 0);
	T_EQ_INT(feed(&st, "ping", "{\"type\": \"ping\"}"), 0);
	/* an escape in the text: not the fast path's, still no tree */
	T_EQ_INT(feed(&st, "content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,"
		      "\"delta\":{\"type\":\"text_delta\",\"text\":\"say \\\"hi\\\"\"}}"), 0);
	T_EQ_INT(feed(&st, "content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"),
		 0);
	T_EQ_INT(feed(&st, "content_block_start", "{\"type\":\"content_block_start\",\"index\":1,"
		      "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":"
		      "\"Bash\",\"input\":{}}}"), 0);
	T_EQ_INT(feed(&st, "content_block_delta", "{\"type\":\"content_block_delta\",\"index\":1,"
		      "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":"
		      "\"{\\\"command\\\": \\\"ls\"}}"), 0);
	T_EQ_INT(feed(&st, "content_block_delta", "{\"type\":\"content_block_delta\",\"index\":1,"
		      "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" -la\\\"}\"}}"),
		 0);
	T_EQ_INT(feed(&st, "message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
		      "\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}"), 0);
	T_EQ_INT(feed(&st, "message_stop", "{\"type\":\"message_stop\"}"), 0);
	T_EQ_INT(st.done, 1);
	T_EQ_STR(st.text.data, "say \"hi\"");
	T_EQ_INT((int)st.ncalls, 1);
	T_EQ_STR(st.calls[0].id, "toolu_1");
	T_EQ_STR(st.calls[0].name, "Bash");
	T_EQ_STR(st.calls[0].args.data, "{\"command\": \"ls -la\"}");
	T_EQ_INT(st.finish, GH_FINISH_TOOL_CALLS);
	T_EQ_INT(st.input_tokens, 15);
	T_EQ_INT(st.output_tokens, 12);
	gh_provider_stream_free(&st);

	/* what needs the tree still gets it: a thinking block, an error */
	gh_provider_stream_init(&st, &conf, "claude", &req, &ev);
	T_ASSERT(feed(&st, "content_block_start", "{\"type\":\"content_block_start\",\"index\":0,"
		      "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}") > 0);
	T_ASSERT(st.reasoning != NULL);
	gh_provider_stream_free(&st);
}

T_MAIN(T(test_json_reply_with_tool_use), T(test_request_translation), T(test_stop_reasons),
       T(test_stream_first_text_leaves_at_once), T(test_stream_sent_after_a_large_body), T(test_stream_split_oddly), T(test_stream_thinking), T(test_stream_invalid_tool_json), T(test_stream_error_event),
       T(test_stream_truncated), T(test_stream_malformed_chunk),
       T(test_stream_delta_for_unknown_block), T(test_http_error_retried_then_reported),
       T(test_key_echoed_by_upstream_is_redacted), T(test_429_is_ratelimit),
       T(test_timeout_and_refused), T(test_tick_abort), T(test_stream_answered_with_json),
       T(test_stream_events_read_without_a_tree))
