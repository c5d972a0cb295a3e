/*
 * test_store.c - the store on real SQLite files in a temporary directory:
 * migrations (applied once, recorded, reopen is a no-op, a newer schema is
 * refused, read-only opens of a missing or empty file fail clearly), group
 * commit (16 threads x 500 audit appends: seq contiguous, chain verifies,
 * fewer transactions than jobs; a failing job does not sink its batch),
 * threads/messages/runs (new runs, continuations, conflicts, tool calls,
 * recovery after a crash), memory (bm25 order, FTS syntax inert, owner and
 * resource isolation, delete), working memory, rate-limit state, audit
 * queries (filters, cursor pages), retention pruning with its signed
 * anchor. The concurrency tests are the ones to run under TSan.
 */
#include "store.h"
#include "store_int.h" /* white box: how many jobs wait in the writer's queue */
#include "store_a2a.h"

#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "audit_verify.h"
#include "embed.h"
#include "json.h"
#include "log.h"
#include "t.h"
#include "t_store.h"
#include "util.h"

/* One value from the database file, through a connection of our own (only
 * while the store is closed or idle). */
static int64_t sql_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (t_store_pg())
		return t_pg_sql(sql);

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int sql_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = -1;

	if (t_store_pg())
		return t_pg_sql(sql) < 0 ? -1 : 0;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) ==
	    SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
	sqlite3_close(db);
	return rc;
}

/* The id of a search's i-th result. */
static int64_t result_id(const cJSON *arr, int i)
{
	return gh_json_int(cJSON_GetArrayItem(arr, i), "id", -1);
}

/* ---- migrations ---- */

/* The version number a migration's file name starts with. */
static int atoi_prefix(const char *name)
{
	int v = 0;

	while (*name >= '0' && *name <= '9')
		v = v * 10 + (*name++ - '0');
	return v;
}

static void test_migrations(void)
{
	struct t_store t;
	struct gh_err e;
	int latest = gh_store_schema_latest(), applied = -1;
	int64_t first_applied_at;

	if (t_store_sqlite_only("SQLite's migrations, its schema table and WAL mode"))
		return;
	T_ASSERT(latest >= 3);
	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_schema_version(t.s), latest);
	/* already applied: nothing to do */
	T_EQ_INT(gh_store_migrate(t.s, &applied, &e), GH_OK);
	T_EQ_INT(applied, 0);
	gh_store_close(t.s);
	t.s = NULL;
	/* every migration recorded once, in order, with its file name */
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM schema_migrations"), latest);
	T_EQ_INT(sql_int(t.path, "SELECT max(version) FROM schema_migrations"), latest);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM schema_migrations WHERE name = "
				 "'0001_core.sql' AND version = 1"),
		 1);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM sqlite_master WHERE name = 'audit_events'"),
		 1);
	first_applied_at = sql_int(t.path, "SELECT applied_at FROM schema_migrations WHERE "
					   "version = 1");
	T_ASSERT(first_applied_at > 0);
	/* reopen: the same schema, nothing re-applied */
	usleep(2000);
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	T_EQ_INT(gh_store_schema_version(t.s), latest);
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM schema_migrations"), latest);
	T_EQ_INT(sql_int(t.path, "SELECT applied_at FROM schema_migrations WHERE version = 1"),
		 first_applied_at);
	/* the file is in WAL mode */
	{
		sqlite3 *db;
		sqlite3_stmt *st;

		T_EQ_INT(sqlite3_open_v2(t.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
		T_EQ_INT(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
		T_EQ_INT(sqlite3_step(st), SQLITE_ROW);
		T_EQ_STR((const char *)sqlite3_column_text(st, 0), "wal");
		sqlite3_finalize(st);
		sqlite3_close(db);
	}
	t_store_close(&t);
}

/* Makes the database at path what gatehouse left before migration
 * version: every migration before it applied and recorded. 0 or -1. */
static int schema_before(const char *path, int version)
{
	const struct gh_embedded *m;
	char sql[256];

	if (sql_exec(path, "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
			   "name TEXT NOT NULL, applied_at INTEGER NOT NULL)") != 0)
		return -1;
	for (m = gh_embedded_migrations; m->name; m++) {
		int v = atoi_prefix(m->name);

		if (v >= version)
			continue;
		snprintf(sql, sizeof(sql), "INSERT INTO schema_migrations VALUES (%d, '%s', 1)", v,
			 m->name);
		if (sql_exec(path, (const char *)m->data) != 0 || sql_exec(path, sql) != 0)
			return -1;
	}
	return 0;
}

/* t, a fresh database as gatehouse left it before migration version, with
 * the rows sql inserts, then opened by this gatehouse (every migration
 * since applied). 0, or -1 with why on stderr. */
static int open_migrated(struct t_store *t, int version, const char *sql)
{
	struct gh_err e;

	if (t_store_dir(t) != 0 || schema_before(t->path, version) != 0 ||
	    sql_exec(t->path, sql) != 0)
		return -1;
	if (t_store_reopen(t, 0, 0, &e) != GH_OK) {
		fprintf(stderr, "  open after migration %d: %s\n", version, e.msg);
		return -1;
	}
	return gh_store_schema_version(t->s) == gh_store_schema_latest() ? 0 : -1;
}

/* A database of the version before run deadlines, with a waiting run and
 * its pending tool call: the rebuild of runs keeps both, the tool call
 * still belongs to its run (foreign keys hold, deleting the run takes it
 * along), and a run may now end "expired". */
static void test_run_deadlines_migration(void)
{
	struct t_store t;

	if (t_store_sqlite_only("a migration of SQLite's runs table"))
		return;
	T_EQ_INT(open_migrated(&t, 12,
			       "INSERT INTO runs (id, owner, key_id, agent_id, status, state, "
			       "created_at, updated_at) VALUES ('run_1', 'o', 'k', 'a', 'waiting', "
			       "'{\"v\":1}', 5, 6);"
			       "INSERT INTO run_tool_calls (tool_call_id, run_id, owner, tool_name, "
			       "source, status, created_at) VALUES ('call_1', 'run_1', 'o', 't', "
			       "'client', 'pending', 5)"),
		 0);
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM runs WHERE id = 'run_1' AND "
				 "status = 'waiting' AND state = '{\"v\":1}' AND created_at = 5 AND "
				 "updated_at = 6 AND wait_until IS NULL"),
		 1);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM run_tool_calls WHERE run_id = 'run_1'"), 1);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	T_EQ_INT(sql_exec(t.path, "UPDATE runs SET status = 'expired' WHERE id = 'run_1'"), 0);
	T_ASSERT(sql_exec(t.path, "UPDATE runs SET status = 'gone' WHERE id = 'run_1'") != 0);
	T_EQ_INT(sql_exec(t.path, "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE id = 'run_1'"),
		 0);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM run_tool_calls"), 0);
	t_store_close(&t);
}

/* A database of the version before memory scopes, with memories of two
 * owners indexed the old way: the migration indexes them again, each word
 * with its owner's and resource's scope. A search still finds its own
 * memories only, a delete takes a memory out of the index, FTS5 finds the
 * index sound, and no word of the index is shared by two scopes. */
static void test_memory_scope_migration(void)
{
	struct t_store t;
	struct gh_err e;
	cJSON *out;

	if (t_store_sqlite_only("a migration of SQLite's full-text index"))
		return;
	T_EQ_INT(open_migrated(&t, 16,
			       "INSERT INTO memories (id, owner, resource_id, content, tags, "
			       "created_at) VALUES (1, 'alice', 'r1', 'My favourite colours are "
			       "blue and green', 'colours', 10), (2, 'bob', 'r1', 'favourite colour: "
			       "red', '', 11), (3, 'alice', 'r2', 'Green tea, favourite drink', "
			       "'drink', 12), (4, 'alice', 'r1', 'Whales are big', '', 13)"),
		 0);

	/* stems still match ("colour" finds "colours"); scopes still hold */
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "colour", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	T_EQ_INT(result_id(out, 0), 1);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_search(t.s, "bob", "r1", "favourite", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	T_EQ_INT(result_id(out, 0), 2);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r2", "drinks", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1); /* the tags are indexed too */
	T_EQ_INT(result_id(out, 0), 3);
	cJSON_Delete(out);
	/* a memory saved after the migration, then deleted */
	{
		int64_t id;

		T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", "Favourite whale: blue", NULL,
					      &id, &e),
			 GH_OK);
		T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "whale", 10, &out, &e), GH_OK);
		T_EQ_INT(cJSON_GetArraySize(out), 2);
		cJSON_Delete(out);
		T_EQ_INT(gh_store_memory_delete(t.s, "alice", "r1", id, &e), GH_OK);
		T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "whale", 10, &out, &e), GH_OK);
		T_EQ_INT(cJSON_GetArraySize(out), 1);
		T_EQ_INT(result_id(out, 0), 4);
		cJSON_Delete(out);
	}
	gh_store_close(t.s);
	t.s = NULL;
	/* FTS5 checks its index against itself (a contentless table) */
	T_EQ_INT(sql_exec(t.path, "INSERT INTO memories_fts (memories_fts) "
				  "VALUES ('integrity-check')"),
		 0);
	/* every indexed word is scoped: 'm', 16 hex digits, then the stem;
	 * "favourit" appears under three scopes, never bare */
	T_EQ_INT(sql_exec(t.path, "CREATE VIRTUAL TABLE vocab USING fts5vocab "
				  "(memories_fts, 'row')"),
		 0);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM vocab WHERE term NOT GLOB "
				 "'m[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]"
				 "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]"
				 "[0-9a-f]?*'"),
		 0);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM vocab WHERE substr(term, 18) = 'favourit'"),
		 3);
	T_EQ_INT(sql_int(t.path, "SELECT count(DISTINCT substr(term, 1, 17)) FROM vocab"), 3);
	t_store_close(&t);
}

static void test_newer_schema_refused(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_store_opts ro = {0};
	char sql[160], want[128];
	int latest = gh_store_schema_latest();

	if (t_store_sqlite_only("SQLite's schema versions and database file"))
		return;
	T_EQ_INT(t_store_open(&t), 0);
	gh_store_close(t.s);
	t.s = NULL;
	snprintf(sql, sizeof(sql),
		 "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%d, "
		 "'%04d_future.sql', 1)",
		 latest + 1, latest + 1);
	T_EQ_INT(sql_exec(t.path, sql), 0);
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_E_IO);
	T_ASSERT(t.s == NULL);
	snprintf(want, sizeof(want), "has schema version %d, newer than this gatehouse knows (%d)",
		 latest + 1, latest);
	T_CONTAINS(e.msg, want);
	T_CONTAINS(e.msg, t.path);
	/* the database was not touched */
	T_EQ_INT(sql_int(t.path, "SELECT max(version) FROM schema_migrations"), latest + 1);
	/* read-only opens refuse it too */
	ro.path = t.path;
	ro.readonly = 1;
	ro.readers = 1;
	T_EQ_INT(gh_store_open(&ro, &t.s, &e), GH_E_IO);
	T_CONTAINS(e.msg, "newer than this gatehouse knows");
	t_store_close(&t);
}

/* The same on PostgreSQL: a schema newer than this binary's migrations is
 * refused by a writable open and by a read-only one. */
static void test_newer_schema_refused_pg(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_store_opts ro = {0};

	if (!t_store_pg()) {
		fprintf(stderr, "  skipped on SQLite: PostgreSQL's schema versions (see above)\n");
		return;
	}
	T_EQ_INT(t_store_open(&t), 0);
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(t_pg_sql("INSERT INTO schema_migrations (version, name, applied_at) "
			  "VALUES (9999, 'future.sql', 1)"), 0);
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_E_IO);
	T_CONTAINS(e.msg, "newer than this gatehouse knows");
	ro.url = t_store_pg();
	ro.readonly = 1;
	ro.readers = 1;
	T_EQ_INT(gh_store_open(&ro, &t.s, &e), GH_E_IO);
	T_ASSERT(t.s == NULL);
	T_CONTAINS(e.msg, "newer than this gatehouse knows");
	t_store_close(&t);
}

