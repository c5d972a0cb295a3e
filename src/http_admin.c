/*
 * http_admin.c - the admin UI's surface: its static files, embedded in the
 * binary, and the JSON endpoints it needs beyond the governance API (which
 * curl users share with it):
 *   GET  /admin                      302 -> /admin/
 *   GET  /admin/ , /admin/<file>     the UI (web-admin/, see embed.h)
 *   POST /api/admin/login|logout|password   GET /api/admin/me   (http_login.c)
 *   GET  /api/admin/overview         pending approvals, last 24 h of activity
 *   GET  /api/admin/threads[?agentId&resourceId&owner&page&perPage]
 *   GET  /api/admin/threads/:id[?owner]  GET /api/admin/threads/:id/messages[?owner&page&perPage|last]
 *   GET  /api/approvals/events       SSE: snapshot, approval-requested, approval-decided
 *   GET  /api/keys                   POST /api/keys   POST /api/keys/:id/revoke
 *   GET  /api/policies               the effective policies, agents and tools
 * Everything but the static files and login needs an admin: an admin
 * session (cookie + CSRF token) or an API key with role admin.
 *
 * Threading: handlers run on CivetWeb workers; the embedded files and the
 * config are read-only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "admin_audit.h"
#include "admin_auth.h"
#include "approvals.h"
#include "embed.h"
#include "http.h"
#include "hub.h"
#include "json.h"
#include "reload.h"
#include "keys.h"
#include "log.h"
#include "mcp_sessions.h"
#include "store_ui.h"
#include "util.h"

/* How often a live stream checks that its session still holds. */
#define SESSION_RECHECK_MS 5000

/* -------------------------------------------------------- static files */

static const char *content_type(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
		{".html", "text/html; charset=utf-8"},
		{".css", "text/css; charset=utf-8"},
		{".js", "text/javascript; charset=utf-8"},
		{".mjs", "text/javascript; charset=utf-8"},
		{".json", "application/json"},
		{".svg", "image/svg+xml"},
		{".png", "image/png"},
		{".ico", "image/x-icon"},
		{".txt", "text/plain; charset=utf-8"},
		{".woff2", "font/woff2"},
	};
	const char *dot = strrchr(name, '.');
	size_t i;

	for (i = 0; dot && i < GH_ARRAY_LEN(types); i++)
		if (!strcmp(dot, types[i].ext))
			return types[i].type;
	return "application/octet-stream";
}

static void send_file(struct gh_req *r, const char *name)
{
	const struct gh_embedded *f;

	for (f = gh_embedded_web; f->name; f++) {
		if (!strcmp(f->name, name)) {
			gh_http_send(r, 200, content_type(name), (const char *)f->data, f->len);
			return;
		}
	}
	gh_http_errorf(r, GH_E_NOTFOUND, "no admin UI file %s", name);
}

static void ui_redirect(struct gh_req *r)
{
	static const char body[] = "see /admin/\n";

	r->extra_headers = "Location: /admin/\r\n";
	gh_http_send(r, 302, "text/plain; charset=utf-8", body, sizeof(body) - 1);
	r->extra_headers = NULL;
}

static void ui_index(struct gh_req *r)
{
	send_file(r, "index.html");
}

static void ui_file(struct gh_req *r)
{
	/* the route matched "/admin/<one or two segments>" */
	send_file(r, r->path + strlen("/admin/"));
}

/* -------------------------------------------------------- small helpers */

static cJSON *strlist_json(const struct gh_strlist *l)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; a && i < l->n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(l->v[i]));
	return a;
}

/* A query parameter, NULL when absent or empty. */
static const char *query(struct gh_req *r, const char *name, char *buf, size_t cap)
{
	const char *v = gh_http_query(r, name, buf, cap);

	return v && *v ? v : NULL;
}

/* An integer query parameter within [min, max], dflt when absent; -1 after
 * answering 400. */
static int query_int(struct gh_req *r, const char *name, int64_t min, int64_t max,
		     int64_t dflt, int64_t *out)
{
	char buf[24];
	const char *v = query(r, name, buf, sizeof(buf));

	*out = dflt;
	if (v && gh_parse_i64(v, min, max, out) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "%s: expected an integer in %lld..%lld", name,
			       (long long)min, (long long)max);
		return -1;
	}
	return 0;
}

