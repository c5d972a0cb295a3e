/*
 * reload.c - live reload of the config; see reload.h.
 *
 * One reload at a time (a process-wide mutex): the SIGHUP handler on the
 * main thread and POST /api/admin/reload on a worker may race.
 */
#include "reload.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "admin_audit.h"
#include "buf.h"
#include "json.h"
#include "log.h"
#include "mcp.h"
#include "policy.h"
#include "util.h"

#define RELOAD_MAX_BYTES (16 * 1024 * 1024) /* as gh_config_load */

static pthread_mutex_t reload_mu = PTHREAD_MUTEX_INITIALIZER;

/* path's text into b (bounded). */
static enum gh_code read_text(const char *path, struct gh_buf *b, struct gh_err *e)
{
	FILE *f = fopen(path, "rb");
	char chunk[8192];
	size_t n;
	enum gh_code rc = GH_OK;

	if (!f)
		return gh_err_set(e, GH_E_BADREQ, "%s: cannot open: %s", path, strerror(errno));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (gh_buf_append(b, chunk, n) != GH_BUF_OK) {
			rc = gh_err_set(e, GH_E_BADREQ, "%s: larger than %d bytes", path,
					RELOAD_MAX_BYTES);
			break;
		}
	if (rc == GH_OK && ferror(f))
		rc = gh_err_set(e, GH_E_BADREQ, "%s: read error", path);
	fclose(f);
	return rc;
}

static void digest_hex(const char *text, size_t len, char out[65])
{
	unsigned char h[32];

	crypto_generichash(h, sizeof(h), (const unsigned char *)text, len, NULL, 0);
	gh_hex(h, sizeof(h), out);
}

void gh_reload_digest_file(const char *path, char out[65])
{
	struct gh_buf b;
	struct gh_err e;

	out[0] = '\0';
	gh_buf_init(&b, RELOAD_MAX_BYTES);
	if (read_text(path, &b, &e) == GH_OK)
		digest_hex(b.data ? b.data : "", b.len, out);
	gh_buf_free(&b);
}

/* ------------------------------------------------- what changed, and how */

static int map_section(const char *name)
{
	static const char *const maps[] = {"providers", "agents", "tools", "policies",
					   "mcp_servers", NULL};
	size_t i;

	for (i = 0; maps[i]; i++)
		if (!strcmp(name, maps[i]))
			return 1;
	return 0;
}

static void add_name(cJSON *arr, const char *a, const char *b)
{
	char s[300];

	snprintf(s, sizeof(s), "%s%s%s", a, b ? "." : "", b ? b : "");
	cJSON_AddItemToArray(arr, cJSON_CreateString(s));
}

/* Names what differs between two config documents: a section, or for the
 * named maps each entry ("policies.default"). Names only, never values
 * (the documents hold substituted secrets). */
static void diff_section(cJSON *changed, const char *name, const cJSON *o, const cJSON *n)
{
	const cJSON *it;

	if (o && n && cJSON_Compare(o, n, 1))
		return;
	if (!map_section(name) || !cJSON_IsObject(o) || !cJSON_IsObject(n)) {
		add_name(changed, name, NULL);
		return;
	}
	for (it = o->child; it; it = it->next) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(n, it->string);

		if (!m || !cJSON_Compare(it, m, 1))
			add_name(changed, name, it->string);
	}
	for (it = n->child; it; it = it->next)
		if (!cJSON_GetObjectItemCaseSensitive(o, it->string))
			add_name(changed, name, it->string);
}

static void diff_roots(cJSON *changed, const cJSON *o, const cJSON *n)
{
	const cJSON *it;

	for (it = o->child; it; it = it->next)
		diff_section(changed, it->string, it,
			     cJSON_GetObjectItemCaseSensitive(n, it->string));
	for (it = n->child; it; it = it->next)
		if (!cJSON_GetObjectItemCaseSensitive(o, it->string))
			diff_section(changed, it->string, NULL, it);
}

static int str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

/* The new config keeps the running value of a setting that cannot change
 * while serving; a difference is named in restart. secret: the value it
 * replaces may hold a password (database.url), and is wiped. -1 out of
 * memory. */
