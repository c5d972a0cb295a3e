/*
 * store_copy.c - a SQLite gatehouse database copied into an empty
 * PostgreSQL one; see store_copy.h.
 *
 * The plan (the tables, their columns, the order their foreign keys need)
 * is read from the SQLite schema inside the read transaction the rows are
 * read in, and checked against PostgreSQL's inside the transaction that
 * writes them: one store_write job on the target, whose every table is
 * locked first. Each table's rows stream from one SQLite statement into
 * one COPY FROM STDIN, in COPY's text format.
 *
 * Threading: runs on the calling thread, holding a reader of the source
 * and (through store_write) the target's writer for the whole copy.
 */
#include "store_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "embed.h"
#include "pg.h"
#include "store_int.h"
#include "util.h"

#define COPY_COLS_MAX 64
#define COPY_NAME_MAX 64
#define COPY_PARENTS_MAX 8
#define COPY_FLUSH ((size_t)1 << 20)      /* COPY text sent at a time */
#define COPY_ROW_MAX ((size_t)256 << 20)  /* one row's COPY text at most */
#define COPY_PROGRESS_ROWS 250000
#define COPY_SQL_MAX 16384                /* a table's SELECT or COPY statement */

enum col_kind { COL_TEXT, COL_BYTEA };

/* A table to copy: its columns as SQLite lists them (the COPY names them
 * in that order), each one's kind on PostgreSQL, and the tables its
 * foreign keys reference. */
struct copy_table {
	char name[COPY_NAME_MAX];
	int ncols;
	char cols[COPY_COLS_MAX][COPY_NAME_MAX];
	enum col_kind kind[COPY_COLS_MAX];
	int nparents;
	char parents[COPY_PARENTS_MAX][COPY_NAME_MAX];
	int placed;
};

/* Every table to copy, and order: parents before their children. */
struct copy_plan {
	struct copy_table t[GH_STORE_COPY_TABLES_MAX];
	size_t n;
	size_t order[GH_STORE_COPY_TABLES_MAX];
};

int gh_store_copy_sqlite_only(const char *table)
{
	return !strncmp(table, "sqlite_", 7) || !strncmp(table, "memories_fts", 12) ||
	       !strcmp(table, "audit_postings") || !strcmp(table, "audit_index_state");
}

static int copied(const char *table)
{
	return !gh_store_copy_sqlite_only(table) && strcmp(table, "schema_migrations");
}

/* "name" with its quotes doubled, appended to b. */
static int put_ident(struct gh_buf *b, const char *name)
{
	const char *p;

	if (gh_buf_putc(b, '"') != GH_BUF_OK)
		return -1;
	for (p = name; *p; p++)
		if (gh_buf_putc(b, *p) != GH_BUF_OK || (*p == '"' && gh_buf_putc(b, '"')))
			return -1;
	return gh_buf_putc(b, '"') == GH_BUF_OK ? 0 : -1;
}

/* Runs sql (built for this call) on c for its effect. */
static enum gh_code run_once(struct store_conn *c, const char *sql, const char *what,
			     struct gh_err *e)
{
	return store_rows_once(c, sql, NULL, 0, 0, store_row_none, NULL, NULL, what, e);
}

/* ------------------------------------------------------------ the plan */

/* A name from a schema, or NULL (the row is damaged) when it does not
 * fit a plan's name. */
static const char *col_name(struct store_row *r, int i)
{
	const char *v = store_col_text(r, i);

	return v && v[0] && strlen(v) < COPY_NAME_MAX ? v : NULL;
}

static int plan_table_row(struct store_row *r, void *ud)
{
	struct copy_plan *p = ud;
	const char *name = col_name(r, 0);

	if (!name)
		return -1;
	if (!copied(name))
		return 0;
	if (p->n == GH_STORE_COPY_TABLES_MAX)
		return -1;
	gh_strlcpy(p->t[p->n++].name, name, COPY_NAME_MAX);
	return 0;
}

static int plan_col_row(struct store_row *r, void *ud)
{
	struct copy_table *t = ud;
	const char *name = col_name(r, 0);

	if (!name || t->ncols == COPY_COLS_MAX)
		return -1;
	gh_strlcpy(t->cols[t->ncols++], name, COPY_NAME_MAX);
	return 0;
}

