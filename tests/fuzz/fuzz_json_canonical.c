/*
 * fuzz_json_canonical.c - gh_json_parse and the canonical form that audit
 * hashes and approval bindings are computed over, plus comment stripping.
 *
 * Checks, besides no crash, no leak and bounded time:
 *   - a refusal says where ("line L, column C") or why (empty, too deep, a
 *     member name given twice);
 *   - an accepted value's canonical form parses back (gh_json_parse) to an
 *     equal value (infinities from 1e400 excepted: they become null), and
 *     is a fixed point: canonical(parse(canonical(v))) is
 *     byte for byte canonical(v);
 *   - the canonical form has no whitespace between tokens and no raw
 *     control characters, and its object keys are in bytewise order;
 *   - a smaller output cap fails with GH_BUF_TOOBIG rather than returning
 *     a different text;
 *   - gh_json_strip_comments keeps the length, touches nothing outside
 *     comments, and returns 0 or -1.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                  \
	do {                      \
		if (!(c))         \
			abort();  \
	} while (0)

#define CAP (16u << 20)

/* Keys of every object in bytewise order (duplicates allowed, adjacent). */
static int sorted(const cJSON *v)
{
	const cJSON *c;

	for (c = v ? v->child : NULL; c; c = c->next) {
		if (cJSON_IsObject(v) && c->next && strcmp(c->string, c->next->string) > 0)
			return 0;
		if (!sorted(c))
			return 0;
	}
	return 1;
}

static int has_dup_keys(const cJSON *v)
{
	const cJSON *c, *d;

	for (c = v ? v->child : NULL; c; c = c->next) {
		if (cJSON_IsObject(v))
			for (d = c->next; d; d = d->next)
				if (!strcmp(c->string, d->string))
					return 1;
		if (has_dup_keys(c))
			return 1;
	}
	return 0;
}

/* cJSON reads 1e400 as infinity, which has no JSON form (canonical: null). */
static int has_nonfinite(const cJSON *v)
{
	const cJSON *c;

	if (cJSON_IsNumber(v) && !(v->valuedouble == v->valuedouble &&
				   v->valuedouble - v->valuedouble == 0))
		return 1;
	for (c = v ? v->child : NULL; c; c = c->next)
		if (has_nonfinite(c))
			return 1;
	return 0;
}

/* No byte outside strings is whitespace; no raw control char anywhere. */
static int compact(const char *s, size_t n)
{
	size_t i;
	int in = 0;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20)
			return 0;
		if (in) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in = 0;
		} else if (c == '"') {
			in = 1;
		} else if (c == ' ') {
			return 0;
		}
	}
	return !in;
}

static void strip_check(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t i;
	int rc;

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	rc = gh_json_strip_comments(s, size);
	CHECK(rc == 0 || rc == -1);
	/* newlines survive and only '/', '*' and comment text turn into spaces */
	for (i = 0; i < size; i++) {
		if (data[i] == '\n')
			CHECK(s[i] == '\n');
		else if (s[i] != (char)data[i])
			CHECK(s[i] == ' ');
	}
	CHECK(s[size] == '\0');
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *v = NULL, *back = NULL;
	struct gh_buf c1, c2, small;
	struct gh_err e;
	enum gh_code rc;

	if (size > (1 << 16))
		return 0;
	strip_check(data, size);
	rc = gh_json_parse((const char *)data, size, "input", &v, &e);
	if (rc != GH_OK) {
		CHECK(rc == GH_E_BADREQ && v == NULL);
		CHECK(strstr(e.msg, "line ") || strstr(e.msg, "empty") || strstr(e.msg, "deeper") ||
		      strstr(e.msg, "twice") || strstr(e.msg, "duplicate"));
		return 0;
	}
	gh_buf_init(&c1, CAP);
	gh_buf_init(&c2, CAP);
	CHECK(gh_json_canonical(v, &c1) == GH_BUF_OK);
	CHECK(c1.data && compact(c1.data, c1.len));
	CHECK(gh_json_parse(c1.data, c1.len, "canonical", &back, &e) == GH_OK);
	CHECK(sorted(back));
	/* cJSON_Compare looks members up by name, so it cannot judge objects
	 * with a repeated name; the fixed point below still holds for them */
	CHECK(has_dup_keys(v) || has_nonfinite(v) || cJSON_Compare(v, back, 1));
	CHECK(gh_json_canonical(back, &c2) == GH_BUF_OK);
	CHECK(c1.len == c2.len && !memcmp(c1.data, c2.data, c1.len));
	if (c1.len > 0) {
		gh_buf_init(&small, c1.len - 1);
		CHECK(gh_json_canonical(v, &small) == GH_BUF_TOOBIG);
		gh_buf_free(&small);
	}
	gh_buf_free(&c1);
	gh_buf_free(&c2);
	cJSON_Delete(v);
	cJSON_Delete(back);
	return 0;
}
