/*
 * http_policy.c - GET /api/policy/explain?agent=&tool=[&key=][&args=JSON]
 * (args: sample arguments of a call, URL-encoded JSON): what a key's
 * policy lets it do with an agent and a tool, and which rule says so
 * (explain.c, deciding with the gate's own function). A key explains
 * itself; an admin may name another key.
 *
 * POST /api/admin/policy/test[?since=7d] {config?, since?} (admin): the
 * recorded tool decisions replayed against a candidate config
 * (policy_test.h): config is the candidate's text; without it (or with an
 * empty body) the config file serve was started with, as it is on disk
 * now, so an edit can be checked before a reload. A candidate that does
 * not validate is a 400 with the config's own message.
 *
 * Per request, on the worker thread.
 */
#include <string.h>

#include "app.h"
#include "explain.h"
#include "http.h"
#include "json.h"
#include "policy_test.h"
#include "util.h"

#define ARGS_MAX 16384

static void explain(struct gh_req *r)
{
	char agent[GH_NAME_MAX + 1], tool[128], keyid[64], argbuf[ARGS_MAX];
	const char *ag = gh_http_query(r, "agent", agent, sizeof(agent));
	const char *tl = gh_http_query(r, "tool", tool, sizeof(tool));
	const char *kid = gh_http_query(r, "key", keyid, sizeof(keyid));
	const char *as = gh_http_query(r, "args", argbuf, sizeof(argbuf));
	struct gh_principal p = r->who;
	const struct gh_agent_conf *a = NULL;
	struct gh_err e;
	cJSON *o, *args = NULL;

	if (as && *as) {
		if (gh_json_parse(as, strlen(as), "args", &args, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		if (!cJSON_IsObject(args)) {
			cJSON_Delete(args);
			gh_http_errorf(r, GH_E_BADREQ, "args: expected a JSON object (a call's "
				       "arguments)");
			return;
		}
	}

	if (kid && *kid && strcmp(kid, r->who.key.id)) {
		if (!r->who.admin) {
			gh_http_errorf(r, GH_E_FORBIDDEN, "only an admin may explain another key's "
				       "policy");
			cJSON_Delete(args);
			return;
		}
		memset(&p, 0, sizeof(p));
		if (gh_store_key_by_id(r->app->store, kid, &p.key, &e) != GH_OK) {
			gh_http_error(r, &e);
			cJSON_Delete(args);
			return;
		}
		p.policy = gh_policy_for_key(gh_app_cfg(r->app), &p.key);
	}
	if (ag && *ag && !(a = gh_config_agent(gh_app_cfg(r->app), ag))) {
		gh_http_errorf(r, GH_E_NOTFOUND, "no agent \"%s\"", ag);
		cJSON_Delete(args);
		return;
	}
	o = gh_explain_call_json(gh_app_cfg(r->app), gh_app_mcp(r->app), &p, a, tl, args);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	cJSON_Delete(args);
}

static void policy_test(struct gh_req *r)
{
	char qsince[64];
	const char *since = gh_http_query(r, "since", qsince, sizeof(qsince)), *text = NULL;
	const char *path = r->app->config_path ? r->app->config_path : gh_app_cfg(r->app)->file;
	struct gh_config *cand = NULL;
	cJSON *body = NULL, *report = NULL;
	int64_t since_ms = 0;
	struct gh_err e;

	if (r->body_len > 0) {
		const cJSON *c;

		if (gh_http_body_object(r, &body, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		c = cJSON_GetObjectItemCaseSensitive(body, "config");
		if (c && !cJSON_IsString(c) && !cJSON_IsNull(c)) {
			gh_http_errorf(r, GH_E_BADREQ, "config: expected the candidate config's text "
				       "as a string");
			goto out;
		}
		text = cJSON_IsString(c) ? c->valuestring : NULL;
		if (gh_json_str(body, "since"))
			since = gh_json_str(body, "since");
	}
	if (gh_ptest_parse_since(since && *since ? since : "7d", gh_now_ms(), &since_ms) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "since: expected 7d, 12h, 30m, 90s, an ISO-8601 UTC "
			       "time or Unix ms");
		goto out;
	}
	if (text ? gh_config_parse("candidate", text, strlen(text), &cand, &e)
		 : gh_config_load(path, &cand, &e)) {
		if (e.code == GH_E_BADREQ)
			gh_http_errorf(r, GH_E_BADREQ, "the candidate config is not valid: %s", e.msg);
		else
			gh_http_error(r, &e);
		goto out;
	}
	if (gh_ptest_run(r->app->store, cand, gh_app_mcp(r->app), text ? "candidate" : path, since_ms,
			 &report, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	cJSON_AddStringToObject(report, "source", text ? "body" : "file");
	gh_http_json(r, 200, report);
out:
	cJSON_Delete(report);
	gh_config_free(cand);
	cJSON_Delete(body);
}

const struct gh_route gh_routes_policy[] = {
	{"GET", "/api/policy/explain", GH_AUTH_KEY, explain},
	{"POST", "/api/admin/policy/test", GH_AUTH_ADMIN, policy_test},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
