/*
 * bench_pg.h - a PostgreSQL server for the benchmarks of the PostgreSQL
 * backend: started and stopped with tests/pg/pg_server.sh (Debian's
 * postgresql, a throwaway cluster on a Unix socket, the settings the
 * benchmark asks for), a database of its own per scenario, one-value
 * queries through libpq, and the CPU the server's processes have used.
 *
 * Like bench.h these are static functions for the main thread (set-up,
 * tear-down and the counts between blocks); each call opens and closes its
 * own libpq connection. URLs hold the server's password: they are passed
 * to children through the environment, never printed.
 */
#ifndef GH_BENCH_PG_H
#define GH_BENCH_PG_H

#include <glob.h>

#include <libpq-fe.h>

#include "bench.h"

#ifndef GH_BENCH_SRC
#define GH_BENCH_SRC "."
#endif

struct bench_pg {
	char state[PATH_MAX];   /* pg_server.sh's STATE directory */
	char script[PATH_MAX];  /* pg_server.sh */
	char url[1024];         /* its database gatehouse_test, with the password */
	char version[64];       /* server_version */
	pid_t master;           /* the postmaster */
	int up;
};

/* The server started last, stopped when the benchmark dies. */
static struct bench_pg *bench_pg_running;

/* 1 when Debian's postgresql is installed (an initdb under
 * /usr/lib/postgresql/<version>/bin) and tests/pg/pg_server.sh is found
 * (GH_SRC, else the source tree this was built from); else 0 with the
 * reason in why. The script's path goes into script. */
BENCH_UNUSED static int bench_pg_available(char *script, size_t cap, char *why, size_t wcap)
{
	const char *src = getenv("GH_SRC");
	glob_t g;
	int found;

	bench_fmt(script, cap, "%s/tests/pg/pg_server.sh", src && *src ? src : GH_BENCH_SRC);
	if (access(script, R_OK) != 0) {
		snprintf(why, wcap, "no %.160s (set GH_SRC to the source tree)", script);
		return 0;
	}
	memset(&g, 0, sizeof(g));
	found = glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) == 0 && g.gl_pathc > 0;
	globfree(&g);
	if (!found) {
		snprintf(why, wcap, "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/"
				    "initdb: apt-get install postgresql)");
		return 0;
	}
	return 1;
}

BENCH_UNUSED static void bench_pg_quiet(void *ud, const char *msg)
{
	(void)ud;
	(void)msg;
}

/* Connects to url, with the server's notices ("... does not exist,
 * skipping") dropped; dies on failure (the message names no password). */
BENCH_UNUSED static PGconn *bench_pg_connect(const char *url)
{
	PGconn *c = PQconnectdb(url);

	if (!c || PQstatus(c) != CONNECTION_OK)
		bench_die("PostgreSQL: cannot connect: %s", c ? PQerrorMessage(c) : "out of memory");
	PQsetNoticeProcessor(c, bench_pg_quiet, NULL);
	return c;
}

