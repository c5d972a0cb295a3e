/*
 * http_approvals.c - approvals over HTTP, for reviewers and callers:
 *   GET  /api/approvals[?status=&limit=]      GET /api/approvals/:id
 *   POST /api/approvals/:id/approve           {reason?, args?}
 *   POST /api/approvals/:id/deny              {reason?}
 * GET /api/approvals/:id adds the tool's inputSchema (for an approver
 * editing the arguments); approve's args approves with edited arguments.
 * A key sees its owner's approvals; an admin sees all. Deciding goes
 * through gh_answer_tool_call; the run goes on in the background. (The
 * live list, GET /api/approvals/events, is the admin UI's: http_admin.c.)
 * Per request, on the worker thread.
 */
#include <string.h>

#include "answer.h"
#include "approvals.h"
#include "http.h"
#include "json.h"
#include "util.h"

static void list_approvals(struct gh_req *r)
{
	char status[16], limit_s[16];
	const char *st = gh_http_query(r, "status", status, sizeof(status));
	int64_t limit = 100;
	cJSON *arr = NULL, *o;
	struct gh_err e;

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
	if (o && !strcmp(a.status, "pending")) {
		cJSON *schema = NULL;

		/* best effort: a run that can no longer be read has no schema to show */
		if (gh_answer_tool_schema(r->app, &a, &schema, &e) != GH_OK)
			schema = NULL;
		cJSON_AddItemToObject(o, "inputSchema", schema ? schema : cJSON_CreateNull());
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	gh_approval_clear(&a);
}

static void decide(struct gh_req *r, int approve)
{
	struct gh_tool_answer ta;
	struct gh_answer_out out;
	struct gh_err e;
	cJSON *body = NULL, *o;

	memset(&ta, 0, sizeof(ta));
	if (r->body && r->body_len) {
		if (gh_http_body_object(r, &body, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		ta.reason = gh_json_str(body, "reason");
		ta.edited_args = cJSON_GetObjectItemCaseSensitive(body, "args");
		if (ta.edited_args && cJSON_IsNull(ta.edited_args))
			ta.edited_args = NULL;
		if (ta.edited_args && !approve) {
			gh_http_errorf(r, GH_E_BADREQ, "args: only an approval can edit the "
				       "arguments");
			cJSON_Delete(body);
			return;
		}
	}
	ta.approval_id = r->params[0];
	ta.approve = approve;
	ta.mode = GH_ANSWER_BACKGROUND;
	if (gh_answer_tool_call(r->app, &r->who, &ta, NULL, &out, &e) != GH_OK) {
		gh_http_error(r, &e);
	} else {
		o = gh_approval_json(&out.approval);
		gh_http_json(r, 200, o);
		cJSON_Delete(o);
	}
	gh_answer_out_clear(&out);
	cJSON_Delete(body);
}

static void approve(struct gh_req *r)
{
	decide(r, 1);
}

static void deny(struct gh_req *r)
{
	decide(r, 0);
}

const struct gh_route gh_routes_approvals[] = {
	{"GET", "/api/approvals", GH_AUTH_KEY, list_approvals},
	{"GET", "/api/approvals/:id", GH_AUTH_KEY, get_approval},
	{"POST", "/api/approvals/:id/approve", GH_AUTH_KEY, approve},
	{"POST", "/api/approvals/:id/deny", GH_AUTH_KEY, deny},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
