/*
 * store_mcp.h - what gatehouse remembers about upstream MCP servers: the
 * pinned definition of each of their tools (and a changed one waiting for
 * an admin), and each upstream's last known state.
 *
 * Every function is thread-safe (reads on the reader pool, writes through
 * the store's writer; the CLI writes inline under the writer lock). Pins
 * are keyed by (server, tool): the config's server name and the
 * upstream's own tool name.
 */
#ifndef GH_STORE_MCP_H
#define GH_STORE_MCP_H

#include <stdint.h>

#include "audit.h"
#include "err.h"
#include "store.h"

#define GH_MCP_PIN_TOOL_MAX 129

struct gh_mcp_pin {
	char server[GH_NAME_MAX + 1];
	char tool[GH_MCP_PIN_TOOL_MAX];
	char digest[65];                  /* the accepted definition's */
	char *definition;                 /* owned: its canonical JSON */
	int64_t pinned_at, accepted_at;
	char accepted_by[GH_NAME_MAX + 16]; /* "" when pinned at first sight */
	char pending_digest[65];          /* "" when none */
	char *pending_definition;         /* owned or NULL */
	int64_t pending_since;
	char pending_status[16];          /* "", "held" or "rejected" */
	char rejected_by[GH_NAME_MAX + 16];
};
/* Frees what p owns and zeroes it. */
void gh_mcp_pin_clear(struct gh_mcp_pin *p);

/* GH_E_NOTFOUND when (server, tool) has no pin. */
enum gh_code gh_store_mcp_pin_get(struct gh_store *s, const char *server, const char *tool,
				  struct gh_mcp_pin *out, struct gh_err *e);
/* Every pin of server (NULL: of every server), by server then tool; fn
 * returns nonzero to stop. The pin is borrowed until fn returns. */
enum gh_code gh_store_mcp_pin_list(struct gh_store *s, const char *server,
				   int (*fn)(void *ud, const struct gh_mcp_pin *p), void *ud,
				   struct gh_err *e);

/* Pins a tool seen for the first time and appends ev (its audit row) in
 * the same transaction. GH_E_CONFLICT when it is pinned already. */
enum gh_code gh_store_mcp_pin_insert(struct gh_store *s, const char *server, const char *tool,
				     const char *digest, const char *definition,
				     const struct gh_audit_event *ev, struct gh_err *e);

/* Records that the upstream now offers another definition (digest,
 * definition) than the accepted one (expect_digest): the tool is held.
 * Appends ev in the same transaction. GH_E_CONFLICT when the pin's
 * accepted digest is no longer expect_digest or this very definition is
 * already pending (nothing is written then). */
enum gh_code gh_store_mcp_pin_hold(struct gh_store *s, const char *server, const char *tool,
				   const char *expect_digest, const char *digest,
				   const char *definition, const struct gh_audit_event *ev,
				   struct gh_err *e);

/* The upstream offers the accepted definition again: forgets the pending
 * one. No-op when there is none. */
enum gh_code gh_store_mcp_pin_unhold(struct gh_store *s, const char *server, const char *tool,
				     struct gh_err *e);

/* An admin's decision on the pending definition: accept makes it the
 * pinned one; reject keeps the old pin and marks the pending definition
 * rejected (the tool stays held while the upstream offers it). by is the
 * actor ("admin:alice", "cli"). expect_digest, when not NULL, must be the
 * pending digest (so an admin accepts exactly what they reviewed). Appends
 * ev in the same transaction. GH_E_NOTFOUND without a pin; GH_E_CONFLICT
 * when nothing is pending, the pending digest differs, or (reject) it is
 * rejected already. */
enum gh_code gh_store_mcp_pin_decide(struct gh_store *s, const char *server, const char *tool,
				     const char *expect_digest, int accept, const char *by,
				     const struct gh_audit_event *ev, struct gh_err *e);

/* An upstream's state as the running server last recorded it. */
struct gh_mcp_server_row {
	char name[GH_NAME_MAX + 1];
	char transport[8];
	char state[16];
	char last_error[512];
	int64_t next_retry_at;            /* 0 = none */
	char session[256];
	char protocol_version[32];
	char server_info[200];
	int64_t tools;
	int64_t connected_at;             /* 0 = never */
	int64_t updated_at;
};

/* Records r without waiting (fire and forget). */
void gh_store_mcp_server_put(struct gh_store *s, const struct gh_mcp_server_row *r);
/* Every recorded upstream by name; fn returns nonzero to stop. */
enum gh_code gh_store_mcp_server_list(struct gh_store *s,
				      int (*fn)(void *ud, const struct gh_mcp_server_row *r),
				      void *ud, struct gh_err *e);

#endif
