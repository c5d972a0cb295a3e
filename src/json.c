/*
 * json.c - cJSON helpers; see json.h.
 */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when an object has two members with one name. cJSON keeps both and
 * lookups see the first: what gets validated and what gets used could
 * differ, so such input is refused. */
static int has_duplicates(const cJSON *obj)
{
	const cJSON *a, *b;
	const char **names;
	size_t n = 0, i;
	int dup = 0;

	for (a = obj->child; a; a = a->next)
		n++;
	if (n < 2)
		return 0;
	if (n <= 16) {
		for (a = obj->child; a; a = a->next)
			for (b = a->next; b; b = b->next)
				if (!strcmp(a->string, b->string))
					return 1;
		return 0;
	}
	names = malloc(n * sizeof(*names));
	if (!names)
		return 1; /* cannot check: refuse */
	for (i = 0, a = obj->child; a; a = a->next)
		names[i++] = a->string;
	qsort(names, n, sizeof(*names), cmp_names);
	for (i = 1; i < n && !dup; i++)
		dup = !strcmp(names[i - 1], names[i]);
	free(names);
	return dup;
}

/* 1 when some object in v has two members with one name. The pre-scan
 * has bounded the depth, so the recursion is bounded too. */
static int dups_in_tree(const cJSON *v)
{
	const cJSON *c;

	if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
		return 0;
	if (cJSON_IsObject(v) && has_duplicates(v))
		return 1;
	for (c = v->child; c; c = c->next)
		if (dups_in_tree(c))
			return 1;
	return 0;
}

/* 1 when some number in v is not finite: cJSON reads a literal beyond
 * double's range (1e999) as infinity, which it would print back as null,
 * so the value could not reach a tool, a client or the audit log as it
 * was sent. Bounded recursion, as dups_in_tree. */
static int nonfinite_in_tree(const cJSON *v)
{
	const cJSON *c;

	if (cJSON_IsNumber(v))
		return !isfinite(v->valuedouble);
	if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
		return 0;
	for (c = v->child; c; c = c->next)
		if (nonfinite_in_tree(c))
			return 1;
	return 0;
}

/* ---- the pre-scan: size, depth and NUL before cJSON recurses ---- */

/* One open container on the way to the byte being scanned: its kind, the
 * index of the element being read (arrays) or the name of the member
 * (objects, borrowed from the input), for the JSON path in messages. */
struct frame {
	char kind;               /* '[' or '{' */
	char expect_name;        /* in an object, the next string is a name */
	size_t index;
	const char *name;
	size_t name_len;
};

enum scan_fault { SCAN_OK, SCAN_DEEP, SCAN_RAW_NUL, SCAN_NUL_ESCAPE, SCAN_NOMEM };

struct scan {
	struct frame frames[GH_JSON_MAX_DEPTH_STORED];
	int depth;
	size_t at;               /* offset of the fault */
	int in_string;           /* the fault is inside a string ... */
	int in_name;             /* ... that is a member name */
	char *patched;           /* NUL_REPLACE: a copy with \u0000 -> \ufffd */
};

