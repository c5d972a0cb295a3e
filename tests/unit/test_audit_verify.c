/*
 * test_audit_verify.c - verifying the audit log against what an attacker
 * with the database file can do: checkpoints chain (one deleted from the
 * middle is caught, old unchained ones still verify), the tail rule (rows
 * after the newest checkpoint more or older than the writer leaves), the
 * witness (a truncation together with the deletion of the newest
 * checkpoints), retention's anchor with the chain, and the quick check
 * serve runs at start.
 */
#include "audit_verify.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "audit_witness.h"
#include "log.h"
#include "t.h"
#include "t_store.h"
#include "util.h"

static int sql_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = -1;

	if (t_store_pg())
		return t_pg_sql(sql) < 0 ? -1 : 0;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
	sqlite3_close(db);
	return rc;
}

static int64_t sql_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (t_store_pg())
		return t_pg_sql(sql);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void append(struct t_store *t, int n)
{
	for (int i = 0; i < n; i++) {
		struct gh_audit_event ev = {0};
		struct gh_err e;

		ev.event = "executed";
		ev.tool_name = "t";
		ev.duration_ms = -1;
		if (gh_store_audit_append(t->s, &ev, NULL, &e) != GH_OK)
			fprintf(stderr, "  append: %s\n", e.msg);
	}
}

/* A log of n rows signed every ckpt rows (and at close), witnessed in
 * t->dir/witness when witness is set. The store is closed on return. */
static int make_log(struct t_store *t, int n, int64_t ckpt, int witness)
{
	struct gh_store_opts o = {0};
	struct gh_witness_opts wo = {0};
	struct gh_witness *w = NULL;
	struct gh_err e;
	char wpath[160];

	if (t_store_dir(t) != 0)
		return -1;
	snprintf(wpath, sizeof(wpath), "%s/witness", t->dir);
	o.path = t->path;
	o.url = t_store_pg();
	o.readers = 2;
	o.busy_timeout_ms = 5000;
	o.group_commit_max = 1;
	o.threaded = 1;
	o.ckpt_rows = ckpt;
	o.ckpt_ms = 3600000;
	if (gh_store_open(&o, &t->s, &e) != GH_OK)
		return -1;
	wo.path = wpath;
	if (witness && gh_witness_open(&wo, &w, &e) != GH_OK)
		return -1;
	gh_store_audit_sign_with(t->s, &t->signer, w ? gh_witness_on_checkpoint : NULL, w);
	append(t, n);
	gh_store_close(t->s);
	t->s = NULL;
	gh_witness_close(w);
	return 0;
}

static enum gh_code reopen_ro(struct t_store *t, struct gh_err *e)
{
	struct gh_store_opts o = {0};

	o.path = t->path;
	o.url = t_store_pg();
	o.readers = 1;
	o.busy_timeout_ms = 5000;
	o.readonly = 1;
	return gh_store_open(&o, &t->s, e);
}

static void verify(struct t_store *t, const struct gh_audit_verify_opts *o,
		   struct gh_audit_verify *rep)
{
	struct gh_err e;

	gh_store_close(t->s);
	t->s = NULL;
	if (reopen_ro(t, &e) != GH_OK || gh_audit_verify_ex(t->s, o, rep, &e) != GH_OK) {
		fprintf(stderr, "  verify: %s\n", e.msg);
		memset(rep, 0, sizeof(*rep));
		gh_strlcpy(rep->message, "could not verify", sizeof(rep->message));
	}
}

/* Signs the checkpoint at seq again as an unchained one (prev_seq < 0) or
 * chained to the one at prev_seq, as the writer would have. */
