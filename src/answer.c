/*
 * answer.c - answering a tool call that waits on a person; see answer.h.
 */
#include "answer.h"

#include <string.h>

#include "approvals.h"
#include "background.h"
#include "schema.h"
#include "store.h"
#include "tools.h"

void gh_answer_out_clear(struct gh_answer_out *o)
{
	if (!o)
		return;
	gh_approval_clear(&o->approval);
	gh_run_result_clear(&o->result);
	gh_run_view_clear(&o->view);
	memset(o, 0, sizeof(*o));
}

enum gh_code gh_answer_check_args(const struct gh_toolset *ts, const struct gh_policy_conf *p,
				  const char *name, const cJSON *args, struct gh_err *e)
{
	const struct gh_tool *t = gh_toolset_find(ts, name);
	struct gh_decision d;
	char msg[512];

	if (!cJSON_IsObject(args))
		return gh_err_set(e, GH_E_BADREQ, "args: expected the tool's arguments as an "
				  "object");
	if (!t)
		return gh_err_set(e, GH_E_FORBIDDEN, "tool %s is no longer offered to this run",
				  name);
	if (t->schema && gh_schema_validate(t->schema, args, msg, sizeof(msg)) != 0)
		return gh_err_set(e, GH_E_BADREQ, "args: invalid arguments for %s: %s", name, msg);
	gh_toolset_decision(ts, name, &d);
	gh_policy_args(p, name, args, &d);
	if (d.verdict == GH_V_DENY)
		return gh_err_set(e, GH_E_FORBIDDEN, "args: the edited arguments are denied by %s",
				  d.rule);
	return GH_OK;
}

/* The tool set of the run approval a belongs to, under the policy of the
 * key that started it (as a resumption builds it). The client tools'
 * schemas are borrowed from *row: clear it after freeing ts. */
static enum gh_code run_tools(struct gh_app *app, const struct gh_approval *a,
			      struct gh_toolset *ts, const struct gh_policy_conf **p,
			      struct gh_run_row *row_out, struct gh_err *e)
{
	struct gh_run_row row;
	struct gh_key key;
	const struct gh_agent_conf *agent;
	enum gh_code rc;

	memset(ts, 0, sizeof(*ts));
	memset(row_out, 0, sizeof(*row_out));
	if ((rc = gh_store_run_get(app->store, NULL, a->run_id, &row, e)) != GH_OK)
		return rc;
	rc = gh_store_key_by_id(app->store, a->key_id, &key, e);
	if (rc != GH_OK)
		goto out;
	*p = gh_policy_for_key(gh_app_cfg(app), &key);
	if (strcmp(a->policy_version, *p ? (*p)->version : "")) {
		rc = gh_err_set(e, GH_E_CONFLICT, "approval %s no longer applies: the policy "
				"changed since it was asked", a->id);
		goto out;
	}
	agent = gh_config_agent(gh_app_cfg(app), row.agent_id);
	if (!agent) {
		rc = gh_err_set(e, GH_E_CONFLICT, "run %s belongs to agent %s, which is no "
				"longer configured", a->run_id, row.agent_id);
		goto out;
	}
	rc = gh_toolset_build(gh_app_cfg(app), gh_app_mcp(app), agent, *p,
			      cJSON_GetObjectItemCaseSensitive(row.state, "client_tools"), ts, e);
out:
	if (rc == GH_OK)
		*row_out = row;
	else
		gh_run_row_clear(&row);
	return rc;
}

enum gh_code gh_answer_tool_schema(struct gh_app *app, const struct gh_approval *a,
				   cJSON **out, struct gh_err *e)
{
	struct gh_toolset ts;
	struct gh_run_row row;
	const struct gh_policy_conf *p = NULL;
	const struct gh_tool *t;
	enum gh_code rc;

	*out = NULL;
	if ((rc = run_tools(app, a, &ts, &p, &row, e)) != GH_OK)
		return rc;
	t = gh_toolset_find(&ts, a->tool_name);
	if (t && t->schema && !(*out = cJSON_Duplicate(t->schema, 1)))
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
	gh_toolset_free(&ts);
	gh_run_row_clear(&row);
	return rc;
}

