/*
 * mcp_proto.h - the messages of gatehouse's MCP client: the JSON-RPC 2.0
 * requests and notifications it sends to an upstream MCP server, and the
 * parsing of everything an upstream sends back, however it arrives
 * (newline-delimited on a child's stdout, one JSON body, or the events of
 * an SSE stream).
 *
 * No I/O, no HTTP, no processes: the transports (mcp_stdio.c,
 * mcp_http.c) move bytes, this module turns them into typed messages and
 * checked results. Every upstream byte goes through gh_json_parse_opts
 * with a size bound the transport chose, so a hostile or broken server
 * can make a call fail, never gatehouse crash or grow without bound (a
 * libFuzzer target drives the reader and every result parser).
 *
 * Threading: pure functions, plus a reader that belongs to one stream and
 * is used by one thread at a time.
 */
#ifndef GH_MCP_PROTO_H
#define GH_MCP_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"

/* The protocol revisions gatehouse speaks to upstreams, newest first. */
#define GH_MCP_PROTO_LATEST "2025-11-25"
#define GH_MCP_PROTO_PREVIOUS "2025-06-18"

/* A federated tool's name as gatehouse exposes it: prefix + the
 * upstream's name, at most this many characters of [A-Za-z0-9_-]. */
#define GH_MCP_NAME_MAX 64
/* The longest tool name gatehouse takes from an upstream. */
#define GH_MCP_UPSTREAM_NAME_MAX 128
/* The longest tool description kept. */
#define GH_MCP_DESCRIPTION_MAX 65536
/* A SHA-256 digest in hex, with its terminator. */
#define GH_MCP_DIGEST_HEX 65

/* JSON-RPC error codes gatehouse sends or recognises. */
#define GH_JSONRPC_PARSE_ERROR -32700
#define GH_JSONRPC_INVALID_REQUEST -32600
#define GH_JSONRPC_METHOD_NOT_FOUND -32601
#define GH_JSONRPC_INVALID_PARAMS -32602
#define GH_JSONRPC_INTERNAL_ERROR -32603

enum gh_mcp_kind {
	GH_MCP_INVALID,       /* not a JSON-RPC 2.0 message: why is in error */
	GH_MCP_RESPONSE,      /* {id, result} */
	GH_MCP_ERROR,         /* {id, error:{code, message}} */
	GH_MCP_NOTIFICATION,  /* {method, params?} */
	GH_MCP_REQUEST        /* {id, method, params?}: the server asks gatehouse */
};

/* One message from an upstream. */
struct gh_mcp_msg {
	enum gh_mcp_kind kind;
	/* RESPONSE/ERROR: the id as gatehouse sent it (a non-negative
	 * integer); -1 when the id is anything else (not an answer to a
	 * request of gatehouse's). */
	int64_t id;
	const cJSON *req_id;          /* REQUEST: the server's id, to answer with */
	char method[128];             /* NOTIFICATION/REQUEST ("" otherwise) */
	const cJSON *params;          /* NOTIFICATION/REQUEST: object or NULL */
	const cJSON *result;          /* RESPONSE */
	int64_t error_code;           /* ERROR */
	char error[256];              /* ERROR: the server's message; INVALID: why */
	cJSON *root;                  /* owns everything above; gh_mcp_msg_clear */
};

/* Parses one message of n bytes. Always fills *m (kind GH_MCP_INVALID with
 * the reason when the bytes are not a JSON-RPC 2.0 message); returns
 * GH_E_NOMEM only when memory ran out. Release with gh_mcp_msg_clear. */
enum gh_code gh_mcp_msg_parse(const char *s, size_t n, struct gh_mcp_msg *m);
void gh_mcp_msg_clear(struct gh_mcp_msg *m);

/* ------------------------------------------------------------- reader */

enum gh_mcp_framing {
	GH_MCP_LINES,   /* stdio: one message per line (LF or CRLF); blank lines skipped */
	GH_MCP_SSE,     /* an SSE stream: each "message" event's data is one message */
	GH_MCP_JSON     /* an HTTP body: the whole of it is one message */
};

/* Called for each message read (INVALID ones included, so they can be
 * logged). m is borrowed until the callback returns; the callback may
 * keep the message by moving it out (*keep = *m, then m->root = NULL).
 * Return 0 to go on, nonzero (positive) to stop: the feed returns that
 * value. */
typedef int (*gh_mcp_msg_fn)(void *ud, struct gh_mcp_msg *m);

struct gh_mcp_reader;

/* A reader for one stream; max_msg bounds one message (a line, an event's
 * data, a body). NULL on OOM. */
struct gh_mcp_reader *gh_mcp_reader_new(enum gh_mcp_framing f, size_t max_msg);
void gh_mcp_reader_free(struct gh_mcp_reader *r);

/* Feeds the next n bytes (any split). Returns 0, a callback's stop value,
 * GH_MCP_READ_TOOBIG when a message exceeded max_msg (the stream cannot be
 * trusted further: the reader stays spent and returns it again), or
 * GH_MCP_READ_NOMEM. */
#define GH_MCP_READ_TOOBIG (-1)
#define GH_MCP_READ_NOMEM (-2)
int gh_mcp_reader_feed(struct gh_mcp_reader *r, const char *p, size_t n, gh_mcp_msg_fn fn,
		       void *ud);
/* End of stream: delivers what is complete (a last line without its line
 * end; the JSON body) and returns like feed; 1 when an SSE stream ended
 * mid-event or the body was empty. The reader may then read a new stream. */
int gh_mcp_reader_finish(struct gh_mcp_reader *r, gh_mcp_msg_fn fn, void *ud);

