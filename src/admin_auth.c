/*
 * admin_auth.c - admin UI login, sessions and CSRF; see admin_auth.h.
 *
 * Threading: handlers run on CivetWeb workers. Password checks are
 * expensive on purpose (Argon2id, 64 MiB each), so at most PWHASH_AT_ONCE
 * run at a time; the rest wait their turn. The stand-in hash used for
 * unknown users is made once (pthread_once).
 */
#include "admin_auth.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <civetweb.h>
#include <sodium.h>

#include "admin_audit.h"
#include "json.h"
#include "log.h"
#include "ratelimit.h"
#include "store_ui.h"
#include "util.h"

#define PWHASH_AT_ONCE 2
#define TOKEN_BYTES 32
#define TOKEN_B64_MAX 64           /* base64url of 32 bytes: 43 chars */

/* ---------------------------------------------------------- small parts */

int gh_admin_ui_path(const char *path)
{
	return path && !strncmp(path, "/admin", 6) && (path[6] == '\0' || path[6] == '/');
}

/* The session cookie's value into tok; 0 when present and well formed. */
static int cookie_token(struct gh_req *r, char tok[TOKEN_B64_MAX])
{
	const char *ch = mg_get_header(r->conn, "Cookie");
	int n;

	if (!ch)
		return -1;
	n = mg_get_cookie(ch, GH_ADMIN_COOKIE, tok, TOKEN_B64_MAX);
	if (n <= 0 || n >= TOKEN_B64_MAX)
		return -1;
	return 0;
}

static void token_hash(const char *tok, unsigned char out[32])
{
	crypto_generichash(out, 32, (const unsigned char *)tok, strlen(tok), NULL, 0);
}

/* A fresh random token: 32 bytes as unpadded base64url. */
static void new_token(char out[TOKEN_B64_MAX])
{
	unsigned char raw[TOKEN_BYTES];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(out, TOKEN_B64_MAX, raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
}

static void fill_principal(struct gh_req *r, const char *user)
{
	memset(&r->who, 0, sizeof(r->who));
	r->who.admin = 1;
	gh_strlcpy(r->who.admin_user, user, sizeof(r->who.admin_user));
	snprintf(r->who.actor, sizeof(r->who.actor), "admin:%s", user);
	r->session = 1;
	r->authed = 1;
}

/* Origin (when sent) must name this server: its host:port equals Host. */
static int origin_ok(struct gh_req *r)
{
	const char *origin = mg_get_header(r->conn, "Origin");
	const char *host = mg_get_header(r->conn, "Host");
	const char *p;

	if (!origin)
		return 1;
	if (!host || !(p = strstr(origin, "://")))
		return 0;
	p += 3;
	return strcasecmp(p, host) == 0;
}

/* ------------------------------------------------------------- sessions */

enum gh_code gh_admin_session_auth(struct gh_req *r, char csrf[GH_ADMIN_CSRF_MAX],
				   struct gh_err *e)
{
	const struct gh_admin_conf *ac = &r->app->cfg->admin;
	struct gh_admin_session s;
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];
	struct gh_err se;

	csrf[0] = '\0';
	if (cookie_token(r, tok) != 0)
		return gh_err_set(e, GH_E_AUTH, "missing API key: send Authorization: Bearer <key> "
				  "(or log in to the admin UI)");
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	if (gh_store_session_get(r->app->store, h, ac->session_idle_s * 1000, &s, &se) != GH_OK) {
		if (se.code != GH_E_NOTFOUND)
			return gh_err_set(e, se.code, "%s", se.msg);
		return gh_err_set(e, GH_E_AUTH, "admin session expired or ended: log in again");
	}
	fill_principal(r, s.user);
	gh_strlcpy(csrf, s.csrf, GH_ADMIN_CSRF_MAX);
	sodium_memzero(&s, sizeof(s));
	return GH_OK;
}

enum gh_code gh_admin_csrf_check(struct gh_req *r, const char *csrf, struct gh_err *e)
{
	const char *m = r->method, *sent;
	size_t n;

