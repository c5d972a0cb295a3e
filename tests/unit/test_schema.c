/*
 * test_schema.c - tool-argument schemas: what gh_schema_check refuses
 * (with the schema path), what gh_schema_validate refuses (with the JSON
 * path and the exact message the model will read), and the limits that
 * keep hostile schemas and values cheap. A tool's result is held to its
 * output schema by the same validator: every validation case here runs
 * through gh_tools_output_check too (test_output_check).
 */
#include <locale.h>
#include <pthread.h>
#include <time.h>

#include "schema.h"
#include "tools.h"
#include "util.h"
#include "t.h"

/* One validation: schema, value, and the message expected (NULL = valid). */
struct vcase {
	const char *schema;
	const char *value;
	const char *msg;
};

/* One check: schema and the message expected (NULL = usable). */
struct ccase {
	const char *schema;
	const char *msg;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs one case; on a mismatch describes it in why and returns -1. */
static int run_vcase(const struct vcase *c, char *why, size_t cap)
{
	cJSON *s = cJSON_Parse(c->schema), *v = cJSON_Parse(c->value);
	char msg[GH_SCHEMA_MSG_MAX] = "unset";
	int rc = -1, got;

	if (!s || !v) {
		snprintf(why, cap, "test case does not parse");
		goto out;
	}
	if (gh_schema_check(s, msg, sizeof(msg)) != 0) {
		snprintf(why, cap, "schema refused: %s", msg);
		goto out;
	}
	got = gh_schema_validate(s, v, msg, sizeof(msg));
	if (!c->msg && got != 0) {
		snprintf(why, cap, "expected valid, got -1 \"%s\"", msg);
		goto out;
	}
	if (c->msg && (got != -1 || strcmp(msg, c->msg) != 0)) {
		snprintf(why, cap, "expected \"%s\", got %d \"%s\"", c->msg, got, msg);
		goto out;
	}
	if (!c->msg && msg[0] != '\0') {
		snprintf(why, cap, "valid, but msg left as \"%s\"", msg);
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(s);
	cJSON_Delete(v);
	return rc;
}

#define RUN_VCASES(table)                                                                  \
	do {                                                                               \
		size_t t_i;                                                                \
		char t_why[600];                                                           \
		for (t_i = 0; t_i < sizeof(table) / sizeof(table[0]); t_i++)               \
			if (run_vcase(&table[t_i], t_why, sizeof(t_why)))                  \
				T_FAIL("case %zu: schema %s value %s: %s", t_i,            \
				       table[t_i].schema, table[t_i].value, t_why);        \
	} while (0)

static int run_ccase(const struct ccase *c, char *why, size_t cap)
{
	cJSON *s = cJSON_Parse(c->schema);
	char msg[GH_SCHEMA_MSG_MAX] = "unset";
	int rc = -1, got;

	if (!s) {
		snprintf(why, cap, "test case does not parse");
		return -1;
	}
	got = gh_schema_check(s, msg, sizeof(msg));
	if (!c->msg && got != 0)
		snprintf(why, cap, "expected usable, got -1 \"%s\"", msg);
	else if (c->msg && (got != -1 || strcmp(msg, c->msg) != 0))
		snprintf(why, cap, "expected \"%s\", got %d \"%s\"", c->msg, got, msg);
	else
		rc = 0;
	cJSON_Delete(s);
	return rc;
}

#define RUN_CCASES(table)                                                                  \
	do {                                                                               \
		size_t t_i;                                                                \
		char t_why[600];                                                           \
		for (t_i = 0; t_i < sizeof(table) / sizeof(table[0]); t_i++)               \
			if (run_ccase(&table[t_i], t_why, sizeof(t_why)))                  \
				T_FAIL("case %zu: schema %s: %s", t_i, table[t_i].schema,  \
				       t_why);                                             \
	} while (0)

/* ---- type ---- */

static const struct vcase type_cases[] = {
	{"{\"type\":\"string\"}", "\"x\"", NULL},
	{"{\"type\":\"string\"}", "5", "$: expected string, got number"},
	{"{\"type\":\"number\"}", "3.5", NULL},
	{"{\"type\":\"number\"}", "\"3\"", "$: expected number, got string"},
	{"{\"type\":\"integer\"}", "3", NULL},
	{"{\"type\":\"integer\"}", "3.0", NULL},
	{"{\"type\":\"integer\"}", "-7e3", NULL},
	{"{\"type\":\"integer\"}", "3.5", "$: expected integer, got number"},
	{"{\"type\":\"boolean\"}", "false", NULL},
	{"{\"type\":\"boolean\"}", "null", "$: expected boolean, got null"},
	{"{\"type\":\"null\"}", "null", NULL},
	{"{\"type\":\"null\"}", "0", "$: expected null, got number"},
	{"{\"type\":\"object\"}", "{}", NULL},
	{"{\"type\":\"object\"}", "[]", "$: expected object, got array"},
	{"{\"type\":\"array\"}", "[]", NULL},
	{"{\"type\":\"array\"}", "{}", "$: expected array, got object"},
	{"{\"type\":[\"string\",\"null\"]}", "null", NULL},
	{"{\"type\":[\"string\",\"null\"]}", "\"a\"", NULL},
	{"{\"type\":[\"string\",\"null\"]}", "1", "$: expected string or null, got number"},
	{"{\"type\":[\"string\",\"number\",\"null\"]}", "true",
	 "$: expected string, number or null, got boolean"},
	{"{\"type\":[\"integer\",\"number\"]}", "[]", "$: expected number, got array"},
	{"{}", "[1,{\"a\":null}]", NULL},
	{"true", "\"anything\"", NULL},
	{"false", "1", "$: no value is allowed here"},
};

static void test_type(void)
{
	RUN_VCASES(type_cases);
}

/* ---- objects ---- */

static const struct vcase object_cases[] = {
	{"{\"type\":\"object\",\"properties\":{\"recipients\":{\"type\":\"array\","
	 "\"items\":{\"type\":\"string\"}}}}",
	 "{\"recipients\":[\"a\",\"b\",3]}", "$.recipients[2]: expected string, got number"},
	{"{\"properties\":{\"a b\":{\"type\":\"string\"}}}", "{\"a b\":1}",
	 "$[\"a b\"]: expected string, got number"},
	{"{\"properties\":{\"a\":{\"properties\":{\"b\":{\"type\":\"string\"}}}}}",
	 "{\"a\":{\"b\":\"ok\"},\"c\":5}", NULL},
	{"{\"required\":[\"to\"]}", "{}", "$: missing required property \"to\""},
	{"{\"required\":[\"to\"]}", "{\"to\":null}", NULL},
	{"{\"required\":[\"to\"]}", "\"not an object\"", NULL},
	{"{\"properties\":{\"user\":{\"required\":[\"name\"]}}}", "{\"user\":{}}",
	 "$.user: missing required property \"name\""},
	{"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1}", NULL},
	{"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"extra\":2}",
	 "$.extra: additional property not allowed"},
	{"{\"additionalProperties\":{\"type\":\"number\"}}", "{\"x\":1,\"y\":\"s\"}",
	 "$.y: expected number, got string"},
	{"{\"additionalProperties\":true}", "{\"x\":1}", NULL},
	{"{\"patternProperties\":{\"^x_\":{\"type\":\"number\"}},\"additionalProperties\":false}",
	 "{\"x_a\":1,\"x_b\":2}", NULL},
	{"{\"patternProperties\":{\"^x_\":{\"type\":\"number\"}},\"additionalProperties\":false}",
	 "{\"x_a\":\"s\"}", "$.x_a: expected number, got string"},
	{"{\"patternProperties\":{\"^x_\":{\"type\":\"number\"}},\"additionalProperties\":false}",
	 "{\"y\":1}", "$.y: additional property not allowed"},
	{"{\"minProperties\":1}", "{}", "$: must have at least 1 property"},
	{"{\"minProperties\":2}", "{\"a\":1}", "$: must have at least 2 properties"},
	{"{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", "$: must have at most 1 property"},
	{"{\"maxProperties\":1}", "{\"a\":1}", NULL},
};

static void test_object(void)
{
	RUN_VCASES(object_cases);
}

/* ---- arrays ---- */

static const struct vcase array_cases[] = {
	{"{\"items\":{\"type\":\"number\"}}", "[1,2.5]", NULL},
	{"{\"items\":{\"type\":\"number\"}}", "[1,\"x\"]", "$[1]: expected number, got string"},
	{"{\"items\":[{\"type\":\"string\"},{\"type\":\"number\"}]}", "[\"a\",1]", NULL},
	{"{\"items\":[{\"type\":\"string\"},{\"type\":\"number\"}]}", "[\"a\",1,true]", NULL},
	{"{\"items\":[{\"type\":\"string\"},{\"type\":\"number\"}]}", "[\"a\",\"b\"]",
	 "$[1]: expected number, got string"},
	{"{\"items\":[{\"type\":\"string\"}],\"additionalItems\":false}", "[\"a\",1]",
	 "$: must have at most 1 item"},
	{"{\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"number\"}}",
	 "[\"a\",1,\"b\"]", "$[2]: expected number, got string"},
	{"{\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"number\"}}",
	 "[\"a\",1,\"x\"]", "$[2]: expected number, got string"},
	{"{\"prefixItems\":[{},{}],\"items\":false}", "[1,2,3]", "$: must have at most 2 items"},
	{"{\"prefixItems\":[{},{}],\"items\":false}", "[1]", NULL},
	{"{\"minItems\":2}", "[1]", "$: must have at least 2 items"},
	{"{\"minItems\":1}", "[]", "$: must have at least 1 item"},
	{"{\"maxItems\":1}", "[1,2]", "$: must have at most 1 item"},
	{"{\"maxItems\":0}", "[1]", "$: must have at most 0 items"},
	{"{\"uniqueItems\":true}", "[1,2,\"1\",[1],{\"a\":1},{\"a\":2}]", NULL},
	{"{\"uniqueItems\":true}", "[1,2,1]", "$: items must be unique (item 2 repeats item 0)"},
	{"{\"uniqueItems\":true}", "[3,1,1.0]", "$: items must be unique (item 2 repeats item 1)"},
	{"{\"uniqueItems\":true}", "[{\"a\":1,\"b\":[2]},{\"b\":[2],\"a\":1}]",
	 "$: items must be unique (item 1 repeats item 0)"},
	{"{\"uniqueItems\":true}", "[[1,2],[2,1],[1,2,3]]", NULL},
	{"{\"uniqueItems\":true}", "[null,false,true,0,\"\",[],{}]", NULL},
	{"{\"uniqueItems\":false}", "[1,1]", NULL},
};

static void test_array(void)
{
	RUN_VCASES(array_cases);
}

/* ---- enum and const ---- */

static const struct vcase enum_cases[] = {
	{"{\"enum\":[\"low\",\"high\"]}", "\"high\"", NULL},
	{"{\"properties\":{\"priority\":{\"enum\":[\"low\",\"high\"]}}}", "{\"priority\":\"mid\"}",
	 "$.priority: must be one of \"low\", \"high\""},
	{"{\"enum\":[\"x\"]}", "\"y\"", "$: must be \"x\""},
	{"{\"enum\":[1,null,{\"a\":[1]}]}", "{\"a\":[1.0]}", NULL},
	{"{\"enum\":[1,null,{\"a\":[1]}]}", "1.0", NULL},
	{"{\"enum\":[1,null,{\"a\":[1]}]}", "2", "$: must be one of 1, null, {\"a\":[1]}"},
	{"{\"enum\":[1,2,3,4,5,6,7,8,9,10,11,12]}", "0",
	 "$: must be one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ..."},
	{"{\"enum\":[\"a\\\"b\"]}", "\"ab\"", "$: must be \"a\\\"b\""},
	{"{\"const\":{\"a\":[1,2],\"b\":true}}", "{\"b\":true,\"a\":[1,2]}", NULL},
	{"{\"const\":{\"a\":[1,2]}}", "{\"a\":[2,1]}", "$: must be {\"a\":[1,2]}"},
	{"{\"const\":{\"a\":1}}", "{\"a\":1,\"b\":2}", "$: must be {\"a\":1}"},
	{"{\"const\":\"email\"}", "\"sms\"", "$: must be \"email\""},
	{"{\"const\":0.5}", "0.50", NULL},
	{"{\"const\":null}", "false", "$: must be null"},
};

static void test_enum_const(void)
{
	RUN_VCASES(enum_cases);
}

/* ---- numbers ---- */

static const struct vcase number_cases[] = {
	{"{\"minimum\":1}", "1", NULL},
	{"{\"minimum\":1}", "0", "$: must be >= 1"},
	{"{\"maximum\":10}", "10.5", "$: must be <= 10"},
	{"{\"maximum\":10}", "-1e9", NULL},
	{"{\"exclusiveMinimum\":0}", "0", "$: must be > 0"},
	{"{\"exclusiveMinimum\":0}", "0.001", NULL},
	{"{\"exclusiveMaximum\":1.5}", "1.5", "$: must be < 1.5"},
	{"{\"minimum\":0,\"exclusiveMinimum\":true}", "0", "$: must be > 0"},
	{"{\"minimum\":0,\"exclusiveMinimum\":false}", "0", NULL},
	{"{\"maximum\":5,\"exclusiveMaximum\":true}", "5", "$: must be < 5"},
	{"{\"maximum\":5,\"exclusiveMaximum\":true}", "4.99", NULL},
	{"{\"multipleOf\":0.1}", "0.3", NULL},
	{"{\"multipleOf\":0.1}", "0.35", "$: must be a multiple of 0.1"},
	{"{\"multipleOf\":3}", "-9", NULL},
	{"{\"multipleOf\":3}", "10", "$: must be a multiple of 3"},
	{"{\"multipleOf\":0.01}", "19.99", NULL},
	{"{\"minimum\":5,\"maximum\":1,\"multipleOf\":7}", "\"not a number\"", NULL},
};

static void test_number(void)
{
	RUN_VCASES(number_cases);
}

/* ---- strings and patterns ---- */

static const struct vcase string_cases[] = {
	/* lengths are code points: "é" is 2 bytes, the emoji 4 */
	{"{\"minLength\":2}", "\"\\u00e9\"", "$: must be at least 2 characters"},
	{"{\"minLength\":1}", "\"\"", "$: must be at least 1 character"},
	{"{\"maxLength\":3}", "\"h\\u00e9\\u00e9\"", NULL},
	{"{\"maxLength\":3}", "\"h\\u00e9llo\"", "$: must be at most 3 characters"},
	{"{\"maxLength\":1}", "\"\\ud83d\\ude00\"", NULL},
	{"{\"minLength\":9}", "12", NULL},
	{"{\"pattern\":\"^[a-z]+$\"}", "\"abc\"", NULL},
	{"{\"pattern\":\"^[a-z]+$\"}", "\"abC\"", "$: must match pattern \"^[a-z]+$\""},
	{"{\"pattern\":\"b\"}", "\"abc\"", NULL},
	{"{\"pattern\":\"a\"}", "5", NULL},
	{"{\"pattern\":\"\"}", "\"anything\"", NULL},
	/* JavaScript escapes mean what they mean in JavaScript */
	{"{\"pattern\":\"^\\\\d{4}-\\\\d{2}$\"}", "\"2024-01\"", NULL},
	{"{\"pattern\":\"^\\\\d{4}-\\\\d{2}$\"}", "\"dddd-dd\"",
	 "$: must match pattern \"^\\\\d{4}-\\\\d{2}$\""},
	{"{\"pattern\":\"^\\\\S+$\"}", "\"h\\u00e9llo\"", NULL},
	{"{\"pattern\":\"^\\\\S+$\"}", "\"a b\"", "$: must match pattern \"^\\\\S+$\""},
	{"{\"pattern\":\"^\\\\w+$\"}", "\"snake_case9\"", NULL},
	{"{\"pattern\":\"^\\\\W$\"}", "\"\\u00e9\"", NULL},
	{"{\"pattern\":\"^\\\\D+$\"}", "\"a1\"", "$: must match pattern \"^\\\\D+$\""},
	{"{\"pattern\":\"^https\\\\:\\\\/\\\\/\"}", "\"https://x\"", NULL},
	{"{\"pattern\":\"^https\\\\:\\\\/\\\\/\"}", "\"http://x\"",
	 "$: must match pattern \"^https\\\\:\\\\/\\\\/\""},
	{"{\"pattern\":\"^a\\\\.b\\\\*c\\\\(d\\\\)\\\\{2\\\\}\\\\|\\\\$\\\\^$\"}",
	 "\"a.b*c(d){2}|$^\"", NULL},
	{"{\"pattern\":\"^a\\\\.b$\"}", "\"axb\"", "$: must match pattern \"^a\\\\.b$\""},
	{"{\"pattern\":\"^(?:ab)+?c$\"}", "\"ababc\"", NULL},
	{"{\"pattern\":\"^(?<year>\\\\d+)$\"}", "\"2024\"", NULL},
	{"{\"pattern\":\"^x{2,}$\"}", "\"xxx\"", NULL},
	{"{\"pattern\":\"^x{2,3}$\"}", "\"xxxx\"", "$: must match pattern \"^x{2,3}$\""},
	{"{\"pattern\":\"^a{,2}$\"}", "\"a{,2}\"", NULL},
	{"{\"pattern\":\"^[a-c]{1}]$\"}", "\"b]\"", NULL},
	/* "." and negated classes take whole UTF-8 characters, not bytes;
	 * "." does not take a newline */
	{"{\"pattern\":\"^.{2}$\"}", "\"\\u00e9!\"", NULL},
	{"{\"pattern\":\"^.{2}$\"}", "\"\\ud83d\\ude00\\u00e9\"", NULL},
	{"{\"pattern\":\"^.{2}$\"}", "\"\\n!\"", "$: must match pattern \"^.{2}$\""},
	{"{\"pattern\":\"^[^a]$\"}", "\"\\u00e9\"", NULL},
	{"{\"pattern\":\"^[^a]$\"}", "\"a\"", "$: must match pattern \"^[^a]$\""},
	{"{\"pattern\":\"^[^]$\"}", "\"\\n\"", NULL},
	{"{\"pattern\":\"^caf\\\\u00e9$\"}", "\"caf\\u00e9\"", NULL},
	{"{\"pattern\":\"^\\\\uD83D\\\\uDE00+$\"}", "\"\\ud83d\\ude00\\ud83d\\ude00\"", NULL},
	{"{\"pattern\":\"^\\u00e9+$\"}", "\"\\u00e9\\u00e9\"", NULL},
	{"{\"pattern\":\"^\\u00e9+$\"}", "\"e\"", "$: must match pattern \"^\xc3\xa9+$\""},
	{"{\"pattern\":\"^\\\\x41\\\\t$\"}", "\"A\\t\"", NULL},
	/* classes with escapes and the characters POSIX treats specially */
	{"{\"pattern\":\"^[\\\\w.-]+@[\\\\w-]+$\"}", "\"a.b-c@x\"", NULL},
	{"{\"pattern\":\"^[\\\\w.-]+@[\\\\w-]+$\"}", "\"a b@x\"",
	 "$: must match pattern \"^[\\\\w.-]+@[\\\\w-]+$\""},
	{"{\"pattern\":\"^[\\\\]\\\\^-]+$\"}", "\"]^-\"", NULL},
	{"{\"pattern\":\"^[\\\\]\\\\^-]+$\"}", "\"a\"",
	 "$: must match pattern \"^[\\\\]\\\\^-]+$\""},
	{"{\"pattern\":\"^[\\\\^]$\"}", "\"^\"", NULL},
	{"{\"pattern\":\"^[-^]$\"}", "\"-\"", NULL},
	{"{\"pattern\":\"^[[.]+$\"}", "\"[.\"", NULL},
	{"{\"pattern\":\"^[\\\\\\\\/]$\"}", "\"\\\\\"", NULL},
	{"{\"pattern\":\"^[\\\\d-z]+$\"}", "\"1-z\"", NULL},
	{"{\"pattern\":\"^[\\\\d-z]+$\"}", "\"y\"", "$: must match pattern \"^[\\\\d-z]+$\""},
	{"{\"pattern\":\"\\\\bfoo\\\\b\"}", "\"a foo b\"", NULL},
	{"{\"pattern\":\"\\\\bfoo\\\\b\"}", "\"afoob\"", "$: must match pattern \"\\\\bfoo\\\\b\""},
	{"{\"pattern\":\"^(a|b|)$\"}", "\"\"", NULL},
	{"{\"format\":\"email\"}", "\"not an email\"", NULL},
	{"{\"format\":\"date-time\",\"type\":\"string\"}", "\"yesterday\"", NULL},
};

static void test_string(void)
{
	RUN_VCASES(string_cases);
}

/* The e-mail regex zod-to-json-schema emits with emailStrategy
 * "pattern:zod": classes holding "[", escaped "]" and "\\", \s, nested
 * groups and counted repetitions all have to translate. */
static void test_zod_email_pattern(void)
{
	static const char *pattern =
		"^(([^<>()[\\]\\\\.,;:\\s@\\\"]+(\\.[^<>()[\\]\\\\.,;:\\s@\\\"]+)*)|(\\\".+\\\"))@"
		"((\\[(((25[0-5])|(2[0-4][0-9])|(1[0-9]{2})|([0-9]{1,2}))\\.){3}"
		"((25[0-5])|(2[0-4][0-9])|(1[0-9]{2})|([0-9]{1,2}))\\])|"
		"([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])*(\\.[A-Za-z]{2,})+))$";
	cJSON *s = cJSON_CreateObject(), *v;
	char msg[GH_SCHEMA_MSG_MAX];
	static const char *good[] = {"a@b.co", "first.last@mail.example.org", "x@[10.0.0.1]",
				     "\"odd one\"@b.co"};
	static const char *bad[] = {"a@b", "a b@c.de", "@b.co", "a@[300.1.1.1]", "a@b.c"};
	size_t i;

	T_ASSERT(s);
	cJSON_AddStringToObject(s, "type", "string");
	cJSON_AddStringToObject(s, "pattern", pattern);
	if (gh_schema_check(s, msg, sizeof(msg)) != 0) {
		cJSON_Delete(s);
		T_FAIL("zod email pattern refused: %s", msg);
	}
	for (i = 0; i < GH_ARRAY_LEN(good); i++) {
		v = cJSON_CreateString(good[i]);
		if (gh_schema_validate(s, v, msg, sizeof(msg)) != 0) {
			cJSON_Delete(v);
			cJSON_Delete(s);
			T_FAIL("%s refused: %s", good[i], msg);
		}
		cJSON_Delete(v);
	}
	for (i = 0; i < GH_ARRAY_LEN(bad); i++) {
		v = cJSON_CreateString(bad[i]);
		if (gh_schema_validate(s, v, msg, sizeof(msg)) != -1 ||
		    strncmp(msg, "$: must match pattern \"^(([^<>()", 32) != 0) {
			cJSON_Delete(v);
			cJSON_Delete(s);
			T_FAIL("%s accepted or wrong message: %s", bad[i], msg);
		}
		cJSON_Delete(v);
	}
	cJSON_Delete(s);
}

/* ---- combinators ---- */

static const struct vcase combinator_cases[] = {
	{"{\"allOf\":[{\"type\":\"string\"},{\"minLength\":2}]}", "\"ab\"", NULL},
	{"{\"allOf\":[{\"type\":\"string\"},{\"minLength\":2}]}", "\"a\"",
	 "$: must be at least 2 characters"},
	{"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "null", NULL},
	{"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "5",
	 "$: expected string or null, got number"},
	/* the branch whose type matched explains the failure */
	{"{\"anyOf\":[{\"type\":\"string\",\"minLength\":5},{\"type\":\"null\"}]}", "\"ab\"",
	 "$: must be at least 5 characters"},
	/* the branch that got deepest explains the failure */
	{"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}},"
	 "{\"type\":\"null\"}]}",
	 "{\"a\":1}", "$.a: expected string, got number"},
	/* a tagged union: the branch whose tag matched, not the first one */
	{"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},"
	 "\"x\":{\"type\":\"string\"}},\"required\":[\"kind\"]},"
	 "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"b\"},"
	 "\"y\":{\"type\":\"number\"}},\"required\":[\"kind\"]}]}",
	 "{\"kind\":\"b\",\"y\":\"s\"}", "$.y: expected number, got string"},
	{"{\"anyOf\":[{\"const\":\"a\"},{\"const\":\"b\"}]}", "\"c\"",
	 "$: does not match any of the schemas in anyOf"},
	{"{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1.5", NULL},
	{"{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1",
	 "$: must match exactly one schema in oneOf, but matches 0 and 1"},
	{"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"boolean\"}]}", "null",
	 "$: expected string or boolean, got null"},
	{"{\"not\":{\"type\":\"string\"}}", "5", NULL},
	{"{\"not\":{\"type\":\"string\"}}", "\"x\"", "$: must not match the schema in \"not\""},
	{"{\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
	 "{\"type\":\"string\"}]}}}",
	 "{\"a\":[1,2,3.5]}", "$.a[2]: expected integer, got number"},
};

static void test_combinators(void)
{
	RUN_VCASES(combinator_cases);
}

/* ---- nullable, refs, boolean schemas ---- */

static const struct vcase ref_cases[] = {
	{"{\"type\":\"string\",\"nullable\":true}", "null", NULL},
	{"{\"type\":\"string\",\"enum\":[\"a\"],\"nullable\":true}", "null", NULL},
	{"{\"type\":\"string\",\"nullable\":true}", "5", "$: expected string or null, got number"},
	{"{\"type\":\"string\",\"nullable\":false}", "null", "$: expected string, got null"},
	{"{\"definitions\":{\"addr\":{\"type\":\"object\",\"required\":[\"city\"]}},"
	 "\"properties\":{\"home\":{\"$ref\":\"#/definitions/addr\"}}}",
	 "{\"home\":{}}", "$.home: missing required property \"city\""},
	{"{\"$defs\":{\"n\":{\"type\":\"number\"}},\"items\":{\"$ref\":\"#/$defs/n\"}}",
	 "[1,\"2\"]", "$[1]: expected number, got string"},
	/* zod's default refStrategy points at the first occurrence */
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
	 "\"b\":{\"$ref\":\"#/properties/a\"}}}",
	 "{\"b\":1}", "$.b: expected string, got number"},
	/* a recursive tree through "#" */
	{"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
	 "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}}}",
	 "{\"name\":\"r\",\"children\":[{\"name\":\"a\",\"children\":[{\"name\":\"b\"},"
	 "{\"name\":7}]}]}",
	 "$.children[0].children[1].name: expected string, got number"},
	/* JSON pointer and URI escapes */
	{"{\"definitions\":{\"a/b\":{\"type\":\"string\"},\"c~d\":{\"type\":\"number\"},"
	 "\"e f\":{\"type\":\"null\"}},\"properties\":{\"x\":{\"$ref\":\"#/definitions/a~1b\"},"
	 "\"y\":{\"$ref\":\"#/definitions/c~0d\"},\"z\":{\"$ref\":\"#/definitions/e%20f\"}}}",
	 "{\"x\":\"s\",\"y\":1,\"z\":0}", "$.z: expected null, got number"},
	{"{\"definitions\":{\"a/b\":{\"type\":\"string\"}},"
	 "\"properties\":{\"x\":{\"$ref\":\"#/definitions/a~1b\"}}}",
	 "{\"x\":1}", "$.x: expected string, got number"},
	{"{\"items\":[{\"type\":\"string\"},{\"$ref\":\"#/items/0\"}]}", "[\"a\",2]",
	 "$[1]: expected string, got number"},
	/* keywords beside a $ref apply as well */
	{"{\"definitions\":{\"s\":{\"type\":\"string\"}},\"$ref\":\"#/definitions/s\","
	 "\"maxLength\":2}",
	 "\"abc\"", "$: must be at most 2 characters"},
	/* a target outside the usual places */
	{"{\"$ref\":\"#/x-shared\",\"x-shared\":{\"type\":\"string\"}}", "5",
	 "$: expected string, got number"},
	{"{\"properties\":{\"a\":false}}", "{\"a\":1}", "$.a: no value is allowed here"},
	{"{\"properties\":{\"a\":false}}", "{\"b\":1}", NULL},
	{"{\"items\":true}", "[1,\"x\",null]", NULL},
};

static void test_nullable_ref(void)
{
	RUN_VCASES(ref_cases);
}

/* ---- schemas as zod-to-json-schema and the OpenAI SDK emit them ---- */

/* z.object({to: z.string().email(), n: z.number().int().min(1).optional(),
 *           tags: z.array(z.enum(['a','b']))}) */
static const char ZOD_SCHEMA[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"to\":{\"type\":\"string\",\"format\":\"email\"},"
	"\"n\":{\"type\":\"integer\",\"minimum\":1},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"a\",\"b\"]}}},"
	"\"required\":[\"to\",\"tags\"],\"additionalProperties\":false,"
	"\"$schema\":\"http://json-schema.org/draft-07/schema#\"}";

static const struct vcase zod_cases[] = {
	{ZOD_SCHEMA, "{\"to\":\"a@b.co\",\"tags\":[\"a\"]}", NULL},
	{ZOD_SCHEMA, "{\"to\":\"a@b.co\",\"n\":3,\"tags\":[]}", NULL},
	{ZOD_SCHEMA, "{\"to\":\"a@b.co\",\"n\":0,\"tags\":[]}", "$.n: must be >= 1"},
	{ZOD_SCHEMA, "{\"to\":\"a@b.co\",\"n\":1.5,\"tags\":[]}",
	 "$.n: expected integer, got number"},
	{ZOD_SCHEMA, "{\"to\":\"a@b.co\",\"tags\":[\"a\",\"c\"]}",
	 "$.tags[1]: must be one of \"a\", \"b\""},
	{ZOD_SCHEMA, "{\"tags\":[]}", "$: missing required property \"to\""},
	{ZOD_SCHEMA, "{\"to\":\"a@b.co\",\"tags\":[],\"cc\":\"x\"}",
	 "$.cc: additional property not allowed"},
	{ZOD_SCHEMA, "{\"to\":5,\"tags\":[]}", "$.to: expected string, got number"},
	{ZOD_SCHEMA, "[]", "$: expected object, got array"},
	/* named schema: {"$ref": "#/definitions/Send", "definitions": {...}} */
	{"{\"$ref\":\"#/definitions/Send\",\"definitions\":{\"Send\":{\"type\":\"object\","
	 "\"properties\":{\"to\":{\"type\":\"string\"}},\"required\":[\"to\"],"
	 "\"additionalProperties\":false}},"
	 "\"$schema\":\"http://json-schema.org/draft-07/schema#\"}",
	 "{}", "$: missing required property \"to\""},
	/* openApi3 target: nullable and draft-4 exclusive bounds */
	{"{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"number\",\"minimum\":0,"
	 "\"exclusiveMinimum\":true,\"nullable\":true}}}",
	 "{\"q\":0}", "$.q: must be > 0"},
	{"{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"number\",\"minimum\":0,"
	 "\"exclusiveMinimum\":true,\"nullable\":true}}}",
	 "{\"q\":null}", NULL},
};

/* OpenAI strict mode: every property required, optional ones nullable via
 * anyOf, shared shapes under $defs. */
static const char OPENAI_SCHEMA[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"addr\":{\"anyOf\":[{\"$ref\":\"#/$defs/Addr\"},{\"type\":\"null\"}]},"
	"\"when\":{\"type\":[\"string\",\"null\"],\"description\":\"ISO date\"}},"
	"\"required\":[\"addr\",\"when\"],\"additionalProperties\":false,"
	"\"$defs\":{\"Addr\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
	"\"required\":[\"city\"],\"additionalProperties\":false}}}";

static const struct vcase openai_cases[] = {
	{OPENAI_SCHEMA, "{\"addr\":null,\"when\":null}", NULL},
	{OPENAI_SCHEMA, "{\"addr\":{\"city\":\"Oslo\"},\"when\":\"2026-01-01\"}", NULL},
	{OPENAI_SCHEMA, "{\"addr\":{\"city\":1},\"when\":null}",
	 "$.addr.city: expected string, got number"},
	{OPENAI_SCHEMA, "{\"addr\":5,\"when\":null}",
	 "$.addr: expected object or null, got number"},
	{OPENAI_SCHEMA, "{\"addr\":{},\"when\":null}",
	 "$.addr: missing required property \"city\""},
	{OPENAI_SCHEMA, "{\"addr\":null}", "$: missing required property \"when\""},
	{OPENAI_SCHEMA, "{\"addr\":null,\"when\":3}",
	 "$.when: expected string or null, got number"},
};

static void test_zod_and_openai(void)
{
	RUN_VCASES(zod_cases);
	RUN_VCASES(openai_cases);
}

/* ---- gh_schema_check ---- */

static const struct ccase check_cases[] = {
	{"true", NULL},
	{"false", NULL},
	{"{}", NULL},
	{ZOD_SCHEMA, NULL},
	{OPENAI_SCHEMA, NULL},
	{"{\"x-ui\":5,\"if\":3,\"format\":7,\"description\":1,\"default\":[1],\"examples\":{}}",
	 NULL},
	{"{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"strng\"}}}",
	 "properties.to.type: unknown type \"strng\""},
	{"5", "schema: must be a schema (an object or a boolean), got number"},
	{"{\"type\":[\"string\",5]}", "type: must be a type name or an array of them"},
	{"{\"type\":[\"string\",\"any\"]}", "type: unknown type \"any\""},
	{"{\"type\":7}", "type: must be a type name or an array of them"},
	{"{\"properties\":[]}", "properties: must be an object of schemas"},
	{"{\"properties\":{\"a\":5}}",
	 "properties.a: must be a schema (an object or a boolean), got number"},
	{"{\"required\":\"a\"}", "required: must be an array of strings"},
	{"{\"required\":[\"a\",1]}", "required: must be an array of strings"},
	{"{\"additionalProperties\":\"no\"}",
	 "additionalProperties: must be a schema (an object or a boolean), got string"},
	{"{\"items\":5}", "items: must be a schema (an object or a boolean), got number"},
	{"{\"items\":[{\"type\":\"string\"},{\"type\":\"x\"}]}",
	 "items[1].type: unknown type \"x\""},
	{"{\"prefixItems\":{}}", "prefixItems: must be an array of schemas"},
	{"{\"enum\":\"a\"}", "enum: must be an array"},
	{"{\"minimum\":\"1\"}", "minimum: must be a number"},
	{"{\"maximum\":null}", "maximum: must be a number"},
	{"{\"exclusiveMaximum\":\"x\"}", "exclusiveMaximum: must be a number or a boolean"},
	{"{\"multipleOf\":0}", "multipleOf: must be a number greater than 0"},
	{"{\"minLength\":-1}", "minLength: must be a non-negative integer"},
	{"{\"maxItems\":1.5}", "maxItems: must be a non-negative integer"},
	{"{\"minProperties\":\"2\"}", "minProperties: must be a non-negative integer"},
	{"{\"uniqueItems\":\"yes\"}", "uniqueItems: must be a boolean"},
	{"{\"nullable\":\"yes\"}", "nullable: must be a boolean"},
	{"{\"anyOf\":[]}", "anyOf: must not be empty"},
	{"{\"oneOf\":{}}", "oneOf: must be an array of schemas"},
	{"{\"allOf\":[{},{\"minItems\":-2}]}", "allOf[1].minItems: must be a non-negative integer"},
	{"{\"not\":[]}", "not: must be a schema (an object or a boolean), got array"},
	{"{\"definitions\":{\"a\":{\"type\":\"bogus\"}}}",
	 "definitions.a.type: unknown type \"bogus\""},
	{"{\"$defs\":{\"a\":{\"properties\":{\"b\":{\"type\":\"bogus\"}}}}}",
	 "$defs.a.properties.b.type: unknown type \"bogus\""},
	{"{\"$ref\":\"http://example.com/s.json\"}",
	 "$ref: \"http://example.com/s.json\" is not a local reference (\"#/...\")"},
	{"{\"$ref\":\"#/definitions/missing\"}",
	 "$ref: \"#/definitions/missing\" does not resolve"},
	{"{\"$ref\":\"#anchor\"}", "$ref: \"#anchor\" does not resolve"},
	{"{\"$ref\":5}", "$ref: must be a string"},
	{"{\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"$ref\":\"#/properties/a/type\"}}}",
	 "properties.b.$ref: \"#/properties/a/type\" does not point to a schema"},
	{"{\"$ref\":\"#/x\",\"x\":{\"type\":\"bogus\"}}", "$ref.type: unknown type \"bogus\""},
	{"{\"pattern\":5}", "pattern: must be a string"},
	{"{\"pattern\":\"^(?=a)\"}",
	 "pattern: \"^(?=a)\" cannot be enforced: it uses lookahead or lookbehind, which "
	 "gatehouse cannot enforce"},
	{"{\"pattern\":\"(?<!a)b\"}",
	 "pattern: \"(?<!a)b\" cannot be enforced: it uses lookahead or lookbehind, which "
	 "gatehouse cannot enforce"},
	{"{\"pattern\":\"(a)\\\\1\"}",
	 "pattern: \"(a)\\\\1\" cannot be enforced: it uses the escape \\1, which gatehouse "
	 "cannot enforce"},
	{"{\"pattern\":\"\\\\p{L}\"}",
	 "pattern: \"\\\\p{L}\" cannot be enforced: it uses the escape \\p, which gatehouse "
	 "cannot enforce"},
	{"{\"pattern\":\"[a-\"}",
	 "pattern: \"[a-\" cannot be enforced: it has an unterminated [ ] class"},
	{"{\"pattern\":\"[z-a]\"}",
	 "pattern: \"[z-a]\" cannot be enforced: it has a range out of order inside [ ]"},
	{"{\"pattern\":\"(ab\"}",
	 "pattern: \"(ab\" cannot be enforced: it has an unterminated group"},
	{"{\"pattern\":\"ab)\"}", "pattern: \"ab)\" cannot be enforced: it has an unmatched )"},
	{"{\"pattern\":\"*a\"}",
	 "pattern: \"*a\" cannot be enforced: it has a quantifier with nothing to repeat"},
	{"{\"pattern\":\"a**\"}",
	 "pattern: \"a**\" cannot be enforced: it has a quantifier with nothing to repeat"},
	{"{\"pattern\":\"a{2000}\"}", "pattern: \"a{2000}\" cannot be enforced: it repeats more "
				      "than 1000 times"},
	{"{\"pattern\":\"a{3,2}\"}", "pattern: \"a{3,2}\" cannot be enforced: it has a {min,max} "
				     "quantifier with max below min"},
	{"{\"pattern\":\"((a{100}){100}){100}\"}",
	 "pattern: \"((a{100}){100}){100}\" cannot be enforced: it repeats too much (over 10000 "
	 "regex nodes)"},
	{"{\"pattern\":\"[\\u00e9]\"}",
	 "pattern: \"[\xc3\xa9]\" cannot be enforced: it has a non-ASCII character inside [ ], "
	 "which gatehouse cannot enforce"},
	{"{\"pattern\":\"[]\"}",
	 "pattern: \"[]\" cannot be enforced: it has a character class that matches nothing"},
	{"{\"pattern\":\"a\\\\\"}", "pattern: \"a\\\\\" cannot be enforced: it ends with a lone "
				    "backslash"},
	{"{\"properties\":{\"code\":{\"type\":\"string\",\"pattern\":\"\\\\k<x>\"}}}",
	 "properties.code.pattern: \"\\\\k<x>\" cannot be enforced: it uses the escape \\k, which "
	 "gatehouse cannot enforce"},
	{"{\"patternProperties\":{\"(?!x)\":{}}}",
	 "patternProperties.(?!x): pattern cannot be enforced: it uses lookahead or lookbehind, "
	 "which gatehouse cannot enforce"},
	{"{\"patternProperties\":{\"^x\":{\"type\":\"nope\"}}}",
	 "patternProperties.^x.type: unknown type \"nope\""},
	{"{\"enum\":[1,\"a\",null,{\"a\":[1]}],\"const\":{\"x\":[]}}", NULL},
};

static void test_check(void)
{
	RUN_CCASES(check_cases);
}

static void test_check_ref_cycles(void)
{
	static const struct ccase cases[] = {
		{"{\"$ref\":\"#\"}", "$ref: \"#\" leads into a $ref cycle"},
		{"{\"$ref\":\"#/definitions/a\",\"definitions\":{\"a\":{\"$ref\":"
		 "\"#/definitions/b\"},\"b\":{\"$ref\":\"#/definitions/a\"}}}",
		 "definitions.a.$ref: \"#/definitions/b\" leads into a $ref cycle"},
		/* recursion that goes through a keyword is a valid recursive schema */
		{"{\"properties\":{\"next\":{\"$ref\":\"#\"}}}", NULL},
	};

	RUN_CCASES(cases);
}

/* A schema nested 33 levels deep is refused with its path; the message
 * keeps the start and the end of the path and the reason. */
static void test_check_depth(void)
{
	char schema[2048], msg[GH_SCHEMA_MSG_MAX];
	size_t n = 0;
	int i;
	cJSON *s;

	for (i = 0; i < 34; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n, "{\"properties\":{\"a\":");
	n += (size_t)snprintf(schema + n, sizeof(schema) - n, "{}");
	for (i = 0; i < 34; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n, "}}");
	T_ASSERT(n < sizeof(schema));
	s = cJSON_Parse(schema);
	T_ASSERT(s);
	i = gh_schema_check(s, msg, sizeof(msg));
	cJSON_Delete(s);
	T_EQ_INT(i, -1);
	T_ASSERT(strncmp(msg, "properties.a.properties.a.", 26) == 0);
	T_CONTAINS(msg, "...");
	T_CONTAINS(msg, ".properties.a: schema nests deeper than 32 levels");

	/* 32 levels is fine */
	n = 0;
	for (i = 0; i < 32; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n, "{\"items\":");
	n += (size_t)snprintf(schema + n, sizeof(schema) - n, "{}");
	for (i = 0; i < 32; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n, "}");
	s = cJSON_Parse(schema);
	T_ASSERT(s);
	i = gh_schema_check(s, msg, sizeof(msg));
	cJSON_Delete(s);
	T_EQ_INT(i, 0);
}

/* ---- limits: cycles, depth, work, size ---- */

static int validate_text(const char *schema, const char *value, char *msg, size_t cap,
			 int *checked)
{
	cJSON *s = cJSON_Parse(schema), *v = cJSON_Parse(value);
	char cmsg[GH_SCHEMA_MSG_MAX];
	int rc = -2;

	if (s && v) {
		*checked = gh_schema_check(s, cmsg, sizeof(cmsg));
		rc = gh_schema_validate(s, v, msg, cap);
	}
	cJSON_Delete(s);
	cJSON_Delete(v);
	return rc;
}

/* A $ref cycle through allOf passes the check (it is not a bare $ref
 * chain) but validation stops after 32 hops with an error. */
static void test_ref_cycle_terminates(void)
{
	char msg[GH_SCHEMA_MSG_MAX];
	int checked = -1;

	T_EQ_INT(validate_text("{\"definitions\":{\"a\":{\"allOf\":[{\"$ref\":"
			       "\"#/definitions/a\"}]}},\"$ref\":\"#/definitions/a\"}",
			       "1", msg, sizeof(msg), &checked),
		 -1);
	T_EQ_INT(checked, 0);
	T_EQ_STR(msg, "$: schema too deep (more than 32 $ref hops)");

	/* an unchecked bare cycle terminates too */
	T_EQ_INT(validate_text("{\"$ref\":\"#\"}", "{}", msg, sizeof(msg), &checked), -1);
	T_EQ_INT(checked, -1);
	T_EQ_STR(msg, "$: schema too deep (more than 32 $ref hops)");

	/* a "not" around a cycle must not turn the failure into success */
	T_EQ_INT(validate_text("{\"definitions\":{\"a\":{\"allOf\":[{\"$ref\":"
			       "\"#/definitions/a\"}]}},\"not\":{\"$ref\":\"#/definitions/a\"}}",
			       "1", msg, sizeof(msg), &checked),
		 -1);
	T_CONTAINS(msg, "schema too deep");
}

/* anyOf of two refs to the next level, 30 levels: 2^30 paths. The step
 * budget stops it quickly with an error. */
static void test_exponential_anyof(void)
{
	char schema[8192], msg[GH_SCHEMA_MSG_MAX];
	size_t n = 0;
	int i, checked = -1;
	double t0;

	n += (size_t)snprintf(schema + n, sizeof(schema) - n,
			      "{\"$ref\":\"#/definitions/l0\",\"definitions\":{");
	for (i = 0; i < 30; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n,
				      "\"l%d\":{\"anyOf\":[{\"$ref\":\"#/definitions/l%d\"},"
				      "{\"$ref\":\"#/definitions/l%d\"}]},",
				      i, i + 1, i + 1);
	n += (size_t)snprintf(schema + n, sizeof(schema) - n, "\"l30\":{\"type\":\"null\"}}}");
	T_ASSERT(n < sizeof(schema));
	t0 = now_s();
	T_EQ_INT(validate_text(schema, "1", msg, sizeof(msg), &checked), -1);
	T_EQ_INT(checked, 0);
	T_EQ_STR(msg, "$: schema too complex to check (over 1048576 steps)");
	T_ASSERT(now_s() - t0 < 30.0);
	/* a null is valid on the first path tried */
	T_EQ_INT(validate_text(schema, "null", msg, sizeof(msg), &checked), 0);
}

/* Values nested deeper than 64 levels stop validation with an error; a
 * deep value the schema never looks into is fine. */
static void test_deep_value(void)
{
	char value[1024], msg[GH_SCHEMA_MSG_MAX];
	size_t n = 0;
	int i, checked = -1;
	/* each $ref hop descends three levels, so the value depth limit comes
	 * before the hop limit */
	static const char schema[] =
		"{\"$ref\":\"#/definitions/t\",\"definitions\":{\"t\":{\"type\":\"array\","
		"\"items\":{\"items\":{\"items\":{\"$ref\":\"#/definitions/t\"}}}}}}";

	for (i = 0; i < 100; i++)
		value[n++] = '[';
	for (i = 0; i < 100; i++)
		value[n++] = ']';
	value[n] = '\0';
	T_EQ_INT(validate_text(schema, value, msg, sizeof(msg), &checked), -1);
	T_EQ_INT(checked, 0);
	T_ASSERT(strncmp(msg, "$[0][0][0]", 10) == 0);
	T_CONTAINS(msg, "[0][0]: schema too deep (value nests deeper than 64 levels)");

	T_EQ_INT(validate_text("{\"type\":\"array\"}", value, msg, sizeof(msg), &checked), 0);
	T_EQ_INT(validate_text("{\"uniqueItems\":true}", value, msg, sizeof(msg), &checked), 0);
	/* two deep items: comparing them would go too deep */
	n = 0;
	value[n++] = '[';
	for (i = 0; i < 2; i++) {
		int j;

		if (i)
			value[n++] = ',';
		for (j = 0; j < 80; j++)
			value[n++] = '[';
		for (j = 0; j < 80; j++)
			value[n++] = ']';
	}
	value[n++] = ']';
	value[n] = '\0';
	T_EQ_INT(validate_text("{\"uniqueItems\":true}", value, msg, sizeof(msg), &checked), -1);
	T_EQ_STR(msg, "$: schema too deep (value nests deeper than 64 levels)");
	/* a recursive schema on a shallow value is fine */
	T_EQ_INT(validate_text(schema, "[[[[[[[]]]]]]]", msg, sizeof(msg), &checked), 0);
}

/* A 1 MB string: lengths and enum compare in linear time; a pattern is
 * only run on strings short enough for regexec to stay cheap, longer ones
 * are refused rather than let through. */
static void test_megabyte_string(void)
{
	size_t n = 1 << 20, i;
	char *big = malloc(n + 1), msg[GH_SCHEMA_MSG_MAX];
	cJSON *v, *v100k, *s1, *s2, *s3, *s4;
	int rc[5];
	double t0;

	T_ASSERT(big);
	for (i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	big[n] = '\0';
	v = cJSON_CreateString(big);
	big[100000] = '\0';
	v100k = cJSON_CreateString(big);
	free(big);
	s1 = cJSON_Parse("{\"type\":\"string\",\"maxLength\":2000000,\"pattern\":\"^[a-z]+$\"}");
	s2 = cJSON_Parse("{\"type\":\"string\",\"maxLength\":10}");
	s3 = cJSON_Parse("{\"type\":\"string\",\"minLength\":1048576,\"maxLength\":1048576}");
	s4 = cJSON_Parse("{\"enum\":[\"abc\",\"z\"],\"pattern\":\"[0-9]\"}");
	if (!v || !v100k || !s1 || !s2 || !s3 || !s4) {
		cJSON_Delete(v);
		cJSON_Delete(v100k);
		cJSON_Delete(s1);
		cJSON_Delete(s2);
		cJSON_Delete(s3);
		cJSON_Delete(s4);
		T_FAIL("setup");
	}
	t0 = now_s();
	rc[0] = gh_schema_validate(s3, v, msg, sizeof(msg));
	rc[1] = gh_schema_validate(s1, v100k, msg, sizeof(msg));
	rc[2] = gh_schema_validate(s2, v, msg, sizeof(msg));
	T_EQ_STR(msg, "$: must be at most 10 characters");
	rc[3] = gh_schema_validate(s4, v, msg, sizeof(msg));
	T_EQ_STR(msg, "$: must be one of \"abc\", \"z\"");
	rc[4] = gh_schema_validate(s1, v, msg, sizeof(msg));
	cJSON_Delete(v);
	cJSON_Delete(v100k);
	cJSON_Delete(s1);
	cJSON_Delete(s2);
	cJSON_Delete(s3);
	cJSON_Delete(s4);
	T_EQ_INT(rc[0], 0);
	T_EQ_INT(rc[1], 0);
	T_EQ_INT(rc[2], -1);
	T_EQ_INT(rc[3], -1);
	T_EQ_INT(rc[4], -1);
	T_EQ_STR(msg, "$: too long (1048576 bytes) to check against pattern \"^[a-z]+$\" "
		      "(at most 131072 bytes)");
	T_ASSERT(now_s() - t0 < 30.0);
}

/* The pattern that makes glibc's regexec build one DFA state per input
 * byte is refused quickly on a long string instead of taking minutes and
 * gigabytes. */
static void test_pattern_blowup(void)
{
	size_t n = 65536, i;
	char *ab = malloc(n + 1), msg[GH_SCHEMA_MSG_MAX];
	cJSON *v, *s = cJSON_Parse("{\"pattern\":\"^(a|b)*a(a|b){20}c\"}");
	double t0;
	int rc;

	T_ASSERT(ab && s);
	for (i = 0; i < n; i++)
		ab[i] = "ab"[(i * 7 + i / 3) % 2];
	ab[n] = '\0';
	v = cJSON_CreateString(ab);
	free(ab);
	t0 = now_s();
	rc = gh_schema_validate(s, v, msg, sizeof(msg));
	cJSON_Delete(v);
	cJSON_Delete(s);
	T_EQ_INT(rc, -1);
	T_EQ_STR(msg, "$: too long (65536 bytes) to check against pattern "
		      "\"^(a|b)*a(a|b){20}c\" (at most 5957 bytes)");
	T_ASSERT(now_s() - t0 < 30.0);
}

/* Property names go through patternProperties under the same limit. */
static void test_pattern_property_name_limit(void)
{
	char *key = malloc(200001), msg[GH_SCHEMA_MSG_MAX];
	cJSON *v = cJSON_CreateObject(), *s = cJSON_Parse(
		"{\"patternProperties\":{\"^[a-z]+$\":{}},\"additionalProperties\":false}");
	int rc;

	T_ASSERT(key && v && s);
	memset(key, 'k', 200000);
	key[200000] = '\0';
	cJSON_AddNumberToObject(v, key, 1);
	free(key);
	rc = gh_schema_validate(s, v, msg, sizeof(msg));
	cJSON_Delete(v);
	cJSON_Delete(s);
	T_EQ_INT(rc, -1);
	T_CONTAINS(msg, "...\"]: property name too long to check against patternProperties "
			"\"^[a-z]+$\" (at most 131072 bytes)");
}

/* A large array with uniqueItems is sorted, not compared pairwise. */
static void test_unique_large(void)
{
	cJSON *arr = cJSON_CreateArray(), *s = cJSON_Parse("{\"uniqueItems\":true}");
	char msg[GH_SCHEMA_MSG_MAX];
	int i, rc1, rc2;
	double t0;

	T_ASSERT(arr && s);
	for (i = 0; i < 100000; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(i));
	t0 = now_s();
	rc1 = gh_schema_validate(s, arr, msg, sizeof(msg));
	cJSON_AddItemToArray(arr, cJSON_CreateNumber(4242));
	rc2 = gh_schema_validate(s, arr, msg, sizeof(msg));
	cJSON_Delete(arr);
	cJSON_Delete(s);
	T_EQ_INT(rc1, 0);
	T_EQ_INT(rc2, -1);
	T_EQ_STR(msg, "$: items must be unique (item 100000 repeats item 4242)");
	T_ASSERT(now_s() - t0 < 30.0);

	/* all equal: found at once, not after n^2 scans */
	arr = cJSON_CreateArray();
	s = cJSON_Parse("{\"uniqueItems\":true}");
	T_ASSERT(arr && s);
	for (i = 0; i < 200000; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString("same"));
	t0 = now_s();
	rc1 = gh_schema_validate(s, arr, msg, sizeof(msg));
	cJSON_Delete(arr);
	cJSON_Delete(s);
	T_EQ_INT(rc1, -1);
	T_EQ_STR(msg, "$: items must be unique (item 1 repeats item 0)");
	T_ASSERT(now_s() - t0 < 30.0);
}

static int utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC2 ? 2 : 0;
		int i;

		if (n == 0)
			return 0;
		for (i = 1; i < n; i++)
			if ((p[i] & 0xC0) != 0x80)
				return 0;
		p += n;
	}
	return 1;
}

/* Long keys and paths never cut the reason off a message. */
static void test_message_bounds(void)
{
	char key[300], schema[1024], value[1024], msg[GH_SCHEMA_MSG_MAX], tiny[12];
	cJSON *s, *v;
	int checked;

	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	snprintf(schema, sizeof(schema), "{\"properties\":{\"%s\":{\"type\":\"string\"}}}", key);
	snprintf(value, sizeof(value), "{\"%s\":1}", key);
	T_EQ_INT(validate_text(schema, value, msg, sizeof(msg), &checked), -1);
	T_EQ_INT(checked, 0);
	T_ASSERT(strncmp(msg, "$[\"kkkk", 7) == 0);
	T_CONTAINS(msg, "...\"]: expected string, got number");
	T_ASSERT(strlen(msg) < 120);

	/* a small buffer is filled and terminated */
	s = cJSON_Parse("{\"type\":\"string\"}");
	v = cJSON_Parse("5");
	T_ASSERT(s && v);
	memset(tiny, 'x', sizeof(tiny));
	T_EQ_INT(gh_schema_validate(s, v, tiny, sizeof(tiny)), -1);
	T_EQ_STR(tiny, "$: expected");
	T_EQ_INT(gh_schema_validate(s, v, NULL, 0), -1);
	T_EQ_INT(gh_schema_validate(s, NULL, msg, sizeof(msg)), -1);
	T_EQ_STR(msg, "$: expected a JSON value, got nothing");
	T_EQ_INT(gh_schema_check(NULL, msg, sizeof(msg)), -1);
	T_EQ_STR(msg, "schema: missing");
	T_EQ_INT(gh_schema_check(v, NULL, 0), -1);
	cJSON_Delete(s);
	cJSON_Delete(v);

	/* cut to fit, a message never ends inside a UTF-8 character */
	s = cJSON_Parse("{\"required\":[\"\\u00e9\\u00e9\\u00e9\\u00e9\\u20ac\\u20ac\\u20ac\"]}");
	v = cJSON_Parse("{}");
	T_ASSERT(s && v);
	for (checked = 34; checked < 48; checked++) {
		char cut[48];

		T_EQ_INT(gh_schema_validate(s, v, cut, (size_t)checked), -1);
		if (!utf8_valid(cut)) {
			cJSON_Delete(s);
			cJSON_Delete(v);
			T_FAIL("cap %d: \"%s\" is not valid UTF-8", checked, cut);
		}
	}
	T_EQ_INT(gh_schema_validate(s, v, msg, sizeof(msg)), -1);
	cJSON_Delete(s);
	cJSON_Delete(v);
	T_EQ_STR(msg, "$: missing required property \"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		      "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\"");
}

/* The process locale does not change what a pattern means. */
static void test_locale_independent(void)
{
	char msg[GH_SCHEMA_MSG_MAX];
	int checked, rc1, rc2;

	if (!setlocale(LC_ALL, "C.UTF-8")) {
		printf("  (C.UTF-8 locale not available; checking the C locale only)\n");
	}
	rc1 = validate_text("{\"pattern\":\"^.{2}$\"}", "\"\\u20ac\\ud83d\\ude00\"", msg,
			    sizeof(msg), &checked);
	rc2 = validate_text("{\"pattern\":\"^[^a]\\\\w$\"}", "\"\\u20acx\"", msg, sizeof(msg),
			    &checked);
	setlocale(LC_ALL, "C");
	T_EQ_INT(rc1, 0);
	T_EQ_INT(rc2, 0);
}

/* Validation shares nothing between threads. */
struct worker {
	cJSON *schema;
	int failures;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	char msg[GH_SCHEMA_MSG_MAX];
	int i;

	for (i = 0; i < 300; i++) {
		cJSON *good = cJSON_Parse("{\"code\":\"ab-12\",\"tags\":[\"x\",\"y\"]}");
		cJSON *bad = cJSON_Parse("{\"code\":\"AB-12\",\"tags\":[\"x\",\"x\"]}");

		if (gh_schema_validate(w->schema, good, msg, sizeof(msg)) != 0)
			w->failures++;
		if (gh_schema_validate(w->schema, bad, msg, sizeof(msg)) != -1 ||
		    strcmp(msg, "$.code: must match pattern \"^[a-z]+-\\\\d+$\"") != 0)
			w->failures++;
		cJSON_Delete(good);
		cJSON_Delete(bad);
	}
	return NULL;
}

/* ---- results: the output check over the same cases ---- */

#define OUT_PREFIX "the result does not match the output schema: "

/* Runs an argument case as a tool result: the same verdict and message as
 * for arguments, after the output check's prefix. */
static int run_ocase(const struct vcase *c, char *why, size_t cap)
{
	cJSON *s = cJSON_Parse(c->schema), *v = cJSON_Parse(c->value), *st = NULL;
	char msg[GH_SCHEMA_MSG_MAX + 64] = "unset", want[GH_SCHEMA_MSG_MAX + 64];
	int rc = -1, got;

	if (!s || !v) {
		snprintf(why, cap, "test case does not parse");
		goto out;
	}
	got = gh_tools_output_check(s, v, &st, msg, sizeof(msg));
	snprintf(want, sizeof(want), OUT_PREFIX "%s", c->msg ? c->msg : "");
	if (st)
		snprintf(why, cap, "a JSON value came back structured");
	else if (!c->msg && (got != 0 || msg[0]))
		snprintf(why, cap, "expected conforming, got %d \"%s\"", got, msg);
	else if (c->msg && (got != -1 || strcmp(msg, want)))
		snprintf(why, cap, "expected \"%s\", got %d \"%s\"", want, got, msg);
	else
		rc = 0;
out:
	cJSON_Delete(s);
	cJSON_Delete(v);
	cJSON_Delete(st);
	return rc;
}

#define RUN_OCASES(table)                                                                  \
	do {                                                                               \
		size_t t_i;                                                                \
		char t_why[800];                                                           \
		for (t_i = 0; t_i < sizeof(table) / sizeof(table[0]); t_i++)               \
			if (run_ocase(&table[t_i], t_why, sizeof(t_why)))                  \
				T_FAIL("output case %zu: schema %s value %s: %s", t_i,     \
				       table[t_i].schema, table[t_i].value, t_why);        \
	} while (0)

static void test_output_check(void)
{
	RUN_OCASES(type_cases);
	RUN_OCASES(object_cases);
	RUN_OCASES(array_cases);
	RUN_OCASES(enum_cases);
	RUN_OCASES(number_cases);
	RUN_OCASES(string_cases);
	RUN_OCASES(combinator_cases);
	RUN_OCASES(ref_cases);
	RUN_OCASES(zod_cases);
	RUN_OCASES(openai_cases);
}

/* What only results have: no schema takes anything; a text result that
 * is the JSON of an object or array is judged by that JSON (and given back
 * structured when it conforms); the same depth bound; bounded messages. */
static void test_output_text_and_bounds(void)
{
	cJSON *s = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"n\":"
			       "{\"type\":\"integer\"}},\"required\":[\"n\"]}");
	cJSON *v, *st = NULL;
	char msg[GH_SCHEMA_MSG_MAX + 64], small[24], deep[300];
	size_t i;

	T_ASSERT(s);
	v = cJSON_CreateString("anything");
	T_EQ_INT(gh_tools_output_check(NULL, v, &st, msg, sizeof(msg)), 0);
	T_ASSERT(!st);
	T_EQ_INT(gh_tools_output_check(s, v, &st, msg, sizeof(msg)), -1);
	T_EQ_STR(msg, OUT_PREFIX "$: expected object, got string");
	cJSON_Delete(v);
	v = cJSON_CreateString(" {\"n\": 4}");
	T_EQ_INT(gh_tools_output_check(s, v, &st, msg, sizeof(msg)), 0);
	T_ASSERT(st && cJSON_GetObjectItem(st, "n") && cJSON_GetObjectItem(st, "n")->valueint == 4);
	cJSON_Delete(st);
	st = NULL;
	cJSON_Delete(v);
	v = cJSON_CreateString("{\"n\": 4.5}");
	T_EQ_INT(gh_tools_output_check(s, v, &st, msg, sizeof(msg)), -1);
	T_EQ_STR(msg, OUT_PREFIX "$.n: expected integer, got number");
	T_ASSERT(!st);
	/* cut to the caller's buffer, NUL-terminated */
	T_EQ_INT(gh_tools_output_check(s, v, &st, small, sizeof(small)), -1);
	T_EQ_INT(strlen(small), sizeof(small) - 1);
	cJSON_Delete(v);
	cJSON_Delete(s);
	/* a text "5" stays a text */
	s = cJSON_Parse("{\"type\":\"number\"}");
	v = cJSON_CreateString("5");
	T_EQ_INT(gh_tools_output_check(s, v, &st, msg, sizeof(msg)), -1);
	T_EQ_STR(msg, OUT_PREFIX "$: expected number, got string");
	cJSON_Delete(v);
	cJSON_Delete(s);
	/* the depth bounds hold for results as for arguments */
	for (i = 0; i < 100; i++)
		deep[i] = '[';
	for (i = 0; i < 100; i++)
		deep[100 + i] = ']';
	deep[200] = '\0';
	s = cJSON_Parse("{\"$ref\":\"#/definitions/t\",\"definitions\":{\"t\":{\"type\":"
			"\"array\",\"items\":{\"$ref\":\"#/definitions/t\"}}}}");
	v = cJSON_Parse(deep);
	T_ASSERT(s && v);
	T_EQ_INT(gh_tools_output_check(s, v, &st, msg, sizeof(msg)), -1);
	T_CONTAINS(msg, OUT_PREFIX "$[0][0][0]");
	T_CONTAINS(msg, "schema too deep");
	cJSON_Delete(v);
	cJSON_Delete(s);
}

static void test_threads(void)
{
	cJSON *s = cJSON_Parse("{\"properties\":{\"code\":{\"pattern\":\"^[a-z]+-\\\\d+$\"},"
			       "\"tags\":{\"uniqueItems\":true}}}");
	struct worker w[4];
	pthread_t th[4];
	int i, failures = 0;

	T_ASSERT(s);
	for (i = 0; i < 4; i++) {
		w[i].schema = s;
		w[i].failures = 0;
		if (pthread_create(&th[i], NULL, work, &w[i]) != 0)
			T_FAIL("pthread_create");
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		failures += w[i].failures;
	}
	cJSON_Delete(s);
	T_EQ_INT(failures, 0);
}

T_MAIN(T(test_type), T(test_object), T(test_array), T(test_enum_const), T(test_number),
       T(test_string), T(test_zod_email_pattern), T(test_combinators), T(test_nullable_ref),
       T(test_zod_and_openai), T(test_check), T(test_check_ref_cycles), T(test_check_depth),
       T(test_ref_cycle_terminates), T(test_exponential_anyof), T(test_deep_value),
       T(test_megabyte_string), T(test_pattern_blowup),
       T(test_pattern_property_name_limit), T(test_unique_large), T(test_message_bounds),
       T(test_locale_independent), T(test_output_check), T(test_output_text_and_bounds),
       T(test_threads))
