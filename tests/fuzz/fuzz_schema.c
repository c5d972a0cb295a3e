/*
 * fuzz_schema.c - tool schemas declared by clients and the arguments
 * models send against them.
 *
 * The input is "<schema JSON>\0<value JSON>" (no NUL: the whole input is
 * the schema and the value is missing). Both halves go through
 * gh_json_parse, as every schema (request bodies, the config file) and
 * every model's arguments (gh_provider_call_set) do on their way in: at
 * most GH_JSON_MAX_DEPTH levels, no member name twice. A schema that
 * gh_schema_check() accepts is then used to validate the value. Checks:
 *   - the messages are NUL-terminated inside their buffer, even a tiny one;
 *   - a refusal always says something, an acceptance leaves "";
 *   - validating twice gives the same verdict and the same message, and a
 *     short buffer holds a prefix of the full message;
 *   - member order does not matter: with every object's members reversed
 *     (schema and value) check and validation give the same verdicts,
 *     unless one of them ran out of budget or depth (which may stop at a
 *     different place first);
 *   - deep equality: a value is valid against {"const": value} and against
 *     it with its members reversed; [v, v reversed] is never valid against
 *     {"uniqueItems": true}, [v] always (budget and depth aside);
 *   - no crash, no leak, bounded time (the step budget and depth limits).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT (1u << 16)

static void check_msg(const char *msg, size_t cap, int rc)
{
	size_t n = strnlen(msg, cap);

	CHECK(n < cap);
	CHECK(rc == 0 ? n == 0 : n > 0);
}

/* A validation that stopped on a limit rather than on the value: where it
 * stops first may depend on member order. */
static int stopped(const char *msg)
{
	return strstr(msg, "schema too deep") || strstr(msg, "schema too complex") ||
	       strstr(msg, "out of memory");
}

static int validate(const cJSON *schema, const cJSON *value, char *msg)
{
	int rc = gh_schema_validate(schema, value, msg, GH_SCHEMA_MSG_MAX);

	CHECK(rc == 0 || rc == -1);
	check_msg(msg, GH_SCHEMA_MSG_MAX, rc);
	return rc;
}

/* Check and validation verdicts do not depend on member order. */
static void order_check(const cJSON *schema, const cJSON *value, int checked, int valid,
			const char *msg)
{
	cJSON *s = reversed_copy(schema), *v = value ? reversed_copy(value) : NULL;
	char m[GH_SCHEMA_MSG_MAX];
	int rc;

	rc = gh_schema_check(s, m, sizeof(m));
	CHECK(rc == checked || strstr(m, "too large") || strstr(msg, "too large"));
	if (rc == 0 && checked == 0) {
		rc = validate(s, v, m);
		CHECK(rc == valid || stopped(m) || stopped(msg));
	}
	cJSON_Delete(s);
	cJSON_Delete(v);
}

/* const and uniqueItems: deep equality ignores member order. */
static void equal_check(const cJSON *value)
{
	cJSON *s = cJSON_CreateObject(), *rev = reversed_copy(value), *one, *two;
	char m[GH_SCHEMA_MSG_MAX];

	CHECK(s && cJSON_AddItemToObject(s, "const", cJSON_Duplicate(value, 1)));
	if (gh_schema_check(s, m, sizeof(m)) == 0) {
		CHECK(validate(s, value, m) == 0 || stopped(m));
		CHECK(validate(s, rev, m) == 0 || stopped(m));
	}
	cJSON_Delete(s);

	s = cJSON_CreateObject();
	one = cJSON_CreateArray();
	two = cJSON_CreateArray();
	CHECK(s && one && two && cJSON_AddBoolToObject(s, "uniqueItems", 1));
	CHECK(gh_schema_check(s, m, sizeof(m)) == 0);
	CHECK(cJSON_AddItemToArray(one, cJSON_Duplicate(value, 1)));
	CHECK(cJSON_AddItemToArray(two, cJSON_Duplicate(value, 1)));
	CHECK(cJSON_AddItemToArray(two, rev));
	CHECK(validate(s, one, m) == 0 || stopped(m));
	CHECK(validate(s, two, m) == -1);
	cJSON_Delete(s);
	cJSON_Delete(one);
	cJSON_Delete(two);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	const char *nul = memchr(p, '\0', size);
	size_t slen = nul ? (size_t)(nul - p) : size;
	cJSON *schema = NULL, *value = NULL;
	char msg[GH_SCHEMA_MSG_MAX], again[GH_SCHEMA_MSG_MAX], tiny[8];
	struct gh_err e;
	int checked, rc, rc2, rc3;

	if (size > MAX_INPUT)
		return 0;
	if (nul && gh_json_parse(nul + 1, size - slen - 1, "value", &value, &e) != GH_OK)
		value = NULL;
	if (value)
		equal_check(value);
	if (gh_json_parse(p, slen, "schema", &schema, &e) != GH_OK)
		goto out;
	memset(msg, 'x', sizeof(msg));
	checked = gh_schema_check(schema, msg, sizeof(msg));
	CHECK(checked == 0 || checked == -1);
	check_msg(msg, sizeof(msg), checked);
	if (checked != 0) {
		order_check(schema, value, checked, -1, msg);
		goto out;
	}

	memset(msg, 'x', sizeof(msg));
	rc = validate(schema, value, msg);
	CHECK(value || rc == -1);

	memset(again, 'y', sizeof(again));
	rc2 = validate(schema, value, again);
	CHECK(rc2 == rc);
	CHECK(strcmp(msg, again) == 0);

	memset(tiny, 'z', sizeof(tiny));
	rc3 = gh_schema_validate(schema, value, tiny, sizeof(tiny));
	CHECK(rc3 == rc);
	check_msg(tiny, sizeof(tiny), rc);
	CHECK(strncmp(msg, tiny, strlen(tiny)) == 0);

	order_check(schema, value, checked, rc, msg);
out:
	cJSON_Delete(schema);
	cJSON_Delete(value);
	return 0;
}
