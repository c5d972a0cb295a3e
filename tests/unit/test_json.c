/*
 * test_json.c - the cJSON helpers: parse errors say where (line, column)
 * and name what was parsed, trailing garbage and over-deep nesting are
 * refused, comment stripping leaves strings alone and keeps line numbers,
 * and the canonical form (the bytes audit hashes and approval bindings are
 * computed over) is stable: equal values give equal bytes, and parsing the
 * canonical form gives the value back (checked on generated values too).
 */
#include "json.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>

#include "t.h"
#include "util.h"

/* ---- parsing ---- */

static enum gh_code parse(const char *s, cJSON **out, struct gh_err *e)
{
	return gh_json_parse(s, strlen(s), "request body", out, e);
}

static void test_parse_ok(void)
{
	struct gh_err e;
	cJSON *v;

	T_EQ_INT(parse("{\"a\":[1,2,{\"b\":null}]}", &v, &e), GH_OK);
	T_ASSERT(cJSON_IsObject(v));
	cJSON_Delete(v);
	/* trailing whitespace of every kind is fine */
	T_EQ_INT(parse("  [true] \r\n\t ", &v, &e), GH_OK);
	T_ASSERT(cJSON_IsArray(v));
	cJSON_Delete(v);
	T_EQ_INT(parse("42", &v, &e), GH_OK);
	T_ASSERT(cJSON_IsNumber(v) && v->valuedouble == 42);
	cJSON_Delete(v);
	/* exactly n bytes: what follows in memory is not read */
	T_EQ_INT(gh_json_parse("[1]garbage", 3, "x", &v, &e), GH_OK);
	T_ASSERT(cJSON_GetArraySize(v) == 1);
	cJSON_Delete(v);
}

static void test_parse_errors(void)
{
	static const struct {
		const char *in;
		const char *msg;
	} c[] = {
		{"{\"a\": 1,}", "request body is not valid JSON (line 1, column 9)"},
		{"{\n  \"a\": 1,\n  \"b\": tru\n}",
		 "request body is not valid JSON (line 3, column 8)"},
		{"[1, 2]\n\n  x", "request body is not valid JSON (line 3, column 3)"},
		{"{\"a\":1} {\"b\":2}", "request body is not valid JSON (line 1, column 9)"},
		{"[1]]", "request body is not valid JSON (line 1, column 4)"},
		/* beyond double: read as infinity, printed back as null */
		{"{\"t\": 1e999}", "request body has a number too large to represent"},
		{"[[-2e400]]", "request body has a number too large to represent"},
		{"\"unterminated", "request body is not valid JSON"},
		{"{\n'a': 1}", "request body is not valid JSON (line 2, column"},
		{"   ", "request body is not valid JSON"},
		{"nul", "request body is not valid JSON"},
	};
	struct gh_err e;
	cJSON *v = (cJSON *)&e; /* must be reset to NULL on failure */
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		gh_err_clear(&e);
		if (parse(c[i].in, &v, &e) != GH_E_BADREQ)
			T_FAIL("accepted %s", c[i].in);
		T_ASSERT(v == NULL);
		T_EQ_INT(e.code, GH_E_BADREQ);
		if (!strstr(e.msg, c[i].msg))
			T_FAIL("%s: message \"%s\", expected \"%s\"", c[i].in, e.msg, c[i].msg);
	}
	T_EQ_INT(gh_json_parse("", 0, "config", &v, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "config is empty");
	T_ASSERT(v == NULL);
}

/* depth levels of nested arrays, with a number inside the innermost one
 * when leaf is set. */
static char *nested(int depth, int leaf)
{
	char *s = malloc((size_t)depth * 2 + 2);
	int i, n = 0;

	for (i = 0; i < depth; i++)
		s[n++] = '[';
	if (leaf)
		s[n++] = '1';
	for (i = 0; i < depth; i++)
		s[n++] = ']';
	s[n] = '\0';
	return s;
}

