/*
 * run.h - the run engine: one agent turn, end to end, and the only code
 * that knows what a run's state means.
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
 * What a surface does with it (README "How it works"): parse its wire
 * format into a struct gh_run_request, call gh_run_generate with a sink,
 * translate the typed events (struct gh_run_event) and the result back into
 * its wire format. To look at a stored run it reads a struct gh_run_view;
 * to act on one it calls gh_run_cancel, gh_run_wait or gh_answer_tool_call
 * (answer.h). It never reads runs.state or compares a status string.
 *
 * The engine knows nothing about HTTP. It runs on the calling thread; many
 * runs may proceed at once on different threads. The registry of runs in
 * flight in this process (for cancelling them) is guarded by a mutex.
 */
#ifndef GH_RUN_H
#define GH_RUN_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "app.h"
#include "err.h"
#include "policy.h"
#include "provider.h"
#include "util.h"

/* ---------------------------------------------------------- the types */

/* Where a run stands. Stored as the names gh_run_status_name gives. */
enum gh_run_status {
	GH_RUN_RUNNING,       /* a thread is working on it */
	GH_RUN_WAITING,       /* for client tool results */
	GH_RUN_SUSPENDED,     /* for a person's decision on an approval */
	GH_RUN_COMPLETED,
	GH_RUN_FAILED,
	GH_RUN_CANCELLED,
	GH_RUN_EXPIRED        /* a client tool's result did not come in time */
};

const char *gh_run_status_name(enum gh_run_status s);
/* -1 when name is no status. */
int gh_run_status_parse(const char *name, enum gh_run_status *out);
/* 1 for completed, failed, cancelled and expired: nothing more happens to
 * the run. */
int gh_run_status_final(enum gh_run_status s);

/* Why a turn ended. */
enum gh_run_finish {
	GH_RUN_FINISH_STOP,
	GH_RUN_FINISH_LENGTH,
	GH_RUN_FINISH_TOOL_CALLS,      /* client calls handed out */
	GH_RUN_FINISH_SUSPENDED,       /* calls wait on approvals */
	GH_RUN_FINISH_MAX_STEPS,
	GH_RUN_FINISH_CONTENT_FILTER
};

/* "stop", "length", "tool-calls", "suspended", "max-steps", "content-filter" */
const char *gh_run_finish_name(enum gh_run_finish f);
/* GH_RUN_FINISH_STOP for NULL or an unknown name. */
enum gh_run_finish gh_run_finish_parse(const char *name);

/* Where one tool call of the current step stands. */
enum gh_call_state {
	GH_CALL_NEW,                /* emitted by the model, not gated yet */
	GH_CALL_PENDING_CLIENT,     /* handed to the client; its result awaited */
	GH_CALL_PENDING_APPROVAL,   /* waits on a person */
	GH_CALL_RELEASED,           /* approved client call handed out */
	GH_CALL_DONE                /* result known */
};

/* 1 for the states in which the client owes a result. */
int gh_call_state_client(enum gh_call_state s);

struct gh_run_usage {
	int64_t input_tokens;
	int64_t output_tokens;
};

/* One tool call of a run's current step. Strings and JSON are borrowed from
 * whatever holds the call (the view, or the engine during an event). */
struct gh_run_call {
	const char *id;                 /* the gateway's toolCallId */
	const char *name;               /* normalised tool name */
	const char *source;             /* "memory", "server", "client" */
	const cJSON *args;              /* NULL when the model's arguments were not JSON */
	enum gh_call_state state;
	const char *approval_id;        /* NULL unless an approval was asked */
	int64_t approval_expires_at;    /* Unix ms, 0 when none */
	int64_t due_at;                 /* a call handed to the client: when its result is
					 * due (Unix ms; agents.ID.client_tool_timeout_s) */
	const cJSON *result;            /* GH_CALL_DONE */
	int is_error;
	/* Pending-approval calls in a view: the approval as stored (owned by
	 * the view), or NULL when it could not be read. */
	struct gh_approval *approval;
};

