/*
 * run.c - the run engine; see run.h for the contract.
 *
 * A run's working state is one JSON document, persisted in runs.state:
 *
 *   { "v": 1,
 *     "context":     [CoreMessages sent to the model, without the system prompt],
 *     "persisted":   how many of them are already in the thread,
 *     "client_tools": [client tool definitions, as given with the first request],
 *     "step": n, "max_steps": n,
 *     "usage": {"input": n, "output": n},
 *     "calls": [the current step's tool calls while some still wait:
 *               {toolCallId, toolName, args, source, state, approvalId?,
 *                result?, isError?}] }
 *
 * A call's state is "pending_client" (handed to the client), "pending_approval"
 * (waiting on a person), "released" (approved client call handed out), or
 * "done" (result known). When every call of a step is done the tool message
 * is appended and the loop goes on.
 *
 * Threading: a run lives on one thread; concurrent continuations of one
 * run are serialised by claiming it in the store (waiting -> running).
 */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "approvals.h"
#include "audit.h"
#include "mcp.h"
#include "buf.h"
#include "hub.h"
#include "json.h"
#include "log.h"
#include "provider.h"
#include "ratelimit.h"
#include "schema.h"
#include "tools.h"

#define MAX_MESSAGES 1000
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

	char run_id[GH_ID_MAX];
	char thread_id[GH_NAME_MAX + 1];
	char resource_id[GH_NAME_MAX + 1];
	char title[GH_NAME_MAX + 1];
	int memory;
	int new_thread;
	int is_new;                        /* run not yet in the store */
	int claimed;                       /* we moved it to running */
	int stream;

	cJSON *state;                      /* owned */
	cJSON *context;                    /* in state */
	cJSON *calls;                      /* in state, or NULL */
	struct gh_toolset ts;

	int response_from;                 /* context index where this request's messages start */
	int64_t in_tok, out_tok;           /* this request */
	char *last_text;
	cJSON *last_calls, *last_results;
	const char *finish;
	cJSON *answered;                   /* tool call ids answered in this request */
	cJSON *registered;                 /* pending ids handed out in this request */
	int cancelled;
	const char *error;                 /* recorded with a failed run */
	cJSON *partial;                    /* tool calls seen streaming in this step */
};

/* ------------------------------------------------------------- events */

static void emit(struct run *r, const char *type, cJSON *payload)
{
	if (!payload)
		payload = cJSON_CreateObject();
	if (r->sink && r->sink->event && !r->cancelled && payload) {
		if (r->sink->event(r->sink->ud, r->run_id, type, payload))
			r->cancelled = 1;
	}
	if (payload)
		gh_hub_publish(r->app->hub, r->run_id, type, payload);
	cJSON_Delete(payload);
}

static int tick(void *ud)
{
	struct run *r = ud;

	if (r->cancelled)
		return 1;
	if (r->sink && r->sink->tick && r->sink->tick(r->sink->ud))
		r->cancelled = 1;
	return r->cancelled;
}

/* The payload of a "text-delta" event; NULL on OOM. */
static cJSON *text_payload(const char *text, size_t len)
{
	cJSON *p = cJSON_CreateObject();
	char *t = malloc(len + 1);

	if (p && t) {
		memcpy(t, text, len);
		t[len] = '\0';
		cJSON_AddStringToObject(p, "id", "0");
		cJSON_AddStringToObject(p, "text", t);
	}
	free(t);
	return p;
}

static int on_text_delta(void *ud, const char *text, size_t len)
{
	struct run *r = ud;
	cJSON *p;

	if (!r->sink || !r->sink->text) {
		emit(r, "text-delta", text_payload(text, len));
		return r->cancelled;
	}
	/* the sink writes the text itself; a tree only for the run's
	 * watchers, when there are any */
	if (!r->cancelled && r->sink->text(r->sink->ud, r->run_id, text, len))
		r->cancelled = 1;
	if (gh_hub_active(r->app->hub) && (p = text_payload(text, len))) {
		gh_hub_publish(r->app->hub, r->run_id, "text-delta", p);
		cJSON_Delete(p);
	}
	return r->cancelled;
}

/* Tool calls as they stream in: if the stream then breaks, each one is
 * recorded in the audit log as a call that never ran. */
static int on_tool_delta(void *ud, int index, const char *id, const char *name,
			 const char *frag)
{
	struct run *r = ud;
	cJSON *c;

	(void)frag;
	if (!name || !*name || !r->partial)
		return r->cancelled;
	cJSON_ArrayForEach(c, r->partial)
		if (gh_json_int(c, "index", -1) == index)
			return r->cancelled;
	c = cJSON_CreateObject();
	if (c) {
		cJSON_AddNumberToObject(c, "index", index);
		cJSON_AddStringToObject(c, "toolName", name);
		gh_json_add_str(c, "upstreamId", id);
		cJSON_AddItemToArray(r->partial, c);
	}
	return r->cancelled;
}

/* ----------------------------------------------------------- messages */

static enum gh_code norm_parts(const cJSON *content, const char *role, int idx, cJSON **out,
			       struct gh_err *e)
{
	const cJSON *p;
	cJSON *arr;

	*out = NULL;
	if (cJSON_IsString(content)) {
		*out = cJSON_CreateString(content->valuestring);
		return *out ? GH_OK : gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	if (!cJSON_IsArray(content))
		return gh_err_set(e, GH_E_BADREQ,
				  "messages[%d].content: expected a string or an array of parts", idx);
	arr = cJSON_CreateArray();
	if (!arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(p, content) {
		const char *type = gh_json_str(p, "type");
		cJSON *np = NULL;

		if (cJSON_IsString(p)) {
			np = cJSON_CreateObject();
			cJSON_AddStringToObject(np, "type", "text");
			cJSON_AddStringToObject(np, "text", p->valuestring);
		} else if (!type) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].content: a part has no type",
					  idx);
		} else if (!strcmp(type, "text")) {
			const char *t = gh_json_str(p, "text");

			np = cJSON_CreateObject();
			cJSON_AddStringToObject(np, "type", "text");
			cJSON_AddStringToObject(np, "text", t ? t : "");
		} else if (!strcmp(type, "tool-call") && !strcmp(role, "assistant")) {
			const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "args");

			if (!args)
				args = cJSON_GetObjectItemCaseSensitive(p, "input");
			if (!gh_json_str(p, "toolCallId") || !gh_json_str(p, "toolName")) {
				cJSON_Delete(arr);
				return gh_err_set(e, GH_E_BADREQ, "messages[%d]: a tool-call part needs "
						  "toolCallId and toolName", idx);
			}
			np = cJSON_CreateObject();
			cJSON_AddStringToObject(np, "type", "tool-call");
			cJSON_AddStringToObject(np, "toolCallId", gh_json_str(p, "toolCallId"));
			cJSON_AddStringToObject(np, "toolName", gh_json_str(p, "toolName"));
			cJSON_AddItemToObject(np, "args", args ? cJSON_Duplicate(args, 1)
							       : cJSON_CreateObject());
		} else if (!strcmp(type, "tool-result") && !strcmp(role, "tool")) {
			const cJSON *res = cJSON_GetObjectItemCaseSensitive(p, "result");

			if (!res) {
				/* AI SDK 5 shape: output {type, value} */
				const cJSON *o = cJSON_GetObjectItemCaseSensitive(p, "output");

				res = cJSON_GetObjectItemCaseSensitive(o, "value");
				if (!res)
					res = o;
			}
			if (!gh_json_str(p, "toolCallId")) {
				cJSON_Delete(arr);
				return gh_err_set(e, GH_E_BADREQ,
						  "messages[%d]: a tool-result part needs toolCallId", idx);
			}
			np = cJSON_CreateObject();
			cJSON_AddStringToObject(np, "type", "tool-result");
			cJSON_AddStringToObject(np, "toolCallId", gh_json_str(p, "toolCallId"));
			gh_json_add_str(np, "toolName", gh_json_str(p, "toolName"));
			cJSON_AddItemToObject(np, "result", res ? cJSON_Duplicate(res, 1)
							       : cJSON_CreateNull());
			if (gh_json_bool(p, "isError", 0))
				cJSON_AddBoolToObject(np, "isError", 1);
		} else if (!strcmp(type, "image") || !strcmp(type, "file") ||
			   !strcmp(type, "reasoning") || !strcmp(type, "step-start") ||
			   !strcmp(type, "source") || !strcmp(type, "tool-invocation")) {
			/* Not forwarded: gatehouse passes text and tool parts only. */
			continue;
		} else {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ,
					  "messages[%d]: part type \"%s\" is not allowed for role %s",
					  idx, type, role);
		}
		if (!np) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		cJSON_AddItemToArray(arr, np);
	}
	*out = arr;
	return GH_OK;
}