/* PostgreSQL: statistics are gathered for tables that hold rows only (an
 * empty table's would keep prepared plans on sequential scans). pg_class
 * says: reltuples -1 never analyzed, else the rows ANALYZE counted. */
static void test_analyze_skips_empty_pg(void)
{
	struct t_store t;
	struct gh_audit_event ev;
	struct gh_err e;
	int i;

	if (!t_store_pg()) {
		fprintf(stderr, "  skipped on SQLite: PostgreSQL's statistics\n");
		return;
	}
	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_analyze(t.s, &e), GH_OK);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM pg_class WHERE relname = 'audit_events' "
			  "AND reltuples >= 0"), 0);
	memset(&ev, 0, sizeof(ev));
	ev.event = "allowed";
	ev.tool_name = "t";
	for (i = 0; i < 20; i++)
		T_EQ_INT(gh_store_audit_append(t.s, &ev, NULL, &e), GH_OK);
	T_EQ_INT(gh_store_analyze(t.s, &e), GH_OK);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM pg_class WHERE relname = 'audit_events' "
			  "AND reltuples >= 20"), 1);
	/* what stays empty is still not analyzed */
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM pg_class WHERE relname = 'a2a_tasks' "
			  "AND reltuples >= 0"), 0);
	t_store_close(&t);
}

static void test_readonly(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_store_opts ro = {0};
	struct gh_store *s = NULL;
	int64_t id;
	cJSON *out;

	if (t_store_sqlite_only("read-only opens of a database file"))
		return;
	T_EQ_INT(t_store_dir(&t), 0);
	ro.path = t.path;
	ro.readonly = 1;
	ro.readers = 1;
	/* a missing file: a clear message, and no file created */
	T_EQ_INT(gh_store_open(&ro, &s, &e), GH_E_IO);
	T_ASSERT(s == NULL);
	T_CONTAINS(e.msg, "does not exist (run gatehouse migrate first)");
	T_ASSERT(access(t.path, F_OK) != 0);
	/* an empty database file: no schema */
	T_EQ_INT(sql_exec(t.path, "CREATE TABLE x (y)"), 0);
	T_EQ_INT(gh_store_open(&ro, &s, &e), GH_E_IO);
	T_CONTAINS(e.msg, "has no schema (run gatehouse migrate first)");
	unlink(t.path);
	/* a migrated database opens read-only; writes are refused */
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "o", "r", "a fact", NULL, &id, &e), GH_OK);
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(gh_store_open(&ro, &s, &e), GH_OK);
	T_EQ_INT(gh_store_schema_version(s), gh_store_schema_latest());
	T_EQ_INT(gh_store_memory_search(s, "o", "r", "fact", 5, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_save(s, "o", "r", "another", NULL, &id, &e), GH_E_UNAVAILABLE);
	T_CONTAINS(e.msg, "read-only");
	gh_store_close(s);
	t_store_close(&t);
}

/* A migrated database opens read-only on either backend: it reads, and
 * every write is refused; an empty one has no schema. */
static void test_readonly_migrated(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_store_opts ro = {0};
	struct gh_store *s = NULL;
	int64_t id;
	cJSON *out;

	T_EQ_INT(t_store_dir(&t), 0);
	ro.path = t.path;
	ro.url = t_store_pg();
	ro.readonly = 1;
	ro.readers = 2;
	if (t_store_pg()) { /* the database is empty: no schema */
		T_EQ_INT(gh_store_open(&ro, &s, &e), GH_E_IO);
		T_ASSERT(s == NULL);
		T_CONTAINS(e.msg, "has no schema (run gatehouse migrate first)");
	}
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "o", "r", "a fact", NULL, &id, &e), GH_OK);
	T_EQ_INT(gh_store_open(&ro, &s, &e), GH_OK);
	T_EQ_INT(gh_store_schema_version(s), gh_store_schema_version(t.s));
	T_EQ_INT(gh_store_memory_search(s, "o", "r", "fact", 5, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_save(s, "o", "r", "another", NULL, &id, &e), GH_E_UNAVAILABLE);
	T_CONTAINS(e.msg, "read-only");
	gh_store_close(s);
	t_store_close(&t);
}

/* ---- group commit ---- */

#define WRITERS 16
#define APPENDS 500

struct append_arg {
	struct gh_store *s;
	int id;
	int64_t seqs[APPENDS];
	int failures;
	char err[GH_ERR_MSG_MAX];
};

static void *appender(void *arg)
{
	struct append_arg *a = arg;
	char key[32], args[64];
	int i;

	snprintf(key, sizeof(key), "key_%d", a->id);
	for (i = 0; i < APPENDS; i++) {
		struct gh_audit_event ev = {0};
		struct gh_err e;

		snprintf(args, sizeof(args), "{\"i\":%d}", i);
		ev.event = "executed";
		ev.key_id = key;
		ev.tool_name = "t";
		ev.args = args;
		ev.outcome = "ok";
		ev.duration_ms = i;
		if (gh_store_audit_append(a->s, &ev, &a->seqs[i], &e) != GH_OK) {
			a->failures++;
			gh_strlcpy(a->err, e.msg, sizeof(a->err));
		}
	}
	return NULL;
}

static void test_group_commit(void)
{
	static struct append_arg args[WRITERS];
	pthread_t th[WRITERS];
	struct t_store t;
	struct gh_err e;
	struct gh_store_stats st;
	struct gh_audit_verify rep;
	unsigned char *seen;
	int64_t first, last, count;
	int i, j;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 0; i < WRITERS; i++) {
		memset(&args[i], 0, sizeof(args[i]));
		args[i].s = t.s;
		args[i].id = i;
		T_EQ_INT(pthread_create(&th[i], NULL, appender, &args[i]), 0);
	}
	for (i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < WRITERS; i++)
		if (args[i].failures)
			T_FAIL("writer %d: %d appends failed: %s", i, args[i].failures,
			       args[i].err);
	/* every seq handed out once, and they are exactly 1..N */
	seen = calloc(WRITERS * APPENDS + 1, 1);
	for (i = 0; i < WRITERS; i++) {
		for (j = 0; j < APPENDS; j++) {
			int64_t q = args[i].seqs[j];

			if (q < 1 || q > WRITERS * APPENDS || seen[q]) {
				free(seen);
				T_FAIL("writer %d append %d: seq %lld out of range or twice", i, j,
				       (long long)q);
			}
			seen[q] = 1;
			/* one writer's appends are ordered */
			if (j && q <= args[i].seqs[j - 1]) {
				free(seen);
				T_FAIL("writer %d: seq went back", i);
			}
		}
	}
	free(seen);
	T_EQ_INT(gh_store_audit_bounds(t.s, &first, &last, &count, &e), GH_OK);
	T_EQ_INT(first, 1);
	T_EQ_INT(last, WRITERS * APPENDS);
	T_EQ_INT(count, WRITERS * APPENDS);
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("chain broken: %s", rep.message);
	T_EQ_INT(rep.rows, WRITERS * APPENDS);
	T_EQ_INT(rep.last_seq, WRITERS * APPENDS);
	/* batching happened */
	gh_store_stats(t.s, &st);
	T_ASSERT(st.jobs >= WRITERS * APPENDS);
	T_ASSERT(st.transactions < st.jobs);
	T_ASSERT(st.max_batch > 1);
	t_store_close(&t);
}

/* A write job that holds the writer until released: everything queued
 * meanwhile lands in the next batch. */
struct blocker {
	struct gh_store *s;
	sem_t started, release;
	enum gh_code rc;
};

static enum gh_code blocker_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	struct blocker *b = arg;

	sem_post(&b->started);
	while (sem_wait(&b->release) != 0)
		;
	return GH_OK;
}

static void *blocker_thread(void *arg)
{
	struct blocker *b = arg;
	struct gh_err e;

	b->rc = store_write(b->s, blocker_job, b, &e);
	return NULL;
}

static int queued_jobs(struct gh_store *s)
{
	const struct store_job *j;
	int n = 0;

	pthread_mutex_lock(&s->qmu);
	for (j = s->qhead; j; j = j->next)
		n++;
	pthread_mutex_unlock(&s->qmu);
	return n;
}

struct commit_arg {
	struct gh_store *s;
	int n;
	int bad;           /* a message without a role: fails after inserting the thread */
	enum gh_code rc;
	char msg[GH_ERR_MSG_MAX];
};

static void *committer(void *arg)
{
	struct commit_arg *a = arg;
	char run[32], thread[32];
	struct gh_run_commit c = {0};
	struct gh_err e;
	cJSON *msgs = cJSON_Parse(a->bad ? "[{\"role\":\"user\",\"content\":\"hi\"},"
					   "{\"content\":\"no role\"}]"
					 : "[{\"role\":\"user\",\"content\":\"hi\"}]");
	cJSON *state = cJSON_CreateObject();

	snprintf(run, sizeof(run), "run_%d", a->n);
	snprintf(thread, sizeof(thread), "thr_%d", a->n);
	c.run_id = run;
	c.owner = "o";
	c.key_id = "k";
	c.agent_id = "a";
	c.thread_id = thread;
	c.resource_id = "r";
	c.create_thread = 1;
	c.messages = msgs;
	c.status = "completed";
	c.state = state;
	gh_err_clear(&e);
	a->rc = gh_store_run_commit(a->s, &c, &e);
	gh_strlcpy(a->msg, e.msg, sizeof(a->msg));
	cJSON_Delete(msgs);
	cJSON_Delete(state);
	return NULL;
}

static void test_failing_job_in_batch(void)
{
	enum { N = 12 };
	struct t_store t;
	struct blocker bl;
	pthread_t th[N + 2];
	struct commit_arg ca[N];
	struct append_arg *aa = calloc(1, sizeof(*aa));
	struct gh_store_stats st;
	struct gh_audit_verify rep;
	struct gh_err e;
	cJSON *out;
	int i, bad = 0;

	T_EQ_INT(t_store_open(&t), 0);
	bl.s = t.s;
	sem_init(&bl.started, 0, 0);
	sem_init(&bl.release, 0, 0);
	T_EQ_INT(pthread_create(&th[N + 1], NULL, blocker_thread, &bl), 0);
	while (sem_wait(&bl.started) != 0)
		;
	/* the writer is busy: queue 12 commits (every third one failing after
	 * it inserted its thread) and the first of 500 audit appends */
	aa->s = t.s;
	for (i = 0; i < N; i++) {
		ca[i].s = t.s;
		ca[i].n = i;
		ca[i].bad = i % 3 == 1;
		T_EQ_INT(pthread_create(&th[i], NULL, committer, &ca[i]), 0);
	}
	T_EQ_INT(pthread_create(&th[N], NULL, appender, aa), 0);
	for (i = 0; i < 2000 && queued_jobs(t.s) < N + 1; i++)
		usleep(5000);
	T_EQ_INT(queued_jobs(t.s), N + 1);
	sem_post(&bl.release);
	for (i = 0; i <= N + 1; i++)
		pthread_join(th[i], NULL);
	sem_destroy(&bl.started);
	sem_destroy(&bl.release);
	T_EQ_INT(bl.rc, GH_OK);
	gh_store_stats(t.s, &st);
	T_ASSERT(st.max_batch >= N + 1); /* all of them in one transaction */
	for (i = 0; i < N; i++) {
		char thread[32];
		enum gh_code rc;

		snprintf(thread, sizeof(thread), "thr_%d", i);
		rc = gh_store_thread_get(t.s, "o", thread, &out, &e);
		cJSON_Delete(out);
		if (ca[i].bad) {
			/* refused, and its thread insert rolled back with it */
			if (ca[i].rc != GH_E_INTERNAL ||
			    !strstr(ca[i].msg, "message without role") ||
			    rc != GH_E_NOTFOUND) {
				fprintf(stderr, "  failing commit %d: rc %d \"%s\", thread %s\n", i,
					ca[i].rc, ca[i].msg, rc == GH_OK ? "kept" : "gone");
				bad++;
			}
		} else if (ca[i].rc != GH_OK || rc != GH_OK) {
			fprintf(stderr, "  commit %d beside a failing one: rc %d \"%s\"\n", i,
				ca[i].rc, ca[i].msg);
			bad++;
		}
	}
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	t_store_close(&t);
	T_EQ_INT(bad, 0);
	T_EQ_INT(aa->failures, 0);
	free(aa);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, APPENDS);
}

