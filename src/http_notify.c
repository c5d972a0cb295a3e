/*
 * http_notify.c - what became of approval notifications, for admins:
 *   GET /api/admin/notifications[?approval=ID&limit=N]
 * answers {enabled, targets:[{name, kind, format, events}], stats, deliveries:[...]}:
 * the targets of the running config by name and kind (never a URL or a
 * secret), the notifier's counters since start, and the recorded
 * deliveries, newest first (of one approval when approval is given).
 *
 * Threading: CivetWeb workers; reads only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "json.h"
#include "notify.h"
#include "util.h"

static int row_cb(void *ud, const struct gh_notify_row *r)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return 1;
	cJSON_AddNumberToObject(o, "id", (double)r->id);
	cJSON_AddStringToObject(o, "eventId", r->event_id);
	cJSON_AddStringToObject(o, "target", r->target);
	cJSON_AddStringToObject(o, "kind", r->kind);
	cJSON_AddStringToObject(o, "event", r->event);
	cJSON_AddStringToObject(o, "approvalId", r->approval_id);
	cJSON_AddStringToObject(o, "state", r->state);
	cJSON_AddNumberToObject(o, "attempts", (double)r->attempts);
	if (r->last_code)
		cJSON_AddNumberToObject(o, "lastCode", (double)r->last_code);
	else
		cJSON_AddNullToObject(o, "lastCode");
	gh_json_add_str(o, "lastError", r->last_error);
	gh_json_add_time(o, "nextAttemptAt", r->next_attempt_at);
	gh_json_add_time(o, "createdAt", r->created_at);
	gh_json_add_time(o, "updatedAt", r->updated_at);
	gh_json_add_time(o, "deliveredAt", r->delivered_at);
	cJSON_AddItemToArray(ud, o);
	return 0;
}

static cJSON *targets_json(const struct gh_notify_conf *c)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < c->ntargets; i++) {
		const struct gh_notify_target_conf *t = &c->targets[i];
		cJSON *o = cJSON_CreateObject(), *ev;

		if (!o)
			break;
		cJSON_AddStringToObject(o, "name", t->name);
		cJSON_AddStringToObject(o, "kind", t->kind == GH_NOTIFY_SMTP ? "smtp" : "webhook");
		if (t->kind == GH_NOTIFY_WEBHOOK)
			cJSON_AddStringToObject(o, "format", t->format == GH_NOTIFY_FORMAT_SLACK
								     ? "slack" : "json");
		ev = cJSON_AddArrayToObject(o, "events");
		for (int b = GH_NOTIFY_EV_REQUESTED; ev && b <= GH_NOTIFY_EV_EXPIRED; b <<= 1)
			if (t->events & b)
				cJSON_AddItemToArray(ev, cJSON_CreateString(gh_notify_event_name(b)));
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static void list_notifications(struct gh_req *r)
{
	char approval[GH_ID_MAX + 8], limit_s[16];
	const char *ap = gh_http_query(r, "approval", approval, sizeof(approval));
	int64_t limit = 100;
	struct gh_notify_stats st;
	const struct gh_notify_conf *nc;
	cJSON *o, *arr, *s;
	struct gh_err e;

	if (gh_http_query(r, "limit", limit_s, sizeof(limit_s)) &&
	    gh_parse_i64(limit_s, 1, 1000, &limit) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "limit: expected an integer in 1..1000");
		return;
	}
	if (ap && *ap && !gh_chars_ok(ap, GH_ID_MAX - 1, "_-")) {
		gh_http_errorf(r, GH_E_BADREQ, "approval: expected an approval id");
		return;
	}
	o = cJSON_CreateObject();
	arr = cJSON_CreateArray();
	if (!o || !arr) {
		cJSON_Delete(o);
		cJSON_Delete(arr);
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	if (gh_store_notify_list(r->app->store, ap && *ap ? ap : NULL, (int)limit, row_cb, arr,
				 &e) != GH_OK) {
		cJSON_Delete(o);
		cJSON_Delete(arr);
		gh_http_error(r, &e);
		return;
	}
	/* the targets of the config this request runs under (a reload
	 * changes them) */
	nc = &gh_app_cfg(r->app)->notifications;
	cJSON_AddBoolToObject(o, "enabled", r->app->notify != NULL && nc->ntargets > 0);
	cJSON_AddItemToObject(o, "targets", targets_json(nc));
	gh_notify_stats(r->app->notify, &st);
	s = cJSON_AddObjectToObject(o, "stats");
	if (s) {
		cJSON_AddNumberToObject(s, "queued", (double)st.queued);
		cJSON_AddNumberToObject(s, "delivered", (double)st.delivered);
		cJSON_AddNumberToObject(s, "failed", (double)st.failed);
		cJSON_AddNumberToObject(s, "dropped", (double)st.dropped);
		cJSON_AddNumberToObject(s, "retries", (double)st.retries);
	}
	cJSON_AddItemToObject(o, "deliveries", arr);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

const struct gh_route gh_routes_notify[] = {
	{"GET", "/api/admin/notifications", GH_AUTH_ADMIN, list_notifications},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