enum gh_code gh_run_normalize_messages(const cJSON *in, cJSON **out, struct gh_err *e)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *m;
	enum gh_code rc;
	int i = 0;

	*out = NULL;
	if (!arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (cJSON_IsString(in)) {
		cJSON *u = cJSON_CreateObject();

		cJSON_AddStringToObject(u, "role", "user");
		cJSON_AddStringToObject(u, "content", in->valuestring);
		cJSON_AddItemToArray(arr, u);
		*out = arr;
		return GH_OK;
	}
	if (!cJSON_IsArray(in)) {
		cJSON_Delete(arr);
		return gh_err_set(e, GH_E_BADREQ, "messages: expected a string or an array");
	}
	cJSON_ArrayForEach(m, in) {
		const char *role;
		const cJSON *content;
		cJSON *nm, *nc;

		if (i >= MAX_MESSAGES) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages: more than %d", MAX_MESSAGES);
		}
		if (cJSON_IsString(m)) {
			nm = cJSON_CreateObject();
			cJSON_AddStringToObject(nm, "role", "user");
			cJSON_AddStringToObject(nm, "content", m->valuestring);
			cJSON_AddItemToArray(arr, nm);
			i++;
			continue;
		}
		role = gh_json_str(m, "role");
		if (!cJSON_IsObject(m) || !role) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d]: expected {role, content}", i);
		}
		if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
		    strcmp(role, "tool")) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d].role: expected user, "
					  "assistant, system or tool, got \"%s\"", i, role);
		}
		content = cJSON_GetObjectItemCaseSensitive(m, "content");
		/* UI messages (Mastra streams) carry their text in parts */
		if ((!content || (cJSON_IsString(content) && !*content->valuestring)) &&
		    cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "parts")))
			content = cJSON_GetObjectItemCaseSensitive(m, "parts");
		if (!content) {
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_BADREQ, "messages[%d]: content is missing", i);
		}
		if ((rc = norm_parts(content, role, i, &nc, e)) != GH_OK) {
			cJSON_Delete(arr);
			return rc;
		}
		nm = cJSON_CreateObject();
		if (!nm) {
			cJSON_Delete(nc);
			cJSON_Delete(arr);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		cJSON_AddStringToObject(nm, "role", role);
		cJSON_AddItemToObject(nm, "content", nc);
		cJSON_AddItemToArray(arr, nm);
		i++;
	}
	*out = arr;
	return GH_OK;
}

char *gh_run_content_text(const cJSON *content)
{
	struct gh_buf b;
	const cJSON *p;

	if (cJSON_IsString(content))
		return strdup(content->valuestring);
	gh_buf_init(&b, 1 << 24);
	cJSON_ArrayForEach(p, content) {
		const char *t = gh_json_str(p, "text");

		if (t && !strcmp(gh_json_str(p, "type") ? gh_json_str(p, "type") : "", "text"))
			gh_buf_puts(&b, t);
	}
	return gh_buf_detach(&b);
}

/* History from the thread may start mid-exchange (the window cut a tool
 * call from its results) or hold a call never answered: keep only
 * well-formed sequences, so providers never see a dangling tool call. */
static cJSON *sanitize_history(cJSON *hist)
{
	cJSON *out = cJSON_CreateArray();
	int n = cJSON_GetArraySize(hist), i;

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		cJSON *m = cJSON_GetArrayItem(hist, i);
		const char *role = gh_json_str(m, "role");
		const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *p;
		int calls = 0;

		if (!role)
			continue;
		if (!strcmp(role, "tool"))
			continue; /* only kept together with its assistant message below */
		if (!strcmp(role, "assistant") && cJSON_IsArray(content)) {
			cJSON_ArrayForEach(p, content)
				calls += !strcmp(gh_json_str(p, "type") ? gh_json_str(p, "type") : "",
						 "tool-call");
		}
		if (calls) {
			cJSON *next = cJSON_GetArrayItem(hist, i + 1);
			const cJSON *nc = cJSON_GetObjectItemCaseSensitive(next, "content"), *q;
			int answered = 0;

			if (next && !strcmp(gh_json_str(next, "role") ? gh_json_str(next, "role") : "",
					    "tool")) {
				cJSON_ArrayForEach(p, content) {
					const char *id = gh_json_str(p, "toolCallId");

					if (!id)
						continue;
					cJSON_ArrayForEach(q, nc)
						if (!strcmp(gh_json_str(q, "toolCallId")
								    ? gh_json_str(q, "toolCallId") : "", id))
							answered++;
				}
			}
			if (answered == calls) {
				cJSON_AddItemToArray(out, cJSON_Duplicate(m, 1));
				cJSON_AddItemToArray(out, cJSON_Duplicate(next, 1));
				i++;
			} else {
				/* keep the text, drop the unanswered calls */
				char *t = gh_run_content_text(content);

				if (t && *t) {
					cJSON *tm = cJSON_CreateObject();

					cJSON_AddStringToObject(tm, "role", "assistant");
					cJSON_AddStringToObject(tm, "content", t);
					cJSON_AddItemToArray(out, tm);
				}
				free(t);
			}
			continue;
		}
		cJSON_AddItemToArray(out, cJSON_Duplicate(m, 1));
	}
	return out;
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

static const char *call_state(const cJSON *c)
{
	const char *s = gh_json_str(c, "state");

	return s ? s : "";
}

static void call_set_state(cJSON *c, const char *st)
{
	cJSON *it = cJSON_GetObjectItemCaseSensitive(c, "state");

	/* cJSON_ReplaceItemViaPointer would drop the key; this keeps it */
	if (it)
		cJSON_ReplaceItemInObjectCaseSensitive(c, "state", cJSON_CreateString(st));
	else
		cJSON_AddStringToObject(c, "state", st);
}

/* Sets the result (takes ownership) and marks the call done. */
static void call_done(cJSON *c, cJSON *result, int is_error)
{
	cJSON_DeleteItemFromObjectCaseSensitive(c, "result");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "isError");
	cJSON_AddItemToObject(c, "result", result ? result : cJSON_CreateNull());
	cJSON_AddBoolToObject(c, "isError", is_error);
	call_set_state(c, "done");
}

static cJSON *error_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static cJSON *error_result(const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	cJSON *o;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = cJSON_CreateObject();
	if (o)
		cJSON_AddStringToObject(o, "error", msg);
	return o;
}

/* --------------------------------------------------------------- audit */

/* Writes one audit row about call c and waits for its commit. A failure is
 * GH_E_UNAVAILABLE: the caller must not run the tool (fail closed). */
