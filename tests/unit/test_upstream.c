/*
 * test_upstream.c - outbound HTTP against a real server on 127.0.0.1: what
 * goes on the wire (method, body, headers, no "Expect:"), keep-alive across
 * requests, retries on 429 / 5xx / dropped connections with Retry-After
 * honoured, timeouts, refused connections, the response cap, redirects left
 * alone, streaming to on_data, aborts from on_data and on_tick (timed), a
 * reset mid-stream, and that error messages carry neither header values nor
 * the URL's path and query. test_two_threads and test_threads_share_lookups
 * (worker threads reaching the server by name through the shared DNS and
 * TLS session cache) are the ones to run under TSan.
 */
#include "upstream.h"

#include "err.h"
#include "t.h"
#include "t_httpd.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET "sk-test-5ecr3t-value"

static void setup(void)
{
	if (gh_upstream_global_init() != 0) {
		fprintf(stderr, "setup failed\n");
		exit(2);
	}
	t_srv_up();
}

static void teardown(void)
{
	gh_upstream_global_cleanup();
}

static const struct gh_upstream_header secret_hdr[] = {
	{"Authorization", "Bearer " SECRET},
	{"Content-Type", "application/json"},
};

static void req_init(struct gh_upstream_req *q, const char *url)
{
	memset(q, 0, sizeof(*q));
	q->url = url;
	q->headers = secret_hdr;
	q->nheaders = 2;
	q->body = "{}";
	q->body_len = 2;
	q->timeout_ms = 5000;
	q->connect_timeout_ms = 2000;
	q->max_response = 1 << 20;
	q->retry_base_ms = 10;
}

/* An error message must name the origin and nothing else of the request. */
static int msg_clean(const char *msg)
{
	return !strstr(msg, SECRET) && !strstr(msg, "Bearer") && !strstr(msg, "token=") &&
	       !strstr(msg, "/private/");
}

