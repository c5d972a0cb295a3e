/*
 * bench_mcp.c - the latency gatehouse adds to an MCP tools/call of an HTTP
 * tool, measured against calling the same tool endpoint directly, on each
 * storage backend side by side.
 *
 * Set-up: a temp dir, tests/fake/fake_upstream (its /tools/weather is the
 * HTTP tool, answering the same JSON every time) and "gatehouse serve" as
 * child processes on loopback, one API key and one MCP session per
 * gatehouse (initialize, notifications/initialized; 2025-11-25). Each
 * sample is:
 *
 *   through gatehouse  POST /mcp tools/call get_weather {"city":"Oslo"}:
 *                      the session, the policy (allowlist, rate limit,
 *                      schema), the "allowed" and "executed" audit rows
 *                      committed on the request's path, the tool's POST
 *                      to the fake, the run record;
 *   direct             POST /tools/weather {"city":"Oslo"} to the fake.
 *
 * Backends (--backend, a list; default sqlite), each a gatehouse of its own
 * (or two) on a database of its own, all running through the whole run:
 *
 *   sqlite       the SQLite file (WAL, synchronous=NORMAL, as configured
 *                by default); sqlite-full: database.synchronous "full";
 *   pg1          PostgreSQL, one gatehouse; pg2: two gatehouse replicas on
 *                one database (sharing auth.key_hash_file and
 *                audit.signing_key_file), each client thread sending its
 *                requests to the two in turn on a keep-alive connection to
 *                each; synchronous_commit=off for the database;
 *   pg1-sync, pg2-sync  the same with synchronous_commit=on.
 *
 * The PostgreSQL backends share one server this program starts with
 * tests/pg/pg_server.sh (fsync=on, shared_buffers=256MB, and
 * pg_stat_statements to count the statements each call costs); without
 * PostgreSQL installed their rows say why they were skipped.
 *
 * Added latency is a backend's percentile minus the direct percentile of
 * the same rank in the same repetition; tables show medians over
 * repetitions. In each repetition the direct block and one block per
 * backend run in an order rotated by one from the repetition before. The
 * load is closed-loop: C threads, one keep-alive connection each (one per
 * replica for pg2), the next request when the previous answer is in; every
 * block is bounded by a request count and a deadline. At the end each
 * backend's audit table must hold exactly two rows per call made through
 * it, and "gatehouse audit verify" must find its log intact.
 *
 * Threading: main sets up, workers only measure (their own connections).
 */
#include <ctype.h>
#include <pthread.h>
#include <sqlite3.h>

#include "bench_pg.h"

#define MAX_CONC 64
#define MAX_REPLICAS 2
#define MAX_BACKENDS 6
#define MAX_REPS 64
#define TOOL_ANSWER "{\"temp\":21,\"sky\":\"clear\",\"city\":\"Oslo\"}"
#define CALL_BODY                                                                            \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"       \
	"\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}}"
#define DIRECT_BODY "{\"city\":\"Oslo\"}"
/* the PostgreSQL server's settings for this benchmark (see the README) */
#define PG_SETTINGS "fsync=on shared_buffers=256MB shared_preload_libraries=pg_stat_statements"

/* Where one block's requests go: the tool directly, or one gatehouse, or
 * two replicas taking turns. */
struct target {
	int n;                               /* replicas (1 for direct) */
	int port[MAX_REPLICAS];
	const char *headers[MAX_REPLICAS];   /* key, session, Accept; NULL: direct */
	pid_t pid[MAX_REPLICAS];             /* gatehouse processes (CPU); 0: none */
};

struct block {
	const struct target *t;
	int64_t per_worker;
	int64_t deadline_ns;
	pthread_barrier_t go;
};

struct worker {
	struct block *b;
	int64_t *samples;
	int64_t n;
	int errors;
	char err[256];
};