static enum gh_code audit_call(struct run *r, const char *event, const cJSON *c,
			       const char *outcome, int64_t duration_ms, const char *error,
			       const char *reason, const cJSON *result, struct gh_err *e)
{
	struct gh_audit_event ev;
	char *args = NULL, *detail = NULL, *res = NULL;
	cJSON *d = NULL;
	struct gh_err ae;
	enum gh_code rc;

	memset(&ev, 0, sizeof(ev));
	args = gh_audit_args_json(cJSON_GetObjectItemCaseSensitive(c, "args"),
				  &r->cfg->audit.redact, (size_t)r->cfg->audit.max_args_bytes);
	d = cJSON_CreateObject();
	if (!args || !d) {
		rc = gh_err_set(e, GH_E_UNAVAILABLE, "audit log unavailable: out of memory; "
						     "the tool was not run");
		goto out;
	}
	if (r->surface)
		cJSON_AddStringToObject(d, "surface", r->surface);
	if (gh_json_str(c, "approvalId"))
		cJSON_AddStringToObject(d, "approval_id", gh_json_str(c, "approvalId"));
	if (gh_json_str(c, "mcpServer")) {
		cJSON *m = cJSON_AddObjectToObject(d, "mcp");

		gh_json_add_str(m, "server", gh_json_str(c, "mcpServer"));
		gh_json_add_str(m, "tool", gh_json_str(c, "mcpTool"));
		if (gh_json_str(c, "mcpSession"))
			cJSON_AddStringToObject(m, "session", gh_json_str(c, "mcpSession"));
	}
	if (result) {
		res = gh_audit_args_json(result, &r->cfg->audit.redact, RESULT_PREVIEW);
		if (res)
			cJSON_AddStringToObject(d, "result", res);
	}
	detail = gh_json_dump(d);
	ev.event = event;
	ev.key_id = r->who->key.id[0] ? r->who->key.id : NULL;
	ev.owner = r->who->key.owner[0] ? r->who->key.owner : NULL;
	ev.admin_user = r->who->admin_user[0] ? r->who->admin_user : NULL;
	ev.agent_id = r->agent->id;
	ev.thread_id = r->thread_id[0] ? r->thread_id : NULL;
	ev.run_id = r->run_id;
	ev.tool_call_id = gh_json_str(c, "toolCallId");
	ev.tool_name = gh_json_str(c, "toolName");
	ev.source = gh_json_str(c, "source");
	ev.args = args;
	ev.outcome = outcome;
	ev.duration_ms = duration_ms;
	ev.error = error;
	ev.reason = reason;
	ev.detail = detail;
	if (gh_json_str(c, "approvalId")) {
		/* after its decision, every row about an approval-bound call says
		 * how the approved call ended: the approval records it too */
		const char *how = !strcmp(event, "denied") ? "not_run"
				  : !strcmp(event, "executed") ||
				    (!strcmp(event, "client_result") && !strcmp(outcome, "ok"))
					  ? "ok" : "error";
		/* the approval's owner reads it: the error the caller saw (an
		 * HTTP tool's address stays in the audit row's error) */
		const char *said = !strcmp(how, "ok") ? NULL
				   : result && gh_json_str(result, "error") ? gh_json_str(result, "error")
				   : error ? error : reason;

		rc = gh_approval_finish_execution(r->app, gh_json_str(c, "approvalId"), how, said,
						  &ev, &ae);
	} else {
		rc = gh_store_audit_append(r->app->store, &ev, NULL, &ae);
	}
	if (rc != GH_OK) {
		gh_error("audit: cannot record %s of %s in run %s: %s", event, ev.tool_name,
			 r->run_id, ae.msg);
		rc = gh_err_set(e, GH_E_UNAVAILABLE,
				"audit log unavailable (%s); the tool was not run", ae.msg);
	}
out:
	free(args);
	free(detail);
	free(res);
	cJSON_Delete(d);
	return rc;
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

static void emit_result(struct run *r, const cJSON *c)
{
	cJSON *p = call_payload(c);

	if (!p)
		return;
	cJSON_AddItemToObject(p, "result",
			      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "result"), 1));
	cJSON_AddBoolToObject(p, "isError", gh_json_bool(c, "isError", 0));
	emit(r, "tool-result", p);
}

/* A federated tool's call: its progress notifications become
 * "tool-progress" events (streams show them; nothing else waits for
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
	cJSON *p = call_payload(pc->c);

	if (!p)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(p, "args");
	cJSON_AddNumberToObject(p, "progress", progress);
	if (total >= 0)
		cJSON_AddNumberToObject(p, "total", total);
	if (message)
		cJSON_AddStringToObject(p, "message", message);
	emit(pc->r, "tool-progress", p);
}

/* The text a failed tool result shows: its "error", or the first text
 * block of an MCP result's content. Borrowed from result. */
static const char *result_error(const cJSON *result)
{
	const char *s = gh_json_str(result, "error");
	const cJSON *b;

	if (s)
		return s;
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(result, "content")) {
		if ((s = gh_json_str(b, "text")))
			return s;
	}
	return "the tool reported an error";
}

/* Runs an allowed server or memory tool, with its "executed"/"failed" row
 * written before the result is used. */
static enum gh_code execute(struct run *r, cJSON *c, const struct gh_tool *t, struct gh_err *e)
{
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
	struct progress_ctx pc = {NULL, NULL};
	cJSON *result = NULL;
	int is_error = 0;
	int64_t t0 = gh_mono_ns(), dur;
	enum gh_code rc;
	struct gh_err te;
	char detail[GH_ERR_MSG_MAX];

	gh_err_clear(&te);
	detail[0] = '\0';
	if (t->mcp) {
		struct gh_mcp_call_opts mo = {mcp_tick, 0, 0, on_mcp_progress, &pc};
		char session[256];

		pc.r = r;
		pc.c = c;
		rc = gh_mcp_call(r->app->mcp, t->mcp, args, &mo, &result, &is_error, session,
				 sizeof(session), &te);
		if (session[0])
			cJSON_AddStringToObject(c, "mcpSession", session);
	} else if (t->src == GH_SRC_MEMORY) {
		rc = gh_tool_memory_exec(r->app->store, r->who->key.owner, r->resource_id, t->name,
					 args, &result, &is_error, &te);
	} else {
		rc = gh_tool_http_exec(t->conf, args, tick, r, &result, &is_error, detail,
				       sizeof(detail), &te);
	}
	dur = (gh_mono_ns() - t0) / 1000000;
	if (rc == GH_E_CANCELLED) {
		r->cancelled = 1;
		audit_call(r, "failed", c, "error", dur, "cancelled: the client went away", NULL,
			   NULL, e);
		return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	}
	if (rc != GH_OK) {
		/* gatehouse itself failed (database): the model hears about it */
		is_error = 1;
		result = error_result("tool %s failed: %s", t->name, te.msg);
		gh_warn("tool %s in run %s failed: %s", t->name, r->run_id, te.msg);
	}
	if (!result)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = audit_call(r, is_error ? "failed" : "executed", c, is_error ? "error" : "ok", dur,
			!is_error ? NULL : detail[0] ? detail : result_error(result), NULL, result, e);
	if (rc != GH_OK) {
		cJSON_Delete(result);
		return rc;
	}
	call_done(c, result, is_error);
	emit_result(r, c);
	return GH_OK;
}

/* A refused call: audit row, then an error result the model sees. */
static enum gh_code refuse(struct run *r, cJSON *c, const char *event, const char *reason,
			   cJSON *result, struct gh_err *e)
{
	enum gh_code rc = audit_call(r, event, c, event, -1, NULL, reason, NULL, e);

	if (rc != GH_OK) {
		cJSON_Delete(result);
		return rc;
	}
	call_done(c, result, 1);
	emit_result(r, c);
	return GH_OK;
}

/* The gate for one call: allowlist -> rate limit -> arguments -> approval,
 * then run it, hand it to the client or suspend it. */
static enum gh_code gate(struct run *r, cJSON *c, struct gh_err *e)
{
	const char *name = gh_json_str(c, "toolName");
	const struct gh_tool *t = gh_toolset_find(&r->ts, name);
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
	const char *raw = gh_json_str(c, "rawArgs");
	struct gh_decision d;
	char msg[512];
	enum gh_code rc;

