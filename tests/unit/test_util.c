/*
 * test_util.c - the stateless helpers: glob matching (table, and hostile
 * patterns finish quickly), checked integer parsing, time parsing and
 * printing (ISO-8601 with and without milliseconds or Z, Unix ms, junk,
 * round trips), hex, ids and bounded copies, and growing the descriptor
 * table.
 */
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "t.h"

struct glob_case {
	const char *pattern, *name;
	int match;
};

static void test_glob_table(void)
{
	static const struct glob_case c[] = {
		{"", "", 1},
		{"", "a", 0},
		{"*", "", 1},
		{"*", "anything at all", 1},
		{"**", "", 1},
		{"a", "a", 1},
		{"a", "A", 0}, /* case-sensitive */
		{"a", "ab", 0},
		{"ab", "a", 0},
		{"memory_*", "memory_save", 1},
		{"memory_*", "memory_", 1},
		{"memory_*", "memory", 0},
		{"memory_*", "xmemory_save", 0},
		{"*_email", "send_email", 1},
		{"*_email", "send_emails", 0},
		{"send_*", "send_email", 1},
		{"get_*", "forget_it", 0},
		{"*mail*", "email", 1},
		{"*mail*", "mai", 0},
		{"a*b*c", "abc", 1},
		{"a*b*c", "aXXbYYc", 1},
		{"a*b*c", "aXXbYY", 0},
		{"a*b*c", "acb", 0},
		{"a*c", "abcbc", 1},
		{"a*bc", "abcbc", 1}, /* needs backtracking past the first "bc" */
		{"?", "a", 1},
		{"?", "", 0},
		{"?", "ab", 0},
		{"??", "ab", 1},
		{"a?c", "abc", 1},
		{"a?c", "ac", 0},
		{"*?", "", 0},
		{"*?", "x", 1},
		{"?*", "x", 1},
		{"*a", "", 0},
		{"tool_?_*", "tool_1_x", 1},
		{"tool_?_*", "tool__x", 0},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(c); i++)
		if (gh_glob_match(c[i].pattern, c[i].name) != c[i].match)
			T_FAIL("glob \"%s\" vs \"%s\": got %d, expected %d", c[i].pattern,
			       c[i].name, !c[i].match, c[i].match);
}

/* Patterns that make naive backtracking matchers exponential finish in
 * bounded time here. */
static void test_glob_pathological(void)
{
	char pat[200], name[20001];
	int64_t t0;
	size_t i;

	for (i = 0; i < 99; i++) {
		pat[2 * i] = 'a';
		pat[2 * i + 1] = '*';
	}
	pat[198] = 'b';
	pat[199] = '\0';
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	t0 = gh_mono_ns();
	T_EQ_INT(gh_glob_match(pat, name), 0);
	/* many stars in a row, no match */
	T_EQ_INT(gh_glob_match("*************************************************b", name), 0);
	name[sizeof(name) - 2] = 'b';
	T_EQ_INT(gh_glob_match(pat, name), 1);
	T_ASSERT(gh_mono_ns() - t0 < INT64_C(2000000000));
}

