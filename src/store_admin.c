/*
 * store_admin.c - admin accounts and sessions. Threading as in store.c.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct admin_arg {
	const char *name, *pwhash, *csrf, *remote;
	const unsigned char *token_hash;
	const struct gh_audit_event *ev;  /* appended in the same transaction, or NULL */
	int64_t now, expires;
	int ended;                        /* sessions ended */
};

/* The audit row of an account change, in the change's own transaction:
 * a change the log cannot show does not happen. */
static enum gh_code audit_in(struct gh_store *s, struct store_conn *w, const struct admin_arg *a,
			     struct gh_err *e)
{
	return a->ev ? store_audit_append_in(s, w, a->ev, NULL, e) : GH_OK;
}

/* Ends the sessions of a->name, all of them or all but a->token_hash. */
static enum gh_code end_sessions(struct store_conn *w, struct admin_arg *a, struct gh_err *e)
{
	if (a->token_hash)
		return store_exec(w, "DELETE FROM admin_sessions WHERE \"user\" = ? AND "
				     "token_hash IS DISTINCT FROM ?",
				  STORE_ARGS(STORE_TEXT(a->name), STORE_BLOB(a->token_hash, 32)),
				  "ending sessions", &a->ended, e);
	return store_exec(w, "DELETE FROM admin_sessions WHERE \"user\" = ?",
			  STORE_ARGS(STORE_TEXT(a->name)), "ending sessions", &a->ended, e);
}

/* After an UPDATE of a->name that changed nothing: GH_E_NOTFOUND when
 * there is no such admin, else GH_E_CONFLICT with msg. */
static int row_seen(struct store_row *sr, void *ud)
{
	(void)sr;
	(void)ud;
	return 0;
}

static enum gh_code unchanged(struct store_conn *w, const struct admin_arg *a, const char *msg,
			      struct gh_err *e)
{
	int seen = 0;
	enum gh_code rc = store_rows(w, "SELECT 1 FROM admin_users WHERE name = ?",
				     STORE_ARGS(STORE_TEXT(a->name)), 1, row_seen, NULL, &seen,
				     "reading an admin", e);

	if (rc != GH_OK)
		return rc;
	if (seen == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no admin \"%s\" (gatehouse admin list shows "
				  "them)", a->name);
	return gh_err_set(e, GH_E_CONFLICT, "admin \"%s\" %s", a->name, msg);
}

/* What follows an UPDATE of a->name that ran with rc and changed `changed`
 * rows: unchanged() with msg when it changed nothing, else the admin's
 * sessions ended (when end_all) and the audit row. */
static enum gh_code changed_then(struct gh_store *s, struct store_conn *w, struct admin_arg *a,
				 enum gh_code rc, int changed, const char *msg, int end_all,
				 struct gh_err *e)
{
	if (rc != GH_OK)
		return rc;
	if (changed == 0)
		return unchanged(w, a, msg, e);
	if (end_all && (rc = end_sessions(w, a, e)) != GH_OK)
		return rc;
	return audit_in(s, w, a, e);
}

/* Runs the job fn on a; *ended (may be NULL) gets how many sessions it
 * ended (0 when it failed). */
static enum gh_code write_ending(struct gh_store *s, store_write_fn fn, struct admin_arg *a,
				 int *ended, struct gh_err *e)
{
	enum gh_code rc = store_write(s, fn, a, e);

	if (ended)
		*ended = rc == GH_OK ? a->ended : 0;
	return rc;
}

static enum gh_code create_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct admin_arg *a = arg;
	enum gh_code rc = store_exec(w, "INSERT INTO admin_users (name, password_hash, created_at) "
					"VALUES (?, ?, ?)",
				     STORE_ARGS(STORE_TEXT(a->name), STORE_TEXT(a->pwhash),
						STORE_INT(a->now)),
				     "creating an admin", NULL, e);

	if (rc == GH_E_CONFLICT)
		return gh_err_set(e, GH_E_CONFLICT, "admin \"%s\" already exists", a->name);
	if (rc != GH_OK)
		return rc;
	return audit_in(s, w, a, e);
}

enum gh_code gh_store_admin_create(struct gh_store *s, const char *name, const char *pwhash,
				   const struct gh_audit_event *ev, struct gh_err *e)
{
	struct admin_arg a = {.name = name, .pwhash = pwhash, .ev = ev, .now = gh_now_ms()};

	return store_write(s, create_job, &a, e);
}

