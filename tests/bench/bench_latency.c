/*
 * bench_latency.c - the latency gatehouse adds to a chat completion,
 * measured against calling the fake upstream directly with the very same
 * upstream request bodies.
 *
 * Set-up: a temp dir, tests/fake/fake_upstream and "gatehouse serve" as
 * child processes on loopback, one API key. Scenarios, each through
 * POST /v1/chat/completions (stateless, non-streaming):
 *
 *   plain  the model answers at once: one upstream call.
 *   tool   the model calls the memory tool memory_search, then answers: two
 *          upstream calls, and two audit rows ("allowed", "executed")
 *          committed on the request's path.
 *
 * The direct baseline replays, straight to the fake, the upstream bodies
 * gatehouse sent during warm-up (captured from the fake's GET /_requests), so
 * both sides make the fake do the same work; for "tool" one direct sample is
 * the two upstream calls back to back on one connection. Added latency is
 * gatehouse's percentile minus the direct percentile of the same rank, per
 * repetition; the tables show medians over repetitions. Direct and gateway
 * blocks alternate in order from one repetition to the next so drift on a
 * shared machine hits both.
 *
 * The load client is closed-loop: C threads, each with one keep-alive
 * connection, send the next request when the previous answer is in. Every
 * block is bounded by a request count and a deadline. gatehouse runs once
 * with GH_LOG=warn and once with the default info (its access log goes to a
 * file), and each block also reads gatehouse's and the fake's CPU time and
 * gatehouse's context switches from /proc, per request. At the end the
 * audit table must hold exactly two rows per tool request.
 *
 * Threading: main sets up, workers only measure (one connection each).
 */
#include <pthread.h>
#include <sqlite3.h>

#include <cjson/cJSON.h>

#include "bench.h"

#define MAX_CONC 64
#define ANSWER_PLAIN "Paris is the capital of France."
#define ANSWER_TOOL "Nothing about that is saved yet."

enum mode { GW_PLAIN, GW_TOOL, DIRECT_PLAIN, DIRECT_TOOL };

struct opts {
	int64_t requests;       /* per block */
	int64_t warmup;
	int64_t reps;
	int64_t max_seconds;    /* per block */
	int conc[8];
	int nconc;
	const char *logs[2];
	int nlogs;
	int plain, tool;
	int keep;
};

/* What one block of requests shares. */
struct block {
	enum mode mode;
	int port;
	const char *auth;            /* "Authorization: Bearer ...\r\n" */
	const char *body1, *body2;   /* direct bodies (tool: call 1 and 2) */
	int64_t per_worker;
	int64_t deadline_ns;
	pthread_barrier_t go;
};

struct worker {
	struct block *b;
	int id;
	int64_t *samples;
	int64_t n;
	int errors;
	char err[256];
};

static int body_has(const struct bresp *r, const char *s)
{
	return r->body && strstr(r->body, s) != NULL;
}

