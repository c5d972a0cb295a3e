/*
 * http_runs.c - runs over HTTP, for clients that wait on an approval:
 *   GET /api/runs/:id          the run (wire_native.c gh_wire_native_run)
 *   GET /api/runs/:id/events   SSE: a snapshot, then the run's live events
 *                              (native chunks) until its turn completes
 * A key sees its owner's runs; an admin sees all. Per request, on the
 * worker thread.
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "hub.h"
#include "json.h"
#include "run.h"
#include "wire_native.h"

/* Reads a run by its id or, for its owner, by the name the owner gave it
 * as runId (gh_run_named_id); answers the error and returns -1 when it
 * cannot. */
static int load(struct gh_req *r, const char *id, struct gh_run_view *v)
{
	struct gh_err e;
	enum gh_code rc = gh_run_view_find(r->app, r->who.admin ? NULL : r->who.key.owner, id, v,
					   &e);

	if (rc != GH_OK) {
		gh_http_error(r, &e);
		return -1;
	}
	return 0;
}

static void get_run(struct gh_req *r)
{
	struct gh_run_view v;
	cJSON *o;

	if (load(r, r->params[0], &v) != 0)
		return;
	o = gh_wire_native_run(&v);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
	gh_run_view_clear(&v);
}

struct watch {
	struct gh_http_stream hs;
	char id[GH_ID_MAX];
};

/* The run as it stands, as a "snapshot" event. */
static int send_snapshot(struct watch *w, const struct gh_run_view *v)
{
	return gh_http_stream_json(&w->hs, "snapshot", gh_wire_native_run(v));
}

/* 1 when a "finish" payload says the run's turn ended for good. */
static int finished(const char *type, const char *data)
{
	cJSON *p;
	enum gh_run_status st;
	int done = 0;

	if (strcmp(type, "finish") || !(p = gh_json_parse_stored(data)))
		return 0;
	done = gh_run_status_parse(gh_json_str(p, "status"), &st) == 0 && gh_run_status_final(st);
	cJSON_Delete(p);
	return done;
}

static int on_event(void *ud, const char *type, const char *data)
{
	struct watch *w = ud;
	struct gh_buf b;
	int rc;

	gh_buf_init(&b, strlen(data) + 256);
	if (gh_wire_native_envelope(type, w->id, &b) == GH_BUF_OK &&
	    gh_buf_printf(&b, "%s}", data) == GH_BUF_OK)
		rc = gh_http_stream_send(&w->hs, NULL, b.data, b.len);
	else
		rc = -1;
	gh_buf_free(&b);
	return rc != 0 || finished(type, data);
}

/* Events were lost: a fresh snapshot. */
static int on_lost(void *ud)
{
	struct watch *w = ud;
	struct gh_run_view v;
	struct gh_err e;

	if (gh_run_view_get(w->hs.r->app, NULL, w->id, &v, &e) == GH_OK) {
		send_snapshot(w, &v);
		gh_run_view_clear(&v);
	}
	return 0;
}

static void run_events(struct gh_req *r)
{
	struct gh_run_view v;
	struct gh_hub_sub *sub = NULL;
	struct watch w;

	if (load(r, r->params[0], &v) != 0)
		return;
	memset(&w, 0, sizeof(w));
	gh_strlcpy(w.id, v.id, sizeof(w.id));
	gh_run_view_clear(&v);
	if (gh_http_stream_start(r, &w.hs) != 0)
		return;
	/* subscribe before the snapshot so nothing falls in between */
	sub = gh_hub_subscribe(r->app->hub, w.id);
	if (load(r, r->params[0], &v) != 0)
		goto out;
	if (send_snapshot(&w, &v) == 0 && !gh_run_status_final(v.status))
		gh_http_stream_follow(&w.hs, sub, on_event, on_lost, NULL, &w);
	gh_run_view_clear(&v);
	gh_http_stream_end(&w.hs, 1);
out:
	if (sub)
		gh_hub_unsubscribe(r->app->hub, sub);
}

const struct gh_route gh_routes_runs[] = {
	{"GET", "/api/runs/:id", GH_AUTH_KEY, get_run},
	{"GET", "/api/runs/:id/events", GH_AUTH_KEY, run_events},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
