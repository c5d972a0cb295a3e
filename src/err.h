/*
 * err.h - error codes and the error record every fallible call fills in.
 *
 * Deep modules never pick HTTP statuses: they return a GH_E_* code and
 * write a message for people into a struct gh_err owned by the caller.
 * http.c is the one place that maps a code to a status and a JSON body.
 *
 * A message names the field or rule at fault and never contains a secret.
 */
#ifndef GH_ERR_H
#define GH_ERR_H

#include <stdarg.h>

enum gh_code {
	GH_OK = 0,
	GH_E_BADREQ,      /* 400: malformed JSON, wrong field, bad schema */
	GH_E_AUTH,        /* 401: no key, unknown key, revoked key */
	GH_E_FORBIDDEN,   /* 403: a policy rule refused */
	GH_E_NOTFOUND,    /* 404: unknown agent, thread, run, ... */
	GH_E_METHOD,      /* 405 */
	GH_E_CONFLICT,    /* 409: already decided, unknown toolCallId, ... */
	GH_E_TOOBIG,      /* 413: body or a client-sized value over its cap */
	GH_E_RATELIMIT,   /* 429 */
	GH_E_INTERNAL,    /* 500 */
	GH_E_UPSTREAM,    /* 502: provider/tool answered badly or not at all */
	GH_E_UNAVAILABLE, /* 503: audit write failed, stream cap reached */
	GH_E_TIMEOUT,     /* 504: upstream timed out */
	GH_E_NOMEM,       /* 500, but worth telling apart in logs */
	GH_E_CANCELLED,   /* client went away; nothing to answer */
	GH_E_IO           /* 500: file or database I/O */
};

#define GH_ERR_MSG_MAX 512

struct gh_err {
	enum gh_code code;
	int retry_after;          /* seconds, for 429/503; 0 = none */
	char msg[GH_ERR_MSG_MAX];
};

/* Sets e->code and formats e->msg; returns code so callers can write
 * "return gh_err_set(e, GH_E_BADREQ, ...)". e may be NULL. */
enum gh_code gh_err_set(struct gh_err *e, enum gh_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
enum gh_code gh_err_vset(struct gh_err *e, enum gh_code code, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Clears e to GH_OK and an empty message. */
void gh_err_clear(struct gh_err *e);

/* Stable machine name for the JSON "code" field: "bad_request", ... */
const char *gh_code_name(enum gh_code code);

#endif
