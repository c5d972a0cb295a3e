/*
 * app.h - the running gateway's shared state, created by `serve` and
 * handed to every surface and to the run engine.
 *
 * Everything here is either immutable after start (keys, signer) or
 * thread-safe by itself (store, rate limiter, hub). The config and what is
 * built from it (the upstream MCP servers) come in generations that a
 * reload replaces (app_cfg.c): read them with gh_app_cfg and gh_app_mcp
 * inside a pinned scope. Owned by main.
 */
#ifndef GH_APP_H
#define GH_APP_H

#include <pthread.h>
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
struct gh_notify;

/* One generation of the running config and what was built from it. A
 * request or background run holds a reference for its whole life, so it
 * finishes under the config it started with; a reload installs a new
 * generation and the old one is freed when its last reference goes. */
struct gh_cfg_gen {
	_Atomic long refs;
	uint64_t n;                     /* 1 at start, +1 per applied reload */
	const struct gh_config *cfg;
	struct gh_config *owned_cfg;    /* freed with the generation; NULL: borrowed */
	struct gh_mcp *mcp;             /* upstream MCP servers; NULL when none */
	struct gh_mcp *owned_mcp;       /* stopped with the generation; NULL: shared */
	struct gh_cfg_gen *mcp_from;    /* the generation mcp is shared from (a
					 * reference held), or NULL */
	char digest[65];                /* hex BLAKE2b-256 of the config text */
};

struct gh_app {
	const struct gh_config *boot_cfg;     /* the config served at start; read the
					       * current one with gh_app_cfg */
	struct gh_store *store;
	struct gh_ratelimit *rl;
	struct gh_hub *hub;                   /* live events for SSE watchers; may be NULL */
	struct gh_bg *bg;                     /* background work: resuming runs, expiry, ... */
	struct gh_replica *replica;           /* PostgreSQL: what replicas share (replica.h);
					       * NULL on SQLite */
	struct gh_mcp *boot_mcp;              /* the MCP servers started with boot_cfg; read
					       * the current ones with gh_app_mcp */
	unsigned char hashkey[32];            /* API key hashing secret */
	struct gh_audit_signer signer;
	int has_signer;
	struct gh_audit_health *audit;        /* the chain's state (audit_health.h); may be NULL */
	int read_only;                        /* serving reads only: every write is refused */
	const char *listen;                   /* HOST:PORT served, as given (port may be 0) */
	const char *db_override;              /* serve --db (wins over database.path), or NULL */
	int64_t started_ms;
	struct gh_mcp_sessions *mcp_sessions; /* MCP clients' sessions at /mcp (http.c) */
	_Atomic int active_streams;
	_Atomic int stopping;
	struct gh_notify *notify;             /* approval notifications (notify.h); may be NULL */
	/* the current generation (app_cfg.c); NULL in tests that set boot_cfg
	 * and mcp only */
	pthread_mutex_t gen_mu;               /* held to add a reference to gen */
	struct gh_cfg_gen *_Atomic gen;
	int gen_inited;
	const char *config_path;              /* the config file serve was started with */
};

/* Installs the first generation: cfg is borrowed (it outlives the app),
 * mcp is taken over (stopped when the generation goes: at a reload that
 * replaces the MCP servers, or at gh_app_cfg_fini), digest is the config
 * text's (may be ""). 0, or -1 out of memory (mcp is then the caller's). */
int gh_app_cfg_init(struct gh_app *app, const struct gh_config *cfg, struct gh_mcp *mcp,
		    const char *digest);
/* Drops the app's reference to its generation (at shutdown, after every
 * request and background run ended). */
void gh_app_cfg_fini(struct gh_app *app);

/* The current generation with one more reference (caller releases), or
 * NULL when the app has none. One mutex-protected load and an atomic
 * increment. */
struct gh_cfg_gen *gh_app_cfg_acquire(struct gh_app *app);
/* Drops a reference; the last one frees the generation (stopping its own
 * MCP servers). NULL is a no-op. */
void gh_app_cfg_release(struct gh_cfg_gen *g);

/* Installs g (the app takes over the caller's reference) as the current
 * generation; the previous one lives until its last holder releases it. */
void gh_app_cfg_swap(struct gh_app *app, struct gh_cfg_gen *g);

/* Pins g for the calling thread: until gh_app_cfg_leave, gh_app_cfg and
 * gh_app_mcp on this thread read g. Returns what was pinned before (to
 * hand to gh_app_cfg_leave); nests. The caller keeps its reference. */
struct gh_cfg_gen *gh_app_cfg_enter(struct gh_cfg_gen *g);
void gh_app_cfg_leave(struct gh_cfg_gen *prev);

/* The config (and MCP servers) this thread runs under: its pinned
 * generation; without one, the current generation's (borrowed only until
 * the next reload: every thread that serves requests or runs pins one), or
 * boot_cfg/mcp when the app has no generation. */
const struct gh_config *gh_app_cfg(const struct gh_app *app);
struct gh_mcp *gh_app_mcp(const struct gh_app *app);

#endif
