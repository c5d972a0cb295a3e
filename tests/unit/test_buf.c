/*
 * test_buf.c - the bounded buffer: the cap is exact (a buffer may fill to
 * it, one byte more is GH_BUF_TOOBIG and changes nothing), printf grows
 * past the first allocation, JSON string escaping (quotes, backslash,
 * every control character, UTF-8 untouched), consume and detach.
 */
#include "buf.h"

#include <cjson/cJSON.h>

#include "t.h"

static void test_cap_exact(void)
{
	struct gh_buf b;
	char big[100];

	memset(big, 'x', sizeof(big));
	gh_buf_init(&b, 10);
	T_EQ_INT(gh_buf_append(&b, "0123456789", 10), GH_BUF_OK);
	T_EQ_INT(b.len, 10);
	T_EQ_STR(b.data, "0123456789");
	/* one more byte, by every entry point: refused, contents unchanged */
	T_EQ_INT(gh_buf_putc(&b, 'x'), GH_BUF_TOOBIG);
	T_EQ_INT(gh_buf_puts(&b, "y"), GH_BUF_TOOBIG);
	T_EQ_INT(gh_buf_append(&b, "z", 1), GH_BUF_TOOBIG);
	T_EQ_INT(gh_buf_printf(&b, "%d", 7), GH_BUF_TOOBIG);
	T_EQ_INT(b.len, 10);
	T_EQ_STR(b.data, "0123456789");
	/* appending nothing at the cap is fine */
	T_EQ_INT(gh_buf_append(&b, "", 0), GH_BUF_OK);
	T_EQ_INT(b.len, 10);
	gh_buf_free(&b);

	/* a single append larger than the cap on an empty buffer */
	gh_buf_init(&b, 50);
	T_EQ_INT(gh_buf_append(&b, big, sizeof(big)), GH_BUF_TOOBIG);
	T_EQ_INT(b.len, 0);
	T_EQ_INT(gh_buf_append(&b, big, 50), GH_BUF_OK);
	T_EQ_INT(b.len, 50);
	T_ASSERT(b.data[50] == '\0');
	T_ASSERT(b.alloc <= 51); /* never allocates past cap + terminator */
	gh_buf_free(&b);

	/* a huge n must not wrap the size arithmetic */
	gh_buf_init(&b, 16);
	T_EQ_INT(gh_buf_append(&b, "abc", 3), GH_BUF_OK);
	T_EQ_INT(gh_buf_append(&b, big, (size_t)-1), GH_BUF_TOOBIG);
	T_EQ_STR(b.data, "abc");
	gh_buf_free(&b);

	/* cap 0: only the empty string fits */
	gh_buf_init(&b, 0);
	T_EQ_INT(gh_buf_putc(&b, 'a'), GH_BUF_TOOBIG);
	T_EQ_INT(gh_buf_printf(&b, "%s", ""), GH_BUF_OK);
	T_EQ_STR(b.data, "");
	gh_buf_free(&b);
}

static void test_printf_growth(void)
{
	struct gh_buf b;
	size_t i;

	gh_buf_init(&b, 1 << 20);
	/* much more than the first allocation, in steps that cross it */
	for (i = 0; i < 1000; i++)
		T_EQ_INT(gh_buf_printf(&b, "%04zu,", i), GH_BUF_OK);
	T_EQ_INT(b.len, 5000);
	T_ASSERT(!memcmp(b.data, "0000,0001,", 10));
	T_ASSERT(!memcmp(b.data + 4990, "0998,0999,", 10));
	T_ASSERT(b.data[b.len] == '\0');
	gh_buf_free(&b);

	/* printf that would pass the cap is refused whole, not truncated */
	gh_buf_init(&b, 8);
	T_EQ_INT(gh_buf_printf(&b, "%s", "abcd"), GH_BUF_OK);
	T_EQ_INT(gh_buf_printf(&b, "%s", "efghi"), GH_BUF_TOOBIG);
	T_EQ_STR(b.data, "abcd");
	T_EQ_INT(gh_buf_printf(&b, "%s", "efgh"), GH_BUF_OK);
	T_EQ_STR(b.data, "abcdefgh");
	gh_buf_free(&b);
}

/* gh_buf_json_str(s) must parse back (cJSON) to exactly s. */
static int json_roundtrip(const char *s, char **shown)
{
	struct gh_buf b;
	cJSON *v;
	int ok;

	gh_buf_init(&b, 1 << 16);
	if (gh_buf_json_str(&b, s) != GH_BUF_OK)
		return 0;
	v = cJSON_Parse(b.data);
	ok = cJSON_IsString(v) && !strcmp(v->valuestring, s);
	cJSON_Delete(v);
	*shown = gh_buf_detach(&b);
	return ok;
}

