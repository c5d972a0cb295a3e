/*
 * http.h - the HTTP server (CivetWeb) and what every surface's handlers
 * share: routing, bounded body reading, authentication, the one mapping of
 * error codes to statuses, JSON and SSE responses.
 *
 * CivetWeb runs one worker thread per connection; a struct gh_req lives on
 * that thread for one request and is never shared. Surfaces (http_*.c)
 * register route tables; handlers translate a wire format into engine
 * calls and back, nothing more.
 */
#ifndef GH_HTTP_H
#define GH_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "app.h"
#include "buf.h"
#include "err.h"
#include "policy.h"

struct mg_connection;
struct mg_request_info;
struct gh_http;

enum gh_auth {
	GH_AUTH_NONE,      /* public: /healthz, agent card, admin static files */
	GH_AUTH_KEY,       /* an API key (or an admin session) */
	GH_AUTH_ADMIN      /* an admin: API key with role admin, or an admin session */
};

#define GH_ROUTE_PARAMS 4

struct gh_req {
	struct mg_connection *conn;
	const struct mg_request_info *ri;
	struct gh_app *app;
	char id[32];                      /* request id, also in X-Request-Id */
	const char *method;
	const char *path;
	char *params[GH_ROUTE_PARAMS];    /* ":name" segments, in order */
	struct gh_principal who;
	int authed;
	int session;                      /* authenticated by admin session cookie */
	char *body;                       /* NUL-terminated; NULL when none */
	size_t body_len;
	int responded;
	int status;
	int64_t t0_ns;
	int streaming;                    /* counted in app->active_streams */
	int sock;                         /* client socket once found, -1 unknown */
	/* rate-limit headers for the response (key requests) */
	int rl_set;
	int64_t rl_limit, rl_remaining, rl_reset_s;
	const char *extra_headers;        /* "Name: value\r\n..." added to the response */
	int must_close;                   /* answer with Connection: close, then close */
	/* While hold > 0 (a run's upstream read being handed on, see
	 * gh_http_run_start), what the response writes collects in held and
	 * leaves in one write when the hold ends. */
	int hold;
	struct gh_buf held;
	struct gh_cfg_gen *gen;           /* the config generation it runs under (app.h) */
	/* While the relay thread reads the run's model reply (relay.h),
	 * writes go out without blocking (nb); what the client's socket
	 * cannot take stays in held (behind) until the worker writes it. */
	int nb, behind;
	struct gh_cfg_gen *relay_prev;    /* the relay thread's own pin, during a pass */
};

typedef void (*gh_handler)(struct gh_req *r);

struct gh_route {
	const char *method;               /* "GET", "POST", ... */
	const char *pattern;              /* "/api/agents/:id/generate" */
	enum gh_auth auth;
	gh_handler fn;
};

/* Route tables of each surface, terminated by {NULL}. */
extern const struct gh_route gh_routes_native[];      /* http_native.c */
extern const struct gh_route gh_routes_memory[];      /* http_memory.c */
extern const struct gh_route gh_routes_approvals[];   /* http_approvals.c */
extern const struct gh_route gh_routes_runs[];        /* http_runs.c */
extern const struct gh_route gh_routes_policy[];      /* http_policy.c */
extern const struct gh_route gh_routes_audit[];       /* http_audit.c */
extern const struct gh_route gh_routes_openai[];      /* http_openai.c */
extern const struct gh_route gh_routes_responses[];   /* http_responses.c */
extern const struct gh_route gh_routes_anthropic[];   /* http_anthropic.c */
extern const struct gh_route gh_routes_a2a[];         /* http_a2a.c */
extern const struct gh_route gh_routes_a2a_cards[];   /* http_a2a_card.c */
extern const struct gh_route gh_routes_admin[];       /* http_admin.c */
extern const struct gh_route gh_routes_login[];       /* http_login.c */
extern const struct gh_route gh_routes_mcp_servers[]; /* http_mcp_servers.c */
extern const struct gh_route gh_routes_mcp[];         /* http_mcp.c */
extern const struct gh_route gh_routes_agui[];        /* http_agui.c */
extern const struct gh_route gh_routes_metrics[];     /* http_metrics.c */
extern const struct gh_route gh_routes_notify[];      /* http_notify.c */