/* A stored run as surfaces see it. Filled by gh_run_view_get; freed with
 * gh_run_view_clear. */
struct gh_run_view {
	char id[GH_ID_MAX];
	char owner[GH_NAME_MAX + 1];
	char key_id[GH_ID_MAX];
	char agent_id[GH_NAME_MAX + 1];
	char thread_id[GH_NAME_MAX + 1];    /* "" = none */
	char resource_id[GH_NAME_MAX + 1];
	enum gh_run_status status;
	int here;                           /* a request of this process holds it now
					     * (gh_run_in_flight) */
	struct gh_run_call *calls;          /* the current step's calls, in order */
	size_t ncalls;
	int has_output;                     /* completed: text and finish below */
	const char *text;                   /* the answer's text (or "") */
	enum gh_run_finish finish;
	char *last_step_text;               /* the newest assistant text ("" none) */
	int64_t step;
	const char *error;                  /* failed/cancelled: why, or NULL */
	struct gh_run_usage usage;          /* the whole run */
	int64_t created_at, updated_at;     /* Unix ms */
	int direct;                         /* a call its caller made itself (call_tool) */
	void *priv_;                        /* the view's own storage */
};

void gh_run_view_clear(struct gh_run_view *v);
/* Calls in a given state. */
size_t gh_run_view_count(const struct gh_run_view *v, enum gh_call_state s);
/* The calls the client owes (pending or released), in the engine's
 * tool-call shape [{toolCallId, toolName, args, dueAt?}]. Caller frees. */
cJSON *gh_run_view_pending_json(const struct gh_run_view *v);
/* 1 when call c of a view waits on a person's decision not taken yet (its
 * approval pending); *caller is then 1 when the key that started the run
 * may decide it, 0 when an administrator must. */
int gh_run_call_awaits_decision(const struct gh_run_call *c, int *caller);

/* ------------------------------------------------------------- events */

enum gh_run_event_kind {
	GH_EV_START,             /* the run, or its continuation, begins */
	GH_EV_STEP_START,        /* step, message_id */
	GH_EV_TEXT_DELTA,        /* text, len */
	GH_EV_REASONING_DELTA,   /* text, len; signature when the provider gives one */
	GH_EV_TOOL_CALL_START,   /* index, upstream_id, name: a call starts streaming */
	GH_EV_TOOL_CALL_DELTA,   /* index, text, len: a fragment of its arguments */
	GH_EV_TOOL_CALL,         /* call: complete, with the gateway's id, before the gate */
	GH_EV_TOOL_RESULT,       /* call: its result (run, refused or the client's) */
	GH_EV_TOOL_PROGRESS,     /* call (no args), progress, total (< 0: unknown),
				  * message (may be NULL): a federated MCP tool's
				  * progress while it runs */
	GH_EV_APPROVAL,          /* call: suspended for approval (approval_id, expiry),
				  * approver, rule */
	GH_EV_STEP_FINISH,       /* finish, usage (this request's) */
	GH_EV_FINISH,            /* finish, status, usage: the request's turn is over */
	GH_EV_ERROR              /* code, message: the run failed */
};

/* One event; everything in it is borrowed for the callback's duration. */
struct gh_run_event {
	enum gh_run_event_kind kind;
	const char *run_id;
	int64_t step;
	const char *message_id;
	const char *text;
	size_t len;
	const char *signature;
	int index;
	const char *upstream_id;
	const char *name;
	const struct gh_run_call *call;
	const char *approver;            /* "caller" or "admin" */
	const char *rule;                /* the rule that asked for approval */
	enum gh_run_finish finish;
	enum gh_run_status status;
	struct gh_run_usage usage;
	enum gh_code code;
	const char *message;
	double progress, total;          /* GH_EV_TOOL_PROGRESS */
};

