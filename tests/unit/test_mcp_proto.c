/*
 * test_mcp_proto.c - the MCP client's messages: parsing what upstreams
 * send (in lines, SSE events and JSON bodies, split anywhere), tool
 * definitions and their digests, exposed names, call results.
 */
#include "t.h"

#include "json.h"
#include "mcp_proto.h"

struct got {
	int n;
	int kinds[16];
	int64_t ids[16];
	char methods[16][128];
	char errors[16][256];
	int stop_at;
};

static int collect(void *ud, struct gh_mcp_msg *m)
{
	struct got *g = ud;

	if (g->n < 16) {
		g->kinds[g->n] = m->kind;
		g->ids[g->n] = m->id;
		snprintf(g->methods[g->n], sizeof(g->methods[0]), "%s", m->method);
		snprintf(g->errors[g->n], sizeof(g->errors[0]), "%s", m->error);
	}
	g->n++;
	return g->stop_at && g->n == g->stop_at ? 7 : 0;
}

static void test_msg_kinds(void)
{
	struct gh_mcp_msg m;
	const char *s;

	s = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[]}}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_RESPONSE);
	T_EQ_INT(m.id, 7);
	T_ASSERT(cJSON_IsObject(m.result));
	gh_mcp_msg_clear(&m);

	s = "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"error\":{\"code\":-32601,\"message\":\"nope\"}}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_ERROR);
	T_EQ_INT(m.id, -1); /* not an id gatehouse sent */
	T_EQ_INT(m.error_code, -32601);
	T_EQ_STR(m.error, "nope");
	gh_mcp_msg_clear(&m);

	s = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_NOTIFICATION);
	T_EQ_STR(m.method, "notifications/tools/list_changed");
	gh_mcp_msg_clear(&m);

	s = "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"ping\"}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_REQUEST);
	T_ASSERT(cJSON_IsString(m.req_id));
	gh_mcp_msg_clear(&m);

	/* not messages: each says why */
	s = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_INVALID);
	T_CONTAINS(m.error, "batch");
	gh_mcp_msg_clear(&m);
	s = "{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_INVALID);
	gh_mcp_msg_clear(&m);
	s = "{\"jsonrpc\":\"2.0\",\"id\":1}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_INVALID);
	gh_mcp_msg_clear(&m);
	s = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"id\":2}";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_INVALID); /* a repeated member */
	gh_mcp_msg_clear(&m);
	s = "not json at all";
	T_EQ_INT(gh_mcp_msg_parse(s, strlen(s), &m), GH_OK);
	T_EQ_INT(m.kind, GH_MCP_INVALID);
	gh_mcp_msg_clear(&m);
}

static void feed_split(enum gh_mcp_framing f, const char *s, size_t step, size_t max,
		       struct got *g, int *rc_feed, int *rc_fin)
{
	struct gh_mcp_reader *r = gh_mcp_reader_new(f, max);
	size_t off = 0, n = strlen(s);

	*rc_feed = 0;
	while (off < n && *rc_feed == 0) {
		size_t k = n - off < step ? n - off : step;

		*rc_feed = gh_mcp_reader_feed(r, s + off, k, collect, g);
		off += k;
	}
	*rc_fin = gh_mcp_reader_finish(r, collect, g);
	gh_mcp_reader_free(r);
}

static void test_reader_lines(void)
{
	const char *s = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\n  \n"
			"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
			"\"params\":{\"progressToken\":1,\"progress\":2}}\n"
			"garbage\n"
			"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}"; /* no final line end */
	size_t step;

	for (step = 1; step < 40; step += 3) {
		struct got g = {0};
		int rf, rfin;

		feed_split(GH_MCP_LINES, s, step, 4096, &g, &rf, &rfin);
		T_EQ_INT(rf, 0);
		T_EQ_INT(rfin, 0);
		T_EQ_INT(g.n, 4);
		T_EQ_INT(g.kinds[0], GH_MCP_RESPONSE);
		T_EQ_INT(g.kinds[1], GH_MCP_NOTIFICATION);
		T_EQ_INT(g.kinds[2], GH_MCP_INVALID);
		T_EQ_INT(g.kinds[3], GH_MCP_RESPONSE);
		T_EQ_INT(g.ids[3], 2);
	}
}

