/*
 * buf.h - a growable byte buffer with a mandatory size cap.
 *
 * Anything sized by a client or an upstream goes through a gh_buf: growing
 * past the cap fails with GH_BUF_TOOBIG and leaves the contents as they
 * were, so the caller can answer 413/502 instead of reallocating without
 * bound. The data is always NUL-terminated (the terminator is not counted
 * in len and not counted against the cap).
 *
 * Not thread-safe; one owner at a time. gh_buf_free() on a zeroed or freed
 * buffer is a no-op.
 */
#ifndef GH_BUF_H
#define GH_BUF_H

#include <stdarg.h>
#include <stddef.h>

enum { GH_BUF_OK = 0, GH_BUF_TOOBIG = -1, GH_BUF_NOMEM = -2 };

struct gh_buf {
	char *data;     /* NULL until the first append */
	size_t len;
	size_t alloc;
	size_t cap;     /* len never exceeds cap */
};

/* Starts an empty buffer that may hold at most cap bytes. */
void gh_buf_init(struct gh_buf *b, size_t cap);

/* Frees the storage and resets to empty (the cap is kept). */
void gh_buf_free(struct gh_buf *b);

/* Empties the buffer but keeps its storage for reuse. */
void gh_buf_reset(struct gh_buf *b);

int gh_buf_append(struct gh_buf *b, const void *p, size_t n);
int gh_buf_puts(struct gh_buf *b, const char *s);
/* One byte: in place when the buffer has room (most calls; inline), else
 * through gh_buf_putc_grow. */
int gh_buf_putc_grow(struct gh_buf *b, char c);
static inline int gh_buf_putc(struct gh_buf *b, char c)
{
	if (b->len + 1 < b->alloc) {
		b->data[b->len++] = c;
		b->data[b->len] = '\0';
		return GH_BUF_OK;
	}
	return gh_buf_putc_grow(b, c);
}
/* An integer in decimal, or an unsigned one in lower-case hex, without
 * printf (whose locale handling costs more than the rest of a small
 * event's formatting on the streaming path). */
int gh_buf_put_int(struct gh_buf *b, long long v);
int gh_buf_put_hex(struct gh_buf *b, unsigned long long v);
/* The same into out (at least 24 bytes, NUL-terminated); returns the length. */
size_t gh_fmt_hex(char *out, unsigned long long v);
int gh_buf_printf(struct gh_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int gh_buf_vprintf(struct gh_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Appends s as a JSON string literal, quotes included. */
int gh_buf_json_str(struct gh_buf *b, const char *s);
/* The same for the n bytes at s (a NUL byte is written as \u0000). */
int gh_buf_json_strn(struct gh_buf *b, const char *s, size_t n);

/* The first byte in [s, end) that a JSON string cannot hold as it is (a
 * control character, '"' or '\\'), or end. Eight bytes a step: strings
 * are mostly plain text, written (gh_buf_json_strn) or read (jread). */
const char *gh_buf_json_plain_end(const char *s, const char *end);

/* Drops the first n bytes (n <= len). */
void gh_buf_consume(struct gh_buf *b, size_t n);

/* Hands the storage to the caller (caller frees with free()); the buffer is
 * left empty. Returns "" allocated when the buffer was never written, or
 * NULL on allocation failure. */
char *gh_buf_detach(struct gh_buf *b);

#endif
