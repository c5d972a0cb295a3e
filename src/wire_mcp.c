/*
 * wire_mcp.c - the MCP server wire; see wire_mcp.h.
 */
#include "wire_mcp.h"

#include <string.h>

#include <sodium.h>

#include "json.h"

void gh_mcp_in_clear(struct gh_mcp_in *m)
{
	if (!m)
		return;
	cJSON_Delete(m->root);
	memset(m, 0, sizeof(*m));
}

/* A JSON-RPC id: a string, or a number that is an integer. */
static int id_ok(const cJSON *id)
{
	if (cJSON_IsString(id))
		return 1;
	return cJSON_IsNumber(id) && gh_json_is_int(id);
}

static enum gh_code invalid(int *rpc_code, struct gh_err *e, const char *why)
{
	*rpc_code = GH_MCP_INVALID_REQUEST;
	return gh_err_set(e, GH_E_BADREQ, "invalid request: %s", why);
}

enum gh_code gh_mcp_in_parse(const char *body, size_t len, struct gh_mcp_in *out,
			     int *rpc_code, cJSON **id_out, struct gh_err *e)
{
	const cJSON *v, *meta;
	cJSON *root = NULL;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	*rpc_code = 0;
	*id_out = NULL;
	rc = gh_json_parse_opts(body ? body : "", body ? len : 0, "MCP message", 0, &root, e);
	if (rc != GH_OK) {
		*rpc_code = rc == GH_E_NOMEM ? GH_MCP_INTERNAL : GH_MCP_PARSE_ERROR;
		return rc == GH_E_NOMEM ? rc : GH_E_BADREQ;
	}
	out->root = root;
	if (cJSON_IsArray(root)) {
		rc = invalid(rpc_code, e, "batches are not accepted: send one message per request");
		goto fail;
	}
	if (!cJSON_IsObject(root)) {
		rc = invalid(rpc_code, e, "a message is a JSON object");
		goto fail;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "id");
	if (v && id_ok(v))
		*id_out = cJSON_Duplicate(v, 1);
	if (!cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root, "jsonrpc")) ||
	    strcmp(v->valuestring, "2.0")) {
		rc = invalid(rpc_code, e, "\"jsonrpc\" must be \"2.0\"");
		goto fail;
	}
	out->id = cJSON_GetObjectItemCaseSensitive(root, "id");
	if (out->id && !id_ok(out->id)) {
		rc = invalid(rpc_code, e, "\"id\" must be a string or an integer");
		goto fail;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "method");
	if (!v) {
		out->result = cJSON_GetObjectItemCaseSensitive(root, "result");
		out->error = cJSON_GetObjectItemCaseSensitive(root, "error");
		if (!out->id || (!out->result == !out->error)) {
			rc = invalid(rpc_code, e, "a message has a \"method\", or is a response "
						  "with an \"id\" and one of \"result\" or \"error\"");
			goto fail;
		}
		out->type = GH_MCP_IN_RESPONSE;
		return GH_OK;
	}
	if (!cJSON_IsString(v) || !*v->valuestring) {
		rc = invalid(rpc_code, e, "\"method\" must be a non-empty string");
		goto fail;
	}
	out->method = v->valuestring;
	out->type = out->id ? GH_MCP_IN_REQUEST : GH_MCP_IN_NOTIFICATION;
	v = cJSON_GetObjectItemCaseSensitive(root, "params");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsObject(v)) {
			rc = invalid(rpc_code, e, "\"params\" must be an object");
			goto fail;
		}
		out->params = v;
	}
	meta = cJSON_GetObjectItemCaseSensitive(out->params, "_meta");
	if (cJSON_IsObject(meta)) {
		out->meta_version = gh_json_str(meta, GH_MCP_META_VERSION);
		out->meta_caps = cJSON_GetObjectItemCaseSensitive(meta, GH_MCP_META_CAPS);
		v = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
		if (id_ok(v))
			out->progress_token = v;
	}
	return GH_OK;
