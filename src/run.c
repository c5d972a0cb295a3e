/*
 * run.c - the run engine's turn: the model loop, the gate, auditing and
 * persisting; see run.h for the contract and run_int.h for the layout of a
 * run's working state. Stored runs (views, cancel, waits, the registry of
 * runs in flight) are in run_view.c.
 *
 * Threading: a run lives on one thread; concurrent continuations of one
 * run are serialised by claiming it in the store (waiting -> running).
 */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "answer.h"
#include "approvals.h"
#include "audit.h"
#include "mcp.h"
#include "buf.h"
#include "hub.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "messages.h"
#include "provider.h"
#include "ratelimit.h"
#include "run_int.h"
#include "run_journal.h"
#include "run_trace.h"
#include "schema.h"
#include "tools.h"
#include "upstream.h"
#include "wire_native.h"

#define RESULT_PREVIEW 512

struct run {
	struct gh_app *app;
	const struct gh_config *cfg;
	const struct gh_principal *who;
	struct gh_principal owner_key;     /* resumed runs act as the run's own key */
	const struct gh_agent_conf *agent;
	const struct gh_policy_conf *policy;
	const struct gh_run_sink *sink;
	const char *surface;
	int journal;                       /* events go to the run journal (state "journal") */
	const struct gh_run_request *rq;   /* this request (NULL when resumed) */
	struct gh_run_hold hold;           /* in flight here, for gh_run_cancel */

	char run_id[GH_ID_MAX];
	char thread_id[GH_NAME_MAX + 1];
	char resource_id[GH_NAME_MAX + 1];
	char title[GH_NAME_MAX + 1];
	int memory;
	int new_thread;
	int is_new;                        /* run not yet in the store */
	int claimed;                       /* we moved it to running */
	enum gh_run_status claimed_from;
	int stream;

	cJSON *state;                      /* owned */
	cJSON *context;                    /* in state */
	cJSON *calls;                      /* in state, or NULL */
	struct gh_toolset ts;

	int response_from;                 /* context index where this request's messages start */
	struct gh_run_usage used;          /* this request */
	char *last_text;
	cJSON *last_calls, *last_results;
	enum gh_run_finish finish;
	cJSON *answered;                   /* tool call ids answered in this request */
	cJSON *registered;                 /* pending ids handed out in this request */
	int cancelled;
	int resumed;                       /* continued after its approvals were decided */
	int pass_noted;                    /* dropped pass-through fields were logged */
	const char *error;                 /* recorded with a failed run */
	cJSON *partial;                    /* tool calls seen streaming in this step */
	char detail[GH_ERR_MSG_MAX];       /* the whole story of a failed model call */
	struct deferred_end *end;          /* a direct call's end row, committed with the run */
	struct gh_span *span;              /* invoke_agent: this request's part of the run */
	struct gh_span *tool_span;         /* execute_tool: the call being gated or settled */
	char *prompt;                      /* the system prompt, once read (NULL: none) */
	int prompt_read;                   /* ... read in this request */
	int prelude;                       /* the sink holds the opening events (prelude_open) */
	int64_t prelude_ns;                /* since when (monotonic) */
};

/* ------------------------------------------------------------- events */

/* The run's journal (run_journal.h; runs the native API started, which
 * Mastra's observe may replay) and its live topic (GET
 * /api/runs/:id/events, when anyone watches) get every event the native
 * API streams, in its vocabulary. Other runs serialise nothing here. */
static void publish(struct run *r, const struct gh_run_event *ev)
{
	const char *type = gh_wire_native_type(ev->kind);
	struct gh_buf b;

	if (!type || (!r->journal && !gh_hub_active(r->app->hub)))
		return;
	gh_buf_init(&b, (size_t)1 << 30);
	if (gh_wire_native_payload(ev, &b) == GH_BUF_OK) {
		if (r->journal)
			gh_run_journal_add(GH_JOURNAL_NATIVE,
					   r->who && r->who->key.owner[0] ? r->who->key.owner : "",
					   r->run_id, type, b.data ? b.data : "", b.len,
					   ev->kind == GH_EV_FINISH || ev->kind == GH_EV_ERROR);
		if (gh_hub_active(r->app->hub))
			gh_hub_publish_raw(r->app->hub, r->run_id, type, b.data, b.len);
	}
	gh_buf_free(&b);
}

/* The events a run opens with (start, the first step-start) wait in the
 * sink's batch until the model's request has been written (on a new
 * upstream connection, once the connection is up), so the client is woken
 * once for all of them, and not ahead of the upstream request. Any other
 * event, the end of the request, and a tick once they have waited
 * PRELUDE_WAIT_MS (a request that is slow to go out: a distant provider's
 * handshake, a retry's backoff) let them go. */
#define PRELUDE_WAIT_MS 20

static void prelude_open(struct run *r)
{
	if (r->sink && r->sink->batch && !r->prelude) {
		r->prelude = 1;
		r->prelude_ns = gh_mono_ns();
		r->sink->batch(r->sink->batch_ud, 1);
	}
}

static void prelude_close(struct run *r)
{
	if (r->prelude) {
		r->prelude = 0;
		r->sink->batch(r->sink->batch_ud, 0);
	}
}

static void emit(struct run *r, struct gh_run_event *ev)
{
	if (r->prelude && ev->kind != GH_EV_START && ev->kind != GH_EV_STEP_START)
		prelude_close(r);
	ev->run_id = r->run_id;
	if (r->sink && r->sink->event && !r->cancelled && r->sink->event(r->sink->ud, ev))
		r->cancelled = 1;
	publish(r, ev);
}

static void emit_kind(struct run *r, enum gh_run_event_kind kind)
{
	struct gh_run_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	emit(r, &ev);
}

/* Nonzero once the run is cancelled (by gh_run_cancel, or the sink: the
 * client left). */
static int checkpoint(struct run *r)
{
	if (r->cancelled)
		return 1;
	if (gh_run_hold_cancelled(&r->hold) ||
	    (r->sink && r->sink->tick && r->sink->tick(r->sink->ud)))
		r->cancelled = 1;
	return r->cancelled;
}

/* While the run waits (on a model, an MCP server): a checkpoint. */
static int tick(void *ud)
{
	struct run *r = ud;

	if (r->prelude && gh_mono_ns() - r->prelude_ns >= PRELUDE_WAIT_MS * INT64_C(1000000))
		prelude_close(r);
	return checkpoint(r);
}

/* The events of one upstream read go to the sink together. */
static int batch(void *ud, int open)
{
	struct run *r = ud;

	if (r->sink && r->sink->batch)
		r->sink->batch(r->sink->batch_ud, open);
	return r->cancelled;
}

/* The model's request is out: the opening events follow it. */
static void sent(void *ud)
{
	prelude_close(ud);
}

static int relay(void *ud, int op)
{
	struct run *r = ud;

	return r->sink->relay(r->sink->batch_ud, op);
}

/* A piece of the model's text or reasoning, as it streams. */
static int emit_text(struct run *r, enum gh_run_event_kind kind, const char *text, size_t len,
		     const char *signature)
{
	struct gh_run_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.text = text;
	ev.len = len;
	ev.signature = signature;
	emit(r, &ev);
	return r->cancelled;
}

static int on_text_delta(void *ud, const char *text, size_t len)
{
	return emit_text(ud, GH_EV_TEXT_DELTA, text, len, NULL);
}

static int on_reasoning(void *ud, const char *text, size_t len, const char *signature)
{
	return emit_text(ud, GH_EV_REASONING_DELTA, text, len, signature);
}

/* Tool calls as they stream in: told to the sink, and remembered so that
 * if the stream then breaks, each one is recorded in the audit log as a
 * call that never ran. */
static int on_tool_delta(void *ud, int index, const char *id, const char *name,
			 const char *frag)
{
	struct run *r = ud;
	struct gh_run_event ev;
	cJSON *c;
	int seen = 0;

	memset(&ev, 0, sizeof(ev));
	ev.index = index;
	ev.upstream_id = id;
	ev.name = name;
	cJSON_ArrayForEach(c, r->partial)
		seen |= gh_json_int(c, "index", -1) == index;
	if (!seen && name && *name && r->partial && (c = cJSON_CreateObject())) {
		cJSON_AddNumberToObject(c, "index", index);
		cJSON_AddStringToObject(c, "toolName", name);
		gh_json_add_str(c, "upstreamId", id);
		cJSON_AddItemToArray(r->partial, c);
		ev.kind = GH_EV_TOOL_CALL_START;
		emit(r, &ev);
	}
	if (frag && *frag) {
		ev.kind = GH_EV_TOOL_CALL_DELTA;
		ev.text = frag;
		ev.len = strlen(frag);
		emit(r, &ev);
	}
	return r->cancelled;
}

/* ------------------------------------------------------------ helpers */

static cJSON *state_get(struct run *r, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(r->state, k);
}

static void state_set_int(struct run *r, const char *k, double v)
{
	cJSON *it = state_get(r, k);

	if (it)
		cJSON_SetNumberValue(it, v);
	else
		cJSON_AddNumberToObject(r->state, k, v);
}

static int64_t state_int(struct run *r, const char *k)
{
	return gh_json_int(r->state, k, 0);
}

static void call_set_state(cJSON *c, enum gh_call_state st)
{
	const char *name = gh_call_state_name(st);

	/* cJSON_ReplaceItemViaPointer would drop the key; this keeps it */
	if (cJSON_GetObjectItemCaseSensitive(c, "state"))
		cJSON_ReplaceItemInObjectCaseSensitive(c, "state", cJSON_CreateString(name));
	else
		cJSON_AddStringToObject(c, "state", name);
}

/* Sets the result (takes ownership) and marks the call done. */
static void call_done(cJSON *c, cJSON *result, int is_error)
{
	cJSON_DeleteItemFromObjectCaseSensitive(c, "result");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "isError");
	cJSON_AddItemToObject(c, "result", result ? result : cJSON_CreateNull());
	cJSON_AddBoolToObject(c, "isError", is_error);
	call_set_state(c, GH_CALL_DONE);
}

/* An event about one stored call. */
static void emit_call(struct run *r, enum gh_run_event_kind kind, const cJSON *c)
{
	struct gh_run_call call;
	struct gh_run_event ev;

	gh_run_call_read(c, &call);
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.call = &call;
	emit(r, &ev);
}

/* -------------------------------------------------------------- traces */

/* The run's spans (run_trace.h): a no-op without an exporter. */

static void trace_run_begin(struct run *r)
{
	if (!r->span)
		r->span = gh_run_trace_begin(r->agent, r->who, r->run_id, r->surface, r->resumed,
					     r->state);
}

static void trace_run_end(struct run *r, enum gh_code rc, const struct gh_err *e)
{
	gh_run_trace_end(r->span, r->run_id, r->thread_id, &r->used, rc, e);
	r->span = NULL;
}

static void trace_tool_begin(struct run *r, const cJSON *c)
{
	r->tool_span = gh_run_trace_tool(r->span, c, r->run_id, r->thread_id, r->who,
					 &r->cfg->audit.redact);
}

static const char *result_error(const cJSON *result);

static void trace_tool_end(struct run *r, const cJSON *c, enum gh_code rc,
			   const struct gh_err *e)
{
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(c, "result");

	if (!r->tool_span)
		return;
	gh_run_trace_tool_end(r->tool_span, c, rc,
			      rc != GH_OK ? e->msg
			      : result && gh_json_bool(c, "isError", 0) ? result_error(result) : NULL,
			      &r->cfg->audit.redact);
	r->tool_span = NULL;
}

/* --------------------------------------------------------------- audit */

/* One audit row about call c, built for appending; the strings ev points
 * to are owned by the row (audit_row_free). */
struct audit_row {
	struct gh_audit_event ev;
	char *args, *detail, *res;
};

static void audit_row_free(struct audit_row *row)
{
	free(row->args);
	free(row->detail);
	free(row->res);
	memset(row, 0, sizeof(*row));
}

/* Thread-agnostic: reads r's settled fields and c only (a transaction's
 * function may build a row on the thread that commits it). */
/* What a client's result was, beyond its preview: its size and SHA-256 (of
 * its canonical JSON, whole, before any redaction) and whether the client
 * called it an error. */
static void result_digest(cJSON *d, const cJSON *result, int is_error)
{
	struct gh_buf b;
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];

	gh_buf_init(&b, GH_JSON_MAX_BYTES);
	if (gh_json_canonical(result, &b) == GH_BUF_OK) {
		crypto_hash_sha256(h, (const unsigned char *)(b.data ? b.data : ""), b.len);
		gh_hex(h, sizeof(h), hex);
		cJSON_AddNumberToObject(d, "result_bytes", (double)b.len);
		cJSON_AddStringToObject(d, "result_sha256", hex);
	}
	cJSON_AddBoolToObject(d, "is_error", is_error);
	gh_buf_free(&b);
}

/* A call approved with edited arguments: both digests and who edited. */
static void args_edited(cJSON *d, const cJSON *c)
{
	cJSON *x = cJSON_AddObjectToObject(d, "args_edited");
	char hash[65];

	gh_approval_args_hash(cJSON_GetObjectItemCaseSensitive(c, "args"), hash);
	gh_json_add_str(x, "original_sha256", gh_json_str(c, "askedArgsSha256"));
	cJSON_AddStringToObject(x, "edited_sha256", hash);
	gh_json_add_str(x, "edited_by", gh_json_str(c, "editedBy"));
}

static enum gh_code audit_row_build(struct run *r, const char *event, const cJSON *c,
				    const char *outcome, int64_t duration_ms, const char *error,
				    const char *reason, const cJSON *result, struct audit_row *row,
				    struct gh_err *e)
{
	struct gh_audit_event *ev = &row->ev;
	cJSON *d;