static int plan_parent_row(struct store_row *r, void *ud)
{
	struct copy_table *t = ud;
	const char *name = col_name(r, 0);

	if (!name || t->nparents == COPY_PARENTS_MAX)
		return -1;
	if (strcmp(name, t->name))  /* a table referencing itself needs no order */
		gh_strlcpy(t->parents[t->nparents++], name, COPY_NAME_MAX);
	return 0;
}

static struct copy_table *plan_find(struct copy_plan *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (!strcmp(p->t[i].name, name))
			return &p->t[i];
	return NULL;
}

/* Orders the plan so that every table comes after those its foreign keys
 * reference (which the copy's target checks row by row). */
static enum gh_code plan_order(struct copy_plan *p, struct gh_err *e)
{
	size_t k = 0, i;
	int j;

	while (k < p->n) {
		size_t before = k;

		for (i = 0; i < p->n; i++) {
			struct copy_table *t = &p->t[i];
			int ready = !t->placed;

			for (j = 0; ready && j < t->nparents; j++) {
				struct copy_table *up = plan_find(p, t->parents[j]);

				ready = !up || up->placed;
			}
			if (ready) {
				t->placed = 1;
				p->order[k++] = i;
			}
		}
		if (k == before) {
			for (i = 0; p->t[i].placed; i++)
				;
			return gh_err_set(e, GH_E_IO, "copy: the foreign keys of the source's tables "
					  "form a cycle (table %s)", p->t[i].name);
		}
	}
	return GH_OK;
}

/* The source's tables, columns and foreign keys, read on c (SQLite). */
static enum gh_code plan_read(struct store_conn *c, struct copy_plan *p, struct gh_err *e)
{
	enum gh_code rc;
	size_t i;

	/* sqlite-only: the plan comes from the SQLite schema */
	rc = store_rows(c, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name",
			NULL, 0, 0, plan_table_row, p, NULL, "copy: the source's tables", e);
	if (rc != GH_OK)
		return rc;
	for (i = 0; i < p->n; i++) {
		struct copy_table *t = &p->t[i];
		struct store_arg a[] = {STORE_TEXT(t->name)};

		/* sqlite-only */
		rc = store_rows(c, "SELECT name FROM pragma_table_info(?) ORDER BY cid", a, 1, 0,
				plan_col_row, t, NULL, "copy: the source's columns", e);
		if (rc != GH_OK)
			return rc;
		/* sqlite-only */
		rc = store_rows(c, "SELECT DISTINCT \"table\" FROM pragma_foreign_key_list(?) "
				   "ORDER BY 1",
				a, 1, 0, plan_parent_row, t, NULL, "copy: the source's foreign keys",
				e);
		if (rc != GH_OK)
			return rc;
	}
	return plan_order(p, e);
}

/* ------------------------------------------------ the target's schema */

/* Table names read into a list (the target's tables). */
struct name_list {
	char (*v)[COPY_NAME_MAX];
	size_t n, cap;
};

static int name_row(struct store_row *r, void *ud)
{
	struct name_list *l = ud;
	const char *name = col_name(r, 0);

	if (!name || l->n == l->cap)
		return -1;
	gh_strlcpy(l->v[l->n++], name, COPY_NAME_MAX);
	return 0;
}

static const char SQL_PG_TABLES[] =
	"SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
	"AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations' ORDER BY table_name";

/* Every table of the target's schema but schema_migrations. */
static enum gh_code target_tables(struct store_conn *c, struct name_list *l, struct gh_err *e)
{
	l->n = 0;
	return store_rows(c, SQL_PG_TABLES, NULL, 0, 0, name_row, l, NULL,
			  "copy: the target's tables", e);
}

/* Names the tables of l holding rows into e (GH_E_CONFLICT), or GH_OK
 * when none does. */
static enum gh_code tables_empty(struct store_conn *c, const struct name_list *l,
				 struct gh_err *e)
{
	char held[400] = "";
	size_t i, at = 0, nheld = 0;
	struct gh_buf q;
	enum gh_code rc = GH_OK;

