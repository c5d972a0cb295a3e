/*
 * store_pg.h - the PostgreSQL side of the store's statement layer
 * (store_pg.c): what store_int.h's statement and row functions run when the
 * connection (or the row) is PostgreSQL's. Only store.c and store_sqlite.c,
 * which dispatch to them, include this.
 */
#ifndef GH_STORE_PG_H
#define GH_STORE_PG_H

#include "store_int.h"

enum gh_code store_pg_exec(struct store_conn *w, const char *sql, const struct store_arg *args,
			   int n, const char *what, int *changes, struct gh_err *e);
enum gh_code store_pg_insert(struct store_conn *w, const char *sql, const struct store_arg *args,
			     int n, const char *what, int64_t *id, struct gh_err *e);
/* once: sql was built for this call (sent unprepared, never cached). */
enum gh_code store_pg_rows(struct store_conn *c, int once, const char *sql,
			   const struct store_arg *args, int n, int max, store_row_fn row, void *ud,
			   int *nrows, const char *what, struct gh_err *e);
/* Runs sql (no parameters, not prepared) on c: BEGIN, SAVEPOINT, COMMIT. */
enum gh_code store_pg_run(struct store_conn *c, const char *sql, struct gh_err *e);

int store_pg_col_count(struct store_row *r);
int store_pg_col_isnull(struct store_row *r, int i);
const char *store_pg_col_text(struct store_row *r, int i);
int64_t store_pg_col_int(struct store_row *r, int i);
double store_pg_col_double(struct store_row *r, int i);
const void *store_pg_col_blob(struct store_row *r, int i, size_t *len);

#endif
