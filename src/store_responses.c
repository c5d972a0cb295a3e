/*
 * store_responses.c - stored Responses API responses; see
 * store_responses.h. Writes go through the writer thread (store_write),
 * reads through the reader pool, as in store.c.
 */
#include "store_int.h"
#include "store_responses.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

#define R(KIND, FIELD) STORE_COL(KIND, struct gh_stored_response, FIELD)
static const struct store_col response_cols[] = {
	R(TEXT, id), R(TEXT, owner), R(TEXT, key_id), R(TEXT, agent_id), R(TEXT, run_id),
	R(TEXT, previous_id), R(JSON, body), R(JSON, conversation), R(INT, created_at),
};
#undef R

void gh_stored_response_clear(struct gh_stored_response *r)
{
	store_cols_clear(response_cols, GH_ARRAY_LEN(response_cols), r, sizeof(*r));
}

struct insert_arg {
	const struct gh_stored_response *r;
	const char *body;
	const char *conversation;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	const struct insert_arg *a = arg;
	const struct gh_stored_response *r = a->r;
	enum gh_code rc;

	(void)s;
	rc = store_exec(w, "INSERT INTO responses (id, owner, key_id, agent_id, run_id, "
			   "previous_id, body, conversation, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
			STORE_ARGS(STORE_TEXT(r->id), STORE_TEXT(r->owner), STORE_TEXT(r->key_id),
				   STORE_TEXT(r->agent_id), STORE_TEXT(r->run_id),
				   STORE_TEXT(r->previous_id[0] ? r->previous_id : NULL),
				   STORE_TEXT(a->body), STORE_TEXT(a->conversation),
				   STORE_INT(r->created_at)),
			"saving a response", NULL, e);
	if (rc == GH_E_CONFLICT)
		gh_err_set(e, GH_E_CONFLICT, "response %s already exists", r->id);
	return rc;
}

enum gh_code gh_store_response_insert(struct gh_store *s, const struct gh_stored_response *r,
				      struct gh_err *e)
{
	struct insert_arg a = {r, NULL, NULL};
	char *body = NULL, *conv = NULL;
	enum gh_code rc;

	if (!cJSON_IsObject(r->body) || !cJSON_IsArray(r->conversation))
		return gh_err_set(e, GH_E_INTERNAL, "response %s: body must be an object and "
				  "conversation an array", r->id);
	body = gh_json_dump(r->body);
	conv = gh_json_dump(r->conversation);
	if (!body || !conv) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	a.body = body;
	a.conversation = conv;
	rc = store_write(s, insert_job, &a, e);
out:
	free(body);
	free(conv);
	return rc;
}

static int response_row(struct store_row *sr, void *ud)
{
	struct gh_stored_response *out = ud;

	store_cols_read(sr, response_cols, GH_ARRAY_LEN(response_cols), out);
	if (!cJSON_IsObject(out->body) || !cJSON_IsArray(out->conversation)) {
		gh_stored_response_clear(out);
		return -1;
	}
	return 0;
}

enum gh_code gh_store_response_get(struct gh_store *s, const char *key_id, const char *id,
				   struct gh_stored_response *out, struct gh_err *e)
{
	return store_get(s, "SELECT id, owner, key_id, agent_id, run_id, previous_id, body, "
			    "conversation, created_at FROM responses WHERE id = ? AND key_id = ?",
			 STORE_ARGS(STORE_TEXT(id), STORE_TEXT(key_id)), response_row, out,
			 sizeof(*out), "reading a response", e, "response %s not found", id);
}
