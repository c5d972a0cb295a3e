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

void gh_a2a_task_clear(struct gh_a2a_task *t)
{
	if (!t)
		return;
	cJSON_Delete(t->status_message);
	cJSON_Delete(t->history);
	cJSON_Delete(t->artifacts);
	memset(t, 0, sizeof(*t));
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

/* ---------------------------------------------------------------- insert */

struct insert_arg {
	const struct gh_a2a_task *t;
	const struct task_json *j;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	const struct insert_arg *a = arg;
	const struct gh_a2a_task *t = a->t;
	sqlite3_stmt *st = store_stmt(w, "INSERT INTO a2a_tasks (id, context_id, agent_id, owner, "
					 "key_id, run_id, state, status_message, history, "
					 "artifacts, created_at, updated_at) "
					 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", e);

	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, t->id);
	store_bind_text(st, 2, t->context_id);
	store_bind_text(st, 3, t->agent_id);
	store_bind_text(st, 4, t->owner);
	store_bind_text(st, 5, t->key_id);
	store_bind_text(st, 6, t->run_id);
	store_bind_text(st, 7, t->state);
	store_bind_text(st, 8, a->j->status_message);
	store_bind_text(st, 9, a->j->history);
	store_bind_text(st, 10, a->j->artifacts);
	sqlite3_bind_int64(st, 11, t->created_at);
	sqlite3_bind_int64(st, 12, t->updated_at);
	if (sqlite3_step(st) != SQLITE_DONE) {
		enum gh_code rc = store_fail(w, "saving an a2a task", e);

		if (rc == GH_E_CONFLICT)
			gh_err_set(e, GH_E_CONFLICT, "a2a task %s already exists", t->id);
		return rc;
	}
	return GH_OK;
}

enum gh_code gh_store_a2a_task_insert(struct gh_store *s, const struct gh_a2a_task *t,
				      struct gh_err *e)
{
	struct task_json j;
	struct insert_arg a = {t, &j};
	enum gh_code rc = task_json_make(t, &j, e);

	if (rc != GH_OK)
		return rc;
	rc = store_write(s, insert_job, &a, e);
	task_json_free(&j);
	return rc;
}

/* ------------------------------------------------------------------- get */

enum gh_code gh_store_a2a_task_get(struct gh_store *s, const char *owner, const char *agent_id,
				   const char *id, struct gh_a2a_task *out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT id, context_id, agent_id, owner, key_id, run_id, "
					 "state, status_message, history, artifacts, created_at, "
					 "updated_at FROM a2a_tasks "
					 "WHERE id = ? AND owner = ? AND agent_id = ?", e);
	enum gh_code rc = GH_OK;
	int src;

	memset(out, 0, sizeof(*out));
	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	store_bind_text(st, 1, id);
	store_bind_text(st, 2, owner);
	store_bind_text(st, 3, agent_id);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		store_col_copy(st, 0, out->id, sizeof(out->id));
		store_col_copy(st, 1, out->context_id, sizeof(out->context_id));
		store_col_copy(st, 2, out->agent_id, sizeof(out->agent_id));
		store_col_copy(st, 3, out->owner, sizeof(out->owner));
		store_col_copy(st, 4, out->key_id, sizeof(out->key_id));
		store_col_copy(st, 5, out->run_id, sizeof(out->run_id));
		store_col_copy(st, 6, out->state, sizeof(out->state));
		out->status_message = store_col_json(st, 7);
		out->history = store_col_json(st, 8);
		out->artifacts = store_col_json(st, 9);
		out->created_at = sqlite3_column_int64(st, 10);
		out->updated_at = sqlite3_column_int64(st, 11);
		if (!cJSON_IsArray(out->history) || !cJSON_IsArray(out->artifacts) ||
		    (sqlite3_column_type(st, 7) != SQLITE_NULL && !out->status_message)) {
			gh_a2a_task_clear(out);
			rc = gh_err_set(e, GH_E_IO, "database: a2a task %s is damaged", id);
		}
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "task %s not found", id);
	} else {
		rc = store_fail(c, "reading an a2a task", e);
	}
	store_reader_put(s, c);
	return rc;
}

/* ------------------------------------------------------------------ save */

struct save_arg {
	const struct gh_a2a_task *t;
	const struct task_json *j;
	const char *expect;
};

static enum gh_code save_job(struct gh_store *s, struct store_conn *w, void *arg,
			     struct gh_err *e)
{
	const struct save_arg *a = arg;
	const struct gh_a2a_task *t = a->t;
	sqlite3_stmt *st;
	char state[16];
	int src;

	st = store_stmt(w, "SELECT state FROM a2a_tasks WHERE id = ? AND owner = ?", e);
	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, t->id);
	store_bind_text(st, 2, t->owner);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		sqlite3_reset(st);
		return gh_err_set(e, GH_E_NOTFOUND, "task %s not found", t->id);
	}
	if (src != SQLITE_ROW)
		return store_fail(w, "reading an a2a task", e);
	store_col_copy(st, 0, state, sizeof(state));
	sqlite3_reset(st);
	if (a->expect && strcmp(state, a->expect))
		return gh_err_set(e, GH_E_CONFLICT, "task %s is %s, not %s", t->id, state,
				  a->expect);
	st = store_stmt(w, "UPDATE a2a_tasks SET state = ?, run_id = ?, status_message = ?, "
			   "history = ?, artifacts = ?, updated_at = ? WHERE id = ? AND owner = ?",
			e);
	if (!st)
		return GH_E_IO;
	store_bind_text(st, 1, t->state);
	store_bind_text(st, 2, t->run_id);
	store_bind_text(st, 3, a->j->status_message);
	store_bind_text(st, 4, a->j->history);
	store_bind_text(st, 5, a->j->artifacts);
	sqlite3_bind_int64(st, 6, t->updated_at);
	store_bind_text(st, 7, t->id);
	store_bind_text(st, 8, t->owner);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "saving an a2a task", e);
	return GH_OK;
}

enum gh_code gh_store_a2a_task_save(struct gh_store *s, const struct gh_a2a_task *t,
				    const char *expect_state, struct gh_err *e)
{
	struct task_json j;
	struct save_arg a = {t, &j, expect_state};
	enum gh_code rc = task_json_make(t, &j, e);

	if (rc != GH_OK)
		return rc;
	rc = store_write(s, save_job, &a, e);
	task_json_free(&j);
	return rc;
}