static int keep_value(char **dst, const char *run, const char *name, cJSON *restart,
		      int secret)
{
	char *d;

	if (str_eq(*dst, run))
		return 0;
	if (restart)
		cJSON_AddItemToArray(restart, cJSON_CreateString(name));
	d = run ? strdup(run) : NULL;
	if (run && !d)
		return -1;
	if (secret && *dst)
		sodium_memzero(*dst, strlen(*dst));
	free(*dst);
	*dst = d;
	return 0;
}

static int keep_str(char **dst, const char *run, const char *name, cJSON *restart)
{
	return keep_value(dst, run, name, restart, 0);
}

static int keep_secret(char **dst, const char *run, const char *name, cJSON *restart)
{
	return keep_value(dst, run, name, restart, 1);
}

#define KEEP_INT(field, name)                                                   \
	do {                                                                    \
		if (n->field != r->field) {                                     \
			cJSON_AddItemToArray(restart, cJSON_CreateString(name)); \
			n->field = r->field;                                    \
		}                                                               \
	} while (0)

/* A section whose running form is built once at start: a difference in
 * its text is named in restart (what runs stays as it was started). */
static void keep_section(const struct gh_config *n, const struct gh_config *r, const char *name,
			 cJSON *restart)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(n->root, name);
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(r->root, name);

	if ((a || b) && !(a && b && cJSON_Compare(a, b, 1)))
		cJSON_AddItemToArray(restart, cJSON_CreateString(name));
}

static int keep_running(struct gh_config *n, const struct gh_config *r, const char *db_override,
			cJSON *restart)
{
	if (keep_str(&n->server.listen, r->server.listen, "server.listen", restart) ||
	    keep_str(&n->database.path, r->database.path, "database.path",
		     db_override ? NULL : restart) ||
	    keep_secret(&n->database.url, r->database.url, "database.url",
			db_override ? NULL : restart) ||
	    keep_str(&n->key_hash_file, r->key_hash_file, "auth.key_hash_file", restart) ||
	    keep_str(&n->audit.signing_key_file, r->audit.signing_key_file,
		     "audit.signing_key_file", restart) ||
	    keep_str(&n->audit.witness.file, r->audit.witness.file, "audit.witness.file",
		     restart) ||
	    keep_str(&n->audit.witness.webhook_url, r->audit.witness.webhook_url,
		     "audit.witness.webhook_url", restart))
		return -1;
	KEEP_INT(server.threads, "server.threads");
	KEEP_INT(server.request_timeout_ms, "server.request_timeout_ms");
	KEEP_INT(server.head_timeout_ms, "server.head_timeout_ms");
	KEEP_INT(server.max_connections_per_address, "server.max_connections_per_address");
	KEEP_INT(server.mcp_sessions_per_key, "server.mcp_sessions_per_key");
	KEEP_INT(server.mcp_session_idle_ms, "server.mcp_session_idle_ms");
	KEEP_INT(database.synchronous_full, "database.synchronous");
	KEEP_INT(database.readers, "database.readers");
	KEEP_INT(database.busy_timeout_ms, "database.busy_timeout_ms");
	KEEP_INT(database.group_commit_max, "database.group_commit_max");
	KEEP_INT(database.pool_size, "database.pool_size");
	KEEP_INT(database.statement_timeout_ms, "database.statement_timeout_ms");
	KEEP_INT(database.connect_timeout_ms, "database.connect_timeout_ms");
	KEEP_INT(audit.checkpoint_rows, "audit.checkpoint_rows");
	KEEP_INT(audit.checkpoint_seconds, "audit.checkpoint_seconds");
	KEEP_INT(audit.witness.enabled, "audit.witness.enabled");
	KEEP_INT(audit.witness.webhook_timeout_ms, "audit.witness.webhook_timeout_ms");
	KEEP_INT(audit.witness.syslog, "audit.witness.syslog");
	KEEP_INT(audit.witness.when_behind, "audit.witness.when_behind");
	if (keep_str(&n->metrics.listen, r->metrics.listen, "metrics.listen", restart))
		return -1;
	KEEP_INT(metrics.allow_remote, "metrics.allow_remote");
	/* the trace exporter is set up at start (the notifier reads the
	 * current generation's targets when it acts: notify.h) */
	keep_section(n, r, "otel", restart);
	return 0;
}

