/*
 * t.h - the unit test harness: one executable per src/ module
 * (tests/unit/test_<module>.c), each a list of test functions.
 *
 *   static void test_grows(void) { T_EQ_INT(f(1), 2); }
 *   T_MAIN(T(test_grows), T(test_other))
 *
 * A failed check prints file:line and the values, marks the test failed
 * and returns from it; main() exits 1 when any test failed. Run one test
 * with: ./test_x name
 *
 * SIGPIPE is ignored as `gatehouse serve` ignores it: a peer that went
 * away mid-write (an MCP child killed between calls) is an EPIPE the
 * module under test handles, never the end of the test process.
 */
#ifndef GH_T_H
#define GH_T_H

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct t_case {
	const char *name;
	void (*fn)(void);
};

static int t_failed;

#define T_FAIL(...)                                                      \
	do {                                                             \
		fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);       \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
		t_failed = 1;                                            \
		return;                                                  \
	} while (0)

#define T_ASSERT(c)                                                      \
	do {                                                             \
		if (!(c))                                                \
			T_FAIL("assertion failed: %s", #c);              \
	} while (0)

#define T_EQ_INT(a, b)                                                   \
	do {                                                             \
		long long t_a = (long long)(a), t_b = (long long)(b);    \
		if (t_a != t_b)                                          \
			T_FAIL("%s == %lld, expected %s == %lld", #a, t_a, #b, t_b); \
	} while (0)

#define T_EQ_STR(a, b)                                                   \
	do {                                                             \
		const char *t_a = (a), *t_b = (b);                       \
		if (!t_a || !t_b || strcmp(t_a, t_b) != 0)               \
			T_FAIL("%s == \"%s\", expected \"%s\"", #a,      \
			       t_a ? t_a : "(null)", t_b ? t_b : "(null)"); \
	} while (0)

#define T_CONTAINS(hay, needle)                                          \
	do {                                                             \
		const char *t_h = (hay), *t_n = (needle);                \
		if (!t_h || !strstr(t_h, t_n))                          \
			T_FAIL("%s == \"%s\" does not contain \"%s\"", #hay, \
			       t_h ? t_h : "(null)", t_n);               \
	} while (0)

#define T(fn) {#fn, fn}

#define T_MAIN(...)                                                      \
	int main(int argc, char **argv)                                  \
	{                                                                \
		static const struct t_case cases[] = {__VA_ARGS__};      \
		size_t i, n = sizeof(cases) / sizeof(cases[0]);          \
		int failures = 0, ran = 0;                               \
		signal(SIGPIPE, SIG_IGN);                                \
		for (i = 0; i < n; i++) {                                \
			if (argc > 1 && strcmp(argv[1], cases[i].name))  \
				continue;                                \
			t_failed = 0;                                    \
			cases[i].fn();                                   \
			ran++;                                           \
			printf("%s %s\n", t_failed ? "FAIL" : "ok  ", cases[i].name); \
			failures += t_failed;                            \
		}                                                        \
		printf("%d/%d passed\n", ran - failures, ran);          \
		return failures || ran == 0 ? 1 : 0;                     \
	}

#endif
