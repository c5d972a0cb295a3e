/*
 * provider_wire.h - what the providers that speak an LLM's wire format
 * (provider_openai.c, provider_anthropic.c) share beyond provider_int.h:
 * their error texts and the mapping of the upstream's finish reasons.
 * Stateless; any thread.
 */
#ifndef GH_PROVIDER_WIRE_H
#define GH_PROVIDER_WIRE_H

#include <stddef.h>

#include "config.h"
#include "err.h"
#include "provider.h"

/* GH_E_NOMEM "provider <name> (<type>): out of memory". */
enum gh_code gh_provider_oom(const struct gh_provider_conf *conf, const char *type,
			     struct gh_err *e);
/* GH_E_BADREQ "provider <name> (<type>): messages[<i>]: <why>". */
enum gh_code gh_provider_bad_msg(const struct gh_provider_conf *conf, const char *type, size_t i,
				 const char *why, struct gh_err *e);

/* A finish reason as an upstream names it, and gatehouse's for it. */
struct gh_provider_finish_name {
	const char *name;
	enum gh_finish finish;
};
/* The finish named s in t (ended by a NULL name); GH_FINISH_OTHER when s is
 * NULL or not in t. */
enum gh_finish gh_provider_finish(const struct gh_provider_finish_name *t, const char *s);

#endif