	gh_buf_init(&q, COPY_SQL_MAX);
	for (i = 0; i < l->n; i++) {
		int n = 0;

		gh_buf_reset(&q);
		if (gh_buf_puts(&q, "SELECT 1 FROM ") != GH_BUF_OK || put_ident(&q, l->v[i]) ||
		    gh_buf_puts(&q, " LIMIT 1") != GH_BUF_OK) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		rc = store_rows_once(c, q.data, NULL, 0, 1, store_row_none, NULL, &n,
				     "copy: is the target empty", e);
		if (rc != GH_OK)
			goto out;
		if (n && at + 1 < sizeof(held)) {
			int w = snprintf(held + at, sizeof(held) - at, "%s%s", nheld ? ", " : "",
					 l->v[i]);

			at = w < 0 ? at : at + (size_t)w;
		}
		nheld += (size_t)n;
	}
	if (nheld)
		rc = gh_err_set(e, GH_E_CONFLICT, "the target database already holds gatehouse "
				"data (rows in %s): migrate copies into an empty database only, and "
				"has written nothing", held);
out:
	gh_buf_free(&q);
	return rc;
}

enum gh_code gh_store_copy_target_empty(struct gh_store *to, struct gh_err *e)
{
	char names[GH_STORE_COPY_TABLES_MAX * 2][COPY_NAME_MAX];
	struct name_list l = {names, 0, GH_ARRAY_LEN(names)};
	struct store_conn *c;
	enum gh_code rc;

	if (!store_is_pg(to))
		return gh_err_set(e, GH_E_INTERNAL, "copy: the target is not PostgreSQL");
	c = store_reader_now(to);
	rc = target_tables(c, &l, e);
	if (rc == GH_OK)
		rc = tables_empty(c, &l, e);
	store_reader_put(to, c);
	return rc;
}

/* A table's columns on the target, and what kind of value each takes. */
struct target_cols {
	int n;
	char name[COPY_COLS_MAX][COPY_NAME_MAX];
	enum col_kind kind[COPY_COLS_MAX];
};

static int target_col_row(struct store_row *r, void *ud)
{
	struct target_cols *t = ud;
	const char *name = col_name(r, 0), *type = store_col_text(r, 1);

	if (!name || !type || t->n == COPY_COLS_MAX)
		return -1;
	gh_strlcpy(t->name[t->n], name, COPY_NAME_MAX);
	t->kind[t->n++] = !strcmp(type, "bytea") ? COL_BYTEA : COL_TEXT;
	return 0;
}

/* Columns a row is given (generated ones compute themselves: memory's
 * text search document). */
static const char SQL_PG_COLUMNS[] =
	"SELECT column_name, data_type FROM information_schema.columns "
	"WHERE table_schema = current_schema() AND table_name = ? AND is_generated = 'NEVER' "
	"ORDER BY ordinal_position";

/* Checks that table t has the same columns on the target as on the
 * source, and sets the kind of each. */
static enum gh_code plan_check(struct store_conn *w, struct copy_table *t, struct gh_err *e)
{
	struct target_cols tc;
	enum gh_code rc;
	int i, j;

	memset(&tc, 0, sizeof(tc));
	rc = store_rows(w, SQL_PG_COLUMNS, STORE_ARGS(STORE_TEXT(t->name)), 0, target_col_row, &tc,
			NULL, "copy: the target's columns", e);
	if (rc != GH_OK)
		return rc;
	for (i = 0; i < t->ncols; i++) {
		for (j = 0; j < tc.n && strcmp(tc.name[j], t->cols[i]); j++)
			;
		if (j == tc.n)
			return gh_err_set(e, GH_E_IO, "copy: table %s: the source has column %s, "
					  "which the PostgreSQL schema lacks (are both at this "
					  "gatehouse's newest schema?)", t->name, t->cols[i]);
		t->kind[i] = tc.kind[j];
	}
	for (j = 0; j < tc.n; j++) {
		for (i = 0; i < t->ncols && strcmp(tc.name[j], t->cols[i]); i++)
			;
		if (i == t->ncols)
			return gh_err_set(e, GH_E_IO, "copy: table %s: the PostgreSQL schema has "
					  "column %s, which the source lacks (are both at this "
					  "gatehouse's newest schema?)", t->name, tc.name[j]);
	}
	return GH_OK;
}

/* ------------------------------------------------------------ the rows */

/* One table's rows on their way: encoded into b (COPY text), sent a
 * megabyte at a time. An error stops the read with rc and e set. */