static void test_post_json(void)
{
	static const struct t_reply rp[] = {
		{200, "Content-Type: application/json; charset=utf-8\r\n", "{\"ok\":true}", NULL, 0,
		 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128], v[256], *body = NULL, *sent;
	size_t i, big = 1536 * 1024;
	enum gh_code rc;

	setup();
	t_srv_route(&r, "/v1/chat", rp, 1);
	snprintf(url, sizeof(url), "%s/v1/chat", t_srv.base);
	/* over 1 MB, curl would ask "Expect: 100-continue" unless told not to */
	body = malloc(big + 1);
	T_ASSERT(body);
	for (i = 0; i < big; i++)
		body[i] = (char)('a' + i % 26);
	body[big] = '\0';
	req_init(&q, url);
	q.body = body;
	q.body_len = big;
	gh_upstream_resp_init(&resp, 1 << 20);
	rc = gh_upstream_do(&q, &resp, &e);
	T_EQ_INT(rc, GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_STR(resp.body.data, "{\"ok\":true}");
	T_EQ_STR(resp.content_type, "application/json; charset=utf-8");
	T_EQ_INT(resp.attempts, 1);
	T_EQ_INT(resp.retry_after_ms, -1);
	T_EQ_STR(r.method, "POST");
	sent = t_route_body(&r);
	T_ASSERT(sent && strlen(sent) == big && !memcmp(sent, body, big));
	free(sent);
	T_ASSERT(t_route_header(&r, "Authorization", v, sizeof(v)));
	T_EQ_STR(v, "Bearer " SECRET);
	T_ASSERT(t_route_header(&r, "Content-Type", v, sizeof(v)));
	T_EQ_STR(v, "application/json");
	T_ASSERT(!t_route_header(&r, "Expect", v, sizeof(v)));
	gh_upstream_resp_free(&resp);
	free(body);
	t_route_close(&r);
	teardown();
}

static void test_get(void)
{
	static const struct t_reply rp[] = {
		{200, "Content-Type: text/plain\r\n", "pong", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128], *sent;

	setup();
	t_srv_route(&r, "/ping", rp, 1);
	snprintf(url, sizeof(url), "%s/ping?x=1", t_srv.base);
	req_init(&q, url);
	q.method = "GET";
	q.body = NULL;
	q.body_len = 0;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_STR(resp.body.data, "pong");
	T_EQ_STR(resp.content_type, "text/plain");
	T_EQ_STR(r.method, "GET");
	T_EQ_STR(r.query, "x=1");
	sent = t_route_body(&r);
	T_EQ_STR(sent, "");
	free(sent);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_keep_alive(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];
	int i;

	setup();
	t_srv_route(&r, "/ka", rp, 1);
	snprintf(url, sizeof(url), "%s/ka", t_srv.base);
	req_init(&q, url);
	gh_upstream_resp_init(&resp, 1024);
	for (i = 0; i < 3; i++) {
		T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
		T_EQ_INT(resp.status, 200);
	}
	/* one TCP connection served all three requests */
	T_EQ_INT(atomic_load(&r.hits), 3);
	T_ASSERT(r.ports[0] != 0);
	T_EQ_INT(r.ports[1], r.ports[0]);
	T_EQ_INT(r.ports[2], r.ports[0]);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_retry_429_honours_retry_after(void)
{
	static const struct t_reply rp[] = {
		{429, "Content-Type: application/json\r\nRetry-After: 1\r\n",
		 "{\"error\":{\"message\":\"slow down\"}}", NULL, 0, 0, 0},
		{200, NULL, "{\"ok\":1}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];
	double t0, ms;

	setup();
	t_srv_route(&r, "/r", rp, 2);
	snprintf(url, sizeof(url), "%s/r", t_srv.base);
	req_init(&q, url);
	q.max_retries = 2;
	gh_upstream_resp_init(&resp, 1024);
	t0 = t_now_ms();
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	ms = t_now_ms() - t0;
	printf("  429 + Retry-After: 1 then 200 took %.0f ms\n", ms);
	T_EQ_INT(resp.status, 200);
	T_EQ_STR(resp.body.data, "{\"ok\":1}");
	T_EQ_INT(resp.attempts, 2);
	T_EQ_INT(atomic_load(&r.hits), 2);
	/* waited the second the server asked for, not the 10 ms backoff */
	T_ASSERT(ms >= 950);
	T_ASSERT(ms < 3000);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_retry_after_http_date(void)
{
	struct t_reply rp[1] = {{429, NULL, "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128], hdr[128], date[64];
	time_t later = time(NULL) + 20;
	struct tm tm;

	gmtime_r(&later, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\nRetry-After: %s\r\n", date);
	rp[0].headers = hdr;
	setup();
	t_srv_route(&r, "/d", rp, 1);
	snprintf(url, sizeof(url), "%s/d", t_srv.base);
	req_init(&q, url);
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 429);
	T_EQ_INT(resp.attempts, 1);
	T_ASSERT(resp.retry_after_ms >= 18000 && resp.retry_after_ms <= 20000);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_5xx_exhausts_retries(void)
{
	static const struct t_reply rp[] = {{503, NULL, "{\"error\":\"busy\"}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];
	double t0, ms;

	setup();
	t_srv_route(&r, "/busy", rp, 1);
	snprintf(url, sizeof(url), "%s/busy", t_srv.base);
	req_init(&q, url);
	q.max_retries = 2;
	q.retry_base_ms = 40;
	gh_upstream_resp_init(&resp, 1024);
	t0 = t_now_ms();
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	ms = t_now_ms() - t0;
	T_EQ_INT(resp.status, 503);
	T_EQ_STR(resp.body.data, "{\"error\":\"busy\"}");
	T_EQ_INT(resp.attempts, 3);
	T_EQ_INT(atomic_load(&r.hits), 3);
	/* backoff 40 ms then 80 ms, each plus up to half again */
	printf("  3 tries with backoff took %.0f ms\n", ms);
	T_ASSERT(ms >= 115 && ms < 2000);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_4xx_not_retried(void)
{
	static const struct t_reply rp[] = {{400, NULL, "{\"error\":\"bad\"}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];

	setup();
	t_srv_route(&r, "/bad", rp, 1);
	snprintf(url, sizeof(url), "%s/bad", t_srv.base);
	req_init(&q, url);
	q.max_retries = 3;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 400);
	T_EQ_INT(resp.attempts, 1);
	T_EQ_INT(atomic_load(&r.hits), 1);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_timeout(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 3000, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[160], origin[128];
	double t0, ms;

	setup();
	t_srv_route(&r, "/private/slow", rp, 1);
	snprintf(url, sizeof(url), "%s/private/slow?token=" SECRET, t_srv.base);
	snprintf(origin, sizeof(origin), "upstream %s", t_srv.base);
	req_init(&q, url);
	q.timeout_ms = 300;
	q.max_retries = 2;
	gh_upstream_resp_init(&resp, 1024);
	t0 = t_now_ms();
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_TIMEOUT);
	ms = t_now_ms() - t0;
	printf("  timeout after %.0f ms: %s\n", ms, e.msg);
	T_ASSERT(ms >= 250 && ms < 1500);
	T_EQ_INT(e.code, GH_E_TIMEOUT);
	T_CONTAINS(e.msg, origin);
	T_ASSERT(msg_clean(e.msg));
	T_EQ_INT(resp.attempts, 1);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_connection_refused(void)
{
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[160], origin[128];
	int port = t_dead_port();
	double t0, ms;

	gh_upstream_global_init();
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/private/x?token=" SECRET, port);
	snprintf(origin, sizeof(origin), "upstream http://127.0.0.1:%d: connection refused", port);
	req_init(&q, url);
	q.max_retries = 2;
	q.retry_base_ms = 5;
	gh_upstream_resp_init(&resp, 1024);
	t0 = t_now_ms();
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_UPSTREAM);
	ms = t_now_ms() - t0;
	printf("  refused after %.0f ms: %s\n", ms, e.msg);
	T_ASSERT(ms < 1000);
	T_CONTAINS(e.msg, origin);
	T_CONTAINS(e.msg, "3 attempts");
	T_ASSERT(msg_clean(e.msg));
	T_EQ_INT(resp.attempts, 3);
	T_EQ_INT(resp.status, 0);
	gh_upstream_resp_free(&resp);
	gh_upstream_global_cleanup();
}

static void test_response_over_cap(void)
{
	static char big[10001];
	struct t_reply rp[1] = {{200, NULL, big, NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[160];

	memset(big, 'x', sizeof(big) - 1);
	setup();
	t_srv_route(&r, "/private/big", rp, 1);
	snprintf(url, sizeof(url), "%s/private/big?token=" SECRET, t_srv.base);
	req_init(&q, url);
	q.max_response = 1000;
	gh_upstream_resp_init(&resp, 1 << 20);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "over 1000 bytes");
	T_ASSERT(msg_clean(e.msg));
	T_ASSERT(resp.body.len <= 1000);
	/* the same body within the cap of the buffer alone is fine */
	q.max_response = 0;
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.body.len, 10000);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_redirect_not_followed(void)
{
	static const struct t_reply rp[] = {{302, "Location: /target\r\n", "", NULL, 0, 0, 0}};
	static const struct t_reply tp[] = {{200, NULL, "{\"followed\":true}", NULL, 0, 0, 0}};
	struct t_route r, t;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];

	setup();
	t_srv_route(&r, "/moved", rp, 1);
	t_srv_route(&t, "/target", tp, 1);
	snprintf(url, sizeof(url), "%s/moved", t_srv.base);
	req_init(&q, url);
	q.max_retries = 2;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 302);
	T_EQ_INT(atomic_load(&t.hits), 0);
	T_EQ_INT(resp.attempts, 1);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	t_route_close(&t);
	teardown();
}

struct sink {
	char buf[4096];
	size_t len;
	int calls;
	int stop_after;   /* return nonzero on this call (1-based); 0 = never */
};

static int sink_data(void *ud, const char *p, size_t n)
{
	struct sink *s = ud;

	s->calls++;
	if (s->len + n < sizeof(s->buf)) {
		memcpy(s->buf + s->len, p, n);
		s->len += n;
		s->buf[s->len] = '\0';
	}
	return s->stop_after && s->calls >= s->stop_after;
}

static void test_stream_to_on_data(void)
{
	/* split inside the JSON, between two LFs and between a CR and its LF */
	static const char *const chunks[] = {"data: {\"a\"", ":1}\n", "\ndata: b\r", "\n\r\n",
					     NULL};
	static const struct t_reply rp[] = {{200, NULL, NULL, chunks, 15, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct sink s;
	char url[128];
	const char *want = "data: {\"a\":1}\n\ndata: b\r\n\r\n";

	memset(&s, 0, sizeof(s));
	setup();
	t_srv_route(&r, "/sse", rp, 1);
	snprintf(url, sizeof(url), "%s/sse", t_srv.base);
	req_init(&q, url);
	q.on_data = sink_data;
	q.ud = &s;
	q.max_response = 4; /* the cap is for buffered bodies, not streams */
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_STR(resp.content_type, "text/event-stream");
	T_EQ_STR(s.buf, want);
	T_ASSERT(s.calls >= 2);
	T_EQ_INT(resp.streamed_bytes, (int64_t)strlen(want));
	T_EQ_INT(resp.body.len, 0);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_stream_error_is_buffered(void)
{
	static const struct t_reply rp[] = {
		{500, NULL, "{\"error\":{\"message\":\"boom\"}}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct sink s;
	char url[128];

	memset(&s, 0, sizeof(s));
	setup();
	t_srv_route(&r, "/sse", rp, 1);
	snprintf(url, sizeof(url), "%s/sse", t_srv.base);
	req_init(&q, url);
	q.on_data = sink_data;
	q.ud = &s;
	q.max_retries = 1;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 500);
	T_EQ_INT(s.calls, 0);
	T_EQ_INT(resp.streamed_bytes, 0);
	T_EQ_STR(resp.body.data, "{\"error\":{\"message\":\"boom\"}}");
	T_EQ_INT(resp.attempts, 2);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_on_data_abort(void)
{
	static const char *const chunks[] = {"data: 1\n\n", "data: 2\n\n", "data: 3\n\n", NULL};
	static const struct t_reply rp[] = {{200, NULL, NULL, chunks, 30, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct sink s;
	char url[128];

	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	setup();
	t_srv_route(&r, "/sse", rp, 1);
	snprintf(url, sizeof(url), "%s/sse", t_srv.base);
	req_init(&q, url);
	q.on_data = sink_data;
	q.ud = &s;
	q.max_retries = 2;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_CANCELLED);
	T_EQ_INT(s.calls, 1);
	T_EQ_INT(resp.attempts, 1);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

struct ticker {
	double start, abort_at_ms;  /* abort once this long after start; < 0 = never */
	double last, max_gap, aborted_at;
	int ticks;
};

static int tick(void *ud)
{
	struct ticker *t = ud;
	double now = t_now_ms();

	if (t->ticks && now - t->last > t->max_gap)
		t->max_gap = now - t->last;
	t->last = now;
	t->ticks++;
	if (t->abort_at_ms >= 0 && now - t->start >= t->abort_at_ms) {
		/* the client went away at start + abort_at_ms */
		t->aborted_at = t->start + t->abort_at_ms;
		return 1;
	}
	return 0;
}

static int ignore_data(void *ud, const char *p, size_t n)
{
	return 0;
}

static void test_tick_abort_mid_stream(void)
{
	static const struct t_reply rp[] = {{200, NULL, NULL, NULL, 0, 0, 20}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct ticker t;
	char url[128];
	double ret, latency;

	memset(&t, 0, sizeof(t));
	setup();
	t_srv_route(&r, "/drip", rp, 1);
	snprintf(url, sizeof(url), "%s/drip", t_srv.base);
	req_init(&q, url);
	q.timeout_ms = 20000;
	q.on_data = ignore_data;
	q.on_tick = tick;
	q.ud = &t;
	t.start = t_now_ms();
	t.abort_at_ms = 300;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_CANCELLED);
	ret = t_now_ms();
	latency = ret - t.aborted_at;
	printf("  abort took effect %.1f ms after the client left (ticks %d, max gap %.1f ms)\n",
	       latency, t.ticks, t.max_gap);
	T_ASSERT(ret - t.start < 1000);
	/* the contract is 100 ms; the slack is for loaded sanitizer runs */
	T_ASSERT(latency < 150);
	T_ASSERT(t.max_gap < 90);
	T_EQ_INT(resp.attempts, 1);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_tick_while_server_silent(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 400, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct ticker t;
	char url[128];

	memset(&t, 0, sizeof(t));
	setup();
	t_srv_route(&r, "/quiet", rp, 1);
	snprintf(url, sizeof(url), "%s/quiet", t_srv.base);
	req_init(&q, url);
	q.on_tick = tick;
	q.ud = &t;
	t.start = t_now_ms();
	t.abort_at_ms = -1;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	printf("  %d ticks over a 400 ms wait, longest gap %.1f ms\n", t.ticks, t.max_gap);
	T_EQ_INT(resp.status, 200);
	T_ASSERT(t.ticks >= 6);
	T_ASSERT(t.max_gap < 90);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

/* A tick that watches a wake descriptor the way a stream's sink watches
 * its client: EOF means gone. */
struct waker {
	struct ticker t;
	int fd;
};

static int wake_tick(void *ud)
{
	struct waker *w = ud;
	char c;

	tick(&w->t);
	return recv(w->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void *hang_up_later(void *ud)
{
	int *fd = ud;

	usleep(200 * 1000);
	close(*fd);
	return NULL;
}

/* Runs GET /quiet (answered after delay_ms) with fd as the wake descriptor
 * and ticks due only every minute. */
static enum gh_code wake_run(struct waker *w, int delay_ms, struct gh_upstream_resp *resp,
			     struct gh_err *e)
{
	struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, delay_ms, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	char url[128];
	enum gh_code rc;

	t_srv_route(&r, "/quiet", rp, 1);
	snprintf(url, sizeof(url), "%s/quiet", t_srv.base);
	req_init(&q, url);
	q.timeout_ms = 20000;
	q.on_tick = wake_tick;
	q.ud = w;
	q.wake_fd = w->fd;
	q.tick_ms = 60000;
	w->t.start = t_now_ms();
	w->t.abort_at_ms = -1;
	rc = gh_upstream_do(&q, resp, e);
	t_route_close(&r);
	return rc;
}

static void test_wake_fd_idle_costs_no_ticks(void)
{
	struct waker w;
	struct gh_upstream_resp resp;
	struct gh_err e;
	int sv[2];

	memset(&w, 0, sizeof(w));
	setup();
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	w.fd = sv[0];
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(wake_run(&w, 400, &resp, &e), GH_OK);
	printf("  %d ticks over a 400 ms wait with a quiet wake descriptor\n", w.t.ticks);
	T_EQ_INT(resp.status, 200);
	T_EQ_INT(w.t.ticks, 1);
	gh_upstream_resp_free(&resp);
	close(sv[0]);
	close(sv[1]);
	teardown();
}

static void test_wake_fd_hang_up_aborts(void)
{
	struct waker w;
	struct gh_upstream_resp resp;
	struct gh_err e;
	pthread_t th;
	int sv[2];
	double took;

	memset(&w, 0, sizeof(w));
	setup();
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	w.fd = sv[0];
	T_ASSERT(pthread_create(&th, NULL, hang_up_later, &sv[1]) == 0);
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(wake_run(&w, 3000, &resp, &e), GH_E_CANCELLED);
	took = t_now_ms() - w.t.start;
	pthread_join(th, NULL);
	printf("  the hang-up 200 ms in ended the transfer after %.1f ms (%d ticks)\n", took,
	       w.t.ticks);
	T_ASSERT(took < 1500);
	T_ASSERT(w.t.ticks <= 3);
	gh_upstream_resp_free(&resp);
	close(sv[0]);
	teardown();
}

static void test_wake_fd_readable_falls_back_to_clock(void)
{
	struct waker w;
	struct gh_upstream_resp resp;
	struct gh_err e;
	int sv[2];

	memset(&w, 0, sizeof(w));
	setup();
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	/* the client sent a byte nobody reads: the descriptor stays readable */
	T_ASSERT(write(sv[1], "x", 1) == 1);
	w.fd = sv[0];
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(wake_run(&w, 400, &resp, &e), GH_OK);
	printf("  %d ticks over a 400 ms wait with a readable wake descriptor\n", w.t.ticks);
	T_EQ_INT(resp.status, 200);
	/* every 50 ms again, not a busy loop and not once a minute */
	T_ASSERT(w.t.ticks >= 3);
	T_ASSERT(w.t.ticks <= 40);
	gh_upstream_resp_free(&resp);
	close(sv[0]);
	close(sv[1]);
	teardown();
}

static void test_abort_during_backoff(void)
{
	static const struct t_reply rp[] = {
		{429, "Retry-After: 20\r\n", "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct ticker t;
	char url[128];
	double ms;

	memset(&t, 0, sizeof(t));
	setup();
	t_srv_route(&r, "/limited", rp, 1);
	snprintf(url, sizeof(url), "%s/limited", t_srv.base);
	req_init(&q, url);
	q.max_retries = 3;
	q.on_tick = tick;
	q.ud = &t;
	t.start = t_now_ms();
	t.abort_at_ms = 150;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_CANCELLED);
	ms = t_now_ms() - t.start;
	printf("  abort during a 20 s Retry-After wait returned after %.0f ms\n", ms);
	T_ASSERT(ms < 1000);
	T_EQ_INT(atomic_load(&r.hits), 1);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

static void test_reset_mid_stream_not_retried(void)
{
	static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
				    "Transfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\n";
	struct t_raw raw;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct sink s;
	char url[160];

	memset(&s, 0, sizeof(s));
	gh_upstream_global_init();
	T_ASSERT(t_raw_start(&raw, reply, sizeof(reply) - 1, 1, 1) == 0);
	snprintf(url, sizeof(url), "%s/private/s?token=" SECRET, raw.base);
	req_init(&q, url);
	q.on_data = sink_data;
	q.ud = &s;
	q.max_retries = 2;
	q.retry_base_ms = 5;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_UPSTREAM);
	printf("  %s\n", e.msg);
	T_EQ_STR(s.buf, "data: a\n\n");
	T_EQ_INT(resp.streamed_bytes, 9);
	T_EQ_INT(resp.attempts, 1);
	T_ASSERT(msg_clean(e.msg));
	t_raw_stop(&raw);
	T_EQ_INT(atomic_load(&raw.accepted), 1);
	gh_upstream_resp_free(&resp);
	gh_upstream_global_cleanup();
}

static void test_closed_without_reply_is_retried(void)
{
	struct t_raw raw;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];

	gh_upstream_global_init();
	T_ASSERT(t_raw_start(&raw, "", 0, 0, 3) == 0);
	snprintf(url, sizeof(url), "%s/x", raw.base);
	req_init(&q, url);
	q.max_retries = 2;
	q.retry_base_ms = 5;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "closed without a reply");
	T_EQ_INT(resp.attempts, 3);
	t_raw_stop(&raw);
	T_EQ_INT(atomic_load(&raw.accepted), 3);
	gh_upstream_resp_free(&resp);
	gh_upstream_global_cleanup();
}

static void test_header_injection_refused(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	static const struct gh_upstream_header bad[] = {
		{"X-Key", SECRET "\r\nX-Evil: 1"}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];

	setup();
	t_srv_route(&r, "/h", rp, 1);
	snprintf(url, sizeof(url), "%s/h", t_srv.base);
	req_init(&q, url);
	q.headers = bad;
	q.nheaders = 1;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_INTERNAL);
	T_CONTAINS(e.msg, "X-Key");
	T_ASSERT(!strstr(e.msg, "Evil") && msg_clean(e.msg));
	T_EQ_INT(atomic_load(&r.hits), 0);
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

struct worker {
	const char *base;
	int id;
	int ok;
};

static void *worker_main(void *ud)
{
	struct worker *w = ud;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128], body[64];
	int i;

	snprintf(url, sizeof(url), "%s/echo", w->base);
	gh_upstream_resp_init(&resp, 4096);
	for (i = 0; i < 25; i++) {
		int n = snprintf(body, sizeof(body), "{\"worker\":%d,\"i\":%d}", w->id, i);

		req_init(&q, url);
		q.body = body;
		q.body_len = (size_t)n;
		if (gh_upstream_do(&q, &resp, &e) == GH_OK && resp.status == 200 &&
		    !strcmp(resp.body.data, "{}"))
			w->ok++;
	}
	gh_upstream_resp_free(&resp);
	return NULL;
}

static void test_two_threads(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct worker w[2] = {{NULL, 0, 0}, {NULL, 1, 0}};
	pthread_t th[2];
	int i;

	setup();
	t_srv_route(&r, "/echo", rp, 1);
	for (i = 0; i < 2; i++) {
		w[i].base = t_srv.base;
		T_ASSERT(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	T_EQ_INT(w[0].ok, 25);
	T_EQ_INT(w[1].ok, 25);
	T_EQ_INT(atomic_load(&r.hits), 50);
	t_route_close(&r);
	teardown();
}

/* A host name that resolves to 127.0.0.1 through the resolver (this
 * machine's own name, as /etc/hosts usually has it), else "localhost",
 * which curl answers without a lookup. */
static const char *loopback_name(char *buf, size_t cap)
{
	struct addrinfo hints, *ai = NULL;
	int ok = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (gethostname(buf, cap) == 0 && buf[0] && getaddrinfo(buf, NULL, &hints, &ai) == 0) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ai->ai_addr;

		ok = ntohl(a->sin_addr.s_addr) == INADDR_LOOPBACK;
		freeaddrinfo(ai);
	}
	if (!ok)
		snprintf(buf, cap, "localhost");
	return buf;
}

/* Worker threads reaching the provider by name at once: every request
 * succeeds while their name lookups and TLS sessions go through the one
 * shared cache and its locks (the TSan run checks the locking). */
static void test_threads_share_lookups(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct worker w[4];
	pthread_t th[4];
	char name[256], base[320];
	int i;

	setup();
	t_srv_route(&r, "/echo", rp, 1);
	snprintf(base, sizeof(base), "http://%s:%d", loopback_name(name, sizeof(name)),
		 t_srv.port);
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){base, i, 0};
		T_ASSERT(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 4; i++)
		T_EQ_INT(w[i].ok, 25);
	T_EQ_INT(atomic_load(&r.hits), 100);
	t_route_close(&r);
	teardown();
}

struct one_req {
	const char *url;
	enum gh_code rc;
	long status;
};

static void *one_req_main(void *ud)
{
	struct one_req *o = ud;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;

	req_init(&q, o->url);
	gh_upstream_resp_init(&resp, 1024);
	o->rc = gh_upstream_do(&q, &resp, &e);
	o->status = resp.status;
	gh_upstream_resp_free(&resp);
	return NULL;
}

/* A request made on another thread, after the first one's thread has
 * gone, goes over the connection the first one left open; closing the
 * idle handles closes it. */
static void test_connection_outlives_thread(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct one_req o[2];
	pthread_t th;
	char url[128];
	int i;

	setup();
	t_srv_route(&r, "/again", rp, 1);
	snprintf(url, sizeof(url), "%s/again", t_srv.base);
	for (i = 0; i < 2; i++) {
		o[i] = (struct one_req){url, GH_E_INTERNAL, 0};
		T_ASSERT(pthread_create(&th, NULL, one_req_main, &o[i]) == 0);
		pthread_join(th, NULL);
		T_EQ_INT(o[i].rc, GH_OK);
		T_EQ_INT(o[i].status, 200);
	}
	T_EQ_INT(atomic_load(&r.hits), 2);
	T_EQ_INT(r.ports[1], r.ports[0]);
	/* the idle pair closed, its connection goes with it */
	T_EQ_INT(gh_upstream_idle_close(60000), 0);
	T_EQ_INT(gh_upstream_idle_close(0), 1);
	T_ASSERT(pthread_create(&th, NULL, one_req_main, &o[0]) == 0);
	pthread_join(th, NULL);
	T_EQ_INT(o[0].rc, GH_OK);
	T_EQ_INT(atomic_load(&r.hits), 3);
	T_ASSERT(r.ports[2] != r.ports[0]);
	t_route_close(&r);
	teardown();
}

/* Unix-domain sockets this process holds: curl's multi handle makes two
 * (its wake-up pair), the built-in client none. Read from /proc (the
 * links of /proc/self/fd against the inodes /proc/self/net/unix lists),
 * not from the descriptors themselves: the test server's threads open
 * and close theirs meanwhile. -1 when /proc cannot be read. */
static int unix_sockets(void)
{
	static unsigned long inodes[4096];
	char line[512], path[300], link[64];
	size_t ninodes = 0, i;
	FILE *f = fopen("/proc/self/net/unix", "r");
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (!f)
		return -1;
	/* Num RefCount Protocol Flags Type St Inode Path (the heading reads
	 * no number there) */
	while (fgets(line, sizeof(line), f) && ninodes < sizeof(inodes) / sizeof(inodes[0]))
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &inodes[ninodes]) == 1)
			ninodes++;
	fclose(f);
	if (!(d = opendir("/proc/self/fd")))
		return -1;
	while ((de = readdir(d))) {
		unsigned long ino;
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		if ((k = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[k] = '\0';
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		for (i = 0; i < ninodes; i++)
			if (inodes[i] == ino) {
				n++;
				break;
			}
	}
	closedir(d);
	return n;
}

/* A pair the built-in client uses holds no curl handles (a thousand held
 * streams would each hold a multi handle's sockets for nothing), and the
 * same pair then carries a transfer through curl (user info in the URL
 * sends it there), twice, over curl's own connection. */
static void test_curl_handles_when_needed(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char plain[128], curl[160];
	int before;

	setup();
	t_srv_route(&r, "/lazy", rp, 1);
	snprintf(plain, sizeof(plain), "%s/lazy", t_srv.base);
	snprintf(curl, sizeof(curl), "http://user@127.0.0.1:%d/lazy", t_srv.port);
	before = unix_sockets();
	T_ASSERT(before >= 0);
	req_init(&q, plain);
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_INT(unix_sockets(), before);
	q.url = curl;
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 200);
	gh_upstream_resp_free(&resp);
	/* and the count sees curl's: its multi handle's wake-up pair */
	T_EQ_INT(unix_sockets(), before + 2);
	T_EQ_INT(atomic_load(&r.hits), 3);
	T_ASSERT(r.ports[1] != r.ports[0]);
	T_EQ_INT(r.ports[2], r.ports[1]);
	t_route_close(&r);
	teardown();
}

/* A named response header is kept (an MCP server's session id); a header
 * whose name merely starts like it is not. */
static void test_capture_header(void)
{
	static const struct t_reply rp[] = {
		{200, "Mcp-Session-Idx: wrong\r\nmcp-session-id:  s-123 \r\n", "{}", NULL, 0, 0, 0},
		{200, "", "{}", NULL, 0, 0, 0}};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128];

	setup();
	t_srv_route(&r, "/mcp", rp, 2);
	snprintf(url, sizeof(url), "%s/mcp", t_srv.base);
	req_init(&q, url);
	q.capture_header = "Mcp-Session-Id";
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_STR(resp.captured, "s-123");
	T_EQ_INT(resp.captured_long, 0);
	/* the next response has none: nothing is left from the last one */
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_STR(resp.captured, "");
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

/* A thread keeps the last URL it parsed: the next request to another URL
 * (another path, another query, another port, one that does not parse)
 * must go where it says, and an error names its own origin. A URL curl
 * cannot parse once left the thread's handle refusing every later request
 * ("could not set up the request"). */
static void test_each_request_goes_to_its_url(void)
{
	static const struct t_reply ra[] = {{200, NULL, "a", NULL, 0, 0, 0}};
	static const struct t_reply rb[] = {{200, NULL, "b", NULL, 0, 0, 0}};
	struct t_route a, b;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char ua[128], ub[128], dead[128], origin[128];
	int i, port = t_dead_port();

	setup();
	t_srv_route(&a, "/a", ra, 1);
	t_srv_route(&b, "/b", rb, 1);
	snprintf(ua, sizeof(ua), "%s/a?n=1", t_srv.base);
	snprintf(ub, sizeof(ub), "%s/b?n=2", t_srv.base);
	snprintf(dead, sizeof(dead), "http://127.0.0.1:%d/private/x", port);
	snprintf(origin, sizeof(origin), "upstream http://127.0.0.1:%d: connection refused",
		 port);
	gh_upstream_resp_init(&resp, 1024);
	for (i = 0; i < 2; i++) {
		req_init(&q, ua);
		T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
		T_EQ_STR(resp.body.data, "a");
		T_EQ_STR(a.query, "n=1");
		req_init(&q, ub);
		T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
		T_EQ_STR(resp.body.data, "b");
		T_EQ_STR(b.query, "n=2");
		req_init(&q, dead);
		T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_E_UPSTREAM);
		T_CONTAINS(e.msg, origin);
		req_init(&q, "http://[not a url");
		T_ASSERT(gh_upstream_do(&q, &resp, &e) != GH_OK);
		T_CONTAINS(e.msg, "upstream (invalid URL)");
	}
	T_EQ_INT(atomic_load(&a.hits), 2);
	T_EQ_INT(atomic_load(&b.hits), 2);
	gh_upstream_resp_free(&resp);
	t_route_close(&a);
	t_route_close(&b);
	teardown();
}

/* What the built-in client (an http:// target at an address) writes: the
 * request line, Host with the port, User-Agent, Accept, Content-Length;
 * a caller's header with an empty value is left out, as curl does. */
static void test_plain_wire(void)
{
	static const struct t_reply rp[] = {{200, NULL, "{}", NULL, 0, 0, 0}};
	static const struct gh_upstream_header hdrs[] = {
		{"Content-Type", "application/json"},
		{"X-Empty", ""},
		{"X-Kept", "yes"},
	};
	struct t_route r;
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	char url[128], v[256], host[64];

	setup();
	t_srv_route(&r, "/wire", rp, 1);
	snprintf(url, sizeof(url), "%s/wire?a=1&b=2#frag", t_srv.base);
	req_init(&q, url);
	q.headers = hdrs;
	q.nheaders = 3;
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_STR(r.method, "POST");
	T_ASSERT(t_route_header(&r, "Host", v, sizeof(v)));
	snprintf(host, sizeof(host), "%s", t_srv.base + strlen("http://"));
	T_EQ_STR(v, host);
	T_ASSERT(t_route_header(&r, "User-Agent", v, sizeof(v)));
	T_EQ_STR(v, "gatehouse");
	T_ASSERT(t_route_header(&r, "Content-Length", v, sizeof(v)));
	T_EQ_STR(v, "2");
	T_ASSERT(t_route_header(&r, "X-Kept", v, sizeof(v)));
	T_EQ_STR(v, "yes");
	T_ASSERT(!t_route_header(&r, "X-Empty", v, sizeof(v)));
	gh_upstream_resp_free(&resp);
	t_route_close(&r);
	teardown();
}

/* One request to a server that answers every connection with reply and
 * closes it; the result, with *resp (initialised here, freed by the
 * caller) and *e. */
static enum gh_code raw_once(const char *reply, struct gh_upstream_resp *resp,
			     struct gh_err *e)
{
	struct t_raw raw;
	struct gh_upstream_req q;
	char url[128];
	enum gh_code rc;

	gh_upstream_resp_init(resp, 1024);
	if (t_raw_start(&raw, reply, strlen(reply), 0, 1) != 0)
		return gh_err_set(e, GH_E_INTERNAL, "test: cannot start the raw server");
	snprintf(url, sizeof(url), "%s/x", raw.base);
	req_init(&q, url);
	rc = gh_upstream_do(&q, resp, e);
	t_raw_stop(&raw);
	return rc;
}

/* A body without a length runs to the end of the connection. */
static void test_body_until_close(void)
{
	struct gh_upstream_resp resp;
	struct gh_err e;

	gh_upstream_global_init();
	T_EQ_INT(raw_once("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"
			  "all of it, up to the close",
			  &resp, &e),
		 GH_OK);
	T_EQ_INT(resp.status, 200);
	T_EQ_STR(resp.body.data, "all of it, up to the close");
	T_EQ_STR(resp.content_type, "text/plain");
	gh_upstream_resp_free(&resp);
	gh_upstream_global_cleanup();
}

/* A reply that is not HTTP fails with what was wrong with it. */
static void test_not_http(void)
{
	struct gh_upstream_resp resp;
	struct gh_err e;

	gh_upstream_global_init();
	T_EQ_INT(raw_once("SSH-2.0-OpenSSH_9.2\r\n", &resp, &e), GH_E_UPSTREAM);
	T_CONTAINS(e.msg, "not a valid HTTP reply (not an HTTP/1.x response)");
	T_CONTAINS(resp.error, "not a valid HTTP reply");
	gh_upstream_resp_free(&resp);
	gh_upstream_global_cleanup();
}

/* Reads one request (head and its two-byte body "{}") from c; 0 or -1. */
static int read_request(int c)
{
	char buf[8192];
	size_t got = 0;

	while (got < sizeof(buf) - 1) {
		struct pollfd pf = {c, POLLIN, 0};
		ssize_t n;
		char *end;

		if (poll(&pf, 1, 5000) <= 0 || (n = read(c, buf + got, sizeof(buf) - 1 - got)) <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) && strlen(end + 4) >= 2)
			return 0;
	}
	return -1;
}

struct stale_srv {
	int fd;
	atomic_int conns, requests;
};

/* The first connection answers one request, reads the next and closes
 * without a word (a server dropping an idle connection just as the
 * request arrives); the second answers. */
static void *stale_main(void *ud)
{
	static const char ok1[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none";
	static const char ok2[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo";
	struct stale_srv *s = ud;
	int c;

	if ((c = accept(s->fd, NULL, NULL)) < 0)
		return NULL;
	atomic_fetch_add(&s->conns, 1);
	if (read_request(c) == 0 && write(c, ok1, sizeof(ok1) - 1) > 0 && read_request(c) == 0)
		atomic_fetch_add(&s->requests, 2);
	close(c);
	if ((c = accept(s->fd, NULL, NULL)) < 0)
		return NULL;
	atomic_fetch_add(&s->conns, 1);
	if (read_request(c) == 0 && write(c, ok2, sizeof(ok2) - 1) > 0)
		atomic_fetch_add(&s->requests, 1);
	close(c);
	return NULL;
}

/* A kept-alive connection the server closes as the next request arrives:
 * the request goes again on a new connection, within the same attempt. */
static void test_stale_connection_resent(void)
{
	struct stale_srv s;
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	struct gh_upstream_req q;
	struct gh_upstream_resp resp;
	struct gh_err e;
	pthread_t th;
	char url[128];

	gh_upstream_global_init();
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s.fd = socket(AF_INET, SOCK_STREAM, 0);
	atomic_init(&s.conns, 0);
	atomic_init(&s.requests, 0);
	T_ASSERT(s.fd >= 0 && bind(s.fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		 listen(s.fd, 4) == 0 && getsockname(s.fd, (struct sockaddr *)&a, &al) == 0);
	T_ASSERT(pthread_create(&th, NULL, stale_main, &s) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", ntohs(a.sin_port));
	req_init(&q, url);
	gh_upstream_resp_init(&resp, 1024);
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_STR(resp.body.data, "one");
	T_EQ_INT(gh_upstream_do(&q, &resp, &e), GH_OK);
	T_EQ_STR(resp.body.data, "two");
	T_EQ_INT(resp.attempts, 1);
	pthread_join(th, NULL);
	close(s.fd);
	T_EQ_INT(atomic_load(&s.conns), 2);
	T_EQ_INT(atomic_load(&s.requests), 3);
	gh_upstream_resp_free(&resp);
	gh_upstream_global_cleanup();
}

T_MAIN(T(test_post_json), T(test_get), T(test_capture_header), T(test_keep_alive), T(test_retry_429_honours_retry_after),
       T(test_retry_after_http_date), T(test_5xx_exhausts_retries), T(test_4xx_not_retried),
       T(test_timeout), T(test_connection_refused), T(test_response_over_cap),
       T(test_redirect_not_followed), T(test_stream_to_on_data), T(test_stream_error_is_buffered),
       T(test_on_data_abort), T(test_tick_abort_mid_stream), T(test_tick_while_server_silent),
       T(test_wake_fd_idle_costs_no_ticks), T(test_wake_fd_hang_up_aborts),
       T(test_wake_fd_readable_falls_back_to_clock),
       T(test_abort_during_backoff), T(test_reset_mid_stream_not_retried),
       T(test_closed_without_reply_is_retried), T(test_header_injection_refused),
       T(test_two_threads), T(test_threads_share_lookups), T(test_connection_outlives_thread),
       T(test_curl_handles_when_needed),
       T(test_each_request_goes_to_its_url), T(test_plain_wire), T(test_body_until_close),
       T(test_not_http), T(test_stale_connection_resent))
