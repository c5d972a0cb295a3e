/*
 * test_wire_mcp.c - the MCP server wire: messages told apart, the errors
 * bad ones get, version negotiation, tools/call params, elicitation
 * answers and the 2026-07-28 header checks.
 */
#include "wire_mcp.h"

#include "json.h"
#include "t.h"

static int parse(const char *s, struct gh_mcp_in *m, int *code, cJSON **id)
{
	struct gh_err e;

	return gh_mcp_in_parse(s, strlen(s), m, code, id, &e) == GH_OK ? 0 : -1;
}

static void test_kinds(void)
{
	struct gh_mcp_in m;
	cJSON *id = NULL;
	int code;

	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &m, &code, &id), 0);
	T_EQ_INT(m.type, GH_MCP_IN_REQUEST);
	T_EQ_STR(m.method, "ping");
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &code,
		       &id), 0);
	T_EQ_INT(m.type, GH_MCP_IN_NOTIFICATION);
	T_ASSERT(!id);
	gh_mcp_in_clear(&m);
	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":\"e1\",\"result\":{\"action\":\"accept\","
		       "\"content\":{\"approve\":true}}}", &m, &code, &id), 0);
	T_EQ_INT(m.type, GH_MCP_IN_RESPONSE);
	T_EQ_INT(gh_mcp_elicit_accepted(m.result), 1);
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
}

static void test_errors(void)
{
	static const struct {
		const char *in;
		int code;
		int has_id;
	} cases[] = {
		{"{nope", GH_MCP_PARSE_ERROR, 0},
		{"", GH_MCP_PARSE_ERROR, 0},
		{"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", GH_MCP_INVALID_REQUEST, 0},
		{"\"x\"", GH_MCP_INVALID_REQUEST, 0},
		{"{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"ping\"}", GH_MCP_INVALID_REQUEST, 1},
		{"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", GH_MCP_INVALID_REQUEST, 0},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", GH_MCP_INVALID_REQUEST, 1},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}", GH_MCP_INVALID_REQUEST,
		 1},
		{"{\"jsonrpc\":\"2.0\",\"id\":1}", GH_MCP_INVALID_REQUEST, 1},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", GH_MCP_INVALID_REQUEST, 1},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gh_mcp_in m;
		cJSON *id = NULL;
		int code = 0;

		T_EQ_INT(parse(cases[i].in, &m, &code, &id), -1);
		T_EQ_INT(code, cases[i].code);
		T_EQ_INT(id != NULL, cases[i].has_id);
		T_ASSERT(!m.root);
		cJSON_Delete(id);
	}
}

static void test_negotiate(void)
{
	T_EQ_STR(gh_mcp_negotiate("2025-06-18"), "2025-06-18");
	T_EQ_STR(gh_mcp_negotiate("2025-11-25"), "2025-11-25");
	T_EQ_STR(gh_mcp_negotiate("2024-11-05"), "2025-11-25");
	T_EQ_STR(gh_mcp_negotiate("2026-07-28"), "2025-11-25");
	T_EQ_INT(gh_mcp_session_version("2026-07-28"), 0);
}

static void test_call_params_and_caps(void)
{
	struct gh_mcp_in m;
	struct gh_mcp_call c;
	struct gh_err e;
	cJSON *id = NULL, *caps;
	int code;

	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
		       "{\"name\":\"t\",\"arguments\":{\"a\":1},\"_meta\":{\"progressToken\":\"p\"}}}",
		       &m, &code, &id), 0);
	T_EQ_INT(gh_mcp_in_call_params(&m, &c, &e), GH_OK);
	T_EQ_STR(c.name, "t");
	T_EQ_INT(gh_json_int(c.args, "a", 0), 1);
	T_EQ_STR(m.progress_token->valuestring, "p");
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
		       "{\"arguments\":{}}}", &m, &code, &id), 0);
	T_EQ_INT(gh_mcp_in_call_params(&m, &c, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "params.name");
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
	caps = gh_json_parse_stored("{\"elicitation\":{}}");
	T_EQ_INT(gh_mcp_caps_elicit_form(caps), 1);
	cJSON_Delete(caps);
	caps = gh_json_parse_stored("{\"elicitation\":{\"url\":{}}}");
	T_EQ_INT(gh_mcp_caps_elicit_form(caps), 0);
	cJSON_Delete(caps);
	T_EQ_INT(gh_mcp_caps_elicit_form(NULL), 0);
}

static void test_modern_headers(void)
{
	static const char body[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
		"\"caf\xc3\xa9\",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
		"\"io.modelcontextprotocol/clientCapabilities\":{}}}}";
	struct gh_mcp_in m;
	struct gh_err e;
	cJSON *id = NULL;
	int code;

	T_EQ_INT(parse(body, &m, &code, &id), 0);
	/* café, as the client encodes a name that is not plain ASCII */
	T_EQ_INT(gh_mcp_check_modern(&m, "tools/call", "=?base64?Y2Fmw6k=?=", "2026-07-28", &code,
				     &e), 0);
	T_EQ_INT(gh_mcp_check_modern(&m, "tools/list", "=?base64?Y2Fmw6k=?=", "2026-07-28", &code,
				     &e), -1);
	T_EQ_INT(code, GH_MCP_HEADER_MISMATCH);
	T_EQ_INT(gh_mcp_check_modern(&m, "tools/call", "cafe", "2026-07-28", &code, &e), -1);
	T_EQ_INT(gh_mcp_check_modern(&m, "tools/call", NULL, "2026-07-28", &code, &e), -1);
	T_EQ_INT(gh_mcp_check_modern(&m, "tools/call", "=?base64?Y2Fmw6k=?=", NULL, &code, &e), -1);
	T_EQ_INT(gh_mcp_check_modern(&m, "tools/call", "=?base64?Y2Fmw6k=?=", "2025-11-25", &code,
				     &e), -1);
	T_EQ_INT(code, GH_MCP_HEADER_MISMATCH);
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"_meta\":"
		       "{\"io.modelcontextprotocol/protocolVersion\":\"2027-01-01\","
		       "\"io.modelcontextprotocol/clientCapabilities\":{}}}}", &m, &code, &id), 0);
	T_EQ_INT(gh_mcp_check_modern(&m, "ping", NULL, "2027-01-01", &code, &e), -1);
	T_EQ_INT(code, GH_MCP_UNSUPPORTED_VERSION);
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
	/* a notification needs neither headers nor capabilities */
	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		       "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}",
		       &m, &code, &id), 0);
	T_EQ_INT(gh_mcp_check_modern(&m, NULL, NULL, NULL, &code, &e), 0);
	gh_mcp_in_clear(&m);
	/* a request needs its capabilities */
	T_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":"
		       "{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}",
		       &m, &code, &id), 0);
	T_EQ_INT(gh_mcp_check_modern(&m, "ping", NULL, "2026-07-28", &code, &e), -1);
	T_EQ_INT(code, GH_MCP_INVALID_PARAMS);
	cJSON_Delete(id);
	gh_mcp_in_clear(&m);
}

T_MAIN(T(test_kinds), T(test_errors), T(test_negotiate), T(test_call_params_and_caps),
       T(test_modern_headers))
