/*
 * store_mcp.c - the mcp_tool_pins and mcp_servers tables; see store_mcp.h.
 * Threading as in store.c.
 */
#include "store_int.h"
#include "store_mcp.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define PIN_COLS "server, tool, digest, definition, pinned_at, accepted_at, " \
		 "coalesce(accepted_by, ''), coalesce(pending_digest, ''), pending_definition, " \
		 "coalesce(pending_since, 0), coalesce(pending_status, ''), " \
		 "coalesce(rejected_by, '')"

void gh_mcp_pin_clear(struct gh_mcp_pin *p)
{
	if (!p)
		return;
	free(p->definition);
	free(p->pending_definition);
	memset(p, 0, sizeof(*p));
}

static int pin_from(sqlite3_stmt *st, struct gh_mcp_pin *p)
{
	memset(p, 0, sizeof(*p));
	store_col_copy(st, 0, p->server, sizeof(p->server));
	store_col_copy(st, 1, p->tool, sizeof(p->tool));
	store_col_copy(st, 2, p->digest, sizeof(p->digest));
	p->definition = gh_strdup((const char *)sqlite3_column_text(st, 3));
	p->pinned_at = sqlite3_column_int64(st, 4);
	p->accepted_at = sqlite3_column_int64(st, 5);
	store_col_copy(st, 6, p->accepted_by, sizeof(p->accepted_by));
	store_col_copy(st, 7, p->pending_digest, sizeof(p->pending_digest));
	if (sqlite3_column_type(st, 8) != SQLITE_NULL)
		p->pending_definition = gh_strdup((const char *)sqlite3_column_text(st, 8));
	p->pending_since = sqlite3_column_int64(st, 9);
	store_col_copy(st, 10, p->pending_status, sizeof(p->pending_status));
	store_col_copy(st, 11, p->rejected_by, sizeof(p->rejected_by));
	if (!p->definition || (p->pending_digest[0] && !p->pending_definition)) {
		gh_mcp_pin_clear(p);
		return -1;
	}
	return 0;
}

enum gh_code gh_store_mcp_pin_get(struct gh_store *s, const char *server, const char *tool,
				  struct gh_mcp_pin *out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT " PIN_COLS " FROM mcp_tool_pins "
					 "WHERE server = ? AND tool = ?", e);
	enum gh_code rc = GH_OK;
	int src;

	memset(out, 0, sizeof(*out));
	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	store_bind_text(st, 1, server);
	store_bind_text(st, 2, tool);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		if (pin_from(st, out) != 0)
			rc = gh_err_set(e, GH_E_IO, "database: the pin of %s/%s is damaged", server,
					tool);
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "MCP server \"%s\" has no pinned tool \"%s\"",
				server, tool);
	} else {
		rc = store_fail(c, "reading a tool pin", e);
	}
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_mcp_pin_list(struct gh_store *s, const char *server,
				   int (*fn)(void *ud, const struct gh_mcp_pin *p), void *ud,
				   struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT " PIN_COLS " FROM mcp_tool_pins "
					 "WHERE ?1 IS NULL OR server = ?1 ORDER BY server, tool", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	store_bind_text(st, 1, server);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_mcp_pin p;
		int stop;

		if (pin_from(st, &p) != 0) {
			rc = gh_err_set(e, GH_E_IO, "database: a tool pin is damaged");
			break;
		}
		stop = fn(ud, &p);
		gh_mcp_pin_clear(&p);
		if (stop)
			break;
	}
	if (rc == GH_OK && src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "listing tool pins", e);
	store_reader_put(s, c);
	return rc;
}

/* ------------------------------------------------------------- writes */

struct pin_arg {
	const char *server, *tool, *expect, *digest, *definition, *by;
	int accept;
	const struct gh_audit_event *ev;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct pin_arg *a = arg;
	int64_t now = gh_now_ms();
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO mcp_tool_pins (server, tool, digest, "
					 "definition, pinned_at, accepted_at) VALUES (?,?,?,?,?,?) "
					 "ON CONFLICT (server, tool) DO NOTHING", e);

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->server);
	store_bind_text(st, 2, a->tool);
	store_bind_text(st, 3, a->digest);
	store_bind_text(st, 4, a->definition);
	sqlite3_bind_int64(st, 5, now);
	sqlite3_bind_int64(st, 6, now);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "pinning a tool", e);
	if (sqlite3_changes(w->db) == 0)
		return gh_err_set(e, GH_E_CONFLICT, "%s/%s is pinned already", a->server, a->tool);
	return a->ev ? store_audit_append_in(s, w, a->ev, NULL, e) : GH_OK;
}

