/*
 * otel.c - OpenTelemetry traces: W3C trace context, spans, and their
 * export as OTLP/HTTP JSON from one background thread; see otel.h.
 *
 * A span is a small struct with its attributes kept as OTLP KeyValue
 * objects, so encoding a batch is wrapping them. Ended spans wait in one
 * queue of at most max_queue spans: a span that finds it full is dropped
 * and counted, so a slow or dead collector costs the request path one
 * mutex and never memory. The exporter thread takes up to max_batch spans
 * when that many wait or interval_ms passed, encodes and POSTs them with
 * its own curl handle and a timeout, and counts the outcome; a failed
 * export's spans are dropped (no retry: the queue must keep moving).
 *
 * Threading: see otel.h. The counters are atomics; the settings are
 * written before the thread starts and after it was joined.
 */
#include "otel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <sodium.h>

#include "buf.h"
#include "log.h"
#include "util.h"

struct gh_span {
	struct gh_span *next;              /* in the queue or a batch */
	struct gh_trace_ctx ctx;           /* its own ids; tracestate from its parent */
	uint8_t parent_id[8];
	int has_parent;
	uint8_t link_trace[16], link_span[8];
	int has_link;
	char name[128];
	int kind;
	uint64_t start_ns, end_ns;
	int error;
	char status_msg[257];
	cJSON *attrs;                      /* [{key, value:{...}}] */
	int nattrs;
	cJSON *events;                     /* [{timeUnixNano, name, attributes}] or NULL */
	int nevents;
};

static atomic_int g_on;                    /* spans are made */
static atomic_int g_capture;
static _Atomic double g_ratio = 1.0;
static atomic_uint_least64_t g_exported, g_dropped, g_failed;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gh_span *head, *tail;
	size_t n;
	int accepting;                     /* span_end queues (else frees) */
	int stopping;
	int test;                          /* no thread: spans stay queued */
	int started;
	pthread_t th;
	/* settings: set before the thread starts, read by it only */
	char *url;
	struct curl_slist *headers;
	size_t max_queue, max_batch;
	int64_t interval_ms, timeout_ms, shutdown_ms;
} X = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static _Thread_local struct gh_trace_ctx t_incoming;
static _Thread_local struct gh_trace_ctx t_active;

/* ------------------------------------------------------- trace context */

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1; /* upper case is not valid in a traceparent */
}