static void log_lint(void *ud, const char *msg)
{
	(void)ud;
	gh_warn("reload: %s", msg);
}

/* ------------------------------------------------------------- record */

static void record(struct gh_app *app, const struct gh_reload_opts *o, const char *outcome,
		   const char *reason, const char *digest, const struct gh_cfg_gen *g,
		   const cJSON *changed, const cJSON *restart)
{
	struct gh_system_event se = {"config_reload", "admin", outcome, reason, NULL,
				     "the config reload"};
	cJSON *d = cJSON_CreateObject();
	char *ds;
	size_t i;

	cJSON_AddStringToObject(d, "via", o->via ? o->via : "api");
	if (o->actor)
		cJSON_AddStringToObject(d, "by", o->actor);
	cJSON_AddStringToObject(d, "config", g->cfg->file);
	if (digest && *digest)
		cJSON_AddStringToObject(d, "digest", digest);
	if (!strcmp(outcome, "ok")) {
		cJSON *p = cJSON_AddObjectToObject(d, "policies");

		cJSON_AddNumberToObject(d, "generation", (double)g->n);
		for (i = 0; i < g->cfg->npolicies; i++)
			cJSON_AddStringToObject(p, g->cfg->policies[i].name,
						g->cfg->policies[i].version);
		cJSON_AddItemToObject(d, "changed", cJSON_Duplicate(changed, 1));
		cJSON_AddItemToObject(d, "restart_required", cJSON_Duplicate(restart, 1));
	}
	ds = gh_json_dump(d);
	cJSON_Delete(d);
	se.detail = ds;
	if (!app->read_only)
		gh_admin_audit_system(app->store, &se);
	free(ds);
}

static void apply_log(const struct gh_config *c)
{
	gh_log_set_format(c->log.json ? GH_LOG_JSON : GH_LOG_TEXT);
	/* GH_LOG in the environment wins */
	if (!getenv("GH_LOG"))
		gh_log_set_level((enum gh_log_level)c->log.level);
}

void gh_reload_apply_log(const struct gh_config *c)
{
	apply_log(c);
}

/* -------------------------------------------------------------- reload */

/* The MCP servers of the next generation g: the running ones when neither
 * mcp_servers nor tools changed (shared with the generation that started
 * them), otherwise new ones started from g's config. */
static enum gh_code next_mcp(struct gh_app *app, struct gh_cfg_gen *cur, struct gh_cfg_gen *g,
			     struct gh_err *e)
{
	const cJSON *om = cJSON_GetObjectItemCaseSensitive(cur->cfg->root, "mcp_servers");
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(g->cfg->root, "mcp_servers");
	const cJSON *ot = cJSON_GetObjectItemCaseSensitive(cur->cfg->root, "tools");
	const cJSON *nt = cJSON_GetObjectItemCaseSensitive(g->cfg->root, "tools");
	int same = (om ? nm && cJSON_Compare(om, nm, 1) : !nm) &&
		   (ot ? nt && cJSON_Compare(ot, nt, 1) : !nt);
	enum gh_code rc;

	if (same || app->read_only) {
		struct gh_cfg_gen *from = cur->mcp_from ? cur->mcp_from : cur;

		if (!cur->mcp)
			return GH_OK;
		/* cur holds from (or is it), and the caller holds cur */
		atomic_fetch_add(&from->refs, 1);
		g->mcp_from = from;
		g->mcp = cur->mcp;
		return GH_OK;
	}
	if ((rc = gh_mcp_start(g->cfg, app->store, &g->owned_mcp, e)) != GH_OK)
		return rc;
	g->mcp = g->owned_mcp;
	if (g->cfg->nmcp_servers || cur->mcp)
		gh_info("reload: upstream MCP servers restarted with the new set (%zu); the old "
			"ones stop when the requests using them end", g->cfg->nmcp_servers);
	return GH_OK;
}