enum gh_code gh_store_mcp_pin_insert(struct gh_store *s, const char *server, const char *tool,
				     const char *digest, const char *definition,
				     const struct gh_audit_event *ev, struct gh_err *e)
{
	struct pin_arg a = {server, tool, NULL, digest, definition, NULL, 0, ev};

	return store_write(s, insert_job, &a, e);
}

static enum gh_code hold_job(struct gh_store *s, struct store_conn *w, void *arg,
			     struct gh_err *e)
{
	struct pin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "UPDATE mcp_tool_pins SET pending_digest = ?4, "
					 "pending_definition = ?5, pending_since = ?6, "
					 "pending_status = 'held', rejected_by = NULL "
					 "WHERE server = ?1 AND tool = ?2 AND digest = ?3 "
					 "AND pending_digest IS NOT ?4", e);

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->server);
	store_bind_text(st, 2, a->tool);
	store_bind_text(st, 3, a->expect);
	store_bind_text(st, 4, a->digest);
	store_bind_text(st, 5, a->definition);
	sqlite3_bind_int64(st, 6, gh_now_ms());
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "holding a changed tool", e);
	if (sqlite3_changes(w->db) == 0)
		return gh_err_set(e, GH_E_CONFLICT, "the pin of %s/%s changed meanwhile, or this "
						    "definition is pending already", a->server,
				  a->tool);
	return a->ev ? store_audit_append_in(s, w, a->ev, NULL, e) : GH_OK;
}

enum gh_code gh_store_mcp_pin_hold(struct gh_store *s, const char *server, const char *tool,
				   const char *expect_digest, const char *digest,
				   const char *definition, const struct gh_audit_event *ev,
				   struct gh_err *e)
{
	struct pin_arg a = {server, tool, expect_digest, digest, definition, NULL, 0, ev};

	return store_write(s, hold_job, &a, e);
}

static enum gh_code unhold_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct pin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "UPDATE mcp_tool_pins SET pending_digest = NULL, "
					 "pending_definition = NULL, pending_since = NULL, "
					 "pending_status = NULL, rejected_by = NULL "
					 "WHERE server = ? AND tool = ? AND pending_digest IS NOT NULL",
				      e);

	(void)s;
	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->server);
	store_bind_text(st, 2, a->tool);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "releasing a held tool", e);
	return GH_OK;
}

enum gh_code gh_store_mcp_pin_unhold(struct gh_store *s, const char *server, const char *tool,
				     struct gh_err *e)
{
	struct pin_arg a = {server, tool, NULL, NULL, NULL, NULL, 0, NULL};

	return store_write(s, unhold_job, &a, e);
}

static enum gh_code decide_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct pin_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "SELECT coalesce(pending_digest, ''), "
					 "coalesce(pending_status, '') FROM mcp_tool_pins "
					 "WHERE server = ? AND tool = ?", e);
	char pending[65], status[16];
	int src;

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->server);
	store_bind_text(st, 2, a->tool);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE)
		return gh_err_set(e, GH_E_NOTFOUND, "MCP server \"%s\" has no pinned tool \"%s\"",
				  a->server, a->tool);
	if (src != SQLITE_ROW)
		return store_fail(w, "reading a tool pin", e);
	store_col_copy(st, 0, pending, sizeof(pending));
	store_col_copy(st, 1, status, sizeof(status));
	sqlite3_reset(st);
	if (!pending[0])
		return gh_err_set(e, GH_E_CONFLICT, "%s/%s has no changed definition waiting for "
						    "a decision", a->server, a->tool);
	if (a->expect && strcmp(a->expect, pending))
		return gh_err_set(e, GH_E_CONFLICT, "the changed definition of %s/%s is %.12s…, "
						    "not %.12s…: review it again", a->server,
				  a->tool, pending, a->expect);
	if (!a->accept && !strcmp(status, "rejected"))
		return gh_err_set(e, GH_E_CONFLICT, "the changed definition of %s/%s is rejected "
						    "already", a->server, a->tool);
	st = a->accept
		? store_stmt(w, "UPDATE mcp_tool_pins SET digest = pending_digest, "
				"definition = pending_definition, accepted_at = ?3, accepted_by = ?4, "
				"pending_digest = NULL, pending_definition = NULL, "
				"pending_since = NULL, pending_status = NULL, rejected_by = NULL "
				"WHERE server = ?1 AND tool = ?2", e)
		: store_stmt(w, "UPDATE mcp_tool_pins SET pending_status = 'rejected', "
				"rejected_by = ?4 WHERE server = ?1 AND tool = ?2", e);
	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, a->server);
	store_bind_text(st, 2, a->tool);
	sqlite3_bind_int64(st, 3, gh_now_ms());
	store_bind_text(st, 4, a->by);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "deciding on a changed tool", e);
	return a->ev ? store_audit_append_in(s, w, a->ev, NULL, e) : GH_OK;
}

