/*
 * store_sqlite.c - the statement and row layer of store_int.h on SQLite:
 * cached prepared statements, parameters, step loops and the column
 * accessors row callbacks read rows with. The domain files (store_*.c)
 * reach SQLite only through these. A PostgreSQL connection or row is
 * handed to store_pg.c's counterparts.
 *
 * Threading: a connection's statements are used by the one thread that
 * holds the connection (store_reader or the writer).
 */
#include "store_sqlite.h"

#include <string.h>

#include "log.h"
#include "store_pg.h"

/* A connection with neither handle: a PostgreSQL reader or writer the pool
 * could not give (pg_err says why). */
static enum gh_code no_conn(struct store_conn *c, const char *what, struct gh_err *e)
{
	if (c->pg_err.code != GH_OK)
		return gh_err_set(e, c->pg_err.code, "%s", c->pg_err.msg);
	return gh_err_set(e, GH_E_UNAVAILABLE, "database: %s: not connected", what);
}

enum gh_code store_fail(struct store_conn *c, const char *what, struct gh_err *e)
{
	int rc;

	if (c && !c->db)
		return no_conn(c, what, e);
	rc = c && c->db ? sqlite3_extended_errcode(c->db) : SQLITE_ERROR;

	if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE)
		return gh_err_set(e, GH_E_CONFLICT, "database: %s: already exists", what);
	return gh_err_set(e, GH_E_IO, "database: %s: %s", what,
			  c && c->db ? sqlite3_errmsg(c->db) : "not open");
}

sqlite3_stmt *store_stmt(struct store_conn *c, const char *sql, struct gh_err *e)
{
	size_t i;
	sqlite3_stmt *st = NULL;

	for (i = 0; i < c->ncache; i++) {
		if (c->cache[i].sql == sql) {
			st = c->cache[i].st;
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return st;
		}
	}
	if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		store_fail(c, "prepare", e);
		gh_error("database: cannot prepare statement: %s", sqlite3_errmsg(c->db));
		return NULL;
	}
	if (c->ncache < STORE_STMT_CACHE) {
		c->cache[c->ncache].sql = sql;
		c->cache[c->ncache].st = st;
		c->ncache++;
	} else {
		/* Cache full: a programming error (more distinct statements
		 * than STORE_STMT_CACHE); fail loudly rather than leak. */
		sqlite3_finalize(st);
		gh_err_set(e, GH_E_INTERNAL, "database: statement cache full");
		return NULL;
	}
	return st;
}

/* Arguments are bound without a copy (SQLITE_STATIC): they are the
 * caller's and live for the whole call, and every statement they are bound
 * to is reset and cleared before the call returns (done_stmt), so no
 * statement keeps a pointer into them. */
int store_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (!s)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Ends a statement's use: no row held, no argument bound. */
static void done_stmt(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

void store_bind_args(sqlite3_stmt *st, const struct store_arg *args, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (args[i].kind == STORE_ARG_INT)
			sqlite3_bind_int64(st, i + 1, args[i].num);
		else if (args[i].kind == STORE_ARG_BLOB)
			sqlite3_bind_blob(st, i + 1, args[i].text, (int)args[i].num,
					  SQLITE_STATIC);
		else
			store_bind_text(st, i + 1, args[i].text);
	}
}

enum gh_code store_exec(struct store_conn *w, const char *sql, const struct store_arg *args,
			int n, const char *what, int *changes, struct gh_err *e)
{
	sqlite3_stmt *st;
	enum gh_code rc = GH_OK;

	if (w->pg)
		return store_pg_exec(w, sql, args, n, what, changes, e);
	if (!w->db)
		return no_conn(w, what, e);
	if (!(st = store_stmt(w, sql, e)))
		return GH_E_IO;
	store_bind_args(st, args, n);
	if (sqlite3_step(st) != SQLITE_DONE)
		rc = store_fail(w, what, e);
	else if (changes)
		*changes = sqlite3_changes(w->db);
	done_stmt(st);
	return rc;
}

