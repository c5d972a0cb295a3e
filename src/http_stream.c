/*
 * http_stream.c - native streaming, Mastra-compatible:
 * POST /api/agents/:id/stream answers SSE chunks
 *     data: {"type":"text-delta","runId":"...","from":"AGENT","payload":{...}}
 * and ends with "data: [DONE]". Chunk types follow the run engine's events
 * (start, step-start, text-delta, tool-call, tool-result,
 * tool-call-approval, step-finish, finish, error).
 *
 * While the run waits on an upstream the sink's tick checks whether the
 * client went away (the run is then cancelled and the upstream transfer
 * aborted): at once when the client's connection stirs, since it is the
 * sink's wake descriptor. The tick also sends a heartbeat comment when the
 * stream has been idle for server.heartbeat_ms. One stream pins one
 * CivetWeb worker; the number of streams is capped (server.max_streams).
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_native.h"
#include "json.h"
#include "log.h"
#include "util.h"

/* The largest chunk built (as gh_json_dump allows): payloads are bounded
 * where they are made. */
#define GH_NATIVE_CHUNK_MAX ((size_t)1 << 30)

/* Appends a chunk's envelope up to its payload:
 * {"type":...,"runId":...,"from":"AGENT","payload": */
static int envelope(struct gh_buf *b, const char *type, const char *run_id)
{
	if (gh_buf_puts(b, "{\"type\":") != GH_BUF_OK || gh_buf_json_str(b, type) != GH_BUF_OK ||
	    gh_buf_puts(b, ",\"runId\":") != GH_BUF_OK || gh_buf_json_str(b, run_id) != GH_BUF_OK ||
	    gh_buf_puts(b, ",\"from\":\"AGENT\",\"payload\":") != GH_BUF_OK)
		return -1;
	return 0;
}

/* Closes the envelope in b (built when ok), sends it and frees b. Out of
 * memory ends the stream rather than lose a chunk. */
static int send_chunk(struct gh_native_stream *s, struct gh_buf *b, int ok)
{
	if (ok && gh_buf_putc(b, '}') == GH_BUF_OK) {
		if (gh_http_sse_send(s->r, NULL, b->data, b->len) != 0)
			s->gone = 1;
	} else {
		s->gone = 1;
	}
	gh_buf_free(b);
	s->last_write_ns = gh_mono_ns();
	return s->gone;
}

static int sink_event(void *ud, const char *run_id, const char *type, const cJSON *payload)
{
	struct gh_native_stream *s = ud;
	struct gh_buf b;

	if (s->gone)
		return 1;
	if (!strcmp(type, "finish") || !strcmp(type, "error"))
		s->finished = 1;
	gh_buf_init(&b, GH_NATIVE_CHUNK_MAX);
	return send_chunk(s, &b, envelope(&b, type, run_id) == 0 &&
				      gh_json_print(payload, &b) == GH_BUF_OK);
}

/* A text-delta, the most frequent chunk, written straight from its text:
 * the same bytes sink_event would send for {"id":"0","text":...}. */
static int sink_text(void *ud, const char *run_id, const char *text, size_t len)
{
	struct gh_native_stream *s = ud;
	struct gh_buf b;

	if (s->gone)
		return 1;
	gh_buf_init(&b, GH_NATIVE_CHUNK_MAX);
	return send_chunk(s, &b, envelope(&b, "text-delta", run_id) == 0 &&
				      gh_buf_puts(&b, "{\"id\":\"0\",\"text\":") == GH_BUF_OK &&
				      gh_buf_json_strn(&b, text, len) == GH_BUF_OK &&
				      gh_buf_putc(&b, '}') == GH_BUF_OK);
}

static int sink_tick(void *ud)
{
	struct gh_native_stream *s = ud;
	int64_t now = gh_mono_ns();

	if (s->gone)
		return 1;
	if (gh_http_client_gone(s->r)) {
		s->gone = 1;
		gh_info("%s: client went away mid-stream; cancelling the run", s->r->id);
		return 1;
	}
	if (now - s->last_write_ns >= s->r->app->cfg->server.heartbeat_ms * 1000000) {
		if (gh_http_sse_comment(s->r, "keep-alive") != 0)
			s->gone = 1;
		s->last_write_ns = now;
	}
	return s->gone;
}

int gh_native_stream_begin(struct gh_req *r, struct gh_native_stream *s)
{
	memset(s, 0, sizeof(s[0]));
	s->r = r;
	if (gh_http_stream_acquire(r) != 0)
		return -1;
	s->sink.event = sink_event;
	s->sink.text = sink_text;
	s->sink.tick = sink_tick;
	s->sink.ud = s;
	gh_http_stream_wake(r, &s->sink.wake_fd, &s->sink.tick_ms);
	if (gh_http_sse_begin(r) != 0) {
		s->gone = 1;
		return -1;
	}
	s->last_write_ns = gh_mono_ns();
	return 0;
}

void gh_native_stream_fail(struct gh_native_stream *s, const char *run_id, const struct gh_err *e)
{
	cJSON *p, *err;

	if (s->gone || e->code == GH_E_CANCELLED)
		return;
	/* the engine already sent "error" when the run had begun */
	if (s->finished)
		return;
	p = cJSON_CreateObject();
	err = cJSON_AddObjectToObject(p, "error");
	cJSON_AddStringToObject(err, "code", gh_code_name(e->code));
	cJSON_AddStringToObject(err, "message", e->msg);
	cJSON_AddNumberToObject(err, "status", gh_http_status_of(e->code));
	sink_event(s, run_id ? run_id : "", "error", p);
	cJSON_Delete(p);
}

void gh_native_stream_end(struct gh_native_stream *s)
{
	if (!s->gone) {
		gh_http_sse_send(s->r, NULL, "[DONE]", 6);
		gh_http_sse_end(s->r);
	}
}

static void stream(struct gh_req *r)
{
	const struct gh_agent_conf *a = gh_native_agent(r, r->params[0]);
	struct gh_native_req nr;
	struct gh_native_stream s;
	struct gh_run_result res;
	struct gh_err e;
	cJSON *body = NULL;

	memset(&nr, 0, sizeof(nr));
	if (!a)
		return;
	/* everything that can fail as a plain HTTP error does so before the
	 * stream starts */
	if (gh_http_body_object(r, &body, &e) != GH_OK ||
	    gh_native_parse(r, a, body, &nr, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	if (gh_native_stream_begin(r, &s) != 0)
		goto out;
	nr.rq.stream = 1;
	if (gh_run_generate(r->app, &nr.rq, &s.sink, &res, &e) != GH_OK) {
		/* a run that had begun already told the client; one that
		 * failed up front (policy, conflict) says it here */
		gh_native_stream_fail(&s, nr.rq.run_id, &e);
	} else {
		gh_run_result_clear(&res);
	}
	gh_native_stream_end(&s);
out:
	gh_native_req_free(&nr);
	cJSON_Delete(body);
}

const struct gh_route gh_routes_stream[] = {
	{"POST", "/api/agents/:id/stream", GH_AUTH_KEY, stream},
	{"POST", "/api/agents/:id/stream-legacy", GH_AUTH_KEY, stream},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
