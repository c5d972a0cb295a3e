/*
 * test_otel.c - the traceparent parser, spans and their OTLP/JSON
 * encoding, and the exporter thread against a receiver on loopback (run
 * under TSan too: spans end on several threads while it exports).
 */
#define _GNU_SOURCE /* strcasestr */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "config.h"
#include "otel.h"
#include "t.h"
#include "util.h"

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define SID "00f067aa0ba902b7"

/* ------------------------------------------------------------ parser */

static void test_parses_a_valid_traceparent(void)
{
	struct gh_trace_ctx c;
	char out[GH_TRACEPARENT_LEN + 1];

	T_EQ_INT(gh_traceparent_parse("00-" TID "-" SID "-01", "a=1,b=2", &c), 0);
	T_ASSERT(c.valid);
	T_EQ_INT(c.trace_id[0], 0x4b);
	T_EQ_INT(c.trace_id[15], 0x36);
	T_EQ_INT(c.span_id[7], 0xb7);
	T_EQ_INT(c.flags, 1);
	T_EQ_STR(c.tracestate, "a=1,b=2");
	gh_traceparent_format(&c, out, sizeof(out));
	T_EQ_STR(out, "00-" TID "-" SID "-01");
	/* blanks around the value are not part of it */
	T_EQ_INT(gh_traceparent_parse(" \t00-" TID "-" SID "-00\t ", NULL, &c), 0);
	T_EQ_INT(c.flags, 0);
	T_EQ_STR(c.tracestate, "");
	/* a later version: its known fields, more after a '-', flags it
	 * does not know dropped */
	T_EQ_INT(gh_traceparent_parse("cc-" TID "-" SID "-03-what-comes", NULL, &c), 0);
	T_EQ_INT(c.flags, 1);
	T_EQ_INT(gh_traceparent_parse("cc-" TID "-" SID "-01", NULL, &c), 0);
}

static void test_refuses_invalid_traceparents(void)
{
	static const char *const bad[] = {
		"",
		"00",
		"00-" TID "-" SID "-0",                       /* short */
		"00-" TID "-" SID "-011",                     /* version 00 is exactly 55 */
		"00-" TID "-" SID "-01-x",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-" SID "-01", /* upper case */
		"00-00000000000000000000000000000000-" SID "-01", /* zero trace id */
		"00-" TID "-0000000000000000-01",             /* zero parent id */
		"ff-" TID "-" SID "-01",                      /* version ff */
		"0g-" TID "-" SID "-01",
		"00_" TID "-" SID "-01",
		"00-" TID "_" SID "-01",
		"00-" TID "-" SID "_01",
		"00-" TID "-" SID "-0x",
		"cc-" TID "-" SID "-01x",                     /* more, but not after '-' */
		"00-4bf92f3577b34da6a3ce929d0e0e473-" SID "-01-",
	};
	struct gh_trace_ctx c;
	char longer[1024];
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(bad); i++) {
		memset(&c, 0x55, sizeof(c));
		if (gh_traceparent_parse(bad[i], NULL, &c) != -1)
			T_FAIL("accepted \"%s\"", bad[i]);
		T_ASSERT(!c.valid);
	}
	T_EQ_INT(gh_traceparent_parse(NULL, "a=b", &c), -1);
	/* a later version's tail is bounded: past 512 bytes it is refused */
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	memcpy(longer, "cc-" TID "-" SID "-01-", 56);
	T_EQ_INT(gh_traceparent_parse(longer, NULL, &c), -1);
	longer[400] = '\0';
	T_EQ_INT(gh_traceparent_parse(longer, NULL, &c), 0);
}

static void test_a_bad_tracestate_is_dropped_not_the_traceparent(void)
{
	struct gh_trace_ctx c;
	char big[GH_TRACESTATE_MAX + 2];

	T_EQ_INT(gh_traceparent_parse("00-" TID "-" SID "-01", "a=1\r\nX-Evil: 1", &c), 0);
	T_ASSERT(c.valid);
	T_EQ_STR(c.tracestate, "");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	T_EQ_INT(gh_traceparent_parse("00-" TID "-" SID "-01", big, &c), 0);
	T_EQ_STR(c.tracestate, "");
	big[GH_TRACESTATE_MAX] = '\0';
	T_EQ_INT(gh_traceparent_parse("00-" TID "-" SID "-01", big, &c), 0);
	T_EQ_INT(strlen(c.tracestate), GH_TRACESTATE_MAX);
}