/* Edited arguments for approval a: checked as the gate checks a call. */
static enum gh_code check_edit(struct gh_app *app, const struct gh_approval *a,
			       const cJSON *args, struct gh_err *e)
{
	struct gh_toolset ts;
	struct gh_run_row row;
	const struct gh_policy_conf *p = NULL;
	enum gh_code rc;

	if (!cJSON_IsObject(args))
		return gh_err_set(e, GH_E_BADREQ, "args: expected the tool's arguments as an "
				  "object");
	if ((rc = run_tools(app, a, &ts, &p, &row, e)) != GH_OK)
		return rc;
	rc = gh_answer_check_args(&ts, p, a->tool_name, args, e);
	gh_toolset_free(&ts);
	gh_run_row_clear(&row);
	return rc;
}

/* The approval a names, as who may see it. */
static enum gh_code find(struct gh_app *app, const struct gh_principal *who,
			 const struct gh_tool_answer *a, struct gh_approval *out,
			 struct gh_err *e)
{
	const char *owner = who->admin ? NULL : who->key.owner;
	enum gh_code rc;

	if (a->approval_id)
		return gh_approval_get(app, owner, a->approval_id, out, e);
	rc = gh_approval_by_call(app, owner, a->tool_call_id ? a->tool_call_id : "", out, e);
	if (rc == GH_E_NOTFOUND)
		gh_err_set(e, GH_E_NOTFOUND, "no approval is waiting for toolCallId %s",
			   a->tool_call_id ? a->tool_call_id : "");
	if (rc == GH_OK && a->run_id && strcmp(a->run_id, out->run_id)) {
		/* the run's id, or the name its owner gave it */
		char named[GH_ID_MAX];

		gh_run_named_id(out->owner, a->run_id, named);
		if (strcmp(named, out->run_id)) {
			rc = gh_err_set(e, GH_E_CONFLICT, "toolCallId %s belongs to run %s, not %s",
					a->tool_call_id, out->run_id, a->run_id);
			gh_approval_clear(out);
		}
	}
	return rc;
}

/* Someone else decides (or decided): wait for the run to settle. */
static enum gh_code await(struct gh_app *app, const struct gh_tool_answer *a,
			  struct gh_answer_out *out, struct gh_err *e)
{
	struct gh_err ge;
	char id[GH_ID_MAX];

	out->waited = 1;
	out->wait_rc = gh_run_wait(app, NULL, out->approval.run_id, GH_UNTIL_SETTLED, a->wait_ms,
				   a->gone, a->ud, &out->view, e);
	if (out->wait_rc != GH_OK && out->wait_rc != GH_E_TIMEOUT &&
	    out->wait_rc != GH_E_CANCELLED)
		return out->wait_rc;
	gh_err_clear(e);
	/* the approval as it stands now */
	gh_strlcpy(id, out->approval.id, sizeof(id));
	gh_approval_clear(&out->approval);
	if (gh_approval_get(app, NULL, id, &out->approval, &ge) != GH_OK)
		gh_strlcpy(out->approval.id, id, sizeof(out->approval.id));
	return GH_OK;
}

enum gh_code gh_answer_tool_call(struct gh_app *app, const struct gh_principal *who,
				 const struct gh_tool_answer *a, const struct gh_run_sink *sink,
				 struct gh_answer_out *out, struct gh_err *e)
{
	struct gh_approval decided;
	enum gh_code rc;
	int pending, may_decide;

	memset(out, 0, sizeof(*out));
	if ((rc = find(app, who, a, &out->approval, e)) != GH_OK)
		return rc;
	pending = !strcmp(out->approval.status, "pending");
	may_decide = who->admin || !strcmp(out->approval.approver, "caller");
	if (a->edited_args && !(pending && may_decide))
		/* only who decides may edit, and only before deciding */
		return gh_err_set(e, pending ? GH_E_FORBIDDEN : GH_E_CONFLICT,
				  pending ? "approval %s must be decided by an admin (%s); only "
					    "its approver may edit the arguments"
					  : "approval %s was already %s; its arguments can no longer "
					    "be edited",
				  out->approval.id, pending ? out->approval.rule : out->approval.status);
	if (a->edited_args && a->approve &&
	    (rc = check_edit(app, &out->approval, a->edited_args, e)) != GH_OK)
		return rc;
	if (a->mode == GH_ANSWER_BACKGROUND || (pending && may_decide)) {
		memset(&decided, 0, sizeof(decided));
		rc = gh_approval_decide(app, who, out->approval.id, a->approve, a->reason,
					a->edited_args, &decided, e);
		if (rc != GH_OK)
			return rc;
		gh_approval_clear(&out->approval);
		out->approval = decided;
		out->decided_here = 1;
		if (a->mode == GH_ANSWER_BACKGROUND) {
			gh_bg_resume(app->bg, out->approval.run_id);
			return GH_OK;
		}
		out->continued = 1;
		return gh_run_resume(app, out->approval.run_id, sink, &out->result, e);
	}
	if (!pending && !who->admin && !strcmp(out->approval.approver, "caller"))
		return gh_err_set(e, GH_E_CONFLICT, "approval %s was already %s by %s",
				  out->approval.id, out->approval.status, out->approval.decided_by);
	return await(app, a, out, e);
}