struct copy_rows {
	struct store_conn *w;
	const struct copy_table *t;
	struct gh_store_copy_table *out;
	struct gh_store_copy_report *rep;
	gh_store_copy_progress_fn progress;
	void *ud;
	struct gh_buf b;
	enum gh_code rc;
	struct gh_err *e;
	int64_t t0;                     /* when the table's copy began */
};

/* n bytes of text, with COPY's four escapes (backslash, newline, carriage
 * return, tab). */
static int put_text(struct gh_buf *b, const unsigned char *p, size_t n)
{
	size_t i, from = 0;

	for (i = 0; i < n; i++) {
		const char *esc;

		switch (p[i]) {
		case '\\': esc = "\\\\"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default: continue;
		}
		if (gh_buf_append(b, p + from, i - from) != GH_BUF_OK ||
		    gh_buf_append(b, esc, 2) != GH_BUF_OK)
			return -1;
		from = i + 1;
	}
	return gh_buf_append(b, p + from, n - from) == GH_BUF_OK ? 0 : -1;
}

/* n bytes as bytea's hex input, its backslash escaped for COPY. */
static int put_hex(struct gh_buf *b, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char chunk[512];
	size_t i, k = 0;

	if (gh_buf_append(b, "\\\\x", 3) != GH_BUF_OK)
		return -1;
	for (i = 0; i < n; i++) {
		chunk[k++] = digits[p[i] >> 4];
		chunk[k++] = digits[p[i] & 15];
		if (k == sizeof(chunk)) {
			if (gh_buf_append(b, chunk, k) != GH_BUF_OK)
				return -1;
			k = 0;
		}
	}
	return gh_buf_append(b, chunk, k) == GH_BUF_OK ? 0 : -1;
}

static enum gh_code copy_send(struct copy_rows *x)
{
	enum gh_code rc;

	rc = gh_pg_copy_put(x->w->pg, x->b.data, x->b.len, "copy", x->e);
	x->rep->bytes += (int64_t)x->b.len;
	gh_buf_reset(&x->b);
	return rc;
}

static int copy_row(struct store_row *r, void *ud)
{
	struct copy_rows *x = ud;
	const struct copy_table *t = x->t;
	int i, bad = 0;

	for (i = 0; i < t->ncols && !bad; i++) {
		const unsigned char *v;
		size_t n;

		if (i && gh_buf_putc(&x->b, '\t') != GH_BUF_OK) {
			bad = 1;
			break;
		}
		if (store_col_isnull(r, i)) {
			bad = gh_buf_append(&x->b, "\\N", 2) != GH_BUF_OK;
			continue;
		}
		/* an integer reads as its decimal text, which PostgreSQL parses
		 * back: nothing is converted on the way */
		v = store_col_blob(r, i, &n);
		bad = t->kind[i] == COL_BYTEA ? put_hex(&x->b, v, n) : put_text(&x->b, v, n);
	}
	if (bad || gh_buf_putc(&x->b, '\n') != GH_BUF_OK) {
		x->rc = gh_err_set(x->e, GH_E_TOOBIG, "copy: table %s: row %lld cannot be sent (over "
				   "%zu MiB as COPY text, or out of memory)", t->name,
				   (long long)x->out->rows + 1, COPY_ROW_MAX >> 20);
		return 1;
	}
	x->out->rows++;
	if (x->b.len >= COPY_FLUSH && (x->rc = copy_send(x)) != GH_OK)
		return 1;
	if (x->progress && x->out->rows % COPY_PROGRESS_ROWS == 0) {
		x->out->seconds = (double)(gh_mono_ns() - x->t0) / 1e9;
		x->progress(x->ud, x->out, 0);
	}
	return 0;
}

/* The statements of one table's copy: SELECT on the source, COPY on the
 * target, naming the same columns in the same order. */
static int copy_sql(const struct copy_table *t, struct gh_buf *sel, struct gh_buf *cp)
{
	int i, bad = gh_buf_puts(sel, "SELECT ") != GH_BUF_OK ||
		     gh_buf_puts(cp, "COPY ") != GH_BUF_OK || put_ident(cp, t->name) ||
		     gh_buf_puts(cp, " (") != GH_BUF_OK;

	for (i = 0; !bad && i < t->ncols; i++)
		bad = (i && (gh_buf_puts(sel, ", ") != GH_BUF_OK ||
			     gh_buf_puts(cp, ", ") != GH_BUF_OK)) ||
		      put_ident(sel, t->cols[i]) || put_ident(cp, t->cols[i]);
	bad = bad || gh_buf_puts(sel, " FROM ") != GH_BUF_OK || put_ident(sel, t->name) ||
	      gh_buf_puts(cp, ") FROM STDIN") != GH_BUF_OK;
	return bad ? -1 : 0;
}

