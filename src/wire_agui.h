/*
 * wire_agui.h - the AG-UI wire (the protocol of TanStack AI's ChatClient,
 * CopilotKit and @ag-ui/client), with no HTTP in it: a RunAgentInput body
 * into what the engine runs, and the events and interrupts gatehouse
 * answers with (AG-UI 1.0 event schemas, field for field).
 *
 * AG-UI clients resend the whole conversation every time. A request whose
 * messages end with role "tool" messages continues the run waiting for
 * those calls (only the results go to the engine); any other request is
 * the whole conversation, earlier tool rounds told in words, of which the
 * thread already holds everything up to the last assistant message
 * (history_len). A request with "resume" entries answers the interrupts
 * of a run that waits on approvals: each entry names an interrupt (the
 * approval's id) and carries {approved, reason?, editedArgs?}.
 *
 * Pure functions over cJSON values; safe from any thread.
 */
#ifndef GH_WIRE_AGUI_H
#define GH_WIRE_AGUI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"

#define GH_AGUI_RESUME_MAX 32         /* resume entries one request may carry */
#define GH_AGUI_REASON_MAX 2000       /* a decline's reason, in bytes */

/* One answer to an interrupt. Everything is borrowed from the body. */
struct gh_agui_resume {
	const char *interrupt_id;
	int cancelled;                /* status "cancelled": declined */
	int approve;                  /* payload.approved (0 when cancelled) */
	const char *reason;           /* payload.reason, or NULL */
	const cJSON *edited_args;     /* payload.editedArgs (an object), or NULL */
};

/* A RunAgentInput, parsed. */
struct gh_agui_req {
	const char *thread_id;        /* borrowed from the body */
	const char *run_id;           /* borrowed */
	const char *parent_run_id;    /* borrowed; NULL when absent */
	cJSON *client_defs;           /* owned: "tools" as client tool definitions */
	cJSON *messages;              /* owned: what goes to the engine (NULL with resume
				       * entries and no messages) */
	int continuation;             /* messages are the trailing tool results */
	int history_len;              /* of messages, those the thread already holds */
	struct gh_agui_resume resume[GH_AGUI_RESUME_MAX];
	size_t nresume;
};

/* Parses body (kept alive by the caller while out is in use): threadId,
 * runId, parentRunId, messages, tools, context (told to the model as a
 * system message), resume; state and forwardedProps are accepted and not
 * used. GH_E_BADREQ naming the field. Free out with gh_agui_req_free (also
 * after a failure). */
enum gh_code gh_agui_parse(const cJSON *body, struct gh_agui_req *out, struct gh_err *e);
void gh_agui_req_free(struct gh_agui_req *q);

/* The name the client declared a tool under (client_defs' origName), or
 * name itself. Borrowed from client_defs or name. */
const char *gh_agui_client_name(const cJSON *client_defs, const char *name);

/* ---- answers ---- */

/* An event {type, timestamp} (Unix ms). Caller frees; NULL on OOM. */
cJSON *gh_agui_event(const char *type, int64_t now_ms);

/* A call waiting on an approval, as an AG-UI Interrupt:
 * {id: approval_id, reason, message, toolCallId, expiresAt, responseSchema
 * (caller approvals: {approved, reason?, editedArgs?}), metadata: {kind:
 * "approval", toolName, input, approvalId, argsDigest, approver, rule}}.
 * reason is "approval_required" when the caller decides, else
 * "admin_approval_pending". Strings are copied. Caller frees. */
struct gh_agui_pending {
	const char *approval_id;
	const char *tool_call_id;
	const char *tool_name;        /* as the client knows it */
	const cJSON *args;
	const char *args_sha256;
	const char *approver;         /* "caller" or "admin" */
	const char *rule;             /* may be NULL */
	int64_t expires_at;           /* Unix ms; 0 = none */
};
cJSON *gh_agui_interrupt(const struct gh_agui_pending *p);

#endif
