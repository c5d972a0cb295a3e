/*
 * store_a2a.c - A2A tasks; see store_a2a.h. Writes go through the writer
 * thread (store_write), reads through the reader pool, as in store.c.
 */
#include "store_int.h"
#include "store_a2a.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

#define T(KIND, FIELD) STORE_COL(KIND, struct gh_a2a_task, FIELD)
static const struct store_col task_cols[] = {
	T(TEXT, id), T(TEXT, context_id), T(TEXT, agent_id), T(TEXT, owner), T(TEXT, key_id),
	T(TEXT, run_id), T(TEXT, state), T(JSON, status_message), T(JSON, history),
	T(JSON, artifacts), T(INT, created_at), T(INT, updated_at),
};
#undef T

void gh_a2a_task_clear(struct gh_a2a_task *t)
{
	store_cols_clear(task_cols, GH_ARRAY_LEN(task_cols), t, sizeof(*t));
}

/* The three JSON columns of a task, serialised for binding. */
struct task_json {
	char *status_message;     /* NULL when the task has none */
	char *history;
	char *artifacts;
};

static void task_json_free(struct task_json *j)
{
	free(j->status_message);
	free(j->history);
	free(j->artifacts);
}

static enum gh_code task_json_make(const struct gh_a2a_task *t, struct task_json *j,
				   struct gh_err *e)
{
	memset(j, 0, sizeof(*j));
	if (!cJSON_IsArray(t->history) || !cJSON_IsArray(t->artifacts))
		return gh_err_set(e, GH_E_INTERNAL, "a2a task %s: history and artifacts must be "
				  "arrays", t->id);
	j->history = gh_json_dump(t->history);
	j->artifacts = gh_json_dump(t->artifacts);
	if (t->status_message)
		j->status_message = gh_json_dump(t->status_message);
	if (!j->history || !j->artifacts || (t->status_message && !j->status_message)) {
		task_json_free(j);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	return GH_OK;
}

/* What an insert or a save job writes: the task, its JSON columns, and
 * (save) the state it must be in. */
struct task_arg {
	const struct gh_a2a_task *t;
	struct task_json j;
	const char *expect;
};

/* Runs job on t with its JSON columns serialised for it. */
static enum gh_code task_write(struct gh_store *s, store_write_fn job, const struct gh_a2a_task *t,
			       const char *expect, struct gh_err *e)
{
	struct task_arg a = {.t = t, .expect = expect};
	enum gh_code rc = task_json_make(t, &a.j, e);

	if (rc != GH_OK)
		return rc;
	rc = store_write(s, job, &a, e);
	task_json_free(&a.j);
	return rc;
}

/* ---------------------------------------------------------------- insert */

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	const struct task_arg *a = arg;
	const struct gh_a2a_task *t = a->t;
	enum gh_code rc;

	(void)s;
	rc = store_exec(w, "INSERT INTO a2a_tasks (id, context_id, agent_id, owner, key_id, "
			   "run_id, state, status_message, history, artifacts, created_at, "
			   "updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
			STORE_ARGS(STORE_TEXT(t->id), STORE_TEXT(t->context_id),
				   STORE_TEXT(t->agent_id), STORE_TEXT(t->owner),
				   STORE_TEXT(t->key_id), STORE_TEXT(t->run_id),
				   STORE_TEXT(t->state), STORE_TEXT(a->j.status_message),
				   STORE_TEXT(a->j.history), STORE_TEXT(a->j.artifacts),
				   STORE_INT(t->created_at), STORE_INT(t->updated_at)),
			"saving an a2a task", NULL, e);
	if (rc == GH_E_CONFLICT)
		gh_err_set(e, GH_E_CONFLICT, "a2a task %s already exists", t->id);
	return rc;
}

enum gh_code gh_store_a2a_task_insert(struct gh_store *s, const struct gh_a2a_task *t,
				      struct gh_err *e)
{
	return task_write(s, insert_job, t, NULL, e);
}

/* ------------------------------------------------------------------- get */

static int task_row(struct store_row *sr, void *ud)
{
	struct gh_a2a_task *out = ud;

	store_cols_read(sr, task_cols, GH_ARRAY_LEN(task_cols), out);
	if (!cJSON_IsArray(out->history) || !cJSON_IsArray(out->artifacts) ||
	    (!store_col_isnull(sr, 7) && !out->status_message)) {
		gh_a2a_task_clear(out);
		return -1;
	}
	return 0;
}

enum gh_code gh_store_a2a_task_get(struct gh_store *s, const char *owner, const char *agent_id,
				   const char *id, struct gh_a2a_task *out, struct gh_err *e)
{
	return store_get(s, "SELECT id, context_id, agent_id, owner, key_id, run_id, state, "
			    "status_message, history, artifacts, created_at, updated_at "
			    "FROM a2a_tasks WHERE id = ? AND owner = ? AND agent_id = ?",
			 STORE_ARGS(STORE_TEXT(id), STORE_TEXT(owner), STORE_TEXT(agent_id)),
			 task_row, out, sizeof(*out), "reading an a2a task", e,
			 "task %s not found", id);
}

/* ------------------------------------------------------------------ save */

static enum gh_code save_job(struct gh_store *s, struct store_conn *w, void *arg,
			     struct gh_err *e)
{
	const struct task_arg *a = arg;
	const struct gh_a2a_task *t = a->t;
	char state[16];
	struct store_buf b = {state, sizeof(state)};
	int seen = 0;
	enum gh_code rc;

	(void)s;
	rc = store_rows(w, "SELECT state FROM a2a_tasks WHERE id = ? AND owner = ?",
			STORE_ARGS(STORE_TEXT(t->id), STORE_TEXT(t->owner)), 1, store_row_text, &b,
			&seen, "reading an a2a task", e);
	if (rc != GH_OK)
		return rc;
	if (seen == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "task %s not found", t->id);
	if (a->expect && strcmp(state, a->expect))
		return gh_err_set(e, GH_E_CONFLICT, "task %s is %s, not %s", t->id, state,
				  a->expect);
	return store_exec(w, "UPDATE a2a_tasks SET state = ?, run_id = ?, status_message = ?, "
			     "history = ?, artifacts = ?, updated_at = ? WHERE id = ? AND owner = ?",
			  STORE_ARGS(STORE_TEXT(t->state), STORE_TEXT(t->run_id),
				     STORE_TEXT(a->j.status_message), STORE_TEXT(a->j.history),
				     STORE_TEXT(a->j.artifacts), STORE_INT(t->updated_at),
				     STORE_TEXT(t->id), STORE_TEXT(t->owner)),
			  "saving an a2a task", NULL, e);
}

enum gh_code gh_store_a2a_task_save(struct gh_store *s, const struct gh_a2a_task *t,
				    const char *expect_state, struct gh_err *e)
{
	return task_write(s, save_job, t, expect_state, e);
}