/* Where a run's progress goes while it happens. Every member is optional. */
struct gh_run_sink {
	/* Each event as it happens. Nonzero: the client is gone, the run is
	 * cancelled. */
	int (*event)(void *ud, const struct gh_run_event *ev);
	/* Called at least every 50 ms while the run waits on an upstream
	 * (with wake_fd: see there); nonzero cancels (client disconnected). */
	int (*tick)(void *ud);
	void *ud;
	/* The client's connection (> 0; 0 = unknown). While the run waits on
	 * a model, tick then runs when the client sends or hangs up, and
	 * otherwise every tick_ms, rather than every 50 ms. */
	int wake_fd;
	int64_t tick_ms;
	/* Optional: brackets the events of one upstream read (open 1, then 0),
	 * so the sink can send them in one write (batch_ud is its argument).
	 * A write that fails shows in the sink's next event or tick, which
	 * decide whether a client gone cancels the run. */
	void (*batch)(void *batch_ud, int open);
	void *batch_ud;
	/* Optional, with batch: the relay's op (gh_relay_op, relay.h). A sink
	 * that has it lets the relay thread read a streamed model reply and
	 * call event, tick and batch from there (never two at once), and
	 * writes to its client without blocking while the relay has it. */
	int (*relay)(void *batch_ud, int op);
};

/* ------------------------------------------------------------ running */

struct gh_run_request {
	const struct gh_principal *who;
	const struct gh_agent_conf *agent;
	const char *thread_id;       /* NULL: a new thread (when memory is enabled) */
	const char *resource_id;     /* NULL: "default" */
	const char *run_id;          /* NULL: generated (a client's runId goes through
				      * gh_run_named_id first) */
	int run_id_new;              /* run_id was just made by gh_id_new for this
				      * request: no stored run can hold it */
	const char *thread_title;    /* for a new thread */
	const cJSON *messages;       /* the client's CoreMessages (normalised); borrowed */
	const cJSON *client_defs;    /* from gh_tools_client_defs (may be NULL); borrowed */
	int max_steps;               /* 0: the agent's; never above the agent's */
	int stream;                  /* ask providers to stream deltas */
	int stateless;               /* no thread: messages are the whole conversation
				      * (clients that resend history, e.g. OpenAI's) */
	const char *surface;         /* "native", "openai", "a2a": recorded in audit detail */
	/* A call the caller makes itself (MCP tools/call): no model is asked;
	 * the run is this one call (call_tool with call_args, borrowed) through
	 * the gate, with no thread (stateless). A call that waits on an
	 * approval suspends the run as any other; once resumed, the run waits
	 * (GH_RUN_WAITING) until its caller collects the result
	 * (gh_run_call_collect). */
	const char *call_tool;
	const cJSON *call_args;
	/* Surfaces that speak a provider's own API (/v1/messages) also give: */
	const char *model;           /* the client's model: used when the agent names none */
	int64_t max_tokens;          /* the client's limit: used when the agent sets none */
	const char *passthrough_type;   /* what gh_chat_request passes through, as there */
	const cJSON *passthrough;
	const struct gh_upstream_header *pass_headers;
	size_t npass_headers;
	struct gh_provider_error *upstream_error;  /* optional out: the upstream's own error */
	int history_len;             /* stateless with a thread_id: the thread is named (audit,
				      * admin UI) and gets this request's messages from
				      * index history_len on (the rest it already holds) */
	int64_t client_tool_timeout_s;  /* 0: the agent's client_tool_timeout_s; never
					 * above it (a new run keeps what it asked) */
};