	memset(row, 0, sizeof(*row));
	row->args = gh_audit_args_json(cJSON_GetObjectItemCaseSensitive(c, "args"),
				       &r->cfg->audit.redact, (size_t)r->cfg->audit.max_args_bytes);
	d = cJSON_CreateObject();
	if (row->args && d) {
		if (r->surface)
			cJSON_AddStringToObject(d, "surface", r->surface);
		if (gh_json_str(c, "approvalId"))
			cJSON_AddStringToObject(d, "approval_id", gh_json_str(c, "approvalId"));
		if (gh_json_str(c, "askedArgsSha256"))
			args_edited(d, c);
		if (gh_json_str(c, "mcpServer")) {
			/* a federated tool's call: which server, its own name for
			 * the tool, and the upstream session it went over */
			cJSON *m = cJSON_AddObjectToObject(d, "mcp");

			gh_json_add_str(m, "server", gh_json_str(c, "mcpServer"));
			gh_json_add_str(m, "tool", gh_json_str(c, "mcpTool"));
			if (gh_json_str(c, "mcpSession"))
				cJSON_AddStringToObject(m, "session", gh_json_str(c, "mcpSession"));
		}
		if (result) {
			row->res = gh_audit_args_json(result, &r->cfg->audit.redact, RESULT_PREVIEW);
			if (row->res)
				cJSON_AddStringToObject(d, "result", row->res);
		}
		if (result && !strcmp(event, "client_result"))
			result_digest(d, result, outcome && !strcmp(outcome, "error"));
		row->detail = gh_json_dump(d);
	}
	cJSON_Delete(d);
	if (!row->args || !row->detail) {
		audit_row_free(row);
		return gh_err_set(e, GH_E_UNAVAILABLE, "audit log unavailable: out of memory; "
						       "the tool was not run");
	}
	ev->event = event;
	ev->key_id = r->who->key.id[0] ? r->who->key.id : NULL;
	ev->owner = r->who->key.owner[0] ? r->who->key.owner : NULL;
	ev->admin_user = r->who->admin_user[0] ? r->who->admin_user : NULL;
	ev->agent_id = r->agent->id;
	ev->thread_id = r->thread_id[0] ? r->thread_id : NULL;
	ev->run_id = r->run_id;
	ev->tool_call_id = gh_json_str(c, "toolCallId");
	ev->tool_name = gh_json_str(c, "toolName");
	ev->source = gh_json_str(c, "source");
	ev->args = row->args;
	ev->outcome = outcome;
	ev->duration_ms = duration_ms;
	ev->error = error;
	ev->reason = reason;
	ev->detail = row->detail;
	return GH_OK;
}

/* How an approval-bound call ended, for its approval, from the row that
 * ends it: after its decision, every row about such a call says how the
 * approved call ended. said is the error the caller saw (an HTTP tool's
 * address stays in the audit row's error). */
static void approval_outcome(const char *event, const char *outcome, const char *error,
			     const char *reason, const cJSON *result, const char **how,
			     const char **said)
{
	*how = !strcmp(event, "denied") ? "not_run"
	       : !strcmp(event, "executed") ||
			 (!strcmp(event, "client_result") && outcome && !strcmp(outcome, "ok"))
		       ? "ok"
		       : "error";
	*said = !strcmp(*how, "ok") ? NULL
		: result && gh_json_str(result, "error") ? gh_json_str(result, "error")
		: error ? error : reason;
}

/* The row that ends call c in tx: appended (an approval-bound call's
 * approval records how it ended, in the same transaction), and call_id
 * (0: none) closed. Thread-agnostic, as audit_row_build. */
static enum gh_code end_in_tx(struct gh_store_tx *tx, const cJSON *c, int64_t call_id,
			      const struct audit_row *row, const cJSON *result, struct gh_err *e)
{
	const struct gh_audit_event *ev = &row->ev;
	const char *apr = gh_json_str(c, "approvalId"), *how, *said;
	enum gh_code rc;

	if (!apr)
		return gh_store_tx_audit_call_close(tx, call_id, ev, e);
	approval_outcome(ev->event, ev->outcome, ev->error, ev->reason, result, &how, &said);
	rc = gh_store_approval_finish_exec_tx(tx, apr, how, said, ev, e);
	if (rc == GH_OK && call_id)
		rc = gh_store_tx_audit_call_close(tx, call_id, NULL, e);
	return rc;
}

struct end_tx {
	const cJSON *c;
	int64_t call_id;
	const struct audit_row *row;
	const cJSON *result;
};

static enum gh_code end_tx_fn(struct gh_store_tx *tx, void *ud, struct gh_err *e)
{
	struct end_tx *x = ud;

	return end_in_tx(tx, x->c, x->call_id, x->row, x->result, e);
}

/* How a row takes part in the books of open calls (store.h). */
enum audit_mark { AUDIT_PLAIN, AUDIT_OPEN, AUDIT_CLOSE };

/* Writes one audit row about call c and waits for its commit: a plain row,
 * the row that opens a call gatehouse runs itself (*call_id gets its
 * id), or the one that closes it. A failure is GH_E_UNAVAILABLE: the
 * caller must not run the tool (fail closed). */
static enum gh_code audit_write(struct run *r, enum audit_mark mark, int64_t *call_id,
				const char *event, const cJSON *c, const char *outcome,
				int64_t duration_ms, const char *error, const char *reason,
				const cJSON *result, struct gh_err *e)
{
	struct audit_row row;
	struct gh_err ae;
	int64_t seq = 0;
	enum gh_code rc;

	rc = audit_row_build(r, event, c, outcome, duration_ms, error, reason, result, &row, e);
	if (rc != GH_OK)
		return rc;
	if (mark == AUDIT_OPEN) {
		rc = gh_store_audit_call_open(r->app->store, &row.ev, call_id, &seq, &ae);
	} else if (mark == AUDIT_CLOSE || gh_json_str(c, "approvalId")) {
		struct end_tx x = {c, mark == AUDIT_CLOSE ? *call_id : 0, &row, result};

		rc = gh_store_tx_run(r->app->store, end_tx_fn, &x, &ae);
	} else {
		rc = gh_store_audit_append(r->app->store, &row.ev, &seq, &ae);
	}
	if (rc == GH_OK && mark != AUDIT_CLOSE)
		gh_run_trace_decision(r->tool_span, event, seq);
	if (rc != GH_OK) {
		gh_error("audit: cannot record %s of %s in run %s: %s", event, row.ev.tool_name,
			 r->run_id, ae.msg);
		/* the call stays open: closed as interrupted when the database
		 * is back */
		if (mark == AUDIT_CLOSE)
			gh_store_audit_call_unclosed(r->app->store, *call_id);
		rc = gh_err_set(e, GH_E_UNAVAILABLE,
				"audit log unavailable (%s); the tool was not run", ae.msg);
	}
	audit_row_free(&row);
	return rc;
}

/* The row that ends a call its caller made itself (MCP tools/call): the
 * run is committed right after the call, before the answer, so the row goes
 * into that same transaction (one commit where there were two). The allowed
 * row that opened the call was committed before it ran, as always. */
struct deferred_end {
	struct audit_row row;
	const cJSON *c;                    /* in r->calls */
	int64_t call_id;
	char *error;                       /* row.ev.error's copy */
};

static void deferred_free(struct run *r)
{
	if (!r->end)
		return;
	audit_row_free(&r->end->row);
	free(r->end->error);
	free(r->end);
	r->end = NULL;
}

static enum gh_code deferred_tx_fn(struct gh_store_tx *tx, void *ud, struct gh_err *e)
{
	struct deferred_end *d = ud;

	return end_in_tx(tx, d->c, d->call_id, &d->row,
			 cJSON_GetObjectItemCaseSensitive(d->c, "result"), e);
}

/* Writes a deferred end row on its own: the run's commit did not take it. */
static void deferred_flush(struct run *r)
{
	struct gh_err ae;

	if (r->end && gh_store_tx_run(r->app->store, deferred_tx_fn, r->end, &ae) != GH_OK) {
		gh_error("audit: cannot record %s of %s in run %s: %s", r->end->row.ev.event,
			 r->end->row.ev.tool_name, r->run_id, ae.msg);
		gh_store_audit_call_unclosed(r->app->store, r->end->call_id);
	}
	deferred_free(r);
}

/* 1 when the run's record is bookkeeping once the run completes: a new
 * run, under a new name, with no thread to append to (commits_later). A
 * native run's journal does not count: it lives in memory, and observe
 * replays it whatever the store holds. */
static int record_is_bookkeeping(const struct run *r)
{
	return r->is_new && !r->thread_id[0] && r->rq &&
	       (!r->rq->run_id || !*r->rq->run_id || r->rq->run_id_new);
}

/* The end row of call c, for a direct run kept until the run's commit;
 * otherwise written now (audit_write): always when the run's record will
 * be committed after the answer, which the end row must not wait for. c
 * must hold its result by then (call_done) for an approval-bound call's
 * outcome. */
static enum gh_code audit_end(struct run *r, int64_t *call_id, const char *event, cJSON *c,
			      const char *outcome, int64_t duration_ms, const char *error,
			      const char *reason, const cJSON *result, struct gh_err *e)
{
	struct deferred_end *d;
	enum gh_code rc;

	if (!gh_json_bool(r->state, "direct", 0) || r->end || record_is_bookkeeping(r))
		return audit_write(r, AUDIT_CLOSE, call_id, event, c, outcome, duration_ms, error,
				   reason, result, e);
	if (!(d = calloc(1, sizeof(*d))) || (error && !(d->error = strdup(error)))) {
		free(d);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	rc = audit_row_build(r, event, c, outcome, duration_ms, d->error, reason, result, &d->row,
			     e);
	if (rc != GH_OK) {
		free(d->error);
		free(d);
		return rc;
	}
	d->c = c;
	d->call_id = *call_id;
	r->end = d;
	return GH_OK;
}

static enum gh_code audit_call(struct run *r, const char *event, const cJSON *c,
			       const char *outcome, int64_t duration_ms, const char *error,
			       const char *reason, const cJSON *result, struct gh_err *e)
{
	return audit_write(r, AUDIT_PLAIN, NULL, event, c, outcome, duration_ms, error, reason,
			   result, e);
}

/* A model call that failed (not one the client cut short): the whole error,
 * with the upstream's address and its own words, goes to the log and the
 * audit log; the caller gets only the provider's name and what went wrong
 * (shown is that shorter message). Best effort: the run fails either way. */
static void audit_model_failed(struct run *r, const char *shown, const char *detail)
{
	struct gh_audit_event ev;
	struct gh_err ae;
	cJSON *d = cJSON_CreateObject();
	char *dj;

	gh_warn("run %s: model call failed: %s", r->run_id, detail);
	if (!d)
		return;
	cJSON_AddStringToObject(d, "provider", r->agent->provider);
	cJSON_AddStringToObject(d, "model", r->agent->model);
	if (r->surface)
		cJSON_AddStringToObject(d, "surface", r->surface);
	dj = gh_json_dump(d);
	cJSON_Delete(d);
	memset(&ev, 0, sizeof(ev));
	ev.event = "model_failed";
	ev.key_id = r->who->key.id[0] ? r->who->key.id : NULL;
	ev.owner = r->who->key.owner[0] ? r->who->key.owner : NULL;
	ev.agent_id = r->agent->id;
	ev.thread_id = r->thread_id[0] ? r->thread_id : NULL;
	ev.run_id = r->run_id;
	ev.source = "system";
	ev.outcome = "error";
	ev.duration_ms = -1;
	ev.error = detail;
	ev.reason = shown;
	ev.detail = dj;
	if (gh_store_audit_append(r->app->store, &ev, NULL, &ae) != GH_OK)
		gh_error("audit: cannot record the failed model call of run %s: %s", r->run_id,
			 ae.msg);
	free(dj);
}

/* --------------------------------------------------------- tool calls */

/* Holds a result gatehouse got from tool t to t's output schema: one that
 * does not match becomes a tool error naming the JSON path and what was
 * expected (also in why, for the audit row; "" when it matched). Errors
 * are left as they are; a federated tool's result was held to its
 * outputSchema on arrival (mcp_proto.c). */
static void hold_to_output(const struct gh_tool *t, cJSON **result, int *is_error, char *why,
			   size_t cap)
{
	cJSON *structured = NULL;

	why[0] = '\0';
	if (*is_error || !*result || !t->output_schema || t->mcp)
		return;
	if (gh_tools_output_check(t->output_schema, *result, &structured, why, cap) == 0) {
		if (structured) {
			cJSON_Delete(*result);
			*result = structured;
		}
		return;
	}
	cJSON_Delete(*result);
	*result = gh_json_error_result("%s: %s", t->name, why);
	*is_error = 1;
}

/* A memory tool that writes, run inside a store transaction with the row
 * that ends its call: the effect and its "executed" row commit together. */
struct mem_tx {
	struct run *r;
	const cJSON *c;
	const struct gh_tool *t;
	int64_t call_id;
	cJSON *result;                 /* owned */
	int is_error;
	int tool_failed;               /* gatehouse failed running it (te) */
	int64_t dur;
	struct gh_err te;
};

static void prompt_forget(struct run *r, const struct gh_tool *t);

static enum gh_code mem_tx_fn(struct gh_store_tx *tx, void *ud, struct gh_err *e)
{
	struct mem_tx *m = ud;
	struct run *r = m->r;
	struct audit_row row;
	int64_t t0 = gh_mono_ns();
	enum gh_code rc;
	char why[GH_SCHEMA_MSG_MAX + 64];

	rc = gh_tool_memory_exec(r->app->store, tx, r->who->key.owner, r->resource_id, m->t->name,
				 cJSON_GetObjectItemCaseSensitive(m->c, "args"), &m->result,
				 &m->is_error, &m->te);
	m->dur = (gh_mono_ns() - t0) / 1000000;
	if (rc != GH_OK) {
		m->tool_failed = 1;
		*e = m->te;
		return rc;
	}
	hold_to_output(m->t, &m->result, &m->is_error, why, sizeof(why));
	if (!m->result)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = audit_row_build(r, m->is_error ? "failed" : "executed", m->c,
			     m->is_error ? "error" : "ok", m->dur,
			     why[0] ? why : m->is_error ? gh_json_str(m->result, "error") : NULL,
			     why[0] ? "invalid result" : NULL, m->result, &row, e);
	if (rc == GH_OK)
		rc = end_in_tx(tx, m->c, m->call_id, &row, m->result, e);
	audit_row_free(&row);
	return rc;
}

/* A federated tool's call: its progress notifications become
 * GH_EV_TOOL_PROGRESS events (streams show them; nothing else waits for
 * them), and the run's tick tells it when the caller went away. */
struct progress_ctx {
	struct run *r;
	const cJSON *c;
};

static int mcp_tick(void *ud)
{
	struct progress_ctx *pc = ud;

	return tick(pc->r);
}

static void on_mcp_progress(void *ud, double progress, double total, const char *message)
{
	struct progress_ctx *pc = ud;
	struct gh_run_call call;
	struct gh_run_event ev;

	gh_run_call_read(pc->c, &call);
	call.args = NULL;
	memset(&ev, 0, sizeof(ev));
	ev.kind = GH_EV_TOOL_PROGRESS;
	ev.call = &call;
	ev.progress = progress;
	ev.total = total;
	ev.message = message;
	emit(pc->r, &ev);
}

/* The text a failed tool result shows: its "error", or the last text
 * block of an MCP result's content (where gatehouse adds why it refused a
 * result, after the tool's own words). Borrowed from result. */
static const char *result_error(const cJSON *result)
{
	const char *s = gh_json_str(result, "error"), *last = NULL;
	const cJSON *b;

	if (s)
		return s;
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(result, "content")) {
		if ((s = gh_json_str(b, "text")))
			last = s;
	}
	return last ? last : "the tool reported an error";
}

