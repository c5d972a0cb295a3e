/*
 * provider_wire.c - error texts and finish reasons shared by the wire
 * providers; see provider_wire.h.
 */
#include "provider_wire.h"

#include <string.h>

enum gh_code gh_provider_oom(const struct gh_provider_conf *conf, const char *type,
			     struct gh_err *e)
{
	return gh_err_set(e, GH_E_NOMEM, "provider %s (%s): out of memory", conf->name, type);
}

enum gh_code gh_provider_bad_msg(const struct gh_provider_conf *conf, const char *type, size_t i,
				 const char *why, struct gh_err *e)
{
	return gh_err_set(e, GH_E_BADREQ, "provider %s (%s): messages[%zu]: %s", conf->name, type,
			  i, why);
}

enum gh_finish gh_provider_finish(const struct gh_provider_finish_name *t, const char *s)
{
	for (; s && t->name; t++)
		if (!strcmp(t->name, s))
			return t->finish;
	return GH_FINISH_OTHER;
}
