/*
 * test_jread.c - the tree-less JSON reader: what it takes, what it
 * decodes, and everything that must make it fail (so that its callers
 * fall back to gh_json_parse_opts) rather than read a value differently.
 */
#include "jread.h"

#include "t.h"

/* 0 when the reader takes s whole (every value skipped), else -1. */
static int skim(const char *s)
{
	struct gh_jr r;

	gh_jr_init(&r, s, strlen(s));
	if (gh_jr_skip(&r))
		return -1;
	return gh_jr_done(&r);
}

/* The first string of s (a JSON string) decoded into out; gh_jr_string's
 * result. */
static int decode(const char *s, struct gh_buf *out)
{
	struct gh_jr r;
	int rc;

	gh_jr_init(&r, s, strlen(s));
	rc = gh_jr_string(&r, out);
	return rc ? rc : gh_jr_done(&r);
}

static void test_takes_json(void)
{
	static const char *ok[] = {
		"{}", "[]", " \t\r\n{} \n", "0", "-0", "12.5e-3", "1E+2", "-1.0",
		"true", "false", "null", "\"\"", "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\"",
		"{\"a\":[1,{\"b\":null}],\"c\":{\"a\":1}}", "[[],[[]],{}]",
		"\"\\u00e9\\ud83d\\ude00\"", "\"caf\xc3\xa9\"", "9.9e307", "-1e-400", "0.5e+10",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (skim(ok[i]))
			T_FAIL("refused %s", ok[i]);
}

static void test_refuses_what_the_parser_must_judge(void)
{
	static const char *bad[] = {
		"", " ", "{", "}", "[1,]", "[,1]", "{,}", "{\"a\":1,}", "{\"a\"}", "{\"a\" 1}",
		"{1:2}", "01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "tru", "nul", "True",
		"{} {}", "{}x", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u0x12\"", "\"\\u+123\"",
		"\"a\nb\"", "\"a\tb\"", "\x01{}", "{}\x0b", "[1]\f",
		/* the parser's: \u0000 (replaced there), lone surrogates, dups */
		"\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"",
		"{\"a\":1,\"a\":2}", "{\"x\":{\"a\":1,\"b\":2,\"a\":3}}", "{\"a\\u0062\":1}",
		/* beyond double's range (or at its edge), or beyond cJSON's 63 bytes */
		"1e999", "-1e400", "1e308", "99e307", "1234567890123456789012345678901234567890123456789012345678901234",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!skim(bad[i]))
			T_FAIL("took %s", bad[i]);
	/* one name in two objects is no repeat */
	T_EQ_INT(skim("{\"a\":{\"a\":{\"a\":1}},\"b\":{\"a\":2}}"), 0);
}

static void test_depth_and_names_bounded(void)
{
	char deep[2 * GH_JSON_MAX_DEPTH + 8];
	struct gh_buf b;
	size_t i;

	for (i = 0; i < GH_JSON_MAX_DEPTH; i++) {
		deep[i] = '[';
		deep[GH_JSON_MAX_DEPTH + i] = ']';
	}
	deep[2 * GH_JSON_MAX_DEPTH] = '\0';
	T_EQ_INT(skim(deep), 0);
	memmove(deep + 1, deep, 2 * GH_JSON_MAX_DEPTH + 1);
	deep[0] = '[';
	strcat(deep, "]");
	T_EQ_INT(skim(deep), -1);

	/* GH_JR_MAX_KEYS names open at once are taken, one more is not */
	gh_buf_init(&b, 1 << 20);
	gh_buf_puts(&b, "{");
	for (i = 0; i < GH_JR_MAX_KEYS; i++)
		gh_buf_printf(&b, "%s\"k%zu\":0", i ? "," : "", i);
	gh_buf_puts(&b, "}");
	T_EQ_INT(skim(b.data), 0);
	b.data[b.len - 1] = ',';
	gh_buf_puts(&b, "\"more\":0}");
	T_EQ_INT(skim(b.data), -1);
	gh_buf_free(&b);
}

static void test_decodes_strings(void)
{
	struct gh_jr r;
	struct gh_buf b;

	gh_buf_init(&b, 1 << 10);
	T_EQ_INT(decode("\"\"", &b), 0);
	T_EQ_STR(b.data, "");
	T_EQ_INT(decode("\"plain text\"", &b), 0);
	T_EQ_STR(b.data, "plain text");
	T_EQ_INT(decode("\"q\\\"b\\\\s\\/n\\nt\\tr\\rb\\bf\\f\"", &b), 0);
	T_EQ_STR(b.data, "q\"b\\s/n\nt\tr\rb\bf\f");
	T_EQ_INT(decode("\"\\u0041\\u00e9\\u20ac\\uD83D\\uDE00\\u0001\"", &b), 0);
	T_EQ_STR(b.data, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x01");
	T_EQ_INT(decode("\"raw \xe2\x82\xac\"", &b), 0);
	T_EQ_STR(b.data, "raw \xe2\x82\xac");
	T_EQ_INT(decode("1", &b), -1);
	gh_buf_free(&b);
	/* past the buffer's cap: the buffer's error, not a silent cut, and
	 * the reading ends there */
	gh_buf_init(&b, 3);
	T_EQ_INT(decode("\"abcd\"", &b), GH_BUF_TOOBIG);
	gh_jr_init(&r, "[\"abcd\",1]", 10);
	T_EQ_INT(gh_jr_array(&r), 0);
	T_EQ_INT(gh_jr_next(&r), 1);
	T_EQ_INT(gh_jr_string(&r, &b), GH_BUF_TOOBIG);
	T_EQ_INT(gh_jr_next(&r), -1);
	gh_buf_free(&b);
}

static void test_walks_members_and_elements(void)
{
	static const char doc[] = "{\"n\":[1,-22,333],\"s\":\"x\",\"skip\":{\"deep\":[true]},"
				  "\"f\":1.5}";
	struct gh_jr r;
	const char *name;
	size_t len;
	int64_t v, sum = 0;
	int k, members = 0;

	gh_jr_init(&r, doc, sizeof(doc) - 1);
	T_EQ_INT(gh_jr_object(&r), 0);
	while ((k = gh_jr_member(&r, &name, &len)) == 1) {
		members++;
		if (len == 1 && *name == 'n') {
			T_EQ_INT(gh_jr_peek(&r), GH_JR_ARRAY);
			T_EQ_INT(gh_jr_array(&r), 0);
			while ((k = gh_jr_next(&r)) == 1) {
				T_EQ_INT(gh_jr_int(&r, &v), 0);
				sum += v;
			}
			T_EQ_INT(k, 0);
		} else {
			T_EQ_INT(gh_jr_skip(&r), 0);
		}
	}
	T_EQ_INT(k, 0);
	T_EQ_INT(members, 4);
	T_EQ_INT(sum, 312);
	T_EQ_INT(gh_jr_done(&r), 0);

	/* an integer is digits only; 1.5, 1e2 and 16 digits are the parser's */
	gh_jr_init(&r, "1.5", 3);
	T_EQ_INT(gh_jr_int(&r, &v), -1);
	gh_jr_init(&r, "1e2", 3);
	T_EQ_INT(gh_jr_int(&r, &v), -1);
	gh_jr_init(&r, "1234567890123456", 16);
	T_EQ_INT(gh_jr_int(&r, &v), -1);
	gh_jr_init(&r, "-123456789012345", 16);
	T_EQ_INT(gh_jr_int(&r, &v), 0);
	T_EQ_INT(v, -123456789012345);

	/* a failure is sticky */
	gh_jr_init(&r, "[x, 1]", 6);
	T_EQ_INT(gh_jr_array(&r), 0);
	T_EQ_INT(gh_jr_next(&r), 1);
	T_EQ_INT(gh_jr_skip(&r), -1);
	T_EQ_INT(gh_jr_next(&r), -1);
	T_EQ_INT(gh_jr_peek(&r), GH_JR_BAD);
	T_EQ_INT(gh_jr_done(&r), -1);

	/* members are asked of objects, elements of arrays */
	gh_jr_init(&r, "[1]", 3);
	T_EQ_INT(gh_jr_array(&r), 0);
	T_EQ_INT(gh_jr_member(&r, &name, &len), -1);
	gh_jr_init(&r, "{}", 2);
	T_EQ_INT(gh_jr_object(&r), 0);
	T_EQ_INT(gh_jr_next(&r), -1);
}

/* gh_jr_string_opt: a string decoded (set), anything else skipped (not
 * set), a string the reader does not take handed back (0), the buffer's
 * cap an error of its own (0: the caller reads the text the usual way). */
static void test_string_or_skip(void)
{
	static const char doc[] = "{\"s\":\"a\\u00e9\",\"n\":null,\"o\":{\"x\":[1]},\"z\":\"\\u0000\"}";
	struct gh_jr r;
	struct gh_buf b;
	const char *name;
	size_t len;
	int set = -1;

	gh_buf_init(&b, 64);
	gh_jr_init(&r, doc, sizeof(doc) - 1);
	T_EQ_INT(gh_jr_object(&r), 0);
	T_EQ_INT(gh_jr_member(&r, &name, &len), 1);
	T_EQ_INT(gh_jr_string_opt(&r, &b, &set), 1);
	T_EQ_INT(set, 1);
	T_EQ_STR(b.data, "a\xc3\xa9");
	T_EQ_INT(gh_jr_member(&r, &name, &len), 1);
	T_EQ_INT(gh_jr_string_opt(&r, &b, &set), 1);
	T_EQ_INT(set, 0);
	T_EQ_INT(gh_jr_member(&r, &name, &len), 1);
	T_EQ_INT(gh_jr_string_opt(&r, &b, &set), 1);
	T_EQ_INT(set, 0);
	T_EQ_INT(gh_jr_member(&r, &name, &len), 1);
	T_EQ_INT(gh_jr_string_opt(&r, &b, &set), 0); /* \u0000 is the parser's */
	gh_buf_free(&b);

	gh_buf_init(&b, 2);
	gh_jr_init(&r, "\"abc\"", 5);
	T_EQ_INT(gh_jr_string_opt(&r, &b, &set), 0);
	gh_buf_free(&b);
}

T_MAIN(T(test_takes_json), T(test_refuses_what_the_parser_must_judge),
       T(test_depth_and_names_bounded), T(test_decodes_strings),
       T(test_walks_members_and_elements), T(test_string_or_skip))
