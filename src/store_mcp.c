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

#define P(KIND, FIELD) STORE_COL(KIND, struct gh_mcp_pin, FIELD)
static const struct store_col pin_cols[] = { /* PIN_COLS, in order */
	P(TEXT, server), P(TEXT, tool), P(TEXT, digest), P(DUP, definition), P(INT, pinned_at),
	P(INT, accepted_at), P(TEXT, accepted_by), P(TEXT, pending_digest),
	P(DUP, pending_definition), P(INT, pending_since), P(TEXT, pending_status),
	P(TEXT, rejected_by),
};
#undef P

void gh_mcp_pin_clear(struct gh_mcp_pin *p)
{
	store_cols_clear(pin_cols, GH_ARRAY_LEN(pin_cols), p, sizeof(*p));
}

static int pin_from(struct store_row *sr, struct gh_mcp_pin *p)
{
	memset(p, 0, sizeof(*p));
	store_cols_read(sr, pin_cols, GH_ARRAY_LEN(pin_cols), p);
	if (!p->definition || (p->pending_digest[0] && !p->pending_definition)) {
		gh_mcp_pin_clear(p);
		return -1;
	}
	return 0;
}

static int pin_row(struct store_row *sr, void *ud)
{
	return pin_from(sr, ud) != 0 ? -1 : 0;
}

enum gh_code gh_store_mcp_pin_get(struct gh_store *s, const char *server, const char *tool,
				  struct gh_mcp_pin *out, struct gh_err *e)
{
	return store_get(s, "SELECT " PIN_COLS " FROM mcp_tool_pins WHERE server = ? AND tool = ?",
			 STORE_ARGS(STORE_TEXT(server), STORE_TEXT(tool)), pin_row, out,
			 sizeof(*out), "reading a tool pin", e,
			 "MCP server \"%s\" has no pinned tool \"%s\"", server, tool);
}

STORE_EACH(pin, struct gh_mcp_pin, pin_from, gh_mcp_pin_clear, 0)

enum gh_code gh_store_mcp_pin_list(struct gh_store *s, const char *server,
				   int (*fn)(void *ud, const struct gh_mcp_pin *p), void *ud,
				   struct gh_err *e)
{
	struct pin_each x = {fn, ud};

	return store_read(s, "SELECT " PIN_COLS " FROM mcp_tool_pins "
			     "WHERE CAST(?1 AS text) IS NULL OR server = ?1 ORDER BY server, tool",
			  STORE_ARGS(STORE_TEXT(server)), 0, pin_each_row, &x, NULL,
			  "listing tool pins", e);
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
	int changed = 0;
	enum gh_code rc = store_exec(w, "INSERT INTO mcp_tool_pins (server, tool, digest, "
					"definition, pinned_at, accepted_at) VALUES (?,?,?,?,?,?) "
					"ON CONFLICT (server, tool) DO NOTHING",
				     STORE_ARGS(STORE_TEXT(a->server), STORE_TEXT(a->tool),
						STORE_TEXT(a->digest), STORE_TEXT(a->definition),
						STORE_INT(now), STORE_INT(now)),
				     "pinning a tool", &changed, e);

	if (rc != GH_OK)
		return rc;
	if (changed == 0)
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
	int changed = 0;
	enum gh_code rc = store_exec(w, "UPDATE mcp_tool_pins SET pending_digest = ?4, "
					"pending_definition = ?5, pending_since = ?6, "
					"pending_status = 'held', rejected_by = NULL "
					"WHERE server = ?1 AND tool = ?2 AND digest = ?3 "
					"AND pending_digest IS DISTINCT FROM ?4",
				     STORE_ARGS(STORE_TEXT(a->server), STORE_TEXT(a->tool),
						STORE_TEXT(a->expect), STORE_TEXT(a->digest),
						STORE_TEXT(a->definition), STORE_INT(gh_now_ms())),
				     "holding a changed tool", &changed, e);

	if (rc != GH_OK)
		return rc;
	if (changed == 0)
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

	(void)s;
	return store_exec(w, "UPDATE mcp_tool_pins SET pending_digest = NULL, "
			     "pending_definition = NULL, pending_since = NULL, "
			     "pending_status = NULL, rejected_by = NULL "
			     "WHERE server = ? AND tool = ? AND pending_digest IS NOT NULL",
			  STORE_ARGS(STORE_TEXT(a->server), STORE_TEXT(a->tool)),
			  "releasing a held tool", NULL, e);
}

enum gh_code gh_store_mcp_pin_unhold(struct gh_store *s, const char *server, const char *tool,
				     struct gh_err *e)
{
	struct pin_arg a = {server, tool, NULL, NULL, NULL, NULL, 0, NULL};

	return store_write(s, unhold_job, &a, e);
}

struct pending_row {
	char digest[65], status[16];
};

static int pending_row(struct store_row *sr, void *ud)
{
	struct pending_row *p = ud;

	store_col_copy(sr, 0, p->digest, sizeof(p->digest));
	store_col_copy(sr, 1, p->status, sizeof(p->status));
	return 0;
}