/* The source a tool's metrics carry: its own, or "mcp" for a federated one. */
static const char *metrics_source(const struct gh_tool *t)
{
	return t->mcp ? "mcp" : gh_tool_source_name(t->src);
}

/* Runs an allowed server or memory tool, opened as call_id, with its
 * "executed"/"failed" row (which closes the call) written before the
 * result is used. */
static enum gh_code execute(struct run *r, cJSON *c, const struct gh_tool *t, int64_t call_id,
			    struct gh_err *e)
{
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
	struct progress_ctx pc = {NULL, NULL};
	cJSON *result = NULL;
	int is_error = 0;
	int64_t t0 = gh_mono_ns(), dur;
	enum gh_code rc;
	struct gh_err te;
	char detail[GH_ERR_MSG_MAX], why[GH_SCHEMA_MSG_MAX + 64];

	gh_err_clear(&te);
	detail[0] = '\0';
	if (t->mcp) {
		struct gh_mcp_call_opts mo = {mcp_tick, 0, 0, on_mcp_progress, &pc};
		char session[256];

		pc.r = r;
		pc.c = c;
		gh_otel_activate(r->tool_span);
		rc = gh_mcp_call(gh_app_mcp(r->app), t->mcp, args, &mo, &result, &is_error, session,
				 sizeof(session), &te);
		gh_otel_activate(NULL);
		if (session[0])
			cJSON_AddStringToObject(c, "mcpSession", session);
		dur = (gh_mono_ns() - t0) / 1000000;
	} else if (t->src == GH_SRC_MEMORY && gh_tool_memory_writes(t->name)) {
		struct mem_tx m;

		memset(&m, 0, sizeof(m));
		m.r = r;
		m.c = c;
		m.t = t;
		m.call_id = call_id;
		gh_err_clear(&m.te);
		prompt_forget(r, t); /* whether it wrote or failed: read it again */
		rc = gh_store_tx_run(r->app->store, mem_tx_fn, &m, &te);
		if (rc == GH_OK) {
			gh_metrics_tool_exec(t->name, metrics_source(t), m.is_error ? GH_ME_ERROR
				: GH_ME_OK, gh_mono_ns() - t0);
			call_done(c, m.result, m.is_error);
			emit_call(r, GH_EV_TOOL_RESULT, c);
			return GH_OK;
		}
		cJSON_Delete(m.result);
		dur = m.dur;
		if (!m.tool_failed) {
			/* the end row (or the commit) failed: the effect went with
			 * it, so the tool did not run (fail closed) */
			gh_error("audit: cannot record the end of %s in run %s: %s", t->name,
				 r->run_id, te.msg);
			gh_store_audit_call_unclosed(r->app->store, call_id);
			return gh_err_set(e, GH_E_UNAVAILABLE,
					  "audit log unavailable (%s); the tool was not run", te.msg);
		}
		rc = GH_E_IO; /* gatehouse failed running it: nothing changed */
	} else if (t->src == GH_SRC_MEMORY) {
		rc = gh_tool_memory_exec(r->app->store, NULL, r->who->key.owner, r->resource_id,
					 t->name, args, &result, &is_error, &te);
		dur = (gh_mono_ns() - t0) / 1000000;
	} else {
		gh_otel_activate(r->tool_span);
		rc = gh_tool_http_exec(t->conf, args, tick, r, &result, &is_error, detail,
				       sizeof(detail), &te);
		gh_otel_activate(NULL);
		dur = (gh_mono_ns() - t0) / 1000000;
	}
	gh_metrics_tool_exec(t->name, metrics_source(t), rc != GH_OK ? GH_ME_FAILED : is_error
			     ? GH_ME_ERROR : GH_ME_OK, gh_mono_ns() - t0);
	if (rc == GH_E_CANCELLED) {
		r->cancelled = 1;
		audit_write(r, AUDIT_CLOSE, &call_id, "failed", c, "error", dur,
			    "cancelled: the client went away", NULL, NULL, e);
		return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	}
	if (rc != GH_OK) {
		/* gatehouse itself failed (database): the model hears about it */
		is_error = 1;
		result = gh_json_error_result("tool %s failed: %s", t->name, te.msg);
		gh_warn("tool %s in run %s failed: %s", t->name, r->run_id, te.msg);
	}
	hold_to_output(t, &result, &is_error, why, sizeof(why));
	if (!result)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = audit_end(r, &call_id, is_error ? "failed" : "executed", c, is_error ? "error" : "ok",
		       dur, !is_error ? NULL : why[0] ? why : detail[0] ? detail : result_error(result),
		       why[0] ? "invalid result" : NULL, result, e);
	if (rc != GH_OK) {
		cJSON_Delete(result);
		return rc;
	}
	gh_run_trace_ran(r->tool_span, is_error, dur);
	call_done(c, result, is_error);
	emit_call(r, GH_EV_TOOL_RESULT, c);
	return GH_OK;
}

/* A call that does not run: its audit row (event, with outcome and
 * reason), then an error result the model sees. Takes result. */
static enum gh_code refuse(struct run *r, cJSON *c, const char *event, const char *outcome,
			   const char *error, const char *reason, cJSON *result,
			   struct gh_err *e)
{
	enum gh_code rc = audit_call(r, event, c, outcome, -1, error, reason, NULL, e);

	if (rc != GH_OK) {
		cJSON_Delete(result);
		return rc;
	}
	call_done(c, result, 1);
	emit_call(r, GH_EV_TOOL_RESULT, c);
	return GH_OK;
}

/* The rate limit on calls of one tool; 1 when it refused (msg says why). */
static int rate_limited(struct run *r, const char *name, char *msg, size_t cap, int64_t *retry_s)
{
	const char *lrule = NULL;
	int64_t per_min = gh_policy_tool_limit(r->policy, name, &lrule);
	struct gh_rl_limit lim;
	struct gh_rl_result res;
	char key[320];

	memset(&res, 0, sizeof(res));
	if (per_min <= 0 || !r->app->rl)
		return 0;
	/* a minute's budget may be spent at once, then refills */
	lim = (struct gh_rl_limit){per_min, 60000, per_min - 1};
	snprintf(key, sizeof(key), "tool:%s:%s", r->who->key.id, name);
	if (gh_rl_take(r->app->rl, key, &lim, 1, &res) == GH_OK && res.allowed)
		return 0;
	*retry_s = res.retry_after_ms > 0 ? (res.retry_after_ms + 999) / 1000 : 1;
	snprintf(msg, cap, "policy \"%s\": rate_limits.tool_calls_per_minute \"%s\" = %lld",
		 r->policy->name, lrule ? lrule : "*", (long long)per_min);
	return 1;
}

/* Suspends call c for approval under decision d. */
static enum gh_code ask_approval(struct run *r, cJSON *c, const struct gh_tool *t,
				 const struct gh_decision *d, struct gh_err *e)
{
	struct gh_approval_req ar = {
		.who = r->who, .agent_id = r->agent->id,
		.thread_id = r->thread_id[0] ? r->thread_id : NULL, .run_id = r->run_id,
		.tool_call_id = gh_json_str(c, "toolCallId"), .tool_name = t->name,
		.source = t->src, .args = cJSON_GetObjectItemCaseSensitive(c, "args"),
		.decision = d, .surface = r->surface,
	};
	struct gh_run_call call;
	struct gh_run_event ev;
	char id[GH_ID_MAX];
	int64_t expires = 0;
	enum gh_code rc;

	if ((rc = gh_approval_create(r->app, &ar, id, &expires, e)) != GH_OK)
		return rc;
	gh_metrics_tool(t->name, metrics_source(t), GH_MD_APPROVAL_REQUESTED);
	cJSON_AddStringToObject(c, "approvalId", id);
	cJSON_AddNumberToObject(c, "expiresAt", (double)expires);
	call_set_state(c, GH_CALL_PENDING_APPROVAL);
	gh_run_trace_asked(r->tool_span, id, d->approver == GH_APPROVER_CALLER ? "caller"
								       : "admin");
	gh_run_call_read(c, &call);
	memset(&ev, 0, sizeof(ev));
	ev.kind = GH_EV_APPROVAL;
	ev.call = &call;
	ev.approver = d->approver == GH_APPROVER_CALLER ? "caller" : "admin";
	ev.rule = d->rule;
	emit(r, &ev);
	return GH_OK;
}

/* The gate for one call: allowlist -> rate limit -> arguments -> approval,
 * then run it, hand it to the client or suspend it. */
static enum gh_code gate_call(struct run *r, cJSON *c, struct gh_err *e)
{
	const char *name = gh_json_str(c, "toolName");
	const struct gh_tool *t = gh_toolset_find(&r->ts, name);
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
	const char *raw = gh_json_str(c, "rawArgs");
	struct gh_decision d;
	char msg[512];
	int64_t retry_s = 0;
	enum gh_code rc;

	gh_toolset_decision(&r->ts, name, &d);
	/* the policy's conditions on this call's arguments: deny > approval > allow */
	gh_policy_args(r->policy, name, args, &d);
	gh_otel_set_str(r->tool_span, "gatehouse.policy.rule", d.rule);
	if (!t) {
		gh_metrics_tool(NULL, NULL, GH_MD_DENIED); /* the name is the model's free text */
		return refuse(r, c, "denied", "denied", NULL, "unknown tool",
			      gh_json_error_result("unknown tool \"%s\": not available to this agent", name),
			      e);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(c, "source");
	cJSON_AddStringToObject(c, "source", gh_tool_source_name(t->src));
	if (t->mcp && !cJSON_GetObjectItemCaseSensitive(c, "mcpServer")) {
		cJSON_AddStringToObject(c, "mcpServer", t->mcp->server);
		cJSON_AddStringToObject(c, "mcpTool", t->mcp->upstream_name);
	}
	if (d.verdict == GH_V_DENY) {
		gh_metrics_tool(t->name, metrics_source(t), GH_MD_DENIED);
		return refuse(r, c, "denied", "denied", NULL, d.rule,
			      gh_json_error_result("denied by %s", d.rule), e);
	}
	if (rate_limited(r, name, msg, sizeof(msg), &retry_s)) {
		gh_metrics_tool(t->name, metrics_source(t), GH_MD_RATE_LIMITED);
		return refuse(r, c, "rate_limited", "rate_limited", NULL, msg,
			      gh_json_error_result("rate limited, retry after %lld s (%s)",
					   (long long)retry_s, msg), e);
	}
	if (!args || raw) {
		char ex[128];

		gh_strlcpy(ex, raw ? raw : "", sizeof(ex));
		return refuse(r, c, "failed", "error", "arguments are not valid JSON", NULL,
			      gh_json_error_result("the arguments for %s are not valid JSON: %s", name, ex),
			      e);
	}
	if (t->schema && gh_schema_validate(t->schema, args, msg, sizeof(msg)) != 0)
		return refuse(r, c, "failed", "error", msg, "invalid arguments",
			      gh_json_error_result("invalid arguments for %s: %s", name, msg), e);
	if (d.verdict == GH_V_APPROVAL)
		return ask_approval(r, c, t, &d, e);
	gh_metrics_tool(t->name, metrics_source(t), GH_MD_ALLOWED);
	if (t->src == GH_SRC_CLIENT) {
		rc = audit_call(r, "allowed", c, "allowed", -1, NULL, d.rule, NULL, e);
		if (rc != GH_OK)
			return rc;
		call_set_state(c, GH_CALL_PENDING_CLIENT);
		cJSON_AddItemToArray(r->registered, cJSON_CreateString(gh_json_str(c, "toolCallId")));
		return GH_OK;
	}
	{
		/* gatehouse runs it: the call is open until its end is recorded */
		int64_t call_id = 0;

		rc = audit_write(r, AUDIT_OPEN, &call_id, "allowed", c, "allowed", -1, NULL, d.rule,
				 NULL, e);
		if (rc != GH_OK)
			return rc;
		return execute(r, c, t, call_id, e);
	}
}

/* gate_call under the call's execute_tool span. */
static enum gh_code gate(struct run *r, cJSON *c, struct gh_err *e)
{
	enum gh_code rc;

