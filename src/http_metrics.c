/*
 * http_metrics.c - GET /metrics: the Prometheus text exposition of
 * metrics.h plus what is read at scrape time (streams, approvals pending,
 * each upstream MCP server's state), served either on the main listener
 * to admins or, with metrics.listen, on a listener of its own that serves
 * nothing else and asks for no authentication (loopback unless
 * metrics.allow_remote; config.c checks).
 *
 * Threading: a scrape runs on a CivetWeb worker (main listener) or on one
 * of the metrics listener's two workers; it reads the store with a reader
 * connection and the MCP servers' state under their own locks, never
 * anything a request holds.
 */
#include "http_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <civetweb.h>

#include "buf.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "mcp.h"
#include "metrics.h"
#include "notify.h"
#include "otel.h"
#include "store_ui.h"
#include "util.h"

/* A scrape's text, at most (a full tool table with every series is well
 * below this). */
#define SCRAPE_MAX (8u << 20)

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One state-set family: the state of every upstream MCP server, one
 * series per (server, state) with 1 for the state it is in. */
static int render_mcp(struct gh_app *app, struct gh_buf *b)
{
	static const char *const states[] = {"connecting", "connected", "failing", "stopped"};
	cJSON *st = gh_app_mcp(app) ? gh_mcp_status_json(gh_app_mcp(app), 1, NULL) : NULL;
	const cJSON *s;
	int rc = gh_metrics_family(b, "gatehouse_mcp_server_state", "gauge",
				   "Each upstream MCP server's connection state: 1 for the "
				   "state it is in.");

	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(st, "servers")) {
		const char *name = gh_json_str(s, "name"), *cur = gh_json_str(s, "state");
		size_t i;

		for (i = 0; name && cur && rc == GH_BUF_OK && i < GH_ARRAY_LEN(states); i++) {
			struct gh_metrics_label l[2] = {{"server", name}, {"state", states[i]}};

			rc = gh_metrics_sample(b, "gatehouse_mcp_server_state", l, 2,
					       !strcmp(cur, states[i]));
		}
	}
	cJSON_Delete(st);
	return rc;
}

/* Families gathered from other modules at scrape time: one function call
 * and a family + sample each (gh_metrics_family, gh_metrics_sample). */
/* One counter or gauge family with a single unlabelled sample. */
static int render_one(struct gh_buf *b, const char *name, const char *type, const char *help,
		      double v)
{
	int rc = gh_metrics_family(b, name, type, help);

	return rc == GH_BUF_OK ? gh_metrics_sample(b, name, NULL, 0, v) : rc;
}

/* The trace exporter's counts (otel.h), when tracing is on. */
static int render_otel(struct gh_buf *b)
{
	struct gh_otel_stats st;
	int rc;

	if (!gh_otel_enabled())
		return GH_BUF_OK;
	gh_otel_stats(&st);
	rc = render_one(b, "gatehouse_otel_spans_exported_total", "counter",
			"Spans the collector accepted.", (double)st.exported);
	if (rc == GH_BUF_OK)
		rc = render_one(b, "gatehouse_otel_spans_dropped_total", "counter",
				"Spans dropped: the queue was full, the collector refused or "
				"failed their batch, or shutdown came first.",
				(double)st.dropped);
	if (rc == GH_BUF_OK)
		rc = render_one(b, "gatehouse_otel_spans_queued", "gauge",
				"Spans waiting for export.", (double)st.queued);
	if (rc == GH_BUF_OK)
		rc = render_one(b, "gatehouse_otel_export_failures_total", "counter",
				"Export requests that failed or were refused.",
				(double)st.failed_exports);
	return rc;
}

/* The approval notifications' deliveries (notify.h), when the notifier runs
 * (with or without targets: a reload may add them). */