static int one_request(struct worker *w, struct bconn *c, const char *gw_body, size_t gw_len)
{
	struct block *b = w->b;
	struct bresp r;
	int ok = 0;

	switch (b->mode) {
	case GW_PLAIN:
	case GW_TOOL:
		if (bconn_request(c, "POST", "/v1/chat/completions", b->auth, gw_body, gw_len, &r))
			return -1;
		ok = r.status == 200 &&
		     body_has(&r, b->mode == GW_PLAIN ? ANSWER_PLAIN : ANSWER_TOOL);
		break;
	case DIRECT_PLAIN:
		if (bconn_request(c, "POST", "/v1/chat/completions", NULL, b->body1,
				  strlen(b->body1), &r))
			return -1;
		ok = r.status == 200 && body_has(&r, ANSWER_PLAIN);
		break;
	case DIRECT_TOOL:
		if (bconn_request(c, "POST", "/v1/chat/completions", NULL, b->body1,
				  strlen(b->body1), &r))
			return -1;
		ok = r.status == 200 && body_has(&r, "memory_search");
		bresp_free(&r);
		if (!ok)
			return -1;
		if (bconn_request(c, "POST", "/v1/chat/completions", NULL, b->body2,
				  strlen(b->body2), &r))
			return -1;
		ok = r.status == 200 && body_has(&r, ANSWER_TOOL);
		break;
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
	char body[512];
	int blen;
	int64_t i;

	/* The gateway request: agent "plain", or this worker's own tool agent
	 * (its own model queue on the fake, so scripted replies never mix). */
	if (b->mode == GW_TOOL)
		blen = snprintf(body, sizeof(body),
				"{\"model\":\"t%d\",\"messages\":[{\"role\":\"user\",\"content\":"
				"\"What is my favourite colour?\"}]}", w->id);
	else
		blen = snprintf(body, sizeof(body),
				"{\"model\":\"plain\",\"messages\":[{\"role\":\"user\",\"content\":"
				"\"What is the capital of France?\"}]}");
	if (bconn_open(&c, b->port, 30000) != 0) {
		snprintf(w->err, sizeof(w->err), "cannot connect");
		w->errors++;
	}
	pthread_barrier_wait(&b->go);
	/* a connection the server closes is opened again by bconn_request */
	for (i = 0; i < b->per_worker && w->errors <= 10; i++) {
		int64_t t0 = bench_ns(), t1;

		if (t0 > b->deadline_ns)
			break;
		if (one_request(w, &c, body, (size_t)blen) != 0) {
			w->errors++;
			if (!w->err[0])
				snprintf(w->err, sizeof(w->err), "no response");
			continue;
		}
		t1 = bench_ns();
		w->samples[w->n++] = t1 - t0;
	}
	bconn_close(&c);
	return NULL;
}

struct result {
	struct bench_stats s;
	double rps;
	int errors;
	/* per request: CPU of gatehouse and of the fake (us), gatehouse's
	 * context switches */
	double gh_cpu_us, fake_cpu_us, gh_ctxsw;
};

/* The processes whose CPU time and context switches a block samples. */
static pid_t gh_pid, fake_pid;

/* Runs one block: conc workers, `total` requests between them. */
static struct result run_block(enum mode mode, int port, const char *auth, const char *body1,
			       const char *body2, int conc, int64_t total, int64_t max_seconds)
{
	struct block b;
	struct worker w[MAX_CONC];
	pthread_t th[MAX_CONC];
	int64_t *all, n = 0, t0, t1, cpu_gh, cpu_fake, sw_gh;
	struct result res;
	int i;

	memset(&b, 0, sizeof(b));
	memset(&res, 0, sizeof(res));
	b.mode = mode;
	b.port = port;
	b.auth = auth;
	b.body1 = body1;
	b.body2 = body2;
	b.per_worker = (total + conc - 1) / conc;
	pthread_barrier_init(&b.go, NULL, (unsigned)conc + 1);
	for (i = 0; i < conc; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].b = &b;
		w[i].id = i;
		w[i].samples = calloc((size_t)b.per_worker, sizeof(int64_t));
		if (!w[i].samples)
			bench_die("out of memory");
		if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0)
			bench_die("pthread_create failed");
	}
	cpu_gh = bench_cpu_ns(gh_pid);
	cpu_fake = bench_cpu_ns(fake_pid);
	sw_gh = bench_ctxsw(gh_pid);
	t0 = bench_ns();
	b.deadline_ns = t0 + max_seconds * 1000000000LL;
	pthread_barrier_wait(&b.go);
	for (i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	t1 = bench_ns();
	cpu_gh = bench_cpu_ns(gh_pid) - cpu_gh;
	cpu_fake = bench_cpu_ns(fake_pid) - cpu_fake;
	sw_gh = bench_ctxsw(gh_pid) - sw_gh;
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
	if (n > 0) {
		res.gh_cpu_us = (double)cpu_gh / 1e3 / (double)n;
		res.fake_cpu_us = (double)cpu_fake / 1e3 / (double)n;
		res.gh_ctxsw = (double)sw_gh / (double)n;
	}
	free(all);
	return res;
}

/* ---------------------------------------------------------- set-up */

