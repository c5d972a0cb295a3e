/*
 * tool_memory.c - the built-in memory tools: memory_save, memory_search,
 * memory_delete and working_memory_update, each scoped to the caller's
 * (owner, resource). Thread-safe (all state is in the store). The tools
 * that write can run inside a store transaction, so their effect commits
 * with the audit row that records it.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "store.h"
#include "tools.h"

static cJSON *tool_error(const char *msg)
{
	cJSON *r = cJSON_CreateObject();

	if (r)
		cJSON_AddStringToObject(r, "error", msg);
	return r;
}

/* Tags arrive as an array of strings; stored space-separated. */
static char *join_tags(const cJSON *tags)
{
	struct gh_buf b;
	const cJSON *t;

	gh_buf_init(&b, 4096);
	cJSON_ArrayForEach(t, tags) {
		if (!cJSON_IsString(t))
			continue;
		if ((b.len && gh_buf_putc(&b, ' ') != GH_BUF_OK) ||
		    gh_buf_puts(&b, t->valuestring) != GH_BUF_OK)
			break;
	}
	return gh_buf_detach(&b);
}

int gh_tool_memory_writes(const char *name)
{
	return name && (!strcmp(name, "memory_save") || !strcmp(name, "memory_delete") ||
			!strcmp(name, "working_memory_update"));
}

enum gh_code gh_tool_memory_exec(struct gh_store *s, struct gh_store_tx *tx, const char *owner,
				 const char *resource, const char *name, const cJSON *args,
				 cJSON **result, int *is_error, struct gh_err *e)
{
	cJSON *r = NULL;
	enum gh_code rc = GH_OK;

	*result = NULL;
	*is_error = 0;
	if (!strcmp(name, "memory_save")) {
		const char *content = gh_json_str(args, "content");
		char *tags = join_tags(cJSON_GetObjectItemCaseSensitive(args, "tags"));
		int64_t id = 0;

		if (!tags)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		rc = tx ? gh_store_memory_save_tx(tx, owner, resource, content, tags, &id, e)
			: gh_store_memory_save(s, owner, resource, content, tags, &id, e);
		if (rc == GH_OK && (r = cJSON_CreateObject())) {
			cJSON_AddNumberToObject(r, "id", (double)id);
			cJSON_AddStringToObject(r, "content", content);
			cJSON_AddBoolToObject(r, "saved", 1);
		}
		free(tags);
	} else if (!strcmp(name, "memory_search")) {
		cJSON *found = NULL;
		int64_t limit = gh_json_int(args, "limit", 5);

		rc = gh_store_memory_search(s, owner, resource, gh_json_str(args, "query"),
					    (int)(limit < 1 ? 1 : limit > 20 ? 20 : limit), &found, e);
		if (rc == GH_OK) {
			r = cJSON_CreateObject();
			if (r)
				cJSON_AddItemToObject(r, "memories", found);
			else
				cJSON_Delete(found);
		}
	} else if (!strcmp(name, "memory_delete")) {
		int64_t id = gh_json_int(args, "id", 0);

		rc = tx ? gh_store_memory_delete_tx(tx, owner, resource, id, e)
			: gh_store_memory_delete(s, owner, resource, id, e);
		if (rc == GH_E_NOTFOUND) {
			*is_error = 1;
			r = tool_error("no memory with that id");
			rc = GH_OK;
		} else if (rc == GH_OK && (r = cJSON_CreateObject())) {
			cJSON_AddNumberToObject(r, "id", (double)id);
			cJSON_AddBoolToObject(r, "deleted", 1);
		}
	} else if (!strcmp(name, "working_memory_update")) {
		const char *content = gh_json_str(args, "content");

		rc = tx ? gh_store_working_memory_set_tx(tx, owner, resource, content, e)
			: gh_store_working_memory_set(s, owner, resource, content, e);
		if (rc == GH_OK && (r = cJSON_CreateObject()))
			cJSON_AddBoolToObject(r, "updated", 1);
	} else {
		return gh_err_set(e, GH_E_INTERNAL, "unknown memory tool %s", name);
	}
	if (rc != GH_OK)
		return rc;
	if (!r)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	*result = r;
	return GH_OK;
}