	trace_tool_begin(r, c);
	rc = gate_call(r, c, e);
	trace_tool_end(r, c, rc, e);
	return rc;
}

/* ------------------------------------------------------------ persist */

static cJSON *output_json(struct run *r)
{
	cJSON *o = cJSON_CreateObject(), *u;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "text", r->last_text ? r->last_text : "");
	cJSON_AddStringToObject(o, "finishReason", gh_run_finish_name(r->finish));
	u = cJSON_AddObjectToObject(o, "usage");
	cJSON_AddNumberToObject(u, "inputTokens",
				(double)gh_json_int(state_get(r, "usage"), "input", 0));
	cJSON_AddNumberToObject(u, "outputTokens",
				(double)gh_json_int(state_get(r, "usage"), "output", 0));
	return o;
}

/* The ids handed out and answered in this request, for the commit. */
struct commit_ids {
	const char **pid, **pname, **psrc, **aid;
	size_t np, na;
};

static enum gh_code commit_ids(struct run *r, struct commit_ids *ids, struct gh_err *e)
{
	size_t i;

	memset(ids, 0, sizeof(*ids));
	ids->np = (size_t)cJSON_GetArraySize(r->registered);
	ids->na = (size_t)cJSON_GetArraySize(r->answered);
	ids->pid = calloc(ids->np + 1, sizeof(*ids->pid));
	ids->pname = calloc(ids->np + 1, sizeof(*ids->pname));
	ids->psrc = calloc(ids->np + 1, sizeof(*ids->psrc));
	ids->aid = calloc(ids->na + 1, sizeof(*ids->aid));
	if (!ids->pid || !ids->pname || !ids->psrc || !ids->aid)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	for (i = 0; i < ids->np; i++) {
		const char *id = cJSON_GetArrayItem(r->registered, (int)i)->valuestring;
		const cJSON *cl;

		ids->pid[i] = id;
		ids->pname[i] = "";
		ids->psrc[i] = "client";
		cJSON_ArrayForEach(cl, r->calls) {
			if (!strcmp(gh_json_str(cl, "toolCallId"), id)) {
				ids->pname[i] = gh_json_str(cl, "toolName");
				ids->psrc[i] = gh_json_str(cl, "source");
			}
		}
	}
	for (i = 0; i < ids->na; i++)
		ids->aid[i] = cJSON_GetArrayItem(r->answered, (int)i)->valuestring;
	return GH_OK;
}

static void commit_ids_free(struct commit_ids *ids)
{
	free(ids->pid);
	free(ids->pname);
	free(ids->psrc);
	free(ids->aid);
}

/* How long the client has for a call's result: the agent's bound, or
 * less when the request that started the run asked for less. */
static int64_t client_timeout_s(struct run *r)
{
	int64_t asked = state_int(r, "clientToolTimeoutS");

	return asked > 0 && asked < r->agent->client_tool_timeout_s ? asked
								     : r->agent->client_tool_timeout_s;
}

/* Gives each call the client now owes its deadline ("dueAt", set once,
 * when it is handed out) and returns the soonest (0: none owed). */
static int64_t client_due(struct run *r)
{
	int64_t now = gh_now_ms(), soonest = 0;
	cJSON *c;

	cJSON_ArrayForEach(c, r->calls) {
		int64_t due;

		if (!gh_call_state_client(gh_call_state_of(c)))
			continue;
		due = gh_json_int(c, "dueAt", 0);
		if (due <= 0) {
			due = now + client_timeout_s(r) * 1000;
			cJSON_AddNumberToObject(c, "dueAt", (double)due);
		}
		if (!soonest || due < soonest)
			soonest = due;
	}
	return soonest;
}

static int calls_waiting(struct run *r, int *approvals, int *clients);

/* 1 when the run's record can be committed after the answer: a run whose
 * record is bookkeeping (record_is_bookkeeping) that ends completed in
 * this request with no call left waiting and no end row waiting for this
 * commit: every tool it ran had its allowed row committed before it ran
 * and its end row, with what the tool wrote, committed after. Nothing the
 * audit needs waits on the record, and a crash before it commits loses
 * only the record. The store refuses anything else it would have to write
 * (gh_store_run_commit_later). */
static int commits_later(struct run *r, enum gh_run_status status)
{
	int approvals, clients;

	return record_is_bookkeeping(r) && status == GH_RUN_COMPLETED && !r->end &&
	       (!r->calls || !calls_waiting(r, &approvals, &clients));
}

static enum gh_code commit(struct run *r, enum gh_run_status status, struct gh_err *e)
{
	struct gh_run_commit c;
	struct commit_ids ids;
	int persisted = (int)state_int(r, "persisted"), n = cJSON_GetArraySize(r->context), i;
	cJSON *msgs = cJSON_CreateArray(), *output = NULL;
	enum gh_code rc;

	if (!msgs)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	for (i = persisted; i < n; i++)
		cJSON_AddItemReferenceToArray(msgs, cJSON_GetArrayItem(r->context, i));
	if ((rc = commit_ids(r, &ids, e)) != GH_OK)
		goto out;
	state_set_int(r, "persisted", n);
	if (status == GH_RUN_COMPLETED)
		output = output_json(r);
	memset(&c, 0, sizeof(c));
	c.run_id = r->run_id;
	c.owner = r->who->key.owner;
	c.key_id = r->who->key.id;
	c.agent_id = r->agent->id;
	c.thread_id = r->thread_id[0] ? r->thread_id : NULL;
	c.resource_id = r->resource_id;
	c.create_thread = r->new_thread;
	c.thread_title = r->title[0] ? r->title : NULL;
	c.messages = r->thread_id[0] ? msgs : NULL;
	c.status = gh_run_status_name(status);
	c.expect_status = r->is_new ? NULL : gh_run_status_name(GH_RUN_RUNNING);
	c.state = r->state;
	c.output = output;
	c.error = r->error;
	c.pending_ids = ids.pid;
	c.pending_names = ids.pname;
	c.pending_sources = ids.psrc;
	c.npending = ids.np;
	c.answered_ids = ids.aid;
	c.nanswered = ids.na;
	c.wait_until = client_due(r);
	if (status != GH_RUN_WAITING)
		c.wait_until = 0;
	if (r->end) {
		c.with_tx = deferred_tx_fn;
		c.with_ud = r->end;
	}
	if (commits_later(r, status) &&
	    gh_store_run_commit_later(r->app->store, &c, e) == GH_OK)
		rc = GH_OK;
	else
		rc = gh_store_run_commit(r->app->store, &c, e);
	if (rc == GH_E_CONFLICT && c.create_thread && r->rq && r->rq->stateless) {
		/* a session's thread, made meanwhile by another of its requests
		 * (a client sends several at once): join it */
		c.create_thread = 0;
		rc = gh_store_run_commit(r->app->store, &c, e);
	}
	if (rc == GH_OK)
		deferred_free(r);
	else
		deferred_flush(r);
	if (rc == GH_OK) {
		r->is_new = 0;
		r->new_thread = 0;
		r->claimed = 0;
		cJSON_Delete(r->registered);
		cJSON_Delete(r->answered);
		r->registered = cJSON_CreateArray();
		r->answered = cJSON_CreateArray();
		gh_run_notify(r->app, r->run_id);
	} else {
		state_set_int(r, "persisted", persisted);
	}
out:
	commit_ids_free(&ids);
	cJSON_Delete(output);
	cJSON_Delete(msgs);
	return rc;
}

/* ------------------------------------------------------------ the loop */

/* The agent's instructions with the user's working memory, read once a
 * request and again after a tool of this run wrote memory: the steps of
 * one request do not each read the store for what they wrote themselves
 * or not at all. Borrowed until the run is freed or prompt_forget. */
static const char *system_prompt(struct run *r)
{
	struct gh_buf b;
	char *wm = NULL;
	struct gh_err e;

	if (r->prompt_read)
		return r->prompt;
	r->prompt_read = 1;

	gh_buf_init(&b, 1 << 20);
	gh_buf_puts(&b, r->agent->instructions ? r->agent->instructions : "");
	if (r->memory && gh_store_working_memory_get(r->app->store, r->who->key.owner,
						     r->resource_id, &wm, &e) == GH_OK && wm) {
		gh_buf_printf(&b, "%sWorking memory about this user (keep it current with "
				  "working_memory_update):\n%s",
			      b.len ? "\n\n" : "", wm);
	}
	free(wm);
	if (b.len == 0) {
		gh_buf_free(&b);
		return NULL;
	}
	r->prompt = gh_buf_detach(&b);
	return r->prompt;
}

/* A memory tool of this run wrote: the next step reads the prompt again. */
static void prompt_forget(struct run *r, const struct gh_tool *t)
{
	if (!gh_tool_memory_writes(t->name))
		return;
	free(r->prompt);
	r->prompt = NULL;
	r->prompt_read = 0;
}

/* Appends the tool message for the current step (results in call order)
 * and clears the step's calls. */
static enum gh_code close_step(struct run *r, struct gh_err *e)
{
	cJSON *msg = cJSON_CreateObject(), *parts, *c;

	if (!msg)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddStringToObject(msg, "role", "tool");
	parts = cJSON_AddArrayToObject(msg, "content");
	cJSON_Delete(r->last_results);
	r->last_results = cJSON_CreateArray();
	cJSON_ArrayForEach(c, r->calls) {
		cJSON *p = cJSON_CreateObject(), *lr;

		cJSON_AddStringToObject(p, "type", "tool-result");
		gh_json_add_str(p, "toolCallId", gh_json_str(c, "toolCallId"));
		gh_json_add_str(p, "toolName", gh_json_str(c, "toolName"));
		cJSON_AddItemToObject(p, "result",
				      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "result"),
						      1));
		if (gh_json_bool(c, "isError", 0))
			cJSON_AddBoolToObject(p, "isError", 1);
		lr = cJSON_Duplicate(p, 1);
		cJSON_DeleteItemFromObjectCaseSensitive(lr, "type");
		cJSON_AddItemToArray(r->last_results, lr);
		cJSON_AddItemToArray(parts, p);
	}
	cJSON_AddItemToArray(r->context, msg);
	cJSON_DeleteItemFromObjectCaseSensitive(r->state, "calls");
	r->calls = NULL;
	return GH_OK;
}

/* How many calls of the step wait, and on what. */
static int calls_waiting(struct run *r, int *approvals, int *clients)
{
	cJSON *c;
	int n = 0;

	*approvals = *clients = 0;
	cJSON_ArrayForEach(c, r->calls) {
		enum gh_call_state s = gh_call_state_of(c);

		if (s == GH_CALL_PENDING_APPROVAL)
			(*approvals)++;
		else if (gh_call_state_client(s))
			(*clients)++;
		else
			continue;
		n++;
	}
	return n;
}

/* Where the run stands when this request's turn ends. */
static enum gh_run_status waiting_status(struct run *r)
{
	int approvals = 0, clients = 0;

	if (r->calls && calls_waiting(r, &approvals, &clients))
		return approvals ? GH_RUN_SUSPENDED : GH_RUN_WAITING;
	/* a caller's own call settled by a resumption: its result waits for
	 * the caller to collect it */
	if (gh_json_bool(r->state, "direct", 0) && r->resumed)
		return GH_RUN_WAITING;
	return GH_RUN_COMPLETED;
}

static enum gh_run_finish finish_of(enum gh_finish f)
{
	switch (f) {
	case GH_FINISH_STOP: return GH_RUN_FINISH_STOP;
	case GH_FINISH_LENGTH: return GH_RUN_FINISH_LENGTH;
	case GH_FINISH_TOOL_CALLS: return GH_RUN_FINISH_TOOL_CALLS;
	case GH_FINISH_CONTENT_FILTER: return GH_RUN_FINISH_CONTENT_FILTER;
	case GH_FINISH_OTHER: return GH_RUN_FINISH_STOP;
	}
	return GH_RUN_FINISH_STOP;
}

static void add_usage(struct run *r, int64_t in, int64_t out)
{
	cJSON *u = state_get(r, "usage");
	int64_t pin, pout;

	if (!u)
		u = cJSON_AddObjectToObject(r->state, "usage");
	pin = gh_json_int(u, "input", 0);
	pout = gh_json_int(u, "output", 0);
	r->used.input_tokens += in;
	r->used.output_tokens += out;
	cJSON_DeleteItemFromObjectCaseSensitive(u, "input");
	cJSON_DeleteItemFromObjectCaseSensitive(u, "output");
	cJSON_AddNumberToObject(u, "input", (double)(pin + in));
	cJSON_AddNumberToObject(u, "output", (double)(pout + out));
}

static void emit_step_finish(struct run *r, enum gh_run_event_kind kind, enum gh_run_finish f,
			     enum gh_run_status status)
{
	struct gh_run_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.finish = f;
	ev.status = status;
	ev.usage = r->used;
	emit(r, &ev);
}