static void test_reader_bounds(void)
{
	struct got g = {0};
	int rf, rfin;

	/* a line longer than the bound spends the reader */
	feed_split(GH_MCP_LINES, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"0123456789\"}}\n",
		   5, 32, &g, &rf, &rfin);
	T_EQ_INT(rf, GH_MCP_READ_TOOBIG);
	T_EQ_INT(rfin, GH_MCP_READ_TOOBIG);
	T_EQ_INT(g.n, 0);
	/* a callback's stop value comes back */
	memset(&g, 0, sizeof(g));
	g.stop_at = 1;
	feed_split(GH_MCP_LINES, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
				 "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n", 100, 4096, &g, &rf,
		   &rfin);
	T_EQ_INT(rf, 7);
	T_EQ_INT(g.n, 1);
	/* a JSON body over its bound */
	memset(&g, 0, sizeof(g));
	feed_split(GH_MCP_JSON, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", 4, 10, &g, &rf,
		   &rfin);
	T_EQ_INT(rf, GH_MCP_READ_TOOBIG);
	T_EQ_INT(g.n, 0);
	/* an empty body */
	memset(&g, 0, sizeof(g));
	feed_split(GH_MCP_JSON, "", 4, 10, &g, &rf, &rfin);
	T_EQ_INT(rfin, 1);
	T_EQ_INT(g.n, 0);
}

static void test_reader_sse(void)
{
	const char *s = "id: prime\ndata: \n\n"            /* a priming event: no message */
			"event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
			"\"notifications/progress\",\"params\":{\"progressToken\":3,"
			"\"progress\":1,\"total\":2}}\n\n"
			": keep-alive\n\n"
			"event: other\ndata: {}\n\n"
			"data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":3,\"result\":{\"content\":[]}}\r\n\r\n";
	size_t step;

	for (step = 1; step < 50; step += 7) {
		struct got g = {0};
		int rf, rfin;

		feed_split(GH_MCP_SSE, s, step, 4096, &g, &rf, &rfin);
		T_EQ_INT(rf, 0);
		T_EQ_INT(rfin, 0);
		T_EQ_INT(g.n, 2);
		T_EQ_INT(g.kinds[0], GH_MCP_NOTIFICATION);
		T_EQ_INT(g.kinds[1], GH_MCP_RESPONSE); /* data lines joined by a newline */
		T_EQ_INT(g.ids[1], 3);
	}
}

