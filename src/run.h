/*
 * run.h - the run engine: one agent turn, end to end.
 *
 * Given an agent, a principal and the client's messages, the engine loads
 * the thread, builds the tool set (memory + server + client tools), calls
 * the model, and for every tool call the model emits passes the policy gate
 * (allowlist -> rate limit -> approval), writes the audit row (committed
 * before anything is returned; if it cannot be written the tool does not
 * run), then runs the server tool, hands the client tool back, or suspends
 * for approval. It loops until the model answers, max steps, or a call
 * must wait; then it persists messages and run state in one transaction.
 *
 * A run waiting on client tools is continued by a later request carrying
 * {role:'tool', content:[{type:'tool-result', toolCallId, ...}]}: results
 * are matched to the run by toolCallId alone.
 *
 * The engine knows nothing about HTTP. It runs on the calling thread; many
 * runs may proceed at once on different threads.
 */
#ifndef GH_RUN_H
#define GH_RUN_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "app.h"
#include "err.h"
#include "policy.h"
#include "util.h"

/* Where a run's progress goes while it happens (streaming surfaces). Both
 * callbacks are optional. */
struct gh_run_sink {
	/* One event in Mastra's chunk vocabulary: "start", "step-start",
	 * "text-delta", "tool-call", "tool-result", "tool-call-approval",
	 * "step-finish", "finish", "error". payload is borrowed. Return nonzero
	 * when the client is gone: the run is cancelled. */
	int (*event)(void *ud, const char *run_id, const char *type, const cJSON *payload);
	/* Called at least every 50 ms while the run waits on an upstream
	 * (with wake_fd: see there); nonzero cancels (client disconnected). */
	int (*tick)(void *ud);
	void *ud;
	/* Optional: the client's connection (> 0; 0 = unknown). While the run
	 * waits on a model, tick then runs when the client sends or hangs up,
	 * and otherwise every tick_ms, rather than every 50 ms. */
	int wake_fd;
	int64_t tick_ms;
	/* Optional: a "text-delta" as its text (len bytes, borrowed) rather
	 * than as the payload {"id":"0","text":...}, so a stream's most
	 * frequent event builds no JSON tree. When set, event() never sees
	 * text-delta. Same return rule as event(). */
	int (*text)(void *ud, const char *run_id, const char *text, size_t len);
};

struct gh_run_request {
	const struct gh_principal *who;
	const struct gh_agent_conf *agent;
	const char *thread_id;       /* NULL: a new thread (when memory is enabled) */
	const char *resource_id;     /* NULL: "default" */
	const char *run_id;          /* NULL: generated (a client's runId goes through
				      * gh_run_named_id first) */
	const char *thread_title;    /* for a new thread */
	const cJSON *messages;       /* the client's CoreMessages (normalised); borrowed */
	const cJSON *client_defs;    /* from gh_tools_client_defs (may be NULL); borrowed */
	int max_steps;               /* 0: the agent's; never above the agent's */
	int stream;                  /* ask providers to stream deltas */
	int stateless;               /* no thread: messages are the whole conversation
				      * (clients that resend history, e.g. OpenAI's) */
	const char *surface;         /* "native", "openai", "a2a": recorded in audit detail */
};

struct gh_run_result {
	char run_id[GH_ID_MAX];
	char thread_id[GH_NAME_MAX + 1];   /* "" when the run has no thread */
	char resource_id[GH_NAME_MAX + 1];
	char status[16];                   /* completed | waiting | suspended */
	const char *finish_reason;         /* stop | length | tool-calls | suspended |
					    * max-steps | content-filter */
	char *text;                        /* the last step's text */
	cJSON *tool_calls;                 /* last step's calls [{toolCallId, toolName, args, source}] */
	cJSON *tool_results;               /* last step's results [{toolCallId, toolName, result, isError}] */
	cJSON *pending;                    /* client calls to run [{toolCallId, toolName, args}] */
	cJSON *approvals;                  /* [{id, toolCallId, toolName, args, status}] */
	cJSON *messages;                   /* this request's new CoreMessages */
	int64_t input_tokens;
	int64_t output_tokens;
};

void gh_run_result_clear(struct gh_run_result *r);

/* Runs (or continues) a turn. On failure nothing half-written is left: a
 * new run persists nothing, a continuation returns to its waiting state.
 * Errors: GH_E_FORBIDDEN (policy), GH_E_NOTFOUND (thread), GH_E_CONFLICT
 * (unknown or answered toolCallId, run busy), GH_E_BADREQ, GH_E_UPSTREAM /
 * GH_E_TIMEOUT (provider), GH_E_UNAVAILABLE (audit write failed: fail
 * closed), GH_E_RATELIMIT (token budget), GH_E_CANCELLED. */
enum gh_code gh_run_generate(struct gh_app *app, const struct gh_run_request *rq,
			     const struct gh_run_sink *sink, struct gh_run_result *out,
			     struct gh_err *e);

/* Continues a suspended run after its approvals were decided (approve or
 * deny), on the calling thread. Used by the background resumer and by
 * approve-tool-call. who may be NULL (the run's own key is used). */
enum gh_code gh_run_resume(struct gh_app *app, const char *run_id,
			   const struct gh_run_sink *sink, struct gh_run_result *out,
			   struct gh_err *e);

/* Normalises what clients send as messages into CoreMessages: a string, an
 * array of strings, or an array of {role, content} (content a string or
 * parts). Unknown roles and shapes are a GH_E_BADREQ naming the index. */
enum gh_code gh_run_normalize_messages(const cJSON *in, cJSON **out, struct gh_err *e);

/* The text of a CoreMessage's content: a string as it is, or the text of
 * its {type:'text'} parts run together; "" when there is none. Caller
 * frees; NULL when out of memory. */
char *gh_run_content_text(const cJSON *content);

/* The id of the run a client names with runId. Run ids are global, but a
 * client's name for a run is only its owner's: the id is derived from the
 * owner and the name ("run_" and 24 hex digits), so the same name never
 * collides with, takes over or reveals another owner's run, and an owner
 * naming a run twice gets "already exists" like any taken id. */
void gh_run_named_id(const char *owner, const char *name, char out[GH_ID_MAX]);

/* The client calls a stored run waits on (state.calls in "pending_client"
 * or "released") as [{toolCallId, toolName, args}]; state is borrowed.
 * Caller frees. */
cJSON *gh_run_pending_calls(const cJSON *state);

/* Waits, bounded by wait_ms, until run_id (of owner; NULL = any) leaves
 * "running" and "suspended", as a run does once the background resumer has
 * carried out a person's decision on its approvals. Polls the store every
 * 100 ms on the calling thread; gone(ud) (NULL = never) is asked between
 * polls and a nonzero answer ends the wait (the client left).
 * GH_OK: *row is the settled run. GH_E_TIMEOUT (deadline) or GH_E_CANCELLED
 * (gone): *row is the run as last read. Either way the caller clears *row
 * with gh_run_row_clear. Other codes are the store's (*row empty). */
enum gh_code gh_run_wait_settled(struct gh_app *app, const char *owner, const char *run_id,
				 int64_t wait_ms, int (*gone)(void *ud), void *ud,
				 struct gh_run_row *row, struct gh_err *e);

#endif