enum gh_code store_insert(struct store_conn *w, const char *sql, const struct store_arg *args,
			  int n, const char *what, int64_t *id, struct gh_err *e)
{
	enum gh_code rc;

	if (w->pg)
		return store_pg_insert(w, sql, args, n, what, id, e);
	rc = store_exec(w, sql, args, n, what, NULL, e);
	*id = rc == GH_OK ? sqlite3_last_insert_rowid(w->db) : 0;
	return rc;
}

/* Steps st (args bound) through row, at most max rows; leaves it reset and
 * its arguments cleared. */
static enum gh_code step_rows(struct store_conn *c, sqlite3_stmt *st, int max, store_row_fn row,
			      void *ud, int *nrows, const char *what, struct gh_err *e)
{
	struct store_row sr = {st, NULL, 0, NULL};
	int src = SQLITE_DONE, seen = 0, r = 0;
	enum gh_code rc = GH_OK;

	while ((max <= 0 || seen < max) && (src = sqlite3_step(st)) == SQLITE_ROW) {
		seen++;
		if ((r = row(&sr, ud)) != 0)
			break;
	}
	if (r == STORE_ROW_NOMEM)
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
	else if (r < 0)
		rc = gh_err_set(e, GH_E_IO, "database: %s: a damaged row", what);
	else if (r == 0 && src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, what, e); /* before the reset: its message */
	done_stmt(st);
	if (nrows)
		*nrows = seen;
	return rc;
}

enum gh_code store_rows(struct store_conn *c, const char *sql, const struct store_arg *args,
			int n, int max, store_row_fn row, void *ud, int *nrows, const char *what,
			struct gh_err *e)
{
	sqlite3_stmt *st;

	if (c->pg)
		return store_pg_rows(c, 0, sql, args, n, max, row, ud, nrows, what, e);
	if (nrows)
		*nrows = 0;
	if (!c->db)
		return no_conn(c, what, e);
	if (!(st = store_stmt(c, sql, e)))
		return GH_E_IO;
	store_bind_args(st, args, n);
	return step_rows(c, st, max, row, ud, nrows, what, e);
}

enum gh_code store_rows_once(struct store_conn *c, const char *sql, const struct store_arg *args,
			     int n, int max, store_row_fn row, void *ud, int *nrows,
			     const char *what, struct gh_err *e)
{
	sqlite3_stmt *st = NULL;
	enum gh_code rc;

	if (c->pg)
		return store_pg_rows(c, 1, sql, args, n, max, row, ud, nrows, what, e);
	if (nrows)
		*nrows = 0;
	if (!c->db)
		return no_conn(c, what, e);
	if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK)
		return store_fail(c, what, e);
	store_bind_args(st, args, n);
	rc = step_rows(c, st, max, row, ud, nrows, what, e);
	sqlite3_finalize(st);
	return rc;
}

/* ---------------------------------------------------------- row accessors */

int store_col_count(struct store_row *r)
{
	if (r->res)
		return store_pg_col_count(r);
	return sqlite3_column_count(store_row_stmt(r));
}

int store_col_isnull(struct store_row *r, int i)
{
	if (r->res)
		return store_pg_col_isnull(r, i);
	return sqlite3_column_type(store_row_stmt(r), i) == SQLITE_NULL;
}

const char *store_col_text(struct store_row *r, int i)
{
	if (r->res)
		return store_pg_col_text(r, i);
	return (const char *)sqlite3_column_text(store_row_stmt(r), i);
}

int64_t store_col_int(struct store_row *r, int i)
{
	if (r->res)
		return store_pg_col_int(r, i);
	return sqlite3_column_int64(store_row_stmt(r), i);
}

double store_col_double(struct store_row *r, int i)
{
	if (r->res)
		return store_pg_col_double(r, i);
	return sqlite3_column_double(store_row_stmt(r), i);
}

const void *store_col_blob(struct store_row *r, int i, size_t *len)
{
	sqlite3_stmt *st;
	const void *p;
	int n;

	if (r->res)
		return store_pg_col_blob(r, i, len);
	st = store_row_stmt(r);
	p = sqlite3_column_blob(st, i);
	n = sqlite3_column_bytes(st, i);
	*len = p && n > 0 ? (size_t)n : 0;
	return *len ? p : NULL;
}
