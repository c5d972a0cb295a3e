/*
 * admin_auth.c - admin UI login, sessions and CSRF; see admin_auth.h.
 *
 * Threading: called on CivetWeb workers. Password checks are
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
#include "log.h"
#include "ratelimit.h"
#include "store_ui.h"
#include "util.h"

#define PWHASH_AT_ONCE 2
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
	const struct gh_admin_conf *ac = &gh_app_cfg(app)->admin;
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
	const struct gh_admin_conf *ac = &gh_app_cfg(app)->admin;
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

static void login_limits(struct gh_app *app, const char *address, const char *user,
			 struct login_limits *l)
{
	const struct gh_admin_conf *ac = &gh_app_cfg(app)->admin;
	const char *addr = address ? address : "";
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

/* GH_OK when another attempt may be made now; else a GH_E_RATELIMIT saying
 * which limit (not audited: the failures that led here were). */
static enum gh_code login_blocked(struct gh_app *app, const char *address,
				  const struct login_limits *l, struct gh_err *e)
{
	const char *keys[2] = {l->ka, l->ku};
	const struct gh_rl_limit *lims[2] = {&l->addr, &l->user};
	int64_t wait_ms = 0;
	int i, by_user = 0, wait_s;

	if (!app->rl)
		return GH_OK;
	for (i = 0; i < 2; i++) {
		struct gh_rl_result res;

		if (gh_rl_peek(app->rl, keys[i], lims[i], 1, &res) != GH_OK) {
			wait_ms = 1000; /* fail closed */
			continue;
		}
		if (!res.allowed) {
			int64_t w = res.retry_after_ms > 0 ? res.retry_after_ms : 1000;

			if (w > wait_ms)
				wait_ms = w;
			by_user |= i == 1;
		}
	}
	if (!wait_ms)
		return GH_OK;
	wait_s = (int)((wait_ms + 999) / 1000);
	gh_warn("admin login from %s refused: too many failures %s", address ? address : "?",
		by_user ? "for this user" : "from this address");
	gh_err_set(e, GH_E_RATELIMIT, "too many failed logins %s; retry after %d s",
		   by_user ? "for this user from several addresses" : "from this address", wait_s);
	e->retry_after = wait_s;
	return GH_E_RATELIMIT;
}

static void charge_failure(struct gh_app *app, const struct login_limits *l)
{
	if (app->rl) {
		gh_rl_charge(app->rl, l->ka, &l->addr, 1);
		gh_rl_charge(app->rl, l->ku, &l->user, 1);
	}
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
				 const char *why, const struct login_limits *l, struct gh_err *e)
{
	struct gh_err ae;

	charge_failure(app, l);
	if (audit_admin(app, address, "admin_login_failed", NULL, "denied", why, user, &ae) !=
	    GH_OK)
		gh_warn("audit: cannot record a failed login: %s", ae.msg);
	return gh_err_set(e, GH_E_AUTH, "wrong user name or password");
}

