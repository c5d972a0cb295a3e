/*
 * test_store_copy.c - store_copy.c: a SQLite database copied into an empty
 * PostgreSQL one arrives byte for byte (text with COPY's special
 * characters, empty strings and NULLs, blobs), its audit chain verifies
 * there, identities continue past the copied ids and memory search works;
 * a target holding rows, schemas that disagree and a value PostgreSQL
 * refuses all leave the target as it was; a source that is not a
 * gatehouse database, or is at an older schema, is named as such.
 *
 * The copy needs PostgreSQL (GH_TEST_PG_URL, tests/pg/with_pg.sh); without
 * it only the source checks run.
 */
#include "store_copy.h"

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "audit_verify.h"
#include "log.h"
#include "t.h"
#include "t_store.h"
#include "util.h"

/* A SQLite store on t->path: writable and signed every 10 rows, or
 * read-only (the copy's source). */
static enum gh_code open_sqlite(struct t_store *t, int readonly, struct gh_store **s,
				struct gh_err *e)
{
	struct gh_store_opts o = {0};

	o.path = t->path;
	o.readers = 1;
	o.busy_timeout_ms = 5000;
	o.group_commit_max = 1;
	o.readonly = readonly;
	o.signer = readonly ? NULL : &t->signer;
	o.ckpt_rows = 10;
	o.ckpt_ms = 3600000;
	return gh_store_open(&o, s, e);
}

/* The copy's target: PostgreSQL, writable, no signer. */
static enum gh_code open_pg(struct gh_store **s, struct gh_err *e)
{
	struct gh_store_opts o = {0};

	o.url = t_store_pg();
	o.readers = 1;
	o.pool_size = 2;
	o.busy_timeout_ms = 5000;
	o.group_commit_max = 1;
	return gh_store_open(&o, s, e);
}

static int sqlite_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;
	int rc = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK)
		rc = 0;
	if (msg)
		fprintf(stderr, "  sqlite: %s\n", msg);
	sqlite3_free(msg);
	sqlite3_close(db);
	return rc;
}

static const unsigned char KEY_HASH[32] = {0, 1, '\t', '\n', '\\', 0xff, 'N', 0};

/* A source with something in most tables: two keys (one revoked), a
 * thread whose title and messages hold COPY's special characters, two
 * memories, working memory, an admin and a session, a rate limit and 35
 * signed audit rows. Closed on return. */
static int make_source(struct t_store *t)
{
	struct gh_store *s = NULL;
	struct gh_key k;
	struct gh_err e;
	int64_t id;
	int i;

	if (t_store_dir(t) != 0 || open_sqlite(t, 0, &s, &e) != GH_OK)
		return -1;
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.id, "key_a", sizeof(k.id));
	gh_strlcpy(k.name, "alice", sizeof(k.name));
	gh_strlcpy(k.owner, "alice", sizeof(k.owner));
	gh_strlcpy(k.prefix, "gh_a", sizeof(k.prefix));
	k.admin = 1;
	k.created_at = 1700000000123;
	if (gh_store_key_insert(s, &k, KEY_HASH, &e) != GH_OK)
		goto fail;
	gh_strlcpy(k.id, "key_b", sizeof(k.id));
	gh_strlcpy(k.name, "bob", sizeof(k.name));
	k.admin = 0;
	if (gh_store_key_insert(s, &k, (const unsigned char *)"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
				&e) != GH_OK ||
	    gh_store_key_revoke(s, "key_b", &e) != GH_OK)
		goto fail;
	if (gh_store_memory_save(s, "alice", "res", "the user runs marathons", "sport", &id, &e) !=
		    GH_OK ||
	    gh_store_memory_save(s, "alice", "res", "prefers tea", "drinks", &id, &e) != GH_OK ||
	    gh_store_working_memory_set(s, "alice", "res", "# notes\n\tindented\\", &e) != GH_OK)
		goto fail;
	for (i = 0; i < 35; i++) {
		struct gh_audit_event ev = {0};

		ev.event = "executed";
		ev.tool_name = "memory_save";
		ev.key_id = "key_a";
		ev.args = i % 2 ? "{\"content\":\"tab\\there\"}" : NULL;
		ev.duration_ms = i % 3 ? i : -1;
		if (gh_store_audit_append(s, &ev, NULL, &e) != GH_OK)
			goto fail;
	}
	gh_store_close(s);
	return sqlite_exec(t->path,
			   "INSERT INTO threads VALUES ('th1', 'alice', 'res', 'assistant', "
			   "'tab\there' || char(10) || 'nl \\N back\\slash \"q\" é 😀', NULL, 1, 2);"
			   "INSERT INTO threads VALUES ('th2', 'alice', 'res', 'assistant', '', "
			   "'{}', 3, 4);"
			   "INSERT INTO messages VALUES ('m1', 'alice', 'th1', 1, 'user', "
			   "'\"hi' || char(13) || char(10) || '\"', NULL, 5);"
			   "INSERT INTO messages VALUES ('m2', 'alice', 'th1', 2, 'assistant', "
			   "'\"\\\\.\"', 'run_1', 6);"
			   "INSERT INTO admin_users VALUES ('ann', 'h', 1, NULL, NULL);"
			   "INSERT INTO admin_sessions VALUES (x'00095c0a', 'ann', 'c', 1, 1, 2, NULL);"
			   "INSERT INTO rate_limit_state VALUES ('key:key_a', 9007199254740993);");
