/*
 * http_governance.c - approvals, runs, policy explanations and the audit
 * log over HTTP:
 *   GET  /api/approvals[?status=]            GET /api/approvals/:id
 *   POST /api/approvals/:id/approve|deny     {reason}
 *   POST /api/agents/:id/approve-tool-call   {runId, toolCallId}  (SSE, Mastra)
 *   POST /api/agents/:id/decline-tool-call   (SSE)
 *   POST /api/agents/:id/approve-tool-call-generate | decline-tool-call-generate (JSON)
 *   GET  /api/runs/:id                       GET /api/runs/:id/events (SSE)
 *   GET  /api/policy/explain?agent=&tool=[&key=]
 *   GET  /api/audit  GET /api/audit/export?format=ndjson|csv  GET /api/audit/verify
 *   GET  /api/audit/values                   the values the filters can take
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <civetweb.h>

#include "approvals.h"
#include "audit_index.h"
#include "audit_verify.h"
#include "http.h"
#include "http_native.h"
#include "hub.h"
#include "json.h"
#include "mcp.h"
#include "log.h"
#include "run.h"
#include "store_ui.h"
#include "tools.h"
#include "util.h"

/* ------------------------------------------------------------ approvals */

static void list_approvals(struct gh_req *r)
{
	char status[16], limit_s[16];
	const char *st = gh_http_query(r, "status", status, sizeof(status));
	int64_t limit = 100;
	cJSON *arr = NULL, *o;
	struct gh_err e;

	if (st && *st && strcmp(st, "pending") && strcmp(st, "approved") && strcmp(st, "denied") &&
	    strcmp(st, "expired")) {
		gh_http_errorf(r, GH_E_BADREQ, "status: expected pending, approved, denied or "
			       "expired");
		return;
	}
	if (gh_http_query(r, "limit", limit_s, sizeof(limit_s)) &&
	    gh_parse_i64(limit_s, 1, 1000, &limit) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "limit: expected an integer in 1..1000");
		return;
	}
	if (gh_approval_list(r->app, st && *st ? st : NULL, r->who.admin ? NULL : r->who.key.owner,
			     (int)limit, &arr, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "approvals", arr);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void get_approval(struct gh_req *r)
{
	struct gh_approval a;
	struct gh_err e;
	cJSON *o;

	if (gh_approval_get(r->app, r->who.admin ? NULL : r->who.key.owner, r->params[0], &a, &e) !=
	    GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	o = gh_approval_json(&a);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	gh_approval_clear(&a);
}

static void decide(struct gh_req *r, int approve)
{
	struct gh_approval a;
	struct gh_err e;
	cJSON *body = NULL, *o;
	const char *reason = NULL;

	if (r->body && r->body_len) {
		if (gh_http_body_object(r, &body, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		reason = gh_json_str(body, "reason");
	}
	if (gh_approval_decide(r->app, &r->who, r->params[0], approve, reason, 1, &a, &e) !=
	    GH_OK) {
		gh_http_error(r, &e);
		cJSON_Delete(body);
		return;
	}
	o = gh_approval_json(&a);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	cJSON_Delete(body);
	gh_approval_clear(&a);
}

static void approve(struct gh_req *r)
{
	decide(r, 1);
}

static void deny(struct gh_req *r)
{
	decide(r, 0);
}

/* ----------------------------------------------------------------- runs */

/* A run as GET /api/runs/:id shows it. */
static cJSON *run_json(struct gh_app *app, const struct gh_run_row *row)
{
	cJSON *o = cJSON_CreateObject(), *apprs, *c;
	char ts[GH_ISO8601_MAX];

	cJSON_AddStringToObject(o, "id", row->id);
	cJSON_AddStringToObject(o, "status", row->status);
	cJSON_AddStringToObject(o, "agentId", row->agent_id);
	gh_json_add_str(o, "threadId", row->thread_id[0] ? row->thread_id : NULL);
	gh_json_add_str(o, "resourceId", row->resource_id[0] ? row->resource_id : NULL);
	cJSON_AddStringToObject(o, "keyId", row->key_id);
	gh_iso8601(row->created_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "createdAt", ts);
	gh_iso8601(row->updated_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "updatedAt", ts);
	cJSON_AddItemToObject(o, "pending", gh_run_pending_calls(row->state));
	apprs = cJSON_AddArrayToObject(o, "approvals");
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(row->state, "calls")) {
		const char *s = gh_json_str(c, "state");
		struct gh_approval a;
		struct gh_err e;

		if (s && !strcmp(s, "pending_approval") &&
		    gh_approval_get(app, NULL, gh_json_str(c, "approvalId"), &a, &e) == GH_OK) {
			cJSON_AddItemToArray(apprs, gh_approval_json(&a));
			gh_approval_clear(&a);
		}
	}
	if (row->output)
		cJSON_AddItemToObject(o, "output", cJSON_Duplicate(row->output, 1));
	else
		cJSON_AddNullToObject(o, "output");
	gh_json_add_str(o, "error", row->error);
	cJSON_AddItemToObject(o, "usage", cJSON_Duplicate(
						  cJSON_GetObjectItemCaseSensitive(row->state, "usage"), 1));
	return o;
}

/* A run by its id or, for its owner, by the name the owner gave it as
 * runId (gh_run_named_id). */
static int load_run_row(struct gh_req *r, const char *id, struct gh_run_row *row)
{
	const char *owner = r->who.admin ? NULL : r->who.key.owner;
	enum gh_code rc;
	struct gh_err e;
	char named[GH_ID_MAX];

	rc = gh_store_run_get(r->app->store, owner, id, row, &e);
	if (rc == GH_E_NOTFOUND && owner) {
		gh_run_named_id(owner, id, named);
		rc = gh_store_run_get(r->app->store, owner, named, row, &e);
		if (rc == GH_E_NOTFOUND)
			gh_err_set(&e, GH_E_NOTFOUND, "no run %s", id);
	}
	if (rc != GH_OK) {
		gh_http_error(r, &e);
		return -1;
	}
	return 0;
}

static void get_run(struct gh_req *r)
{
	struct gh_run_row row;
	cJSON *o;

	if (load_run_row(r, r->params[0], &row) != 0)
		return;
	o = run_json(r->app, &row);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	gh_run_row_clear(&row);
}

static int terminal(const char *status)
{
	return !strcmp(status, "completed") || !strcmp(status, "failed") ||
	       !strcmp(status, "cancelled");
}

/* SSE: a snapshot of the run, then its live events until it ends. */
static void run_events(struct gh_req *r)
{
	struct gh_run_row row;
	struct gh_hub_sub *sub = NULL;
	char *type, *data, *snap = NULL;
	cJSON *o;
	int64_t last = gh_mono_ns();

	if (load_run_row(r, r->params[0], &row) != 0)
		return;
	if (gh_http_stream_acquire(r) != 0)
		goto out;
	/* subscribe before the snapshot so nothing falls in between */
	sub = gh_hub_subscribe(r->app->hub, row.id);
	gh_run_row_clear(&row);
	if (load_run_row(r, r->params[0], &row) != 0)
		goto out;
	if (gh_http_sse_begin(r) != 0)
		goto out;
	o = run_json(r->app, &row);
	snap = gh_json_dump(o);
	cJSON_Delete(o);
	if (!snap || gh_http_sse_send(r, "snapshot", snap, strlen(snap)) != 0 ||
	    terminal(row.status))
		goto end;
	while (!atomic_load(&r->app->stopping)) {
		int rc = sub ? gh_hub_next(sub, 50, &type, &data) : 0;

		if (rc == 1) {
			struct gh_buf b;
			int done = !strcmp(type, "finish") &&
				   !strstr(data, "\"status\":\"waiting\"") &&
				   !strstr(data, "\"status\":\"suspended\"");

			gh_buf_init(&b, strlen(data) + 256);
			gh_buf_printf(&b, "{\"type\":");
			gh_buf_json_str(&b, type);
			gh_buf_printf(&b, ",\"runId\":");
			gh_buf_json_str(&b, row.id);
			gh_buf_printf(&b, ",\"from\":\"AGENT\",\"payload\":%s}", data);
			rc = gh_http_sse_send(r, NULL, b.data, b.len);
			gh_buf_free(&b);
			free(type);
			free(data);
			last = gh_mono_ns();
			if (rc != 0 || done)
				break;
		} else if (rc == -1) {
			/* events were lost: send a fresh snapshot */
			struct gh_run_row fresh;
			struct gh_err e;

			if (gh_store_run_get(r->app->store, NULL, row.id, &fresh, &e) == GH_OK) {
				o = run_json(r->app, &fresh);
				free(snap);
				snap = gh_json_dump(o);
				cJSON_Delete(o);
				gh_run_row_clear(&fresh);
				if (snap)
					gh_http_sse_send(r, "snapshot", snap, strlen(snap));
			}
		}
		if (gh_http_client_gone(r))
			break;
		if (gh_mono_ns() - last >= r->app->cfg->server.heartbeat_ms * 1000000) {
			if (gh_http_sse_comment(r, "keep-alive") != 0)
				break;
			last = gh_mono_ns();
		}
	}
end:
	gh_http_sse_send(r, NULL, "[DONE]", 6);
	gh_http_sse_end(r);
out:
	free(snap);
	if (sub)
		gh_hub_unsubscribe(r->app->hub, sub);
	gh_run_row_clear(&row);
}

/* ------------------------------------------------ Mastra approve/decline */

/* The run as a generate-shaped result, from its stored row. */
static cJSON *row_as_result(const struct gh_run_row *row)
{
	struct gh_run_result res;
	cJSON *o;
	const cJSON *out = row->output;

	memset(&res, 0, sizeof(res));
	gh_strlcpy(res.run_id, row->id, sizeof(res.run_id));
	gh_strlcpy(res.thread_id, row->thread_id, sizeof(res.thread_id));
	gh_strlcpy(res.resource_id, row->resource_id, sizeof(res.resource_id));
	gh_strlcpy(res.status, row->status, sizeof(res.status));
	res.text = gh_strdup(out && gh_json_str(out, "text") ? gh_json_str(out, "text") : "");
	res.finish_reason = !strcmp(row->status, "suspended") ? "suspended"
			    : !strcmp(row->status, "waiting") ? "tool-calls"
			    : out && gh_json_str(out, "finishReason") ? gh_json_str(out, "finishReason")
								       : row->status;
	res.tool_calls = gh_run_pending_calls(row->state);
	res.tool_results = cJSON_CreateArray();
	res.pending = cJSON_CreateArray();
	res.approvals = cJSON_CreateArray();
	res.messages = cJSON_CreateArray();
	res.input_tokens = gh_json_int(cJSON_GetObjectItemCaseSensitive(row->state, "usage"),
				       "input", 0);
	res.output_tokens = gh_json_int(cJSON_GetObjectItemCaseSensitive(row->state, "usage"),
					"output", 0);
	o = gh_native_result_json(&res);
	gh_json_add_str(o, "error", row->error);
	gh_run_result_clear(&res);
	return o;
}

static int client_gone(void *ud)
{
	return gh_http_client_gone(ud);
}

/* Waits (bounded by server.approval_wait_ms) until the run leaves
 * "running" and "suspended" after a decision the background resumer acts
 * on; then the stored row (caller clears) tells the outcome, or where the
 * run got to when the wait ran out or the client left. -1 (answered) when
 * the run cannot be read. */
static int wait_settled(struct gh_req *r, const char *run_id, struct gh_run_row *row)
{
	struct gh_err e;
	enum gh_code rc = gh_run_wait_settled(r->app, NULL, run_id,
					      r->app->cfg->server.approval_wait_ms, client_gone, r,
					      row, &e);

	if (rc != GH_OK && rc != GH_E_TIMEOUT && rc != GH_E_CANCELLED) {
		gh_http_error(r, &e);
		return -1;
	}
	return 0;
}

static void tool_call_decision(struct gh_req *r, int approve_it, int as_stream)
{
	const struct gh_agent_conf *a = gh_native_agent(r, r->params[0]);
	struct gh_approval ap;
	struct gh_run_row row;
	struct gh_err e;
	cJSON *body = NULL, *o;
	const char *tcid, *reason;
	int decided_here = 0;
	int64_t deadline;

	memset(&ap, 0, sizeof(ap));
	memset(&row, 0, sizeof(row));
	if (!a)
		return;
	if (gh_http_body_object(r, &body, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	tcid = gh_json_str(body, "toolCallId");
	reason = gh_json_str(body, "reason");
	if (!tcid) {
		gh_http_errorf(r, GH_E_BADREQ, "toolCallId: required");
		goto out;
	}
	if (gh_approval_by_call(r->app, r->who.admin ? NULL : r->who.key.owner, tcid, &ap, &e) !=
	    GH_OK) {
		if (e.code == GH_E_NOTFOUND)
			gh_err_set(&e, GH_E_NOTFOUND, "no approval is waiting for toolCallId %s",
				   tcid);
		gh_http_error(r, &e);
		goto out;
	}
	if (gh_json_str(body, "runId") && strcmp(gh_json_str(body, "runId"), ap.run_id)) {
		/* the run's id, or the name its owner gave it */
		char named[GH_ID_MAX];

		gh_run_named_id(ap.owner, gh_json_str(body, "runId"), named);
		if (strcmp(named, ap.run_id)) {
			gh_http_errorf(r, GH_E_CONFLICT, "toolCallId %s belongs to run %s, not %s",
				       tcid, ap.run_id, gh_json_str(body, "runId"));
			goto out;
		}
	}
	if (!strcmp(ap.status, "pending") &&
	    (r->who.admin || !strcmp(ap.approver, "caller"))) {
		/* the caller may decide: do it, then continue the run here */
		if (gh_approval_decide(r->app, &r->who, ap.id, approve_it, reason, 0, NULL, &e) !=
		    GH_OK) {
			gh_http_error(r, &e);
			goto out;
		}
		decided_here = 1;
	} else if (!strcmp(ap.status, "pending")) {
		/* an admin decides: wait for them (bounded) */
		deadline = gh_mono_ns() + r->app->cfg->server.approval_wait_ms * 1000000;
		while (gh_mono_ns() < deadline && !gh_http_client_gone(r)) {
			gh_approval_clear(&ap);
			if (gh_approval_by_call(r->app, NULL, tcid, &ap, &e) != GH_OK) {
				gh_http_error(r, &e);
				goto out;
			}
			if (strcmp(ap.status, "pending"))
				break;
			usleep(200000);
		}
	} else if (!strcmp(ap.approver, "caller") && !r->who.admin) {
		gh_http_errorf(r, GH_E_CONFLICT, "approval %s was already %s by %s", ap.id,
			       ap.status, ap.decided_by);
		goto out;
	}
	if (as_stream) {
		struct gh_native_stream s;
		struct gh_run_result res;

		if (gh_native_stream_begin(r, &s) != 0)
			goto out;
		if (decided_here) {
			if (gh_run_resume(r->app, ap.run_id, &s.sink, &res, &e) == GH_OK)
				gh_run_result_clear(&res);
			else
				gh_native_stream_fail(&s, ap.run_id, &e);
		} else {
			/* the admin's decision is carried out by the background
			 * resumer: report where the run got to */
			if (wait_settled(r, ap.run_id, &row) == 0) {
				o = row_as_result(&row);
				char *d = gh_json_dump(o);

				if (d) {
					cJSON *p = cJSON_CreateObject(), *sr;

					sr = cJSON_AddObjectToObject(p, "stepResult");
					cJSON_AddStringToObject(sr, "reason",
								gh_json_str(o, "finishReason"));
					cJSON_AddItemToObject(p, "output", cJSON_Duplicate(o, 1));
					cJSON_AddStringToObject(p, "status", row.status);
					cJSON_AddStringToObject(p, "approval", ap.status);
					s.sink.event(s.sink.ud, ap.run_id, "finish", p);
					cJSON_Delete(p);
				}
				free(d);
				cJSON_Delete(o);
			}
		}
		gh_native_stream_end(&s);
		goto out;
	}
	if (decided_here) {
		struct gh_run_result res;

		if (gh_run_resume(r->app, ap.run_id, NULL, &res, &e) != GH_OK) {
			gh_http_error(r, &e);
			goto out;
		}
		o = gh_native_result_json(&res);
		gh_run_result_clear(&res);
	} else {
		if (wait_settled(r, ap.run_id, &row) != 0)
			goto out;
		o = row_as_result(&row);
		{
			struct gh_approval cur;

			if (gh_approval_get(r->app, NULL, ap.id, &cur, &e) == GH_OK) {
				cJSON_AddItemToObject(o, "approval", gh_approval_json(&cur));
				gh_approval_clear(&cur);
			}
		}
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
out:
	gh_run_row_clear(&row);
	gh_approval_clear(&ap);
	cJSON_Delete(body);
}

static void approve_tool_call(struct gh_req *r)
{
	tool_call_decision(r, 1, 1);
}

static void decline_tool_call(struct gh_req *r)
{
	tool_call_decision(r, 0, 1);
}

static void approve_tool_call_json(struct gh_req *r)
{
	tool_call_decision(r, 1, 0);
}

static void decline_tool_call_json(struct gh_req *r)
{
	tool_call_decision(r, 0, 0);
}

/* ---------------------------------------------------------------- policy */

static void add_warning(void *ud, const char *msg)
{
	cJSON_AddItemToArray(ud, cJSON_CreateString(msg));
}

static void explain(struct gh_req *r)
{
	char agent[GH_NAME_MAX + 1], tool[128], keyid[64];
	const char *ag = gh_http_query(r, "agent", agent, sizeof(agent));
	const char *tl = gh_http_query(r, "tool", tool, sizeof(tool));
	const char *kid = gh_http_query(r, "key", keyid, sizeof(keyid));
	struct gh_principal p = r->who;
	const struct gh_agent_conf *a = NULL;
	struct gh_decision d;
	cJSON *o, *ko, *ao, *to;
	struct gh_err e;

	if (kid && *kid && strcmp(kid, r->who.key.id)) {
		if (!r->who.admin) {
			gh_http_errorf(r, GH_E_FORBIDDEN, "only an admin may explain another key's "
				       "policy");
			return;
		}
		memset(&p, 0, sizeof(p));
		if (gh_store_key_by_id(r->app->store, kid, &p.key, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		p.policy = gh_policy_for_key(r->app->cfg, &p.key);
	}
	if (ag && *ag && !(a = gh_config_agent(r->app->cfg, ag))) {
		gh_http_errorf(r, GH_E_NOTFOUND, "no agent \"%s\"", ag);
		return;
	}
	o = cJSON_CreateObject();
	ko = cJSON_AddObjectToObject(o, "key");
	gh_json_add_str(ko, "id", p.key.id[0] ? p.key.id : NULL);
	gh_json_add_str(ko, "name", p.key.name[0] ? p.key.name : NULL);
	gh_json_add_str(ko, "owner", p.key.owner[0] ? p.key.owner : NULL);
	cJSON_AddStringToObject(ko, "role", p.key.admin ? "admin" : "user");
	gh_json_add_str(o, "policy", p.policy ? p.policy->name : NULL);
	gh_json_add_str(o, "policyVersion", p.policy ? p.policy->version : NULL);
	if (!p.policy)
		cJSON_AddStringToObject(o, "note", "no policy applies to this key (none named on the "
				       "key and no policy \"default\"): everything is denied");
	/* rules of this policy that can match nothing, as serve warns at start */
	gh_policy_lint(r->app->cfg, p.policy, add_warning,
		       cJSON_AddArrayToObject(o, "warnings"));
	if (p.policy && (p.policy->client_allow.n || p.policy->client_deny.n))
		cJSON_AddStringToObject(o, "clientToolsNote", "client_tools globs are not checked "
				       "against anything: client tools are declared by each "
				       "request");
	if (p.policy) {
		cJSON *rl = cJSON_AddObjectToObject(o, "rateLimits");

		cJSON_AddNumberToObject(rl, "requestsPerMinute",
					(double)p.policy->requests_per_minute);
		cJSON_AddNumberToObject(rl, "burst", (double)p.policy->burst);
		cJSON_AddNumberToObject(rl, "tokensPerMinute", (double)p.policy->tokens_per_minute);
	}
	if (a) {
		gh_policy_agent(p.policy, a->id, &d);
		ao = cJSON_AddObjectToObject(o, "agent");
		cJSON_AddStringToObject(ao, "id", a->id);
		cJSON_AddBoolToObject(ao, "allowed", d.verdict == GH_V_ALLOW);
		cJSON_AddStringToObject(ao, "rule", d.rule);
	}
	if (tl && *tl) {
		char norm[GH_TOOL_NAME_MAX + 1];
		enum gh_tool_source src = GH_SRC_CLIENT;
		const struct gh_tool_conf *tc;
		/* a federated tool's name may be 64 characters: looked up as is */
		struct gh_mcp_tool *mt = gh_mcp_tool_find(r->app->mcp, tl);
		const char *lrule = NULL;
		int64_t per_min;
		int listed = 1, i;

		if (mt)
			gh_strlcpy(norm, mt->name, sizeof(norm));
		else
			gh_tool_normalize(tl, norm);
		tc = gh_config_tool(r->app->cfg, norm);
		for (i = 0; gh_memory_tool_names[i]; i++)
			if (!strcmp(gh_memory_tool_names[i], norm))
				src = GH_SRC_MEMORY;
		if (tc || mt)
			src = GH_SRC_SERVER;
		if (a && src != GH_SRC_CLIENT)
			listed = gh_strlist_match(&a->tools, norm) &&
				 (src != GH_SRC_MEMORY || a->memory_enabled);
		if (mt)
			gh_tools_mcp_decide(p.policy, a, mt, &d);
		else
			gh_policy_tool(p.policy, a, norm, src, tc ? tc->require_approval : 0, &d);
		to = cJSON_AddObjectToObject(o, "tool");
		cJSON_AddStringToObject(to, "name", norm);
		cJSON_AddStringToObject(to, "source", gh_tool_source_name(src));
		if (mt) {
			cJSON *mo = cJSON_AddObjectToObject(to, "mcp");

			cJSON_AddStringToObject(mo, "server", mt->server);
			cJSON_AddStringToObject(mo, "tool", mt->upstream_name);
			cJSON_AddStringToObject(mo, "pin", mt->pin);
			if (mt->def.annotations)
				cJSON_AddItemToObject(mo, "annotations",
						      cJSON_Duplicate(mt->def.annotations, 1));
			cJSON_AddStringToObject(mo, "approvalDefault",
						gh_mcp_hint_text(gh_mcp_hint_of(mt->def.annotations)));
			gh_mcp_tool_unref(mt);
		}
		if (src == GH_SRC_CLIENT)
			cJSON_AddStringToObject(to, "note", "not a server or memory tool: judged as a "
					       "client tool the caller declares");
		if (!listed) {
			cJSON_AddStringToObject(to, "decision", "deny");
			cJSON_AddStringToObject(to, "rule", a->memory_enabled || src != GH_SRC_MEMORY
							    ? "the agent's tools list does not include it"
							    : "the agent has memory disabled");
		} else {
			cJSON_AddStringToObject(to, "decision", d.verdict == GH_V_ALLOW ? "allow"
							      : d.verdict == GH_V_DENY ? "deny"
										      : "approval");
			cJSON_AddStringToObject(to, "rule", d.rule);
		}
		if (d.verdict == GH_V_APPROVAL && listed) {
			cJSON_AddStringToObject(to, "approver", d.approver == GH_APPROVER_CALLER
								? "caller" : "admin");
			cJSON_AddNumberToObject(to, "approvalTtlSeconds", (double)d.ttl_s);
		}
		per_min = gh_policy_tool_limit(p.policy, norm, &lrule);
		if (per_min > 0) {
			cJSON *rl = cJSON_AddObjectToObject(to, "rateLimit");

			cJSON_AddNumberToObject(rl, "perMinute", (double)per_min);
			cJSON_AddStringToObject(rl, "rule", lrule);
		}
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* ----------------------------------------------------------------- audit */

static int audit_filter(struct gh_req *r, struct gh_audit_filter *f, char bufs[10][160])
{
	static const char *const names[] = {"key", "agent", "thread", "run", "tool", "event",
					    "outcome", "from", "to", "owner"};
	const char *v[10];
	int i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < 10; i++) {
		v[i] = gh_http_query(r, names[i], bufs[i], 160);
		if (v[i] && !*v[i])
			v[i] = NULL;
	}
	f->key_id = v[0];
	f->agent_id = v[1];
	f->thread_id = v[2];
	f->run_id = v[3];
	f->tool_name = v[4];
	f->event = v[5];
	f->outcome = v[6];
	/* thread and run ids are chosen per owner: owner tells them apart */
	f->owner = v[9];
	if (v[7] && gh_parse_time(v[7], &f->from_ms) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "from: expected ISO-8601 UTC or Unix ms");
		return -1;
	}
	if (v[8] && gh_parse_time(v[8], &f->to_ms) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "to: expected ISO-8601 UTC or Unix ms");
		return -1;
	}
	return 0;
}

static int collect_row(void *ud, const struct gh_audit_row *row)
{
	cJSON_AddItemToArray(ud, gh_audit_row_json(row));
	return 0;
}

static void audit_query(struct gh_req *r)
{
	struct gh_audit_filter f;
	char bufs[10][160], lim[16], cur[32];
	int64_t limit = 50, cursor = 0, next = 0;
	cJSON *o, *rows;
	struct gh_err e;

	if (audit_filter(r, &f, bufs) != 0)
		return;
	if ((gh_http_query(r, "limit", lim, sizeof(lim)) &&
	     gh_parse_i64(lim, 1, 1000, &limit) != 0) ||
	    (gh_http_query(r, "cursor", cur, sizeof(cur)) && *cur &&
	     gh_parse_i64(cur, 1, INT64_MAX, &cursor) != 0)) {
		gh_http_errorf(r, GH_E_BADREQ, "limit must be 1..1000 and cursor a row number");
		return;
	}
	o = cJSON_CreateObject();
	rows = cJSON_AddArrayToObject(o, "rows");
	if (gh_store_audit_query(r->app->store, &f, cursor, (int)limit, 0, collect_row, rows, &next,
				 &e) != GH_OK) {
		cJSON_Delete(o);
		gh_http_error(r, &e);
		return;
	}
	if (next) {
		char n[24];

		snprintf(n, sizeof(n), "%lld", (long long)next);
		cJSON_AddStringToObject(o, "nextCursor", n);
	} else {
		cJSON_AddNullToObject(o, "nextCursor");
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* Most values one filter offers; a log holding more tools than this is
 * filtered by typing the name. */
#define VALUES_MAX 1000

/* Appends val to the string array ud unless it is there already, or too
 * long for a filter (audit_filter's 160 bytes). */
static int add_value(void *ud, const char *val)
{
	cJSON *arr = ud, *it;

	if (!val || !*val || strlen(val) >= 160)
		return 0;
	cJSON_ArrayForEach(it, arr)
		if (!strcmp(it->valuestring, val))
			return 0;
	cJSON_AddItemToArray(arr, cJSON_CreateString(val));
	return 0;
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The values a filter of dim can take: the known ones (NULL-terminated
 * known, in their order) and then those the log holds besides. With
 * sorted, all of them in byte order. NULL on failure (answered). */
static cJSON *filter_values(struct gh_req *r, int dim, const char *const *known, int sorted)
{
	cJSON *arr = cJSON_CreateArray(), *it;
	struct gh_err e;
	size_t n = 0, i;
	const char **v;

	if (!arr) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return NULL;
	}
	for (i = 0; known && known[i]; i++)
		add_value(arr, known[i]);
	if (gh_store_ui_audit_values(r->app->store, dim, VALUES_MAX, add_value, arr, &e) !=
	    GH_OK) {
		cJSON_Delete(arr);
		gh_http_error(r, &e);
		return NULL;
	}
	if (!sorted || !(v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*v))))
		return arr;
	cJSON_ArrayForEach(it, arr)
		v[n++] = it->valuestring;
	qsort(v, n, sizeof(*v), by_text);
	it = cJSON_CreateStringArray(v, (int)n);
	free(v);
	if (!it)
		return arr;
	cJSON_Delete(arr);
	return it;
}

/* What the audit filters can offer: events and outcomes are gatehouse's
 * vocabulary (plus anything else the log holds, such as rows an older or
 * newer version wrote); tools are the configured and memory tools plus
 * every tool the log names (client tools among them). */
static void audit_values(struct gh_req *r)
{
	const struct gh_config *cfg = r->app->cfg;
	const char **tools = calloc(cfg->ntools + 8, sizeof(*tools));
	cJSON *o = cJSON_CreateObject(), *a;
	size_t i, n = 0;

	if (!tools || !o) {
		free(tools);
		cJSON_Delete(o);
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	for (i = 0; i < cfg->ntools; i++)
		tools[n++] = cfg->tools[i].name;
	for (i = 0; gh_memory_tool_names[i] && n < cfg->ntools + 7; i++)
		tools[n++] = gh_memory_tool_names[i];
	if (!(a = filter_values(r, GH_AUDIT_DIM_EVENT, gh_audit_event_names, 0)))
		goto out;
	cJSON_AddItemToObject(o, "events", a);
	if (!(a = filter_values(r, GH_AUDIT_DIM_OUTCOME, gh_audit_outcome_names, 0)))
		goto out;
	cJSON_AddItemToObject(o, "outcomes", a);
	if (!(a = filter_values(r, GH_AUDIT_DIM_TOOL, tools, 1)))
		goto out;
	cJSON_AddItemToObject(o, "tools", a);
	gh_http_json(r, 200, o);
out:
	free(tools);
	cJSON_Delete(o);
}

struct export_ctx {
	struct gh_req *r;
	int csv;
	struct gh_buf b;
	int failed;
};

static int export_row(void *ud, const struct gh_audit_row *row)
{
	struct export_ctx *x = ud;

	if (x->csv) {
		if (gh_audit_row_csv(row, &x->b) != 0)
			return x->failed = 1;
	} else {
		cJSON *j = gh_audit_row_json(row);

		if (!j || gh_json_print(j, &x->b) != GH_BUF_OK || gh_buf_putc(&x->b, '\n')) {
			cJSON_Delete(j);
			return x->failed = 1;
		}
		cJSON_Delete(j);
	}
	if (x->b.len >= 65536) {
		if (mg_send_chunk(x->r->conn, x->b.data, (unsigned)x->b.len) <= 0)
			return x->failed = 1;
		gh_buf_reset(&x->b);
	}
	return 0;
}

/* Streams every matching row, oldest first, a page at a time: memory
 * stays flat however large the log is. */
static void audit_export(struct gh_req *r)
{
	struct gh_audit_filter f;
	char bufs[10][160], fmt[16], hdr[256];
	const char *format = gh_http_query(r, "format", fmt, sizeof(fmt));
	struct export_ctx x;
	int64_t cursor = 0, next = 0;
	struct gh_err e;

	if (audit_filter(r, &f, bufs) != 0)
		return;
	memset(&x, 0, sizeof(x));
	x.r = r;
	if (format && !strcmp(format, "csv"))
		x.csv = 1;
	else if (format && *format && strcmp(format, "ndjson")) {
		gh_http_errorf(r, GH_E_BADREQ, "format: expected ndjson or csv");
		return;
	}
	if (gh_http_stream_acquire(r) != 0)
		return;
	r->responded = 1;
	r->status = 200;
	snprintf(hdr, sizeof(hdr),
		 "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Disposition: attachment; "
		 "filename=\"gatehouse-audit.%s\"\r\nTransfer-Encoding: chunked\r\n"
		 "Cache-Control: no-store\r\nX-Request-Id: %s\r\n\r\n",
		 x.csv ? "text/csv; charset=utf-8" : "application/x-ndjson", x.csv ? "csv" : "ndjson",
		 r->id);
	if (mg_write(r->conn, hdr, strlen(hdr)) <= 0)
		return;
	gh_buf_init(&x.b, 1 << 22);
	if (x.csv)
		gh_buf_puts(&x.b, gh_audit_csv_header);
	do {
		if (gh_store_audit_query(r->app->store, &f, cursor, 1000, 1, export_row, &x, &next,
					 &e) != GH_OK) {
			gh_warn("%s: audit export stopped: %s", r->id, e.msg);
			break;
		}
		cursor = next;
	} while (next && !x.failed);
	if (!x.failed && x.b.len)
		mg_send_chunk(r->conn, x.b.data, (unsigned)x.b.len);
	if (!x.failed)
		mg_write(r->conn, "0\r\n\r\n", 5);
	gh_buf_free(&x.b);
}

static void audit_verify(struct gh_req *r)
{
	struct gh_audit_verify rep;
	struct gh_err e;
	cJSON *o;
	char ts[GH_ISO8601_MAX];

	if (gh_audit_verify(r->app->store, r->app->signer.pk, &rep, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", rep.ok);
	cJSON_AddNumberToObject(o, "rows", (double)rep.rows);
	cJSON_AddNumberToObject(o, "lastSeq", (double)rep.last_seq);
	if (rep.chain_ok)
		cJSON_AddNullToObject(o, "badSeq");
	else
		cJSON_AddNumberToObject(o, "badSeq", (double)rep.bad_seq);
	cJSON_AddStringToObject(o, "message", rep.chain_ok ? (rep.ok ? "intact" :
		"rows intact; the filter index is damaged (gatehouse audit reindex)") : rep.message);
	cJSON_AddNumberToObject(o, "signedSeq", (double)rep.signed_seq);
	if (rep.signed_ts) {
		gh_iso8601(rep.signed_ts, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "signedAt", ts);
	} else {
		cJSON_AddNullToObject(o, "signedAt");
	}
	cJSON_AddNumberToObject(o, "unsignedRows", (double)rep.unsigned_rows);
	cJSON_AddNumberToObject(o, "anchorSeq", (double)rep.anchor_seq);
	{
		cJSON *ix = cJSON_AddObjectToObject(o, "index");

		if (ix) {
			cJSON_AddBoolToObject(ix, "ok", rep.index_ok);
			cJSON_AddNumberToObject(ix, "blocks", (double)rep.index_blocks);
			if (rep.index_ok) {
				cJSON_AddNullToObject(ix, "badSeq");
				cJSON_AddNullToObject(ix, "message");
			} else {
				cJSON_AddNumberToObject(ix, "badSeq", (double)rep.index_bad_seq);
				cJSON_AddStringToObject(ix, "message", rep.index_message);
			}
		}
	}
	cJSON_AddNumberToObject(o, "seconds", rep.seconds);
	{
		char pk[65];

		gh_hex(r->app->signer.pk, 32, pk);
		cJSON_AddStringToObject(o, "publicKey", pk);
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

const struct gh_route gh_routes_governance[] = {
	{"GET", "/api/approvals", GH_AUTH_KEY, list_approvals},
	{"GET", "/api/approvals/:id", GH_AUTH_KEY, get_approval},
	{"POST", "/api/approvals/:id/approve", GH_AUTH_KEY, approve},
	{"POST", "/api/approvals/:id/deny", GH_AUTH_KEY, deny},
	{"POST", "/api/agents/:id/approve-tool-call", GH_AUTH_KEY, approve_tool_call},
	{"POST", "/api/agents/:id/decline-tool-call", GH_AUTH_KEY, decline_tool_call},
	{"POST", "/api/agents/:id/approve-tool-call-generate", GH_AUTH_KEY, approve_tool_call_json},
	{"POST", "/api/agents/:id/decline-tool-call-generate", GH_AUTH_KEY, decline_tool_call_json},
	{"GET", "/api/runs/:id", GH_AUTH_KEY, get_run},
	{"GET", "/api/runs/:id/events", GH_AUTH_KEY, run_events},
	{"GET", "/api/policy/explain", GH_AUTH_KEY, explain},
	{"GET", "/api/audit", GH_AUTH_ADMIN, audit_query},
	{"GET", "/api/audit/export", GH_AUTH_ADMIN, audit_export},
	{"GET", "/api/audit/verify", GH_AUTH_ADMIN, audit_verify},
	{"GET", "/api/audit/values", GH_AUTH_ADMIN, audit_values},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