static void test_parse_depth(void)
{
	struct gh_err e;
	cJSON *v;
	char *s;
	int leaf;

	for (leaf = 0; leaf <= 1; leaf++) {
		s = nested(GH_JSON_MAX_DEPTH, leaf);
		if (parse(s, &v, &e) != GH_OK) {
			free(s);
			T_FAIL("%d levels (leaf %d) refused: %s", GH_JSON_MAX_DEPTH, leaf, e.msg);
		}
		cJSON_Delete(v);
		free(s);
		s = nested(GH_JSON_MAX_DEPTH + 1, leaf);
		if (parse(s, &v, &e) != GH_E_BADREQ) {
			cJSON_Delete(v);
			free(s);
			T_FAIL("%d levels (leaf %d) accepted", GH_JSON_MAX_DEPTH + 1, leaf);
		}
		free(s);
		T_CONTAINS(e.msg, "request body nests deeper than 64 levels");
	}
	/* objects count the same as arrays */
	{
		struct gh_buf b;
		int i;

		gh_buf_init(&b, 4096);
		for (i = 0; i < GH_JSON_MAX_DEPTH + 1; i++)
			gh_buf_puts(&b, "{\"k\":");
		gh_buf_puts(&b, "{}");
		for (i = 0; i < GH_JSON_MAX_DEPTH + 1; i++)
			gh_buf_putc(&b, '}');
		T_EQ_INT(parse(b.data, &v, &e), GH_E_BADREQ);
		gh_buf_free(&b);
	}
	/* far deeper than the limit: refused, not a stack overflow */
	s = nested(100000, 1);
	T_EQ_INT(parse(s, &v, &e), GH_E_BADREQ);
	free(s);
}

/* The depth is bounded before cJSON recurses: cJSON allows 1000 levels and
 * recurses once per level, which overflowed a server worker's stack (100
 * KiB as Debian builds CivetWeb) on a 1.6 KB body of "[" before the tree
 * could be checked. Parsed here on a thread with a 64 KiB stack: without
 * the pre-scan, cJSON's recursion to 1000 levels does not fit. */
struct deep_job {
	const char *s;
	size_t n;
	unsigned flags;
	enum gh_code rc;
	struct gh_err e;
};

static void *deep_main(void *arg)
{
	struct deep_job *j = arg;
	cJSON *v = NULL;

	j->rc = gh_json_parse_opts(j->s, j->n, "request body", j->flags, &v, &j->e);
	cJSON_Delete(v);
	return NULL;
}

static enum gh_code parse_on_small_stack(const char *s, unsigned flags, struct gh_err *e)
{
	struct deep_job j = {s, strlen(s), flags, GH_E_INTERNAL, {0}};
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(4096, size);
	pthread_attr_t a;
	pthread_t t;
	int ok;

	/* an exact stack: pthread_attr_setstacksize may be raised (http.c) */
	pthread_attr_init(&a);
	ok = stack && pthread_attr_setstack(&a, stack, size) == 0 &&
	     pthread_create(&t, &a, deep_main, &j) == 0;
	if (ok)
		pthread_join(t, NULL);
	pthread_attr_destroy(&a);
	free(stack);
	*e = j.e;
	return ok ? j.rc : GH_E_INTERNAL;
}

