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
 * file), and each block also reads gatehouse's and the fake's CPU time (and
 * how much of gatehouse's was in the kernel) and gatehouse's context
 * switches from /proc, per request. At the end the
 * audit table must hold exactly two rows per tool request.
 *
 * Peer: Portkey's open-source gateway (npm @portkey-ai/gateway, pinned in
 * tests/package-lock.json), started by node from PATH as a child in front of
 * the same fake, gets the same plain bodies as the direct baseline (it passes
 * them through unchanged); its blocks take turns with the direct and
 * gatehouse ones (the order rotates from one repetition to the next) and its
 * answers are checked as gatehouse's are. Its warm-up is at least 1,000
 * requests (node compiles its hot path as it runs). A preload written into
 * the temp dir binds its listener to 127.0.0.1, reports its port and refuses
 * any TCP connection that is not to loopback. Without node or the package
 * the Portkey rows are skipped, with the reason printed. It has no tool loop,
 * so the tool scenario has no Portkey row. GH_NODE and GH_PORTKEY (the
 * package's build/start-server.js) override where they are found.
 *
 * --scrape adds, to every scenario, a gatehouse block run while a thread
 * GETs /metrics (admin key, the main listener) every 100 ms, and prints its
 * added latency next to the unscraped block's: scraping takes no lock on
 * the request path, so the two should agree within noise. The scraped
 * block runs last in even repetitions and first in odd ones.
 *
 * Threading: main sets up, workers only measure (one connection each); the
 * scraper thread only scrapes.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

#include <cjson/cJSON.h>

#include "bench.h"

#define MAX_CONC 64
#define ANSWER_PLAIN "Paris is the capital of France."
#define ANSWER_TOOL "Nothing about that is saved yet."

enum mode { GW_PLAIN, GW_TOOL, DIRECT_PLAIN, DIRECT_TOOL, PK_PLAIN };

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
	int scrape;             /* also a block scraped every 100 ms */
};

