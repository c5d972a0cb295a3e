/*
 * h1.c - an incremental HTTP/1.x response parser; see h1.h for the
 * contract.
 *
 * Lines (the head's, a chunk's size and its end, the trailers') are found
 * with memchr in what a read returned and handed on in place; only a line
 * that a read cut in two is copied, into p->line, until its end arrives.
 * Body bytes are handed on in place.
 */
#include "h1.h"

#include <string.h>
#include <strings.h>

enum {
	S_STATUS,     /* the status line of a head */
	S_HEADER,     /* the head's header lines */
	S_BODY_LEN,   /* left bytes of a Content-Length body */
	S_BODY_EOF,   /* a body up to the end of the connection */
	S_CHUNK_SIZE, /* a chunk's size line */
	S_CHUNK_DATA, /* left bytes of a chunk */
	S_CHUNK_END,  /* the line end after a chunk's data */
	S_TRAILER,    /* trailer lines, up to an empty one */
	S_DONE,
	S_ERROR,
	S_STOPPED,    /* a callback stopped it */
};

/* What a head's lines said (head_flags). */
#define F_CLOSE 1      /* Connection: close */
#define F_KEEP 2       /* Connection: keep-alive (an HTTP/1.0 reply) */
#define F_MINOR1 4     /* HTTP/1.1 */

void gh_h1_init(struct gh_h1 *p, int head_only)
{
	memset(p, 0, sizeof(*p));
	p->state = S_STATUS;
	p->head_only = head_only;
	p->clen = -1;
	gh_buf_init(&p->line, GH_H1_LINE_MAX);
}

void gh_h1_free(struct gh_h1 *p)
{
	if (p)
		gh_buf_free(&p->line);
}

int gh_h1_head_done(const struct gh_h1 *p)
{
	return p->status != 0;
}

static enum gh_h1_rc fail(struct gh_h1 *p, const char *why)
{
	p->state = S_ERROR;
	p->err = why;
	return GH_H1_ERROR;
}

/* The length of a line's content: without its LF and a CR before it. */
static size_t content_len(const char *s, size_t n)
{
	if (n && s[n - 1] == '\n')
		n--;
	if (n && s[n - 1] == '\r')
		n--;
	return n;
}

static int is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* s[0..n) without the blanks around it, in *a and *b (a <= b). */
static void trim(const char *s, size_t n, size_t *a, size_t *b)
{
	*a = 0;
	*b = n;
	while (*a < *b && is_ows(s[*a]))
		(*a)++;
	while (*b > *a && is_ows(s[*b - 1]))
		(*b)--;
}

/* 1 when the comma-separated list v[0..n) holds token tok (any case). */
static int has_token(const char *v, size_t n, const char *tok)
{
	size_t tl = strlen(tok), i = 0;

	while (i < n) {
		size_t j = i, a, b;

		while (j < n && v[j] != ',')
			j++;
		trim(v + i, j - i, &a, &b);
		if (b - a == tl && !strncasecmp(v + i + a, tok, tl))
			return 1;
		i = j + 1;
	}
	return 0;
}

/* The last comma-separated token of v[0..n) is tok (any case). */
static int last_token_is(const char *v, size_t n, const char *tok)
{
	size_t i = n, a, b, tl = strlen(tok);

	while (i > 0 && v[i - 1] != ',')
		i--;
	trim(v + i, n - i, &a, &b);
	return b - a == tl && !strncasecmp(v + i + a, tok, tl);
}

static int name_is(const char *s, size_t n, const char *name)
{
	size_t l = strlen(name);

	return n == l && !strncasecmp(s, name, l);
}

/* A status line: "HTTP/1.x NNN" and an optional reason. */
static enum gh_h1_rc status_line(struct gh_h1 *p, const char *s, size_t n, int *flags,
				 int *code)
{
	if (n < 12 || memcmp(s, "HTTP/1.", 7) || (s[7] != '0' && s[7] != '1') || s[8] != ' ' ||
	    s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' ||
	    s[11] > '9' || (n > 12 && s[12] != ' '))
		return fail(p, "not an HTTP/1.x response");
	*flags = s[7] == '1' ? F_MINOR1 : 0;
	*code = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	return GH_H1_MORE;
}

