/*
 * admin_auth.h - how people log in to the admin UI: password login, the
 * session cookie, CSRF protection, and the response headers every admin
 * page carries.
 *
 * A login checks an Argon2id hash (libsodium crypto_pwhash_str_verify) and
 * gives a cookie "gh_session" holding 256 random bits (base64url); only a
 * BLAKE2b-256 hash of it is stored. The cookie is HttpOnly, SameSite=Strict,
 * Path=/, and Secure when the request came over TLS. A session ends after
 * admin.session_idle_s without use, after admin.session_max_s in any case,
 * at logout, or when its admin is disabled. Each session has a CSRF token,
 * returned by login and GET /api/admin/me, that every state-changing
 * request authenticated by the session must send in X-CSRF-Token.
 *
 * Failed logins are rate limited per client address (any user name;
 * admin.login_attempts_per_minute; an IPv6 address counts by its /64) and,
 * higher and slower, per user name from every address
 * (admin.login_failures_per_user_per_hour): failures from one address lock
 * that address out, not the user everywhere, until the per-user limit.
 * Unknown users and wrong passwords get the same answer in about the same
 * time. Logins, failures and logouts are audit events (admin_login,
 * admin_login_failed, admin_logout); so is a password change
 * (admin_password_changed), written in the change's own transaction.
 *
 * Passwords have GH_ADMIN_PASSWORD_MIN..GH_ADMIN_PASSWORD_MAX characters.
 *
 * No HTTP in here: callers hand over the header values they got (the
 * routes are in http_login.c). Thread-safe: every function may run on any
 * CivetWeb worker at once.
 */
#ifndef GH_ADMIN_AUTH_H
#define GH_ADMIN_AUTH_H

#include <stdint.h>

#include "app.h"
#include "err.h"
#include "policy.h"

#define GH_ADMIN_COOKIE "gh_session"
#define GH_ADMIN_PASSWORD_MIN 10
#define GH_ADMIN_PASSWORD_MAX 1024
#define GH_ADMIN_CSRF_MAX 64
#define GH_ADMIN_CSRF_HEADER "X-CSRF-Token"
#define GH_ADMIN_TOKEN_MAX 64      /* base64url of 32 bytes: 43 characters */

/* Headers on every response under /admin (the UI's pages and files): no
 * inline script or style, nothing from elsewhere, never framed. (http.c
 * adds X-Content-Type-Options: nosniff to every response.) */
#define GH_ADMIN_SECURITY_HEADERS                                                        \
	"Content-Security-Policy: default-src 'self'; script-src 'self'; style-src 'self'; " \
	"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; " \
	"form-action 'self'\r\n"                                                        \
	"Referrer-Policy: no-referrer\r\n"                                              \
	"X-Frame-Options: DENY\r\n"

/* 1 when path is "/admin" or lies under "/admin/" (the UI's own files). */
int gh_admin_ui_path(const char *path);

/* 1 when origin (the Origin header; NULL when not sent) names this server:
 * its host:port equals host (the Host header). */
int gh_admin_origin_ok(const char *origin, const char *host);

/* Authenticates a request by the session cookie in cookie_header (the
 * Cookie header, or NULL): fills who (admin 1, admin_user, actor
 * "admin:<user>", key.id "") and copies the session's CSRF token into
 * csrf. GH_E_AUTH when there is no cookie ("missing API key ...", as for
 * key routes), or when the session is unknown, expired or its admin
 * disabled. */
enum gh_code gh_admin_session_auth(struct gh_app *app, const char *cookie_header,
				   struct gh_principal *who, char csrf[GH_ADMIN_CSRF_MAX],
				   struct gh_err *e);

/* For a request authenticated by a session: GH_OK for GET, HEAD and
 * OPTIONS; any other method needs csrf_header (X-CSRF-Token) equal to csrf
 * (compared in constant time) and, when an Origin header was sent, an
 * origin whose host:port is host. GH_E_FORBIDDEN otherwise. */
enum gh_code gh_admin_csrf_check(const char *method, const char *csrf_header,
				 const char *origin, const char *host, const char *csrf,
				 struct gh_err *e);

/* 1 while the session of cookie_header still holds (not logged out, not
 * expired, admin not disabled), judged without counting as activity:
 * long-lived streams call it now and then. A read error is not a logout. */
int gh_admin_session_alive(struct gh_app *app, const char *cookie_header);

/* A session as GET /api/admin/me shows it. GH_E_AUTH when it ended. */
struct gh_admin_me {
	char user[GH_NAME_MAX + 1];
	char csrf[GH_ADMIN_CSRF_MAX];
	int64_t expires_at;
};
enum gh_code gh_admin_session_me(struct gh_app *app, const char *cookie_header,
				 struct gh_admin_me *out, struct gh_err *e);

/* A successful login: the cookie's token and the session's CSRF token
 * (wipe both with sodium_memzero), its expiry, and the admin's name. */
struct gh_admin_login {
	char token[GH_ADMIN_TOKEN_MAX];
	char csrf[GH_ADMIN_CSRF_MAX];
	char user[GH_NAME_MAX + 1];
	int64_t expires_at;
};

/* Checks user and password from address (for the failed-login limits and
 * the audit row) and starts a session; origin and host are the request's
 * Origin (NULL when not sent) and Host headers. GH_E_BADREQ (lengths),
 * GH_E_FORBIDDEN (a cross-site login), GH_E_AUTH
 * ("wrong user name or password", one message for every failure),
 * GH_E_RATELIMIT (e->retry_after set), GH_E_UNAVAILABLE (the audit log
 * could not record the login: no session). */
enum gh_code gh_admin_login(struct gh_app *app, const char *user, const char *password,
			    const char *address, const char *origin, const char *host,
			    struct gh_admin_login *out, struct gh_err *e);

/* Ends the session of cookie_header (when there is one) and writes the
 * admin_logout row for admin_user, from address. */
enum gh_code gh_admin_logout(struct gh_app *app, const char *cookie_header,
			     const char *admin_user, const char *address, struct gh_err *e);

/* A signed-in admin (admin_user, with the session of cookie_header, from
 * address) changes their password: current must be right (a wrong one
 * counts as a failed login), fresh has GH_ADMIN_PASSWORD_MIN..MAX
 * characters. The admin's other sessions end (*ended says how many); this
 * one goes on. GH_E_BADREQ, GH_E_AUTH (the session ended), GH_E_FORBIDDEN
 * (current is wrong), GH_E_RATELIMIT (e->retry_after set). */
enum gh_code gh_admin_password(struct gh_app *app, const char *cookie_header,
			       const char *admin_user, const char *current, const char *fresh,
			       const char *address, int *ended, struct gh_err *e);

#endif