static void test_parse_i64(void)
{
	static const char *const junk[] = {
		"", "abc", "12abc", "12 ", "1.5", "1e3", "0x10", "--1", "-", "+",
		"9223372036854775808", "-9223372036854775809",
		"99999999999999999999999",
	};
	int64_t v = 42;
	size_t i;

	T_EQ_INT(gh_parse_i64("0", 0, 10, &v), 0);
	T_EQ_INT(v, 0);
	T_EQ_INT(gh_parse_i64("10", 0, 10, &v), 0);
	T_EQ_INT(v, 10);
	T_EQ_INT(gh_parse_i64("-5", -5, 5, &v), 0);
	T_EQ_INT(v, -5);
	T_EQ_INT(gh_parse_i64("9223372036854775807", 0, INT64_MAX, &v), 0);
	T_ASSERT(v == INT64_MAX);
	T_EQ_INT(gh_parse_i64("-9223372036854775808", INT64_MIN, 0, &v), 0);
	T_ASSERT(v == INT64_MIN);
	/* bounds are inclusive, one past is refused and *out is untouched */
	v = 42;
	T_EQ_INT(gh_parse_i64("11", 0, 10, &v), -1);
	T_EQ_INT(gh_parse_i64("-1", 0, 10, &v), -1);
	T_EQ_INT(gh_parse_i64("1001", 1, 1000, &v), -1);
	T_EQ_INT(gh_parse_i64("0", 1, 1000, &v), -1);
	T_EQ_INT(v, 42);
	for (i = 0; i < GH_ARRAY_LEN(junk); i++)
		if (gh_parse_i64(junk[i], INT64_MIN, INT64_MAX, &v) != -1)
			T_FAIL("gh_parse_i64(\"%s\") accepted junk", junk[i]);
	T_EQ_INT(gh_parse_i64(NULL, 0, 10, &v), -1);
	T_EQ_INT(v, 42);
}

static void test_parse_time(void)
{
	static const char *const junk[] = {
		"", "yesterday", "2026-11-21", "2026-11-21T10:00", "2026-11-21T10:00:00.Z",
		"2026-11-21T10:00:00+02:00", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-11-00T00:00:00Z", "2026-11-32T00:00:00Z", "2026-11-21T24:00:00Z",
		"2026-11-21T10:60:00Z", "2026-11-21T10:00:00ZZ", "2026-11-21X10:00:00Z",
		"20261121T100000Z", "2026-11-21T10:00:00.123Zjunk", "-5", "12.5", "1e12",
	};
	int64_t ms = 7;
	size_t i;

	/* 2026-11-21T10:00:00Z = 1795255200 s */
	T_EQ_INT(gh_parse_time("2026-11-21T10:00:00Z", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200000));
	T_EQ_INT(gh_parse_time("2026-11-21T10:00:00", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200000));
	T_EQ_INT(gh_parse_time("2026-11-21 10:00:00Z", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200000));
	T_EQ_INT(gh_parse_time("2026-11-21T10:00:00.123Z", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200123));
	T_EQ_INT(gh_parse_time("2026-11-21T10:00:00.5Z", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200500));
	T_EQ_INT(gh_parse_time("2026-11-21T10:00:00.123456Z", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200123));
	T_EQ_INT(gh_parse_time("1970-01-01T00:00:00Z", &ms), 0);
	T_EQ_INT(ms, 0);
	T_EQ_INT(gh_parse_time("2024-02-29T23:59:59.999Z", &ms), 0);
	T_EQ_INT(ms, INT64_C(1709251199999));
	/* Unix milliseconds */
	T_EQ_INT(gh_parse_time("1795255200123", &ms), 0);
	T_EQ_INT(ms, INT64_C(1795255200123));
	T_EQ_INT(gh_parse_time("0", &ms), 0);
	T_EQ_INT(ms, 0);

	ms = 7;
	for (i = 0; i < GH_ARRAY_LEN(junk); i++)
		if (gh_parse_time(junk[i], &ms) != -1)
			T_FAIL("gh_parse_time(\"%s\") accepted junk (ms=%lld)", junk[i],
			       (long long)ms);
	T_EQ_INT(gh_parse_time(NULL, &ms), -1);
	T_EQ_INT(ms, 7);
}

/* A date that does not exist is junk, not silently the next month: an
 * audit query "from=2026-02-30" must not search from March 2nd. */
static void test_parse_time_impossible_dates(void)
{
	static const char *const bad[] = {
		"2026-02-29T00:00:00Z", /* 2026 is not a leap year */
		"2026-02-30T00:00:00Z",
		"2026-02-31T00:00:00Z",
		"2026-04-31T00:00:00Z",
		"2026-06-31T00:00:00Z",
		"2026-09-31T00:00:00Z",
		"2026-11-31T00:00:00Z",
		"2100-02-29T00:00:00Z",
	};
	int64_t ms;
	size_t i;

	T_EQ_INT(gh_parse_time("2000-02-29T00:00:00Z", &ms), 0);
	for (i = 0; i < GH_ARRAY_LEN(bad); i++)
		if (gh_parse_time(bad[i], &ms) != -1)
			T_FAIL("gh_parse_time(\"%s\") accepted a date that does not exist", bad[i]);
}