static void write_config(const char *path, int fake_port)
{
	char buf[32768];
	size_t n = 0;
	int i;

	n += (size_t)snprintf(buf + n, sizeof(buf) - n,
		"{\n"
		" \"server\": {\"listen\": \"127.0.0.1:0\", \"threads\": 64, "
		"\"max_streams\": 16},\n"
		" \"database\": {\"path\": \"gatehouse.db\"},\n"
		" \"providers\": {\"fake\": {\"type\": \"openai\", "
		"\"base_url\": \"http://127.0.0.1:%d/v1\", \"api_key\": \"sk-bench\", "
		"\"timeout_ms\": 30000, \"max_retries\": 0}},\n"
		" \"agents\": {\n"
		"  \"plain\": {\"provider\": \"fake\", \"model\": \"plain\", "
		"\"instructions\": \"Be brief.\", \"tools\": [], \"memory\": {\"enabled\": false}}",
		fake_port);
	for (i = 0; i < MAX_CONC && n < sizeof(buf); i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			",\n  \"t%d\": {\"provider\": \"fake\", \"model\": \"t-%d\", "
			"\"instructions\": \"Be brief.\", \"tools\": [\"memory_search\"], "
			"\"memory\": {\"enabled\": true}, \"max_steps\": 4}", i, i);
	if (n >= sizeof(buf))
		bench_die("config too long");
	n += (size_t)snprintf(buf + n, sizeof(buf) - n,
		"\n },\n"
		" \"policies\": {\"default\": {\"agents\": [\"*\"], "
		"\"tools\": {\"allow\": [\"memory_*\"], \"deny\": [\"memory_delete\"]}, "
		"\"client_tools\": {\"allow\": [\"*\"]}, "
		"\"rate_limits\": {\"requests_per_minute\": 100000000, \"burst\": 1000000, "
		"\"tool_calls_per_minute\": {\"*\": 100000000}}}},\n"
		" \"audit\": {\"checkpoint_rows\": 1000, \"checkpoint_seconds\": 60}\n"
		"}\n");
	if (n >= sizeof(buf))
		bench_die("config too long");
	bench_write_file(path, buf);
}

/* Queues, for each worker's tool agent, `pairs` times: a memory_search call,
 * then the answer. Everything queued before is dropped. */
static void script_fake(int fake_port, int conc, int64_t pairs)
{
	char *r;
	size_t cap = (size_t)pairs * 200 + 256, n;
	char *buf = malloc(cap);
	int i;

	if (!buf)
		bench_die("out of memory");
	free(bench_http_ok(fake_port, "POST", "/_reset", NULL, "{}"));
	r = bench_http_ok(fake_port, "POST", "/_script", NULL,
			  "{\"model\":\"plain\",\"replies\":[{\"text\":\"" ANSWER_PLAIN
			  "\",\"repeat\":true}]}");
	free(r);
	free(bench_http_ok(fake_port, "POST", "/_script", NULL,
			   "{\"model\":\"d-tool\",\"replies\":[{\"tool_calls\":[{\"name\":"
			   "\"memory_search\",\"arguments\":{\"query\":\"favourite colour\"}}],"
			   "\"repeat\":true}]}"));
	free(bench_http_ok(fake_port, "POST", "/_script", NULL,
			   "{\"model\":\"d-text\",\"replies\":[{\"text\":\"" ANSWER_TOOL
			   "\",\"repeat\":true}]}"));
	for (i = 0; i < conc && pairs > 0; i++) {
		int64_t k;

		n = (size_t)snprintf(buf, cap, "{\"model\":\"t-%d\",\"replies\":[", i);
		for (k = 0; k < pairs; k++)
			n += (size_t)snprintf(buf + n, cap - n,
				"%s{\"tool_calls\":[{\"name\":\"memory_search\",\"arguments\":"
				"{\"query\":\"favourite colour\"}}]},"
				"{\"text\":\"" ANSWER_TOOL "\"}",
				k ? "," : "");
		snprintf(buf + n, cap - n, "]}");
		free(bench_http_ok(fake_port, "POST", "/_script", NULL, buf));
	}
	free(buf);
}

/* The bodies of the newest `want` upstream requests gatehouse made for
 * model, oldest first, with "model" replaced by the direct models. */
