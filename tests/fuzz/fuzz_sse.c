/*
 * fuzz_sse.c - the SSE parser gatehouse reads upstream streams with, fed
 * the way libcurl would: in chunks of any size.
 *
 * The input is the stream; its first bytes also pick the chunk sizes
 * (peeked, not consumed, so corpus files stay plain event streams). Checks:
 *   - every event's data is a C string of data_len <= max_event bytes,
 *     type is non-empty, id is a C string, retry_ms >= -1, and every
 *     comment fits in max_line;
 *   - fed whole or in chunks, the events, comments, result and truncation
 *     verdict are identical (with roomy and with tight bounds);
 *   - gh_sse_write() of the input as a payload parses back to one event
 *     carrying the input (line ends as LF, NUL as U+FFFD).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "buf.h"
#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t max_line;
	size_t max_event;
	uint64_t hash;   /* of every event and comment, in order */
	size_t events;
	size_t comments;
	int stop_at;     /* stop with 5 at this event; 0 = never */
	struct gh_buf last; /* the last event's data */
};

static void mix(struct seen *s, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		s->hash ^= b[i];
		s->hash *= 0x100000001b3ull;
	}
}

static int on_event(void *ud, const struct gh_sse_event *ev)
{
	struct seen *s = ud;

	CHECK(ev->type && ev->data && ev->id);
	CHECK(ev->type[0] != '\0');
	CHECK(strlen(ev->data) == ev->data_len);
	CHECK(ev->data_len <= s->max_event);
	CHECK(strlen(ev->id) <= s->max_line);
	CHECK(ev->retry_ms >= -1);
	mix(s, "E", 1);
	mix(s, ev->type, strlen(ev->type) + 1);
	mix(s, ev->id, strlen(ev->id) + 1);
	mix(s, &ev->retry_ms, sizeof(ev->retry_ms));
	mix(s, ev->data, ev->data_len + 1);
	gh_buf_reset(&s->last);
	CHECK(gh_buf_append(&s->last, ev->data, ev->data_len) == GH_BUF_OK);
	s->events++;
	return s->stop_at && s->events == (size_t)s->stop_at ? 5 : 0;
}

static int on_comment(void *ud, const char *text, size_t len)
{
	struct seen *s = ud;

	CHECK(text && text[len] == '\0');
	CHECK(len < s->max_line);
	mix(s, "C", 1);
	mix(s, text, len);
	s->comments++;
	return 0;
}

struct outcome {
	uint64_t hash;
	size_t events, comments;
	int rc, finished;
};

/* Feeds the stream in chunks sized from its first bytes (chunked != 0) or
 * whole, then finishes. */
static struct outcome run(const uint8_t *in, size_t n, int chunked, size_t max_line,
			  size_t max_event, int stop_at)
{
	struct gh_sse_parser *p = gh_sse_new(max_line, max_event);
	struct seen s;
	struct outcome o;
	size_t off = 0, k = 0, npick = n < 8 ? n : 8;

	CHECK(p);
	memset(&s, 0, sizeof(s));
	s.max_line = max_line;
	s.max_event = max_event;
	s.hash = 0xcbf29ce484222325ull;
	s.stop_at = stop_at;
	gh_buf_init(&s.last, max_event);
	o.rc = GH_SSE_OK;
	if (!chunked) {
		o.rc = gh_sse_feed(p, (const char *)in, n, on_event, on_comment, &s);
	} else {
		while (off < n) {
			unsigned b = in[k++ % npick];
			size_t len = (b & 0x80) ? 1 + (size_t)(b & 0x7f) * 64 : 1 + b % 16;
			int rc;

			if (len > n - off)
				len = n - off;
			rc = gh_sse_feed(p, (const char *)in + off, len, on_event, on_comment, &s);
			/* once failed, the parser stays failed with the same code */
			CHECK(o.rc == GH_SSE_OK || rc == o.rc);
			o.rc = rc;
			off += len;
		}
	}
	o.finished = gh_sse_finish(p);
	CHECK(o.finished == 0 || o.finished == 1);
	CHECK(o.rc == GH_SSE_OK || o.finished == 1);
	o.hash = s.hash;
	o.events = s.events;
	o.comments = s.comments;
	gh_buf_free(&s.last);
	gh_sse_free(p);
	return o;
}

static void same(struct outcome a, struct outcome b)
{
	CHECK(a.hash == b.hash);
	CHECK(a.events == b.events);
	CHECK(a.comments == b.comments);
	CHECK(a.rc == b.rc);
	CHECK(a.finished == b.finished);
}

/* The writer: the input as one payload comes back as one event. */
static void round_trip(const uint8_t *in, size_t n)
{
	struct gh_sse_parser *p = gh_sse_new(n + 16, 3 * n + 16);
	struct gh_buf out, want;
	struct seen s;
	size_t i;

	CHECK(p);
	gh_buf_init(&out, 7 * n + 64); /* a lone line end becomes "data: \n" */
	gh_buf_init(&want, 3 * n + 16);
	for (i = 0; i < n; i++) {
		if (in[i] == '\r' || in[i] == '\n') {
			CHECK(gh_buf_putc(&want, '\n') == GH_BUF_OK);
			if (in[i] == '\r' && i + 1 < n && in[i + 1] == '\n')
				i++;
		} else if (in[i] == '\0') {
			CHECK(gh_buf_append(&want, "\xEF\xBF\xBD", 3) == GH_BUF_OK);
		} else {
			CHECK(gh_buf_putc(&want, (char)in[i]) == GH_BUF_OK);
		}
	}
	memset(&s, 0, sizeof(s));
	s.max_line = n + 16;
	s.max_event = 3 * n + 16;
	gh_buf_init(&s.last, s.max_event);
	CHECK(gh_sse_write(&out, n % 2 ? "delta" : NULL, (const char *)in, n) == GH_BUF_OK);
	CHECK(gh_sse_feed(p, out.data, out.len, on_event, on_comment, &s) == GH_SSE_OK);
	CHECK(gh_sse_finish(p) == 0);
	CHECK(s.events == 1 && s.comments == 0);
	CHECK(s.last.len == want.len);
	CHECK(want.len == 0 || memcmp(s.last.data, want.data, want.len) == 0);
	gh_buf_free(&s.last);
	gh_buf_free(&out);
	gh_buf_free(&want);
	gh_sse_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int stop_at = size ? data[size - 1] % 8 : 0;

	/* roomy bounds: what real upstream streams need */
	same(run(data, size, 0, 1 << 16, 1 << 18, 0), run(data, size, 1, 1 << 16, 1 << 18, 0));
	/* tight bounds: long lines and big events fail, identically */
	same(run(data, size, 0, 40, 100, stop_at), run(data, size, 1, 40, 100, stop_at));
	round_trip(data, size);
	return 0;
}
