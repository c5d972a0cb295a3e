/*
 * mcp.h - upstream MCP servers as governed server tools: gatehouse's MCP
 * client.
 *
 * Each server in the config's mcp_servers is one upstream, reached over
 * stdio (a child gatehouse starts) or Streamable HTTP (a URL). A
 * supervisor thread per upstream connects (initialize, initialized),
 * lists its tools (every page; again on notifications/tools/list_changed),
 * pins each tool's definition and publishes the upstream's catalog; when
 * the connection fails it reports the upstream failing and reconnects
 * with backoff, and one failing upstream never touches another.
 *
 * A federated tool is exposed as prefix + the upstream's name (at most 64
 * characters of [A-Za-z0-9_-]); a name another tool already has is never
 * shadowed: the later tool is not offered and the collision is logged
 * (at start, gh_mcp_start fails naming both). Its description,
 * inputSchema, outputSchema and annotations are kept as the upstream gave
 * them.
 *
 * Pinning: the SHA-256 of each tool's definition is recorded when first
 * seen (store_mcp.h, audited "mcp_tool_pinned"); a later different
 * definition is recorded and audited ("mcp_tool_changed") and the tool is
 * held (not offered, calls refused with the reason) until an admin
 * accepts it ("mcp_tool_accepted"), from the admin UI or the CLI, which
 * the running server notices within two seconds.
 *
 * Threading: gh_mcp_start and gh_mcp_stop run on the main thread; every
 * other function is thread-safe. Tools are immutable once published and
 * reference-counted: a run keeps the tools it was offered for its whole
 * life, whatever the upstream does meanwhile.
 */
#ifndef GH_MCP_H
#define GH_MCP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"
#include "mcp_proto.h"
#include "store.h"

struct gh_mcp;
struct mcp_upstream;

/* One federated tool as published. Every field is fixed once published. */
struct gh_mcp_tool {
	_Atomic int refs;
	char name[GH_MCP_NAME_MAX + 1];          /* as exposed ("" when it has none) */
	const char *server;                      /* the config's server name */
	char upstream_name[GH_MCP_UPSTREAM_NAME_MAX + 1];
	struct gh_mcp_tool_def def;              /* def.def NULL: the definition was refused */
	char pin[12];                            /* "pinned", "held", "rejected" or "none" */
	char blocked[1024];                      /* "" when offered; else why it is not */
	int collision;                           /* blocked because of its name */
	struct mcp_upstream *up;
};

void gh_mcp_tool_ref(struct gh_mcp_tool *t);
/* Drops a reference; NULL is a no-op. */
void gh_mcp_tool_unref(struct gh_mcp_tool *t);

/* Starts a supervisor per configured upstream and waits (each at most its
 * connect_timeout_ms, all at once) for their first connection and tool
 * list. An upstream that cannot be reached is not an error: it goes on
 * reconnecting and its tools (known from earlier runs' pins) are reported
 * unavailable. A name collision is (GH_E_BADREQ naming both tools), and
 * everything started is stopped again. store is borrowed for the life of
 * the manager. *out is NULL when the config has no mcp_servers. */
enum gh_code gh_mcp_start(const struct gh_config *cfg, struct gh_store *store,
			  struct gh_mcp **out, struct gh_err *e);

/* Ends every session (stdio: close stdin, SIGTERM, SIGKILL, each after a
 * bounded wait; http: DELETE) and joins every thread. NULL is a no-op.
 * Calls still in flight fail; no tool reference may outlive this. */
void gh_mcp_stop(struct gh_mcp *m);

/* Every published tool of every upstream (blocked ones too), in config
 * order: *out is an array of references (gh_mcp_tools_free). NULL m gives
 * none. Returns the count, or -1 on OOM. */
long gh_mcp_tools(struct gh_mcp *m, struct gh_mcp_tool ***out);
void gh_mcp_tools_free(struct gh_mcp_tool **v, long n);

