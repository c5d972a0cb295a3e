/*
 * bench_messages.c - the time to first token gatehouse adds to a streamed
 * Anthropic Messages call (POST /v1/messages, "stream": true) through a
 * passthrough agent, against calling the fake upstream's /v1/messages
 * directly with the very same upstream body (captured from the fake's
 * request log after warm-up), at 1 and at 100 concurrent streams.
 *
 * Time to first token is from writing the request to reading the first
 * text_delta event. Each of C client threads keeps one connection alive
 * and sends its next request when the previous stream has ended (closed
 * loop). At one stream, direct and gateway requests alternate one by one
 * on two kept-alive connections, so both see the machine as it is at that
 * moment (on a shared machine, blocks run a second apart drift by more
 * than what is measured); at 100 streams, a direct block then a gateway
 * block with the same number of requests. Added TTFT is gateway minus
 * direct at the same percentile. Every stream must end with message_stop.
 * gatehouse runs with GH_LOG=warn.
 *
 * Two tables: the fake writes the whole answer at once (every event in the
 * first reads: time to first token then also holds the work on the events
 * read with the first one), and the fake paces the first eight words of
 * it a word every --pace-ms, as a model streams (the first token alone).
 *
 *   bench_messages [--requests N] [--warmup N] [--words N] [--pace-ms N]
 *                  [--streams 1,100]   (the rows: concurrent streams, 1..128)
 *
 * Threading: main sets up; each worker owns its connection and samples.
 */
#include <pthread.h>

#include <cjson/cJSON.h>

#include "bench.h"

#define MODEL "claude-bench"
/* the header a direct request carries (gatehouse's also carry the key) */
#define DIRECT_HEAD "anthropic-version: 2023-06-01\r\n"
#define MAX_CONC 128

struct opts {
	int64_t requests;       /* per block */
	int64_t warmup;
	int64_t words;          /* words of the answer */
	int64_t pace_ms;        /* the paced table: a word every pace_ms */
	int concs[4];           /* the rows: concurrent streams */
	int nconcs;
};

struct worker {
	pthread_t th;
	int port;
	const char *head;       /* request head (with Content-Length) */
	const char *body;
	size_t blen;
	int64_t n;              /* requests to make */
	int64_t *ttft;          /* n samples, ns */
	int64_t done;
	int failed;
};

/* Reads until needle appears in what this request got so far (from).
 * 0 or -1. */
static int read_until(struct bconn *c, size_t from, const char *needle)
{
	size_t nl = strlen(needle);

	for (;;) {
		if (c->len - from >= nl && bench_memfind(c->in + from, c->len - from, needle, nl))
			return 0;
		if (bconn_fill(c) != 0)
			return -1;
	}
}

/* One streamed request on c: its TTFT in *ttft. 0 or -1. */
static int one(struct bconn *c, const struct worker *w, int64_t *ttft)
{
	int64_t t0;
	size_t stop;

	if (c->fd < 0 && bconn_connect(c) != 0)
		return -1;
	c->off = c->len = 0;
	t0 = bench_ns();
	if (write_all(c->fd, w->head, strlen(w->head)) != 0 ||
	    write_all(c->fd, w->body, w->blen) != 0)
		return -1;
	if (read_until(c, 0, "text_delta") != 0)
		return -1;
	*ttft = bench_ns() - t0;
	if (read_until(c, 0, "event: message_stop") != 0)
		return -1;
	stop = (size_t)(bench_memfind(c->in, c->len, "event: message_stop", 19) - c->in);
	/* the chunked body's end */
	if (read_until(c, stop, "\r\n0\r\n\r\n") != 0)
		return -1;
	c->off = c->len = 0;
	return 0;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct bconn c;
	int64_t i;

	if (bconn_open(&c, w->port, 30000) != 0) {
		w->failed = 1;
		return NULL;
	}
	for (i = 0; i < w->n; i++) {
		if (one(&c, w, &w->ttft[i]) != 0) {
			w->failed = 1;
			break;
		}
		w->done++;
	}
	bconn_close(&c);
	return NULL;
}

static char *request_head(int port, const char *path, const char *extra, const char *body)
{
	char *head = malloc(8192);

	if (!head)
		bench_die("out of memory");
	bench_fmt(head, 8192, "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
		  "application/json\r\n%sContent-Length: %zu\r\n\r\n", path, port, extra,
		  strlen(body));
	return head;
}

/* One block: conc workers, total requests; TTFTs (ns) into out. Returns
 * how many. */
