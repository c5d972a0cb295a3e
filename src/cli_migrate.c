/*
 * cli_migrate.c - gatehouse migrate: applies pending schema migrations to
 * the configured database, or (--from sqlite:PATH --to URL) copies a SQLite
 * gatehouse database into an empty PostgreSQL one (store_copy.h) and checks
 * the copy: the rows of every table counted on both sides, and the audit
 * chain verified on both with the same key, as `gatehouse audit verify`.
 *
 * The source is opened read-only: it is never written, nor its WAL
 * checkpointed (the SQLite WAL-reset bug; README, "One writer"). The URL's
 * password never reaches the output: every message names the database by
 * its redacted URL (pg.h). Runs on the main thread.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "audit.h"
#include "audit_verify.h"
#include "cli_common.h"
#include "pg.h"
#include "store_copy.h"
#include "util.h"

static const char usage_migrate[] =
	"usage: gatehouse migrate --config FILE [--db PATH]\n"
	"       gatehouse migrate --config FILE --from sqlite:PATH --to postgresql://USER@HOST/DB\n"
	"\n"
	"The first form applies pending schema migrations (serve also does this at\n"
	"start). Safe to run while the server is running: writes take the database's\n"
	"writer lock.\n"
	"\n"
	"The second moves a single-node installation to PostgreSQL: it copies every\n"
	"table of the SQLite database PATH, the audit log included, into an empty\n"
	"PostgreSQL database, in one transaction (all or nothing). Stop the server\n"
	"first: migrate refuses while one runs on PATH. It\n"
	"  - opens PATH read-only (never writes to it); PATH must be at this\n"
	"    gatehouse's newest schema (run the first form on it first);\n"
	"  - verifies PATH's audit log as `gatehouse audit verify` does (the key:\n"
	"    audit.signing_key_file, default PATH-audit.key) and copies nothing when\n"
	"    it is not intact;\n"
	"  - creates the schema on PostgreSQL and refuses a database already holding\n"
	"    gatehouse data;\n"
	"  - then counts every table's rows on both sides and verifies the audit log\n"
	"    again on PostgreSQL: exit 0 only when both agree.\n"
	"The password: libpq's PGPASSWORD or ~/.pgpass, or ${NAME} in --to (taken\n"
	"from the environment, as in database.url); it is never printed.\n"
	"Afterwards set database.url, and name the key files of the SQLite install\n"
	"in auth.key_hash_file and audit.signing_key_file: the copied API keys and\n"
	"audit chain need them (migrate prints their paths).\n";

/* Prints how the copy of one table goes, every so many rows. */
static void progress(void *ud, const struct gh_store_copy_table *t, int done)
{
	(void)ud;
	if (!done || t->seconds >= 1)
		fprintf(stderr, "gatehouse: %s: %lld rows %s in %.1f s (%.0f rows/s)\n", t->name,
			(long long)t->rows, done ? "copied, indexed" : "sent", t->seconds,
			t->seconds > 0 ? (double)t->rows / t->seconds : 0.0);
}

/* The signing key's public half, for verifying: 1 when it could be read;
 * else the warning `gatehouse audit verify` gives. */
static int trusted_key(const struct gh_cli *c, unsigned char pk[32])
{
	struct gh_audit_signer signer;
	struct gh_err e;

	if (gh_audit_signer_load(c->signing_key_file, 0, &signer, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: warning: %s; checking signatures against the keys "
			"recorded in the database only\n", e.msg);
		return 0;
	}
	memcpy(pk, signer.pk, 32);
	gh_audit_signer_wipe(&signer);
	return 1;
}

/* Whether the two verifications say the same of the chain. */
static int same_chain(const struct gh_audit_verify *a, const struct gh_audit_verify *b)
{
	return a->chain_ok == b->chain_ok && a->rows == b->rows && a->last_seq == b->last_seq &&
	       a->anchor_seq == b->anchor_seq && a->checkpoints == b->checkpoints &&
	       a->signed_seq == b->signed_seq && a->unsigned_rows == b->unsigned_rows;
}