	if (!strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS"))
		return GH_OK;
	sent = mg_get_header(r->conn, GH_ADMIN_CSRF_HEADER);
	n = strlen(csrf);
	if (!sent || n == 0 || strlen(sent) != n ||
	    sodium_memcmp(sent, csrf, n) != 0)
		return gh_err_set(e, GH_E_FORBIDDEN, "missing or wrong " GH_ADMIN_CSRF_HEADER
				  " header: a request changing state with an admin session must "
				  "send the session's CSRF token (from login or "
				  "GET /api/admin/me)");
	if (!origin_ok(r))
		return gh_err_set(e, GH_E_FORBIDDEN, "the Origin header does not match this "
				  "server's Host: cross-site requests are refused");
	return GH_OK;
}

int gh_admin_session_alive(struct gh_req *r)
{
	const struct gh_admin_conf *ac = &r->app->cfg->admin;
	struct gh_admin_session s;
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];
	struct gh_err e;
	int64_t now = gh_now_ms();
	int alive;

	if (!r->session)
		return 1;
	if (cookie_token(r, tok) != 0)
		return 0;
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	if (gh_store_session_peek(r->app->store, h, &s, &e) != GH_OK)
		return e.code != GH_E_NOTFOUND; /* a read error is not a logout */
	alive = s.expires_at > now && now - s.last_seen_at <= ac->session_idle_s * 1000;
	sodium_memzero(&s, sizeof(s));
	return alive;
}

/* --------------------------------------------------------------- audit */

/* An admin_* audit row: who (admin_user, may be NULL), the outcome, and a
 * detail naming the address and the user name that was tried. */
static enum gh_code audit_admin(struct gh_req *r, const char *event, const char *admin_user,
				const char *outcome, const char *reason, const char *user,
				struct gh_err *e)
{
	struct gh_admin_action a = {.event = event, .via = "web", .admin_user = admin_user,
				    .outcome = outcome, .reason = reason,
				    .address = r->ri->remote_addr, .user = user};

	return gh_admin_audit(r->app->store, &a, e);
}

/* --------------------------------------------------------------- login */

static pthread_once_t dummy_once = PTHREAD_ONCE_INIT;
static char dummy_hash[crypto_pwhash_STRBYTES];

/* A hash no password matches, checked for unknown users so that they take
 * as long to refuse as a wrong password does. */