fail:
	fprintf(stderr, "  source: %s\n", e.msg);
	gh_store_close(s);
	return -1;
}

/* Copies t's database into the (emptied) PostgreSQL test database. */
static enum gh_code copy(struct t_store *t, struct gh_store_copy_report *rep, struct gh_err *e)
{
	struct gh_store *from = NULL, *to = NULL;
	enum gh_code rc;

	if ((rc = open_sqlite(t, 1, &from, e)) == GH_OK && (rc = open_pg(&to, e)) == GH_OK)
		rc = gh_store_copy(from, to, NULL, NULL, rep, e);
	gh_store_close(to);
	gh_store_close(from);
	return rc;
}

static int64_t rows_of(const struct gh_store_copy_report *rep, const char *table)
{
	size_t i;

	for (i = 0; i < rep->n; i++)
		if (!strcmp(rep->t[i].name, table))
			return rep->t[i].rows;
	return -1;
}

static void test_copy_arrives_whole(void)
{
	struct t_store t;
	struct gh_store_copy_report rep;
	struct gh_store *from = NULL, *to = NULL;
	struct gh_audit_verify a, b;
	struct gh_err e;
	cJSON *found = NULL;
	int64_t id = 0, indexes;
	size_t i;

	if (!t_store_pg()) {
		fprintf(stderr, "  skipped: needs PostgreSQL (GH_TEST_PG_URL)\n");
		return;
	}
	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(make_source(&t), 0);
	/* the indexes the schema makes, which the copy drops and makes again */
	T_EQ_INT(open_pg(&to, &e), GH_OK);
	gh_store_close(to);
	to = NULL;
	indexes = t_pg_sql("SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema()");
	T_ASSERT(indexes > 30);
	if (copy(&t, &rep, &e) != GH_OK)
		T_FAIL("copy: %s", e.msg);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema()"),
		 indexes);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_doc' AND "
			  "indexdef LIKE '%USING gin (doc)%'"), 1);
	/* parents before children: the foreign keys hold row by row */
	for (i = 0; i < rep.n; i++) {
		T_ASSERT(strcmp(rep.t[i].name, "schema_migrations"));
		T_ASSERT(strncmp(rep.t[i].name, "memories_fts", 12));
		T_ASSERT(strcmp(rep.t[i].name, "audit_postings"));
		if (!strcmp(rep.t[i].name, "messages"))
			T_ASSERT(rows_of(&rep, "threads") == 2);
	}
	T_ASSERT(rep.n >= 20);
	T_EQ_INT(rows_of(&rep, "api_keys"), 2);
	T_EQ_INT(rows_of(&rep, "audit_events"), 35);
	T_EQ_INT(rows_of(&rep, "audit_checkpoints"), 5);
	T_EQ_INT(rows_of(&rep, "messages"), 2);
	T_EQ_INT(rows_of(&rep, "audit_index_state"), -1);
	T_EQ_INT(rep.identities, 3);
	/* values byte for byte */
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM threads WHERE title = E'tab\\there\\nnl \\\\N "
			  "back\\\\slash \"q\" é 😀' AND metadata IS NULL"), 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM threads WHERE title = '' AND metadata = '{}'"), 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM messages WHERE content = E'\"hi\\r\\n\"' AND "
			  "run_id IS NULL"), 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM messages WHERE content = E'\"\\\\\\\\.\"'"), 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM api_keys WHERE hash = "
			  "'\\x0001090a5cff4e00000000000000000000000000000000000000000000000000' "
			  "AND created_at = 1700000000123 AND role = 'admin'"), 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM api_keys WHERE id = 'key_b' AND revoked_at > 0"),
		 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM admin_sessions WHERE token_hash = '\\x00095c0a'"),
		 1);
	T_EQ_INT(t_pg_sql("SELECT tat_ms FROM rate_limit_state"), 9007199254740993LL);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM working_memory WHERE content = "
			  "E'# notes\\n\\tindented\\\\'"), 1);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM audit_events WHERE duration_ms IS NULL"), 12);
	/* the chain verifies on PostgreSQL as it does on SQLite */
	T_EQ_INT(open_sqlite(&t, 1, &from, &e), GH_OK);
	T_EQ_INT(open_pg(&to, &e), GH_OK);
	T_EQ_INT(gh_audit_verify(from, t.signer.pk, &a, &e), GH_OK);
	T_EQ_INT(gh_audit_verify(to, t.signer.pk, &b, &e), GH_OK);
	T_ASSERT(a.chain_ok && b.chain_ok);
	T_EQ_INT(b.rows, 35);
	T_EQ_INT(b.checkpoints, a.checkpoints);
	T_EQ_INT(b.signed_seq, a.signed_seq);
	/* counted after the commit */
	T_EQ_INT(gh_store_copy_count(to, &rep, &e), GH_OK);
	for (i = 0; i < rep.n; i++)
		T_EQ_INT(rep.t[i].target_rows, rep.t[i].rows);
	/* new rows take ids after the copied ones; search finds copied memory */
	T_EQ_INT(gh_store_memory_save(to, "alice", "res", "likes hills", "", &id, &e), GH_OK);
	T_EQ_INT(id, 3);
	T_EQ_INT(gh_store_memory_search(to, "alice", "res", "running marathon", 5, &found, &e),
		 GH_OK);
	T_EQ_INT(cJSON_GetArraySize(found), 1);
	T_EQ_STR(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(found, 0), "content")
			 ->valuestring, "the user runs marathons");
	cJSON_Delete(found);
	/* a second copy finds the target holding rows: refused, nothing added */
	T_EQ_INT(gh_store_copy(from, to, NULL, NULL, &rep, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "already holds gatehouse data (rows in admin_sessions, admin_users, api_keys");
	T_CONTAINS(e.msg, "api_keys");
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM audit_events"), 35);
	T_EQ_INT(gh_store_copy_target_empty(to, &e), GH_E_CONFLICT);
	gh_store_close(to);
	gh_store_close(from);
	t_store_close(&t);
}