	if (!t) {
		return refuse(r, c, "denied", "unknown tool",
			      error_result("unknown tool \"%s\": not available to this agent", name),
			      e);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(c, "source");
	cJSON_AddStringToObject(c, "source", gh_tool_source_name(t->src));
	if (t->mcp && !cJSON_GetObjectItemCaseSensitive(c, "mcpServer")) {
		cJSON_AddStringToObject(c, "mcpServer", t->mcp->server);
		cJSON_AddStringToObject(c, "mcpTool", t->mcp->upstream_name);
	}
	d = t->decision;
	if (d.verdict == GH_V_DENY) {
		snprintf(msg, sizeof(msg), "denied by %s", d.rule);
		return refuse(r, c, "denied", d.rule, error_result("%s", msg), e);
	}
	{
		const char *lrule = NULL;
		int64_t per_min = gh_policy_tool_limit(r->policy, name, &lrule);

		if (per_min > 0 && r->app->rl) {
			/* a minute's budget may be spent at once, then refills */
			struct gh_rl_limit lim = {per_min, 60000, per_min - 1};
			struct gh_rl_result res;
			char key[320];

			snprintf(key, sizeof(key), "tool:%s:%s", r->who->key.id, name);
			if (gh_rl_take(r->app->rl, key, &lim, 1, &res) != GH_OK || !res.allowed) {
				int64_t s = res.retry_after_ms > 0 ? (res.retry_after_ms + 999) / 1000
								   : 1;

				snprintf(msg, sizeof(msg), "policy \"%s\": rate_limits."
					 "tool_calls_per_minute \"%s\" = %lld", r->policy->name,
					 lrule ? lrule : "*", (long long)per_min);
				return refuse(r, c, "rate_limited", msg,
					      error_result("rate limited, retry after %lld s "
							   "(%s)", (long long)s, msg),
					      e);
			}
		}
	}
	if (!args || raw) {
		char ex[128];

		gh_strlcpy(ex, raw ? raw : "", sizeof(ex));
		rc = audit_call(r, "failed", c, "error", -1, "arguments are not valid JSON", NULL,
				NULL, e);
		if (rc != GH_OK)
			return rc;
		call_done(c, error_result("the arguments for %s are not valid JSON: %s", name, ex),
			  1);
		emit_result(r, c);
		return GH_OK;
	}
	if (t->schema && gh_schema_validate(t->schema, args, msg, sizeof(msg)) != 0) {
		rc = audit_call(r, "failed", c, "error", -1, msg, "invalid arguments", NULL, e);
		if (rc != GH_OK)
			return rc;
		call_done(c, error_result("invalid arguments for %s: %s", name, msg), 1);
		emit_result(r, c);
		return GH_OK;
	}
	if (d.verdict == GH_V_APPROVAL) {
		struct gh_approval_req ar = {
			.who = r->who, .agent_id = r->agent->id,
			.thread_id = r->thread_id[0] ? r->thread_id : NULL, .run_id = r->run_id,
			.tool_call_id = gh_json_str(c, "toolCallId"), .tool_name = name,
			.source = t->src, .args = args, .decision = &d, .surface = r->surface,
		};
		char id[GH_ID_MAX];
		int64_t expires = 0;
		cJSON *p;

		if ((rc = gh_approval_create(r->app, &ar, id, &expires, e)) != GH_OK)
			return rc;
		cJSON_AddStringToObject(c, "approvalId", id);
		cJSON_AddNumberToObject(c, "expiresAt", (double)expires);
		call_set_state(c, "pending_approval");
		p = call_payload(c);
		if (p) {
			cJSON_AddStringToObject(p, "approvalId", id);
			cJSON_AddStringToObject(p, "approver",
						d.approver == GH_APPROVER_CALLER ? "caller" : "admin");
			cJSON_AddStringToObject(p, "reason", d.rule);
			gh_json_add_time(p, "expiresAt", expires);
		}
		emit(r, "tool-call-approval", p);
		return GH_OK;
	}
	rc = audit_call(r, "allowed", c, "allowed", -1, NULL, d.rule, NULL, e);
	if (rc != GH_OK)
		return rc;
	if (t->src == GH_SRC_CLIENT) {
		call_set_state(c, "pending_client");
		cJSON_AddItemToArray(r->registered, cJSON_CreateString(gh_json_str(c, "toolCallId")));
		return GH_OK;
	}
	return execute(r, c, t, e);
}

/* ------------------------------------------------------------ persist */

static cJSON *output_json(struct run *r)
{
	cJSON *o = cJSON_CreateObject(), *u;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "text", r->last_text ? r->last_text : "");
	cJSON_AddStringToObject(o, "finishReason", r->finish ? r->finish : "stop");
	u = cJSON_AddObjectToObject(o, "usage");
	cJSON_AddNumberToObject(u, "inputTokens",
				(double)gh_json_int(state_get(r, "usage"), "input", 0));
	cJSON_AddNumberToObject(u, "outputTokens",
				(double)gh_json_int(state_get(r, "usage"), "output", 0));
	return o;
}

static enum gh_code commit(struct run *r, const char *status, struct gh_err *e)
{
	struct gh_run_commit c;
	int persisted = (int)state_int(r, "persisted"), n = cJSON_GetArraySize(r->context), i;
	cJSON *msgs = cJSON_CreateArray(), *output = NULL;
	const char **pid = NULL, **pname = NULL, **psrc = NULL, **aid = NULL;
	size_t np = 0, na = 0;
	enum gh_code rc;

	if (!msgs)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	for (i = persisted; i < n; i++)
		cJSON_AddItemReferenceToArray(msgs, cJSON_GetArrayItem(r->context, i));
	np = (size_t)cJSON_GetArraySize(r->registered);
	na = (size_t)cJSON_GetArraySize(r->answered);
	pid = calloc(np + 1, sizeof(*pid));
	pname = calloc(np + 1, sizeof(*pname));
	psrc = calloc(np + 1, sizeof(*psrc));
	aid = calloc(na + 1, sizeof(*aid));
	if (!pid || !pname || !psrc || !aid) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < (int)np; i++) {
		const char *id = cJSON_GetArrayItem(r->registered, i)->valuestring;
		const cJSON *cl;

		pid[i] = id;
		pname[i] = "";
		psrc[i] = "client";
		cJSON_ArrayForEach(cl, r->calls) {
			if (!strcmp(gh_json_str(cl, "toolCallId"), id)) {
				pname[i] = gh_json_str(cl, "toolName");
				psrc[i] = gh_json_str(cl, "source");
			}
		}
	}
	for (i = 0; i < (int)na; i++)
		aid[i] = cJSON_GetArrayItem(r->answered, i)->valuestring;
	state_set_int(r, "persisted", n);
	if (!strcmp(status, "completed"))
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
	c.status = status;
	c.expect_status = r->is_new ? NULL : "running";
	c.state = r->state;
	c.output = output;
	c.error = r->error;
	c.pending_ids = pid;
	c.pending_names = pname;
	c.pending_sources = psrc;
	c.npending = np;
	c.answered_ids = aid;
	c.nanswered = na;
	rc = gh_store_run_commit(r->app->store, &c, e);
	if (rc == GH_OK) {
		r->is_new = 0;
		r->new_thread = 0;
		r->claimed = 0;
		cJSON_Delete(r->registered);
		cJSON_Delete(r->answered);
		r->registered = cJSON_CreateArray();
		r->answered = cJSON_CreateArray();
	} else {
		state_set_int(r, "persisted", persisted);
	}
out:
	free(pid);
	free(pname);
	free(psrc);
	free(aid);
	cJSON_Delete(output);
	cJSON_Delete(msgs);
	return rc;
}

/* ------------------------------------------------------------ the loop */

