/*
 * schema.h - JSON Schema checks for tool arguments.
 *
 * Every tool call is validated against its tool's JSON Schema before it
 * runs: server tools (schemas from the config file) and client tools
 * (schemas declared per request by Mastra client-js, the OpenAI SDK, A2A
 * clients; usually draft-07 as zod-to-json-schema emits it). A schema is
 * first checked once with gh_schema_check(), when it is loaded or declared;
 * then every call's arguments go through gh_schema_validate(). A failed
 * validation becomes a tool error the model sees, so messages are short and
 * name the JSON path of the offending value:
 *
 *   $.recipients[2]: expected string, got number
 *   $: missing required property "to"
 *   $.priority: must be one of "low", "high"
 *   $.extra: additional property not allowed
 *
 * "pattern" is written in JavaScript regex syntax by clients; gatehouse
 * enforces it with POSIX extended regexes (regcomp REG_EXTENDED|REG_NOSUB)
 * after translating the common JavaScript forms (\d \w \s and their
 * negations, escaped punctuation, (?:...), lazy quantifiers, \uXXXX).
 * "." and character classes match whole UTF-8 characters. Constructs with
 * no POSIX equivalent (lookaround, back-references, \p{...}) make
 * gh_schema_check() refuse the schema rather than enforce something else.
 *
 * Both functions are stateless and safe from any thread; they allocate only
 * temporarily and free before returning. Neither keeps a pointer into the
 * schema or the value.
 */
#ifndef GH_SCHEMA_H
#define GH_SCHEMA_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Deepest schema nesting gh_schema_check() accepts (properties of
 * properties of ...). */
#define GH_SCHEMA_MAX_DEPTH 32
/* Deepest value nesting gh_schema_validate() descends into. */
#define GH_SCHEMA_MAX_VALUE_DEPTH 64
/* Most $ref hops along one path of a validation. */
#define GH_SCHEMA_MAX_REF_HOPS 32
/* Work budget: schema applications per validation (and schema nodes per
 * check). Bounds the cost of anyOf/oneOf/$ref combinations that would
 * otherwise grow exponentially. */
#define GH_SCHEMA_MAX_STEPS (1L << 20)
/* Longest "pattern" (bytes) gatehouse compiles. */
#define GH_SCHEMA_MAX_PATTERN 2048
/* glibc's regexec can take memory and time proportional to the string
 * length times the pattern's size (hundreds of MB for a crafted pattern
 * on a 64 KB string), so a string is checked against a pattern only when
 * bytes * (pattern size in regex nodes) stays within this; a longer string
 * fails with "too long (N bytes) to check against pattern ...". A simple
 * pattern like "^[a-z0-9_-]+$" allows about 128 KB. */
#define GH_SCHEMA_MAX_PATTERN_WORK (1L << 18)
/* A msg buffer of this size never truncates a message of either function
 * except for very long property names or values quoted in it. */
#define GH_SCHEMA_MSG_MAX 256

/* Checks that schema is a schema gatehouse can enforce: an object (or
 * true/false); known "type" names; "properties" an object of schemas;
 * "required" an array of strings; "items" a schema (or array form); "enum"
 * an array; numeric bounds numbers; "$ref" local ("#/..." JSON pointer) and
 * resolvable; nested depth <= 32 (GH_SCHEMA_MAX_DEPTH). Unknown keywords
 * are ignored (as JSON Schema says). "pattern" (and patternProperties keys)
 * must translate to a POSIX extended regex that compiles; a $ref chain that
 * loops back on itself without reaching a schema is refused.
 *
 * On failure writes a message naming the schema path
 * ("properties.to.type: unknown type \"strng\"") into msg (cap bytes,
 * always NUL-terminated when cap > 0; msg may be NULL when cap is 0) and
 * returns -1; 0 when usable. schema is borrowed. */
int gh_schema_check(const cJSON *schema, char *msg, size_t cap);

/* Validates value against schema (already checked with gh_schema_check;
 * an unchecked schema never crashes this, but malformed keywords are
 * skipped or fail). Returns 0 when valid, -1 with the FIRST violation's
 * message in msg (cap bytes, as above; "" on success).
 *
 * Never recurses deeper than 64 levels of value or 32 $ref hops (returns -1
 * with "schema too deep" in the message instead) and gives up with "schema
 * too complex" after GH_SCHEMA_MAX_STEPS steps (a schema application, or
 * 64 bytes of string scanned). A string too long for its pattern (see
 * GH_SCHEMA_MAX_PATTERN_WORK) fails validation. Messages are valid UTF-8
 * when the value's strings are, even when cut to fit cap.
 *
 * Keywords: type (string or array; "integer" means a number with no
 * fractional part), properties, required, additionalProperties (bool or
 * schema), patternProperties, items (schema; array form = tuple, then
 * additionalItems), prefixItems, minItems/maxItems, uniqueItems,
 * minProperties/maxProperties, enum, const (deep equality: 1 equals 1.0,
 * key order ignored), minimum/maximum/exclusiveMinimum/exclusiveMaximum
 * (number and draft-4 boolean forms), multipleOf, minLength/maxLength
 * (counted in Unicode code points, not bytes), pattern, format (ignored),
 * allOf/anyOf/oneOf/not, nullable (OpenAPI style: true => null is valid),
 * $ref/definitions/$defs (keywords beside a $ref apply too), and boolean
 * schemas. When no anyOf/oneOf branch matches, the message is the one of
 * the branch that got furthest, or "expected A or B, got C" when every
 * branch failed on the type. value and schema are borrowed. */
int gh_schema_validate(const cJSON *schema, const cJSON *value, char *msg, size_t cap);

#endif