static void make_dummy(void)
{
	char pw[TOKEN_B64_MAX];

	new_token(pw);
	if (crypto_pwhash_str(dummy_hash, pw, strlen(pw), crypto_pwhash_OPSLIMIT_INTERACTIVE,
			      crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0)
		dummy_hash[0] = '\0';
	sodium_memzero(pw, sizeof(pw));
}

static pthread_mutex_t pw_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pw_cv = PTHREAD_COND_INITIALIZER;
static int pw_active;

/* At most PWHASH_AT_ONCE Argon2id computations (64 MiB each) at a time. */
static void pw_enter(void)
{
	pthread_mutex_lock(&pw_mu);
	while (pw_active >= PWHASH_AT_ONCE)
		pthread_cond_wait(&pw_cv, &pw_mu);
	pw_active++;
	pthread_mutex_unlock(&pw_mu);
}

static void pw_leave(void)
{
	pthread_mutex_lock(&pw_mu);
	pw_active--;
	pthread_cond_signal(&pw_cv);
	pthread_mutex_unlock(&pw_mu);
}

/* 1 when password matches hash (NULL: the stand-in, never matches). */
static int password_ok(const char *hash, const char *password)
{
	int ok;

	pthread_once(&dummy_once, make_dummy);
	pw_enter();
	if (hash) {
		ok = crypto_pwhash_str_verify(hash, password, strlen(password)) == 0;
	} else {
		/* the same work as a real check; never a match */
		int ignored = dummy_hash[0] ? crypto_pwhash_str_verify(dummy_hash, password,
								       strlen(password)) : -1;

		(void)ignored;
		ok = 0;
	}
	pw_leave();
	return ok;
}

/* Failed-login limits. From one address (any user name):
 * login_attempts_per_minute, with that many at once; an IPv6 address
 * counts by its /64, which one machine commonly has whole. For one user
 * name (from every address): login_failures_per_user_per_hour, with that
 * many at once, refilling over the hour; it is at least the per-address
 * limit, so failures from one address lock that address out, never the
 * user everywhere, until failures come from several. */
struct login_limits {
	struct gh_rl_limit addr, user;
	char ka[GH_RL_KEY_MAX], ku[GH_RL_KEY_MAX];
};

static void login_limits(struct gh_req *r, const char *user, struct login_limits *l)
{
	const struct gh_admin_conf *ac = &r->app->cfg->admin;
	const char *addr = r->ri->remote_addr;
	unsigned char a6[16];
	char net[INET6_ADDRSTRLEN];

	l->addr.rate = ac->login_attempts_per_minute;
	l->addr.period_ms = 60000;
	l->addr.burst = ac->login_attempts_per_minute - 1;
	l->user.rate = ac->login_failures_per_user_per_hour;
	l->user.period_ms = 3600000;
	l->user.burst = ac->login_failures_per_user_per_hour - 1;
	if (strchr(addr, ':') && inet_pton(AF_INET6, addr, a6) == 1) {
		memset(a6 + 8, 0, 8);
		if (inet_ntop(AF_INET6, a6, net, sizeof(net)))
			addr = net;
	}
	snprintf(l->ka, sizeof(l->ka), "admin-login-addr:%s", addr);
	snprintf(l->ku, sizeof(l->ku), "admin-login-user:%s", user);
}

/* 0 when another attempt may be made now; else seconds to wait, and
 * *by_user says whether the per-user limit (not the address's) is why. */
static int login_blocked(struct gh_req *r, const struct login_limits *l, int *by_user)
{
	const char *keys[2] = {l->ka, l->ku};
	const struct gh_rl_limit *lims[2] = {&l->addr, &l->user};
	int64_t wait_ms = 0;
	int i;

	*by_user = 0;
	if (!r->app->rl)
		return 0;
	for (i = 0; i < 2; i++) {
		struct gh_rl_result res;

		if (gh_rl_peek(r->app->rl, keys[i], lims[i], 1, &res) != GH_OK)
			return 1; /* fail closed */
		if (!res.allowed) {
			int64_t w = res.retry_after_ms > 0 ? res.retry_after_ms : 1000;

			if (w > wait_ms)
				wait_ms = w;
			*by_user |= i == 1;
		}
	}
	return wait_ms ? (int)((wait_ms + 999) / 1000) : 0;
}

static void login_failed(struct gh_req *r, const struct login_limits *l)
{
	if (r->app->rl) {
		gh_rl_charge(r->app->rl, l->ka, &l->addr, 1);
		gh_rl_charge(r->app->rl, l->ku, &l->user, 1);
	}
}

/* A 429 for a blocked login (or password change); not audited: the
 * failures that led here were. */
static void refuse_blocked(struct gh_req *r, int wait_s, int by_user)
{
	struct gh_err e;

	gh_warn("%s admin login from %s refused: too many failures %s", r->id,
		r->ri->remote_addr, by_user ? "for this user" : "from this address");
	gh_err_set(&e, GH_E_RATELIMIT, "too many failed logins %s; retry after %d s",
		   by_user ? "for this user from several addresses" : "from this address", wait_s);
	e.retry_after = wait_s;
	gh_http_error(r, &e);
}

static void wipe_body(struct gh_req *r, cJSON *body)
{
	cJSON *pw = body ? cJSON_GetObjectItemCaseSensitive(body, "password") : NULL;

	if (cJSON_IsString(pw) && pw->valuestring)
		sodium_memzero(pw->valuestring, strlen(pw->valuestring));
	if (r->body)
		sodium_memzero(r->body, r->body_len);
	cJSON_Delete(body);
}

void gh_admin_login(struct gh_req *r)
{
	const struct gh_admin_conf *ac = &r->app->cfg->admin;
	struct login_limits lim;
	struct gh_admin_user u;
	struct gh_err e, ue;
	cJSON *body = NULL, *o;
	const char *user, *password, *why = NULL;
	char tok[TOKEN_B64_MAX], csrf[TOKEN_B64_MAX];
	char cookie[256], ts[GH_ISO8601_MAX];
	unsigned char h[32];
	int64_t now, expires;
	int wait_s, n, by_user;

	memset(&u, 0, sizeof(u));
	if (gh_http_body_object(r, &body, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	user = gh_json_str(body, "user");
	password = gh_json_str(body, "password");
	if (!user || !password || !*user || !*password) {
		gh_http_errorf(r, GH_E_BADREQ, "user and password: required strings");
		goto out;
	}
	if (strlen(user) > GH_NAME_MAX || strlen(password) > GH_ADMIN_PASSWORD_MAX) {
		gh_http_errorf(r, GH_E_BADREQ, "user: at most %d characters; password: at most %d",
			       GH_NAME_MAX, GH_ADMIN_PASSWORD_MAX);
		goto out;
	}
	if (!origin_ok(r)) {
		gh_http_errorf(r, GH_E_FORBIDDEN, "the Origin header does not match this server's "
			       "Host: cross-site logins are refused");
		goto out;
	}
	login_limits(r, user, &lim);
	if ((wait_s = login_blocked(r, &lim, &by_user)) > 0) {
		refuse_blocked(r, wait_s, by_user);
		goto out;
	}
	if (gh_store_admin_get(r->app->store, user, &u, &ue) != GH_OK) {
		if (ue.code != GH_E_NOTFOUND) {
			gh_http_error(r, &ue);
			goto out;
		}
		why = "unknown user";
		password_ok(NULL, password);
	} else if (u.disabled_at) {
		why = "account disabled";
		password_ok(NULL, password);
	} else if (!password_ok(u.password_hash, password)) {
		why = "wrong password";
	}
	if (why) {
		login_failed(r, &lim);
		if (audit_admin(r, "admin_login_failed", NULL, "denied", why, user, &e) != GH_OK)
			gh_warn("%s audit: cannot record a failed login: %s", r->id, e.msg);
		gh_http_errorf(r, GH_E_AUTH, "wrong user name or password");
		goto out;
	}
	now = gh_now_ms();
	expires = now + ac->session_max_s * 1000;
	new_token(tok);
	new_token(csrf);
	token_hash(tok, h);
	if (gh_store_session_create(r->app->store, h, u.name, csrf, expires, r->ri->remote_addr,
				    &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	if (audit_admin(r, "admin_login", u.name, "ok", NULL, u.name, &e) != GH_OK) {
		/* a login the audit log does not show must not stand */
		gh_store_session_delete(r->app->store, h, &ue);
		gh_http_errorf(r, GH_E_UNAVAILABLE, "audit log unavailable (%s); not logged in",
			       e.msg);
		goto out;
	}
	n = snprintf(cookie, sizeof(cookie),
		     "Set-Cookie: " GH_ADMIN_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; "
		     "Max-Age=%lld%s\r\n", tok, (long long)ac->session_max_s,
		     r->ri->is_ssl || (r->app->cfg->server.public_url &&
					!strncmp(r->app->cfg->server.public_url, "https://", 8))
			     ? "; Secure" : "");
	if (n <= 0 || n >= (int)sizeof(cookie)) {
		gh_http_errorf(r, GH_E_INTERNAL, "session cookie too long");
		goto out;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "user", u.name);
	cJSON_AddStringToObject(o, "csrfToken", csrf);
	gh_iso8601(expires, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "expiresAt", ts);
	cJSON_AddNumberToObject(o, "idleTimeoutSeconds", (double)ac->session_idle_s);
	r->extra_headers = cookie;
	gh_http_json(r, 200, o);
	r->extra_headers = NULL;
	cJSON_Delete(o);
	gh_info("%s admin %s logged in from %s", r->id, u.name, r->ri->remote_addr);
out:
	sodium_memzero(tok, sizeof(tok));
	sodium_memzero(csrf, sizeof(csrf));
	sodium_memzero(cookie, sizeof(cookie));
	sodium_memzero(&u, sizeof(u));
	wipe_body(r, body);
}

void gh_admin_password(struct gh_req *r)
{
	struct login_limits lim;
	struct gh_admin_user u;
	struct gh_admin_action a;
	struct gh_audit_event ev;
	struct gh_buf detail;
	struct gh_err e;
	cJSON *body = NULL, *pwn, *o;
	const char *current, *fresh;
	char tok[TOKEN_B64_MAX], hash[crypto_pwhash_STRBYTES];
	unsigned char h[32];
	int wait_s, by_user, ended = 0, hashed;

	memset(&u, 0, sizeof(u));
	memset(hash, 0, sizeof(hash));
	gh_buf_init(&detail, GH_ADMIN_DETAIL_MAX);
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
	current = gh_json_str(body, "current");
	fresh = gh_json_str(body, "new");
	if (!current || !fresh || !*current) {
		gh_http_errorf(r, GH_E_BADREQ, "current and new: required strings");
		goto out;
	}
	if (strlen(fresh) < GH_ADMIN_PASSWORD_MIN || strlen(fresh) > GH_ADMIN_PASSWORD_MAX ||
	    strlen(current) > GH_ADMIN_PASSWORD_MAX) {
		gh_http_errorf(r, GH_E_BADREQ, "new: a password needs %d to %d characters",
			       GH_ADMIN_PASSWORD_MIN, GH_ADMIN_PASSWORD_MAX);
		goto out;
	}
	if (cookie_token(r, tok) != 0) {
		gh_http_errorf(r, GH_E_AUTH, "admin session ended: log in again");
		goto out;
	}
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	/* the current password is asked for so that a session left open is
	 * not enough; guessing it is limited like a login */
	login_limits(r, r->who.admin_user, &lim);
	if ((wait_s = login_blocked(r, &lim, &by_user)) > 0) {
		refuse_blocked(r, wait_s, by_user);
		goto out;
	}
	if (gh_store_admin_get(r->app->store, r->who.admin_user, &u, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	memset(&a, 0, sizeof(a));
	a.event = "admin_password_changed";
	a.via = "web";
	a.admin_user = u.name;
	a.address = r->ri->remote_addr;
	a.user = u.name;
	if (!password_ok(u.password_hash, current)) {
		login_failed(r, &lim);
		a.outcome = "denied";
		a.reason = "wrong current password";
		if (gh_admin_audit(r->app->store, &a, &e) != GH_OK)
			gh_warn("%s audit: cannot record a refused password change: %s", r->id,
				e.msg);
		gh_http_errorf(r, GH_E_FORBIDDEN, "the current password is wrong");
		goto out;
	}
	pw_enter();
	hashed = crypto_pwhash_str(hash, fresh, strlen(fresh), crypto_pwhash_OPSLIMIT_INTERACTIVE,
				   crypto_pwhash_MEMLIMIT_INTERACTIVE) == 0;
	pw_leave();
	if (!hashed) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory hashing the password");
		goto out;
	}
	if (gh_admin_audit_event(&a, &ev, &detail, &e) != GH_OK ||
	    gh_store_admin_set_password(r->app->store, u.name, hash, h, &ev, &ended, &e) !=
		    GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	gh_info("%s admin %s changed their password from %s; %d other session%s ended", r->id,
		u.name, r->ri->remote_addr, ended, ended == 1 ? "" : "s");
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddStringToObject(o, "user", u.name);
	cJSON_AddNumberToObject(o, "sessionsEnded", ended);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
out:
	pwn = body ? cJSON_GetObjectItemCaseSensitive(body, "new") : NULL;
	if (cJSON_IsString(pwn) && pwn->valuestring)
		sodium_memzero(pwn->valuestring, strlen(pwn->valuestring));
	pwn = body ? cJSON_GetObjectItemCaseSensitive(body, "current") : NULL;
	if (cJSON_IsString(pwn) && pwn->valuestring)
		sodium_memzero(pwn->valuestring, strlen(pwn->valuestring));
	sodium_memzero(hash, sizeof(hash));
	sodium_memzero(&u, sizeof(u));
	gh_buf_free(&detail);
	wipe_body(r, body);
}

void gh_admin_logout(struct gh_req *r)
{
	static const char clear[] = "Set-Cookie: " GH_ADMIN_COOKIE "=; Path=/; HttpOnly; "
				    "SameSite=Strict; Max-Age=0\r\n";
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];
	struct gh_err e;
	cJSON *o;

	if (r->session && cookie_token(r, tok) == 0) {
		token_hash(tok, h);
		sodium_memzero(tok, sizeof(tok));
		if (gh_store_session_delete(r->app->store, h, &e) != GH_OK) {
			gh_http_error(r, &e);
			return;
		}
		if (audit_admin(r, "admin_logout", r->who.admin_user, "ok", NULL,
				r->who.admin_user, &e) != GH_OK)
			gh_warn("%s audit: cannot record a logout: %s", r->id, e.msg);
	}
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", 1);
	r->extra_headers = clear;
	gh_http_json(r, 200, o);
	r->extra_headers = NULL;
	cJSON_Delete(o);
}

void gh_admin_me(struct gh_req *r)
{
	const struct gh_admin_conf *ac = &r->app->cfg->admin;
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (r->session) {
		struct gh_admin_session s;
		char tok[TOKEN_B64_MAX];
		unsigned char h[32];
		struct gh_err e;

		if (cookie_token(r, tok) != 0) {
			cJSON_Delete(o);
			gh_http_errorf(r, GH_E_AUTH, "admin session ended: log in again");
			return;
		}
		token_hash(tok, h);
		sodium_memzero(tok, sizeof(tok));
		if (gh_store_session_peek(r->app->store, h, &s, &e) != GH_OK) {
			cJSON_Delete(o);
			if (e.code == GH_E_NOTFOUND)
				gh_err_set(&e, GH_E_AUTH, "admin session ended: log in again");
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
