/*
 * store_sqlite.h - the SQLite side of the store's statement layer, for the
 * files that still talk to SQLite themselves: store.c (connections,
 * transactions, migrations), store_sqlite.c (the statement and row layer
 * of store_int.h), store_fts.c (how memories' words are indexed),
 * store_audit_index.c (the audit block index, which only the SQLite store
 * keeps) and store_vfs.c (the VFS connections are opened with). The domain
 * files use store_int.h alone.
 */
#ifndef GH_STORE_SQLITE_H
#define GH_STORE_SQLITE_H

#include <sqlite3.h>

#include "store_int.h"

/* A reset, cleared cached statement for sql (a string literal), or NULL with
 * e filled. Borrowed from c's cache. */
sqlite3_stmt *store_stmt(struct store_conn *c, const char *sql, struct gh_err *e);
/* Binds text or NULL. */
int store_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Binds args in order, from parameter 1. */
void store_bind_args(sqlite3_stmt *st, const struct store_arg *args, int n);

/* Gives db the SQL functions memories_fts is written and searched with
 * (store_fts.c): 0, or -1 with e filled. */
int store_fts_register(sqlite3 *db, struct gh_err *e);

/* Registers the VFS gatehouse opens its databases with (store_vfs.c: the
 * default one, with each WAL frame written in one call) and returns its
 * name, or NULL when it cannot (the default VFS is then used). Call it
 * before any connection is opened, once. */
const char *store_vfs_register(void);

/* On SQLite a row is its statement, stepped to that row. */
static inline sqlite3_stmt *store_row_stmt(struct store_row *r)
{
	return r->st;
}

#endif
