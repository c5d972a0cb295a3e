/*
 * approvals.c - human approval of tool calls; see approvals.h.
 */
#include "approvals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "buf.h"
#include "hub.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"

void gh_approval_args_hash(const cJSON *args, char out[65])
{
	struct gh_buf b;
	unsigned char h[crypto_hash_sha256_BYTES];

	gh_buf_init(&b, 64u << 20);
	if (gh_json_canonical(args, &b) != GH_BUF_OK) {
		gh_buf_free(&b);
		gh_strlcpy(out, "", 65);
		return;
	}
	crypto_hash_sha256(h, (const unsigned char *)(b.data ? b.data : ""), b.len);
	gh_buf_free(&b);
	gh_hex(h, sizeof(h), out);
}

/* What became of an approved call, as the engine recorded it with the
 * call's audit row: null unless approved; else {status, startedAt,
 * finishedAt, error, auditSeq}, status being "pending" (not started),
 * "running", "released" (a client tool handed to the client), "succeeded",
 * "failed" (also when a restart cut the execution short) or "not_run" (the
 * approval no longer applied: the arguments or the policy changed). */
static cJSON *execution_json(const struct gh_approval *a)
{
	cJSON *o;
	const char *st;

	if (strcmp(a->status, "approved"))
		return cJSON_CreateNull();
	if (!strcmp(a->exec_outcome, "ok"))
		st = "succeeded";
	else if (!strcmp(a->exec_outcome, "error"))
		st = "failed";
	else if (!strcmp(a->exec_outcome, "not_run"))
		st = "not_run";
	else if (a->executed_at)
		st = "running";
	else if (!strcmp(a->source, "client"))
		st = "released";
	else
		st = "pending";
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "status", st);
	gh_json_add_time(o, "startedAt", a->executed_at);
	gh_json_add_time(o, "finishedAt", a->exec_finished_at);
	gh_json_add_str(o, "error", a->exec_error);
	if (a->exec_audit_seq > 0)
		cJSON_AddNumberToObject(o, "auditSeq", (double)a->exec_audit_seq);
	else
		cJSON_AddNullToObject(o, "auditSeq");
	return o;
}

cJSON *gh_approval_json(const struct gh_approval *a)
{
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", a->id);
	cJSON_AddStringToObject(o, "status", a->status);
	cJSON_AddStringToObject(o, "runId", a->run_id);
	cJSON_AddStringToObject(o, "toolCallId", a->tool_call_id);
	cJSON_AddStringToObject(o, "toolName", a->tool_name);
	cJSON_AddStringToObject(o, "source", a->source);
	cJSON_AddItemToObject(o, "args", cJSON_Duplicate(a->args, 1));
	cJSON_AddStringToObject(o, "argsSha256", a->args_sha256);
	cJSON_AddStringToObject(o, "agentId", a->agent_id);
	gh_json_add_str(o, "threadId", a->thread_id[0] ? a->thread_id : NULL);
	cJSON_AddStringToObject(o, "keyId", a->key_id);
	cJSON_AddStringToObject(o, "owner", a->owner);
	gh_json_add_str(o, "policy", a->policy_name[0] ? a->policy_name : NULL);
	cJSON_AddStringToObject(o, "policyVersion", a->policy_version);
	cJSON_AddStringToObject(o, "approver", a->approver);
	gh_json_add_str(o, "rule", a->rule);
	gh_iso8601(a->created_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "createdAt", ts);
	gh_iso8601(a->expires_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "expiresAt", ts);
	if (a->decided_at) {
		gh_iso8601(a->decided_at, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "decidedAt", ts);
		cJSON_AddStringToObject(o, "decidedBy", a->decided_by);
		gh_json_add_str(o, "reason", a->reason);
	} else {
		cJSON_AddNullToObject(o, "decidedAt");
		cJSON_AddNullToObject(o, "decidedBy");
		cJSON_AddNullToObject(o, "reason");
	}
	if (a->executed_at) {
		gh_iso8601(a->executed_at, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "executedAt", ts);
	} else {
		cJSON_AddNullToObject(o, "executedAt");
	}
	cJSON_AddItemToObject(o, "execution", execution_json(a));
	/* approved with edited arguments: what ran, redacted, and its digest */
	if (a->edited_sha256[0]) {
		cJSON_AddItemToObject(o, "editedArgs", cJSON_Duplicate(a->edited_args, 1));
		cJSON_AddStringToObject(o, "editedArgsSha256", a->edited_sha256);
	} else {
		cJSON_AddNullToObject(o, "editedArgs");
		cJSON_AddNullToObject(o, "editedArgsSha256");
	}
	return o;
}