static void test_json_str(void)
{
	struct gh_buf b;
	char ctl[40], *shown = NULL;
	int c;

	gh_buf_init(&b, 4096);
	T_EQ_INT(gh_buf_json_str(&b, "a\"b\\c/d"), GH_BUF_OK);
	T_EQ_STR(b.data, "\"a\\\"b\\\\c/d\"");
	gh_buf_reset(&b);
	T_EQ_INT(gh_buf_json_str(&b, "\n\r\t\b\f"), GH_BUF_OK);
	T_EQ_STR(b.data, "\"\\n\\r\\t\\b\\f\"");
	gh_buf_reset(&b);
	T_EQ_INT(gh_buf_json_str(&b, "\x01\x1f" "x\x7f"), GH_BUF_OK);
	T_EQ_STR(b.data, "\"\\u0001\\u001fx\x7f\"");
	gh_buf_reset(&b);
	T_EQ_INT(gh_buf_json_str(&b, ""), GH_BUF_OK);
	T_EQ_STR(b.data, "\"\"");
	gh_buf_reset(&b);
	/* UTF-8 passes through byte for byte */
	T_EQ_INT(gh_buf_json_str(&b, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), GH_BUF_OK);
	T_EQ_STR(b.data, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	/* by length: stops at n, writes a NUL byte as an escape */
	gh_buf_reset(&b);
	T_EQ_INT(gh_buf_json_strn(&b, "a\0\"bcd", 4), GH_BUF_OK);
	T_EQ_STR(b.data, "\"a\\u0000\\\"b\"");
	gh_buf_reset(&b);
	T_EQ_INT(gh_buf_json_strn(&b, "xyz", 0), GH_BUF_OK);
	T_EQ_STR(b.data, "\"\"");
	gh_buf_free(&b);

	/* every control character survives a parse */
	for (c = 1; c < 0x20; c++) {
		ctl[0] = 'a';
		ctl[1] = (char)c;
		ctl[2] = 'b';
		ctl[3] = '\0';
		if (!json_roundtrip(ctl, &shown)) {
			free(shown);
			T_FAIL("control char 0x%02x does not round-trip", c);
		}
		T_ASSERT(!strchr(shown, c)); /* never emitted raw */
		free(shown);
		shown = NULL;
	}
	T_ASSERT(json_roundtrip("\"\\\"\\\\\"", &shown));
	free(shown);
}

/* The escaper as the JSON grammar says it, a byte at a time. */
static void json_ref(const unsigned char *s, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	out[o++] = '"';
	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20) {
			const char *short_form = strchr("\nn\rr\tt\bb\ff", c);

			out[o++] = '\\';
			if (c && short_form) {
				out[o++] = short_form[1];
			} else {
				memcpy(out + o, "u00", 3);
				o += 3;
				out[o++] = hex[c >> 4];
				out[o++] = hex[c & 15];
			}
		} else {
			out[o++] = (char)c;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
}

/* Every byte value, at every place in strings long enough to take the
 * word-at-a-time scan and its tail, escapes as the byte loop does. */
static void test_json_str_every_byte_everywhere(void)
{
	unsigned char s[40];
	char want[40 * 6 + 3];
	struct gh_buf b;
	size_t n, at;
	int c;

	gh_buf_init(&b, 4096);
	for (n = 1; n <= sizeof(s); n++) {
		for (at = 0; at < n; at++) {
			for (c = 0; c < 256; c++) {
				memset(s, 'x', n);
				s[at] = (unsigned char)c;
				if (at + 3 < n)
					s[n - 1] = (unsigned char)(0x80 + at); /* UTF-8-ish tail */
				json_ref(s, n, want);
				gh_buf_reset(&b);
				T_EQ_INT(gh_buf_json_strn(&b, (const char *)s, n), GH_BUF_OK);
				if (strcmp(b.data, want))
					T_FAIL("byte 0x%02x at %zu of %zu: got %s, want %s", c, at, n,
					       b.data, want);
			}
		}
	}
	gh_buf_free(&b);
}

/* printf into room the buffer has, into too little room (formatted
 * again), and past the cap (the buffer as it was). */
static void test_printf_room(void)
{
	struct gh_buf b;

	gh_buf_init(&b, 100);
	T_EQ_INT(gh_buf_puts(&b, "0123456789"), GH_BUF_OK);
	T_EQ_INT(gh_buf_printf(&b, "%d", 42), GH_BUF_OK);
	T_EQ_STR(b.data, "012345678942");
	T_EQ_INT(gh_buf_printf(&b, "%s", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"),
		 GH_BUF_OK);
	T_EQ_STR(b.data, "012345678942abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
	T_EQ_INT((int)b.len, 64);
	T_EQ_INT(gh_buf_printf(&b, "%037d", 1), GH_BUF_TOOBIG);
	T_EQ_STR(b.data, "012345678942abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
	T_EQ_INT(gh_buf_printf(&b, "%036d", 1), GH_BUF_OK);
	T_EQ_INT((int)b.len, 100);
	T_EQ_INT(gh_buf_printf(&b, "%s", ""), GH_BUF_OK);
	T_EQ_INT(gh_buf_printf(&b, "x"), GH_BUF_TOOBIG);
	T_EQ_INT((int)b.len, 100);
	T_EQ_INT((int)strlen(b.data), 100);
	gh_buf_free(&b);
}

static void test_json_str_cap(void)
{
	struct gh_buf b;

	/* "\"ab\\n\"" is 6 bytes */
	gh_buf_init(&b, 6);
	T_EQ_INT(gh_buf_json_str(&b, "ab\n"), GH_BUF_OK);
	T_EQ_STR(b.data, "\"ab\\n\"");
	gh_buf_free(&b);
	gh_buf_init(&b, 5);
	T_EQ_INT(gh_buf_json_str(&b, "ab\n"), GH_BUF_TOOBIG);
	gh_buf_free(&b);
}

static void test_consume(void)
{
	struct gh_buf b;

	gh_buf_init(&b, 64);
	T_EQ_INT(gh_buf_puts(&b, "line one\nline two\n"), GH_BUF_OK);
	gh_buf_consume(&b, 9);
	T_EQ_STR(b.data, "line two\n");
	T_EQ_INT(b.len, 9);
	/* room freed by consume is usable up to the cap again */
	T_EQ_INT(gh_buf_append(&b, "0123456789012345678901234567890123456789012345678901234", 55),
		 GH_BUF_OK);
	T_EQ_INT(b.len, 64);
	T_EQ_INT(gh_buf_putc(&b, 'x'), GH_BUF_TOOBIG);
	gh_buf_consume(&b, 64);
	T_EQ_INT(b.len, 0);
	T_EQ_STR(b.data, "");
	gh_buf_consume(&b, 0);
	T_EQ_INT(b.len, 0);
	gh_buf_free(&b);

	/* consume and reset on a never-written buffer */
	gh_buf_init(&b, 8);
	gh_buf_consume(&b, 0);
	gh_buf_reset(&b);
	T_EQ_INT(b.len, 0);
	gh_buf_free(&b);
	gh_buf_free(&b); /* twice: no-op */
	gh_buf_free(NULL);
}

static void test_detach(void)
{
	struct gh_buf b;
	char *p;

	gh_buf_init(&b, 64);
	p = gh_buf_detach(&b);
	T_ASSERT(p != NULL);
	T_EQ_STR(p, "");
	free(p);

	T_EQ_INT(gh_buf_puts(&b, "hello"), GH_BUF_OK);
	p = gh_buf_detach(&b);
	T_EQ_STR(p, "hello");
	T_ASSERT(b.data == NULL && b.len == 0 && b.alloc == 0);
	T_EQ_INT(b.cap, 64);
	/* the buffer is usable again, independent of the detached string */
	T_EQ_INT(gh_buf_puts(&b, "again"), GH_BUF_OK);
	T_EQ_STR(b.data, "again");
	T_EQ_STR(p, "hello");
	free(p);
	gh_buf_free(&b);
}

/* gh_buf_json_plain_end finds the first byte to escape by words, taking
 * the lowest byte a word marks: every byte value at every place of three
 * words, with each byte that could make a borrow (or be marked by one)
 * right after it, against a byte-by-byte scan. */
static void test_plain_end_first_byte(void)
{
	static const unsigned char next[] = {0x00, 0x01, 0x1f, 0x20, 0x21, '"', '"' + 1, '\\',
					     '\\' + 1, 0x7f, 0x80, 0xff, 'a'};
	unsigned char buf[24];
	size_t i, k;
	int b;

	for (i = 0; i < sizeof(buf); i++)
		for (b = 0; b < 256; b++)
			for (k = 0; k < sizeof(next); k++) {
				const unsigned char *want = buf, *got;

				memset(buf, 'a', sizeof(buf));
				buf[i] = (unsigned char)b;
				if (i + 1 < sizeof(buf))
					buf[i + 1] = next[k];
				while (want < buf + sizeof(buf) && *want >= 0x20 && *want != '"' &&
				       *want != '\\')
					want++;
				got = (const unsigned char *)gh_buf_json_plain_end(
					(const char *)buf, (const char *)buf + sizeof(buf));
				if (got != want)
					T_FAIL("byte 0x%02x at %zu, 0x%02x after it: %td, expected %td", b,
					       i, next[k], got - buf, want - buf);
			}
}

T_MAIN(T(test_cap_exact), T(test_plain_end_first_byte), T(test_printf_growth), T(test_json_str), T(test_json_str_cap), T(test_json_str_every_byte_everywhere),
       T(test_printf_room),
       T(test_consume), T(test_detach))