/* n bytes from 2n lower-case hex digits; -1 on anything else. */
static int unhex(const char *s, uint8_t *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

#define TP_SCAN_MAX 512

int gh_traceparent_parse(const char *tp, const char *tracestate, struct gh_trace_ctx *out)
{
	uint8_t ver;
	size_t len = 0, i;

	memset(out, 0, sizeof(*out));
	if (!tp)
		return -1;
	while (*tp == ' ' || *tp == '\t')
		tp++;
	while (len <= TP_SCAN_MAX && tp[len])
		len++;
	if (len > TP_SCAN_MAX)
		return -1;
	while (len && (tp[len - 1] == ' ' || tp[len - 1] == '\t'))
		len--;
	if (len < GH_TRACEPARENT_LEN || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' ||
	    unhex(tp, &ver, 1) || ver == 0xff || unhex(tp + 3, out->trace_id, 16) ||
	    unhex(tp + 36, out->span_id, 8) || unhex(tp + 53, &out->flags, 1) ||
	    all_zero(out->trace_id, 16) || all_zero(out->span_id, 8) ||
	    (ver == 0 && len != GH_TRACEPARENT_LEN) ||
	    (ver != 0 && len > GH_TRACEPARENT_LEN && tp[GH_TRACEPARENT_LEN] != '-')) {
		memset(out, 0, sizeof(*out));
		return -1;
	}
	if (ver != 0)
		out->flags &= 1; /* only the flags version 00 defines */
	out->valid = 1;
	if (tracestate) {
		size_t n = 0;

		while (*tracestate == ' ' || *tracestate == '\t')
			tracestate++;
		while (n <= GH_TRACESTATE_MAX && tracestate[n])
			n++;
		for (i = 0; i < n && n <= GH_TRACESTATE_MAX; i++)
			if ((unsigned char)tracestate[i] < 0x20 || (unsigned char)tracestate[i] > 0x7e)
				break;
		if (n <= GH_TRACESTATE_MAX && i == n) {
			memcpy(out->tracestate, tracestate, n);
			out->tracestate[n] = '\0';
		}
	}
	return 0;
}

void gh_traceparent_format(const struct gh_trace_ctx *c, char *out, size_t cap)
{
	char tid[33], sid[17];

	gh_hex(c->trace_id, 16, tid);
	gh_hex(c->span_id, 8, sid);
	snprintf(out, cap, "00-%s-%s-%02x", tid, sid, (unsigned)(c->flags & 0xff));
}

/* ------------------------------------------------------------ settings */

int gh_otel_enabled(void)
{
	return atomic_load_explicit(&g_on, memory_order_relaxed);
}

int gh_otel_capture_content(void)
{
	return atomic_load_explicit(&g_capture, memory_order_relaxed);
}

void gh_otel_stats(struct gh_otel_stats *out)
{
	out->exported = atomic_load(&g_exported);
	out->dropped = atomic_load(&g_dropped);
	out->failed_exports = atomic_load(&g_failed);
	pthread_mutex_lock(&X.mu);
	out->queued = X.n;
	pthread_mutex_unlock(&X.mu);
}

/* --------------------------------------------------------------- spans */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* TraceIdRatioBased: the trace id's last 8 bytes, as a number below
 * ratio * 2^63, say yes. */
static int sampled_by_ratio(const uint8_t *tid, double ratio)
{
	uint64_t v = 0;
	int i;

	if (ratio >= 1.0)
		return 1;
	if (ratio <= 0.0)
		return 0;
	for (i = 8; i < 16; i++)
		v = v << 8 | tid[i];
	return (double)(v >> 1) < ratio * 9223372036854775808.0;
}

struct gh_span *gh_otel_span_begin(const char *name, enum gh_span_kind kind,
				   const struct gh_trace_ctx *parent,
				   const struct gh_trace_ctx *link)
{
	struct gh_span *s;

	if (!atomic_load_explicit(&g_on, memory_order_relaxed))
		return NULL;
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	if (!(s->attrs = cJSON_CreateArray())) {
		free(s);
		return NULL;
	}
	gh_strlcpy(s->name, name ? name : "", sizeof(s->name));
	s->kind = kind;
	s->start_ns = now_ns();
	if (parent && parent->valid) {
		memcpy(s->ctx.trace_id, parent->trace_id, 16);
		memcpy(s->parent_id, parent->span_id, 8);
		s->has_parent = 1;
		s->ctx.flags = parent->flags & 1;
		memcpy(s->ctx.tracestate, parent->tracestate, sizeof(s->ctx.tracestate));
	} else {
		do
			randombytes_buf(s->ctx.trace_id, 16);
		while (all_zero(s->ctx.trace_id, 16));
		s->ctx.flags = (uint8_t)sampled_by_ratio(s->ctx.trace_id, atomic_load(&g_ratio));
	}
	do
		randombytes_buf(s->ctx.span_id, 8);
	while (all_zero(s->ctx.span_id, 8));
	s->ctx.valid = 1;
	if (link && link->valid) {
		memcpy(s->link_trace, link->trace_id, 16);
		memcpy(s->link_span, link->span_id, 8);
		s->has_link = 1;
	}
	return s;
}

void gh_otel_span_ctx(const struct gh_span *s, struct gh_trace_ctx *out)
{
	if (!s) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = s->ctx;
}

/* The KeyValue for key in arr (replacing an earlier one's value), or a
 * new one when there is room. value is taken. */
static void put_attr(cJSON *arr, int *n, const char *key, cJSON *value)
{
	cJSON *kv;

	if (!value)
		return;
	cJSON_ArrayForEach(kv, arr) {
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");

		if (cJSON_IsString(k) && !strcmp(k->valuestring, key)) {
			cJSON_ReplaceItemInObjectCaseSensitive(kv, "value", value);
			return;
		}
	}
	if (*n >= GH_OTEL_ATTRS || !(kv = cJSON_CreateObject())) {
		cJSON_Delete(value);
		return;
	}
	cJSON_AddStringToObject(kv, "key", key);
	cJSON_AddItemToObject(kv, "value", value);
	cJSON_AddItemToArray(arr, kv);
	(*n)++;
}

/* A string cut at max bytes, not inside a UTF-8 sequence. */
static cJSON *str_value(const char *v)
{
	cJSON *o = cJSON_CreateObject();
	size_t n = strlen(v);

	if (!o)
		return NULL;
	if (n > GH_OTEL_VALUE_MAX) {
		char *cut = malloc(GH_OTEL_VALUE_MAX + 1);

		n = GH_OTEL_VALUE_MAX;
		while (n && ((unsigned char)v[n] & 0xc0) == 0x80)
			n--;
		if (!cut) {
			cJSON_Delete(o);
			return NULL;
		}
		memcpy(cut, v, n);
		cut[n] = '\0';
		cJSON_AddStringToObject(o, "stringValue", cut);
		free(cut);
	} else {
		cJSON_AddStringToObject(o, "stringValue", v);
	}
	return o;
}

/* OTLP/JSON carries 64-bit integers as decimal strings. */
static cJSON *int_value(int64_t v)
{
	cJSON *o = cJSON_CreateObject();
	char num[24];

	if (!o)
		return NULL;
	snprintf(num, sizeof(num), "%lld", (long long)v);
	cJSON_AddStringToObject(o, "intValue", num);
	return o;
}

void gh_otel_set_str(struct gh_span *s, const char *key, const char *v)
{
	if (s && key && v)
		put_attr(s->attrs, &s->nattrs, key, str_value(v));
}

void gh_otel_set_int(struct gh_span *s, const char *key, int64_t v)
{
	if (s && key)
		put_attr(s->attrs, &s->nattrs, key, int_value(v));
}

void gh_otel_set_bool(struct gh_span *s, const char *key, int v)
{
	cJSON *o;

	if (!s || !key || !(o = cJSON_CreateObject()))
		return;
	cJSON_AddBoolToObject(o, "boolValue", v != 0);
	put_attr(s->attrs, &s->nattrs, key, o);
}

static void add_ns(cJSON *o, const char *key, uint64_t ns)
{
	char num[24];

	snprintf(num, sizeof(num), "%llu", (unsigned long long)ns);
	cJSON_AddStringToObject(o, key, num);
}

void gh_otel_event(struct gh_span *s, const char *name, const char *skey, const char *sval,
		   const char *ikey, int64_t ival)
{
	cJSON *ev, *attrs;
	int n = 0;

	if (!s || !name || s->nevents >= GH_OTEL_EVENTS)
		return;
	if (!s->events && !(s->events = cJSON_CreateArray()))
		return;
	if (!(ev = cJSON_CreateObject()))
		return;
	add_ns(ev, "timeUnixNano", now_ns());
	cJSON_AddStringToObject(ev, "name", name);
	attrs = cJSON_AddArrayToObject(ev, "attributes");
	if (attrs && skey && sval)
		put_attr(attrs, &n, skey, str_value(sval));
	if (attrs && ikey)
		put_attr(attrs, &n, ikey, int_value(ival));
	cJSON_AddItemToArray(s->events, ev);
	s->nevents++;
}

void gh_otel_set_error(struct gh_span *s, const char *msg)
{
	if (!s)
		return;
	s->error = 1;
	gh_strlcpy(s->status_msg, msg ? msg : "", sizeof(s->status_msg));
}

static void span_free(struct gh_span *s)
{
	cJSON_Delete(s->attrs);
	cJSON_Delete(s->events);
	free(s);
}

void gh_otel_spans_free(struct gh_span *first)
{
	while (first) {
		struct gh_span *next = first->next;

		span_free(first);
		first = next;
	}
}

void gh_otel_span_link_next(struct gh_span *a, struct gh_span *b)
{
	a->next = b;
}

void gh_otel_span_end(struct gh_span *s)
{
	int queued = 0;

	if (!s)
		return;
	s->end_ns = now_ns();
	if (!(s->ctx.flags & 1)) {
		span_free(s); /* not sampled: it only carried the context */
		return;
	}
	s->next = NULL;
	pthread_mutex_lock(&X.mu);
	if (X.accepting && X.n < X.max_queue) {
		if (X.tail)
			X.tail->next = s;
		else
			X.head = s;
		X.tail = s;
		X.n++;
		queued = 1;
		if (X.n >= X.max_batch && !X.test)
			pthread_cond_signal(&X.cv);
	}
	pthread_mutex_unlock(&X.mu);
	if (!queued) {
		atomic_fetch_add(&g_dropped, 1);
		span_free(s);
	}
}

/* --------------------------------------------------------- propagation */

void gh_otel_request_begin(const char *traceparent, const char *tracestate)
{
	if (!atomic_load_explicit(&g_on, memory_order_relaxed))
		return;
	gh_traceparent_parse(traceparent, tracestate, &t_incoming);
}

void gh_otel_request_end(void)
{
	t_incoming.valid = 0;
	t_active.valid = 0;
}

int gh_otel_incoming(struct gh_trace_ctx *out)
{
	if (!t_incoming.valid)
		return -1;
	*out = t_incoming;
	return 0;
}

void gh_otel_activate(const struct gh_span *s)
{
	if (s)
		t_active = s->ctx;
	else
		t_active.valid = 0;
}

int gh_otel_outgoing(char *traceparent, size_t tpcap, char *tracestate, size_t tscap)
{
	if (!t_active.valid)
		return 0;
	gh_traceparent_format(&t_active, traceparent, tpcap);
	gh_strlcpy(tracestate, t_active.tracestate, tscap);
	return 1;
}

void gh_otel_inject_meta(cJSON *params)
{
	char tp[GH_TRACEPARENT_LEN + 1];
	cJSON *meta;

	if (!t_active.valid || !params)
		return;
	meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	if (!meta)
		meta = cJSON_AddObjectToObject(params, "_meta");
	if (!cJSON_IsObject(meta))
		return;
	gh_traceparent_format(&t_active, tp, sizeof(tp));
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "traceparent");
	cJSON_AddStringToObject(meta, "traceparent", tp);
	if (t_active.tracestate[0]) {
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "tracestate");
		cJSON_AddStringToObject(meta, "tracestate", t_active.tracestate);
	}
}

