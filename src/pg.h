/*
 * pg.h - gatehouse's PostgreSQL connections, through libpq.
 *
 *   - URLs (postgres:// or postgresql://) are checked without ever
 *     echoing their password: every message that could hold the URL is
 *     written with the password replaced by "***" (gh_pg_url_redact).
 *   - A bounded pool per process. A connection found broken (the server
 *     restarted, the network dropped) is closed when it is returned and
 *     made again on the next acquire; while the server cannot be reached
 *     an acquire fails at once with GH_E_UNAVAILABLE (a request gets a 503
 *     instead of waiting), and after a failed attempt the next one waits
 *     a short back-off (never longer than a second), so an outage does
 *     not turn every request into a connection attempt.
 *   - Every connection gets a statement timeout, and prepared statements
 *     cached by the address of their SQL literal, as the SQLite store does.
 *   - SQL is written once with SQLite's placeholders (? and ?NNN); the
 *     statement PostgreSQL gets has $N (gh_pg_sql_rewrite). So statements
 *     never use PostgreSQL's own ? operators (jsonb ?, ?| and ?&).
 *   - Migrations run once however many replicas start together: inside
 *     one transaction holding a transaction-level advisory lock.
 *
 * Threading: the pool is thread-safe; a connection is used by the thread
 * that acquired it until it gives it back.
 */
#ifndef GH_PG_H
#define GH_PG_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "err.h"

/* 1 when url names a PostgreSQL database (scheme postgres:// or
 * postgresql://), else 0. */
int gh_pg_is_url(const char *url);

/* GH_OK when libpq accepts url, else GH_E_BADREQ "what: ..." with the
 * password redacted. */
enum gh_code gh_pg_url_check(const char *url, const char *what, struct gh_err *e);

/* url with the password (of the user part, and of a password= parameter)
 * replaced by "***", cut to cap bytes. Always NUL-terminates. */
void gh_pg_url_redact(const char *url, char *out, size_t cap);

/* Rewrites SQLite placeholders in sql to PostgreSQL's: ?NNN becomes $NNN,
 * a bare ? becomes $K, K one more than the largest number given so far
 * (SQLite's rule). Quoted strings, quoted names and comments are copied
 * as they are. *nparams (may be NULL) gets the largest number used.
 * 0, or -1 when out is too small or a number is out of range (1..999). */
int gh_pg_sql_rewrite(const char *sql, char *out, size_t cap, int *nparams);

/* A statement parameter: text (NULL is SQL NULL), an integer, or bytes
 * (bytea, sent in binary). */
struct gh_pg_arg {
	enum { GH_PG_TEXT, GH_PG_INT, GH_PG_BYTES } kind;
	const void *p;
	int64_t num;       /* GH_PG_INT: the value; GH_PG_BYTES: the length */
};

/* One connection outside any pool (for a thread that keeps its own, as
 * LISTEN needs): server notices go to the debug log. GH_E_UNAVAILABLE
 * with the URL redacted when it fails. */
enum gh_code gh_pg_connect(const char *url, int connect_timeout_s, PGconn **out,
			   struct gh_err *e);

struct gh_pg_pool;
struct gh_pg_conn;

struct gh_pg_opts {
	const char *url;               /* borrowed for gh_pg_pool_open only */
	int size;                      /* connections at most (>= 1) */
	int connect_timeout_s;         /* per attempt (libpq's minimum is 2) */
	int statement_timeout_ms;      /* 0: the server's default */
	int acquire_timeout_ms;        /* waiting for a free connection */
};

/* Opens the pool and one connection, so a wrong URL, password or database
 * is reported at start (GH_E_UNAVAILABLE or GH_E_BADREQ, redacted). */
enum gh_code gh_pg_pool_open(const struct gh_pg_opts *o, struct gh_pg_pool **out,
			     struct gh_err *e);
/* Closes every connection; all must have been given back. NULL ok. */
void gh_pg_pool_close(struct gh_pg_pool *p);

/* A connection of the pool, connected. GH_E_UNAVAILABLE when the server
 * cannot be reached (or was not, a moment ago), GH_E_TIMEOUT when every
 * connection stayed busy for acquire_timeout_ms. */