static void capture_bodies(int fake_port, const char *model, int want, char **b1, char **b2)
{
	char path[128];
	char *txt;
	cJSON *arr, *it;
	int n;

	snprintf(path, sizeof(path), "/_requests?model=%s", model);
	txt = bench_http_ok(fake_port, "GET", path, NULL, NULL);
	arr = cJSON_Parse(txt);
	free(txt);
	n = cJSON_GetArraySize(arr);
	if (!arr || n < want)
		bench_die("the fake saw %d requests for model %s, expected >= %d", n, model, want);
	it = cJSON_GetArrayItem(arr, n - want);
	for (int k = 0; k < want; k++, it = it->next) {
		cJSON *body = cJSON_GetObjectItemCaseSensitive(it, "body");
		char **dst = k == 0 ? b1 : b2;

		if (!cJSON_IsObject(body))
			bench_die("captured request has no JSON body");
		if (want == 2)
			cJSON_ReplaceItemInObjectCaseSensitive(
				body, "model", cJSON_CreateString(k == 0 ? "d-tool" : "d-text"));
		*dst = cJSON_PrintUnformatted(body);
	}
	cJSON_Delete(arr);
}

static int64_t count_audit(const char *db_path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM audit_events WHERE tool_name = "
			       "'memory_search' AND event IN ('allowed', 'executed')",
			       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* ---------------------------------------------------------- report */

static void print_row(const char *name, const double *p50, const double *p90, const double *p99,
		      const double *mean, size_t reps)
{
	printf("  %-22s %9.1f %9.1f %9.1f %9.1f\n", name, bench_median(p50, reps),
	       bench_median(p90, reps), bench_median(p99, reps), bench_median(mean, reps));
}

static int64_t scenario(const struct opts *o, const char *log, int tool, int conc, int gh_port,
			int fake_port, const char *auth, FILE *csv)
{
	enum mode gm = tool ? GW_TOOL : GW_PLAIN, dm = tool ? DIRECT_TOOL : DIRECT_PLAIN;
	double d50[64], d90[64], d99[64], dmean[64], g50[64], g90[64], g99[64], gmean[64];
	double a50[64], a90[64], a99[64], amean[64], drps[64], grps[64];
	double gcpu[64], fcpu_d[64], fcpu_g[64], gsw[64];
	char *b1 = NULL, *b2 = NULL;
	struct result d, g;
	int64_t r, reps = o->reps < 64 ? o->reps : 64, gw_requests = 0;
	int errors = 0;

	/* Warm-up through gatehouse, then capture what it sent upstream. */
	script_fake(fake_port, conc, tool ? o->warmup / conc + 2 : 0);
	g = run_block(gm, gh_port, auth, NULL, NULL, conc, o->warmup, o->max_seconds);
	gw_requests += (int64_t)g.s.n;
	if (g.errors)
		bench_die("warm-up through gatehouse failed (%d errors)", g.errors);
	if (tool)
		capture_bodies(fake_port, "t-0", 2, &b1, &b2);
	else
		capture_bodies(fake_port, "plain", 1, &b1, NULL);
	d = run_block(dm, fake_port, NULL, b1, b2, conc, o->warmup, o->max_seconds);
	if (d.errors)
		bench_die("warm-up direct failed (%d errors)", d.errors);

	for (r = 0; r < reps; r++) {
		if (tool)
			script_fake(fake_port, conc, o->requests / conc + 2);
		if (r % 2 == 0) {
			d = run_block(dm, fake_port, NULL, b1, b2, conc, o->requests,
				      o->max_seconds);
			g = run_block(gm, gh_port, auth, NULL, NULL, conc, o->requests,
				      o->max_seconds);
		} else {
			g = run_block(gm, gh_port, auth, NULL, NULL, conc, o->requests,
				      o->max_seconds);
			d = run_block(dm, fake_port, NULL, b1, b2, conc, o->requests,
				      o->max_seconds);
		}
		gw_requests += (int64_t)g.s.n;
		errors += d.errors + g.errors;
		d50[r] = d.s.p50, d90[r] = d.s.p90, d99[r] = d.s.p99, dmean[r] = d.s.mean;
		g50[r] = g.s.p50, g90[r] = g.s.p90, g99[r] = g.s.p99, gmean[r] = g.s.mean;
		a50[r] = g.s.p50 - d.s.p50, a90[r] = g.s.p90 - d.s.p90;
		a99[r] = g.s.p99 - d.s.p99, amean[r] = g.s.mean - d.s.mean;
		drps[r] = d.rps, grps[r] = g.rps;
		gcpu[r] = g.gh_cpu_us, fcpu_g[r] = g.fake_cpu_us, fcpu_d[r] = d.fake_cpu_us;
		gsw[r] = g.gh_ctxsw;
		if (csv)
			fprintf(csv,
				"%s,%s,%d,%lld,%zu,%.1f,%.1f,%.1f,%.1f,%zu,%.1f,%.1f,%.1f,%.1f\n",
				log, tool ? "tool" : "plain", conc, (long long)r, d.s.n, d.s.p50,
				d.s.p90, d.s.p99, d.s.mean, g.s.n, g.s.p50, g.s.p90, g.s.p99,
				g.s.mean);
	}
	printf("\n%s, concurrency %d, GH_LOG=%s: %lld reps x %lld requests "
	       "(latency in us, median over reps)\n",
	       tool ? "tool: memory_search then answer (2 upstream calls, 2 audit rows)"
		    : "plain chat completion (1 upstream call)",
	       conc, log, (long long)reps, (long long)o->requests);
	printf("  %-22s %9s %9s %9s %9s\n", "", "p50", "p90", "p99", "mean");
	print_row(tool ? "direct (2 calls)" : "direct", d50, d90, d99, dmean, (size_t)reps);
	print_row("through gatehouse", g50, g90, g99, gmean, (size_t)reps);
	print_row("added", a50, a90, a99, amean, (size_t)reps);
	printf("  added p50 over reps: min %.1f, max %.1f us; throughput direct %.0f/s, "
	       "gatehouse %.0f/s%s\n",
	       bench_min(a50, (size_t)reps), bench_maxd(a50, (size_t)reps),
	       bench_median(drps, (size_t)reps), bench_median(grps, (size_t)reps),
	       errors ? " (ERRORS, see stderr)" : "");
	printf("  CPU per request: gatehouse %.0f us (%.1f context switches); fake %.0f us "
	       "direct, %.0f us through gatehouse\n",
	       bench_median(gcpu, (size_t)reps), bench_median(gsw, (size_t)reps),
	       bench_median(fcpu_d, (size_t)reps), bench_median(fcpu_g, (size_t)reps));
	if (tool && conc == 1)
		printf("  target: added p50 <= 300 us at concurrency 1 with the audit write: %s\n",
		       bench_median(a50, (size_t)reps) <= 300 ? "met" : "NOT met");
	free(b1);
	free(b2);
	return gw_requests;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_latency [--requests N] [--reps R] [--warmup N] [--conc 1,16]\n"
		"                     [--log warn,info] [--scenario plain,tool] [--max-seconds S]\n"
		"                     [--csv FILE] [--keep]\n"
		"Binaries: BUILD/gatehouse and BUILD/tests/fake_upstream next to this program,\n"
		"or GH_BIN / GH_FAKE. Temp files under GH_BENCH_TMP (default /tmp).\n");
	exit(2);
}

