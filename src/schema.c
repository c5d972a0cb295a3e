/*
 * schema.c - JSON Schema checking and validation for tool arguments; see
 * schema.h for the contract.
 *
 * gh_schema_check() walks every place a schema may sit (properties,
 * items, anyOf, definitions, ...) and refuses what gatehouse could not
 * enforce faithfully, naming the schema path. gh_schema_validate() applies
 * a checked schema to one value. Three limits keep it cheap on hostile
 * input: value depth (the error path has a fixed number of slots), $ref
 * hops along one path, and a step budget that stops anyOf/oneOf/$ref
 * combinations whose cost would grow exponentially.
 *
 * Patterns arrive in JavaScript syntax (zod emits regex.source); jsregex.c
 * translates and runs them.
 *
 * Threading: no state outside one call; everything lives on the caller's
 * stack or in allocations freed before returning. Safe from any thread.
 */
#include "schema.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "jsregex.h"
#include "util.h"

/* Nested schema applications (one C stack frame each) per validation. */
#define MAX_FRAMES 384
/* How much of a key or string value a message quotes. */
#define QUOTE_MAX 48

/* ---------------------------------------------------------------------------
 * Bounded message writer: appends into a caller buffer, truncating.
 */

struct mw {
	char *p;
	size_t cap;
	size_t len;
};

static void mw_init(struct mw *w, char *p, size_t cap)
{
	w->p = p;
	w->cap = cap;
	w->len = 0;
	if (cap)
		p[0] = '\0';
}

/* Length of s[0..n) without a UTF-8 sequence cut off at its end. */
static size_t utf8_trim(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = n, need;

	while (i > 0 && n - i < 4 && (p[i - 1] & 0xC0) == 0x80)
		i--;
	if (i == 0 || p[i - 1] < 0xC0)
		return n;
	need = p[i - 1] >= 0xF0 ? 4 : p[i - 1] >= 0xE0 ? 3 : 2;
	return n - (i - 1) >= need ? n : i - 1;
}

/* Copies src into dst (cap bytes), cutting at a character boundary. */
static void copy_msg(char *dst, size_t cap, const char *src)
{
	size_t n;

	if (cap == 0)
		return;
	n = strlen(src);
	n = utf8_trim(src, n > cap - 1 ? cap - 1 : n);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void mw_vprintf(struct mw *w, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static void mw_vprintf(struct mw *w, const char *fmt, va_list ap)
{
	int n;

	if (w->cap == 0 || w->len >= w->cap - 1)
		return;
	n = vsnprintf(w->p + w->len, w->cap - w->len, fmt, ap);
	if (n < 0) {
		w->p[w->len] = '\0';
		return;
	}
	if ((size_t)n > w->cap - 1 - w->len) {
		w->len = utf8_trim(w->p, w->cap - 1);
		w->p[w->len] = '\0';
		return;
	}
	w->len += (size_t)n;
}

static void mw_printf(struct mw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mw_printf(struct mw *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mw_vprintf(w, fmt, ap);
	va_end(ap);
}

static void mw_puts(struct mw *w, const char *s)
{
	mw_printf(w, "%s", s);
}

/* Appends s as a JSON string literal, at most max bytes of it (never
 * splitting a UTF-8 sequence), then "..." inside the quotes when cut. */
static void mw_quote(struct mw *w, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = 0;

	mw_puts(w, "\"");
	while (*p) {
		size_t k = 1;

		if (n >= max) {
			mw_puts(w, "...");
			break;
		}
		if (*p == '"' || *p == '\\') {
			mw_printf(w, "\\%c", *p);
		} else if (*p == '\n') {
			mw_puts(w, "\\n");
		} else if (*p == '\t') {
			mw_puts(w, "\\t");
		} else if (*p < 0x20) {
			mw_printf(w, "\\u%04x", *p);
		} else {
			/* a whole UTF-8 sequence at once, so a cut never splits it */
			while (*p >= 0xC0 && k < 4 && (p[k] & 0xC0) == 0x80)
				k++;
			mw_printf(w, "%.*s", (int)k, (const char *)p);
		}
		p += k;
		n += k;
	}
	mw_puts(w, "\"");
}

/* Shortest decimal that reads back as d: "1", "0.1", "1e+300". */
static void fmt_num(double d, char *out, size_t cap)
{
	int prec;

	if (d == 0) {
		snprintf(out, cap, "0");
		return;
	}
	if (isfinite(d) && d == floor(d) && fabs(d) < 1e15) {
		snprintf(out, cap, "%.0f", d);
		return;
	}
	for (prec = 15; prec <= 17; prec++) {
		snprintf(out, cap, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			return;
	}
}

static void mw_num(struct mw *w, double d)
{
	char b[40];

	fmt_num(d, b, sizeof(b));
	mw_puts(w, b);
}

static void mw_value(struct mw *w, const cJSON *v);

/* Compact JSON of a value from a schema (enum, const) into w, stopping
 * once w has grown by QUOTE_MAX bytes, so a huge value costs nothing. */
static void mw_json(struct mw *w, const cJSON *v, size_t start, int depth)
{
	const cJSON *c;

	if (w->len - start > QUOTE_MAX || depth > 8) {
		if (w->len < w->cap - 1)
			mw_puts(w, "...");
		return;
	}
	if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) {
		mw_value(w, v);
		return;
	}
	mw_puts(w, cJSON_IsArray(v) ? "[" : "{");
	for (c = v->child; c; c = c->next) {
		if (w->len - start > QUOTE_MAX) {
			mw_puts(w, "...");
			return;
		}
		if (c != v->child)
			mw_puts(w, ",");
		if (cJSON_IsObject(v)) {
			mw_quote(w, c->string, QUOTE_MAX / 2);
			mw_puts(w, ":");
		}
		mw_json(w, c, start, depth + 1);
	}
	mw_puts(w, cJSON_IsArray(v) ? "]" : "}");
}

/* A short rendering of a JSON value for "must be one of ..." messages. */
static void mw_value(struct mw *w, const cJSON *v)
{
	if (cJSON_IsString(v))
		mw_quote(w, v->valuestring, QUOTE_MAX);
	else if (cJSON_IsNumber(v))
		mw_num(w, v->valuedouble);
	else if (cJSON_IsTrue(v))
		mw_puts(w, "true");
	else if (cJSON_IsFalse(v))
		mw_puts(w, "false");
	else if (cJSON_IsNull(v))
		mw_puts(w, "null");
	else if (cJSON_IsArray(v) || cJSON_IsObject(v))
		mw_json(w, v, w->len, 0);
	else
		mw_puts(w, "?");
}

/* Writes a path of n segments, seg() rendering segment i into b. A long
 * path keeps its start and its end (which name the place) and elides the
 * middle, so the message after it is never cut off. */
#define PATH_HEAD 60
#define PATH_TAIL 100
#define SEG_MAX (QUOTE_MAX * 6 + 16)

/* A segment of a path into a schema or a value: a key, or an index. */
struct seg {
	const char *key; /* NULL: index */
	size_t index;
};

/* Appends a segment to path (*n of cap used); -1 when it is full. */
static int seg_push(struct seg *path, int *n, int cap, const char *key, size_t index)
{
	if (*n >= cap)
		return -1;
	path[*n].key = key;
	path[*n].index = index;
	(*n)++;
	return 0;
}

typedef void (*seg_fn)(const void *segs, int i, char *b, size_t cap);

static void mw_path(struct mw *w, const void *segs, int n, seg_fn seg)
{
	char b[SEG_MAX];
	size_t total = 0, head = 0, tail = 0;
	int i, j;

	for (i = 0; i < n; i++) {
		seg(segs, i, b, sizeof(b));
		total += strlen(b);
	}
	if (total <= PATH_HEAD + PATH_TAIL) {
		for (i = 0; i < n; i++) {
			seg(segs, i, b, sizeof(b));
			mw_puts(w, b);
		}
		return;
	}
	for (i = 0; i < n; i++) {
		seg(segs, i, b, sizeof(b));
		if (head + strlen(b) > PATH_HEAD)
			break;
		head += strlen(b);
		mw_puts(w, b);
	}
	for (j = n; j > i; j--) {
		seg(segs, j - 1, b, sizeof(b));
		if (tail + strlen(b) > PATH_TAIL)
			break;
		tail += strlen(b);
	}
	mw_puts(w, "...");
	for (; j < n; j++) {
		seg(segs, j, b, sizeof(b));
		mw_puts(w, b);
	}
}

/* ---------------------------------------------------------------------------
 * Types.
 */

enum {
	T_STRING = 1,
	T_NUMBER = 2,
	T_INTEGER = 4,
	T_BOOLEAN = 8,
	T_OBJECT = 16,
	T_ARRAY = 32,
	T_NULL = 64
};

static const struct {
	const char *name;
	unsigned bit;
} TYPES[] = {
	{"string", T_STRING},   {"number", T_NUMBER}, {"integer", T_INTEGER},
	{"boolean", T_BOOLEAN}, {"object", T_OBJECT}, {"array", T_ARRAY},
	{"null", T_NULL},
};

static unsigned type_bit(const char *name)
{
	size_t i;

	for (i = 0; name && i < GH_ARRAY_LEN(TYPES); i++)
		if (strcmp(name, TYPES[i].name) == 0)
			return TYPES[i].bit;
	return 0;
}

static int is_integral(double d)
{
	return isfinite(d) && d == floor(d);
}

/* The type bits a value satisfies: 3 is both number and integer. */
static unsigned value_types(const cJSON *v)
{
	if (cJSON_IsString(v))
		return T_STRING;
	if (cJSON_IsNumber(v))
		return T_NUMBER | (is_integral(v->valuedouble) ? T_INTEGER : 0);
	if (cJSON_IsBool(v))
		return T_BOOLEAN;
	if (cJSON_IsObject(v))
		return T_OBJECT;
	if (cJSON_IsArray(v))
		return T_ARRAY;
	if (cJSON_IsNull(v))
		return T_NULL;
	return 0;
}

static const char *value_type_name(const cJSON *v)
{
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsNumber(v))
		return "number";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsObject(v))
		return "object";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsNull(v))
		return "null";
	return "nothing";
}

