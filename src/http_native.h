/*
 * http_native.h - what the native (Mastra-compatible) handlers share:
 * request parsing and result shaping for generate, stream and the
 * approve/decline endpoints. Per request; not shared between threads.
 */
#ifndef GH_HTTP_NATIVE_H
#define GH_HTTP_NATIVE_H

#include <cjson/cJSON.h>

#include "http.h"
#include "run.h"

struct gh_native_req {
	struct gh_run_request rq;   /* points into the fields below and the body */
	cJSON *messages;            /* owned */
	cJSON *client_defs;         /* owned */
	const char *thread_id;      /* borrowed from the body */
	const char *resource_id;
	const char *run_id;         /* the client's name for the run */
	char named_run[GH_ID_MAX];  /* the id it names (gh_run_named_id) */
	int max_steps;
};

/* The agent named id when the caller may use it; otherwise answers 404/403
 * and returns NULL. */
const struct gh_agent_conf *gh_native_agent(struct gh_req *r, const char *id);

/* Parses a generate/stream body (kept alive by the caller while out is in
 * use). */
enum gh_code gh_native_parse(struct gh_req *r, const struct gh_agent_conf *a, cJSON *body,
			     struct gh_native_req *out, struct gh_err *e);
void gh_native_req_free(struct gh_native_req *n);

/* The generate response: {text, finishReason, toolCalls, toolResults,
 * response:{id, messages}, usage, runId, threadId, resourceId, status,
 * approvals?}. Caller frees. */
cJSON *gh_native_result_json(const struct gh_run_result *res);

/* An agent as GET /api/agents/:id shows it. Caller frees. */
cJSON *gh_native_agent_json(struct gh_req *r, const struct gh_agent_conf *a);

/* A native SSE stream bound to a request (http_stream.c). */
struct gh_native_stream {
	struct gh_req *r;
	struct gh_run_sink sink;      /* hand to the engine */
	int64_t last_write_ns;
	int gone;                     /* the client went away */
	int finished;                 /* a finish chunk was sent */
};

/* Takes a stream slot and sends the SSE head; -1 when refused (already
 * answered 503) or the client is gone. */
int gh_native_stream_begin(struct gh_req *r, struct gh_native_stream *s);
/* Sends an error chunk for e unless the stream already ended. */
void gh_native_stream_fail(struct gh_native_stream *s, const char *run_id,
			   const struct gh_err *e);
/* Sends "data: [DONE]" and ends the body. */
void gh_native_stream_end(struct gh_native_stream *s);

#endif
