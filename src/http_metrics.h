/*
 * http_metrics.h - GET /metrics (Prometheus text format 0.0.4): on the
 * main listener for admins (route table gh_routes_metrics, http.h), or on
 * a listener of its own (metrics.listen) that serves only /metrics.
 */
#ifndef GH_HTTP_METRICS_H
#define GH_HTTP_METRICS_H

#include "app.h"
#include "buf.h"
#include "err.h"

struct gh_metrics_http;

/* The whole exposition into b (bounded by b's cap): metrics.h's values and
 * what is read at scrape time. GH_BUF_OK or the buffer's error. */
int gh_http_metrics_text(struct gh_app *app, struct gh_buf *b);

/* Starts the listener at app->cfg->metrics.listen (two workers, /metrics
 * only, no authentication). *out owned by the caller
 * (gh_http_metrics_stop). GH_E_IO when the address cannot be bound. */
enum gh_code gh_http_metrics_start(struct gh_app *app, struct gh_metrics_http **out,
				   struct gh_err *e);
/* The port it listens on (the one picked when listen gave port 0). */
int gh_http_metrics_port(const struct gh_metrics_http *m);
/* Stops and frees it; NULL is a no-op. */
void gh_http_metrics_stop(struct gh_metrics_http *m);

#endif
