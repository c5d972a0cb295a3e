/*
 * wire_anthropic.h - the Anthropic Messages wire, with no HTTP in it: a
 * request body into CoreMessages, client tools and what gatehouse passes
 * through untouched; the answer's shapes (message, content blocks, stop
 * reasons, usage, errors); the model name to agent mapping; the session
 * that names a thread.
 *
 * Messages clients (Claude Code, the Anthropic SDKs) resend the whole
 * conversation. A request whose last user message carries tool_result
 * blocks continues the run waiting for those calls (only the results go to
 * the engine); any other request is the whole conversation, earlier tool
 * rounds told in words for providers that are not Anthropic. Each
 * CoreMessage keeps the message as the client sent it under "anthropic",
 * so an Anthropic upstream gets it byte for byte (thinking blocks and
 * their signatures, cache_control, block types gatehouse does not know, a
 * system-role message); the system prompt is a system CoreMessage marked
 * "anthropic": false, as an Anthropic upstream gets "system" itself among
 * the passed-through fields.
 *
 * Pure functions over cJSON values; safe from any thread.
 */
#ifndef GH_WIRE_ANTHROPIC_H
#define GH_WIRE_ANTHROPIC_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"
#include "policy.h"
#include "run.h"

/* A Messages request, parsed. */
struct gh_anthropic_req {
	const char *model;          /* borrowed from the body */
	int stream;
	int64_t max_tokens;         /* 0 when absent (count_tokens) */
	const char *user_id;        /* metadata.user_id, borrowed; NULL when absent */
	cJSON *client_defs;         /* owned: "tools" as client tool definitions */
	cJSON *skipped_tools;       /* owned: names of tools with no input_schema (the
				     * API's own server tools), not offered */
	cJSON *messages;            /* owned: the CoreMessages for the engine */
	int continuation;           /* messages are the trailing tool results */
	int history_len;            /* messages up to the last assistant message */
	cJSON *passthrough;         /* owned: every field gatehouse does not interpret */
};

/* Parses body (kept alive by the caller while out is in use). counting:
 * count_tokens, where max_tokens is not required. GH_E_BADREQ naming the
 * field. Free out with gh_anthropic_req_free (also after a failure). */
enum gh_code gh_anthropic_parse(const cJSON *body, int counting, struct gh_anthropic_req *out,
				struct gh_err *e);
void gh_anthropic_req_free(struct gh_anthropic_req *q);

/* The agent a model name asks for: the agent with that id, else the
 * first (in config order) whose "models" globs match it and that p
 * allows, else the first whose globs match. NULL when none. */
const struct gh_agent_conf *gh_anthropic_agent(const struct gh_config *cfg,
					       const struct gh_policy_conf *p, const char *model);

/* The thread a session names: the X-Claude-Code-Session-Id header, else
 * metadata.user_id (its session_id when it is JSON holding one, or the
 * part after "_session_"), checked (1..GH_NAME_MAX bytes, no control
 * characters) or, when it does not pass, "ses_" + a digest of it. "" when
 * neither was sent. */
void gh_anthropic_session_thread(const char *header, const char *user_id,
				 char out[GH_NAME_MAX + 1]);

/* A rough token count of a request body (about 4 bytes of text per
 * token, as gatehouse has no tokenizer): count_tokens when the upstream
 * cannot be asked. */
int64_t gh_anthropic_estimate_tokens(const cJSON *body);

/* ---- answers ---- */

/* The API's stop_reason for the engine's finish. */
const char *gh_anthropic_stop_reason(enum gh_run_finish f);
/* The API's error type for an HTTP status (400 invalid_request_error, 401
 * authentication_error, 403 permission_error, 404 not_found_error, 413
 * request_too_large, 429 rate_limit_error, 529/503 overloaded_error, else
 * api_error). */
const char *gh_anthropic_error_type(int status);
/* {"type":"error","error":{"type","message"}}. Caller frees. */
cJSON *gh_anthropic_error(const char *type, const char *message);
/* {"input_tokens", "output_tokens"}. Caller frees. */
cJSON *gh_anthropic_usage(const struct gh_run_usage *u);
/* A tool_use block for a pending client call {toolCallId, toolName, args},
 * named as the client declared it in client_defs. Caller frees. */
cJSON *gh_anthropic_tool_use(const cJSON *call, const cJSON *client_defs);

#endif