/* The secondary indexes of a table (those no constraint owns): dropped
 * before its rows go in and made again after, which PostgreSQL does in
 * one sorted pass per index instead of one insertion per row and index. */
#define COPY_INDEXES_MAX 32
#define COPY_INDEXDEF_MAX 1024

struct index_list {
	int n;
	char name[COPY_INDEXES_MAX][COPY_NAME_MAX];
	char def[COPY_INDEXES_MAX][COPY_INDEXDEF_MAX];
};

static int index_row(struct store_row *r, void *ud)
{
	struct index_list *l = ud;
	const char *name = col_name(r, 0), *def = store_col_text(r, 1);

	if (!name || !def || strlen(def) >= COPY_INDEXDEF_MAX || l->n == COPY_INDEXES_MAX)
		return -1;
	gh_strlcpy(l->name[l->n], name, COPY_NAME_MAX);
	gh_strlcpy(l->def[l->n++], def, COPY_INDEXDEF_MAX);
	return 0;
}

static const char SQL_PG_INDEXES[] =
	"SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x "
	"JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
	"JOIN pg_namespace n ON n.oid = t.relnamespace "
	"WHERE n.nspname = current_schema() AND t.relname = ? "
	"AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) "
	"ORDER BY i.relname";

/* Reads table's secondary indexes into l and drops them (inside the
 * copy's transaction: a failed copy rolls the drop back too). */
static enum gh_code indexes_drop(struct store_conn *w, const char *table,
				 struct index_list *l, struct gh_err *e)
{
	struct gh_buf q;
	enum gh_code rc;
	int i;

	l->n = 0;
	rc = store_rows(w, SQL_PG_INDEXES, STORE_ARGS(STORE_TEXT(table)), 0, index_row, l, NULL,
			"copy: the target's indexes", e);
	gh_buf_init(&q, COPY_SQL_MAX);
	for (i = 0; rc == GH_OK && i < l->n; i++) {
		gh_buf_reset(&q);
		if (gh_buf_puts(&q, "DROP INDEX ") != GH_BUF_OK || put_ident(&q, l->name[i]))
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		else
			rc = run_once(w, q.data, "copy: dropping an index for the copy", e);
	}
	gh_buf_free(&q);
	return rc;
}

/* Makes the indexes indexes_drop dropped again, from their definitions. */
static enum gh_code indexes_make(struct store_conn *w, const struct index_list *l,
				 struct gh_err *e)
{
	enum gh_code rc = GH_OK;
	int i;

	for (i = 0; rc == GH_OK && i < l->n; i++)
		rc = run_once(w, l->def[i], "copy: making an index again", e);
	return rc;
}