static void send_owned(struct gh_req *r, int status, cJSON *o)
{
	gh_http_json(r, status, o);
	cJSON_Delete(o);
}

/* ------------------------------------------------------------- overview */

static void overview(struct gh_req *r)
{
	const int64_t hour = 3600 * 1000;
	int64_t now = gh_now_ms(), since, pending = 0;
	cJSON *o = NULL, *act = NULL, *oldest = NULL, *first;
	struct gh_err e;

	/* whole hours, so the chart's bars line up with the clock */
	since = (now / hour + 1) * hour - 24 * hour;
	if (gh_store_ui_pending_count(r->app->store, &pending, &e) != GH_OK ||
	    gh_store_ui_activity(r->app->store, since, hour, 24, &act, &e) != GH_OK ||
	    gh_approval_list(r->app, "pending", NULL, 1, &oldest, &e) != GH_OK) {
		cJSON_Delete(act);
		gh_http_error(r, &e);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "pendingApprovals", (double)pending);
	first = cJSON_GetArrayItem(oldest, 0);
	gh_json_add_str(o, "oldestPendingAt", first ? gh_json_str(first, "createdAt") : NULL);
	gh_json_add_time(o, "since", since);
	gh_json_add_time(o, "now", now);
	cJSON_AddNumberToObject(o, "bucketSeconds", 3600);
	cJSON_AddItemToObject(o, "last24h", gh_store_ui_summary(act));
	cJSON_AddItemReferenceToObject(o, "byEvent", cJSON_GetObjectItemCaseSensitive(act,
										      "byEvent"));
	cJSON_AddItemReferenceToObject(o, "toolCallsPerHour",
				       cJSON_GetObjectItemCaseSensitive(act, "buckets"));
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	cJSON_Delete(act);
	cJSON_Delete(oldest);
}

/* -------------------------------------------------------------- threads */