static void test_parse_depth_before_recursion(void)
{
	static const int depths[] = {10, 64, 65, 800, 1000, 1001, 100000};
	struct gh_err e;
	char *s;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(depths); i++) {
		enum gh_code want = depths[i] <= GH_JSON_MAX_DEPTH ? GH_OK : GH_E_BADREQ;

		/* well-formed, and unclosed as an attacker sends it */
		s = nested(depths[i], 1);
		T_EQ_INT(parse_on_small_stack(s, 0, &e), want);
		s[depths[i]] = '\0';
		T_EQ_INT(parse_on_small_stack(s, 0, &e), GH_E_BADREQ);
		free(s);
		if (depths[i] > GH_JSON_MAX_DEPTH)
			T_CONTAINS(e.msg, "request body nests deeper than 64 levels at $[0][0]");
	}
	/* deep objects: the path names the members on the way down */
	{
		struct gh_buf b;
		int k;

		gh_buf_init(&b, 1 << 20);
		gh_buf_puts(&b, "{\"messages\":[0,");
		for (k = 0; k < 5000; k++)
			gh_buf_puts(&b, "{\"a\":");
		T_EQ_INT(parse_on_small_stack(b.data, 0, &e), GH_E_BADREQ);
		T_CONTAINS(e.msg, "nests deeper than 64 levels at $.messages[1].a.a.a");
		T_CONTAINS(e.msg, "(line 1, column ");
		gh_buf_free(&b);
	}
	/* brackets inside strings (escaped quotes too) do not nest */
	{
		struct gh_buf b;
		cJSON *v;
		int k;

		gh_buf_init(&b, 1 << 20);
		gh_buf_puts(&b, "[\"\\\"");
		for (k = 0; k < 5000; k++)
			gh_buf_puts(&b, "[{");
		gh_buf_puts(&b, "\\\\\", \"]]]\"]");
		T_EQ_INT(parse_on_small_stack(b.data, 0, &e), GH_OK);
		T_EQ_INT(parse(b.data, &v, &e), GH_OK);
		T_EQ_INT(cJSON_GetArraySize(v), 2);
		cJSON_Delete(v);
		gh_buf_free(&b);
	}
	/* documents gatehouse stored itself may be deeper (its envelopes
	 * around a client's 64 levels), up to GH_JSON_MAX_DEPTH_STORED */
	s = nested(GH_JSON_MAX_DEPTH_STORED, 1);
	T_EQ_INT(parse_on_small_stack(s, 0, &e), GH_E_BADREQ);
	T_EQ_INT(parse_on_small_stack(s, GH_JSON_STORED, &e), GH_OK);
	free(s);
	s = nested(GH_JSON_MAX_DEPTH_STORED + 1, 1);
	T_EQ_INT(parse_on_small_stack(s, GH_JSON_STORED, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "nests deeper than 128 levels");
	free(s);
	{
		cJSON *v = gh_json_parse_stored("{\"a\":[1,2],\"a\":3}");

		T_ASSERT(v != NULL); /* stored: repeated names left alone */
		cJSON_Delete(v);
		T_ASSERT(gh_json_parse_stored("{\"a\":") == NULL);
		T_ASSERT(gh_json_parse_stored(NULL) == NULL);
	}
}

/* The size bound comes before anything is read. */
static void test_parse_size_bound(void)
{
	struct gh_err e;
	cJSON *v = (cJSON *)&e;

	T_EQ_INT(gh_json_parse("[]", GH_JSON_MAX_BYTES + 1, "reply", &v, &e), GH_E_TOOBIG);
	T_ASSERT(v == NULL);
	T_CONTAINS(e.msg, "reply is larger than 1073741824 bytes");
}

/* NUL in a string: cJSON stores strings as C strings and cuts them there,
 * so "http://\u0000\u0000evil.example/v1" would be checked and used as
 * "http://". Refused with where it is, raw or escaped, in values and in
 * member names; an upstream's text gets U+FFFD instead. */
