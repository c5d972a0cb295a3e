/*
 * http_mcp_servers.c - the admin API of upstream MCP servers, for the admin
 * UI's "MCP servers" page and for curl:
 *   GET  /api/mcp/servers                              each upstream's state
 *   GET  /api/mcp/servers/:name/tools                  its tools and their pins
 *   POST /api/mcp/servers/:name/tools/:tool/accept     {digest?}: accept a changed
 *   POST /api/mcp/servers/:name/tools/:tool/reject     definition, or reject it
 * Admins only (an admin session with its CSRF token, or an admin key).
 *
 * Thin: mcp.c decides and records (with the audit row); this file reads
 * the request and shapes the answer. Threading: handlers run on CivetWeb
 * workers; the MCP manager is thread-safe.
 */
#include <string.h>

#include "http.h"
#include "json.h"
#include "log.h"
#include "mcp.h"

static void servers(struct gh_req *r)
{
	cJSON *o = gh_mcp_status_json(gh_app_mcp(r->app), 0, NULL);

	if (!o) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void server_tools(struct gh_req *r)
{
	cJSON *o = NULL;
	struct gh_err e;

	if (gh_mcp_server_tools_json(gh_app_mcp(r->app), r->params[0], &o, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void decide(struct gh_req *r, int accept)
{
	cJSON *body = NULL, *o;
	const char *digest = NULL;
	struct gh_mcp_actor who;
	struct gh_err e;

	if (r->body && r->body_len) {
		if (gh_http_body_object(r, &body, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		digest = gh_json_str(body, "digest");
		if (cJSON_GetObjectItemCaseSensitive(body, "digest") && !digest) {
			cJSON_Delete(body);
			gh_http_errorf(r, GH_E_BADREQ, "digest: expected the SHA-256 (hex) of the "
						       "definition reviewed");
			return;
		}
	}
	who.admin_user = r->who.admin_user[0] ? r->who.admin_user : NULL;
	who.key_id = r->who.key.id[0] ? r->who.key.id : NULL;
	who.by = r->who.actor;
	who.via = r->session ? "web" : "api";
	if (gh_mcp_decide(gh_app_mcp(r->app), r->params[0], r->params[1], digest, accept, &who, &e) !=
	    GH_OK) {
		cJSON_Delete(body);
		gh_http_error(r, &e);
		return;
	}
	gh_info("%s MCP server %s: %s %s tool %s", r->id, r->params[0], r->who.actor,
		accept ? "accepted" : "rejected", r->params[1]);
	cJSON_Delete(body);
	if (gh_mcp_server_tools_json(gh_app_mcp(r->app), r->params[0], &o, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	cJSON_AddStringToObject(o, "decided", accept ? "accepted" : "rejected");
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void accept_tool(struct gh_req *r)
{
	decide(r, 1);
}

static void reject_tool(struct gh_req *r)
{
	decide(r, 0);
}

const struct gh_route gh_routes_mcp_servers[] = {
	{"GET", "/api/mcp/servers", GH_AUTH_ADMIN, servers},
	{"GET", "/api/mcp/servers/:name/tools", GH_AUTH_ADMIN, server_tools},
	{"POST", "/api/mcp/servers/:name/tools/:tool/accept", GH_AUTH_ADMIN, accept_tool},
	{"POST", "/api/mcp/servers/:name/tools/:tool/reject", GH_AUTH_ADMIN, reject_tool},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
