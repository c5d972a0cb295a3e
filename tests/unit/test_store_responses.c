/*
 * test_store_responses.c - stored Responses API responses
 * (store_responses.c): kept whole, read back only by the key that made
 * them, ids unique.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "store_responses.h"
#include "t.h"
#include "t_store.h"

static void test_insert_get_per_key(void)
{
	struct t_store t;
	struct gh_stored_response r, got;
	struct gh_err e;
	char *s;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&r, 0, sizeof(r));
	gh_strlcpy(r.id, "resp_1", sizeof(r.id));
	gh_strlcpy(r.owner, "alice", sizeof(r.owner));
	gh_strlcpy(r.key_id, "key_a", sizeof(r.key_id));
	gh_strlcpy(r.agent_id, "assistant", sizeof(r.agent_id));
	gh_strlcpy(r.run_id, "run_1", sizeof(r.run_id));
	r.body = cJSON_Parse("{\"id\":\"resp_1\",\"output\":[]}");
	r.conversation = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
	r.created_at = 1000;
	T_EQ_INT(gh_store_response_insert(t.s, &r, &e), GH_OK);
	T_EQ_INT(gh_store_response_insert(t.s, &r, &e), GH_E_CONFLICT);

	T_EQ_INT(gh_store_response_get(t.s, "key_a", "resp_1", &got, &e), GH_OK);
	T_EQ_STR(got.owner, "alice");
	T_EQ_STR(got.run_id, "run_1");
	T_EQ_STR(got.previous_id, "");
	T_EQ_INT(got.created_at, 1000);
	s = gh_json_dump(got.conversation);
	T_EQ_STR(s, "[{\"role\":\"user\",\"content\":\"hi\"}]");
	free(s);
	T_ASSERT(cJSON_Compare(got.body, r.body, 1));
	gh_stored_response_clear(&got);

	/* another key, even of the same owner, does not see it */
	T_EQ_INT(gh_store_response_get(t.s, "key_b", "resp_1", &got, &e), GH_E_NOTFOUND);
	T_ASSERT(got.body == NULL && got.conversation == NULL);
	T_EQ_INT(gh_store_response_get(t.s, "key_a", "resp_2", &got, &e), GH_E_NOTFOUND);

	/* a body that is not an object is refused before the database */
	cJSON_Delete(r.body);
	r.body = cJSON_CreateArray();
	gh_strlcpy(r.id, "resp_3", sizeof(r.id));
	T_EQ_INT(gh_store_response_insert(t.s, &r, &e), GH_E_INTERNAL);
	cJSON_Delete(r.body);
	cJSON_Delete(r.conversation);
	t_store_close(&t);
}

T_MAIN(T(test_insert_get_per_key))
