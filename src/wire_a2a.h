/*
 * wire_a2a.h - the A2A wire, with no HTTP in it: both dialects clients
 * speak (A2A 1.0, protobuf-JSON shapes: TASK_STATE_*, ROLE_*, parts told
 * apart by their member; and 0.3: kind:"task", "completed", parts with
 * kind), incoming messages, tasks as each dialect spells them, and a task
 * brought up to date from the view of its run.
 *
 * Tasks are stored in the 1.0 shape (store_a2a.h). Client tool definitions
 * ride in a DataPart {tools:[OpenAI function tools]} (metadata type
 * "tool-definitions"); the client's results in a DataPart
 * {results:[{toolCallId, result, isError?}]} (metadata type "tool-results");
 * calls handed to the client come back in a DataPart {toolCalls:[...]}
 * (metadata type "tool-calls") and each call waiting on a person in one
 * {approval:{id, toolCallId, toolName, args, approver, status, expiresAt}}
 * (metadata type "approval-required").
 *
 * Pure functions over cJSON values and task structs; safe from any thread.
 */
#ifndef GH_WIRE_A2A_H
#define GH_WIRE_A2A_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "run.h"
#include "store_a2a.h"

/* JSON-RPC and A2A error codes. */
#define GH_RPC_PARSE_ERROR -32700
#define GH_RPC_INVALID_REQUEST -32600
#define GH_RPC_METHOD_NOT_FOUND -32601
#define GH_RPC_INVALID_PARAMS -32602
#define GH_RPC_INTERNAL -32603
#define GH_A2A_TASK_NOT_FOUND -32001
#define GH_A2A_NOT_CANCELABLE -32002
#define GH_A2A_PUSH_NOT_SUPPORTED -32003
#define GH_A2A_UNSUPPORTED -32004
#define GH_A2A_CONTENT_TYPE -32005
#define GH_A2A_EXTENDED_CARD -32007
#define GH_A2A_VERSION -32009

/* The extension under which client tools ride in DataParts. */
#define GH_A2A_EXT_TOOLS_URI "urn:gatehouse:a2a:client-tools:v1"
#define GH_A2A_EXT_TOOLS_DESC                                                                       \
	"Client tools. Declare tools in a DataPart {\"tools\": [OpenAI function tools]} with "  \
	"metadata {\"type\": \"tool-definitions\"}. Calls the model makes to them come back "  \
	"with the task in input-required as a DataPart {\"toolCalls\": [{toolCallId, toolName, " \
	"args}]} (metadata type \"tool-calls\"); answer on the same task with a DataPart "     \
	"{\"results\": [{toolCallId, result, isError?}]} (metadata type \"tool-results\"). A "  \
	"call that needs a person's approval shows as a DataPart {\"approval\": {id, "         \
	"toolName, args, approver}} (metadata type \"approval-required\")."

enum gh_a2a_dialect { GH_A2A_V03, GH_A2A_V10 };

/* The JSON-RPC code for a gatehouse error. */
int gh_a2a_rpc_code(enum gh_code code);
/* 0 for "0.3" and "1.0" (patch ignored), -1 otherwise. */
int gh_a2a_version_supported(const char *v);

/* ---- incoming ---- */

/* params.message of a send, either dialect. */
struct gh_a2a_incoming {
	cJSON *stored;              /* the message as stored (1.0 shape; owned) */
	char *text;                 /* its text for the model (owned), NULL when none */
	cJSON *client_defs;         /* from a tool-definitions DataPart (owned) or NULL */
	const cJSON *results;       /* array from a tool-results DataPart (borrowed) */
	const char *task_id;        /* borrowed from params */
	const char *context_id;
	const char *resource_id;
};

/* Parses params.message into in (borrowing from params). Returns 0, or the
 * JSON-RPC error code with e filled. Free in with gh_a2a_incoming_free
 * either way. */
int gh_a2a_parse_message(const cJSON *params, struct gh_a2a_incoming *in, struct gh_err *e);
void gh_a2a_incoming_free(struct gh_a2a_incoming *in);

/* historyLength of obj (GetTask params, send configuration): -1 when
 * absent. Returns 0 or GH_RPC_INVALID_PARAMS (e names where). */
int gh_a2a_history_len(const cJSON *obj, const char *where, int64_t *out, struct gh_err *e);

/* The CoreMessages carrying the client's tool results to the engine.
 * Caller frees; NULL on OOM. */
cJSON *gh_a2a_results_messages(const cJSON *results);

/* ---- tasks on the wire ---- */

const char *gh_a2a_state_wire(const char *state, enum gh_a2a_dialect d);
int gh_a2a_terminal(const char *state);
/* A stored part (1.0 shape) as the dialect spells it. Caller frees. */
cJSON *gh_a2a_part_out(const cJSON *p, enum gh_a2a_dialect d);
/* {state, message?, timestamp}. Caller frees. */
cJSON *gh_a2a_status_out(const struct gh_a2a_task *t, enum gh_a2a_dialect d);
/* The task; history_len < 0 = all of it, else the newest history_len
 * messages. Caller frees. */
cJSON *gh_a2a_task_out(const struct gh_a2a_task *t, enum gh_a2a_dialect d,
		       int64_t history_len);
/* {text}. Caller frees. */
cJSON *gh_a2a_text_part(const char *text);

/* ---- tasks and their runs ---- */

/* Sets t's state and status message (taken; NULL = none); a message also
 * goes into the history. */
void gh_a2a_task_set(struct gh_a2a_task *t, const char *state, cJSON *status_message);
/* The failure of t as its status message: a text part and a DataPart
 * {error:{code, message}}. Caller frees. */
cJSON *gh_a2a_error_message(const struct gh_a2a_task *t, const char *code, const char *msg);
/* The status message of a task whose client went away mid-run. */
cJSON *gh_a2a_gone_message(const struct gh_a2a_task *t);
/* The artifact id for the text of step `step` of run_id. Streaming uses
 * the same ids, so the stored artifact is the one the stream built. */
void gh_a2a_artifact_id(const char *run_id, int64_t step, char *out, size_t cap);
/* The task state a run in status s shows as. */
const char *gh_a2a_state_of_run(enum gh_run_status s);
/* Brings t to where its run v is: completed (answer as artifact and agent
 * message), input-required (what it waits for), failed, canceled or
 * working. */
void gh_a2a_task_sync(struct gh_a2a_task *t, const struct gh_run_view *v);
/* What a task in input-required waits for, for a message that did not
 * bring it. */
void gh_a2a_describe_wait(const struct gh_a2a_task *t, char *out, size_t cap);
/* A copy of t's JSON and state (to restore it). -1 on OOM. */
int gh_a2a_task_copy(const struct gh_a2a_task *t, struct gh_a2a_task *out);

#endif