/* A failing job alone in its transaction (no savepoint then) leaves
 * nothing of itself, and the next commit and the audit chain go on. */
static void test_failing_lone_job(void)
{
	struct t_store t;
	struct commit_arg bad = {0}, good = {0};
	struct gh_audit_event row;
	struct gh_audit_verify rep;
	struct gh_err e;
	cJSON *out;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&row, 0, sizeof(row));
	row.event = "allowed";
	row.tool_name = "before";
	T_EQ_INT(gh_store_audit_append(t.s, &row, NULL, &e), GH_OK);
	bad.s = t.s;
	bad.n = 1;
	bad.bad = 1;
	committer(&bad);
	T_EQ_INT(bad.rc, GH_E_INTERNAL);
	T_CONTAINS(bad.msg, "message without role");
	T_EQ_INT(gh_store_thread_get(t.s, "o", "thr_1", &out, &e), GH_E_NOTFOUND);
	good.s = t.s;
	good.n = 2;
	committer(&good);
	T_EQ_INT(good.rc, GH_OK);
	T_EQ_INT(gh_store_thread_get(t.s, "o", "thr_2", &out, &e), GH_OK);
	cJSON_Delete(out);
	row.tool_name = "after";
	T_EQ_INT(gh_store_audit_append(t.s, &row, NULL, &e), GH_OK);
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, 2);
	t_store_close(&t);
}

/* ---- threads, messages, runs ---- */

static void test_threads(void)
{
	struct t_store t;
	struct gh_err e;
	cJSON *md = cJSON_Parse("{\"topic\":\"tea\"}"), *out, *arr;
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_thread_create(t.s, "alice", "thr_a", "res_1", "assistant", "Tea",
					md, &e),
		 GH_OK);
	T_EQ_INT(gh_store_thread_create(t.s, "alice", "thr_a", "res_1", "assistant", "Again",
					NULL, &e),
		 GH_E_CONFLICT);
	T_CONTAINS(e.msg, "thread thr_a already exists");
	/* ids are per owner: another owner's "thr_a" is a thread of its own */
	T_EQ_INT(gh_store_thread_create(t.s, "bob", "thr_a", "res_9", "assistant", "Bob's",
					NULL, &e),
		 GH_OK);
	T_EQ_INT(gh_store_thread_get(t.s, "bob", "thr_a", &out, &e), GH_OK);
	T_EQ_STR(gh_json_str(out, "title"), "Bob's");
	T_EQ_STR(gh_json_str(out, "resourceId"), "res_9");
	cJSON_Delete(out);
	T_EQ_INT(gh_store_thread_get(t.s, "alice", "thr_a", &out, &e), GH_OK);
	T_EQ_STR(gh_json_str(out, "id"), "thr_a");
	T_EQ_STR(gh_json_str(out, "resourceId"), "res_1");
	T_EQ_STR(gh_json_str(out, "agentId"), "assistant");
	T_EQ_STR(gh_json_str(out, "title"), "Tea");
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(out, "metadata"), "topic"), "tea");
	T_EQ_INT(strlen(gh_json_str(out, "createdAt")), 24);
	cJSON_Delete(out);
	/* an owner without one: not found, whether or not others have one */
	T_EQ_INT(gh_store_thread_get(t.s, "carol", "thr_a", &out, &e), GH_E_NOTFOUND);
	T_ASSERT(out == NULL);
	T_EQ_INT(gh_store_thread_get(t.s, "alice", "thr_zz", &out, &e), GH_E_NOTFOUND);
	/* update: only what is given, only the owner's own thread */
	T_EQ_INT(gh_store_thread_update(t.s, "alice", "thr_a", "Green tea", NULL, NULL, &e), GH_OK);
	T_EQ_INT(gh_store_thread_update(t.s, "carol", "thr_a", "Hijack", NULL, NULL, &e),
		 GH_E_NOTFOUND);
	T_EQ_INT(gh_store_thread_update(t.s, "bob", "thr_a", "Bob's too", NULL, NULL, &e), GH_OK);
	T_EQ_INT(gh_store_thread_get(t.s, "alice", "thr_a", &out, &e), GH_OK);
	T_EQ_STR(gh_json_str(out, "title"), "Green tea");
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(out, "metadata"), "topic"), "tea");
	cJSON_Delete(out);
	/* listing: newest first, filters, pages */
	for (i = 0; i < 5; i++) {
		char id[16];

		snprintf(id, sizeof(id), "thr_%d", i);
		usleep(2000);
		T_EQ_INT(gh_store_thread_create(t.s, "alice", id, i < 3 ? "res_1" : "res_2",
						i == 4 ? "other" : "assistant", NULL, NULL, &e),
			 GH_OK);
	}
	T_EQ_INT(gh_store_thread_list(t.s, "alice", NULL, NULL, 0, 4, &out, &e), GH_OK);
	T_EQ_INT(gh_json_int(out, "total", -1), 6);
	T_EQ_INT(gh_json_bool(out, "hasMore", -1), 1);
	arr = cJSON_GetObjectItem(out, "threads");
	T_EQ_INT(cJSON_GetArraySize(arr), 4);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(arr, 0), "id"), "thr_4");
	cJSON_Delete(out);
	T_EQ_INT(gh_store_thread_list(t.s, "alice", NULL, NULL, 1, 4, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(out, "threads")), 2);
	T_EQ_INT(gh_json_bool(out, "hasMore", -1), 0);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_thread_list(t.s, "alice", "assistant", "res_1", 0, 10, &out, &e), GH_OK);
	T_EQ_INT(gh_json_int(out, "total", -1), 4); /* thr_a, thr_0..2 */
	cJSON_Delete(out);
	T_EQ_INT(gh_store_thread_list(t.s, "bob", NULL, NULL, 0, 10, &out, &e), GH_OK);
	T_EQ_INT(gh_json_int(out, "total", -1), 1); /* bob's own thr_a */
	cJSON_Delete(out);
	T_EQ_INT(gh_store_thread_list(t.s, "carol", NULL, NULL, 0, 10, &out, &e), GH_OK);
	T_EQ_INT(gh_json_int(out, "total", -1), 0);
	cJSON_Delete(out);
	/* delete: the owner's own thread only */
	T_EQ_INT(gh_store_thread_delete(t.s, "carol", "thr_a", &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_thread_delete(t.s, "alice", "thr_a", &e), GH_OK);
	T_EQ_INT(gh_store_thread_delete(t.s, "alice", "thr_a", &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_thread_get(t.s, "alice", "thr_a", &out, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_thread_get(t.s, "bob", "thr_a", &out, &e), GH_OK);
	T_EQ_STR(gh_json_str(out, "title"), "Bob's too");
	cJSON_Delete(out);
	cJSON_Delete(md);
	t_store_close(&t);
}

static struct gh_run_commit run_commit(const char *run, const char *thread, const char *status,
				       const char *expect, const cJSON *msgs, const cJSON *state)
{
	struct gh_run_commit c = {0};

	c.run_id = run;
	c.owner = "alice";
	c.key_id = "key_1";
	c.agent_id = "assistant";
	c.thread_id = thread;
	c.resource_id = "res_1";
	c.messages = msgs;
	c.status = status;
	c.expect_status = expect;
	c.state = state;
	return c;
}

static void test_runs(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_run_commit c;
	struct gh_run_row row;
	cJSON *m1 = cJSON_Parse("[{\"role\":\"user\",\"content\":\"What is the time?\"},"
				"{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\","
				"\"toolCallId\":\"call_1\",\"toolName\":\"clock\",\"args\":{}}]}]");
	cJSON *m2 = cJSON_Parse("[{\"role\":\"tool\",\"content\":[{\"type\":\"tool-result\","
				"\"toolCallId\":\"call_1\",\"toolName\":\"clock\","
				"\"result\":\"noon\"}]},"
				"{\"role\":\"assistant\",\"content\":\"It is noon.\"}]");
	cJSON *state = cJSON_Parse("{\"step\":1,\"calls\":[\"call_1\"]}");
	cJSON *output = cJSON_Parse("{\"text\":\"It is noon.\"}"), *out, *arr;
	const char *pid[] = {"call_1"}, *pname[] = {"clock"}, *psrc[] = {"client"};
	const char *ans[] = {"call_1"};
	char run_id[48], status[16];

	T_EQ_INT(t_store_open(&t), 0);
	/* a new run that creates its thread and waits on a client tool */
	c = run_commit("run_1", "thr_1", "waiting", NULL, m1, state);
	c.create_thread = 1;
	c.thread_title = "Time";
	c.pending_ids = pid;
	c.pending_names = pname;
	c.pending_sources = psrc;
	c.npending = 1;
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	T_EQ_INT(gh_store_run_get(t.s, "alice", "run_1", &row, &e), GH_OK);
	T_EQ_STR(row.status, "waiting");
	T_EQ_STR(row.thread_id, "thr_1");
	T_EQ_STR(row.key_id, "key_1");
	T_EQ_STR(row.agent_id, "assistant");
	T_ASSERT(cJSON_Compare(row.state, state, 1));
	T_ASSERT(row.output == NULL && row.error == NULL);
	T_ASSERT(row.created_at > 0 && row.updated_at == row.created_at);
	gh_run_row_clear(&row);
	T_EQ_INT(gh_store_run_get(t.s, "bob", "run_1", &row, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_run_get(t.s, NULL, "run_1", &row, &e), GH_OK);
	gh_run_row_clear(&row);
	/* the same id again is a conflict */
	c.create_thread = 0;
	c.npending = 0;
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "run run_1 already exists");
	/* the waiting tool call is found by its id alone, for its owner only */
	T_EQ_INT(gh_store_tool_call_find(t.s, "alice", "call_1", run_id, status, &e), GH_OK);
	T_EQ_STR(run_id, "run_1");
	T_EQ_STR(status, "pending");
	T_EQ_INT(gh_store_tool_call_find(t.s, "bob", "call_1", run_id, status, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_tool_call_find(t.s, "alice", "call_9", run_id, status, &e),
		 GH_E_NOTFOUND);
	T_CONTAINS(e.msg, "unknown toolCallId call_9");
	/* the thread got the messages, oldest first */
	T_EQ_INT(gh_store_messages_recent(t.s, "alice", "thr_1", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 2);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(out, 0), "role"), "user");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(out, 0), "content"), "What is the time?");
	T_ASSERT(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "content")));
	cJSON_Delete(out);

	/* the continuation: must find the run waiting */
	c = run_commit("run_1", "thr_1", "completed", "waiting", m2, state);
	c.output = output;
	c.answered_ids = ans;
	c.nanswered = 1;
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	T_EQ_INT(gh_store_tool_call_find(t.s, "alice", "call_1", run_id, status, &e), GH_OK);
	T_EQ_STR(status, "answered");
	T_EQ_INT(gh_store_run_get(t.s, "alice", "run_1", &row, &e), GH_OK);
	T_EQ_STR(row.status, "completed");
	T_ASSERT(cJSON_Compare(row.output, output, 1));
	gh_run_row_clear(&row);
	/* a second continuation of the same wait is a conflict, and changes nothing */
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "run run_1 is completed, not waiting");
	c.run_id = "run_404";
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_E_NOTFOUND);
	/* messages appended in order after the first ones */
	T_EQ_INT(gh_store_messages_recent(t.s, "alice", "thr_1", 3, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 3);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(out, 1), "role"), "tool");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(out, 2), "content"), "It is noon.");
	cJSON_Delete(out);
	T_EQ_INT(gh_store_messages_page(t.s, "alice", "thr_1", 0, 3, &out, &e), GH_OK);
	T_EQ_INT(gh_json_int(out, "total", -1), 4);
	T_EQ_INT(gh_json_bool(out, "hasMore", -1), 1);
	arr = cJSON_GetObjectItem(out, "messages");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(arr, 0), "threadId"), "thr_1");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(arr, 0), "resourceId"), "res_1");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(arr, 0), "runId"), "run_1");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(arr, 0), "type"), "text");
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(arr, 1), "type"), "tool-call");
	cJSON_Delete(out);
	T_EQ_INT(gh_store_messages_page(t.s, "bob", "thr_1", 0, 3, &out, &e), GH_E_NOTFOUND);

	/* answering a call that is already answered (through another waiting run) */
	c = run_commit("run_2", NULL, "waiting", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	c = run_commit("run_2", NULL, "completed", "waiting", NULL, state);
	c.answered_ids = ans;
	c.nanswered = 1;
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "tool call call_1 was already answered");
	T_EQ_INT(gh_store_run_get(t.s, "alice", "run_2", &row, &e), GH_OK);
	T_EQ_STR(row.status, "waiting"); /* the failed commit left nothing behind */
	T_EQ_STR(row.thread_id, "");
	gh_run_row_clear(&row);
	/* a tool call id is unique across runs */
	c = run_commit("run_3", NULL, "waiting", NULL, NULL, state);
	c.pending_ids = pid;
	c.pending_names = pname;
	c.pending_sources = psrc;
	c.npending = 1;
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_E_CONFLICT);
	T_EQ_INT(gh_store_run_get(t.s, "alice", "run_3", &row, &e), GH_E_NOTFOUND);
	/* deleting the thread takes its messages */
	T_EQ_INT(gh_store_thread_delete(t.s, "alice", "thr_1", &e), GH_OK);
	T_EQ_INT(gh_store_messages_recent(t.s, "alice", "thr_1", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 0);
	cJSON_Delete(out);
	cJSON_Delete(m1);
	cJSON_Delete(m2);
	cJSON_Delete(state);
	cJSON_Delete(output);
	t_store_close(&t);
}