static void test_parse_nul(void)
{
	static const struct {
		const char *in;
		size_t n;
		const char *msg;
	} bad[] = {
		{"{\"a\":[1,{\"b\":\"x\\u0000y\"}]}", 0,
		 "request body has a NUL character (\\u0000) in the string at $.a[1].b (line 1, "
		 "column 16)"},
		{"{\n \"base_url\": \"http://\\u0000\\u0000evil.example/v1\"\n}", 0,
		 "in the string at $.base_url (line 2, column 22)"},
		{"{\"ok\":1,\"k\\u0000ey\":2}", 0, "in a member name at $ (line 1"},
		{"[\"a\",\"b\",{\"c\":[\"\\u0000\"]}]", 0, "in the string at $[2].c[0]"},
		{"{\"a\":\"x\0y\"}", 11, "(a raw 0 byte) in the string at $.a (line 1, column 8)"},
		{"[1,\0 2]", 7, "request body contains a NUL byte (line 1, column 4)"},
	};
	struct gh_err e;
	cJSON *v;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(bad); i++) {
		size_t n = bad[i].n ? bad[i].n : strlen(bad[i].in);

		v = (cJSON *)&e;
		if (gh_json_parse(bad[i].in, n, "request body", &v, &e) == GH_OK) {
			cJSON_Delete(v);
			T_FAIL("accepted %s", bad[i].in);
		}
		T_ASSERT(v == NULL);
		T_EQ_INT(e.code, GH_E_BADREQ);
		if (!strstr(e.msg, bad[i].msg))
			T_FAIL("%s: message \"%s\", expected \"%s\"", bad[i].in, e.msg, bad[i].msg);
	}
	/* an escaped backslash followed by "u0000" is text */
	T_EQ_INT(parse("[\"\\\\u0000\"]", &v, &e), GH_OK);
	T_EQ_STR(cJSON_GetArrayItem(v, 0)->valuestring, "\\u0000");
	cJSON_Delete(v);
	/* U+0001 is fine; "\u00000" is U+0000 and then "0" */
	T_EQ_INT(parse("[\"\\u0001\"]", &v, &e), GH_OK);
	cJSON_Delete(v);
	T_EQ_INT(parse("[\"\\u00000\"]", &v, &e), GH_E_BADREQ);
	/* upstream text: U+FFFD in place of NUL, the rest intact */
	{
		const char *up = "{\"t\":\"a\\u0000b\\u0000\",\"u\":\"\\u0000\"}";

		T_EQ_INT(gh_json_parse_opts(up, strlen(up), "reply", GH_JSON_UPSTREAM, &v, &e),
			 GH_OK);
	}
	T_EQ_STR(gh_json_str(v, "t"), "a\xef\xbf\xbd" "b\xef\xbf\xbd");
	T_EQ_STR(gh_json_str(v, "u"), "\xef\xbf\xbd");
	cJSON_Delete(v);
	/* a raw NUL byte is never text, upstream or not */
	T_EQ_INT(gh_json_parse_opts("[\"a\0\"]", 6, "reply", GH_JSON_UPSTREAM, &v, &e),
		 GH_E_BADREQ);
}

/* gh_json_parse_opts is the only door to cJSON's parser: no file in src/
 * but json.c calls cJSON_Parse*, so a new surface (MCP, a new provider)
 * gets the bounds without thinking of them. */
static void test_one_entry_point(void)
{
	const char *root = getenv("GH_SRC");
	char dir[4096], path[4096 + 260];
	struct dirent *de;
	DIR *d;
	int files = 0;

	snprintf(dir, sizeof(dir), "%s/src", root ? root : "../..");
	d = opendir(dir);
	T_ASSERT(d != NULL);
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		FILE *f;
		char line[4096];
		int ln = 0;

		if (len < 3 || strcmp(de->d_name + len - 2, ".c") || !strcmp(de->d_name, "json.c"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		files++;
		while (fgets(line, sizeof(line), f)) {
			ln++;
			if (strstr(line, "cJSON_Parse")) {
				fclose(f);
				closedir(d);
				T_FAIL("%s:%d calls cJSON's parser directly; use gh_json_parse_opts",
				       path, ln);
			}
		}
		fclose(f);
	}
	closedir(d);
	T_ASSERT(files > 20);
}

/* An object with the same member name twice is refused. Model tool-call
 * arguments go through gh_json_parse: gatehouse checks the schema (and
 * shows reviewers) with cJSON lookups, which see the first "to", while the
 * tool's own JSON parser usually takes the last one, so
 * {"to":"ok@example.com","to":"x@evil.example"} would pass a pattern on
 * "to" and mail someone else. The config file goes through it too, where a
 * second "threads" is silently ignored. */
static void test_parse_duplicate_keys(void)
{
	static const char *const dup[] = {
		"{\"to\":\"ok@example.com\",\"to\":\"x@evil.example\"}",
		"{\"a\":{\"b\":1,\"c\":2,\"b\":3}}",
		"[1,{\"k\":[{\"x\":null,\"x\":null}]}]",
	};
	struct gh_err e;
	cJSON *v;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(dup); i++) {
		if (parse(dup[i], &v, &e) == GH_OK) {
			cJSON_Delete(v);
			T_FAIL("duplicate member names accepted: %s", dup[i]);
		}
		T_EQ_INT(e.code, GH_E_BADREQ);
	}
	/* the same name in different objects is fine */
	T_EQ_INT(parse("{\"a\":{\"a\":1},\"b\":{\"a\":2},\"A\":3}", &v, &e), GH_OK);
	cJSON_Delete(v);
}