static void publish(struct gh_app *app, const char *type, const struct gh_approval *a)
{
	cJSON *j;

	if (!app->hub)
		return;
	j = gh_approval_json(a);
	if (!j)
		return;
	gh_hub_publish(app->hub, "approvals", type, j);
	gh_hub_publish(app->hub, a->run_id, type, j);
	cJSON_Delete(j);
	gh_hub_notify_state(app->hub, a->run_id);
}

enum gh_code gh_approval_create(struct gh_app *app, const struct gh_approval_req *rq,
				 char id[GH_ID_MAX], int64_t *expires_at, struct gh_err *e)
{
	struct gh_approval a;
	struct gh_audit_event ev;
	const struct gh_policy_conf *p = rq->who->policy;
	char *args = NULL, detail[256], exp[GH_ISO8601_MAX];
	struct gh_err ae;
	enum gh_code rc;

	memset(&a, 0, sizeof(a));
	gh_id_new("apr_", a.id, sizeof(a.id));
	gh_strlcpy(a.key_id, rq->who->key.id, sizeof(a.key_id));
	gh_strlcpy(a.owner, rq->who->key.owner, sizeof(a.owner));
	gh_strlcpy(a.agent_id, rq->agent_id, sizeof(a.agent_id));
	gh_strlcpy(a.thread_id, rq->thread_id ? rq->thread_id : "", sizeof(a.thread_id));
	gh_strlcpy(a.run_id, rq->run_id, sizeof(a.run_id));
	gh_strlcpy(a.tool_call_id, rq->tool_call_id, sizeof(a.tool_call_id));
	gh_strlcpy(a.tool_name, rq->tool_name, sizeof(a.tool_name));
	gh_strlcpy(a.source, gh_tool_source_name(rq->source), sizeof(a.source));
	gh_approval_args_hash(rq->args, a.args_sha256);
	gh_strlcpy(a.policy_name, p ? p->name : "", sizeof(a.policy_name));
	gh_strlcpy(a.policy_version, p ? p->version : "", sizeof(a.policy_version));
	gh_strlcpy(a.approver, rq->decision->approver == GH_APPROVER_CALLER ? "caller" : "admin",
		   sizeof(a.approver));
	a.rule = (char *)(uintptr_t)rq->decision->rule;
	gh_strlcpy(a.status, "pending", sizeof(a.status));
	a.created_at = gh_now_ms();
	a.expires_at = a.created_at + (rq->decision->ttl_s > 0 ? rq->decision->ttl_s : 3600) * 1000;
	args = gh_audit_args_json(rq->args, &gh_app_cfg(app)->audit.redact,
				  (size_t)gh_app_cfg(app)->audit.max_args_bytes);
	if (!args) {
		return gh_err_set(e, GH_E_UNAVAILABLE, "audit log unavailable: out of memory; "
						       "the tool was not run");
	}
	gh_iso8601(a.expires_at, exp, sizeof(exp));
	snprintf(detail, sizeof(detail),
		 "{\"approval_id\":\"%s\",\"approver\":\"%s\",\"expires_at\":\"%s\"%s%s%s}", a.id,
		 a.approver, exp, rq->surface ? ",\"surface\":\"" : "",
		 rq->surface ? rq->surface : "", rq->surface ? "\"" : "");
	memset(&ev, 0, sizeof(ev));
	ev.event = "approval_requested";
	ev.key_id = a.key_id;
	ev.owner = a.owner;
	ev.agent_id = a.agent_id;
	ev.thread_id = rq->thread_id;
	ev.run_id = a.run_id;
	ev.tool_call_id = a.tool_call_id;
	ev.tool_name = a.tool_name;
	ev.source = a.source;
	ev.args = args;
	ev.outcome = "pending";
	ev.duration_ms = -1;
	ev.reason = rq->decision->rule;
	ev.detail = detail;
	rc = gh_store_approval_insert(app->store, &a, args, &ev, &ae);
	if (rc != GH_OK) {
		free(args);
		return gh_err_set(e, GH_E_UNAVAILABLE, "cannot record the approval request (%s); "
				  "the tool was not run", ae.msg);
	}
	gh_strlcpy(id, a.id, GH_ID_MAX);
	if (expires_at)
		*expires_at = a.expires_at;
	a.args = gh_json_parse_stored(args);
	publish(app, "approval-requested", &a);
	gh_notify_approval(app->notify, GH_NOTIFY_EV_REQUESTED, &a);
	cJSON_Delete(a.args);
	free(args);
	gh_info("approval %s requested for %s in run %s (%s)", a.id, a.tool_name, a.run_id,
		a.approver);
	return GH_OK;
}

