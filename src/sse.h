/*
 * sse.h - Server-Sent Events: an incremental parser for the streamed
 * replies of LLM upstreams (OpenAI-compatible and Anthropic), and a small
 * writer for gatehouse's own SSE responses.
 *
 * The parser follows the WHATWG HTML "event stream" interpretation rules
 * and takes whatever bytes libcurl hands over: chunks may split the stream
 * at any byte, including between the CR and LF of a CRLF pair. Every byte
 * it keeps is bounded: a line longer than max_line or an event whose data
 * is longer than max_event fails the stream with GH_SSE_TOOBIG instead of
 * growing. Bytes already held are never rescanned when more arrive, so
 * feeding one byte at a time is linear in the stream length.
 *
 * Where gatehouse differs from the rules, because events reach C code:
 * a NUL byte in a data or event value is delivered as U+FFFD (EF BF BD),
 * so data, type and id are always plain C strings (an id value holding a
 * NUL is ignored, as the rules say). Bytes are not UTF-8 validated.
 *
 * Not thread-safe: one parser per upstream stream, used by one thread.
 */
#ifndef GH_SSE_H
#define GH_SSE_H

#include <stddef.h>

#include "buf.h"

enum { GH_SSE_OK = 0, GH_SSE_TOOBIG = -1, GH_SSE_NOMEM = -2 };

struct gh_sse_event {
	const char *type;   /* "message" when no event: field was given */
	const char *data;   /* NUL-terminated, no embedded NUL; borrowed until
	                     * the callback returns */
	size_t data_len;    /* == strlen(data), <= max_event */
	const char *id;     /* last event id so far, "" when none; borrowed */
	long retry_ms;      /* -1 when this event carried no valid retry:;
	                     * saturates at LONG_MAX */
};

/* Called for each dispatched event. Return 0 to go on, nonzero to stop:
 * gh_sse_feed() then returns that value at once. Use positive values so
 * they cannot be mistaken for GH_SSE_TOOBIG / GH_SSE_NOMEM. Must not
 * feed the same parser. */
typedef int (*gh_sse_event_fn)(void *ud, const struct gh_sse_event *ev);

/* Called for each comment line (": keep-alive"). text is what follows the
 * colon, one leading space stripped; it is NUL-terminated at len but may
 * hold NUL bytes (len is authoritative). Borrowed until the callback
 * returns. Same return rule as gh_sse_event_fn. */
typedef int (*gh_sse_comment_fn)(void *ud, const char *text, size_t len);

struct gh_sse_parser;

/* A parser for one stream. max_line bounds one line (terminator not
 * counted), max_event the data of one event as dispatched. Returns NULL
 * on OOM. Caller frees with gh_sse_free(). */
struct gh_sse_parser *gh_sse_new(size_t max_line, size_t max_event);

/* Frees p and all it holds. NULL is a no-op. */
void gh_sse_free(struct gh_sse_parser *p);

/* Parses the next n bytes of the stream (chunk may be NULL when n is 0;
 * the bytes are not kept past the call). Calls on_event for each event
 * completed by a blank line and on_comment for each comment, in stream
 * order; either may be NULL to drop those.
 *
 * Returns GH_SSE_OK, GH_SSE_TOOBIG (a line over max_line or an event's
 * data over max_event), GH_SSE_NOMEM, or a callback's nonzero stop value.
 * Any of these but GH_SSE_OK leaves the parser spent: the rest of the
 * chunk is dropped and later feeds return the same value without parsing.
 * Events dispatched before the failure were delivered. */
int gh_sse_feed(struct gh_sse_parser *p, const char *chunk, size_t n,
		gh_sse_event_fn on_event, gh_sse_comment_fn on_comment, void *ud);

/* End of stream. Returns 1 when the stream was truncated: a partial line,
 * or field lines not yet closed by a blank line, were pending (they are
 * NOT dispatched, per the rules), or an earlier feed failed or was
 * stopped. Returns 0 when the stream ended cleanly. Either way the parser
 * is reset to a fresh one with the same bounds (the last event id is
 * forgotten) and may read another stream. */
int gh_sse_finish(struct gh_sse_parser *p);

/* Appends one event to b: "event: <type>\n" when type != NULL, then
 * "data: <line>\n" for each line of payload, then "\n". Payload lines end
 * at LF, CR or CRLF, so a payload can never inject fields or end the event
 * early; a parser gives the payload back with each line end as LF.
 * payload may be NULL when len is 0 (one empty data: line is written).
 * type (a C string) must not contain CR or LF: such a type is refused with
 * GH_BUF_TOOBIG. Returns a GH_BUF_* code; on failure b is left as it was. */
int gh_sse_write(struct gh_buf *b, const char *type, const char *payload, size_t len);

#endif
