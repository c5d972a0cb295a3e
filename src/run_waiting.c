/*
 * run_waiting.c - the runs a caller can pick up again: those of its key
 * that wait on a person's approval or on client tool results (Mastra's
 * listSuspendedRuns). See run.h. Thread-safe; runs on the calling thread.
 */
#include "run.h"

#include <stdlib.h>
#include <string.h>

#include "store.h"

struct ids {
	char (*v)[GH_ID_MAX];
	size_t n, cap;
};

static int collect(void *ud, const char *run_id)
{
	struct ids *x = ud;

	if (x->n >= x->cap)
		return 1;
	gh_strlcpy(x->v[x->n++], run_id, GH_ID_MAX);
	return 0;
}

enum gh_code gh_run_list_waiting(struct gh_app *app, const struct gh_principal *who,
				 const struct gh_run_waiting_filter *f,
				 int (*fn)(void *ud, const struct gh_run_view *v), void *ud,
				 struct gh_err *e)
{
	struct gh_store_runs_filter sf = {
		.owner = who->key.owner, .key_id = who->key.id, .agent_id = f->agent_id,
		.thread_id = f->thread_id, .resource_id = f->resource_id,
		.from_ms = f->from_ms, .to_ms = f->to_ms, .limit = GH_RUN_WAITING_MAX,
	};
	struct ids x = {NULL, 0, GH_RUN_WAITING_MAX};
	enum gh_code rc;
	size_t i;

	x.v = calloc(x.cap, sizeof(*x.v));
	if (!x.v)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = gh_store_runs_waiting(app->store, &sf, collect, &x, e);
	for (i = 0; rc == GH_OK && i < x.n; i++) {
		struct gh_run_view v;
		struct gh_err ve;

		/* a run that moved on since it was listed is no longer waiting */
		if (gh_run_view_get(app, who->key.owner, x.v[i], &v, &ve) != GH_OK)
			continue;
		if ((v.status == GH_RUN_SUSPENDED || v.status == GH_RUN_WAITING) && fn(ud, &v)) {
			gh_run_view_clear(&v);
			break;
		}
		gh_run_view_clear(&v);
	}
	free(x.v);
	return rc;
}