/* Copies table t from src into the target's open transaction on w. */
static enum gh_code copy_table(struct store_conn *src, struct store_conn *w,
			       const struct copy_table *t, struct gh_store_copy_table *out,
			       struct gh_store_copy_report *rep, gh_store_copy_progress_fn progress,
			       void *ud, struct gh_err *e)
{
	struct copy_rows x;
	struct index_list *idx = NULL;
	struct gh_buf sel, cp;
	char what[COPY_NAME_MAX + 16];
	int64_t t0 = gh_mono_ns(), taken = 0;
	enum gh_code rc;

	memset(&x, 0, sizeof(x));
	x.w = w;
	x.t = t;
	x.out = out;
	x.rep = rep;
	x.progress = progress;
	x.ud = ud;
	x.e = e;
	x.t0 = t0;
	gh_buf_init(&x.b, COPY_FLUSH + COPY_ROW_MAX);
	gh_buf_init(&sel, COPY_SQL_MAX);
	gh_buf_init(&cp, COPY_SQL_MAX);
	snprintf(what, sizeof(what), "copy: table %s", t->name);
	if (copy_sql(t, &sel, &cp) != 0) {
		rc = gh_err_set(e, GH_E_INTERNAL, "%s: its statement is too long", what);
		goto out;
	}
	if (!(idx = calloc(1, sizeof(*idx)))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = indexes_drop(w, t->name, idx, e)) != GH_OK ||
	    (rc = gh_pg_copy_begin(w->pg, cp.data, what, e)) != GH_OK)
		goto out;
	rc = store_rows_once(src, sel.data, NULL, 0, 0, copy_row, &x, NULL, what, e);
	if (rc == GH_OK)
		rc = x.rc;
	if (rc == GH_OK && x.b.len)
		rc = copy_send(&x);
	if (rc != GH_OK) {
		/* the COPY is ended before anything else runs on w; the
		 * transaction rolls it back */
		struct gh_err ignore;

		gh_pg_copy_end(w->pg, "the source could not be read", what, NULL, &ignore);
		goto out;
	}
	if ((rc = gh_pg_copy_end(w->pg, NULL, what, &taken, e)) != GH_OK)
		goto out;
	if (taken != out->rows) {
		rc = gh_err_set(e, GH_E_IO, "%s: %lld rows sent, PostgreSQL took %lld", what,
				(long long)out->rows, (long long)taken);
		goto out;
	}
	if ((rc = indexes_make(w, idx, e)) != GH_OK)
		goto out;
	rep->rows += out->rows;
	out->seconds = (double)(gh_mono_ns() - t0) / 1e9;
	if (progress)
		progress(ud, out, 1);
out:
	free(idx);
	gh_buf_free(&x.b);
	gh_buf_free(&sel);
	gh_buf_free(&cp);
	return rc;
}

/* ------------------------------------------------------- identities */

/* An identity column: its table and name. */
struct ident_col {
	char table[COPY_NAME_MAX], col[COPY_NAME_MAX];
};

struct ident_list {
	struct ident_col v[GH_STORE_COPY_TABLES_MAX];
	size_t n;
};

static int ident_row(struct store_row *r, void *ud)
{
	struct ident_list *l = ud;
	const char *t = col_name(r, 0), *c = col_name(r, 1);

	if (!t || !c || l->n == GH_ARRAY_LEN(l->v))
		return -1;
	gh_strlcpy(l->v[l->n].table, t, COPY_NAME_MAX);
	gh_strlcpy(l->v[l->n++].col, c, COPY_NAME_MAX);
	return 0;
}

static const char SQL_PG_IDENTITIES[] =
	"SELECT table_name, column_name FROM information_schema.columns "
	"WHERE table_schema = current_schema() "
	"AND (is_identity = 'YES' OR column_default LIKE 'nextval(%') "
	"ORDER BY table_name, column_name";

/* Sets the sequence behind every identity (or serial) column so that the
 * next row drawn gets the largest id copied plus one: rows inserted after
 * the copy do not collide with copied ones. */
static enum gh_code identities_advance(struct store_conn *w, int *n, struct gh_err *e)
{
	struct ident_list l;
	struct gh_buf q, name;
	enum gh_code rc;
	size_t i;

	*n = 0;
	memset(&l, 0, sizeof(l));
	rc = store_rows(w, SQL_PG_IDENTITIES, NULL, 0, 0, ident_row, &l, NULL,
			"copy: the target's identity columns", e);
	if (rc != GH_OK)
		return rc;
	gh_buf_init(&q, COPY_SQL_MAX);
	gh_buf_init(&name, COPY_SQL_MAX);
	for (i = 0; i < l.n && rc == GH_OK; i++) {
		gh_buf_reset(&q);
		gh_buf_reset(&name);
		if (put_ident(&name, l.v[i].table) ||
		    gh_buf_puts(&q, "SELECT setval(pg_get_serial_sequence(?, ?), "
				    "coalesce(max(") != GH_BUF_OK ||
		    put_ident(&q, l.v[i].col) ||
		    gh_buf_puts(&q, "), 0) + 1, false) FROM ") != GH_BUF_OK ||
		    put_ident(&q, l.v[i].table)) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			break;
		}
		rc = store_rows_once(w, q.data,
				     STORE_ARGS(STORE_TEXT(name.data), STORE_TEXT(l.v[i].col)), 0,
				     store_row_none, NULL, NULL, "copy: advancing an identity", e);
		if (rc == GH_OK)
			++*n;
	}
	gh_buf_free(&q);
	gh_buf_free(&name);
	return rc;
}