static void test_builders(void)
{
	struct gh_buf b;
	cJSON *p = gh_mcp_call_params("get-sum", NULL, 42), *id = cJSON_CreateString("x\"y");

	gh_buf_init(&b, 1 << 16);
	T_EQ_INT(gh_mcp_build_request(&b, 5, "tools/call", p), GH_BUF_OK);
	T_EQ_STR(b.data, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
			 "{\"name\":\"get-sum\",\"arguments\":{},\"_meta\":{\"progressToken\":42}}}");
	gh_buf_reset(&b);
	T_EQ_INT(gh_mcp_build_notification(&b, "notifications/initialized", NULL), GH_BUF_OK);
	T_EQ_STR(b.data, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	gh_buf_reset(&b);
	T_EQ_INT(gh_mcp_build_result(&b, id, NULL), GH_BUF_OK);
	T_EQ_STR(b.data, "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"result\":{}}");
	gh_buf_reset(&b);
	T_EQ_INT(gh_mcp_build_error(&b, id, -32601, "no sampling"), GH_BUF_OK);
	T_EQ_STR(b.data, "{\"jsonrpc\":\"2.0\",\"id\":\"x\\\"y\",\"error\":{\"code\":-32601,"
			 "\"message\":\"no sampling\"}}");
	/* a cap too small leaves the buffer as it was */
	gh_buf_free(&b);
	gh_buf_init(&b, 16);
	T_EQ_INT(gh_mcp_build_request(&b, 5, "tools/call", p), GH_BUF_TOOBIG);
	T_EQ_INT(b.len, 0);
	gh_buf_free(&b);
	cJSON_Delete(p);
	cJSON_Delete(id);
}

static void test_init(void)
{
	struct gh_mcp_init in;
	struct gh_err e;
	cJSON *r = gh_json_parse_stored("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":"
					"{\"tools\":{\"listChanged\":true}},\"serverInfo\":"
					"{\"name\":\"everything\",\"version\":\"2.0.0\"}}");

	T_EQ_INT(gh_mcp_parse_init(r, &in, &e), GH_OK);
	T_EQ_STR(in.version, "2025-06-18");
	T_EQ_INT(in.tools_list_changed, 1);
	T_EQ_STR(in.server_name, "everything");
	cJSON_Delete(r);
	r = gh_json_parse_stored("{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{}}");
	T_EQ_INT(gh_mcp_parse_init(r, &in, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "2024-11-05");
	T_CONTAINS(e.msg, GH_MCP_PROTO_LATEST);
	cJSON_Delete(r);
}

static void test_tool_def(void)
{
	struct gh_mcp_tool_def a, b;
	struct gh_err e;
	cJSON *t = gh_json_parse_stored(
		"{\"name\":\"get-sum\",\"description\":\"Adds\",\"inputSchema\":{\"type\":\"object\","
		"\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"}},"
		"\"required\":[\"a\",\"b\"]},\"annotations\":{\"readOnlyHint\":true,"
		"\"destructiveHint\":\"yes\",\"x\":1},\"_meta\":{\"ignored\":true},\"icons\":[]}");
	cJSON *t2 = gh_json_parse_stored(
		"{\"annotations\":{\"readOnlyHint\":true},\"inputSchema\":{\"required\":[\"a\",\"b\"],"
		"\"properties\":{\"b\":{\"type\":\"number\"},\"a\":{\"type\":\"number\"}},"
		"\"type\":\"object\"},\"description\":\"Adds\",\"name\":\"get-sum\"}");

	T_EQ_INT(gh_mcp_tool_def_parse(t, &a, &e), GH_OK);
	T_EQ_STR(a.name, "get-sum");
	T_EQ_STR(a.description, "Adds");
	T_ASSERT(a.output_schema == NULL);
	/* only booleans of the known hints are kept */
	T_ASSERT(cJSON_GetObjectItemCaseSensitive(a.annotations, "destructiveHint") == NULL);
	T_ASSERT(cJSON_GetObjectItemCaseSensitive(a.annotations, "x") == NULL);
	T_ASSERT(cJSON_GetObjectItemCaseSensitive(a.def, "_meta") == NULL);
	T_EQ_INT(gh_mcp_hint_of(a.annotations), GH_MCP_HINT_READONLY);
	T_EQ_INT(strlen(a.digest), 64);
	/* the same definition in another order and with dropped members has
	 * the same digest */
	T_EQ_INT(gh_mcp_tool_def_parse(t2, &b, &e), GH_OK);
	T_EQ_STR(a.digest, b.digest);
	gh_mcp_tool_def_clear(&b);
	/* a changed description changes it */
	cJSON_ReplaceItemInObjectCaseSensitive(t2, "description", cJSON_CreateString("Adds!"));
	T_EQ_INT(gh_mcp_tool_def_parse(t2, &b, &e), GH_OK);
	T_ASSERT(strcmp(a.digest, b.digest) != 0);
	gh_mcp_tool_def_clear(&b);
	/* a stored definition parses back to the same digest */
	T_EQ_INT(gh_mcp_tool_def_parse(a.def, &b, &e), GH_OK);
	T_EQ_STR(a.digest, b.digest);
	gh_mcp_tool_def_clear(&b);
	gh_mcp_tool_def_clear(&a);
	cJSON_Delete(t);
	cJSON_Delete(t2);

	/* refused: no schema, a schema gatehouse cannot enforce, a bad name */
	t = gh_json_parse_stored("{\"name\":\"x\"}");
	T_EQ_INT(gh_mcp_tool_def_parse(t, &a, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "no inputSchema");
	cJSON_Delete(t);
	t = gh_json_parse_stored("{\"name\":\"x\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
				 "{\"a\":{\"type\":\"string\",\"pattern\":\"(?=x)\"}}}}");
	T_EQ_INT(gh_mcp_tool_def_parse(t, &a, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "cannot enforce");
	cJSON_Delete(t);
	t = gh_json_parse_stored("{\"name\":\"x\",\"inputSchema\":{\"type\":\"string\"}}");
	T_EQ_INT(gh_mcp_tool_def_parse(t, &a, &e), GH_E_UPSTREAM);
	cJSON_Delete(t);
	t = gh_json_parse_stored("{\"name\":\"a\\nb\",\"inputSchema\":{}}");
	T_EQ_INT(gh_mcp_tool_def_parse(t, &a, &e), GH_E_UPSTREAM);
	cJSON_Delete(t);
}

static void test_hints(void)
{
	cJSON *a = gh_json_parse_stored("{\"destructiveHint\":false}");

	T_EQ_INT(gh_mcp_hint_of(a), GH_MCP_HINT_NOT_DESTRUCTIVE);
	cJSON_Delete(a);
	a = gh_json_parse_stored("{\"readOnlyHint\":false,\"destructiveHint\":true}");
	T_EQ_INT(gh_mcp_hint_of(a), GH_MCP_HINT_DESTRUCTIVE);
	cJSON_Delete(a);
	a = gh_json_parse_stored("{\"readOnlyHint\":false}");
	T_EQ_INT(gh_mcp_hint_of(a), GH_MCP_HINT_DEFAULT);
	cJSON_Delete(a);
	T_EQ_INT(gh_mcp_hint_of(NULL), GH_MCP_HINT_DEFAULT);
}

static void test_expose_name(void)
{
	char out[GH_MCP_NAME_MAX + 1], why[128];
	char long_name[80];

	T_EQ_INT(gh_mcp_expose_name("everything_", "get-sum", out, why, sizeof(why)), 0);
	T_EQ_STR(out, "everything_get-sum");
	T_EQ_INT(gh_mcp_expose_name("fs_", "read.file/v2", out, why, sizeof(why)), 0);
	T_EQ_STR(out, "fs_read_file_v2");
	memset(long_name, 'a', 61);
	long_name[61] = '\0';
	T_EQ_INT(gh_mcp_expose_name("abc", long_name, out, why, sizeof(why)), 0);
	T_EQ_INT(strlen(out), 64);
	T_EQ_INT(gh_mcp_expose_name("abcd", long_name, out, why, sizeof(why)), -1);
	T_CONTAINS(why, "longer than 64");
}

static void test_call_result(void)
{
	cJSON *r = gh_json_parse_stored("{\"content\":[{\"type\":\"text\",\"text\":\"{}\"}],"
					"\"structuredContent\":{\"temperature\":33},\"_meta\":{}}");
	cJSON *os = gh_json_parse_stored("{\"type\":\"object\",\"properties\":{\"temperature\":"
					 "{\"type\":\"number\"}},\"required\":[\"temperature\"]}");
	cJSON *out;
	struct gh_err e;
	int is_error;

	T_EQ_INT(gh_mcp_parse_call_result(r, os, &out, &is_error, &e), GH_OK);
	T_EQ_INT(is_error, 0);
	T_EQ_INT(cJSON_GetObjectItemCaseSensitive(
			 cJSON_GetObjectItemCaseSensitive(out, "structuredContent"), "temperature")
			 ->valueint, 33);
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(out, "_meta"));
	cJSON_Delete(out);
	cJSON_Delete(r);
	/* a result that does not match the outputSchema becomes a tool error */
	r = gh_json_parse_stored("{\"content\":[],\"structuredContent\":{\"temperature\":\"hot\"}}");
	T_EQ_INT(gh_mcp_parse_call_result(r, os, &out, &is_error, &e), GH_OK);
	T_EQ_INT(is_error, 1);
	T_ASSERT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(out, "isError")));
	cJSON_Delete(out);
	cJSON_Delete(r);
	/* isError comes back as sent */
	r = gh_json_parse_stored("{\"content\":[{\"type\":\"text\",\"text\":\"boom\"}],"
				 "\"isError\":true}");
	T_EQ_INT(gh_mcp_parse_call_result(r, NULL, &out, &is_error, &e), GH_OK);
	T_EQ_INT(is_error, 1);
	T_ASSERT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(out, "isError")));
	cJSON_Delete(out);
	cJSON_Delete(r);
	/* malformed */
	r = gh_json_parse_stored("{\"content\":\"text\"}");
	T_EQ_INT(gh_mcp_parse_call_result(r, NULL, &out, &is_error, &e), GH_E_UPSTREAM);
	T_ASSERT(out == NULL);
	cJSON_Delete(r);
	r = gh_json_parse_stored("{\"content\":[],\"isError\":\"yes\"}");
	T_EQ_INT(gh_mcp_parse_call_result(r, NULL, &out, &is_error, &e), GH_E_UPSTREAM);
	cJSON_Delete(r);
	cJSON_Delete(os);
}

static void test_progress(void)
{
	struct gh_mcp_progress p;
	cJSON *v = gh_json_parse_stored("{\"progressToken\":9,\"progress\":2,\"total\":5,"
					"\"message\":\"step 2\"}");

	T_EQ_INT(gh_mcp_parse_progress(v, &p), 0);
	T_EQ_INT(p.token, 9);
	T_EQ_INT((int)p.total, 5);
	T_EQ_STR(p.message, "step 2");
	cJSON_Delete(v);
	v = gh_json_parse_stored("{\"progressToken\":\"abc\",\"progress\":1}");
	T_EQ_INT(gh_mcp_parse_progress(v, &p), 0);
	T_EQ_INT(p.token, -1);
	cJSON_Delete(v);
	v = gh_json_parse_stored("{\"progressToken\":1}");
	T_EQ_INT(gh_mcp_parse_progress(v, &p), -1);
	cJSON_Delete(v);
}

T_MAIN(T(test_msg_kinds), T(test_reader_lines), T(test_reader_bounds), T(test_reader_sse),
       T(test_builders), T(test_init), T(test_tool_def), T(test_hints), T(test_expose_name),
       T(test_call_result), T(test_progress))
