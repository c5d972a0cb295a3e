/*
 * sse.c - Server-Sent Events parser and writer; see sse.h for the contract.
 *
 * The parser keeps only what the rules need between chunks: the partial
 * line, the data and event type of the event being built, the last event
 * id, and two bits of framing state (how much of a leading BOM was seen,
 * and whether the previous chunk ended on a CR whose LF may follow).
 * Each chunk is scanned once for line ends; a complete line is handed to
 * field() and forgotten, so nothing held is rescanned when more arrives.
 * One parser per stream, one thread.
 */
#include "sse.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
static const char replacement[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */

struct gh_sse_parser {
	size_t max_line;
	size_t max_event;
	struct gh_buf line;   /* the line read so far, cap max_line */
	struct gh_buf data;   /* data buffer: each value + "\n", cap max_event + 1 */
	struct gh_buf type;   /* event type buffer */
	struct gh_buf id;     /* last event id buffer; outlives dispatch */
	long retry_ms;        /* valid retry: of the event being built, or -1 */
	unsigned bom_seen;    /* BOM bytes matched at the stream start */
	int started;          /* past the BOM check */
	int after_cr;         /* last byte was CR: skip one LF that follows */
	int in_event;         /* a field line since the last blank line */
	int failed;           /* sticky result of a failed or stopped feed */
};

/* a + b, or SIZE_MAX when that overflows */
static size_t sat_add(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t sat_mul3(size_t a)
{
	return a > SIZE_MAX / 3 ? SIZE_MAX : a * 3;
}

static void reset(struct gh_sse_parser *p)
{
	gh_buf_reset(&p->line);
	gh_buf_reset(&p->data);
	gh_buf_reset(&p->type);
	gh_buf_reset(&p->id);
	p->retry_ms = -1;
	p->bom_seen = 0;
	p->started = 0;
	p->after_cr = 0;
	p->in_event = 0;
	p->failed = GH_SSE_OK;
}

struct gh_sse_parser *gh_sse_new(size_t max_line, size_t max_event)
{
	struct gh_sse_parser *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->max_line = max_line;
	p->max_event = max_event;
	gh_buf_init(&p->line, max_line);
	/* the data buffer holds the final "\n" that dispatch removes */
	gh_buf_init(&p->data, sat_add(max_event, 1));
	/* values fit in a line, but a NUL grows to three bytes of U+FFFD */
	gh_buf_init(&p->type, sat_mul3(max_line));
	gh_buf_init(&p->id, max_line);
	reset(p);
	return p;
}

void gh_sse_free(struct gh_sse_parser *p)
{
	if (!p)
		return;
	gh_buf_free(&p->line);
	gh_buf_free(&p->data);
	gh_buf_free(&p->type);
	gh_buf_free(&p->id);
	free(p);
}

static int buf_rc(int rc)
{
	if (rc == GH_BUF_OK)
		return GH_SSE_OK;
	return rc == GH_BUF_TOOBIG ? GH_SSE_TOOBIG : GH_SSE_NOMEM;
}

/* Appends s with each NUL byte written as U+FFFD. */
static int append_clean(struct gh_buf *b, const char *s, size_t n)
{
	const char *nul;
	int rc;

	while ((nul = memchr(s, '\0', n)) != NULL) {
		size_t k = (size_t)(nul - s);

		if ((rc = gh_buf_append(b, s, k)) != GH_BUF_OK ||
		    (rc = gh_buf_append(b, replacement, sizeof(replacement))) != GH_BUF_OK)
			return rc;
		s += k + 1;
		n -= k + 1;
	}
	return gh_buf_append(b, s, n);
}

static int is_field(const char *name, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(name, want, n) == 0;
}

/* "retry": only ASCII digits (at least one) count; large values saturate. */
static long parse_retry(const char *s, size_t n)
{
	long v = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		int d;

		if (s[i] < '0' || s[i] > '9')
			return -1;
		d = s[i] - '0';
		v = v > (LONG_MAX - d) / 10 ? LONG_MAX : v * 10 + d;
	}
	return v;
}

/* An empty line: dispatch the event being built, if it has data. */
static int dispatch(struct gh_sse_parser *p, gh_sse_event_fn on_event, void *ud)
{
	struct gh_sse_event ev;
	int rc = GH_SSE_OK;

	if (p->data.len > 0) {
		/* drop the "\n" the last data line added */
		p->data.len--;
		p->data.data[p->data.len] = '\0';
		ev.type = p->type.len ? p->type.data : "message";
		ev.data = p->data.data;
		ev.data_len = p->data.len;
		ev.id = p->id.len ? p->id.data : "";
		ev.retry_ms = p->retry_ms;
		if (on_event)
			rc = on_event(ud, &ev);
	}
	gh_buf_reset(&p->data);
	gh_buf_reset(&p->type);
	p->retry_ms = -1;
	p->in_event = 0;
	return rc;
}

/* One complete line, terminator removed. */
static int field(struct gh_sse_parser *p, const char *s, size_t n, gh_sse_event_fn on_event,
		 gh_sse_comment_fn on_comment, void *ud)
{
	const char *colon, *value;
	size_t nlen, vlen;
	int rc;

	if (n == 0)
		return dispatch(p, on_event, ud);
	if (s[0] == ':') {
		if (!on_comment)
			return GH_SSE_OK;
		s++;
		n--;
		if (n && s[0] == ' ') {
			s++;
			n--;
		}
		return on_comment(ud, s, n);
	}
	colon = memchr(s, ':', n);
	if (colon) {
		nlen = (size_t)(colon - s);
		value = colon + 1;
		vlen = n - nlen - 1;
		if (vlen && value[0] == ' ') {
			value++;
			vlen--;
		}
	} else {
		nlen = n;
		value = "";
		vlen = 0;
	}
	p->in_event = 1;
	if (is_field(s, nlen, "data")) {
		rc = append_clean(&p->data, value, vlen);
		if (rc == GH_BUF_OK)
			rc = gh_buf_putc(&p->data, '\n');
		return buf_rc(rc);
	}
	if (is_field(s, nlen, "event")) {
		gh_buf_reset(&p->type);
		return buf_rc(append_clean(&p->type, value, vlen));
	}
	if (is_field(s, nlen, "id")) {
		if (memchr(value, '\0', vlen))
			return GH_SSE_OK;
		gh_buf_reset(&p->id);
		return buf_rc(gh_buf_append(&p->id, value, vlen));
	}
	if (is_field(s, nlen, "retry")) {
		long v = parse_retry(value, vlen);

		if (v >= 0)
			p->retry_ms = v;
		return GH_SSE_OK;
	}
	return GH_SSE_OK; /* other fields are ignored */
}

/* Consumes the leading BOM, or hands back the bytes that only looked like
 * its start. Returns how many bytes of s it used. */
static size_t skip_bom(struct gh_sse_parser *p, const char *s, size_t n, int *rc)
{
	size_t i = 0;

	*rc = GH_SSE_OK;
	while (i < n && p->bom_seen < sizeof(bom)) {
		if ((unsigned char)s[i] != bom[p->bom_seen]) {
			/* not a BOM: its matched bytes start the first line */
			*rc = buf_rc(gh_buf_append(&p->line, bom, p->bom_seen));
			p->started = 1;
			return i;
		}
		p->bom_seen++;
		i++;
	}
	if (p->bom_seen == sizeof(bom))
		p->started = 1;
	return i;
}

int gh_sse_feed(struct gh_sse_parser *p, const char *chunk, size_t n,
		gh_sse_event_fn on_event, gh_sse_comment_fn on_comment, void *ud)
{
	const char *s = chunk, *end, *eol;
	int rc = GH_SSE_OK;

	if (p->failed)
		return p->failed;
	if (n == 0)
		return GH_SSE_OK;
	end = chunk + n;
	if (!p->started) {
		s += skip_bom(p, s, n, &rc);
		if (rc != GH_SSE_OK)
			goto out;
	}
	while (s < end) {
		if (p->after_cr) {
			p->after_cr = 0;
			if (*s == '\n') {
				s++;
				continue;
			}
		}
		for (eol = s; eol < end && *eol != '\n' && *eol != '\r'; eol++)
			;
		rc = buf_rc(gh_buf_append(&p->line, s, (size_t)(eol - s)));
		if (rc != GH_SSE_OK || eol == end)
			break;
		p->after_cr = *eol == '\r';
		s = eol + 1;
		rc = field(p, p->line.data ? p->line.data : "", p->line.len, on_event, on_comment,
			   ud);
		gh_buf_reset(&p->line);
		if (rc != GH_SSE_OK)
			break;
	}
out:
	p->failed = rc;
	return rc;
}

int gh_sse_finish(struct gh_sse_parser *p)
{
	int truncated = p->failed != GH_SSE_OK || p->line.len > 0 || p->in_event ||
			(!p->started && p->bom_seen > 0 && p->bom_seen < sizeof(bom));

	reset(p);
	return truncated ? 1 : 0;
}

int gh_sse_write(struct gh_buf *b, const char *type, const char *payload, size_t len)
{
	size_t start = b->len, i = 0;
	int rc = GH_BUF_OK;

	if (type) {
		if (strpbrk(type, "\r\n"))
			return GH_BUF_TOOBIG;
		if ((rc = gh_buf_puts(b, "event: ")) != GH_BUF_OK ||
		    (rc = gh_buf_puts(b, type)) != GH_BUF_OK ||
		    (rc = gh_buf_putc(b, '\n')) != GH_BUF_OK)
			goto out;
	}
	for (;;) {
		size_t j = i;

		while (j < len && payload[j] != '\n' && payload[j] != '\r')
			j++;
		if ((rc = gh_buf_puts(b, "data: ")) != GH_BUF_OK ||
		    (j > i && (rc = gh_buf_append(b, payload + i, j - i)) != GH_BUF_OK) ||
		    (rc = gh_buf_putc(b, '\n')) != GH_BUF_OK)
			goto out;
		if (j == len)
			break;
		/* CRLF is one line end */
		i = j + 1;
		if (payload[j] == '\r' && i < len && payload[i] == '\n')
			i++;
	}
	rc = gh_buf_putc(b, '\n');
out:
	if (rc != GH_BUF_OK && b->data) {
		b->len = start;
		b->data[start] = '\0';
	}
	return rc;
}