/* ------------------------------------------------------------ the copy */

struct copy_run {
	struct store_conn *src;
	struct copy_plan *plan;
	struct gh_store_copy_report *rep;
	gh_store_copy_progress_fn progress;
	void *ud;
};

/* Locks every table of l against writers (readers go on) for the rest of
 * the transaction, waiting at most a few seconds for those writing now. */
static enum gh_code lock_tables(struct store_conn *w, const struct name_list *l,
				struct gh_err *e)
{
	struct gh_buf q;
	enum gh_code rc;
	size_t i;
	int bad;

	if (!l->n)
		return GH_OK;
	gh_buf_init(&q, COPY_SQL_MAX);
	bad = gh_buf_puts(&q, "LOCK TABLE ") != GH_BUF_OK;
	for (i = 0; !bad && i < l->n; i++)
		bad = (i && gh_buf_puts(&q, ", ") != GH_BUF_OK) || put_ident(&q, l->v[i]);
	bad = bad || gh_buf_puts(&q, " IN EXCLUSIVE MODE") != GH_BUF_OK;
	rc = bad ? gh_err_set(e, GH_E_NOMEM, "out of memory")
		 : run_once(w, "SET LOCAL lock_timeout = 10000", "copy: lock timeout", e);
	if (rc == GH_OK && (rc = run_once(w, q.data, "copy: locking the target's tables", e)) ==
			   GH_E_IO && strstr(e->msg, "lock timeout"))
		rc = gh_err_set(e, GH_E_CONFLICT, "copy: the target's tables stayed in use for 10 s: "
				"is a gatehouse running on the target database?");
	gh_buf_free(&q);
	return rc;
}

static enum gh_code copy_job(struct gh_store *s, struct store_conn *w, void *arg,
			     struct gh_err *e)
{
	struct copy_run *x = arg;
	struct copy_plan *p = x->plan;
	char names[GH_STORE_COPY_TABLES_MAX * 2][COPY_NAME_MAX];
	struct name_list l = {names, 0, GH_ARRAY_LEN(names)};
	enum gh_code rc;
	size_t i, k;

	(void)s;
	/* one statement per table may run for minutes; indexes are built
	 * with more memory than a session's default */
	if ((rc = run_once(w, "SET LOCAL statement_timeout = 0", "copy: statement timeout", e)) !=
		    GH_OK ||
	    (rc = run_once(w, "SET LOCAL maintenance_work_mem = '256MB'", "copy: index memory",
			   e)) != GH_OK ||
	    (rc = target_tables(w, &l, e)) != GH_OK || (rc = lock_tables(w, &l, e)) != GH_OK ||
	    (rc = run_once(w, "SET LOCAL lock_timeout = 0", "copy: lock timeout", e)) != GH_OK)
		return rc;
	/* the tables are locked: what is empty now stays so until the commit */
	if ((rc = tables_empty(w, &l, e)) != GH_OK)
		return rc;
	for (i = 0; i < p->n; i++) {
		for (k = 0; k < l.n && strcmp(l.v[k], p->t[i].name); k++)
			;
		if (k == l.n)
			return gh_err_set(e, GH_E_IO, "copy: the PostgreSQL schema has no table %s, "
					  "which the source has (are both at this gatehouse's newest "
					  "schema?)", p->t[i].name);
		if ((rc = plan_check(w, &p->t[i], e)) != GH_OK)
			return rc;
	}
	for (i = 0; i < p->n; i++) {
		const struct copy_table *t = &p->t[p->order[i]];
		struct gh_store_copy_table *out = &x->rep->t[i];

		gh_strlcpy(out->name, t->name, sizeof(out->name));
		x->rep->n = i + 1;
		rc = copy_table(x->src, w, t, out, x->rep, x->progress, x->ud, e);
		if (rc != GH_OK)
			return rc;
	}
	return identities_advance(w, &x->rep->identities, e);
}

enum gh_code gh_store_copy(struct gh_store *from, struct gh_store *to,
			   gh_store_copy_progress_fn progress, void *ud,
			   struct gh_store_copy_report *rep, struct gh_err *e)
{
	struct copy_run x = {NULL, NULL, rep, progress, ud};
	int64_t t0 = gh_mono_ns();
	enum gh_code rc;
	int began = 0;