/* "string", "string or null", "string, number or null". */
static void mw_types(struct mw *w, unsigned mask)
{
	size_t i, n = 0, k = 0;

	if ((mask & T_NUMBER) && (mask & T_INTEGER))
		mask &= ~(unsigned)T_INTEGER;
	for (i = 0; i < GH_ARRAY_LEN(TYPES); i++)
		n += (mask & TYPES[i].bit) != 0;
	if (n == 0) {
		mw_puts(w, "no value");
		return;
	}
	for (i = 0; i < GH_ARRAY_LEN(TYPES); i++) {
		if (!(mask & TYPES[i].bit))
			continue;
		if (k)
			mw_puts(w, k == n - 1 ? " or " : ", ");
		mw_puts(w, TYPES[i].name);
		k++;
	}
}

/* ---------------------------------------------------------------------------
 * Keywords: one pass over a schema object picks out the ones gatehouse
 * knows; the first of duplicated keys wins (as cJSON lookups do).
 */

struct kw {
	const cJSON *type, *nullable, *ref, *properties, *pattern_props, *additional, *required,
		*min_props, *max_props, *items, *prefix_items, *additional_items, *min_items,
		*max_items, *unique, *min_len, *max_len, *pattern, *minimum, *maximum, *xmin, *xmax,
		*multiple_of, *enum_, *const_, *all_of, *any_of, *one_of, *not_, *definitions,
		*defs;
};

#define KW(name, field) {name, offsetof(struct kw, field)}
static const struct {
	const char *name;
	size_t off;
} KEYWORDS[] = {
	KW("type", type),
	KW("nullable", nullable),
	KW("$ref", ref),
	KW("properties", properties),
	KW("patternProperties", pattern_props),
	KW("additionalProperties", additional),
	KW("required", required),
	KW("minProperties", min_props),
	KW("maxProperties", max_props),
	KW("items", items),
	KW("prefixItems", prefix_items),
	KW("additionalItems", additional_items),
	KW("minItems", min_items),
	KW("maxItems", max_items),
	KW("uniqueItems", unique),
	KW("minLength", min_len),
	KW("maxLength", max_len),
	KW("pattern", pattern),
	KW("minimum", minimum),
	KW("maximum", maximum),
	KW("exclusiveMinimum", xmin),
	KW("exclusiveMaximum", xmax),
	KW("multipleOf", multiple_of),
	KW("enum", enum_),
	KW("const", const_),
	KW("allOf", all_of),
	KW("anyOf", any_of),
	KW("oneOf", one_of),
	KW("not", not_),
	KW("definitions", definitions),
	KW("$defs", defs),
};
#undef KW

static void gather(const cJSON *schema, struct kw *k)
{
	const cJSON *c;
	size_t i;

	memset(k, 0, sizeof(*k));
	for (c = schema->child; c; c = c->next) {
		if (!c->string)
			continue;
		for (i = 0; i < GH_ARRAY_LEN(KEYWORDS); i++) {
			if (strcmp(c->string, KEYWORDS[i].name) == 0) {
				const cJSON **slot =
					(const cJSON **)(void *)((char *)k + KEYWORDS[i].off);

				if (!*slot)
					*slot = c;
				break;
			}
		}
	}
}

/* ---------------------------------------------------------------------------
 * Local references: "#", "#/definitions/a", "#/properties/x/items".
 */

struct tok {
	const char *p, *end;
};

/* Next byte of a URI-fragment token after %XX decoding; -1 at the end,
 * -2 when malformed. */
static int tok_raw(struct tok *t)
{
	int hi, lo;

	if (t->p >= t->end)
		return -1;
	if (*t->p != '%')
		return (unsigned char)*t->p++;
	if (t->end - t->p < 3)
		return -2;
	hi = t->p[1];
	lo = t->p[2];
	hi = hi >= '0' && hi <= '9' ? hi - '0' : (hi | 0x20) >= 'a' && (hi | 0x20) <= 'f' ?
	     (hi | 0x20) - 'a' + 10 : -1;
	lo = lo >= '0' && lo <= '9' ? lo - '0' : (lo | 0x20) >= 'a' && (lo | 0x20) <= 'f' ?
	     (lo | 0x20) - 'a' + 10 : -1;
	if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
		return -2;
	t->p += 3;
	return hi * 16 + lo;
}