/* ------------------------------------------------------------ encoding */

static void add_id(cJSON *o, const char *key, const uint8_t *id, size_t n)
{
	char hex[33];

	gh_hex(id, n, hex);
	cJSON_AddStringToObject(o, key, hex);
}

static cJSON *span_json(const struct gh_span *s)
{
	cJSON *o = cJSON_CreateObject(), *st;

	if (!o)
		return NULL;
	add_id(o, "traceId", s->ctx.trace_id, 16);
	add_id(o, "spanId", s->ctx.span_id, 8);
	if (s->has_parent)
		add_id(o, "parentSpanId", s->parent_id, 8);
	if (s->ctx.tracestate[0])
		cJSON_AddStringToObject(o, "traceState", s->ctx.tracestate);
	cJSON_AddStringToObject(o, "name", s->name);
	cJSON_AddNumberToObject(o, "kind", s->kind);
	add_ns(o, "startTimeUnixNano", s->start_ns);
	add_ns(o, "endTimeUnixNano", s->end_ns ? s->end_ns : s->start_ns);
	cJSON_AddItemToObject(o, "attributes", cJSON_Duplicate(s->attrs, 1));
	if (s->events)
		cJSON_AddItemToObject(o, "events", cJSON_Duplicate(s->events, 1));
	if (s->has_link) {
		cJSON *links = cJSON_AddArrayToObject(o, "links"), *l = cJSON_CreateObject();

		if (l) {
			add_id(l, "traceId", s->link_trace, 16);
			add_id(l, "spanId", s->link_span, 8);
			cJSON_AddItemToArray(links, l);
		}
	}
	st = cJSON_AddObjectToObject(o, "status");
	if (st && s->error) {
		cJSON_AddNumberToObject(st, "code", 2); /* STATUS_CODE_ERROR */
		if (s->status_msg[0])
			cJSON_AddStringToObject(st, "message", s->status_msg);
	}
	return o;
}

