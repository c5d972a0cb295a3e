/*
 * provider_int.h - what the provider_*.c files share, implemented in
 * provider.c: one HTTP exchange with an LLM upstream (a JSON reply or an
 * SSE stream), the error text for a failed one, tool calls assembled from
 * streamed fragments, and small CoreMessage readers. Nothing outside
 * provider*.c includes it.
 *
 * All of it works on caller-owned state for one request on one thread.
 */
#ifndef GH_PROVIDER_INT_H
#define GH_PROVIDER_INT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"
#include "provider.h"
#include "sse.h"
#include "upstream.h"

/* Longest SSE line taken from an upstream. */
#define GH_PROVIDER_MAX_LINE (1u << 20)
/* Most tool calls one reply may carry. */
#define GH_PROVIDER_MAX_CALLS 128
/* Most headers a client of the upstream's own API has passed on. */
#define GH_PROVIDER_PASS_HEADERS 4

/* A tool call being assembled from a stream. */
struct gh_provider_acc {
	int key;                 /* the upstream's index: OpenAI tool index, Anthropic block */
	char *id;
	char *name;
	struct gh_buf args;      /* argument text so far */
};

/* A streamed reply being assembled. Everything it keeps counts against
 * budget (conf->max_response_bytes). */
struct gh_provider_stream {
	const struct gh_provider_conf *conf;
	const struct gh_chat_events *ev;
	const char *type;        /* "openai" / "anthropic", for messages */
	struct gh_buf text;
	struct gh_provider_acc *calls;
	size_t ncalls;
	size_t alloc;
	size_t budget;           /* bytes still allowed for text + arguments */
	enum gh_finish finish;
	int have_finish;
	int done;                /* the upstream's end marker arrived */
	int64_t input_tokens;
	int64_t output_tokens;
	int cancelled;           /* an events callback asked to stop */
	struct gh_err err;       /* set (code != GH_OK) when the stream was bad */
	char *detail;            /* req->error_detail: the whole story of a failure */
	size_t detail_cap;
	struct gh_provider_error *uerr; /* req->upstream_error, or NULL */
	cJSON *reasoning;        /* reasoning parts so far (provider-specific), or NULL */
	int in_batch;            /* inside an upstream read's batch (ev->batch) */
	int first_out;           /* the first text or reasoning went out at once */
};

/* After the stream's first text or reasoning was handed on: while the
 * events of one upstream read are batched into one write to the client,
 * the batch is cut once here, so that the first token does not wait for
 * the rest of the read to be relayed. 0, or nonzero when the client is
 * gone (st->cancelled set). */
int gh_provider_stream_first_out(struct gh_provider_stream *st);

/* Handles one SSE event; 0 to go on, nonzero to stop after setting
 * st->err (via gh_provider_stream_fail) or st->cancelled. */
typedef int (*gh_provider_event_fn)(struct gh_provider_stream *st,
				    const struct gh_sse_event *ev);

struct gh_provider_http {
	const char *path;                         /* appended to conf->base_url */
	const struct gh_upstream_header *headers; /* may hold the key */
	size_t nheaders;
	const char *body;
	size_t body_len;
	int stream;                               /* asked the upstream for SSE */
	gh_provider_event_fn on_event;            /* for SSE replies */
};

void gh_provider_stream_init(struct gh_provider_stream *st, const struct gh_provider_conf *conf,
			     const char *type, const struct gh_chat_request *req,
			     const struct gh_chat_events *ev);
void gh_provider_stream_free(struct gh_provider_stream *st);

/* Records a bad stream ("provider NAME (TYPE): " + fmt) and returns 1, the
 * value an event handler returns to stop. */