/* A continuation is a commit to the caller's own run: with another owner
 * (or agent) it must fail, not report success and change nothing. */
/* A run committed later is seen by every read made after the call that
 * queued it; runs that have more to write are refused. */
static void test_run_commit_later(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_run_commit c;
	struct gh_run_row row;
	cJSON *state = cJSON_Parse("{\"step\":1}");
	cJSON *output = cJSON_Parse("{\"text\":\"Paris.\"}");
	char id[32];
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 0; i < 50; i++) {
		snprintf(id, sizeof(id), "run_later_%d", i);
		c = run_commit(id, NULL, "completed", NULL, NULL, state);
		c.output = output;
		T_EQ_INT(gh_store_run_commit_later(t.s, &c, &e), GH_OK);
		T_EQ_INT(gh_store_run_get(t.s, "alice", id, &row, &e), GH_OK);
		T_EQ_STR(row.status, "completed");
		T_ASSERT(cJSON_Compare(row.output, output, 1));
		T_ASSERT(cJSON_Compare(row.state, state, 1));
		gh_run_row_clear(&row);
	}
	/* a run with a thread, or one already stored, commits now */
	c = run_commit("run_t", "thr_1", "completed", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit_later(t.s, &c, &e), GH_E_BADREQ);
	c = run_commit("run_later_1", NULL, "completed", "running", NULL, state);
	T_EQ_INT(gh_store_run_commit_later(t.s, &c, &e), GH_E_BADREQ);
	T_EQ_INT(gh_store_run_get(t.s, "alice", "run_t", &row, &e), GH_E_NOTFOUND);
	cJSON_Delete(state);
	cJSON_Delete(output);
	t_store_close(&t);
}

struct wm_read {
	struct gh_store *s;
	atomic_int done;
};

static void *read_working_memory(void *arg)
{
	struct wm_read *w = arg;
	struct gh_err e;
	char *wm = NULL;

	gh_store_working_memory_get(w->s, "alice", "r", &wm, &e);
	free(wm);
	atomic_store(&w->done, 1);
	return NULL;
}

/* A read of a table no queued job writes does not wait for the queue: with
 * the writer held busy and a run record queued, reading working memory
 * returns at once, while reading runs sees the record once it commits. */
static void test_reads_skip_unrelated_queue(void)
{
	struct t_store t;
	struct blocker bl;
	struct wm_read w;
	struct gh_run_commit c;
	struct gh_run_row row;
	struct gh_err e;
	pthread_t th, rd;
	cJSON *state = cJSON_Parse("{\"step\":1}");
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	bl.s = t.s;
	sem_init(&bl.started, 0, 0);
	sem_init(&bl.release, 0, 0);
	T_EQ_INT(pthread_create(&th, NULL, blocker_thread, &bl), 0);
	while (sem_wait(&bl.started) != 0)
		;
	c = run_commit("run_queued", NULL, "completed", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit_later(t.s, &c, &e), GH_OK);
	w.s = t.s;
	atomic_store(&w.done, 0);
	T_EQ_INT(pthread_create(&rd, NULL, read_working_memory, &w), 0);
	for (i = 0; i < 400 && !atomic_load(&w.done); i++)
		usleep(5000);
	T_ASSERT(atomic_load(&w.done));    /* not behind the busy writer */
	T_EQ_INT(queued_jobs(t.s), 1);     /* and the run record still waits */
	sem_post(&bl.release);
	pthread_join(rd, NULL);
	pthread_join(th, NULL);
	T_EQ_INT(gh_store_run_get(t.s, "alice", "run_queued", &row, &e), GH_OK);
	gh_run_row_clear(&row);
	sem_destroy(&bl.started);
	sem_destroy(&bl.release);
	cJSON_Delete(state);
	t_store_close(&t);
}