static cJSON *resource_attr(const char *key, const char *v)
{
	cJSON *kv = cJSON_CreateObject(), *val;

	if (!kv)
		return NULL;
	cJSON_AddStringToObject(kv, "key", key);
	val = cJSON_AddObjectToObject(kv, "value");
	if (val)
		cJSON_AddStringToObject(val, "stringValue", v);
	return kv;
}

char *gh_otel_encode(const struct gh_span *first, size_t max)
{
	cJSON *root = cJSON_CreateObject(), *rs, *r, *res, *ra, *ss, *sc, *scope, *spans;
	const struct gh_span *s;
	size_t n = 0;
	char *out = NULL;

	if (!root)
		return NULL;
	rs = cJSON_AddArrayToObject(root, "resourceSpans");
	r = cJSON_CreateObject();
	cJSON_AddItemToArray(rs, r);
	res = cJSON_AddObjectToObject(r, "resource");
	ra = cJSON_AddArrayToObject(res, "attributes");
	cJSON_AddItemToArray(ra, resource_attr("service.name", "gatehouse"));
	cJSON_AddItemToArray(ra, resource_attr("service.version", GH_VERSION));
	ss = cJSON_AddArrayToObject(r, "scopeSpans");
	sc = cJSON_CreateObject();
	cJSON_AddItemToArray(ss, sc);
	scope = cJSON_AddObjectToObject(sc, "scope");
	cJSON_AddStringToObject(scope, "name", "gatehouse");
	cJSON_AddStringToObject(scope, "version", GH_VERSION);
	spans = cJSON_AddArrayToObject(sc, "spans");
	if (!spans)
		goto out;
	for (s = first; s && n < max; s = s->next, n++) {
		cJSON *o = span_json(s);

		if (!o)
			goto out;
		cJSON_AddItemToArray(spans, o);
	}
	out = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return out;
}