/* Runs one statement on url; dies when it fails. */
BENCH_UNUSED static void bench_pg_exec(const char *url, const char *sql)
{
	PGconn *c = bench_pg_connect(url);
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		bench_die("PostgreSQL: %.200s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* The first column of sql's first row as an integer (0 for NULL); dies
 * when the statement fails or returns no row. */
BENCH_UNUSED static int64_t bench_pg_int(const char *url, const char *sql)
{
	PGconn *c = bench_pg_connect(url);
	PGresult *r = PQexec(c, sql);
	int64_t v = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1 || PQnfields(r) < 1)
		bench_die("PostgreSQL: %.200s: %s", sql, PQerrorMessage(c));
	if (!PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

/* url (as pg_server.sh writes it: postgresql://user:pw@/DB?host=...) with
 * its database replaced by db. */
BENCH_UNUSED static void bench_pg_url_db(const char *url, const char *db, char *out, size_t cap)
{
	const char *auth = strstr(url, "://"), *path, *query;

	if (!auth || !(path = strchr(auth + 3, '/')))
		bench_die("PostgreSQL: the server's URL has no database part");
	query = strchr(path, '?');
	bench_fmt(out, cap, "%.*s/%s%s", (int)(path - url), url, db, query ? query : "");
}

/* The postmaster's pid (its data directory's postmaster.pid), or 0. */
BENCH_UNUSED static pid_t bench_pg_master(const struct bench_pg *pg)
{
	char path[PATH_MAX + 32], buf[PATH_MAX];
	long pid;

	bench_fmt(path, sizeof(path), "%s/pgdata", pg->state);
	if (bench_read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	buf[strcspn(buf, "\n")] = '\0';
	bench_fmt(path, sizeof(path), "%s/data/postmaster.pid", buf);
	if (bench_read_file(path, buf, sizeof(buf)) <= 0 || (pid = strtol(buf, NULL, 10)) <= 0)
		return 0;
	return (pid_t)pid;
}

static void bench_pg_stop(struct bench_pg *pg);

/* bench_cleanup: stops the server when the benchmark dies; on a signal
 * asks the postmaster for a fast shutdown (the cluster stays behind, in
 * the directory STATE/pgdata names). */
BENCH_UNUSED static void bench_pg_cleanup(int in_signal)
{
	struct bench_pg *pg = bench_pg_running;

	if (!pg)
		return;
	if (in_signal) {
		if (pg->master > 0)
			kill(pg->master, SIGINT);
		return;
	}
	bench_pg_stop(pg);
}

/* Starts a server in state (created when missing) with settings (the
 * words of GH_PG_SETTINGS; may be NULL) and the cluster under GH_PG_TMP
 * when the caller set it; when the settings preload pg_stat_statements,
 * creates the extension in pg->url's database. 0 when it runs; -1 with
 * pg_server.sh's message in why. */
BENCH_UNUSED static int bench_pg_start(struct bench_pg *pg, const char *script, const char *state,
				       const char *settings, char *why, size_t wcap)
{
	char set[1024], outp[PATH_MAX], urlp[PATH_MAX];
	char *argv[] = {"/bin/sh", (char *)(uintptr_t)script, "start", (char *)(uintptr_t)state,
			NULL};
	const char *env[] = {set, NULL};
	PGconn *c;
	PGresult *r;
	ssize_t n;

	memset(pg, 0, sizeof(*pg));
	bench_fmt(pg->state, sizeof(pg->state), "%s", state);
	bench_fmt(set, sizeof(set), "GH_PG_SETTINGS=%s", settings ? settings : "");
	if (mkdir(state, 0700) != 0 && errno != EEXIST)
		bench_die("mkdir %s: %s", state, strerror(errno));
	bench_fmt(outp, sizeof(outp), "%s/pg_server.out", state);
	bench_fmt(urlp, sizeof(urlp), "%s/url", state);
	bench_fmt(pg->script, sizeof(pg->script), "%s", script);
	if (bench_run(argv, NULL, outp, outp, env, 180000) != 0) {
		char buf[1024];

		bench_read_file(outp, buf, sizeof(buf));
		snprintf(why, wcap, "pg_server.sh start failed: %.*s", (int)strcspn(buf, "\n"),
			 buf);
		return -1;
	}
	pg->up = 1;
	pg->master = bench_pg_master(pg);
	bench_pg_running = pg;
	bench_cleanup = bench_pg_cleanup;
	n = bench_read_file(urlp, pg->url, sizeof(pg->url));
	while (n > 0 && (pg->url[n - 1] == '\n' || pg->url[n - 1] == ' '))
		pg->url[--n] = '\0';
	if (n <= 0) {
		snprintf(why, wcap, "pg_server.sh wrote no %.160s", urlp);
		return -1;
	}
	c = bench_pg_connect(pg->url);
	r = PQexec(c, "SHOW server_version");
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		snprintf(pg->version, sizeof(pg->version), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	r = PQexec(c, "SHOW shared_preload_libraries");
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    strstr(PQgetvalue(r, 0, 0), "pg_stat_statements")) {
		PQclear(r);
		r = PQexec(c, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			bench_die("PostgreSQL: CREATE EXTENSION pg_stat_statements: %s",
				  PQerrorMessage(c));
	}
	PQclear(r);
	PQfinish(c);
	return 0;
}

/* Stops the server and removes its cluster (pg_server.sh keeps its log in
 * STATE/server.log). No-op when it is not up. */
BENCH_UNUSED static void bench_pg_stop(struct bench_pg *pg)
{
	char outp[PATH_MAX];
	char *argv[] = {"/bin/sh", pg->script, "stop", pg->state, NULL};

	if (bench_pg_running == pg) {
		bench_pg_running = NULL;
		bench_cleanup = NULL;
	}
	if (!pg->up)
		return;
	bench_fmt(outp, sizeof(outp), "%s/pg_server.out", pg->state);
	if (bench_run(argv, NULL, outp, outp, NULL, 120000) != 0)
		fprintf(stderr, "bench: pg_server.sh stop failed (see %s)\n", outp);
	pg->up = 0;
}

/* Creates database db on pg's server (dropping one left by an earlier run)
 * with synchronous_commit set for its sessions (on or off). Its URL into
 * out. */
BENCH_UNUSED static void bench_pg_db(const struct bench_pg *pg, const char *db, int sync_commit,
				     char *out, size_t cap)
{
	char sql[256];

	bench_fmt(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
	bench_pg_exec(pg->url, sql);
	bench_fmt(sql, sizeof(sql), "CREATE DATABASE %s", db);
	bench_pg_exec(pg->url, sql);
	bench_fmt(sql, sizeof(sql), "ALTER DATABASE %s SET synchronous_commit = %s", db,
		  sync_commit ? "on" : "off");
	bench_pg_exec(pg->url, sql);
	bench_pg_url_db(pg->url, db, out, cap);
}

/* The calls pg_stat_statements counted in database db whose query matches
 * the SQL condition cond ("true" for all), or -1 when the server does not
 * preload pg_stat_statements. Asked on pg->url's database, so the question
 * is not counted in db. */
BENCH_UNUSED static int64_t bench_pg_calls(const struct bench_pg *pg, const char *db,
					   const char *cond)
{
	char sql[512];

	if (bench_pg_int(pg->url, "SELECT count(*) FROM pg_extension WHERE "
				  "extname = 'pg_stat_statements'") == 0)
		return -1;
	bench_fmt(sql, sizeof(sql),
		  "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = "
		  "(SELECT oid FROM pg_database WHERE datname = '%s') AND (%s)", db, cond);
	return bench_pg_int(pg->url, sql);
}

/* Statements the server has run in database db (every statement a client
 * sent, BEGIN and COMMIT included); -1 without pg_stat_statements. */
BENCH_UNUSED static int64_t bench_pg_statements(const struct bench_pg *pg, const char *db)
{
	return bench_pg_calls(pg, db, "true");
}

/* COMMITs the server has run in database db: the transactions a client
 * ended, leaving out the statements it sent alone (each its own
 * transaction); -1 without pg_stat_statements. */
BENCH_UNUSED static int64_t bench_pg_commits(const struct bench_pg *pg, const char *db)
{
	return bench_pg_calls(pg, db, "upper(query) LIKE 'COMMIT%'");
}

/* CPU time (ns) the server's processes have used: the postmaster and its
 * children (one backend per connection, the WAL writer, the
 * checkpointer...); a process that has exited is no longer counted. */
BENCH_UNUSED static int64_t bench_pg_cpu_ns(const struct bench_pg *pg)
{
	char path[64], buf[1024];
	DIR *d;
	struct dirent *de;
	long master = (long)pg->master;
	int64_t n;

	if (master <= 0)
		return -1;
	n = bench_cpu_ns((pid_t)master);
	d = opendir("/proc");
	while (d && (de = readdir(d))) {
		char *p;
		long pid = strtol(de->d_name, &p, 10), ppid = 0;

		if (pid <= 0 || *p)
			continue;
		bench_fmt(path, sizeof(path), "/proc/%ld/stat", pid);
		if (bench_read_file(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
			continue;
		/* ") S PPID ..." */
		if (sscanf(p + 1, " %*c %ld", &ppid) == 1 && ppid == master) {
			int64_t c = bench_cpu_ns((pid_t)pid);

			if (c > 0)
				n += c;
		}
	}
	if (d)
		closedir(d);
	return n;
}

#endif
