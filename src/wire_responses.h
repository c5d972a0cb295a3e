/*
 * wire_responses.h - the OpenAI Responses API wire, with no HTTP in it:
 * a request body (input items, instructions, function tools, tool_choice,
 * previous_response_id, store) into CoreMessages and client tools, which
 * of a conversation goes to the engine, and the answer's shapes (the
 * Response object, its output items, usage).
 *
 * Input items become CoreMessages: a message (text parts only) one message,
 * function_call items a tool-call part of the assistant message before
 * them, function_call_output a role "tool" result. reasoning and
 * mcp_approval_request items are read and not passed on (the providers
 * gatehouse speaks to carry no such items); an mcp_approval_response
 * that ends the input is the client's decision on that approval (earlier
 * ones are history). Tools of types other than
 * "function" (hosted tools, namespaces, custom tools) are not run by
 * gatehouse: they are left out and named in the parsed request, so the
 * surface can log them.
 *
 * Pure functions over cJSON values; safe from any thread.
 */
#ifndef GH_WIRE_RESPONSES_H
#define GH_WIRE_RESPONSES_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "run.h"

#define GH_RESPONSES_SKIPPED_MAX 256

/* A Responses API request, parsed. Borrowed members point into the body,
 * which the caller keeps alive while the request is in use. */
struct gh_responses_req {
	const char *model;             /* the agent's id */
	int stream;
	int store;                     /* default 1 */
	const char *previous_id;       /* previous_response_id or NULL */
	const char *instructions;      /* or NULL */
	const cJSON *tools;            /* as sent (echoed in the answer), or NULL */
	const cJSON *tool_choice;      /* as sent, or NULL */
	const cJSON *metadata;         /* as sent, or NULL */
	cJSON *client_defs;            /* owned: the function tools (none with
					* tool_choice "none") */
	cJSON *input;                  /* owned: the input items as CoreMessages */
	/* the input ends with an mcp_approval_response: its decision */
	const char *approval_id;       /* approval_request_id, or NULL */
	int approve;
	const char *approval_reason;   /* "reason", or NULL */
	char skipped[GH_RESPONSES_SKIPPED_MAX]; /* tool types not run, comma separated */
};

/* Parses body: model, input, instructions, tools, tool_choice, stream,
 * store, previous_response_id, metadata (other members are accepted and not
 * acted on). GH_E_BADREQ naming the field. Free out with
 * gh_responses_req_free (also after a failure). */
enum gh_code gh_responses_parse(const cJSON *body, struct gh_responses_req *out,
				struct gh_err *e);
void gh_responses_req_free(struct gh_responses_req *q);

/* Responses items (input items, or a stored answer's output) as
 * CoreMessages, appended to out. where names the array in errors
 * ("input"). */
enum gh_code gh_responses_items(const cJSON *items, const char *where, cJSON *out,
				struct gh_err *e);

/* What goes to the engine for a conversation (prev: a stored response's,
 * or NULL; then this request's input): when it ends with tool results,
 * those results (*continuation = 1: the waiting run goes on); otherwise
 * the instructions as a system message and the whole conversation with
 * earlier tool rounds told in words. *out: caller frees. */
enum gh_code gh_responses_conversation(const cJSON *prev, const cJSON *input,
				       const char *instructions, cJSON **all, cJSON **out,
				       int *continuation, struct gh_err *e);

/* ---- answers ---- */

/* {type:"output_text", text, annotations:[], logprobs:[]} */
cJSON *gh_responses_text_part(const char *text);
/* A message item; with done, status "completed" and the text as its one
 * part, else "in_progress" and no parts. */
cJSON *gh_responses_message_item(const char *id, const char *text, int done);
/* A reasoning item: the model's reasoning as its one summary part (with
 * done; none before), status like a message's. */
cJSON *gh_responses_reasoning_item(const char *id, const char *text, int done);
/* {type:"summary_text", text} */
cJSON *gh_responses_summary_part(const char *text);
/* A function_call item for a client call {toolCallId, toolName, args},
 * named as the client declared it; arguments "" unless done. */
cJSON *gh_responses_call_item(const char *id, const cJSON *call, const cJSON *client_defs,
			      int done);
/* The call's arguments as JSON text ("{}" when it has none). Caller frees. */
char *gh_responses_call_args(const cJSON *call);
/* An mcp_approval_request item for a call waiting on approval id. */
cJSON *gh_responses_approval_item(const char *id, const char *name, const cJSON *args);
/* {input_tokens, input_tokens_details, output_tokens,
 * output_tokens_details, total_tokens} */
cJSON *gh_responses_usage(const struct gh_run_usage *u);

/* The Response object. status: "in_progress", "completed", "incomplete"
 * or "failed"; output taken (NULL: []); usage NULL until known;
 * incomplete ("max_output_tokens") and error ({code, message}, taken) or
 * NULL. */
cJSON *gh_responses_object(const char *id, int64_t created_at, const char *model,
			   const struct gh_responses_req *q, const char *status, cJSON *output,
			   const struct gh_run_usage *usage, const char *incomplete,
			   cJSON *error);

#endif
