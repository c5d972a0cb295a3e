/*
 * jsregex.c - JavaScript regular expressions, as JSON Schema "pattern"
 * keywords arrive (zod emits regex.source), translated to POSIX extended
 * regexes and run with a bounded cost; see jsregex.h.
 *
 * Translation goes byte by byte, with "." and character classes rewritten
 * to consume whole UTF-8 sequences; compilation and matching run under the
 * "C" locale of the calling thread only (uselocale), so the process locale
 * never changes a pattern's meaning.
 *
 * Threading: no shared state; a cache belongs to one caller.
 */
#include "jsregex.h"

#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "schema.h"
#include "util.h"

/* Translated regex limits: output bytes, nesting of groups, and a rough
 * count of the nodes glibc builds (counted repetitions multiply). */
#define RX_MAX_OUT 65536
#define RX_MAX_NEST 32
#define RX_MAX_COST 10000L
#define RX_MAX_REPEAT 1000L

/*
 * A character class is a set of ASCII bytes plus one flag for "every
 * non-ASCII character" (what \D, \S, \W, "." and negated classes add).
 * It is emitted as a bracket expression for the ASCII part and
 * "[\xc0-\xff][\x80-\xbf]*" for one whole non-ASCII UTF-8 sequence.
 */

struct rxset {
	unsigned char bits[16];
	int nonascii;
};

static void set_add(struct rxset *s, unsigned c)
{
	if (c > 0 && c < 128)
		s->bits[c >> 3] |= (unsigned char)(1u << (c & 7));
}

static int set_has(const struct rxset *s, unsigned c)
{
	return c > 0 && c < 128 && (s->bits[c >> 3] >> (c & 7)) & 1;
}

static void set_range(struct rxset *s, unsigned lo, unsigned hi)
{
	unsigned c;

	for (c = lo; c <= hi && c < 128; c++)
		set_add(s, c);
}

static void set_invert(struct rxset *s)
{
	size_t i;

	for (i = 0; i < sizeof(s->bits); i++)
		s->bits[i] = (unsigned char)~s->bits[i];
	s->bits[0] &= (unsigned char)~1u; /* NUL never occurs in a string */
	s->nonascii = !s->nonascii;
}

static void set_union(struct rxset *s, const struct rxset *t)
{
	size_t i;

	for (i = 0; i < sizeof(s->bits); i++)
		s->bits[i] |= t->bits[i];
	s->nonascii |= t->nonascii;
}

/* \d \w \s and their negations. \s and \w cover ASCII only, as their
 * JavaScript meaning does apart from the Unicode spaces. */
static void set_class(struct rxset *s, unsigned esc)
{
	struct rxset t;

	memset(&t, 0, sizeof(t));
	switch (esc | 0x20) {
	case 'd':
		set_range(&t, '0', '9');
		break;
	case 'w':
		set_range(&t, '0', '9');
		set_range(&t, 'a', 'z');
		set_range(&t, 'A', 'Z');
		set_add(&t, '_');
		break;
	default: /* 's' */
		set_range(&t, '\t', '\r');
		set_add(&t, ' ');
	}
	if (esc >= 'A' && esc <= 'Z')
		set_invert(&t);
	set_union(s, &t);
}

static int is_alnum(unsigned c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static int hexval(unsigned c)
{
	if (c >= '0' && c <= '9')
		return (int)(c - '0');
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return (int)(c - 'a' + 10);
	return -1;
}

/* Reads n hex digits at p into *out; -1 when they are not all there. */
static int hexn(const unsigned char *p, int n, unsigned long *out)
{
	unsigned long v = 0;
	int i, h;

	for (i = 0; i < n; i++) {
		if ((h = hexval(p[i])) < 0)
			return -1;
		v = v * 16 + (unsigned long)h;
	}
	*out = v;
	return 0;
}

/* Length of the UTF-8 sequence at p and its code point; 0 when invalid. */
static int utf8_decode(const unsigned char *p, unsigned long *cp)
{
	int n, i;
	unsigned long v;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if (p[0] >= 0xC2 && p[0] <= 0xDF) {
		n = 2;
		v = p[0] & 0x1F;
	} else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
		n = 3;
		v = p[0] & 0x0F;
	} else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
		n = 4;
		v = p[0] & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	*cp = v;
	return n;
}

