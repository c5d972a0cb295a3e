/*
 * json.h - helpers around cJSON: bounded parsing with a clear error,
 * comment stripping for the config file, canonical serialisation (for
 * hashes) and typed getters. Stateless; safe from any thread.
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

/* Parses exactly n bytes of s as one JSON value (trailing whitespace
 * allowed). On failure returns GH_E_BADREQ with "invalid JSON at line L,
 * column C" in e, naming what (e.g. "request body"). *out is owned by the
 * caller (cJSON_Delete). Values nested deeper than GH_JSON_MAX_DEPTH
 * containers, and objects with a member name given twice (what is checked
 * and what is used could differ), are refused. */
enum gh_code gh_json_parse(const char *s, size_t n, const char *what, cJSON **out,
			   struct gh_err *e);

/* The same, but leaving repeated member names to the caller (the config
 * loader reports them with their JSON path). */
enum gh_code gh_json_parse_dups(const char *s, size_t n, const char *what, cJSON **out,
				struct gh_err *e);

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