/* The store options for the target at url: the config's pool and timeouts. */
static void target_opts(const struct gh_cli *c, const char *url, int readonly,
			struct gh_store_opts *o)
{
	gh_cli_db_opts(c->cfg, o);
	o->path = NULL;
	o->url = url;
	o->readers = 1;
	o->pool_size = 2;
	o->group_commit_max = 1;
	o->readonly = readonly;
}

/* Opens the source read-only, saying plainly when it is no gatehouse
 * database. */
static struct gh_store *open_source(const struct gh_cli *c, const char *path)
{
	struct gh_store_opts o;
	struct gh_store *s = NULL;
	struct gh_err e;

	gh_cli_db_opts(c->cfg, &o);
	o.url = NULL;
	o.path = path;
	o.readers = 1;
	o.readonly = 1;
	if (gh_store_open(&o, &s, &e) == GH_OK)
		return s;
	if (strstr(e.msg, "file is not a database"))
		fprintf(stderr, "gatehouse: --from %s is not a gatehouse database: it is not a "
			"SQLite file\n", path);
	else if (strstr(e.msg, "has no schema"))
		fprintf(stderr, "gatehouse: --from %s is not a gatehouse database: it has no "
			"schema_migrations table\n", path);
	else
		fprintf(stderr, "gatehouse: --from: %s\n", e.msg);
	return NULL;
}

/* Fails (GH_EXIT_RUNTIME) when the target at url holds gatehouse data,
 * before anything is written to it, even a migration: a database in use by
 * an older gatehouse stays as it is. A database without a schema yet
 * passes. */
static int target_unused(const struct gh_cli *c, const char *url)
{
	struct gh_store_opts o;
	struct gh_store *s = NULL;
	struct gh_err e;
	enum gh_code rc;

	target_opts(c, url, 1, &o);
	rc = gh_store_open(&o, &s, &e);
	if (rc == GH_E_IO) /* no schema: a new database */
		return GH_EXIT_OK;
	if (rc == GH_OK)
		rc = gh_store_copy_target_empty(s, &e);
	gh_store_close(s);
	if (rc == GH_OK)
		return GH_EXIT_OK;
	fprintf(stderr, "gatehouse: --to: %s\n", e.msg);
	return GH_EXIT_RUNTIME;
}

/* The rows of every table on both sides; 0 when they agree. */
static int print_counts(const struct gh_store_copy_report *r)
{
	size_t i;
	int differ = 0;

	printf("%-28s %12s %12s\n", "table", "sqlite", "postgresql");
	for (i = 0; i < r->n; i++) {
		const struct gh_store_copy_table *t = &r->t[i];

		printf("%-28s %12lld %12lld%s\n", t->name, (long long)t->rows,
		       (long long)t->target_rows, t->rows == t->target_rows ? "" : "  DIFFERS");
		differ |= t->rows != t->target_rows;
	}
	return differ;
}

/* A path as the operator should write it in the config (absolute). */
static void abs_path(const char *p, char *out, size_t cap)
{
	char real[PATH_MAX];

	gh_strlcpy(out, realpath(p, real) ? real : p, cap);
}

