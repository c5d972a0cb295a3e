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
	sqlite3_stmt *st = store_stmt(w, a->token_hash
					 ? "DELETE FROM admin_sessions WHERE user = ? AND "
					   "token_hash IS NOT ?"
					 : "DELETE FROM admin_sessions WHERE user = ?", e);

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->name);
	if (a->token_hash)
		sqlite3_bind_blob(st, 2, a->token_hash, 32, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "ending sessions", e);
	a->ended = sqlite3_changes(w->db);
	return GH_OK;
}

/* After an UPDATE of a->name that changed nothing: GH_E_NOTFOUND when
 * there is no such admin, else GH_E_CONFLICT with msg. */
static enum gh_code unchanged(struct store_conn *w, const struct admin_arg *a, const char *msg,
			      struct gh_err *e)
{
	sqlite3_stmt *st = store_stmt(w, "SELECT 1 FROM admin_users WHERE name = ?", e);
	int src;

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->name);
	src = sqlite3_step(st);
	sqlite3_reset(st);
	if (src == SQLITE_DONE)
		return gh_err_set(e, GH_E_NOTFOUND, "no admin \"%s\" (gatehouse admin list shows "
				  "them)", a->name);
	if (src != SQLITE_ROW)
		return store_fail(w, "reading an admin", e);
	return gh_err_set(e, GH_E_CONFLICT, "admin \"%s\" %s", a->name, msg);
}

static enum gh_code create_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct admin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO admin_users (name, password_hash, created_at) "
					 "VALUES (?, ?, ?)", e);
	enum gh_code rc;

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->name);
	store_bind_text(st, 2, a->pwhash);
	sqlite3_bind_int64(st, 3, a->now);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = store_fail(w, "creating an admin", e);
		if (rc == GH_E_CONFLICT)
			gh_err_set(e, GH_E_CONFLICT, "admin \"%s\" already exists", a->name);
		return rc;
	}
	return audit_in(s, w, a, e);
}

enum gh_code gh_store_admin_create(struct gh_store *s, const char *name, const char *pwhash,
				   const struct gh_audit_event *ev, struct gh_err *e)
{
	struct admin_arg a = {.name = name, .pwhash = pwhash, .ev = ev, .now = gh_now_ms()};

	return store_write(s, create_job, &a, e);
}

static void user_from(sqlite3_stmt *st, struct gh_admin_user *u)
{
	memset(u, 0, sizeof(*u));
	store_col_copy(st, 0, u->name, sizeof(u->name));
	store_col_copy(st, 1, u->password_hash, sizeof(u->password_hash));
	u->created_at = sqlite3_column_int64(st, 2);
	u->disabled_at = sqlite3_column_int64(st, 3);
	u->last_login_at = sqlite3_column_int64(st, 4);
}

#define USER_COLS "name, password_hash, created_at, coalesce(disabled_at, 0), " \
		  "coalesce(last_login_at, 0)"

enum gh_code gh_store_admin_get(struct gh_store *s, const char *name, struct gh_admin_user *out,
				struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT " USER_COLS " FROM admin_users WHERE name = ?", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	store_bind_text(st, 1, name);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		user_from(st, out);
	else if (src == SQLITE_DONE)
		rc = gh_err_set(e, GH_E_NOTFOUND, "no admin \"%s\"", name);
	else
		rc = store_fail(c, "reading an admin", e);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_admin_list(struct gh_store *s,
				 int (*fn)(void *ud, const struct gh_admin_user *u), void *ud,
				 struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT " USER_COLS " FROM admin_users ORDER BY name", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_admin_user u;

		user_from(st, &u);
		memset(u.password_hash, 0, sizeof(u.password_hash));
		if (fn(ud, &u))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "listing admins", e);
	store_reader_put(s, c);
	return rc;
}

static enum gh_code disable_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	struct admin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "UPDATE admin_users SET disabled_at = ? WHERE name = ? "
					 "AND disabled_at IS NULL", e);

	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->now);
	store_bind_text(st, 2, a->name);
	enum gh_code rc;

	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "disabling an admin", e);
	if (sqlite3_changes(w->db) == 0)
		return unchanged(w, a, "is disabled already", e);
	if ((rc = end_sessions(w, a, e)) != GH_OK)
		return rc;
	return audit_in(s, w, a, e);
}

enum gh_code gh_store_admin_disable(struct gh_store *s, const char *name,
				    const struct gh_audit_event *ev, int *ended, struct gh_err *e)
{
	struct admin_arg a = {.name = name, .ev = ev, .now = gh_now_ms()};
	enum gh_code rc = store_write(s, disable_job, &a, e);

	if (ended)
		*ended = rc == GH_OK ? a.ended : 0;
	return rc;
}