static size_t block(int port, const char *path, const char *extra, const char *body, int conc,
		    int64_t total, int64_t *out)
{
	static struct worker w[MAX_CONC];
	char *head = request_head(port, path, extra, body);
	size_t n = 0;
	int64_t per = (total + conc - 1) / conc, j;
	int i;

	for (i = 0; i < conc; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].port = port;
		w[i].head = head;
		w[i].body = body;
		w[i].blen = strlen(body);
		w[i].n = per;
		w[i].ttft = calloc((size_t)per, sizeof(int64_t));
		if (!w[i].ttft || pthread_create(&w[i].th, NULL, work, &w[i]) != 0)
			bench_die("cannot start worker %d", i);
	}
	for (i = 0; i < conc; i++) {
		pthread_join(w[i].th, NULL);
		if (w[i].failed)
			bench_die("%s: a stream failed (worker %d after %lld)", path, i,
				  (long long)w[i].done);
		for (j = 0; j < w[i].done; j++)
			out[n++] = w[i].ttft[j];
		free(w[i].ttft);
	}
	free(head);
	return n;
}

/* One stream at a time, direct and gateway in turn (direct first), total
 * requests each: their TTFTs (ns) into dout and gout. */
static void alternate(int fake_port, int gw_port, const char *auth, const char *body,
		      const char *direct, int64_t total, int64_t *dout, int64_t *gout)
{
	char *dhead = request_head(fake_port, "/v1/messages", DIRECT_HEAD, direct);
	char *ghead = request_head(gw_port, "/v1/messages", auth, body);
	struct worker wd, wg;
	struct bconn cd, cg;
	int64_t i;

	memset(&wd, 0, sizeof(wd));
	memset(&wg, 0, sizeof(wg));
	wd.head = dhead;
	wd.body = direct;
	wd.blen = strlen(direct);
	wg.head = ghead;
	wg.body = body;
	wg.blen = strlen(body);
	if (bconn_open(&cd, fake_port, 30000) != 0 || bconn_open(&cg, gw_port, 30000) != 0)
		bench_die("cannot connect");
	for (i = 0; i < total; i++) {
		if (one(&cd, &wd, &dout[i]) != 0)
			bench_die("direct: a stream failed after %lld", (long long)i);
		if (one(&cg, &wg, &gout[i]) != 0)
			bench_die("gatehouse: a stream failed after %lld", (long long)i);
	}
	bconn_close(&cd);
	bconn_close(&cg);
	free(dhead);
	free(ghead);
}

/* Scripts the fake's answer (paced a word every pace_ms; 0: at once) and
 * prints a table row per concurrency. */
