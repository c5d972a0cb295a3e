/*
 * bench_mcp.c - the latency gatehouse adds to an MCP tools/call of an HTTP
 * tool, measured against calling the same tool endpoint directly.
 *
 * Set-up: a temp dir, tests/fake/fake_upstream (its /tools/weather is the
 * HTTP tool, answering the same JSON every time) and "gatehouse serve" as
 * child processes on loopback, one API key and one MCP session
 * (initialize, notifications/initialized; 2025-11-25). Each sample is:
 *
 *   through gatehouse  POST /mcp tools/call get_weather {"city":"Oslo"}:
 *                      the session, the policy (allowlist, rate limit,
 *                      schema), the "allowed" and "executed" audit rows
 *                      committed on the request's path, the tool's POST
 *                      to the fake, the run record;
 *   direct             POST /tools/weather {"city":"Oslo"} to the fake.
 *
 * Added latency is gatehouse's percentile minus the direct percentile of
 * the same rank, per repetition; tables show medians over repetitions.
 * Direct and gateway blocks alternate in order from one repetition to the
 * next. The load is closed-loop: C threads, one keep-alive connection each,
 * the next request when the previous answer is in; every block is bounded
 * by a request count and a deadline. At the end the audit table must hold
 * exactly two rows per call made through gatehouse.
 *
 * Threading: main sets up, workers only measure (one connection each).
 */
#include <pthread.h>
#include <sqlite3.h>

#include "bench.h"

#define MAX_CONC 64
#define TOOL_ANSWER "{\"temp\":21,\"sky\":\"clear\",\"city\":\"Oslo\"}"
#define CALL_BODY                                                                            \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"       \
	"\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}}"
#define DIRECT_BODY "{\"city\":\"Oslo\"}"