/* ------------------------------------------------------------ exporter */

static size_t discard(char *p, size_t size, size_t nmemb, void *ud)
{
	(void)p;
	(void)ud;
	return size * nmemb;
}

/* POSTs one batch of n spans; counts the outcome. */
static void export_batch(CURL *c, struct gh_span *batch, size_t n, int64_t timeout_ms)
{
	char *body = gh_otel_encode(batch, n);
	long status = 0;
	CURLcode r = CURLE_OK;

	if (body) {
		curl_easy_reset(c);
#define SET(opt, val) do { if (r == CURLE_OK) r = curl_easy_setopt(c, opt, val); } while (0)
		SET(CURLOPT_URL, X.url);
		SET(CURLOPT_PROTOCOLS_STR, "http,https");
		SET(CURLOPT_NOSIGNAL, 1L);
		SET(CURLOPT_FOLLOWLOCATION, 0L);
		SET(CURLOPT_USERAGENT, "gatehouse");
		SET(CURLOPT_HTTPHEADER, X.headers);
		SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
		SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 2000 ? timeout_ms : 2000));
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
		SET(CURLOPT_POSTFIELDS, body);
		SET(CURLOPT_WRITEFUNCTION, discard);
#undef SET
		if (r == CURLE_OK)
			r = curl_easy_perform(c);
		if (r == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	}
	if (body && r == CURLE_OK && status >= 200 && status < 300) {
		atomic_fetch_add(&g_exported, n);
	} else {
		static _Atomic int64_t last_warn_ms;
		int64_t now = gh_now_ms();

		atomic_fetch_add(&g_failed, 1);
		atomic_fetch_add(&g_dropped, n);
		/* one line a minute at most: a dead collector must not fill the log */
		if (now - atomic_load(&last_warn_ms) >= 60000) {
			atomic_store(&last_warn_ms, now);
			if (!body)
				gh_warn("otel: %zu spans dropped: out of memory", n);
			else if (r != CURLE_OK)
				gh_warn("otel: export of %zu spans failed: %s", n, curl_easy_strerror(r));
			else
				gh_warn("otel: export of %zu spans failed: HTTP %ld", n, status);
		}
	}
	free(body);
}

