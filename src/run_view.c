/*
 * run_view.c - stored runs as the surfaces see them: typed views, the
 * registry of runs in flight in this process, cancelling and waiting; see
 * run.h. The layout of runs.state is in run_int.h.
 *
 * Threading: the registry is a list guarded by one mutex; an entry lives
 * as long as the hold that made it (on the holding thread's stack or run).
 * Waits sleep on a hub subscription to the run's state topic.
 */
#include "run.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approvals.h"
#include "hub.h"
#include "json.h"
#include "messages.h"
#include "run_int.h"

#define WAIT_TICK_MS 100        /* how often a wait asks whether its client left */
#define WAIT_RESYNC_MS 1000     /* rereads for changes made outside this process */

/* ---------------------------------------------------------------- names */

/* The names of the engine's enums, as stored in runs.status, the output's
 * finishReason and a call's state. */
enum { N_STATUS, N_FINISH, N_CALL };

static const struct {
	int kind, value;
	const char *name;
} names[] = {
	{N_STATUS, GH_RUN_RUNNING, "running"},
	{N_STATUS, GH_RUN_WAITING, "waiting"},
	{N_STATUS, GH_RUN_SUSPENDED, "suspended"},
	{N_STATUS, GH_RUN_COMPLETED, "completed"},
	{N_STATUS, GH_RUN_FAILED, "failed"},
	{N_STATUS, GH_RUN_CANCELLED, "cancelled"},
	{N_STATUS, GH_RUN_EXPIRED, "expired"},
	{N_FINISH, GH_RUN_FINISH_STOP, "stop"},
	{N_FINISH, GH_RUN_FINISH_LENGTH, "length"},
	{N_FINISH, GH_RUN_FINISH_TOOL_CALLS, "tool-calls"},
	{N_FINISH, GH_RUN_FINISH_SUSPENDED, "suspended"},
	{N_FINISH, GH_RUN_FINISH_MAX_STEPS, "max-steps"},
	{N_FINISH, GH_RUN_FINISH_CONTENT_FILTER, "content-filter"},
	{N_CALL, GH_CALL_NEW, "new"},
	{N_CALL, GH_CALL_PENDING_CLIENT, "pending_client"},
	{N_CALL, GH_CALL_PENDING_APPROVAL, "pending_approval"},
	{N_CALL, GH_CALL_RELEASED, "released"},
	{N_CALL, GH_CALL_DONE, "done"},
};

static const char *name_of(int kind, int value, const char *dflt)
{
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(names); i++)
		if (names[i].kind == kind && names[i].value == value)
			return names[i].name;
	return dflt;
}

/* The value named name, or dflt. */
static int value_of(int kind, const char *name, int dflt)
{
	size_t i;

	for (i = 0; name && i < GH_ARRAY_LEN(names); i++)
		if (names[i].kind == kind && !strcmp(names[i].name, name))
			return names[i].value;
	return dflt;
}

const char *gh_run_status_name(enum gh_run_status s)
{
	return name_of(N_STATUS, (int)s, "failed");
}

int gh_run_status_parse(const char *name, enum gh_run_status *out)
{
	int v = value_of(N_STATUS, name, -1);

	if (v < 0)
		return -1;
	*out = (enum gh_run_status)v;
	return 0;
}

int gh_run_status_final(enum gh_run_status s)
{
	return s == GH_RUN_COMPLETED || s == GH_RUN_FAILED || s == GH_RUN_CANCELLED ||
	       s == GH_RUN_EXPIRED;
}

const char *gh_run_finish_name(enum gh_run_finish f)
{
	return name_of(N_FINISH, (int)f, "stop");
}

enum gh_run_finish gh_run_finish_parse(const char *name)
{
	return (enum gh_run_finish)value_of(N_FINISH, name, GH_RUN_FINISH_STOP);
}

const char *gh_call_state_name(enum gh_call_state s)
{
	return name_of(N_CALL, (int)s, "done");
}

enum gh_call_state gh_call_state_of(const cJSON *call)
{
	/* a call without a state waits for nothing */
	return (enum gh_call_state)value_of(N_CALL, gh_json_str(call, "state"), GH_CALL_DONE);
}

int gh_call_state_client(enum gh_call_state s)
{
	return s == GH_CALL_PENDING_CLIENT || s == GH_CALL_RELEASED;
}