/* The key's token budget for minute of tokens: "tok:<key id>". */
static int tokens_limit(struct run *r, struct gh_rl_limit *lim, char *key, size_t cap)
{
	if (!r->policy || r->policy->tokens_per_minute <= 0 || !r->app->rl)
		return 0;
	*lim = (struct gh_rl_limit){r->policy->tokens_per_minute, 60000,
				    r->policy->tokens_per_minute - 1};
	snprintf(key, cap, "tok:%s", r->who->key.id);
	return 1;
}

/* Token budget: refused before the call when the key has spent it. */
static enum gh_code tokens_check(struct run *r, struct gh_err *e)
{
	struct gh_rl_limit lim;
	struct gh_rl_result res;
	char key[160];
	int s;

	memset(&res, 0, sizeof(res));
	if (!tokens_limit(r, &lim, key, sizeof(key)))
		return GH_OK;
	if (gh_rl_peek(r->app->rl, key, &lim, 1, &res) == GH_OK && res.allowed)
		return GH_OK;
	gh_debug("tokens: %s refused: remaining %lld retry %lld", key, (long long)res.remaining,
		 (long long)res.retry_after_ms);
	s = (int)((res.retry_after_ms + 999) / 1000);
	gh_err_set(e, GH_E_RATELIMIT, "policy \"%s\": rate_limits.tokens_per_minute = %lld "
		   "spent; retry after %d s", r->policy->name,
		   (long long)r->policy->tokens_per_minute, s);
	e->retry_after = s;
	return GH_E_RATELIMIT;
}

static void tokens_charge(struct run *r, int64_t n)
{
	struct gh_rl_limit lim;
	char key[160];

	if (n <= 0 || !tokens_limit(r, &lim, key, sizeof(key)))
		return;
	gh_debug("tokens: %s charged %lld", key, (long long)n);
	gh_rl_charge(r->app->rl, key, &lim, n);
}

/* A stream that broke mid tool call: each call seen never ran, and the
 * audit log says so. */
static void audit_partial(struct run *r, enum gh_code rc, const char *why)
{
	cJSON *pc;

	cJSON_ArrayForEach(pc, r->partial) {
		const char *name = gh_json_str(pc, "toolName");
		const struct gh_tool *t = gh_toolset_find(&r->ts, name);
		cJSON *c = cJSON_CreateObject();
		struct gh_err ae;
		char id[GH_ID_MAX];

		if (!c)
			break;
		gh_id_new("call_", id, sizeof(id));
		cJSON_AddStringToObject(c, "toolCallId", id);
		gh_json_add_str(c, "toolName", name);
		cJSON_AddStringToObject(c, "source",
					gh_tool_source_name(t ? t->src : GH_SRC_SERVER));
		audit_call(r, "failed", c, rc == GH_E_CANCELLED ? "cancelled" : "error", -1, why,
			   "the model's tool call did not arrive whole; not run", NULL, &ae);
		cJSON_Delete(c);
	}
}

/* The assistant message for a model response, and the step's calls (each
 * with a gateway id: unique across runs, so a result finds its run by id
 * alone whatever ids the upstream uses). NULL on OOM. */
static cJSON *assistant_message(const struct gh_chat_response *resp, cJSON *calls)
{
	cJSON *msg = cJSON_CreateObject(), *content;
	size_t i;

	if (!msg)
		return NULL;
	cJSON_AddStringToObject(msg, "role", "assistant");
	if (resp->ncalls == 0 && !resp->reasoning) {
		cJSON_AddStringToObject(msg, "content", resp->text ? resp->text : "");
		return msg;
	}
	content = cJSON_AddArrayToObject(msg, "content");
	if (resp->reasoning) {
		/* kept byte for byte: a provider may need it back with the results */
		const cJSON *rp;

		cJSON_ArrayForEach(rp, resp->reasoning)
			cJSON_AddItemToArray(content, cJSON_Duplicate(rp, 1));
	}
	if (resp->text && *resp->text) {
		cJSON *tp = cJSON_CreateObject();

		cJSON_AddStringToObject(tp, "type", "text");
		cJSON_AddStringToObject(tp, "text", resp->text);
		cJSON_AddItemToArray(content, tp);
	}
	for (i = 0; i < resp->ncalls; i++) {
		const struct gh_tool_call *tc = &resp->calls[i];
		char id[GH_ID_MAX];
		cJSON *part = cJSON_CreateObject(), *call = cJSON_CreateObject();

		gh_id_new("call_", id, sizeof(id));
		cJSON_AddStringToObject(part, "type", "tool-call");
		cJSON_AddStringToObject(part, "toolCallId", id);
		cJSON_AddStringToObject(part, "toolName", tc->name ? tc->name : "");
		cJSON_AddItemToObject(part, "args", tc->args ? cJSON_Duplicate(tc->args, 1)
							     : cJSON_CreateObject());
		cJSON_AddItemToArray(content, part);
		cJSON_AddStringToObject(call, "toolCallId", id);
		cJSON_AddStringToObject(call, "toolName", tc->name ? tc->name : "");
		cJSON_AddItemToObject(call, "args", tc->args ? cJSON_Duplicate(tc->args, 1)
							     : cJSON_CreateNull());
		if (!tc->args)
			gh_json_add_str(call, "rawArgs", tc->raw_args ? tc->raw_args : "");
		cJSON_AddStringToObject(call, "source", "server");
		cJSON_AddStringToObject(call, "state", gh_call_state_name(GH_CALL_NEW));
		cJSON_AddItemToArray(calls, call);
	}
	return msg;
}

/* Takes the model's response into the run: the assistant message, the
 * step's calls (r->calls) or, when none, the finish reason. */
static enum gh_code take_response(struct run *r, const struct gh_chat_response *resp,
				  struct gh_err *e)
{
	cJSON *msg, *calls = cJSON_CreateArray();

	free(r->last_text);
	r->last_text = strdup(resp->text ? resp->text : "");
	msg = calls ? assistant_message(resp, calls) : NULL;
	if (!msg || !r->last_text) {
		cJSON_Delete(msg);
		cJSON_Delete(calls);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_AddItemToArray(r->context, msg);
	cJSON_Delete(r->last_calls);
	r->last_calls = NULL;
	cJSON_Delete(r->last_results);
	r->last_results = NULL;
	if (resp->ncalls) {
		cJSON_AddItemToObject(r->state, "calls", calls);
		r->calls = calls;
		r->last_calls = cJSON_Duplicate(calls, 1);
	} else {
		cJSON_Delete(calls);
		r->finish = finish_of(resp->finish);
	}
	return GH_OK;
}

/* What a client of another API sent that this provider cannot take is
 * dropped: said once per request, by name. */
static void pass_note(struct run *r)
{
	const struct gh_run_request *rq = r->rq;
	const char *ptype = r->agent->prov->type == GH_PROVIDER_ANTHROPIC ? "anthropic" :
			    r->agent->prov->type == GH_PROVIDER_OPENAI ? "openai" : "mock";
	const cJSON *f;
	struct gh_buf b;

	if (r->pass_noted || !rq->passthrough_type || !strcmp(rq->passthrough_type, ptype) ||
	    (!cJSON_GetArraySize(rq->passthrough) && !rq->npass_headers))
		return;
	r->pass_noted = 1;
	gh_buf_init(&b, 1024);
	cJSON_ArrayForEach(f, rq->passthrough)
		if (f->string && strcmp(f->string, "system"))
			gh_buf_printf(&b, "%s%s", b.len ? ", " : "", f->string);
	if (b.len)
		gh_info("run %s: provider %s (%s) takes no %s fields; dropped: %s", r->run_id,
			r->agent->prov->name, ptype, rq->passthrough_type, b.data);
	gh_buf_free(&b);
}

/* One model call; appends the assistant message and fills r->calls. */
static enum gh_code model_step(struct run *r, struct gh_err *e)
{
	struct gh_upstream_header pass_hdr[4];
	struct gh_chat_request req;
	struct gh_chat_events ev = {NULL, NULL, tick, r, 0, 0, NULL, batch, sent, NULL};
	struct gh_chat_response resp;
	struct gh_span *sp;
	const char *sys;
	char *detail = r->detail;
	enum gh_code rc;

	if (r->sink) {
		ev.wake_fd = r->sink->wake_fd;
		ev.tick_ms = r->sink->tick_ms;
		ev.relay = r->sink->relay ? relay : NULL;
	}
	if ((rc = tokens_check(r, e)) != GH_OK)
		return rc;
	memset(&resp, 0, sizeof(resp));
	sys = system_prompt(r);
	memset(&req, 0, sizeof(req));
	req.model = r->agent->model;
	req.system = sys;
	if (r->rq) {
		const struct gh_run_request *rq = r->rq;

		if ((!req.model || !*req.model) && rq->model)
			req.model = rq->model;
		req.passthrough_type = rq->passthrough_type;
		req.passthrough = rq->passthrough;
		req.pass_headers = rq->pass_headers;
		req.npass_headers = rq->npass_headers;
		req.upstream_error = rq->upstream_error;
		pass_note(r);
	} else {
		/* resumed: what the request that started the run asked for */
		const cJSON *pass = state_get(r, "pass"), *h;

		if ((!req.model || !*req.model) && gh_json_str(pass, "model"))
			req.model = gh_json_str(pass, "model");
		req.passthrough_type = gh_json_str(pass, "type");
		req.passthrough = cJSON_GetObjectItemCaseSensitive(pass, "fields");
		cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(pass, "headers")) {
			if (req.npass_headers >= GH_ARRAY_LEN(pass_hdr) || !cJSON_IsString(h))
				break;
			pass_hdr[req.npass_headers].name = h->string;
			pass_hdr[req.npass_headers++].value = h->valuestring;
		}
		req.pass_headers = pass_hdr;
	}
	req.messages = r->context;
	req.tools = r->ts.specs;
	req.ntools = r->ts.nspecs;
	req.has_temperature = r->agent->has_temperature;
	req.temperature = r->agent->temperature;
	req.max_tokens = r->agent->max_tokens;
	if (!req.max_tokens && r->rq && r->rq->max_tokens > 0)
		req.max_tokens = r->rq->max_tokens;
	req.stream = r->stream;
	if (r->stream) {
		ev.text_delta = on_text_delta;
		ev.tool_delta = on_tool_delta;
		ev.reasoning_delta = on_reasoning;
		cJSON_Delete(r->partial);
		r->partial = cJSON_CreateArray();
	}
	detail[0] = '\0';
	req.error_detail = detail;
	req.error_detail_cap = sizeof(r->detail);
	sp = gh_run_trace_chat(r->span, r->agent, req.model, r->thread_id);
	rc = gh_provider_chat(r->agent->prov, &req, &ev, &resp, e);
	gh_run_trace_chat_end(sp, rc, e, &resp);
	if (rc != GH_OK) {
		if (rc == GH_E_CANCELLED)
			r->cancelled = 1;
		else
			audit_model_failed(r, e->msg, detail[0] ? detail : e->msg);
		audit_partial(r, rc, detail[0] ? detail : e->msg);
		return rc;
	}
	add_usage(r, resp.input_tokens, resp.output_tokens);
	tokens_charge(r, resp.input_tokens + resp.output_tokens);
	if (!r->stream && resp.reasoning) {
		const cJSON *rp;

		cJSON_ArrayForEach(rp, resp.reasoning) {
			const char *t = gh_json_str(rp, "text"), *sig = gh_json_str(rp, "signature");

			if (t && *t)
				on_reasoning(r, t, strlen(t), NULL);
			if (sig)
				on_reasoning(r, "", 0, sig);
		}
	}
	if (!r->stream && resp.text && *resp.text)
		on_text_delta(r, resp.text, strlen(resp.text));
	rc = take_response(r, &resp, e);
	gh_chat_response_clear(&resp);
	return rc;
}

/* Gates every new call of the step, in order. */
static enum gh_code gate_calls(struct run *r, struct gh_err *e)
{
	cJSON *c;
	enum gh_code rc;

	cJSON_ArrayForEach(c, r->calls) {
		if (gh_call_state_of(c) != GH_CALL_NEW)
			continue;
		emit_call(r, GH_EV_TOOL_CALL, c);
		if ((rc = gate(r, c, e)) != GH_OK)
			return rc;
		if (r->cancelled)
			return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	}
	return GH_OK;
}

static void emit_step_start(struct run *r)
{
	struct gh_run_event ev;
	char mid[GH_ID_MAX];

	gh_id_new("msg_", mid, sizeof(mid));
	memset(&ev, 0, sizeof(ev));
	ev.kind = GH_EV_STEP_START;
	ev.message_id = mid;
	ev.step = state_int(r, "step");
	emit(r, &ev);
}

/* Runs steps until the model answers, a call must wait, or max steps. */
static enum gh_code loop(struct run *r, struct gh_err *e)
{
	enum gh_code rc;
	int approvals, clients;