/* A header line's part in framing the body (Content-Length,
 * Transfer-Encoding, Connection); others only go to the callback. */
static enum gh_h1_rc header_line(struct gh_h1 *p, const char *s, size_t n, int *flags)
{
	const char *colon = memchr(s, ':', n);
	size_t nl, a, b, i;
	const char *v;

	if (!colon || colon == s || is_ows(s[0]))
		return GH_H1_MORE; /* not a field this parser reads */
	nl = (size_t)(colon - s);
	v = colon + 1;
	trim(v, n - nl - 1, &a, &b);
	v += a;
	n = b - a;
	if (name_is(s, nl, "content-length")) {
		int64_t len = 0;

		if (n == 0 || n > 18)
			return fail(p, "bad Content-Length");
		for (i = 0; i < n; i++) {
			if (v[i] < '0' || v[i] > '9')
				return fail(p, "bad Content-Length");
			len = len * 10 + (v[i] - '0');
		}
		if (p->clen >= 0 && p->clen != len)
			return fail(p, "conflicting Content-Length");
		p->clen = len;
	} else if (name_is(s, nl, "transfer-encoding")) {
		if (!last_token_is(v, n, "chunked"))
			return fail(p, "unsupported Transfer-Encoding");
		p->chunked = 1;
	} else if (name_is(s, nl, "connection")) {
		if (has_token(v, n, "close"))
			*flags |= F_CLOSE;
		if (has_token(v, n, "keep-alive"))
			*flags |= F_KEEP;
	}
	return GH_H1_MORE;
}

/* The empty line that ends a head: what follows it. */
static enum gh_h1_rc head_end(struct gh_h1 *p, int flags, int code)
{
	if (code < 200) {
		if (code == 101)
			return fail(p, "the server switched protocols");
		/* an interim head: the response proper comes next */
		p->state = S_STATUS;
		p->clen = -1;
		p->chunked = 0;
		return GH_H1_MORE;
	}
	p->status = code;
	p->keep_alive = (flags & F_CLOSE) ? 0 : (flags & F_MINOR1) ? 1 : !!(flags & F_KEEP);
	if (p->head_only || code == 204 || code == 304) {
		p->state = S_DONE;
		return GH_H1_DONE;
	}
	if (p->chunked) {
		/* chunked wins over a Content-Length, and the mix is suspect:
		 * the connection ends with this response */
		if (p->clen >= 0)
			p->keep_alive = 0;
		p->state = S_CHUNK_SIZE;
		return GH_H1_MORE;
	}
	if (p->clen >= 0) {
		p->left = (uint64_t)p->clen;
		p->state = p->left ? S_BODY_LEN : S_DONE;
		return p->left ? GH_H1_MORE : GH_H1_DONE;
	}
	p->keep_alive = 0;
	p->state = S_BODY_EOF;
	return GH_H1_MORE;
}

/* A chunk's size line: hex digits, then blanks or ";extensions". */
static enum gh_h1_rc chunk_size(struct gh_h1 *p, const char *s, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		int d = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
			: s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
			: s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
						     : -1;

		if (d < 0)
			break;
		if (i >= 15)
			return fail(p, "chunk size too large");
		v = v * 16 + (uint64_t)d;
	}
	if (i == 0 || (i < n && !is_ows(s[i]) && s[i] != ';'))
		return fail(p, "bad chunk size");
	if (v == 0) {
		p->state = S_TRAILER;
		p->head_bytes = 0;
	} else {
		p->left = v;
		p->state = S_CHUNK_DATA;
	}
	return GH_H1_MORE;
}

/* One whole line (its end included) in the state that reads lines. */
static enum gh_h1_rc on_line(struct gh_h1 *p, const char *s, size_t n, const struct gh_h1_cb *cb)
{
	size_t c = content_len(s, n);
	enum gh_h1_rc rc = GH_H1_MORE;