/* ---- comments ---- */

static enum gh_code strip_parse(const char *in, cJSON **out, struct gh_err *e, char **stripped)
{
	size_t n = strlen(in);
	char *s = malloc(n + 1);
	enum gh_code rc;

	memcpy(s, in, n + 1);
	if (gh_json_strip_comments(s, n) != 0) {
		free(s);
		*stripped = NULL;
		return GH_E_IO;
	}
	if (strlen(s) != n) { /* in place, same length */
		free(s);
		*stripped = NULL;
		return GH_E_INTERNAL;
	}
	rc = gh_json_parse(s, n, "config", out, e);
	*stripped = s;
	return rc;
}

static void test_strip_comments(void)
{
	const char *in =
		"// heading\n"
		"{\n"
		"  \"url\": \"http://host//path/*x*/\", // a URL with // and /* inside\n"
		"  /* a block\n"
		"     over lines */ \"n\": 1,\n"
		"  \"esc\": \"quote \\\" // still a string\",\n"
		"  \"slash\": \"a/b\" /**/\n"
		"}\n";
	struct gh_err e;
	cJSON *v;
	char *s;

	T_EQ_INT(strip_parse(in, &v, &e, &s), GH_OK);
	T_EQ_STR(gh_json_str(v, "url"), "http://host//path/*x*/");
	T_EQ_STR(gh_json_str(v, "esc"), "quote \" // still a string");
	T_EQ_STR(gh_json_str(v, "slash"), "a/b");
	T_EQ_INT(gh_json_int(v, "n", 0), 1);
	cJSON_Delete(v);
	/* newlines kept: same number of lines */
	{
		size_t a = 0, b = 0, i;

		for (i = 0; in[i]; i++)
			a += in[i] == '\n';
		for (i = 0; s[i]; i++)
			b += s[i] == '\n';
		T_EQ_INT(a, b);
	}
	free(s);

	/* an error after a multi-line comment reports the right line */
	T_EQ_INT(strip_parse("{\n/*\n\n*/\n\"a\": x}", &v, &e, &s), GH_E_BADREQ);
	T_CONTAINS(e.msg, "line 5, column 6");
	free(s);

	/* unterminated block comments */
	{
		static const char *const bad[] = {"{} /*", "{} /* x", "{} /* x *", "/*/ {}",
						  "{\"a\":1 /* \"*/\" */"};
		size_t i;

		for (i = 0; i < 4; i++) {
			char buf[64];

			gh_strlcpy(buf, bad[i], sizeof(buf));
			if (gh_json_strip_comments(buf, strlen(buf)) != -1)
				T_FAIL("unterminated comment in %s not reported", bad[i]);
		}
		/* the comment ends at the first * / even inside quotes */
		T_EQ_INT(strip_parse(bad[4], &v, &e, &s), GH_E_BADREQ);
		free(s);
	}
	/* only the first n bytes are looked at */
	{
		char buf[] = "[1] // x";

		T_EQ_INT(gh_json_strip_comments(buf, 4), 0);
		T_EQ_STR(buf, "[1] // x");
		T_EQ_INT(gh_json_strip_comments(buf, 5), 0); /* a lone '/' at the end */
	}
}

/* ---- canonical form ---- */

