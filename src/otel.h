/*
 * otel.h - OpenTelemetry traces: spans of runs, model calls and tool
 * calls, W3C trace context in and out, and their export over OTLP/HTTP
 * (JSON encoding) from a background thread.
 *
 * One exporter per process (gh_otel_start at start, gh_otel_stop at
 * shutdown). While none runs (no `otel` section) every function here is
 * one branch and returns: no span is made, no header is read or sent.
 *
 * Threading: a span belongs to the thread that began it until
 * gh_otel_span_end hands it to the exporter. The trace context of the
 * request in hand and the span whose context goes out with upstream
 * requests are per thread (a CivetWeb worker serves one request at a
 * time; a run lives on one thread). The queue is guarded by a mutex held
 * only to link or unlink spans; encoding and sending happen outside it.
 */
#ifndef GH_OTEL_H
#define GH_OTEL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"

/* A W3C trace context: "00-<32 hex trace id>-<16 hex parent id>-<2 hex
 * flags>", and the tracestate that came with it (passed on unchanged). */
#define GH_TRACEPARENT_LEN 55
#define GH_TRACESTATE_MAX 512
struct gh_trace_ctx {
	int valid;
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;                     /* bit 0: sampled */
	char tracestate[GH_TRACESTATE_MAX + 1];
};

/* Parses a traceparent header (and its tracestate, may be NULL) into out.
 * Strict: lower-case hex, the version's exact length (version 00) or a
 * '-' after the known fields (later versions), version ff and all-zero ids
 * refused; surrounding spaces and tabs are ignored; at most 512 bytes are
 * looked at. A tracestate longer than GH_TRACESTATE_MAX or with control
 * characters is dropped, never the traceparent. Returns 0, or -1 (out
 * zeroed) when tp is NULL or invalid. */
int gh_traceparent_parse(const char *tp, const char *tracestate, struct gh_trace_ctx *out);

/* Writes the version-00 traceparent of c into out (cap >= 56). */
void gh_traceparent_format(const struct gh_trace_ctx *c, char *out, size_t cap);

/* What the exporter is given (from the config's `otel` section). The
 * strings are copied by gh_otel_start. */
struct gh_otel_header {
	const char *name;
	const char *value;                 /* may hold a secret */
};
struct gh_otel_settings {
	const char *endpoint;              /* base URL; spans go to {endpoint}/v1/traces */
	const struct gh_otel_header *headers;
	size_t nheaders;
	int capture_content;               /* tool arguments and results on spans */
	double sample_ratio;               /* 0..1, for traces gatehouse starts */
	int64_t max_queue;                 /* spans waiting; more are dropped */
	int64_t max_batch;                 /* spans per export request */
	int64_t interval_ms;               /* a partial batch waits at most this */
	int64_t timeout_ms;                /* one export request */
	int64_t shutdown_ms;               /* gh_otel_stop flushes at most this long */
};

/* Starts the exporter thread. GH_E_NOMEM / GH_E_INTERNAL on failure. */
enum gh_code gh_otel_start(const struct gh_otel_settings *s, struct gh_err *e);
/* Stops it: spans still queued are sent for at most shutdown_ms, the rest
 * counted dropped. Spans ended afterwards are freed unsent. Idempotent. */
void gh_otel_stop(void);
/* 1 while an exporter runs. */
int gh_otel_enabled(void);
/* 1 when tool arguments and results may go on spans. */
int gh_otel_capture_content(void);

/* Counters since start: spans sent (collector answered 2xx), dropped
 * (queue full, a failed export's spans, left at shutdown), waiting now,
 * and export requests that failed. */
struct gh_otel_stats {
	uint64_t exported, dropped, queued, failed_exports;
};
void gh_otel_stats(struct gh_otel_stats *out);

/* ------------------------------------------------------------- spans */

enum gh_span_kind { GH_SPAN_INTERNAL = 1, GH_SPAN_SERVER = 2, GH_SPAN_CLIENT = 3 };