static int render_notify(struct gh_app *app, struct gh_buf *b)
{
	static const char *const outcomes[] = {"delivered", "failed", "dropped", "retried"};
	struct gh_notify_stats st;
	double v[4];
	size_t i;
	int rc;

	if (!app->notify)
		return GH_BUF_OK;
	gh_notify_stats(app->notify, &st);
	v[0] = (double)st.delivered;
	v[1] = (double)st.failed;
	v[2] = (double)st.dropped;
	v[3] = (double)st.retries;
	rc = gh_metrics_family(b, "gatehouse_notifications_total", "counter",
			       "Approval notification deliveries by outcome (retried: attempts "
			       "after the first).");
	for (i = 0; rc == GH_BUF_OK && i < GH_ARRAY_LEN(outcomes); i++) {
		struct gh_metrics_label l = {"outcome", outcomes[i]};

		rc = gh_metrics_sample(b, "gatehouse_notifications_total", &l, 1, v[i]);
	}
	if (rc == GH_BUF_OK)
		rc = render_one(b, "gatehouse_notifications_queued", "gauge",
				"Approval notifications waiting or in flight.", (double)st.queued);
	return rc;
}

static int render_extra(struct gh_app *app, struct gh_buf *b)
{
	int rc = render_mcp(app, b);

	if (rc == GH_BUF_OK)
		rc = render_otel(b);
	if (rc == GH_BUF_OK)
		rc = render_notify(app, b);
	return rc;
}

int gh_http_metrics_text(struct gh_app *app, struct gh_buf *b)
{
	struct gh_metrics_gauges g;
	struct gh_err e;
	int64_t pending = -1;
	int rc;

	if (gh_store_ui_pending_count(app->store, &pending, &e) != GH_OK) {
		gh_warn("metrics: approvals pending not read: %s", e.msg);
		pending = -1;
	}
	memset(&g, 0, sizeof(g));
	g.active_streams = atomic_load(&app->active_streams);
	g.max_streams = gh_app_cfg(app)->server.max_streams;
	g.approvals_pending = pending;
	g.now_ms = gh_now_ms();
	rc = gh_metrics_render(b, &g);
	return rc == GH_BUF_OK ? render_extra(app, b) : rc;
}

/* ------------------------------------------------ on the main listener */

static void metrics_get(struct gh_req *r)
{
	const struct gh_metrics_conf *mc = &gh_app_cfg(r->app)->metrics;
	struct gh_buf b;

	if (!mc->enabled) {
		gh_http_errorf(r, GH_E_NOTFOUND, "metrics are turned off (metrics.enabled)");
		return;
	}
	if (mc->listen) {
		gh_http_errorf(r, GH_E_NOTFOUND, "/metrics is served on its own listener "
			       "(metrics.listen), not here");
		return;
	}
	gh_buf_init(&b, SCRAPE_MAX);
	if (gh_http_metrics_text(r->app, &b) != GH_BUF_OK) {
		gh_buf_free(&b);
		gh_http_errorf(r, GH_E_INTERNAL, "the metrics did not fit in %u bytes", SCRAPE_MAX);
		return;
	}
	gh_http_send(r, 200, CONTENT_TYPE, b.data ? b.data : "", b.len);
	gh_buf_free(&b);
}

const struct gh_route gh_routes_metrics[] = {
	{"GET", "/metrics", GH_AUTH_ADMIN, metrics_get},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};

/* ---------------------------------------------- a listener of its own */

struct gh_metrics_http {
	struct mg_context *ctx;
	struct gh_app *app;
	int port;
};

static void plain(struct mg_connection *conn, int status, const char *reason, const char *ctype,
		  const char *body, size_t len, int head_only)
{
	mg_printf(conn, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n",
		  status, reason, ctype, len);
	if (!head_only && len)
		mg_write(conn, body, len);
}

static int metrics_only(struct mg_connection *conn, void *cbdata)
{
	struct gh_metrics_http *m = cbdata;
	const struct mg_request_info *ri = mg_get_request_info(conn);
	int head = ri->request_method && !strcmp(ri->request_method, "HEAD");
	int64_t t0 = gh_mono_ns();
	struct gh_cfg_gen *gen, *prev;
	struct gh_buf b;
	int rc;

	if (!ri->local_uri || strcmp(ri->local_uri, "/metrics")) {
		static const char nf[] = "only /metrics is served here\n";

		plain(conn, 404, "Not Found", "text/plain; charset=utf-8", nf, sizeof(nf) - 1, head);
		return 404;
	}
	if (!ri->request_method || (strcmp(ri->request_method, "GET") && !head)) {
		static const char na[] = "GET /metrics only\n";

		plain(conn, 405, "Method Not Allowed", "text/plain; charset=utf-8", na,
		      sizeof(na) - 1, 0);
		return 405;
	}
	gh_buf_init(&b, SCRAPE_MAX);
	/* the scrape reads the config current when it came, like a request */
	gen = gh_app_cfg_acquire(m->app);
	prev = gh_app_cfg_enter(gen);
	rc = gh_http_metrics_text(m->app, &b);
	gh_app_cfg_leave(prev);
	gh_app_cfg_release(gen);
	if (rc != GH_BUF_OK) {
		static const char big[] = "the metrics did not fit\n";

		gh_buf_free(&b);
		plain(conn, 500, "Internal Server Error", "text/plain; charset=utf-8", big,
		      sizeof(big) - 1, head);
		return 500;
	}
	plain(conn, 200, "OK", CONTENT_TYPE, b.data ? b.data : "", b.len, head);
	gh_buf_free(&b);
	gh_metrics_request(GH_MS_METRICS, 200, gh_mono_ns() - t0);
	return 200;
}