void gh_run_call_read(const cJSON *c, struct gh_run_call *out)
{
	memset(out, 0, sizeof(*out));
	out->id = gh_json_str(c, "toolCallId");
	out->name = gh_json_str(c, "toolName");
	out->source = gh_json_str(c, "source");
	out->args = cJSON_GetObjectItemCaseSensitive(c, "args");
	out->state = gh_call_state_of(c);
	out->approval_id = gh_json_str(c, "approvalId");
	out->approval_expires_at = gh_json_int(c, "expiresAt", 0);
	out->due_at = gh_json_int(c, "dueAt", 0);
	out->result = cJSON_GetObjectItemCaseSensitive(c, "result");
	out->is_error = gh_json_bool(c, "isError", 0);
}

void gh_run_notify(struct gh_app *app, const char *run_id)
{
	gh_hub_notify_state(app->hub, run_id);
}

/* ------------------------------------------------------------ registry */

/* The runs this process's requests hold, by run id: a thousand held
 * streams make each hold, release and lookup a walk of one short chain,
 * not of every hold (a new stream used to compare its id with every held
 * one, and an ending one to walk the list to itself, under the one lock). */
#define FLIGHT_BUCKETS 1024

struct flight {
	char run_id[GH_ID_MAX];
	char owner[GH_NAME_MAX + 1];
	int cancellable;               /* a request's run, not a background resumption */
	_Atomic int cancel;
	struct flight *next, **pprev;  /* in its bucket's chain */
};

static pthread_mutex_t flights_mu = PTHREAD_MUTEX_INITIALIZER;
static struct flight *flights[FLIGHT_BUCKETS];

static struct flight **flight_bucket(const char *run_id)
{
	return &flights[gh_hash_str(run_id) % FLIGHT_BUCKETS];
}

enum gh_code gh_run_hold(struct gh_app *app, const char *owner, const char *run_id,
			 struct gh_run_hold *h, struct gh_err *e)
{
	return gh_run_hold_as(app, owner, run_id, 1, h, e);
}

enum gh_code gh_run_hold_as(struct gh_app *app, const char *owner, const char *run_id,
			    int cancellable, struct gh_run_hold *h, struct gh_err *e)
{
	struct flight *f, *g, **b;

	(void)app;
	if (h->priv_)
		return GH_OK; /* already held by this run */
	f = calloc(1, sizeof(*f));
	if (!f)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	gh_strlcpy(f->run_id, run_id, sizeof(f->run_id));
	gh_strlcpy(f->owner, owner ? owner : "", sizeof(f->owner));
	f->cancellable = cancellable;
	b = flight_bucket(f->run_id);
	pthread_mutex_lock(&flights_mu);
	/* a cancel asked before this hold (while the surface held the run)
	 * stands for it too */
	for (g = *b; g && cancellable; g = g->next)
		if (!strcmp(g->run_id, f->run_id) && atomic_load(&g->cancel))
			atomic_store(&f->cancel, 1);
	f->next = *b;
	if (f->next)
		f->next->pprev = &f->next;
	f->pprev = b;
	*b = f;
	pthread_mutex_unlock(&flights_mu);
	h->priv_ = f;
	return GH_OK;
}

void gh_run_release(struct gh_app *app, struct gh_run_hold *h)
{
	struct flight *f = h ? h->priv_ : NULL;

	if (!f)
		return;
	pthread_mutex_lock(&flights_mu);
	*f->pprev = f->next;
	if (f->next)
		f->next->pprev = f->pprev;
	pthread_mutex_unlock(&flights_mu);
	h->priv_ = NULL;
	if (app)
		gh_run_notify(app, f->run_id);
	free(f);
}

int gh_run_hold_cancelled(const struct gh_run_hold *h)
{
	const struct flight *f = h ? h->priv_ : NULL;

	return f && atomic_load(&f->cancel);
}

/* 1 when a request of this process holds run_id (of owner; NULL any): a
 * cancellable hold. With cancel, each is asked to stop. */