struct gh_span;

/* Begins a span named name (truncated at 127 bytes) as a child of parent
 * (NULL or invalid: a new trace, sampled by sample_ratio; otherwise the
 * parent's trace, sampled as the parent was), linked to link (may be
 * NULL). NULL when no exporter runs or out of memory: every span function
 * takes NULL and does nothing. */
struct gh_span *gh_otel_span_begin(const char *name, enum gh_span_kind kind,
				   const struct gh_trace_ctx *parent,
				   const struct gh_trace_ctx *link);
/* The span's own context (for children and for traceparent headers). */
void gh_otel_span_ctx(const struct gh_span *s, struct gh_trace_ctx *out);

/* Attributes; a key set twice keeps the last value. Values are copied;
 * strings longer than GH_OTEL_VALUE_MAX are cut; at most GH_OTEL_ATTRS
 * attributes per span (more are ignored). NULL values are ignored. */
#define GH_OTEL_VALUE_MAX 4096
#define GH_OTEL_ATTRS 64
#define GH_OTEL_EVENTS 16
void gh_otel_set_str(struct gh_span *s, const char *key, const char *v);
void gh_otel_set_int(struct gh_span *s, const char *key, int64_t v);
void gh_otel_set_bool(struct gh_span *s, const char *key, int v);
/* An event now, with one optional string and one optional integer
 * attribute (skey/ikey NULL: none). At most GH_OTEL_EVENTS per span. */
void gh_otel_event(struct gh_span *s, const char *name, const char *skey, const char *sval,
		   const char *ikey, int64_t ival);
/* Marks the span failed (status ERROR) with msg (cut at 256 bytes). */
void gh_otel_set_error(struct gh_span *s, const char *msg);
/* Ends s now and hands it to the exporter (takes ownership). */
void gh_otel_span_end(struct gh_span *s);

/* ----------------------------------------------------- propagation */

/* The trace context of the request this thread serves: set from its
 * traceparent/tracestate headers at the start of a request (invalid or
 * absent: none), cleared at its end. */
void gh_otel_request_begin(const char *traceparent, const char *tracestate);
void gh_otel_request_end(void);
/* 0 with *out filled when the request in hand came with a valid
 * traceparent; -1 otherwise. */
int gh_otel_incoming(struct gh_trace_ctx *out);

/* Makes s the span whose context goes out with this thread's upstream
 * requests (NULL: none). */
void gh_otel_activate(const struct gh_span *s);
/* The headers for an upstream request made on this thread now: 1 with
 * traceparent (cap >= 56) and tracestate ("" when none; cap >=
 * GH_TRACESTATE_MAX + 1) filled, or 0 when no span is active. */
int gh_otel_outgoing(char *traceparent, size_t tpcap, char *tracestate, size_t tscap);
/* Puts the active span's context into a JSON-RPC request's params as
 * _meta.traceparent / _meta.tracestate (the MCP convention). */
void gh_otel_inject_meta(cJSON *params);

/* ------------------------------------------------------- encoding */

/* The OTLP/JSON ExportTraceServiceRequest for spans (a list linked
 * through the spans themselves, as the queue holds them), with the
 * resource attributes service.name "gatehouse" and service.version.
 * Caller frees; NULL when out of memory. Exposed for tests. */
char *gh_otel_encode(const struct gh_span *first, size_t max);
/* Frees a list of spans (linked as the queue links them). */
void gh_otel_spans_free(struct gh_span *first);
/* Links b after a (tests build lists with it). */
void gh_otel_span_link_next(struct gh_span *a, struct gh_span *b);
/* For tests: spans begin and end with no exporter thread running (on),
 * and what ended since is taken back as a list (caller frees). */
void gh_otel_test_enable(int on, double sample_ratio);
struct gh_span *gh_otel_test_drain(void);

#endif