static int on_log(const struct mg_connection *conn, const char *msg)
{
	(void)conn;
	gh_debug("civetweb (metrics): %s", msg);
	return 1;
}

enum gh_code gh_http_metrics_start(struct gh_app *app, struct gh_metrics_http **out,
				   struct gh_err *e)
{
	const char *listen = app->boot_cfg->metrics.listen; /* restart-only */
	struct gh_metrics_http *m = calloc(1, sizeof(*m));
	struct mg_callbacks cb;
	struct mg_server_port ports[2];
	const char *opts[] = {"listening_ports", listen, "num_threads", "2",
			      "request_timeout_ms", "10000", "enable_keep_alive", "yes",
			      "keep_alive_timeout_ms", "10000", "decode_url", "no", NULL};

	*out = NULL;
	if (!m)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	m->app = app;
	mg_init_library(0);
	memset(&cb, 0, sizeof(cb));
	cb.log_message = on_log;
	m->ctx = mg_start(&cb, m, opts);
	if (!m->ctx) {
		mg_exit_library();
		free(m);
		return gh_err_set(e, GH_E_IO, "cannot listen on %s (metrics.listen)", listen);
	}
	mg_set_request_handler(m->ctx, "/", metrics_only, m);
	memset(ports, 0, sizeof(ports));
	if (mg_get_server_ports(m->ctx, 2, ports) < 1) {
		gh_http_metrics_stop(m);
		return gh_err_set(e, GH_E_IO, "metrics.listen: CivetWeb reports no listening port");
	}
	m->port = ports[0].port;
	*out = m;
	return GH_OK;
}

int gh_http_metrics_port(const struct gh_metrics_http *m)
{
	return m ? m->port : 0;
}

/* CivetWeb's accept loop notices a stop only between polls (2 s apart):
 * while mg_stop waits for it, this thread connects to the listener every
 * 20 ms so the loop wakes at once. */
struct waker {
	struct sockaddr_storage sa;
	socklen_t len;
	_Atomic int done;
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;

	while (!atomic_load(&w->done)) {
		int fd = socket(w->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd >= 0) {
			connect(fd, (struct sockaddr *)&w->sa, w->len);
			close(fd);
		}
		usleep(20000);
	}
	return NULL;
}

/* Where to connect to reach the listener: its address, a wildcard one
 * reached over loopback. 0 when known. */
static int listener_addr(const struct gh_metrics_http *m, struct waker *w)
{
	char host[GH_LISTEN_HOST_MAX], why[200];
	int port, v6;

	memset(&w->sa, 0, sizeof(w->sa));
	if (gh_config_listen_parse(m->app->boot_cfg->metrics.listen, host, sizeof(host), &port, &v6,
				   why, sizeof(why)) != 0)
		return -1;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&w->sa;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)m->port);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1 ||
		    IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
			a->sin6_addr = in6addr_loopback;
		w->len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&w->sa;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)m->port);
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1 || a->sin_addr.s_addr == 0)
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		w->len = sizeof(*a);
	}
	return 0;
}

void gh_http_metrics_stop(struct gh_metrics_http *m)
{
	struct waker w;
	pthread_t t;
	int started = 0;

	if (!m)
		return;
	atomic_init(&w.done, 0);
	if (m->port > 0 && listener_addr(m, &w) == 0)
		started = pthread_create(&t, NULL, waker_main, &w) == 0;
	mg_stop(m->ctx);
	atomic_store(&w.done, 1);
	if (started)
		pthread_join(t, NULL);
	mg_exit_library();
	free(m);
}
