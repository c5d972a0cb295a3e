/*
 * store_audit_index.c - the audit log's filter index in SQLite: the writer
 * indexes each block of rows once it is complete, and queries with filters
 * intersect the postings of indexed blocks before reading any row.
 *
 * Threading as in store.c: the *_step/rebuild functions run on the writer
 * connection inside a write transaction; the query and block reads run on
 * a reader connection inside one read transaction, so the index's next
 * block, its postings and the rows are one snapshot.
 *
 * PostgreSQL keeps no block index (its plain indexes on audit_events
 * answer filtered queries): there no block is ever indexed, so every query
 * takes the SQL path, and the writer's index upkeep does nothing.
 */
#include "store_sqlite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_index.h"
#include "log.h"

#define BLK(seq) ((seq) >> GH_AUDIT_BLOCK_SHIFT)
#define BLK_FIRST(b) ((int64_t)(b) << GH_AUDIT_BLOCK_SHIFT)
#define BLK_LAST(b) (BLK_FIRST((b) + 1) - 1)
#define OFF(seq) ((unsigned)((seq) & (GH_AUDIT_BLOCK_ROWS - 1)))

/* The columns a block's postings are built from, in dim order. */
#define DIM_COLS "seq, key_id, agent_id, thread_id, run_id, tool_name, event, outcome, owner"

enum gh_code store_audit_index_next(struct store_conn *c, int64_t *next, struct gh_err *e)
{
	sqlite3_stmt *st;
	int rc;

	if (!c->db) { /* PostgreSQL: nothing indexed */
		*next = 0;
		return GH_OK;
	}
	if (!(st = store_stmt(c, "SELECT next_blk FROM audit_index_state WHERE id = 1", e)))
		return GH_E_IO;
	rc = sqlite3_step(st);
	*next = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_reset(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_fail(c, "reading the audit index state", e);
	return GH_OK;
}

static enum gh_code set_next(struct store_conn *w, int64_t next, struct gh_err *e)
{
	return store_exec(w, "UPDATE audit_index_state SET next_blk = ? WHERE id = 1",
			  STORE_ARGS(STORE_INT(next)), "updating the audit index state", NULL, e);
}

static struct gh_audit_blockidx *writer_bidx(struct gh_store *s, struct gh_err *e)
{
	if (!s->audit_bidx && !(s->audit_bidx = gh_audit_blockidx_new()))
		gh_err_set(e, GH_E_NOMEM, "out of memory");
	return s->audit_bidx;
}

/* Reads block blk's rows into b; *nrows gets how many there were. */
static enum gh_code collect(struct store_conn *w, int64_t blk, struct gh_audit_blockidx *b,
			    int64_t *nrows, struct gh_err *e)
{
	sqlite3_stmt *st = store_stmt(w, "SELECT " DIM_COLS " FROM audit_events "
					 "WHERE seq BETWEEN ? AND ?", e);
	int src;

	*nrows = 0;
	if (!st)
		return GH_E_IO;
	gh_audit_blockidx_reset(b);
	sqlite3_bind_int64(st, 1, BLK_FIRST(blk));
	sqlite3_bind_int64(st, 2, BLK_LAST(blk));
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		int d;

		for (d = 1; d <= GH_AUDIT_DIM_LAST; d++) {
			const char *v = (const char *)sqlite3_column_text(st, d);
			int n = sqlite3_column_bytes(st, d);

			if (v && n > 0 &&
			    gh_audit_blockidx_add(b, d, v, (size_t)n,
						  OFF(sqlite3_column_int64(st, 0))) != 0) {
				sqlite3_reset(st);
				return gh_err_set(e, GH_E_NOMEM, "out of memory");
			}
		}
		(*nrows)++;
	}
	sqlite3_reset(st);
	if (src != SQLITE_DONE)
		return store_fail(w, "reading audit rows to index", e);
	return GH_OK;
}