static int resign(struct t_store *t, int64_t seq, int64_t prev_seq)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	unsigned char prev[64] = {0}, hash[32], sig[64];
	int64_t ts;
	int rc = -1;

	if (sqlite3_open_v2(t->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		goto out;
	if (prev_seq > 0) {
		if (sqlite3_prepare_v2(db, "SELECT signature FROM audit_checkpoints WHERE seq = ?",
				       -1, &st, NULL) != SQLITE_OK)
			goto out;
		sqlite3_bind_int64(st, 1, prev_seq);
		if (sqlite3_step(st) != SQLITE_ROW)
			goto out;
		memcpy(prev, sqlite3_column_blob(st, 0), 64);
		sqlite3_finalize(st);
		st = NULL;
	}
	if (sqlite3_prepare_v2(db, "SELECT hash, ts FROM audit_checkpoints WHERE seq = ?", -1, &st,
			       NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_int64(st, 1, seq);
	if (sqlite3_step(st) != SQLITE_ROW)
		goto out;
	memcpy(hash, sqlite3_column_blob(st, 0), 32);
	ts = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	st = NULL;
	if (prev_seq < 0)
		gh_audit_sign(&t->signer, "ckpt", seq, hash, ts, sig);
	else
		gh_audit_sign_ckpt(&t->signer, seq, hash, ts, prev_seq, prev, sig);
	if (sqlite3_prepare_v2(db, "UPDATE audit_checkpoints SET signature = ?, prev_seq = ? "
			       "WHERE seq = ?", -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_blob(st, 1, sig, 64, SQLITE_TRANSIENT);
	if (prev_seq < 0)
		sqlite3_bind_null(st, 2);
	else
		sqlite3_bind_int64(st, 2, prev_seq);
	sqlite3_bind_int64(st, 3, seq);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	return rc;
}

static int count_row(void *ud, const struct gh_audit_row *r)
{
	(void)r;
	++*(int64_t *)ud;
	return 0;
}

static void test_checkpoints_chain(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_verify rep;

	gh_log_set_level(GH_LOG_WARN);
	/* signed at rows 1 (the first is due at once), 11, 21, 31 and 40
	 * (at close) */
	T_EQ_INT(make_log(&t, 40, 10, 0), 0);
	o.trusted_pk = t.signer.pk;
	/* each checkpoint names the one before it */
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_checkpoints"), 5);
	T_EQ_INT(sql_int(t.path, "SELECT count(*) FROM audit_checkpoints c WHERE prev_seq = "
				 "coalesce((SELECT max(seq) FROM audit_checkpoints p WHERE "
				 "p.seq < c.seq), 0)"), 5);
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.checkpoints, 5);
	T_EQ_INT(rep.chained_from, 1);
	/* one deleted from the middle: the next one signs it */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints WHERE seq = 21"), 0);
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.bad_seq, 31);
	T_CONTAINS(rep.message, "signs a checkpoint at row 21 that is missing");
	/* a checkpoint's prev_seq altered: its signature no longer holds */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "UPDATE audit_checkpoints SET prev_seq = 11 WHERE seq = 31"), 0);
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_CONTAINS(rep.message, "checkpoint at row 31 has a bad signature");
	t_store_close(&t);
}

/* store_audit.c: rows per statement of a scan on PostgreSQL */
extern int store_audit_scan_page;

/* A scan read in pages (PostgreSQL) sees every row once, in order, and
 * still finds an altered one past the first page. */
static void test_verify_in_pages(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_verify rep;
	int64_t seen = 0;

	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(make_log(&t, 23, 5, 0), 0);
	o.trusted_pk = t.signer.pk;
	store_audit_scan_page = 4;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.rows, 23);
	T_EQ_INT(rep.last_seq, 23);
	/* a range ending inside a page */
	{
		struct gh_err e;

		T_EQ_INT(gh_store_audit_scan(t.s, 6, 13, count_row, &seen, &e), GH_OK);
		T_EQ_INT(seen, 8);
	}
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "UPDATE audit_events SET tool_name = 'x' WHERE seq = 18"), 0);
	verify(&t, &o, &rep);
	store_audit_scan_page = 10000;
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.bad_seq, 18);
	T_EQ_INT(rep.rows, 17);
	t_store_close(&t);
}

