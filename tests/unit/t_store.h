/*
 * t_store.h - a store on a real SQLite file in a fresh temporary directory,
 * for the unit tests that need a database (test_store.c, test_keys.c,
 * test_approvals_store.c). When GH_TEST_PG_URL names a PostgreSQL
 * database the store is opened there instead, on a schema emptied for
 * each fresh t_store (tests/CMakeLists.txt runs the store's tests again
 * against a throwaway server); t_store_pg() tells a test which it has.
 *
 *   struct t_store t;
 *   T_EQ_INT(t_store_open(&t), 0);
 *   ... t.s ...
 *   t_store_close(&t);
 *
 * t_store_dir and t_store_reopen split the open for tests that look at the
 * file between opens or sign checkpoints with t.signer.
 *
 * Threading: a t_store belongs to the test that opened it; the store it
 * holds is as thread-safe as store.h says.
 */
#ifndef GH_T_STORE_H
#define GH_T_STORE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "err.h"
#include "pg.h"
#include "store.h"
#include "util.h"

/* The PostgreSQL database the store tests run on, or NULL for SQLite. */
static inline const char *t_store_pg(void)
{
	const char *url = getenv("GH_TEST_PG_URL");

	return url && url[0] ? url : NULL;
}

/* Prints why a check of SQLite's internals does not run on PostgreSQL and
 * returns 1 there (0 on SQLite, where it runs). */
static inline int t_store_sqlite_only(const char *what)
{
	if (!t_store_pg())
		return 0;
	fprintf(stderr, "  skipped on PostgreSQL: %s (SQLite only)\n", what);
	return 1;
}

/* Empties the PostgreSQL test database: its public schema, dropped and
 * made again. 0 on success. */
/* On PostgreSQL: runs sql on a connection of its own; -1 when it fails,
 * else the first column of its first row as an integer (0 without rows). */
static inline int64_t t_pg_sql(const char *sql)
{
	PGconn *pc = NULL;
	PGresult *r;
	struct gh_err e;
	int64_t v = -1;
	ExecStatusType st;

	if (gh_pg_connect(t_store_pg(), 5, &pc, &e) != GH_OK)
		return -1;
	r = PQexec(pc, sql);
	st = PQresultStatus(r);
	if (st == PGRES_COMMAND_OK)
		v = 0;
	else if (st == PGRES_TUPLES_OK)
		v = PQntuples(r) ? gh_pg_int(r, 0, 0, NULL) : 0;
	PQclear(r);
	PQfinish(pc);
	return v;
}

/* On PostgreSQL: a connection of its own listening on channel, or NULL. */
static inline PGconn *t_pg_listen(const char *channel)
{
	PGconn *pc = NULL;
	PGresult *r;
	struct gh_err e;
	char sql[128];
	int ok;

	if (gh_pg_connect(t_store_pg(), 5, &pc, &e) != GH_OK)
		return NULL;
	snprintf(sql, sizeof(sql), "LISTEN %s", channel);
	r = PQexec(pc, sql);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok) {
		PQfinish(pc);
		return NULL;
	}
	return pc;
}

/* The next notification t_pg_listen's connection hears within 5 s (the
 * caller frees it with PQfreemem), or NULL. */
static inline PGnotify *t_pg_notified(PGconn *pc)
{
	PGnotify *n = NULL;
	int64_t until = gh_now_ms() + 5000;

	while (pc && !n && gh_now_ms() < until) {
		if (!PQconsumeInput(pc))
			return NULL;
		if (!(n = PQnotifies(pc)))
			usleep(10000);
	}
	return n;
}

static inline int t_store_pg_reset(void)
{
	PGconn *pc = NULL;
	PGresult *r;
	struct gh_err e;
	int ok;

	if (gh_pg_connect(t_store_pg(), 5, &pc, &e) != GH_OK) {
		fprintf(stderr, "  store: %s\n", e.msg);
		return -1;
	}
	r = PQexec(pc, "SET client_min_messages = warning; "
		       "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "  store: emptying the schema: %s\n", PQerrorMessage(pc));
	PQclear(r);
	PQfinish(pc);
	return ok ? 0 : -1;
}

struct t_store {
	char dir[64];
	char path[128];                  /* dir + "/gatehouse.db" */
	struct gh_store *s;
	struct gh_audit_signer signer;   /* a fresh key pair per directory */
};

/* Runs sql on the test's database behind its store's back, as another
 * program would (no generation of the store's caches moves); 0 or -1. */
static inline int t_store_sql_behind(const struct t_store *t, const char *sql)
{
	sqlite3 *db = NULL;
	int rc;

	if (t_store_pg())
		return t_pg_sql(sql) < 0 ? -1 : 0;
	if (sqlite3_open_v2(t->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	rc = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
	sqlite3_close(db);
	return rc;
}

/* Removes dir and the files in it (the database, its WAL and lock). */
static inline void t_rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Clears t, makes its directory and signing key (and empties the
 * PostgreSQL database); nothing is opened. */
static inline int t_store_dir(struct t_store *t)
{
	memset(t, 0, sizeof(*t));
	gh_strlcpy(t->dir, "/tmp/gh_test_store_XXXXXX", sizeof(t->dir));
	if (!mkdtemp(t->dir))
		return -1;
	snprintf(t->path, sizeof(t->path), "%s/gatehouse.db", t->dir);
	crypto_sign_keypair(t->signer.pk, t->signer.sk);
	if (t_store_pg() && t_store_pg_reset() != 0) {
		rmdir(t->dir);
		return -1;
	}
	return 0;
}

/* Opens t->path (threaded, 4 readers) into t->s; signer: checkpoints are
 * signed with t->signer every ckpt_rows rows (0 = the store's default). */
static inline enum gh_code t_store_reopen(struct t_store *t, int signer, int64_t ckpt_rows,
					  struct gh_err *e)
{
	struct gh_store_opts o = {0};

	o.path = t->path;
	o.url = t_store_pg();
	o.readers = 4;
	o.busy_timeout_ms = 5000;
	o.group_commit_max = 1024;
	o.threaded = 1;
	o.signer = signer ? &t->signer : NULL;
	o.ckpt_rows = ckpt_rows;
	return gh_store_open(&o, &t->s, e);
}

/* A fresh directory with a migrated, unsigned store in it. */
static inline int t_store_open(struct t_store *t)
{
	struct gh_err e;

	if (t_store_dir(t) != 0)
		return -1;
	if (t_store_reopen(t, 0, 0, &e) != GH_OK) {
		fprintf(stderr, "  store: %s\n", e.msg);
		return -1;
	}
	return 0;
}

/* Closes the store (when open) and removes the directory. */
static inline void t_store_close(struct t_store *t)
{
	gh_store_close(t->s);
	t->s = NULL;
	t_rm_dir(t->dir);
}

#endif