static char *system_prompt(struct run *r)
{
	struct gh_buf b;
	char *wm = NULL;
	struct gh_err e;

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
	return gh_buf_detach(&b);
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

static int calls_waiting(struct run *r, int *approvals, int *clients)
{
	cJSON *c;
	int n = 0;

	*approvals = *clients = 0;
	cJSON_ArrayForEach(c, r->calls) {
		const char *s = call_state(c);

		if (!strcmp(s, "pending_approval"))
			(*approvals)++;
		else if (!strcmp(s, "pending_client") || !strcmp(s, "released"))
			(*clients)++;
		else
			continue;
		n++;
	}
	return n;
}

static const char *finish_name(enum gh_finish f)
{
	switch (f) {
	case GH_FINISH_STOP: return "stop";
	case GH_FINISH_LENGTH: return "length";
	case GH_FINISH_TOOL_CALLS: return "tool-calls";
	case GH_FINISH_CONTENT_FILTER: return "content-filter";
	case GH_FINISH_OTHER: return "stop";
	}
	return "stop";
}

static void add_usage(struct run *r, int64_t in, int64_t out)
{
	cJSON *u = state_get(r, "usage");

	if (!u)
		u = cJSON_AddObjectToObject(r->state, "usage");
	int64_t pin = gh_json_int(u, "input", 0), pout = gh_json_int(u, "output", 0);

	r->in_tok += in;
	r->out_tok += out;
	cJSON_DeleteItemFromObjectCaseSensitive(u, "input");
	cJSON_DeleteItemFromObjectCaseSensitive(u, "output");
	cJSON_AddNumberToObject(u, "input", (double)(pin + in));
	cJSON_AddNumberToObject(u, "output", (double)(pout + out));
}

static cJSON *usage_payload(int64_t in, int64_t out)
{
	cJSON *u = cJSON_CreateObject();

	if (!u)
		return NULL;
	cJSON_AddNumberToObject(u, "inputTokens", (double)in);
	cJSON_AddNumberToObject(u, "outputTokens", (double)out);
	cJSON_AddNumberToObject(u, "totalTokens", (double)(in + out));
	return u;
}

static void emit_step_finish(struct run *r, const char *type, const char *reason)
{
	cJSON *p = cJSON_CreateObject(), *sr, *o;

	if (!p)
		return;
	sr = cJSON_AddObjectToObject(p, "stepResult");
	cJSON_AddStringToObject(sr, "reason", reason);
	cJSON_AddBoolToObject(sr, "isContinued", 0);
	o = cJSON_AddObjectToObject(p, "output");
	cJSON_AddItemToObject(o, "usage", usage_payload(r->in_tok, r->out_tok));
	emit(r, type, p);
}

/* Token budget: refused before the call when the key has spent it. */
static enum gh_code tokens_check(struct run *r, struct gh_err *e)
{
	struct gh_rl_limit lim;
	struct gh_rl_result res;
	char key[160];

	if (!r->policy || r->policy->tokens_per_minute <= 0 || !r->app->rl)
		return GH_OK;
	lim = (struct gh_rl_limit){r->policy->tokens_per_minute, 60000,
				   r->policy->tokens_per_minute - 1};
	snprintf(key, sizeof(key), "tok:%s", r->who->key.id);
	if (gh_rl_peek(r->app->rl, key, &lim, 1, &res) != GH_OK || !res.allowed) {
		gh_debug("tokens: %s refused: remaining %lld retry %lld", key,
			 (long long)res.remaining, (long long)res.retry_after_ms);
		e->retry_after = (int)((res.retry_after_ms + 999) / 1000);
		gh_err_set(e, GH_E_RATELIMIT, "policy \"%s\": rate_limits.tokens_per_minute = %lld "
			   "spent; retry after %d s", r->policy->name,
			   (long long)r->policy->tokens_per_minute,
			   (int)((res.retry_after_ms + 999) / 1000));
		e->retry_after = (int)((res.retry_after_ms + 999) / 1000);
		return GH_E_RATELIMIT;
	}
	return GH_OK;
}

static void tokens_charge(struct run *r, int64_t n)
{
	struct gh_rl_limit lim;
	char key[160];

	if (!r->policy || r->policy->tokens_per_minute <= 0 || !r->app->rl || n <= 0)
		return;
	lim = (struct gh_rl_limit){r->policy->tokens_per_minute, 60000,
				   r->policy->tokens_per_minute - 1};
	snprintf(key, sizeof(key), "tok:%s", r->who->key.id);
	gh_debug("tokens: %s charged %lld", key, (long long)n);
	gh_rl_charge(r->app->rl, key, &lim, n);
}

/* One model call; appends the assistant message and fills r->calls. */
static enum gh_code model_step(struct run *r, struct gh_err *e)
{
	struct gh_chat_request req;
	struct gh_chat_events ev = {NULL, NULL, tick, r, 0, 0};
	struct gh_chat_response resp;
	char *sys = NULL, detail[GH_ERR_MSG_MAX];
	cJSON *msg = NULL, *content, *calls;
	enum gh_code rc;
	size_t i;

	if (r->sink) {
		ev.wake_fd = r->sink->wake_fd;
		ev.tick_ms = r->sink->tick_ms;
	}
	if ((rc = tokens_check(r, e)) != GH_OK)
		return rc;
	memset(&resp, 0, sizeof(resp));
	sys = system_prompt(r);
	memset(&req, 0, sizeof(req));
	req.model = r->agent->model;
	req.system = sys;
	req.messages = r->context;
	req.tools = r->ts.specs;
	req.ntools = r->ts.nspecs;
	req.has_temperature = r->agent->has_temperature;
	req.temperature = r->agent->temperature;
	req.max_tokens = r->agent->max_tokens;
	req.stream = r->stream;
	detail[0] = '\0';
	req.error_detail = detail;
	req.error_detail_cap = sizeof(detail);
	if (r->stream) {
		ev.text_delta = on_text_delta;
		ev.tool_delta = on_tool_delta;
		cJSON_Delete(r->partial);
		r->partial = cJSON_CreateArray();
	}
	rc = gh_provider_chat(r->agent->prov, &req, &ev, &resp, e);
	free(sys);
	if (rc != GH_OK) {
		cJSON *pc;

		if (rc == GH_E_CANCELLED)
			r->cancelled = 1;
		else
			audit_model_failed(r, e->msg, detail[0] ? detail : e->msg);
		/* a stream that broke mid tool call: the call never ran */
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
			audit_call(r, "failed", c, rc == GH_E_CANCELLED ? "cancelled" : "error", -1,
				   detail[0] ? detail : e->msg,
				   "the model's tool call did not arrive whole; not run", NULL, &ae);
			cJSON_Delete(c);
		}
		return rc;
	}
	add_usage(r, resp.input_tokens, resp.output_tokens);
	tokens_charge(r, resp.input_tokens + resp.output_tokens);
	if (!r->stream && resp.text && *resp.text)
		on_text_delta(r, resp.text, strlen(resp.text));
	free(r->last_text);
	r->last_text = strdup(resp.text ? resp.text : "");
	msg = cJSON_CreateObject();
	calls = cJSON_CreateArray();
	if (!msg || !calls || !r->last_text) {
		cJSON_Delete(msg);
		cJSON_Delete(calls);
		gh_chat_response_clear(&resp);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_AddStringToObject(msg, "role", "assistant");
	if (resp.ncalls == 0) {
		cJSON_AddStringToObject(msg, "content", resp.text ? resp.text : "");
	} else {
		content = cJSON_AddArrayToObject(msg, "content");
		if (resp.text && *resp.text) {
			cJSON *tp = cJSON_CreateObject();

			cJSON_AddStringToObject(tp, "type", "text");
			cJSON_AddStringToObject(tp, "text", resp.text);
			cJSON_AddItemToArray(content, tp);
		}
		for (i = 0; i < resp.ncalls; i++) {
			struct gh_tool_call *tc = &resp.calls[i];
			char id[GH_ID_MAX];
			cJSON *part = cJSON_CreateObject(), *call = cJSON_CreateObject();

			/* Gateway ids: unique across runs, so a result finds its run
			 * by id alone whatever ids the upstream uses. */
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
			cJSON_AddStringToObject(call, "state", "new");
			cJSON_AddItemToArray(calls, call);
		}
	}
	cJSON_AddItemToArray(r->context, msg);
	cJSON_Delete(r->last_calls);
	r->last_calls = NULL;
	cJSON_Delete(r->last_results);
	r->last_results = NULL;
	if (resp.ncalls) {
		cJSON_AddItemToObject(r->state, "calls", calls);
		r->calls = calls;
		r->last_calls = cJSON_Duplicate(calls, 1);
	} else {
		cJSON_Delete(calls);
		r->finish = finish_name(resp.finish);
	}
	gh_chat_response_clear(&resp);
	return GH_OK;
}

/* Gates every new call of the step, in order. */
static enum gh_code gate_calls(struct run *r, struct gh_err *e)
{
	cJSON *c;
	enum gh_code rc;

	cJSON_ArrayForEach(c, r->calls) {
		if (strcmp(call_state(c), "new"))
			continue;
		emit(r, "tool-call", call_payload(c));
		if ((rc = gate(r, c, e)) != GH_OK)
			return rc;
		if (r->cancelled)
			return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	}
	return GH_OK;
}

/* Runs steps until the model answers, a call must wait, or max steps. */
static enum gh_code loop(struct run *r, struct gh_err *e)
{
	enum gh_code rc;
	int approvals, clients;

	for (;;) {
		if (r->calls) {
			if (calls_waiting(r, &approvals, &clients)) {
				r->finish = approvals ? "suspended" : "tool-calls";
				emit_step_finish(r, "step-finish", r->finish);
				return GH_OK;
			}
			if ((rc = close_step(r, e)) != GH_OK)
				return rc;
			emit_step_finish(r, "step-finish", "tool-calls");
		}
		if (state_int(r, "step") >= state_int(r, "max_steps")) {
			r->finish = "max-steps";
			return GH_OK;
		}
		state_set_int(r, "step", (double)(state_int(r, "step") + 1));
		{
			cJSON *p = cJSON_CreateObject();

			if (p) {
				char mid[GH_ID_MAX];

				gh_id_new("msg_", mid, sizeof(mid));
				cJSON_AddStringToObject(p, "messageId", mid);
				cJSON_AddNumberToObject(p, "step", (double)state_int(r, "step"));
			}
			emit(r, "step-start", p);
		}
		if ((rc = model_step(r, e)) != GH_OK)
			return rc;
		if (r->cancelled)
			return gh_err_set(e, GH_E_CANCELLED, "cancelled");
		if (!r->calls) {
			emit_step_finish(r, "step-finish", r->finish);
			return GH_OK;
		}
		if ((rc = gate_calls(r, e)) != GH_OK)
			return rc;
	}
}

/* ------------------------------------------------------------- results */

static void fill_result(struct run *r, struct gh_run_result *out, const char *status)
{
	cJSON *c;
	int i, n = cJSON_GetArraySize(r->context);

	gh_strlcpy(out->run_id, r->run_id, sizeof(out->run_id));
	gh_strlcpy(out->thread_id, r->thread_id, sizeof(out->thread_id));
	gh_strlcpy(out->resource_id, r->resource_id, sizeof(out->resource_id));
	gh_strlcpy(out->status, status, sizeof(out->status));
	out->finish_reason = r->finish ? r->finish : "stop";
	out->text = strdup(r->last_text ? r->last_text : "");
	out->tool_calls = cJSON_CreateArray();
	out->tool_results = r->last_results ? cJSON_Duplicate(r->last_results, 1)
					    : cJSON_CreateArray();
	out->pending = cJSON_CreateArray();
	out->approvals = cJSON_CreateArray();
	out->messages = cJSON_CreateArray();
	out->input_tokens = r->in_tok;
	out->output_tokens = r->out_tok;
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
		const char *s = call_state(c);

		if (!strcmp(s, "pending_client") || !strcmp(s, "released")) {
			cJSON_AddItemToArray(out->pending, call_payload(c));
		} else if (!strcmp(s, "pending_approval")) {
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
	for (i = r->response_from; i < n; i++)
		cJSON_AddItemToArray(out->messages,
				     cJSON_Duplicate(cJSON_GetArrayItem(r->context, i), 1));
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
	cJSON_Delete(r->partial);
	gh_toolset_free(&r->ts);
	cJSON_Delete(r->state);
	cJSON_Delete(r->last_calls);
	cJSON_Delete(r->last_results);
	cJSON_Delete(r->answered);
	cJSON_Delete(r->registered);
	free(r->last_text);
}

/* Ends a request: completes or parks the run, answers out. */
static enum gh_code finish_run(struct run *r, struct gh_run_result *out, struct gh_err *e)
{
	int approvals = 0, clients = 0;
	const char *status = "completed";
	enum gh_code rc;

	if (r->calls && calls_waiting(r, &approvals, &clients))
		status = approvals ? "suspended" : "waiting";
	rc = commit(r, status, e);
	if (rc != GH_OK)
		return rc;
	{
		cJSON *p = cJSON_CreateObject(), *sr, *o;

		if (p) {
			sr = cJSON_AddObjectToObject(p, "stepResult");
			cJSON_AddStringToObject(sr, "reason", r->finish ? r->finish : "stop");
			o = cJSON_AddObjectToObject(p, "output");
			cJSON_AddItemToObject(o, "usage", usage_payload(r->in_tok, r->out_tok));
			cJSON_AddStringToObject(p, "status", status);
		}
		emit(r, "finish", p);
	}
	fill_result(r, out, status);
	return GH_OK;
}

/* The client went away mid-run: the run is recorded as cancelled (without
 * touching the thread, so no half exchange is left there). */
static void record_cancelled(struct run *r)
{
	struct gh_err ce;
	char tid[GH_NAME_MAX + 1];
	int new_thread = r->new_thread;

	gh_strlcpy(tid, r->thread_id, sizeof(tid));
	r->thread_id[0] = '\0';
	r->new_thread = 0;
	r->error = "cancelled: the client went away";
	cJSON_DeleteItemFromObjectCaseSensitive(r->state, "calls");
	r->calls = NULL;
	cJSON_Delete(r->registered);
	r->registered = cJSON_CreateArray();
	if (commit(r, "cancelled", &ce) != GH_OK)
		gh_warn("run %s: could not record its cancellation: %s", r->run_id, ce.msg);
	else
		gh_info("run %s cancelled: the client went away", r->run_id);
	gh_strlcpy(r->thread_id, tid, sizeof(r->thread_id));
	r->new_thread = new_thread;
}

/* Gives a claimed run back (a continuation that failed): it keeps waiting
 * exactly as before this request. */
static void release_claim(struct run *r, const char *back_to)
{
	struct gh_err ignore;

	if (r->claimed)
		gh_store_run_transition(r->app->store, r->run_id, "running", back_to, &ignore);
	r->claimed = 0;
}

static enum gh_code setup_tools(struct run *r, struct gh_err *e)
{
	return gh_toolset_build(r->cfg, r->app->mcp, r->agent, r->policy,
				state_get(r, "client_tools"), &r->ts, e);
}

static enum gh_code settle_approvals(struct run *r, struct gh_err *e);

/* ------------------------------------------------------- continuation */

/* Collects tool-result parts from role:"tool" messages (borrowed). */
static cJSON *collect_results(const cJSON *messages)
{
	cJSON *out = cJSON_CreateArray();
	const cJSON *m, *p;

	if (!out)
		return NULL;
	cJSON_ArrayForEach(m, messages) {
		if (strcmp(gh_json_str(m, "role") ? gh_json_str(m, "role") : "", "tool"))
			continue;
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "content"))
			if (!strcmp(gh_json_str(p, "type") ? gh_json_str(p, "type") : "",
				    "tool-result"))
				cJSON_AddItemReferenceToArray(out, (cJSON *)(uintptr_t)p);
	}
	return out;
}

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
	if (!cJSON_IsArray(r->context)) {
		gh_run_row_clear(&row);
		return gh_err_set(e, GH_E_IO, "run %s has damaged state", run_id);
	}
	if (!r->agent || strcmp(r->agent->id, row.agent_id)) {
		const struct gh_agent_conf *a = gh_config_agent(r->cfg, row.agent_id);

		if (!a) {
			gh_run_row_clear(&row);
			return gh_err_set(e, GH_E_CONFLICT, "run %s belongs to agent %s, which is "
					  "no longer configured", run_id, row.agent_id);
		}
		if (r->agent) {
			rc = gh_err_set(e, GH_E_CONFLICT, "run %s belongs to agent %s", run_id,
					row.agent_id);
			gh_run_row_clear(&row);
			return rc;
		}
		r->agent = a;
	}
	r->memory = r->agent->memory_enabled;
	gh_run_row_clear(&row);
	return GH_OK;
}