/* ------------------------------------------------------ spans, encoding */

static const cJSON *attr(const cJSON *span, const char *key)
{
	const cJSON *kv;

	cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(span, "attributes")) {
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");

		if (cJSON_IsString(k) && !strcmp(k->valuestring, key))
			return cJSON_GetObjectItemCaseSensitive(kv, "value");
	}
	return NULL;
}

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_encodes_otlp_json(void)
{
	struct gh_trace_ctx in, pc;
	struct gh_span *root, *child, *list;
	cJSON *doc, *spans, *rs, *s0, *s1, *res;
	char *json, big[GH_OTEL_VALUE_MAX + 100], tid[33], sid[17];

	gh_otel_test_enable(1, 1.0);
	T_EQ_INT(gh_traceparent_parse("00-" TID "-" SID "-01", "k=v", &in), 0);
	root = gh_otel_span_begin("invoke_agent a", GH_SPAN_INTERNAL, &in, NULL);
	T_ASSERT(root);
	gh_otel_set_str(root, "gen_ai.operation.name", "invoke_agent");
	gh_otel_set_int(root, "gen_ai.usage.input_tokens", 12345678901234LL);
	gh_otel_set_bool(root, "gatehouse.run.resumed", 1);
	gh_otel_set_str(root, "twice", "first");
	gh_otel_set_str(root, "twice", "second");
	gh_otel_set_str(root, "ignored", NULL);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	gh_otel_set_str(root, "big", big);
	gh_otel_span_ctx(root, &pc);
	child = gh_otel_span_begin("execute_tool t", GH_SPAN_INTERNAL, &pc, &in);
	gh_otel_event(child, "gatehouse.approval.decided", "gatehouse.approval.status", "approved",
		      "gatehouse.approval.wait_ms", 42);
	gh_otel_set_error(child, "denied by policy");
	gh_otel_span_end(child);
	gh_otel_span_end(root);
	list = gh_otel_test_drain();
	T_ASSERT(list);
	json = gh_otel_encode(list, 100);
	gh_otel_spans_free(list);
	gh_otel_test_enable(0, 1.0);
	T_ASSERT(json);
	doc = cJSON_Parse(json);
	free(json);
	T_ASSERT(doc);
	rs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "resourceSpans"), 0);
	res = cJSON_GetObjectItemCaseSensitive(rs, "resource");
	T_EQ_STR(str(attr(res, "service.name"), "stringValue"), "gatehouse");
	T_EQ_STR(str(attr(res, "service.version"), "stringValue"), GH_VERSION);
	spans = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rs, "scopeSpans"), 0), "spans");
	T_EQ_INT(cJSON_GetArraySize(spans), 2);
	s0 = cJSON_GetArrayItem(spans, 0); /* ended first: the child */
	s1 = cJSON_GetArrayItem(spans, 1);
	T_EQ_STR(str(s1, "name"), "invoke_agent a");
	T_EQ_STR(str(s1, "traceId"), TID);
	T_EQ_STR(str(s1, "parentSpanId"), SID);
	T_EQ_STR(str(s1, "traceState"), "k=v");
	gh_hex(pc.span_id, 8, sid);
	gh_hex(pc.trace_id, 16, tid);
	T_EQ_STR(str(s1, "spanId"), sid);
	T_EQ_STR(str(s0, "traceId"), tid);
	T_EQ_STR(str(s0, "parentSpanId"), sid);
	T_EQ_INT(cJSON_GetObjectItemCaseSensitive(s1, "kind")->valueint, 1);
	/* times: nanoseconds as decimal strings */
	T_ASSERT(str(s1, "startTimeUnixNano") && strlen(str(s1, "startTimeUnixNano")) >= 19);
	T_ASSERT(strtoull(str(s1, "endTimeUnixNano"), NULL, 10) >=
		 strtoull(str(s1, "startTimeUnixNano"), NULL, 10));
	T_EQ_STR(str(attr(s1, "gen_ai.operation.name"), "stringValue"), "invoke_agent");
	T_EQ_STR(str(attr(s1, "gen_ai.usage.input_tokens"), "intValue"), "12345678901234");
	T_ASSERT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(attr(s1, "gatehouse.run.resumed"),
							       "boolValue")));
	T_EQ_STR(str(attr(s1, "twice"), "stringValue"), "second");
	T_ASSERT(!attr(s1, "ignored"));
	T_EQ_INT(strlen(str(attr(s1, "big"), "stringValue")), GH_OTEL_VALUE_MAX);
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s1, "status"),
						   "code"));
	/* the child: its status, event and link */
	T_EQ_INT(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s0, "status"),
						  "code")->valueint, 2);
	T_EQ_STR(str(cJSON_GetObjectItemCaseSensitive(s0, "status"), "message"), "denied by policy");
	{
		const cJSON *ev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s0, "events"), 0);
		const cJSON *ln = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s0, "links"), 0);

		T_EQ_STR(str(ev, "name"), "gatehouse.approval.decided");
		T_ASSERT(str(ev, "timeUnixNano"));
		T_EQ_STR(str(attr(ev, "gatehouse.approval.status"), "stringValue"), "approved");
		T_EQ_STR(str(attr(ev, "gatehouse.approval.wait_ms"), "intValue"), "42");
		T_EQ_STR(str(ln, "traceId"), TID);
		T_EQ_STR(str(ln, "spanId"), SID);
	}
	cJSON_Delete(doc);
}

