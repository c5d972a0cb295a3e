/*
 * t_provider.h - what the unit tests of the HTTP providers
 * (test_provider_openai.c, test_provider_anthropic.c) share: a provider
 * configuration pointed at t_srv (t_httpd.h), a chat call, callbacks that
 * record what a streamed reply delivered, and a JSON comparison that shows
 * both sides when they differ.
 *
 * Threading: the tests run one at a time on the main thread; t_conf and
 * the capture are theirs alone (the server's handlers never touch them).
 */
#ifndef GH_T_PROVIDER_H
#define GH_T_PROVIDER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"
#include "provider.h"
#include "t_httpd.h"
#include "upstream.h"

/* The API key the provider sends; no error message may carry it. */
#define T_KEY "sk-test-K3Y-never-in-errors"

static struct gh_provider_conf t_conf;
static char t_base_url[160];
static const char *t_model;

/* Starts t_srv when needed and points t_conf at t_srv.base + prefix: a
 * provider of this name and type, key T_KEY, 5 s timeout, no retries, a
 * 1 MiB reply cap. t_chat asks for model (borrowed: a literal). */
static inline void t_provider_setup(const char *prefix, char *name,
				    enum gh_provider_type type, const char *model)
{
	if (gh_upstream_global_init() != 0)
		exit(2);
	t_srv_up();
	snprintf(t_base_url, sizeof(t_base_url), "%s%s", t_srv.base, prefix);
	memset(&t_conf, 0, sizeof(t_conf));
	t_conf.name = name;
	t_conf.type = type;
	t_conf.base_url = t_base_url;
	t_conf.api_key = T_KEY;
	t_conf.timeout_ms = 5000;
	t_conf.connect_timeout_ms = 2000;
	t_conf.max_retries = 0;
	t_conf.retry_base_ms = 10;
	t_conf.max_response_bytes = 1 << 20;
	t_model = model;
}

static inline void t_provider_teardown(void)
{
	gh_upstream_global_cleanup();
}

/* What the events callbacks saw. */
struct t_capture {
	struct gh_buf text;
	struct gh_buf tools;     /* "index|id|name|fragment\n" per call */
	struct gh_buf reasoning; /* thinking text, then "|sig:<signature>" per signature */
	int ndeltas;
	int stop_on_delta;
	double start, stop_at_ms;  /* tick asks to stop this long after start */
	double stopped_at;
	int ticks;
	int batch_open;          /* inside an upstream read's batch */
	int batches;             /* batches opened */
	int unbatched;           /* text or tool events outside a batch */
	int closed_at_first;     /* a batch closed right after the first text */
	int sent;                /* times the request was reported written */
	int sent_in_batch;       /* ... of them inside a batch */
	int sent_after_text;     /* ... of them after text had come */
};

static inline void t_cap_init(struct t_capture *c)
{
	memset(c, 0, sizeof(*c));
	gh_buf_init(&c->text, 1 << 20);
	gh_buf_init(&c->tools, 1 << 20);
	gh_buf_init(&c->reasoning, 1 << 20);
	c->stop_at_ms = -1;
	c->start = t_now_ms();
}

static inline void t_cap_free(struct t_capture *c)
{
	gh_buf_free(&c->text);
	gh_buf_free(&c->tools);
	gh_buf_free(&c->reasoning);
}

static inline int t_cap_reasoning(void *ud, const char *t, size_t n, const char *sig)
{
	struct t_capture *c = ud;

	gh_buf_append(&c->reasoning, t, n);
	if (sig)
		gh_buf_printf(&c->reasoning, "|sig:%s", sig);
	return 0;
}

static inline int t_cap_text(void *ud, const char *t, size_t n)
{
	struct t_capture *c = ud;

	gh_buf_append(&c->text, t, n);
	c->ndeltas++;
	c->unbatched += c->batch_open ? 0 : 1;
	return c->stop_on_delta && c->ndeltas >= c->stop_on_delta;
}

static inline int t_cap_tool(void *ud, int index, const char *id, const char *name,
			     const char *frag)
{
	struct t_capture *c = ud;

	gh_buf_printf(&c->tools, "%d|%s|%s|%s\n", index, id ? id : "-", name ? name : "-", frag);
	c->unbatched += c->batch_open ? 0 : 1;
	return 0;
}

static inline int t_cap_tick(void *ud)
{
	struct t_capture *c = ud;
	double now = t_now_ms();

	c->ticks++;
	if (c->stop_at_ms >= 0 && now - c->start >= c->stop_at_ms) {
		c->stopped_at = c->start + c->stop_at_ms;
		return 1;
	}
	return 0;
}

static inline int t_cap_batch(void *ud, int open)
{
	struct t_capture *c = ud;

	c->batch_open += open ? 1 : -1;
	c->batches += open ? 1 : 0;
	if (!open && c->ndeltas == 1)
		c->closed_at_first = 1;
	return 0;
}

static inline void t_cap_sent(void *ud)
{
	struct t_capture *c = ud;

	c->sent++;
	c->sent_in_batch += c->batch_open ? 1 : 0;
	c->sent_after_text += c->ndeltas ? 1 : 0;
}

/* The whole error of the last failed t_chat (req.error_detail): e holds
 * only what tenants may see. */
static char t_detail[GH_ERR_MSG_MAX];

/* One chat through t_conf: messages is JSON text, c NULL = no events
 * callbacks. *out is the caller's to free. */
static inline enum gh_code t_chat(const char *messages, int stream, struct t_capture *c,
				  struct gh_chat_response *out, struct gh_err *e)
{
	struct gh_chat_events ev = {t_cap_text, t_cap_tool, t_cap_tick, c, 0, 0, t_cap_reasoning,
				    t_cap_batch, t_cap_sent, NULL};
	struct gh_chat_request req;
	cJSON *m = cJSON_Parse(messages);
	enum gh_code rc;

	memset(&req, 0, sizeof(req));
	req.model = t_model;
	req.messages = m;
	req.stream = stream;
	req.error_detail = t_detail;
	req.error_detail_cap = sizeof(t_detail);
	memset(out, 0, sizeof(*out));
	gh_err_clear(e);
	rc = gh_provider_chat(&t_conf, &req, c ? &ev : NULL, out, e);
	cJSON_Delete(m);
	return rc;
}

/* 1 when got equals the JSON text want_text; prints both when not. */
static inline int t_json_eq(const cJSON *got, const char *want_text)
{
	cJSON *want = cJSON_Parse(want_text);
	int eq = want && got && cJSON_Compare(got, want, 1);

	if (!eq) {
		char *g = got ? cJSON_PrintUnformatted(got) : NULL;

		fprintf(stderr, "  got:  %s\n  want: %s\n", g ? g : "(null)", want_text);
		free(g);
	}
	cJSON_Delete(want);
	return eq;
}

#endif