#define U(KIND, FIELD) STORE_COL(KIND, struct gh_admin_user, FIELD)
static const struct store_col user_cols[] = { /* USER_COLS, in order */
	U(TEXT, name), U(TEXT, password_hash), U(INT, created_at), U(INT, disabled_at),
	U(INT, last_login_at),
};
#undef U

static int user_from(struct store_row *sr, void *ud)
{
	struct gh_admin_user *u = ud;

	memset(u, 0, sizeof(*u));
	store_cols_read(sr, user_cols, GH_ARRAY_LEN(user_cols), u);
	return 0;
}

#define USER_COLS "name, password_hash, created_at, coalesce(disabled_at, 0), " \
		  "coalesce(last_login_at, 0)"

enum gh_code gh_store_admin_get(struct gh_store *s, const char *name, struct gh_admin_user *out,
				struct gh_err *e)
{
	return store_get(s, "SELECT " USER_COLS " FROM admin_users WHERE name = ?",
			 STORE_ARGS(STORE_TEXT(name)), user_from, out, sizeof(*out),
			 "reading an admin", e, "no admin \"%s\"", name);
}

STORE_EACH(user, struct gh_admin_user, user_from, STORE_NO_CLEAR, 0)

enum gh_code gh_store_admin_list(struct gh_store *s,
				 int (*fn)(void *ud, const struct gh_admin_user *u), void *ud,
				 struct gh_err *e)
{
	struct user_each x = {fn, ud};

	/* the password hashes stay in the database */
	return store_read(s, "SELECT name, '', created_at, coalesce(disabled_at, 0), "
			     "coalesce(last_login_at, 0) FROM admin_users ORDER BY name",
			  NULL, 0, 0, user_each_row, &x, NULL, "listing admins", e);
}

static enum gh_code disable_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	struct admin_arg *a = arg;
	int changed = 0;
	enum gh_code rc = store_exec(w, "UPDATE admin_users SET disabled_at = ? WHERE name = ? "
					"AND disabled_at IS NULL",
				     STORE_ARGS(STORE_INT(a->now), STORE_TEXT(a->name)),
				     "disabling an admin", &changed, e);

	return changed_then(s, w, a, rc, changed, "is disabled already", 1, e);
}

enum gh_code gh_store_admin_disable(struct gh_store *s, const char *name,
				    const struct gh_audit_event *ev, int *ended, struct gh_err *e)
{
	struct admin_arg a = {.name = name, .ev = ev, .now = gh_now_ms()};

	return write_ending(s, disable_job, &a, ended, e);
}

static enum gh_code enable_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct admin_arg *a = arg;
	int changed = 0;
	enum gh_code rc = store_exec(w, "UPDATE admin_users SET disabled_at = NULL WHERE "
					"name = ? AND disabled_at IS NOT NULL",
				     STORE_ARGS(STORE_TEXT(a->name)), "enabling an admin", &changed,
				     e);

	return changed_then(s, w, a, rc, changed, "is not disabled", 0, e);
}

enum gh_code gh_store_admin_enable(struct gh_store *s, const char *name,
				   const struct gh_audit_event *ev, struct gh_err *e)
{
	struct admin_arg a = {.name = name, .ev = ev, .now = gh_now_ms()};

	return store_write(s, enable_job, &a, e);
}

static enum gh_code password_job(struct gh_store *s, struct store_conn *w, void *arg,
				 struct gh_err *e)
{
	struct admin_arg *a = arg;
	int changed = 0;
	enum gh_code rc = store_exec(w, "UPDATE admin_users SET password_hash = ? WHERE name = ?",
				     STORE_ARGS(STORE_TEXT(a->pwhash), STORE_TEXT(a->name)),
				     "changing a password", &changed, e);

	return changed_then(s, w, a, rc, changed, "was not changed", 1, e);
}

enum gh_code gh_store_admin_set_password(struct gh_store *s, const char *name,
					 const char *pwhash, const unsigned char *keep_session,
					 const struct gh_audit_event *ev, int *ended,
					 struct gh_err *e)
{
	struct admin_arg a = {.name = name, .pwhash = pwhash, .token_hash = keep_session,
			      .ev = ev, .now = gh_now_ms()};

	return write_ending(s, password_job, &a, ended, e);
}

static enum gh_code session_create_job(struct gh_store *s, struct store_conn *w, void *arg,
				       struct gh_err *e)
{
	struct admin_arg *a = arg;
	enum gh_code rc;