enum gh_code gh_admin_login(struct gh_app *app, const char *user, const char *password,
			    const char *address, const char *origin, const char *host,
			    struct gh_admin_login *out, struct gh_err *e)
{
	const struct gh_admin_conf *ac = &gh_app_cfg(app)->admin;
	struct login_limits lim;
	struct gh_admin_user u;
	struct gh_err ue;
	const char *why = NULL;
	unsigned char h[32];
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	memset(&u, 0, sizeof(u));
	if (!user || !password || !*user || !*password)
		return gh_err_set(e, GH_E_BADREQ, "user and password: required strings");
	if (strlen(user) > GH_NAME_MAX || strlen(password) > GH_ADMIN_PASSWORD_MAX)
		return gh_err_set(e, GH_E_BADREQ, "user: at most %d characters; password: at most "
				  "%d", GH_NAME_MAX, GH_ADMIN_PASSWORD_MAX);
	if (!gh_admin_origin_ok(origin, host))
		return gh_err_set(e, GH_E_FORBIDDEN, "the Origin header does not match this "
				  "server's Host: cross-site logins are refused");
	login_limits(app, address, user, &lim);
	if ((rc = login_blocked(app, address, &lim, e)) != GH_OK)
		return rc;
	check_user(app, user, password, &u, &why, e);
	if (why && !*why) {
		rc = e->code;
		goto out;
	}
	if (why) {
		rc = login_failed(app, address, user, why, &lim, e);
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

/* The new password's Argon2id hash into hash; -1 when it cannot be made. */
static int hash_password(const char *fresh, char hash[crypto_pwhash_STRBYTES])
{
	int ok;

	pw_enter();
	ok = crypto_pwhash_str(hash, fresh, strlen(fresh), crypto_pwhash_OPSLIMIT_INTERACTIVE,
			       crypto_pwhash_MEMLIMIT_INTERACTIVE) == 0;
	pw_leave();
	return ok ? 0 : -1;
}

enum gh_code gh_admin_password(struct gh_app *app, const char *cookie_header,
			       const char *admin_user, const char *current, const char *fresh,
			       const char *address, int *ended, struct gh_err *e)
{
	struct login_limits lim;
	struct gh_admin_user u;
	struct gh_admin_action a;
	struct gh_audit_event ev;
	struct gh_buf detail;
	char tok[TOKEN_B64_MAX], hash[crypto_pwhash_STRBYTES];
	unsigned char h[32];
	enum gh_code rc;

	*ended = 0;
	memset(&u, 0, sizeof(u));
	memset(hash, 0, sizeof(hash));
	gh_buf_init(&detail, GH_ADMIN_DETAIL_MAX);
	if (!current || !fresh || !*current) {
		rc = gh_err_set(e, GH_E_BADREQ, "current and new: required strings");
		goto out;
	}
	if (strlen(fresh) < GH_ADMIN_PASSWORD_MIN || strlen(fresh) > GH_ADMIN_PASSWORD_MAX ||
	    strlen(current) > GH_ADMIN_PASSWORD_MAX) {
		rc = gh_err_set(e, GH_E_BADREQ, "new: a password needs %d to %d characters",
				GH_ADMIN_PASSWORD_MIN, GH_ADMIN_PASSWORD_MAX);
		goto out;
	}
	if (cookie_token(cookie_header, tok) != 0) {
		rc = gh_err_set(e, GH_E_AUTH, "admin session ended: log in again");
		goto out;
	}
	token_hash(tok, h);
	sodium_memzero(tok, sizeof(tok));
	/* the current password is asked for so that a session left open is
	 * not enough; guessing it is limited like a login */
	login_limits(app, address, admin_user, &lim);
	if ((rc = login_blocked(app, address, &lim, e)) != GH_OK ||
	    (rc = gh_store_admin_get(app->store, admin_user, &u, e)) != GH_OK)
		goto out;
	memset(&a, 0, sizeof(a));
	a.event = "admin_password_changed";
	a.via = "web";
	a.admin_user = u.name;
	a.address = address;
	a.user = u.name;
	if (!password_ok(u.password_hash, current)) {
		struct gh_err ae;

		charge_failure(app, &lim);
		a.outcome = "denied";
		a.reason = "wrong current password";
		if (gh_admin_audit(app->store, &a, &ae) != GH_OK)
			gh_warn("audit: cannot record a refused password change: %s", ae.msg);
		rc = gh_err_set(e, GH_E_FORBIDDEN, "the current password is wrong");
		goto out;
	}
	if (hash_password(fresh, hash) != 0) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory hashing the password");
		goto out;
	}
	if ((rc = gh_admin_audit_event(&a, &ev, &detail, e)) != GH_OK ||
	    (rc = gh_store_admin_set_password(app->store, u.name, hash, h, &ev, ended, e)) !=
		    GH_OK)
		goto out;
	gh_info("admin %s changed their password from %s; %d other session%s ended", u.name,
		address ? address : "?", *ended, *ended == 1 ? "" : "s");
out:
	sodium_memzero(hash, sizeof(hash));
	sodium_memzero(&u, sizeof(u));
	gh_buf_free(&detail);
	return rc;
}