static void table(const struct opts *o, int fake_port, int gw_port, const char *text,
		  int64_t pace_ms, const char *auth, const char *body, const char *direct,
		  int64_t *samples)
{
	const int *concs = o->concs;
	char script[70000], pace[96];
	size_t k;

	pace[0] = '\0';
	if (pace_ms > 0)
		snprintf(pace, sizeof(pace), ",\"stream\":{\"words_per_chunk\":1,"
			 "\"chunk_delay_ms\":%lld}", (long long)pace_ms);
	bench_fmt(script, sizeof(script), "{\"model\":\"" MODEL "\",\"replies\":[{\"text\":\"%s\","
		  "\"repeat\":true%s}]}", text, pace);
	/* a "repeat" reply stays at the head of its queue: empty it first (the
	 * direct body was captured before) */
	free(bench_http_ok(fake_port, "POST", "/_reset", NULL, ""));
	free(bench_http_ok(fake_port, "POST", "/_script", NULL, script));
	if (pace_ms > 0)
		printf("\nthe answer paced, a word every %lld ms:\n\n", (long long)pace_ms);
	else
		printf("\nthe whole answer written at once:\n\n");
	printf("| streams | direct p50 ms | direct p99 ms | gatehouse p50 ms | gatehouse p99 ms |"
	       " added p50 ms | added p99 ms |\n|---|---|---|---|---|---|---|\n");
	for (k = 0; k < (size_t)o->nconcs; k++) {
		struct bench_stats d, g;
		size_t n;

		if (concs[k] == 1) {
			int64_t *gs = samples + o->requests;

			alternate(fake_port, gw_port, auth, body, direct, o->requests, samples, gs);
			d = bench_summary(samples, (size_t)o->requests, 1e6);
			g = bench_summary(gs, (size_t)o->requests, 1e6);
		} else {
			n = block(fake_port, "/v1/messages", DIRECT_HEAD, direct, concs[k],
				  o->requests, samples);
			d = bench_summary(samples, n, 1e6);
			n = block(gw_port, "/v1/messages", auth, body, concs[k], o->requests,
				  samples);
			g = bench_summary(samples, n, 1e6);
		}
		printf("| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", concs[k], d.p50, d.p99,
		       g.p50, g.p99, g.p50 - d.p50, g.p99 - d.p99);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct opts o = {2000, 200, 40, 5, {1, 100}, 2};
	char gh[PATH_MAX], fakebin[PATH_MAX], dir[PATH_MAX], cfg[PATH_MAX], key[256];
	char text[65536], script[70000], auth[400], body[1024], *reqs, *direct;
	struct bench_proc fake, gw;
	int64_t *samples;
	int i;

	bench_init();
	for (i = 1; i < argc; i++) {
		const char *v;

		if ((v = bench_opt(argc, argv, &i, "--requests")))
			o.requests = bench_num(v, 100, 1000000, "--requests");
		else if ((v = bench_opt(argc, argv, &i, "--warmup")))
			o.warmup = bench_num(v, 0, 100000, "--warmup");
		else if ((v = bench_opt(argc, argv, &i, "--words")))
			o.words = bench_num(v, 1, 2000, "--words");
		else if ((v = bench_opt(argc, argv, &i, "--pace-ms")))
			o.pace_ms = bench_num(v, 1, 1000, "--pace-ms");
		else if ((v = bench_opt(argc, argv, &i, "--streams")))
			o.nconcs = bench_nums(v, o.concs, 4, 1, MAX_CONC, "--streams");
		else
			bench_die("usage: bench_messages [--requests N] [--warmup N] [--words N] "
				  "[--pace-ms N] [--streams 1,100]");
	}
	bench_nofile(4096);
	bench_paths(gh, fakebin, sizeof(gh));
	bench_tmpdir(dir, sizeof(dir), "messages");
	bench_fake_start(fakebin, dir, 256, &fake);
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", dir);
	{
		char conf[4096];

		bench_fmt(conf, sizeof(conf),
			  "{\"server\":{\"listen\":\"127.0.0.1:0\",\"threads\":300,\"max_streams\":200,"
			  "\"max_connections_per_address\":0},"
			  "\"database\":{\"path\":\"gatehouse.db\"},"
			  "\"providers\":{\"up\":{\"type\":\"anthropic\",\"base_url\":"
			  "\"http://127.0.0.1:%d\",\"api_key\":\"sk-ant-bench\"}},"
			  "\"agents\":{\"claude\":{\"provider\":\"up\",\"passthrough\":true,"
			  "\"models\":[\"claude-*\"]}},"
			  "\"policies\":{\"default\":{\"agents\":[\"*\"],\"client_tools\":{\"allow\":"
			  "[\"*\"]}}}}", fake.port);
		bench_write_file(cfg, conf);
	}
	bench_key_create(gh, dir, cfg, "bench", 0, key, sizeof(key));
	bench_gh_start(gh, dir, cfg, "warn", &gw);

	text[0] = '\0';
	for (i = 0; i < o.words; i++) {
		size_t l = strlen(text);

		snprintf(text + l, sizeof(text) - l, "%sw%05d", i ? " " : "", i);
	}
	bench_fmt(script, sizeof(script), "{\"model\":\"" MODEL "\",\"replies\":[{\"text\":\"%s\","
		  "\"repeat\":true}]}", text);
	free(bench_http_ok(fake.port, "POST", "/_script", NULL, script));
	bench_fmt(body, sizeof(body), "{\"model\":\"" MODEL "\",\"max_tokens\":1024,\"stream\":true,"
		  "\"messages\":[{\"role\":\"user\",\"content\":\"Say the words.\"}]}");
	bench_fmt(auth, sizeof(auth), "x-api-key: %s\r\nanthropic-version: 2023-06-01\r\n", key);

	/* a block's samples, or both halves of the alternating run */
	samples = calloc((size_t)(2 * o.requests + o.warmup + MAX_CONC), sizeof(int64_t));
	if (!samples)
		bench_die("out of memory");
	/* warm-up through gatehouse, then the upstream body it sends */
	block(gw.port, "/v1/messages", auth, body, 4, o.warmup > 0 ? o.warmup : 4, samples);
	reqs = bench_http_ok(fake.port, "GET", "/_requests?model=" MODEL, NULL, NULL);
	{
		cJSON *arr = cJSON_Parse(reqs), *last;

		last = cJSON_GetArrayItem(arr, cJSON_GetArraySize(arr) - 1);
		direct = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(last, "body"));
		cJSON_Delete(arr);
		if (!direct)
			bench_die("no upstream request recorded");
	}
	free(reqs);
	bench_print_host();
	printf("\n/v1/messages streamed pass-through: time to first token (first text_delta), "
	       "%lld requests each way, %lld words per answer\n", (long long)o.requests,
	       (long long)o.words);
	table(&o, fake.port, gw.port, text, 0, auth, body, direct, samples);
	{
		/* paced, eight words: a stream's first token is what is timed */
		char *cut = text;

		for (i = 0; i < 8 && (cut = strchr(cut + 1, ' ')); i++)
			;
		if (cut)
			*cut = '\0';
		table(&o, fake.port, gw.port, text, o.pace_ms, auth, body, direct, samples);
	}
	free(direct);
	free(samples);
	bench_stop(gw.pid, 10000);
	bench_stop(fake.pid, 10000);
	bench_rmrf(dir);
	return 0;
}