static void test_iso8601_roundtrip(void)
{
	static const int64_t v[] = {
		0, 1, 999, 1000, INT64_C(1795255200123), INT64_C(1709251199999),
		INT64_C(951782400000), /* 2000-02-29 */
		INT64_C(253402300799999), /* 9999-12-31T23:59:59.999Z */
	};
	char out[GH_ISO8601_MAX];
	int64_t back;
	size_t i;

	gh_iso8601(INT64_C(1795255200123), out, sizeof(out));
	T_EQ_STR(out, "2026-11-21T10:00:00.123Z");
	gh_iso8601(5, out, sizeof(out));
	T_EQ_STR(out, "1970-01-01T00:00:00.005Z");
	for (i = 0; i < GH_ARRAY_LEN(v); i++) {
		gh_iso8601(v[i], out, sizeof(out));
		T_EQ_INT(strlen(out), 24);
		if (gh_parse_time(out, &back) != 0 || back != v[i])
			T_FAIL("%lld -> \"%s\" -> %lld", (long long)v[i], out, (long long)back);
	}
	/* a small buffer gets "" rather than a partial date */
	memset(out, 'x', sizeof(out));
	gh_iso8601(0, out, 24);
	T_EQ_STR(out, "");
}

/* Times before 1970 (gh_parse_time gives them for dates before the
 * epoch) print as dates too, not as garbage milliseconds. */
static void test_iso8601_before_epoch(void)
{
	char out[GH_ISO8601_MAX];
	int64_t ms;

	T_EQ_INT(gh_parse_time("1969-12-31T23:59:59.999Z", &ms), 0);
	T_EQ_INT(ms, -1);
	gh_iso8601(-1, out, sizeof(out));
	T_EQ_STR(out, "1969-12-31T23:59:59.999Z");
	gh_iso8601(-1500, out, sizeof(out));
	T_EQ_STR(out, "1969-12-31T23:59:58.500Z");
}

static void test_hex(void)
{
	static const unsigned char bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
	unsigned char back[6];
	char hex[13];

	gh_hex(bytes, sizeof(bytes), hex);
	T_EQ_STR(hex, "00017f80abff");
	memset(back, 0, sizeof(back));
	T_EQ_INT(gh_unhex(hex, back, sizeof(back)), 0);
	T_ASSERT(!memcmp(back, bytes, sizeof(bytes)));
	T_EQ_INT(gh_unhex("00017F80ABFF", back, sizeof(back)), 0); /* upper case too */
	T_ASSERT(!memcmp(back, bytes, sizeof(bytes)));
	T_EQ_INT(gh_unhex("00017f80abf", back, sizeof(back)), -1);   /* short */
	T_EQ_INT(gh_unhex("00017f80abff00", back, sizeof(back)), -1); /* long */
	T_EQ_INT(gh_unhex("00017f80abfg", back, sizeof(back)), -1);  /* not hex */
	T_EQ_INT(gh_unhex("0x017f80abff", back, sizeof(back)), -1);
	T_EQ_INT(gh_unhex("", back, sizeof(back)), -1);
	T_EQ_INT(gh_unhex("", back, 0), 0);
}

/* Ids a thread makes (each thread draws from a generator of its own). */
struct id_batch {
	char ids[100][GH_ID_MAX];
};

static void *make_ids(void *arg)
{
	struct id_batch *b = arg;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(b->ids); i++)
		gh_id_new_at("t_", 1700000000000, b->ids[i], sizeof(b->ids[i]));
	return NULL;
}