fail:
	cJSON_Delete(out->root);
	out->root = NULL;
	out->id = NULL;
	return rc;
}

enum gh_code gh_mcp_init_params(const struct gh_mcp_in *m, const char **version,
				const cJSON **caps, struct gh_err *e)
{
	const cJSON *c;

	*version = gh_json_str(m->params, "protocolVersion");
	*caps = NULL;
	if (!*version)
		return gh_err_set(e, GH_E_BADREQ, "params.protocolVersion: expected a string");
	c = cJSON_GetObjectItemCaseSensitive(m->params, "capabilities");
	if (c && !cJSON_IsObject(c))
		return gh_err_set(e, GH_E_BADREQ, "params.capabilities: expected an object");
	*caps = c;
	return GH_OK;
}

int gh_mcp_session_version(const char *v)
{
	return v && (!strcmp(v, GH_MCP_V20251125) || !strcmp(v, GH_MCP_V20250618));
}

const char *gh_mcp_negotiate(const char *asked)
{
	if (asked && !strcmp(asked, GH_MCP_V20250618))
		return GH_MCP_V20250618;
	return GH_MCP_V20251125;
}

enum gh_code gh_mcp_in_call_params(const struct gh_mcp_in *m, struct gh_mcp_call *out,
				struct gh_err *e)
{
	const cJSON *v;

	memset(out, 0, sizeof(*out));
	out->name = gh_json_str(m->params, "name");
	if (!out->name || !*out->name)
		return gh_err_set(e, GH_E_BADREQ, "params.name: expected the tool's name");
	v = cJSON_GetObjectItemCaseSensitive(m->params, "arguments");
	if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v))
		return gh_err_set(e, GH_E_BADREQ, "params.arguments: expected an object");
	out->args = v && !cJSON_IsNull(v) ? v : NULL;
	v = cJSON_GetObjectItemCaseSensitive(m->params, "requestState");
	if (v && !cJSON_IsString(v))
		return gh_err_set(e, GH_E_BADREQ, "params.requestState: expected a string");
	out->request_state = v ? v->valuestring : NULL;
	v = cJSON_GetObjectItemCaseSensitive(m->params, "inputResponses");
	if (v && !cJSON_IsObject(v))
		return gh_err_set(e, GH_E_BADREQ, "params.inputResponses: expected an object");
	out->input_responses = v;
	return GH_OK;
}

int gh_mcp_elicit_accepted(const cJSON *result)
{
	const char *action = gh_json_str(result, "action");
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");

	return action && !strcmp(action, "accept") &&
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(content, "approve"));
}

int gh_mcp_caps_elicit_form(const cJSON *caps)
{
	const cJSON *el = cJSON_GetObjectItemCaseSensitive(caps, "elicitation");

	if (!cJSON_IsObject(el))
		return 0;
	/* {} means form (the 2025-06-18 spelling); otherwise form must be named */
	return !el->child || cJSON_GetObjectItemCaseSensitive(el, "form") != NULL;
}

/* The Mcp-Name header's value: plain, or "=?base64?B64?=" of UTF-8. 1 when
 * it equals want. */
