/*
 * jread.h - a JSON reader that builds no tree: a cursor over one JSON
 * text that checks the grammar as it goes and hands its caller the
 * members and values it asks for, skipping (and still checking) the rest.
 * For a hot path that needs a few fields of a document it did not write,
 * such as an upstream's reply, where a cJSON tree costs a malloc per node
 * and a strtod per number the caller never looks at.
 *
 * It reads a strict subset of what gh_json_parse_opts(GH_JSON_UPSTREAM)
 * accepts, and decodes it to the same values. Anything outside it makes
 * the reader fail, and the caller then parses the text the usual way,
 * which accepts it or words the error:
 *   - RFC 8259 grammar only: the four whitespace bytes, no raw control
 *     byte in a string, numbers of at most 63 bytes (cJSON's own bound);
 *   - a number that might be past double's range (1e999: cJSON reads
 *     infinity), judged from its digits: anything from 10^308 up;
 *   - a \u0000 escape (GH_JSON_NUL_REPLACE's business), a surrogate
 *     escape that is not a high one followed by a low one;
 *   - a member name with a backslash, a name given twice in one object,
 *     more than GH_JR_MAX_KEYS names in the open objects together;
 *   - more than GH_JSON_MAX_DEPTH nested containers, more than
 *     GH_JSON_MAX_BYTES of input.
 * A failure is sticky: every later call fails too. Nothing allocates but
 * gh_jr_string's buffer.
 *
 * Use: gh_jr_init, then read the root value with the calls below (each
 * consumes one whole value, or opens a container whose members or
 * elements the caller then walks), then gh_jr_done.
 */
#ifndef GH_JREAD_H
#define GH_JREAD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "json.h"

#define GH_JR_MAX_KEYS 64

/* A member name (gh_jr_member's name and len) against a string literal. */
#define GH_JR_NAME_IS(n, len, lit) ((len) == sizeof(lit) - 1 && !memcmp((n), (lit), (len)))

enum gh_jr_type {
	GH_JR_BAD,      /* failed, or no value here */
	GH_JR_NULL,
	GH_JR_BOOL,
	GH_JR_NUMBER,
	GH_JR_STRING,
	GH_JR_ARRAY,
	GH_JR_OBJECT
};

struct gh_jr_key {
	const char *s;
	size_t n;
};

struct gh_jr {
	const char *p, *end;
	int failed;
	int depth;
	unsigned char first[GH_JSON_MAX_DEPTH];   /* nothing read yet in this container */
	unsigned char object[GH_JSON_MAX_DEPTH];  /* the container is an object */
	unsigned char key_base[GH_JSON_MAX_DEPTH]; /* an object's first name in keys */
	size_t nkeys;
	struct gh_jr_key keys[GH_JR_MAX_KEYS];
};

void gh_jr_init(struct gh_jr *r, const char *s, size_t n);

/* The type of the value at the cursor (leading whitespace skipped), not
 * consumed; GH_JR_BAD when there is none or the reader failed. */
enum gh_jr_type gh_jr_peek(struct gh_jr *r);

/* Opens the object at the cursor; 0, or -1 when it is not one. */
int gh_jr_object(struct gh_jr *r);

/* The next member of the innermost open object: 1 with its name (raw,
 * not NUL-terminated, never containing a backslash) and the cursor on its
 * value, which the caller must then consume; 0 when the object closed
 * (consumed); -1 on failure. */
int gh_jr_member(struct gh_jr *r, const char **name, size_t *len);

/* Opens the array at the cursor; 0, or -1. */
int gh_jr_array(struct gh_jr *r);

/* 1 when the innermost open array has another element (the cursor on it,
 * to be consumed), 0 when it closed (consumed), -1 on failure. */
int gh_jr_next(struct gh_jr *r);

/* Consumes one value of any type, checking it; 0 or -1. */
int gh_jr_skip(struct gh_jr *r);

/* Consumes the string at the cursor, its decoded bytes replacing out's
 * contents (NUL-terminated); 0, -1 when it is not a string the reader
 * takes, or a GH_BUF_* error (out of memory, past out's cap). */
int gh_jr_string(struct gh_jr *r, struct gh_buf *out);

/* Consumes the value at the cursor: a string's decoded bytes into out
 * (*set 1), anything else skipped (*set 0: what gh_json_str's NULL
 * means). 1, 0 when the reader failed or the string is not one it takes
 * (the caller then reads the text the usual way), -1 out of memory. */
int gh_jr_string_opt(struct gh_jr *r, struct gh_buf *out, int *set);

/* Consumes the number at the cursor when it is an integer written as one
 * (no fraction, no exponent, at most 15 digits: exact as a double); 0 or
 * -1. */
int gh_jr_int(struct gh_jr *r, int64_t *v);

/* 0 when the root value has been read whole and only whitespace follows;
 * -1 otherwise. */
int gh_jr_done(struct gh_jr *r);

#endif