static void test_id_threads(void)
{
	static struct id_batch b[2];
	pthread_t th[2];
	size_t i, j;

	for (i = 0; i < 2; i++)
		T_EQ_INT(pthread_create(&th[i], NULL, make_ids, &b[i]), 0);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < GH_ARRAY_LEN(b[0].ids); i++)
		for (j = 0; j < GH_ARRAY_LEN(b[1].ids); j++)
			if (!strcmp(b[0].ids[i], b[1].ids[j]))
				T_FAIL("two threads made the id %s", b[0].ids[i]);
}

static void test_id_new(void)
{
	static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
	char ids[200][GH_ID_MAX], small[10], a[GH_ID_MAX], b[GH_ID_MAX];
	int64_t now = gh_now_ms(), t = 0;
	size_t i, j;

	for (i = 0; i < GH_ARRAY_LEN(ids); i++) {
		gh_id_new("run_", ids[i], sizeof(ids[i]));
		T_EQ_INT(strlen(ids[i]), 4 + 24);
		T_ASSERT(!strncmp(ids[i], "run_", 4));
		for (j = 4; j < 28; j++)
			if (!strchr(alphabet, ids[i][j]))
				T_FAIL("id %s has '%c' outside the base32 alphabet", ids[i],
				       ids[i][j]);
		for (j = 0; j < i; j++)
			if (!strcmp(ids[i], ids[j]))
				T_FAIL("duplicate id %s", ids[i]);
	}
	/* the random part uses the whole alphabet (a stuck generator would
	 * not: 200 ids give 2,800 random characters) */
	{
		int seen[32] = {0}, kinds = 0;

		for (i = 0; i < GH_ARRAY_LEN(ids); i++)
			for (j = 14; j < 28; j++)
				seen[strchr(alphabet, ids[i][j]) - alphabet] = 1;
		for (j = 0; j < 32; j++)
			kinds += seen[j];
		T_EQ_INT(kinds, 32);
	}
	/* the first ten characters are the time */
	for (j = 4; j < 14; j++)
		t = t * 32 + (strchr(alphabet, ids[0][j]) - alphabet);
	T_ASSERT(t >= now && t <= gh_now_ms());
	/* later ids sort later, whatever their random part */
	for (i = 0; i < 100; i++) {
		gh_id_new_at("thr_", 1700000000000 + (int64_t)i, a, sizeof(a));
		gh_id_new_at("thr_", 1700000000001 + (int64_t)i, b, sizeof(b));
		T_ASSERT(strcmp(a, b) < 0);
	}
	gh_id_new_at("x", 0, a, sizeof(a));
	T_ASSERT(!strncmp(a, "x0000000000", 11));
	/* exactly prefix + 25 fits; one less gets "" */
	gh_id_new("k_", small, 0);
	gh_id_new("", ids[0], 25);
	T_EQ_INT(strlen(ids[0]), 24);
	memset(small, 'x', sizeof(small));
	gh_id_new("key_", small, sizeof(small));
	T_EQ_STR(small, "");
}

static void test_strlcpy(void)
{
	char d[8];

	memset(d, 'x', sizeof(d));
	T_EQ_INT(gh_strlcpy(d, "hello", sizeof(d)), 5);
	T_EQ_STR(d, "hello");
	T_EQ_INT(gh_strlcpy(d, "1234567", sizeof(d)), 7);
	T_EQ_STR(d, "1234567");
	T_EQ_INT(gh_strlcpy(d, "123456789abc", sizeof(d)), 12);
	T_EQ_STR(d, "1234567");
	T_EQ_INT(gh_strlcpy(d, "", sizeof(d)), 0);
	T_EQ_STR(d, "");
	d[0] = 'q';
	T_EQ_INT(gh_strlcpy(d, "abc", 0), 3);
	T_ASSERT(d[0] == 'q'); /* cap 0 writes nothing */
	T_EQ_INT(gh_strlcpy(d, "abc", 1), 3);
	T_EQ_STR(d, "");
}