	memset(rep, 0, sizeof(*rep));
	if (store_is_pg(from) || !store_is_pg(to) || to->o.readonly || to->signer)
		return gh_err_set(e, GH_E_INTERNAL, "copy: from a SQLite store into a writable "
				  "PostgreSQL one without a signer");
	if (!(x.plan = calloc(1, sizeof(*x.plan))))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	/* one snapshot of the source for the plan and every table */
	x.src = store_reader_now(from);
	if (store_read_begin(x.src, e) != 0) {
		rc = e ? e->code : GH_E_IO;
		goto out;
	}
	began = 1;
	if ((rc = plan_read(x.src, x.plan, e)) != GH_OK)
		goto out;
	rc = store_write(to, copy_job, &x, e);
	rep->seconds = (double)(gh_mono_ns() - t0) / 1e9;
	if (rc != GH_OK) {
		/* rolled back: nothing of it is in the target */
		rep->n = 0;
		rep->rows = 0;
	}
out:
	if (began)
		store_read_end(x.src);
	store_reader_put(from, x.src);
	free(x.plan);
	return rc;
}

enum gh_code gh_store_copy_count(struct gh_store *to, struct gh_store_copy_report *rep,
				 struct gh_err *e)
{
	struct store_conn *c = store_reader_now(to);
	struct gh_buf q;
	enum gh_code rc = GH_OK;
	size_t i;

	gh_buf_init(&q, COPY_SQL_MAX);
	for (i = 0; i < rep->n && rc == GH_OK; i++) {
		gh_buf_reset(&q);
		if (gh_buf_puts(&q, "SELECT count(*) FROM ") != GH_BUF_OK ||
		    put_ident(&q, rep->t[i].name)) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			break;
		}
		rc = store_rows_once(c, q.data, NULL, 0, 1, store_row_int, &rep->t[i].target_rows,
				     NULL, "copy: counting the target's rows", e);
	}
	gh_buf_free(&q);
	store_reader_put(to, c);
	return rc;
}

/* ------------------------------------------------------ the source */

/* The source's schema_migrations rows checked against this build's. */
struct mig_check {
	int rows, bad, bad_version;
	char bad_name[COPY_NAME_MAX * 2], want[COPY_NAME_MAX * 2];
};

static int mig_row(struct store_row *r, void *ud)
{
	struct mig_check *m = ud;
	int64_t v = store_col_int(r, 0);
	const char *name = store_col_text(r, 1);
	const struct gh_embedded *em;

	m->rows++;
	for (em = gh_embedded_migrations; em->name; em++)
		if (store_migration_version(em->name) == v)
			break;
	if (!em->name || !name || strcmp(name, em->name)) {
		m->bad = 1;
		m->bad_version = (int)v;
		gh_strlcpy(m->bad_name, name ? name : "", sizeof(m->bad_name));
		gh_strlcpy(m->want, em->name ? em->name : "none", sizeof(m->want));
		return 1;
	}
	return 0;
}

enum gh_code gh_store_copy_source_check(struct gh_store *from, const char *path,
					struct gh_err *e)
{
	struct mig_check m;
	enum gh_code rc;
	int have = gh_store_schema_version(from), latest = gh_store_schema_latest();

	if (store_is_pg(from))
		return gh_err_set(e, GH_E_INTERNAL, "copy: the source is not SQLite");
	memset(&m, 0, sizeof(m));
	rc = store_read(from, "SELECT version, name FROM schema_migrations ORDER BY version",
			NULL, 0, 0, mig_row, &m, NULL, "copy: the source's migrations", e);
	if (rc != GH_OK)
		return rc;
	if (m.bad)
		return gh_err_set(e, GH_E_BADREQ, "%s is not a gatehouse database: its migration %d "
				  "is \"%s\", gatehouse's is \"%s\"", path, m.bad_version,
				  m.bad_name, m.want);
	if (have < latest || m.rows != have)
		return gh_err_set(e, GH_E_IO, "%s is at schema version %d, this gatehouse's is %d: "
				  "bring it up to date first with gatehouse migrate --config FILE "
				  "--db %s (migrate --from never writes to its source)", path, have,
				  latest, path);
	return GH_OK;
}