static int in_flight(const char *owner, const char *run_id, int cancel)
{
	struct flight *f;
	int found = 0;

	pthread_mutex_lock(&flights_mu);
	for (f = *flight_bucket(run_id); f; f = f->next) {
		if (strcmp(f->run_id, run_id) || (owner && strcmp(f->owner, owner)))
			continue;
		if (!f->cancellable)
			continue;
		if (cancel)
			atomic_store(&f->cancel, 1);
		found = 1;
	}
	pthread_mutex_unlock(&flights_mu);
	return found;
}

/* ---------------------------------------------------------------- views */

/* What a view owns besides its fixed fields. */
struct view_priv {
	cJSON *state;
	cJSON *output;
	char *error;
};

void gh_run_view_clear(struct gh_run_view *v)
{
	struct view_priv *p;
	size_t i;

	if (!v)
		return;
	p = v->priv_;
	for (i = 0; i < v->ncalls; i++) {
		gh_approval_clear(v->calls[i].approval);
		free(v->calls[i].approval);
	}
	free(v->calls);
	free(v->last_step_text);
	if (p) {
		cJSON_Delete(p->state);
		cJSON_Delete(p->output);
		free(p->error);
		free(p);
	}
	memset(v, 0, sizeof(*v));
}

size_t gh_run_view_count(const struct gh_run_view *v, enum gh_call_state s)
{
	size_t i, n = 0;

	for (i = 0; i < v->ncalls; i++)
		n += v->calls[i].state == s;
	return n;
}

int gh_run_call_awaits_decision(const struct gh_run_call *c, int *caller)
{
	*caller = 0;
	if (c->state != GH_CALL_PENDING_APPROVAL || !c->approval_id || !c->approval ||
	    strcmp(c->approval->status, "pending"))
		return 0;
	*caller = !strcmp(c->approval->approver, "caller");
	return 1;
}