static enum gh_code enable_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct admin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "UPDATE admin_users SET disabled_at = NULL WHERE "
					 "name = ? AND disabled_at IS NOT NULL", e);

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->name);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "enabling an admin", e);
	if (sqlite3_changes(w->db) == 0)
		return unchanged(w, a, "is not disabled", e);
	return audit_in(s, w, a, e);
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
	sqlite3_stmt *st = store_stmt(w, "UPDATE admin_users SET password_hash = ? "
					 "WHERE name = ?", e);
	enum gh_code rc;

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->pwhash);
	store_bind_text(st, 2, a->name);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "changing a password", e);
	if (sqlite3_changes(w->db) == 0)
		return unchanged(w, a, "was not changed", e);
	if ((rc = end_sessions(w, a, e)) != GH_OK)
		return rc;
	return audit_in(s, w, a, e);
}

enum gh_code gh_store_admin_set_password(struct gh_store *s, const char *name,
					 const char *pwhash, const unsigned char *keep_session,
					 const struct gh_audit_event *ev, int *ended,
					 struct gh_err *e)
{
	struct admin_arg a = {.name = name, .pwhash = pwhash, .token_hash = keep_session,
			      .ev = ev, .now = gh_now_ms()};
	enum gh_code rc = store_write(s, password_job, &a, e);

	if (ended)
		*ended = rc == GH_OK ? a.ended : 0;
	return rc;
}

static enum gh_code session_create_job(struct gh_store *s, struct store_conn *w, void *arg,
				       struct gh_err *e)
{
	struct admin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO admin_sessions (token_hash, user, csrf, "
					 "created_at, last_seen_at, expires_at, remote_addr) "
					 "VALUES (?, ?, ?, ?, ?, ?, ?)", e);

	if (!st)
		return GH_E_IO;
	sqlite3_bind_blob(st, 1, a->token_hash, 32, SQLITE_TRANSIENT);
	store_bind_text(st, 2, a->name);
	store_bind_text(st, 3, a->csrf);
	sqlite3_bind_int64(st, 4, a->now);
	sqlite3_bind_int64(st, 5, a->now);
	sqlite3_bind_int64(st, 6, a->expires);
	store_bind_text(st, 7, a->remote);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "creating a session", e);
	st = store_stmt(w, "UPDATE admin_users SET last_login_at = ? WHERE name = ?", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->now);
	store_bind_text(st, 2, a->name);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "recording a login", e);
	/* expired sessions go as new ones come */
	st = store_stmt(w, "DELETE FROM admin_sessions WHERE expires_at < ?", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->now);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "pruning sessions", e);
	return GH_OK;
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
	sqlite3_stmt *st = store_stmt(w, "UPDATE admin_sessions SET last_seen_at = ? "
					 "WHERE token_hash = ?", e);

	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->now);
	sqlite3_bind_blob(st, 2, a->hash, 32, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "touching a session", e);
	return GH_OK;
}

enum gh_code gh_store_session_peek(struct gh_store *s, const unsigned char token_hash[32],
				   struct gh_admin_session *out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT s.user, s.csrf, s.created_at, s.last_seen_at, "
					 "s.expires_at FROM admin_sessions s JOIN admin_users u "
					 "ON u.name = s.user WHERE s.token_hash = ? AND "
					 "u.disabled_at IS NULL", e);
	enum gh_code rc = GH_OK;
	int src;

	memset(out, 0, sizeof(*out));
	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	sqlite3_bind_blob(st, 1, token_hash, 32, SQLITE_TRANSIENT);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		store_col_copy(st, 0, out->user, sizeof(out->user));
		store_col_copy(st, 1, out->csrf, sizeof(out->csrf));
		out->created_at = sqlite3_column_int64(st, 2);
		out->last_seen_at = sqlite3_column_int64(st, 3);
		out->expires_at = sqlite3_column_int64(st, 4);
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no session");
	} else {
		rc = store_fail(c, "reading a session", e);
	}
	store_reader_put(s, c);
	return rc;
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
	sqlite3_stmt *st = store_stmt(w, "DELETE FROM admin_sessions WHERE token_hash = ?", e);

	if (!st)
		return GH_E_IO;
	sqlite3_bind_blob(st, 1, arg, 32, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "ending a session", e);
	return GH_OK;
}

enum gh_code gh_store_session_delete(struct gh_store *s, const unsigned char token_hash[32],
				     struct gh_err *e)
{
	return store_write(s, session_delete_job, (void *)(uintptr_t)token_hash, e);
}