static void test_unchained_checkpoints_still_verify(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_verify rep;

	if (t_store_sqlite_only("databases from before checkpoints chained"))
		return;
	/* a database from before chaining: its checkpoints (rows 1 and 11)
	 * have no prev_seq and sign (seq, hash, ts) alone; the ones written
	 * after the upgrade (21, 30) chain from the newest of them */
	T_EQ_INT(make_log(&t, 30, 10, 0), 0);
	T_EQ_INT(resign(&t, 1, -1), 0);
	T_EQ_INT(resign(&t, 11, -1), 0);
	T_EQ_INT(resign(&t, 21, 11), 0);
	T_EQ_INT(resign(&t, 30, 21), 0);
	o.trusted_pk = t.signer.pk;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.checkpoints, 4);
	T_EQ_INT(rep.chained_from, 21);
	/* the store keeps chaining from the newest unchained one */
	gh_store_close(t.s);
	T_EQ_INT(t_store_reopen(&t, 1, 10, &(struct gh_err){0}), GH_OK);
	append(&t, 10);
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	/* a checkpoint without chaining after chained ones is not gatehouse's */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "UPDATE audit_checkpoints SET prev_seq = NULL WHERE seq = 40"), 0);
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_CONTAINS(rep.message, "does not chain to the checkpoint before it");
	t_store_close(&t);
}

static void test_tail_rule(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_verify rep;

	T_EQ_INT(make_log(&t, 45, 10, 0), 0);
	o.trusted_pk = t.signer.pk;
	o.max_unsigned_rows = 10;
	o.max_unsigned_ms = 60000;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.unsigned_rows, 0);
	/* the newest checkpoints deleted (45, at close, and 41): 14 rows
	 * unsigned, more than the writer leaves */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints WHERE seq >= 40"), 0);
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.bad_seq, 32);
	T_CONTAINS(rep.message, "rows 32..45 (14 rows) follow the newest signed checkpoint");
	/* without the rule it would pass: the chain itself is consistent */
	o.max_unsigned_rows = 0;
	o.max_unsigned_ms = 0;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.unsigned_rows, 14);
	/* few rows, but older than the writer ever leaves them */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints WHERE seq = 31"), 0);
	o.max_unsigned_rows = 1000;
	o.max_unsigned_ms = 60000;
	o.now_ms = gh_now_ms() + 120000;
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.bad_seq, 22);
	T_CONTAINS(rep.message, "older than the writer ever leaves a row unsigned (60 s)");
	/* every checkpoint deleted: the whole log is the tail */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints"), 0);
	o.now_ms = 0;
	o.max_unsigned_rows = 10;
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.bad_seq, 1);
	t_store_close(&t);
}

static void test_witness(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_verify rep;
	char wpath[160], copy[200];

	T_EQ_INT(make_log(&t, 45, 10, 1), 0);
	snprintf(wpath, sizeof(wpath), "%s/witness", t.dir);
	o.trusted_pk = t.signer.pk;
	o.witness_file = wpath;
	o.max_unsigned_rows = 10;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.witness_read, 1);
	T_EQ_INT(rep.witness_entries, 6);
	T_EQ_INT(rep.witness_seq, 45);
	/* truncated at a checkpoint, the later checkpoints deleted: the
	 * chain, its signatures and the tail rule all hold... */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_events WHERE seq > 30; "
				  "DELETE FROM audit_checkpoints WHERE seq > 30"), 0);
	o.witness_file = NULL;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	/* ...but the witness saw more */
	o.witness_file = wpath;
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.behind_witness, 1);
	T_EQ_INT(rep.bad_seq, 31);
	T_CONTAINS(rep.message, "the witness saw a signed checkpoint at row 31");
	T_CONTAINS(rep.message, "behind its witness");
	/* a checkpoint deleted without truncation */
	t_store_close(&t);
	T_EQ_INT(make_log(&t, 45, 10, 1), 0);
	snprintf(wpath, sizeof(wpath), "%s/witness", t.dir);
	o.witness_file = wpath;
	o.max_unsigned_rows = 0;
	gh_store_close(t.s);
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints WHERE seq = 45"), 0);
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_EQ_INT(rep.bad_seq, 45);
	T_CONTAINS(rep.message, "the witness saw a signed checkpoint at row 45");
	/* an empty witness (just created) holds nothing to miss */
	snprintf(copy, sizeof(copy), "%s/empty", t.dir);
	{
		FILE *f = fopen(copy, "w");

		T_ASSERT(f);
		fclose(f);
	}
	o.witness_file = copy;
	o.max_unsigned_rows = 0;
	verify(&t, &o, &rep);
	T_EQ_INT(rep.witness_read, 1);
	T_EQ_INT(rep.witness_entries, 0);
	unlink(copy);
	/* a missing witness fails only when asked for */
	snprintf(copy, sizeof(copy), "%s/elsewhere", t.dir);
	o.witness_file = copy;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.witness_read, 0);
	T_CONTAINS(rep.witness_note, "no witness at");
	o.witness_required = 1;
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_CONTAINS(rep.message, "is missing");
	/* lines that are not validly signed are no evidence of anything */
	{
		FILE *f = fopen(wpath, "a");

		T_ASSERT(f);
		fputs("gatehouse-witness 1 seq=999 ts=1 prev=- hash=", f);
		for (int i = 0; i < 64; i++)
			fputc('0', f);
		fputs(" key=", f);
		for (int i = 0; i < 64; i++)
			fputc('1', f);
		fputs(" sig=", f);
		for (int i = 0; i < 128; i++)
			fputc('2', f);
		fputs(" prevsig=-\n", f);
		fclose(f);
	}
	o.witness_file = wpath;
	o.witness_required = 0;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_events WHERE seq = -1"), 0);
	verify(&t, &o, &rep);
	T_EQ_INT(rep.witness_invalid, 1);
	t_store_close(&t);
}

