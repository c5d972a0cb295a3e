/*
 * store_copy.h - copying a SQLite gatehouse database into an empty
 * PostgreSQL one (`gatehouse migrate --from sqlite:PATH --to URL`).
 *
 * Every table of the SQLite schema is copied but the ones only SQLite
 * keeps (its full-text index of memory, the audit log's block index and
 * the migrations table each backend keeps for itself). The columns come
 * from the schemas, not from a list here: a column one schema has and the
 * other lacks stops the copy, naming it. Values travel as SQLite holds
 * them (times in Unix milliseconds, blobs as bytea, text byte for byte),
 * so the audit chain's hashes and signatures hold on PostgreSQL.
 *
 * The source is read in one read transaction of a read-only store (it is
 * never written, nor its WAL checkpointed); the target is written in one
 * transaction that locks every table first, so a replica started meanwhile
 * waits and a failed copy leaves nothing behind. Rows stream through COPY
 * FROM STDIN a megabyte at a time: memory does not grow with the tables.
 *
 * Runs on the calling thread; the stores are used as store.h says.
 */
#ifndef GH_STORE_COPY_H
#define GH_STORE_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

#define GH_STORE_COPY_TABLES_MAX 64

/* 1 for a table only the SQLite schema has (SQLite's own, the full-text
 * index of memory, the audit log's block index), else 0. The copy leaves
 * these out, and schema_migrations, which each backend keeps for its own
 * migrations; the schema test (tests/unit/test_pg.c) checks that the two
 * schemas have the same columns in every other table. */
int gh_store_copy_sqlite_only(const char *table);

/* Checks that from (a SQLite store) is a gatehouse database at the newest
 * schema this binary knows: its schema_migrations rows name this build's
 * migrations. GH_E_BADREQ "... is not a gatehouse database ..." or
 * GH_E_IO "... is at schema version N ..." (what to run first) with path
 * (borrowed, for the message) naming the file. */
enum gh_code gh_store_copy_source_check(struct gh_store *from, const char *path,
					struct gh_err *e);

/* Whether the PostgreSQL store to (read-only will do) holds rows in any
 * table but schema_migrations: GH_OK when none does, GH_E_CONFLICT with
 * the tables named in e when some do. */
enum gh_code gh_store_copy_target_empty(struct gh_store *to, struct gh_err *e);

struct gh_store_copy_table {
	char name[64];
	int64_t rows;              /* copied: the source's rows */
	int64_t target_rows;       /* the target's after the commit (gh_store_copy_count) */
	double seconds;            /* so far, while it is copied */
};

struct gh_store_copy_report {
	struct gh_store_copy_table t[GH_STORE_COPY_TABLES_MAX];
	size_t n;                  /* tables copied, parents before children */
	int64_t rows;
	int64_t bytes;             /* COPY text sent */
	int identities;            /* identity columns set past the copied ids */
	double seconds;
};

/* Called as a table's copy goes: done 0 every so many rows, done 1 once
 * it is copied (not yet committed). t is borrowed for the call. */
typedef void (*gh_store_copy_progress_fn)(void *ud, const struct gh_store_copy_table *t,
					  int done);

/* Copies every table of from (a read-only SQLite store) into to (a
 * writable PostgreSQL store opened without an audit signer, its schema
 * migrated), in one transaction on to, and moves every identity column's
 * sequence past the largest id copied. Refuses a target holding rows
 * (GH_E_CONFLICT, naming the tables) and schemas that disagree (GH_E_IO,
 * naming the table and column). On success the copy is committed and rep
 * says what went; on failure nothing was written. progress may be NULL. */
enum gh_code gh_store_copy(struct gh_store *from, struct gh_store *to,
			   gh_store_copy_progress_fn progress, void *ud,
			   struct gh_store_copy_report *rep, struct gh_err *e);

/* Counts the rows of each table of rep on to (after the commit) into its
 * target_rows. */
enum gh_code gh_store_copy_count(struct gh_store *to, struct gh_store_copy_report *rep,
				 struct gh_err *e);

#endif