static void test_clocks_and_strdup(void)
{
	int64_t a = gh_mono_ns(), b = gh_mono_ns(), now = gh_now_ms();
	char *p;

	T_ASSERT(b >= a);
	/* after 2024-01-01 and before 2100 */
	T_ASSERT(now > INT64_C(1704067200000) && now < INT64_C(4102444800000));
	T_ASSERT(gh_strdup(NULL) == NULL);
	p = gh_strdup("x");
	T_EQ_STR(p, "x");
	free(p);
}

static void test_str_in_and_chars_ok(void)
{
	static const char *const list[] = {"alpha", "beta", NULL};
	static const char *const empty[] = {NULL};
	char long_name[66];

	T_EQ_INT(gh_str_in(list, "beta"), 1);
	T_EQ_INT(gh_str_in(list, "bet"), 0);
	T_EQ_INT(gh_str_in(list, ""), 0);
	T_EQ_INT(gh_str_in(empty, "alpha"), 0);

	T_EQ_INT(gh_chars_ok("a-Z_09", 64, "_-"), 1);
	T_EQ_INT(gh_chars_ok("", 64, "_-"), 0);
	T_EQ_INT(gh_chars_ok("a.b", 64, "_-"), 0);
	T_EQ_INT(gh_chars_ok("a.b", 64, "_-."), 1);
	T_EQ_INT(gh_chars_ok("ann@example", 64, "_-.@"), 1);
	T_EQ_INT(gh_chars_ok("a b", 64, "_- "), 1);
	T_EQ_INT(gh_chars_ok("a b", 64, "_-"), 0);
	T_EQ_INT(gh_chars_ok("caf\xc3\xa9", 64, "_-"), 0);
	memset(long_name, 'x', 65);
	long_name[65] = '\0';
	T_EQ_INT(gh_chars_ok(long_name, 64, ""), 0);
	long_name[64] = '\0';
	T_EQ_INT(gh_chars_ok(long_name, 64, ""), 1);
}

/* The size of this process's descriptor table (FDSize), or -1. */
static long fd_table_size(void)
{
	char line[128];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "FDSize:", 7))
			n = strtol(line + 7, NULL, 10);
	if (f)
		fclose(f);
	return n;
}

/* The table grows to hold n descriptors at once and stays that large
 * after; n over the soft limit fails with EINVAL and changes nothing. */
static void test_fd_table_grow(void)
{
	struct rlimit rl;
	int n;

	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	n = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 3000 ? 3000 : (int)rl.rlim_cur;
	/* a process starts with a table as large as its highest descriptor
	 * at exec (64 slots at least): it had room for n already or not */
	T_EQ_INT(gh_fd_table_grow(n), 0);
	T_ASSERT(fd_table_size() >= n);
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)1 << 20) {
		long before = fd_table_size();

		T_EQ_INT(gh_fd_table_grow((int)rl.rlim_cur + 1), -1);
		T_EQ_INT(errno, EINVAL);
		T_EQ_INT(fd_table_size(), before);
	}
}

/* A deadline is the clock's time plus ms, normalised, between the clock
 * read before the call and the one after. */
static void test_deadline(void)
{
	static const int64_t ms[] = {0, 1, 999, 1000, 1001, 123456};
	size_t i;

	for (i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		struct timespec a, d, b;
		int64_t an, dn, bn;

		clock_gettime(CLOCK_MONOTONIC, &a);
		gh_deadline(CLOCK_MONOTONIC, ms[i], &d);
		clock_gettime(CLOCK_MONOTONIC, &b);
		T_ASSERT(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
		an = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec + ms[i] * 1000000;
		dn = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec;
		bn = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec + ms[i] * 1000000;
		T_ASSERT(an <= dn && dn <= bn);
	}
}

T_MAIN(T(test_deadline), T(test_fd_table_grow), T(test_glob_table), T(test_glob_pathological), T(test_parse_i64), T(test_parse_time),
       T(test_parse_time_impossible_dates), T(test_iso8601_roundtrip),
       T(test_iso8601_before_epoch), T(test_hex), T(test_id_new), T(test_id_threads), T(test_strlcpy),
       T(test_clocks_and_strdup), T(test_str_in_and_chars_ok))