static void test_attributes_and_events_are_bounded(void)
{
	struct gh_span *s, *list;
	cJSON *doc, *sp;
	char key[32], *json;
	int i;

	gh_otel_test_enable(1, 1.0);
	s = gh_otel_span_begin("x", GH_SPAN_INTERNAL, NULL, NULL);
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		gh_otel_set_int(s, key, i);
		gh_otel_event(s, "e", NULL, NULL, NULL, 0);
	}
	gh_otel_span_end(s);
	list = gh_otel_test_drain();
	json = gh_otel_encode(list, 10);
	gh_otel_spans_free(list);
	gh_otel_test_enable(0, 1.0);
	doc = cJSON_Parse(json);
	free(json);
	sp = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "resourceSpans"), 0),
			"scopeSpans"), 0), "spans"), 0);
	T_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sp, "attributes")),
		 GH_OTEL_ATTRS);
	T_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sp, "events")),
		 GH_OTEL_EVENTS);
	/* a new trace: no parent, a non-zero id */
	T_ASSERT(!cJSON_GetObjectItemCaseSensitive(sp, "parentSpanId"));
	T_ASSERT(strcmp(str(sp, "traceId"), "00000000000000000000000000000000"));
	cJSON_Delete(doc);
}

static void test_sampling_and_propagation(void)
{
	struct gh_trace_ctx in, c;
	struct gh_span *s;
	char tp[GH_TRACEPARENT_LEN + 1], ts[GH_TRACESTATE_MAX + 1];
	cJSON *params;
	int i;

	/* disabled: nothing is made, nothing goes out */
	T_ASSERT(!gh_otel_span_begin("x", GH_SPAN_INTERNAL, NULL, NULL));
	gh_otel_request_begin("00-" TID "-" SID "-01", NULL);
	T_EQ_INT(gh_otel_incoming(&in), -1);
	T_EQ_INT(gh_otel_outgoing(tp, sizeof(tp), ts, sizeof(ts)), 0);
	/* ratio 0: traces gatehouse starts are not sampled (the context still
	 * goes out, flags 00), but a sampled caller's trace is */
	gh_otel_test_enable(1, 0.0);
	for (i = 0; i < 20; i++)
		gh_otel_span_end(gh_otel_span_begin("x", GH_SPAN_INTERNAL, NULL, NULL));
	T_ASSERT(!gh_otel_test_drain());
	gh_otel_request_begin("00-" TID "-" SID "-01", "v=1");
	T_EQ_INT(gh_otel_incoming(&in), 0);
	s = gh_otel_span_begin("y", GH_SPAN_INTERNAL, &in, NULL);
	gh_otel_activate(s);
	T_EQ_INT(gh_otel_outgoing(tp, sizeof(tp), ts, sizeof(ts)), 1);
	gh_otel_span_ctx(s, &c);
	T_EQ_INT(strncmp(tp, "00-" TID "-", 36), 0);
	T_EQ_INT(tp[GH_TRACEPARENT_LEN - 1], '1');
	T_EQ_STR(ts, "v=1");
	params = cJSON_CreateObject();
	cJSON_AddObjectToObject(params, "_meta");
	gh_otel_inject_meta(params);
	T_EQ_STR(str(cJSON_GetObjectItemCaseSensitive(params, "_meta"), "traceparent"), tp);
	T_EQ_STR(str(cJSON_GetObjectItemCaseSensitive(params, "_meta"), "tracestate"), "v=1");
	cJSON_Delete(params);
	gh_otel_activate(NULL);
	T_EQ_INT(gh_otel_outgoing(tp, sizeof(tp), ts, sizeof(ts)), 0);
	gh_otel_span_end(s);
	s = gh_otel_test_drain();
	T_ASSERT(s);
	gh_otel_spans_free(s);
	gh_otel_request_end();
	T_EQ_INT(gh_otel_incoming(&in), -1);
	gh_otel_test_enable(0, 1.0);
}

