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


static void add_opt(cJSON *d, const char *name, const char *value)
{
	if (value)
		cJSON_AddStringToObject(d, name, value);
}

enum gh_code gh_admin_audit_event(const struct gh_admin_action *a, struct gh_audit_event *ev,
				  struct gh_buf *detail, struct gh_err *e)
{
	const struct gh_key *k = a->key;
	cJSON *d = cJSON_CreateObject();
	enum gh_code rc = GH_OK;

	if (d && k) {
		cJSON_AddStringToObject(d, "name", k->name);
		cJSON_AddStringToObject(d, "prefix", k->prefix);
		cJSON_AddStringToObject(d, "policy", k->policy[0] ? k->policy : "default");
		cJSON_AddStringToObject(d, "role", k->admin ? "admin" : "user");
	}
	if (d) {
		add_opt(d, "by", a->by);
		add_opt(d, "address", a->address);
		add_opt(d, "user", a->user);
		add_opt(d, "via", a->via);
	}
	if (!d || gh_json_canonical(d, detail) != GH_BUF_OK) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	memset(ev, 0, sizeof(*ev));
	ev->event = a->event;
	ev->key_id = k ? k->id : NULL;
	ev->owner = k ? k->owner : NULL;
	ev->admin_user = a->admin_user;
	ev->source = "admin";
	ev->outcome = a->outcome ? a->outcome : "ok";
	ev->duration_ms = -1;
	ev->reason = a->reason;
	ev->detail = detail->data;
out:
	cJSON_Delete(d);
	return rc;
}

enum gh_code gh_admin_audit(struct gh_store *s, const struct gh_admin_action *a,
			    struct gh_err *e)
{
	struct gh_audit_event ev;
	struct gh_buf b;
	enum gh_code rc;

	gh_buf_init(&b, GH_ADMIN_DETAIL_MAX);
	rc = gh_admin_audit_event(a, &ev, &b, e);
	if (rc == GH_OK)
		rc = gh_store_audit_append(s, &ev, NULL, e);
	gh_buf_free(&b);
	return rc;
}