	switch (p->state) {
	case S_STATUS:
		if ((rc = status_line(p, s, c, &p->head_flags, &p->head_code)) != GH_H1_MORE)
			return rc;
		p->state = S_HEADER;
		break;
	case S_HEADER:
		if (c == 0) {
			if (cb->header && cb->header(cb->ud, s, n))
				return GH_H1_STOP;
			return head_end(p, p->head_flags, p->head_code);
		}
		if ((rc = header_line(p, s, c, &p->head_flags)) != GH_H1_MORE)
			return rc;
		break;
	case S_CHUNK_SIZE:
		return chunk_size(p, s, c);
	case S_CHUNK_END:
		if (c != 0)
			return fail(p, "bad chunk end");
		p->state = S_CHUNK_SIZE;
		return GH_H1_MORE;
	case S_TRAILER:
		if (c == 0) {
			p->state = S_DONE;
			return GH_H1_DONE;
		}
		return GH_H1_MORE;
	default:
		return fail(p, "internal: a line in a body state");
	}
	if (cb->header && cb->header(cb->ud, s, n))
		return GH_H1_STOP;
	return GH_H1_MORE;
}

/* A Content-Length body or a chunk has had its last byte. */
static enum gh_h1_rc body_end(struct gh_h1 *p)
{
	if (p->state == S_CHUNK_DATA) {
		p->state = S_CHUNK_END;
		return GH_H1_MORE;
	}
	p->state = S_DONE;
	return GH_H1_DONE;
}

static int in_head(const struct gh_h1 *p)
{
	return p->state == S_STATUS || p->state == S_HEADER || p->state == S_TRAILER;
}

enum gh_h1_rc gh_h1_feed(struct gh_h1 *p, const char *d, size_t n, size_t *used,
			 const struct gh_h1_cb *cb)
{
	size_t i = 0;
	enum gh_h1_rc rc = GH_H1_MORE;

	*used = 0;
	if (p->state == S_ERROR)
		return GH_H1_ERROR;
	if (p->state == S_DONE)
		return GH_H1_DONE;
	if (p->state == S_STOPPED)
		return GH_H1_STOP;
	p->received += n;
	while (i < n && rc == GH_H1_MORE) {
		size_t take;

		switch (p->state) {
		case S_BODY_LEN:
		case S_CHUNK_DATA:
			take = n - i < p->left ? n - i : (size_t)p->left;
			p->left -= take;
			i += take;
			if (cb->body && cb->body(cb->ud, d + i - take, take))
				rc = GH_H1_STOP;
			else if (p->left == 0)
				rc = body_end(p);
			break;
		case S_BODY_EOF:
			take = n - i;
			i = n;
			if (cb->body && cb->body(cb->ud, d + i - take, take))
				rc = GH_H1_STOP;
			break;
		default: {
			const char *lf = memchr(d + i, '\n', n - i);
			size_t end = lf ? (size_t)(lf - d) + 1 : n;

			take = end - i;
			if (in_head(p) && (p->head_bytes += take) > GH_H1_HEAD_MAX) {
				rc = fail(p, "response head over 256 KB");
				break;
			}
			if (p->line.len + take > GH_H1_LINE_MAX) {
				rc = fail(p, in_head(p) ? "response head line over 16 KB"
							: "chunk line over 16 KB");
				break;
			}
			i = end;
			if (!lf) {
				if (gh_buf_append(&p->line, d + end - take, take) != GH_BUF_OK)
					rc = fail(p, "out of memory");
				break;
			}
			if (p->line.len) {
				if (gh_buf_append(&p->line, d + end - take, take) != GH_BUF_OK) {
					rc = fail(p, "out of memory");
					break;
				}
				rc = on_line(p, p->line.data, p->line.len, cb);
				gh_buf_reset(&p->line);
			} else {
				rc = on_line(p, d + end - take, take, cb);
			}
			break;
		}
		}
	}
	*used = i;
	if (rc == GH_H1_STOP)
		p->state = S_STOPPED;
	return rc;
}

enum gh_h1_rc gh_h1_eof(struct gh_h1 *p)
{
	if (p->state == S_DONE)
		return GH_H1_DONE;
	if (p->state == S_BODY_EOF) {
		p->state = S_DONE;
		return GH_H1_DONE;
	}
	if (p->state == S_ERROR)
		return GH_H1_ERROR;
	if (p->state == S_STOPPED)
		return fail(p, "stopped by its reader");
	return fail(p, p->received == 0 ? "connection closed without a reply"
		    : p->status ? "connection closed mid-body"
				: "connection closed mid-head");
}
