/*
 * http_memory.c - Mastra-compatible memory REST: threads and their
 * messages under /api/memory. Every query is scoped to the caller's owner:
 * another owner's thread is a 404, never a 403.
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "json.h"
#include "util.h"

static int page_args(struct gh_req *r, int *page, int *per_page)
{
	char buf[32];
	int64_t v;

	*page = 0;
	*per_page = 100;
	if (gh_http_query(r, "page", buf, sizeof(buf))) {
		if (gh_parse_i64(buf, 0, 1000000, &v) != 0) {
			gh_http_errorf(r, GH_E_BADREQ, "page: expected an integer >= 0");
			return -1;
		}
		*page = (int)v;
	}
	if (gh_http_query(r, "perPage", buf, sizeof(buf))) {
		if (gh_parse_i64(buf, 1, 1000, &v) != 0) {
			gh_http_errorf(r, GH_E_BADREQ, "perPage: expected an integer in 1..1000");
			return -1;
		}
		*per_page = (int)v;
	}
	return 0;
}

static void list_threads(struct gh_req *r)
{
	char agent[GH_NAME_MAX + 1], res[GH_NAME_MAX + 1];
	const char *ag = gh_http_query(r, "agentId", agent, sizeof(agent));
	const char *rs = gh_http_query(r, "resourceId", res, sizeof(res));
	int page, per_page;
	cJSON *out = NULL;
	struct gh_err e;

	if (page_args(r, &page, &per_page) != 0)
		return;
	if (ag && !*ag)
		ag = NULL;
	if (rs && !*rs)
		rs = NULL;
	if (gh_store_thread_list(r->app->store, r->who.key.owner, ag, rs, page, per_page, &out,
				 &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	gh_http_json(r, 200, out);
	cJSON_Delete(out);
}

static void create_thread(struct gh_req *r)
{
	cJSON *body = NULL, *out = NULL;
	const cJSON *md;
	const char *title, *res, *tid;
	char agent[GH_NAME_MAX + 1], id[GH_ID_MAX];
	struct gh_err e;

	if (gh_http_body_object(r, &body, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	if (!gh_http_query(r, "agentId", agent, sizeof(agent)))
		gh_strlcpy(agent, gh_json_str(body, "agentId") ? gh_json_str(body, "agentId")
							      : gh_app_cfg(r->app)->default_agent,
			   sizeof(agent));
	res = gh_json_str(body, "resourceId");
	title = gh_json_str(body, "title");
	tid = gh_json_str(body, "threadId");
	md = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	if (!gh_config_agent(gh_app_cfg(r->app), agent)) {
		gh_http_errorf(r, GH_E_NOTFOUND, "no agent \"%s\"", agent);
	} else if (!res || !*res || strlen(res) > GH_NAME_MAX) {
		gh_http_errorf(r, GH_E_BADREQ, "resourceId: required, at most %d characters",
			       GH_NAME_MAX);
	} else if (md && !cJSON_IsObject(md) && !cJSON_IsNull(md)) {
		gh_http_errorf(r, GH_E_BADREQ, "metadata: expected an object");
	} else if (tid && (!*tid || strlen(tid) > GH_NAME_MAX)) {
		gh_http_errorf(r, GH_E_BADREQ, "threadId: at most %d characters", GH_NAME_MAX);
	} else if (title && strlen(title) > 1000) {
		gh_http_errorf(r, GH_E_BADREQ, "title: at most 1000 characters");
	} else {
		if (!tid) {
			gh_id_new("thr_", id, sizeof(id));
			tid = id;
		}
		if (gh_store_thread_create(r->app->store, r->who.key.owner, tid, res, agent, title,
					   cJSON_IsObject(md) ? md : NULL, &e) != GH_OK ||
		    gh_store_thread_get(r->app->store, r->who.key.owner, tid, &out, &e) != GH_OK)
			gh_http_error(r, &e);
		else
			gh_http_json(r, 200, out);
	}
	cJSON_Delete(out);
	cJSON_Delete(body);
}

static void get_thread(struct gh_req *r)
{
	cJSON *out = NULL;
	struct gh_err e;

	if (gh_store_thread_get(r->app->store, r->who.key.owner, r->params[0], &out, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	gh_http_json(r, 200, out);
	cJSON_Delete(out);
}

static void update_thread(struct gh_req *r)
{
	cJSON *body = NULL, *out = NULL;
	const cJSON *md;
	const char *title, *res;
	struct gh_err e;

	if (gh_http_body_object(r, &body, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	title = gh_json_str(body, "title");
	res = gh_json_str(body, "resourceId");
	md = cJSON_GetObjectItemCaseSensitive(body, "metadata");
	if (md && !cJSON_IsObject(md)) {
		gh_http_errorf(r, GH_E_BADREQ, "metadata: expected an object");
	} else if (title && strlen(title) > 1000) {
		gh_http_errorf(r, GH_E_BADREQ, "title: at most 1000 characters");
	} else if (res && (!*res || strlen(res) > GH_NAME_MAX)) {
		gh_http_errorf(r, GH_E_BADREQ, "resourceId: at most %d characters", GH_NAME_MAX);
	} else if (gh_store_thread_update(r->app->store, r->who.key.owner, r->params[0], title, md,
					  res, &e) != GH_OK ||
		   gh_store_thread_get(r->app->store, r->who.key.owner, r->params[0], &out, &e) !=
			   GH_OK) {
		gh_http_error(r, &e);
	} else {
		gh_http_json(r, 200, out);
	}
	cJSON_Delete(out);
	cJSON_Delete(body);
}

static void delete_thread(struct gh_req *r)
{
	struct gh_err e;
	cJSON *o;

	if (gh_store_thread_delete(r->app->store, r->who.key.owner, r->params[0], &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "result", "Thread deleted");
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void thread_messages(struct gh_req *r)
{
	cJSON *out = NULL;
	struct gh_err e;
	int page, per_page;

	if (page_args(r, &page, &per_page) != 0)
		return;
	if (gh_store_messages_page(r->app->store, r->who.key.owner, r->params[0], page, per_page,
				   &out, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	gh_http_json(r, 200, out);
	cJSON_Delete(out);
}

static void memory_status(struct gh_req *r)
{
	char agent[GH_NAME_MAX + 1];
	const struct gh_agent_conf *a =
		gh_config_agent(gh_app_cfg(r->app), gh_http_query(r, "agentId", agent, sizeof(agent))
						     ? agent : gh_app_cfg(r->app)->default_agent);
	cJSON *o = cJSON_CreateObject();

	cJSON_AddBoolToObject(o, "result", a && a->memory_enabled);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

const struct gh_route gh_routes_memory[] = {
	{"GET", "/api/memory/status", GH_AUTH_KEY, memory_status},
	{"GET", "/api/memory/threads", GH_AUTH_KEY, list_threads},
	{"POST", "/api/memory/threads", GH_AUTH_KEY, create_thread},
	{"GET", "/api/memory/threads/:id", GH_AUTH_KEY, get_thread},
	{"PATCH", "/api/memory/threads/:id", GH_AUTH_KEY, update_thread},
	{"DELETE", "/api/memory/threads/:id", GH_AUTH_KEY, delete_thread},
	{"GET", "/api/memory/threads/:id/messages", GH_AUTH_KEY, thread_messages},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
