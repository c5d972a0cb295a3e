/*
 * mcp_int.h - between the MCP client's manager (mcp.c) and its two
 * transports (mcp_stdio.c: a child process; mcp_http.c: Streamable
 * HTTP). Not for use outside the MCP client.
 *
 * A connection (struct mcp_conn) is one live session with an upstream: a
 * running child, or an HTTP session. It is reference-counted: the
 * upstream's supervisor thread holds one reference while it is current,
 * and every call in flight holds one, so a connection that dies or is
 * replaced stays valid memory until its last call has returned. A
 * connection never reconnects itself; the supervisor makes a new one.
 *
 * Threading: request() and notify() may be called from any number of
 * threads at once; close() is called once, by the supervisor, after which
 * requests fail at once. Events are delivered on the transport's own
 * thread (stdio: its reader; http: its stream listener, or the thread
 * whose request's reply carried them) and must not block.
 */
#ifndef GH_MCP_INT_H
#define GH_MCP_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"
#include "mcp_proto.h"

/* What a connection tells its upstream, from the transport's threads. */
struct mcp_events {
	/* a notification that is not the progress of a request in flight
	 * (notifications/tools/list_changed, log messages, ...) */
	void (*notify)(void *ud, const struct gh_mcp_msg *m);
	/* the server asks gatehouse something (ping, ...); answered with
	 * mcp_conn_ops.respond, from another thread */
	void (*request)(void *ud, const struct gh_mcp_msg *m);
	/* the connection is gone (the child exited, the session ended);
	 * why is for people */
	void (*closed)(void *ud, const char *why);
	void *ud;
};

/* How one request waits. */
struct mcp_req_opts {
	int64_t timeout_ms;                   /* the whole request; > 0 */
	/* nonzero: the caller went away (the request then fails with
	 * GH_E_CANCELLED); called at least every 50 ms, or every tick_ms
	 * with a wake descriptor (see upstream.h) */
	int (*tick)(void *ud);
	int wake_fd;
	int64_t tick_ms;
	/* a notifications/progress for this request (its token is the
	 * request's id), on the waiting thread */
	void (*progress)(void *ud, const struct gh_mcp_progress *p);
	void *ud;
};

struct mcp_conn;

struct mcp_conn_ops {
	/* Sends request id and waits for its answer: *reply is a RESPONSE or
	 * an ERROR message (the caller clears it). GH_E_TIMEOUT, GH_E_CANCELLED
	 * (tick), GH_E_NOTFOUND (http: the session ended: renew and retry),
	 * GH_E_UPSTREAM (the connection failed: e names how). */
	enum gh_code (*request)(struct mcp_conn *c, int64_t id, const char *method,
				const cJSON *params, const struct mcp_req_opts *o,
				struct gh_mcp_msg *reply, struct gh_err *e);
	/* Sends a notification (no answer). */
	enum gh_code (*notify)(struct mcp_conn *c, const char *method, const cJSON *params,
			       int64_t timeout_ms, struct gh_err *e);
	/* Answers a request of the server's: body is a whole JSON-RPC
	 * response (mcp_proto.h builders). */
	enum gh_code (*respond)(struct mcp_conn *c, const char *body, size_t len,
				struct gh_err *e);
	/* After initialize: the revision agreed (http sends it as
	 * MCP-Protocol-Version on every later message, from
	 * notifications/initialized on). */
	void (*agreed)(struct mcp_conn *c, const char *version);
	/* After notifications/initialized: whatever the transport listens on
	 * by itself starts (http: the GET stream). */
	void (*listen)(struct mcp_conn *c);
	/* Ends the session (stdio: close stdin, SIGTERM, SIGKILL, each after
	 * a bounded wait; http: DELETE), stops the transport's threads, and
	 * says in why (cap bytes) how it ended ("" when nothing to say). */
	void (*close)(struct mcp_conn *c, char *why, size_t cap);
	/* Frees the connection (the last reference is gone). */
	void (*destroy)(struct mcp_conn *c);
};

struct mcp_conn {
	const struct mcp_conn_ops *ops;
	_Atomic int refs;
	/* the session as audit rows name it: "Mcp-Session-Id <id>" or
	 * "pid <n>"; written before the connection is shared */
	char session[300];
	/* which of its upstream's connections this is (1, 2, ...): set before
	 * the connection is shared; a renewal waits for a newer one (a new
	 * connection may reuse a freed one's address) */
	uint64_t gen;
	_Atomic int dead;                     /* requests fail at once */
	_Atomic int failing;                  /* claimed by the one mcp_conn_fail that wins */
	char why[256];                        /* how it died: written once, before dead is
					       * set; read only once dead is seen */
};

/* Marks the connection dead, saying why (the first reason wins). 1 when
 * this call did it. */
static inline int mcp_conn_fail(struct mcp_conn *c, const char *why)
{
	size_t i;

	if (atomic_exchange(&c->failing, 1))
		return 0;
	for (i = 0; why && why[i] && i + 1 < sizeof(c->why); i++)
		c->why[i] = why[i];
	c->why[i] = '\0';
	atomic_store(&c->dead, 1);
	return 1;
}

static inline void mcp_conn_ref(struct mcp_conn *c)
{
	atomic_fetch_add(&c->refs, 1);
}

static inline void mcp_conn_unref(struct mcp_conn *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		c->ops->destroy(c);
}

/* Starts the child of a stdio server (conf borrowed for the connection's
 * life). On failure e says why ("cannot start \"node\": No such file or
 * directory"). The connection starts with one reference. */
enum gh_code mcp_stdio_open(const struct gh_mcp_server_conf *conf, const struct mcp_events *ev,
			    struct mcp_conn **out, struct gh_err *e);

/* A Streamable HTTP session (nothing is sent until the first request;
 * initialize keeps the session id the server gives). */
enum gh_code mcp_http_open(const struct gh_mcp_server_conf *conf, const struct mcp_events *ev,
			   struct mcp_conn **out, struct gh_err *e);

/* A line of an upstream's output made safe for gatehouse's log: control
 * characters become spaces, at most cap - 1 bytes. */
void mcp_log_safe(const char *in, size_t n, char *out, size_t cap);

/* What either transport does with a message that is neither an answer
 * to one of its requests nor a progress notification: notifications and
 * server requests go to ev, anything else is logged as not JSON-RPC
 * (what: "something", "a line on stdout"). */
void mcp_msg_other(const struct gh_mcp_server_conf *conf, const struct mcp_events *ev,
		   struct gh_mcp_msg *m, const char *what);

#endif
