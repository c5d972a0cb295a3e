/*
 * store_pg.c - the statement and row layer of store_int.h on PostgreSQL:
 * statements go through pg.c (SQLite's placeholders rewritten, prepared
 * once per connection), rows are read from the PGresult a statement
 * returns. What a row callback reads is SQLite's view of the value:
 * booleans are 1/0 ("1"/"0" as text), bytea is its bytes.
 *
 * Threading: a connection is used by the one thread that holds it (a
 * reader borrowed from the store, or the writer).
 */
#include "store_pg.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pg.h"

/* PostgreSQL's type oids (pg_type.h) of the columns read differently. */
#define PG_BOOLOID 16
#define PG_BYTEAOID 17

/* The bytea values of a row unescaped so far, one per column at most. */
struct store_pg_bytes {
	int col;
	unsigned char *p;
	size_t len;
	struct store_pg_bytes *next;
};

/* Copies args into libpq's form: a blob with no bytes pointer is NULL, as
 * SQLite binds it. */
static void pg_args(const struct store_arg *args, int n, struct gh_pg_arg *out)
{
	int i;

	for (i = 0; i < n; i++) {
		if (args[i].kind == STORE_ARG_INT)
			out[i] = (struct gh_pg_arg){GH_PG_INT, NULL, args[i].num};
		else if (args[i].kind == STORE_ARG_BLOB && args[i].text)
			out[i] = (struct gh_pg_arg){GH_PG_BYTES, args[i].text, args[i].num};
		else
			out[i] = (struct gh_pg_arg){GH_PG_TEXT, args[i].text, 0};
	}
}

/* Runs sql on c: SQLite's messages for what callers tell apart (a broken
 * unique key is "already exists"). */
static enum gh_code run(struct store_conn *c, int once, const char *sql,
			const struct store_arg *args, int n, const char *what, PGresult **res,
			struct gh_err *e)
{
	struct gh_pg_arg pa[64];
	enum gh_code rc;

	if (n > (int)(sizeof(pa) / sizeof(pa[0])))
		return gh_err_set(e, GH_E_INTERNAL, "database: %s: %d parameters", what, n);
	pg_args(args, n, pa);
	rc = once ? gh_pg_exec_once(c->pg, sql, pa, n, what, res, e)
		  : gh_pg_exec(c->pg, sql, pa, n, what, res, e);
	if (rc == GH_E_CONFLICT)
		gh_err_set(e, GH_E_CONFLICT, "database: %s: already exists", what);
	else if (rc != GH_OK)
		gh_debug("%s", e ? e->msg : "database: a statement failed");
	return rc;
}

