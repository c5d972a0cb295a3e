/*
 * wire_mcp.h - the MCP server wire (JSON-RPC 2.0 over Streamable HTTP),
 * with no HTTP in it: one posted message told apart (request,
 * notification, a response from the client, or something that is none of
 * them), the per-request `_meta` envelope of the 2026-07-28 revision, the
 * params of the methods gatehouse serves (initialize, tools/call, the
 * answer to an elicitation), the 2026-07-28 header checks (Mcp-Method,
 * Mcp-Name, MCP-Protocol-Version against the body), and the JSON-RPC
 * envelopes gatehouse answers with.
 *
 * Pure functions over bytes and cJSON values; safe from any thread.
 */
#ifndef GH_WIRE_MCP_H
#define GH_WIRE_MCP_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "err.h"

#define GH_MCP_PARSE_ERROR -32700
#define GH_MCP_INVALID_REQUEST -32600
#define GH_MCP_METHOD_NOT_FOUND -32601
#define GH_MCP_INVALID_PARAMS -32602
#define GH_MCP_INTERNAL -32603
#define GH_MCP_HEADER_MISMATCH -32020          /* 2026-07-28: a header disagrees with the body */
#define GH_MCP_UNSUPPORTED_VERSION -32022      /* 2026-07-28: data {supported, requested} */

/* The revisions gatehouse speaks, newest first. */
#define GH_MCP_V2026 "2026-07-28"
#define GH_MCP_V20251125 "2025-11-25"
#define GH_MCP_V20250618 "2025-06-18"

/* The per-request envelope keys of 2026-07-28 (in params._meta). */
#define GH_MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define GH_MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define GH_MCP_META_CLIENT "io.modelcontextprotocol/clientInfo"
#define GH_MCP_META_SERVER "io.modelcontextprotocol/serverInfo"

enum gh_mcp_in_type {
	GH_MCP_IN_REQUEST,        /* method and id */
	GH_MCP_IN_NOTIFICATION,   /* method, no id */
	GH_MCP_IN_RESPONSE        /* result or error, with id: a client's answer */
};

/* One message a client posted. Everything but root is borrowed from root. */
struct gh_mcp_in {
	enum gh_mcp_in_type type;
	cJSON *root;                    /* owned */
	const cJSON *id;                /* string or number; NULL for a notification */
	const char *method;             /* requests and notifications */
	const cJSON *params;            /* an object, or NULL when absent */
	const cJSON *result;            /* responses */
	const cJSON *error;             /* responses */
	/* params._meta */
	const char *meta_version;       /* the 2026-07-28 envelope's protocol version */
	const cJSON *meta_caps;         /* ... its client capabilities */
	const cJSON *progress_token;    /* progressToken (string or number) */
};

/* Parses one posted body. GH_OK: *out filled (free with gh_mcp_in_clear).
 * Either way *id_out is a copy of the id when one could be read (caller
 * frees).
 * Otherwise *rpc_code is the JSON-RPC error to answer (GH_MCP_PARSE_ERROR
 * for bytes that are no JSON, GH_MCP_INVALID_REQUEST for JSON that is no
 * single JSON-RPC 2.0 message: a batch, a wrong "jsonrpc", an id that is
 * neither a string nor an integer, a method that is not a string, params
 * that are no object, a response without result or error) and *id_out a
 * copy of the message's id when it could be read (caller frees; NULL:
 * answer with a null id); e says what is wrong. */
enum gh_code gh_mcp_in_parse(const char *body, size_t len, struct gh_mcp_in *out,
			     int *rpc_code, cJSON **id_out, struct gh_err *e);
void gh_mcp_in_clear(struct gh_mcp_in *m);

/* initialize: the version the client asks for and its capabilities
 * (borrowed; caps may be NULL). GH_E_BADREQ (invalid params) naming the
 * field. */
enum gh_code gh_mcp_init_params(const struct gh_mcp_in *m, const char **version,
				const cJSON **caps, struct gh_err *e);

/* The revision to answer initialize with: the client's when gatehouse
 * speaks it (2025-11-25, 2025-06-18), else the newest session revision. */
const char *gh_mcp_negotiate(const char *asked);

/* 1 for a revision gatehouse speaks with sessions (2025-*). */
int gh_mcp_session_version(const char *v);

/* tools/call: the tool's name and its arguments (borrowed; an empty
 * object when absent); the 2026-07-28 retry fields requestState and
 * inputResponses when present (else NULL). GH_E_BADREQ naming the field. */
struct gh_mcp_call {
	const char *name;
	const cJSON *args;
	const char *request_state;
	const cJSON *input_responses;
};
enum gh_code gh_mcp_in_call_params(const struct gh_mcp_in *m, struct gh_mcp_call *out,
				struct gh_err *e);

/* An elicitation answer (the result of elicitation/create, or one entry
 * of inputResponses): 1 when it accepts with content {approve: true}, 0
 * otherwise (declined, cancelled, approve false, or malformed). */
int gh_mcp_elicit_accepted(const cJSON *result);

/* 1 when the client declared form elicitation in capabilities (an
 * "elicitation" object, empty or with "form"). */
int gh_mcp_caps_elicit_form(const cJSON *caps);

/* 2026-07-28 checks: the envelope's version, and for a request (not a
 * notification) its client capabilities and the headers, against the
 * body. method_hdr, name_hdr and version_hdr are the Mcp-Method, Mcp-Name
 * and MCP-Protocol-Version header values (NULL when absent); Mcp-Name may
 * be in the
 * "=?base64?...?=" form. 0 when they agree; else -1 with *rpc_code
 * (GH_MCP_HEADER_MISMATCH, GH_MCP_UNSUPPORTED_VERSION or
 * GH_MCP_INVALID_PARAMS for a malformed envelope) and why in e. */
int gh_mcp_check_modern(const struct gh_mcp_in *m, const char *method_hdr,
			const char *name_hdr, const char *version_hdr, int *rpc_code,
			struct gh_err *e);

/* Envelopes. Each takes ownership of what it is given (id, result, data;
 * NULL id is a JSON null) and returns the message, or NULL out of memory. */
cJSON *gh_mcp_result(cJSON *id, cJSON *result);
cJSON *gh_mcp_error(cJSON *id, int code, const char *message, cJSON *data);
cJSON *gh_mcp_notification(const char *method, cJSON *params);
cJSON *gh_mcp_request(const char *id, const char *method, cJSON *params);

#endif
