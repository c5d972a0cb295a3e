/*
 * upstream.h - outbound HTTP, for providers and HTTP tools: through
 * libcurl, or, for a plain http:// URL at an IP address or localhost with
 * no proxy set, through gatehouse's own HTTP/1.1 client (the same contract
 * at half the CPU per request).
 *
 * A transfer takes a pair of curl handles (multi and easy) from one
 * process-wide pool and gives it back when done; the pair given back last
 * goes out next, so upstream connections stay alive between requests
 * whichever thread makes them. Connection caches move with their pair,
 * never used by two threads at once; the DNS cache and TLS sessions are
 * shared by all pairs (one share object, locked per kind of data), so a
 * pair's first request to a provider skips the name lookup and resumes a
 * TLS session.
 *
 * Never follows redirects. Never sends "Expect: 100-continue". Uses
 * CURLOPT_NOSIGNAL. Error messages name the URL's host and what failed,
 * never a header value (Authorization and provider keys stay out of
 * errors and logs); the host is for operators: resp->error has what
 * failed without it, for what tenants see.
 */
#ifndef GH_UPSTREAM_H
#define GH_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

struct gh_upstream_header {
	const char *name;
	const char *value;          /* may be a secret */
};

struct gh_upstream_req {
	const char *url;
	const char *method;         /* "POST" (default) or "GET" */
	const struct gh_upstream_header *headers;
	size_t nheaders;
	const char *body;           /* may be NULL */
	size_t body_len;
	int64_t timeout_ms;         /* whole transfer, per try; 0 = none */
	int64_t connect_timeout_ms;
	size_t max_response;        /* buffered body bytes (0 = the resp cap); more is an
				     * error (GH_E_UPSTREAM). Bytes given to on_data are
				     * not counted: their consumer bounds what it keeps. */
	/* Streaming: when on_data is set and the status is 2xx, body bytes are
	 * handed over as they arrive instead of being buffered. Return nonzero
	 * to abort (the request then fails with GH_E_CANCELLED). */
	int (*on_data)(void *ud, const char *p, size_t n);
	/* Optional, with on_data: brackets what one pass over the connection
	 * hands to on_data (one read can hold many chunks): open 1 before, 0
	 * after. Nonzero after aborts (GH_E_CANCELLED). */
	int (*on_batch)(void *ud, int open);
	/* Optional: called once an attempt's request has been written whole
	 * (head and body), after the pass over the connection that wrote it
	 * (and after on_batch closed that pass, which may also have read the
	 * reply's first bytes). */
	void (*on_sent)(void *ud);
	/* Optional, with on_data: op is a gh_relay_op (relay.h). A streamed
	 * reply over the built-in client (a plain-HTTP upstream) is then read
	 * by the relay thread instead of the calling worker, which sleeps
	 * until the reply ends or the consumer's client falls behind. Without
	 * it, or when ENTER says no, the caller reads as before. */
	int (*on_relay)(void *ud, int op);
	/* Called at least every 50 ms while the request is in flight (with
	 * wake_fd: see there); return nonzero to abort (GH_E_CANCELLED). Used
	 * to stop an upstream transfer within 100 ms of the client going away. */
	int (*on_tick)(void *ud);
	void *ud;
	/* With on_tick, optional: a descriptor (> 0; 0 = none) that becomes
	 * readable when on_tick has something to see, such as the client's
	 * connection closing. on_tick then runs as soon as it stirs, and
	 * otherwise every tick_ms (at most 60 s), instead of every 50 ms: an
	 * idle stream costs no wake-ups. If it stirs and on_tick does not
	 * abort (the client sent bytes), ticks go back to every 50 ms. */
	int wake_fd;
	int64_t tick_ms;
	/* Retries on connect errors, 429 and 5xx with exponential backoff from
	 * retry_base_ms, honouring Retry-After (capped at 30 s), but never once
	 * streamed data has been delivered. */
	int max_retries;
	int64_t retry_base_ms;
	/* A response header to keep (name, case-insensitive), e.g. an MCP
	 * server's Mcp-Session-Id; its value goes to resp->captured. */
	const char *capture_header;
};

struct gh_upstream_resp {
	long status;                /* 0 when no response */
	struct gh_buf body;         /* buffered body (error bodies always) */
	char content_type[128];
	int64_t retry_after_ms;     /* from Retry-After, -1 when absent */
	int attempts;               /* how many tries were made */
	int64_t streamed_bytes;     /* bytes given to on_data */
	char captured[256];         /* req->capture_header's value, "" when absent (a
				     * longer value is cut: see captured_long) */
	int captured_long;          /* the value did not fit */
	/* When gh_upstream_do fails: what failed, without the upstream's
	 * address ("connection refused"), for messages that reach tenants;
	 * e has the whole story for logs and the audit log. */
	char error[192];
};

/* Initialises r (empty body capped at cap). */
void gh_upstream_resp_init(struct gh_upstream_resp *r, size_t cap);
void gh_upstream_resp_free(struct gh_upstream_resp *r);

/* Performs the request. Returns GH_OK when a response arrived (any status:
 * the caller judges it), GH_E_UPSTREAM when the server could not be
 * reached, the connection broke, or the body exceeded max_response,
 * GH_E_TIMEOUT on timeout, GH_E_CANCELLED when a callback aborted,
 * GH_E_INTERNAL for a header name or value holding CR or LF (never sent).
 * e names the origin, e.g. "upstream http://127.0.0.1:9999: connection
 * refused"; resp->error says the same without it ("connection refused"). */
enum gh_code gh_upstream_do(const struct gh_upstream_req *req, struct gh_upstream_resp *resp,
			    struct gh_err *e);

/* Closes the pooled handles (and their idle connections) that no transfer
 * took for at least idle_ms; 0: all those not in use. Returns how many
 * pairs it closed. Nothing else closes them: the server's maintenance
 * thread calls it every second with server.upstream_idle_ms. */
size_t gh_upstream_idle_close(int64_t idle_ms);

/* Process-wide init/cleanup (curl_global_*, the share object and the
 * pool); call once from main. Cleanup frees the pool: no transfer may be
 * in flight by then. */
int gh_upstream_global_init(void);
void gh_upstream_global_cleanup(void);

#endif
