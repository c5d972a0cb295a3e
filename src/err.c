/*
 * err.c - filling struct gh_err. Stateless; safe from any thread.
 */
#include "err.h"

#include <stdio.h>
#include <string.h>

enum gh_code gh_err_vset(struct gh_err *e, enum gh_code code, const char *fmt, va_list ap)
{
	if (!e)
		return code;
	e->code = code;
	e->retry_after = 0;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	return code;
}

enum gh_code gh_err_set(struct gh_err *e, enum gh_code code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gh_err_vset(e, code, fmt, ap);
	va_end(ap);
	return code;
}

void gh_err_clear(struct gh_err *e)
{
	if (!e)
		return;
	e->code = GH_OK;
	e->retry_after = 0;
	e->msg[0] = '\0';
}

const char *gh_code_name(enum gh_code code)
{
	switch (code) {
	case GH_OK:            return "ok";
	case GH_E_BADREQ:      return "bad_request";
	case GH_E_AUTH:        return "unauthorized";
	case GH_E_FORBIDDEN:   return "forbidden";
	case GH_E_NOTFOUND:    return "not_found";
	case GH_E_METHOD:      return "method_not_allowed";
	case GH_E_CONFLICT:    return "conflict";
	case GH_E_TOOBIG:      return "payload_too_large";
	case GH_E_RATELIMIT:   return "rate_limited";
	case GH_E_INTERNAL:    return "internal_error";
	case GH_E_UPSTREAM:    return "upstream_error";
	case GH_E_UNAVAILABLE: return "unavailable";
	case GH_E_TIMEOUT:     return "upstream_timeout";
	case GH_E_NOMEM:       return "out_of_memory";
	case GH_E_CANCELLED:   return "cancelled";
	case GH_E_IO:          return "io_error";
	}
	return "internal_error";
}
