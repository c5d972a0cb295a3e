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
 * Thread-safe: every function may run on any CivetWeb worker at once.
 */
#ifndef GH_ADMIN_AUTH_H
#define GH_ADMIN_AUTH_H

#include "err.h"
#include "http.h"

#define GH_ADMIN_COOKIE "gh_session"
#define GH_ADMIN_PASSWORD_MIN 10
#define GH_ADMIN_PASSWORD_MAX 1024
#define GH_ADMIN_CSRF_MAX 64
#define GH_ADMIN_CSRF_HEADER "X-CSRF-Token"

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

/* Authenticates r by its session cookie; http.c calls it for requests
 * without an Authorization header. On success fills r->who (admin 1,
 * admin_user, actor "admin:<user>", key.id ""), sets r->session and
 * r->authed, and copies the session's CSRF token into csrf. GH_E_AUTH
 * when there is no cookie ("missing API key ...", as for key routes), or
 * when the session is unknown, expired or its admin disabled. */
enum gh_code gh_admin_session_auth(struct gh_req *r, char csrf[GH_ADMIN_CSRF_MAX],
				   struct gh_err *e);

/* For a request authenticated by a session: GH_OK for GET, HEAD and
 * OPTIONS; any other method needs X-CSRF-Token equal to csrf (compared in
 * constant time) and, when an Origin header is present, an Origin whose
 * host:port is the request's Host. GH_E_FORBIDDEN otherwise. */
enum gh_code gh_admin_csrf_check(struct gh_req *r, const char *csrf, struct gh_err *e);

/* 1 while the session r was authenticated with still holds (not logged
 * out, not expired, admin not disabled), judged without counting as
 * activity: long-lived streams call it now and then. 1 for requests not
 * authenticated by a session. */
int gh_admin_session_alive(struct gh_req *r);

/* Route handlers (registered in http_admin.c):
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
 *           current password counts as a failed login) */
void gh_admin_login(struct gh_req *r);
void gh_admin_logout(struct gh_req *r);
void gh_admin_me(struct gh_req *r);
void gh_admin_password(struct gh_req *r);

#endif