static void *exporter_main(void *arg)
{
	CURL *c = curl_easy_init();
	int64_t stop_by = 0;

	(void)arg;
	pthread_mutex_lock(&X.mu);
	for (;;) {
		struct timespec until;
		struct gh_span *batch, *last;
		size_t n;
		int64_t budget = X.timeout_ms;

		gh_deadline(CLOCK_MONOTONIC, X.interval_ms, &until);
		while (!X.stopping && X.n < X.max_batch &&
		       pthread_cond_timedwait(&X.cv, &X.mu, &until) == 0)
			;
		if (X.stopping && !stop_by)
			stop_by = gh_mono_ns() / 1000000 + X.shutdown_ms;
		if (!X.n) {
			if (X.stopping)
				break;
			continue;
		}
		if (stop_by) {
			budget = stop_by - gh_mono_ns() / 1000000;
			if (budget > X.timeout_ms)
				budget = X.timeout_ms;
			if (budget <= 0)
				break; /* out of time: what is left is dropped by stop */
		}
		batch = last = X.head;
		for (n = 1; n < X.max_batch && last->next; n++)
			last = last->next;
		X.head = last->next;
		if (!X.head)
			X.tail = NULL;
		X.n -= n;
		last->next = NULL;
		pthread_mutex_unlock(&X.mu);
		if (c)
			export_batch(c, batch, n, budget);
		else
			atomic_fetch_add(&g_dropped, n);
		gh_otel_spans_free(batch);
		pthread_mutex_lock(&X.mu);
	}
	pthread_mutex_unlock(&X.mu);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

static void headers_free(struct curl_slist *list)
{
	struct curl_slist *t;

	for (t = list; t; t = t->next)
		sodium_memzero(t->data, strlen(t->data));
	curl_slist_free_all(list);
}

static void settings_free(void)
{
	free(X.url);
	X.url = NULL;
	headers_free(X.headers);
	X.headers = NULL;
}

enum gh_code gh_otel_start(const struct gh_otel_settings *s, struct gh_err *e)
{
	struct gh_buf b;
	struct curl_slist *t;
	size_t i, n;
	enum gh_code rc = GH_OK;

	if (X.started || X.test)
		return gh_err_set(e, GH_E_INTERNAL, "otel: the exporter runs already");
	n = strlen(s->endpoint);
	while (n && s->endpoint[n - 1] == '/')
		n--;
	gh_buf_init(&b, 64 << 10);
	if (gh_buf_printf(&b, "%.*s/v1/traces", (int)n, s->endpoint) != GH_BUF_OK ||
	    !(X.url = strdup(b.data)) ||
	    !(X.headers = curl_slist_append(NULL, "Content-Type: application/json")) ||
	    !(t = curl_slist_append(X.headers, "Expect:")))
		rc = gh_err_set(e, GH_E_NOMEM, "otel: out of memory");
	for (i = 0; rc == GH_OK && i < s->nheaders; i++) {
		gh_buf_reset(&b);
		if (gh_buf_printf(&b, "%s: %s", s->headers[i].name, s->headers[i].value) !=
			    GH_BUF_OK ||
		    !(t = curl_slist_append(X.headers, b.data)))
			rc = gh_err_set(e, GH_E_NOMEM, "otel: out of memory");
	}
	if (b.data)
		sodium_memzero(b.data, b.alloc);
	gh_buf_free(&b);
	if (rc != GH_OK) {
		settings_free();
		return rc;
	}
	X.max_queue = s->max_queue > 0 ? (size_t)s->max_queue : 2048;
	X.max_batch = s->max_batch > 0 ? (size_t)s->max_batch : 512;
	X.interval_ms = s->interval_ms > 0 ? s->interval_ms : 1000;
	X.timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : 5000;
	X.shutdown_ms = s->shutdown_ms > 0 ? s->shutdown_ms : 2000;
	pthread_cond_destroy(&X.cv);
	gh_cond_init_mono(&X.cv);
	X.stopping = 0;
	X.accepting = 1;
	if (pthread_create(&X.th, NULL, exporter_main, NULL) != 0) {
		X.accepting = 0;
		settings_free();
		return gh_err_set(e, GH_E_INTERNAL, "otel: cannot start the exporter thread");
	}
	X.started = 1;
	atomic_store(&g_ratio, s->sample_ratio);
	atomic_store(&g_capture, s->capture_content);
	atomic_store(&g_on, 1);
	return GH_OK;
}

void gh_otel_stop(void)
{
	struct gh_span *left;
	size_t n;

	if (!X.started)
		return;
	atomic_store(&g_on, 0);
	pthread_mutex_lock(&X.mu);
	X.stopping = 1;
	pthread_cond_signal(&X.cv);
	pthread_mutex_unlock(&X.mu);
	pthread_join(X.th, NULL);
	pthread_mutex_lock(&X.mu);
	X.accepting = 0;
	left = X.head;
	n = X.n;
	X.head = X.tail = NULL;
	X.n = 0;
	pthread_mutex_unlock(&X.mu);
	if (n) {
		atomic_fetch_add(&g_dropped, n);
		gh_warn("otel: %zu spans not sent by shutdown (otel.shutdown_timeout_ms)", n);
	}
	gh_otel_spans_free(left);
	settings_free();
	X.started = 0;
}

void gh_otel_test_enable(int on, double sample_ratio)
{
	pthread_mutex_lock(&X.mu);
	X.test = on;
	X.accepting = on;
	X.max_queue = 1 << 20;
	X.max_batch = 512;
	pthread_mutex_unlock(&X.mu);
	atomic_store(&g_ratio, sample_ratio);
	atomic_store(&g_on, on);
	if (!on)
		gh_otel_spans_free(gh_otel_test_drain());
}

struct gh_span *gh_otel_test_drain(void)
{
	struct gh_span *l;

	pthread_mutex_lock(&X.mu);
	l = X.head;
	X.head = X.tail = NULL;
	X.n = 0;
	pthread_mutex_unlock(&X.mu);
	return l;
}