/* ------------------------------------------------------------ exporter */

/* A receiver on loopback: answers each POST with status, counts the spans
 * ("spanId" occurrences) it got. */
struct receiver {
	int fd, port, status;
	pthread_t th;
	atomic_int spans, posts, stop;
};

static void *receiver_main(void *arg)
{
	struct receiver *rx = arg;
	char *buf = malloc(4 << 20);

	while (buf && !atomic_load(&rx->stop)) {
		int c = accept(rx->fd, NULL, NULL);
		size_t got = 0;
		long clen = -1;
		char *hdr_end = NULL, resp[128];

		if (c < 0)
			break;
		for (;;) {
			ssize_t r = recv(c, buf + got, (4 << 20) - 1 - got, 0);

			if (r <= 0)
				break;
			got += (size_t)r;
			buf[got] = '\0';
			if (!hdr_end && (hdr_end = strstr(buf, "\r\n\r\n"))) {
				char *cl = strcasestr(buf, "Content-Length:");

				clen = cl ? strtol(cl + 15, NULL, 10) : 0;
			}
			if (hdr_end && (long)(got - (size_t)(hdr_end + 4 - buf)) >= clen)
				break;
		}
		if (hdr_end) {
			const char *p = hdr_end;
			int n = 0;

			while ((p = strstr(p, "\"spanId\"")) != NULL) {
				n++;
				p += 8;
			}
			/* links carry a spanId too; these spans have none */
			atomic_fetch_add(&rx->spans, n);
			atomic_fetch_add(&rx->posts, 1);
		}
		snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
			 rx->status);
		if (send(c, resp, strlen(resp), MSG_NOSIGNAL) < 0)
			(void)0;
		close(c);
	}
	free(buf);
	return NULL;
}

static int receiver_start(struct receiver *rx, int status)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);

	memset(rx, 0, sizeof(*rx));
	rx->status = status;
	rx->fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rx->fd < 0 || bind(rx->fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(rx->fd, 16) || getsockname(rx->fd, (struct sockaddr *)&a, &al))
		return -1;
	rx->port = ntohs(a.sin_port);
	return pthread_create(&rx->th, NULL, receiver_main, rx);
}

static void receiver_stop(struct receiver *rx)
{
	atomic_store(&rx->stop, 1);
	shutdown(rx->fd, SHUT_RDWR);
	close(rx->fd);
	pthread_join(rx->th, NULL);
}

#define THREADS 4
#define PER_THREAD 50