static int one_request(struct worker *w, struct bconn *c, const char *headers)
{
	struct bresp r;
	int ok;

	if (headers) {
		if (bconn_request(c, "POST", "/mcp", headers, CALL_BODY, strlen(CALL_BODY), &r))
			return -1;
		ok = r.status == 200 && r.body && strstr(r.body, "\"structuredContent\"") &&
		     strstr(r.body, "\"isError\":false");
	} else {
		if (bconn_request(c, "POST", "/tools/weather", NULL, DIRECT_BODY,
				  strlen(DIRECT_BODY), &r))
			return -1;
		ok = r.status == 200 && r.body && strstr(r.body, "\"sky\"");
	}
	if (!ok && !w->err[0])
		snprintf(w->err, sizeof(w->err), "status %d: %.200s", r.status,
			 r.body ? r.body : "");
	bresp_free(&r);
	return ok ? 0 : -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct block *b = w->b;
	const struct target *t = b->t;
	struct bconn c[MAX_REPLICAS];
	int64_t i;
	int k;

	for (k = 0; k < t->n; k++) {
		if (bconn_open(&c[k], t->port[k], 30000) != 0) {
			snprintf(w->err, sizeof(w->err), "cannot connect to port %d", t->port[k]);
			w->errors++;
		}
	}
	pthread_barrier_wait(&b->go);
	for (i = 0; i < b->per_worker && w->errors <= 10; i++) {
		int64_t t0 = bench_ns();
		int r = (int)(i % t->n);

		if (t0 > b->deadline_ns)
			break;
		if (one_request(w, &c[r], t->headers[r]) != 0) {
			w->errors++;
			continue;
		}
		w->samples[w->n++] = bench_ns() - t0;
	}
	for (k = 0; k < t->n; k++)
		bconn_close(&c[k]);
	return NULL;
}

struct result {
	struct bench_stats s;
	double rps;
	int errors;
	int64_t cpu_ns;          /* the target's gatehouse processes, during the block */
};

static int64_t target_cpu_ns(const struct target *t)
{
	int64_t n = 0;
	int k;

	for (k = 0; k < t->n; k++)
		if (t->pid[k] > 0)
			n += bench_cpu_ns(t->pid[k]);
	return n;
}

static struct result run_block(const struct target *t, int conc, int64_t total,
			       int64_t max_seconds)
{
	struct block b;
	struct worker w[MAX_CONC];
	pthread_t th[MAX_CONC];
	int64_t *all, n = 0, t0, t1, cpu0;
	struct result res;
	int i;

	memset(&b, 0, sizeof(b));
	memset(&res, 0, sizeof(res));
	b.t = t;
	b.per_worker = (total + conc - 1) / conc;
	pthread_barrier_init(&b.go, NULL, (unsigned)conc + 1);
	for (i = 0; i < conc; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].b = &b;
		w[i].samples = calloc((size_t)b.per_worker, sizeof(int64_t));
		if (!w[i].samples)
			bench_die("out of memory");
		if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0)
			bench_die("pthread_create failed");
	}
	cpu0 = target_cpu_ns(t);
	t0 = bench_ns();
	b.deadline_ns = t0 + max_seconds * 1000000000LL;
	pthread_barrier_wait(&b.go);
	for (i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	t1 = bench_ns();
	res.cpu_ns = target_cpu_ns(t) - cpu0;
	pthread_barrier_destroy(&b.go);
	all = calloc((size_t)(b.per_worker * conc), sizeof(int64_t));
	if (!all)
		bench_die("out of memory");
	for (i = 0; i < conc; i++) {
		memcpy(all + n, w[i].samples, (size_t)w[i].n * sizeof(int64_t));
		n += w[i].n;
		res.errors += w[i].errors;
		if (w[i].errors)
			fprintf(stderr, "bench: worker %d: %d errors (%s)\n", i, w[i].errors,
				w[i].err);
		free(w[i].samples);
	}
	res.s = bench_summary(all, (size_t)n, 1e3);
	res.rps = (double)n / ((double)(t1 - t0) / 1e9);
	free(all);
	return res;
}

/* ---------------------------------------------------------- backends */