	(void)s;
	rc = store_exec(w, "INSERT INTO admin_sessions (token_hash, \"user\", csrf, created_at, "
			   "last_seen_at, expires_at, remote_addr) VALUES (?, ?, ?, ?, ?, ?, ?)",
			STORE_ARGS(STORE_BLOB(a->token_hash, 32), STORE_TEXT(a->name),
				   STORE_TEXT(a->csrf), STORE_INT(a->now), STORE_INT(a->now),
				   STORE_INT(a->expires), STORE_TEXT(a->remote)),
			"creating a session", NULL, e);
	if (rc == GH_OK)
		rc = store_exec(w, "UPDATE admin_users SET last_login_at = ? WHERE name = ?",
				STORE_ARGS(STORE_INT(a->now), STORE_TEXT(a->name)),
				"recording a login", NULL, e);
	/* expired sessions go as new ones come */
	if (rc == GH_OK)
		rc = store_exec(w, "DELETE FROM admin_sessions WHERE expires_at < ?",
				STORE_ARGS(STORE_INT(a->now)), "pruning sessions", NULL, e);
	return rc;
}

enum gh_code gh_store_session_create(struct gh_store *s, const unsigned char token_hash[32],
				     const char *user, const char *csrf, int64_t expires_at,
				     const char *remote_addr, struct gh_err *e)
{
	struct admin_arg a = {.name = user, .csrf = csrf, .remote = remote_addr,
			      .token_hash = token_hash, .now = gh_now_ms(), .expires = expires_at};

	return store_write(s, session_create_job, &a, e);
}

struct touch_arg {
	unsigned char hash[32];
	int64_t now;
};

static enum gh_code touch_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct touch_arg *a = arg;

	(void)s;
	return store_exec(w, "UPDATE admin_sessions SET last_seen_at = ? WHERE token_hash = ?",
			  STORE_ARGS(STORE_INT(a->now), STORE_BLOB(a->hash, 32)),
			  "touching a session", NULL, e);
}

#define S(KIND, FIELD) STORE_COL(KIND, struct gh_admin_session, FIELD)
static const struct store_col session_cols[] = {
	S(TEXT, user), S(TEXT, csrf), S(INT, created_at), S(INT, last_seen_at),
	S(INT, expires_at),
};
#undef S

static int session_row(struct store_row *sr, void *ud)
{
	store_cols_read(sr, session_cols, GH_ARRAY_LEN(session_cols), ud);
	return 0;
}

enum gh_code gh_store_session_peek(struct gh_store *s, const unsigned char token_hash[32],
				   struct gh_admin_session *out, struct gh_err *e)
{
	return store_get(s, "SELECT s.\"user\", s.csrf, s.created_at, s.last_seen_at, s.expires_at "
			    "FROM admin_sessions s JOIN admin_users u ON u.name = s.\"user\" "
			    "WHERE s.token_hash = ? AND u.disabled_at IS NULL",
			 STORE_ARGS(STORE_BLOB(token_hash, 32)), session_row, out, sizeof(*out),
			 "reading a session", e, "no session");
}

enum gh_code gh_store_session_get(struct gh_store *s, const unsigned char token_hash[32],
				  int64_t idle_ms, struct gh_admin_session *out,
				  struct gh_err *e)
{
	int64_t now = gh_now_ms();
	enum gh_code rc = gh_store_session_peek(s, token_hash, out, e);

	if (rc == GH_OK && (out->expires_at <= now || now - out->last_seen_at > idle_ms))
		rc = gh_err_set(e, GH_E_NOTFOUND, "session expired");
	/* record use at most every 15 s (or half the idle window, when shorter)
	 * so an active session never looks idle */
	if (rc == GH_OK && now - out->last_seen_at > (idle_ms / 2 < 15000 ? idle_ms / 2 : 15000)) {
		struct touch_arg *a = malloc(sizeof(*a));

		if (a) {
			memcpy(a->hash, token_hash, 32);
			a->now = now;
			store_write_async(s, touch_job, a, free);
		}
	}
	return rc;
}

static enum gh_code session_delete_job(struct gh_store *s, struct store_conn *w, void *arg,
				       struct gh_err *e)
{
	(void)s;
	return store_exec(w, "DELETE FROM admin_sessions WHERE token_hash = ?",
			  STORE_ARGS(STORE_BLOB(arg, 32)), "ending a session", NULL, e);
}

enum gh_code gh_store_session_delete(struct gh_store *s, const unsigned char token_hash[32],
				     struct gh_err *e)
{
	return store_write(s, session_delete_job, (void *)(uintptr_t)token_hash, e);
}