enum gh_code gh_store_mcp_pin_decide(struct gh_store *s, const char *server, const char *tool,
				     const char *expect_digest, int accept, const char *by,
				     const struct gh_audit_event *ev, struct gh_err *e)
{
	struct pin_arg a = {server, tool, expect_digest, NULL, NULL, by, accept, ev};

	return store_write(s, decide_job, &a, e);
}

/* ------------------------------------------------------------ servers */

static enum gh_code server_put_job(struct gh_store *s, struct store_conn *w, void *arg,
				   struct gh_err *e)
{
	const struct gh_mcp_server_row *r = arg;
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO mcp_servers (name, transport, state, "
					 "last_error, next_retry_at, session, protocol_version, "
					 "server_info, tools, connected_at, updated_at) VALUES "
					 "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) ON CONFLICT (name) DO "
					 "UPDATE SET transport = ?2, state = ?3, last_error = ?4, "
					 "next_retry_at = ?5, session = ?6, protocol_version = ?7, "
					 "server_info = ?8, tools = ?9, connected_at = ?10, "
					 "updated_at = ?11", e);

	(void)s;
	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, r->name);
	store_bind_text(st, 2, r->transport);
	store_bind_text(st, 3, r->state);
	store_bind_text(st, 4, r->last_error[0] ? r->last_error : NULL);
	if (r->next_retry_at)
		sqlite3_bind_int64(st, 5, r->next_retry_at);
	store_bind_text(st, 6, r->session[0] ? r->session : NULL);
	store_bind_text(st, 7, r->protocol_version[0] ? r->protocol_version : NULL);
	store_bind_text(st, 8, r->server_info[0] ? r->server_info : NULL);
	sqlite3_bind_int64(st, 9, r->tools);
	if (r->connected_at)
		sqlite3_bind_int64(st, 10, r->connected_at);
	sqlite3_bind_int64(st, 11, r->updated_at ? r->updated_at : gh_now_ms());
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "recording an MCP server's state", e);
	return GH_OK;
}

void gh_store_mcp_server_put(struct gh_store *s, const struct gh_mcp_server_row *r)
{
	struct gh_mcp_server_row *copy = malloc(sizeof(*copy));

	if (!copy)
		return;
	*copy = *r;
	store_write_async(s, server_put_job, copy, free);
}

enum gh_code gh_store_mcp_server_list(struct gh_store *s,
				      int (*fn)(void *ud, const struct gh_mcp_server_row *r),
				      void *ud, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT name, transport, state, coalesce(last_error, ''), "
					 "coalesce(next_retry_at, 0), coalesce(session, ''), "
					 "coalesce(protocol_version, ''), coalesce(server_info, ''), "
					 "tools, coalesce(connected_at, 0), updated_at "
					 "FROM mcp_servers ORDER BY name", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_mcp_server_row r;

		memset(&r, 0, sizeof(r));
		store_col_copy(st, 0, r.name, sizeof(r.name));
		store_col_copy(st, 1, r.transport, sizeof(r.transport));
		store_col_copy(st, 2, r.state, sizeof(r.state));
		store_col_copy(st, 3, r.last_error, sizeof(r.last_error));
		r.next_retry_at = sqlite3_column_int64(st, 4);
		store_col_copy(st, 5, r.session, sizeof(r.session));
		store_col_copy(st, 6, r.protocol_version, sizeof(r.protocol_version));
		store_col_copy(st, 7, r.server_info, sizeof(r.server_info));
		r.tools = sqlite3_column_int64(st, 8);
		r.connected_at = sqlite3_column_int64(st, 9);
		r.updated_at = sqlite3_column_int64(st, 10);
		if (fn(ud, &r))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "listing MCP servers", e);
	store_reader_put(s, c);
	return rc;
}
