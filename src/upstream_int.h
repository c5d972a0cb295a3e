/*
 * upstream_int.h - what upstream.c (the contract of upstream.h, the pool
 * of handle pairs, retries, and transfers through libcurl) shares with
 * upstream_plain.c (the built-in client for plain-HTTP targets at an
 * address). Not for other modules.
 */
#ifndef GH_UPSTREAM_INT_H
#define GH_UPSTREAM_INT_H

#include <curl/curl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "err.h"
#include "upstream.h"

#define TICK_MS 50                   /* longest wait between two on_tick calls */
#define WAKE_TICK_MAX_MS INT64_C(60000) /* ... when a wake descriptor stands in */
#define ORIGIN_MAX 300               /* "scheme://host:port" in error messages */
#define PLAIN_CONNS 4                /* kept-alive plain connections per pair */

/* One attempt's transfer state, shared with the callbacks (curl's, or the
 * built-in client's parser's). */
struct upstream_xfer {
	const struct gh_upstream_req *req;
	struct gh_upstream_resp *resp;
	CURL *easy;      /* NULL for the built-in client */
	size_t limit;    /* most body bytes buffered: the buffer's cap or max_response */
	int mode;        /* -1 undecided, 0 buffer the body, 1 hand it to on_data */
	int toobig;      /* the buffered body hit its cap */
	int cancelled;   /* on_data or on_tick asked to stop */
	size_t clen;     /* strlen(req->capture_header) + 1 (its colon) */
};

/* Body bytes of a response with status code: to on_data, or buffered.
 * 0, or -1 to stop the transfer (x says why). */
int upstream_take_body(struct upstream_xfer *x, long code, const char *p, size_t n);
/* A response head line (curl's header callback): a status line starts a
 * head afresh; Content-Type, Retry-After and the captured header are kept
 * in x->resp. Returns n. */
size_t upstream_header_cb(char *p, size_t size, size_t nmemb, void *ud);
/* 1 when s is NULL or holds CR or LF. */
int upstream_bad_header_text(const char *s);
/* The error of a failed transfer, from curl's code for it, the system's
 * error (oserr) and whether a connection was up; names no header and no
 * URL path. */
enum gh_code upstream_transfer_error(CURLcode cc, long oserr, int connected,
				     const struct gh_upstream_req *req, const char *origin,
				     struct gh_err *e);

/* A target the built-in client takes (upstream_plain_target): its
 * addresses (two for localhost: 127.0.0.1, then ::1), the path it asks for
 * and its Host. */
struct upstream_plain {
	int naddr;                        /* 0: the target goes through curl */
	struct sockaddr_storage addr[2];
	socklen_t alen[2];
	char *path;                       /* path and query */
	char host[ORIGIN_MAX];            /* Host header value */
};

/* A pair's kept-alive connections of the built-in client, oldest first,
 * each with the address it is to. */
struct upstream_conns {
	struct {
		int fd;
		socklen_t alen;
		struct sockaddr_storage addr;
	} c[PLAIN_CONNS];
	int n;
};

/* Reads the proxy settings once, from gh_upstream_global_init. */
void upstream_plain_init(void);
/* Fills pl when the built-in client takes the target in u (NULL: did not
 * parse); leaves pl->naddr 0 when curl does. */
void upstream_plain_target(struct upstream_plain *pl, CURLU *u);
void upstream_plain_forget(struct upstream_plain *pl);
void upstream_conns_close(struct upstream_conns *c);
/* The request's head, as curl would write it, into out (wiped and freed
 * by the caller: header values may be secrets). */
enum gh_code upstream_plain_head(const struct gh_upstream_req *req,
				 const struct upstream_plain *pl, const char *origin,
				 struct gh_buf *out, struct gh_err *e);
/* One attempt, as upstream.c's attempt() makes it through curl: the same
 * results, *cc_out with curl's code for what failed. */
enum gh_code upstream_plain_attempt(const struct upstream_plain *pl, struct upstream_conns *conns,
				    const struct gh_upstream_req *req,
				    struct gh_upstream_resp *resp, const struct gh_buf *head,
				    const char *origin, CURLcode *cc_out, struct gh_err *e);

#endif