struct backend {
	const char *name;            /* as --backend names it */
	const char *what;            /* for the tables */
	int pg;                      /* PostgreSQL, else SQLite */
	int replicas;
	int durable;                 /* every commit durable before it returns */
	char skip[240];              /* why it is not measured; "" when it is */
	char dir[PATH_MAX];          /* its files; replica r's in dir/r<r> */
	char cfg[MAX_REPLICAS][PATH_MAX + 32];
	char dbname[32];             /* PostgreSQL: its database */
	char env[32];                /* the variable the configs read its URL from */
	char url[1024];
	struct bench_proc gh[MAX_REPLICAS];
	char headers[MAX_REPLICAS][512];
	struct target t;
	int64_t calls;               /* answered through it, warm-ups included */
};

static const struct {
	const char *name, *what;
	int pg, replicas, durable;
} known[] = {
	{"sqlite", "SQLite", 0, 1, 0},
	{"sqlite-full", "SQLite, synchronous=FULL", 0, 1, 1},
	{"pg1", "PostgreSQL, 1 gatehouse", 1, 1, 0},
	{"pg2", "PostgreSQL, 2 replicas", 1, 2, 0},
	{"pg1-sync", "PostgreSQL sync, 1 gatehouse", 1, 1, 1},
	{"pg2-sync", "PostgreSQL sync, 2 replicas", 1, 2, 1},
};

/* The config of one replica of b: the same for both replicas but for the
 * second's key files, which are the first's (replicas share them). */
static void write_config(const struct backend *b, int r, int fake_port)
{
	char buf[8192], db[1400], shared[2 * PATH_MAX + 200];

	if (b->pg)
		bench_fmt(db, sizeof(db), "{\"url\": \"${%s}\", \"pool_size\": 16}", b->env);
	else
		bench_fmt(db, sizeof(db), "{\"path\": \"gatehouse.db\", \"synchronous\": \"%s\"}",
			  b->durable ? "full" : "normal");
	shared[0] = '\0';
	if (r > 0)
		bench_fmt(shared, sizeof(shared),
			  " \"auth\": {\"key_hash_file\": \"%s/r0/gatehouse-hashkey\"},\n", b->dir);
	bench_fmt(buf, sizeof(buf),
		"{\n"
		" \"server\": {\"listen\": \"127.0.0.1:0\", \"threads\": 64, \"max_streams\": 16},\n"
		" \"database\": %s,\n"
		"%s"
		" \"providers\": {\"offline\": {\"type\": \"mock\"}},\n"
		" \"agents\": {\"assistant\": {\"provider\": \"offline\", \"model\": \"m\", "
		"\"tools\": [\"get_weather\"], \"memory\": {\"enabled\": false}}},\n"
		" \"tools\": {\"get_weather\": {\"type\": \"http\", \"description\": \"Weather\", "
		"\"url\": \"http://127.0.0.1:%d/tools/weather\", \"timeout_ms\": 30000, "
		"\"input_schema\": {\"type\": \"object\", \"properties\": {\"city\": "
		"{\"type\": \"string\"}}, \"required\": [\"city\"]}}},\n"
		" \"policies\": {\"default\": {\"agents\": [\"*\"], "
		"\"tools\": {\"allow\": [\"get_*\"]}, "
		"\"rate_limits\": {\"requests_per_minute\": 100000000, \"burst\": 1000000, "
		"\"tool_calls_per_minute\": {\"*\": 100000000}}}},\n"
		" \"audit\": {\"checkpoint_rows\": 1000, \"checkpoint_seconds\": 60%s%s%s}\n"
		"}\n", db, shared, fake_port, r > 0 ? ", \"signing_key_file\": \"" : "",
		r > 0 ? b->dir : "", r > 0 ? "/r0/gatehouse-audit.key\"" : "");
	bench_write_file(b->cfg[r], buf);
}

