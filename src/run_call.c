/*
 * run_call.c - calls a caller makes itself (MCP tools/call): finding the
 * earlier run of the same call after an approval, and collecting its
 * result exactly once. See run.h ("calls a caller makes itself").
 *
 * Such a run holds one call. When the call waits on an approval, the run
 * is suspended like any other; the resumer (or the caller, answering its
 * own approval) settles it, and the run then waits for its caller to
 * collect the result: the move waiting -> completed in the store is the
 * one collection. Thread-safe; runs on the calling thread.
 */
#include "run.h"

#include <string.h>

#include "approvals.h"
#include "run_int.h"
#include "store.h"

struct find_arg {
	struct gh_app *app;
	const struct gh_principal *who;
	const char *tool;
	char hash[65];
	char run_id[GH_ID_MAX];
	char approval_id[GH_ID_MAX];
	int found;
};

/* 1 when the approval's run is a caller's own call that still has
 * something to give (waiting on the approval, running it, or its result
 * uncollected). */
static int still_open(struct find_arg *f, const struct gh_approval *a)
{
	struct gh_run_view v;
	struct gh_err e;
	int open;

	if (gh_run_view_get(f->app, a->owner, a->run_id, &v, &e) != GH_OK)
		return 0;
	open = v.direct && (v.status == GH_RUN_SUSPENDED || v.status == GH_RUN_RUNNING ||
			    v.status == GH_RUN_WAITING);
	gh_run_view_clear(&v);
	return open;
}

static int find_fn(void *ud, const struct gh_approval *a)
{
	struct find_arg *f = ud;

	if (strcmp(a->key_id, f->who->key.id) || strcmp(a->tool_name, f->tool) ||
	    strcmp(a->args_sha256, f->hash) || !still_open(f, a))
		return 0;
	gh_strlcpy(f->run_id, a->run_id, sizeof(f->run_id));
	gh_strlcpy(f->approval_id, a->id, sizeof(f->approval_id));
	f->found = 1;
	return 1;
}

enum gh_code gh_run_call_find(struct gh_app *app, const struct gh_principal *who,
			      const char *tool, const cJSON *args, char run_id[GH_ID_MAX],
			      char approval_id[GH_ID_MAX], struct gh_err *e)
{
	/* the owner's newest decisions are enough: an approval's call is
	 * repeated soon after it is decided, not hundreds of decisions later */
	static const char *const statuses[] = {"pending", "approved"};
	struct find_arg f;
	size_t i;
	enum gh_code rc;

	memset(&f, 0, sizeof(f));
	f.app = app;
	f.who = who;
	f.tool = tool;
	gh_approval_args_hash(args, f.hash);
	run_id[0] = approval_id[0] = '\0';
	for (i = 0; i < GH_ARRAY_LEN(statuses) && !f.found; i++) {
		rc = gh_store_approval_list(app->store, statuses[i], who->key.owner, 200, find_fn, &f,
					    e);
		if (rc != GH_OK)
			return rc;
	}
	if (!f.found)
		return gh_err_set(e, GH_E_NOTFOUND, "no earlier call to %s with these arguments", tool);
	gh_strlcpy(run_id, f.run_id, GH_ID_MAX);
	gh_strlcpy(approval_id, f.approval_id, GH_ID_MAX);
	return GH_OK;
}

enum gh_code gh_run_call_collect(struct gh_app *app, const char *owner, const char *run_id,
				 struct gh_run_view *out, struct gh_err *e)
{
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	rc = gh_run_view_get(app, owner, run_id, out, e);
	if (rc != GH_OK)
		return rc;
	if (!out->direct) {
		gh_run_view_clear(out);
		return gh_err_set(e, GH_E_CONFLICT, "run %s is not a call of its own", run_id);
	}
	gh_run_view_clear(out);
	rc = gh_store_run_transition(app->store, run_id, gh_run_status_name(GH_RUN_WAITING),
				     gh_run_status_name(GH_RUN_COMPLETED), e);
	if (rc == GH_E_CONFLICT)
		return gh_err_set(e, GH_E_CONFLICT, "the result of run %s was collected already",
				  run_id);
	if (rc != GH_OK)
		return rc;
	gh_run_notify(app, run_id);
	return gh_run_view_get(app, owner, run_id, out, e);
}