	if (gh_json_bool(r->state, "direct", 0)) {
		/* a call its caller made: gated and run, or waiting; never the model */
		if (checkpoint(r))
			return gh_err_set(e, GH_E_CANCELLED, "cancelled");
		if ((rc = gate_calls(r, e)) != GH_OK)
			return rc;
		r->finish = r->calls && calls_waiting(r, &approvals, &clients)
				    ? GH_RUN_FINISH_SUSPENDED
				    : GH_RUN_FINISH_STOP;
		emit_step_finish(r, GH_EV_STEP_FINISH, r->finish, GH_RUN_RUNNING);
		return GH_OK;
	}
	for (;;) {
		if (checkpoint(r))
			return gh_err_set(e, GH_E_CANCELLED, "cancelled");
		if (r->calls) {
			if (calls_waiting(r, &approvals, &clients)) {
				r->finish = approvals ? GH_RUN_FINISH_SUSPENDED
						      : GH_RUN_FINISH_TOOL_CALLS;
				emit_step_finish(r, GH_EV_STEP_FINISH, r->finish, GH_RUN_RUNNING);
				return GH_OK;
			}
			if ((rc = close_step(r, e)) != GH_OK)
				return rc;
			emit_step_finish(r, GH_EV_STEP_FINISH, GH_RUN_FINISH_TOOL_CALLS,
					 GH_RUN_RUNNING);
		}
		if (state_int(r, "step") >= state_int(r, "max_steps")) {
			r->finish = GH_RUN_FINISH_MAX_STEPS;
			return GH_OK;
		}
		state_set_int(r, "step", (double)(state_int(r, "step") + 1));
		emit_step_start(r);
		if ((rc = model_step(r, e)) != GH_OK)
			return rc;
		if (r->cancelled)
			return gh_err_set(e, GH_E_CANCELLED, "cancelled");
		if (!r->calls) {
			emit_step_finish(r, GH_EV_STEP_FINISH, r->finish, GH_RUN_RUNNING);
			return GH_OK;
		}
		if ((rc = gate_calls(r, e)) != GH_OK)
			return rc;
	}
}

/* ------------------------------------------------------------- results */

static cJSON *call_payload(const cJSON *c)
{
	cJSON *p = cJSON_CreateObject();

	if (!p)
		return NULL;
	gh_json_add_str(p, "toolCallId", gh_json_str(c, "toolCallId"));
	gh_json_add_str(p, "toolName", gh_json_str(c, "toolName"));
	cJSON_AddItemToObject(p, "args", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "args"),
							  1));
	return p;
}

static void fill_calls(struct run *r, struct gh_run_result *out)
{
	cJSON *c;

	cJSON_ArrayForEach(c, r->last_calls) {
		cJSON *o = cJSON_CreateObject();

		gh_json_add_str(o, "toolCallId", gh_json_str(c, "toolCallId"));
		gh_json_add_str(o, "toolName", gh_json_str(c, "toolName"));
		cJSON_AddItemToObject(o, "args", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c,
								 "args"), 1));
		gh_json_add_str(o, "source", gh_json_str(c, "source"));
		cJSON_AddItemToArray(out->tool_calls, o);
	}
	cJSON_ArrayForEach(c, r->calls) {
		enum gh_call_state s = gh_call_state_of(c);

		if (gh_call_state_client(s)) {
			cJSON_AddItemToArray(out->pending, call_payload(c));
		} else if (s == GH_CALL_PENDING_APPROVAL) {
			cJSON *o = call_payload(c);

			gh_json_add_str(o, "id", gh_json_str(c, "approvalId"));
			cJSON_AddStringToObject(o, "status", "pending");
			/* times on the JSON API are ISO-8601 strings (the run's
			 * state keeps Unix ms) */
			gh_json_add_time(o, "expiresAt", gh_json_int(c, "expiresAt", 0));
			cJSON_AddItemToArray(out->approvals, o);
		}
	}
	/* A continuation may end with calls still pending from the client:
	 * they are this response's tool calls too. */
	if (cJSON_GetArraySize(out->tool_calls) == 0 && cJSON_GetArraySize(out->pending) > 0) {
		cJSON_Delete(out->tool_calls);
		out->tool_calls = cJSON_Duplicate(out->pending, 1);
	}
}

/* The run's result, its last use of the run: what the result takes from
 * the run's state (its last results, the messages of this response) is
 * moved there, not copied, as the run is committed and goes next. */
static void fill_result(struct run *r, struct gh_run_result *out, enum gh_run_status status)
{
	int had_results = r->last_results != NULL;
	cJSON *m, *next;

	gh_strlcpy(out->run_id, r->run_id, sizeof(out->run_id));
	gh_strlcpy(out->thread_id, r->thread_id, sizeof(out->thread_id));
	gh_strlcpy(out->resource_id, r->resource_id, sizeof(out->resource_id));
	out->status = status;
	out->finish = r->finish;
	out->text = strdup(r->last_text ? r->last_text : "");
	out->tool_calls = cJSON_CreateArray();
	out->tool_results = had_results ? r->last_results : cJSON_CreateArray();
	r->last_results = NULL;
	if (!had_results && gh_json_bool(r->state, "direct", 0)) {
		/* a caller's own call keeps its result in the step */
		const cJSON *c;

		cJSON_ArrayForEach(c, r->calls) {
			cJSON *o;

			if (gh_call_state_of(c) != GH_CALL_DONE || !(o = cJSON_CreateObject()))
				continue;
			gh_json_add_str(o, "toolCallId", gh_json_str(c, "toolCallId"));
			gh_json_add_str(o, "toolName", gh_json_str(c, "toolName"));
			cJSON_AddItemToObject(o, "result",
					      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "result"), 1));
			cJSON_AddBoolToObject(o, "isError", gh_json_bool(c, "isError", 0));
			cJSON_AddItemToArray(out->tool_results, o);
		}
	}
	out->pending = cJSON_CreateArray();
	out->approvals = cJSON_CreateArray();
	out->messages = cJSON_CreateArray();
	out->usage = r->used;
	fill_calls(r, out);
	for (m = cJSON_GetArrayItem(r->context, r->response_from); m && out->messages; m = next) {
		next = m->next;
		cJSON_AddItemToArray(out->messages, cJSON_DetachItemViaPointer(r->context, m));
	}
}

void gh_run_result_clear(struct gh_run_result *r)
{
	if (!r)
		return;
	free(r->text);
	cJSON_Delete(r->tool_calls);
	cJSON_Delete(r->tool_results);
	cJSON_Delete(r->pending);
	cJSON_Delete(r->approvals);
	cJSON_Delete(r->messages);
	memset(r, 0, sizeof(*r));
}

static void run_free(struct run *r)
{
	prelude_close(r);
	deferred_flush(r);
	gh_run_release(r->app, &r->hold);
	cJSON_Delete(r->partial);
	gh_toolset_free(&r->ts);
	cJSON_Delete(r->state);
	cJSON_Delete(r->last_calls);
	cJSON_Delete(r->last_results);
	cJSON_Delete(r->answered);
	cJSON_Delete(r->registered);
	free(r->last_text);
	free(r->prompt);
}

/* Ends a request: completes or parks the run, answers out. */
static enum gh_code finish_run(struct run *r, struct gh_run_result *out, struct gh_err *e)
{
	enum gh_run_status status = waiting_status(r);
	enum gh_code rc;

	rc = commit(r, status, e);
	if (rc != GH_OK)
		return rc;
	emit_step_finish(r, GH_EV_FINISH, r->finish, status);
	fill_result(r, out, status);
	return GH_OK;
}

/* The client went away (or the run was cancelled) mid-run: the run is
 * recorded as cancelled, without touching the thread, so no half exchange
 * is left there. */
static enum gh_code record_cancelled(struct run *r)
{
	struct gh_err ce;
	char tid[GH_NAME_MAX + 1];
	int new_thread = r->new_thread;
	enum gh_code rc;

	gh_strlcpy(tid, r->thread_id, sizeof(tid));
	if (r->is_new) {
		r->thread_id[0] = '\0';
		r->new_thread = 0;
	}
	r->error = "cancelled: the client went away";
	cJSON_DeleteItemFromObjectCaseSensitive(r->state, "calls");
	r->calls = NULL;
	cJSON_Delete(r->registered);
	r->registered = cJSON_CreateArray();
	rc = commit(r, GH_RUN_CANCELLED, &ce);
	if (rc != GH_OK)
		gh_warn("run %s: could not record its cancellation: %s", r->run_id, ce.msg);
	else
		gh_info("run %s cancelled: the client went away", r->run_id);
	gh_strlcpy(r->thread_id, tid, sizeof(r->thread_id));
	r->new_thread = new_thread;
	return rc;
}

/* Gives a claimed run back (a continuation that failed): it keeps waiting
 * exactly as before this request. */
static void release_claim(struct run *r)
{
	struct gh_err ignore;

	if (r->claimed &&
	    gh_store_run_transition(r->app->store, r->run_id, gh_run_status_name(GH_RUN_RUNNING),
				    gh_run_status_name(r->claimed_from), &ignore) == GH_OK)
		gh_run_notify(r->app, r->run_id);
	r->claimed = 0;
}

/* Claims a stored run for this request: from -> running. */
static enum gh_code claim(struct run *r, const char *run_id, enum gh_run_status from,
			  struct gh_err *e)
{
	enum gh_code rc = gh_store_run_transition(r->app->store, run_id, gh_run_status_name(from),
						  gh_run_status_name(GH_RUN_RUNNING), e);

	if (rc == GH_OK) {
		r->claimed = 1;
		r->claimed_from = from;
		gh_run_notify(r->app, run_id);
	}
	return rc;
}

static enum gh_code setup_tools(struct run *r, struct gh_err *e)
{
	return gh_toolset_build(r->cfg, gh_app_mcp(r->app), r->agent, r->policy,
				state_get(r, "client_tools"), &r->ts, e);
}

/* ------------------------------------------------------- continuation */

static enum gh_code load_run(struct run *r, const char *owner, const char *run_id,
			     struct gh_err *e)
{
	struct gh_run_row row;
	enum gh_code rc = gh_store_run_get(r->app->store, owner, run_id, &row, e);

	if (rc != GH_OK)
		return rc;
	gh_strlcpy(r->run_id, row.id, sizeof(r->run_id));
	gh_strlcpy(r->thread_id, row.thread_id, sizeof(r->thread_id));
	gh_strlcpy(r->resource_id, row.resource_id, sizeof(r->resource_id));
	r->state = row.state;
	row.state = NULL;
	r->context = state_get(r, "context");
	r->calls = state_get(r, "calls");
	r->journal = cJSON_IsTrue(state_get(r, "journal"));
	if (!cJSON_IsArray(r->context)) {
		gh_run_row_clear(&row);
		return gh_err_set(e, GH_E_IO, "run %s has damaged state", run_id);
	}
	if (!r->agent || strcmp(r->agent->id, row.agent_id)) {
		const struct gh_agent_conf *a = gh_config_agent(r->cfg, row.agent_id);

		if (!a || r->agent) {
			rc = gh_err_set(e, GH_E_CONFLICT, a ? "run %s belongs to agent %s"
							    : "run %s belongs to agent %s, which is "
							      "no longer configured",
					run_id, row.agent_id);
			gh_run_row_clear(&row);
			return rc;
		}
		r->agent = a;
	}
	r->memory = r->agent->memory_enabled;
	gh_run_row_clear(&row);
	return GH_OK;
}

/* 1 when run_id has ended (expired, cancelled, failed, completed): e then
 * names the run, how it ended and why, for a result that came too late. */
static int run_ended(struct run *r, const char *owner, const char *run_id, struct gh_err *e)
{
	struct gh_run_row row;
	enum gh_run_status st;
	struct gh_err ge;
	int ended;

	if (gh_store_run_get(r->app->store, owner, run_id, &row, &ge) != GH_OK)
		return 0;
	ended = gh_run_status_parse(row.status, &st) == 0 && gh_run_status_final(st) &&
		st != GH_RUN_COMPLETED;
	if (ended)
		gh_err_set(e, GH_E_CONFLICT, "run %s %s%s%s", run_id, row.status,
			   row.error ? ": " : "", row.error ? row.error : "");
	gh_run_row_clear(&row);
	return ended;
}

/* Finds the one run the results answer and claims it. */
static enum gh_code claim_for_results(struct run *r, const char *owner, const cJSON *results,
				      char run_id[GH_ID_MAX], struct gh_err *e)
{
	int any_pending = 0, answered;
	const cJSON *res;
	enum gh_code rc;

	run_id[0] = '\0';
	/* every result must name a call gatehouse handed out; all to one run */
	cJSON_ArrayForEach(res, results) {
		const char *id = gh_json_str(res, "toolCallId");
		char rid[GH_ID_MAX];

		rc = gh_run_find_call(r->app, owner, id, rid, &answered, e);
		if (rc == GH_E_NOTFOUND)
			return gh_err_set(e, GH_E_CONFLICT, "unknown toolCallId \"%s\": no run is "
					  "waiting for it", id);
		if (rc != GH_OK)
			return rc;
		if (run_id[0] && strcmp(run_id, rid))
			return gh_err_set(e, GH_E_CONFLICT, "tool results belong to different runs "
					  "(%s and %s)", run_id, rid);
		gh_strlcpy(run_id, rid, GH_ID_MAX);
		any_pending |= !answered;
	}
	if (run_ended(r, owner, run_id, e))
		return GH_E_CONFLICT;
	if (!any_pending)
		return gh_err_set(e, GH_E_CONFLICT, "toolCallId \"%s\" was already answered",
				  gh_json_str(cJSON_GetArrayItem(results, 0), "toolCallId"));
	rc = claim(r, run_id, GH_RUN_WAITING, e);
	if (rc == GH_E_CONFLICT) {
		rc = claim(r, run_id, GH_RUN_SUSPENDED, e);
		if (rc == GH_E_CONFLICT && run_ended(r, owner, run_id, e))
			return GH_E_CONFLICT;
		if (rc == GH_E_CONFLICT)
			return gh_err_set(e, GH_E_CONFLICT, "run %s is busy with another request; "
					  "send the results again when it is waiting", run_id);
	}
	return rc;
}

/* The output schema the client declared for its tool name, or NULL. */
static const cJSON *client_output_schema(struct run *r, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, state_get(r, "client_tools")) {
		const char *n = gh_json_str(d, "name");

		if (n && name && !strcmp(n, name))
			return cJSON_GetObjectItemCaseSensitive(d, "outputSchema");
	}
	return NULL;
}