struct gh_run_result {
	char run_id[GH_ID_MAX];
	char thread_id[GH_NAME_MAX + 1];   /* "" when the run has no thread */
	char resource_id[GH_NAME_MAX + 1];
	enum gh_run_status status;         /* completed | waiting | suspended */
	enum gh_run_finish finish;
	char *text;                        /* the last step's text */
	cJSON *tool_calls;                 /* last step's calls [{toolCallId, toolName, args, source}] */
	cJSON *tool_results;               /* last step's results [{toolCallId, toolName, result, isError}] */
	cJSON *pending;                    /* client calls to run [{toolCallId, toolName, args}] */
	cJSON *approvals;                  /* [{id, toolCallId, toolName, args, status, expiresAt}] */
	cJSON *messages;                   /* this request's new CoreMessages */
	struct gh_run_usage usage;         /* this request's */
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
 * deny), on the calling thread, as the key that started it. Used by the
 * background resumer and by gh_answer_tool_call. */
enum gh_code gh_run_resume(struct gh_app *app, const char *run_id,
			   const struct gh_run_sink *sink, struct gh_run_result *out,
			   struct gh_err *e);

/* Ends a run that waits for client tool results past their deadline (a
 * call's result is due client_tool_timeout_s after it was handed out): each
 * call still owed gets an "expired" audit row and the run becomes
 * GH_RUN_EXPIRED, so a result sent later is refused naming the run and why.
 * GH_E_CONFLICT when the run is not waiting (a result came meanwhile). Used
 * by the background thread that also expires approvals. */
enum gh_code gh_run_expire(struct gh_app *app, const char *run_id, struct gh_err *e);

/* The agent named id, when who may use it. GH_E_NOTFOUND (no such agent;
 * *out NULL) or GH_E_FORBIDDEN (the rule that refused it in e). */
enum gh_code gh_run_agent(struct gh_app *app, const struct gh_principal *who, const char *id,
			  const struct gh_agent_conf **out, struct gh_err *e);

/* ---------------------------------------------------------- stored runs */

/* Reads the stored run run_id (of owner; NULL = any owner) as a view.
 * GH_E_NOTFOUND when there is none (or it is another owner's); a new run
 * is stored when its first turn ends (gh_run_in_flight knows of it
 * before). */
enum gh_code gh_run_view_get(struct gh_app *app, const char *owner, const char *run_id,
			     struct gh_run_view *out, struct gh_err *e);
/* The same for the run a client names: its id, or, for owner (not NULL),
 * the runId the owner gave it (gh_run_named_id). GH_E_NOTFOUND says
 * "no run <name>". */
enum gh_code gh_run_view_find(struct gh_app *app, const char *owner, const char *name,
			      struct gh_run_view *out, struct gh_err *e);

/* The id of the run a client names with runId. Run ids are global, but a
 * client's name for a run is only its owner's: the id is derived from the
 * owner and the name ("run_" and 24 hex digits), so the same name never
 * collides with, takes over or reveals another owner's run, and an owner
 * naming a run twice gets "already exists" like any taken id. */
void gh_run_named_id(const char *owner, const char *name, char out[GH_ID_MAX]);

/* 1 when a request of this process holds run_id (of owner; NULL = any):
 * it is running here, stored or not yet, and gh_run_cancel can stop it. */
int gh_run_in_flight(const char *owner, const char *run_id);

/* The run waiting on a client tool call id (of owner): its id into run_id.
 * *answered is 1 when the call already has its result. GH_E_NOTFOUND when
 * no run knows the call. */
enum gh_code gh_run_find_call(struct gh_app *app, const char *owner, const char *tool_call_id,
			      char run_id[GH_ID_MAX], int *answered, struct gh_err *e);

enum gh_cancel_outcome {
	GH_CANCEL_DONE,          /* it waited (client results or approvals): now cancelled */
	GH_CANCEL_SIGNALLED      /* in flight here: it stops at its next step or
				  * upstream wait (gh_run_wait with GH_UNTIL_IDLE) */
};

/* Cancels run_id (of owner; NULL = any). GH_E_NOTFOUND; GH_E_CONFLICT when
 * the run is final (the message names its status) or is being continued
 * where it cannot be stopped (in the background or another process). */
