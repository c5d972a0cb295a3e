/*
 * json.h - helpers around cJSON: bounded parsing with a clear error (the
 * one entry to cJSON's parser: gh_json_parse_opts), comment stripping for
 * the config file, canonical serialisation (for hashes) and typed
 * getters. Stateless; safe from any thread.
 */
#ifndef GH_JSON_H
#define GH_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "err.h"

/* Deepest nesting accepted from clients and upstreams. */
#define GH_JSON_MAX_DEPTH 64
/* Deepest nesting accepted in documents gatehouse wrote itself (stored
 * run state, messages): client and model values of GH_JSON_MAX_DEPTH
 * levels sit inside a few levels of gatehouse's own envelopes. */
#define GH_JSON_MAX_DEPTH_STORED 128
/* Largest input the parser takes at all; callers bound their inputs far
 * tighter (server.max_body_bytes, upstream reply caps). */
#define GH_JSON_MAX_BYTES ((size_t)1 << 30)

/* Options of gh_json_parse_opts. */
#define GH_JSON_DUPS_OK      0x1u /* leave repeated member names to the caller */
#define GH_JSON_NUL_REPLACE  0x2u /* \u0000 in a string becomes U+FFFD, not an error */
#define GH_JSON_DEEP         0x4u /* depth bound GH_JSON_MAX_DEPTH_STORED */
/* Replies and streams of providers and tools: a model that writes \u0000
 * gets U+FFFD in its text rather than a failed run. */
#define GH_JSON_UPSTREAM     GH_JSON_NUL_REPLACE
/* Documents gatehouse stored itself (database columns, audit rows). */
#define GH_JSON_STORED       (GH_JSON_DUPS_OK | GH_JSON_DEEP)

/*
 * THE way to parse JSON in gatehouse: every document that comes from
 * outside (request bodies, upstream replies and stream chunks, MCP and
 * A2A messages, tool responses, the config file) and every stored one
 * goes through here; src/ calls no cJSON_Parse* anywhere else (a test
 * checks). The one other reader, jread.h (an OpenAI reply read without a
 * tree), takes only a strict subset of what this accepts and hands
 * everything else back here. cJSON's parser is recursive and allows 1000 levels, which
 * overflows a worker thread's stack long before gatehouse could look at
 * the tree, so a linear pre-scan bounds the input first, before cJSON
 * sees a byte:
 *   - size: at most GH_JSON_MAX_BYTES (GH_E_TOOBIG);
 *   - depth: at most GH_JSON_MAX_DEPTH containers (GH_JSON_DEEP:
 *     GH_JSON_MAX_DEPTH_STORED), counted outside strings the way cJSON
 *     will nest them, so cJSON never recurses deeper;
 *   - NUL: a raw NUL byte anywhere, or a \u0000 escape in a string or a
 *     member name, is refused (a C string would end there: what gatehouse
 *     checked and what it used could differ); GH_JSON_NUL_REPLACE turns
 *     the escape into U+FFFD instead.
 * Then cJSON parses exactly n bytes of s as one JSON value (trailing
 * whitespace allowed), and objects with a member name given twice are
 * refused unless GH_JSON_DUPS_OK.
 *
 * On failure returns GH_E_BADREQ (GH_E_TOOBIG for size, GH_E_NOMEM) with a
 * message that names what (e.g. "request body"), where ("line L, column
 * C") and, for depth and NUL, the JSON path ("$.messages[0].content"),
 * and *out NULL. On success *out is owned by the caller (cJSON_Delete).
 */
enum gh_code gh_json_parse_opts(const char *s, size_t n, const char *what, unsigned flags,
				cJSON **out, struct gh_err *e);

/* gh_json_parse_opts with no options: for anything from outside. */
enum gh_code gh_json_parse(const char *s, size_t n, const char *what, cJSON **out,
			   struct gh_err *e);

/* The same, but leaving repeated member names to the caller (the config
 * loader reports them with their JSON path). */
enum gh_code gh_json_parse_dups(const char *s, size_t n, const char *what, cJSON **out,
				struct gh_err *e);

/* Parses a NUL-terminated document gatehouse wrote itself or compiled in
 * (GH_JSON_STORED); NULL when it is not valid JSON or on OOM. */
cJSON *gh_json_parse_stored(const char *s);

/* Replaces // line and block comments outside strings with spaces, in
 * place, keeping newlines so positions stay right. Returns -1 on an
 * unterminated block comment. */
int gh_json_strip_comments(char *s, size_t n);

/* Appends v in canonical form: object keys sorted bytewise, no whitespace,
 * integers up to 2^53 without exponent, other numbers as %.17g, strings
 * with the minimal escapes. Equal JSON values give equal bytes. On failure
 * (TOOBIG/NOMEM) the buffer is left as it was. */
int gh_json_canonical(const cJSON *v, struct gh_buf *out);

/* Appends v compactly (cJSON's own formatting) into a bounded buffer. */
int gh_json_print(const cJSON *v, struct gh_buf *out);

/* A number as gh_json_print writes one: integers up to 2^53 without an
 * exponent, other finite numbers as %.17g, non-finite ones as null. */
int gh_json_print_number(double d, struct gh_buf *out);

/* Compact print into a fresh string; caller frees. NULL on OOM. */
char *gh_json_dump(const cJSON *v);

/* Getters: NULL/dflt when the key is absent or has another type. */
const char *gh_json_str(const cJSON *obj, const char *key);
int gh_json_bool(const cJSON *obj, const char *key, int dflt);
int64_t gh_json_int(const cJSON *obj, const char *key, int64_t dflt);

/* 1 when v is a number with an exact integer value within int64. */
int gh_json_is_int(const cJSON *v);

/* Adds a string member, or null when s is NULL. Returns the item or NULL
 * on OOM. */
cJSON *gh_json_add_str(cJSON *obj, const char *key, const char *s);

/* A tool's error result as the model sees it: {"error": message} (the
 * message formatted, at most 767 bytes). NULL on OOM. */
cJSON *gh_json_error_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Adds an ISO-8601 UTC time for Unix ms, or null when ms <= 0. */
void gh_json_add_time(cJSON *obj, const char *key, int64_t ms);

#endif