/* Next byte of a JSON pointer token (~0 is "~", ~1 is "/"). */
static int tok_next(struct tok *t)
{
	int c = tok_raw(t), d;

	if (c != '~')
		return c;
	d = tok_raw(t);
	if (d == '0')
		return '~';
	if (d == '1')
		return '/';
	return -2;
}

static int tok_eq(const char *s, const char *e, const char *key)
{
	struct tok t = {s, e};
	const unsigned char *k = (const unsigned char *)key;
	int c;

	while ((c = tok_next(&t)) >= 0)
		if (*k++ != (unsigned char)c)
			return 0;
	return c == -1 && *k == '\0';
}

/* The child of node named by the token [s, e), or NULL. */
static const cJSON *tok_child(const cJSON *node, const char *s, const char *e)
{
	const cJSON *c;

	if (cJSON_IsObject(node)) {
		for (c = node->child; c; c = c->next)
			if (c->string && tok_eq(s, e, c->string))
				return c;
		return NULL;
	}
	if (cJSON_IsArray(node)) {
		struct tok t = {s, e};
		long idx = 0;
		int ch, digits = 0;

		while ((ch = tok_next(&t)) >= 0) {
			if (ch < '0' || ch > '9' || digits >= 9 || (digits == 1 && idx == 0))
				return NULL;
			idx = idx * 10 + (ch - '0');
			digits++;
		}
		if (ch != -1 || digits == 0)
			return NULL;
		for (c = node->child; c && idx > 0; c = c->next)
			idx--;
		return c;
	}
	return NULL;
}

/* Resolves a local reference from root. *covered (may be NULL) is set to 1
 * when the target sits where gh_schema_check() walks anyway (under
 * properties, definitions, items, anyOf, ...), so it needs no extra check.
 * NULL when the reference is not local or does not resolve. */
static const cJSON *resolve_ref(const cJSON *root, const char *ref, int *covered)
{
	enum { AT_SCHEMA, AT_MAP, AT_LIST, AT_OTHER } st = AT_SCHEMA;
	const cJSON *cur = root;
	const char *p;

	if (covered)
		*covered = 0;
	if (!ref || ref[0] != '#')
		return NULL;
	p = ref + 1;
	if (*p != '\0' && *p != '/')
		return NULL;
	while (*p == '/') {
		const char *s = p + 1, *e = s + strcspn(s, "/");
		const cJSON *next = tok_child(cur, s, e);

		if (!next)
			return NULL;
		if (st == AT_SCHEMA && cJSON_IsObject(cur)) {
			const char *k = next->string;

			if (!strcmp(k, "properties") || !strcmp(k, "patternProperties") ||
			    !strcmp(k, "definitions") || !strcmp(k, "$defs"))
				st = AT_MAP;
			else if (!strcmp(k, "allOf") || !strcmp(k, "anyOf") ||
				 !strcmp(k, "oneOf") || !strcmp(k, "prefixItems"))
				st = AT_LIST;
			else if (!strcmp(k, "items"))
				st = cJSON_IsArray(next) ? AT_LIST : AT_SCHEMA;
			else if (!strcmp(k, "not") || !strcmp(k, "additionalProperties") ||
				 !strcmp(k, "additionalItems"))
				st = AT_SCHEMA;
			else
				st = AT_OTHER;
		} else if (st == AT_MAP) {
			st = cJSON_IsObject(cur) ? AT_SCHEMA : AT_OTHER;
		} else if (st == AT_LIST) {
			st = cJSON_IsArray(cur) ? AT_SCHEMA : AT_OTHER;
		} else {
			st = AT_OTHER;
		}
		cur = next;
		p = e;
	}
	if (covered)
		*covered = st == AT_SCHEMA;
	return cur;
}

static int is_alnum(unsigned c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* ---------------------------------------------------------------------------
 * Values: depth, deep equality, hashing.
 */

static int depth_ok(const cJSON *v, int left)
{
	const cJSON *c;

	if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
		return 1;
	if (left <= 0)
		return 0;
	for (c = v->child; c; c = c->next)
		if (!depth_ok(c, left - 1))
			return 0;
	return 1;
}

/* Deep equality as JSON Schema defines it: 1 equals 1.0, key order does
 * not matter. Adds the work done to *steps; values nested deeper than
 * GH_SCHEMA_MAX_VALUE_DEPTH compare unequal. */
static int json_equal(const cJSON *a, const cJSON *b, int depth, long *steps)
{
	const cJSON *x, *y;
	size_t na = 0, nb = 0;

	(*steps)++;
	if (depth > GH_SCHEMA_MAX_VALUE_DEPTH)
		return 0;
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return a->valuedouble == b->valuedouble;
	if ((a->type & 0xFF) != (b->type & 0xFF))
		return 0;
	if (cJSON_IsString(a)) {
		const char *p = a->valuestring ? a->valuestring : "";
		const char *q = b->valuestring ? b->valuestring : "";
		size_t n = 0;

		while (*p && *p == *q) {
			p++;
			q++;
			n++;
		}
		*steps += (long)(n / 64);
		return *p == *q;
	}
	if (cJSON_IsArray(a)) {
		for (x = a->child, y = b->child; x && y; x = x->next, y = y->next)
			if (!json_equal(x, y, depth + 1, steps))
				return 0;
		return !x && !y;
	}
	if (!cJSON_IsObject(a))
		return 1; /* null, true, false */
	for (x = a->child; x; x = x->next)
		na++;
	for (y = b->child; y; y = y->next)
		nb++;
	if (na != nb)
		return 0;
	/* Both directions, so duplicate keys cannot fake equality. */
	for (x = a->child; x; x = x->next) {
		for (y = b->child; y; y = y->next, (*steps)++)
			if (x->string && y->string && strcmp(x->string, y->string) == 0)
				break;
		if (!y || !json_equal(x, y, depth + 1, steps))
			return 0;
	}
	for (y = b->child; y; y = y->next) {
		for (x = a->child; x; x = x->next, (*steps)++)
			if (x->string && y->string && strcmp(x->string, y->string) == 0)
				break;
		if (!x)
			return 0;
	}
	return 1;
}

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

static uint64_t hash_str(const char *s, long *steps)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t n = 0;

	for (; s && *s; s++, n++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	*steps += (long)(n / 64);
	return h;
}

/* A hash consistent with json_equal (object member order ignored). depth
 * is the value's depth in the document; *deep is set when it goes past
 * GH_SCHEMA_MAX_VALUE_DEPTH. Adds the work done to *steps. */
static uint64_t hash_value(const cJSON *v, int depth, long *steps, int *deep)
{
	const cJSON *c;
	uint64_t h, sum = 0;

	(*steps)++;
	if (depth > GH_SCHEMA_MAX_VALUE_DEPTH) {
		*deep = 1;
		return 0;
	}
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble == 0 ? 0.0 : v->valuedouble;

		memcpy(&h, &d, sizeof(h));
		return mix(4, h);
	}
	if (cJSON_IsString(v))
		return mix(5, hash_str(v->valuestring, steps));
	if (cJSON_IsArray(v)) {
		h = 6;
		for (c = v->child; c && !*deep; c = c->next)
			h = mix(h, hash_value(c, depth + 1, steps, deep));
		return h;
	}
	if (cJSON_IsObject(v)) {
		for (c = v->child; c && !*deep; c = c->next)
			sum += mix(hash_str(c->string, steps),
				   hash_value(c, depth + 1, steps, deep));
		return mix(7, sum);
	}
	return (uint64_t)(v->type & 0xFF);
}