enum gh_code gh_run_cancel(struct gh_app *app, const char *owner, const char *run_id,
			   enum gh_cancel_outcome *how, struct gh_err *e);

enum gh_run_until {
	GH_UNTIL_SETTLED,     /* neither running nor suspended: the decision on its
			       * approvals has been carried out */
	GH_UNTIL_IDLE         /* no request of this process holds it (then *out is the
			       * stored run, or GH_E_NOTFOUND when it was never stored) */
};

/* Waits, bounded by wait_ms, until run_id (of owner; NULL = any) is as
 * until asks, woken by the hub whenever the run's state changes (and, for
 * changes made outside this process, rereading it every second). gone(ud)
 * (NULL = never) is asked at least every 100 ms; nonzero ends the wait (the
 * client left). GH_OK: *out is the run as it settled. GH_E_TIMEOUT
 * (deadline) or GH_E_CANCELLED (gone): *out is the run as last read. Either
 * way the caller clears *out. Other codes (*out empty): the view's. */
enum gh_code gh_run_wait(struct gh_app *app, const char *owner, const char *run_id,
			 enum gh_run_until until, int64_t wait_ms, int (*gone)(void *ud),
			 void *ud, struct gh_run_view *out, struct gh_err *e);

/* Holds run_id in flight on this thread before the engine runs it, so
 * gh_run_in_flight knows of it and gh_run_cancel can stop it (surfaces
 * that publish a run's id before they call gh_run_generate, like A2A
 * tasks). owner is copied. Release with gh_run_release; the hub then tells
 * waiters. GH_E_NOMEM. */
struct gh_run_hold {
	void *priv_;
};
enum gh_code gh_run_hold(struct gh_app *app, const char *owner, const char *run_id,
			 struct gh_run_hold *h, struct gh_err *e);
void gh_run_release(struct gh_app *app, struct gh_run_hold *h);
/* 1 when the hold's run was asked to stop (gh_run_cancel). */
int gh_run_hold_cancelled(const struct gh_run_hold *h);

/* ------------------------------------------------- runs a caller picks up */

/* At most this many runs are listed by gh_run_list_waiting. */
#define GH_RUN_WAITING_MAX 1000

struct gh_run_waiting_filter {
	const char *agent_id;                 /* required */
	const char *thread_id, *resource_id;  /* NULL = any */
	int64_t from_ms, to_ms;               /* last changed within; to_ms 0 = now */
};

/* The runs of who's key on an agent that wait on someone: suspended on an
 * approval (GH_RUN_SUSPENDED) or waiting for client tool results
 * (GH_RUN_WAITING), newest first, each as a view to fn (borrowed for the
 * call; nonzero stops). */
enum gh_code gh_run_list_waiting(struct gh_app *app, const struct gh_principal *who,
				 const struct gh_run_waiting_filter *f,
				 int (*fn)(void *ud, const struct gh_run_view *v), void *ud,
				 struct gh_err *e);

/* ------------------------------------------- calls a caller makes itself */

/* The run of an earlier call by who's key to tool with exactly these
 * arguments (SHA-256 of their canonical form) that still has something to
 * give: its approval pending, or approved and its result not collected.
 * run_id and approval_id get them. GH_E_NOTFOUND when there is none. */
enum gh_code gh_run_call_find(struct gh_app *app, const struct gh_principal *who,
			      const char *tool, const cJSON *args, char run_id[GH_ID_MAX],
			      char approval_id[GH_ID_MAX], struct gh_err *e);

/* Collects the result of a call run resumed after its approval (status
 * waiting): exactly once, whoever asks (the move to completed is atomic).
 * *out is the run as collected (its one call done). GH_E_CONFLICT when it
 * was collected already or is not waiting. */
enum gh_code gh_run_call_collect(struct gh_app *app, const char *owner, const char *run_id,
				 struct gh_run_view *out, struct gh_err *e);

#endif