/* Waits (up to 10 s) until the store has committed n jobs since st0. */
static int jobs_committed(struct gh_store *s, const struct gh_store_stats *st0, uint64_t n)
{
	struct gh_store_stats st;
	int i;

	for (i = 0; i < 1000; i++) {
		gh_store_stats(s, &st);
		if (st.jobs - st0->jobs >= n)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* Queues the completed run "<prefix>_<n>" of state to commit later. */
static enum gh_code commit_later_nth(struct gh_store *s, const char *prefix, int n,
				     const cJSON *state)
{
	struct gh_run_commit c;
	struct gh_err e;
	char id[32];

	snprintf(id, sizeof(id), "%s_%d", prefix, n);
	c = run_commit(id, NULL, "completed", NULL, NULL, state);
	return gh_store_run_commit_later(s, &c, &e);
}

/* Runs committed later reach the database with no read to push them:
 * housekeeping commits what waits in the queue. */
static void test_run_commit_later_unread(void)
{
	struct t_store t;
	struct gh_store_stats st0;
	cJSON *state = cJSON_Parse("{\"step\":1}");
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	gh_store_stats(t.s, &st0);
	for (i = 0; i < 30; i++)
		T_EQ_INT(commit_later_nth(t.s, "run_unread", i, state), GH_OK);
	T_ASSERT(jobs_committed(t.s, &st0, 30)); /* (and whatever else committed) */
	cJSON_Delete(state);
	t_store_close(&t);
}

/* Run records committed later one at a time, with pauses: one queued while
 * housekeeping looks at the queue on its own (a pause shorter than its
 * warm spell: no wake-up sent) and one after it went back to waiting
 * unwoken (a pause longer): each reaches the database with no read. */
static void test_run_commit_later_spaced(void)
{
	static const int pause_ms[] = {0, 30, 1300};
	struct t_store t;
	struct gh_store_stats st0;
	cJSON *state = cJSON_Parse("{\"step\":1}");
	size_t i;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 0; i < sizeof(pause_ms) / sizeof(pause_ms[0]); i++) {
		usleep((useconds_t)pause_ms[i] * 1000);
		gh_store_stats(t.s, &st0);
		T_EQ_INT(commit_later_nth(t.s, "run_spaced", (int)i, state), GH_OK);
		T_ASSERT(jobs_committed(t.s, &st0, 1));
	}
	cJSON_Delete(state);
	t_store_close(&t);
}

static void test_run_commit_checks_owner(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_run_commit c;
	struct gh_run_row row;
	cJSON *state = cJSON_CreateObject();
	enum gh_code rc;

	T_EQ_INT(t_store_open(&t), 0);
	c = run_commit("run_1", NULL, "waiting", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	c = run_commit("run_1", NULL, "completed", "waiting", NULL, state);
	c.owner = "mallory";
	rc = gh_store_run_commit(t.s, &c, &e);
	T_EQ_INT(gh_store_run_get(t.s, NULL, "run_1", &row, &e), GH_OK);
	T_EQ_STR(row.status, "waiting");
	gh_run_row_clear(&row);
	cJSON_Delete(state);
	t_store_close(&t);
	if (rc == GH_OK)
		T_FAIL("a continuation by another owner reported success without saving");
}

struct ids {
	char v[8][48];
	int n;
};

static int collect_id(void *ud, const char *id)
{
	struct ids *l = ud;

	if (l->n < 8)
		gh_strlcpy(l->v[l->n++], id, sizeof(l->v[0]));
	return 0;
}

static void test_transition_recover(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_run_commit c;
	struct gh_run_row row;
	struct ids l = {0};
	cJSON *state = cJSON_CreateObject();
	int n = -1;

	T_EQ_INT(t_store_open(&t), 0);
	c = run_commit("run_w", NULL, "waiting", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	c = run_commit("run_s", NULL, "suspended", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	c = run_commit("run_r", NULL, "running", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	c = run_commit("run_c", NULL, "completed", NULL, NULL, state);
	T_EQ_INT(gh_store_run_commit(t.s, &c, &e), GH_OK);
	/* a continuation claims the waiting run, once */
	T_EQ_INT(gh_store_run_transition(t.s, "run_w", "waiting", "running", &e), GH_OK);
	T_EQ_INT(gh_store_run_transition(t.s, "run_w", "waiting", "running", &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "run run_w is running, not waiting");
	T_EQ_INT(gh_store_run_transition(t.s, "run_s", "suspended", "running", &e), GH_OK);
	T_EQ_INT(gh_store_run_transition(t.s, "run_x", "waiting", "running", &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_runs_with_status(t.s, "running", collect_id, &l, &e), GH_OK);
	T_EQ_INT(l.n, 3);
	/* a crash: claimed runs go back to where they were; a run that was
	 * running from the start cannot go back and is failed */
	T_EQ_INT(gh_store_runs_recover(t.s, &n, &e), GH_OK);
	T_EQ_INT(n, 3);
	T_EQ_INT(gh_store_run_get(t.s, NULL, "run_w", &row, &e), GH_OK);
	T_EQ_STR(row.status, "waiting");
	gh_run_row_clear(&row);
	T_EQ_INT(gh_store_run_get(t.s, NULL, "run_s", &row, &e), GH_OK);
	T_EQ_STR(row.status, "suspended");
	gh_run_row_clear(&row);
	T_EQ_INT(gh_store_run_get(t.s, NULL, "run_r", &row, &e), GH_OK);
	T_EQ_STR(row.status, "failed");
	T_EQ_STR(row.error, "interrupted by a restart");
	gh_run_row_clear(&row);
	T_EQ_INT(gh_store_run_get(t.s, NULL, "run_c", &row, &e), GH_OK);
	T_EQ_STR(row.status, "completed");
	gh_run_row_clear(&row);
	T_EQ_INT(gh_store_runs_recover(t.s, &n, &e), GH_OK);
	T_EQ_INT(n, 0);
	/* the recovered run can be claimed again */
	T_EQ_INT(gh_store_run_transition(t.s, "run_w", "waiting", "running", &e), GH_OK);
	cJSON_Delete(state);
	t_store_close(&t);
}

/* ---- memory ---- */

/* More matches than the limit: the search returns the best of them, best
 * first, the same rows a smaller limit's search begins with; of memories
 * that score alike, SQLite keeps the one saved first and PostgreSQL the
 * newest (ORDER BY score, id DESC). */
static void test_memory_best_of_many(void)
{
	struct t_store t;
	struct gh_err e;
	cJSON *all = NULL, *top = NULL, *ties = NULL;
	int64_t id[30], twin[5];
	char text[200];
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 0; i < 30; i++) {
		/* "plum" i % 7 + 1 times, in texts of other lengths: scores
		 * differ, in no order the ids have */
		int k, n = 0, times = i % 7 + 1;

		for (k = 0; k < times; k++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, "plum ");
		for (k = 0; k < i % 5; k++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, "filler%d ", k);
		T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", text, NULL, &id[i], &e), GH_OK);
	}
	for (i = 0; i < 5; i++)
		T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", "kiwi kiwi", NULL, &twin[i], &e),
			 GH_OK);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "plum", 20, &all, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(all), 20);
	for (i = 1; i < 20; i++)
		T_ASSERT(cJSON_GetArrayItem(all, i - 1)->child &&
			 cJSON_GetObjectItem(cJSON_GetArrayItem(all, i - 1), "score")->valuedouble >=
				 cJSON_GetObjectItem(cJSON_GetArrayItem(all, i), "score")->valuedouble);
	/* the best of all 30 is first: on SQLite (bm25) 7 plums and no filler
	 * (i = 20); PostgreSQL's ts_rank does not weigh the length, so of the
	 * four with 7 plums the newest (i = 27) */
	T_EQ_INT(result_id(all, 0), t_store_pg() ? id[27] : id[20]);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "plum", 3, &top, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(top), 3);
	for (i = 0; i < 3; i++)
		T_EQ_INT(result_id(top, i), result_id(all, i));
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "kiwi", 3, &ties, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(ties), 3);
	for (i = 0; i < 3; i++)
		T_EQ_INT(result_id(ties, i), t_store_pg() ? twin[4 - i] : twin[i]);
	cJSON_Delete(all);
	cJSON_Delete(top);
	cJSON_Delete(ties);
	t_store_close(&t);
}

static void test_memory(void)
{
	static const char *const junk_queries[] = {
		"colour\"", "\"", "NEAR(favourite colour)", "content:blue", "*", "blue*",
		"favourite AND OR NOT colour", "-blue", "^blue", "(blue", "blue)",
		"'; DROP TABLE x",
		"colour:", "{content tags}: blue", "\xc3\xa9t\xc3\xa9 blue", "a\"b\"c", "",
	};
	struct t_store t;
	struct gh_err e;
	int64_t tea, fav, whale, theory, other_owner, other_res, id;
	cJSON *out;
	size_t i;
	char *wm;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", "I like green tea", "drink", &tea, &e),
		 GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1",
				      "The favourite colour of the user is blue", NULL, &fav, &e),
		 GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", "Blue whales are big", NULL, &whale,
				      &e),
		 GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", "Colour theory is fun", NULL, &theory,
				      &e),
		 GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "bob", "r1", "Bob's favourite colour is red", NULL,
				      &other_owner, &e),
		 GH_OK);
	T_EQ_INT(gh_store_memory_save(t.s, "alice", "r2", "favourite colour in r2: green", NULL,
				      &other_res, &e),
		 GH_OK);
	T_ASSERT(tea > 0 && fav > tea);

	/* the memory matching both words ranks first; score falls */
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "favourite colour", 10, &out, &e),
		 GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 2); /* fav and theory; only alice's r1 */
	T_EQ_INT(result_id(out, 0), fav);
	T_EQ_INT(result_id(out, 1), theory);
	T_ASSERT(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "score")->valuedouble >
		 cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "score")->valuedouble);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(out, 0), "content"),
		 "The favourite colour of the user is blue");
	T_EQ_INT(strlen(gh_json_str(cJSON_GetArrayItem(out, 0), "createdAt")), 24);
	cJSON_Delete(out);
	/* tags are searched; limit is kept */
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "drink", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	T_EQ_INT(result_id(out, 0), tea);
	T_EQ_STR(gh_json_str(cJSON_GetArrayItem(out, 0), "tags"), "drink");
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "blue colour tea", 2, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 2);
	cJSON_Delete(out);
	/* owner and resource isolation */
	T_EQ_INT(gh_store_memory_search(t.s, "bob", "r1", "favourite colour", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	T_EQ_INT(result_id(out, 0), other_owner);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r2", "favourite colour", 10, &out, &e),
		 GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	T_EQ_INT(result_id(out, 0), other_res);
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_search(t.s, "carol", "r1", "colour", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 0);
	cJSON_Delete(out);

	/* FTS syntax in a query is taken as plain words, never an error */
	for (i = 0; i < GH_ARRAY_LEN(junk_queries); i++) {
		if (gh_store_memory_search(t.s, "alice", "r1", junk_queries[i], 10, &out, &e) !=
		    GH_OK)
			T_FAIL("query \"%s\": %s", junk_queries[i], e.msg);
		cJSON_Delete(out);
	}
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "content:blue", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 2); /* "content" OR "blue": fav, whale */
	cJSON_Delete(out);
	/* no words at all: the newest memories */
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "?!", 2, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 2);
	T_EQ_INT(result_id(out, 0), theory);
	cJSON_Delete(out);
	/* a query too long to search is refused, not truncated silently */
	{
		char *q = malloc(10001);

		memset(q, 'a', 10000);
		q[10000] = '\0';
		T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", q, 10, &out, &e), GH_E_BADREQ);
		free(q);
	}

	/* delete: own memories only */
	T_EQ_INT(gh_store_memory_delete(t.s, "bob", "r1", fav, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_memory_delete(t.s, "alice", "r2", fav, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_memory_delete(t.s, "alice", "r1", fav, &e), GH_OK);
	T_EQ_INT(gh_store_memory_delete(t.s, "alice", "r1", fav, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "favourite", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 0); /* gone from the index too */
	cJSON_Delete(out);
	T_EQ_INT(gh_store_memory_save(t.s, "alice", "r1", "favourite number is 7", NULL, &id, &e),
		 GH_OK);
	T_ASSERT(id != fav);
	T_EQ_INT(gh_store_memory_search(t.s, "alice", "r1", "favourite", 10, &out, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(out), 1);
	T_EQ_INT(result_id(out, 0), id);
	cJSON_Delete(out);

	/* working memory: one per (owner, resource), replaced on set */
	T_EQ_INT(gh_store_working_memory_get(t.s, "alice", "r1", &wm, &e), GH_OK);
	T_ASSERT(wm == NULL);
	T_EQ_INT(gh_store_working_memory_set(t.s, "alice", "r1", "Name: Alice", &e), GH_OK);
	T_EQ_INT(gh_store_working_memory_set(t.s, "alice", "r1", "Name: Alice\nTea: green", &e),
		 GH_OK);
	T_EQ_INT(gh_store_working_memory_set(t.s, "bob", "r1", "Name: Bob", &e), GH_OK);
	T_EQ_INT(gh_store_working_memory_get(t.s, "alice", "r1", &wm, &e), GH_OK);
	T_EQ_STR(wm, "Name: Alice\nTea: green");
	free(wm);
	T_EQ_INT(gh_store_working_memory_get(t.s, "alice", "r2", &wm, &e), GH_OK);
	T_ASSERT(wm == NULL);
	T_EQ_INT(gh_store_working_memory_get(t.s, "bob", "r1", &wm, &e), GH_OK);
	T_EQ_STR(wm, "Name: Bob");
	free(wm);
	t_store_close(&t);
}

/* Sets working memory behind the store's back: another program on the
 * database, which moves no generation. */
static void wm_behind(struct t_store *t, const char *resource, const char *content)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "INSERT INTO working_memory (owner, resource_id, content, "
		 "updated_at) VALUES ('alice', '%s', '%s', 1) ON CONFLICT (owner, resource_id) "
		 "DO UPDATE SET content = excluded.content", resource, content);
	T_EQ_INT(t_store_sql_behind(t, sql), 0);
}

/* The working memory of (alice, resource): "" for none, "<error>" when
 * the read failed. */
static const char *wm_of(struct t_store *t, const char *resource)
{
	static char got[64];
	struct gh_err e;
	char *wm = NULL;

	if (gh_store_working_memory_get(t->s, "alice", resource, &wm, &e) != GH_OK)
		return "<error>";
	gh_strlcpy(got, wm ? wm : "", sizeof(got));
	free(wm);
	return got;
}

struct wm_tx {
	const char *content;
	int fail;
};

static enum gh_code wm_tx_fn(struct gh_store_tx *tx, void *ud, struct gh_err *e)
{
	struct wm_tx *x = ud;
	enum gh_code rc = gh_store_working_memory_set_tx(tx, "alice", "r1", x->content, e);

	if (rc == GH_OK && x->fail)
		rc = gh_err_set(e, GH_E_IO, "the effect's row could not be written");
	return rc;
}

/* Working memory reads are kept (an absence too) until a write, by this
 * store, in a transaction that commits later, or by another store on the
 * same database, moves the generation. */
static void test_working_memory_cache(void)
{
	struct t_store t, other;
	struct wm_tx x = {"from a tx", 0};
	struct gh_err e;
	PGconn *listener = NULL;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_working_memory_set(t.s, "alice", "r1", "v1", &e), GH_OK);
	T_EQ_STR(wm_of(&t, "r1"), "v1");
	T_EQ_STR(wm_of(&t, "r2"), "");
	/* kept: what another program writes is not seen ... */
	wm_behind(&t, "r1", "behind");
	wm_behind(&t, "r2", "behind too");
	T_EQ_STR(wm_of(&t, "r1"), "v1");
	T_EQ_STR(wm_of(&t, "r2"), "");
	/* ... when a key changed ... */
	gh_store_caches_changed(t.s, "");
	T_EQ_STR(wm_of(&t, "r1"), "v1");
	/* ... until working memory is said to have changed */
	gh_store_caches_changed(t.s, GH_STORE_CACHE_WM);
	T_EQ_STR(wm_of(&t, "r1"), "behind");
	T_EQ_STR(wm_of(&t, "r2"), "behind too");
	wm_behind(&t, "r2", "again");
	gh_store_caches_changed(t.s, NULL); /* notifications were missed */
	T_EQ_STR(wm_of(&t, "r2"), "again");

	/* this store's own writes are seen at once */
	T_EQ_INT(gh_store_working_memory_set(t.s, "alice", "r1", "v2", &e), GH_OK);
	T_EQ_STR(wm_of(&t, "r1"), "v2");
	T_EQ_INT(gh_store_tx_run(t.s, wm_tx_fn, &x, &e), GH_OK);
	T_EQ_STR(wm_of(&t, "r1"), "from a tx");
	/* a transaction rolled back leaves the value, and the cache, right */
	x.content = "rolled back";
	x.fail = 1;
	T_EQ_INT(gh_store_tx_run(t.s, wm_tx_fn, &x, &e), GH_E_IO);
	T_EQ_STR(wm_of(&t, "r1"), "from a tx");

	/* another store on the database (the CLI, another replica) writes */
	memset(&other, 0, sizeof(other));
	memcpy(other.path, t.path, sizeof(other.path));
	T_EQ_INT(t_store_reopen(&other, 0, 0, &e), GH_OK);
	if (t_store_pg())
		T_ASSERT((listener = t_pg_listen(GH_STORE_KEYS_CHANNEL)) != NULL);
	T_EQ_INT(gh_store_working_memory_set(other.s, "alice", "r1", "by the other", &e), GH_OK);
	if (t_store_pg()) {
		/* every replica hears it on its events connection; here, on a
		 * listener of our own */
		PGnotify *n = t_pg_notified(listener);

		T_ASSERT(n != NULL);
		if (n) {
			T_EQ_STR(n->extra, GH_STORE_CACHE_WM);
			gh_store_caches_changed(t.s, n->extra);
			PQfreemem(n);
		}
		PQfinish(listener);
	}
	T_EQ_STR(wm_of(&t, "r1"), "by the other");
	gh_store_close(other.s);

	if (t_store_pg()) {
		/* a notification heard late: a kept read serves a second at most */
		wm_behind(&t, "r1", "aged");
		T_EQ_STR(wm_of(&t, "r1"), "by the other");
		usleep((GH_STORE_KEY_CACHE_MS + 50) * 1000);
		T_EQ_STR(wm_of(&t, "r1"), "aged");
	}
	t_store_close(&t);
}