static void test_retention_keeps_the_chain(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_verify rep;
	struct gh_err e;
	int64_t deleted = 0;

	T_EQ_INT(make_log(&t, 45, 10, 0), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 10, &e), GH_OK);
	/* every row is old: pruning goes up to the newest checkpoint */
	T_EQ_INT(gh_store_audit_prune(t.s, gh_now_ms() + 1000, &deleted, &e), GH_OK);
	T_EQ_INT(deleted, 45);
	append(&t, 25);
	o.trusted_pk = t.signer.pk;
	o.max_unsigned_rows = 10;
	verify(&t, &o, &rep);
	T_ASSERT(rep.ok);
	T_EQ_INT(rep.anchor_seq, 46);
	/* the newest checkpoint of the pruned rows stays, as the chain's base */
	T_EQ_INT(sql_int(t.path, "SELECT min(seq) FROM audit_checkpoints"), 45);
	/* deleting it breaks the chain of the first kept one */
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints WHERE seq = 45"), 0);
	verify(&t, &o, &rep);
	T_ASSERT(!rep.ok);
	T_CONTAINS(rep.message, "signs a checkpoint at row 45 that is missing");
	t_store_close(&t);
}

static void test_quick_check(void)
{
	struct t_store t;
	struct gh_audit_verify_opts o = {0};
	struct gh_audit_quick q;
	struct gh_err e;
	char wpath[160];

	T_EQ_INT(make_log(&t, 45, 10, 1), 0);
	snprintf(wpath, sizeof(wpath), "%s/witness", t.dir);
	o.trusted_pk = t.signer.pk;
	o.witness_file = wpath;
	o.max_unsigned_rows = 10;
	o.max_unsigned_ms = 60000;
	T_EQ_INT(reopen_ro(&t, &e), GH_OK);
	T_EQ_INT(gh_audit_verify_newest(t.s, &o, &q, &e), GH_OK);
	T_ASSERT(q.ok);
	T_EQ_INT(q.newest.seq, 45);
	T_EQ_INT(q.witness, GH_WITNESS_AGREES);
	T_EQ_INT(q.rows_checked, 1);
	gh_store_close(t.s);
	t.s = NULL;
	/* the newest checkpoints gone, a row after the last one altered */
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints WHERE seq > 40; "
				  "UPDATE audit_events SET tool_name = 'x' WHERE seq = 38"), 0);
	o.witness_file = NULL;
	T_EQ_INT(reopen_ro(&t, &e), GH_OK);
	T_EQ_INT(gh_audit_verify_newest(t.s, &o, &q, &e), GH_OK);
	T_ASSERT(!q.ok);
	T_EQ_INT(q.behind_witness, 0);
	T_EQ_INT(q.bad_seq, 38);
	T_CONTAINS(q.message, "row 38 was modified");
	/* with the witness: it saw row 45's checkpoint */
	o.witness_file = wpath;
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "UPDATE audit_events SET tool_name = 't' WHERE seq = 38"), 0);
	T_EQ_INT(reopen_ro(&t, &e), GH_OK);
	T_EQ_INT(gh_audit_verify_newest(t.s, &o, &q, &e), GH_OK);
	T_ASSERT(!q.ok);
	T_EQ_INT(q.behind_witness, 1);
	T_EQ_INT(q.witness, GH_WITNESS_AHEAD);
	T_CONTAINS(q.message, "behind its witness");
	gh_store_close(t.s);
	t.s = NULL;
	/* every checkpoint gone: the tail is the whole log */
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_checkpoints"), 0);
	o.witness_file = NULL;
	T_EQ_INT(reopen_ro(&t, &e), GH_OK);
	T_EQ_INT(gh_audit_verify_newest(t.s, &o, &q, &e), GH_OK);
	T_ASSERT(!q.ok);
	T_EQ_INT(q.bad_seq, 1);
	T_ASSERT(q.rows_checked <= 11); /* it stops reading once the rule is broken */
	/* the row a checkpoint covers truncated away */
	t_store_close(&t);
	T_EQ_INT(make_log(&t, 45, 10, 0), 0);
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_events WHERE seq > 42"), 0);
	T_EQ_INT(reopen_ro(&t, &e), GH_OK);
	T_EQ_INT(gh_audit_verify_newest(t.s, &o, &q, &e), GH_OK);
	T_ASSERT(!q.ok);
	T_EQ_INT(q.bad_seq, 45);
	T_CONTAINS(q.message, "truncated");
	t_store_close(&t);
}