/* ----------------------------------------------------------- building */

/* Appends {"jsonrpc":"2.0","id":id,"method":method,"params":params} (params
 * may be NULL: omitted). A GH_BUF_* code. */
int gh_mcp_build_request(struct gh_buf *b, int64_t id, const char *method, const cJSON *params);
int gh_mcp_build_notification(struct gh_buf *b, const char *method, const cJSON *params);
/* Answers a server's request: result (NULL: {}) or an error. */
int gh_mcp_build_result(struct gh_buf *b, const cJSON *req_id, const cJSON *result);
int gh_mcp_build_error(struct gh_buf *b, const cJSON *req_id, int code, const char *message);

/* The params of initialize: the protocol version asked for, no client
 * capabilities (gatehouse answers no sampling, roots or elicitation), and
 * clientInfo {name: "gatehouse", version}. Caller frees; NULL on OOM. */
cJSON *gh_mcp_initialize_params(const char *version);

/* The params of tools/call: {name, arguments, _meta:{progressToken}}
 * (progress_token < 0: no _meta). arguments is duplicated. */
cJSON *gh_mcp_call_params(const char *name, const cJSON *arguments, int64_t progress_token);

/* ------------------------------------------------------------ results */

struct gh_mcp_init {
	char version[32];             /* the revision both sides speak */
	int tools_list_changed;       /* capabilities.tools.listChanged */
	int has_tools;                /* capabilities.tools present */
	char server_name[128];        /* serverInfo.name ("" when absent) */
	char server_version[64];
};

/* Checks an initialize result: a protocolVersion gatehouse speaks
 * (GH_E_UPSTREAM naming both sides' versions otherwise). */
enum gh_code gh_mcp_parse_init(const cJSON *result, struct gh_mcp_init *out, struct gh_err *e);

/* One page of tools/list: *tools is result.tools (borrowed; an array),
 * *cursor the nextCursor (borrowed; NULL on the last page). GH_E_UPSTREAM
 * when the page is malformed. */
enum gh_code gh_mcp_parse_tools_page(const cJSON *result, const cJSON **tools,
				     const char **cursor, struct gh_err *e);

/* A tool definition as gatehouse keeps, pins and offers it. */
struct gh_mcp_tool_def {
	cJSON *def;                   /* {name, title?, description?, inputSchema,
				       * outputSchema?, annotations?}: what is pinned */
	const char *name;             /* borrowed from def */
	const char *title;            /* NULL when absent */
	const char *description;      /* NULL when absent */
	const cJSON *input_schema;    /* an object schema gatehouse can enforce */
	const cJSON *output_schema;   /* NULL when absent */
	const cJSON *annotations;     /* NULL or {title?, readOnlyHint?, destructiveHint?,
				       * idempotentHint?, openWorldHint?} (booleans kept
				       * only when they are booleans) */
	char digest[GH_MCP_DIGEST_HEX]; /* SHA-256 of def's canonical JSON */
};

/* Checks one element of tools/list (or a stored definition): a name of 1..
 * GH_MCP_UPSTREAM_NAME_MAX bytes with no control character, an optional
 * description string (at most GH_MCP_DESCRIPTION_MAX bytes), inputSchema an
 * object schema gh_schema_check accepts, outputSchema likewise when given,
 * annotations an object. Keeps only those members (and title). On failure
 * returns GH_E_UPSTREAM with the reason (naming the tool when it has a
 * name) and out->def NULL. Release with gh_mcp_tool_def_clear. */
enum gh_code gh_mcp_tool_def_parse(const cJSON *tool, struct gh_mcp_tool_def *out,
				   struct gh_err *e);
void gh_mcp_tool_def_clear(struct gh_mcp_tool_def *d);

/* What annotations say about approval by default. */
enum gh_mcp_hint {
	GH_MCP_HINT_READONLY,         /* readOnlyHint true: no approval */
	GH_MCP_HINT_NOT_DESTRUCTIVE,  /* destructiveHint false: no approval */
	GH_MCP_HINT_DESTRUCTIVE,      /* destructiveHint true: approval */
	GH_MCP_HINT_DEFAULT           /* neither said: the spec's default is destructive */
};
enum gh_mcp_hint gh_mcp_hint_of(const cJSON *annotations);

/* The name gatehouse exposes: prefix + name, each character outside
 * [A-Za-z0-9_-] replaced by '_'. -1 with why (cap bytes) when the result is
 * empty or longer than GH_MCP_NAME_MAX. */
int gh_mcp_expose_name(const char *prefix, const char *name, char out[GH_MCP_NAME_MAX + 1],
		       char *why, size_t cap);

/* Checks a tools/call result and gives back what the caller sees:
 * {content:[...], structuredContent?, isError?} with exactly the
 * upstream's values (content defaults to []); *is_error is isError. When
 * output_schema is set and structuredContent is there but does not match
 * it (or is missing on a success), the result is a tool error saying so.
 * GH_E_UPSTREAM when the result is malformed. *out owned by the caller. */
enum gh_code gh_mcp_parse_call_result(const cJSON *result, const cJSON *output_schema,
				      cJSON **out, int *is_error, struct gh_err *e);

/* A notifications/progress: its token (an integer gatehouse sent; -1
 * otherwise), progress, total (-1 when absent) and message (NULL). 0 when
 * params are well formed. Borrowed from params. */
struct gh_mcp_progress {
	int64_t token;
	double progress;
	double total;
	const char *message;
};
int gh_mcp_parse_progress(const cJSON *params, struct gh_mcp_progress *out);

#endif
