/*
 * store_ui.c - reads for the admin UI; see store_ui.h. Threading as in
 * store.c: every function borrows a reader connection for its duration.
 */
#include "store_ui.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "store_int.h"
#include "util.h"

#define THREAD_COLS "t.id, t.owner, t.resource_id, t.agent_id, t.title, t.metadata, " \
		    "t.created_at, t.updated_at, " \
		    "(SELECT count(*) FROM messages m WHERE m.thread_id = t.id)"

static void add_time(cJSON *o, const char *name, int64_t ms)
{
	char ts[GH_ISO8601_MAX];

	if (ms <= 0) {
		cJSON_AddNullToObject(o, name);
		return;
	}
	gh_iso8601(ms, ts, sizeof(ts));
	cJSON_AddStringToObject(o, name, ts);
}

static cJSON *thread_json(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject(), *md;

	if (!o)
		return NULL;
	gh_json_add_str(o, "id", (const char *)sqlite3_column_text(st, 0));
	gh_json_add_str(o, "owner", (const char *)sqlite3_column_text(st, 1));
	gh_json_add_str(o, "resourceId", (const char *)sqlite3_column_text(st, 2));
	gh_json_add_str(o, "agentId", (const char *)sqlite3_column_text(st, 3));
	gh_json_add_str(o, "title", (const char *)sqlite3_column_text(st, 4));
	md = store_col_json(st, 5);
	cJSON_AddItemToObject(o, "metadata", md ? md : cJSON_CreateObject());
	add_time(o, "createdAt", sqlite3_column_int64(st, 6));
	add_time(o, "updatedAt", sqlite3_column_int64(st, 7));
	cJSON_AddNumberToObject(o, "messageCount", (double)sqlite3_column_int64(st, 8));
	return o;
}

static void page_fields(cJSON *res, int64_t total, int page, int per_page)
{
	cJSON_AddNumberToObject(res, "total", (double)total);
	cJSON_AddNumberToObject(res, "page", page);
	cJSON_AddNumberToObject(res, "perPage", per_page);
	cJSON_AddBoolToObject(res, "hasMore", (int64_t)(page + 1) * per_page < total);
}

enum gh_code gh_store_ui_threads(struct gh_store *s, const char *owner, const char *agent_id,
				 const char *resource_id, int page, int per_page, cJSON **out,
				 struct gh_err *e)
{
	static const char *const sql_count =
		"SELECT count(*) FROM threads WHERE (?1 IS NULL OR owner = ?1) "
		"AND (?2 IS NULL OR agent_id = ?2) AND (?3 IS NULL OR resource_id = ?3)";
	static const char *const sql_page =
		"SELECT " THREAD_COLS " FROM threads t WHERE (?1 IS NULL OR t.owner = ?1) "
		"AND (?2 IS NULL OR t.agent_id = ?2) AND (?3 IS NULL OR t.resource_id = ?3) "
		"ORDER BY t.updated_at DESC, t.id LIMIT ?4 OFFSET ?5";
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st;
	cJSON *res = NULL, *arr;
	enum gh_code rc = GH_OK;
	int64_t total;
	int src;