static void *ender(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < PER_THREAD; i++) {
		struct gh_span *s = gh_otel_span_begin("work", GH_SPAN_INTERNAL, NULL, NULL);

		gh_otel_set_int(s, "i", i);
		gh_otel_span_end(s);
	}
	return NULL;
}

static void settings(struct gh_otel_settings *s, const char *url)
{
	memset(s, 0, sizeof(*s));
	s->endpoint = url;
	s->sample_ratio = 1.0;
	s->max_queue = 1000;
	s->max_batch = 16;
	s->interval_ms = 20;
	s->timeout_ms = 2000;
	s->shutdown_ms = 3000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void test_exporter_sends_what_threads_end(void)
{
	struct receiver rx;
	struct gh_otel_settings s;
	struct gh_otel_stats before, after;
	struct gh_err e;
	pthread_t th[THREADS];
	char url[64];
	int i;

	curl_global_init(CURL_GLOBAL_ALL);
	T_EQ_INT(receiver_start(&rx, 200), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", rx.port);
	settings(&s, url);
	gh_otel_stats(&before);
	T_EQ_INT(gh_otel_start(&s, &e), GH_OK);
	T_ASSERT(gh_otel_enabled());
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, ender, NULL);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	/* stop flushes what still waits */
	gh_otel_stop();
	T_ASSERT(!gh_otel_enabled());
	gh_otel_stats(&after);
	receiver_stop(&rx);
	T_EQ_INT(after.exported - before.exported, THREADS * PER_THREAD);
	T_EQ_INT(after.dropped - before.dropped, 0);
	T_EQ_INT(after.queued, 0);
	T_EQ_INT(atomic_load(&rx.spans), THREADS * PER_THREAD);
	T_ASSERT(atomic_load(&rx.posts) >= THREADS * PER_THREAD / 16);
	/* stopped: spans are no longer made */
	T_ASSERT(!gh_otel_span_begin("late", GH_SPAN_INTERNAL, NULL, NULL));
}

static void test_a_failing_collector_drops_and_counts(void)
{
	struct receiver rx;
	struct gh_otel_settings s;
	struct gh_otel_stats before, after;
	struct gh_err e;
	char url[64];
	int i;

	T_EQ_INT(receiver_start(&rx, 503), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", rx.port);
	settings(&s, url);
	gh_otel_stats(&before);
	T_EQ_INT(gh_otel_start(&s, &e), GH_OK);
	ender(NULL);
	for (i = 0; i < 500; i++) {
		gh_otel_stats(&after);
		if (after.dropped - before.dropped == PER_THREAD)
			break;
		sleep_ms(10);
	}
	gh_otel_stop();
	gh_otel_stats(&after);
	receiver_stop(&rx);
	T_EQ_INT(after.exported - before.exported, 0);
	T_EQ_INT(after.dropped - before.dropped, PER_THREAD);
	T_ASSERT(after.failed_exports - before.failed_exports >= 1);
}

static void test_a_full_queue_drops_instead_of_growing(void)
{
	struct gh_otel_settings s;
	struct gh_otel_stats before, after;
	struct gh_err e;
	int fd = socket(AF_INET, SOCK_STREAM, 0), i;
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	char url[64];

	/* a collector that accepts (the backlog) and never answers */
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) && !listen(fd, 16) &&
		 !getsockname(fd, (struct sockaddr *)&a, &al));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	settings(&s, url);
	s.max_queue = 8;
	s.max_batch = 4;
	s.timeout_ms = 500;
	s.shutdown_ms = 200;
	gh_otel_stats(&before);
	T_EQ_INT(gh_otel_start(&s, &e), GH_OK);
	for (i = 0; i < 100; i++)
		gh_otel_span_end(gh_otel_span_begin("x", GH_SPAN_INTERNAL, NULL, NULL));
	gh_otel_stats(&after);
	T_ASSERT(after.queued <= 8);
	/* every span is accounted for: dropped at once, or later by the
	 * failed export or the bounded shutdown */
	T_ASSERT(after.dropped - before.dropped >= 100 - 8 - 4);
	gh_otel_stop();
	gh_otel_stats(&after);
	close(fd);
	T_EQ_INT(after.exported - before.exported, 0);
	T_EQ_INT(after.dropped - before.dropped, 100);
	T_EQ_INT(after.queued, 0);
}