enum gh_code gh_approval_get(struct gh_app *app, const char *owner, const char *id,
			     struct gh_approval *out, struct gh_err *e)
{
	return gh_store_approval_get(app->store, owner, id, 0, out, e);
}

enum gh_code gh_approval_by_call(struct gh_app *app, const char *owner,
				 const char *tool_call_id, struct gh_approval *out,
				 struct gh_err *e)
{
	return gh_store_approval_get(app->store, owner, tool_call_id, 1, out, e);
}

static int list_cb(void *ud, const struct gh_approval *a)
{
	cJSON *j = gh_approval_json(a);

	if (j)
		cJSON_AddItemToArray(ud, j);
	return 0;
}

enum gh_code gh_approval_list(struct gh_app *app, const char *status, const char *owner,
			      int limit, cJSON **out, struct gh_err *e)
{
	static const char *const known[] = {"pending", "approved", "denied", "expired", NULL};
	cJSON *arr;
	enum gh_code rc;

	*out = NULL;
	if (status && !gh_str_in(known, status))
		return gh_err_set(e, GH_E_BADREQ, "status: expected pending, approved, denied or "
				  "expired");
	if (!(arr = cJSON_CreateArray()))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = gh_store_approval_list(app->store, status, owner, limit, list_cb, arr, e);
	if (rc != GH_OK) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return GH_OK;
}

/* The decision's audit detail: who decided and, for edited arguments, both
 * digests and who edited. Caller frees. */
static char *decide_detail(const struct gh_approval *a, const struct gh_principal *who,
			   const struct gh_approval_edit *edit)
{
	cJSON *d = cJSON_CreateObject();
	char *s;

	if (!d)
		return NULL;
	cJSON_AddStringToObject(d, "approval_id", a->id);
	cJSON_AddStringToObject(d, "decided_by", who->actor);
	if (edit) {
		cJSON *x = cJSON_AddObjectToObject(d, "args_edited");

		cJSON_AddStringToObject(x, "original_sha256", a->args_sha256);
		cJSON_AddStringToObject(x, "edited_sha256", edit->sha256);
		cJSON_AddStringToObject(x, "edited_by", who->actor);
	}
	s = gh_json_dump(d);
	cJSON_Delete(d);
	return s;
}

/* Edited arguments, owned: canonical JSON exact and redacted, and the
 * digest of the exact one. */
struct edit {
	char *exact, *redacted;
	char sha[65];
	struct gh_approval_edit view;  /* borrows the above */
};

static void edit_free(struct edit *x)
{
	free(x->exact);
	free(x->redacted);
	memset(x, 0, sizeof(*x));
}

static enum gh_code edit_prepare(struct gh_app *app, const cJSON *edited, struct edit *x,
				 struct gh_err *e)
{
	struct gh_buf b;