/* Line and column (from 1) of offset off. */
static void position(const char *s, size_t off, int *line, int *col)
{
	size_t i;

	*line = 1;
	*col = 1;
	for (i = 0; i < off; i++) {
		if (s[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

/* The JSON path of the scan's open containers, "$.a[2].b", cut with "..."
 * when long. Member names are shown as written, unusual bytes as '?'. */
static void render_path(const struct scan *sc, char *out, size_t cap)
{
	size_t n;
	int i;

	n = (size_t)snprintf(out, cap, "$");
	for (i = 0; i < sc->depth && n + 32 < cap; i++) {
		const struct frame *f = &sc->frames[i];

		if (f->kind == '[') {
			n += (size_t)snprintf(out + n, cap - n, "[%zu]", f->index);
		} else if (f->name) {
			size_t k;

			out[n++] = '.';
			for (k = 0; k < f->name_len && n + 8 < cap; k++) {
				unsigned char ch = (unsigned char)f->name[k];

				out[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
			}
			out[n] = '\0';
		}
	}
	if (i < sc->depth)
		snprintf(out + n, cap - n, "...");
}

/* Walks s once the way cJSON will: strings (with their escapes) and,
 * outside them, the brackets that make cJSON recurse. Stops at the first
 * fault. Syntax errors are left to cJSON, which stops at the first one: up
 * to there this scan and cJSON agree on where strings are, so cJSON never
 * nests deeper than seen here. */
static enum scan_fault prescan(const char *s, size_t n, unsigned flags, int max_depth,
			       struct scan *sc)
{
	size_t i = 0;

	sc->depth = 0;
	sc->patched = NULL;
	while (i < n) {
		char ch = s[i];
		struct frame *top = sc->depth ? &sc->frames[sc->depth - 1] : NULL;

		if (ch == '"') {
			int is_name = top && top->kind == '{' && top->expect_name;
			size_t start = ++i;

			while (i < n && s[i] != '"') {
				int esc0 = s[i] == '\\' && i + 5 < n && s[i + 1] == 'u' &&
					   !memcmp(s + i + 2, "0000", 4);

				if (s[i] != '\0' && !esc0) {
					i += s[i] == '\\' ? 2 : 1;
					continue;
				}
				sc->at = i;
				sc->in_string = 1;
				sc->in_name = is_name;
				if (s[i] == '\0')
					return SCAN_RAW_NUL;
				if (!(flags & GH_JSON_NUL_REPLACE))
					return SCAN_NUL_ESCAPE;
				if (!sc->patched) {
					sc->patched = malloc(n);
					if (!sc->patched)
						return SCAN_NOMEM;
					memcpy(sc->patched, s, n);
				}
				memcpy(sc->patched + i + 2, "fffd", 4);
				i += 6;
			}
			if (is_name) {
				top->name = s + start;
				top->name_len = (i < n ? i : n) - start;
			}
			i++;
			continue;
		}
		switch (ch) {
		case '\0':
			sc->at = i;
			sc->in_string = 0;
			sc->in_name = 0;
			return SCAN_RAW_NUL;
		case '[':
		case '{':
			if (sc->depth >= max_depth) {
				sc->at = i;
				return SCAN_DEEP;
			}
			sc->frames[sc->depth++] = (struct frame){ch, ch == '{', 0, NULL, 0};
			break;
		case ']':
		case '}':
			if (sc->depth)
				sc->depth--;
			break;
		case ',':
			if (top && top->kind == '[') {
				top->index++;
			} else if (top) {
				top->expect_name = 1;
				top->name = NULL;
			}
			break;
		case ':':
			if (top)
				top->expect_name = 0;
			break;
		default:
			break;
		}
		i++;
	}
	return SCAN_OK;
}

/* The message for a pre-scan fault. */
static enum gh_code scan_error(const char *s, const char *what, enum scan_fault f,
			       const struct scan *sc, int max_depth, struct gh_err *e)
{
	char path[160];
	int line, col;

	if (f == SCAN_NOMEM)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	position(s, sc->at, &line, &col);
	render_path(sc, path, sizeof(path));
	if (f == SCAN_DEEP)
		return gh_err_set(e, GH_E_BADREQ, "%s nests deeper than %d levels at %s (line %d, "
				  "column %d)", what, max_depth, path, line, col);
	if (f == SCAN_RAW_NUL && !sc->in_string)
		return gh_err_set(e, GH_E_BADREQ, "%s contains a NUL byte (line %d, column %d)",
				  what, line, col);
	return gh_err_set(e, GH_E_BADREQ, "%s has a NUL character (%s) in %s at %s (line %d, "
			  "column %d); strings may not contain NUL", what,
			  f == SCAN_RAW_NUL ? "a raw 0 byte" : "\\u0000",
			  sc->in_name ? "a member name" : "the string", path, line, col);
}

enum gh_code gh_json_parse_opts(const char *s, size_t n, const char *what, unsigned flags,
				cJSON **out, struct gh_err *e)
{
	int max_depth = flags & GH_JSON_DEEP ? GH_JSON_MAX_DEPTH_STORED : GH_JSON_MAX_DEPTH;
	const char *end = NULL, *text;
	/* one per thread, not on the stack (worker stacks are kept small)
	 * and not from malloc (a block this size makes glibc consolidate
	 * its free lists on every parse); nothing here parses re-entrantly */
	static _Thread_local struct scan scan;
	struct scan *sc = &scan;
	enum scan_fault f;
	enum gh_code rc;
	cJSON *v;
	size_t off;
	int line, col;

	*out = NULL;
	if (n == 0)
		return gh_err_set(e, GH_E_BADREQ, "%s is empty; expected JSON", what);
	if (n > GH_JSON_MAX_BYTES)
		return gh_err_set(e, GH_E_TOOBIG, "%s is larger than %zu bytes", what,
				  GH_JSON_MAX_BYTES);
	f = prescan(s, n, flags, max_depth, sc);
	if (f != SCAN_OK) {
		rc = scan_error(s, what, f, sc, max_depth, e);
		goto out;
	}
	text = sc->patched ? sc->patched : s;
	v = cJSON_ParseWithLengthOpts(text, n, &end, 0);
	if (v) {
		off = (size_t)(end - text);
		while (off < n && (text[off] == ' ' || text[off] == '\t' || text[off] == '\r' ||
				   text[off] == '\n'))
			off++;
		if (off == n) {
			if (!(flags & GH_JSON_DUPS_OK) && dups_in_tree(v)) {
				cJSON_Delete(v);
				rc = gh_err_set(e, GH_E_BADREQ, "%s has an object with a member name "
						"given twice", what);
				goto out;
			}
			if (nonfinite_in_tree(v)) {
				cJSON_Delete(v);
				rc = gh_err_set(e, GH_E_BADREQ, "%s has a number too large to "
						"represent (beyond about 1.8e308)", what);
				goto out;
			}
			*out = v;
			rc = GH_OK;
			goto out;
		}
		cJSON_Delete(v);
	} else {
		/* cJSON reports the failure position through a global; the
		 * thread-safe way is to re-derive it from the returned end
		 * pointer when present. */
		off = end ? (size_t)(end - text) : 0;
	}
	if (off > n)
		off = n;
	position(text, off, &line, &col);
	rc = gh_err_set(e, GH_E_BADREQ, "%s is not valid JSON (line %d, column %d)", what, line,
			col);
out:
	free(sc->patched);
	sc->patched = NULL;
	return rc;
}

enum gh_code gh_json_parse(const char *s, size_t n, const char *what, cJSON **out,
			   struct gh_err *e)
{
	return gh_json_parse_opts(s, n, what, 0, out, e);
}

enum gh_code gh_json_parse_dups(const char *s, size_t n, const char *what, cJSON **out,
				struct gh_err *e)
{
	return gh_json_parse_opts(s, n, what, GH_JSON_DUPS_OK, out, e);
}

cJSON *gh_json_parse_stored(const char *s)
{
	struct gh_err ignore;
	cJSON *v = NULL;

	if (s)
		gh_json_parse_opts(s, strlen(s), "stored JSON", GH_JSON_STORED, &v, &ignore);
	return v;
}

int gh_json_strip_comments(char *s, size_t n)
{
	size_t i = 0;
	int in_str = 0;

	while (i < n) {
		if (in_str) {
			if (s[i] == '\\' && i + 1 < n)
				i += 2;
			else {
				if (s[i] == '"')
					in_str = 0;
				i++;
			}
			continue;
		}
		if (s[i] == '"') {
			in_str = 1;
			i++;
		} else if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
			while (i < n && s[i] != '\n')
				s[i++] = ' ';
		} else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
			s[i++] = ' ';
			s[i++] = ' ';
			for (;;) {
				if (i + 1 >= n)
					return -1;
				if (s[i] == '*' && s[i + 1] == '/') {
					s[i++] = ' ';
					s[i++] = ' ';
					break;
				}
				if (s[i] != '\n')
					s[i] = ' ';
				i++;
			}
		} else {
			i++;
		}
	}
	return 0;
}

static int cmp_keys(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;

	return strcmp(x->string, y->string);
}

/* A finite integer no larger than 2^53: exact as a double and as a long long. */
static int double_is_int(double d)
{
	return isfinite(d) && d == floor(d) && d >= -9007199254740992.0 &&
	       d <= 9007199254740992.0;
}

int gh_json_print_number(double d, struct gh_buf *out)
{
	if (!isfinite(d))
		return gh_buf_puts(out, "null");
	if (double_is_int(d))
		return gh_buf_put_int(out, (long long)d);
	return gh_buf_printf(out, "%.17g", d);
}

/* One serialiser for both forms: sorted (canonical: keys in byte order,
 * for hashes) or as built. No whitespace; integers up to 2^53 without
 * exponent, other finite numbers as %.17g (which reads back exactly),
 * non-finite ones as null; raw items verbatim. */
static int write_value(const cJSON *v, struct gh_buf *out, int sorted, int depth)
{
	int rc = GH_BUF_OK;

	if (depth > 1000)
		return GH_BUF_TOOBIG; /* built trees are bounded far below this */
	/* one look at the type byte (cJSON's own tests are a call each) */
	switch (v ? v->type & 0xFF : cJSON_NULL) {
	case cJSON_True:
		return gh_buf_append(out, "true", 4);
	case cJSON_False:
		return gh_buf_append(out, "false", 5);
	case cJSON_Number:
		return gh_json_print_number(v->valuedouble, out);
	case cJSON_String:
		return gh_buf_json_str(out, v->valuestring ? v->valuestring : "");
	case cJSON_Raw:
		return gh_buf_puts(out, v->valuestring ? v->valuestring : "null");
	case cJSON_Array: {
		const cJSON *c;

		if ((rc = gh_buf_putc(out, '[')) != GH_BUF_OK)
			return rc;
		for (c = v->child; c; c = c->next) {
			if (c != v->child && (rc = gh_buf_putc(out, ',')) != GH_BUF_OK)
				return rc;
			if ((rc = write_value(c, out, sorted, depth + 1)) != GH_BUF_OK)
				return rc;
		}
		return gh_buf_putc(out, ']');
	}
	case cJSON_Object: {
		const cJSON *c, **keys = NULL, *stackkeys[32];
		size_t n = 0, i;

		if (!v->child)
			return gh_buf_append(out, "{}", 2);
		if (sorted) {
			for (c = v->child; c; c = c->next)
				n++;
			keys = n <= GH_ARRAY_LEN(stackkeys) ? stackkeys : malloc(n * sizeof(*keys));
			if (!keys)
				return GH_BUF_NOMEM;
			for (i = 0, c = v->child; c; c = c->next)
				keys[i++] = c;
			qsort(keys, n, sizeof(*keys), cmp_keys);
		}
		rc = gh_buf_putc(out, '{');
		for (i = 0, c = v->child; rc == GH_BUF_OK && (sorted ? i < n : c != NULL);
		     i++, c = c ? c->next : NULL) {
			const cJSON *m = sorted ? keys[i] : c;

			if (i && (rc = gh_buf_putc(out, ',')) != GH_BUF_OK)
				break;
			if ((rc = gh_buf_json_str(out, m->string ? m->string : "")) != GH_BUF_OK)
				break;
			if ((rc = gh_buf_putc(out, ':')) != GH_BUF_OK)
				break;
			rc = write_value(m, out, sorted, depth + 1);
		}
		if (sorted && keys != stackkeys)
			free(keys);
		if (rc != GH_BUF_OK)
			return rc;
		return gh_buf_putc(out, '}');
	}
	}
	return gh_buf_append(out, "null", 4); /* null, invalid, anything else */
}

/* Writes v, leaving out as it was on failure. */
static int write_json(const cJSON *v, struct gh_buf *out, int sorted)
{
	size_t len = out->len;
	int rc = write_value(v, out, sorted, 0);

	if (rc != GH_BUF_OK && out->data) {
		out->len = len;
		out->data[len] = '\0';
	}
	return rc;
}

int gh_json_canonical(const cJSON *v, struct gh_buf *out)
{
	return write_json(v, out, 1);
}

int gh_json_print(const cJSON *v, struct gh_buf *out)
{
	return write_json(v, out, 0);
}

char *gh_json_dump(const cJSON *v)
{
	struct gh_buf b;

	gh_buf_init(&b, (size_t)1 << 30);
	if (write_json(v, &b, 0) != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}

const char *gh_json_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int gh_json_bool(const cJSON *obj, const char *key, int dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v);
	return dflt;
}

int gh_json_is_int(const cJSON *v)
{
	return cJSON_IsNumber(v) && double_is_int(v->valuedouble);
}

int64_t gh_json_int(const cJSON *obj, const char *key, int64_t dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return gh_json_is_int(v) ? (int64_t)v->valuedouble : dflt;
}

cJSON *gh_json_add_str(cJSON *obj, const char *key, const char *s)
{
	if (!s)
		return cJSON_AddNullToObject(obj, key);
	return cJSON_AddStringToObject(obj, key, s);
}

void gh_json_add_time(cJSON *obj, const char *key, int64_t ms)
{
	char ts[GH_ISO8601_MAX];

	if (ms <= 0) {
		cJSON_AddNullToObject(obj, key);
		return;
	}
	gh_iso8601(ms, ts, sizeof(ts));
	cJSON_AddStringToObject(obj, key, ts);
}

cJSON *gh_json_error_result(const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	cJSON *o;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = cJSON_CreateObject();
	if (o)
		cJSON_AddStringToObject(o, "error", msg);
	return o;
}
