/*
 * admin_audit.c - audit rows of administrative actions; see admin_audit.h.
 * Threading: none of its own; the store's writer serialises the appends.
 */
#include "admin_audit.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "audit.h"
#include "buf.h"
#include "json.h"

#define DETAIL_MAX 4096

static void add_opt(cJSON *d, const char *name, const char *value)
{
	if (value)
		cJSON_AddStringToObject(d, name, value);
}

enum gh_code gh_admin_audit(struct gh_store *s, const struct gh_admin_action *a,
			    struct gh_err *e)
{
	const struct gh_key *k = a->key;
	struct gh_audit_event ev;
	struct gh_buf b;
	cJSON *d = cJSON_CreateObject();
	enum gh_code rc;

	gh_buf_init(&b, DETAIL_MAX);
	if (k) {
		cJSON_AddStringToObject(d, "name", k->name);
		cJSON_AddStringToObject(d, "prefix", k->prefix);
		cJSON_AddStringToObject(d, "policy", k->policy[0] ? k->policy : "default");
		cJSON_AddStringToObject(d, "role", k->admin ? "admin" : "user");
	}
	add_opt(d, "by", a->by);
	add_opt(d, "address", a->address);
	add_opt(d, "user", a->user);
	add_opt(d, "via", a->via);
	if (!d || gh_json_canonical(d, &b) != GH_BUF_OK) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	memset(&ev, 0, sizeof(ev));
	ev.event = a->event;
	ev.key_id = k ? k->id : NULL;
	ev.owner = k ? k->owner : NULL;
	ev.admin_user = a->admin_user;
	ev.source = "admin";
	ev.outcome = a->outcome ? a->outcome : "ok";
	ev.duration_ms = -1;
	ev.reason = a->reason;
	ev.detail = b.data;
	rc = gh_store_audit_append(s, &ev, NULL, e);
out:
	cJSON_Delete(d);
	gh_buf_free(&b);
	return rc;
}