static void parse_list(const char *s, char out[][16], int *n, int max)
{
	*n = 0;
	while (*s && *n < max) {
		size_t k = strcspn(s, ",");

		snprintf(out[*n], 16, "%.*s", (int)k, s);
		(*n)++;
		s += k;
		if (*s == ',')
			s++;
	}
}

int main(int argc, char **argv)
{
	struct opts o = {.requests = 2000, .warmup = 200, .reps = 5, .max_seconds = 60,
			 .conc = {1, 16}, .nconc = 2, .logs = {"warn", "info"}, .nlogs = 2,
			 .plain = 1, .tool = 1};
	char gh[PATH_MAX], fake[PATH_MAX], dir[PATH_MAX], cfg[PATH_MAX + 32], db[PATH_MAX + 32];
	char key[256], auth[300], list[8][16];
	const char *csv_path = NULL, *v;
	struct bench_proc fp, gp;
	FILE *csv = NULL;
	int64_t gw_tool_requests = 0;
	int i, n, li, ci;

	for (i = 1; i < argc; i++) {
		if ((v = bench_opt(argc, argv, &i, "--requests")))
			o.requests = bench_num(v, 10, 10000000, "--requests");
		else if ((v = bench_opt(argc, argv, &i, "--warmup")))
			o.warmup = bench_num(v, 16, 1000000, "--warmup");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			o.reps = bench_num(v, 1, 64, "--reps");
		else if ((v = bench_opt(argc, argv, &i, "--max-seconds")))
			o.max_seconds = bench_num(v, 1, 3600, "--max-seconds");
		else if ((v = bench_opt(argc, argv, &i, "--csv")))
			csv_path = v;
		else if ((v = bench_opt(argc, argv, &i, "--conc"))) {
			parse_list(v, list, &n, 8);
			o.nconc = n;
			for (ci = 0; ci < n; ci++)
				o.conc[ci] = (int)bench_num(list[ci], 1, MAX_CONC, "--conc");
		} else if ((v = bench_opt(argc, argv, &i, "--log"))) {
			static char logs[2][16];

			parse_list(v, logs, &n, 2);
			o.nlogs = n;
			o.logs[0] = logs[0];
			o.logs[1] = logs[1];
		} else if ((v = bench_opt(argc, argv, &i, "--scenario"))) {
			o.plain = strstr(v, "plain") != NULL;
			o.tool = strstr(v, "tool") != NULL;
		} else if (!strcmp(argv[i], "--keep")) {
			o.keep = 1;
		} else {
			usage();
		}
	}
	bench_init();
	bench_paths(gh, fake, sizeof(gh));
	bench_tmpdir(dir, sizeof(dir), "latency");
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", dir);
	bench_fmt(db, sizeof(db), "%s/gatehouse.db", dir);
	if (csv_path && !(csv = fopen(csv_path, "w")))
		bench_die("cannot write %s", csv_path);
	if (csv)
		fprintf(csv, "log,scenario,conc,rep,direct_n,direct_p50_us,direct_p90_us,"
			     "direct_p99_us,direct_mean_us,gw_n,gw_p50_us,gw_p90_us,gw_p99_us,"
			     "gw_mean_us\n");

	printf("bench_latency: added latency of POST /v1/chat/completions\n");
	bench_print_host();
	bench_fake_start(fake, dir, 256, &fp);
	fake_pid = fp.pid;
	write_config(cfg, fp.port);
	bench_key_create(gh, dir, cfg, "bench", 0, key, sizeof(key));
	bench_fmt(auth, sizeof(auth), "Authorization: Bearer %s\r\n", key);

	for (li = 0; li < o.nlogs; li++) {
		int rc;

		bench_gh_start(gh, dir, cfg, o.logs[li], &gp);
		gh_pid = gp.pid;
		for (ci = 0; ci < o.nconc; ci++) {
			if (o.plain)
				scenario(&o, o.logs[li], 0, o.conc[ci], gp.port, fp.port, auth,
					 csv);
			if (o.tool)
				gw_tool_requests += scenario(&o, o.logs[li], 1, o.conc[ci], gp.port,
							     fp.port, auth, csv);
		}
		rc = bench_stop(gp.pid, 30000);
		if (rc != 0)
			fprintf(stderr, "bench: gatehouse exited %d (see %s)\n", rc, gp.err);
	}
	if (o.tool) {
		int64_t rows = count_audit(db);

		printf("\naudit rows for memory_search: %lld (expected 2 per tool request: %lld)\n",
		       (long long)rows, (long long)(2 * gw_tool_requests));
	}
	bench_stop(fp.pid, 10000);
	if (csv)
		fclose(csv);
	if (o.keep)
		printf("kept %s\n", dir);
	else
		bench_rmrf(dir);
	return 0;
}