static char *canon(const cJSON *v)
{
	struct gh_buf b;

	gh_buf_init(&b, 1 << 22);
	if (gh_json_canonical(v, &b) != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}

static char *canon_of(const char *text)
{
	cJSON *v = cJSON_Parse(text);
	char *s = v ? canon(v) : NULL;

	cJSON_Delete(v);
	return s;
}

static void test_canonical_form(void)
{
	static const struct {
		const char *in, *out;
	} c[] = {
		{"{\"b\":1,\"a\":2,\"c\":{\"z\":[3,{\"y\":1,\"x\":2}],\"B\":0}}",
		 "{\"a\":2,\"b\":1,\"c\":{\"B\":0,\"z\":[3,{\"x\":2,\"y\":1}]}}"},
		{" { \"a\" : [ 1 , 2 ] } ", "{\"a\":[1,2]}"},
		{"{}", "{}"},
		{"[]", "[]"},
		{"[null,true,false]", "[null,true,false]"},
		/* integers: no fraction, no exponent, sign kept */
		{"[1.0, -0, 1e3, -42, 9007199254740992, -9007199254740992]",
		 "[1,0,1000,-42,9007199254740992,-9007199254740992]"},
		/* other numbers: %.17g, which reads back to the same double */
		{"[1.5, 0.1, -2.25e-7, 1e300]",
		 "[1.5,0.10000000000000001,-2.2499999999999999e-07,1.0000000000000001e+300]"},
		/* strings: minimal escapes, UTF-8 raw, \u escapes decoded */
		{"[\"a\\u0041\\n\\\"\\/\\u00e9\"]", "[\"aA\\n\\\"/\xc3\xa9\"]"},
		/* keys sort bytewise: upper case before lower, UTF-8 last */
		{"{\"\xc3\xa9\":1,\"a\":2,\"Z\":3,\"\":4}",
		 "{\"\":4,\"Z\":3,\"a\":2,\"\xc3\xa9\":1}"},
		{"{\"k\\n\":1}", "{\"k\\n\":1}"},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		char *s = canon_of(c[i].in);

		if (!s || strcmp(s, c[i].out)) {
			T_FAIL("canonical(%s) = %s, expected %s", c[i].in, s ? s : "(null)",
			       c[i].out);
		}
		free(s);
	}
	/* NULL means JSON null */
	{
		char *s = canon(NULL);

		T_EQ_STR(s, "null");
		free(s);
	}
}

static void test_canonical_equal_values(void)
{
	static const char *const same[][2] = {
		{"{\"a\":1,\"b\":[1,2]}", "{ \"b\" : [1, 2.0], \"a\" : 1e0 }"},
		{"{\"x\":{\"q\":\"\\u00e9\",\"p\":null}}",
		 "{\"x\":{\"p\":null,\"q\":\"\xc3\xa9\"}}"},
		{"[0.5]", "[5e-1]"},
		{"[100]", "[1E2]"},
	};
	static const char *const different[][2] = {
		{"[1,2]", "[2,1]"},     /* array order matters */
		{"{\"a\":1}", "{\"A\":1}"},
		{"[1]", "[\"1\"]"},
		{"[0.1]", "[0.10000000000000002]"},
		{"{\"a\":null}", "{}"},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(same); i++) {
		char *a = canon_of(same[i][0]), *b = canon_of(same[i][1]);
		int eq = a && b && !strcmp(a, b);

		free(a);
		free(b);
		if (!eq)
			T_FAIL("%s and %s should have one canonical form", same[i][0], same[i][1]);
	}
	for (i = 0; i < GH_ARRAY_LEN(different); i++) {
		char *a = canon_of(different[i][0]), *b = canon_of(different[i][1]);
		int eq = a && b && !strcmp(a, b);

		free(a);
		free(b);
		if (eq)
			T_FAIL("%s and %s share a canonical form", different[i][0],
			       different[i][1]);
	}
}

/* ---- property: parse(canonical(v)) == v, canonical is idempotent ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static void rand_string(char *s, size_t cap)
{
	static const char *const pieces[] = {"a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t",
					     "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
					     "\xf0\x9f\x98\x80", "key", "_", "{", "]", ":"};
	size_t n = rnd() % 6, used = 0, i;

	s[0] = '\0';
	for (i = 0; i < n; i++) {
		const char *p = pieces[rnd() % GH_ARRAY_LEN(pieces)];
		size_t l = strlen(p);

		if (used + l + 1 > cap)
			break;
		memcpy(s + used, p, l + 1);
		used += l;
	}
}

static double rand_number(void)
{
	switch (rnd() % 6) {
	case 0:
		return (double)(int64_t)(rnd() % 2000001) - 1000000;
	case 1:
		return (double)((int64_t)(rnd() >> 11) - (INT64_C(1) << 52));
	case 2:
		return (double)(int64_t)(rnd() % 1000) / 8.0;
	case 3: {
		double d;
		uint64_t bits;

		do {
			bits = rnd();
			memcpy(&d, &bits, sizeof(d));
		} while (!isfinite(d));
		return d;
	}
	case 4:
		return ldexp((double)(rnd() % 1000000), (int)(rnd() % 200) - 100);
	default:
		return 0.1 * (double)(rnd() % 100);
	}
}

static cJSON *rand_value(int depth)
{
	char s[64];
	cJSON *v;
	int i, n;

	switch (depth >= 5 ? rnd() % 4 : rnd() % 6) {
	case 0:
		return cJSON_CreateNull();
	case 1:
		return cJSON_CreateBool(rnd() & 1);
	case 2:
		return cJSON_CreateNumber(rand_number());
	case 3:
		rand_string(s, sizeof(s));
		return cJSON_CreateString(s);
	case 4:
		v = cJSON_CreateArray();
		n = (int)(rnd() % 5);
		for (i = 0; i < n; i++)
			cJSON_AddItemToArray(v, rand_value(depth + 1));
		return v;
	default:
		v = cJSON_CreateObject();
		n = (int)(rnd() % 5);
		for (i = 0; i < n; i++) {
			char k[64];

			rand_string(k, sizeof(k));
			if (cJSON_GetObjectItemCaseSensitive(v, k))
				continue; /* keys are unique in a value */
			cJSON_AddItemToObject(v, k, rand_value(depth + 1));
		}
		return v;
	}
}