static int migrate_copy(struct gh_cli *c, const char *from, const char *to_arg)
{
	const char *path;
	char *to = NULL, shown[256], hk[PATH_MAX], sk[PATH_MAX], wf[PATH_MAX];
	struct gh_store *src = NULL, *dst = NULL;
	struct gh_store_copy_report *rep = NULL;
	struct gh_store_opts o;
	struct gh_audit_verify_opts vo;
	struct gh_audit_verify a, b;
	unsigned char pk[32];
	struct gh_err e;
	struct stat st;
	long pid;
	int rc = GH_EXIT_USAGE, differ;

	if (!from || !to_arg) {
		fprintf(stderr, "gatehouse: migrate needs both --from sqlite:PATH and --to URL\n\n%s",
			usage_migrate);
		goto out;
	}
	if (c->db) {
		fprintf(stderr, "gatehouse: --db and --from both name the database to read: keep "
			"--from\n");
		goto out;
	}
	if (strncmp(from, "sqlite:", 7) || !from[7]) {
		fprintf(stderr, "gatehouse: --from: expected sqlite:PATH, the SQLite database to "
			"copy\n");
		goto out;
	}
	path = from + 7;
	if (!strncmp(path, "//", 2)) /* sqlite:///var/lib/x as well as sqlite:/var/lib/x */
		path += 2;
	if (gh_config_subst_env(to_arg, &to, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: --to: %s\n", e.msg);
		goto out;
	}
	if (!gh_pg_is_url(to) || gh_pg_url_check(to, "--to", &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", gh_pg_is_url(to) ? e.msg
				: "--to must be a postgres:// or postgresql:// URL");
		goto out;
	}
	gh_pg_url_redact(to, shown, sizeof(shown));
	/* the key files default to beside the source, as its server had them */
	c->db = path;
	if ((rc = gh_cli_load(c)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "gatehouse: --from %s: %s\n", path,
			access(path, F_OK) != 0 ? strerror(errno) : "not a file");
		goto out;
	}
	if ((pid = gh_cli_server_pid(path))) {
		fprintf(stderr, "gatehouse: gatehouse serve (process %ld) is running on %s: stop it "
			"first (a copy taken beside it would miss what it writes next)\n", pid,
			path);
		goto out;
	}
	if (!(src = open_source(c, path)))
		goto out;
	if (gh_store_copy_source_check(src, path, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: --from %s\n", e.msg);
		goto out;
	}
	/* a wrong URL or password, or a target in use, before the long reads */
	if ((rc = target_unused(c, to)) != GH_EXIT_OK)
		goto out;
	rc = GH_EXIT_RUNTIME;
	printf("source: sqlite:%s (schema version %d)\ntarget: %s\n", path,
	       gh_store_schema_version(src), shown);

	/* the source's chain first: a damaged one is not carried over */
	gh_audit_verify_opts_config(c->cfg, &vo);
	vo.trusted_pk = trusted_key(c, pk) ? pk : NULL;
	vo.witness_file = c->witness_file;
	vo.now_ms = gh_now_ms(); /* the tail rule at one time, for both sides */
	if (gh_audit_verify_ex(src, &vo, &a, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: verifying the source's audit log: %s\n", e.msg);
		goto out;
	}
	printf("\nthe source's audit log:\n");
	gh_cli_audit_verify_print(&a, vo.witness_file, 0);
	fflush(stdout);
	if (!a.chain_ok) {
		fprintf(stderr, "gatehouse: the source's audit log is not intact (row %lld): nothing "
			"was copied, a copy would carry the damage to PostgreSQL\n",
			(long long)a.bad_seq);
		goto out;
	}

	target_opts(c, to, 0, &o);
	if (gh_store_open(&o, &dst, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: --to: %s\n", e.msg);
		goto out;
	}
	if (!(rep = calloc(1, sizeof(*rep)))) {
		fprintf(stderr, "gatehouse: out of memory\n");
		goto out;
	}
	printf("\ncopying into %s in one transaction\n", shown);
	fflush(stdout);
	if (gh_store_copy(src, dst, progress, NULL, rep, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\ngatehouse: nothing was copied to %s\n", e.msg,
			shown);
		goto out;
	}
	printf("committed: %lld rows of %zu tables in %.2f s (%.0f rows/s, %.1f MB of COPY "
	       "text); %d identity columns continue past the copied ids\n",
	       (long long)rep->rows, rep->n, rep->seconds,
	       rep->seconds > 0 ? (double)rep->rows / rep->seconds : 0.0,
	       (double)rep->bytes / 1e6, rep->identities);
	/* the planner's statistics of the new tables, before anyone queries
	 * them (a server's leader refreshes them only now and then) */
	if (gh_store_analyze(dst, &e) != GH_OK)
		fprintf(stderr, "gatehouse: warning: ANALYZE after the copy: %s\n", e.msg);
	if (gh_store_copy_count(dst, rep, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	differ = print_counts(rep);

	if (gh_audit_verify_ex(dst, &vo, &b, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: verifying the audit log on PostgreSQL: %s\n", e.msg);
		goto out;
	}
	printf("\nthe audit log on PostgreSQL:\n");
	gh_cli_audit_verify_print(&b, vo.witness_file, 1);
	if (!b.chain_ok || !same_chain(&a, &b) || differ) {
		printf("\nthe copy does NOT match the source: %s%s\n",
		       differ ? "row counts differ; " : "",
		       !b.chain_ok ? "its audit log is not intact"
		       : !same_chain(&a, &b) ? "its audit log verifies differently" : "");
		fprintf(stderr, "gatehouse: the copy in %s does not match the source (it is "
			"committed: empty that database before trying again)\n", shown);
		goto out;
	}
	abs_path(c->key_hash_file, hk, sizeof(hk));
	abs_path(c->signing_key_file, sk, sizeof(sk));
	if (c->witness_file)
		abs_path(c->witness_file, wf, sizeof(wf));
	printf("\naudit log: the same on both: %lld rows, %lld checkpoints, signed up to row "
	       "%lld\n", (long long)b.rows, (long long)b.checkpoints, (long long)b.signed_seq);
	printf("done. Next: keep sqlite:%s as it is (a backup); set database.url to the target\n"
	       "and name the files of this install (with database.url they no longer default\n"
	       "to beside the database):\n"
	       "  \"auth\":  {\"key_hash_file\": \"%s\"},\n"
	       "  \"audit\": {\"signing_key_file\": \"%s\"%s%s%s}\n", path, hk, sk,
	       c->witness_file ? ", \"witness\": {\"file\": \"" : "", c->witness_file ? wf : "",
	       c->witness_file ? "\"}" : "");
	rc = GH_EXIT_OK;
out:
	gh_store_close(dst);
	gh_store_close(src);
	free(rep);
	if (to) {
		sodium_memzero(to, strlen(to));
		free(to);
	}
	return rc;
}

int gh_cmd_migrate(int argc, char **argv)
{
	struct gh_cli c = {0};
	const char *from = NULL, *to = NULL;
	struct gh_opt opts[] = {{"--config", 1, &c.config, NULL}, {"--db", 1, &c.db, NULL},
			     {"--from", 1, &from, NULL}, {"--to", 1, &to, NULL}, {0}};
	struct gh_store *s;
	char db[512];
	int help, rc;

	if (gh_cli_parse(argc, argv, 2, opts, usage_migrate, &help) != 0)
		return help ? GH_EXIT_OK : GH_EXIT_USAGE;
	if (from || to) {
		rc = migrate_copy(&c, from, to);
		gh_cli_free(&c);
		return rc;
	}
	if ((rc = gh_cli_load(&c)) != GH_EXIT_OK || (rc = gh_cli_check_paths(&c)) != GH_EXIT_OK) {
		gh_cli_free(&c);
		return rc;
	}
	/* gh_store_open applies pending migrations under the writer lock. */
	if (!(s = gh_cli_store(&c, 0, NULL))) {
		gh_cli_free(&c);
		return GH_EXIT_RUNTIME;
	}
	gh_cli_db_name(c.cfg, db, sizeof(db));
	printf("database %s is at schema version %d\n", db, gh_store_schema_version(s));
	gh_store_close(s);
	gh_cli_free(&c);
	return GH_EXIT_OK;
}