	*out = NULL;
	if (page < 0 || per_page < 1 || per_page > 100) {
		rc = gh_err_set(e, GH_E_BADREQ, "page must be >= 0 and perPage 1..100");
		goto out;
	}
	if (!(st = store_stmt(c, sql_count, e))) {
		rc = GH_E_IO;
		goto out;
	}
	store_bind_text(st, 1, owner);
	store_bind_text(st, 2, agent_id);
	store_bind_text(st, 3, resource_id);
	if (sqlite3_step(st) != SQLITE_ROW) {
		rc = store_fail(c, "counting threads", e);
		goto out;
	}
	total = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	res = cJSON_CreateObject();
	if (!res || !(arr = cJSON_AddArrayToObject(res, "threads"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (!(st = store_stmt(c, sql_page, e))) {
		rc = GH_E_IO;
		goto out;
	}
	store_bind_text(st, 1, owner);
	store_bind_text(st, 2, agent_id);
	store_bind_text(st, 3, resource_id);
	sqlite3_bind_int(st, 4, per_page);
	sqlite3_bind_int64(st, 5, (int64_t)page * per_page);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *t = thread_json(st);

		if (!t) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		cJSON_AddItemToArray(arr, t);
	}
	if (src != SQLITE_DONE) {
		rc = store_fail(c, "listing threads", e);
		goto out;
	}
	page_fields(res, total, page, per_page);
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_thread(struct gh_store *s, const char *id, cJSON **out,
				struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st;
	cJSON *res = NULL, *runs;
	enum gh_code rc = GH_OK;
	int src;

	*out = NULL;
	if (!(st = store_stmt(c, "SELECT " THREAD_COLS " FROM threads t WHERE t.id = ?", e))) {
		rc = GH_E_IO;
		goto out;
	}
	store_bind_text(st, 1, id);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no thread %s", id);
		goto out;
	}
	if (src != SQLITE_ROW) {
		rc = store_fail(c, "reading a thread", e);
		goto out;
	}
	if (!(res = thread_json(st)) || !(runs = cJSON_AddArrayToObject(res, "runs"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	sqlite3_reset(st);
	if (!(st = store_stmt(c, "SELECT id, status, agent_id, key_id, created_at, updated_at "
				 "FROM runs WHERE thread_id = ? ORDER BY created_at DESC, id "
				 "LIMIT 100", e))) {
		rc = GH_E_IO;
		goto out;
	}
	store_bind_text(st, 1, id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *r = cJSON_CreateObject();

		if (!r) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		gh_json_add_str(r, "id", (const char *)sqlite3_column_text(st, 0));
		gh_json_add_str(r, "status", (const char *)sqlite3_column_text(st, 1));
		gh_json_add_str(r, "agentId", (const char *)sqlite3_column_text(st, 2));
		gh_json_add_str(r, "keyId", (const char *)sqlite3_column_text(st, 3));
		add_time(r, "createdAt", sqlite3_column_int64(st, 4));
		add_time(r, "updatedAt", sqlite3_column_int64(st, 5));
		cJSON_AddItemToArray(runs, r);
	}
	if (src != SQLITE_DONE) {
		rc = store_fail(c, "listing a thread's runs", e);
		goto out;
	}
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_messages(struct gh_store *s, const char *thread_id, int page,
				  int per_page, int last, cJSON **out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st;
	cJSON *res = NULL, *arr;
	enum gh_code rc = GH_OK;
	int64_t total, offset;
	int src, limit;

	*out = NULL;
	if (last < 0 || last > 100 || (last == 0 && (page < 0 || per_page < 1 ||
						       per_page > 100))) {
		rc = gh_err_set(e, GH_E_BADREQ, "last must be 1..100, or page >= 0 and perPage "
				"1..100");
		goto out;
	}
	if (!(st = store_stmt(c, "SELECT (SELECT count(*) FROM messages m "
				 "WHERE m.thread_id = t.id) FROM threads t WHERE t.id = ?", e))) {
		rc = GH_E_IO;
		goto out;
	}
	store_bind_text(st, 1, thread_id);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no thread %s", thread_id);
		goto out;
	}
	if (src != SQLITE_ROW) {
		rc = store_fail(c, "reading a thread", e);
		goto out;
	}
	total = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (last > 0) {
		limit = last;
		offset = total > last ? total - last : 0;
	} else {
		limit = per_page;
		offset = (int64_t)page * per_page;
	}
	res = cJSON_CreateObject();
	if (!res || !(arr = cJSON_AddArrayToObject(res, "messages"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (!(st = store_stmt(c, "SELECT id, seq, role, content, run_id, created_at FROM messages "
				 "WHERE thread_id = ? ORDER BY seq LIMIT ? OFFSET ?", e))) {
		rc = GH_E_IO;
		goto out;
	}
	store_bind_text(st, 1, thread_id);
	sqlite3_bind_int(st, 2, limit);
	sqlite3_bind_int64(st, 3, offset);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *m = cJSON_CreateObject(), *content = store_col_json(st, 3);

		if (!m || !content) {
			cJSON_Delete(m);
			cJSON_Delete(content);
			rc = gh_err_set(e, GH_E_IO, "database: a stored message is damaged");
			goto out;
		}
		gh_json_add_str(m, "id", (const char *)sqlite3_column_text(st, 0));
		cJSON_AddNumberToObject(m, "seq", (double)sqlite3_column_int64(st, 1));
		gh_json_add_str(m, "threadId", thread_id);
		gh_json_add_str(m, "role", (const char *)sqlite3_column_text(st, 2));
		cJSON_AddItemToObject(m, "content", content);
		gh_json_add_str(m, "runId", (const char *)sqlite3_column_text(st, 4));
		add_time(m, "createdAt", sqlite3_column_int64(st, 5));
		cJSON_AddItemToArray(arr, m);
	}
	if (src != SQLITE_DONE) {
		rc = store_fail(c, "reading messages", e);
		goto out;
	}
	if (last > 0) {
		/* the window ends at the newest message: "more" lies before it */
		cJSON_AddNumberToObject(res, "total", (double)total);
		cJSON_AddNumberToObject(res, "page", 0);
		cJSON_AddNumberToObject(res, "perPage", last);
		cJSON_AddBoolToObject(res, "hasMore", total > last);
	} else {
		page_fields(res, total, page, per_page);
	}
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_activity(struct gh_store *s, int64_t since_ms, int64_t bucket_ms,
				  int nbuckets, cJSON **out, struct gh_err *e)
{
	struct store_conn *c;
	sqlite3_stmt *st;
	cJSON *res = NULL, *by, *hourly;
	int64_t counts[168];
	enum gh_code rc = GH_OK;
	int src, i;

	*out = NULL;
	if (nbuckets < 1 || nbuckets > (int)GH_ARRAY_LEN(counts) || bucket_ms < 1)
		return gh_err_set(e, GH_E_BADREQ, "activity: 1..168 buckets of at least 1 ms");
	memset(counts, 0, sizeof(counts));
	c = store_reader(s);
	res = cJSON_CreateObject();
	if (!res || !(by = cJSON_AddObjectToObject(res, "byEvent"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	/* ts is indexed (audit_by_ts): these read only the window */
	if (!(st = store_stmt(c, "SELECT event, count(*) FROM audit_events WHERE ts >= ? "
				 "GROUP BY event ORDER BY event", e))) {
		rc = GH_E_IO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, since_ms);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		const char *ev = (const char *)sqlite3_column_text(st, 0);

		if (ev)
			cJSON_AddNumberToObject(by, ev, (double)sqlite3_column_int64(st, 1));
	}
	if (src != SQLITE_DONE) {
		rc = store_fail(c, "counting audit events", e);
		goto out;
	}
	if (!(st = store_stmt(c, "SELECT count(DISTINCT tool_call_id) FROM audit_events "
				 "WHERE ts >= ? AND tool_call_id IS NOT NULL", e))) {
		rc = GH_E_IO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, since_ms);
	if (sqlite3_step(st) != SQLITE_ROW) {
		rc = store_fail(c, "counting tool calls", e);
		goto out;
	}
	cJSON_AddNumberToObject(res, "toolCalls", (double)sqlite3_column_int64(st, 0));
	sqlite3_reset(st);
	if (!(st = store_stmt(c, "SELECT (ts - ?1) / ?2, count(DISTINCT tool_call_id) "
				 "FROM audit_events WHERE ts >= ?1 AND tool_call_id IS NOT NULL "
				 "GROUP BY 1", e))) {
		rc = GH_E_IO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, since_ms);
	sqlite3_bind_int64(st, 2, bucket_ms);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t b = sqlite3_column_int64(st, 0);

		if (b >= 0 && b < nbuckets)
			counts[b] += sqlite3_column_int64(st, 1);
	}
	if (src != SQLITE_DONE) {
		rc = store_fail(c, "counting tool calls per hour", e);
		goto out;
	}
	if (!(hourly = cJSON_AddArrayToObject(res, "buckets"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < nbuckets; i++)
		cJSON_AddItemToArray(hourly, cJSON_CreateNumber((double)counts[i]));
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_pending_count(struct gh_store *s, int64_t *n, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT count(*) FROM approvals WHERE status = 'pending'",
				      e);
	enum gh_code rc = GH_OK;

	*n = 0;
	if (!st)
		rc = GH_E_IO;
	else if (sqlite3_step(st) != SQLITE_ROW)
		rc = store_fail(c, "counting pending approvals", e);
	else
		*n = sqlite3_column_int64(st, 0);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_session_peek(struct gh_store *s, const unsigned char token_hash[32],
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