/* ---------------------------------------------------------------------------
 * gh_schema_check
 */

struct cctx {
	const cJSON *root;
	struct seg path[2 * GH_SCHEMA_MAX_DEPTH + 8];
	int npath;
	long steps;
	struct mw out;
};

static int cpush(struct cctx *c, const char *key, size_t index)
{
	return seg_push(c->path, &c->npath, (int)GH_ARRAY_LEN(c->path), key, index);
}

static void cpop(struct cctx *c)
{
	c->npath--;
}

static void cseg_fmt(const void *segs, int i, char *b, size_t cap)
{
	const struct seg *s = (const struct seg *)segs + i;

	if (!s->key)
		snprintf(b, cap, "[%zu]", s->index);
	else if (strlen(s->key) > QUOTE_MAX)
		snprintf(b, cap, "%s%.*s...", i ? "." : "", (int)utf8_trim(s->key, QUOTE_MAX),
			 s->key);
	else
		snprintf(b, cap, "%s%s", i ? "." : "", s->key);
}

/* "<schema path>[.kw]: ..." */
static int cfail(struct cctx *c, const char *kw, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int cfail(struct cctx *c, const char *kw, const char *fmt, ...)
{
	va_list ap;

	mw_init(&c->out, c->out.p, c->out.cap);
	mw_path(&c->out, c->path, c->npath, cseg_fmt);
	if (kw)
		mw_printf(&c->out, "%s%s", c->npath ? "." : "", kw);
	else if (c->npath == 0)
		mw_puts(&c->out, "schema");
	mw_puts(&c->out, ": ");
	va_start(ap, fmt);
	mw_vprintf(&c->out, fmt, ap);
	va_end(ap);
	return -1;
}

/* s quoted for a message, into b. */
static const char *quoted(char *b, size_t cap, const char *s)
{
	struct mw w;

	mw_init(&w, b, cap);
	mw_quote(&w, s, QUOTE_MAX);
	return b;
}

static int check_node(struct cctx *c, const cJSON *s, int depth);

/* check_node() one level down, at key (or at index when key is NULL). */
static int check_at(struct cctx *c, const char *key, size_t index, const cJSON *s, int depth)
{
	int rc;

	if (cpush(c, key, index))
		return cfail(c, NULL, "schema nests too deeply");
	rc = check_node(c, s, depth + 1);
	cpop(c);
	return rc;
}

static int check_list(struct cctx *c, const char *kw, const cJSON *list, int depth,
		      int nonempty)
{
	const cJSON *e;
	size_t i = 0;
	int rc = 0;

	if (!cJSON_IsArray(list))
		return cfail(c, kw, "must be an array of schemas");
	if (nonempty && !list->child)
		return cfail(c, kw, "must not be empty");
	if (cpush(c, kw, 0))
		return cfail(c, NULL, "schema nests too deeply");
	for (e = list->child; e && rc == 0; e = e->next, i++)
		rc = check_at(c, NULL, i, e, depth);
	cpop(c);
	return rc;
}

static int check_map(struct cctx *c, const char *kw, const cJSON *map, int depth,
		     int keys_are_patterns)
{
	const cJSON *e;
	int rc = 0;

	if (!cJSON_IsObject(map))
		return cfail(c, kw, "must be an object of schemas");
	if (cpush(c, kw, 0))
		return cfail(c, NULL, "schema nests too deeply");
	for (e = map->child; e && rc == 0; e = e->next) {
		if (!e->string)
			continue;
		if (cpush(c, e->string, 0)) {
			rc = cfail(c, NULL, "schema nests too deeply");
			break;
		}
		if (keys_are_patterns) {
			regex_t re;
			char why[128];
			long cost;

			if (gh_jsregex_compile(e->string, &re, &cost, why, sizeof(why)) == 0) {
				regfree(&re);
				c->steps += cost;
			}
			else
				rc = cfail(c, NULL, "pattern cannot be enforced: it %s", why);
		}
		if (rc == 0)
			rc = check_node(c, e, depth + 1);
		cpop(c);
	}
	cpop(c);
	return rc;
}

static int check_count(struct cctx *c, const char *kw, const cJSON *v)
{
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !is_integral(v->valuedouble) || v->valuedouble < 0)
		return cfail(c, kw, "must be a non-negative integer");
	return 0;
}

static int check_type_kw(struct cctx *c, const cJSON *t)
{
	const cJSON *e;
	char q[SEG_MAX];

	if (cJSON_IsString(t)) {
		if (!type_bit(t->valuestring))
			return cfail(c, "type", "unknown type %s",
				     quoted(q, sizeof(q), t->valuestring));
		return 0;
	}
	if (!cJSON_IsArray(t))
		return cfail(c, "type", "must be a type name or an array of them");
	for (e = t->child; e; e = e->next) {
		if (!cJSON_IsString(e))
			return cfail(c, "type", "must be a type name or an array of them");
		if (!type_bit(e->valuestring))
			return cfail(c, "type", "unknown type %s",
				     quoted(q, sizeof(q), e->valuestring));
	}
	return 0;
}

static int check_ref(struct cctx *c, const cJSON *ref, int depth)
{
	const cJSON *t, *u, *r;
	char q[SEG_MAX];
	int covered, hops, rc;

	if (!cJSON_IsString(ref) || !ref->valuestring)
		return cfail(c, "$ref", "must be a string");
	quoted(q, sizeof(q), ref->valuestring);
	if (ref->valuestring[0] != '#')
		return cfail(c, "$ref", "%s is not a local reference (\"#/...\")", q);
	t = resolve_ref(c->root, ref->valuestring, &covered);
	if (!t)
		return cfail(c, "$ref", "%s does not resolve", q);
	if (!cJSON_IsObject(t) && !cJSON_IsBool(t))
		return cfail(c, "$ref", "%s does not point to a schema", q);
	/* A chain of $refs that never reaches a schema would loop forever. */
	for (u = t, hops = 0; u; hops++) {
		r = cJSON_IsObject(u) ? cJSON_GetObjectItemCaseSensitive(u, "$ref") : NULL;
		if (!cJSON_IsString(r))
			break;
		if (hops >= GH_SCHEMA_MAX_REF_HOPS)
			return cfail(c, "$ref", "%s leads into a $ref cycle", q);
		u = resolve_ref(c->root, r->valuestring, NULL);
	}
	if (covered)
		return 0;
	/* A target outside the places walked anyway gets its own check. */
	if (cpush(c, "$ref", 0))
		return cfail(c, NULL, "schema nests too deeply");
	rc = check_node(c, t, depth + 1);
	cpop(c);
	return rc;
}