/* Records a client's result for call c (val NULL: none given) and marks the
 * call done: held to the tool's declared output schema first, a result
 * that does not match is a "failed" row and a tool error for the model. */
static enum gh_code take_client_result(struct run *r, cJSON *c, const cJSON *val, int is_err,
				       struct gh_err *e)
{
	cJSON *nul = val ? NULL : cJSON_CreateNull(), *structured = NULL;
	const char *name = gh_json_str(c, "toolName");
	char why[GH_SCHEMA_MSG_MAX + 64];
	enum gh_code rc;

	if (!val && !(val = nul))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (!is_err && gh_tools_output_check(client_output_schema(r, name), val, &structured, why,
					     sizeof(why)) != 0) {
		rc = audit_call(r, "failed", c, "error", -1, why, "invalid result", val, e);
		if (rc == GH_OK)
			call_done(c, gh_json_error_result("%s: %s", name, why), 1);
	} else {
		rc = audit_call(r, "client_result", c, is_err ? "error" : "ok", -1, NULL, NULL, val,
				e);
		if (rc == GH_OK)
			call_done(c, structured ? structured : cJSON_Duplicate(val, 1), is_err);
		else
			cJSON_Delete(structured);
	}
	cJSON_Delete(nul);
	return rc;
}

/* Applies each result to its pending call, auditing it first. */
static enum gh_code apply_results(struct run *r, const cJSON *results, struct gh_err *e)
{
	const cJSON *res;
	enum gh_code rc;

	cJSON_ArrayForEach(res, results) {
		const char *id = gh_json_str(res, "toolCallId");
		cJSON *c;

		cJSON_ArrayForEach(c, r->calls)
			if (!strcmp(gh_json_str(c, "toolCallId"), id))
				break;
		/* a call not waiting is echoed history of one already answered */
		if (!c || !gh_call_state_client(gh_call_state_of(c)))
			continue;
		rc = take_client_result(r, c, cJSON_GetObjectItemCaseSensitive(res, "result"),
					gh_json_bool(res, "isError", 0), e);
		if (rc != GH_OK)
			return rc;
		cJSON_AddItemToArray(r->answered, cJSON_CreateString(id));
	}
	return GH_OK;
}

static enum gh_code settle_approvals(struct run *r, struct gh_err *e);

/* Settles what a continuation brings (results, decided approvals), then
 * runs the loop to the end of this request's turn. */
static enum gh_code continue_run(struct run *r, struct gh_run_result *out, struct gh_err *e)
{
	enum gh_code rc;

	trace_run_begin(r);
	gh_run_trace_remember(r->span, r->state);
	r->response_from = cJSON_GetArraySize(r->context);
	if ((rc = setup_tools(r, e)) != GH_OK)
		return rc;
	/* approvals decided meanwhile are settled by whoever holds the run */
	if ((rc = settle_approvals(r, e)) != GH_OK)
		return rc;
	prelude_open(r);
	emit_kind(r, GH_EV_START);
	if ((rc = loop(r, e)) != GH_OK)
		return rc;
	return finish_run(r, out, e);
}

static enum gh_code continue_with_results(struct run *r, const struct gh_run_request *rq,
					  const cJSON *results, struct gh_run_result *out,
					  struct gh_err *e)
{
	char run_id[GH_ID_MAX];
	enum gh_code rc;

	if ((rc = claim_for_results(r, rq->who->key.owner, results, run_id, e)) != GH_OK)
		return rc;
	if ((rc = gh_run_hold(r->app, rq->who->key.owner, run_id, &r->hold, e)) != GH_OK ||
	    (rc = load_run(r, rq->who->key.owner, run_id, e)) != GH_OK)
		goto fail;
	if ((rc = apply_results(r, results, e)) != GH_OK ||
	    (rc = continue_run(r, out, e)) != GH_OK)
		goto fail;
	return GH_OK;
fail:
	/* the client left mid-continuation: record it, as a new run would be */
	if (rc == GH_E_CANCELLED && r->claimed && r->state && record_cancelled(r) == GH_OK)
		return rc;
	release_claim(r);
	return rc;
}

/* -------------------------------------------------------------- entry */

static enum gh_code init_run(struct run *r, struct gh_app *app, const struct gh_principal *who,
			     const struct gh_agent_conf *agent, const struct gh_run_sink *sink,
			     struct gh_err *e)
{
	memset(r, 0, sizeof(*r));
	r->app = app;
	r->cfg = gh_app_cfg(app);
	r->who = who;
	r->agent = agent;
	gh_metrics_set_agent(agent ? agent->id : NULL);
	r->policy = who ? who->policy : NULL;
	r->sink = sink;
	r->answered = cJSON_CreateArray();
	r->registered = cJSON_CreateArray();
	if (!r->answered || !r->registered)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return GH_OK;
}

/* A named thread of the caller: its resource, or a new thread when the
 * caller has none by that id. */
static enum gh_code open_thread(struct run *r, const struct gh_run_request *rq,
				struct gh_err *e)
{
	cJSON *th = NULL;
	const char *res;
	enum gh_code rc;

	if (strlen(rq->thread_id) > GH_NAME_MAX)
		return gh_err_set(e, GH_E_BADREQ, "threadId: at most %d characters", GH_NAME_MAX);
	gh_strlcpy(r->thread_id, rq->thread_id, sizeof(r->thread_id));
	rc = gh_store_thread_get(r->app->store, rq->who->key.owner, rq->thread_id, &th, e);
	if (rc == GH_E_NOTFOUND) {
		/* thread ids are per owner: another owner's thread with this id
		 * is not in the way, nor seen */
		r->new_thread = 1;
		return GH_OK;
	}
	if (rc != GH_OK)
		return rc;
	res = gh_json_str(th, "resourceId");
	if (rq->resource_id && *rq->resource_id && res && strcmp(res, rq->resource_id)) {
		rc = gh_err_set(e, GH_E_CONFLICT, "thread %s belongs to resource %s, not %s",
				rq->thread_id, res, rq->resource_id);
	} else if (res) {
		gh_strlcpy(r->resource_id, res, sizeof(r->resource_id));
	}
	cJSON_Delete(th);
	return rc;
}

/* The history a new run starts from: the thread's recent messages, or
 * nothing. *out: caller frees. */
static enum gh_code load_history(struct run *r, const struct gh_run_request *rq, cJSON **out,
				 struct gh_err *e)
{
	cJSON *raw = NULL;
	enum gh_code rc;

	*out = NULL;
	if (rq->stateless && rq->thread_id && *rq->thread_id) {
		/* the client holds the conversation; the thread names it */
		if ((rc = open_thread(r, rq, e)) != GH_OK)
			return rc;
	} else if (r->memory && !rq->stateless) {
		if (rq->thread_id && *rq->thread_id) {
			if ((rc = open_thread(r, rq, e)) != GH_OK)
				return rc;
		} else {
			gh_id_new("thr_", r->thread_id, sizeof(r->thread_id));
			r->new_thread = 1;
		}
		if (!r->new_thread) {
			rc = gh_store_messages_recent(r->app->store, rq->who->key.owner,
						      r->thread_id, (int)rq->agent->last_messages,
						      &raw, e);
			if (rc != GH_OK)
				return rc;
			*out = gh_messages_sanitize_history(raw);
			cJSON_Delete(raw);
			return *out ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
	}
	*out = cJSON_CreateArray();
	return *out ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
}

/* What a client of a provider's own API asked for beyond the messages (its
 * model, the fields and headers passed through), kept for a run resumed
 * after an approval, which has no request of its own. */
static enum gh_code pass_state(struct run *r, const struct gh_run_request *rq)
{
	cJSON *p = cJSON_AddObjectToObject(r->state, "pass"), *h;
	size_t i;

	if (!p || !cJSON_AddStringToObject(p, "type", rq->passthrough_type) ||
	    (rq->model && !cJSON_AddStringToObject(p, "model", rq->model)) ||
	    (rq->passthrough && !cJSON_AddItemToObject(p, "fields",
						       cJSON_Duplicate(rq->passthrough, 1))) ||
	    !(h = cJSON_AddObjectToObject(p, "headers")))
		return GH_E_NOMEM;
	for (i = 0; i < rq->npass_headers; i++)
		if (!cJSON_AddStringToObject(h, rq->pass_headers[i].name, rq->pass_headers[i].value))
			return GH_E_NOMEM;
	return GH_OK;
}

/* A new run's working state: history, then this request's messages (the
 * first user message titles a new thread). */
static enum gh_code new_state(struct run *r, const struct gh_run_request *rq, cJSON *hist,
			      struct gh_err *e)
{
	int max_steps = (int)rq->agent->max_steps;
	const cJSON *m;