/* Readers racing a writer never see working memory older than the last
 * write that had returned when their read began: a read that began
 * before a commit and ended after it must not be kept as current. */
struct wm_race {
	struct gh_store *s;
	atomic_int written;             /* the last version whose set returned */
	atomic_int done;
	atomic_int stale, failed;
	atomic_long reads;
};

static void *wm_race_reader(void *arg)
{
	struct wm_race *x = arg;

	while (!atomic_load(&x->done)) {
		int before = atomic_load(&x->written), got = 0;
		struct gh_err e;
		char *wm = NULL;

		if (gh_store_working_memory_get(x->s, "alice", "race", &wm, &e) != GH_OK ||
		    (wm && sscanf(wm, "v%d", &got) != 1))
			atomic_fetch_add(&x->failed, 1);
		else if (got < before)
			atomic_fetch_add(&x->stale, 1);
		free(wm);
		atomic_fetch_add(&x->reads, 1);
	}
	return NULL;
}

static void test_working_memory_cache_race(void)
{
	struct t_store t;
	struct wm_race x;
	pthread_t rd[3];
	struct gh_err e;
	char v[16];
	int64_t t0;
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&x, 0, sizeof(x));
	x.s = t.s;
	for (i = 0; i < 3; i++)
		T_EQ_INT(pthread_create(&rd[i], NULL, wm_race_reader, &x), 0);
	/* at least 300 writes, and on until the readers have raced them 300
	 * times (a loaded machine may start them late; at most 10 s) */
	t0 = gh_mono_ns();
	for (i = 1; i <= 300 || (atomic_load(&x.reads) <= 300 &&
				 gh_mono_ns() - t0 < INT64_C(10000000000));
	     i++) {
		snprintf(v, sizeof(v), "v%d", i);
		T_EQ_INT(gh_store_working_memory_set(t.s, "alice", "race", v, &e), GH_OK);
		atomic_store(&x.written, i);
	}
	atomic_store(&x.done, 1);
	for (i = 0; i < 3; i++)
		pthread_join(rd[i], NULL);
	T_EQ_INT(atomic_load(&x.failed), 0);
	T_EQ_INT(atomic_load(&x.stale), 0);
	T_ASSERT(atomic_load(&x.reads) > 300);
	t_store_close(&t);
}

/* ---- rate-limit state ---- */

struct rl_seen {
	char keys[8][32];
	int64_t tats[8];
	int n;
};

static int rl_cb(void *ud, const char *key, int64_t tat)
{
	struct rl_seen *r = ud;

	if (r->n < 8) {
		gh_strlcpy(r->keys[r->n], key, sizeof(r->keys[0]));
		r->tats[r->n++] = tat;
	}
	return 0;
}

static int64_t rl_get(const struct rl_seen *r, const char *key)
{
	int i;

	for (i = 0; i < r->n; i++)
		if (!strcmp(r->keys[i], key))
			return r->tats[i];
	return -1;
}

static void test_ratelimit_state(void)
{
	struct t_store t;
	struct gh_err e;
	struct rl_seen r = {0};
	int64_t now = gh_now_ms();
	const char *k1[] = {"key_a", "key_b", "tool:key_a:send_email"};
	int64_t t1[] = {now + 60000, now - 5000, now + 120000};
	const char *k2[] = {"key_a"};
	int64_t t2[] = {now + 90000};

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_ratelimit_save(t.s, k1, t1, 3, &e), GH_OK);
	T_EQ_INT(gh_store_ratelimit_load(t.s, rl_cb, &r, &e), GH_OK);
	T_EQ_INT(r.n, 3);
	T_EQ_INT(rl_get(&r, "tool:key_a:send_email"), now + 120000);
	/* a later snapshot updates, and drops state that has run out */
	T_EQ_INT(gh_store_ratelimit_save(t.s, k2, t2, 1, &e), GH_OK);
	memset(&r, 0, sizeof(r));
	T_EQ_INT(gh_store_ratelimit_load(t.s, rl_cb, &r, &e), GH_OK);
	T_EQ_INT(r.n, 2);
	T_EQ_INT(rl_get(&r, "key_a"), now + 90000);
	T_EQ_INT(rl_get(&r, "key_b"), -1);
	/* it survives a restart */
	gh_store_close(t.s);
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	memset(&r, 0, sizeof(r));
	T_EQ_INT(gh_store_ratelimit_load(t.s, rl_cb, &r, &e), GH_OK);
	T_EQ_INT(rl_get(&r, "tool:key_a:send_email"), now + 120000);
	t_store_close(&t);
}

/* ---- two stores on one database: one audit chain ---- */

#define REPLICA_WRITERS 6

/* Two stores open on the same database (two replicas of gatehouse) append
 * at once: every row still chains to the one before it, whichever store
 * wrote either, and no seq is handed out twice. */
static void test_two_stores_one_chain(void)
{
	static struct append_arg args[REPLICA_WRITERS];
	pthread_t th[REPLICA_WRITERS];
	struct t_store t;
	struct gh_store *first_store;
	struct gh_err e;
	struct gh_audit_verify rep;
	int64_t first, last, count;
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	first_store = t.s;
	t.s = NULL;
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	for (i = 0; i < REPLICA_WRITERS; i++) {
		memset(&args[i], 0, sizeof(args[i]));
		args[i].s = i % 2 ? t.s : first_store;
		args[i].id = i;
		T_EQ_INT(pthread_create(&th[i], NULL, appender, &args[i]), 0);
	}
	for (i = 0; i < REPLICA_WRITERS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < REPLICA_WRITERS; i++)
		if (args[i].failures)
			T_FAIL("writer %d: %d appends failed: %s", i, args[i].failures,
			       args[i].err);
	T_EQ_INT(gh_store_audit_bounds(first_store, &first, &last, &count, &e), GH_OK);
	T_EQ_INT(first, 1);
	T_EQ_INT(last, REPLICA_WRITERS * APPENDS);
	T_EQ_INT(count, REPLICA_WRITERS * APPENDS);
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("chain broken: %s", rep.message);
	T_EQ_INT(rep.rows, REPLICA_WRITERS * APPENDS);
	gh_store_close(first_store);
	t_store_close(&t);
}

/* ---- PostgreSQL: connections lost ---- */

/* The server ends every connection of the store: the write that finds its
 * connection gone fails with GH_E_UNAVAILABLE (a 503, not an internal
 * error), and writes work again once the pool has connected anew. */
static void test_pg_connection_lost(void)
{
	struct t_store t;
	struct gh_err e;
	int64_t id;
	int i, ok = 0, unavailable = 0;

	if (!t_store_pg()) {
		fprintf(stderr, "  skipped on SQLite: PostgreSQL's connections (PostgreSQL only)\n");
		return;
	}
	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(gh_store_memory_save(t.s, "o", "r", "before", NULL, &id, &e), GH_OK);
	/* waits (up to 5 s) for each backend to have ended; only gatehouse's
	 * (its application_name): the integration tests running beside this
	 * one reach their own databases through psql sessions on this one */
	T_ASSERT(sql_int(t.path, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000) "
				 "FROM pg_stat_activity WHERE datname = current_database() AND "
				 "application_name = 'gatehouse' AND pid <> pg_backend_pid()) x") >= 1);
	for (i = 0; i < 16 && !ok; i++) {
		enum gh_code rc = gh_store_memory_save(t.s, "o", "r", "after", NULL, &id, &e);

		if (rc == GH_OK)
			ok = 1;
		else if (rc == GH_E_UNAVAILABLE)
			unavailable++;
		else
			T_FAIL("write after the connections ended: %d %s", rc, e.msg);
	}
	T_ASSERT(unavailable >= 1);
	T_ASSERT(ok);
	t_store_close(&t);
}

/* ---- A2A tasks ---- */

/* A task is inserted once, read by its owner and agent only, and saved
 * only from the state the caller expects. */
static void test_a2a_tasks(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_a2a_task k, got;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.id, "task_1", sizeof(k.id));
	gh_strlcpy(k.context_id, "ctx_1", sizeof(k.context_id));
	gh_strlcpy(k.agent_id, "a", sizeof(k.agent_id));
	gh_strlcpy(k.owner, "alice", sizeof(k.owner));
	gh_strlcpy(k.key_id, "key_1", sizeof(k.key_id));
	gh_strlcpy(k.run_id, "run_1", sizeof(k.run_id));
	gh_strlcpy(k.state, GH_A2A_WORKING, sizeof(k.state));
	k.history = cJSON_CreateArray();
	k.artifacts = cJSON_CreateArray();
	k.created_at = k.updated_at = 1000;
	T_EQ_INT(gh_store_a2a_task_insert(t.s, &k, &e), GH_OK);
	T_EQ_INT(gh_store_a2a_task_insert(t.s, &k, &e), GH_E_CONFLICT);
	T_EQ_INT(gh_store_a2a_task_get(t.s, "bob", "a", "task_1", &got, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_store_a2a_task_get(t.s, "alice", "b", "task_1", &got, &e), GH_E_NOTFOUND);
	gh_strlcpy(k.state, GH_A2A_COMPLETED, sizeof(k.state));
	cJSON_AddItemToArray(k.artifacts, cJSON_CreateString("done"));
	k.updated_at = 2000;
	T_EQ_INT(gh_store_a2a_task_save(t.s, &k, GH_A2A_WORKING, &e), GH_OK);
	/* not from a state it is no longer in */
	T_EQ_INT(gh_store_a2a_task_save(t.s, &k, GH_A2A_WORKING, &e), GH_E_CONFLICT);
	T_EQ_INT(gh_store_a2a_task_get(t.s, "alice", "a", "task_1", &got, &e), GH_OK);
	T_EQ_STR(got.state, GH_A2A_COMPLETED);
	T_EQ_STR(got.context_id, "ctx_1");
	T_EQ_INT(cJSON_GetArraySize(got.artifacts), 1);
	T_EQ_INT(got.updated_at, 2000);
	gh_a2a_task_clear(&got);
	gh_a2a_task_clear(&k);
	t_store_close(&t);
}

/* ---- the row accessors row callbacks read columns with ---- */

struct acc {
	int count;
	int null0, null1, null8;
	const char *text0;               /* NULL column: NULL text (kept as a flag) */
	int64_t int0, int2, int3, int4, int5, int6, int7, int10;
	double dbl0, dbl5;
	unsigned char blob1[8];
	size_t len0, len1, len8, len9;
	int blob8_null;
	char text2[32], text8[8], text9[16], text10[8], small[4];
	cJSON *json_bad, *json_null, *json_ok;
};

