/*
 * store_responses.h - stored responses of the OpenAI Responses API surface
 * (migrations/sqlite/0010_responses.sql).
 *
 * A response is kept as the Response object it was answered with and the
 * conversation it ended (CoreMessages: every input item up to it and its
 * own output), so a later request may name it as previous_response_id. A
 * response belongs to the key that made it. Part of the store module (the
 * only code that speaks SQL); thread-safe like the rest of store.h.
 */
#ifndef GH_STORE_RESPONSES_H
#define GH_STORE_RESPONSES_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "store.h"
#include "util.h"

struct gh_stored_response {
	char id[GH_ID_MAX];
	char owner[GH_NAME_MAX + 1];
	char key_id[GH_ID_MAX];
	char agent_id[GH_NAME_MAX + 1];
	char run_id[GH_ID_MAX];
	char previous_id[GH_ID_MAX];      /* "" when none */
	cJSON *body;                      /* owned: the Response object */
	cJSON *conversation;              /* owned: array of CoreMessages */
	int64_t created_at;               /* Unix ms */
};

/* Frees what r owns and zeroes it. NULL is a no-op. */
void gh_stored_response_clear(struct gh_stored_response *r);

/* Inserts r (body an object, conversation an array; both borrowed).
 * GH_E_CONFLICT when the id exists. */
enum gh_code gh_store_response_insert(struct gh_store *s, const struct gh_stored_response *r,
				      struct gh_err *e);

/* The response id made by key_id. GH_E_NOTFOUND when absent or another
 * key's (never told apart). out is filled and owned by the caller
 * (gh_stored_response_clear). */
enum gh_code gh_store_response_get(struct gh_store *s, const char *key_id, const char *id,
				   struct gh_stored_response *out, struct gh_err *e);

#endif
