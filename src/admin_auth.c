/*
 * admin_auth.c - admin UI login, sessions and CSRF; see admin_auth.h.
 *
 * Threading: called on CivetWeb workers. Password checks are
 * expensive on purpose (Argon2id, 64 MiB each), so at most PWHASH_AT_ONCE
 * run at a time; the rest wait their turn. The stand-in hash used for
 * unknown users is made once (pthread_once).
 */
#include "admin_auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <civetweb.h>
#include <sodium.h>

#include "admin_audit.h"
#include "log.h"
#include "ratelimit.h"
#include "store_ui.h"
#include "util.h"

#define PWHASH_AT_ONCE 2
#define PASSWORD_MAX 1024
#define TOKEN_BYTES 32
#define TOKEN_B64_MAX GH_ADMIN_TOKEN_MAX

/* ---------------------------------------------------------- small parts */

int gh_admin_ui_path(const char *path)
{
	return path && !strncmp(path, "/admin", 6) && (path[6] == '\0' || path[6] == '/');
}

/* The session cookie's value into tok; 0 when present and well formed. */
static int cookie_token(const char *ch, char tok[TOKEN_B64_MAX])
{
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

static void fill_principal(struct gh_principal *who, const char *user)
{
	memset(who, 0, sizeof(*who));
	who->admin = 1;
	gh_strlcpy(who->admin_user, user, sizeof(who->admin_user));
	snprintf(who->actor, sizeof(who->actor), "admin:%s", user);
}

int gh_admin_origin_ok(const char *origin, const char *host)
{
	const char *p;

	if (!origin)
		return 1;
	if (!host || !(p = strstr(origin, "://")))
		return 0;
	p += 3;
	return strcasecmp(p, host) == 0;
}

/* ------------------------------------------------------------- sessions */

enum gh_code gh_admin_session_auth(struct gh_app *app, const char *cookie_header,
				   struct gh_principal *who, char csrf[GH_ADMIN_CSRF_MAX],
				   struct gh_err *e)
{
	const struct gh_admin_conf *ac = &app->cfg->admin;
	struct gh_admin_session s;
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];
	struct gh_err se;

	csrf[0] = '\0';
	if (cookie_token(cookie_header, tok) != 0)
		return gh_err_set(e, GH_E_AUTH, "missing API key: send Authorization: Bearer <key> "
				  "(or log in to the admin UI)");
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	if (gh_store_session_get(app->store, h, ac->session_idle_s * 1000, &s, &se) != GH_OK) {
		if (se.code != GH_E_NOTFOUND)
			return gh_err_set(e, se.code, "%s", se.msg);
		return gh_err_set(e, GH_E_AUTH, "admin session expired or ended: log in again");
	}
	fill_principal(who, s.user);
	gh_strlcpy(csrf, s.csrf, GH_ADMIN_CSRF_MAX);
	sodium_memzero(&s, sizeof(s));
	return GH_OK;
}

enum gh_code gh_admin_csrf_check(const char *m, const char *sent, const char *origin,
				 const char *host, const char *csrf, struct gh_err *e)
{
	size_t n;

	if (!strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS"))
		return GH_OK;
	n = strlen(csrf);
	if (!sent || n == 0 || strlen(sent) != n ||
	    sodium_memcmp(sent, csrf, n) != 0)
		return gh_err_set(e, GH_E_FORBIDDEN, "missing or wrong " GH_ADMIN_CSRF_HEADER
				  " header: a request changing state with an admin session must "
				  "send the session's CSRF token (from login or "
				  "GET /api/admin/me)");
	if (!gh_admin_origin_ok(origin, host))
		return gh_err_set(e, GH_E_FORBIDDEN, "the Origin header does not match this "
				  "server's Host: cross-site requests are refused");
	return GH_OK;
}

int gh_admin_session_alive(struct gh_app *app, const char *cookie_header)
{
	const struct gh_admin_conf *ac = &app->cfg->admin;
	struct gh_admin_session s;
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];
	struct gh_err e;
	int64_t now = gh_now_ms();
	int alive;

	if (cookie_token(cookie_header, tok) != 0)
		return 0;
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	if (gh_store_session_peek(app->store, h, &s, &e) != GH_OK)
		return e.code != GH_E_NOTFOUND; /* a read error is not a logout */
	alive = s.expires_at > now && now - s.last_seen_at <= ac->session_idle_s * 1000;
	sodium_memzero(&s, sizeof(s));
	return alive;
}