/* What one block of requests shares. */
struct block {
	enum mode mode;
	int port;
	const char *auth;            /* extra headers: gatehouse's key, or Portkey's */
	const char *body1, *body2;   /* direct and Portkey bodies (tool: call 1 and 2) */
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
	case PK_PLAIN:
		if (bconn_request(c, "POST", "/v1/chat/completions", b->auth, b->body1,
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
	/* per request: CPU of the gateway measured (gatehouse or Portkey) and
	 * of the fake (us), the gateway's context switches; of the gateway's
	 * CPU, the part spent in the kernel (us) */
	double gw_cpu_us, fake_cpu_us, gw_ctxsw, gw_sys_us;
};

/* The processes whose CPU time and context switches a block samples. */
static pid_t gh_pid, fake_pid;

/* Portkey's gateway when it runs (pid > 0); why it does not otherwise. */
struct peer {
	pid_t pid;
	int port;
	char headers[512];   /* upstream (the fake) and key, on every request */
	char why[PATH_MAX + 256];
	char dir[PATH_MAX];  /* its cwd, stdout, stderr and port file */
};
static struct peer pk;

/* Runs one block: conc workers, `total` requests between them. */
static struct result run_block(enum mode mode, int port, const char *auth, const char *body1,
			       const char *body2, int conc, int64_t total, int64_t max_seconds)
{
	struct block b;
	struct worker w[MAX_CONC];
	pthread_t th[MAX_CONC];
	int64_t *all, n = 0, t0, t1, cpu_gh, cpu_fake, sw_gh, sys_gh, sys_end;
	pid_t gw = mode == PK_PLAIN ? pk.pid : gh_pid;
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
	cpu_gh = bench_cpu_split_ns(gw, &sys_gh);
	cpu_fake = bench_cpu_ns(fake_pid);
	sw_gh = bench_ctxsw(gw);
	t0 = bench_ns();
	b.deadline_ns = t0 + max_seconds * 1000000000LL;
	pthread_barrier_wait(&b.go);
	for (i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	t1 = bench_ns();
	cpu_gh = bench_cpu_split_ns(gw, &sys_end) - cpu_gh;
	sys_gh = sys_end - sys_gh;
	cpu_fake = bench_cpu_ns(fake_pid) - cpu_fake;
	sw_gh = bench_ctxsw(gw) - sw_gh;
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
		res.gw_cpu_us = (double)cpu_gh / 1e3 / (double)n;
		res.fake_cpu_us = (double)cpu_fake / 1e3 / (double)n;
		res.gw_ctxsw = (double)sw_gh / (double)n;
		res.gw_sys_us = (double)sys_gh / 1e3 / (double)n;
	}
	free(all);
	return res;
}

/* ----------------------------------------------------------- scraper */

#define SCRAPE_EVERY_MS 100

/* GETs /metrics every SCRAPE_EVERY_MS until stopped. */
struct scraper {
	int port;
	const char *auth;            /* an admin key's header */
	_Atomic int stop;
	int64_t scrapes, errors, bytes;
	pthread_t t;
};

static void *scraper_main(void *arg)
{
	struct scraper *sc = arg;
	struct bconn c;
	int open = bconn_open(&c, sc->port, 30000) == 0;

	while (open && !atomic_load(&sc->stop)) {
		int64_t next = bench_ns() + SCRAPE_EVERY_MS * 1000000LL;
		struct bresp r;

		if (bconn_request(&c, "GET", "/metrics", sc->auth, NULL, 0, &r) == 0 &&
		    r.status == 200 && r.body && strstr(r.body, "gatehouse_http_requests_total")) {
			sc->scrapes++;
			sc->bytes += (int64_t)strlen(r.body);
		} else {
			sc->errors++;
		}
		bresp_free(&r);
		while (!atomic_load(&sc->stop) && bench_ns() < next)
			bench_sleep_ms(5);
	}
	if (open)
		bconn_close(&c);
	else
		sc->errors++;
	return NULL;
}

static void scraper_start(struct scraper *sc, int port, const char *auth)
{
	memset(sc, 0, sizeof(*sc));
	sc->port = port;
	sc->auth = auth;
	atomic_init(&sc->stop, 0);
	if (pthread_create(&sc->t, NULL, scraper_main, sc) != 0)
		bench_die("pthread_create failed");
}

static void scraper_stop(struct scraper *sc)
{
	atomic_store(&sc->stop, 1);
	pthread_join(sc->t, NULL);
}

/* The admin key's header the scraper sends. */
static char scrape_auth[300];
static int64_t scrapes_total, scrape_errors, scrape_bytes;

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

/* --------------------------------------------------------- Portkey */

/* node --import preload: every listen binds 127.0.0.1 and the first port
 * goes to GH_BENCH_PORT_FILE; a TCP connection not to loopback throws. */
static const char pk_preload[] =
	"// Written by gatehouse's bench_latency for the Portkey gateway it starts.\n"
	"import fs from 'node:fs';\n"
	"import net from 'node:net';\n"
	"const portFile = process.env.GH_BENCH_PORT_FILE;\n"
	"let reported = false;\n"
	"const listen = net.Server.prototype.listen;\n"
	"net.Server.prototype.listen = function benchListen(...args) {\n"
	"  const a0 = args[0];\n"
	"  if (a0 !== null && typeof a0 === 'object' && !('fd' in a0) && !('path' in a0)) {\n"
	"    args[0] = { ...a0, host: '127.0.0.1' };\n"
	"  } else if (typeof a0 === 'number' || (typeof a0 === 'string' && /^\\d+$/.test(a0))) {\n"
	"    const hostAt1 = args.length > 1 && (args[1] == null || typeof args[1] === 'string');\n"
	"    if (hostAt1) args[1] = '127.0.0.1';\n"
	"    else args.splice(1, 0, '127.0.0.1');\n"
	"  }\n"
	"  this.once('listening', () => {\n"
	"    const a = this.address();\n"
	"    if (reported || !portFile || !a || typeof a !== 'object') return;\n"
	"    reported = true;\n"
	"    fs.writeFileSync(portFile + '.tmp', `${a.port}\\n`);\n"
	"    fs.renameSync(portFile + '.tmp', portFile);\n"
	"  });\n"
	"  return listen.apply(this, args);\n"
	"};\n"
	"const loopback = (h) => h == null || h === '' || h === 'localhost' || h === '::1' ||\n"
	"  /^127\\.\\d+\\.\\d+\\.\\d+$/.test(h) || /^::ffff:127\\./.test(h);\n"
	"const connect = net.Socket.prototype.connect;\n"
	"net.Socket.prototype.connect = function benchConnect(...args) {\n"
	"  let o = args[0];\n"
	"  if (Array.isArray(o)) o = o[0];\n"
	"  let host;\n"
	"  if (o !== null && typeof o === 'object') host = o.path ? undefined : o.host;\n"
	"  else host = typeof args[1] === 'string' ? args[1] : undefined;\n"
	"  if (!loopback(host))\n"
	"    throw new Error(`bench: refusing a connection to ${host}: loopback only`);\n"
	"  return connect.apply(this, args);\n"
	"};\n";

/* node: GH_NODE, else the first executable "node" on PATH. */
static int find_node(char *out, size_t cap)
{
	const char *env = getenv("GH_NODE"), *path = getenv("PATH");

	if (env && *env) {
		bench_fmt(out, cap, "%s", env);
		return access(out, X_OK);
	}
	while (path && *path) {
		size_t k = strcspn(path, ":");
		int n = snprintf(out, cap, "%.*s/node", (int)k, path);

		if (k > 0 && n > 0 && (size_t)n < cap && access(out, X_OK) == 0)
			return 0;
		path += k;
		if (*path == ':')
			path++;
	}
	return -1;
}

/* The package's start script: GH_PORTKEY, else tests/node_modules beside
 * this source file. Its version goes into ver. */
static int find_portkey(char *out, size_t cap, char *ver, size_t vcap)
{
	const char *env = getenv("GH_PORTKEY");
	char dir[PATH_MAX], pj[PATH_MAX + 32], buf[16384], *slash;
	cJSON *j;
	const cJSON *v;

	if (env && *env)
		bench_fmt(out, cap, "%s", env);
	else {
		char src[PATH_MAX];

		bench_fmt(src, sizeof(src), "%s", __FILE__);
		slash = strrchr(src, '/');
		bench_fmt(out, cap, "%.*s/../node_modules/@portkey-ai/gateway/build/start-server.js",
			  slash ? (int)(slash - src) : 1, slash ? src : ".");
	}
	if (access(out, R_OK) != 0)
		return -1;
	if (realpath(out, dir))
		bench_fmt(out, cap, "%s", dir);
	/* PKG/build/start-server.js -> PKG/package.json */
	bench_fmt(dir, sizeof(dir), "%s", out);
	if ((slash = strrchr(dir, '/')))
		*slash = '\0';
	if ((slash = strrchr(dir, '/')))
		*slash = '\0';
	bench_fmt(pj, sizeof(pj), "%s/package.json", dir);
	snprintf(ver, vcap, "?");
	if (bench_read_file(pj, buf, sizeof(buf)) > 0 && (j = cJSON_Parse(buf))) {
		v = cJSON_GetObjectItemCaseSensitive(j, "version");
		if (cJSON_IsString(v))
			snprintf(ver, vcap, "%s", v->valuestring);
		cJSON_Delete(j);
	}
	return 0;
}

/* Stops Portkey (if it runs) and records why its rows are left out. */
static void portkey_stop(const char *why)
{
	char err[PATH_MAX + 16], buf[1024];

	if (pk.pid > 0)
		bench_stop(pk.pid, 10000);
	pk.pid = 0;
	bench_fmt(err, sizeof(err), "%s/stderr", pk.dir);
	if (why && pk.dir[0] && bench_read_file(err, buf, sizeof(buf)) > 0)
		fprintf(stderr, "bench: Portkey's stderr began with:\n%s\n", buf);
	if (why) {
		snprintf(pk.why, sizeof(pk.why), "%s", why);
		printf("Portkey: stopped, its rows are left out: %s\n", why);
	}
}

/* Waits (bounded) for the preload's port file; -1 when Portkey exits or
 * has not listened in time. */
static int portkey_port(const char *pf, int timeout_ms)
{
	int64_t end = bench_ns() + (int64_t)timeout_ms * 1000000;
	char buf[64];
	int st;

	while (bench_ns() < end) {
		if (bench_read_file(pf, buf, sizeof(buf)) > 0 && strchr(buf, '\n'))
			return (int)strtol(buf, NULL, 10);
		if (waitpid(pk.pid, &st, WNOHANG) == pk.pid) {
			bench_forget(pk.pid);
			pk.pid = 0;
			return -1;
		}
		bench_sleep_ms(20);
	}
	return -1;
}

/* Its own root route ("AI Gateway says hey!"), before any request goes
 * upstream: 0 when it answers so. */
static int portkey_hello(void)
{
	struct bconn c;
	struct bresp r;
	int ok;

	if (bconn_open(&c, pk.port, 30000) != 0) {
		bconn_close(&c);
		return -1;
	}
	ok = bconn_request(&c, "GET", "/", NULL, NULL, 0, &r) == 0 && r.status == 200 &&
	     body_has(&r, "AI Gateway");
	bresp_free(&r);
	bconn_close(&c);
	return ok ? 0 : -1;
}

/* Starts Portkey in front of the fake, or says why not (pk.pid stays 0). */
static void portkey_start(const char *dir, int fake_port)
{
	char node[PATH_MAX], script[PATH_MAX], ver[64], pre[PATH_MAX + 32], pf[PATH_MAX + 32];
	char pfenv[PATH_MAX + 64], out[PATH_MAX + 32], err[PATH_MAX + 32];
	char *argv[] = {node, "--import", pre, script, "--headless", "--port=0", NULL};
	const char *env[] = {pfenv, "NODE_ENV=production", "TRUSTED_CUSTOM_HOSTS=127.0.0.1",
			     "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", NULL};

	memset(&pk, 0, sizeof(pk));
	if (find_node(node, sizeof(node)) != 0) {
		snprintf(pk.why, sizeof(pk.why), "no node on PATH (or GH_NODE)");
		printf("Portkey: not run: %s\n", pk.why);
		return;
	}
	if (find_portkey(script, sizeof(script), ver, sizeof(ver)) != 0) {
		snprintf(pk.why, sizeof(pk.why), "%s not found (npm ci in tests/, or GH_PORTKEY)",
			 script);
		printf("Portkey: not run: %s\n", pk.why);
		return;
	}
	bench_fmt(pk.dir, sizeof(pk.dir), "%s/portkey", dir);
	if (mkdir(pk.dir, 0700) != 0 && errno != EEXIST)
		bench_die("mkdir %s: %s", pk.dir, strerror(errno));
	bench_fmt(pre, sizeof(pre), "%s/bench-preload.mjs", pk.dir);
	bench_fmt(pf, sizeof(pf), "%s/port", pk.dir);
	bench_fmt(pfenv, sizeof(pfenv), "GH_BENCH_PORT_FILE=%s", pf);
	bench_fmt(out, sizeof(out), "%s/stdout", pk.dir);
	bench_fmt(err, sizeof(err), "%s/stderr", pk.dir);
	bench_write_file(pre, pk_preload);
	unlink(pf);
	printf("Portkey: @portkey-ai/gateway %s, started (cwd %s) as:\n  %s NODE_ENV=production "
	       "TRUSTED_CUSTOM_HOSTS=127.0.0.1 HTTP_PROXY= HTTPS_PROXY= http_proxy= https_proxy= "
	       "%s --import %s %s --headless --port=0\n",
	       ver, pk.dir, pfenv, node, pre, script);
	pk.pid = bench_spawn(argv, pk.dir, out, err, env);
	pk.port = portkey_port(pf, 60000);
	if (pk.port <= 0) {
		portkey_stop("it did not listen within 60 s");
		return;
	}
	if (portkey_hello() != 0) {
		portkey_stop("GET / did not answer as Portkey's gateway does");
		return;
	}
	bench_fmt(pk.headers, sizeof(pk.headers),
		  "x-portkey-provider: openai\r\nx-portkey-custom-host: http://127.0.0.1:%d/v1\r\n"
		  "Authorization: Bearer sk-bench\r\n",
		  fake_port);
	printf("Portkey: listening on 127.0.0.1:%d; each request carries x-portkey-provider: openai, "
	       "x-portkey-custom-host: http://127.0.0.1:%d/v1\n",
	       pk.port, fake_port);
}

/* ------------------------------------------------------- scenarios */

#define MAX_REPS 64
#define PK_WARMUP 1000
#define TIMES "\xc3\x97" /* the multiplication sign, UTF-8 */

/* The sides a scenario measures, in the order of its first repetition. */
enum side_id { S_DIRECT, S_GH, S_PK, S_N };

/* Where one side's requests go. */
struct target {
	enum mode mode;
	int port;
	const char *headers;
	const char *body1, *body2;
};

/* Per-repetition figures of one side. */
struct side {
	double p50[MAX_REPS], p90[MAX_REPS], p99[MAX_REPS], mean[MAX_REPS], rps[MAX_REPS];
	double cpu[MAX_REPS], fake_cpu[MAX_REPS], sw[MAX_REPS], sys[MAX_REPS];
	int errors;
	int64_t n;
};

/* One scenario's medians, for the closing summary. */
struct summary_row {
	char log[16];
	int conc, tool, pk;
	double p50[S_N], rps[S_N];
	/* medians over reps of gatehouse's throughput / the direct call's, Portkey's */
	double gh_dir_rps, gh_pk_rps;
};
static struct summary_row summary[32];
static int nsummary;

static struct result run_target(const struct target *t, int conc, int64_t total, int64_t secs)
{
	return run_block(t->mode, t->port, t->headers, t->body1, t->body2, conc, total, secs);
}

static void side_add(struct side *s, int64_t r, const struct result *x)
{
	s->p50[r] = x->s.p50, s->p90[r] = x->s.p90, s->p99[r] = x->s.p99, s->mean[r] = x->s.mean;
	s->rps[r] = x->rps, s->cpu[r] = x->gw_cpu_us, s->fake_cpu[r] = x->fake_cpu_us;
	s->sw[r] = x->gw_ctxsw;
	s->sys[r] = x->gw_sys_us;
	s->errors += x->errors;
	s->n += (int64_t)x->s.n;
}

/* out = a - b, repetition by repetition (latencies only). */
static void side_diff(const struct side *a, const struct side *b, struct side *out, int64_t reps)
{
	memset(out, 0, sizeof(*out));
	for (int64_t r = 0; r < reps; r++) {
		out->p50[r] = a->p50[r] - b->p50[r], out->p90[r] = a->p90[r] - b->p90[r];
		out->p99[r] = a->p99[r] - b->p99[r], out->mean[r] = a->mean[r] - b->mean[r];
	}
}

/* Median over reps of a[r] / b[r]; min and max into lo, hi. */
static double ratio(const double *a, const double *b, int64_t reps, double *lo, double *hi)
{
	double q[MAX_REPS];

	for (int64_t r = 0; r < reps; r++)
		q[r] = b[r] > 0 ? a[r] / b[r] : 0;
	if (lo)
		*lo = bench_min(q, (size_t)reps);
	if (hi)
		*hi = bench_maxd(q, (size_t)reps);
	return bench_median(q, (size_t)reps);
}

static double med(const double *v, int64_t reps)
{
	return bench_median(v, (size_t)reps);
}

static void print_row(const char *name, const struct side *s, int64_t reps)
{
	printf("  %-22s %9.1f %9.1f %9.1f %9.1f\n", name, med(s->p50, reps), med(s->p90, reps),
	       med(s->p99, reps), med(s->mean, reps));
}

/* Warm-up through gatehouse, capture of what it sent upstream (the direct
 * and Portkey bodies, *b1 and *b2, caller frees), then a direct warm-up.
 * Returns the requests gatehouse answered. */
static int64_t warm_up(const struct opts *o, int tool, int conc, int gh_port, int fake_port,
		       const char *auth, char **b1, char **b2)
{
	struct result g, d;

	script_fake(fake_port, conc, tool ? o->warmup / conc + 2 : 0);
	g = run_block(tool ? GW_TOOL : GW_PLAIN, gh_port, auth, NULL, NULL, conc, o->warmup,
		      o->max_seconds);
	if (g.errors)
		bench_die("warm-up through gatehouse failed (%d errors)", g.errors);
	if (tool)
		capture_bodies(fake_port, "t-0", 2, b1, b2);
	else
		capture_bodies(fake_port, "plain", 1, b1, NULL);
	d = run_block(tool ? DIRECT_TOOL : DIRECT_PLAIN, fake_port, NULL, *b1, *b2, conc,
		      o->warmup, o->max_seconds);
	if (d.errors)
		bench_die("warm-up direct failed (%d errors)", d.errors);
	return (int64_t)g.s.n;
}

/* Portkey's warm-up, at least PK_WARMUP requests so that node's JIT has
 * compiled its hot path: every answer checked; on any error Portkey is
 * stopped and left out of the rest of the run. 0 when it went well. */
static int portkey_warm_up(const struct opts *o, int conc, const struct target *t)
{
	struct result x = run_target(t, conc, o->warmup > PK_WARMUP ? o->warmup : PK_WARMUP,
				     o->max_seconds);
	char why[160];

	if (x.errors == 0 && x.s.n > 0)
		return 0;
	snprintf(why, sizeof(why), "its warm-up at concurrency %d had %d errors of %zu answers "
		 "(first errors on stderr)", conc, x.errors, x.s.n);
	portkey_stop(why);
	return -1;
}

static void print_portkey(const struct side *sd, int conc, int64_t reps)
{
	struct side added, gh_added;
	double lo, hi, q;

	side_diff(&sd[S_PK], &sd[S_DIRECT], &added, reps);
	side_diff(&sd[S_GH], &sd[S_DIRECT], &gh_added, reps);
	print_row("through Portkey", &sd[S_PK], reps);
	print_row("Portkey added", &added, reps);
	printf("  Portkey: throughput %.0f/s%s; CPU per request %.0f us, %.0f us of it in the "
	       "kernel (%.1f context switches); fake %.0f us through Portkey\n",
	       med(sd[S_PK].rps, reps), sd[S_PK].errors ? " (ERRORS, see stderr)" : "",
	       med(sd[S_PK].cpu, reps), med(sd[S_PK].sys, reps), med(sd[S_PK].sw, reps),
	       med(sd[S_PK].fake_cpu, reps));
	q = ratio(sd[S_GH].rps, sd[S_PK].rps, reps, &lo, &hi);
	printf("  gatehouse plain throughput = %.1f" TIMES " Portkey's (per rep %.1f-%.1f); "
	       "p50 Portkey/gatehouse = %.1f" TIMES "; added p50 gatehouse %.1f us, Portkey %.1f us\n",
	       q, lo, hi, ratio(sd[S_PK].p50, sd[S_GH].p50, reps, NULL, NULL),
	       med(gh_added.p50, reps), med(added.p50, reps));
	if (conc == 16)
		printf("  target: gatehouse plain throughput >= 10" TIMES " Portkey's at concurrency "
		       "16: %s\n", q >= 10 ? "met" : "NOT met");
}

/* The scraped block's rows beside the unscraped one's. */
static void print_scraped(const struct side *sd, const struct side *scr, int64_t reps)
{
	struct side added, added_scr, d;

	side_diff(&sd[S_GH], &sd[S_DIRECT], &added, reps);
	side_diff(scr, &sd[S_DIRECT], &added_scr, reps);
	side_diff(&added_scr, &added, &d, reps);
	print_row("gatehouse, scraped", scr, reps);
	print_row("added, scraped", &added_scr, reps);
	printf("  added p50: %.1f us not scraped, %.1f us scraped every %d ms (scraped - not "
	       "scraped per rep: median %+.1f us, %+.1f..%+.1f); throughput %.0f/s scraped\n",
	       med(added.p50, reps), med(added_scr.p50, reps), SCRAPE_EVERY_MS, med(d.p50, reps),
	       bench_min(d.p50, (size_t)reps), bench_maxd(d.p50, (size_t)reps),
	       med(scr->rps, reps));
}

static void print_scenario(const struct opts *o, const char *log, int tool, int conc,
			   int64_t reps, const struct side *sd, int with_pk, const struct side *scr)
{
	struct side added;

	side_diff(&sd[S_GH], &sd[S_DIRECT], &added, reps);
	printf("\n%s, concurrency %d, GH_LOG=%s: %lld reps x %lld requests "
	       "(latency in us, median over reps)\n",
	       tool ? "tool: memory_search then answer (2 upstream calls, 2 audit rows)"
		    : "plain chat completion (1 upstream call)",
	       conc, log, (long long)reps, (long long)o->requests);
	printf("  %-22s %9s %9s %9s %9s\n", "", "p50", "p90", "p99", "mean");
	print_row(tool ? "direct (2 calls)" : "direct", &sd[S_DIRECT], reps);
	print_row("through gatehouse", &sd[S_GH], reps);
	print_row("added", &added, reps);
	if (scr)
		print_scraped(sd, scr, reps);
	printf("  added p50 over reps: min %.1f, max %.1f us; throughput direct %.0f/s, "
	       "gatehouse %.0f/s (%.2f" TIMES " direct)%s\n",
	       bench_min(added.p50, (size_t)reps), bench_maxd(added.p50, (size_t)reps),
	       med(sd[S_DIRECT].rps, reps), med(sd[S_GH].rps, reps),
	       ratio(sd[S_GH].rps, sd[S_DIRECT].rps, reps, NULL, NULL),
	       sd[S_DIRECT].errors + sd[S_GH].errors ? " (ERRORS, see stderr)" : "");
	printf("  CPU per request: gatehouse %.0f us, %.0f us of it in the kernel (%.1f context "
	       "switches); fake %.0f us direct, %.0f us through gatehouse\n",
	       med(sd[S_GH].cpu, reps), med(sd[S_GH].sys, reps), med(sd[S_GH].sw, reps),
	       med(sd[S_DIRECT].fake_cpu, reps), med(sd[S_GH].fake_cpu, reps));
	if (conc == 1) {
		/* the hot path's targets: CPU and added p50 per request */
		double cpu = med(sd[S_GH].cpu, reps), p50 = med(added.p50, reps);
		double cpu_max = tool ? 250 : 120, p50_max = tool ? 300 : 150;

		printf("  target at concurrency 1%s: gatehouse CPU <= %.0f us per request: %.0f us, "
		       "%s; added p50 <= %.0f us: %.1f us, %s\n",
		       tool ? " with the audit rows" : "", cpu_max, cpu,
		       cpu <= cpu_max ? "met" : "NOT met", p50_max, p50,
		       p50 <= p50_max ? "met" : "NOT met");
	}
	if (with_pk)
		print_portkey(sd, conc, reps);
	else if (!tool)
		printf("  Portkey: not measured (%s)\n", pk.why[0] ? pk.why : "not running");
}

static void csv_row(FILE *csv, const char *log, int tool, int conc, int64_t r,
		    const struct side *sd, int with_pk)
{
	const struct side *d = &sd[S_DIRECT], *g = &sd[S_GH], *p = &sd[S_PK];

	fprintf(csv, "%s,%s,%d,%lld,%.1f,%.1f,%.1f,%.1f,%.0f,%.1f,%.1f,%.1f,%.1f,%.0f,", log,
		tool ? "tool" : "plain", conc, (long long)r, d->p50[r], d->p90[r], d->p99[r],
		d->mean[r], d->rps[r], g->p50[r], g->p90[r], g->p99[r], g->mean[r], g->rps[r]);
	if (with_pk)
		fprintf(csv, "%.1f,%.1f,%.1f,%.1f,%.0f\n", p->p50[r], p->p90[r], p->p99[r],
			p->mean[r], p->rps[r]);
	else
		fprintf(csv, ",,,,\n");
}

static void summary_add(const char *log, int tool, int conc, int64_t reps, const struct side *sd,
			int with_pk)
{
	struct summary_row *row;

	if (nsummary >= (int)(sizeof(summary) / sizeof(summary[0])))
		return;
	row = &summary[nsummary++];
	snprintf(row->log, sizeof(row->log), "%s", log);
	row->conc = conc, row->tool = tool, row->pk = with_pk;
	for (int k = 0; k < (with_pk ? S_N : S_PK); k++) {
		row->p50[k] = med(sd[k].p50, reps);
		row->rps[k] = med(sd[k].rps, reps);
	}
	row->gh_dir_rps = ratio(sd[S_GH].rps, sd[S_DIRECT].rps, reps, NULL, NULL);
	if (with_pk)
		row->gh_pk_rps = ratio(sd[S_GH].rps, sd[S_PK].rps, reps, NULL, NULL);
}

/* One gatehouse block while /metrics is scraped every SCRAPE_EVERY_MS. */
static void scraped_block(const struct opts *o, const struct target *gh, int conc, int64_t r,
			  struct side *scr)
{
	struct scraper sc;
	struct result x;

	scraper_start(&sc, gh->port, scrape_auth);
	x = run_target(gh, conc, o->requests, o->max_seconds);
	scraper_stop(&sc);
	side_add(scr, r, &x);
	scrapes_total += sc.scrapes;
	scrape_errors += sc.errors;
	scrape_bytes += sc.bytes;
}

/* Runs one scenario: warm-ups, then reps rounds of direct, gatehouse and
 * (plain, when it runs) Portkey blocks, the order rotating each round.
 * Returns the requests gatehouse answered. */
static int64_t scenario(const struct opts *o, const char *log, int tool, int conc, int gh_port,
			int fake_port, const char *auth, FILE *csv)
{
	struct side *sd = calloc(S_N, sizeof(*sd)), *scr = calloc(1, sizeof(*scr));
	struct target t[S_N];
	char *b1 = NULL, *b2 = NULL;
	int64_t r, reps = o->reps < MAX_REPS ? o->reps : MAX_REPS, gw_requests;
	int nt, k;

	if (!sd || !scr)
		bench_die("out of memory");
	gw_requests = warm_up(o, tool, conc, gh_port, fake_port, auth, &b1, &b2);
	t[S_DIRECT] = (struct target){tool ? DIRECT_TOOL : DIRECT_PLAIN, fake_port, NULL, b1, b2};
	t[S_GH] = (struct target){tool ? GW_TOOL : GW_PLAIN, gh_port, auth, NULL, NULL};
	t[S_PK] = (struct target){PK_PLAIN, pk.port, pk.headers, b1, NULL};
	nt = !tool && pk.pid > 0 && portkey_warm_up(o, conc, &t[S_PK]) == 0 ? 3 : 2;
	for (r = 0; r < reps; r++) {
		if (tool)
			script_fake(fake_port, conc, (o->scrape ? 2 : 1) * (o->requests / conc + 2));
		if (o->scrape && r % 2)
			scraped_block(o, &t[S_GH], conc, r, scr);
		for (k = 0; k < nt; k++) {
			int which = (int)((r + k) % nt);
			struct result x = run_target(&t[which], conc, o->requests, o->max_seconds);

			side_add(&sd[which], r, &x);
		}
		if (o->scrape && !(r % 2))
			scraped_block(o, &t[S_GH], conc, r, scr);
		if (csv)
			csv_row(csv, log, tool, conc, r, sd, nt == 3);
	}
	gw_requests += sd[S_GH].n + scr->n;
	print_scenario(o, log, tool, conc, reps, sd, nt == 3, o->scrape ? scr : NULL);
	summary_add(log, tool, conc, reps, sd, nt == 3);
	free(sd);
	free(scr);
	free(b1);
	free(b2);
	return gw_requests;
}

/* The closing table: every scenario against the direct call and Portkey. */
static void print_summary(void)
{
	printf("\nsummary (medians over reps; p50 in us, throughput in requests/s; the ratios, "
	       "medians of each rep's, are gatehouse's throughput against the direct call's and "
	       "Portkey's)\n");
	printf("  %-8s %-5s %4s | %9s %9s %9s | %9s %9s %9s | %12s %12s\n", "scenario", "log",
	       "conc", "p50 dir", "p50 gh", "p50 pk", "thr dir", "thr gh", "thr pk",
	       "gh/dir thr", "gh/pk thr");
	for (int i = 0; i < nsummary; i++) {
		const struct summary_row *s = &summary[i];
		char pk50[32] = "-", pkr[32] = "-", ghpk[32] = "-";

		if (s->pk) {
			snprintf(pk50, sizeof(pk50), "%.1f", s->p50[S_PK]);
			snprintf(pkr, sizeof(pkr), "%.0f", s->rps[S_PK]);
			snprintf(ghpk, sizeof(ghpk), "%.1fx", s->gh_pk_rps);
		}
		printf("  %-8s %-5s %4d | %9.1f %9.1f %9s | %9.0f %9.0f %9s | %11.2fx %12s\n",
		       s->tool ? "tool" : "plain", s->log, s->conc, s->p50[S_DIRECT], s->p50[S_GH],
		       pk50, s->rps[S_DIRECT], s->rps[S_GH], pkr,
		       s->gh_dir_rps, ghpk);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_latency [--requests N] [--reps R] [--warmup N] [--conc 1,16]\n"
		"                     [--log warn,info] [--scenario plain,tool] [--max-seconds S]\n"
		"                     [--csv FILE] [--keep] [--scrape]\n"
		"--scrape: also a gatehouse block while GET /metrics runs every 100 ms.\n"
		"Binaries: BUILD/gatehouse and BUILD/tests/fake_upstream next to this program,\n"
		"or GH_BIN / GH_FAKE. Temp files under GH_BENCH_TMP (default /tmp).\n"
		"Portkey's gateway (plain scenario): node from PATH or GH_NODE, the package from\n"
		"tests/node_modules or GH_PORTKEY (its build/start-server.js); skipped without.\n");
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
	char key[256], auth[300];
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
			o.nconc = bench_nums(v, o.conc, 8, 1, MAX_CONC, "--conc");
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
		} else if (!strcmp(argv[i], "--scrape")) {
			o.scrape = 1;
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
		fprintf(csv, "log,scenario,conc,rep,direct_p50_us,direct_p90_us,direct_p99_us,"
			     "direct_mean_us,direct_rps,gw_p50_us,gw_p90_us,gw_p99_us,gw_mean_us,"
			     "gw_rps,pk_p50_us,pk_p90_us,pk_p99_us,pk_mean_us,pk_rps\n");

	printf("bench_latency: added latency of POST /v1/chat/completions\n");
	bench_print_host();
	bench_fake_start(fake, dir, 256, &fp);
	fake_pid = fp.pid;
	if (o.plain)
		portkey_start(dir, fp.port);
	write_config(cfg, fp.port);
	bench_key_create(gh, dir, cfg, "bench", 0, key, sizeof(key));
	bench_fmt(auth, sizeof(auth), "Authorization: Bearer %s\r\n", key);
	if (o.scrape) {
		bench_key_create(gh, dir, cfg, "scraper", 1, key, sizeof(key));
		bench_fmt(scrape_auth, sizeof(scrape_auth), "Authorization: Bearer %s\r\n", key);
	}

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
	if (o.scrape)
		printf("\n/metrics scrapes during the scraped blocks: %lld (%lld failed), %.0f bytes "
		       "each on average\n", (long long)scrapes_total, (long long)scrape_errors,
		       scrapes_total ? (double)scrape_bytes / (double)scrapes_total : 0.0);
	print_summary();
	portkey_stop(NULL);
	bench_stop(fp.pid, 10000);
	if (csv)
		fclose(csv);
	if (o.keep)
		printf("kept %s\n", dir);
	else
		bench_rmrf(dir);
	return 0;
}