enum gh_code gh_pg_acquire(struct gh_pg_pool *p, struct gh_pg_conn **out, struct gh_err *e);
/* Gives c back; a broken one is closed (made again when next needed), one
 * left inside a transaction is rolled back first. */
void gh_pg_release(struct gh_pg_pool *p, struct gh_pg_conn *c);

/* Counters of the pool. */
struct gh_pg_stats {
	int size, open, busy;
	uint64_t connects, connect_failures, broken;
};
void gh_pg_pool_stats(struct gh_pg_pool *p, struct gh_pg_stats *out);

/* The libpq connection, for what this module does not wrap. */
PGconn *gh_pg_conn_raw(struct gh_pg_conn *c);

/* Runs sql (a string literal: its address keys the prepared statement)
 * with args. *res (may be NULL: then the result is only checked) gets the
 * result, which the caller frees with PQclear. Errors: GH_E_UNAVAILABLE
 * when the connection broke (the statement may or may not have run),
 * GH_E_CONFLICT on a unique or exclusion violation, GH_E_TIMEOUT when
 * the statement timed out, otherwise GH_E_IO "database: what: <message>". */
enum gh_code gh_pg_exec(struct gh_pg_conn *c, const char *sql, const struct gh_pg_arg *args,
			int n, const char *what, PGresult **res, struct gh_err *e);
/* gh_pg_exec for sql built for this call (not a literal): sent with its
 * parameters, never prepared nor cached. */
enum gh_code gh_pg_exec_once(struct gh_pg_conn *c, const char *sql, const struct gh_pg_arg *args,
			     int n, const char *what, PGresult **res, struct gh_err *e);
/* Runs a statement without parameters and not prepared (BEGIN, COMMIT,
 * DDL), with the same error mapping. */
enum gh_code gh_pg_run(struct gh_pg_conn *c, const char *sql, const char *what,
		       struct gh_err *e);

/* COPY ... FROM STDIN on c, in COPY's text format. gh_pg_copy_begin runs
 * sql (a COPY statement built for this call: never prepared); the rows go
 * in with gh_pg_copy_put, any number of bytes at a time (libpq sends them
 * as the socket takes them); gh_pg_copy_end finishes the statement, or
 * aborts it when why is not NULL (the server then rolls the statement back
 * and GH_OK is still returned), and *rows (may be NULL) gets how many rows
 * the server took. Once begun, the copy must be ended, even after a failed
 * put, before c runs anything else. Errors map as gh_pg_exec's; a value
 * the server refuses is named by the message and the COPY line number. */
enum gh_code gh_pg_copy_begin(struct gh_pg_conn *c, const char *sql, const char *what,
			      struct gh_err *e);
enum gh_code gh_pg_copy_put(struct gh_pg_conn *c, const void *data, size_t len,
			    const char *what, struct gh_err *e);
enum gh_code gh_pg_copy_end(struct gh_pg_conn *c, const char *why, const char *what,
			    int64_t *rows, struct gh_err *e);

/* Column col of row of res: text ("" for NULL), integer (0 for NULL or
 * text that is not an integer: *ok, may be NULL, then 0), or bytes (a
 * malloc'd copy of a bytea, *len its length; NULL with *len 0 for NULL,
 * NULL with *len (size_t)-1 when out of memory). */
const char *gh_pg_text(const PGresult *res, int row, int col);
int64_t gh_pg_int(const PGresult *res, int row, int col, int *ok);
unsigned char *gh_pg_bytes(const PGresult *res, int row, int col, size_t *len);

/* One migration: its version (ascending, from 1) and its SQL. */
struct gh_pg_migration {
	int version;
	const char *name;
	const char *sql;
};

/* Applies the migrations above the database's version in one transaction
 * that holds an advisory lock first: replicas starting together apply
 * them once; the others wait and find them applied. *version (may be
 * NULL) gets the version after. A database newer than every migration
 * is refused (GH_E_IO naming both versions). */
enum gh_code gh_pg_migrate(struct gh_pg_conn *c, const struct gh_pg_migration *m, size_t n,
			   int *version, struct gh_err *e);

#endif
