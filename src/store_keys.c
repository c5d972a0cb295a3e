/*
 * store_keys.c - the api_keys table. Threading as in store.c.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct key_arg {
	const struct gh_key *k;
	const unsigned char *hash;
	const char *id;
	int64_t now;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct key_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO api_keys (id, name, owner, policy, role, "
					 "prefix, hash, created_at) VALUES (?,?,?,?,?,?,?,?)", e);

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->k->id);
	store_bind_text(st, 2, a->k->name);
	store_bind_text(st, 3, a->k->owner);
	store_bind_text(st, 4, a->k->policy[0] ? a->k->policy : NULL);
	store_bind_text(st, 5, a->k->admin ? "admin" : "user");
	store_bind_text(st, 6, a->k->prefix);
	sqlite3_bind_blob(st, 7, a->hash, 32, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 8, a->k->created_at);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "creating the key", e);
	return GH_OK;
}

enum gh_code gh_store_key_insert(struct gh_store *s, const struct gh_key *k,
				 const unsigned char hash[32], struct gh_err *e)
{
	struct key_arg a = {.k = k, .hash = hash};

	return store_write(s, insert_job, &a, e);
}

#define KEY_COLS "id, name, owner, coalesce(policy, ''), role, prefix, created_at, " \
		 "coalesce(last_used_at, 0), coalesce(revoked_at, 0)"

static void key_from(sqlite3_stmt *st, struct gh_key *k)
{
	memset(k, 0, sizeof(*k));
	store_col_copy(st, 0, k->id, sizeof(k->id));
	store_col_copy(st, 1, k->name, sizeof(k->name));
	store_col_copy(st, 2, k->owner, sizeof(k->owner));
	store_col_copy(st, 3, k->policy, sizeof(k->policy));
	k->admin = !strcmp((const char *)sqlite3_column_text(st, 4), "admin");
	store_col_copy(st, 5, k->prefix, sizeof(k->prefix));
	k->created_at = sqlite3_column_int64(st, 6);
	k->last_used_at = sqlite3_column_int64(st, 7);
	k->revoked_at = sqlite3_column_int64(st, 8);
}

static enum gh_code key_lookup(struct gh_store *s, const char *sql, const void *val, int blob,
			       struct gh_key *out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, sql, e);
	enum gh_code rc;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	if (blob)
		sqlite3_bind_blob(st, 1, val, 32, SQLITE_STATIC);
	else
		store_bind_text(st, 1, val);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		key_from(st, out);
		rc = GH_OK;
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no such key");
	} else {
		rc = store_fail(c, "looking up a key", e);
	}
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_key_by_hash(struct gh_store *s, const unsigned char hash[32],
				  struct gh_key *out, struct gh_err *e)
{
	return key_lookup(s, "SELECT " KEY_COLS " FROM api_keys WHERE hash = ?", hash, 1, out, e);
}

enum gh_code gh_store_key_by_id(struct gh_store *s, const char *id, struct gh_key *out,
				struct gh_err *e)
{
	enum gh_code rc = key_lookup(s, "SELECT " KEY_COLS " FROM api_keys WHERE id = ?", id, 0,
				     out, e);

	if (rc == GH_E_NOTFOUND)
		gh_err_set(e, GH_E_NOTFOUND, "no key with id \"%s\"", id);
	return rc;
}

enum gh_code gh_store_key_list(struct gh_store *s, int (*fn)(void *ud, const struct gh_key *k),
			       void *ud, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT " KEY_COLS " FROM api_keys "
					 "ORDER BY created_at DESC, id", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_key k;

		key_from(st, &k);
		if (fn(ud, &k))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "listing keys", e);
	store_reader_put(s, c);
	return rc;
}

static enum gh_code revoke_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct key_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "SELECT coalesce(revoked_at, 0) FROM api_keys "
					 "WHERE id = ?", e);
	int src;

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->id);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		sqlite3_reset(st);
		return gh_err_set(e, GH_E_NOTFOUND, "no key with id %s", a->id);
	}
	if (src != SQLITE_ROW)
		return store_fail(w, "revoking the key", e);
	if (sqlite3_column_int64(st, 0) != 0) {
		sqlite3_reset(st);
		return gh_err_set(e, GH_E_CONFLICT, "key %s is already revoked", a->id);
	}
	sqlite3_reset(st);
	st = store_stmt(w, "UPDATE api_keys SET revoked_at = ? WHERE id = ?", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->now);
	store_bind_text(st, 2, a->id);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "revoking the key", e);
	return GH_OK;
}

enum gh_code gh_store_key_revoke(struct gh_store *s, const char *id, struct gh_err *e)
{
	struct key_arg a = {.id = id, .now = gh_now_ms()};

	return store_write(s, revoke_job, &a, e);
}

struct touch_arg {
	char id[48];
	int64_t now;
};

static enum gh_code touch_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct touch_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "UPDATE api_keys SET last_used_at = ? WHERE id = ?", e);

	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->now);
	store_bind_text(st, 2, a->id);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "recording key use", e);
	return GH_OK;
}

void gh_store_key_touch(struct gh_store *s, const char *id, int64_t now_ms)
{
	struct touch_arg *a = malloc(sizeof(*a));

	if (!a)
		return;
	gh_strlcpy(a->id, id, sizeof(a->id));
	a->now = now_ms;
	store_write_async(s, touch_job, a, free);
}