/* ------------------------------------------------------------- config */

#define MIN "\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":{\"provider\":\"m\"}}"

static enum gh_code load(const char *text, struct gh_config **out, struct gh_err *e)
{
	gh_err_clear(e);
	return gh_config_parse("t.json", text, strlen(text), out, e);
}

static void test_the_otel_section(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{"{" MIN ",\"otel\":{}}", "$.otel.endpoint: required"},
		{"{" MIN ",\"otel\":{\"endpoint\":\"udp://x\"}}",
		 "$.otel.endpoint: expected an http:// or https:// URL"},
		{"{" MIN ",\"otel\":{\"endpoint\":\"http://c:4318\",\"sample_ratio\":1.5}}",
		 "$.otel.sample_ratio: expected a number in 0..1"},
		{"{" MIN ",\"otel\":{\"endpoint\":\"http://c:4318\",\"max_queue\":0}}",
		 "$.otel.max_queue: expected an integer in 1..1000000"},
		{"{" MIN ",\"otel\":{\"endpoint\":\"http://c:4318\",\"headers\":{\"a:b\":\"x\"}}}",
		 "$.otel.headers: \"a:b\": not a valid header name"},
		{"{" MIN ",\"otel\":{\"endpoint\":\"http://c:4318\",\"url\":\"x\"}}",
		 "$.otel.url: unknown option"},
	};
	struct gh_config *cfg = NULL;
	struct gh_err e;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(bad); i++) {
		if (load(bad[i].text, &cfg, &e) == GH_OK) {
			gh_config_free(cfg);
			T_FAIL("accepted: %s", bad[i].text);
		}
		T_CONTAINS(e.msg, bad[i].msg);
	}
	/* absent: nothing traced */
	T_EQ_INT(load("{" MIN "}", &cfg, &e), GH_OK);
	T_ASSERT(!cfg->otel.endpoint);
	gh_config_free(cfg);
	T_EQ_INT(load("{" MIN ",\"otel\":{\"endpoint\":\"http://c:4318\"}}", &cfg, &e), GH_OK);
	T_EQ_STR(cfg->otel.endpoint, "http://c:4318");
	T_EQ_INT(cfg->otel.capture_content, 0);
	T_ASSERT(cfg->otel.sample_ratio == 1.0);
	T_EQ_INT(cfg->otel.max_queue, 2048);
	T_EQ_INT(cfg->otel.max_batch, 512);
	T_EQ_INT(cfg->otel.interval_ms, 1000);
	T_EQ_INT(cfg->otel.timeout_ms, 5000);
	T_EQ_INT(cfg->otel.shutdown_timeout_ms, 2000);
	gh_config_free(cfg);
	setenv("GH_TEST_OTLP", "secret-token", 1);
	T_EQ_INT(load("{" MIN ",\"otel\":{\"endpoint\":\"https://c\",\"sample_ratio\":0.25,"
		      "\"capture_content\":true,\"headers\":{\"Authorization\":"
		      "\"Bearer ${GH_TEST_OTLP}\"}}}", &cfg, &e), GH_OK);
	T_ASSERT(cfg->otel.sample_ratio == 0.25);
	T_EQ_INT(cfg->otel.capture_content, 1);
	T_EQ_INT(cfg->otel.nheaders, 1);
	T_EQ_STR(cfg->otel.headers[0].name, "Authorization");
	T_EQ_STR(cfg->otel.headers[0].value, "Bearer secret-token");
	gh_config_free(cfg);
}

T_MAIN(T(test_the_otel_section), T(test_parses_a_valid_traceparent), T(test_refuses_invalid_traceparents),
       T(test_a_bad_tracestate_is_dropped_not_the_traceparent), T(test_encodes_otlp_json),
       T(test_attributes_and_events_are_bounded), T(test_sampling_and_propagation),
       T(test_exporter_sends_what_threads_end), T(test_a_failing_collector_drops_and_counts),
       T(test_a_full_queue_drops_instead_of_growing))