static enum gh_code continue_with_results(struct run *r, const struct gh_run_request *rq,
					  cJSON *results, struct gh_run_result *out,
					  struct gh_err *e)
{
	char run_id[48] = "", status[16];
	const char *owner = rq->who->key.owner, *from = NULL;
	int any_pending = 0;
	cJSON *res;
	enum gh_code rc;

	/* every result must name a call gatehouse handed out; all to one run */
	cJSON_ArrayForEach(res, results) {
		const char *id = gh_json_str(res, "toolCallId");
		char rid[48];

		rc = gh_store_tool_call_find(r->app->store, owner, id, rid, status, e);
		if (rc == GH_E_NOTFOUND)
			return gh_err_set(e, GH_E_CONFLICT, "unknown toolCallId \"%s\": no run is "
					  "waiting for it", id);
		if (rc != GH_OK)
			return rc;
		if (run_id[0] && strcmp(run_id, rid))
			return gh_err_set(e, GH_E_CONFLICT, "tool results belong to different runs "
					  "(%s and %s)", run_id, rid);
		gh_strlcpy(run_id, rid, sizeof(run_id));
		any_pending |= !strcmp(status, "pending");
	}
	if (!any_pending)
		return gh_err_set(e, GH_E_CONFLICT, "toolCallId \"%s\" was already answered",
				  gh_json_str(cJSON_GetArrayItem(results, 0), "toolCallId"));
	rc = gh_store_run_transition(r->app->store, run_id, "waiting", "running", e);
	if (rc == GH_OK) {
		from = "waiting";
	} else if (rc == GH_E_CONFLICT) {
		rc = gh_store_run_transition(r->app->store, run_id, "suspended", "running", e);
		if (rc == GH_OK)
			from = "suspended";
		else if (rc == GH_E_CONFLICT)
			return gh_err_set(e, GH_E_CONFLICT, "run %s is busy with another request; "
					  "send the results again when it is waiting", run_id);
	}
	if (rc != GH_OK)
		return rc;
	r->claimed = 1;
	if ((rc = load_run(r, owner, run_id, e)) != GH_OK)
		goto fail;
	r->response_from = cJSON_GetArraySize(r->context);
	if ((rc = setup_tools(r, e)) != GH_OK)
		goto fail;
	/* apply each result to its pending call, auditing it first */
	cJSON_ArrayForEach(res, results) {
		const char *id = gh_json_str(res, "toolCallId");
		cJSON *c;

		cJSON_ArrayForEach(c, r->calls) {
			const char *s = call_state(c);

			if (strcmp(gh_json_str(c, "toolCallId"), id))
				continue;
			if (strcmp(s, "pending_client") && strcmp(s, "released"))
				break; /* echoed history of a call already answered */
			{
				const cJSON *val = cJSON_GetObjectItemCaseSensitive(res, "result");
				int is_err = gh_json_bool(res, "isError", 0);

				rc = audit_call(r, "client_result", c, is_err ? "error" : "ok", -1,
						NULL, NULL, val, e);
				if (rc != GH_OK)
					goto fail;
				call_done(c, val ? cJSON_Duplicate(val, 1) : cJSON_CreateNull(),
					  is_err);
				cJSON_AddItemToArray(r->answered, cJSON_CreateString(id));
			}
			break;
		}
	}
	/* approvals decided meanwhile are settled by whoever holds the run */
	if ((rc = settle_approvals(r, e)) != GH_OK)
		goto fail;
	emit(r, "start", NULL);
	if ((rc = loop(r, e)) != GH_OK)
		goto fail;
	if ((rc = finish_run(r, out, e)) != GH_OK)
		goto fail;
	return GH_OK;
fail:
	if (rc == GH_E_CANCELLED && r->claimed) {
		/* the client left mid-continuation: record it, as a new run would be */
		struct gh_err ce;

		r->error = "cancelled: the client went away";
		cJSON_DeleteItemFromObjectCaseSensitive(r->state, "calls");
		r->calls = NULL;
		cJSON_Delete(r->registered);
		r->registered = cJSON_CreateArray();
		if (commit(r, "cancelled", &ce) == GH_OK)
			return rc;
	}
	release_claim(r, from);
	return rc;
}

