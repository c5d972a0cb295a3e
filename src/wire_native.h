/*
 * wire_native.h - the native agent API's wire shapes (Mastra client-js
 * compatible), with no HTTP in them: request bodies into a run request,
 * engine events into stream chunks, results and stored runs into JSON.
 *
 * The chunk vocabulary is Mastra's: {"type", "runId", "from": "AGENT",
 * "payload"} with types start, step-start, text-delta, tool-call,
 * tool-result, tool-call-approval, step-finish, finish and error. The run's
 * live topic (GET /api/runs/:id/events) speaks it too, so the engine uses
 * gh_wire_native_type and gh_wire_native_payload for what it publishes.
 *
 * Pure functions; safe from any thread.
 */
#ifndef GH_WIRE_NATIVE_H
#define GH_WIRE_NATIVE_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "run.h"

/* A generate/stream body parsed into a run request. */
struct gh_native_req {
	struct gh_run_request rq;   /* points into the fields below and the body */
	cJSON *messages;            /* owned */
	cJSON *client_defs;         /* owned */
	const char *thread_id;      /* borrowed from the body */
	const char *resource_id;
	const char *run_id;         /* the client's name for the run */
	char named_run[GH_ID_MAX];  /* the id it names (gh_run_named_id) */
	int max_steps;
};

/* Parses a generate/stream body (kept alive by the caller while out is in
 * use) for who and agent a. GH_E_BADREQ naming the field. Free with
 * gh_native_req_free (also after a failure). */
enum gh_code gh_native_parse(const cJSON *body, const struct gh_principal *who,
			     const struct gh_agent_conf *a, struct gh_native_req *out,
			     struct gh_err *e);
void gh_native_req_free(struct gh_native_req *n);

/* The chunk type of an event kind; NULL for kinds the native API does not
 * stream (reasoning, tool call pieces). */
const char *gh_wire_native_type(enum gh_run_event_kind k);
/* Appends an event's payload object. A GH_BUF_* code. */
int gh_wire_native_payload(const struct gh_run_event *ev, struct gh_buf *b);
/* Appends the whole chunk (envelope and payload); a GH_BUF_* code. Nothing
 * is appended for a kind without a type (returns GH_BUF_OK, b untouched). */
int gh_wire_native_chunk(const struct gh_run_event *ev, struct gh_buf *b);
/* Appends a chunk's envelope up to its payload:
 * {"type":T,"runId":R,"from":"AGENT","payload": (the caller closes it). */
int gh_wire_native_envelope(const char *type, const char *run_id, struct gh_buf *b);
/* An error chunk's payload for a failure outside the run's own events:
 * {error:{code, message, status}}; status is the HTTP status it maps to. */
int gh_wire_native_error(enum gh_code code, const char *msg, int status, struct gh_buf *b);

/* The generate response: {text, finishReason, toolCalls, toolResults,
 * response:{id, messages}, usage, runId, threadId, resourceId, status,
 * approvals?}. Caller frees. */
cJSON *gh_wire_native_result(const struct gh_run_result *res);

/* The same shape for a stored run (an approval decided elsewhere and
 * carried out in the background), with "error" when it failed. */
cJSON *gh_wire_native_view_result(const struct gh_run_view *v);

/* A run as GET /api/runs/:id shows it: {id, status, agentId, threadId,
 * resourceId, keyId, createdAt, updatedAt, pending, approvals, output,
 * error, usage}. Caller frees. */
cJSON *gh_wire_native_run(const struct gh_run_view *v);

/* A run that waits on someone, as Mastra 1.x's listSuspendedRuns shows it:
 * {runId, status "suspended", threadId, resourceId, suspendedAt,
 * toolCalls:[{toolCallId, toolName, args, requiresApproval,
 * suspendPayload:{waitingOn "approval"|"client", approvalId, approver,
 * argsSha256, expiresAt}}]}. Caller frees. */
cJSON *gh_wire_native_suspended_run(const struct gh_run_view *v);

#endif
