/*
 * jread.c - the tree-less JSON reader; see jread.h for what it takes and
 * what makes it fail (and its caller fall back to gh_json_parse_opts).
 */
#include "jread.h"

#include <stdlib.h>
#include <string.h>

/* cJSON reads a number from at most this many bytes: a longer one is a
 * parse error there, so a failure here. */
#define NUMBER_MAX 63

/* The value of four hex digits at p, or -1. */
static long hex4(const char *p)
{
	long v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static int fail(struct gh_jr *r)
{
	r->failed = 1;
	return -1;
}

/* A buffer's error (GH_BUF_*), which ends the reading too. */
static int buf_fail(struct gh_jr *r, int rc)
{
	r->failed = 1;
	return rc;
}

static void skip_ws(struct gh_jr *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

void gh_jr_init(struct gh_jr *r, const char *s, size_t n)
{
	r->p = s;
	r->end = s + n;
	r->failed = !s || n > GH_JSON_MAX_BYTES;
	r->depth = 0;
	r->nkeys = 0;
}

enum gh_jr_type gh_jr_peek(struct gh_jr *r)
{
	if (r->failed)
		return GH_JR_BAD;
	skip_ws(r);
	if (r->p == r->end)
		return GH_JR_BAD;
	switch (*r->p) {
	case '{': return GH_JR_OBJECT;
	case '[': return GH_JR_ARRAY;
	case '"': return GH_JR_STRING;
	case 't':
	case 'f': return GH_JR_BOOL;
	case 'n': return GH_JR_NULL;
	default:
		return *r->p == '-' || (*r->p >= '0' && *r->p <= '9') ? GH_JR_NUMBER : GH_JR_BAD;
	}
}

static int open_container(struct gh_jr *r, enum gh_jr_type t)
{
	if (gh_jr_peek(r) != t || r->depth >= GH_JSON_MAX_DEPTH)
		return fail(r);
	r->first[r->depth] = 1;
	r->object[r->depth] = t == GH_JR_OBJECT;
	r->key_base[r->depth] = (unsigned char)r->nkeys;
	r->depth++;
	r->p++;
	return 0;
}

int gh_jr_object(struct gh_jr *r)
{
	return open_container(r, GH_JR_OBJECT);
}

int gh_jr_array(struct gh_jr *r)
{
	return open_container(r, GH_JR_ARRAY);
}

/* Before an element or member of the innermost container: its separator
 * or its closer. 1: an item follows; 0: closed. */
static int item(struct gh_jr *r, char closer)
{
	int d = r->depth - 1;

	if (r->failed || d < 0)
		return fail(r);
	skip_ws(r);
	if (r->p == r->end)
		return fail(r);
	if (*r->p == closer) {
		r->p++;
		r->depth--;
		r->nkeys = r->key_base[d];
		return 0;
	}
	if (r->first[d]) {
		r->first[d] = 0;
		return 1;
	}
	if (*r->p != ',')
		return fail(r);
	r->p++;
	return 1;
}

int gh_jr_next(struct gh_jr *r)
{
	if (!r->depth || r->object[r->depth - 1])
		return fail(r);
	return item(r, ']');
}

/* Checks the string at the cursor and moves past it. With out, decodes it
 * there. A name's raw span goes to *raw (no backslash allowed in it). */
static int string(struct gh_jr *r, struct gh_buf *out, struct gh_jr_key *raw)
{
	const char *p, *run;
	int rc;

	if (gh_jr_peek(r) != GH_JR_STRING)
		return fail(r);
	p = run = ++r->p;
	if (out) {
		gh_buf_reset(out);
		if ((rc = gh_buf_append(out, "", 0)) != GH_BUF_OK)
			return buf_fail(r, rc);
	}
	for (;;) {
		unsigned char c;
		long u, lo;
		char utf8[4];
		size_t n;

		p = gh_buf_json_plain_end(p, r->end);
		if (p == r->end || (unsigned char)*p < 0x20)
			return fail(r);
		if (out && p > run && (rc = gh_buf_append(out, run, (size_t)(p - run))) != GH_BUF_OK)
			return buf_fail(r, rc);
		if (*p == '"')
			break;
		if (raw || r->end - p < 2)
			return fail(r);
		c = (unsigned char)p[1];
		p += 2;
		n = 1;
		switch (c) {
		case '"': utf8[0] = '"'; break;
		case '\\': utf8[0] = '\\'; break;
		case '/': utf8[0] = '/'; break;
		case 'b': utf8[0] = '\b'; break;
		case 'f': utf8[0] = '\f'; break;
		case 'n': utf8[0] = '\n'; break;
		case 'r': utf8[0] = '\r'; break;
		case 't': utf8[0] = '\t'; break;
		case 'u':
			/* \u0000 and lone surrogates are the full parser's */
			if (r->end - p < 4 || (u = hex4(p)) <= 0 || (u >= 0xDC00 && u <= 0xDFFF))
				return fail(r);
			p += 4;
			if (u >= 0xD800 && u <= 0xDBFF) {
				if (r->end - p < 6 || p[0] != '\\' || p[1] != 'u' ||
				    (lo = hex4(p + 2)) < 0xDC00 || lo > 0xDFFF)
					return fail(r);
				p += 6;
				u = 0x10000 + (((u & 0x3FF) << 10) | (lo & 0x3FF));
			}
			if (u < 0x80) {
				utf8[0] = (char)u;
			} else if (u < 0x800) {
				utf8[0] = (char)(0xC0 | (u >> 6));
				utf8[1] = (char)(0x80 | (u & 0x3F));
				n = 2;
			} else if (u < 0x10000) {
				utf8[0] = (char)(0xE0 | (u >> 12));
				utf8[1] = (char)(0x80 | ((u >> 6) & 0x3F));
				utf8[2] = (char)(0x80 | (u & 0x3F));
				n = 3;
			} else {
				utf8[0] = (char)(0xF0 | (u >> 18));
				utf8[1] = (char)(0x80 | ((u >> 12) & 0x3F));
				utf8[2] = (char)(0x80 | ((u >> 6) & 0x3F));
				utf8[3] = (char)(0x80 | (u & 0x3F));
				n = 4;
			}
			break;
		default:
			return fail(r);
		}
		if (out && (rc = gh_buf_append(out, utf8, n)) != GH_BUF_OK)
			return buf_fail(r, rc);
		run = p;
	}
	if (raw) {
		raw->s = r->p;
		raw->n = (size_t)(p - r->p);
	}
	r->p = p + 1;
	return 0;
}

int gh_jr_member(struct gh_jr *r, const char **name, size_t *len)
{
	struct gh_jr_key k;
	size_t i;
	int rc;

	if (!r->depth || !r->object[r->depth - 1])
		return fail(r);
	if ((rc = item(r, '}')) != 1)
		return rc;
	if (string(r, NULL, &k) != 0 || r->nkeys >= GH_JR_MAX_KEYS)
		return fail(r);
	for (i = r->key_base[r->depth - 1]; i < r->nkeys; i++)
		if (r->keys[i].n == k.n && !memcmp(r->keys[i].s, k.s, k.n))
			return fail(r);
	r->keys[r->nkeys++] = k;
	skip_ws(r);
	if (r->p == r->end || *r->p != ':')
		return fail(r);
	r->p++;
	*name = k.s;
	*len = k.n;
	return 1;
}

int gh_jr_string(struct gh_jr *r, struct gh_buf *out)
{
	return string(r, out, NULL);
}

int gh_jr_string_opt(struct gh_jr *r, struct gh_buf *out, int *set)
{
	int rc;

	*set = gh_jr_peek(r) == GH_JR_STRING;
	if (!*set)
		return gh_jr_skip(r) ? 0 : 1;
	rc = gh_jr_string(r, out);
	return rc == GH_BUF_NOMEM ? -1 : rc ? 0 : 1;
}

/* Checks the number at the cursor and moves past it; *integer tells
 * whether it had neither fraction nor exponent. A value that might not
 * fit a double (cJSON would read infinity) fails: below 10^308 there is
 * no doubt, and that is judged from the digits, without strtod. */
static int number(struct gh_jr *r, int *integer)
{
	const char *s, *p;
	long digits = 0, exp = 0;
	int neg_exp = 0;

	if (gh_jr_peek(r) != GH_JR_NUMBER)
		return fail(r);
	s = p = r->p;
	*integer = 1;
	if (*p == '-')
		p++;
	if (p == r->end || *p < '0' || *p > '9')
		return fail(r);
	if (*p == '0') {
		p++;
		digits = 1;
	} else {
		for (; p < r->end && *p >= '0' && *p <= '9'; p++)
			digits++;
	}
	if (p < r->end && *p == '.') {
		*integer = 0;
		if (++p == r->end || *p < '0' || *p > '9')
			return fail(r);
		while (p < r->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < r->end && (*p == 'e' || *p == 'E')) {
		*integer = 0;
		if (++p < r->end && (*p == '+' || *p == '-'))
			neg_exp = *p++ == '-';
		if (p == r->end || *p < '0' || *p > '9')
			return fail(r);
		for (; p < r->end && *p >= '0' && *p <= '9'; p++)
			if (exp < 100000)
				exp = exp * 10 + (*p - '0');
	}
	/* the value is below 10^(digits + exp) */
	if (p - s > NUMBER_MAX || (!neg_exp && digits + exp > 308))
		return fail(r);
	r->p = p;
	return 0;
}

int gh_jr_int(struct gh_jr *r, int64_t *v)
{
	const char *s;
	int integer, neg;
	int64_t x = 0;

	if (gh_jr_peek(r) != GH_JR_NUMBER)
		return fail(r);
	s = r->p;
	if (number(r, &integer) != 0)
		return -1;
	neg = *s == '-';
	if (!integer || r->p - s - neg > 15)
		return fail(r);
	for (s += neg; s < r->p; s++)
		x = x * 10 + (*s - '0');
	*v = neg ? -x : x;
	return 0;
}

static int literal(struct gh_jr *r, const char *word, size_t n)
{
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
		return fail(r);
	r->p += n;
	return 0;
}

int gh_jr_skip(struct gh_jr *r)
{
	const char *name;
	size_t len;
	int integer, k;

	switch (gh_jr_peek(r)) {
	case GH_JR_OBJECT:
		if (gh_jr_object(r))
			return -1;
		while ((k = gh_jr_member(r, &name, &len)) == 1)
			if (gh_jr_skip(r))
				return -1;
		return k;
	case GH_JR_ARRAY:
		if (gh_jr_array(r))
			return -1;
		while ((k = gh_jr_next(r)) == 1)
			if (gh_jr_skip(r))
				return -1;
		return k;
	case GH_JR_STRING:
		return string(r, NULL, NULL);
	case GH_JR_NUMBER:
		return number(r, &integer);
	case GH_JR_BOOL:
		return *r->p == 't' ? literal(r, "true", 4) : literal(r, "false", 5);
	case GH_JR_NULL:
		return literal(r, "null", 4);
	default:
		return fail(r);
	}
}

int gh_jr_done(struct gh_jr *r)
{
	if (r->failed || r->depth)
		return fail(r);
	skip_ws(r);
	return r->p == r->end ? 0 : fail(r);
}