static void threads(struct gh_req *r)
{
	char agent[GH_NAME_MAX + 1], res[GH_NAME_MAX + 1], owner[GH_NAME_MAX + 1];
	int64_t page, per;
	cJSON *out;
	struct gh_err e;

	if (query_int(r, "page", 0, 1000000, 0, &page) != 0 ||
	    query_int(r, "perPage", 1, 100, 25, &per) != 0)
		return;
	if (gh_store_ui_threads(r->app->store, query(r, "owner", owner, sizeof(owner)),
				query(r, "agentId", agent, sizeof(agent)),
				query(r, "resourceId", res, sizeof(res)), (int)page, (int)per, &out,
				&e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	send_owned(r, 200, out);
}

static void thread_get(struct gh_req *r)
{
	char owner[GH_NAME_MAX + 1];
	cJSON *out;
	struct gh_err e;

	if (gh_store_ui_thread(r->app->store, query(r, "owner", owner, sizeof(owner)),
			       r->params[0], &out, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	send_owned(r, 200, out);
}

static void thread_messages(struct gh_req *r)
{
	char owner[GH_NAME_MAX + 1];
	int64_t page, per, last;
	cJSON *out;
	struct gh_err e;

	if (query_int(r, "page", 0, 1000000, 0, &page) != 0 ||
	    query_int(r, "perPage", 1, 100, 50, &per) != 0 ||
	    query_int(r, "last", 1, 100, 0, &last) != 0)
		return;
	if (gh_store_ui_messages(r->app->store, query(r, "owner", owner, sizeof(owner)),
				 r->params[0], (int)page, (int)per, (int)last, &out, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	send_owned(r, 200, out);
}

/* ------------------------------------------------------ live approvals */

static int send_snapshot(struct gh_http_stream *hs)
{
	cJSON *arr = NULL, *o;
	struct gh_err e;

	if (gh_approval_list(hs->r->app, "pending", NULL, 1000, &arr, &e) != GH_OK) {
		gh_warn("%s approvals stream: %s", hs->r->id, e.msg);
		arr = cJSON_CreateArray();
	}
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "approvals", arr);
	gh_json_add_time(o, "now", gh_now_ms());
	return gh_http_stream_json(hs, "snapshot", o);
}

struct approvals_watch {
	struct gh_http_stream hs;
	int64_t last_check;
};

static int watch_event(void *ud, const char *type, const char *data)
{
	struct approvals_watch *w = ud;

	return gh_http_stream_send(&w->hs, type, data, strlen(data));
}

/* Events were lost: the client starts over from a snapshot. */
static int watch_lost(void *ud)
{
	struct approvals_watch *w = ud;

	return send_snapshot(&w->hs);
}

/* Now and then: does the session still hold? */
static int watch_idle(void *ud)
{
	struct approvals_watch *w = ud;
	int64_t now = gh_mono_ns();

	if (now - w->last_check < (int64_t)SESSION_RECHECK_MS * 1000000)
		return 0;
	w->last_check = now;
	if (!w->hs.r->session ||
	    gh_admin_session_alive(w->hs.r->app, gh_http_header(w->hs.r, "Cookie")))
		return 0;
	gh_http_stream_send(&w->hs, "session-ended", "{}", 2);
	return 1;
}

/* SSE of the hub topic "approvals": a snapshot of what is pending, then
 * every request and decision as it happens, until the client leaves, the
 * server stops or the session ends. */
static void approval_events(struct gh_req *r)
{
	struct gh_hub_sub *sub = NULL;
	struct approvals_watch w;

	if (!r->app->hub) {
		gh_http_errorf(r, GH_E_UNAVAILABLE, "live events are not available");
		return;
	}
	if (gh_http_stream_start(r, &w.hs) != 0)
		return;
	/* subscribe before the snapshot so nothing falls in between */
	if (!(sub = gh_hub_subscribe(r->app->hub, "approvals"))) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	if (send_snapshot(&w.hs) == 0) {
		w.last_check = gh_mono_ns();
		gh_http_stream_follow(&w.hs, sub, watch_event, watch_lost, watch_idle, &w);
		gh_http_stream_end(&w.hs, 0);
	}
	gh_hub_unsubscribe(r->app->hub, sub);
}

/* ----------------------------------------------------------------- keys */

static cJSON *key_json(const struct gh_key *k)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", k->id);
	cJSON_AddStringToObject(o, "prefix", k->prefix);
	cJSON_AddStringToObject(o, "name", k->name);
	cJSON_AddStringToObject(o, "owner", k->owner);
	cJSON_AddStringToObject(o, "policy", k->policy[0] ? k->policy : "default");
	cJSON_AddStringToObject(o, "role", k->admin ? "admin" : "user");
	gh_json_add_time(o, "createdAt", k->created_at);
	gh_json_add_time(o, "lastUsedAt", k->last_used_at);
	gh_json_add_time(o, "revokedAt", k->revoked_at);
	return o;
}

static int collect_key(void *ud, const struct gh_key *k)
{
	cJSON *j = key_json(k);

	if (j)
		cJSON_AddItemToArray(ud, j);
	return 0;
}

static void keys_list(struct gh_req *r)
{
	cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "keys");
	struct gh_err e;

	if (gh_store_key_list(r->app->store, collect_key, arr, &e) != GH_OK) {
		cJSON_Delete(o);
		gh_http_error(r, &e);
		return;
	}
	send_owned(r, 200, o);
}

/* key_created / key_revoked, by whoever is calling. */
static enum gh_code audit_key(struct gh_req *r, const char *event, const struct gh_key *k,
			      struct gh_err *e)
{
	struct gh_admin_action a = {
		.event = event, .via = r->session ? "web" : "api",
		.admin_user = r->who.admin_user[0] ? r->who.admin_user : NULL,
		.key = k, .by = r->who.actor};

	return gh_admin_audit(r->app->store, &a, e);
}

/* 1..GH_NAME_MAX bytes without control characters (as the CLI takes). */
static void keys_create(struct gh_req *r)
{
	struct gh_key k;
	struct gh_err e, re;
	char secret[GH_KEY_SECRET_MAX];
	cJSON *body = NULL, *o, *adm;
	const char *name, *owner, *policy;

	memset(secret, 0, sizeof(secret));
	if (gh_http_body_object(r, &body, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	name = gh_json_str(body, "name");
	owner = gh_json_str(body, "owner");
	policy = gh_json_str(body, "policy");
	adm = cJSON_GetObjectItemCaseSensitive(body, "admin");
	if (owner && !*owner)
		owner = NULL;
	if (policy && (!*policy || !strcmp(policy, "default")))
		policy = NULL;
	if (!gh_name_ok(name) || (owner && !gh_name_ok(owner)) || (policy && !gh_name_ok(policy))) {
		gh_http_errorf(r, GH_E_BADREQ, "name (required), owner and policy: 1..%d printable "
			       "characters", GH_NAME_MAX);
		goto out;
	}
	if (adm && !cJSON_IsBool(adm)) {
		gh_http_errorf(r, GH_E_BADREQ, "admin: expected true or false");
		goto out;
	}
	if (policy && !gh_config_policy(gh_app_cfg(r->app), policy)) {
		gh_http_errorf(r, GH_E_BADREQ, "policy: no policy \"%s\" in the config", policy);
		goto out;
	}
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.name, name, sizeof(k.name));
	gh_strlcpy(k.owner, owner ? owner : name, sizeof(k.owner));
	gh_strlcpy(k.policy, policy ? policy : "", sizeof(k.policy));
	k.admin = cJSON_IsTrue(adm);
	if (gh_keys_create(r->app->store, r->app->hashkey, &k, secret, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	if (audit_key(r, "key_created", &k, &e) != GH_OK) {
		/* an unrecorded credential must not stay usable */
		gh_store_key_revoke(r->app->store, k.id, &re);
		gh_http_errorf(r, GH_E_UNAVAILABLE, "audit log unavailable (%s); the key was not "
			       "created", e.msg);
		goto out;
	}
	gh_info("%s key %s created by %s", r->id, k.id, r->who.actor);
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "key", key_json(&k));
	cJSON_AddStringToObject(o, "secret", secret);
	gh_http_json(r, 201, o);
	{
		/* the secret leaves once; wipe every copy held here */
		cJSON *sj = cJSON_GetObjectItemCaseSensitive(o, "secret");

		if (cJSON_IsString(sj))
			sodium_memzero(sj->valuestring, strlen(sj->valuestring));
	}
	cJSON_Delete(o);
out:
	sodium_memzero(secret, sizeof(secret));
	cJSON_Delete(body);
}

static void keys_revoke(struct gh_req *r)
{
	struct gh_key k;
	struct gh_err e;

	if (gh_store_key_by_id(r->app->store, r->params[0], &k, &e) != GH_OK ||
	    gh_store_key_revoke(r->app->store, r->params[0], &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	if (audit_key(r, "key_revoked", &k, &e) != GH_OK)
		gh_warn("%s audit: cannot record the revocation of %s: %s", r->id, k.id, e.msg);
	gh_info("%s key %s revoked by %s", r->id, k.id, r->who.actor);
	/* its MCP sessions end with it */
	if (r->app->mcp_sessions)
		gh_mcp_sessions_end_key(r->app->mcp_sessions, k.id);
	k.revoked_at = gh_now_ms();
	send_owned(r, 200, key_json(&k));
}

/* ------------------------------------------------------------- policies */

static cJSON *policy_json(const struct gh_policy_conf *p)
{
	cJSON *o = cJSON_CreateObject(), *t, *c, *a, *rl, *tl;
	size_t i;

	cJSON_AddStringToObject(o, "name", p->name);
	cJSON_AddStringToObject(o, "version", p->version);
	cJSON_AddItemToObject(o, "agents", strlist_json(&p->agents));
	t = cJSON_AddObjectToObject(o, "tools");
	cJSON_AddItemToObject(t, "allow", strlist_json(&p->tools_allow));
	cJSON_AddItemToObject(t, "deny", strlist_json(&p->tools_deny));
	c = cJSON_AddObjectToObject(o, "clientTools");
	cJSON_AddBoolToObject(c, "enabled", p->client_tools_enabled);
	cJSON_AddItemToObject(c, "allow", strlist_json(&p->client_allow));
	cJSON_AddItemToObject(c, "deny", strlist_json(&p->client_deny));
	a = cJSON_AddObjectToObject(o, "approval");
	cJSON_AddItemToObject(a, "require", strlist_json(&p->approval_require));
	cJSON_AddStringToObject(a, "approver", p->approver == GH_APPROVER_CALLER ? "caller"
										    : "admin");
	cJSON_AddNumberToObject(a, "ttlSeconds", (double)p->approval_ttl_s);
	rl = cJSON_AddObjectToObject(o, "rateLimits");
	cJSON_AddNumberToObject(rl, "requestsPerMinute", (double)p->requests_per_minute);
	cJSON_AddNumberToObject(rl, "burst", (double)p->burst);
	cJSON_AddNumberToObject(rl, "tokensPerMinute", (double)p->tokens_per_minute);
	tl = cJSON_AddObjectToObject(rl, "toolCallsPerMinute");
	for (i = 0; i < p->ntool_limits; i++)
		cJSON_AddNumberToObject(tl, p->tool_limits[i].glob,
					(double)p->tool_limits[i].per_minute);
	return o;
}

static void policies(struct gh_req *r)
{
	const struct gh_config *cfg = gh_app_cfg(r->app);
	cJSON *o = cJSON_CreateObject(), *ps, *as, *ts;
	size_t i;

	ps = cJSON_AddArrayToObject(o, "policies");
	for (i = 0; i < cfg->npolicies; i++)
		cJSON_AddItemToArray(ps, policy_json(&cfg->policies[i]));
	as = cJSON_AddArrayToObject(o, "agents");
	for (i = 0; i < cfg->nagents; i++) {
		const struct gh_agent_conf *a = &cfg->agents[i];
		cJSON *j = cJSON_CreateObject();

		cJSON_AddStringToObject(j, "id", a->id);
		gh_json_add_str(j, "name", a->name);
		cJSON_AddStringToObject(j, "provider", a->provider);
		cJSON_AddStringToObject(j, "model", a->model);
		cJSON_AddItemToObject(j, "tools", strlist_json(&a->tools));
		cJSON_AddItemToObject(j, "requireApproval", strlist_json(&a->require_approval));
		cJSON_AddBoolToObject(j, "memory", a->memory_enabled);
		cJSON_AddItemToArray(as, j);
	}
	ts = cJSON_AddArrayToObject(o, "tools");
	for (i = 0; i < cfg->ntools; i++) {
		const struct gh_tool_conf *t = &cfg->tools[i];
		cJSON *j = cJSON_CreateObject();

		/* never the headers: they may carry credentials */
		cJSON_AddStringToObject(j, "name", t->name);
		gh_json_add_str(j, "description", t->description);
		cJSON_AddBoolToObject(j, "requireApproval", t->require_approval);
		cJSON_AddItemToArray(ts, j);
	}
	send_owned(r, 200, o);
}

/* POST /api/admin/reload: re-reads the config file (reload.h) and answers
 * {"ok":true,"digest","generation","changed":[...],"restart_required":[...]},
 * or the usual error (400 for a config that is refused). This request
 * itself finishes under the config it started with. */
static void reload(struct gh_req *r)
{
	struct gh_reload_opts o = {"api", r->who.actor, r->app->db_override};
	struct gh_err e;
	cJSON *res = NULL;

	if (gh_reload(r->app, &o, &res, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	send_owned(r, 200, res);
}

const struct gh_route gh_routes_admin[] = {
	{"GET", "/admin", GH_AUTH_NONE, ui_redirect},
	{"GET", "/admin/", GH_AUTH_NONE, ui_index},
	{"GET", "/admin/:file", GH_AUTH_NONE, ui_file},
	{"GET", "/admin/:dir/:file", GH_AUTH_NONE, ui_file},
	{"GET", "/api/admin/overview", GH_AUTH_ADMIN, overview},
	{"GET", "/api/admin/threads", GH_AUTH_ADMIN, threads},
	{"GET", "/api/admin/threads/:id", GH_AUTH_ADMIN, thread_get},
	{"GET", "/api/admin/threads/:id/messages", GH_AUTH_ADMIN, thread_messages},
	{"GET", "/api/approvals/events", GH_AUTH_ADMIN, approval_events},
	{"GET", "/api/keys", GH_AUTH_ADMIN, keys_list},
	{"POST", "/api/keys", GH_AUTH_ADMIN, keys_create},
	{"POST", "/api/keys/:id/revoke", GH_AUTH_ADMIN, keys_revoke},
	{"GET", "/api/policies", GH_AUTH_ADMIN, policies},
	{"POST", "/api/admin/reload", GH_AUTH_ADMIN, reload},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
