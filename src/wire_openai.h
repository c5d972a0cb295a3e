/*
 * wire_openai.h - the OpenAI chat completions wire, with no HTTP in it:
 * the request body into CoreMessages and client tools, which of a resent
 * conversation goes to the engine, and the response shapes (chat.completion,
 * chat.completion.chunk, tool_calls, usage).
 *
 * OpenAI clients resend the whole conversation every time: a request that
 * ends with role "tool" messages continues the run waiting for them
 * (gh_openai_trailing_results); a pinned thread that already exists gets
 * what follows the last assistant message (gh_openai_after_answer); the
 * rest is the whole conversation with earlier tool rounds told in words
 * (gh_openai_fold_tool_rounds).
 *
 * Pure functions over cJSON values; safe from any thread.
 */
#ifndef GH_WIRE_OPENAI_H
#define GH_WIRE_OPENAI_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "run.h"

/* A chat completion request, parsed. */
struct gh_openai_req {
	const char *model;          /* the agent's id (borrowed from the body) */
	int stream;
	int include_usage;          /* stream_options.include_usage */
	const char *user;           /* borrowed; NULL when absent */
	cJSON *client_defs;         /* owned: "tools" (none when tool_choice is "none") */
	cJSON *messages;            /* owned: every message as a CoreMessage, one for one */
};

/* Parses body (kept alive by the caller while out is in use): model,
 * stream, stream_options, n, user, tools, tool_choice, messages. GH_E_BADREQ
 * naming the field. Free out with gh_openai_req_free (also after a
 * failure). */
enum gh_code gh_openai_parse(const cJSON *body, struct gh_openai_req *out, struct gh_err *e);
void gh_openai_req_free(struct gh_openai_req *q);

/* The fields every OpenAI-style request (Chat Completions, Responses)
 * starts with: model (required, an agent's id; *model borrowed from body)
 * and stream (true or false; absent is false). GH_E_BADREQ naming the
 * field. */
enum gh_code gh_openai_model_stream(const cJSON *body, const char **model, int *stream,
				    struct gh_err *e);
/* Makes msg (an empty object) the CoreMessage that answers tool call id:
 * role "tool" with one tool-result part whose result is text, as JSON when
 * it parses, else as a string. GH_E_NOMEM (msg then partly filled). */
enum gh_code gh_openai_tool_result(cJSON *msg, const char *id, const char *text,
				   struct gh_err *e);

/* A thread or resource id from a header or "user": 1..GH_NAME_MAX bytes
 * without control characters (it goes back out in a response header). */
enum gh_code gh_openai_check_id(const char *v, const char *field, struct gh_err *e);

/* The thread "user" names: "user" is unique within one owner and one agent,
 * so the thread is derived from all three (thread ids are per owner; the
 * owner stays in the hash so existing threads keep theirs): "usr_" + 24
 * hex digits. */
void gh_openai_user_thread(const char *owner, const char *agent, const char *user,
			   char out[GH_ID_MAX]);

/* The trailing role "tool" messages of all (a continuation), or NULL when
 * all does not end with one. Caller frees. */
cJSON *gh_openai_trailing_results(const cJSON *all);
/* What follows the last assistant message, without tool messages (an
 * empty array when nothing does). Caller frees; NULL on OOM. */
cJSON *gh_openai_after_answer(const cJSON *all);
/* The conversation with earlier tool rounds told in words: each call and
 * its result become a line of the assistant's text, consecutive assistant
 * texts merged, tool messages dropped. Caller frees; NULL on OOM. */
cJSON *gh_openai_fold_tool_rounds(const cJSON *all);

/* ---- answers ---- */

/* OpenAI's finish_reason for the engine's. */
const char *gh_openai_finish(enum gh_run_finish f);
/* {id:"chatcmpl-<run>", object, created, model, system_fingerprint:null} */
cJSON *gh_openai_envelope(const char *run_id, const char *object, int64_t created,
			  const char *model);
/* {prompt_tokens, completion_tokens, total_tokens} */
cJSON *gh_openai_usage(const struct gh_run_usage *u);
/* tool_calls for pending client calls [{toolCallId, toolName, args}], named
 * as the client declared them in client_defs; indexed adds "index". */
cJSON *gh_openai_tool_calls(const cJSON *calls, const cJSON *client_defs, int indexed);
/* The name the client declared in client_defs for a (normalised) client
 * tool name; name itself when it declared none. Borrowed. */
const char *gh_openai_client_name(const cJSON *client_defs, const char *name);

#endif
