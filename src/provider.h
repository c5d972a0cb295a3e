/*
 * provider.h - LLM providers behind a small vtable: openai (Chat
 * Completions, any compatible base_url), anthropic (Messages API) and mock
 * (offline, deterministic, from config rules).
 *
 * The run engine speaks one message format, CoreMessages (the AI SDK shape
 * Mastra clients already use), and each provider translates it to and from
 * its wire format:
 *
 *   {"role":"user","content":"text" | [{"type":"text","text":"..."}]}
 *   {"role":"assistant","content":"text" | [{"type":"text","text":"..."},
 *       {"type":"tool-call","toolCallId":"...","toolName":"...","args":{...}}]}
 *   {"role":"tool","content":[{"type":"tool-result","toolCallId":"...",
 *       "toolName":"...","result":<any JSON>,"isError":true?}]}
 *
 * Providers are stateless (each transfer takes its curl handles from the
 * pool in upstream.h); gh_provider_chat may run on many threads at once.
 */
#ifndef GH_PROVIDER_H
#define GH_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"

/* An upstream's own error, as it worded it (for surfaces that speak the
 * upstream's API and keep its wording): its HTTP status (0 for an error
 * event inside a stream), its error type and message. Never its address. */
struct gh_provider_error {
	int status;
	char type[64];
	char message[512];
};

struct gh_upstream_header;

struct gh_tool_spec {
	const char *name;
	const char *description;
	const cJSON *schema;        /* JSON Schema of the arguments; borrowed */
};

struct gh_chat_request {
	const char *model;
	const char *system;         /* NULL = no system prompt */
	const cJSON *messages;      /* array of CoreMessages; borrowed */
	const struct gh_tool_spec *tools;
	size_t ntools;
	int has_temperature;
	double temperature;
	int64_t max_tokens;         /* 0 = provider default */
	int stream;                 /* ask the upstream to stream; deltas go to events */
	/* Optional: on failure, the whole error (the upstream's address, its
	 * own message) for logs and the audit log, while e says only what
	 * tenants may see. Like curl's error buffer; "" when it succeeded. */
	char *error_detail;
	size_t error_detail_cap;
	/* Optional: what a client of the upstream's own API sent that gatehouse
	 * does not interpret, for a provider of type passthrough_type only
	 * ("anthropic"): top-level body fields (an object; the provider's own
	 * fields win, except "system", which is sent as given with the agent's
	 * instructions before it) and request headers (anthropic-version and
	 * anthropic-beta). Other providers drop them (the caller logs it). */
	const char *passthrough_type;
	const cJSON *passthrough;
	const struct gh_upstream_header *pass_headers;
	size_t npass_headers;
	/* Optional: filled when the upstream answered with its own error. */
	struct gh_provider_error *upstream_error;
};

/* Streaming callbacks (all optional). Return nonzero to abort the request
 * (gh_provider_chat then returns GH_E_CANCELLED). */
struct gh_chat_events {
	int (*text_delta)(void *ud, const char *text, size_t len);
	/* A tool call's arguments as they stream: first call carries id and
	 * name, later ones only fragments. index orders calls of one step. */
	int (*tool_delta)(void *ud, int index, const char *id, const char *name,
			  const char *args_fragment);
	/* Called at least every 50 ms while waiting on the upstream, or, with
	 * wake_fd, when it stirs and every tick_ms (see gh_upstream_req). */
	int (*tick)(void *ud);
	void *ud;
	int wake_fd;
	int64_t tick_ms;
	/* The model's reasoning as it streams (Anthropic thinking blocks):
	 * text fragments, and the block's signature when it comes (text
	 * empty). The whole blocks come back in gh_chat_response.reasoning. */
	int (*reasoning_delta)(void *ud, const char *text, size_t len, const char *signature);
	/* Optional: brackets the events one upstream read delivers (open 1
	 * before the first, 0 after the last), so a consumer can send them
	 * together; nonzero after the last aborts the call (the run was cancelled). */
	int (*batch)(void *ud, int open);
	/* Optional: the model's request has been written whole (once per
	 * attempt; streaming calls only). */
	void (*sent)(void *ud);
	/* Optional, streaming calls: the relay's op (gh_relay_op, relay.h),
	 * answered by the consumer; without it the calling thread reads the
	 * whole reply. */
	int (*relay)(void *ud, int op);
};

struct gh_tool_call {
	char *id;                   /* the upstream's id ("" when it gave none) */
	char *name;
	cJSON *args;                /* parsed arguments; NULL when not valid JSON */
	char *raw_args;             /* the arguments text as received */
};

enum gh_finish {
	GH_FINISH_STOP,
	GH_FINISH_LENGTH,
	GH_FINISH_TOOL_CALLS,
	GH_FINISH_CONTENT_FILTER,
	GH_FINISH_OTHER
};

struct gh_chat_response {
	char *text;                 /* assistant text; "" when none */
	struct gh_tool_call *calls;
	size_t ncalls;
	enum gh_finish finish;
	int64_t input_tokens;
	int64_t output_tokens;
	/* The model's reasoning blocks in order, as CoreMessage parts
	 * {type:"reasoning", text, signature?} or {type:"redacted-reasoning",
	 * data}, byte for byte; NULL when none. */
	cJSON *reasoning;
};

/* Frees everything r owns and zeroes it. */
void gh_chat_response_clear(struct gh_chat_response *r);

/* Sends req to the provider conf describes and fills out (zeroed by the
 * caller; on failure it is left cleared). Errors, as tenants may see them:
 * the provider's name and what went wrong, never the upstream's address or
 * its own error text (those go to req->error_detail):
 *   GH_E_UPSTREAM  unreachable, reset, non-2xx, malformed or truncated reply:
 *                  "provider local (openai): HTTP 500", "provider local
 *                  (openai): connection refused"
 *   GH_E_TIMEOUT   connect or total timeout
 *   GH_E_CANCELLED an events callback asked to stop
 *   GH_E_RATELIMIT the upstream kept answering 429 after retries
 * Provider keys never appear in e or the detail. */
enum gh_code gh_provider_chat(const struct gh_provider_conf *conf,
			      const struct gh_chat_request *req,
			      const struct gh_chat_events *events,
			      struct gh_chat_response *out, struct gh_err *e);

/* The vtable each provider implements (provider_<type>.c). */
struct gh_provider_wire;
struct gh_provider_ops {
	const char *type;
	/* A provider that is not HTTP (mock) chats itself; an HTTP provider
	 * describes its wire instead (provider_int.h) and provider.c talks it. */
	enum gh_code (*chat)(const struct gh_provider_conf *conf,
			     const struct gh_chat_request *req,
			     const struct gh_chat_events *events,
			     struct gh_chat_response *out, struct gh_err *e);
	const struct gh_provider_wire *wire;
};

extern const struct gh_provider_ops gh_provider_openai;
extern const struct gh_provider_ops gh_provider_anthropic;
extern const struct gh_provider_ops gh_provider_mock;

#endif