struct busy {
	struct t_store *t;
	_Atomic int done;
	int n;
};

static void *busy_writer(void *arg)
{
	struct busy *b = arg;

	for (int i = 0; i < b->n; i++)
		append(b->t, 1);
	atomic_store(&b->done, 1);
	return NULL;
}

/* verify beside a writer that commits rows and checkpoints all the time
 * (a running server): checkpoints, rows and the witness must be read so
 * that they agree, or the tail rule and the witness see ghosts. */
static void test_verify_beside_a_busy_writer(void)
{
	struct t_store t;
	struct gh_store_opts o = {0};
	struct gh_witness_opts wo = {0};
	struct gh_witness *w = NULL;
	struct gh_audit_verify_opts vo = {0};
	struct gh_audit_verify rep;
	struct busy b;
	struct gh_err e;
	pthread_t th;
	char wpath[160];
	int runs = 0, bad = 0;

	T_EQ_INT(t_store_dir(&t), 0);
	snprintf(wpath, sizeof(wpath), "%s/witness", t.dir);
	o.path = t.path;
	o.url = t_store_pg();
	o.readers = 4;
	o.busy_timeout_ms = 5000;
	o.group_commit_max = 64;
	o.threaded = 1;
	o.ckpt_rows = 5;
	o.ckpt_ms = 3600000;
	T_EQ_INT(gh_store_open(&o, &t.s, &e), GH_OK);
	wo.path = wpath;
	T_EQ_INT(gh_witness_open(&wo, &w, &e), GH_OK);
	gh_store_audit_sign_with(t.s, &t.signer, gh_witness_on_checkpoint, w);
	append(&t, 20);
	vo.trusted_pk = t.signer.pk;
	vo.witness_file = wpath;
	vo.max_unsigned_rows = 5;
	vo.max_unsigned_ms = 60000;
	memset(&b, 0, sizeof(b));
	b.t = &t;
	b.n = 3000;
	T_EQ_INT(pthread_create(&th, NULL, busy_writer, &b), 0);
	while (!atomic_load(&b.done) && runs < 200) {
		T_EQ_INT(gh_audit_verify_ex(t.s, &vo, &rep, &e), GH_OK);
		runs++;
		if (!rep.ok && !bad++)
			fprintf(stderr, "  run %d: %s\n", runs, rep.message);
	}
	pthread_join(th, NULL);
	gh_store_close(t.s);
	t.s = NULL;
	gh_witness_close(w);
	T_EQ_INT(bad, 0);
	T_ASSERT(runs > 1);
	t_store_close(&t);
}

T_MAIN(T(test_verify_beside_a_busy_writer), T(test_checkpoints_chain), T(test_verify_in_pages), T(test_unchained_checkpoints_still_verify), T(test_tail_rule),
       T(test_witness), T(test_retention_keeps_the_chain), T(test_quick_check))