static int utf8_encode(unsigned long cp, unsigned char *out)
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xC0 | (cp >> 6));
		out[1] = (unsigned char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xE0 | (cp >> 12));
		out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (unsigned char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (unsigned char)(0xF0 | (cp >> 18));
	out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (unsigned char)(0x80 | (cp & 0x3F));
	return 4;
}

struct rx {
	const unsigned char *p;
	struct gh_buf out;
	int nest;
	long cost[RX_MAX_NEST + 1]; /* per open group: nodes so far */
	long last;                  /* nodes of the atom a quantifier would repeat */
	int have_atom;
	char err[96];
};

static int rx_fail(struct rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rx_fail(struct rx *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int rx_put(struct rx *r, const void *p, size_t n)
{
	if (gh_buf_append(&r->out, p, n) != GH_BUF_OK)
		return rx_fail(r, "is too long once translated");
	return 0;
}

static int rx_puts(struct rx *r, const char *s)
{
	return rx_put(r, s, strlen(s));
}

static int rx_add_cost(struct rx *r, long c)
{
	long *t = &r->cost[r->nest];

	*t = c > RX_MAX_COST - *t ? RX_MAX_COST + 1 : *t + c;
	if (*t > RX_MAX_COST)
		return rx_fail(r, "repeats too much (over %ld regex nodes)", RX_MAX_COST);
	return 0;
}

static int rx_atom(struct rx *r, long c)
{
	r->last = c;
	r->have_atom = 1;
	return rx_add_cost(r, c);
}

/* One ASCII character as a literal, escaped where ERE gives it meaning. */
static int rx_lit(struct rx *r, unsigned c)
{
	char b[4];

	if (c == '^')
		return rx_puts(r, "\\^");
	if (strchr(".[]()*+?{}|$\\", (int)c)) {
		b[0] = '[';
		b[1] = (char)c;
		b[2] = ']';
		return rx_put(r, b, 3);
	}
	b[0] = (char)c;
	return rx_put(r, b, 1);
}

static int rx_cp(struct rx *r, unsigned long cp)
{
	unsigned char u[4];
	int n;

	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return rx_fail(r, "names a character strings cannot hold");
	if (cp < 0x80) {
		if (rx_lit(r, (unsigned)cp))
			return -1;
		return rx_atom(r, 1);
	}
	n = utf8_encode(cp, u);
	if (rx_puts(r, "(") || rx_put(r, u, (size_t)n) || rx_puts(r, ")"))
		return -1;
	return rx_atom(r, 1);
}

static int rx_bracket(struct rx *r, const struct rxset *s)
{
	unsigned c, e;
	int any = 0;

	if (rx_puts(r, "["))
		return -1;
	if (set_has(s, ']')) {
		if (rx_puts(r, "]"))
			return -1;
		any = 1;
	}
	for (c = 1; c < 128; c = e + 1) {
		char b[3];

		e = c;
		if (!set_has(s, c) || c == ']' || c == '^' || c == '-')
			continue;
		while (e + 1 < 128 && set_has(s, e + 1) && e + 1 != ']' && e + 1 != '^' &&
		       e + 1 != '-')
			e++;
		b[0] = (char)c;
		if (e == c) {
			if (rx_put(r, b, 1))
				return -1;
		} else {
			b[1] = e == c + 1 ? (char)e : '-';
			b[2] = (char)e;
			if (rx_put(r, b, e == c + 1 ? 2 : 3))
				return -1;
		}
		any = 1;
	}
	if (set_has(s, '^')) {
		/* "^" first would negate; "-" first is a plain "-". */
		if (!any && set_has(s, '-')) {
			if (rx_puts(r, "-^]"))
				return -1;
			return 0;
		}
		if (rx_puts(r, "^"))
			return -1;
	}
	if (set_has(s, '-') && rx_puts(r, "-"))
		return -1;
	return rx_puts(r, "]");
}

static int rx_set(struct rx *r, const struct rxset *s)
{
	static const char multibyte[] = "[\xc0-\xff][\x80-\xbf]*";
	unsigned c, n = 0, only = 0;

	for (c = 1; c < 128; c++) {
		if (set_has(s, c)) {
			n++;
			only = c;
		}
	}
	if (n == 0 && !s->nonascii)
		return rx_fail(r, "has a character class that matches nothing");
	if (s->nonascii && rx_puts(r, "("))
		return -1;
	if (n == 1 && rx_lit(r, only))
		return -1;
	if (n > 1 && rx_bracket(r, s))
		return -1;
	if (s->nonascii) {
		if (n && rx_puts(r, "|"))
			return -1;
		if (rx_puts(r, multibyte) || rx_puts(r, ")"))
			return -1;
	}
	return rx_atom(r, s->nonascii && n ? 3 : 1);
}

/* A quantifier: mult says how many copies of the atom glibc builds. */
static int rx_quant(struct rx *r, const char *text, long mult)
{
	long add;

	if (!r->have_atom)
		return rx_fail(r, "has a quantifier with nothing to repeat");
	if (rx_puts(r, text))
		return -1;
	add = r->last > RX_MAX_COST / (mult > 1 ? mult : 1) ? RX_MAX_COST + 1 :
								      r->last * (mult - 1);
	if (mult > 1 && rx_add_cost(r, add))
		return -1;
	r->have_atom = 0;
	if (*r->p == '?') /* lazy: the same strings match */
		r->p++;
	return 0;
}

/* "{n}", "{n,}", "{n,m}" after an atom; any other "{" is a literal. */
static int rx_brace(struct rx *r)
{
	const unsigned char *q = r->p + 1;
	long lo = 0, hi = -1;
	int digits = 0;
	char text[48];

	while (*q >= '0' && *q <= '9' && digits < 8) {
		lo = lo * 10 + (*q++ - '0');
		digits++;
	}
	if (digits == 0 || (*q != ',' && *q != '}'))
		goto literal;
	if (*q == ',') {
		q++;
		if (*q >= '0' && *q <= '9') {
			hi = 0;
			digits = 0;
			while (*q >= '0' && *q <= '9' && digits < 8) {
				hi = hi * 10 + (*q++ - '0');
				digits++;
			}
		} else {
			hi = -2; /* unbounded */
		}
	} else {
		hi = lo;
	}
	if (*q != '}')
		goto literal;
	if (lo > RX_MAX_REPEAT || hi > RX_MAX_REPEAT)
		return rx_fail(r, "repeats more than %ld times", RX_MAX_REPEAT);
	if (hi >= 0 && hi < lo)
		return rx_fail(r, "has a {min,max} quantifier with max below min");
	if (hi == -2)
		snprintf(text, sizeof(text), "{%ld,}", lo);
	else if (hi == lo)
		snprintf(text, sizeof(text), "{%ld}", lo);
	else
		snprintf(text, sizeof(text), "{%ld,%ld}", lo, hi);
	r->p = q + 1;
	return rx_quant(r, text, hi == -2 ? lo + 1 : hi);
literal:
	r->p++;
	return rx_cp(r, '{');
}

/* One member of a [...] class: a character (*cp) or a class escape
 * (*cp = -1, members added to esc). */
static int rx_class_atom(struct rx *r, long *cp, struct rxset *esc)
{
	unsigned c = *r->p;
	unsigned long v;

	if (c >= 0x80)
		return rx_fail(r, "has a non-ASCII character inside [ ], which gatehouse "
				  "cannot enforce");
	if (c != '\\') {
		r->p++;
		*cp = c;
		return 0;
	}
	c = r->p[1];
	if (c == '\0')
		return rx_fail(r, "ends with a lone backslash");
	r->p += 2;
	switch (c) {
	case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
		set_class(esc, c);
		*cp = -1;
		return 0;
	case 'b': *cp = 8; return 0;
	case 'n': *cp = '\n'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 't': *cp = '\t'; return 0;
	case 'v': *cp = '\v'; return 0;
	case 'f': *cp = '\f'; return 0;
	case 'x':
	case 'u':
		if (hexn(r->p, c == 'x' ? 2 : 4, &v))
			return rx_fail(r, "has an invalid \\%c escape", c);
		r->p += c == 'x' ? 2 : 4;
		if (v == 0 || v >= 0x80)
			return rx_fail(r, "has a NUL or non-ASCII character inside [ ], which "
					  "gatehouse cannot enforce");
		*cp = (long)v;
		return 0;
	default:
		if (c >= 0x80 || is_alnum(c))
			return rx_fail(r, "uses the escape \\%c inside [ ], which gatehouse "
					  "cannot enforce", c >= 0x80 ? '?' : c);
		*cp = c;
		return 0;
	}
}

static int rx_class(struct rx *r)
{
	struct rxset s, esc;
	int neg = 0;

	memset(&s, 0, sizeof(s));
	r->p++; /* '[' */
	if (*r->p == '^') {
		neg = 1;
		r->p++;
	}
	for (;;) {
		long a, b;

		if (*r->p == '\0')
			return rx_fail(r, "has an unterminated [ ] class");
		if (*r->p == ']') {
			r->p++;
			break;
		}
		memset(&esc, 0, sizeof(esc));
		if (rx_class_atom(r, &a, &esc))
			return -1;
		if (r->p[0] == '-' && r->p[1] != '\0' && r->p[1] != ']') {
			r->p++;
			if (rx_class_atom(r, &b, &esc))
				return -1;
			if (a >= 0 && b >= 0) {
				if (a > b)
					return rx_fail(r, "has a range out of order inside [ ]");
				set_range(&s, (unsigned)a, (unsigned)b);
				continue;
			}
			/* JavaScript reads [\d-z] as \d, "-", "z". */
			set_add(&s, '-');
			if (b >= 0)
				set_add(&s, (unsigned)b);
		}
		if (a >= 0)
			set_add(&s, (unsigned)a);
		set_union(&s, &esc);
	}
	if (neg)
		set_invert(&s);
	return rx_set(r, &s);
}

static int rx_escape(struct rx *r)
{
	unsigned c = r->p[1];
	unsigned long v, lo;
	struct rxset s;
	int n;

	if (c == '\0')
		return rx_fail(r, "ends with a lone backslash");
	switch (c) {
	case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
		r->p += 2;
		memset(&s, 0, sizeof(s));
		set_class(&s, c);
		return rx_set(r, &s);
	case 'b':
	case 'B':
		r->p += 2;
		r->have_atom = 0;
		return rx_puts(r, c == 'b' ? "\\b" : "\\B");
	case 'n': r->p += 2; return rx_cp(r, '\n');
	case 'r': r->p += 2; return rx_cp(r, '\r');
	case 't': r->p += 2; return rx_cp(r, '\t');
	case 'v': r->p += 2; return rx_cp(r, '\v');
	case 'f': r->p += 2; return rx_cp(r, '\f');
	case 'x':
		if (hexn(r->p + 2, 2, &v))
			return rx_fail(r, "has an invalid \\x escape");
		r->p += 4;
		return rx_cp(r, v);
	case 'u':
		if (hexn(r->p + 2, 4, &v))
			return rx_fail(r, "has an invalid \\u escape");
		r->p += 6;
		if (v >= 0xD800 && v <= 0xDBFF && r->p[0] == '\\' && r->p[1] == 'u' &&
		    hexn(r->p + 2, 4, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
			v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
			r->p += 6;
		}
		return rx_cp(r, v);
	default:
		if (c >= 0x80) {
			if ((n = utf8_decode(r->p + 1, &v)) == 0)
				return rx_fail(r, "is not valid UTF-8");
			r->p += 1 + n;
			return rx_cp(r, v);
		}
		if (is_alnum(c))
			return rx_fail(r, "uses the escape \\%c, which gatehouse cannot enforce",
				       c);
		r->p += 2;
		return rx_cp(r, c);
	}
}

static int rx_open(struct rx *r)
{
	const unsigned char *p = r->p + 1;

	if (p[0] == '?') {
		if (p[1] == ':') {
			p += 2;
		} else if (p[1] == '<' && p[2] != '=' && p[2] != '!') {
			const unsigned char *q = p + 2;

			while (is_alnum(*q) || *q == '_' || *q == '$')
				q++;
			if (q == p + 2 || *q != '>')
				return rx_fail(r, "has an invalid group name");
			p = q + 1;
		} else if (p[1] == '=' || p[1] == '!' || p[1] == '<') {
			return rx_fail(r, "uses lookahead or lookbehind, which gatehouse cannot "
					  "enforce");
		} else {
			return rx_fail(r, "has an invalid (? group");
		}
	}
	if (r->nest >= RX_MAX_NEST)
		return rx_fail(r, "nests groups deeper than %d", RX_MAX_NEST);
	r->p = p;
	r->nest++;
	r->cost[r->nest] = 0;
	r->have_atom = 0;
	return rx_puts(r, "(");
}

static int rx_close(struct rx *r)
{
	long c;

	if (r->nest == 0)
		return rx_fail(r, "has an unmatched )");
	r->p++;
	c = r->cost[r->nest] > 0 ? r->cost[r->nest] : 1;
	r->nest--;
	if (rx_puts(r, ")"))
		return -1;
	return rx_atom(r, c);
}

static int rx_translate(struct rx *r)
{
	struct rxset dot;
	unsigned long cp;
	int n;

	while (*r->p) {
		unsigned c = *r->p;

		switch (c) {
		case '\\':
			if (rx_escape(r))
				return -1;
			break;
		case '[':
			if (rx_class(r))
				return -1;
			break;
		case '.':
			r->p++;
			memset(&dot, 0, sizeof(dot));
			set_invert(&dot);
			dot.bits['\n' >> 3] &= (unsigned char)~(1u << ('\n' & 7));
			dot.bits['\r' >> 3] &= (unsigned char)~(1u << ('\r' & 7));
			if (rx_set(r, &dot))
				return -1;
			break;
		case '(':
			if (rx_open(r))
				return -1;
			break;
		case ')':
			if (rx_close(r))
				return -1;
			break;
		case '|':
		case '^':
		case '$':
			r->p++;
			r->have_atom = 0;
			if (rx_put(r, &r->p[-1], 1))
				return -1;
			break;
		case '*':
		case '?':
			r->p++;
			if (rx_quant(r, c == '*' ? "*" : "?", 1))
				return -1;
			break;
		case '+':
			r->p++;
			if (rx_quant(r, "+", 2))
				return -1;
			break;
		case '{':
			if (rx_brace(r))
				return -1;
			break;
		default:
			if ((n = utf8_decode(r->p, &cp)) == 0)
				return rx_fail(r, "is not valid UTF-8");
			r->p += n;
			if (rx_cp(r, cp))
				return -1;
		}
	}
	if (r->nest)
		return rx_fail(r, "has an unterminated group");
	return 0;
}

/* Runs the regex calls under the "C" locale of this thread only. */
struct cloc {
	locale_t c, old;
};

static void cloc_enter(struct cloc *l)
{
	/* A single-byte locale (gatehouse never leaves "C") reads the
	 * translated pattern byte by byte already: nothing to switch. */
	if (MB_CUR_MAX == 1) {
		l->c = (locale_t)0;
		return;
	}
	l->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	l->old = l->c ? uselocale(l->c) : (locale_t)0;
}

static void cloc_leave(struct cloc *l)
{
	if (!l->c)
		return;
	uselocale(l->old);
	freelocale(l->c);
}

/* Translates the JavaScript pattern src and compiles it into re (caller
 * regfree()s on success); *cost is its size in regex nodes. -1 with the
 * reason in why ("uses lookahead"). */
int gh_jsregex_compile(const char *src, regex_t *re, long *cost, char *why, size_t cap)
{
	struct rx r;
	struct cloc loc;
	int rc = -1, e;

	if (!src || strlen(src) > GH_SCHEMA_MAX_PATTERN) {
		snprintf(why, cap, "is longer than %d bytes", GH_SCHEMA_MAX_PATTERN);
		return -1;
	}
	memset(&r, 0, sizeof(r));
	r.p = (const unsigned char *)src;
	gh_buf_init(&r.out, RX_MAX_OUT);
	if (rx_translate(&r)) {
		snprintf(why, cap, "%s", r.err);
		goto out;
	}
	/* An empty pattern matches every string. */
	if (gh_buf_puts(&r.out, r.out.len ? "" : "^") != GH_BUF_OK) {
		snprintf(why, cap, "is too long once translated");
		goto out;
	}
	cloc_enter(&loc);
	e = regcomp(re, r.out.data, REG_EXTENDED | REG_NOSUB);
	cloc_leave(&loc);
	if (e) {
		char b[64];

		regerror(e, NULL, b, sizeof(b));
		snprintf(why, cap, "does not compile (%s)", b);
		goto out;
	}
	*cost = r.cost[0] > 0 ? r.cost[0] : 1;
	rc = 0;
out:
	gh_buf_free(&r.out);
	return rc;
}


/* 1 when s (n bytes) matches the pattern, 0 when not, -1 (reason in why)
 * when the pattern cannot be used, -2 when s is too long to check against
 * this pattern within GH_SCHEMA_MAX_PATTERN_WORK. A compilation adds the
 * pattern's size to *steps. */
/* Patterns compiled once for the life of the process, keyed by their
 * source text: the schemas of configured and memory tools are the same on
 * every call, and compiling costs far more than matching. Bounded; when
 * full, patterns are compiled per validation as before. glibc's regexec
 * may be called on one regex_t from several threads. */
#define SHARED_SLOTS 512
#define SHARED_MAX 256

static struct {
	pthread_mutex_t mu;
	struct {
		char *src;
		regex_t re;
		long cost;
	} e[SHARED_SLOTS];
	int n;
} shared = {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0};

/* The shared compiled form of src, compiling it once when there is room;
 * NULL when the pattern cannot be used (why filled) or the table is full
 * (*full set, why empty). */
static const regex_t *shared_get(const char *src, long *cost, int *full, char *why, size_t cap)
{
	uint32_t i = gh_hash_str(src) % SHARED_SLOTS;
	const regex_t *re = NULL;
	int probes;

	*full = 0;
	pthread_mutex_lock(&shared.mu);
	for (probes = 0; probes < SHARED_SLOTS; probes++, i = (i + 1) % SHARED_SLOTS) {
		if (!shared.e[i].src) {
			if (shared.n >= SHARED_MAX) {
				*full = 1;
				break;
			}
			if (gh_jsregex_compile(src, &shared.e[i].re, &shared.e[i].cost, why, cap))
				break;
			if (!(shared.e[i].src = strdup(src))) {
				regfree(&shared.e[i].re);
				*full = 1;
				break;
			}
			shared.n++;
			re = &shared.e[i].re;
			*cost = shared.e[i].cost;
			break;
		}
		if (!strcmp(shared.e[i].src, src)) {
			re = &shared.e[i].re;
			*cost = shared.e[i].cost;
			break;
		}
	}
	pthread_mutex_unlock(&shared.mu);
	return re;
}

int gh_jsregex_match(struct gh_jsregex_cache *c, const char *src, const char *s, size_t n,
		     long *steps, char *why, size_t cap)
{
	const regex_t *re = NULL;
	struct cloc loc;
	long cost = 1;
	int i, e, full = 0;

	why[0] = '\0';
	for (i = 0; i < c->n && !re; i++) {
		if (c->e[i].src == src) {
			re = &c->e[i].re;
			cost = c->e[i].cost;
		}
	}
	if (!re) {
		re = shared_get(src, &cost, &full, why, cap);
		if (!re && !full)
			return -1;
	}
	if (!re) {
		regex_t tmp;

		if (gh_jsregex_compile(src, &tmp, &cost, why, cap))
			return -1;
		*steps += cost;
		if (c->n < GH_JSREGEX_CACHE) {
			i = c->n++;
		} else {
			i = c->evict;
			c->evict = (c->evict + 1) % GH_JSREGEX_CACHE;
			regfree(&c->e[i].re);
		}
		c->e[i].src = src;
		c->e[i].re = tmp;
		c->e[i].cost = cost;
		re = &c->e[i].re;
	}
	if (n > (size_t)(GH_SCHEMA_MAX_PATTERN_WORK / cost)) {
		snprintf(why, cap, "%zu bytes", (size_t)(GH_SCHEMA_MAX_PATTERN_WORK / cost));
		return -2;
	}
	cloc_enter(&loc);
	e = regexec(re, s, 0, NULL, 0);
	cloc_leave(&loc);
	if (e == 0)
		return 1;
	if (e == REG_NOMATCH)
		return 0;
	snprintf(why, cap, "could not be evaluated (out of memory)");
	return -1;
}

void gh_jsregex_cache_free(struct gh_jsregex_cache *c)
{
	int i;

	for (i = 0; i < c->n; i++)
		regfree(&c->e[i].re);
	c->n = 0;
}