/* Schemas that disagree, and a value PostgreSQL refuses halfway: the
 * target is left empty. */
static void test_failures_leave_nothing(void)
{
	struct t_store t;
	struct gh_store_copy_report rep;
	struct gh_store *to = NULL;
	struct gh_err e;

	if (!t_store_pg()) {
		fprintf(stderr, "  skipped: needs PostgreSQL (GH_TEST_PG_URL)\n");
		return;
	}
	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(make_source(&t), 0);
	/* a column only the source has */
	T_EQ_INT(sqlite_exec(t.path, "ALTER TABLE threads ADD COLUMN colour TEXT"), 0);
	T_EQ_INT(copy(&t, &rep, &e), GH_E_IO);
	T_CONTAINS(e.msg, "table threads: the source has column colour, which the PostgreSQL "
			  "schema lacks");
	T_EQ_INT(sqlite_exec(t.path, "ALTER TABLE threads DROP COLUMN colour"), 0);
	/* a column only the target has */
	T_EQ_INT(t_pg_sql("ALTER TABLE runs ADD COLUMN colour text"), 0);
	T_EQ_INT(copy(&t, &rep, &e), GH_E_IO);
	T_CONTAINS(e.msg, "table runs: the PostgreSQL schema has column colour, which the source "
			  "lacks");
	T_EQ_INT(t_pg_sql("ALTER TABLE runs DROP COLUMN colour"), 0);
	/* text PostgreSQL cannot hold (not UTF-8), in a table copied late */
	T_EQ_INT(sqlite_exec(t.path, "INSERT INTO responses VALUES ('resp_1', 'alice', 'key_a', "
				     "'assistant', 'run_1', NULL, CAST(x'c328' AS TEXT), '[]', 1)"),
		 0);
	T_EQ_INT(copy(&t, &rep, &e), GH_E_IO);
	T_CONTAINS(e.msg, "copy: table responses: invalid byte sequence");
	T_CONTAINS(e.msg, "(row 1 of the copy)");
	T_EQ_INT(rep.n, 0);
	T_EQ_INT(open_pg(&to, &e), GH_OK);
	T_EQ_INT(gh_store_copy_target_empty(to, &e), GH_OK);
	gh_store_close(to);
	T_EQ_INT(t_pg_sql("SELECT count(*) FROM audit_events"), 0);
	t_store_close(&t);
}