	memset(x, 0, sizeof(*x));
	gh_buf_init(&b, GH_JSON_MAX_BYTES);
	if (gh_json_canonical(edited, &b) != GH_BUF_OK || !b.data) {
		gh_buf_free(&b);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	x->exact = b.data; /* taken from b (NUL-terminated) */
	gh_approval_args_hash(edited, x->sha);
	x->redacted = gh_audit_args_json(edited, &gh_app_cfg(app)->audit.redact,
					 (size_t)gh_app_cfg(app)->audit.max_args_bytes);
	if (!x->redacted || !x->sha[0]) {
		edit_free(x);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	x->view.exact = x->exact;
	x->view.redacted = x->redacted;
	x->view.sha256 = x->sha;
	return GH_OK;
}

enum gh_code gh_approval_decide(struct gh_app *app, const struct gh_principal *who,
				const char *id, int approve, const char *reason,
				const cJSON *edited, struct gh_approval *out, struct gh_err *e)
{
	struct gh_approval a;
	struct gh_audit_event ev;
	struct edit ed;
	char *detail = NULL, *args = NULL;
	enum gh_code rc;

	memset(&ed, 0, sizeof(ed));
	rc = gh_approval_get(app, who->admin ? NULL : who->key.owner, id, &a, e);
	if (rc != GH_OK)
		return rc;
	if (!who->admin && strcmp(a.approver, "caller")) {
		rc = gh_err_set(e, GH_E_FORBIDDEN, "approval %s must be decided by an admin (%s)",
				id, a.rule);
		goto out;
	}
	if (reason && strlen(reason) > 2000) {
		rc = gh_err_set(e, GH_E_BADREQ, "reason: at most 2000 characters");
		goto out;
	}
	if (edited && !approve) {
		rc = gh_err_set(e, GH_E_BADREQ, "args: only an approval can edit the arguments");
		goto out;
	}
	if (edited && (rc = edit_prepare(app, edited, &ed, e)) != GH_OK)
		goto out;
	if (edited && !strcmp(ed.sha, a.args_sha256)) {
		/* the same arguments: approved as asked */
		edit_free(&ed);
		edited = NULL;
	}
	args = edited ? gh_strdup(ed.redacted) : gh_json_dump(a.args);
	detail = decide_detail(&a, who, edited ? &ed.view : NULL);
	if (!args || !detail) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	memset(&ev, 0, sizeof(ev));
	ev.event = approve ? "approved" : "denied";
	ev.key_id = a.key_id;
	ev.owner = a.owner;
	ev.admin_user = who->admin_user[0] ? who->admin_user : NULL;
	ev.agent_id = a.agent_id;
	ev.thread_id = a.thread_id[0] ? a.thread_id : NULL;
	ev.run_id = a.run_id;
	ev.tool_call_id = a.tool_call_id;
	ev.tool_name = a.tool_name;
	ev.source = a.source;
	ev.args = args;
	ev.outcome = approve ? "approved" : "denied";
	ev.duration_ms = -1;
	ev.reason = reason && *reason ? reason : (approve ? "approved" : "denied");
	ev.detail = detail;
	rc = gh_store_approval_decide(app->store, id, approve ? "approved" : "denied", who->actor,
				      reason && *reason ? reason : NULL, edited ? &ed.view : NULL, &ev,
				      e);
	if (rc != GH_OK)
		goto out;
	gh_metrics_tool(a.tool_name, a.source, approve ? GH_MD_APPROVED : GH_MD_DENIED_BY_REVIEWER);
	gh_metrics_approval_decided(approve, 0, gh_now_ms() - a.created_at);
	gh_approval_clear(&a);
	rc = gh_approval_get(app, NULL, id, &a, e);
	if (rc != GH_OK)
		goto out;
	gh_info("approval %s %s%s by %s", id, a.status, edited ? " with edited arguments" : "",
		who->actor);
	publish(app, "approval-decided", &a);
	gh_notify_approval(app->notify, GH_NOTIFY_EV_DECIDED, &a);
	if (out) {
		*out = a;
		memset(&a, 0, sizeof(a));
	}
out:
	free(args);
	free(detail);
	edit_free(&ed);
	gh_approval_clear(&a);
	return rc;
}

enum gh_code gh_approval_claim_execution(struct gh_app *app, const char *id,
					 const struct gh_audit_event *call, int64_t *call_id,
					 struct gh_err *e)
{
	return gh_store_approval_claim_exec(app->store, id, call, call_id, e);
}

enum gh_code gh_approval_finish_execution(struct gh_app *app, const char *id,
					  const char *outcome, const char *error,
					  const struct gh_audit_event *ev, struct gh_err *e)
{
	return gh_store_approval_finish_exec(app->store, id, outcome, error, ev, e);
}

struct expiry {
	struct gh_app *app;
	void (*resume)(void *ud, const char *run_id);
	void *ud;
};

static void expired_cb(void *ud, const struct gh_approval *a)
{
	struct expiry *x = ud;

	gh_info("approval %s expired", a->id);
	gh_metrics_tool(a->tool_name, a->source, GH_MD_EXPIRED);
	gh_metrics_approval_decided(0, 1, gh_now_ms() - a->created_at);
	publish(x->app, "approval-decided", a);
	gh_notify_approval(x->app->notify, GH_NOTIFY_EV_EXPIRED, a);
	if (x->resume)
		x->resume(x->ud, a->run_id);
}

enum gh_code gh_approvals_expire(struct gh_app *app, void (*resume)(void *ud, const char *run_id),
				 void *ud, int *n, struct gh_err *e)
{
	struct expiry x = {app, resume, ud};

	return gh_store_approvals_expire(app->store, gh_now_ms(), expired_cb, &x, n, e);
}