/* -------------------------------------------------------------- entry */

static enum gh_code init_run(struct run *r, struct gh_app *app, const struct gh_principal *who,
			     const struct gh_agent_conf *agent, const struct gh_run_sink *sink,
			     struct gh_err *e)
{
	memset(r, 0, sizeof(*r));
	r->app = app;
	r->cfg = app->cfg;
	r->who = who;
	r->agent = agent;
	r->policy = who ? who->policy : NULL;
	r->sink = sink;
	r->answered = cJSON_CreateArray();
	r->registered = cJSON_CreateArray();
	if (!r->answered || !r->registered)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return GH_OK;
}

enum gh_code gh_run_generate(struct gh_app *app, const struct gh_run_request *rq,
			     const struct gh_run_sink *sink, struct gh_run_result *out,
			     struct gh_err *e)
{
	struct run r;
	struct gh_decision d;
	cJSON *results = NULL, *hist = NULL, *m;
	enum gh_code rc;
	int max_steps;

	memset(out, 0, sizeof(*out));
	if ((rc = init_run(&r, app, rq->who, rq->agent, sink, e)) != GH_OK)
		goto out;
	r.surface = rq->surface;
	r.stream = rq->stream;
	gh_policy_agent(r.policy, rq->agent->id, &d);
	if (d.verdict != GH_V_ALLOW) {
		rc = gh_err_set(e, GH_E_FORBIDDEN, "agent \"%s\" refused: %s", rq->agent->id, d.rule);
		goto out;
	}
	results = collect_results(rq->messages);
	if (!results) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (cJSON_GetArraySize(results) > 0) {
		rc = continue_with_results(&r, rq, results, out, e);
		goto out;
	}

	/* a new run */
	r.is_new = 1;
	if (rq->run_id && *rq->run_id) {
		if (strlen(rq->run_id) >= sizeof(r.run_id)) {
			rc = gh_err_set(e, GH_E_BADREQ, "runId: at most %zu characters",
					sizeof(r.run_id) - 1);
			goto out;
		}
		gh_strlcpy(r.run_id, rq->run_id, sizeof(r.run_id));
	} else {
		gh_id_new("run_", r.run_id, sizeof(r.run_id));
	}
	r.memory = rq->agent->memory_enabled;
	gh_strlcpy(r.resource_id, rq->resource_id && *rq->resource_id ? rq->resource_id : "default",
		   sizeof(r.resource_id));
	if (r.memory && !rq->stateless) {
		if (rq->thread_id && *rq->thread_id) {
			cJSON *th = NULL;

			if (strlen(rq->thread_id) > GH_NAME_MAX) {
				rc = gh_err_set(e, GH_E_BADREQ, "threadId: at most %d characters",
						GH_NAME_MAX);
				goto out;
			}
			gh_strlcpy(r.thread_id, rq->thread_id, sizeof(r.thread_id));
			rc = gh_store_thread_get(app->store, rq->who->key.owner, rq->thread_id, &th, e);
			if (rc == GH_E_NOTFOUND) {
				/* thread ids are per owner: another owner's thread
				 * with this id is not in the way, nor seen */
				r.new_thread = 1;
			} else if (rc != GH_OK) {
				goto out;
			} else {
				const char *res = gh_json_str(th, "resourceId");

				if (rq->resource_id && *rq->resource_id && res &&
				    strcmp(res, rq->resource_id)) {
					cJSON_Delete(th);
					rc = gh_err_set(e, GH_E_CONFLICT, "thread %s belongs to "
							"resource %s, not %s", rq->thread_id, res,
							rq->resource_id);
					goto out;
				}
				if (res)
					gh_strlcpy(r.resource_id, res, sizeof(r.resource_id));
				cJSON_Delete(th);
			}
		} else {
			gh_id_new("thr_", r.thread_id, sizeof(r.thread_id));
			r.new_thread = 1;
		}
		if (r.new_thread) {
			hist = cJSON_CreateArray();
		} else {
			cJSON *raw = NULL;

			rc = gh_store_messages_recent(app->store, rq->who->key.owner, r.thread_id,
						      (int)rq->agent->last_messages, &raw, e);
			if (rc != GH_OK)
				goto out;
			hist = sanitize_history(raw);
			cJSON_Delete(raw);
		}
	} else {
		hist = cJSON_CreateArray();
	}
	r.state = cJSON_CreateObject();
	if (!hist || !r.state) {
		cJSON_Delete(hist);
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	cJSON_AddNumberToObject(r.state, "v", 1);
	cJSON_AddItemToObject(r.state, "context", hist);
	r.context = hist;
	cJSON_AddNumberToObject(r.state, "persisted", cJSON_GetArraySize(hist));
	cJSON_AddItemToObject(r.state, "client_tools",
			      rq->client_defs ? cJSON_Duplicate(rq->client_defs, 1)
					      : cJSON_CreateArray());
	max_steps = (int)rq->agent->max_steps;
	if (rq->max_steps > 0 && rq->max_steps < max_steps)
		max_steps = rq->max_steps;
	cJSON_AddNumberToObject(r.state, "step", 0);
	cJSON_AddNumberToObject(r.state, "max_steps", max_steps);
	cJSON_AddItemToObject(r.state, "usage", cJSON_CreateObject());
	r.response_from = cJSON_GetArraySize(hist);
	cJSON_ArrayForEach(m, rq->messages) {
		cJSON_AddItemToArray(r.context, cJSON_Duplicate(m, 1));
		if (!r.title[0] && !strcmp(gh_json_str(m, "role"), "user")) {
			const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
			char *t = gh_run_content_text(content);

			if (t) {
				gh_strlcpy(r.title, t, sizeof(r.title) > 80 ? 81 : sizeof(r.title));
				free(t);
			}
		}
	}
	r.response_from = cJSON_GetArraySize(r.context);
	if (rq->thread_title)
		gh_strlcpy(r.title, rq->thread_title, sizeof(r.title));
	if ((rc = setup_tools(&r, e)) != GH_OK)
		goto out;
	emit(&r, "start", NULL);
	if ((rc = loop(&r, e)) != GH_OK)
		goto out;
	rc = finish_run(&r, out, e);
out:
	if (rc == GH_E_CANCELLED && r.is_new && r.state)
		record_cancelled(&r);
	if (rc != GH_OK) {
		cJSON *p = cJSON_CreateObject();

		if (p && e) {
			cJSON *err = cJSON_AddObjectToObject(p, "error");

			cJSON_AddStringToObject(err, "code", gh_code_name(rc));
			cJSON_AddStringToObject(err, "message", e->msg);
		}
		if (r.run_id[0] && rc != GH_E_CANCELLED)
			emit(&r, "error", p);
		else
			cJSON_Delete(p);
		gh_run_result_clear(out);
	}
	cJSON_Delete(results);
	run_free(&r);
	return rc;
}

/* --------------------------------------------------- approval resumption */

/* Settles the run's approval-bound calls from their decisions: approved
 * server calls run (exactly once), approved client calls are released,
 * denied or expired ones get an error result. */
static enum gh_code settle_approvals(struct run *r, struct gh_err *e)
{
	cJSON *c;
	enum gh_code rc;

