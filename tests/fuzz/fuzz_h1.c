/*
 * fuzz_h1.c - the HTTP/1.x response parser of gatehouse's built-in
 * upstream client, fed the way reads deliver bytes: in pieces of any size.
 *
 * The input is the response; its first bytes also pick the piece sizes
 * (peeked, not consumed, so corpus files stay plain responses). Checks:
 *   - every head line ends with LF and fits GH_H1_LINE_MAX, the body never
 *     holds more bytes than were fed, and a finished parser takes nothing
 *     more;
 *   - fed whole or in pieces, the head lines, body bytes, result, status,
 *     keep-alive verdict and the bytes left over are identical;
 *   - a callback that stops the parser stops it (GH_H1_STOP) and the
 *     parser then takes nothing more.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "h1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	uint64_t hash;     /* of every head line and body piece, in order */
	size_t body;       /* body bytes */
	size_t lines;
	size_t calls;      /* callbacks so far */
	size_t stop_at;    /* stop at this callback; 0 = never */
};

static void mix(struct seen *s, const char *tag, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	s->hash ^= (unsigned char)tag[0];
	s->hash *= 0x100000001b3ull;
	for (i = 0; i < n; i++) {
		s->hash ^= b[i];
		s->hash *= 0x100000001b3ull;
	}
}

static int on_header(void *ud, const char *line, size_t n)
{
	struct seen *s = ud;

	CHECK(n > 0 && n <= GH_H1_LINE_MAX && line[n - 1] == '\n');
	mix(s, "H", line, n);
	s->lines++;
	return s->stop_at && ++s->calls == s->stop_at;
}

/* Body pieces are hashed as one stream: how reads cut them is not part of
 * the result. */
static int on_body(void *ud, const char *p, size_t n)
{
	struct seen *s = ud;
	size_t i;

	CHECK(n > 0);
	for (i = 0; i < n; i++) {
		s->hash ^= (unsigned char)p[i];
		s->hash *= 0x100000001b3ull;
	}
	s->body += n;
	return s->stop_at && ++s->calls == s->stop_at;
}

struct result {
	struct seen s;
	int rc;
	int status;
	int keep_alive;
	size_t used;   /* bytes taken before the parser ended */
};

/* Parses data in pieces whose sizes come from sizes[] (cycled; 0: whole). */
static void run(const uint8_t *data, size_t size, const uint8_t *sizes, size_t nsizes,
		size_t stop_at, struct result *out)
{
	const struct gh_h1_cb cb = {on_header, on_body, &out->s};
	struct gh_h1 p;
	size_t off = 0, k = 0;

	memset(out, 0, sizeof(*out));
	out->s.stop_at = stop_at;
	gh_h1_init(&p, 0);
	out->rc = GH_H1_MORE;
	while (off < size && out->rc == GH_H1_MORE) {
		size_t n = nsizes ? (size_t)sizes[k++ % nsizes] % 64 + 1 : size - off, used = 0;

		if (n > size - off)
			n = size - off;
		out->rc = gh_h1_feed(&p, (const char *)data + off, n, &used, &cb);
		CHECK(used <= n);
		CHECK(out->rc == GH_H1_MORE ? used == n : 1);
		off += used;
	}
	out->used = off;
	if (out->rc == GH_H1_MORE)
		out->rc = gh_h1_eof(&p);
	CHECK(out->rc != GH_H1_ERROR || p.err);
	CHECK(out->s.body <= size);
	if (out->rc != GH_H1_MORE) {
		/* ended: it takes nothing more */
		size_t used = 1;

		CHECK(gh_h1_feed(&p, "x", 1, &used, &cb) != GH_H1_MORE && used == 0);
	}
	out->status = p.status;
	out->keep_alive = p.keep_alive;
	gh_h1_free(&p);
}

static int same(const struct result *a, const struct result *b)
{
	return a->rc == b->rc && a->s.hash == b->s.hash && a->s.body == b->s.body &&
	       a->s.lines == b->s.lines && a->status == b->status &&
	       a->keep_alive == b->keep_alive && a->used == b->used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, pieces, stopped;
	size_t nsizes = size < 8 ? size : 8;

	run(data, size, NULL, 0, 0, &whole);
	run(data, size, data, nsizes, 0, &pieces);
	CHECK(same(&whole, &pieces));
	run(data, size, NULL, 0, 1 + (size ? data[0] % 4 : 0), &stopped);
	if (stopped.s.calls == stopped.s.stop_at)
		CHECK(stopped.rc == GH_H1_STOP);
	return 0;
}
