/*
 * store_a2a.h - A2A tasks in the store (migrations/sqlite/0004_a2a.sql).
 *
 * A task is the A2A face of one run: its state, the status message, the
 * history of A2A messages and the artifacts, all kept as A2A 1.0 JSON. Part
 * of the store module (the only code that speaks SQL); every function is
 * thread-safe like the rest of store.h.
 */
#ifndef GH_STORE_A2A_H
#define GH_STORE_A2A_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "store.h"
#include "util.h"

/* Task states as stored (A2A 0.3 spelling; 1.0 adds TASK_STATE_ and
 * upper-cases). */
#define GH_A2A_WORKING "working"
#define GH_A2A_INPUT_REQUIRED "input-required"
#define GH_A2A_COMPLETED "completed"
#define GH_A2A_FAILED "failed"
#define GH_A2A_CANCELED "canceled"

struct gh_a2a_task {
	char id[GH_ID_MAX];
	char context_id[GH_NAME_MAX + 1];
	char agent_id[GH_NAME_MAX + 1];
	char owner[GH_NAME_MAX + 1];
	char key_id[GH_ID_MAX];
	char run_id[GH_ID_MAX];
	char state[16];
	cJSON *status_message;    /* owned, or NULL */
	cJSON *history;           /* owned array */
	cJSON *artifacts;         /* owned array */
	int64_t created_at;
	int64_t updated_at;
};

/* Frees what t owns and zeroes it. NULL is a no-op. */
void gh_a2a_task_clear(struct gh_a2a_task *t);

/* Inserts t (history and artifacts must be arrays). GH_E_CONFLICT when the
 * id exists. */
enum gh_code gh_store_a2a_task_insert(struct gh_store *s, const struct gh_a2a_task *t,
				      struct gh_err *e);

/* The task id of owner served by agent_id. GH_E_NOTFOUND when absent, of
 * another owner or of another agent (never told apart). out is filled and
 * owned by the caller (gh_a2a_task_clear). */
enum gh_code gh_store_a2a_task_get(struct gh_store *s, const char *owner, const char *agent_id,
				   const char *id, struct gh_a2a_task *out, struct gh_err *e);

/* Writes t's state, run id, status message, history, artifacts and
 * updated_at over the stored task (t->id, t->owner). When expect_state is
 * not NULL the stored state must still be expect_state: GH_E_CONFLICT
 * (naming the state it is in) otherwise, and nothing is written.
 * GH_E_NOTFOUND when the task is gone. */
enum gh_code gh_store_a2a_task_save(struct gh_store *s, const struct gh_a2a_task *t,
				    const char *expect_state, struct gh_err *e);

#endif