/* The same value with every object's members in reverse order. */
static cJSON *reversed(const cJSON *v)
{
	const cJSON *c;
	cJSON *r;

	if (cJSON_IsArray(v)) {
		r = cJSON_CreateArray();
		for (c = v->child; c; c = c->next)
			cJSON_AddItemToArray(r, reversed(c));
		return r;
	}
	if (!cJSON_IsObject(v))
		return cJSON_Duplicate(v, 1);
	r = cJSON_CreateObject();
	for (c = v->child; c; c = c->next) {
		cJSON *d = reversed(c);

		cJSON_free(d->string); /* cJSON_Duplicate copied the key */
		d->string = strdup(c->string);
		cJSON_InsertItemInArray(r, 0, d); /* prepend */
	}
	return r;
}

static void test_canonical_property(void)
{
	int i;

	for (i = 0; i < 3000; i++) {
		cJSON *v = rand_value(0), *back = NULL, *rev;
		char *c1 = canon(v), *c2 = NULL, *c3 = NULL, *printed;
		struct gh_err e;
		int ok;

		printed = gh_json_dump(v);
		ok = c1 && gh_json_parse(c1, strlen(c1), "canonical", &back, &e) == GH_OK &&
		     cJSON_Compare(v, back, 1);
		if (ok) {
			c2 = canon(back);
			rev = reversed(v);
			c3 = canon(rev);
			cJSON_Delete(rev);
			ok = c2 && c3 && !strcmp(c1, c2) && !strcmp(c1, c3);
		}
		if (!ok) {
			fprintf(stderr, "  value:     %s\n  canonical: %s\n  again:     %s\n"
					"  reordered: %s\n",
				printed, c1 ? c1 : "(null)", c2 ? c2 : "(null)",
				c3 ? c3 : "(null)");
		}
		free(printed);
		free(c1);
		free(c2);
		free(c3);
		cJSON_Delete(v);
		cJSON_Delete(back);
		if (!ok)
			T_FAIL("case %d: canonical form does not round-trip", i);
	}
}

