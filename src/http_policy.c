/*
 * http_policy.c - GET /api/policy/explain?agent=&tool=[&key=][&args=JSON]
 * (args: sample arguments of a call, URL-encoded JSON): what a key's
 * policy lets it do with an agent and a tool, and which rule says so
 * (explain.c, deciding with the gate's own function). A key explains
 * itself; an admin may name another key. Per request, on the worker
 * thread.
 */
#include <string.h>

#include "explain.h"
#include "http.h"
#include "json.h"

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

const struct gh_route gh_routes_policy[] = {
	{"GET", "/api/policy/explain", GH_AUTH_KEY, explain},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