struct block {
	int gateway;                 /* 1: POST /mcp; 0: the tool directly */
	int port;
	const char *headers;         /* gateway: key, session, Accept */
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

static int one_request(struct worker *w, struct bconn *c)
{
	struct block *b = w->b;
	struct bresp r;
	int ok;

	if (b->gateway) {
		if (bconn_request(c, "POST", "/mcp", b->headers, CALL_BODY, strlen(CALL_BODY), &r))
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
	struct bconn c;
	int64_t i;

	if (bconn_open(&c, b->port, 30000) != 0) {
		snprintf(w->err, sizeof(w->err), "cannot connect");
		w->errors++;
	}
	pthread_barrier_wait(&b->go);
	for (i = 0; i < b->per_worker && w->errors <= 10; i++) {
		int64_t t0 = bench_ns();

		if (t0 > b->deadline_ns)
			break;
		if (one_request(w, &c) != 0) {
			w->errors++;
			continue;
		}
		w->samples[w->n++] = bench_ns() - t0;
	}
	bconn_close(&c);
	return NULL;
}

struct result {
	struct bench_stats s;
	double rps;
	int errors;
};

static struct result run_block(int gateway, int port, const char *headers, int conc,
			       int64_t total, int64_t max_seconds)
{
	struct block b;
	struct worker w[MAX_CONC];
	pthread_t th[MAX_CONC];
	int64_t *all, n = 0, t0, t1;
	struct result res;
	int i;

	memset(&b, 0, sizeof(b));
	memset(&res, 0, sizeof(res));
	b.gateway = gateway;
	b.port = port;
	b.headers = headers;
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
	t0 = bench_ns();
	b.deadline_ns = t0 + max_seconds * 1000000000LL;
	pthread_barrier_wait(&b.go);
	for (i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	t1 = bench_ns();
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

/* ---------------------------------------------------------- set-up */

static void write_config(const char *path, int fake_port)
{
	char buf[4096];

	bench_fmt(buf, sizeof(buf),
		"{\n"
		" \"server\": {\"listen\": \"127.0.0.1:0\", \"threads\": 64, \"max_streams\": 16},\n"
		" \"database\": {\"path\": \"gatehouse.db\"},\n"
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
		" \"audit\": {\"checkpoint_rows\": 1000, \"checkpoint_seconds\": 60}\n"
		"}\n", fake_port);
	bench_write_file(path, buf);
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

static int64_t count_audit(const char *db_path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM audit_events WHERE tool_name = "
			       "'get_weather' AND event IN ('allowed', 'executed')",
			       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* ---------------------------------------------------------- report */

struct opts {
	int64_t requests, warmup, reps, max_seconds;
	int conc[8];
	int nconc;
	int keep;
};

static void print_row(const char *name, const double *p50, const double *p90, const double *p99,
		      const double *mean, size_t reps)
{
	printf("  %-22s %9.1f %9.1f %9.1f %9.1f\n", name, bench_median(p50, reps),
	       bench_median(p90, reps), bench_median(p99, reps), bench_median(mean, reps));
}

static int64_t scenario(const struct opts *o, int conc, int gh_port, int fake_port,
			const char *headers)
{
	double d50[64], d90[64], d99[64], dmean[64], g50[64], g90[64], g99[64], gmean[64];
	double a50[64], a90[64], a99[64], amean[64], drps[64], grps[64];
	int64_t r, reps = o->reps < 64 ? o->reps : 64, calls = 0;
	struct result d, g;
	int errors = 0;

	g = run_block(1, gh_port, headers, conc, o->warmup, o->max_seconds);
	calls += (int64_t)g.s.n;
	if (g.errors)
		bench_die("warm-up through gatehouse failed (%d errors)", g.errors);
	d = run_block(0, fake_port, NULL, conc, o->warmup, o->max_seconds);
	if (d.errors)
		bench_die("warm-up direct failed (%d errors)", d.errors);
	for (r = 0; r < reps; r++) {
		if (r % 2 == 0) {
			d = run_block(0, fake_port, NULL, conc, o->requests, o->max_seconds);
			g = run_block(1, gh_port, headers, conc, o->requests, o->max_seconds);
		} else {
			g = run_block(1, gh_port, headers, conc, o->requests, o->max_seconds);
			d = run_block(0, fake_port, NULL, conc, o->requests, o->max_seconds);
		}
		calls += (int64_t)g.s.n;
		errors += d.errors + g.errors;
		d50[r] = d.s.p50, d90[r] = d.s.p90, d99[r] = d.s.p99, dmean[r] = d.s.mean;
		g50[r] = g.s.p50, g90[r] = g.s.p90, g99[r] = g.s.p99, gmean[r] = g.s.mean;
		a50[r] = g.s.p50 - d.s.p50, a90[r] = g.s.p90 - d.s.p90;
		a99[r] = g.s.p99 - d.s.p99, amean[r] = g.s.mean - d.s.mean;
		drps[r] = d.rps, grps[r] = g.rps;
	}
	printf("\nMCP tools/call of an HTTP tool, concurrency %d: %lld reps x %lld requests "
	       "(latency in us, median over reps)\n", conc, (long long)reps,
	       (long long)o->requests);
	printf("  %-22s %9s %9s %9s %9s\n", "", "p50", "p90", "p99", "mean");
	print_row("tool called directly", d50, d90, d99, dmean, (size_t)reps);
	print_row("through gatehouse /mcp", g50, g90, g99, gmean, (size_t)reps);
	print_row("added", a50, a90, a99, amean, (size_t)reps);
	printf("  added p50 over reps: min %.1f, max %.1f us; throughput direct %.0f/s, "
	       "gatehouse %.0f/s%s\n",
	       bench_min(a50, (size_t)reps), bench_maxd(a50, (size_t)reps),
	       bench_median(drps, (size_t)reps), bench_median(grps, (size_t)reps),
	       errors ? " (ERRORS, see stderr)" : "");
	if (conc == 1)
		printf("  target: added p50 <= 300 us at concurrency 1 with the audit rows: %s\n",
		       bench_median(a50, (size_t)reps) <= 300 ? "met" : "NOT met");
	return calls;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_mcp [--requests N] [--reps R] [--warmup N] [--conc 1,16]\n"
		"                 [--max-seconds S] [--keep]\n"
		"Binaries: BUILD/gatehouse and BUILD/tests/fake_upstream next to this program,\n"
		"or GH_BIN / GH_FAKE. Temp files under GH_BENCH_TMP (default /tmp).\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = {.requests = 2000, .warmup = 200, .reps = 5, .max_seconds = 60,
			 .conc = {1, 16}, .nconc = 2};
	char gh[PATH_MAX], fake[PATH_MAX], dir[PATH_MAX], cfg[PATH_MAX + 32], db[PATH_MAX + 32];
	char key[256], sid[128], headers[512];
	const char *v;
	struct bench_proc fp, gp;
	int64_t calls = 0, rows;
	int i, ci, rc;

	for (i = 1; i < argc; i++) {
		if ((v = bench_opt(argc, argv, &i, "--requests")))
			o.requests = bench_num(v, 10, 10000000, "--requests");
		else if ((v = bench_opt(argc, argv, &i, "--warmup")))
			o.warmup = bench_num(v, 16, 1000000, "--warmup");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			o.reps = bench_num(v, 1, 64, "--reps");
		else if ((v = bench_opt(argc, argv, &i, "--max-seconds")))
			o.max_seconds = bench_num(v, 1, 3600, "--max-seconds");
		else if ((v = bench_opt(argc, argv, &i, "--conc"))) {
			o.nconc = 0;
			while (*v && o.nconc < 8) {
				char one[16];
				size_t k = strcspn(v, ",");

				snprintf(one, sizeof(one), "%.*s", (int)k, v);
				o.conc[o.nconc++] = (int)bench_num(one, 1, MAX_CONC, "--conc");
				v += k;
				if (*v == ',')
					v++;
			}
		} else if (!strcmp(argv[i], "--keep")) {
			o.keep = 1;
		} else {
			usage();
		}
	}
	bench_init();
	bench_paths(gh, fake, sizeof(gh));
	bench_tmpdir(dir, sizeof(dir), "mcp");
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", dir);
	bench_fmt(db, sizeof(db), "%s/gatehouse.db", dir);

	printf("bench_mcp: added latency of an MCP tools/call (POST /mcp) of an HTTP tool\n");
	bench_print_host();
	bench_fake_start(fake, dir, 256, &fp);
	free(bench_http_ok(fp.port, "POST", "/_script", NULL,
			   "{\"tool\":\"weather\",\"replies\":[{\"body\":" TOOL_ANSWER
			   ",\"repeat\":true}]}"));
	write_config(cfg, fp.port);
	bench_key_create(gh, dir, cfg, "bench", 0, key, sizeof(key));
	bench_gh_start(gh, dir, cfg, "warn", &gp);
	mcp_session(gp.port, key, sid, sizeof(sid));
	bench_fmt(headers, sizeof(headers),
		  "Authorization: Bearer %s\r\nMcp-Session-Id: %s\r\n"
		  "Accept: application/json, text/event-stream\r\n", key, sid);
	for (ci = 0; ci < o.nconc; ci++)
		calls += scenario(&o, o.conc[ci], gp.port, fp.port, headers);
	rc = bench_stop(gp.pid, 30000);
	if (rc != 0)
		fprintf(stderr, "bench: gatehouse exited %d (see %s)\n", rc, gp.err);
	rows = count_audit(db);
	printf("\naudit rows for get_weather: %lld (expected 2 per call through gatehouse: %lld)\n",
	       (long long)rows, (long long)(2 * calls));
	bench_stop(fp.pid, 10000);
	if (o.keep)
		printf("kept %s\n", dir);
	else
		bench_rmrf(dir);
	return 0;
}
