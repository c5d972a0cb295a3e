/*
 * jsregex.h - JavaScript regular expressions (JSON Schema "pattern", as
 * zod and OpenAI-style schemas write them) on top of POSIX regex.
 *
 * \d \w \s and their negations, escaped punctuation, (?:...), named
 * groups, lazy quantifiers and \u escapes are translated; "." and [^...]
 * match whole UTF-8 characters. Lookaround, back-references, \p{...} and
 * non-ASCII characters inside [...] are refused (a schema using them is
 * refused, rather than enforced differently). glibc's matcher can take
 * time that grows with both pattern and input, so every match is bounded
 * by pattern size x input length.
 *
 * Threading: stateless; a cache belongs to one caller.
 */
#ifndef GH_JSREGEX_H
#define GH_JSREGEX_H

#include <regex.h>
#include <stddef.h>

/* Patterns compiled during one validation, keyed by the address of their
 * source string. Zero it before use; free with gh_jsregex_cache_free. */
#define GH_JSREGEX_CACHE 8
struct gh_jsregex_cache {
	struct {
		const char *src;
		regex_t re;
		long cost;
	} e[GH_JSREGEX_CACHE];
	int n;
	int evict; /* next slot to reuse once all are taken */
};

/* Translates the JavaScript pattern src and compiles it into re (caller
 * regfree()s on success); *cost is its size in regex nodes. -1 with the
 * reason in why ("uses lookahead") when it cannot be enforced. */
int gh_jsregex_compile(const char *src, regex_t *re, long *cost, char *why, size_t cap);

/* 1 when s (n bytes) matches the pattern, 0 when not, -1 (reason in why)
 * when the pattern cannot be used, -2 when s is too long to check against
 * this pattern within GH_SCHEMA_MAX_PATTERN_WORK (why then holds the
 * longest length that can be). A compilation adds the pattern's size to
 * *steps. */
int gh_jsregex_match(struct gh_jsregex_cache *c, const char *src, const char *s, size_t n,
		     long *steps, char *why, size_t cap);

void gh_jsregex_cache_free(struct gh_jsregex_cache *c);

#endif
