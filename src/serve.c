/*
 * serve.c - gatehouse serve: wires config, store, rate limiter, background
 * work and the HTTP server together, then waits for SIGINT/SIGTERM and
 * shuts down in order (HTTP first, so no request is cut mid-write; the
 * store last, after a final checkpoint).
 *
 * Runs on the main thread; SIGINT/SIGTERM are blocked in every thread and
 * taken with sigwait here.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "background.h"
#include "cli.h"
#include "http.h"
#include "hub.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "mcp.h"
#include "ratelimit.h"
#include "upstream.h"
#include "util.h"

static int restore_cb(void *ud, const char *key, int64_t tat_ms)
{
	gh_rl_restore(ud, key, tat_ms, gh_now_ms());
	return 0;
}

/* Records the policies in force at start ("policy_reload"), so the audit
 * log shows which policy version governed every later decision. */
static void audit_policies(struct gh_app *app)
{
	struct gh_audit_event ev;
	struct gh_err e;
	cJSON *d = cJSON_CreateObject(), *p = cJSON_AddObjectToObject(d, "policies");
	char *ds;
	size_t i;

	for (i = 0; i < app->cfg->npolicies; i++)
		cJSON_AddStringToObject(p, app->cfg->policies[i].name,
					app->cfg->policies[i].version);
	cJSON_AddStringToObject(d, "config", app->cfg->file);
	ds = gh_json_dump(d);
	cJSON_Delete(d);
	memset(&ev, 0, sizeof(ev));
	ev.event = "policy_reload";
	ev.admin_user = "system";
	ev.source = "admin";
	ev.outcome = "ok";
	ev.duration_ms = -1;
	ev.detail = ds;
	if (gh_store_audit_append(app->store, &ev, NULL, &e) != GH_OK)
		gh_warn("audit: cannot record the loaded policies: %s", e.msg);
	free(ds);
}

int gh_cmd_serve(struct gh_cli *c)
{
	struct gh_app app;
	struct gh_store_opts so;
	struct gh_http *http = NULL;
	struct gh_err e;
	sigset_t set;
	int sig, rc = GH_EXIT_RUNTIME, n = 0;
	const char *listen = c->listen ? c->listen : c->cfg->server.listen;

	memset(&app, 0, sizeof(app));
	app.cfg = c->cfg;
	app.started_ms = gh_now_ms();
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	if (gh_upstream_global_init() != 0) {
		fprintf(stderr, "gatehouse: libcurl failed to initialise\n");
		return GH_EXIT_RUNTIME;
	}
	if (gh_keys_load_hashkey(c->key_hash_file, 1, app.hashkey, &e) != GH_OK ||
	    gh_audit_signer_load(c->signing_key_file, 1, &app.signer, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	app.has_signer = 1;
	memset(&so, 0, sizeof(so));
	so.path = c->cfg->database.path;
	so.synchronous_full = c->cfg->database.synchronous_full;
	so.readers = (int)c->cfg->database.readers;
	so.busy_timeout_ms = (int)c->cfg->database.busy_timeout_ms;
	so.group_commit_max = (int)c->cfg->database.group_commit_max;
	so.threaded = 1;
	so.signer = &app.signer;
	so.ckpt_rows = c->cfg->audit.checkpoint_rows;
	so.ckpt_ms = c->cfg->audit.checkpoint_seconds * 1000;
	if (gh_store_open(&so, &app.store, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (gh_store_runs_recover(app.store, &n, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (n)
		gh_warn("recovered %d runs interrupted by the last shutdown", n);
	if (gh_store_analyze(app.store, &e) != GH_OK)
		gh_warn("database: statistics not refreshed: %s", e.msg);
	app.rl = gh_rl_new(1000000);
	app.hub = gh_hub_new();
	if (!app.rl || !app.hub) {
		fprintf(stderr, "gatehouse: out of memory\n");
		goto out;
	}
	if (gh_store_ratelimit_load(app.store, restore_cb, app.rl, &e) != GH_OK)
		gh_warn("rate limits: previous state not restored: %s", e.msg);
	if (!gh_config_policy(c->cfg, "default"))
		gh_warn("%s has no policy named \"default\": keys created without --policy may use "
			"nothing (no agent, no tool)", c->cfg->file);
	audit_policies(&app);
	if (gh_mcp_start(c->cfg, app.store, &app.mcp, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (gh_bg_start(&app, &app.bg, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	if (gh_http_start(&app, listen, &http, &e) != GH_OK) {
		fprintf(stderr, "gatehouse: %s\n", e.msg);
		goto out;
	}
	{
		char host[256];
		const char *colon = strrchr(listen, ':');
		size_t hl = colon ? (size_t)(colon - listen) : 0;

		if (hl >= sizeof(host))
			hl = sizeof(host) - 1;
		memcpy(host, listen, hl);
		host[hl] = '\0';
		gh_info("gatehouse %s: database %s (schema %d), %zu agents, %zu policies",
			GH_VERSION, c->cfg->database.path, gh_store_schema_version(app.store),
			c->cfg->nagents, c->cfg->npolicies);
		printf("gatehouse listening on http://%s:%d\n", hl ? host : "127.0.0.1",
		       gh_http_port(http));
		fflush(stdout);
	}
	while (sigwait(&set, &sig) != 0)
		;
	gh_info("received %s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	atomic_store(&app.stopping, 1);
	rc = GH_EXIT_OK;
out:
	{
		int64_t t0 = gh_mono_ns(), t1, t2, t3;

		gh_http_stop(http);
		t1 = gh_mono_ns();
		gh_bg_stop(app.bg);
		t2 = gh_mono_ns();
		/* after every request and background run: no call is in flight */
		gh_mcp_stop(app.mcp);
		t3 = gh_mono_ns();
		gh_store_close(app.store);
		if (http)
			gh_info("stopped: http %.0f ms, background %.0f ms, mcp %.0f ms, store %.0f ms",
				(double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
				(double)(t3 - t2) / 1e6, (double)(gh_mono_ns() - t3) / 1e6);
	}
	gh_hub_free(app.hub);
	gh_rl_free(app.rl);
	sodium_memzero(app.hashkey, sizeof(app.hashkey));
	gh_audit_signer_wipe(&app.signer);
	gh_upstream_global_cleanup();
	return rc;
}