/* Opens an MCP session with initialize; its id into sid. */
static void mcp_session(int port, const char *key, char *sid, size_t cap)
{
	static const char body[] =
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
		"\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
		"\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}";
	struct sockaddr_in a;
	char req[2048], resp[8192], *p, *end;
	size_t got = 0;
	ssize_t n;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		bench_die("cannot connect to gatehouse");
	bench_fmt(req, sizeof(req),
		  "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
		  "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
		  "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
		  key, strlen(body), body);
	if (write_all(fd, req, strlen(req)) != 0)
		bench_die("cannot send initialize");
	while (got < sizeof(resp) - 1 && (n = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	resp[got] = '\0';
	p = strstr(resp, "\r\nMcp-Session-Id: ");
	if (!p || !(end = strstr(p + 2, "\r\n")))
		bench_die("initialize gave no session: %.300s", resp);
	p += strlen("\r\nMcp-Session-Id: ");
	if ((size_t)(end - p) >= cap)
		bench_die("session id too long");
	memcpy(sid, p, (size_t)(end - p));
	sid[end - p] = '\0';
}

/* Audit rows of the benchmark's calls in b's database. */
static int64_t count_audit(const struct backend *b)
{
	static const char sql[] = "SELECT count(*) FROM audit_events WHERE tool_name = "
				  "'get_weather' AND event IN ('allowed', 'executed')";
	char path[PATH_MAX + 32];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (b->pg)
		return bench_pg_int(b->url, sql);
	bench_fmt(path, sizeof(path), "%s/r0/gatehouse.db", b->dir);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* "gatehouse audit verify" on b's first config: 1 when intact. */
static int verify_audit(const char *gh, const struct backend *b)
{
	char outp[PATH_MAX + 32], buf[4096], rdir[PATH_MAX + 8];
	char *argv[] = {(char *)(uintptr_t)gh, "audit", "verify", "--config",
			(char *)(uintptr_t)b->cfg[0], NULL};
	const char *env[] = {"GH_LOG=warn", NULL};
	int rc;

	bench_fmt(rdir, sizeof(rdir), "%s/r0", b->dir);
	bench_fmt(outp, sizeof(outp), "%s/verify.out", rdir);
	unlink(outp);
	rc = bench_run(argv, rdir, outp, outp, env, 600000);
	bench_read_file(outp, buf, sizeof(buf));
	printf("  %-12s audit verify: %.*s\n", b->name, (int)strcspn(buf, "\n"), buf);
	return rc == 0 && strstr(buf, "audit log intact");
}

/* Starts b's gatehouse (or both replicas) on its own database, with one
 * key and one MCP session each. */
static void backend_start(const char *gh, struct backend *b, const struct bench_pg *pg,
			  int fake_port)
{
	char rdir[MAX_REPLICAS][PATH_MAX + 8], key[256], sid[128], env[1100];
	int r;
	size_t i;

	if (mkdir(b->dir, 0700) != 0)
		bench_die("mkdir %s: %s", b->dir, strerror(errno));
	if (b->pg) {
		bench_fmt(b->dbname, sizeof(b->dbname), "gh_bench_%s", b->name);
		bench_fmt(b->env, sizeof(b->env), "GH_BENCH_DB_%s", b->name);
		for (i = 0; b->dbname[i]; i++)
			if (b->dbname[i] == '-')
				b->dbname[i] = '_';
		for (i = 0; b->env[i]; i++)
			b->env[i] = b->env[i] == '-' ? '_' : (char)toupper((unsigned char)b->env[i]);
		bench_pg_db(pg, b->dbname, b->durable, b->url, sizeof(b->url));
		/* the configs read it from the environment the children inherit */
		bench_fmt(env, sizeof(env), "%s", b->url);
		if (setenv(b->env, env, 1) != 0)
			bench_die("setenv %s", b->env);
	}
	for (r = 0; r < b->replicas; r++) {
		bench_fmt(rdir[r], sizeof(rdir[r]), "%s/r%d", b->dir, r);
		if (mkdir(rdir[r], 0700) != 0)
			bench_die("mkdir %s: %s", rdir[r], strerror(errno));
		bench_fmt(b->cfg[r], sizeof(b->cfg[r]), "%s/gatehouse.json", rdir[r]);
		write_config(b, r, fake_port);
		if (r == 0)
			bench_key_create(gh, rdir[0], b->cfg[0], "bench", 0, key, sizeof(key));
		/* the first replica has written the audit signing key when it
		 * listens: only then may the second start with it */
		bench_gh_start(gh, rdir[r], b->cfg[r], "warn", &b->gh[r]);
		mcp_session(b->gh[r].port, key, sid, sizeof(sid));
		bench_fmt(b->headers[r], sizeof(b->headers[r]),
			  "Authorization: Bearer %s\r\nMcp-Session-Id: %s\r\n"
			  "Accept: application/json, text/event-stream\r\n", key, sid);
		b->t.port[r] = b->gh[r].port;
		b->t.headers[r] = b->headers[r];
		b->t.pid[r] = b->gh[r].pid;
	}
	b->t.n = b->replicas;
}

/* ---------------------------------------------------------- report */

struct opts {
	int64_t requests, warmup, reps, max_seconds;
	int conc[8];
	int nconc;
	int keep;
};

/* One backend's figures over the repetitions of one concurrency. */
struct series {
	double p50[MAX_REPS], p99[MAX_REPS], mean[MAX_REPS], a50[MAX_REPS], a99[MAX_REPS];
	double rps[MAX_REPS], ratio[MAX_REPS];
	int64_t calls, cpu_ns, pg_cpu_ns;
	int errors;
};

static void scenario(const struct opts *o, int conc, struct backend *bk, int nb,
		     const struct target *direct, const struct bench_pg *pg)
{
	static struct series sr[MAX_BACKENDS + 1]; /* [0]: direct */
	int64_t r, reps = o->reps < MAX_REPS ? o->reps : MAX_REPS;
	int64_t st0[MAX_BACKENDS], st1[MAX_BACKENDS], cm0[MAX_BACKENDS], cm1[MAX_BACKENDS];
	int i, first = -1;

	memset(sr, 0, sizeof(sr));
	for (i = 0; i < nb; i++) {
		struct result g;

		if (bk[i].skip[0])
			continue;
		if (first < 0)
			first = i;
		g = run_block(&bk[i].t, conc, o->warmup, o->max_seconds);
		bk[i].calls += (int64_t)g.s.n;
		if (g.errors)
			bench_die("warm-up through %s failed (%d errors)", bk[i].name, g.errors);
	}
	if (run_block(direct, conc, o->warmup, o->max_seconds).errors)
		bench_die("warm-up direct failed");
	/* serve analyzes its tables when it starts, on a database all but
	 * empty, and PostgreSQL keeps the plans of the store's prepared
	 * statements until the next ANALYZE of a table: until autovacuum's
	 * first visit (about a minute on a live database) reading the audit
	 * chain's head scans the whole table. The blocks measure the steady
	 * state after that visit. */
	for (i = 0; i < nb; i++)
		if (bk[i].pg && !bk[i].skip[0])
			bench_pg_exec(bk[i].url, "ANALYZE");
	for (i = 0; i < nb; i++) {
		st0[i] = cm0[i] = -1;
		if (bk[i].pg && !bk[i].skip[0]) {
			st0[i] = bench_pg_statements(pg, bk[i].dbname);
			cm0[i] = bench_pg_commits(pg, bk[i].dbname);
		}
	}
	for (r = 0; r < reps; r++) {
		struct result res[MAX_BACKENDS + 1];
		int k;

		/* direct and every backend, the order rotated by one each rep */
		for (k = 0; k <= nb; k++) {
			int idx = (int)((k + r) % (nb + 1));
			int64_t pg0 = 0;

			if (idx > 0 && bk[idx - 1].skip[0])
				continue;
			if (idx > 0 && pg->up)
				pg0 = bench_pg_cpu_ns(pg);
			res[idx] = run_block(idx ? &bk[idx - 1].t : direct, conc, o->requests,
					     o->max_seconds);
			if (idx > 0 && pg->up)
				sr[idx].pg_cpu_ns += bench_pg_cpu_ns(pg) - pg0;
		}
		for (k = 0; k <= nb; k++) {
			struct series *s = &sr[k];
			const struct result *g = &res[k];

			if (k > 0 && bk[k - 1].skip[0])
				continue;
			s->p50[r] = g->s.p50, s->p99[r] = g->s.p99, s->mean[r] = g->s.mean;
			s->a50[r] = g->s.p50 - res[0].s.p50, s->a99[r] = g->s.p99 - res[0].s.p99;
			s->rps[r] = g->rps;
			s->ratio[r] = first >= 0 && res[first + 1].rps > 0
					      ? g->rps / res[first + 1].rps : 0;
			s->calls += (int64_t)g->s.n;
			s->cpu_ns += g->cpu_ns;
			s->errors += g->errors;
			if (k > 0)
				bk[k - 1].calls += (int64_t)g->s.n;
		}
	}
	for (i = 0; i < nb; i++) {
		st1[i] = cm1[i] = -1;
		if (st0[i] >= 0)
			st1[i] = bench_pg_statements(pg, bk[i].dbname);
		if (cm0[i] >= 0)
			cm1[i] = bench_pg_commits(pg, bk[i].dbname);
	}

	printf("\nMCP tools/call of an HTTP tool, concurrency %d: %lld reps x %lld requests "
	       "(latency in us, median over reps; CPU in us per call)\n", conc, (long long)reps,
	       (long long)o->requests);
	printf("  %-30s %8s %8s %8s %9s %9s %8s %6s %7s %7s %6s %6s\n", "", "p50", "p99", "mean",
	       "added p50", "added p99", "calls/s", "ratio", "GH CPU", "PG CPU", "stmts", "commit");
	for (i = -1; i < nb; i++) {
		const struct series *s = &sr[i + 1];
		size_t n = (size_t)reps;
		char name[64], st[16] = "-", cm[16] = "-", pgc[16] = "-", ghc[16] = "-";

		if (i >= 0 && bk[i].skip[0]) {
			printf("  %-30s skipped: %s\n", bk[i].what, bk[i].skip);
			continue;
		}
		snprintf(name, sizeof(name), "%s", i < 0 ? "tool called directly" : bk[i].what);
		if (i >= 0 && s->calls > 0) {
			snprintf(ghc, sizeof(ghc), "%.0f", (double)s->cpu_ns / 1e3 / (double)s->calls);
			if (pg->up)
				snprintf(pgc, sizeof(pgc), "%.0f",
					 (double)s->pg_cpu_ns / 1e3 / (double)s->calls);
			if (st1[i] >= 0)
				snprintf(st, sizeof(st), "%.1f",
					 (double)(st1[i] - st0[i]) / (double)s->calls);
			if (cm1[i] >= 0)
				snprintf(cm, sizeof(cm), "%.2f",
					 (double)(cm1[i] - cm0[i]) / (double)s->calls);
		}
		if (i < 0)
			printf("  %-30s %8.1f %8.1f %8.1f %9s %9s %8.0f\n", name,
			       bench_median(s->p50, n), bench_median(s->p99, n),
			       bench_median(s->mean, n), "", "", bench_median(s->rps, n));
		else
			printf("  %-30s %8.1f %8.1f %8.1f %9.1f %9.1f %8.0f %5.2fx %7s %7s %6s %6s\n",
			       name, bench_median(s->p50, n), bench_median(s->p99, n),
			       bench_median(s->mean, n), bench_median(s->a50, n),
			       bench_median(s->a99, n), bench_median(s->rps, n),
			       bench_median(s->ratio, n), ghc, pgc, st, cm);
	}
	printf("  (ratio: calls/s against %s in the same rep; stmts, commit: statements and "
	       "COMMITs PostgreSQL ran per call; PostgreSQL databases analyzed after the "
	       "warm-up)\n", first >= 0 ? bk[first].name : "-");
	for (i = 0; i < nb; i++) {
		const struct series *s = &sr[i + 1];

		if (bk[i].skip[0])
			continue;
		printf("  %-12s added p50 over reps: min %.1f, max %.1f us", bk[i].name,
		       bench_min(s->a50, (size_t)reps), bench_maxd(s->a50, (size_t)reps));
		if (bk[i].pg) {
			char sql[160];

			/* how much of the pools (16 per replica) the load opened */
			bench_fmt(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE "
				  "datname = '%s'", bk[i].dbname);
			printf("; %lld connections open to its database",
			       (long long)bench_pg_int(pg->url, sql));
		}
		printf("%s\n", s->errors ? " (ERRORS, see stderr)" : "");
		if (conc == 1 && !bk[i].pg && !bk[i].durable)
			printf("  target: added p50 <= 300 us at concurrency 1 with the audit rows "
			       "(%s): %s\n", bk[i].name,
			       bench_median(s->a50, (size_t)reps) <= 300 ? "met" : "NOT met");
	}
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_mcp [--requests N] [--reps R] [--warmup N] [--conc 1,16]\n"
		"                 [--backend sqlite,sqlite-full,pg1,pg2,pg1-sync,pg2-sync]\n"
		"                 [--max-seconds S] [--keep]\n"
		"Binaries: BUILD/gatehouse and BUILD/tests/fake_upstream next to this program,\n"
		"or GH_BIN / GH_FAKE. Temp files under GH_BENCH_TMP (default /tmp); the\n"
		"PostgreSQL cluster under GH_PG_TMP (default /tmp).\n");
	exit(2);
}

static int parse_backends(const char *v, struct backend *bk)
{
	int nb = 0;

	while (*v) {
		size_t k = strcspn(v, ","), j;

		for (j = 0; j < sizeof(known) / sizeof(known[0]); j++)
			if (strlen(known[j].name) == k && !strncmp(known[j].name, v, k))
				break;
		if (j == sizeof(known) / sizeof(known[0]) || nb == MAX_BACKENDS)
			bench_die("--backend: unknown or repeated \"%.*s\" (sqlite, sqlite-full, "
				  "pg1, pg2, pg1-sync, pg2-sync)", (int)k, v);
		for (int i = 0; i < nb; i++)
			if (!strcmp(bk[i].name, known[j].name))
				bench_die("--backend: %s named twice", known[j].name);
		memset(&bk[nb], 0, sizeof(bk[nb]));
		bk[nb].name = known[j].name;
		bk[nb].what = known[j].what;
		bk[nb].pg = known[j].pg;
		bk[nb].replicas = known[j].replicas;
		bk[nb].durable = known[j].durable;
		nb++;
		v += k;
		if (*v == ',')
			v++;
	}
	if (nb == 0)
		bench_die("--backend: name at least one");
	return nb;
}

int main(int argc, char **argv)
{
	struct opts o = {.requests = 2000, .warmup = 200, .reps = 5, .max_seconds = 60,
			 .conc = {1, 16}, .nconc = 2};
	static struct backend bk[MAX_BACKENDS];
	char gh[PATH_MAX], fake[PATH_MAX], dir[PATH_MAX], script[PATH_MAX], why[240];
	char pgstate[PATH_MAX + 8];
	const char *v;
	struct bench_proc fp;
	struct bench_pg pg;
	struct target direct;
	int i, ci, rc, nb = 0, want_pg = 0, bad = 0;

	for (i = 1; i < argc; i++) {
		if ((v = bench_opt(argc, argv, &i, "--requests")))
			o.requests = bench_num(v, 10, 10000000, "--requests");
		else if ((v = bench_opt(argc, argv, &i, "--warmup")))
			o.warmup = bench_num(v, 16, 1000000, "--warmup");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			o.reps = bench_num(v, 1, MAX_REPS, "--reps");
		else if ((v = bench_opt(argc, argv, &i, "--max-seconds")))
			o.max_seconds = bench_num(v, 1, 3600, "--max-seconds");
		else if ((v = bench_opt(argc, argv, &i, "--backend")))
			nb = parse_backends(v, bk);
		else if ((v = bench_opt(argc, argv, &i, "--conc")))
			o.nconc = bench_nums(v, o.conc, 8, 1, MAX_CONC, "--conc");
		else if (!strcmp(argv[i], "--keep"))
			o.keep = 1;
		else
			usage();
	}
	if (nb == 0)
		nb = parse_backends("sqlite", bk);
	bench_init();
	bench_paths(gh, fake, sizeof(gh));
	bench_tmpdir(dir, sizeof(dir), "mcp");
	memset(&pg, 0, sizeof(pg));
	memset(&direct, 0, sizeof(direct));

	printf("bench_mcp: added latency of an MCP tools/call (POST /mcp) of an HTTP tool\n");
	bench_print_host();
	for (i = 0; i < nb; i++)
		want_pg |= bk[i].pg;
	if (want_pg) {
		const char *set = getenv("GH_BENCH_PG_SETTINGS");

		if (!set || !*set)
			set = PG_SETTINGS;
		why[0] = '\0';
		bench_fmt(pgstate, sizeof(pgstate), "%s/pg", dir);
		if (bench_pg_available(script, sizeof(script), why, sizeof(why)) &&
		    bench_pg_start(&pg, script, pgstate, set, why, sizeof(why)) == 0)
			printf("PostgreSQL %s on a Unix socket, %s; synchronous_commit off for pg1 and "
			       "pg2, on for pg*-sync\n", pg.version, set);
		for (i = 0; i < nb; i++)
			if (bk[i].pg && !pg.up)
				snprintf(bk[i].skip, sizeof(bk[i].skip), "%s", why);
		if (!pg.up)
			printf("PostgreSQL rows skipped: %s\n", why);
	}
	bench_fake_start(fake, dir, 256, &fp);
	free(bench_http_ok(fp.port, "POST", "/_script", NULL,
			   "{\"tool\":\"weather\",\"replies\":[{\"body\":" TOOL_ANSWER
			   ",\"repeat\":true}]}"));
	direct.n = 1;
	direct.port[0] = fp.port;
	for (i = 0; i < nb; i++) {
		if (bk[i].skip[0])
			continue;
		bench_fmt(bk[i].dir, sizeof(bk[i].dir), "%s/%s", dir, bk[i].name);
		backend_start(gh, &bk[i], &pg, fp.port);
	}
	for (ci = 0; ci < o.nconc; ci++)
		scenario(&o, o.conc[ci], bk, nb, &direct, &pg);

	printf("\n");
	for (i = 0; i < nb; i++) {
		int64_t rows;
		int r;

		if (bk[i].skip[0])
			continue;
		for (r = 0; r < bk[i].replicas; r++) {
			rc = bench_stop(bk[i].gh[r].pid, 30000);
			if (rc != 0)
				fprintf(stderr, "bench: %s: gatehouse exited %d (see %s)\n", bk[i].name,
					rc, bk[i].gh[r].err);
		}
		rows = count_audit(&bk[i]);
		printf("  %-12s audit rows for get_weather: %lld (expected 2 per call: %lld)%s\n",
		       bk[i].name, (long long)rows, (long long)(2 * bk[i].calls),
		       rows == 2 * bk[i].calls ? "" : " MISMATCH");
		bad |= rows != 2 * bk[i].calls;
		bad |= !verify_audit(gh, &bk[i]);
	}
	bench_stop(fp.pid, 10000);
	if (pg.up)
		bench_pg_stop(&pg);
	if (bad)
		printf("AUDIT CHECK FAILED (see above)\n");
	if (o.keep)
		printf("kept %s\n", dir);
	else
		bench_rmrf(dir);
	return 0;
}