static int check_node(struct cctx *c, const cJSON *s, int depth)
{
	struct kw k;
	const cJSON *x;

	if (++c->steps > GH_SCHEMA_MAX_STEPS)
		return cfail(c, NULL, "schema is too large (over %ld schema nodes)",
			     GH_SCHEMA_MAX_STEPS);
	if (cJSON_IsBool(s))
		return 0;
	if (!cJSON_IsObject(s))
		return cfail(c, NULL, "must be a schema (an object or a boolean), got %s",
			     value_type_name(s));
	if (depth > GH_SCHEMA_MAX_DEPTH)
		return cfail(c, NULL, "schema nests deeper than %d levels", GH_SCHEMA_MAX_DEPTH);
	gather(s, &k);
	if (k.type && check_type_kw(c, k.type))
		return -1;
	if (k.nullable && !cJSON_IsBool(k.nullable))
		return cfail(c, "nullable", "must be a boolean");
	if (k.properties && check_map(c, "properties", k.properties, depth, 0))
		return -1;
	if (k.pattern_props && check_map(c, "patternProperties", k.pattern_props, depth, 1))
		return -1;
	if (k.additional && check_at(c, "additionalProperties", 0, k.additional, depth))
		return -1;
	if (k.required) {
		if (!cJSON_IsArray(k.required))
			return cfail(c, "required", "must be an array of strings");
		for (x = k.required->child; x; x = x->next)
			if (!cJSON_IsString(x))
				return cfail(c, "required", "must be an array of strings");
	}
	if (check_count(c, "minProperties", k.min_props) ||
	    check_count(c, "maxProperties", k.max_props))
		return -1;
	if (k.items) {
		if (cJSON_IsArray(k.items) ? check_list(c, "items", k.items, depth, 0) :
					     check_at(c, "items", 0, k.items, depth))
			return -1;
	}
	if (k.prefix_items && check_list(c, "prefixItems", k.prefix_items, depth, 0))
		return -1;
	if (k.additional_items && check_at(c, "additionalItems", 0, k.additional_items, depth))
		return -1;
	if (check_count(c, "minItems", k.min_items) || check_count(c, "maxItems", k.max_items) ||
	    check_count(c, "minLength", k.min_len) || check_count(c, "maxLength", k.max_len))
		return -1;
	if (k.unique && !cJSON_IsBool(k.unique))
		return cfail(c, "uniqueItems", "must be a boolean");
	if (k.minimum && !cJSON_IsNumber(k.minimum))
		return cfail(c, "minimum", "must be a number");
	if (k.maximum && !cJSON_IsNumber(k.maximum))
		return cfail(c, "maximum", "must be a number");
	if (k.xmin && !cJSON_IsNumber(k.xmin) && !cJSON_IsBool(k.xmin))
		return cfail(c, "exclusiveMinimum", "must be a number or a boolean");
	if (k.xmax && !cJSON_IsNumber(k.xmax) && !cJSON_IsBool(k.xmax))
		return cfail(c, "exclusiveMaximum", "must be a number or a boolean");
	if (k.multiple_of && (!cJSON_IsNumber(k.multiple_of) || !(k.multiple_of->valuedouble > 0) ||
			      !isfinite(k.multiple_of->valuedouble)))
		return cfail(c, "multipleOf", "must be a number greater than 0");
	if (k.enum_ && !cJSON_IsArray(k.enum_))
		return cfail(c, "enum", "must be an array");
	if (k.enum_ && !depth_ok(k.enum_, GH_SCHEMA_MAX_VALUE_DEPTH))
		return cfail(c, "enum", "values nest deeper than %d levels",
			     GH_SCHEMA_MAX_VALUE_DEPTH);
	if (k.const_ && !depth_ok(k.const_, GH_SCHEMA_MAX_VALUE_DEPTH))
		return cfail(c, "const", "value nests deeper than %d levels",
			     GH_SCHEMA_MAX_VALUE_DEPTH);
	if (k.pattern) {
		regex_t re;
		char why[128], q[SEG_MAX];
		long cost;

		if (!cJSON_IsString(k.pattern) || !k.pattern->valuestring)
			return cfail(c, "pattern", "must be a string");
		if (gh_jsregex_compile(k.pattern->valuestring, &re, &cost, why, sizeof(why)))
			return cfail(c, "pattern", "%s cannot be enforced: it %s",
				     quoted(q, sizeof(q), k.pattern->valuestring), why);
		regfree(&re);
		c->steps += cost;
	}
	if (k.all_of && check_list(c, "allOf", k.all_of, depth, 1))
		return -1;
	if (k.any_of && check_list(c, "anyOf", k.any_of, depth, 1))
		return -1;
	if (k.one_of && check_list(c, "oneOf", k.one_of, depth, 1))
		return -1;
	if (k.not_ && check_at(c, "not", 0, k.not_, depth))
		return -1;
	if (k.definitions && check_map(c, "definitions", k.definitions, depth, 0))
		return -1;
	if (k.defs && check_map(c, "$defs", k.defs, depth, 0))
		return -1;
	if (k.ref && check_ref(c, k.ref, depth))
		return -1;
	return 0;
}

int gh_schema_check(const cJSON *schema, char *msg, size_t cap)
{
	struct cctx c;
	char buf[GH_SCHEMA_MSG_MAX];

	memset(&c, 0, sizeof(c));
	c.root = schema;
	mw_init(&c.out, buf, sizeof(buf));
	if (cap)
		msg[0] = '\0';
	if (!schema) {
		cfail(&c, NULL, "missing");
	} else if (check_node(&c, schema, 0) == 0) {
		return 0;
	}
	copy_msg(msg, cap, buf);
	return -1;
}

/* ---------------------------------------------------------------------------
 * gh_schema_validate
 */

/* How a failure ranks when picking which anyOf/oneOf branch to report:
 * deeper wins; at equal depth a rule violation beats a type mismatch,
 * which beats a const/enum mismatch (the usual sign of the wrong branch of
 * a tagged union). */
enum { EK_CONST = 0, EK_TYPE = 1, EK_RULE = 2 };

struct vctx {
	const cJSON *root;
	struct seg path[GH_SCHEMA_MAX_VALUE_DEPTH];
	int npath;
	int frames;
	int hops;
	long steps;
	int fatal;        /* too deep, too complex, out of memory: stop everything */
	int err_depth;    /* npath of the latest failure */
	int err_kind;     /* EK_* */
	unsigned err_want; /* for EK_TYPE: the types that were allowed */
	struct mw out;
	char err[GH_SCHEMA_MSG_MAX];
	struct gh_jsregex_cache rx;
};

