/*
 * h1.h - an incremental parser for HTTP/1.x responses, for the client
 * gatehouse talks to plain-HTTP upstreams with (upstream.c).
 *
 * It takes whatever bytes a read returned, split anywhere, and reports the
 * response head line by line (the status line first, each line with its
 * line end, as libcurl's header callback gives them) and the body's bytes
 * with its framing removed: Content-Length, chunked (extensions and
 * trailers skipped) or, without either, everything up to the end of the
 * connection. Interim 1xx heads are reported and skipped; a 101 is an
 * error (nothing here switches protocols). Every byte it keeps is bounded:
 * a head line is held only when a read splits it, and at most
 * GH_H1_LINE_MAX bytes of it; a whole head (trailers included) may not
 * pass GH_H1_HEAD_MAX bytes.
 *
 * Not thread-safe: one parser per response, used by one thread.
 */
#ifndef GH_H1_H
#define GH_H1_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define GH_H1_LINE_MAX (16 * 1024)
#define GH_H1_HEAD_MAX (256 * 1024)

enum gh_h1_rc {
	GH_H1_MORE = 0,   /* the response goes on: feed more */
	GH_H1_DONE = 1,   /* the response is complete */
	GH_H1_STOP = 2,   /* a callback returned nonzero */
	GH_H1_ERROR = -1, /* not a valid response: p->err says why */
};

struct gh_h1_cb {
	/* A head line, its line end included ("HTTP/1.1 200 OK\r\n", then
	 * "Content-Type: ...\r\n", then "\r\n"), borrowed until it returns. */
	int (*header)(void *ud, const char *line, size_t n);
	/* Body bytes, framing removed; borrowed until it returns. */
	int (*body)(void *ud, const char *p, size_t n);
	void *ud;
};

struct gh_h1 {
	int state;
	int status;          /* the final status once its line is read; 0 before */
	int keep_alive;      /* the connection may carry another request */
	int chunked;
	int head_only;       /* the request was HEAD: no body follows */
	int64_t clen;        /* Content-Length, -1 when none */
	uint64_t left;       /* body or chunk bytes still to come */
	size_t head_bytes;   /* of the head being read */
	int head_flags;      /* what its lines said so far (h1.c) */
	int head_code;       /* its status code */
	uint64_t received;   /* every byte fed, framing included */
	struct gh_buf line;  /* a head line split by a read */
	const char *err;     /* static text, when GH_H1_ERROR */
};

/* Starts a parser for the response to a request (head_only: a HEAD). */
void gh_h1_init(struct gh_h1 *p, int head_only);
void gh_h1_free(struct gh_h1 *p);

/* Feeds n bytes. *used gets how many were taken: all of them unless the
 * response ended (bytes after it are not this response's: the connection
 * must not be reused) or a callback stopped it. Once it returned anything
 * but GH_H1_MORE it takes nothing more and says the same again. */
enum gh_h1_rc gh_h1_feed(struct gh_h1 *p, const char *d, size_t n, size_t *used,
			 const struct gh_h1_cb *cb);

/* The connection ended: GH_H1_DONE when that completes the response (a body
 * that runs to the end of the connection), else GH_H1_ERROR with err set. */
enum gh_h1_rc gh_h1_eof(struct gh_h1 *p);

/* 1 once the final head has been read (status is known). */
int gh_h1_head_done(const struct gh_h1 *p);

#endif
