/*
 * http_login.c - how people log in to the admin UI, over HTTP (the rules
 * are in admin_auth.c):
 *   POST /api/admin/login  {user, password}   no auth
 *        -> 200 {user, csrfToken, expiresAt, idleTimeoutSeconds} + Set-Cookie
 *        -> 401 (unknown user or wrong password, one message), 429 + Retry-After
 *   POST /api/admin/logout                     admin
 *   GET  /api/admin/me                         admin (session or admin key)
 *   POST /api/admin/password {current, new}    admin session (+ CSRF token)
 *        -> 200 {ok, user, sessionsEnded}: the password is changed and the
 *           user's other sessions end; this one goes on
 *        -> 400 (new shorter than GH_ADMIN_PASSWORD_MIN), 403 (current is
 *           wrong, or the caller is an API key), 429 (as for login: a wrong
 *           current password counts as a failed login)
 * Per request, on the worker thread. Passwords, tokens and the body that
 * carried them are wiped before the handler returns.
 */
#include <stdio.h>
#include <string.h>

#include <civetweb.h>
#include <sodium.h>

#include "admin_auth.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "util.h"

static void wipe_member(cJSON *body, const char *name)
{
	cJSON *pw = body ? cJSON_GetObjectItemCaseSensitive(body, name) : NULL;

	if (cJSON_IsString(pw) && pw->valuestring)
		sodium_memzero(pw->valuestring, strlen(pw->valuestring));
}

static void wipe_body(struct gh_req *r, cJSON *body)
{
	wipe_member(body, "password");
	wipe_member(body, "current");
	wipe_member(body, "new");
	if (r->body)
		sodium_memzero(r->body, r->body_len);
	cJSON_Delete(body);
}

static void login(struct gh_req *r)
{
	const struct gh_admin_conf *ac = &gh_app_cfg(r->app)->admin;
	struct gh_admin_login in;
	struct gh_err e;
	cJSON *body = NULL, *o;
	char cookie[256], ts[GH_ISO8601_MAX];
	int n;

	memset(&in, 0, sizeof(in));
	memset(cookie, 0, sizeof(cookie));
	if (gh_http_body_object(r, &body, &e) != GH_OK ||
	    gh_admin_login(r->app, gh_json_str(body, "user"), gh_json_str(body, "password"),
			   r->ri->remote_addr, gh_http_header(r, "Origin"),
			   gh_http_header(r, "Host"), &in, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	n = snprintf(cookie, sizeof(cookie),
		     "Set-Cookie: " GH_ADMIN_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; "
		     "Max-Age=%lld%s\r\n", in.token, (long long)ac->session_max_s,
		     r->ri->is_ssl || (gh_app_cfg(r->app)->server.public_url &&
					!strncmp(gh_app_cfg(r->app)->server.public_url, "https://", 8))
			     ? "; Secure" : "");
	if (n <= 0 || n >= (int)sizeof(cookie)) {
		gh_http_errorf(r, GH_E_INTERNAL, "session cookie too long");
		goto out;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "user", in.user);
	cJSON_AddStringToObject(o, "csrfToken", in.csrf);
	gh_iso8601(in.expires_at, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "expiresAt", ts);
	cJSON_AddNumberToObject(o, "idleTimeoutSeconds", (double)ac->session_idle_s);
	r->extra_headers = cookie;
	gh_http_json(r, 200, o);
	r->extra_headers = NULL;
	cJSON_Delete(o);
out:
	sodium_memzero(&in, sizeof(in));
	sodium_memzero(cookie, sizeof(cookie));
	wipe_body(r, body);
}

static void logout(struct gh_req *r)
{
	static const char clear[] = "Set-Cookie: " GH_ADMIN_COOKIE "=; Path=/; HttpOnly; "
				    "SameSite=Strict; Max-Age=0\r\n";
	struct gh_err e;
	cJSON *o;

	if (r->session && gh_admin_logout(r->app, gh_http_header(r, "Cookie"), r->who.admin_user,
					  r->ri->remote_addr, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	r->extra_headers = clear;
	gh_http_json(r, 200, o);
	r->extra_headers = NULL;
	cJSON_Delete(o);
}

static void me(struct gh_req *r)
{
	const struct gh_admin_conf *ac = &gh_app_cfg(r->app)->admin;
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (r->session) {
		struct gh_admin_me s;
		struct gh_err e;

		if (gh_admin_session_me(r->app, gh_http_header(r, "Cookie"), &s, &e) != GH_OK) {
			cJSON_Delete(o);
			gh_http_error(r, &e);
			return;
		}
		cJSON_AddStringToObject(o, "user", s.user);
		cJSON_AddStringToObject(o, "via", "session");
		cJSON_AddStringToObject(o, "csrfToken", s.csrf);
		gh_iso8601(s.expires_at, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "expiresAt", ts);
		cJSON_AddNumberToObject(o, "idleTimeoutSeconds", (double)ac->session_idle_s);
		sodium_memzero(&s, sizeof(s));
	} else {
		cJSON_AddNullToObject(o, "user");
		cJSON_AddStringToObject(o, "via", "key");
		cJSON_AddNullToObject(o, "csrfToken");
		cJSON_AddStringToObject(o, "keyId", r->who.key.id);
		cJSON_AddStringToObject(o, "keyName", r->who.key.name);
	}
	cJSON_AddStringToObject(o, "actor", r->who.actor);
	cJSON_AddStringToObject(o, "version", GH_VERSION);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

static void password(struct gh_req *r)
{
	struct gh_err e;
	cJSON *body = NULL, *o;
	int ended = 0;

	/* the body first: a malformed one is a 400 whoever sends it */
	if (gh_http_body_object(r, &body, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	if (!r->session) {
		gh_http_errorf(r, GH_E_FORBIDDEN, "only an admin signed in to the UI has a password "
			       "to change (admin API keys have none); an operator resets one with "
			       "gatehouse admin passwd");
		goto out;
	}
	if (gh_admin_password(r->app, gh_http_header(r, "Cookie"), r->who.admin_user,
			      gh_json_str(body, "current"), gh_json_str(body, "new"),
			      r->ri->remote_addr, &ended, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddStringToObject(o, "user", r->who.admin_user);
	cJSON_AddNumberToObject(o, "sessionsEnded", ended);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
out:
	wipe_body(r, body);
}

const struct gh_route gh_routes_login[] = {
	{"POST", "/api/admin/login", GH_AUTH_NONE, login},
	{"POST", "/api/admin/logout", GH_AUTH_ADMIN, logout},
	{"GET", "/api/admin/me", GH_AUTH_ADMIN, me},
	{"POST", "/api/admin/password", GH_AUTH_ADMIN, password},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