/* Where A2A agent cards say gatehouse is: server.public_url, else the
 * address it listens on with port (a wildcard address is announced as
 * loopback). Never anything a request says. */
void gh_a2a_base_url(const struct gh_app *app, int port, char *out, size_t cap);

/* Starts listening (listen "HOST:PORT"; port 0 picks one). When the
 * address cannot be bound, GH_E_IO with "cannot listen on HOST:PORT: "
 * and the system's reason ("Address already in use"). */
enum gh_code gh_http_start(struct gh_app *app, const char *listen, struct gh_http **out,
			   struct gh_err *e);
void gh_http_stop(struct gh_http *h);
int gh_http_port(const struct gh_http *h);

/* ---- responses (each request answers exactly once) ---- */

int gh_http_status_of(enum gh_code code);
void gh_http_json(struct gh_req *r, int status, const cJSON *body);
/* Sends a preformatted body. */
void gh_http_send(struct gh_req *r, int status, const char *content_type, const char *body,
		  size_t len);
void gh_http_error(struct gh_req *r, const struct gh_err *e);
void gh_http_errorf(struct gh_req *r, enum gh_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The request body as a JSON object. GH_E_BADREQ when absent, invalid or
 * not an object. *out owned by the caller. */
enum gh_code gh_http_body_object(struct gh_req *r, cJSON **out, struct gh_err *e);

/* A query parameter, URL-decoded into buf; NULL when absent. */
const char *gh_http_query(struct gh_req *r, const char *name, char *buf, size_t cap);
/* A request header or NULL. */
const char *gh_http_header(struct gh_req *r, const char *name);

/* ---- streaming (SSE) ---- */

/* Takes a stream slot: 0 when granted; else answers 503 + Retry-After and
 * returns -1. The slot is released when the handler returns. */
int gh_http_stream_acquire(struct gh_req *r);
/* Sends the SSE response head (chunked). Returns -1 when the client is gone. */
int gh_http_sse_begin(struct gh_req *r);
/* One event: "data: <data>\n\n" (event type line when type is set), in one
 * write. data must hold no newline (JSON text). */
int gh_http_sse_send(struct gh_req *r, const char *type, const char *data, size_t len);
/* The same with an "id: <id>" line first (id holds no newline; NULL: none),
 * the offset a client resumes from (Last-Event-ID). */
int gh_http_sse_send_id(struct gh_req *r, const char *id, const char *type, const char *data,
			size_t len);
/* A comment line (heartbeat); text is one line. */
int gh_http_sse_comment(struct gh_req *r, const char *text);
/* Ends the chunked body. */
void gh_http_sse_end(struct gh_req *r);

/* 1 when the client has closed its side of the connection (checked without
 * blocking; cheap enough to call every few milliseconds). */
int gh_http_client_gone(struct gh_req *r);

/* The client's socket, or 0 when it cannot be found. */
int gh_http_client_fd(struct gh_req *r);

/* ---- one streamed response: what every SSE surface shares ---- */

/* An SSE response in progress: when it last wrote (for heartbeats), and
 * whether the client went away. Lives on the handler's stack. */
struct gh_http_stream {
	struct gh_req *r;
	int64_t last_write_ns;
	int begun;                        /* the head went out */
	int gone;                         /* the client left (or a write failed) */
	/* Optional: sends the head and whatever a surface opens its stream
	 * with; called by the first send or heartbeat. Default: the SSE head.
	 * Nonzero: the client is gone. */
	int (*open)(struct gh_http_stream *s, void *ud);
	void *ud;
};

/* Takes a stream slot (answers 503 and returns -1 when refused) and sets
 * s up; nothing is sent yet. */
int gh_http_stream_start(struct gh_req *r, struct gh_http_stream *s);
/* Sends the head now (once). -1 when the client is gone. */
int gh_http_stream_begin(struct gh_http_stream *s);
/* One SSE event (the head first when it has not gone out). -1 when the
 * client is gone. */
int gh_http_stream_send(struct gh_http_stream *s, const char *type, const char *data,
			size_t len);
/* One SSE event with an "id:" line (gh_http_sse_send_id). -1 when the
 * client is gone. */
int gh_http_stream_send_id(struct gh_http_stream *s, const char *id, const char *data,
			   size_t len);
/* One SSE event holding o as JSON text; takes o. -1 when the client is
 * gone (or out of memory). */
int gh_http_stream_json(struct gh_http_stream *s, const char *type, cJSON *o);
/* A comment line (after the head). -1 when the client is gone. */
int gh_http_stream_comment(struct gh_http_stream *s, const char *text);
/* What a stream does while it waits: notices a client that left, and
 * sends a keep-alive comment when nothing went out for server.heartbeat_ms
 * (the head first when it has not gone out). Nonzero: the client is gone. */
int gh_http_stream_tick(struct gh_http_stream *s);
/* From here on, what the stream writes waits and leaves with its end, in
 * one write (a stream's closing events). */
void gh_http_stream_hold(struct gh_http_stream *s);
/* Ends the body, after "data: [DONE]" when done_marker, unless the client
 * is gone. */
void gh_http_stream_end(struct gh_http_stream *s, int done_marker);

/* Follows a hub subscription on a begun stream until the client leaves,
 * the server stops or on_event returns nonzero: each event to on_event;
 * on_lost when events were lost (the watcher sends a fresh snapshot;
 * nonzero stops); on_idle (may be NULL) between events at least every
 * 100 ms (nonzero stops). Heartbeats as gh_http_stream_tick. */
struct gh_hub_sub;
void gh_http_stream_follow(struct gh_http_stream *s, struct gh_hub_sub *sub,
			   int (*on_event)(void *ud, const char *type, const char *data),
			   int (*on_lost)(void *ud), int (*on_idle)(void *ud), void *ud);

/* For a stream's run sink: the client's socket as the wake descriptor (its
 * hang-up runs the tick at once) and how often the tick must run anyway
 * (a quarter of server.heartbeat_ms, for heartbeats). */
void gh_http_stream_wake(struct gh_req *r, int *wake_fd, int64_t *tick_ms);

/* The start the surfaces that run the engine share: when stream, takes a
 * stream slot (-1 after answering 503; nothing is sent yet) whose head
 * open (NULL: the SSE head) sends; then points sink at the surface's
 * event and tick (tick only when streamed) with ud, and wakes a streamed
 * run's ticks on the client's socket (gh_http_stream_wake). */
struct gh_run_event;
struct gh_run_sink;
int gh_http_run_start(struct gh_req *r, int stream, struct gh_http_stream *hs,
		      int (*open)(struct gh_http_stream *s, void *ud),
		      int (*event)(void *ud, const struct gh_run_event *ev),
		      int (*tick)(void *ud), void *ud, struct gh_run_sink *sink);

/* ---- chunked downloads (exports) ---- */

/* Takes a stream slot and sends a 200 head with content_type, chunked,
 * plus extra_headers ("Name: value\r\n..." or NULL). -1 when refused
 * (answered) or the client is gone. */
int gh_http_chunked_begin(struct gh_req *r, const char *content_type, const char *extra_headers);
/* One chunk; -1 when the client is gone. */
int gh_http_chunked_write(struct gh_req *r, const char *data, size_t len);
/* Ends the body: the terminating chunk, so the client knows it has all. */
void gh_http_chunked_end(struct gh_req *r);
/* Ends the body as a failure the client can see: no terminating chunk, and
 * the connection is closed, so the download is visibly truncated. */
void gh_http_chunked_abort(struct gh_req *r);

#endif
