/*
 * app.h - the running gateway's shared state, created by `serve` and
 * handed to every surface and to the run engine.
 *
 * Everything here is either immutable after start (config, keys) or
 * thread-safe by itself (store, rate limiter, hub). Owned by main.
 */
#ifndef GH_APP_H
#define GH_APP_H

#include <stdatomic.h>
#include <stdint.h>

#include "audit.h"
#include "config.h"
#include "store.h"

struct gh_ratelimit;
struct gh_hub;
struct gh_bg;
struct gh_mcp;
struct gh_audit_health;
struct gh_mcp_sessions;

struct gh_app {
	const struct gh_config *cfg;
	struct gh_store *store;
	struct gh_ratelimit *rl;
	struct gh_hub *hub;                   /* live events for SSE watchers; may be NULL */
	struct gh_bg *bg;                     /* background work: resuming runs, expiry, ... */
	struct gh_mcp *mcp;                   /* upstream MCP servers' tools; NULL when none */
	unsigned char hashkey[32];            /* API key hashing secret */
	struct gh_audit_signer signer;
	int has_signer;
	struct gh_audit_health *audit;        /* the chain's state (audit_health.h); may be NULL */
	int read_only;                        /* serving reads only: every write is refused */
	const char *listen;                   /* HOST:PORT served, as given (port may be 0) */
	int64_t started_ms;
	struct gh_mcp_sessions *mcp_sessions; /* MCP clients' sessions at /mcp (http.c) */
	_Atomic int active_streams;
	_Atomic int stopping;
	const char *config_path;              /* the config file serve was started with */
};

#endif