/* Writes b as block blk's postings, in key order (appends to the table). */
static enum gh_code write_postings(struct store_conn *w, int64_t blk,
				   struct gh_audit_blockidx *b, struct gh_err *e)
{
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO audit_postings (blk, dim, val, rows) "
					 "VALUES (?, ?, ?, ?)", e);
	unsigned char enc[GH_AUDIT_BITMAP_BYTES];
	size_t i, n = gh_audit_blockidx_count(b);

	if (!st)
		return GH_E_IO;
	gh_audit_blockidx_sort(b);
	for (i = 0; i < n; i++) {
		const struct gh_audit_rows *r;
		const char *val;
		size_t len, elen;
		int dim;

		gh_audit_blockidx_entry(b, i, &dim, &val, &len, &r);
		elen = gh_audit_rows_encode(r, enc);
		sqlite3_bind_int64(st, 1, blk);
		sqlite3_bind_int(st, 2, dim);
		sqlite3_bind_text(st, 3, val, (int)len, SQLITE_STATIC);
		sqlite3_bind_blob(st, 4, enc, (int)elen, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_reset(st);
			return store_fail(w, "writing the audit index", e);
		}
		sqlite3_reset(st);
	}
	return GH_OK;
}

enum gh_code store_audit_index_step(struct gh_store *s, struct store_conn *w, int *more,
				    struct gh_err *e)
{
	struct gh_audit_blockidx *b;
	enum gh_code rc;
	int64_t next, nrows;

	*more = 0;
	if (store_is_pg(s))
		return GH_OK;
	if ((rc = store_chain_load(s, w, e)) != GH_OK ||
	    (rc = store_audit_index_next(w, &next, e)) != GH_OK)
		return rc;
	if (s->chain.last_seq < BLK_LAST(next))
		return GH_OK; /* the block is still filling */
	if (!(b = writer_bidx(s, e)))
		return GH_E_NOMEM;
	if ((rc = collect(w, next, b, &nrows, e)) != GH_OK)
		return rc;
	if (nrows == 0) {
		/* pruned away before it was indexed: jump to the first row */
		sqlite3_stmt *st = store_stmt(w, "SELECT min(seq) FROM audit_events", e);
		int64_t first;

		if (!st)
			return GH_E_IO;
		first = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		sqlite3_reset(st);
		if (BLK(first) > next)
			next = BLK(first) - 1;
	} else if ((rc = write_postings(w, next, b, e)) != GH_OK) {
		return rc;
	}
	if ((rc = set_next(w, next + 1, e)) != GH_OK)
		return rc;
	*more = s->chain.last_seq >= BLK_LAST(next + 1);
	return GH_OK;
}

enum gh_code store_audit_index_rebuild(struct gh_store *s, struct store_conn *w, int64_t blk,
				       struct gh_err *e)
{
	struct gh_audit_blockidx *b;
	enum gh_code rc;
	int64_t next, nrows;

	if (store_is_pg(s))
		return GH_OK;
	if ((rc = store_audit_index_next(w, &next, e)) != GH_OK)
		return rc;
	if (blk >= next)
		return GH_OK; /* not indexed yet: the writer will do it whole */
	if ((rc = store_exec(w, "DELETE FROM audit_postings WHERE blk = ?",
			     STORE_ARGS(STORE_INT(blk)), "rebuilding the audit index", NULL,
			     e)) != GH_OK)
		return rc;
	if (!(b = writer_bidx(s, e)))
		return GH_E_NOMEM;
	if ((rc = collect(w, blk, b, &nrows, e)) != GH_OK)
		return rc;
	return write_postings(w, blk, b, e);
}

enum gh_code store_audit_index_drop_below(struct store_conn *w, int64_t seq, struct gh_err *e)
{
	if (!w->db)
		return GH_OK;
	return store_exec(w, "DELETE FROM audit_postings WHERE blk < ?",
			  STORE_ARGS(STORE_INT(BLK(seq))), "pruning the audit index", NULL, e);
}

/* ------------------------------------------------------------ reindex */

static enum gh_code clear_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	sqlite3_stmt *st;
	int64_t first;
	enum gh_code rc;

	(void)s;
	(void)arg;
	if ((rc = store_exec(w, "DELETE FROM audit_postings", NULL, 0, "clearing the audit index",
			     NULL, e)) != GH_OK)
		return rc;
	if (!(st = store_stmt(w, "SELECT coalesce(min(seq), 0) FROM audit_events", e)))
		return GH_E_IO;
	first = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_reset(st);
	return set_next(w, BLK(first), e);
}