enum gh_code store_pg_exec(struct store_conn *w, const char *sql, const struct store_arg *args,
			   int n, const char *what, int *changes, struct gh_err *e)
{
	PGresult *res = NULL;
	enum gh_code rc = run(w, 0, sql, args, n, what, &res, e);

	if (rc == GH_OK && changes)
		*changes = (int)strtol(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return rc;
}

enum gh_code store_pg_insert(struct store_conn *w, const char *sql, const struct store_arg *args,
			     int n, const char *what, int64_t *id, struct gh_err *e)
{
	PGresult *res = NULL;
	enum gh_code rc;

	*id = 0;
	if ((rc = run(w, 0, sql, args, n, what, NULL, e)) != GH_OK)
		return rc;
	/* the identity the insert just drew, on this connection */
	if ((rc = gh_pg_exec(w->pg, "SELECT lastval()", NULL, 0, what, &res, e)) != GH_OK)
		return rc;
	*id = PQntuples(res) == 1 ? gh_pg_int(res, 0, 0, NULL) : 0;
	PQclear(res);
	return GH_OK;
}

static void bytes_free(struct store_row *r)
{
	while (r->bytes) {
		struct store_pg_bytes *b = r->bytes;

		r->bytes = b->next;
		PQfreemem(b->p);
		free(b);
	}
}

enum gh_code store_pg_rows(struct store_conn *c, int once, const char *sql,
			   const struct store_arg *args, int n, int max, store_row_fn row, void *ud,
			   int *nrows, const char *what, struct gh_err *e)
{
	PGresult *res = NULL;
	struct store_row sr;
	int seen = 0, r = 0, total;
	enum gh_code rc;

	if (nrows)
		*nrows = 0;
	if ((rc = run(c, once, sql, args, n, what, &res, e)) != GH_OK)
		return rc;
	total = PQntuples(res);
	memset(&sr, 0, sizeof(sr));
	sr.res = res;
	while ((max <= 0 || seen < max) && seen < total) {
		sr.row = seen++;
		r = row(&sr, ud);
		bytes_free(&sr);
		if (r != 0)
			break;
	}
	PQclear(res);
	if (nrows)
		*nrows = seen;
	if (r == STORE_ROW_NOMEM)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (r < 0)
		return gh_err_set(e, GH_E_IO, "database: %s: a damaged row", what);
	return GH_OK;
}

enum gh_code store_pg_run(struct store_conn *c, const char *sql, struct gh_err *e)
{
	if (!c->pg)
		return gh_err_set(e, c->pg_err.code != GH_OK ? c->pg_err.code : GH_E_UNAVAILABLE,
				  "%s", c->pg_err.code != GH_OK ? c->pg_err.msg
								 : "database: not connected");
	return gh_pg_run(c->pg, sql, sql, e);
}

/* ---------------------------------------------------------- row accessors */

static int in_row(struct store_row *r, int i)
{
	return i >= 0 && i < PQnfields(r->res);
}

int store_pg_col_count(struct store_row *r)
{
	return PQnfields(r->res);
}

int store_pg_col_isnull(struct store_row *r, int i)
{
	return !in_row(r, i) || PQgetisnull(r->res, r->row, i);
}

const char *store_pg_col_text(struct store_row *r, int i)
{
	const char *v;

	if (store_pg_col_isnull(r, i))
		return NULL;
	v = PQgetvalue(r->res, r->row, i);
	if (PQftype(r->res, i) == PG_BOOLOID)
		return v[0] == 't' ? "1" : "0";
	return v;
}

int64_t store_pg_col_int(struct store_row *r, int i)
{
	const char *v = store_pg_col_text(r, i);
	char *end;
	long long n;
	double d;

	if (!v)
		return 0;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (*end != '.' && *end != 'e' && *end != 'E')
		return (int64_t)n; /* SQLite's reading: as far as it is a number */
	/* a real: truncated toward zero and clamped, as SQLite does */
	d = strtod(v, NULL);
	if (isnan(d))
		return 0;
	if (d >= 9223372036854775807.0)
		return INT64_MAX;
	if (d <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)d;
}

double store_pg_col_double(struct store_row *r, int i)
{
	const char *v = store_pg_col_text(r, i);

	return v ? strtod(v, NULL) : 0.0;
}

const void *store_pg_col_blob(struct store_row *r, int i, size_t *len)
{
	struct store_pg_bytes *b;
	const char *v = store_pg_col_text(r, i);

	*len = 0;
	if (!v)
		return NULL;
	if (PQftype(r->res, i) != PG_BYTEAOID) {
		*len = strlen(v);
		return *len ? v : NULL;
	}
	for (b = r->bytes; b; b = b->next)
		if (b->col == i)
			break;
	if (!b) {
		/* unescaped once, owned by the row until the callback returns;
		 * out of memory reads as no bytes (the caller sees a damaged
		 * value, as it would a wrong length) */
		if (!(b = calloc(1, sizeof(*b))))
			return NULL;
		b->p = PQunescapeBytea((const unsigned char *)v, &b->len);
		if (!b->p) {
			free(b);
			return NULL;
		}
		b->col = i;
		b->next = r->bytes;
		r->bytes = b;
	}
	*len = b->len;
	return b->len ? b->p : NULL;
}
