/*
 * fuzz_json_canonical.c - gh_json_parse and the canonical form that audit
 * hashes and approval bindings are computed over, gh_json_print, and
 * comment stripping.
 *
 * Checks, besides no crash, no leak and bounded time:
 *   - a refusal says where ("line L, column C") or why (empty, too deep, a
 *     member name given twice);
 *   - an accepted value nests at most GH_JSON_MAX_DEPTH containers and has
 *     no object with a member name given twice;
 *   - its canonical form parses back to the same value (infinities from
 *     1e400 excepted: they become null) with every object's members in
 *     bytewise key order, and is a fixed point: canonical(parse(canonical(v)))
 *     is byte for byte canonical(v);
 *   - the canonical form has no whitespace between tokens and no raw
 *     control characters;
 *   - it does not depend on member order: the value with every object's
 *     members reversed has the same canonical form;
 *   - gh_json_print keeps members in order and parses back to the same
 *     value;
 *   - an output cap one byte short fails with GH_BUF_TOOBIG and leaves what
 *     the buffer held before, rather than returning a different text;
 *   - gh_json_strip_comments keeps the length, touches nothing outside
 *     comments, returns 0 or -1, and leaves valid JSON (which has no
 *     comments) as it was.
 * Every check is O(n log n) in the input: no cJSON_Compare (which revisits
 * each nested object once per enclosing level, 2^depth).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP (16u << 20)
#define MAX_INPUT (1u << 16)

static int cmp_members(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;

	return strcmp(x->string, y->string);
}

static size_t count(const cJSON *v)
{
	const cJSON *c;
	size_t n = 0;

	for (c = v->child; c; c = c->next)
		n++;
	return n;
}

/*
 * 1 when b holds the value a holds. With sorted_b, b's objects must list
 * their members in bytewise key order (b was read from a canonical text);
 * otherwise in a's order. A non-finite number in a must be null in b (it
 * has no JSON form). Also checks what gh_json_parse promises of a: depth
 * at most GH_JSON_MAX_DEPTH containers, no member name twice.
 */
static int same(const cJSON *a, const cJSON *b, int sorted_b, int depth)
{
	const cJSON *x, *y, **m;
	size_t n, i;
	int ok = 1;

	if (cJSON_IsNumber(a) && !isfinite(a->valuedouble))
		return cJSON_IsNull(b);
	if ((a->type & 0xff) != (b->type & 0xff))
		return 0;
	if (cJSON_IsNumber(a))
		return a->valuedouble == b->valuedouble;
	if (cJSON_IsString(a))
		return !strcmp(a->valuestring, b->valuestring);
	if (!cJSON_IsArray(a) && !cJSON_IsObject(a))
		return 1; /* null, true, false */
	CHECK(depth <= GH_JSON_MAX_DEPTH);
	n = count(a);
	if (n != count(b))
		return 0;
	if (cJSON_IsArray(a) || !sorted_b || n == 0) {
		for (x = a->child, y = b->child; x && ok; x = x->next, y = y->next) {
			if (cJSON_IsObject(a))
				ok = !strcmp(x->string, y->string);
			ok = ok && same(x, y, sorted_b, depth + 1);
		}
		return ok;
	}
	m = malloc(n * sizeof(*m));
	CHECK(m);
	for (i = 0, x = a->child; x; x = x->next)
		m[i++] = x;
	qsort(m, n, sizeof(*m), cmp_members);
	for (i = 0, y = b->child; i < n && ok; i++, y = y->next) {
		CHECK(i == 0 || strcmp(m[i - 1]->string, m[i]->string) < 0);
		ok = !strcmp(m[i]->string, y->string) && same(m[i], y, sorted_b, depth + 1);
	}
	free(m);
	return ok;
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

/* Strips comments from a copy; returns 1 when it changed nothing and
 * returned 0. */
static int strip_check(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t i;
	int rc, same_bytes;

	CHECK(s);
	if (size)
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
	same_bytes = size == 0 || !memcmp(s, data, size);
	free(s);
	return rc == 0 && same_bytes;
}

/* A cap one byte short fails and leaves the buffer's earlier contents;
 * the exact cap holds them followed by the canonical text. */
static void cap_check(const cJSON *v, const struct gh_buf *c1)
{
	struct gh_buf b;

	gh_buf_init(&b, c1->len + 1);
	CHECK(gh_buf_puts(&b, "ab") == GH_BUF_OK);
	CHECK(gh_json_canonical(v, &b) == GH_BUF_TOOBIG);
	CHECK(b.len == 2 && !strcmp(b.data, "ab"));
	gh_buf_free(&b);
	gh_buf_init(&b, c1->len + 2);
	CHECK(gh_buf_puts(&b, "ab") == GH_BUF_OK);
	CHECK(gh_json_canonical(v, &b) == GH_BUF_OK);
	CHECK(b.len == c1->len + 2 && !memcmp(b.data + 2, c1->data, c1->len));
	gh_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *v = NULL, *back = NULL, *again = NULL, *rev = NULL;
	struct gh_buf c1, c2, c3, pr;
	struct gh_err e;
	enum gh_code rc;
	int unstripped;

	if (size > MAX_INPUT)
		return 0;
	unstripped = strip_check(data, size);
	rc = gh_json_parse((const char *)data, size, "input", &v, &e);
	if (rc != GH_OK) {
		CHECK(rc == GH_E_BADREQ && v == NULL);
		CHECK(strstr(e.msg, "line ") || strstr(e.msg, "empty") || strstr(e.msg, "deeper") ||
		      strstr(e.msg, "twice") || strstr(e.msg, "too large"));
		return 0;
	}
	CHECK(unstripped); /* valid JSON has no comments to strip */
	gh_buf_init(&c1, CAP);
	gh_buf_init(&c2, CAP);
	gh_buf_init(&c3, CAP);
	gh_buf_init(&pr, CAP);

	/* canonical: compact, reads back to v with sorted members, fixed point */
	CHECK(gh_json_canonical(v, &c1) == GH_BUF_OK);
	CHECK(c1.data && compact(c1.data, c1.len));
	CHECK(gh_json_parse(c1.data, c1.len, "canonical", &back, &e) == GH_OK);
	CHECK(same(v, back, 1, 1));
	CHECK(gh_json_canonical(back, &c2) == GH_BUF_OK);
	CHECK(c1.len == c2.len && !memcmp(c1.data, c2.data, c1.len));
	cap_check(v, &c1);

	/* print: members as built, reads back to v, same canonical form */
	CHECK(gh_json_print(v, &pr) == GH_BUF_OK);
	CHECK(pr.data && compact(pr.data, pr.len));
	CHECK(gh_json_parse(pr.data, pr.len, "printed", &again, &e) == GH_OK);
	CHECK(same(v, again, 0, 1));

	/* member order does not matter */
	rev = reversed_copy(v);
	CHECK(gh_json_canonical(rev, &c3) == GH_BUF_OK);
	CHECK(c1.len == c3.len && !memcmp(c1.data, c3.data, c1.len));

	gh_buf_free(&c1);
	gh_buf_free(&c2);
	gh_buf_free(&c3);
	gh_buf_free(&pr);
	cJSON_Delete(v);
	cJSON_Delete(back);
	cJSON_Delete(again);
	cJSON_Delete(rev);
	return 0;
}