static int acc_row(struct store_row *sr, void *ud)
{
	struct acc *a = ud;
	const void *b;
	const char *t;

	a->count = store_col_count(sr);
	a->null0 = store_col_isnull(sr, 0);
	a->null1 = store_col_isnull(sr, 1);
	a->null8 = store_col_isnull(sr, 8);
	a->text0 = store_col_text(sr, 0);
	a->int0 = store_col_int(sr, 0);
	a->dbl0 = store_col_double(sr, 0);
	store_col_blob(sr, 0, &a->len0);
	if ((b = store_col_blob(sr, 1, &a->len1)) && a->len1 <= sizeof(a->blob1))
		memcpy(a->blob1, b, a->len1);
	a->int2 = store_col_int(sr, 2);
	t = store_col_text(sr, 2);
	gh_strlcpy(a->text2, t ? t : "(null)", sizeof(a->text2));
	a->int3 = store_col_int(sr, 3);
	a->int4 = store_col_int(sr, 4);
	a->int5 = store_col_int(sr, 5);
	a->dbl5 = store_col_double(sr, 5);
	a->int6 = store_col_int(sr, 6);
	a->int7 = store_col_int(sr, 7);
	t = store_col_text(sr, 8);
	gh_strlcpy(a->text8, t ? t : "(null)", sizeof(a->text8));
	a->blob8_null = store_col_blob(sr, 8, &a->len8) == NULL;
	store_col_copy(sr, 9, a->text9, sizeof(a->text9));
	store_col_blob(sr, 9, &a->len9);
	store_col_copy(sr, 10, a->text10, sizeof(a->text10));
	a->int10 = store_col_int(sr, 10);
	store_col_copy(sr, 9, a->small, sizeof(a->small));
	a->json_bad = store_col_json(sr, 4);
	a->json_null = store_col_json(sr, 0);
	a->json_ok = store_col_json(sr, 11);
	return 0;
}

struct bools {
	int64_t yes, no;
	char yes_text[8], no_text[8];
};

static int bool_row(struct store_row *sr, void *ud)
{
	struct bools *b = ud;

	b->yes = store_col_int(sr, 0);
	b->no = store_col_int(sr, 1);
	store_col_copy(sr, 0, b->yes_text, sizeof(b->yes_text));
	store_col_copy(sr, 1, b->no_text, sizeof(b->no_text));
	return 0;
}

static void test_row_accessors(void)
{
	struct t_store t;
	struct gh_err e;
	struct bools b;
	struct acc a;
	int n = 0;

	memset(&a, 0, sizeof(a));
	a.text0 = "unset";
	T_EQ_INT(t_store_open(&t), 0);
	/* the same values on each backend: PostgreSQL spells a blob as bytea */
	T_EQ_INT(store_read(t.s, t_store_pg()
			    ? "SELECT NULL, '\\x00ff0041'::bytea, 9223372036854775807, "
			      "-9223372036854775807 - 1, '12ab', 3.9, -2.5, 1e300, '', "
			      "'h\xc3\xa9llo', 42, '{\"a\":[1]}'"
			    : "SELECT NULL, x'00ff0041', 9223372036854775807, "
			      "-9223372036854775807 - 1, '12ab', 3.9, -2.5, 1e300, '', "
			      "'h\xc3\xa9llo', 42, '{\"a\":[1]}'",
			    NULL, 0, 0, acc_row, &a, &n, "reading accessors", &e), GH_OK);
	T_EQ_INT(n, 1);
	T_EQ_INT(a.count, 12);
	/* NULL: no text, 0, no bytes */
	T_EQ_INT(a.null0, 1);
	T_ASSERT(a.text0 == NULL);
	T_EQ_INT(a.int0, 0);
	T_ASSERT(a.dbl0 == 0.0);
	T_EQ_INT((int64_t)a.len0, 0);
	T_ASSERT(a.json_null == NULL);
	/* a blob keeps its NUL bytes and its length */
	T_EQ_INT(a.null1, 0);
	T_EQ_INT((int64_t)a.len1, 4);
	T_ASSERT(!memcmp(a.blob1, "\x00\xff\x00\x41", 4));
	/* integers at both ends of int64_t, and as text */
	T_EQ_INT(a.int2, INT64_MAX);
	T_EQ_STR(a.text2, "9223372036854775807");
	T_EQ_INT(a.int3, INT64_MIN);
	/* text reads as far as it is a number; reals truncate toward zero and
	 * clamp to int64_t */
	T_EQ_INT(a.int4, 12);
	T_EQ_INT(a.int5, 3);
	T_ASSERT(a.dbl5 > 3.89 && a.dbl5 < 3.91);
	T_EQ_INT(a.int6, -2);
	T_EQ_INT(a.int7, INT64_MAX);
	/* empty text is text, not NULL, and has no bytes */
	T_EQ_INT(a.null8, 0);
	T_EQ_STR(a.text8, "");
	T_ASSERT(a.blob8_null);
	T_EQ_INT((int64_t)a.len8, 0);
	/* UTF-8 text: its bytes, and a copy cut to the buffer */
	T_EQ_STR(a.text9, "h\xc3\xa9llo");
	T_EQ_INT((int64_t)a.len9, 6);
	T_EQ_INT((int64_t)strlen(a.small), 3);
	/* an integer column reads as its decimal text */
	T_EQ_STR(a.text10, "42");
	T_EQ_INT(a.int10, 42);
	/* JSON: unparsable is NULL, parsable is parsed */
	T_ASSERT(a.json_bad == NULL);
	T_ASSERT(cJSON_IsArray(cJSON_GetObjectItem(a.json_ok, "a")));
	cJSON_Delete(a.json_ok);
	/* a comparison reads as 1 or 0 (PostgreSQL's booleans too) */
	memset(&b, 0, sizeof(b));
	T_EQ_INT(store_read(t.s, "SELECT 1 = 1, 1 = 2", NULL, 0, 0, bool_row, &b, &n,
			    "reading booleans", &e), GH_OK);
	T_EQ_INT(b.yes, 1);
	T_EQ_INT(b.no, 0);
	T_EQ_STR(b.yes_text, "1");
	T_EQ_STR(b.no_text, "0");
	t_store_close(&t);
}

/* ---- audit queries ---- */

struct page {
	int64_t seqs[64];
	int n;
	const char *want_key; /* every row must have it (NULL: no check) */
	int wrong;
};

static int page_cb(void *ud, const struct gh_audit_row *r)
{
	struct page *p = ud;

	if (p->want_key && (!r->ev->key_id || strcmp(r->ev->key_id, p->want_key)))
		p->wrong++;
	if (p->n < 64)
		p->seqs[p->n++] = r->seq;
	return 0;
}

static void test_audit_query(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_audit_filter f;
	struct page p;
	int64_t base = INT64_C(1795255200000), cursor, next, all[64];
	int i, n, pages;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 1; i <= 50; i++) {
		struct gh_audit_event ev = {0};
		int64_t seq;

		ev.ts = base + i * 1000;
		ev.event = i % 5 == 0 ? "denied" : "executed";
		ev.key_id = i % 2 ? "key_odd" : "key_even";
		ev.owner = i <= 40 ? "alice" : "bob";
		ev.tool_name = i % 3 == 0 ? "send_email" : "get_weather";
		ev.outcome = i % 5 == 0 ? "denied" : "ok";
		ev.run_id = "run_1";
		ev.duration_ms = -1;
		T_EQ_INT(gh_store_audit_append(t.s, &ev, &seq, &e), GH_OK);
		T_EQ_INT(seq, i);
	}
	/* newest first, pages of 10, every key_odd row once */
	memset(&f, 0, sizeof(f));
	f.key_id = "key_odd";
	cursor = 0;
	n = 0;
	pages = 0;
	do {
		memset(&p, 0, sizeof(p));
		p.want_key = "key_odd";
		T_EQ_INT(gh_store_audit_query(t.s, &f, cursor, 10, 0, page_cb, &p, &next, &e),
			 GH_OK);
		T_EQ_INT(p.wrong, 0);
		for (i = 0; i < p.n; i++) {
			if (n && p.seqs[i] >= all[n - 1])
				T_FAIL("page %d: seq %lld not below %lld", pages,
				       (long long)p.seqs[i],
				       (long long)all[n - 1]);
			all[n++] = p.seqs[i];
		}
		if (next)
			T_EQ_INT(next, p.seqs[p.n - 1]);
		cursor = next;
		pages++;
	} while (cursor && pages < 10);
	T_EQ_INT(n, 25);
	T_EQ_INT(pages, 3);
	T_EQ_INT(all[0], 49);
	T_EQ_INT(all[24], 1);
	/* oldest first; a page count that divides exactly ends without an empty page */
	memset(&f, 0, sizeof(f));
	f.owner = "bob";
	cursor = 0;
	n = 0;
	pages = 0;
	do {
		memset(&p, 0, sizeof(p));
		T_EQ_INT(gh_store_audit_query(t.s, &f, cursor, 5, 1, page_cb, &p, &next, &e),
			 GH_OK);
		T_EQ_INT(p.n, 5);
		for (i = 0; i < p.n; i++)
			all[n++] = p.seqs[i];
		cursor = next;
		pages++;
	} while (cursor && pages < 10);
	T_EQ_INT(pages, 2);
	T_EQ_INT(n, 10);
	T_EQ_INT(all[0], 41);
	T_EQ_INT(all[9], 50);
	/* combined filters and a time window [from, to) */
	memset(&f, 0, sizeof(f));
	f.event = "denied";
	f.tool_name = "send_email";
	memset(&p, 0, sizeof(p));
	T_EQ_INT(gh_store_audit_query(t.s, &f, 0, 100, 0, page_cb, &p, &next, &e), GH_OK);
	T_EQ_INT(p.n, 3); /* 15, 30, 45 */
	T_EQ_INT(p.seqs[0], 45);
	T_EQ_INT(next, 0);
	memset(&f, 0, sizeof(f));
	f.from_ms = base + 10 * 1000;
	f.to_ms = base + 20 * 1000;
	f.outcome = "ok";
	memset(&p, 0, sizeof(p));
	T_EQ_INT(gh_store_audit_query(t.s, &f, 0, 100, 1, page_cb, &p, &next, &e), GH_OK);
	T_EQ_INT(p.n, 8); /* 10..19 without 10 and 15 */
	T_EQ_INT(p.seqs[0], 11);
	T_EQ_INT(p.seqs[7], 19);
	/* filter values are bound, not spliced */
	memset(&f, 0, sizeof(f));
	f.key_id = "x' OR '1'='1";
	memset(&p, 0, sizeof(p));
	T_EQ_INT(gh_store_audit_query(t.s, &f, 0, 100, 0, page_cb, &p, &next, &e), GH_OK);
	T_EQ_INT(p.n, 0);
	T_EQ_INT(next, 0);
	/* every column comes back as written */
	{
		struct gh_audit_event ev = {0};
		int64_t seq;

		ev.ts = base;
		ev.event = "approved";
		ev.key_id = "key_z";
		ev.owner = "zed";
		ev.admin_user = "root";
		ev.agent_id = "agent";
		ev.thread_id = "thr";
		ev.run_id = "run_z";
		ev.tool_call_id = "call_z";
		ev.tool_name = "tool";
		ev.source = "client";
		ev.args = "{\"a\":1}";
		ev.outcome = "ok";
		ev.duration_ms = 0;
		ev.error = "";
		ev.reason = "because";
		ev.detail = "{\"d\":true}";
		T_EQ_INT(gh_store_audit_append(t.s, &ev, &seq, &e), GH_OK);
		memset(&f, 0, sizeof(f));
		f.run_id = "run_z";
		memset(&p, 0, sizeof(p));
		T_EQ_INT(gh_store_audit_query(t.s, &f, 0, 1, 0, page_cb, &p, &next, &e), GH_OK);
		T_EQ_INT(p.n, 1);
		T_EQ_INT(p.seqs[0], seq);
	}
	t_store_close(&t);
}

