/*
 * fuzz_mcp_request.c - the MCP server wire (wire_mcp.c): one posted body
 * told apart as a request, a notification or a client's response, the
 * params of initialize and tools/call, the 2026-07-28 envelope and header
 * checks, an elicitation's answer, and the envelopes gatehouse answers
 * with. Input: the body. Checks:
 *   - a refusal carries a JSON-RPC code (-32700 for bytes that are no
 *     JSON, -32600 for JSON that is no single JSON-RPC message) and an id
 *     copy only when it is a string or an integer;
 *   - an accepted message is what its type says: a request has an id and
 *     a method, a notification a method and no id, a response an id and
 *     exactly one of result and error; params are an object or absent;
 *   - tools/call params, when accepted, name a tool and carry object
 *     arguments (or none);
 *   - a 2026-07-28 request whose headers repeat its own body passes the
 *     header checks exactly when its envelope is well formed, and fails
 *     with a method header that differs;
 *   - the answer envelopes print and parse back with the same id.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "wire_mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int id_ok(const cJSON *id)
{
	return cJSON_IsString(id) || (cJSON_IsNumber(id) && gh_json_is_int(id));
}

static void check_envelopes(const struct gh_mcp_in *m)
{
	cJSON *o = gh_mcp_result(cJSON_Duplicate(m->id, 1),
				 m->params ? cJSON_Duplicate(m->params, 1) : cJSON_CreateObject());
	char *text;
	cJSON *back = NULL;
	struct gh_err e;

	CHECK(o);
	text = gh_json_dump(o);
	CHECK(text);
	CHECK(gh_json_parse_opts(text, strlen(text), "answer", GH_JSON_STORED, &back, &e) == GH_OK);
	CHECK(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(back, "id"), m->id, 1));
	cJSON_Delete(back);
	free(text);
	cJSON_Delete(o);
	o = gh_mcp_error(cJSON_Duplicate(m->id, 1), GH_MCP_INVALID_PARAMS, "x", NULL);
	CHECK(o && cJSON_GetObjectItemCaseSensitive(o, "error"));
	cJSON_Delete(o);
}

static void check_modern(const struct gh_mcp_in *m)
{
	const char *name = NULL;
	int code = 0, want;
	struct gh_err e;

	if (!strcmp(m->method, "tools/call") || !strcmp(m->method, "prompts/get"))
		name = gh_json_str(m->params, "name");
	else if (!strcmp(m->method, "resources/read"))
		name = gh_json_str(m->params, "uri");
	want = !strcmp(m->meta_version, GH_MCP_V2026) &&
	       (m->type != GH_MCP_IN_REQUEST || cJSON_IsObject(m->meta_caps));
	CHECK((gh_mcp_check_modern(m, m->method, name, m->meta_version, &code, &e) == 0) == want);
	if (!want)
		CHECK(code == GH_MCP_UNSUPPORTED_VERSION || code == GH_MCP_INVALID_PARAMS ||
		      code == GH_MCP_HEADER_MISMATCH);
	if (want && m->type == GH_MCP_IN_REQUEST)
		CHECK(gh_mcp_check_modern(m, "not/this", name, m->meta_version, &code, &e) != 0 &&
		      code == GH_MCP_HEADER_MISMATCH);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_mcp_in m;
	struct gh_mcp_call call;
	struct gh_err e;
	cJSON *id = NULL;
	const char *version;
	const cJSON *caps;
	int code = 0;

	if (gh_mcp_in_parse((const char *)data, size, &m, &code, &id, &e) != GH_OK) {
		CHECK(code == GH_MCP_PARSE_ERROR || code == GH_MCP_INVALID_REQUEST ||
		      code == GH_MCP_INTERNAL);
		CHECK(e.msg[0]);
		CHECK(!m.root);
		CHECK(!id || id_ok(id));
		cJSON_Delete(id);
		return 0;
	}
	CHECK(!id || id_ok(id));
	cJSON_Delete(id);
	CHECK(m.root && (!m.params || cJSON_IsObject(m.params)));
	switch (m.type) {
	case GH_MCP_IN_REQUEST:
		CHECK(m.id && id_ok(m.id) && m.method && *m.method);
		check_envelopes(&m);
		break;
	case GH_MCP_IN_NOTIFICATION:
		CHECK(!m.id && m.method && *m.method);
		break;
	case GH_MCP_IN_RESPONSE:
		CHECK(m.id && !m.method && (!m.result != !m.error));
		if (gh_mcp_elicit_accepted(m.result))
			CHECK(!strcmp(gh_json_str(m.result, "action"), "accept"));
		break;
	}
	CHECK(!m.progress_token || id_ok(m.progress_token));
	if (m.method && !strcmp(m.method, "tools/call") &&
	    gh_mcp_in_call_params(&m, &call, &e) == GH_OK) {
		CHECK(call.name && *call.name);
		CHECK(!call.args || cJSON_IsObject(call.args));
		CHECK(!call.input_responses || cJSON_IsObject(call.input_responses));
	}
	if (m.method && !strcmp(m.method, "initialize") &&
	    gh_mcp_init_params(&m, &version, &caps, &e) == GH_OK) {
		CHECK(version);
		CHECK(gh_mcp_session_version(gh_mcp_negotiate(version)));
		CHECK(!caps || cJSON_IsObject(caps));
		gh_mcp_caps_elicit_form(caps);
	}
	if (m.meta_version && m.method)
		check_modern(&m);
	gh_mcp_in_clear(&m);
	return 0;
}