	cJSON_ArrayForEach(c, r->calls) {
		struct gh_approval a;
		const struct gh_tool *t;
		char hash[65];

		if (strcmp(call_state(c), "pending_approval"))
			continue;
		rc = gh_approval_get(r->app, NULL, gh_json_str(c, "approvalId"), &a, e);
		if (rc != GH_OK)
			return rc;
		if (!strcmp(a.status, "pending")) {
			gh_approval_clear(&a);
			continue;
		}
		t = gh_toolset_find(&r->ts, gh_json_str(c, "toolName"));
		if (!strcmp(a.status, "approved")) {
			gh_approval_args_hash(cJSON_GetObjectItemCaseSensitive(c, "args"), hash);
			if (strcmp(hash, a.args_sha256) || !t ||
			    strcmp(a.policy_version, r->policy ? r->policy->version : "")) {
				/* arguments or policy changed since the approval: void */
				cJSON *res = error_result("approval %s no longer applies (the "
							  "arguments or the policy changed)", a.id);

				gh_approval_clear(&a);
				rc = refuse(r, c, "denied", "approval void: the arguments or the policy "
					    "changed since it was granted", res, e);
				if (rc != GH_OK)
					return rc;
				continue;
			}
			if (t->src == GH_SRC_CLIENT) {
				call_set_state(c, "released");
				cJSON_AddItemToArray(r->registered,
						     cJSON_CreateString(gh_json_str(c, "toolCallId")));
				gh_approval_clear(&a);
				continue;
			}
			rc = gh_approval_claim_execution(r->app, a.id, e);
			gh_approval_clear(&a);
			if (rc == GH_E_CONFLICT) {
				/* claimed before a crash: never run twice */
				rc = refuse(r, c, "failed", "execution interrupted",
					    error_result("the approved call was interrupted by a "
							 "restart and is not run twice"), e);
				if (rc != GH_OK)
					return rc;
				continue;
			}
			if (rc != GH_OK)
				return rc;
			if ((rc = execute(r, c, t, e)) != GH_OK)
				return rc;
			continue;
		}
		{
			cJSON *res;

			if (!strcmp(a.status, "expired"))
				res = error_result("approval expired: the call to %s was not approved "
						   "in time", a.tool_name);
			else
				res = error_result("denied by %s: %s", a.decided_by,
						   a.reason && *a.reason ? a.reason : "no reason given");
			call_done(c, res, 1);
			emit_result(r, c);
			gh_approval_clear(&a);
		}
	}
	return GH_OK;
}

enum gh_code gh_run_resume(struct gh_app *app, const char *run_id,
			   const struct gh_run_sink *sink, struct gh_run_result *out,
			   struct gh_err *e)
{
	struct run r;
	struct gh_run_row row;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	memset(&r, 0, sizeof(r));
	rc = gh_store_run_get(app->store, NULL, run_id, &row, e);
	if (rc != GH_OK)
		return rc;
	if (strcmp(row.status, "suspended")) {
		rc = gh_err_set(e, GH_E_CONFLICT, "run %s is %s, not suspended", run_id, row.status);
		gh_run_row_clear(&row);
		return rc;
	}
	if ((rc = init_run(&r, app, NULL, NULL, sink, e)) != GH_OK)
		goto out;
	/* A resumed run acts as the key that started it. */
	rc = gh_store_key_by_id(app->store, row.key_id, &r.owner_key.key, e);
	if (rc != GH_OK)
		goto out;
	r.owner_key.policy = gh_policy_for_key(app->cfg, &r.owner_key.key);
	snprintf(r.owner_key.actor, sizeof(r.owner_key.actor), "key:%s", row.key_id);
	r.who = &r.owner_key;
	r.policy = r.owner_key.policy;
	r.surface = "resume";
	rc = gh_store_run_transition(app->store, run_id, "suspended", "running", e);
	if (rc != GH_OK)
		goto out;
	r.claimed = 1;
	if ((rc = load_run(&r, row.owner, run_id, e)) != GH_OK)
		goto fail;
	r.response_from = cJSON_GetArraySize(r.context);
	if ((rc = setup_tools(&r, e)) != GH_OK)
		goto fail;
	if ((rc = settle_approvals(&r, e)) != GH_OK)
		goto fail;
	emit(&r, "start", NULL);
	if ((rc = loop(&r, e)) != GH_OK)
		goto fail;
	if ((rc = finish_run(&r, out, e)) != GH_OK)
		goto fail;
	goto out;
fail:
	if (r.claimed) {
		/* Keep what was settled (a call that ran stays done): while
		 * approvals still wait the run stays suspended; otherwise the
		 * continuation itself failed (upstream down) and the run is
		 * recorded as failed with the reason. */
		struct gh_err ce;
		int approvals = 0, clients = 0;
		const char *st = "failed";

		if (r.calls && calls_waiting(&r, &approvals, &clients) && approvals)
			st = "suspended";
		r.error = e->msg;
		if (commit(&r, st, &ce) != GH_OK)
			release_claim(&r, "suspended");
		else
			gh_warn("run %s: resumption failed, run %s: %s", run_id, st, e->msg);
	}
out:
	if (rc != GH_OK)
		gh_run_result_clear(out);
	gh_run_row_clear(&row);
	run_free(&r);
	return rc;
}

/* --------------------------------------------------------- stored runs */

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

cJSON *gh_run_pending_calls(const cJSON *state)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *c;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(state, "calls")) {
		const char *s = gh_json_str(c, "state");

		if (s && (!strcmp(s, "pending_client") || !strcmp(s, "released")))
			cJSON_AddItemToArray(arr, call_payload(c));
	}
	return arr;
}

#define SETTLE_POLL_US 100000

enum gh_code gh_run_wait_settled(struct gh_app *app, const char *owner, const char *run_id,
				 int64_t wait_ms, int (*gone)(void *ud), void *ud,
				 struct gh_run_row *row, struct gh_err *e)
{
	int64_t deadline = gh_mono_ns() + wait_ms * 1000000;
	enum gh_code rc;

	for (;;) {
		if ((rc = gh_store_run_get(app->store, owner, run_id, row, e)) != GH_OK)
			return rc;
		if (strcmp(row->status, "running") && strcmp(row->status, "suspended"))
			return GH_OK;
		if (gh_mono_ns() >= deadline)
			return gh_err_set(e, GH_E_TIMEOUT, "run %s is still %s", run_id,
					  row->status);
		if (gone && gone(ud))
			return gh_err_set(e, GH_E_CANCELLED, "the client went away");
		gh_run_row_clear(row);
		usleep(SETTLE_POLL_US);
	}
}