/* A source that is not a gatehouse database, or is older than this
 * gatehouse, is named as such (SQLite alone). */
static void test_source_check(void)
{
	struct t_store t;
	struct gh_store *from = NULL;
	struct gh_err e;
	char sql[200];

	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(t_store_dir(&t), 0);
	T_EQ_INT(open_sqlite(&t, 0, &from, &e), GH_OK);
	gh_store_close(from);
	T_EQ_INT(open_sqlite(&t, 1, &from, &e), GH_OK);
	T_EQ_INT(gh_store_copy_source_check(from, t.path, &e), GH_OK);
	gh_store_close(from);
	/* one migration short of the newest */
	snprintf(sql, sizeof(sql), "DELETE FROM schema_migrations WHERE version = %d",
		 gh_store_schema_latest());
	T_EQ_INT(sqlite_exec(t.path, sql), 0);
	T_EQ_INT(open_sqlite(&t, 1, &from, &e), GH_OK);
	T_EQ_INT(gh_store_copy_source_check(from, t.path, &e), GH_E_IO);
	T_CONTAINS(e.msg, "is at schema version");
	T_CONTAINS(e.msg, "bring it up to date first with gatehouse migrate --config FILE --db");
	gh_store_close(from);
	/* another program's migrations table */
	T_EQ_INT(sqlite_exec(t.path, "UPDATE schema_migrations SET name = 'create_users.rb' "
				     "WHERE version = 2"), 0);
	T_EQ_INT(open_sqlite(&t, 1, &from, &e), GH_OK);
	T_EQ_INT(gh_store_copy_source_check(from, t.path, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "is not a gatehouse database: its migration 2 is \"create_users.rb\"");
	gh_store_close(from);
	t_store_close(&t);
}

T_MAIN(T(test_copy_arrives_whole), T(test_failures_leave_nothing), T(test_source_check))