int gh_provider_stream_fail(struct gh_provider_stream *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same for a failure the upstream reported in its own words: tenants
 * see "provider NAME (TYPE): " + what, the detail (st->detail) has fmt. */
int gh_provider_stream_fail_upstream(struct gh_provider_stream *st, const char *what,
				     const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends assistant text and hands it to events->text_delta. 0 or stop. */
int gh_provider_stream_text(struct gh_provider_stream *st, const char *s, size_t n);

/* The call with this key (the newest when several share it); NULL when
 * none. */
struct gh_provider_acc *gh_provider_stream_call(struct gh_provider_stream *st, int key);

/* Starts a call: id and name copied; events->tool_delta gets them with an
 * empty fragment. The call's position is its index for events. 0 or stop. */
int gh_provider_stream_call_start(struct gh_provider_stream *st, int key, const char *id,
				  const char *name, struct gh_provider_acc **out);

/* Appends an argument fragment to a call and hands it to tool_delta. */
int gh_provider_stream_call_args(struct gh_provider_stream *st, struct gh_provider_acc *a,
				 const char *frag);

/* Moves the assembled text, calls, finish reason and usage into out
 * (arguments parsed; invalid JSON leaves args NULL, raw_args kept). */
enum gh_code gh_provider_stream_take(struct gh_provider_stream *st, struct gh_chat_response *out,
				     struct gh_err *e);

/* POSTs h to conf's upstream. A 2xx JSON reply is handed over as text in
 * *raw (the caller frees; the wire reads it, with or without a tree); for
 * a 2xx SSE reply raw->data is NULL and st holds the events' work
 * (h->on_event ran for each; whether the stream ended properly is the
 * provider's call, by its end marker). Any failure is returned with e
 * set: transport errors keep their code (GH_E_UPSTREAM, GH_E_TIMEOUT,
 * GH_E_CANCELLED), non-2xx is GH_E_UPSTREAM or GH_E_RATELIMIT (429), a bad
 * stream is st->err. e says what tenants may see ("HTTP 500", "connection
 * refused"); st->detail gets the upstream's address and its own error
 * message. */
enum gh_code gh_provider_exchange(const struct gh_provider_conf *conf, const char *type,
				  const struct gh_provider_http *h, struct gh_provider_stream *st,
				  struct gh_buf *raw, struct gh_err *e);

/* Records the upstream's own error (JSON body {"error":{"type","message"}}
 * or {"type","message"}) into st->uerr, when the caller asked for it. */
void gh_provider_note_error(struct gh_provider_stream *st, int status, const cJSON *body);

/* Replays a whole reply as stream events (for an upstream that answered a
 * stream request with plain JSON). 0 or nonzero when a callback stopped. */
int gh_provider_replay(const struct gh_chat_events *ev, const struct gh_chat_response *r);

/* An HTTP provider's wire: where its chat goes and how its request and
 * reply are written and read. */
struct gh_provider_wire {
	const char *type;                         /* "openai", "anthropic" */
	const char *path;                         /* appended to conf->base_url */
	/* The request body (caller frees). */
	enum gh_code (*build_body)(const struct gh_provider_conf *conf,
				   const struct gh_chat_request *req, char **out, struct gh_err *e);
	/* Headers beyond Content-Type into hdr (at most 2); values that must
	 * be made (Bearer <key>) go into scratch, wiped after the call. */
	enum gh_code (*headers)(const struct gh_provider_conf *conf, struct gh_upstream_header *hdr,
				size_t *n, struct gh_buf *scratch, struct gh_err *e);
	/* A JSON reply. */
	enum gh_code (*parse_reply)(const struct gh_provider_conf *conf, const cJSON *json,
				    struct gh_chat_response *out, struct gh_err *e);
	gh_provider_event_fn on_event;            /* each SSE event of a stream */
	/* What a stream that stopped is missing (" (no message_stop)"), or
	 * NULL when it ended whole. */
	const char *(*incomplete)(const struct gh_provider_stream *st);
	/* The same reply read from its text without a tree (may be NULL):
	 * 1 when out was filled exactly as parse_reply would fill it, 0 when
	 * the text is not in the shape it reads (parse_reply then gets the
	 * tree; out is left zeroed), -1 out of memory. */
	int (*read_reply)(const char *s, size_t n, struct gh_chat_response *out);
	/* on_event with every chunk read through its cJSON tree (may be NULL:
	 * on_event reads only trees): what on_event must match, for tests. */
	gh_provider_event_fn on_event_tree;
};

/* A chat over an HTTP provider's wire: the request built and sent, then a
 * JSON reply parsed (and replayed to the events when a stream was asked
 * for but JSON came), or the stream's result taken. out is cleared on
 * failure. */
enum gh_code gh_provider_http_chat(const struct gh_provider_wire *w,
				   const struct gh_provider_conf *conf,
				   const struct gh_chat_request *req,
				   const struct gh_chat_events *events,
				   struct gh_chat_response *out, struct gh_err *e);

/* Fills a call from an id, a name and argument text (parsed when valid
 * JSON, "" meaning {}). Copies everything; GH_E_NOMEM on OOM. */
enum gh_code gh_provider_call_set(struct gh_tool_call *c, const char *id, const char *name,
				  const char *args, size_t args_len);

/* Replaces every occurrence of conf's api_key in e->msg. */
void gh_provider_scrub(const struct gh_provider_conf *conf, struct gh_err *e);

/* ---- CoreMessage readers ---- */

/* The text of a message's content: the string, or its "text" parts joined
 * by "\n". Appends to b. */
int gh_provider_content_text(const cJSON *content, struct gh_buf *b);

/* A tool result as text: the string itself, else compact JSON. Caller
 * frees; NULL on OOM. */
char *gh_provider_result_text(const cJSON *result);

/* Tool-call args as JSON text: a string as is, a missing value as "{}",
 * anything else compact. Caller frees; NULL on OOM. */
char *gh_provider_args_text(const cJSON *args);

/* Adds a tool's "name", "description" (when it has one) and its input
 * schema under schema_key (an empty object schema when it has none) to o,
 * as both wire formats describe a tool. -1 when out of memory. */
int gh_provider_tool_fields(cJSON *o, const struct gh_tool_spec *t, const char *schema_key);

/* Anthropic streams: 1 when data (n bytes) is a text delta in the exact
 * form the API writes, {"type":"content_block_delta","index":N,"delta":
 * {"type":"text_delta","text":"..."}}, whose text has no escape, quote or
 * control character; *text then points into data (*len bytes), which is
 * what a full parse would give. 0 for anything else, which the caller
 * parses whole. Most events of a stream are such deltas: they go by
 * without a tree. */
int gh_provider_anthropic_text_delta(const char *data, size_t n, const char **text,
				     size_t *len);

#endif