static enum gh_code decide_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct pin_arg *a = arg;
	struct pending_row p;
	int seen = 0;
	enum gh_code rc = store_rows(w, "SELECT coalesce(pending_digest, ''), "
					"coalesce(pending_status, '') FROM mcp_tool_pins "
					"WHERE server = ? AND tool = ?",
				     STORE_ARGS(STORE_TEXT(a->server), STORE_TEXT(a->tool)), 1,
				     pending_row, &p, &seen, "reading a tool pin", e);

	if (rc != GH_OK)
		return rc;
	if (seen == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "MCP server \"%s\" has no pinned tool \"%s\"",
				  a->server, a->tool);
	if (!p.digest[0])
		return gh_err_set(e, GH_E_CONFLICT, "%s/%s has no changed definition waiting for "
						    "a decision", a->server, a->tool);
	if (a->expect && strcmp(a->expect, p.digest))
		return gh_err_set(e, GH_E_CONFLICT, "the changed definition of %s/%s is %.12s…, "
						    "not %.12s…: review it again", a->server,
				  a->tool, p.digest, a->expect);
	if (!a->accept && !strcmp(p.status, "rejected"))
		return gh_err_set(e, GH_E_CONFLICT, "the changed definition of %s/%s is rejected "
						    "already", a->server, a->tool);
	/* each statement uses every parameter it is given (PostgreSQL cannot
	 * type one it does not use) */
	if (a->accept)
		rc = store_exec(w, "UPDATE mcp_tool_pins SET digest = pending_digest, "
				   "definition = pending_definition, accepted_at = ?3, "
				   "accepted_by = ?4, pending_digest = NULL, pending_definition = NULL, "
				   "pending_since = NULL, pending_status = NULL, rejected_by = NULL "
				   "WHERE server = ?1 AND tool = ?2",
				STORE_ARGS(STORE_TEXT(a->server), STORE_TEXT(a->tool),
					   STORE_INT(gh_now_ms()), STORE_TEXT(a->by)),
				"deciding on a changed tool", NULL, e);
	else
		rc = store_exec(w, "UPDATE mcp_tool_pins SET pending_status = 'rejected', "
				   "rejected_by = ?3 WHERE server = ?1 AND tool = ?2",
				STORE_ARGS(STORE_TEXT(a->server), STORE_TEXT(a->tool),
					   STORE_TEXT(a->by)),
				"deciding on a changed tool", NULL, e);
	if (rc != GH_OK)
		return rc;
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
	struct store_arg none = STORE_TEXT(NULL);

	(void)s;
	return store_exec(w, "INSERT INTO mcp_servers (name, transport, state, "
			     "last_error, next_retry_at, session, protocol_version, "
			     "server_info, tools, connected_at, updated_at) VALUES "
			     "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) ON CONFLICT (name) DO "
			     "UPDATE SET transport = ?2, state = ?3, last_error = ?4, "
			     "next_retry_at = ?5, session = ?6, protocol_version = ?7, "
			     "server_info = ?8, tools = ?9, connected_at = ?10, "
			     "updated_at = ?11",
			  STORE_ARGS(STORE_TEXT(r->name), STORE_TEXT(r->transport),
				     STORE_TEXT(r->state),
				     STORE_TEXT(r->last_error[0] ? r->last_error : NULL),
				     r->next_retry_at ? STORE_INT(r->next_retry_at) : none,
				     STORE_TEXT(r->session[0] ? r->session : NULL),
				     STORE_TEXT(r->protocol_version[0] ? r->protocol_version : NULL),
				     STORE_TEXT(r->server_info[0] ? r->server_info : NULL),
				     STORE_INT(r->tools),
				     r->connected_at ? STORE_INT(r->connected_at) : none,
				     STORE_INT(r->updated_at ? r->updated_at : gh_now_ms())),
			  "recording an MCP server's state", NULL, e);
}

void gh_store_mcp_server_put(struct gh_store *s, const struct gh_mcp_server_row *r)
{
	struct gh_mcp_server_row *copy = malloc(sizeof(*copy));

	if (!copy)
		return;
	*copy = *r;
	store_write_async(s, server_put_job, copy, free);
}

#define S(KIND, FIELD) STORE_COL(KIND, struct gh_mcp_server_row, FIELD)
static const struct store_col server_cols[] = {
	S(TEXT, name), S(TEXT, transport), S(TEXT, state), S(TEXT, last_error),
	S(INT, next_retry_at), S(TEXT, session), S(TEXT, protocol_version),
	S(TEXT, server_info), S(INT, tools), S(INT, connected_at), S(INT, updated_at),
};
#undef S

static int server_from(struct store_row *sr, struct gh_mcp_server_row *r)
{
	memset(r, 0, sizeof(*r));
	store_cols_read(sr, server_cols, GH_ARRAY_LEN(server_cols), r);
	return 0;
}

STORE_EACH(server, struct gh_mcp_server_row, server_from, STORE_NO_CLEAR, 0)

enum gh_code gh_store_mcp_server_list(struct gh_store *s,
				      int (*fn)(void *ud, const struct gh_mcp_server_row *r),
				      void *ud, struct gh_err *e)
{
	struct server_each x = {fn, ud};

	return store_read(s, "SELECT name, transport, state, coalesce(last_error, ''), "
			     "coalesce(next_retry_at, 0), coalesce(session, ''), "
			     "coalesce(protocol_version, ''), coalesce(server_info, ''), "
			     "tools, coalesce(connected_at, 0), updated_at "
			     "FROM mcp_servers ORDER BY name",
			  NULL, 0, 0, server_each_row, &x, NULL, "listing MCP servers", e);
}