static int name_matches(const char *hdr, const char *want)
{
	static const char pre[] = "=?base64?", suf[] = "?=";
	size_t n = strlen(hdr), wl = strlen(want), bl;
	unsigned char buf[1024];

	if (n < sizeof(pre) - 1 + sizeof(suf) - 1 || strncmp(hdr, pre, sizeof(pre) - 1) ||
	    strcmp(hdr + n - (sizeof(suf) - 1), suf))
		return !strcmp(hdr, want);
	if (sodium_base642bin(buf, sizeof(buf), hdr + sizeof(pre) - 1,
			      n - (sizeof(pre) - 1) - (sizeof(suf) - 1), NULL, &bl, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0)
		return 0;
	return bl == wl && !memcmp(buf, want, wl);
}

int gh_mcp_check_modern(const struct gh_mcp_in *m, const char *method_hdr,
			const char *name_hdr, const char *version_hdr, int *rpc_code,
			struct gh_err *e)
{
	const char *want = NULL;

	*rpc_code = GH_MCP_HEADER_MISMATCH;
	if (version_hdr && m->meta_version && strcmp(version_hdr, m->meta_version)) {
		gh_err_set(e, GH_E_BADREQ, "MCP-Protocol-Version header \"%s\" disagrees with the "
			   "request's _meta protocol version \"%s\"", version_hdr, m->meta_version);
		return -1;
	}
	if (m->meta_version && strcmp(m->meta_version, GH_MCP_V2026)) {
		*rpc_code = GH_MCP_UNSUPPORTED_VERSION;
		gh_err_set(e, GH_E_BADREQ, "unsupported protocol version \"%s\"", m->meta_version);
		return -1;
	}
	/* notifications are exempt from the rest */
	if (m->type != GH_MCP_IN_REQUEST)
		return 0;
	if (!cJSON_IsObject(m->meta_caps)) {
		*rpc_code = GH_MCP_INVALID_PARAMS;
		gh_err_set(e, GH_E_BADREQ, "params._meta: \"%s\" is missing (an object)",
			   GH_MCP_META_CAPS);
		return -1;
	}
	if (!version_hdr) {
		gh_err_set(e, GH_E_BADREQ, "the MCP-Protocol-Version header is missing");
		return -1;
	}
	if (!method_hdr || strcmp(method_hdr, m->method)) {
		gh_err_set(e, GH_E_BADREQ, method_hdr ? "Mcp-Method header \"%s\" disagrees with "
							"the body's method \"%s\""
						      : "the Mcp-Method header is missing%s (the "
							"body's method is \"%s\")",
			   method_hdr ? method_hdr : "", m->method);
		return -1;
	}
	if (!strcmp(m->method, "tools/call") || !strcmp(m->method, "prompts/get"))
		want = gh_json_str(m->params, "name");
	else if (!strcmp(m->method, "resources/read"))
		want = gh_json_str(m->params, "uri");
	if (want && (!name_hdr || !name_matches(name_hdr, want))) {
		gh_err_set(e, GH_E_BADREQ, name_hdr ? "Mcp-Name header disagrees with the body "
						      "(\"%s\")"
						    : "the Mcp-Name header is missing (the body "
						      "names \"%s\")",
			   want);
		return -1;
	}
	return 0;
}

static cJSON *envelope(cJSON *id)
{
	cJSON *o = cJSON_CreateObject();

	if (!o) {
		cJSON_Delete(id);
		return NULL;
	}
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddItemToObject(o, "id", id ? id : cJSON_CreateNull());
	return o;
}

cJSON *gh_mcp_result(cJSON *id, cJSON *result)
{
	cJSON *o = envelope(id);

	if (!o || !result) {
		cJSON_Delete(o);
		cJSON_Delete(result);
		return NULL;
	}
	cJSON_AddItemToObject(o, "result", result);
	return o;
}

cJSON *gh_mcp_error(cJSON *id, int code, const char *message, cJSON *data)
{
	cJSON *o = envelope(id), *err;

	if (!o || !(err = cJSON_AddObjectToObject(o, "error"))) {
		cJSON_Delete(o);
		cJSON_Delete(data);
		return NULL;
	}
	cJSON_AddNumberToObject(err, "code", code);
	cJSON_AddStringToObject(err, "message", message ? message : "");
	if (data)
		cJSON_AddItemToObject(err, "data", data);
	return o;
}

cJSON *gh_mcp_notification(const char *method, cJSON *params)
{
	cJSON *o = cJSON_CreateObject();

	if (!o) {
		cJSON_Delete(params);
		return NULL;
	}
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddStringToObject(o, "method", method);
	if (params)
		cJSON_AddItemToObject(o, "params", params);
	return o;
}

cJSON *gh_mcp_request(const char *id, const char *method, cJSON *params)
{
	cJSON *o = gh_mcp_notification(method, params);

	if (o)
		cJSON_AddStringToObject(o, "id", id);
	return o;
}
