/*
 * reload.h - live reload: re-reads the running config's file, validates
 * it, and installs it as the next config generation (app.h) so requests
 * that arrive from then on run under it, while requests and runs in
 * flight finish under the generation they started with.
 *
 * What cannot change while serving (the listener, the database and its
 * settings, the key files, the audit witness and checkpoint cadence, the
 * HTTP server's threads and timeouts, MCP session limits) keeps its
 * running value and is reported as needing a restart. Upstream MCP servers
 * are started anew when mcp_servers or tools changed (the old ones stop
 * when the last request using them ends) and kept otherwise.
 *
 * Every attempt, applied or refused, is audited ("config_reload") with the
 * BLAKE2b-256 digest of the file's text, and logged. Reloads are
 * serialised; callable from any thread that holds no generation pinned
 * that it needs freed.
 */
#ifndef GH_RELOAD_H
#define GH_RELOAD_H

#include <cjson/cJSON.h>

#include "app.h"
#include "err.h"

struct gh_reload_opts {
	const char *via;        /* "signal" or "api": detail.via */
	const char *actor;      /* who asked ("admin:NAME", "key:ID"), or NULL */
	const char *db_override; /* serve --db: database.path stays this, or NULL */
};

/* Reloads. On success returns GH_OK and *out (caller frees):
 *   {"ok":true,"digest":"<64 hex>","generation":N,"changed":["policies.default",...],
 *    "restart_required":["server.listen",...]}
 * ("changed" empty and generation unchanged when the text is the running
 * text). A refused config returns GH_E_BADREQ with the validation error
 * (naming the file and the JSON path) in e, *out NULL, and the running
 * config stays; GH_E_NOMEM or GH_E_INTERNAL (MCP servers that would not
 * start) likewise. */
enum gh_code gh_reload(struct gh_app *app, const struct gh_reload_opts *o, cJSON **out,
		       struct gh_err *e);

/* BLAKE2b-256 of path's text in hex (out[65]); "" when unreadable. */
void gh_reload_digest_file(const char *path, char out[65]);

/* Files beside the database (database.path + suffix) through which
 * `gatehouse reload` signals serve and reads the outcome. */
#define GH_RELOAD_PID_SUFFIX ".pid"
#define GH_RELOAD_STATUS_SUFFIX ".reload.json"

/* Applies c's log settings (format; level unless GH_LOG is set): at start
 * and by each reload. */
void gh_reload_apply_log(const struct gh_config *c);

#endif