	r->state = cJSON_CreateObject();
	if (!r->state) {
		cJSON_Delete(hist);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (rq->max_steps > 0 && rq->max_steps < max_steps)
		max_steps = rq->max_steps;
	cJSON_AddNumberToObject(r->state, "v", 1);
	cJSON_AddItemToObject(r->state, "context", hist);
	r->context = hist;
	cJSON_AddNumberToObject(r->state, "persisted",
				cJSON_GetArraySize(hist) +
				(rq->stateless && r->thread_id[0] && rq->history_len > 0
					 ? rq->history_len : 0));
	cJSON_AddItemToObject(r->state, "client_tools",
			      rq->client_defs ? cJSON_Duplicate(rq->client_defs, 1)
					      : cJSON_CreateArray());
	cJSON_AddNumberToObject(r->state, "step", 0);
	cJSON_AddNumberToObject(r->state, "max_steps", max_steps);
	r->journal = !rq->surface || !strcmp(rq->surface, "native");
	if (r->journal)
		cJSON_AddBoolToObject(r->state, "journal", 1);
	if (rq->client_tool_timeout_s > 0)
		cJSON_AddNumberToObject(r->state, "clientToolTimeoutS",
					(double)rq->client_tool_timeout_s);
	if (rq->passthrough_type && pass_state(r, rq) != GH_OK)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddItemToObject(r->state, "usage", cJSON_CreateObject());
	cJSON_ArrayForEach(m, rq->messages) {
		const char *role = gh_json_str(m, "role");

		cJSON_AddItemToArray(r->context, cJSON_Duplicate(m, 1));
		if (!r->title[0] && role && !strcmp(role, "user")) {
			char *t = gh_messages_text(cJSON_GetObjectItemCaseSensitive(m, "content"));

			if (t)
				gh_strlcpy(r->title, t, sizeof(r->title) > 80 ? 81 : sizeof(r->title));
			free(t);
		}
	}
	if (rq->call_tool) {
		cJSON *calls = cJSON_AddArrayToObject(r->state, "calls"), *c = cJSON_CreateObject();
		char id[GH_ID_MAX];

		if (!calls || !c) {
			cJSON_Delete(c);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		gh_id_new("call_", id, sizeof(id));
		cJSON_AddBoolToObject(r->state, "direct", 1);
		cJSON_AddStringToObject(c, "toolCallId", id);
		cJSON_AddStringToObject(c, "toolName", rq->call_tool);
		cJSON_AddItemToObject(c, "args", rq->call_args ? cJSON_Duplicate(rq->call_args, 1)
							       : cJSON_CreateObject());
		cJSON_AddStringToObject(c, "source", "server");
		cJSON_AddStringToObject(c, "state", gh_call_state_name(GH_CALL_NEW));
		cJSON_AddItemToArray(calls, c);
		r->calls = calls;
		state_set_int(r, "step", 1);
	}
	r->response_from = cJSON_GetArraySize(r->context);
	if (rq->thread_title)
		gh_strlcpy(r->title, rq->thread_title, sizeof(r->title));
	return GH_OK;
}

static enum gh_code new_run(struct run *r, const struct gh_run_request *rq,
			    struct gh_run_result *out, struct gh_err *e)
{
	cJSON *hist = NULL;
	enum gh_code rc;

	r->is_new = 1;
	if (rq->run_id && *rq->run_id) {
		if (strlen(rq->run_id) >= sizeof(r->run_id))
			return gh_err_set(e, GH_E_BADREQ, "runId: at most %zu characters",
					  sizeof(r->run_id) - 1);
		gh_strlcpy(r->run_id, rq->run_id, sizeof(r->run_id));
	} else {
		gh_id_new("run_", r->run_id, sizeof(r->run_id));
	}
	if ((rc = gh_run_hold(r->app, rq->who->key.owner, r->run_id, &r->hold, e)) != GH_OK)
		return rc;
	trace_run_begin(r);
	r->memory = rq->agent->memory_enabled;
	gh_strlcpy(r->resource_id, rq->resource_id && *rq->resource_id ? rq->resource_id : "default",
		   sizeof(r->resource_id));
	if ((rc = load_history(r, rq, &hist, e)) != GH_OK ||
	    (rc = new_state(r, rq, hist, e)) != GH_OK || (rc = setup_tools(r, e)) != GH_OK)
		return rc;
	gh_run_trace_remember(r->span, r->state);
	prelude_open(r);
	emit_kind(r, GH_EV_START);
	if ((rc = loop(r, e)) != GH_OK)
		return rc;
	return finish_run(r, out, e);
}

/* A failed request: the error event for a run that had begun. */
static void emit_error(struct run *r, enum gh_code rc, const struct gh_err *e)
{
	struct gh_run_event ev;

	if (!r->run_id[0] || rc == GH_E_CANCELLED)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = GH_EV_ERROR;
	ev.code = rc;
	ev.message = e ? e->msg : "";
	emit(r, &ev);
}

/* gh_run_generate with its run's working state at r. */
static enum gh_code generate(struct run *r, struct gh_app *app,
			     const struct gh_run_request *rq, const struct gh_run_sink *sink,
			     struct gh_run_result *out, struct gh_err *e)
{
	struct gh_decision d;
	cJSON *results = NULL;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	if ((rc = init_run(r, app, rq->who, rq->agent, sink, e)) != GH_OK)
		goto out;
	r->surface = rq->surface;
	r->rq = rq;
	r->stream = rq->stream;
	gh_policy_agent(r->policy, rq->agent->id, &d);
	if (d.verdict != GH_V_ALLOW) {
		rc = gh_err_set(e, GH_E_FORBIDDEN, "agent \"%s\" refused: %s", rq->agent->id, d.rule);
		goto out;
	}
	if (!(results = gh_messages_tool_results(rq->messages))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (cJSON_GetArraySize(results) > 0)
		rc = continue_with_results(r, rq, results, out, e);
	else
		rc = new_run(r, rq, out, e);
	if (rc == GH_E_CANCELLED && r->is_new && r->state)
		record_cancelled(r);
out:
	if (rc != GH_OK) {
		emit_error(r, rc, e);
		gh_run_result_clear(out);
	}
	trace_run_end(r, rc, e);
	cJSON_Delete(results);
	run_free(r);
	return rc;
}

/* A run's working state, on the heap rather than in a frame: a stream's
 * worker keeps every stack page it touched for as long as it lives, and
 * the run's frame is above the whole model loop. NULL (out cleared, e
 * set) when out of memory. */
static struct run *run_state_get(struct gh_run_result *out, struct gh_err *e)
{
	struct run *r = malloc(sizeof(*r));

	if (!r) {
		memset(out, 0, sizeof(*out));
		gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	return r;
}

enum gh_code gh_run_generate(struct gh_app *app, const struct gh_run_request *rq,
			     const struct gh_run_sink *sink, struct gh_run_result *out,
			     struct gh_err *e)
{
	struct run *r = run_state_get(out, e);
	enum gh_code rc = r ? generate(r, app, rq, sink, out, e) : GH_E_NOMEM;

	free(r);
	return rc;
}

/* --------------------------------------------------- approval resumption */

/* Approved with edited arguments: the call goes on with them, checked
 * once more as the gate would (a deny rule still wins), their digest the
 * one the approval binds to; the call keeps the asked arguments' digest
 * and who edited, for its audit rows. GH_E_BADREQ: refused (the model has
 * its error result). */
static enum gh_code take_edit(struct run *r, cJSON *c, const struct gh_approval *a,
			      struct gh_err *e)
{
	cJSON *ed = cJSON_Duplicate(a->edited_exact, 1);
	char hash[65];
	struct gh_err ce;
	enum gh_code rc;

	if (!ed)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	gh_approval_args_hash(ed, hash);
	gh_err_clear(&ce);
	if (strcmp(hash, a->edited_sha256))
		gh_err_set(&ce, GH_E_CONFLICT, "the edited arguments changed since they were "
			   "approved");
	else
		gh_answer_check_args(&r->ts, r->policy, a->tool_name, ed, &ce);
	if (ce.code != GH_OK) {
		cJSON_Delete(ed);
		rc = refuse(r, c, "denied", "denied", NULL, ce.msg,
			    gh_json_error_result("approval %s with edited arguments does not apply: %s",
					 a->id, ce.msg), e);
		return rc == GH_OK ? GH_E_BADREQ : rc;
	}
	cJSON_ReplaceItemInObjectCaseSensitive(c, "args", ed);
	cJSON_AddStringToObject(c, "askedArgsSha256", a->args_sha256);
	cJSON_AddStringToObject(c, "editedBy", a->decided_by);
	return GH_OK;
}

/* An approved call: a client call is released, a server call runs exactly
 * once (its execution claimed first), unless the arguments or the policy
 * changed since (the approval is then void). */
static enum gh_code settle_approved(struct run *r, cJSON *c, const struct gh_approval *a,
				    struct gh_err *e)
{
	const struct gh_tool *t = gh_toolset_find(&r->ts, gh_json_str(c, "toolName"));
	char hash[65];
	int64_t call_id = 0;
	enum gh_code rc;

	gh_approval_args_hash(cJSON_GetObjectItemCaseSensitive(c, "args"), hash);
	if (strcmp(hash, a->args_sha256) || !t ||
	    strcmp(a->policy_version, r->policy ? r->policy->version : ""))
		return refuse(r, c, "denied", "denied", NULL, "approval void: the arguments or the "
			      "policy changed since it was granted",
			      gh_json_error_result("approval %s no longer applies (the arguments or the "
					   "policy changed)", a->id), e);
	if (a->edited_sha256[0] && (rc = take_edit(r, c, a, e)) != GH_OK)
		return rc == GH_E_BADREQ ? GH_OK : rc;
	if (t->src == GH_SRC_CLIENT) {
		call_set_state(c, GH_CALL_RELEASED);
		cJSON_AddItemToArray(r->registered, cJSON_CreateString(gh_json_str(c, "toolCallId")));
		return GH_OK;
	}
	{
		/* the claim opens the call, in its transaction */
		struct audit_row row;

		rc = audit_row_build(r, "approved", c, NULL, -1, NULL, NULL, NULL, &row, e);
		if (rc == GH_OK)
			rc = gh_approval_claim_execution(r->app, a->id, &row.ev, &call_id, e);
		audit_row_free(&row);
	}
	if (rc == GH_E_CONFLICT)
		/* claimed before a crash: never run twice */
		return refuse(r, c, "failed", "failed", NULL, "execution interrupted",
			      gh_json_error_result("the approved call was interrupted by a restart and is "
					   "not run twice"), e);
	if (rc != GH_OK)
		return rc;
	return execute(r, c, t, call_id, e);
}

/* Settles the run's approval-bound calls from their decisions: approved
 * ones as settle_approved says, denied or expired ones get an error
 * result. */
static enum gh_code settle_approvals(struct run *r, struct gh_err *e)
{
	cJSON *c;
	enum gh_code rc;

	cJSON_ArrayForEach(c, r->calls) {
		struct gh_approval a;

		if (gh_call_state_of(c) != GH_CALL_PENDING_APPROVAL)
			continue;
		rc = gh_approval_get(r->app, NULL, gh_json_str(c, "approvalId"), &a, e);
		if (rc != GH_OK)
			return rc;
		if (strcmp(a.status, "pending")) {
			trace_tool_begin(r, c);
			gh_run_trace_settled(r->tool_span, &a);
		}
		if (!strcmp(a.status, "pending")) {
			rc = GH_OK;
		} else if (!strcmp(a.status, "approved")) {
			rc = settle_approved(r, c, &a, e);
		} else {
			call_done(c, !strcmp(a.status, "expired")
					     ? gh_json_error_result("approval expired: the call to %s was not "
							    "approved in time", a.tool_name)
					     : gh_json_error_result("denied by %s: %s", a.decided_by,
							    a.reason && *a.reason ? a.reason
										  : "no reason given"),
				  1);
			emit_call(r, GH_EV_TOOL_RESULT, c);
			rc = GH_OK;
		}
		trace_tool_end(r, c, rc, e);
		gh_approval_clear(&a);
		if (rc != GH_OK)
			return rc;
	}
	return GH_OK;
}

/* A resumed run acts as the key that started it. */
static enum gh_code act_as_owner(struct run *r, const char *key_id, struct gh_err *e)
{
	enum gh_code rc = gh_store_key_by_id(r->app->store, key_id, &r->owner_key.key, e);

	if (rc != GH_OK)
		return rc;
	r->owner_key.policy = gh_policy_for_key(gh_app_cfg(r->app), &r->owner_key.key);
	snprintf(r->owner_key.actor, sizeof(r->owner_key.actor), "key:%s", key_id);
	r->who = &r->owner_key;
	r->policy = r->owner_key.policy;
	return GH_OK;
}

/* A resumption that failed keeps what was settled (a call that ran stays
 * done): while approvals still wait the run stays suspended; otherwise the
 * continuation itself failed (upstream down) and the run is recorded as
 * failed with the reason. */
static void resume_failed(struct run *r, const struct gh_err *e)
{
	struct gh_err ce;
	int approvals = 0, clients = 0;
	enum gh_run_status st = GH_RUN_FAILED;

	if (!r->claimed)
		return;
	if (r->calls && calls_waiting(r, &approvals, &clients) && approvals)
		st = GH_RUN_SUSPENDED;
	r->error = e->msg;
	if (commit(r, st, &ce) != GH_OK)
		release_claim(r);
	else
		gh_warn("run %s: resumption failed, run %s: %s", r->run_id, gh_run_status_name(st),
			e->msg);
}

/* gh_run_resume with its run's working state at r. */
static enum gh_code resume(struct run *r, struct gh_app *app, const char *run_id,
			   const struct gh_run_sink *sink, struct gh_run_result *out,
			   struct gh_err *e)
{
	struct gh_run_row row;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	memset(r, 0, sizeof(*r));
	r->app = app;
	rc = gh_store_run_get(app->store, NULL, run_id, &row, e);
	if (rc != GH_OK)
		return rc;
	if (strcmp(row.status, gh_run_status_name(GH_RUN_SUSPENDED))) {
		rc = gh_err_set(e, GH_E_CONFLICT, "run %s is %s, not suspended", run_id, row.status);
		gh_run_row_clear(&row);
		return rc;
	}
	if ((rc = init_run(r, app, NULL, NULL, sink, e)) != GH_OK ||
	    (rc = act_as_owner(r, row.key_id, e)) != GH_OK)
		goto out;
	r->surface = "resume";
	r->resumed = 1;
	if ((rc = claim(r, run_id, GH_RUN_SUSPENDED, e)) != GH_OK)
		goto out;
	if ((rc = gh_run_hold_as(app, row.owner, run_id, 0, &r->hold, e)) != GH_OK ||
	    (rc = load_run(r, row.owner, run_id, e)) != GH_OK ||
	    (rc = continue_run(r, out, e)) != GH_OK)
		resume_failed(r, e);
out:
	if (rc != GH_OK)
		gh_run_result_clear(out);
	trace_run_end(r, rc, e);
	gh_run_row_clear(&row);
	run_free(r);
	return rc;
}

/* A resumed run may stream (the answer of a decided approval): its state
 * is allocated too. */
enum gh_code gh_run_resume(struct gh_app *app, const char *run_id,
			   const struct gh_run_sink *sink, struct gh_run_result *out,
			   struct gh_err *e)
{
	struct run *r = run_state_get(out, e);
	enum gh_code rc = r ? resume(r, app, run_id, sink, out, e) : GH_E_NOMEM;

	free(r);
	return rc;
}

/* Each call the client still owes: an "expired" row, and a tool error
 * in its place (the run's last state says what happened to it). */
static enum gh_code expire_calls(struct run *r, const char *why, struct gh_err *e)
{
	cJSON *c;
	enum gh_code rc;

	cJSON_ArrayForEach(c, r->calls) {
		if (!gh_call_state_client(gh_call_state_of(c)))
			continue;
		rc = audit_call(r, "expired", c, "expired", -1, NULL, why, NULL, e);
		if (rc != GH_OK)
			return rc;
		call_done(c, gh_json_error_result("%s", why), 1);
		cJSON_AddItemToArray(r->answered, cJSON_CreateString(gh_json_str(c, "toolCallId")));
	}
	return GH_OK;
}

enum gh_code gh_run_expire(struct gh_app *app, const char *run_id, struct gh_err *e)
{
	struct run r;
	struct gh_run_row row;
	char why[160];
	enum gh_code rc;

	memset(&r, 0, sizeof(r));
	rc = gh_store_run_get(app->store, NULL, run_id, &row, e);
	if (rc != GH_OK)
		return rc;
	if ((rc = init_run(&r, app, NULL, NULL, NULL, e)) != GH_OK ||
	    (rc = act_as_owner(&r, row.key_id, e)) != GH_OK)
		goto out;
	r.surface = "expiry";
	/* a result that came meanwhile claimed it first: nothing to do */
	if ((rc = claim(&r, run_id, GH_RUN_WAITING, e)) != GH_OK)
		goto out;
	if ((rc = gh_run_hold_as(app, row.owner, run_id, 0, &r.hold, e)) != GH_OK ||
	    (rc = load_run(&r, row.owner, run_id, e)) != GH_OK)
		goto fail;
	snprintf(why, sizeof(why), "no client tool result within %lld s "
		 "(agents.%s.client_tool_timeout_s)", (long long)client_timeout_s(&r),
		 r.agent->id);
	if ((rc = expire_calls(&r, why, e)) != GH_OK)
		goto fail;
	r.error = why;
	if ((rc = commit(&r, GH_RUN_EXPIRED, e)) != GH_OK)
		goto fail;
	gh_info("run %s %s", run_id, why);
	goto out;
fail:
	release_claim(&r);
out:
	gh_run_row_clear(&row);
	run_free(&r);
	return rc;
}

void gh_run_named_id(const char *owner, const char *name, char out[GH_ID_MAX])
{
	static const char label[] = "gatehouse run name";
	unsigned char h[12];
	crypto_generichash_state hs;

	crypto_generichash_init(&hs, NULL, 0, sizeof(h));
	crypto_generichash_update(&hs, (const unsigned char *)label, sizeof(label));
	crypto_generichash_update(&hs, (const unsigned char *)owner, strlen(owner) + 1);
	crypto_generichash_update(&hs, (const unsigned char *)name, strlen(name));
	crypto_generichash_final(&hs, h, sizeof(h));
	memcpy(out, "run_", 4);
	gh_hex(h, sizeof(h), out + 4);
}