enum gh_code gh_reload(struct gh_app *app, const struct gh_reload_opts *o, cJSON **out,
		       struct gh_err *e)
{
	struct gh_cfg_gen *cur = NULL, *g = NULL;
	struct gh_config *ncfg = NULL;
	struct gh_buf text;
	char digest[65] = "";
	cJSON *changed = cJSON_CreateArray(), *restart = cJSON_CreateArray(), *res = NULL;
	enum gh_code rc;
	size_t i;

	*out = NULL;
	gh_buf_init(&text, RELOAD_MAX_BYTES);
	pthread_mutex_lock(&reload_mu);
	if (!changed || !restart) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (!(cur = gh_app_cfg_acquire(app))) {
		rc = gh_err_set(e, GH_E_INTERNAL, "this gateway cannot reload its config");
		goto out;
	}
	if ((rc = read_text(cur->cfg->file, &text, e)) != GH_OK)
		goto refused;
	digest_hex(text.data ? text.data : "", text.len, digest);
	if ((rc = gh_config_parse(cur->cfg->file, text.data ? text.data : "", text.len, &ncfg,
				  e)) != GH_OK)
		goto refused;
	/* the database the server runs on, --db's included (already in the
	 * running config: a URL is never copied into database.path) */
	if (keep_running(ncfg, cur->cfg, o->db_override, restart) != 0) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (ncfg->server.threads < ncfg->server.max_streams + 4) {
		rc = gh_err_set(e, GH_E_BADREQ, "%s: $.server.max_streams: %lld needs at least %lld "
				"threads, and server.threads (%lld) changes only with a restart",
				ncfg->file, (long long)ncfg->server.max_streams,
				(long long)ncfg->server.max_streams + 4,
				(long long)ncfg->server.threads);
		goto refused;
	}
	if (!strcmp(digest, cur->digest)) {
		/* the running text: nothing to install */
		g = cur;
		cur = NULL;
		goto done;
	}
	diff_roots(changed, cur->cfg->root, ncfg->root);
	for (i = 0; i < ncfg->npolicies; i++)
		gh_policy_lint(ncfg, &ncfg->policies[i], log_lint, NULL);
	if (!(g = calloc(1, sizeof(*g)))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	atomic_init(&g->refs, 1);
	g->n = cur->n + 1;
	g->cfg = g->owned_cfg = ncfg;
	ncfg = NULL;
	memcpy(g->digest, digest, sizeof(g->digest));
	if ((rc = next_mcp(app, cur, g, e)) != GH_OK)
		goto refused;
	apply_log(g->cfg);
	/* the app takes g's reference; keep one to report from */
	atomic_fetch_add(&g->refs, 1);
	gh_app_cfg_swap(app, g);
done:
	res = cJSON_CreateObject();
	cJSON_AddBoolToObject(res, "ok", 1);
	cJSON_AddStringToObject(res, "digest", digest);
	cJSON_AddNumberToObject(res, "generation", (double)g->n);
	cJSON_AddItemToObject(res, "changed", changed);
	cJSON_AddItemToObject(res, "restart_required", restart);
	record(app, o, "ok", NULL, digest, g, changed, restart);
	changed = restart = NULL;
	gh_info("reload (%s): config %s applied: generation %llu, digest %.16s, %d changed",
		o->via ? o->via : "api", g->cfg->file, (unsigned long long)g->n, digest,
		cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "changed")));
	{
		const cJSON *it;

		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(res, "restart_required"))
			gh_warn("reload: %s changed in %s; it keeps its running value until a "
				"restart", it->valuestring, g->cfg->file);
	}
	gh_app_cfg_release(g);
	g = NULL;
	*out = res;
	rc = GH_OK;
	goto out;
refused:
	gh_error("reload (%s): config refused, the running config stays: %s",
		 o->via ? o->via : "api", e->msg);
	record(app, o, "refused", e->msg, digest, cur, NULL, NULL);
out:
	cJSON_Delete(changed);
	cJSON_Delete(restart);
	gh_config_free(ncfg);
	/* a g that was not installed: only this reload holds it */
	gh_app_cfg_release(g);
	gh_app_cfg_release(cur);
	pthread_mutex_unlock(&reload_mu);
	gh_buf_free(&text);
	return rc;
}