static enum gh_code step_job(struct gh_store *s, struct store_conn *w, void *arg,
			     struct gh_err *e)
{
	return store_audit_index_step(s, w, arg, e);
}

enum gh_code gh_store_audit_reindex(struct gh_store *s, int from_scratch,
				    void (*progress)(void *ud, int64_t blocks), void *ud,
				    struct gh_err *e)
{
	enum gh_code rc;
	int64_t n = 0;
	int more = 1;

	if (store_is_pg(s))
		return GH_OK; /* no block index to build */
	if (from_scratch && (rc = store_write(s, clear_job, NULL, e)) != GH_OK)
		return rc;
	/* one block per transaction: other writers get their turn between */
	while (more) {
		if ((rc = store_write(s, step_job, &more, e)) != GH_OK)
			return rc;
		if (more && progress && ++n % 256 == 0)
			progress(ud, n);
	}
	return GH_OK;
}

/* ------------------------------------------------------------ queries */

/* One filter's postings, walked block by block in the page's direction.
 * Each cursor needs its own statement, so the SQL differs by a comment. */
struct cursor {
	sqlite3_stmt *st;
	int dim;
	const char *val;
	int64_t blk;               /* current block, when !done */
	int done;
};

#define CURSOR_SQL(dir, i) "SELECT blk, rows FROM audit_postings INDEXED BY audit_postings_by_value " \
	"WHERE dim = ?1 AND val = ?2 AND blk BETWEEN ?3 AND ?4 ORDER BY blk " dir " /* " #i " */"
static const char *const cursor_desc[GH_AUDIT_DIM_LAST] = {
	CURSOR_SQL("DESC", 1), CURSOR_SQL("DESC", 2), CURSOR_SQL("DESC", 3), CURSOR_SQL("DESC", 4),
	CURSOR_SQL("DESC", 5), CURSOR_SQL("DESC", 6), CURSOR_SQL("DESC", 7), CURSOR_SQL("DESC", 8),
};
static const char *const cursor_asc[GH_AUDIT_DIM_LAST] = {
	CURSOR_SQL("ASC", 1), CURSOR_SQL("ASC", 2), CURSOR_SQL("ASC", 3), CURSOR_SQL("ASC", 4),
	CURSOR_SQL("ASC", 5), CURSOR_SQL("ASC", 6), CURSOR_SQL("ASC", 7), CURSOR_SQL("ASC", 8),
};

/* A cursor steps past at most this many blocks before it seeks instead
 * (a seek costs a few steps). Tests lower it to reach both paths. */
int store_audit_steps_before_seek = 8;

static int cursor_step(struct store_conn *c, struct cursor *k, struct gh_err *e)
{
	int src = sqlite3_step(k->st);

	if (src == SQLITE_ROW) {
		k->blk = sqlite3_column_int64(k->st, 0);
		return 0;
	}
	k->done = 1;
	if (src != SQLITE_DONE) {
		store_fail(c, "reading the audit index", e);
		return -1;
	}
	return 0;
}

/* (Re)starts k on blocks [lo, hi]. */
static int cursor_seek(struct store_conn *c, struct cursor *k, int64_t lo, int64_t hi,
		       struct gh_err *e)
{
	sqlite3_reset(k->st);
	sqlite3_bind_int(k->st, 1, k->dim);
	sqlite3_bind_text(k->st, 2, k->val, -1, SQLITE_STATIC);
	sqlite3_bind_int64(k->st, 3, lo);
	sqlite3_bind_int64(k->st, 4, hi);
	k->done = 0;
	return cursor_step(c, k, e);
}

/* Moves k to its first block at or past target (in the walk's direction). */
static int cursor_reach(struct store_conn *c, struct cursor *k, int asc, int64_t target,
			int64_t lo, int64_t hi, struct gh_err *e)
{
	int n = 0;

	while (!k->done && (asc ? k->blk < target : k->blk > target)) {
		if (++n > store_audit_steps_before_seek)
			return cursor_seek(c, k, asc ? target : lo, asc ? hi : target, e);
		if (cursor_step(c, k, e) != 0)
			return -1;
	}
	return 0;
}