cJSON *gh_run_view_pending_json(const struct gh_run_view *v)
{
	cJSON *arr = cJSON_CreateArray();
	size_t i;

	for (i = 0; arr && i < v->ncalls; i++) {
		const struct gh_run_call *c = &v->calls[i];
		cJSON *o;

		if (!gh_call_state_client(c->state) || !(o = cJSON_CreateObject()))
			continue;
		gh_json_add_str(o, "toolCallId", c->id);
		gh_json_add_str(o, "toolName", c->name);
		if (c->args)
			cJSON_AddItemToObject(o, "args", cJSON_Duplicate(c->args, 1));
		if (c->due_at > 0)
			gh_json_add_time(o, "dueAt", c->due_at);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

/* The text of the newest message of the context when it is the model's. */
static char *last_step_text(const cJSON *state)
{
	const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(state, "context");
	const cJSON *last = cJSON_GetArrayItem(ctx, cJSON_GetArraySize(ctx) - 1);
	const char *role = gh_json_str(last, "role");

	if (!role || strcmp(role, "assistant"))
		return strdup("");
	return gh_messages_text(cJSON_GetObjectItemCaseSensitive(last, "content"));
}

/* The calls of the stored state; pending approvals read with them. */
static enum gh_code view_calls(struct gh_app *app, struct gh_run_view *v, const cJSON *state,
			       struct gh_err *e)
{
	const cJSON *calls = cJSON_GetObjectItemCaseSensitive(state, "calls"), *c;
	size_t n = (size_t)cJSON_GetArraySize(calls), i = 0;

	if (n == 0)
		return GH_OK;
	v->calls = calloc(n, sizeof(*v->calls));
	if (!v->calls)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_ArrayForEach(c, calls) {
		struct gh_run_call *call = &v->calls[i++];
		struct gh_err ae;

		gh_run_call_read(c, call);
		if (call->state != GH_CALL_PENDING_APPROVAL || !call->approval_id)
			continue;
		call->approval = calloc(1, sizeof(*call->approval));
		if (!call->approval)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		if (gh_approval_get(app, NULL, call->approval_id, call->approval, &ae) != GH_OK) {
			free(call->approval);
			call->approval = NULL;
		}
	}
	v->ncalls = n;
	return GH_OK;
}

static enum gh_code view_from_row(struct gh_app *app, struct gh_run_row *row,
				  struct gh_run_view *v, struct gh_err *e)
{
	struct view_priv *p = calloc(1, sizeof(*p));
	const cJSON *usage;

	if (!p)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	v->priv_ = p;
	gh_strlcpy(v->id, row->id, sizeof(v->id));
	gh_strlcpy(v->owner, row->owner, sizeof(v->owner));
	gh_strlcpy(v->key_id, row->key_id, sizeof(v->key_id));
	gh_strlcpy(v->agent_id, row->agent_id, sizeof(v->agent_id));
	gh_strlcpy(v->thread_id, row->thread_id, sizeof(v->thread_id));
	gh_strlcpy(v->resource_id, row->resource_id, sizeof(v->resource_id));
	if (gh_run_status_parse(row->status, &v->status) != 0)
		v->status = GH_RUN_FAILED;
	v->created_at = row->created_at;
	v->updated_at = row->updated_at;
	v->direct = gh_json_bool(row->state, "direct", 0);
	p->state = row->state;
	p->output = row->output;
	p->error = row->error;
	row->state = row->output = NULL;
	row->error = NULL;
	v->error = p->error;
	v->has_output = p->output != NULL;
	v->text = gh_json_str(p->output, "text");
	if (!v->text)
		v->text = "";
	v->finish = gh_run_finish_parse(gh_json_str(p->output, "finishReason"));
	v->step = gh_json_int(p->state, "step", 0);
	usage = cJSON_GetObjectItemCaseSensitive(p->state, "usage");
	v->usage.input_tokens = gh_json_int(usage, "input", 0);
	v->usage.output_tokens = gh_json_int(usage, "output", 0);
	if (!(v->last_step_text = last_step_text(p->state)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	return view_calls(app, v, p->state, e);
}

enum gh_code gh_run_view_get(struct gh_app *app, const char *owner, const char *run_id,
			     struct gh_run_view *out, struct gh_err *e)
{
	struct gh_run_row row;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	rc = gh_store_run_get(app->store, owner, run_id, &row, e);
	if (rc != GH_OK)
		return rc;
	rc = view_from_row(app, &row, out, e);
	gh_run_row_clear(&row);
	if (rc != GH_OK) {
		gh_run_view_clear(out);
		return rc;
	}
	out->here = in_flight(NULL, out->id, 0);
	return GH_OK;
}

int gh_run_in_flight(const char *owner, const char *run_id)
{
	return in_flight(owner, run_id, 0);
}

enum gh_code gh_run_find_call(struct gh_app *app, const char *owner, const char *tool_call_id,
			      char run_id[GH_ID_MAX], int *answered, struct gh_err *e)
{
	char rid[48], status[16];
	enum gh_code rc;

	rc = gh_store_tool_call_find(app->store, owner, tool_call_id ? tool_call_id : "", rid,
				     status, e);
	if (rc != GH_OK)
		return rc;
	gh_strlcpy(run_id, rid, GH_ID_MAX);
	*answered = strcmp(status, "pending") != 0;
	return GH_OK;
}

enum gh_code gh_run_agent(struct gh_app *app, const struct gh_principal *who, const char *id,
			  const struct gh_agent_conf **out, struct gh_err *e)
{
	struct gh_decision d;

	*out = gh_config_agent(gh_app_cfg(app), id);
	if (!*out)
		return gh_err_set(e, GH_E_NOTFOUND, "no agent \"%s\"", id);
	gh_policy_agent(who->policy, (*out)->id, &d);
	if (d.verdict != GH_V_ALLOW)
		return gh_err_set(e, GH_E_FORBIDDEN, "agent \"%s\" refused: %s", (*out)->id,
				  d.rule);
	return GH_OK;
}

/* --------------------------------------------------------------- cancel */

enum gh_code gh_run_cancel(struct gh_app *app, const char *owner, const char *run_id,
			   enum gh_cancel_outcome *how, struct gh_err *e)
{
	static const enum gh_run_status waits[] = {GH_RUN_WAITING, GH_RUN_SUSPENDED};
	struct gh_run_view v;
	enum gh_code rc;
	size_t i;

	/* a request of this process runs it: it stops at its next step */
	if (in_flight(owner, run_id, 1)) {
		*how = GH_CANCEL_SIGNALLED;
		return GH_OK;
	}
	if ((rc = gh_run_view_get(app, owner, run_id, &v, e)) != GH_OK)
		return rc;
	if (v.status == GH_RUN_RUNNING) {
		/* a continuation in the background or elsewhere */
		gh_run_view_clear(&v);
		return gh_err_set(e, GH_E_CONFLICT, "run %s is being continued where it cannot be "
				  "stopped", run_id);
	}
	if (gh_run_status_final(v.status)) {
		rc = gh_err_set(e, GH_E_CONFLICT, "run %s is %s", run_id,
				gh_run_status_name(v.status));
		gh_run_view_clear(&v);
		return rc;
	}
	gh_run_view_clear(&v);
	for (i = 0, rc = GH_E_CONFLICT; i < GH_ARRAY_LEN(waits) && rc == GH_E_CONFLICT; i++)
		rc = gh_store_run_transition(app->store, run_id, gh_run_status_name(waits[i]),
					     gh_run_status_name(GH_RUN_CANCELLED), e);
	if (rc != GH_OK)
		return rc;
	gh_run_notify(app, run_id);
	*how = GH_CANCEL_DONE;
	return GH_OK;
}

/* ----------------------------------------------------------------- wait */

/* Whether the wait is over: for IDLE, no request of this process holds
 * the run (then *out is read, when it is stored); for SETTLED, the stored
 * run is neither running nor suspended. */
static int until_met(struct gh_app *app, const char *owner, const char *run_id,
		     enum gh_run_until until, struct gh_run_view *out, enum gh_code *rc,
		     struct gh_err *e)
{
	if (until == GH_UNTIL_IDLE) {
		if (in_flight(owner, run_id, 0))
			return 0;
		*rc = gh_run_view_get(app, owner, run_id, out, e);
		return 1;
	}
	*rc = gh_run_view_get(app, owner, run_id, out, e);
	return *rc != GH_OK || (out->status != GH_RUN_RUNNING && out->status != GH_RUN_SUSPENDED);
}

enum gh_code gh_run_wait(struct gh_app *app, const char *owner, const char *run_id,
			 enum gh_run_until until, int64_t wait_ms, int (*gone)(void *ud),
			 void *ud, struct gh_run_view *out, struct gh_err *e)
{
	int64_t deadline = gh_mono_ns() + wait_ms * 1000000, last_read;
	struct gh_hub_sub *sub = NULL;
	char topic[96], *type, *data;
	enum gh_code rc = GH_OK;

	memset(out, 0, sizeof(*out));
	/* subscribe before reading, so no change falls in between */
	gh_hub_state_topic(run_id, topic, sizeof(topic));
	if (app->hub)
		sub = gh_hub_subscribe(app->hub, topic);
	for (;;) {
		gh_run_view_clear(out);
		if (until_met(app, owner, run_id, until, out, &rc, e))
			break;
		last_read = gh_mono_ns();
		rc = GH_OK;
		for (;;) {
			int changed = 0;

			if (gh_mono_ns() >= deadline) {
				rc = gh_err_set(e, GH_E_TIMEOUT, "run %s is still %s", run_id,
						gh_run_status_name(out->status));
				break;
			}
			if (gone && gone(ud)) {
				rc = gh_err_set(e, GH_E_CANCELLED, "the client went away");
				break;
			}
			if (sub) {
				int n = gh_hub_next(sub, WAIT_TICK_MS, &type, &data);

				changed = n != 0;
				if (n == 1) {
					free(type);
					free(data);
				}
			} else {
				struct timespec ts = {0, WAIT_TICK_MS * 1000000L};

				nanosleep(&ts, NULL);
			}
			if (changed || gh_mono_ns() - last_read >= (int64_t)WAIT_RESYNC_MS * 1000000)
				break;
		}
		if (rc != GH_OK)
			break;
	}
	if (sub)
		gh_hub_unsubscribe(app->hub, sub);
	return rc;
}

enum gh_code gh_run_view_find(struct gh_app *app, const char *owner, const char *name,
			      struct gh_run_view *out, struct gh_err *e)
{
	char named[GH_ID_MAX];
	enum gh_code rc = gh_run_view_get(app, owner, name, out, e);

	if (rc == GH_E_NOTFOUND && owner) {
		gh_run_named_id(owner, name, named);
		rc = gh_run_view_get(app, owner, named, out, e);
	}
	if (rc == GH_E_NOTFOUND)
		gh_err_set(e, GH_E_NOTFOUND, "no run %s", name);
	return rc;
}