/* --------------------------------------------------------------- audit */

/* An admin_* audit row: who (admin_user, may be NULL), the outcome, and a
 * detail naming the address and the user name that was tried. */
static enum gh_code audit_admin(struct gh_app *app, const char *address, const char *event,
				const char *admin_user, const char *outcome, const char *reason,
				const char *user, struct gh_err *e)
{
	struct gh_admin_action a = {.event = event, .via = "web", .admin_user = admin_user,
				    .outcome = outcome, .reason = reason,
				    .address = address, .user = user};

	return gh_admin_audit(app->store, &a, e);
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

/* 1 when password matches hash (NULL: the stand-in, never matches). */
static int password_ok(const char *hash, const char *password)
{
	int ok;

	pthread_once(&dummy_once, make_dummy);
	pthread_mutex_lock(&pw_mu);
	while (pw_active >= PWHASH_AT_ONCE)
		pthread_cond_wait(&pw_cv, &pw_mu);
	pw_active++;
	pthread_mutex_unlock(&pw_mu);
	if (hash) {
		ok = crypto_pwhash_str_verify(hash, password, strlen(password)) == 0;
	} else {
		/* the same work as a real check; never a match */
		int ignored = dummy_hash[0] ? crypto_pwhash_str_verify(dummy_hash, password,
								       strlen(password)) : -1;

		(void)ignored;
		ok = 0;
	}
	pthread_mutex_lock(&pw_mu);
	pw_active--;
	pthread_cond_signal(&pw_cv);
	pthread_mutex_unlock(&pw_mu);
	return ok;
}

/* Failed-login limits: "admin-login-user:<name>" and
 * "admin-login-addr:<address>". */
static void limit_keys(const char *address, const char *user, char ku[GH_RL_KEY_MAX],
		       char ka[GH_RL_KEY_MAX])
{
	snprintf(ku, GH_RL_KEY_MAX, "admin-login-user:%s", user);
	snprintf(ka, GH_RL_KEY_MAX, "admin-login-addr:%s", address);
}

/* 0 when another attempt may be made now; else seconds to wait. */
static int login_blocked(struct gh_app *app, const struct gh_rl_limit *lim, const char *ku,
			 const char *ka)
{
	const char *keys[2] = {ka, ku};
	int64_t wait_ms = 0;
	int i;

	if (!app->rl)
		return 0;
	for (i = 0; i < 2; i++) {
		struct gh_rl_result res;

		if (gh_rl_peek(app->rl, keys[i], lim, 1, &res) != GH_OK)
			return 1; /* fail closed */
		if (!res.allowed) {
			int64_t w = res.retry_after_ms > 0 ? res.retry_after_ms : 1000;

			if (w > wait_ms)
				wait_ms = w;
		}
	}
	return wait_ms ? (int)((wait_ms + 999) / 1000) : 0;
}

/* The admin named user, when password is theirs: why not in *why. */
static void check_user(struct gh_app *app, const char *user, const char *password,
		       struct gh_admin_user *u, const char **why, struct gh_err *e)
{
	struct gh_err ue;

	*why = NULL;
	if (gh_store_admin_get(app->store, user, u, &ue) != GH_OK) {
		if (ue.code != GH_E_NOTFOUND) {
			*e = ue;
			*why = "";
			return;
		}
		*why = "unknown user";
		password_ok(NULL, password);
	} else if (u->disabled_at) {
		*why = "account disabled";
		password_ok(NULL, password);
	} else if (!password_ok(u->password_hash, password)) {
		*why = "wrong password";
	}
}

/* A failed attempt: it counts against the limits and is audited. */
static enum gh_code login_failed(struct gh_app *app, const char *address, const char *user,
				 const char *why, const struct gh_rl_limit *lim, const char *ku,
				 const char *ka, struct gh_err *e)
{
	struct gh_err ae;

	if (app->rl) {
		gh_rl_charge(app->rl, ka, lim, 1);
		gh_rl_charge(app->rl, ku, lim, 1);
	}
	if (audit_admin(app, address, "admin_login_failed", NULL, "denied", why, user, &ae) !=
	    GH_OK)
		gh_warn("audit: cannot record a failed login: %s", ae.msg);
	return gh_err_set(e, GH_E_AUTH, "wrong user name or password");
}

enum gh_code gh_admin_login(struct gh_app *app, const char *user, const char *password,
			    const char *address, const char *origin, const char *host,
			    struct gh_admin_login *out, struct gh_err *e)
{
	const struct gh_admin_conf *ac = &app->cfg->admin;
	struct gh_rl_limit lim = {ac->login_attempts_per_minute, 60000,
				  ac->login_attempts_per_minute - 1};
	struct gh_admin_user u;
	struct gh_err ue;
	const char *why = NULL;
	char ku[GH_RL_KEY_MAX], ka[GH_RL_KEY_MAX];
	unsigned char h[32];
	enum gh_code rc;
	int wait_s;

	memset(out, 0, sizeof(*out));
	memset(&u, 0, sizeof(u));
	if (!user || !password || !*user || !*password)
		return gh_err_set(e, GH_E_BADREQ, "user and password: required strings");
	if (strlen(user) > GH_NAME_MAX || strlen(password) > PASSWORD_MAX)
		return gh_err_set(e, GH_E_BADREQ, "user: at most %d characters; password: at most "
				  "%d", GH_NAME_MAX, PASSWORD_MAX);
	if (!gh_admin_origin_ok(origin, host))
		return gh_err_set(e, GH_E_FORBIDDEN, "the Origin header does not match this "
				  "server's Host: cross-site logins are refused");
	limit_keys(address, user, ku, ka);
	if ((wait_s = login_blocked(app, &lim, ku, ka)) > 0) {
		/* not audited: the failures that led here were */
		gh_warn("admin login from %s refused: too many failures", address);
		gh_err_set(e, GH_E_RATELIMIT, "too many failed logins for this user or from this "
			   "address; retry after %d s", wait_s);
		e->retry_after = wait_s;
		return GH_E_RATELIMIT;
	}
	check_user(app, user, password, &u, &why, e);
	if (why && !*why) {
		rc = e->code;
		goto out;
	}
	if (why) {
		rc = login_failed(app, address, user, why, &lim, ku, ka, e);
		goto out;
	}
	out->expires_at = gh_now_ms() + ac->session_max_s * 1000;
	new_token(out->token);
	new_token(out->csrf);
	token_hash(out->token, h);
	gh_strlcpy(out->user, u.name, sizeof(out->user));
	if ((rc = gh_store_session_create(app->store, h, u.name, out->csrf, out->expires_at,
					  address, e)) != GH_OK)
		goto out;
	if (audit_admin(app, address, "admin_login", u.name, "ok", NULL, u.name, e) != GH_OK) {
		/* a login the audit log does not show must not stand */
		gh_store_session_delete(app->store, h, &ue);
		rc = gh_err_set(e, GH_E_UNAVAILABLE, "audit log unavailable (%s); not logged in",
				e->msg);
		goto out;
	}
	gh_info("admin %s logged in from %s", u.name, address);
out:
	if (rc != GH_OK)
		sodium_memzero(out, sizeof(*out));
	sodium_memzero(&u, sizeof(u));
	return rc;
}

enum gh_code gh_admin_logout(struct gh_app *app, const char *cookie_header,
			     const char *admin_user, const char *address, struct gh_err *e)
{
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];
	struct gh_err ae;
	enum gh_code rc;

	if (cookie_token(cookie_header, tok) != 0)
		return GH_OK;
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	if ((rc = gh_store_session_delete(app->store, h, e)) != GH_OK)
		return rc;
	if (audit_admin(app, address, "admin_logout", admin_user, "ok", NULL, admin_user, &ae) !=
	    GH_OK)
		gh_warn("audit: cannot record a logout: %s", ae.msg);
	return GH_OK;
}

enum gh_code gh_admin_session_me(struct gh_app *app, const char *cookie_header,
				 struct gh_admin_me *out, struct gh_err *e)
{
	struct gh_admin_session s;
	char tok[TOKEN_B64_MAX];
	unsigned char h[32];

	memset(out, 0, sizeof(*out));
	if (cookie_token(cookie_header, tok) != 0)
		return gh_err_set(e, GH_E_AUTH, "admin session ended: log in again");
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	if (gh_store_session_peek(app->store, h, &s, e) != GH_OK) {
		if (e->code == GH_E_NOTFOUND)
			gh_err_set(e, GH_E_AUTH, "admin session ended: log in again");
		return e->code;
	}
	gh_strlcpy(out->user, s.user, sizeof(out->user));
	gh_strlcpy(out->csrf, s.csrf, sizeof(out->csrf));
	out->expires_at = s.expires_at;
	sodium_memzero(&s, sizeof(s));
	return GH_OK;
}