/* The published tool named name, referenced (caller unrefs), or NULL. */
struct gh_mcp_tool *gh_mcp_tool_find(struct gh_mcp *m, const char *name);

/* How a call waits; every member may be 0/NULL. */
struct gh_mcp_call_opts {
	int (*tick)(void *ud);      /* nonzero: the caller went away: the upstream call is
				     * cancelled (notifications/cancelled) */
	int wake_fd;                /* with tick, as upstream.h describes */
	int64_t tick_ms;
	/* a progress notification of the call, on the calling thread */
	void (*progress)(void *ud, double progress, double total, const char *message);
	void *ud;
};

/* Calls tool t with args (already validated against its inputSchema by
 * the gate). GH_OK with *result whenever the model should hear about it:
 * the upstream's result ({content, structuredContent?, isError?} as it
 * sent them; *is_error = isError), or a tool error ({error, content,
 * isError: true}) when the tool is held, the upstream is unavailable,
 * busy past the timeout, timed out, died during the call or answered
 * badly. GH_E_CANCELLED when tick asked to stop (the upstream was told).
 * session (cap bytes) gets the upstream session the call went to ("" when
 * none). *result owned by the caller. */
enum gh_code gh_mcp_call(struct gh_mcp *m, struct gh_mcp_tool *t, const cJSON *args,
			 const struct gh_mcp_call_opts *o, cJSON **result, int *is_error,
			 char *session, size_t cap, struct gh_err *e);

/* {servers:[{name, transport, state, lastError, nextRetryAt, retryInMs,
 * session, protocolVersion, serverInfo, connectedAt, failures, inflight,
 * calls, callErrors, tools, offered, available, held}]} for the admin API;
 * public_view (/healthz, no authentication) keeps name, transport, state,
 * nextRetryAt, retryInMs and the counts, nothing an upstream said. *degraded
 * (may be NULL) is set when an upstream is not connected. Caller frees. */
cJSON *gh_mcp_status_json(struct gh_mcp *m, int public_view, int *degraded);

/* The tools of server with their pins, for the admin page: {server,
 * tools:[{name, upstreamName, title, description, annotations,
 * inputSchema, outputSchema, digest, available, reason, approvalDefault,
 * pin:{status, digest, pinnedAt, acceptedAt, acceptedBy, pendingDigest,
 * pendingSince, rejectedBy, acceptedDefinition, offeredDefinition}}]}.
 * GH_E_NOTFOUND for an unknown server. */
enum gh_code gh_mcp_server_tools_json(struct gh_mcp *m, const char *server, cJSON **out,
				      struct gh_err *e);

/* Who decides on a held tool, for the pin and the audit row. */
struct gh_mcp_actor {
	const char *admin_user;     /* an admin UI user, "cli", or NULL (an API key) */
	const char *key_id;         /* the admin API key, or NULL */
	const char *by;             /* recorded on the pin: "admin:alice", "key:…", "cli" */
	const char *via;            /* "web", "api" or "cli" (detail.via) */
};

/* An admin's decision on a held tool's changed definition (tool: the
 * upstream's name or the exposed one; digest: the pending definition the
 * admin reviewed, or NULL), written to the store with its audit row
 * (mcp_tool_accepted / mcp_tool_rejected). Works without a running
 * manager (the CLI): conf is the server's config. */
enum gh_code gh_mcp_pin_decide(struct gh_store *s, const struct gh_mcp_server_conf *conf,
			       const char *tool, const char *digest, int accept,
			       const struct gh_mcp_actor *who, struct gh_err *e);

/* The same from the running server: the upstream republishes its tools at
 * once. */
enum gh_code gh_mcp_decide(struct gh_mcp *m, const char *server, const char *tool,
			   const char *digest, int accept, const struct gh_mcp_actor *who,
			   struct gh_err *e);

/* What a tool's annotations mean for approval by default, for people:
 * "required (destructiveHint true)", "not required (readOnlyHint true)",
 * ... */
const char *gh_mcp_hint_text(enum gh_mcp_hint h);

#endif