/* ---- retention ---- */

static void append_at(struct t_store *t, int64_t ts, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct gh_audit_event ev = {0};
		struct gh_err e;

		ev.ts = ts + i;
		ev.event = "executed";
		ev.tool_name = "t";
		ev.duration_ms = -1;
		if (gh_store_audit_append(t->s, &ev, NULL, &e) != GH_OK)
			fprintf(stderr, "  append: %s\n", e.msg);
	}
}

static void test_prune(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_audit_verify rep;
	struct gh_audit_checkpoint anchor;
	int64_t now = gh_now_ms(), old = now - INT64_C(10) * 86400000, deleted = -1;
	int64_t first, last, count;

	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(t_store_dir(&t), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 10, &e), GH_OK);
	/* 30 old rows: signed at 1 (the first checkpoint is due at once), 11, 21 */
	append_at(&t, old, 30);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("chain broken: %s", rep.message);
	T_EQ_INT(rep.signed_seq, 21);
	T_EQ_INT(rep.unsigned_rows, 9);
	T_EQ_INT(gh_store_audit_anchor(t.s, &anchor, &e), GH_E_NOTFOUND);
	/* rows not yet covered by a checkpoint stay, however old */
	T_EQ_INT(gh_store_audit_prune(t.s, now - 86400000, &deleted, &e), GH_OK);
	T_EQ_INT(deleted, 21);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("after the first prune: %s", rep.message);
	T_EQ_INT(rep.anchor_seq, 22);
	/* 5 recent rows (signed at 31): now the rest of the old ones go */
	append_at(&t, now, 5);
	T_EQ_INT(gh_store_audit_prune(t.s, now - 86400000, &deleted, &e), GH_OK);
	T_EQ_INT(deleted, 9);
	T_EQ_INT(gh_store_audit_bounds(t.s, &first, &last, &count, &e), GH_OK);
	T_EQ_INT(first, 31);
	T_EQ_INT(last, 35);
	T_EQ_INT(count, 5);
	/* the chain still verifies from the signed anchor */
	T_EQ_INT(gh_store_audit_anchor(t.s, &anchor, &e), GH_OK);
	T_EQ_INT(anchor.seq, 31);
	T_ASSERT(gh_audit_sig_ok(anchor.public_key, "anchor", anchor.seq, anchor.hash, anchor.ts,
				 anchor.signature));
	T_ASSERT(!memcmp(anchor.public_key, t.signer.pk, 32));
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("after pruning: %s", rep.message);
	T_EQ_INT(rep.anchor_seq, 31);
	T_EQ_INT(rep.rows, 5);
	/* appending goes on from where the chain was */
	append_at(&t, now + 10, 3);
	T_EQ_INT(gh_store_audit_bounds(t.s, &first, &last, &count, &e), GH_OK);
	T_EQ_INT(last, 38);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, 8);
	/* pruning again with the same cutoff deletes nothing */
	T_EQ_INT(gh_store_audit_prune(t.s, now - 86400000, &deleted, &e), GH_OK);
	T_EQ_INT(deleted, 0);
	/* and after a restart (which signs what is unsigned) all still verifies */
	gh_store_close(t.s);
	T_EQ_INT(t_store_reopen(&t, 1, 10, &e), GH_OK);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.signed_seq, 38);
	T_EQ_INT(rep.unsigned_rows, 0);
	/* verify is not vacuous: an edited row is found */
	gh_store_close(t.s);
	T_EQ_INT(sql_exec(t.path, "UPDATE audit_events SET outcome = 'ok' WHERE seq = 33"), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 10, &e), GH_OK);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	T_EQ_INT(rep.ok, 0);
	T_EQ_INT(rep.bad_seq, 33);
	T_CONTAINS(rep.message, "row 33 was modified");
	/* pruning needs the signing key */
	gh_store_close(t.s);
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	T_EQ_INT(gh_store_audit_prune(t.s, now, &deleted, &e), GH_E_INTERNAL);
	T_CONTAINS(e.msg, "pruning needs the signing key");
	gh_log_set_level(GH_LOG_INFO);
	t_store_close(&t);
}

/* On a quiet server every row is old and signed (idle checkpoints, the
 * checkpoint at shutdown): retention still removes them. */
static void test_prune_quiet_log(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_audit_verify rep;
	int64_t now = gh_now_ms(), old = now - INT64_C(40) * 86400000, deleted = -1;
	int64_t first, last, count, seq = 0;

	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(t_store_dir(&t), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 1000, &e), GH_OK);
	append_at(&t, old, 20);
	gh_store_close(t.s); /* signs row 20 */
	T_EQ_INT(t_store_reopen(&t, 1, 1000, &e), GH_OK);
	T_EQ_INT(gh_store_audit_prune(t.s, now - INT64_C(30) * 86400000, &deleted, &e), GH_OK);
	T_EQ_INT(gh_store_audit_bounds(t.s, &first, &last, &count, &e), GH_OK);
	/* the chain must go on from row 21 and verify */
	{
		struct gh_audit_event ev = {0};

		ev.event = "executed";
		ev.duration_ms = -1;
		T_EQ_INT(gh_store_audit_append(t.s, &ev, &seq, &e), GH_OK);
	}
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	gh_log_set_level(GH_LOG_INFO);
	t_store_close(&t);
	T_EQ_INT(seq, 21);
	T_ASSERT(rep.ok);
	if (deleted != 20)
		T_FAIL("40-day-old rows kept past a 30-day retention: %lld of 20 deleted, "
		       "%lld rows left",
		       (long long)deleted, (long long)count);
}

/* ---- every execution accounted for ---- */

static void call_event(struct gh_audit_event *ev, const char *event, const char *call,
		       const char *source)
{
	memset(ev, 0, sizeof(*ev));
	ev->event = event;
	ev->key_id = "key_1";
	ev->agent_id = "a";
	ev->run_id = "run_1";
	ev->tool_call_id = call;
	ev->tool_name = "memory_save";
	ev->source = source;
	ev->args = "{\"content\":\"x\"}";
	ev->outcome = "ok";
	ev->duration_ms = -1;
}

static void test_open_calls(void)
{
	struct t_store t;
	struct gh_audit_event ev;
	struct gh_audit_verify rep;
	struct gh_err e;
	int64_t a = 0, b = 0, c = 0;
	int n = -1;

	T_EQ_INT(t_store_dir(&t), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 100, &e), GH_OK);
	/* opened with its "allowed" row, closed with its end: nothing left */
	call_event(&ev, "allowed", "call_a", "memory");
	T_EQ_INT(gh_store_audit_call_open(t.s, &ev, &a, NULL, &e), GH_OK);
	T_ASSERT(a > 0);
	call_event(&ev, "executed", "call_a", "memory");
	T_EQ_INT(gh_store_audit_call_close(t.s, a, &ev, &e), GH_OK);
	/* two calls cut off: one of a memory tool, one of a server tool */
	call_event(&ev, "allowed", "call_b", "memory");
	T_EQ_INT(gh_store_audit_call_open(t.s, &ev, &b, NULL, &e), GH_OK);
	call_event(&ev, "allowed", "call_c", "server");
	ev.tool_name = "send_email";
	T_EQ_INT(gh_store_audit_call_open(t.s, &ev, &c, NULL, &e), GH_OK);
	gh_store_close(t.s);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_open_calls"), 2);
	/* the next start closes them, each with an "interrupted" row */
	T_EQ_INT(t_store_reopen(&t, 1, 100, &e), GH_OK);
	T_EQ_INT(gh_store_audit_close_interrupted(t.s, &n, &e), GH_OK);
	T_EQ_INT(n, 2);
	T_EQ_INT(gh_store_audit_close_interrupted(t.s, &n, &e), GH_OK);
	T_EQ_INT(n, 0);
	gh_store_close(t.s);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_open_calls"), 0);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_events WHERE event = 'interrupted' "
				 "AND tool_call_id = 'call_b' AND outcome = 'no_effect' AND run_id = "
				 "'run_1' AND args = '{\"content\":\"x\"}'"), 1);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_events WHERE event = 'interrupted' "
				 "AND tool_call_id = 'call_c' AND outcome = 'unknown' AND tool_name = "
				 "'send_email'"), 1);
	/* every allowed row has its end */
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_events a WHERE event = 'allowed' AND "
				 "NOT EXISTS (SELECT 1 FROM audit_events b WHERE b.tool_call_id = "
				 "a.tool_call_id AND b.event IN ('executed', 'failed', "
				 "'interrupted'))"), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 100, &e), GH_OK);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	T_ASSERT(rep.ok);
	t_store_close(&t);
}

/* An in-database tool in a transaction: its effect and its end row. */
struct effect {
	int64_t call_id;
	int fail_after;            /* the function fails after writing */
	int64_t memory_id;
};

static enum gh_code effect_fn(struct gh_store_tx *tx, void *ud, struct gh_err *e)
{
	struct effect *x = ud;
	struct gh_audit_event ev;
	enum gh_code rc;

	rc = gh_store_memory_save_tx(tx, "o", "r", "a fact", "", &x->memory_id, e);
	if (rc != GH_OK)
		return rc;
	call_event(&ev, "executed", "call_t", "memory");
	if ((rc = gh_store_tx_audit_call_close(tx, x->call_id, &ev, e)) != GH_OK)
		return rc;
	if (x->fail_after)
		return gh_err_set(e, GH_E_IO, "failed after writing");
	return GH_OK;
}

static void test_tx_commits_effect_and_row_together(void)
{
	struct t_store t;
	struct gh_audit_event ev;
	struct effect x = {0};
	struct gh_err e;

	T_EQ_INT(t_store_open(&t), 0);
	call_event(&ev, "allowed", "call_t", "memory");
	T_EQ_INT(gh_store_audit_call_open(t.s, &ev, &x.call_id, NULL, &e), GH_OK);
	/* a failure anywhere in the function: neither the memory nor the row,
	 * and the call stays open */
	x.fail_after = 1;
	T_EQ_INT(gh_store_tx_run(t.s, effect_fn, &x, &e), GH_E_IO);
	T_CONTAINS(e.msg, "failed after writing");
	gh_store_close(t.s);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM memories"), 0);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_events WHERE event = 'executed'"), 0);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_open_calls"), 1);
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	x.fail_after = 0;
	T_EQ_INT(gh_store_tx_run(t.s, effect_fn, &x, &e), GH_OK);
	T_ASSERT(x.memory_id > 0);
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM memories"), 1);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_events WHERE event = 'executed'"), 1);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_open_calls"), 0);
	t_store_close(&t);
}

T_MAIN(T(test_open_calls), T(test_tx_commits_effect_and_row_together), T(test_migrations),
       T(test_run_deadlines_migration), T(test_memory_scope_migration), T(test_newer_schema_refused), T(test_newer_schema_refused_pg), T(test_analyze_skips_empty_pg), T(test_readonly),
       T(test_readonly_migrated), T(test_group_commit),
       T(test_failing_job_in_batch), T(test_failing_lone_job), T(test_threads), T(test_runs),
       T(test_run_commit_later), T(test_reads_skip_unrelated_queue), T(test_run_commit_later_unread), T(test_run_commit_later_spaced), T(test_run_commit_checks_owner), T(test_transition_recover), T(test_memory), T(test_memory_best_of_many), T(test_working_memory_cache), T(test_working_memory_cache_race),
       T(test_ratelimit_state), T(test_two_stores_one_chain), T(test_a2a_tasks),
       T(test_pg_connection_lost),
       T(test_row_accessors), T(test_audit_query), T(test_prune), T(test_prune_quiet_log))
