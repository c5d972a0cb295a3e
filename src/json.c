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

/* 0 ok, 1 too deep, 2 duplicate member names. Containers count toward the
 * depth; the scalars inside the deepest ones do not. */
static int check_tree(const cJSON *v, int depth, int dups_ok)
{
	const cJSON *c;
	int rc;

	if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
		return 0;
	if (depth > GH_JSON_MAX_DEPTH)
		return 1;
	if (!dups_ok && cJSON_IsObject(v) && has_duplicates(v))
		return 2;
	for (c = v->child; c; c = c->next)
		if ((rc = check_tree(c, depth + 1, dups_ok)) != 0)
			return rc;
	return 0;
}

static enum gh_code parse(const char *s, size_t n, const char *what, int dups_ok, cJSON **out,
			  struct gh_err *e);

enum gh_code gh_json_parse(const char *s, size_t n, const char *what, cJSON **out,
			   struct gh_err *e)
{
	return parse(s, n, what, 0, out, e);
}

enum gh_code gh_json_parse_dups(const char *s, size_t n, const char *what, cJSON **out,
				struct gh_err *e)
{
	return parse(s, n, what, 1, out, e);
}

static enum gh_code parse(const char *s, size_t n, const char *what, int dups_ok, cJSON **out,
			  struct gh_err *e)
{
	const char *end = NULL;
	cJSON *v;
	size_t off, i;
	int line = 1, col = 1;

	*out = NULL;
	if (n == 0)
		return gh_err_set(e, GH_E_BADREQ, "%s is empty; expected JSON", what);
	v = cJSON_ParseWithLengthOpts(s, n, &end, 0);
	if (v) {
		off = (size_t)(end - s);
		while (off < n && (s[off] == ' ' || s[off] == '\t' || s[off] == '\r' ||
				   s[off] == '\n'))
			off++;
		if (off == n) {
			int bad = check_tree(v, 1, dups_ok);

			if (bad) {
				cJSON_Delete(v);
				return bad == 1 ? gh_err_set(e, GH_E_BADREQ,
							     "%s nests deeper than %d levels", what,
							     GH_JSON_MAX_DEPTH)
						: gh_err_set(e, GH_E_BADREQ,
							     "%s has an object with a member name "
							     "given twice", what);
			}
			*out = v;
			return GH_OK;
		}
		cJSON_Delete(v);
	} else {
		/* cJSON reports the failure position through a global; the
		 * thread-safe way is to re-derive it from the returned end
		 * pointer when present. */
		off = end ? (size_t)(end - s) : 0;
	}
	if (off > n)
		off = n;
	for (i = 0; i < off; i++) {
		if (s[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	return gh_err_set(e, GH_E_BADREQ, "%s is not valid JSON (line %d, column %d)", what,
			  line, col);
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

/* Integers without printf: most numbers gatehouse writes are counts,
 * sizes and times, and printf with its locale handling dominated the cost
 * of serialising. */
static int put_int(struct gh_buf *out, long long v)
{
	char tmp[24];
	size_t i = sizeof(tmp);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[--i] = '-';
	return gh_buf_append(out, tmp + i, sizeof(tmp) - i);
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
	if (!v || cJSON_IsNull(v))
		return gh_buf_puts(out, "null");
	if (cJSON_IsTrue(v))
		return gh_buf_puts(out, "true");
	if (cJSON_IsFalse(v))
		return gh_buf_puts(out, "false");
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;

		if (!isfinite(d))
			return gh_buf_puts(out, "null");
		if (gh_json_is_int(v))
			return put_int(out, (long long)d);
		return gh_buf_printf(out, "%.17g", d);
	}
	if (cJSON_IsString(v))
		return gh_buf_json_str(out, v->valuestring ? v->valuestring : "");
	if (cJSON_IsRaw(v))
		return gh_buf_puts(out, v->valuestring ? v->valuestring : "null");
	if (cJSON_IsArray(v)) {
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
	if (cJSON_IsObject(v)) {
		const cJSON *c, **keys = NULL, *stackkeys[32];
		size_t n = 0, i;

		for (c = v->child; c; c = c->next)
			n++;
		if (n == 0)
			return gh_buf_puts(out, "{}");
		if (sorted) {
			keys = n <= GH_ARRAY_LEN(stackkeys) ? stackkeys : malloc(n * sizeof(*keys));
			if (!keys)
				return GH_BUF_NOMEM;
			for (i = 0, c = v->child; c; c = c->next)
				keys[i++] = c;
			qsort(keys, n, sizeof(*keys), cmp_keys);
		}
		rc = gh_buf_putc(out, '{');
		for (i = 0, c = v->child; i < n && rc == GH_BUF_OK; i++, c = c ? c->next : NULL) {
			const cJSON *m = sorted ? keys[i] : c;

			if (i && (rc = gh_buf_putc(out, ',')) != GH_BUF_OK)
				break;
			if ((rc = gh_buf_json_str(out, m->string ? m->string : "")) != GH_BUF_OK)
				break;
			if ((rc = gh_buf_putc(out, ':')) != GH_BUF_OK)
				break;
			rc = write_value(m, out, sorted, depth + 1);
		}
		if (keys != stackkeys)
			free(keys);
		if (rc != GH_BUF_OK)
			return rc;
		return gh_buf_putc(out, '}');
	}
	return gh_buf_puts(out, "null");
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
	double d;

	if (!cJSON_IsNumber(v))
		return 0;
	d = v->valuedouble;
	return isfinite(d) && d == floor(d) && d >= -9007199254740992.0 &&
	       d <= 9007199254740992.0;
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