enum gh_code store_audit_postings_walk(struct store_conn *c, const struct store_audit_cond *conds,
				       int nconds, int64_t lo, int64_t hi, int asc,
				       int (*fn)(void *ud, int64_t seq), void *ud,
				       struct gh_err *e)
{
	struct cursor k[GH_AUDIT_DIM_LAST];
	int i, stop = 0;
	int64_t blo = BLK(lo), bhi = BLK(hi);

	if (nconds < 1 || nconds > GH_AUDIT_DIM_LAST)
		return gh_err_set(e, GH_E_INTERNAL, "audit index: %d filters", nconds);
	for (i = 0; i < nconds; i++) {
		k[i].st = store_stmt(c, asc ? cursor_asc[i] : cursor_desc[i], e);
		if (!k[i].st)
			return GH_E_IO;
		k[i].dim = conds[i].dim;
		k[i].val = conds[i].val;
		if (cursor_seek(c, &k[i], blo, bhi, e) != 0)
			return GH_E_IO;
	}
	while (!stop) {
		int64_t target;
		int all = 1;

		for (i = 0; i < nconds; i++)
			if (k[i].done)
				return GH_OK;
		/* the block every cursor must reach: the furthest along */
		target = k[0].blk;
		for (i = 1; i < nconds; i++)
			if (asc ? k[i].blk > target : k[i].blk < target)
				target = k[i].blk;
		for (i = 0; i < nconds; i++) {
			if (cursor_reach(c, &k[i], asc, target, blo, bhi, e) != 0)
				return GH_E_IO;
			if (k[i].done)
				return GH_OK;
			if (k[i].blk != target)
				all = 0;
		}
		if (!all)
			continue;
		{
			struct gh_audit_rows set, other;
			int off;

			for (i = 0; i < nconds; i++) {
				const void *p = sqlite3_column_blob(k[i].st, 1);
				int n = sqlite3_column_bytes(k[i].st, 1);

				if (gh_audit_rows_decode(p, (size_t)(n > 0 ? n : 0),
							 i ? &other : &set) != 0)
					return gh_err_set(e, GH_E_IO, "the audit index is damaged at "
							  "rows %lld..%lld (run gatehouse audit "
							  "reindex)", (long long)BLK_FIRST(target),
							  (long long)BLK_LAST(target));
				if (i && !gh_audit_rows_and(&set, &other))
					break;
			}
			if (i == nconds) {
				off = asc ? gh_audit_rows_next(&set, 0)
					  : gh_audit_rows_prev(&set, GH_AUDIT_BLOCK_ROWS - 1);
				while (off >= 0 && !stop) {
					int64_t seq = BLK_FIRST(target) + off;

					if (seq >= lo && seq <= hi)
						stop = fn(ud, seq);
					off = asc ? gh_audit_rows_next(&set, off + 1)
						  : gh_audit_rows_prev(&set, off - 1);
				}
			}
		}
		for (i = 0; i < nconds && !stop; i++)
			if (cursor_step(c, &k[i], e) != 0)
				return GH_E_IO;
	}
	return stop < 0 ? GH_E_IO : GH_OK;
}

/* -------------------------------------------------- verify's block reads */

enum gh_code store_audit_block_load(struct store_conn *c, int64_t blk,
				    struct gh_audit_blockmap *m, const char **why,
				    struct gh_err *e)
{
	sqlite3_stmt *st = store_stmt(c, "SELECT dim, val, rows FROM audit_postings WHERE blk = ?",
				      e);
	int src;

	*why = NULL;
	if (!st)
		return GH_E_IO;
	gh_audit_blockmap_reset(m);
	sqlite3_bind_int64(st, 1, blk);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 1);
		int n = sqlite3_column_bytes(st, 1);

		if (gh_audit_blockmap_load(m, sqlite3_column_int(st, 0), v ? v : "", (size_t)n,
					   sqlite3_column_blob(st, 2),
					   (size_t)sqlite3_column_bytes(st, 2), why) != 0) {
			sqlite3_reset(st);
			if (!strcmp(*why, "out of memory"))
				return gh_err_set(e, GH_E_NOMEM, "out of memory");
			return GH_OK;
		}
	}
	sqlite3_reset(st);
	if (src != SQLITE_DONE)
		return store_fail(c, "reading the audit index", e);
	return GH_OK;
}