const struct gh_run_call *gh_answer_next_waiting(const struct gh_run_view *v, size_t *i,
						 int *caller)
{
	for (; *i < v->ncalls; (*i)++) {
		const struct gh_run_call *c = &v->calls[*i];

		if (c->state != GH_CALL_PENDING_APPROVAL || !c->approval_id ||
		    (c->approval && strcmp(c->approval->status, "pending")))
			continue;
		if (caller)
			*caller = c->approval && !strcmp(c->approval->approver, "caller");
		(*i)++;
		return c;
	}
	return NULL;
}

char *gh_answer_waiting_note(const struct gh_run_view *v, struct gh_buf *ids)
{
	const struct gh_run_call *c;
	const char *one = NULL;
	struct gh_buf b;
	int admin = 0, n = 0, caller;
	size_t i = 0;

	gh_buf_init(&b, 1 << 16);
	while ((c = gh_answer_next_waiting(v, &i, &caller))) {
		admin |= !caller;
		gh_buf_printf(&b, "%sWaiting for approval %s (tool %s needs %s).", n ? " " : "",
			      c->approval_id, c->name ? c->name : "?",
			      caller ? "your approval" : "an admin's approval");
		if (ids) {
			if (ids->len)
				gh_buf_putc(ids, ',');
			gh_buf_puts(ids, c->approval_id);
		}
		if (!one)
			one = c->approval_id;
		n++;
	}
	if (admin)
		gh_buf_printf(&b, " Ask an administrator to review %s, then send your message "
			      "again.", n > 1 ? "them" : "it");
	else if (n)
		gh_buf_printf(&b, " Approve or deny %s with POST /api/approvals/%s/approve (or "
			      "/deny), then send your message again.", n > 1 ? "each" : "it",
			      n > 1 ? "<id>" : one);
	else
		/* decided just now: the background resumer is carrying it out */
		gh_buf_printf(&b, "The approval was decided and run %s is carrying it out; its "
			      "answer will be at GET /api/runs/%s.", v->id, v->id);
	return gh_buf_detach(&b);
}

enum gh_code gh_answer_settled(const struct gh_run_view *v, enum gh_code wait_rc,
			       struct gh_err *e)
{
	if (wait_rc == GH_E_CANCELLED)
		return gh_err_set(e, GH_E_CANCELLED, "the client left");
	if (wait_rc != GH_OK && wait_rc != GH_E_TIMEOUT)
		return gh_err_set(e, wait_rc, "run %s: the wait for its approval failed", v->id);
	if (v->status == GH_RUN_COMPLETED || v->status == GH_RUN_WAITING ||
	    v->status == GH_RUN_SUSPENDED)
		return GH_OK;
	return gh_err_set(e, GH_E_UPSTREAM, "run %s %s after the approval: %s", v->id,
			  gh_run_status_name(v->status), v->error ? v->error : "no reason recorded");
}

enum gh_code gh_answer_await(struct gh_app *app, const char *owner, const char *run_id,
			     int (*gone)(void *ud), void *ud, struct gh_run_view *out,
			     struct gh_err *e)
{
	enum gh_code rc = gh_run_wait(app, owner, run_id, GH_UNTIL_SETTLED,
				      gh_app_cfg(app)->server.approval_wait_ms, gone, ud, out, e);

	if (rc == GH_E_TIMEOUT)
		gh_err_clear(e);
	if (rc != GH_OK && rc != GH_E_TIMEOUT && rc != GH_E_CANCELLED)
		return rc;
	return gh_answer_settled(out, rc, e);
}