static void test_canonical_cap(void)
{
	cJSON *v = cJSON_Parse("{\"a\":\"0123456789\",\"b\":[1,2,3]}");
	struct gh_buf b;

	gh_buf_init(&b, 10);
	T_EQ_INT(gh_json_canonical(v, &b), GH_BUF_TOOBIG);
	gh_buf_free(&b);
	gh_buf_init(&b, 28); /* {"a":"0123456789","b":[1,2,3]} is 30 bytes */
	T_EQ_INT(gh_json_canonical(v, &b), GH_BUF_TOOBIG);
	gh_buf_free(&b);
	gh_buf_init(&b, 30);
	T_EQ_INT(gh_json_canonical(v, &b), GH_BUF_OK);
	T_EQ_INT(b.len, 30);
	gh_buf_free(&b);
	cJSON_Delete(v);
}

/* ---- getters ---- */

static void test_getters(void)
{
	cJSON *o = cJSON_Parse("{\"s\":\"x\",\"n\":5,\"f\":1.5,\"t\":true,\"z\":null,"
			       "\"big\":1e17,\"neg\":-3,\"arr\":[]}");
	char *d;

	T_ASSERT(o);
	T_EQ_STR(gh_json_str(o, "s"), "x");
	T_ASSERT(gh_json_str(o, "n") == NULL);
	T_ASSERT(gh_json_str(o, "missing") == NULL);
	T_ASSERT(gh_json_str(NULL, "s") == NULL);
	T_EQ_INT(gh_json_bool(o, "t", 0), 1);
	T_EQ_INT(gh_json_bool(o, "s", 7), 7);
	T_EQ_INT(gh_json_bool(o, "missing", 0), 0);
	T_EQ_INT(gh_json_int(o, "n", -1), 5);
	T_EQ_INT(gh_json_int(o, "neg", 0), -3);
	T_EQ_INT(gh_json_int(o, "f", -1), -1);      /* not an integer */
	T_EQ_INT(gh_json_int(o, "s", -1), -1);
	T_EQ_INT(gh_json_int(o, "big", -1), -1);    /* beyond 2^53: not exact */
	T_EQ_INT(gh_json_is_int(cJSON_GetObjectItem(o, "n")), 1);
	T_EQ_INT(gh_json_is_int(cJSON_GetObjectItem(o, "z")), 0);
	T_EQ_INT(gh_json_is_int(NULL), 0);
	T_ASSERT(gh_json_add_str(o, "nul", NULL) != NULL);
	T_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(o, "nul")));
	T_ASSERT(gh_json_add_str(o, "str", "v") != NULL);
	T_EQ_STR(gh_json_str(o, "str"), "v");
	d = gh_json_dump(cJSON_GetObjectItem(o, "arr"));
	T_EQ_STR(d, "[]");
	free(d);
	{
		struct gh_buf b;

		gh_buf_init(&b, 5);
		T_EQ_INT(gh_json_print(o, &b), GH_BUF_TOOBIG);
		gh_buf_free(&b);
		gh_buf_init(&b, 1024);
		T_EQ_INT(gh_json_print(cJSON_GetObjectItem(o, "t"), &b), GH_BUF_OK);
		T_EQ_STR(b.data, "true");
		gh_buf_free(&b);
	}
	cJSON_Delete(o);
}

T_MAIN(T(test_parse_ok), T(test_parse_errors), T(test_parse_depth),
       T(test_parse_depth_before_recursion), T(test_parse_size_bound), T(test_parse_nul),
       T(test_one_entry_point),
       T(test_parse_duplicate_keys), T(test_strip_comments), T(test_canonical_form),
       T(test_canonical_equal_values), T(test_canonical_property), T(test_canonical_cap),
       T(test_getters))
