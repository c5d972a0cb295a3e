/*
 * mcp_sessions.h - the sessions of MCP clients at /mcp (2025-06-18 and
 * 2025-11-25): which key opened each, the revision it speaks and what the
 * client can do.
 *
 * Sessions live in memory only, so a restart ends every one of them (their
 * clients get 404 and initialize again). Ids are 256-bit random values;
 * a session belongs to the key that opened it and to no other. Each key
 * holds at most per_key sessions (a new one ends the key's least recently
 * used) and a session unused for idle_ms ends. Thread-safe (one mutex).
 */
#ifndef GH_MCP_SESSIONS_H
#define GH_MCP_SESSIONS_H

#include <stdint.h>

#include "err.h"
#include "store.h"
#include "util.h"

#define GH_MCP_SID_MAX 72               /* "mcps_" + 64 hex digits + NUL */

struct gh_mcp_sessions;

struct gh_mcp_session {
	char id[GH_MCP_SID_MAX];
	char key_id[GH_ID_MAX];
	char agent_id[GH_NAME_MAX + 1];
	char version[16];                   /* the negotiated revision */
	int elicit_form;                    /* the client declared form elicitation */
	int initialized;                    /* notifications/initialized arrived */
	int64_t created_ms, used_ms;
};

/* NULL when out of memory. */
struct gh_mcp_sessions *gh_mcp_sessions_new(int64_t per_key, int64_t idle_ms);
void gh_mcp_sessions_free(struct gh_mcp_sessions *s);

/* Opens a session for key_id; *out gets a copy (its id included).
 * GH_E_NOMEM, or GH_E_UNAVAILABLE when the table is full of other keys'
 * sessions. */
enum gh_code gh_mcp_sessions_open(struct gh_mcp_sessions *s, const char *key_id,
				  const char *agent_id, const char *version, int elicit_form,
				  struct gh_mcp_session *out, struct gh_err *e);

/* The session id of key_id, touched (its idle time starts again); a copy
 * in *out. -1 when there is none: unknown, ended, idle too long, or
 * another key's. */
int gh_mcp_sessions_get(struct gh_mcp_sessions *s, const char *id, const char *key_id,
			struct gh_mcp_session *out);

/* Marks the session initialized (notifications/initialized). */
void gh_mcp_sessions_initialized(struct gh_mcp_sessions *s, const char *id);

/* Ends session id of key_id. -1 when there was none. */
int gh_mcp_sessions_end(struct gh_mcp_sessions *s, const char *id, const char *key_id);

/* Ends every session of key_id (its key was revoked); returns how many. */
int gh_mcp_sessions_end_key(struct gh_mcp_sessions *s, const char *key_id);

/* How many sessions are open (for tests and /healthz). */
int gh_mcp_sessions_count(struct gh_mcp_sessions *s);

#endif