static int is_ident(const char *s)
{
	size_t n = 0;

	if (!((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z') && *s != '_' && *s != '$')
		return 0;
	for (; *s; s++, n++)
		if (!is_alnum((unsigned char)*s) && *s != '_' && *s != '$')
			return 0;
	return n <= QUOTE_MAX;
}

static void vseg_fmt(const void *segs, int i, char *b, size_t cap)
{
	const struct seg *s = (const struct seg *)segs + i;
	struct mw w;

	mw_init(&w, b, cap);
	if (!s->key) {
		mw_printf(&w, "[%zu]", s->index);
	} else if (is_ident(s->key)) {
		mw_printf(&w, ".%s", s->key);
	} else {
		mw_puts(&w, "[");
		mw_quote(&w, s->key, QUOTE_MAX);
		mw_puts(&w, "]");
	}
}

/* Starts a message: "$.a[2]: ". */
static struct mw *vbegin(struct vctx *v)
{
	mw_init(&v->out, v->err, sizeof(v->err));
	mw_puts(&v->out, "$");
	mw_path(&v->out, v->path, v->npath, vseg_fmt);
	mw_puts(&v->out, ": ");
	return &v->out;
}

static int vend(struct vctx *v, int kind)
{
	v->err_depth = v->npath;
	v->err_kind = kind;
	v->err_want = 0;
	return -1;
}

static int vfail(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vfail(struct vctx *v, const char *fmt, ...)
{
	va_list ap;

	vbegin(v);
	va_start(ap, fmt);
	mw_vprintf(&v->out, fmt, ap);
	va_end(ap);
	return vend(v, EK_RULE);
}

static int vfatal(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vfatal(struct vctx *v, const char *fmt, ...)
{
	va_list ap;

	vbegin(v);
	va_start(ap, fmt);
	mw_vprintf(&v->out, fmt, ap);
	va_end(ap);
	v->fatal = 1;
	return vend(v, EK_RULE);
}

static int vpush(struct vctx *v, const char *key, size_t index)
{
	if (seg_push(v->path, &v->npath, (int)GH_ARRAY_LEN(v->path), key, index) != 0)
		return vfatal(v, "schema too deep (value nests deeper than %d levels)",
			      GH_SCHEMA_MAX_VALUE_DEPTH);
	return 0;
}

static void vpop(struct vctx *v)
{
	v->npath--;
}

/* -1 (fatal) once the step budget is spent. */
static int over_budget(struct vctx *v)
{
	if (v->steps <= GH_SCHEMA_MAX_STEPS)
		return 0;
	return vfatal(v, "schema too complex to check (over %ld steps)", GH_SCHEMA_MAX_STEPS);
}

static int validate(struct vctx *v, const cJSON *s, const cJSON *x);

/* validate() one level down, at key or index. */
static int validate_at(struct vctx *v, const cJSON *s, const cJSON *x, const char *key,
		       size_t index)
{
	int rc;

	if (vpush(v, key, index))
		return -1;
	rc = validate(v, s, x);
	vpop(v);
	return rc;
}

static int check_type(struct vctx *v, const cJSON *t, int nullable, const cJSON *x)
{
	const cJSON *e;
	unsigned want = 0;
	struct mw *w;

	if (cJSON_IsString(t)) {
		want = type_bit(t->valuestring);
		if (!want)
			return 0; /* unknown: gh_schema_check refuses it */
	} else if (cJSON_IsArray(t)) {
		for (e = t->child; e; e = e->next)
			want |= cJSON_IsString(e) ? type_bit(e->valuestring) : 0;
	} else {
		return 0;
	}
	if (nullable)
		want |= T_NULL;
	if (value_types(x) & want)
		return 0;
	w = vbegin(v);
	mw_puts(w, "expected ");
	mw_types(w, want);
	mw_printf(w, ", got %s", value_type_name(x));
	vend(v, EK_TYPE);
	v->err_want = want;
	return -1;
}

static int check_enum(struct vctx *v, const cJSON *list, const cJSON *x)
{
	const cJSON *e;
	struct mw *w;
	int n = 0;

	if (!cJSON_IsArray(list))
		return 0;
	for (e = list->child; e; e = e->next)
		if (json_equal(e, x, 0, &v->steps))
			return 0;
	w = vbegin(v);
	if (list->child && !list->child->next) {
		mw_puts(w, "must be ");
		mw_value(w, list->child);
		return vend(v, EK_CONST);
	}
	mw_puts(w, "must be one of ");
	for (e = list->child; e; e = e->next, n++) {
		if (n == 10) {
			mw_puts(w, ", ...");
			break;
		}
		if (n)
			mw_puts(w, ", ");
		mw_value(w, e);
	}
	if (n == 0)
		mw_puts(w, "nothing (the enum is empty)");
	return vend(v, EK_CONST);
}

static int count_ok(const cJSON *limit, size_t n, int is_min)
{
	double d;

	if (!cJSON_IsNumber(limit))
		return 1;
	d = limit->valuedouble;
	return is_min ? (double)n >= d : (double)n <= d;
}

/* "must have at least 2 items"; unit is "item" or "property". */
static int fail_count(struct vctx *v, const char *what, const char *bound, double d,
		      const char *unit)
{
	struct mw *w = vbegin(v);

	mw_printf(w, "%s %s ", what, bound);
	mw_num(w, d);
	if (d == 1)
		mw_printf(w, " %s", unit);
	else if (strcmp(unit, "property") == 0)
		mw_puts(w, " properties");
	else
		mw_printf(w, " %ss", unit);
	return vend(v, EK_RULE);
}

static int validate_object(struct vctx *v, const struct kw *k, const cJSON *x)
{
	const cJSON *m, *r, *sub, *pp;
	size_t n = 0, nprops = 0;
	char why[128];
	struct mw *w;
	int rc;

	for (m = x->child; m; m = m->next)
		n++;
	if (cJSON_IsObject(k->properties))
		for (m = k->properties->child; m; m = m->next)
			nprops++;
	if (cJSON_IsArray(k->required)) {
		for (r = k->required->child; r; r = r->next) {
			v->steps += 1 + (long)(n / 64);
			if (over_budget(v))
				return -1;
			if (!cJSON_IsString(r) ||
			    cJSON_GetObjectItemCaseSensitive(x, r->valuestring))
				continue;
			w = vbegin(v);
			mw_puts(w, "missing required property ");
			mw_quote(w, r->valuestring, QUOTE_MAX);
			return vend(v, EK_RULE);
		}
	}
	if (!count_ok(k->min_props, n, 1))
		return fail_count(v, "must have", "at least", k->min_props->valuedouble,
				  "property");
	if (!count_ok(k->max_props, n, 0))
		return fail_count(v, "must have", "at most", k->max_props->valuedouble,
				  "property");
	for (m = x->child; m; m = m->next) {
		int matched = 0;

		if (!m->string)
			continue;
		v->steps += 1 + (long)(nprops / 64);
		if (over_budget(v))
			return -1;
		sub = cJSON_IsObject(k->properties) ?
			      cJSON_GetObjectItemCaseSensitive(k->properties, m->string) : NULL;
		if (sub) {
			matched = 1;
			if (validate_at(v, sub, m, m->string, 0))
				return -1;
		}
		if (cJSON_IsObject(k->pattern_props)) {
			for (pp = k->pattern_props->child; pp; pp = pp->next) {
				int hit;

				if (!pp->string)
					continue;
				hit = gh_jsregex_match(&v->rx, pp->string, m->string, strlen(m->string),
					       &v->steps, why, sizeof(why));
				v->steps += 1 + (long)(strlen(m->string) / 64);
				if (over_budget(v))
					return -1;
				if (hit == -2) {
					if (vpush(v, m->string, 0))
						return -1;
					w = vbegin(v);
					mw_puts(w, "property name too long to check against "
						   "patternProperties ");
					mw_quote(w, pp->string, QUOTE_MAX);
					mw_printf(w, " (at most %s)", why);
					rc = vend(v, EK_RULE);
					vpop(v);
					return rc;
				}
				if (hit < 0) {
					w = vbegin(v);
					mw_puts(w, "patternProperties ");
					mw_quote(w, pp->string, QUOTE_MAX);
					mw_printf(w, " cannot be enforced: it %s", why);
					v->fatal = 1;
					return vend(v, EK_RULE);
				}
				if (hit) {
					matched = 1;
					if (validate_at(v, pp, m, m->string, 0))
						return -1;
				}
			}
		}
		if (matched || !k->additional)
			continue;
		if (vpush(v, m->string, 0))
			return -1;
		if (cJSON_IsFalse(k->additional)) {
			vfail(v, "additional property not allowed");
			vpop(v);
			return -1;
		}
		if (validate(v, k->additional, m)) {
			vpop(v);
			return -1;
		}
		vpop(v);
	}
	return 0;
}

struct hitem {
	uint64_t h;
	size_t i;
	const cJSON *e;
};

static int cmp_hitem(const void *pa, const void *pb)
{
	const struct hitem *a = pa, *b = pb;

	if (a->h != b->h)
		return a->h < b->h ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* uniqueItems in O(n log n): sort by hash, compare only equal hashes.
 * Reports the earliest item that repeats an earlier one. */
static int check_unique(struct vctx *v, const cJSON *x, size_t n)
{
	struct hitem *a;
	const cJSON *e;
	size_t i, j, lo = 0, hi = (size_t)-1;

	if (n < 2)
		return 0;
	a = malloc(n * sizeof(*a));
	if (!a)
		return vfatal(v, "out of memory checking uniqueItems");
	for (i = 0, e = x->child; e && i < n; e = e->next, i++) {
		int deep = 0;

		a[i].h = hash_value(e, v->npath + 1, &v->steps, &deep);
		a[i].i = i;
		a[i].e = e;
		if (deep) {
			free(a);
			return vfatal(v, "schema too deep (value nests deeper than %d levels)",
				      GH_SCHEMA_MAX_VALUE_DEPTH);
		}
	}
	qsort(a, n, sizeof(*a), cmp_hitem);
	/* Within a run of equal hashes the indexes ascend, so a scan stops at
	 * the first pair that could not beat the one already found. */
	for (i = 0; i + 1 < n && v->steps <= GH_SCHEMA_MAX_STEPS; i++) {
		if (a[i].i >= hi)
			continue;
		for (j = i + 1; j < n && a[j].h == a[i].h && a[j].i < hi; j++) {
			v->steps++;
			if (json_equal(a[i].e, a[j].e, 0, &v->steps)) {
				lo = a[i].i;
				hi = a[j].i;
				break;
			}
			if (v->steps > GH_SCHEMA_MAX_STEPS)
				break;
		}
	}
	free(a);
	if (over_budget(v))
		return -1;
	if (hi != (size_t)-1)
		return vfail(v, "items must be unique (item %zu repeats item %zu)", hi, lo);
	return 0;
}

static int validate_array(struct vctx *v, const struct kw *k, const cJSON *x)
{
	const cJSON *tuple = NULL, *rest = NULL, *t, *e;
	size_t n = 0, ntuple = 0, i;

	for (e = x->child; e; e = e->next)
		n++;
	v->steps += (long)(n / 64);
	if (!count_ok(k->min_items, n, 1))
		return fail_count(v, "must have", "at least", k->min_items->valuedouble, "item");
	if (!count_ok(k->max_items, n, 0))
		return fail_count(v, "must have", "at most", k->max_items->valuedouble, "item");
	if (cJSON_IsArray(k->prefix_items)) {
		tuple = k->prefix_items;
		rest = cJSON_IsArray(k->items) ? NULL : k->items;
	} else if (cJSON_IsArray(k->items)) {
		tuple = k->items;
		rest = k->additional_items;
	} else {
		rest = k->items;
	}
	for (t = tuple ? tuple->child : NULL; t; t = t->next)
		ntuple++;
	if (cJSON_IsFalse(rest) && n > ntuple)
		return fail_count(v, "must have", "at most", (double)ntuple, "item");
	t = tuple ? tuple->child : NULL;
	for (e = x->child, i = 0; e; e = e->next, i++) {
		const cJSON *sub = t ? t : rest;

		if (t)
			t = t->next;
		if (sub && validate_at(v, sub, e, NULL, i))
			return -1;
	}
	if (cJSON_IsTrue(k->unique))
		return check_unique(v, x, n);
	return 0;
}

static int validate_string(struct vctx *v, const struct kw *k, const cJSON *x)
{
	const char *s = x->valuestring ? x->valuestring : "";
	const unsigned char *p;
	char why[128];
	size_t n = 0;
	struct mw *w;
	int hit;

	if (k->min_len || k->max_len) {
		/* Code points: every byte that does not continue a sequence. */
		for (p = (const unsigned char *)s; *p; p++)
			n += (*p & 0xC0) != 0x80;
		v->steps += (long)((size_t)(p - (const unsigned char *)s) / 1024);
		if (!count_ok(k->min_len, n, 1))
			return fail_count(v, "must be", "at least", k->min_len->valuedouble,
					  "character");
		if (!count_ok(k->max_len, n, 0))
			return fail_count(v, "must be", "at most", k->max_len->valuedouble,
					  "character");
	}
	if (cJSON_IsString(k->pattern) && k->pattern->valuestring) {
		size_t len = strlen(s);

		/* regexec time and memory grow with the string */
		v->steps += (long)(len / 64);
		hit = gh_jsregex_match(&v->rx, k->pattern->valuestring, s, len, &v->steps, why,
			       sizeof(why));
		if (hit == 1)
			return 0;
		w = vbegin(v);
		if (hit == -2) {
			mw_printf(w, "too long (%zu bytes) to check against pattern ", len);
			mw_quote(w, k->pattern->valuestring, QUOTE_MAX);
			mw_printf(w, " (at most %s)", why);
		} else if (hit < 0) {
			mw_puts(w, "pattern ");
			mw_quote(w, k->pattern->valuestring, QUOTE_MAX);
			mw_printf(w, " cannot be enforced: it %s", why);
			v->fatal = 1;
		} else {
			mw_puts(w, "must match pattern ");
			mw_quote(w, k->pattern->valuestring, QUOTE_MAX);
		}
		return vend(v, EK_RULE);
	}
	return 0;
}

static int is_multiple(double d, double m)
{
	double q, r;

	if (is_integral(d) && is_integral(m) && fabs(d) < 9007199254740992.0 &&
	    fabs(m) < 9007199254740992.0)
		return fmod(d, m) == 0;
	q = d / m;
	if (!isfinite(q))
		return 0;
	r = nearbyint(q);
	return fabs(q - r) <= 1e-9 * fmax(1.0, fabs(q));
}

static int fail_bound(struct vctx *v, const char *op, double d)
{
	struct mw *w = vbegin(v);

	mw_printf(w, "must be %s ", op);
	mw_num(w, d);
	return vend(v, EK_RULE);
}

static int validate_number(struct vctx *v, const struct kw *k, const cJSON *x)
{
	double d = x->valuedouble;

	if (cJSON_IsNumber(k->minimum)) {
		double b = k->minimum->valuedouble;

		if (cJSON_IsTrue(k->xmin) ? !(d > b) : !(d >= b))
			return fail_bound(v, cJSON_IsTrue(k->xmin) ? ">" : ">=", b);
	}
	if (cJSON_IsNumber(k->maximum)) {
		double b = k->maximum->valuedouble;

		if (cJSON_IsTrue(k->xmax) ? !(d < b) : !(d <= b))
			return fail_bound(v, cJSON_IsTrue(k->xmax) ? "<" : "<=", b);
	}
	if (cJSON_IsNumber(k->xmin) && !(d > k->xmin->valuedouble))
		return fail_bound(v, ">", k->xmin->valuedouble);
	if (cJSON_IsNumber(k->xmax) && !(d < k->xmax->valuedouble))
		return fail_bound(v, "<", k->xmax->valuedouble);
	if (cJSON_IsNumber(k->multiple_of) && k->multiple_of->valuedouble > 0 &&
	    !is_multiple(d, k->multiple_of->valuedouble))
		return fail_bound(v, "a multiple of", k->multiple_of->valuedouble);
	return 0;
}

/* anyOf (one = 0) and oneOf (one = 1). When nothing matches, reports the
 * branch that got furthest; "expected A or B, got C" when every branch
 * failed on the type of this very value. */
static int validate_branches(struct vctx *v, const cJSON *list, const cJSON *x, int one)
{
	const cJSON *b;
	char best[GH_SCHEMA_MSG_MAX];
	int i, first = -1, nmatch = 0, all_type = 1, best_score = -1, best_depth = 0;
	int best_kind = EK_RULE;
	unsigned want = 0;
	struct mw *w;

	if (!cJSON_IsArray(list) || !list->child)
		return 0;
	best[0] = '\0';
	for (b = list->child, i = 0; b; b = b->next, i++) {
		int score;

		if (validate(v, b, x) == 0) {
			if (!one)
				return 0;
			if (nmatch++ == 0) {
				first = i;
				continue;
			}
			return vfail(v, "must match exactly one schema in oneOf, but matches "
					"%d and %d", first, i);
		}
		if (v->fatal)
			return -1;
		if (v->err_kind == EK_TYPE && v->err_depth == v->npath)
			want |= v->err_want;
		else
			all_type = 0;
		score = v->err_depth * 3 + v->err_kind;
		if (score > best_score) {
			best_score = score;
			best_depth = v->err_depth;
			best_kind = v->err_kind;
			gh_strlcpy(best, v->err, sizeof(best));
		}
	}
	if (nmatch == 1)
		return 0;
	if (all_type) {
		w = vbegin(v);
		mw_puts(w, "expected ");
		mw_types(w, want);
		mw_printf(w, ", got %s", value_type_name(x));
		vend(v, EK_TYPE);
		v->err_want = want;
		return -1;
	}
	if (best_depth > v->npath || best_kind == EK_RULE) {
		gh_strlcpy(v->err, best, sizeof(v->err));
		v->err_depth = best_depth;
		v->err_kind = best_kind;
		v->err_want = 0;
		return -1;
	}
	return vfail(v, "does not match any of the schemas in %s", one ? "oneOf" : "anyOf");
}

static int validate_obj(struct vctx *v, const cJSON *s, const cJSON *x)
{
	struct kw k;
	const cJSON *b, *t;
	int rc;

	gather(s, &k);
	if (cJSON_IsTrue(k.nullable) && cJSON_IsNull(x))
		return 0;
	if (k.type && check_type(v, k.type, cJSON_IsTrue(k.nullable), x))
		return -1;
	if (k.const_ && !json_equal(k.const_, x, 0, &v->steps)) {
		struct mw *w = vbegin(v);

		mw_puts(w, "must be ");
		mw_value(w, k.const_);
		return vend(v, EK_CONST);
	}
	if (k.enum_ && check_enum(v, k.enum_, x))
		return -1;
	if (cJSON_IsObject(x) && validate_object(v, &k, x))
		return -1;
	if (cJSON_IsArray(x) && validate_array(v, &k, x))
		return -1;
	if (cJSON_IsString(x) && validate_string(v, &k, x))
		return -1;
	if (cJSON_IsNumber(x) && validate_number(v, &k, x))
		return -1;
	if (cJSON_IsArray(k.all_of))
		for (b = k.all_of->child; b; b = b->next)
			if (validate(v, b, x))
				return -1;
	if (k.any_of && validate_branches(v, k.any_of, x, 0))
		return -1;
	if (k.one_of && validate_branches(v, k.one_of, x, 1))
		return -1;
	if (k.not_) {
		rc = validate(v, k.not_, x);
		if (v->fatal)
			return -1;
		if (rc == 0)
			return vfail(v, "must not match the schema in \"not\"");
	}
	if (cJSON_IsString(k.ref)) {
		t = resolve_ref(v->root, k.ref->valuestring, NULL);
		if (!t) {
			struct mw *w = vbegin(v);

			mw_puts(w, "$ref ");
			mw_quote(w, k.ref->valuestring, QUOTE_MAX);
			mw_puts(w, " does not resolve");
			v->fatal = 1;
			return vend(v, EK_RULE);
		}
		if (v->hops >= GH_SCHEMA_MAX_REF_HOPS)
			return vfatal(v, "schema too deep (more than %d $ref hops)",
				      GH_SCHEMA_MAX_REF_HOPS);
		v->hops++;
		rc = validate(v, t, x);
		v->hops--;
		if (rc)
			return -1;
	}
	return 0;
}

static int validate(struct vctx *v, const cJSON *s, const cJSON *x)
{
	int rc;

	if (v->fatal)
		return -1;
	v->steps++;
	if (over_budget(v))
		return -1;
	if (cJSON_IsTrue(s))
		return 0;
	if (cJSON_IsFalse(s))
		return vfail(v, "no value is allowed here");
	if (!cJSON_IsObject(s))
		return vfatal(v, "the schema here is not usable");
	if (v->frames >= MAX_FRAMES)
		return vfatal(v, "schema too deep (more than %d nested schemas)", MAX_FRAMES);
	v->frames++;
	rc = validate_obj(v, s, x);
	v->frames--;
	return rc;
}

int gh_schema_validate(const cJSON *schema, const cJSON *value, char *msg, size_t cap)
{
	struct vctx v;
	int rc;

	memset(&v, 0, sizeof(v));
	v.root = schema;
	if (cap)
		msg[0] = '\0';
	if (!schema)
		rc = vfatal(&v, "no schema to validate against");
	else if (!value)
		rc = vfail(&v, "expected a JSON value, got nothing");
	else
		rc = validate(&v, schema, value);
	gh_jsregex_cache_free(&v.rx);
	if (rc == 0)
		return 0;
	copy_msg(msg, cap, v.err);
	return -1;
}
