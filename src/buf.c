/*
 * buf.c - bounded growable buffer. See buf.h for the contract.
 */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gh_buf_init(struct gh_buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
}

void gh_buf_free(struct gh_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

void gh_buf_reset(struct gh_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Makes room for n more bytes plus the terminator. */
static int grow(struct gh_buf *b, size_t n)
{
	size_t need, nalloc;
	char *p;

	if (n > b->cap || b->len > b->cap - n)
		return GH_BUF_TOOBIG;
	need = b->len + n + 1;
	if (need <= b->alloc)
		return GH_BUF_OK;
	nalloc = b->alloc ? b->alloc : 64;
	while (nalloc < need)
		nalloc = nalloc > ((size_t)-1) / 2 ? need : nalloc * 2;
	if (nalloc > b->cap + 1)
		nalloc = b->cap + 1;
	p = realloc(b->data, nalloc);
	if (!p)
		return GH_BUF_NOMEM;
	b->data = p;
	b->alloc = nalloc;
	return GH_BUF_OK;
}

int gh_buf_append(struct gh_buf *b, const void *p, size_t n)
{
	int rc = grow(b, n);

	if (rc != GH_BUF_OK)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return GH_BUF_OK;
}

int gh_buf_puts(struct gh_buf *b, const char *s)
{
	return gh_buf_append(b, s, strlen(s));
}

int gh_buf_putc_grow(struct gh_buf *b, char c)
{
	return gh_buf_append(b, &c, 1);
}

int gh_buf_put_int(struct gh_buf *b, long long v)
{
	char tmp[24];
	size_t i = sizeof(tmp);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[--i] = '-';
	return gh_buf_append(b, tmp + i, sizeof(tmp) - i);
}

size_t gh_fmt_hex(char *out, unsigned long long v)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16];
	size_t i = sizeof(tmp), n;

	do {
		tmp[--i] = hex[v & 15];
		v >>= 4;
	} while (v);
	n = sizeof(tmp) - i;
	memcpy(out, tmp + i, n);
	out[n] = '\0';
	return n;
}

int gh_buf_put_hex(struct gh_buf *b, unsigned long long v)
{
	char tmp[24];

	return gh_buf_append(b, tmp, gh_fmt_hex(tmp, v));
}

/* Formats into the room the buffer already has, and only when that is too
 * small grows it and formats again: printf's work once, not twice, for
 * most calls. */
int gh_buf_vprintf(struct gh_buf *b, const char *fmt, va_list ap)
{
	size_t room = b->data ? b->alloc - b->len : 0;
	va_list cp;
	int n, rc;

	va_copy(cp, ap);
	n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, cp);
	va_end(cp);
	if (n < 0)
		return GH_BUF_NOMEM;
	if ((size_t)n < room && (size_t)n <= b->cap - b->len) {
		b->len += (size_t)n;
		return GH_BUF_OK;
	}
	if (room)
		b->data[b->len] = '\0'; /* what did not fit is no part of it */
	rc = grow(b, (size_t)n);
	if (rc != GH_BUF_OK)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return GH_BUF_OK;
}

int gh_buf_printf(struct gh_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = gh_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

static int json_str(struct gh_buf *b, const char *s, size_t n);

int gh_buf_json_str(struct gh_buf *b, const char *s)
{
	return gh_buf_json_strn(b, s, strlen(s));
}

int gh_buf_json_strn(struct gh_buf *b, const char *s, size_t n)
{
	size_t len = b->len;
	int rc = json_str(b, s, n);

	if (rc != GH_BUF_OK && b->data) {
		/* leave the buffer as it was */
		b->len = len;
		b->data[len] = '\0';
	}
	return rc;
}

/* 1 when one of the 8 bytes in w must be escaped in a JSON string: below
 * 0x20, '"' or '\\'. The usual word tricks, exact about whether any byte
 * does (not about which). */
static int word_needs_escape(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
	uint64_t hit = ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) |
		       ((bslash - ones) & ~bslash);

	return (hit & highs) != 0;
}

const char *gh_buf_json_plain_end(const char *s, const char *end)
{
	const unsigned char *p = (const unsigned char *)s, *e = (const unsigned char *)end;
	uint64_t w;

	while (e - p >= 8) {
		memcpy(&w, p, 8);
		if (word_needs_escape(w))
			break;
		p += 8;
	}
	while (p < e && *p >= 0x20 && *p != '"' && *p != '\\')
		p++;
	return (const char *)p;
}

static int json_str(struct gh_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *end = p + n, *q;
	char esc[6];
	size_t elen;
	int rc;

	/* room for the text as it is and its quotes: all it takes unless
	 * something needs escaping */
	if ((rc = grow(b, n + 2)) != GH_BUF_OK)
		return rc;
	b->data[b->len++] = '"';
	for (;;) {
		q = (const unsigned char *)gh_buf_json_plain_end((const char *)p,
								 (const char *)end);
		if ((rc = gh_buf_append(b, p, (size_t)(q - p))) != GH_BUF_OK)
			return rc;
		if (q == end)
			break;
		esc[0] = '\\';
		elen = 2;
		switch (*q) {
		case '"':  esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		default:
			esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
			esc[4] = hex[*q >> 4]; esc[5] = hex[*q & 15];
			elen = 6;
		}
		if ((rc = gh_buf_append(b, esc, elen)) != GH_BUF_OK)
			return rc;
		p = q + 1;
	}
	return gh_buf_putc(b, '"');
}

void gh_buf_consume(struct gh_buf *b, size_t n)
{
	if (n >= b->len) {
		gh_buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

char *gh_buf_detach(struct gh_buf *b)
{
	char *p = b->data;

	if (!p)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}
